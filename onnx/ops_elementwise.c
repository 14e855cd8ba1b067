/*
 * ops_elementwise.c — the elementwise ONNX ops: arithmetic, comparisons,
 * logic and bitwise ops (one MCIR op each, by ew_map), Where (with the
 * additive-mask form of a constant condition and the causal mask a probe
 * import recognises), Cast and CastLike, and the ones MCIR has no op for,
 * written out with ops_steps.c: Clip, HardSigmoid, HardSwish, Not/And/Or
 * on runtime bools, and the activations (Abs, LeakyRelu, PRelu, Elu,
 * Selu, ThresholdedRelu, Softplus, Softsign, Mish, Shrink).
 *
 * Invariant: an output element depends only on the input elements at its
 * (broadcast) index; with every input constant the op folds at import
 * time (eval.c) and emits nothing.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx-impl.h"

static bool logical_rt(ox *x, const char *op, ox_value **in, int n_in);

bool ox_import_cast(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    const Onnx__AttributeProto *a = ox_attr_get(x, "to", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    int64_t saturate = ox_attr_int(x, "saturate", 1);
    (void)saturate; /* only affects float8 targets, which are rejected below */
    if (!a) return x->failed ? false : ox_error(x, "missing attribute 'to'");
    return ox_cast_to(x, in[0], (int)a->i);
}

/* Output 0 is v cast to element type `to`: folded for a constant, MCIR's
 * cast for a runtime tensor, a rename when the dtype is already `to`. */
bool ox_cast_to(ox *x, ox_value *v, int to) {
    ox_value *in[1] = {v};
    if (!ox_elem_supported(to))
        return ox_error(x, "cast to %s (%d) is not supported", ox_elem_name(to), to);
    if (in[0]->is_const) {
        ox_value *o = ox_fold_cast(x, in[0], to);
        return o && ox_define_out(x, 0, o);
    }
    mcir_dtype dt;
    if (!ox_elem_dtype(to, &dt))
        return ox_error(x, "cast of runtime tensor '%s' to %s is not supported (runtime tensors "
                           "are float, float16, bfloat16, int32, int64, uint8 or bool)",
                        in[0]->name, ox_elem_name(to));
    if (dt == in[0]->t->dtype) return ox_define_out(x, 0, in[0]);
    ox_value *y = ox_cast_step(x, in[0], dt, 0);
    return y && ox_define_out(x, 0, y);
}

/* Elementwise ops: MCIR op by ONNX name (-1: import time only). */
static const struct {
    const char *op;
    int mop;
} ew_map[] = {
    {"Add", MCIR_OP_ADD}, {"Sub", MCIR_OP_SUB}, {"Mul", MCIR_OP_MUL}, {"Div", MCIR_OP_DIV},
    {"Pow", MCIR_OP_POW}, {"Max", MCIR_OP_MAX}, {"Min", MCIR_OP_MIN}, {"Sum", MCIR_OP_ADD},
    {"Relu", MCIR_OP_RELU}, {"Sigmoid", MCIR_OP_SIGMOID}, {"Tanh", MCIR_OP_TANH},
    {"Exp", MCIR_OP_EXP}, {"Log", MCIR_OP_LOG}, {"Erf", MCIR_OP_ERF},
    {"Cos", MCIR_OP_COS}, {"Sin", MCIR_OP_SIN},
    {"Sqrt", MCIR_OP_SQRT}, {"Reciprocal", MCIR_OP_RECIPROCAL}, {"Neg", MCIR_OP_NEG},
    {"Equal", MCIR_OP_EQUAL}, {"Less", MCIR_OP_LESS}, {"Greater", MCIR_OP_GREATER},
    {"LessOrEqual", MCIR_OP_LESS_EQUAL}, {"GreaterOrEqual", MCIR_OP_GREATER_EQUAL},
    {"Xor", MCIR_OP_NOT_EQUAL}, {"Mod", MCIR_OP_MOD}, {"FMod", MCIR_OP_MOD},
    {"BitwiseAnd", MCIR_OP_BITWISE_AND}, {"BitwiseOr", MCIR_OP_BITWISE_OR},
    {"BitwiseXor", MCIR_OP_BITWISE_XOR}, {"BitwiseNot", MCIR_OP_BITWISE_NOT},
    {"BitShiftLeft", MCIR_OP_LEFT_SHIFT}, {"BitShiftRight", MCIR_OP_RIGHT_SHIFT},
};

/* ew_map's MCIR op for `op`, or -1. */
int ox_ew_op(const char *op) {
    int mop = -1;
    for (size_t i = 0; i < sizeof ew_map / sizeof ew_map[0]; i++)
        if (!strcmp(ew_map[i].op, op)) mop = ew_map[i].mop;
    return mop;
}

bool ox_import_elementwise(ox *x, ox_value **in, int n_in) {
    const char *op = x->node->op_type;
    if (!strcmp(op, "Mod")) {
        /* ONNX: floats need fmod=1 (C's fmod); integers take the divisor's
         * sign (fmod=0) or the dividend's (fmod=1, "FMod" here) */
        int64_t fmod = ox_attr_int(x, "fmod", 0);
        if (!x->failed && fmod == 0 && (ox_is_float(in[0]->elem) || ox_is_float(in[1]->elem)))
            return ox_error(x, "fmod=0 is not supported for %s operands (ONNX requires fmod=1 for "
                               "floating point)", ox_elem_name(in[0]->elem));
        if (fmod) op = "FMod";
    } else if (!strcmp(op, "BitShift")) {
        char dbuf[16];
        const char *dir = ox_attr_str(x, "direction", "", dbuf, sizeof dbuf);
        if (!x->failed && strcmp(dir, "LEFT") && strcmp(dir, "RIGHT"))
            return ox_error(x, "direction must be LEFT or RIGHT, got '%s'", dir);
        if (!x->failed) op = strcmp(dir, "LEFT") ? "BitShiftRight" : "BitShiftLeft";
    }
    if (x->failed) return false;
    if (ox_all_const(in, n_in)) {
        ox_value *o;
        ox_fold r = ox_fold_elementwise(x, op, in, n_in, &o);
        if (r == OX_FOLD_ERROR) return false;
        MCIR_ASSERT(r == OX_FOLD_OK);
        return ox_define_out(x, 0, o);
    }
    if (!strcmp(op, "Not") || !strcmp(op, "And") || !strcmp(op, "Or")) return logical_rt(x, op, in, n_in);
    if (!strcmp(op, "Abs")) return ox_import_activation(x, in, n_in);
    int mop = ox_ew_op(op);
    if (mop < 0)
        return ox_error(x, "%s on runtime tensors is not supported (only at import time, on "
                           "constants)",
                        op);
    mcir_dtype dt = ox_node_dtype(in, n_in);
    if (!strcmp(op, "Pow") && in[1]->is_const && !ox_is_float(in[1]->elem)) {
        /* integer exponent (Pow's T1): exact as a float */
        in[1] = ox_fold_cast(x, in[1], ox_dtype_elem(dt));
        if (!in[1]) return false;
        in[1]->name = ox_fresh(x, mcir_arena_printf(x->a, "%s_exponent", ox_out_name(x, 0) ? ox_out_name(x, 0) : "pow"));
    }
    if (mcir_op_desc_of((mcir_op)mop)->flags & MCIR_OPF_UNARY) {
        mcir_tensor *t = ox_runtime(x, in[0], dt);
        if (!t) return false;
        return ox_define_rt(x, 0, ox_done(x, ox_emit1(x, (mcir_op)mop, 1, &t, 0)));
    }
    if (mop == MCIR_OP_MOD && n_in == 2) {   /* one node, with its fmod */
        mcir_tensor *a = ox_operand(x, in[0], dt, in + 1, 1);
        ox_value *prev[1] = {in[0]};
        mcir_tensor *b = a ? ox_operand(x, in[1], dt, prev, 1) : NULL;
        if (!b) return false;
        mcir_tensor *ins[2] = {a, b};
        mcir_node *n = ox_emit1(x, MCIR_OP_MOD, 2, ins, 0);
        if (n && !strcmp(op, "FMod")) mcir_node_set_bool(x->g, n, "fmod", true);
        return ox_define_rt(x, 0, ox_done(x, n));
    }
    if (n_in == 1) return ox_define_out(x, 0, in[0]);
    /* variadic Max/Min/Sum fold left */
    mcir_tensor *acc = ox_operand(x, in[0], dt, in + 1, n_in - 1);
    if (!acc) return false;
    for (int i = 1; i < n_in; i++) {
        ox_value *prev[1] = {in[i - 1]};
        mcir_tensor *b = ox_operand(x, in[i], dt, prev, 1);
        if (!b) return false;
        mcir_tensor *ins[2] = {acc, b};
        acc = ox_done(x, ox_emit1(x, (mcir_op)mop, 2, ins, i == n_in - 1 ? 0 : -1));
        if (!acc) return false;
    }
    return ox_define_rt(x, 0, acc);
}

/* Where(c, a, b) with a constant condition: a fill of large negative
 * values (<= -1e4 or -inf) on one side is an additive mask on the other;
 * otherwise a·c + b·(1-c) (constants folded into one weight). */
#define OX_MASK_FILL (-1e4)
#define OX_MASK_CLAMP 1e30f

/* Probing a symbolic dimension (symbolic.c): a causal mask sliced from a
 * lower-triangular buffer, as nanoGPT and GPT-2 exports write it —
 * masked_fill(scores, buffer[..., :T, :T] == 0, NEG) or where(buffer[...,
 * :T, :T] (cast to bool, or != 0), scores, NEG) — a slice of a constant
 * whose size follows the sequence. It is causal for every T, so it is
 * written as the mask a graph computes for any length, add(scores,
 * where(cols > rows, NEG, 0)) with cols and rows arange(0, T), which the
 * catalog's attention reads as causal (rewrites/actions.c). True and *out
 * set when Where(cond, a, b) is such a mask over scores of Nq = Nk. */
static bool probe_causal_mask(ox *x, ox_value *cond, ox_value *a, ox_value *b, ox_value **out) {
    *out = NULL;
    if (!x->probing || cond->is_const || cond->expand) return false;
    bool fill_on_true;   /* the fill replaces the scores where cond is true */
    ox_value *fill, *scores;
    if (a->is_const && !b->is_const) fill = a, scores = b, fill_on_true = true;
    else if (b->is_const && !a->is_const) fill = b, scores = a, fill_on_true = false;
    else return false;
    if (fill->numel != 1 || !ox_is_float(fill->elem) || !(ox_get(fill, 0) <= OX_MASK_FILL) ||
        scores->expand || scores->rank < 2 || !mcir_dtype_is_float(scores->t->dtype))
        return false;
    int64_t n = scores->shape[scores->rank - 1];
    if (scores->shape[scores->rank - 2] != n) return false;
    /* cond = pred(block): equal / not_equal against a scalar constant, a
     * cast to bool or the bool block itself (nonzero) */
    const mcir_node *p = cond->t->producer;
    const mcir_tensor *t = cond->t;
    int pred = 0;   /* 0: nonzero, 1: == c, 2: != c */
    float c = 0;
    if (p && (p->op == MCIR_OP_EQUAL || p->op == MCIR_OP_NOT_EQUAL) && p->n_inputs == 2) {
        int side = p->inputs[1]->kind == MCIR_TENSOR_WEIGHT && mcir_tensor_numel(p->inputs[1]) == 1 ? 0
                   : p->inputs[0]->kind == MCIR_TENSOR_WEIGHT && mcir_tensor_numel(p->inputs[0]) == 1 ? 1
                                                                                               : -1;
        if (side < 0 || !p->inputs[1 - side]->data) return false;
        mcir_values_to_f32(p->inputs[1 - side]->dtype, p->inputs[1 - side]->data, &c, 1);
        pred = p->op == MCIR_OP_EQUAL ? 1 : 2;
        t = p->inputs[side];
    } else if (p && p->op == MCIR_OP_CAST) {
        t = p->inputs[0];
    }
    /* a chain of slices [0:n] on the last two axes of a weight */
    while (t->producer && t->producer->op == MCIR_OP_SLICE) {
        const mcir_node *sl = t->producer;
        int ax;
        const mcir_tensor *src = sl->inputs[0];
        if (!mcir_norm_axis(mcir_node_int(sl, "axis"), src->rank, &ax) || ax < src->rank - 2 ||
            mcir_node_int(sl, "start") != 0 || mcir_node_int(sl, "step") != 1)
            return false;
        t = src;
    }
    if (t->kind != MCIR_TENSOR_WEIGHT || !t->data || t->rank < 2 || t->rank != cond->rank ||
        cond->shape[cond->rank - 1] != n || cond->shape[cond->rank - 2] != n)
        return false;
    for (int i = 0; i < t->rank - 2; i++)
        if (t->shape[i] != 1) return false;
    int64_t rows = t->shape[t->rank - 2], cols = t->shape[t->rank - 1];
    if (rows < n || cols < n) return false;
    float *v = malloc((size_t)(rows * cols) * sizeof *v);
    MCIR_ASSERT(v);
    mcir_values_to_f32(t->dtype, t->data, v, rows * cols);
    bool causal = true;
    for (int64_t i = 0; i < n && causal; i++)
        for (int64_t j = 0; j < n && causal; j++) {
            float w = v[i * cols + j];
            bool on = pred == 1 ? w == c : pred == 2 ? w != c : w != 0;
            causal = (on == fill_on_true) == (j > i);   /* replaced exactly above the diagonal */
        }
    free(v);
    if (!causal) return false;
    /* cols = arange(0, n), rows = cols as [n, 1]; mask = where(cols > rows, NEG, 0) */
    mcir_node *ar = ox_emit1(x, MCIR_OP_ARANGE, 0, NULL, -1);
    mcir_node_set_int(x->g, ar, "end", n);
    mcir_tensor *pos = ox_done(x, ar);
    if (!pos) return false;
    if (x->limits->n == (int)(sizeof x->limits->item / sizeof x->limits->item[0]))
        return ox_error(x, "more than %d causal masks sliced from buffers",
                        (int)(sizeof x->limits->item / sizeof x->limits->item[0]));
    x->limits->item[x->limits->n++] = (ox_limit){
        ar->name, t->name,
        mcir_arena_strdup(x->g->arena, x->node->name && *x->node->name ? x->node->name : "?"),
        rows < cols ? rows : cols};
    mcir_node *rs = ox_emit1(x, MCIR_OP_RESHAPE, 1, &pos, -1);
    mcir_node_set_ints(x->g, rs, "shape", 2, (int64_t[]){n, 1});
    mcir_tensor *gt_in[2] = {pos, ox_done(x, rs)};
    if (!gt_in[1]) return false;
    mcir_tensor *gt = ox_done(x, ox_emit1(x, MCIR_OP_GREATER, 2, gt_in, -1));
    if (!gt) return false;
    mcir_dtype dt = scores->t->dtype;
    ox_value *neg = ox_new_float_const(x, "causal_fill", dt, 0, NULL);
    ox_value *zero = ox_new_float_const(x, "causal_zero", dt, 0, NULL);
    if (!neg || !zero) return false;
    ox_set(neg, 0, ox_get(fill, 0));
    ox_set(zero, 0, 0.0);
    mcir_tensor *w_in[3] = {gt, ox_weight_of(x, neg, dt), ox_weight_of(x, zero, dt)};
    mcir_node *w = ox_emit1(x, MCIR_OP_WHERE, 3, w_in, -1);
    w->outputs[0]->dtype = dt;
    mcir_tensor *mask = ox_done(x, w);
    if (!mask) return false;
    mcir_tensor *add_in[2] = {ox_runtime(x, scores, dt), mask};
    if (!add_in[0]) return false;
    mcir_tensor *sum = ox_done(x, ox_emit1(x, MCIR_OP_ADD, 2, add_in, 0));
    if (!sum) return false;
    *out = ox_runtime_value(x, sum);
    return true;
}

bool ox_import_where(ox *x, ox_value **in, int n_in) {
    ox_value *masked;
    if (probe_causal_mask(x, in[0], in[1], in[2], &masked)) return ox_define_out(x, 0, masked);
    if (x->failed) return false;
    if (ox_all_const(in, n_in)) {
        ox_value *o;
        if (ox_fold_elementwise(x, "Where", in, n_in, &o) != OX_FOLD_OK) return false;
        return ox_define_out(x, 0, o);
    }
    ox_value *C = in[0];
    if (C->elem != OX_BOOL)
        return ox_error(x, "condition '%s' must be bool, got %s", C->name, ox_elem_name(C->elem));
    mcir_dtype dt = ox_node_dtype(in + 1, 2);
    if (!C->is_const || !mcir_dtype_is_float(dt)) {
        /* a runtime condition, or integer / bool values: MCIR's where */
        ox_value *y = ox_where_step(x, C, in[1], in[2], 0);
        return y && ox_define_out(x, 0, y);
    }
    for (int side = 1; side <= 2; side++)
        if (in[side]->is_const && !ox_is_float(in[side]->elem))
            return ox_error(x, "%s tensor '%s' would be used at run time (Where's values must "
                               "share one element type; the other one is %s)",
                            ox_elem_name(in[side]->elem), in[side]->name, mcir_dtype_name(dt));
    /* value (side 1 = taken where c, side 2 = where !c) at broadcast index */
    int rm, rf;
    int64_t sm[MCIR_MAX_RANK], sf[MCIR_MAX_RANK];
    if (!mcir_broadcast_shape(C->rank, C->shape, in[1]->rank, in[1]->shape, &rf, sf) ||
        !mcir_broadcast_shape(rf, sf, in[2]->rank, in[2]->shape, &rf, sf))
        return ox_error(x, "condition and values do not broadcast");
    /* term k (1: a where c; 2: b where !c): its constant part, or a runtime
     * tensor times the 0/1 selector */
    mcir_tensor *terms[2];
    int n_terms = 0;
    ox_value *konst = NULL; /* sum of the constant parts, shape broadcast(C, const) */
    for (int side = 1; side <= 2; side++) {
        ox_value *v = in[side];
        bool want = side == 1;
        if (!v->is_const) continue;
        /* the constant part: v where selected, 0 elsewhere */
        mcir_broadcast_shape(C->rank, C->shape, v->rank, v->shape, &rm, sm);
        ox_value *zero = ox_const_new(x, v->elem, 0, NULL);
        if (!zero) return false;
        ox_seti(zero, 0, 0);
        ox_value *args[3] = {C, want ? v : zero, want ? zero : v}, *part;
        if (ox_fold_elementwise(x, "Where", args, 3, &part) != OX_FOLD_OK) return false;
        if (konst) {
            ox_value *sum[2] = {konst, part};
            if (ox_fold_elementwise(x, "Add", sum, 2, &konst) != OX_FOLD_OK) return false;
        } else {
            konst = part;
        }
    }
    for (int side = 1; side <= 2; side++) {
        ox_value *v = in[side];
        bool want = side == 1;
        if (v->is_const) continue;
        /* is the other side a large negative fill wherever it is taken? */
        ox_value *other = in[3 - side];
        bool mask = other->is_const && ox_is_float(other->elem);
        if (mask) {
            mcir_broadcast_shape(C->rank, C->shape, other->rank, other->shape, &rm, sm);
            ox_value *cb = ox_fold_expand(x, C, rm, sm), *ob = ox_fold_expand(x, other, rm, sm);
            if (!cb || !ob) return false;
            for (int64_t j = 0; mask && j < cb->numel; j++)
                if ((cb->iv[j] != 0) != want && !(ob->fv[j] <= OX_MASK_FILL)) mask = false;
        }
        mcir_tensor *t = ox_operand(x, v, dt, &C, 1);
        if (!t) return false;
        if (!mask) {
            ox_value *sel = ox_const_new(x, ox_dtype_elem(dt), C->rank, C->shape);
            if (!sel) return false;
            sel->name = ox_fresh(x, mcir_arena_printf(x->a, "%s_select", ox_out_name(x, 0) ? ox_out_name(x, 0) : "where"));
            for (int64_t j = 0; j < C->numel; j++) sel->fv[j] = (C->iv[j] != 0) == want;
            mcir_tensor *ins[2] = {t, ox_weight_of(x, sel, dt)};
            t = ox_done(x, ox_emit1(x, MCIR_OP_MUL, 2, ins, -1));
            if (!t) return false;
        }
        terms[n_terms++] = t;
    }
    if (konst) {
        /* graph.json numbers cannot hold -inf (nor, read back, the lowest
         * f32): fills beyond -1e30 become -1e30, which softmax turns into
         * the same 0 and the rewrite engine still reads as masked */
        for (int64_t j = 0; j < konst->numel; j++)
            if (fabsf(konst->fv[j]) > OX_MASK_CLAMP)
                konst->fv[j] = copysignf(OX_MASK_CLAMP, konst->fv[j]);
        konst->name = ox_fresh(x, mcir_arena_printf(x->a, "%s_mask", ox_out_name(x, 0) ? ox_out_name(x, 0) : "where"));
        terms[n_terms++] = ox_runtime(x, konst, dt);
        if (!terms[n_terms - 1]) return false;
    }
    MCIR_ASSERT(n_terms == 2);
    mcir_tensor *out = ox_done(x, ox_emit1(x, MCIR_OP_ADD, 2, terms, 0));
    if (!out) return false;
    if (out->rank != rf || memcmp(out->shape, sf, sizeof(int64_t) * (size_t)rf)) {
        /* the mask form lost a broadcast dim that only the condition had */
        ox_value *ov = ox_runtime_value(x, out);
        ov->expand = true;
        ov->rank = rf;
        memcpy(ov->shape, sf, sizeof ov->shape);
        ov->numel = 1;
        for (int k = 0; k < rf; k++)
            if (mcir_mul_overflows(ov->numel, sf[k], &ov->numel))
                return ox_error(x, "result is too large");
        return ox_define_out(x, 0, ov);
    }
    return ox_define_rt(x, 0, out);
}

bool ox_import_clip(ox *x, ox_value **in, int n_in) {
    ox_value *X = in[0], *lo = NULL, *hi = NULL;
    if (x->opset < 11) {
        float mn = ox_attr_float(x, "min", -FLT_MAX), mx = ox_attr_float(x, "max", FLT_MAX);
        if (x->failed) return false;
        if (mn > -FLT_MAX && !(lo = ox_scalar_of(x, X->elem, "clip_min", mn))) return false;
        if (mx < FLT_MAX && !(hi = ox_scalar_of(x, X->elem, "clip_max", mx))) return false;
    } else {
        lo = n_in > 1 ? in[1] : NULL;
        hi = n_in > 2 ? in[2] : NULL;
        for (int i = 1; i < n_in; i++)
            if (in[i] && in[i]->rank != 0 && in[i]->numel != 1)
                return ox_error(x, "min and max must be scalars");
    }
    ox_value *y = X;
    if (lo && !(y = ox_ew_step(x, "Max", y, lo, hi ? -1 : 0))) return false;
    if (hi && !(y = ox_ew_step(x, "Min", y, hi, 0))) return false;
    return ox_define_out(x, 0, y);
}

/* max(0, min(1, alpha·x + beta)), times x for HardSwish. */
bool ox_import_hard_sigmoid(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    bool swish = !strcmp(x->node->op_type, "HardSwish");
    float alpha = swish ? 1.0f / 6 : ox_attr_float(x, "alpha", 0.2f);
    float beta = swish ? 0.5f : ox_attr_float(x, "beta", 0.5f);
    if (x->failed) return false;
    ox_value *X = in[0];
    ox_value *y = ox_ew_step(x, "Mul", X, ox_scalar_of(x, X->elem, "hard_sigmoid_alpha", alpha), -1);
    y = ox_ew_step(x, "Add", y, ox_scalar_of(x, X->elem, "hard_sigmoid_beta", beta), -1);
    y = ox_ew_step(x, "Min", y, ox_scalar_of(x, X->elem, "one", 1.0), -1);
    y = ox_ew_step(x, "Max", y, ox_scalar_of(x, X->elem, "zero", 0.0), swish ? -1 : 0);
    if (swish) y = ox_ew_step(x, "Mul", X, y, 0);
    return y && ox_define_out(x, 0, y);
}

/* IsNaN(x) = not (x == x); IsInf(x) = x == +inf or x == -inf (each side
 * as detect_positive / detect_negative ask): MCIR's comparisons are
 * IEEE's, a NaN equal to nothing. */
bool ox_import_is_nan_inf(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_value *X = in[0];
    if (!ox_is_float(X->elem))
        return ox_error(x, "%s needs a floating-point operand, '%s' is %s", x->node->op_type, X->name,
                        ox_elem_name(X->elem));
    ox_value *y;
    if (!strcmp(x->node->op_type, "IsNaN")) {
        ox_value *same = ox_ew_step(x, "Equal", X, X, -1);
        y = same ? ox_ew_step(x, "Equal", same, ox_scalar_of(x, OX_BOOL, "false", 0), 0) : NULL;
    } else {
        bool neg = ox_attr_int(x, "detect_negative", 1) != 0, pos = ox_attr_int(x, "detect_positive", 1) != 0;
        if (x->failed) return false;
        ox_value *p = pos ? ox_ew_step(x, "Equal", X, ox_scalar_of(x, X->elem, "inf", INFINITY), neg ? -1 : 0)
                          : NULL;
        ox_value *m = neg ? ox_ew_step(x, "Equal", X, ox_scalar_of(x, X->elem, "minus_inf", -INFINITY),
                                       pos ? -1 : 0)
                          : NULL;
        if (pos && neg) y = p && m ? ox_where_step(x, p, ox_scalar_of(x, OX_BOOL, "true", 1), m, 0) : NULL;
        else if (pos || neg) y = pos ? p : m;
        else y = ox_ew_step(x, "Equal", X, X, -1) ? ox_where_step(x, ox_ew_step(x, "Equal", X, X, -1),
                                                                  ox_scalar_of(x, OX_BOOL, "false", 0),
                                                                  ox_scalar_of(x, OX_BOOL, "false", 0), 0)
                                                  : NULL;
    }
    return y && ox_define_out(x, 0, y);
}

/* Not, And and Or on runtime bool tensors, written with MCIR's comparison
 * and select: Not a = (a == false), And = where(a, b, false), Or =
 * where(a, true, b). Xor is not_equal (ew_map). */
static bool logical_rt(ox *x, const char *op, ox_value **in, int n_in) {
    for (int i = 0; i < n_in; i++)
        if (in[i]->elem != OX_BOOL)
            return ox_error(x, "%s needs bool operands, '%s' is %s", op, in[i]->name,
                            ox_elem_name(in[i]->elem));
    ox_value *y;
    if (!strcmp(op, "Not"))
        y = ox_ew_step(x, "Equal", in[0], ox_scalar_of(x, OX_BOOL, "false", 0), 0);
    else if (!strcmp(op, "And"))
        y = ox_where_step(x, in[0], in[1], ox_scalar_of(x, OX_BOOL, "false", 0), 0);
    else
        y = ox_where_step(x, in[0], ox_scalar_of(x, OX_BOOL, "true", 1), in[1], 0);
    return y && ox_define_out(x, 0, y);
}

/* The activations MCIR has no op for, written with where, comparisons and
 * the elementwise ops as ONNX's reference defines them (x < 0 picks the
 * negative branch):
 *   Abs              max(x, -x)
 *   LeakyRelu        where(x < 0, alpha·x, x)                 alpha 0.01
 *   PRelu            where(x < 0, slope·x, x)                 slope an input
 *   Elu              where(x < 0, alpha·(exp x − 1), x)       alpha 1
 *   Selu             gamma·where(x ≤ 0, alpha·exp x − alpha, x)
 *   ThresholdedRelu  where(x > alpha, x, 0)                   alpha 1
 *   Softplus         log(exp x + 1)
 *   Softsign         x / (1 + |x|)
 *   Mish             x·tanh(log(exp x + 1))
 *   Shrink           where(x < −lambd, x + bias, where(x > lambd, x − bias, 0)) */
bool ox_import_activation(ox *x, ox_value **in, int n_in) {
    const char *op = x->node->op_type;
    ox_value *X = in[0], *y = NULL;
    int e = X->elem;
    if (!strcmp(op, "Abs")) {
        y = ox_abs_step(x, X);
    } else if (!strcmp(op, "LeakyRelu") || !strcmp(op, "PRelu") || !strcmp(op, "Elu")) {
        ox_value *neg;
        if (!strcmp(op, "PRelu")) {
            if (n_in < 2) return ox_error(x, "PRelu needs a slope");
            neg = ox_ew_step(x, "Mul", X, in[1], -1);
        } else if (!strcmp(op, "LeakyRelu")) {
            neg = ox_ew_step(x, "Mul", X, ox_scalar_of(x, e, "alpha", ox_attr_float(x, "alpha", 0.01f)), -1);
        } else {
            ox_value *a = ox_scalar_of(x, e, "alpha", ox_attr_float(x, "alpha", 1.0f));
            neg = ox_ew_step(x, "Mul", ox_ew_step(x, "Sub", ox_ew_step(x, "Exp", X, NULL, -1),
                                                  ox_scalar_of(x, e, "one", 1), -1), a, -1);
        }
        y = ox_where_step(x, ox_ew_step(x, "Less", X, ox_scalar_of(x, e, "zero", 0), -1), neg, X, -1);
    } else if (!strcmp(op, "Selu")) {
        ox_value *a = ox_scalar_of(x, e, "alpha", ox_attr_float(x, "alpha", 1.67326319217681884765625f));
        ox_value *g = ox_scalar_of(x, e, "gamma", ox_attr_float(x, "gamma", 1.05070102214813232421875f));
        ox_value *neg = ox_ew_step(x, "Sub", ox_ew_step(x, "Mul", a, ox_ew_step(x, "Exp", X, NULL, -1), -1), a, -1);
        y = ox_where_step(x, ox_ew_step(x, "LessOrEqual", X, ox_scalar_of(x, e, "zero", 0), -1), neg, X, -1);
        y = ox_ew_step(x, "Mul", y, g, -1);
    } else if (!strcmp(op, "ThresholdedRelu")) {
        ox_value *a = ox_scalar_of(x, e, "alpha", ox_attr_float(x, "alpha", 1.0f));
        y = ox_where_step(x, ox_ew_step(x, "Greater", X, a, -1), X, ox_scalar_of(x, e, "zero", 0), -1);
    } else if (!strcmp(op, "Softplus") || !strcmp(op, "Mish")) {
        y = ox_ew_step(x, "Log", ox_ew_step(x, "Add", ox_ew_step(x, "Exp", X, NULL, -1), ox_scalar_of(x, e, "one", 1), -1),
                       NULL, -1);
        if (!strcmp(op, "Mish")) y = ox_ew_step(x, "Mul", X, ox_ew_step(x, "Tanh", y, NULL, -1), -1);
    } else if (!strcmp(op, "Softsign")) {
        y = ox_ew_step(x, "Div", X, ox_ew_step(x, "Add", ox_scalar_of(x, e, "one", 1), ox_abs_step(x, X), -1), -1);
    } else { /* Shrink */
        float l = ox_attr_float(x, "lambd", 0.5f), b = ox_attr_float(x, "bias", 0.0f);
        ox_value *zero = ox_scalar_of(x, e, "zero", 0);
        ox_value *hi = ox_where_step(x, ox_ew_step(x, "Greater", X, ox_scalar_of(x, e, "lambd", l), -1),
                                     ox_ew_step(x, "Sub", X, ox_scalar_of(x, e, "bias", b), -1), zero, -1);
        y = ox_where_step(x, ox_ew_step(x, "Less", X, ox_scalar_of(x, e, "neg_lambd", -l), -1),
                          ox_ew_step(x, "Add", X, ox_scalar_of(x, e, "bias", b), -1), hi, -1);
    }
    return y && ox_define_out(x, 0, y);
}

/* CastLike: Cast to the element type of the second input. */
bool ox_import_cast_like(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_attr_int(x, "saturate", 1); /* only affects float8 targets */
    return ox_cast_to(x, in[0], in[1]->elem);
}
