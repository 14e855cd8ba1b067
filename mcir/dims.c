/*
 * dims.c — symbolic dimensions (graph.json "dims"): the extent algebra,
 * the symbolic shape rule of every shape family, and binding the dims to
 * sizes.
 *
 * Invariants: an extent is kept canonical (terms sorted by exponents, no
 * zero coefficient, like terms merged), so two extents are the same
 * polynomial exactly when they compare equal term by term; after
 * mcir_node_infer, every output extent evaluated at the graph's current
 * binding is the concrete extent the op's own rule computed (asserted);
 * a symbolic rule accepts a node only if its shape rule holds for every
 * size in every dimension's range, else it reports an error naming the
 * dimension. Graphs without dims never reach the symbolic rules.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "mcir-impl.h"

/* ------------------------------------------------------------ extents */

mcir_extent mcir_extent_const(int64_t v) {
    mcir_extent e = {0};
    if (v != 0) {
        e.n_terms = 1;
        e.terms[0].coef = v;
    }
    return e;
}

mcir_extent mcir_extent_dim(int dim) {
    MCIR_ASSERT(dim >= 0 && dim < MCIR_MAX_DIMS);
    mcir_extent e = {.n_terms = 1};
    e.terms[0].coef = 1;
    e.terms[0].pow[dim] = 1;
    return e;
}

mcir_extent mcir_tensor_extent(const mcir_tensor *t, int i) {
    MCIR_ASSERT(i >= 0 && i < t->rank);
    return t->sym ? t->sym[i] : mcir_extent_const(t->shape[i]);
}

bool mcir_extent_is_const(const mcir_extent *e, int64_t *value) {
    if (e->n_terms == 0) {
        if (value) *value = 0;
        return true;
    }
    static const uint8_t zero[MCIR_MAX_DIMS];
    if (e->n_terms != 1 || memcmp(e->terms[0].pow, zero, sizeof zero)) return false;
    if (value) *value = e->terms[0].coef;
    return true;
}

static int pow_cmp(const mcir_extent_term *a, const mcir_extent_term *b) {
    return memcmp(a->pow, b->pow, MCIR_MAX_DIMS);
}

bool mcir_extent_equal(const mcir_extent *a, const mcir_extent *b) {
    if (a->n_terms != b->n_terms) return false;
    for (int i = 0; i < a->n_terms; i++)
        if (a->terms[i].coef != b->terms[i].coef || pow_cmp(&a->terms[i], &b->terms[i]))
            return false;
    return true;
}

/* Adds coef * x^pow into the canonical term list (t, *n); false when it
 * would need more than cap terms or a coefficient overflows. */
static bool add_term(mcir_extent_term *t, int *n, int cap, const mcir_extent_term *x) {
    int i = 0;
    while (i < *n && pow_cmp(&t[i], x) < 0) i++;
    if (i < *n && pow_cmp(&t[i], x) == 0) {
        if (__builtin_add_overflow(t[i].coef, x->coef, &t[i].coef)) return false;
        if (t[i].coef == 0) {
            memmove(&t[i], &t[i + 1], sizeof *t * (size_t)(*n - i - 1));
            (*n)--;
        }
        return true;
    }
    if (x->coef == 0) return true;
    if (*n == cap) return false;
    memmove(&t[i + 1], &t[i], sizeof *t * (size_t)(*n - i));
    t[i] = *x;
    (*n)++;
    return true;
}

bool mcir_extent_add(const mcir_extent *a, const mcir_extent *b, mcir_extent *out) {
    mcir_extent r = *a;
    for (int i = 0; i < b->n_terms; i++)
        if (!add_term(r.terms, &r.n_terms, MCIR_EXTENT_TERMS, &b->terms[i])) return false;
    *out = r;
    return true;
}

static bool extent_neg(const mcir_extent *a, mcir_extent *out) {
    mcir_extent r = *a;
    for (int i = 0; i < r.n_terms; i++)
        if (r.terms[i].coef == INT64_MIN) return false;
        else r.terms[i].coef = -r.terms[i].coef;
    *out = r;
    return true;
}

static bool extent_sub(const mcir_extent *a, const mcir_extent *b, mcir_extent *out) {
    mcir_extent nb;
    return extent_neg(b, &nb) && mcir_extent_add(a, &nb, out);
}

bool mcir_extent_mul(const mcir_extent *a, const mcir_extent *b, mcir_extent *out) {
    mcir_extent r = {0};
    for (int i = 0; i < a->n_terms; i++)
        for (int j = 0; j < b->n_terms; j++) {
            mcir_extent_term t;
            if (mcir_mul_overflows(a->terms[i].coef, b->terms[j].coef, &t.coef)) return false;
            for (int k = 0; k < MCIR_MAX_DIMS; k++) {
                unsigned p = (unsigned)a->terms[i].pow[k] + b->terms[j].pow[k];
                if (p > 255) return false;
                t.pow[k] = (uint8_t)p;
            }
            if (!add_term(r.terms, &r.n_terms, MCIR_EXTENT_TERMS, &t)) return false;
        }
    *out = r;
    return true;
}

/* a / b exactly, b a single term: every term of a divides by it (the
 * coefficient, and every exponent at least b's); false otherwise. */
static bool extent_div(const mcir_extent *a, const mcir_extent *b, mcir_extent *out) {
    if (b->n_terms != 1 || b->terms[0].coef <= 0) return false;
    const mcir_extent_term *q = &b->terms[0];
    mcir_extent r = {0};
    for (int i = 0; i < a->n_terms; i++) {
        mcir_extent_term t = a->terms[i];
        if (t.coef % q->coef) return false;
        t.coef /= q->coef;
        for (int k = 0; k < MCIR_MAX_DIMS; k++) {
            if (t.pow[k] < q->pow[k]) return false;
            t.pow[k] = (uint8_t)(t.pow[k] - q->pow[k]);
        }
        if (!add_term(r.terms, &r.n_terms, MCIR_EXTENT_TERMS, &t)) return false;
    }
    *out = r;
    return true;
}

/* A term's value with each dim at vals[k], saturating at INT64_MAX. */
static int64_t term_value(const mcir_extent_term *t, const int64_t *vals) {
    int64_t v = t->coef < 0 ? -t->coef : t->coef;
    for (int k = 0; k < MCIR_MAX_DIMS; k++)
        for (int p = 0; p < t->pow[k]; p++)
            if (mcir_mul_overflows(v, vals[k], &v)) v = INT64_MAX;
    return t->coef < 0 ? -v : v;
}

static int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return a > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

int64_t mcir_extent_eval(const mcir_graph *g, const mcir_extent *e) {
    int64_t vals[MCIR_MAX_DIMS] = {0}, v = 0;
    for (int k = 0; k < g->n_dims; k++) vals[k] = g->dims[k].value;
    for (int i = 0; i < e->n_terms; i++) v = sat_add(v, term_value(&e->terms[i], vals));
    return v;
}

void mcir_extent_bounds(const mcir_graph *g, const mcir_extent *e, int64_t *lo, int64_t *hi) {
    int64_t mins[MCIR_MAX_DIMS] = {0}, maxs[MCIR_MAX_DIMS] = {0};
    for (int k = 0; k < g->n_dims; k++) {
        mins[k] = g->dims[k].min;
        maxs[k] = g->dims[k].max;
    }
    /* every dim is >= 1, so a term grows with each dim: its least value
     * is at the mins, its greatest at the maxes (the other way round for
     * a negative coefficient) */
    *lo = *hi = 0;
    for (int i = 0; i < e->n_terms; i++) {
        const mcir_extent_term *t = &e->terms[i];
        int64_t a = term_value(t, mins), b = term_value(t, maxs);
        *lo = sat_add(*lo, t->coef > 0 ? a : b);
        *hi = sat_add(*hi, t->coef > 0 ? b : a);
    }
}

char *mcir_extent_str(const mcir_graph *g, const mcir_extent *e, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    if (e->n_terms == 0) snprintf(buf, n, "0");
    for (int i = e->n_terms - 1; i >= 0 && k < n; i--) {   /* highest powers first */
        const mcir_extent_term *t = &e->terms[i];
        int64_t c = t->coef;
        bool first = i == e->n_terms - 1, any = false;
        if (!first) k += (size_t)snprintf(buf + k, n - k, c < 0 ? "-" : "+");
        else if (c < 0) k += (size_t)snprintf(buf + k, n - k, "-");
        uint64_t mag = c < 0 ? (uint64_t)0 - (uint64_t)c : (uint64_t)c;
        for (int d = 0; d < MCIR_MAX_DIMS; d++)
            if (t->pow[d]) any = true;
        if (mag != 1 || !any) {
            if (k < n) k += (size_t)snprintf(buf + k, n - k, "%" PRIu64, mag);
            if (any && k < n) k += (size_t)snprintf(buf + k, n - k, "*");
        }
        bool sep = false;
        for (int d = 0; d < MCIR_MAX_DIMS && k < n; d++)
            for (int p = 0; p < t->pow[d] && k < n; p++) {
                k += (size_t)snprintf(buf + k, n - k, "%s%s", sep ? "*" : "",
                                      d < g->n_dims ? g->dims[d].name : "?");
                sep = true;
            }
    }
    return buf;
}

int mcir_extent_first_dim(const mcir_extent *e) {
    for (int d = 0; d < MCIR_MAX_DIMS; d++)
        for (int i = 0; i < e->n_terms; i++)
            if (e->terms[i].pow[d]) return d;
    return -1;
}

/* ------------------------------------------------------------ the dims */

int mcir_graph_add_dim(mcir_graph *g, const char *name, int64_t min, int64_t max) {
    MCIR_ASSERT(min >= 1 && min <= max);
    if (g->n_dims == MCIR_MAX_DIMS || mcir_graph_find_dim(g, name) >= 0) return -1;
    mcir_dim *d = &g->dims[g->n_dims];
    *d = (mcir_dim){.name = mcir_arena_strdup(g->arena, name), .min = min, .max = max,
                    .value = max};
    return g->n_dims++;
}

int mcir_graph_find_dim(const mcir_graph *g, const char *name) {
    for (int i = 0; i < g->n_dims; i++)
        if (!strcmp(g->dims[i].name, name)) return i;
    return -1;
}

bool mcir_graph_is_dynamic(const mcir_graph *g) {
    for (int i = 0; i < g->n_dims; i++)
        if (g->dims[i].min < g->dims[i].max) return true;
    return false;
}

char *mcir_dims_binding_str(const mcir_graph *g, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < g->n_dims && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s=%" PRId64, i ? ", " : "", g->dims[i].name,
                              g->dims[i].value);
    return buf;
}

/* Puts the binding into input shapes and attributes that name a dim. */
static void apply_binding(mcir_graph *g) {
    for (int i = 0; i < g->n_tensors; i++) {
        mcir_tensor *t = g->tensors[i];
        if (t->kind != MCIR_TENSOR_INPUT || !t->sym) continue;
        for (int k = 0; k < t->rank; k++) t->shape[k] = mcir_extent_eval(g, &t->sym[k]);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        mcir_node *n = g->nodes[i];
        for (int a = 0; a < n->n_attrs; a++) {
            mcir_attr *at = &n->attrs[a];
            if (!at->dim_of) continue;
            if (at->type == MCIR_ATTR_INT && at->dim_of[0] >= 0)
                at->i = g->dims[at->dim_of[0]].value + at->dim_plus;
            for (int k = 0; at->type == MCIR_ATTR_INTS && k < at->n; k++)
                if (at->dim_of[k] >= 0) at->ints[k] = g->dims[at->dim_of[k]].value;
        }
    }
}

mcir_extent mcir_attr_extent(const mcir_attr *a, int k) {
    mcir_extent e = mcir_extent_dim(a->dim_of[k]), plus = mcir_extent_const(k == 0 ? a->dim_plus : 0), out;
    MCIR_ASSERT(mcir_extent_add(&e, &plus, &out));
    return out;
}

bool mcir_graph_bind_dims(mcir_graph *g, const int64_t *values, mcir_diag *d) {
    for (int i = 0; i < g->n_dims; i++) {
        MCIR_ASSERT(values[i] >= g->dims[i].min && values[i] <= g->dims[i].max);
        g->dims[i].value = values[i];
    }
    apply_binding(g);
    return mcir_graph_infer(g, d);
}

/* ------------------------------------------------------ symbolic rules */

typedef struct sym_shape {
    int rank;
    mcir_extent e[MCIR_MAX_RANK];
} sym_shape;

static bool sym_error(mcir_diag *d, const mcir_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool sym_error(mcir_diag *d, const mcir_node *n, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mcir_error(d, n->loc, "node '%s' (%s): %s", n->name ? n->name : "?", mcir_op_name(n->op),
               msg);
    return false;
}

/* "'seq' (1..4096)" for the first dim e depends on, into buf. */
static const char *dim_text(const mcir_graph *g, const mcir_extent *e, char *buf, size_t n) {
    int k = mcir_extent_first_dim(e);
    if (k < 0) snprintf(buf, n, "no dimension");
    else
        snprintf(buf, n, "dimension '%s' (%" PRId64 "..%" PRId64 ")", g->dims[k].name,
                 g->dims[k].min, g->dims[k].max);
    return buf;
}

/* The dimension a mismatch between a and b is about: the first one that
 * appears in one of them. */
static const mcir_extent *symbolic_side(const mcir_extent *a, const mcir_extent *b) {
    return mcir_extent_first_dim(a) >= 0 ? a : b;
}

static void shape_of(const mcir_tensor *t, sym_shape *s) {
    s->rank = t->rank;
    for (int i = 0; i < t->rank; i++) s->e[i] = mcir_tensor_extent(t, i);
}

static char *shape_str(const mcir_graph *g, const sym_shape *s, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < s->rank && k < n; i++) {
        char e[96];
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "",
                              mcir_extent_str(g, &s->e[i], e, sizeof e));
    }
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* NumPy broadcasting where every pair must agree for every size: equal
 * extents, or one of them the constant 1. */
static bool sym_broadcast(mcir_graph *g, mcir_node *n, mcir_diag *d, const sym_shape *a,
                          const char *an, const sym_shape *b, const char *bn, sym_shape *out) {
    int r = a->rank > b->rank ? a->rank : b->rank;
    sym_shape tmp = {.rank = r};
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        mcir_extent ea = ia >= 0 ? a->e[ia] : mcir_extent_const(1);
        mcir_extent eb = ib >= 0 ? b->e[ib] : mcir_extent_const(1);
        int64_t ca, cb;
        bool one_a = mcir_extent_is_const(&ea, &ca) && ca == 1;
        bool one_b = mcir_extent_is_const(&eb, &cb) && cb == 1;
        if (mcir_extent_equal(&ea, &eb) || one_b) tmp.e[i] = ea;
        else if (one_a) tmp.e[i] = eb;
        else {
            char sa[96], sb[96], dt[128], fa[256], fb[256];
            return sym_error(d, n,
                             "'%s' %s and '%s' %s do not broadcast for every size: %s against "
                             "%s (dim %d) agree only for some values of %s",
                             an, shape_str(g, a, fa, sizeof fa), bn, shape_str(g, b, fb, sizeof fb),
                             mcir_extent_str(g, &ea, sa, sizeof sa),
                             mcir_extent_str(g, &eb, sb, sizeof sb), i,
                             dim_text(g, symbolic_side(&ea, &eb), dt, sizeof dt));
        }
    }
    *out = tmp;
    return true;
}

/* Every input broadcast together (elementwise ops, where, compare). */
static bool rule_elementwise(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    shape_of(n->inputs[0], &out[0]);
    for (int i = 1; i < n->n_inputs; i++) {
        sym_shape b;
        shape_of(n->inputs[i], &b);
        if (!sym_broadcast(g, n, d, &out[0], i == 1 ? n->inputs[0]->name : "the inputs", &b,
                           n->inputs[i]->name, &out[0]))
            return false;
    }
    return true;
}

/* Normalisations: the output is X; gamma and beta broadcast to it. */
static bool rule_norm(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    sym_shape all;
    if (!rule_elementwise(g, n, d, &all)) return false;
    shape_of(n->inputs[0], &out[0]);
    return true;
}

static bool equal_or_error(mcir_graph *g, mcir_node *n, mcir_diag *d, const mcir_extent *a,
                           const mcir_extent *b, const char *what) {
    if (mcir_extent_equal(a, b)) return true;
    char sa[96], sb[96], dt[128];
    return sym_error(d, n, "%s: %s and %s agree only for some values of %s", what,
                     mcir_extent_str(g, a, sa, sizeof sa), mcir_extent_str(g, b, sb, sizeof sb),
                     dim_text(g, symbolic_side(a, b), dt, sizeof dt));
}

static bool rule_matmul(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    const mcir_tensor *A = n->inputs[0], *B = n->inputs[1];
    sym_shape a, b;
    shape_of(A, &a);
    shape_of(B, &b);
    bool ta = mcir_node_bool(n, "transpose_a") && A->rank >= 2;
    bool tb = mcir_node_bool(n, "transpose_b") && B->rank >= 2;
    mcir_extent m = mcir_extent_const(1), ka, kb, nn = mcir_extent_const(1);
    if (A->rank == 1) ka = a.e[0];
    else {
        m = a.e[A->rank - (ta ? 1 : 2)];
        ka = a.e[A->rank - (ta ? 2 : 1)];
    }
    if (B->rank == 1) kb = b.e[0];
    else {
        kb = b.e[B->rank - (tb ? 1 : 2)];
        nn = b.e[B->rank - (tb ? 2 : 1)];
    }
    if (!equal_or_error(g, n, d, &ka, &kb, "the inner dimensions of the product")) return false;
    sym_shape ba = {.rank = A->rank >= 2 ? A->rank - 2 : 0};
    sym_shape bb = {.rank = B->rank >= 2 ? B->rank - 2 : 0};
    memcpy(ba.e, a.e, sizeof(mcir_extent) * (size_t)ba.rank);
    memcpy(bb.e, b.e, sizeof(mcir_extent) * (size_t)bb.rank);
    if (!sym_broadcast(g, n, d, &ba, A->name, &bb, B->name, &out[0])) return false;
    if (A->rank >= 2) out[0].e[out[0].rank++] = m;
    if (B->rank >= 2) out[0].e[out[0].rank++] = nn;
    return true;
}

static bool rule_reduce(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    (void)g, (void)d;
    const mcir_tensor *X = n->inputs[0];
    bool mask[MCIR_MAX_RANK] = {false}, keep;
    if (n->op == MCIR_OP_ARGMAX || n->op == MCIR_OP_ARGMIN) {
        int a;
        MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), X->rank, &a));
        mask[a] = true;
    } else {
        const int64_t *axes;
        int k = mcir_node_ints(n, "axes", &axes);
        for (int i = 0; i < k; i++) {
            int a;
            MCIR_ASSERT(mcir_norm_axis(axes[i], X->rank, &a));
            mask[a] = true;
        }
    }
    keep = mcir_node_bool(n, "keepdims");
    out[0].rank = 0;
    for (int i = 0; i < X->rank; i++) {
        if (!mask[i]) out[0].e[out[0].rank++] = mcir_tensor_extent(X, i);
        else if (keep) out[0].e[out[0].rank++] = mcir_extent_const(1);
    }
    return true;
}

static bool rule_transpose(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    (void)g, (void)d;
    const mcir_tensor *X = n->inputs[0];
    const int64_t *perm;
    int k = mcir_node_ints(n, "perm", &perm);
    out[0].rank = k;
    for (int i = 0; i < k; i++) {
        int a;
        MCIR_ASSERT(mcir_norm_axis(perm[i], X->rank, &a));
        out[0].e[i] = mcir_tensor_extent(X, a);
    }
    return true;
}

/* The extent attribute value k stands for: its dimension (plus the
 * constant of "past+1"), or the integer. */
static mcir_extent attr_extent(const mcir_attr *a, int k, int64_t value) {
    if (a && a->dim_of && a->dim_of[k] >= 0) return mcir_attr_extent(a, k);
    return mcir_extent_const(value);
}

static bool product(const sym_shape *s, int skip, mcir_extent *out) {
    mcir_extent p = mcir_extent_const(1);
    for (int i = 0; i < s->rank; i++)
        if (i != skip && !mcir_extent_mul(&p, &s->e[i], &p)) return false;
    *out = p;
    return true;
}

static bool rule_reshape(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    const mcir_tensor *X = n->inputs[0];
    const mcir_attr *at = mcir_node_attr(n, "shape");
    const int64_t *req;
    int k = mcir_node_ints(n, "shape", &req), wild = -1;
    sym_shape x, *o = &out[0];
    shape_of(X, &x);
    o->rank = k;
    for (int i = 0; i < k; i++) {
        bool named = at && at->dim_of && at->dim_of[i] >= 0;
        if (!named && req[i] == -1) {
            wild = i;
            o->e[i] = mcir_extent_const(1);
        } else {
            o->e[i] = attr_extent(at, i, req[i]);
        }
    }
    mcir_extent numel, known;
    char fx[256], fo[256], sn[96], sk[96], dt[128];
    if (!product(&x, -1, &numel) || !product(o, wild, &known))
        return sym_error(d, n, "the element count of '%s' %s or of the new shape needs more "
                         "than %d terms", X->name, shape_str(g, &x, fx, sizeof fx),
                         MCIR_EXTENT_TERMS);
    if (wild >= 0) {
        if (!extent_div(&numel, &known, &o->e[wild]) &&
            (o->e[wild] = mcir_extent_const(-1), true))   /* shown as asked */
            return sym_error(d, n, "cannot reshape '%s' %s to %s for every size: %s elements "
                             "divided by %s is whole only for some values of %s",
                             X->name, shape_str(g, &x, fx, sizeof fx), shape_str(g, o, fo, sizeof fo),
                             mcir_extent_str(g, &numel, sn, sizeof sn),
                             mcir_extent_str(g, &known, sk, sizeof sk),
                             dim_text(g, symbolic_side(&numel, &known), dt, sizeof dt));
        return true;
    }
    if (!mcir_extent_equal(&numel, &known))
        return sym_error(d, n, "cannot reshape '%s' %s to %s for every size: %s elements "
                         "against %s agree only for some values of %s",
                         X->name, shape_str(g, &x, fx, sizeof fx), shape_str(g, o, fo, sizeof fo),
                         mcir_extent_str(g, &numel, sn, sizeof sn),
                         mcir_extent_str(g, &known, sk, sizeof sk),
                         dim_text(g, symbolic_side(&numel, &known), dt, sizeof dt));
    return true;
}

static bool rule_split(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    const mcir_tensor *X = n->inputs[0];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), X->rank, &axis));
    sym_shape x;
    shape_of(X, &x);
    if (!mcir_extent_is_const(&x.e[axis], NULL)) {
        char se[96], dt[128], fx[256];
        return sym_error(d, n, "splits axis %d of '%s' %s, of extent %s, into fixed sizes: "
                         "they add up only for some values of %s", axis, X->name,
                         shape_str(g, &x, fx, sizeof fx), mcir_extent_str(g, &x.e[axis], se, sizeof se),
                         dim_text(g, &x.e[axis], dt, sizeof dt));
    }
    for (int i = 0; i < n->n_outputs; i++) {
        out[i] = x;
        out[i].e[axis] = mcir_extent_const(n->outputs[i]->shape[axis]);
    }
    return true;
}

static bool rule_concat(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    const mcir_tensor *X = n->inputs[0];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), X->rank, &axis));
    shape_of(X, &out[0]);
    for (int i = 1; i < n->n_inputs; i++) {
        sym_shape t;
        shape_of(n->inputs[i], &t);
        for (int k = 0; k < t.rank; k++) {
            if (k == axis) continue;
            char what[256];
            snprintf(what, sizeof what, "'%s' and '%s' in dim %d (only axis %d may differ)",
                     n->inputs[i]->name, X->name, k, axis);
            if (!equal_or_error(g, n, d, &t.e[k], &out[0].e[k], what)) return false;
        }
        if (!mcir_extent_add(&out[0].e[axis], &t.e[axis], &out[0].e[axis]))
            return sym_error(d, n, "the concatenated extent needs more than %d terms",
                             MCIR_EXTENT_TERMS);
    }
    return true;
}

/* A slice bound on an axis of extent `e`, normalised as NumPy does (a
 * negative one counts from the end, then clamped to [0, e]), when that
 * gives one polynomial for every size; false otherwise. */
static bool slice_bound(const mcir_graph *g, const mcir_extent *e, const mcir_extent *b,
                        bool is_end, mcir_extent *out) {
    int64_t elo, ehi, c;
    mcir_extent_bounds(g, e, &elo, &ehi);
    if (!mcir_extent_is_const(b, &c)) {          /* a dimension: within [0, e] always */
        mcir_extent diff;
        int64_t lo, hi;
        if (!extent_sub(e, b, &diff)) return false;
        mcir_extent_bounds(g, &diff, &lo, &hi);
        *out = *b;
        return lo >= 0;
    }
    if (c < 0) {                                 /* e + c, never below 0 */
        mcir_extent k = mcir_extent_const(c);
        if (!mcir_extent_add(e, &k, out)) return false;
        return elo + c >= 0;
    }
    if (is_end && c >= ehi) {                    /* clamped to the end for every size */
        *out = *e;
        return true;
    }
    *out = *b;
    return c <= elo;                             /* inside for every size */
}

static bool rule_slice(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    const mcir_tensor *X = n->inputs[0];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), X->rank, &axis));
    shape_of(X, &out[0]);
    const mcir_attr *as = mcir_node_attr(n, "start"), *ae = mcir_node_attr(n, "end");
    mcir_extent e = out[0].e[axis];
    mcir_extent s = attr_extent(as, 0, mcir_node_int(n, "start"));
    mcir_extent en = attr_extent(ae, 0, mcir_node_int(n, "end"));
    if (mcir_extent_is_const(&e, NULL) && mcir_extent_is_const(&s, NULL) &&
        mcir_extent_is_const(&en, NULL)) {
        out[0].e[axis] = mcir_extent_const(n->outputs[0]->shape[axis]);
        return true;
    }
    char se[96], ss[96], sn[96], dt[128];
    const mcir_extent *sym = mcir_extent_first_dim(&e) >= 0   ? &e
                             : mcir_extent_first_dim(&s) >= 0 ? &s
                                                              : &en;
    if (mcir_node_int(n, "step") != 1)
        return sym_error(d, n, "a slice with step %" PRId64 " over a symbolic extent (%s) is "
                         "not supported yet", mcir_node_int(n, "step"),
                         dim_text(g, sym, dt, sizeof dt));
    mcir_extent s0, e0, len;
    int64_t lo, hi;
    bool ok = slice_bound(g, &e, &s, false, &s0) && slice_bound(g, &e, &en, true, &e0) &&
              extent_sub(&e0, &s0, &len);
    if (ok) mcir_extent_bounds(g, &len, &lo, &hi);
    if (!ok || lo < 1)
        return sym_error(d, n, "slice %s:%s of axis %d (extent %s) is a non-empty slice of "
                         "the same form only for some values of %s",
                         mcir_extent_str(g, &s, ss, sizeof ss), mcir_extent_str(g, &en, sn, sizeof sn),
                         axis, mcir_extent_str(g, &e, se, sizeof se), dim_text(g, sym, dt, sizeof dt));
    out[0].e[axis] = len;
    return true;
}

/* Convolutions and pools: the batch may be symbolic, the rest may not. */
static bool rule_spatial(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    const mcir_tensor *X = n->inputs[0];
    for (int i = 1; i < X->rank; i++) {
        mcir_extent e = mcir_tensor_extent(X, i);
        if (!mcir_extent_is_const(&e, NULL) &&
            !(n->op == MCIR_OP_GLOBAL_AVG_POOL && i == 1)) {
            char dt[128];
            return sym_error(d, n, "dim %d of '%s' depends on %s; only the batch (dim 0) of a "
                             "convolution or pooling may be symbolic yet", i, X->name,
                             dim_text(g, &e, dt, sizeof dt));
        }
    }
    for (int i = 1; i < n->n_inputs; i++)    /* weights, bias */
        if (n->inputs[i]->sym) {
            char dt[128];
            mcir_extent e = mcir_tensor_extent(n->inputs[i], 0);
            return sym_error(d, n, "'%s' depends on %s; weights of a convolution must be fixed",
                             n->inputs[i]->name, dim_text(g, &e, dt, sizeof dt));
        }
    const mcir_tensor *Y = n->outputs[0];
    out[0].rank = Y->rank;
    for (int i = 0; i < Y->rank; i++) out[0].e[i] = mcir_extent_const(Y->shape[i]);
    out[0].e[0] = mcir_tensor_extent(X, 0);
    if (n->op == MCIR_OP_GLOBAL_AVG_POOL) out[0].e[1] = mcir_tensor_extent(X, 1);
    return true;
}

static bool rule_attention(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    sym_shape q, k, v, lq, lk, lv, lead;
    shape_of(n->inputs[0], &q);
    shape_of(n->inputs[1], &k);
    shape_of(n->inputs[2], &v);
    if (!equal_or_error(g, n, d, &q.e[q.rank - 1], &k.e[k.rank - 1], "the head sizes of Q and K") ||
        !equal_or_error(g, n, d, &k.e[k.rank - 2], &v.e[v.rank - 2], "the keys of K and values of V"))
        return false;
    lq = q, lk = k, lv = v;
    lq.rank -= 2, lk.rank -= 2, lv.rank -= 2;
    if (!sym_broadcast(g, n, d, &lq, n->inputs[0]->name, &lk, n->inputs[1]->name, &lead) ||
        !sym_broadcast(g, n, d, &lead, "Q and K", &lv, n->inputs[2]->name, &lead))
        return false;
    if (n->n_inputs == 4) {
        sym_shape scores = lead, m, b;
        scores.e[scores.rank++] = q.e[q.rank - 2];
        scores.e[scores.rank++] = k.e[k.rank - 2];
        shape_of(n->inputs[3], &m);
        if (!sym_broadcast(g, n, d, &scores, "the scores", &m, n->inputs[3]->name, &b)) return false;
        for (int i = 0; i < b.rank; i++)
            if (!equal_or_error(g, n, d, &b.e[i], &scores.e[i], "the mask must not grow the scores"))
                return false;
    }
    out[0] = lead;
    out[0].e[out[0].rank++] = q.e[q.rank - 2];
    out[0].e[out[0].rank++] = v.e[v.rank - 1];
    return true;
}

static bool rule_gather(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    (void)g, (void)d;
    const mcir_tensor *x = n->inputs[0], *idx = n->inputs[1];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis));
    out[0].rank = 0;
    for (int i = 0; i < axis; i++) out[0].e[out[0].rank++] = mcir_tensor_extent(x, i);
    for (int i = 0; i < idx->rank; i++) out[0].e[out[0].rank++] = mcir_tensor_extent(idx, i);
    for (int i = axis + 1; i < x->rank; i++) out[0].e[out[0].rank++] = mcir_tensor_extent(x, i);
    return true;
}

/* index_copy: X's extents; U's must be X's but on the axis, the indices'
 * length there. */
static bool rule_index_copy(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    const mcir_tensor *x = n->inputs[0], *idx = n->inputs[1], *u = n->inputs[2];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis));
    shape_of(x, &out[0]);
    for (int i = 0; i < x->rank; i++) {
        mcir_extent ue = mcir_tensor_extent(u, i);
        mcir_extent want = i == axis ? mcir_tensor_extent(idx, 0) : out[0].e[i];
        if (!equal_or_error(g, n, d, &ue, &want,
                            i == axis ? "the updates' rows and the indices" : "the updates and the input"))
            return false;
    }
    return true;
}

static bool rule_arange(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    const mcir_attr *ae = mcir_node_attr(n, "end");
    out[0].rank = 1;
    if (!ae || !ae->dim_of || ae->dim_of[0] < 0) {
        out[0].e[0] = mcir_extent_const(n->outputs[0]->shape[0]);
        return true;
    }
    mcir_extent end = mcir_attr_extent(ae, 0), start = mcir_extent_const(mcir_node_int(n, "start"));
    char dt[128];
    if (mcir_node_int(n, "step") != 1)
        return sym_error(d, n, "arange with end %s needs step 1 (a step of %" PRId64 " is not "
                         "supported yet)", dim_text(g, &end, dt, sizeof dt), mcir_node_int(n, "step"));
    int64_t lo, hi;
    if (!extent_sub(&end, &start, &out[0].e[0]))
        return sym_error(d, n, "the length of the range overflows");
    mcir_extent_bounds(g, &out[0].e[0], &lo, &hi);
    if (lo < 1)
        return sym_error(d, n, "start %" PRId64 " and end %s give no values for some values of %s",
                         mcir_node_int(n, "start"), g->dims[ae->dim_of[0]].name,
                         dim_text(g, &end, dt, sizeof dt));
    return true;
}

/* all_gather / reduce_scatter: X's extents, the axis times / over the
 * ranks (all_reduce is elementwise). */
static bool rule_collective(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out) {
    const mcir_tensor *X = n->inputs[0];
    shape_of(X, &out[0]);
    if (n->op == MCIR_OP_ALL_REDUCE) return true;
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), X->rank, &axis));
    mcir_extent r = mcir_extent_const(g->ranks);
    mcir_extent e = out[0].e[axis];
    bool ok = n->op == MCIR_OP_ALL_GATHER ? mcir_extent_mul(&e, &r, &out[0].e[axis])
                                          : extent_div(&e, &r, &out[0].e[axis]);
    if (!ok)
        return sym_error(d, n, "axis %d of '%s' is symbolic and does not divide into %d parts for every size",
                         axis, X->name, g->ranks);
    return true;
}

/* The symbolic rule of each shape family, found by the op table's
 * inference function: a family is one table entry. */
typedef bool (*sym_rule_fn)(mcir_graph *g, mcir_node *n, mcir_diag *d, sym_shape *out);
static const struct {
    mcir_infer_fn infer;
    sym_rule_fn rule;
} sym_rules[] = {
    {mcir_infer_matmul, rule_matmul},       {mcir_infer_binary, rule_elementwise},
    {mcir_infer_unary, rule_elementwise},   {mcir_infer_softmax, rule_elementwise},
    {mcir_infer_norm, rule_norm},           {mcir_infer_reduce, rule_reduce},
    {mcir_infer_transpose, rule_transpose}, {mcir_infer_reshape, rule_reshape},
    {mcir_infer_split, rule_split},         {mcir_infer_concat, rule_concat},
    {mcir_infer_slice, rule_slice},         {mcir_infer_conv2d, rule_spatial},
    {mcir_infer_pool2d, rule_spatial},      {mcir_infer_global_avg_pool, rule_spatial},
    {mcir_infer_attention, rule_attention}, {mcir_infer_cast, rule_elementwise},
    {mcir_infer_compare, rule_elementwise}, {mcir_infer_where, rule_elementwise},
    {mcir_infer_gather, rule_gather},       {mcir_infer_argreduce, rule_reduce},
    {mcir_infer_arange, rule_arange},       {mcir_infer_bitwise, rule_elementwise},
    {mcir_infer_cumsum, rule_elementwise},   {mcir_infer_collective, rule_collective},
    {mcir_infer_index_copy, rule_index_copy},
};

/* Whether anything of n is symbolic: an input extent or an attribute. */
static bool node_is_symbolic(const mcir_node *n) {
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i]->sym) return true;
    for (int i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].dim_of) return true;
    return false;
}

/* The dims n's inputs and attributes depend on, as "seq=16 (1..16)". */
static void node_dims_text(const mcir_graph *g, const mcir_node *n, char *buf, size_t len) {
    bool used[MCIR_MAX_DIMS] = {false};
    for (int i = 0; i < n->n_inputs; i++)
        for (int k = 0; n->inputs[i]->sym && k < n->inputs[i]->rank; k++)
            for (int t = 0; t < n->inputs[i]->sym[k].n_terms; t++)
                for (int x = 0; x < MCIR_MAX_DIMS; x++)
                    used[x] |= n->inputs[i]->sym[k].terms[t].pow[x] > 0;
    for (int i = 0; i < n->n_attrs; i++)
        for (int k = 0; n->attrs[i].dim_of && k < (n->attrs[i].type == MCIR_ATTR_INTS ? n->attrs[i].n : 1); k++)
            if (n->attrs[i].dim_of[k] >= 0) used[n->attrs[i].dim_of[k]] = true;
    size_t p = 0;
    buf[0] = 0;
    for (int x = 0; x < g->n_dims && p < len; x++)
        if (used[x])
            p += (size_t)snprintf(buf + p, len - p, "%sdimension '%s' = %" PRId64 " (of %" PRId64
                                  "..%" PRId64 ")", p ? ", " : "", g->dims[x].name,
                                  g->dims[x].value, g->dims[x].min, g->dims[x].max);
}

/* The op's own rule on a node that depends on dims: its errors say at
 * which sizes the shapes in them are. */
static bool infer_at_binding(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    MCIR_ASSERT(mem);
    mcir_diag held = mcir_diag_to(mem);
    bool ok = mcir_op_desc_of(n->op)->infer(g, n, &held);
    fclose(mem);
    if (!ok && d) {
        char dims[512];
        node_dims_text(g, n, dims, sizeof dims);
        for (char *line = text, *next; line && *line; line = next) {
            next = strchr(line, '\n');
            if (next) *next++ = 0;
            if (d->out) fprintf(d->out, "%s (at %s)\n", line, dims);
        }
        d->n_errors += held.n_errors;
    }
    free(text);
    return ok;
}

bool mcir_node_infer(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    const mcir_op_desc *desc = mcir_op_desc_of(n->op);
    if (g->n_dims == 0) return desc->infer(g, n, d);
    bool symbolic = node_is_symbolic(n);
    if (!(symbolic ? infer_at_binding(g, n, d) : desc->infer(g, n, d))) return false;
    for (int k = 0; k < n->n_outputs; k++) n->outputs[k]->sym = NULL;
    if (!symbolic) return true;
    sym_rule_fn rule = NULL;
    for (size_t i = 0; i < sizeof sym_rules / sizeof sym_rules[0]; i++)
        if (sym_rules[i].infer == desc->infer) rule = sym_rules[i].rule;
    if (!rule)
        return sym_error(d, n, "has no symbolic shape rule yet; its inputs and attributes must "
                         "not depend on a dimension");
    sym_shape *outs = calloc((size_t)n->n_outputs, sizeof *outs);
    MCIR_ASSERT(outs);
    bool ok = rule(g, n, d, outs);
    for (int k = 0; ok && k < n->n_outputs; k++) {
        mcir_tensor *t = n->outputs[k];
        MCIR_ASSERT(outs[k].rank == t->rank);
        bool any = false;
        for (int i = 0; i < t->rank; i++) {
            /* the symbolic rule and the op's own rule agree at the binding */
            MCIR_ASSERT(mcir_extent_eval(g, &outs[k].e[i]) == t->shape[i]);
            any |= !mcir_extent_is_const(&outs[k].e[i], NULL);
        }
        if (!any) continue;
        t->sym = mcir_arena_memdup(g->arena, outs[k].e, sizeof(mcir_extent) * (size_t)t->rank);
    }
    if (ok) {   /* the largest sizes must fit one tensor, as integer shapes must */
        for (int k = 0; k < n->n_outputs; k++) {
            mcir_tensor *t = n->outputs[k];
            if (!t->sym) continue;
            mcir_extent numel;
            int64_t lo, hi;
            sym_shape s;
            shape_of(t, &s);
            if (!product(&s, -1, &numel)) {
                ok = sym_error(d, n, "the element count of '%s' needs more than %d terms", t->name,
                               MCIR_EXTENT_TERMS);
                break;
            }
            mcir_extent_bounds(g, &numel, &lo, &hi);
            if (hi > MCIR_MAX_ELEMS) {
                char fs[256];
                ok = sym_error(d, n, "'%s' %s holds up to %" PRId64 " elements at the largest sizes "
                               "(more than %s, the limit of one tensor)", t->name,
                               shape_str(g, &s, fs, sizeof fs), hi, MCIR_MAX_ELEMS_TEXT);
                break;
            }
        }
    }
    if (!ok)
        for (int k = 0; k < n->n_outputs; k++) n->outputs[k]->sym = NULL;
    free(outs);
    return ok;
}
