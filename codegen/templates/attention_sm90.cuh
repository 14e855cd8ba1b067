// ---- streaming attention, sm_90a: TMA + mbarriers + wgmma, warp specialised
//
// What the plan gives (kernelplan/launch_sm90.c, generated before this text
// by codegen/tpl_attention_sm90.c):
//   ATT_D (= DV: 64, 96, 128, 256), ATT_BN keys per K/V tile, ATT_CWG consumer
//   warp groups of 64 query rows each (ATT_BM = 64 ATT_CWG rows per work
//   item), ATT_STAGES stages of the K/V ring;
//   the problem: ATT_NB items of leading dims, ATT_NR query rows per item,
//   ATT_NQ queries per head (ATT_PACK heads of a GQA / MQA group packed into
//   the rows: row r is query r % ATT_NQ of head r / ATT_NQ; 1: no packing),
//   ATT_NK keys, ATT_QTILES = ceil(NR / BM), ATT_SPLITS splits of
//   ATT_CHUNK keys (split-KV decoding, ATT_SPLIT_KV: the partials and the
//   merge, with ATT_SPLITS >= 1 at these sizes; else 1), ATT_CAUSAL, ATT_BF16,
//   ATT_SCALE; ATT_PRODUCER_REGS / ATT_CONSUMER_REGS (setmaxnreg with two
//   consumer groups); ATT_MASK (0 none, 1 a mask tile per row, 2 one mask row for
//   every query: the mask broadcasts over queries), ATT_M_ES its element
//   bytes and att_mask_val(p) its value; ATT_TMA_STORE (O through the TMA);
//   ATT_ORDER / ATT_SEC the items' order, ATT_DYNAMIC the dynamic scheduler
//   (its counters: the kernel's sched argument, zero at launch);
//   att_coords_{q,k,v,m,o}(b, c): the item's leading coordinates in each
//   tensor map (2..4; 0 where the operand broadcasts: a GQA K/V head is
//   read once per group, never repeated); O_SR / O_SD / o_off / ATT_ST_O
//   (O's view, per-thread stores); with splits, att_partial_o / _ml (the
//   f32 scratch of partials, merged by NAME_merge); the wgmma wrappers
//   att_wgmma_s (m64n<ATT_BN>k16, both operands in shared memory, K-major)
//   and att_wgmma_o (m64n<ATT_D>k16, A from registers, B MN-major);
//   ATT_CLUSTER 2: blocks in 2-block clusters sharing K and V (below), 1:
//   none.
// What it promises: Q, K, V and the mask are read only by the TMA (5-D
// maps (d or key, row, leading dims); 128-byte swizzle, 64 columns of Q /
// K / V per box; rows past the tensor arrive as zeros), each K/V tile of a
// work item once; O is written once, by the TMA (or per thread; or, with
// splits, the partials), rows < NR only. Barriers: the ring's 2 x STAGES
// mbarriers and Q's 2, named barriers 1..2 (turns) and 3..4 (O tile).
//
// Block: warp group 0 is the producer (setmaxnreg.dec): one thread loads
// each item's Q tile (once the consumers released the previous one) and
// its K/V (and mask) tiles through the ring. Consumer warp group c
// (setmaxnreg.inc) owns rows 64c..64c+63 of the item: per K/V tile, S = Q K^T
// (wgmma, shared operands, 128-byte swizzle), the online softmax in
// registers, P converted from the S accumulators into wgmma A fragments and
// O += P V (wgmma, A from registers). The mainloop is FlashAttention-3's:
// the first tile is peeled, then each turn issues S of tile i and P V of
// tile i-1 back to back, waits for S only (wait_group 1) and runs the
// softmax of tile i while P V runs, waits for P V (wait_group 0), and only
// then rescales O and converts P of tile i — no register operand of an
// in-flight wgmma is touched, and no issue or wait sits under a branch.
// Score columns >= NK are -inf; causal: column j of query i is masked when
// j > i + (NK - NQ), and K/V tiles past the item's last visible column are
// never loaded (an item with none still streams one, fully masked, tile).
// A row whose every score is -inf gets 0.
//
// ATT_CLUSTER 2 (FlashAttention-3's cluster, CUTLASS's multicast): the two
// blocks of a cluster take adjacent q-tiles of one head (items 2u and
// 2u + 1 of the walk, u the cluster's), so they stream the same K and V
// tiles; each block's producer loads half of every K and V tile (the
// 64-column boxes j with j % 2 = its rank) and multicasts it into both
// blocks, so the L2 sends each tile once per cluster, not once per block.
// Each block's full barrier still expects the whole tile (the peer's copy
// completes on it), and a K or V stage is free for a producer only once
// the consumers of both blocks released it: its empty barriers count the
// consumer warps of both, and a consumer warp releases a stage in both
// blocks (lane r arrives on block r's barrier). The blocks start after a
// barrier.cluster (each one's mbarriers initialised before the other
// copies or arrives on them), and a producer ends by acquiring every K and
// V stage once more (mc_ring_drain): no block exits while its peer may
// still arrive on its barriers. Q and O stay each block's own. Only where
// every item streams the same tiles in the same order: non-causal, no
// mask, no split-KV, the static walk, an even number of q-tiles and of
// 64-column boxes (d 96, 128, 256).

#if ATT_CLUSTER > 1   // (nested: the sizes below are constants only where a cluster is planned)
#if ATT_CAUSAL || ATT_MASK || ATT_SPLITS > 1 || ATT_DYNAMIC || ATT_QTILES % 2 || ((ATT_D + 63) / 64) % 2
#error "ATT_CLUSTER 2 needs a non-causal, unmasked, unsplit, static walk over an even number of q-tiles and of boxes"
#endif
#endif

#define ATT_BM (64 * ATT_CWG)
#define ATT_DB ((ATT_D + 63) / 64)                // 64-column boxes per row (d 96: the second
                                                  // box's last 32 columns arrive as zeros, unread)
#define ATT_QBOX (64 * 128)                       // one 64-row Q box, bytes
#define ATT_KVBOX (ATT_BN * 128)                  // one K or V box, bytes
#define ATT_Q_BYTES (ATT_CWG * ATT_DB * ATT_QBOX)
// the mask tile of a stage: per consumer group, boxes of ATT_MB bytes x 64
// rows (min(128, BN x element bytes), swizzled at that width: the 16-byte
// chunks of a row permuted by ATT_MSWZ), or one unswizzled row of BN
// values (ATT_MASK 2)
#if ATT_MASK == 1
#define ATT_MB (ATT_BN * ATT_M_ES < 128 ? ATT_BN * ATT_M_ES : 128)
#define ATT_MSWZ (ATT_MB == 128 ? 0x70 : ATT_MB == 64 ? 0x30 : 0x10)
#define ATT_MCOLS (ATT_MB / ATT_M_ES)             // mask columns per box
#define ATT_MBOXES (ATT_BN / ATT_MCOLS)
#define ATT_M_GROUP (ATT_MBOXES * 64 * ATT_MB)
#define ATT_M_BYTES (ATT_CWG * ATT_M_GROUP)
#define ATT_M_SPACE ATT_M_BYTES
#elif ATT_MASK == 2
#define ATT_M_BYTES (ATT_BN * ATT_M_ES)
#define ATT_M_SPACE ((ATT_M_BYTES + 1023) / 1024 * 1024)
#define ATT_M_GROUP 0
#else
#define ATT_M_BYTES 0
#define ATT_M_SPACE 0
#define ATT_M_GROUP 0
#endif
#define ATT_KV_BYTES (ATT_DB * ATT_KVBOX)        // one K or V tile
#define ATT_KSTAGE (ATT_KV_BYTES + ATT_M_SPACE)   // a K stage: K and the mask tile
#define ATT_K_RING (ATT_STAGES * ATT_KSTAGE)
// O is staged through Q's slot only where the TMA stores it and shared
// memory has no O stage of its own; Q goes back after the item's last S
// otherwise
#define ATT_O_IN_Q (ATT_TMA_STORE && !ATT_O_STAGE && !ATT_SPLIT_KV)
#define ATT_TURN 1   // named barriers 1 + c: group c's turn to issue (count 256)
#define ATT_OBAR 3   // 3 + c: group c's O tile is in shared memory (count 128)

__device__ __forceinline__ u32 att_pack(float lo, float hi) {
#if ATT_BF16
    return mc_pack_bf16(lo, hi);
#else
    return mc_pack_f16(lo, hi);
#endif
}

// A persistent block's walk over the items: pass p takes item p·G + k
// (G blocks, this is block k), every other pass in reverse (p·G + G-1-k),
// so that with the longest items first each block's sum of lengths evens
// out; -1 past the last item.
// With ATT_CLUSTER 2 the walk is the clusters' (G / 2 of them, over the
// pairs of items), block r of a cluster taking item 2u + r of its pair u.
__device__ __forceinline__ i64 att_walk(int pass) {
#if ATT_CLUSTER > 1
    const i64 n_pairs = (i64)ATT_NB * ATT_QTILES / 2, g = gridDim.x / 2;
    const i64 u = (i64)pass * g + blockIdx.x / 2;
    return u < n_pairs ? 2 * u + (i64)(blockIdx.x & 1) : -1;
#else
    const i64 n_items = (i64)ATT_NB * ATT_QTILES * ATT_SPLITS, g = gridDim.x;
    const i64 t = (i64)pass * g + ((pass & 1) && ATT_ORDER == 1 ? g - 1 - blockIdx.x : blockIdx.x);
    return t < n_items ? t : -1;
#endif
}

#if ATT_DYNAMIC
// The dynamic scheduler (FlashAttention-3's DynamicPersistentTileScheduler):
// block k's first item is k; once its producer has issued an item's last K
// tile it claims the next, the counter's value + G, in the same order as att_walk's (longest first where
// causal), so a block that drew short items takes more of them. The item
// reaches the consumers with the Q tile (att_qitem, written before the Q
// stage's arrival, read after its wait); -1 ends the walk. sched[0]: the
// claims; sched[1]: the blocks whose producer is done. The last of those
// zeroes both, so the counters (zero when the run was prepared) are zero
// again for the next launch or graph replay.
__device__ __forceinline__ int att_claim(u32* sched) {
    const u32 n_items = (u32)((i64)ATT_NB * ATT_QTILES * ATT_SPLITS);
    const u32 t = mc_atomic_add_u32(sched, 1u) + gridDim.x;
    return t < n_items ? (int)t : -1;
}
__device__ __forceinline__ void att_sched_done(u32* sched) {
    mc_fence_gpu();   // this block's claims come before its count
    if (mc_atomic_add_u32(sched + 1, 1u) == gridDim.x - 1) {
        mc_fence_gpu();   // every block's claims and counts come before the reset
        mc_atomic_exch_u32(sched, 0u);
        mc_atomic_exch_u32(sched + 1, 0u);
    }
}
#endif

// A work item: leading index b, first packed row r0, split; the keys it
// streams, [kv0, kv0 + tiles * BN). Rows and keys are 32-bit (the TMA's
// coordinates; the planner checks NR and NK < 2^31).
struct att_item {
    i64 b;
    int r0, split, tiles, kv0;
};
// Item t of the launch. ATT_ORDER 0: q-tiles fastest (the q-tiles of one
// K/V head run side by side and share its K and V in the L2). ATT_ORDER 1
// (causal): the longest items first — per section of ATT_SEC leading
// items (as many K/V heads as half the L2 holds), the q-tiles from the
// last (the most keys) down, the section's heads fastest. I: i64, or int
// where the index is the dynamic scheduler's (a u32 counter; the planner
// keeps the items below 2^31), which keeps the producer's 24 registers.
template <typename I>
__device__ __forceinline__ att_item att_item_of(I t) {
    att_item it;
    it.split = (int)(t % (I)ATT_SPLITS);
    t /= (I)ATT_SPLITS;
#if ATT_ORDER == 1
    {
        I sec = (I)ATT_SEC < (I)ATT_NB ? (I)ATT_SEC : (I)ATT_NB;
        if (sec < 1) sec = 1;
        const I full = (I)ATT_NB / sec * sec;   // heads in whole sections
        I b0 = 0, n = sec, u = t;
        if (t < full * (I)ATT_QTILES) {
            b0 = t / (sec * (I)ATT_QTILES) * sec;
            u = t % (sec * (I)ATT_QTILES);
        } else {
            b0 = full;
            n = (I)ATT_NB - full;
            u = t - full * (I)ATT_QTILES;
        }
        it.r0 = (int)((I)ATT_QTILES - 1 - u / n) * ATT_BM;
        it.b = (i64)(b0 + u % n);
    }
#else
    it.r0 = (int)(t % (I)ATT_QTILES) * ATT_BM;
    it.b = (i64)(t / (I)ATT_QTILES);
#endif
    it.kv0 = it.split * (int)ATT_CHUNK;
    int end = it.kv0 + (int)ATT_CHUNK < (int)ATT_NK ? it.kv0 + (int)ATT_CHUNK : (int)ATT_NK;
#if ATT_CAUSAL
    // the last query the item holds (a tile that wraps to the next packed
    // head holds query NQ - 1) sees columns < lim
    const int last = it.r0 + ATT_BM - 1 < (int)ATT_NR - 1 ? it.r0 + ATT_BM - 1 : (int)ATT_NR - 1;
    const int qmax = (ATT_PACK > 1 && last / (int)ATT_NQ != it.r0 / (int)ATT_NQ) ? (int)ATT_NQ - 1 : last % (int)ATT_NQ;
    const int lim = qmax + (int)(ATT_NK - ATT_NQ) + 1;
    if (lim < end) end = lim;
#endif
    it.tiles = end > it.kv0 ? (int)((end - it.kv0 + ATT_BN - 1) / ATT_BN) : 1;
    return it;
}

// S (+)= Q K^T for one K/V tile: 64 x ATT_BN, k-steps of 16 head-dim
// columns (32 bytes inside a 128-byte swizzle row, a new box every 4); the
// first step overwrites S, or accumulates onto the mask (att_init_s)
__device__ __forceinline__ void att_issue_s(float* sc, u32 q_at, u32 k_at) {
    const u64 dq = mc_desc_sw128(q_at, 16, 1024), dk = mc_desc_sw128(k_at, 16, 1024);
#pragma unroll
    for (int kk = 0; kk < ATT_D / 16; kk++)
        att_wgmma_s(sc, mc_desc_add(dq, (kk / 4) * ATT_QBOX + (kk % 4) * 32),
                    mc_desc_add(dk, (kk / 4) * ATT_KVBOX + (kk % 4) * 32), kk > 0 || ATT_MASK);
    mc_wgmma_commit();
}
// O += P V for one K/V tile: P in registers (A fragments), V MN-major
__device__ __forceinline__ void att_issue_pv(float* o, const u32* pa, u32 v_at) {
    const u64 dv = mc_desc_sw128(v_at, ATT_KVBOX, 1024);
#pragma unroll
    for (int kk = 0; kk < ATT_BN / 16; kk++) att_wgmma_o(o, pa + 4 * kk, mc_desc_add(dv, kk * 16 * 128));
    mc_wgmma_commit();
}

// Ping-pong between the two consumer groups (FlashAttention-3's
// inter-warpgroup overlap): group c's turn to issue its GEMMs opens at
// named barrier ATT_TURN + c (the 128 threads of c waiting, the other
// group's 128 arriving); at the end of its turn it arrives on the other
// group's barrier. Group 1 opens group 0's first turn; both take one turn
// per K/V tile of an item (the same count), and group 0 consumes the last
// hand-over before exiting.
__device__ __forceinline__ void att_turn_begin(int c) {
#if ATT_CWG > 1
    mc_bar_sync(ATT_TURN + c, 256);
#else
    (void)c;
#endif
}
__device__ __forceinline__ void att_turn_end(int c) {
#if ATT_CWG > 1
    mc_bar_arrive(ATT_TURN + 1 - c, 256);
#else
    (void)c;
#endif
}

// The mask enters S through its accumulators: they start at mask / scale
// (zero without a mask) and the first k-step of S = Q K^T accumulates onto
// them, so the softmax below sees scale·QKᵀ + mask with no mask registers
// of its own. Value v of this thread: row lr_a + 8((v/2)%2) of the group,
// column 8(v/4) + 2 tq4 + v%2 of the tile.
__device__ __forceinline__ void att_init_s(float* sc, u32 ms, int lr_a, int tq4) {
    const float inv = 1.0f / ATT_SCALE;
#if ATT_MASK == 1
    // a thread's column pairs, one 32-bit (64-bit for f32) load each: the
    // pair in its swizzled box, a row's 16-byte chunks permuted by the
    // row's address bits (the same for rows lr_a and lr_a + 8; a pair never
    // straddles a chunk)
#pragma unroll
    for (int v = 0; v < ATT_BN / 2; v += 2) {
        const int hi = (v >> 1) & 1, col = 8 * (v >> 2) + 2 * tq4;
        const u32 p = ms + (col / ATT_MCOLS) * (64 * ATT_MB) + (lr_a + 8 * hi) * ATT_MB +
                      (((col % ATT_MCOLS) * ATT_M_ES) ^ (((lr_a * ATT_MB) >> 3) & ATT_MSWZ));
        float m0, m1;
        ATT_MASK_PAIR(p, m0, m1);
        sc[v] = m0 * inv;
        sc[v + 1] = m1 * inv;
    }
#elif ATT_MASK == 2
    // one row for every query: rows lr_a and lr_a + 8 take the same pair
#pragma unroll
    for (int v = 0; v < ATT_BN / 2; v += 4) {
        const int col = 8 * (v >> 2) + 2 * tq4;
        float m0, m1;
        ATT_MASK_PAIR(ms + col * ATT_M_ES, m0, m1);
        sc[v] = sc[v + 2] = m0 * inv;
        sc[v + 1] = sc[v + 3] = m1 * inv;
    }
    (void)lr_a;
#else
    (void)ms, (void)lr_a, (void)tq4, (void)inv;
#pragma unroll
    for (int v = 0; v < ATT_BN / 2; v++) sc[v] = 0.0f;
#endif
}

// 2^x by the SFU's ex2 (2^−inf = 0), as __expf uses it
__device__ __forceinline__ float att_exp2(float x) {
#ifdef MC_EMULATE
    return exp2f(x);
#else
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#endif
}

// Whether a K/V tile needs the per-score key mask for any row of consumer
// group c (uniform over the group, as the loops that branch on it must be:
// wgmma is warp-group wide): it reaches past the group's smallest last
// visible key — NK - 1, causal: i + NK - NQ for the group's smallest query
// i (0 where the group's rows wrap to another packed head).
__device__ __forceinline__ int att_group_lim(const att_item& it, int c) {
    int lim = (int)ATT_NK - 1;
#if ATT_CAUSAL
    const int first = it.r0 + 64 * c;
    const int last = first + 63 < (int)ATT_NR - 1 ? first + 63 : (int)ATT_NR - 1;
    const int qmin = (ATT_PACK > 1 && last / (int)ATT_NQ != first / (int)ATT_NQ) ? 0 : first % (int)ATT_NQ;
    const int cl = qmin + (int)(ATT_NK - ATT_NQ);
    if (cl < lim) lim = cl;
#else
    (void)it, (void)c;
#endif
    return lim;
}
// The tiles of an item, from the first, that no row of group c masks
__device__ __forceinline__ int att_plain_tiles(const att_item& it, int c) {
    const int lim = att_group_lim(it, c);
    const int n = lim + 1 - it.kv0 >= 0 ? (lim + 1 - it.kv0) / ATT_BN : 0;
    return n < it.tiles ? n : it.tiles;
}

// The online softmax of one S tile: scale, causal and key-range masking
// (MASK: the tile reaches past a row's last visible key; the loops run the
// tiles that need it apart, so no branch on it sits between the waits),
// running max m and sum l (per-thread partials: the quad is summed at the
// end), P = e^(S - m) in place; alpha: the factor O takes.
template <bool MASK>
__device__ __forceinline__ void att_softmax(float* sc, int kv0, int row_a, int tq4, float* m_r, float* l_r,
                                            float* alpha) {
    float mx[2] = {MC_NINF, MC_NINF};
    if (!(ATT_SCALE > 0.0f)) {   // scale <= 0: scale first, then mask and max (natural units)
#pragma unroll
        for (int v = 0; v < ATT_BN / 2; v++) sc[v] *= ATT_SCALE;
    }
    if (MASK) {
        // keys >= NK are dead; causal: keys > lim[r] too (the row's query i
        // sees j <= i + NK - NQ)
        int lim[2] = {(int)ATT_NK - 1, (int)ATT_NK - 1};
#if ATT_CAUSAL
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int qi = ATT_PACK > 1 ? (row_a + 8 * r) % (int)ATT_NQ : row_a + 8 * r;
            const int c = qi + (int)(ATT_NK - ATT_NQ);
            lim[r] = c < lim[r] ? c : lim[r];
        }
#endif
#pragma unroll
        for (int v = 0; v < ATT_BN / 2; v++) {
            const int hi = (v >> 1) & 1, kj = kv0 + 8 * (v >> 2) + 2 * tq4 + (v & 1);
            if (kj > lim[hi]) sc[v] = MC_NINF;
        }
    } else {
        (void)kv0, (void)row_a, (void)tq4;
    }
    if (ATT_SCALE > 0.0f) {
        // FlashAttention-3's exponent: the running max of the raw scores
        // (scale > 0 keeps their order) and p = 2^(s·scale·log2e − m·scale·log2e),
        // one FFMA and one ex2 per score; an all-masked row keeps m = −inf
        // and takes 0 as its offset, so its p are 2^−inf = 0
        const float sl2 = ATT_SCALE * 1.4426950408889634f;
#pragma unroll
        for (int v = 0; v < ATT_BN / 2; v++) mx[(v >> 1) & 1] = fmaxf(mx[(v >> 1) & 1], sc[v]);
        float off[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float mnew = fmaxf(m_r[r], mx[r]);
            off[r] = mnew == MC_NINF ? 0.0f : mnew * sl2;
            alpha[r] = att_exp2(fmaf(m_r[r], sl2, -off[r]));   // m_r = −inf: 0
            m_r[r] = mnew;
            l_r[r] *= alpha[r];
        }
#pragma unroll
        for (int v = 0; v < ATT_BN / 2; v++) {
            const float pv = att_exp2(fmaf(sc[v], sl2, -off[(v >> 1) & 1]));
            sc[v] = pv;
            l_r[(v >> 1) & 1] += pv;
        }
        return;
    }
#pragma unroll
    for (int v = 0; v < ATT_BN / 2; v++) mx[(v >> 1) & 1] = fmaxf(mx[(v >> 1) & 1], sc[v]);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        const float mnew = fmaxf(m_r[r], mx[r]);
        alpha[r] = (m_r[r] == MC_NINF) ? 0.0f : __expf(m_r[r] - mnew);
        m_r[r] = mnew;
        l_r[r] *= alpha[r];
    }
#pragma unroll
    for (int v = 0; v < ATT_BN / 2; v++) {
        const float m = m_r[(v >> 1) & 1];
        const float p = (m == MC_NINF) ? 0.0f : __expf(sc[v] - m);
        sc[v] = p;
        l_r[(v >> 1) & 1] += p;
    }
}
// The running max in the scores' natural units (scale·q·k + mask), as the
// split-KV merge reads it: kept raw (unscaled) where scale > 0
__device__ __forceinline__ float att_max_natural(float m) { return ATT_SCALE > 0.0f ? m * ATT_SCALE : m; }
// P's A fragment for keys 16kk..16kk+15 is S values 4(2kk + r/2) + 2(r%2)
// (+1) of register r
__device__ __forceinline__ void att_convert_p(u32* pa, const float* sc) {
#pragma unroll
    for (int kk = 0; kk < ATT_BN / 16; kk++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int v = 4 * (2 * kk + (r >> 1)) + 2 * (r & 1);
            pa[4 * kk + r] = att_pack(sc[v], sc[v + 1]);
        }
}

// The 64-column boxes of a K or V tile at key row `row` into stage sp:
// all of them, or (ATT_CLUSTER 2) those of this block's rank, multicast
// into both blocks of the cluster
__device__ __forceinline__ void att_load_kv_boxes(unsigned char* sp, const CUtensorMap* map, int* c, int row, u64* bar,
                                                  u64 keep) {
#if ATT_CLUSTER > 1
    for (int j = (int)mc_cluster_rank(); j < ATT_DB; j += 2) {
        c[0] = 64 * j;
        c[1] = row;
        mc_tma_load_multicast_hint(sp + j * ATT_KVBOX, map, c, bar, (unsigned short)3, keep);
    }
#else
    for (int j = 0; j < ATT_DB; j++) {
        c[0] = 64 * j;
        c[1] = row;
        mc_tma_load_hint(sp + j * ATT_KVBOX, map, c, bar, keep);
    }
#endif
}
// A consumer warp is done with a K or V stage: in its block, or (ATT_CLUSTER
// 2) in both blocks of the cluster (the peer's producer refills it too)
template <int STAGES>
__device__ __forceinline__ void att_release_kv(mc_ring<STAGES>& r, const mc_ring_state& s, int lane) {
#if ATT_CLUSTER > 1
    mc_ring_release_cluster(r, s, lane, 2);
#else
    mc_ring_release(r, s, lane);
#endif
}

// The producer's loads: K tile i of an item (and its mask tile) into the
// next K stage; V tile i into the next V stage
__device__ __forceinline__ void att_load_k(const att_item& it, int i, mc_ring<ATT_STAGES>& kring, mc_ring_state& ks,
                                           unsigned char* Ks, const CUtensorMap* tk, int* ck, const CUtensorMap* tm,
                                           int* cm, u64 keep) {
    const int kv0 = it.kv0 + i * ATT_BN;
    u64* bar = mc_ring_acquire(kring, ks, ATT_KV_BYTES + ATT_M_BYTES);
    unsigned char* sp = Ks + ks.stage * ATT_KSTAGE;
    att_load_kv_boxes(sp, tk, ck, kv0, bar, keep);
#if ATT_MASK == 1
    for (int g = 0; g < ATT_CWG; g++)
        for (int j = 0; j < ATT_MBOXES; j++) {
            cm[0] = kv0 + j * ATT_MCOLS;
            cm[1] = it.r0 + 64 * g;
            mc_tma_load(sp + ATT_KV_BYTES + g * ATT_M_GROUP + j * (64 * ATT_MB), tm, cm, bar);
        }
#elif ATT_MASK == 2
    cm[0] = kv0;
    cm[1] = 0;
    mc_tma_load(sp + ATT_KV_BYTES, tm, cm, bar);
#else
    (void)tm, (void)cm;
#endif
    mc_ring_next<ATT_STAGES>(ks);
}
__device__ __forceinline__ void att_load_v(const att_item& it, int i, mc_ring<ATT_STAGES>& vring, mc_ring_state& vs,
                                           unsigned char* Vs, const CUtensorMap* tv, int* cv, u64 keep) {
    u64* bar = mc_ring_acquire(vring, vs, ATT_KV_BYTES);
    unsigned char* sp = Vs + vs.stage * ATT_KV_BYTES;
    att_load_kv_boxes(sp, tv, cv, it.kv0 + i * ATT_BN, bar, keep);
    mc_ring_next<ATT_STAGES>(vs);
}

// O takes the previous tile's factor, then O += P V of the tile in the
// next V stage (once it landed): issued, not waited for
__device__ __forceinline__ void att_rescale_issue_pv(float* o, u32* pa, const float* alpha,
                                                     mc_ring<ATT_STAGES>& vring, const mc_ring_state& vs,
                                                     u32 v_base) {
#pragma unroll
    for (int v = 0; v < ATT_D / 2; v++) o[v] *= alpha[(v >> 1) & 1];
    mc_ring_wait(vring, vs);
    mc_fence_regs<ATT_D / 2>(o);
    mc_fence_regs<ATT_BN / 4>(pa);
    mc_wgmma_fence();
    att_issue_pv(o, pa, v_base + vs.stage * ATT_KV_BYTES);
}

// Tile i >= 1 of an item in consumer group c: this group's turn issues
// S(i), rescales O (P V(i-2) has retired) and issues P V(i-1) behind it;
// the other group's softmax runs meanwhile. K(i) goes back once S(i) has
// landed (wait_group 1), the softmax of tile i runs while P V(i-1) does,
// V(i-1) goes back once that retired (wait_group 0), and P(i) is converted.
template <bool MASKED>
__device__ __forceinline__ void att_step(const att_item& it, int i, int c, int lr_a, int row_a, int tq4, int lane,
                                         u32 q_at, u32 k_base, u32 v_base, mc_ring<ATT_STAGES>& kring,
                                         mc_ring<ATT_STAGES>& vring, mc_ring_state& ks, mc_ring_state& vs, float* o,
                                         float* sc, u32* pa, float* m_r, float* l_r, float* alpha, float* anchor) {
    mc_ring_wait(kring, ks);
    const u32 k_at = k_base + ks.stage * ATT_KSTAGE;
    if (ATT_MASK) att_init_s(sc, k_at + ATT_KV_BYTES + c * ATT_M_GROUP, lr_a, tq4);
    att_turn_begin(c);
    mc_fence_regs<ATT_BN / 2>(sc);
    mc_wgmma_fence();
    att_issue_s(sc, q_at, k_at);
    att_rescale_issue_pv(o, pa, alpha, vring, vs, v_base);
    att_turn_end(c);
    mc_wgmma_wait<1>();   // S has landed; P V may still run
    mc_fence_regs<ATT_BN / 2>(sc);
    att_release_kv(kring, ks, lane);
    mc_ring_next<ATT_STAGES>(ks);
    att_softmax<MASKED>(sc, it.kv0 + i * ATT_BN, row_a, tq4, m_r, l_r, alpha);
    mc_anchor_wait(anchor, l_r[0] + l_r[1]);   // the sums need every exponential: the wait stays behind them
    mc_wgmma_wait<0>();   // P V of tile i-1 retired: V goes back, O and P are free
    mc_fence_regs<ATT_D / 2>(o);
    mc_fence_regs<ATT_BN / 4>(pa);
    att_convert_p(pa, sc);
    att_release_kv(vring, vs, lane);
    mc_ring_next<ATT_STAGES>(vs);
}

__device__ __forceinline__ void mc_attention_sm90(const CUtensorMap* tq, const CUtensorMap* tk, const CUtensorMap* tv,
                                                  const CUtensorMap* tm, const CUtensorMap* to, ATT_O_T* O,
                                                  float* P, u32* sched) {
    MC_DYNAMIC_SMEM(mc_smem_raw);
    __shared__ __align__(8) mc_ring<1> qring;             // Q: one stage, released by the consumers
    __shared__ __align__(8) mc_ring<ATT_STAGES> kring;    // K (and the mask), released once S has landed
    __shared__ __align__(8) mc_ring<ATT_STAGES> vring;    // V, released once P V has retired
    __shared__ float att_anchor[128 * ATT_CWG];          // a consumer thread's mc_anchor_wait slot
#if ATT_DYNAMIC
    __shared__ int att_qitem;                           // the item whose Q the Q stage holds (-1: none left)
    __shared__ int att_claimed;                         // the producer's next item
#endif
    // the swizzle follows shared-address bits: tiles start 1024-aligned
    unsigned char* smem = mc_smem_raw + ((1024u - (mc_saddr(mc_smem_raw) & 1023u)) & 1023u);
    unsigned char* Qs = smem;
    unsigned char* Ks = smem + ATT_Q_BYTES;
    unsigned char* Vs = Ks + ATT_K_RING;
#if ATT_O_STAGE
    unsigned char* Os = Vs + ATT_STAGES * ATT_KV_BYTES;   // O's boxes on their way to the TMA store
#endif
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    (void)tm;
    (void)O;
    (void)P;
    (void)to;
    (void)sched;

    if (threadIdx.x == 0) {
        mc_ring_init(qring, 4 * ATT_CWG);   // released by lane 0 of every consumer warp
        mc_ring_init(kring, 4 * ATT_CWG * ATT_CLUSTER);   // (ATT_CLUSTER 2: both blocks' consumer warps)
        mc_ring_init(vring, 4 * ATT_CWG * ATT_CLUSTER);
        mc_fence_mbar_init();
    }
#if ATT_CLUSTER > 1
    mc_cluster_sync();   // both blocks' mbarriers are initialised before either copies or arrives on them
#else
    __syncthreads();
#endif

    if (wg == 0) {
        // ---- producer (registers move to the consumers only with two
        // consumer groups: 384 threads start at the 168 of the launch bounds)
#if ATT_CWG > 1
        mc_regs_dec<ATT_PRODUCER_REGS>();
#endif
        if (threadIdx.x != 0) return;
        mc_prefetch_tensormap(tq);
        mc_prefetch_tensormap(tk);
        mc_prefetch_tensormap(tv);
        // K and V are read by every q-tile of their head: kept in the L2;
        // a Q tile is read once
        const u64 keep = mc_policy_evict_last(), once = mc_policy_evict_first();
        mc_ring_state qs = {0, 0}, ks = {0, 0}, vs = {0, 0};
#if ATT_DYNAMIC
        int t = blockIdx.x < (i64)ATT_NB * ATT_QTILES * ATT_SPLITS ? (int)blockIdx.x : -1;
#else
        i64 t = att_walk(0);
#endif
        for (int pass = 0; t >= 0; pass++) {
            const att_item it = att_item_of(t);
            int cq[5], ck[5], cv[5];
            att_coords_q(it.b, cq + 2);
            att_coords_k(it.b, ck + 2);
            att_coords_v(it.b, cv + 2);
            int cm[5];
#if ATT_MASK
            att_coords_m(it.b, cm + 2);
#endif
            // K0 first: it may stream while the previous item's consumers
            // finish; then Q, once they released its slot
            att_load_k(it, 0, kring, ks, Ks, tk, ck, tm, cm, keep);
#if ATT_DYNAMIC
            mc_mbar_wait(&qring.empty[qs.stage], qs.phase ^ 1u);
            MC_SST(att_qitem, t);   // published by the stage's arrival below
#endif
            u64* qbar = mc_ring_acquire(qring, qs, ATT_Q_BYTES);
            for (int g = 0; g < ATT_CWG; g++)
                for (int j = 0; j < ATT_DB; j++) {
                    cq[0] = 64 * j;
                    cq[1] = it.r0 + 64 * g;
                    mc_tma_load_hint(Qs + (g * ATT_DB + j) * ATT_QBOX, tq, cq, qbar, once);
                }
            mc_ring_next<1>(qs);
            // K of tile i ahead of V of tile i - 1 (FlashAttention-3's order:
            // S(i) is issued before P V(i - 1))
            for (int i = 1; i < it.tiles; i++) {
                att_load_k(it, i, kring, ks, Ks, tk, ck, tm, cm, keep);
                att_load_v(it, i - 1, vring, vs, Vs, tv, cv, keep);
            }
            // the next item: claimed once this one's last K is issued, two
            // tiles (the K ring) before its consumers finish it — late
            // enough that blocks claim nearly in the order they free up,
            // early enough that the atomic's round trip hides under them
#if ATT_DYNAMIC
            // (through shared memory: held in a register across the V load
            // it made ptxas spill the producer's 24)
            MC_SST(att_claimed, att_claim(sched));
            att_load_v(it, it.tiles - 1, vring, vs, Vs, tv, cv, keep);
            t = (int)mc_lds_u32(mc_saddr(&att_claimed));
#else
            t = att_walk(pass + 1);
            att_load_v(it, it.tiles - 1, vring, vs, Vs, tv, cv, keep);
#endif
        }
#if ATT_DYNAMIC
        // no item left: the consumers learn it from the Q stage
        mc_mbar_wait(&qring.empty[qs.stage], qs.phase ^ 1u);
        MC_SST(att_qitem, -1);
        mc_ring_acquire(qring, qs, 0);
        att_sched_done(sched);
#endif
#if ATT_CLUSTER > 1
        // the peer's consumers' last releases arrive here before this block exits
        mc_ring_drain(kring, ks);
        mc_ring_drain(vring, vs);
#endif
        return;
    }

    // ---- consumers: warp group c, its warp w (0..3) owns rows 16w..16w+15 of the group's 64
#if ATT_CWG > 1
    mc_regs_inc<ATT_CONSUMER_REGS>();
#endif
    const int c = mc_warp_uniform(wg - 1), w = warp & 3, g = lane >> 2, tq4 = lane & 3;
    const int lr_a = 16 * w + g;   // this thread's first row in the group
    const u32 q_at = mc_saddr(Qs + c * ATT_DB * ATT_QBOX), k_base = mc_saddr(Ks), v_base = mc_saddr(Vs);
    float* anchor = &att_anchor[threadIdx.x - 128];
#if ATT_CWG > 1
    if (c == 1) mc_bar_arrive(ATT_TURN + 0, 256);   // group 0 takes the first turn
#endif
    mc_ring_state qs = {0, 0}, ks = {0, 0}, vs = {0, 0};
    float o[ATT_D / 2], sc[ATT_BN / 2];
    u32 pa[ATT_BN / 4];   // P of the tile whose P V comes next, as wgmma A fragments
#pragma unroll
    for (int v = 0; v < ATT_BN / 2; v++) sc[v] = 0.0f;
#pragma unroll 1
    for (int pass = 0;; pass++) {
#if ATT_DYNAMIC
        mc_ring_wait(qring, qs);
        const int t = MC_SLD(att_qitem);
        if (t < 0) break;
#else
        const i64 t = att_walk(pass);
        if (t < 0) break;
#endif
        att_item it = att_item_of(t);
        mc_opaque(it.tiles);   // a loop, not straight-line code (hopper.cuh)
        const int row_a = it.r0 + 64 * c + lr_a;
        float m_r[2] = {MC_NINF, MC_NINF}, l_r[2] = {0.0f, 0.0f}, alpha[2];
#pragma unroll
        for (int v = 0; v < ATT_D / 2; v++) o[v] = 0.0f;
#if !ATT_DYNAMIC
        mc_ring_wait(qring, qs);
#endif

        // the first K/V tile: S only (masked: it may hold the diagonal)
        mc_ring_wait(kring, ks);
        u32 k_at = k_base + ks.stage * ATT_KSTAGE;
        if (ATT_MASK) att_init_s(sc, k_at + ATT_KV_BYTES + c * ATT_M_GROUP, lr_a, tq4);
        att_turn_begin(c);
        mc_fence_regs<ATT_BN / 2>(sc);
        mc_wgmma_fence();
        att_issue_s(sc, q_at, k_at);
        att_turn_end(c);
        mc_wgmma_wait<0>();
        mc_fence_regs<ATT_BN / 2>(sc);
        att_release_kv(kring, ks, lane);
        mc_ring_next<ATT_STAGES>(ks);
        att_softmax<true>(sc, it.kv0, row_a, tq4, m_r, l_r, alpha);
        att_convert_p(pa, sc);

        // Tile i: this group's turn issues S(i), rescales O (P V(i-2) has
        // retired) and issues P V(i-1) behind it; the other group's softmax
        // runs meanwhile. K(i) goes back once S(i) landed (wait_group 1),
        // the softmax of tile i runs while P V(i-1) does, V(i-1) goes back
        // once that retired (wait_group 0), and P(i) is converted.
        int plain = att_plain_tiles(it, c);
        mc_opaque(plain);
        int i = 1;
#pragma unroll 1
        for (; i < plain; i++)
            att_step<false>(it, i, c, lr_a, row_a, tq4, lane, q_at, k_base, v_base, kring, vring, ks, vs, o, sc, pa,
                            m_r, l_r, alpha, anchor);
#pragma unroll 1
        for (; i < it.tiles; i++)
            att_step<true>(it, i, c, lr_a, row_a, tq4, lane, q_at, k_base, v_base, kring, vring, ks, vs, o, sc, pa,
                           m_r, l_r, alpha, anchor);

#if !ATT_O_IN_Q
        // every S = Q K^T of the item has landed: the producer may load the
        // next item's Q while this one's last P V and epilogue run
        mc_ring_release(qring, qs, lane);
#endif
        // the last tile's O += P V, outside the turns
        att_rescale_issue_pv(o, pa, alpha, vring, vs, v_base);
        mc_wgmma_wait<0>();
        mc_fence_regs<ATT_D / 2>(o);
        att_release_kv(vring, vs, lane);
        mc_ring_next<ATT_STAGES>(vs);

#pragma unroll
        for (int r = 0; r < 2; r++) {
            l_r[r] += __shfl_xor_sync(0xffffffffu, l_r[r], 1);
            l_r[r] += __shfl_xor_sync(0xffffffffu, l_r[r], 2);
        }
#if !ATT_SPLIT_KV
        // 1 / l once per row (a fully masked row, l = 0, gets 0)
        const float inv[2] = {l_r[0] > 0.0f ? 1.0f / l_r[0] : 0.0f, l_r[1] > 0.0f ? 1.0f / l_r[1] : 0.0f};
#endif
#if ATT_SPLIT_KV
        // this split's unnormalised O, running max and sum (rows < NR)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = row_a + 8 * r;
            if (row >= ATT_NR) continue;
            float* po = P + att_partial_o(it.b, row, it.split);
#pragma unroll
            for (int v = 2 * r; v < ATT_D / 2; v += 4) {
                const int dv = 8 * (v >> 2) + 2 * tq4;
                mc_st_f32(po, dv, o[v]);
                mc_st_f32(po, dv + 1, o[v + 1]);
            }
            if (tq4 == 0) {
                float* pml = P + att_partial_ml(it.b, row, it.split);
                mc_st_f32(pml, 0, att_max_natural(m_r[r]));
                mc_st_f32(pml, 1, l_r[r]);
            }
        }
#elif ATT_TMA_STORE
        // O goes through this group's slice of the O stage (the previous
        // item's store has read it), or, where shared memory has no room
        // for one, of Q (its last S = Q K^T has retired): 128-byte
        // swizzled 64 x 64 boxes like Q's, column pairs as one 32-bit
        // store; then one thread stores the boxes with the TMA (and, through
        // Q, once they are read lets the producer reload the slice)
#if ATT_O_STAGE
        unsigned char* os = Os + c * ATT_DB * ATT_QBOX;
        if (w == 0 && lane == 0) mc_bulk_wait_read0();
        mc_bar_sync(ATT_OBAR + c, 128);
#else
        unsigned char* os = Qs + c * ATT_DB * ATT_QBOX;
#endif
#pragma unroll
        for (int v = 0; v < ATT_D / 2; v += 2) {
            const int r = lr_a + 8 * ((v >> 1) & 1), dv = 8 * (v >> 2) + 2 * tq4;
            const float f = inv[(v >> 1) & 1];
            const u32 lin = (u32)((dv / 64) * ATT_QBOX + r * 128 + (dv % 64) * 2);
            MC_SST(*(u32*)(os + (lin ^ ((lin >> 3) & 0x70u))), att_pack(o[v] * f, o[v + 1] * f));
        }
        mc_fence_proxy_async();
        mc_bar_sync(ATT_OBAR + c, 128);   // the group's slice is written
        if (w == 0 && lane == 0) {
            int co[5];
            att_coords_o(it.b, co + 2);
            co[1] = it.r0 + 64 * c;
            for (int j = 0; j < ATT_DB; j++) {
                co[0] = 64 * j;
                mc_tma_store(to, os + j * ATT_QBOX, co);
            }
            mc_bulk_commit();
#if ATT_O_IN_Q
            mc_bulk_wait_read0();
#endif
        }
#if ATT_O_IN_Q
        mc_ring_release(qring, qs, lane);   // the producer may load the next Q
#endif
#else
        const i64 ob = o_off(it.b);
#pragma unroll
        for (int v = 0; v < ATT_D / 2; v++) {
            const int r = row_a + 8 * ((v >> 1) & 1);
            const int dv = 8 * (v >> 2) + 2 * tq4 + (v & 1);
            if (r < ATT_NR) ATT_ST_O(O, ob + att_o_row(r) + (i64)dv * O_SD, o[v] * inv[(v >> 1) & 1]);
        }
#endif
        mc_ring_next<1>(qs);
    }
#if ATT_TMA_STORE && !ATT_SPLIT_KV
    if (w == 0 && lane == 0) mc_bulk_wait0();   // O's writes are done before the block exits
#endif
#if ATT_CWG > 1
    if (c == 0) mc_bar_sync(ATT_TURN + 0, 256);   // group 1's last hand-over: no arrival left pending
#endif
}
// ---- end of streaming attention (sm_90a)
