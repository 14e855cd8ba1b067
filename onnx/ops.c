/*
 * ops.c — the ONNX op handlers and their table (the ops are listed in
 * docs/onnx.md). ox_import_node looks the current node up, checks its
 * input count and that its inputs are defined, runs its handler and then
 * rejects every attribute the handler did not read. A handler folds the
 * node at import time when its inputs are constants (eval.c), or emits
 * MCIR nodes for it (values.c); the ops MCIR has no op for are written
 * out as ops it has (the decomposed ops below).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx-impl.h"


/* ------------------------------------------------------------- handlers */

typedef bool (*ox_handler)(ox *x, ox_value **in, int n_in);

static bool h_constant(ox *x, ox_value **in, int n_in) {
    (void)in, (void)n_in;
    const Onnx__AttributeProto *a;
    ox_value *v = NULL;
    int64_t ints[1 << 12];
    if ((a = ox_attr_get(x, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR))) {
        v = ox_tensor_value(x, a->t, "attribute 'value'");
    } else if ((a = ox_attr_get(x, "value_float", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT))) {
        v = ox_const_new(x, OX_FLOAT, 0, NULL);
        if (v) v->fv[0] = a->f;
    } else if ((a = ox_attr_get(x, "value_int", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT))) {
        v = ox_const_new(x, OX_INT64, 0, NULL);
        if (v) v->iv[0] = a->i;
    } else if ((a = ox_attr_get(x, "value_floats", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS))) {
        int64_t n = (int64_t)a->n_floats;
        v = ox_const_new(x, OX_FLOAT, 1, &n);
        for (int64_t i = 0; v && i < n; i++) v->fv[i] = a->floats[i];
    } else {
        int n = ox_attr_ints(x, "value_ints", ints, 1 << 12);
        if (n >= 0) {
            int64_t nn = n;
            v = ox_const_new(x, OX_INT64, 1, &nn);
            for (int i = 0; v && i < n; i++) v->iv[i] = ints[i];
        } else if (!x->failed) {
            return ox_error(x, "Constant needs one of value, value_float(s), value_int(s) "
                               "(sparse and string constants are not supported)");
        }
    }
    return v && ox_define_out(x, 0, v);
}

static bool h_identity(ox *x, ox_value **in, int n_in) {
    const char *op = x->node->op_type;
    if (!strcmp(op, "Dropout")) {
        ox_attr_int(x, "seed", 0);          /* only matters in training */
        double ratio = ox_attr_float(x, "ratio", 0.5f); /* opset < 12 */
        if (n_in > 2 && in[2]) {
            if (!in[2]->is_const)
                return ox_error(x, "training_mode '%s' must be a constant", in[2]->name);
            /* training with ratio 0 drops nothing: the identity too */
            bool training = in[2]->numel && ox_geti(in[2], 0);
            if (training && n_in > 1 && in[1]) {
                if (!in[1]->is_const || in[1]->numel != 1)
                    return ox_error(x, "ratio '%s' must be a scalar constant in training mode",
                                    in[1]->name);
                ratio = ox_get(in[1], 0);
            }
            if (training && ratio != 0)
                return ox_error(x, "training_mode is true with ratio %g; only inference or "
                                   "a ratio of 0 (the identity) is supported",
                                ratio);
        }
        const char *mask = ox_out_name(x, 1);
        ox_entry *me = mask ? ox_lookup(x, mask, false) : NULL;
        if (me && me->uses > 0) { /* nothing dropped: the mask is all true */
            ox_value *m = ox_const_new(x, OX_BOOL, in[0]->rank, in[0]->shape);
            if (!m) return false;
            for (int64_t i = 0; i < m->numel; i++) m->iv[i] = 1;
            if (!ox_define_out(x, 1, m)) return false;
        }
    }
    if (x->failed) return false;
    return ox_define_out(x, 0, in[0]);
}

static bool cast_to(ox *x, ox_value *v, int to);
static ox_value *cast_step(ox *x, ox_value *v, mcir_dtype dt, int out_index);
static bool h_activation(ox *x, ox_value **in, int n_in);
static bool logical_rt(ox *x, const char *op, ox_value **in, int n_in);
static ox_value *where_step(ox *x, ox_value *c, ox_value *a, ox_value *b, int out_index);

static bool h_cast(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    const Onnx__AttributeProto *a = ox_attr_get(x, "to", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    int64_t saturate = ox_attr_int(x, "saturate", 1);
    (void)saturate; /* only affects float8 targets, which are rejected below */
    if (!a) return x->failed ? false : ox_error(x, "missing attribute 'to'");
    return cast_to(x, in[0], (int)a->i);
}

/* Output 0 is v cast to element type `to`: folded for a constant, MCIR's
 * cast for a runtime tensor, a rename when the dtype is already `to`. */
static bool cast_to(ox *x, ox_value *v, int to) {
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
    ox_value *y = cast_step(x, in[0], dt, 0);
    return y && ox_define_out(x, 0, y);
}

/* MCIR's cast of runtime v to dt, its result ONNX output out_index (-1:
 * an intermediate). */
static ox_value *cast_step(ox *x, ox_value *v, mcir_dtype dt, int out_index) {
    mcir_tensor *t = ox_runtime(x, v, v->t->dtype);
    if (!t) return NULL;
    mcir_node *n = ox_emit1(x, MCIR_OP_CAST, 1, &t, out_index);
    mcir_node_set_string(x->g, n, "to", mcir_dtype_name(dt));
    t = ox_done(x, n);
    return t ? ox_runtime_value(x, t) : NULL;
}

static bool h_shape(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    int64_t r = in[0]->rank;
    int64_t start = ox_attr_int(x, "start", 0), end = ox_attr_int(x, "end", r);
    if (x->failed) return false;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t n = end > start ? end - start : 0;
    ox_value *o = ox_const_new(x, OX_INT64, 1, &n);
    if (!o) return false;
    for (int64_t i = 0; i < n; i++) o->iv[i] = in[0]->shape[start + i];
    return ox_define_out(x, 0, o);
}

static bool h_size(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_value *o = ox_const_new(x, OX_INT64, 0, NULL);
    if (!o) return false;
    o->iv[0] = in[0]->numel;
    return ox_define_out(x, 0, o);
}

static bool h_constant_of_shape(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    int64_t shape[MCIR_MAX_RANK];
    int r;
    const Onnx__AttributeProto *a =
        ox_attr_get(x, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    if (x->failed || !ox_ints_of(x, in[0], "shape", shape, &r, MCIR_MAX_RANK)) return false;
    ox_value *fill = NULL;
    if (a) {
        fill = ox_tensor_value(x, a->t, "attribute 'value'");
        if (!fill) return false;
        if (fill->numel != 1) return ox_error(x, "attribute 'value' must have one element");
    }
    ox_value *o = ox_const_new(x, fill ? fill->elem : OX_FLOAT, r, shape);
    if (!o) return false;
    for (int64_t i = 0; i < o->numel; i++) {
        if (fill) ox_copy_elem(o, i, fill, 0);
        else o->fv[i] = 0;
    }
    return ox_define_out(x, 0, o);
}

static bool h_range(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    for (int i = 0; i < 3; i++)
        if (!in[i]->is_const || in[i]->numel != 1)
            return ox_error(x, "start, limit and delta must be scalar constants");
    int64_t n;
    if (ox_is_float(in[0]->elem)) {
        double s = ox_get(in[0], 0), l = ox_get(in[1], 0), dl = ox_get(in[2], 0);
        double c = ceil((l - s) / dl);
        if (!(c == c) || dl == 0 || c > 1e9) return ox_error(x, "bad range");
        n = c > 0 ? (int64_t)c : 0;
        ox_value *o = ox_const_new(x, in[0]->elem, 1, &n);
        if (!o) return false;
        for (int64_t i = 0; i < n; i++) ox_set(o, i, s + (double)i * dl);
        return ox_define_out(x, 0, o);
    }
    int64_t s = ox_geti(in[0], 0), l = ox_geti(in[1], 0), dl = ox_geti(in[2], 0);
    if (dl == 0) return ox_error(x, "delta is 0");
    mcir_dtype dt;
    if (x->probing && dl == 1 && l > s && ox_elem_dtype(in[0]->elem, &dt)) {
        /* probing a symbolic dimension (symbolic.c): positions arange(0, T)
         * stay a runtime arange, whose end may then follow the dimension */
        mcir_node *ar = ox_emit1(x, MCIR_OP_ARANGE, 0, NULL, 0);
        mcir_node_set_int(x->g, ar, "start", s);
        mcir_node_set_int(x->g, ar, "end", l);
        mcir_node_set_string(x->g, ar, "dtype", mcir_dtype_name(dt));
        return ox_define_rt(x, 0, ox_done(x, ar));
    }
    double c = ceil(((double)l - (double)s) / (double)dl);
    if (c > 1e9) return ox_error(x, "range of %g elements is too large", c);
    n = c > 0 ? (int64_t)c : 0;
    ox_value *o = ox_const_new(x, in[0]->elem, 1, &n);
    if (!o) return false;
    for (int64_t i = 0; i < n; i++) o->iv[i] = (int64_t)((uint64_t)s + (uint64_t)i * (uint64_t)dl);
    return ox_define_out(x, 0, o);
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
    {"Sqrt", MCIR_OP_SQRT}, {"Reciprocal", MCIR_OP_RECIPROCAL}, {"Neg", MCIR_OP_NEG},
    {"Equal", MCIR_OP_EQUAL}, {"Less", MCIR_OP_LESS}, {"Greater", MCIR_OP_GREATER},
    {"LessOrEqual", MCIR_OP_LESS_EQUAL}, {"GreaterOrEqual", MCIR_OP_GREATER_EQUAL},
    {"Xor", MCIR_OP_NOT_EQUAL}, {"Mod", MCIR_OP_MOD}, {"FMod", MCIR_OP_MOD},
    {"BitwiseAnd", MCIR_OP_BITWISE_AND}, {"BitwiseOr", MCIR_OP_BITWISE_OR},
    {"BitwiseXor", MCIR_OP_BITWISE_XOR}, {"BitwiseNot", MCIR_OP_BITWISE_NOT},
    {"BitShiftLeft", MCIR_OP_LEFT_SHIFT}, {"BitShiftRight", MCIR_OP_RIGHT_SHIFT},
};

static bool h_elementwise(ox *x, ox_value **in, int n_in) {
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
    if (!strcmp(op, "Abs")) return h_activation(x, in, n_in);
    int mop = -1;
    for (size_t i = 0; i < sizeof ew_map / sizeof ew_map[0]; i++)
        if (!strcmp(ew_map[i].op, op)) mop = ew_map[i].mop;
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

static bool h_where(ox *x, ox_value **in, int n_in) {
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
        ox_value *y = where_step(x, C, in[1], in[2], 0);
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

static bool h_matmul(ox *x, ox_value **in, int n_in) {
    mcir_dtype dt = ox_node_dtype(in, n_in);
    mcir_tensor *ins[2] = {ox_runtime(x, in[0], dt), ox_runtime(x, in[1], dt)};
    if (!ins[0] || !ins[1]) return false;
    return ox_define_rt(x, 0, ox_done(x, ox_emit1(x, MCIR_OP_MATMUL, 2, ins, 0)));
}

static bool h_gemm(ox *x, ox_value **in, int n_in) {
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

static bool h_softmax(ox *x, ox_value **in, int n_in) {
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

static bool h_layernorm(ox *x, ox_value **in, int n_in) {
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

static bool reduce_composite(ox *x, const char *op, ox_value *X, int n_axes,
                             const int64_t *axes, bool keep);

static bool h_reduce(ox *x, ox_value **in, int n_in) {
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

static bool h_transpose(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_value *X = in[0];
    int64_t perm[MCIR_MAX_RANK];
    int k = ox_attr_ints(x, "perm", perm, MCIR_MAX_RANK);
    if (x->failed) return false;
    if (k < 0) {
        k = X->rank;
        for (int i = 0; i < k; i++) perm[i] = k - 1 - i;
    }
    if (k != X->rank) return ox_error(x, "perm has %d entries for rank %d", k, X->rank);
    bool seen[MCIR_MAX_RANK] = {0}, identity = true;
    for (int i = 0; i < k; i++) {
        if (perm[i] < 0 || perm[i] >= k || seen[perm[i]])
            return ox_error(x, "perm is not a permutation of 0..%d", k - 1);
        seen[perm[i]] = true;
        identity &= perm[i] == i;
    }
    if (X->is_const) {
        ox_value *o = ox_fold_transpose(x, X, perm);
        return o && ox_define_out(x, 0, o);
    }
    if (identity && !X->expand) return ox_define_out(x, 0, X);
    mcir_tensor *t = ox_runtime(x, X, X->t->dtype);
    if (!t) return false;
    mcir_node *n = ox_emit1(x, MCIR_OP_TRANSPOSE, 1, &t, 0);
    mcir_node_set_ints(x->g, n, "perm", k, perm);
    return ox_define_rt(x, 0, ox_done(x, n));
}

static bool h_reshape(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    int64_t allowzero = ox_attr_int(x, "allowzero", 0);
    int64_t req[MCIR_MAX_RANK], shape[MCIR_MAX_RANK];
    int k;
    if (x->failed || !ox_ints_of(x, in[1], "shape", req, &k, MCIR_MAX_RANK)) return false;
    ox_value *X = in[0];
    int wild = -1;
    int64_t known = 1;
    for (int i = 0; i < k; i++) {
        if (req[i] == -1) {
            if (wild >= 0) return ox_error(x, "shape has more than one -1");
            wild = i;
            continue;
        }
        if (req[i] == 0 && !allowzero) {
            if (i >= X->rank) return ox_error(x, "shape copies dim %d of a rank-%d input", i, X->rank);
            req[i] = X->shape[i];
        }
        if (req[i] < 0) return ox_error(x, "shape has a negative dim %lld", (long long)req[i]);
        shape[i] = req[i];
        if (mcir_mul_overflows(known, req[i], &known)) return ox_error(x, "shape overflows");
    }
    if (wild >= 0) {
        if (known == 0 || X->numel % known)
            return ox_error(x, "cannot reshape '%s' (%lld elements) with -1", X->name,
                            (long long)X->numel);
        shape[wild] = X->numel / known;
    }
    return ox_reshape_to(x, X, k, shape, 0);
}

static bool h_flatten(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_value *X = in[0];
    int64_t axis = ox_attr_int(x, "axis", 1);
    if (x->failed) return false;
    if (axis < 0) axis += X->rank;
    if (axis < 0 || axis > X->rank) return ox_error(x, "axis is out of range");
    int64_t shape[2] = {1, 1};
    for (int i = 0; i < X->rank; i++) shape[i >= axis] *= X->shape[i];
    return ox_reshape_to(x, X, 2, shape, 0);
}

/* axes from the attribute (opset < 13) or the second input. */
static int axes_arg(ox *x, ox_value **in, int n_in, int64_t *axes) {
    int n = -1;
    if (x->opset >= 13) {
        if (n_in > 1 && in[1] && !ox_ints_of(x, in[1], "axes", axes, &n, MCIR_MAX_RANK)) return -2;
    } else {
        if (n_in > 1) {
            ox_error(x, "axes as an input needs opset 13");
            return -2;
        }
        n = ox_attr_ints(x, "axes", axes, MCIR_MAX_RANK);
    }
    return x->failed ? -2 : n;
}

static bool h_unsqueeze(ox *x, ox_value **in, int n_in) {
    int64_t axes[MCIR_MAX_RANK], shape[MCIR_MAX_RANK];
    int n = axes_arg(x, in, n_in, axes);
    if (n == -2) return false;
    if (n < 0) return ox_error(x, "axes are required");
    ox_value *X = in[0];
    int r = X->rank + n;
    if (r > MCIR_MAX_RANK) return ox_error(x, "result rank %d exceeds %d", r, MCIR_MAX_RANK);
    bool ins[MCIR_MAX_RANK] = {0};
    for (int i = 0; i < n; i++) {
        int a;
        if (!ox_norm_axis(x, axes[i], r, "axis", &a)) return false;
        if (ins[a]) return ox_error(x, "axis %d repeats", a);
        ins[a] = true;
    }
    for (int i = 0, j = 0; i < r; i++) shape[i] = ins[i] ? 1 : X->shape[j++];
    return ox_reshape_to(x, X, r, shape, 0);
}

static bool h_squeeze(ox *x, ox_value **in, int n_in) {
    int64_t axes[MCIR_MAX_RANK], shape[MCIR_MAX_RANK];
    int n = axes_arg(x, in, n_in, axes);
    if (n == -2) return false;
    ox_value *X = in[0];
    bool drop[MCIR_MAX_RANK] = {0};
    if (n <= 0) {
        for (int i = 0; i < X->rank; i++) drop[i] = X->shape[i] == 1;
    } else {
        for (int i = 0; i < n; i++) {
            int a;
            if (!ox_norm_axis(x, axes[i], X->rank, "axis", &a)) return false;
            if (X->shape[a] != 1)
                return ox_error(x, "cannot squeeze axis %d of size %lld", a,
                                (long long)X->shape[a]);
            drop[a] = true;
        }
    }
    int r = 0;
    for (int i = 0; i < X->rank; i++)
        if (!drop[i]) shape[r++] = X->shape[i];
    return ox_reshape_to(x, X, r, shape, 0);
}

static bool h_concat(ox *x, ox_value **in, int n_in) {
    const Onnx__AttributeProto *a = ox_attr_get(x, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (!a) return x->failed ? false : ox_error(x, "missing attribute 'axis'");
    ox_value *keep[256];
    int k = 0, ax;
    if (n_in > 256) return ox_error(x, "more than 256 inputs");
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) return ox_error(x, "input %d is missing", i);
        if (in[i]->numel > 0 || in[i]->rank != in[0]->rank) keep[k++] = in[i];
    }
    if (!k) keep[k++] = in[0];
    if (!ox_norm_axis(x, a->i, keep[0]->rank, "axis", &ax)) return false;
    if (ox_all_const(keep, k)) {
        ox_value *o = ox_fold_concat(x, keep, k, ax);
        return o && ox_define_out(x, 0, o);
    }
    if (k == 1) return ox_define_out(x, 0, keep[0]);
    mcir_dtype dt = ox_node_dtype(keep, k);
    mcir_tensor *ts[256];
    for (int i = 0; i < k; i++)
        if (!(ts[i] = ox_runtime(x, keep[i], dt))) return false;
    mcir_node *n = ox_emit1(x, MCIR_OP_CONCAT, k, ts, 0);
    mcir_node_set_int(x->g, n, "axis", ax);
    return ox_define_rt(x, 0, ox_done(x, n));
}

static bool h_split(ox *x, ox_value **in, int n_in) {
    ox_value *X = in[0];
    int64_t axis = ox_attr_int(x, "axis", 0), sizes[64];
    int64_t num_outputs = ox_attr_int(x, "num_outputs", 0);
    int n_out = (int)x->node->n_output, k = -1, ax;
    if (x->failed || !ox_norm_axis(x, axis, X->rank, "axis", &ax)) return false;
    if (n_out > 64) return ox_error(x, "more than 64 outputs");
    if (x->opset >= 13) {
        if (n_in > 1 && in[1] && !ox_ints_of(x, in[1], "split", sizes, &k, 64)) return false;
    } else {
        if (n_in > 1) return ox_error(x, "split as an input needs opset 13");
        k = ox_attr_ints(x, "split", sizes, 64);
        if (x->failed) return false;
    }
    int64_t dim = X->shape[ax];
    if (k < 0) {
        if (num_outputs && num_outputs != n_out)
            return ox_error(x, "num_outputs %lld but %d outputs", (long long)num_outputs, n_out);
        int64_t chunk = num_outputs ? (dim + n_out - 1) / n_out : dim / n_out;
        if (!num_outputs && dim % n_out)
            return ox_error(x, "axis of size %lld does not split evenly into %d outputs",
                            (long long)dim, n_out);
        for (int i = 0; i < n_out; i++) {
            int64_t rest = dim - chunk * i;
            sizes[i] = rest < chunk ? (rest > 0 ? rest : 0) : chunk;
        }
        k = n_out;
    }
    if (k != n_out) return ox_error(x, "split has %d sizes but the node has %d outputs", k, n_out);
    int64_t sum = 0;
    for (int i = 0; i < k; i++)
        if (sizes[i] < 0 || __builtin_add_overflow(sum, sizes[i], &sum))
            return ox_error(x, "split sizes are negative or overflow");
    if (sum != dim)
        return ox_error(x, "split sizes sum to %lld, axis %d has %lld", (long long)sum, ax,
                        (long long)dim);
    if (X->is_const) {
        int64_t first = 0;
        for (int i = 0; i < k; i++) {
            ox_value *o = ox_fold_slice(x, X, ax, first, 1, sizes[i]);
            if (!o || !ox_define_out(x, i, o)) return false;
            first += sizes[i];
        }
        return true;
    }
    if (k == 1) return ox_define_out(x, 0, X);
    mcir_tensor *t = ox_runtime(x, X, X->t->dtype);
    if (!t) return false;
    int idx[64];
    for (int i = 0; i < k; i++) idx[i] = i;
    mcir_node *n = ox_emit(x, MCIR_OP_SPLIT, 1, &t, k, idx);
    mcir_node_set_int(x->g, n, "axis", ax);
    mcir_node_set_ints(x->g, n, "sizes", k, sizes);
    if (!ox_infer_now(x, n)) return false;
    for (int i = 0; i < k; i++)
        if (!ox_define_rt(x, i, n->outputs[i])) return false;
    return true;
}

/* Slices runtime t on one axis; first/len/step as ox_slice_bounds gives. */
static mcir_tensor *slice_rt(ox *x, mcir_tensor *t, int ax, int64_t first, int64_t len,
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

static bool h_slice(ox *x, ox_value **in, int n_in) {
    int64_t starts[MCIR_MAX_RANK], ends[MCIR_MAX_RANK], axes[MCIR_MAX_RANK],
        steps[MCIR_MAX_RANK];
    int ns, ne, na = -1, nt = -1;
    ox_value *X = in[0];
    if (x->opset < 10) {
        ns = ox_attr_ints(x, "starts", starts, MCIR_MAX_RANK);
        ne = ox_attr_ints(x, "ends", ends, MCIR_MAX_RANK);
        na = ox_attr_ints(x, "axes", axes, MCIR_MAX_RANK);
        if (x->failed) return false;
    } else {
        if (n_in < 3 || !in[1] || !in[2]) return ox_error(x, "starts and ends are required");
        if (!ox_ints_of(x, in[1], "starts", starts, &ns, MCIR_MAX_RANK) ||
            !ox_ints_of(x, in[2], "ends", ends, &ne, MCIR_MAX_RANK) ||
            (n_in > 3 && in[3] && !ox_ints_of(x, in[3], "axes", axes, &na, MCIR_MAX_RANK)) ||
            (n_in > 4 && in[4] && !ox_ints_of(x, in[4], "steps", steps, &nt, MCIR_MAX_RANK)))
            return false;
    }
    if (ns != ne || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
        return ox_error(x, "starts, ends, axes and steps differ in length");
    /* effective per-axis slices */
    int ax[MCIR_MAX_RANK], k = 0;
    int64_t first[MCIR_MAX_RANK], len[MCIR_MAX_RANK], step[MCIR_MAX_RANK];
    bool seen[MCIR_MAX_RANK] = {0};
    for (int i = 0; i < ns; i++) {
        int a;
        if (!ox_norm_axis(x, na >= 0 ? axes[i] : i, X->rank, "axis", &a)) return false;
        if (seen[a]) return ox_error(x, "axis %d repeats", a);
        seen[a] = true;
        int64_t s = nt >= 0 ? steps[i] : 1, f, l;
        if (s == 0) return ox_error(x, "step is 0");
        ox_slice_bounds(X->shape[a], starts[i], ends[i], s, &f, &l);
        if (l == X->shape[a] && s == 1) continue;
        ax[k] = a, first[k] = f, len[k] = l, step[k] = s;
        k++;
    }
    /* probing a symbolic dimension (symbolic.c): a slice of a buffer (a
     * causal mask's [:T, :T]) stays a runtime slice of the whole weight,
     * whose bounds may then follow the dimension */
    if (X->is_const && !(x->probing && X->rank >= 2 && k > 0)) {
        ox_value *v = X;
        for (int i = 0; i < k; i++)
            if (!(v = ox_fold_slice(x, v, ax[i], first[i], step[i], len[i]))) return false;
        return ox_define_out(x, 0, v);
    }
    if (k == 0) return ox_define_out(x, 0, X);
    mcir_dtype dt;
    if (!ox_value_dtype(x, X, &dt)) return false;
    mcir_tensor *t = ox_runtime(x, X, dt);
    for (int i = 0; t && i < k; i++)
        t = slice_rt(x, t, ax[i], first[i], len[i], step[i], i == k - 1 ? 0 : -1);
    return ox_define_rt(x, 0, t);
}

static bool h_gather(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_value *D = in[0], *I = in[1];
    int64_t axis = ox_attr_int(x, "axis", 0);
    int ax;
    if (x->failed || !ox_norm_axis(x, axis, D->rank, "axis", &ax)) return false;
    if (I->elem != OX_INT32 && I->elem != OX_INT64)
        return ox_error(x, "indices '%s' must be int32 or int64, got %s", I->name,
                        ox_elem_name(I->elem));
    if (!I->is_const) {
        /* runtime indices (an embedding lookup): MCIR's gather, which
         * checks them on the CPU and clamps them on the GPU */
        mcir_dtype dt;
        if (!ox_value_dtype(x, D, &dt)) return false;
        mcir_tensor *ins[2] = {ox_runtime(x, D, dt), ox_runtime(x, I, I->t->dtype)};
        if (!ins[0] || !ins[1]) return false;
        mcir_node *n = ox_emit1(x, MCIR_OP_GATHER, 2, ins, 0);
        mcir_node_set_int(x->g, n, "axis", ax);
        return ox_define_rt(x, 0, ox_done(x, n));
    }
    int64_t dim = D->shape[ax];
    for (int64_t i = 0; i < I->numel; i++) {
        int64_t t = I->iv[i];
        if (t < -dim || t >= dim)
            return ox_error(x, "index %lld is out of range for axis %d of size %lld",
                            (long long)t, ax, (long long)dim);
    }
    if (D->is_const) {
        ox_value *o = ox_fold_gather(x, D, I, ax);
        return o && ox_define_out(x, 0, o);
    }
    if (I->numel == 0) return ox_error(x, "empty indices on a runtime tensor");
    if (D->rank - 1 + I->rank > MCIR_MAX_RANK) return ox_error(x, "result rank too large");
    int64_t shape[MCIR_MAX_RANK];
    int r = 0;
    for (int k = 0; k < ax; k++) shape[r++] = D->shape[k];
    for (int k = 0; k < I->rank; k++) shape[r++] = I->shape[k];
    for (int k = ax + 1; k < D->rank; k++) shape[r++] = D->shape[k];
    mcir_tensor *src = ox_runtime(x, D, D->t->dtype);
    if (!src) return false;
    /* runs of consecutive indices become slices, joined by a concat */
    mcir_tensor *pieces[256];
    int np = 0;
    bool direct = I->rank == 1; /* the concat already has the result shape */
    for (int64_t i = 0; i < I->numel;) {
        int64_t s = I->iv[i] < 0 ? I->iv[i] + dim : I->iv[i], j = i + 1;
        while (j < I->numel && (I->iv[j] < 0 ? I->iv[j] + dim : I->iv[j]) == s + (j - i)) j++;
        if (np == 256) return ox_error(x, "more than 256 index runs");
        bool last = j == I->numel && np == 0 && direct;
        if (s == 0 && j - i == dim) pieces[np++] = src;
        else if (!(pieces[np++] = slice_rt(x, src, ax, s, j - i, 1, last ? 0 : -1))) return false;
        i = j;
    }
    mcir_tensor *t = pieces[0];
    if (np > 1) {
        mcir_node *n = ox_emit1(x, MCIR_OP_CONCAT, np, pieces, direct ? 0 : -1);
        mcir_node_set_int(x->g, n, "axis", ax);
        if (!(t = ox_done(x, n))) return false;
    }
    return ox_reshape_to(x, ox_runtime_value(x, t), r, shape, 0);
}

static bool h_expand(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    int64_t req[MCIR_MAX_RANK], shape[MCIR_MAX_RANK];
    int k, r;
    ox_value *X = in[0];
    if (!ox_ints_of(x, in[1], "shape", req, &k, MCIR_MAX_RANK)) return false;
    for (int i = 0; i < k; i++)
        if (req[i] < 0) return ox_error(x, "shape has a negative dim %lld", (long long)req[i]);
    if (!mcir_broadcast_shape(X->rank, X->shape, k, req, &r, shape))
        return ox_error(x, "'%s' does not broadcast to the requested shape", X->name);
    int64_t target = 1;
    for (int i = 0; i < r; i++) target = shape[i] > 0 && target <= (INT64_MAX / shape[i]) ? target * shape[i] : INT64_MAX;
    /* probing a symbolic dimension (symbolic.c): a float constant
     * broadcast to more elements (a class token to the batch) stays a
     * runtime expand of the weight, whose size may follow the dimension */
    bool keep = X->is_const && x->probing && ox_is_float(X->elem) && target > X->numel;
    if (X->is_const && !keep) {
        ox_value *o = ox_fold_expand(x, X, r, shape);
        return o && ox_define_out(x, 0, o);
    }
    if (r == X->rank && !memcmp(shape, X->shape, sizeof(int64_t) * (size_t)r))
        return ox_define_out(x, 0, X);
    mcir_dtype cdt;
    if (keep && !ox_value_dtype(x, X, &cdt)) return false;
    ox_value *v = mcir_arena_alloc(x->a, sizeof *v);
    *v = *X;
    v->is_const = false;
    v->iv = NULL;
    v->fv = NULL;
    memset(v->weight, 0, sizeof v->weight);
    v->expand = true;
    v->expanded = NULL;
    v->t = keep ? ox_runtime(x, X, cdt) : X->expand ? ox_runtime(x, X, X->t->dtype) : X->t;
    if (!v->t) return false;
    v->rank = r;
    memcpy(v->shape, shape, sizeof v->shape);
    v->numel = 1;
    for (int i = 0; i < r; i++)
        if (shape[i] < 1 || mcir_mul_overflows(v->numel, shape[i], &v->numel) ||
            v->numel > ((int64_t)1 << 40))
            return ox_error(x, "expanded shape is empty or too large");
    v->name = NULL;
    return ox_define_out(x, 0, v);
}

/* Window attributes shared by Conv and the pools: kernel, strides, pads
 * (top, left, bottom, right), dilations, with auto_pad and ceil_mode
 * resolved into explicit pads. */
typedef struct window {
    int64_t kernel[2], strides[2], pads[4], dil[2];
} window;

static bool window_attrs(ox *x, int nsp, const int64_t *in_hw, const int64_t *kernel_hw,
                         window *w, bool pool) {
    int64_t buf[8];
    char ap[32];
    int n, off = 2 - nsp; /* a 1-D window is the second dim of a 2-D one */
    const char *auto_pad = ox_attr_str(x, "auto_pad", "NOTSET", ap, sizeof ap);
    w->kernel[0] = w->kernel[1] = 1;
    w->strides[0] = w->strides[1] = 1;
    w->dil[0] = w->dil[1] = 1;
    memset(w->pads, 0, sizeof w->pads);
    if ((n = ox_attr_ints(x, "kernel_shape", buf, 8)) >= 0) {
        if (n != nsp) return ox_error(x, "kernel_shape has %d dims for %d-D data", n, nsp);
        for (int k = 0; k < nsp; k++) {
            if (kernel_hw && buf[k] != kernel_hw[off + k])
                return ox_error(x, "kernel_shape does not match the weight");
            w->kernel[off + k] = buf[k];
        }
    } else if (kernel_hw) {
        w->kernel[0] = kernel_hw[0], w->kernel[1] = kernel_hw[1];
    } else if (!x->failed) {
        return ox_error(x, "missing attribute 'kernel_shape'");
    }
    if ((n = ox_attr_ints(x, "strides", buf, 8)) >= 0) {
        if (n != nsp) return ox_error(x, "strides must have %d values", nsp);
        for (int k = 0; k < nsp; k++) w->strides[off + k] = buf[k];
    }
    if ((n = ox_attr_ints(x, "dilations", buf, 8)) >= 0) {
        if (n != nsp) return ox_error(x, "dilations must have %d values", nsp);
        for (int k = 0; k < nsp; k++) {
            w->dil[off + k] = buf[k];
            if (pool && buf[k] != 1) return ox_error(x, "dilated pooling is not supported");
        }
    }
    if ((n = ox_attr_ints(x, "pads", buf, 8)) >= 0) {
        if (n != 2 * nsp) return ox_error(x, "pads must have %d values", 2 * nsp);
        for (int k = 0; k < nsp; k++) {
            w->pads[off + k] = buf[k];
            w->pads[off + k + 2] = buf[nsp + k];
        }
    }
    if (x->failed) return false;
    for (int k = 0; k < 4; k++)
        if (w->pads[k] < 0 || w->pads[k] > (1 << 30) || (k < 2 && (w->strides[k] > (1 << 30) ||
                                                                  w->dil[k] > (1 << 30) ||
                                                                  w->kernel[k] > (1 << 30))))
            return ox_error(x, "pads, kernel, strides or dilations are negative or too large");
    for (int k = 0; k < 2; k++)
        if (w->strides[k] < 1 || w->dil[k] < 1 || w->kernel[k] < 1)
            return ox_error(x, "kernel, strides and dilations must be >= 1");
    if (strcmp(auto_pad, "NOTSET") != 0) {
        bool valid = !strcmp(auto_pad, "VALID"), upper = !strcmp(auto_pad, "SAME_UPPER");
        if (!valid && !upper && strcmp(auto_pad, "SAME_LOWER") != 0)
            return ox_error(x, "auto_pad \"%s\" is not supported", auto_pad);
        for (int k = 0; k < 2; k++) {
            int64_t total = 0;
            if (!valid) {
                int64_t out = (in_hw[k] + w->strides[k] - 1) / w->strides[k];
                total = (out - 1) * w->strides[k] + (w->kernel[k] - 1) * w->dil[k] + 1 - in_hw[k];
                if (total < 0) total = 0;
            }
            int64_t small = total / 2;
            w->pads[k] = upper ? small : total - small;
            w->pads[k + 2] = total - w->pads[k];
        }
    }
    return true;
}

/* ceil_mode: grow the end pads so that floor division gives the ceil
 * output size (a last window must start inside the input or the begin
 * padding, as ONNX and PyTorch define it). */
static void ceil_pads(window *w, const int64_t *in_hw) {
    for (int k = 0; k < 2; k++) {
        int64_t span = in_hw[k] + w->pads[k] + w->pads[k + 2] - w->kernel[k];
        if (span < 0) continue;
        int64_t out = (span + w->strides[k] - 1) / w->strides[k] + 1;
        if ((out - 1) * w->strides[k] >= in_hw[k] + w->pads[k]) out--;
        int64_t need = (out - 1) * w->strides[k] + w->kernel[k] - (in_hw[k] + w->pads[k] + w->pads[k + 2]);
        if (need > 0) w->pads[k + 2] += need;
    }
}

/* Spatial dims of a window op's input: 2 (NCHW) or 1 (NCL, run as NC1L). */
static bool spatial_dims(ox *x, const ox_value *X, int *nsp, int64_t *in_hw) {
    if (X->rank != 4 && X->rank != 3)
        return ox_error(x, "input '%s' has rank %d; only 1-D (NCL) and 2-D (NCHW) windows "
                           "are supported",
                        X->name, X->rank);
    *nsp = X->rank - 2;
    in_hw[0] = X->rank == 4 ? X->shape[2] : 1;
    in_hw[1] = X->shape[X->rank - 1];
    return true;
}

/* v as rank 4 with a unit dim inserted at 2 (1-D windows). */
static mcir_tensor *as_4d(ox *x, ox_value *v, mcir_dtype dt) {
    mcir_tensor *t = ox_runtime(x, v, dt);
    if (!t || t->rank == 4) return t;
    int64_t shape[4] = {t->shape[0], t->shape[1], 1, t->shape[2]};
    mcir_node *n = ox_emit1(x, MCIR_OP_RESHAPE, 1, &t, -1);
    mcir_node_set_ints(x->g, n, "shape", 4, shape);
    return ox_done(x, n);
}

/* The output of a window op run in 4-D, back to 1-D where the input was. */
static bool define_window_out(ox *x, mcir_tensor *t, int nsp) {
    if (!t) return false;
    if (nsp == 2) return ox_define_rt(x, 0, t);
    int64_t shape[3] = {t->shape[0], t->shape[1], t->shape[3]};
    return ox_reshape_to(x, ox_runtime_value(x, t), 3, shape, 0);
}

static bool h_conv(ox *x, ox_value **in, int n_in) {
    ox_value *X = in[0], *W = in[1];
    int64_t group = ox_attr_int(x, "group", 1), in_hw[2], k_hw[2];
    int nsp = 2;
    if (x->failed || !spatial_dims(x, X, &nsp, in_hw)) return false;
    if (W->rank != X->rank) return ox_error(x, "weight '%s' must have rank %d", W->name, X->rank);
    k_hw[0] = nsp == 2 ? W->shape[2] : 1;
    k_hw[1] = W->shape[W->rank - 1];
    window w;
    if (!window_attrs(x, nsp, in_hw, k_hw, &w, false)) return false;
    mcir_dtype dt = ox_node_dtype(in, n_in);
    mcir_tensor *ins[3] = {as_4d(x, X, dt), as_4d(x, W, dt), NULL};
    if (!ins[0] || !ins[1]) return false;
    int k = 2;
    if (n_in > 2 && in[2] && !(ins[k++] = ox_runtime(x, in[2], dt))) return false;
    mcir_node *n = ox_emit1(x, MCIR_OP_CONV2D, k, ins, nsp == 2 ? 0 : -1);
    mcir_node_set_ints(x->g, n, "strides", 2, w.strides);
    mcir_node_set_ints(x->g, n, "pads", 4, w.pads);
    mcir_node_set_ints(x->g, n, "dilations", 2, w.dil);
    mcir_node_set_int(x->g, n, "groups", group);
    return define_window_out(x, ox_done(x, n), nsp);
}

/* count_include_pad=1: MCIR's avg_pool2d divides by the cells inside the
 * input; the ONNX divisor also counts the explicit padding. The ratio is a
 * constant per output position, applied by a mul. */
static ox_value *include_pad_ratio(ox *x, const window *w, const window *orig,
                                   const int64_t *in_hw, const int64_t *out_hw,
                                   mcir_dtype dt) {
    int64_t shape[4] = {1, 1, out_hw[0], out_hw[1]};
    ox_value *r = ox_new_float_const(x, "avg_pool_include_pad", dt, 4, shape);
    if (!r) return NULL;
    for (int64_t i = 0; i < out_hw[0]; i++)
        for (int64_t j = 0; j < out_hw[1]; j++) {
            double ratio = 1;
            for (int k = 0; k < 2; k++) {
                int64_t o = k ? j : i, lo = o * w->strides[k] - w->pads[k];
                int64_t valid = 0, counted = 0;
                for (int64_t p = lo; p < lo + w->kernel[k]; p++) {
                    valid += p >= 0 && p < in_hw[k];
                    counted += p >= -orig->pads[k] && p < in_hw[k] + orig->pads[k + 2];
                }
                ratio *= (double)valid / (double)(counted ? counted : 1);
            }
            r->fv[i * out_hw[1] + j] = (float)ratio;
        }
    return r;
}

static bool h_pool(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    bool is_max = !strcmp(x->node->op_type, "MaxPool");
    ox_value *X = in[0];
    int64_t ceil_mode = ox_attr_int(x, "ceil_mode", 0), in_hw[2];
    int64_t storage = is_max ? ox_attr_int(x, "storage_order", 0) : 0;
    int64_t include_pad = is_max ? 0 : ox_attr_int(x, "count_include_pad", 0);
    int nsp = 2;
    if (x->failed || !spatial_dims(x, X, &nsp, in_hw) || !ox_only_first_output(x)) return false;
    window w;
    if (!window_attrs(x, nsp, in_hw, NULL, &w, true)) return false;
    if (storage) return ox_error(x, "storage_order 1 is not supported");
    window orig = w;
    if (ceil_mode) ceil_pads(&w, in_hw);
    mcir_dtype dt = ox_node_dtype(in, 1);
    mcir_tensor *t = as_4d(x, X, dt);
    if (!t) return false;
    bool scale = include_pad && memcmp(orig.pads, (int64_t[4]){0, 0, 0, 0}, sizeof orig.pads);
    mcir_node *n = ox_emit1(x, is_max ? MCIR_OP_MAX_POOL2D : MCIR_OP_AVG_POOL2D, 1, &t,
                            nsp == 2 && !scale ? 0 : -1);
    mcir_node_set_ints(x->g, n, "kernel", 2, w.kernel);
    mcir_node_set_ints(x->g, n, "strides", 2, w.strides);
    mcir_node_set_ints(x->g, n, "pads", 4, w.pads);
    mcir_tensor *y = ox_done(x, n);
    if (y && scale) {
        ox_value *r = include_pad_ratio(x, &w, &orig, in_hw, y->shape + 2, dt);
        if (!r) return false;
        mcir_tensor *ins[2] = {y, ox_runtime(x, r, dt)};
        y = ox_done(x, ox_emit1(x, MCIR_OP_MUL, 2, ins, nsp == 2 ? 0 : -1));
    }
    return define_window_out(x, y, nsp);
}

static bool h_global_avg_pool(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    if (in[0]->rank != 4)
        return ox_error(x, "input '%s' has rank %d; only NCHW (rank 4) is supported",
                        in[0]->name, in[0]->rank);
    mcir_tensor *t = ox_runtime(x, in[0], ox_node_dtype(in, 1));
    if (!t) return false;
    return ox_define_rt(x, 0, ox_done(x, ox_emit1(x, MCIR_OP_GLOBAL_AVG_POOL, 1, &t, 0)));
}

/* ------------------------------------------ decomposed ops (docs/onnx.md)
 *
 * Clip, HardSigmoid, HardSwish, LogSoftmax, BatchNormalization, the
 * reductions beyond sum/mean/max, Pad, Resize and ConvTranspose are written
 * out as existing MCIR ops where that is exact (or, for the interpolation
 * matrices of Resize and the zero insertion of ConvTranspose, a matmul by a
 * constant whose rows hold the ONNX taps): every backend already runs
 * them. Each step folds at import time when all its operands are constants.
 */

/* A scalar constant of element type elem (the type of the tensor it is
 * combined with). */
static ox_value *scalar_of(ox *x, int elem, const char *stem, double val) {
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
static ox_value *ew_step(ox *x, const char *op, ox_value *a, ox_value *b, int out_index) {
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
    int mop = -1;
    for (size_t i = 0; i < sizeof ew_map / sizeof ew_map[0]; i++)
        if (!strcmp(ew_map[i].op, op)) mop = ew_map[i].mop;
    MCIR_ASSERT(mop >= 0);
    mcir_dtype dt = ox_node_dtype(in, n);
    mcir_tensor *ts[2] = {ox_operand(x, a, dt, b ? &b : NULL, b ? 1 : 0), NULL};
    if (!ts[0]) return NULL;
    if (b && !(ts[1] = ox_operand(x, b, dt, &a, 1))) return NULL;
    mcir_tensor *t = ox_done(x, ox_emit1(x, (mcir_op)mop, n, ts, out_index));
    return t ? ox_runtime_value(x, t) : NULL;
}

/* A reduction of runtime (or materialised constant) v over axes. */
static ox_value *reduce_step(ox *x, mcir_op mop, ox_value *v, int n_axes, const int64_t *axes,
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
static ox_value *reshape_step(ox *x, ox_value *v, int rank, const int64_t *shape) {
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
static ox_value *slice_step(ox *x, ox_value *v, int ax, int64_t first, int64_t len,
                            int64_t step) {
    if (v->is_const) return ox_fold_slice(x, v, ax, first, step, len);
    if (first == 0 && step == 1 && len == v->shape[ax]) return v;
    mcir_tensor *t = ox_runtime(x, v, v->t->dtype);
    t = t ? slice_rt(x, t, ax, first, len, step, -1) : NULL;
    return t ? ox_runtime_value(x, t) : NULL;
}

/* Concat along ax (folded when every piece is constant). */
static ox_value *concat_step(ox *x, ox_value **pieces, int n, int ax, int out_index) {
    if (n == 1) return pieces[0];
    if (ox_all_const(pieces, n)) return ox_fold_concat(x, pieces, n, ax);
    mcir_dtype dt = ox_node_dtype(pieces, n);
    mcir_tensor *ts[256];
    MCIR_ASSERT(n <= 256);
    for (int i = 0; i < n; i++)
        if (!(ts[i] = ox_runtime(x, pieces[i], dt))) return NULL;
    mcir_node *nd = ox_emit1(x, MCIR_OP_CONCAT, n, ts, out_index);
    mcir_node_set_int(x->g, nd, "axis", ax);
    mcir_tensor *t = ox_done(x, nd);
    return t ? ox_runtime_value(x, t) : NULL;
}

static bool h_clip(ox *x, ox_value **in, int n_in) {
    ox_value *X = in[0], *lo = NULL, *hi = NULL;
    if (x->opset < 11) {
        float mn = ox_attr_float(x, "min", -FLT_MAX), mx = ox_attr_float(x, "max", FLT_MAX);
        if (x->failed) return false;
        if (mn > -FLT_MAX && !(lo = scalar_of(x, X->elem, "clip_min", mn))) return false;
        if (mx < FLT_MAX && !(hi = scalar_of(x, X->elem, "clip_max", mx))) return false;
    } else {
        lo = n_in > 1 ? in[1] : NULL;
        hi = n_in > 2 ? in[2] : NULL;
        for (int i = 1; i < n_in; i++)
            if (in[i] && in[i]->rank != 0 && in[i]->numel != 1)
                return ox_error(x, "min and max must be scalars");
    }
    ox_value *y = X;
    if (lo && !(y = ew_step(x, "Max", y, lo, hi ? -1 : 0))) return false;
    if (hi && !(y = ew_step(x, "Min", y, hi, 0))) return false;
    return ox_define_out(x, 0, y);
}

/* max(0, min(1, alpha·x + beta)), times x for HardSwish. */
static bool h_hard_sigmoid(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    bool swish = !strcmp(x->node->op_type, "HardSwish");
    float alpha = swish ? 1.0f / 6 : ox_attr_float(x, "alpha", 0.2f);
    float beta = swish ? 0.5f : ox_attr_float(x, "beta", 0.5f);
    if (x->failed) return false;
    ox_value *X = in[0];
    ox_value *y = ew_step(x, "Mul", X, scalar_of(x, X->elem, "hard_sigmoid_alpha", alpha), -1);
    y = ew_step(x, "Add", y, scalar_of(x, X->elem, "hard_sigmoid_beta", beta), -1);
    y = ew_step(x, "Min", y, scalar_of(x, X->elem, "one", 1.0), -1);
    y = ew_step(x, "Max", y, scalar_of(x, X->elem, "zero", 0.0), swish ? -1 : 0);
    if (swish) y = ew_step(x, "Mul", X, y, 0);
    return y && ox_define_out(x, 0, y);
}

/* x - max - log(sum(exp(x - max))) over the axis (opset < 13: the axes
 * from `axis` on, the input flattened to 2-D there). */
static bool h_log_softmax(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    int64_t axis = ox_attr_int(x, "axis", x->opset >= 13 ? -1 : 1);
    int ax;
    ox_value *X = in[0];
    if (x->failed || !ox_norm_axis(x, axis, X->rank, "axis", &ax)) return false;
    int64_t axes[MCIR_MAX_RANK];
    int n_axes = 0;
    for (int k = ax; k < (x->opset >= 13 ? ax + 1 : X->rank); k++) axes[n_axes++] = k;
    ox_value *m = reduce_step(x, MCIR_OP_REDUCE_MAX, X, n_axes, axes, true, -1);
    ox_value *d = ew_step(x, "Sub", X, m, -1);
    ox_value *s = reduce_step(x, MCIR_OP_REDUCE_SUM, ew_step(x, "Exp", d, NULL, -1), n_axes,
                              axes, true, -1);
    ox_value *y = ew_step(x, "Sub", d, ew_step(x, "Log", s, NULL, -1), 0);
    return y && ox_define_out(x, 0, y);
}

/* Inference batch norm over axis 1: a per-channel affine y = x·s + t, with
 * s = scale / sqrt(var + eps) and t = B - mean·s folded at import time when
 * the parameters are constants (the catalog's conv_affine_fold then folds
 * it into a preceding conv); runtime parameters compute
 * (x - mean) / sqrt(var + eps) · scale + B. */
static bool h_batchnorm(ox *x, ox_value **in, int n_in) {
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
        ox_value *y = ew_step(x, "Add", ew_step(x, "Mul", X, s, -1), t, 0);
        return y && ox_define_out(x, 0, y);
    }
    ox_value *p[5];
    for (int i = 1; i < 5; i++)
        if (!(p[i] = reshape_step(x, in[i], prank, pshape))) return false;
    ox_value *sd = ew_step(x, "Sqrt", ew_step(x, "Add", p[4], scalar_of(x, elem, "bn_eps", eps), -1),
                           NULL, -1);
    ox_value *y = ew_step(x, "Div", ew_step(x, "Sub", X, p[3], -1), sd, -1);
    y = ew_step(x, "Add", ew_step(x, "Mul", y, p[1], -1), p[2], 0);
    return y && ox_define_out(x, 0, y);
}

/* Pad: per axis, a crop (negative pads) then a concat of the border pieces
 * — constant blocks, mirrored slices (reflect), repeated edge slices (edge)
 * or the opposite end (wrap) — with the tensor. */
static bool h_pad(ox *x, ox_value **in, int n_in) {
    char mbuf[16];
    const char *mode = ox_attr_str(x, "mode", "constant", mbuf, sizeof mbuf);
    ox_value *X = in[0];
    int64_t pads[2 * MCIR_MAX_RANK], axes[MCIR_MAX_RANK];
    int np = 0, na = -1;
    double value = 0;
    if (x->opset < 11) {
        np = ox_attr_ints(x, "pads", pads, 2 * MCIR_MAX_RANK);
        value = ox_attr_float(x, "value", 0.0f);
        if (x->failed) return false;
        if (np < 0) return ox_error(x, "missing attribute 'pads'");
    } else {
        if (n_in < 2 || !in[1]) return ox_error(x, "pads is required");
        if (!ox_ints_of(x, in[1], "pads", pads, &np, 2 * MCIR_MAX_RANK)) return false;
        if (n_in > 2 && in[2]) {
            if (!in[2]->is_const || in[2]->numel != 1)
                return ox_error(x, "constant_value '%s' must be a scalar constant", in[2]->name);
            value = ox_get(in[2], 0);
        }
        if (n_in > 3 && in[3] && !ox_ints_of(x, in[3], "axes", axes, &na, MCIR_MAX_RANK))
            return false;
    }
    if (x->failed) return false;
    int n_ax = na >= 0 ? na : X->rank;
    if (np != 2 * n_ax)
        return ox_error(x, "pads has %d values for %d axes", np, n_ax);
    int kind = !strcmp(mode, "constant") ? 0 : !strcmp(mode, "reflect") ? 1
               : !strcmp(mode, "edge") ? 2 : !strcmp(mode, "wrap") ? 3 : -1;
    if (kind < 0) return ox_error(x, "mode \"%s\" is not supported", mode);
    int64_t begin[MCIR_MAX_RANK] = {0}, end[MCIR_MAX_RANK] = {0};
    for (int i = 0; i < n_ax; i++) {
        int a;
        if (!ox_norm_axis(x, na >= 0 ? axes[i] : i, X->rank, "axis", &a)) return false;
        begin[a] = pads[i], end[a] = pads[n_ax + i];
    }
    ox_value *v = X;
    int last = -1;
    for (int a = 0; a < X->rank; a++)
        if (begin[a] || end[a]) last = a;
    if (last < 0) return ox_define_out(x, 0, X);
    for (int a = 0; a <= last; a++) {
        int64_t b = begin[a], e = end[a], dim = v->shape[a];
        if (b < 0 || e < 0) {
            int64_t cb = b < 0 ? -b : 0, ce = e < 0 ? -e : 0;
            if (cb + ce >= dim) return ox_error(x, "pads crop axis %d to nothing", a);
            if (!(v = slice_step(x, v, a, cb, dim - cb - ce, 1))) return false;
            dim -= cb + ce;
            b = b < 0 ? 0 : b, e = e < 0 ? 0 : e;
        }
        if (!b && !e) continue;
        if (b > (1 << 20) || e > (1 << 20)) return ox_error(x, "pads are too large");
        if ((kind == 1 && (b >= dim || e >= dim)) || (kind == 3 && (b > dim || e > dim)))
            return ox_error(x, "%s pads of %lld and %lld are larger than axis %d (%lld)", mode,
                            (long long)b, (long long)e, a, (long long)dim);
        ox_value *pieces[256];
        int n = 0;
        for (int side = 0; side < 2; side++) {
            int64_t w = side ? e : b;
            if (!w) {
                if (!side) pieces[n++] = v;
                continue;
            }
            if (kind == 0) {
                int64_t shape[MCIR_MAX_RANK];
                memcpy(shape, v->shape, sizeof shape);
                shape[a] = w;
                int elem = v->is_const ? v->elem : ox_dtype_elem(v->t->dtype);
                ox_value *c = ox_const_new(x, elem, v->rank, shape);
                if (!c) return false;
                for (int64_t i = 0; i < c->numel; i++) ox_set(c, i, value);
                c->name = ox_fresh(x, "pad_value");
                pieces[n++] = c;
            } else if (kind == 1) {
                pieces[n++] = slice_step(x, v, a, side ? dim - 2 : w, w, -1);
            } else if (kind == 3) {
                pieces[n++] = slice_step(x, v, a, side ? 0 : dim - w, w, 1);
            } else {
                if (w > 200) return ox_error(x, "edge pads wider than 200 are not supported");
                ox_value *edge = slice_step(x, v, a, side ? dim - 1 : 0, 1, 1);
                for (int64_t i = 0; i < w; i++) pieces[n++] = edge;
            }
            if (!pieces[n - 1]) return false;
            if (!side) pieces[n++] = v;
        }
        if (!(v = concat_step(x, pieces, n, a, a == last ? 0 : -1))) return false;
    }
    return ox_define_out(x, 0, v);
}

/* Multiplies axis ax of v by the constant matrix A [out, in] (row o holds
 * the weights of the input positions that output position o reads): a
 * matmul on the last two axes, a transpose around it for the others. */
static ox_value *axis_matrix(ox *x, ox_value *v, int ax, const double *A, int64_t out,
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

static bool is_identity_matrix(const double *A, int64_t out, int64_t in_len) {
    if (out != in_len) return false;
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in_len; i++)
            if (A[o * in_len + i] != (o == i)) return false;
    return true;
}

enum { RS_NEAREST, RS_LINEAR, RS_CUBIC };
enum { CT_HALF_PIXEL, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC,
       CT_HALF_PIXEL_SYMMETRIC };
enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL };

typedef struct resize_mode {
    int mode, ct, nearest;
    double cubic_a;
    bool exclude_outside, antialias;
} resize_mode;

#define RS_MAX_TAPS 64

/* The interpolation matrix [out, in] of one axis, as ONNX's reference
 * computes it (onnx/reference/ops/op_resize.py: the source coordinate, the
 * n taps nearest to it in the edge-padded input, their coefficients). */
static bool resize_matrix(const resize_mode *rm, double scale, int64_t in_len, int64_t out,
                          double *A) {
    /* antialias (downsampling): a kernel stretched by 1/scale, normalised */
    double s_aa = scale > 1 ? 1 : scale;
    int64_t start = rm->mode == RS_CUBIC ? -1 : 0;
    if (rm->antialias) start = (int64_t)floor((rm->mode == RS_CUBIC ? -2 : -1) / s_aa) + 1;
    if (2 - 2 * start > RS_MAX_TAPS) return false;
    int n = (int)(2 - 2 * start), pad = (n + 1) / 2;
    int64_t padded = in_len + 2 * pad;
    double out_w = scale * (double)in_len;
    memset(A, 0, sizeof(double) * (size_t)(out * in_len));
    for (int64_t o = 0; o < out; o++) {
        double xr = (double)o, xo;
        switch (rm->ct) {
        case CT_ALIGN_CORNERS: xo = out_w == 1 ? 0 : xr * (double)(in_len - 1) / (out_w - 1); break;
        case CT_ASYMMETRIC: xo = xr / scale; break;
        case CT_HALF_PIXEL_SYMMETRIC: {
            double center = (double)in_len / 2, adjust = (double)out / out_w;
            xo = center * (1 - adjust) + (xr + 0.5) / scale - 0.5;
            break;
        }
        case CT_PYTORCH_HALF_PIXEL: xo = out_w == 1 ? -0.5 : (xr + 0.5) / scale - 0.5; break;
        default: xo = (xr + 0.5) / scale - 0.5; break;
        }
        double ratio = xo == floor(xo) ? 1.0 : xo - floor(xo), c[RS_MAX_TAPS];
        if (rm->antialias) {
            double a = rm->cubic_a, sum = 0;
            for (int i = 0; i < n; i++) {
                double t = fabs(s_aa * ((double)(start + i) - ratio));
                if (rm->mode == RS_LINEAR) c[i] = t < 1 ? 1 - t : 0;
                else c[i] = t <= 1 ? ((a + 2) * t - (a + 3)) * t * t + 1
                          : t < 2 ? ((a * t - 5 * a) * t + 8 * a) * t - 4 * a : 0;
                sum += c[i];
            }
            for (int i = 0; i < n; i++) c[i] /= sum;
        } else if (rm->mode == RS_NEAREST) {
            bool right = ratio == 1.0;
            if (!right) switch (rm->nearest) {
                case NM_ROUND_PREFER_CEIL: right = ratio >= 0.5; break;
                case NM_FLOOR: right = false; break;
                case NM_CEIL: right = true; break;
                default: right = ratio > 0.5; break;
                }
            c[0] = !right, c[1] = right;
        } else if (rm->mode == RS_LINEAR) {
            c[0] = 1 - ratio, c[1] = ratio;
        } else {
            double a = rm->cubic_a, r = ratio, s = 1 - ratio;
            c[0] = ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a;
            c[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
            c[2] = ((a + 2) * s - (a + 3)) * s * s + 1;
            c[3] = ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a;
        }
        /* the n padded positions nearest to xo + pad (ties: the lower) */
        double xp = xo + pad;
        int64_t idx[RS_MAX_TAPS];
        int k = 0;
        for (int64_t p = 0; p < padded; p++) {
            double dp = fabs(xp - (double)p);
            int j = k < n ? k++ : n;
            if (j == n) {
                if (dp >= fabs(xp - (double)idx[n - 1])) continue;
                j = n - 1;
            }
            while (j > 0 && fabs(xp - (double)idx[j - 1]) > dp) idx[j] = idx[j - 1], j--;
            idx[j] = p;
        }
        for (int i = 1; i < n; i++) /* ascending positions */
            for (int j = i; j > 0 && idx[j - 1] > idx[j]; j--) {
                int64_t tmp = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = tmp;
            }
        double sum = 0;
        for (int i = 0; i < n; i++) {
            int64_t src = idx[i] - pad;
            if (rm->exclude_outside && (src < 0 || src >= in_len)) c[i] = 0;
            sum += c[i];
        }
        for (int i = 0; i < n; i++) {
            int64_t src = idx[i] - pad;
            src = src < 0 ? 0 : src >= in_len ? in_len - 1 : src;
            A[o * in_len + src] += rm->exclude_outside && sum != 0 ? c[i] / sum : c[i];
        }
    }
    return true;
}

static int pick(const char *s, const char *const *names) {
    for (int i = 0; names[i]; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

/* Resize (opset >= 10) and Upsample: separable; each axis whose matrix is
 * not the identity is one matmul by its interpolation matrix. */
static bool h_resize(ox *x, ox_value **in, int n_in) {
    static const char *const modes[] = {"nearest", "linear", "cubic", NULL};
    static const char *const cts[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                      "asymmetric", "half_pixel_symmetric", NULL};
    static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                      "ceil", NULL};
    bool old = x->opset < 11 || !strcmp(x->node->op_type, "Upsample");
    char b1[32], b2[32], b3[32], b4[32];
    resize_mode rm = {0};
    rm.mode = pick(ox_attr_str(x, "mode", "nearest", b1, sizeof b1), modes);
    const char *ct = old ? "asymmetric" : ox_attr_str(x, "coordinate_transformation_mode",
                                                      "half_pixel", b2, sizeof b2);
    rm.ct = pick(ct, cts);
    rm.nearest = old ? NM_FLOOR : pick(ox_attr_str(x, "nearest_mode", "round_prefer_floor", b3,
                                                   sizeof b3), nms);
    rm.cubic_a = old ? -0.75 : ox_attr_float(x, "cubic_coeff_a", -0.75f);
    rm.exclude_outside = old ? false : ox_attr_int(x, "exclude_outside", 0) != 0;
    if (!old) ox_attr_float(x, "extrapolation_value", 0.0f); /* tf_crop_and_resize only */
    rm.antialias = x->opset >= 18 && ox_attr_int(x, "antialias", 0) != 0;
    const char *policy = x->opset >= 18 ? ox_attr_str(x, "keep_aspect_ratio_policy", "stretch",
                                                    b4, sizeof b4) : "stretch";
    int64_t axes[MCIR_MAX_RANK];
    int na = x->opset >= 18 ? ox_attr_ints(x, "axes", axes, MCIR_MAX_RANK) : -1;
    if (x->failed) return false;
    if (rm.mode < 0) return ox_error(x, "mode \"%s\" is not supported", b1);
    if (rm.ct < 0) return ox_error(x, "coordinate_transformation_mode \"%s\" is not supported", ct);
    if (rm.nearest < 0) return ox_error(x, "nearest_mode \"%s\" is not supported", b3);
    if (rm.antialias && rm.mode == RS_NEAREST)
        return ox_error(x, "antialias 1 is not supported with mode \"nearest\"");
    int keep_ratio = !strcmp(policy, "not_larger") ? 1 : !strcmp(policy, "not_smaller") ? 2 : 0;
    if (!keep_ratio && strcmp(policy, "stretch") != 0)
        return ox_error(x, "keep_aspect_ratio_policy \"%s\" is not supported", policy);
    ox_value *X = in[0], *scales = NULL, *sizes = NULL;
    if (old) scales = n_in > 1 ? in[1] : NULL;
    else scales = n_in > 2 ? in[2] : NULL, sizes = n_in > 3 ? in[3] : NULL;
    if (scales && scales->numel == 0) scales = NULL;
    if (sizes && sizes->numel == 0) sizes = NULL;
    if (!scales == !sizes) return ox_error(x, "exactly one of scales and sizes must be given");
    ox_value *given = scales ? scales : sizes;
    if (!given->is_const) return ox_error(x, "scales and sizes must be constants");
    int n_ax = na >= 0 ? na : X->rank;
    if (given->numel != n_ax)
        return ox_error(x, "%s has %lld values for %d axes", scales ? "scales" : "sizes",
                        (long long)given->numel, n_ax);
    double sc[MCIR_MAX_RANK];
    int64_t out[MCIR_MAX_RANK];
    for (int k = 0; k < X->rank; k++) sc[k] = 1, out[k] = X->shape[k];
    for (int i = 0; i < n_ax; i++) {
        int a;
        if (!ox_norm_axis(x, na >= 0 ? axes[i] : i, X->rank, "axis", &a)) return false;
        if (scales) {
            sc[a] = ox_get(scales, i);
            if (!(sc[a] > 0) || sc[a] > 1e6) return ox_error(x, "scale %g is not supported", sc[a]);
            out[a] = (int64_t)(sc[a] * (double)X->shape[a]);
        } else {
            out[a] = ox_geti(sizes, i);
            if (out[a] < 1 || out[a] > (1 << 24))
                return ox_error(x, "size %lld is not supported", (long long)out[a]);
            sc[a] = (double)out[a] / (double)X->shape[a];
        }
        if (out[a] < 1) return ox_error(x, "axis %d would have size 0", a);
    }
    if (sizes && keep_ratio) { /* one scale for the given axes: the smallest or largest */
        double keep = keep_ratio == 1 ? INFINITY : 0;
        int ax_of[MCIR_MAX_RANK];
        for (int i = 0; i < n_ax; i++) {
            ox_norm_axis(x, na >= 0 ? axes[i] : i, X->rank, "axis", &ax_of[i]);
            double s = sc[ax_of[i]];
            keep = keep_ratio == 1 ? (s < keep ? s : keep) : (s > keep ? s : keep);
        }
        for (int i = 0; i < n_ax; i++) {
            sc[ax_of[i]] = keep;
            out[ax_of[i]] = (int64_t)(keep * (double)X->shape[ax_of[i]] + 0.5);
            if (out[ax_of[i]] < 1) return ox_error(x, "axis %d would have size 0", ax_of[i]);
        }
    }
    ox_value *v = X;
    int lastax = -1;
    double *mats[MCIR_MAX_RANK] = {0};
    for (int a = 0; a < X->rank; a++) {
        if (out[a] * X->shape[a] > ((int64_t)1 << 24))
            return ox_error(x, "axis %d is too large for an interpolation matrix", a);
        mats[a] = mcir_arena_alloc(x->a, sizeof(double) * (size_t)(out[a] * X->shape[a]));
        if (!resize_matrix(&rm, sc[a], X->shape[a], out[a], mats[a]))
            return ox_error(x, "antialias over axis %d (scale %g) needs more than %d taps", a,
                            sc[a], RS_MAX_TAPS);
        if (!is_identity_matrix(mats[a], out[a], X->shape[a])) lastax = a;
    }
    if (lastax < 0) return ox_define_out(x, 0, X);
    for (int a = 0; a <= lastax; a++)
        if (!is_identity_matrix(mats[a], out[a], X->shape[a]) &&
            !(v = axis_matrix(x, v, a, mats[a], out[a], X->shape[a], "resize_weights",
                              a == lastax ? 0 : -1)))
            return false;
    return ox_define_out(x, 0, v);
}

/* ConvTranspose (2-D, and 1-D as 2-D): the input, with stride-1 zeros
 * inserted and padded by d·(k-1) - pads (negative: cropped) plus
 * output_padding, is one matmul per spatial axis by a constant 0/1
 * matrix; a stride-1 conv2d with the flipped, transposed kernel follows. */
static bool h_conv_transpose(ox *x, ox_value **in, int n_in) {
    ox_value *X = in[0], *W = in[1];
    char apb[32];
    const char *auto_pad = ox_attr_str(x, "auto_pad", "NOTSET", apb, sizeof apb);
    int64_t group = ox_attr_int(x, "group", 1), buf[8], in_hw[2];
    int64_t kernel[2], strides[2] = {1, 1}, dil[2] = {1, 1}, pads[4] = {0}, opad[2] = {0},
            oshape[2];
    int nsp = 2, n;
    bool has_oshape = false;
    if (x->failed || !spatial_dims(x, X, &nsp, in_hw)) return false;
    int off = 2 - nsp;
    if (W->rank != X->rank) return ox_error(x, "weight '%s' must have rank %d", W->name, X->rank);
    if (!W->is_const) return ox_error(x, "weight '%s' must be a constant", W->name);
    kernel[0] = nsp == 2 ? W->shape[2] : 1, kernel[1] = W->shape[W->rank - 1];
#define CT_ATTR(nm, dst, cnt)                                                              \
    if ((n = ox_attr_ints(x, nm, buf, 8)) >= 0) {                                        \
        if (n != (cnt) * nsp) return ox_error(x, nm " must have %d values", (cnt) * nsp); \
        for (int k = 0; k < n; k++) dst[(k / nsp) * 2 + off + k % nsp] = buf[k];         \
    }
    CT_ATTR("kernel_shape", kernel, 1)
    CT_ATTR("strides", strides, 1)
    CT_ATTR("dilations", dil, 1)
    CT_ATTR("pads", pads, 2)
    CT_ATTR("output_padding", opad, 1)
    if ((n = ox_attr_ints(x, "output_shape", buf, 8)) >= 0) {
        if (n != nsp) return ox_error(x, "output_shape must have %d values", nsp);
        oshape[0] = 1;
        for (int k = 0; k < n; k++) oshape[off + k] = buf[k];
        has_oshape = true;
    }
#undef CT_ATTR
    if (x->failed) return false;
    int64_t Cin = X->shape[1], Cout_g = W->shape[1];
    if (group < 1 || Cin % group || W->shape[0] != Cin)
        return ox_error(x, "group %lld does not divide the %lld input channels of weight '%s'",
                        (long long)group, (long long)Cin, W->name);
    if (kernel[0] != (nsp == 2 ? W->shape[2] : 1) || kernel[1] != W->shape[W->rank - 1])
        return ox_error(x, "kernel_shape does not match the weight");
    bool same = !strcmp(auto_pad, "SAME_UPPER") || !strcmp(auto_pad, "SAME_LOWER");
    if (!same && strcmp(auto_pad, "NOTSET") && strcmp(auto_pad, "VALID"))
        return ox_error(x, "auto_pad \"%s\" is not supported", auto_pad);
    for (int k = 0; k < 2; k++) {
        if (strides[k] < 1 || dil[k] < 1 || strides[k] > 4096 || dil[k] > 4096 ||
            opad[k] < 0 || opad[k] >= (strides[k] > dil[k] ? strides[k] : dil[k]) ||
            pads[k] < 0 || pads[k + 2] < 0 || pads[k] > 4096 || pads[k + 2] > 4096)
            return ox_error(x, "strides, dilations, pads or output_padding are out of range");
        if (has_oshape || same) {
            int64_t want = has_oshape ? oshape[k] : in_hw[k] * strides[k];
            int64_t total = strides[k] * (in_hw[k] - 1) + opad[k] +
                            (kernel[k] - 1) * dil[k] + 1 - want;
            bool upper = !strcmp(auto_pad, "SAME_UPPER");
            int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2); /* floor */
            pads[k] = upper ? half : total - half;
            pads[k + 2] = total - pads[k];
        }
    }
    if (!strcmp(auto_pad, "VALID")) memset(pads, 0, sizeof pads);
    mcir_dtype dt = ox_node_dtype(in, n_in);
    ox_value *v = X;
    if (nsp == 1) {
        int64_t s4[4] = {X->shape[0], X->shape[1], 1, X->shape[2]};
        if (!(v = reshape_step(x, X, 4, s4))) return false;
    }
    for (int k = 0; k < 2; k++) {
        int64_t lo = dil[k] * (kernel[k] - 1) - pads[k];
        int64_t hi = dil[k] * (kernel[k] - 1) - pads[k + 2] + opad[k];
        int64_t len = (in_hw[k] - 1) * strides[k] + 1 + lo + hi;
        if (len - dil[k] * (kernel[k] - 1) < 1)
            return ox_error(x, "the output would be empty on spatial axis %d", k);
        if (len * in_hw[k] > ((int64_t)1 << 24))
            return ox_error(x, "spatial axis %d is too large", k);
        double *A = mcir_arena_alloc(x->a, sizeof(double) * (size_t)(len * in_hw[k]));
        memset(A, 0, sizeof(double) * (size_t)(len * in_hw[k]));
        for (int64_t i = 0; i < in_hw[k]; i++) {
            int64_t r = i * strides[k] + lo;
            if (r >= 0 && r < len) A[r * in_hw[k] + i] = 1;
        }
        if (!is_identity_matrix(A, len, in_hw[k]) &&
            !(v = axis_matrix(x, v, 2 + k, A, len, in_hw[k], "conv_transpose_scatter", -1)))
            return false;
    }
    /* W [Cin, Cout/g, kh, kw] -> W' [g·Cout/g, Cin/g, kh, kw], flipped */
    int64_t Cin_g = Cin / group, kh = kernel[0], kw = kernel[1];
    int64_t wshape[4] = {Cout_g * group, Cin_g, kh, kw};
    ox_value *w2 = ox_const_new(x, ox_dtype_elem(dt), 4, wshape);
    if (!w2) return false;
    for (int64_t g = 0; g < group; g++)
        for (int64_t o = 0; o < Cout_g; o++)
            for (int64_t i = 0; i < Cin_g; i++)
                for (int64_t a = 0; a < kh; a++)
                    for (int64_t b = 0; b < kw; b++)
                        ox_set(w2, (((g * Cout_g + o) * Cin_g + i) * kh + a) * kw + b,
                               ox_get(W, (((g * Cin_g + i) * Cout_g + o) * kh + (kh - 1 - a)) * kw +
                                             (kw - 1 - b)));
    w2->name = ox_fresh(x, mcir_arena_printf(x->a, "%s_transposed", W->name));
    mcir_tensor *ins[3] = {ox_runtime(x, v, dt), ox_runtime(x, w2, dt), NULL};
    if (!ins[0] || !ins[1]) return false;
    int k = 2;
    if (n_in > 2 && in[2] && !(ins[k++] = ox_runtime(x, in[2], dt))) return false;
    mcir_node *nd = ox_emit1(x, MCIR_OP_CONV2D, k, ins, nsp == 2 ? 0 : -1);
    mcir_node_set_ints(x->g, nd, "dilations", 2, dil);
    if (group != 1) mcir_node_set_int(x->g, nd, "groups", group);
    return define_window_out(x, ox_done(x, nd), nsp);
}

/* ScatterND with constant indices. Constants fold (every reduction). A
 * runtime `data` keeps its elements through a 0/1 mask and takes the
 * updates from a constant with zeros elsewhere (constant updates) or from
 * a matmul of a one-hot placement matrix with the updates (runtime
 * updates): data·mask + scattered, exact. */
static bool h_scatter_nd(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    char rbuf[16];
    const char *red = x->opset >= 16 ? ox_attr_str(x, "reduction", "none", rbuf, sizeof rbuf) : "none";
    if (x->failed) return false;
    ox_value *D = in[0], *I = in[1], *U = in[2];
    if (!I->is_const || ox_is_float(I->elem))
        return ox_error(x, "indices '%s' must be integer constants known at import time", I->name);
    if (I->rank < 1) return ox_error(x, "indices '%s' must have rank >= 1", I->name);
    int q = (int)I->shape[I->rank - 1];
    if (q < 1 || q > D->rank) return ox_error(x, "indices' last dim %d is out of range", q);
    int64_t n_idx = I->numel / q, slice = 1, prefix = 1;
    for (int k = q; k < D->rank; k++) slice *= D->shape[k];
    for (int k = 0; k < q; k++) prefix *= D->shape[k];
    if (U->numel != n_idx * slice)
        return ox_error(x, "updates '%s' has %lld elements, indices and data need %lld", U->name,
                        (long long)U->numel, (long long)(n_idx * slice));
    int64_t *pos = mcir_arena_alloc(x->a, sizeof(int64_t) * (size_t)(n_idx ? n_idx : 1));
    for (int64_t i = 0; i < n_idx; i++) {
        int64_t p = 0;
        for (int k = 0; k < q; k++) {
            int64_t t = I->iv[i * q + k], dim = D->shape[k];
            if (t < -dim || t >= dim)
                return ox_error(x, "index %lld is out of range for axis %d of size %lld",
                                (long long)t, k, (long long)dim);
            p = p * dim + (t < 0 ? t + dim : t);
        }
        pos[i] = p;
    }
    int rk = !strcmp(red, "none") ? 0 : !strcmp(red, "add") ? 1 : !strcmp(red, "mul") ? 2
             : !strcmp(red, "max") ? 3 : !strcmp(red, "min") ? 4 : -1;
    if (rk < 0) return ox_error(x, "reduction \"%s\" is not supported", red);
    if (D->is_const && U->is_const) {
        ox_value *o = ox_const_new(x, D->elem, D->rank, D->shape);
        if (!o) return false;
        for (int64_t i = 0; i < D->numel; i++) ox_copy_elem(o, i, D, i);
        for (int64_t i = 0; i < n_idx; i++)
            for (int64_t j = 0; j < slice; j++) {
                int64_t at = pos[i] * slice + j;
                if (rk == 0) {
                    ox_copy_elem(o, at, U, i * slice + j);
                } else if (o->fv) {
                    double a = ox_get(o, at), b = ox_get(U, i * slice + j);
                    ox_set(o, at, rk == 1 ? a + b : rk == 2 ? a * b : rk == 3 ? fmax(a, b) : fmin(a, b));
                } else {
                    int64_t a = ox_geti(o, at), b = ox_geti(U, i * slice + j);
                    ox_seti(o, at, rk == 1 ? a + b : rk == 2 ? a * b : rk == 3 ? (a > b ? a : b)
                                                                         : (a < b ? a : b));
                }
            }
        return ox_define_out(x, 0, o);
    }
    if (rk != 0) return ox_error(x, "reduction \"%s\" on runtime tensors is not supported", red);
    unsigned char *hit = mcir_arena_alloc(x->a, (size_t)prefix);
    memset(hit, 0, (size_t)prefix);
    for (int64_t i = 0; i < n_idx; i++) {
        if (hit[pos[i]]) return ox_error(x, "indices repeat a position (undefined in ONNX)");
        hit[pos[i]] = 1;
    }
    mcir_dtype dt = ox_node_dtype(in, 3);
    int elem = ox_dtype_elem(dt);
    int64_t mshape[MCIR_MAX_RANK];
    for (int k = 0; k < D->rank; k++) mshape[k] = k < q ? D->shape[k] : 1;
    ox_value *mask = ox_const_new(x, elem, D->rank, mshape);
    if (!mask) return false;
    for (int64_t p = 0; p < prefix; p++) ox_set(mask, p, hit[p] ? 0.0 : 1.0);
    mask->name = ox_fresh(x, "scatter_nd_keep");
    ox_value *scattered;
    if (U->is_const) {
        scattered = ox_const_new(x, elem, D->rank, D->shape);
        if (!scattered) return false;
        for (int64_t i = 0; i < n_idx; i++)
            for (int64_t j = 0; j < slice; j++)
                ox_set(scattered, pos[i] * slice + j, ox_get(U, i * slice + j));
        scattered->name = ox_fresh(x, "scatter_nd_updates");
    } else {
        int64_t s2[2] = {n_idx, slice};
        if (prefix * n_idx > ((int64_t)1 << 24)) return ox_error(x, "too many positions");
        double *P = mcir_arena_alloc(x->a, sizeof(double) * (size_t)(prefix * n_idx));
        memset(P, 0, sizeof(double) * (size_t)(prefix * n_idx));
        for (int64_t i = 0; i < n_idx; i++) P[pos[i] * n_idx + i] = 1;
        ox_value *u2 = reshape_step(x, U, 2, s2);
        scattered = axis_matrix(x, u2, 0, P, prefix, n_idx, "scatter_nd_placement", -1);
        scattered = reshape_step(x, scattered, D->rank, D->shape);
    }
    ox_value *y = ew_step(x, "Add", ew_step(x, "Mul", D, mask, -1), scattered, 0);
    return y && ox_define_out(x, 0, y);
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
    return reshape_step(x, v, r, shape);
}

/* |v| = max(v, -v): exact, also for integers. */
static ox_value *abs_step(ox *x, ox_value *v) {
    return ew_step(x, "Max", v, ew_step(x, "Neg", v, NULL, -1), -1);
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
        ox_value *acc = slice_step(x, y, ax, 0, 1, 1);
        for (int64_t k = 1; k < d && acc; k++) acc = ew_step(x, "Mul", acc, slice_step(x, y, ax, k, 1, 1), -1);
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
        y = reduce_step(x, MCIR_OP_REDUCE_MAX, ew_step(x, "Neg", X, NULL, -1), n_axes, axes,
                        keep, -1);
        y = ew_step(x, "Neg", y, NULL, 0);
    } else if (!strcmp(op, "ReduceSumSquare")) {
        y = reduce_step(x, MCIR_OP_REDUCE_SUM, ew_step(x, "Mul", X, X, -1), n_axes, axes, keep, 0);
    } else if (!strcmp(op, "ReduceL2")) {
        y = reduce_step(x, MCIR_OP_REDUCE_SUM, ew_step(x, "Mul", X, X, -1), n_axes, axes, keep, -1);
        y = ew_step(x, "Sqrt", y, NULL, 0);
    } else if (!strcmp(op, "ReduceL1")) {
        y = reduce_step(x, MCIR_OP_REDUCE_SUM, abs_step(x, X), n_axes, axes, keep, 0);
    } else if (!strcmp(op, "ReduceProd")) {
        return reduce_prod(x, X, n_axes, axes, keep);
    } else if (!strcmp(op, "ReduceLogSum")) {
        y = ew_step(x, "Log", reduce_step(x, MCIR_OP_REDUCE_SUM, X, n_axes, axes, keep, -1), NULL, 0);
    } else { /* ReduceLogSumExp: max + log(sum(exp(x - max))) */
        ox_value *m = reduce_step(x, MCIR_OP_REDUCE_MAX, X, n_axes, axes, true, -1);
        ox_value *s = reduce_step(x, MCIR_OP_REDUCE_SUM,
                                  ew_step(x, "Exp", ew_step(x, "Sub", X, m, -1), NULL, -1),
                                  n_axes, axes, true, -1);
        y = ew_step(x, "Add", ew_step(x, "Log", s, NULL, -1), m, keep ? 0 : -1);
        if (!keep) y = drop_reduced(x, y, X, n_axes, axes);
    }
    return y && ox_define_out(x, 0, y);
}

/* ArgMax / ArgMin: MCIR's argmax / argmin (first index of the extreme,
 * int64); ONNX's axis defaults to 0 and keepdims to 1. */
static bool h_argmax(ox *x, ox_value **in, int n_in) {
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

/* Where as a step: MCIR's where (a bool condition, values of one dtype),
 * folded when everything is constant. */
static ox_value *where_step(ox *x, ox_value *c, ox_value *a, ox_value *b, int out_index) {
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
        y = ew_step(x, "Equal", in[0], scalar_of(x, OX_BOOL, "false", 0), 0);
    else if (!strcmp(op, "And"))
        y = where_step(x, in[0], in[1], scalar_of(x, OX_BOOL, "false", 0), 0);
    else
        y = where_step(x, in[0], scalar_of(x, OX_BOOL, "true", 1), in[1], 0);
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
static bool h_activation(ox *x, ox_value **in, int n_in) {
    const char *op = x->node->op_type;
    ox_value *X = in[0], *y = NULL;
    int e = X->elem;
    if (!strcmp(op, "Abs")) {
        y = abs_step(x, X);
    } else if (!strcmp(op, "LeakyRelu") || !strcmp(op, "PRelu") || !strcmp(op, "Elu")) {
        ox_value *neg;
        if (!strcmp(op, "PRelu")) {
            if (n_in < 2) return ox_error(x, "PRelu needs a slope");
            neg = ew_step(x, "Mul", X, in[1], -1);
        } else if (!strcmp(op, "LeakyRelu")) {
            neg = ew_step(x, "Mul", X, scalar_of(x, e, "alpha", ox_attr_float(x, "alpha", 0.01f)), -1);
        } else {
            ox_value *a = scalar_of(x, e, "alpha", ox_attr_float(x, "alpha", 1.0f));
            neg = ew_step(x, "Mul", ew_step(x, "Sub", ew_step(x, "Exp", X, NULL, -1),
                                            scalar_of(x, e, "one", 1), -1), a, -1);
        }
        y = where_step(x, ew_step(x, "Less", X, scalar_of(x, e, "zero", 0), -1), neg, X, -1);
    } else if (!strcmp(op, "Selu")) {
        ox_value *a = scalar_of(x, e, "alpha", ox_attr_float(x, "alpha", 1.67326319217681884765625f));
        ox_value *g = scalar_of(x, e, "gamma", ox_attr_float(x, "gamma", 1.05070102214813232421875f));
        ox_value *neg = ew_step(x, "Sub", ew_step(x, "Mul", a, ew_step(x, "Exp", X, NULL, -1), -1), a, -1);
        y = where_step(x, ew_step(x, "LessOrEqual", X, scalar_of(x, e, "zero", 0), -1), neg, X, -1);
        y = ew_step(x, "Mul", y, g, -1);
    } else if (!strcmp(op, "ThresholdedRelu")) {
        ox_value *a = scalar_of(x, e, "alpha", ox_attr_float(x, "alpha", 1.0f));
        y = where_step(x, ew_step(x, "Greater", X, a, -1), X, scalar_of(x, e, "zero", 0), -1);
    } else if (!strcmp(op, "Softplus") || !strcmp(op, "Mish")) {
        y = ew_step(x, "Log", ew_step(x, "Add", ew_step(x, "Exp", X, NULL, -1), scalar_of(x, e, "one", 1), -1),
                    NULL, -1);
        if (!strcmp(op, "Mish")) y = ew_step(x, "Mul", X, ew_step(x, "Tanh", y, NULL, -1), -1);
    } else if (!strcmp(op, "Softsign")) {
        y = ew_step(x, "Div", X, ew_step(x, "Add", scalar_of(x, e, "one", 1), abs_step(x, X), -1), -1);
    } else { /* Shrink */
        float l = ox_attr_float(x, "lambd", 0.5f), b = ox_attr_float(x, "bias", 0.0f);
        ox_value *zero = scalar_of(x, e, "zero", 0);
        ox_value *hi = where_step(x, ew_step(x, "Greater", X, scalar_of(x, e, "lambd", l), -1),
                                  ew_step(x, "Sub", X, scalar_of(x, e, "bias", b), -1), zero, -1);
        y = where_step(x, ew_step(x, "Less", X, scalar_of(x, e, "neg_lambd", -l), -1),
                       ew_step(x, "Add", X, scalar_of(x, e, "bias", b), -1), hi, -1);
    }
    return y && ox_define_out(x, 0, y);
}

/* CastLike: Cast to the element type of the second input. */
static bool h_cast_like(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_attr_int(x, "saturate", 1); /* only affects float8 targets */
    return cast_to(x, in[0], in[1]->elem);
}

/* Trilu: where(mask, x, 0) with the constant triangle mask of the last two
 * dims (j − i ≥ k for upper, j − i ≤ k for lower). */
static bool h_trilu(ox *x, ox_value **in, int n_in) {
    int64_t upper = ox_attr_int(x, "upper", 1), k = 0;
    if (x->failed) return false;
    ox_value *X = in[0];
    if (n_in > 1 && in[1]) {
        if (!in[1]->is_const || in[1]->numel != 1 || ox_is_float(in[1]->elem))
            return ox_error(x, "k must be an integer scalar constant");
        k = ox_geti(in[1], 0);
    }
    if (X->rank < 2) return ox_error(x, "input '%s' has rank %d; Trilu needs 2 or more", X->name, X->rank);
    int64_t n = X->shape[X->rank - 2], m = X->shape[X->rank - 1], shape[2] = {n, m};
    ox_value *mask = ox_const_new(x, OX_BOOL, 2, shape);
    if (!mask) return false;
    mask->name = ox_fresh(x, upper ? "triu_mask" : "tril_mask");
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) mask->iv[i * m + j] = upper ? j - i >= k : j - i <= k;
    ox_value *y = where_step(x, mask, X, scalar_of(x, X->elem, "zero", 0), 0);
    return y && ox_define_out(x, 0, y);
}

/* Hardmax: 1 at the first maximum along axis, 0 elsewhere —
 * cast(equal(argmax(x, keepdims), index along axis)). Opset < 13
 * flattens from axis on; only the last axis is the same there. */
static bool h_hardmax(ox *x, ox_value **in, int n_in) {
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
    ox_value *eq = ew_step(x, "Equal", ox_runtime_value(x, am), idx, -1);
    if (!eq) return false;
    return cast_to(x, eq, ox_dtype_elem(dt));
}

/* OneHot(indices, depth, values): where(indices' == range(depth), on, off)
 * along axis, a negative index counting from depth. depth and values
 * must be constants. */
static bool h_one_hot(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_value *I = in[0], *D = in[1], *V = in[2];
    int64_t axis = ox_attr_int(x, "axis", -1);
    if (x->failed) return false;
    if (!D->is_const || D->numel != 1) return ox_error(x, "depth must be a scalar constant");
    if (!V->is_const || V->numel != 2) return ox_error(x, "values must be a constant [off, on]");
    if (ox_is_float(I->elem)) { /* float indices are truncated to int64 */
        I = I->is_const ? ox_fold_cast(x, I, OX_INT64) : cast_step(x, I, MCIR_DTYPE_I64, -1);
        if (!I) return false;
    }
    if (I->elem != OX_INT32 && I->elem != OX_INT64)
        return ox_error(x, "indices '%s' must be numeric, got %s", I->name, ox_elem_name(I->elem));
    int64_t depth = ox_is_float(D->elem) ? (int64_t)ox_get(D, 0) : ox_geti(D, 0);
    if (depth < 1 || depth > (1 << 24)) return ox_error(x, "depth %lld is out of range", (long long)depth);
    int ax;
    if (I->rank + 1 > MCIR_MAX_RANK || !ox_norm_axis(x, axis, I->rank + 1, "axis", &ax)) return false;
    int64_t ushape[MCIR_MAX_RANK], rshape[MCIR_MAX_RANK];
    for (int k = 0, j = 0; k <= I->rank; k++) {
        ushape[k] = k == ax ? 1 : I->shape[j++];
        rshape[k] = k == ax ? depth : 1;
    }
    ox_value *range = ox_const_new(x, I->elem, I->rank + 1, rshape);
    if (!range) return false;
    range->name = ox_fresh(x, "one_hot_range");
    for (int64_t i = 0; i < depth; i++) range->iv[i] = i;
    ox_value *u = reshape_step(x, I, I->rank + 1, ushape);
    ox_value *zero = scalar_of(x, I->elem, "zero", 0);
    ox_value *wrapped = ew_step(x, "Add", u, scalar_of(x, I->elem, "depth", (double)depth), -1);
    u = where_step(x, ew_step(x, "Less", u, zero, -1), wrapped, u, -1);
    ox_value *off = slice_step(x, V, 0, 0, 1, 1), *on = slice_step(x, V, 0, 1, 1, 1);
    const int64_t scalar[1] = {1}; /* rank 0: no dims are read */
    ox_value *y = where_step(x, ew_step(x, "Equal", u, range, -1), reshape_step(x, on, 0, scalar),
                             reshape_step(x, off, 0, scalar), 0);
    return y && ox_define_out(x, 0, y);
}

/* CumSum(x, axis): a matmul by the constant 0/1 triangle along the axis
 * (exclusive and reverse pick the triangle), moved to the last axis by
 * transposes where it is not already there. At most 4096 along the axis. */
static bool h_cumsum(ox *x, ox_value **in, int n_in) {
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

/* EyeLike: a constant (only the input's shape is read). */
static bool h_eye_like(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_value *X = in[0];
    int64_t k = ox_attr_int(x, "k", 0);
    int elem = (int)ox_attr_int(x, "dtype", X->elem);
    if (x->failed) return false;
    if (X->rank != 2) return ox_error(x, "EyeLike needs a rank-2 input, '%s' has rank %d", X->name, X->rank);
    if (!ox_elem_supported(elem)) return ox_error(x, "dtype %s is not supported", ox_elem_name(elem));
    ox_value *o = ox_const_new(x, elem, 2, X->shape);
    if (!o) return false;
    for (int64_t i = 0; i < X->shape[0]; i++)
        for (int64_t j = 0; j < X->shape[1]; j++) {
            if (ox_is_float(elem)) ox_set(o, i * X->shape[1] + j, j - i == k);
            else ox_seti(o, i * X->shape[1] + j, j - i == k);
        }
    return ox_define_out(x, 0, o);
}

/* The op table: every ONNX op the importer knows, its input arity and
 * handler. Ops marked import-time fold constants only. */
static const struct {
    const char *op;
    int min_in, max_in; /* max -1: variadic */
    ox_handler fn;
} ox_ops[] = {
    {"Constant", 0, 0, h_constant},
    {"Identity", 1, 1, h_identity},
    {"Dropout", 1, 3, h_identity},
    {"Cast", 1, 1, h_cast},
    {"Shape", 1, 1, h_shape},
    {"Size", 1, 1, h_size},
    {"ConstantOfShape", 1, 1, h_constant_of_shape},
    {"Range", 3, 3, h_range},
    {"Add", 2, 2, h_elementwise}, {"Sub", 2, 2, h_elementwise},
    {"Mul", 2, 2, h_elementwise}, {"Div", 2, 2, h_elementwise},
    {"Pow", 2, 2, h_elementwise}, {"Mod", 2, 2, h_elementwise},
    {"Max", 1, -1, h_elementwise}, {"Min", 1, -1, h_elementwise},
    {"Sum", 1, -1, h_elementwise},
    {"Relu", 1, 1, h_elementwise}, {"Sigmoid", 1, 1, h_elementwise},
    {"Tanh", 1, 1, h_elementwise}, {"Exp", 1, 1, h_elementwise},
    {"Log", 1, 1, h_elementwise}, {"Erf", 1, 1, h_elementwise},
    {"Sqrt", 1, 1, h_elementwise}, {"Reciprocal", 1, 1, h_elementwise},
    {"Neg", 1, 1, h_elementwise}, {"Abs", 1, 1, h_elementwise},
    {"Floor", 1, 1, h_elementwise}, {"Ceil", 1, 1, h_elementwise},
    {"Sign", 1, 1, h_elementwise}, {"Not", 1, 1, h_elementwise},
    {"BitwiseNot", 1, 1, h_elementwise}, {"BitwiseAnd", 2, 2, h_elementwise},
    {"BitwiseOr", 2, 2, h_elementwise}, {"BitwiseXor", 2, 2, h_elementwise},
    {"BitShift", 2, 2, h_elementwise},
    {"Equal", 2, 2, h_elementwise}, {"Less", 2, 2, h_elementwise},
    {"Greater", 2, 2, h_elementwise}, {"LessOrEqual", 2, 2, h_elementwise},
    {"GreaterOrEqual", 2, 2, h_elementwise}, {"And", 2, 2, h_elementwise},
    {"Or", 2, 2, h_elementwise}, {"Xor", 2, 2, h_elementwise},
    {"Where", 3, 3, h_where},
    {"MatMul", 2, 2, h_matmul},
    {"Gemm", 2, 3, h_gemm},
    {"Softmax", 1, 1, h_softmax},
    {"LayerNormalization", 2, 3, h_layernorm},
    {"ReduceMean", 1, 2, h_reduce}, {"ReduceSum", 1, 2, h_reduce},
    {"ReduceMax", 1, 2, h_reduce},
    {"Transpose", 1, 1, h_transpose},
    {"Reshape", 2, 2, h_reshape},
    {"Flatten", 1, 1, h_flatten},
    {"Unsqueeze", 1, 2, h_unsqueeze},
    {"Squeeze", 1, 2, h_squeeze},
    {"Concat", 1, -1, h_concat},
    {"Split", 1, 2, h_split},
    {"Slice", 1, 5, h_slice},
    {"Gather", 2, 2, h_gather},
    {"Expand", 2, 2, h_expand},
    {"Conv", 2, 3, h_conv},
    {"MaxPool", 1, 1, h_pool},
    {"AveragePool", 1, 1, h_pool},
    {"GlobalAveragePool", 1, 1, h_global_avg_pool},
    {"Clip", 1, 3, h_clip},
    {"HardSigmoid", 1, 1, h_hard_sigmoid}, {"HardSwish", 1, 1, h_hard_sigmoid},
    {"LogSoftmax", 1, 1, h_log_softmax},
    {"BatchNormalization", 5, 5, h_batchnorm},
    {"ReduceMin", 1, 2, h_reduce}, {"ReduceL2", 1, 2, h_reduce},
    {"ReduceSumSquare", 1, 2, h_reduce}, {"ReduceLogSum", 1, 2, h_reduce},
    {"ReduceLogSumExp", 1, 2, h_reduce},
    {"Pad", 1, 4, h_pad},
    {"Resize", 1, 4, h_resize}, {"Upsample", 2, 2, h_resize},
    {"ConvTranspose", 2, 3, h_conv_transpose},
    {"ScatterND", 3, 3, h_scatter_nd},
    {"ArgMax", 1, 1, h_argmax}, {"ArgMin", 1, 1, h_argmax},
    {"ReduceL1", 1, 2, h_reduce}, {"ReduceProd", 1, 2, h_reduce},
    {"LeakyRelu", 1, 1, h_activation}, {"PRelu", 2, 2, h_activation},
    {"Elu", 1, 1, h_activation}, {"Selu", 1, 1, h_activation},
    {"ThresholdedRelu", 1, 1, h_activation}, {"Softplus", 1, 1, h_activation},
    {"Softsign", 1, 1, h_activation}, {"Mish", 1, 1, h_activation},
    {"Shrink", 1, 1, h_activation},
    {"CastLike", 2, 2, h_cast_like}, {"Trilu", 1, 2, h_trilu}, {"Hardmax", 1, 1, h_hardmax},
    {"OneHot", 3, 3, h_one_hot}, {"CumSum", 2, 2, h_cumsum}, {"EyeLike", 1, 1, h_eye_like},
};

bool ox_import_node(ox *x) {
    const Onnx__NodeProto *np = x->node;
    if (!np->op_type) return ox_error(x, "node has no op_type");
    if (np->domain && *np->domain && strcmp(np->domain, "ai.onnx") != 0)
        return ox_error(x, "op domain '%s' is not supported (only the default ONNX domain)",
                        np->domain);
    int k = 0, n = (int)(sizeof ox_ops / sizeof ox_ops[0]);
    while (k < n && strcmp(ox_ops[k].op, np->op_type) != 0) k++;
    if (k == n) return ox_error(x, "unsupported op %s", np->op_type);
    int n_in = (int)np->n_input;
    if (n_in < ox_ops[k].min_in || (ox_ops[k].max_in >= 0 && n_in > ox_ops[k].max_in))
        return ox_error(x, "has %d inputs; %s takes %d to %d here", n_in, np->op_type,
                        ox_ops[k].min_in, ox_ops[k].max_in);
    if (np->n_output < 1 || !np->output[0] || !*np->output[0])
        return ox_error(x, "has no output");
    ox_value *in[256];
    if (n_in > 256) return ox_error(x, "more than 256 inputs");
    for (int i = 0; i < n_in; i++) {
        const char *s = np->input[i];
        in[i] = NULL;
        if (!s || !*s) {
            if (i < ox_ops[k].min_in || ox_ops[k].max_in < 0)
                return ox_error(x, "required input %d is empty", i);
            continue;
        }
        ox_entry *e = ox_lookup(x, s, false);
        if (!e || !e->v)
            return ox_error(x, "input '%s' is not defined before this node (the graph must "
                               "be topologically sorted)",
                            s);
        in[i] = e->v;
    }
    x->used_attrs = 0;
    if (np->n_attribute > 64) return ox_error(x, "more than 64 attributes");
    if (!ox_ops[k].fn(x, in, n_in)) {
        if (!x->failed) ox_error(x, "cannot be imported");
        return false;
    }
    for (size_t i = 0; i < np->n_attribute; i++)
        if (!(x->used_attrs & (1ull << i)))
            return ox_error(x, "attribute '%s' is not supported",
                            np->attribute[i] && np->attribute[i]->name ? np->attribute[i]->name : "?");
    return !x->failed;
}
