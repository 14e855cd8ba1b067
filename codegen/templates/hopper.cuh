// ---- sm_90a building blocks: mbarriers, the TMA, wgmma, named barriers,
// ---- setmaxnreg, and the TMA-fed stage ring (the sm_90a templates'
// ---- common parts; compiled only into sm_90a kernels).
//
// Each primitive is the PTX instruction on the GPU and the emulator's model
// of it under MC_EMULATE (emu/cuda_emu_sm90.h), so the templates are written
// once for both.
//
// The asynchronous ring is one object (CUTLASS's PipelineTmaAsync):
// mc_ring holds STAGES "full" mbarriers (one producer arrival plus the
// transaction bytes of the stage's TMA copies) and STAGES "empty" ones (one
// arrival per consumer warp), and an mc_ring_state walks it: stage index
// and phase bit, advanced in one place. The producer acquires a stage (its
// empty barrier of the previous round completed: the first round passes at
// once, as a fresh barrier's phase -1 counts as complete), expects its
// bytes and issues the copies; a consumer waits for the stage to be full
// and releases it once its last reader retired. Nobody computes a parity.
//
// Register operands of asynchronous MMAs: wgmma.mma_async reads its A
// fragments and reads / writes its accumulators until the wgmma.wait_group
// that retires it; touching them before is undefined (PTX ISA, "Asynchronous
// Warpgroup Level Matrix Multiply-Accumulate"). mc_fence_regs pins them for
// the compiler (CUTLASS's warpgroup_fence_operand) around issue and wait, so
// no access is moved into that window; the templates keep the order
// issue -> wait -> use.

#ifndef MC_EMULATE
struct __align__(64) CUtensorMap { unsigned long long opaque[16]; };
#endif

__device__ __forceinline__ u32 mc_saddr(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// Loads from a shared address (32-bit: no generic pointer kept live)
__device__ __forceinline__ unsigned short mc_lds_u16(u32 a) {
#ifdef MC_EMULATE
    return MC_SLD(*(const unsigned short*)emu_sptr(a, 2));
#else
    unsigned short v;
    asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(a) : "memory");
    return v;
#endif
}
__device__ __forceinline__ u32 mc_lds_u32(u32 a) {
#ifdef MC_EMULATE
    return MC_SLD(*(const u32*)emu_sptr(a, 4));
#else
    u32 v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a) : "memory");
    return v;
#endif
}

__device__ __forceinline__ u64 mc_lds_u64(u32 a) {
#ifdef MC_EMULATE
    return MC_SLD(*(const u64*)emu_sptr(a, 8));
#else
    u64 v;
    asm volatile("ld.shared.u64 %0, [%1];" : "=l"(v) : "r"(a) : "memory");
    return v;
#endif
}

// stmatrix.sync.aligned.m8n8.x4.shared.b16: the warp stores four 8 x 8
// b16 matrices; this thread's r0..r3 are its fragment of matrices 0..3
// (row lane / 4, columns 2 (lane % 4) and + 1, low half first: an mma
// accumulator pair), and a is the shared address of row lane % 8 of matrix
// lane / 8 (16 contiguous bytes, 16-byte aligned). All 32 lanes, converged.
__device__ __forceinline__ void mc_stmatrix_x4(u32 a, u32 r0, u32 r1, u32 r2, u32 r3) {
#ifdef MC_EMULATE
    const u32 r[4] = {r0, r1, r2, r3};
    emu_stmatrix(a, r, 4);
#else
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(r0), "r"(r1),
                 "r"(r2), "r"(r3)
                 : "memory");
#endif
}

// ---- global atomics and fences (a dynamic scheduler's counters)
__device__ __forceinline__ u32 mc_atomic_add_u32(u32* p, u32 v) {
#ifdef MC_EMULATE
    return emu_atomic_u32(p, v, true);
#else
    u32 r;
    asm volatile("atom.global.add.u32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory");
    return r;
#endif
}
__device__ __forceinline__ u32 mc_atomic_exch_u32(u32* p, u32 v) {
#ifdef MC_EMULATE
    return emu_atomic_u32(p, v, false);
#else
    u32 r;
    asm volatile("atom.global.exch.b32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory");
    return r;
#endif
}
// orders this thread's global accesses before the later ones, GPU-wide
__device__ __forceinline__ void mc_fence_gpu() {
#ifndef MC_EMULATE
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
#endif
}

// ---- mbarriers
__device__ __forceinline__ void mc_mbar_init(u64* bar, unsigned count) {
#ifdef MC_EMULATE
    emu_mbar_init(bar, count);
#else
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(mc_saddr(bar)), "r"(count) : "memory");
#endif
}
// the initialisations are visible to the other threads and the async proxy
__device__ __forceinline__ void mc_fence_mbar_init() {
#ifndef MC_EMULATE
    asm volatile("fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;" ::: "memory");
#endif
}
__device__ __forceinline__ void mc_mbar_arrive_expect(u64* bar, unsigned bytes) {
#ifdef MC_EMULATE
    emu_mbar_arrive_expect_tx(bar, bytes);
#else
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mc_saddr(bar)), "r"(bytes)
                 : "memory");
#endif
}
__device__ __forceinline__ void mc_mbar_arrive(u64* bar) {
#ifdef MC_EMULATE
    emu_mbar_arrive(bar);
#else
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(mc_saddr(bar)) : "memory");
#endif
}
// an arrival on the mbarrier at bar's offset in the cluster's block of
// the given rank (mapa, then a remote arrive with release at cluster
// scope: what this thread did before is visible to that block's waiters)
__device__ __forceinline__ void mc_mbar_arrive_cluster(u64* bar, unsigned rank) {
#ifdef MC_EMULATE
    emu_mbar_arrive_cluster(bar, rank);
#else
    asm volatile(
        "{\n\t.reg .b32 ra;\n\tmapa.shared::cluster.u32 ra, %0, %1;\n\t"
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n\t}" ::"r"(mc_saddr(bar)),
        "r"(rank)
        : "memory");
#endif
}
// returns once the phase of this parity completed
__device__ __forceinline__ void mc_mbar_wait(u64* bar, unsigned parity) {
#ifdef MC_EMULATE
    emu_mbar_try_wait_parity(bar, parity);
#else
    u32 ok = 0;
    do {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(ok)
                     : "r"(mc_saddr(bar)), "r"(parity)
                     : "memory");
    } while (!ok);
#endif
}

// ---- the TMA: one box of a tensor map of rank <= 5 at coordinates c
// (innermost first), completing its bytes on bar; and the store of a box
// from shared memory (elements outside the tensor are clipped)
__device__ __forceinline__ void mc_tma_load(void* dst, const CUtensorMap* map, const int* c, u64* bar) {
#ifdef MC_EMULATE
    emu_tma_load(dst, map, c, bar);
#else
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, "
        "%6}], [%7];" ::"r"(mc_saddr(dst)),
        "l"((u64)map), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), "r"(mc_saddr(bar))
        : "memory");
#endif
}
// The load multicast to the cluster's blocks in mask (bit r: rank r): the
// box lands at dst's offset in each of their shared memories and completes
// its bytes on the mbarrier at bar's offset in each (CUTLASS's
// SM90_TMA_LOAD_MULTICAST)
__device__ __forceinline__ void mc_tma_load_multicast(void* dst, const CUtensorMap* map, const int* c, u64* bar,
                                                      unsigned short mask) {
#ifdef MC_EMULATE
    emu_tma_load_multicast(dst, map, c, bar, mask);
#else
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, "
        "{%2, %3, %4, %5, %6}], [%7], %8;" ::"r"(mc_saddr(dst)),
        "l"((u64)map), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), "r"(mc_saddr(bar)), "h"(mask)
        : "memory");
#endif
}
// The multicast load with an L2 eviction policy (mc_policy_*)
__device__ __forceinline__ void mc_tma_load_multicast_hint(void* dst, const CUtensorMap* map, const int* c, u64* bar,
                                                           unsigned short mask, u64 policy) {
#ifdef MC_EMULATE
    (void)policy;
    emu_tma_load_multicast(dst, map, c, bar, mask);
#else
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint "
        "[%0], [%1, {%2, %3, %4, %5, %6}], [%7], %8, %9;" ::"r"(mc_saddr(dst)),
        "l"((u64)map), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), "r"(mc_saddr(bar)), "h"(mask),
        "l"(policy)
        : "memory");
#endif
}
// The same load with an L2 eviction policy (mc_policy_*): a tile every
// block of a head re-reads (an attention's K and V) stays, one read once
// (its Q) goes first
__device__ __forceinline__ void mc_tma_load_hint(void* dst, const CUtensorMap* map, const int* c, u64* bar,
                                                 u64 policy) {
#ifdef MC_EMULATE
    (void)policy;
    emu_tma_load(dst, map, c, bar);
#else
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, "
        "%3, %4, %5, %6}], [%7], %8;" ::"r"(mc_saddr(dst)),
        "l"((u64)map), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), "r"(mc_saddr(bar)), "l"(policy)
        : "memory");
#endif
}
// L2 cache policies for mc_tma_load_hint (createpolicy, the whole access)
__device__ __forceinline__ u64 mc_policy_evict_last() {
    u64 p = 0;
#ifndef MC_EMULATE
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
#endif
    return p;
}
__device__ __forceinline__ u64 mc_policy_evict_first() {
    u64 p = 0;
#ifndef MC_EMULATE
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
#endif
    return p;
}
// The tensor map's descriptor into the cache before its first copy
__device__ __forceinline__ void mc_prefetch_tensormap(const CUtensorMap* map) {
#ifdef MC_EMULATE
    (void)map;
#else
    asm volatile("prefetch.tensormap [%0];" ::"l"((u64)map) : "memory");
#endif
}
__device__ __forceinline__ void mc_tma_store(const CUtensorMap* map, const void* src, const int* c) {
#ifdef MC_EMULATE
    emu_tma_store(map, c, src);
#else
    asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];" ::"l"(
                     (u64)map),
                 "r"(mc_saddr(src)), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4])
                 : "memory");
#endif
}
__device__ __forceinline__ void mc_bulk_commit() {
#ifdef MC_EMULATE
    emu_bulk_commit();
#else
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}
__device__ __forceinline__ void mc_bulk_wait_read0() {   // the sources may be overwritten
#ifdef MC_EMULATE
    emu_bulk_wait(0, true);
#else
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#endif
}
__device__ __forceinline__ void mc_bulk_wait0() {   // the writes are done
#ifdef MC_EMULATE
    emu_bulk_wait(0, false);
#else
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}
// generic-proxy shared writes become visible to the async proxy (a TMA store)
__device__ __forceinline__ void mc_fence_proxy_async() {
#ifdef MC_EMULATE
    emu_fence_proxy_async();
#else
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// ---- wgmma: fence, commit, wait, operand fences, descriptors
__device__ __forceinline__ void mc_wgmma_fence() {
#ifdef MC_EMULATE
    emu_wgmma_fence();
#else
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void mc_wgmma_commit() {
#ifdef MC_EMULATE
    emu_wgmma_commit();
#else
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
// all but the newest n committed groups have retired
template <int n> __device__ __forceinline__ void mc_wgmma_wait() {
#ifdef MC_EMULATE
    emu_wgmma_wait(n);
#else
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(n) : "memory");
#endif
}
template <int n> __device__ __forceinline__ void mc_fence_regs(float* r) {
#ifdef MC_EMULATE
    (void)r;
#else
#pragma unroll
    for (int i = 0; i < n; i++) asm volatile("" : "+f"(r[i])::"memory");
#endif
}
template <int n> __device__ __forceinline__ void mc_fence_regs(u32* r) {
#ifdef MC_EMULATE
    (void)r;
#else
#pragma unroll
    for (int i = 0; i < n; i++) asm volatile("" : "+r"(r[i])::"memory");
#endif
}
// Hides v from constant folding: a mainloop whose trip count the compiler
// knows (a few K/V tiles) is unrolled into straight-line code, and ptxas's
// allocation of that no longer keeps the pipeline's registers within the
// warp group's budget (spills seen at 240 with two tiles).
__device__ __forceinline__ void mc_opaque(int& v) {
#ifndef MC_EMULATE
    asm("" : "+r"(v));
#else
    (void)v;
#endif
}
// Keeps a wgmma.wait_group after the register work that produced v: v is
// stored into this thread's own shared slot (a word nobody reads) just
// before the wait. ptxas places a wait's WARPGROUP.DEPBAR as early as its
// ordering allows, ahead of independent register work; an attention's
// whole softmax, meant to run while its P·V wgmma does, ended up behind it.
// A store that needs the end of that work is ordered before the wait, and
// so the wait after the work (docs/codegen.md "The softmax under P·V").
__device__ __forceinline__ void mc_anchor_wait(float* slot, float v) {
#ifdef MC_EMULATE
    MC_SST(*slot, v);
#else
    asm volatile("st.shared.f32 [%0], %1;" ::"r"(mc_saddr(slot)), "f"(v) : "memory");
#endif
}
// Shared-memory matrix descriptor, 128-byte swizzle (layout type 1):
// start address, leading and stride byte offsets, each >> 4.
__device__ __forceinline__ u64 mc_desc_sw128(u32 saddr, u32 lbo, u32 sbo) {
    return (u64)((saddr & 0x3ffffu) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) | (1ull << 62);
}

// A descriptor `bytes` further on (a multiple of 16): only the start
// address field moves, and it cannot carry out (shared addresses stay
// below 2^18), so one 32-bit add on the low word — CUTLASS's descriptor
// iterator; building each k-step's descriptor afresh took ~7 uniform
// instructions per wgmma.
__device__ __forceinline__ u64 mc_desc_add(u64 desc, u32 bytes) {
    return (desc & 0xffffffff00000000ull) | (u32)((u32)desc + (bytes >> 4));
}
// A value the compiler may keep in a uniform register: lane 0's, which
// the caller knows every lane of the warp holds (CUTLASS's
// canonical_warp_group_idx)
__device__ __forceinline__ int mc_warp_uniform(int v) { return __shfl_sync(0xffffffffu, v, 0); }

// ---- named barriers and register reallocation
__device__ __forceinline__ void mc_bar_arrive(int id, int count) {
#ifdef MC_EMULATE
    emu_bar_arrive(id, (unsigned)count);
#else
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void mc_bar_sync(int id, int count) {
#ifdef MC_EMULATE
    emu_bar_sync(id, (unsigned)count);
#else
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
#endif
}
template <int n> __device__ __forceinline__ void mc_regs_dec() {
#ifdef MC_EMULATE
    emu_setmaxnreg(false, n);
#else
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(n));
#endif
}
template <int n> __device__ __forceinline__ void mc_regs_inc() {
#ifdef MC_EMULATE
    emu_setmaxnreg(true, n);
#else
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(n));
#endif
}

// ---- the TMA-fed ring (see the top of this file)
template <int STAGES> struct mc_ring {
    u64 full[STAGES], empty[STAGES];
};
struct mc_ring_state {
    int stage;
    unsigned phase;
};
template <int STAGES> __device__ __forceinline__ void mc_ring_next(mc_ring_state& s) {
    if (++s.stage == STAGES) {
        s.stage = 0;
        s.phase ^= 1u;
    }
}
// n stages on (n >= 0): the phase flips at each wrap
template <int STAGES> __device__ __forceinline__ void mc_ring_skip(mc_ring_state& s, int n) {
    const int at = s.stage + n % STAGES;
    s.phase ^= (unsigned)(n / STAGES) & 1u;
    if (at >= STAGES) {
        s.stage = at - STAGES;
        s.phase ^= 1u;
    } else
        s.stage = at;
}
// one thread, before the block's first __syncthreads
template <int STAGES> __device__ __forceinline__ void mc_ring_init(mc_ring<STAGES>& r, unsigned consumers) {
    for (int s = 0; s < STAGES; s++) {
        mc_mbar_init(&r.full[s], 1);
        mc_mbar_init(&r.empty[s], consumers);
    }
}
// producer: waits until the stage is free, then expects `bytes` on its full
// barrier; returns that barrier for the stage's TMA copies
template <int STAGES>
__device__ __forceinline__ u64* mc_ring_acquire(mc_ring<STAGES>& r, const mc_ring_state& s, unsigned bytes) {
    mc_mbar_wait(&r.empty[s.stage], s.phase ^ 1u);
    mc_mbar_arrive_expect(&r.full[s.stage], bytes);
    return &r.full[s.stage];
}
// consumer: waits until the stage's bytes landed
template <int STAGES> __device__ __forceinline__ void mc_ring_wait(mc_ring<STAGES>& r, const mc_ring_state& s) {
    mc_mbar_wait(&r.full[s.stage], s.phase);
}
// consumer warp: done with the stage (one arrival per warp, by lane 0)
template <int STAGES>
__device__ __forceinline__ void mc_ring_release(mc_ring<STAGES>& r, const mc_ring_state& s, int lane) {
    __syncwarp();
    if (lane == 0) mc_mbar_arrive(&r.empty[s.stage]);
}
// A ring a cluster's producers fill by multicast: a stage is free for a
// producer once the consumers of every block it writes released it, so a
// consumer warp releases it in each of the cluster's `blocks` (lane r
// arrives on block r's empty barrier, initialised for the consumer warps
// of all of them: CUTLASS's PipelineTmaAsync with a multicast cluster)
template <int STAGES>
__device__ __forceinline__ void mc_ring_release_cluster(mc_ring<STAGES>& r, const mc_ring_state& s, int lane,
                                                        int blocks) {
    __syncwarp();
    if (lane < blocks) mc_mbar_arrive_cluster(&r.empty[s.stage], (unsigned)lane);
}
// producer, after its last stage: acquires every stage once more, so that
// each release still on its way (a peer's consumers arriving remotely)
// has landed before the block exits (CUTLASS's load_tail)
template <int STAGES> __device__ __forceinline__ void mc_ring_drain(mc_ring<STAGES>& r, mc_ring_state& s) {
    for (int k = 0; k < STAGES; k++) {
        mc_mbar_wait(&r.empty[s.stage], s.phase ^ 1u);
        mc_ring_next<STAGES>(s);
    }
}
// ---- end of sm_90a building blocks
