// ---- streaming attention, sm_90a: TMA + mbarriers + wgmma, warp specialised
//
// A work item is ATT_BM = 64 * ATT_CWG query rows of one (batch, head);
// blocks take items in a grid-stride loop and have 1 + ATT_CWG warp groups. Warp group 0 is the producer: it gives
// registers back (setmaxnreg.dec) and one thread loads, with the Tensor
// Memory Accelerator, each item's Q tile (once the consumers released the
// previous one: "q_empty") and its K/V tiles of ATT_BN keys through a ring
// of ATT_STAGES stages ("full" mbarriers complete with
// the bytes, "empty" ones when every consumer warp is done with a stage).
// Consumer warp group c (setmaxnreg.inc) owns query rows 64c..64c+63: per
// K/V tile, S = Q K^T with wgmma (both operands in shared memory, K-major,
// 128-byte swizzle), the online softmax in registers, P re-packed from the
// S accumulators into wgmma A fragments (kept in registers) and
// O += P V with wgmma (V MN-major). Tiles are 64 head-dim columns wide
// (one 128-byte swizzle row); the tensor maps are 5-D: (d, row, lead dims
// innermost first), so rows past NQ / NK of a head are out of bounds and
// arrive as zeros. Group c's O tile leaves through its Q slice and a TMA
// store (ATT_TMA_STORE; else per-thread stores). Score columns >= NK are -inf; causal: column j of row i
// is masked when j > i + (NK - NQ), and K/V tiles past the block's last
// unmasked column are never loaded. A row whose every score is -inf gets 0.
//
// Generated before this text: ATT_NQ, ATT_NK, ATT_D (= DV: 64, 128, 256),
// ATT_BN, ATT_CWG, ATT_STAGES, ATT_NB, ATT_QTILES, ATT_CAUSAL, ATT_BF16,
// ATT_TMA_STORE, ATT_SCALE, O_SR / O_SD / o_off / ATT_ST_O (the output view), att_lead(b,
// c) (the (batch, head) index as tensor-map coordinates 2..4), and the
// wgmma wrappers att_wgmma_s (m64n<ATT_BN>k16, shared A and B) and
// att_wgmma_o (m64n<ATT_D>k16, A from registers, B transposed).

#define ATT_BM (64 * ATT_CWG)
#define ATT_DB (ATT_D / 64)                       // 64-column boxes per row
#define ATT_QBOX (64 * 128)                       // one 64-row Q box, bytes
#define ATT_KVBOX (ATT_BN * 128)                  // one K or V box, bytes
#define ATT_STAGE (2 * ATT_DB * ATT_KVBOX)        // K then V, bytes
#define ATT_Q_BYTES (ATT_CWG * ATT_DB * ATT_QBOX)

#ifndef MC_EMULATE
struct __align__(64) CUtensorMap { unsigned long long opaque[16]; };
#endif
typedef unsigned long long u64;

__device__ __forceinline__ u32 att_saddr(const void* p) { return (u32)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void att_mbar_init(u64* bar, unsigned count) {
#ifdef MC_EMULATE
    emu_mbar_init(bar, count);
#else
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(att_saddr(bar)), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void att_fence_init() {
#ifndef MC_EMULATE
    asm volatile("fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;" ::: "memory");
#endif
}
__device__ __forceinline__ void att_mbar_expect(u64* bar, unsigned bytes) {
#ifdef MC_EMULATE
    emu_mbar_arrive_expect_tx(bar, bytes);
#else
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(att_saddr(bar)), "r"(bytes)
                 : "memory");
#endif
}
__device__ __forceinline__ void att_mbar_arrive(u64* bar) {
#ifdef MC_EMULATE
    emu_mbar_arrive(bar);
#else
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(att_saddr(bar)) : "memory");
#endif
}
__device__ __forceinline__ void att_mbar_wait(u64* bar, unsigned parity) {
#ifdef MC_EMULATE
    emu_mbar_try_wait_parity(bar, parity);
#else
    u32 ok = 0;
    do {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(ok)
                     : "r"(att_saddr(bar)), "r"(parity)
                     : "memory");
    } while (!ok);
#endif
}
// One box of the 5-D tensor map at (col, row, lead coordinates c).
__device__ __forceinline__ void att_tma(void* dst, const CUtensorMap* map, int col, int row, const int* c,
                                        u64* bar) {
#ifdef MC_EMULATE
    int xy[5] = {col, row, c[0], c[1], c[2]};
    emu_tma_load(dst, map, xy, bar);
#else
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, "
        "%6}], [%7];" ::"r"(att_saddr(dst)),
        "l"((u64)map), "r"(col), "r"(row), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(att_saddr(bar))
        : "memory");
#endif
}
// cp.async.bulk.tensor store of one 64 x 64 box of O from shared memory
// (rows past NQ are outside the map: the TMA clips them), its bulk group,
// and the generic -> async proxy fence the consumers' shared writes need
__device__ __forceinline__ void att_tma_store(const CUtensorMap* map, const void* src, int col, int row,
                                              const int* c) {
#ifdef MC_EMULATE
    int xy[5] = {col, row, c[0], c[1], c[2]};
    emu_tma_store(map, xy, src);
#else
    asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];" ::"l"(
                     (u64)map),
                 "r"(att_saddr(src)), "r"(col), "r"(row), "r"(c[0]), "r"(c[1]), "r"(c[2])
                 : "memory");
#endif
}
__device__ __forceinline__ void att_bulk_commit() {
#ifdef MC_EMULATE
    emu_bulk_commit();
#else
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}
__device__ __forceinline__ void att_bulk_wait_read0() {   // the sources may be overwritten
#ifdef MC_EMULATE
    emu_bulk_wait(0, true);
#else
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#endif
}
__device__ __forceinline__ void att_bulk_wait0() {   // the writes are done
#ifdef MC_EMULATE
    emu_bulk_wait(0, false);
#else
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}
__device__ __forceinline__ void att_fence_proxy_async() {
#ifndef MC_EMULATE
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
__device__ __forceinline__ void att_wgmma_fence() {
#ifdef MC_EMULATE
    emu_wgmma_fence();
#else
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void att_wgmma_commit() {
#ifdef MC_EMULATE
    emu_wgmma_commit();
#else
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void att_wgmma_wait0() {
#ifdef MC_EMULATE
    emu_wgmma_wait(0);
#else
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
}
__device__ __forceinline__ void att_wgmma_wait1() {
#ifdef MC_EMULATE
    emu_wgmma_wait(1);
#else
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
#endif
}
__device__ __forceinline__ void att_bar_arrive(int id, int count) {
#ifdef MC_EMULATE
    emu_bar_arrive(id, (unsigned)count);
#else
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void att_bar_sync(int id, int count) {
#ifdef MC_EMULATE
    emu_bar_sync(id, (unsigned)count);
#else
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
#endif
}
template <int n> __device__ __forceinline__ void att_regs_dec() {
#ifdef MC_EMULATE
    emu_setmaxnreg(false, n);
#else
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(n));
#endif
}
template <int n> __device__ __forceinline__ void att_regs_inc() {
#ifdef MC_EMULATE
    emu_setmaxnreg(true, n);
#else
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(n));
#endif
}
// Shared-memory matrix descriptor, 128-byte swizzle (layout type 1).
__device__ __forceinline__ u64 att_desc(u32 saddr, u32 lbo, u32 sbo) {
    return (u64)((saddr & 0x3ffffu) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ u32 att_pack(float lo, float hi) {
#if ATT_BF16
    return mc_pack_bf16(lo, hi);
#else
    return mc_pack_f16(lo, hi);
#endif
}

// K/V tiles a block starting at query row q0 needs (causal: up to the last
// column its last row can see).
__device__ __forceinline__ int att_kv_tiles(i64 q0) {
    i64 kv_end = ATT_NK;
#if ATT_CAUSAL
    i64 last = q0 + ATT_BM - 1;
    if (last > ATT_NQ - 1) last = ATT_NQ - 1;
    const i64 lim = last + (ATT_NK - ATT_NQ) + 1;   // columns < lim can be unmasked
    if (lim < kv_end) kv_end = lim;
#else
    (void)q0;
#endif
    return kv_end > 0 ? (int)((kv_end + ATT_BN - 1) / ATT_BN) : 0;
}

// Ping-pong between the two consumer groups (FlashAttention-3's
// inter-warpgroup overlap): named barrier ATT_TURN + c (count 256: the 128
// threads of group c waiting, the other group's 128 arriving) opens group
// c's turn to issue its GEMMs; at the end of the turn it arrives on the
// other group's barrier. Group 1 opens group 0's first turn; both take one
// turn per K/V tile of a work item (the same count), and group 0 consumes
// the last hand-over before exiting.
#define ATT_TURN 1
#define ATT_OBAR 3   // 3 + c: group c's O tile is in shared memory (count 128)
__device__ __forceinline__ void att_turn_begin(int c) {
#if ATT_CWG > 1
    att_bar_sync(ATT_TURN + c, 256);
#else
    (void)c;
#endif
}
__device__ __forceinline__ void att_turn_end(int c) {
#if ATT_CWG > 1
    att_bar_arrive(ATT_TURN + 1 - c, 256);
#else
    (void)c;
#endif
}
// O += P V for one K/V tile: P in registers (A fragments), V MN-major
__device__ __forceinline__ void att_pv(float* o, const u32* pa, u32 v_at) {
    att_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < ATT_BN / 16; kk++)
        att_wgmma_o(o, pa + 4 * kk, att_desc(v_at + kk * 16 * 128, ATT_KVBOX, 1024));
}

__device__ __forceinline__ void mc_attention_sm90(const CUtensorMap* tq, const CUtensorMap* tk, const CUtensorMap* tv,
                                                  const CUtensorMap* to, ATT_O_T* O) {
    MC_DYNAMIC_SMEM(mc_smem_raw);
    __shared__ __align__(8) u64 q_full, q_empty, kv_full[ATT_STAGES], kv_empty[ATT_STAGES];
    // the swizzle follows shared-address bits: tiles start 1024-aligned
    unsigned char* smem = mc_smem_raw + ((1024u - (att_saddr(mc_smem_raw) & 1023u)) & 1023u);
    unsigned char* Qs = smem;
    unsigned char* KVs = smem + ATT_Q_BYTES;
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32, lane = threadIdx.x & 31;

    const i64 n_tiles = (i64)ATT_NB * ATT_QTILES;
    if (threadIdx.x == 0) {
        att_mbar_init(&q_full, 1);
        att_mbar_init(&q_empty, 4 * ATT_CWG);           // lane 0 of every consumer warp
        for (int s = 0; s < ATT_STAGES; s++) {
            att_mbar_init(&kv_full[s], 1);
            att_mbar_init(&kv_empty[s], 4 * ATT_CWG);
        }
        att_fence_init();
    }
    __syncthreads();

    // Work items (batch*head, q-tile) in a grid-stride loop; tn counts this
    // block's items (Q barrier phases), it its K/V tiles (ring phases).
    if (wg == 0) {
        // ---- producer (registers move to the consumers only with two
        // consumer groups: 384 threads start at the 168 of the launch bounds)
#if ATT_CWG > 1
        att_regs_dec<24>();
#endif
        if (threadIdx.x != 0) return;
        int tn = 0, it = 0;
        for (i64 tile = blockIdx.x; tile < n_tiles; tile += gridDim.x, tn++) {
            const i64 b = tile / ATT_QTILES, q0 = (tile % ATT_QTILES) * ATT_BM;
            int lead[3];
            att_lead(b, lead);
            const int tiles = att_kv_tiles(q0);
            if (tn > 0) att_mbar_wait(&q_empty, (unsigned)((tn - 1) & 1));   // consumers are done with Q
            att_mbar_expect(&q_full, ATT_Q_BYTES);
            for (int c = 0; c < ATT_CWG; c++)
                for (int j = 0; j < ATT_DB; j++)
                    att_tma(Qs + (c * ATT_DB + j) * ATT_QBOX, tq, 64 * j, (int)(q0 + 64 * c), lead, &q_full);
            for (int i = 0; i < tiles; i++, it++) {
                const int s = it % ATT_STAGES;
                if (it >= ATT_STAGES) att_mbar_wait(&kv_empty[s], (unsigned)((it / ATT_STAGES - 1) & 1));
                unsigned char* st = KVs + s * ATT_STAGE;
                att_mbar_expect(&kv_full[s], ATT_STAGE);
                for (int j = 0; j < ATT_DB; j++)
                    att_tma(st + j * ATT_KVBOX, tk, 64 * j, i * ATT_BN, lead, &kv_full[s]);
                for (int j = 0; j < ATT_DB; j++)
                    att_tma(st + (ATT_DB + j) * ATT_KVBOX, tv, 64 * j, i * ATT_BN, lead, &kv_full[s]);
            }
        }
        return;
    }

    // ---- consumers: warp group c, its warp w (0..3) owns rows 16w..16w+15 of the group's 64
#if ATT_CWG > 1
    att_regs_inc<240>();
#endif
    const int c = wg - 1, w = warp & 3, g = lane >> 2, tq4 = lane & 3;
    const u32 q_at = att_saddr(Qs + c * ATT_DB * ATT_QBOX);
#if ATT_CWG > 1
    if (c == 1) att_bar_arrive(ATT_TURN + 0, 256);   // group 0 takes the first turn
#endif
    int tn = 0, it = 0;
    for (i64 tile = blockIdx.x; tile < n_tiles; tile += gridDim.x, tn++) {
        const i64 b = tile / ATT_QTILES, q0 = (tile % ATT_QTILES) * ATT_BM;
        const int tiles = att_kv_tiles(q0);   // the block's count: both groups take as many turns
        const i64 row_a = q0 + 64 * c + 16 * w + g, row_b = row_a + 8;
        float o[ATT_D / 2];
#pragma unroll
        for (int v = 0; v < ATT_D / 2; v++) o[v] = 0.0f;
        float m_r[2] = {MC_NINF, MC_NINF}, l_r[2] = {0.0f, 0.0f};
        u32 pa[ATT_BN / 4];   // P of the previous K/V tile as wgmma A fragments
        u32 v_prev = 0;       // its V tile's shared address
        att_mbar_wait(&q_full, (unsigned)(tn & 1));

        for (int i = 0; i < tiles; i++, it++) {
            const int s = it % ATT_STAGES;
            const i64 kv0 = (i64)i * ATT_BN;
            att_mbar_wait(&kv_full[s], (unsigned)((it / ATT_STAGES) & 1));
            const u32 k_at = att_saddr(KVs + s * ATT_STAGE), v_at = k_at + ATT_DB * ATT_KVBOX;

            // this group's turn: S = Q K^T of this tile (64 x ATT_BN,
            // k-steps of 16 head-dim columns: 32 bytes inside a 128-byte
            // swizzle row, a new box every 4), then O += P V of the previous
            // tile, both issued back to back; the other group's softmax runs
            // meanwhile, and this group's runs while the other one issues
            float sc[ATT_BN / 2];
#pragma unroll
            for (int v = 0; v < ATT_BN / 2; v++) sc[v] = 0.0f;
            att_turn_begin(c);
            att_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < ATT_D / 16; kk++)
                att_wgmma_s(sc, att_desc(q_at + (kk / 4) * ATT_QBOX + (kk % 4) * 32, 16, 1024),
                            att_desc(k_at + (kk / 4) * ATT_KVBOX + (kk % 4) * 32, 16, 1024), kk > 0);
            att_wgmma_commit();
            if (i > 0) {
                att_pv(o, pa, v_prev);
                att_wgmma_commit();
            }
            att_turn_end(c);
            if (i > 0) att_wgmma_wait1();   // S has landed; P V may still run
            else att_wgmma_wait0();

            // scale, mask, running max; value v: row (v/2)%2 ? row_b : row_a,
            // column 8(v/4) + 2 tq4 + v%2
            float mx[2] = {MC_NINF, MC_NINF};
#pragma unroll
            for (int v = 0; v < ATT_BN / 2; v++) {
                const i64 qi = ((v >> 1) & 1) ? row_b : row_a;
                const i64 kj = kv0 + 8 * (v >> 2) + 2 * tq4 + (v & 1);
                float x = sc[v] * ATT_SCALE;
                bool dead = kj >= ATT_NK;
#if ATT_CAUSAL
                dead = dead || kj > qi + (ATT_NK - ATT_NQ);
#endif
                (void)qi;
                x = dead ? MC_NINF : x;
                sc[v] = x;
                mx[(v >> 1) & 1] = fmaxf(mx[(v >> 1) & 1], x);
            }
            float alpha[2];
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
                l_r[(v >> 1) & 1] += p;   // per-thread partial; the quad is summed at the end
            }
            // P's A fragment for keys 16kk..16kk+15 is S values
            // 4(2kk + r/2) + 2(r%2) (+1) of register r
#pragma unroll
            for (int kk = 0; kk < ATT_BN / 16; kk++)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const int v = 4 * (2 * kk + (r >> 1)) + 2 * (r & 1);
                    pa[4 * kk + r] = att_pack(sc[v], sc[v + 1]);
                }
            if (i > 0) {   // the previous tile's P V is done: its stage goes back, O may be rescaled
                att_wgmma_wait0();
                __syncwarp();
                if (lane == 0) att_mbar_arrive(&kv_empty[(it - 1) % ATT_STAGES]);
            }
#pragma unroll
            for (int v = 0; v < ATT_D / 2; v++) o[v] *= alpha[(v >> 1) & 1];
            v_prev = v_at;
        }
        if (tiles > 0) {   // the last tile's O += P V, outside the turns
            att_pv(o, pa, v_prev);
            att_wgmma_commit();
            att_wgmma_wait0();
            __syncwarp();
            if (lane == 0) att_mbar_arrive(&kv_empty[(it - 1) % ATT_STAGES]);
        }
#if !ATT_TMA_STORE
        __syncwarp();
        if (lane == 0) att_mbar_arrive(&q_empty);   // the producer may load the next Q
#endif

        // normalise and store (rows < NQ)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l_r[r] += __shfl_xor_sync(0xffffffffu, l_r[r], 1);
            l_r[r] += __shfl_xor_sync(0xffffffffu, l_r[r], 2);
        }
#if ATT_TMA_STORE
        // O goes through this group's Q slice (its last S = Q K^T has
        // retired): 128-byte swizzled 64 x 64 boxes like Q's, column pairs
        // as one 32-bit store, then one thread stores the boxes with the
        // TMA and, once they are read, lets the producer reload the slice
        (void)O;
        unsigned char* os = Qs + c * ATT_DB * ATT_QBOX;
#pragma unroll
        for (int v = 0; v < ATT_D / 2; v += 2) {
            const int r = 16 * w + g + 8 * ((v >> 1) & 1), dv = 8 * (v >> 2) + 2 * tq4;
            const float l = l_r[(v >> 1) & 1];
            const u32 lin = (u32)((dv / 64) * ATT_QBOX + r * 128 + (dv % 64) * 2);
            MC_SST(*(u32*)(os + (lin ^ ((lin >> 3) & 0x70u))),
                   att_pack(l > 0.0f ? o[v] / l : 0.0f, l > 0.0f ? o[v + 1] / l : 0.0f));
        }
        att_fence_proxy_async();
        att_bar_sync(ATT_OBAR + c, 128);   // the group's slice is written
        if (w == 0 && lane == 0) {
            int lead[3];
            att_lead(b, lead);
            for (int j = 0; j < ATT_DB; j++) att_tma_store(to, os + j * ATT_QBOX, 64 * j, (int)(q0 + 64 * c), lead);
            att_bulk_commit();
            att_bulk_wait_read0();
        }
        __syncwarp();
        if (lane == 0) att_mbar_arrive(&q_empty);   // the producer may load the next Q
#else
        (void)to;
        const i64 ob = o_off(b);
#pragma unroll
        for (int v = 0; v < ATT_D / 2; v++) {
            const i64 qi = ((v >> 1) & 1) ? row_b : row_a;
            const int dv = 8 * (v >> 2) + 2 * tq4 + (v & 1);
            const float l = l_r[(v >> 1) & 1];
            if (qi < ATT_NQ) ATT_ST_O(O, ob + qi * O_SR + (i64)dv * O_SD, l > 0.0f ? o[v] / l : 0.0f);
        }
#endif
    }
#if ATT_TMA_STORE
    if (w == 0 && lane == 0) att_bulk_wait0();   // O's writes are done before the block exits
#endif
#if ATT_CWG > 1
    if (c == 0) att_bar_sync(ATT_TURN + 0, 256);   // group 1's last hand-over: no arrival left pending
#endif
}
// ---- end of streaming attention (sm_90a)
