/*
 * tpl_matmul.c — a MATMUL KernelPlan becomes (1) a generated tiled kernel
 * (templates/matmul.cuh) carrying the group's fused epilogue, always
 * compiled, and (2) where the operands are plain kernel reads with uniform
 * batch strides, a library description the runtime prefers where the
 * library loads: a bare matmul is one cublasGemmStridedBatchedEx; a matmul
 * whose epilogue is cuBLASLt's form (bias, ReLU / tanh-GELU, residual
 * through beta·C; mcir_kernel_gemm_epilogue) is one cublasLtMatmul writing
 * the output's dtype (cuBLAS + a staged f32 product + NAME_epilogue where
 * only cuBLAS loads). Any other epilogue runs in the generated kernel's
 * registers: one launch, no product staged.
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "kernelplan/launch_gemm_sm90.h"

/* i64 NAME(i64 b): linear offset of batch b of a [..., R, C] operand whose
 * leading dims broadcast against the output's. */
static void emit_batch_off(cg_sb *b, const char *name, const mcir_tensor *t, const mcir_tensor *out) {
    int rl = out->rank - 2, tl = t->rank - 2;
    bool mat[MCIR_MAX_RANK] = {0};
    mat[t->rank - 1] = mat[t->rank - 2] = true;
    cg_sb_printf(b, "__device__ __forceinline__ i64 %s(i64 b, MC_PARAMS) {\n    i64 o = 0, s = ", name);
    cg_sb_prod(b, t, mat);
    cg_sb_puts(b, "; (void)b;\n");
    for (int k = rl - 1; k >= 0; k--) {
        cg_sb_puts(b, "   ");
        cg_emit_bcast_step(b, "o", "b", "s", out, k, t, k - (rl - tl), true);
    }
    cg_sb_puts(b, "    (void)s;\n    return o;\n}\n");
}

/* Batch stride of operand t in a strided-batched GEMM, or -1 if its batch
 * dims are neither the output's nor all broadcast. */
static int64_t uniform_stride(const mcir_tensor *t, const mcir_tensor *out) {
    int rl = out->rank - 2, tl = t->rank - 2;
    int64_t tb = 1;
    for (int i = 0; i < tl; i++) tb *= t->shape[i];
    if (tb == 1) return 0;
    if (tl != rl) return -1;
    for (int i = 0; i < tl; i++)
        if (t->shape[i] != out->shape[i]) return -1;
    return t->shape[t->rank - 1] * t->shape[t->rank - 2];
}

/* The stored operand behind a matmul input: a kernel read, or the read a
 * folded last-two-dims transpose of the region takes (flipping *trans). */
static const mcir_tensor *gemm_operand(const mcir_kernel_plan *kp, const mcir_tensor *t, bool *trans) {
    if (cg_read_index(kp, t) >= 0) return t;
    mcir_node *n = cg_region_producer(kp, t);
    if (!n || n->op != MCIR_OP_TRANSPOSE || cg_read_index(kp, n->inputs[0]) < 0) return NULL;
    const int64_t *perm;
    int r = mcir_node_ints(n, "perm", &perm);
    if (r < 2) return NULL;
    for (int i = 0; i < r - 2; i++)
        if (perm[i] != i) return NULL;
    if (perm[r - 2] != r - 1 || perm[r - 1] != r - 2) return NULL;
    *trans = !*trans;
    return n->inputs[0];
}

/* The region is the matmul plus nothing but the folded operand transposes. */
static bool region_is(const mcir_kernel_plan *kp, const mcir_node *mm, const mcir_tensor *a,
                      const mcir_tensor *b) {
    for (int i = 0; i < kp->n_nodes; i++) {
        const mcir_node *x = kp->nodes[i];
        if (x == mm) continue;
        if (x->op == MCIR_OP_TRANSPOSE && (x->inputs[0] == a || x->inputs[0] == b)) continue;
        return false;
    }
    return true;
}

/* The tile macros of templates/matmul.cuh from the plan's layout. */
void cg_emit_gemm_tile(cg_sb *b, const mcir_gemm_problem *g, const mcir_gemm_layout *l) {
    cg_sb_printf(b, "#define MM_BM %lld\n#define MM_BN %lld\n#define MM_BK %lld\n#define MM_WARPS %d\n"
                    "#define MM_STAGES %d\n#define MM_MMA %d\n#define MM_BF16 %d\n#define MM_WM %d\n"
                    "#define MM_WN %d\n#define MM_ASYNC %d\n",
                 (long long)l->bm, (long long)l->bn, (long long)l->bk, l->warps, l->stages, g->mma,
                 g->dtype == MCIR_DTYPE_BF16, l->wm, l->wn, l->async);
}

/* The cp.async form of operand NAME ("A" / "B") of the sm_80 mainloop
 * (templates/matmul.cuh, MM_ASYNC): where the value is a plain read of
 * an f16/bf16 tensor of the GEMM's dtype (or a folded last-two-dims
 * transpose of one) with a rank >= 2 and an even contiguous extent
 * (copies of 16 bytes where it is a multiple of 8 elements, else 8 or 4:
 * every row aligned to the copy in the runtime's 256-byte aligned
 * buffers), MM_<NAME>_CPA 1, the copy's bytes, the pointer and the stage
 * layout as stored (k_major: K runs fastest in memory); else nothing (the
 * element-wise staging through a_at / b_at). */
static void emit_cp_async_operand(cg_sb *b, const mcir_kernel_plan *kp, const char *name, const mcir_tensor *v,
                                  bool trans, bool is_a, int64_t M, int64_t N, int64_t K, mcir_dtype dt) {
    if (v->rank < 2) return;
    bool t = trans;
    const mcir_tensor *st = gemm_operand(kp, v, &t);
    if (!st || st->dtype != dt) return;
    /* A stored [M, K] (k-major) unless transposed ([K, M]); B stored [K, N]
     * unless transposed ([N, K], k-major) */
    bool k_major = is_a ? !t : t;
    int64_t contiguous = k_major ? K : is_a ? M : N;
    /* the largest copy every row start is aligned to: 16 bytes, else 8 or
     * 4 (rows of 2468 bytes: a [1000, 1234] f16 weight); odd extents
     * (2-byte rows) stay staged element by element */
    int bytes = contiguous % 8 == 0 ? 16 : contiguous % 4 == 0 ? 8 : contiguous % 2 == 0 ? 4 : 0;
    if (!bytes) return;
    cg_sb_printf(b, "#define MM_%s_CPA 1\n#define MM_%s_CPB %d\n#define MM_%s_PTR r%d\n#define MM_%s_KMAJOR %d\n",
                 name, name, bytes, name, cg_read_index(kp, st), name, k_major);
}

/* The entry with the register budget the launch model planned: FMA
 * tiles __maxnreg__(estimate + 1/10) (CUDA 12.4 on), mma tiles and an
 * older NVRTC __launch_bounds__(threads, min_blocks), the occupancy of
 * 1/4 + 8 above the estimate (with the thread count alone ptxas guessed
 * its own occupancy, capped small blocks at 40 registers and spilled).
 * The emulator ignores both. */
void cg_emit_gemm_signature(cg_sb *b, const mcir_kernel_plan *kp, const mcir_gemm_layout *l) {
    if (l->max_registers > 0)
        cg_sb_printf(b, "#if defined(MC_EMULATE)\n#define MM_LAUNCH_BOUNDS\n"
                        "#elif __CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && "
                        "__CUDACC_VER_MINOR__ >= 4)\n#define MM_LAUNCH_BOUNDS __maxnreg__(%d)\n"
                        "#else\n#define MM_LAUNCH_BOUNDS __launch_bounds__(%d, %d)\n#endif\n",
                     l->max_registers, l->threads, l->min_blocks);
    else
        cg_sb_printf(b, "#ifdef MC_EMULATE\n#define MM_LAUNCH_BOUNDS\n#else\n"
                        "#define MM_LAUNCH_BOUNDS __launch_bounds__(%d, %d)\n#endif\n",
                     l->threads, l->min_blocks);
    cg_sb_printf(b, "extern \"C\" __global__ void MM_LAUNCH_BOUNDS %s(MC_PARAMS)", kp->name);
}

/* The launch the plan recorded for the layout: codegen asserts it, never
 * changes it (a plan built elsewhere that disagrees is an error). */
bool cg_gemm_launch(cg_kernel *k, const mcir_gemm_problem *g, const mcir_gemm_layout *l, mcir_diag *d) {
    mcir_kernel_plan *kp = k->kp;
    int64_t items = g->batch * ((g->m + l->bm - 1) / l->bm) * ((g->n + l->bn - 1) / l->bn);
    int64_t grid = items < 1 ? 1 : items > INT32_MAX ? INT32_MAX : items;
    if (cg_rebinding) {   /* the grid at this binding; the plan's is at the largest sizes */
        if (kp->block[0] != l->threads || kp->smem_bytes != l->smem_bytes) {
            cg_error(d, kp, "the tile's launch at this size (block %d, %lld B shared) is not the plan's",
                     l->threads, (long long)l->smem_bytes);
            return false;
        }
        k->grid[0] = grid;
        k->grid[1] = k->grid[2] = 1;
        for (int j = 0; j < 3; j++) k->block[j] = kp->block[j];
        k->smem = kp->smem_bytes;
        return true;
    }
    if (kp->grid[0] != grid || kp->grid[1] != 1 || kp->grid[2] != 1 || kp->block[0] != l->threads ||
        kp->block[1] != 1 || kp->block[2] != 1 || kp->smem_bytes != l->smem_bytes) {
        cg_error(d, kp, "the plan's launch (grid %lld, block %d, %lld B shared) is not the tile's "
                        "(grid %lld, block %d, %lld B)",
                 (long long)kp->grid[0], kp->block[0], (long long)kp->smem_bytes, (long long)grid,
                 l->threads, (long long)l->smem_bytes);
        return false;
    }
    for (int j = 0; j < 3; j++) {
        k->grid[j] = kp->grid[j];
        k->block[j] = kp->block[j];
    }
    k->smem = kp->smem_bytes;
    return true;
}

static int64_t tile_of(const mcir_tiling *t, const char *dim) {
    for (int i = 0; i < t->n_dims && i < MCIR_MAX_TILE_DIMS; i++)
        if (t->dim_names[i] && strcmp(t->dim_names[i], dim) == 0) return t->block_tile[i];
    return 0;
}

/* The tiled template (templates/matmul.cuh) for the plan's tile: a2, b2,
 * c2 the 2-D forms of A, B, C (rank-1 operands widened). */
static bool gen_tiled(cg_kernel *k, const mcir_target *target, mcir_diag *d, const mcir_tensor *a2p,
                      const mcir_tensor *b2p, const mcir_tensor *c2p, bool ta, bool tb, int64_t M, int64_t N,
                      int64_t K, int64_t batch) {
    mcir_kernel_plan *kp = k->kp;
    const mcir_node *n = kp->anchor;
    const mcir_tensor *A = n->inputs[0], *B = n->inputs[1], *C = n->outputs[0];
    const mcir_tensor a2 = *a2p, b2 = *b2p, c2 = *c2p;
    cg_sb b = {0};
    cg_emitter e;
    cg_begin_source(&b, kp);
    /* the paired epilogue (a gated linear unit): its anchor the gate's
     * half, the up's beside it, both from the accumulator pair */
    const mcir_tensor *glu[2] = {NULL, NULL};
    const bool pair = mcir_kernel_glu(kp, C, glu);
    cg_emitter_init(&e, kp, &b, pair ? glu[0] : C, d);
    if (pair) e.pair[0] = glu[0], e.pair[1] = glu[1];
    cg_emit_value(&e, A);
    cg_emit_value(&e, B);
    mcir_gemm_problem gp;
    const bool have_gp = mcir_gemm_problem_of(kp, &gp);
    /* the FMA tiles' epilogue index packed, (row << 32) | column, where
     * the sizes allow (docs/codegen.md "Packed epilogue indices") and the
     * GEMM's column n is the output's last dim: not a matrix times a
     * vector B ([..., M, K] . [K] -> [..., M]: its 2-D form's single
     * column is not C's; C's last dim is M). The mma ring keeps the flat
     * index: packed, its epilogue took more instructions, not fewer (f16
     * 2048 x 3072 x 768 with a bias, 128 x 128 tiles: 2064 SASS
     * instructions flat, 2296 packed; with a residual 2416 / 2856), and
     * where the ring's prologue issues every K tile ptxas hoisted the
     * bias loads into the last k-steps (prologue_ta_bf16: 76 -> 100
     * registers) */
    const bool pk = have_gp && !gp.mma && B->rank >= 2 && cg_epilogue_packable(&e);
    if (pk) cg_emit_epilogue_packed(&e, 1);
    else cg_emit_epilogue(&e, 1);
    if (!e.ok) {
        cg_emitter_free(&e);
        cg_sb_free(&b);
        return false;
    }
    /* the plan's tile, realised as the launch model lays it out */
    mcir_gemm_layout l;
    const char *why = "not a GEMM";
    if (!have_gp || !mcir_gemm_layout_of(target, &gp, &kp->tiling, &l, &why)) {
        cg_error(d, kp, "the plan's GEMM tile cannot be realised: %s", why);
        cg_emitter_free(&e);
        cg_sb_free(&b);
        return false;
    }
    /* the problem's extents: expressions of the dims where they depend on one */
    int ar = a2.rank, br = b2.rank, lead = c2.rank - 2;
    bool lead_mask[MCIR_MAX_RANK] = {0};
    for (int i = 0; i < lead; i++) lead_mask[i] = true;
    cg_sb_puts(&b, "#define MM_M ");
    cg_sb_extent(&b, &a2, ta ? ar - 1 : ar - 2);
    cg_sb_puts(&b, "\n#define MM_N ");
    cg_sb_extent(&b, &b2, tb ? br - 2 : br - 1);
    cg_sb_puts(&b, "\n#define MM_K ");
    cg_sb_extent(&b, &a2, ta ? ar - 2 : ar - 1);
    cg_sb_puts(&b, "\n#define MM_BATCH ");
    if (c2.sym) cg_sb_prod(&b, &c2, lead_mask);
    else cg_sb_printf(&b, "%lldLL", (long long)batch);
    cg_sb_printf(&b, "\n#define MM_TRANS_A %d\n#define MM_TRANS_B %d\n", ta, tb);
    if (cg_dyn && kp->tiling.registers_estimate > 0)   /* the budget planned at the largest sizes */
        mcir_gemm_layout_budget(target, gp.mma, kp->tiling.registers_estimate, &l);
    cg_emit_gemm_tile(&b, &gp, &l);
    if (l.async) {
        emit_cp_async_operand(&b, kp, "A", A, ta, true, M, N, K, gp.dtype);
        emit_cp_async_operand(&b, kp, "B", B, tb, false, M, N, K, gp.dtype);
    }
    emit_batch_off(&b, "a_boff", &a2, &c2);
    emit_batch_off(&b, "b_boff", &b2, &c2);
    cg_sb_printf(&b, "__device__ __forceinline__ float a_at(i64 bb, i64 m, i64 kk, MC_PARAMS) {\n"
                     "    return v%d(a_boff(bb, MC_ARGS) + %s, 0.0f, MC_ARGS);\n}\n",
                 A->id, ta ? "kk * MM_M + m" : "m * MM_K + kk");
    cg_sb_printf(&b, "__device__ __forceinline__ float b_at(i64 bb, i64 kk, i64 nn, MC_PARAMS) {\n"
                     "    return v%d(b_boff(bb, MC_ARGS) + %s, 0.0f, MC_ARGS);\n}\n",
                 B->id, tb ? "nn * MM_K + kk" : "kk * MM_N + nn");
    cg_sb_printf(&b, "#define MM_GLU %d\n#define MM_ON %s\n", pair, pair ? "(MM_N / 2)" : "MM_N");
    if (pair)   /* the (gate, up) accumulator pair rounded to the product's dtype, the gate's bits low */
        cg_sb_printf(&b, "__device__ __forceinline__ float mm_pair(float g, float u) {\n"
                         "    return __int_as_float((int)((u32)mc_f32_to_%s(g) | ((u32)mc_f32_to_%s(u) << 16)));\n}\n",
                     cg_dsuffix(C->dtype), cg_dsuffix(C->dtype));
    cg_sb_printf(&b, "__device__ __forceinline__ void mm_store(i64 bb, i64 m, i64 n, float acc, MC_PARAMS) {\n"
                     "    epilogue(%s, acc, MC_ARGS);\n}\n",
                 pk ? "(i64)(((u64)(bb * MM_M + m) << 32) | (u64)n)" : "(bb * MM_M + m) * MM_ON + n");
    /* the bounds checks where tiles can hang over the output (sizes not
     * multiples of the block tile's, or not known here). The mma ring
     * checks its rows always: with no predicate left on its stores ptxas
     * converts and addresses every accumulator of the warp before the
     * first store (a bare bf16 product with 4 x 4 m16n8 tiles a warp,
     * packed: 219-244 registers against 138-151 checked, f16 167-195);
     * its columns unchecked, a bare bf16 2048 x 3072 x 768 product on 128
     * x 128 tiles takes 1328 SASS instructions against 1704 checked, 147
     * registers either way */
    const bool dyn = cg_dyn && (cg_tensor_dynamic(A) || cg_tensor_dynamic(B) || cg_tensor_dynamic(C));
    cg_sb_printf(&b, "#define MM_CHECK_M %d\n#define MM_CHECK_N %d\n", dyn || gp.mma || M % l.bm != 0,
                 dyn || N % l.bn != 0);
    cg_sb_puts(&b, mcir_tpl_matmul);
    cg_emit_gemm_signature(&b, kp, &l);
    cg_sb_puts(&b, " {\n    mc_matmul(MC_ARGS);\n}\n");
    cg_emitter_free(&e);
    k->source = cg_sb_take(&b);
    return cg_gemm_launch(k, &gp, &l, d);
}

bool cg_gen_matmul(cg_kernel *k, const mcir_target *target, mcir_diag *d) {
    mcir_kernel_plan *kp = k->kp;
    const mcir_node *n = kp->anchor;
    if (n->op != MCIR_OP_MATMUL) {
        cg_error(d, kp, "the matmul template needs a matmul anchor, got '%s'", mcir_op_name(n->op));
        return false;
    }
    const mcir_tensor *A = n->inputs[0], *B = n->inputs[1], *C = n->outputs[0];
    bool ta = mcir_node_bool(n, "transpose_a"), tb = mcir_node_bool(n, "transpose_b");
    /* NumPy's rank-1 operands: A [K] is the row [1, K], B [K] the column
     * [K, 1], and C lacks the dims they add. The indexing below works on
     * these 2-D forms (a2, b2, c2: the same elements in the same order);
     * transpose flags mean nothing on rank 1. */
    mcir_tensor a2 = *A, b2 = *B, c2 = *C;
    if (A->rank == 1) {   /* (extents as integers: a symbolic one is found by the rebinding check) */
        a2.sym = NULL;
        a2.rank = 2;
        a2.shape[0] = 1;
        a2.shape[1] = A->shape[0];
        ta = false;
    }
    if (B->rank == 1) {
        b2.sym = NULL;
        b2.rank = 2;
        b2.shape[0] = B->shape[0];
        b2.shape[1] = 1;
        tb = false;
    }
    int lead = C->rank - (A->rank >= 2) - (B->rank >= 2);
    if (A->rank < 1 || B->rank < 1 || lead < 0 || lead + 2 > MCIR_MAX_RANK) {
        cg_error(d, kp, "matmul operands need rank >= 1");
        return false;
    }
    if (c2.rank != lead + 2) c2.sym = NULL;
    c2.rank = lead + 2;
    c2.shape[lead] = ta ? a2.shape[a2.rank - 1] : a2.shape[a2.rank - 2];
    c2.shape[lead + 1] = tb ? b2.shape[b2.rank - 2] : b2.shape[b2.rank - 1];
    int64_t M = c2.shape[lead], N = c2.shape[lead + 1];
    int64_t K = ta ? a2.shape[a2.rank - 2] : a2.shape[a2.rank - 1];
    int64_t batch = mcir_tensor_numel(C) / (M * N);

    if (tile_of(&kp->tiling, "wg") > 0) {   /* the sm_90a template (kernelplan/launch_gemm_sm90.c) */
        if (!cg_gen_gemm_sm90(k, target, d)) return false;
    } else if (!gen_tiled(k, target, d, &a2, &b2, &c2, ta, tb, M, N, K, batch)) {
        return false;
    }

    /* cuBLAS: operands that are kernel reads (or a folded last-two-dims
     * transpose of one), uniform batch strides. A bare matmul writes C
     * directly; with an epilogue, cuBLAS writes f32 into a staging buffer
     * and the generated NAME_epilogue kernel applies the chain. */
    cg_gemm_desc *g = &k->gemm;
    memset(g, 0, sizeof *g);
    bool fa = ta, fb = tb;
    const mcir_tensor *sa_t = gemm_operand(kp, A, &fa), *sb_t = gemm_operand(kp, B, &fb);
    int ra = sa_t ? cg_read_index(kp, sa_t) : -1, rb = sb_t ? cg_read_index(kp, sb_t) : -1;
    int wc = cg_write_index(kp, C);
    bool bare = kp->n_writes == 1 && wc >= 0 && region_is(kp, n, sa_t, sb_t);
    const mcir_tensor *sa2 = sa_t == A ? &a2 : sa_t, *sb2 = sb_t == B ? &b2 : sb_t;   /* 2-D forms */
    int64_t sa = sa_t ? uniform_stride(sa2, &c2) : -1, sb = sb_t ? uniform_stride(sb2, &c2) : -1;
    /* (rank-1 operands stay with the generated kernel, as the cost model
     * plans them: kernelplan/cost.c cost_matmul) */
    if (A->rank >= 2 && B->rank >= 2 && C->rank >= 2 && ra >= 0 && rb >= 0 && sa >= 0 && sb >= 0 &&
        sa_t->dtype == sb_t->dtype &&
        (!bare || sa_t->dtype == C->dtype) && M < (1ll << 31) && N < (1ll << 31) &&
        K < (1ll << 31) && batch < (1ll << 31)) {
        g->ok = true;
        g->epilogue = !bare;
        g->trans_a = fa;
        g->trans_b = fb;
        g->m = M;
        g->n = N;
        g->k = K;
        g->batch = batch;
        g->lda = sa2->shape[sa2->rank - 1];
        g->ldb = sb2->shape[sb2->rank - 1];
        g->ldc = N;
        g->stride_a = sa;
        g->stride_b = sb;
        g->stride_c = M * N;
        if (batch > 1 && sb == 0 && sa == M * K && !fa) {
            /* every batch against the same B, A's rows one after another:
             * one GEMM of batch x M rows (a linear layer over [B, T, K]) */
            g->m = batch * M;
            g->batch = 1;
            g->stride_a = g->stride_b = g->stride_c = 0;
        }
        g->read_a = ra;
        g->read_b = rb;
        g->write_c = bare ? wc : -1;
        g->dtype = sa_t->dtype;
        g->c_dtype = bare ? C->dtype : MCIR_DTYPE_F32;
        g->read_bias = g->read_residual = g->write_d = -1;
        mcir_gemm_epilogue le;
        if (!bare && !mcir_kernel_gemm_epilogue(kp, &le)) {
            /* an epilogue no library call expresses: the generated GEMM
             * applies it in registers, one launch, nothing staged */
            memset(g, 0, sizeof *g);
            return true;
        }
        if (!bare) {
            g->lt = true;
            g->lt_epilogue = le.code;
            g->read_bias = le.bias ? cg_read_index(kp, le.bias) : -1;
            g->read_residual = le.residual ? cg_read_index(kp, le.residual) : -1;
            g->write_d = cg_write_index(kp, le.out);
            g->d_dtype = le.out->dtype;
            if ((le.bias && g->read_bias < 0) || (le.residual && g->read_residual < 0) ||
                g->write_d < 0 || g->batch > 1)   /* one cuBLASLt call computes one matrix */
                g->lt = false;
        }
        if (!bare) {
            /* the epilogue kernel: every write from the staged f32 product */
            cg_sb eb = {0};
            cg_emitter ee;
            cg_begin_source(&eb, kp);
            cg_emitter_init(&ee, kp, &eb, C, d);
            cg_emit_epilogue(&ee, 1);
            if (!ee.ok) {
                cg_emitter_free(&ee);
                cg_sb_free(&eb);
                return false;
            }
            snprintf(k->epi_name, sizeof k->epi_name, "%s_epilogue", kp->name);
            cg_sb_printf(&eb, "extern \"C\" __global__ void __launch_bounds__(256) %s(MC_PARAMS, const float* mc_acc) {\n"
                              "    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < ",
                         k->epi_name);
            cg_sb_numel(&eb, C);
            cg_sb_puts(&eb, ";\n         i += (i64)gridDim.x * blockDim.x)\n"
                            "        epilogue(i, MC_GLD(mc_acc, i), MC_ARGS);\n}\n");
            cg_emitter_free(&ee);
            k->epi_source = cg_sb_take(&eb);
            int64_t blocks = (batch * M * N + 255) / 256;
            k->epi_grid = blocks < (1ll << 20) ? blocks : (1ll << 20);
        }
    }
    return true;
}
