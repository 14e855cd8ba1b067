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
//                  4 a cluster of NORM_CLUSTER blocks per row (sm_90+),
//                    each caching a slice of NORM_SLICE columns as layout
//                    2 does; the blocks' statistics meet through
//                    distributed shared memory
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
// layernorm accumulates sums shifted by the row's first element. Softmax's
// cache layouts (2, 4) merge (max, sum) online in their first pass too, so
// the cache is read once, by the output pass; the layouts that compute the
// exponential again there fold 1 / sum into its offset (norm_fold: one
// MUFU.LG2 a row, no multiply an element).
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
// The layouts that compute the exponential again in the output pass fold
// 1 / sum into its offset: e / sum = 2^(x log2e - off - log2 sum), one
// FFMA and one MUFU.EX2 an element, no multiply (a sum of 0: an offset of
// +inf, every output 0)
__device__ __forceinline__ float norm_fold(float off, float s) { return s == 0.0f ? MC_INF : off + mc_log2(s); }
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

#if NORM_LAYOUT == 4
// the columns [rank * NORM_SLICE, +NORM_SLICE) of the row are block rank's
// (a multiple of the vector; the last block's may be shorter, or empty)
#define NORM_SLICE ((((NORM_W) + NORM_CLUSTER - 1) / NORM_CLUSTER + NORM_V - 1) / NORM_V * NORM_V)
#endif

#if NORM_LAYOUT >= 2 && NORM_KIND == 0
// softmax's online statistics, one vector at a time (the streamed row's
// passes and the caches' first pass): the running max m and sum s of
// 2^(x log2e - m log2e), the sum rescaled once per vector, not per element
__device__ __forceinline__ void norm_online_step(const float* v, float& m, float& s) {
    float mv = m;
#pragma unroll
    for (int u = 0; u < NORM_V; u++) mv = fmaxf(mv, v[u]);
    if (mv > m) s *= mc_exp2((m - mv) * MC_L2E);
    m = mv;
    const float off = norm_offset(m);
#pragma unroll
    for (int u = 0; u < NORM_V; u++) s += mc_exp2(fmaf(v[u], MC_L2E, -off));
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
// reads at j0, j0 + one chunk, ... (below hi), all issued before any is used.
__device__ __forceinline__ void norm_load_step(i64 row, i64 j0, i64 hi, float* v, MC_PARAMS) {
#pragma unroll
    for (int k = 0; k < NORM_UNROLL; k++) {
        const i64 j = j0 + (i64)k * NORM_CHUNK;
        if (j < hi) x_load(norm_index(row, j MC_DIMS_ARGS), &v[k * NORM_V], MC_ARGS);
    }
}
#if NORM_LAYOUT == 3
typedef float NORM_CACHE_T;   // no cache: the pass reads X
#endif
// The columns [lo, hi) of the row (the cache holds them from lo).
__device__ __forceinline__ void norm_out_pass(i64 row, int t, i64 lo, i64 hi, float a, float b, float off,
                                              const NORM_CACHE_T* cache, MC_PARAMS) {
    (void)off; (void)cache;
#pragma unroll 1
    for (i64 j0 = lo + (i64)t * NORM_V; j0 < hi; j0 += (i64)NORM_CHUNK * NORM_UNROLL) {
        float v[NORM_UNROLL * NORM_V];
#if NORM_LAYOUT == 2 || NORM_LAYOUT == 4
#pragma unroll
        for (int k = 0; k < NORM_UNROLL; k++) {
            const i64 j = j0 + (i64)k * NORM_CHUNK;
            if (j < hi) cache_get(cache, j - lo, &v[k * NORM_V]);
        }
#else
        norm_load_step(row, j0, hi, v, MC_ARGS);
#endif
#pragma unroll
        for (int k = 0; k < NORM_UNROLL; k++) {
            const i64 j = j0 + (i64)k * NORM_CHUNK;
            if (j < hi) {
                const i64 xi = norm_index(row, j MC_DIMS_ARGS);
#if NORM_KIND == 0   // off: 1 / sum folded in (norm_fold)
#pragma unroll
                for (int u = 0; u < NORM_V; u++) v[k * NORM_V + u] = mc_exp2(fmaf(v[k * NORM_V + u], MC_L2E, -off));
#else
                norm_apply(&v[k * NORM_V], a, b, j, xi, MC_ARGS);
#endif
                epilogue_v(xi, &v[k * NORM_V], MC_ARGS);
            }
        }
    }
}
#endif

#if NORM_LAYOUT == 2 || NORM_LAYOUT == 4
// ---- layouts 2 and 4: the row (layout 4: the block's slice [lo, hi))
// cached in shared memory in X's dtype; four vectors a thread in flight
// per step of the first pass. The block's statistics of its columns:
// softmax (a, b) = (1 / sum, -), off = max log2e; layernorm a = mean, q =
// the sum of squared deviations from it; rmsnorm q = the sum of squares.
__device__ __forceinline__ void norm_block_stats(i64 row, int t, i64 lo, i64 hi, float* part, NORM_CACHE_T* cache,
                                                 float& a, float& q, float& off, MC_PARAMS) {
    // softmax: this thread's running max and sum of 2^(x log2e - max log2e),
    // merged online a vector at a time (the sum rescaled once per vector
    // whose max is larger), so the cache is read once, by the output pass;
    // layernorm: the sum; rmsnorm: the sum of squares
    float acc = NORM_KIND == 0 ? MC_NINF : 0.0f, s = 0.0f;
    (void)s;
#pragma unroll 1
    for (i64 j0 = lo + (i64)t * NORM_V; j0 < hi; j0 += (i64)NORM_CHUNK * NORM_UNROLL) {
        float v[NORM_UNROLL * NORM_V];
#ifdef NORM_RAW   // the loaded bits cached as they are, unpacked once
        uint4 raw[NORM_UNROLL];
#pragma unroll
        for (int k = 0; k < NORM_UNROLL; k++) {
            const i64 j = j0 + (i64)k * NORM_CHUNK;
            if (j < hi) x_load_raw(norm_index(row, j MC_DIMS_ARGS), &raw[k], MC_ARGS);
        }
#else
        norm_load_step(row, j0, hi, v, MC_ARGS);
#endif
#pragma unroll
        for (int k = 0; k < NORM_UNROLL; k++) {
            const i64 j = j0 + (i64)k * NORM_CHUNK;
            if (j < hi) {
#ifdef NORM_RAW
                cache_put_raw(cache, j - lo, raw[k]);
                raw_unpack(raw[k], &v[k * NORM_V]);
#else
                cache_put(cache, j - lo, &v[k * NORM_V]);
#endif
#if NORM_KIND == 0
                norm_online_step(&v[k * NORM_V], acc, s);
#else
#pragma unroll
                for (int u = 0; u < NORM_V; u++) {
                    const float x = v[k * NORM_V + u];
#if NORM_KIND == 1
                    acc += x;
#else
                    acc = fmaf(x, x, acc);
#endif
                }
#endif
            }
        }
    }
    // each thread reads back only the vectors it cached itself: no barrier
    // between the passes beyond the reductions'
    off = 0.0f;
#if NORM_KIND == 0
    // merge the threads' (max, sum) pairs: the block's max, each sum rescaled to it
    const float m = norm_max(acc, part);
    s = acc == MC_NINF ? 0.0f : s * mc_exp2((acc - m) * MC_L2E);
    off = norm_offset(m);
    a = norm_sum(s, part);   // the sum (the caller folds it into the offset)
    q = m;
#elif NORM_KIND == 1
#if NORM_LAYOUT == 2
    a = norm_sum(acc, part) * NORM_INV_W;
#else
    const i64 n = hi > lo ? hi - lo : 0;
    const float sum = norm_sum(acc, part);
    a = n > 0 ? sum * mc_rcp((float)n) : 0.0f;   // one reciprocal per row
#endif
    q = 0.0f;
#pragma unroll 1
    for (i64 j = lo + (i64)t * NORM_V; j < hi; j += NORM_CHUNK) {
        float v[NORM_V];
        cache_get(cache, j - lo, v);
#pragma unroll
        for (int u = 0; u < NORM_V; u++) {
            const float d = v[u] - a;
            q = fmaf(d, d, q);
        }
    }
    q = norm_sum(q, part);
#else
    a = 0.0f;
    q = norm_sum(acc, part);
#endif
}
#endif

#if NORM_LAYOUT == 2
__device__ __forceinline__ void norm_row(i64 row, int t, float* part, NORM_CACHE_T* cache, MC_PARAMS) {
    float a, q, off;
    norm_block_stats(row, t, 0, NORM_W, part, cache, a, q, off, MC_ARGS);
#if NORM_KIND == 0
    (void)q;
    off = norm_fold(off, a);
    const float b = 0.0f;
#else
    const float b = norm_rstd(q, NORM_INV_W);
#endif
    norm_out_pass(row, t, 0, NORM_W, a, b, off, cache, MC_ARGS);
    // no barrier before the next row: every slot of the cache is written
    // and read by one thread only
}
#endif

#if NORM_LAYOUT == 4
// ---- layout 4: a cluster per row. Each block's statistics of its slice
// (softmax: max and sum of exponentials; layernorm: mean and sum of
// squared deviations; rmsnorm: sum of squares) go to cpart[par] (par: the
// row's parity, so a row's partials are never overwritten while another
// block may still read them: the next row's barrier.cluster separates a
// read from the write two rows later); after barrier.cluster every thread
// reads the cluster's NORM_CLUSTER partials through distributed shared
// memory and merges them (Chan's formula for the deviations; the maxima
// rescale the sums), then writes its slice's outputs from the cache.
__device__ __forceinline__ void norm_row(i64 row, int t, unsigned rank, float* part, float2* cpart, int par,
                                         NORM_CACHE_T* cache, MC_PARAMS) {
    const i64 lo = (i64)rank * NORM_SLICE, hi = lo + NORM_SLICE < NORM_W ? lo + NORM_SLICE : NORM_W;
    float a, q, off;
    norm_block_stats(row, t, lo, hi, part, cache, a, q, off, MC_ARGS);
    if (t == 0) MC_SST(cpart[par], make_float2(NORM_KIND == 0 ? q : a, NORM_KIND == 0 ? a : q));
    mc_cluster_sync();
    float2 p[NORM_CLUSTER];
#pragma unroll
    for (int r = 0; r < NORM_CLUSTER; r++) p[r] = mc_dsmem_ld(&cpart[par], (unsigned)r);
    float b = 0.0f;
#if NORM_KIND == 0
    // (max, sum) pairs: the row's max, each sum rescaled to it
    float M = MC_NINF, S = 0.0f;
#pragma unroll
    for (int r = 0; r < NORM_CLUSTER; r++) M = fmaxf(M, p[r].x);
#pragma unroll
    for (int r = 0; r < NORM_CLUSTER; r++) S += p[r].x == MC_NINF ? 0.0f : p[r].y * mc_exp2((p[r].x - M) * MC_L2E);
    off = norm_fold(norm_offset(M), S);
#elif NORM_KIND == 1
    // (mean, M2) of each slice of n_r columns: mean = sum n_r mean_r / W,
    // M2 = sum M2_r + n_r (mean_r - mean)^2
    float mean = 0.0f;
#pragma unroll
    for (int r = 0; r < NORM_CLUSTER; r++) {
        const i64 l0 = (i64)r * NORM_SLICE, h0 = l0 + NORM_SLICE < NORM_W ? l0 + NORM_SLICE : NORM_W;
        mean = fmaf((float)(h0 > l0 ? h0 - l0 : 0), p[r].x, mean);
    }
    mean *= NORM_INV_W;
    float m2 = 0.0f;
#pragma unroll
    for (int r = 0; r < NORM_CLUSTER; r++) {
        const i64 l0 = (i64)r * NORM_SLICE, h0 = l0 + NORM_SLICE < NORM_W ? l0 + NORM_SLICE : NORM_W;
        const float d = p[r].x - mean;
        m2 += fmaf((float)(h0 > l0 ? h0 - l0 : 0) * d, d, p[r].y);
    }
    a = mean;
    b = norm_rstd(m2, NORM_INV_W);
#else
    float S = 0.0f;
#pragma unroll
    for (int r = 0; r < NORM_CLUSTER; r++) S += p[r].y;
    a = 0.0f;
    b = norm_rstd(S, NORM_INV_W);
#endif
    norm_out_pass(row, t, lo, hi, a, b, off, cache, MC_ARGS);
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
        norm_load_step(row, j0, NORM_W, v, MC_ARGS);
#pragma unroll
        for (int k = 0; k < NORM_UNROLL; k++) {
            const i64 j = j0 + (i64)k * NORM_CHUNK;
            if (j < NORM_W) {
#if NORM_KIND == 0
                norm_online_step(&v[k * NORM_V], m, s);
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
    const float off = norm_fold(norm_offset(M), norm_sum(s, part));
    a = 0.0f;
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
    norm_out_pass(row, t, 0, NORM_W, a, b, off, (const NORM_CACHE_T*)0, MC_ARGS);
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
#elif NORM_LAYOUT == 4
    // a cluster per row (consecutive blocks, rank = blockIdx.x % NORM_CLUSTER),
    // rows handed out cluster by cluster over a persistent grid
    __shared__ float2 cpart[2];
    MC_DYNAMIC_SMEM(mc_smem);
    NORM_CACHE_T* cache = (NORM_CACHE_T*)mc_smem;
    const unsigned rank = mc_cluster_rank();
    int par = 0;
    for (i64 row = blockIdx.x / NORM_CLUSTER; row < NORM_ROWS; row += gridDim.x / NORM_CLUSTER, par ^= 1)
        norm_row(row, (int)threadIdx.x, rank, part, cpart, par, cache, MC_ARGS);
    mc_cluster_sync();   // no block exits while another may read its cpart
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
