/*
 * cost.c — the traffic and cost model of a KernelPlan: how many bytes each
 * kernel moves through global memory (what its threads request, re-reads
 * included) and across DRAM (each tensor once, plus cuBLAS's staging
 * buffer and the tile re-reads the L2 cannot hold), its flops, its
 * launches, and a roofline time on the target (properties/target.c).
 *
 * Invariant: the counts follow the code that runs. The generated kernels
 * are codegen/templates/ and codegen/tpl_*.c; attention's tiles and
 * split-KV are the launch model's layout (kernelplan/launch.h), the one
 * codegen realises; where a template realises tiles of its own (the
 * generated matmul's fixed 64x64), the functions marked "mirrors" below
 * repeat its rule, and tests/test_codegen_emu.c counts what the emulated
 * kernels request against global_bytes, so the two cannot drift apart
 * unseen.
 * Value chains (fused prologues and epilogues) are evaluated per element
 * without common subexpressions (codegen/emit.c), so an element of a
 * kernel read is requested once per path that reaches it.
 */
#include <stdlib.h>
#include <string.h>

#include "kernelplan/launch.h"
#include "kernelplan/launch_gemm_sm90.h"
#include "kernelplan/launch_sm90.h"
#include "kernelplan/plan-impl.h"

/* ------------------------------------------------------------- helpers */

static int64_t esize(const mcir_tensor *t) { return (int64_t)mcir_dtype_size(t->dtype); }

static bool in_region(const mcir_kernel_plan *k, const mcir_node *n) {
    for (int i = 0; i < k->n_nodes; i++)
        if (k->nodes[i] == n) return true;
    return false;
}

static int read_index(const mcir_kernel_plan *k, const mcir_tensor *t) {
    for (int i = 0; i < k->n_reads; i++)
        if (k->reads[i] == t) return i;
    return -1;
}

static int write_index(const mcir_kernel_plan *k, const mcir_tensor *t) {
    for (int i = 0; i < k->n_writes; i++)
        if (k->writes[i] == t) return i;
    return -1;
}

static mcir_node *region_producer(const mcir_kernel_plan *k, const mcir_tensor *t) {
    return t->producer && in_region(k, t->producer) ? t->producer : NULL;
}

static int64_t tile_dim(const mcir_tiling *ti, const char *name) {
    for (int i = 0; i < ti->n_dims && i < MCIR_MAX_TILE_DIMS; i++)
        if (ti->dim_names[i] && strcmp(ti->dim_names[i], name) == 0) return ti->block_tile[i];
    return 0;
}

/* What one element of a value chain costs (codegen/emit.c's v<ID>(i)). */
typedef struct elem_cost {
    double bytes;   /* global loads */
    double flops;
} elem_cost;

/* What one element of an elementwise op costs in a value chain, in f32
 * issue slots. A float op is one (transcendentals too). Integer values are
 * i64 in the generated code (codegen/templates/prelude_int.cuh), which the
 * GPU computes with 32-bit instructions: add, sub, neg, min/max,
 * comparisons, bitwise ops and selects two, a multiply three, a shift
 * four (its range tests), a division or remainder about forty (a software
 * routine); a cast one; a gather, argmax or where is counted by its
 * values' type. */
static double op_cost(const mcir_node *n) {
    /* the values computed on: where's are its second and third inputs */
    int v = n->op == MCIR_OP_WHERE ? 1 : 0;
    bool ints = n->n_inputs > v && mcir_value_type_of(n->inputs[v]->dtype) == MCIR_VALUE_I64;
    if (!ints || n->op == MCIR_OP_CAST) return 1;
    switch (n->op) {
    case MCIR_OP_DIV:
    case MCIR_OP_MOD: return 40;
    case MCIR_OP_MUL: return 3;
    case MCIR_OP_LEFT_SHIFT:
    case MCIR_OP_RIGHT_SHIFT: return 4;
    default: return 2;
    }
}

/* The loads and flops of evaluating t at one element inside kernel k:
 * `anchor_out` is the template's own result (free), a kernel read is one
 * load of its dtype, a region node evaluates each of its inputs (concat:
 * the input that holds the element, weighted by its share of the axis). */
static elem_cost chain_cost(const mcir_kernel_plan *k, const mcir_tensor *t,
                            const mcir_tensor *anchor_out, int depth) {
    elem_cost c = {0, 0};
    if (t == anchor_out || depth > 64) return c;
    mcir_node *n = region_producer(k, t);
    if (!n) {
        if (read_index(k, t) >= 0) c.bytes = (double)esize(t);
        return c;
    }
    if (n->op == MCIR_OP_CONCAT) {
        int axis;
        if (!mcir_norm_axis(mcir_node_int(n, "axis"), t->rank, &axis) || t->shape[axis] == 0)
            return c;
        for (int j = 0; j < n->n_inputs; j++) {
            elem_cost x = chain_cost(k, n->inputs[j], anchor_out, depth + 1);
            double share = (double)n->inputs[j]->shape[axis] / (double)t->shape[axis];
            c.bytes += share * x.bytes;
            c.flops += share * x.flops;
        }
        return c;
    }
    if (n->op == MCIR_OP_ARGMAX || n->op == MCIR_OP_ARGMIN) {   /* its whole axis per element */
        int axis;
        const mcir_tensor *x = n->inputs[0];
        double len = mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis) ? (double)x->shape[axis] : 1;
        elem_cost in = chain_cost(k, x, anchor_out, depth + 1);
        c.bytes = len * in.bytes;
        c.flops = len * (in.flops + op_cost(n));
        return c;
    }
    if (n->op == MCIR_OP_INDEX_COPY) {   /* the search of its indices, then a row of U or X */
        int axis;
        const mcir_tensor *x = n->inputs[0];
        if (!mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis) || x->shape[axis] == 0) return c;
        double len = (double)n->inputs[1]->shape[0], share = len / (double)x->shape[axis];
        if (share > 1) share = 1;   /* (a repeated index) */
        elem_cost ix = chain_cost(k, n->inputs[1], anchor_out, depth + 1),
                  xs = chain_cost(k, x, anchor_out, depth + 1),
                  us = chain_cost(k, n->inputs[2], anchor_out, depth + 1);
        c.bytes = len * ix.bytes + share * us.bytes + (1 - share) * xs.bytes;
        c.flops = len * (ix.flops + op_cost(n)) + share * us.flops + (1 - share) * xs.flops;
        return c;
    }
    if (n->op == MCIR_OP_CUMSUM) {   /* its prefix along the axis, (len + 1) / 2 on average */
        int axis;
        const mcir_tensor *x = n->inputs[0];
        double len = mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis) ? (double)x->shape[axis] : 1;
        double terms = mcir_node_bool(n, "exclusive") ? (len - 1) / 2 : (len + 1) / 2;
        elem_cost in = chain_cost(k, x, anchor_out, depth + 1);
        c.bytes = terms * in.bytes;
        c.flops = terms * (in.flops + op_cost(n));
        return c;
    }
    bool moves = n->op == MCIR_OP_RESHAPE || n->op == MCIR_OP_TRANSPOSE ||
                 n->op == MCIR_OP_SLICE || n->op == MCIR_OP_SPLIT;
    int inputs = moves ? 1 : n->n_inputs;
    for (int j = 0; j < inputs; j++) {
        elem_cost x = chain_cost(k, n->inputs[j], anchor_out, depth + 1);
        c.bytes += x.bytes;
        c.flops += x.flops;
    }
    if (!moves) c.flops += op_cost(n);
    return c;
}

/* Per element of the anchor's output: every write's chain (its loads
 * beside the anchor's value, its flops) and its store. */
static elem_cost epilogue_cost(const mcir_kernel_plan *k, const mcir_tensor *anchor_out) {
    elem_cost c = {0, 0};
    for (int w = 0; w < k->n_writes; w++) {
        elem_cost x = chain_cost(k, k->writes[w], anchor_out, 0);
        c.bytes += x.bytes + (double)esize(k->writes[w]);
        c.flops += x.flops;
    }
    return c;
}

/* Whether a region node consumes t, or the kernel writes it. */
static bool used_in(const mcir_kernel_plan *k, const mcir_tensor *t) {
    if (write_index(k, t) >= 0) return true;
    for (int i = 0; i < k->n_nodes; i++)
        for (int j = 0; j < k->nodes[i]->n_inputs; j++)
            if (k->nodes[i]->inputs[j] == t) return true;
    return false;
}

/* The bytes of read r the kernel touches: all of it, unless every region
 * node consuming it is a slice or a split, which touch their parts (a
 * split folded into strided views reads one part of a fused projection). */
static int64_t touched_bytes(const mcir_kernel_plan *k, const mcir_tensor *r) {
    int64_t whole = mcir_tensor_bytes(r), part = 0;
    bool consumed = false;
    for (int i = 0; i < k->n_nodes; i++) {
        const mcir_node *n = k->nodes[i];
        bool reads_r = false;
        for (int j = 0; j < n->n_inputs; j++) reads_r |= n->inputs[j] == r;
        if (!reads_r) continue;
        consumed = true;
        if (n->op != MCIR_OP_SLICE && n->op != MCIR_OP_SPLIT) return whole;
        for (int o = 0; o < n->n_outputs; o++)
            if (n->op == MCIR_OP_SLICE || used_in(k, n->outputs[o]))
                part += mcir_tensor_numel(n->outputs[o]) * esize(r);
    }
    return consumed && part < whole ? part : whole;
}

/* A read of a state's input by the kernel that writes the state over it
 * through a window: the rows outside the window are never loaded. */
static bool read_skipped(const mcir_kernel_plan *k, const mcir_tensor *t) {
    for (int w = 0; k->windows && w < k->n_writes; w++)
        if (k->windows[w].axis >= 0 && k->writes[w]->state_input == t) return true;
    return false;
}

/* Each distinct tensor the kernel reads, once (the same tensor may be
 * several reads: the parts of a folded split). */
static int64_t reads_bytes(const mcir_kernel_plan *k) {
    int64_t b = 0;
    for (int i = 0; i < k->n_reads; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = k->reads[j] == k->reads[i];
        if (!seen && !read_skipped(k, k->reads[i])) b += touched_bytes(k, k->reads[i]);
    }
    return b;
}

static int64_t writes_bytes(const mcir_kernel_plan *k) {
    int64_t b = 0;
    for (int i = 0; i < k->n_writes; i++) b += mcir_kernel_write_items(k, i) * esize(k->writes[i]);
    return b;
}


/* An operand read `passes` times in a row whose reuse span (the bytes
 * that must stay in L2 between two passes) exceeds the L2: every pass
 * after the first crosses DRAM again. */
static int64_t l2_spill(const mcir_target *t, double span_bytes, int64_t passes, int64_t slices) {
    if (passes <= 1 || span_bytes <= (double)t->l2_bytes) return 0;
    return (int64_t)(span_bytes * (double)(passes - 1) * (double)slices);
}

typedef struct cost_ctx {
    const mcir_kernel_plan *k;
    const mcir_target *t;
    const mcir_cost_options *o;
    mcir_kernel_cost *c;
    double most_flops;   /* of one launch so far: its unit is the kernel's */
} cost_ctx;

static double peak_tflops(const mcir_target *t, const char *unit) {
    if (strcmp(unit, "f16_tensor_core") == 0) return t->f16_tc_tflops;
    if (strcmp(unit, "bf16_tensor_core") == 0) return t->bf16_tc_tflops;
    return t->f32_fma_tflops;
}

static const char *tensor_unit(mcir_dtype dt) {
    return dt == MCIR_DTYPE_F16 ? "f16_tensor_core"
         : dt == MCIR_DTYPE_BF16 ? "bf16_tensor_core" : "f32_fma";
}

/* One GPU launch: roofline of its DRAM bytes and flops on `unit` at
 * `frac` of its peak, and the time its instructions take to issue
 * (issue_us; 0: not modelled): the slowest of the three. */
static void add_launch_issue(cost_ctx *x, double dram_bytes, double flops, const char *unit, double frac,
                             double issue) {
    mcir_kernel_cost *c = x->c;
    double mem = dram_bytes / (x->t->dram_gbps * 1e3);               /* GB/s = 1e3 B/us */
    double comp = flops / (peak_tflops(x->t, unit) * frac * 1e6);    /* TFLOP/s = 1e6 flop/us */
    double most = mem > comp ? mem : comp;
    c->memory_us += mem;
    c->compute_us += comp;
    c->issue_us += issue;
    c->launch_us += x->t->launch_us;
    c->modelled_us += (most > issue ? most : issue) + x->t->launch_us;
    c->launches++;
    if (c->launches == 1 || flops > x->most_flops) {
        x->most_flops = flops;
        c->unit = unit;
    }
}

static void add_launch_at(cost_ctx *x, double dram_bytes, double flops, const char *unit, double frac) {
    add_launch_issue(x, dram_bytes, flops, unit, frac, 0);
}

static void add_launch(cost_ctx *x, double dram_bytes, double flops, const char *unit) {
    add_launch_at(x, dram_bytes, flops, unit, 1.0);
}

/* ---------------------------------------------------------- the issue bound */

/* What a memory-bound kernel issues: weighted SASS instructions per 16
 * bytes its loads and stores move a lane (MUFU x MCIR_SASS_MUFU_WEIGHT, an
 * IEEE slow path + MCIR_SASS_SLOW_PATH_WEIGHT: the SASS audit's
 * weighted_per_16b, docs/codegen.md "Kernel audit"), by template, norm
 * kind and row layout (mcir_rows_mode), for f32 and for 16-bit (f16 and
 * bf16 agree within 3 %) data. Calibrated with `mcirc --arch sm_90 --emit
 * audit` (nvdisasm 13.5 on NVRTC 13.0's cubins) on: elementwise a + b and
 * copy a transpose of [8192, 8192]; reduce_sum over the last axis of
 * [8192, 8192] (ba63c2e); a + b a vector at a time (#42; 16-bit: its
 * result stored unrounded, vvr<ID>); a copy a vector at a time, the
 * costlier of a slice of rows of [8192, 8192] and the heads transpose of
 * [64, 1024, 1024] (its coordinates' index math: 18.0 / 23.0 and 24.5 /
 * 29.5) and the tiled transpose of [8192, 8192] a vector at a time (26.0
 * / 24.8; an element at a time, where the extents are not multiples of
 * the vector, the scalar figure); the norms of #42 over 2^25 elements, rows of
 * W = 1024 (a warp's registers), 4096 (a block's), 65536 f16 / 40000 f32
 * (the shared-memory cache), 262144 (a cluster per row) and, on sm_80,
 * 65536 f32 / 131072 (read twice). The audit's main loops are those that
 * access global memory: layernorm's variance pass over its cache (shared
 * memory only) is outside them, so its cache figures are the audit's
 * times 1.25; softmax's passes all load or store. The elementwise
 * figure is its floor, a binary op: a chain with transcendentals issues
 * more, which the audit of the kernel itself shows. To recalibrate: run
 * the audit on those graphs and copy its weighted figures here. */
typedef struct issue_figure {
    mcir_template tpl;
    mcir_op norm;          /* STREAMING_NORM: its op; else MCIR_OP_COUNT */
    int mode;              /* STREAMING_NORM: its row layout (mcir_rows_mode); ELEMENTWISE, COPY: 1 a
                              vector at a time (the plan's vector width > 1), 0 scalar; else -1 */
    double f32, f16;       /* weighted instructions per 16 bytes */
} issue_figure;

static const issue_figure issue_figures[] = {
    {MCIR_TEMPLATE_ELEMENTWISE, MCIR_OP_COUNT, 0, 19.7, 58.7},
    {MCIR_TEMPLATE_ELEMENTWISE, MCIR_OP_COUNT, 1, 8.0, 14.7},
    {MCIR_TEMPLATE_COPY, MCIR_OP_COUNT, 0, 53.4, 114.9},
    {MCIR_TEMPLATE_COPY, MCIR_OP_COUNT, 1, 26.0, 29.5},
    {MCIR_TEMPLATE_REDUCE, MCIR_OP_COUNT, -1, 48.0, 104.0},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_LAYERNORM, MCIR_ROWS_WARP_REGS, 7.3, 23.6},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_LAYERNORM, MCIR_ROWS_BLOCK_REGS, 13.2, 32.2},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_LAYERNORM, MCIR_ROWS_BLOCK_SMEM, 11.3, 31.1},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_LAYERNORM, MCIR_ROWS_BLOCK_STREAM, 10.6, 23.5},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_RMSNORM, MCIR_ROWS_WARP_REGS, 6.3, 22.3},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_RMSNORM, MCIR_ROWS_BLOCK_REGS, 8.1, 25.8},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_RMSNORM, MCIR_ROWS_BLOCK_SMEM, 15.2, 27.2},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_RMSNORM, MCIR_ROWS_BLOCK_STREAM, 6.6, 21.2},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_SOFTMAX, MCIR_ROWS_WARP_REGS, 19.8, 52.6},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_SOFTMAX, MCIR_ROWS_BLOCK_REGS, 26.3, 63.8},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_SOFTMAX, MCIR_ROWS_BLOCK_SMEM, 44.0, 77.4},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_SOFTMAX, MCIR_ROWS_BLOCK_STREAM, 27.3, 55.5},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_LAYERNORM, MCIR_ROWS_CLUSTER_SMEM, 17.3, 32.8},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_RMSNORM, MCIR_ROWS_CLUSTER_SMEM, 11.7, 29.0},
    {MCIR_TEMPLATE_STREAMING_NORM, MCIR_OP_SOFTMAX, MCIR_ROWS_CLUSTER_SMEM, 45.5, 78.8},
};

/* The issue time of kernel k moving `global` bytes through its loads and
 * stores (a warp's 16-byte vector a lane is 512 of them), where the table
 * has its template; 0 elsewhere. The data's dtype: the anchor's input (a
 * norm, a reduction) or the first write (a chain, a copy). */
static double issue_time(const cost_ctx *x, double global, int mode) {
    const mcir_kernel_plan *k = x->k;
    const mcir_tensor *data = k->anchor && k->anchor->n_inputs && k->tpl != MCIR_TEMPLATE_ELEMENTWISE &&
                                      k->tpl != MCIR_TEMPLATE_COPY
                                  ? k->anchor->inputs[0]
                              : k->n_writes ? k->writes[0] : NULL;
    if (!data) return 0;
    mcir_op norm = k->tpl == MCIR_TEMPLATE_STREAMING_NORM ? k->anchor->op : MCIR_OP_COUNT;
    if (k->tpl == MCIR_TEMPLATE_ELEMENTWISE || k->tpl == MCIR_TEMPLATE_COPY) mode = k->tiling.vector_width > 1;
    for (size_t i = 0; i < sizeof issue_figures / sizeof *issue_figures; i++) {
        const issue_figure *f = &issue_figures[i];
        if (f->tpl != k->tpl || f->norm != norm || (f->mode >= 0 && f->mode != mode)) continue;
        double per_16b = esize(data) == 2 ? f->f16 : f->f32;
        return mcir_issue_us(x->t, per_16b * global / (16.0 * x->t->warp_size));
    }
    return 0;
}

double mcir_issue_us(const mcir_target *t, double warp_instructions) {
    double per_us = (double)t->sm_count * t->issue_per_clock * t->clock_ghz * 1e3;   /* GHz = 1e3 clocks/us */
    return per_us > 0 ? warp_instructions / per_us : 0;
}

/* One launch of a generated kernel that moves each tensor once; a
 * memory-bound template's issue time where the table has it. */
static void simple_kernel(cost_ctx *x, double global, double flops) {
    mcir_kernel_cost *c = x->c;
    c->global_bytes = (int64_t)global;
    c->flops = flops;
    c->hbm_bytes = reads_bytes(x->k) + writes_bytes(x->k);
    add_launch_issue(x, (double)c->hbm_bytes, flops, "f32_fma", 1.0, issue_time(x, global, -1));
}

/* ------------------------------------------------------ data-parallel */

/* What t's vector form costs (codegen/emit.c's vv<ID>(i): vec elements at
 * once; mcir_vector_operand_of says how each operand enters): a kernel
 * read, vec elements; a reshape, its input's; an elementwise node, its
 * op on every lane and each operand's: its vector form, one element of
 * its chain (a broadcast one, computed once), or vec of them. */
static elem_cost vector_cost(const mcir_kernel_plan *k, const mcir_tensor *t, int vec, int depth) {
    elem_cost c = {0, 0};
    mcir_node *n = region_producer(k, t);
    if (depth > 64) return c;
    if (!n) {
        c.bytes = (double)vec * (double)esize(t);
        return c;
    }
    if (n->op == MCIR_OP_RESHAPE) return vector_cost(k, n->inputs[0], vec, depth + 1);
    int axis;
    if (n->op == MCIR_OP_CONCAT && mcir_norm_axis(mcir_node_int(n, "axis"), t->rank, &axis) && t->shape[axis] > 0) {
        /* a vector of one part: each part's cost by its share of the axis */
        for (int j = 0; j < n->n_inputs; j++) {
            elem_cost x = vector_cost(k, n->inputs[j], vec, depth + 1);
            double share = (double)n->inputs[j]->shape[axis] / (double)t->shape[axis];
            c.bytes += share * x.bytes;
            c.flops += share * x.flops;
        }
        return c;
    }
    for (int j = 0; j < n->n_inputs; j++) {
        mcir_vector_operand m = mcir_vector_operand_of(k, n, j, vec);
        elem_cost o = m == MCIR_VEC_LANES ? vector_cost(k, n->inputs[j], vec, depth + 1)
                                          : chain_cost(k, n->inputs[j], NULL, depth + 1);
        double times = m == MCIR_VEC_SCALAR ? (double)vec : 1.0;
        c.bytes += times * o.bytes;
        c.flops += times * o.flops;
    }
    c.flops += (double)vec * op_cost(n);
    return c;
}

/* codegen/tpl_simple.c gen_pointwise: each write element from its chain,
 * or (mcir_pointwise_vector_width) N / V vectors from its vector form (a
 * write without one: V elements of its chain) and the N % V elements of
 * its tail from the chain; a last-two-dims transpose copy moves each
 * element once each way. */
static void cost_pointwise(cost_ctx *x) {
    const mcir_kernel_plan *k = x->k;
    int vec = mcir_pointwise_vector_width(k);
    double global = 0, flops = 0;
    for (int w = 0; w < k->n_writes; w++) {
        const mcir_tensor *t = k->writes[w];
        elem_cost e = chain_cost(k, t, NULL, 0);
        int64_t items = mcir_kernel_write_items(k, w);   /* a state's window: its rows */
        double n = (double)items, st = (double)esize(t);
        if (mcir_pointwise_vector_write(k, w, vec)) {
            elem_cost v = {vec * e.bytes, vec * e.flops};
            if (mcir_vector_form(k, t, vec)) v = vector_cost(k, t, vec, 0);
            double nv = (double)(items / vec);
            global += nv * (v.bytes + vec * st);
            flops += nv * v.flops;
            n = (double)(items % vec);
        }
        global += n * (e.bytes + st);
        flops += n * e.flops;
    }
    simple_kernel(x, global, flops);
}

/* codegen/tpl_simple.c cg_gen_reduce: each element of x once, one
 * epilogue per output. */
static void cost_reduce(cost_ctx *x) {
    const mcir_kernel_plan *k = x->k;
    const mcir_tensor *in = k->anchor->inputs[0], *y = k->anchor->outputs[0];
    elem_cost e = chain_cost(k, in, y, 0), epi = epilogue_cost(k, y);
    double n = (double)mcir_tensor_numel(in), outs = (double)mcir_tensor_numel(y);
    simple_kernel(x, n * e.bytes + outs * epi.bytes, n * (e.flops + 1) + outs * epi.flops);
}

/* Window positions inside [0, size) summed over the outputs of one axis. */
static int64_t window_hits(int64_t out, int64_t size, int64_t kernel, int64_t stride,
                           int64_t pad, int64_t dilation) {
    int64_t hits = 0;
    for (int64_t o = 0; o < out; o++)
        for (int64_t w = 0; w < kernel; w++) {
            int64_t i = o * stride - pad + w * dilation;
            hits += i >= 0 && i < size;
        }
    return hits;
}

static void ints_or(const mcir_node *n, const char *name, int count, const int64_t *fallback,
                    int64_t *out) {
    const int64_t *v;
    if (mcir_node_attr(n, name) && mcir_node_ints(n, name, &v) == count) {
        memcpy(out, v, sizeof(int64_t) * (size_t)count);
        return;
    }
    memcpy(out, fallback, sizeof(int64_t) * (size_t)count);
}

/* codegen/tpl_simple.c cg_gen_pool: a warp per plane (global average) or
 * a thread per output walking its window inside the image. */
static void cost_pool(cost_ctx *x) {
    const mcir_kernel_plan *k = x->k;
    const mcir_node *n = k->anchor;
    const mcir_tensor *in = n->inputs[0], *y = n->outputs[0];
    elem_cost e = chain_cost(k, in, y, 0), epi = epilogue_cost(k, y);
    double outs = (double)mcir_tensor_numel(y), loads;
    if (n->op == MCIR_OP_GLOBAL_AVG_POOL || in->rank != 4 || y->rank != 4) {
        loads = (double)mcir_tensor_numel(in);
    } else {
        static const int64_t zeros[4] = {0, 0, 0, 0};
        int64_t kern[2] = {1, 1}, str[2], pads[4];
        ints_or(n, "kernel", 2, kern, kern);
        ints_or(n, "strides", 2, kern, str);
        ints_or(n, "pads", 4, zeros, pads);
        loads = (double)(in->shape[0] * in->shape[1]) *
                (double)window_hits(y->shape[2], in->shape[2], kern[0], str[0], pads[0], 1) *
                (double)window_hits(y->shape[3], in->shape[3], kern[1], str[1], pads[1], 1);
    }
    simple_kernel(x, loads * e.bytes + outs * epi.bytes, loads * (e.flops + 1) + outs * epi.flops);
}

static double gemm_schedule(cost_ctx *x, const mcir_tiling *ti);

/* codegen/tpl_conv.c: implicit GEMM per group on templates/matmul.cuh —
 * every column of tiles gathers its rows of the im2col view (taps inside
 * the image only), every row of tiles re-reads the group's weights; bias
 * and the epilogue once per output. */
static void cost_conv2d(cost_ctx *x) {
    const mcir_kernel_plan *k = x->k;
    const mcir_node *n = k->anchor;
    const mcir_tensor *in = n->inputs[0], *w = n->inputs[1], *y = n->outputs[0];
    const mcir_tensor *bias = n->n_inputs > 2 ? n->inputs[2] : NULL;
    mcir_gemm_problem g;
    if (in->rank != 4 || w->rank != 4 || y->rank != 4 || !mcir_gemm_problem_of(k, &g)) {
        simple_kernel(x, (double)(reads_bytes(k) + writes_bytes(k)), 0);
        return;
    }
    static const int64_t ones[2] = {1, 1}, zeros[4] = {0, 0, 0, 0};
    int64_t str[2], pads[4], dil[2];
    ints_or(n, "strides", 2, ones, str);
    ints_or(n, "pads", 4, zeros, pads);
    ints_or(n, "dilations", 2, ones, dil);
    const mcir_tiling *ti = x->o && x->o->tiles ? x->o->tiles : &k->tiling;
    int64_t bm = tile_dim(ti, "M"), bn = tile_dim(ti, "N");
    if (bm < 1) bm = 64;
    if (bn < 1) bn = 64;
    int64_t tm = (g.m + bm - 1) / bm, tn = (g.n + bn - 1) / bn;
    int64_t cg = in->shape[1] / g.batch;
    /* im2col elements inside the image, per group */
    double taps = (double)(y->shape[0] * cg) *
                  (double)window_hits(y->shape[2], in->shape[2], w->shape[2], str[0], pads[0], dil[0]) *
                  (double)window_hits(y->shape[3], in->shape[3], w->shape[3], str[1], pads[1], dil[1]);
    elem_cost ex = chain_cost(k, in, y, 0), ew = chain_cost(k, w, y, 0), epi = epilogue_cost(k, y);
    double outs = (double)mcir_tensor_numel(y), groups = (double)g.batch;
    double xl = groups * taps * (double)tn, wl = groups * (double)(g.n * g.k) * (double)tm;
    double global = xl * ex.bytes + wl * ew.bytes + outs * epi.bytes;
    double gemm_flops = 2.0 * groups * (double)g.m * (double)g.n * (double)g.k;
    double flops = gemm_flops + xl * ex.flops + wl * ew.flops + outs * epi.flops;
    if (bias) {
        elem_cost eb = chain_cost(k, bias, y, 0);
        global += outs * eb.bytes;
        flops += outs * (1 + eb.flops);
    }
    mcir_kernel_cost *c = x->c;
    c->global_bytes = (int64_t)global;
    c->flops = flops;
    c->hbm_bytes = reads_bytes(k) + writes_bytes(k);
    double sched = gemm_schedule(x, ti);
    const char *unit = g.mma ? tensor_unit(g.dtype) : "f32_fma";
    if (sched < 0) {
        add_launch(x, (double)c->hbm_bytes, flops, unit);
        return;
    }
    double mem = (double)c->hbm_bytes / (x->t->dram_gbps * 1e3);
    double comp = sched + (flops - gemm_flops) / (x->t->f32_fma_tflops * 1e6);
    c->memory_us = mem;
    c->compute_us = comp;
    c->launch_us = x->t->launch_us;
    c->modelled_us = (mem > comp ? mem : comp) + x->t->launch_us;
    c->launches = 1;
    c->unit = unit;
}

/* -------------------------------------------------------------- norms */

/* codegen/tpl_norm.c + templates/norm.cuh, as the plan's row layout
 * (kernelplan/launch.c) has it: X read once where the row stays on chip
 * (registers, or the shared-memory cache), twice where it does not (then
 * the second read crosses DRAM again where the rows in flight, the grid's,
 * exceed the L2), plus one value of X per thread and row for layernorm's
 * shift there; gamma and beta read at every element of every row. */
static void cost_norm(cost_ctx *x) {
    const mcir_kernel_plan *k = x->k;
    const mcir_node *n = k->anchor;
    const mcir_tensor *in = n->inputs[0], *y = n->outputs[0];
    int kind = n->op == MCIR_OP_SOFTMAX ? 0 : n->op == MCIR_OP_LAYERNORM ? 1 : 2;
    mcir_rows_problem g;
    mcir_rows_layout l;
    bool stream = false;
    mcir_rows_mode mode = MCIR_ROWS_WARP_REGS;
    int64_t threads = 0, grid = 0, W = 0;
    if (mcir_rows_problem_of(NULL, k, &g) && mcir_rows_layout_of_tiling(x->t, &g, &k->tiling, &l, NULL)) {
        mode = l.mode;
        stream = l.mode == MCIR_ROWS_BLOCK_STREAM;
        threads = l.threads;
        grid = l.grid;
        W = g.width;
    }
    double numel = (double)mcir_tensor_numel(in), rows = W > 0 ? numel / (double)W : 0;
    elem_cost ex = chain_cost(k, in, y, 0), epi = epilogue_cost(k, y);
    double passes = stream ? 2 : 1;
    double global = numel * (passes * ex.bytes + epi.bytes);
    double flops = numel * (passes * ex.flops + epi.flops + (kind == 1 ? 5 : kind == 0 ? 4 : 3));
    if (stream && kind == 1) {   /* the shift: x_first, one value a thread and row */
        global += rows * (double)threads * ex.bytes;
        flops += rows * (double)threads * ex.flops;
    }
    for (int j = 1; j < n->n_inputs && kind > 0 && j <= 2; j++) {
        elem_cost ep = chain_cost(k, n->inputs[j], y, 0);
        global += numel * ep.bytes;
        flops += numel * ep.flops;
    }
    mcir_kernel_cost *c = x->c;
    c->global_bytes = (int64_t)global;
    c->flops = flops;
    c->hbm_bytes = reads_bytes(k) + writes_bytes(k);
    if (stream && (double)grid * (double)W * (double)esize(in) > (double)x->t->l2_bytes)
        c->hbm_bytes += (int64_t)(numel * (double)esize(in));   /* the second read of X misses the L2 */
    add_launch_issue(x, (double)c->hbm_bytes, flops, "f32_fma", 1.0, issue_time(x, global, (int)mode));
}

/* ---------------------------------------------------------- attention */

/* The kernel that runs, as codegen realises it: tiles, split-KV, and how
 * the queries are grouped — items of leading dims, rows per item (a GQA
 * group's query heads packed into the rows: row r is query r % nq), and
 * the mask's form. The sm_90a template where the plan took that path
 * (tiling "wg": launch_sm90.c's layout), else the launch model's layout of
 * the tiling (mcir_attention_layout_of_tiling, which
 * codegen/tpl_attention.c realises). False when the tiling is not one the
 * templates realise. */
typedef struct att_run {
    int64_t bm, bn, splits, chunk, merge_block;
    int64_t items, rows, pack;   /* pack 1: items = batch*heads, rows = Nq */
    bool sm90;                   /* an item's empty key range still streams one (masked) tile */
    bool mask_one_row;           /* sm_90a: one mask row per K/V tile, not one per score */
} att_run;

static bool attention_run(const cost_ctx *x, const mcir_tiling *ti, const mcir_attention_problem *g, att_run *r) {
    memset(r, 0, sizeof *r);
    if (tile_dim(ti, "wg") > 0) {
        mcir_attention_sm90 l;
        const char *why;
        if (!mcir_attention_sm90_layout(x->t, x->k, &l, &why)) return false;
        *r = (att_run){.bm = l.bm, .bn = l.bn, .splits = l.splits, .chunk = l.chunk, .merge_block = l.merge_block,
                       .items = l.items, .rows = l.rows, .pack = l.pack, .sm90 = true,
                       .mask_one_row = l.mask == MCIR_SM90_MASK_ONE_ROW};
        return true;
    }
    mcir_attention_layout l;
    if (!mcir_attention_layout_of_tiling(x->t, g, ti, &l, NULL)) return false;
    *r = (att_run){.bm = l.bm, .bn = l.bn, .splits = l.splits, .chunk = l.splits > 1 ? l.chunk : g->nk,
                   .merge_block = l.merge_block, .items = g->batch_heads, .rows = g->nq, .pack = 1};
    return true;
}

/* The templates: per (item, Q tile) the Q tile once, then K and V tiles up
 * to the causal limit of the tile's last query (rows past Nk not loaded;
 * a packed tile that wraps to the next head holds query Nq - 1), the mask
 * at every in-range score of those tiles (one row per K/V tile where the
 * sm_90a mask broadcasts over the queries), O once. Split-KV (tiling
 * "kv_split": keys per split): every (Q tile, split) item loads its Q tile
 * and streams its chunk of keys, and writes f32 partials (O row, max, sum)
 * to the scratch instead of O; a second launch, NAME_merge (merge_block
 * threads per query row), reads them back and writes O. The scratch is
 * staging: written and re-read across DRAM. */
/* The sm_90a kernel's pipeline (#43; docs/kernelplan.md "The sm_90a
 * attention's pipeline"), in SM clocks per K/V tile of a block — both
 * consumer groups, each 64 query rows:
 *  - tensor: consumers x 4·64·BN·d flops (S = Q K^T and O += P V) at the
 *    fraction of the dense peak cuBLAS sustained on the H200's GEMMs
 *    (757-803 of 989 TF, docs/performance.md): ATT_SM90_TENSOR;
 *  - issue: a scheduler issues for one warp of each consumer group, the
 *    SASS audit's K/V loop a warp: ~4.5 instructions a score a thread
 *    (max, FFMA, ex2, sum, half a pack), d/2 for O's rescale, 5 an HGMMA
 *    (its descriptors and waits), 60 more (rings, turns, loop), and 3 a
 *    score where a mask tile is read into S;
 *  - L2: the K and V tile (and a mask tile) at the SM's share of the L2's
 *    bandwidth (the target's l2_gbps); half the K and V tile with 2-block
 *    clusters (each block's half multicast into both).
 * The tile takes the longest of the three. A K tile is loaded once S of
 * the tile two back has landed, a V tile once P V two back retired (the
 * two-stage rings): about ATT_SM90_LEAD tiles ahead of its use, so of a
 * load's latency (ATT_SM90_LOAD_CLK) and transfer what that lead does not
 * cover is exposed. An item
 * adds ATT_SM90_ITEM_TILES tiles: its first S and softmax with nothing
 * under them, its last P V alone and the epilogue (the next item's Q and
 * K0 load under it). The persistent blocks walk the items (longest
 * first where causal): the makespan of the plan's scheduler, static or
 * dynamic, simulated over the items (launch_sm90.c; past 2^21 items the
 * mean work a block, or the longest item where that is longer), plus one
 * load latency at the start. */
#define ATT_SM90_TENSOR 0.78
#define ATT_SM90_LOAD_CLK 1000.0
#define ATT_SM90_LEAD 1.5
#define ATT_SM90_ITEM_TILES MCIR_ATT_SM90_ITEM_TILES

static double att_sm90_pipeline_us(const cost_ctx *x, const mcir_attention_sm90 *l, const char *unit, bool mask_rows,
                                   bool mask_row, double tiles, double work_items, double longest_tiles,
                                   mcir_kernel_cost *c) {
    const mcir_target *t = x->t;
    double clk_us = t->clock_ghz * 1e3;   /* SM clocks a microsecond */
    double per_clk = peak_tflops(t, unit) * 1e6 / ((double)t->sm_count * clk_us);
    double bn = (double)l->bn, d = (double)l->d, cons = (double)l->consumers;
    double tensor = cons * 4.0 * 64.0 * bn * d / per_clk / ATT_SM90_TENSOR;
    double n_tile = 4.5 * bn / 2 + d / 2 + 5.0 * (d / 16 + bn / 16) + 60 + (mask_rows || mask_row ? 3.0 * bn / 2 : 0);
    double issue = cons * n_tile;
    double dp = (double)((l->d + 63) / 64 * 64);   /* the TMA's 64-column boxes (d 96: 128, half zeros) */
    /* (2-block clusters: each block reads half of the K and V tile from the
     * L2, the multicast delivers the whole) */
    double bytes = 2.0 * bn * dp * 2 / (l->cluster > 1 ? (double)l->cluster : 1.0) +
                   (mask_rows ? cons * 64.0 * bn * l->mask_esize : mask_row ? bn * l->mask_esize : 0);
    double l2_per_clk = t->l2_gbps > 0 ? t->l2_gbps * 1e3 / ((double)t->sm_count * clk_us) : 0;
    double l2 = l2_per_clk > 0 ? bytes / l2_per_clk : 0;
    double tile = tensor > issue ? tensor : issue;
    if (l2 > tile) tile = l2;
    double exposed = ATT_SM90_LOAD_CLK + l2 - ATT_SM90_LEAD * tile;
    if (exposed < 0) exposed = 0;
    double blocks = work_items < (double)t->sm_count ? work_items : (double)t->sm_count;
    if (blocks < 1) blocks = 1;
    double per_tile = tile + exposed;
    double mean = (tiles + ATT_SM90_ITEM_TILES * work_items) * per_tile / blocks;
    double longest = (longest_tiles + ATT_SM90_ITEM_TILES) * per_tile;
    /* the scheduler's makespan where the layout simulated it (static
     * snake or dynamic claims: the items in their order, each block's sum) */
    double span = l->dynamic ? l->dynamic_tiles : l->static_tiles;
    if (span > 0) mean = span * per_tile, longest = 0;
    c->tile_tensor_clk = tensor;
    c->tile_issue_clk = issue;
    c->tile_l2_clk = l2;
    c->tile_clk = tile;
    c->tile_exposed_clk = exposed;
    c->items_per_block = work_items / blocks;
    return ((mean > longest ? mean : longest) + ATT_SM90_LOAD_CLK) / clk_us;
}

static void cost_attention(cost_ctx *x) {
    const mcir_kernel_plan *k = x->k;
    const mcir_node *n = k->anchor;
    const mcir_tensor *Q = n->inputs[0], *K = n->inputs[1], *V = n->inputs[2];
    const mcir_tensor *M = n->n_inputs > 3 ? n->inputs[3] : NULL;
    const mcir_tiling *ti = x->o && x->o->tiles ? x->o->tiles : &k->tiling;
    mcir_attention_problem g;
    att_run l;
    if (!mcir_attention_problem_of(k, &g) || !attention_run(x, ti, &g, &l)) {
        simple_kernel(x, (double)(reads_bytes(k) + writes_bytes(k)), 0);   /* no kernel realises it */
        return;
    }
    int64_t NQ = g.nq, NK = g.nk, D = g.d, DV = g.dv, NR = l.rows;
    int64_t bm = l.bm, bn = l.bn, splits = l.splits, chunk = splits > 1 ? l.chunk : NK;
    bool causal = mcir_node_bool(n, "causal");
    double kv_rows = 0, scores = 0;   /* per item, summed over Q tiles and splits */
    double longest_tiles = 0;         /* the longest work item's K/V tiles */
    double tiles = 0;                 /* every work item's K/V tiles, per leading item */
    int64_t qtiles = (NR + bm - 1) / bm;
    for (int64_t r0 = 0; r0 < NR; r0 += bm) {
        int64_t rows = NR - r0 < bm ? NR - r0 : bm, kv_end = NK;
        if (causal) {
            int64_t last = r0 + bm - 1 < NR - 1 ? r0 + bm - 1 : NR - 1;
            int64_t qmax = l.pack > 1 && last / NQ != r0 / NQ ? NQ - 1 : last % NQ;
            int64_t lim = qmax + (NK - NQ) + 1;
            if (lim < kv_end) kv_end = lim;
        }
        for (int64_t s = 0; s < splits; s++) {
            int64_t b0 = s * chunk, e = kv_end < b0 + chunk ? kv_end : b0 + chunk;
            int64_t loaded = e <= b0 ? (l.sm90 ? bn : 0) : (e - b0 + bn - 1) / bn * bn;
            if (b0 + loaded > NK) loaded = NK - b0;
            double tl = (double)((loaded + bn - 1) / bn);
            if (tl > longest_tiles) longest_tiles = tl;
            tiles += tl;
            kv_rows += (double)loaded;
            scores += (double)rows * (double)loaded;
        }
    }
    double items = (double)l.items, rows_all = items * (double)NR;
    double out = splits > 1 ? rows_all * (double)splits * (double)(DV + 2) * 4.0   /* the partials */
                            : rows_all * (double)DV * (double)esize(k->writes[0]);
    double global = items * ((double)splits * (double)(NR * D * esize(Q)) +
                             kv_rows * (double)(D * esize(K) + DV * esize(V))) + out;
    if (M) global += items * (l.mask_one_row ? kv_rows : scores) * (double)esize(M);
    double flops = items * scores * 2.0 * (double)(D + DV);
    mcir_kernel_cost *c = x->c;
    /* an item's K and V are re-read by every Q tile of that item; blocks
     * run item by item, so that is the span the L2 must hold */
    c->l2_spill_bytes = l2_spill(x->t, (double)(NK * (D * esize(K) + DV * esize(V))), qtiles, l.items);
    const char *unit = g.mma ? tensor_unit(Q->dtype) : "f32_fma";
    /* the compute the launch is timed by: the sm_90a kernel by its
     * pipeline (as the fraction of the peak that time means); other paths
     * at the peak */
    double rate = 1.0, timed = flops;
    if (l.sm90 && g.mma) {
        mcir_attention_sm90 s9;
        const char *why;
        if (mcir_attention_sm90_layout(x->t, k, &s9, &why)) {
            double us = att_sm90_pipeline_us(x, &s9, unit, s9.mask == MCIR_SM90_MASK_ROWS,
                                             s9.mask == MCIR_SM90_MASK_ONE_ROW, items * tiles,
                                             items * (double)qtiles * (double)splits, longest_tiles, x->c);
            if (us > 0) rate = flops / (us * peak_tflops(x->t, unit) * 1e6);
        }
    }
    if (splits == 1) {
        c->global_bytes = (int64_t)global;
        c->flops = flops;
        c->hbm_bytes = reads_bytes(k) + writes_bytes(k) + c->l2_spill_bytes;
        add_launch_at(x, (double)c->hbm_bytes, timed, unit, rate);
        return;
    }
    /* the merge (tpl_attention.c): per query row every thread reads each
     * split's max (twice) and sum, then per output column each split's
     * max and O partial; O written once */
    double mt = (double)l.merge_block, sp = (double)splits, scratch = out;
    double merge_global = rows_all * (mt * 3.0 * sp * 4.0 + (double)DV * sp * 8.0 +
                                      (double)DV * (double)esize(k->writes[0]));
    double merge_flops = rows_all * sp * (2.0 * (double)DV + 3.0);
    c->global_bytes = (int64_t)(global + merge_global);
    c->flops = flops + merge_flops;
    c->staging_bytes = (int64_t)(2.0 * scratch);
    c->hbm_bytes = reads_bytes(k) + writes_bytes(k) + c->staging_bytes + c->l2_spill_bytes;
    add_launch_at(x, (double)(reads_bytes(k) + c->l2_spill_bytes) + scratch, timed, unit, rate);
    add_launch(x, scratch + (double)writes_bytes(k), merge_flops, "f32_fma");
}

/* ------------------------------------------------------------- matmul */

/* The stored operand behind a matmul input for cuBLAS (mirrors
 * tpl_matmul.c gemm_operand): a kernel read, or the read behind a folded
 * last-two-dims transpose. */
static const mcir_tensor *gemm_operand(const mcir_kernel_plan *k, const mcir_tensor *t) {
    if (read_index(k, t) >= 0) return t;
    mcir_node *n = region_producer(k, t);
    if (!n || n->op != MCIR_OP_TRANSPOSE || read_index(k, n->inputs[0]) < 0) return NULL;
    const int64_t *perm;
    int r = mcir_node_ints(n, "perm", &perm);
    if (r < 2) return NULL;
    for (int i = 0; i < r - 2; i++)
        if (perm[i] != i) return NULL;
    if (perm[r - 2] != r - 1 || perm[r - 1] != r - 2) return NULL;
    return n->inputs[0];
}

/* mirrors tpl_matmul.c uniform_stride: batch dims the output's, or none */
static bool uniform_batch(const mcir_tensor *t, const mcir_tensor *out) {
    int rl = out->rank - 2, tl = t->rank - 2;
    int64_t tb = 1;
    for (int i = 0; i < tl; i++) tb *= t->shape[i];
    if (tb == 1) return true;
    if (tl != rl) return false;
    for (int i = 0; i < tl; i++)
        if (t->shape[i] != out->shape[i]) return false;
    return true;
}

/* How the runtime runs a MATMUL kernel (mirrors cg_gen_matmul): 0 the
 * generated kernel (epilogue in registers), 1 cuBLAS writing C, 3 one
 * cuBLASLt call computing the epilogue (mcir_kernel_gemm_epilogue), 2
 * where cuBLASLt is not used (absent: `no_cublaslt`, or its bias or
 * residual is not a plain read) cuBLAS into an f32 staging buffer, then
 * the generated NAME_epilogue kernel. */
static int matmul_path(const mcir_kernel_plan *k, bool no_cublaslt, const mcir_tensor **sa,
                       const mcir_tensor **sb) {
    const mcir_node *n = k->anchor;
    const mcir_tensor *A = n->inputs[0], *B = n->inputs[1], *C = n->outputs[0];
    *sa = gemm_operand(k, A);
    *sb = gemm_operand(k, B);
    if (!*sa || !*sb || !uniform_batch(*sa, C) || !uniform_batch(*sb, C) ||
        (*sa)->dtype != (*sb)->dtype)
        return 0;
    bool bare = k->n_writes == 1 && write_index(k, C) >= 0;
    for (int i = 0; i < k->n_nodes && bare; i++) {
        const mcir_node *r = k->nodes[i];
        bare = r == n || (r->op == MCIR_OP_TRANSPOSE && (r->inputs[0] == *sa || r->inputs[0] == *sb));
    }
    if (bare && (*sa)->dtype != C->dtype) return 0;
    int64_t lim = (int64_t)1 << 31;
    int64_t M = C->shape[C->rank - 2], N = C->shape[C->rank - 1];
    int64_t Kd = mcir_node_bool(n, "transpose_a") ? A->shape[A->rank - 2] : A->shape[A->rank - 1];
    if (M >= lim || N >= lim || Kd >= lim || mcir_tensor_numel(C) / (M * N > 0 ? M * N : 1) >= lim)
        return 0;
    if (bare) return 1;
    /* an epilogue cuBLASLt computes in the same call: one launch, nothing
     * staged; any other runs in the generated kernel (codegen/tpl_matmul.c) */
    mcir_gemm_epilogue le;
    if (!mcir_kernel_gemm_epilogue(k, &le)) return 0;
    bool lt = !no_cublaslt && write_index(k, le.out) >= 0 &&
              (!le.bias || read_index(k, le.bias) >= 0) &&
              (!le.residual || read_index(k, le.residual) >= 0);
    return lt ? 3 : 2;
}

/* The generated GEMM (templates/matmul.cuh) running tile ti as the
 * launch model lays it out (mcir_gemm_layout_of): work items of
 * BLOCK_M x BLOCK_N run in waves of blocks_per_sm x SMs; an SM's mma
 * (or FMA) throughput scales with its resident warps up to 8 (two per
 * scheduler keep the pipes issuing), and each block also pays its
 * shared-memory cycles (warp-wide fragment loads and tile stores, one
 * wavefront each) at one per SM clock. The clock is the tensor-core peak
 * over the SMs' dense f16 rate per clock (2048 flops, 4096 with wgmma;
 * mma.sync reaches half of Hopper's). Returns the compute time in us and
 * fills waves, blocks_per_sm and smem_us; < 0 when ti is not a tile the
 * template realises (then the caller's roofline applies). */
/* The sm_80-class mainloop (MM_ASYNC: cp.async ring, ldmatrix, mma.sync;
 * docs/kernelplan.md "The sm_80 GEMM mainloop"). GEMM_SM80_ATTAINABLE: the
 * fraction of the dense f16 tensor-core peak a pipelined mma.sync GEMM
 * sustains in its mainloop once loads are hidden — published hand-written
 * mma.sync m16n8k16 + cp.async multi-stage HGEMMs on an L20 (sm_89, 119.5
 * TF dense f16) reach 105-113 TF, 0.88-0.95 of peak, with cuBLAS at
 * 105-115 TF (github.com/DefTruth/CUDA-Learn-Notes, hgemm/README.md); we
 * take the low end, for a template without block swizzling or register
 * double-buffering of fragments. GEMM_SM80_LOAD_CYCLES: SM cycles from
 * issuing a tile's cp.async to its landing, DRAM under load (a model
 * parameter of the order A100 microbenchmarks report; not measured here). */
#define GEMM_SM80_ATTAINABLE 0.88
#define GEMM_SM80_LOAD_CYCLES 600.0

static double gemm_schedule(cost_ctx *x, const mcir_tiling *ti) {
    const mcir_target *t = x->t;
    mcir_gemm_problem g;
    mcir_gemm_layout l;
    if (tile_dim(ti, "wg") > 0) {   /* the sm_90a GEMM (launch_gemm_sm90.c): its own model */
        mcir_gemm_sm90 s;
        if (!mcir_gemm_sm90_layout(t, x->k, &s, NULL)) return -1;
        x->c->waves = (double)s.items / (double)t->sm_count;
        x->c->blocks_per_sm = 1;
        x->c->smem_us = 0;
        /* the mainloop, then the epilogue beyond a plain store (not overlapped) */
        return mcir_gemm_sm90_compute_us(t, &s) + mcir_gemm_sm90_epilogue_us(t, &s);
    }
    if (!mcir_gemm_problem_of(x->k, &g) || !mcir_gemm_layout_of(t, &g, ti, &l, NULL)) return -1;
    double tc = g.dtype == MCIR_DTYPE_BF16 ? t->bf16_tc_tflops : t->f16_tc_tflops;
    double clock_per_us = tc * 1e6 / ((double)t->sm_count * (t->has_wgmma ? 4096.0 : 2048.0));
    double peak = g.mma ? tc * (t->has_wgmma ? 0.5 : 1.0) : t->f32_fma_tflops;
    double sm_peak = peak * 1e6 / (double)t->sm_count;   /* flop/us per SM */
    int64_t kpad = (g.k + l.bk - 1) / l.bk * l.bk;
    double block_flops = 2.0 * (double)(l.bm * l.bn) * (double)kpad;
    double frag = g.mma ? (double)l.warps * (l.tm * 4 + l.tn * 2) * (double)(kpad / 16)
                        : (double)l.warps * (l.tm + l.tn) * (double)kpad;
    /* tile stores: 2 bytes a lane (64 B a wavefront) staged element by
     * element, 16 bytes a lane (128 B a wavefront) by cp.async */
    double block_smem = frag + (double)((l.bm + l.bn) * kpad) / (l.async ? 64.0 : 32.0);   /* wavefronts */
    int64_t items = g.batch * ((g.m + l.bm - 1) / l.bm) * ((g.n + l.bn - 1) / l.bn);
    int64_t slots = (int64_t)t->sm_count * l.blocks_per_sm;
    int64_t full = items / slots, rem = items % slots;
    double us = 0, smem_us = 0;
    for (int w = 0; w < 2; w++) {
        int64_t per_sm = w == 0 ? l.blocks_per_sm : (rem + t->sm_count - 1) / t->sm_count;
        double times = w == 0 ? (double)full : rem > 0 ? 1.0 : 0.0;
        if (times == 0 || per_sm == 0) continue;
        double eff = (double)(per_sm * l.warps) / 8.0;
        if (eff > 1) eff = 1;
        double comp = (double)per_sm * block_flops / (sm_peak * eff);
        if (l.async) {
            /* the cp.async ring: a K step of the SM's resident blocks takes
             * its mma time, but at least the load latency over the tiles in
             * flight (STAGES - 1 per block), and the mainloop reaches
             * GEMM_SM80_ATTAINABLE of the tensor cores' peak */
            double step = comp / (double)(kpad / l.bk);
            double lat = GEMM_SM80_LOAD_CYCLES / clock_per_us / (double)(l.stages - 1);
            comp = (double)(kpad / l.bk) * (step > lat ? step : lat) / GEMM_SM80_ATTAINABLE;
        }
        double sm = (double)per_sm * block_smem / clock_per_us;
        us += times * (comp > sm ? comp : sm);
        smem_us += times * sm;
    }
    x->c->waves = (double)items / (double)slots;
    x->c->blocks_per_sm = l.blocks_per_sm;
    x->c->smem_us = smem_us;
    return us;
}

static void cost_matmul(cost_ctx *x) {
    const mcir_kernel_plan *k = x->k;
    mcir_kernel_cost *c = x->c;
    const mcir_node *n = k->anchor;
    const mcir_tensor *A = n->inputs[0], *B = n->inputs[1], *C = n->outputs[0];
    /* M, N, K as the template sees them: a rank-1 A is the row [1, K], a
     * rank-1 B the column [K, 1] (mcir_gemm_problem_of, cg_gen_matmul) */
    mcir_gemm_problem gp;
    if (!mcir_gemm_problem_of(k, &gp)) {
        simple_kernel(x, (double)(reads_bytes(k) + writes_bytes(k)), 0);
        return;
    }
    int64_t M = gp.m, N = gp.n, Kd = gp.k;
    int64_t MN = M * N > 0 ? M * N : 1, batch = mcir_tensor_numel(C) / MN;
    double mnk = (double)batch * (double)M * (double)N * (double)Kd;
    const mcir_tensor *sa = NULL, *sb = NULL;
    /* rank-1 operands stay with the generated kernel (cg_gen_matmul) */
    bool rank1 = A->rank < 2 || B->rank < 2 || C->rank < 2;
    int path = (x->o && x->o->generated_only) || rank1
                   ? 0 : matmul_path(k, x->o && x->o->no_cublaslt, &sa, &sb);
    const mcir_tiling *ti = x->o && x->o->tiles ? x->o->tiles : &k->tiling;
    /* tiles: the plan's (or a candidate's), which the generated kernel
     * realises; cuBLAS's own are modelled as the same */
    int64_t bm = tile_dim(ti, "M"), bn = tile_dim(ti, "N");
    if (bm < 1) bm = 64;
    if (bn < 1) bn = 64;
    int64_t tm = (M + bm - 1) / bm, tn = (N + bn - 1) / bn;
    elem_cost ea, eb;
    if (path) {
        ea = (elem_cost){(double)esize(sa), 0};
        eb = (elem_cost){(double)esize(sb), 0};
    } else {
        ea = chain_cost(k, A, C, 0);
        eb = chain_cost(k, B, C, 0);
    }
    /* A is re-read by every column of tiles, B by every row; tiles run
     * with N fastest, so an A panel (bm x K) is reused at once while all
     * of B must stay in L2 from one row of tiles to the next */
    /* the sm_90a GEMM in clusters of 2 along M: B's tile multicast, read
     * from L2 once per pair of M tiles (launch_gemm_sm90.c) */
    const int64_t cl = !path && tile_dim(ti, "wg") > 0 && tile_dim(ti, "cluster") > 1 ? tile_dim(ti, "cluster") : 1;
    double loads = (double)batch * ((double)(M * Kd) * (double)tn * ea.bytes +
                                    (double)(Kd * N) * (double)((tm + cl - 1) / cl) * eb.bytes);
    /* B's panels are read once per pair of M tiles in a cluster; and where
     * the sm_90a grid is one wave (a block an SM, every tile at once,
     * walking K together), each panel's readers share its reads: nothing
     * crosses DRAM twice */
    const int64_t slots = x->t->sm_count / cl * cl;
    const bool one_wave = !path && tile_dim(ti, "wg") > 0 && slots > 0 &&
                          batch * ((tm + cl - 1) / cl * cl) * tn <= slots;
    c->l2_spill_bytes = one_wave ? 0
                                 : l2_spill(x->t, (double)(bm * Kd) * ea.bytes, tn, batch * tm) +
                                       l2_spill(x->t, (double)(Kd * N) * eb.bytes, (tm + cl - 1) / cl, batch);
    if (path) {
        /* the library rasterises its tiles in bands of rows whose A panels
         * fill half of L2, so B crosses DRAM once per band, not per row of
         * tiles (cuBLAS ran 8192^3 at 79 % of peak on an H200, compute
         * bound; the plan's tiles would have spilt 16 GB of B) */
        int64_t band = (int64_t)((double)x->t->l2_bytes / 2.0 / ((double)Kd * ea.bytes));
        if (band < 1) band = 1;
        c->l2_spill_bytes = l2_spill(x->t, (double)(Kd * N) * eb.bytes, (M + band - 1) / band, batch);
    } else if (tile_dim(ti, "wg") > 0 && tile_dim(ti, "group_m") > 1) {
        /* the sm_90a GEMM's grouped order (launch_gemm_sm90.c, gm_item_of):
         * bands of group_m M tiles, each walking every N tile while its A
         * panels stay in L2, so B crosses DRAM once per band */
        int64_t gm = tile_dim(ti, "group_m") * cl;   /* cluster 2: bands of group_m pairs */
        c->l2_spill_bytes = l2_spill(x->t, (double)(Kd * N) * eb.bytes, (tm + gm - 1) / gm, batch);
        /* where no band's wave fits half the L2 (group_m_of took the one
         * touching the fewest bytes), the band's A panels do not stay while
         * its waves walk the N tiles: A crosses DRAM once a wave of the band */
        mcir_gemm_sm90 s;
        if (mcir_gemm_sm90_layout(x->t, k, &s, NULL) && s.wave_bytes > (double)x->t->l2_bytes / 2 && s.grid > 0) {
            const int64_t bands = (tm + gm - 1) / gm, band_waves = (gm * tn + s.grid - 1) / s.grid;
            c->l2_spill_bytes += (int64_t)((double)(band_waves - 1) * (double)(gm * bm * Kd) * ea.bytes *
                                           (double)bands * (double)batch);
        }
    }
    double flops = 2.0 * mnk + (double)batch * (double)(M * Kd) * (double)tn * ea.flops +
                   (double)batch * (double)(Kd * N) * (double)tm * eb.flops;
    elem_cost epi = epilogue_cost(k, C);
    /* the epilogue runs per output element: a paired epilogue's output is
     * half the product (one element per (gate, up) pair) */
    double outs = (double)batch * (double)MN / (gp.glu ? 2.0 : 1.0);
    int64_t once = reads_bytes(k) + writes_bytes(k);
    if (path == 0) {
        c->global_bytes = (int64_t)(loads + outs * epi.bytes);
        c->flops = flops + outs * epi.flops;
        c->hbm_bytes = once + c->l2_spill_bytes;
        double sched = gemm_schedule(x, ti);
        mcir_gemm_problem g;
        bool mma = mcir_gemm_problem_of(k, &g) && g.mma;
        if (sched < 0) {
            add_launch(x, (double)c->hbm_bytes, c->flops, mma ? tensor_unit(A->dtype) : "f32_fma");
            return;
        }
        /* the GEMM's schedule, then the chains' flops on the FMA units (the
         * sm_90a GEMM's schedule holds its prologue, at its measured rate,
         * and its epilogue, by its instruction mix) */
        double chain_us = tile_dim(ti, "wg") > 0 ? 0 : (c->flops - 2.0 * mnk) / (x->t->f32_fma_tflops * 1e6);
        double mem = (double)c->hbm_bytes / (x->t->dram_gbps * 1e3), comp = sched + chain_us;
        c->memory_us = mem;
        c->compute_us = comp;
        c->launch_us = x->t->launch_us;
        c->modelled_us = (mem > comp ? mem : comp) + x->t->launch_us;
        c->launches = 1;
        c->unit = mma ? tensor_unit(A->dtype) : "f32_fma";
        return;
    }
    c->library = path == 3 ? "cublasLt" : "cublas";
    const char *unit = tensor_unit(sa->dtype);
    /* the library at the fraction of the tensor cores' peak it sustains
     * (measured on Hopper in f16 / bf16; f32 GEMMs on the FMA pipes keep
     * the peak: not measured) */
    double lib = sa->dtype == MCIR_DTYPE_F16 || sa->dtype == MCIR_DTYPE_BF16 ? mcir_gemm_library_fraction(x->t) : 1.0;
    if (path == 3) {
        c->global_bytes = (int64_t)(loads + outs * epi.bytes);   /* epi: loads + stores */
        c->flops = 2.0 * mnk + outs * epi.flops;
        c->hbm_bytes = once + c->l2_spill_bytes;
        add_launch_at(x, (double)c->hbm_bytes, c->flops, unit, lib);
        return;
    }
    if (path == 1) {
        c->global_bytes = (int64_t)(loads + outs * (double)esize(C));
        c->flops = 2.0 * mnk;
        c->hbm_bytes = once + c->l2_spill_bytes;
        add_launch_at(x, (double)c->hbm_bytes, c->flops, unit, lib);
        return;
    }
    /* cuBLAS writes the f32 product, the epilogue kernel re-reads it */
    double staged = outs * 4.0;
    int64_t ab = touched_bytes(k, sa) + (sb != sa ? touched_bytes(k, sb) : 0);
    c->staging_bytes = (int64_t)(2 * staged);
    c->global_bytes = (int64_t)(loads + staged + outs * (4.0 + epi.bytes));
    c->flops = 2.0 * mnk + outs * epi.flops;
    c->hbm_bytes = once + c->staging_bytes + c->l2_spill_bytes;
    add_launch_at(x, (double)(ab + c->l2_spill_bytes) + staged, 2.0 * mnk, unit, lib);
    add_launch(x, (double)(once - ab) + staged, outs * epi.flops, "f32_fma");
}

/* -------------------------------------------------------- collectives */

/* NCCL's ring algorithms over `ranks` GPUs on the target's link: each rank
 * sends (and receives) 2(R-1)/R of the tensor for an all_reduce, (R-1)/R
 * of the whole for an all_gather or a reduce_scatter, at the link's
 * bandwidth per direction, plus MCIR_COLLECTIVE_STEP_US a ring step
 * (2(R-1) or R-1 steps). Reads and writes of its buffers count as HBM. */
#define MCIR_COLLECTIVE_STEP_US 2.0

void mcir_cost_collective(const mcir_kernel_plan *k, const mcir_target *t, double *link_bytes, double *us) {
    const mcir_node *n = k->anchor;
    int R = k->ranks > 1 ? k->ranks : 1;
    double in = (double)mcir_tensor_bytes(n->inputs[0]), out = (double)mcir_tensor_bytes(n->outputs[0]);
    double moved = 0, steps = 0;
    if (R > 1) {
        if (n->op == MCIR_OP_ALL_REDUCE) {
            moved = 2.0 * (R - 1) / R * in;
            steps = 2.0 * (R - 1);
        } else {
            moved = (double)(R - 1) / R * (n->op == MCIR_OP_ALL_GATHER ? out : in);
            steps = R - 1;
        }
    }
    *link_bytes = moved;
    *us = R > 1 ? steps * MCIR_COLLECTIVE_STEP_US + (t->link_gbps > 0 ? moved / (t->link_gbps * 1e3) : 0) : 0;
}

static void cost_collective(cost_ctx *x) {
    double link, us;
    mcir_cost_collective(x->k, x->t, &link, &us);
    const mcir_node *n = x->k->anchor;
    mcir_kernel_cost *c = x->c;
    int64_t io = mcir_tensor_bytes(n->inputs[0]) + mcir_tensor_bytes(n->outputs[0]);
    c->hbm_bytes = c->global_bytes = io;
    c->launches = 1;
    c->library = "nccl";
    c->memory_us = (double)io / (x->t->dram_gbps * 1e3);
    c->launch_us = x->t->launch_us;
    /* with one rank: a device-to-device copy */
    c->modelled_us = x->k->ranks > 1 ? us + c->launch_us : c->memory_us + c->launch_us;
}

/* ------------------------------------------------------------- driver */

typedef void (*cost_fn)(cost_ctx *x);

static const cost_fn cost_fns[MCIR_TEMPLATE_COUNT] = {
    [MCIR_TEMPLATE_MATMUL] = cost_matmul,
    [MCIR_TEMPLATE_STREAMING_ATTENTION] = cost_attention,
    [MCIR_TEMPLATE_STREAMING_NORM] = cost_norm,
    [MCIR_TEMPLATE_ELEMENTWISE] = cost_pointwise,
    [MCIR_TEMPLATE_REDUCE] = cost_reduce,
    [MCIR_TEMPLATE_COPY] = cost_pointwise,
    [MCIR_TEMPLATE_POOL] = cost_pool,
    [MCIR_TEMPLATE_CONV2D] = cost_conv2d,
    [MCIR_TEMPLATE_COLLECTIVE] = cost_collective,
};

void mcir_cost_kernel(const mcir_kernel_plan *k, const mcir_target *t,
                      const mcir_cost_options *options, mcir_kernel_cost *out) {
    memset(out, 0, sizeof *out);
    out->unit = "f32_fma";
    cost_ctx x = {.k = k, .t = t, .o = options, .c = out};
    if (!cost_fns[k->tpl] || (!k->anchor && k->tpl != MCIR_TEMPLATE_ELEMENTWISE &&
                              k->tpl != MCIR_TEMPLATE_COPY))
        return;   /* an alias: no kernel, no bytes */
    cost_fns[k->tpl](&x);
}

void mcir_cost_plan(const mcir_plan *p, mcir_plan_cost *out) {
    memset(out, 0, sizeof *out);
    const mcir_graph *g = p->graph;
    /* two streams (ranks): the kernels' clock, the collectives', and when
     * each tensor a collective writes is ready */
    bool two = g->ranks > 1;
    double kern = 0, coll = 0;
    double *ready = two ? calloc((size_t)g->n_tensors + 1, sizeof *ready) : NULL;
    for (int i = 0; i < p->n_kernels; i++) {
        const mcir_kernel_plan *k = &p->kernels[i];
        mcir_kernel_cost c;
        mcir_cost_kernel(k, p->target, NULL, &c);
        out->launches += c.launches;
        out->hbm_bytes += c.hbm_bytes;
        out->global_bytes += c.global_bytes;
        out->flops += c.flops;
        out->modelled_us += c.modelled_us;
        out->issue_bound += c.issue_us > c.memory_us && c.issue_us > c.compute_us;
        if (!two) continue;
        if (k->tpl == MCIR_TEMPLATE_COLLECTIVE) {
            coll = (coll > kern ? coll : kern) + c.modelled_us;
            ready[p->alias_root[k->anchor->outputs[0]->id]->id] = coll;
            continue;
        }
        for (int j = 0; j < k->n_reads; j++) {
            double r = ready[p->alias_root[k->reads[j]->id]->id];
            if (r > kern) kern = r;
        }
        kern += c.modelled_us;
    }
    if (two) {
        double span = kern > coll ? kern : coll;
        out->overlap_us = out->modelled_us - span > 1e-9 ? out->modelled_us - span : 0;
        out->modelled_us -= out->overlap_us;
        free(ready);
    }
    /* compulsory: the graph's inputs and weights that some kernel reads,
     * and its outputs, once each */
    unsigned char *seen = calloc((size_t)g->n_tensors + 1, 1);
    MCIR_ASSERT(seen != NULL);
    for (int i = 0; i < p->n_kernels; i++)
        for (int j = 0; j < p->kernels[i].n_reads; j++) {
            const mcir_tensor *r = p->alias_root[p->kernels[i].reads[j]->id];
            if ((r->kind == MCIR_TENSOR_INPUT || r->kind == MCIR_TENSOR_WEIGHT) && !seen[r->id]) {
                seen[r->id] = 1;
                out->compulsory_bytes += mcir_tensor_bytes(r);
            }
        }
    for (int i = 0; i < g->n_outputs; i++) {
        const mcir_tensor *o = g->outputs[i];
        if (seen[o->id]) continue;
        seen[o->id] = 1;
        out->compulsory_bytes += mcir_tensor_bytes(o);
    }
    free(seen);
    out->unfused_hbm_bytes = p->unfused_hbm_bytes;
}
