// cuda_emu_sm90.h — the sm_90a part of the CPU emulator (cuda_emu.h):
// mbarriers, TMA tile loads and stores, wgmma.mma_async, named barriers,
// setmaxnreg and the async proxy's reads (what the Hopper templates use
// through codegen/templates/hopper.cuh under MC_EMULATE; the table is
// docs/codegen.md "The sm_90a emulator").
//
// Not a header of its own: cuda_emu.h includes it in its C++ part, after
// what it builds on (the scheduler: emu_park and the thread states up to
// EMU_DONE, extended here; the sanitizer: emu_shared / emu_global, the
// warp stamps emu_wstamp and what each warp has seen, emu_seen with the
// TMA unit as warps EMU_TMA_WARP.. (one per mbarrier, mod EMU_TMA_UNITS);
// the generic-proxy write counts
// emu_dyn_pw / emu_pclock that emu_shared keeps; shared addresses:
// emu_sptr) and before emu_run, which calls emu_sm90_block_begin and
// emu_sm90_block_end around every block. Its state is the block's:
// emu_sm90_block_begin resets it, emu_sm90_block_end reports what the
// block left pending (wgmma never waited for, named-barrier arrivals,
// setmaxnreg asking for more registers than the block holds). Limits: 64
// mbarriers, 16 named barriers, 8 warp groups, 64 wgmma operations in
// flight per warp group and 4 accumulator arrays per thread.
//
// Ordering for the race detector: besides __syncthreads and __syncwarp,
// an mbarrier phase, a named barrier and the TMA order accesses. Each warp
// knows, per other warp (and the TMA unit, a warp per mbarrier), the latest
// stamp that happens before its current interval (emu_seen); arriving on
// an mbarrier or a named barrier publishes the warp's knowledge and starts
// a new interval; completing a wait acquires what the barrier's completed
// phase published. A TMA copy writes shared memory under a fresh stamp of
// the TMA unit's warp of that mbarrier, published by complete_tx on it
// (copies completing on other mbarriers stay unordered). Granularity is
// the warp: an arrive by one lane orders its warp-mates too (a race between
// lanes of one warp across an mbarrier is missed).
//
// Asynchrony: TMA copies land at issue; wgmma.mma_async operations are
// queued per warp group and executed, in order, when wgmma.wait_group
// retires their commit group (shared operands read and accumulators
// written then), so a kernel that reads accumulators or overwrites an
// operand's shared memory before the wait sees wrong values or a race.
#ifndef MCIR_CUDA_EMU_SM90_H
#define MCIR_CUDA_EMU_SM90_H

#if !defined(MCIR_CUDA_EMU_H) || !defined(__cplusplus)
#error "cuda_emu_sm90.h is a part of cuda_emu.h (its C++ part): include cuda_emu.h"
#endif

/* Thread states beyond the scheduler's: parked at an mbarrier wait, a
 * named barrier, a wgmma.wait_group. */
enum { EMU_MBAR = EMU_DONE + 1, EMU_NAMED, EMU_WGROUP };

/* mbarriers: side table by shared address (the 8 bytes hold nothing) */
struct emu_mbar {
    uint32_t at;
    unsigned count, pending, phase;
    long long tx;
    uint32_t acc[EMU_GMAX], done[EMU_GMAX];   /* per warp of the cluster (emu_gw) */
};
enum { EMU_MAX_MBARS = 64 };

struct emu_nbar { unsigned arrived, count; uint32_t acc[EMU_GMAX]; };
struct emu_wgop {
    int n, tnsp_a, tnsp_b, scale_d, bf16, a_regs, group, issued;
    unsigned long long da, db;
    float *d[128];            /* the accumulators' shadow (emu_acc.shadow) */
    unsigned char acc[128];   /* per thread: its emu_acc slot */
    unsigned a[128][4];       /* the A fragments at issue */
    const unsigned *a_at[128];   /* where they live */
};
enum { EMU_WGQ = 64 };

/* A thread's accumulator arrays in flight: the registers (regs, n floats,
 * poisoned), their shadow and the ops not yet retired that use them. */
struct emu_acc {
    float *regs;
    int n, pending;
    float shadow[128];
};
enum { EMU_ACCS = 4 };
static const uint32_t EMU_POISON = 0x7fbadbadu;   /* a signalling NaN */

/* A block's sm_90a state (one per block of a cluster: emu_s9 is the
 * running block's, emu_bs.s90 every block's; a remote arrival or a
 * multicast copy reaches another block's mbarriers through it). */
struct emu_s90 {
    emu_mbar mbars[EMU_MAX_MBARS];
    int n_mbars;
    int wait_arg[1024];   /* per thread: mbarrier index / barrier id */
    unsigned wait_parity[1024];
    emu_nbar nbars[16];
    int warp_regs[32], regs_used;
    emu_wgop wgq[8][EMU_WGQ];
    int wg_head[8], wg_tail[8], wg_arrived[8], wg_keep[8];
    int th_issue[1024], th_group[1024];
    emu_acc accs[1024][EMU_ACCS];
};
#define emu_mbars (emu_s9->mbars)
#define emu_n_mbars (emu_s9->n_mbars)
#define emu_wait_arg (emu_s9->wait_arg)
#define emu_wait_parity (emu_s9->wait_parity)
#define emu_nbars (emu_s9->nbars)
#define emu_warp_regs (emu_s9->warp_regs)
#define emu_regs_used (emu_s9->regs_used)
#define emu_wgq (emu_s9->wgq)
#define emu_wg_head (emu_s9->wg_head)
#define emu_wg_tail (emu_s9->wg_tail)
#define emu_wg_arrived (emu_s9->wg_arrived)
#define emu_wg_keep (emu_s9->wg_keep)
#define emu_th_issue (emu_s9->th_issue)
#define emu_th_group (emu_s9->th_group)
#define emu_accs (emu_s9->accs)
/* Rank r's state: rank 0's a static of the module (a launch without a
 * cluster allocates nothing: a few MB calloc'd and faulted in per launch
 * cost test_codegen_emu's thousands of launches 6 %), the others' from the
 * heap for the launch */
static emu_s90 emu_s90_rank0;
static emu_s90 *emu_sm90_state_new(unsigned rank) {
    return rank ? (emu_s90 *)calloc(1, sizeof(emu_s90)) : &emu_s90_rank0;
}
static void emu_sm90_state_free(emu_s90 *st) {
    if (st != &emu_s90_rank0) free(st);
}

/* Joins what warp w (of the running block) knows into acc (release) and
 * starts w's next interval; acquiring: warp w of the cluster's block
 * rank learns what acc holds. */
static void emu_publish(uint32_t *acc, int w) {
    const int gw = emu_gw(emu_cl_rank, w);
    const uint32_t *row = &EMU_SEEN(gw, 0);
    for (int x = 0; x < emu_G; x++)
        if (row[x] > acc[x]) acc[x] = row[x];
    if (emu_wstamp[w] > acc[gw]) acc[gw] = emu_wstamp[w];
    emu_wstamp[w] = emu_clock++;
}
static void emu_acquire_at(unsigned rank, int w, const uint32_t *acc) {
    uint32_t *row = &EMU_SEEN(emu_gw(rank, w), 0);
    for (int x = 0; x < emu_G; x++)
        if (acc[x] > row[x]) row[x] = acc[x];
}
static void emu_acquire(int w, const uint32_t *acc) { emu_acquire_at(emu_cl_rank, w, acc); }

static emu_mbar *emu_mbar_find(const void *bar, bool create) {
    uint32_t at = __cvta_generic_to_shared(bar);
    if ((at & 7) != 0 && at != 0xffffffffu)
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): mbarrier at shared address %u is not 8-byte "
                   "aligned", emu_block.x, emu_cur_i, at);
    for (int i = 0; i < emu_n_mbars; i++)
        if (emu_mbars[i].at == at) return &emu_mbars[i];
    if (!create || emu_n_mbars == EMU_MAX_MBARS) {
        emu_report(EMU_FIND_INIT, "thread (block %u, thread %d) uses an mbarrier at shared address %u that "
                   "was never initialised", emu_block.x, emu_cur_i, at);
        return NULL;
    }
    emu_mbar *m = &emu_mbars[emu_n_mbars++];
    memset(m, 0, sizeof *m);
    m->at = at;
    return m;
}

/* The phase completes when every expected arrival came and the
 * transaction count is back to zero: waiters of that parity wake (m is an
 * mbarrier of the cluster's block rank: st its state, th its threads). */
static void emu_mbar_progress_in(emu_s90 *st, emu_thread *th, unsigned rank, emu_mbar *m) {
    if (m->pending != 0 || m->tx != 0) return;
    memcpy(m->done, m->acc, sizeof(uint32_t) * (size_t)emu_G);
    memset(m->acc, 0, sizeof(uint32_t) * (size_t)emu_G);
    m->phase++;
    m->pending = m->count;
    int mi = (int)(m - st->mbars);
    for (int t = 0; t < emu_nthreads; t++)
        if (th[t].state == EMU_MBAR && st->wait_arg[t] == mi && (m->phase & 1) != st->wait_parity[t]) {
            emu_acquire_at(rank, t >> 5, m->done);
            th[t].state = EMU_RUN;
        }
}
static void emu_mbar_progress(emu_mbar *m) { emu_mbar_progress_in(emu_s9, emu_threads, emu_cl_rank, m); }

/* The mbarrier at shared address at of the cluster's block rank: its
 * state (the running block's or a waiting one's) and threads, checked
 * (the rank inside the cluster, the block not exited); NULL on a finding. */
static emu_s90 *emu_cl_block_of(unsigned rank, emu_thread **th, const char *what) {
    if (rank == emu_cl_rank) {
        *th = emu_threads;
        return emu_s9;
    }
    if (rank >= emu_cl_n) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): %s cluster rank %u; the cluster has %u blocks",
                   emu_block.x, emu_cur_i, what, rank, emu_cl_n);
        return NULL;
    }
    emu_bs *b = &emu_cl_bs[rank];
    if (b->exited) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): %s block %u (cluster rank %u), which has exited "
                   "(a block waits for its peers' last arrivals and copies before it exits)", emu_block.x,
                   emu_cur_i, what, b->block.x, rank);
        return NULL;
    }
    *th = b->threads;
    return b->s90;
}
static emu_mbar *emu_mbar_at(emu_s90 *st, uint32_t at, unsigned rank) {
    for (int i = 0; i < st->n_mbars; i++)
        if (st->mbars[i].at == at) return &st->mbars[i];
    emu_report(EMU_FIND_INIT, "thread (block %u, thread %d) uses the mbarrier at shared address %u of block %u "
               "(cluster rank %u), which was never initialised (an init is seen by the cluster after "
               "fence.mbarrier_init and barrier.cluster)", emu_block.x, emu_cur_i, at,
               emu_block.x - emu_cl_rank + rank, rank);
    return NULL;
}

static inline void emu_mbar_init(void *bar, unsigned count) {
    emu_mbar *m = emu_mbar_find(bar, true);
    if (!m) return;
    if (count == 0 || count >= (1u << 20))
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): mbarrier.init with count %u", emu_block.x,
                   emu_cur_i, count);
    m->count = m->pending = count;
    m->phase = 0;
    m->tx = 0;
    memset(m->acc, 0, sizeof m->acc);
    memset(m->done, 0, sizeof m->done);
    emu_publish(m->done, emu_cur_i >> 5);   /* waiting on the init orders after it */
}
static inline void emu_mbar_expect_tx(void *bar, unsigned bytes) {
    emu_mbar *m = emu_mbar_find(bar, false);
    if (m) m->tx += bytes;
}
static inline void emu_mbar_arrive(void *bar) {
    emu_mbar *m = emu_mbar_find(bar, false);
    if (!m) return;
    if (m->pending == 0) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): arrival on mbarrier %u beyond its count %u in "
                   "phase %u", emu_block.x, emu_cur_i, m->at, m->count, m->phase);
        return;
    }
    emu_publish(m->acc, emu_cur_i >> 5);
    m->pending--;
    emu_mbar_progress(m);
}
/* mapa + mbarrier.arrive.release.cluster.shared::cluster: an arrival on
 * the mbarrier at bar's offset in the cluster's block rank, carrying what
 * the arriving warp knows to that block's waiters. */
static inline void emu_mbar_arrive_cluster(void *bar, unsigned rank) {
    if (rank == emu_cl_rank) {
        emu_mbar_arrive(bar);
        return;
    }
    uint32_t at = __cvta_generic_to_shared(bar);
    emu_thread *th;
    emu_s90 *st = emu_cl_block_of(rank, &th, "arrives on an mbarrier of");
    emu_mbar *m = st ? emu_mbar_at(st, at, rank) : NULL;
    if (!m) return;
    emu_L->stats.remote_arrives++;
    if (m->pending == 0) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): arrival on mbarrier %u of cluster rank %u beyond "
                   "its count %u in phase %u", emu_block.x, emu_cur_i, at, rank, m->count, m->phase);
        return;
    }
    emu_publish(m->acc, emu_cur_i >> 5);
    m->pending--;
    emu_mbar_progress_in(st, th, rank, m);
}
static inline void emu_mbar_arrive_expect_tx(void *bar, unsigned bytes) {
    emu_mbar_expect_tx(bar, bytes);
    emu_mbar_arrive(bar);
}
/* try_wait.parity: true once the phase of that parity completed; the
 * emulator parks the thread until then (the GPU's retry loop collapses). */
static inline bool emu_mbar_try_wait_parity(void *bar, unsigned parity) {
    emu_mbar *m = emu_mbar_find(bar, false);
    if (!m) return true;
    if ((m->phase & 1) == (parity & 1)) {
        emu_wait_arg[emu_cur_i] = (int)(m - emu_mbars);
        emu_wait_parity[emu_cur_i] = parity & 1;
        emu_park(EMU_MBAR);   /* woken by emu_mbar_progress, clocks acquired */
    } else {
        emu_acquire(emu_cur_i >> 5, m->done);
    }
    return true;
}

/* Named barriers (bar.sync / bar.arrive id, count): released at once when
 * the count-th thread arrives. */
static void emu_nbar_arrive(int id, unsigned count, bool wait) {
    if (id < 0 || id > 15 || count == 0 || count % 32 != 0 || count > (unsigned)emu_nthreads) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): bar id %d count %u (id 0..15, count a "
                   "multiple of 32 up to the block's %d threads)", emu_block.x, emu_cur_i, id, count, emu_nthreads);
        return;
    }
    emu_nbar *b = &emu_nbars[id];
    if (!wait) emu_L->stats.bar_arrives++;
    if (b->arrived && b->count != count)
        emu_report(EMU_FIND_HANG, "thread (block %u, thread %d): barrier %d used with counts %u and %u",
                   emu_block.x, emu_cur_i, id, b->count, count);
    b->count = count;
    emu_publish(b->acc, emu_cur_i >> 5);
    if (++b->arrived < count) {
        if (wait) {
            emu_wait_arg[emu_cur_i] = id;
            emu_park(EMU_NAMED);
        }
        return;
    }
    for (int t = 0; t < emu_nthreads; t++)
        if (emu_threads[t].state == EMU_NAMED && emu_wait_arg[t] == id) {
            emu_acquire(t >> 5, b->acc);
            emu_threads[t].state = EMU_RUN;
        }
    if (wait) emu_acquire(emu_cur_i >> 5, b->acc);
    b->arrived = 0;
    memset(b->acc, 0, sizeof b->acc);
}
static inline void emu_bar_sync(int id, unsigned count) { emu_nbar_arrive(id, count, true); }
static inline void emu_bar_arrive(int id, unsigned count) { emu_nbar_arrive(id, count, false); }

/* setmaxnreg: the request is checked and recorded per warp group in
 * emu_stats.maxnreg, and the registers each warp holds are counted. A
 * block starts with what ptxas gives a kernel of its size that uses
 * setmaxnreg, the 65536 / threads cap (168 for 384 threads: 64512, not
 * the SM's 65536; tests audit ptxas's count against it); an inc only
 * moves registers that other warps gave back, so where the warps' final
 * counts add up to more than the block holds, an inc waits forever
 * (emu_sm90_block_end reports it: the hang an H200 showed). */
static int emu_entry_regs() {
    int cap = 65536 / (((emu_nthreads + 31) / 32) * 32) / 8 * 8;
    return cap < 256 ? cap : 256;
}
static inline void emu_setmaxnreg(bool inc, int n) {
    if (n < 24 || n > 256 || n % 8 != 0)
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): setmaxnreg %d (24..256, a multiple of 8)",
                   emu_block.x, emu_cur_i, n);
    if (emu_cur_i / 128 < 8) emu_L->stats.maxnreg[emu_cur_i / 128] = inc ? n : -n;
    int w = emu_cur_i / 32, had = emu_warp_regs[w] ? emu_warp_regs[w] : emu_entry_regs();
    if (w < 32 && (emu_cur_i & 31) == 0) {
        if (inc ? n < had : n > had)
            emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): setmaxnreg.%s %d with %d registers held "
                       "(inc never lowers, dec never raises the count)", emu_block.x, emu_cur_i,
                       inc ? "inc" : "dec", n, had);
        emu_warp_regs[w] = n;
        emu_regs_used = 1;
    }
}

/* A shared write of n bytes at p by the async proxy (TMA), ordered after
 * what the issuing thread knows; its bytes take the TMA's stamp and the
 * identity id (EMU_ID_TMA ...). dyn, cells, pw: the dynamic shared memory
 * of the block written (the running one's, or another's of the cluster:
 * a multicast copy), its race shadow and generic-write counts. */
static void emu_async_write(unsigned char *dyn, emu_cell *cells, unsigned long long *pw, unsigned char *p, size_t n,
                            uint32_t stamp, int id) {
    emu_launch *L = emu_L;
    if (!L->checks || p == emu_sink) return;
    emu_cell *c = NULL;
    size_t off = 0;
    const char *space = "dynamic shared";
    if (p >= dyn && p + n <= dyn + L->smem) c = cells, off = (size_t)(p - dyn);
    else c = emu_st_cells, off = (size_t)(p - (unsigned char *)__start_emu_smem), space = "static shared";
    if (L->checks & EMU_CHECK_RACES) emu_race_at(c, off, n, true, false, space);
    size_t g = emu_granules(off, n);
    if (c == cells && pw) memset(pw + (off >> emu_gshift), 0, g * sizeof *pw);
    c += off >> emu_gshift;
    for (size_t k = 0; k < g; k++) c[k].ws = stamp, c[k].wt = (uint16_t)id;
}
static inline void emu_fence_proxy_async() { emu_pfence[emu_cur_i] = emu_pclock; }

/* An async-proxy read of n bytes of shared memory at p (a wgmma operand, a
 * TMA store's source): a granule a thread wrote through the generic proxy
 * in this block with no fence.proxy.async of that thread since is a race. */
static void emu_proxy_read(const unsigned char *p, size_t n, const char *what) {
    emu_launch *L = emu_L;
    if (!(L->checks & EMU_CHECK_RACES) || !emu_dyn_pw || p < emu_dyn_smem || p + n > emu_dyn_smem + L->smem) return;
    size_t off = (size_t)(p - emu_dyn_smem), g = emu_granules(off, n);
    for (size_t k = 0; k < g; k++) {
        size_t gi = (off >> emu_gshift) + k;
        unsigned long long w = emu_dyn_pw[gi];
        int wt = emu_dyn_pt[gi];
        if (w > emu_pbstart && emu_pfence[wt] < w) {
            char at[200];
            emu_report(EMU_FIND_RACE, "%s: thread (block %u, thread %d) wrote it through the generic proxy and %s "
                       "reads it through the async proxy with no fence.proxy.async by that thread between",
                       emu_where(at, sizeof at, false, "dynamic shared", gi << emu_gshift), emu_block.x, wt, what);
            return;
        }
    }
}

static inline unsigned emu_swizzle(unsigned addr, int mode) {   /* mode: 0 none, 1 32B, 2 64B, 3 128B */
    return mode ? addr ^ ((addr >> 3) & (((1u << mode) - 1) << 4)) : addr;
}

/* A TMA box's elements along each dimension (n[k], innermost first; the
 * box over the element strides) and in all. */
static inline size_t emu_tma_box(const emu_tensor_map *m, unsigned n[5]) {
    size_t total = 1;
    for (int k = 0; k < 5; k++) {
        n[k] = (m->box[k] + m->estride[k] - 1) / m->estride[k];
        total *= n[k];
    }
    return total;
}

/* Element e of a TMA box (n[k] elements along dimension k, innermost
 * first) at coords: its global element offset, and whether it lies outside
 * the tensor. */
static inline bool emu_tma_element(const emu_tensor_map *m, const int *coords, const unsigned *n, size_t e,
                                   long long *off) {
    bool oob = false;
    *off = 0;
    for (int k = 0; k < 5; k++) {
        long long c = (long long)(k < m->rank ? coords[k] : 0) + (long long)(e % n[k]) * m->estride[k];
        e /= n[k];
        if (c < 0 || c >= (long long)m->dims[k]) oob = true;
        *off += c * (long long)m->strides[k];
    }
    return oob;
}

/* cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes
 * [dst], [map, {c0..}], [bar]: the box at coords (innermost first), written
 * row after row at dst with the map's swizzle of the shared address bits,
 * out-of-bound elements zero (or NaN); the box's bytes complete on bar. */
struct __attribute__((aligned(64))) CUtensorMap { unsigned long long opaque[16]; };
static_assert(sizeof(emu_tensor_map) <= sizeof(CUtensorMap), "tensor map fits a CUtensorMap");
/* The copy of a box into the cluster's block rank (the running one, or
 * another: a multicast), at shared address s0, completing on its mbarrier
 * at shared address bar_at. */
static void emu_tma_load_to(unsigned rank, uint32_t s0, const CUtensorMap *tmap, const int *coords, uint32_t bar_at) {
    emu_tensor_map m;
    memcpy(&m, tmap, sizeof m);
    unsigned need = m.swizzle ? 128u << m.swizzle : 128u;
    if (s0 % need != 0)
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): TMA destination at shared address %u is not "
                   "%u-byte aligned (%s)", emu_block.x, emu_cur_i, s0, need, m.swizzle ? "swizzle repeat" : "bulk copy");
    unsigned n[5];
    size_t total = emu_tma_box(&m, n);
    size_t rowb = (size_t)n[0] * m.esize, bytes = total * m.esize;
    uint32_t stamp = emu_clock++;
    emu_L->stats.tma_loads++;
    emu_L->stats.tma_bytes += bytes;
    emu_thread *th;
    emu_s90 *st = emu_cl_block_of(rank, &th, "copies (TMA multicast) into");
    if (!st) return;
    const bool local = rank == emu_cl_rank;
    unsigned char *dyn = local ? emu_dyn_smem : emu_cl_bs[rank].dyn;
    emu_cell *cells = local ? emu_dyn_cells : emu_cl_bs[rank].dyn_cells;
    unsigned long long *pw = local ? emu_dyn_pw : emu_cl_bs[rank].dyn_pw;
    unsigned char *base;
    if (local) base = emu_sptr(s0, bytes);
    else if ((size_t)s0 + bytes <= emu_L->smem) base = dyn + s0;
    else {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): a multicast TMA copy of %zu bytes to shared address "
                   "%u of cluster rank %u, outside its %zu bytes of dynamic shared memory", emu_block.x, emu_cur_i,
                   bytes, s0, rank, emu_L->smem);
        base = emu_sink;
    }
    emu_mbar *mb = local ? emu_mbar_find(emu_sptr(bar_at, 8), false) : emu_mbar_at(st, bar_at, rank);
    const int k = mb ? (int)(mb - st->mbars) % EMU_TMA_UNITS : 0;
    const int id = EMU_ID_TMA | (int)rank << 4 | k;
    char owner[40];
    snprintf(owner, sizeof owner, " of block %u", emu_block.x - emu_cl_rank + rank);
    emu_remote_owner = local ? NULL : owner;
    unsigned char fill[8];
    memset(fill, 0, sizeof fill);
    if (m.oob_nan) memset(fill, 0xff, sizeof fill);
    for (size_t e = 0; e < total && base != emu_sink; e++) {
        long long off;
        bool oob = emu_tma_element(&m, coords, n, e, &off);
        size_t lin = (e % n[0]) * m.esize + (e / n[0]) * rowb;
        const uint32_t sa = emu_swizzle(s0 + (uint32_t)lin, m.swizzle);
        unsigned char *to = local ? emu_sptr(sa, m.esize) : dyn + sa;
        const void *from = fill;
        if (!oob) from = emu_global(m.base, off, 1, m.esize, false);
        emu_async_write(dyn, cells, pw, to, m.esize, stamp, id);
        memcpy(to, from, m.esize);
    }
    emu_remote_owner = NULL;
    if (mb) {
        /* complete_tx: the copy's bytes, ordered after what the issuing warp knew */
        const int w = emu_cur_i >> 5, gw = emu_gw(emu_cl_rank, w), unit = emu_gw(rank, EMU_TMA_WARP + k);
        const uint32_t *row = &EMU_SEEN(gw, 0);
        for (int x = 0; x < emu_G; x++)
            if (row[x] > mb->acc[x]) mb->acc[x] = row[x];
        if (emu_wstamp[w] > mb->acc[gw]) mb->acc[gw] = emu_wstamp[w];
        if (stamp > mb->acc[unit]) mb->acc[unit] = stamp;
        mb->tx -= (long long)bytes;
        emu_mbar_progress_in(st, th, rank, mb);
    }
}
static inline void emu_tma_load(void *dst, const CUtensorMap *tmap, const int *coords, void *bar) {
    emu_tma_load_to(emu_cl_rank, __cvta_generic_to_shared(dst), tmap, coords, __cvta_generic_to_shared(bar));
}
/* ....multicast::cluster [dst], [map, {c0..}], [bar], mask: the box into
 * every block of the cluster in mask, at dst's offset, completing on the
 * mbarrier at bar's offset in each (the writes checked against what the
 * issuing thread knows of that block: its consumers' releases, arrived
 * through remote arrivals) */
static inline void emu_tma_load_multicast(void *dst, const CUtensorMap *tmap, const int *coords, void *bar,
                                          unsigned short mask) {
    const uint32_t s0 = __cvta_generic_to_shared(dst), ba = __cvta_generic_to_shared(bar);
    if (mask == 0 || (emu_cl_n < 16 && (mask >> emu_cl_n) != 0)) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): a multicast TMA copy with mask 0x%x in a cluster "
                   "of %u blocks", emu_block.x, emu_cur_i, mask, emu_cl_n);
        return;
    }
    emu_L->stats.tma_multicasts++;
    for (unsigned r = 0; r < emu_cl_n; r++)
        if ((mask >> r) & 1) emu_tma_load_to(r, s0, tmap, coords, ba);
}

/* cp.async.bulk.tensor.Nd.global.shared::cta.bulk_group [map, {c0..}], [src]:
 * the box at the coordinates read from src (the map's swizzle of the
 * shared-address bits) and written to global memory; elements outside the
 * tensor are not written (PTX: the box is clipped). Executed at issue: the
 * shared reads are the issuing thread's (ordered by what it knows: a named
 * barrier after the other threads' writes), the global writes too.
 * commit_group / wait_group[.read] have nothing left to wait for. */
static inline void emu_tma_store(const CUtensorMap *tmap, const int *coords, const void *src) {
    emu_tensor_map m;
    memcpy(&m, tmap, sizeof m);
    uint32_t s0 = __cvta_generic_to_shared(src);
    unsigned need = m.swizzle ? 128u << m.swizzle : 16u;
    if (s0 % need != 0)
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): TMA store source at shared address %u is not "
                   "%u-byte aligned", emu_block.x, emu_cur_i, s0, need);
    unsigned n[5];
    size_t total = emu_tma_box(&m, n);
    size_t rowb = (size_t)n[0] * m.esize;
    emu_L->stats.tma_stores++;
    for (size_t e = 0; e < total; e++) {
        long long off;
        bool oob = emu_tma_element(&m, coords, n, e, &off);
        if (oob) continue;
        size_t lin = (e % n[0]) * m.esize + (e / n[0]) * rowb;
        unsigned char *from = emu_sptr(emu_swizzle(s0 + (uint32_t)lin, m.swizzle), m.esize);
        if (from == emu_sink) break;
        from = (unsigned char *)emu_shared(from, m.esize, 1, false);
        emu_proxy_read(from, m.esize, "a TMA store");
        void *to = emu_global(m.base, off, 1, m.esize, true);
        memcpy(to, from, m.esize);
        emu_L->stats.tma_store_bytes += m.esize;
    }
}
static inline void emu_bulk_commit() {}
static inline void emu_bulk_wait(int n, bool read) { (void)n; (void)read; }

/* ---- wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}: queued per warp
 * group, executed at wgmma.wait_group. Its register operands belong to the
 * asynchronous unit from issue to that wait (PTX ISA: accessing them
 * earlier is undefined), and the emulator checks it: at issue each thread's
 * accumulators move to a shadow (the ops compute there) and the registers
 * get a poison NaN, its A fragments are snapshot; when the wait retires the
 * ops, A fragments that changed and accumulators that no longer hold the
 * poison are race findings (written while in flight), then the results
 * land. A read of in-flight accumulators reads the poison: NaN downstream.
 * Fragments (thread t of the group:
 * warp w = t/32, g = lane/4, q = lane%4):
 *   D value v: row 16w + g + 8((v/2)%2), col 8(v/4) + 2q + v%2;
 *   A register r half h (A from registers): row 16w + g + 8(r%2), col 2q + h + 8(r/2).
 * Shared operands through a 64-bit matrix descriptor: start address
 * bits 0..13, leading byte offset 16..29, stride byte offset 32..45 (each
 * >> 4), base offset 49..51 (must be 0 here), layout 62..63 (0 none,
 * 1 128B, 2 64B, 3 32B swizzle); element (mn, k) of a K-major (tnsp 0) or
 * MN-major (tnsp 1) operand is at emu_desc_addr. */
static unsigned emu_desc_addr(unsigned long long desc, bool mn_major, int mn, int k) {
    unsigned start = (unsigned)(desc & 0x3fff) << 4, lbo = (unsigned)((desc >> 16) & 0x3fff) << 4;
    unsigned sbo = (unsigned)((desc >> 32) & 0x3fff) << 4, lay = (unsigned)(desc >> 62) & 3;
    int mode = lay == 1 ? 3 : lay == 2 ? 2 : lay == 3 ? 1 : 0, w = 1 << mode;   /* w: 16-byte units per row */
    unsigned a;
    if (!mn_major) {
        a = start + (unsigned)(mn / 8) * sbo + (unsigned)(k % 8) * 2;
        a += mode ? (unsigned)(mn % 8) * 16u * (unsigned)w + (unsigned)(k / 8) * 16u
                  : (unsigned)(mn % 8) * 16u + (unsigned)(k / 8) * lbo;
    } else {
        a = start + (unsigned)(mn % 8) * 2;
        a += mode ? (unsigned)((mn / 8) % w) * 16u + (unsigned)(mn / (8 * w)) * lbo + (unsigned)(k % 8) * 16u * (unsigned)w +
                        (unsigned)(k / 8) * sbo
                  : (unsigned)(mn / 8) * sbo + (unsigned)(k % 8) * 16u + (unsigned)(k / 8) * lbo;
    }
    return emu_swizzle(a, mode);
}

static float emu_desc_load(unsigned long long desc, bool mn_major, int mn, int k, int bf16) {
    if ((desc >> 49) & 7)
        emu_report(EMU_FIND_BOUNDS, "block %u: wgmma descriptor with base offset %llu (not modelled: align the "
                   "operand to its swizzle repeat)", emu_block.x, (desc >> 49) & 7);
    unsigned char *p = emu_sptr(emu_desc_addr(desc, mn_major, mn, k), 2);
    unsigned short h;
    memcpy(&h, emu_shared(p, 2, 2, false), 2);
    emu_proxy_read(p, 2, "a wgmma");
    return bf16 ? mc_bf16_to_f32(h) : mc_f16_to_f32(h);
}

static void emu_wgop_run(int wg, emu_wgop *op) {
    static float A[64][16], B[16][256];
    emu_L->stats.wgmma++;
    if (op->issued != 128) {
        emu_report(EMU_FIND_HANG, "block %u warp group %d: wgmma issued by %d of 128 threads", emu_block.x, wg,
                   op->issued);
        emu_failed = 1;
        return;
    }
    for (int t = 0; t < 128 && op->a_regs; t++)
        if (memcmp(op->a_at[t], op->a[t], sizeof op->a[t]) != 0)
            emu_report(EMU_FIND_RACE, "block %u warp group %d thread %d: the A fragment registers of an in-flight "
                       "wgmma (m64n%dk16, A from registers) were written before the wgmma.wait_group that retires "
                       "it", emu_block.x, wg, 128 * wg + t, op->n);
    for (int t = 0; t < 128; t++)
        for (int r = 0; r < 4 && op->a_regs; r++)
            for (int h = 0; h < 2; h++) {
                int lane = t & 31, row = 16 * (t >> 5) + (lane >> 2) + 8 * (r % 2), col = 2 * (lane & 3) + h + 8 * (r / 2);
                A[row][col] = emu_half(op->a[t][r], h, op->bf16);
            }
    for (int m = 0; m < 64 && !op->a_regs; m++)
        for (int k = 0; k < 16; k++) A[m][k] = emu_desc_load(op->da, op->tnsp_a, m, k, op->bf16);
    for (int nn = 0; nn < op->n; nn++)
        for (int k = 0; k < 16; k++) B[k][nn] = emu_desc_load(op->db, op->tnsp_b, nn, k, op->bf16);
    for (int t = 0; t < 128; t++)
        for (int v = 0; v < op->n / 2; v++) {
            int lane = t & 31, row = 16 * (t >> 5) + (lane >> 2) + 8 * ((v / 2) % 2), col = 8 * (v / 4) + 2 * (lane & 3) + v % 2;
            float acc = op->scale_d ? op->d[t][v] : 0.0f;
            for (int k = 0; k < 16; k++) acc += A[row][k] * B[k][col];
            op->d[t][v] = acc;
        }
}

/* d: this thread's n/2 accumulators; a: its 4 A registers, or NULL (A
 * from shared memory through da). */
static inline void emu_wgmma(float *d, int n, const unsigned *a, unsigned long long da, unsigned long long db,
                             int tnsp_a, int tnsp_b, int scale_d, int bf16) {
    int t = emu_cur_i, wg = t / 128;
    if (n < 8 || n > 256 || n % 8 != 0 || emu_nthreads % 128 != 0 || wg >= 8) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): wgmma m64n%dk16 (N a multiple of 8 up to "
                   "256, blocks of whole warp groups)", emu_block.x, t, n);
        return;
    }
    int i = emu_th_issue[t]++;
    if (i - emu_wg_head[wg] >= EMU_WGQ) {
        emu_report(EMU_FIND_HANG, "block %u warp group %d: more than %d wgmma operations in flight", emu_block.x,
                   wg, EMU_WGQ);
        emu_failed = 1;
        return;
    }
    emu_wgop *op = &emu_wgq[wg][i % EMU_WGQ];
    if (i == emu_wg_tail[wg]) {
        emu_wg_tail[wg]++;
        op->n = n, op->tnsp_a = tnsp_a, op->tnsp_b = tnsp_b, op->scale_d = scale_d, op->bf16 = bf16;
        op->a_regs = a != NULL, op->da = da, op->db = db, op->group = emu_th_group[t], op->issued = 0;
    } else if (op->n != n || op->a_regs != (a != NULL) || op->db != db || (!a && op->da != da) ||
               op->tnsp_b != tnsp_b || op->scale_d != scale_d || op->group != emu_th_group[t]) {
        emu_report(EMU_FIND_HANG, "thread (block %u, thread %d): wgmma %d differs from the one its warp group "
                   "issued (shape, descriptors or commit group)", emu_block.x, t, i);
    }
    op->issued++;
    /* the accumulators go to their shadow (an array already in flight
     * keeps its shadow: the ops chain there), the registers are poisoned */
    emu_acc *acc = NULL;
    for (int k = 0; k < EMU_ACCS; k++)
        if (emu_accs[t][k].pending > 0) {
            float *r0 = emu_accs[t][k].regs;
            if (r0 == d && emu_accs[t][k].n == n / 2) acc = &emu_accs[t][k];
            else if (d < r0 + emu_accs[t][k].n && r0 < d + n / 2)
                emu_report(EMU_FIND_RACE, "thread (block %u, thread %d): wgmma %d's accumulators overlap another "
                           "in-flight wgmma's", emu_block.x, t, i);
        }
    for (int k = 0; k < EMU_ACCS && !acc; k++)
        if (emu_accs[t][k].pending == 0) {
            acc = &emu_accs[t][k];
            acc->regs = d;
            acc->n = n / 2;
            memcpy(acc->shadow, d, sizeof(float) * (size_t)(n / 2));
            for (int v = 0; v < n / 2; v++) memcpy(&d[v], &EMU_POISON, 4);
        }
    if (!acc) {
        emu_report(EMU_FIND_HANG, "thread (block %u, thread %d): more than %d accumulator arrays in flight",
                   emu_block.x, t, EMU_ACCS);
        emu_failed = 1;
        return;
    }
    acc->pending++;
    op->d[t % 128] = acc->shadow;
    op->acc[t % 128] = (unsigned char)(acc - emu_accs[t]);
    if (a) {
        memcpy(op->a[t % 128], a, 16);
        op->a_at[t % 128] = a;
    }
}

/* The ops of warp group wg up to its head retired: accumulators with no op
 * left land in their registers, which must still hold the poison. */
static void emu_acc_land(int wg, const emu_wgop *op) {
    for (int t = 0; t < 128; t++) {
        int th = 128 * wg + t;
        emu_acc *acc = &emu_accs[th][op->acc[t]];
        if (--acc->pending > 0) continue;
        for (int v = 0; v < acc->n; v++)
            if (memcmp(&acc->regs[v], &EMU_POISON, 4) != 0) {
                emu_report(EMU_FIND_RACE, "block %u warp group %d thread %d: accumulator register %d of an "
                           "in-flight wgmma (m64n%dk16) was written before the wgmma.wait_group that retires it",
                           emu_block.x, wg, th, v, op->n);
                break;
            }
        memcpy(acc->regs, acc->shadow, sizeof(float) * (size_t)acc->n);
    }
}
static inline void emu_wgmma_fence() {}
static inline void emu_wgmma_commit() { emu_th_group[emu_cur_i]++; }
/* wgmma.wait_group N: the warp group's threads meet; operations of all but
 * the newest N committed groups run. */
static inline void emu_wgmma_wait(int keep) {
    int t = emu_cur_i, wg = t / 128;
    if (wg >= 8) return;
    if (emu_wg_arrived[wg] && emu_wg_keep[wg] != keep)
        emu_report(EMU_FIND_HANG, "thread (block %u, thread %d): wgmma.wait_group %d while its warp group waits "
                   "with %d", emu_block.x, t, keep, emu_wg_keep[wg]);
    emu_wg_keep[wg] = keep;
    if (++emu_wg_arrived[wg] < 128) {
        emu_park(EMU_WGROUP);
        return;
    }
    emu_wg_arrived[wg] = 0;
    int done = emu_th_group[t] - keep;
    /* the retired operations read shared memory as this (the last) warp,
     * in an interval of their own that every warp of the group has seen
     * once its wait returns: the group may overwrite their operands then */
    const int w = t >> 5;
    const uint32_t ops = emu_wstamp[w] = emu_clock++;
    while (emu_wg_head[wg] < emu_wg_tail[wg] && emu_wgq[wg][emu_wg_head[wg] % EMU_WGQ].group < done) {
        emu_wgop_run(wg, &emu_wgq[wg][emu_wg_head[wg] % EMU_WGQ]);
        if (emu_wgq[wg][emu_wg_head[wg] % EMU_WGQ].issued == 128) emu_acc_land(wg, &emu_wgq[wg][emu_wg_head[wg] % EMU_WGQ]);
        emu_wg_head[wg]++;
    }
    emu_wstamp[w] = emu_clock++;
    for (int x = wg * 4; x < wg * 4 + 4; x++)
        if (EMU_SEEN(emu_gw(emu_cl_rank, x), emu_gw(emu_cl_rank, w)) < ops)
            EMU_SEEN(emu_gw(emu_cl_rank, x), emu_gw(emu_cl_rank, w)) = ops;
    for (int u = wg * 128; u < wg * 128 + 128; u++)
        if (emu_threads[u].state == EMU_WGROUP) emu_threads[u].state = EMU_RUN;
}

/* A block begins (emu_run): no mbarriers, named-barrier arrivals, wgmma
 * or setmaxnreg; it ends: what it left pending is a hang. */
static void emu_sm90_block_begin() {
    memset(&EMU_SEEN(emu_gw(emu_cl_rank, 0), 0), 0, sizeof(uint32_t) * EMU_WARPS * (size_t)emu_G);   /* this block's rows */
    emu_n_mbars = 0;
    memset(emu_nbars, 0, sizeof emu_nbars);
    memset(emu_wg_head, 0, sizeof emu_wg_head);
    memset(emu_wg_tail, 0, sizeof emu_wg_tail);
    memset(emu_wg_arrived, 0, sizeof emu_wg_arrived);
    memset(emu_th_issue, 0, sizeof emu_th_issue);
    memset(emu_th_group, 0, sizeof emu_th_group);
    memset(emu_accs, 0, sizeof emu_accs);
    memset(emu_warp_regs, 0, sizeof emu_warp_regs);
    emu_regs_used = 0;
}
static void emu_sm90_block_end() {
    if (emu_regs_used) {
        int warps = (emu_nthreads + 31) / 32, entry = emu_entry_regs(), need = 0;
        for (int w = 0; w < warps && w < 32; w++) need += 32 * (emu_warp_regs[w] ? emu_warp_regs[w] : entry);
        if (need > 32 * warps * entry)
            emu_report(EMU_FIND_HANG, "block %u: setmaxnreg asks for %d registers in all, the block holds %d "
                       "(%d threads x %d at entry): an inc waits forever for registers no warp gives back",
                       emu_block.x, need, 32 * warps * entry, emu_nthreads, entry);
    }
    for (int wg = 0; wg < 8; wg++)
        if (emu_wg_head[wg] < emu_wg_tail[wg])
            emu_report(EMU_FIND_HANG, "block %u warp group %d: %d wgmma operations never retired by "
                       "wgmma.wait_group", emu_block.x, wg, emu_wg_tail[wg] - emu_wg_head[wg]);
    /* a bar.arrive nobody syncs on: an unbalanced hand-over protocol */
    for (int id = 1; id < 16; id++)
        if (emu_nbars[id].arrived)
            emu_report(EMU_FIND_HANG, "block %u: named barrier %d exits with %u of %u arrivals pending (a "
                       "bar.arrive no bar.sync consumed)", emu_block.x, id, emu_nbars[id].arrived,
                       emu_nbars[id].count);
}

/* stmatrix.sync.aligned.m8n8.xN.shared.b16 (N = num): lanes 8q..8q+7 give
 * the row addresses of matrix q (8 b16 elements, 16-byte aligned); lane l
 * holds of matrix q (its register r[q]) row l/4, columns 2(l%4) and
 * 2(l%4)+1, low half first, and that 32-bit write is the lane's own (the
 * race shadow sees the thread whose register it was). */
static uint32_t emu_stm_addr[1024];
static inline void emu_stmatrix(uint32_t addr, const unsigned *r, int num) {
    int me = emu_cur_i, base = me & ~31, lane = me & 31;
    if (lane < 8 * num && (addr & 15))
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): stmatrix row address %u is not 16-byte aligned",
                   emu_block.x, me, addr);
    emu_stm_addr[me] = addr;
    emu_L->stats.stmatrix++;
    emu_park(EMU_WARP);
    for (int q = 0; q < num; q++) {
        uint32_t a = emu_stm_addr[base + q * 8 + (lane >> 2)] + 4u * (uint32_t)(lane & 3);
        MC_SST(*(unsigned *)emu_sptr(a, 4), r[q]);
    }
    emu_park(EMU_WARP);   /* no lane's next address over one a warp-mate still reads */
}

#endif /* MCIR_CUDA_EMU_SM90_H */
