// ---- row norms: softmax, layernorm, rmsnorm over a row, at copy speed.
//
// Generated before this text (codegen/tpl_norm.c, from the plan's row
// layout, kernelplan/launch.c):
//   NORM_KIND      0 softmax, 1 layernorm, 2 rmsnorm
//   NORM_W         row width; NORM_INNER stride between row elements
//                  (softmax over a non-last axis); NORM_ROWS rows
//   NORM_INV_W     1 / NORM_W as a float (a literal, or an expression of
//                  the dims where the width depends on one)
//   NORM_V         elements per access: 16 bytes of X (8 f16/bf16, 4 f32)
//                  where the plan proves every vector aligned, 4 where
//                  only 4 | W, 1 otherwise
//   NORM_LAYOUT    0 a warp per row, the row in registers
//                  1 a block per row, the row in registers
//                  2 a block per row, the row cached in shared memory in
//                    X's storage dtype (NORM_CACHE_T elements)
//                  3 a block per row, the row read twice (too wide for
//                    shared memory)
//   NORM_LANES     threads sharing a row (32, or the block)
//   NORM_NCHUNK    layouts 0 and 1: the chunks of NORM_V * NORM_LANES
//                  elements each thread keeps (from the largest width in
//                  range where the width depends on a dim; chunks past the
//                  row's end are skipped)
//   NORM_EPS, NORM_HAS_BETA
//   x_load(xi, vals, MC_ARGS)        NORM_V values of X at element xi
//   gamma_v / beta_v(j, xi, vals)    NORM_V parameters at column j
//   epilogue_v(xi, vals, MC_ARGS)    the fused chain per value, then packed
//                                    stores of NORM_V outputs
//   x_first(xi, MC_ARGS)             one value of X (layout 3, layernorm)
//   layout 2: cache_put(c, j, vals) / cache_get(c, j, vals), NORM_V values
//   at column j of the cache, stored in X's dtype (exact: X's values are
//   rounded to it already)
//
// What the SM executes per element (docs/codegen.md "Norms"): every load of
// a thread's part of the row is issued before the first use; the
// statistics take two passes over values held on chip — softmax: the max,
// then e = 2^(x log2e - max log2e) once per element (one FFMA and one
// MUFU.EX2), kept, and their sum; layernorm: the sum, then the sum of
// squared deviations; rmsnorm: the sum of squares — each a few FMAs per
// element; one reciprocal (softmax) or one rsqrt (the norms) per row; the
// output (x - mean) * rstd * gamma + beta as FMAs. No IEEE division or
// square root, no per-element branch. Layout 3 (the row does not fit on
// chip) reads X twice: softmax merges (max, sum) pairs online per vector,
// layernorm accumulates sums shifted by the row's first element.
// Statistics meet across warps through shared memory (32 floats).

#define NORM_CHUNK (NORM_V * NORM_LANES)
#ifndef NORM_NCHUNK
#define NORM_NCHUNK ((NORM_W + NORM_CHUNK - 1) / NORM_CHUNK)
#endif

__device__ __forceinline__ i64 norm_index(i64 row, i64 j MC_DIMS_PARAMS) {
    return ((row / NORM_INNER) * NORM_W + j) * NORM_INNER + row % NORM_INNER;
}

// The row's sum and max over the threads that share it: a warp (layout 0)
// or the block (part: 32 floats of shared memory; every thread gets it).
__device__ __forceinline__ float norm_sum(float v, float* part) {
#if NORM_LAYOUT == 0
    (void)part;
    return mc_warp_sum(v);
#else
    return mc_block_sum(v, part);
#endif
}
// fmaxf: a NaN element reaches the output through its exponential.
__device__ __forceinline__ float norm_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float norm_max(float v, float* part) {
    v = norm_warp_max(v);
#if NORM_LAYOUT != 0
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();   // part[] free from its last use
    if (lane == 0) MC_SST(part[warp], v);
    __syncthreads();
    v = norm_warp_max(lane < nw ? MC_SLD(part[lane]) : MC_NINF);
#else
    (void)part;
#endif
    return v;
}

// softmax: the row's max as the exponent's offset (m log2e; 0 for a row of
// -inf, whose exponentials are then all 0), and 1 / sum (0 for a sum of 0:
// the fully masked row's output is 0, as the reference interpreter's; a
// NaN sum gives NaN everywhere)
__device__ __forceinline__ float norm_offset(float m) { return m == MC_NINF ? 0.0f : m * MC_L2E; }
__device__ __forceinline__ float norm_inv_sum(float s) { return s == 0.0f ? 0.0f : mc_rcp(s); }
// layernorm / rmsnorm: 1 / sqrt(mean square + eps); inv_w = NORM_INV_W,
// read where the dims are in scope
__device__ __forceinline__ float norm_rstd(float sum_sq, float inv_w) { return mc_rsqrt(fmaf(sum_sq, inv_w, NORM_EPS)); }

// The output of the NORM_V values v[] at column j (element xi of X), in
// place. softmax: v holds the exponentials, a = 1 / sum; layernorm: a =
// mean, b = rstd; rmsnorm: b = rstd.
__device__ __forceinline__ void norm_apply(float* v, float a, float b, i64 j, i64 xi, MC_PARAMS) {
#if NORM_KIND == 0
    (void)b; (void)j; (void)xi;
#pragma unroll
    for (int u = 0; u < NORM_V; u++) v[u] *= a;
#else
    float g[NORM_V];
    gamma_v(j, xi, g, MC_ARGS);
#if NORM_HAS_BETA
    float bt[NORM_V];
    beta_v(j, xi, bt, MC_ARGS);
#endif
#pragma unroll
    for (int u = 0; u < NORM_V; u++) {
#if NORM_KIND == 1
        const float n = (v[u] - a) * b;
#else
        (void)a;
        const float n = v[u] * b;
#endif
#if NORM_HAS_BETA
        v[u] = fmaf(n, g[u], bt[u]);
#else
        v[u] = n * g[u];
#endif
    }
#endif
}

#if NORM_LAYOUT <= 1
// ---- layouts 0 and 1: the row in registers, NORM_NCHUNK vectors a thread
__device__ __forceinline__ void norm_row(i64 row, int t, float* part, MC_PARAMS) {
    float v[NORM_NCHUNK * NORM_V];
#define NORM_J(c) ((i64)((c) * NORM_LANES + t) * NORM_V)
    // every load of the row issued before the first use
#pragma unroll
    for (int c = 0; c < NORM_NCHUNK; c++)
        if (NORM_J(c) < NORM_W) x_load(norm_index(row, NORM_J(c) MC_DIMS_ARGS), &v[c * NORM_V], MC_ARGS);
    float a, b = 0.0f;
#if NORM_KIND == 0
    float m = MC_NINF;
#pragma unroll
    for (int c = 0; c < NORM_NCHUNK; c++)
        if (NORM_J(c) < NORM_W) {
#pragma unroll
            for (int u = 0; u < NORM_V; u++) m = fmaxf(m, v[c * NORM_V + u]);
        }
    const float off = norm_offset(norm_max(m, part));
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < NORM_NCHUNK; c++)
        if (NORM_J(c) < NORM_W) {
#pragma unroll
            for (int u = 0; u < NORM_V; u++) {
                const float e = mc_exp2(fmaf(v[c * NORM_V + u], MC_L2E, -off));
                v[c * NORM_V + u] = e;
                s += e;
            }
        }
    a = norm_inv_sum(norm_sum(s, part));
#elif NORM_KIND == 1
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < NORM_NCHUNK; c++)
        if (NORM_J(c) < NORM_W) {
#pragma unroll
            for (int u = 0; u < NORM_V; u++) s += v[c * NORM_V + u];
        }
    a = norm_sum(s, part) * NORM_INV_W;   // the mean
    float q = 0.0f;
#pragma unroll
    for (int c = 0; c < NORM_NCHUNK; c++)
        if (NORM_J(c) < NORM_W) {
#pragma unroll
            for (int u = 0; u < NORM_V; u++) {
                const float d = v[c * NORM_V + u] - a;
                q = fmaf(d, d, q);
            }
        }
    b = norm_rstd(norm_sum(q, part), NORM_INV_W);
#else
    float q = 0.0f;
#pragma unroll
    for (int c = 0; c < NORM_NCHUNK; c++)
        if (NORM_J(c) < NORM_W) {
#pragma unroll
            for (int u = 0; u < NORM_V; u++) q = fmaf(v[c * NORM_V + u], v[c * NORM_V + u], q);
        }
    a = 0.0f;
    b = norm_rstd(norm_sum(q, part), NORM_INV_W);
#endif
#pragma unroll
    for (int c = 0; c < NORM_NCHUNK; c++)
        if (NORM_J(c) < NORM_W) {
            const i64 xi = norm_index(row, NORM_J(c) MC_DIMS_ARGS);
            norm_apply(&v[c * NORM_V], a, b, NORM_J(c), xi, MC_ARGS);
            epilogue_v(xi, &v[c * NORM_V], MC_ARGS);
        }
#undef NORM_J
}
#endif

#if NORM_LAYOUT >= 2
// The output pass of the layouts that do not keep the row in registers:
// four vectors a thread read (from the cache, or from X again) before the
// first is used, each turned into its output (softmax: its exponential
// again, offset by off) and stored. The loop itself is not unrolled: its
// body is the unrolled step, whose stores keep their 16-byte form.
#define NORM_UNROLL 4
// One step of a streaming pass: the NORM_UNROLL vectors of X a thread
// reads at j0, j0 + one chunk, ..., all issued before any is used.
__device__ __forceinline__ void norm_load_step(i64 row, i64 j0, float* v, MC_PARAMS) {
#pragma unroll
    for (int k = 0; k < NORM_UNROLL; k++) {
        const i64 j = j0 + (i64)k * NORM_CHUNK;
        if (j < NORM_W) x_load(norm_index(row, j MC_DIMS_ARGS), &v[k * NORM_V], MC_ARGS);
    }
}
#if NORM_LAYOUT == 3
typedef float NORM_CACHE_T;   // no cache: the pass reads X
#endif
__device__ __forceinline__ void norm_out_pass(i64 row, int t, float a, float b, float off, const NORM_CACHE_T* cache,
                                              MC_PARAMS) {
    (void)off; (void)cache;
#pragma unroll 1
    for (i64 j0 = (i64)t * NORM_V; j0 < NORM_W; j0 += (i64)NORM_CHUNK * NORM_UNROLL) {
        float v[NORM_UNROLL * NORM_V];
#if NORM_LAYOUT == 2
#pragma unroll
        for (int k = 0; k < NORM_UNROLL; k++) {
            const i64 j = j0 + (i64)k * NORM_CHUNK;
            if (j < NORM_W) cache_get(cache, j, &v[k * NORM_V]);
        }
#else
        norm_load_step(row, j0, v, MC_ARGS);
#endif
#pragma unroll
        for (int k = 0; k < NORM_UNROLL; k++) {
            const i64 j = j0 + (i64)k * NORM_CHUNK;
            if (j < NORM_W) {
#if NORM_KIND == 0
#pragma unroll
                for (int u = 0; u < NORM_V; u++) v[k * NORM_V + u] = mc_exp2(fmaf(v[k * NORM_V + u], MC_L2E, -off));
#endif
                const i64 xi = norm_index(row, j MC_DIMS_ARGS);
                norm_apply(&v[k * NORM_V], a, b, j, xi, MC_ARGS);
                epilogue_v(xi, &v[k * NORM_V], MC_ARGS);
            }
        }
    }
}
#endif

#if NORM_LAYOUT == 2
// ---- layout 2: the row cached in shared memory in X's dtype; four vectors
// a thread in flight per step of the first pass
__device__ __forceinline__ void norm_row(i64 row, int t, float* part, NORM_CACHE_T* cache, MC_PARAMS) {
    float a, b = 0.0f;
    float acc = NORM_KIND == 0 ? MC_NINF : 0.0f;   // softmax: max; layernorm: sum; rmsnorm: sum of squares
#pragma unroll 1
    for (i64 j0 = (i64)t * NORM_V; j0 < NORM_W; j0 += (i64)NORM_CHUNK * NORM_UNROLL) {
        float v[NORM_UNROLL * NORM_V];
        norm_load_step(row, j0, v, MC_ARGS);
#pragma unroll
        for (int k = 0; k < NORM_UNROLL; k++) {
            const i64 j = j0 + (i64)k * NORM_CHUNK;
            if (j < NORM_W) {
                cache_put(cache, j, &v[k * NORM_V]);
#pragma unroll
                for (int u = 0; u < NORM_V; u++) {
                    const float x = v[k * NORM_V + u];
#if NORM_KIND == 0
                    acc = fmaxf(acc, x);
#elif NORM_KIND == 1
                    acc += x;
#else
                    acc = fmaf(x, x, acc);
#endif
                }
            }
        }
    }
    // each thread reads back only the vectors it cached itself: no barrier
    // between the passes beyond the reductions'
#if NORM_KIND == 0
    const float off = norm_offset(norm_max(acc, part));
    float s = 0.0f;
#pragma unroll 1
    for (i64 j = (i64)t * NORM_V; j < NORM_W; j += NORM_CHUNK) {
        float v[NORM_V];
        cache_get(cache, j, v);
#pragma unroll
        for (int u = 0; u < NORM_V; u++) s += mc_exp2(fmaf(v[u], MC_L2E, -off));
    }
    a = norm_inv_sum(norm_sum(s, part));
#elif NORM_KIND == 1
    a = norm_sum(acc, part) * NORM_INV_W;
    float q = 0.0f;
#pragma unroll 1
    for (i64 j = (i64)t * NORM_V; j < NORM_W; j += NORM_CHUNK) {
        float v[NORM_V];
        cache_get(cache, j, v);
#pragma unroll
        for (int u = 0; u < NORM_V; u++) {
            const float d = v[u] - a;
            q = fmaf(d, d, q);
        }
    }
    b = norm_rstd(norm_sum(q, part), NORM_INV_W);
#else
    a = 0.0f;
    b = norm_rstd(norm_sum(acc, part), NORM_INV_W);
#endif
#if NORM_KIND != 0
    const float off = 0.0f;
#endif
    norm_out_pass(row, t, a, b, off, cache, MC_ARGS);
    // no barrier before the next row: every slot of the cache is written
    // and read by one thread only
}
#endif

#if NORM_LAYOUT == 3
// ---- layout 3: the row read twice, four vectors a thread in flight per
// step of each pass
__device__ __forceinline__ void norm_row(i64 row, int t, float* part, MC_PARAMS) {
    float a, b = 0.0f;
#if NORM_KIND == 0
    float m = MC_NINF, s = 0.0f;   // this thread's running max and sum of 2^(x log2e - m log2e)
#elif NORM_KIND == 1
    // sums shifted by the row's first element: no cancellation where the
    // mean is far from 0 and the deviations small
    const float shift = x_first(norm_index(row, 0 MC_DIMS_ARGS), MC_ARGS);
    float s = 0.0f, q = 0.0f;
#else
    float q = 0.0f;
#endif
#pragma unroll 1
    for (i64 j0 = (i64)t * NORM_V; j0 < NORM_W; j0 += (i64)NORM_CHUNK * NORM_UNROLL) {
        float v[NORM_UNROLL * NORM_V];
        norm_load_step(row, j0, v, MC_ARGS);
#pragma unroll
        for (int k = 0; k < NORM_UNROLL; k++) {
            const i64 j = j0 + (i64)k * NORM_CHUNK;
            if (j < NORM_W) {
#if NORM_KIND == 0
                float mv = m;
#pragma unroll
                for (int u = 0; u < NORM_V; u++) mv = fmaxf(mv, v[k * NORM_V + u]);
                // rescale the running sum once per vector, not per element
                if (mv > m) s *= mc_exp2((m - mv) * MC_L2E);
                m = mv;
                const float off = norm_offset(m);
#pragma unroll
                for (int u = 0; u < NORM_V; u++) s += mc_exp2(fmaf(v[k * NORM_V + u], MC_L2E, -off));
#elif NORM_KIND == 1
#pragma unroll
                for (int u = 0; u < NORM_V; u++) {
                    const float d = v[k * NORM_V + u] - shift;
                    s += d;
                    q = fmaf(d, d, q);
                }
#else
#pragma unroll
                for (int u = 0; u < NORM_V; u++) q = fmaf(v[k * NORM_V + u], v[k * NORM_V + u], q);
#endif
            }
        }
    }
#if NORM_KIND == 0
    // merge the threads' (max, sum) pairs: the row's max, each sum rescaled to it
    const float M = norm_max(m, part);
    s = m == MC_NINF ? 0.0f : s * mc_exp2((m - M) * MC_L2E);
    const float off = norm_offset(M);
    a = norm_inv_sum(norm_sum(s, part));
#elif NORM_KIND == 1
    const float S = norm_sum(s, part), Q = norm_sum(q, part);
    const float ds = S * NORM_INV_W;   // mean - shift
    a = shift + ds;
    b = norm_rstd(fmaxf(fmaf(-ds, S, Q), 0.0f), NORM_INV_W);   // sum of squared deviations = Q - S^2 / W
#else
    a = 0.0f;
    b = norm_rstd(norm_sum(q, part), NORM_INV_W);
#endif
#if NORM_KIND != 0
    const float off = 0.0f;
#endif
    norm_out_pass(row, t, a, b, off, (const NORM_CACHE_T*)0, MC_ARGS);
}
#endif

__device__ __forceinline__ void mc_norm(MC_PARAMS) {
    __shared__ float part[32];
#if NORM_LAYOUT == 0
    // a warp per row, rows handed out warp by warp over a persistent grid
    const int lane = threadIdx.x & 31;
    const i64 warps = (i64)gridDim.x * (blockDim.x >> 5);
    for (i64 row = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); row < NORM_ROWS; row += warps)
        norm_row(row, lane, part, MC_ARGS);
#else
#if NORM_LAYOUT == 2
    MC_DYNAMIC_SMEM(mc_smem);
    NORM_CACHE_T* cache = (NORM_CACHE_T*)mc_smem;
#endif
    for (i64 row = blockIdx.x; row < NORM_ROWS; row += gridDim.x) {
#if NORM_LAYOUT == 2
        norm_row(row, (int)threadIdx.x, part, cache, MC_ARGS);
#else
        norm_row(row, (int)threadIdx.x, part, MC_ARGS);
#endif
    }
#endif
}
// ---- end of row norms
