/*
 * kernelplan.h — from a rewritten graph to kernels: the partition into
 * fused regions in execution order (KernelPlans), the tile choice per
 * target, liveness over the kernel order, and the memory plan that puts
 * every intermediate into one arena (through the mcir_memplan library).
 *
 *     mcir_plan *p = mcir_plan_build(g, mcir_target_find("sm_90"), trace, &d);
 *     mcir_memplan_build_options mo = {.planner = "best"};   // or NULL options
 *     mcir_memplan *m = mcir_memplan_build(p, &mo, trace, &d);
 *     mcir_plan_write_json(p, stdout);
 *     mcir_memplan_write_json(m, p, stdout);
 *     assert(mcir_memplan_verify(m, &d));
 *     mcir_memplan_free(m); mcir_plan_free(p);
 *
 * A plan borrows the graph: the graph must outlive it and not change.
 *
 * How codegen finds a tensor's bytes: every tensor a kernel names is
 * either a graph input / weight / output (its own allocation), or stored
 * in the arena at mcir_memplan_locate(); reshapes are aliases (the
 * tensor shares the bytes of p->alias_root[t->id]); folded transposes are
 * described by the kernel's read_access / write_access (a permutation and
 * element strides per logical dimension).
 */
#ifndef MCIR_KERNELPLAN_H
#define MCIR_KERNELPLAN_H

#include "memplan/memplan.h"
#include "mcir/mcir.h"
#include "properties/target.h"

/* The kernel templates of codegen/ — one lowering strategy each. */
#define MCIR_TEMPLATES(X)                                                       \
    X(ALIAS, "alias")                       /* reshape: no kernel, same bytes */ \
    X(MATMUL, "matmul")                     /* cuBLAS (+ fused epilogue chain) */ \
    X(STREAMING_ATTENTION, "streaming_attention") /* flash-style online softmax */ \
    X(STREAMING_NORM, "streaming_norm")     /* layernorm/rmsnorm/softmax, one pass */ \
    X(ELEMENTWISE, "elementwise")           /* fused chain, recomputed temps */   \
    X(REDUCE, "reduce")                     /* reduce_sum/mean/max */             \
    X(COPY, "copy")                         /* transpose, slice, concat, split */ \
    X(POOL, "pool")                         /* max/avg pool, global avg pool */   \
    X(CONV2D, "conv2d")                     /* implicit GEMM (+ bias/relu) */    \
    X(COLLECTIVE, "collective")             /* all_reduce / all_gather / reduce_scatter: NCCL */

/* The counters of a dynamic persistent scheduler: the next item to claim
 * and the blocks that finished (two u32), padded to 16 bytes. */
#define MCIR_SCHED_BYTES 16

typedef enum mcir_template {
#define X(id, name) MCIR_TEMPLATE_##id,
    MCIR_TEMPLATES(X)
#undef X
    MCIR_TEMPLATE_COUNT
} mcir_template;

const char *mcir_template_name(mcir_template t);

typedef enum mcir_streaming_state {
    MCIR_STREAM_NONE,
    MCIR_STREAM_SOFTMAX,    /* running max and sum per row (online softmax) */
    MCIR_STREAM_WELFORD,    /* count, mean, M2 per row */
    MCIR_STREAM_SUM_SQUARES /* running sum of squares per row (RMS norm) */
} mcir_streaming_state;

/* "none", "softmax_state", "welford", "sum_squares". */
const char *mcir_streaming_state_name(mcir_streaming_state s);
/* The per-row running values of a state, NULL-terminated
 * ({"running_max", "running_sum", NULL} for softmax_state). */
const char *const *mcir_streaming_state_fields(mcir_streaming_state s);

#define MCIR_MAX_TILE_DIMS 8

typedef struct mcir_tiling {
    int n_dims;
    const char *dim_names[MCIR_MAX_TILE_DIMS];  /* "M", "N", "K" / "q", "kv", "d" / "row", "col" */
    int64_t block_tile[MCIR_MAX_TILE_DIMS];     /* tile extent per dimension */
    int warps;                                  /* warps per block */
    int stages;                                 /* software-pipeline depth */
    int vector_width;                           /* elements per load (1: scalar) */
    int64_t working_set_bytes;                  /* on-chip bytes per block */
    int blocks_per_sm;                          /* occupancy the choice allows */
    int registers_estimate;                     /* per thread, planner's model */
    const char *reason;                         /* why this tile, in words */
} mcir_tiling;

/* The instruction classes the audit counts in a kernel's main loops, in
 * the order plan.json writes them (X(name) per class). */
#define MCIR_MAINLOOP_CLASSES(X) \
    X(mma) X(wgmma) X(ldmatrix) X(cp_async) X(cp_async_bulk) X(ld_global) X(st_global) X(ld_shared) X(st_shared) X(cvt)

/* The MUFU functions the SASS audit counts, in the order plan.json writes
 * them (X(name, SASS spelling after "MUFU.")); `other` takes the rest. */
#define MCIR_SASS_MUFU(X) \
    X(ex2, "EX2") X(rcp, "RCP") X(rsq, "RSQ") X(lg2, "LG2") X(sin, "SIN") X(cos, "COS") X(tanh, "TANH") \
    X(sqrt, "SQRT") X(other, "")
enum {
#define MCIR_SASS_MUFU_ENUM(name, spelling) MCIR_MUFU_##name,
    MCIR_SASS_MUFU(MCIR_SASS_MUFU_ENUM)
#undef MCIR_SASS_MUFU_ENUM
    MCIR_MUFU_COUNT
};

/* Global load / store widths the SASS audit tells apart: 8/16-bit
 * (LDG.E.U8 / .S8 / .U16 / .S16), 32-bit (LDG.E), 64-bit (.64), 128-bit
 * (.128; .256 counts here too). */
enum { MCIR_SASS_NARROW, MCIR_SASS_B32, MCIR_SASS_B64, MCIR_SASS_B128, MCIR_SASS_WIDTHS };

/* The weights of the weighted instructions per 16 bytes (and of the cost
 * model's issue figures, kernelplan/cost.c): a MUFU instruction issues at a
 * quarter of the rate of a plain one (16 lanes a clock an SM against 64)
 * and counts MCIR_SASS_MUFU_WEIGHT; an IEEE division or square root whose
 * slow path is a subroutine call (the FCHK or range test, the branch
 * around the call, the reconvergence, the rare divergent excursion) counts
 * MCIR_SASS_SLOW_PATH_WEIGHT besides its fast path's instructions. */
#define MCIR_SASS_MUFU_WEIGHT 4
#define MCIR_SASS_SLOW_PATH_WEIGHT 10

/* Static counts over some SASS instructions (codegen/sass.c). */
typedef struct mcir_sass_counts {
    int instructions;            /* NOPs (padding) not counted */
    int ldg[MCIR_SASS_WIDTHS], stg[MCIR_SASS_WIDTHS];
    int lds[MCIR_SASS_WIDTHS], sts[MCIR_SASS_WIDTHS];   /* shared memory: LDS / STS by width (not LDSM / STSM) */
    int ldsm, stsm;              /* ldmatrix / stmatrix (LDSM / STSM: a warp's 8 x 8 b16 matrices) */
    int mufu[MCIR_MUFU_COUNT];
    int fchk;                    /* FCHK: an IEEE division's range check */
    int slow_paths;              /* CALL.REL to an IEEE division / reciprocal / sqrt slow-path subroutine */
    int int_div_calls;           /* CALL.REL to a 64-bit integer division / remainder subroutine */
    int calls;                   /* every CALL */
} mcir_sass_counts;

/* The SASS the SM executes: nvdisasm's text of the cubin, the launched
 * entry read (codegen/sass.c; docs/codegen.md "Kernel audit"). */
typedef struct mcir_sass_audit {
    int state;                   /* 0: not asked; 1: read; -1: not available, `why` */
    char why[200];
    mcir_sass_counts kernel;     /* the entry's instructions (its subroutines apart) */
    int subroutine_instructions; /* the slow-path and other subroutines the entry calls */
    int loops;                   /* natural loops of the entry's control-flow graph */
    /* The main loops: the innermost loops holding a global load (for a
     * grid-stride kernel, its row or element loop); `loop` counts one
     * iteration of each, summed, over its hot blocks (a block calling a
     * slow-path subroutine is cold; a divergent-warp fallback, reached by
     * BRA.DIV, is outside the loop) — the calls and FCHKs counted in
     * full. loop_bytes: what its LDG and STG move per lane. */
    int main_loops;
    mcir_sass_counts loop;
    int loop_bytes;
    double per_16b;              /* loop.instructions / (loop_bytes / 16); 0: no main loop */
    double weighted_per_16b;     /* the same with MUFU and slow paths weighted */
    /* Bytes one thread has loaded in the main loop before it first reads a
     * loaded register (its loads in flight), and per SM at the audit's
     * occupancy (blocks_per_sm x threads x that). */
    int inflight_thread_bytes;
    int64_t inflight_sm_bytes;
    /* A memory-bound template's (elementwise, copy, norm, reduce, pool)
     * issue time, weighted_per_16b over the bytes the cost model's loads
     * and stores request (global_bytes / 512 warp vectors), and its memory
     * time (hbm_bytes / dram_gbps); -1 elsewhere. */
    double issue_us, memory_us;
    /* The wgmma loops: the innermost loops holding an HGMMA (an attention's
     * K/V tile loops, a GEMM's k loop), one iteration of each summed over
     * its hot blocks: instructions, HGMMAs and MUFU.EX2, and the EX2 that
     * issue while a wgmma group is still in flight — between a
     * WARPGROUP.DEPBAR.LE gsb0 that leaves groups pending (0x1 ...) and the
     * next that leaves none (0x0): an attention's softmax under its P·V.
     * wgmma_loops_overlapped: the loops with EX2 where every one is. */
    int wgmma_loops, wgmma_loops_overlapped;
    int wgmma_loop_instructions, wgmma_loop_hgmma, wgmma_loop_ex2, wgmma_loop_ex2_overlapped;
    /* An sm_90a attention's tensor-core clocks per K/V tile of one consumer
     * group at the target's peak (S and P·V, 4·64·BN·d flops), and the
     * issue slots a warp of the group takes per tile against them
     * (wgmma_loop_instructions / wgmma_loops / tile_tensor_clocks: a
     * scheduler issues for one warp of each group); 0 elsewhere. */
    double tile_tensor_clocks, tile_issue_ratio;
    /* The loops around the wgmma loops (a persistent kernel's item loop):
     * their hot instructions outside the wgmma loop, once each (the first
     * stage's wait, the epilogue, the stores: what an item costs beside
     * its K loop); item_inner_loops: other loops of more than 8
     * instructions inside them (an epilogue loop not unrolled; not one
     * closed by a try-wait's retry or a TMA store's BRA.U.ANY waterfall),
     * counted once. An sm_90a GEMM's
     * item_tensor_clocks: one consumer group's 64 x BN x K product at the
     * target's peak, and item_issue_ratio = item_instructions /
     * item_tensor_clocks (a scheduler issues for one warp of each group,
     * whose tensor work shares the SM: the same ratio); 0 elsewhere. */
    int item_loops, item_inner_loops, item_instructions;
    double item_tensor_clocks, item_issue_ratio;
    /* Warp-specialised kernels: per USETMAXREG (setmaxnreg.dec / .inc) the
     * register count it sets and the registers the code reachable from it
     * names (the highest + 1); setmaxnreg_over: regions naming more than
     * their count (all of them counted, the first few kept). */
#define MCIR_SASS_MAXNREG_REGIONS 4
    int setmaxnreg_regions, setmaxnreg_over;
    int maxnreg_budget[MCIR_SASS_MAXNREG_REGIONS], maxnreg_used[MCIR_SASS_MAXNREG_REGIONS];
} mcir_sass_audit;

/* What a compiled kernel really uses, from ptxas's report and the PTX
 * (codegen/audit.c; docs/codegen.md "Kernel audit"), and from the SASS
 * (sass, where mcir_codegen_audit_sass read it). */
typedef struct mcir_kernel_audit {
    bool valid;                  /* false: not compiled */
    char entry[64];              /* the compiled function, named by content */
    int shared_by;               /* kernels of the plan sharing that function */
    int registers;               /* per thread */
    int spill_store_bytes, spill_load_bytes;
    int local_bytes;             /* stack frame per thread (local memory) */
    int smem_static_bytes;       /* __shared__ arrays, from ptxas */
    int64_t smem_dynamic_bytes;  /* dynamic shared memory of the launch */
    int threads;                 /* per block */
    int blocks_per_sm;           /* theoretical occupancy from the target table */
    double occupancy;            /* resident warps / the SM's maximum */
    const char *occupancy_limit; /* "registers" | "shared memory" | "warps" | "blocks" */
    /* Instruction classes: static counts in the PTX. */
    int mma, wgmma, ldmatrix, cp_async, cp_async_bulk;
    int ld_global[3], st_global[3];   /* scalar, .v2, .v4 */
    /* The same, over the kernel's main loops only: the innermost PTX loops
     * (a label and a backward branch to it) that hold a matrix instruction
     * or an async copy — a warp-specialised kernel's producer and consumer
     * loops both. loops 0: none found (straight-line code). */
    struct {
        int loops, instructions;
#define MCIR_MAINLOOP_FIELD(name) int name;
        MCIR_MAINLOOP_CLASSES(MCIR_MAINLOOP_FIELD)
#undef MCIR_MAINLOOP_FIELD
    } mainloop;
    /* ptxas's advisories and warnings for the compile unit (C7514 wgmma
     * serialised, C7517 wait injected, ...): each a defect; the first */
    int advisories;
    char advisory[256];
    mcir_sass_audit sass;
} mcir_kernel_audit;

/* How a kernel touches one tensor in global memory. `tensor` holds the
 * bytes (reads[i] / writes[i]); `logical` is the tensor the kernel's
 * nodes name. They differ where a transpose was folded:
 *  - a read through a folded transpose: logical is the transpose's output,
 *    tensor its input, and logical = transpose(tensor, perm);
 *  - a write folded into the producer (attention writing the head-merge
 *    transpose's output directly): logical is the node's output, tensor
 *    the transpose's output.
 * In both cases logical dim k is tensor dim perm[k], and `strides[k]` is
 * the element stride of logical dim k in tensor's (C-order) storage; with
 * nothing folded perm is the identity and strides are C-order strides of
 * logical. tensor's own storage may be an alias (see mcir_plan.alias_root);
 * strides are in tensor's shape either way (reshape keeps C order). */
typedef struct mcir_kernel_access {
    mcir_tensor *tensor;
    mcir_tensor *logical;
    mcir_node *folded;           /* the folded transpose, or NULL */
    int rank;                    /* logical's rank */
    int perm[MCIR_MAX_RANK];
    int64_t strides[MCIR_MAX_RANK];
} mcir_kernel_access;

/* The part of a write a kernel computes where the rest already holds the
 * right bytes: a state output written over its input (graph.json "state",
 * docs/kernelplan.md "State written in place") whose concat copies the
 * input's own rows onto themselves; the kernel computes the rows of the
 * concat's inputs first..last along `axis`, the rest are the input's. */
typedef struct mcir_write_window {
    int axis;                    /* -1: the whole tensor */
    const mcir_node *concat;
    int first, last;
} mcir_write_window;

typedef struct mcir_kernel_plan {
    int id;                      /* position in execution order */
    const char *name;            /* unique, a C identifier: graph name + anchor */
    mcir_template tpl;
    int n_nodes;
    mcir_node **nodes;           /* the fused region incl. folded transposes, topological */
    mcir_node *anchor;           /* the main op (attention, matmul, norm...) */

    /* Tensors read from / written to global memory (region boundary), in
     * order of first use; read_access[i] / write_access[i] describe
     * reads[i] / writes[i]. */
    int n_reads;
    mcir_tensor **reads;
    mcir_kernel_access *read_access;
    int n_writes;
    mcir_tensor **writes;
    mcir_kernel_access *write_access;
    /* NULL, or per write: its window (axis -1: all of it). */
    mcir_write_window *windows;
    /* Intermediates that live only inside the kernel (recomputed or
     * streamed), never written to memory. */
    int n_internal;
    mcir_tensor **internal;

    mcir_tiling tiling;
    /* "none" | "recompute_in_consumer" (fused chains, epilogues: temps in
     * registers) | "stream_tiles" (attention: scores per KV tile, never
     * stored) | "stream_rows" (norms: row statistics in running state). */
    const char *recompute_policy;
    mcir_streaming_state streaming_state;

    /* MATMUL: effective transpose flags of the anchor's operands (the
     * node's transpose_a/_b xor a folded last-two-dims transpose). */
    bool trans_a, trans_b;

    /* The launch, decided at plan time by the launch model (kernelplan/)
     * and realised by codegen exactly (codegen asserts, never changes). */
    int64_t grid[3];
    int block[3];
    int64_t smem_bytes;          /* dynamic shared memory per block */
    int64_t smem_static_bytes;   /* __shared__ arrays of the template, per block */
    int64_t scratch_bytes;       /* workspace in the arena (0: none) */
    /* A dynamic persistent scheduler's counters (0: none): device bytes
     * the runtime keeps for this kernel alone, zeroed once when the run is
     * prepared; the kernel leaves them zero when it finishes (the last
     * block resets them), so launches and graph replays need no memset. */
    int64_t sched_bytes;
    /* Where a library runs the kernel instead of a generated one:
     * "cublas" / "cublasLt" and the operation it is asked for
     * (e.g. "cublasGemmStridedBatchedEx f16 NT, f32 accumulate"); NULL:
     * the generated kernel runs with the launch above. */
    const char *library;
    const char *library_op;
    /* COLLECTIVE: the ranks it spans (the graph's), for the cost model. */
    int ranks;

    /* Filled by codegen after NVRTC (-1: not compiled). */
    int registers;
    int spill_bytes;
    /* Set by codegen: the minimum blocks per SM the kernel's
     * __launch_bounds__ names (0: the thread count alone). The plan's
     * occupancy where ptxas spilled without it and not with it. */
    int launch_min_blocks;
    /* Filled by codegen after NVRTC: the kernel as compiled, and the
     * cuBLAS epilogue kernel of a MATMUL where there is one. */
    mcir_kernel_audit audit, epilogue_audit;
    /* Set by codegen for a graph whose dims range over more than one size
     * (docs/cli.md, "Symbolic dimensions"): 1 where the kernel's code is
     * the same at every size checked (it takes the dims at launch), -1
     * where it is not, with why; 0: not asked. */
    int size_generic;
    const char *not_size_generic;
} mcir_kernel_plan;

typedef struct mcir_plan {
    const mcir_graph *graph;
    const mcir_target *target;
    int n_kernels;
    mcir_kernel_plan *kernels;   /* execution order */
    /* For each tensor id: the kernel that writes it and the last kernel
     * that reads it (-1: none); aliases (reshape) resolve to their root:
     * a root's range covers every alias's readers. */
    int *first_use, *last_use;
    mcir_tensor **alias_root;    /* by tensor id: the tensor owning the bytes */
    /* The nodes lowered to aliases (reshapes, transposes that move only
     * size-1 dims), in graph order: no kernel, no copy. */
    int n_alias_nodes;
    mcir_node **alias_nodes;
    /* The cost model's hbm_bytes of the same graph compiled without
     * rewrites (mcirc/pipeline.c sets it; 0: not known). */
    int64_t unfused_hbm_bytes;
    /* The value chains' transcendentals and divisions in their exact forms
     * (expf, IEEE division, 1/sqrtf: what the reference interpreter
     * computes) in place of the SFU's approximations (mc_exp2, mc_rcp,
     * mc_rsqrt); mcirc --exact-math. The templates' own math (softmax's
     * exp2, a norm's rsqrt) keeps its approximate forms. The cost model
     * prices the approximate forms. */
    bool exact_math;
    mcir_arena *arena;
} mcir_plan;

/* Partitions the graph into kernels and chooses tiles for the target.
 * Appends a "plan" stage record per kernel (and per transpose fold or
 * alias) to trace (may be NULL). Returns NULL, with an error, when the
 * fusion groups cannot be ordered or a tile cannot fit the target. */
mcir_plan *mcir_plan_build(const mcir_graph *g, const mcir_target *target,
                           mcir_trace *trace, mcir_diag *d);
void mcir_plan_free(mcir_plan *p);
/* The plan's invariants, checked apart from the partition code: every
 * live node is in a kernel or an alias, each tensor has one writer, reads
 * come after their writer (through aliases), graph outputs are written,
 * tiles fit the target. Reports each problem. */
bool mcir_plan_verify(const mcir_plan *p, mcir_diag *d);
/* The elements kernel k computes of writes[w] at the graph's current
 * binding: its window's (mcir_write_window), else all of it. */
int64_t mcir_kernel_write_items(const mcir_kernel_plan *k, int w);
/* A window's first row and row count along its axis, as polynomials over
 * the dims; false if they need too many terms. */
bool mcir_write_window_extents(const mcir_write_window *w, mcir_extent *start, mcir_extent *len);
bool mcir_plan_write_json(const mcir_plan *p, FILE *out);
/* A MATMUL kernel's epilogue as one library call can compute it:
 * D = act(op(A)·op(B) + bias + R), the cuBLASLt form (bias a constant [N]
 * vector, act ReLU or tanh-GELU and only without R, R a read of the
 * output's shape and dtype through beta·C), batch 1, operands plain reads
 * (or folded transposes). `code` is cuBLASLt's cublasLtEpilogue_t. */
typedef struct mcir_gemm_epilogue {
    int code;                      /* 1 default, 2 relu, 4 bias, 6 relu+bias, 32 gelu, 36 gelu+bias */
    const mcir_tensor *bias;       /* NULL: none */
    const mcir_tensor *residual;   /* NULL: none (beta 0) */
    const mcir_tensor *out;        /* D: the kernel's one write */
    int64_t rows;                  /* > 0: a batch over shared weights, one GEMM of this many rows */
    const char *why;               /* when it cannot: what breaks the form */
} mcir_gemm_epilogue;

/* True if kernel k is a matmul with a non-empty epilogue of that form
 * (fills e); false with e->why otherwise (a bare matmul too: "no epilogue"). */
bool mcir_kernel_gemm_epilogue(const mcir_kernel_plan *k, mcir_gemm_epilogue *e);

/* The access through which kernel k reads or writes the tensor its nodes
 * call `logical`, or NULL if it is not at the kernel's boundary. */
const mcir_kernel_access *mcir_kernel_access_of(const mcir_kernel_plan *k,
                                                const mcir_tensor *logical);

/* ------------------------------------------------------- GEMM launch model */

/* The GEMM-shaped kernels — MATMUL, and CONV2D as implicit GEMM — run the
 * tile of k->tiling (dims "M", "N", "K", warps, stages) through
 * codegen/templates/matmul.cuh; kernelplan/launch_gemm.c chooses it among
 * candidates scored by mcir_cost_kernel (docs/kernelplan.md "GEMM tiles").
 *
 *     mcir_gemm_problem g;
 *     mcir_gemm_layout l;
 *     if (mcir_gemm_problem_of(k, &g) &&
 *         mcir_gemm_layout_of(t, &g, &k->tiling, &l, NULL)) ... l.smem_bytes
 */
typedef struct mcir_gemm_problem {
    int64_t m, n, k, batch;      /* conv2d: M = N*OH*OW, N = OC/groups, K = C/groups*KH*KW, batch = groups */
    mcir_dtype dtype;            /* operand A's */
    bool mma;                    /* f16/bf16 operands of one dtype: mma.sync m16n8k16, f32 accumulate */
    bool implicit;               /* conv2d: A gathered from the image (im2col index math) */
    int epilogue_ops;            /* nodes fused after the GEMM (bias, activation, residual) */
    bool residual;               /* the epilogue reads a tensor of the output's size (not A or B) */
    bool glu;                    /* the paired epilogue (mcir_kernel_glu): act(gate) * up of each
                                    thread's accumulator pairs, the output n / 2 wide; mma warp
                                    tiles a multiple of 16 columns (both halves of a block of 16) */
    bool trans_b;                /* matmul: B stored [N, K] (transpose_b) */
    bool dynamic;                /* matmul: A, B or C has an extent of a graph dim (the sizes
                                    are the largest; the template checks every bound) */
} mcir_gemm_problem;

typedef struct mcir_gemm_layout {
    int64_t bm, bn, bk;
    int warps, stages, threads;
    int wm, wn;                  /* mma: warp grid (wm * wn == warps); FMA: thread grid 16 x threads/16 */
    int tm, tn;                  /* accumulators per thread: mma m16n8 tiles per warp; FMA outputs */
    bool async;                  /* every mma.sync GEMM: the cp.async ring of 2..4 stages, ldmatrix
                                    fragments (templates/matmul.cuh, MM_ASYNC) */
    int64_t smem_bytes;          /* dynamic shared memory per block */
    int registers;               /* per thread, the model's estimate */
    int blocks_per_sm;           /* occupancy on the target */
    int min_blocks;              /* __launch_bounds__ minimum blocks per SM, the occupancy of
                                    1/4 + 8 more registers than the estimate: ptxas's budget */
    int max_registers;           /* FMA: __maxnreg__, the estimate + 1/10, in place of
                                    min_blocks where NVRTC has it (0 for mma) */
    const char *occupancy_limit; /* "registers" | "shared memory" | "warps" | "blocks" */
} mcir_gemm_layout;

/* The GEMM of kernel k (MATMUL or CONV2D); false for another template. */
bool mcir_gemm_problem_of(const mcir_kernel_plan *k, mcir_gemm_problem *out);
/* How the template realises tile ti for problem g on target t; false, with
 * why (may be NULL), when it cannot (warp grid, shared memory, registers). */
bool mcir_gemm_layout_of(const mcir_target *t, const mcir_gemm_problem *g,
                         const mcir_tiling *ti, mcir_gemm_layout *out, const char **why);
/* ptxas's budget for layout l with `registers` estimated per thread (the
 * FMA tiles' __maxnreg__, the mma tiles' minimum blocks per SM): what
 * mcir_gemm_layout_of sets from its estimate, and codegen of a
 * size-generic kernel from the plan's (the estimate at the largest sizes,
 * so one source serves every size). */
void mcir_gemm_layout_budget(const mcir_target *t, bool mma, int registers, mcir_gemm_layout *l);

/* A tile candidate of a GEMM kernel and the cost model's time for it. */
typedef struct mcir_gemm_candidate {
    mcir_tiling tiling;
    double modelled_us;
} mcir_gemm_candidate;

/* Every legal candidate of kernel k on p->target, best first (at most
 * max; the count of legal ones is returned). */
int mcir_gemm_candidates(const mcir_plan *p, const mcir_kernel_plan *k,
                         mcir_gemm_candidate *out, int max);
/* Gives k the tile ti and the launch that realises it; reason replaces
 * the tiling's (NULL: keep it). false if ti is not legal for k. */
bool mcir_gemm_apply(mcir_plan *p, mcir_kernel_plan *k, const mcir_tiling *ti,
                     const char *reason);

/* ----------------------------------------------------------- tuning cache */

/* Measured winners of the tunable kernels (kernelplan/tune.c): a text
 * file next to the kernel cache, one line per (shape key, arch, driver).
 * `mcirc --tune` times the top candidates and fills it; later compiles
 * apply it (docs/kernelplan.md "Tuning").
 *
 *     mcir_tuning *t = mcir_tuning_load("~/.cache/mcir/tuning.tsv", &d);
 *     mcir_tuning_apply(plan, t, "cuda-13000");   // plan's reasons say "tuned: ..."
 *     mcir_tuning_free(t);
 */
typedef struct mcir_tuning mcir_tuning;

typedef struct mcir_tuning_entry {
    char key[256];               /* mcir_tuning_key */
    char arch[16];               /* "sm_90" */
    char driver[64];             /* the CUDA driver the times come from */
    int64_t bm, bn, bk;
    int warps, stages;
    double measured_us;          /* the winner */
    double model_pick_us;        /* the cost model's pick, measured alike */
} mcir_tuning_entry;

/* A missing file is an empty cache; a malformed line is an error. */
mcir_tuning *mcir_tuning_load(const char *path, mcir_diag *d);
/* Writes the cache back (mcir_outfile: a temporary renamed over it). */
bool mcir_tuning_save(const mcir_tuning *t, mcir_diag *d);
void mcir_tuning_free(mcir_tuning *t);
int mcir_tuning_count(const mcir_tuning *t);
/* The shape key of a tunable kernel (template, dtype, GEMM shape,
 * operand layout, fused ops); false for a kernel that is not tunable. */
bool mcir_tuning_key(const mcir_kernel_plan *k, char *buf, size_t n);
const mcir_tuning_entry *mcir_tuning_find(const mcir_tuning *t, const char *key,
                                          const char *arch, const char *driver);
void mcir_tuning_put(mcir_tuning *t, const mcir_tuning_entry *e);
/* Gives every kernel of p with an entry for (p->target, driver) its
 * measured winner; returns how many kernels changed. */
int mcir_tuning_apply(mcir_plan *p, const mcir_tuning *t, const char *driver);

/* Microseconds kernel `kernel` of p takes with its current tiling; < 0:
 * the measurement failed (why in the timer's own context). */
typedef double (*mcir_kernel_timer)(void *ctx, mcir_plan *p, int kernel);
/* Times the top_n candidates of every tunable kernel of p (the model's
 * pick among them), gives each kernel the fastest and records it in t
 * under driver; log (may be NULL) gets one line per candidate. Returns
 * the kernels tuned, or -1 when the timer failed. */
int mcir_plan_tune(mcir_plan *p, int top_n, mcir_kernel_timer timer, void *ctx,
                   mcir_tuning *t, const char *driver, FILE *log);

/* ------------------------------------------------------------- cost model */

/* The traffic and time of one kernel on a target (kernelplan/cost.c,
 * docs/kernelplan.md "Traffic and cost model"). Bytes follow the code of
 * the template that runs the kernel (codegen/templates, codegen/tpl_*.c),
 * with cuBLAS where the runtime hands the kernel to it. */
typedef struct mcir_kernel_cost {
    int64_t hbm_bytes;       /* crossing DRAM: each tensor read or written once,
                                + staging + l2_spill */
    int64_t global_bytes;    /* loads and stores the threads issue, re-reads included */
    int64_t staging_bytes;   /* part of hbm: cuBLAS's f32 product, written and re-read */
    int64_t l2_spill_bytes;  /* part of hbm: tile re-reads whose reuse span exceeds L2 */
    double flops;            /* FMA = 2 */
    int launches;            /* GPU launches, library calls included */
    const char *library;     /* "cublas", "cublasLt", or NULL: generated kernels only */
    const char *unit;        /* "f32_fma", "f16_tensor_core", "bf16_tensor_core" */
    double memory_us, compute_us, launch_us;
    /* A memory-bound template's (elementwise, copy, reduce, norm) time to
     * issue its instructions: its weighted SASS instructions per 16 bytes
     * (cost.c's table) over the bytes its loads and stores move, at the
     * target's issue rate (mcir_issue_us); 0 where not modelled. */
    double issue_us;
    double modelled_us;      /* sum over launches of max(memory, compute, issue) + launch overhead */
    /* The generated GEMM's schedule (0 elsewhere): waves of blocks over
     * the SMs, blocks resident per SM, and the shared-memory time inside
     * compute_us (fragment and tile traffic at the SMs' bandwidth). */
    double waves;
    int blocks_per_sm;
    double smem_us;
    /* The sm_90a attention's pipeline (0 elsewhere; kernelplan/cost.c):
     * SM clocks per K/V tile of a block — its tensor-core work, the issue
     * slots of a scheduler, the K and V bytes at the SM's share of the L2
     * bandwidth — the tile (the largest) and the load latency it leaves
     * exposed, and the work items each persistent block walks. */
    double tile_tensor_clk, tile_issue_clk, tile_l2_clk, tile_clk, tile_exposed_clk;
    double items_per_block;
} mcir_kernel_cost;

/* A collective kernel's bytes over the links per rank and its modelled
 * time (NCCL's ring on the target's link; 0 with one rank). */
void mcir_cost_collective(const mcir_kernel_plan *k, const mcir_target *t, double *link_bytes, double *us);

typedef struct mcir_cost_options {
    /* Tiles to score instead of those the template realises from the plan
     * (a tuner's candidate): "M"/"N" for matmul, "q"/"kv" for attention.
     * NULL: the kernel's own. */
    const mcir_tiling *tiles;
    /* Model the generated kernel even where the runtime would call cuBLAS
     * (what the CPU emulator runs). */
    bool generated_only;
    /* Model the runtime where only cuBLAS loads (no cuBLASLt): a matmul
     * epilogue stages the f32 product for a generated epilogue kernel. */
    bool no_cublaslt;
} mcir_cost_options;

/* The cost of kernel k on target t; options may be NULL.
 *
 *     mcir_tiling cand = k->tiling; cand.block_tile[0] = 128;
 *     mcir_cost_options o = {.tiles = &cand};
 *     mcir_kernel_cost c;
 *     mcir_cost_kernel(k, p->target, &o, &c);   // c.modelled_us scores it
 */
void mcir_cost_kernel(const mcir_kernel_plan *k, const mcir_target *t,
                      const mcir_cost_options *options, mcir_kernel_cost *out);

typedef struct mcir_plan_cost {
    int launches;
    int64_t hbm_bytes, global_bytes;
    int64_t compulsory_bytes;    /* graph inputs + weights read once, outputs written once */
    int64_t unfused_hbm_bytes;   /* p->unfused_hbm_bytes (0: not known) */
    double flops, modelled_us;
    int issue_bound;             /* kernels whose issue time is their longest (mcir_kernel_cost.issue_us) */
    double overlap_us;           /* ranks: collectives' time beside kernels (the runtime's second stream),
                                  * taken off modelled_us */
} mcir_plan_cost;

/* The time target t takes to issue warp_instructions at its issue bound
 * (sm_count x issue_per_clock warp instructions a clock at clock_ghz), us. */
double mcir_issue_us(const mcir_target *t, double warp_instructions);

/* The sum of every kernel's cost on p->target, and the compulsory bytes.
 * A graph of several ranks is timed on two streams, as the runtime runs
 * it: a collective starts when the kernels before it are done and its
 * stream is free; a kernel that reads what a collective writes starts when
 * that collective is done; the rest run beside (overlap_us). */
void mcir_cost_plan(const mcir_plan *p, mcir_plan_cost *out);

/* ------------------------------------------------------------ memory plan */

/* Offsets in the arena are multiples of this (the cudaMalloc guarantee,
 * enough for 16-byte vector loads and TMA's 128-byte rule). */
#define MCIR_ARENA_ALIGNMENT 256

/* The memory plan of a compiled graph. */
typedef struct mcir_buffer_plan {
    const mcir_tensor *tensor;   /* NULL for a kernel's scratch */
    const char *name;            /* tensor name or "<kernel>.scratch" */
    int64_t size, offset;        /* bytes (unaligned size), offset in its pool */
    int first, last;             /* kernel indices, inclusive */
    int pool;
    int share_with;              /* in place: buffer whose bytes this one takes over (-1) */
} mcir_buffer_plan;

typedef struct mcir_memplan {
    const char *planner;         /* as requested ("best" by default) */
    const char *algorithm;       /* the planner whose placement was kept */
    bool optimal;                /* proven minimal by the planner library */
    int64_t alignment;
    int64_t arena_bytes;         /* sum of the pools' used bytes */
    int64_t lower_bound_bytes;   /* largest total of aligned sizes live at one kernel */
    int n_kernels;
    int n_buffers;
    mcir_buffer_plan *buffers;
    int *buffer_of;              /* by tensor id: buffer index (aliases: their root's), or -1 */
    int n_pools;
    const char **pool_names;
    int64_t *pool_capacity;      /* 0: unbounded */
    int64_t *pool_bytes;         /* used */
    mcir_arena *arena;
} mcir_memplan;

typedef struct mcir_memplan_build_options {
    const char *planner;             /* NULL: "best" */
    double time_limit_s;             /* exact search budget; <= 0: library default */
    const mcir_memplan_pool *pools;  /* in order of preference; NULL: one
                                        unbounded pool "arena" */
    int n_pools;
} mcir_memplan_build_options;

/* Liveness over the kernel order, in-place merging, and one call of the
 * mcir_memplan library. options NULL: defaults. Returns NULL with an error
 * for an unknown planner name (callers that must tell a usage error apart
 * check mcir_memplan_planner_find first) or when the last pool overflows. */
mcir_memplan *mcir_memplan_build(const mcir_plan *p, const mcir_memplan_build_options *options,
                                mcir_trace *trace, mcir_diag *d);
void mcir_memplan_free(mcir_memplan *m);
/* Where tensor t's bytes are: true and its pool and byte offset when it is
 * in the arena (directly or as an alias), false for inputs, weights,
 * outputs (and tensors only internal to a kernel). */
bool mcir_memplan_locate(const mcir_memplan *m, const mcir_plan *p,
                         const mcir_tensor *t, int *pool, int64_t *offset);
bool mcir_memplan_write_json(const mcir_memplan *m, const mcir_plan *p, FILE *out);
/* Offset against time (kernel index), one box per buffer. */
bool mcir_memplan_write_svg(const mcir_memplan *m, const mcir_plan *p, FILE *out);
/* The independent checker over the graph-level plan (no overlap of buffers
 * live at the same kernel except an in-place hand-over, inside pools,
 * aligned, lifetimes inside the kernel range). Reports each problem. */
bool mcir_memplan_verify(const mcir_memplan *m, mcir_diag *d);

#endif /* MCIR_KERNELPLAN_H */
