/*
 * values.c — the ONNX importer's names and runtime values: the table of
 * every ONNX name (defined at most once; its uses counted, so that unused
 * outputs are known), and the MCIR side of ox_value — the nodes emitted
 * for the current ONNX node, each shape-inferred at once, constants made
 * weights in the dtype they are used in, pending Expands materialised
 * where an op does not broadcast them anyway.
 *
 * Invariant: a new MCIR tensor takes its ONNX output's name when that name
 * is free, else a fresh one neither the graph nor the model uses.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx-impl.h"


/* ---------------------------------------------------------- name table */

static uint64_t hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

ox_entry *ox_lookup(ox *x, const char *name, bool create) {
    if (!name) return NULL;
    if (create && (x->n_names + 1) * 2 > x->names_cap) {
        int cap = x->names_cap ? x->names_cap * 2 : 256;
        ox_entry *e = mcir_arena_alloc(x->a, (size_t)cap * sizeof *e);
        for (int i = 0; i < x->names_cap; i++) {
            if (!x->names[i].key) continue;
            size_t j = hash_str(x->names[i].key) & (size_t)(cap - 1);
            while (e[j].key) j = (j + 1) & (size_t)(cap - 1);
            e[j] = x->names[i];
        }
        x->names = e;
        x->names_cap = cap;
    }
    if (!x->names_cap) return NULL;
    size_t j = hash_str(name) & (size_t)(x->names_cap - 1);
    for (; x->names[j].key; j = (j + 1) & (size_t)(x->names_cap - 1))
        if (strcmp(x->names[j].key, name) == 0) return &x->names[j];
    if (!create) return NULL;
    x->names[j].key = mcir_arena_strdup(x->a, name);
    x->n_names++;
    return &x->names[j];
}

/* A name neither the graph nor the model uses. */
const char *ox_fresh(ox *x, const char *stem) {
    const char *s = stem;
    for (int k = 1;; k++) {
        ox_entry *e = ox_lookup(x, s, false);
        if (!e && !mcir_graph_find_tensor(x->g, s)) {
            ox_lookup(x, s, true); /* reserve it */
            return mcir_arena_strdup(x->g->arena, s);
        }
        s = mcir_arena_printf(x->a, "%s_%d", stem, k);
    }
}

const char *ox_fresh_node_name(ox *x, const char *stem) {
    const char *s = stem;
    for (int k = 1; mcir_graph_find_node(x->g, s); k++)
        s = mcir_arena_printf(x->a, "%s_%d", stem, k);
    return s;
}

bool ox_define(ox *x, const char *name, ox_value *v) {
    if (!name || !*name) return true;
    ox_entry *e = ox_lookup(x, name, true);
    if (e->v) return ox_error(x, "tensor '%s' is defined twice", name);
    e->v = v;
    if (!v->name) v->name = e->key;
    return true;
}

const char *ox_out_name(ox *x, int i) {
    if (i >= (int)x->node->n_output) return NULL;
    const char *s = x->node->output[i];
    return s && *s ? s : NULL;
}

bool ox_define_out(ox *x, int i, ox_value *v) { return ox_define(x, ox_out_name(x, i), v); }

/* Outputs past the first must not be used (Dropout's mask, MaxPool's
 * indices, LayerNormalization's statistics). */
bool ox_only_first_output(ox *x) {
    for (int i = 1; i < (int)x->node->n_output; i++) {
        const char *s = ox_out_name(x, i);
        ox_entry *e = s ? ox_lookup(x, s, false) : NULL;
        if (e && e->uses > 0)
            return ox_error(x, "output %d ('%s') is used, but only the first output of %s "
                               "is supported",
                            i, s, x->node->op_type);
    }
    return true;
}

/* ------------------------------------------------------ runtime values */

bool ox_elem_dtype(int elem, mcir_dtype *dt) {
    switch (elem) {
    case OX_FLOAT: *dt = MCIR_DTYPE_F32; return true;
    case OX_FLOAT16: *dt = MCIR_DTYPE_F16; return true;
    case OX_BFLOAT16: *dt = MCIR_DTYPE_BF16; return true;
    case OX_INT32: *dt = MCIR_DTYPE_I32; return true;
    case OX_INT64: *dt = MCIR_DTYPE_I64; return true;
    case OX_UINT8: *dt = MCIR_DTYPE_U8; return true;
    case OX_BOOL: *dt = MCIR_DTYPE_BOOL; return true;
    default: return false;
    }
}

int ox_dtype_elem(mcir_dtype dt) {
    switch (dt) {
    case MCIR_DTYPE_F16: return OX_FLOAT16;
    case MCIR_DTYPE_BF16: return OX_BFLOAT16;
    case MCIR_DTYPE_I32: return OX_INT32;
    case MCIR_DTYPE_I64: return OX_INT64;
    case MCIR_DTYPE_U8: return OX_UINT8;
    case MCIR_DTYPE_BOOL: return OX_BOOL;
    default: return OX_FLOAT;
    }
}

bool ox_value_dtype(ox *x, const ox_value *v, mcir_dtype *dt) {
    if (!v->is_const) {
        *dt = v->t->dtype;
        return true;
    }
    if (ox_elem_dtype(v->elem, dt)) return true;
    return ox_error(x, "%s tensor '%s' would be used at run time; runtime tensors are float, "
                       "float16, bfloat16, int32, int64, uint8 or bool",
                    ox_elem_name(v->elem), v->name);
}

ox_value *ox_runtime_value(ox *x, mcir_tensor *t) {
    ox_value *v = mcir_arena_alloc(x->a, sizeof *v);
    v->elem = ox_dtype_elem(t->dtype);
    v->rank = t->rank;
    memcpy(v->shape, t->shape, sizeof v->shape);
    v->numel = mcir_tensor_numel(t);
    v->t = t;
    return v;
}

/* The dtype a node computes in: its first runtime input's, else its first
 * float constant's, else its first integer or bool constant's, else f32. */
mcir_dtype ox_node_dtype(ox_value *const *in, int n_in) {
    mcir_dtype dt;
    for (int i = 0; i < n_in; i++)
        if (in[i] && !in[i]->is_const) return in[i]->t ? in[i]->t->dtype : MCIR_DTYPE_F32;
    for (int i = 0; i < n_in; i++)
        if (in[i] && ox_is_float(in[i]->elem) && ox_elem_dtype(in[i]->elem, &dt)) return dt;
    for (int i = 0; i < n_in; i++)
        if (in[i] && ox_elem_dtype(in[i]->elem, &dt)) return dt;
    return MCIR_DTYPE_F32;
}

/* Runs n's shape inference now; a failure is reported as the ONNX node's. */
bool ox_infer_now(ox *x, mcir_node *n) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mcir_diag cap = mcir_diag_to(f ? f : stderr);
    bool ok = mcir_op_desc_of(n->op)->infer(x->g, n, &cap);
    if (f) fclose(f);
    if (!ok) {
        const char *m = buf ? strstr(buf, "error: ") : NULL;
        m = m ? m + 7 : buf ? buf : "shape inference failed";
        size_t k = strlen(m);
        while (k && m[k - 1] == '\n') k--;
        ox_error(x, "%.*s", (int)k, m);
    }
    free(buf);
    return ok;
}

/* Adds an MCIR node for the current ONNX node. Its output is named after
 * ONNX output `onnx_out` (>= 0) or is a fresh intermediate (-1). */
mcir_node *ox_emit(ox *x, mcir_op op, int n_in, mcir_tensor *const *ins, int n_out,
                   const int *onnx_out) {
    mcir_tensor *outs[64];
    MCIR_ASSERT(n_out <= 64 && n_in >= 0);   /* no inputs: an arange */
    const char *stem = x->node->name && *x->node->name ? x->node->name : mcir_op_name(op);
    for (int i = 0; i < n_out; i++) {
        const char *nm = onnx_out && onnx_out[i] >= 0 ? ox_out_name(x, onnx_out[i]) : NULL;
        if (!nm || mcir_graph_find_tensor(x->g, nm))
            nm = ox_fresh(x, mcir_arena_printf(x->a, "%s_%s", stem, mcir_op_name(op)));
        outs[i] = mcir_graph_add_tensor(x->g, nm, n_in ? ins[0]->dtype : MCIR_DTYPE_I64, -1, NULL,
                                        MCIR_TENSOR_INTERMEDIATE);
        MCIR_ASSERT(outs[i]);
    }
    mcir_node *n = mcir_graph_add_node(x->g, op, ox_fresh_node_name(x, stem), n_in, ins, n_out,
                                       outs);
    n->loc = (mcir_loc){x->path, 0, 0};
    return n;
}

/* Emits a one-output node; out_index as for ox_emit (-1: intermediate). The
 * caller sets attributes through set(), then calls ox_done(). */
mcir_node *ox_emit1(ox *x, mcir_op op, int n_in, mcir_tensor *const *ins, int out_index) {
    return ox_emit(x, op, n_in, ins, 1, &out_index);
}

mcir_tensor *ox_done(ox *x, mcir_node *n) {
    return ox_infer_now(x, n) ? n->outputs[0] : NULL;
}

/* Defines ONNX output i as the runtime tensor t. */
bool ox_define_rt(ox *x, int i, mcir_tensor *t) {
    if (!t) return false;
    return ox_define_out(x, i, ox_runtime_value(x, t));
}

mcir_tensor *ox_weight_of(ox *x, ox_value *v, mcir_dtype dt) {
    if (v->weight[dt]) return v->weight[dt];
    const char *nm = v->name;
    if (!nm || mcir_graph_find_tensor(x->g, nm) || v->weight[0] || v->weight[1] || v->weight[2])
        nm = ox_fresh(x, nm ? nm : "const");
    mcir_tensor *t = mcir_graph_add_tensor(x->g, nm, dt, v->rank, v->shape, MCIR_TENSOR_WEIGHT);
    MCIR_ASSERT(t);
    size_t es = mcir_dtype_size(dt);
    uint8_t *data = mcir_arena_alloc(x->g->arena, (size_t)(v->numel ? v->numel : 1) * es);
    if (ox_is_float(v->elem))
        mcir_values_from_f32(dt, v->fv, data, v->numel);
    else if (dt == MCIR_DTYPE_I64) /* int64 storage stays exact */
        memcpy(data, v->iv, (size_t)v->numel * sizeof(int64_t));
    else
        for (int64_t i = 0; i < v->numel; i++) mcir_value_set(dt, data, i, (double)v->iv[i]);
    t->data = data;
    t->loc = (mcir_loc){x->path, 0, 0};
    v->weight[dt] = t;
    return t;
}

/* A float constant made by the importer (masks, scaled biases). */
ox_value *ox_new_float_const(ox *x, const char *stem, mcir_dtype dt, int rank,
                             const int64_t *shape) {
    ox_value *v = ox_const_new(x, ox_dtype_elem(dt), rank, shape);
    if (v) v->name = ox_fresh(x, stem);
    return v;
}

static mcir_tensor *materialise_expand(ox *x, ox_value *v);

/* The MCIR tensor for value v used at run time in dtype dt. Constants
 * become weights here: a float constant in a float dtype, an integer or
 * bool one in an integer or bool dtype (int64 storage exact). */
mcir_tensor *ox_runtime(ox *x, ox_value *v, mcir_dtype dt) {
    if (v->is_const) {
        mcir_dtype own;
        if (!ox_elem_dtype(v->elem, &own) || mcir_dtype_is_float(own) != mcir_dtype_is_float(dt)) {
            ox_error(x, "%s tensor '%s' would be used at run time in a %s computation (ONNX "
                        "operands share one element type; runtime tensors are float, float16, "
                        "bfloat16, int32, int64, uint8 or bool)",
                     ox_elem_name(v->elem), v->name, mcir_dtype_name(dt));
            return NULL;
        }
        if (v->numel == 0) {
            ox_error(x, "empty tensor '%s' would be used at run time", v->name);
            return NULL;
        }
        return ox_weight_of(x, v, dt);
    }
    mcir_tensor *t = v->expand ? materialise_expand(x, v) : v->t;
    if (t && t->dtype != dt) {
        ox_error(x, "tensor '%s' is %s but the node computes in %s (mixed dtypes are not "
                    "supported)",
                 t->name, mcir_dtype_name(t->dtype), mcir_dtype_name(dt));
        return NULL;
    }
    return t;
}

/* Probing a symbolic dimension (symbolic.c): the broadcast to v's shape
 * as src + zeros, each axis's zeros arange(n) * 0 reshaped to run along
 * it, so that the sizes are attributes the fit can follow (a weight of
 * ones could not vary); float and integer sources (a bool one goes
 * through 0/1 integers). */
static mcir_tensor *expand_by_aranges(ox *x, mcir_tensor *src, const int64_t *ones_shape,
                                      int rank) {
    mcir_tensor *cur = src;
    for (int k = 0; k < rank && cur; k++) {
        if (ones_shape[k] == 1) continue;
        mcir_node *ar = ox_emit(x, MCIR_OP_ARANGE, 0, NULL, 1, (int[]){-1});
        mcir_node_set_int(x->g, ar, "end", ones_shape[k]);
        mcir_node_set_string(x->g, ar, "dtype", mcir_dtype_name(src->dtype));
        mcir_tensor *pos = ox_done(x, ar);
        ox_value *zero = ox_new_float_const(x, "expand_zero", src->dtype, 0, NULL);
        if (!pos || !zero) return NULL;
        if (zero->fv) zero->fv[0] = 0.0f;
        else zero->iv[0] = 0;
        mcir_tensor *mul_in[2] = {pos, ox_weight_of(x, zero, src->dtype)};
        mcir_tensor *zeros = ox_done(x, ox_emit(x, MCIR_OP_MUL, 2, mul_in, 1, (int[]){-1}));
        if (!zeros) return NULL;
        int64_t along[MCIR_MAX_RANK];
        for (int i = 0; i < rank; i++) along[i] = i == k ? ones_shape[k] : 1;
        mcir_node *rs = ox_emit(x, MCIR_OP_RESHAPE, 1, &zeros, 1, (int[]){-1});
        mcir_node_set_ints(x->g, rs, "shape", rank, along);
        mcir_tensor *col = ox_done(x, rs);
        if (!col) return NULL;
        mcir_tensor *add_in[2] = {cur, col};
        cur = ox_done(x, ox_emit(x, MCIR_OP_ADD, 2, add_in, 1, (int[]){-1}));
    }
    return cur;
}

/* A pending Expand is materialised as a mul by ones of the broadcast dims
 * (a weight as small as the broadcast needs); an integer one as an add of
 * zeros, a bool one (an attention mask) as where(src, true, false). */
static mcir_tensor *materialise_expand(ox *x, ox_value *v) {
    if (v->expanded) return v->expanded;
    mcir_tensor *src = v->t;
    int64_t ones_shape[MCIR_MAX_RANK];
    for (int k = 0; k < v->rank; k++) {
        int ks = k - (v->rank - src->rank);
        ones_shape[k] = ks >= 0 && src->shape[ks] == v->shape[k] ? 1 : v->shape[k];
    }
    if (x->probing && src->dtype != MCIR_DTYPE_BOOL)
        return v->expanded = expand_by_aranges(x, src, ones_shape, v->rank);
    if (x->probing) {   /* bool: as 0/1 integers, then != 0 */
        mcir_node *c = ox_emit(x, MCIR_OP_CAST, 1, &src, 1, (int[]){-1});
        mcir_node_set_string(x->g, c, "to", "i64");
        mcir_tensor *ints = ox_done(x, c);
        mcir_tensor *wide = ints ? expand_by_aranges(x, ints, ones_shape, v->rank) : NULL;
        ox_value *zero = wide ? ox_new_float_const(x, "expand_zero", MCIR_DTYPE_I64, 0, NULL) : NULL;
        if (!zero) return NULL;
        zero->iv[0] = 0;
        mcir_tensor *ne_in[2] = {wide, ox_weight_of(x, zero, MCIR_DTYPE_I64)};
        return v->expanded = ox_done(x, ox_emit(x, MCIR_OP_NOT_EQUAL, 2, ne_in, 1, (int[]){-1}));
    }
    bool fl = mcir_dtype_is_float(src->dtype), boolean = src->dtype == MCIR_DTYPE_BOOL;
    ox_value *ones = ox_new_float_const(x, mcir_arena_printf(x->a, "%s_%s", v->name,
                                                             fl ? "ones" : boolean ? "true" : "zeros"),
                                        src->dtype, v->rank, ones_shape);
    if (!ones) return NULL;
    for (int64_t i = 0; i < ones->numel; i++) {
        if (fl) ones->fv[i] = 1.0f;
        else ones->iv[i] = boolean ? 1 : 0;
    }
    ox_value *falses = NULL;
    if (boolean) {
        falses = ox_new_float_const(x, mcir_arena_printf(x->a, "%s_false", v->name), src->dtype, v->rank,
                                    ones_shape);
        if (!falses) return NULL;
        for (int64_t i = 0; i < falses->numel; i++) falses->iv[i] = 0;
    }
    mcir_tensor *ins[3] = {src, ox_weight_of(x, ones, src->dtype),
                           boolean ? ox_weight_of(x, falses, src->dtype) : NULL};
    if (!ins[1] || (boolean && !ins[2])) return NULL;
    const char *nm = v->name && !mcir_graph_find_tensor(x->g, v->name)
                         ? v->name
                         : ox_fresh(x, mcir_arena_printf(x->a, "%s_expanded", v->name));
    mcir_tensor *out = mcir_graph_add_tensor(x->g, nm, src->dtype, -1, NULL,
                                             MCIR_TENSOR_INTERMEDIATE);
    mcir_node *n = mcir_graph_add_node(x->g, fl ? MCIR_OP_MUL : boolean ? MCIR_OP_WHERE : MCIR_OP_ADD,
                                       ox_fresh_node_name(x, mcir_arena_printf(x->a, "%s_expand", nm)),
                                       boolean ? 3 : 2, ins, 1, &out);
    n->loc = (mcir_loc){x->path, 0, 0};
    if (!ox_infer_now(x, n)) return NULL;
    v->expanded = out;
    return out;
}

/* Operand of a broadcasting op: a pending Expand whose broadcast the op
 * does anyway (same result shape with the source) is used unexpanded. */
mcir_tensor *ox_operand(ox *x, ox_value *v, mcir_dtype dt, ox_value *const *others,
                        int n_others) {
    if (!v->is_const && v->expand) {
        int r1 = v->t->rank, r2 = v->rank;
        int64_t s1[MCIR_MAX_RANK], s2[MCIR_MAX_RANK];
        memcpy(s1, v->t->shape, sizeof s1);
        memcpy(s2, v->shape, sizeof s2);
        bool ok = true;
        for (int i = 0; i < n_others && ok; i++)
            ok = mcir_broadcast_shape(r1, s1, others[i]->rank, others[i]->shape, &r1, s1) &&
                 mcir_broadcast_shape(r2, s2, others[i]->rank, others[i]->shape, &r2, s2);
        if (ok && r1 == r2 && !memcmp(s1, s2, sizeof(int64_t) * (size_t)r1)) {
            if (v->t->dtype != dt) return ox_runtime(x, v, dt);
            return v->t;
        }
    }
    return ox_runtime(x, v, dt);
}

bool ox_all_const(ox_value *const *in, int n_in) {
    for (int i = 0; i < n_in; i++)
        if (in[i] && !in[i]->is_const) return false;
    return true;
}

/* Reshape of v to [rank, shape]: folded, aliased (same shape) or emitted. */
bool ox_reshape_to(ox *x, ox_value *v, int rank, const int64_t *shape, int out_index) {
    int64_t numel = 1;
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0 || mcir_mul_overflows(numel, shape[i], &numel))
            return ox_error(x, "cannot reshape '%s': the target shape is invalid", v->name);
    if (numel != v->numel)
        return ox_error(x, "cannot reshape '%s' (%lld elements) to %d dims with %lld elements",
                        v->name, (long long)v->numel, rank, (long long)numel);
    if (v->is_const) {
        ox_value *o = ox_fold_reshape(x, v, rank, shape);
        return o && ox_define_out(x, out_index, o);
    }
    if (!v->expand && rank == v->rank &&
        !memcmp(shape, v->shape, sizeof(int64_t) * (size_t)rank))
        return ox_define_out(x, out_index, v);
    mcir_tensor *t = ox_runtime(x, v, v->t->dtype);
    if (!t) return false;
    mcir_node *n = ox_emit1(x, MCIR_OP_RESHAPE, 1, &t, out_index);
    mcir_node_set_ints(x->g, n, "shape", rank, shape);
    return ox_define_rt(x, out_index, ox_done(x, n));
}

bool ox_norm_axis(ox *x, int64_t axis, int rank, const char *what, int *out) {
    *out = 0;
    if (axis < -(int64_t)rank || axis >= rank)
        return ox_error(x, "%s %lld is out of range for rank %d", what, (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}
