/*
 * ops_int.c — the ops that make or consume integer and bool tensors:
 * cast, the comparisons, where, gather, argmax/argmin and arange. Shape
 * and dtype inference, the run-time check of gather's indices, and the
 * reference kernels (values are f32 like every other kernel's: integers
 * are exact up to 2^24 in magnitude, docs/ir.md).
 *
 * Invariant: an index read from a tensor is checked before it is used;
 * the interpreter runs mcir_check_gather first and reports an index out of
 * range as an error, and the kernel clamps, so a kernel run on its own
 * never reads outside its input.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "interp-impl.h"

static bool node_error(mcir_diag *d, const mcir_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool node_error(mcir_diag *d, const mcir_node *n, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mcir_error(d, n->loc, "node '%s' (%s): %s", n->name ? n->name : "?", mcir_op_name(n->op),
               msg);
    return false;
}

static void set_output(mcir_node *n, mcir_dtype dt, int rank, const int64_t *shape) {
    mcir_tensor *t = n->outputs[0];
    t->dtype = dt;
    t->rank = rank;
    memset(t->shape, 0, sizeof t->shape);
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)rank);
}

/* ------------------------------------------------------------ inference */

bool mcir_infer_cast(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    if (!mcir_infer_check_node(n, d)) return false;
    mcir_dtype to;
    MCIR_ASSERT(mcir_dtype_parse(mcir_node_string(n, "to"), &to));   /* attr choices */
    set_output(n, to, n->inputs[0]->rank, n->inputs[0]->shape);
    return true;
}

/* Broadcast shape of the inputs from `first` on, which must share a dtype. */
static bool broadcast_inputs(mcir_node *n, int first, mcir_diag *d, int *rank, int64_t *shape) {
    const mcir_tensor *a = n->inputs[first];
    *rank = a->rank;
    memcpy(shape, a->shape, sizeof(int64_t) * (size_t)a->rank);
    for (int i = first; i < n->n_inputs; i++) {
        const mcir_tensor *t = n->inputs[i];
        if (i > first && t->dtype != a->dtype)
            return node_error(d, n, "inputs must share one dtype: '%s' is %s but '%s' is %s",
                              a->name, mcir_dtype_name(a->dtype), t->name,
                              mcir_dtype_name(t->dtype));
        if (!mcir_broadcast_shape(*rank, shape, t->rank, t->shape, rank, shape))
            return node_error(d, n, "input '%s' does not broadcast with the others", t->name);
    }
    return true;
}

bool mcir_infer_compare(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    int rank;
    int64_t shape[MCIR_MAX_RANK];
    if (!mcir_infer_check_node(n, d) || !broadcast_inputs(n, 0, d, &rank, shape)) return false;
    set_output(n, MCIR_DTYPE_BOOL, rank, shape);
    return true;
}

bool mcir_infer_where(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    int rank;
    int64_t shape[MCIR_MAX_RANK];
    if (!mcir_infer_check_node(n, d)) return false;
    const mcir_tensor *c = n->inputs[0];
    if (c->dtype != MCIR_DTYPE_BOOL)
        return node_error(d, n, "condition '%s' must be bool, got %s", c->name,
                          mcir_dtype_name(c->dtype));
    if (!broadcast_inputs(n, 1, d, &rank, shape)) return false;
    if (!mcir_broadcast_shape(rank, shape, c->rank, c->shape, &rank, shape))
        return node_error(d, n, "condition '%s' does not broadcast with the values", c->name);
    set_output(n, n->inputs[1]->dtype, rank, shape);
    return true;
}

bool mcir_infer_gather(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    if (!mcir_infer_check_node(n, d)) return false;
    const mcir_tensor *x = n->inputs[0], *idx = n->inputs[1];
    int axis;
    if (!mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis))
        return node_error(d, n, "axis %lld is out of range for rank %d",
                          (long long)mcir_node_int(n, "axis"), x->rank);
    if (!mcir_dtype_is_integer(idx->dtype) || idx->dtype == MCIR_DTYPE_BOOL)
        return node_error(d, n, "indices '%s' must be i32, i64 or u8, got %s", idx->name,
                          mcir_dtype_name(idx->dtype));
    int rank = x->rank - 1 + idx->rank;
    if (rank > MCIR_MAX_RANK)
        return node_error(d, n, "output rank %d exceeds %d", rank, MCIR_MAX_RANK);
    int64_t shape[MCIR_MAX_RANK];
    int k = 0;
    for (int i = 0; i < axis; i++) shape[k++] = x->shape[i];
    for (int i = 0; i < idx->rank; i++) shape[k++] = idx->shape[i];
    for (int i = axis + 1; i < x->rank; i++) shape[k++] = x->shape[i];
    set_output(n, x->dtype, rank, shape);
    return true;
}

bool mcir_infer_argreduce(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    if (!mcir_infer_check_node(n, d)) return false;
    const mcir_tensor *x = n->inputs[0];
    int axis;
    if (!mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis))
        return node_error(d, n, "axis %lld is out of range for rank %d",
                          (long long)mcir_node_int(n, "axis"), x->rank);
    bool keep = mcir_node_bool(n, "keepdims");
    int64_t shape[MCIR_MAX_RANK];
    int k = 0;
    for (int i = 0; i < x->rank; i++) {
        if (i != axis) shape[k++] = x->shape[i];
        else if (keep) shape[k++] = 1;
    }
    set_output(n, MCIR_DTYPE_I64, k, shape);
    return true;
}

/* Number of values start, start+step, ... below end (above, step < 0). */
static int64_t arange_len(int64_t start, int64_t end, int64_t step) {
    if (step > 0 && end > start) return (end - start + step - 1) / step;
    if (step < 0 && end < start) return (start - end + (-step) - 1) / (-step);
    return 0;
}

bool mcir_infer_arange(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    if (!mcir_infer_check_node(n, d)) return false;
    int64_t start = mcir_node_int(n, "start"), end = mcir_node_int(n, "end"),
            step = mcir_node_int(n, "step");
    if (step == 0) return node_error(d, n, "step must not be 0");
    if (start < -(INT64_C(1) << 53) || start > (INT64_C(1) << 53) || end < -(INT64_C(1) << 53) ||
        end > (INT64_C(1) << 53))
        return node_error(d, n, "start and end must lie within +-2^53");
    int64_t len = arange_len(start, end, step);
    if (len < 1)
        return node_error(d, n, "start %lld, end %lld, step %lld give no values", (long long)start,
                          (long long)end, (long long)step);
    mcir_dtype dt;
    MCIR_ASSERT(mcir_dtype_parse(mcir_node_string(n, "dtype"), &dt));
    set_output(n, dt, 1, &len);
    return true;
}

/* ------------------------------------------------------ run-time checks */

bool mcir_check_gather(const mcir_node *n, const float *const *in, mcir_diag *d) {
    const mcir_tensor *x = n->inputs[0], *idx = n->inputs[1];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis));
    int64_t dim = x->shape[axis], count = mcir_tensor_numel(idx);
    for (int64_t i = 0; i < count; i++) {
        float v = in[1][i];
        if (v < -(float)dim || v >= (float)dim)
            return node_error(d, n, "index %.0f (element %lld of '%s') is out of range for axis %d "
                              "of '%s' (size %lld)",
                              (double)v, (long long)i, idx->name, axis, x->name, (long long)dim);
    }
    return true;
}

/* ---------------------------------------------------- reference kernels */

/* Offset into input t of output element i (output rank r, shape oshape),
 * NumPy broadcasting right-aligned. */
static int64_t bcast_offset(int64_t i, int r, const int64_t *oshape, const mcir_tensor *t) {
    int64_t off = 0, stride = 1;
    for (int k = r - 1; k >= 0; k--) {
        int64_t c = i % oshape[k];
        i /= oshape[k];
        int tk = k - (r - t->rank);
        if (tk < 0) continue;
        if (t->shape[tk] != 1) off += c * stride;
        stride *= t->shape[tk];
    }
    return off;
}

void mcir_ref_CAST(const mcir_node *n, const float *const *in, float *const *out) {
    const mcir_tensor *x = n->inputs[0], *y = n->outputs[0];
    int64_t count = mcir_tensor_numel(y);
    bool wrap = mcir_dtype_is_integer(x->dtype) && mcir_dtype_is_integer(y->dtype) &&
                y->dtype != MCIR_DTYPE_BOOL;
    for (int64_t i = 0; i < count; i++) {
        float v = in[0][i];
        if (wrap && y->dtype == MCIR_DTYPE_U8) v = (float)((int64_t)v & 0xff);   /* modulo 2^8 */
        else if (wrap && y->dtype == MCIR_DTYPE_I32) v = (float)(int32_t)(uint32_t)(int64_t)v;
        out[0][i] = mcir_dtype_round(y->dtype, v);
    }
}

typedef enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE } cmp_kind;

static void compare_run(const mcir_node *n, const float *const *in, float *y, cmp_kind kind) {
    const mcir_tensor *o = n->outputs[0];
    int64_t count = mcir_tensor_numel(o);
    for (int64_t i = 0; i < count; i++) {
        float a = in[0][bcast_offset(i, o->rank, o->shape, n->inputs[0])];
        float b = in[1][bcast_offset(i, o->rank, o->shape, n->inputs[1])];
        bool r = false;
        switch (kind) {
        case CMP_EQ: r = a == b; break;
        case CMP_NE: r = a != b; break;
        case CMP_LT: r = a < b; break;
        case CMP_LE: r = a <= b; break;
        case CMP_GT: r = a > b; break;
        case CMP_GE: r = a >= b; break;
        }
        y[i] = r;
    }
}

#define COMPARE_REF(ID, kind)                                                                \
    void mcir_ref_##ID(const mcir_node *n, const float *const *in, float *const *out) {      \
        compare_run(n, in, out[0], kind);                                                    \
    }
COMPARE_REF(EQUAL, CMP_EQ)
COMPARE_REF(NOT_EQUAL, CMP_NE)
COMPARE_REF(LESS, CMP_LT)
COMPARE_REF(LESS_EQUAL, CMP_LE)
COMPARE_REF(GREATER, CMP_GT)
COMPARE_REF(GREATER_EQUAL, CMP_GE)

void mcir_ref_WHERE(const mcir_node *n, const float *const *in, float *const *out) {
    const mcir_tensor *o = n->outputs[0];
    int64_t count = mcir_tensor_numel(o);
    for (int64_t i = 0; i < count; i++) {
        bool c = in[0][bcast_offset(i, o->rank, o->shape, n->inputs[0])] != 0;
        int k = c ? 1 : 2;
        out[0][i] = in[k][bcast_offset(i, o->rank, o->shape, n->inputs[k])];
    }
}

/* The index along an axis of size dim that value v names: negative counts
 * from the end; out of range is clamped (the interpreter has reported it
 * already, mcir_check_gather). */
static int64_t gather_index(float v, int64_t dim) {
    int64_t j = (int64_t)v;
    if (j < 0) j += dim;
    return j < 0 ? 0 : j >= dim ? dim - 1 : j;
}

typedef struct gather_ctx {
    const float *x, *idx;
    float *y;
    int64_t n_idx, dim, inner;
} gather_ctx;

static void gather_range(void *ctx, int64_t lo, int64_t hi) {
    const gather_ctx *c = ctx;
    for (int64_t r = lo; r < hi; r++) {   /* r = outer * n_idx + k */
        int64_t outer = r / c->n_idx, k = r % c->n_idx;
        int64_t j = gather_index(c->idx[k], c->dim);
        memcpy(c->y + r * c->inner, c->x + (outer * c->dim + j) * c->inner,
               sizeof(float) * (size_t)c->inner);
    }
}

void mcir_ref_GATHER(const mcir_node *n, const float *const *in, float *const *out) {
    const mcir_tensor *x = n->inputs[0];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis));
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->shape[i];
    for (int i = axis + 1; i < x->rank; i++) inner *= x->shape[i];
    gather_ctx c = {in[0], in[1], out[0], mcir_tensor_numel(n->inputs[1]), x->shape[axis], inner};
    int64_t rows = outer * c.n_idx;
    mcir_parallel_for(rows, (double)rows * (double)inner, gather_range, &c);
}

/* First index of the largest (argmax) or smallest value along the axis;
 * NaN counts as the extreme, as in PyTorch. */
static void argreduce_run(const mcir_node *n, const float *x, float *y, bool is_max) {
    const mcir_tensor *t = n->inputs[0];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), t->rank, &axis));
    int64_t outer = 1, inner = 1, len = t->shape[axis];
    for (int i = 0; i < axis; i++) outer *= t->shape[i];
    for (int i = axis + 1; i < t->rank; i++) inner *= t->shape[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            const float *p = x + o * len * inner + in;
            int64_t best = 0;
            float bv = p[0];
            for (int64_t k = 1; k < len && bv == bv; k++) {
                float v = p[k * inner];
                if (v != v || (is_max ? v > bv : v < bv)) {
                    bv = v;
                    best = k;
                }
            }
            y[o * inner + in] = (float)best;
        }
}

void mcir_ref_ARGMAX(const mcir_node *n, const float *const *in, float *const *out) {
    argreduce_run(n, in[0], out[0], true);
}

void mcir_ref_ARGMIN(const mcir_node *n, const float *const *in, float *const *out) {
    argreduce_run(n, in[0], out[0], false);
}

void mcir_ref_ARANGE(const mcir_node *n, const float *const *in, float *const *out) {
    (void)in;
    int64_t start = mcir_node_int(n, "start"), step = mcir_node_int(n, "step");
    int64_t count = mcir_tensor_numel(n->outputs[0]);
    for (int64_t i = 0; i < count; i++) out[0][i] = (float)(start + i * step);
}
