// cuda_emu_sm80.h — the sm_80 part of the CPU emulator (cuda_emu.h):
// cp.async (the non-bulk LDGSTS) with its commit / wait groups, and
// ldmatrix (what the sm_80 GEMM's mainloop uses, templates/matmul.cuh;
// docs/codegen.md "The sm_90a emulator", its sm_80 table). mma.sync
// (emu_mma_m16n8k16) is in cuda_emu.h, a warp primitive like the shuffles.
//
// Not a header of its own: cuda_emu.h includes it in its C++ part, after
// the scheduler, the sanitizer and shared addresses (emu_sptr), and before
// emu_run, which allocates its state per launch (emu_sm80_launch_begin /
// emu_sm80_launch_end) and resets it per block (emu_sm80_block_begin);
// emu_entry lands a thread's copies still in flight when it exits
// (emu_cp_async_wait(0)). emu_shared checks every shared access against
// the copies in flight, so that part of the state (emu_cpa_pend,
// emu_cpa_inflight) is declared in cuda_emu.h.
//
// cp.async.cg.shared.global [dst], [src], 16, src_size (and .ca of 8 or
// 4 bytes; emu_cp_async): the global read happens, and is checked, at
// issue (src_size bytes, the rest of the copy zeros; both addresses
// aligned to the copy's size); the shared write lands only when the issuing thread's
// cp.async.wait_group retires the commit group the copy belongs to (or at
// the thread's exit), as a write by that thread in its interval then. It
// is also checked as a write at issue (it may land at once on the GPU).
// While it is in flight its destination bytes are marked (per 4 bytes):
// any access of them, the issuing thread's included, is a race finding. So a
// missing wait_group (the data is read while in flight) and a missing
// __syncthreads after it (another warp reads what this thread landed, in
// the same interval) are both found. Destinations: dynamic shared memory; at most EMU_CPA_MAX copies in flight per thread.
//
// ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16: lanes 8q..8q+7 give
// the row addresses of matrix q (8 b16 elements, 16-byte aligned); lane l
// receives of matrix q row l/4, columns 2(l%4) and 2(l%4)+1 (.trans: rows
// 2(l%4) and 2(l%4)+1 of column l/4), low half first; the reads are the
// receiving lane's.
#ifndef MCIR_CUDA_EMU_SM80_H
#define MCIR_CUDA_EMU_SM80_H

#if !defined(MCIR_CUDA_EMU_H) || !defined(__cplusplus)
#error "cuda_emu_sm80.h is a part of cuda_emu.h (its C++ part): include cuda_emu.h"
#endif

struct emu_cpa { uint32_t dst; int group, n; unsigned char bytes[16]; };
enum { EMU_CPA_MAX = 512 };
static emu_cpa *emu_cpaq;          /* per thread a ring of EMU_CPA_MAX */
static int *emu_cpa_head, *emu_cpa_tail, *emu_cpa_commits;

/* cp.async of cp (16, 8 or 4) bytes, src_bytes of them from global memory
 * (element i of size esz at gsrc), the rest zeros. */
static inline void emu_cp_async(void *sdst, const void *gsrc, long long i, size_t esz, int cp, int src_bytes) {
    int t = emu_cur_i;
    unsigned char *d = (unsigned char *)sdst;
    emu_L->stats.cp_async++;
    if ((cp != 16 && cp != 8 && cp != 4) || !(d >= emu_dyn_smem && d + cp <= emu_dyn_smem + emu_L->smem) ||
        ((d - emu_dyn_smem) & (cp - 1)) || src_bytes < 0 || src_bytes > cp) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): cp.async of %d (src_size %d) bytes to %p: not "
                   "4, 8 or 16 bytes to a destination of that alignment in the block's %zu bytes of dynamic "
                   "shared memory, or src_size beyond the copy",
                   emu_block.x, t, cp, src_bytes, sdst, emu_L->smem);
        return;
    }
    if (src_bytes > 0 && (((uintptr_t)gsrc + (uintptr_t)(i * (long long)esz)) & (uintptr_t)(cp - 1)))
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): cp.async of %d bytes from a global address "
                   "that is not %d-byte aligned", emu_block.x, t, cp, cp);
    if (emu_cpa_tail[t] - emu_cpa_head[t] == EMU_CPA_MAX) {
        emu_report(EMU_FIND_HANG, "thread (block %u, thread %d): more than %d cp.async in flight (no "
                   "cp.async.wait_group)", emu_block.x, t, (int)EMU_CPA_MAX);
        return;
    }
    uint32_t off = (uint32_t)(d - emu_dyn_smem);
    emu_cpa *c = &emu_cpaq[(size_t)t * EMU_CPA_MAX + (size_t)(emu_cpa_tail[t] % EMU_CPA_MAX)];
    memset(c->bytes, 0, 16);
    if (src_bytes > 0) memcpy(c->bytes, emu_global(gsrc, i, esz, (size_t)src_bytes, false), (size_t)src_bytes);
    c->dst = off;
    c->n = cp;
    c->group = emu_cpa_commits[t];
    emu_cpa_tail[t]++;
    emu_shared(d, (size_t)cp, (size_t)cp, true);   /* checked as a write now; bytes unchanged until it lands */
    for (uint32_t q = off >> 2; q < (off + (uint32_t)cp) >> 2; q++) emu_cpa_pend[q]++;
    emu_cpa_inflight++;
}
static inline void emu_cp_async_commit() { emu_cpa_commits[emu_cur_i]++; }
/* cp.async.wait_group keep: the calling thread's copies of all but its
 * newest keep commit groups land. */
static void emu_cp_async_wait(int keep) {
    int t = emu_cur_i, done = emu_cpa_commits[t] - keep;
    while (emu_cpa_head[t] < emu_cpa_tail[t]) {
        emu_cpa *c = &emu_cpaq[(size_t)t * EMU_CPA_MAX + (size_t)(emu_cpa_head[t] % EMU_CPA_MAX)];
        if (c->group >= done) break;
        for (uint32_t q = c->dst >> 2; q < (c->dst + (uint32_t)c->n) >> 2; q++) emu_cpa_pend[q]--;
        emu_cpa_inflight--;
        memcpy(emu_shared(emu_dyn_smem + c->dst, (size_t)c->n, (size_t)c->n, true), c->bytes, (size_t)c->n);
        emu_cpa_head[t]++;
    }
}

static uint32_t emu_ldm_addr[1024];
static inline void emu_ldmatrix(unsigned *r, uint32_t addr, int num, bool trans) {
    int me = emu_cur_i, base = me & ~31, lane = me & 31;
    if (lane < 8 * num && (addr & 15))
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): ldmatrix row address %u is not 16-byte aligned",
                   emu_block.x, me, addr);
    emu_ldm_addr[me] = addr;
    emu_L->stats.ldmatrix++;
    emu_park(EMU_WARP);
    for (int q = 0; q < num; q++) {
        if (trans) {
            uint32_t a0 = emu_ldm_addr[base + q * 8 + 2 * (lane & 3)] + 2u * (uint32_t)(lane >> 2);
            uint32_t a1 = emu_ldm_addr[base + q * 8 + 2 * (lane & 3) + 1] + 2u * (uint32_t)(lane >> 2);
            unsigned lo = MC_SLD(*(const unsigned short *)emu_sptr(a0, 2));
            unsigned hi = MC_SLD(*(const unsigned short *)emu_sptr(a1, 2));
            r[q] = lo | (hi << 16);
        } else {
            uint32_t a = emu_ldm_addr[base + q * 8 + (lane >> 2)] + 4u * (uint32_t)(lane & 3);
            r[q] = MC_SLD(*(const unsigned *)emu_sptr(a, 4));
        }
    }
    emu_park(EMU_WARP);
}

/* The launch's cp.async state (emu_run, before its first block and after
 * its last): a ring of EMU_CPA_MAX copies per thread, the in-flight marks
 * per 4 bytes of dynamic shared memory. */
static void emu_sm80_launch_begin(unsigned block, size_t smem) {
    emu_cpaq = (emu_cpa *)malloc(sizeof(emu_cpa) * EMU_CPA_MAX * block);
    emu_cpa_head = (int *)calloc(block, sizeof(int));
    emu_cpa_tail = (int *)calloc(block, sizeof(int));
    emu_cpa_commits = (int *)calloc(block, sizeof(int));
    emu_cpa_pend = (uint16_t *)calloc(smem / 4 + 1, sizeof(uint16_t));
}
static void emu_sm80_launch_end() {
    free(emu_cpaq);
    free(emu_cpa_head);
    free(emu_cpa_tail);
    free(emu_cpa_commits);
    free(emu_cpa_pend);
    emu_cpa_inflight = 0;
}
/* A block begins: no copies in flight. */
static void emu_sm80_block_begin() {
    memset(emu_cpa_head, 0, sizeof(int) * (size_t)emu_nthreads);
    memset(emu_cpa_tail, 0, sizeof(int) * (size_t)emu_nthreads);
    memset(emu_cpa_commits, 0, sizeof(int) * (size_t)emu_nthreads);
    memset(emu_cpa_pend, 0, sizeof(uint16_t) * (emu_L->smem / 4 + 1));
    emu_cpa_inflight = 0;
}

#endif /* MCIR_CUDA_EMU_SM80_H */
