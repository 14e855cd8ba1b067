/*
 * tiling.c — tile choice per kernel template: one chooser per template, in
 * a table, each taking a candidate of the launch model (launch.c; the
 * GEMM-shaped kernels: launch_gemm.c) and writing its complete launch into
 * the plan with a reason in numbers.
 *
 * Invariant: k->tiling, k->grid, k->block, k->smem_bytes and
 * k->smem_static_bytes are what the template launches (codegen asserts
 * it); working_set_bytes == smem_bytes + smem_static_bytes ≤ the target's
 * smem_per_block_optin; a block has at most max_threads_per_block threads.
 */
#include <string.h>

#include "kernelplan/launch.h"
#include "kernelplan/plan-impl.h"
#include "kernelplan/launch_sm90.h"

typedef struct tile_ctx {
    mcir_plan *p;
    mcir_kernel_plan *k;
    const mcir_target *t;
    mcir_arena *a;
    mcir_diag *d;
} tile_ctx;

static const char *kib(tile_ctx *c, int64_t b) { return mcir_plan_bytes_str(c->a, b); }

/* ------------------------------------------------------------ attention */

/* The first candidate of the launch model that fits (FlashAttention's
 * preference by head dim, shrunk to the queries and to the target), split
 * over Nk for decode shapes. */
static bool tile_attention(tile_ctx *c) {
    mcir_kernel_plan *k = c->k;
    const mcir_target *t = c->t;
    const mcir_node *n = k->anchor;
    mcir_attention_problem g;
    MCIR_ASSERT(mcir_attention_problem_of(k, &g));
    mcir_attention_layout cand[16];
    int nc = mcir_attention_candidates(t, &g, cand, 16);
    if (nc == 0) {
        mcir_attention_layout l;
        const char *why = "";
        mcir_attention_layout_of(t, &g, g.mma ? 16 : 4, g.mma ? 16 : 32, 0, &l, &why);
        mcir_error(c->d, n->loc,
                   "attention '%s': head dim %lld does not fit %s even with the smallest tile (%s; "
                   "%s of shared memory per block)", n->name, (long long)g.d, t->name, why,
                   kib(c, t->smem_per_block_optin));
        return false;
    }
    mcir_attention_layout l = cand[0];
    int64_t chunk = mcir_attention_split_chunk(t, &g, &l);
    if (chunk > 0) MCIR_ASSERT(mcir_attention_layout_of(t, &g, l.bm, l.bn, chunk, &l, NULL));
    mcir_attention_apply(k, &g, &l);
    mcir_tiling *ti = &k->tiling;
    const char *tiles = g.mma
        ? mcir_arena_printf(c->a, "Q %s + K %s + V %s (16-bit, rows padded by 8)",
                            kib(c, 2 * l.bm * (l.dp + 8)), kib(c, 2 * l.bn * (l.dp + 8)),
                            kib(c, 2 * l.bn * (l.dvp + 8)))
        : mcir_arena_printf(c->a, "Q %s + K %s + V %s (f32)", kib(c, 4 * l.bm * g.d),
                            kib(c, 4 * 32 * (g.d + 1)), kib(c, 4 * 32 * ((g.dv + 31) / 32 * 32)));
    ti->reason = mcir_arena_printf(
        c->a,
        "%s %s path, d=%lld: BLOCK_M=%lld BLOCK_N=%lld (%s), %d warps%s%s: %s = %s of shared "
        "memory <= %s (%s opt-in); %d block%s/SM (limited by %s, ~%d registers/thread); "
        "%lld q-tiles x %lld batch*heads -> %lld blocks",
        mcir_dtype_name(g.dtype), g.mma ? "tensor-core" : "FMA", (long long)g.d, (long long)l.bm,
        (long long)l.bn, nc > 1 ? mcir_arena_printf(c->a, "first of %d candidates that fit", nc)
                                : "the only candidate that fits",
        l.warps, g.mma ? " (16 query rows each)" : "",
        g.mma ? "" : mcir_arena_printf(c->a, " (%d query rows each)", l.rows_per_warp), tiles,
        kib(c, l.smem_bytes), kib(c, t->smem_per_block_optin), t->name, l.blocks_per_sm,
        l.blocks_per_sm == 1 ? "" : "s", l.occupancy_limit, l.registers, (long long)l.qtiles,
        (long long)g.batch_heads, (long long)(g.batch_heads * l.qtiles));
    if (l.splits > 1) {
        ti->reason = mcir_arena_printf(
            c->a, "%s; split-KV: %lld blocks < %d SMs, so Nk=%lld is split into %lld chunks of %lld "
                  "keys (about 2 blocks per SM, >= 256 keys each) -> %lld blocks; partial O, max and "
                  "sum per split in %s of f32 scratch, merged by NAME_merge (%lld blocks of %d "
                  "threads, online-softmax merge)",
            ti->reason, (long long)(l.qtiles * g.batch_heads), t->sm_count, (long long)g.nk,
            (long long)l.splits, (long long)l.chunk, (long long)l.grid, kib(c, l.scratch_bytes),
            (long long)l.merge_grid, l.merge_block);
    }
    return true;
}

/* ------------------------------------------------------------ row kernels */

/* Norms, row reductions and the global-average pool: the launch model's
 * first candidate (a warp per row of 8 warps where the row is short, else
 * a block per row). */
static bool tile_rows(tile_ctx *c) {
    mcir_kernel_plan *k = c->k;
    const mcir_node *n = k->anchor;
    mcir_rows_problem g;
    MCIR_ASSERT(mcir_rows_problem_of(c->p->graph, k, &g));
    mcir_rows_layout cand[4];
    int nc = mcir_rows_candidates(c->t, &g, cand, 4);
    if (nc == 0) {
        mcir_error(c->d, n->loc, "'%s': no row layout fits %s", n->name, c->t->name);
        return false;
    }
    mcir_rows_layout l = cand[0];
    const char *what = g.kind == MCIR_ROWS_NORM
        ? mcir_arena_printf(c->a, "%s (%s)", mcir_op_name(n->op),
                            mcir_streaming_state_name(k->streaming_state))
        : mcir_arena_printf(c->a, "%s over %lld elements", mcir_op_name(n->op), (long long)g.width);
    mcir_rows_apply(k, &g, &l);
    mcir_tiling *ti = &k->tiling;
    /* a width that depends on a dimension: the layout is the largest's */
    const char *up_to = g.width_max > 0 ? "up to " : "";
    int64_t width = g.width_max > 0 ? g.width_max : g.width;
    if (l.warp_row) {
        int64_t per_lane = (width + 31) / 32;
        ti->reason = mcir_arena_printf(
            c->a,
            "%s: row of %s%lld %s%s: one warp per row, %d warps = %lld rows per block, %lld "
            "elements per lane%s, vector width %d%s; %lld rows -> %lld blocks%s; %d blocks/SM "
            "(limited by %s, ~%d registers/thread)",
            what, up_to, (long long)width, mcir_dtype_name(g.dtype),
            g.kind == MCIR_ROWS_GLOBAL_POOL ? "" : " <= 1024", l.warps, (long long)l.rows_per_block,
            (long long)per_lane, g.kind == MCIR_ROWS_NORM ? " kept in registers" : "",
            l.vector_width, g.inner == 1 ? "" : " (strided rows)", (long long)g.rows,
            (long long)l.grid,
            l.grid == MCIR_LAUNCH_MAX_GRID                                       ? " (grid-stride loop)"
            : g.kind == MCIR_ROWS_NORM && l.grid * l.rows_per_block < g.rows ? " (persistent: each walks rows)"
                                                                               : "",
            l.blocks_per_sm, l.occupancy_limit, l.registers);
    } else {
        int64_t per_thread = (width + l.threads - 1) / l.threads;
        const char *keep = g.kind != MCIR_ROWS_NORM
            ? mcir_arena_printf(c->a, "block-wide sum through %s of static shared memory",
                                kib(c, l.smem_static_bytes))
            : l.mode == MCIR_ROWS_BLOCK_REGS
            ? mcir_arena_printf(c->a, "the row kept in registers (%d vectors a thread, <= %d values), every "
                                      "load issued before the first use; warps meet in %s static",
                                l.chunks, MCIR_ROWS_REG_VALUES, kib(c, l.smem_static_bytes))
            : l.mode == MCIR_ROWS_BLOCK_SMEM
            ? mcir_arena_printf(c->a, "the row (more than %d values a thread) cached in %s of dynamic shared "
                                      "memory in %s for the later passes, four vectors a thread in flight; warps "
                                      "meet in %s static",
                                MCIR_ROWS_REG_VALUES, kib(c, l.smem_bytes), mcir_dtype_name(g.dtype),
                                kib(c, l.smem_static_bytes))
            : l.mode == MCIR_ROWS_CLUSTER_SMEM
            ? mcir_arena_printf(c->a, "the row (%s, over the %s shared-memory limit) split over a cluster of %d "
                                      "blocks, each caching a slice of %lld columns in %s of dynamic shared memory; "
                                      "the slices' statistics meet through distributed shared memory; warps meet in "
                                      "%s static",
                                kib(c, width * (int64_t)mcir_dtype_size(g.dtype)),
                                kib(c, c->t->smem_per_block_optin), l.cluster, (long long)l.slice,
                                kib(c, l.smem_bytes), kib(c, l.smem_static_bytes))
            : mcir_arena_printf(c->a, "the row (%s, over the %s shared-memory limit) read twice, four vectors a "
                                      "thread in flight; warps meet in %s static",
                                kib(c, width * (int64_t)mcir_dtype_size(g.dtype)),
                                kib(c, c->t->smem_per_block_optin), kib(c, l.smem_static_bytes));
        ti->reason = mcir_arena_printf(
            c->a,
            "%s: row of %s%lld %s%s: one block of %d threads per row, vector width %d, %lld "
            "elements per thread; %s; %lld rows -> %lld blocks%s; %d blocks/SM (limited by %s)",
            what, up_to, (long long)width, mcir_dtype_name(g.dtype),
            g.kind == MCIR_ROWS_NORM ? " > 1024" : " > 1024", l.threads, l.vector_width,
            (long long)per_thread, keep, (long long)g.rows, (long long)l.grid,
            g.kind == MCIR_ROWS_NORM && l.grid < g.rows ? " (persistent: each walks rows)" : "", l.blocks_per_sm,
            l.occupancy_limit);
    }
    return true;
}

/* ------------------------------------------------------ GEMM-shaped kernels */

/* matmul and conv2d: candidates scored by the cost model (launch_gemm.c) */
static bool tile_gemm_kernel(tile_ctx *c) { return mcir_launch_gemm(c->p, c->k, c->d); }

/* ------------------------------------------------------ data-parallel kernels */

/* Elementwise chains, copies and windowed pools: a thread per element (a
 * 32x32 tile per block for the transpose of the last two dims), 256
 * threads, a grid covering the items up to 2^20 blocks (grid-stride loop
 * beyond). */
static bool tile_flat(tile_ctx *c) {
    mcir_kernel_plan *k = c->k;
    mcir_flat_layout l;
    MCIR_ASSERT(mcir_flat_layout_of(c->t, k, &l));
    mcir_flat_apply(c->t, k, &l);
    mcir_tiling *ti = &k->tiling;
    const mcir_node *n = k->anchor;
    const char *what =
        l.kind == MCIR_FLAT_TRANSPOSE
            ? mcir_arena_printf(c->a, "transpose of the last two dims: 32x32 tiles through a 32x33 "
                                      "f32 tile (%s of static shared memory, no bank conflicts), "
                                      "256 threads (32x8) move 4 elements each; %lld tiles",
                                kib(c, l.smem_static_bytes), (long long)l.items)
        : l.kind == MCIR_FLAT_POOL
            ? mcir_arena_printf(c->a, "%s, one thread per output; %lld outputs", mcir_op_name(n->op),
                                (long long)l.items)
        : mcir_arena_printf(c->a, "%s, one thread per element of every write (scalar loads); %lld "
                                  "elements",
                            k->n_nodes > 1
                                ? mcir_arena_printf(c->a, "fused chain of %d nodes (%d intermediates "
                                                          "in registers)", k->n_nodes, k->n_internal)
                                : mcir_arena_printf(c->a, "%s%s", n ? mcir_op_name(n->op) : "copy",
                                                    k->tpl == MCIR_TEMPLATE_COPY ? " copy" : ""),
                            (long long)l.items);
    ti->reason = mcir_arena_printf(c->a, "%s -> %lld blocks of %d threads%s", what, (long long)l.grid,
                                   l.threads,
                                   l.grid == MCIR_LAUNCH_MAX_GRID ? " (grid-stride loop)" : "");
    return true;
}

static bool tile_pool(tile_ctx *c) {
    return c->k->anchor && c->k->anchor->op == MCIR_OP_GLOBAL_AVG_POOL ? tile_rows(c) : tile_flat(c);
}

/* A collective: no generated kernel. The runtime hands it to NCCL (the
 * emulated device: in memory); with one rank it is a copy. */
static bool tile_collective(tile_ctx *c) {
    mcir_kernel_plan *k = c->k;
    const mcir_node *n = k->anchor;
    MCIR_ASSERT(n && (mcir_op_desc_of(n->op)->flags & MCIR_OPF_COLLECTIVE));
    int ranks = c->p->graph->ranks;
    const mcir_tensor *x = n->inputs[0];
    const char *red = n->op == MCIR_OP_ALL_GATHER ? "" : mcir_arena_printf(c->a, " %s", mcir_node_string(n, "op"));
    const char *call = n->op == MCIR_OP_ALL_REDUCE ? "ncclAllReduce"
                       : n->op == MCIR_OP_ALL_GATHER ? "ncclAllGather" : "ncclReduceScatter";
    k->library = "nccl";
    k->ranks = ranks;
    k->library_op = mcir_arena_printf(c->a, "%s%s %s, %lld elements per rank", call, red,
                                      mcir_dtype_name(x->dtype), (long long)mcir_tensor_numel(x));
    k->tiling.reason =
        ranks > 1 ? mcir_arena_printf(c->a, "%s over %d ranks: NCCL on GPUs, in memory on the emulated device",
                                      mcir_op_name(n->op), ranks)
                  : mcir_arena_printf(c->a, "%s over one rank: the identity, a device-to-device copy",
                                      mcir_op_name(n->op));
    return true;
}

typedef bool (*tile_fn)(tile_ctx *c);

static const tile_fn tile_fns[MCIR_TEMPLATE_COUNT] = {
    [MCIR_TEMPLATE_STREAMING_ATTENTION] = tile_attention,
    [MCIR_TEMPLATE_STREAMING_NORM] = tile_rows,
    [MCIR_TEMPLATE_MATMUL] = tile_gemm_kernel,
    [MCIR_TEMPLATE_CONV2D] = tile_gemm_kernel,
    [MCIR_TEMPLATE_REDUCE] = tile_rows,
    [MCIR_TEMPLATE_POOL] = tile_pool,
    [MCIR_TEMPLATE_COPY] = tile_flat,
    [MCIR_TEMPLATE_ELEMENTWISE] = tile_flat,
    [MCIR_TEMPLATE_COLLECTIVE] = tile_collective,
};

/* ------------------------------------------------ library epilogues */

/* t is read by k as stored (a library call gets its pointer): no view,
 * at most a folded transpose of the last two dims for an operand. */
static bool kernel_reads(const mcir_kernel_plan *k, const mcir_tensor *t, bool operand) {
    const mcir_kernel_access *x = mcir_kernel_access_of(k, t);
    if (!x || x < k->read_access || x >= k->read_access + k->n_reads) return false;
    if (!x->folded) return true;
    return operand && x->folded->op == MCIR_OP_TRANSPOSE && x->folded->inputs[0] == x->tensor;
}

/* The one region node reading t, or NULL (none or several). */
static const mcir_node *sole_reader(const mcir_kernel_plan *k, const mcir_tensor *t) {
    const mcir_node *found = NULL;
    for (int i = 0; i < k->n_nodes; i++)
        for (int j = 0; j < k->nodes[i]->n_inputs; j++)
            if (k->nodes[i]->inputs[j] == t) {
                if (found && found != k->nodes[i]) return NULL;
                found = k->nodes[i];
            }
    return found;
}

bool mcir_kernel_gemm_epilogue(const mcir_kernel_plan *k, mcir_gemm_epilogue *e) {
    memset(e, 0, sizeof *e);
    const mcir_node *mm = k->anchor;
    if (k->tpl != MCIR_TEMPLATE_MATMUL || mm->op != MCIR_OP_MATMUL) {
        e->why = "not a matmul";
        return false;
    }
    const mcir_tensor *A = mm->inputs[0], *B = mm->inputs[1], *t = mm->outputs[0];
    if (t->rank < 2) {
        e->why = "not a matrix product";
        return false;
    }
    int64_t rows = t->shape[t->rank - 2], cols = t->shape[t->rank - 1];
    if (mcir_tensor_numel(t) != rows * cols) {
        /* a batch over weights shared by every batch ([B, T, K] x [K, N],
         * as every linear layer): one GEMM of B*T rows when A is stored as
         * it is read (no transpose folded in) */
        const mcir_kernel_access *xa = mcir_kernel_access_of(k, A);
        bool shared_b = B->rank >= 2 && mcir_tensor_numel(B) == B->shape[B->rank - 1] * B->shape[B->rank - 2];
        if (!shared_b || mcir_node_bool(mm, "transpose_a") || !xa || xa->folded || !kernel_reads(k, A, false) ||
            mcir_tensor_numel(A) != mcir_tensor_numel(t) / cols * A->shape[A->rank - 1]) {
            e->why = "batched (a true batch, or an operand not stored as one matrix of rows)";
            return false;
        }
        e->rows = mcir_tensor_numel(t) / cols;   /* flattened */
    }
    if (!kernel_reads(k, A, true) || !kernel_reads(k, B, true) || A->dtype != B->dtype) {
        e->why = "an operand is computed in the kernel (a prologue) or the dtypes differ";
        return false;
    }
    int64_t n_cols = t->shape[t->rank - 1];
    bool act = false, relu = false;
    int chain = 0;
    while (k->n_writes != 1 || k->write_access[0].logical != t) {
        const mcir_node *x = sole_reader(k, t);
        if (!x || mcir_kernel_access_of(k, t)) {
            e->why = "an intermediate of the epilogue is stored or read twice";
            return false;
        }
        const mcir_tensor *o = x->outputs[0];
        if ((x->op == MCIR_OP_RELU || (x->op == MCIR_OP_GELU &&
             strcmp(mcir_node_string(x, "approximate"), "tanh") == 0)) && !act && !e->residual) {
            act = true;
            relu = x->op == MCIR_OP_RELU;
        } else if (x->op == MCIR_OP_ADD && x->n_inputs == 2 && !act) {
            const mcir_tensor *other = x->inputs[0] == t ? x->inputs[1] : x->inputs[0];
            if (other == t || other->dtype != o->dtype) {
                e->why = "an add that is neither a bias nor a residual";
                return false;
            }
            if (!e->bias && other->kind == MCIR_TENSOR_WEIGHT && other->rank == 1 &&
                other->shape[0] == n_cols && kernel_reads(k, other, false)) {
                e->bias = other;
            } else if (!e->residual && kernel_reads(k, other, false) && other->rank == o->rank &&
                       memcmp(other->shape, o->shape, sizeof(int64_t) * (size_t)o->rank) == 0) {
                e->residual = other;
            } else {
                e->why = "an add that is neither a bias nor a residual";
                return false;
            }
        } else {
            e->why = "an op the library epilogues lack (only bias, ReLU, tanh-GELU, residual)";
            return false;
        }
        if (o->dtype != t->dtype && chain > 0) {
            e->why = "the epilogue changes dtype";
            return false;
        }
        t = o;
        if (++chain > 4) {
            e->why = "too long";
            return false;
        }
    }
    if (chain == 0) {
        e->why = "no epilogue";
        return false;
    }
    int fused_nodes = 1 + chain;
    for (int i = 0; i < k->n_nodes; i++)
        if (k->nodes[i]->op == MCIR_OP_TRANSPOSE || k->nodes[i]->op == MCIR_OP_RESHAPE ||
            k->nodes[i]->op == MCIR_OP_SPLIT)
            fused_nodes++;   /* folded operand views */
    if (fused_nodes != k->n_nodes) {
        e->why = "the region holds more than the matmul and its epilogue chain";
        return false;
    }
    e->out = t;
    e->code = act ? (relu ? 2 : 32) : 1;
    if (e->bias) e->code = act ? e->code | 4 : 4;
    return true;
}

bool mcir_plan_choose_tiling(mcir_plan *p, mcir_kernel_plan *k, mcir_diag *d) {
    tile_ctx c = {.p = p, .k = k, .t = p->target, .a = p->arena, .d = d};
    memset(&k->tiling, 0, sizeof k->tiling);
    k->scratch_bytes = 0;
    k->sched_bytes = 0;
    k->smem_static_bytes = 0;
    MCIR_ASSERT(tile_fns[k->tpl]);
    if (!tile_fns[k->tpl](&c)) return false;
    if (k->tpl == MCIR_TEMPLATE_STREAMING_ATTENTION) mcir_attention_sm90_choose(p->target, k, p->arena);
    MCIR_ASSERT(k->smem_bytes <= p->target->smem_per_block_optin);
    MCIR_ASSERT(k->block[0] * k->block[1] * k->block[2] <= p->target->max_threads_per_block);
    return true;
}
