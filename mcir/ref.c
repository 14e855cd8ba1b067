/*
 * ref.c — the reference kernels, one mcir_ref_<ID> per op of the table in
 * ops.c: the CPU oracle every rewrite and GPU kernel is checked against.
 *
 * Invariants: inputs and outputs are dense f32 arrays in C order with the
 * shapes already inferred on the node's tensors (the data-movement ops
 * also have typed kernels here, for integer values; the other integer
 * kernels are in ops_int.c); a kernel writes every
 * output element and never reads past an input. Arithmetic is f32, with f64
 * for statistics and sums (reductions, norms, softmax denominators, pool
 * averages); dot products (matmul, conv2d, attention) go through the
 * blocked f32 GEMM of ref_gemm.c. Work is split across threads only over
 * disjoint outputs and the summation order never depends on the split, so
 * results are bit-reproducible for any thread count. Semantics are in
 * docs/ops.md.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp-impl.h"

/* ------------------------------------------------------------- helpers */

static int64_t numel_of(const mcir_tensor *t) { return mcir_tensor_numel(t); }

/* Product of dims [lo, hi). */
static int64_t dims_prod(const mcir_tensor *t, int lo, int hi) {
    int64_t p = 1;
    for (int i = lo; i < hi; i++) p *= t->shape[i];
    return p;
}

/* Element strides of t when broadcast, right-aligned, to an r-dim shape:
 * 0 along dims t does not have or has as 1. */
static void bcast_strides(int rt, const int64_t *tshape, int r, const int64_t *shape,
                          int64_t *strides) {
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) {
        int it = i - (r - rt);
        if (it < 0 || tshape[it] == 1) {
            strides[i] = 0;
        } else {
            MCIR_ASSERT(tshape[it] == shape[i]);
            strides[i] = s;
        }
        if (it >= 0) s *= tshape[it];
    }
}

/* Offset of the flat index `flat` of an r-dim shape under strides. */
static int64_t flat_offset(int r, const int64_t *shape, const int64_t *strides,
                           int64_t flat) {
    int64_t off = 0;
    for (int i = r - 1; i >= 0; i--) {
        off += (flat % shape[i]) * strides[i];
        flat /= shape[i];
    }
    return off;
}

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    MCIR_ASSERT(p);
    return p;
}

/* --------------------------------------------------------------- unary */

typedef struct unary_ctx {
    const float *x;
    float *y;
    float s; /* scale's value */
} unary_ctx;

#define UNARY_KERNELS(X)                                                        \
    X(RELU, v < 0.0f ? 0.0f : v, 1)                                             \
    X(SIGMOID, 1.0f / (1.0f + expf(-v)), 20)                                    \
    X(TANH, tanhf(v), 20)                                                       \
    X(EXP, expf(v), 10)                                                         \
    X(LOG, logf(v), 10)                                                         \
    X(ERF, erff(v), 20)                                                         \
    X(COS, cosf(v), 20)                                                         \
    X(SIN, sinf(v), 20)                                                         \
    X(SQRT, sqrtf(v), 4)                                                        \
    X(RSQRT, 1.0f / sqrtf(v), 4)                                                \
    X(NEG, -v, 1)                                                               \
    X(RECIPROCAL, 1.0f / v, 2)                                                  \
    X(SILU, v / (1.0f + expf(-v)), 20)                                          \
    X(SCALE, v * u->s, 1)                                                       \
    X(GELU_ERF, 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)), 25)         \
    X(GELU_TANH,                                                                \
      0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v))), \
      25)

#define X(ID, EXPR, COST)                                                       \
    static void unary_##ID(void *ctx, int64_t lo, int64_t hi) {                 \
        const unary_ctx *u = ctx;                                               \
        (void)u->s;                                                             \
        for (int64_t i = lo; i < hi; i++) {                                     \
            float v = u->x[i];                                                  \
            u->y[i] = (EXPR);                                                   \
        }                                                                       \
    }
UNARY_KERNELS(X)
#undef X

static void unary_run(const mcir_node *n, const float *x, float *y, mcir_range_fn fn,
                      double cost_per_elem) {
    unary_ctx u = {x, y, 0.0f};
    if (n->op == MCIR_OP_SCALE) u.s = (float)mcir_node_float(n, "value");
    int64_t count = numel_of(n->outputs[0]);
    mcir_parallel_for(count, (double)count * cost_per_elem, fn, &u);
}

#define X(ID, EXPR, COST)                                                       \
    void mcir_ref_##ID(const mcir_node *n, const float *const *in,             \
                       float *const *out) {                                     \
        unary_run(n, in[0], out[0], unary_##ID, COST);                          \
    }
X(RELU, , 1) X(SIGMOID, , 20) X(TANH, , 20) X(EXP, , 10) X(LOG, , 10) X(ERF, , 20) X(COS, , 20) X(SIN, , 20)
X(SQRT, , 4) X(RSQRT, , 4) X(NEG, , 1) X(RECIPROCAL, , 2) X(SILU, , 20) X(SCALE, , 1)
#undef X

void mcir_ref_GELU(const mcir_node *n, const float *const *in, float *const *out) {
    bool tanh_form = strcmp(mcir_node_string(n, "approximate"), "tanh") == 0;
    unary_run(n, in[0], out[0], tanh_form ? unary_GELU_TANH : unary_GELU_ERF, 25);
}

/* -------------------------------------------------------------- binary */

/* NumPy's maximum/minimum: a NaN in either operand propagates. */
static inline float max_nan(float a, float b) { return (a != a || a > b) ? a : b; }
static inline float min_nan(float a, float b) { return (a != a || a < b) ? a : b; }

typedef struct binary_ctx {
    const float *a, *b;
    float *y;
    int r;                      /* output rank, >= 1 */
    int64_t shape[MCIR_MAX_RANK];
    int64_t sa[MCIR_MAX_RANK], sb[MCIR_MAX_RANK];
    int64_t inner;              /* shape[r-1] */
} binary_ctx;

/* Each range is a range of output rows (all dims but the last). */
#define BINARY_KERNELS(X)   \
    X(ADD, x + z)           \
    X(SUB, x - z)           \
    X(MUL, x * z)           \
    X(DIV, x / z)           \
    X(POW, powf(x, z))      \
    X(MAX, max_nan(x, z))   \
    X(MIN, min_nan(x, z))

#define X(ID, EXPR)                                                             \
    static void binary_##ID(void *ctx, int64_t lo, int64_t hi) {                \
        const binary_ctx *c = ctx;                                              \
        int64_t ia = c->sa[c->r - 1], ib = c->sb[c->r - 1], inner = c->inner;   \
        for (int64_t row = lo; row < hi; row++) {                               \
            int64_t oa = flat_offset(c->r - 1, c->shape, c->sa, row);           \
            int64_t ob = flat_offset(c->r - 1, c->shape, c->sb, row);           \
            const float *pa = c->a + oa, *pb = c->b + ob;                       \
            float *py = c->y + row * inner;                                     \
            if (ia == 1 && ib == 1) {                                           \
                for (int64_t j = 0; j < inner; j++) {                           \
                    float x = pa[j], z = pb[j];                                 \
                    py[j] = (EXPR);                                             \
                }                                                               \
            } else if (ia == 1) {                                               \
                float z = pb[0];                                                \
                for (int64_t j = 0; j < inner; j++) {                           \
                    float x = pa[j];                                            \
                    py[j] = (EXPR);                                             \
                }                                                               \
            } else if (ib == 1) {                                               \
                float x = pa[0];                                                \
                for (int64_t j = 0; j < inner; j++) {                           \
                    float z = pb[j];                                            \
                    py[j] = (EXPR);                                             \
                }                                                               \
            } else {                                                            \
                float x = pa[0], z = pb[0], v = (EXPR);                         \
                for (int64_t j = 0; j < inner; j++) py[j] = v;                  \
            }                                                                   \
        }                                                                       \
    }                                                                           \
    void mcir_ref_##ID(const mcir_node *n, const float *const *in,             \
                       float *const *out) {                                     \
        binary_run(n, in, out[0], binary_##ID, #ID[0] == 'P' ? 10 : 1);        \
    }

static void binary_run(const mcir_node *n, const float *const *in, float *y,
                       mcir_range_fn fn, double cost_per_elem) {
    const mcir_tensor *A = n->inputs[0], *B = n->inputs[1], *Y = n->outputs[0];
    binary_ctx c = {.a = in[0], .b = in[1], .y = y};
    /* A rank-0 result is one row of one element. */
    c.r = Y->rank > 0 ? Y->rank : 1;
    if (Y->rank > 0) {
        memcpy(c.shape, Y->shape, sizeof(int64_t) * (size_t)Y->rank);
        bcast_strides(A->rank, A->shape, c.r, c.shape, c.sa);
        bcast_strides(B->rank, B->shape, c.r, c.shape, c.sb);
    } else {
        c.shape[0] = 1;
        c.sa[0] = c.sb[0] = 0;
    }
    c.inner = c.shape[c.r - 1];
    /* A stride along the last dim is 0 or 1; 0 on a size-1 dim means 1. */
    if (c.inner == 1) c.sa[c.r - 1] = c.sb[c.r - 1] = 1;
    int64_t rows = numel_of(Y) / c.inner;
    mcir_parallel_for(rows, (double)numel_of(Y) * cost_per_elem, fn, &c);
}

BINARY_KERNELS(X)
#undef X

/* -------------------------------------------------------------- matmul */

typedef struct matmul_ctx {
    const float *a, *b;
    float *c;
    int64_t m, n, k;
    int64_t rsa, csa, rsb, csb;
    int rbatch;                 /* batch rank */
    int64_t batch[MCIR_MAX_RANK];
    int64_t bsa[MCIR_MAX_RANK], bsb[MCIR_MAX_RANK]; /* batch strides, elements */
    int64_t row_block, col_block, row_blocks, col_blocks;
} matmul_ctx;

/* Work item = (batch, row block, column block) of C. */
static void matmul_range(void *ctx, int64_t lo, int64_t hi) {
    const matmul_ctx *c = ctx;
    for (int64_t item = lo; item < hi; item++) {
        int64_t cb = item % c->col_blocks, rest = item / c->col_blocks;
        int64_t rb = rest % c->row_blocks, bi = rest / c->row_blocks;
        int64_t r0 = rb * c->row_block, c0 = cb * c->col_block;
        int64_t rows = c->m - r0 < c->row_block ? c->m - r0 : c->row_block;
        int64_t cols = c->n - c0 < c->col_block ? c->n - c0 : c->col_block;
        const float *a = c->a + flat_offset(c->rbatch, c->batch, c->bsa, bi) + r0 * c->rsa;
        const float *b = c->b + flat_offset(c->rbatch, c->batch, c->bsb, bi) + c0 * c->csb;
        float *y = c->c + (bi * c->m + r0) * c->n + c0;
        mcir_sgemm(rows, cols, c->k, a, c->rsa, c->csa, b, c->rsb, c->csb, y, c->n, false);
    }
}

/* Splits `items` independent m x n products into blocks so the threads
 * have about four items each. Columns are split first (each item then
 * packs only its slice of B), in multiples of 64; rows next, in multiples
 * of 48. The split never changes results (see mcir_sgemm). */
static void gemm_blocks(int64_t items, int64_t m, int64_t n, int64_t *row_block,
                        int64_t *col_block) {
    int64_t want = 4 * (int64_t)mcir_get_threads();
    *row_block = m;
    *col_block = n;
    if (items >= want) return;
    int64_t per = (want + items - 1) / items;
    int64_t cols = (n + per - 1) / per;
    cols = (cols + 63) / 64 * 64;
    if (cols < 256) cols = 256;
    if (cols < n) *col_block = cols;
    int64_t got = (n + *col_block - 1) / *col_block;
    if (got >= per) return;
    per = (per + got - 1) / got;
    int64_t rows = (m + per - 1) / per;
    rows = (rows + 47) / 48 * 48;
    if (rows < m) *row_block = rows;
}

void mcir_ref_MATMUL(const mcir_node *n, const float *const *in, float *const *out) {
    const mcir_tensor *A = n->inputs[0], *B = n->inputs[1];
    bool ta = mcir_node_bool(n, "transpose_a") && A->rank >= 2;
    bool tb = mcir_node_bool(n, "transpose_b") && B->rank >= 2;
    matmul_ctx c = {.a = in[0], .b = in[1], .c = out[0]};
    int64_t ar = A->rank >= 2 ? A->shape[A->rank - 2] : 1;
    int64_t ac = A->shape[A->rank - 1];
    int64_t br = B->rank >= 2 ? B->shape[B->rank - 2] : B->shape[0];
    int64_t bc = B->rank >= 2 ? B->shape[B->rank - 1] : 1;
    /* Stored A is [ar, ac] row-major; logical A is its transpose if ta. */
    c.m = ta ? ac : ar;
    c.k = ta ? ar : ac;
    c.rsa = ta ? 1 : ac;
    c.csa = ta ? ac : 1;
    c.n = tb ? br : bc;
    c.rsb = tb ? 1 : bc;
    c.csb = tb ? bc : 1;
    int ra = A->rank >= 2 ? A->rank - 2 : 0, rb = B->rank >= 2 ? B->rank - 2 : 0;
    MCIR_ASSERT(mcir_broadcast_shape(ra, A->shape, rb, B->shape, &c.rbatch, c.batch));
    int64_t sa[MCIR_MAX_RANK], sb[MCIR_MAX_RANK];
    bcast_strides(ra, A->shape, c.rbatch, c.batch, sa);
    bcast_strides(rb, B->shape, c.rbatch, c.batch, sb);
    int64_t nbatch = 1;
    for (int i = 0; i < c.rbatch; i++) {
        c.bsa[i] = sa[i] * ar * ac;
        c.bsb[i] = sb[i] * br * bc;
        nbatch *= c.batch[i];
    }
    gemm_blocks(nbatch, c.m, c.n, &c.row_block, &c.col_block);
    c.row_blocks = (c.m + c.row_block - 1) / c.row_block;
    c.col_blocks = (c.n + c.col_block - 1) / c.col_block;
    mcir_parallel_for(nbatch * c.row_blocks * c.col_blocks,
                      2.0 * (double)nbatch * (double)c.m * (double)c.n * (double)c.k,
                      matmul_range, &c);
}

/* --------------------------------------------------------------- norms */

/* Views X as [outer, len, inner] around one axis. */
static void split_at_axis(const mcir_tensor *t, int axis, int64_t *outer, int64_t *len,
                          int64_t *inner) {
    *outer = dims_prod(t, 0, axis);
    *len = t->shape[axis];
    *inner = dims_prod(t, axis + 1, t->rank);
}

typedef struct softmax_ctx {
    const float *x;
    float *y;
    int64_t len, inner;
} softmax_ctx;

/* One softmax over len elements at stride `stride`. A row whose every
 * entry is -inf (fully masked) yields zeros, as attention does. */
static void softmax_line(const float *x, float *y, int64_t len, int64_t stride) {
    float mx = -INFINITY;
    bool nan = false;
    for (int64_t j = 0; j < len; j++) {
        float v = x[j * stride];
        if (v > mx) mx = v;
        if (v != v) nan = true;
    }
    if (nan) {
        for (int64_t j = 0; j < len; j++) y[j * stride] = NAN;
        return;
    }
    if (mx == -INFINITY) {
        for (int64_t j = 0; j < len; j++) y[j * stride] = 0.0f;
        return;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < len; j++) {
        float e = expf(x[j * stride] - mx);
        y[j * stride] = e;
        sum += e;
    }
    double inv = 1.0 / sum;
    for (int64_t j = 0; j < len; j++) y[j * stride] = (float)(y[j * stride] * inv);
}

/* Range over lines: line = outer index * inner + inner index. */
static void softmax_range(void *ctx, int64_t lo, int64_t hi) {
    const softmax_ctx *c = ctx;
    for (int64_t line = lo; line < hi; line++) {
        int64_t o = line / c->inner, i = line % c->inner;
        int64_t off = o * c->len * c->inner + i;
        softmax_line(c->x + off, c->y + off, c->len, c->inner);
    }
}

void mcir_ref_SOFTMAX(const mcir_node *n, const float *const *in, float *const *out) {
    const mcir_tensor *X = n->inputs[0];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), X->rank, &axis));
    int64_t outer, len, inner;
    split_at_axis(X, axis, &outer, &len, &inner);
    softmax_ctx c = {in[0], out[0], len, inner};
    mcir_parallel_for(outer * inner, (double)numel_of(X) * 15, softmax_range, &c);
}

typedef struct norm_ctx {
    const float *x;
    float *y;
    const float *gamma, *beta; /* expanded to len; beta may be NULL */
    int64_t len;
    double eps;
    bool rms;
} norm_ctx;

static void norm_range(void *ctx, int64_t lo, int64_t hi) {
    const norm_ctx *c = ctx;
    int64_t len = c->len;
    for (int64_t row = lo; row < hi; row++) {
        const float *x = c->x + row * len;
        float *y = c->y + row * len;
        if (c->rms) {
            double ss = 0.0;
            for (int64_t j = 0; j < len; j++) ss += (double)x[j] * x[j];
            double r = 1.0 / sqrt(ss / (double)len + c->eps);
            for (int64_t j = 0; j < len; j++)
                y[j] = (float)((double)x[j] * r * c->gamma[j]);
            continue;
        }
        double mean = 0.0, var = 0.0;
        for (int64_t j = 0; j < len; j++) mean += x[j];
        mean /= (double)len;
        for (int64_t j = 0; j < len; j++) {
            double dv = x[j] - mean;
            var += dv * dv;
        }
        var /= (double)len;
        double r = 1.0 / sqrt(var + c->eps);
        for (int64_t j = 0; j < len; j++)
            y[j] = (float)(((double)x[j] - mean) * r * c->gamma[j] +
                           (c->beta ? c->beta[j] : 0.0));
    }
}

/* Expands a gamma/beta broadcastable to the trailing dims [axis, rank) of X
 * into a dense array of their product. */
static float *expand_param(const mcir_tensor *X, int axis, const mcir_tensor *p,
                           const float *v) {
    int r = X->rank - axis;
    int64_t len = dims_prod(X, axis, X->rank);
    int64_t strides[MCIR_MAX_RANK];
    float *e = xmalloc(sizeof(float) * (size_t)len);
    bcast_strides(p->rank, p->shape, r, X->shape + axis, strides);
    for (int64_t j = 0; j < len; j++) e[j] = v[flat_offset(r, X->shape + axis, strides, j)];
    return e;
}

static void norm_run(const mcir_node *n, const float *const *in, float *y, bool rms) {
    const mcir_tensor *X = n->inputs[0];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), X->rank, &axis));
    norm_ctx c = {.x = in[0], .y = y, .eps = mcir_node_float(n, "eps"), .rms = rms};
    c.len = dims_prod(X, axis, X->rank);
    float *g = expand_param(X, axis, n->inputs[1], in[1]);
    float *b = n->n_inputs > 2 ? expand_param(X, axis, n->inputs[2], in[2]) : NULL;
    c.gamma = g;
    c.beta = b;
    int64_t rows = dims_prod(X, 0, axis);
    mcir_parallel_for(rows, (double)numel_of(X) * 8, norm_range, &c);
    free(g);
    free(b);
}

void mcir_ref_LAYERNORM(const mcir_node *n, const float *const *in, float *const *out) {
    norm_run(n, in, out[0], false);
}

void mcir_ref_RMSNORM(const mcir_node *n, const float *const *in, float *const *out) {
    norm_run(n, in, out[0], true);
}

/* ---------------------------------------------------------- reductions */

/* Walks X in order; each element lands in the output slot given by the
 * kept dims. Sums are f64; max propagates NaN like NumPy. */
static void reduce_run(const mcir_node *n, const float *x, float *y, int kind) {
    const mcir_tensor *X = n->inputs[0], *Y = n->outputs[0];
    const int64_t *axes;
    int na = mcir_node_ints(n, "axes", &axes);
    bool red[MCIR_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
        int a;
        MCIR_ASSERT(mcir_norm_axis(axes[i], X->rank, &a));
        red[a] = true;
    }
    /* Output strides over X's dims (0 on reduced ones). */
    int64_t ostr[MCIR_MAX_RANK], s = 1, count = 1;
    for (int i = X->rank - 1; i >= 0; i--) {
        if (red[i]) {
            ostr[i] = 0;
            count *= X->shape[i];
        } else {
            ostr[i] = s;
            s *= X->shape[i];
        }
    }
    int64_t ny = numel_of(Y), nx = numel_of(X);
    double *acc = xmalloc(sizeof(double) * (size_t)ny);
    for (int64_t i = 0; i < ny; i++) acc[i] = kind == 2 ? -INFINITY : 0.0;
    int64_t idx[MCIR_MAX_RANK] = {0}, o = 0;
    int r = X->rank;
    int64_t last = r > 0 ? X->shape[r - 1] : 1, lstr = r > 0 ? ostr[r - 1] : 0;
    for (int64_t base = 0; base < nx; base += last) {
        for (int64_t j = 0; j < last; j++) {
            double v = x[base + j], *a = &acc[o + j * lstr];
            if (kind == 2) {
                if (v != v || v > *a) *a = (*a != *a) ? *a : v;
            } else {
                *a += v;
            }
        }
        /* Odometer over dims [0, r-1). */
        for (int k = r - 2; k >= 0; k--) {
            o += ostr[k];
            if (++idx[k] < X->shape[k]) break;
            o -= ostr[k] * idx[k];
            idx[k] = 0;
        }
    }
    for (int64_t i = 0; i < ny; i++)
        y[i] = (float)(kind == 1 ? acc[i] / (double)count : acc[i]);
    free(acc);
}

void mcir_ref_REDUCE_SUM(const mcir_node *n, const float *const *in, float *const *out) {
    reduce_run(n, in[0], out[0], 0);
}

void mcir_ref_REDUCE_MEAN(const mcir_node *n, const float *const *in, float *const *out) {
    reduce_run(n, in[0], out[0], 1);
}

void mcir_ref_REDUCE_MAX(const mcir_node *n, const float *const *in, float *const *out) {
    reduce_run(n, in[0], out[0], 2);
}

/* ------------------------------------------------------- data movement */

/* The data-movement kernels copy elements of any size: f32 for float
 * tensors, int64 for integer and bool ones (their typed kernels below), so
 * they are exact for every dtype. */

/* y = x transposed by perm, elements of type T. */
#define TRANSPOSE_T(NAME, T)                                                    \
    static void NAME(const mcir_node *n, const T *x, T *y) {                    \
        const mcir_tensor *X = n->inputs[0], *Y = n->outputs[0];                \
        const int64_t *perm;                                                    \
        int r = mcir_node_ints(n, "perm", &perm);                               \
        if (r == 0) {                                                           \
            y[0] = x[0];                                                        \
            return;                                                             \
        }                                                                       \
        int64_t xstr[MCIR_MAX_RANK], s = 1, src[MCIR_MAX_RANK];                 \
        for (int i = r - 1; i >= 0; i--) {                                      \
            xstr[i] = s;                                                        \
            s *= X->shape[i];                                                   \
        }                                                                       \
        for (int i = 0; i < r; i++) {                                           \
            int a;                                                              \
            MCIR_ASSERT(mcir_norm_axis(perm[i], r, &a));                        \
            src[i] = xstr[a]; /* stride in X of output dim i */                 \
        }                                                                       \
        int64_t idx[MCIR_MAX_RANK] = {0}, off = 0, last = Y->shape[r - 1];      \
        int64_t lstr = src[r - 1], ny = numel_of(Y);                            \
        for (int64_t base = 0; base < ny; base += last) {                       \
            for (int64_t j = 0; j < last; j++) y[base + j] = x[off + j * lstr]; \
            for (int k = r - 2; k >= 0; k--) {                                  \
                off += src[k];                                                  \
                if (++idx[k] < Y->shape[k]) break;                              \
                off -= src[k] * idx[k];                                         \
                idx[k] = 0;                                                     \
            }                                                                   \
        }                                                                       \
    }
TRANSPOSE_T(transpose_f32, float)
TRANSPOSE_T(transpose_i64, int64_t)
#undef TRANSPOSE_T

void mcir_ref_TRANSPOSE(const mcir_node *n, const float *const *in, float *const *out) {
    transpose_f32(n, in[0], out[0]);
}

void mcir_typed_TRANSPOSE(const mcir_node *n, const void *const *in, void *const *out) {
    transpose_i64(n, in[0], out[0]);
}

/* Element size of n's values (all its tensors share one value type). */
static size_t value_size(const mcir_tensor *t) {
    return mcir_value_type_size(mcir_value_type_of(t->dtype));
}

static void reshape_run(const mcir_node *n, const void *in, void *out) {
    if (out != in)
        memmove(out, in, value_size(n->outputs[0]) * (size_t)numel_of(n->outputs[0]));
}

void mcir_ref_RESHAPE(const mcir_node *n, const float *const *in, float *const *out) {
    reshape_run(n, in[0], out[0]);
}

void mcir_typed_RESHAPE(const mcir_node *n, const void *const *in, void *const *out) {
    reshape_run(n, in[0], out[0]);
}

static void split_run(const mcir_node *n, const void *const *in, void *const *out) {
    const mcir_tensor *X = n->inputs[0];
    size_t es = value_size(X);
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), X->rank, &axis));
    int64_t outer, len, inner, at = 0;
    split_at_axis(X, axis, &outer, &len, &inner);
    for (int i = 0; i < n->n_outputs; i++) {
        int64_t part = n->outputs[i]->shape[axis];
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)out[i] + es * (size_t)(o * part * inner),
                   (const char *)in[0] + es * (size_t)((o * len + at) * inner),
                   es * (size_t)(part * inner));
        at += part;
    }
}

void mcir_ref_SPLIT(const mcir_node *n, const float *const *in, float *const *out) {
    split_run(n, (const void *const *)in, (void *const *)out);
}

void mcir_typed_SPLIT(const mcir_node *n, const void *const *in, void *const *out) {
    split_run(n, in, out);
}

static void concat_run(const mcir_node *n, const void *const *in, void *const *out) {
    const mcir_tensor *Y = n->outputs[0];
    size_t es = value_size(Y);
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), Y->rank, &axis));
    int64_t outer, len, inner, at = 0;
    split_at_axis(Y, axis, &outer, &len, &inner);
    for (int i = 0; i < n->n_inputs; i++) {
        int64_t part = n->inputs[i]->shape[axis];
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)out[0] + es * (size_t)((o * len + at) * inner),
                   (const char *)in[i] + es * (size_t)(o * part * inner),
                   es * (size_t)(part * inner));
        at += part;
    }
}

void mcir_ref_CONCAT(const mcir_node *n, const float *const *in, float *const *out) {
    concat_run(n, (const void *const *)in, (void *const *)out);
}

void mcir_typed_CONCAT(const mcir_node *n, const void *const *in, void *const *out) {
    concat_run(n, in, out);
}

static void slice_run(const mcir_node *n, const void *x, void *y) {
    const mcir_tensor *X = n->inputs[0];
    size_t es = value_size(X);
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), X->rank, &axis));
    int64_t outer, len, inner, first, count;
    int64_t step = mcir_node_int(n, "step");
    split_at_axis(X, axis, &outer, &len, &inner);
    mcir_slice_range(len, mcir_node_int(n, "start"), mcir_node_int(n, "end"), step,
                     &first, &count);
    MCIR_ASSERT(count == n->outputs[0]->shape[axis]);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < count; j++)
            memcpy((char *)y + es * (size_t)((o * count + j) * inner),
                   (const char *)x + es * (size_t)((o * len + first + j * step) * inner),
                   es * (size_t)inner);
}

void mcir_ref_SLICE(const mcir_node *n, const float *const *in, float *const *out) {
    slice_run(n, in[0], out[0]);
}

void mcir_typed_SLICE(const mcir_node *n, const void *const *in, void *const *out) {
    slice_run(n, in[0], out[0]);
}

/* -------------------------------------------------------- convolutions */

typedef struct conv_ctx {
    const float *x, *w, *bias;
    float *y;
    int64_t N, C, H, W, O, KH, KW, OH, OW, groups;
    int64_t sh, sw, pt, pl, dh, dw;
    int64_t col_block, col_blocks;
} conv_ctx;

/* One work item: image n, group g, a block of output pixels. im2col of the
 * block into [C/g*KH*KW, cols], then W_g [O/g, C/g*KH*KW] times it. */
static void conv_range(void *ctx, int64_t lo, int64_t hi) {
    const conv_ctx *c = ctx;
    int64_t cg = c->C / c->groups, og = c->O / c->groups;
    int64_t kdim = cg * c->KH * c->KW, npix = c->OH * c->OW;
    float *col = xmalloc(sizeof(float) * (size_t)(kdim * c->col_block));
    float *tmp = xmalloc(sizeof(float) * (size_t)(og * c->col_block));
    for (int64_t item = lo; item < hi; item++) {
        int64_t blk = item % c->col_blocks, ng = item / c->col_blocks;
        int64_t g = ng % c->groups, img = ng / c->groups;
        int64_t p0 = blk * c->col_block;
        int64_t cols = npix - p0 < c->col_block ? npix - p0 : c->col_block;
        const float *xg = c->x + (img * c->C + g * cg) * c->H * c->W;
        for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t kh = 0; kh < c->KH; kh++)
                for (int64_t kw = 0; kw < c->KW; kw++) {
                    float *row = col + ((ci * c->KH + kh) * c->KW + kw) * cols;
                    const float *xc = xg + ci * c->H * c->W;
                    for (int64_t p = 0; p < cols; p++) {
                        int64_t oh = (p0 + p) / c->OW, ow = (p0 + p) % c->OW;
                        int64_t ih = oh * c->sh - c->pt + kh * c->dh;
                        int64_t iw = ow * c->sw - c->pl + kw * c->dw;
                        row[p] = (ih >= 0 && ih < c->H && iw >= 0 && iw < c->W)
                                     ? xc[ih * c->W + iw]
                                     : 0.0f;
                    }
                }
        mcir_sgemm(og, cols, kdim, c->w + g * og * kdim, kdim, 1, col, cols, 1, tmp, cols,
                   false);
        for (int64_t o = 0; o < og; o++) {
            int64_t oc = g * og + o;
            float *dst = c->y + (img * c->O + oc) * npix + p0;
            float b = c->bias ? c->bias[oc] : 0.0f;
            for (int64_t p = 0; p < cols; p++) dst[p] = tmp[o * cols + p] + b;
        }
    }
    free(col);
    free(tmp);
}

static void window_attrs(const mcir_node *n, const char *name, int count,
                         const int64_t *fallback, int64_t *out) {
    const int64_t *v;
    if (!mcir_node_attr(n, name) && fallback) {
        memcpy(out, fallback, sizeof(int64_t) * (size_t)count);
        return;
    }
    MCIR_ASSERT(mcir_node_ints(n, name, &v) == count);
    memcpy(out, v, sizeof(int64_t) * (size_t)count);
}

void mcir_ref_CONV2D(const mcir_node *n, const float *const *in, float *const *out) {
    const mcir_tensor *X = n->inputs[0], *Wt = n->inputs[1], *Y = n->outputs[0];
    static const int64_t ones[2] = {1, 1}, zeros[4] = {0, 0, 0, 0};
    int64_t strides[2], pads[4], dil[2];
    window_attrs(n, "strides", 2, ones, strides);
    window_attrs(n, "pads", 4, zeros, pads);
    window_attrs(n, "dilations", 2, ones, dil);
    conv_ctx c = {
        .x = in[0], .w = in[1], .bias = n->n_inputs > 2 ? in[2] : NULL, .y = out[0],
        .N = X->shape[0], .C = X->shape[1], .H = X->shape[2], .W = X->shape[3],
        .O = Wt->shape[0], .KH = Wt->shape[2], .KW = Wt->shape[3],
        .OH = Y->shape[2], .OW = Y->shape[3], .groups = mcir_node_int(n, "groups"),
        .sh = strides[0], .sw = strides[1], .pt = pads[0], .pl = pads[1],
        .dh = dil[0], .dw = dil[1]};
    int64_t npix = c.OH * c.OW, kdim = c.C / c.groups * c.KH * c.KW;
    /* Blocks of output pixels keep the im2col buffer near 1 MiB. */
    int64_t cb = (1 << 18) / (kdim > 0 ? kdim : 1);
    cb = cb < 64 ? 64 : cb;
    int64_t items = c.N * c.groups, want = 4 * (int64_t)mcir_get_threads();
    if (items * ((npix + cb - 1) / cb) < want) {
        int64_t per = (want + items - 1) / items;
        int64_t alt = (npix + per - 1) / per;
        if (alt < cb) cb = alt < 16 ? 16 : alt;
    }
    c.col_block = cb < npix ? cb : npix;
    c.col_blocks = (npix + c.col_block - 1) / c.col_block;
    double flops = 2.0 * (double)numel_of(Y) * (double)kdim;
    mcir_parallel_for(items * c.col_blocks, flops, conv_range, &c);
}

typedef struct pool_ctx {
    const float *x;
    float *y;
    int64_t H, W, OH, OW, KH, KW, sh, sw, pt, pl;
    bool avg;
} pool_ctx;

/* Range over (n, c) planes. Padding is ignored: max over the real
 * elements, average divided by their count. */
static void pool_range(void *ctx, int64_t lo, int64_t hi) {
    const pool_ctx *c = ctx;
    for (int64_t plane = lo; plane < hi; plane++) {
        const float *x = c->x + plane * c->H * c->W;
        float *y = c->y + plane * c->OH * c->OW;
        for (int64_t oh = 0; oh < c->OH; oh++)
            for (int64_t ow = 0; ow < c->OW; ow++) {
                int64_t h0 = oh * c->sh - c->pt, w0 = ow * c->sw - c->pl;
                int64_t h1 = h0 + c->KH, w1 = w0 + c->KW;
                h0 = h0 < 0 ? 0 : h0;
                w0 = w0 < 0 ? 0 : w0;
                h1 = h1 > c->H ? c->H : h1;
                w1 = w1 > c->W ? c->W : w1;
                double sum = 0.0;
                float mx = -INFINITY;
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t w = w0; w < w1; w++) {
                        float v = x[h * c->W + w];
                        sum += v;
                        mx = max_nan(v, mx);
                    }
                int64_t cnt = (h1 - h0) * (w1 - w0);
                y[oh * c->OW + ow] =
                    c->avg ? (cnt > 0 ? (float)(sum / (double)cnt) : 0.0f) : mx;
            }
    }
}

static void pool_run(const mcir_node *n, const float *x, float *y, bool avg) {
    const mcir_tensor *X = n->inputs[0], *Y = n->outputs[0];
    static const int64_t zeros[4] = {0, 0, 0, 0};
    int64_t kernel[2], strides[2], pads[4];
    window_attrs(n, "kernel", 2, NULL, kernel);
    window_attrs(n, "strides", 2, kernel, strides);
    window_attrs(n, "pads", 4, zeros, pads);
    pool_ctx c = {.x = x, .y = y, .H = X->shape[2], .W = X->shape[3],
                  .OH = Y->shape[2], .OW = Y->shape[3], .KH = kernel[0],
                  .KW = kernel[1], .sh = strides[0], .sw = strides[1],
                  .pt = pads[0], .pl = pads[1], .avg = avg};
    int64_t planes = X->shape[0] * X->shape[1];
    mcir_parallel_for(planes, (double)numel_of(Y) * (double)kernel[0] * (double)kernel[1],
                      pool_range, &c);
}

void mcir_ref_MAX_POOL2D(const mcir_node *n, const float *const *in, float *const *out) {
    pool_run(n, in[0], out[0], false);
}

void mcir_ref_AVG_POOL2D(const mcir_node *n, const float *const *in, float *const *out) {
    pool_run(n, in[0], out[0], true);
}

void mcir_ref_GLOBAL_AVG_POOL(const mcir_node *n, const float *const *in,
                              float *const *out) {
    const mcir_tensor *X = n->inputs[0];
    int64_t planes = X->shape[0] * X->shape[1], hw = X->shape[2] * X->shape[3];
    for (int64_t p = 0; p < planes; p++) {
        double sum = 0.0;
        for (int64_t i = 0; i < hw; i++) sum += in[0][p * hw + i];
        out[0][p] = (float)(sum / (double)hw);
    }
}

/* ----------------------------------------------------------- attention */

#define ATTN_ROWS 64 /* query rows per work item */

typedef struct attention_ctx {
    const float *q, *k, *v, *m;
    float *y;
    int64_t nq, nk, d, dv;
    float scale;
    bool causal;
    int rl; /* rank of the broadcast leading dims */
    int64_t lead[MCIR_MAX_RANK];
    int64_t sq[MCIR_MAX_RANK], sk[MCIR_MAX_RANK], sv[MCIR_MAX_RANK];
    int64_t sm[MCIR_MAX_RANK + 2]; /* mask strides over [lead.., nq, nk] */
    int64_t blocks;                /* row blocks per leading index */
} attention_ctx;

/* One work item: leading index b, query rows [i0, i0+rows). Scores
 * S = scale·Q Kᵀ (+ M), key j of row i excluded when causal and
 * j > i + (nk - nq); P = softmax over the kept keys (all excluded or all
 * -inf: P = 0, so the output row is 0); out = P V. */
static void attention_range(void *ctx, int64_t lo, int64_t hi) {
    const attention_ctx *c = ctx;
    float *s = xmalloc(sizeof(float) * (size_t)(ATTN_ROWS * c->nk));
    for (int64_t item = lo; item < hi; item++) {
        int64_t b = item / c->blocks, i0 = item % c->blocks * ATTN_ROWS;
        int64_t rows = c->nq - i0 < ATTN_ROWS ? c->nq - i0 : ATTN_ROWS;
        const float *q = c->q + flat_offset(c->rl, c->lead, c->sq, b) + i0 * c->d;
        const float *k = c->k + flat_offset(c->rl, c->lead, c->sk, b);
        const float *v = c->v + flat_offset(c->rl, c->lead, c->sv, b);
        const float *m = c->m ? c->m + flat_offset(c->rl, c->lead, c->sm, b) : NULL;
        float *y = c->y + (b * c->nq + i0) * c->dv;
        /* S[rows, nk] = Q[rows, d] · Kᵀ */
        mcir_sgemm(rows, c->nk, c->d, q, c->d, 1, k, 1, c->d, s, c->nk, false);
        for (int64_t r = 0; r < rows; r++) {
            int64_t i = i0 + r;
            float *srow = s + r * c->nk;
            /* keys [0, kend) may be attended */
            int64_t kend = c->nk;
            if (c->causal) {
                int64_t lim = i + (c->nk - c->nq) + 1;
                kend = lim < 0 ? 0 : lim < c->nk ? lim : c->nk;
            }
            const float *mrow = m ? m + i * c->sm[c->rl] : NULL;
            float mx = -INFINITY;
            bool nan = false;
            for (int64_t j = 0; j < kend; j++) {
                float sc = srow[j] * c->scale;
                if (mrow) sc += mrow[j * c->sm[c->rl + 1]];
                srow[j] = sc;
                if (sc > mx) mx = sc;
                if (sc != sc) nan = true;
            }
            for (int64_t j = kend; j < c->nk; j++) srow[j] = 0.0f;
            if (nan) {
                for (int64_t j = 0; j < kend; j++) srow[j] = NAN;
            } else if (mx == -INFINITY) {
                for (int64_t j = 0; j < kend; j++) srow[j] = 0.0f;
            } else {
                double sum = 0.0;
                for (int64_t j = 0; j < kend; j++) {
                    float e = expf(srow[j] - mx);
                    srow[j] = e;
                    sum += e;
                }
                double inv = 1.0 / sum;
                for (int64_t j = 0; j < kend; j++) srow[j] = (float)(srow[j] * inv);
            }
        }
        /* Y[rows, dv] = P[rows, nk] · V[nk, dv] */
        mcir_sgemm(rows, c->dv, c->nk, s, c->nk, 1, v, c->dv, 1, y, c->dv, false);
    }
    free(s);
}

void mcir_ref_ATTENTION(const mcir_node *n, const float *const *in, float *const *out) {
    const mcir_tensor *Q = n->inputs[0], *K = n->inputs[1], *V = n->inputs[2];
    const mcir_tensor *Y = n->outputs[0];
    attention_ctx c = {.q = in[0], .k = in[1], .v = in[2],
                       .m = n->n_inputs > 3 ? in[3] : NULL, .y = out[0]};
    c.nq = Q->shape[Q->rank - 2];
    c.d = Q->shape[Q->rank - 1];
    c.nk = K->shape[K->rank - 2];
    c.dv = V->shape[V->rank - 1];
    c.causal = mcir_node_bool(n, "causal");
    c.scale = mcir_node_attr(n, "scale") ? (float)mcir_node_float(n, "scale")
                                         : (float)(1.0 / sqrt((double)c.d));
    c.rl = Y->rank - 2;
    memcpy(c.lead, Y->shape, sizeof(int64_t) * (size_t)c.rl);
    int64_t tmp[MCIR_MAX_RANK + 2];
    bcast_strides(Q->rank - 2, Q->shape, c.rl, c.lead, tmp);
    for (int i = 0; i < c.rl; i++) c.sq[i] = tmp[i] * c.nq * c.d;
    bcast_strides(K->rank - 2, K->shape, c.rl, c.lead, tmp);
    for (int i = 0; i < c.rl; i++) c.sk[i] = tmp[i] * c.nk * c.d;
    bcast_strides(V->rank - 2, V->shape, c.rl, c.lead, tmp);
    for (int i = 0; i < c.rl; i++) c.sv[i] = tmp[i] * c.nk * c.dv;
    if (c.m) {
        const mcir_tensor *M = n->inputs[3];
        int64_t sshape[MCIR_MAX_RANK + 2];
        memcpy(sshape, c.lead, sizeof(int64_t) * (size_t)c.rl);
        sshape[c.rl] = c.nq;
        sshape[c.rl + 1] = c.nk;
        bcast_strides(M->rank, M->shape, c.rl + 2, sshape, c.sm);
    }
    int64_t nlead = dims_prod(Y, 0, c.rl);
    c.blocks = (c.nq + ATTN_ROWS - 1) / ATTN_ROWS;
    double flops = 2.0 * (double)nlead * (double)c.nq * (double)c.nk * (double)(c.d + c.dv);
    mcir_parallel_for(nlead * c.blocks, flops, attention_range, &c);
}
