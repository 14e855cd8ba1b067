/*
 * ops_steps.c — the steps the ONNX op handlers (ops_*.c) are written with:
 * a scalar constant, one elementwise op, where, a cast, a reduction, a
 * reshape, a slice, |v|, and the product of one axis with a constant
 * matrix. With them the ops MCIR has no op for (Clip, LogSoftmax,
 * BatchNormalization, the composite reductions and activations, Pad,
 * Resize, ConvTranspose, ScatterND, ...) are written out as ops it has,
 * exactly (Resize's interpolation and ConvTranspose's zero insertion: a
 * matmul by a constant whose rows hold the ONNX taps), so every backend
 * already runs them (docs/onnx.md).
 *
 * Invariant: a step defines no ONNX name — out_index only names the
 * tensor it emits after an ONNX output of the node, which the caller then
 * defines. The elementwise steps (ox_ew_step, ox_where_step, ox_abs_step)
 * and the reshape and slice steps fold at import time when their operands
 * are constants; ox_reduce_step and ox_axis_matrix make a constant operand
 * a weight; ox_cast_step and ox_slice_rt take runtime values. ox_ew_step,
 * ox_where_step, ox_reduce_step, ox_reshape_step, ox_abs_step and
 * ox_axis_matrix return NULL for a NULL operand (a failed step before), so
 * a chain of them is checked once, at its end.
 */
#include <string.h>

#include "onnx-impl.h"

/* A scalar constant of element type elem (the type of the tensor it is
 * combined with). */
ox_value *ox_scalar_of(ox *x, int elem, const char *stem, double val) {
    ox_value *c = ox_const_new(x, elem, 0, NULL);
    if (!c) return NULL;
    if (ox_is_float(elem)) ox_set(c, 0, val);
    else ox_seti(c, 0, (int64_t)val);
    c->name = ox_fresh(x, stem);
    return c;
}

/* One elementwise step: ONNX op `op` (one of ew_map) on a (and b), folded
 * when all operands are constants, else an MCIR node whose output is ONNX
 * output out_index (-1: an intermediate). */
ox_value *ox_ew_step(ox *x, const char *op, ox_value *a, ox_value *b, int out_index) {
    if (!a || x->failed) return NULL;
    ox_value *in[2] = {a, b};
    int n = b ? 2 : 1;
    if (ox_all_const(in, n)) {
        ox_value *o;
        ox_fold r = ox_fold_elementwise(x, op, in, n, &o);
        if (r != OX_FOLD_OK) {
            if (!x->failed) ox_error(x, "cannot fold %s", op);
            return NULL;
        }
        return o;
    }
    int mop = ox_ew_op(op);
    MCIR_ASSERT(mop >= 0);
    mcir_dtype dt = ox_node_dtype(in, n);
    mcir_tensor *ts[2] = {ox_operand(x, a, dt, b ? &b : NULL, b ? 1 : 0), NULL};
    if (!ts[0]) return NULL;
    if (b && !(ts[1] = ox_operand(x, b, dt, &a, 1))) return NULL;
    mcir_tensor *t = ox_done(x, ox_emit1(x, (mcir_op)mop, n, ts, out_index));
    return t ? ox_runtime_value(x, t) : NULL;
}

/* A reduction of runtime (or materialised constant) v over axes. */
ox_value *ox_reduce_step(ox *x, mcir_op mop, ox_value *v, int n_axes, const int64_t *axes,
                         bool keep, int out_index) {
    if (!v) return NULL;
    mcir_tensor *t = ox_runtime(x, v, ox_node_dtype(&v, 1));
    if (!t) return NULL;
    mcir_node *n = ox_emit1(x, mop, 1, &t, out_index);
    mcir_node_set_ints(x->g, n, "axes", n_axes, axes);
    mcir_node_set_bool(x->g, n, "keepdims", keep);
    t = ox_done(x, n);
    return t ? ox_runtime_value(x, t) : NULL;
}

/* v reshaped (folded, aliased or a reshape node; never an ONNX output). */
ox_value *ox_reshape_step(ox *x, ox_value *v, int rank, const int64_t *shape) {
    if (!v) return NULL;
    if (v->is_const) return ox_fold_reshape(x, v, rank, shape);
    if (!v->expand && rank == v->rank &&
        !memcmp(shape, v->shape, sizeof(int64_t) * (size_t)rank))
        return v;
    mcir_tensor *t = ox_runtime(x, v, v->t->dtype);
    if (!t) return NULL;
    mcir_node *n = ox_emit1(x, MCIR_OP_RESHAPE, 1, &t, -1);
    mcir_node_set_ints(x->g, n, "shape", rank, shape);
    t = ox_done(x, n);
    return t ? ox_runtime_value(x, t) : NULL;
}

/* Slice of v on one axis (folded for constants). */
ox_value *ox_slice_step(ox *x, ox_value *v, int ax, int64_t first, int64_t len,
                        int64_t step) {
    if (v->is_const) return ox_fold_slice(x, v, ax, first, step, len);
    if (first == 0 && step == 1 && len == v->shape[ax]) return v;
    mcir_tensor *t = ox_runtime(x, v, v->t->dtype);
    t = t ? ox_slice_rt(x, t, ax, first, len, step, -1) : NULL;
    return t ? ox_runtime_value(x, t) : NULL;
}

/* Slices runtime t on one axis; first/len/step as ox_slice_bounds gives. */
mcir_tensor *ox_slice_rt(ox *x, mcir_tensor *t, int ax, int64_t first, int64_t len,
                         int64_t step, int out_index) {
    int64_t end = first + len * step;
    if (end < 0) end = -t->shape[ax] - 1; /* before index 0, for a negative step */
    mcir_node *n = ox_emit1(x, MCIR_OP_SLICE, 1, &t, out_index);
    mcir_node_set_int(x->g, n, "axis", ax);
    mcir_node_set_int(x->g, n, "start", first);
    mcir_node_set_int(x->g, n, "end", end);
    if (step != 1) mcir_node_set_int(x->g, n, "step", step);
    return ox_done(x, n);
}

/* Where as a step: MCIR's where (a bool condition, values of one dtype),
 * folded when everything is constant. */
ox_value *ox_where_step(ox *x, ox_value *c, ox_value *a, ox_value *b, int out_index) {
    if (!c || !a || !b || x->failed) return NULL;
    ox_value *in[3] = {c, a, b}, *o;
    if (ox_all_const(in, 3))
        return ox_fold_elementwise(x, "Where", in, 3, &o) == OX_FOLD_OK ? o : NULL;
    mcir_dtype dt = ox_node_dtype(in + 1, 2);
    mcir_tensor *ts[3] = {ox_operand(x, c, MCIR_DTYPE_BOOL, in + 1, 2), ox_operand(x, a, dt, in, 1),
                          ox_operand(x, b, dt, in, 1)};
    if (!ts[0] || !ts[1] || !ts[2]) return NULL;
    mcir_tensor *t = ox_done(x, ox_emit1(x, MCIR_OP_WHERE, 3, ts, out_index));
    return t ? ox_runtime_value(x, t) : NULL;
}

/* MCIR's cast of runtime v to dt, its result ONNX output out_index (-1:
 * an intermediate). */
ox_value *ox_cast_step(ox *x, ox_value *v, mcir_dtype dt, int out_index) {
    mcir_tensor *t = ox_runtime(x, v, v->t->dtype);
    if (!t) return NULL;
    mcir_node *n = ox_emit1(x, MCIR_OP_CAST, 1, &t, out_index);
    mcir_node_set_string(x->g, n, "to", mcir_dtype_name(dt));
    t = ox_done(x, n);
    return t ? ox_runtime_value(x, t) : NULL;
}

/* |v| = max(v, -v): exact, also for integers. */
ox_value *ox_abs_step(ox *x, ox_value *v) {
    return ox_ew_step(x, "Max", v, ox_ew_step(x, "Neg", v, NULL, -1), -1);
}

/* Multiplies axis ax of v by the constant matrix A [out, in] (row o holds
 * the weights of the input positions that output position o reads): a
 * matmul on the last two axes, a transpose around it for the others. */
ox_value *ox_axis_matrix(ox *x, ox_value *v, int ax, const double *A, int64_t out,
                         int64_t in_len, const char *stem, int out_index) {
    if (!v) return NULL;
    mcir_dtype dt = ox_node_dtype(&v, 1);
    mcir_tensor *t = ox_runtime(x, v, dt);
    if (!t) return NULL;
    int r = t->rank;
    bool last = ax == r - 1, second = r >= 2 && ax == r - 2;
    int64_t perm[MCIR_MAX_RANK];
    if (!last && !second) {
        for (int k = 0; k < r; k++) perm[k] = k;
        perm[ax] = r - 1, perm[r - 1] = ax;
        mcir_node *n = ox_emit1(x, MCIR_OP_TRANSPOSE, 1, &t, -1);
        mcir_node_set_ints(x->g, n, "perm", r, perm);
        if (!(t = ox_done(x, n))) return NULL;
        last = true;
    }
    int64_t shape[2] = {last ? in_len : out, last ? out : in_len};
    ox_value *m = ox_new_float_const(x, stem, dt, 2, shape);
    if (!m) return NULL;
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in_len; i++)
            ox_set(m, last ? i * out + o : o * in_len + i, A[o * in_len + i]);
    mcir_tensor *w = ox_runtime(x, m, dt);
    mcir_tensor *ins[2] = {last ? t : w, last ? w : t};
    bool back = ax != r - 1 && ax != r - 2;
    if (!(t = ox_done(x, ox_emit1(x, MCIR_OP_MATMUL, 2, ins, back ? -1 : out_index)))) return NULL;
    if (back) {
        mcir_node *n = ox_emit1(x, MCIR_OP_TRANSPOSE, 1, &t, out_index);
        mcir_node_set_ints(x->g, n, "perm", r, perm);
        if (!(t = ox_done(x, n))) return NULL;
    }
    return ox_runtime_value(x, t);
}
