/*
 * tpl_gemm_sm90.c — instantiates templates/gemm_sm90.cuh (TMA, mbarriers,
 * wgmma, warp specialisation) for a matmul KernelPlan the planner gave the
 * sm_90a GEMM (tiling dim "wg"), exactly as kernelplan/launch_gemm_sm90.c
 * laid it out (mcir_gemm_sm90_layout: tiles, consumer groups, stages).
 *
 * A and B are read by the Tensor Memory Accelerator through two tensor
 * maps (columns, rows, batch; 128-byte swizzle; A stored [K, M] and B
 * stored [K, N] are read MN-major, wgmma's transpose bits) that the runtime encodes
 * from the kernel's tensor-map descriptions and passes as
 * __grid_constant__ CUtensorMap parameters after the pointers. An operand
 * shared by every batch has extent 1 in its batch dim and is read at
 * coordinate 0. An A that an elementwise prologue computes from stored
 * tensors of its shape (SwiGLU's silu(g) * u) is read as those tensors,
 * one map each (a split's part: a column offset in its tensor; stored
 * [K, M] like A under transpose_a, read MN-major alike), and
 * combined in shared memory through A's value chain with its leaves read
 * from the boxes (a vector of K: by the box column, or the box row where
 * A is stored [K, M]). A scale per row of A at the top of its chain (A = P * s,
 * s [.., M, 1]) is not computed in shared memory: P is read as A and the
 * accumulators are multiplied by s[m] as the epilogue reads them
 * (gm_row_scale: loaded once per accumulator row of a thread, two rows
 * per 64-row group, and kept in registers).
 * The fused epilogue (bias, activations, residual, casts:
 * whatever the region's writes compute from the product) is emitted here
 * by the shared emitter and applied per accumulator element. Where the
 * region's one write is f16 / bf16 with 16-byte rows the output goes
 * through shared memory and TMA stores (one more map, [batch, M, N] of
 * the write, after B's); else each thread stores its elements.
 *
 * A KxK conv2d kernel (mcir_gemm_sm90.conv; from tpl_conv.c) takes the
 * same template as an implicit GEMM (GM_CONV): A the weight stored
 * tap-major [KH, KW, O, C] (one [O, C] map per tap: dims C, O, taps), B
 * the image through a 4-D map (w, h, c, n) read in boxes {64, 1, 64, 1} at
 * the tap's offset, the output per thread through the pixel mapping of
 * mm_store (docs/codegen.md "KxK convs").
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "kernelplan/launch.h"
#include "kernelplan/launch_gemm_sm90.h"

static int64_t tile_of(const mcir_tiling *t, const char *dim) {
    for (int i = 0; i < t->n_dims && i < MCIR_MAX_TILE_DIMS; i++)
        if (t->dim_names[i] && strcmp(t->dim_names[i], dim) == 0) return t->block_tile[i];
    return 0;
}

/* The 3-D map (columns, rows, batch; padded to 5-D) of a row-major operand
 * of `rows` x `cols` f16/bf16 (or f32) elements, `batch` matrices (1: one matrix
 * for every batch), read through parameter `param` as columns col0.. of a
 * tensor `width` elements wide (a split's part; else col0 0, width cols);
 * boxes of 128 bytes of columns (64 16-bit, 32 f32: the 128-byte swizzle
 * span, PTX ISA's tensor-map rule) x box_rows. */
static void map_of(const mcir_tensor *t, int param, int64_t rows, int64_t cols, int64_t batch, unsigned box_rows,
                   int64_t width, int64_t col0, mcir_tensor_map_desc *m) {
    memset(m, 0, sizeof *m);
    m->read = param;
    m->offset = col0;
    const bool f32 = t->dtype == MCIR_DTYPE_F32;
    m->esize = f32 ? 4 : 2;
    m->dtype = f32 ? 7 : t->dtype == MCIR_DTYPE_BF16 ? 9 : 6;
    m->rank = 5;
    m->swizzle = 3;
    const uint64_t row = (uint64_t)width * (uint64_t)m->esize, mat = row * (uint64_t)rows;
    const uint64_t dims[5] = {(uint64_t)cols, (uint64_t)rows, (uint64_t)batch, 1, 1};
    const unsigned box[5] = {(unsigned)(128 / m->esize), box_rows, 1, 1, 1};
    /* a dim of extent 1 is never stepped: its stride only has to be legal
     * (a multiple of 16 bytes; the matrix's size is) */
    const uint64_t strides[4] = {row, mat, mat * (uint64_t)batch, mat * (uint64_t)batch};
    memcpy(m->dims, dims, sizeof dims);
    memcpy(m->box, box, sizeof box);
    memcpy(m->strides, strides, sizeof strides);
}

/* Whether x is read at t's linear index (emit.c's emit_bcast_index: the
 * same extents right-aligned, t's leading ones 1) or is one element. */
static bool same_index(const mcir_tensor *t, const mcir_tensor *x, bool *one) {
    *one = true;
    for (int k = 0; k < x->rank; k++) *one = *one && cg_extent_is_one(x, k);
    if (x->rank > t->rank) return false;
    for (int k = 0; k < x->rank; k++)
        if (!cg_extents_equal(x, x->rank - 1 - k, t, t->rank - 1 - k)) return false;
    for (int k = 0; k < t->rank - x->rank; k++)
        if (!cg_extent_is_one(t, k)) return false;
    return true;
}

/* Whether A's value chain t has a vector form over the prologue's boxes,
 * 8 elements a step (gm_a_value8): every leaf a 16-bit box read at the
 * box's own element (no row index: the caller's), every operand a lane
 * each at its consumer's linear index or one element for all. What the
 * scalar chain computes at j, the vector one computes at j0 + lane; one
 * 16-byte load per leaf and step in place of 8 two-byte ones. */
static bool box_vec_chain(const mcir_kernel_plan *kp, const int *box_leaf, const mcir_tensor *t, int depth) {
    if (depth > 64 || box_leaf[t->id] < 0) return false;
    if (box_leaf[t->id] > 0) return mcir_dtype_size(t->dtype) == 2;
    const mcir_node *n = cg_region_producer(kp, t);
    if (!n || (n->op != MCIR_OP_RESHAPE && !(mcir_op_desc_of(n->op)->flags & MCIR_OPF_ELEMENTWISE))) return false;
    if (!mcir_vector_form(kp, t, 8)) return false;
    for (int j = 0; j < n->n_inputs; j++) {
        const mcir_tensor *x = n->inputs[j];
        bool one;
        const bool same = same_index(t, x, &one);
        if (n->op == MCIR_OP_RESHAPE) {
            if (!box_vec_chain(kp, box_leaf, x, depth + 1)) return false;
            continue;
        }
        const mcir_vector_operand mode = mcir_vector_operand_of(kp, n, j, 8);
        if (mode == MCIR_VEC_SPLAT && one) continue;
        if (mode != MCIR_VEC_LANES || !same || !box_vec_chain(kp, box_leaf, x, depth + 1)) return false;
    }
    return true;
}

bool cg_gen_gemm_sm90(cg_kernel *k, const mcir_target *target, mcir_diag *d) {
    mcir_kernel_plan *kp = k->kp;
    const mcir_node *n = kp->anchor;
    const mcir_tensor *C = n->outputs[0];
    mcir_gemm_sm90 l;
    const char *why = NULL;
    if (!mcir_gemm_sm90_layout(target, kp, &l, &why) || tile_of(&kp->tiling, "M") != l.bm ||
        tile_of(&kp->tiling, "N") != l.bn || tile_of(&kp->tiling, "wg") != l.consumers ||
        (tile_of(&kp->tiling, "cluster") > 1 ? 2 : 1) != l.cluster || (tile_of(&kp->tiling, "pingpong") == 1) != l.pingpong ||
        (kp->grid[0] != l.grid && !cg_rebinding) || kp->block[0] != l.threads || kp->smem_bytes != l.smem_bytes) {
        cg_error(d, kp, "internal error: the plan's sm_90a GEMM tiling is not the launch model's: %s",
                 why ? why : "tiles or launch differ");
        return false;
    }
    int ap[2], bp = cg_read_index(kp, l.b), vp = l.n_v ? cg_read_index(kp, l.v_leaf) : 0;
    const int sp = l.row_scale ? cg_read_index(kp, l.row_scale) : 0;
    bool reads = bp >= 0 && vp >= 0 && sp >= 0 && l.n_a >= 1 && l.n_a <= 2 && l.n_v <= 1;
    for (int i = 0; reads && i < l.n_a; i++) reads = (ap[i] = cg_read_index(kp, l.a_in[i])) >= 0;
    if (!reads) {
        cg_error(d, kp, "internal error: the sm_90a GEMM's operands are not kernel reads");
        return false;
    }
    const bool bf16 = n->inputs[0]->dtype == MCIR_DTYPE_BF16;   /* A's (a prologue's leaves: f16 or bf16) */
    k->n_tmaps = l.n_a + l.n_v + 1;   /* A's boxes, the row vector's, B's (+ the output's) */
    const int tb = l.n_a + l.n_v;
    if (l.conv) {
        /* A: the weight [KH, KW, O, C], per tap an [O, C] matrix: boxes of 64
         * channels x 64 output channels at (c0, o0, tap) */
        map_of(l.a_in[0], ap[0], l.m, l.cv_c, l.cv_kh * l.cv_kw, 64, l.cv_c, 0, &k->tmaps[0]);
        /* B: the image [N, C, H, W] as (w, h, c, n): boxes {64 w, 1 h, 64 c, 1 n}, in shared memory 64
         * channel rows of 64 pixels (128 bytes, swizzled): a [K, N] box of the GEMM, MN-major */
        mcir_tensor_map_desc *m = &k->tmaps[tb];
        map_of(l.b, bp, 1, 1, 1, 1, 1, 0, m);
        const uint64_t row = (uint64_t)l.cv_w * 2, plane = row * (uint64_t)l.cv_h, img = plane * (uint64_t)l.cv_c;
        const uint64_t dims[5] = {(uint64_t)l.cv_w, (uint64_t)l.cv_h, (uint64_t)l.cv_c, (uint64_t)l.batch, 1};
        const uint64_t strides[4] = {row, plane, img, img * (uint64_t)l.batch};
        const unsigned box[5] = {64, 1, 64, 1, 1};
        memcpy(m->dims, dims, sizeof dims);
        memcpy(m->strides, strides, sizeof strides);
        memcpy(m->box, box, sizeof box);
    } else {   /* A [M, K]: boxes of 64 k-columns x 64 m-rows; A [K, M]: boxes of 64
                * m-columns x 64 k-rows (MN-major); each leaf of a prologue as A */
        for (int i = 0; i < l.n_a; i++)
            map_of(l.a_in[i], ap[i], l.trans_a ? l.k : l.m, l.trans_a ? l.m : l.k, l.a_batched ? l.batch : 1, 64,
                   l.a_width[i], l.a_col0[i], &k->tmaps[i]);
    }
    if (l.n_v) {   /* the vector of K ([K] or, A [K, M], [K, 1]): one box of its 64 elements per K step, unswizzled */
        map_of(l.v_leaf, vp, 1, l.k, 1, 1, l.k, 0, &k->tmaps[l.n_a]);
        k->tmaps[l.n_a].swizzle = 0;
        k->tmaps[l.n_a].box[0] = 64;
    }
    if (l.conv)
        ;
    else if (l.trans_b)   /* B [N, K]: one box of BN rows of 64 k-columns (a cluster's block: BN / 2 rows) */
        map_of(l.b, bp, l.n, l.k, l.b_batched ? l.batch : 1, (unsigned)(l.bn / l.cluster), l.k, 0, &k->tmaps[tb]);
    else             /* B [K, N]: boxes of 64 n-columns x 64 k-rows (a cluster's block at BLOCK_N 64: 32 k-rows) */
        map_of(l.b, bp, l.k, l.n, l.b_batched ? l.batch : 1, l.cluster > 1 && l.bn / 64 % l.cluster ? 64 / l.cluster : 64,
               l.n, 0, &k->tmaps[tb]);
    const int64_t on = l.glu ? l.n / 2 : l.n;   /* the output's columns (a paired epilogue: half the product's) */
    if (l.tma_store)   /* the output [batch, M, N] (its one write, element i of C): boxes of 64 x 64 */
        map_of(kp->writes[0], kp->n_reads, l.m, on, l.batch, 64, on, 0, &k->tmaps[k->n_tmaps++]);
    k->sm90a = true;
    k->smem = l.smem_bytes;

    cg_sb b = {0};
    cg_emitter e;
    cg_begin_source(&b, kp);
    /* the paired epilogue: its anchor the gate's half, the up's half
     * beside it, both from the accumulator pair */
    cg_emitter_init(&e, kp, &b, l.glu ? l.glu_half[0] : C, d);
    if (l.glu) e.pair[0] = l.glu_half[0], e.pair[1] = l.glu_half[1];
    int *box_leaf = NULL;
    bool a_vec = false, a_raw = false;   /* A's chain 8 elements at a time (box_vec_chain), unrounded (vvr) */
    const bool rows_index = l.n_v > 0 || l.a_wide[0] == 2 || (l.n_a > 1 && l.a_wide[1] == 2);
    if (l.prologue) {
        /* A's value chain, its leaves read from the stage's boxes; first, so
         * nothing else emits those leaves (leaves_private: nothing else uses them) */
        box_leaf = calloc((size_t)e.n_tensors, sizeof *box_leaf);
        MCIR_ASSERT(box_leaf != NULL);
        for (int i = 0; i < l.n_a; i++) box_leaf[l.a_leaf[i]->id] = i + 1;
        if (l.n_v) box_leaf[l.v_leaf->id] = -1;
        if (l.row_scale) box_leaf[l.row_scale->id] = -2;   /* the epilogue applies it: 1 in A's chain */
        e.box_leaf = box_leaf;
        /* A's index row * W + column, W the stored A's last dim (K; M when
         * stored [K, M]): the vector's broadcast index is the box's column
         * ([K] over [M, K]) or its row ([K, 1] over [K, M]), and an f32
         * leaf's element is found from (row, column) */
        e.box_rows = rows_index;
        cg_sb_puts(&b, "__device__ __forceinline__ const unsigned short* gm_box(float code, int k);\n"
                       "__device__ __forceinline__ void gm_leaf8(float code, int k, int j, u32* h);\n");
        if (l.n_v) cg_sb_puts(&b, "__device__ __forceinline__ const unsigned short* gm_vbox(float code);\n");
        if (rows_index)   /* defined after GM_M / GM_K (a graph's dims: their expressions) */
            cg_sb_puts(&b, "__device__ __forceinline__ i64 gm_box_elem(i64 i);\n"
                           "__device__ __forceinline__ i64 gm_box_elem4(i64 i);\n");
        cg_emit_value(&e, l.a_value);
        a_vec = l.a_vec && !rows_index && box_vec_chain(kp, box_leaf, l.a_value, 0);
        if (a_vec) {   /* unrounded too (vvr): gm_a_store's conversion rounds once */
            const mcir_node *an = cg_region_producer(kp, l.a_value);
            a_raw = (l.a_value->dtype == MCIR_DTYPE_F16 || l.a_value->dtype == MCIR_DTYPE_BF16) && an &&
                    (mcir_op_desc_of(an->op)->flags & MCIR_OPF_ELEMENTWISE);
            e.raw = a_raw ? l.a_value : NULL;
            cg_emit_value_vec(&e, l.a_value, 8);
            e.raw = NULL;
        }
        e.box_leaf = NULL;
        e.box_rows = false;
    }
    const mcir_tensor *bias = l.conv && n->n_inputs > 2 ? n->inputs[2] : NULL;
    if (bias) cg_emit_value(&e, bias);
    /* the index packed, (row << 32) | column, where the sizes allow (not a
     * conv: its epilogue's index is the output pixel's) */
    const bool pk = !l.conv && cg_epilogue_packable(&e);
    /* the TMA-stored write's value unrounded too (mm_value: the box
     * store's conversion rounds it, once) */
    e.raw = l.tma_store ? kp->writes[0] : NULL;
    e.raw_scalar = false;
    if (pk) cg_emit_epilogue_packed(&e, 1);
    else cg_emit_epilogue(&e, 1);
    const bool out_raw = e.raw_scalar;
    e.raw = NULL;
    /* the TMA-stored value as column pairs (h<ID>: the rounding of each
     * 16-bit step and the adds of 16-bit operands packed, the store's
     * pair built in registers), where the index is packed */
    const char *no_pair = getenv("MCIR_GEMM_PAIR");   /* "0": the value per element (comparisons) */
    const bool pair = e.ok && pk && l.tma_store && !l.glu && !(no_pair && strcmp(no_pair, "0") == 0) &&
                      cg_emit_pair_value(&e, kp->writes[0]);
    free(box_leaf);
    if (!e.ok) {
        cg_emitter_free(&e);
        cg_sb_free(&b);
        return false;
    }
    /* the problem's extents: expressions of the dims where they depend on
     * one, read from shared memory (the template's helpers take no
     * parameters; the entry fills mc_sdims) */
    const mcir_tensor *A = n->inputs[0], *B = n->inputs[1];
    if (cg_dyn && (cg_tensor_dynamic(A) || cg_tensor_dynamic(B) || cg_tensor_dynamic(C))) {
        cg_emit_sdims_decl(&b);
        cg_dims_smem = true;
        bool lead[MCIR_MAX_RANK] = {0};
        for (int i = 0; i < C->rank - 2; i++) lead[i] = true;
        cg_sb_puts(&b, "#define GM_M ");
        cg_sb_extent(&b, A, l.trans_a ? A->rank - 1 : A->rank - 2);
        cg_sb_puts(&b, "\n#define GM_N ");
        cg_sb_extent(&b, C, C->rank - 1);
        cg_sb_puts(&b, "\n#define GM_K ");
        cg_sb_extent(&b, A, l.trans_a ? A->rank - 2 : A->rank - 1);
        cg_sb_puts(&b, "\n#define GM_BATCH ");
        cg_sb_prod(&b, C, lead);
        cg_dims_smem = false;
        cg_sb_printf(&b, "\n#define GM_TILES_M ((GM_M + %lldLL) / %lldLL)\n#define GM_TILES_N ((GM_N + %lldLL) / %lldLL)\n",
                     (long long)(l.bm - 1), (long long)l.bm, (long long)(l.bn - 1), (long long)l.bn);
    } else {
        cg_sb_printf(&b, "#define GM_M %lldLL\n#define GM_N %lldLL\n#define GM_K %lldLL\n#define GM_BATCH %lldLL\n"
                         "#define GM_TILES_M %lldLL\n#define GM_TILES_N %lldLL\n",
                     (long long)l.m, (long long)l.n, (long long)l.k, (long long)l.batch, (long long)l.tiles_m,
                     (long long)l.tiles_n);
    }
    cg_sb_printf(&b,
                 "#define GM_BN %lld\n#define GM_CWG %d\n#define GM_STAGES %d\n"
                 "#define GM_GROUP_M %lldLL\n#define GM_BF16 %d\n#define GM_TRANS_A %d\n"
                 "#define GM_TRANS_B %d\n#define GM_A_BATCHED %d\n"
                 "#define GM_B_BATCHED %d\n#define GM_PRODUCER_REGS %d\n#define GM_CONSUMER_REGS %d\n"
                 "#define GM_CLUSTER %d   // blocks a cluster along M (%s)\n"
                 "#define GM_PINGPONG %d   // %s\n",
                 (long long)l.bn, l.consumers, l.stages, (long long)l.group_m, bf16, l.trans_a, l.trans_b, l.a_batched,
                 l.b_batched, l.producer_regs, l.consumer_regs, l.cluster, l.cluster_why, l.pingpong, l.pingpong_why);
    /* the paired epilogue: the output's GM_ON columns, half the product's;
     * a (gate, up) accumulator pair rounded to the product's dtype and
     * packed into one value, the gate's bits low (the emitter's pair) */
    cg_sb_printf(&b, "#define GM_GLU %d\n#define GM_ON %s\n", l.glu, l.glu ? "(GM_N / 2)" : "GM_N");
    if (l.glu) {
        const char *ps = cg_dsuffix(C->dtype);
        cg_sb_printf(&b, "__device__ __forceinline__ float mm_pair(float g, float u) {\n"
                         "    return __int_as_float((int)((u32)mc_f32_to_%s(g) | ((u32)mc_f32_to_%s(u) << 16)));\n}\n",
                     ps, ps);
    }
    cg_sb_printf(&b, "#define GM_NA %d\n#define GM_NV %d\n#define GM_PROLOGUE %d\n", l.n_a, l.n_v, l.prologue);
    /* A's part of a stage: A's own tile first where leaf 0 is f32 (else
     * computed in place over leaf 0), then each leaf's boxes per group (an
     * f32 leaf: two boxes of 32 columns, the second GM_ABOX further) */
    cg_sb_printf(&b, "#define GM_A_OUT %d\n#define GM_A_BYTES %lld\n#define GM_V_ESIZE %d\n"
                     "__device__ __forceinline__ int gm_leaf_at(int p) { return p ? %lld : %lld; }\n"
                     "__device__ __forceinline__ int gm_leaf_wide(int p) { return p ? %d : %d; }\n",
                 l.a_out, (long long)l.a_bytes, l.n_v ? l.v_esize : 2, (long long)(l.n_a > 1 ? l.a_at[1] : 0),
                 (long long)l.a_at[0], l.n_a > 1 ? l.a_wide[1] : 1, l.a_wide[0]);
    /* A's element j in group c's boxes of a stage: acc carries (stage, c);
     * with a row vector or an f32 leaf the chain's index is the element's row * K + column
     * (the swizzle: the 16-byte chunk (j / 8) % 8 of row j / 64 holds
     * columns 8 ((j / 8 ^ j / 64) % 8)..) */
    if (l.prologue && rows_index) {
        const char *w = l.trans_a ? "GM_M" : "GM_K";
        cg_sb_printf(&b, "// box element (row, column) of A's index row * %s + column\n"
                         "__device__ __forceinline__ i64 gm_box_elem(i64 i) {\n"
                         "    const i64 r = i / %s, col = i - r * %s;\n"
                         "    return r * 64 + ((((col >> 3) ^ r) & 7) << 3) + (col & 7);\n}\n"
                         "// an f32 leaf's element (row, column): box col / 32 of 64 rows of 32 columns,\n"
                         "// 16-byte chunks of 4 swizzled by the row (A [M, K] only)\n"
                         "__device__ __forceinline__ i64 gm_box_elem4(i64 i) {\n"
                         "    const i64 r = i / %s, col = i - r * %s;\n"
                         "    return (col >> 5) * 2048 + r * 32 + ((((col >> 2) ^ r) & 7) << 2) + (col & 3);\n}\n",
                     l.trans_a ? "M" : "K", w, w, w, w);
    }
    if (l.prologue)
        cg_sb_printf(&b, "__device__ __forceinline__ float gm_a_value(int stage, int c, i64 j, MC_PARAMS) {\n"
                         "    return v%d(%s, __int_as_float(0x40000000 | (stage << 3) | c), MC_ARGS);\n}\n"
                         "__device__ __forceinline__ unsigned short gm_a_store(float v) { return mc_f32_to_%s(v); }\n",
                     l.a_value->id,
                     rows_index ? (l.trans_a ? "(j >> 6) * GM_M + ((((j >> 3) ^ (j >> 6)) & 7) << 3) + (j & 7)"
                                        : "(j >> 6) * GM_K + ((((j >> 3) ^ (j >> 6)) & 7) << 3) + (j & 7)")
                           : "j",
                     bf16 ? "bf16" : "f16");
    cg_sb_printf(&b, "#define GM_A_VEC %d\n#define GM_PROLOGUE_RS %d\n", a_vec, a_vec && l.prologue_rs);
    if (a_vec)   /* elements j0..j0 + 7 (j0 a multiple of 8), the code in the index's high bits */
        cg_sb_printf(&b, "__device__ __forceinline__ void gm_a_value8(int stage, int c, int j0, float* out, MC_PARAMS) {\n"
                         "    vv%s%d(((i64)(0x40000000 | (stage << 3) | c) << 32) | (i64)j0, out, MC_ARGS);\n}\n",
                     a_raw ? "r" : "",
                     l.a_value->id);
    /* A = P * s[m]: the product of P scaled per row, C's rows by s: the
     * template loads s[m] once per accumulator row a thread owns and
     * multiplies the accumulators as the epilogue reads them */
    cg_sb_printf(&b, "#define GM_ROW_SCALE %d\n", l.row_scale != NULL);
    if (l.row_scale)
        cg_sb_printf(&b, "// A's per-row scale %s, applied to the product's rows\n"
                         "__device__ __forceinline__ float gm_row_scale(i64 bb, i64 m, MC_PARAMS) {\n"
                         "    return mc_ld_%s(r%d, %s);\n}\n",
                     l.row_scale->name, cg_dsuffix(l.row_scale->dtype), sp, l.row_scale_batched ? "bb * GM_M + m" : "m");
    if (l.conv) {
        /* the conv's view: image bb, output channel m, column n of the row
         * segments (segment n / 64: output row seg / CV_SEGW, pixels from
         * 64 (seg % CV_SEGW)); the bias per output channel, then the epilogue
         * at the output's element */
        cg_sb_printf(&b, "#define GM_CONV 1\n#define CV_C %lldLL\n#define CV_H %lldLL\n#define CV_W %lldLL\n"
                         "#define CV_KH %lld\n#define CV_KW %lld\n#define CV_PT %lld\n#define CV_PL %lld\n"
                         "#define CV_OH %lldLL\n#define CV_OW %lldLL\n#define CV_SEGW %lld\n#define CV_CB %lld\n",
                     (long long)l.cv_c, (long long)l.cv_h, (long long)l.cv_w, (long long)l.cv_kh, (long long)l.cv_kw,
                     (long long)l.cv_pt, (long long)l.cv_pl, (long long)l.cv_oh, (long long)l.cv_ow,
                     (long long)l.cv_segw, (long long)l.cv_cb);
        cg_sb_puts(&b, "__device__ __forceinline__ void mm_store(i64 bb, i64 m, i64 n, float acc, MC_PARAMS) {\n"
                       "    const i64 seg = n >> 6, oh = seg / CV_SEGW, ow = (seg - oh * CV_SEGW) * 64 + (n & 63);\n"
                       "    if (ow >= CV_OW) return;\n");
        if (bias)
            cg_sb_printf(&b, "    acc += v%d(%s, 0.0f, MC_ARGS);\n", bias->id, mcir_tensor_numel(bias) == 1 ? "0" : "m");
        cg_sb_puts(&b, "    epilogue(((bb * GM_M + m) * CV_OH + oh) * CV_OW + ow, acc, MC_ARGS);\n}\n");
    } else {
        cg_sb_puts(&b, "#define GM_CONV 0\n");
        cg_sb_printf(&b, "__device__ __forceinline__ void mm_store(i64 bb, i64 m, i64 n, float acc, MC_PARAMS) {\n"
                         "    epilogue(%s, acc, MC_ARGS);\n}\n",
                     pk ? "(i64)(((u64)(bb * GM_M + m) << 32) | (u64)n)" : "(bb * GM_M + m) * GM_ON + n");
    }
    /* the epilogue's bounds checks where tiles can hang over the output
     * (sizes not multiples of the tile's, or not known here) */
    {
        const bool dyn = cg_dyn && (cg_tensor_dynamic(A) || cg_tensor_dynamic(B) || cg_tensor_dynamic(C));
        cg_sb_printf(&b, "#define GM_CHECK_M %d\n#define GM_CHECK_N %d\n", dyn || l.m % l.bm != 0,
                     dyn || l.n % l.bn != 0);
    }
    cg_sb_printf(&b, "#define GM_TMA_STORE %d   // the output: %s\n", l.tma_store, l.store);
    cg_sb_printf(&b, "#define GM_PAIR %d\n", pair);
    if (pair)
        cg_sb_printf(&b, "__device__ __forceinline__ u32 mm_value2(i64 bb, i64 m, i64 n, float a0, float a1, MC_PARAMS) {\n"
                         "    return h%d((i64)(((u64)(bb * GM_M + m) << 32) | (u64)n), a0, a1, MC_ARGS);\n}\n",
                     kp->writes[0]->id);
    if (l.tma_store)   /* the one write's value (cg_emit_epilogue emitted it): unrounded where an op
                        * computes it (the box store's conversion rounds), else rounded to its dtype */
        cg_sb_printf(&b, "#define GM_O_BF16 %d\n"
                         "__device__ __forceinline__ float mm_value(i64 bb, i64 m, i64 n, float acc, MC_PARAMS) {\n"
                         "    return %c%s%d(%s, acc, MC_ARGS);\n}\n",
                     kp->writes[0]->dtype == MCIR_DTYPE_BF16, pk ? 'p' : 'v', out_raw ? "r" : "", kp->writes[0]->id,
                     pk ? "(i64)(((u64)(bb * GM_M + m) << 32) | (u64)n)" : "(bb * GM_M + m) * GM_ON + n");
    cg_sb_puts(&b, mcir_tpl_hopper);
    if (l.prologue)
        cg_sb_printf(&b, "__device__ __forceinline__ const unsigned short* gm_box(float code, int k) {\n"
                         "    MC_DYNAMIC_SMEM(mc_smem_raw);\n"
                         "    unsigned char* smem = mc_smem_raw + ((1024u - (mc_saddr(mc_smem_raw) & 1023u)) & 1023u);\n"
                         "    const int s = __float_as_int(code) & 0xffff;\n"
                         "    return (const unsigned short*)(smem + (s >> 3) * %lld + gm_leaf_at(k) + (s & 7) * gm_leaf_wide(k) * 8192);\n}\n",
                     (long long)(l.a_bytes + l.bn * l.bk * 2));
    /* A from shared memory K-major when stored [M, K], else (tnspA) MN-major;
     * B K-major when stored [N, K], else MN-major */
    cg_emit_wgmma(&b, "gm_wgmma", (int)l.bn, false, bf16, l.trans_a, !l.trans_b);
    if (a_vec && l.prologue_rs)   /* A from registers: the prologue's fragments */
        cg_emit_wgmma(&b, "gm_wgmma_rs", (int)l.bn, true, bf16, false, !l.trans_b);
    cg_sb_puts(&b, mcir_tpl_gemm_sm90);
    if (l.n_v)   /* the stage's vector box (GM_VEC_AT: after the ring and the output boxes) */
        cg_sb_puts(&b, "__device__ __forceinline__ const unsigned short* gm_vbox(float code) {\n"
                       "    MC_DYNAMIC_SMEM(mc_smem_raw);\n"
                       "    unsigned char* smem = mc_smem_raw + ((1024u - (mc_saddr(mc_smem_raw) & 1023u)) & 1023u);\n"
                       "    return (const unsigned short*)(smem + GM_VEC_AT + ((__float_as_int(code) & 0xffff) >> 3) * GM_VBOX);\n}\n");
    cg_emit_signature_cluster(&b, kp, l.threads, l.cluster);
    size_t len = b.len;
    MCIR_ASSERT(len >= 1 && b.s[len - 1] == ')');
    b.s[len - 1] = '\0';
    b.len = len - 1;
    for (int i = 0; i < l.n_a; i++) cg_sb_printf(&b, ", const __grid_constant__ CUtensorMap mc_tmap_a%d", i);
    if (l.n_v) cg_sb_puts(&b, ", const __grid_constant__ CUtensorMap mc_tmap_v");
    cg_sb_printf(&b, ", const __grid_constant__ CUtensorMap mc_tmap_b%s) {\n    (void)r%d;\n",
                 l.tma_store ? ", const __grid_constant__ CUtensorMap mc_tmap_o" : "", bp);
    if (strstr(b.s, "mc_sdims()")) cg_emit_sdims_fill(&b);
    cg_sb_puts(&b, "    const CUtensorMap* ta[GM_NA] = {");
    for (int i = 0; i < l.n_a; i++) cg_sb_printf(&b, "%s&mc_tmap_a%d", i ? ", " : "", i);
    cg_sb_printf(&b, "};\n    mc_gemm_sm90(ta, %s, &mc_tmap_b, %s, MC_ARGS);\n}\n",
                 l.n_v ? "&mc_tmap_v" : "(const CUtensorMap*)0", l.tma_store ? "&mc_tmap_o" : "(const CUtensorMap*)0");
    cg_emitter_free(&e);
    k->source = cg_sb_take(&b);
    k->grid[0] = l.grid;
    k->grid[1] = k->grid[2] = 1;
    k->block[0] = l.threads;
    k->block[1] = k->block[2] = 1;
    k->cluster = l.cluster;   /* __cluster_dims__: the emulated device runs the pair together */
    return true;
}
