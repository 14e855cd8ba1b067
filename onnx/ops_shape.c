/*
 * ops_shape.c — the ONNX ops that move elements without computing them:
 * Identity and Dropout (inference), Transpose, Reshape, Flatten,
 * Unsqueeze, Squeeze, Concat, Split, Slice, Gather, Expand (kept pending:
 * see ox_runtime), Pad, ScatterND, Trilu and OneHot.
 *
 * Invariant: every output element is an input element or a constant (a
 * fill, a pad value, a zero, OneHot's on and off values) — the one
 * exception is ScatterND's reductions, which only fold on constants. With
 * constant inputs an op folds at import time (eval.c), except while
 * probing a symbolic dimension (symbolic.c): a Slice of a buffer and a
 * float Expand to more elements stay runtime ops there, so that their
 * sizes may follow the dimension.
 */
#include <math.h>
#include <string.h>

#include "onnx-impl.h"

bool ox_import_identity(ox *x, ox_value **in, int n_in) {
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

bool ox_import_transpose(ox *x, ox_value **in, int n_in) {
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

bool ox_import_reshape(ox *x, ox_value **in, int n_in) {
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

bool ox_import_flatten(ox *x, ox_value **in, int n_in) {
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

bool ox_import_unsqueeze(ox *x, ox_value **in, int n_in) {
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

bool ox_import_squeeze(ox *x, ox_value **in, int n_in) {
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

bool ox_import_concat(ox *x, ox_value **in, int n_in) {
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

bool ox_import_split(ox *x, ox_value **in, int n_in) {
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

bool ox_import_slice(ox *x, ox_value **in, int n_in) {
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
        t = ox_slice_rt(x, t, ax[i], first[i], len[i], step[i], i == k - 1 ? 0 : -1);
    return ox_define_rt(x, 0, t);
}

bool ox_import_gather(ox *x, ox_value **in, int n_in) {
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
        else if (!(pieces[np++] = ox_slice_rt(x, src, ax, s, j - i, 1, last ? 0 : -1))) return false;
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

bool ox_import_expand(ox *x, ox_value **in, int n_in) {
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
     * broadcast to more elements (a class token to the batch), or an
     * integer one to a rank >= 2 (the batch index of a GatherND's index
     * tuples, expanded to the positions' shape: torch's dynamo export of
     * a causal mask) stays a runtime expand of the weight, whose size may
     * follow the dimension; 1-D integers (shapes) still fold */
    bool keep = X->is_const && x->probing && target > X->numel && (ox_is_float(X->elem) || r >= 2);
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

/* Pad: per axis, a crop (negative pads) then a concat of the border pieces
 * — constant blocks, mirrored slices (reflect), repeated edge slices (edge)
 * or the opposite end (wrap) — with the tensor. */
bool ox_import_pad(ox *x, ox_value **in, int n_in) {
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
            if (!(v = ox_slice_step(x, v, a, cb, dim - cb - ce, 1))) return false;
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
                pieces[n++] = ox_slice_step(x, v, a, side ? dim - 2 : w, w, -1);
            } else if (kind == 3) {
                pieces[n++] = ox_slice_step(x, v, a, side ? 0 : dim - w, w, 1);
            } else {
                if (w > 200) return ox_error(x, "edge pads wider than 200 are not supported");
                ox_value *edge = ox_slice_step(x, v, a, side ? dim - 1 : 0, 1, 1);
                for (int64_t i = 0; i < w; i++) pieces[n++] = edge;
            }
            if (!pieces[n - 1]) return false;
            if (!side) pieces[n++] = v;
        }
        if (!(v = concat_step(x, pieces, n, a, a == last ? 0 : -1))) return false;
    }
    return ox_define_out(x, 0, v);
}

/* ScatterND. Constants fold (every reduction). Otherwise an index_copy
 * along the first axis of data seen as [positions, slice...]: the
 * positions are constants computed here from constant indices (any last
 * dim q), or runtime indices with q = 1 (a KV cache's update by
 * cache_position), whose range the interpreter checks at run time. */
bool ox_import_scatter_nd(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    char rbuf[16];
    const char *red = x->opset >= 16 ? ox_attr_str(x, "reduction", "none", rbuf, sizeof rbuf) : "none";
    if (x->failed) return false;
    ox_value *D = in[0], *I = in[1], *U = in[2];
    if (ox_is_float(I->elem))
        return ox_error(x, "indices '%s' must be integers", I->name);
    if (I->rank < 1) return ox_error(x, "indices '%s' must have rank >= 1", I->name);
    int q = (int)I->shape[I->rank - 1];
    if (q < 1 || q > D->rank) return ox_error(x, "indices' last dim %d is out of range", q);
    if (!I->is_const && q != 1)
        return ox_error(x, "indices '%s' computed at run time must have a last dim of 1 (a row "
                        "index), not %d; with constant indices any is supported", I->name, q);
    int64_t n_idx = I->numel / q, slice = 1, prefix = 1;
    for (int k = q; k < D->rank; k++) slice *= D->shape[k];
    for (int k = 0; k < q; k++) prefix *= D->shape[k];
    if (U->numel != n_idx * slice)
        return ox_error(x, "updates '%s' has %lld elements, indices and data need %lld", U->name,
                        (long long)U->numel, (long long)(n_idx * slice));
    int rk = !strcmp(red, "none") ? 0 : !strcmp(red, "add") ? 1 : !strcmp(red, "mul") ? 2
             : !strcmp(red, "max") ? 3 : !strcmp(red, "min") ? 4 : -1;
    if (rk < 0) return ox_error(x, "reduction \"%s\" is not supported", red);
    int64_t *pos = NULL;
    if (I->is_const) {
        pos = mcir_arena_alloc(x->a, sizeof(int64_t) * (size_t)(n_idx ? n_idx : 1));
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
    }
    if (D->is_const && U->is_const && pos) {
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
    ox_value *rows;
    if (pos) {
        unsigned char *hit = mcir_arena_alloc(x->a, (size_t)prefix);
        memset(hit, 0, (size_t)prefix);
        for (int64_t i = 0; i < n_idx; i++) {
            if (hit[pos[i]]) return ox_error(x, "indices repeat a position (undefined in ONNX)");
            hit[pos[i]] = 1;
        }
        rows = ox_const_new(x, ox_dtype_elem(MCIR_DTYPE_I64), 1, &n_idx);
        if (!rows) return false;
        for (int64_t i = 0; i < n_idx; i++) ox_seti(rows, i, pos[i]);
        rows->name = ox_fresh(x, "scatter_nd_rows");
    } else {
        rows = ox_reshape_step(x, I, 1, &n_idx);
    }
    int64_t dshape[MCIR_MAX_RANK], ushape[MCIR_MAX_RANK];
    int r = 0;
    dshape[r] = prefix, ushape[r++] = n_idx;
    for (int k = q; k < D->rank; k++, r++) dshape[r] = ushape[r] = D->shape[k];
    ox_value *D2 = ox_reshape_step(x, D, r, dshape), *U2 = ox_reshape_step(x, U, r, ushape);
    if (!rows || !D2 || !U2) return false;
    mcir_dtype dt;
    if (!ox_value_dtype(x, D, &dt)) return false;
    mcir_tensor *ins[3] = {ox_runtime(x, D2, dt), ox_runtime(x, rows, MCIR_DTYPE_I64),
                           ox_runtime(x, U2, dt)};
    if (!ins[0] || !ins[1] || !ins[2]) return false;
    mcir_node *nd = ox_emit1(x, MCIR_OP_INDEX_COPY, 3, ins, -1);
    mcir_node_set_int(x->g, nd, "axis", 0);
    mcir_tensor *t = ox_done(x, nd);
    if (!t) return false;
    return ox_reshape_to(x, ox_runtime_value(x, t), D->rank, D->shape, 0);
}

/* Trilu: where(mask, x, 0) with the constant triangle mask of the last two
 * dims (j − i ≥ k for upper, j − i ≤ k for lower). */
bool ox_import_trilu(ox *x, ox_value **in, int n_in) {
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
    ox_value *y = ox_where_step(x, mask, X, ox_scalar_of(x, X->elem, "zero", 0), 0);
    return y && ox_define_out(x, 0, y);
}

/* OneHot(indices, depth, values): where(indices' == range(depth), on, off)
 * along axis, a negative index counting from depth. depth and values
 * must be constants. */
bool ox_import_one_hot(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_value *I = in[0], *D = in[1], *V = in[2];
    int64_t axis = ox_attr_int(x, "axis", -1);
    if (x->failed) return false;
    if (!D->is_const || D->numel != 1) return ox_error(x, "depth must be a scalar constant");
    if (!V->is_const || V->numel != 2) return ox_error(x, "values must be a constant [off, on]");
    if (ox_is_float(I->elem)) { /* float indices are truncated to int64 */
        I = I->is_const ? ox_fold_cast(x, I, OX_INT64) : ox_cast_step(x, I, MCIR_DTYPE_I64, -1);
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
    ox_value *u = ox_reshape_step(x, I, I->rank + 1, ushape);
    ox_value *zero = ox_scalar_of(x, I->elem, "zero", 0);
    ox_value *wrapped = ox_ew_step(x, "Add", u, ox_scalar_of(x, I->elem, "depth", (double)depth), -1);
    u = ox_where_step(x, ox_ew_step(x, "Less", u, zero, -1), wrapped, u, -1);
    ox_value *off = ox_slice_step(x, V, 0, 0, 1, 1), *on = ox_slice_step(x, V, 0, 1, 1, 1);
    const int64_t scalar[1] = {1}; /* rank 0: no dims are read */
    ox_value *y = ox_where_step(x, ox_ew_step(x, "Equal", u, range, -1), ox_reshape_step(x, on, 0, scalar),
                                ox_reshape_step(x, off, 0, scalar), 0);
    return y && ox_define_out(x, 0, y);
}

/* GatherElements(data, indices, axis): out[i] = data[i with its axis
 * coordinate replaced by indices[i]], as one MCIR gather on the flattened
 * data: flat[i] = base[i] + idx[i]·stride(axis), base[i] the position of
 * i in data with that coordinate 0 (a constant; for runtime indices a sum
 * of one broadcast term per other axis). Negative indices count
 * from the end (where(idx < 0, idx + dim, idx)); a runtime index out of
 * range is the gather's error on the CPU, as for Gather. */
bool ox_import_gather_elements(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_value *D = in[0], *I = in[1];
    int ax;
    if (x->failed || !ox_norm_axis(x, ox_attr_int(x, "axis", 0), D->rank, "axis", &ax)) return false;
    if (I->elem != OX_INT32 && I->elem != OX_INT64)
        return ox_error(x, "indices '%s' must be int32 or int64, got %s", I->name, ox_elem_name(I->elem));
    if (I->rank != D->rank || D->rank < 1)
        return ox_error(x, "indices '%s' has rank %d and data '%s' rank %d: GatherElements needs one rank", I->name,
                        I->rank, D->name, D->rank);
    for (int k = 0; k < D->rank; k++)
        if (k != ax && I->shape[k] > D->shape[k])
            return ox_error(x, "indices '%s' has %lld in dim %d, data '%s' only %lld", I->name,
                            (long long)I->shape[k], k, D->name, (long long)D->shape[k]);
    if (I->numel == 0) return ox_error(x, "empty indices");
    int64_t st[MCIR_MAX_RANK], dim = D->shape[ax];
    st[D->rank - 1] = 1;
    for (int k = D->rank - 2; k >= 0; k--) st[k] = st[k + 1] * D->shape[k + 1];
    ox_value *flat;
    if (I->is_const) {
        ox_value *base = ox_const_new(x, OX_INT64, I->rank, I->shape);
        if (!base) return false;
        base->name = ox_fresh(x, "gather_elements_base");
        for (int64_t i = 0; i < I->numel; i++) {
            int64_t rem = i, off = 0;
            for (int k = I->rank - 1; k >= 0; k--) {
                int64_t c = rem % I->shape[k];
                rem /= I->shape[k];
                if (k != ax) off += c * st[k];
            }
            ox_seti(base, i, off);
        }
        flat = base;   /* the whole flat index, known now */
        for (int64_t i = 0; i < I->numel; i++) {
            int64_t v = I->iv[i];
            if (v < -dim || v >= dim)
                return ox_error(x, "index %lld is out of range for axis %d of size %lld", (long long)v, ax,
                                (long long)dim);
            ox_seti(flat, i, ox_geti(base, i) + (v < 0 ? v + dim : v) * st[ax]);
        }
    } else {
        ox_value *idx = I->elem == OX_INT32 ? ox_cast_step(x, I, MCIR_DTYPE_I64, -1) : I;
        ox_value *neg = ox_ew_step(x, "Less", idx, ox_scalar_of(x, OX_INT64, "zero", 0), -1);
        ox_value *wrapped = ox_ew_step(x, "Add", idx, ox_scalar_of(x, OX_INT64, "axis_size", (double)dim), -1);
        idx = ox_where_step(x, neg, wrapped, idx, -1);
        flat = ox_ew_step(x, "Mul", idx, ox_scalar_of(x, OX_INT64, "stride", (double)st[ax]), -1);
        /* base as one term per other axis, [1, .., n_k, .., 1] each (none
         * for an axis of one): so its shape is no constant's where the
         * indices' extent follows a symbolic dimension (BERT's token type
         * ids, [1, seq], from torch's dynamo export) */
        for (int k = 0; k < I->rank && flat; k++) {
            if (k == ax || I->shape[k] == 1) continue;
            int64_t tshape[MCIR_MAX_RANK];
            for (int j = 0; j < I->rank; j++) tshape[j] = j == k ? I->shape[k] : 1;
            ox_value *term = ox_const_new(x, OX_INT64, I->rank, tshape);
            if (!term) return false;
            term->name = ox_fresh(x, "gather_elements_base");
            for (int64_t c = 0; c < I->shape[k]; c++) ox_seti(term, c, c * st[k]);
            flat = ox_ew_step(x, "Add", flat, term, -1);
        }
    }
    int64_t n = D->numel;
    ox_value *Df = ox_reshape_step(x, D, 1, &n);
    if (!flat || !Df) return false;
    if (Df->is_const && flat->is_const) {
        ox_value *o = ox_fold_gather(x, Df, flat, 0);
        return o && ox_define_out(x, 0, o);
    }
    mcir_dtype dt;
    if (!ox_value_dtype(x, D, &dt)) return false;
    mcir_tensor *ins[2] = {ox_runtime(x, Df, dt), ox_runtime(x, flat, MCIR_DTYPE_I64)};
    if (!ins[0] || !ins[1]) return false;
    mcir_node *g = ox_emit1(x, MCIR_OP_GATHER, 2, ins, 0);
    mcir_node_set_int(x->g, g, "axis", 0);
    return ox_define_rt(x, 0, ox_done(x, g));
}

/* GatherND(data, indices, batch_dims b): indices [.., k] pick data's
 * [b, b + k) coordinates. One MCIR gather along axis 0 of data reshaped
 * to [B·M, inner..] (B the batch dims' product, M the picked dims'), its
 * row index batch·M + Σ_j idx[.., j]·s_j (s_j the picked dims' strides;
 * negative indices counted from the end), computed from the columns of
 * runtime indices (slices), or at import time for constant ones. */
/* An extent n (a stride, an axis size) as an int64 scalar operand. Probing
 * a symbolic dimension (symbolic.c), where n may follow it: computed at
 * run time as argmax(arange(0, n)) + 1, whose arange end the fit can
 * name (a scalar weight could not vary). */
static ox_value *extent_operand(ox *x, int64_t n, const char *stem) {
    if (!x->probing || n <= 1) return ox_scalar_of(x, OX_INT64, stem, (double)n);
    mcir_node *ar = ox_emit1(x, MCIR_OP_ARANGE, 0, NULL, -1);
    mcir_node_set_int(x->g, ar, "end", n);
    mcir_node_set_string(x->g, ar, "dtype", "i64");
    mcir_tensor *pos = ox_done(x, ar);
    if (!pos) return NULL;
    mcir_node *am = ox_emit1(x, MCIR_OP_ARGMAX, 1, &pos, -1);
    mcir_node_set_int(x->g, am, "axis", 0);
    mcir_node_set_bool(x->g, am, "keepdims", false);
    mcir_tensor *last = ox_done(x, am);
    if (!last) return NULL;
    return ox_ew_step(x, "Add", ox_runtime_value(x, last), ox_scalar_of(x, OX_INT64, "one", 1), -1);
}

bool ox_import_gather_nd(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_value *D = in[0], *I = in[1];
    int64_t b = ox_attr_int(x, "batch_dims", 0);
    if (x->failed) return false;
    if (I->elem != OX_INT32 && I->elem != OX_INT64)
        return ox_error(x, "indices '%s' must be int32 or int64, got %s", I->name, ox_elem_name(I->elem));
    if (I->rank < 1 || D->rank < 1) return ox_error(x, "data and indices need rank 1 or more");
    int q = I->rank, r = D->rank;
    int64_t k = I->shape[q - 1];
    if (b < 0 || b >= q || b >= r) return ox_error(x, "batch_dims %lld: data and indices have ranks %d and %d",
                                                   (long long)b, r, q);
    if (k < 1 || b + k > r)
        return ox_error(x, "indices '%s' pick %lld coordinates of data '%s' (rank %d, batch_dims %lld)", I->name,
                        (long long)k, D->name, r, (long long)b);
    for (int i = 0; i < b; i++)
        if (I->shape[i] != D->shape[i])
            return ox_error(x, "batch dim %d: indices '%s' has %lld, data '%s' %lld", i, I->name,
                            (long long)I->shape[i], D->name, (long long)D->shape[i]);
    int out_rank = q - 1 + (int)(r - b - k);
    if (out_rank > MCIR_MAX_RANK || out_rank < 1) return ox_error(x, "result rank %d is not supported", out_rank);
    if (I->numel == 0) return ox_error(x, "empty indices");
    int64_t M = 1, Bn = 1, s[MCIR_MAX_RANK];
    for (int i = 0; i < b; i++) Bn *= D->shape[i];
    for (int64_t j = k - 1; j >= 0; j--) {
        s[j] = M;
        M *= D->shape[b + j];
    }
    int64_t rows_shape[MCIR_MAX_RANK], n_rows = 1;
    for (int i = 0; i < q - 1; i++) n_rows *= (rows_shape[i] = I->shape[i]);
    /* the batch part of each row index (0 without batch dims) */
    ox_value *base = ox_const_new(x, OX_INT64, q - 1 > 0 ? q - 1 : 0, rows_shape);
    if (!base) return false;
    base->name = ox_fresh(x, "gather_nd_base");
    int64_t per_batch = n_rows / (Bn > 0 ? Bn : 1);
    for (int64_t p = 0; p < n_rows; p++) ox_seti(base, p, b ? (p / per_batch) * M : 0);
    ox_value *rows;
    if (I->is_const) {
        rows = base;
        for (int64_t p = 0; p < n_rows; p++) {
            int64_t acc = ox_geti(base, p);
            for (int64_t j = 0; j < k; j++) {
                int64_t v = I->iv[p * k + j], dim = D->shape[b + j];
                if (v < -dim || v >= dim)
                    return ox_error(x, "index %lld is out of range for dim %lld of size %lld", (long long)v,
                                    (long long)(b + j), (long long)dim);
                acc += (v < 0 ? v + dim : v) * s[j];
            }
            ox_seti(rows, p, acc);
        }
    } else {
        ox_value *idx = I->elem == OX_INT32 ? ox_cast_step(x, I, MCIR_DTYPE_I64, -1) : I;
        rows = NULL;
        int64_t col_shape[MCIR_MAX_RANK];
        memcpy(col_shape, rows_shape, sizeof(int64_t) * (size_t)(q - 1));
        for (int64_t j = 0; j < k && idx; j++) {
            ox_value *c = ox_slice_step(x, idx, q - 1, j, 1, 1);
            c = ox_reshape_step(x, c, q - 1, col_shape);
            ox_value *neg = ox_ew_step(x, "Less", c, ox_scalar_of(x, OX_INT64, "zero", 0), -1);
            ox_value *wrapped = ox_ew_step(x, "Add", c, extent_operand(x, D->shape[b + j], "dim_size"), -1);
            c = ox_where_step(x, neg, wrapped, c, -1);
            if (s[j] != 1) c = ox_ew_step(x, "Mul", c, extent_operand(x, s[j], "stride"), -1);
            rows = rows ? ox_ew_step(x, "Add", rows, c, -1) : c;
        }
        if (rows && b) rows = ox_ew_step(x, "Add", rows, base, -1);
    }
    int64_t dshape[MCIR_MAX_RANK];
    int dr = 0;
    dshape[dr++] = Bn * M;
    for (int i = (int)(b + k); i < r; i++) dshape[dr++] = D->shape[i];
    ox_value *Dr = ox_reshape_step(x, D, dr, dshape);
    if (!rows || !Dr) return false;
    if (q - 1 == 0) {   /* one index tuple: a rows tensor of one element */
        int64_t one = 1;
        rows = ox_reshape_step(x, rows, 1, &one);
        if (!rows) return false;
    }
    int64_t out_shape[MCIR_MAX_RANK];
    int o = 0;
    for (int i = 0; i < q - 1; i++) out_shape[o++] = I->shape[i];
    for (int i = (int)(b + k); i < r; i++) out_shape[o++] = D->shape[i];
    if (Dr->is_const && rows->is_const) {
        ox_value *g = ox_fold_gather(x, Dr, rows, 0);
        ox_value *res = g ? ox_reshape_step(x, g, o, out_shape) : NULL;
        return res && ox_define_out(x, 0, res);
    }
    mcir_dtype dt;
    if (!ox_value_dtype(x, D, &dt)) return false;
    mcir_tensor *ins[2] = {ox_runtime(x, Dr, dt), ox_runtime(x, rows, MCIR_DTYPE_I64)};
    if (!ins[0] || !ins[1]) return false;
    bool direct = q - 1 > 0;   /* the gather's shape is the result's */
    mcir_node *g = ox_emit1(x, MCIR_OP_GATHER, 2, ins, direct ? 0 : -1);
    mcir_node_set_int(x->g, g, "axis", 0);
    mcir_tensor *t = ox_done(x, g);
    if (!t) return false;
    if (direct) return ox_define_rt(x, 0, t);
    return ox_reshape_to(x, ox_runtime_value(x, t), o, out_shape, 0);
}
