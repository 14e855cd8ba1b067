/*
 * infer.c — shape and dtype inference, one function per op family (the op
 * table in ops.c points here), plus NumPy broadcasting and axis helpers.
 *
 * Invariant: an inference function either fills every output's rank, shape
 * and dtype with positive dims whose element count fits in int64, or
 * reports one error naming the node, the tensors and their shapes and
 * returns false leaving the outputs untouched. All inputs of a node must
 * share one dtype; the outputs take it. The rules are listed in docs/ops.md.
 */
#include <stdlib.h>
#include <string.h>

#include "interp-impl.h"

/* ------------------------------------------------------------- helpers */

typedef struct shape_text {
    char s[MCIR_MAX_RANK * 22 + 4];
} shape_text;

static const char *shape_fmt(int rank, const int64_t *shape, shape_text *b) {
    size_t k = 0, cap = sizeof b->s;
    k += (size_t)snprintf(b->s + k, cap - k, "[");
    for (int i = 0; i < rank && k < cap; i++)
        k += (size_t)snprintf(b->s + k, cap - k, "%s%lld", i ? ", " : "",
                              (long long)shape[i]);
    if (k < cap) snprintf(b->s + k, cap - k, "]");
    return b->s;
}

static const char *tshape(const mcir_tensor *t, shape_text *b) {
    return shape_fmt(t->rank, t->shape, b);
}

static bool node_error(mcir_diag *d, const mcir_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool node_error(mcir_diag *d, const mcir_node *n, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mcir_error(d, n->loc, "node '%s' (%s): %s", n->name ? n->name : "?",
               mcir_op_name(n->op), msg);
    return false;
}

bool mcir_norm_axis(int64_t axis, int rank, int *out) {
    if (axis < -(int64_t)rank || axis >= rank) return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

bool mcir_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b,
                          int *rout, int64_t *out) {
    int r = ra > rb ? ra : rb;
    if (r > MCIR_MAX_RANK) return false;
    int64_t tmp[MCIR_MAX_RANK];
    for (int i = 0; i < r; i++) {
        int ia = i - (r - ra), ib = i - (r - rb);
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        tmp[i] = da == 1 ? db : da;
    }
    memcpy(out, tmp, sizeof(int64_t) * (size_t)r);
    *rout = r;
    return true;
}

/* Checks the node (mcir_infer_check_node), that all inputs share a dtype,
 * which it returns in *dt, and that an op without MCIR_OPF_INTS gets no
 * integer or bool tensor. */
static bool prelude(mcir_node *n, mcir_diag *d, mcir_dtype *dt) {
    if (!mcir_infer_check_node(n, d)) return false;
    for (int i = 0; i < n->n_inputs; i++) {
        const mcir_tensor *t = n->inputs[i];
        if (t->dtype != n->inputs[0]->dtype)
            return node_error(d, n,
                              "inputs must share one dtype: '%s' is %s but '%s' is %s",
                              n->inputs[0]->name, mcir_dtype_name(n->inputs[0]->dtype),
                              t->name, mcir_dtype_name(t->dtype));
    }
    *dt = n->inputs[0]->dtype;
    if (mcir_dtype_is_integer(*dt) && !(mcir_op_desc_of(n->op)->flags & MCIR_OPF_INTS))
        return node_error(d, n, "takes floating-point tensors, but '%s' is %s (cast it first)",
                          n->inputs[0]->name, mcir_dtype_name(*dt));
    return true;
}

bool mcir_infer_check_node(mcir_node *n, mcir_diag *d) {
    const mcir_op_desc *desc = mcir_op_desc_of(n->op);
    if (n->n_inputs < desc->min_inputs ||
        (desc->max_inputs >= 0 && n->n_inputs > desc->max_inputs)) {
        if (desc->max_inputs < 0)
            return node_error(d, n, "takes at least %d inputs, got %d",
                              desc->min_inputs, n->n_inputs);
        if (desc->min_inputs == desc->max_inputs)
            return node_error(d, n, "takes %d inputs, got %d", desc->min_inputs,
                              n->n_inputs);
        return node_error(d, n, "takes %d to %d inputs, got %d", desc->min_inputs,
                          desc->max_inputs, n->n_inputs);
    }
    if (desc->n_outputs >= 0 && n->n_outputs != desc->n_outputs)
        return node_error(d, n, "has %d outputs, expected %d", n->n_outputs,
                          desc->n_outputs);
    /* The typed getters assert on a missing or mistyped attribute; inference
     * may run before the verifier, so check here. */
    static const char *const type_names[] = {"int", "float", "bool", "string", "ints"};
    for (int i = 0; i < desc->n_attrs; i++) {
        const mcir_attr_spec *s = &desc->attrs[i];
        const mcir_attr *a = mcir_node_attr(n, s->name);
        if (!a && s->required)
            return node_error(d, n, "missing required attribute '%s'", s->name);
        if (a && a->type != s->type)
            return node_error(d, n, "attribute '%s' must be %s, got %s", s->name,
                              type_names[s->type], type_names[a->type]);
        if (a && s->choices) {
            int k = 0;
            while (s->choices[k] && strcmp(s->choices[k], a->s) != 0) k++;
            if (!s->choices[k])
                return node_error(d, n, "attribute '%s' has unknown value \"%s\"",
                                  s->name, a->s);
        }
    }
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i]->rank < 0)
            return node_error(d, n, "input '%s' has no known shape", n->inputs[i]->name);
    return true;
}

/* Writes an output after checking that its element count fits in int64. */
static bool set_output(mcir_node *n, mcir_diag *d, int i, mcir_dtype dt, int rank,
                       const int64_t *shape) {
    int64_t numel = 1;
    shape_text b;
    MCIR_ASSERT(rank >= 0 && rank <= MCIR_MAX_RANK);
    for (int k = 0; k < rank; k++) {
        MCIR_ASSERT(shape[k] >= 1);
        if (mcir_mul_overflows(numel, shape[k], &numel) || numel > MCIR_MAX_ELEMS)
            return node_error(d, n,
                              "output '%s' of shape %s has too many elements (more than "
                              "%s, the limit of one tensor)",
                              n->outputs[i]->name, shape_fmt(rank, shape, &b),
                              MCIR_MAX_ELEMS_TEXT);
    }
    mcir_tensor *t = n->outputs[i];
    t->dtype = dt;
    t->rank = rank;
    memset(t->shape, 0, sizeof t->shape);
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)rank);
    return true;
}

/* Reads an int-list attribute that must have exactly `count` entries, each
 * at least `min`; uses `fallback` (count entries) when absent and not
 * defaulted. */
static bool ints_attr(mcir_node *n, mcir_diag *d, const char *name, int count,
                      int64_t min, const int64_t *fallback, int64_t *out) {
    const int64_t *v;
    int k;
    if (!mcir_node_attr(n, name) && fallback) {
        memcpy(out, fallback, sizeof(int64_t) * (size_t)count);
        return true;
    }
    k = mcir_node_ints(n, name, &v);
    if (k != count)
        return node_error(d, n, "attribute '%s' must have %d values, got %d", name,
                          count, k);
    for (int i = 0; i < k; i++) {
        if (v[i] < min)
            return node_error(d, n, "attribute '%s' value %lld must be >= %lld", name,
                              (long long)v[i], (long long)min);
        out[i] = v[i];
    }
    return true;
}

/* -------------------------------------------------------------- matmul */

/* NumPy matmul: the last two dims multiply, leading dims broadcast. A rank-1
 * A is a row [1, K] and a rank-1 B a column [K, 1]; the added dim is
 * dropped from the result. transpose_a/b swap the last two dims of a
 * rank >= 2 operand (a no-op on a rank-1 one). */
bool mcir_infer_matmul(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *A = n->inputs[0], *B = n->inputs[1];
    shape_text sa, sb, sc;
    if (A->rank < 1 || B->rank < 1)
        return node_error(d, n, "operands must have rank >= 1: A '%s' %s, B '%s' %s",
                          A->name, tshape(A, &sa), B->name, tshape(B, &sb));
    bool ta = mcir_node_bool(n, "transpose_a") && A->rank >= 2;
    bool tb = mcir_node_bool(n, "transpose_b") && B->rank >= 2;
    int64_t m, ka, kb, nn;
    if (A->rank == 1) {
        m = 1;
        ka = A->shape[0];
    } else {
        m = A->shape[A->rank - (ta ? 1 : 2)];
        ka = A->shape[A->rank - (ta ? 2 : 1)];
    }
    if (B->rank == 1) {
        kb = B->shape[0];
        nn = 1;
    } else {
        kb = B->shape[B->rank - (tb ? 1 : 2)];
        nn = B->shape[B->rank - (tb ? 2 : 1)];
    }
    if (ka != kb)
        return node_error(d, n,
                          "inner dimensions differ: A '%s' %s%s has %lld columns, "
                          "B '%s' %s%s has %lld rows",
                          A->name, tshape(A, &sa), ta ? " (transposed)" : "",
                          (long long)ka, B->name, tshape(B, &sb),
                          tb ? " (transposed)" : "", (long long)kb);
    int ra = A->rank >= 2 ? A->rank - 2 : 0, rb = B->rank >= 2 ? B->rank - 2 : 0;
    int64_t shape[MCIR_MAX_RANK + 2];
    int r;
    if (!mcir_broadcast_shape(ra, A->shape, rb, B->shape, &r, shape))
        return node_error(d, n,
                          "batch dimensions do not broadcast: A '%s' %s, B '%s' %s "
                          "(batch dims %s vs %s)",
                          A->name, tshape(A, &sa), B->name, tshape(B, &sb),
                          shape_fmt(ra, A->shape, &sc), shape_fmt(rb, B->shape, &sc));
    if (A->rank >= 2) shape[r++] = m;
    if (B->rank >= 2) shape[r++] = nn;
    if (r > MCIR_MAX_RANK)
        return node_error(d, n, "result rank %d exceeds %d", r, MCIR_MAX_RANK);
    return set_output(n, d, 0, dt, r, shape);
}

/* ------------------------------------------------------- elementwise */

bool mcir_infer_binary(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *A = n->inputs[0], *B = n->inputs[1];
    int64_t shape[MCIR_MAX_RANK];
    int r;
    if (!mcir_broadcast_shape(A->rank, A->shape, B->rank, B->shape, &r, shape)) {
        shape_text sa, sb;
        int rr = A->rank > B->rank ? A->rank : B->rank;
        for (int i = rr - 1; i >= 0; i--) {
            int ia = i - (rr - A->rank), ib = i - (rr - B->rank);
            int64_t da = ia >= 0 ? A->shape[ia] : 1, db = ib >= 0 ? B->shape[ib] : 1;
            if (da != db && da != 1 && db != 1)
                return node_error(d, n,
                                  "cannot broadcast '%s' %s with '%s' %s: dimension "
                                  "%lld vs %lld (axis %d from the end)",
                                  A->name, tshape(A, &sa), B->name, tshape(B, &sb),
                                  (long long)da, (long long)db, rr - i);
        }
        return node_error(d, n, "cannot broadcast '%s' %s with '%s' %s", A->name,
                          tshape(A, &sa), B->name, tshape(B, &sb));
    }
    return set_output(n, d, 0, dt, r, shape);
}

bool mcir_infer_unary(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *X = n->inputs[0];
    return set_output(n, d, 0, dt, X->rank, X->shape);
}

/* ------------------------------------------------------------- norms */

static bool axis_attr(mcir_node *n, mcir_diag *d, const char *name,
                      const mcir_tensor *X, int *axis) {
    int64_t a = mcir_node_int(n, name);
    shape_text sx;
    if (!mcir_norm_axis(a, X->rank, axis))
        return node_error(d, n, "%s %lld is out of range for '%s' %s (rank %d)", name,
                          (long long)a, X->name, tshape(X, &sx), X->rank);
    return true;
}

bool mcir_infer_softmax(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    int axis;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *X = n->inputs[0];
    if (!axis_attr(n, d, "axis", X, &axis)) return false;
    return set_output(n, d, 0, dt, X->rank, X->shape);
}

/* layernorm / rmsnorm normalise over X's dims [axis, rank). gamma (and
 * beta) must broadcast to those trailing dims without growing them: rank at
 * most rank - axis, each dim (aligned from the right) equal or 1. */
bool mcir_infer_norm(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    int axis;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *X = n->inputs[0];
    if (!axis_attr(n, d, "axis", X, &axis)) return false;
    int tr = X->rank - axis;
    const int64_t *trail = X->shape + axis;
    for (int i = 1; i < n->n_inputs; i++) {
        const mcir_tensor *p = n->inputs[i];
        const char *role = i == 1 ? "gamma" : "beta";
        shape_text sp, st, sx;
        bool ok = p->rank <= tr;
        for (int k = 0; ok && k < p->rank; k++) {
            int64_t pd = p->shape[p->rank - 1 - k], xd = trail[tr - 1 - k];
            if (pd != xd && pd != 1) ok = false;
        }
        if (!ok)
            return node_error(d, n,
                              "%s '%s' %s does not match the normalised dims %s of "
                              "'%s' %s (axis %d): it must broadcast to them",
                              role, p->name, tshape(p, &sp), shape_fmt(tr, trail, &st),
                              X->name, tshape(X, &sx), axis);
    }
    if (!(mcir_node_float(n, "eps") >= 0))
        return node_error(d, n, "eps %g must be >= 0", mcir_node_float(n, "eps"));
    return set_output(n, d, 0, dt, X->rank, X->shape);
}

/* -------------------------------------------------------- reductions */

/* Normalised, duplicate-free axes of a reduction into mask; false + error. */
static bool reduce_axes(mcir_node *n, mcir_diag *d, const mcir_tensor *X,
                        bool mask[MCIR_MAX_RANK]) {
    const int64_t *axes;
    int k = mcir_node_ints(n, "axes", &axes);
    shape_text sx;
    memset(mask, 0, sizeof(bool) * MCIR_MAX_RANK);
    if (k == 0) return node_error(d, n, "axes must not be empty");
    for (int i = 0; i < k; i++) {
        int a;
        if (!mcir_norm_axis(axes[i], X->rank, &a))
            return node_error(d, n, "axis %lld is out of range for '%s' %s (rank %d)",
                              (long long)axes[i], X->name, tshape(X, &sx), X->rank);
        if (mask[a])
            return node_error(d, n, "axis %lld repeats axis %d in axes", (long long)axes[i],
                              a);
        mask[a] = true;
    }
    return true;
}

bool mcir_infer_reduce(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    bool mask[MCIR_MAX_RANK];
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *X = n->inputs[0];
    if (!reduce_axes(n, d, X, mask)) return false;
    bool keep = mcir_node_bool(n, "keepdims");
    int64_t shape[MCIR_MAX_RANK];
    int r = 0;
    for (int i = 0; i < X->rank; i++) {
        if (!mask[i]) shape[r++] = X->shape[i];
        else if (keep) shape[r++] = 1;
    }
    return set_output(n, d, 0, dt, r, shape);
}

/* ------------------------------------------------------ data movement */

bool mcir_infer_transpose(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *X = n->inputs[0];
    const int64_t *perm;
    int k = mcir_node_ints(n, "perm", &perm);
    shape_text sx, sp;
    if (k != X->rank)
        return node_error(d, n, "perm %s has %d entries but '%s' %s has rank %d",
                          shape_fmt(k < MCIR_MAX_RANK ? k : MCIR_MAX_RANK, perm, &sp), k,
                          X->name, tshape(X, &sx), X->rank);
    bool seen[MCIR_MAX_RANK] = {false};
    int64_t shape[MCIR_MAX_RANK];
    for (int i = 0; i < k; i++) {
        int a;
        if (!mcir_norm_axis(perm[i], X->rank, &a) || seen[a])
            return node_error(d, n, "perm %s is not a permutation of 0..%d",
                              shape_fmt(k, perm, &sp), X->rank - 1);
        seen[a] = true;
        shape[i] = X->shape[a];
    }
    return set_output(n, d, 0, dt, X->rank, shape);
}

bool mcir_infer_reshape(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *X = n->inputs[0];
    const int64_t *req;
    int k = mcir_node_ints(n, "shape", &req);
    shape_text sx, sr;
    if (k > MCIR_MAX_RANK)
        return node_error(d, n, "shape has %d dims, more than %d", k, MCIR_MAX_RANK);
    int64_t shape[MCIR_MAX_RANK], known = 1;
    int wild = -1;
    for (int i = 0; i < k; i++) {
        if (req[i] == -1) {
            if (wild >= 0)
                return node_error(d, n, "shape %s has more than one -1",
                                  shape_fmt(k, req, &sr));
            wild = i;
            continue;
        }
        if (req[i] == 0)
            return node_error(d, n, "shape %s has a 0 dimension (not allowed)",
                              shape_fmt(k, req, &sr));
        if (req[i] < 0)
            return node_error(d, n, "shape %s has a negative dimension %lld",
                              shape_fmt(k, req, &sr), (long long)req[i]);
        if (mcir_mul_overflows(known, req[i], &known))
            return node_error(d, n, "shape %s has too many elements",
                              shape_fmt(k, req, &sr));
        shape[i] = req[i];
    }
    int64_t numel = mcir_tensor_numel(X);
    if (wild >= 0) {
        if (numel % known != 0)
            return node_error(d, n,
                              "cannot reshape '%s' %s (%lld elements) to %s: %lld is "
                              "not a multiple of %lld",
                              X->name, tshape(X, &sx), (long long)numel,
                              shape_fmt(k, req, &sr), (long long)numel, (long long)known);
        shape[wild] = numel / known;
    } else if (known != numel) {
        return node_error(d, n,
                          "cannot reshape '%s' %s (%lld elements) to %s (%lld elements)",
                          X->name, tshape(X, &sx), (long long)numel,
                          shape_fmt(k, req, &sr), (long long)known);
    }
    return set_output(n, d, 0, dt, k, shape);
}

bool mcir_infer_split(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    int axis;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *X = n->inputs[0];
    if (!axis_attr(n, d, "axis", X, &axis)) return false;
    const int64_t *sizes;
    int k = mcir_node_ints(n, "sizes", &sizes);
    shape_text sx;
    if (k != n->n_outputs)
        return node_error(d, n, "sizes has %d entries but the node has %d outputs", k,
                          n->n_outputs);
    int64_t sum = 0;
    for (int i = 0; i < k; i++) {
        if (sizes[i] < 1)
            return node_error(d, n, "sizes[%d] = %lld must be >= 1", i,
                              (long long)sizes[i]);
        if (__builtin_add_overflow(sum, sizes[i], &sum))
            return node_error(d, n, "sizes overflow");
    }
    if (sum != X->shape[axis])
        return node_error(d, n, "sizes sum to %lld but axis %d of '%s' %s is %lld",
                          (long long)sum, axis, X->name, tshape(X, &sx),
                          (long long)X->shape[axis]);
    for (int i = 0; i < k; i++) {
        int64_t shape[MCIR_MAX_RANK];
        memcpy(shape, X->shape, sizeof shape);
        shape[axis] = sizes[i];
        if (!set_output(n, d, i, dt, X->rank, shape)) return false;
    }
    return true;
}

bool mcir_infer_concat(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    int axis;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *X = n->inputs[0];
    shape_text sx, si;
    if (X->rank < 1)
        return node_error(d, n, "cannot concatenate scalars ('%s')", X->name);
    if (!axis_attr(n, d, "axis", X, &axis)) return false;
    int64_t shape[MCIR_MAX_RANK];
    memcpy(shape, X->shape, sizeof shape);
    for (int i = 1; i < n->n_inputs; i++) {
        const mcir_tensor *t = n->inputs[i];
        if (t->rank != X->rank)
            return node_error(d, n, "'%s' %s has rank %d but '%s' %s has rank %d",
                              t->name, tshape(t, &si), t->rank, X->name, tshape(X, &sx),
                              X->rank);
        for (int k = 0; k < X->rank; k++)
            if (k != axis && t->shape[k] != X->shape[k])
                return node_error(d, n,
                                  "'%s' %s differs from '%s' %s in dim %d (only axis %d "
                                  "may differ)",
                                  t->name, tshape(t, &si), X->name, tshape(X, &sx), k,
                                  axis);
        if (__builtin_add_overflow(shape[axis], t->shape[axis], &shape[axis]))
            return node_error(d, n, "concatenated axis overflows");
    }
    return set_output(n, d, 0, dt, X->rank, shape);
}

void mcir_slice_range(int64_t dim, int64_t start, int64_t end, int64_t step,
                      int64_t *first, int64_t *len) {
    MCIR_ASSERT(step != 0 && dim >= 0);
    if (start < 0) start = start < -dim ? -dim - 1 : start + dim;
    if (end < 0) end = end < -dim ? -dim - 1 : end + dim;
    if (step > 0) {
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        *first = start;
        *len = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
        start = start < -1 ? -1 : start > dim - 1 ? dim - 1 : start;
        end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
        *first = start;
        /* -step may overflow for INT64_MIN: go through unsigned. */
        uint64_t s = (uint64_t)0 - (uint64_t)step;
        *len = start > end ? (int64_t)((uint64_t)(start - end - 1) / s) + 1 : 0;
    }
}

bool mcir_infer_slice(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    int axis;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *X = n->inputs[0];
    if (!axis_attr(n, d, "axis", X, &axis)) return false;
    int64_t start = mcir_node_int(n, "start"), end = mcir_node_int(n, "end");
    int64_t step = mcir_node_int(n, "step"), first, len;
    shape_text sx;
    if (step == 0) return node_error(d, n, "step must not be 0");
    mcir_slice_range(X->shape[axis], start, end, step, &first, &len);
    if (len == 0)
        return node_error(d, n,
                          "slice %lld:%lld:%lld of axis %d of '%s' %s is empty "
                          "(shapes must be positive)",
                          (long long)start, (long long)end, (long long)step, axis,
                          X->name, tshape(X, &sx));
    int64_t shape[MCIR_MAX_RANK];
    memcpy(shape, X->shape, sizeof shape);
    shape[axis] = len;
    return set_output(n, d, 0, dt, X->rank, shape);
}

/* ------------------------------------------------------- convolutions */

/* Output size of a sliding window; false if the window does not fit. */
static bool window_out(int64_t in, int64_t pad0, int64_t pad1, int64_t k,
                       int64_t stride, int64_t dil, int64_t *out) {
    int64_t span, ext, padded;
    if (mcir_mul_overflows(dil, k - 1, &span) || __builtin_add_overflow(span, 1, &ext) ||
        __builtin_add_overflow(in, pad0, &padded) ||
        __builtin_add_overflow(padded, pad1, &padded))
        return false;
    if (padded < ext) return false;
    *out = (padded - ext) / stride + 1;
    return true;
}

bool mcir_infer_conv2d(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *X = n->inputs[0], *W = n->inputs[1];
    shape_text sx, sw, sb;
    if (X->rank != 4)
        return node_error(d, n, "input '%s' %s must be NCHW (rank 4)", X->name,
                          tshape(X, &sx));
    if (W->rank != 4)
        return node_error(d, n, "weight '%s' %s must be OIHW (rank 4)", W->name,
                          tshape(W, &sw));
    int64_t strides[2], pads[4], dil[2];
    static const int64_t ones[2] = {1, 1}, zeros[4] = {0, 0, 0, 0};
    if (!ints_attr(n, d, "strides", 2, 1, ones, strides) ||
        !ints_attr(n, d, "pads", 4, 0, zeros, pads) ||
        !ints_attr(n, d, "dilations", 2, 1, ones, dil))
        return false;
    int64_t groups = mcir_node_int(n, "groups");
    int64_t C = X->shape[1], O = W->shape[0];
    if (groups < 1) return node_error(d, n, "groups %lld must be >= 1", (long long)groups);
    if (C % groups != 0 || O % groups != 0)
        return node_error(d, n,
                          "groups %lld must divide the input channels %lld of '%s' %s "
                          "and the output channels %lld of '%s' %s",
                          (long long)groups, (long long)C, X->name, tshape(X, &sx),
                          (long long)O, W->name, tshape(W, &sw));
    if (W->shape[1] != C / groups)
        return node_error(d, n,
                          "weight '%s' %s has %lld input channels per group, expected "
                          "%lld (input '%s' %s has %lld channels, groups %lld)",
                          W->name, tshape(W, &sw), (long long)W->shape[1],
                          (long long)(C / groups), X->name, tshape(X, &sx), (long long)C,
                          (long long)groups);
    if (n->n_inputs == 3) {
        const mcir_tensor *B = n->inputs[2];
        if (B->rank != 1 || B->shape[0] != O)
            return node_error(d, n, "bias '%s' %s must have shape [%lld]", B->name,
                              tshape(B, &sb), (long long)O);
    }
    int64_t shape[4] = {X->shape[0], O, 0, 0};
    for (int k = 0; k < 2; k++)
        if (!window_out(X->shape[2 + k], pads[k], pads[k + 2], W->shape[2 + k],
                        strides[k], dil[k], &shape[2 + k]))
            return node_error(d, n,
                              "kernel '%s' %s (dilation %lld) does not fit in %s %lld of "
                              "'%s' %s with pads %lld+%lld",
                              W->name, tshape(W, &sw), (long long)dil[k],
                              k ? "width" : "height", (long long)X->shape[2 + k], X->name,
                              tshape(X, &sx), (long long)pads[k], (long long)pads[k + 2]);
    return set_output(n, d, 0, dt, 4, shape);
}

bool mcir_infer_pool2d(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *X = n->inputs[0];
    shape_text sx;
    if (X->rank != 4)
        return node_error(d, n, "input '%s' %s must be NCHW (rank 4)", X->name,
                          tshape(X, &sx));
    int64_t kernel[2], strides[2], pads[4];
    static const int64_t zeros[4] = {0, 0, 0, 0};
    if (!ints_attr(n, d, "kernel", 2, 1, NULL, kernel)) return false;
    if (!ints_attr(n, d, "strides", 2, 1, kernel, strides)) return false;
    if (!ints_attr(n, d, "pads", 4, 0, zeros, pads)) return false;
    /* the reference kernel and the generated one visit kernel[0]*kernel[1]
     * elements per output: a window is bounded like a tensor */
    int64_t area;
    if (mcir_mul_overflows(kernel[0], kernel[1], &area) || area > MCIR_MAX_ELEMS)
        return node_error(d, n, "kernel %lldx%lld has too many elements (more than %s)",
                          (long long)kernel[0], (long long)kernel[1], MCIR_MAX_ELEMS_TEXT);
    for (int k = 0; k < 4; k++)
        if (pads[k] >= kernel[k % 2])
            return node_error(d, n,
                              "pad %lld must be smaller than the kernel size %lld "
                              "(a window would lie entirely in padding)",
                              (long long)pads[k], (long long)kernel[k % 2]);
    int64_t shape[4] = {X->shape[0], X->shape[1], 0, 0};
    for (int k = 0; k < 2; k++)
        if (!window_out(X->shape[2 + k], pads[k], pads[k + 2], kernel[k], strides[k], 1,
                        &shape[2 + k]))
            return node_error(d, n,
                              "kernel %lldx%lld does not fit in %s %lld of '%s' %s with "
                              "pads %lld+%lld",
                              (long long)kernel[0], (long long)kernel[1],
                              k ? "width" : "height", (long long)X->shape[2 + k], X->name,
                              tshape(X, &sx), (long long)pads[k], (long long)pads[k + 2]);
    return set_output(n, d, 0, dt, 4, shape);
}

bool mcir_infer_global_avg_pool(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *X = n->inputs[0];
    shape_text sx;
    if (X->rank != 4)
        return node_error(d, n, "input '%s' %s must be NCHW (rank 4)", X->name,
                          tshape(X, &sx));
    int64_t shape[4] = {X->shape[0], X->shape[1], 1, 1};
    return set_output(n, d, 0, dt, 4, shape);
}

/* ---------------------------------------------------------- attention */

/* Q [..,Nq,d], K [..,Nk,d], V [..,Nk,dv]: leading dims broadcast together;
 * the optional mask M must broadcast to the scores [lead.., Nq, Nk]
 * without growing them. Output [lead.., Nq, dv]. */
bool mcir_infer_attention(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    (void)g;
    mcir_dtype dt;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *Q = n->inputs[0], *K = n->inputs[1], *V = n->inputs[2];
    shape_text sq, sk, sv, sm, ss;
    for (int i = 0; i < 3; i++)
        if (n->inputs[i]->rank < 2)
            return node_error(d, n, "%c '%s' %s must have rank >= 2", "QKV"[i],
                              n->inputs[i]->name, tshape(n->inputs[i], &sq));
    int64_t nq = Q->shape[Q->rank - 2], dq = Q->shape[Q->rank - 1];
    int64_t nk = K->shape[K->rank - 2], dk = K->shape[K->rank - 1];
    int64_t nv = V->shape[V->rank - 2], dv = V->shape[V->rank - 1];
    if (dq != dk)
        return node_error(d, n, "Q '%s' %s and K '%s' %s differ in head size (%lld vs %lld)",
                          Q->name, tshape(Q, &sq), K->name, tshape(K, &sk),
                          (long long)dq, (long long)dk);
    if (nv != nk)
        return node_error(d, n,
                          "K '%s' %s has %lld keys but V '%s' %s has %lld values",
                          K->name, tshape(K, &sk), (long long)nk, V->name, tshape(V, &sv),
                          (long long)nv);
    int64_t lead[MCIR_MAX_RANK + 2];
    int rl;
    if (!mcir_broadcast_shape(Q->rank - 2, Q->shape, K->rank - 2, K->shape, &rl, lead) ||
        !mcir_broadcast_shape(rl, lead, V->rank - 2, V->shape, &rl, lead))
        return node_error(d, n,
                          "leading dims of Q '%s' %s, K '%s' %s and V '%s' %s do not "
                          "broadcast",
                          Q->name, tshape(Q, &sq), K->name, tshape(K, &sk), V->name,
                          tshape(V, &sv));
    if (rl + 2 > MCIR_MAX_RANK)
        return node_error(d, n, "result rank %d exceeds %d", rl + 2, MCIR_MAX_RANK);
    if (n->n_inputs == 4) {
        const mcir_tensor *M = n->inputs[3];
        int64_t scores[MCIR_MAX_RANK], b[MCIR_MAX_RANK];
        int rs = rl + 2, rb;
        memcpy(scores, lead, sizeof(int64_t) * (size_t)rl);
        scores[rl] = nq;
        scores[rl + 1] = nk;
        bool ok = M->rank <= rs &&
                  mcir_broadcast_shape(rs, scores, M->rank, M->shape, &rb, b);
        for (int i = 0; ok && i < rs; i++) ok = b[i] == scores[i];
        if (!ok)
            return node_error(d, n, "mask '%s' %s does not broadcast to the scores %s",
                              M->name, tshape(M, &sm), shape_fmt(rs, scores, &ss));
    }
    if (mcir_node_attr(n, "scale")) {
        double s = mcir_node_float(n, "scale");
        if (s != s) return node_error(d, n, "scale is NaN");
    }
    lead[rl] = nq;
    lead[rl + 1] = dv;
    return set_output(n, d, 0, dt, rl + 2, lead);
}

/* -------------------------------------------------------- collectives */

/* all_reduce: X's shape. all_gather: the axis times the ranks.
 * reduce_scatter: the axis over the ranks, which must divide it. Every
 * rank's X has one shape (SPMD), so inference sees one rank's. */
bool mcir_infer_collective(mcir_graph *g, mcir_node *n, mcir_diag *d) {
    mcir_dtype dt;
    if (!prelude(n, d, &dt)) return false;
    const mcir_tensor *X = n->inputs[0];
    int64_t shape[MCIR_MAX_RANK];
    memcpy(shape, X->shape, sizeof(int64_t) * (size_t)X->rank);
    if (n->op != MCIR_OP_ALL_REDUCE) {
        int axis;
        if (!axis_attr(n, d, "axis", X, &axis)) return false;
        shape_text sx;
        if (n->op == MCIR_OP_ALL_GATHER) {
            if (mcir_mul_overflows(shape[axis], g->ranks, &shape[axis]))
                return node_error(d, n, "axis %d of '%s' %s times %d ranks overflows", axis, X->name,
                                  tshape(X, &sx), g->ranks);
        } else if (shape[axis] % g->ranks != 0) {
            return node_error(d, n, "axis %d of '%s' %s (extent %lld) does not divide into %d equal "
                              "parts, one per rank", axis, X->name, tshape(X, &sx),
                              (long long)shape[axis], g->ranks);
        } else {
            shape[axis] /= g->ranks;
        }
    }
    return set_output(n, d, 0, dt, X->rank, shape);
}
