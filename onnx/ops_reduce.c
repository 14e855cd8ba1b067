/*
 * ops_reduce.c — the ONNX ops that reduce or scan along axes: ReduceSum,
 * ReduceMean and ReduceMax (MCIR's reductions), the reductions MCIR has no
 * op for (ReduceMin, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum,
 * ReduceLogSumExp, ReduceProd) written out with ops_steps.c, ArgMax and
 * ArgMin, and CumSum.
 *
 * Invariant: axes and keepdims mean what ONNX says for the node's opset
 * (attributes before opset 18, 13 for ReduceSum; the `axes` input from
 * then on), and a reduction MCIR has no op for is written with its sum and
 * max reductions and elementwise steps, never approximated (ReduceProd: a
 * chain of muls in the order ONNX's reference multiplies).
 */
#include <string.h>

#include "onnx-impl.h"

static bool reduce_composite(ox *x, const char *op, ox_value *X, int n_axes,
                             const int64_t *axes, bool keep);

bool ox_import_reduce(ox *x, ox_value **in, int n_in) {
    const char *op = x->node->op_type;
    int64_t keep = ox_attr_int(x, "keepdims", 1);
    bool axes_input = x->opset >= 18 || (!strcmp(op, "ReduceSum") && x->opset >= 13);
    int64_t noop = axes_input ? ox_attr_int(x, "noop_with_empty_axes", 0) : 0;
    int64_t axes[MCIR_MAX_RANK];
    int n_axes = -1;
    if (axes_input) {
        if (n_in > 1 && in[1] && !ox_ints_of(x, in[1], "axes", axes, &n_axes, MCIR_MAX_RANK))
            return false;
    } else {
        n_axes = ox_attr_ints(x, "axes", axes, MCIR_MAX_RANK);
        if (n_in > 1) return ox_error(x, "axes as an input needs opset 18 (13 for ReduceSum)");
    }
    if (x->failed) return false;
    ox_value *X = in[0];
    if (n_axes <= 0) {
        if (noop) return ox_define_out(x, 0, X);
        n_axes = X->rank;
        for (int i = 0; i < X->rank; i++) axes[i] = i;
    }
    if (X->rank == 0) return ox_define_out(x, 0, X);
    if (strcmp(op, "ReduceSum") && strcmp(op, "ReduceMean") && strcmp(op, "ReduceMax"))
        return reduce_composite(x, op, X, n_axes, axes, keep != 0);
    mcir_op mop = !strcmp(op, "ReduceSum")    ? MCIR_OP_REDUCE_SUM
                  : !strcmp(op, "ReduceMean") ? MCIR_OP_REDUCE_MEAN
                                              : MCIR_OP_REDUCE_MAX;
    mcir_tensor *t = ox_runtime(x, X, ox_node_dtype(in, 1));
    if (!t) return false;
    mcir_node *n = ox_emit1(x, mop, 1, &t, 0);
    mcir_node_set_ints(x->g, n, "axes", n_axes, axes);
    mcir_node_set_bool(x->g, n, "keepdims", keep != 0);
    return ox_define_rt(x, 0, ox_done(x, n));
}

/* The reductions MCIR has no op for, from the ones it has. */
/* v (reduced over axes of X with keepdims) without those axes. */
static ox_value *drop_reduced(ox *x, ox_value *v, const ox_value *X, int n_axes,
                              const int64_t *axes) {
    if (!v) return NULL;
    int64_t shape[MCIR_MAX_RANK];
    int r = 0;
    for (int k = 0; k < X->rank; k++) {
        bool red = false;
        for (int i = 0; i < n_axes; i++) red |= (axes[i] < 0 ? axes[i] + X->rank : axes[i]) == k;
        if (!red) shape[r++] = X->shape[k];
    }
    return ox_reshape_step(x, v, r, shape);
}

/* The product over axes: per reduced axis a chain of muls of its slices
 * (exact in the order ONNX's reference multiplies them), up to
 * OX_MAX_PROD_SLICES slices per axis. */
#define OX_MAX_PROD_SLICES 256
static bool reduce_prod(ox *x, ox_value *X, int n_axes, const int64_t *axes, bool keep) {
    ox_value *y = X;
    bool red[MCIR_MAX_RANK] = {false};
    for (int i = 0; i < n_axes; i++) {
        int ax;
        if (!ox_norm_axis(x, axes[i], X->rank, "axes", &ax)) return false;
        if (red[ax]) return ox_error(x, "axis %d is reduced twice", ax);
        red[ax] = true;
        int64_t d = X->shape[ax];
        if (d > OX_MAX_PROD_SLICES)
            return ox_error(x, "ReduceProd over an axis of %lld elements (at most %d: it is "
                               "written out as a chain of muls)",
                            (long long)d, OX_MAX_PROD_SLICES);
        ox_value *acc = ox_slice_step(x, y, ax, 0, 1, 1);
        for (int64_t k = 1; k < d && acc; k++) acc = ox_ew_step(x, "Mul", acc, ox_slice_step(x, y, ax, k, 1, 1), -1);
        y = acc;
        if (!y) return false;
    }
    if (!keep) y = drop_reduced(x, y, X, n_axes, axes);
    return y && ox_define_out(x, 0, y);
}

static bool reduce_composite(ox *x, const char *op, ox_value *X, int n_axes,
                             const int64_t *axes, bool keep) {
    ox_value *y;
    if (!strcmp(op, "ReduceMin")) {
        y = ox_reduce_step(x, MCIR_OP_REDUCE_MAX, ox_ew_step(x, "Neg", X, NULL, -1), n_axes, axes,
                           keep, -1);
        y = ox_ew_step(x, "Neg", y, NULL, 0);
    } else if (!strcmp(op, "ReduceSumSquare")) {
        y = ox_reduce_step(x, MCIR_OP_REDUCE_SUM, ox_ew_step(x, "Mul", X, X, -1), n_axes, axes, keep, 0);
    } else if (!strcmp(op, "ReduceL2")) {
        y = ox_reduce_step(x, MCIR_OP_REDUCE_SUM, ox_ew_step(x, "Mul", X, X, -1), n_axes, axes, keep, -1);
        y = ox_ew_step(x, "Sqrt", y, NULL, 0);
    } else if (!strcmp(op, "ReduceL1")) {
        y = ox_reduce_step(x, MCIR_OP_REDUCE_SUM, ox_abs_step(x, X), n_axes, axes, keep, 0);
    } else if (!strcmp(op, "ReduceProd")) {
        return reduce_prod(x, X, n_axes, axes, keep);
    } else if (!strcmp(op, "ReduceLogSum")) {
        y = ox_ew_step(x, "Log", ox_reduce_step(x, MCIR_OP_REDUCE_SUM, X, n_axes, axes, keep, -1), NULL, 0);
    } else { /* ReduceLogSumExp: max + log(sum(exp(x - max))) */
        ox_value *m = ox_reduce_step(x, MCIR_OP_REDUCE_MAX, X, n_axes, axes, true, -1);
        ox_value *s = ox_reduce_step(x, MCIR_OP_REDUCE_SUM,
                                     ox_ew_step(x, "Exp", ox_ew_step(x, "Sub", X, m, -1), NULL, -1),
                                     n_axes, axes, true, -1);
        y = ox_ew_step(x, "Add", ox_ew_step(x, "Log", s, NULL, -1), m, keep ? 0 : -1);
        if (!keep) y = drop_reduced(x, y, X, n_axes, axes);
    }
    return y && ox_define_out(x, 0, y);
}

/* ArgMax / ArgMin: MCIR's argmax / argmin (first index of the extreme,
 * int64); ONNX's axis defaults to 0 and keepdims to 1. */
bool ox_import_argmax(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    bool max = !strcmp(x->node->op_type, "ArgMax");
    int64_t axis = ox_attr_int(x, "axis", 0), keep = ox_attr_int(x, "keepdims", 1);
    int64_t last = ox_attr_int(x, "select_last_index", 0);
    int ax;
    if (x->failed || !ox_norm_axis(x, axis, in[0]->rank, "axis", &ax)) return false;
    if (last)
        return ox_error(x, "select_last_index=1 is not supported (MCIR's %s returns the first "
                           "index of the extreme)",
                        max ? "argmax" : "argmin");
    mcir_dtype dt;
    if (!ox_value_dtype(x, in[0], &dt)) return false;
    mcir_tensor *t = ox_runtime(x, in[0], dt);
    if (!t) return false;
    mcir_node *n = ox_emit1(x, max ? MCIR_OP_ARGMAX : MCIR_OP_ARGMIN, 1, &t, 0);
    mcir_node_set_int(x->g, n, "axis", ax);
    mcir_node_set_bool(x->g, n, "keepdims", keep != 0);
    return ox_define_rt(x, 0, ox_done(x, n));
}

/* CumSum(x, axis): a matmul by the constant 0/1 triangle along the axis
 * (exclusive and reverse pick the triangle), moved to the last axis by
 * transposes where it is not already there. At most 4096 along the axis. */
bool ox_import_cumsum(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_value *X = in[0];
    int64_t excl = ox_attr_int(x, "exclusive", 0), rev = ox_attr_int(x, "reverse", 0), a;
    int cnt, ax;
    if (x->failed || !ox_ints_of(x, in[1], "axis", &a, &cnt, 1)) return false;
    if (cnt != 1) return ox_error(x, "axis must be one integer");
    if (!ox_norm_axis(x, a, X->rank, "axis", &ax)) return false;
    if (!ox_is_float(X->elem)) {   /* integers: MCIR's cumsum, exact (wrapping as ONNX) */
        mcir_dtype it;
        if (!ox_value_dtype(x, X, &it)) return false;
        mcir_tensor *t = ox_runtime(x, X, it);
        mcir_node *n = t ? ox_emit1(x, MCIR_OP_CUMSUM, 1, &t, 0) : NULL;
        if (!n) return false;
        mcir_node_set_int(x->g, n, "axis", ax);
        if (excl) mcir_node_set_bool(x->g, n, "exclusive", true);
        if (rev) mcir_node_set_bool(x->g, n, "reverse", true);
        return ox_define_rt(x, 0, ox_done(x, n));
    }
    int64_t d = X->shape[ax];
    if (d > 4096) return ox_error(x, "CumSum over %lld elements (at most 4096: a matmul by a triangle)", (long long)d);
    mcir_dtype dt;
    if (!ox_value_dtype(x, X, &dt)) return false;
    /* y[.., j] = sum_i x[.., i] T[i, j] */
    int64_t tshape[2] = {d, d};
    ox_value *T = ox_new_float_const(x, "cumsum_triangle", dt, 2, tshape);
    if (!T) return false;
    for (int64_t i = 0; i < d; i++)
        for (int64_t j = 0; j < d; j++) {
            bool on = rev ? (excl ? i > j : i >= j) : (excl ? i < j : i <= j);
            T->fv[i * d + j] = on ? 1.0f : 0.0f;
        }
    int64_t perm[MCIR_MAX_RANK];
    for (int k = 0; k < X->rank; k++) perm[k] = k;
    perm[ax] = X->rank - 1;
    perm[X->rank - 1] = ax;
    mcir_tensor *t = ox_runtime(x, X, dt);
    if (!t) return false;
    bool move = ax != X->rank - 1;
    if (move) {
        mcir_node *n = ox_emit1(x, MCIR_OP_TRANSPOSE, 1, &t, -1);
        mcir_node_set_ints(x->g, n, "perm", X->rank, perm);
        if (!(t = ox_done(x, n))) return false;
    }
    mcir_tensor *ins[2] = {t, ox_weight_of(x, T, dt)};
    if (!(t = ox_done(x, ox_emit1(x, MCIR_OP_MATMUL, 2, ins, move ? -1 : 0)))) return false;
    if (move) {
        mcir_node *n = ox_emit1(x, MCIR_OP_TRANSPOSE, 1, &t, 0);
        mcir_node_set_ints(x->g, n, "perm", X->rank, perm);
        if (!(t = ox_done(x, n))) return false;
    }
    return ox_define_rt(x, 0, t);
}
