/*
 * match.c — structural matching of a catalog pattern at an anchor node.
 *
 * A pattern is a list of nodes, the anchor first, each later node
 * producing a variable an earlier node reads, so matching walks from the
 * anchor towards the inputs with the variables bound so far. Reusing a
 * variable name ties two inputs to the same tensor (x * sigmoid(x)), which
 * is what makes a pattern a DAG. Choices — alternative forms, swapped
 * commutative inputs, optional nodes present or absent — are explored by
 * backtracking; every complete match is handed to the caller, who decides
 * (legality) which one to use.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rewrites/rewrites.h"

#define MAX_NODES 32
#define MAX_VARS 64
#define MAX_DELIVERED 256

typedef struct mstate {
    const mcir_pattern *p;
    mcir_graph *g;
    mcir_node *nodes[MAX_NODES];
    int form[MAX_NODES];
    mcir_tensor *vars[MAX_VARS];
    mcir_match_fn fn;
    void *ctx;
    int delivered;
    bool stop;
    mcir_match_miss *miss;
    mcir_node *anchor;
} mstate;

/* Records where the deepest attempt stopped; only facts, no text (this
 * runs for every failed branch of every candidate). */
static void note_miss(mstate *s, int at, mcir_miss_kind kind, const mcir_node *nd,
                      const mcir_tensor *t) {
    mcir_match_miss *m = s->miss;
    if (!m) return;
    int matched = 0, required = 0;
    for (int i = 0; i < at; i++)
        if (s->nodes[i]) {
            matched++;
            if (!s->p->nodes[i].optional) required++;
        }
    if (matched < m->matched || (matched == m->matched && m->node >= 0)) return;
    m->matched = matched;
    m->required_matched = required;
    m->node = at;
    m->kind = kind;
    m->node_name = nd ? nd->name : NULL;
    m->node_op = nd ? nd->op : (mcir_op)0;
    m->tensor_name = t ? t->name : NULL;
    m->tensor_kind = t ? t->kind : MCIR_TENSOR_INTERMEDIATE;
    int k = 0;
    for (int i = 0; i < at && k < 32; i++)
        if (s->nodes[i]) {
            m->nodes[k] = s->nodes[i];
            m->names[k++] = s->nodes[i]->name;
        }
    for (; k < 32; k++) {
        m->names[k] = NULL;
        m->nodes[k] = NULL;
    }
}

void mcir_match_miss_detail(const mcir_pattern *p, const mcir_match_miss *miss, char *buf,
                            size_t size) {
    if (miss->node < 0) {
        snprintf(buf, size, "%s", "");
        return;
    }
    switch (miss->kind) {
    case MCIR_MISS_CONSTANTS:
        snprintf(buf, size, "%s",
                 "constant operands do not have the values the pattern requires");
        return;
    case MCIR_MISS_INPUTS:
        snprintf(buf, size,
                 "pattern node '%.60s': the inputs of '%.100s' are not the tensors the "
                 "pattern shares with other nodes",
                 p->nodes[miss->node].id, miss->node_name);
        return;
    case MCIR_MISS_OP:
    case MCIR_MISS_NO_NODE: break;
    }
    const mcir_pattern_node *pn = &p->nodes[miss->node];
    if (miss->kind == MCIR_MISS_OP)
        snprintf(buf, size,
                 "pattern node '%.40s' wants op '%.60s' but '%.60s' is '%.40s' "
                 "produced by '%.60s' (%s)",
                 pn->id, pn->forms[0].op_regex, p->var_names[pn->out_var], miss->tensor_name,
                 miss->node_name, mcir_op_name(miss->node_op));
    else
        snprintf(buf, size,
                 "pattern node '%.40s' wants op '%.60s' but '%.60s' is '%.60s', a graph "
                 "%s or a node already in the match",
                 pn->id, pn->forms[0].op_regex, p->var_names[pn->out_var], miss->tensor_name,
                 mcir_tensor_kind_name(miss->tensor_kind));
}

/* Every element of a weight equals value within relative tolerance. */
static bool weight_equals(const mcir_tensor *t, double value, double tol) {
    if (t->kind != MCIR_TENSOR_WEIGHT || t->shard_axis >= 0) return false;   /* ranks' parts differ */
    int64_t n = mcir_tensor_numel(t);
    if (n > 4096) return false;
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    MCIR_ASSERT(v);
    mcir_weight_values(t, v);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++)
        if (!(fabs((double)v[i] - value) <= tol * fmax(fabs(value), 1e-6))) ok = false;
    free(v);
    return ok;
}

static bool attr_equal(const mcir_node *nd, const mcir_attr *want) {
    switch (want->type) {
    case MCIR_ATTR_INT: return mcir_node_int(nd, want->name) == want->i;
    case MCIR_ATTR_FLOAT: {
        double v = mcir_node_float(nd, want->name);
        return fabs(v - want->f) <= 1e-6 * fmax(fabs(want->f), 1e-12);
    }
    case MCIR_ATTR_BOOL: return mcir_node_bool(nd, want->name) == want->b;
    case MCIR_ATTR_STRING: return strcmp(mcir_node_string(nd, want->name), want->s) == 0;
    case MCIR_ATTR_INTS: {
        const int64_t *v;
        int n = mcir_node_ints(nd, want->name, &v);
        if (n != want->n) return false;
        for (int i = 0; i < n; i++)
            if (v[i] != want->ints[i]) return false;
        return true;
    }
    }
    return false;
}

/* An attribute with neither a value nor a default (attention's scale)
 * matches only if set. */
static bool attr_ok(const mcir_node *nd, const mcir_attr *want) {
    const mcir_attr_spec *spec = mcir_op_attr_spec(nd->op, want->name);
    if (!spec) return false;
    if (!mcir_node_attr(nd, want->name) && !spec->has_default) return false;
    return attr_equal(nd, want);
}

/* A form's value and constant requirements on its variables; unbound
 * ones fail only when `final`. */
static bool form_constraints_ok(const mstate *s, const mcir_pattern_form *f, bool final) {
    for (int k = 0; k < f->n_values; k++) {
        const mcir_tensor *t = s->vars[f->values[k].var];
        if (!t ? final : !weight_equals(t, f->values[k].value, f->values[k].tol)) return false;
    }
    for (int k = 0; k < f->n_constants; k++) {
        const mcir_tensor *t = s->vars[f->constant_vars[k]];
        if (!t ? final : t->kind != MCIR_TENSOR_WEIGHT) return false;
    }
    return true;
}

static bool constraints_ok(const mstate *s) {
    const mcir_pattern *p = s->p;
    for (int i = 0; i < p->n_nodes; i++)
        if (s->nodes[i] && !form_constraints_ok(s, &p->nodes[i].forms[s->form[i]], true))
            return false;
    return true;
}

static void deliver(mstate *s) {
    bool has_anchor = false;
    for (int i = 0; i < s->p->n_nodes; i++)
        if (s->nodes[i] == s->anchor) has_anchor = true;
    if (!has_anchor) return;
    if (!constraints_ok(s)) {
        note_miss(s, s->p->n_nodes, MCIR_MISS_CONSTANTS, NULL, NULL);
        return;
    }
    const mcir_pattern *p = s->p;
    mcir_match m = {
        .graph = s->g,
        .n_nodes = p->n_nodes,
        .nodes = s->nodes,
        .node_ids = NULL,
        .n_vars = p->n_vars,
        .vars = s->vars,
        .var_names = p->var_names,
        .output = s->vars[p->nodes[0].out_var],
    };
    const char *ids[MAX_NODES];
    for (int i = 0; i < p->n_nodes; i++) ids[i] = p->nodes[i].id;
    m.node_ids = ids;
    s->delivered++;
    if (s->fn(&m, s->ctx) || s->delivered >= MAX_DELIVERED) s->stop = true;
}

static bool bind(mstate *s, int var, mcir_tensor *t) {
    if (var < 0) return true;
    if (!s->vars[var]) {
        s->vars[var] = t;
        return true;
    }
    return s->vars[var] == t;
}

static bool node_used(const mstate *s, int upto, const mcir_node *nd) {
    for (int i = 0; i < upto; i++)
        if (s->nodes[i] == nd) return true;
    return false;
}

static void match_from(mstate *s, int i);

/* Tries form f of pattern node i on graph node nd, with inputs in the
 * given order (perm[j]: which graph input pattern input j reads). */
static void try_form(mstate *s, int i, int fi, mcir_node *nd, const int *perm) {
    const mcir_pattern_form *f = &s->p->nodes[i].forms[fi];
    mcir_tensor *saved[MAX_VARS];
    memcpy(saved, s->vars, sizeof saved);
    bool ok = true;
    for (int j = 0; j < f->n_inputs && ok; j++) {
        int src = perm[j];
        if (src >= nd->n_inputs) continue;   /* an optional trailing input */
        ok = bind(s, f->input_vars[j], nd->inputs[src]);
    }
    if (ok && !form_constraints_ok(s, f, false)) {
        memcpy(s->vars, saved, sizeof saved);
        return;   /* a constant with the wrong value: not this form */
    }
    if (ok) {
        s->nodes[i] = nd;
        s->form[i] = fi;
        match_from(s, i + 1);
        s->nodes[i] = NULL;
    } else {
        note_miss(s, i, MCIR_MISS_INPUTS, nd, NULL);
    }
    memcpy(s->vars, saved, sizeof saved);
}

static void match_from(mstate *s, int i) {
    if (s->stop) return;
    const mcir_pattern *p = s->p;
    if (i == p->n_nodes) {
        deliver(s);
        return;
    }
    const mcir_pattern_node *pn = &p->nodes[i];
    mcir_tensor *t = s->vars[pn->out_var];
    if (!t) {
        /* not reached in this alternative (its consumer took another
         * form or is absent) */
        s->nodes[i] = NULL;
        match_from(s, i + 1);
        return;
    }
    mcir_node *nd = t->producer;
    if (nd && (nd->dead || node_used(s, i, nd))) nd = NULL;
    bool any_form = false;
    for (int fi = 0; nd && fi < pn->n_forms && !s->stop; fi++) {
        const mcir_pattern_form *f = &pn->forms[fi];
        if (!f->ops[nd->op]) continue;
        int min_in = 0;
        for (int j = 0; j < f->n_inputs; j++) min_in += !f->input_optional[j];
        if (nd->n_inputs < min_in || nd->n_inputs > f->n_inputs) continue;
        bool attrs = true;
        for (int k = 0; k < f->n_attrs && attrs; k++) attrs = attr_ok(nd, &f->attrs[k]);
        if (!attrs || !mcir_pattern_form_name_ok(f, nd->name)) continue;
        any_form = true;
        int perm[16];
        for (int j = 0; j < 16; j++) perm[j] = j;
        try_form(s, i, fi, nd, perm);
        if (nd->n_inputs == 2 && !s->stop &&
            (f->unordered ||
             (f->commutative && (mcir_op_desc_of(nd->op)->flags & MCIR_OPF_COMMUTATIVE)))) {
            perm[0] = 1;
            perm[1] = 0;
            try_form(s, i, fi, nd, perm);
        }
    }
    if (!any_form && !pn->optional)
        note_miss(s, i, nd ? MCIR_MISS_OP : MCIR_MISS_NO_NODE, nd, t);
    if (pn->optional && !s->stop) {
        mcir_tensor *saved = s->vars[pn->passthrough_var];
        if (bind(s, pn->passthrough_var, t)) {
            s->nodes[i] = NULL;
            match_from(s, i + 1);
        }
        s->vars[pn->passthrough_var] = saved;
    }
}

int mcir_pattern_match(const mcir_pattern *p, mcir_graph *g, mcir_node *anchor,
                       mcir_match_fn fn, void *ctx, mcir_match_miss *miss) {
    MCIR_ASSERT(p->n_nodes <= MAX_NODES && p->n_vars <= MAX_VARS);
    if (anchor->dead) return 0;
    mstate s;
    memset(&s, 0, sizeof s);
    s.p = p;
    s.g = g;
    s.fn = fn;
    s.ctx = ctx;
    s.miss = miss;
    s.anchor = anchor;
    if (miss) {
        memset(miss, 0, sizeof *miss);
        miss->node = -1;
    }
    for (int o = 0; o < anchor->n_outputs && !s.stop; o++) {
        memset(s.vars, 0, sizeof s.vars);
        memset(s.nodes, 0, sizeof s.nodes);
        s.vars[p->nodes[0].out_var] = anchor->outputs[o];
        match_from(&s, 0);
    }
    return s.delivered;
}
