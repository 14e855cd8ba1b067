/*
 * launch_gemm_sm90.c — the launch model of the sm_90a GEMM template
 * (launch_gemm_sm90.h). The rules are what the TMA and wgmma need: f16 /
 * bf16 operands stored as the template reads them (A [m, k] or, transposed,
 * [k, m]; B [k, n] or, transposed, [n, k]), rows of a multiple of 16 bytes, one
 * batch stride per operand (or none: shared by every batch).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelplan/launch_gemm_sm90.h"

/* The fraction of the tensor cores' dense peak (989 TF/s f16 / bf16)
 * this template sustains, measured on an H200 (2026-11-27, commit
 * 7bfcae3, bench_gemm with MCIR_NO_CUBLAS=1, docs/kernelplan.md "Measured
 * on an H200"): 569-587 TF/s on plain 4096^3 products, 0.58 (it was
 * modelled at 0.75, FlashAttention-3's wgmma forward, before a GPU ran
 * it). At 8192^3 it fell to 412-421 (0.42) with 64-column tiles (the
 * wave count chose them; mcir_gemm_sm90_tile_rate now prices them) in
 * row-major order (grouped since, group_m_of). With a fused
 * elementwise prologue the whole product ran at 148 TF/s (Llama-7B's
 * SwiGLU down projection at 8192 tokens), 0.26 of the plain rate at that
 * size: SM90_GEMM_PROLOGUE_RATE, until the prologue path is faster. */
#define SM90_GEMM_EFFICIENCY 0.58
#define SM90_GEMM_PROLOGUE_RATE 0.26
/* cuBLAS bf16 / f16 at 8192^3 on the same H200: 779 / 757 TF/s (0.79 /
 * 0.77 of 989); PyTorch's matmul (cuBLAS) 803 / 770. Pre-Hopper parts:
 * the published sm_89 figures of GEMM_SM80_ATTAINABLE's source put cuBLAS
 * at 0.88-0.96 of peak (not measured here). */
#define LIBRARY_FRACTION_SM90 0.78
#define LIBRARY_FRACTION_SM80 0.90

static bool is_half(mcir_dtype t) { return t == MCIR_DTYPE_F16 || t == MCIR_DTYPE_BF16; }

/* The tensor the kernel reads for operand t as stored: t itself (a plain
 * read), or the input of a folded transpose of the last two dims (flips
 * *trans); NULL for anything else (a prologue computes it, another view). */
static const mcir_tensor *stored_operand(const mcir_kernel_plan *k, const mcir_tensor *t, bool *trans) {
    const mcir_kernel_access *x = mcir_kernel_access_of(k, t);
    if (!x || x < k->read_access || x >= k->read_access + k->n_reads) return NULL;
    if (!x->folded) return x->tensor == t ? t : NULL;
    const mcir_node *f = x->folded;
    if (f->op != MCIR_OP_TRANSPOSE || f->inputs[0] != x->tensor || f->outputs[0] != t) return NULL;
    const int64_t *perm;
    int r = mcir_node_ints(f, "perm", &perm);
    if (r < 2) return NULL;
    for (int i = 0; i < r - 2; i++)
        if (perm[i] != i) return NULL;
    if (perm[r - 2] != r - 1 || perm[r - 1] != r - 2) return NULL;
    *trans = !*trans;
    return x->tensor;
}

static const mcir_node *producer_in(const mcir_kernel_plan *k, const mcir_tensor *t) {
    for (int i = 0; i < k->n_nodes; i++)
        for (int j = 0; j < k->nodes[i]->n_outputs; j++)
            if (k->nodes[i]->outputs[j] == t) return k->nodes[i];
    return NULL;
}

/* The epilogue's issue slots an output element takes a consumer thread
 * beyond a plain product's (whose store the measured mainloop rate
 * includes), from its ops: fitted to the SASS of GPT-2's c_fc shape
 * (2048 x 3072 x 768, BLOCK_N 128, two consumer groups; NVRTC 13 +
 * nvdisasm 13.5, the audit's item_instructions / 64 an element: a plain
 * product 3.2, + bias 4.0, + bias + ReLU 7.5 (4.1 since the ReLU runs on
 * column pairs, ReLU alone 3.8), + bias + tanh-GELU 12.5,
 * + bias + erf-GELU 30.6, + SiLU 9.7, + sigmoid 8.7, + exp 6.7, + tanh
 * 19.7, + a residual 7.3, bias + SiLU + residual 14.6). An add, subtract
 * or multiply runs on column pairs (half an instruction an element, 0.8
 * with a row vector's load), a residual's full-size read 4.1 (its
 * addresses), a ReLU of a 16-bit value 0.5 (max.NaN on the pair); any
 * other op computes in f32 (2 to unpack and pack, once)
 * and then its body: ReLU-like 1.5, exp / reciprocal 1.5, sigmoid 3.5,
 * SiLU 4.5, tanh-GELU 6.5 (ex2, rcp), libm forms 14.5 (tanh, erf, log,
 * pow, sqrt, sin, cos), erf-GELU 24.6. */
static double epilogue_issue(const mcir_kernel_plan *k, const mcir_gemm_sm90 *l) {
    double e = 0;
    bool f32 = false;
    for (int i = 0; i < k->n_nodes; i++) {
        const mcir_node *n = k->nodes[i];
        bool pro = false;
        for (int j = 0; j < l->prologue_ops; j++) pro = pro || l->prologue_node[j] == n;
        if (n == k->anchor || pro || n->op == MCIR_OP_TRANSPOSE || n->op == MCIR_OP_RESHAPE ||
            n->op == MCIR_OP_SLICE || n->op == MCIR_OP_SPLIT || !(mcir_op_desc_of(n->op)->flags & MCIR_OPF_ELEMENTWISE))
            continue;
        if (n->op == MCIR_OP_ADD || n->op == MCIR_OP_SUB || n->op == MCIR_OP_MUL) {
            double c = 0.5;
            for (int j = 0; j < n->n_inputs; j++) {
                const mcir_tensor *x = n->inputs[j];
                if (producer_in(k, x) || mcir_kernel_access_of(k, x) == NULL) continue;
                c = mcir_tensor_numel(x) >= l->m * l->n ? 4.1 : 0.8;
            }
            e += c;
            continue;
        }
        if (n->op == MCIR_OP_RELU && n->n_inputs == 1 && is_half(n->inputs[0]->dtype) &&
            n->inputs[0]->dtype == n->outputs[0]->dtype) {
            e += 0.5;
            continue;
        }
        f32 = true;
        switch (n->op) {
        case MCIR_OP_EXP: case MCIR_OP_RECIPROCAL: case MCIR_OP_RSQRT: case MCIR_OP_DIV: e += 1.5; break;
        case MCIR_OP_SIGMOID: e += 3.5; break;
        case MCIR_OP_SILU: e += 4.5; break;
        case MCIR_OP_GELU: e += strcmp(mcir_node_string(n, "approximate"), "tanh") == 0 ? 6.5 : 24.6; break;
        case MCIR_OP_TANH: case MCIR_OP_ERF: case MCIR_OP_LOG: case MCIR_OP_POW: case MCIR_OP_SQRT:
        case MCIR_OP_SIN: case MCIR_OP_COS: e += 14.5; break;
        default: e += 1.5;
        }
    }
    return e + (f32 ? 2.0 : 0.0);
}

static bool same_shape(const mcir_tensor *a, const mcir_tensor *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

static bool plain_read(const mcir_kernel_plan *k, const mcir_tensor *t) {
    const mcir_kernel_access *x = mcir_kernel_access_of(k, t);
    return x && x >= k->read_access && x < k->read_access + k->n_reads && !x->folded && x->tensor == t;
}

/* t holds A's K elements and nothing else, broadcast along A's rows and
 * batches: along the stored A's last dim ([K], [1, K], ...) where A is
 * stored [.., M, K]; along its rows ([K, 1], [1, K, 1], ...: one value per
 * stored row) where A is stored [.., K, M] (trans) */
static bool row_vector(const mcir_tensor *A, const mcir_tensor *t, bool trans) {
    if (trans) {
        const int64_t K = A->shape[A->rank - 2];
        return t->rank >= 2 && t->rank <= A->rank && t->shape[t->rank - 1] == 1 && t->shape[t->rank - 2] == K &&
               mcir_tensor_numel(t) == K;
    }
    const int64_t K = A->shape[A->rank - 1];
    return t->rank >= 1 && t->rank <= A->rank && t->shape[t->rank - 1] == K && mcir_tensor_numel(t) == K;
}

/* Leaf t of A's prologue (f16, bf16 or f32: a cast to A's dtype on the way
 * converts it as the chain reads it; a 16-bit leaf's box is laid out as A's,
 * an f32 leaf comes as two boxes of 32 columns, a_wide) as a TMA box: a tensor of A's shape
 * — a plain kernel read, or an output of a split along the last dim of
 * one (the gate and up halves of a horizontal GEMM's product) at a
 * 16-byte column offset — recorded in l (at most 2); or a row vector
 * (row_vector: a norm's weight) that is a plain read, l->v_leaf (at most
 * 1, and only where the stored A's last dim is >= 64: A's index in the
 * chain is box row * that dim + box column, and the vector's broadcast
 * index, that modulo K ([.., M, K]) or over it ([.., K, M], l->trans_a),
 * must be the box's column or row). */
static bool prologue_leaf(const mcir_kernel_plan *k, const mcir_tensor *A, const mcir_tensor *t, mcir_gemm_sm90 *l) {
    /* f16, bf16 or f32: a cast to A's dtype converts it as the chain reads it */
    if (!is_half(t->dtype) && t->dtype != MCIR_DTYPE_F32) return false;
    const int64_t es = (int64_t)mcir_dtype_size(t->dtype);
    if (!same_shape(t, A)) {
        /* its box's row: K elements, a multiple of 16 bytes (the TMA's stride unit) */
        const int64_t kdim = A->shape[A->rank - (l->trans_a ? 2 : 1)];
        if (!row_vector(A, t, l->trans_a) || !plain_read(k, t) || A->shape[A->rank - 1] < 64 || (kdim * es) % 16 != 0)
            return false;
        if (l->n_v == 1) return l->v_leaf == t;
        l->v_leaf = t;
        l->n_v = 1;
        return true;
    }
    for (int i = 0; i < l->n_a; i++)
        if (l->a_leaf[i] == t) return true;
    if (l->n_a == 2) return false;
    if (l->trans_a && es == 4) return false;   /* an f32 leaf's two boxes of 32 columns: K-major only */
    const mcir_tensor *root = t;
    int64_t col0 = 0;
    const mcir_node *p = producer_in(k, t);
    if (p) {
        const mcir_tensor *x = p->inputs[0];
        int axis = (int)mcir_node_int(p, "axis");
        if (axis < 0) axis += x->rank;
        /* the planner folds the split into the read: an access of x with t as its view */
        const mcir_kernel_access *acc = mcir_kernel_access_of(k, t);
        if (p->op != MCIR_OP_SPLIT || axis != x->rank - 1 || x->rank != t->rank || !acc || acc->folded != p ||
            acc->tensor != x || acc < k->read_access || acc >= k->read_access + k->n_reads)
            return false;
        const int64_t *sizes;
        int ns = mcir_node_ints(p, "sizes", &sizes), o = 0;
        while (o < p->n_outputs && p->outputs[o] != t) o++;
        if (o == p->n_outputs || ns != p->n_outputs) return false;
        for (int i = 0; i < o; i++) col0 += sizes[i];
        root = x;
    } else if (!plain_read(k, t)) {
        return false;
    }
    const int64_t width = root->shape[root->rank - 1];
    if ((col0 * es) % 16 != 0 || (width * es) % 16 != 0) return false;   /* the TMA's 16-byte base and stride */
    l->a_in[l->n_a] = root;
    l->a_leaf[l->n_a] = t;
    l->a_col0[l->n_a] = col0;
    l->a_width[l->n_a] = width;
    l->a_wide[l->n_a] = es == 4 ? 2 : 1;
    l->n_a++;
    return true;
}

/* A computed in the region by elementwise ops whose every operand has A's
 * shape but for a row vector leaf, from at most 2 leaves of A's shape and
 * one row vector the TMA reads (prologue_leaf): SwiGLU's silu(g) * u, a
 * norm's x * gamma, the prologues the rewrites fuse into a matmul. False
 * for anything else. */
static bool prologue_inputs(const mcir_kernel_plan *k, const mcir_tensor *A, const mcir_tensor *t, mcir_gemm_sm90 *l,
                            int depth) {
    if (t == l->row_scale) return true;   /* a factor the epilogue applies: 1 in the chain */
    const mcir_node *p = producer_in(k, t);
    if (!p || p->op == MCIR_OP_SPLIT) return t != A && prologue_leaf(k, A, t, l);
    if (depth > 16 || p->n_outputs != 1 || !(mcir_op_desc_of(p->op)->flags & MCIR_OPF_ELEMENTWISE) ||
        !same_shape(t, A) || mcir_value_type_of(t->dtype) != MCIR_VALUE_F32)
        return false;
    for (int j = 0; j < p->n_inputs; j++)
        if (!prologue_inputs(k, A, p->inputs[j], l, depth + 1)) return false;
    for (int i = 0; i < l->prologue_ops; i++)
        if (l->prologue_node[i] == p) return true;
    if (l->prologue_ops == 16) return false;
    l->prologue_node[l->prologue_ops++] = p;
    return true;
}

/* t holds one value per row of A ([.., M, 1]: M elements, or one column
 * of M per batch with A's leading dims): broadcast along A's K columns.
 * A stored [.., K, M] (trans): one value per stored column ([M], [1, M],
 * [.., 1, M]), the same scale of the logical A's rows. */
static bool row_scale_shape(const mcir_tensor *A, const mcir_tensor *t, bool trans) {
    if (trans) {
        if (t->rank < 1 || t->rank > A->rank || t->shape[t->rank - 1] != A->shape[A->rank - 1] ||
            (t->rank >= 2 && t->shape[t->rank - 2] != 1))
            return false;
    } else if (t->rank < 2 || t->rank > A->rank || t->shape[t->rank - 1] != 1 ||
               t->shape[t->rank - 2] != A->shape[A->rank - 2]) {
        return false;
    }
    int64_t lead = 1;
    for (int i = 0; i < t->rank - 2; i++) lead *= t->shape[i];
    if (lead == 1) return true;
    for (int i = 0; i < A->rank - 2; i++)
        if (t->rank != A->rank || t->shape[i] != A->shape[i]) return false;
    return true;
}

/* Used by nothing in the region but node `by` (and not written) */
static bool only_used_by(const mcir_kernel_plan *k, const mcir_tensor *t, const mcir_node *by) {
    for (int i = 0; i < k->n_nodes; i++)
        for (int j = 0; j < k->nodes[i]->n_inputs; j++)
            if (k->nodes[i]->inputs[j] == t && k->nodes[i] != by) return false;
    for (int w = 0; w < k->n_writes; w++)
        if (k->writes[w] == t) return false;
    return true;
}

/* A scale per row of A that the kernel reads (row_scale_shape) as a factor
 * of A: an input of a mul that computes t, t being A or reached from A
 * through muls of A's shape whose every intermediate only the next mul
 * reads. Sets l->row_scale; false when there is none. */
static bool find_row_scale(const mcir_kernel_plan *k, const mcir_tensor *A, const mcir_tensor *t, mcir_gemm_sm90 *l,
                           int depth) {
    const mcir_node *p = producer_in(k, t);
    if (!p || p->op != MCIR_OP_MUL || p->n_inputs != 2 || p->n_outputs != 1 || depth > 16 || !same_shape(t, A) ||
        mcir_value_type_of(t->dtype) != MCIR_VALUE_F32)
        return false;
    for (int j = 0; j < 2; j++) {
        const mcir_tensor *s = p->inputs[j], *x = p->inputs[1 - j];
        if (same_shape(x, A) && row_scale_shape(A, s, l->trans_a) && plain_read(k, s) &&
            mcir_value_type_of(s->dtype) == MCIR_VALUE_F32) {
            l->row_scale = s;
            l->row_scale_top = t == A;
            l->row_scale_other = x;
            return true;
        }
    }
    for (int j = 0; j < 2; j++)
        if (only_used_by(k, p->inputs[j], p) && find_row_scale(k, A, p->inputs[j], l, depth + 1)) return true;
    return false;
}

/* A = P * s (or s * P) with s a scale per row of A, A used by nothing in
 * the region but the product: P, with l->row_scale set (the product then
 * reads P as A and the epilogue scales its rows); s a factor deeper in a
 * chain of muls (RMSNorm's (x * s) * gamma): A, its prologue computing it
 * with s read as 1 (the box leaf code -2); else A. */
static const mcir_tensor *row_scale_factor(const mcir_kernel_plan *k, const mcir_tensor *A, mcir_gemm_sm90 *l) {
    if (!only_used_by(k, A, k->anchor) || !find_row_scale(k, A, A, l, 0)) return A;
    return l->row_scale_top ? l->row_scale_other : A;
}

/* Nothing in the region but A's prologue reads its leaves (the kernel
 * computes them from the boxes, for the prologue only). */
static bool leaves_private(const mcir_kernel_plan *k, const mcir_gemm_sm90 *l) {
    for (int i = 0; i < k->n_nodes; i++) {
        const mcir_node *x = k->nodes[i];
        bool pro = false;
        for (int j = 0; j < l->prologue_ops; j++) pro = pro || l->prologue_node[j] == x;
        if (pro) continue;
        for (int j = 0; j < x->n_inputs; j++)
            for (int a = 0; a < l->n_a; a++)
                if (x->inputs[j] == l->a_leaf[a]) return false;
    }
    for (int w = 0; w < k->n_writes; w++)
        for (int a = 0; a < l->n_a; a++)
            if (k->writes[w] == l->a_leaf[a]) return false;
    for (int i = 0; i < k->n_nodes && l->v_leaf; i++) {
        const mcir_node *x = k->nodes[i];
        bool pro = false;
        for (int j = 0; j < l->prologue_ops; j++) pro = pro || l->prologue_node[j] == x;
        for (int j = 0; j < x->n_inputs && !pro; j++)
            if (x->inputs[j] == l->v_leaf) return false;
    }
    return true;
}

/* Operand s has one matrix per batch with c's leading dims (true), or one
 * for all (false); -1 when neither. */
static int batched(const mcir_tensor *s, const mcir_tensor *c) {
    /* on the extents (polynomials over a graph's dims), not the sizes at
     * hand: an operand with a batch of 1 at some sizes only is batched */
    bool shared = true;
    for (int i = 0; i < s->rank - 2; i++) {
        mcir_extent e = mcir_tensor_extent(s, i);
        int64_t v;
        shared = shared && mcir_extent_is_const(&e, &v) && v == 1;
    }
    if (shared) return 0;
    if (s->rank != c->rank) return -1;
    for (int i = 0; i < c->rank - 2; i++) {
        mcir_extent es = mcir_tensor_extent(s, i), ec = mcir_tensor_extent(c, i);
        if (!mcir_extent_equal(&es, &ec)) return -1;
    }
    return 1;
}

/* The L2 bytes a wave of the grid (its first `grid` work items) touches
 * in the order of bands of g M tiles: the A panels (bm x K, one per
 * input of a prologue) of the rows of tiles it spans and the B panels
 * (K x bn) of its columns. Waves run their K steps nearly in lockstep, so
 * a wave reads each of these once from DRAM; what it shares with the next
 * wave stays in L2 only when the panels fit. */
static double wave_bytes(const mcir_gemm_sm90 *l, int64_t g) {
    const int64_t gm = g < l->tiles_m ? g : l->tiles_m;
    int64_t rows = (l->grid + l->tiles_n - 1) / l->tiles_n, cols = (l->grid + gm - 1) / gm;
    if (rows < gm) rows = gm;
    if (rows > l->tiles_m) rows = l->tiles_m;
    if (cols > l->tiles_n) cols = l->tiles_n;
    int64_t a_row = 0;   /* bytes of a row of A's leaves */
    for (int i = 0; i < l->n_a; i++) a_row += 2 * l->a_wide[i];
    return (double)rows * (double)(a_row * l->bm * l->k) + (double)cols * (double)(l->bn * l->k * 2);
}

/* GROUP_M, the band height of the tile order (the grouped ordering of
 * Triton's matmul tutorial, CUTLASS's threadblock swizzle): 1 where one
 * wave holds every item or there is one row or one column of tiles; 1
 * where a wave of row-major order fits half the L2 (all of B stays there:
 * A and B cross DRAM once); else the tallest band whose wave fits half the
 * L2 (the band's A panels stay while its waves walk the N tiles: B is
 * re-read once per band); else, when none fits, the band whose wave
 * touches the fewest bytes (ties: the lower). */
static int64_t tile_of(const mcir_tiling *t, const char *dim) {
    for (int i = 0; i < t->n_dims && i < MCIR_MAX_TILE_DIMS; i++)
        if (t->dim_names[i] && strcmp(t->dim_names[i], dim) == 0) return t->block_tile[i];
    return 0;
}

static int64_t group_m_of(const mcir_target *t, const mcir_gemm_sm90 *l) {
    if (l->tiles_m == 1 || l->tiles_n == 1 || l->items <= l->grid) return 1;
    const double half = (double)t->l2_bytes / 2;
    if (wave_bytes(l, 1) <= half) return 1;
    const int64_t most = l->tiles_m < l->grid ? l->tiles_m : l->grid;
    int64_t fit = 0, least = 1;
    for (int64_t g = 2; g <= most; g++) {
        const double w = wave_bytes(l, g);
        if (w <= half) fit = g;
        if (w < wave_bytes(l, least)) least = g;
    }
    return fit > 0 ? fit : least;
}

/* l's work items and grid with clusters of c blocks along M: tiles_m
 * rounded up to whole super-tiles of c M tiles (the odd pair's second tile
 * runs, wholly past M), the grid whole clusters, at most a wave of them. */
static void set_cluster(const mcir_target *t, mcir_gemm_sm90 *l, int c) {
    l->cluster = c;
    const int64_t units = l->batch * ((l->tiles_m + c - 1) / c) * l->tiles_n, slots = t->sm_count / c;
    l->items = units * c;
    l->grid = (units < slots ? units : slots) * c;
}

/* l as the grouped order sees it: a cluster's super-tile of c M tiles as
 * one tile of c bm rows, run by one block of a grid of clusters (its B
 * tile crosses L2 once for both blocks: the multicast) */
static mcir_gemm_sm90 unit_view(const mcir_gemm_sm90 *l) {
    mcir_gemm_sm90 u = *l;
    const int c = l->cluster > 1 ? l->cluster : 1;
    u.bm = l->bm * c;
    u.tiles_m = (l->tiles_m + c - 1) / c;
    u.items = l->items / c;
    u.grid = l->grid / c;
    return u;
}

/* The cluster along M (mcir_gemm_sm90.cluster) where the plan has none
 * yet: 1 where the template does not split B's tile between two blocks (a
 * conv) or no other block reads it (one M tile); MCIR_GEMM_CLUSTER=1 / 2 (tests) where it is legal; else 2 where
 * the modelled mainloop — the larger of the tensor cores' time over the
 * tiles run (an odd pair's empty tile included) and the SMs' L2 feed (B's
 * share halved by the multicast) — is shorter. *why: the reason. */
static int cluster_of(const mcir_target *t, const mcir_gemm_sm90 *l, const char **why) {
    if (l->conv) {
        *why = "one block a cluster: a conv's B boxes are the tap's image rows, not split between blocks";
        return 1;
    }
    if (l->tiles_m < 2) {
        *why = "one block a cluster: one M tile, no other block reads its B tiles";
        return 1;
    }
    if (t->sm_count < 2) {
        *why = "one block a cluster: one SM";
        return 1;
    }
    const char *force = getenv("MCIR_GEMM_CLUSTER");
    if (force && (strcmp(force, "1") == 0 || strcmp(force, "2") == 0)) {
        *why = force[0] == '2' ? "clusters of 2 blocks, as MCIR_GEMM_CLUSTER=2 says (the model not asked)"
                               : "one block a cluster, as MCIR_GEMM_CLUSTER=1 says (the model not asked)";
        return force[0] - '0';
    }
    mcir_gemm_sm90 c1 = *l, c2 = *l;
    set_cluster(t, &c1, 1);
    set_cluster(t, &c2, 2);
    const double f1 = mcir_gemm_sm90_feed_us(t, &c1), f2 = mcir_gemm_sm90_feed_us(t, &c2);
    const double u1 = mcir_gemm_sm90_compute_us(t, &c1), u2 = mcir_gemm_sm90_compute_us(t, &c2);
    const double m1 = u1 > f1 ? u1 : f1, m2 = u2 > f2 ? u2 : f2;
    if (m2 < m1 * (1 - 1e-9)) {
        *why = "clusters of 2 blocks: the modelled mainloop is shorter with B's L2 feed halved";
        return 2;
    }
    *why = f1 <= 0 ? "one block a cluster: the L2 feed is not modelled on this target"
                   : "one block a cluster: not modelled faster (the tensor cores' time bounds it, or an odd pair's "
                     "empty tile costs more than B's halved feed saves)";
    return 1;
}

/* The conv's operands and GEMM view (mcir_gemm_sm90.conv); false with why
 * for what keeps the mma.sync implicit GEMM. */
static bool conv_operands(const mcir_kernel_plan *k, mcir_gemm_sm90 *l, const char **why) {
    const mcir_node *n = k->anchor;
    const mcir_tensor *X = n->inputs[0], *Wv = n->inputs[1], *Y = n->outputs[0];
    if (X->rank != 4 || Wv->rank != 4 || Y->rank != 4) {
        *why = "not an NCHW conv";
        return false;
    }
    if (!is_half(X->dtype) || X->dtype != Wv->dtype) {
        *why = "input and weight not both f16 or both bf16";
        return false;
    }
    static const char *const one[] = {"strides", "dilations"};
    for (int a = 0; a < 2; a++) {
        const int64_t *v;
        if (mcir_node_attr(n, one[a]) && mcir_node_ints(n, one[a], &v) == 2 && (v[0] != 1 || v[1] != 1)) {
            *why = a == 0 ? "a stride other than 1 (the TMA boxes read rows of consecutive pixels)"
                          : "a dilation (the TMA boxes read rows of consecutive pixels)";
            return false;
        }
    }
    if (mcir_node_attr(n, "groups") && mcir_node_int(n, "groups") != 1) {
        *why = "a grouped conv";
        return false;
    }
    for (int i = 0; i < 4; i++) {
        mcir_extent ex = mcir_tensor_extent(X, i), ey = mcir_tensor_extent(Y, i);
        if (!mcir_extent_is_const(&ex, NULL) || !mcir_extent_is_const(&ey, NULL)) {
            *why = "a symbolic dim (the conv's boxes and segments are planned at integer sizes)";
            return false;
        }
    }
    /* the weight stored tap-major: W' = transpose(Wt [KH, KW, O, C], perm [2, 3, 0, 1]) folded into the read */
    const mcir_kernel_access *x = mcir_kernel_access_of(k, Wv);
    const int64_t *perm;
    if (!x || x < k->read_access || x >= k->read_access + k->n_reads || !x->folded ||
        x->folded->op != MCIR_OP_TRANSPOSE || x->folded->outputs[0] != Wv || x->folded->inputs[0] != x->tensor ||
        mcir_node_ints(x->folded, "perm", &perm) != 4 || perm[0] != 2 || perm[1] != 3 || perm[2] != 0 ||
        perm[3] != 1) {
        *why = "the weight is not read tap-major ([KH, KW, O, C]: the rule conv_kxk_tap_major repacks a constant "
               "one)";
        return false;
    }
    if (!plain_read(k, X)) {
        *why = "the input is not read as stored";
        return false;
    }
    const int64_t *pads;
    int64_t pt = 0, pl = 0;
    if (mcir_node_attr(n, "pads") && mcir_node_ints(n, "pads", &pads) == 4) pt = pads[0], pl = pads[1];
    l->cv_c = X->shape[1];
    l->cv_h = X->shape[2];
    l->cv_w = X->shape[3];
    l->cv_kh = Wv->shape[2];
    l->cv_kw = Wv->shape[3];
    l->cv_pt = pt;
    l->cv_pl = pl;
    l->cv_oh = Y->shape[2];
    l->cv_ow = Y->shape[3];
    if ((l->cv_w * 2) % 16 != 0) {
        *why = "the image's rows are not a multiple of 16 bytes (the TMA's stride unit)";
        return false;
    }
    if ((l->cv_c * 2) % 16 != 0) {
        *why = "the weight's rows (C channels) are not a multiple of 16 bytes (the TMA's stride unit)";
        return false;
    }
    l->cv_segw = (l->cv_ow + 63) / 64;
    l->cv_cb = (l->cv_c + 63) / 64;
    l->conv = true;
    l->a = l->a_in[0] = l->a_leaf[0] = l->a_value = x->tensor;
    l->b = X;
    l->n_a = 1;
    l->a_wide[0] = 1;   /* one 16-bit box per consumer group */
    l->a_width[0] = l->cv_c;
    l->m = Y->shape[1];
    l->n = l->cv_oh * l->cv_segw * 64;
    l->k = l->cv_kh * l->cv_kw * l->cv_cb * 64;
    l->batch = Y->shape[0];
    return true;
}

bool mcir_kernel_glu(const mcir_kernel_plan *k, const mcir_tensor *C, const mcir_tensor **half) {
    const mcir_tensor *h[2] = {NULL, NULL};
    int chain = 0;
    for (int i = 0; i < k->n_nodes; i++) {
        const mcir_node *x = k->nodes[i];
        int which = -1;
        if (x->op == MCIR_OP_RESHAPE && mcir_glu_half(x->outputs[0], &which) == C && !h[which]) h[which] = x->outputs[0];
    }
    if (!h[0] || !h[1]) return false;
    /* the steps between C and each half: C's readers are the two first
     * reshapes, each step's one reader the next */
    const mcir_tensor *s[2], *r[2];
    for (int q = 0; q < 2; q++) {
        s[q] = h[q]->producer->inputs[0];
        r[q] = s[q]->producer->inputs[0];
    }
    for (int i = 0; i < k->n_nodes; i++) {
        const mcir_node *x = k->nodes[i];
        for (int j = 0; j < x->n_inputs; j++) {
            const mcir_tensor *in = x->inputs[j];
            bool step = in == C, next = in == C && (x == r[0]->producer || x == r[1]->producer);
            for (int q = 0; q < 2; q++) {
                step = step || in == r[q] || in == s[q];
                next = next || (in == r[q] && x == s[q]->producer) || (in == s[q] && x == h[q]->producer);
            }
            if (step && !next) return false;
            chain += step;
        }
    }
    for (int w = 0; w < k->n_writes; w++)
        for (int q = 0; q < 2; q++)
            if (k->writes[w] == C || k->writes[w] == s[q] || k->writes[w] == r[q])
                return false;
    if (chain != 6) return false;
    if (half) half[0] = h[0], half[1] = h[1];
    return true;
}

/* Ping-pong consumer groups (mcir_gemm_sm90.pingpong) where the plan has
 * none yet: not where the template cannot (one consumer group; a
 * prologue, which each group computes for its own 64 rows of every item;
 * a conv; bn 256, whose item would be 256 accumulators a thread);
 * MCIR_GEMM_PINGPONG=0 / 1 (tests) where it can; else where the modelled
 * epilogue's exposed time (mcir_gemm_sm90_epilogue_us) is shorter. *why:
 * the reason. */
static bool pingpong_of(const mcir_target *t, const mcir_gemm_sm90 *l, const char **why) {
    if (l->consumers < 2) {
        *why = "cooperative: one consumer group";
        return false;
    }
    if (l->conv) {
        *why = "cooperative: a conv (its item's B boxes are the tap's image rows, read by both groups)";
        return false;
    }
    if (l->prologue) {
        *why = "cooperative: a prologue (each group computes A for its own 64 rows of the stage)";
        return false;
    }
    if (l->bn > 128) {
        *why = "cooperative: BLOCK_N 256 (a whole item would be 256 accumulators a thread)";
        return false;
    }
    const char *force = getenv("MCIR_GEMM_PINGPONG");
    if (force && (strcmp(force, "0") == 0 || strcmp(force, "1") == 0)) {
        *why = force[0] == '1' ? "ping-pong, as MCIR_GEMM_PINGPONG=1 says (the model not asked)"
                               : "cooperative, as MCIR_GEMM_PINGPONG=0 says (the model not asked)";
        return force[0] == '1';
    }
    mcir_gemm_sm90 co = *l, pp = *l;
    co.pingpong = false;
    pp.pingpong = true;
    const double e0 = mcir_gemm_sm90_epilogue_us(t, &co), e1 = mcir_gemm_sm90_epilogue_us(t, &pp);
    if (e1 < e0 * (1 - 1e-9)) {
        *why = "ping-pong: the modelled epilogue runs under the other group's mainloop";
        return true;
    }
    *why = e0 <= 0 ? "cooperative: no epilogue beyond a plain store to hide"
                   : "cooperative: a wave of items or less (no next mainloop for an epilogue to run under)";
    return false;
}

/* The N tile: the fewest waves of work items times the tile's time (the
 * wasted columns of a partial tile included): a tile of BN columns runs at
 * mcir_gemm_sm90_tile_rate(BN) of the 256-column tile's rate (its wgmmas
 * read A and B from shared memory: bytes per flop grow as 1/64 + 1/BN);
 * ties take the wider tile (A re-read less often). Counting waves alone
 * picked 64 columns for 8192^3 (62.1 waves against 15.5), which ran at
 * 0.42 of peak on an H200 where 4096^3 at 256 ran at 0.58. rows: the
 * work items' count per N tile (batches x M tiles). */
static int64_t best_bn(const mcir_target *t, int64_t rows, int64_t n, int64_t least) {
    double best = -1;
    int64_t pick = least;
    for (int64_t bn = 256; bn >= least; bn /= 2) {
        if (bn > 64 && bn / 2 >= n) continue;   /* more than half empty */
        int64_t items = rows * ((n + bn - 1) / bn);
        int64_t waves = (items + t->sm_count - 1) / t->sm_count;
        double cost = (double)(waves * bn) / mcir_gemm_sm90_tile_rate(bn);
        if (best < 0 || cost < best * (1 - 1e-9)) {
            best = cost;
            pick = bn;
        }
    }
    return pick;
}

bool mcir_gemm_sm90_layout(const mcir_target *t, const mcir_kernel_plan *k, mcir_gemm_sm90 *l, const char **why) {
    memset(l, 0, sizeof *l);
    const char *no = NULL;
    const mcir_node *n = k->anchor;
    if (!t || !t->has_wgmma) no = "the target has no wgmma";
    else if (k->tpl == MCIR_TEMPLATE_CONV2D && n && n->op == MCIR_OP_CONV2D) {
        if (!conv_operands(k, l, &no)) {
            if (why) *why = no;
            return false;
        }
        const int64_t lim = (int64_t)1 << 31;
        if (l->m < 1 || l->n < 1 || l->batch < 1) no = "an empty conv";
        else if (l->m >= lim || l->n >= lim || l->k >= lim || l->batch >= lim) no = "a dimension past 2^31";
        if (no) {
            if (why) *why = no;
            return false;
        }
        l->b_batched = true;
        goto tiles;
    } else if (k->tpl != MCIR_TEMPLATE_MATMUL || !n || n->op != MCIR_OP_MATMUL) no = "not a matmul";
    if (no) {
        if (why) *why = no;
        return false;
    }
    const mcir_tensor *A = n->inputs[0], *B = n->inputs[1], *C = n->outputs[0];
    bool ta = mcir_node_bool(n, "transpose_a"), tb = mcir_node_bool(n, "transpose_b");
    /* a prologue's leaves are stored as A is: [.., K, M] under transpose_a
     * (its broadcasts read in that layout: row_vector, row_scale_shape) */
    l->trans_a = ta;
    if (A->rank < 2 || B->rank < 2 || C->rank < 2) no = "a rank-1 operand";
    else if (!is_half(A->dtype) || A->dtype != B->dtype) no = "operands not both f16 or both bf16";
    else if (!(l->a = stored_operand(k, (l->a_value = row_scale_factor(k, A, l)), &ta)) &&
             (!prologue_inputs(k, l->a_value, l->a_value, l, 0) || l->n_a == 0 || !leaves_private(k, l)))
        no = ta ? "A (stored [K, M], transpose_a) is not read as stored nor computed elementwise from at most 2 "
                  "stored f16 / bf16 tensors of its shape (no f32: its boxes are K-major) and one stored vector of its K "
                  "elements per stored row "
                  "([K, 1], with M >= 64), times at most one scale per row of the product ([M], [1, M]: one per "
                  "stored column) (a view, another broadcast, a cast from a wider dtype or a transpose computes it)"
             : "A is not read as stored nor computed elementwise from at most 2 stored f16 / bf16 / f32 tensors of "
               "its shape and one stored vector of its K >= 64 elements, times at most one scale per row [M, 1] (a "
               "view, another broadcast, a cast from a wider dtype or a transpose computes it)";
    else if (!(l->b = stored_operand(k, B, &tb)))
        no = "B is not read as stored or as a transpose of the last two dims (a prologue or a view computes it)";
    if (no) {
        if (why) *why = no;
        return false;
    }
    if (l->a) {
        l->n_a = 1;
        l->a_in[0] = l->a_leaf[0] = l->a;
        l->a_wide[0] = 1;
    } else {
        l->prologue = true;
        l->a = l->a_leaf[0];
    }
    /* ta: A stored [k, m] (the node's transpose_a xor a folded transpose) */
    l->trans_a = ta;
    l->trans_b = tb;
    const bool node_ta = mcir_node_bool(n, "transpose_a");
    l->m = A->shape[A->rank - (node_ta ? 1 : 2)];
    l->k = A->shape[A->rank - (node_ta ? 2 : 1)];
    if (!l->prologue) l->a_width[0] = ta ? l->m : l->k;
    l->n = C->shape[C->rank - 1];
    l->glu = mcir_kernel_glu(k, C, l->glu_half);
    int64_t mn = l->m * l->n;
    l->batch = mn > 0 ? mcir_tensor_numel(C) / mn : 1;
    int ab = batched(l->a, C), bb = batched(l->b, C);
    const int64_t lim = (int64_t)1 << 31;
    if (l->m < 1 || l->n < 1 || l->k < 1 || l->batch < 1) no = "an empty product";
    else if (ab < 0 || bb < 0) no = "an operand's batch dims are neither C's nor absent";
    else if (l->m >= lim || l->n >= lim || l->k >= lim || l->batch >= lim) no = "a dimension past 2^31";
    else if (((ta ? l->m : l->k) * 2) % 16 != 0) no = "A's rows are not a multiple of 16 bytes (the TMA's stride unit)";
    else if (((tb ? l->k : l->n) * 2) % 16 != 0) no = "B's rows are not a multiple of 16 bytes (the TMA's stride unit)";
    if (no) {
        if (why) *why = no;
        return false;
    }
    if (l->row_scale) {
        const int sb = batched(l->row_scale, C);
        if (sb < 0) {
            if (why) *why = "the per-row scale's batch dims are neither C's nor absent";
            return false;
        }
        l->row_scale_batched = sb == 1;
    }
    l->a_batched = ab == 1;
    l->b_batched = bb == 1;
tiles:;
    /* Once the plan chose this template (its tiling has "wg"), the choices
     * that depend on the sizes — consumer groups, the N tile, the grouped
     * order — are the plan's, made at the largest sizes: a kernel of a
     * graph whose dims range over sizes is generated again at other sizes
     * with the same ones (docs/kernelplan.md, "Symbolic dimensions") */
    const int64_t planned_wg = tile_of(&k->tiling, "wg");
    l->consumers = planned_wg > 0 ? (int)planned_wg : l->m > 64 ? 2 : 1;
    l->bm = 64 * l->consumers;
    l->bk = 64;
    l->tiles_m = (l->m + l->bm - 1) / l->bm;
    /* the N tile: the plan's, or the fewest waves times the tile's time (best_bn) */
    if (planned_wg > 0) {   /* the plan's */
        for (int64_t bn = 256; bn >= 64; bn /= 2)
            if (bn == tile_of(&k->tiling, "N")) l->bn = bn;
    } else
        /* a paired epilogue's tile of 64 columns makes 32 output columns,
         * narrower than the TMA store's box: 128 at least where the product
         * has 256 columns (per-thread stores of such tiles with unchecked
         * bounds made ptxas serialise every wgmma: advisory C7514) */
        l->bn = best_bn(t, l->batch * l->tiles_m, l->n, l->glu && l->n >= 256 ? 128 : 64);
    l->tiles_n = (l->n + l->bn - 1) / l->bn;
    l->items = l->batch * l->tiles_m * l->tiles_n;
    /* the output: through shared memory and the TMA where its one write
     * is f16 / bf16 (a box element of 2 bytes) with rows of a multiple of
     * 16 bytes (the TMA's stride unit); element i of the write is element
     * i of C (the epilogue is elementwise and reshapes) */
    const mcir_tensor *W = k->n_writes == 1 ? k->writes[0] : NULL;
    if (l->conv) l->store = "per-thread stores (a conv's pixels: row segments of 64, masked past the row)";
    else if (k->n_writes != 1) l->store = "per-thread stores (the region writes more than one tensor)";
    else if (!is_half(W->dtype)) l->store = "per-thread stores (the output is not f16 or bf16)";
    else if (((l->glu ? l->n / 2 : l->n) * 2) % 16 != 0)
        l->store = "per-thread stores (the output's rows are not a multiple of 16 bytes)";
    else if (l->glu && l->bn < 128)
        l->store = "per-thread stores (a paired epilogue's tile of 64 columns makes 32 output columns: narrower than "
                   "a TMA box)";
    else l->tma_store = true;
    /* a stage: the A and B boxes in the ring (A's tile of its own first
     * where leaf 0 is f32, then each leaf's boxes: 8 KiB per consumer group,
     * twice that for an f32 leaf), the vector's box after it */
    l->a_out = l->prologue && l->a_wide[0] == 2;
    l->a_bytes = l->a_out ? l->consumers * 64 * 128 : 0;
    for (int i = 0; i < l->n_a; i++) {
        l->a_at[i] = l->a_bytes;
        l->a_bytes += l->consumers * l->a_wide[i] * 64 * 128;
    }
    l->v_esize = l->n_v ? (int)mcir_dtype_size(l->v_leaf->dtype) : 0;
    l->v_bytes = l->n_v * l->bk * l->v_esize;
    const int64_t stage = l->a_bytes + l->bn * l->bk * 2 + l->v_bytes, room = t->smem_per_block_optin - 1024;
    l->o_bytes = l->tma_store ? l->consumers * 2 * 64 * 128 : 0;
    if (l->tma_store && (room - l->o_bytes) / stage < 2) {
        l->tma_store = false;
        l->o_bytes = 0;
        l->store = "per-thread stores (the output boxes and two stages do not fit in shared memory)";
    }
    if (l->tma_store) l->store = "TMA stores of 64 x 64 boxes through shared memory";
    l->stages = (int)((room - l->o_bytes) / stage < 6 ? (room - l->o_bytes) / stage : 6);
    if (l->stages < 2) {
        if (why) *why = "two stages of the ring do not fit in shared memory";
        return false;
    }
    l->smem_bytes = l->stages * stage + l->o_bytes + 1024;
    l->threads = 128 * (1 + l->consumers);
    /* the cluster: the plan's, else where it pays (cluster_of); the grid
     * whole clusters */
    const int64_t planned_cluster = tile_of(&k->tiling, "cluster");
    if (planned_wg > 0) {
        set_cluster(t, l, planned_cluster == 2 ? 2 : 1);
        l->cluster_why = "the plan's";
    } else {
        set_cluster(t, l, cluster_of(t, l, &l->cluster_why));
    }
    /* the tile order over the cluster's super-tiles (cluster 2: pairs of M
     * tiles, which a wave of clusters reads as one block of 2 bm rows would) */
    const mcir_gemm_sm90 units = unit_view(l);
    l->group_m = planned_wg > 0 && tile_of(&k->tiling, "group_m") > 0 ? tile_of(&k->tiling, "group_m")
                                                                       : group_m_of(t, &units);
    l->wave_bytes = wave_bytes(&units, l->group_m);
    /* what ptxas allocates (CUDA 13; tests/test_gemm_sm90.c's sweep of 110
     * shapes, test_glu.c's, test_conv_sm90.c's). Since the consumer group's
     * index and the cluster rank are warp-uniform (mc_warp_uniform: the
     * descriptors' and the TMA stores' arithmetic in uniform registers) and
     * the output boxes are written by stmatrix, the epilogue and prologue
     * add little: 58-66 at bn 64 whatever is fused (bias, GELU, residual,
     * row scales, norm weights, casts, f32 leaves), except a prologue's
     * SiLU (its SFU chains' temporaries: 58-72, 6 more), a row vector
     * (58-70, 2 more) — neither where A is stored [K, M] (58-63) — and an
     * f32 leaf's cast with a row scale and one consumer group (70, 10
     * more); 90-110 at bn 128 (pairs,
     * paired GLU epilogues, convs: 5/4 a thread's accumulator beyond 32);
     * two consumer groups at bn 256 take setmaxnreg's 168, one 155 (a GLU
     * at 16 tokens). Before, 58-85 at bn 64 and 104-146 at 128, fitted
     * term by term. */
    const bool wide = l->prologue && (l->a_wide[0] == 2 || (l->n_a > 1 && l->a_wide[1] == 2));
    int silus = 0;
    for (int i = 0; i < l->prologue_ops; i++) silus += l->prologue_node[i]->op == MCIR_OP_SILU;
    l->a_vec = l->prologue && !wide && !l->n_v && !l->row_scale;
    const char *rs_env = getenv("MCIR_GEMM_PROLOGUE_RS");
    l->prologue_rs = l->a_vec && !l->trans_a && !(rs_env && strcmp(rs_env, "0") == 0);
    l->epi_issue = epilogue_issue(k, l);
    /* ping-pong: the plan's, else where it pays (pingpong_of) */
    const int64_t planned_pp = tile_of(&k->tiling, "pingpong");
    if (planned_wg > 0) {
        l->pingpong = planned_pp == 1;
        l->pingpong_why = "the plan's";
    } else
        l->pingpong = pingpong_of(t, l, &l->pingpong_why);
    /* a consumer thread's accumulators: bn / 2 (its group's 64 rows of the
     * item), bn with ping-pong (the item's 128 rows). 384 threads get 168
     * registers each from the 64 K file: enough for 64 accumulators and
     * the fragment addressing; at 128 two consumer groups take 232 with
     * setmaxnreg and the producer gives back to 40 (40 + 2 x 232 = 3 x
     * 168). One consumer group: 256 threads, up to 255 each. */
    const int64_t acc = l->pingpong ? l->bn : l->bn / 2;
    l->producer_regs = l->consumers > 1 && acc > 64 ? 40 : 0;
    l->consumer_regs = l->consumers > 1 && acc > 64 ? 232 : 0;
    int regs = 60 + (int)(acc - 32) * 5 / 4 + (silus && !l->trans_a ? 6 : 0);
    if (wide && l->row_scale && l->consumers == 1) regs += 10;
    if (l->n_v && !l->trans_a) regs += 2;
    if (l->prologue_rs) regs += 8;   /* the step's 16 A fragment registers beside the chain's values */
    if (l->glu && l->bn == 256) regs = 156;
    l->registers = l->consumer_regs > 0 ? 168 : regs < 255 ? regs : 255;
    /* setmaxnreg shares out the block's registers at entry: never more */
    MCIR_ASSERT(128 * (l->producer_regs + l->consumers * l->consumer_regs) <= l->threads * 168 ||
                l->consumer_regs == 0);
    if (why) *why = NULL;
    return true;
}

/* The epilogue's time beyond a plain store. An item's: its consumer
 * threads' output elements (a group's 64 rows a row block: 16 rows of BN
 * columns a warp, a paired epilogue's output half as wide) times the
 * issue slots an element, the warps of a scheduler (one a group and row
 * block) in turn. Cooperative: after every item's mainloop. Ping-pong:
 * under the other group's mainloop (an item's share of the block's
 * tensor time), so only the block's last item's shows, and what an item's
 * exceeds that share: the two groups' epilogue and mainloop alternate,
 * an item every (mainloop + epilogue) / 2 where that is the longer. */
double mcir_gemm_sm90_epilogue_us(const mcir_target *t, const mcir_gemm_sm90 *l) {
    if (!t || t->clock_ghz <= 0 || t->sm_count < 1 || l->epi_issue <= 0) return 0;
    const int64_t waves = (l->items + t->sm_count - 1) / t->sm_count;
    const double per_thread = (double)(l->glu ? l->bn / 4 : l->bn / 2);
    const double item = (double)l->consumers * per_thread * l->epi_issue / (t->clock_ghz * 1e3);
    if (!l->pingpong) return (double)waves * item;
    const double main = mcir_gemm_sm90_compute_us(t, l) / (double)waves;
    return item + (double)(waves - 1) * (item > main ? (item - main) / 2 : 0.0);
}

double mcir_gemm_sm90_feed_us(const mcir_target *t, const mcir_gemm_sm90 *l) {
    if (!t || t->l2_gbps <= 0 || t->sm_count < 1) return 0;
    const int c = l->cluster > 1 ? l->cluster : 1;
    const int64_t slots = t->sm_count / c * c, waves = (l->items + slots - 1) / slots;
    const int64_t steps = (l->k + l->bk - 1) / l->bk;
    /* a K step's boxes a block receives: A's leaves (not A's own tile: the
     * consumers compute it), the row vector, B's tile over the cluster */
    const double a = (double)(l->a_bytes - (l->a_out ? l->consumers * 64 * 128 : 0)) + (double)l->v_bytes;
    const double b = (double)(l->bn * l->bk * 2) / c;
    const double per_sm = t->l2_gbps * 1e3 / (double)t->sm_count;   /* bytes per us */
    return (double)waves * (double)steps * (a + b) / per_sm;
}

double mcir_gemm_sm90_tile_rate(int64_t bn) {
    return (1.0 / 64 + 1.0 / 256) / (1.0 / 64 + 1.0 / (double)bn);
}

double mcir_gemm_sm90_compute_us(const mcir_target *t, const mcir_gemm_sm90 *l) {
    double tc = t->bf16_tc_tflops;   /* f16 and bf16 share the dense rate on these parts */
    double sm_peak = tc * 1e6 / (double)t->sm_count * SM90_GEMM_EFFICIENCY * mcir_gemm_sm90_tile_rate(l->bn) *
                     (l->prologue ? SM90_GEMM_PROLOGUE_RATE : 1.0);   /* flop/us per SM */
    int64_t kpad = (l->k + l->bk - 1) / l->bk * l->bk;
    double tile_flops = 2.0 * (double)(l->bm * l->bn) * (double)kpad;
    int64_t waves = (l->items + t->sm_count - 1) / t->sm_count;
    return (double)waves * tile_flops / sm_peak;
}

void mcir_gemm_sm90_choose(const mcir_target *t, mcir_kernel_plan *k, mcir_arena *a) {
    mcir_gemm_sm90 l;
    const char *why = NULL;
    if (!mcir_gemm_sm90_layout(t, k, &l, &why)) {
        if (t && t->has_wgmma && k->tiling.reason &&
            (k->tpl == MCIR_TEMPLATE_MATMUL || k->tpl == MCIR_TEMPLATE_CONV2D))
            k->tiling.reason = mcir_arena_printf(a, "%s; not the sm_90a GEMM: %s", k->tiling.reason, why);
        return;
    }
    const mcir_tensor *cast_leaf = NULL;   /* a leaf stored in another dtype (a box of A's shape first) */
    if (l.n_v && l.v_leaf->dtype != k->anchor->inputs[0]->dtype) cast_leaf = l.v_leaf;
    for (int i = 0; i < l.n_a && l.prologue; i++)
        if (l.a_in[i]->dtype != k->anchor->inputs[0]->dtype) cast_leaf = l.a_in[i];
    mcir_tiling *ti = &k->tiling;
    const char *names[] = {"M", "N", "K", "wg", "group_m", "cluster", "pingpong"};
    const int64_t tile[] = {l.bm, l.bn, l.bk, l.consumers, l.group_m, l.cluster, l.pingpong};
    ti->n_dims = 7;
    for (int i = 0; i < 7; i++) ti->dim_names[i] = names[i], ti->block_tile[i] = tile[i];
    /* the cluster's L2 feed against one block a cluster's (the multicast's gain) */
    mcir_gemm_sm90 one = l;
    set_cluster(t, &one, 1);
    const char *cluster =
        l.cluster > 1 ? mcir_arena_printf(a, "clusters of %d blocks along M (each loads its A and 1/%d of B's tile, "
                                             "multicast into every block of the cluster: modelled L2 feed %.2f us, "
                                             "%.2f us with one block a cluster; %s)",
                                          l.cluster, l.cluster, mcir_gemm_sm90_feed_us(t, &l),
                                          mcir_gemm_sm90_feed_us(t, &one), l.cluster_why)
                      : l.cluster_why;
    ti->warps = l.threads / 32;
    ti->stages = l.stages;
    ti->vector_width = 64;   /* TMA boxes of 64 columns */
    ti->working_set_bytes = l.smem_bytes;
    ti->blocks_per_sm = 1;
    ti->registers_estimate = l.registers;
    ti->reason = mcir_arena_printf(
        a,
        "sm_90a GEMM (TMA + mbarriers + wgmma, warp specialised) M=%lld N=%lld K=%lld batch=%lld, %s, %sA %s, B %s: "
        "BLOCK_M=%lld (%d consumer warp group%s %s%s) BLOCK_N=%lld BLOCK_K=64, a %d-stage A/B ring fed "
        "by a producer warp group%s: %lld KiB of 128-byte-swizzled shared memory <= %lld KiB; %lld work items "
        "on %lld blocks of %d threads (%.2f waves), %s, tiles in groups of %lld M-tile%s%s (a wave touches %.1f MiB "
        "of A and B panels, %s half the %lld MiB L2), %s, the output by %s; "
        "modelled "
        "mainloop %.2f us at %.0f%% of the tensor cores' dense peak (measured on an H200)%s",
        (long long)l.m, (long long)l.n, (long long)l.k, (long long)l.batch, mcir_dtype_name(k->anchor->inputs[0]->dtype),
        mcir_arena_printf(
            a, "%s%s",
            l.prologue ? mcir_arena_printf(a, "A from an elementwise prologue over %d stored input%s%s (loaded by the "
                                              "TMA, combined %s by the consumers%s), ",
                                           l.n_a, l.n_a > 1 ? "s" : "",
                                           !l.n_v ? ""
                                           : l.trans_a ? " and a vector of K elements, one per stored row ([K, 1] over "
                                                         "A stored [K, M])"
                                                       : " and a row vector of K elements broadcast over the rows",
                                           l.prologue_rs ? "in registers (each thread's wgmma A fragments of the "
                                                           "leaves by ldmatrix, A from registers)"
                                                         : "in shared memory",
                                           cast_leaf ? mcir_arena_printf(a, "; a cast on the way: %s stored as %s, "
                                                                            "converted there%s",
                                                                         cast_leaf->name,
                                                                         mcir_dtype_name(cast_leaf->dtype),
                                                                         cast_leaf->dtype == MCIR_DTYPE_F32
                                                                             ? " (two TMA boxes of 32 f32 columns per "
                                                                               "K step)"
                                                                             : "")
                                                     : "")
                       : "",
            l.row_scale ? mcir_arena_printf(a, "A times a per-row scale %s (%s, applied to the accumulators' rows at "
                                               "the epilogue), ",
                                            l.row_scale->name,
                                            /* the node's layout of A (a folded transpose of P aside) */
                                            mcir_node_bool(k->anchor, "transpose_a")
                                                ? (l.row_scale_batched ? "one row of M per batch, one per stored column"
                                                                             : "[M] or [1, M], one per stored column")
                                            : l.row_scale_batched ? "one column per batch" : "[M, 1]")
                        : ""),
        l.trans_a ? "MN-major ([K, M])" : "K-major ([M, K])", l.trans_b ? "K-major ([N, K])" : "MN-major ([K, N])",
        (long long)l.bm, l.consumers,
        l.consumers > 1 ? "s" : "",
        l.pingpong ? mcir_arena_printf(a, "in ping-pong, each a whole item of every other one in turn (%s)", l.pingpong_why)
        : l.consumers > 1 ? mcir_arena_printf(a, "of 64 rows (%s)", l.pingpong_why)
                          : "of 64 rows",
        l.consumer_regs > 0 ? mcir_arena_printf(a, ", setmaxnreg %d / producer %d", l.consumer_regs, l.producer_regs) : "",
        (long long)l.bn, l.stages, l.tma_store ? mcir_arena_printf(a, ", %lld KiB of output boxes", (long long)(l.o_bytes / 1024)) : "",
        (long long)(l.smem_bytes / 1024), (long long)(t->smem_per_block_optin / 1024),
        (long long)l.items, (long long)l.grid, l.threads, (double)l.items / (double)t->sm_count,
        cluster, (long long)l.group_m, l.cluster > 1 ? " pair" : "", l.group_m > 1 ? "s" : "",
        l.wave_bytes / (1024.0 * 1024.0),
        l.wave_bytes <= (double)t->l2_bytes / 2 ? "within" : "over", (long long)(t->l2_bytes >> 20),
        l.glu ? mcir_arena_printf(a, "a paired epilogue (the product's columns interleave %s's and %s's in blocks of "
                                     "8: each thread's (gate, up) accumulator pairs make one output column of %lld)",
                                  l.glu_half[0]->name, l.glu_half[1]->name, (long long)(l.n / 2))
              : "the epilogue applied from the accumulators",
        l.store,
        mcir_gemm_sm90_compute_us(t, &l),
        100.0 * SM90_GEMM_EFFICIENCY * (l.prologue ? SM90_GEMM_PROLOGUE_RATE : 1.0),
        l.epi_issue > 0 ? mcir_arena_printf(a, ", then the epilogue %.2f us (%.1f issue slots an output element a "
                                               "thread beyond a plain store, %s)",
                                            mcir_gemm_sm90_epilogue_us(t, &l), l.epi_issue,
                                            l.pingpong ? "under the other group's mainloop but the block's last item's"
                                                       : "not overlapped")
                        : "");
    k->grid[0] = l.grid;
    k->grid[1] = k->grid[2] = 1;
    k->block[0] = l.threads;
    k->block[1] = k->block[2] = 1;
    k->smem_bytes = l.smem_bytes;
    k->smem_static_bytes = 0;
    if (!l.conv) return;
    k->tiling.reason = mcir_arena_printf(
        a, "conv2d %lldx%lld as an implicit GEMM on the sm_90a template (M = O = %lld, N = %lld output rows x %lld "
           "segment%s of 64 pixels, K = %lld taps x %lld block%s of 64 channels; the weight read tap-major [KH, KW, "
           "O, C] per tap, the image as 4-D TMA boxes {64 w, 1 h, 64 c, 1 n} at the tap's offset, the padding the "
           "TMA's zero fill): %s",
        (long long)l.cv_kh, (long long)l.cv_kw, (long long)l.m, (long long)l.cv_oh, (long long)l.cv_segw,
        l.cv_segw > 1 ? "s" : "", (long long)(l.cv_kh * l.cv_kw), (long long)l.cv_cb, l.cv_cb > 1 ? "s" : "",
        k->tiling.reason);
}

double mcir_gemm_library_fraction(const mcir_target *t) {
    return t && t->has_wgmma ? LIBRARY_FRACTION_SM90 : LIBRARY_FRACTION_SM80;
}

bool mcir_gemm_prologue_pays(const mcir_target *t, mcir_dtype dt, int64_t batch, int64_t m, int64_t n,
                             int64_t k, int64_t in_bytes, int64_t t_bytes, int64_t bc_bytes, bool row_scale,
                             char *d, size_t dn) {
    if (!t || !t->has_wgmma || !is_half(dt)) {
        snprintf(d, dn, "no measured rate of a fused prologue on %s for %s: fused (saves %lld bytes of traffic)",
                 t ? t->name : "this target", mcir_dtype_name(dt), (long long)(2 * t_bytes));
        return true;
    }
    /* MCIR_SM90_PROLOGUE=always (tests: the template's prologues at the
     * small sizes the emulator affords) fuses whatever the model says */
    const char *force = getenv("MCIR_SM90_PROLOGUE");
    if (force && strcmp(force, "always") == 0) {
        snprintf(d, dn, "fused on the sm_90a template, as MCIR_SM90_PROLOGUE=always says (the model not asked)");
        return true;
    }
    double tc = dt == MCIR_DTYPE_BF16 ? t->bf16_tc_tflops : t->f16_tc_tflops, bw = t->dram_gbps * 1e3;
    double flops = 2.0 * (double)batch * (double)m * (double)n * (double)k;
    const double rate = SM90_GEMM_EFFICIENCY * (row_scale ? 1.0 : SM90_GEMM_PROLOGUE_RATE);
    /* the fused kernel's time as its plan will model it (the tiles the
     * layout picks, padded, in waves: mcir_gemm_sm90_compute_us), so that a
     * product of few rows is not fused at the rate of a full tile */
    mcir_gemm_sm90 l;
    memset(&l, 0, sizeof l);
    l.m = m, l.n = n, l.k = k, l.batch = batch, l.prologue = !row_scale;
    l.consumers = m > 64 ? 2 : 1;
    l.bm = 64 * l.consumers;
    l.bk = 64;
    l.tiles_m = (m + l.bm - 1) / l.bm;
    l.bn = best_bn(t, batch * l.tiles_m, n, 64);
    l.tiles_n = (n + l.bn - 1) / l.bn;
    l.items = batch * l.tiles_m * l.tiles_n;
    double fused_c = mcir_gemm_sm90_compute_us(t, &l);
    double fused_m = (double)(in_bytes + bc_bytes) / bw;
    double gemm_c = flops / (tc * 1e6 * mcir_gemm_library_fraction(t)), gemm_m = (double)(t_bytes + bc_bytes) / bw;
    double fused = (fused_c > fused_m ? fused_c : fused_m) + t->launch_us;
    double apart = (double)(in_bytes + t_bytes) / bw + t->launch_us + (gemm_c > gemm_m ? gemm_c : gemm_m) +
                   t->launch_us;
    snprintf(d, dn, "fused on the sm_90a template %.2f us (%s, measured: %.0f%% of peak) %s "
             "%.2f us materialised (a prologue kernel moving %lld bytes, then the library at %.0f%%) on %s",
             fused, row_scale ? "a per-row scale at the epilogue: its plain rate" : "its prologue rate",
             100.0 * rate, fused <= apart ? "<=" : ">", apart,
             (long long)(in_bytes + t_bytes), 100.0 * mcir_gemm_library_fraction(t), t->name);
    return fused <= apart;
}

bool mcir_gemm_glu_pays(const mcir_target *t, mcir_dtype dt, int64_t batch, int64_t m, int64_t n2, int64_t k,
                        int64_t x_bytes, int64_t w_bytes, int64_t h_bytes, char *d, size_t dn) {
    const char *force = getenv("MCIR_GLU");
    if (force && (strcmp(force, "always") == 0 || strcmp(force, "never") == 0)) {
        snprintf(d, dn, "%s, as MCIR_GLU=%s says (the model not asked)",
                 force[0] == 'a' ? "fused" : "kept apart", force);
        return force[0] == 'a';
    }
    if (!t || !t->has_wgmma || !is_half(dt)) {
        snprintf(d, dn, "no measured rate of the generated GEMM against the library on %s: fused (saves %lld bytes "
                 "of traffic: the [.., %lld] product written and read back)",
                 t ? t->name : "this target", (long long)(4 * h_bytes), (long long)n2);
        return true;
    }
    double tc = dt == MCIR_DTYPE_BF16 ? t->bf16_tc_tflops : t->f16_tc_tflops, bw = t->dram_gbps * 1e3;
    double flops = 2.0 * (double)batch * (double)m * (double)n2 * (double)k;
    mcir_gemm_sm90 l;
    memset(&l, 0, sizeof l);
    l.m = m, l.n = n2, l.k = k, l.batch = batch;
    l.consumers = m > 64 ? 2 : 1;
    l.bm = 64 * l.consumers;
    l.bk = 64;
    l.tiles_m = (m + l.bm - 1) / l.bm;
    l.bn = best_bn(t, batch * l.tiles_m, n2, n2 >= 256 ? 128 : 64);
    l.tiles_n = (n2 + l.bn - 1) / l.bn;
    l.items = batch * l.tiles_m * l.tiles_n;
    l.glu = true;
    l.epi_issue = 7.0;   /* SiLU's (epilogue_issue: f32 2, SiLU 4.5, the pair's product 0.5) */
    const double fused_c = mcir_gemm_sm90_compute_us(t, &l) + mcir_gemm_sm90_epilogue_us(t, &l),
                 fused_m = (double)(x_bytes + w_bytes + h_bytes) / bw;
    const double fused = (fused_c > fused_m ? fused_c : fused_m) + t->launch_us;
    /* apart: the product (twice the output's bytes) written by the library
     * and read back by the elementwise kernel, which writes the output */
    const double gemm_c = flops / (tc * 1e6 * mcir_gemm_library_fraction(t)),
                 gemm_m = (double)(x_bytes + w_bytes + 2 * h_bytes) / bw;
    const double apart = (gemm_c > gemm_m ? gemm_c : gemm_m) + t->launch_us + (double)(3 * h_bytes) / bw +
                         t->launch_us;
    snprintf(d, dn, "fused on the sm_90a template %.2f us (measured: %.0f%% of peak) %s %.2f us apart (the library "
             "at %.0f%% writing the [.., %lld] product, an elementwise kernel moving %lld bytes) on %s",
             fused, 100.0 * SM90_GEMM_EFFICIENCY, fused <= apart ? "<=" : ">", apart,
             100.0 * mcir_gemm_library_fraction(t), (long long)n2, (long long)(3 * h_bytes), t->name);
    return fused <= apart;
}
