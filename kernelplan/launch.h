/*
 * launch.h — the launch model of every generated template except the
 * GEMM-shaped ones (launch_gemm.c): streaming attention (with its split-KV
 * merge kernel), streaming norms and row reductions, elementwise chains,
 * copies and pools. Given a problem (shapes, dtype) and a tile, it says
 * exactly how the template realises it: tile sizes, warps, grid, block,
 * static and dynamic shared memory, working set, registers, occupancy.
 *
 * One model, three users: the legality check fits_on_chip
 * (properties/properties.c) asks whether some tile fits; tile choice
 * (tiling.c) picks among the candidates and writes the launch into the
 * plan; codegen (codegen/tpl_*.c) reads the plan's tile, realises it with
 * the same layout function and asserts that the launch it would perform is
 * the plan's (docs/kernelplan.md "Launch model").
 *
 *     mcir_attention_problem g;
 *     mcir_attention_layout l;
 *     if (mcir_attention_problem_of(k, &g) &&
 *         mcir_attention_layout_of(t, &g, 64, 64, 0, &l, &why)) ... l.smem_bytes
 *
 * The library (mcir_launch) needs only mcir_core and the target table, so
 * properties/ can link it without the kernel planner.
 */
#ifndef MCIR_LAUNCH_H
#define MCIR_LAUNCH_H

#include "kernelplan/kernelplan.h"

/* Grids are capped here; every template is a grid-stride loop beyond. */
#define MCIR_LAUNCH_MAX_GRID (1ll << 20)
#define MCIR_LAUNCH_MAX_ATT_GRID (1ll << 30)

/* Resident blocks per SM for a block of `threads` threads, `regs`
 * registers each and `smem` bytes of shared memory (static + dynamic),
 * by the occupancy calculator's rules (as codegen/audit.c); limit names
 * the resource that bounds it. */
int mcir_launch_occupancy(const mcir_target *t, int threads, int regs, int64_t smem,
                          const char **limit);

/* ------------------------------------------------------------ attention */

typedef struct mcir_attention_problem {
    int64_t nq, nk, d, dv;       /* query / key rows, head dims of Q/K and V */
    int64_t batch_heads;         /* product of O's leading dims */
    mcir_dtype dtype;            /* Q's */
    bool mma;                    /* templates/attention_mma.cuh (f16/bf16 Q=K=V, d, dv % 8 == 0) */
} mcir_attention_problem;

typedef struct mcir_attention_layout {
    int64_t bm, bn;              /* query rows per block, keys per K/V tile */
    int64_t dp, dvp;             /* head dims padded to 16 (mma) */
    int warps, threads;
    int rows_per_warp;           /* FMA: query rows per warp (bm = 4 * rows_per_warp) */
    int stages;                  /* K/V tiles in flight: 1 (load, sync, compute) */
    int vector_width;            /* elements per global load of Q/K/V: 8 (mma, 16 bytes) or 1 */
    int64_t qtiles;              /* ceil(nq / bm) */
    int64_t splits, chunk;       /* split-KV: keys per split (0, 1: not split) */
    int64_t grid;                /* blocks: batch_heads * qtiles * splits, capped */
    int64_t smem_bytes;          /* dynamic: Q tile + K tile + V tile (padded) */
    int64_t smem_static_bytes;   /* none: the templates declare no __shared__ arrays */
    int64_t scratch_bytes;       /* split-KV partials (f32 O, max, sum per split) */
    int registers;               /* per thread, the model's estimate */
    int blocks_per_sm;
    const char *occupancy_limit;
    int64_t merge_grid;          /* split-KV: the NAME_merge kernel (0: none) */
    int merge_block;
} mcir_attention_layout;

/* The problem of an attention kernel (anchor op attention); false otherwise. */
bool mcir_attention_problem_of(const mcir_kernel_plan *k, mcir_attention_problem *out);
/* The problem from head dims alone (the legality check, before a plan). */
void mcir_attention_problem_dims(int64_t d, int64_t dv, mcir_dtype dtype, mcir_attention_problem *out);
/* How the template realises query tile bm, K/V tile bn and split chunk
 * (0: none) on t; false with why (may be NULL) when it cannot. */
bool mcir_attention_layout_of(const mcir_target *t, const mcir_attention_problem *g, int64_t bm,
                              int64_t bn, int64_t chunk, mcir_attention_layout *out,
                              const char **why);
/* The layout of a planned kernel from its tiling ("q", "kv", "kv_split"). */
bool mcir_attention_layout_of_tiling(const mcir_target *t, const mcir_attention_problem *g,
                                     const mcir_tiling *ti, mcir_attention_layout *out,
                                     const char **why);
/* Every realisable (bm, bn) of the problem, in order of preference (the
 * chooser takes the first that fits); returns the count (at most max). */
int mcir_attention_candidates(const mcir_target *t, const mcir_attention_problem *g,
                              mcir_attention_layout *out, int max);
/* The split-KV chunk for a layout (0: do not split): decode shapes whose
 * grid cannot fill the SMs. */
/* The split-KV merge kernel's launch for `rows` query rows of dv columns. */
void mcir_attention_merge_launch(int64_t rows, int64_t dv, int64_t *grid, int *block);
int64_t mcir_attention_split_chunk(const mcir_target *t, const mcir_attention_problem *g,
                                   const mcir_attention_layout *l);

/* ------------------------------------------------- norms and row reductions */

typedef enum mcir_rows_kind {
    MCIR_ROWS_NORM,              /* templates/norm.cuh */
    MCIR_ROWS_REDUCE,            /* tpl_simple.c cg_gen_reduce */
    MCIR_ROWS_GLOBAL_POOL        /* tpl_simple.c cg_gen_pool, global average */
} mcir_rows_kind;

typedef struct mcir_rows_problem {
    mcir_rows_kind kind;
    int64_t rows, width;         /* rows, elements per row (at the graph's current binding) */
    /* NORM over a width that depends on a symbolic dimension: the largest
     * width over the dims' range and a number that divides the width at
     * every size in it (the content of its polynomial: the gcd of its
     * coefficients); the layout's choices that depend on the width
     * (vector width, a warp or a block per row, the cached row, registers)
     * are made from these, so they hold for the whole range. 0: the
     * width itself (no dims, or a width that is a constant). */
    int64_t width_max, width_unit;
    int64_t inner;               /* stride between row elements (softmax over a non-last axis) */
    bool inner_varies;           /* NORM: inner depends on a dimension (not 1 at every size) */
    mcir_op op;                  /* NORM: softmax, layernorm or rmsnorm */
    bool direct_read;            /* NORM: X is a kernel read (not computed by a prologue) */
    int chain_reads;             /* NORM: kernel reads besides X, gamma and beta (a fused chain's) */
    bool strided;                /* REDUCE: the reduced axes are not the trailing ones */
    bool pairs;                  /* REDUCE: argmax / argmin, (value, index) pairs */
    mcir_dtype dtype;
} mcir_rows_problem;

/* Where a norm keeps its row between the statistics and the output
 * (templates/norm.cuh NORM_LAYOUT): in the registers of a warp or of a
 * block, in shared memory (X's storage dtype, up to the opt-in limit), or
 * nowhere (read twice from global memory). */
typedef enum mcir_rows_mode {
    MCIR_ROWS_WARP_REGS,         /* a warp per row, NORM_NCHUNK vectors a lane */
    MCIR_ROWS_BLOCK_REGS,        /* a block per row, `chunks` vectors a thread */
    MCIR_ROWS_BLOCK_SMEM,        /* a block per row, the row cached in dynamic shared memory */
    MCIR_ROWS_BLOCK_STREAM,      /* a block per row, the row read twice */
    MCIR_ROWS_CLUSTER_SMEM       /* a thread-block cluster per row (sm_90+), each block caching its slice
                                  * in dynamic shared memory; the statistics meet through distributed
                                  * shared memory */
} mcir_rows_mode;
const char *mcir_rows_mode_name(mcir_rows_mode m);
/* The row values a norm's thread keeps in registers at most (the block
 * layouts; a warp per row keeps a 1024-wide row: 32 a lane). */
#define MCIR_ROWS_REG_VALUES 32

typedef struct mcir_rows_layout {
    bool warp_row;               /* a warp per row (row in registers), else a block per row */
    int warps, threads;
    int64_t rows_per_block;
    int vector_width;            /* NORM: 16 bytes of X (8 or 4), 4, or 1 */
    mcir_rows_mode mode;         /* NORM: where the row is kept */
    int chunks;                  /* NORM, registers: vectors of vector_width a thread keeps */
    bool cache;                  /* NORM: mode == MCIR_ROWS_BLOCK_SMEM or MCIR_ROWS_CLUSTER_SMEM */
    int cluster;                 /* NORM: blocks per cluster sharing a row (1: none) */
    int64_t slice;               /* NORM, cluster: the columns each block caches (a multiple of the vector) */
    /* NORM: bytes of X a thread has in flight before its first use of one
     * (the registers layouts: its whole part of the row; the streaming
     * ones: four vectors), and per SM over its resident blocks (Little's
     * law: an H100/H200 wants some 32 KiB per SM to run at the DRAM's rate) */
    int64_t inflight_thread_bytes, inflight_sm_bytes;
    int64_t grid;
    int64_t smem_bytes, smem_static_bytes;
    int registers;
    int blocks_per_sm;
    const char *occupancy_limit;
} mcir_rows_layout;

/* dims: the graph whose dims' ranges the width may depend on (NULL: the
 * width at the current binding is the only one). */
bool mcir_rows_problem_of(const mcir_graph *dims, const mcir_kernel_plan *k, mcir_rows_problem *out);
/* warps: per block; warp_row: a warp per row (the row must be <= 1024
 * elements for a norm). */
bool mcir_rows_layout_of(const mcir_target *t, const mcir_rows_problem *g, bool warp_row, int warps,
                         mcir_rows_layout *out, const char **why);
/* A norm's row split over a cluster of `cluster` blocks (2, 4 or 8 on
 * sm_90+; 1: mcir_rows_layout_of's block per row). */
bool mcir_rows_layout_of_cluster(const mcir_target *t, const mcir_rows_problem *g, int warps, int cluster,
                                 mcir_rows_layout *out, const char **why);
/* Most blocks per cluster the norms use (portable cluster size). */
#define MCIR_ROWS_MAX_CLUSTER 8
/* From a plan's tiling ("row" = rows per block; warp per row when it
 * equals warps). */
bool mcir_rows_layout_of_tiling(const mcir_target *t, const mcir_rows_problem *g,
                                const mcir_tiling *ti, mcir_rows_layout *out, const char **why);
int mcir_rows_candidates(const mcir_target *t, const mcir_rows_problem *g, mcir_rows_layout *out,
                         int max);

/* ------------------------------------- elementwise, copies, windowed pools */

typedef enum mcir_flat_kind {
    MCIR_FLAT_POINTWISE,         /* a thread per element of every write (elementwise, copies) */
    MCIR_FLAT_TRANSPOSE,         /* 32x32 tiles through a 32x33 f32 __shared__ tile */
    MCIR_FLAT_POOL               /* a thread per output of max/avg pool */
} mcir_flat_kind;

typedef struct mcir_flat_layout {
    mcir_flat_kind kind;
    int64_t items;               /* elements (vectors and tail elements where vectorised), or 32x32 tiles */
    int vector_width;            /* elements per item of a vectorised write (mcir_pointwise_vector_width) */
    int64_t per_block;           /* items per block per grid-stride step */
    int threads;
    int64_t grid;
    int64_t smem_static_bytes;
    int registers;
    int blocks_per_sm;
    const char *occupancy_limit;
} mcir_flat_layout;

/* The layout of an ELEMENTWISE, COPY or (windowed) POOL kernel. */
bool mcir_flat_layout_of(const mcir_target *t, const mcir_kernel_plan *k, mcir_flat_layout *out);
/* COPY kernels that the tiled transpose runs: one transpose of the last two dims. */
bool mcir_kernel_is_last2_transpose(const mcir_kernel_plan *k);
/* The tiled transpose's vector width: 16 bytes of f32 / f16 / bf16 (4 or
 * 8 elements) where both transposed extents are multiples of it at every
 * size (then T x T tiles, T = 8V, of the storage dtype, XOR-swizzled by
 * 16-byte chunk); else 1 (32x32 tiles, an element a lane). */
int mcir_transpose_vector_width(const mcir_kernel_plan *k);

/* Pointwise kernels a vector at a time (codegen/tpl_simple.c
 * gen_pointwise, docs/codegen.md "Elementwise kernels, a vector at a
 * time"): a thread computes V consecutive elements of a write per item
 * from the chain's vector forms, loads and stores 16 bytes wide, a scalar
 * item per element of the tail. The one decision codegen, the launch
 * model and the cost model all read.
 *
 * V: 8 where some vector access (a write, or a kernel read loaded through
 * a vector form) has 16-bit elements, else 4 (f32: one float4; f32 at 8:
 * two); 1 (an element an item, as before) where no kernel read is loaded
 * a vector at a time, a write has a state window, or the kernel is not an
 * elementwise / copy chain. Decided on the extents' polynomials where the
 * graph has dims, so the same at every size. */
int mcir_pointwise_vector_width(const mcir_kernel_plan *k);
/* Whether the kernel run V at a time keeps its grid-stride loop rolled
 * (#pragma unroll 1): some write's vector form moves a vector from another
 * index (mcir_vector_remap). Such a body is small (a copy), NVVM would
 * unroll it four times at run time, which adds registers but no loads in
 * flight (each load's store follows it; the buffers may alias). */
bool mcir_pointwise_rolled(const mcir_kernel_plan *k, int vec);
/* Whether write w runs V at a time (V > 1 and w is f32 / f16 / bf16). */
bool mcir_pointwise_vector_write(const mcir_kernel_plan *k, int w, int vec);
/* The items of write w at width vec: N / vec vectors and N % vec tail
 * elements where it runs vectorised, else its N elements (its window's). */
int64_t mcir_pointwise_items(const mcir_kernel_plan *k, int w, int vec);
/* Whether tensor t has a vector form: vec consecutive elements from a
 * multiple of vec (a float kernel read: vector loads; a float output of
 * an elementwise node: its op lane by lane over its operands' vectors; a
 * reshape of a tensor that has one; an index remap that keeps rows of vec
 * together, mcir_vector_remap, over operands that have one). */
bool mcir_vector_form(const mcir_kernel_plan *k, const mcir_tensor *t, int vec);
/* Whether output t of remap node n (transpose, slice, split, concat,
 * gather) maps vec consecutive elements from a multiple of vec to vec
 * consecutive elements of its operand from a multiple of vec: t's last
 * extent a multiple of vec, the last axis kept last (a transpose), sliced
 * or split only on an outer axis or from a constant multiple of vec,
 * concatenated on an outer axis or from parts that are multiples of vec,
 * gathered on an outer axis (an embedding's rows). Its vector form is
 * then its operand's at the remapped index (a gather's index read once a
 * vector). */
bool mcir_vector_remap(const mcir_kernel_plan *k, const mcir_node *n, const mcir_tensor *t, int vec);
/* How operand j of elementwise region node n enters n's vector form. */
typedef enum mcir_vector_operand {
    MCIR_VEC_SCALAR,   /* a value per lane, each from its own broadcast index (v<ID>(j) calls) */
    MCIR_VEC_LANES,    /* its vector form at one index: the same linear index, or a broadcast over
                        * leading dims whose contiguous trailing extents are a multiple of vec */
    MCIR_VEC_SPLAT     /* one element for every lane (broadcast in its trailing dims): one value */
} mcir_vector_operand;
mcir_vector_operand mcir_vector_operand_of(const mcir_kernel_plan *k, const mcir_node *n, int j, int vec);

/* ------------------------------------------------------------- the launch */

/* Writes a layout into kernel k: the tiling (dims, warps, stages, vector
 * width, working set, occupancy, registers; the reason is left alone),
 * grid, block, dynamic and static shared memory, scratch. */
void mcir_attention_apply(mcir_kernel_plan *k, const mcir_attention_problem *g,
                          const mcir_attention_layout *l);
void mcir_rows_apply(mcir_kernel_plan *k, const mcir_rows_problem *g, const mcir_rows_layout *l);
void mcir_flat_apply(const mcir_target *t, mcir_kernel_plan *k, const mcir_flat_layout *l);

/* The launch kernel k's template performs for its plan's tiling, for every
 * template this model covers (false for MATMUL / CONV2D and ALIAS, or when
 * the tiling cannot be realised: why says so). dims: as for
 * mcir_rows_problem_of. */
typedef struct mcir_launch {
    int64_t grid[3];
    int block[3];
    int64_t smem_bytes, smem_static_bytes;
    int64_t scratch_bytes;
    int registers;
    int64_t merge_grid;          /* split-KV attention's merge kernel (0: none) */
    int merge_block;
} mcir_launch;

bool mcir_launch_of(const mcir_target *t, const mcir_graph *dims, const mcir_kernel_plan *k,
                    mcir_launch *out, const char **why);

#endif /* MCIR_LAUNCH_H */
