// ---- GEMM, sm_90a: TMA + mbarriers + wgmma, warp specialised
//
// What the plan gives (kernelplan/launch_gemm_sm90.c, generated before this
// text by codegen/tpl_gemm_sm90.c):
//   the problem GM_M, GM_N, GM_K, GM_BATCH (C[b] = epilogue(A[b] B[b]));
//   GM_BN columns per work item, GM_CWG consumer warp groups of 64 rows
//   each (GM_BM = 64 GM_CWG rows), GM_STAGES stages of the A/B ring,
//   GM_TILES_M / GM_TILES_N, GM_GROUP_M (the tile order's band of M
//   tiles, GM_CLUSTER 2: of pairs of them: gm_item_of), GM_BF16, GM_TRANS_A (A stored [K, M]: MN-major
//   for wgmma, its transpose bit, a prologue's inputs stored alike; else
//   [M, K]: K-major), GM_TRANS_B (B stored [N, K]: K-major
//   for wgmma; else [K, N]: MN-major), GM_A_BATCHED / GM_B_BATCHED (the
//   operand's map steps over the batch; else every batch reads the same
//   matrix), GM_PRODUCER_REGS / GM_CONSUMER_REGS (setmaxnreg where two
//   consumer groups need more than 384 threads' even share; else 0);
//   gm_wgmma(d, da, db, scale_d): wgmma.mma_async m64n<GM_BN>k16, both
//     operands in shared memory, A as GM_TRANS_A says, B as GM_TRANS_B;
//   mm_store(b, m, n, acc, MC_ARGS): the fused epilogue storing output
//     element (b, m, n) from its f32 accumulator;
//   GM_ROW_SCALE (A = P * s, s one value per row of A: P is read as A):
//     gm_row_scale(b, m, MC_ARGS), s[m] of batch b, loaded once per
//     accumulator row of a thread (rs) and applied as the epilogue reads
//     the accumulators (GM_SCALED);
//   GM_TMA_STORE (the output, one f16 / bf16 write with 16-byte rows,
//     stored by the TMA through shared memory; else by mm_store):
//     mm_value(b, m, n, acc, MC_ARGS), the epilogue's value of element
//     (b, m, n) in the output's dtype, GM_O_BF16 its dtype, and the map
//     `to` (columns, rows, batch; 128-byte swizzle, boxes of 64 x 64);
//     GM_PAIR 1: mm_value2(b, m, n, acc_n, acc_n+1, MC_ARGS), the values of
//     columns n (even) and n + 1 as one 32-bit pair of the output's dtype
//     (the 16-bit steps of the chain on packed pairs: emit.c's h<ID>),
//     used where no column is checked (GM_CHECK_N 0);
//   GM_GLU 1 (the paired epilogue of a gated linear unit): the product's
//     columns interleave a gate's and an up projection's in blocks of 8;
//     the output has GM_ON = GM_N / 2 columns, and mm_store / mm_value take
//     the output's (m, n) with mm_pair(gate acc, up acc), the two rounded to
//     the product's dtype in one value; else GM_ON = GM_N;
//   GM_NA boxes read for A per consumer group (1: A itself); with
//     GM_PROLOGUE, gm_a_value(stage, c, j, MC_ARGS): element j of consumer
//     group c's A box computed from element j of each box of the stage
//     and, GM_NV 1, from the stage's vector box (a vector of K
//     elements broadcast along A's rows: a norm's weight; its 64 elements
//     of the K step, by the element's column, or by its row where A is
//     stored [K, M]), and gm_a_store(v): its storage bits;
//   GM_CONV 1: a KxK conv2d as an implicit GEMM (b an image, m an output
//     channel, n a column of the output's 64-pixel row segments): per K
//     step s the tap s / CV_CB (kh, kw) and channels 64 (s % CV_CB)..; ta
//     the tap-major weight (channels, output channels, taps), tb the image
//     (w, h, c, n) read in 4-D boxes {64, 1, 64, 1} at (ow0 + kw - CV_PL,
//     oh + kh - CV_PT, c0, b), one per 64 columns of the tile (its B box:
//     64 channel rows of 64 pixels); the TMA's zero fill outside the image
//     is the padding; mm_store maps (m, n) to the output pixel, masking
//     pixels past the row (CV_* the conv's sizes);
//   GM_PROLOGUE_RS 1 (GM_A_VEC over an A stored [M, K]): the prologue in
//     registers — a K step's wgmma A fragments of each leaf by ldmatrix
//     (gm_leaf8), the chain on them (gm_prologue_rs), wgmma with A from
//     registers (gm_wgmma_rs, gm_issue_rs); else computed into A's box in
//     shared memory (gm_prologue);
//   GM_PINGPONG 1 (two consumer groups, no prologue, not a conv): each
//     group takes every other work item of the block whole — its GM_BM
//     rows as GM_CWG row blocks of 64 (accumulators d[64 GM_BN / 64]) —
//     and the groups' mainloops take turns (see below), so one group's
//     epilogue runs under the other's mainloop; else the groups split
//     every item's rows (64 each: CUTLASS's cooperative kernel);
//   GM_CLUSTER 2: a thread-block cluster of 2 blocks along M
//     (__cluster_dims__(2, 1, 1), the grid whole clusters): the blocks of a
//     cluster take the two M tiles of a super-tile of 2 GM_BM rows, one N
//     tile and batch (rank r the tile 2p + r; GM_TILES_M odd: the last
//     pair's rank-1 tile is wholly past M, its A boxes zero-filled, nothing
//     stored); each loads its own A and half of the stage's B tile and
//     multicasts that half into both blocks' stage at the same offset
//     (B [K, N]: the boxes j with j % 2 == r, or at GM_BN 64 a map box of
//     32 k-rows, k-rows 32r.. of the one box at r 32 x 128 bytes; B [N,
//     K]: a map box of GM_BN / 2 rows, rows r GM_BN / 2.. at r GM_BN / 2 x
//     128 bytes); else GM_CLUSTER 1.
// What it promises: A and B are read only by the TMA (5-D maps: columns,
// rows, batch; 128-byte swizzle, boxes of 64 columns; rows and columns
// past the tensor arrive as zeros), each tile of a work item once, and so
// is a prologue's row vector (an unswizzled box of 64 elements per K
// step, into GM_VBOX bytes per stage after the ring and the output
// boxes); every
// output element (b, m < M, n < N) is stored once: by the thread whose
// accumulator holds it, or (GM_TMA_STORE) by a TMA store of the 64 x 64
// box holding it (rows and columns past the tensor clipped by the TMA).
// Barriers: the ring's 2 x GM_STAGES mbarriers; named barriers 1 + c (the
// prologue's) and 3 + c (group c's output box is in shared memory).
// GM_CLUSTER 2, the release protocol (CUTLASS's PipelineTmaAsync over a
// 2x1 cluster): each block's full barrier expects the whole stage (its A,
// all of B: the peer's multicast completes its half's bytes on this
// block's barrier at the same offset); a block's producer may refill a
// stage only once the consumers of BOTH blocks released it (its multicast
// writes into the peer's stage too), so the empty barriers count the
// consumer warps of both blocks and each consumer warp arrives on its own
// block's and the peer's (lane q on block q's: mapa + a remote arrive);
// a cluster barrier after the mbarrier init (the peer's barriers exist
// before any multicast or remote arrive into them); and the producer ends
// with the ring's tail (every stage acquired once more: all the remote
// arrivals on this block's barriers have landed) before its block exits.
//
// Block: warp group 0 is the producer (setmaxnreg.dec): one thread walks
// the block's work items (a grid-stride loop over batch x M tiles x N
// tiles in gm_item_of's grouped order) and loads each K step's
// A tile (64 x 64 per consumer group) and B tile through the ring.
// Consumer warp group c (setmaxnreg.inc) owns rows 64c..64c+63 of the
// item: per K step it waits for the stage, issues the four k16 wgmmas of
// the step and commits them; with the next step's group in flight it
// waits for the previous one (wait_group 1) and only then releases that
// stage — so no stage is overwritten while a wgmma may still read it. The
// item's accumulators are final after wait_group 0; the epilogue runs from
// them and the next item starts with scale_d 0.
//
// The output through the TMA (GM_TMA_STORE): group c's 64 x GM_BN slice
// goes out as 64 x 64 boxes through two box buffers of its own after the
// ring (the ring's stages already hold the next item's tiles), in turn.
// Per box every thread writes its values (after the epilogue, in the
// output dtype, a column pair as one 32-bit store) into the buffer in the
// 128-byte swizzled layout of the maps, fence.proxy.async (the TMA reads
// through the async proxy), then a named barrier of the group's 128
// threads; one thread then stores the box (cp.async.bulk.tensor global <-
// shared) and commits it. Before that thread arrives at the next box's
// barrier it waits until every store it committed has read its buffer
// (cp.async.bulk.wait_group.read 0): after that barrier the other buffer
// may be written again, while the box just stored is still being read.
// Before the block exits it waits for the stores' writes.
//
// Ping-pong (GM_PINGPONG; CUTLASS's KernelTmaWarpSpecializedPingpong):
// block-local item k (the k-th of the block's grid-stride walk) is group k
// % 2's; the producer fills the ring in item order as ever, so group c
// starts at ring position c ksteps and skips the other group's ksteps
// after each of its items, and a stage is released by one group's four
// warps. The tensor cores take the groups' mainloops in item order: group
// c waits at named barrier GM_TURN + c (its 128 threads syncing, the
// other group's 128 arriving) before its mainloop of item k > 0, and once
// it has issued item k's last wgmmas it arrives on the other group's
// barrier, if item k + 1 exists — so every arrival meets a wait, none is
// left pending at exit. The epilogue of item k then runs (its wgmmas
// retiring first) while the other group issues item k + 1's. The turn
// also keeps the ring's parity wait sound: a group skipping stages could
// otherwise wait on a stage a lap early (its last fill not landed, the
// phase bit the same as two laps back); after the turn every stage before
// the item's was waited for, so none of its stages is a lap behind.

#define GM_BM (64 * GM_CWG)
// one A box of 64 rows of 128 bytes: A [M, K]: 64 m-rows of 64 k-columns;
// A [K, M] (GM_TRANS_A): 64 k-rows of 64 m-columns (a consumer group's 64 rows)
#define GM_ABOX (64 * 128)
// GM_A_BYTES (the plan's): A's part of a stage. Input p's boxes for group g
// at gm_leaf_at(p) + g gm_leaf_wide(p) GM_ABOX: one box of 64 16-bit
// columns, or (gm_leaf_wide 2: an f32 leaf, 64 columns being 256 bytes,
// past the 128-byte swizzle span) two of 32 f32 columns, GM_ABOX apart.
// GM_A_OUT: A's tile of its own at the stage's start (leaf 0 is f32), the
// TMA writes the rest; else A is computed in place over leaf 0's box.
#if GM_TRANS_B
#define GM_BBOX (GM_BN * 128)         // B [N, K]: one box of BN rows of 64 k-columns
#define GM_B_BOXES 1
#else
#define GM_BBOX (64 * 128)            // B [K, N]: boxes of 64 n-columns x 64 k-rows
#define GM_B_BOXES (GM_BN / 64)
#endif
#define GM_B_BYTES (GM_B_BOXES * GM_BBOX)
// GM_CLUSTER 2: the share of B's tile a block loads and multicasts (B [K,
// N]: every other box, or at GM_BN 64, one box, half its 64 k-rows; B [N,
// K]: half the box's n-rows), each half 1024-aligned in the stage (the
// 128-byte swizzle's 8-row pattern follows the shared-address bits)
#if GM_TRANS_B
#define GM_B_ROWS (GM_BN / GM_CLUSTER)   // B [N, K]: the map's box rows
static_assert(GM_B_ROWS * 128 % 1024 == 0, "a block's half of B's box must start 1024-aligned");
#elif GM_B_BOXES % GM_CLUSTER == 0
#define GM_B_KROWS 64                    // B [K, N]: the map's box k-rows (whole boxes in turn)
#else
#define GM_B_KROWS (64 / GM_CLUSTER)     // one box, split by its k-rows
#endif
// the consumer warps that release a stage: every warp of the consumer
// groups of each block of the cluster (each block's producer multicasts
// into the others' stages)
// (ping-pong: only the group whose item the stage holds)
#if GM_PINGPONG
static_assert(GM_CWG == 2 && !GM_PROLOGUE && !GM_CONV, "ping-pong: two consumer groups, no prologue, not a conv");
#define GM_RB GM_CWG                  // a group's row blocks of 64: all of an item's
#define GM_EMPTY_ARRIVALS (4 * GM_CLUSTER)
#else
#define GM_RB 1
#define GM_EMPTY_ARRIVALS (4 * GM_CWG * GM_CLUSTER)
#endif
#define GM_ACC (GM_RB * GM_BN / 2)    // a consumer thread's accumulators
#define GM_TURN 5                     // named barrier 5 + c: group c's turn for its mainloop (ping-pong)
#define GM_STAGE (GM_A_BYTES + GM_B_BYTES)
#define GM_OBOX (64 * 128)            // one 64 x 64 box of the output, bytes
#define GM_OBAR 3                     // named barrier 3 + c: group c's output box is written
#define GM_VBOX (64 * GM_V_ESIZE)     // a row vector's 64 elements of a K step, bytes
// the stages' vector boxes: after the ring and the output boxes
#define GM_VEC_AT (GM_STAGES * GM_STAGE + (GM_TMA_STORE ? GM_CWG * 2 * GM_OBOX : 0))

// Work unit t: batch b, first row m0, first column n0 of the tile of
// cluster rank r. A unit is GM_CLUSTER M tiles of one N tile (a super-tile
// of GM_UBM rows; GM_CLUSTER 1: one tile), rank r taking rows r GM_BM.. of
// it. The L2-aware (grouped) order: a batch's super-tiles in bands of
// GM_GROUP_M (the last band possibly shorter); consecutive units walk down a
// band's super-tiles before its next N tile, so a wave of the grid touches
// GM_GROUP_M A panels and the few B panels of its columns, not every B panel
// (GM_GROUP_M 1: N tiles of one super-tile next to each other). The
// producer and the consumers both walk the units through this one mapping.
#define GM_UNITS_M ((GM_TILES_M + GM_CLUSTER - 1) / GM_CLUSTER)
#define GM_UBM (GM_CLUSTER * GM_BM)
struct gm_item {
    i64 b;
    int m0, n0;
};
__device__ __forceinline__ gm_item gm_item_of(i64 t, int r) {
    gm_item it;
    it.b = t / (GM_UNITS_M * GM_TILES_N);
    t %= GM_UNITS_M * GM_TILES_N;
#if GM_GROUP_M > 1
    const i64 band = t / (GM_GROUP_M * GM_TILES_N), first = band * GM_GROUP_M;
    const i64 rows = GM_UNITS_M - first < GM_GROUP_M ? GM_UNITS_M - first : GM_GROUP_M;
    t -= band * (GM_GROUP_M * GM_TILES_N);
    it.m0 = (int)(first + t % rows) * GM_UBM + r * GM_BM;
    it.n0 = (int)(t / rows) * GM_BN;
#else
    it.m0 = (int)(t / GM_TILES_N) * GM_UBM + r * GM_BM;
    it.n0 = (int)(t % GM_TILES_N) * GM_BN;
#endif
    return it;
}

// B's boxes: with a cluster, multicast into the same offset of every block
// of the cluster, completing their bytes on each block's barrier at bar's
// offset
__device__ __forceinline__ void gm_load_b(void* dst, const CUtensorMap* map, const int* c, u64* bar) {
#if GM_CLUSTER > 1
    mc_tma_load_multicast(dst, map, c, bar, (unsigned short)((1u << GM_CLUSTER) - 1u));
#else
    mc_tma_load(dst, map, c, bar);
#endif
}

// consumer warp: done with the stage, in every block of the cluster (each
// block's producer multicasts into the others' stages): lane q arrives on
// block q's empty barrier (CUTLASS: lane 0 signals CTA 0, lane 1 CTA 1)
__device__ __forceinline__ void gm_ring_release(mc_ring<GM_STAGES>& r, const mc_ring_state& s, int lane) {
#if GM_CLUSTER > 1
    mc_ring_release_cluster(r, s, lane, GM_CLUSTER);
#else
    mc_ring_release(r, s, lane);
#endif
}

// One K step's wgmmas: 64 k-columns, four k16 steps (K-major: 32 bytes
// each inside the 128-byte swizzled rows; MN-major: 16 of the 128-byte
// k-rows each, 8-row groups 1024 bytes apart, the next 64 m- or n-columns
// a box further); the first step of an item overwrites D. Row block r of
// the thread's GM_RB (d + r GM_BN / 2) reads the A box a GM_ABOX further;
// one commit group for all.
__device__ __forceinline__ void gm_issue(float* d, u32 a_at, u32 b_at, int first) {
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
#if GM_TRANS_B
        const u64 db = mc_desc_sw128(b_at + kk * 32, 16, 1024);
#else
        const u64 db = mc_desc_sw128(b_at + kk * 16 * 128, GM_BBOX, 1024);
#endif
#pragma unroll
        for (int r = 0; r < GM_RB; r++) {
#if GM_TRANS_A
            const u64 da = mc_desc_sw128(a_at + r * GM_ABOX + kk * 16 * 128, GM_ABOX, 1024);
#else
            const u64 da = mc_desc_sw128(a_at + r * GM_ABOX + kk * 32, 16, 1024);
#endif
            gm_wgmma(d + r * (GM_BN / 2), da, db, !(first && kk == 0));
        }
    }
    mc_wgmma_commit();
}

#if GM_PROLOGUE
// Leaf k's 8 elements for the chain (the emitter's box leaves, vv<ID>):
// the 16 bytes at element j of the group's box (a multiple of 8: one chunk
// of the swizzled box), or (GM_PROLOGUE_RS) the thread's wgmma A fragment
// of the K step's k16 step j (0..3) by ldmatrix.x4 — lane l gives the row
// 16w + l % 16 of its warp's 16 and the 16-byte chunk 2j + l / 16 (k 0..7,
// 8..15 of the step), swizzled by the row; register q holds matrix q's
// (row g, columns 2 tq4, + 1): q 0 rows g, k 0..7; 1 rows g + 8; 2 and 3
// the same at k + 8 — wgmma's A fragment, as mma.m16n8k16's.
__device__ __forceinline__ void gm_leaf8(float code, int k, int j, u32* h) {
    const unsigned char* box = (const unsigned char*)gm_box(code, k);
#if GM_PROLOGUE_RS
    const int lane = threadIdx.x & 31, row = 16 * ((threadIdx.x >> 5) & 3) + (lane & 15), ch = 2 * j + (lane >> 4);
    mc_ldmatrix_x4<false>(h, box + row * 128 + ((ch ^ (row & 7)) << 4));
#else
    const uint4 c = MC_GLDV(uint4, (const unsigned short*)box, j);
    h[0] = c.x;
    h[1] = c.y;
    h[2] = c.z;
    h[3] = c.w;
#endif
}

#if GM_PROLOGUE_RS
static_assert(GM_A_VEC && !GM_TRANS_A && !GM_PINGPONG, "the prologue in registers: 8 elements at a time, A [M, K]");
// The prologue in registers: K step ks's A fragments of this thread (four
// k16 steps of 4 registers, wgmma's layout: gm_leaf8) computed by the
// chain from the leaves' fragments, rounded to A's dtype; in the step's
// last box, partial in K, the elements past K made 0 (whatever the chain
// made of the TMA's zero fill). Nothing is written to shared memory: no
// fence, no barrier.
__device__ __forceinline__ void gm_prologue_rs(int stage, int c, int ks, u32* af, MC_PARAMS) {
    const int tq4 = threadIdx.x & 3, kleft = (int)(GM_K - 64 * (i64)ks);
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        float f[8];
        gm_a_value8(stage, c, kk, f, MC_ARGS);
#pragma unroll
        for (int q = 0; q < 4; q++) {
            u32 lo = gm_a_store(f[2 * q]), hi = gm_a_store(f[2 * q + 1]);
            if ((GM_K & 63) != 0) {
                const int k0 = 16 * kk + 8 * (q >> 1) + 2 * tq4;
                if (k0 >= kleft) lo = 0u;
                if (k0 + 1 >= kleft) hi = 0u;
            }
            af[4 * kk + q] = lo | hi << 16;
        }
    }
}
// One K step's wgmmas with A from registers (af: the step's fragments),
// accumulating onto D (the item's accumulators start at 0)
__device__ __forceinline__ void gm_issue_rs(float* d, const u32* af, u32 b_at) {
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
#if GM_TRANS_B
        const u64 db = mc_desc_sw128(b_at + kk * 32, 16, 1024);
#else
        const u64 db = mc_desc_sw128(b_at + kk * 16 * 128, GM_BBOX, 1024);
#endif
        gm_wgmma_rs(d, af + 4 * kk, db);
    }
    mc_wgmma_commit();
}
#endif

// The prologue: consumer group c's A box of a stage (at c GM_ABOX: in place
// over input 0's box, or GM_A_OUT A's own tile) computed from the same
// element of every input's box (the value chain gm_a_value; 16-bit boxes
// are swizzled alike, so any element order is A's; an f32 box's element
// is found from A's row and column, gm_box_elem4), 8
// consecutive elements per thread and step; then made visible to wgmma
// (the async proxy) and to the group's other warps. In K step ks's last
// box, partial in K, the elements past K are then stored as 0 (by the
// thread that computed them), whatever the chain made of the zeros the
// TMA filled in there (0 / 0, log 0: a NaN would reach every product
// through B's zero rows).
__device__ __forceinline__ void gm_prologue(unsigned char* sp, int stage, int c, int ks, MC_PARAMS) {
    const int t = threadIdx.x & 127;
    unsigned short* d = (unsigned short*)(sp + c * GM_ABOX);
#pragma unroll 1
    for (int q = 0; q < GM_ABOX / 16 / 128; q++) {
        const int j0 = (t + 128 * q) * 8;
        u32 v[8];
#if GM_A_VEC
        // the chain 8 elements at a time: one 16-byte load per input box
        float f[8];
        gm_a_value8(stage, c, j0, f, MC_ARGS);
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = gm_a_store(f[e]);
#else
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = gm_a_store(gm_a_value(stage, c, j0 + e, MC_ARGS));
#endif
        // one 16-byte store (STS.128: a quarter warp's 8 chunks are 128
        // contiguous bytes, no bank conflict)
        MC_SST(*(uint4*)(d + j0), make_uint4(v[0] | v[1] << 16, v[2] | v[3] << 16, v[4] | v[5] << 16, v[6] | v[7] << 16));
    }
    // the step's k-columns (GM_TRANS_A: k-rows) inside A (K < 2^31); none
    // past K where K is a multiple of 64
    const int kleft = (int)(GM_K - 64 * (i64)ks);
    if ((GM_K & 63) != 0 && kleft < 64) {
#pragma unroll 1
        for (int q = 0; q < GM_ABOX / 16 / 128; q++) {
            const int j0 = (t + 128 * q) * 8;
            // the 8 elements share one k: box row j0 / 64 (GM_TRANS_A), or
            // one 16-byte chunk of columns 8 ((j0 / 8 ^ j0 / 64) % 8).. (K
            // is a multiple of 8 there: A's rows are 16-byte multiples)
#if GM_TRANS_A
            const int kx = j0 >> 6;
#else
            const int kx = (((j0 >> 3) ^ (j0 >> 6)) & 7) << 3;
#endif
            if (kx >= kleft) MC_SST(*(uint4*)(d + j0), make_uint4(0u, 0u, 0u, 0u));
        }
    }
    mc_fence_proxy_async();
    mc_bar_sync(1 + c, 128);
}
#endif

// Whether row m / column n of the output is inside it: always where the
// tiles divide the problem (GM_CHECK_M / GM_CHECK_N 0: no check, and the
// epilogue's loads unpredicated, so that a column's bias is loaded once
// for both of a thread's rows)
#define GM_IN_M(m) (!GM_CHECK_M || (m) < GM_M)
#define GM_IN_N(n) (!GM_CHECK_N || (n) < GM_N)
// column n of the output (GM_ON columns: GM_N, or half that with GM_GLU)
#define GM_IN_O(n) (!GM_CHECK_N || (n) < GM_ON)
// the output's columns of a work item (GM_GLU: a (gate, up) pair of the
// product's columns makes one), and the TMA store's boxes of 64 per item
#define GM_OBN (GM_GLU ? GM_BN / 2 : GM_BN)

// Accumulator v of a thread, times its row's scale (GM_ROW_SCALE: rs holds
// the thread's two rows' s[m]; else rs is null and unread)
#if GM_ROW_SCALE
#define GM_SCALED(x, rs, v) ((x) * (rs)[((v) >> 1) & 1])
#else
#define GM_SCALED(x, rs, v) (x)
#endif

#if GM_TMA_STORE
// The output's pair of columns (lo, hi) as one 32-bit value of its dtype
__device__ __forceinline__ u32 gm_out_pair(float lo, float hi) {
#if GM_O_BF16
    return mc_pack_bf16(lo, hi);
#else
    return mc_pack_f16(lo, hi);
#endif
}
// A warp's 16 rows (16w..16w+15) of a 64 x 64 box into the box buffer ob,
// in the map's 128-byte swizzle (16-byte chunk c of row r at r 128 + 16 (c
// ^ r % 8)), by four stmatrix.x4: p[2c + h] is this thread's pair of
// chunk c (columns 8c + 2 tq4, + 1), row 16w + 8h + g: the fragment of an
// 8 x 8 matrix. Store k writes chunks 2k and 2k + 1, matrix q of it chunk
// 2k + q / 2, rows 8 (q % 2)..: lane l gives the address of its row l % 8
// of matrix l / 8. That row's offset is 16 ((2k + q / 2) ^ l % 8) in its
// 128 bytes, = (16 (q / 2 ^ l % 8)) ^ 32k: one XOR a store
__device__ __forceinline__ void gm_box_put16(unsigned char* ob, int w, int g, int tq4, const u32* p) {
    const int lane = 4 * g + tq4, q = lane >> 3, l8 = lane & 7;
    const u32 at = mc_saddr(ob) + (u32)(16 * w + 8 * (q & 1) + l8) * 128u + (u32)(((q >> 1) ^ l8) << 4);
#pragma unroll
    for (int k = 0; k < 4; k++) mc_stmatrix_x4(at ^ (u32)(32 * k), p[4 * k], p[4 * k + 1], p[4 * k + 2], p[4 * k + 3]);
}
#endif

#if GM_TMA_STORE && GM_GLU
// The paired epilogue's box j: output columns 64j..64j+63 of the item (its
// product columns 128j..128j+127). Value v of this thread, in an even
// 8-column block v / 4 (a gate's), and v + 4 (its up column, the next
// block) make output row 16w + g + 8((v/2)%2), column 8((v/8)%8) + 2 tq4 +
// v%2 of the box; the epilogue gets the pair (mm_pair)
__device__ __forceinline__ void gm_box_out(unsigned char* ob, const float* d, const float* rs, int j, const gm_item& it, int c, int w,
                                           int g, int tq4, MC_PARAMS) {
    u32 p[16];
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const int v = 64 * j + 8 * (i >> 1) + 2 * (i & 1);   // chunk i / 2, row half i % 2
        const int r = 16 * w + g + 8 * (i & 1), col = 8 * (i >> 1) + 2 * tq4;
        const i64 m = (i64)it.m0 + 64 * c + r, n = (i64)it.n0 / 2 + 64 * j + col;
        const float lo = GM_IN_M(m) && GM_IN_O(n)
                             ? mm_value(it.b, m, n, mm_pair(GM_SCALED(d[v], rs, v), GM_SCALED(d[v + 4], rs, v)), MC_ARGS)
                             : 0.0f;
        const float hi = GM_IN_M(m) && GM_IN_O(n + 1)
                             ? mm_value(it.b, m, n + 1, mm_pair(GM_SCALED(d[v + 1], rs, v), GM_SCALED(d[v + 5], rs, v)), MC_ARGS)
                             : 0.0f;
        p[i] = gm_out_pair(lo, hi);
    }
    gm_box_put16(ob, w, g, tq4, p);
}
#elif GM_TMA_STORE
// Box j (columns 64j..64j+63 of the item) of consumer group c's slice into
// the box buffer ob: value v of this thread is row 16w + g + 8((v/2)%2),
// column 8(v/4) + 2 tq4 + v%2 of the slice; past the tensor, zeros (the
// TMA clips them; the epilogue's operands are not read there)
__device__ __forceinline__ void gm_box_out(unsigned char* ob, const float* d, const float* rs, int j, const gm_item& it, int c, int w,
                                           int g, int tq4, MC_PARAMS) {
    u32 p[16];
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const int v = 32 * j + 4 * (i >> 1) + 2 * (i & 1);   // chunk i / 2, row half i % 2
        const int r = 16 * w + g + 8 * (i & 1), col = 8 * (i >> 1) + 2 * tq4;
        const i64 m = (i64)it.m0 + 64 * c + r, n = (i64)it.n0 + 64 * j + col;
#if GM_PAIR && !GM_CHECK_N
        // the pair of columns at once (mm_value2: 16-bit steps on packed pairs)
        p[i] = GM_IN_M(m) ? mm_value2(it.b, m, n, GM_SCALED(d[v], rs, v), GM_SCALED(d[v + 1], rs, v), MC_ARGS) : 0u;
#else
        const float lo = GM_IN_M(m) && GM_IN_N(n) ? mm_value(it.b, m, n, GM_SCALED(d[v], rs, v), MC_ARGS) : 0.0f;
        const float hi = GM_IN_M(m) && GM_IN_N(n + 1) ? mm_value(it.b, m, n + 1, GM_SCALED(d[v + 1], rs, v), MC_ARGS) : 0.0f;
        p[i] = gm_out_pair(lo, hi);
#endif
    }
    gm_box_put16(ob, w, g, tq4, p);
}
#endif

__device__ __forceinline__ void mc_gemm_sm90(const CUtensorMap* const* ta, const CUtensorMap* tv, const CUtensorMap* tb,
                                             const CUtensorMap* to, MC_PARAMS) {
    MC_DYNAMIC_SMEM(mc_smem_raw);
    __shared__ __align__(8) mc_ring<GM_STAGES> ring;
    // the swizzle follows shared-address bits: tiles start 1024-aligned
    unsigned char* smem = mc_smem_raw + ((1024u - (mc_saddr(mc_smem_raw) & 1023u)) & 1023u);
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    (void)to;
    (void)tv;
    // the work units (a cluster's: GM_CLUSTER M tiles each), the cluster's
    // (blockIdx.x / GM_CLUSTER) in a grid-stride loop over the clusters
    const i64 n_items = (i64)GM_BATCH * GM_UNITS_M * GM_TILES_N;
    const int ksteps = (int)((GM_K + 63) / 64);
#if GM_CLUSTER > 1
    const int rank = mc_warp_uniform((int)mc_cluster_rank());   // (uniform: the TMA stores' coordinates)
#else
    const int rank = 0;
#endif
    if (threadIdx.x == 0) {
        mc_ring_init(ring, GM_EMPTY_ARRIVALS);   // released by lane 0 of every consumer warp (of every block)
        mc_fence_mbar_init();
    }
#if GM_CLUSTER > 1
    mc_cluster_sync();   // the peer's barriers are initialised before any multicast or remote arrive into them
#else
    __syncthreads();
#endif

    if (wg == 0) {
        // ---- producer
#if GM_CONSUMER_REGS > 0
        mc_regs_dec<GM_PRODUCER_REGS>();
#endif
        if (threadIdx.x != 0) return;
        // the descriptors into the L2 / constant caches before the first copy
        // (CUTLASS's prefetch_tma_descriptor)
        for (int i = 0; i < GM_NA; i++) mc_prefetch_tensormap(ta[i]);
        mc_prefetch_tensormap(tb);
#if GM_NV
        mc_prefetch_tensormap(tv);
#endif
#if GM_TMA_STORE
        mc_prefetch_tensormap(to);
#endif
        mc_ring_state st = {0, 0};
        for (i64 t = blockIdx.x / GM_CLUSTER; t < n_items; t += gridDim.x / GM_CLUSTER) {
            const gm_item it = gm_item_of(t, rank);
            int ca[5] = {0, 0, GM_A_BATCHED ? (int)it.b : 0, 0, 0};
            int cb[5] = {0, 0, GM_B_BATCHED ? (int)it.b : 0, 0, 0};
            for (int s = 0; s < ksteps; s++) {
                // the bytes the TMA writes (A's own tile is the consumers')
                u64* bar = mc_ring_acquire(ring, st, GM_STAGE + GM_NV * GM_VBOX - GM_A_OUT * GM_CWG * GM_ABOX);
                unsigned char* sp = smem + st.stage * GM_STAGE;
#if GM_CONV
                // K step s: tap s / CV_CB (kh, kw), channels 64 (s % CV_CB)..; A: that
                // tap's [O, C] boxes; B: per box j the output row segment n0 / 64 + j
                // of the image, shifted by the tap (the TMA zero-fills the padding)
                const int tap = s / CV_CB, c0 = 64 * (s - tap * CV_CB), kh = tap / CV_KW, kw = tap - kh * CV_KW;
                ca[0] = c0;
                ca[2] = tap;
                for (int g = 0; g < GM_CWG; g++) {
                    ca[1] = it.m0 + 64 * g;
                    mc_tma_load(sp + g * GM_ABOX, ta[0], ca, bar);
                }
                for (int j = 0; j < GM_B_BOXES; j++) {   // (a conv: one block a cluster)
                    const int seg = it.n0 / 64 + j, oh = seg / CV_SEGW;
                    const int cx[5] = {(seg - oh * CV_SEGW) * 64 + kw - CV_PL, oh + kh - CV_PT, c0, (int)it.b, 0};
                    mc_tma_load(sp + GM_A_BYTES + j * GM_BBOX, tb, cx, bar);
                }
#elif GM_TRANS_A
                ca[1] = 64 * s;   // A [K, M]: k-rows, the group's 64 m-columns (each input of a prologue alike)
#pragma unroll
                for (int p = 0; p < GM_NA; p++)
                    for (int g = 0; g < GM_CWG; g++) {
                        ca[0] = it.m0 + 64 * g;
                        mc_tma_load(sp + gm_leaf_at(p) + g * GM_ABOX, ta[p], ca, bar);   // 16-bit leaves only
                    }
#else
#pragma unroll
                for (int p = 0; p < GM_NA; p++)
                    for (int g = 0; g < GM_CWG; g++) {
                        ca[1] = it.m0 + 64 * g;
                        unsigned char* lb = sp + gm_leaf_at(p) + g * gm_leaf_wide(p) * GM_ABOX;
                        for (int h = 0; h < gm_leaf_wide(p); h++) {   // an f32 leaf: columns 32h.. of the step
                            ca[0] = 64 * s + 32 * h;
                            mc_tma_load(lb + h * GM_ABOX, ta[p], ca, bar);
                        }
                    }
#endif
#if GM_NV
                // the vector's 64 elements of the K step (one per box column; A [K, M]: per box row)
                const int cv[5] = {64 * s, 0, 0, 0, 0};
                mc_tma_load(smem + GM_VEC_AT + st.stage * GM_VBOX, tv, cv, bar);
#endif
#if GM_CONV
                (void)cb;
#elif GM_TRANS_B
                // this block's GM_B_ROWS of B's tile (GM_CLUSTER 1: all of it)
                cb[0] = 64 * s;
                cb[1] = it.n0 + rank * GM_B_ROWS;
                gm_load_b(sp + GM_A_BYTES + rank * GM_B_ROWS * 128, tb, cb, bar);
#elif GM_B_KROWS < 64
                // this block's k-rows of B's one box
                cb[0] = it.n0;
                cb[1] = 64 * s + rank * GM_B_KROWS;
                gm_load_b(sp + GM_A_BYTES + rank * GM_B_KROWS * 128, tb, cb, bar);
#else
                // this block's boxes of B's tile (GM_CLUSTER 1: all of them)
                cb[1] = 64 * s;
                for (int j = rank; j < GM_B_BOXES; j += GM_CLUSTER) {
                    cb[0] = it.n0 + 64 * j;
                    gm_load_b(sp + GM_A_BYTES + j * GM_BBOX, tb, cb, bar);
                }
#endif
                mc_ring_next<GM_STAGES>(st);
            }
        }
#if GM_CLUSTER > 1
        // the tail (CUTLASS's load_tail): every stage acquired once more, so
        // the consumers of both blocks released all the stages this block
        // filled — their remote arrivals landed — before the block exits
        mc_ring_drain(ring, st);
#endif
        return;
    }

    // ---- consumers: warp group c, its warp w (0..3) owns rows 16w..16w+15 of the group's 64
#if GM_CONSUMER_REGS > 0
    mc_regs_inc<GM_CONSUMER_REGS>();
#endif
    const int c = mc_warp_uniform(wg - 1), w = warp & 3, g = lane >> 2, tq4 = lane & 3;
    const u32 base = mc_saddr(smem);
    mc_ring_state st = {0, 0};
    // the block's items this group runs: all (each its 64 rows of them), or
    // (ping-pong) every other one, from the block's c-th, its ring stages
    // c ksteps on
    const i64 first_t = blockIdx.x / GM_CLUSTER, walk = gridDim.x / GM_CLUSTER;
#if GM_PINGPONG
    const i64 t0 = first_t + c * walk, dt = 2 * walk;
    const int own_a = 0;   // the stage's first A box: the item's rows 0..
    mc_ring_skip<GM_STAGES>(st, c * ksteps);
#else
    const i64 t0 = first_t, dt = walk;
    const int own_a = c;   // the group's A box of the stage
#endif
#if GM_TMA_STORE
    // this group's two output box buffers, after the ring
    unsigned char* osm = smem + GM_STAGES * GM_STAGE + c * 2 * GM_OBOX;
    const bool leader = w == 0 && lane == 0;
    int obox = 0;   // boxes this group has stored: the next one's buffer is obox % 2
#endif
    float d[GM_ACC];
#pragma unroll
    for (int v = 0; v < GM_ACC; v++) d[v] = 0.0f;
#pragma unroll 1
    for (i64 t = t0; t < n_items; t += dt) {
        const gm_item it = gm_item_of(t, rank);
        int steps = ksteps;
        mc_opaque(steps);   // a loop, not straight-line code (hopper.cuh)
#if GM_PROLOGUE_RS
        // A from registers, a K step at a time: its fragments computed,
        // its wgmmas issued and waited for (wait_group 0, DeepGEMM's
        // order: ptxas serialises a wgmma whose A registers another
        // instruction defines while a wgmma is in flight, advisory C7513)
        // before the next step's; the other consumer group's wgmmas fill
        // the tensor cores meanwhile
#pragma unroll
        for (int v = 0; v < GM_ACC; v++) d[v] = 0.0f;
        u32 af[16];
#pragma unroll 1
        for (int s = 0; s < steps; s++) {
            mc_ring_wait(ring, st);
            gm_prologue_rs(st.stage, c, s, af, MC_ARGS);
            mc_fence_regs<GM_ACC>(d);
            mc_fence_regs<16>(af);
            mc_wgmma_fence();
            gm_issue_rs(d, af, base + st.stage * GM_STAGE + GM_A_BYTES);
            mc_wgmma_wait<0>();
            mc_fence_regs<GM_ACC>(d);
            mc_fence_regs<16>(af);
            gm_ring_release(ring, st, lane);
            mc_ring_next<GM_STAGES>(st);
        }
#else
        // the first K step. Ping-pong: once the other group has issued its
        // item's last wgmmas — it has waited for every stage before this
        // item's, so this group's stages are a lap behind none of it and
        // the ring's phase bit tells this lap's fill from the last one's
#if GM_PINGPONG
        if (t != first_t) mc_bar_sync(GM_TURN + c, 256);
#endif
        mc_ring_wait(ring, st);
#if GM_PROLOGUE
        gm_prologue(smem + st.stage * GM_STAGE, st.stage, c, 0, MC_ARGS);
#endif
        u32 at = base + st.stage * GM_STAGE, a_own = at + own_a * GM_ABOX;
        mc_fence_regs<GM_ACC>(d);
        mc_wgmma_fence();
        gm_issue(d, a_own, at + GM_A_BYTES, 1);
        mc_ring_state prev = st;
        mc_ring_next<GM_STAGES>(st);
#pragma unroll 1
        for (int s = 1; s < steps; s++) {
            mc_ring_wait(ring, st);
#if GM_PROLOGUE
            gm_prologue(smem + st.stage * GM_STAGE, st.stage, c, s, MC_ARGS);
#endif
            at = base + st.stage * GM_STAGE;
            a_own = at + own_a * GM_ABOX;
            mc_fence_regs<GM_ACC>(d);
            mc_wgmma_fence();
            gm_issue(d, a_own, at + GM_A_BYTES, 0);
            mc_wgmma_wait<1>();   // the previous step's wgmmas retired: its stage goes back
            mc_fence_regs<GM_ACC>(d);
            gm_ring_release(ring, prev, lane);
            prev = st;
            mc_ring_next<GM_STAGES>(st);
        }
#if GM_PINGPONG
        // the next item's mainloop (the other group's) may issue
        if (t + walk < n_items) mc_bar_arrive(GM_TURN + 1 - c, 256);
#endif
        mc_wgmma_wait<0>();
        mc_fence_regs<GM_ACC>(d);
        gm_ring_release(ring, prev, lane);
#if GM_PINGPONG
        mc_ring_skip<GM_STAGES>(st, ksteps);   // past the other group's item
#endif
#endif
#if GM_CLUSTER > 1
        // the last pair's rank-1 tile wholly past M (GM_TILES_M odd): its
        // stages consumed and released, nothing to store
        if (it.m0 >= GM_M) continue;
#endif
        // the epilogue, a row block of 64 at a time: the group's (64c..), or
        // (ping-pong) each of the item's, from accumulators d + r GM_BN / 2
#pragma unroll
        for (int r = 0; r < GM_RB; r++) {
            const int rb = GM_PINGPONG ? r : c;
            const float* dr = d + r * (GM_BN / 2);
#if GM_ROW_SCALE
            // A = P * s: the product's rows scaled by s[m], loaded once for each
            // of this thread's two accumulator rows (16w + g and 16w + g + 8;
            // the epilogue multiplies value v by rs[(v / 2) % 2])
            const i64 sm = (i64)it.m0 + 64 * rb + 16 * w + g;   // (r0.. are the kernel's reads)
            const float rs[2] = {GM_IN_M(sm) ? gm_row_scale(it.b, sm, MC_ARGS) : 0.0f,
                                 GM_IN_M(sm + 8) ? gm_row_scale(it.b, sm + 8, MC_ARGS) : 0.0f};
#else
            const float* rs = 0;
#endif

#if GM_TMA_STORE
            // the epilogue through this group's box buffers and the TMA (see the top)
#pragma unroll
            for (int j = 0; j < GM_OBN / 64; j++) {
                // a box wholly past N or M stores nothing (alike for the group's threads)
                if ((GM_GLU ? it.n0 / 2 : it.n0) + 64 * j >= GM_ON || it.m0 + 64 * rb >= GM_M) break;
                unsigned char* ob = osm + (obox & 1) * GM_OBOX;
                gm_box_out(ob, dr, rs, j, it, rb, w, g, tq4, MC_ARGS);
                mc_fence_proxy_async();
                if (leader) mc_bulk_wait_read0();   // the other buffer's store has read it
                mc_bar_sync(GM_OBAR + c, 128);
                if (leader) {
                    const int co[5] = {(GM_GLU ? it.n0 / 2 : it.n0) + 64 * j, it.m0 + 64 * rb, (int)it.b, 0, 0};
                    mc_tma_store(to, ob, co);
                    mc_bulk_commit();
                }
                obox++;
            }
#else
            // the epilogue from the accumulators: value v of this thread is row
            // 16w + g + 8((v/2)%2) of the row block, column 8(v/4) + 2 tq4 + v%2
            const i64 row0 = (i64)it.m0 + 64 * rb + 16 * w + g;
#if GM_GLU
            // the paired epilogue: value v of an even 8-column block (a gate's)
            // and v + 4 (its up column, the next block) make output column
            // n0 / 2 + 8(v/8) + 2 tq4 + v%2
#pragma unroll
            for (int q = 0; q < GM_BN / 4; q++) {
                const int v = (q & 3) | ((q >> 2) << 3);   // the q-th value of a gate block
                const i64 m = row0 + 8 * ((v >> 1) & 1), n = (i64)it.n0 / 2 + 8 * (v >> 3) + 2 * tq4 + (v & 1);
                if (GM_IN_M(m) && GM_IN_O(n))
                    mm_store(it.b, m, n, mm_pair(GM_SCALED(dr[v], rs, v), GM_SCALED(dr[v + 4], rs, v)), MC_ARGS);
            }
#else
#pragma unroll
            for (int v = 0; v < GM_BN / 2; v++) {
                const i64 m = row0 + 8 * ((v >> 1) & 1), n = (i64)it.n0 + 8 * (v >> 2) + 2 * tq4 + (v & 1);
                if (GM_IN_M(m) && GM_IN_N(n)) mm_store(it.b, m, n, GM_SCALED(dr[v], rs, v), MC_ARGS);
            }
#endif
#endif
        }
    }
#if GM_TMA_STORE
    if (leader) mc_bulk_wait0();   // the output's writes are done before the block exits
#endif
}
// ---- end of GEMM (sm_90a)
