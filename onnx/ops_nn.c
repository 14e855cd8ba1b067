/*
 * ops_nn.c — the ONNX ops of dense layers: MatMul and Gemm (a matmul, a
 * scale by alpha and the bias scaled by beta), Softmax, LogSoftmax and
 * Hardmax along an axis, LayerNormalization (with its optional Mean and
 * InvStdDev outputs) and inference BatchNormalization.
 *
 * Invariant: the axis semantics are those of the node's opset — before
 * opset 13, Softmax and LogSoftmax work on the input flattened to 2-D at
 * axis, and Hardmax there takes only the last axis — and an optional output
 * (LayerNormalization's Mean and InvStdDev) is computed only when something
 * uses it; BatchNormalization runs in inference mode only.
 */
#include <math.h>
#include <string.h>

#include "onnx-impl.h"

bool ox_import_matmul(ox *x, ox_value **in, int n_in) {
    mcir_dtype dt = ox_node_dtype(in, n_in);
    mcir_tensor *ins[2] = {ox_runtime(x, in[0], dt), ox_runtime(x, in[1], dt)};
    if (!ins[0] || !ins[1]) return false;
    return ox_define_rt(x, 0, ox_done(x, ox_emit1(x, MCIR_OP_MATMUL, 2, ins, 0)));
}

bool ox_import_gemm(ox *x, ox_value **in, int n_in) {
    float alpha = ox_attr_float(x, "alpha", 1.0f), beta = ox_attr_float(x, "beta", 1.0f);
    int64_t ta = ox_attr_int(x, "transA", 0), tb = ox_attr_int(x, "transB", 0);
    if (x->failed) return false;
    mcir_dtype dt = ox_node_dtype(in, n_in);
    if (in[0]->rank != 2 || in[1]->rank != 2)
        return ox_error(x, "A and B must be matrices (rank 2)");
    bool has_c = n_in > 2 && in[2] && beta != 0.0f;
    mcir_tensor *ins[2] = {ox_runtime(x, in[0], dt), ox_runtime(x, in[1], dt)};
    if (!ins[0] || !ins[1]) return false;
    bool last = !has_c && alpha == 1.0f;
    mcir_node *n = ox_emit1(x, MCIR_OP_MATMUL, 2, ins, last ? 0 : -1);
    if (ta) mcir_node_set_bool(x->g, n, "transpose_a", true);
    if (tb) mcir_node_set_bool(x->g, n, "transpose_b", true);
    mcir_tensor *y = ox_done(x, n);
    if (!y) return false;
    if (alpha != 1.0f) {
        n = ox_emit1(x, MCIR_OP_SCALE, 1, &y, has_c ? -1 : 0);
        mcir_node_set_float(x->g, n, "value", alpha);
        if (!(y = ox_done(x, n))) return false;
    }
    if (has_c) {
        mcir_tensor *c;
        if (in[2]->is_const && beta != 1.0f) {
            ox_value *b = ox_const_new(x, in[2]->elem, 0, NULL), *sc;
            if (!b) return false;
            ox_set(b, 0, beta);
            ox_value *args[2] = {in[2], b};
            if (ox_fold_elementwise(x, "Mul", args, 2, &sc) != OX_FOLD_OK) return false;
            sc->name = ox_fresh(x, mcir_arena_printf(x->a, "%s_beta", in[2]->name));
            c = ox_runtime(x, sc, dt);
        } else {
            c = ox_runtime(x, in[2], dt);
            if (c && beta != 1.0f) {
                n = ox_emit1(x, MCIR_OP_SCALE, 1, &c, -1);
                mcir_node_set_float(x->g, n, "value", beta);
                c = ox_done(x, n);
            }
        }
        if (!c) return false;
        mcir_tensor *ab[2] = {y, c};
        y = ox_done(x, ox_emit1(x, MCIR_OP_ADD, 2, ab, 0));
    }
    return ox_define_rt(x, 0, y);
}

bool ox_import_softmax(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    int64_t axis = ox_attr_int(x, "axis", x->opset >= 13 ? -1 : 1);
    int ax;
    if (x->failed || !ox_norm_axis(x, axis, in[0]->rank, "axis", &ax)) return false;
    mcir_dtype dt = ox_node_dtype(in, 1);
    mcir_tensor *t = ox_runtime(x, in[0], dt);
    if (!t) return false;
    if (x->opset < 13 && ax != t->rank - 1) {
        /* opset < 13: softmax over the input flattened to 2-D at axis */
        int64_t rows = 1, cols = 1;
        for (int k = 0; k < t->rank; k++) *(k < ax ? &rows : &cols) *= t->shape[k];
        int64_t flat[2] = {rows, cols};
        mcir_node *n = ox_emit1(x, MCIR_OP_RESHAPE, 1, &t, -1);
        mcir_node_set_ints(x->g, n, "shape", 2, flat);
        mcir_tensor *f = ox_done(x, n);
        if (!f || !(f = ox_done(x, ox_emit1(x, MCIR_OP_SOFTMAX, 1, &f, -1)))) return false;
        n = ox_emit1(x, MCIR_OP_RESHAPE, 1, &f, 0);
        mcir_node_set_ints(x->g, n, "shape", t->rank, t->shape);
        return ox_define_rt(x, 0, ox_done(x, n));
    }
    mcir_node *n = ox_emit1(x, MCIR_OP_SOFTMAX, 1, &t, 0);
    if (ax != t->rank - 1) mcir_node_set_int(x->g, n, "axis", ax);
    return ox_define_rt(x, 0, ox_done(x, n));
}

/* x - max - log(sum(exp(x - max))) over the axis (opset < 13: the axes
 * from `axis` on, the input flattened to 2-D there). */
bool ox_import_log_softmax(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    int64_t axis = ox_attr_int(x, "axis", x->opset >= 13 ? -1 : 1);
    int ax;
    ox_value *X = in[0];
    if (x->failed || !ox_norm_axis(x, axis, X->rank, "axis", &ax)) return false;
    int64_t axes[MCIR_MAX_RANK];
    int n_axes = 0;
    for (int k = ax; k < (x->opset >= 13 ? ax + 1 : X->rank); k++) axes[n_axes++] = k;
    ox_value *m = ox_reduce_step(x, MCIR_OP_REDUCE_MAX, X, n_axes, axes, true, -1);
    ox_value *d = ox_ew_step(x, "Sub", X, m, -1);
    ox_value *s = ox_reduce_step(x, MCIR_OP_REDUCE_SUM, ox_ew_step(x, "Exp", d, NULL, -1), n_axes,
                                 axes, true, -1);
    ox_value *y = ox_ew_step(x, "Sub", d, ox_ew_step(x, "Log", s, NULL, -1), 0);
    return y && ox_define_out(x, 0, y);
}

/* Hardmax: 1 at the first maximum along axis, 0 elsewhere —
 * cast(equal(argmax(x, keepdims), index along axis)). Opset < 13
 * flattens from axis on; only the last axis is the same there. */
bool ox_import_hardmax(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_value *X = in[0];
    int64_t axis = ox_attr_int(x, "axis", x->opset >= 13 ? -1 : 1);
    int ax;
    if (x->failed || !ox_norm_axis(x, axis, X->rank, "axis", &ax)) return false;
    if (x->opset < 13 && ax != X->rank - 1)
        return ox_error(x, "Hardmax before opset 13 on axis %d (not the last) is not supported", ax);
    mcir_dtype dt;
    if (!ox_value_dtype(x, X, &dt)) return false;
    mcir_tensor *t = ox_runtime(x, X, dt);
    if (!t) return false;
    mcir_node *n = ox_emit1(x, MCIR_OP_ARGMAX, 1, &t, -1);
    mcir_node_set_int(x->g, n, "axis", ax);
    mcir_node_set_bool(x->g, n, "keepdims", true);
    mcir_tensor *am = ox_done(x, n);
    if (!am) return false;
    int64_t ishape[MCIR_MAX_RANK];
    for (int k = 0; k < X->rank; k++) ishape[k] = k == ax ? X->shape[ax] : 1;
    ox_value *idx = ox_const_new(x, OX_INT64, X->rank, ishape);
    if (!idx) return false;
    idx->name = ox_fresh(x, "hardmax_index");
    for (int64_t i = 0; i < X->shape[ax]; i++) idx->iv[i] = i;
    ox_value *eq = ox_ew_step(x, "Equal", ox_runtime_value(x, am), idx, -1);
    if (!eq) return false;
    return ox_cast_to(x, eq, ox_dtype_elem(dt));
}

static bool output_used(ox *x, int i) {
    const char *s = ox_out_name(x, i);
    ox_entry *e = s ? ox_lookup(x, s, false) : NULL;
    return e && e->uses > 0;
}

/* LayerNormalization's optional Mean and InvStdDev outputs, computed
 * separately (keepdims over the normalised axes) when something uses them. */
static bool layernorm_stats(ox *x, mcir_tensor *X, int ax, float eps) {
    int64_t axes[MCIR_MAX_RANK];
    int n_axes = 0;
    for (int k = ax; k < X->rank; k++) axes[n_axes++] = k;
    mcir_node *n = ox_emit1(x, MCIR_OP_REDUCE_MEAN, 1, &X, 1);
    mcir_node_set_ints(x->g, n, "axes", n_axes, axes);
    mcir_tensor *mean = ox_done(x, n);
    if (!mean || !ox_define_rt(x, 1, mean)) return false;
    if (!output_used(x, 2)) return true;
    mcir_tensor *ins[2] = {X, mean}, *t;
    if (!(t = ox_done(x, ox_emit1(x, MCIR_OP_SUB, 2, ins, -1)))) return false;
    ins[0] = ins[1] = t;
    if (!(t = ox_done(x, ox_emit1(x, MCIR_OP_MUL, 2, ins, -1)))) return false;
    n = ox_emit1(x, MCIR_OP_REDUCE_MEAN, 1, &t, -1);
    mcir_node_set_ints(x->g, n, "axes", n_axes, axes);
    if (!(t = ox_done(x, n))) return false;
    ox_value *e = ox_new_float_const(x, "layernorm_eps", X->dtype, 0, NULL);
    if (!e) return false;
    e->fv[0] = eps;
    ins[0] = t;
    ins[1] = ox_runtime(x, e, X->dtype);
    if (!(t = ox_done(x, ox_emit1(x, MCIR_OP_ADD, 2, ins, -1)))) return false;
    return ox_define_rt(x, 2, ox_done(x, ox_emit1(x, MCIR_OP_RSQRT, 1, &t, 2)));
}

bool ox_import_layernorm(ox *x, ox_value **in, int n_in) {
    int64_t axis = ox_attr_int(x, "axis", -1);
    float eps = ox_attr_float(x, "epsilon", 1e-5f);
    int64_t stash = ox_attr_int(x, "stash_type", 1);
    int ax;
    if (x->failed || !ox_norm_axis(x, axis, in[0]->rank, "axis", &ax)) return false;
    if (stash != 1)
        return ox_error(x, "stash_type %lld is not supported (only 1: statistics in f32)",
                        (long long)stash);
    mcir_dtype dt = ox_node_dtype(in, n_in);
    mcir_tensor *ins[3];
    int k = 0;
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) continue;
        if (!(ins[k++] = ox_runtime(x, in[i], dt))) return false;
    }
    mcir_node *n = ox_emit1(x, MCIR_OP_LAYERNORM, k, ins, 0);
    mcir_node_set_int(x->g, n, "axis", axis);
    mcir_node_set_float(x->g, n, "eps", (double)eps);
    if (!ox_define_rt(x, 0, ox_done(x, n))) return false;
    if (output_used(x, 1) || output_used(x, 2)) return layernorm_stats(x, ins[0], ax, eps);
    return true;
}

/* Inference batch norm over axis 1: a per-channel affine y = x·s + t, with
 * s = scale / sqrt(var + eps) and t = B - mean·s folded at import time when
 * the parameters are constants (the catalog's conv_affine_fold then folds
 * it into a preceding conv); runtime parameters compute
 * (x - mean) / sqrt(var + eps) · scale + B. */
bool ox_import_batchnorm(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    float eps = ox_attr_float(x, "epsilon", 1e-5f);
    ox_attr_float(x, "momentum", 0.9f); /* training only */
    int64_t training = x->opset >= 14 ? ox_attr_int(x, "training_mode", 0) : 0;
    int64_t spatial = x->opset < 9 ? ox_attr_int(x, "spatial", 1) : 1;
    if (x->failed || !ox_only_first_output(x)) return false;
    if (training) return ox_error(x, "training_mode 1 is not supported (inference only)");
    if (spatial != 1) return ox_error(x, "spatial 0 is not supported");
    ox_value *X = in[0];
    if (X->rank < 2) return ox_error(x, "input '%s' must have rank >= 2 (N, C, ...)", X->name);
    int64_t C = X->shape[1], pshape[MCIR_MAX_RANK];
    int prank = X->rank - 1;
    pshape[0] = C;
    for (int k = 1; k < prank; k++) pshape[k] = 1;
    for (int i = 1; i < 5; i++)
        if (in[i]->numel != C)
            return ox_error(x, "'%s' must have %lld values (one per channel)", in[i]->name,
                            (long long)C);
    int elem = X->is_const ? X->elem : ox_dtype_elem(X->t ? X->t->dtype : MCIR_DTYPE_F32);
    if (in[1]->is_const && in[2]->is_const && in[3]->is_const && in[4]->is_const) {
        ox_value *s = ox_const_new(x, elem, prank, pshape), *t = ox_const_new(x, elem, prank, pshape);
        if (!s || !t) return false;
        for (int64_t c = 0; c < C; c++) {
            double sc = ox_get(in[1], c) / sqrt(ox_get(in[4], c) + (double)eps);
            ox_set(s, c, sc);
            ox_set(t, c, ox_get(in[2], c) - ox_get(in[3], c) * sc);
        }
        const char *o = ox_out_name(x, 0);
        s->name = ox_fresh(x, mcir_arena_printf(x->a, "%s_bn_scale", o));
        t->name = ox_fresh(x, mcir_arena_printf(x->a, "%s_bn_shift", o));
        ox_value *y = ox_ew_step(x, "Add", ox_ew_step(x, "Mul", X, s, -1), t, 0);
        return y && ox_define_out(x, 0, y);
    }
    ox_value *p[5];
    for (int i = 1; i < 5; i++)
        if (!(p[i] = ox_reshape_step(x, in[i], prank, pshape))) return false;
    ox_value *sd = ox_ew_step(x, "Sqrt", ox_ew_step(x, "Add", p[4], ox_scalar_of(x, elem, "bn_eps", eps), -1),
                              NULL, -1);
    ox_value *y = ox_ew_step(x, "Div", ox_ew_step(x, "Sub", X, p[3], -1), sd, -1);
    y = ox_ew_step(x, "Add", ox_ew_step(x, "Mul", y, p[1], -1), p[2], 0);
    return y && ox_define_out(x, 0, y);
}
