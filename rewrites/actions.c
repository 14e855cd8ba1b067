/*
 * actions.c — the rewrite actions a catalog rule names (schemas in
 * properties/properties.c, one entry per action here).
 *
 * A structural action builds its replacement first, off to the side (new
 * nodes writing fresh tensors), infers it, and only if the result has the
 * shape and dtype of the tensor it replaces does it take that tensor over:
 * the new node becomes the producer of the original output tensor, so
 * names, consumers and graph outputs stay as they were. If anything does
 * not fit, the new nodes are dropped and the graph is unchanged.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "rewrites/rewrites-impl.h"

/* ------------------------------------------------------------ params */

static const mcir_param_value *param(const mcir_action_ctx *a, const char *name) {
    const mcir_action_desc *desc = &mcir_action_descs[a->p->action];
    int i = mcir_param_index(desc->params, desc->n_params, name);
    MCIR_ASSERT(i >= 0);
    return &a->params[i];
}

static mcir_tensor *param_tensor(const mcir_action_ctx *a, const char *name) {
    const mcir_param_value *v = param(a, name);
    if (!v->set || v->n < 1) return NULL;
    return a->m->vars[v->refs[0]];
}

static mcir_node *param_node(const mcir_action_ctx *a, const char *name) {
    const mcir_param_value *v = param(a, name);
    if (!v->set || v->n < 1) return NULL;
    return a->m->nodes[v->refs[0]];
}

static void add_result(mcir_action_ctx *a, mcir_node *n) {
    for (int i = 0; i < a->n_results; i++)
        if (a->results[i] == n) return;
    if (a->n_results < MCIR_ACTION_MAX_RESULTS) a->results[a->n_results++] = n;
}

static bool fail(mcir_action_ctx *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool fail(mcir_action_ctx *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->fail, sizeof a->fail, fmt, ap);
    va_end(ap);
    return false;
}

/* ------------------------------------------------------------ builders */

/* The common dotted prefix of the matched node names ("h0.attn.") plus
 * stem, made unique: fused nodes read like the layer they came from. */
static const char *fused_name(mcir_action_ctx *a, const char *stem) {
    const char *first = NULL;
    size_t common = 0;
    for (int i = 0; i < a->m->n_nodes; i++) {
        const mcir_node *n = a->m->nodes[i];
        if (!n) continue;
        if (!first) {
            first = n->name;
            common = strlen(first);
            continue;
        }
        size_t k = 0;
        while (k < common && n->name[k] && n->name[k] == first[k]) k++;
        common = k;
    }
    size_t cut = 0;
    for (size_t i = 0; first && i < common; i++)
        if (first[i] == '.' || first[i] == '/') cut = i + 1;
    char buf[512];
    snprintf(buf, sizeof buf, "%.*s%s", (int)(cut < 400 ? cut : 400), first ? first : "", stem);
    return mcir_graph_fresh_name(a->g, buf);
}

/* A new node writing a fresh tensor, with origin recorded. */
static mcir_node *build(mcir_action_ctx *a, mcir_op op, const char *name, int n_inputs,
                        mcir_tensor *const *inputs) {
    mcir_graph *g = a->g;
    const char *tname = mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s.y", name));
    mcir_tensor *t =
        mcir_graph_add_tensor(g, tname, inputs[0]->dtype, -1, NULL, MCIR_TENSOR_INTERMEDIATE);
    MCIR_ASSERT(t);
    mcir_node *n = mcir_graph_add_node(g, op, name, n_inputs, inputs, 1, &t);
    n->origin_rule = a->p->name;
    n->origin_nodes = a->origin_nodes;
    const mcir_node *anchor = NULL;
    for (int i = 0; i < a->m->n_nodes && !anchor; i++) anchor = a->m->nodes[i];
    if (anchor) n->loc = anchor->loc;
    return n;
}

/* Shape inference of a node just built; its message goes into fail. */
static bool infer(mcir_action_ctx *a, mcir_node *n) {
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    MCIR_ASSERT(mem);
    mcir_diag d = mcir_diag_to(mem);
    bool ok = mcir_node_infer(a->g, n, &d);
    fclose(mem);
    if (!ok) {
        /* keep the message, without the location prefix */
        const char *msg = strstr(text, "error: ");
        msg = msg ? msg + 7 : text;
        size_t l = strlen(msg);
        while (l && msg[l - 1] == '\n') l--;
        fail(a, "%s %s: %.*s", mcir_op_name(n->op), n->name, (int)l, msg);
    }
    free(text);
    return ok;
}

/* Drops nodes built by a failed action (their fresh tensors are dropped
 * by the next compaction). */
static void discard(mcir_node **built, int n) {
    for (int i = 0; i < n; i++)
        if (built[i]) built[i]->dead = true;
}

static bool at_position(const mcir_graph *g, const mcir_node *n) {
    return n && n->id >= 0 && n->id < g->n_nodes && g->nodes[n->id] == n;
}

/* Whether tensor t is computed from `target` (t itself or an ancestor).
 * Nodes placed before position `first` (the first matched node's; g->nodes
 * was topological before the action, which only takes over tensors of
 * matched nodes) have all their ancestors there too, none of them
 * target's: the walk stops at them instead of climbing to the inputs. */
static bool depends_on(const mcir_graph *g, const mcir_tensor *t, const mcir_tensor *target,
                       unsigned char *seen, int first) {
    if (t == target) return true;
    if (t->id < 0 || t->id >= g->n_tensors || g->tensors[t->id] != t || seen[t->id]) return false;
    seen[t->id] = 1;
    const mcir_node *p = t->producer;
    if (!p || p->dead) return false;
    if (at_position(g, p) && p->id < first) return false;
    for (int i = 0; i < p->n_inputs; i++)
        if (depends_on(g, p->inputs[i], target, seen, first)) return true;
    return false;
}

static bool matched(const mcir_action_ctx *a, const mcir_node *n) {
    for (int i = 0; i < a->m->n_nodes; i++)
        if (a->m->nodes[i] == n) return true;
    return false;
}

/* The new node takes over `target`: it becomes the tensor's producer. A
 * rule may only replace what it matched, and never make a cycle. */
static bool take_over(mcir_action_ctx *a, mcir_node *n, mcir_tensor *target) {
    mcir_tensor *fresh = n->outputs[0];
    char s1[96], s2[96];
    if (target->kind == MCIR_TENSOR_INPUT || target->kind == MCIR_TENSOR_WEIGHT)
        return fail(a, "'%s' is a graph %s: a rewrite cannot produce it", target->name,
                    mcir_tensor_kind_name(target->kind));
    if (!target->producer || !matched(a, target->producer))
        return fail(a, "'%s' is not produced by a matched node", target->name);
    unsigned char *seen = calloc((size_t)a->g->n_tensors + 1, 1);
    MCIR_ASSERT(seen);
    int first = a->g->n_nodes;
    for (int i = 0; i < a->m->n_nodes; i++) {
        const mcir_node *mn = a->m->nodes[i];
        if (!mn) continue;
        if (!at_position(a->g, mn)) first = -1;
        else if (first >= 0 && mn->id < first) first = mn->id;
    }
    bool cycle = false;
    for (int i = 0; i < n->n_inputs && !cycle; i++)
        cycle = depends_on(a->g, n->inputs[i], target, seen, first);
    free(seen);
    if (cycle)
        return fail(a, "the fused %s would read its own output '%s'", mcir_op_name(n->op),
                    target->name);
    if (fresh->rank != target->rank || fresh->dtype != target->dtype ||
        memcmp(fresh->shape, target->shape, sizeof(int64_t) * (size_t)target->rank) != 0)
        return fail(a, "the fused %s would produce %s %s but '%s' is %s %s",
                    mcir_op_name(n->op), mcir_dtype_name(fresh->dtype),
                    mcir_shape_str(fresh, s1, sizeof s1), target->name,
                    mcir_dtype_name(target->dtype), mcir_shape_str(target, s2, sizeof s2));
    /* symbolic dims: the same extents for every size, not only at the
     * binding the shapes above are at */
    for (int i = 0; i < target->rank && (fresh->sym || target->sym); i++) {
        mcir_extent ef = mcir_tensor_extent(fresh, i), et = mcir_tensor_extent(target, i);
        if (mcir_extent_equal(&ef, &et)) continue;
        const mcir_extent *sym = mcir_extent_first_dim(&ef) >= 0 ? &ef : &et;
        const mcir_dim *dim = &a->g->dims[mcir_extent_first_dim(sym)];
        return fail(a, "the fused %s would produce extent %s in dim %d but '%s' has %s: they "
                    "agree only for some values of dimension '%s' (%lld..%lld)",
                    mcir_op_name(n->op), mcir_extent_str(a->g, &ef, s1, sizeof s1), i,
                    target->name, mcir_extent_str(a->g, &et, s2, sizeof s2), dim->name,
                    (long long)dim->min, (long long)dim->max);
    }
    n->outputs[0] = target;
    target->producer = n;
    fresh->producer = NULL;
    add_result(a, n);
    return true;
}

/* A constant weight made by a rewrite: `count` copies of value. */
static mcir_tensor *constant_fill(mcir_action_ctx *a, const char *stem, mcir_dtype dt,
                                  int64_t count, float value) {
    mcir_graph *g = a->g;
    int64_t shape[1] = {count};
    mcir_tensor *t = mcir_graph_add_tensor(g, mcir_graph_fresh_name(g, stem), dt, 1, shape,
                                           MCIR_TENSOR_WEIGHT);
    MCIR_ASSERT(t);
    size_t es = mcir_dtype_size(dt);
    unsigned char *data = mcir_arena_alloc(g->arena, (size_t)count * es);
    for (int64_t i = 0; i < count; i++) mcir_value_set(dt, data, i, value);
    t->data = data;
    return t;
}

static bool scalar_value(const mcir_tensor *t, float *out) {
    if (!t || t->kind != MCIR_TENSOR_WEIGHT || mcir_tensor_numel(t) != 1) return false;
    return mcir_weight_values(t, out);
}

/* ------------------------------------------------------------ attention */

/* A constant additive causal mask for Nq queries over Nk keys: 0 where
 * j <= i + (Nk - Nq), at most -1e4 (or -inf) elsewhere, the same in every
 * leading slice. */
static bool is_causal_mask(const mcir_tensor *m, int64_t nq, int64_t nk) {
    if (m->kind != MCIR_TENSOR_WEIGHT || m->rank < 2 || nk < nq) return false;
    if (m->shape[m->rank - 2] != nq || m->shape[m->rank - 1] != nk) return false;
    int64_t numel = mcir_tensor_numel(m);
    if (numel > (int64_t)1 << 26) return false;
    float *v = malloc((size_t)numel * sizeof *v);
    MCIR_ASSERT(v);
    mcir_weight_values(m, v);
    bool ok = true;
    int64_t slices = numel / (nq * nk);
    for (int64_t s = 0; s < slices && ok; s++)
        for (int64_t i = 0; i < nq && ok; i++)
            for (int64_t j = 0; j < nk && ok; j++) {
                float x = v[(s * nq + i) * nk + j];
                ok = j <= i + (nk - nq) ? x == 0.0f : x <= -1e4f;
            }
    free(v);
    return ok;
}

/* Tensor t is arange(0, n) (step 1), possibly reshaped; its length n as an
 * extent of t's largest dim. */
static bool is_positions(const mcir_tensor *t, mcir_extent *n) {
    const mcir_node *p = t->producer;
    while (p && p->op == MCIR_OP_RESHAPE) p = p->inputs[0]->producer;
    if (!p || p->op != MCIR_OP_ARANGE || mcir_node_int(p, "start") != 0 || mcir_node_int(p, "step") != 1)
        return false;
    *n = mcir_tensor_extent(p->outputs[0], 0);
    return true;
}

/* A causal mask the graph computes for any length (a graph with symbolic
 * dims builds it so): where(cols > rows, NEG, 0), cols = arange(0, Nk)
 * over the last axis, rows = arange(0, Nq) as a column [Nq, 1], NEG at
 * most -1e4 (or -inf), Nq = Nk for every size (the positions' lengths are
 * the scores' extents as polynomials). */
static bool is_computed_causal_mask(const mcir_tensor *m, const mcir_tensor *scores) {
    const mcir_node *w = m->producer;
    float neg, zero;
    if (!w || w->op != MCIR_OP_WHERE || !scalar_value(w->inputs[1], &neg) || !(neg <= -1e4f) ||
        !scalar_value(w->inputs[2], &zero) || zero != 0.0f)
        return false;
    const mcir_node *c = w->inputs[0]->producer;
    if (!c || (c->op != MCIR_OP_GREATER && c->op != MCIR_OP_LESS)) return false;
    const mcir_tensor *cols = c->inputs[c->op == MCIR_OP_GREATER ? 0 : 1];
    const mcir_tensor *rows = c->inputs[c->op == MCIR_OP_GREATER ? 1 : 0];
    mcir_extent nc, nr;
    if (!is_positions(cols, &nc) || !is_positions(rows, &nr)) return false;
    /* cols run along the last axis, rows down the one before it */
    if (cols->rank < 1 || rows->rank < 2 || rows->shape[rows->rank - 1] != 1) return false;
    for (int i = 0; i < cols->rank - 1; i++)
        if (cols->shape[i] != 1) return false;
    for (int i = 0; i < rows->rank - 2; i++)
        if (rows->shape[i] != 1) return false;
    int r = scores->rank;
    mcir_extent sq = mcir_tensor_extent(scores, r - 2), sk = mcir_tensor_extent(scores, r - 1);
    return m->rank >= 2 && mcir_extent_equal(&nc, &sk) && mcir_extent_equal(&nr, &sq) &&
           mcir_extent_equal(&sq, &sk);
}

/* The constant factor a scale/mul/div node applies. */
static bool scale_factor(mcir_action_ctx *a, const mcir_node *n, double *factor) {
    float c;
    switch (n->op) {
    case MCIR_OP_SCALE: *factor = mcir_node_float(n, "value"); return true;
    case MCIR_OP_MUL:
        for (int i = 1; i >= 0; i--)
            if (scalar_value(n->inputs[i], &c)) {
                *factor = c;
                return true;
            }
        break;
    case MCIR_OP_DIV:
        if (scalar_value(n->inputs[1], &c) && c != 0.0f) {
            *factor = 1.0 / c;
            return true;
        }
        break;
    default: break;
    }
    return fail(a, "'%s' (%s) does not scale by a constant scalar", n->name,
                mcir_op_name(n->op));
}

static bool identity_perm(const int64_t *perm, int r) {
    for (int i = 0; i < r; i++)
        if (perm[i] != i) return false;
    return true;
}

static bool apply_fuse_attention(mcir_action_ctx *a) {
    mcir_tensor *q = param_tensor(a, "q"), *k = param_tensor(a, "k"),
                *v = param_tensor(a, "v"), *mask = param_tensor(a, "mask"),
                *out = param_tensor(a, "output");
    mcir_node *qk = param_node(a, "qk"), *kt = param_node(a, "k_transpose"),
              *pv = param_node(a, "pv");
    if (!q || !k || !v || !qk || !pv || !out)
        return fail(a, "the match binds no Q, K, V, Q·Kᵀ or P·V");
    /* the scale: product of every scaling on the way */
    double scale = 1.0;
    const mcir_param_value *sp = param(a, "scales");
    for (int i = 0; sp->set && i < sp->n; i++) {
        const mcir_node *sn = a->m->nodes[sp->refs[i]];
        double f = 1.0;
        if (!sn) continue;
        if (!scale_factor(a, sn, &f)) return false;
        scale *= f;
    }
    /* K as attention wants it, [.., Nk, d]: the product reads
     * op(transpose(K, p)) with op = ᵀ unless transpose_b, so K_att is K
     * permuted by p composed with the swap of the last two dims */
    int r = k->rank;
    if (r < 2) return fail(a, "K '%s' has rank %d", k->name, r);
    int64_t p[MCIR_MAX_RANK], perm[MCIR_MAX_RANK];
    for (int i = 0; i < r; i++) p[i] = i;
    if (kt) {
        const int64_t *kp;
        int n = mcir_node_ints(kt, "perm", &kp);
        if (n != r) return fail(a, "transpose '%s' has %d axes, K has rank %d", kt->name, n, r);
        memcpy(p, kp, sizeof(int64_t) * (size_t)r);
    }
    bool tb = mcir_node_bool(qk, "transpose_b");
    for (int i = 0; i < r; i++) {
        int s = i;
        if (!tb && i == r - 2) s = r - 1;
        if (!tb && i == r - 1) s = r - 2;
        perm[i] = p[s];
    }
    mcir_node *built[4] = {NULL, NULL, NULL, NULL};
    int n_built = 0;
    mcir_tensor *k_att = k, *v_att = v;
    if (!identity_perm(perm, r)) {
        mcir_node *t = build(a, MCIR_OP_TRANSPOSE, fused_name(a, "k_transpose"), 1, &k);
        mcir_node_set_ints(a->g, t, "perm", r, perm);
        built[n_built++] = t;
        if (!infer(a, t)) goto undo;
        k_att = t->outputs[0];
    }
    if (mcir_node_bool(pv, "transpose_b")) {
        int rv = v->rank;
        if (rv < 2) {
            discard(built, n_built);
            return fail(a, "V '%s' has rank %d", v->name, rv);
        }
        int64_t vp[MCIR_MAX_RANK];
        for (int i = 0; i < rv; i++) vp[i] = i;
        vp[rv - 2] = rv - 1;
        vp[rv - 1] = rv - 2;
        mcir_node *t = build(a, MCIR_OP_TRANSPOSE, fused_name(a, "v_transpose"), 1, &v);
        mcir_node_set_ints(a->g, t, "perm", rv, vp);
        built[n_built++] = t;
        if (!infer(a, t)) goto undo;
        v_att = t->outputs[0];
    }
    bool causal = false;
    const mcir_tensor *scores = qk->outputs[0];
    if (mask && scores->rank >= 2)
        causal = is_causal_mask(mask, scores->shape[scores->rank - 2],
                                scores->shape[scores->rank - 1]) ||
                 is_computed_causal_mask(mask, scores);
    mcir_tensor *ins[4] = {q, k_att, v_att, mask};
    int n_in = mask && !causal ? 4 : 3;
    mcir_node *att = build(a, MCIR_OP_ATTENTION, fused_name(a, "attention"), n_in, ins);
    built[n_built++] = att;
    mcir_node_set_float(a->g, att, "scale", scale);
    mcir_node_set_bool(a->g, att, "causal", causal);
    if (!infer(a, att) || !take_over(a, att, out)) goto undo;
    for (int i = 0; i < n_built - 1; i++) add_result(a, built[i]);
    return true;
undo:
    discard(built, n_built);
    a->n_results = 0;
    return false;
}

/* -------------------------------------------------------------- norms */

static bool apply_norm(mcir_action_ctx *a, mcir_op op) {
    mcir_tensor *x = param_tensor(a, "x"), *eps_t = param_tensor(a, "eps"),
                *gamma = param_tensor(a, "gamma"), *out = param_tensor(a, "output");
    mcir_tensor *beta = op == MCIR_OP_LAYERNORM ? param_tensor(a, "beta") : NULL;
    if (!x || !out) return fail(a, "the match binds no input or output");
    float eps;
    if (!scalar_value(eps_t, &eps))
        return fail(a, "eps '%s' is not a constant scalar", eps_t ? eps_t->name : "?");
    if (x->rank < 1) return fail(a, "'%s' is a scalar", x->name);
    const char *stem = op == MCIR_OP_LAYERNORM ? "layernorm" : "rmsnorm";
    const char *name = fused_name(a, stem);
    if (!gamma)
        gamma = constant_fill(a, mcir_arena_printf(a->g->arena, "%s.gamma_ones", name), x->dtype,
                              x->shape[x->rank - 1], 1.0f);
    mcir_tensor *ins[3] = {x, gamma, beta};
    mcir_node *n = build(a, op, name, beta ? 3 : 2, ins);
    mcir_node_set_int(a->g, n, "axis", -1);
    mcir_node_set_float(a->g, n, "eps", (double)eps);
    if (!infer(a, n) || !take_over(a, n, out)) {
        discard(&n, 1);
        a->n_results = 0;
        return false;
    }
    return true;
}

static bool apply_fuse_layernorm(mcir_action_ctx *a) { return apply_norm(a, MCIR_OP_LAYERNORM); }
static bool apply_fuse_rmsnorm(mcir_action_ctx *a) { return apply_norm(a, MCIR_OP_RMSNORM); }

static bool apply_fuse_softmax(mcir_action_ctx *a) {
    mcir_tensor *x = param_tensor(a, "x"), *out = param_tensor(a, "output");
    if (!x || !out) return fail(a, "the match binds no input or output");
    const mcir_param_value *axis = param(a, "axis");
    mcir_node *n = build(a, MCIR_OP_SOFTMAX, fused_name(a, "softmax"), 1, &x);
    mcir_node_set_int(a->g, n, "axis", axis->set ? axis->i : -1);
    if (!infer(a, n) || !take_over(a, n, out)) {
        discard(&n, 1);
        a->n_results = 0;
        return false;
    }
    return true;
}

/* --------------------------------------------------------- replace_op */

static bool apply_replace_op(mcir_action_ctx *a) {
    const mcir_param_value *op = param(a, "op"), *inputs = param(a, "inputs"),
                           *attrs = param(a, "attrs");
    mcir_tensor *out = param_tensor(a, "output");
    if (!out) return fail(a, "the match binds no output");
    mcir_tensor *ins[16];
    if (inputs->n > 16) return fail(a, "too many inputs");
    for (int i = 0; i < inputs->n; i++) {
        ins[i] = a->m->vars[inputs->refs[i]];
        if (!ins[i])
            return fail(a, "input '%s' is not bound by this match",
                        a->m->var_names[inputs->refs[i]]);
    }
    const mcir_op_desc *desc = mcir_op_desc_of(op->op);
    if (inputs->n < desc->min_inputs || (desc->max_inputs >= 0 && inputs->n > desc->max_inputs))
        return fail(a, "%s takes %d to %d inputs, the rule gives %d", desc->name,
                    desc->min_inputs, desc->max_inputs, inputs->n);
    mcir_node *n = build(a, op->op, fused_name(a, desc->name), inputs->n, ins);
    for (int i = 0; attrs->set && i < attrs->n_attrs; i++) {
        const mcir_attr *at = &attrs->attrs[i];
        switch (at->type) {
        case MCIR_ATTR_INT: mcir_node_set_int(a->g, n, at->name, at->i); break;
        case MCIR_ATTR_FLOAT: mcir_node_set_float(a->g, n, at->name, at->f); break;
        case MCIR_ATTR_BOOL: mcir_node_set_bool(a->g, n, at->name, at->b); break;
        case MCIR_ATTR_STRING: mcir_node_set_string(a->g, n, at->name, at->s); break;
        case MCIR_ATTR_INTS: mcir_node_set_ints(a->g, n, at->name, at->n, at->ints); break;
        }
    }
    for (int i = 0; i < desc->n_attrs; i++)
        if (desc->attrs[i].required && !mcir_node_attr(n, desc->attrs[i].name)) {
            discard(&n, 1);
            return fail(a, "%s needs attribute '%s'", desc->name, desc->attrs[i].name);
        }
    if (!infer(a, n) || !take_over(a, n, out)) {
        discard(&n, 1);
        a->n_results = 0;
        return false;
    }
    return true;
}

/* ------------------------------------------------ annotate_only, group */

/* The nodes a NODES parameter names (present ones), or the anchor. */
static int target_nodes(const mcir_action_ctx *a, mcir_node **out, int max) {
    const mcir_param_value *v = param(a, "nodes");
    int k = 0;
    if (!v->set) {
        for (int i = 0; i < a->m->n_nodes && k == 0; i++)
            if (a->m->nodes[i]) out[k++] = a->m->nodes[i];
        return k;
    }
    for (int i = 0; i < v->n && k < max; i++)
        if (a->m->nodes[v->refs[i]]) out[k++] = a->m->nodes[v->refs[i]];
    return k;
}

static bool apply_annotate_only(mcir_action_ctx *a) {
    mcir_node *nodes[MCIR_ACTION_MAX_RESULTS];
    int k = target_nodes(a, nodes, MCIR_ACTION_MAX_RESULTS);
    for (int i = 0; i < k; i++) add_result(a, nodes[i]);
    return k > 0 ? true : fail(a, "no node to annotate");
}

static bool done_annotate_only(const mcir_action_ctx *a) {
    mcir_node *nodes[MCIR_ACTION_MAX_RESULTS];
    int k = target_nodes(a, nodes, MCIR_ACTION_MAX_RESULTS);
    for (int i = 0; i < k; i++)
        for (int j = 0; j < a->p->n_properties; j++)
            if (!mcir_node_has_property(nodes[i], a->p->properties[j]->name)) return false;
    return true;
}

static bool apply_fuse_group(mcir_action_ctx *a) {
    mcir_node *nodes[MCIR_ACTION_MAX_RESULTS];
    int k = target_nodes(a, nodes, MCIR_ACTION_MAX_RESULTS);
    if (k < 2) return fail(a, "a group needs two nodes");
    int gid = -1;
    for (int i = 0; i < k; i++)
        if (nodes[i]->group >= 0 && (gid < 0 || nodes[i]->group < gid)) gid = nodes[i]->group;
    if (gid < 0) gid = mcir_graph_max_group(a->g) + 1;
    /* merge the other groups the nodes were in (the group index, when the
     * engine keeps one, lists their members) */
    for (int i = 0; i < k; i++) {
        int old = nodes[i]->group;
        if (old >= 0 && old != gid) {
            int n = mcir_graph_group_size(a->g, old);
            const mcir_node **members = malloc((size_t)(n ? n : 1) * sizeof *members);
            MCIR_ASSERT(members);
            n = mcir_graph_group_members(a->g, &old, 1, members, n);
            for (int j = 0; j < n; j++) mcir_graph_set_group(a->g, (mcir_node *)members[j], gid);
            free(members);
        }
        mcir_graph_set_group(a->g, nodes[i], gid);
        add_result(a, nodes[i]);
    }
    return true;
}

static bool done_fuse_group(const mcir_action_ctx *a) {
    mcir_node *nodes[MCIR_ACTION_MAX_RESULTS];
    int k = target_nodes(a, nodes, MCIR_ACTION_MAX_RESULTS);
    for (int i = 0; i < k; i++)
        if (nodes[i]->group < 0 || nodes[i]->group != nodes[0]->group) return false;
    return true;
}

/* ---------------------------------------------------------------- inplace */

static bool apply_inplace(mcir_action_ctx *a) {
    mcir_node *n = param_node(a, "node");
    mcir_tensor *t = param_tensor(a, "input");
    if (!n || !t) return fail(a, "the match binds no node or input");
    if (!(mcir_op_desc_of(n->op)->flags & MCIR_OPF_INPLACE))
        return fail(a, "%s cannot write over its input", mcir_op_name(n->op));
    if (t->kind != MCIR_TENSOR_INTERMEDIATE)
        return fail(a, "'%s' is a graph %s: its buffer is not the compiler's to reuse", t->name,
                    mcir_tensor_kind_name(t->kind));
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] == t) {
            n->inplace_input = i;
            add_result(a, n);
            return true;
        }
    return fail(a, "'%s' is not an input of '%s'", t->name, n->name);
}

static bool done_inplace(const mcir_action_ctx *a) {
    mcir_node *n = param_node(a, "node");
    return n && n->inplace_input >= 0;
}

/* ------------------------------------------------- horizontal matmul */

/* The bias add right after a matmul: its only consumer, an add of a
 * constant [N] weight of the output's dtype, ungrouped; or NULL. */
static mcir_node *bias_after(const mcir_graph *g, const mcir_node *mm, mcir_tensor **bias) {
    mcir_tensor *y = mm->outputs[0];
    mcir_node *cons[2];
    if (y->is_output || mcir_graph_consumers(g, y, cons, 2) != 1) return NULL;
    mcir_node *ad = cons[0];
    if (ad->op != MCIR_OP_ADD || ad->group >= 0 || ad->n_inputs != 2) return NULL;
    mcir_tensor *b = ad->inputs[0] == y ? ad->inputs[1] : ad->inputs[0];
    if (b == y || b->kind != MCIR_TENSOR_WEIGHT || b->rank != 1 || b->dtype != y->dtype ||
        b->shape[0] != y->shape[y->rank - 1])
        return NULL;
    *bias = b;
    return ad;
}

/* Stores f32 values (already representable) in dtype dt at element i. */
static void store_value(unsigned char *data, mcir_dtype dt, int64_t i, float v) {
    mcir_value_set(dt, data, i, v);
}

/* ------------------------------------------- constants of sharded weights */

/* A graph with ranks holds other values of a sharded weight on each rank.
 * An action that builds a new constant from weights' values builds each
 * rank's from that rank's values (weight_part_values), and the new
 * weight's whole data is the ranks' constants one after another along its
 * shard axis (rank-major): so rank r takes exactly its own. The weights an
 * action reads must then be split along the axis the new one is (checked
 * by sharded_like, or the action fails saying why). */

/* t's values for rank r: its part of a sharded weight, all of another. */
static void weight_part_values(const mcir_tensor *t, int r, float *out) {
    if (t->shard_axis < 0 || t->shard_parts <= 1) {
        mcir_weight_values(t, out);
        return;
    }
    if (!t->data) {
        mcir_fill_seeded_part(t, 0, r, out);
        return;
    }
    void *part = malloc((size_t)mcir_tensor_bytes(t) + 1);
    MCIR_ASSERT(part);
    mcir_tensor_take_part(t, t->data, mcir_dtype_size(t->dtype), r, part);
    mcir_values_to_f32(t->dtype, part, out, mcir_tensor_numel(t));
    free(part);
}

/* The ranks of the weights ws (1: none sharded), where every one is split
 * in one block along axes[i] into the same parts; 0 (with why) where they
 * are split otherwise. */
static int sharded_like(mcir_action_ctx *a, mcir_tensor *const *ws, const int *axes, int n) {
    int R = 0;
    for (int i = 0; i < n; i++) {
        const mcir_tensor *t = ws[i];
        int parts = t->shard_axis >= 0 ? t->shard_parts : 1;
        if (R == 0) R = parts;
        if (parts != R || (parts > 1 && (t->shard_axis != axes[i] || t->shard_blocks > 1))) {
            fail(a, "'%s' is %s: the weights' parts do not line up along the new constant's axis", t->name,
                 parts > 1 ? mcir_arena_printf(a->g->arena, "split along axis %d in %d parts", t->shard_axis, parts)
                           : "whole on every rank while the others are split");
            return 0;
        }
    }
    return R > 0 ? R : 1;
}

/* Writes rank r's constant `part` (t's per-rank shape) into t's whole data
 * along axis (rank-major): the inverse of mcir_tensor_take_part. */
static void put_part(const mcir_tensor *t, int axis, int R, int r, const unsigned char *part, unsigned char *whole) {
    size_t es = mcir_dtype_size(t->dtype);
    int64_t outer = 1, run = 1;
    for (int i = 0; i < axis; i++) outer *= t->shape[i];
    for (int i = axis; i < t->rank; i++) run *= t->shape[i];
    size_t bytes = (size_t)run * es;
    for (int64_t i = 0; i < outer; i++)
        memcpy(whole + (size_t)(i * R + r) * bytes, part + (size_t)i * bytes, bytes);
}

/* Marks t (per-rank shape) split along axis into R parts, whole data `whole`. */
static void set_ranked(mcir_tensor *t, int axis, int R, unsigned char *whole) {
    t->data = whole;
    if (R > 1) {
        t->shard_axis = axis;
        t->shard_parts = R;
        t->shard_blocks = 1;
    }
}

/* A new constant weight: the parts concatenated along `axis` (0 or 1 of
 * rank 2, or 0 of rank 1), their values taken once now (each rank's from
 * its parts of sharded ones, split along the same axis). */
static mcir_tensor *concat_weights(mcir_action_ctx *a, const char *name, mcir_tensor **parts,
                                   int n, int axis) {
    mcir_graph *g = a->g;
    int axes[MCIR_MAX_HORIZONTAL];
    for (int i = 0; i < n; i++) axes[i] = parts[i]->rank == 2 ? axis : 0;
    int R = sharded_like(a, parts, axes, n);
    if (R == 0) return NULL;
    int rank = parts[0]->rank;
    int64_t shape[2] = {parts[0]->shape[0], rank == 2 ? parts[0]->shape[1] : 1};
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += parts[i]->shape[axis];
    shape[axis] = total;
    mcir_dtype dt = parts[0]->dtype;
    mcir_tensor *t = mcir_graph_add_tensor(g, mcir_graph_fresh_name(g, name), dt, rank, shape,
                                           MCIR_TENSOR_WEIGHT);
    MCIR_ASSERT(t);
    int64_t numel = mcir_tensor_numel(t);
    size_t es = mcir_dtype_size(dt);
    unsigned char *whole = mcir_arena_alloc(g->arena, (size_t)(numel * R) * es);
    unsigned char *data = R > 1 ? malloc((size_t)numel * es + 1) : whole;
    MCIR_ASSERT(data);
    int64_t cols = rank == 2 ? shape[1] : total;
    for (int rk = 0; rk < R; rk++) {
        int64_t off = 0;
        for (int i = 0; i < n; i++) {
            int64_t pn = mcir_tensor_numel(parts[i]);
            float *v = malloc((size_t)pn * sizeof *v);
            MCIR_ASSERT(v);
            weight_part_values(parts[i], rk, v);
            int64_t prow = rank == 2 ? parts[i]->shape[1] : pn, prows = pn / prow;
            for (int64_t r = 0; r < prows; r++)
                for (int64_t c = 0; c < prow; c++) {
                    /* axis 0: rows follow each other; axis 1: columns side by side */
                    int64_t at = axis == 0 ? (off + r) * cols + c : r * cols + off + c;
                    if (rank == 1) at = off + c;
                    store_value(data, dt, at, v[r * prow + c]);
                }
            off += axis == 0 && rank == 2 ? prows : parts[i]->shape[axis];
            free(v);
        }
        if (R > 1) put_part(t, rank == 2 ? axis : 0, R, rk, data, whole);
    }
    if (R > 1) free(data);
    set_ranked(t, rank == 2 ? axis : 0, R, whole);
    return t;
}

/* The longest dotted prefix the names share ("l0.attn." of q_proj and
 * k_proj) plus stem, made unique. */
static const char *shared_name(mcir_action_ctx *a, mcir_node **nodes, int n, const char *stem) {
    size_t common = strlen(nodes[0]->name);
    for (int i = 1; i < n; i++) {
        size_t k = 0;
        while (k < common && nodes[i]->name[k] == nodes[0]->name[k]) k++;
        common = k;
    }
    size_t cut = 0;
    for (size_t i = 0; i < common; i++)
        if (nodes[0]->name[i] == '.' || nodes[0]->name[i] == '/') cut = i + 1;
    char buf[512];
    snprintf(buf, sizeof buf, "%.*s%s", (int)(cut < 400 ? cut : 400), nodes[0]->name, stem);
    return mcir_graph_fresh_name(a->g, buf);
}

static bool apply_fuse_horizontal_matmul(mcir_action_ctx *a) {
    mcir_node *mm = param_node(a, "node");
    if (!mm) return fail(a, "the match binds no matmul");
    mcir_node *sib[MCIR_MAX_HORIZONTAL];
    int n = mcir_matmul_siblings(a->g, mm, sib, MCIR_MAX_HORIZONTAL);
    if (n < 2 || n > MCIR_MAX_HORIZONTAL)
        return fail(a, "'%s' has %d matmul siblings", mm->name, n - 1);
    bool tb = mcir_node_bool(mm, "transpose_b");
    int64_t weights = 0;
    mcir_tensor *w[MCIR_MAX_HORIZONTAL], *bias[MCIR_MAX_HORIZONTAL], *outs[MCIR_MAX_HORIZONTAL];
    mcir_node *adds[MCIR_MAX_HORIZONTAL];
    int64_t sizes[MCIR_MAX_HORIZONTAL];
    int n_bias = 0;
    for (int i = 0; i < n; i++) {
        w[i] = sib[i]->inputs[1];
        weights += mcir_tensor_numel(w[i]);
        sizes[i] = tb ? w[i]->shape[0] : w[i]->shape[1];
        adds[i] = bias_after(a->g, sib[i], &bias[i]);
        n_bias += adds[i] != NULL;
    }
    if (weights > ((int64_t)1 << 28))
        return fail(a, "the concatenated weight would hold %lld elements", (long long)weights);
    bool with_bias = n_bias == n;   /* all or none: a partial bias stays an add per part */
    for (int i = 0; i < n; i++) outs[i] = with_bias ? adds[i]->outputs[0] : sib[i]->outputs[0];

    mcir_tensor *A = mm->inputs[0];
    mcir_tensor *wcat = concat_weights(a, shared_name(a, sib, n, "horizontal.weight"), w, n,
                                       tb ? 0 : 1);
    if (!wcat) return false;
    mcir_tensor *bcat = with_bias ? concat_weights(a, shared_name(a, sib, n, "horizontal.bias"), bias, n, 0) : NULL;
    if (with_bias && !bcat) return false;
    mcir_node *built[3] = {NULL, NULL, NULL};
    mcir_node *gm = build(a, MCIR_OP_MATMUL, shared_name(a, sib, n, "horizontal.matmul"), 2,
                          (mcir_tensor *[]){A, wcat});
    built[0] = gm;
    mcir_node_set_bool(a->g, gm, "transpose_a", mcir_node_bool(mm, "transpose_a"));
    mcir_node_set_bool(a->g, gm, "transpose_b", tb);
    if (!infer(a, gm)) goto undo;
    mcir_tensor *prod = gm->outputs[0];
    if (with_bias) {
        mcir_node *ad = build(a, MCIR_OP_ADD, shared_name(a, sib, n, "horizontal.bias_add"), 2,
                              (mcir_tensor *[]){prod, bcat});
        built[1] = ad;
        if (!infer(a, ad)) goto undo;
        prod = ad->outputs[0];
    }
    /* the parts: the original tensors, so names, readers and graph outputs stay */
    for (int i = 0; i < n; i++) {
        if (with_bias) adds[i]->dead = true;
        sib[i]->dead = true;
    }
    mcir_node *sp = mcir_graph_add_node(a->g, MCIR_OP_SPLIT, shared_name(a, sib, n, "horizontal.split"),
                                        1, &prod, n, outs);
    built[2] = sp;
    sp->origin_rule = a->p->name;
    sp->origin_nodes = a->origin_nodes;
    sp->loc = mm->loc;
    mcir_node_set_int(a->g, sp, "axis", -1);
    mcir_node_set_ints(a->g, sp, "sizes", n, sizes);
    if (!infer(a, sp)) {
        for (int i = 0; i < n; i++) {
            sib[i]->dead = false;
            if (with_bias) adds[i]->dead = false;
            outs[i]->producer = with_bias ? adds[i] : sib[i];
        }
        goto undo;
    }
    for (int i = 0; i < 3; i++)
        if (built[i]) add_result(a, built[i]);
    return true;
undo:
    discard(built, 3);
    a->n_results = 0;
    return false;
}

/* ------------------------------------------------- gated linear unit */

/* act(x·Wg) ∘ (x·Wu) (SwiGLU, GeGLU; mcir_glu_operands) -> P = x·Wi with
 * Wi the two weights interleaved once, here, in blocks of 8 output
 * columns (Wi's columns 16b..16b+7 are Wg's 8b..8b+7, 16b+8..16b+15 Wu's;
 * rows of an [N, K] weight under transpose_b), read back as the gate's
 * and the up's halves (mcir_glu_half: reshape [.., F/8, 2, 8], slice,
 * reshape [.., F]), then act(gate half) * up half as before. The whole is
 * one fusion group headed by the matmul: in a GEMM's accumulator fragment
 * (mma.sync and wgmma alike) a thread holds columns 8j + 2t, 8j + 2t + 1
 * of each 8-column block, so a gate column's up column is in the same
 * thread's next block, and the epilogue computes act(g) * u from the
 * pair; only [.., F] is stored. The interpreter runs the interleaved
 * product, the reshapes and the slices (--verify checks the rewrite). */
static bool apply_fuse_glu_matmul(mcir_action_ctx *a) {
    mcir_node *glu = param_node(a, "glu"), *act = param_node(a, "act"), *gate = param_node(a, "gate"),
              *up = param_node(a, "up");
    if (!glu || !act || !gate || !up) return fail(a, "the match binds no product, activation, gate or up projection");
    char why[512];
    if (!mcir_glu_operands(a->g, glu, act, gate, up, why, sizeof why)) return fail(a, "%s", why);
    mcir_graph *g = a->g;
    mcir_tensor *X = gate->inputs[0], *Wg = gate->inputs[1], *Wu = up->inputs[1];
    mcir_tensor *G = gate->outputs[0], *Ga = act->outputs[0], *U = up->outputs[0], *Y = glu->outputs[0];
    const bool tb = mcir_node_bool(gate, "transpose_b");
    const int64_t F = G->shape[G->rank - 1], K = tb ? Wg->shape[1] : Wg->shape[0];
    const int64_t ws[2] = {tb ? 2 * F : K, tb ? K : 2 * F};
    mcir_tensor *wi = mcir_graph_add_tensor(
        g, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s.glu_weight", gate->name)), Wg->dtype, 2, ws,
        MCIR_TENSOR_WEIGHT);
    MCIR_ASSERT(wi);
    const int64_t wn = mcir_tensor_numel(Wg);
    const int naxis = tb ? 0 : 1;
    int R = sharded_like(a, (mcir_tensor *[]){Wg, Wu}, (int[]){naxis, naxis}, 2);
    if (R == 0) return false;   /* before anything is built: wi is an unused tensor */
    size_t es = mcir_dtype_size(Wg->dtype);
    unsigned char *whole = mcir_arena_alloc(g->arena, (size_t)(2 * wn * R) * es);
    unsigned char *data = R > 1 ? malloc((size_t)(2 * wn) * es + 1) : whole;
    float *vg = malloc((size_t)wn * sizeof *vg), *vu = malloc((size_t)wn * sizeof *vu);
    MCIR_ASSERT(vg && vu && data);
    for (int rk = 0; rk < R; rk++) {   /* each rank's gate and up parts interleaved */
        weight_part_values(Wg, rk, vg);
        weight_part_values(Wu, rk, vu);
        for (int64_t j = 0; j < 2 * F; j++) {   /* column j of Wi: column 8 (j / 16) + j % 8 of Wg or Wu */
            const int64_t f = 8 * (j / 16) + j % 8;
            const float *src = (j / 8) % 2 ? vu : vg;
            for (int64_t kk = 0; kk < K; kk++)
                store_value(data, Wg->dtype, tb ? j * K + kk : kk * 2 * F + j, src[tb ? f * K + kk : kk * F + f]);
        }
        if (R > 1) put_part(wi, naxis, R, rk, data, whole);
    }
    free(vg);
    free(vu);
    if (R > 1) free(data);
    set_ranked(wi, naxis, R, whole);

    enum { N_BUILT = 9 };
    mcir_node *built[N_BUILT] = {0};
    int nb = 0;
    mcir_node *mm = built[nb++] = build(a, MCIR_OP_MATMUL, fused_name(a, "glu.matmul"), 2, (mcir_tensor *[]){X, wi});
    mcir_node_set_bool(g, mm, "transpose_a", mcir_node_bool(gate, "transpose_a"));
    mcir_node_set_bool(g, mm, "transpose_b", tb);
    if (!infer(a, mm)) goto undo;
    mcir_tensor *P = mm->outputs[0], *half[2];
    const int r = P->rank;
    if (P->shape[r - 1] != 2 * F || r + 2 > MCIR_MAX_RANK) {
        fail(a, "the interleaved product '%s' is not [.., %lld]", P->name, (long long)(2 * F));
        goto undo;
    }
    for (int h = 0; h < 2; h++) {
        int64_t shape[MCIR_MAX_RANK];
        for (int i = 0; i < r - 1; i++) shape[i] = P->shape[i];
        shape[r - 1] = F / 8, shape[r] = 2, shape[r + 1] = 8;
        mcir_node *r1 = built[nb++] = build(a, MCIR_OP_RESHAPE, fused_name(a, h ? "glu.up_blocks" : "glu.gate_blocks"),
                                            1, &P);
        mcir_node_set_ints(g, r1, "shape", r + 2, shape);
        if (!infer(a, r1)) goto undo;
        mcir_node *sl = built[nb++] = build(a, MCIR_OP_SLICE, fused_name(a, h ? "glu.up_half" : "glu.gate_half"), 1,
                                            &r1->outputs[0]);
        mcir_node_set_int(g, sl, "axis", -2);
        mcir_node_set_int(g, sl, "start", h);
        mcir_node_set_int(g, sl, "end", h + 1);
        if (!infer(a, sl)) goto undo;
        mcir_node *r2 = built[nb++] = build(a, MCIR_OP_RESHAPE, fused_name(a, h ? "glu.up" : "glu.gate"), 1,
                                            &sl->outputs[0]);
        mcir_node_set_ints(g, r2, "shape", G->rank, G->shape);
        if (!infer(a, r2)) goto undo;
        half[h] = r2->outputs[0];
        int back = -1;
        if (mcir_glu_half(half[h], &back) != P || back != h) {
            fail(a, "internal error: half %d of '%s' is not read back as the paired epilogue expects", h, P->name);
            goto undo;
        }
    }
    /* the activation and the product, the same ops over the halves */
    mcir_node *na = built[nb++] = build(a, act->op, fused_name(a, mcir_op_name(act->op)), 1, &half[0]);
    for (int i = 0; i < act->n_attrs; i++) {
        const mcir_attr *at = &act->attrs[i];
        switch (at->type) {
        case MCIR_ATTR_INT: mcir_node_set_int(g, na, at->name, at->i); break;
        case MCIR_ATTR_FLOAT: mcir_node_set_float(g, na, at->name, at->f); break;
        case MCIR_ATTR_BOOL: mcir_node_set_bool(g, na, at->name, at->b); break;
        case MCIR_ATTR_STRING: mcir_node_set_string(g, na, at->name, at->s); break;
        case MCIR_ATTR_INTS: mcir_node_set_ints(g, na, at->name, at->n, at->ints); break;
        }
    }
    if (!infer(a, na)) goto undo;
    mcir_tensor *gated = na->outputs[0];
    mcir_tensor *ins[2] = {glu->inputs[0] == U ? half[1] : gated, glu->inputs[0] == U ? gated : half[1]};
    mcir_node *nm = built[nb++] = build(a, MCIR_OP_MUL, fused_name(a, "glu.product"), 2, ins);
    if (!infer(a, nm) || !take_over(a, nm, Y)) goto undo;
    (void)Ga;
    const int gid = mcir_graph_max_group(g) + 1;
    for (int i = 0; i < nb; i++) {
        mcir_graph_set_group(g, built[i], gid);
        add_result(a, built[i]);
    }
    return true;
undo:
    discard(built, N_BUILT);
    a->n_results = 0;
    return false;
}

/* ------------------------------------------------ norm gamma into weights */

/* rmsnorm(x, gamma) · W -> rmsnorm(x, ones) · W' with W' = diag(gamma) W
 * (mcir_norm_gamma_foldable): W's row k scaled by gamma[k] once, here (its
 * column k under transpose_b), so no kernel multiplies by gamma. Applied
 * per matmul: the norm without gamma is built by the first and reused by
 * the others (the rule's earlier result: a live rmsnorm of the same x and
 * attributes whose gamma is this rule's ones), and the old norm goes with
 * its last reader. The interpreter runs both (--verify): the product
 * rounds differently (gamma rounded into W, not into the norm's output),
 * within the dtype's tolerance. */
static bool apply_fold_norm_gamma(mcir_action_ctx *a) {
    mcir_node *mm = param_node(a, "node"), *norm = param_node(a, "norm");
    if (!mm || !norm) return fail(a, "the match binds no matmul or norm");
    char why[512];
    if (!mcir_norm_gamma_foldable(a->g, norm, why, sizeof why)) return fail(a, "%s", why);
    if (mm->inputs[0] != norm->outputs[0]) return fail(a, "'%s' does not read '%s'", mm->name, norm->name);
    mcir_graph *g = a->g;
    mcir_tensor *X = norm->inputs[0], *gamma = norm->inputs[1], *W = mm->inputs[1];
    const int64_t k = X->shape[X->rank - 1];
    const bool tb = mcir_node_bool(mm, "transpose_b");
    mcir_node *built[2] = {NULL, NULL};
    /* the norm without gamma: this rule's, if an earlier fold built it */
    mcir_node *unit = NULL;
    for (int i = 0; i < g->n_nodes && !unit; i++) {
        mcir_node *c = g->nodes[i];
        if (!c->dead && c->op == MCIR_OP_RMSNORM && c->inputs[0] == X && c->origin_rule &&
            strcmp(c->origin_rule, a->p->name) == 0 && mcir_node_int(c, "axis") == mcir_node_int(norm, "axis") &&
            mcir_node_float(c, "eps") == mcir_node_float(norm, "eps"))
            unit = c;
    }
    if (!unit) {
        mcir_tensor *ones = constant_fill(a, mcir_arena_printf(g->arena, "%s.unit_gamma", norm->name), gamma->dtype,
                                          k, 1.0f);
        unit = built[0] = build(a, MCIR_OP_RMSNORM, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s.unit",
                                                                                               norm->name)),
                                2, (mcir_tensor *[]){X, ones});
        mcir_node_set_int(g, unit, "axis", mcir_node_int(norm, "axis"));
        mcir_node_set_float(g, unit, "eps", mcir_node_float(norm, "eps"));
        if (!infer(a, unit)) goto undo;
    }
    /* W' = diag(gamma) W, in W's dtype */
    {
        const int64_t wn = mcir_tensor_numel(W);
        mcir_tensor *ws = mcir_graph_add_tensor(
            g, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s.gamma_folded", W->name)), W->dtype, 2,
            W->shape, MCIR_TENSOR_WEIGHT);
        MCIR_ASSERT(ws);
        /* a W split by its output columns (N): each rank's columns scaled alike */
        const int naxis = tb ? 0 : 1;
        int R = sharded_like(a, (mcir_tensor *[]){W}, (int[]){naxis}, 1);
        if (R == 0 || gamma->shard_axis >= 0) {
            if (R) fail(a, "'%s' is split across the ranks", gamma->name);
            goto undo;
        }
        float *wv = malloc((size_t)wn * sizeof *wv + 1), *gv = malloc((size_t)k * sizeof *gv + 1);
        size_t es = mcir_dtype_size(W->dtype);
        unsigned char *whole = mcir_arena_alloc(g->arena, (size_t)(wn * R) * es);
        unsigned char *data = R > 1 ? malloc((size_t)wn * es + 1) : whole;
        MCIR_ASSERT(wv && gv && data);
        mcir_weight_values(gamma, gv);
        const int64_t cols = W->shape[1];
        for (int rk = 0; rk < R; rk++) {
            weight_part_values(W, rk, wv);
            for (int64_t i = 0; i < wn; i++) {
                const int64_t kk = tb ? i % cols : i / cols;   /* [N, K]: column k; [K, N]: row k */
                store_value(data, W->dtype, i, wv[i] * gv[kk]);
            }
            if (R > 1) put_part(ws, naxis, R, rk, data, whole);
        }
        free(wv);
        free(gv);
        if (R > 1) free(data);
        set_ranked(ws, naxis, R, whole);
        mcir_node *nm = built[1] = build(a, MCIR_OP_MATMUL, mcir_graph_fresh_name(g, mcir_arena_printf(
                                                                                       g->arena, "%s.folded", mm->name)),
                                         2, (mcir_tensor *[]){unit->outputs[0], ws});
        mcir_node_set_bool(g, nm, "transpose_b", tb);
        if (!infer(a, nm) || !take_over(a, nm, mm->outputs[0])) goto undo;
    }
    if (built[0]) add_result(a, built[0]);
    return true;
undo:
    discard(built, 2);
    a->n_results = 0;
    return false;
}

/* ------------------------------------------------------ conv affine fold */

/* The values of constant c, one per output channel of a conv output of
 * rank `rank` ([N, C, H, W]): c broadcasts to it with every dim 1 except,
 * possibly, the channel's. */
static bool channel_values(const mcir_tensor *c, int64_t channels, int rank, float *out) {
    if (!c || c->kind != MCIR_TENSOR_WEIGHT || c->rank > rank) return false;
    for (int k = 0; k < c->rank; k++) {
        int ax = rank - c->rank + k;
        if (c->shape[k] != 1 && !(ax == 1 && c->shape[k] == channels)) return false;
    }
    int64_t n = mcir_tensor_numel(c);
    float *v = malloc((size_t)n * sizeof *v);
    MCIR_ASSERT(v);
    mcir_weight_values(c, v);
    for (int64_t i = 0; i < channels; i++) out[i] = v[n == 1 ? 0 : i];
    free(v);
    return true;
}

/* conv2d(X, W, B) · s (+ t), s and t one constant per output channel (what
 * the ONNX importer makes of inference BatchNormalization) -> conv2d(X,
 * W·s, B·s + t): the weight and bias are computed once, here. */
static bool apply_fold_conv_affine(mcir_action_ctx *a) {
    mcir_node *conv = param_node(a, "conv"), *mul = param_node(a, "scale"),
              *add = param_node(a, "shift");
    mcir_tensor *out = param_tensor(a, "output");
    if (!conv || !mul || !out) return fail(a, "the match binds no conv, scale or output");
    mcir_tensor *C = conv->outputs[0], *W = conv->inputs[1];
    mcir_tensor *B = conv->n_inputs > 2 ? conv->inputs[2] : NULL;
    if (W->kind != MCIR_TENSOR_WEIGHT || (B && B->kind != MCIR_TENSOR_WEIGHT))
        return fail(a, "'%s' has a weight or bias computed at run time", conv->name);
    char s1[96], s2[96];
    if (out->rank != C->rank || memcmp(out->shape, C->shape, sizeof(int64_t) * (size_t)C->rank))
        return fail(a, "'%s' is %s, the conv output '%s' %s: the affine broadcasts it",
                    out->name, mcir_shape_str(out, s1, sizeof s1), C->name,
                    mcir_shape_str(C, s2, sizeof s2));
    int64_t co = W->shape[0], per = mcir_tensor_numel(W) / co;
    float *sv = malloc((size_t)co * sizeof *sv), *tv = calloc((size_t)co, sizeof *tv);
    float *wv = malloc((size_t)(co * per) * sizeof *wv), *bv = calloc((size_t)co, sizeof *bv);
    MCIR_ASSERT(sv && tv && wv && bv);
    mcir_tensor *s = mul->inputs[0] == C ? mul->inputs[1] : mul->inputs[0];
    mcir_tensor *t = !add ? NULL : add->inputs[0] == mul->outputs[0] ? add->inputs[1] : add->inputs[0];
    bool ok = channel_values(s, co, C->rank, sv) && (!t || channel_values(t, co, C->rank, tv));
    mcir_node *n = NULL;
    if (!ok) {
        fail(a, "'%s'%s%s is not one constant per output channel of '%s'", s->name,
             t ? " or " : "", t ? t->name : "", conv->name);
        goto out;
    }
    mcir_weight_values(W, wv);
    if (B) mcir_weight_values(B, bv);
    mcir_graph *g = a->g;
    mcir_tensor *w2 = mcir_graph_add_tensor(
        g, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s.folded", W->name)), W->dtype,
        W->rank, W->shape, MCIR_TENSOR_WEIGHT);
    int64_t bshape[1] = {co};
    mcir_tensor *b2 = mcir_graph_add_tensor(
        g, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s.folded_bias", conv->name)),
        W->dtype, 1, bshape, MCIR_TENSOR_WEIGHT);
    MCIR_ASSERT(w2 && b2);
    unsigned char *wd = mcir_arena_alloc(g->arena, (size_t)(co * per) * mcir_dtype_size(W->dtype));
    unsigned char *bd = mcir_arena_alloc(g->arena, (size_t)co * mcir_dtype_size(W->dtype));
    for (int64_t o = 0; o < co; o++) {
        for (int64_t i = 0; i < per; i++)
            store_value(wd, W->dtype, o * per + i, (float)((double)wv[o * per + i] * sv[o]));
        store_value(bd, W->dtype, o, (float)((double)bv[o] * sv[o] + tv[o]));
    }
    w2->data = wd;
    b2->data = bd;
    n = build(a, MCIR_OP_CONV2D, fused_name(a, "conv_folded"), 3,
              (mcir_tensor *[]){conv->inputs[0], w2, b2});
    for (int i = 0; i < conv->n_attrs; i++) {
        const mcir_attr *at = &conv->attrs[i];
        if (at->type == MCIR_ATTR_INTS) mcir_node_set_ints(g, n, at->name, at->n, at->ints);
        else if (at->type == MCIR_ATTR_INT) mcir_node_set_int(g, n, at->name, at->i);
    }
    ok = infer(a, n) && take_over(a, n, out);
    if (!ok) {
        discard(&n, 1);
        a->n_results = 0;
    }
out:
    free(sv), free(tv), free(wv), free(bv);
    return ok;
}

/* ---------------------------------------------- pointwise conv as GEMM */

/* A constant weight of `shape` holding w's values in order (a weight
 * without data is materialised: its seeded values depend on its shape). */
static mcir_tensor *weight_as(mcir_action_ctx *a, const mcir_tensor *w, const char *stem, int rank,
                              const int64_t *shape) {
    mcir_graph *g = a->g;
    mcir_tensor *t = mcir_graph_add_tensor(g, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s.%s", w->name, stem)),
                                           w->dtype, rank, shape, MCIR_TENSOR_WEIGHT);
    MCIR_ASSERT(t);
    int64_t n = mcir_tensor_numel(w);
    MCIR_ASSERT(n == mcir_tensor_numel(t));
    float *v = malloc((size_t)n * sizeof *v + 1);
    MCIR_ASSERT(v);
    mcir_weight_values(w, v);
    unsigned char *data = mcir_arena_alloc(g->arena, (size_t)n * mcir_dtype_size(w->dtype));
    for (int64_t i = 0; i < n; i++) store_value(data, w->dtype, i, v[i]);
    free(v);
    t->data = data;
    return t;
}

/* A reshape of x to `shape` (one -1 allowed), named after the conv. */
static mcir_node *reshape_to(mcir_action_ctx *a, const mcir_node *conv, const char *stem, mcir_tensor *x, int rank,
                             const int64_t *shape) {
    mcir_node *n = build(a, MCIR_OP_RESHAPE,
                         mcir_graph_fresh_name(a->g, mcir_arena_printf(a->g->arena, "%s.%s", conv->name, stem)), 1, &x);
    mcir_node_set_ints(a->g, n, "shape", rank, shape);
    return n;
}

/* A conv attribute's plain value: `n` ints (0: one int) each equal to `ok`. */
typedef struct conv_plain {
    const char *name;
    int n;
    int64_t ok;
} conv_plain;

/* The first of the conv's attributes in `want` with an element off its plain
 * value: its name and that value; false where every one is plain (or absent). */
static bool conv_attr_off(const mcir_node *conv, const conv_plain *want, int count, const char **name,
                          int64_t *value) {
    for (int k = 0; k < count; k++) {
        if (!mcir_node_attr(conv, want[k].name)) continue;
        const int64_t *v = NULL;
        const int n = want[k].n ? mcir_node_ints(conv, want[k].name, &v) : 1;
        for (int i = 0; i < n; i++) {
            const int64_t x = want[k].n ? v[i] : mcir_node_int(conv, want[k].name);
            if (x != want[k].ok) {
                *name = want[k].name;
                *value = x;
                return true;
            }
        }
    }
    return false;
}

/* conv2d(X [N, C, H, W], W [O, C, 1, 1], B [O]), stride 1, no padding, one
 * group -> reshape(matmul(W as [O, C], X as [N, C, H·W]) (+ B as [O, 1]),
 * [N, O, H, W]): per image a GEMM with M = O, N = H·W, K = C, A the weight
 * every image shares (K-major), B the image (MN-major), the output rows
 * the output channels. The matmul lowerings — cuBLAS, the sm_80 cp.async
 * ring, the sm_90a TMA + wgmma GEMM — then take it with its epilogue,
 * where the conv kept the im2col implicit GEMM on mma.sync. Refused
 * (traced) for anything else, and for images of fewer than 64 pixels, where
 * a batched GEMM would pad most of each N tile (the implicit GEMM folds the
 * images into M). N may be a dim; C, H and W are integers. */
static bool apply_conv_as_matmul(mcir_action_ctx *a) {
    mcir_node *conv = param_node(a, "conv");
    mcir_tensor *out = param_tensor(a, "output");
    if (!conv || !out || conv->op != MCIR_OP_CONV2D) return fail(a, "the match binds no conv2d or output");
    mcir_tensor *X = conv->inputs[0], *W = conv->inputs[1], *B = conv->n_inputs > 2 ? conv->inputs[2] : NULL;
    if (X->rank != 4 || W->rank != 4 || out->rank != 4) return fail(a, "'%s' is not an NCHW conv", conv->name);
    if (W->kind != MCIR_TENSOR_WEIGHT || (B && B->kind != MCIR_TENSOR_WEIGHT))
        return fail(a, "'%s' has a weight or bias computed at run time", conv->name);
    if (W->shape[2] != 1 || W->shape[3] != 1)
        return fail(a, "'%s' has a %lldx%lld kernel, not 1x1", conv->name, (long long)W->shape[2],
                    (long long)W->shape[3]);
    static const conv_plain plain[] = {{"strides", 2, 1}, {"pads", 4, 0}, {"groups", 0, 1}};
    const char *attr;
    int64_t value;
    if (conv_attr_off(conv, plain, 3, &attr, &value))
        return fail(a, "'%s' has %s %lld: not a plain pointwise conv", conv->name, attr, (long long)value);
    for (int i = 1; i < 4; i++) {
        mcir_extent e = mcir_tensor_extent(X, i);
        if (!mcir_extent_is_const(&e, NULL)) return fail(a, "'%s': input dim %d is symbolic", conv->name, i);
    }
    int64_t C = X->shape[1], H = X->shape[2], Wd = X->shape[3], O = W->shape[0], HW = H * Wd;
    if (HW < 64)
        return fail(a, "'%s': %lld pixels per image (< 64): a GEMM per image would pad most of its tile; the "
                    "implicit GEMM folds the images into M", conv->name, (long long)HW);
    if (X->dtype != W->dtype || (B && B->dtype != out->dtype))
        return fail(a, "'%s' mixes %s and %s", conv->name, mcir_dtype_name(X->dtype), mcir_dtype_name(W->dtype));
    mcir_node *built[5] = {NULL};
    int nb = 0;
    const int64_t xs[3] = {-1, C, HW}, ws[2] = {O, C}, bs[2] = {O, 1}, ys[4] = {-1, O, H, Wd};
    mcir_node *rx = built[nb++] = reshape_to(a, conv, "pixels", X, 3, xs);
    if (!infer(a, rx)) goto undo;
    mcir_tensor *wm = weight_as(a, W, "rows", 2, ws);
    mcir_node *mm = built[nb++] =
        build(a, MCIR_OP_MATMUL, mcir_graph_fresh_name(a->g, mcir_arena_printf(a->g->arena, "%s.gemm", conv->name)), 2,
              (mcir_tensor *[]){wm, rx->outputs[0]});
    if (!infer(a, mm)) goto undo;
    mcir_tensor *y = mm->outputs[0];
    if (B) {
        mcir_tensor *bm = weight_as(a, B, "column", 2, bs);
        mcir_node *ad = built[nb++] =
            build(a, MCIR_OP_ADD, mcir_graph_fresh_name(a->g, mcir_arena_printf(a->g->arena, "%s.bias", conv->name)), 2,
                  (mcir_tensor *[]){y, bm});
        if (!infer(a, ad)) goto undo;
        y = ad->outputs[0];
    }
    mcir_node *ry = built[nb++] = reshape_to(a, conv, "image", y, 4, ys);
    if (!infer(a, ry) || !take_over(a, ry, out)) goto undo;
    for (int i = 0; i < nb; i++) add_result(a, built[i]);
    return true;
undo:
    discard(built, nb);
    a->n_results = 0;
    return false;
}

/* ------------------------------------------- KxK conv, weight tap-major */

/* conv2d(X [N, C, H, W], W [O, C, KH, KW], B?) with a constant W, KH x KW
 * not 1x1, stride 1, dilation 1, one group, f16 / bf16, integer dims, C
 * and W multiples of 8 -> conv2d(X, transpose(Wt, perm [2, 3, 0, 1]), B)
 * with Wt [KH, KW, O, C] a new constant holding W's values tap-major
 * (repacked here, once: no kernel, no launch). The graph computes what it
 * did (the interpreter runs the transpose and the conv); the planner
 * folds the transpose into the conv's read, and the sm_90a implicit GEMM
 * (kernelplan/launch_gemm_sm90.c) reads Wt per tap as an [O, C] matrix
 * through TMA boxes (the weight as stored has the tap innermost: no TMA
 * box reads it). Where the planner keeps the mma.sync implicit GEMM
 * instead, it reads W' through the folded transpose's strides. Refused
 * (traced) for anything else: the conv stays as it was. */
static bool apply_conv_tap_major(mcir_action_ctx *a) {
    mcir_node *conv = param_node(a, "conv");
    mcir_tensor *out = param_tensor(a, "output");
    if (!conv || !out || conv->op != MCIR_OP_CONV2D) return fail(a, "the match binds no conv2d or output");
    mcir_tensor *X = conv->inputs[0], *W = conv->inputs[1], *B = conv->n_inputs > 2 ? conv->inputs[2] : NULL;
    if (X->rank != 4 || W->rank != 4 || out->rank != 4) return fail(a, "'%s' is not an NCHW conv", conv->name);
    if (W->kind != MCIR_TENSOR_WEIGHT) return fail(a, "'%s' has a weight computed at run time", conv->name);
    if (W->shape[2] == 1 && W->shape[3] == 1)
        return fail(a, "'%s' has a 1x1 kernel (conv1x1_as_matmul's, or the implicit GEMM's)", conv->name);
    if (X->dtype != W->dtype || (X->dtype != MCIR_DTYPE_F16 && X->dtype != MCIR_DTYPE_BF16))
        return fail(a, "'%s' is %s x %s: the sm_90a GEMM takes f16 or bf16", conv->name, mcir_dtype_name(X->dtype),
                    mcir_dtype_name(W->dtype));
    static const conv_plain plain[] = {{"strides", 2, 1}, {"dilations", 2, 1}, {"groups", 0, 1}};
    const char *attr;
    int64_t value;
    if (conv_attr_off(conv, plain, 3, &attr, &value))
        return fail(a, "'%s' has %s %lld: the TMA boxes read stride-1, undilated, single-group convs", conv->name,
                    attr, (long long)value);
    for (int i = 0; i < 4; i++) {
        mcir_extent e = mcir_tensor_extent(X, i);
        if (!mcir_extent_is_const(&e, NULL)) return fail(a, "'%s': input dim %d is symbolic", conv->name, i);
    }
    const int64_t C = X->shape[1], Wd = X->shape[3], O = W->shape[0], KH = W->shape[2], KW = W->shape[3];
    if (W->shape[1] != C) return fail(a, "'%s': the weight's %lld channels are not the input's %lld", conv->name,
                                      (long long)W->shape[1], (long long)C);
    if ((Wd * 2) % 16 != 0)
        return fail(a, "'%s': image rows of %lld elements are not a multiple of 16 bytes (the TMA's stride unit)",
                    conv->name, (long long)Wd);
    if ((C * 2) % 16 != 0)
        return fail(a, "'%s': %lld channels are not a multiple of 16 bytes (the repacked weight's rows)", conv->name,
                    (long long)C);
    mcir_graph *g = a->g;
    const int64_t ts[4] = {KH, KW, O, C};
    mcir_tensor *wt = mcir_graph_add_tensor(
        g, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s.taps", W->name)), W->dtype, 4, ts,
        MCIR_TENSOR_WEIGHT);
    MCIR_ASSERT(wt);
    const int64_t n = mcir_tensor_numel(W);
    float *v = malloc((size_t)n * sizeof *v + 1);
    MCIR_ASSERT(v);
    mcir_weight_values(W, v);
    unsigned char *data = mcir_arena_alloc(g->arena, (size_t)n * mcir_dtype_size(W->dtype));
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++)
                    store_value(data, W->dtype, ((kh * KW + kw) * O + o) * C + c, v[((o * C + c) * KH + kh) * KW + kw]);
    free(v);
    wt->data = data;
    mcir_node *built[2] = {NULL, NULL};
    mcir_node *tr = built[0] = build(
        a, MCIR_OP_TRANSPOSE, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s.weight", conv->name)), 1, &wt);
    const int64_t perm[4] = {2, 3, 0, 1};
    mcir_node_set_ints(g, tr, "perm", 4, perm);
    if (!infer(a, tr)) goto undo;
    mcir_tensor *ins[3] = {X, tr->outputs[0], B};
    mcir_node *cv = built[1] = build(a, MCIR_OP_CONV2D, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s.taps", conv->name)),
                                     B ? 3 : 2, ins);
    for (int i = 0; i < conv->n_attrs; i++) {
        const mcir_attr *at = &conv->attrs[i];
        if (at->type == MCIR_ATTR_INTS) mcir_node_set_ints(g, cv, at->name, at->n, at->ints);
        else if (at->type == MCIR_ATTR_INT) mcir_node_set_int(g, cv, at->name, at->i);
    }
    if (!infer(a, cv) || !take_over(a, cv, out)) goto undo;
    add_result(a, tr);
    add_result(a, cv);
    return true;
undo:
    discard(built, 2);
    a->n_results = 0;
    return false;
}

/* ---------------------------------------------------------------- table */

const mcir_action_impl mcir_action_impls[MCIR_ACTION_COUNT] = {
    [MCIR_ACTION_FUSE_ATTENTION] = {apply_fuse_attention, NULL, true},
    [MCIR_ACTION_FUSE_LAYERNORM] = {apply_fuse_layernorm, NULL, true},
    [MCIR_ACTION_FUSE_RMSNORM] = {apply_fuse_rmsnorm, NULL, true},
    [MCIR_ACTION_FUSE_SOFTMAX] = {apply_fuse_softmax, NULL, true},
    [MCIR_ACTION_REPLACE_OP] = {apply_replace_op, NULL, true},
    [MCIR_ACTION_ANNOTATE_ONLY] = {apply_annotate_only, done_annotate_only, false},
    [MCIR_ACTION_FUSE_GROUP] = {apply_fuse_group, done_fuse_group, false},
    [MCIR_ACTION_INPLACE] = {apply_inplace, done_inplace, false},
    [MCIR_ACTION_FUSE_HORIZONTAL_MATMUL] = {apply_fuse_horizontal_matmul, NULL, true},
    [MCIR_ACTION_FOLD_CONV_AFFINE] = {apply_fold_conv_affine, NULL, true},
    [MCIR_ACTION_CONV_AS_MATMUL] = {apply_conv_as_matmul, NULL, true},
    [MCIR_ACTION_CONV_TAP_MAJOR] = {apply_conv_tap_major, NULL, true},
    [MCIR_ACTION_FUSE_GLU_MATMUL] = {apply_fuse_glu_matmul, NULL, true},
    [MCIR_ACTION_FOLD_NORM_GAMMA] = {apply_fold_norm_gamma, NULL, true},
};
