// ---- tiled matmul (the fallback when cuBLAS is absent, and the kernel
// ---- that carries a fused epilogue): C[b] = A[b] . B[b], f32 accumulation.
//
// Generated before this text: MM_M, MM_N, MM_K, MM_BATCH, and
// a_at(b, m, k) / b_at(b, k, n) returning operand elements as f32 (folded
// transposes, broadcast batch dims and fused prologues are inside them),
// epilogue(i, acc) storing element i = (b * M + m) * N + n of the output.
// A block computes a 64 x 64 tile with 256 threads, 4 x 4 outputs each,
// through 16-deep slices of A and B in shared memory; out-of-range rows and
// columns load as 0 and are never stored.

#define MM_BM 64
#define MM_BN 64
#define MM_BK 16

__device__ __forceinline__ void mc_matmul(MC_PARAMS) {
    __shared__ float As[MM_BK][MM_BM + 4];
    __shared__ float Bs[MM_BK][MM_BN + 4];
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const i64 tiles_m = (MM_M + MM_BM - 1) / MM_BM, tiles_n = (MM_N + MM_BN - 1) / MM_BN;
    for (i64 t = blockIdx.x; t < (i64)MM_BATCH * tiles_m * tiles_n; t += gridDim.x) {
        const i64 bb = t / (tiles_m * tiles_n), r = t % (tiles_m * tiles_n);
        const i64 m0 = (r / tiles_n) * MM_BM, n0 = (r % tiles_n) * MM_BN;
        float acc[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
        for (i64 k0 = 0; k0 < MM_K; k0 += MM_BK) {
            __syncthreads();
            for (int c = threadIdx.x; c < MM_BM * MM_BK; c += blockDim.x) {
#if MM_TRANS_A
                const int mm = c % MM_BM, kk = c / MM_BM;   // m fastest: A is stored [K, M]
#else
                const int mm = c / MM_BK, kk = c % MM_BK;   // k fastest: A is stored [M, K]
#endif
                const i64 gm = m0 + mm, gk = k0 + kk;
                MC_SST(As[kk][mm], (gm < MM_M && gk < MM_K) ? a_at(bb, gm, gk, MC_ARGS) : 0.0f);
            }
            for (int c = threadIdx.x; c < MM_BK * MM_BN; c += blockDim.x) {
#if MM_TRANS_B
                const int nn = c / MM_BK, kk = c % MM_BK;   // k fastest: B is stored [N, K]
#else
                const int nn = c % MM_BN, kk = c / MM_BN;   // n fastest: B is stored [K, N]
#endif
                const i64 gn = n0 + nn, gk = k0 + kk;
                MC_SST(Bs[kk][nn], (gn < MM_N && gk < MM_K) ? b_at(bb, gk, gn, MC_ARGS) : 0.0f);
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < MM_BK; kk++) {
                float a[4], bv[4];
#pragma unroll
                for (int i = 0; i < 4; i++) a[i] = MC_SLD(As[kk][ty + 16 * i]);
#pragma unroll
                for (int j = 0; j < 4; j++) bv[j] = MC_SLD(Bs[kk][tx + 16 * j]);
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
            }
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const i64 m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
                if (m < MM_M && n < MM_N) epilogue((bb * MM_M + m) * MM_N + n, acc[i][j], MC_ARGS);
            }
    }
}
// ---- end of tiled matmul
