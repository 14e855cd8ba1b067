/*
 * launch.c — the launch model of the generated templates other than the
 * GEMM-shaped ones (those are launch_gemm.c): for a problem and a tile it
 * computes what the template does with them — tiles, warps, grid, block,
 * static and dynamic shared memory, registers, occupancy — from the
 * template's own code (codegen/templates/attention_{mma,fma}.cuh,
 * norm.cuh, codegen/tpl_simple.c). docs/kernelplan.md "Launch model".
 *
 * Invariant: a layout this file returns is one the template realises
 * exactly; codegen derives its launch from the same functions and the
 * plan's tiling, and fails (internal error) where the two differ. Register
 * figures are estimates calibrated against ptxas -v (sm_80 and sm_90).
 */
#include <string.h>

#include "kernelplan/launch.h"
#include "kernelplan/launch_sm90.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t v, int64_t unit) { return unit > 0 ? ceil_div(v, unit) * unit : v; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static int64_t next_pow2(int64_t x) {
    int64_t v = 1;
    while (v < x) v <<= 1;
    return v;
}

static int64_t tile_dim(const mcir_tiling *ti, const char *name) {
    for (int i = 0; i < ti->n_dims && i < MCIR_MAX_TILE_DIMS; i++)
        if (ti->dim_names[i] && strcmp(ti->dim_names[i], name) == 0) return ti->block_tile[i];
    return 0;
}

int mcir_launch_occupancy(const mcir_target *t, int threads, int regs, int64_t smem,
                          const char **limit) {
    const char *dummy;
    if (!limit) limit = &dummy;
    int warps = (int)round_up(threads > 0 ? threads : 1, t->warp_size) / t->warp_size;
    int max_warps = t->max_threads_per_sm / t->warp_size;
    int b = t->max_blocks_per_sm;
    *limit = "blocks";
    if (max_warps / warps < b) {
        b = max_warps / warps;
        *limit = "warps";
    }
    if (regs > 0) {
        int64_t per_warp = round_up((int64_t)regs * t->warp_size, t->reg_alloc_unit);
        int by_regs = (int)((t->regs_per_sm / t->sm_partitions) / per_warp * t->sm_partitions / warps);
        if (by_regs < b) {
            b = by_regs;
            *limit = "registers";
        }
    }
    int64_t s = round_up(smem + t->smem_reserved_per_block, t->smem_alloc_unit);
    if (s > 0 && t->smem_per_sm / s < b) {
        b = (int)(t->smem_per_sm / s);
        *limit = "shared memory";
    }
    return b;
}

/* ------------------------------------------------------------ attention */

static bool is_half(mcir_dtype t) { return t == MCIR_DTYPE_F16 || t == MCIR_DTYPE_BF16; }

bool mcir_attention_problem_of(const mcir_kernel_plan *k, mcir_attention_problem *g) {
    memset(g, 0, sizeof *g);
    const mcir_node *n = k->anchor;
    if (k->tpl != MCIR_TEMPLATE_STREAMING_ATTENTION || !n || n->op != MCIR_OP_ATTENTION ||
        n->n_inputs < 3)
        return false;
    const mcir_tensor *Q = n->inputs[0], *K = n->inputs[1], *V = n->inputs[2], *O = n->outputs[0];
    if (Q->rank < 2 || K->rank < 2 || V->rank < 2 || O->rank < 2) return false;
    g->nq = Q->shape[Q->rank - 2];
    g->d = Q->shape[Q->rank - 1];
    g->nk = K->shape[K->rank - 2];
    g->dv = V->shape[V->rank - 1];
    g->batch_heads = 1;
    for (int i = 0; i < O->rank - 2; i++) g->batch_heads *= O->shape[i];
    g->dtype = Q->dtype;
    /* tpl_attention.c: the mma template is all-16-bit and takes head dims
     * in steps of 8; the FMA template takes the rest */
    g->mma = is_half(Q->dtype) && Q->dtype == K->dtype && Q->dtype == V->dtype && g->d % 8 == 0 &&
             g->dv % 8 == 0;
    return true;
}

void mcir_attention_problem_dims(int64_t d, int64_t dv, mcir_dtype dtype, mcir_attention_problem *g) {
    memset(g, 0, sizeof *g);
    g->nq = g->nk = 128;
    g->d = d;
    g->dv = dv;
    g->batch_heads = 1;
    g->dtype = dtype;
    g->mma = is_half(dtype) && d % 8 == 0 && dv % 8 == 0;
}

/* ptxas 13.0 -v registers of the tensor-core template (sm_80 and sm_90
 * agree within 10 %) by query tile, K/V tile and padded head dim: ptxas
 * settles at 128 for many of them whatever the accumulators need, so the
 * measured figure is the estimate; other variants take the formula. */
static const struct {
    int bm, bn, dvp, regs;
} attention_mma_calibrated[] = {
    {64, 64, 16, 90},    {64, 64, 32, 76},    {64, 64, 64, 96},    {64, 64, 80, 96},
    {64, 64, 96, 128},   {64, 64, 128, 128},  {64, 64, 256, 243},  {128, 64, 16, 106},
    {128, 64, 32, 97},   {128, 64, 64, 127},  {128, 64, 80, 128},  {128, 64, 96, 128},
    {128, 64, 128, 164}, {128, 128, 16, 127}, {128, 128, 32, 151}, {128, 128, 64, 128},
};

/* The FMA template by rows per warp (1, 2, 4, 8; others round up) and
 * 32-column groups of the output per lane (1..4; more keep P V rolled):
 * ptxas unrolls the 32-key loop of P V from 2 rows per warp on; with 4
 * rows per warp and a single K/V tile it keeps fewer of them live. */
static const int attention_fma_calibrated[4][4] = {
    {32, 32, 32, 32}, {54, 95, 127, 165}, {60, 98, 159, 168}, {79, 128, 168, 250}};
static const int attention_fma_one_tile_rpw4[4] = {59, 100, 127, 143};

/* Registers per thread, fitted to ptxas 13.0 -v on sm_80 / sm_90
 * (docs/kernelplan.md "Registers"). mma outside the table: the O
 * accumulators (dvp/2 floats per thread), the S fragments (bn/2), twice
 * that for head dims >= 128 where ptxas keeps P packed beside S, and 40
 * for addresses and row state, at least 66. FMA: the tables above; head
 * dims > 128 keep 32 + 8 per row of the warp (32 for one row; 4 rows:
 * + 4, or - 3 with a single K/V tile). */
static int attention_registers(const mcir_attention_layout *l, const mcir_attention_problem *g,
                               int64_t keys) {
    if (g->mma) {
        for (size_t i = 0; i < sizeof attention_mma_calibrated / sizeof *attention_mma_calibrated; i++)
            if (attention_mma_calibrated[i].bm == l->bm && attention_mma_calibrated[i].bn == l->bn &&
                attention_mma_calibrated[i].dvp == l->dvp)
                return attention_mma_calibrated[i].regs;
        int64_t r = 40 + l->dvp / 2 + l->bn / 2 + (l->dvp >= 128 ? l->bn / 2 : 0);
        return (int)(r < 66 ? 66 : r);
    }
    int64_t dvl = ceil_div(g->dv, 32), rpw = l->rows_per_warp;
    int row = rpw <= 1 ? 0 : rpw <= 2 ? 1 : rpw <= 4 ? 2 : 3;
    bool one_tile = keys <= l->bn;
    if (dvl > 4) return rpw <= 1 ? 32 : (int)(32 + 8 * rpw) + (row == 2 ? (one_tile ? -3 : 4) : 0);
    int col = dvl < 1 ? 0 : (int)dvl - 1;
    if (row == 2 && one_tile) return attention_fma_one_tile_rpw4[col];
    return attention_fma_calibrated[row][col];
}

bool mcir_attention_layout_of(const mcir_target *t, const mcir_attention_problem *g, int64_t bm,
                              int64_t bn, int64_t chunk, mcir_attention_layout *l,
                              const char **why) {
    const char *dummy;
    if (!why) why = &dummy;
    memset(l, 0, sizeof *l);
    l->bm = bm;
    l->bn = bn;
    l->dp = round_up(g->d, 16);
    l->dvp = round_up(g->dv, 16);
    l->stages = 1;
    if (g->mma) {
        /* attention_mma.cuh: a warp per 16 query rows, K/V tiles of bn rows
         * in steps of 16 (two n8 tiles per k16 step of P V) */
        if (bm < 16 || bm > 128 || bm % 16 || bn < 16 || bn > 128 || bn % 16) {
            *why = "the tensor-core template takes query and K/V tiles of 16..128 in steps of 16";
            return false;
        }
        if (l->dvp > 128 && bn > 64) {
            *why = "head dim > 128 keeps the S fragments in registers only with K/V tiles <= 64";
            return false;
        }
        l->warps = (int)(bm / 16);
        l->vector_width = 8;
        /* Q, K, V tiles of 16-bit values, rows padded by 8 (bank conflicts) */
        l->smem_bytes = 2 * (bm * (l->dp + 8) + bn * (l->dp + 8) + bn * (l->dvp + 8));
    } else {
        /* attention_fma.cuh: 4 warps, rows_per_warp query rows each, K/V
         * tiles of 32 rows staged as f32 */
        int max_rpw = g->d > 128 || g->dv > 128 ? 4 : 8;
        if (bn != 32 || bm < 4 || bm % 4 || bm / 4 > max_rpw) {
            *why = "the FMA template takes K/V tiles of 32 and 4..32 query rows in steps of 4 "
                   "(4..16 for head dims > 128)";
            return false;
        }
        l->warps = 4;
        l->rows_per_warp = (int)(bm / 4);
        l->vector_width = 1;
        l->smem_bytes = 4 * (bm * g->d + 32 * (g->d + 1) + 32 * round_up(g->dv, 32));
    }
    l->threads = l->warps * t->warp_size;
    l->smem_static_bytes = 0;
    l->registers = attention_registers(l, g, chunk > 0 && chunk < g->nk ? chunk : g->nk);
    if (l->smem_bytes > t->smem_per_block_optin) {
        *why = "the Q and K/V tiles exceed the shared memory per block";
        return false;
    }
    if (l->registers > t->regs_per_thread) {
        *why = "the accumulators exceed the registers per thread";
        return false;
    }
    l->qtiles = ceil_div(g->nq, bm);
    l->splits = 1;
    l->chunk = 0;
    if (chunk > 0 && chunk < g->nk) {
        if (chunk % bn) {
            *why = "a split-KV chunk must be a multiple of the K/V tile";
            return false;
        }
        l->chunk = chunk;
        l->splits = ceil_div(g->nk, chunk);
        l->scratch_bytes = g->batch_heads * g->nq * l->splits * (g->dv + 2) * 4;
        mcir_attention_merge_launch(g->batch_heads * g->nq, g->dv, &l->merge_grid, &l->merge_block);
    }
    int64_t blocks = g->batch_heads * l->qtiles * l->splits;
    l->grid = blocks < 1 ? 1 : min64(blocks, MCIR_LAUNCH_MAX_ATT_GRID);
    l->blocks_per_sm = mcir_launch_occupancy(t, l->threads, l->registers,
                                             l->smem_bytes + l->smem_static_bytes,
                                             &l->occupancy_limit);
    if (l->blocks_per_sm < 1) {
        *why = "no block fits on an SM";
        return false;
    }
    return true;
}

bool mcir_attention_layout_of_tiling(const mcir_target *t, const mcir_attention_problem *g,
                                     const mcir_tiling *ti, mcir_attention_layout *l,
                                     const char **why) {
    bool ok = mcir_attention_layout_of(t, g, tile_dim(ti, "q"), tile_dim(ti, "kv"),
                                       tile_dim(ti, "kv_split"), l, why);
    if (ok && ti->warps != l->warps) {
        if (why) *why = "the tiling's warps differ from the template's for its query tile";
        return false;
    }
    return ok;
}

int mcir_attention_candidates(const mcir_target *t, const mcir_attention_problem *g,
                              mcir_attention_layout *out, int max) {
    int n = 0;
    int64_t dmax = round_up(g->d > g->dv ? g->d : g->dv, 16);
    if (g->mma) {
        /* FlashAttention-2/3's preferences by head dim, then smaller tiles;
         * query tiles no taller than the queries (decode: 16 rows) */
        int64_t bm0 = dmax <= 128 ? 128 : 64, bn0 = dmax <= 64 && t->has_wgmma ? 128 : 64;
        int64_t bm_cap = next_pow2(g->nq) < 16 ? 16 : next_pow2(g->nq);
        int64_t bn_cap = next_pow2(g->nk) < 16 ? 16 : next_pow2(g->nk);
        for (int64_t bm = min64(bm0, bm_cap); bm >= 16 && n < max; bm /= 2)
            for (int64_t bn = min64(bn0, bn_cap); bn >= 16 && n < max; bn /= 2)
                if (mcir_attention_layout_of(t, g, bm, bn, 0, &out[n], NULL)) n++;
    } else {
        int max_rpw = g->d > 128 || g->dv > 128 ? 4 : 8;
        for (int rpw = max_rpw; rpw >= 1 && n < max; rpw /= 2) {
            if (rpw > 1 && rpw / 2 >= ceil_div(g->nq, 4)) continue;   /* half as tall covers the queries */
            if (mcir_attention_layout_of(t, g, 4 * rpw, 32, 0, &out[n], NULL)) n++;
        }
    }
    return n;
}

void mcir_attention_merge_launch(int64_t rows, int64_t dv, int64_t *grid, int *block) {
    /* a block per query row (grid-stride beyond the cap), a thread per
     * output column up to 128 */
    *block = dv <= 32 ? 32 : dv <= 64 ? 64 : 128;
    *grid = min64(rows, MCIR_LAUNCH_MAX_ATT_GRID);
}

int64_t mcir_attention_split_chunk(const mcir_target *t, const mcir_attention_problem *g,
                                   const mcir_attention_layout *l) {
    /* flash-decoding: when the (q-tile, batch*head) blocks cannot fill the
     * SMs (Nq <= 16: decode, speculative decoding), Nk is split so the grid
     * reaches about two blocks per SM, each split streaming >= 256 keys; a
     * split is a multiple of 128 keys (every K/V tile divides it) */
    int64_t qblocks = l->qtiles * g->batch_heads;
    if (g->nq > 16 || qblocks >= t->sm_count || g->nk < 512) return 0;
    int64_t splits = ceil_div(2 * t->sm_count, qblocks);
    if (splits > g->nk / 256) splits = g->nk / 256;
    if (splits < 2) return 0;
    int64_t chunk = round_up(ceil_div(g->nk, splits), 128);
    return chunk < g->nk ? chunk : 0;
}

/* ------------------------------------------------- norms and row reductions */

/* The largest value and the content (the gcd of the coefficients: it
 * divides the value at every size) of the product of X's extents k where
 * mask[k], over the range of dims' dimensions. A product's content is the
 * product of the contents (Gauss's lemma) and its largest value at most
 * the product of the largest values (every extent is >= 0). */
static void width_range(const mcir_graph *dims, const mcir_tensor *X, const bool *mask, int64_t *max,
                        int64_t *unit) {
    bool symbolic = false;
    for (int k = 0; k < X->rank; k++) {
        mcir_extent e = mcir_tensor_extent(X, k);
        symbolic |= mask[k] && !mcir_extent_is_const(&e, NULL);
    }
    if (!symbolic) return;   /* 0, 0: the width */
    *max = *unit = 1;
    for (int k = 0; k < X->rank; k++) {
        if (!mask[k]) continue;
        mcir_extent e = mcir_tensor_extent(X, k);
        int64_t lo, hi, c = 0;
        mcir_extent_bounds(dims, &e, &lo, &hi);
        for (int i = 0; i < e.n_terms; i++) {
            int64_t a = e.terms[i].coef < 0 ? -e.terms[i].coef : e.terms[i].coef;
            while (a) {
                int64_t r = c % a;
                c = a;
                a = r;
            }
        }
        if (mcir_mul_overflows(*max, hi, max)) *max = INT64_MAX;
        if (mcir_mul_overflows(*unit, c, unit)) *unit = 1;
    }
}

bool mcir_rows_problem_of(const mcir_graph *dims, const mcir_kernel_plan *k, mcir_rows_problem *g) {
    memset(g, 0, sizeof *g);
    const mcir_node *n = k->anchor;
    if (!n || n->n_inputs < 1) return false;
    const mcir_tensor *X = n->inputs[0];
    g->dtype = X->dtype;
    g->inner = 1;
    if (k->tpl == MCIR_TEMPLATE_STREAMING_NORM) {
        if (n->op != MCIR_OP_SOFTMAX && n->op != MCIR_OP_LAYERNORM && n->op != MCIR_OP_RMSNORM)
            return false;
        int axis;
        if (!mcir_norm_axis(mcir_node_int(n, "axis"), X->rank, &axis)) return false;
        g->kind = MCIR_ROWS_NORM;
        g->op = n->op;
        g->width = 1;
        bool wm[MCIR_MAX_RANK] = {false};
        if (n->op == MCIR_OP_SOFTMAX) {
            g->width = X->shape[axis];
            for (int i = axis + 1; i < X->rank; i++) {
                g->inner *= X->shape[i];
                mcir_extent e = mcir_tensor_extent(X, i);
                g->inner_varies |= dims && mcir_graph_is_dynamic(dims) && !mcir_extent_is_const(&e, NULL);
            }
            wm[axis] = true;
        } else {
            for (int i = axis; i < X->rank; i++) g->width *= X->shape[i];
            for (int i = axis; i < X->rank; i++) wm[i] = true;
        }
        for (int i = 0; i < k->n_reads; i++) {
            if (k->reads[i] == X) g->direct_read = true;
            bool own = false;
            for (int j = 0; j < n->n_inputs; j++) own |= k->reads[i] == n->inputs[j];
            g->chain_reads += !own;
        }
        if (dims && X->sym && mcir_graph_is_dynamic(dims))
            width_range(dims, X, wm, &g->width_max, &g->width_unit);
    } else if (k->tpl == MCIR_TEMPLATE_REDUCE) {
        const int64_t *axes;
        bool arg = n->op == MCIR_OP_ARGMAX || n->op == MCIR_OP_ARGMIN;
        int64_t axis = arg ? mcir_node_int(n, "axis") : 0;   /* argmax / argmin: one axis */
        int na = arg ? 1 : mcir_node_ints(n, "axes", &axes);
        if (arg) axes = &axis;
        g->kind = MCIR_ROWS_REDUCE;
        g->pairs = arg;
        g->width = 1;
        bool red[MCIR_MAX_RANK] = {false};
        for (int i = 0; i < na; i++) {
            int a;
            if (!mcir_norm_axis(axes[i], X->rank, &a)) return false;
            red[a] = true;
        }
        for (int i = 0; i < X->rank; i++) {
            if (red[i]) g->width *= X->shape[i];
            else if (i > 0 && red[i - 1] && X->shape[i] > 1) g->strided = true;
        }
    } else if (k->tpl == MCIR_TEMPLATE_POOL && n->op == MCIR_OP_GLOBAL_AVG_POOL) {
        if (X->rank != 4) return false;
        g->kind = MCIR_ROWS_GLOBAL_POOL;
        g->width = X->shape[2] * X->shape[3];
    } else {
        return false;
    }
    int64_t numel = mcir_tensor_numel(X);
    g->rows = g->width > 0 ? numel / g->width : 0;
    return true;
}

/* The width the layout is made for (the largest in range) and a number
 * that divides it at every size. */
static int64_t width_max(const mcir_rows_problem *g) { return g->width_max > 0 ? g->width_max : g->width; }

const char *mcir_rows_mode_name(mcir_rows_mode m) {
    static const char *const names[] = {"warp registers", "block registers", "shared-memory cache", "read twice",
                                        "cluster shared-memory cache"};
    return (unsigned)m < 5 ? names[m] : "?";
}
static int64_t width_unit(const mcir_rows_problem *g) { return g->width_unit > 0 ? g->width_unit : g->width; }

/* Registers per thread (calibrated against ptxas 13.0 -v for sm_80, sm_86
 * and sm_90: a sweep of the three norms in f32, f16 and bf16 at widths
 * 64..150000, docs/kernelplan.md "Registers"). The registers layouts keep
 * P = chunks * V row values a thread. A warp per row: softmax 16 + P,
 * rmsnorm 18 + P (at most 50; 60 in 16-bit at P = 32, where ptxas keeps
 * the packed halves too: 64 measured on sm_90), layernorm 23 + 6P/5 in 16-bit, 25 + P in
 * f32 — except on sm_90 from P = 24 (768..1024 wide), where ptxas hoists
 * gamma's and beta's loads: 62; each read of a fused chain 4 more. A block per row with the row in registers
 * (P 16..32): layernorm 30 + 7P/8, rmsnorm 18 + 5P/4, softmax 8 + 25P/16
 * in 16-bit and 30 + 5P/8 in f32. The layouts that re-read the row (512
 * threads; ptxas keeps four vectors with their gamma and beta): the
 * shared-memory cache 59..61 in 16-bit, f32 layernorm 52, rmsnorm 32,
 * softmax 37 (16-bit softmax keeps its four raw vectors too: f16 64, bf16
 * 80); a cluster's slice cache (its merge unrolled over the cluster)
 * layernorm 72 (f32 52..60), rmsnorm 68 (51..52), softmax 80 (47..52); the row read twice layernorm 97 (57), rmsnorm 94 (57),
 * softmax 96 (54). Reductions and the
 * global pool keep a running value: 15 (13..17), 23 when a kept axis
 * follows a reduced one (22..24: the row is strided). */
static int rows_registers(const mcir_target *t, const mcir_rows_problem *g, const mcir_rows_layout *l) {
    if (g->kind != MCIR_ROWS_NORM) return g->strided ? 23 : 15;
    bool softmax = g->op == MCIR_OP_SOFTMAX, rms = g->op == MCIR_OP_RMSNORM, f32 = g->dtype == MCIR_DTYPE_F32;
    int64_t P = (int64_t)l->chunks * l->vector_width;
    switch (l->mode) {
    case MCIR_ROWS_BLOCK_SMEM:
        if (softmax) return f32 ? 37 : g->dtype == MCIR_DTYPE_BF16 ? 80 : 64;
        return f32 ? (rms ? 32 : 52) : 60;
    case MCIR_ROWS_CLUSTER_SMEM: return softmax ? (f32 ? 50 : 80) : rms ? (f32 ? 51 : 68) : (f32 ? 57 : 72);
    case MCIR_ROWS_BLOCK_STREAM: return softmax ? (f32 ? 54 : 96) : rms ? (f32 ? 57 : 94) : (f32 ? 57 : 97);
    case MCIR_ROWS_BLOCK_REGS:
        if (softmax) return (int)(f32 ? 30 + 5 * P / 8 : 8 + 25 * P / 16);
        return (int)(rms ? 18 + 5 * P / 4 : 30 + 7 * P / 8);
    case MCIR_ROWS_WARP_REGS: break;
    }
    int chain = 4 * g->chain_reads;
    if (softmax) return (int)(16 + P) + chain;
    if (rms) return (!f32 && P >= 32 ? 60 : (int)min64(18 + P, 50)) + chain;
    if (f32 && t->sm >= 90 && P >= 24) return 62;
    return (int)(f32 ? 25 + P : 23 + 6 * P / 5) + chain;
}

static bool rows_layout(const mcir_target *t, const mcir_rows_problem *g, bool warp_row, int warps, int cluster,
                        mcir_rows_layout *l, const char **why);

bool mcir_rows_layout_of(const mcir_target *t, const mcir_rows_problem *g, bool warp_row, int warps,
                         mcir_rows_layout *l, const char **why) {
    return rows_layout(t, g, warp_row, warps, 1, l, why);
}

bool mcir_rows_layout_of_cluster(const mcir_target *t, const mcir_rows_problem *g, int warps, int cluster,
                                 mcir_rows_layout *l, const char **why) {
    return rows_layout(t, g, false, warps, cluster, l, why);
}

static bool rows_layout(const mcir_target *t, const mcir_rows_problem *g, bool warp_row, int warps, int cluster,
                        mcir_rows_layout *l, const char **why) {
    const char *dummy;
    if (!why) why = &dummy;
    memset(l, 0, sizeof *l);
    l->cluster = 1;
    if (cluster != 1) {
        /* a cluster per row: norms on sm_90+, 2..8 blocks (a power of two) */
        if (g->kind != MCIR_ROWS_NORM || warp_row || t->sm < 90 || cluster < 2 || cluster > MCIR_ROWS_MAX_CLUSTER ||
            (cluster & (cluster - 1))) {
            *why = "a cluster per row is a norm's block layout on sm_90+, 2, 4 or 8 blocks";
            return false;
        }
    }
    l->warp_row = warp_row;
    l->warps = warps;
    l->threads = warps * t->warp_size;
    if (warps < 1 || l->threads > t->max_threads_per_block) {
        *why = "warps per block out of range";
        return false;
    }
    if (g->kind == MCIR_ROWS_NORM) {
        int64_t wmax = width_max(g), unit = width_unit(g);
        if (warp_row && wmax > 1024) {
            *why = "a warp per row keeps at most 1024 elements in registers";
            return false;
        }
        if (!warp_row && warps < 4) {
            *why = "a block per row has at least 4 warps";
            return false;
        }
        /* 16 bytes per lane (8 f16/bf16, 4 f32) where the plan can prove
         * every access aligned: X is the kernel's own read (the runtime
         * hands a kernel the start of its tensor's buffer, 256-byte
         * aligned: MCIR_ARENA_ALIGNMENT, cuMemAlloc), its rows are
         * contiguous and the width is a multiple of the vector, so every
         * row starts on a vector boundary (a warp's row narrower than 32
         * such vectors keeps 4, so that every lane gets one); 4 elements
         * where only 4 | W; scalar otherwise (a prologue computes X, odd widths, softmax
         * over a non-last axis). A width that depends on a dimension is
         * a multiple of the vector at every size where the content of its
         * polynomial is (8*seq: yes; seq: no, scalar); rows strided by
         * a dimension (softmax over the first axis of [8, seq]) are
         * strided at some size, so scalar */
        int elem = (int)mcir_dtype_size(g->dtype);
        int v16 = elem > 0 && elem <= 16 ? 16 / elem : 1;
        l->vector_width = 1;
        if (g->inner == 1 && !g->inner_varies && g->direct_read)
            l->vector_width = unit % v16 == 0 && (!warp_row || wmax >= 32 * v16) ? v16
                              : unit % 4 == 0                                 ? 4
                                                                              : 1;
        /* templates/norm.cuh: a warp's row in its registers; a block's in
         * the registers of its threads where each keeps at most
         * MCIR_ROWS_REG_VALUES, else cached in dynamic shared memory in X's
         * storage dtype while it fits the opt-in limit, else read twice;
         * a block's warps meet through __shared__ float part[32] (sized for
         * the largest width in range: the same launch at every size) */
        int64_t per_pass = (int64_t)l->vector_width * (warp_row ? t->warp_size : l->threads);
        l->chunks = (int)min64(ceil_div(wmax, per_pass), INT32_MAX);
        if (warp_row) {
            l->mode = MCIR_ROWS_WARP_REGS;
        } else {
            l->smem_static_bytes = 32 * 4;
            int64_t cache = wmax * (int64_t)(elem > 0 ? elem : 4);
            if (cluster > 1) {
                /* each block caches a slice of ceil(W / cluster) columns
                 * rounded up to the vector (the last may be shorter or
                 * empty); the blocks' statistics meet in a float2 per row
                 * parity (__shared__ float2 cpart[2]) */
                l->cluster = cluster;
                l->slice = ceil_div(ceil_div(wmax, cluster), l->vector_width) * l->vector_width;
                l->smem_static_bytes += 2 * 8;
                l->mode = MCIR_ROWS_CLUSTER_SMEM;
                l->smem_bytes = l->slice * (int64_t)(elem > 0 ? elem : 4);
                l->chunks = 0;
            } else if ((int64_t)l->chunks * l->vector_width <= MCIR_ROWS_REG_VALUES) {
                l->mode = MCIR_ROWS_BLOCK_REGS;
            } else if (cache + l->smem_static_bytes <= t->smem_per_block_optin) {
                l->mode = MCIR_ROWS_BLOCK_SMEM;
                l->smem_bytes = cache;
                l->chunks = 0;
            } else {
                l->mode = MCIR_ROWS_BLOCK_STREAM;
                l->chunks = 0;
            }
        }
        l->cache = l->mode == MCIR_ROWS_BLOCK_SMEM || l->mode == MCIR_ROWS_CLUSTER_SMEM;
    } else {
        if (g->kind == MCIR_ROWS_GLOBAL_POOL && !warp_row) {
            *why = "the global-average pool is a warp per plane";
            return false;
        }
        l->vector_width = 1;
        /* tpl_simple.c's reduction: __shared__ float scratch[32] for the
         * block-wide sum, [64] for argmax/argmin's (value, index) pairs, of
         * i64 where the values are integers (ptxas drops it where a warp
         * owns a row) */
        if (g->kind == MCIR_ROWS_REDUCE && !warp_row)
            l->smem_static_bytes = (g->pairs ? 64 : 32) *
                                   (int64_t)mcir_value_type_size(mcir_value_type_of(g->dtype));
    }
    l->rows_per_block = warp_row ? warps : 1;
    int64_t grid = ceil_div(g->rows, l->rows_per_block) * l->cluster;
    l->grid = grid < 1 ? 1 : min64(grid, MCIR_LAUNCH_MAX_GRID / l->cluster * l->cluster);
    l->registers = rows_registers(t, g, l);
    l->blocks_per_sm = mcir_launch_occupancy(t, l->threads, l->registers,
                                             l->smem_bytes + l->smem_static_bytes,
                                             &l->occupancy_limit);
    if (l->smem_bytes + l->smem_static_bytes > t->smem_per_block_optin || l->blocks_per_sm < 1) {
        *why = "the block does not fit on an SM";
        return false;
    }
    /* a norm's grid is persistent: at most one wave of resident blocks,
     * each walking rows (the template's loops stride by the grid) */
    if (g->kind == MCIR_ROWS_NORM) {
        /* whole clusters: a wave of them (at least one) */
        int64_t wave = (int64_t)t->sm_count * l->blocks_per_sm / l->cluster * l->cluster;
        l->grid = min64(l->grid, wave > l->cluster ? wave : l->cluster);
        int64_t elem = (int64_t)mcir_dtype_size(g->dtype), vectors = l->chunks > 0 ? l->chunks : 4;
        l->inflight_thread_bytes = vectors * l->vector_width * (elem > 0 ? elem : 4);
        l->inflight_sm_bytes = l->inflight_thread_bytes * l->threads * l->blocks_per_sm;
    }
    return true;
}

bool mcir_rows_layout_of_tiling(const mcir_target *t, const mcir_rows_problem *g,
                                const mcir_tiling *ti, mcir_rows_layout *l, const char **why) {
    int64_t rows = tile_dim(ti, "row"), cluster = tile_dim(ti, "cluster");
    bool warp_row = rows == ti->warps && rows > 1;
    if (rows != 1 && rows != ti->warps) {
        if (why) *why = "rows per block must be 1 (a block per row) or the warps (a warp per row)";
        return false;
    }
    if (cluster > 1 && (warp_row || cluster > MCIR_ROWS_MAX_CLUSTER)) {
        if (why) *why = "a cluster per row takes a block per row and at most 8 blocks";
        return false;
    }
    return rows_layout(t, g, warp_row, ti->warps, cluster > 1 ? (int)cluster : 1, l, why);
}

int mcir_rows_candidates(const mcir_target *t, const mcir_rows_problem *g, mcir_rows_layout *out,
                         int max) {
    int n = 0;
    /* a warp per row where the row fits in registers (norms) or is short
     * (reductions): 8 warps per block first (256 threads), then 4; a block
     * per row beyond: 256 threads up to 8192 elements, 512 beyond */
    bool warp_row = g->kind == MCIR_ROWS_GLOBAL_POOL || width_max(g) <= 1024;
    if (warp_row) {
        static const int warps[] = {8, 4};
        for (int i = 0; i < 2 && n < max; i++)
            if (mcir_rows_layout_of(t, g, true, warps[i], &out[n], NULL)) n++;
    } else if (g->kind == MCIR_ROWS_NORM) {
        /* a norm's block keeps the row in its threads' registers where
         * MCIR_ROWS_REG_VALUES a thread hold it (4..32 warps: every thread
         * keeps 64..128 bytes in flight up to 32768 elements), else 16
         * warps stream it through the shared-memory cache or twice from
         * global memory, four vectors a thread in flight (32 warps would
         * cap a thread at 64 registers, and the output pass's vectors with
         * their gamma and beta spill there); the alternative: half the
         * warps (twice the values a thread) */
        int64_t warps = ceil_div(width_max(g), (int64_t)t->warp_size * MCIR_ROWS_REG_VALUES);
        int first = (int)(warps < 4 ? 4 : warps > 32 ? 16 : warps);
        int alt[] = {first, first / 2 >= 4 ? first / 2 : 8};
        /* a row too wide for one block's shared memory: on sm_90+ the
         * smallest cluster whose blocks' slices fit (each block caches a
         * slice; the statistics meet through distributed shared memory)
         * rather than reading the row twice */
        mcir_rows_layout one;
        if (t->sm >= 90 && mcir_rows_layout_of(t, g, false, first, &one, NULL) &&
            one.mode == MCIR_ROWS_BLOCK_STREAM)
            for (int c = 2; c <= MCIR_ROWS_MAX_CLUSTER && n < max; c *= 2)
                if (mcir_rows_layout_of_cluster(t, g, first, c, &out[n], NULL)) {
                    n++;
                    break;
                }
        for (int i = 0; i < 2 && n < max; i++)
            if (mcir_rows_layout_of(t, g, false, alt[i], &out[n], NULL)) n++;
    } else {
        int warps[] = {8, 16};
        for (int i = 0; i < 2 && n < max; i++)
            if (mcir_rows_layout_of(t, g, false, warps[i], &out[n], NULL)) n++;
    }
    return n;
}

/* ------------------------------------- elementwise, copies, windowed pools */

bool mcir_kernel_is_last2_transpose(const mcir_kernel_plan *kp) {
    if (kp->tpl != MCIR_TEMPLATE_COPY || kp->n_nodes != 1 || kp->nodes[0]->op != MCIR_OP_TRANSPOSE)
        return false;
    const mcir_node *n = kp->nodes[0];
    if (kp->n_reads != 1 || kp->n_writes != 1 || kp->reads[0] != n->inputs[0] ||
        kp->writes[0] != n->outputs[0])
        return false;
    const int64_t *perm;
    int r = mcir_node_ints(n, "perm", &perm);
    if (r < 2) return false;
    for (int i = 0; i < r - 2; i++)
        if (perm[i] != i) return false;
    return perm[r - 2] == r - 1 && perm[r - 1] == r - 2;
}

/* Registers per thread of the flat kernels, fitted to ptxas 13.0 -v on
 * sm_80 / sm_90 (docs/kernelplan.md "Registers"): the 64-bit index
 * decomposition and the chain's values. One item: ptxas folds the loop
 * away (8..12). Windowed pools: a 1x1 window 24..26; an average over a
 * padded window 40..48; otherwise 39..40 on sm_80, 30..31 on sm_90. The
 * transpose tile 28..30; a gather 22; a copy of one tensor 24..26; a
 * concat that also computes an operand (a decode step's KV-cache append,
 * split -> reshape -> transpose of the new rows fused in) 22..24 on sm_80
 * and 26..28 on sm_90 (a sweep of 6 cache and head sizes); a chain of 10
 * or more ops 28..32; slices with at most one more op (gpt2_decode's
 * positions sliced from their table at the cache length and added to the
 * tokens) 24 on sm_80, 30 on sm_90; other pointwise kernels 22..30. Size-
 * generic code (kernel_dynamic) divides by the launch's extents: the
 * decode step's append at a symbolic cache length takes 32 / 34. */
/* Whether a kernel's extents depend on a symbolic dimension: its code is
 * size-generic (docs/kernelplan.md), its index arithmetic divides by
 * extents the launch passes, not by constants, and takes more registers. */
static bool kernel_dynamic(const mcir_kernel_plan *k) {
    for (int i = 0; i < k->n_reads + k->n_writes; i++) {
        const mcir_tensor *x = i < k->n_reads ? k->reads[i] : k->writes[i - k->n_reads];
        for (int j = 0; x->sym && j < x->rank; j++)
            if (!mcir_extent_is_const(&x->sym[j], NULL)) return true;
    }
    return false;
}

static int flat_registers(const mcir_target *t, const mcir_kernel_plan *k, const mcir_flat_layout *l) {
    /* the vectorised transpose: its vectors, the gathered lanes and the
     * tile's index math whatever the item count */
    if (l->kind == MCIR_FLAT_TRANSPOSE && l->vector_width > 1) return l->vector_width == 8 ? 48 : 28;
    if (l->items <= 1) return 10;
    if (l->kind == MCIR_FLAT_POOL) {
        const int64_t *win, *pads;
        int nw = mcir_node_ints(k->anchor, "kernel", &win);
        int np = mcir_node_ints(k->anchor, "pads", &pads);
        int64_t area = 1;
        bool padded = false;
        for (int i = 0; i < nw; i++) area *= win[i];
        for (int i = 0; i < np; i++) padded |= pads[i] > 0;
        if (area == 1) return 25;
        if (k->anchor->op == MCIR_OP_AVG_POOL2D && padded) return 44;
        return t->sm >= 90 ? 30 : 40;
    }
    if (l->kind == MCIR_FLAT_TRANSPOSE) return 29;
    if (k->n_nodes == 1 && k->anchor && k->anchor->op == MCIR_OP_GATHER) return 22;
    if (k->tpl == MCIR_TEMPLATE_COPY && k->n_reads >= 2 && k->n_nodes > 1 && k->anchor &&
        k->anchor->op == MCIR_OP_CONCAT)
        return kernel_dynamic(k) ? (t->sm >= 90 ? 34 : 32) : t->sm >= 90 ? 28 : 23;
    if (k->tpl == MCIR_TEMPLATE_COPY) return 25;
    bool slice = false;
    for (int i = 0; i < k->n_nodes; i++) slice = slice || k->nodes[i]->op == MCIR_OP_SLICE;
    if (slice && k->n_nodes <= 3) return t->sm >= 90 ? 30 : 24;   /* rows of a table sliced and added */
    return k->n_nodes >= 10 ? 30 : 27;
}

/* State windows (partition.c plan_states): what a kernel computes of a write. */
int64_t mcir_kernel_write_items(const mcir_kernel_plan *k, int w) {
    const mcir_tensor *t = k->writes[w];
    if (!k->windows || k->windows[w].axis < 0) return mcir_tensor_numel(t);
    const mcir_write_window *x = &k->windows[w];
    int64_t e = t->shape[x->axis], len = 0;
    for (int q = x->first; q <= x->last; q++) len += x->concat->inputs[q]->shape[x->axis];
    return e > 0 ? mcir_tensor_numel(t) / e * len : 0;
}

bool mcir_write_window_extents(const mcir_write_window *w, mcir_extent *start, mcir_extent *len) {
    mcir_extent end = mcir_extent_const(0), neg, e;
    *start = end;
    for (int q = 0; q <= w->last; q++) {
        if (q == w->first) *start = end;
        e = mcir_tensor_extent(w->concat->inputs[q], w->axis);
        if (!mcir_extent_add(&end, &e, &end)) return false;
    }
    neg = *start;
    for (int t = 0; t < neg.n_terms; t++) neg.terms[t].coef = -neg.terms[t].coef;
    return mcir_extent_add(&end, &neg, len);
}

/* Pointwise kernels a vector at a time (launch.h). The conditions hold at
 * every size: extents compared as polynomials where a tensor has them,
 * divisibility read from a product's content (the gcd of its polynomial's
 * coefficients, which divides its value at every size). */
static bool vec_float(mcir_dtype d) {
    return d == MCIR_DTYPE_F32 || d == MCIR_DTYPE_F16 || d == MCIR_DTYPE_BF16;
}

static mcir_node *flat_producer(const mcir_kernel_plan *k, const mcir_tensor *t) {
    for (int i = 0; t->producer && i < k->n_nodes; i++)
        if (k->nodes[i] == t->producer) return t->producer;
    return NULL;
}

static bool flat_read(const mcir_kernel_plan *k, const mcir_tensor *t) {
    for (int i = 0; i < k->n_reads; i++)
        if (k->reads[i] == t) return true;
    return false;
}

static int64_t gcd64(int64_t a, int64_t b) {
    a = a < 0 ? -a : a;
    b = b < 0 ? -b : b;
    while (b) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* The content of t's extent k, times c (0: the product is 0 at every size). */
static int64_t content_mul(int64_t c, const mcir_tensor *t, int k) {
    mcir_extent e = mcir_tensor_extent(t, k);
    int64_t g = 0;
    for (int i = 0; i < e.n_terms; i++) g = gcd64(g, e.terms[i].coef);
    int64_t p;
    return mcir_mul_overflows(c, g, &p) ? 1 : p;   /* (an overflow proves nothing: 1) */
}

static bool extent_one(const mcir_tensor *t, int k) {
    mcir_extent e = mcir_tensor_extent(t, k);
    int64_t v;
    return mcir_extent_is_const(&e, &v) && v == 1;
}

static bool extents_same(const mcir_tensor *a, int i, const mcir_tensor *b, int j) {
    mcir_extent x = mcir_tensor_extent(a, i), y = mcir_tensor_extent(b, j);
    return mcir_extent_equal(&x, &y);
}

/* x broadcast to t (right-aligned): whether vec consecutive elements of t
 * from a multiple of vec read one element of x — x is 1 (or absent) in
 * t's trailing dims, whose product is a multiple of vec, or everywhere. */
static bool vec_splat(const mcir_tensor *t, const mcir_tensor *x, int vec) {
    int d = t->rank - x->rank, k = t->rank - 1;
    int64_t q = 1;
    for (; k >= 0 && (k < d || extent_one(x, k - d)); k--) q = content_mul(q, t, k);
    return k < 0 || q % vec == 0;
}

/* ... whether they read vec consecutive elements of x from a multiple of
 * vec: x has t's extents in t's trailing dims, whose product is a
 * multiple of vec, or everywhere t is not 1 (the same linear index). */
static bool vec_contiguous(const mcir_tensor *t, const mcir_tensor *x, int vec) {
    int d = t->rank - x->rank, k = t->rank - 1;
    int64_t p = 1;
    for (; k >= d && extents_same(x, k - d, t, k); k--) p = content_mul(p, t, k);
    bool same = true;
    for (int r = 0; r <= k; r++) same = same && extent_one(t, r);
    return same || p % vec == 0;
}

/* Whether t's last extent is a multiple of vec at every size. */
static bool last_multiple(const mcir_tensor *t, int vec) {
    return t->rank >= 1 && content_mul(1, t, t->rank - 1) % vec == 0;
}

/* t's last extent, a constant that is a multiple of vec. */
static bool last_const_multiple(const mcir_tensor *t, int vec) {
    mcir_extent e = mcir_tensor_extent(t, t->rank - 1);
    int64_t v;
    return t->rank >= 1 && mcir_extent_is_const(&e, &v) && v % vec == 0;
}

bool mcir_vector_remap(const mcir_kernel_plan *k, const mcir_node *n, const mcir_tensor *t, int vec) {
    (void)k;
    if (!vec_float(t->dtype) || t->rank < 1 || !last_multiple(t, vec)) return false;
    const mcir_tensor *x = n->inputs[0];
    int L = t->rank - 1, axis;
    switch (n->op) {
    case MCIR_OP_TRANSPOSE: {   /* the last axis stays last */
        const int64_t *perm;
        int np = mcir_node_ints(n, "perm", &perm);
        return np == t->rank && x->rank == t->rank && (perm[L] < 0 ? perm[L] + np : perm[L]) == L;
    }
    case MCIR_OP_SLICE: {
        if (!mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis) || x->rank != t->rank) return false;
        if (axis != L) return true;
        /* along the last axis: a unit step from a multiple of vec, on constant extents */
        int64_t first, len;
        if (!last_const_multiple(x, vec) || !last_const_multiple(t, vec) || mcir_node_int(n, "step") != 1)
            return false;
        const mcir_attr *a = mcir_node_attr(n, "start");
        if (a && a->dim_of && a->dim_of[0] >= 0) return false;
        mcir_slice_range(x->shape[L], mcir_node_int(n, "start"), mcir_node_int(n, "end"), 1, &first, &len);
        return first % vec == 0;
    }
    case MCIR_OP_SPLIT: {
        if (!mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis) || x->rank != t->rank) return false;
        if (axis != L) return true;
        const int64_t *sizes;
        int ns = mcir_node_ints(n, "sizes", &sizes);
        int64_t off = 0;
        if (!last_const_multiple(x, vec)) return false;
        for (int o = 0; o < n->n_outputs && o < ns; o++) {
            if (n->outputs[o] == t) return off % vec == 0;
            off += sizes[o];
        }
        return false;
    }
    case MCIR_OP_CONCAT:   /* along the last axis: every part a multiple of vec (at most 8 parts) */
        if (n->n_inputs > 8 || !mcir_norm_axis(mcir_node_int(n, "axis"), t->rank, &axis)) return false;
        for (int j = 0; j < n->n_inputs; j++)
            if (n->inputs[j]->rank != t->rank || (axis == L && !last_multiple(n->inputs[j], vec))) return false;
        return true;
    case MCIR_OP_GATHER:   /* rows of a table (an embedding): not along its last axis */
        return mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis) && axis < x->rank - 1;
    default:
        return false;
    }
}

int mcir_transpose_vector_width(const mcir_kernel_plan *k) {
    if (!mcir_kernel_is_last2_transpose(k)) return 1;
    const mcir_tensor *x = k->reads[0];
    if (!vec_float(x->dtype) || x->rank < 2) return 1;
    int v = 16 / (int)mcir_dtype_size(x->dtype);
    return content_mul(1, x, x->rank - 2) % v == 0 && content_mul(1, x, x->rank - 1) % v == 0 ? v : 1;
}

/* The operands of remap node n that its vector form takes a vector of
 * (all but a gather's indices). */
static bool remap_data(const mcir_node *n, int j) { return n->op != MCIR_OP_GATHER || j == 0; }

bool mcir_vector_form(const mcir_kernel_plan *k, const mcir_tensor *t, int vec) {
    if (!vec_float(t->dtype)) return false;
    const mcir_node *n = flat_producer(k, t);
    if (!n) return flat_read(k, t);
    if (n->op == MCIR_OP_RESHAPE) return mcir_vector_form(k, n->inputs[0], vec);   /* the same linear index */
    if (mcir_op_desc_of(n->op)->flags & MCIR_OPF_ELEMENTWISE) return true;
    if (!mcir_vector_remap(k, n, t, vec)) return false;
    for (int j = 0; j < n->n_inputs; j++)
        if (remap_data(n, j) && !mcir_vector_form(k, n->inputs[j], vec)) return false;
    return true;
}

mcir_vector_operand mcir_vector_operand_of(const mcir_kernel_plan *k, const mcir_node *n, int j, int vec) {
    const mcir_tensor *t = n->outputs[0], *x = n->inputs[j];
    if (!(mcir_op_desc_of(n->op)->flags & MCIR_OPF_ELEMENTWISE) && n->op != MCIR_OP_RESHAPE)
        return remap_data(n, j) ? MCIR_VEC_LANES : MCIR_VEC_SPLAT;   /* (a remap with a vector form) */
    if (vec_splat(t, x, vec)) return MCIR_VEC_SPLAT;
    if (mcir_vector_form(k, x, vec) && vec_contiguous(t, x, vec)) return MCIR_VEC_LANES;
    return MCIR_VEC_SCALAR;
}

/* The tensors vec_loads has answered for (a chain's diamonds are walked
 * once, not once a path). */
typedef struct vec_memo {
    const mcir_tensor *t[64];
    bool loads[64];
    int n;
} vec_memo;

/* Whether t's vector form at width vec loads some kernel read a vector at
 * a time; *elem: the narrowest such read's element size. */
static bool vec_loads(const mcir_kernel_plan *k, const mcir_tensor *t, int vec, int *elem, vec_memo *m, int depth) {
    for (int i = 0; i < m->n; i++)
        if (m->t[i] == t) return m->loads[i];
    const mcir_node *n = flat_producer(k, t);
    bool any = false;
    if (depth > 64) return false;
    if (!n) {   /* (a form without a producer is a read) */
        int size = (int)mcir_dtype_size(t->dtype);
        if (size < *elem) *elem = size;
        any = true;
    } else if (n->op == MCIR_OP_RESHAPE) {
        any = vec_loads(k, n->inputs[0], vec, elem, m, depth + 1);
    } else {
        for (int j = 0; j < n->n_inputs; j++)
            if (mcir_vector_operand_of(k, n, j, vec) == MCIR_VEC_LANES)
                any = vec_loads(k, n->inputs[j], vec, elem, m, depth + 1) || any;
    }
    if (m->n < 64) {
        m->t[m->n] = t;
        m->loads[m->n++] = any;
    }
    return any;
}

int mcir_pointwise_vector_width(const mcir_kernel_plan *k) {
    if ((k->tpl != MCIR_TEMPLATE_ELEMENTWISE && k->tpl != MCIR_TEMPLATE_COPY) || mcir_kernel_is_last2_transpose(k))
        return 1;
    for (int w = 0; k->windows && w < k->n_writes; w++)
        if (k->windows[w].axis >= 0) return 1;
    for (int vec = 8; vec >= 4; vec /= 2) {
        int elem = 16;
        bool loads = false;
        vec_memo m = {.n = 0};
        for (int w = 0; w < k->n_writes; w++) {
            const mcir_tensor *t = k->writes[w];
            if (!vec_float(t->dtype)) continue;
            if (mcir_dtype_size(t->dtype) < (size_t)elem) elem = (int)mcir_dtype_size(t->dtype);
            if (mcir_vector_form(k, t, vec)) loads = vec_loads(k, t, vec, &elem, &m, 0) || loads;
        }
        if (loads && (vec == 4 || elem == 2)) return vec;
    }
    return 1;
}

/* Whether t's vector form at width vec takes some remap's (a vector
 * moved from another index). */
static bool form_moves(const mcir_kernel_plan *k, const mcir_tensor *t, int vec, int depth) {
    const mcir_node *n = flat_producer(k, t);
    if (!n || depth > 64) return false;
    if (!(mcir_op_desc_of(n->op)->flags & MCIR_OPF_ELEMENTWISE) && n->op != MCIR_OP_RESHAPE) return true;
    for (int j = 0; j < n->n_inputs; j++)
        if ((n->op == MCIR_OP_RESHAPE || mcir_vector_operand_of(k, n, j, vec) == MCIR_VEC_LANES) &&
            form_moves(k, n->inputs[j], vec, depth + 1))
            return true;
    return false;
}

bool mcir_pointwise_rolled(const mcir_kernel_plan *k, int vec) {
    for (int w = 0; vec > 1 && w < k->n_writes; w++)
        if (mcir_pointwise_vector_write(k, w, vec) && mcir_vector_form(k, k->writes[w], vec) &&
            form_moves(k, k->writes[w], vec, 0))
            return true;
    return false;
}

bool mcir_pointwise_vector_write(const mcir_kernel_plan *k, int w, int vec) {
    return vec > 1 && vec_float(k->writes[w]->dtype);
}

int64_t mcir_pointwise_items(const mcir_kernel_plan *k, int w, int vec) {
    int64_t n = mcir_kernel_write_items(k, w);
    return mcir_pointwise_vector_write(k, w, vec) ? n / vec + n % vec : n;
}

/* What a write's vector form holds, path by path as the inlined code
 * repeats it: vector loads (16-byte accesses), ops lane by lane by class,
 * operands taken a lane at a time, broadcast values. */
typedef struct vec_shape {
    int loads, light, mufu, gelut, libm, lanes, remaps, splats, half, late, moves, concats;
    const mcir_tensor *seen[16];
    int n_seen, visits;
} vec_shape;

/* Ops computed through MUFU forms (ex2 / rcp / rsqrt: codegen/emit.c's
 * table) and through libm sequences (erf, tanh, log, pow, sqrt). */
static int op_class(const mcir_node *n) {
    switch (n->op) {
    case MCIR_OP_SIGMOID: case MCIR_OP_SILU: case MCIR_OP_EXP: case MCIR_OP_DIV:
    case MCIR_OP_RECIPROCAL: case MCIR_OP_RSQRT: return 1;
    case MCIR_OP_GELU: return strcmp(mcir_node_string(n, "approximate"), "tanh") == 0 ? 3 : 2;
    case MCIR_OP_ERF: case MCIR_OP_TANH: case MCIR_OP_LOG: case MCIR_OP_POW: case MCIR_OP_SQRT:
    case MCIR_OP_COS: case MCIR_OP_SIN:
    case MCIR_OP_MOD: return 2;
    default: return 0;
    }
}

/* Index remapping nodes under t (the chain a lane at a time repeats). */
static int remaps_under(const mcir_kernel_plan *k, const mcir_tensor *t, int depth) {
    const mcir_node *n = flat_producer(k, t);
    if (!n || depth > 64) return 0;
    int r = !(mcir_op_desc_of(n->op)->flags & MCIR_OPF_ELEMENTWISE) && n->op != MCIR_OP_RESHAPE;
    for (int j = 0; j < n->n_inputs; j++) r += remaps_under(k, n->inputs[j], depth + 1);
    return r;
}

static void vec_shape_of(const mcir_kernel_plan *k, const mcir_tensor *t, int vec, vec_shape *s, int depth) {
    const mcir_node *n = flat_producer(k, t);
    if (depth > 64 || ++s->visits > 4096) return;   /* (an estimate: a chain of diamonds is cut short) */
    if (!n) {   /* a read: its 16-byte loads, once (ptxas merges repeated loads) */
        for (int i = 0; i < s->n_seen; i++)
            if (s->seen[i] == t) return;
        if (s->n_seen < 16) s->seen[s->n_seen++] = t;
        int bytes = vec * (int)mcir_dtype_size(t->dtype);
        s->loads += bytes > 16 ? bytes / 16 : 1;
        s->half |= t->dtype == MCIR_DTYPE_F16;
        return;
    }
    if (n->op == MCIR_OP_RESHAPE) {
        vec_shape_of(k, n->inputs[0], vec, s, depth + 1);
        return;
    }
    int c = op_class(n);
    if (!(mcir_op_desc_of(n->op)->flags & MCIR_OPF_ELEMENTWISE)) {   /* a remap's vector form: its index math */
        s->moves++;
        s->concats += n->op == MCIR_OP_CONCAT;
        for (int j = 0; j < n->n_inputs; j++) {
            mcir_vector_operand m = mcir_vector_operand_of(k, n, j, vec);
            if (m == MCIR_VEC_LANES) vec_shape_of(k, n->inputs[j], vec, s, depth + 1);
            else s->splats++;
        }
        return;
    }
    s->light += c == 0;
    s->mufu += c == 1 || c == 3;
    s->gelut += c == 3;
    s->libm += c == 2;
    int lanes_ops = 0, before = s->mufu + s->libm;
    for (int j = 0; j < n->n_inputs; j++) {
        mcir_vector_operand m = mcir_vector_operand_of(k, n, j, vec);
        lanes_ops += m == MCIR_VEC_LANES;
        if (m == MCIR_VEC_LANES) vec_shape_of(k, n->inputs[j], vec, s, depth + 1);
        else if (m == MCIR_VEC_SPLAT) s->splats++;
        else {
            s->lanes++;
            s->remaps += remaps_under(k, n->inputs[j], depth + 1);
        }
    }
    s->late += lanes_ops >= 2 && s->mufu + s->libm > before;
}

/* Whether write w may have a tail: its element count is not a multiple
 * of vec at every size. */
static bool vec_tail(const mcir_kernel_plan *k, int w, int vec) {
    int64_t c = 1;
    for (int d = 0; d < k->writes[w]->rank; d++) c = content_mul(c, k->writes[w], d);
    return c % vec != 0;
}

/* Registers of a kernel run a vector at a time (gen_pointwise_vec),
 * fitted to ptxas 13.0 -v on sm_80 / sm_90 (the example and golden
 * kernels and a sweep of 44 kernels in f32 / f16 / bf16 — docs/kernelplan.md
 * "Registers"): the most any vectorised write's branch needs. A write's:
 * 16 (the loop, its 64-bit index, an address) and 1 a distinct 16-byte
 * load (up to 4: ptxas keeps one load of a read however many paths reach
 * it), 2 more with 8 lanes and 2 where f16 values are converted (cvt per
 * element; bf16 is a shift), 2 an op (up to 3), 3 for a tanh GELU (its
 * cube) and 3 where a vector stays live across a transcendental (silu(g)
 * * u: u's lanes wait for g's ex2 / rcp), 11 for a libm sequence (erf,
 * tanh, log, pow, sqrt), 2 for a tail, 2 on sm_90 and 2 more for f32
 * there (its streams' 64-bit pointers), one less for a lone op on a lone
 * load; an operand taken a lane at a time (v<ID> per lane, each lane's
 * index arithmetic live together) 12 on sm_80 and 6 on sm_90, and 1 an
 * index remap under such operands past the first (a transpose, slice,
 * split or concat: the rotary halves). */
static int vec_registers(const mcir_target *t, const mcir_kernel_plan *k, int vec) {
    int most = 0;
    for (int w = 0; w < k->n_writes; w++) {
        if (!mcir_pointwise_vector_write(k, w, vec)) continue;
        vec_shape s = {0};
        if (mcir_vector_form(k, k->writes[w], vec)) {
            vec_shape_of(k, k->writes[w], vec, &s, 0);
        } else {   /* vec values of its chain, a lane at a time */
            s.lanes = 1;
            s.remaps = remaps_under(k, k->writes[w], 0);
        }
        s.half |= k->writes[w]->dtype == MCIR_DTYPE_F16;
        bool sm90 = t->sm >= 90;
        int r = 16 + (s.loads < 4 ? s.loads : 4) + 2 * s.half + (vec == 8 ? 2 : 0) + 2 * (s.light < 3 ? s.light : 3) +
                3 * (s.gelut > 0) + 3 * (s.late > 0) + 11 * (s.libm > 0) + 2 * vec_tail(k, w, vec) +
                (sm90 ? (vec == 4 ? 4 : 2) : 0) - (s.loads == 1 && s.light + s.mufu + s.libm == 1 && !s.lanes);
        if (s.lanes) r += (sm90 ? 6 : 12) * s.lanes + (s.remaps > 1 ? s.remaps - 1 : 0);
        if (s.moves) {   /* remaps' vector forms: their coordinates' index math (the loop kept rolled) */
            const mcir_tensor *o = k->writes[w];
            int hard = 0, dyn = 0;
            for (int d = 1; d < o->rank; d++) {
                mcir_extent e = mcir_tensor_extent(o, d);
                int64_t v;
                if (!mcir_extent_is_const(&e, &v)) hard++, dyn++;
                else if (v & (v - 1)) hard++;
            }
            if (s.light + s.mufu + s.libm + s.lanes == 0)   /* a copy */
                r = (vec == 8 ? 18 : 22) + sm90 + 4 * (s.concats > 0) + 4 * (dyn > 0);
            else
                r += (vec == 4 ? 5 + 4 * hard : -2) + !sm90;
        }
        if (r > most) most = r;
    }
    return most > 0 ? most : 27;
}

bool mcir_flat_layout_of(const mcir_target *t, const mcir_kernel_plan *k, mcir_flat_layout *l) {
    memset(l, 0, sizeof *l);
    l->threads = 256;
    l->registers = 27;
    l->vector_width = 1;
    if (k->tpl == MCIR_TEMPLATE_POOL) {
        const mcir_node *n = k->anchor;
        if (!n || n->op == MCIR_OP_GLOBAL_AVG_POOL) return false;
        l->kind = MCIR_FLAT_POOL;
        l->items = mcir_tensor_numel(n->outputs[0]);
        l->per_block = 256;
    } else if (k->tpl == MCIR_TEMPLATE_COPY && mcir_kernel_is_last2_transpose(k)) {
        const mcir_tensor *x = k->reads[0];
        int64_t R = x->shape[x->rank - 2], C = x->shape[x->rank - 1];
        int64_t B = R * C > 0 ? mcir_tensor_numel(x) / (R * C) : 0;
        l->kind = MCIR_FLAT_TRANSPOSE;
        /* tpl_simple.c: 16-byte vectors through a T x T tile of the
         * storage dtype, T = 8V (64 for 16-bit, 32 for f32), where R and C
         * are multiples of V; else 32x32 tiles through tile[32][33] of the
         * value type (i64 for integers) */
        l->vector_width = mcir_transpose_vector_width(k);
        int64_t T = l->vector_width > 1 ? 8 * l->vector_width : 32;
        l->items = B * ceil_div(R, T) * ceil_div(C, T);
        l->per_block = 1;
        l->smem_static_bytes = l->vector_width > 1 ? T * T * (int64_t)mcir_dtype_size(x->dtype)
                                                   : 32 * 33 * (int64_t)mcir_value_type_size(mcir_value_type_of(x->dtype));
    } else if (k->tpl == MCIR_TEMPLATE_COPY || k->tpl == MCIR_TEMPLATE_ELEMENTWISE) {
        l->kind = MCIR_FLAT_POINTWISE;
        l->vector_width = mcir_pointwise_vector_width(k);
        for (int i = 0; i < k->n_writes; i++) l->items += mcir_pointwise_items(k, i, l->vector_width);
        l->per_block = 256;
    } else {
        return false;
    }
    l->registers = l->kind == MCIR_FLAT_POINTWISE && l->vector_width > 1 && l->items > 1
                       ? vec_registers(t, k, l->vector_width)
                       : flat_registers(t, k, l);
    int64_t grid = ceil_div(l->items, l->per_block);
    l->grid = grid < 1 ? 1 : min64(grid, MCIR_LAUNCH_MAX_GRID);
    l->blocks_per_sm = mcir_launch_occupancy(t, l->threads, l->registers, l->smem_static_bytes,
                                             &l->occupancy_limit);
    return true;
}

/* ------------------------------------------------------------- the launch */

static void set_1d(mcir_launch *o, int64_t grid, int threads) {
    o->grid[0] = grid;
    o->grid[1] = o->grid[2] = 1;
    o->block[0] = threads;
    o->block[1] = o->block[2] = 1;
}

static void set_plan_launch(mcir_kernel_plan *k, int64_t grid, int threads, int64_t smem,
                            int64_t smem_static) {
    k->grid[0] = grid;
    k->grid[1] = k->grid[2] = 1;
    k->block[0] = threads;
    k->block[1] = k->block[2] = 1;
    k->smem_bytes = smem;
    k->smem_static_bytes = smem_static;
}

static void set_tiling(mcir_tiling *ti, int n, const char *const *names, const int64_t *tile, int warps,
                       int vec, int64_t working_set, int bps, int regs) {
    ti->n_dims = n;
    for (int i = 0; i < n; i++) {
        ti->dim_names[i] = names[i];
        ti->block_tile[i] = tile[i];
    }
    ti->warps = warps;
    ti->stages = 1;
    ti->vector_width = vec;
    ti->working_set_bytes = working_set;
    ti->blocks_per_sm = bps;
    ti->registers_estimate = regs;
}

void mcir_attention_apply(mcir_kernel_plan *k, const mcir_attention_problem *g,
                          const mcir_attention_layout *l) {
    static const char *const names[] = {"q", "kv", "d", "kv_split"};
    int64_t tile[] = {l->bm, l->bn, g->mma ? l->dp : g->d, l->chunk};
    set_tiling(&k->tiling, l->splits > 1 ? 4 : 3, names, tile, l->warps, l->vector_width,
               l->smem_bytes + l->smem_static_bytes, l->blocks_per_sm, l->registers);
    k->tiling.stages = l->stages;
    set_plan_launch(k, l->grid, l->threads, l->smem_bytes, l->smem_static_bytes);
    k->scratch_bytes = l->scratch_bytes;
}

void mcir_rows_apply(mcir_kernel_plan *k, const mcir_rows_problem *g, const mcir_rows_layout *l) {
    static const char *const names[] = {"row", "col", "cluster"};
    int64_t tile[] = {l->rows_per_block, g->width, l->cluster};
    set_tiling(&k->tiling, l->cluster > 1 ? 3 : 2, names, tile, l->warps, l->vector_width,
               l->smem_bytes + l->smem_static_bytes, l->blocks_per_sm, l->registers);
    set_plan_launch(k, l->grid, l->threads, l->smem_bytes, l->smem_static_bytes);
    k->scratch_bytes = 0;
}

void mcir_flat_apply(const mcir_target *t, mcir_kernel_plan *k, const mcir_flat_layout *l) {
    static const char *const flat_names[] = {"elements"}, *const tr_names[] = {"rows", "cols"};
    int64_t T = l->vector_width > 1 ? 8 * l->vector_width : 32;
    int64_t flat_tile[] = {l->per_block}, tr_tile[] = {T, T};
    bool tr = l->kind == MCIR_FLAT_TRANSPOSE;
    set_tiling(&k->tiling, tr ? 2 : 1, tr ? tr_names : flat_names, tr ? tr_tile : flat_tile,
               l->threads / t->warp_size, l->vector_width, l->smem_static_bytes, l->blocks_per_sm, l->registers);
    set_plan_launch(k, l->grid, l->threads, 0, l->smem_static_bytes);
    k->scratch_bytes = 0;
}

/* (declared in kernelplan.h; here so the launch models can use it) */
const mcir_kernel_access *mcir_kernel_access_of(const mcir_kernel_plan *k,
                                                const mcir_tensor *logical) {
    for (int i = 0; i < k->n_reads; i++)
        if (k->read_access[i].logical == logical) return &k->read_access[i];
    for (int i = 0; i < k->n_writes; i++)
        if (k->write_access[i].logical == logical) return &k->write_access[i];
    return NULL;
}

bool mcir_launch_of(const mcir_target *t, const mcir_graph *dims, const mcir_kernel_plan *k,
                    mcir_launch *o, const char **why) {
    const char *dummy;
    if (!why) why = &dummy;
    memset(o, 0, sizeof *o);
    mcir_attention_problem ag;
    mcir_rows_problem rg;
    if (mcir_attention_problem_of(k, &ag) && tile_dim(&k->tiling, "wg") > 0) {
        mcir_attention_sm90 l;   /* the sm_90a template: launch_sm90.c's layout */
        if (!mcir_attention_sm90_layout(t, k, &l, why)) return false;
        set_1d(o, l.grid, l.threads);
        o->smem_bytes = l.smem_bytes;
        o->scratch_bytes = l.scratch_bytes;
        o->registers = l.registers;
        o->merge_grid = l.merge_grid;
        o->merge_block = l.merge_block;
        return true;
    }
    if (mcir_attention_problem_of(k, &ag)) {
        mcir_attention_layout l;
        if (!mcir_attention_layout_of_tiling(t, &ag, &k->tiling, &l, why)) return false;
        set_1d(o, l.grid, l.threads);
        o->smem_bytes = l.smem_bytes;
        o->smem_static_bytes = l.smem_static_bytes;
        o->scratch_bytes = l.scratch_bytes;
        o->registers = l.registers;
        o->merge_grid = l.merge_grid;
        o->merge_block = l.merge_block;
        return true;
    }
    if (mcir_rows_problem_of(dims, k, &rg)) {
        mcir_rows_layout l;
        if (!mcir_rows_layout_of_tiling(t, &rg, &k->tiling, &l, why)) return false;
        set_1d(o, l.grid, l.threads);
        o->smem_bytes = l.smem_bytes;
        o->smem_static_bytes = l.smem_static_bytes;
        o->registers = l.registers;
        return true;
    }
    mcir_flat_layout f;
    if (mcir_flat_layout_of(t, k, &f)) {
        set_1d(o, f.grid, f.threads);
        o->smem_static_bytes = f.smem_static_bytes;
        o->registers = f.registers;
        return true;
    }
    *why = "no launch model for this template (GEMM-shaped kernels: launch_gemm.c)";
    return false;
}
