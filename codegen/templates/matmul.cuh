// ---- tiled GEMM (matmul, and conv2d as implicit GEMM): C[b] = A[b] . B[b],
// ---- f32 accumulation; every size comes from the KernelPlan.
//
// Generated before this text: the problem MM_M, MM_N, MM_K, MM_BATCH,
// MM_TRANS_A / MM_TRANS_B (which index runs fastest in memory, for
// coalesced loads); the plan's tile MM_BM x MM_BN x MM_BK, MM_WARPS,
// MM_STAGES (shared-memory buffers of the K loop); MM_MMA (1: tensor
// cores, f16 / bf16 operands, MM_BF16, warp grid MM_WM x MM_WN), and
//   a_at(b, m, k) / b_at(b, k, n): operand elements as f32 (folded
//     transposes, broadcast batch dims, fused prologues, im2col inside);
//     called for in-range elements only;
//   mm_store(b, m, n, acc): the fused epilogue storing output (b, m, n);
//   MM_GLU 1 (the paired epilogue; MM_MMA tiles only): the output has MM_ON = MM_N / 2
//     columns, mm_store takes its (m, n) with mm_pair(gate acc, up acc)
//     (the two rounded to the product's dtype in one value); else MM_ON =
//     MM_N.
// Out-of-range rows, columns and K are zero in shared memory and never
// stored. A block walks the (batch, M tile, N tile) work items with a
// grid stride; MM_STAGES >= 2 loads tile k + STAGES - 1 while tile k is
// multiplied (one barrier per K step), MM_STAGES == 1 loads, then
// multiplies (two barriers).
//
// MM_MMA (MM_ASYNC 1: sm_80 and later; on sm_90 where the wgmma template
// does not apply; the plan gives MM_STAGES 2..4): a ring of MM_STAGES
// shared-memory stages fed by cp.async. Per operand, MM_A_CPA / MM_B_CPA
// (codegen: the operand is a plain f16/bf16 read, or a folded
// last-two-dims transpose of one, whose contiguous extent is a multiple
// of 2 elements, so every chunk of MM_A_CPB / MM_B_CPB bytes — 16, or 8
// or 4 where the extent is a multiple of only 4 or 2 elements — is
// aligned and wholly inside or outside the matrix) selects cp.async
// copies of that size from MM_A_PTR / MM_B_PTR, out-of-range chunks
// zero-filled through src_size 0; otherwise the operand is staged
// element by element through a_at / b_at (prologues: casts, SwiGLU,
// norm scales; conv's im2col), synchronously, into the same layout.
// MM_A_KMAJOR / MM_B_KMAJOR: a stage keeps the operand as it is stored,
// rows along its contiguous dim padded by 8 halves (16 bytes), so the 8
// rows of an ldmatrix 8x8 matrix lie on distinct 16-byte bank groups:
// A [BM][BK + 8] (k contiguous) or [BK][BM + 8]; B [BN][BK + 8] or
// [BK][BN + 8]. Fragments come from ldmatrix.x4 (x2 for an odd last n8
// tile), .trans for an operand whose stage is not k-contiguous. The ring:
// STAGES - 1 tiles are issued ahead, one commit group per K step (empty
// past the end); step kt waits until at most STAGES - 2 groups are
// pending (tile kt has landed for this thread), __syncthreads (for every
// thread; and every warp is done with step kt - 1's stage), issues tile
// kt + STAGES - 1 into that stage, then multiplies tile kt. One barrier
// per K step; the bytes a block reads are the tiles', each once.
//
// Warp (wm, wn) owns a (BM / WM) x (BN / WN) warp tile of m16n8
// accumulators fed by mma.sync.m16n8k16.row.col (C rows g / g+8, columns
// 2t, 2t+1). (The register-staged form, 2-byte stores and 4-byte fragment
// loads with no cp.async, was removed in #44: every target is sm_80 or
// later, and the ring takes any operand, copying what it can.)
// FMA: shared A is [BK][BM + 4], B [BK][BN + 4] f32; a 16 x (threads/16)
// thread grid, thread (tx, ty) owns rows ty + (threads/16) i and columns
// tx + 16 j (conflict-free, broadcast reads).

#define MM_THREADS (MM_WARPS * 32)

// Whether output row m / column n exists: always where the block tiles
// divide the output (MM_CHECK_M / MM_CHECK_N 0: no check, the epilogue's
// loads unpredicated; codegen keeps the mma ring's row check, which holds
// ptxas to storing as it converts)
#ifndef MM_CHECK_M   // (a conv's implicit GEMM: checked)
#define MM_CHECK_M 1
#endif
#ifndef MM_CHECK_N
#define MM_CHECK_N 1
#endif
#define MM_IN(m, n) ((!MM_CHECK_M || (m) < MM_M) && (!MM_CHECK_N || (n) < MM_N))

#if MM_MMA
#define MM_WTM (MM_BM / MM_WM)
#define MM_WTN (MM_BN / MM_WN)
#define MM_MI (MM_WTM / 16)
#define MM_NI (MM_WTN / 8)

__device__ __forceinline__ unsigned short mm_half(float v) {
#if MM_BF16
    return mc_f32_to_bf16(v);
#else
    return mc_f32_to_f16(v);
#endif
}

#if MM_GLU
// The paired epilogue (a gated linear unit: B's columns interleave a gate's
// and an up projection's in blocks of 8; the output has MM_ON = MM_N / 2
// columns): m16n8 tile j even of warp (wm, wn) holds a gate block, tile
// j + 1 its up block (warp tiles are a multiple of 16 columns), so value e
// of both makes output column (n0 + wn MM_WTN + 8 j) / 2 + 2t + e % 2,
// stored from mm_pair(gate, up); out-of-range outputs are skipped.
__device__ __forceinline__ void mm_store_tile(float (*acc)[MM_NI][4], i64 bb, i64 m0, i64 n0, int wm, int wn,
                                              int g, int tq, MC_PARAMS) {
#pragma unroll
    for (int i = 0; i < MM_MI; i++)
#pragma unroll
        for (int j = 0; j < MM_NI; j += 2)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const i64 m = m0 + wm * MM_WTM + i * 16 + g + (e >= 2 ? 8 : 0);
                const i64 n = (n0 + wn * MM_WTN + j * 8) / 2 + 2 * tq + (e & 1);
                if (m < MM_M && n < MM_ON) mm_store(bb, m, n, mm_pair(acc[i][j][e], acc[i][j + 1][e]), MC_ARGS);
            }
}
#else
// The accumulators of warp (wm, wn) through the epilogue (C rows g / g+8,
// columns 2t, 2t+1 of each m16n8 tile); out-of-range outputs are skipped.
__device__ __forceinline__ void mm_store_tile(float (*acc)[MM_NI][4], i64 bb, i64 m0, i64 n0, int wm, int wn,
                                              int g, int tq, MC_PARAMS) {
#pragma unroll
    for (int i = 0; i < MM_MI; i++)
#pragma unroll
        for (int j = 0; j < MM_NI; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const i64 m = m0 + wm * MM_WTM + i * 16 + g + (e >= 2 ? 8 : 0);
                const i64 n = n0 + wn * MM_WTN + j * 8 + 2 * tq + (e & 1);
                if (MM_IN(m, n)) mm_store(bb, m, n, acc[i][j][e], MC_ARGS);
            }
}
#endif

#if !MM_ASYNC
#error "the mma.sync GEMM is the cp.async ring (MM_ASYNC 1)"
#endif
#if MM_ASYNC
#ifndef MM_A_CPA
#define MM_A_CPA 0
#endif
#ifndef MM_B_CPA
#define MM_B_CPA 0
#endif
#ifndef MM_A_CPB
#define MM_A_CPB 16
#endif
#ifndef MM_B_CPB
#define MM_B_CPB 16
#endif
#define MM_A_CE (MM_A_CPB / 2)   // elements a copy
#define MM_B_CE (MM_B_CPB / 2)
#ifndef MM_A_KMAJOR
#define MM_A_KMAJOR (!MM_TRANS_A)
#endif
#ifndef MM_B_KMAJOR
#define MM_B_KMAJOR (MM_TRANS_B)
#endif
#define MM_A_ROWS (MM_A_KMAJOR ? MM_BM : MM_BK)
#define MM_A_W (MM_A_KMAJOR ? MM_BK : MM_BM)   // contiguous extent of a stage row
#define MM_A_LD (MM_A_W + 8)
#define MM_B_ROWS (MM_B_KMAJOR ? MM_BN : MM_BK)
#define MM_B_W (MM_B_KMAJOR ? MM_BK : MM_BN)
#define MM_B_LD (MM_B_W + 8)
#define MM_A_STAGE (MM_A_ROWS * MM_A_LD)       // halves
#define MM_B_STAGE (MM_B_ROWS * MM_B_LD)

// Issues (cp.async) or stores (element-wise) the K slice [k0, k0 + BK) of
// the A rows [m0, m0 + BM) and B columns [n0, n0 + BN) into one stage.
__device__ __forceinline__ void mm_stage(unsigned short* As, unsigned short* Bs, i64 bb, i64 m0, i64 n0, i64 k0,
                                         MC_PARAMS) {
#if MM_A_CPA
    for (int c = threadIdx.x; c < MM_A_ROWS * (MM_A_W / MM_A_CE); c += MM_THREADS) {
        const int r = c / (MM_A_W / MM_A_CE), col = c % (MM_A_W / MM_A_CE) * MM_A_CE;
#if MM_A_KMAJOR
        const i64 gm = m0 + r, gk = k0 + col, at = a_boff(bb, MC_ARGS) + gm * MM_K + gk;   // stored [M, K]
#else
        const i64 gk = k0 + r, gm = m0 + col, at = a_boff(bb, MC_ARGS) + gk * MM_M + gm;   // stored [K, M]
#endif
        const bool in = gm < MM_M && gk < MM_K;
        mc_cp_async<MM_A_CPB>(As + r * MM_A_LD + col, MM_A_PTR, in ? at : 0, in ? MM_A_CPB : 0);
    }
#else
    for (int c = threadIdx.x; c < MM_BM * MM_BK; c += MM_THREADS) {
#if MM_TRANS_A
        const int mm = c % MM_BM, kk = c / MM_BM;
#else
        const int mm = c / MM_BK, kk = c % MM_BK;
#endif
        const i64 gm = m0 + mm, gk = k0 + kk;
        MC_SST(As[MM_A_KMAJOR ? mm * MM_A_LD + kk : kk * MM_A_LD + mm],
               (gm < MM_M && gk < MM_K) ? mm_half(a_at(bb, gm, gk, MC_ARGS)) : (unsigned short)0);
    }
#endif
#if MM_B_CPA
    for (int c = threadIdx.x; c < MM_B_ROWS * (MM_B_W / MM_B_CE); c += MM_THREADS) {
        const int r = c / (MM_B_W / MM_B_CE), col = c % (MM_B_W / MM_B_CE) * MM_B_CE;
#if MM_B_KMAJOR
        const i64 gn = n0 + r, gk = k0 + col, at = b_boff(bb, MC_ARGS) + gn * MM_K + gk;   // stored [N, K]
#else
        const i64 gk = k0 + r, gn = n0 + col, at = b_boff(bb, MC_ARGS) + gk * MM_N + gn;   // stored [K, N]
#endif
        const bool in = gn < MM_N && gk < MM_K;
        mc_cp_async<MM_B_CPB>(Bs + r * MM_B_LD + col, MM_B_PTR, in ? at : 0, in ? MM_B_CPB : 0);
    }
#else
    for (int c = threadIdx.x; c < MM_BN * MM_BK; c += MM_THREADS) {
#if MM_TRANS_B
        const int nn = c / MM_BK, kk = c % MM_BK;
#else
        const int nn = c % MM_BN, kk = c / MM_BN;
#endif
        const i64 gn = n0 + nn, gk = k0 + kk;
        MC_SST(Bs[MM_B_KMAJOR ? nn * MM_B_LD + kk : kk * MM_B_LD + nn],
               (gn < MM_N && gk < MM_K) ? mm_half(b_at(bb, gk, gn, MC_ARGS)) : (unsigned short)0);
    }
#endif
}

// One stage's BK / 16 k16 steps of warp (wm, wn): ldmatrix fragments, then
// mma.sync. Lane l addresses row l % 8 of 8x8 matrix q = l / 8: for A
// (m16k16) matrices are (m 0-7 | 8-15) x (k 0-7 | 8-15) in the order of
// a0..a3, for a pair of n8 B tiles (n 0-7, k 0-7), (n 0-7, k 8-15), then
// the next n8: b[j][0], b[j][1], b[j+1][0], b[j+1][1].
__device__ __forceinline__ void mm_compute_stage(const unsigned short* As, const unsigned short* Bs,
                                                 float (*acc)[MM_NI][4], int wm, int wn, int lane) {
    const int q = lane >> 3, r = lane & 7;
    (void)q;
    (void)r;
#pragma unroll
    for (int kk = 0; kk < MM_BK / 16; kk++) {
        u32 a[MM_MI][4], b[MM_NI][2];
#pragma unroll
        for (int i = 0; i < MM_MI; i++) {
#if MM_A_KMAJOR
            mc_ldmatrix_x4<false>(a[i], As + (wm * MM_WTM + i * 16 + (lane & 15)) * MM_A_LD + kk * 16 + (lane >> 4) * 8);
#else
            mc_ldmatrix_x4<true>(a[i], As + (kk * 16 + r + (q >> 1) * 8) * MM_A_LD + wm * MM_WTM + i * 16 + (q & 1) * 8);
#endif
        }
#pragma unroll
        for (int j = 0; j + 1 < MM_NI; j += 2) {
            u32 t[4];
#if MM_B_KMAJOR
            mc_ldmatrix_x4<false>(t, Bs + (wn * MM_WTN + j * 8 + r + (q >> 1) * 8) * MM_B_LD + kk * 16 + (q & 1) * 8);
#else
            mc_ldmatrix_x4<true>(t, Bs + (kk * 16 + r + (q & 1) * 8) * MM_B_LD + wn * MM_WTN + j * 8 + (q >> 1) * 8);
#endif
            b[j][0] = t[0];
            b[j][1] = t[1];
            b[j + 1][0] = t[2];
            b[j + 1][1] = t[3];
        }
#if MM_NI % 2
#if MM_B_KMAJOR
        mc_ldmatrix_x2<false>(b[MM_NI - 1], Bs + (wn * MM_WTN + (MM_NI - 1) * 8 + r) * MM_B_LD + kk * 16 + (q & 1) * 8);
#else
        mc_ldmatrix_x2<true>(b[MM_NI - 1], Bs + (kk * 16 + r + (q & 1) * 8) * MM_B_LD + wn * MM_WTN + (MM_NI - 1) * 8);
#endif
#endif
#pragma unroll
        for (int i = 0; i < MM_MI; i++)
#pragma unroll
            for (int j = 0; j < MM_NI; j++) mc_mma_m16n8k16(acc[i][j], a[i], b[j], MM_BF16);
    }
}

__device__ __forceinline__ void mc_matmul(MC_PARAMS) {
    MC_DYNAMIC_SMEM(mc_smem);
    unsigned short* As = (unsigned short*)mc_smem;           // [STAGES][A stage]
    unsigned short* Bs = As + MM_STAGES * MM_A_STAGE;        // [STAGES][B stage]
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
    const int wm = warp / MM_WN, wn = warp % MM_WN;
    const i64 tiles_m = (MM_M + MM_BM - 1) / MM_BM, tiles_n = (MM_N + MM_BN - 1) / MM_BN;
    const i64 nk = (MM_K + MM_BK - 1) / MM_BK;
    for (i64 t = blockIdx.x; t < (i64)MM_BATCH * tiles_m * tiles_n; t += gridDim.x) {
        const i64 bb = t / (tiles_m * tiles_n), r = t % (tiles_m * tiles_n);
        const i64 m0 = (r / tiles_n) * MM_BM, n0 = (r % tiles_n) * MM_BN;
        float acc[MM_MI][MM_NI][4];
#pragma unroll
        for (int i = 0; i < MM_MI; i++)
#pragma unroll
            for (int j = 0; j < MM_NI; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
        __syncthreads();   // the previous work item is done with shared memory
        for (int s = 0; s < MM_STAGES - 1; s++) {
            if (s < nk) mm_stage(As + s * MM_A_STAGE, Bs + s * MM_B_STAGE, bb, m0, n0, s * MM_BK, MC_ARGS);
            mc_cp_async_commit();
        }
        for (i64 kt = 0; kt < nk; kt++) {
            mc_cp_async_wait<MM_STAGES - 2>();   // this thread's copies of tile kt landed
            __syncthreads();                      // everyone's; stage (kt - 1) % STAGES is consumed
            const i64 nt = kt + MM_STAGES - 1;
            if (nt < nk) {
                const int s = (int)(nt % MM_STAGES);
                mm_stage(As + s * MM_A_STAGE, Bs + s * MM_B_STAGE, bb, m0, n0, nt * MM_BK, MC_ARGS);
            }
            mc_cp_async_commit();
            const int s = (int)(kt % MM_STAGES);
            mm_compute_stage(As + s * MM_A_STAGE, Bs + s * MM_B_STAGE, acc, wm, wn, lane);
        }
        mm_store_tile(acc, bb, m0, n0, wm, wn, g, tq, MC_ARGS);
    }
}

#endif   // MM_ASYNC (every mma.sync GEMM)

#else   // FMA

#define MM_TY (MM_THREADS / 16)
#define MM_TM (MM_BM / MM_TY)
#define MM_TN (MM_BN / 16)
#define MM_LDA (MM_BM + 4)
#define MM_LDB (MM_BN + 4)

__device__ __forceinline__ void mm_load_tile(float* As, float* Bs, i64 bb, i64 m0, i64 n0, i64 k0,
                                             MC_PARAMS) {
    for (int c = threadIdx.x; c < MM_BM * MM_BK; c += MM_THREADS) {
#if MM_TRANS_A
        const int mm = c % MM_BM, kk = c / MM_BM;   // m fastest: A is stored [K, M]
#else
        const int mm = c / MM_BK, kk = c % MM_BK;   // k fastest: A is stored [M, K]
#endif
        const i64 gm = m0 + mm, gk = k0 + kk;
        MC_SST(As[kk * MM_LDA + mm], (gm < MM_M && gk < MM_K) ? a_at(bb, gm, gk, MC_ARGS) : 0.0f);
    }
    for (int c = threadIdx.x; c < MM_BK * MM_BN; c += MM_THREADS) {
#if MM_TRANS_B
        const int nn = c / MM_BK, kk = c % MM_BK;   // k fastest: B is stored [N, K]
#else
        const int nn = c % MM_BN, kk = c / MM_BN;   // n fastest: B is stored [K, N]
#endif
        const i64 gn = n0 + nn, gk = k0 + kk;
        MC_SST(Bs[kk * MM_LDB + nn], (gn < MM_N && gk < MM_K) ? b_at(bb, gk, gn, MC_ARGS) : 0.0f);
    }
}

__device__ __forceinline__ void mm_compute_tile(const float* As, const float* Bs, float (*acc)[MM_TN],
                                                int tx, int ty) {
#pragma unroll
    for (int kk = 0; kk < MM_BK; kk++) {
        float a[MM_TM], bv[MM_TN];
#pragma unroll
        for (int i = 0; i < MM_TM; i++) a[i] = MC_SLD(As[kk * MM_LDA + ty + MM_TY * i]);
#pragma unroll
        for (int j = 0; j < MM_TN; j++) bv[j] = MC_SLD(Bs[kk * MM_LDB + tx + 16 * j]);
#pragma unroll
        for (int i = 0; i < MM_TM; i++)
#pragma unroll
            for (int j = 0; j < MM_TN; j++) acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
    }
}

__device__ __forceinline__ void mc_matmul(MC_PARAMS) {
    MC_DYNAMIC_SMEM(mc_smem);
    float* As = (float*)mc_smem;                          // [STAGES][BK][BM + 4]
    float* Bs = As + MM_STAGES * MM_BK * MM_LDA;          // [STAGES][BK][BN + 4]
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const i64 tiles_m = (MM_M + MM_BM - 1) / MM_BM, tiles_n = (MM_N + MM_BN - 1) / MM_BN;
    const i64 nk = (MM_K + MM_BK - 1) / MM_BK;
    for (i64 t = blockIdx.x; t < (i64)MM_BATCH * tiles_m * tiles_n; t += gridDim.x) {
        const i64 bb = t / (tiles_m * tiles_n), r = t % (tiles_m * tiles_n);
        const i64 m0 = (r / tiles_n) * MM_BM, n0 = (r % tiles_n) * MM_BN;
        float acc[MM_TM][MM_TN];
#pragma unroll
        for (int i = 0; i < MM_TM; i++)
#pragma unroll
            for (int j = 0; j < MM_TN; j++) acc[i][j] = 0.0f;
        __syncthreads();   // the previous work item is done with shared memory
#if MM_STAGES > 1
        for (int s = 0; s < MM_STAGES - 1; s++)
            if (s < nk) mm_load_tile(As + s * MM_BK * MM_LDA, Bs + s * MM_BK * MM_LDB, bb, m0, n0, s * MM_BK, MC_ARGS);
        for (i64 kt = 0; kt < nk; kt++) {
            __syncthreads();   // tile kt is in shared memory; tile kt - 1 is consumed
            const i64 nt = kt + MM_STAGES - 1;
            if (nt < nk) {
                const int s = (int)(nt % MM_STAGES);
                mm_load_tile(As + s * MM_BK * MM_LDA, Bs + s * MM_BK * MM_LDB, bb, m0, n0, nt * MM_BK, MC_ARGS);
            }
            const int s = (int)(kt % MM_STAGES);
            mm_compute_tile(As + s * MM_BK * MM_LDA, Bs + s * MM_BK * MM_LDB, acc, tx, ty);
        }
#else
        for (i64 kt = 0; kt < nk; kt++) {
            if (kt) __syncthreads();
            mm_load_tile(As, Bs, bb, m0, n0, kt * MM_BK, MC_ARGS);
            __syncthreads();
            mm_compute_tile(As, Bs, acc, tx, ty);
        }
#endif
#pragma unroll
        for (int i = 0; i < MM_TM; i++)
#pragma unroll
            for (int j = 0; j < MM_TN; j++) {
                const i64 m = m0 + ty + MM_TY * i, n = n0 + tx + 16 * j;
                if (MM_IN(m, n)) mm_store(bb, m, n, acc[i][j], MC_ARGS);
            }
    }
}

#endif
// ---- end of tiled GEMM
