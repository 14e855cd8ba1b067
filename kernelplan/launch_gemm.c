/*
 * launch_gemm.c — the launch model of the GEMM-shaped kernels: MATMUL and
 * CONV2D (implicit GEMM), both run by codegen/templates/matmul.cuh. It
 * says how the template realises a tile (warp grid, shared memory,
 * registers, occupancy), enumerates the tiles legal for the target, scores
 * each with the one cost model (mcir_cost_kernel with the candidate as its
 * tiles override) and keeps the best; the reason names the runner-up and
 * what it lost on. A tuning cache (tune.c) may replace the model's pick by
 * a measured one.
 *
 * Invariant: k->tiling, k->grid, k->block and k->smem_bytes are exactly
 * what codegen launches (tpl_matmul.c and tpl_conv.c derive their layout
 * from the same mcir_gemm_layout_of and assert the plan's launch), and a
 * MATMUL the runtime hands to cuBLAS / cuBLASLt names it in k->library.
 */
#include <stdlib.h>
#include <string.h>

#include "kernelplan/launch_gemm_sm90.h"
#include "kernelplan/plan-impl.h"

static int64_t round_up(int64_t v, int64_t unit) { return unit > 0 ? (v + unit - 1) / unit * unit : v; }

static int64_t next_pow2(int64_t x) {
    int64_t v = 1;
    while (v < x) v <<= 1;
    return v;
}

static bool is_half(mcir_dtype t) { return t == MCIR_DTYPE_F16 || t == MCIR_DTYPE_BF16; }

static int64_t tile_dim(const mcir_tiling *ti, const char *name) {
    for (int i = 0; i < ti->n_dims && i < MCIR_MAX_TILE_DIMS; i++)
        if (ti->dim_names[i] && strcmp(ti->dim_names[i], name) == 0) return ti->block_tile[i];
    return 0;
}

/* ------------------------------------------------------------ the problem */

bool mcir_gemm_problem_of(const mcir_kernel_plan *k, mcir_gemm_problem *g) {
    memset(g, 0, sizeof *g);
    const mcir_node *n = k->anchor;
    if (!n) return false;
    if (k->tpl == MCIR_TEMPLATE_MATMUL && n->op == MCIR_OP_MATMUL) {
        const mcir_tensor *A = n->inputs[0], *B = n->inputs[1], *Y = n->outputs[0];
        bool ta = mcir_node_bool(n, "transpose_a"), tb = mcir_node_bool(n, "transpose_b");
        int ra = A->rank, rb = B->rank;
        g->m = ra >= 2 ? (ta ? A->shape[ra - 1] : A->shape[ra - 2]) : 1;
        g->k = ra >= 2 ? (ta ? A->shape[ra - 2] : A->shape[ra - 1]) : A->shape[0];
        g->n = rb >= 2 ? (tb ? B->shape[rb - 2] : B->shape[rb - 1]) : 1;
        int64_t mn = g->m * g->n;
        g->batch = mn > 0 ? mcir_tensor_numel(Y) / mn : 1;
        g->dtype = A->dtype;
        g->mma = is_half(A->dtype) && A->dtype == B->dtype;
        g->glu = mcir_kernel_glu(k, Y, NULL);
        for (int i = 0; i < k->n_reads; i++) {
            const mcir_tensor *r = k->reads[i];
            g->residual = g->residual || (r != A && r != B && r->rank >= 1 && Y->rank >= 1 &&
                                          mcir_tensor_numel(r) == mcir_tensor_numel(Y) &&
                                          r->shape[r->rank - 1] == Y->shape[Y->rank - 1]);
        }
        g->trans_b = rb >= 2 && tb;
        const mcir_tensor *abc[3] = {A, B, Y};
        for (int i = 0; i < 3; i++)
            for (int j = 0; abc[i]->sym && j < abc[i]->rank; j++)
                g->dynamic = g->dynamic || !mcir_extent_is_const(&abc[i]->sym[j], NULL);
    } else if (k->tpl == MCIR_TEMPLATE_CONV2D && n->op == MCIR_OP_CONV2D) {
        const mcir_tensor *X = n->inputs[0], *W = n->inputs[1], *Y = n->outputs[0];
        if (X->rank != 4 || W->rank != 4 || Y->rank != 4) return false;
        int64_t groups = mcir_node_int(n, "groups");
        if (groups < 1) groups = 1;
        g->m = Y->shape[0] * Y->shape[2] * Y->shape[3];
        g->n = Y->shape[1] / groups;
        g->k = W->shape[1] * W->shape[2] * W->shape[3];
        g->batch = groups;
        g->dtype = X->dtype;
        g->mma = is_half(X->dtype) && X->dtype == W->dtype;
        g->implicit = true;
    } else {
        return false;
    }
    if (g->batch < 1) g->batch = 1;
    g->epilogue_ops = k->n_nodes > 1 ? k->n_nodes - 1 : 0;
    return true;
}

/* ------------------------------------------------------------- the layout */

/* Resident blocks per SM (the occupancy calculator's rules, as audit.c). */
static int occupancy(const mcir_target *t, int threads, int regs, int64_t smem, const char **limit) {
    int warps = (int)round_up(threads, t->warp_size) / t->warp_size;
    int max_warps = t->max_threads_per_sm / t->warp_size;
    int b = t->max_blocks_per_sm;
    *limit = "blocks";
    if (max_warps / warps < b) {
        b = max_warps / warps;
        *limit = "warps";
    }
    int64_t per_warp = round_up((int64_t)regs * t->warp_size, t->reg_alloc_unit);
    int by_regs = (int)((t->regs_per_sm / t->sm_partitions) / per_warp * t->sm_partitions / warps);
    if (by_regs < b) {
        b = by_regs;
        *limit = "registers";
    }
    int64_t s = round_up(smem + t->smem_reserved_per_block, t->smem_alloc_unit);
    if (t->smem_per_sm / s < b) {
        b = (int)(t->smem_per_sm / s);
        *limit = "shared memory";
    }
    return b;
}

static bool is_pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

/* Registers per thread the template needs, fitted to ptxas 13.0 -v on
 * sm_80 / sm_90 over the examples' and golden graphs' GEMMs
 * (docs/kernelplan.md "Registers"). mma: the cp.async ring's fit below. FMA: ptxas sees the
 * problem's sizes as constants, so it drops the outputs a one-tile
 * dimension never reaches (N = 4 keeps one of tn columns); the rest is
 * a least-squares fit on those live outputs: 41 + live outputs + live
 * rows + 6 per live column, + 6 per tile count that is not a power of two
 * (the 64-bit division of the tile index stays a division), - 5 when K is
 * not a multiple of BLOCK_K (ptxas no longer unrolls the load loops), + 4
 * for a single tile; the implicit-GEMM conv + 2 (its im2col math varies
 * with the kernel window, which the problem does not carry). A matmul
 * whose tiles divide N checks no column in its epilogue (MM_CHECK_N 0):
 * 2 less a column from 4 columns a thread, and 12 less again with B
 * stored [N, K] at 4 columns (below). */
static int estimate_registers(const mcir_gemm_layout *l,
                              const mcir_gemm_problem *g) {
    int64_t tiles_m = (g->m + l->bm - 1) / l->bm, tiles_n = (g->n + l->bn - 1) / l->bn;
    int np2 = !is_pow2(tiles_n) + !is_pow2(tiles_m * tiles_n);
    if (g->mma && l->async) {
        /* the cp.async ring: a least-squares fit of ptxas 13.0 on sm_80
         * over 99 kernels (9 problems x up to 15 tiles of test_gemm_sm80,
         * the examples' GEMMs), its constant then moved to the examples'
         * kernels (which test_launch holds to 10 %): 39 + 5 with a fused
         * epilogue + 6/7 per live accumulator (an m8 row
         * half or n8 column of the warp tile that a single-tile dimension
         * with a one-warp grid never reaches is dropped: its index is a
         * constant past the problem) + 9/8 per fragment register of the
         * first two k16 steps (ldmatrix runs ahead) + 4 per tile count that
         * is not a power of two + 2 (the cp.async operands' pointers) - 13
         * when the ring's prologue issues every K tile (the mainloop issues
         * nothing) + 6 when K is not a multiple of 8 (a k-major operand is
         * staged element by element: test_codegen's transposed 77 x 130 x
         * 67 matmul needs 104 registers). About a third of the sweep is off by more than 10 %,
         * 6 % by more than 25 %: ptxas's count moves with the constants. */
        int64_t rows = 0, cols = 0;
        for (int h = 0; h < 2 * l->tm; h++) rows += !(tiles_m == 1 && l->wm == 1 && 8 * h >= g->m);
        for (int j = 0; j < l->tn; j++) cols += !(tiles_n == 1 && l->wn == 1 && 8 * j >= g->n);
        int live = (int)(2 * rows * cols), frag = (l->tm * 4 + l->tn * 2) * (l->bk >= 32 ? 2 : 1);
        bool whole = (g->k + l->bk - 1) / l->bk <= l->stages - 1;
        /* an epilogue reading an operand of the output's size (a residual),
         * its flat index and load beside the accumulators: 11 (the golden
         * swiglu_bf16's down projection, [3, 5, 40] . [40, 16] + its input:
         * 60 measured against 49; the only such ring among the examples) */
        /* the paired epilogue (a GLU): half the accumulators make an output,
         * each from a pair; ptxas keeps 3/8 fewer live, 16 at most
         * (measured 64-91 against 73-96 over tests/test_glu.c's warp tiles
         * of 32 columns, 107-112 against 126-135 at Llama's 128-column
         * tiles, 182-195 at its 128 x 64 ones) */
        return 39 + live * 6 / 7 + frag * 9 / 8 + 4 * np2 + 2 - (whole ? 13 : 0) + (g->epilogue_ops > 0 ? 5 : 0) +
               (g->k % 8 ? 6 : 0) - (g->glu ? (live * 3 / 8 < 16 ? live * 3 / 8 : 16) : 0) +
               (g->residual ? 11 : 0);
    }
    int64_t ty = l->threads / 16;
    int tm = l->tm, tn = l->tn;
    if (tiles_m == 1)
        for (tm = 0; tm < l->tm && ty * tm < g->m; tm++) {}
    if (tiles_n == 1)
        for (tn = 0; tn < l->tn && 16 * tn < g->n; tn++) {}
    /* 6 per column a thread holds up to 4, 3 past that: the epilogue's
     * broadcast indices are 32-bit (gpt2_stack's c_fc, 8 x 8 outputs with
     * bias + GELU, measured 148 on sm_90 with its columns checked; 168
     * with 64-bit indices) */
    int r = 41 + tm * tn + tm + 6 * (tn < 4 ? tn : 4) + 3 * (tn > 4 ? tn - 4 : 0);
    r += 6 * np2;
    /* static sizes whose tiles divide N (a matmul's epilogue then checks
     * no column, MM_CHECK_N 0: its loads and stores unpredicated, the
     * packed index's column a constant offset) with 4 columns a thread or
     * more: 2 less a column (4 x 4 outputs: 85 measured on sm_80, 92 on
     * sm_90, against 92 / 102 checked; 8 x 8, gpt2_stack's c_fc on sm_90:
     * 138 against 148); with B stored [N, K] (transpose_b: Llama's
     * weights) and 4 columns 12 less again (4 x 4: 80 on sm_80, 82 on
     * sm_90; 8 x 4: 92 / 101, against 96 / 102 and 128 / 127 checked) */
    if (!g->implicit && !g->dynamic && g->n % l->bn == 0 && tn >= 4) r -= 2 * tn + (g->trans_b && tn == 4 ? 12 : 0);
    if (g->k % l->bk) r -= 5;
    if (g->batch * tiles_m * tiles_n == 1) r += 4;
    return r + (g->implicit ? 2 : 0);
}

bool mcir_gemm_layout_of(const mcir_target *t, const mcir_gemm_problem *g, const mcir_tiling *ti,
                         mcir_gemm_layout *l, const char **why) {
    const char *dummy;
    if (!why) why = &dummy;
    memset(l, 0, sizeof *l);
    l->bm = tile_dim(ti, "M");
    l->bn = tile_dim(ti, "N");
    l->bk = tile_dim(ti, "K");
    l->warps = ti->warps;
    l->stages = ti->stages;
    l->threads = l->warps * t->warp_size;
    /* the cp.async ring: every f16/bf16 GEMM (all targets are sm_80 or
     * later; on sm_90 where its wgmma path does not apply: an operand the
     * TMA cannot read, e.g. rows not a multiple of 16 bytes); conv2d's
     * im2col operand, never a plain read, is staged element by element
     * into it */
    l->async = g->mma;
    int max_stages = l->async ? 4 : 2, min_stages = l->async ? 2 : 1;
    if (l->bm < 1 || l->bn < 1 || l->bk < 1 || l->warps < 1 || l->stages < min_stages ||
        l->stages > max_stages) {
        *why = l->async ? "needs M, N, K tiles, warps and 2 to 4 stages (the cp.async ring)"
                        : "needs M, N, K tiles, warps and 1 or 2 stages";
        return false;
    }
    if (l->async && l->stages > 2 && l->stages - 1 > (g->k + l->bk - 1) / l->bk) {
        *why = "more stages than K has tiles to keep in flight";
        return false;
    }
    if (l->threads > t->max_threads_per_block) {
        *why = "too many threads per block";
        return false;
    }
    if (g->glu && !g->mma) {
        *why = "a paired epilogue needs the mma.sync tile (f16 / bf16 operands)";
        return false;
    }
    if (g->mma) {
        if (l->bk % 16) {
            *why = "BLOCK_K is not a multiple of the mma's k16";
            return false;
        }
        /* the warp grid with the squarest warp tiles of whole m16 x n8 fragments */
        int64_t best = -1;
        for (int wm = 1; wm <= l->warps; wm++) {
            if (l->warps % wm) continue;
            int wn = l->warps / wm;
            if (l->bm % (16 * wm) || l->bn % ((g->glu ? 16 : 8) * wn)) continue;
            int64_t d = l->bm / wm - l->bn / wn;
            if (d < 0) d = -d;
            if (best < 0 || d < best) {
                best = d;
                l->wm = wm;
                l->wn = wn;
            }
        }
        if (best < 0) {
            *why = "no warp grid of whole m16n8 fragments";
            return false;
        }
        l->tm = (int)(l->bm / l->wm / 16);
        l->tn = (int)(l->bn / l->wn / 8);
        if (l->tm * l->tn * 4 > 128) {
            *why = "more than 128 accumulators per thread";
            return false;
        }
        /* per stage and operand the larger of its two padded layouts
         * (rows of BK + 8 along K, or BK rows of BM / BN + 8: which one
         * the operand's storage takes is codegen's, MM_A_KMAJOR) */
        int64_t a = l->bm * l->bk + 8 * (l->bm > l->bk ? l->bm : l->bk);
        int64_t b = l->bn * l->bk + 8 * (l->bn > l->bk ? l->bn : l->bk);
        l->smem_bytes = (int64_t)l->stages * (a + b) * 2;
    } else {
        int ty = l->threads / 16;
        if (l->bn % 16 || l->bm % ty) {
            *why = "the 16 x threads/16 thread grid does not divide the tile";
            return false;
        }
        l->tm = (int)(l->bm / ty);
        l->tn = (int)(l->bn / 16);
        if (l->tm * l->tn > 64) {
            *why = "more than 64 outputs per thread";
            return false;
        }
        l->smem_bytes = (int64_t)l->stages * l->bk * (l->bm + 4 + l->bn + 4) * 4;
    }
    if (l->smem_bytes > t->smem_per_block_optin) {
        *why = "shared memory beyond the opt-in limit";
        return false;
    }
    l->registers = estimate_registers(l, g);
    if (l->registers > t->regs_per_thread) {
        *why = "registers beyond the per-thread limit";
        return false;
    }
    l->blocks_per_sm = occupancy(t, l->threads, l->registers, l->smem_bytes, &l->occupancy_limit);
    if (l->blocks_per_sm < 1) {
        *why = "not one block fits an SM";
        return false;
    }
    /* ptxas's budget. mma tiles: __launch_bounds__ with the occupancy of
     * the estimate + 1/4 + 8, within 10 % of the estimate as it is. FMA
     * tiles: a cap of the estimate + 1/10 (__maxnreg__): ptxas's own count
     * moves 40..86 for one 16x32x8 conv tile with the window, padding and
     * sizes, the cap holds it to what the plan scored, without spills
     * (test_launch, test_codegen); an NVRTC older than 12.4 gets the
     * launch bounds instead. */
    mcir_gemm_layout_budget(t, g->mma, l->registers, l);
    return true;
}

void mcir_gemm_layout_budget(const mcir_target *t, bool mma, int registers, mcir_gemm_layout *l) {
    l->max_registers = 0;
    if (!mma) {
        l->max_registers = registers + registers / 10;
        if (l->max_registers > t->regs_per_thread) l->max_registers = t->regs_per_thread;
    }
    const char *lim;
    int budget = registers + registers / 4 + 8;
    l->min_blocks = occupancy(t, l->threads, budget > t->regs_per_thread ? t->regs_per_thread : budget,
                              l->smem_bytes, &lim);
    if (l->min_blocks < 1) l->min_blocks = 1;
}

/* ------------------------------------------------------------ candidates */

static void set_tile(mcir_tiling *ti, int64_t bm, int64_t bn, int64_t bk, int warps, int stages) {
    memset(ti, 0, sizeof *ti);
    ti->n_dims = 3;
    ti->dim_names[0] = "M";
    ti->dim_names[1] = "N";
    ti->dim_names[2] = "K";
    ti->block_tile[0] = bm;
    ti->block_tile[1] = bn;
    ti->block_tile[2] = bk;
    ti->warps = warps;
    ti->stages = stages;
    ti->vector_width = 1;
}

typedef struct scored {
    mcir_tiling tiling;
    mcir_gemm_layout layout;
    mcir_kernel_cost cost;
} scored;

/* Best first: modelled time, then compute time (headroom), then less
 * shared memory, then fewer threads, then the larger tile. */
static int scored_cmp(const void *pa, const void *pb) {
    const scored *a = pa, *b = pb;
    if (a->cost.modelled_us != b->cost.modelled_us) return a->cost.modelled_us < b->cost.modelled_us ? -1 : 1;
    if (a->cost.compute_us != b->cost.compute_us) return a->cost.compute_us < b->cost.compute_us ? -1 : 1;
    if (a->layout.smem_bytes != b->layout.smem_bytes) return a->layout.smem_bytes < b->layout.smem_bytes ? -1 : 1;
    if (a->layout.threads != b->layout.threads) return a->layout.threads < b->layout.threads ? -1 : 1;
    int64_t ea = a->layout.bm * a->layout.bn * a->layout.bk, eb = b->layout.bm * b->layout.bn * b->layout.bk;
    if (ea != eb) return ea > eb ? -1 : 1;
    return a->layout.bm > b->layout.bm ? -1 : a->layout.bm < b->layout.bm ? 1 : 0;
}

/* Every legal candidate, scored and sorted; *n their count (malloc'd). */
static scored *enumerate(const mcir_plan *p, const mcir_kernel_plan *k, const mcir_gemm_problem *g, int *n) {
    static const int64_t bms[] = {16, 32, 64, 128}, bns[] = {32, 64, 128};
    static const int64_t bks_mma[] = {16, 32, 64}, bks_fma[] = {8, 16, 32};
    static const int warps_list[] = {1, 2, 4, 8};
    const int64_t *bks = g->mma ? bks_mma : bks_fma;
    /* a tile past the problem (next power of two) only computes padding */
    int64_t m_cap = next_pow2(g->m) < 16 ? 16 : next_pow2(g->m);
    int64_t n_cap = next_pow2(g->n) < 32 ? 32 : next_pow2(g->n);
    int64_t k_cap = next_pow2(g->k) < bks[0] ? bks[0] : next_pow2(g->k);
    int cap = 4 * 3 * 3 * 4 * 4, cnt = 0;
    scored *s = calloc((size_t)cap, sizeof *s);
    MCIR_ASSERT(s != NULL);
    mcir_kernel_plan probe = *k;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 3; c++)
                for (int w = 0; w < 4; w++)
                    for (int st = 1; st <= 4; st++) {
                        if (bms[a] > m_cap || bns[b] > n_cap || bks[c] > k_cap) continue;
                        scored *x = &s[cnt];
                        set_tile(&x->tiling, bms[a], bns[b], bks[c], warps_list[w], st);
                        if (!mcir_gemm_layout_of(p->target, g, &x->tiling, &x->layout, NULL)) continue;
                        x->tiling.working_set_bytes = x->layout.smem_bytes;
                        x->tiling.blocks_per_sm = x->layout.blocks_per_sm;
                        x->tiling.registers_estimate = x->layout.registers;
                        probe.tiling = x->tiling;
                        mcir_cost_options o = {.tiles = &x->tiling, .generated_only = true};
                        mcir_cost_kernel(&probe, p->target, &o, &x->cost);
                        cnt++;
                    }
    qsort(s, (size_t)cnt, sizeof *s, scored_cmp);
    *n = cnt;
    return s;
}

int mcir_gemm_candidates(const mcir_plan *p, const mcir_kernel_plan *k, mcir_gemm_candidate *out,
                         int max) {
    mcir_gemm_problem g;
    if (!mcir_gemm_problem_of(k, &g)) return 0;
    int n;
    scored *s = enumerate(p, k, &g, &n);
    for (int i = 0; i < n && i < max; i++) {
        out[i].tiling = s[i].tiling;
        out[i].modelled_us = s[i].cost.modelled_us;
    }
    free(s);
    return n;
}

/* ----------------------------------------------------------------- apply */

static const char *tile_words(mcir_arena *a, const mcir_gemm_layout *l, bool mma) {
    return mma ? mcir_arena_printf(a, "%lldx%lldx%lld, %d warps (%dx%d), %d stage%s", (long long)l->bm,
                                   (long long)l->bn, (long long)l->bk, l->warps, l->wm, l->wn,
                                   l->stages, l->stages > 1 ? "s" : "")
               : mcir_arena_printf(a, "%lldx%lldx%lld, %d warps (%dx%d outputs per thread), %d stage%s",
                                   (long long)l->bm, (long long)l->bn, (long long)l->bk, l->warps,
                                   l->tm, l->tn, l->stages, l->stages > 1 ? "s" : "");
}

/* What the runner-up lost on, in words. */
static const char *lost_on(mcir_arena *a, const scored *best, const scored *r) {
    const mcir_kernel_cost *b = &best->cost, *c = &r->cost;
    if (c->modelled_us == b->modelled_us)
        return "same modelled time; lost the tie-break (compute headroom, then shared memory, threads)";
    bool mem_bound = c->memory_us >= c->compute_us;
    if (mem_bound)
        return mcir_arena_printf(a, "memory-bound at %.2f us vs %.2f: more global traffic (%s vs %s)",
                                 c->memory_us, b->memory_us, mcir_plan_bytes_str(a, c->global_bytes),
                                 mcir_plan_bytes_str(a, b->global_bytes));
    if (c->smem_us >= c->compute_us * 0.999 && c->smem_us > b->smem_us)
        return mcir_arena_printf(a, "shared-memory-bound: %.2f us of fragment and tile traffic vs %.2f",
                                 c->smem_us, b->smem_us);
    return mcir_arena_printf(a, "compute %.2f us vs %.2f: %.2f waves of %d block%s/SM vs %.2f of %d",
                             c->compute_us, b->compute_us, c->waves, c->blocks_per_sm,
                             c->blocks_per_sm == 1 ? "" : "s", b->waves, b->blocks_per_sm);
}

static void set_launch(mcir_kernel_plan *k, const mcir_gemm_problem *g, const mcir_gemm_layout *l) {
    int64_t items = g->batch * plan_ceil_div(g->m, l->bm) * plan_ceil_div(g->n, l->bn);
    k->grid[0] = items < 1 ? 1 : items > INT32_MAX ? INT32_MAX : items;
    k->grid[1] = k->grid[2] = 1;
    k->block[0] = l->threads;
    k->block[1] = k->block[2] = 1;
    k->smem_bytes = l->smem_bytes;
    k->smem_static_bytes = 0;
}

/* Where the runtime hands a MATMUL to a library, which call (mirrors
 * codegen/tpl_matmul.c and cublas.c through the cost model's path). */
static void set_library(mcir_plan *p, mcir_kernel_plan *k, const mcir_gemm_problem *g) {
    k->library = k->library_op = NULL;
    if (k->tpl != MCIR_TEMPLATE_MATMUL) return;
    mcir_kernel_cost c;
    mcir_cost_kernel(k, p->target, NULL, &c);
    if (!c.library) return;
    const char *dt = mcir_dtype_name(g->dtype);
    const char *layout = mcir_arena_printf(p->arena, "%c%c", k->trans_a ? 'T' : 'N', k->trans_b ? 'T' : 'N');
    k->library = c.library;
    if (strcmp(c.library, "cublasLt") == 0) {
        mcir_gemm_epilogue e;
        int code = mcir_kernel_gemm_epilogue(k, &e) ? e.code : 1;
        k->library_op = mcir_arena_printf(
            p->arena, "cublasLtMatmul %s %s (row-major A, B), epilogue %d%s%s%s, f32 accumulate "
                      "(CUBLAS_COMPUTE_32F), M=%lld N=%lld K=%lld",
            dt, layout, code, code & 4 ? " bias" : "", code & 2 ? " relu" : code & 32 ? " gelu" : "",
            e.residual ? " + residual (beta=1)" : "", (long long)g->m, (long long)g->n, (long long)g->k);
    } else {
        bool staged = c.staging_bytes > 0;
        k->library_op = mcir_arena_printf(
            p->arena, "cublasGemmStridedBatchedEx %s %s (row-major A, B), f32 accumulate "
                      "(CUBLAS_COMPUTE_32F), M=%lld N=%lld K=%lld batch=%lld%s",
            dt, layout, (long long)g->m, (long long)g->n, (long long)g->k, (long long)g->batch,
            staged ? ", f32 product staged for NAME_epilogue" : "");
    }
}

bool mcir_gemm_apply(mcir_plan *p, mcir_kernel_plan *k, const mcir_tiling *ti, const char *reason) {
    mcir_gemm_problem g;
    mcir_gemm_layout l;
    if (!mcir_gemm_problem_of(k, &g) || !mcir_gemm_layout_of(p->target, &g, ti, &l, NULL)) return false;
    const char *keep = reason ? reason : k->tiling.reason;
    set_tile(&k->tiling, l.bm, l.bn, l.bk, l.warps, l.stages);
    k->tiling.working_set_bytes = l.smem_bytes;
    k->tiling.blocks_per_sm = l.blocks_per_sm;
    k->tiling.registers_estimate = l.registers;
    k->tiling.reason = keep;
    set_launch(k, &g, &l);
    set_library(p, k, &g);
    return true;
}

/* The plan's tile of a GEMM-shaped kernel: the cost model's best
 * candidate (or the tuning cache's measured winner, tune.c). */
bool mcir_launch_gemm(mcir_plan *p, mcir_kernel_plan *k, mcir_diag *d) {
    mcir_gemm_problem g;
    if (!mcir_gemm_problem_of(k, &g)) {
        mcir_error(d, k->anchor ? k->anchor->loc : (mcir_loc){0},
                   "kernel %s: not a GEMM-shaped kernel (matmul, NCHW conv2d)", k->name);
        return false;
    }
    int n;
    scored *s = enumerate(p, k, &g, &n);
    if (n == 0) {
        free(s);
        mcir_error(d, k->anchor->loc, "kernel %s: no GEMM tile fits %s", k->name, p->target->name);
        return false;
    }
    mcir_arena *a = p->arena;
    const mcir_node *an = k->anchor;
    const char *what;
    if (k->tpl == MCIR_TEMPLATE_CONV2D) {
        what = mcir_arena_printf(a, "conv2d as implicit GEMM (M=N*OH*OW, N=OC/groups, K=C/groups*KH*KW%s)",
                                 k->n_nodes > 1 ? ", bias/activation epilogue" : "");
    } else {
        int epilogue = 0;
        for (int i = 0; i < k->n_nodes; i++)
            epilogue += k->nodes[i] != an && k->nodes[i]->op != MCIR_OP_TRANSPOSE;
        what = epilogue ? mcir_arena_printf(a, "matmul + %d-node epilogue", epilogue) : "matmul";
    }
    const scored *b = &s[0];
    const char *reason = mcir_arena_printf(
        a, "%s M=%lld N=%lld K=%lld batch=%lld, %s %s: %d legal tiles on %s scored by the cost model; "
           "pick BLOCK_M=%lld BLOCK_N=%lld BLOCK_K=%lld, %d warps, %d stage%s (%s): %s shared memory, "
           "~%d registers/thread, %d block%s/SM (limited by %s), %.2f waves: modelled %.2f us "
           "(memory %.2f, compute %.2f incl. shared memory %.2f)",
        what, (long long)g.m, (long long)g.n, (long long)g.k, (long long)g.batch,
        mcir_dtype_name(g.dtype), g.mma ? "tensor cores (mma.sync m16n8k16, f32 accumulate)" : "FMA",
        n, p->target->name, (long long)b->layout.bm, (long long)b->layout.bn, (long long)b->layout.bk,
        b->layout.warps, b->layout.stages, b->layout.stages > 1 ? "s" : "",
        g.mma ? mcir_arena_printf(a, "%dx%d warp grid", b->layout.wm, b->layout.wn)
              : mcir_arena_printf(a, "%dx%d outputs per thread", b->layout.tm, b->layout.tn),
        mcir_plan_bytes_str(a, b->layout.smem_bytes), b->layout.registers, b->layout.blocks_per_sm,
        b->layout.blocks_per_sm == 1 ? "" : "s", b->layout.occupancy_limit, b->cost.waves,
        b->cost.modelled_us, b->cost.memory_us, b->cost.compute_us, b->cost.smem_us);
    if (n > 1)
        reason = mcir_arena_printf(a, "%s; runner-up %s: %.2f us (+%.1f%%), %s", reason,
                                   tile_words(a, &s[1].layout, g.mma), s[1].cost.modelled_us,
                                   b->cost.modelled_us > 0
                                       ? 100.0 * (s[1].cost.modelled_us / b->cost.modelled_us - 1.0) : 0.0,
                                   lost_on(a, b, &s[1]));
    mcir_tiling best = b->tiling;
    free(s);
    bool ok = mcir_gemm_apply(p, k, &best, reason);
    MCIR_ASSERT(ok);
    /* a conv: the mma.sync implicit GEMM's plan, kept where the cost model
     * prices it lower than the sm_90a template's (both figures traced) */
    const mcir_kernel_plan kept = *k;
    mcir_kernel_cost before, after;
    if (k->tpl == MCIR_TEMPLATE_CONV2D) mcir_cost_kernel(k, p->target, NULL, &before);
    mcir_gemm_sm90_choose(p->target, k, a);   /* on Hopper, the sm_90a template where it applies */
    if (k->tpl == MCIR_TEMPLATE_CONV2D && tile_dim(&k->tiling, "wg") > 0) {
        mcir_cost_kernel(k, p->target, NULL, &after);
        /* MCIR_SM90_CONV=always (tests: small convs on the emulator) takes it whatever the model */
        const char *force = getenv("MCIR_SM90_CONV");
        const bool forced = force && strcmp(force, "always") == 0;
        if (after.modelled_us <= before.modelled_us || forced) {
            k->tiling.reason = mcir_arena_printf(a, "%s; modelled %.2f us against %.2f us for the mma.sync implicit "
                                                    "GEMM%s (%s)",
                                                 k->tiling.reason, after.modelled_us, before.modelled_us,
                                                 after.modelled_us <= before.modelled_us
                                                     ? ""
                                                     : ", taken as MCIR_SM90_CONV=always says",
                                                 kept.tiling.reason);
        } else {
            const char *mine = k->tiling.reason;
            *k = kept;
            k->tiling.reason = mcir_arena_printf(a, "%s; not the sm_90a GEMM: modelled %.2f us there against %.2f us "
                                                    "here (%s)",
                                                 kept.tiling.reason, after.modelled_us, before.modelled_us, mine);
        }
    }
    if (k->library) {
        /* both lowerings as the cost model sees them */
        mcir_kernel_cost lib, gen;
        mcir_cost_options go = {.generated_only = true};
        mcir_cost_kernel(k, p->target, NULL, &lib);
        mcir_cost_kernel(k, p->target, &go, &gen);
        k->tiling.reason = mcir_arena_printf(a, "%s; the runtime runs it as %s where %s loads (this "
                                                "generated kernel otherwise): modelled %.2f us with %s, %.2f us "
                                                "generated",
                                             k->tiling.reason, k->library_op, k->library, lib.modelled_us,
                                             lib.library ? lib.library : k->library, gen.modelled_us);
    }
    return true;
}
