/*
 * kernelplan.h — from a rewritten graph to kernels: the partition into
 * fused regions in execution order (KernelPlans), the tile choice per
 * target, liveness over the kernel order, and the memory plan that puts
 * every intermediate into one arena.
 *
 *     mcir_plan *p = mcir_plan_build(g, mcir_target_find("sm_90"), trace, &d);
 *     mcir_memory_plan *m = mcir_memory_plan_build(p, "best", NULL, trace, &d);
 *     mcir_plan_write_json(p, stdout);
 *     mcir_memory_plan_write_json(m, stdout);
 *     mcir_memory_plan_free(m); mcir_plan_free(p);
 *
 * A plan borrows the graph: the graph must outlive it and not change.
 */
#ifndef MCIR_KERNELPLAN_H
#define MCIR_KERNELPLAN_H

#include "kernelplan/memplan.h"
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
    X(CONV2D, "conv2d")                     /* implicit GEMM (+ bias/relu) */

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

const char *mcir_streaming_state_name(mcir_streaming_state s);

#define MCIR_MAX_TILE_DIMS 4

typedef struct mcir_tiling {
    int n_dims;
    const char *dim_names[MCIR_MAX_TILE_DIMS];  /* "M", "N", "K" / "q", "kv" / "row", "col" */
    int64_t block_tile[MCIR_MAX_TILE_DIMS];     /* tile extent per dimension */
    int warps;                                  /* warps per block */
    int stages;                                 /* software-pipeline depth */
    int64_t working_set_bytes;                  /* on-chip bytes per block */
    const char *reason;                         /* why this tile, in words */
} mcir_tiling;

typedef struct mcir_kernel_plan {
    int id;                      /* position in execution order */
    const char *name;            /* unique, a C identifier: graph name + anchor */
    mcir_template tpl;
    int n_nodes;
    mcir_node **nodes;           /* the fused region, in topological order */
    mcir_node *anchor;           /* the main op (attention, matmul, norm...) */

    /* Tensors read from / written to global memory (region boundary). */
    int n_reads;
    mcir_tensor **reads;
    int n_writes;
    mcir_tensor **writes;
    /* Intermediates that live only inside the kernel (recomputed or
     * streamed), never written to memory. */
    int n_internal;
    mcir_tensor **internal;

    mcir_tiling tiling;
    const char *recompute_policy;     /* "none" | "recompute_in_consumer" | ... */
    mcir_streaming_state streaming_state;

    int64_t grid[3];
    int block[3];
    int64_t smem_bytes;
    int64_t scratch_bytes;       /* workspace in the arena (0: none) */

    /* Filled by codegen after NVRTC (-1: not compiled). */
    int registers;
    int spill_bytes;
} mcir_kernel_plan;

typedef struct mcir_plan {
    const mcir_graph *graph;
    const mcir_target *target;
    int n_kernels;
    mcir_kernel_plan *kernels;   /* execution order */
    /* For each tensor id: the kernel that writes it and the last kernel
     * that reads it (-1: none); aliases (reshape) resolve to their root. */
    int *first_use, *last_use;
    mcir_tensor **alias_root;    /* by tensor id: the tensor owning the bytes */
    mcir_arena *arena;
} mcir_plan;

/* Partitions the graph into kernels and chooses tiles for the target.
 * Appends a "plan" stage record per kernel to trace (may be NULL). */
mcir_plan *mcir_plan_build(const mcir_graph *g, const mcir_target *target,
                           mcir_trace *trace, mcir_diag *d);
void mcir_plan_free(mcir_plan *p);
bool mcir_plan_write_json(const mcir_plan *p, FILE *out);

/* The memory plan of a compiled graph. */
typedef struct mcir_buffer_plan {
    const mcir_tensor *tensor;   /* NULL for a kernel's scratch */
    const char *name;            /* tensor name or "<kernel>.scratch" */
    int64_t size, offset;
    int first, last;             /* kernel indices, inclusive */
    int pool;
} mcir_buffer_plan;

typedef struct mcir_memory_plan {
    const char *planner;
    int64_t alignment;
    int64_t arena_bytes;
    int64_t lower_bound_bytes;
    int n_buffers;
    mcir_buffer_plan *buffers;
    int n_pools;
    const char **pool_names;
    int64_t *pool_capacity;      /* 0: unbounded */
    int64_t *pool_bytes;         /* used */
} mcir_memory_plan;

/* pools: NULL for one unbounded pool "arena". planner NULL: "best". */
mcir_memory_plan *mcir_memory_plan_build(const mcir_plan *p, const char *planner,
                                         const mcir_memplan_pools *pools,
                                         mcir_trace *trace, mcir_diag *d);
void mcir_memory_plan_free(mcir_memory_plan *m);
bool mcir_memory_plan_write_json(const mcir_memory_plan *m, const mcir_plan *p, FILE *out);
/* Offset against time, one box per buffer. */
bool mcir_memory_plan_write_svg(const mcir_memory_plan *m, const mcir_plan *p, FILE *out);
/* The independent checker over the graph-level plan (no overlap of buffers
 * live at the same kernel, inside pools, aligned). */
bool mcir_memory_plan_check(const mcir_memory_plan *m, mcir_diag *d);

#endif /* MCIR_KERNELPLAN_H */
