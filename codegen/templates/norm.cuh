// ---- streaming norms: softmax (online max / sum), layernorm (Welford),
// ---- rmsnorm (sum of squares), one row per warp or per block.
//
// Generated before this text: NORM_KIND (0 softmax, 1 layernorm, 2 rmsnorm),
// NORM_W (row width), NORM_INNER (stride between row elements: softmax
// over a non-last axis), NORM_ROWS, NORM_V (elements per access: 16 bytes
// of X, 8 f16/bf16 or 4 f32, where X is the kernel's own read with
// contiguous rows and NORM_V | W, so the plan proves every vector aligned;
// 4 where only 4 | W; 1 otherwise), NORM_WARP_ROW (a warp per row, values
// kept in registers) or a block per row with the row cached in shared
// memory (NORM_CACHE) or re-read (wide rows), NORM_EPS, and the accessors
// NORM_NCHUNK (a warp per row: the chunks of NORM_V * 32 elements each
// lane's registers hold; given where NORM_W is an expression of the dims,
// from the largest width in range, the chunks past the row's end
// skipped), x_load(xi, vals, MC_ARGS) (NORM_V values of X at element xi), gamma_v /
// beta_v (NORM_V parameters at column j) and epilogue_v(xi, vals, MC_ARGS)
// (the fused chain per value, then packed stores of NORM_V outputs).
//
// One pass over the row computes the statistics (each thread its own, then
// __shfl_xor_sync within the warp, then shared memory across warps: the
// two-level scheme for rows of up to 262144 and more), a second pass writes
// the output from the cached values.

struct norm_stat {
    float a, b, c;   // softmax: max, sum; layernorm: count, mean, M2; rmsnorm: sum of squares
};

__device__ __forceinline__ norm_stat norm_identity() {
    norm_stat s;
#if NORM_KIND == 0
    s.a = MC_NINF; s.b = 0.0f; s.c = 0.0f;
#else
    s.a = 0.0f; s.b = 0.0f; s.c = 0.0f;
#endif
    return s;
}

__device__ __forceinline__ void norm_add(norm_stat& s, float x) {
#if NORM_KIND == 0
    if (x > s.a) { s.b = s.b * expf(s.a - x) + 1.0f; s.a = x; }   // s.a = -inf: 0 * 0 + 1
    else if (x == x && x != MC_NINF) { s.b += expf(x - s.a); }
    else if (x != x) { s.a = x; }                                   // NaN propagates
#elif NORM_KIND == 1
    s.a += 1.0f;
    float d = x - s.b;
    s.b += d / s.a;
    s.c += d * (x - s.b);
#else
    s.a += x * x;
#endif
}

__device__ __forceinline__ norm_stat norm_merge(norm_stat p, norm_stat q) {
    norm_stat r;
#if NORM_KIND == 0
    float m = mc_max_nan(p.a, q.a);
    if (m == MC_NINF) { r.a = m; r.b = 0.0f; }
    else {
        r.a = m;
        r.b = (p.a == MC_NINF ? 0.0f : p.b * expf(p.a - m)) + (q.a == MC_NINF ? 0.0f : q.b * expf(q.a - m));
    }
    r.c = 0.0f;
#elif NORM_KIND == 1
    float n = p.a + q.a;
    if (n == 0.0f) return p;
    float d = q.b - p.b;
    r.a = n;
    r.b = p.b + d * (q.a / n);
    r.c = p.c + q.c + d * d * (p.a * q.a / n);
#else
    r.a = p.a + q.a; r.b = 0.0f; r.c = 0.0f;
#endif
    return r;
}

__device__ __forceinline__ norm_stat norm_warp_merge(norm_stat s) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        norm_stat t;
        t.a = __shfl_xor_sync(0xffffffffu, s.a, o);
        t.b = __shfl_xor_sync(0xffffffffu, s.b, o);
        t.c = __shfl_xor_sync(0xffffffffu, s.c, o);
        s = norm_merge(s, t);
    }
    return s;
}

// The normalised values of the NORM_V row elements v[] at column j
// (element xi of X), in place, from the row's statistics; gamma and beta
// come NORM_V at a time (gamma_v / beta_v: a vector load by column where
// they are plain last-axis vectors).
__device__ __forceinline__ void norm_apply(const norm_stat& s, float* v, i64 j, i64 xi, MC_PARAMS) {
#if NORM_KIND == 0
    (void)j; (void)xi;
#pragma unroll
    for (int u = 0; u < NORM_V; u++)   // a row of -inf: exp(-inf - -inf) is NaN; the reference gives 0/0 too
        v[u] = s.a == MC_NINF ? 0.0f : expf(v[u] - s.a) / s.b;
#elif NORM_KIND == 1
    float g[NORM_V];
    gamma_v(j, xi, g, MC_ARGS);
#if NORM_HAS_BETA
    float bt[NORM_V];
    beta_v(j, xi, bt, MC_ARGS);
#endif
    const float den = sqrtf(s.c / (float)NORM_W + NORM_EPS);
#pragma unroll
    for (int u = 0; u < NORM_V; u++) {
        float y = (v[u] - s.b) / den;
        y = y * g[u];
#if NORM_HAS_BETA
        y = y + bt[u];
#endif
        v[u] = y;
    }
#else
    float g[NORM_V];
    gamma_v(j, xi, g, MC_ARGS);
    const float den = sqrtf(s.a / (float)NORM_W + NORM_EPS);
#pragma unroll
    for (int u = 0; u < NORM_V; u++) v[u] = v[u] / den * g[u];
#endif
}

__device__ __forceinline__ i64 norm_index(i64 row, i64 j MC_DIMS_PARAMS) {
    return ((row / NORM_INNER) * NORM_W + j) * NORM_INNER + row % NORM_INNER;
}

#define NORM_CHUNK (NORM_V * NORM_LANES)
#ifndef NORM_NCHUNK   // a warp's chunks of the row (a width that depends on a dim: at its largest)
#define NORM_NCHUNK ((NORM_W + NORM_CHUNK - 1) / NORM_CHUNK)
#endif

__device__ __forceinline__ void mc_norm(MC_PARAMS) {
#if NORM_WARP_ROW
    // a warp per row; the row lives in registers
    const int lane = threadIdx.x & 31;
    const i64 warps = (i64)gridDim.x * (blockDim.x >> 5);
    for (i64 row = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); row < NORM_ROWS; row += warps) {
        float vals[NORM_NCHUNK * NORM_V];
        // every load of the row issued before the first use
#pragma unroll
        for (int c = 0; c < NORM_NCHUNK; c++) {
            const i64 j = (i64)(c * NORM_LANES + lane) * NORM_V;
            if (j < NORM_W) x_load(norm_index(row, j MC_DIMS_ARGS), &vals[c * NORM_V], MC_ARGS);
        }
        norm_stat s = norm_identity();
#pragma unroll
        for (int c = 0; c < NORM_NCHUNK; c++) {
            const i64 j = (i64)(c * NORM_LANES + lane) * NORM_V;
            if (j < NORM_W) {
#pragma unroll
                for (int u = 0; u < NORM_V; u++) norm_add(s, vals[c * NORM_V + u]);
            }
        }
        s = norm_warp_merge(s);
#pragma unroll
        for (int c = 0; c < NORM_NCHUNK; c++) {
            const i64 j = (i64)(c * NORM_LANES + lane) * NORM_V;
            if (j < NORM_W) {
                const i64 xi = norm_index(row, j MC_DIMS_ARGS);
                norm_apply(s, &vals[c * NORM_V], j, xi, MC_ARGS);
                epilogue_v(xi, &vals[c * NORM_V], MC_ARGS);
            }
        }
    }
#else
    // a block per row; warps merge their statistics through shared memory
    __shared__ norm_stat part[32];
#if NORM_CACHE
    MC_DYNAMIC_SMEM(mc_smem);
    float* cache = (float*)mc_smem;
#endif
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (i64 row = blockIdx.x; row < NORM_ROWS; row += gridDim.x) {
        norm_stat s = norm_identity();
        for (i64 j = (i64)threadIdx.x * NORM_V; j < NORM_W; j += (i64)NORM_CHUNK) {
            float v[NORM_V];
            x_load(norm_index(row, j MC_DIMS_ARGS), v, MC_ARGS);
#pragma unroll
            for (int u = 0; u < NORM_V; u++) {
                norm_add(s, v[u]);
#if NORM_CACHE
                MC_SST(cache[j + u], v[u]);
#endif
            }
        }
        s = norm_warp_merge(s);
        __syncthreads();   // part[] free from the previous row
        if (lane == 0) MC_SST(part[warp], s);
        __syncthreads();
        s = lane < nw ? MC_SLD(part[lane]) : norm_identity();
        s = norm_warp_merge(s);
        for (i64 j = (i64)threadIdx.x * NORM_V; j < NORM_W; j += (i64)NORM_CHUNK) {
            float v[NORM_V];
#if NORM_CACHE
#pragma unroll
            for (int u = 0; u < NORM_V; u++) v[u] = MC_SLD(cache[j + u]);   // written by this same thread
#else
            x_load(norm_index(row, j MC_DIMS_ARGS), v, MC_ARGS);
#endif
            const i64 xi = norm_index(row, j MC_DIMS_ARGS);
            norm_apply(s, v, j, xi, MC_ARGS);
            epilogue_v(xi, v, MC_ARGS);
        }
    }
#endif
}
// ---- end of streaming norms
