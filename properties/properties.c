/*
 * properties.c — the table of legality checks, the schemas of the rewrite
 * actions and the on-chip working-set model.
 *
 * A check is a pure function of a match, its parameters and the target: it
 * never changes the graph, and it always says what it measured, pass or
 * fail, because the trace shows the detail to a user asking "why not".
 * Unbound (optional, absent) variables and nodes are skipped: a condition
 * on something that is not there holds trivially.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kernelplan/launch.h"
#include "kernelplan/launch_gemm_sm90.h"
#include "properties/properties.h"

/* --------------------------------------------------------------- detail */

static void say(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Appends a clause to the detail, separated by "; ". */
static void say(char *buf, size_t n, const char *fmt, ...) {
    size_t len = strlen(buf);
    if (len + 3 >= n) return;
    if (len) {
        memcpy(buf + len, "; ", 3);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, n - len, fmt, ap);
    va_end(ap);
}

static const char *var_name(const mcir_check_ctx *c, int v) {
    return c->match->var_names[v];
}

static mcir_tensor *var_tensor(const mcir_check_ctx *c, int v) {
    return c->match->vars[v];
}

char *mcir_bytes_str(int64_t bytes, char *buf, size_t n) {
    if (bytes < 1024)
        snprintf(buf, n, "%lld B", (long long)bytes);
    else if (bytes < 1024 * 1024) {
        double k = (double)bytes / 1024.0;
        if (bytes % 1024 == 0) snprintf(buf, n, "%.0f KiB", k);
        else snprintf(buf, n, "%.1f KiB", k);
    } else
        snprintf(buf, n, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
    return buf;
}

bool mcir_weight_values(const mcir_tensor *t, float *out) {
    if (t->kind != MCIR_TENSOR_WEIGHT) return false;
    int64_t n = mcir_tensor_numel(t);
    if (!t->data) {
        mcir_fill_seeded(t, 0, out);
        return true;
    }
    mcir_values_to_f32(t->dtype, t->data, out, n);
    return true;
}

/* ------------------------------------------------------ tensor checks */

/* Runs `one` on every bound variable of a TENSORS parameter; the check
 * holds if it holds for each. */
typedef bool (*tensor_pred)(const mcir_check_ctx *c, int var, const mcir_tensor *t,
                            const mcir_param_value *params, char *d, size_t n);

static bool each_tensor(const mcir_check_ctx *c, const mcir_param_value *tensors,
                        const mcir_param_value *params, tensor_pred one, char *d,
                        size_t n) {
    bool ok = true;
    for (int i = 0; i < tensors->n; i++) {
        const mcir_tensor *t = var_tensor(c, tensors->refs[i]);
        if (!t) continue;
        bool again = false;   /* variables an absent node aliased */
        for (int k = 0; k < i; k++)
            if (var_tensor(c, tensors->refs[k]) == t) again = true;
        if (again) continue;
        if (!one(c, tensors->refs[i], t, params, d, n)) ok = false;
    }
    if (!d[0]) say(d, n, "nothing to check (no variable bound)");
    return ok;
}

static bool one_single_consumer(const mcir_check_ctx *c, int v, const mcir_tensor *t,
                                const mcir_param_value *p, char *d, size_t n) {
    (void)p;
    mcir_node *cons[4];
    int k = mcir_graph_consumers(c->match->graph, t, cons, 4);
    if (k == 1) {
        say(d, n, "'%s' (%s) has 1 consumer", t->name, var_name(c, v));
        return true;
    }
    char names[256] = "";
    for (int i = 0; i < k && i < 4; i++) {
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", cons[i]->name);
    }
    if (k > 4) strncat(names, ", ...", sizeof names - strlen(names) - 1);
    say(d, n, "'%s' (%s) has %d consumers%s%s", t->name, var_name(c, v), k,
        k ? ": " : "", names);
    return false;
}

static bool check_single_consumer(const mcir_check_ctx *c, const mcir_param_value *p,
                                  char *d, size_t n) {
    return each_tensor(c, &p[0], p, one_single_consumer, d, n);
}

static bool one_not_graph_output(const mcir_check_ctx *c, int v, const mcir_tensor *t,
                                 const mcir_param_value *p, char *d, size_t n) {
    (void)p;
    if (t->is_output) {
        say(d, n, "'%s' (%s) is a graph output and must stay materialized", t->name,
            var_name(c, v));
        return false;
    }
    say(d, n, "'%s' (%s) is not a graph output", t->name, var_name(c, v));
    return true;
}

static bool check_not_graph_output(const mcir_check_ctx *c, const mcir_param_value *p,
                                   char *d, size_t n) {
    return each_tensor(c, &p[0], p, one_not_graph_output, d, n);
}

static bool in_match(const mcir_match *m, const mcir_node *nd) {
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i] == nd) return true;
    return false;
}

static bool one_only_used_in_match(const mcir_check_ctx *c, int v, const mcir_tensor *t,
                                   const mcir_param_value *p, char *d, size_t n) {
    (void)p;
    const mcir_graph *g = c->match->graph;
    if (t->is_output) {
        say(d, n, "'%s' (%s) is a graph output", t->name, var_name(c, v));
        return false;
    }
    /* the first live reader outside the match, in node order */
    mcir_node *cons[64];
    int k = mcir_graph_consumers(g, t, cons, 64);
    for (int i = 0; i < k && i < 64; i++)
        if (!in_match(c->match, cons[i])) {
            say(d, n, "'%s' (%s) is also used by '%s' (%s) outside the pattern", t->name,
                var_name(c, v), cons[i]->name, mcir_op_name(cons[i]->op));
            return false;
        }
    if (k > 64) {   /* more readers than a match has nodes: one is outside */
        mcir_node **all = malloc((size_t)k * sizeof *all);
        MCIR_ASSERT(all);
        mcir_graph_consumers(g, t, all, k);
        for (int i = 64; i < k; i++)
            if (!in_match(c->match, all[i])) {
                say(d, n, "'%s' (%s) is also used by '%s' (%s) outside the pattern", t->name,
                    var_name(c, v), all[i]->name, mcir_op_name(all[i]->op));
                free(all);
                return false;
            }
        free(all);
    }
    say(d, n, "'%s' (%s) is used only inside the pattern", t->name, var_name(c, v));
    return true;
}

/* A variable that stands for the pattern's own output (an absent
 * optional last op passes it through) is not an intermediate: the rewrite
 * keeps that tensor. */
static bool check_only_used_in_match(const mcir_check_ctx *c, const mcir_param_value *p,
                                     char *d, size_t n) {
    mcir_param_value inner = p[0];
    int refs[64], k = 0;
    for (int i = 0; i < p[0].n && k < 64; i++)
        if (var_tensor(c, p[0].refs[i]) != c->match->output) refs[k++] = p[0].refs[i];
    inner.refs = refs;
    inner.n = k;
    return each_tensor(c, &inner, p, one_only_used_in_match, d, n);
}

static bool one_is_intermediate(const mcir_check_ctx *c, int v, const mcir_tensor *t,
                                const mcir_param_value *p, char *d, size_t n) {
    (void)p;
    if (t->kind != MCIR_TENSOR_INTERMEDIATE) {
        say(d, n, "'%s' (%s) is a graph %s, not an intermediate", t->name, var_name(c, v),
            mcir_tensor_kind_name(t->kind));
        return false;
    }
    say(d, n, "'%s' (%s) is an intermediate", t->name, var_name(c, v));
    return true;
}

static bool check_is_intermediate(const mcir_check_ctx *c, const mcir_param_value *p,
                                  char *d, size_t n) {
    return each_tensor(c, &p[0], p, one_is_intermediate, d, n);
}

static bool one_materialized(const mcir_check_ctx *c, int v, const mcir_tensor *t,
                             const mcir_param_value *p, char *d, size_t n) {
    (void)p;
    bool ok = t->memory_state == MCIR_MEM_MATERIALIZED;
    say(d, n, "'%s' (%s) is %s", t->name, var_name(c, v),
        mcir_memory_state_name(t->memory_state));
    return ok;
}

static bool check_materialized(const mcir_check_ctx *c, const mcir_param_value *p,
                               char *d, size_t n) {
    return each_tensor(c, &p[0], p, one_materialized, d, n);
}

static bool one_is_constant(const mcir_check_ctx *c, int v, const mcir_tensor *t,
                            const mcir_param_value *p, char *d, size_t n) {
    (void)p;
    if (t->kind != MCIR_TENSOR_WEIGHT) {
        say(d, n, "'%s' (%s) is %s %s, not a constant weight", t->name, var_name(c, v),
            t->kind == MCIR_TENSOR_INPUT ? "a graph" : "an",
            mcir_tensor_kind_name(t->kind));
        return false;
    }
    say(d, n, "'%s' (%s) is a constant weight", t->name, var_name(c, v));
    return true;
}

static bool check_is_constant(const mcir_check_ctx *c, const mcir_param_value *p, char *d,
                              size_t n) {
    return each_tensor(c, &p[0], p, one_is_constant, d, n);
}

static bool one_scalar_constant(const mcir_check_ctx *c, int v, const mcir_tensor *t,
                                const mcir_param_value *p, char *d, size_t n) {
    if (!one_is_constant(c, v, t, p, d, n)) return false;
    int64_t numel = mcir_tensor_numel(t);
    char sh[96];
    if (numel != 1) {
        say(d, n, "'%s' (%s) has shape %s: not a scalar", t->name, var_name(c, v),
            mcir_shape_str(t, sh, sizeof sh));
        return false;
    }
    float val;
    mcir_weight_values(t, &val);
    say(d, n, "value %g", (double)val);
    return true;
}

static bool check_scalar_constant(const mcir_check_ctx *c, const mcir_param_value *p,
                                  char *d, size_t n) {
    return each_tensor(c, &p[0], p, one_scalar_constant, d, n);
}

static bool one_dtype_allowed(const mcir_check_ctx *c, int v, const mcir_tensor *t,
                              const mcir_param_value *p, char *d, size_t n) {
    bool ok = (p[1].dtypes >> t->dtype) & 1u;
    if (ok) {
        say(d, n, "'%s' (%s) is %s", t->name, var_name(c, v), mcir_dtype_name(t->dtype));
        return true;
    }
    char allowed[96] = "";
    for (int k = 0; k < MCIR_DTYPE_COUNT; k++)
        if ((p[1].dtypes >> k) & 1u) {
            size_t len = strlen(allowed);
            snprintf(allowed + len, sizeof allowed - len, "%s%s", len ? ", " : "",
                     mcir_dtype_name((mcir_dtype)k));
        }
    say(d, n, "'%s' (%s) is %s, not one the rule allows (%s)", t->name, var_name(c, v),
        mcir_dtype_name(t->dtype), allowed);
    return false;
}

static bool check_dtype_allowed(const mcir_check_ctx *c, const mcir_param_value *p,
                                char *d, size_t n) {
    return each_tensor(c, &p[0], p, one_dtype_allowed, d, n);
}

/* Symbolic dimensions (docs/graph-format.md): a check on sizes must hold
 * for every size in range, so shapes are compared as extents, and a
 * failure names the dimension. `dim_note` writes " for every size of
 * 'seq' (1..128)" or " only for some values of 'seq' (1..128)". */
static void dim_note(const mcir_graph *g, const mcir_extent *e, bool ok, char *buf, size_t n) {
    int k = mcir_extent_first_dim(e);
    buf[0] = 0;
    if (k < 0) return;
    snprintf(buf, n, " %s of dimension '%s' (%lld..%lld)", ok ? "for every value" : "only for some values",
             g->dims[k].name, (long long)g->dims[k].min, (long long)g->dims[k].max);
}

static bool same_extent(const mcir_tensor *a, int ia, const mcir_tensor *b, int ib) {
    mcir_extent ea = mcir_tensor_extent(a, ia), eb = mcir_tensor_extent(b, ib);
    return mcir_extent_equal(&ea, &eb);
}

static bool check_shape_divisible(const mcir_check_ctx *c, const mcir_param_value *p,
                                  char *d, size_t n) {
    const mcir_tensor *t = var_tensor(c, p[0].refs[0]);
    if (!t) {
        say(d, n, "nothing to check (no variable bound)");
        return true;
    }
    int64_t axis = p[1].set ? p[1].i : -1;
    int64_t by = p[2].i;
    int64_t a = axis < 0 ? axis + t->rank : axis;
    if (a < 0 || a >= t->rank) {
        say(d, n, "'%s' (%s) has rank %d, no axis %lld", t->name, var_name(c, p[0].refs[0]),
            t->rank, (long long)axis);
        return false;
    }
    int64_t dim = t->shape[a];
    bool ok = by > 0 && dim % by == 0;
    mcir_extent e = mcir_tensor_extent(t, (int)a);
    if (!mcir_extent_is_const(&e, NULL)) {   /* every coefficient, so every size */
        const mcir_graph *g = c->match->graph;
        char es[96], note[160];
        ok = by > 0;
        for (int i = 0; ok && i < e.n_terms; i++) ok = e.terms[i].coef % by == 0;
        dim_note(g, &e, ok, note, sizeof note);
        say(d, n, "'%s' (%s) dim %lld = %s is divisible by %lld%s", t->name,
            var_name(c, p[0].refs[0]), (long long)axis, mcir_extent_str(g, &e, es, sizeof es),
            (long long)by, note);
        return ok;
    }
    say(d, n, "'%s' (%s) dim %lld = %lld is %sdivisible by %lld", t->name,
        var_name(c, p[0].refs[0]), (long long)axis, (long long)dim, ok ? "" : "not ",
        (long long)by);
    return ok;
}

static bool same_shape(const mcir_tensor *a, const mcir_tensor *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i] || !same_extent(a, i, b, i)) return false;
    return true;
}

static bool check_same_shape(const mcir_check_ctx *c, const mcir_param_value *p, char *d,
                             size_t n) {
    const mcir_tensor *first = NULL;
    int first_v = -1;
    char sa[96], sb[96];
    for (int i = 0; i < p[0].n; i++) {
        const mcir_tensor *t = var_tensor(c, p[0].refs[i]);
        if (!t) continue;
        if (!first) {
            first = t;
            first_v = p[0].refs[i];
            continue;
        }
        if (!same_shape(first, t) || first->dtype != t->dtype) {
            say(d, n, "'%s' (%s) is %s %s but '%s' (%s) is %s %s", first->name,
                var_name(c, first_v), mcir_dtype_name(first->dtype),
                mcir_shape_str(first, sa, sizeof sa), t->name, var_name(c, p[0].refs[i]),
                mcir_dtype_name(t->dtype), mcir_shape_str(t, sb, sizeof sb));
            return false;
        }
    }
    if (first)
        say(d, n, "all %s %s", mcir_dtype_name(first->dtype),
            mcir_shape_str(first, sa, sizeof sa));
    else
        say(d, n, "nothing to check (no variable bound)");
    return true;
}

static bool check_broadcasts_to(const mcir_check_ctx *c, const mcir_param_value *p,
                                char *d, size_t n) {
    const mcir_tensor *t = var_tensor(c, p[0].refs[0]);
    const mcir_tensor *target = var_tensor(c, p[1].refs[0]);
    if (!t || !target) {
        say(d, n, "nothing to check (no variable bound)");
        return true;
    }
    char sa[96], sb[96], note[160] = "";
    bool ok = t->rank <= target->rank;
    for (int i = 0; ok && i < t->rank; i++) {
        int ia = t->rank - 1 - i, ib = target->rank - 1 - i;
        mcir_extent ea = mcir_tensor_extent(t, ia), eb = mcir_tensor_extent(target, ib);
        int64_t one;
        if (mcir_extent_equal(&ea, &eb) || (mcir_extent_is_const(&ea, &one) && one == 1)) continue;
        ok = false;
        /* equal at the binding: a dimension makes it hold only there */
        if (t->shape[ia] == target->shape[ib] || t->shape[ia] == 1)
            dim_note(c->match->graph, mcir_extent_first_dim(&ea) >= 0 ? &ea : &eb, false, note,
                     sizeof note);
    }
    say(d, n, "'%s' (%s) %s %s to '%s' (%s) %s%s", t->name, var_name(c, p[0].refs[0]),
        mcir_shape_str(t, sa, sizeof sa), ok ? "broadcasts" : "does not broadcast",
        target->name, var_name(c, p[1].refs[0]), mcir_shape_str(target, sb, sizeof sb), note);
    return ok;
}

static bool one_last_axis_param(const mcir_check_ctx *c, int v, const mcir_tensor *t,
                                const mcir_param_value *p, char *d, size_t n) {
    const mcir_tensor *x = var_tensor(c, p[1].refs[0]);
    char sa[96];
    if (!x) return true;
    int64_t last = x->shape[x->rank - 1];
    bool ok = t->rank <= 1 && (t->rank == 0 || t->shape[0] == 1 ||
                               (t->shape[0] == last && same_extent(t, 0, x, x->rank - 1)));
    char note[160] = "";
    mcir_extent e = mcir_tensor_extent(x, x->rank - 1);
    if (!ok && t->rank == 1 && t->shape[0] == last) dim_note(c->match->graph, &e, false, note, sizeof note);
    say(d, n, "'%s' (%s) %s %s per-channel over the last axis (%lld)%s", t->name,
        var_name(c, v), mcir_shape_str(t, sa, sizeof sa), ok ? "is" : "is not",
        (long long)last, note);
    return ok;
}

static bool check_last_axis_param(const mcir_check_ctx *c, const mcir_param_value *p,
                                  char *d, size_t n) {
    return each_tensor(c, &p[0], p, one_last_axis_param, d, n);
}

/* ------------------------------------------------------- node checks */

/* Nodes a NODES parameter names, or every matched node if it is unset. */
typedef bool (*node_pred)(const mcir_check_ctx *c, const mcir_node *nd, char *d, size_t n);

static bool each_node(const mcir_check_ctx *c, const mcir_param_value *nodes, node_pred one,
                      char *d, size_t n) {
    const mcir_match *m = c->match;
    bool ok = true;
    int count = nodes->set ? nodes->n : m->n_nodes, visited = 0;
    for (int i = 0; i < count; i++) {
        const mcir_node *nd = m->nodes[nodes->set ? nodes->refs[i] : i];
        if (!nd) continue;
        visited++;
        if (!one(c, nd, d, n)) ok = false;
    }
    if (!visited) say(d, n, "nothing to check (no node matched)");
    return visited ? ok : true;
}

static bool one_pure(const mcir_check_ctx *c, const mcir_node *nd, char *d, size_t n) {
    (void)c;
    bool ok = mcir_op_desc_of(nd->op)->flags & MCIR_OPF_PURE;
    if (!ok) say(d, n, "'%s' (%s) has side effects", nd->name, mcir_op_name(nd->op));
    return ok;
}

/* The target runs the sm_90a templates (wgmma, the TMA): a rewrite that
 * only pays there (a conv's weight repacked for the TMA) asks for it. */
static bool check_has_wgmma(const mcir_check_ctx *c, const mcir_param_value *p, char *d, size_t n) {
    (void)p;
    const mcir_target *t = c->target;
    if (!t || !t->has_wgmma) {
        say(d, n, "%s has no wgmma (sm_90a): the rewrite serves the TMA + wgmma templates only",
            t ? t->name : "no target");
        return false;
    }
    say(d, n, "%s has wgmma and the TMA (sm_90a)", t->name);
    return true;
}

static bool check_pure(const mcir_check_ctx *c, const mcir_param_value *p, char *d,
                       size_t n) {
    bool ok = each_node(c, &p[0], one_pure, d, n);
    if (ok && !d[0]) say(d, n, "every op is pure");
    return ok;
}

/* The op table's PURE flag promises determinism too (same inputs, same
 * bits): the reference kernels fix their summation order. */
static bool one_deterministic(const mcir_check_ctx *c, const mcir_node *nd, char *d,
                              size_t n) {
    (void)c;
    bool ok = mcir_op_desc_of(nd->op)->flags & MCIR_OPF_PURE;
    if (!ok) say(d, n, "'%s' (%s) is not deterministic", nd->name, mcir_op_name(nd->op));
    return ok;
}

static bool check_deterministic(const mcir_check_ctx *c, const mcir_param_value *p, char *d,
                                size_t n) {
    bool ok = each_node(c, &p[0], one_deterministic, d, n);
    if (ok && !d[0]) say(d, n, "every op is deterministic");
    return ok;
}

/* The axes a node reduces or normalises over, as a mask; false if the op
 * is not a reduction or norm. */
static bool reduced_axes(const mcir_node *nd, bool mask[MCIR_MAX_RANK], int *rank) {
    const mcir_tensor *x = nd->inputs[0];
    *rank = x->rank;
    memset(mask, 0, sizeof(bool) * MCIR_MAX_RANK);
    const int64_t *axes;
    int k;
    switch (nd->op) {
    case MCIR_OP_REDUCE_SUM:
    case MCIR_OP_REDUCE_MEAN:
    case MCIR_OP_REDUCE_MAX:
        k = mcir_node_ints(nd, "axes", &axes);
        for (int i = 0; i < k; i++) {
            int64_t a = axes[i] < 0 ? axes[i] + x->rank : axes[i];
            if (a >= 0 && a < x->rank) mask[a] = true;
        }
        return true;
    case MCIR_OP_SOFTMAX: {
        int64_t a = mcir_node_int(nd, "axis");
        a = a < 0 ? a + x->rank : a;
        if (a >= 0 && a < x->rank) mask[a] = true;
        return true;
    }
    case MCIR_OP_ATTENTION:
        /* softmax over the keys: the last axis of the scores */
        if (x->rank > 0) mask[x->rank - 1] = true;
        return true;
    case MCIR_OP_LAYERNORM:
    case MCIR_OP_RMSNORM: {
        int64_t a = mcir_node_int(nd, "axis");
        a = a < 0 ? a + x->rank : a;
        for (int64_t i = a; i >= 0 && i < x->rank; i++) mask[i] = true;
        return true;
    }
    default: return false;
    }
}

static bool one_reduction_last_axis(const mcir_check_ctx *c, const mcir_node *nd, char *d,
                                    size_t n) {
    (void)c;
    bool mask[MCIR_MAX_RANK];
    int rank;
    if (!reduced_axes(nd, mask, &rank)) {
        say(d, n, "'%s' (%s) is not a reduction", nd->name, mcir_op_name(nd->op));
        return false;
    }
    int count = 0;
    char axes[64] = "";
    for (int i = 0; i < rank; i++)
        if (mask[i]) {
            size_t len = strlen(axes);
            snprintf(axes + len, sizeof axes - len, "%s%d", count++ ? ", " : "", i);
        }
    bool ok = count == 1 && rank > 0 && mask[rank - 1];
    if (ok)
        say(d, n, "'%s' (%s) reduces the last axis (%d of rank %d)", nd->name,
            mcir_op_name(nd->op), rank - 1, rank);
    else
        say(d, n, "'%s' (%s) reduces axes [%s] of rank %d, not only the last axis", nd->name,
            mcir_op_name(nd->op), axes, rank);
    return ok;
}

static bool check_reduction_last_axis(const mcir_check_ctx *c, const mcir_param_value *p,
                                      char *d, size_t n) {
    return each_node(c, &p[0], one_reduction_last_axis, d, n);
}

/* Statistics whose partial results over two chunks merge exactly into the
 * result over both: sum, max, (count, mean) and Welford's (count, mean,
 * M2); softmax's (max, sum of exp) pair rescales on merge. */
static const char *merge_rule(mcir_op op) {
    switch (op) {
    case MCIR_OP_REDUCE_SUM: return "sum: partial sums add";
    case MCIR_OP_REDUCE_MAX: return "max: partial maxima combine by max";
    case MCIR_OP_REDUCE_MEAN: return "mean: (count, mean) pairs merge";
    case MCIR_OP_SOFTMAX: return "softmax: (max, sum exp) pairs merge by rescaling";
    case MCIR_OP_LAYERNORM: return "layernorm: Welford (count, mean, M2) merges";
    case MCIR_OP_RMSNORM: return "rmsnorm: (count, mean of squares) merges";
    case MCIR_OP_ATTENTION: return "attention: online softmax (max, sum, acc) merges";
    default: return NULL;
    }
}

static bool one_mergeable(const mcir_check_ctx *c, const mcir_node *nd, char *d, size_t n) {
    (void)c;
    const char *rule = merge_rule(nd->op);
    if (rule) say(d, n, "%s", rule);
    else say(d, n, "'%s' (%s) keeps no mergeable statistic", nd->name, mcir_op_name(nd->op));
    return rule != NULL;
}

static bool check_mergeable_statistics(const mcir_check_ctx *c, const mcir_param_value *p,
                                       char *d, size_t n) {
    return each_node(c, &p[0], one_mergeable, d, n);
}

/* Ops that may head a fusion group: an elementwise epilogue runs on their
 * output tile before it is stored. */
static bool can_head_group(mcir_op op) {
    switch (op) {
    case MCIR_OP_MATMUL:
    case MCIR_OP_CONV2D:
    case MCIR_OP_ATTENTION:
    case MCIR_OP_LAYERNORM:
    case MCIR_OP_RMSNORM:
    case MCIR_OP_SOFTMAX: return true;
    default: return false;
    }
}

/* Slices, concatenations and splits along an axis: the value emitter
 * computes their elements by mapping the index back, so they may sit in a
 * kernel of pointwise work, but not in the epilogue of a compute op (its
 * output tile is stored element for element). */
static bool remaps_index(mcir_op op) {
    return op == MCIR_OP_SLICE || op == MCIR_OP_CONCAT || op == MCIR_OP_SPLIT;
}

/* A slice reading a half of a gated-linear-unit product (mcir_glu_half,
 * through its one reader, the reshape back to [.., F]): the GEMM's paired
 * epilogue takes it from the accumulators, no index remap. */
static bool glu_slice(const mcir_graph *g, const mcir_node *sl) {
    mcir_node *cons[2];
    if (mcir_graph_consumers(g, sl->outputs[0], cons, 2) != 1) return false;
    const mcir_tensor *p = mcir_glu_half(cons[0]->outputs[0], NULL);
    return p && p->producer && p->producer->op == MCIR_OP_MATMUL;
}

/* The nodes the check names plus every member of their fusion groups. */
static int group_members(const mcir_check_ctx *c, const mcir_param_value *p,
                         const mcir_node **members, int cap) {
    const mcir_match *m = c->match;
    const mcir_graph *g = m->graph;
    int groups[64], n_groups = 0, n_members = 0;
    int count = p[0].set ? p[0].n : m->n_nodes;
    for (int i = 0; i < count; i++) {
        const mcir_node *nd = m->nodes[p[0].set ? p[0].refs[i] : i];
        if (!nd) continue;
        if (nd->group >= 0 && n_groups < 64) groups[n_groups++] = nd->group;
        else if (nd->group < 0 && n_members < cap) members[n_members++] = nd;
    }
    return n_members + mcir_graph_group_members(g, groups, n_groups, members + n_members,
                                                cap - n_members);
}

/* A node outside the merged group that reads from it and feeds it: the
 * group could not run as one kernel (g->nodes is topological). */
static const mcir_node *outsider_between(const mcir_graph *g, const mcir_node *const *members,
                                         int n_members) {
    /* Only the nodes from the first member to the last can be tainted and
     * feed one: when ids are positions, scan just those. */
    int lo = 0, hi = g->n_nodes - 1;
    bool positions = n_members > 0;
    for (int i = 0; i < n_members && positions; i++) {
        int id = members[i]->id;
        positions = id >= 0 && id < g->n_nodes && g->nodes[id] == members[i];
        if (i == 0 || id < lo) lo = id;
        if (i == 0 || id > hi) hi = id;
    }
    if (!positions) lo = 0, hi = g->n_nodes - 1;
    size_t span = (size_t)(hi - lo + 1);
    unsigned char *in = calloc(span + 1, 1), *tainted = calloc(span + 1, 1);
    MCIR_ASSERT(in && tainted);
    for (int i = 0; i < n_members; i++)
        if (members[i]->id >= lo && members[i]->id <= hi) in[members[i]->id - lo] = 1;
    const mcir_node *bad = NULL;
    for (int i = lo; i <= hi && !bad; i++) {
        const mcir_node *nd = g->nodes[i];
        if (nd->dead || nd->id < lo || nd->id > hi) continue;
        for (int j = 0; j < nd->n_inputs; j++) {
            const mcir_node *pr = nd->inputs[j]->producer;
            if (!pr || pr->dead || pr->id < lo || pr->id > hi) continue;
            bool from_group = in[pr->id - lo], from_outsider = !in[pr->id - lo] && tainted[pr->id - lo];
            if (in[nd->id - lo] && from_outsider) bad = pr;
            if (!in[nd->id - lo] && (from_group || from_outsider)) tainted[nd->id - lo] = 1;
        }
    }
    free(in);
    free(tainted);
    return bad;
}

/* The most ops one fused kernel takes: the legality checks below see every
 * member up to this, and codegen emits a member's value function per op
 * (recursively, one stack frame each). A longer chain becomes several
 * kernels of at most this many ops. */
#define MCIR_MAX_GROUP_OPS 256

/* Merging the groups of these nodes must leave at most one non-elementwise
 * op per kernel, that op must be able to take an epilogue, index remaps
 * (slice, concat) only in a kernel without one, and nothing outside the
 * group may sit between its members. */
static bool check_groupable(const mcir_check_ctx *c, const mcir_param_value *p, char *d,
                            size_t n) {
    const mcir_node *members[MCIR_MAX_GROUP_OPS + 1];
    int n_members = group_members(c, p, members, MCIR_MAX_GROUP_OPS + 1);
    if (n_members > MCIR_MAX_GROUP_OPS) {
        say(d, n, "would make one kernel of more than %d ops (the limit of a fused kernel)",
            MCIR_MAX_GROUP_OPS);
        return false;
    }
    const mcir_node *head = NULL, *remap = NULL;
    for (int i = 0; i < n_members; i++) {
        const mcir_node *nd = members[i];
        if (mcir_op_desc_of(nd->op)->flags & MCIR_OPF_ELEMENTWISE) continue;
        if (nd->op == MCIR_OP_RESHAPE) continue;   /* element i stays element i */
        if (nd->op == MCIR_OP_SLICE && glu_slice(c->match->graph, nd)) continue;   /* a paired epilogue's half */
        if (remaps_index(nd->op)) {
            remap = nd;
            continue;
        }
        if (!can_head_group(nd->op)) {
            say(d, n, "'%s' (%s) cannot take an elementwise epilogue", nd->name,
                mcir_op_name(nd->op));
            return false;
        }
        if (head && head != nd) {
            say(d, n, "would put two compute ops, '%s' (%s) and '%s' (%s), in one kernel",
                head->name, mcir_op_name(head->op), nd->name, mcir_op_name(nd->op));
            return false;
        }
        head = nd;
    }
    if (head && remap) {
        say(d, n, "'%s' (%s) remaps indices, which the epilogue of '%s' (%s) cannot",
            remap->name, mcir_op_name(remap->op), head->name, mcir_op_name(head->op));
        return false;
    }
    const mcir_node *between = outsider_between(c->match->graph, members, n_members);
    if (between) {
        say(d, n, "'%s' (%s) reads from the group and feeds it: the group would not be one "
            "kernel", between->name, mcir_op_name(between->op));
        return false;
    }
    if (head)
        say(d, n, "one kernel of %d ops headed by '%s' (%s)", n_members, head->name,
            mcir_op_name(head->op));
    else
        say(d, n, "one elementwise kernel of %d ops", n_members);
    return true;
}

/* The merged group is pointwise work only (elementwise ops, slices,
 * concatenations, splits): each output element is computed on its own, so
 * broadcasts and index remaps are free to fuse. */
static bool check_pointwise_group(const mcir_check_ctx *c, const mcir_param_value *p, char *d,
                                  size_t n) {
    const mcir_node *members[MCIR_MAX_GROUP_OPS + 1];
    int n_members = group_members(c, p, members, MCIR_MAX_GROUP_OPS + 1), remaps = 0;
    if (n_members > MCIR_MAX_GROUP_OPS) {
        say(d, n, "would make one kernel of more than %d ops (the limit of a fused kernel)",
            MCIR_MAX_GROUP_OPS);
        return false;
    }
    for (int i = 0; i < n_members; i++) {
        const mcir_node *nd = members[i];
        if (remaps_index(nd->op)) {
            remaps++;
            continue;
        }
        if (!(mcir_op_desc_of(nd->op)->flags & MCIR_OPF_ELEMENTWISE)) {
            say(d, n, "'%s' (%s) is not pointwise: the group has a compute op", nd->name,
                mcir_op_name(nd->op));
            return false;
        }
    }
    say(d, n, "%d pointwise ops, %d of them index remaps (slice, concat, split)", n_members,
        remaps);
    return true;
}

/* Every reader of t is pointwise: a producer of t fused into one of
 * them is recomputed per element there, and any reader left in another
 * kernel reads the stored value as before. */
static bool one_pointwise_consumers(const mcir_check_ctx *c, int v, const mcir_tensor *t,
                                   const mcir_param_value *p, char *d, size_t n) {
    (void)p;
    mcir_node *cons[16];
    int k = mcir_graph_consumers(c->match->graph, t, cons, 16);
    if (k > 16) {
        say(d, n, "'%s' (%s) has %d consumers, more than a recomputed value should serve",
            t->name, var_name(c, v), k);
        return false;
    }
    for (int i = 0; i < k; i++) {
        bool pw = (mcir_op_desc_of(cons[i]->op)->flags & MCIR_OPF_ELEMENTWISE) ||
                  remaps_index(cons[i]->op);
        if (!pw) {
            say(d, n, "'%s' (%s) is also read by '%s' (%s), which is not pointwise", t->name,
                var_name(c, v), cons[i]->name, mcir_op_name(cons[i]->op));
            return false;
        }
    }
    say(d, n, "'%s' (%s) has %d consumer%s, all pointwise", t->name, var_name(c, v), k,
        k == 1 ? "" : "s");
    return k > 0;
}

static bool check_pointwise_consumers(const mcir_check_ctx *c, const mcir_param_value *p,
                                      char *d, size_t n) {
    return each_tensor(c, &p[0], p, one_pointwise_consumers, d, n);
}

/* ------------------------------------------------- horizontal matmuls */

/* A matmul whose product (or its only reader's result) is a graph output:
 * its part would have to be stored on its own, so it stays a matmul. */
static bool feeds_graph_output(const mcir_graph *g, const mcir_node *mm) {
    const mcir_tensor *y = mm->outputs[0];
    if (y->is_output) return true;
    mcir_node *cons[2];
    return mcir_graph_consumers(g, y, cons, 2) == 1 && cons[0]->op == MCIR_OP_ADD &&
           cons[0]->outputs[0]->is_output;
}

static bool constant_rhs(const mcir_node *mm, int64_t *k) {
    const mcir_tensor *b = mm->inputs[1];
    if (mm->n_inputs != 2 || b->kind != MCIR_TENSOR_WEIGHT || b->rank != 2) return false;
    *k = mcir_node_bool(mm, "transpose_b") ? b->shape[1] : b->shape[0];
    return true;
}

/* Whether t is computed from one of the products prods[0..n) within a few
 * elementwise steps. */
static bool from_products(const mcir_tensor *t, const mcir_tensor *const *prods, int n,
                          int depth) {
    for (int i = 0; i < n; i++)
        if (t == prods[i]) return true;
    const mcir_node *p = t->producer;
    if (depth > 4 || !p || p->dead || !(mcir_op_desc_of(p->op)->flags & MCIR_OPF_ELEMENTWISE))
        return false;
    for (int j = 0; j < p->n_inputs; j++)
        if (from_products(p->inputs[j], prods, n, depth + 1)) return true;
    return false;
}

/* A product (after its bias add) whose readers are an elementwise chain
 * of its own — an epilogue the matmul would lose to a separate kernel if
 * it became a part of a wider GEMM. A chain that meets another product
 * (SwiGLU's silu(gate) * up) is no loss: it needs both parts anyway. */
static bool private_epilogue(const mcir_graph *g, const mcir_node *mm,
                             const mcir_tensor *const *prods, int n) {
    const mcir_tensor *t = mm->outputs[0];
    mcir_node *cons[4];
    bool chain = false;
    for (int depth = 0; depth < 6; depth++) {
        int k = mcir_graph_consumers(g, t, cons, 4);
        if (k != 1 || !(mcir_op_desc_of(cons[0]->op)->flags & MCIR_OPF_ELEMENTWISE)) return chain;
        const mcir_node *x = cons[0];
        bool bias = false;
        for (int j = 0; j < x->n_inputs; j++) {
            if (x->inputs[j] == t) continue;
            if (from_products(x->inputs[j], prods, n, 0)) return false;
            bias |= depth == 0 && x->op == MCIR_OP_ADD && x->inputs[j]->kind == MCIR_TENSOR_WEIGHT;
        }
        chain |= !bias;
        t = x->outputs[0];
    }
    return chain;
}

/* Every reader of t, through reshapes and transposes, can take a part of
 * a wider product as a strided view (attention's Q/K/V, pointwise ops):
 * otherwise the split back into parts would be a copy. */
static bool readers_take_views(const mcir_graph *g, const mcir_tensor *t, int depth) {
    mcir_node *cons[16];
    int k = mcir_graph_consumers(g, t, cons, 16);
    if (k < 1 || k > 16 || t->is_output || depth > 8) return false;
    for (int i = 0; i < k; i++) {
        const mcir_node *x = cons[i];
        if (x->op == MCIR_OP_RESHAPE || x->op == MCIR_OP_TRANSPOSE) {
            if (!readers_take_views(g, x->outputs[0], depth + 1)) return false;
        } else if (x->op == MCIR_OP_ATTENTION) {
            for (int j = 3; j < x->n_inputs; j++)
                if (x->inputs[j] == t) return false;
        } else if (!(mcir_op_desc_of(x->op)->flags & MCIR_OPF_ELEMENTWISE) &&
                   !remaps_index(x->op)) {
            return false;
        }
    }
    return true;
}

/* The part of the product readers see: after the bias add, if one. */
static const mcir_tensor *part_of(const mcir_graph *g, const mcir_node *mm) {
    const mcir_tensor *y = mm->outputs[0];
    mcir_node *cons[2];
    if (mcir_graph_consumers(g, y, cons, 2) == 1 && cons[0]->op == MCIR_OP_ADD &&
        cons[0]->n_inputs == 2) {
        const mcir_tensor *b = cons[0]->inputs[0] == y ? cons[0]->inputs[1] : cons[0]->inputs[0];
        if (b->kind == MCIR_TENSOR_WEIGHT && b->rank == 1) return cons[0]->outputs[0];
    }
    return y;
}

int mcir_matmul_siblings(const mcir_graph *g, const mcir_node *mm, mcir_node **out, int max) {
    int64_t k0, k;
    if (mm->dead || mm->op != MCIR_OP_MATMUL || mm->group >= 0 || !constant_rhs(mm, &k0) ||
        feeds_graph_output(g, mm))
        return 0;
    mcir_node *cons[64], *cand[65];
    int nc = mcir_graph_consumers(g, mm->inputs[0], cons, 64);
    int n = 0;
    cand[n++] = (mcir_node *)mm;
    for (int i = 0; i < nc && i < 64; i++) {
        const mcir_node *x = cons[i];
        if (x == mm || x->op != MCIR_OP_MATMUL || x->group >= 0 || x->inputs[0] != mm->inputs[0] ||
            x->inputs[1] == mm->inputs[0] || !constant_rhs(x, &k) || k != k0 ||
            x->inputs[1]->dtype != mm->inputs[1]->dtype ||
            mcir_node_bool(x, "transpose_a") != mcir_node_bool(mm, "transpose_a") ||
            mcir_node_bool(x, "transpose_b") != mcir_node_bool(mm, "transpose_b") ||
            feeds_graph_output(g, x))
            continue;
        cand[n++] = cons[i];
    }
    /* drop the ones that would lose an epilogue of their own */
    const mcir_tensor *prods[65];
    for (int i = 0; i < n; i++) prods[i] = cand[i]->outputs[0];
    int kept = 0;
    for (int i = 0; i < n; i++) {
        const mcir_tensor *others[65];
        int no = 0;
        for (int j = 0; j < n; j++)
            if (j != i) others[no++] = prods[j];
        if (private_epilogue(g, cand[i], others, no) ||
            !readers_take_views(g, part_of(g, cand[i]), 0)) {
            if (i == 0) return 0;
            continue;
        }
        if (kept < max) out[kept] = cand[i];
        kept++;
    }
    return kept;
}

/* Whether a pointwise path from tensor t (through elementwise ops and
 * index remaps) reaches an operand of a matmul or a conv; *gemm, *via say
 * which and through what. */
static bool reaches_gemm(const mcir_graph *g, const mcir_tensor *t, int depth, const mcir_node **gemm,
                         const mcir_node **via) {
    if (depth > 64) return false;
    mcir_node *cons[64];
    int k = mcir_graph_consumers(g, t, cons, 64);
    for (int i = 0; i < k && i < 64; i++) {
        const mcir_node *u = cons[i];
        if (u->op == MCIR_OP_MATMUL || u->op == MCIR_OP_CONV2D) {
            *gemm = u;
            return true;
        }
        if (!(mcir_op_desc_of(u->op)->flags & MCIR_OPF_ELEMENTWISE) && !remaps_index(u->op)) continue;
        for (int o = 0; o < u->n_outputs; o++)
            if (reaches_gemm(g, u->outputs[o], depth + 1, gemm, via)) {
                if (!*via) *via = u;
                return true;
            }
    }
    return false;
}

/* No pointwise path from the node's outputs reaches an operand of a matmul
 * or a conv: whether a chain feeding one joins it as a prologue is
 * gemm_prologue's decision, priced (prologue_pays), not a pointwise rule's. */
static bool check_not_gemm_operand(const mcir_check_ctx *c, const mcir_param_value *p, char *d, size_t n) {
    const mcir_node *nd = p[0].set && p[0].n > 0 ? c->match->nodes[p[0].refs[0]] : NULL;
    if (!nd) {
        say(d, n, "no node bound");
        return false;
    }
    for (int o = 0; o < nd->n_outputs; o++) {
        const mcir_node *gemm = NULL, *via = NULL;
        if (reaches_gemm(c->match->graph, nd->outputs[o], 0, &gemm, &via)) {
            say(d, n, "'%s' reaches %s '%s'%s%s%s (its prologue is gemm_prologue's to decide)", nd->outputs[o]->name,
                mcir_op_name(gemm->op), gemm->name, via ? " through '" : "", via ? via->name : "", via ? "'" : "");
            return false;
        }
    }
    say(d, n, "'%s' reaches no matmul or conv through pointwise ops", nd->name);
    return true;
}

static bool check_horizontal_siblings(const mcir_check_ctx *c, const mcir_param_value *p,
                                      char *d, size_t n) {
    const mcir_node *mm = p[0].set && p[0].n > 0 ? c->match->nodes[p[0].refs[0]] : NULL;
    if (!mm) {
        say(d, n, "no matmul bound");
        return false;
    }
    mcir_node *sib[MCIR_MAX_HORIZONTAL];
    int k = mcir_matmul_siblings(c->match->graph, mm, sib, MCIR_MAX_HORIZONTAL);
    if (k < 2) {
        say(d, n, "'%s' is the only ungrouped matmul reading '%s' with a constant weight of its "
            "shape class", mm->name, mm->inputs[0]->name);
        return false;
    }
    if (k > MCIR_MAX_HORIZONTAL) {
        say(d, n, "%d matmuls read '%s', more than %d", k, mm->inputs[0]->name,
            MCIR_MAX_HORIZONTAL);
        return false;
    }
    int64_t cols = 0;
    char names[256] = "";
    for (int i = 0; i < k; i++) {
        const mcir_tensor *b = sib[i]->inputs[1];
        cols += mcir_node_bool(sib[i], "transpose_b") ? b->shape[0] : b->shape[1];
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", sib[i]->name);
    }
    say(d, n, "%d matmuls read '%s' (%s): one GEMM of N = %lld over weights concatenated at "
        "compile time", k, mm->inputs[0]->name, names, (long long)cols);
    return true;
}

/* ------------------------------------------------ gated linear units */

/* t is read by `by` alone and is no graph output */
static bool only_reader(const mcir_graph *g, const mcir_tensor *t, const mcir_node *by) {
    mcir_node *cons[2];
    return !t->is_output && mcir_graph_consumers(g, t, cons, 2) == 1 && cons[0] == by;
}

bool mcir_glu_operands(const mcir_graph *g, const mcir_node *glu, const mcir_node *act, const mcir_node *gate,
                       const mcir_node *up, char *d, size_t n) {
    if (gate->op != MCIR_OP_MATMUL || up->op != MCIR_OP_MATMUL || gate->n_inputs != 2 || up->n_inputs != 2) {
        say(d, n, "'%s' and '%s' are not both products of two matrices", gate->name, up->name);
        return false;
    }
    const mcir_node *nodes[4] = {glu, act, gate, up};
    for (int i = 0; i < 4; i++)
        if (nodes[i]->group >= 0 || nodes[i]->dead) {
            say(d, n, "'%s' is already in a fusion group", nodes[i]->name);
            return false;
        }
    const mcir_tensor *X = gate->inputs[0], *Wg = gate->inputs[1], *Wu = up->inputs[1];
    const mcir_tensor *G = gate->outputs[0], *U = up->outputs[0], *Ga = act->outputs[0], *Y = glu->outputs[0];
    if (up->inputs[0] != X) {
        say(d, n, "'%s' reads '%s' and '%s' reads '%s': not one activation", gate->name, X->name, up->name,
            up->inputs[0]->name);
        return false;
    }
    if (Wg->kind != MCIR_TENSOR_WEIGHT || Wu->kind != MCIR_TENSOR_WEIGHT || Wg->rank != 2 || Wu->rank != 2 ||
        Wg->shape[0] != Wu->shape[0] || Wg->shape[1] != Wu->shape[1] || Wg->dtype != Wu->dtype) {
        say(d, n, "the weights '%s' and '%s' are not constant matrices of one shape and dtype", Wg->name, Wu->name);
        return false;
    }
    static const char *const flags[] = {"transpose_a", "transpose_b"};
    for (int i = 0; i < 2; i++)
        if (mcir_node_bool(gate, flags[i]) != mcir_node_bool(up, flags[i])) {
            say(d, n, "'%s' and '%s' differ in %s", gate->name, up->name, flags[i]);
            return false;
        }
    if ((X->dtype != MCIR_DTYPE_F16 && X->dtype != MCIR_DTYPE_BF16) || Wg->dtype != X->dtype) {
        say(d, n, "'%s' x '%s' is %s x %s: the paired epilogue is for the f16 / bf16 tensor-core GEMMs", X->name,
            Wg->name, mcir_dtype_name(X->dtype), mcir_dtype_name(Wg->dtype));
        return false;
    }
    const unsigned need = MCIR_OPF_ELEMENTWISE | MCIR_OPF_UNARY | MCIR_OPF_PURE;
    if ((mcir_op_desc_of(act->op)->flags & need) != need || act->n_inputs != 1 || act->inputs[0] != G) {
        say(d, n, "'%s' (%s) is not a unary elementwise op of '%s' alone", act->name, mcir_op_name(act->op),
            G->name);
        return false;
    }
    if (glu->op != MCIR_OP_MUL || glu->n_inputs != 2 ||
        !((glu->inputs[0] == Ga && glu->inputs[1] == U) || (glu->inputs[0] == U && glu->inputs[1] == Ga))) {
        say(d, n, "'%s' does not multiply '%s' by '%s'", glu->name, Ga->name, U->name);
        return false;
    }
    const mcir_tensor *inner[3] = {G, Ga, U};
    const mcir_node *reader[3] = {act, glu, glu};
    for (int i = 0; i < 3; i++)
        if (!only_reader(g, inner[i], reader[i])) {
            say(d, n, "'%s' is %s: the fused GEMM keeps it in registers", inner[i]->name,
                inner[i]->is_output ? "a graph output" : "read elsewhere too");
            return false;
        }
    if (X->sym || G->sym || U->sym || Y->sym) {
        say(d, n, "'%s' has a symbolic dim: the interleaved product is read back through reshapes of static "
            "extents", X->sym ? X->name : Y->name);
        return false;
    }
    const int64_t f = G->shape[G->rank - 1];
    if (G->rank < 2 || f % 8 != 0 || !same_shape(G, U) || !same_shape(G, Y)) {
        say(d, n, "'%s' has %lld columns: the weights interleave in blocks of 8 (a multiple of 8 needed)", G->name,
            (long long)f);
        return false;
    }
    if (2 * mcir_tensor_numel(Wg) > ((int64_t)1 << 28)) {
        say(d, n, "the interleaved weight would hold %lld elements", (long long)(2 * mcir_tensor_numel(Wg)));
        return false;
    }
    say(d, n, "'%s' and '%s' read '%s' with constant %s weights: one GEMM of N = %lld over the two interleaved "
        "in blocks of 8 columns, %s(gate) * up from each thread's accumulator pairs", gate->name, up->name,
        X->name, mcir_dtype_name(Wg->dtype), (long long)(2 * f), mcir_op_name(act->op));
    return true;
}

static const mcir_node *ref_node(const mcir_check_ctx *c, const mcir_param_value *p) {
    return p->set && p->n > 0 ? c->match->nodes[p->refs[0]] : NULL;
}

bool mcir_norm_gamma_foldable(const mcir_graph *g, const mcir_node *norm, char *d, size_t n) {
    if (norm->op != MCIR_OP_RMSNORM || norm->n_inputs != 2 || norm->dead || norm->group >= 0) {
        say(d, n, "'%s' is not a live, ungrouped rmsnorm", norm->name);
        return false;
    }
    const mcir_tensor *X = norm->inputs[0], *gamma = norm->inputs[1], *Y = norm->outputs[0];
    int64_t axis = mcir_node_int(norm, "axis");
    if (axis < 0) axis += X->rank;
    const int64_t k = X->rank > 0 ? X->shape[X->rank - 1] : 0;
    if (X->rank < 1 || axis != X->rank - 1) {
        say(d, n, "'%s' normalises over more than the last axis", norm->name);
        return false;
    }
    if (gamma->kind != MCIR_TENSOR_WEIGHT || mcir_tensor_numel(gamma) != k || gamma->shape[gamma->rank - 1] != k) {
        say(d, n, "'%s''s gamma '%s' is not a constant of one value per column", norm->name, gamma->name);
        return false;
    }
    float *v = malloc((size_t)k * sizeof *v + 1);
    MCIR_ASSERT(v);
    mcir_weight_values(gamma, v);
    bool ones = true;
    for (int64_t i = 0; i < k && ones; i++) ones = v[i] == 1.0f;
    free(v);
    if (ones) {
        say(d, n, "'%s''s gamma is all ones: nothing to fold", norm->name);
        return false;
    }
    if (Y->is_output) {
        say(d, n, "'%s' is a graph output: it keeps its gamma", Y->name);
        return false;
    }
    mcir_node *cons[9];
    const int nc = mcir_graph_consumers(g, Y, cons, 9);
    if (nc < 1 || nc > 8) {
        say(d, n, "'%s' has %d readers (1 to 8 folded)", Y->name, nc);
        return false;
    }
    for (int i = 0; i < nc; i++) {
        const mcir_node *mm = cons[i];
        const mcir_tensor *w = mm->n_inputs == 2 ? mm->inputs[1] : NULL;
        const bool tb = mcir_node_bool(mm, "transpose_b");
        if (mm->op != MCIR_OP_MATMUL || mm->group >= 0 || mm->inputs[0] != Y || !w || w == Y ||
            mcir_node_bool(mm, "transpose_a") || w->kind != MCIR_TENSOR_WEIGHT || w->rank != 2 ||
            w->shape[tb ? 1 : 0] != k || mcir_tensor_numel(w) > ((int64_t)1 << 28)) {
            say(d, n, "'%s' reads '%s' where its gamma cannot fold: %s", mm->name, Y->name,
                mm->op != MCIR_OP_MATMUL ? "not a matmul"
                : mm->group >= 0         ? "a matmul already in a fusion group"
                                         : "not as A of a constant weight of K rows");
            return false;
        }
    }
    say(d, n, "'%s''s gamma folds into the rows of the weights of its %d reader%s", norm->name, nc,
        nc > 1 ? "s" : "");
    return true;
}

static bool check_norm_gamma_foldable(const mcir_check_ctx *c, const mcir_param_value *p, char *d, size_t n) {
    const mcir_node *norm = ref_node(c, &p[0]);
    if (!norm) {
        say(d, n, "the match binds no norm");
        return false;
    }
    return mcir_norm_gamma_foldable(c->match->graph, norm, d, n);
}

static bool check_glu_operands(const mcir_check_ctx *c, const mcir_param_value *p, char *d, size_t n) {
    const mcir_node *glu = ref_node(c, &p[0]), *act = ref_node(c, &p[1]), *gate = ref_node(c, &p[2]),
                    *up = ref_node(c, &p[3]);
    if (!glu || !act || !gate || !up) {
        say(d, n, "the match binds no product, activation, gate or up projection");
        return false;
    }
    return mcir_glu_operands(c->match->graph, glu, act, gate, up, d, n);
}

/* The paired epilogue on the generated GEMM is modelled faster than the
 * library's product [.., 2F] stored and an elementwise kernel
 * (mcir_gemm_glu_pays). */
static bool check_glu_pays(const mcir_check_ctx *c, const mcir_param_value *p, char *d, size_t n) {
    const mcir_node *gate = ref_node(c, &p[0]), *glu = ref_node(c, &p[1]);
    if (!gate || !glu || gate->op != MCIR_OP_MATMUL || gate->n_inputs != 2) {
        say(d, n, "the match binds no gate projection");
        return false;
    }
    const mcir_tensor *X = gate->inputs[0], *W = gate->inputs[1], *G = gate->outputs[0];
    if (X->rank < 2 || W->rank != 2 || G->rank < 2) {
        say(d, n, "'%s' is not a product of matrices", gate->name);
        return false;
    }
    const bool ta = mcir_node_bool(gate, "transpose_a");
    const int64_t m = X->shape[X->rank - (ta ? 1 : 2)], k = X->shape[X->rank - (ta ? 2 : 1)];
    const int64_t f = G->shape[G->rank - 1], mf = m * f > 0 ? m * f : 1;
    return mcir_gemm_glu_pays(c->target, X->dtype, mcir_tensor_numel(G) / mf, m, 2 * f, k, mcir_tensor_bytes(X),
                              2 * mcir_tensor_bytes(W), mcir_tensor_bytes(glu->outputs[0]), d, n);
}

/* ------------------------------------------------------ working set */

static const char *const ws_model_names[] = {"attention", "matmul", "conv2d", "norm", "auto",
                                             NULL};

bool mcir_ws_model_parse(const char *name, mcir_ws_model *out) {
    for (int i = 0; ws_model_names[i]; i++)
        if (strcmp(name, ws_model_names[i]) == 0) {
            *out = (mcir_ws_model)i;
            return true;
        }
    return false;
}

/* GEMM tiles: A and B tiles, two pipeline stages. */
static int64_t gemm_ws_bytes(int64_t es, const int *tile) {
    return 2 * es * ((int64_t)tile[0] * tile[2] + (int64_t)tile[2] * tile[1]);
}

/* Attention and norms: the launch model of their templates
 * (kernelplan/launch.c) — the tile the planner would choose, its shared
 * memory (static + dynamic) exactly as the kernel declares it. */
static void ws_launch_model(const mcir_target *target, mcir_ws_model model, const int64_t *dims,
                            mcir_dtype dtype, mcir_working_set *out) {
    memset(out->tile, 0, sizeof out->tile);
    if (model == MCIR_WS_ATTENTION) {
        mcir_attention_problem g;
        mcir_attention_problem_dims(dims[0], dims[1], dtype, &g);
        mcir_attention_layout l;
        if (mcir_attention_candidates(target, &g, &l, 1) == 1) {
            out->fits = true;
        } else {   /* the smallest tile the template takes, and why it fails */
            const char *why;
            mcir_attention_layout_of(target, &g, g.mma ? 16 : 4, g.mma ? 16 : 32, 0, &l, &why);
        }
        out->bytes = l.smem_bytes + l.smem_static_bytes;
        out->tile[0] = (int)l.bm;
        out->tile[1] = (int)l.bn;
        return;
    }
    mcir_rows_problem g = {.kind = MCIR_ROWS_NORM, .rows = 1, .width = dims[0], .inner = 1,
                           .direct_read = true, .dtype = dtype};
    mcir_rows_layout l;
    out->fits = mcir_rows_candidates(target, &g, &l, 1) == 1;
    out->bytes = out->fits ? l.smem_bytes + l.smem_static_bytes : 0;
    out->tile[0] = out->fits ? (int)l.rows_per_block : 1;
}

void mcir_working_set_compute(const mcir_target *target, mcir_ws_model model,
                              const int64_t *dims, mcir_dtype dtype, mcir_working_set *out) {
    static const int gemm_tiles[][3] = {
        {128, 128, 32}, {128, 64, 32}, {64, 64, 32}, {32, 32, 32}, {16, 16, 16}};
    int64_t es = (int64_t)mcir_dtype_size(dtype);
    out->limit = target->smem_per_block_optin;
    out->fits = false;
    if (model == MCIR_WS_ATTENTION || model == MCIR_WS_NORM) {
        ws_launch_model(target, model, dims, dtype, out);
        return;
    }
    int n_tiles = (int)(sizeof gemm_tiles / sizeof gemm_tiles[0]);
    for (int i = 0; i < n_tiles; i++) {
        out->bytes = gemm_ws_bytes(es, gemm_tiles[i]);
        memcpy(out->tile, gemm_tiles[i], sizeof out->tile);
        if (out->bytes <= out->limit) {
            out->fits = true;
            return;
        }
    }
}

static mcir_ws_model ws_model_of(mcir_op op) {
    switch (op) {
    case MCIR_OP_ATTENTION: return MCIR_WS_ATTENTION;
    case MCIR_OP_CONV2D: return MCIR_WS_CONV2D;
    case MCIR_OP_MATMUL: return MCIR_WS_MATMUL;
    default: return MCIR_WS_NORM;
    }
}

static bool ws_from_node(const mcir_node *nd, mcir_ws_model model, int64_t *dims,
                         mcir_dtype *dt) {
    const mcir_tensor *x = nd->inputs[0];
    *dt = x->dtype;
    switch (model) {
    case MCIR_WS_AUTO: return false;
    case MCIR_WS_ATTENTION:
        if (nd->n_inputs < 3) return false;
        dims[0] = x->shape[x->rank - 1];
        dims[1] = nd->inputs[2]->shape[nd->inputs[2]->rank - 1];
        return true;
    case MCIR_WS_MATMUL: {
        if (nd->op != MCIR_OP_MATMUL) return false;
        const mcir_tensor *y = nd->outputs[0];
        dims[0] = y->shape[y->rank - 2];
        dims[1] = y->shape[y->rank - 1];
        bool ta = mcir_node_bool(nd, "transpose_a");
        dims[2] = ta ? x->shape[x->rank - 2] : x->shape[x->rank - 1];
        return true;
    }
    case MCIR_WS_CONV2D: {
        if (nd->op != MCIR_OP_CONV2D) return false;
        const mcir_tensor *w = nd->inputs[1], *y = nd->outputs[0];
        dims[0] = y->shape[0] * y->shape[2] * y->shape[3];
        dims[1] = w->shape[0];
        dims[2] = w->shape[1] * w->shape[2] * w->shape[3];
        return true;
    }
    case MCIR_WS_NORM: {
        bool mask[MCIR_MAX_RANK];
        int rank;
        if (!reduced_axes(nd, mask, &rank)) return false;
        dims[0] = 1;
        for (int i = 0; i < rank; i++)
            if (mask[i]) dims[0] *= x->shape[i];
        return true;
    }
    }
    return false;
}

static bool check_fits_on_chip(const mcir_check_ctx *c, const mcir_param_value *p, char *d,
                               size_t n) {
    mcir_ws_model model = MCIR_WS_AUTO;
    MCIR_ASSERT(mcir_ws_model_parse(p[0].s, &model));
    int64_t dims[3] = {1, 1, 1};
    mcir_dtype dt = MCIR_DTYPE_F32;
    const mcir_node *nd = p[1].set ? c->match->nodes[p[1].refs[0]] : NULL;
    if (model == MCIR_WS_AUTO) {
        if (!nd) {
            say(d, n, "model 'auto' needs a node");
            return false;
        }
        model = ws_model_of(nd->op);
    }
    if (nd) {
        if (!ws_from_node(nd, model, dims, &dt)) {
            say(d, n, "no %s working-set model for '%s' (%s)", p[0].s, nd->name,
                mcir_op_name(nd->op));
            return false;
        }
    } else {
        const mcir_tensor *t[2] = {NULL, NULL};
        for (int i = 0; p[2].set && i < p[2].n && i < 2; i++)
            t[i] = var_tensor(c, p[2].refs[i]);
        if (!t[0]) {
            say(d, n, "no node or input tensors bound to measure");
            return false;
        }
        dt = t[0]->dtype;
        switch (model) {
        case MCIR_WS_ATTENTION: /* inputs: Q, V */
            dims[0] = t[0]->shape[t[0]->rank - 1];
            dims[1] = t[1] ? t[1]->shape[t[1]->rank - 1] : dims[0];
            break;
        case MCIR_WS_MATMUL: /* inputs: A, B */
            dims[0] = t[0]->rank >= 2 ? t[0]->shape[t[0]->rank - 2] : 1;
            dims[2] = t[0]->shape[t[0]->rank - 1];
            dims[1] = t[1] ? t[1]->shape[t[1]->rank - 1] : 1;
            break;
        case MCIR_WS_CONV2D:
            say(d, n, "the conv2d model needs a node");
            return false;
        case MCIR_WS_NORM: dims[0] = t[0]->shape[t[0]->rank - 1]; break;
        case MCIR_WS_AUTO: break;
        }
    }
    mcir_working_set ws;
    mcir_working_set_compute(c->target, model, dims, dt, &ws);
    char a[32], b[32], tile[96];
    const char *least = ws.fits ? "" : "smallest ";
    switch (model) {
    case MCIR_WS_ATTENTION:
        snprintf(tile, sizeof tile, "head dim %lld, %stile %dx%d", (long long)dims[0], least,
                 ws.tile[0], ws.tile[1]);
        break;
    case MCIR_WS_NORM:
        snprintf(tile, sizeof tile, "rows of %lld, %s%d rows per block", (long long)dims[0],
                 least, ws.tile[0]);
        break;
    default:
        snprintf(tile, sizeof tile, "%stile %dx%dx%d", least, ws.tile[0], ws.tile[1],
                 ws.tile[2]);
        break;
    }
    if (!ws.fits && ws.bytes <= ws.limit)   /* attention: the accumulators, not the tiles */
        say(d, n, "working set %s <= %s but the accumulators exceed %d registers per thread (%s, %s)",
            mcir_bytes_str(ws.bytes, a, sizeof a), mcir_bytes_str(ws.limit, b, sizeof b),
            c->target->regs_per_thread, c->target->name, tile);
    else
        say(d, n, "working set %s %s %s (%s, %s)", mcir_bytes_str(ws.bytes, a, sizeof a),
            ws.fits ? "<=" : ">", mcir_bytes_str(ws.limit, b, sizeof b), c->target->name, tile);
    return ws.fits;
}

/* The members of the fused group of `at` that compute the A operand of
 * the group's matmul (its prologue: walked up from A through producers in
 * the group), with the matmul in *mm; -1 when the group holds no matmul
 * (or at is in none), -2 when at is not among them (an epilogue node) or A
 * is transposed, -3 past cap. */
static int gemm_prologue_of(const mcir_graph *g, const mcir_node *at, const mcir_node **mm, const mcir_node **pro,
                            int cap) {
    if (at->group < 0) return -1;
    const mcir_node *gm[MCIR_MAX_GROUP_OPS + 1];
    const int gid = at->group;
    int ng = mcir_graph_group_members(g, &gid, 1, gm, MCIR_MAX_GROUP_OPS + 1);
    *mm = NULL;
    for (int i = 0; i < ng && i <= MCIR_MAX_GROUP_OPS; i++)
        if (gm[i]->op == MCIR_OP_MATMUL) *mm = gm[i];
    if (!*mm) return -1;
    if (mcir_node_bool(*mm, "transpose_a")) return -2;
    const mcir_tensor *stack[MCIR_MAX_GROUP_OPS + 1];
    int ns = 0, np = 0;
    bool found = false;
    stack[ns++] = (*mm)->inputs[0];
    while (ns > 0) {
        const mcir_tensor *t = stack[--ns];
        const mcir_node *p = t->producer;
        bool in = false, dup = false;
        for (int i = 0; i < ng && i <= MCIR_MAX_GROUP_OPS && p; i++) in = in || gm[i] == p;
        if (!in) continue;
        for (int i = 0; i < np; i++) dup = dup || pro[i] == p;
        if (dup) continue;
        if (np == cap) return -3;
        pro[np++] = p;
        found = found || p == at;
        for (int j = 0; j < p->n_inputs && ns < MCIR_MAX_GROUP_OPS + 1; j++) stack[ns++] = p->inputs[j];
    }
    return found ? np : -2;
}

/* Fusing the prologue group of `producer` into matmul `node` is modelled
 * faster than materialising its output (mcir_gemm_prologue_pays): the
 * group reads its inputs from outside once either way; apart it also
 * writes A and the library GEMM reads it back. */
static bool check_prologue_pays(const mcir_check_ctx *c, const mcir_param_value *p, char *d, size_t n) {
    const mcir_node *mm = c->match->nodes[p[0].refs[0]];
    mcir_param_value only = p[1];   /* the producer's merged group, as groupable sees it */
    const mcir_node *members[MCIR_MAX_GROUP_OPS + 1];
    int nm = group_members(c, &only, members, MCIR_MAX_GROUP_OPS + 1);
    if (mm->op != MCIR_OP_MATMUL) {
        /* a node of a GEMM's prologue, the producer's group joining it (a
         * chain through a cast): the whole prologue, the matmul's members
         * that compute its A, with the producer's group */
        const mcir_node *at = mm;
        const mcir_node *pro[MCIR_MAX_GROUP_OPS + 1];
        int np = gemm_prologue_of(c->match->graph, at, &mm, pro, MCIR_MAX_GROUP_OPS + 1);
        if (np < 0) {
            say(d, n, "'%s' computes no matmul's A in a fused prologue (%s)", at->name,
                np == -1 ? "its group holds no matmul" : np == -2 ? "its output reaches the matmul after the product, "
                "or A is transposed" : "the prologue is too long");
            return false;
        }
        for (int i = 0; i < np; i++) {
            bool dup = false;
            for (int j = 0; j < nm; j++) dup = dup || members[j] == pro[i];
            if (!dup && nm < MCIR_MAX_GROUP_OPS + 1) members[nm++] = pro[i];
        }
    }
    const mcir_tensor *a = mm->inputs[0], *b = mm->n_inputs > 1 ? mm->inputs[1] : NULL, *y = mm->outputs[0];
    if (!b || a->rank < 2 || b->rank < 2) {
        say(d, n, "'%s' is not a product of matrices", mm->name);
        return false;
    }
    /* A stored [.., K, M] under transpose_a */
    const bool ta = mcir_node_bool(mm, "transpose_a");
    int64_t m = a->shape[a->rank - (ta ? 1 : 2)], k = a->shape[a->rank - (ta ? 2 : 1)];
    int64_t cols = mcir_node_bool(mm, "transpose_b") ? b->shape[b->rank - 2] : b->shape[b->rank - 1];
    int64_t mn = m * cols > 0 ? m * cols : 1, batch = mcir_tensor_numel(y) / mn;
    int64_t in = 0;
    const mcir_tensor *seen[64];
    int ns = 0;
    for (int i = 0; i < nm; i++)
        for (int j = 0; j < members[i]->n_inputs; j++) {
            const mcir_tensor *t = members[i]->inputs[j];
            bool inside = false;
            for (int q = 0; q < nm && t->producer; q++) inside = inside || t->producer == members[q];
            for (int q = 0; q < ns; q++) inside = inside || seen[q] == t;
            if (inside) continue;
            if (ns < 64) seen[ns++] = t;
            in += mcir_tensor_bytes(t);
        }
    /* a cast on the way: the sm_90a template converts a leaf of f16, bf16
     * or f32 as A's chain reads it (an f32 leaf as two TMA boxes of 32
     * columns per K step: in_bytes above counts its 4 bytes an element);
     * other dtypes and other targets keep the cast apart (a kernel of its
     * own, then the GEMM as before) */
    for (int i = 0; i < nm; i++) {
        if (members[i]->op != MCIR_OP_CAST) continue;
        const mcir_tensor *x = members[i]->inputs[0], *o = members[i]->outputs[0];
        const bool fx = x->dtype == MCIR_DTYPE_F16 || x->dtype == MCIR_DTYPE_BF16 || x->dtype == MCIR_DTYPE_F32;
        const bool fo = o->dtype == MCIR_DTYPE_F16 || o->dtype == MCIR_DTYPE_BF16 || o->dtype == MCIR_DTYPE_F32;
        if (!c->target || !c->target->has_wgmma || !fx || !fo) {
            say(d, n, "a cast from %s to %s into '%s' is fused only on the sm_90a template, between f16, bf16 and f32",
                mcir_dtype_name(x->dtype), mcir_dtype_name(o->dtype), mm->name);
            return false;
        }
        if (x->dtype == MCIR_DTYPE_F32 && mcir_node_bool(mm, "transpose_a")) {
            say(d, n, "a cast from f32 into '%s''s A stored [K, M] (transpose_a) stays apart: the sm_90a template "
                "reads an f32 leaf as two boxes of 32 columns, K-major only", mm->name);
            return false;
        }
    }
    /* A = x * s with s one value per row ([.., M, 1]; A stored [.., K, M]
     * under transpose_a: one per stored column, [M], [.., 1, M]) and nothing
     * else: the sm_90a template reads x as A and scales the product's rows */
    bool row_scale = false;
    if (nm == 1 && members[0]->op == MCIR_OP_MUL && members[0]->n_inputs == 2)
        for (int j = 0; j < 2; j++) {
            const mcir_tensor *s = members[0]->inputs[j], *x = members[0]->inputs[1 - j];
            const bool per_row = ta ? s->rank >= 1 && s->shape[s->rank - 1] == m &&
                                          (s->rank == 1 || s->shape[s->rank - 2] == 1)
                                    : s->rank >= 2 && s->shape[s->rank - 1] == 1 && s->shape[s->rank - 2] == m;
            row_scale = row_scale || (per_row && mcir_tensor_numel(x) == mcir_tensor_numel(a) && x->rank == a->rank);
        }
    return mcir_gemm_prologue_pays(c->target, a->dtype, batch, m, cols, k, in, mcir_tensor_bytes(a),
                                   mcir_tensor_bytes(b) + mcir_tensor_bytes(y), row_scale, d, n);
}

/* --------------------------------------------------------------- table */

#define SPECS(a) a, (int)(sizeof(a) / sizeof(a[0]))

static const mcir_param_spec p_tensors[] = {
    {"tensors", MCIR_PARAM_TENSORS, true, "pattern variables to check", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec p_nodes[] = {
    {"nodes", MCIR_PARAM_NODES, false, "pattern nodes (default: every matched node)", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec p_node[] = {
    {"node", MCIR_PARAM_NODE, true, "pattern node", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec p_dtype_allowed[] = {
    {"tensors", MCIR_PARAM_TENSORS, true, "pattern variables to check", NULL, MCIR_RANGE_ANY},
    {"dtypes", MCIR_PARAM_DTYPES, true, "allowed dtypes", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec p_shape_divisible[] = {
    {"tensor", MCIR_PARAM_TENSOR, true, "pattern variable", NULL, MCIR_RANGE_ANY},
    {"axis", MCIR_PARAM_INT, false, "axis (default -1)", NULL, MCIR_RANGE_AXIS},
    {"by", MCIR_PARAM_INT, true, "divisor", NULL, MCIR_RANGE_POSITIVE}};
static const mcir_param_spec p_broadcasts_to[] = {
    {"tensor", MCIR_PARAM_TENSOR, true, "the tensor that broadcasts", NULL, MCIR_RANGE_ANY},
    {"target", MCIR_PARAM_TENSOR, true, "the shape it must broadcast to without growing it",
     NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec p_last_axis_param[] = {
    {"tensors", MCIR_PARAM_TENSORS, true, "per-channel parameters (gamma, beta)", NULL, MCIR_RANGE_ANY},
    {"of", MCIR_PARAM_TENSOR, true, "the normalised tensor", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec p_glu_operands[] = {
    {"glu", MCIR_PARAM_NODE, true, "the mul of act(gate) by up", NULL, MCIR_RANGE_ANY},
    {"act", MCIR_PARAM_NODE, true, "the activation of the gate's product", NULL, MCIR_RANGE_ANY},
    {"gate", MCIR_PARAM_NODE, true, "the gate projection (a matmul)", NULL, MCIR_RANGE_ANY},
    {"up", MCIR_PARAM_NODE, true, "the up projection (a matmul of the same A)", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec p_glu_pays[] = {
    {"gate", MCIR_PARAM_NODE, true, "the gate projection (a matmul)", NULL, MCIR_RANGE_ANY},
    {"glu", MCIR_PARAM_NODE, true, "the mul of act(gate) by up", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec p_prologue_pays[] = {
    {"node", MCIR_PARAM_NODE, true, "the matmul, or a node of its fused prologue (the producer's group joins it)",
     NULL, MCIR_RANGE_ANY},
    {"producer", MCIR_PARAM_NODES, true, "the node computing its A (with its fusion group)", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec p_fits_on_chip[] = {
    {"model", MCIR_PARAM_STRING, true, "working-set model", ws_model_names, MCIR_RANGE_ANY},
    {"node", MCIR_PARAM_NODE, false, "the node whose shapes to use", NULL, MCIR_RANGE_ANY},
    {"inputs", MCIR_PARAM_TENSORS, false,
     "or the tensors: attention [Q, V], matmul [A, B], norm [X]", NULL, MCIR_RANGE_ANY}};

const mcir_check_desc mcir_checks[] = {
    {"single_consumer", "each tensor has exactly one consumer", SPECS(p_tensors),
     check_single_consumer},
    {"not_graph_output", "no tensor is a graph output", SPECS(p_tensors),
     check_not_graph_output},
    {"only_used_in_match", "each tensor is used only by matched nodes (and not returned)",
     SPECS(p_tensors), check_only_used_in_match},
    {"is_intermediate", "each tensor is produced by a node and not returned",
     SPECS(p_tensors), check_is_intermediate},
    {"materialized", "each tensor is still materialized (not fused away)", SPECS(p_tensors),
     check_materialized},
    {"is_constant", "each tensor is a constant weight", SPECS(p_tensors), check_is_constant},
    {"scalar_constant", "each tensor is a constant weight with one element",
     SPECS(p_tensors), check_scalar_constant},
    {"pure", "the nodes have no side effects", SPECS(p_nodes), check_pure},
    {"has_wgmma", "the target has wgmma and the TMA (sm_90a)", SPECS(p_nodes), check_has_wgmma},
    {"deterministic", "the nodes give the same bits for the same inputs", SPECS(p_nodes),
     check_deterministic},
    {"reduction_last_axis", "the nodes reduce (or normalise) over the last axis only",
     SPECS(p_nodes), check_reduction_last_axis},
    {"mergeable_statistics", "the nodes keep statistics that merge across chunks",
     SPECS(p_nodes), check_mergeable_statistics},
    {"fits_on_chip", "a tiling whose working set fits in shared memory exists",
     SPECS(p_fits_on_chip), check_fits_on_chip},
    {"dtype_allowed", "each tensor has one of the allowed dtypes", SPECS(p_dtype_allowed),
     check_dtype_allowed},
    {"shape_divisible", "a dimension is divisible by a number", SPECS(p_shape_divisible),
     check_shape_divisible},
    {"same_shape", "the tensors have the same shape and dtype", SPECS(p_tensors),
     check_same_shape},
    {"broadcasts_to", "a tensor broadcasts to another's shape without growing it",
     SPECS(p_broadcasts_to), check_broadcasts_to},
    {"last_axis_param", "parameters are per-channel over the last axis",
     SPECS(p_last_axis_param), check_last_axis_param},
    {"groupable", "merging the nodes' fusion groups leaves one compute op per kernel",
     SPECS(p_nodes), check_groupable},
    {"pointwise_group", "the nodes' merged fusion groups hold only elementwise ops, slices, "
     "concatenations and splits", SPECS(p_nodes), check_pointwise_group},
    {"pointwise_consumers", "each tensor is read only by pointwise ops (at most 16)",
     SPECS(p_tensors), check_pointwise_consumers},
    {"prologue_pays", "fusing the producer's group into the matmul as a prologue is modelled faster than "
     "materialising A for the library GEMM", SPECS(p_prologue_pays), check_prologue_pays},
    {"not_gemm_operand", "no pointwise path from the node's outputs reaches a matmul or conv operand", SPECS(p_node),
     check_not_gemm_operand},
    {"glu_operands", "a gate and an up projection of one activation with constant weights of one shape, the "
     "gate's activation times the up's product, nothing else reading them (f16 / bf16, columns a multiple of 8)",
     SPECS(p_glu_operands), check_glu_operands},
    {"norm_gamma_foldable", "an rmsnorm's constant gamma folds into the rows of the constant weights of the matmuls "
     "reading its output (every reader one)", SPECS(p_node), check_norm_gamma_foldable},
    {"glu_pays", "the generated GEMM with the paired epilogue is modelled faster than the library's product stored "
     "and an elementwise kernel", SPECS(p_glu_pays), check_glu_pays},
    {"horizontal_siblings", "other matmuls read the node's A with constant weights of the "
     "same contraction length, dtype and flags (at most 8 in all)", SPECS(p_node),
     check_horizontal_siblings},
};
const int mcir_n_checks = (int)(sizeof mcir_checks / sizeof mcir_checks[0]);

const mcir_check_desc *mcir_check_find(const char *name) {
    for (int i = 0; i < mcir_n_checks; i++)
        if (strcmp(mcir_checks[i].name, name) == 0) return &mcir_checks[i];
    return NULL;
}

int mcir_param_index(const mcir_param_spec *specs, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(specs[i].name, name) == 0) return i;
    return -1;
}

/* ----------------------------------------------------------- lowerings */

const mcir_lowering_desc mcir_lowerings[] = {
    {"online_softmax_tiled", "flash-style tiled attention: running max and sum, scores and "
     "probabilities only as tiles on chip"},
    {"one_pass_streaming_norm", "one-pass norm kernel: statistics merged while the row "
     "streams through (online softmax, Welford, sum of squares)"},
    {"recompute_in_kernel", "the value is recomputed in registers inside its consumer's or "
     "producer's kernel, never stored"},
    {"smem_tiled", "tiles sized from the target's shared memory and registers"},
    {"write_in_place", "the output is written over a dying input's buffer"},
    {"constant_folded_into_weights", "a constant per-column scale is multiplied into the consuming GEMMs' weights "
     "once, at compile time: no kernel applies it"},
    {"gemm_paired_epilogue", "one GEMM over weights interleaved at compile time; its epilogue combines each "
     "thread's accumulator pairs (a gate column and its up column) and stores the half-width result"},
    {"one_gemm_concatenated_weights", "one GEMM over weights concatenated at compile time; "
     "the shared activation is read once and the parts are strided views of the product"},
};
const int mcir_n_lowerings = (int)(sizeof mcir_lowerings / sizeof mcir_lowerings[0]);

const mcir_lowering_desc *mcir_lowering_find(const char *name) {
    for (int i = 0; i < mcir_n_lowerings; i++)
        if (strcmp(mcir_lowerings[i].name, name) == 0) return &mcir_lowerings[i];
    return NULL;
}

/* ------------------------------------------------------------- actions */

static const mcir_param_spec a_attention[] = {
    {"q", MCIR_PARAM_TENSOR, true, "queries before any scaling", NULL, MCIR_RANGE_ANY},
    {"k", MCIR_PARAM_TENSOR, true, "keys before any scaling or transpose", NULL, MCIR_RANGE_ANY},
    {"v", MCIR_PARAM_TENSOR, true, "values (the second input of the P·V matmul)", NULL, MCIR_RANGE_ANY},
    {"qk", MCIR_PARAM_NODE, true, "the Q·Kᵀ matmul", NULL, MCIR_RANGE_ANY},
    {"k_transpose", MCIR_PARAM_NODE, false, "the transpose applied to K, if any", NULL, MCIR_RANGE_ANY},
    {"scales", MCIR_PARAM_NODES, false, "scale/mul/div nodes on Q, K or the scores", NULL, MCIR_RANGE_ANY},
    {"mask", MCIR_PARAM_TENSOR, false, "the additive mask", NULL, MCIR_RANGE_ANY},
    {"pv", MCIR_PARAM_NODE, true, "the P·V matmul", NULL, MCIR_RANGE_ANY},
    {"output", MCIR_PARAM_TENSOR, false, "the tensor the fused op produces (default: the "
     "anchor's output)", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec a_layernorm[] = {
    {"x", MCIR_PARAM_TENSOR, true, "the normalised input", NULL, MCIR_RANGE_ANY},
    {"eps", MCIR_PARAM_TENSOR, true, "the scalar constant added to the variance", NULL, MCIR_RANGE_ANY},
    {"gamma", MCIR_PARAM_TENSOR, false, "scale (ones if absent)", NULL, MCIR_RANGE_ANY},
    {"beta", MCIR_PARAM_TENSOR, false, "shift (zeros if absent)", NULL, MCIR_RANGE_ANY},
    {"output", MCIR_PARAM_TENSOR, false, "the tensor the fused op produces", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec a_rmsnorm[] = {
    {"x", MCIR_PARAM_TENSOR, true, "the normalised input", NULL, MCIR_RANGE_ANY},
    {"eps", MCIR_PARAM_TENSOR, true, "the scalar constant added to the mean square", NULL, MCIR_RANGE_ANY},
    {"gamma", MCIR_PARAM_TENSOR, false, "scale (ones if absent)", NULL, MCIR_RANGE_ANY},
    {"output", MCIR_PARAM_TENSOR, false, "the tensor the fused op produces", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec a_softmax[] = {
    {"x", MCIR_PARAM_TENSOR, true, "the input", NULL, MCIR_RANGE_ANY},
    {"axis", MCIR_PARAM_INT, false, "normalised axis (default -1)", NULL, MCIR_RANGE_AXIS},
    {"output", MCIR_PARAM_TENSOR, false, "the tensor the fused op produces", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec a_replace_op[] = {
    {"op", MCIR_PARAM_OP, true, "the op that replaces the match", NULL, MCIR_RANGE_ANY},
    {"inputs", MCIR_PARAM_TENSORS, true, "its inputs, in order", NULL, MCIR_RANGE_ANY},
    {"attrs", MCIR_PARAM_ATTRS, false, "its attributes", NULL, MCIR_RANGE_ANY},
    {"output", MCIR_PARAM_TENSOR, false, "the tensor it produces", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec a_annotate_only[] = {
    {"nodes", MCIR_PARAM_NODES, false, "nodes to annotate (default: the anchor)", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec a_fuse_group[] = {
    {"nodes", MCIR_PARAM_NODES, true, "nodes that become one kernel", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec a_horizontal[] = {
    {"node", MCIR_PARAM_NODE, true, "a matmul whose siblings join it", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec a_fold_conv_affine[] = {
    {"conv", MCIR_PARAM_NODE, true, "the conv2d with a constant weight (and bias)", NULL, MCIR_RANGE_ANY},
    {"scale", MCIR_PARAM_NODE, true, "the mul of its output by one constant per output channel", NULL, MCIR_RANGE_ANY},
    {"shift", MCIR_PARAM_NODE, false, "the add of one constant per output channel after it", NULL, MCIR_RANGE_ANY},
    {"output", MCIR_PARAM_TENSOR, true, "the tensor the folded conv produces", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec a_conv_as_matmul[] = {
    {"conv", MCIR_PARAM_NODE, true, "a 1x1 conv2d (stride 1, no padding, one group) with a constant weight",
     NULL, MCIR_RANGE_ANY},
    {"output", MCIR_PARAM_TENSOR, true, "its output, which the matmul (+ bias add) produces", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec a_conv_tap_major[] = {
    {"conv", MCIR_PARAM_NODE, true, "a KxK conv2d (stride 1, dilation 1, one group, f16 / bf16) with a constant weight",
     NULL, MCIR_RANGE_ANY},
    {"output", MCIR_PARAM_TENSOR, true, "its output, which the conv reading the repacked weight produces", NULL,
     MCIR_RANGE_ANY}};
static const mcir_param_spec a_glu[] = {
    {"glu", MCIR_PARAM_NODE, true, "the mul of act(gate) by up (its output is what the fused group produces)",
     NULL, MCIR_RANGE_ANY},
    {"act", MCIR_PARAM_NODE, true, "the activation of the gate's product", NULL, MCIR_RANGE_ANY},
    {"gate", MCIR_PARAM_NODE, true, "the gate projection (a matmul with a constant weight)", NULL, MCIR_RANGE_ANY},
    {"up", MCIR_PARAM_NODE, true, "the up projection (a matmul of the same A with a constant weight of the same "
     "shape)", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec a_fold_norm_gamma[] = {
    {"node", MCIR_PARAM_NODE, true, "a matmul reading the rmsnorm's output as A", NULL, MCIR_RANGE_ANY},
    {"norm", MCIR_PARAM_NODE, true, "the rmsnorm", NULL, MCIR_RANGE_ANY}};
static const mcir_param_spec a_inplace[] = {
    {"node", MCIR_PARAM_NODE, true, "the elementwise node that writes in place", NULL, MCIR_RANGE_ANY},
    {"input", MCIR_PARAM_TENSOR, true, "the input whose buffer it reuses", NULL, MCIR_RANGE_ANY}};

const mcir_action_desc mcir_action_descs[MCIR_ACTION_COUNT] = {
    [MCIR_ACTION_FUSE_ATTENTION] = {"fuse_attention",
                                    "decomposed attention -> one attention node",
                                    SPECS(a_attention)},
    [MCIR_ACTION_FUSE_LAYERNORM] = {"fuse_layernorm", "written-out layer norm -> layernorm",
                                    SPECS(a_layernorm)},
    [MCIR_ACTION_FUSE_RMSNORM] = {"fuse_rmsnorm", "written-out RMS norm -> rmsnorm",
                                  SPECS(a_rmsnorm)},
    [MCIR_ACTION_FUSE_SOFTMAX] = {"fuse_softmax", "written-out softmax -> softmax",
                                  SPECS(a_softmax)},
    [MCIR_ACTION_REPLACE_OP] = {"replace_op", "the match -> one op", SPECS(a_replace_op)},
    [MCIR_ACTION_ANNOTATE_ONLY] = {"annotate_only", "add the property, change nothing",
                                   SPECS(a_annotate_only)},
    [MCIR_ACTION_FUSE_GROUP] = {"fuse_group", "put the nodes in one fusion group",
                                SPECS(a_fuse_group)},
    [MCIR_ACTION_INPLACE] = {"inplace", "write the output over a dying input",
                             SPECS(a_inplace)},
    [MCIR_ACTION_FUSE_HORIZONTAL_MATMUL] = {"fuse_horizontal_matmul",
        "matmuls sharing A -> one matmul over concatenated weights (+ concatenated bias), "
        "split back into the original outputs", SPECS(a_horizontal)},
    [MCIR_ACTION_FOLD_CONV_AFFINE] = {"fold_conv_affine",
        "conv2d then a per-channel mul (+ add) of constants -> one conv2d with the scale folded "
        "into its weight and bias (inference batch norm)", SPECS(a_fold_conv_affine)},
    [MCIR_ACTION_CONV_AS_MATMUL] = {"conv_as_matmul",
        "a pointwise conv2d -> W[O, C] times each image as [C, H*W] (a batched matmul, + the bias "
        "as [O, 1]), reshaped back: the GEMM lowerings take it", SPECS(a_conv_as_matmul)},
    [MCIR_ACTION_CONV_TAP_MAJOR] = {"conv_tap_major",
        "a KxK conv2d's constant weight [O, C, KH, KW] -> a constant [KH, KW, O, C] read through a transpose "
        "(perm [2, 3, 0, 1]) the conv's kernel folds into its read: the sm_90a implicit GEMM's TMA boxes",
        SPECS(a_conv_tap_major)},
    [MCIR_ACTION_FOLD_NORM_GAMMA] = {"fold_norm_gamma",
        "rmsnorm(x, gamma) · W -> rmsnorm(x, ones) · W' with W' = diag(gamma) W computed once (W's rows scaled; "
        "its columns under transpose_b); the norm without gamma is shared by the matmuls folded",
        SPECS(a_fold_norm_gamma)},
    [MCIR_ACTION_FUSE_GLU_MATMUL] = {"fuse_glu_matmul",
        "act(x·Wg) * (x·Wu) -> one matmul over the two constant weights interleaved in blocks of 8 columns, "
        "read back as its gate and up halves (reshape, slice, reshape), act(gate) * up: one fusion group whose "
        "GEMM computes the product from each thread's accumulator pairs", SPECS(a_glu)},
};

bool mcir_action_parse(const char *name, mcir_action *out) {
    for (int i = 0; i < MCIR_ACTION_COUNT; i++)
        if (strcmp(mcir_action_descs[i].name, name) == 0) {
            *out = (mcir_action)i;
            return true;
        }
    return false;
}
