/*
 * symbolic.c — ONNX dim_params kept symbolic over a range (issue #33;
 * docs/onnx.md "Symbolic dimensions").
 *
 * The importer evaluates shape computations at import time, so it cannot
 * see a dimension as a symbol. Instead the model is imported several times
 * with every ranged dim_param fixed to probe sizes — a grid of up to three
 * sizes per dimension, plus one more point to confirm the fit — and the
 * graphs are compared: they must have the same nodes, ops, dtypes, tensor
 * names and weight bytes. Every integer that differs between them (an
 * extent, a reshape's shape, a slice bound, an arange's end) is fitted
 * exactly as a polynomial over the dimensions with integer coefficients
 * (Newton interpolation along each dimension of the grid, every divided
 * difference exact), checked at the extra point, and written into the
 * first probe's graph the way graph.json would write it: input shapes as
 * extents, attributes as a dimension (or, for a slice bound, an offset
 * from the end; for one entry of a reshape, -1). The graph is then bound
 * at the largest sizes and inferred again, so every shape rule is checked
 * for the whole range, and each extent the rules compute must equal the
 * fitted one. The probes are imported first with the importer's folding
 * as it is; where that gives no one graph (a folded constant follows a
 * size), again probing (onnx-impl.h, ox.probing): slices of buffers,
 * integer ranges and causal masks sliced from a buffer stay runtime ops.
 *
 * Invariant: the graph handed back has a dimension per ranged dim_param
 * and is the probe graph in every node, tensor and weight; anything that
 * is not one polynomial over the range (ceil(seq/2), a constant whose
 * values depend on a size) is an error naming the dimension and the node
 * or tensor, never a graph that holds at some sizes only.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx-impl.h"

#define OX_MAX_RANGED 4      /* 3^4 probe imports at most */
#define OX_FIT_POINTS 3      /* sizes per dimension: polynomials of degree <= 2 in each */

typedef struct probe_dim {
    const char *name;
    int64_t min, max;
    int n_fit;                   /* fitting sizes (1..3) */
    int64_t fit[OX_FIT_POINTS];
    bool has_check;
    int64_t check;               /* the extra size the fit is confirmed at */
} probe_dim;

typedef struct probes {
    int n;                       /* ranged dims */
    probe_dim dim[OX_MAX_RANGED];
    int n_grid;                  /* prod n_fit */
    mcir_graph **grid;           /* n_grid graphs, dim 0 fastest */
    mcir_graph *check;           /* at every dim's check size, or NULL */
    const char *path;
    mcir_diag *d;
    ox_limits limits;            /* found by the import at grid point 0 */
} probes;

/* Sizes for one dimension: small, distinct, not 1 where the range allows
 * (a size of 1 broadcasts), and different for neighbouring dimensions so
 * that two dimensions are not mistaken for one. */
static void choose_sizes(probe_dim *pd, int which) {
    static const int64_t even[] = {4, 6, 10, 12, 2, 3, 5, 7, 8, 9, 1, 0};
    static const int64_t odd[] = {2, 3, 8, 9, 4, 6, 10, 12, 5, 7, 1, 0};
    const int64_t *c = which % 2 ? odd : even;
    int64_t got[OX_FIT_POINTS + 1];
    int n = 0;
    /* size 1 only where the range has fewer than two others: the importer
     * takes shortcuts at 1 (a broadcast that is no Expand), so its graph
     * there may differ from the others' while meaning the same */
    for (int i = 0; i < 12 && n < OX_FIT_POINTS + 1; i++) {
        int64_t v = pd->min + c[i];
        if (v > pd->max || (v == 1 && pd->max - pd->min >= 2)) continue;
        bool dup = false;
        for (int k = 0; k < n; k++) dup |= got[k] == v;
        if (!dup) got[n++] = v;
    }
    pd->n_fit = n > OX_FIT_POINTS ? OX_FIT_POINTS : n;
    memcpy(pd->fit, got, sizeof(int64_t) * (size_t)pd->n_fit);
    pd->has_check = n > OX_FIT_POINTS;
    if (pd->has_check) pd->check = got[OX_FIT_POINTS];
}

static bool sym_fail(probes *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool sym_fail(probes *p, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mcir_error(p->d, (mcir_loc){p->path, 0, 0}, "%s", msg);
    return false;
}

/* "seq=4, batch=2" for grid point g (or the check point with g < 0). */
static char *sizes_str(const probes *p, int g, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (int j = 0; j < p->n && k < n; j++) {
        int64_t v = g < 0 ? p->dim[j].check : p->dim[j].fit[g % p->dim[j].n_fit];
        if (g >= 0) g /= p->dim[j].n_fit;
        k += (size_t)snprintf(buf + k, n - k, "%s%s=%" PRId64, j ? ", " : "", p->dim[j].name, v);
    }
    return buf;
}

/* ------------------------------------------------------------ fitting */

/* One integer of the graph (an extent, an attribute value) at every grid
 * point, fitted: coef[i0 + 3*i1 + 9*i2 + 27*i3] multiplies
 * d0^i0 * d1^i1 * d2^i2 * d3^i3. */
typedef struct fit {
    int64_t coef[81];
} fit;

/* Newton interpolation through (x[i], f[i]), i < m, to monomial
 * coefficients; false where a divided difference is not an integer (no
 * polynomial with integer coefficients takes these values). */
static bool interp1(const int64_t *x, const int64_t *f, int m, int64_t *out) {
    int64_t dd[OX_FIT_POINTS], c[OX_FIT_POINTS];
    memcpy(dd, f, sizeof(int64_t) * (size_t)m);
    c[0] = dd[0];
    for (int l = 1; l < m; l++) {
        for (int i = 0; i + l < m; i++) {
            __int128 num = (__int128)dd[i + 1] - dd[i];
            int64_t den = x[i + l] - x[i];
            if (num % den) return false;
            dd[i] = (int64_t)(num / den);
        }
        c[l] = dd[0];
    }
    /* poly = c[m-1]; poly = poly * (X - x[l]) + c[l], in 128 bits: a
     * coefficient beyond 64 bits is no extent */
    __int128 poly[OX_FIT_POINTS] = {0};
    poly[0] = c[m - 1];
    for (int l = m - 2; l >= 0; l--) {
        __int128 next[OX_FIT_POINTS] = {0};
        for (int k = 0; k < m; k++) {
            if (k + 1 < m) next[k + 1] += poly[k];
            next[k] -= poly[k] * x[l];
        }
        next[0] += c[l];
        for (int k = 0; k < m; k++)
            if (next[k] > INT64_MAX || next[k] < INT64_MIN) return false;
        memcpy(poly, next, sizeof poly);
    }
    for (int k = 0; k < m; k++) out[k] = (int64_t)poly[k];
    return true;
}

/* vals[g] at every grid point → f; false if not a polynomial. */
static bool fit_grid(const probes *p, const int64_t *vals, fit *f) {
    /* work on a 3x3x3x3 array indexed like coef */
    int64_t a[81] = {0};
    for (int g = 0; g < p->n_grid; g++) {
        int idx = 0, rest = g, mul = 1;
        for (int j = 0; j < p->n; j++) {
            idx += (rest % p->dim[j].n_fit) * mul;
            rest /= p->dim[j].n_fit;
            mul *= 3;
        }
        a[idx] = vals[g];
    }
    int stride = 1;
    for (int j = 0; j < p->n; j++, stride *= 3) {
        int m = p->dim[j].n_fit;
        for (int base = 0; base < 81; base++) {
            if ((base / stride) % 3) continue;   /* one line per base with index j = 0 */
            int64_t f1[OX_FIT_POINTS], o[OX_FIT_POINTS];
            for (int i = 0; i < m; i++) f1[i] = a[base + i * stride];
            if (!interp1(p->dim[j].fit, f1, m, o)) return false;
            for (int i = 0; i < m; i++) a[base + i * stride] = o[i];
        }
    }
    memcpy(f->coef, a, sizeof a);
    return true;
}

/* f at vals, saturated to 64 bits (then it differs from any extent). */
static int64_t fit_eval(const probes *p, const fit *f, const int64_t *vals) {
    __int128 sum = 0;
    for (int idx = 0; idx < 81; idx++) {
        if (!f->coef[idx]) continue;
        __int128 t = f->coef[idx];
        for (int j = 0, r = idx; j < OX_MAX_RANGED; j++, r /= 3)
            for (int e = 0; e < r % 3; e++) {
                t *= j < p->n ? vals[j] : 0;
                if (t > INT64_MAX || t < INT64_MIN) return t > 0 ? INT64_MAX : INT64_MIN;
            }
        sum += t;
        if (sum > INT64_MAX || sum < INT64_MIN) return sum > 0 ? INT64_MAX : INT64_MIN;
    }
    return (int64_t)sum;
}

static bool fit_is_const(const fit *f, int64_t *v) {
    for (int idx = 1; idx < 81; idx++)
        if (f->coef[idx]) return false;
    if (v) *v = f->coef[0];
    return true;
}

/* The fit as an extent over the graph's dims (ranged dim j is graph dim
 * j); false if it needs more than MCIR_EXTENT_TERMS terms. */
static bool fit_extent(const fit *f, mcir_extent *e) {
    memset(e, 0, sizeof *e);
    for (int idx = 0; idx < 81; idx++) {
        if (!f->coef[idx]) continue;
        if (e->n_terms == MCIR_EXTENT_TERMS) return false;
        mcir_extent_term *t = &e->terms[e->n_terms++];
        t->coef = f->coef[idx];
        for (int j = 0, r = idx; j < OX_MAX_RANGED; j++, r /= 3) t->pow[j] = (uint8_t)(r % 3);
    }
    /* canonical form: build it from sums of single terms */
    mcir_extent sum = mcir_extent_const(0);
    for (int i = 0; i < e->n_terms; i++) {
        mcir_extent one = {.n_terms = 1, .terms = {e->terms[i]}};
        if (!mcir_extent_add(&sum, &one, &sum)) return false;
    }
    *e = sum;
    return true;
}

/* The first dimension f depends on (for messages). */
static const char *fit_dim_name(const probes *p, const fit *f) {
    for (int idx = 1; idx < 81; idx++)
        if (f->coef[idx])
            for (int j = 0, r = idx; j < p->n; j++, r /= 3)
                if (r % 3) return p->dim[j].name;
    return p->dim[0].name;
}

/* Fits the integer that get(graph, arg) reads in every probe graph;
 * false (after an error naming what) when it is no polynomial or the
 * check point disagrees. */
typedef int64_t (*probe_get)(const mcir_graph *g, const void *arg, int k);

static bool fit_value(probes *p, probe_get get, const void *arg, int k, const char *what,
                      fit *f) {
    int64_t vals[81];
    for (int g = 0; g < p->n_grid; g++) vals[g] = get(p->grid[g], arg, k);
    char s0[256], s1[256];
    bool ok = fit_grid(p, vals, f);
    if (ok && p->check) {
        int64_t at[OX_MAX_RANGED];
        for (int j = 0; j < p->n; j++) at[j] = p->dim[j].check;
        ok = fit_eval(p, f, at) == get(p->check, arg, k);
    }
    if (ok) return true;
    /* name the dimension along which it varies first */
    const char *dim = p->dim[0].name;
    for (int j = 0; j < p->n; j++) {
        int stride = 1;
        for (int i = 0; i < j; i++) stride *= p->dim[i].n_fit;
        if (p->dim[j].n_fit > 1 && vals[stride] != vals[0]) {
            dim = p->dim[j].name;
            break;
        }
    }
    size_t n = 0;
    char seen[512] = "";
    for (int g = 0; g < p->n_grid && n < sizeof seen; g++)
        n += (size_t)snprintf(seen + n, sizeof seen - n, "%s%" PRId64 " at %s", g ? ", " : "",
                              vals[g], sizes_str(p, g, s0, sizeof s0));
    if (p->check && n < sizeof seen)
        snprintf(seen + n, sizeof seen - n, ", %" PRId64 " at %s", get(p->check, arg, k),
                 sizes_str(p, -1, s1, sizeof s1));
    return sym_fail(p, "%s is not a polynomial in dimension '%s' with integer coefficients "
                    "(it is %s), so it cannot be kept symbolic over the range; fix the size "
                    "with --dim %s=N", what, dim, seen, dim);
}

/* ------------------------------------------------------ the comparison */

static int64_t get_extent(const mcir_graph *g, const void *arg, int k) {
    return g->tensors[*(const int *)arg]->shape[k];
}

typedef struct attr_ref {
    int node, attr;
} attr_ref;

static int64_t get_attr(const mcir_graph *g, const void *arg, int k) {
    const attr_ref *r = arg;
    const mcir_attr *a = &g->nodes[r->node]->attrs[r->attr];
    return a->type == MCIR_ATTR_INTS ? a->ints[k] : a->i;
}

static const mcir_node *first_reader(const mcir_graph *g, const mcir_tensor *t) {
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_inputs; k++)
            if (g->nodes[i]->inputs[k] == t) return g->nodes[i];
    return NULL;
}

/* The graphs' structure, apart from integers, must be the same. */
static bool same_structure(probes *p, const mcir_graph *a, int ga, const mcir_graph *b, int gb) {
    char sa[256], sb[256];
    /* the dimension the two points differ in first */
    const char *dn = p->dim[0].name;
    for (int j = 0, ra = ga, rb = gb; j < p->n; j++) {
        int ia = ra < 0 ? -1 : ra % p->dim[j].n_fit, ib = rb < 0 ? -1 : rb % p->dim[j].n_fit;
        if (ra >= 0) ra /= p->dim[j].n_fit;
        if (rb >= 0) rb /= p->dim[j].n_fit;
        if (ia != ib) {
            dn = p->dim[j].name;
            break;
        }
    }
    sizes_str(p, ga, sa, sizeof sa);
    sizes_str(p, gb, sb, sizeof sb);
    if (a->n_tensors != b->n_tensors || a->n_nodes != b->n_nodes)
        return sym_fail(p, "the imported graph differs between %s and %s (%d and %d nodes): "
                        "the model's structure depends on a dimension, so it cannot be kept "
                        "symbolic over the range; fix the size with --dim %s=N",
                        sa, sb, a->n_nodes, b->n_nodes, dn);
    for (int i = 0; i < a->n_tensors; i++) {
        const mcir_tensor *x = a->tensors[i], *y = b->tensors[i];
        if (strcmp(x->name, y->name) || x->dtype != y->dtype || x->rank != y->rank ||
            x->kind != y->kind || x->is_output != y->is_output)
            return sym_fail(p, "the imported graph differs between %s and %s (tensor '%s' "
                            "against '%s'): the model's structure depends on a dimension; fix "
                            "the size with --dim %s=N", sa, sb, x->name, y->name, dn);
        if (x->kind != MCIR_TENSOR_WEIGHT) continue;
        bool same = !x->data == !y->data;
        for (int k = 0; same && k < x->rank; k++) same = x->shape[k] == y->shape[k];
        if (same && x->data) same = !memcmp(x->data, y->data, (size_t)mcir_tensor_bytes(x));
        if (!same) {
            const mcir_node *r = first_reader(a, x);
            char shx[128], shy[128];
            mcir_shape_str(x, shx, sizeof shx);
            mcir_shape_str(y, shy, sizeof shy);
            return sym_fail(p, "the importer folds %s '%s'%s%s%s into a constant (a weight) "
                            "that depends on dimension '%s' (%s at %s, %s%s at %s): a weight cannot "
                            "vary over the range; fix the size with --dim %s=N",
                            x->rank ? "tensor" : "scalar", x->name,
                            r ? " (read by node '" : "", r ? r->name : "", r ? "')" : "", dn,
                            shx, sa, shy, strcmp(shx, shy) ? "" : " with other values", sb, dn);
        }
    }
    for (int i = 0; i < a->n_nodes; i++) {
        const mcir_node *x = a->nodes[i], *y = b->nodes[i];
        bool same = x->op == y->op && !strcmp(x->name, y->name) && x->n_inputs == y->n_inputs &&
                    x->n_outputs == y->n_outputs && x->n_attrs == y->n_attrs;
        for (int k = 0; same && k < x->n_inputs; k++) same = x->inputs[k]->id == y->inputs[k]->id;
        for (int k = 0; same && k < x->n_outputs; k++)
            same = x->outputs[k]->id == y->outputs[k]->id;
        for (int k = 0; same && k < x->n_attrs; k++) {
            const mcir_attr *u = &x->attrs[k], *v = &y->attrs[k];
            same = !strcmp(u->name, v->name) && u->type == v->type;
            if (!same) break;
            if (u->type == MCIR_ATTR_FLOAT) same = u->f == v->f;
            if (u->type == MCIR_ATTR_BOOL) same = u->b == v->b;
            if (u->type == MCIR_ATTR_STRING) same = !strcmp(u->s, v->s);
            if (u->type == MCIR_ATTR_INTS) same = u->n == v->n;
        }
        if (!same)
            return sym_fail(p, "the imported graph differs between %s and %s at node '%s' "
                            "(%s): the model's structure depends on a dimension; fix the size "
                            "with --dim %s=N", sa, sb, x->name, mcir_op_name(x->op), dn);
    }
    return true;
}

/* --------------------------------------------- the symbolic graph */

static bool is_single_dim(const mcir_extent *e, int *dim) {
    if (e->n_terms != 1 || e->terms[0].coef != 1) return false;
    int found = -1;
    for (int j = 0; j < MCIR_MAX_DIMS; j++) {
        if (!e->terms[0].pow[j]) continue;
        if (e->terms[0].pow[j] != 1 || found >= 0) return false;
        found = j;
    }
    *dim = found;
    return found >= 0;
}

static int8_t *dim_of_for(mcir_graph *g, mcir_attr *a) {
    int n = a->type == MCIR_ATTR_INTS ? a->n : 1;
    if (!a->dim_of) {
        a->dim_of = mcir_arena_alloc(g->arena, (size_t)n);
        memset(a->dim_of, -1, (size_t)n);
    }
    return a->dim_of;
}

/* A slice bound that is poly: a dimension, or the axis's extent plus a
 * constant (a negative start or end counts from the end; the end of the
 * axis is any value at least its largest extent). */
static bool set_slice_bound(probes *p, mcir_graph *g, mcir_node *n, mcir_attr *a,
                            const mcir_extent *poly, const fit *fpoly, const mcir_extent *axis_ext) {
    int dim;
    if (is_single_dim(poly, &dim)) {
        dim_of_for(g, a)[0] = (int8_t)dim;
        return true;
    }
    mcir_extent neg = mcir_extent_const(-1), diff;
    mcir_extent minus;
    int64_t c;
    if (mcir_extent_mul(axis_ext, &neg, &minus) && mcir_extent_add(poly, &minus, &diff) &&
        mcir_extent_is_const(&diff, &c)) {
        if (c < 0) {
            a->i = c;
            return true;
        }
        if (c == 0 && !strcmp(a->name, "end")) {
            int64_t lo, hi;
            mcir_extent_bounds(g, axis_ext, &lo, &hi);
            a->i = hi;
            return true;
        }
    }
    char buf[128];
    return sym_fail(p, "node '%s' (slice): its %s is %s, which MCIR cannot write as a "
                    "dimension or an offset from the end of the axis, so it cannot be kept "
                    "symbolic over dimension '%s'; fix the size with --dim %s=N",
                    n->name, a->name, mcir_extent_str(g, poly, buf, sizeof buf),
                    fit_dim_name(p, fpoly), fit_dim_name(p, fpoly));
}

static bool attr_sym(probes *p, mcir_graph *g, int ni, int ai, mcir_extent **ext) {
    mcir_node *n = g->nodes[ni];
    mcir_attr *a = &n->attrs[ai];
    if (a->type != MCIR_ATTR_INT && a->type != MCIR_ATTR_INTS) return true;
    int cnt = a->type == MCIR_ATTR_INTS ? a->n : 1;
    attr_ref ref = {ni, ai};
    int wild = -1;
    for (int k = 0; k < cnt; k++) {
        char what[256];
        snprintf(what, sizeof what, "attribute '%s'%s of node '%s' (%s)", a->name,
                 cnt > 1 ? " entry" : "", n->name, mcir_op_name(n->op));
        fit f;
        if (!fit_value(p, get_attr, &ref, k, what, &f)) return false;
        if (fit_is_const(&f, NULL)) continue;
        mcir_extent e;
        char buf[128];
        if (!fit_extent(&f, &e))
            return sym_fail(p, "%s is a polynomial of more than %d terms in the dimensions",
                            what, MCIR_EXTENT_TERMS);
        int dim;
        if (n->op == MCIR_OP_SLICE && (!strcmp(a->name, "start") || !strcmp(a->name, "end"))) {
            int axis;
            MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), n->inputs[0]->rank, &axis));
            if (!set_slice_bound(p, g, n, a, &e, &f, &ext[n->inputs[0]->id][axis])) return false;
            continue;
        }
        if ((n->op == MCIR_OP_RESHAPE && !strcmp(a->name, "shape")) ||
            (n->op == MCIR_OP_ARANGE && !strcmp(a->name, "end"))) {
            if (is_single_dim(&e, &dim)) {
                dim_of_for(g, a)[k] = (int8_t)dim;
                continue;
            }
            if (n->op == MCIR_OP_RESHAPE && wild < 0) {   /* one entry may be inferred */
                bool had = false;
                for (int i = 0; i < cnt; i++) had |= a->ints[i] == -1;
                if (!had) {
                    wild = k;
                    continue;
                }
            }
        }
        return sym_fail(p, "%s is %s, which MCIR takes only as one dimension (in a reshape's "
                        "shape, a slice's bounds, an arange's end), so it cannot be kept "
                        "symbolic over dimension '%s'; fix the size with --dim %s=N",
                        what, mcir_extent_str(g, &e, buf, sizeof buf), fit_dim_name(p, &f),
                        fit_dim_name(p, &f));
    }
    if (wild >= 0) a->ints[wild] = -1;
    return true;
}

static bool build(probes *p, mcir_graph *g) {
    for (int j = 0; j < p->n; j++) {
        int k = mcir_graph_add_dim(g, p->dim[j].name, p->dim[j].min, p->dim[j].max);
        MCIR_ASSERT(k == j);
        g->dims[j].value = p->dim[j].fit[0];   /* g is the probe at grid point 0 */
    }
    /* every extent of every tensor, fitted */
    mcir_extent **ext = calloc((size_t)g->n_tensors + 1, sizeof *ext);
    MCIR_ASSERT(ext);
    bool ok = true;
    for (int i = 0; ok && i < g->n_tensors; i++) {
        mcir_tensor *t = g->tensors[i];
        ext[i] = mcir_arena_alloc(g->arena, sizeof(mcir_extent) * (size_t)(t->rank > 0 ? t->rank : 1));
        for (int k = 0; ok && k < t->rank; k++) {
            char what[256];
            snprintf(what, sizeof what, "extent %d of tensor '%s'%s%s%s", k, t->name,
                     t->producer ? " (made by node '" : "", t->producer ? t->producer->name : "",
                     t->producer ? "')" : "");
            fit f;
            ok = fit_value(p, get_extent, &i, k, what, &f);
            if (ok && !fit_extent(&f, &ext[i][k]))
                ok = sym_fail(p, "%s is a polynomial of more than %d terms", what,
                              MCIR_EXTENT_TERMS);
        }
        if (!ok || t->kind != MCIR_TENSOR_INPUT) continue;
        bool any = false;
        for (int k = 0; k < t->rank; k++) any |= !mcir_extent_is_const(&ext[i][k], NULL);
        if (any) t->sym = ext[i];
    }
    for (int i = 0; ok && i < g->n_nodes; i++)
        for (int a = 0; ok && a < g->nodes[i]->n_attrs; a++) ok = attr_sym(p, g, i, a, ext);
    if (ok) {
        int64_t maxes[MCIR_MAX_DIMS];
        for (int j = 0; j < p->n; j++) maxes[j] = p->dim[j].max;
        ok = mcir_graph_bind_dims(g, maxes, p->d) && mcir_graph_verify(g, p->d);
    }
    for (int i = 0; ok && i < g->n_tensors; i++) {
        mcir_tensor *t = g->tensors[i];
        for (int k = 0; ok && k < t->rank; k++) {
            mcir_extent e = mcir_tensor_extent(t, k);
            if (mcir_extent_equal(&e, &ext[i][k])) continue;
            char a[128], b[128];
            ok = sym_fail(p, "extent %d of tensor '%s' is %s by the probe imports but %s by "
                          "MCIR's shape rules over the range", k, t->name,
                          mcir_extent_str(g, &ext[i][k], a, sizeof a),
                          mcir_extent_str(g, &e, b, sizeof b));
        }
    }
    free(ext);
    return ok;
}

/* A causal mask written for any length (ops_elementwise.c probe_causal_mask) stands
 * for a slice of a buffer: its length must stay within the buffer for
 * every size, as the model fails beyond. */
static bool within_limits(probes *p, mcir_graph *g) {
    for (int i = 0; i < p->limits.n; i++) {
        const ox_limit *l = &p->limits.item[i];
        const mcir_node *ar = NULL;
        for (int k = 0; k < g->n_nodes && !ar; k++)
            if (!strcmp(g->nodes[k]->name, l->node)) ar = g->nodes[k];
        if (!ar) continue;   /* dropped: nothing reads the mask */
        mcir_extent e = mcir_tensor_extent(ar->outputs[0], 0);
        int64_t lo, hi;
        mcir_extent_bounds(g, &e, &lo, &hi);
        if (hi <= l->bound) continue;
        char buf[128];
        int dim = mcir_extent_first_dim(&e);
        const mcir_dim *dm = &g->dims[dim < 0 ? 0 : dim];
        return sym_fail(p, "node '%s': the mask is a slice [:%s, :%s] of buffer '%s', which has "
                        "%" PRId64 " rows, but %s reaches %" PRId64 " for dimension '%s' in "
                        "[%" PRId64 ", %" PRId64 "] (the model cannot run beyond %" PRId64 "); "
                        "narrow the range with --dim %s=%" PRId64 "..%" PRId64,
                        l->onnx_node, mcir_extent_str(g, &e, buf, sizeof buf), buf, l->buffer,
                        l->bound, buf, hi, dm->name, dm->min, dm->max, l->bound, dm->name,
                        dm->min, l->bound);
    }
    return true;
}

/* Imports the model at every probe point (probing: see ox), compares the
 * graphs and fits them into the first; NULL after errors to p->d. */
static mcir_graph *fit_probes(probes *p, const void *bytes, size_t len,
                              const mcir_onnx_shape *shapes, int n_shapes, mcir_onnx_dim *fixed,
                              int n_dims, const int *ranged, bool check, bool probing) {
    p->grid = calloc((size_t)p->n_grid, sizeof *p->grid);
    MCIR_ASSERT(p->grid);
    p->check = NULL;
    p->limits.n = 0;
    bool ok = true;
    char sz[256];
    for (int g = 0; ok && g <= p->n_grid; g++) {
        if (g == p->n_grid && !check) break;
        for (int j = 0, r = g; j < p->n; j++) {
            int64_t v = g == p->n_grid ? p->dim[j].check : p->dim[j].fit[r % p->dim[j].n_fit];
            r /= p->dim[j].n_fit;
            fixed[ranged[j]].value = v;
            fixed[ranged[j]].max = 0;
        }
        ox_limits lim = {0};
        mcir_graph *pg = ox_read_fixed(bytes, len, p->path, shapes, n_shapes, fixed, n_dims,
                                       probing ? &lim : NULL, p->d);
        if (g == 0) p->limits = lim;
        if (!pg) {
            if (p->d && p->d->out)
                fprintf(p->d->out, "%s: note: while importing the model at %s, a size in the "
                        "range of the symbolic dimensions\n", p->path,
                        sizes_str(p, g == p->n_grid ? -1 : g, sz, sizeof sz));
            ok = false;
            break;
        }
        if (g == p->n_grid) p->check = pg;
        else p->grid[g] = pg;
        if (g > 0) ok = same_structure(p, p->grid[0], 0, pg, g == p->n_grid ? -1 : g);
    }
    mcir_graph *out = NULL;
    if (ok && build(p, p->grid[0]) && within_limits(p, p->grid[0])) {
        out = p->grid[0];
        p->grid[0] = NULL;
    }
    for (int g = 0; g < p->n_grid; g++)
        if (p->grid[g]) mcir_graph_free(p->grid[g]);
    if (p->check) mcir_graph_free(p->check);
    free(p->grid);
    p->grid = NULL;
    p->check = NULL;
    return out;
}

mcir_graph *ox_read_symbolic(const void *bytes, size_t len, const char *path,
                             const mcir_onnx_shape *shapes, int n_shapes,
                             const mcir_onnx_dim *dims, int n_dims, mcir_diag *d) {
    probes p = {.path = path ? path : "<onnx>", .d = d};
    int ranged[OX_MAX_RANGED];
    for (int i = 0; i < n_dims; i++) {
        if (dims[i].max <= dims[i].value) continue;
        if (p.n == OX_MAX_RANGED) {
            sym_fail(&p, "--dim %s=%" PRId64 "..%" PRId64 ": at most %d dimensions of an ONNX "
                     "model can range over sizes", dims[i].name, dims[i].value, dims[i].max,
                     OX_MAX_RANGED);
            return NULL;
        }
        ranged[p.n] = i;
        p.dim[p.n] = (probe_dim){.name = dims[i].name, .min = dims[i].value, .max = dims[i].max};
        choose_sizes(&p.dim[p.n], p.n);
        p.n++;
    }
    p.n_grid = 1;
    bool check = true;
    for (int j = 0; j < p.n; j++) {
        p.n_grid *= p.dim[j].n_fit;
        check &= p.dim[j].has_check;
    }
    mcir_onnx_dim *fixed = calloc((size_t)n_dims + 1, sizeof *fixed);
    MCIR_ASSERT(fixed);
    memcpy(fixed, dims, sizeof *fixed * (size_t)n_dims);
    /* first with the importer's folding as it is, its messages held back;
     * where that does not give one graph (a folded constant follows a
     * size), again probing (see ox), its messages the user's */
    char *held = NULL;
    size_t held_len = 0;
    FILE *mem = open_memstream(&held, &held_len);
    MCIR_ASSERT(mem);
    mcir_diag quiet = mcir_diag_to(mem);
    p.d = &quiet;
    mcir_graph *out = fit_probes(&p, bytes, len, shapes, n_shapes, fixed, n_dims, ranged, check,
                                 false);
    fclose(mem);
    free(held);
    p.d = d;
    if (!out)
        out = fit_probes(&p, bytes, len, shapes, n_shapes, fixed, n_dims, ranged, check, true);
    free(fixed);
    return out;
}
