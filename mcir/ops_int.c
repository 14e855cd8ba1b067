/*
 * ops_int.c — the ops that make or consume integer and bool tensors:
 * cast, the comparisons, where, gather, argmax/argmin, arange, mod, the
 * bitwise ops and shifts, cumsum; and the typed kernels of the arithmetic
 * ops (add, sub, mul, div, max, min, neg) on integers. Shape and dtype
 * inference, the run-time check of gather's indices, and the reference
 * kernels: integer values are int64 (mcir_value_type_of), computed
 * exactly and wrapped into the output's dtype as two's complement, never
 * through a float; float values are f32 as everywhere else. Semantics:
 * docs/ops.md "Integer semantics".
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

static bool is_int(const mcir_tensor *t) { return mcir_value_type_of(t->dtype) == MCIR_VALUE_I64; }

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

/* index_copy(X, I, U): X with row I[j] along the axis replaced by U's row
 * j; I is 1-D, U is X's shape with I's length on the axis. */
bool mcir_infer_index_copy(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    if (!mcir_infer_check_node(n, d)) return false;
    const mcir_tensor *x = n->inputs[0], *idx = n->inputs[1], *u = n->inputs[2];
    int axis;
    if (!mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis))
        return node_error(d, n, "axis %lld is out of range for rank %d",
                          (long long)mcir_node_int(n, "axis"), x->rank);
    if (!mcir_dtype_is_integer(idx->dtype) || idx->dtype == MCIR_DTYPE_BOOL)
        return node_error(d, n, "indices '%s' must be i32, i64 or u8, got %s", idx->name,
                          mcir_dtype_name(idx->dtype));
    if (idx->rank != 1)
        return node_error(d, n, "indices '%s' must be 1-D, got rank %d", idx->name, idx->rank);
    if (u->dtype != x->dtype)
        return node_error(d, n, "updates '%s' must have the dtype of '%s' (%s), got %s", u->name,
                          x->name, mcir_dtype_name(x->dtype), mcir_dtype_name(u->dtype));
    if (u->rank != x->rank)
        return node_error(d, n, "updates '%s' must have the rank of '%s' (%d), got %d", u->name,
                          x->name, x->rank, u->rank);
    for (int i = 0; i < x->rank; i++) {
        int64_t want = i == axis ? idx->shape[0] : x->shape[i];
        if (u->shape[i] != want)
            return node_error(d, n, "updates '%s' have %lld in dim %d where %s %lld", u->name,
                              (long long)u->shape[i], i,
                              i == axis ? "the indices give" : "the input has", (long long)want);
    }
    set_output(n, x->dtype, x->rank, x->shape);
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

/* Number of values start, start+step, ... below end (above, step < 0),
 * counted without overflow for any int64 bounds. */
static uint64_t arange_len(int64_t start, int64_t end, int64_t step) {
    if (step > 0 && end > start) {
        uint64_t span = (uint64_t)end - (uint64_t)start, s = (uint64_t)step;
        return span / s + (span % s != 0);
    }
    if (step < 0 && end < start) {
        uint64_t span = (uint64_t)start - (uint64_t)end, s = 0 - (uint64_t)step;
        return span / s + (span % s != 0);
    }
    return 0;
}

bool mcir_infer_arange(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    if (!mcir_infer_check_node(n, d)) return false;
    int64_t start = mcir_node_int(n, "start"), end = mcir_node_int(n, "end"),
            step = mcir_node_int(n, "step");
    mcir_dtype dt;
    MCIR_ASSERT(mcir_dtype_parse(mcir_node_string(n, "dtype"), &dt));
    if (step == 0) return node_error(d, n, "step must not be 0");
    /* a float dtype cannot count exactly far out; an integer one counts in int64 */
    if (!mcir_dtype_is_integer(dt) &&
        (start < -(INT64_C(1) << 53) || start > (INT64_C(1) << 53) ||
         end < -(INT64_C(1) << 53) || end > (INT64_C(1) << 53)))
        return node_error(d, n, "start and end must lie within +-2^53 for dtype %s",
                          mcir_dtype_name(dt));
    uint64_t len = arange_len(start, end, step);
    if (len < 1)
        return node_error(d, n, "start %lld, end %lld, step %lld give no values", (long long)start,
                          (long long)end, (long long)step);
    if (len > (uint64_t)MCIR_MAX_ELEMS)
        return node_error(d, n, "start %lld, end %lld, step %lld give %llu values (more than %s, "
                          "the limit of one tensor)", (long long)start, (long long)end,
                          (long long)step, (unsigned long long)len, MCIR_MAX_ELEMS_TEXT);
    int64_t len64 = (int64_t)len;
    set_output(n, dt, 1, &len64);
    return true;
}

/* The bitwise ops take integer and bool tensors, the shifts integer ones
 * (no bool, as NumPy); otherwise they are unary / binary elementwise ops. */
bool mcir_infer_bitwise(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    bool unary = n->op == MCIR_OP_BITWISE_NOT;
    if (!(unary ? mcir_infer_unary(g, n, d) : mcir_infer_binary(g, n, d))) return false;
    const mcir_tensor *x = n->inputs[0];
    bool shift = n->op == MCIR_OP_LEFT_SHIFT || n->op == MCIR_OP_RIGHT_SHIFT;
    if (!mcir_dtype_is_integer(x->dtype) || (shift && x->dtype == MCIR_DTYPE_BOOL))
        return node_error(d, n, "takes %s tensors, but '%s' is %s", shift ? "integer" : "integer or bool",
                          x->name, mcir_dtype_name(x->dtype));
    return true;
}

bool mcir_infer_cumsum(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    if (!mcir_infer_unary(g, n, d)) return false;
    const mcir_tensor *x = n->inputs[0];
    int axis;
    if (x->dtype == MCIR_DTYPE_BOOL)
        return node_error(d, n, "takes numeric tensors, but '%s' is bool (cast it first)", x->name);
    if (!mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis))
        return node_error(d, n, "axis %lld is out of range for rank %d",
                          (long long)mcir_node_int(n, "axis"), x->rank);
    return true;
}

/* ------------------------------------------------------ run-time checks */

/* The indices (input 1) name positions along X's (input 0) axis: in
 * [-dim, dim), negative from the end. gather's and index_copy's. */
bool mcir_check_gather(const mcir_node *n, const void *const *in, mcir_diag *d) {
    const mcir_tensor *x = n->inputs[0], *idx = n->inputs[1];
    const int64_t *ids = in[1];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis));
    int64_t dim = x->shape[axis], count = mcir_tensor_numel(idx);
    for (int64_t i = 0; i < count; i++)
        if (ids[i] < -dim || ids[i] >= dim)
            return node_error(d, n, "index %lld (element %lld of '%s') is out of range for axis %d "
                              "of '%s' (size %lld)",
                              (long long)ids[i], (long long)i, idx->name, axis, x->name,
                              (long long)dim);
    return true;
}

/* ------------------------------------------------------ integer semantics
 * The arithmetic of docs/ops.md, one function per op, on int64 values of
 * the inputs' dtype; the caller wraps the result into the output's dtype.
 * Unsigned arithmetic gives two's complement wrap-around without
 * undefined behaviour. */

static int64_t i_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t i_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static int64_t i_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static int64_t i_max(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t i_min(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t i_and(int64_t a, int64_t b) { return a & b; }
static int64_t i_or(int64_t a, int64_t b) { return a | b; }
static int64_t i_xor(int64_t a, int64_t b) { return a ^ b; }

/* Division truncates toward zero (C, ONNX Div, torch.div(rounding_mode=
 * "trunc")); x / 0 is 0 (NumPy's result); INT64_MIN / -1 wraps. */
static int64_t i_div(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0 - (uint64_t)a);
    return a / b;
}

/* The remainder of truncating division (sign of a: C's %, np.fmod, ONNX
 * Mod fmod=1) and of floor division (sign of b: Python's and NumPy's %,
 * ONNX Mod fmod=0); x mod 0 is 0. */
static int64_t i_fmod(int64_t a, int64_t b) {
    if (b == 0 || b == -1) return 0;
    return a % b;
}

static int64_t i_mod(int64_t a, int64_t b) {
    int64_t r = i_fmod(a, b);
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

/* NumPy's shifts: a count outside [0, bits) shifts every bit out (0, or
 * -1 for a negative value shifted right); bits is the dtype's width. */
static int bits_of(mcir_dtype t) { return (int)mcir_dtype_size(t) * 8; }

static int64_t i_shl(int64_t a, int64_t b, int bits) {
    return (uint64_t)b < (uint64_t)bits ? (int64_t)((uint64_t)a << b) : 0;
}

static int64_t i_shr(int64_t a, int64_t b, int bits) {
    if ((uint64_t)b >= (uint64_t)bits) return a < 0 ? -1 : 0;
    return a < 0 ? ~(~a >> b) : a >> b;   /* arithmetic, without implementation-defined >> */
}

/* -------------------------------------------------------- broadcasting */

/* Walks the output of a node in C order, keeping each input's offset
 * (NumPy broadcasting, right-aligned). */
typedef struct bcast_walk {
    int rank, k;
    int64_t shape[MCIR_MAX_RANK], idx[MCIR_MAX_RANK];
    int64_t stride[3][MCIR_MAX_RANK], off[3];
} bcast_walk;

static void walk_init(bcast_walk *w, const mcir_node *n, int first, int k) {
    const mcir_tensor *o = n->outputs[0];
    memset(w, 0, sizeof *w);
    w->rank = o->rank;
    w->k = k;
    memcpy(w->shape, o->shape, sizeof(int64_t) * (size_t)o->rank);
    for (int j = 0; j < k; j++) {
        const mcir_tensor *t = n->inputs[first + j];
        int64_t s = 1;
        for (int dd = o->rank - 1; dd >= 0; dd--) {
            int td = dd - (o->rank - t->rank);
            w->stride[j][dd] = td >= 0 && t->shape[td] != 1 ? s : 0;
            if (td >= 0) s *= t->shape[td];
        }
    }
}

static void walk_next(bcast_walk *w) {
    for (int dd = w->rank - 1; dd >= 0; dd--) {
        for (int j = 0; j < w->k; j++) w->off[j] += w->stride[j][dd];
        if (++w->idx[dd] < w->shape[dd]) return;
        for (int j = 0; j < w->k; j++) w->off[j] -= w->stride[j][dd] * w->shape[dd];
        w->idx[dd] = 0;
    }
}

/* ---------------------------------------------------- integer arithmetic */

typedef int64_t (*int_binary_fn)(int64_t a, int64_t b);

static void int_binary(const mcir_node *n, const void *const *in, void *const *out,
                       int_binary_fn f) {
    const int64_t *a = in[0], *b = in[1];
    int64_t *y = out[0];
    mcir_dtype dt = n->outputs[0]->dtype;
    int64_t count = mcir_tensor_numel(n->outputs[0]);
    bcast_walk w;
    walk_init(&w, n, 0, 2);
    for (int64_t i = 0; i < count; i++, walk_next(&w))
        y[i] = mcir_int_wrap(dt, f(a[w.off[0]], b[w.off[1]]));
}

#define INT_BINARY(ID, FN)                                                                \
    void mcir_typed_##ID(const mcir_node *n, const void *const *in, void *const *out) { \
        int_binary(n, in, out, FN);                                                       \
    }
INT_BINARY(ADD, i_add)
INT_BINARY(SUB, i_sub)
INT_BINARY(MUL, i_mul)
INT_BINARY(DIV, i_div)
INT_BINARY(MAX, i_max)
INT_BINARY(MIN, i_min)
INT_BINARY(BITWISE_AND, i_and)
INT_BINARY(BITWISE_OR, i_or)
INT_BINARY(BITWISE_XOR, i_xor)
#undef INT_BINARY

void mcir_typed_MOD(const mcir_node *n, const void *const *in, void *const *out) {
    int_binary(n, in, out, mcir_node_bool(n, "fmod") ? i_fmod : i_mod);
}

static void int_shift(const mcir_node *n, const void *const *in, void *const *out, bool left) {
    const int64_t *a = in[0], *b = in[1];
    int64_t *y = out[0];
    mcir_dtype dt = n->outputs[0]->dtype;
    int bits = bits_of(dt);
    int64_t count = mcir_tensor_numel(n->outputs[0]);
    bcast_walk w;
    walk_init(&w, n, 0, 2);
    for (int64_t i = 0; i < count; i++, walk_next(&w)) {
        int64_t x = a[w.off[0]], s = b[w.off[1]];
        y[i] = mcir_int_wrap(dt, left ? i_shl(x, s, bits) : i_shr(x, s, bits));
    }
}

void mcir_typed_LEFT_SHIFT(const mcir_node *n, const void *const *in, void *const *out) {
    int_shift(n, in, out, true);
}

void mcir_typed_RIGHT_SHIFT(const mcir_node *n, const void *const *in, void *const *out) {
    int_shift(n, in, out, false);
}

void mcir_typed_NEG(const mcir_node *n, const void *const *in, void *const *out) {
    const int64_t *x = in[0];
    int64_t *y = out[0];
    mcir_dtype dt = n->outputs[0]->dtype;
    int64_t count = mcir_tensor_numel(n->outputs[0]);
    for (int64_t i = 0; i < count; i++) y[i] = mcir_int_wrap(dt, (int64_t)(0 - (uint64_t)x[i]));
}

/* ~x; on bool the logical not (NumPy's ~True is False). */
void mcir_typed_BITWISE_NOT(const mcir_node *n, const void *const *in, void *const *out) {
    const int64_t *x = in[0];
    int64_t *y = out[0];
    mcir_dtype dt = n->outputs[0]->dtype;
    int64_t count = mcir_tensor_numel(n->outputs[0]);
    for (int64_t i = 0; i < count; i++)
        y[i] = dt == MCIR_DTYPE_BOOL ? x[i] ^ 1 : mcir_int_wrap(dt, ~x[i]);
}

/* NumPy's np.mod / np.fmod on floats (the float kernel of mod). */
static float f_mod(float a, float b, bool fmod_sign) {
    float r = fmodf(a, b);
    if (fmod_sign || b == 0.0f) return r;   /* b == 0: NaN */
    if (r != 0.0f) return (b < 0.0f) != (r < 0.0f) ? r + b : r;
    return copysignf(0.0f, b);
}

void mcir_ref_MOD(const mcir_node *n, const float *const *in, float *const *out) {
    bool fm = mcir_node_bool(n, "fmod");
    int64_t count = mcir_tensor_numel(n->outputs[0]);
    bcast_walk w;
    walk_init(&w, n, 0, 2);
    for (int64_t i = 0; i < count; i++, walk_next(&w))
        out[0][i] = f_mod(in[0][w.off[0]], in[1][w.off[1]], fm);
}

/* ------------------------------------------------------------- cumsum */

/* Sums along the axis in index order (from the end with reverse; without
 * the element itself with exclusive): f32 for floats (sequential, as the
 * generated kernels add), int64 wrapped into the dtype for integers. */
static void cumsum_run(const mcir_node *n, const void *x, void *y, bool ints) {
    const mcir_tensor *t = n->inputs[0];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), t->rank, &axis));
    bool excl = mcir_node_bool(n, "exclusive"), rev = mcir_node_bool(n, "reverse");
    int64_t outer = 1, inner = 1, len = t->shape[axis];
    for (int i = 0; i < axis; i++) outer *= t->shape[i];
    for (int i = axis + 1; i < t->rank; i++) inner *= t->shape[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * len * inner + in;
            int64_t si = 0;
            float sf = 0.0f;
            for (int64_t j = 0; j < len; j++) {
                int64_t k = base + (rev ? len - 1 - j : j) * inner;
                if (ints) {
                    int64_t v = ((const int64_t *)x)[k];
                    if (!excl) si = i_add(si, v);
                    ((int64_t *)y)[k] = mcir_int_wrap(t->dtype, si);
                    if (excl) si = i_add(si, v);
                } else {
                    float v = ((const float *)x)[k];
                    if (!excl) sf += v;
                    ((float *)y)[k] = sf;
                    if (excl) sf += v;
                }
            }
        }
}

void mcir_ref_CUMSUM(const mcir_node *n, const float *const *in, float *const *out) {
    cumsum_run(n, in[0], out[0], false);
}

void mcir_typed_CUMSUM(const mcir_node *n, const void *const *in, void *const *out) {
    cumsum_run(n, in[0], out[0], true);
}

/* --------------------------------------------------------------- cast */

/* float -> float: rounded to the output dtype (the interpreter does it). */
void mcir_ref_CAST(const mcir_node *n, const float *const *in, float *const *out) {
    memcpy(out[0], in[0], sizeof(float) * (size_t)mcir_tensor_numel(n->outputs[0]));
}

/* integer -> integer wraps (bool: v != 0); integer -> float rounds to
 * nearest; float -> integer truncates toward zero and saturates (NaN: 0;
 * NumPy and PyTorch leave out-of-range conversions undefined). */
void mcir_typed_CAST(const mcir_node *n, const void *const *in, void *const *out) {
    const mcir_tensor *x = n->inputs[0], *y = n->outputs[0];
    int64_t count = mcir_tensor_numel(y);
    for (int64_t i = 0; i < count; i++) {
        if (is_int(x) && is_int(y))
            ((int64_t *)out[0])[i] = mcir_int_wrap(y->dtype, ((const int64_t *)in[0])[i]);
        else if (is_int(x))
            ((float *)out[0])[i] = mcir_int_to_float(y->dtype, ((const int64_t *)in[0])[i]);
        else
            ((int64_t *)out[0])[i] = mcir_value_to_int(y->dtype, ((const float *)in[0])[i]);
    }
}

/* -------------------------------------------------------- comparisons */

typedef enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE } cmp_kind;

#define CMP(kind, a, b)                                                            \
    ((kind) == CMP_EQ   ? (a) == (b)                                               \
     : (kind) == CMP_NE ? (a) != (b)                                               \
     : (kind) == CMP_LT ? (a) < (b)                                                \
     : (kind) == CMP_LE ? (a) <= (b)                                               \
     : (kind) == CMP_GT ? (a) > (b)                                                \
                        : (a) >= (b))

/* Integers compare exactly; floats as IEEE (a NaN compares false,
 * not_equal true). */
static void compare_run(const mcir_node *n, const void *const *in, int64_t *y, cmp_kind kind) {
    int64_t count = mcir_tensor_numel(n->outputs[0]);
    bool ints = is_int(n->inputs[0]);
    bcast_walk w;
    walk_init(&w, n, 0, 2);
    for (int64_t i = 0; i < count; i++, walk_next(&w)) {
        if (ints) {
            int64_t a = ((const int64_t *)in[0])[w.off[0]], b = ((const int64_t *)in[1])[w.off[1]];
            y[i] = CMP(kind, a, b);
        } else {
            float a = ((const float *)in[0])[w.off[0]], b = ((const float *)in[1])[w.off[1]];
            y[i] = CMP(kind, a, b);
        }
    }
}

#define COMPARE_REF(ID, kind)                                                             \
    void mcir_typed_##ID(const mcir_node *n, const void *const *in, void *const *out) { \
        compare_run(n, in, out[0], kind);                                                 \
    }
COMPARE_REF(EQUAL, CMP_EQ)
COMPARE_REF(NOT_EQUAL, CMP_NE)
COMPARE_REF(LESS, CMP_LT)
COMPARE_REF(LESS_EQUAL, CMP_LE)
COMPARE_REF(GREATER, CMP_GT)
COMPARE_REF(GREATER_EQUAL, CMP_GE)
#undef COMPARE_REF
#undef CMP

void mcir_typed_WHERE(const mcir_node *n, const void *const *in, void *const *out) {
    const int64_t *c = in[0];
    int64_t count = mcir_tensor_numel(n->outputs[0]);
    bool ints = is_int(n->outputs[0]);
    bcast_walk w;
    walk_init(&w, n, 0, 3);
    for (int64_t i = 0; i < count; i++, walk_next(&w)) {
        int k = c[w.off[0]] != 0 ? 1 : 2;
        if (ints) ((int64_t *)out[0])[i] = ((const int64_t *)in[k])[w.off[k]];
        else ((float *)out[0])[i] = ((const float *)in[k])[w.off[k]];
    }
}

/* ------------------------------------------------------------- gather */

/* The index along an axis of size dim that value v names: negative counts
 * from the end; out of range is clamped (the interpreter has reported it
 * already, mcir_check_gather). */
static int64_t gather_index(int64_t v, int64_t dim) {
    if (v < 0) v += dim;
    return v < 0 ? 0 : v >= dim ? dim - 1 : v;
}

typedef struct gather_ctx {
    const char *x;
    const int64_t *idx;
    char *y;
    int64_t n_idx, dim, inner;
    size_t es;
} gather_ctx;

static void gather_range(void *ctx, int64_t lo, int64_t hi) {
    const gather_ctx *c = ctx;
    size_t row = c->es * (size_t)c->inner;
    for (int64_t r = lo; r < hi; r++) {   /* r = outer * n_idx + k */
        int64_t outer = r / c->n_idx, k = r % c->n_idx;
        int64_t j = gather_index(c->idx[k], c->dim);
        memcpy(c->y + (size_t)r * row, c->x + (size_t)(outer * c->dim + j) * row, row);
    }
}

void mcir_typed_GATHER(const mcir_node *n, const void *const *in, void *const *out) {
    const mcir_tensor *x = n->inputs[0];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis));
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->shape[i];
    for (int i = axis + 1; i < x->rank; i++) inner *= x->shape[i];
    gather_ctx c = {in[0], in[1], out[0], mcir_tensor_numel(n->inputs[1]), x->shape[axis], inner,
                    mcir_value_type_size(mcir_value_type_of(x->dtype))};
    int64_t rows = outer * c.n_idx;
    mcir_parallel_for(rows, (double)rows * (double)inner, gather_range, &c);
}

/* ---------------------------------------------------------- index_copy */

/* X copied, then U's rows written over rows I[0], I[1], ... in that order
 * (a repeated index: the last of its rows wins, as the generated kernel's
 * search does). */
void mcir_typed_INDEX_COPY(const mcir_node *n, const void *const *in, void *const *out) {
    const mcir_tensor *x = n->inputs[0];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis));
    int64_t outer = 1, inner = 1, dim = x->shape[axis], count = mcir_tensor_numel(n->inputs[1]);
    for (int i = 0; i < axis; i++) outer *= x->shape[i];
    for (int i = axis + 1; i < x->rank; i++) inner *= x->shape[i];
    size_t es = mcir_value_type_size(mcir_value_type_of(x->dtype)), row = es * (size_t)inner;
    const char *xs = in[0], *us = in[2];
    const int64_t *ids = in[1];
    char *y = out[0];
    if (outer * dim * inner > 0) memcpy(y, xs, (size_t)(outer * dim) * row);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < count; k++)
            memcpy(y + (size_t)(o * dim + gather_index(ids[k], dim)) * row,
                   us + (size_t)(o * count + k) * row, row);
}

/* ---------------------------------------------------- argmax / argmin */

/* First index of the largest (argmax) or smallest value along the axis;
 * a float NaN counts as the extreme, as in PyTorch. */
static void argreduce_run(const mcir_node *n, const void *x, int64_t *y, bool is_max) {
    const mcir_tensor *t = n->inputs[0];
    bool ints = is_int(t);
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), t->rank, &axis));
    int64_t outer = 1, inner = 1, len = t->shape[axis];
    for (int i = 0; i < axis; i++) outer *= t->shape[i];
    for (int i = axis + 1; i < t->rank; i++) inner *= t->shape[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * len * inner + in, best = 0;
            if (ints) {
                const int64_t *p = (const int64_t *)x + base;
                for (int64_t k = 1; k < len; k++)
                    if (is_max ? p[k * inner] > p[best * inner] : p[k * inner] < p[best * inner])
                        best = k;
            } else {
                const float *p = (const float *)x + base;
                float bv = p[0];
                for (int64_t k = 1; k < len && bv == bv; k++) {
                    float v = p[k * inner];
                    if (v != v || (is_max ? v > bv : v < bv)) {
                        bv = v;
                        best = k;
                    }
                }
            }
            y[o * inner + in] = best;
        }
}

void mcir_typed_ARGMAX(const mcir_node *n, const void *const *in, void *const *out) {
    argreduce_run(n, in[0], out[0], true);
}

void mcir_typed_ARGMIN(const mcir_node *n, const void *const *in, void *const *out) {
    argreduce_run(n, in[0], out[0], false);
}

/* ------------------------------------------------------------- arange */

/* start + i·step in int64, converted to a float dtype (f32 path) ... */
void mcir_ref_ARANGE(const mcir_node *n, const float *const *in, float *const *out) {
    (void)in;
    int64_t start = mcir_node_int(n, "start"), step = mcir_node_int(n, "step");
    int64_t count = mcir_tensor_numel(n->outputs[0]);
    for (int64_t i = 0; i < count; i++) out[0][i] = (float)(start + i * step);
}

/* ... or wrapped into an integer one. */
void mcir_typed_ARANGE(const mcir_node *n, const void *const *in, void *const *out) {
    (void)in;
    int64_t start = mcir_node_int(n, "start"), step = mcir_node_int(n, "step");
    const mcir_tensor *t = n->outputs[0];
    int64_t count = mcir_tensor_numel(t), *y = out[0];
    for (int64_t i = 0; i < count; i++) y[i] = mcir_int_wrap(t->dtype, i_add(start, i_mul(i, step)));
}
