// ---- streaming attention, FMA path (f32 storage, or mixed dtypes)
//
// A block owns ATT_BM = ATT_WARPS * ATT_RPW query rows of one (batch,
// head); each warp ATT_RPW of them. K/V tiles of 32 rows stream through
// shared memory (as f32); lane j scores column j of the tile for each of the
// warp's rows, the warp keeps a running max and sum per row (online
// softmax), and lane l accumulates output columns l, l+32, ... .
// Same bounds / causal / mask / fully-masked-row rules as the mma path, and
// the same split-KV partials when ATT_SPLITS is defined.

#define ATT_BN 32
#define ATT_LDK (ATT_D + 1)          // +1: lanes read different rows of Ks, no bank conflicts
#define ATT_DVL ((ATT_DV + 31) / 32) // output columns per lane
#define ATT_LDV (ATT_DVL * 32)

__device__ __forceinline__ void mc_attention(const ATT_Q_T* Q, const ATT_K_T* K, const ATT_V_T* V,
                                             const ATT_M_T* M, ATT_O_T* O
#ifdef ATT_SPLITS
                                             , float* P
#endif
                                             MC_DIMS_PARAMS) {
    MC_DYNAMIC_SMEM(mc_smem);
    float* Qs = (float*)mc_smem;               // ATT_BM x ATT_D
    float* Ks = Qs + ATT_BM * ATT_D;           // 32 x ATT_LDK
    float* Vs = Ks + ATT_BN * ATT_LDK;         // 32 x ATT_LDV (zero past DV)
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
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
        __syncthreads();
        for (int c = threadIdx.x; c < ATT_BM * ATT_D; c += blockDim.x) {
            int r = c / ATT_D, d = c % ATT_D;
            i64 qi = q0 + r;
            MC_SST(Qs[c], qi < ATT_NQ ? ATT_LD_Q(Q, qb + qi * Q_SR + (i64)d * Q_SD) : 0.0f);
        }
        i64 kv_end = ATT_NK;
#if ATT_CAUSAL
        {
            i64 last = q0 + ATT_BM - 1;
            if (last > ATT_NQ - 1) last = ATT_NQ - 1;
            i64 lim = last + (ATT_NK - ATT_NQ) + 1;
            if (lim < kv_end) kv_end = lim;
        }
#endif
#ifdef ATT_SPLITS
        const i64 kv_begin = split * ATT_CHUNK;
        if (kv_end > kv_begin + ATT_CHUNK) kv_end = kv_begin + ATT_CHUNK;
#else
        const i64 kv_begin = 0;
#endif
        float o[ATT_RPW][ATT_DVL];
        float m_r[ATT_RPW], l_r[ATT_RPW];
#pragma unroll
        for (int i = 0; i < ATT_RPW; i++) {
            m_r[i] = MC_NINF;
            l_r[i] = 0.0f;
#pragma unroll
            for (int k = 0; k < ATT_DVL; k++) o[i][k] = 0.0f;
        }
        for (i64 kv0 = kv_begin; kv0 < kv_end; kv0 += ATT_BN) {
            __syncthreads();
            for (int c = threadIdx.x; c < ATT_BN * ATT_D; c += blockDim.x) {
                int r = c / ATT_D, d = c % ATT_D;
                i64 kj = kv0 + r;
                MC_SST(Ks[r * ATT_LDK + d], kj < ATT_NK ? ATT_LD_K(K, kb + kj * K_SR + (i64)d * K_SD) : 0.0f);
            }
            for (int c = threadIdx.x; c < ATT_BN * ATT_LDV; c += blockDim.x) {
                int r = c / ATT_LDV, d = c % ATT_LDV;
                i64 kj = kv0 + r;
                MC_SST(Vs[c], (kj < ATT_NK && d < ATT_DV) ? ATT_LD_V(V, vb + kj * V_SR + (i64)d * V_SD) : 0.0f);
            }
            __syncthreads();
            const i64 kj = kv0 + lane;
            float s[ATT_RPW];
#pragma unroll
            for (int i = 0; i < ATT_RPW; i++) s[i] = 0.0f;
            for (int d = 0; d < ATT_D; d++) {
                const float kv = MC_SLD(Ks[lane * ATT_LDK + d]);
#pragma unroll
                for (int i = 0; i < ATT_RPW; i++) s[i] = fmaf(MC_SLD(Qs[(warp * ATT_RPW + i) * ATT_D + d]), kv, s[i]);
            }
#pragma unroll
            for (int i = 0; i < ATT_RPW; i++) {
                const i64 qi = q0 + warp * ATT_RPW + i;
                float v = s[i] * ATT_SCALE;
#if ATT_HAS_MASK
                if (qi < ATT_NQ && kj < ATT_NK) v += ATT_LD_M(M, m_off(b MC_DIMS_ARGS) + qi * M_SR + kj * M_SC);
#endif
                bool dead = kj >= ATT_NK;
#if ATT_CAUSAL
                dead = dead || kj > qi + (ATT_NK - ATT_NQ);
#endif
                v = dead ? MC_NINF : v;
                const float mx = mc_warp_max(v);
                const float mnew = fmaxf(m_r[i], mx);
                const float alpha = (m_r[i] == MC_NINF) ? 0.0f : expf(m_r[i] - mnew);
                const float p = (mnew == MC_NINF) ? 0.0f : expf(v - mnew);
                m_r[i] = mnew;
                l_r[i] = l_r[i] * alpha + p;   // per-lane partial, summed over the warp at the end
#pragma unroll
                for (int k = 0; k < ATT_DVL; k++) o[i][k] *= alpha;
                for (int j = 0; j < ATT_BN; j++) {
                    const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
                    for (int k = 0; k < ATT_DVL; k++) o[i][k] = fmaf(pj, MC_SLD(Vs[j * ATT_LDV + k * 32 + lane]), o[i][k]);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < ATT_RPW; i++) {
            const i64 qi = q0 + warp * ATT_RPW + i;
            const float l = mc_warp_sum(l_r[i]);
#ifdef ATT_SPLITS
            (void)ob;
#pragma unroll
            for (int k = 0; k < ATT_DVL; k++) {
                const int dv = k * 32 + lane;
                if (qi < ATT_NQ && dv < ATT_DV) mc_st_f32(P, att_partial_o(b, qi, split MC_DIMS_ARGS) + dv, o[i][k]);
            }
            if (lane == 0 && qi < ATT_NQ) {
                mc_st_f32(P, att_partial_ml(b, qi, split MC_DIMS_ARGS), m_r[i]);
                mc_st_f32(P, att_partial_ml(b, qi, split MC_DIMS_ARGS) + 1, l);
            }
#else
#pragma unroll
            for (int k = 0; k < ATT_DVL; k++) {
                const int dv = k * 32 + lane;
                if (qi < ATT_NQ && dv < ATT_DV)
                    ATT_ST_O(O, ob + qi * O_SR + (i64)dv * O_SD, l > 0.0f ? o[i][k] / l : 0.0f);
            }
#endif
        }
    }
}
// ---- end of streaming attention (fma)
