/*
 * emit.c — the pieces every template shares: a string builder, the value
 * emitter (a region's elementwise, reshape, transpose, slice, concat and
 * split nodes become device functions v<ID>(i, acc) computing one element,
 * so intermediates are rematerialised, never stored; each op's body is
 * written by its entry of a table indexed by op) and their vector forms
 * vv<ID>(i, out) computing V consecutive elements (pointwise kernels a
 * vector at a time: the same statements lane by lane, 16-byte loads and
 * packed stores), strided views for transposes folded into a kernel's
 * loads and stores, and the kernel signature.
 *
 * Invariant: a value function returns exactly what the reference
 * interpreter stores for that element (same formula, rounded to the
 * tensor's storage dtype), up to f32 evaluation order and the SFU's
 * approximations (mc_exp2, mc_rcp, mc_rsqrt: 1-2 ulp); its type is the
 * tensor's value type (float, or i64 for integer and bool tensors: exact),
 * so a fused chain converts between them only at a cast. A vector form
 * gives each lane bit for bit what the value function gives.
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "kernelplan/launch.h"

/* cg_emitter.done, by tensor id: which of its value functions exist. */
enum { DONE_SCALAR = 1, DONE_VEC = 2, DONE_PACKED = 4, DONE_PAIR = 8 };

/* Packed mode (cg_emit_epilogue_packed: a GEMM epilogue whose sizes are
 * known and below 2^31): the index of a value is packed as (row << 32) |
 * column, row the flat index over every dim but the last, column the last
 * dim's. A broadcast's column is the column or 0 and its row is decoded
 * from the row alone in 32 bits; an operand that broadcasts over the rows
 * (a bias) gets the column itself, no division, and the same index (and
 * load) in every row of a thread. The functions are p<ID> (v<ID> stay the
 * flat ones: a tensor may have both); a tensor computed beside the
 * anchor's path (a bias's cast) is its flat v<ID>, called at the packed
 * index's flat value. pk_kp / pk_anchor: the plan and its anchor. */
static _Thread_local bool packed;
static _Thread_local const mcir_kernel_plan *pk_kp;
static _Thread_local const mcir_tensor *pk_anchor;

/* ------------------------------------------------------------ strings */

static void sb_reserve(cg_sb *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + extra + 1) cap *= 2;
    char *s = realloc(b->s, cap);
    MCIR_ASSERT(s != NULL);
    b->s = s;
    b->cap = cap;
}

void cg_sb_puts(cg_sb *b, const char *s) {
    size_t n = strlen(s);
    sb_reserve(b, n);
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

void cg_sb_printf(cg_sb *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    MCIR_ASSERT(n >= 0);
    sb_reserve(b, (size_t)n);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)n;
}

char *cg_sb_take(cg_sb *b) {
    char *s = b->s ? b->s : strdup("");
    b->s = NULL;
    b->len = b->cap = 0;
    return s;
}

void cg_sb_free(cg_sb *b) {
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

void cg_sb_float(cg_sb *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    cg_sb_printf(b, "__int_as_float(0x%08x)", u);
}

/* ------------------------------------------------- symbolic dimensions */

_Thread_local const mcir_graph *cg_dyn;
_Thread_local bool cg_exact_math;
_Thread_local bool cg_rebinding;
_Thread_local bool cg_dims_smem;

/* (a static __shared__ array of an inline function, as the templates
 * declare theirs: the emulator places them in one section alike) */
void cg_emit_sdims_decl(cg_sb *b) {
    if (cg_dyn)
        cg_sb_printf(b, "__device__ __forceinline__ i64* mc_sdims() {\n    __shared__ i64 s_[%d];\n    return s_;\n}\n",
                     cg_dyn->n_dims);
}

void cg_emit_sdims_fill(cg_sb *b) {
    if (!cg_dyn) return;
    cg_sb_puts(b, "    if (threadIdx.x == 0) {");
    for (int k = 0; k < cg_dyn->n_dims; k++) cg_sb_printf(b, " MC_SST(mc_sdims()[%d], mc_d%d);", k, k);
    cg_sb_puts(b, " }\n    __syncthreads();\n");
}

void cg_sb_ext(cg_sb *b, const mcir_extent *e, int64_t bound) {
    int64_t v;
    if (!cg_dyn || mcir_extent_is_const(e, &v)) {
        cg_sb_printf(b, "%lldLL", (long long)bound);
        return;
    }
    cg_sb_puts(b, "(");
    for (int i = 0; i < e->n_terms; i++) {
        const mcir_extent_term *t = &e->terms[i];
        long long c = (long long)t->coef;
        bool first = true;
        if (i && c >= 0) cg_sb_puts(b, "+");
        if (c == -1) cg_sb_puts(b, "-");
        else if (c != 1) { cg_sb_printf(b, "%lldLL", c); first = false; }
        for (int k = 0; k < MCIR_MAX_DIMS; k++)
            for (int p = 0; p < t->pow[k]; p++) {
                cg_sb_printf(b, cg_dims_smem ? "%sMC_SLD(mc_sdims()[%d])" : "%smc_d%d", first ? "" : "*", k);
                first = false;
            }
        if (first) cg_sb_puts(b, "1LL");
    }
    cg_sb_puts(b, ")");
}

void cg_sb_extent(cg_sb *b, const mcir_tensor *t, int i) {
    mcir_extent e = mcir_tensor_extent(t, i);
    cg_sb_ext(b, &e, t->shape[i]);
}

/* The product of t's extents from..rank-1 (false: it needs more terms than
 * an extent holds; *out is then unusable). */
static bool extent_product(const mcir_tensor *t, int from, mcir_extent *out) {
    *out = mcir_extent_const(1);
    for (int k = from; k < t->rank; k++) {
        mcir_extent e = mcir_tensor_extent(t, k), p;
        if (!mcir_extent_mul(out, &e, &p)) return false;
        *out = p;
    }
    return true;
}

void cg_sb_prod(cg_sb *b, const mcir_tensor *t, const bool *mask) {
    mcir_extent e = mcir_extent_const(1), p;
    int64_t v = 1;
    bool sym = true;
    for (int k = 0; k < t->rank; k++) {
        if (mask && !mask[k]) continue;
        v *= t->shape[k];
        mcir_extent x = mcir_tensor_extent(t, k);
        if (sym && mcir_extent_mul(&e, &x, &p)) e = p;
        else sym = false;
    }
    if (sym) cg_sb_ext(b, &e, v);
    else cg_sb_printf(b, "%lldLL", (long long)v);   /* the rebinding check finds it */
}

void cg_sb_numel(cg_sb *b, const mcir_tensor *t) {
    mcir_extent e;
    int64_t n = mcir_tensor_numel(t);
    if (cg_dyn && t->sym && extent_product(t, 0, &e)) cg_sb_ext(b, &e, n);
    else cg_sb_printf(b, "%lldLL", (long long)n);
}

void cg_sb_numel_sum(cg_sb *b, const mcir_tensor *const *ts, int n) {
    mcir_extent sum = mcir_extent_const(0), e, p;
    int64_t v = 0;
    bool sym = cg_dyn != NULL;
    for (int i = 0; i < n; i++) {
        v += mcir_tensor_numel(ts[i]);
        if (sym && extent_product(ts[i], 0, &e) && mcir_extent_add(&sum, &e, &p)) sum = p;
        else sym = false;
    }
    if (sym) cg_sb_ext(b, &sum, v);
    else cg_sb_printf(b, "%lldLL", (long long)v);
}

bool cg_tensor_dynamic(const mcir_tensor *t) {
    if (!cg_dyn || !t->sym) return false;
    for (int k = 0; k < t->rank; k++)
        if (!mcir_extent_is_const(&t->sym[k], NULL)) return true;
    return false;
}

/* Decisions the index emitters take on extents hold for every size: with
 * cg_dyn they compare the polynomials (an extent that is 1 only at some
 * sizes is not 1), else the integers as before. */
bool cg_extent_is_one(const mcir_tensor *t, int k) {
    if (!cg_dyn || !t->sym) return t->shape[k] == 1;
    int64_t v;
    return mcir_extent_is_const(&t->sym[k], &v) && v == 1;
}

bool cg_extents_equal(const mcir_tensor *a, int i, const mcir_tensor *c, int j) {
    if (!cg_dyn || (!a->sym && !c->sym)) return a->shape[i] == c->shape[j];
    mcir_extent x = mcir_tensor_extent(a, i), y = mcir_tensor_extent(c, j);
    return mcir_extent_equal(&x, &y);
}

/* A running stride: the product of extents so far, printed as C. */
typedef struct cg_stride {
    int64_t v;
    mcir_extent e;
    bool sym;   /* e is exact */
} cg_stride;

static cg_stride stride_one(void) { return (cg_stride){1, mcir_extent_const(1), true}; }

static void stride_mul(cg_stride *s, const mcir_tensor *t, int k) {
    s->v *= t->shape[k];
    mcir_extent e = mcir_tensor_extent(t, k), p;
    if (s->sym && mcir_extent_mul(&s->e, &e, &p)) s->e = p;
    else s->sym = false;
}

static void sb_stride(cg_sb *b, const cg_stride *s) {
    if (s->sym) cg_sb_ext(b, &s->e, s->v);
    else cg_sb_printf(b, "%lldLL", (long long)s->v);   /* the rebinding check finds it */
}

const char *cg_ctype(mcir_dtype t) {
    switch (t) {
    case MCIR_DTYPE_F32: return "float";
    case MCIR_DTYPE_I32: return "int";
    case MCIR_DTYPE_I64: return "long long";
    case MCIR_DTYPE_U8:
    case MCIR_DTYPE_BOOL: return "unsigned char";
    default: return "unsigned short";
    }
}

/* The suffix of the prelude's mc_ld_ / mc_st_ / mc_round_ for a dtype: its
 * name. */
const char *cg_dsuffix(mcir_dtype t) { return mcir_dtype_name(t); }

void cg_error(mcir_diag *d, const mcir_kernel_plan *kp, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mcir_loc loc = kp->anchor ? kp->anchor->loc : (mcir_loc){0};
    mcir_error(d, loc, "kernel %s: %s", kp->name ? kp->name : "?", msg);
}

void cg_begin_source(cg_sb *b, const mcir_kernel_plan *kp) {
    cg_sb_printf(b, "// mcir generated kernel %s (template %s)\n", kp->name,
                 cg_template_name(kp->tpl));
    cg_sb_printf(b, "// region:");
    for (int i = 0; i < kp->n_nodes; i++)
        cg_sb_printf(b, " %s(%s)", kp->nodes[i]->name, mcir_op_name(kp->nodes[i]->op));
    cg_sb_puts(b, "\n");
    cg_sb_puts(b, mcir_tpl_prelude);
    if (cg_kernel_has_ints(kp)) cg_sb_puts(b, mcir_tpl_prelude_int);
}

static bool int_tensor(const mcir_tensor *t) {
    return mcir_value_type_of(t->dtype) == MCIR_VALUE_I64;
}

bool cg_kernel_has_ints(const mcir_kernel_plan *kp) {
    for (int i = 0; i < kp->n_reads; i++)
        if (int_tensor(kp->reads[i])) return true;
    for (int i = 0; i < kp->n_writes; i++)
        if (int_tensor(kp->writes[i])) return true;
    for (int i = 0; i < kp->n_nodes; i++) {
        const mcir_node *n = kp->nodes[i];
        for (int j = 0; j < n->n_inputs; j++)
            if (int_tensor(n->inputs[j])) return true;
        for (int j = 0; j < n->n_outputs; j++)
            if (int_tensor(n->outputs[j])) return true;
    }
    return false;
}

const char *cg_vtype(mcir_dtype t) { return mcir_value_type_of(t) == MCIR_VALUE_I64 ? "i64" : "float"; }

/* ------------------------------------------------------------ regions */

int cg_read_index(const mcir_kernel_plan *kp, const mcir_tensor *t) {
    for (int i = 0; i < kp->n_reads; i++)
        if (kp->reads[i] == t) return i;
    return -1;
}

int cg_write_index(const mcir_kernel_plan *kp, const mcir_tensor *t) {
    for (int i = 0; i < kp->n_writes; i++)
        if (kp->writes[i] == t) return i;
    return -1;
}

bool cg_node_in_region(const mcir_kernel_plan *kp, const mcir_node *n) {
    for (int i = 0; i < kp->n_nodes; i++)
        if (kp->nodes[i] == n) return true;
    return false;
}

mcir_node *cg_region_producer(const mcir_kernel_plan *kp, const mcir_tensor *t) {
    if (t->producer && cg_node_in_region(kp, t->producer)) return t->producer;
    return NULL;
}

/* ------------------------------------------------------------- views */

void cg_view_contiguous(cg_view *v, const mcir_tensor *t) {
    memset(v, 0, sizeof *v);
    v->root = t;
    v->rank = t->rank;
    v->sym = true;
    v->soffset = mcir_extent_const(0);
    cg_stride s = stride_one();
    for (int i = t->rank - 1; i >= 0; i--) {
        v->shape[i] = t->shape[i];
        v->sshape[i] = mcir_tensor_extent(t, i);
        v->stride[i] = s.v;
        v->sstride[i] = s.e;
        v->sym = v->sym && s.sym;
        stride_mul(&s, t, i);
    }
}

bool cg_view_dim_is_one(const cg_view *v, int k) {
    int64_t c;
    if (!cg_dyn || !v->sym) return v->shape[k] == 1;
    return mcir_extent_is_const(&v->sshape[k], &c) && c == 1;
}

/* The view's extents after an op whose output is t (its shape). */
static void view_take_shape(cg_view *v, const mcir_tensor *t) {
    if (t->rank != v->rank) {
        v->sym = false;
        return;
    }
    for (int i = 0; i < t->rank; i++) v->sshape[i] = mcir_tensor_extent(t, i);
}

void cg_sb_view_stride(cg_sb *b, const cg_view *v, int k) {
    if (v->sym) cg_sb_ext(b, &v->sstride[k], v->stride[k]);
    else cg_sb_printf(b, "%lldLL", (long long)v->stride[k]);
}

void cg_sb_view_offset(cg_sb *b, const cg_view *v) {
    if (v->sym) cg_sb_ext(b, &v->soffset, v->offset);
    else cg_sb_printf(b, "%lldLL", (long long)v->offset);
}

/* The first element of slice node n on `axis` of `in`, as a polynomial:
 * a start that names a dimension is that dimension, a negative one counts
 * from the extent's end (the dims rules hold it inside for every size). */
static mcir_extent slice_first(const mcir_node *n, const mcir_tensor *in, int axis, int64_t first) {
    const mcir_attr *a = mcir_node_attr(n, "start");
    if (cg_dyn && a && a->dim_of && a->dim_of[0] >= 0) return mcir_attr_extent(a, 0);
    int64_t c = mcir_node_int(n, "start");
    mcir_extent e = mcir_tensor_extent(in, axis), k = mcir_extent_const(c), out;
    if (cg_dyn && c < 0 && !mcir_extent_is_const(&e, NULL) && mcir_extent_add(&e, &k, &out)) return out;
    return mcir_extent_const(first);
}

/* v's symbolic offset += by * stride k (false: too many terms). */
static bool view_shift(cg_view *v, mcir_extent by, int k) {
    mcir_extent p, q;
    return v->sym && mcir_extent_mul(&by, &v->sstride[k], &p) && mcir_extent_add(&v->soffset, &p, &q) &&
           (v->soffset = q, true);
}

/* NumPy's _attempt_nocopy_reshape, over dims of size > 1. */
bool cg_view_reshape(cg_view *v, int rank, const int64_t *shape) {
    return cg_view_reshape_to(v, rank, shape, NULL, NULL);
}

/* The product of t's extents [from, to) (false: too many terms). */
static bool extent_range(const mcir_tensor *t, const int *idx, int from, int to, mcir_extent *out) {
    *out = mcir_extent_const(1);
    for (int k = from; k < to; k++) {
        mcir_extent e = mcir_tensor_extent(t, idx[k]), p;
        if (!mcir_extent_mul(out, &e, &p)) return false;
        *out = p;
    }
    return true;
}

bool cg_view_reshape_to(cg_view *v, int rank, const int64_t *shape, const mcir_tensor *t,
                        const mcir_tensor *from) {
    int64_t oshape[MCIR_MAX_RANK], ostride[MCIR_MAX_RANK];
    mcir_extent osstride[MCIR_MAX_RANK], nsstride[MCIR_MAX_RANK];
    /* symbolic strides need the extents on both sides: t's and from's,
     * whose shapes are the view's before and after */
    bool sym = v->sym && t && from && t->rank == rank && from->rank == v->rank;
    for (int i = 0; sym && i < v->rank; i++) sym = from->shape[i] == v->shape[i];
    /* dims of extent 1 are left out: with symbols, those that are 1 for
     * every size (one that is 1 at this size only keeps its stride) */
    bool skip_old[MCIR_MAX_RANK];
    for (int i = 0; i < v->rank; i++) {
        int64_t c;
        mcir_extent e = sym ? mcir_tensor_extent(from, i) : mcir_extent_const(v->shape[i]);
        skip_old[i] = v->shape[i] == 1 && (!sym || (mcir_extent_is_const(&e, &c) && c == 1));
    }
    int on = 0, oidx[MCIR_MAX_RANK];
    for (int i = 0; i < v->rank; i++)
        if (!skip_old[i]) {
            oshape[on] = v->shape[i];
            osstride[on] = v->sstride[i];
            oidx[on] = i;
            ostride[on++] = v->stride[i];
        }
    /* the new dims: all of them (NumPy), or with symbols those not 1 for
     * every size — the others take stride 0 */
    int nidx[MCIR_MAX_RANK], nn = 0;
    bool one_new[MCIR_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        int64_t c;
        mcir_extent e = sym ? mcir_tensor_extent(t, i) : mcir_extent_const(shape[i]);
        one_new[i] = shape[i] == 1 && (!sym || (mcir_extent_is_const(&e, &c) && c == 1));
        if (!(sym && one_new[i])) nidx[nn++] = i;
    }
    int64_t nstride[MCIR_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        nstride[i] = 1;
        nsstride[i] = mcir_extent_const(0);
    }
    int oi = 0, oj = 1, ni = 0, nj = 1;
    while (ni < nn && oi < on) {
        int64_t np = shape[nidx[ni]], op = oshape[oi];
        while (np != op) {
            if (np < op) {
                if (nj >= nn) return false;
                np *= shape[nidx[nj++]];
            } else {
                if (oj >= on) return false;
                op *= oshape[oj++];
            }
        }
        for (int ok = oi; ok < oj - 1; ok++)
            if (ostride[ok] != oshape[ok + 1] * ostride[ok + 1]) return false;
        nstride[nidx[nj - 1]] = ostride[oj - 1];
        for (int nk = nj - 1; nk > ni; nk--) nstride[nidx[nk - 1]] = nstride[nidx[nk]] * shape[nidx[nk]];
        if (sym) {   /* the same strides as polynomials, where the groups agree for every size */
            mcir_extent go, gn;
            sym = extent_range(from, oidx, oi, oj, &go) && extent_range(t, nidx, ni, nj, &gn) &&
                  mcir_extent_equal(&go, &gn);
        }
        if (sym) {
            nsstride[nidx[nj - 1]] = osstride[oj - 1];
            for (int nk = nj - 1; nk > ni && sym; nk--) {
                mcir_extent e = mcir_tensor_extent(t, nidx[nk]);
                sym = mcir_extent_mul(&nsstride[nidx[nk]], &e, &nsstride[nidx[nk - 1]]);
            }
        }
        ni = nj++;
        oi = oj++;
    }
    if (oi < on) sym = false;   /* old dims left over (1 at this size only): no symbolic strides */
    /* trailing dims of size 1 */
    for (int i = ni; i < nn; i++) {
        if (shape[nidx[i]] != 1) return false;
        if (sym) {   /* one that is 1 at this size only has no stride here */
            int64_t c;
            mcir_extent e = mcir_tensor_extent(t, nidx[i]);
            sym = mcir_extent_is_const(&e, &c) && c == 1;
        }
    }
    v->rank = rank;
    v->sym = sym;
    for (int i = 0; i < rank; i++) {
        v->shape[i] = shape[i];
        v->stride[i] = one_new[i] ? 0 : nstride[i];   /* (1 at every size: no stride) */
        v->sstride[i] = sym ? nsstride[i] : mcir_extent_const(0);
        v->sshape[i] = sym ? mcir_tensor_extent(t, i) : mcir_extent_const(shape[i]);
    }
    return true;
}

bool cg_view_of_input(const mcir_kernel_plan *kp, const mcir_tensor *t, cg_view *v) {
    if (cg_read_index(kp, t) >= 0) {
        cg_view_contiguous(v, t);
        return true;
    }
    mcir_node *n = cg_region_producer(kp, t);
    if (!n || n->n_inputs < 1) return false;
    if (!cg_view_of_input(kp, n->inputs[0], v)) return false;
    switch (n->op) {
    case MCIR_OP_RESHAPE:
        return cg_view_reshape_to(v, t->rank, t->shape, t, n->inputs[0]);
    case MCIR_OP_TRANSPOSE: {
        const int64_t *perm;
        int np = mcir_node_ints(n, "perm", &perm);
        if (np != v->rank) return false;
        cg_view o = *v;
        for (int k = 0; k < np; k++) {
            int p = (int)(perm[k] < 0 ? perm[k] + np : perm[k]);
            o.shape[k] = v->shape[p];
            o.stride[k] = v->stride[p];
            o.sstride[k] = v->sstride[p];
            o.sshape[k] = v->sshape[p];
        }
        *v = o;
        return true;
    }
    case MCIR_OP_SLICE: {
        int axis;
        if (!mcir_norm_axis(mcir_node_int(n, "axis"), v->rank, &axis)) return false;
        int64_t first, len, step = mcir_node_int(n, "step");
        mcir_slice_range(v->shape[axis], mcir_node_int(n, "start"),
                         mcir_node_int(n, "end"), step, &first, &len);
        v->sym = view_shift(v, slice_first(n, n->inputs[0], axis, first), axis);
        v->offset += first * v->stride[axis];
        v->stride[axis] *= step;
        mcir_extent st = mcir_extent_const(step), p;
        v->sym = v->sym && mcir_extent_mul(&v->sstride[axis], &st, &p);
        if (v->sym) v->sstride[axis] = p;
        v->shape[axis] = len;
        view_take_shape(v, t);
        return true;
    }
    case MCIR_OP_SPLIT: {   /* output k starts after the sizes before it */
        int axis;
        if (!mcir_norm_axis(mcir_node_int(n, "axis"), v->rank, &axis)) return false;
        const int64_t *sizes;
        int ns = mcir_node_ints(n, "sizes", &sizes);
        int64_t off = 0;
        for (int k = 0; k < n->n_outputs && k < ns; k++) {
            if (n->outputs[k] == t) {
                v->sym = view_shift(v, mcir_extent_const(off), axis);
                v->offset += off * v->stride[axis];
                v->shape[axis] = sizes[k];
                view_take_shape(v, t);
                return true;
            }
            off += sizes[k];
        }
        return false;
    }
    default:
        return false;
    }
}

/* The single region consumer of t, or NULL. */
static mcir_node *region_consumer(const mcir_kernel_plan *kp, const mcir_tensor *t, int *count) {
    mcir_node *found = NULL;
    *count = 0;
    for (int i = 0; i < kp->n_nodes; i++)
        for (int j = 0; j < kp->nodes[i]->n_inputs; j++)
            if (kp->nodes[i]->inputs[j] == t) {
                if (!found || found != kp->nodes[i]) (*count)++;
                found = kp->nodes[i];
            }
    return found;
}

bool cg_view_of_output(const mcir_kernel_plan *kp, const mcir_tensor *t, cg_view *v) {
    if (cg_write_index(kp, t) >= 0) {
        cg_view_contiguous(v, t);
        return true;
    }
    int count;
    mcir_node *n = region_consumer(kp, t, &count);
    if (!n || count != 1 || n->n_outputs != 1) return false;
    if (!cg_view_of_output(kp, n->outputs[0], v)) return false;
    switch (n->op) {
    case MCIR_OP_RESHAPE:
        return cg_view_reshape_to(v, t->rank, t->shape, t, n->outputs[0]);
    case MCIR_OP_TRANSPOSE: {
        /* out[k] = in[perm[k]]: the input's dim perm[k] has out's stride k. */
        const int64_t *perm;
        int np = mcir_node_ints(n, "perm", &perm);
        if (np != v->rank) return false;
        cg_view o = *v;
        for (int k = 0; k < np; k++) {
            int p = (int)(perm[k] < 0 ? perm[k] + np : perm[k]);
            o.shape[p] = v->shape[k];
            o.stride[p] = v->stride[k];
            o.sstride[p] = v->sstride[k];
            o.sshape[p] = v->sshape[k];
        }
        *v = o;
        return true;
    }
    default:
        return false;
    }
}

/* ------------------------------------------------------------ emitter */

void cg_emitter_init(cg_emitter *e, const mcir_kernel_plan *kp, cg_sb *sb,
                     const mcir_tensor *anchor_out, mcir_diag *d) {
    memset(e, 0, sizeof *e);
    e->kp = kp;
    e->sb = sb;
    e->anchor_out = anchor_out;
    e->d = d;
    e->ok = true;
    int maxid = 0;
    for (int i = 0; i < kp->n_reads; i++) if (kp->reads[i]->id > maxid) maxid = kp->reads[i]->id;
    for (int i = 0; i < kp->n_writes; i++) if (kp->writes[i]->id > maxid) maxid = kp->writes[i]->id;
    for (int i = 0; i < kp->n_nodes; i++) {
        mcir_node *n = kp->nodes[i];
        for (int j = 0; j < n->n_inputs; j++) if (n->inputs[j]->id > maxid) maxid = n->inputs[j]->id;
        for (int j = 0; j < n->n_outputs; j++) if (n->outputs[j]->id > maxid) maxid = n->outputs[j]->id;
    }
    e->n_tensors = maxid + 1;
    e->done = calloc((size_t)e->n_tensors, 1);
    MCIR_ASSERT(e->done != NULL);

    cg_sb_puts(sb, "#define MC_PARAMS ");
    const char *sep = "";
    for (int i = 0; i < kp->n_reads; i++) {
        cg_sb_printf(sb, "%sconst %s* r%d", sep, cg_ctype(kp->reads[i]->dtype), i);
        sep = ", ";
    }
    for (int i = 0; i < kp->n_writes; i++) {
        cg_sb_printf(sb, "%s%s* w%d", sep, cg_ctype(kp->writes[i]->dtype), i);
        sep = ", ";
    }
    if (!*sep) cg_sb_puts(sb, "int mc_unused_");
    for (int k = 0; cg_dyn && k < cg_dyn->n_dims; k++) cg_sb_printf(sb, ", const i64 mc_d%d", k);
    cg_sb_puts(sb, "\n#define MC_ARGS ");
    sep = "";
    for (int i = 0; i < kp->n_reads; i++) { cg_sb_printf(sb, "%sr%d", sep, i); sep = ", "; }
    for (int i = 0; i < kp->n_writes; i++) { cg_sb_printf(sb, "%sw%d", sep, i); sep = ", "; }
    if (!*sep) cg_sb_puts(sb, "0");
    for (int k = 0; cg_dyn && k < cg_dyn->n_dims; k++) cg_sb_printf(sb, ", mc_d%d", k);
    cg_sb_puts(sb, "\n");
    if (cg_dyn) {   /* the dims alone, for helpers that take no pointers */
        cg_sb_puts(sb, "#define MC_DIMS_PARAMS");
        for (int k = 0; k < cg_dyn->n_dims; k++) cg_sb_printf(sb, ", const i64 mc_d%d", k);
        cg_sb_puts(sb, "\n#define MC_DIMS_ARGS");
        for (int k = 0; k < cg_dyn->n_dims; k++) cg_sb_printf(sb, ", mc_d%d", k);
        cg_sb_puts(sb, "\n");
    } else {
        cg_sb_puts(sb, "#define MC_DIMS_PARAMS\n#define MC_DIMS_ARGS\n");
    }
}

void cg_emitter_free(cg_emitter *e) {
    free(e->done);
    e->done = NULL;
}

void cg_emit_signature(cg_sb *b, const mcir_kernel_plan *kp, int threads) { cg_emit_signature_cluster(b, kp, threads, 1); }

void cg_emit_signature_cluster(cg_sb *b, const mcir_kernel_plan *kp, int threads, int cluster) {
    cg_sb_puts(b, "extern \"C\" __global__ void ");
    if (cluster > 1) cg_sb_printf(b, "__cluster_dims__(%d, 1, 1) ", cluster);
    if (kp->launch_min_blocks > 0)
        cg_sb_printf(b, "__launch_bounds__(%d, %d) %s(MC_PARAMS)", threads, kp->launch_min_blocks, kp->name);
    else
        cg_sb_printf(b, "__launch_bounds__(%d) %s(MC_PARAMS)", threads, kp->name);
}

/* Writes statements computing `i64 DST` (linear index into `in`'s shape)
 * from `src` (linear index into out's shape), broadcasting right-aligned. */
static void emit_bcast_index(cg_sb *b, const mcir_tensor *out, const mcir_tensor *in,
                             const char *src, const char *dst) {
    int orank = out->rank;
    bool same = in->rank <= orank, in_one = true;
    for (int k = 0; k < in->rank; k++) in_one = in_one && cg_extent_is_one(in, k);
    if (same) {
        /* same extents right-aligned, the ones before them 1: the linear index is the same */
        for (int k = 0; k < in->rank; k++)
            if (!cg_extents_equal(in, in->rank - 1 - k, out, orank - 1 - k)) same = false;
        for (int k = 0; k < orank - in->rank; k++)
            if (!cg_extent_is_one(out, k)) same = false;
    }
    if (same) {
        cg_sb_printf(b, "    i64 %s = %s;\n", dst, src);
        return;
    }
    if (in_one) {
        cg_sb_printf(b, "    i64 %s = 0;\n", dst);
        return;
    }
    if (packed) {   /* (row << 32) | column into `in`: the column kept or 0, the row decoded in 32 bits */
        bool col = in->rank > 0 && in->shape[in->rank - 1] != 1, rows = false;
        for (int k = 0; k + 1 < in->rank; k++) rows = rows || in->shape[k] != 1;
        if (!rows) {   /* one row (a bias): the column or 0 */
            if (col) cg_sb_printf(b, "    i64 %s = (i64)(u32)(%s);\n", dst, src);
            else cg_sb_printf(b, "    i64 %s = 0;\n", dst);
            return;
        }
        cg_sb_printf(b, "    i64 %s; { u32 q_ = (u32)((u64)(%s) >> 32), o_ = 0, s_ = 1;\n", dst, src);
        for (int k = orank - 2; k >= 0; k--) {
            int ik = k - (orank - in->rank);
            cg_sb_puts(b, "     ");
            if (ik >= 0 && in->shape[ik] != 1) cg_sb_printf(b, " o_ += (q_ %% %uu) * s_;", (unsigned)out->shape[k]);
            if (k > 0) cg_sb_printf(b, " q_ /= %uu;", (unsigned)out->shape[k]);
            if (ik >= 0) cg_sb_printf(b, " s_ *= %uu;", (unsigned)in->shape[ik]);
            cg_sb_puts(b, "\n");
        }
        cg_sb_printf(b, "      (void)q_; (void)s_; %s = (i64)(((u64)o_ << 32) | ", dst);
        if (col) cg_sb_printf(b, "(u32)(%s)); }\n", src);
        else cg_sb_puts(b, "0u); }\n");
        return;
    }
    if (!cg_tensor_dynamic(out) && !cg_tensor_dynamic(in) && mcir_tensor_numel(out) < ((int64_t)1 << 31)) {
        /* sizes known here and an index below 2^31: the divisions and
         * remainders by the extents in 32 bits (a multiply-high and a
         * shift each, where 64 bits take a dozen instructions: a GEMM
         * epilogue's bias index per element, #44) */
        cg_sb_printf(b, "    i64 %s = 0; { u32 q_ = (u32)(%s); i64 s_ = 1;\n", dst, src);
        for (int k = orank - 1; k >= 0; k--) {
            int ik = k - (orank - in->rank);
            cg_sb_puts(b, "     ");
            if (ik >= 0 && in->shape[ik] != 1)
                cg_sb_printf(b, " %s += (i64)(q_ %% %uu) * s_;", dst, (unsigned)out->shape[k]);
            if (k > 0) cg_sb_printf(b, " q_ /= %uu;", (unsigned)out->shape[k]);
            if (ik >= 0) cg_sb_printf(b, " s_ *= %lldLL;", (long long)in->shape[ik]);
            cg_sb_puts(b, "\n");
        }
        cg_sb_puts(b, "      (void)s_; }\n");
        return;
    }
    cg_sb_printf(b, "    i64 %s = 0; { i64 q_ = %s; i64 s_ = 1;\n", dst, src);
    for (int k = orank - 1; k >= 0; k--) {
        cg_sb_puts(b, "     ");
        cg_emit_bcast_step(b, dst, "q_", "s_", out, k, in, k - (orank - in->rank), k > 0);
    }
    cg_sb_puts(b, "      (void)s_; }\n");
}

void cg_emit_bcast_step(cg_sb *b, const char *acc, const char *q, const char *s, const mcir_tensor *out, int k,
                        const mcir_tensor *in, int ik, bool divide) {
    if (ik >= 0 && !cg_extent_is_one(in, ik)) {
        cg_sb_printf(b, " %s += (%s %% ", acc, q);
        cg_sb_extent(b, out, k);
        cg_sb_printf(b, ") * %s;", s);
    }
    if (divide) {
        cg_sb_printf(b, " %s /= ", q);
        cg_sb_extent(b, out, k);
        cg_sb_puts(b, ";");
    }
    if (ik >= 0) {
        cg_sb_printf(b, " %s *= ", s);
        cg_sb_extent(b, in, ik);
        cg_sb_puts(b, ";");
    }
    cg_sb_puts(b, "\n");
}

/* Declares i64 c0..c{r-1}: coordinates of linear index `src` in shape. */
static void emit_coords(cg_sb *b, const mcir_tensor *t, const char *src) {
    cg_sb_printf(b, "    i64 q_ = %s;\n", src);
    for (int k = t->rank - 1; k >= 0; k--) {
        cg_sb_printf(b, "    i64 c%d = q_ %% ", k);
        cg_sb_extent(b, t, k);
        cg_sb_puts(b, "; q_ /= ");
        cg_sb_extent(b, t, k);
        cg_sb_puts(b, ";\n");
    }
    cg_sb_puts(b, "    (void)q_;\n");
}

/* Linear index of coordinates c0.. (with c<axis> replaced by `axis_expr`)
 * in tensor t. */
static void emit_linear(cg_sb *b, const mcir_tensor *t, const char *dst, int axis,
                        const char *axis_expr, const int *perm_src) {
    cg_sb_printf(b, "    i64 %s = 0", dst);
    cg_stride s = stride_one();
    for (int k = t->rank - 1; k >= 0; k--) {
        if (perm_src)
            cg_sb_printf(b, " + c%d * ", perm_src[k]);
        else if (k == axis)
            cg_sb_printf(b, " + (%s) * ", axis_expr);
        else
            cg_sb_printf(b, " + c%d * ", k);
        sb_stride(b, &s);
        stride_mul(&s, t, k);
    }
    cg_sb_puts(b, ";\n");
}

/* ----------------------------------------------------- value emitters */

/* One op's part of a value function v<ID>: statements declaring r_,
 * element i of t (an output of n) before rounding to t's dtype, computed
 * exactly as the reference interpreter does (mcir/ref.c, mcir/ops_int.c).
 * Every value has its tensor's value type (cg_vtype: float, or i64 for
 * integer and bool tensors), so a chain converts only at a cast.
 * cg_emit_value writes the function around them. `expr` is the table
 * entry's own piece of CUDA for float operands, `iexpr` for integer ones,
 * for emitters shared by a family of ops (NULL: the op takes no such
 * operands). */
typedef void (*value_emit_fn)(cg_sb *b, const mcir_node *n, const mcir_tensor *t,
                              const char *expr);

typedef struct value_emitter {
    value_emit_fn emit;
    const char *expr, *iexpr;
} value_emitter;

/* Lane mode (cg_emit_value_vec): the op's statements run inside a loop
 * over the lanes u of a vector, each operand j read from the array a<j>_
 * the vector function filled (a<j>_[u]) instead of a v<ID>(j) call. The
 * elementwise ops' emitters honour it; the others never run in it. */
static _Thread_local bool lanes;

/* Remap mode (cg_emit_value_vec of a transpose, slice, split, concat or
 * gather with a vector form, mcir_vector_remap): the emitter computes its
 * operand's index j0 for the vector's first element as usual, then takes
 * the operand's vector there (vv<ID>(j0, out)) instead of one value. */
static _Thread_local bool remap_vec;


/* The flat index of packed index expression j into tensor t. */
static void sb_pk_flat(cg_sb *b, const mcir_tensor *t, const char *j) {
    if (t->rank == 0) cg_sb_puts(b, "0");
    else cg_sb_printf(b, "((i64)((u64)(%s) >> 32) * %lldLL + (i64)(u32)(%s))", j, (long long)t->shape[t->rank - 1], j);
}

/* Whether t's packed value function is p<ID> (the anchor, a tensor on its
 * path, a read) rather than its flat v<ID> (computed beside the path). */
static bool pk_own(const mcir_tensor *t) {
    return t == pk_anchor || !cg_region_producer(pk_kp, t) || cg_depends_on(pk_kp, t, pk_anchor);
}

/* The call of operand t's value at index j (an expression): v<ID>(j), in
 * packed mode p<ID>(j) or v<ID>(flat j). */
static void sb_operand(cg_sb *b, const mcir_tensor *t, const char *j) {
    if (!packed) {
        cg_sb_printf(b, "v%d(%s, acc, MC_ARGS)", t->id, j);
    } else if (pk_own(t)) {
        cg_sb_printf(b, "p%d(%s, acc, MC_ARGS)", t->id, j);
    } else {
        cg_sb_printf(b, "v%d(", t->id);
        sb_pk_flat(b, t, j);
        cg_sb_puts(b, ", acc, MC_ARGS)");
    }
}

/* The operand's value at j0: r_ = v<ID>(j0) (decl: declare r_), or in
 * remap mode its vector into out. */
static void emit_fetch(cg_sb *b, const mcir_tensor *t, const mcir_tensor *in, bool decl, const char *pad) {
    if (remap_vec) cg_sb_printf(b, "%svv%d(j0, out, MC_ARGS);\n", pad, in->id);
    else {
        if (decl) cg_sb_printf(b, "%s%s r_ = ", pad, cg_vtype(t->dtype));
        else cg_sb_printf(b, "%sr_ = ", pad);
        sb_operand(b, in, "j0");
        cg_sb_puts(b, ";\n");
    }
}

/* The expression of entry ve for n's operands (integer or float). */
/* The exact forms (cg_exact_math: mcirc --exact-math) of the float
 * expressions that take the SFU's approximations: the reference
 * interpreter's own formulas (mcir/ref.c), through CUDA's libm (expf: 2
 * ulp) and IEEE division and square root (correctly rounded). */
static const char *exact_expr(mcir_op op) {
    switch (op) {
    case MCIR_OP_DIV: return "x_ / y_";
    case MCIR_OP_SIGMOID: return "1.0f / (1.0f + expf(-x_))";
    case MCIR_OP_EXP: return "expf(x_)";
    case MCIR_OP_RSQRT: return "1.0f / sqrtf(x_)";
    case MCIR_OP_RECIPROCAL: return "1.0f / x_";
    case MCIR_OP_SILU: return "x_ / (1.0f + expf(-x_))";
    default: return NULL;
    }
}

static const char *operand_expr(const value_emitter *ve, const mcir_node *n) {
    const bool ints = n->n_inputs > 0 && int_tensor(n->inputs[0]);
    const char *e = ints ? ve->iexpr : ve->expr;
    MCIR_ASSERT(e != NULL);   /* inference admits only the dtypes the op computes */
    if (cg_exact_math && !ints && exact_expr(n->op)) return exact_expr(n->op);
    return e;
}

/* Declares x_: the operand of a unary op, broadcast to t. */
static void emit_unary_operand(cg_sb *b, const mcir_node *n, const mcir_tensor *t) {
    if (lanes) {
        cg_sb_printf(b, "    %s x_ = a0_[u];\n", cg_vtype(n->inputs[0]->dtype));
        return;
    }
    emit_bcast_index(b, t, n->inputs[0], "i", "j0");
    cg_sb_printf(b, "    %s x_ = ", cg_vtype(n->inputs[0]->dtype));
    sb_operand(b, n->inputs[0], "j0");
    cg_sb_puts(b, ";\n");
}

/* Unary elementwise: expr is a function of x_. */
static void emit_unary(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    emit_unary_operand(b, n, t);
    cg_sb_printf(b, "    %s r_ = %s;\n", cg_vtype(t->dtype), expr);
}

/* ~x, and on bool the logical not (NumPy's ~True is False). */
static void emit_bitwise_not(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    emit_unary(b, n, t, t->dtype == MCIR_DTYPE_BOOL ? "x_ ^ 1" : "~x_");
}

static void emit_scale(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    emit_unary_operand(b, n, t);
    cg_sb_puts(b, "    float r_ = x_ * ");
    cg_sb_float(b, (float)mcir_node_float(n, "value"));
    cg_sb_puts(b, ";\n");
}

/* The tanh form as x * sigmoid(2z) (= 0.5 x (1 + tanh z), z = sqrt(2/pi)
 * (x + 0.044715 x^3)): one exp2 and one reciprocal, no cancellation; the
 * erf form through erff (a polynomial, no division). */
static void emit_gelu(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    emit_unary_operand(b, n, t);
    if (strcmp(mcir_node_string(n, "approximate"), "tanh") != 0) {
        cg_sb_puts(b, "    float r_ = 0.5f * x_ * (1.0f + erff(x_ * 0.70710678118654752f));\n");
        return;
    }
    if (cg_exact_math) {   /* the interpreter's form */
        cg_sb_puts(b, "    float r_ = 0.5f * x_ * (1.0f + tanhf(0.79788456080286536f * (x_ + 0.044715f * x_ * x_ * x_)));\n");
        return;
    }
    /* the exponent c (x + 0.044715 x^3) as x (c + 0.044715 c x^2): one FMUL
     * for x^2, one FFMA, one FMUL (c = -2 sqrt(2/pi) log2(e) folded into the
     * constants: a multiply an element fewer than c (x + 0.044715 x x x)) */
    const double c = -2.0 * 0.79788456080286536 * 1.4426950408889634;
    cg_sb_puts(b, "    float r_ = x_ * mc_rcp(1.0f + mc_exp2(x_ * fmaf(x_ * x_, ");
    cg_sb_float(b, (float)(c * 0.044715));
    cg_sb_puts(b, ", ");
    cg_sb_float(b, (float)c);
    cg_sb_puts(b, ")));\n");
}

/* Declares x_ and y_: the operands of a binary op, broadcast to t. */
static void emit_binary_operands(cg_sb *b, const mcir_node *n, const mcir_tensor *t) {
    if (lanes) {
        cg_sb_printf(b, "    %s x_ = a0_[u];\n    %s y_ = a1_[u];\n", cg_vtype(n->inputs[0]->dtype),
                     cg_vtype(n->inputs[1]->dtype));
        return;
    }
    emit_bcast_index(b, t, n->inputs[0], "i", "j0");
    emit_bcast_index(b, t, n->inputs[1], "i", "j1");
    cg_sb_printf(b, "    %s x_ = ", cg_vtype(n->inputs[0]->dtype));
    sb_operand(b, n->inputs[0], "j0");
    cg_sb_printf(b, ";\n    %s y_ = ", cg_vtype(n->inputs[1]->dtype));
    sb_operand(b, n->inputs[1], "j1");
    cg_sb_puts(b, ";\n");
}

/* Binary elementwise and comparisons: expr is a function of x_ and y_. */
static void emit_binary(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    emit_binary_operands(b, n, t);
    cg_sb_printf(b, "    %s r_ = %s;\n", cg_vtype(t->dtype), expr);
}

/* Shifts count in the bits of the operands' dtype (NumPy). */
static void emit_shift(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    emit_binary_operands(b, n, t);
    cg_sb_printf(b, "    i64 r_ = %s(x_, y_, %d);\n", expr, (int)mcir_dtype_size(t->dtype) * 8);
}

/* mod: integers by mc_imod / mc_ifmod; floats as NumPy's np.mod / np.fmod
 * (the sign of the divisor, or of the dividend with fmod). */
static void emit_mod(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    bool fm = mcir_node_bool(n, "fmod");
    emit_binary_operands(b, n, t);
    if (int_tensor(t)) {
        cg_sb_printf(b, "    i64 r_ = %s(x_, y_);\n", fm ? "mc_ifmod" : "mc_imod");
        return;
    }
    cg_sb_puts(b, "    float r_ = fmodf(x_, y_);\n");
    if (!fm)
        cg_sb_puts(b, "    if (y_ != 0.0f) r_ = r_ != 0.0f ? ((y_ < 0.0f) != (r_ < 0.0f) ? r_ + y_ : r_)"
                      " : copysignf(0.0f, y_);\n");
}

/* Float to float keeps the f32 value (rounding to t's dtype does the
 * rest); integer to integer wraps (mc_round_<dtype> of the result);
 * integer to float rounds to nearest; float to integer truncates and
 * saturates (mc_f2i_<dtype>). */
static void emit_cast(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    const mcir_tensor *x = n->inputs[0];
    bool xi = int_tensor(x), ti = int_tensor(t);
    if (lanes) cg_sb_printf(b, "    %s x_ = a0_[u];\n", cg_vtype(x->dtype));
    else {
        cg_sb_printf(b, "    %s x_ = ", cg_vtype(x->dtype));
        sb_operand(b, x, "i");
        cg_sb_puts(b, ";\n");
    }
    if (xi == ti)
        cg_sb_printf(b, "    %s r_ = x_;\n", cg_vtype(t->dtype));
    else if (xi)
        cg_sb_puts(b, "    float r_ = (float)x_;\n");
    else
        cg_sb_printf(b, "    i64 r_ = mc_f2i_%s(x_);\n", cg_dsuffix(t->dtype));
}

/* Both values are loaded (a select, no divergent branch). */
static void emit_where(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    const char *vt = cg_vtype(t->dtype);
    if (lanes) {
        cg_sb_printf(b, "    i64 c_ = a0_[u];\n    %s x_ = a1_[u], y_ = a2_[u];\n", vt);
    } else {
        for (int k = 0; k < 3; k++) {
            char dst[8];
            snprintf(dst, sizeof dst, "j%d", k);
            emit_bcast_index(b, t, n->inputs[k], "i", dst);
        }
        cg_sb_puts(b, "    i64 c_ = ");
        sb_operand(b, n->inputs[0], "j0");
        cg_sb_printf(b, ";\n    %s x_ = ", vt);
        sb_operand(b, n->inputs[1], "j1");
        cg_sb_puts(b, ", y_ = ");
        sb_operand(b, n->inputs[2], "j2");
        cg_sb_puts(b, ";\n");
    }
    cg_sb_printf(b, "    %s r_ = c_ != 0 ? x_ : y_;\n", vt);
}

/* An index out of range is clamped (the CPU path reports it instead;
 * docs/ops.md). */
static void emit_gather(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    const mcir_tensor *x = n->inputs[0], *idx = n->inputs[1];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis));
    emit_coords(b, t, "i");
    cg_sb_puts(b, "    i64 li_ = 0");
    cg_stride s = stride_one();
    for (int k = idx->rank - 1; k >= 0; k--) {
        cg_sb_printf(b, " + c%d * ", axis + k);
        sb_stride(b, &s);
        stride_mul(&s, idx, k);
    }
    cg_sb_printf(b, ";\n    i64 g_ = v%d(li_, acc, MC_ARGS);\n", idx->id);
    if (cg_dyn && cg_tensor_dynamic(x)) {   /* the axis's extent at launch */
        cg_sb_puts(b, "    { const i64 n_ = ");
        cg_sb_extent(b, x, axis);
        cg_sb_puts(b, ";\n    g_ = g_ < -n_ ? -n_ : g_ > n_ - 1 ? n_ - 1 : g_;\n    if (g_ < 0) g_ += n_; }\n");
    } else {
        long long dim = (long long)x->shape[axis];
        cg_sb_printf(b, "    g_ = g_ < -%lldLL ? -%lldLL : g_ > %lldLL ? %lldLL : g_;\n", dim, dim,
                     dim - 1, dim - 1);
        cg_sb_printf(b, "    if (g_ < 0) g_ += %lldLL;\n", dim);
    }
    cg_sb_puts(b, "    i64 j0 = 0");
    s = stride_one();
    for (int k = x->rank - 1; k >= 0; k--) {
        if (k == axis) cg_sb_puts(b, " + g_ * ");
        else cg_sb_printf(b, " + c%d * ", k < axis ? k : k - 1 + idx->rank);
        sb_stride(b, &s);
        stride_mul(&s, x, k);
    }
    cg_sb_puts(b, ";\n");
    emit_fetch(b, t, x, true, "    ");
}

/* index_copy: element c of Y is U's row h along the axis where I[h] names
 * c's row (the last such h, as the interpreter's order of writes), else
 * X's. The thread searches I (all lanes read the same entry: one
 * broadcast load each); out-of-range indices were reported by the
 * interpreter's check and match no row here. */
static void emit_index_copy(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    const mcir_tensor *x = n->inputs[0], *idx = n->inputs[1], *u = n->inputs[2];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis));
    emit_coords(b, t, "i");
    cg_sb_puts(b, "    i64 h_ = -1;\n    for (i64 k_ = 0; k_ < ");
    cg_sb_extent(b, idx, 0);
    cg_sb_printf(b, "; k_++) {\n        i64 g_ = v%d(k_, acc, MC_ARGS);\n        if (g_ < 0) g_ += ",
                 idx->id);
    cg_sb_extent(b, x, axis);
    cg_sb_printf(b, ";\n        if (g_ == c%d) h_ = k_;\n    }\n", axis);
    cg_sb_printf(b, "    %s r_;\n    if (h_ >= 0) {\n", cg_vtype(t->dtype));
    emit_linear(b, u, "j0", axis, "h_", NULL);
    emit_fetch(b, t, u, false, "    ");
    cg_sb_puts(b, "    } else {\n");
    emit_linear(b, x, "j0", -1, NULL, NULL);
    emit_fetch(b, t, x, false, "    ");
    cg_sb_puts(b, "    }\n");
}

/* argmax / argmin (expr: the comparison that makes a new best) loop over
 * their axis in the thread of the output element; the first NaN wins (a
 * test that integers never pass). */
static void emit_argreduce(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    const mcir_tensor *x = n->inputs[0];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis));
    bool keep = mcir_node_bool(n, "keepdims");
    emit_coords(b, t, "i");
    cg_sb_puts(b, "    i64 j0 = 0");
    cg_stride s = stride_one(), axis_stride = stride_one();
    for (int k = x->rank - 1; k >= 0; k--) {
        if (k == axis) {
            axis_stride = s;
        } else {
            cg_sb_printf(b, " + c%d * ", keep || k < axis ? k : k - 1);
            sb_stride(b, &s);
        }
        stride_mul(&s, x, k);
    }
    const char *vt = cg_vtype(x->dtype);
    cg_sb_printf(b, ";\n    %s bv_ = v%d(j0, acc, MC_ARGS);\n    i64 best_ = 0;\n", vt, x->id);
    cg_sb_puts(b, "    for (i64 k_ = 1; k_ < ");
    cg_sb_extent(b, x, axis);
    cg_sb_printf(b, " && bv_ == bv_; k_++) {\n        %s x_ = v%d(j0 + k_ * ", vt, x->id);
    sb_stride(b, &axis_stride);
    cg_sb_printf(b, ", acc, MC_ARGS);\n"
                    "        if (x_ != x_ || x_ %s bv_) { bv_ = x_; best_ = k_; }\n    }\n",
                 expr);
    cg_sb_puts(b, "    i64 r_ = best_;\n");
}

/* cumsum: the sum over the axis up to the element (from the end with
 * reverse; without it with exclusive), in the interpreter's order: f32
 * sequentially, integers wrapping. Each element loops over its prefix. */
static void emit_cumsum(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    const mcir_tensor *x = n->inputs[0];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis));
    bool excl = mcir_node_bool(n, "exclusive"), rev = mcir_node_bool(n, "reverse");
    bool ints = int_tensor(t);
    cg_stride stride = stride_one();
    for (int k = x->rank - 1; k > axis; k--) stride_mul(&stride, x, k);
    emit_coords(b, t, "i");
    cg_sb_printf(b, "    i64 j0 = i - c%d * ", axis);
    sb_stride(b, &stride);
    cg_sb_printf(b, ";\n    %s r_ = 0;\n", cg_vtype(t->dtype));
    if (rev && cg_tensor_dynamic(x)) {
        cg_sb_puts(b, "    for (i64 k_ = ");
        cg_sb_extent(b, x, axis);
        cg_sb_printf(b, " - 1; k_ %s c%d; k_--)\n", excl ? ">" : ">=", axis);
    } else if (rev) {
        cg_sb_printf(b, "    for (i64 k_ = %lldLL; k_ %s c%d; k_--)\n", (long long)(x->shape[axis] - 1),
                     excl ? ">" : ">=", axis);
    } else {
        cg_sb_printf(b, "    for (i64 k_ = 0; k_ %s c%d; k_++)\n", excl ? "<" : "<=", axis);
    }
    cg_sb_printf(b, ints ? "        r_ = mc_iadd(r_, v%d(j0 + k_ * " : "        r_ += v%d(j0 + k_ * ", x->id);
    sb_stride(b, &stride);
    cg_sb_puts(b, ints ? ", acc, MC_ARGS));\n" : ", acc, MC_ARGS);\n");
}

static void emit_arange(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    long long start = (long long)mcir_node_int(n, "start"), step = (long long)mcir_node_int(n, "step");
    if (int_tensor(t))
        cg_sb_printf(b, "    i64 r_ = mc_iadd(%lldLL, mc_imul(i, %lldLL));\n", start, step);
    else
        cg_sb_printf(b, "    float r_ = (float)(%lldLL + i * %lldLL);\n", start, step);
}

/* A reshape keeps the C-order linear index. */
static void emit_reshape(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    cg_sb_printf(b, "    %s r_ = v%d(i, acc, MC_ARGS);\n", cg_vtype(t->dtype), n->inputs[0]->id);
}

static void emit_transpose(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    const mcir_tensor *in = n->inputs[0];
    const int64_t *perm;
    int np = mcir_node_ints(n, "perm", &perm);
    MCIR_ASSERT(np == t->rank && np == in->rank);
    /* out coord k is in coord perm[k]: in coord p = out coord inv[p] */
    int inv[MCIR_MAX_RANK];
    for (int k = 0; k < np; k++) inv[perm[k] < 0 ? perm[k] + np : perm[k]] = k;
    emit_coords(b, t, "i");
    emit_linear(b, in, "j0", -1, NULL, inv);
    emit_fetch(b, t, in, true, "    ");
}

static void emit_slice(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    const mcir_tensor *in = n->inputs[0];
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), in->rank, &axis));
    int64_t first, len, step = mcir_node_int(n, "step");
    mcir_slice_range(in->shape[axis], mcir_node_int(n, "start"), mcir_node_int(n, "end"),
                     step, &first, &len);
    mcir_extent f = slice_first(n, in, axis, first);
    cg_sb ax = {0};
    cg_sb_ext(&ax, &f, first);
    cg_sb_printf(&ax, " + c%d * %lldLL", axis, (long long)step);
    emit_coords(b, t, "i");
    emit_linear(b, in, "j0", axis, ax.s, NULL);
    cg_sb_free(&ax);
    emit_fetch(b, t, in, true, "    ");
}

/* Output t of the split starts after the sizes of the outputs before it. */
static void emit_split(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    const mcir_tensor *in = n->inputs[0];
    int axis, which = -1;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), in->rank, &axis));
    const int64_t *sizes;
    int ns = mcir_node_ints(n, "sizes", &sizes);
    int64_t off = 0;
    for (int k = 0; k < n->n_outputs && k < ns; k++) {
        if (n->outputs[k] == t) { which = k; break; }
        off += sizes[k];
    }
    MCIR_ASSERT(which >= 0);
    char ax[96];
    snprintf(ax, sizeof ax, "%lldLL + c%d", (long long)off, axis);
    emit_coords(b, t, "i");
    emit_linear(b, in, "j0", axis, ax, NULL);
    emit_fetch(b, t, in, true, "    ");
}

static void emit_concat(cg_sb *b, const mcir_node *n, const mcir_tensor *t, const char *expr) {
    (void)expr;
    int axis;
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), t->rank, &axis));
    emit_coords(b, t, "i");
    if (!remap_vec) cg_sb_printf(b, "    %s r_;\n", cg_vtype(t->dtype));
    int64_t off = 0;
    mcir_extent soff = mcir_extent_const(0);
    bool sym = true;
    for (int k = 0; k < n->n_inputs; k++) {
        const mcir_tensor *in = n->inputs[k];
        int64_t end = off + in->shape[axis];
        mcir_extent e = mcir_tensor_extent(in, axis), send = soff;
        bool sym_end = sym && mcir_extent_add(&soff, &e, &send);
        cg_sb ax = {0};
        cg_sb_printf(&ax, "c%d - ", axis);
        if (sym) cg_sb_ext(&ax, &soff, off);
        else cg_sb_printf(&ax, "%lldLL", (long long)off);
        if (k == n->n_inputs - 1) { /* the rest: c < end holds for every valid coordinate */
            cg_sb_puts(b, k ? "    else {\n" : "    {\n");
        } else {
            cg_sb_printf(b, "    %sif (c%d < ", k ? "else " : "", axis);
            if (sym_end) cg_sb_ext(b, &send, end);
            else cg_sb_printf(b, "%lldLL", (long long)end);
            cg_sb_puts(b, ") {\n");
        }
        emit_linear(b, in, "j0", axis, ax.s, NULL);
        cg_sb_free(&ax);
        emit_fetch(b, t, in, false, "    ");
        cg_sb_puts(b, "    }\n");
        off = end;
        sym = sym_end;
        soff = send;
    }
}

/* The emitter of each op that can be a region's non-anchor member, indexed
 * like mcir_op_descs[], with its expression for float and for integer
 * operands. The others (matmul, conv, pools, reductions, norms, attention)
 * are template anchors: reached here they cannot be fused. Comparisons
 * give bool as 1/0 (NaN compares false, not_equal true).
 * Exponentials and reciprocals take the SFU's forms (prelude.cuh: mc_exp2,
 * mc_rcp, mc_rsqrt; one MUFU instruction each, no IEEE division and its
 * slow path): e^x = 2^(x log2 e) (2 ulp, plus the rounding of x log2 e:
 * ~5e-6 relative at |x| = 88), sigmoid and silu through 1 / (1 + e^-x),
 * a float division as x * (1/y) (2 ulp; |y| beyond 2^126 gives 0, a
 * denormal y inf: flushed as on the GPU), reciprocal and rsqrt (1 and 2
 * ulp). tanhf, erff and logf are CUDA's own MUFU-based sequences (no
 * division); cos and sin are mc_cos / mc_sin (prelude.cuh: CUDA's cosf and
 * sinf keep a local array past |x| = 105615, a stack frame in every kernel
 * that calls them). Integers stay exact (mc_idiv). */
static const value_emitter value_emitters[MCIR_OP_COUNT] = {
    [MCIR_OP_ADD] = {emit_binary, "x_ + y_", "mc_iadd(x_, y_)"},
    [MCIR_OP_SUB] = {emit_binary, "x_ - y_", "mc_isub(x_, y_)"},
    [MCIR_OP_MUL] = {emit_binary, "x_ * y_", "mc_imul(x_, y_)"},
    [MCIR_OP_DIV] = {emit_binary, "x_ * mc_rcp(y_)", "mc_idiv(x_, y_)"},
    [MCIR_OP_POW] = {emit_binary, "powf(x_, y_)", NULL},
    [MCIR_OP_MAX] = {emit_binary, "mc_max_nan(x_, y_)", "mc_imax(x_, y_)"},
    [MCIR_OP_MIN] = {emit_binary, "mc_min_nan(x_, y_)", "mc_imin(x_, y_)"},
    [MCIR_OP_SCALE] = {emit_scale, NULL, NULL},
    [MCIR_OP_RELU] = {emit_unary, "x_ < 0.0f ? 0.0f : x_", NULL},
    [MCIR_OP_SIGMOID] = {emit_unary, "mc_rcp(1.0f + mc_exp2(-x_ * MC_L2E))", NULL},
    [MCIR_OP_TANH] = {emit_unary, "tanhf(x_)", NULL},
    [MCIR_OP_EXP] = {emit_unary, "mc_exp2(x_ * MC_L2E)", NULL},
    [MCIR_OP_LOG] = {emit_unary, "logf(x_)", NULL},
    [MCIR_OP_ERF] = {emit_unary, "erff(x_)", NULL},
    [MCIR_OP_COS] = {emit_unary, "mc_cos(x_)", NULL},
    [MCIR_OP_SIN] = {emit_unary, "mc_sin(x_)", NULL},
    [MCIR_OP_SQRT] = {emit_unary, "sqrtf(x_)", NULL},
    [MCIR_OP_RSQRT] = {emit_unary, "mc_rsqrt(x_)", NULL},
    [MCIR_OP_NEG] = {emit_unary, "-x_", "mc_ineg(x_)"},
    [MCIR_OP_RECIPROCAL] = {emit_unary, "mc_rcp(x_)", NULL},
    [MCIR_OP_SILU] = {emit_unary, "x_ * mc_rcp(1.0f + mc_exp2(-x_ * MC_L2E))", NULL},
    [MCIR_OP_GELU] = {emit_gelu, NULL, NULL},
    [MCIR_OP_TRANSPOSE] = {emit_transpose, NULL, NULL},
    [MCIR_OP_RESHAPE] = {emit_reshape, NULL, NULL},
    [MCIR_OP_SPLIT] = {emit_split, NULL, NULL},
    [MCIR_OP_CONCAT] = {emit_concat, NULL, NULL},
    [MCIR_OP_SLICE] = {emit_slice, NULL, NULL},
    [MCIR_OP_CAST] = {emit_cast, NULL, NULL},
    [MCIR_OP_EQUAL] = {emit_binary, "x_ == y_", "x_ == y_"},
    [MCIR_OP_NOT_EQUAL] = {emit_binary, "x_ != y_", "x_ != y_"},
    [MCIR_OP_LESS] = {emit_binary, "x_ < y_", "x_ < y_"},
    [MCIR_OP_LESS_EQUAL] = {emit_binary, "x_ <= y_", "x_ <= y_"},
    [MCIR_OP_GREATER] = {emit_binary, "x_ > y_", "x_ > y_"},
    [MCIR_OP_GREATER_EQUAL] = {emit_binary, "x_ >= y_", "x_ >= y_"},
    [MCIR_OP_WHERE] = {emit_where, NULL, NULL},
    [MCIR_OP_GATHER] = {emit_gather, NULL, NULL},
    [MCIR_OP_INDEX_COPY] = {emit_index_copy, NULL, NULL},
    [MCIR_OP_ARGMAX] = {emit_argreduce, ">", ">"},
    [MCIR_OP_ARGMIN] = {emit_argreduce, "<", "<"},
    [MCIR_OP_ARANGE] = {emit_arange, NULL, NULL},
    [MCIR_OP_MOD] = {emit_mod, NULL, NULL},
    [MCIR_OP_BITWISE_AND] = {emit_binary, NULL, "x_ & y_"},
    [MCIR_OP_BITWISE_OR] = {emit_binary, NULL, "x_ | y_"},
    [MCIR_OP_BITWISE_XOR] = {emit_binary, NULL, "x_ ^ y_"},
    [MCIR_OP_BITWISE_NOT] = {emit_bitwise_not, NULL, NULL},
    [MCIR_OP_LEFT_SHIFT] = {emit_shift, NULL, "mc_ishl"},
    [MCIR_OP_RIGHT_SHIFT] = {emit_shift, NULL, "mc_ishr"},
    [MCIR_OP_CUMSUM] = {emit_cumsum, NULL, NULL},
};

/* The emitter of op, or NULL. The partitioner may put an elementwise op
 * anywhere in a region: each has one. */
static const value_emitter *value_emitter_of(mcir_op op) {
    MCIR_ASSERT(op >= 0 && op < MCIR_OP_COUNT);
    const value_emitter *ve = &value_emitters[op];
    MCIR_ASSERT(ve->emit || !(mcir_op_desc_of(op)->flags & MCIR_OPF_ELEMENTWISE));
    return ve->emit ? ve : NULL;
}

bool cg_depends_on(const mcir_kernel_plan *kp, const mcir_tensor *t, const mcir_tensor *anchor_out) {
    if (!anchor_out) return false;
    if (t == anchor_out) return true;
    mcir_node *n = cg_region_producer(kp, t);
    if (!n || n == anchor_out->producer) return false;
    for (int j = 0; j < n->n_inputs; j++)
        if (cg_depends_on(kp, n->inputs[j], anchor_out)) return true;
    return false;
}

/* The function written since fn_start again as its unrounded twin: the
 * name `name` becomes `twin`, and its rounding `round` (up to its ';')
 * becomes `raw` (vvr<ID> for a vector form, <fn>r<ID> for a scalar one). */
static void emit_unrounded_twin(cg_sb *b, size_t fn_start, const char *name, const char *twin, const char *round,
                                const char *raw) {
    char *text = strndup(b->s + fn_start, b->len - fn_start);
    MCIR_ASSERT(text != NULL);
    char *h = strstr(text, name), *r = strstr(text, round);
    MCIR_ASSERT(h && r && h < r);
    const char *rest = strchr(r, ';');
    MCIR_ASSERT(rest != NULL);
    *h = 0;
    *r = 0;
    cg_sb_printf(b, "%s%s%s", text, twin, h + strlen(name));
    cg_sb_printf(b, "%s%s", raw, rest);
    free(text);
}

bool cg_emit_value(cg_emitter *e, const mcir_tensor *t) {
    if (!e->ok) return false;
    MCIR_ASSERT(t->id < e->n_tensors);
    if (packed && !pk_own(t)) {   /* beside the anchor's path: its flat function */
        packed = false;
        bool ok = cg_emit_value(e, t);
        packed = true;
        return ok;
    }
    const unsigned char done = packed ? DONE_PACKED : DONE_SCALAR;
    const char fn = packed ? 'p' : 'v';
    if (e->done[t->id] & done) return true;
    cg_sb *b = e->sb;
    const mcir_kernel_plan *kp = e->kp;
    if (e->pair[0] && (t == e->pair[0] || t == e->pair[1])) {
        /* half h of the accumulator pair, already in the product's dtype */
        const int h = t == e->pair[1];
        cg_sb_printf(b, "// %s: the %s half of the product, from the accumulator pair\n"
                        "__device__ __forceinline__ float %c%d(i64 i, float acc, MC_PARAMS) {\n"
                        "    (void)i;\n    return mc_%s_to_f32((unsigned short)((u32)__float_as_int(acc)%s));\n}\n",
                     t->name, h ? "up" : "gate", fn, t->id, cg_dsuffix(t->dtype), h ? " >> 16" : " & 0xffffu");
        e->done[t->id] |= done;
        return true;
    }
    if (!packed && e->box_leaf && e->box_leaf[t->id] > 0 && mcir_value_type_of(t->dtype) == MCIR_VALUE_F32) {
        /* an f32 leaf: two boxes of 32 columns, its element from A's row and column */
        const bool f32 = t->dtype == MCIR_DTYPE_F32;
        MCIR_ASSERT(!f32 || e->box_rows);
        cg_sb_printf(b, "// %s staged in box %d\n__device__ __forceinline__ float v%d(i64 i, float acc, MC_PARAMS) {\n"
                        "    return mc_ld_%s(%sgm_box(acc, %d), %s);\n}\n",
                     t->name, e->box_leaf[t->id] - 1, t->id, cg_dsuffix(t->dtype), f32 ? "(const float*)" : "",
                     e->box_leaf[t->id] - 1, f32 ? "gm_box_elem4(i)" : e->box_rows ? "gm_box_elem(i)" : "i");
        e->done[t->id] |= DONE_SCALAR;
        return true;
    }
    if (!packed && e->box_leaf && e->box_leaf[t->id] == -2 && mcir_value_type_of(t->dtype) == MCIR_VALUE_F32) {
        cg_sb_printf(b, "// %s: a factor the epilogue applies, 1 here\n"
                        "__device__ __forceinline__ float v%d(i64 i, float acc, MC_PARAMS) {\n"
                        "    (void)i; (void)acc;\n    return 1.0f;\n}\n",
                     t->name, t->id);
        e->done[t->id] |= DONE_SCALAR;
        return true;
    }
    if (!packed && e->box_leaf && e->box_leaf[t->id] == -1 && mcir_value_type_of(t->dtype) == MCIR_VALUE_F32) {
        MCIR_ASSERT(e->box_rows);
        cg_sb_printf(b, "// %s: its K step's elements staged in the vector box\n"
                        "__device__ __forceinline__ float v%d(i64 i, float acc, MC_PARAMS) {\n"
                        "    return mc_ld_%s(%sgm_vbox(acc), i);\n}\n",
                     t->name, t->id, cg_dsuffix(t->dtype), t->dtype == MCIR_DTYPE_F32 ? "(const float*)" : "");
        e->done[t->id] |= DONE_SCALAR;
        return true;
    }
    mcir_node *n = t == e->anchor_out ? NULL : cg_region_producer(kp, t);
    int ri = cg_read_index(kp, t);

    if (t != e->anchor_out && !n && ri < 0) {
        cg_error(e->d, kp, "tensor '%s' is used but neither read by the kernel nor computed in it",
                 t->name);
        return e->ok = false;
    }
    if (n)
        for (int j = 0; j < n->n_inputs; j++)
            if (!cg_emit_value(e, n->inputs[j])) return false;

    const size_t fn_start = b->len;   /* the function's text, copied for its unrounded twin below */
    cg_sb_printf(b, "// %s %s%s\n", t->name, n ? mcir_op_name(n->op) : (ri >= 0 ? "read" : "anchor"),
                 packed ? " (packed index)" : "");
    cg_sb_printf(b, "__device__ __forceinline__ %s %c%d(i64 i, float acc, MC_PARAMS) {\n"
                    "    (void)acc; (void)i;\n", cg_vtype(t->dtype), fn, t->id);
    const char *ds = cg_dsuffix(t->dtype);
    bool ints = int_tensor(t);
    if (t == e->anchor_out) {   /* a template's f32 result (an integer one: argmax's index) */
        cg_sb_printf(b, "    return mc_%s_%s(acc);\n}\n", ints ? "f2i" : "round", ds);
        e->done[t->id] |= done;
        return true;
    }
    if (!n) {
        cg_sb_printf(b, "    return mc_ld%s_%s(r%d, ", ints ? "i" : "", ds, ri);
        if (packed) sb_pk_flat(b, t, "i");
        else cg_sb_puts(b, "i");
        cg_sb_puts(b, ");\n}\n");
        e->done[t->id] |= done;
        return true;
    }
    const value_emitter *ve = value_emitter_of(n->op);
    if (!ve) {
        cg_error(e->d, kp, "op '%s' (node '%s') cannot be fused into this kernel",
                 mcir_op_name(n->op), n->name);
        return e->ok = false;
    }
    /* families with an expression per operand type get theirs */
    ve->emit(b, n, t, ve->expr || ve->iexpr ? operand_expr(ve, n) : NULL);
    cg_sb_printf(b, "    return mc_round_%s(r_);\n}\n", ds);
    e->done[t->id] |= done;
    if (e->raw == t && !ints && (t->dtype == MCIR_DTYPE_F16 || t->dtype == MCIR_DTYPE_BF16)) {
        /* <fn>r<ID>: the same, unrounded (cg_emitter.raw) */
        char from[32], to[32];
        snprintf(from, sizeof from, " %c%d(i64 i", fn, t->id);
        snprintf(to, sizeof to, " %cr%d(i64 i", fn, t->id);
        emit_unrounded_twin(b, fn_start, from, to, "return mc_round_", "return r_");
        e->raw_scalar = true;
    }
    return true;
}

/* ------------------------------------------------ vector value functions */

void cg_emit_vec_load(cg_sb *b, const mcir_tensor *t, int ri, const char *idx, int vec) {
    MCIR_ASSERT(ri >= 0);
    char ptr[16];
    snprintf(ptr, sizeof ptr, "r%d", ri);
    cg_emit_vec_load_at(b, t, ptr, idx, vec);
}

void cg_emit_vec_load_at(cg_sb *b, const mcir_tensor *t, const char *ptr, const char *idx, int vec) {
    int size = (int)mcir_dtype_size(t->dtype);
    int per = size == 4 ? 4 : vec % 8 == 0 ? 8 : 4;   /* elements per access: 16 bytes (8: f16 at vec 4) */
    const char *vt = size == 4 ? "float4" : per == 8 ? "uint4" : "uint2";
    MCIR_ASSERT(vec % 4 == 0 && (size == 4 || size == 2));
    cg_sb_printf(b, "#pragma unroll\n    for (int q = 0; q < %d; q += %d) {\n        const %s c_ = MC_GLDV(%s, %s, %s + q);\n",
                 vec, per, vt, vt, ptr, idx);
    if (size == 4) {
        cg_sb_puts(b, "        out[q] = c_.x; out[q + 1] = c_.y; out[q + 2] = c_.z; out[q + 3] = c_.w;\n    }\n");
        return;
    }
    const char *ds = cg_dsuffix(t->dtype);
    cg_sb_printf(b, "        const u32 h_[%d] = {c_.x, c_.y%s};\n#pragma unroll\n        for (int k = 0; k < %d; k++) {\n"
                    "            out[q + 2 * k] = mc_%s_to_f32((unsigned short)(h_[k] & 0xffffu));\n"
                    "            out[q + 2 * k + 1] = mc_%s_to_f32((unsigned short)(h_[k] >> 16));\n        }\n    }\n",
                 per / 2, per == 8 ? ", c_.z, c_.w" : "", per / 2, ds, ds);
}

/* src with pad after each newline (but the last). */
static void sb_indented(cg_sb *b, const char *src, const char *pad) {
    for (const char *p = src; *p; p++) {
        char c[2] = {*p, 0};
        cg_sb_puts(b, c);
        if (*p == '\n' && p[1]) cg_sb_puts(b, pad);
    }
}

/* Whether t's vector form is a kernel read's loads (through reshapes). */
static bool loaded_form(const mcir_kernel_plan *kp, const mcir_tensor *t) {
    const mcir_node *n = cg_region_producer(kp, t);
    return !n || (n->op == MCIR_OP_RESHAPE && loaded_form(kp, n->inputs[0]));
}

bool cg_vec_raw_write(const mcir_kernel_plan *kp, const mcir_tensor *t) {
    const mcir_node *n = cg_region_producer(kp, t);
    bool write = false;
    for (int w = 0; w < kp->n_writes; w++) write = write || kp->writes[w] == t;
    return write && (t->dtype == MCIR_DTYPE_F16 || t->dtype == MCIR_DTYPE_BF16) && n &&
           (mcir_op_desc_of(n->op)->flags & MCIR_OPF_ELEMENTWISE);
}

bool cg_emit_value_vec(cg_emitter *e, const mcir_tensor *t, int vec) {
    if (!e->ok) return false;
    MCIR_ASSERT(t->id < e->n_tensors && vec > 1 && t != e->anchor_out);
    if (e->done[t->id] & DONE_VEC) return true;
    cg_sb *b = e->sb;
    const mcir_kernel_plan *kp = e->kp;
    if (e->box_leaf && e->box_leaf[t->id] > 0) {
        /* a 16-bit leaf staged in an sm_90a GEMM's prologue box (whatever
         * computes it outside, a split of a wider tensor: the TMA read its
         * part): i is the box's element (low 32 bits, a multiple of 8: one
         * 16-byte chunk of the swizzled box) and the stage and group's
         * code (high bits) */
        MCIR_ASSERT(vec == 8 && mcir_dtype_size(t->dtype) == 2);
        /* the 8 elements' bits from the template's gm_leaf8: 16 bytes of
         * the box at that element, or (GM_PROLOGUE_RS) the thread's wgmma
         * A fragment of k16 step i & 3 by ldmatrix */
        const char *ds = cg_dsuffix(t->dtype);
        cg_sb_printf(b, "// %s staged in box %d, 8 elements from element i & 0xffffffff (i >> 32: stage and group;\n"
                        "// gm_leaf8 says which)\n"
                        "__device__ __forceinline__ void vv%d(i64 i, float* out, MC_PARAMS) {\n"
                        "    u32 h_[4];\n"
                        "    gm_leaf8(__int_as_float((int)(i >> 32)), %d, (int)(i & 0xffffffffLL), h_);\n"
                        "#pragma unroll\n"
                        "    for (int k = 0; k < 4; k++) {\n"
                        "        out[2 * k] = mc_%s_to_f32((unsigned short)(h_[k] & 0xffffu));\n"
                        "        out[2 * k + 1] = mc_%s_to_f32((unsigned short)(h_[k] >> 16));\n"
                        "    }\n}\n",
                     t->name, e->box_leaf[t->id] - 1, t->id, e->box_leaf[t->id] - 1, ds, ds);
        e->done[t->id] |= DONE_VEC;
        return true;
    }
    MCIR_ASSERT(mcir_vector_form(kp, t, vec));
    mcir_node *n = cg_region_producer(kp, t);
    mcir_vector_operand mode[8];
    if (n && n->op == MCIR_OP_RESHAPE && !cg_emit_value_vec(e, n->inputs[0], vec)) return false;
    for (int j = 0; n && n->op != MCIR_OP_RESHAPE && j < n->n_inputs; j++) {
        MCIR_ASSERT(j < 8);
        mode[j] = mcir_vector_operand_of(kp, n, j, vec);
        if (!(mode[j] == MCIR_VEC_LANES ? cg_emit_value_vec(e, n->inputs[j], vec) : cg_emit_value(e, n->inputs[j])))
            return false;
    }
    size_t fn_start = b->len;   /* the function's text, copied for vvr<ID> below */
    cg_sb_printf(b, "// %s %s, %d elements from element i (a multiple of %d)\n"
                    "__device__ __forceinline__ void vv%d(i64 i, float* out, MC_PARAMS) {\n    (void)i;\n",
                 t->name, n ? mcir_op_name(n->op) : "read", vec, vec, t->id);
    e->done[t->id] |= DONE_VEC;
    if (!n) {
        cg_emit_vec_load(b, t, cg_read_index(kp, t), "i", vec);
        cg_sb_puts(b, "}\n");
        return true;
    }
    if (n->op == MCIR_OP_RESHAPE) {   /* the same linear index */
        cg_sb_printf(b, "    vv%d(i, out, MC_ARGS);\n}\n", n->inputs[0]->id);
        return true;
    }
    if (!(mcir_op_desc_of(n->op)->flags & MCIR_OPF_ELEMENTWISE)) {   /* a remap: its operand's vector at j0 */
        const value_emitter *re = value_emitter_of(n->op);
        MCIR_ASSERT(re && mcir_vector_remap(kp, n, t, vec));
        cg_sb_puts(b, "    const float acc = 0.0f;\n    (void)acc;\n");
        remap_vec = true;
        re->emit(b, n, t, NULL);
        remap_vec = false;
        cg_sb_puts(b, "}\n");
        return true;
    }
    /* operands that are loads first (their loads issued before the other
     * operands' ops: silu(g) * u loads u, then g), the rest in order */
    int order[8], n_order = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int j = 0; j < n->n_inputs; j++)
            if ((mode[j] == MCIR_VEC_LANES && loaded_form(kp, n->inputs[j])) == (pass == 0)) order[n_order++] = j;
    for (int o = 0; o < n_order; o++) {
        int j = order[o];
        const mcir_tensor *x = n->inputs[j];
        const char *vt = cg_vtype(x->dtype);
        cg_sb_printf(b, "    %s a%d_[%d];\n", vt, j, vec);
        if (mode[j] == MCIR_VEC_SCALAR) {   /* each lane from its own index */
            cg_sb ix = {0};
            emit_bcast_index(&ix, t, x, "i + u", "j_");
            cg_sb_printf(b, "#pragma unroll\n    for (int u = 0; u < %d; u++) {\n    ", vec);
            sb_indented(b, ix.s, "    ");
            cg_sb_printf(b, "        a%d_[u] = v%d(j_, 0.0f, MC_ARGS);\n    }\n", j, x->id);
            cg_sb_free(&ix);
            continue;
        }
        /* its index at element i: i itself, or computed in a block of its own */
        cg_sb ix = {0};
        emit_bcast_index(&ix, t, x, "i", "j_");
        bool same = strcmp(ix.s, "    i64 j_ = i;\n") == 0;
        if (!same) {
            cg_sb_puts(b, "    {\n    ");
            sb_indented(b, ix.s, "    ");
        }
        const char *in = same ? "    " : "        ", *at = same ? "i" : "j_";
        if (mode[j] == MCIR_VEC_LANES)
            cg_sb_printf(b, "%svv%d(%s, a%d_, MC_ARGS);\n", in, x->id, at, j);
        else   /* one element for every lane */
            cg_sb_printf(b, "%sconst %s s_ = v%d(%s, 0.0f, MC_ARGS);\n#pragma unroll\n"
                            "%sfor (int u = 0; u < %d; u++) a%d_[u] = s_;\n", in, vt, x->id, at, in, vec, j);
        if (!same) cg_sb_puts(b, "    }\n");
        cg_sb_free(&ix);
    }
    const value_emitter *ve = value_emitter_of(n->op);
    MCIR_ASSERT(ve && (mcir_op_desc_of(n->op)->flags & MCIR_OPF_ELEMENTWISE));
    cg_sb body = {0};
    lanes = true;
    ve->emit(&body, n, t, ve->expr || ve->iexpr ? operand_expr(ve, n) : NULL);
    lanes = false;
    cg_sb_printf(b, "#pragma unroll\n    for (int u = 0; u < %d; u++) {\n    ", vec);
    sb_indented(b, body.s ? body.s : "", "    ");
    cg_sb_printf(b, "        out[u] = mc_round_%s(r_);\n    }\n}\n", cg_dsuffix(t->dtype));
    cg_sb_free(&body);
    if (cg_vec_raw_write(kp, t) || (e->raw == t && (t->dtype == MCIR_DTYPE_F16 || t->dtype == MCIR_DTYPE_BF16))) {
        /* vvr<ID>: the same, unrounded, for the write's packed store (its
         * conversion rounds once; rounding first, then again, gives the
         * same bits for two more instructions an element) */
        char from[32], to[32];
        snprintf(from, sizeof from, "void vv%d(i64 i", t->id);
        snprintf(to, sizeof to, "void vvr%d(i64 i", t->id);
        emit_unrounded_twin(b, fn_start, from, to, "out[u] = mc_round_", "out[u] = r_");
    }
    return true;
}

/* t's value at anchor element i needs no index remapping between the
 * anchor output and t (same shape, elementwise or reshape on the path). */
static bool epilogue_path_ok(const mcir_kernel_plan *kp, const mcir_tensor *t,
                             const mcir_tensor *a, const char **why) {
    if (t == a) return true;
    if (mcir_tensor_numel(t) != mcir_tensor_numel(a)) {
        *why = "changes the number of elements";
        return false;
    }
    mcir_node *n = cg_region_producer(kp, t);
    if (!n) return true;
    unsigned fl = mcir_op_desc_of(n->op)->flags;
    if (!(fl & MCIR_OPF_ELEMENTWISE) && n->op != MCIR_OP_RESHAPE) {
        *why = "reorders elements (only elementwise ops and reshapes may follow the anchor)";
        return false;
    }
    for (int j = 0; j < n->n_inputs; j++) {
        if (!cg_depends_on(kp, n->inputs[j], a)) continue;
        if (n->op != MCIR_OP_RESHAPE && mcir_tensor_numel(n->inputs[j]) != mcir_tensor_numel(t)) {
            *why = "broadcasts the anchor's output";
            return false;
        }
        if (!epilogue_path_ok(kp, n->inputs[j], a, why)) return false;
    }
    return true;
}

bool cg_emit_epilogue(cg_emitter *e, int min_writes) {
    const mcir_kernel_plan *kp = e->kp;
    int count = 0;
    for (int w = 0; w < kp->n_writes; w++) {
        const mcir_tensor *t = kp->writes[w];
        const char *why = "";
        if (!cg_depends_on(kp, t, e->anchor_out)) {
            cg_error(e->d, kp, "writes '%s', which does not depend on the anchor '%s'", t->name,
                     e->anchor_out->name);
            return e->ok = false;
        }
        if (!epilogue_path_ok(kp, t, e->anchor_out, &why)) {
            cg_error(e->d, kp, "cannot fuse the epilogue producing '%s': it %s", t->name, why);
            return e->ok = false;
        }
        if (!cg_emit_value(e, t)) return false;
        count++;
    }
    if (count < min_writes) {
        cg_error(e->d, kp, "has no output to write");
        return e->ok = false;
    }
    cg_sb_puts(e->sb, "__device__ __forceinline__ void epilogue(i64 i, float acc, MC_PARAMS) {\n");
    for (int w = 0; w < kp->n_writes; w++) {
        const mcir_tensor *t = kp->writes[w];
        cg_sb_printf(e->sb, "    mc_st_%s(w%d, i, v%d(i, acc, MC_ARGS));\n", cg_dsuffix(t->dtype), w,
                     t->id);
    }
    cg_sb_puts(e->sb, "}\n");
    return true;
}

/* Whether t and what it is computed from in the region are static, each
 * below 2^31 elements; on the anchor's path (depth > 0: below a write)
 * elementwise with the anchor's element count and last extent. */
static bool packable(const mcir_kernel_plan *kp, const mcir_tensor *t, const mcir_tensor *a, int depth) {
    if (depth > 64 || cg_tensor_dynamic(t) || mcir_tensor_numel(t) >= ((int64_t)1 << 31)) return false;
    bool path = t == a || cg_depends_on(kp, t, a);
    if (path && (t->rank < 1 || mcir_tensor_numel(t) != mcir_tensor_numel(a) ||
                 t->shape[t->rank - 1] != a->shape[a->rank - 1]))
        return false;
    if (t == a) return true;
    mcir_node *n = cg_region_producer(kp, t);
    if (!n) return true;
    if (!path) return true;   /* beside the path: flat, as anywhere */
    if (!(mcir_op_desc_of(n->op)->flags & MCIR_OPF_ELEMENTWISE)) return false;
    for (int j = 0; j < n->n_inputs; j++)
        if (!packable(kp, n->inputs[j], a, depth + 1)) return false;
    return true;
}

bool cg_epilogue_packable(const cg_emitter *e) {
    const mcir_kernel_plan *kp = e->kp;
    const mcir_tensor *a = e->anchor_out;
    if (!a || a->rank < 2 || kp->n_writes < 1) return false;
    for (int w = 0; w < kp->n_writes; w++)
        if (!packable(kp, kp->writes[w], a, 0)) return false;
    return true;
}

bool cg_emit_epilogue_packed(cg_emitter *e, int min_writes) {
    MCIR_ASSERT(cg_epilogue_packable(e));
    const mcir_kernel_plan *kp = e->kp;
    /* the flat checks and errors first (every write's path), then the
     * packed functions */
    for (int w = 0; w < kp->n_writes; w++) {
        const char *why = "";
        const mcir_tensor *t = kp->writes[w];
        if (!cg_depends_on(kp, t, e->anchor_out) || !epilogue_path_ok(kp, t, e->anchor_out, &why))
            return cg_emit_epilogue(e, min_writes);   /* reports it */
    }
    if (kp->n_writes < min_writes) return cg_emit_epilogue(e, min_writes);
    packed = true;
    pk_kp = kp;
    pk_anchor = e->anchor_out;
    bool ok = true;
    for (int w = 0; w < kp->n_writes && ok; w++) ok = cg_emit_value(e, kp->writes[w]);
    packed = false;
    pk_kp = NULL;
    pk_anchor = NULL;
    if (!ok) return false;
    const mcir_tensor *a = e->anchor_out;
    cg_sb_printf(e->sb, "// index i packed: (row << 32) | column, %lld columns\n"
                        "__device__ __forceinline__ void epilogue(i64 i, float acc, MC_PARAMS) {\n"
                        "    const i64 f_ = (i64)((u64)i >> 32) * %lldLL + (i64)(u32)i;\n",
                 (long long)a->shape[a->rank - 1], (long long)a->shape[a->rank - 1]);
    for (int w = 0; w < kp->n_writes; w++) {
        const mcir_tensor *t = kp->writes[w];
        cg_sb_printf(e->sb, "    mc_st_%s(w%d, f_, p%d(i, acc, MC_ARGS));\n", cg_dsuffix(t->dtype), w, t->id);
    }
    cg_sb_puts(e->sb, "}\n");
    return true;
}

/* ------------------------------------------------ pair value functions */

static bool half_dtype(mcir_dtype d) { return d == MCIR_DTYPE_F16 || d == MCIR_DTYPE_BF16; }

/* Whether x's pair of values at columns (c, c + 1) of an operand index is
 * its own h<ID> pair: a 16-bit tensor on the anchor's path whose last dim
 * is t's (not broadcast over the columns; the path has no broadcasts of
 * the anchor's output, so its index is t's). */
static bool pair_own(const mcir_tensor *x, const mcir_tensor *t) {
    return half_dtype(x->dtype) && pk_own(x) && cg_region_producer(pk_kp, x) != NULL &&
           cg_depends_on(pk_kp, x, pk_anchor) && x->rank >= 1 && t->rank >= 1 &&
           x->shape[x->rank - 1] == t->shape[t->rank - 1];
}

static bool emit_pair(cg_emitter *e, const mcir_tensor *t);

/* h<ID>(i, a0, a1): t's values at packed index i (an even column) and the
 * next column, the anchor's accumulators there a0 and a1, as one 32-bit
 * pair of t's 16-bit dtype (lo: column i). An add, subtract or multiply of
 * two such pairs is one f16x2 / bf16x2 instruction (the same bits as the
 * f32 op of the halves rounded: f32 holds 2p + 2 bits of either type);
 * another elementwise op runs its f32 body on each half (lane mode) and
 * the pack rounds once (but a ReLU of a pair of its dtype: one max.NaN
 * a half, mc_relu2_*); anything else packs its two scalar values. */
static bool emit_pair(cg_emitter *e, const mcir_tensor *t) {
    if (e->done[t->id] & DONE_PAIR) return true;
    cg_sb *b = e->sb;
    const char *ds = cg_dsuffix(t->dtype);
    mcir_node *n = t == e->anchor_out ? NULL : cg_region_producer(e->kp, t);
    if (n && (mcir_op_desc_of(n->op)->flags & MCIR_OPF_ELEMENTWISE) && n->n_inputs <= 8)
        for (int j = 0; j < n->n_inputs; j++)
            if (pair_own(n->inputs[j], t) && !emit_pair(e, n->inputs[j])) return false;
    e->done[t->id] |= DONE_PAIR;
    cg_sb_printf(b, "// %s as a pair of columns\n"
                    "__device__ __forceinline__ u32 h%d(i64 i, float a0, float a1, MC_PARAMS) {\n    (void)i;\n",
                 t->name, t->id);
    if (t == e->anchor_out) {
        cg_sb_printf(b, "    return mc_pack_%s(a0, a1);\n}\n", ds);
        return true;
    }
    const value_emitter *ve = n ? value_emitter_of(n->op) : NULL;
    if (!n || !ve || !(mcir_op_desc_of(n->op)->flags & MCIR_OPF_ELEMENTWISE) || n->n_inputs > 8) {
        cg_sb_printf(b, "    return mc_pack_%s(p%d(i, a0, MC_ARGS), p%d(i + 1, a1, MC_ARGS));\n}\n", ds, t->id, t->id);
        return true;
    }
    /* the operands: own pairs (q<j>_), or two values from their scalar
     * functions (the second at the next column's index) */
    bool all_pairs = true;
    for (int j = 0; j < n->n_inputs; j++) {
        const mcir_tensor *x = n->inputs[j];
        cg_sb ix = {0};
        emit_bcast_index(&ix, t, x, "i", "j_");
        cg_sb_printf(b, "    u32 q%d_ = 0u; float a%d_[2];\n    {\n    ", j, j);
        sb_indented(b, ix.s, "    ");
        cg_sb_free(&ix);
        const int ri = cg_region_producer(e->kp, x) ? -1 : cg_read_index(e->kp, x);
        if (ri >= 0 && half_dtype(x->dtype) && x->rank >= 1 && x->shape[x->rank - 1] == t->shape[t->rank - 1]) {
            /* a kernel read's two columns: its bits as they are (no
             * conversion there and back), the second element next to the first */
            cg_sb_puts(b, "        const i64 f_ = ");
            sb_pk_flat(b, x, "j_");
            if (x->shape[x->rank - 1] % 2 == 0)
                /* f_ even (an even column of a row of even length) and the
                 * read's base 16-byte aligned (the arena's 256, the
                 * runtime's inputs and weights 16; an alias shares its
                 * root's base): one 32-bit load */
                cg_sb_printf(b, ";\n        q%d_ = MC_GLDV(u32, r%d, f_);\n", j, ri);
            else
                cg_sb_printf(b, ";\n        q%d_ = (u32)MC_GLD(r%d, f_) | ((u32)MC_GLD(r%d, f_ + 1) << 16);\n", j, ri, ri);
            cg_sb_printf(b, "        a%d_[0] = mc_%s_to_f32((unsigned short)(q%d_ & 0xffffu));\n"
                            "        a%d_[1] = mc_%s_to_f32((unsigned short)(q%d_ >> 16));\n",
                         j, cg_dsuffix(x->dtype), j, j, cg_dsuffix(x->dtype), j);
        } else if (pair_own(x, t)) {
            cg_sb_printf(b, "        q%d_ = h%d(j_, a0, a1, MC_ARGS);\n", j, x->id);
            cg_sb_printf(b, "        a%d_[0] = mc_%s_to_f32((unsigned short)(q%d_ & 0xffffu));\n"
                            "        a%d_[1] = mc_%s_to_f32((unsigned short)(q%d_ >> 16));\n",
                         j, cg_dsuffix(x->dtype), j, j, cg_dsuffix(x->dtype), j);
        } else {
            all_pairs = all_pairs && half_dtype(x->dtype);
            cg_sb ix1 = {0};
            emit_bcast_index(&ix1, t, x, "(i + 1)", "k_");
            cg_sb_puts(b, "    ");
            sb_indented(b, ix1.s, "    ");
            cg_sb_free(&ix1);
            cg_sb_printf(b, "        { const float acc = a0; a%d_[0] = ", j);
            sb_operand(b, x, "j_");
            cg_sb_printf(b, "; }\n        { const float acc = a1; a%d_[1] = ", j);
            sb_operand(b, x, "k_");
            cg_sb_puts(b, "; }\n");
            if (half_dtype(x->dtype))   /* exact: the values are of x's dtype */
                cg_sb_printf(b, "        q%d_ = mc_pack_%s(a%d_[0], a%d_[1]);\n", j, cg_dsuffix(x->dtype), j, j);
        }
        cg_sb_puts(b, "    }\n");
    }
    const char *op2 = n->op == MCIR_OP_ADD ? "add" : n->op == MCIR_OP_SUB ? "sub" : n->op == MCIR_OP_MUL ? "mul" : NULL;
    bool same = n->n_inputs == 2;
    for (int j = 0; j < n->n_inputs && same; j++) same = n->inputs[j]->dtype == t->dtype;
    if (op2 && same && all_pairs) {
        cg_sb_printf(b, "    (void)a0_; (void)a1_;\n    return mc_%s2_%s(q0_, q1_);\n}\n", op2, ds);
        return true;
    }
    /* ReLU of a pair of its own dtype: max.NaN(x, +0) a half (mc_relu2_*) */
    if (n->op == MCIR_OP_RELU && n->n_inputs == 1 && n->inputs[0]->dtype == t->dtype && all_pairs) {
        cg_sb_printf(b, "    (void)a0_;\n    return mc_relu2_%s(q0_);\n}\n", ds);
        return true;
    }
    for (int j = 0; j < n->n_inputs; j++) cg_sb_printf(b, "    (void)q%d_;\n", j);
    cg_sb body = {0};
    lanes = true;
    ve->emit(&body, n, t, ve->expr || ve->iexpr ? operand_expr(ve, n) : NULL);
    lanes = false;
    cg_sb_puts(b, "    float o_[2];\n#pragma unroll\n    for (int u = 0; u < 2; u++) {\n    ");
    sb_indented(b, body.s ? body.s : "", "    ");
    cg_sb_printf(b, "        o_[u] = r_;\n    }\n    return mc_pack_%s(o_[0], o_[1]);\n}\n", ds);
    cg_sb_free(&body);
    return true;
}

bool cg_emit_pair_value(cg_emitter *e, const mcir_tensor *w) {
    if (!e->ok || !half_dtype(w->dtype) || !cg_epilogue_packable(e)) return false;
    packed = true;
    pk_kp = e->kp;
    pk_anchor = e->anchor_out;
    bool ok = emit_pair(e, w);
    packed = false;
    pk_kp = NULL;
    pk_anchor = NULL;
    return ok;
}

/* Value lane k (a C expression) of write t's vector at element i: vals[k]
 * where the caller computed them into array vals, else its value
 * function at i + k over the anchor's acc[k]. */
static void sb_lane_value(cg_sb *b, const mcir_tensor *t, const char *vals, const char *k) {
    if (vals) cg_sb_printf(b, "%s[%s]", vals, k);
    else cg_sb_printf(b, "v%d(i + %s, acc[%s], MC_ARGS)", t->id, k, k);
}

void cg_emit_store_vec(cg_sb *b, const mcir_tensor *t, int w, int vec, const char *vals) {
    const char *ds = cg_dsuffix(t->dtype);
    bool half = t->dtype == MCIR_DTYPE_F16 || t->dtype == MCIR_DTYPE_BF16;
    if (vec < 4 || vec % 4 || (!half && t->dtype != MCIR_DTYPE_F32)) {
        cg_sb_printf(b, "    for (int u = 0; u < %d; u++) mc_st_%s(w%d, i + u, ", vec, ds, w);
        sb_lane_value(b, t, vals, "u");
        cg_sb_puts(b, ");\n");
        return;
    }
    if (!half) {   /* f32: a float4 per 4 values */
        static const char *const lane[4] = {"q", "q + 1", "q + 2", "q + 3"}, *const field[4] = {"x", "y", "z", "w"};
        cg_sb_printf(b, "    for (int q = 0; q < %d; q += 4) {\n        float4 o_;\n", vec);
        for (int c = 0; c < 4; c++) {
            cg_sb_printf(b, "%so_.%s = ", c % 2 ? " " : "        ", field[c]);
            sb_lane_value(b, t, vals, lane[c]);
            cg_sb_puts(b, c % 2 ? ";\n" : ";");
        }
        cg_sb_printf(b, "        MC_GSTV(float4, w%d, i + q, o_);\n    }\n", w);
        return;
    }
    /* 16-bit: two values per 32-bit word, the chain applied per value first */
    cg_sb_printf(b, "    u32 p%d_[%d];\n    for (int u = 0; u < %d; u += 2)\n        p%d_[u / 2] = (u32)mc_f32_to_%s(",
                 w, vec / 2, vec, w, ds);
    sb_lane_value(b, t, vals, "u");
    cg_sb_printf(b, ") |\n                     ((u32)mc_f32_to_%s(", ds);
    sb_lane_value(b, t, vals, "u + 1");
    cg_sb_puts(b, ") << 16);\n");
    if (vec % 8 == 0)
        cg_sb_printf(b, "    for (int q = 0; q < %d; q += 4) {\n        uint4 o_;\n"
                        "        o_.x = p%d_[q]; o_.y = p%d_[q + 1]; o_.z = p%d_[q + 2]; o_.w = p%d_[q + 3];\n"
                        "        MC_GSTV(uint4, w%d, i + 2 * q, o_);\n    }\n",
                     vec / 2, w, w, w, w, w);
    else
        cg_sb_printf(b, "    for (int q = 0; q < %d; q += 2) {\n        uint2 o_;\n"
                        "        o_.x = p%d_[q]; o_.y = p%d_[q + 1];\n"
                        "        MC_GSTV(uint2, w%d, i + 2 * q, o_);\n    }\n",
                     vec / 2, w, w, w);
}

void cg_emit_epilogue_vec(cg_emitter *e, int vec) {
    const mcir_kernel_plan *kp = e->kp;
    cg_sb_printf(e->sb, "__device__ __forceinline__ void epilogue_v(i64 i, const float* acc, MC_PARAMS) {\n");
    for (int w = 0; w < kp->n_writes; w++) {
        /* the template's own result written as it is: rounded once, by the
         * store's conversion (its value function would round it to the
         * dtype first, then the store again: f32 -> f16 -> f32 -> f16) */
        const mcir_tensor *t = kp->writes[w];
        bool raw = t == e->anchor_out && mcir_value_type_of(t->dtype) != MCIR_VALUE_I64;
        cg_emit_store_vec(e->sb, t, w, vec, raw ? "acc" : NULL);
    }
    cg_sb_puts(e->sb, "}\n");
}
