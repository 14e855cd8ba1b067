// ---- streaming attention, tensor cores (f16 / bf16 storage, f32 accumulation)
//
// Flash-style: a block owns ATT_BM = 16 * ATT_WARPS query rows of one
// (batch, head); Q stays in shared memory, K/V tiles of ATT_BN rows stream
// through shared memory; each warp computes S = Q K^T for its 16 rows with
// mma.sync m16n8k16, keeps a running max and sum per row (online softmax)
// and accumulates O += P V with P re-packed from the S accumulators.
//
// Generated before this text: ATT_* sizes, strides (*_SR row, *_SD column)
// and the per-(batch, head) offset functions q_off/k_off/v_off/o_off/m_off,
// ATT_LD_* / ATT_ST_O element accessors, ATT_BF16, ATT_CAUSAL, ATT_HAS_MASK,
// ATT_VEC_Q/K/V (16-byte loads allowed by the strides).
//
// Bounds: rows >= NQ / NK and head-dim columns >= D / DV are zero-filled in
// shared memory; score columns >= NK are -inf; causal: column j of row i is
// masked when j > i + (NK - NQ), and K/V tiles past the last unmasked column
// of the block's last row are never loaded. A row whose every score is -inf
// gets 0 (like the reference).
//
// Split-KV (ATT_SPLITS defined, decode shapes): work item = (batch*head,
// q-tile, split); a split streams keys [split*ATT_CHUNK, +ATT_CHUNK) and
// writes its unnormalised O, running max and running sum to the f32
// scratch P (see att_partial_store); the merge kernel combines them.

#define ATT_LDQ (ATT_DP + 8)
#define ATT_LDK (ATT_DP + 8)
#define ATT_LDV (ATT_DVP + 8)

__device__ __forceinline__ u32 att_pack(float lo, float hi) {
#if ATT_BF16
    return mc_pack_bf16(lo, hi);
#else
    return mc_pack_f16(lo, hi);
#endif
}

// Copies rows [row0, row0 + rows) x cols [0, cols_pad) of a 16-bit operand
// into shared memory (row stride lds), zero outside [0, n) x [0, cols).
// vec: 16-byte loads (caller checked strides; base alignment checked here).
template <int rows, int cols, int cols_pad, int lds, bool vec>
__device__ __forceinline__ void att_load16(unsigned short* s, const unsigned short* g, i64 base,
                                           i64 sr, i64 sd, i64 row0, i64 n) {
    const int nt = blockDim.x;
    if (vec && ((((unsigned long long)(g + base)) & 15ull) == 0)) {
        const int chunks = cols_pad / 8;
        for (int c = threadIdx.x; c < rows * chunks; c += nt) {
            int r = c / chunks, col = (c % chunks) * 8;
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            i64 row = row0 + r;
            if (row < n && col < cols) v = MC_GLDV(uint4, g, base + row * sr + col);
            MC_SST(*(uint4*)(s + r * lds + col), v);
        }
    } else {
        for (int c = threadIdx.x; c < rows * cols_pad; c += nt) {
            int r = c / cols_pad, col = c % cols_pad;
            i64 row = row0 + r;
            unsigned short v = 0;
            if (row < n && col < cols) v = MC_GLD(g, base + row * sr + (i64)col * sd);
            MC_SST(s[r * lds + col], v);
        }
    }
}

__device__ __forceinline__ void mc_attention(const unsigned short* Q, const unsigned short* K,
                                             const unsigned short* V, const ATT_M_T* M,
                                             ATT_O_T* O
#ifdef ATT_SPLITS
                                             , float* P
#endif
                                             MC_DIMS_PARAMS) {
    MC_DYNAMIC_SMEM(mc_smem);
    unsigned short* Qs = (unsigned short*)mc_smem;
    unsigned short* Ks = Qs + ATT_BM * ATT_LDQ;
    unsigned short* Vs = Ks + ATT_BN * ATT_LDK;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tq = lane & 3;
    (void)M;

#ifdef ATT_SPLITS
    for (i64 tile = blockIdx.x; tile < (i64)ATT_NB * ATT_QTILES * ATT_SPLITS; tile += gridDim.x) {
        const i64 split = tile % ATT_SPLITS;
        const i64 b = tile / ATT_SPLITS / ATT_QTILES;
        const i64 q0 = (tile / ATT_SPLITS % ATT_QTILES) * ATT_BM;
#else
    for (i64 tile = blockIdx.x; tile < (i64)ATT_NB * ATT_QTILES; tile += gridDim.x) {
        const i64 b = tile / ATT_QTILES;
        const i64 q0 = (tile % ATT_QTILES) * ATT_BM;
#endif
        const i64 qb = q_off(b MC_DIMS_ARGS), kb = k_off(b MC_DIMS_ARGS), vb = v_off(b MC_DIMS_ARGS), ob = o_off(b MC_DIMS_ARGS);
        __syncthreads();   // the previous tile is done with Qs
        att_load16<ATT_BM, ATT_D, ATT_DP, ATT_LDQ, ATT_VEC_Q>(Qs, Q, qb, Q_SR, Q_SD, q0, ATT_NQ);

        i64 kv_end = ATT_NK;
#if ATT_CAUSAL
        {
            i64 last = q0 + ATT_BM - 1;
            if (last > ATT_NQ - 1) last = ATT_NQ - 1;
            i64 lim = last + (ATT_NK - ATT_NQ) + 1;   // columns < lim can be unmasked
            if (lim < kv_end) kv_end = lim;
        }
#endif
#ifdef ATT_SPLITS
        const i64 kv_begin = split * ATT_CHUNK;
        if (kv_end > kv_begin + ATT_CHUNK) kv_end = kv_begin + ATT_CHUNK;
#else
        const i64 kv_begin = 0;
#endif
        float o[ATT_DVP / 8][4];
#pragma unroll
        for (int nt = 0; nt < ATT_DVP / 8; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
        float m_r[2] = {MC_NINF, MC_NINF}, l_r[2] = {0.0f, 0.0f};
        const i64 row_a = q0 + warp * 16 + g, row_b = row_a + 8;

        for (i64 kv0 = kv_begin; kv0 < kv_end; kv0 += ATT_BN) {
            __syncthreads();   // everyone is done with the previous K/V tile
            att_load16<ATT_BN, ATT_D, ATT_DP, ATT_LDK, ATT_VEC_K>(Ks, K, kb, K_SR, K_SD, kv0, ATT_NK);
            att_load16<ATT_BN, ATT_DV, ATT_DVP, ATT_LDV, ATT_VEC_V>(Vs, V, vb, V_SR, V_SD, kv0, ATT_NK);
            __syncthreads();

            // S = Q K^T for this warp's 16 rows x ATT_BN columns
            float s[ATT_BN / 8][4];
#pragma unroll
            for (int nt = 0; nt < ATT_BN / 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll 2
            for (int kk = 0; kk < ATT_DP / 16; kk++) {
                const unsigned short* qs = Qs + (warp * 16) * ATT_LDQ + kk * 16 + 2 * tq;
                u32 a[4];
                a[0] = MC_SLD(*(const u32*)(qs + g * ATT_LDQ));
                a[1] = MC_SLD(*(const u32*)(qs + (g + 8) * ATT_LDQ));
                a[2] = MC_SLD(*(const u32*)(qs + g * ATT_LDQ + 8));
                a[3] = MC_SLD(*(const u32*)(qs + (g + 8) * ATT_LDQ + 8));
#pragma unroll
                for (int nt = 0; nt < ATT_BN / 8; nt++) {
                    const unsigned short* ks = Ks + (nt * 8 + g) * ATT_LDK + kk * 16 + 2 * tq;
                    u32 bb[2];
                    bb[0] = MC_SLD(*(const u32*)ks);
                    bb[1] = MC_SLD(*(const u32*)(ks + 8));
                    mc_mma_m16n8k16(s[nt], a, bb, ATT_BF16);
                }
            }

            // scale, mask, running max
            float mx[2] = {MC_NINF, MC_NINF};
#pragma unroll
            for (int nt = 0; nt < ATT_BN / 8; nt++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const i64 qi = (e < 2) ? row_a : row_b;
                    const i64 kj = kv0 + nt * 8 + 2 * tq + (e & 1);
                    float v = s[nt][e] * ATT_SCALE;
#if ATT_HAS_MASK
                    if (qi < ATT_NQ && kj < ATT_NK) v += ATT_LD_M(M, m_off(b MC_DIMS_ARGS) + qi * M_SR + kj * M_SC);
#endif
                    bool dead = kj >= ATT_NK;
#if ATT_CAUSAL
                    dead = dead || kj > qi + (ATT_NK - ATT_NQ);
#endif
                    v = dead ? MC_NINF : v;
                    s[nt][e] = v;
                    mx[e >> 1] = fmaxf(mx[e >> 1], v);
                }
            }
            float alpha[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
                float mnew = fmaxf(m_r[r], mx[r]);
                alpha[r] = (m_r[r] == MC_NINF) ? 0.0f : __expf(m_r[r] - mnew);
                m_r[r] = mnew;
                l_r[r] *= alpha[r];
            }
#pragma unroll
            for (int nt = 0; nt < ATT_DVP / 8; nt++) {
                o[nt][0] *= alpha[0]; o[nt][1] *= alpha[0];
                o[nt][2] *= alpha[1]; o[nt][3] *= alpha[1];
            }
#pragma unroll
            for (int nt = 0; nt < ATT_BN / 8; nt++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float m = m_r[e >> 1];
                    float p = (m == MC_NINF) ? 0.0f : __expf(s[nt][e] - m);
                    s[nt][e] = p;
                    l_r[e >> 1] += p;   // per-thread partial; the quad is summed at the end
                }
            }

            // O += P V: the S accumulators of n-tiles 2kk, 2kk+1 are the A fragment
#pragma unroll
            for (int kk = 0; kk < ATT_BN / 16; kk++) {
                u32 a[4];
                a[0] = att_pack(s[2 * kk][0], s[2 * kk][1]);
                a[1] = att_pack(s[2 * kk][2], s[2 * kk][3]);
                a[2] = att_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
                a[3] = att_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
                const unsigned short* vs = Vs + (kk * 16 + 2 * tq) * ATT_LDV + g;
#pragma unroll
                for (int nt = 0; nt < ATT_DVP / 8; nt++) {
                    const unsigned short* v = vs + nt * 8;
                    u32 bb[2];
                    bb[0] = (u32)MC_SLD(v[0]) | ((u32)MC_SLD(v[ATT_LDV]) << 16);
                    bb[1] = (u32)MC_SLD(v[8 * ATT_LDV]) | ((u32)MC_SLD(v[9 * ATT_LDV]) << 16);
                    mc_mma_m16n8k16(o[nt], a, bb, ATT_BF16);
                }
            }
        }

        // normalise and store (rows < NQ, columns < DV)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l_r[r] += __shfl_xor_sync(0xffffffffu, l_r[r], 1);
            l_r[r] += __shfl_xor_sync(0xffffffffu, l_r[r], 2);
        }
#ifdef ATT_SPLITS
        (void)ob;
#pragma unroll
        for (int nt = 0; nt < ATT_DVP / 8; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const i64 qi = (e < 2) ? row_a : row_b;
                const int dv = nt * 8 + 2 * tq + (e & 1);
                if (qi < ATT_NQ && dv < ATT_DV) mc_st_f32(P, att_partial_o(b, qi, split MC_DIMS_ARGS) + dv, o[nt][e]);
            }
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const i64 qi = r ? row_b : row_a;
            if (tq == 0 && qi < ATT_NQ) {
                mc_st_f32(P, att_partial_ml(b, qi, split MC_DIMS_ARGS), m_r[r]);
                mc_st_f32(P, att_partial_ml(b, qi, split MC_DIMS_ARGS) + 1, l_r[r]);
            }
        }
#else
#pragma unroll
        for (int nt = 0; nt < ATT_DVP / 8; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const i64 qi = (e < 2) ? row_a : row_b;
                const int dv = nt * 8 + 2 * tq + (e & 1);
                const float l = l_r[e >> 1];
                if (qi < ATT_NQ && dv < ATT_DV)
                    ATT_ST_O(O, ob + qi * O_SR + (i64)dv * O_SD, l > 0.0f ? o[nt][e] / l : 0.0f);
            }
        }
#endif
    }
}
// ---- end of streaming attention (mma)
