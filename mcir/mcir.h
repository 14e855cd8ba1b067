/*
 * mcir.h — the memory-centric IR: tensors, nodes, graphs, the op table,
 * diagnostics, graph.json / .npy I/O and the CPU reference interpreter.
 *
 * Invariants kept by everything here:
 *  - every object of a graph (tensors, nodes, strings, attribute lists,
 *    weight data) lives in the graph's arena and dies with mcir_graph_free;
 *  - a tensor has exactly one producer (a node) unless it is an input or a
 *    weight; tensor ids index g->tensors and never change, node ids index
 *    g->nodes until mcir_graph_compact renumbers them;
 *  - user mistakes are reported through an mcir_diag as
 *    "path:line:col: error: ..." and a false/-1 return; broken internal
 *    invariants abort through MCIR_ASSERT. The library never calls exit().
 *
 * Usage:
 *     mcir_diag d = mcir_diag_stderr();
 *     mcir_graph *g = mcir_graph_read_json("model.json", &d);
 *     if (!g) return 1;                       // messages already printed
 *     mcir_env *env = mcir_env_new(g, 0);     // seed 0 for missing inputs
 *     if (!mcir_interp_run(g, env, &d)) ...;
 *     float *y = mcir_env_get(env, g->outputs[0]);
 *     mcir_env_free(env);
 *     mcir_graph_free(g);
 */
#ifndef MCIR_H
#define MCIR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* jansson's object type; only the trace API takes one (a client that
 * calls it includes <jansson.h> itself). */
struct json_t;

#define MCIR_VERSION_STRING "0.1.0"
#define MCIR_MAX_RANK 8

/* ---------------------------------------------------------------- checks */

void mcir_abort(const char *file, int line, const char *expr);
#define MCIR_ASSERT(x) \
    do { if (!(x)) mcir_abort(__FILE__, __LINE__, #x); } while (0)

/* ----------------------------------------------------------------- arena */

/* A bump allocator: many small allocations, one free. Memory is zeroed and
 * 16-byte aligned. Running out of memory aborts (an internal failure). */
typedef struct mcir_arena mcir_arena;

mcir_arena *mcir_arena_new(void);
void mcir_arena_free(mcir_arena *a);
void *mcir_arena_alloc(mcir_arena *a, size_t size);
void *mcir_arena_memdup(mcir_arena *a, const void *p, size_t size);
char *mcir_arena_strdup(mcir_arena *a, const char *s);
char *mcir_arena_printf(mcir_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Grow an arena-backed array of `elem` bytes from *cap to hold n elements. */
void *mcir_arena_grow(mcir_arena *a, void *p, int *cap, int n, size_t elem);

/* Overflow-checked size arithmetic for sizes computed from input. */
bool mcir_mul_overflows(int64_t a, int64_t b, int64_t *out);

/* The most elements one tensor (input, weight, intermediate, .npy array,
 * pooling window) may hold: 2^29, 2 GiB of f32. Every reader and shape
 * inference checks it, so sizes derived from element counts (bytes, work,
 * arena offsets) stay far from int64 overflow, and a typo such as a
 * 10^9-element weight is rejected before anything is allocated. The
 * largest single weight of a Llama-3-70B block (8192 x 28672) is 2^27.8. */
#define MCIR_MAX_ELEMS ((int64_t)1 << 29)
#define MCIR_MAX_ELEMS_TEXT "2^29"

/* The element count of a shape in *numel; false if it overflows or
 * exceeds MCIR_MAX_ELEMS (then *numel is 0 or the count so far). */
static inline bool mcir_numel_bounded(int rank, const int64_t *shape, int64_t *numel) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        if (mcir_mul_overflows(n, shape[i], &n) || n > MCIR_MAX_ELEMS) {
            *numel = 0;
            return false;
        }
    *numel = n;
    return true;
}

/* ----------------------------------------------------- symbolic extents */

/* A graph may declare dimensions (graph.json "dims", docs/graph-format.md
 * "Symbolic dimensions"): names with a range [min, max] that input shapes
 * and a few attributes use instead of integers. An extent of a tensor is
 * then a polynomial over the dimensions with integer coefficients — a sum
 * of at most MCIR_EXTENT_TERMS terms coef * dim0^p0 * dim1^p1 ... — which
 * covers broadcasting and matmul (an extent passes through), reshape
 * (products: batch*seq), concat (sums: seq+1) and slices (differences).
 * Two extents are the same for every size in range when they are the same
 * polynomial; anything that would only hold for some sizes is an error
 * naming the dimension. An extent that needs more terms is an error too. */
#define MCIR_MAX_DIMS 8
/* The most ranks a graph may name (graph.json "ranks"). */
#define MCIR_MAX_RANKS 1024
#define MCIR_EXTENT_TERMS 4

typedef struct mcir_extent_term {
    int64_t coef;
    uint8_t pow[MCIR_MAX_DIMS];  /* exponent of each of the graph's dims */
} mcir_extent_term;

typedef struct mcir_extent {
    int n_terms;                 /* 0: the constant 0 */
    mcir_extent_term terms[MCIR_EXTENT_TERMS];
} mcir_extent;

/* ----------------------------------------------------------- diagnostics */

/* A source position. line/col are 1-based; line 0 means "no position"
 * and the message is printed as "path: error: ...". */
typedef struct mcir_loc {
    const char *path;
    int line, col;
} mcir_loc;

typedef struct mcir_diag {
    FILE *out;        /* where messages go (stderr for mcirc) */
    int n_errors;
    int n_warnings;
} mcir_diag;

mcir_diag mcir_diag_stderr(void);
mcir_diag mcir_diag_to(FILE *out);
void mcir_error(mcir_diag *d, mcir_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mcir_warning(mcir_diag *d, mcir_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mcir_verror(mcir_diag *d, mcir_loc loc, const char *kind,
                 const char *fmt, va_list ap);

/* ---------------------------------------------------------------- dtypes */

#define MCIR_DTYPES(X) \
    X(F32, "f32", 4)   \
    X(F16, "f16", 2)   \
    X(BF16, "bf16", 2) \
    X(I32, "i32", 4)   \
    X(I64, "i64", 8)   \
    X(U8, "u8", 1)     \
    X(BOOL, "bool", 1)

typedef enum mcir_dtype {
#define X(id, name, size) MCIR_DTYPE_##id,
    MCIR_DTYPES(X)
#undef X
    MCIR_DTYPE_COUNT
} mcir_dtype;

const char *mcir_dtype_name(mcir_dtype t);
size_t mcir_dtype_size(mcir_dtype t);
bool mcir_dtype_parse(const char *s, mcir_dtype *out);

float mcir_f16_to_f32(uint16_t h);
uint16_t mcir_f32_to_f16(float f);      /* round to nearest even */
float mcir_bf16_to_f32(uint16_t b);
uint16_t mcir_f32_to_bf16(float f);     /* round to nearest even */
/* ------------------------------------------- values (mcir/value.c) */

/* Every conversion between storage bytes and numbers goes through these.
 * Float to integer truncates toward zero and saturates (NaN: 0); bool is
 * v != 0. Example: copying a tensor's bytes to f32 for the interpreter,
 *     mcir_values_to_f32(t->dtype, t->data, v, mcir_tensor_numel(t));  */
bool mcir_dtype_is_float(mcir_dtype t);       /* f32 f16 bf16 */
bool mcir_dtype_is_integer(mcir_dtype t);     /* i32 i64 u8 bool */
/* The type values of a dtype are computed in, by the interpreter and the
 * generated kernels alike: f32 for the float dtypes, int64 for the integer
 * and bool ones (exact; an i32, u8 or bool value is held wrapped into its
 * dtype's range, mcir_int_wrap). */
typedef enum mcir_value_type { MCIR_VALUE_F32, MCIR_VALUE_I64 } mcir_value_type;
mcir_value_type mcir_value_type_of(mcir_dtype t);
size_t mcir_value_type_size(mcir_value_type v);    /* 4 or 8 */
/* v wrapped into integer dtype t as two's complement: i32 modulo 2^32,
 * u8 modulo 2^8 (NumPy's and C's conversions); bool is v != 0. */
int64_t mcir_int_wrap(mcir_dtype t, int64_t v);
/* An integer value as integer or float dtype t holds it: wrapped, or
 * converted to f32 (round to nearest even) and rounded to t. */
float mcir_int_to_float(mcir_dtype t, int64_t v);
/* Round an f32 value to what the storage dtype can hold. */
float mcir_dtype_round(mcir_dtype t, float f);
/* v converted to integer dtype t (truncated, saturated). */
int64_t mcir_value_to_int(mcir_dtype t, double v);
/* Element i of storage bytes p; as an integer (floats truncated). */
double mcir_value_get(mcir_dtype t, const void *p, int64_t i);
int64_t mcir_value_get_int(mcir_dtype t, const void *p, int64_t i);
void mcir_value_set(mcir_dtype t, void *p, int64_t i, double v);
void mcir_values_to_f32(mcir_dtype t, const void *src, float *dst, int64_t n);
void mcir_values_to_f64(mcir_dtype t, const void *src, double *dst, int64_t n);
void mcir_values_to_int(mcir_dtype t, const void *src, int64_t *dst, int64_t n);
void mcir_values_from_f32(mcir_dtype t, const float *src, void *dst, int64_t n);
void mcir_values_from_f64(mcir_dtype t, const double *src, void *dst, int64_t n);
/* Integer values to storage bytes of t (wrapped, or converted for a float t). */
void mcir_values_from_int(mcir_dtype t, const int64_t *src, void *dst, int64_t n);

/* The one comparison of computed values with expected ones: the largest
 * absolute error, and that error relative to the largest expected
 * magnitude (absolute when every expected value is 0); a NaN or Inf on
 * one side without the same on the other makes both infinite. */
typedef struct mcir_compare_result {
    double max_abs, max_rel;
    int64_t worst;               /* index of the worst element, -1: none */
    bool nonfinite_mismatch;
} mcir_compare_result;

void mcir_values_compare(const float *got, const float *want, int64_t n,
                         mcir_compare_result *r);
/* The same for integer values, exactly (differences taken in f64 of the
 * exact int64 difference). */
void mcir_values_compare_int(const int64_t *got, const int64_t *want, int64_t n,
                             mcir_compare_result *r);
/* Relative tolerance per dtype: f32 1e-4, f16/bf16 2e-2, integers exact. */
double mcir_compare_tolerance(mcir_dtype t);
bool mcir_compare_within(const mcir_compare_result *r, double tolerance);

/* --------------------------------------------------------------- tensors */

typedef enum mcir_tensor_kind {
    MCIR_TENSOR_INPUT,
    MCIR_TENSOR_WEIGHT,
    MCIR_TENSOR_INTERMEDIATE,
    MCIR_TENSOR_OUTPUT,          /* produced by a node and returned */
} mcir_tensor_kind;

/* How an intermediate exists in memory (the "memory state"). */
typedef enum mcir_memory_state {
    MCIR_MEM_MATERIALIZED,       /* written to device memory in full */
    MCIR_MEM_STREAMING,          /* only tiles / running statistics exist */
    MCIR_MEM_RECOMPUTABLE,       /* recomputed inside its consumer */
} mcir_memory_state;

const char *mcir_tensor_kind_name(mcir_tensor_kind k);
const char *mcir_memory_state_name(mcir_memory_state s);
bool mcir_memory_state_parse(const char *s, mcir_memory_state *out);

typedef struct mcir_node mcir_node;

typedef struct mcir_tensor {
    int id;
    const char *name;
    mcir_dtype dtype;
    int rank;                    /* -1 until shape inference ran */
    int64_t shape[MCIR_MAX_RANK];
    mcir_tensor_kind kind;
    bool is_output;              /* named in the graph's outputs */
    mcir_memory_state memory_state;
    mcir_node *producer;         /* NULL for inputs and weights */
    mcir_loc loc;                /* where it was declared or produced */
    /* Symbolic extents (graphs with dims): rank entries, or NULL when every
     * extent is the integer in shape[]. shape[] always holds the extents at
     * the graph's current binding of its dims (mcir_graph_bind_dims). */
    mcir_extent *sym;
    /* A graph output that is a state carried from step to step (graph.json
     * "state"): the input whose bytes it is written over (same dtype and
     * shape); NULL otherwise. The graph stays pure — the output is a new
     * value — and the plan and the runtime give both one buffer. */
    struct mcir_tensor *state_input;

    /* Graphs with ranks > 1 (graph.json "shard"): the axis this input or
     * weight is split along, rank r holding part r of shard_parts equal
     * parts; shape[] is one rank's part. -1 (and shard_parts 1): every
     * rank holds the whole tensor. */
    int shard_axis;
    int shard_parts;
    /* "shard": {"axis": A, "blocks": B}: the whole axis is B equal blocks
     * (a fused QKV weight's q, k and v), each split into shard_parts; rank
     * r holds part r of every block, in block order. 1: one block. */
    int shard_blocks;

    /* Weights: storage-dtype bytes (little-endian), or NULL for seeded
     * pseudo-random values (see mcir_fill_seeded). A sharded weight's
     * data is the whole tensor (mcir_tensor_whole_bytes); each rank takes
     * its part (mcir_tensor_take_part). */
    void *data;
    const char *data_path;       /* .npy it came from (as resolved), or NULL */
} mcir_tensor;

int64_t mcir_tensor_numel(const mcir_tensor *t);
/* NumPy broadcasting of two shapes into out (rank *rout; out may alias a
 * or b); false if they are incompatible or the rank exceeds MCIR_MAX_RANK. */
bool mcir_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b,
                          int *rout, int64_t *out);
int64_t mcir_tensor_bytes(const mcir_tensor *t);
/* A sharded tensor's whole shape (shape[] with the shard axis times
 * shard_parts) into out; the element count and bytes of the whole. For an
 * unsharded tensor, its own. */
void mcir_tensor_whole_shape(const mcir_tensor *t, int64_t *out);
int64_t mcir_tensor_whole_numel(const mcir_tensor *t);
int64_t mcir_tensor_whole_bytes(const mcir_tensor *t);
/* Rank r's part of a sharded tensor's whole values (elements of `size`
 * bytes, C order, mcir_tensor_whole_numel of them) into out
 * (mcir_tensor_numel elements); the whole for an unsharded one. */
void mcir_tensor_take_part(const mcir_tensor *t, const void *whole, size_t size, int r,
                           void *out);
/* "[1, 128, 768]" into buf; returns buf. */
char *mcir_shape_str(const mcir_tensor *t, char *buf, size_t n);
/* Normalises a possibly negative axis against rank; false if out of range. */
bool mcir_norm_axis(int64_t axis, int rank, int *out);
/* NumPy slice bounds of x[start:end:step] on a dim of size `dim` (step !=
 * 0): the first index taken and the number of elements (0 if empty).
 * Inference, the reference kernel and codegen all call this, so they agree. */
void mcir_slice_range(int64_t dim, int64_t start, int64_t end, int64_t step,
                      int64_t *first, int64_t *len);

/* ------------------------------------------------------------ attributes */

typedef enum mcir_attr_type {
    MCIR_ATTR_INT,
    MCIR_ATTR_FLOAT,
    MCIR_ATTR_BOOL,
    MCIR_ATTR_STRING,
    MCIR_ATTR_INTS,
} mcir_attr_type;

typedef struct mcir_attr {
    const char *name;
    mcir_attr_type type;
    int64_t i;
    double f;
    bool b;
    const char *s;
    int n;                       /* MCIR_ATTR_INTS: count */
    int64_t *ints;
    mcir_loc loc;
    /* Values that name a dimension (graphs with dims): one entry per value
     * (1 for an INT, n for INTS), the dimension's index or -1 for an
     * integer; NULL when none does. i / ints[] hold the dimension's value
     * at the current binding. */
    int8_t *dim_of;
    /* An INT that names a dimension: the constant added to it ("past+1":
     * 1), so i = the dimension's value + dim_plus. */
    int64_t dim_plus;
} mcir_attr;

/* One entry of an op's attribute schema. A required attribute has no
 * default; an optional one without a default (has_default false) is
 * computed when absent (attention's scale, pooling strides). */
typedef struct mcir_attr_spec {
    const char *name;
    mcir_attr_type type;
    bool required;
    bool has_default;
    int64_t def_i;
    double def_f;
    bool def_b;
    const char *def_s;
    int def_n;
    const int64_t *def_ints;
    /* For MCIR_ATTR_STRING: NULL-terminated list of allowed values. */
    const char *const *choices;
} mcir_attr_spec;

/* ------------------------------------------------------------------- ops */

/* The op list. X(ID, "name") — everything else about an op lives in the
 * one descriptor table, mcir_op_descs[], in mcir/ops.c. */
#define MCIR_OPS(X)                                                        \
    X(MATMUL, "matmul")                                                    \
    X(ADD, "add") X(SUB, "sub") X(MUL, "mul") X(DIV, "div")                \
    X(POW, "pow") X(MAX, "max") X(MIN, "min")                              \
    X(SCALE, "scale")                                                      \
    X(RELU, "relu") X(SIGMOID, "sigmoid") X(TANH, "tanh") X(EXP, "exp")    \
    X(LOG, "log") X(ERF, "erf") X(SQRT, "sqrt") X(RSQRT, "rsqrt")          \
    X(NEG, "neg") X(RECIPROCAL, "reciprocal") X(SILU, "silu")              \
    X(GELU, "gelu")                                                        \
    X(SOFTMAX, "softmax") X(LAYERNORM, "layernorm") X(RMSNORM, "rmsnorm")  \
    X(REDUCE_SUM, "reduce_sum") X(REDUCE_MEAN, "reduce_mean")              \
    X(REDUCE_MAX, "reduce_max")                                            \
    X(TRANSPOSE, "transpose") X(RESHAPE, "reshape") X(SPLIT, "split")      \
    X(CONCAT, "concat") X(SLICE, "slice")                                  \
    X(CONV2D, "conv2d") X(MAX_POOL2D, "max_pool2d")                        \
    X(AVG_POOL2D, "avg_pool2d") X(GLOBAL_AVG_POOL, "global_avg_pool")      \
    X(ATTENTION, "attention")                                              \
    X(ALL_REDUCE, "all_reduce") X(ALL_GATHER, "all_gather")                \
    X(REDUCE_SCATTER, "reduce_scatter")                                    \
    X(COS, "cos") X(SIN, "sin")                                            \
    MCIR_INT_OPS(X)

/* Ops on integer and bool tensors (mcir/ops_int.c): casts, comparisons,
 * select, index lookups, arg-reductions, index ranges, remainders, bitwise
 * logic and shifts, cumulative sums, row updates by index. */
#define MCIR_INT_OPS(X)                                                    \
    X(CAST, "cast")                                                        \
    X(EQUAL, "equal") X(NOT_EQUAL, "not_equal") X(LESS, "less")            \
    X(LESS_EQUAL, "less_equal") X(GREATER, "greater")                      \
    X(GREATER_EQUAL, "greater_equal")                                      \
    X(WHERE, "where") X(GATHER, "gather")                                  \
    X(ARGMAX, "argmax") X(ARGMIN, "argmin") X(ARANGE, "arange")            \
    X(MOD, "mod") X(BITWISE_AND, "bitwise_and") X(BITWISE_OR, "bitwise_or") \
    X(BITWISE_XOR, "bitwise_xor") X(BITWISE_NOT, "bitwise_not")            \
    X(LEFT_SHIFT, "left_shift") X(RIGHT_SHIFT, "right_shift")              \
    X(CUMSUM, "cumsum") X(INDEX_COPY, "index_copy")

typedef enum mcir_op {
#define X(id, name) MCIR_OP_##id,
    MCIR_OPS(X)
#undef X
    MCIR_OP_COUNT
} mcir_op;

/* Op flags. */
enum {
    MCIR_OPF_PURE = 1u << 0,        /* no side effects, deterministic */
    MCIR_OPF_ELEMENTWISE = 1u << 1, /* out[i] depends on in[i] (after broadcast) */
    MCIR_OPF_UNARY = 1u << 2,
    MCIR_OPF_BINARY = 1u << 3,      /* NumPy broadcasting of two inputs */
    MCIR_OPF_INPLACE = 1u << 4,     /* output may overwrite an input */
    MCIR_OPF_REDUCTION = 1u << 5,
    MCIR_OPF_NORM = 1u << 6,        /* softmax, layernorm, rmsnorm */
    MCIR_OPF_VIEW = 1u << 7,        /* reshape: same bytes, new shape */
    MCIR_OPF_COMMUTATIVE = 1u << 8, /* binary op with swappable inputs */
    MCIR_OPF_INTS = 1u << 9,        /* takes integer and bool tensors too */
    MCIR_OPF_COLLECTIVE = 1u << 10, /* all_reduce, all_gather, reduce_scatter: across ranks */
};

typedef struct mcir_graph mcir_graph;

/* Shape and dtype inference: fills n->outputs[*]'s rank, shape and dtype
 * from the inputs and attributes, or reports an error at the node. */
typedef bool (*mcir_infer_fn)(mcir_graph *g, mcir_node *n, mcir_diag *d);

/* Reference kernel of a node whose tensors are all floating-point:
 * inputs and outputs are dense f32 arrays in C order with the shapes of
 * n->inputs[i] / n->outputs[i]. Computes in f32 (f64 where precision
 * matters); rounding to the storage dtype is done by the interpreter
 * afterwards. */
typedef void (*mcir_ref_fn)(const mcir_node *n, const float *const *in,
                            float *const *out);
/* Reference kernel of a node with an integer or bool tensor among its
 * inputs or outputs: each buffer holds the values of its tensor in the
 * tensor's value type (mcir_value_type: float for f32/f16/bf16, int64_t
 * for i32/i64/u8/bool), dense, C order. Integer results are computed in
 * int64 and wrapped to the output's dtype by the kernel itself. */
typedef void (*mcir_ref_typed_fn)(const mcir_node *n, const void *const *in,
                                  void *const *out);
/* Run-time check of input values before the reference kernel runs (an
 * index out of range); false with an error at the node. NULL: none.
 * Buffers as for mcir_ref_typed_fn. */
typedef bool (*mcir_value_check_fn)(const mcir_node *n, const void *const *in,
                                    mcir_diag *d);

typedef struct mcir_op_desc {
    const char *name;
    int min_inputs, max_inputs;  /* max_inputs -1: variadic */
    int n_outputs;               /* -1: given by attributes (split) */
    unsigned flags;
    const mcir_attr_spec *attrs;
    int n_attrs;
    mcir_infer_fn infer;
    mcir_ref_fn reference;       /* every tensor floating-point (NULL: never) */
    mcir_value_check_fn check;
    mcir_ref_typed_fn typed;     /* an integer or bool tensor (MCIR_OPF_INTS ops) */
} mcir_op_desc;

extern const mcir_op_desc mcir_op_descs[MCIR_OP_COUNT];

static inline const mcir_op_desc *mcir_op_desc_of(mcir_op op) {
    return &mcir_op_descs[op];
}
const char *mcir_op_name(mcir_op op);
bool mcir_op_parse(const char *name, mcir_op *out);
const mcir_attr_spec *mcir_op_attr_spec(mcir_op op, const char *attr);

/* ----------------------------------------------------------------- nodes */

struct mcir_node {
    int id;
    const char *name;
    mcir_op op;
    int n_inputs;
    mcir_tensor **inputs;
    int n_outputs;
    mcir_tensor **outputs;
    int n_attrs;
    mcir_attr *attrs;

    /* Memory properties (names, as declared in the catalog) this node was
     * annotated with, e.g. "weighted_streaming_reduction". */
    int n_properties;
    const char **properties;

    /* Fusion region set by rewrites (-1: none). Nodes sharing a group are
     * lowered into one kernel by kernelplan/. */
    int group;
    /* Tensor coalescing: index of the input whose buffer the output reuses
     * (-1: none). */
    int inplace_input;

    /* Origin, for diagnostics and the trace: where the node was declared,
     * and for nodes made by a rewrite the rule and the nodes it replaced. */
    mcir_loc loc;
    const char *origin_rule;
    const char *origin_nodes;    /* "a,b,c" */

    bool dead;                   /* removed by a rewrite; see compact */
};

const mcir_attr *mcir_node_attr(const mcir_node *n, const char *name);
/* Typed getters: the attribute's value, or the schema default. Asking for
 * an attribute that is neither set nor defaulted is an internal error. */
int64_t mcir_node_int(const mcir_node *n, const char *name);
double mcir_node_float(const mcir_node *n, const char *name);
bool mcir_node_bool(const mcir_node *n, const char *name);
const char *mcir_node_string(const mcir_node *n, const char *name);
int mcir_node_ints(const mcir_node *n, const char *name, const int64_t **out);

/* Setters (replace an existing attribute of the same name). */
mcir_attr *mcir_node_set_int(mcir_graph *g, mcir_node *n, const char *name, int64_t v);
mcir_attr *mcir_node_set_float(mcir_graph *g, mcir_node *n, const char *name, double v);
mcir_attr *mcir_node_set_bool(mcir_graph *g, mcir_node *n, const char *name, bool v);
mcir_attr *mcir_node_set_string(mcir_graph *g, mcir_node *n, const char *name, const char *v);
mcir_attr *mcir_node_set_ints(mcir_graph *g, mcir_node *n, const char *name,
                              int count, const int64_t *v);
bool mcir_node_has_property(const mcir_node *n, const char *property);
void mcir_node_add_property(mcir_graph *g, mcir_node *n, const char *property);

/* ---------------------------------------------------------------- graphs */

/* A symbolic dimension of a graph ("dims"). */
typedef struct mcir_dim {
    const char *name;
    int64_t min, max;
    int64_t value;               /* the binding the concrete shapes are at (default max) */
    mcir_loc loc;
} mcir_dim;

struct mcir_graph {
    mcir_arena *arena;
    const char *name;
    const char *path;            /* source file, for diagnostics */
    const char *dir;             /* directory .npy paths are relative to */

    int n_tensors, cap_tensors;
    mcir_tensor **tensors;       /* by id */
    int n_nodes, cap_nodes;
    mcir_node **nodes;           /* topological after mcir_graph_sort */

    int n_inputs, n_weights, n_outputs;
    mcir_tensor **inputs;        /* in declaration order */
    mcir_tensor **weights;
    mcir_tensor **outputs;       /* in the order of "outputs" */

    /* name -> tensor, open addressing; internal */
    int hash_cap;
    mcir_tensor **hash;
    int next_auto_name;
    /* consumers by tensor id while the structure holds still; internal,
     * see mcir_graph_index_uses */
    struct mcir_use_index *uses;
    /* fusion-group members by group while rewriting; internal, see
     * mcir_graph_index_groups */
    struct mcir_group_index *groups;
    /* symbolic dimensions, in declaration order (graph.json "dims") */
    int n_dims;
    mcir_dim dims[MCIR_MAX_DIMS];
    /* graph.json "ranks": how many ranks run this program (SPMD), each on
     * its part of the sharded inputs and weights; 1: one device. */
    int ranks;
};

mcir_graph *mcir_graph_new(const char *name);
void mcir_graph_free(mcir_graph *g);

/* Adds a tensor; returns NULL if the name is taken. rank -1: not known yet. */
mcir_tensor *mcir_graph_add_tensor(mcir_graph *g, const char *name,
                                   mcir_dtype dtype, int rank,
                                   const int64_t *shape, mcir_tensor_kind kind);
mcir_tensor *mcir_graph_find_tensor(const mcir_graph *g, const char *name);
/* A fresh tensor name with the given stem that no tensor uses ("stem_3"). */
const char *mcir_graph_fresh_name(mcir_graph *g, const char *stem);
/* Adds a node; sets the producer of each output and marks outputs that are
 * not graph outputs intermediate. name NULL: generated. */
mcir_node *mcir_graph_add_node(mcir_graph *g, mcir_op op, const char *name,
                               int n_inputs, mcir_tensor *const *inputs,
                               int n_outputs, mcir_tensor *const *outputs);
mcir_node *mcir_graph_find_node(const mcir_graph *g, const char *name);
void mcir_graph_mark_output(mcir_graph *g, mcir_tensor *t);

/* Orders g->nodes topologically, stable (a node stays as early as its
 * inputs allow, ties in declaration order). Returns false, with an error
 * naming a node on the cycle, if the graph has one. */
bool mcir_graph_sort(mcir_graph *g, mcir_diag *d);
/* Runs every node's shape inference in topological order. */
bool mcir_graph_infer(mcir_graph *g, mcir_diag *d);
/* One node's shape inference: the op's rule at the current binding and,
 * for a graph with dims, its symbolic rule for the whole range (dims.c). */
bool mcir_node_infer(mcir_graph *g, mcir_node *n, mcir_diag *d);

/* ---------------------------------------------- symbolic dims (dims.c) */

/* Declares a dimension; its index, or -1 if the name is taken or there
 * are MCIR_MAX_DIMS already. Bound at max. */
int mcir_graph_add_dim(mcir_graph *g, const char *name, int64_t min, int64_t max);
int mcir_graph_find_dim(const mcir_graph *g, const char *name);
/* Whether some dimension can take more than one value. */
bool mcir_graph_is_dynamic(const mcir_graph *g);
/* Rebinds every dimension (values[i] for dims[i], within its range):
 * input shapes and attributes that name a dimension take the values, and
 * shapes are inferred again. false with the inference's errors. */
bool mcir_graph_bind_dims(mcir_graph *g, const int64_t *values, mcir_diag *d);
/* "seq=128, batch=4" (the current binding) into buf; "" without dims. */
char *mcir_dims_binding_str(const mcir_graph *g, char *buf, size_t n);

/* Extents. */
mcir_extent mcir_extent_const(int64_t v);
mcir_extent mcir_extent_dim(int dim);
/* t's extent i (its symbol, or the integer). */
mcir_extent mcir_tensor_extent(const mcir_tensor *t, int i);
bool mcir_extent_is_const(const mcir_extent *e, int64_t *value);
bool mcir_extent_equal(const mcir_extent *a, const mcir_extent *b);
/* Sum, product; false if the result needs more than MCIR_EXTENT_TERMS
 * terms or a coefficient overflows. */
bool mcir_extent_add(const mcir_extent *a, const mcir_extent *b, mcir_extent *out);
bool mcir_extent_mul(const mcir_extent *a, const mcir_extent *b, mcir_extent *out);
/* The value at the graph's current binding. */
int64_t mcir_extent_eval(const mcir_graph *g, const mcir_extent *e);
/* The least and greatest value over every size in range (exact for terms
 * with positive coefficients, a safe bound otherwise). */
void mcir_extent_bounds(const mcir_graph *g, const mcir_extent *e, int64_t *lo, int64_t *hi);
/* "batch*seq", "seq+1", "768" into buf; returns buf. */
char *mcir_extent_str(const mcir_graph *g, const mcir_extent *e, char *buf, size_t n);
/* Value k of an attribute that names a dimension (a->dim_of[k] >= 0):
 * the dimension plus the attribute's dim_plus ("past+1"). */
mcir_extent mcir_attr_extent(const mcir_attr *a, int k);
/* The first dimension e depends on (-1: none). */
int mcir_extent_first_dim(const mcir_extent *e);
/* Structural checks: arity, attribute types, single producer, every input
 * produced before use, outputs exist, shapes inferred. */
bool mcir_graph_verify(const mcir_graph *g, mcir_diag *d);
/* Deep copy into a new arena (weight data included). */
mcir_graph *mcir_graph_clone(const mcir_graph *g);
/* Drops dead nodes and tensors nothing uses or produces any more;
 * renumbers node ids (tensor ids are renumbered too). */
void mcir_graph_compact(mcir_graph *g);

/* Live consumers of t, in node order; returns the count (writes at most
 * max into out, which may be NULL). */
int mcir_graph_consumers(const mcir_graph *g, const mcir_tensor *t,
                         mcir_node **out, int max);
/* The gated-linear-unit layout (rewrites' fuse_glu_matmul): t [.., F] is
 * half h of a product P [.., 2F] whose columns interleave a gate's and an
 * up projection's in blocks of 8 (columns 16b..16b+7 the gate's 8b..8b+7,
 * 16b+8.. the up's), read back as t = reshape(slice(reshape(P, [.., F/8,
 * 2, 8]), axis -2, [h, h+1)), [.., F]), static shapes, F a multiple of 8.
 * Returns P with *half = h (0: the gate's, 1: the up's), or NULL. */
const mcir_tensor *mcir_glu_half(const mcir_tensor *t, int *half);
/* Builds (on) or drops (off) an index that makes mcir_graph_consumers
 * O(answer) instead of a scan of every node. Adding nodes, compaction and
 * mcir_graph_replace_uses drop it; whoever rewires node inputs directly
 * must drop it first (the rewrite engine does around structural rewrites). */
void mcir_graph_index_uses(mcir_graph *g, bool on);
/* Builds (on) or drops (off) an index of each fusion group's members in
 * node order, for the rewrite engine: while it is on, node ids are
 * positions in g->nodes, groups change only through mcir_graph_set_group,
 * and the queries below cost O(answer) instead of a scan of every node.
 * Sorting and compaction drop it. */
void mcir_graph_index_groups(mcir_graph *g, bool on);
/* Puts n into fusion group gid (-1: none), keeping the index. */
void mcir_graph_set_group(mcir_graph *g, mcir_node *n, int gid);
/* The first max live members of the groups gids[0..n_gids), in node
 * order; returns how many it wrote. */
int mcir_graph_group_members(const mcir_graph *g, const int *gids, int n_gids,
                             const mcir_node **out, int max);
/* Live members of group gid; the largest group id a live node holds (-1:
 * none). */
int mcir_graph_group_size(const mcir_graph *g, int gid);
int mcir_graph_max_group(const mcir_graph *g);
/* Rewires every live use of `from` (node inputs and graph outputs) to `to`. */
void mcir_graph_replace_uses(mcir_graph *g, mcir_tensor *from, mcir_tensor *to);
int mcir_graph_live_nodes(const mcir_graph *g);

/* ------------------------------------------------------------------- I/O */

/* Progress of a long stage (progress.c, docs/cli.md "Progress"): one line
 * on stderr redrawn in place, only where stderr is a terminal
 * (MCIR_PROGRESS=0 or 1 overrides) and only once the stage has run a
 * second; erased at the end. Off a terminal begin returns NULL and the
 * other calls do nothing. add and set may be called from any thread.
 *
 *     mcir_progress *p = mcir_progress_begin("nvrtc", "compile units", n);
 *     ... mcir_progress_add(p, 1); ...
 *     mcir_progress_end(p);
 */
typedef struct mcir_progress mcir_progress;
bool mcir_progress_wanted(void);
mcir_progress *mcir_progress_begin(const char *stage, const char *what, int64_t total);
void mcir_progress_add(mcir_progress *p, int64_t n);
/* The count done and a detail after it (" (best 8.04 MiB)"; fmt may be NULL). */
void mcir_progress_set(mcir_progress *p, int64_t done, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mcir_progress_end(mcir_progress *p);

/* Output files (outfile.c, docs/cli.md "Output files"): every file an
 * mcir program writes goes through one of these. "-" (or the file stdout
 * is) means stdout; a symbolic link is written through to its target (a
 * dangling one creates it); a device or FIFO is written directly; a
 * regular file is replaced by a rename from a temporary beside it, never
 * anything else. Nothing reaches the path before the commit, so a failure
 * leaves no partial file. Errors: "PATH: error: ...".
 *
 *     mcir_outfile o;                          // not to be copied while open
 *     if (!mcir_outfile_open(&o, path, &d)) return false;
 *     fprintf(o.f, ...);
 *     return mcir_outfile_commit(&o, &d);      // or mcir_outfile_discard(&o)
 */
typedef struct mcir_outfile {
    FILE *f;                  /* write the contents here */
    /* private to outfile.c */
    char *path, *target, *tmp, *buf;
    size_t len;
    int kind;
    bool existed;
    unsigned mode, uid, gid;  /* of the regular file being replaced */
} mcir_outfile;

bool mcir_outfile_open(mcir_outfile *o, const char *path, mcir_diag *d);
/* Publishes what was written (rename, or the buffered bytes); false after
 * reporting a failure, with nothing left behind. Releases o either way. */
bool mcir_outfile_commit(mcir_outfile *o, mcir_diag *d);
void mcir_outfile_discard(mcir_outfile *o);
/* Open, write n bytes, commit. */
bool mcir_outfile_write(const char *path, const void *data, size_t n, mcir_diag *d);
/* Puts the finished file `from` (a private temporary) at path by the same
 * rules: renamed where path is (or links to) a regular file or nothing,
 * else copied and removed. */
bool mcir_outfile_publish(const char *from, const char *path, mcir_diag *d);
/* Whether path means stdout: "-", or the very file stdout is (/dev/stdout). */
bool mcir_path_is_stdout(const char *path);

/* Runs argv (argv[0] looked up on PATH; mcir/spawn.c) with stdin from
 * /dev/null, stdout into the file `out` and stderr into `err` (both
 * created or truncated; err NULL: with stdout). Its exit status, or -1
 * where it could not start or did not exit. */
int mcir_run_program(char *const *argv, const char *out, const char *err);

/* graph.json reader (docs/graph-format.md). Reports every problem it finds as
 * PATH:LINE:COL: error: ...; returns NULL if there was any. The graph comes
 * back sorted, shape-inferred and verified. */
mcir_graph *mcir_graph_read_json(const char *path, mcir_diag *d);
mcir_graph *mcir_graph_read_json_string(const char *text, const char *path,
                                        mcir_diag *d);

/* Writers. The mcir artifact is graph.json form plus per node
 * "properties" and a top-level "tensors" object with "memory_state". */
bool mcir_graph_write_json(const mcir_graph *g, FILE *out);
/* The same, for an artifact written into directory dir: weights held in
 * memory with more than inline_max elements go to dir/subdir/NAME.npy and
 * are referenced as "data": "subdir/NAME.npy" (relative to the artifact,
 * as graph.json wants), so large imported models stay readable. */
bool mcir_graph_write_json_split(const mcir_graph *g, FILE *out, const char *dir,
                                 const char *subdir, int64_t inline_max, mcir_diag *d);
bool mcir_graph_write_dot(const mcir_graph *g, FILE *out);

/* .npy files: f32 (<f4), f16 (<f2), bf16 (<u2), i32 (<i4), i64 (<i8),
 * u8 (|u1), bool (|b1). */
typedef struct mcir_npy {
    mcir_dtype dtype;
    int rank;
    int64_t shape[MCIR_MAX_RANK];
    void *data;                  /* malloc'd storage bytes */
} mcir_npy;

bool mcir_npy_read(const char *path, mcir_npy *out, mcir_diag *d);
bool mcir_npy_write(const char *path, mcir_dtype dtype, int rank,
                    const int64_t *shape, const void *data, mcir_diag *d);
void mcir_npy_free(mcir_npy *n);
/* NumPy's descr of a dtype ("<f4", "|b1", ...). */
const char *mcir_npy_descr(mcir_dtype t);

/* ------------------------------------------------- reference interpreter */

/* Values of every tensor of a graph, indexed by tensor id, each in its
 * dtype's value type (mcir_value_type_of): f32 arrays for float tensors
 * (already rounded to the storage dtype), int64 arrays for integer and
 * bool ones (exact, wrapped into the dtype's range). */
typedef struct mcir_env mcir_env;

mcir_env *mcir_env_new(const mcir_graph *g, uint64_t seed);
void mcir_env_free(mcir_env *e);
/* The graph e holds the tensors of. */
const mcir_graph *mcir_env_graph(const mcir_env *e);
/* The seed unset inputs are filled with (mcir_env_new's). */
uint64_t mcir_env_seed(const mcir_env *e);
/* A float tensor's values, or NULL if not computed / set yet. After a
 * run, intermediates have been freed at their last use (NULL) unless
 * mcir_env_keep_all was set; inputs, weights and outputs stay. For an
 * integer or bool tensor: its values converted to f32 (exact up to 2^24
 * in magnitude) in a copy the env owns until the tensor changes — for
 * summaries; writing to it changes nothing. Exact values:
 * mcir_env_get_int, mcir_env_get_raw. */
float *mcir_env_get(mcir_env *e, const mcir_tensor *t);
/* An integer or bool tensor's values (NULL: a float tensor, or none yet). */
int64_t *mcir_env_get_int(mcir_env *e, const mcir_tensor *t);
/* The tensor's values as storage-dtype bytes (mcir_tensor_bytes of them)
 * into out, exactly; false if it has none. */
bool mcir_env_get_raw(mcir_env *e, const mcir_tensor *t, void *out);
/* mcir_values_compare (floats) or mcir_values_compare_int (integers, bool)
 * of tensor `got` in env eg against `want` in ew (same dtype and element
 * count); false if either has no values. */
bool mcir_env_compare(mcir_env *eg, const mcir_tensor *got, mcir_env *ew,
                      const mcir_tensor *want, mcir_compare_result *r);
/* Graphs with ranks > 1: the env holds every rank's values. The
 * accessors read the selected rank's (rank 0 until one is selected);
 * setters write the selected rank's, or with none selected (-1) the
 * whole tensor's: each rank takes its part of a sharded input or weight,
 * every rank all of another. mcir_interp_run runs all ranks in lockstep. */
int mcir_env_ranks(const mcir_env *e);
void mcir_env_select_rank(mcir_env *e, int r);
/* Rank r's own env (its values only; e itself for a graph of one rank):
 * what a device run of that rank reads its leaves from and writes its
 * outputs to. */
mcir_env *mcir_env_rank_env(mcir_env *e, int r);
/* One rank of a group whose other ranks run elsewhere (other processes,
 * under torch.distributed or an MPI launcher): run performs collective
 * node n over the group on this rank's buffers — in: n's input, out: its
 * output, each of its tensor's value type (f32 for floating-point dtypes,
 * i64 for integers and bool; the shapes are n's tensors', this rank's) —
 * and returns false after an error in d (or with none, and the caller
 * reports a failed collective). Every rank calls it for the same nodes in
 * the same order. */
typedef bool (*mcir_group_fn)(void *ctx, const mcir_node *n, const void *in, void *out,
                              mcir_diag *d);
typedef struct mcir_group {
    int rank;          /* this process's rank, 0 <= rank < the graph's ranks */
    mcir_group_fn run;
    void *ctx;
} mcir_group;
/* An env for rank group->rank of graph g (ranks > 1): it holds that rank's
 * values only (a sharded input or weight: its part — setters take the
 * whole tensor, as a group's do, and keep the part), and mcir_interp_run
 * hands each collective to group->run. The group must outlive the env. */
mcir_env *mcir_env_new_member(const mcir_graph *g, uint64_t seed, const mcir_group *group);
/* The group of an env made by mcir_env_new_member, else NULL. */
const mcir_group *mcir_env_member(const mcir_env *e);
/* Keep every intermediate after a run (for tests and debugging). */
void mcir_env_keep_all(mcir_env *e, bool keep);
/* Copies f32 values in (rounded to a float dtype; truncated and saturated
 * to an integer one, mcir_value_to_int). */
void mcir_env_set(mcir_env *e, const mcir_tensor *t, const float *values);
/* Copies integer values in (wrapped to an integer dtype, converted to a
 * float one). */
void mcir_env_set_int(mcir_env *e, const mcir_tensor *t, const int64_t *values);
/* Sets a tensor from storage-dtype bytes (exact). */
void mcir_env_set_raw(mcir_env *e, const mcir_tensor *t, const void *data);

/* Deterministic pseudo-random fill keyed by (seed, tensor name), so two
 * graphs that share a tensor name get the same values. Inputs: uniform in
 * [-1, 1). Weights: the same scaled by 1/sqrt(fan_in), fan_in =
 * numel / shape[0] for rank >= 2. */
void mcir_fill_seeded(const mcir_tensor *t, uint64_t seed, float *out);
/* Rank r's part of a sharded tensor's seeded values (the whole tensor's
 * values, fan_in of the whole); mcir_fill_seeded is rank 0's. */
void mcir_fill_seeded_part(const mcir_tensor *t, uint64_t seed, int r, float *out);

/* Executes the graph: inputs not set are filled by mcir_fill_seeded with
 * the env's seed, weights come from their data (or seeded with seed 0,
 * the documented weight seed), nodes run in topological order. */
bool mcir_interp_run(const mcir_graph *g, mcir_env *e, mcir_diag *d);

/* Runs one node whose tensors are all floating-point on given f32 arrays
 * (for tests of single ops). */
void mcir_ref_run_node(const mcir_node *n, const float *const *in,
                       float *const *out);
/* Runs any node on buffers of its tensors' value types (mcir_ref_typed_fn):
 * the float kernel when every tensor is floating-point, else the typed one. */
void mcir_ref_run_node_typed(const mcir_node *n, const void *const *in,
                             void *const *out);

/* A collective node (all_reduce, all_gather, reduce_scatter) over `ranks`
 * ranks: in[r] / out[r] are rank r's buffers of its input / output, of
 * their value type. With one rank, the identity. */
void mcir_collective_run(const mcir_node *n, int ranks, const void *const *in,
                         void *const *out);

/* Number of worker threads the reference kernels may use (default: the
 * number of online CPUs). */
void mcir_set_threads(int n);
int mcir_get_threads(void);

/* ----------------------------------------------------------------- trace */

/* One stream of decision records that every stage appends to (rewrites
 * now; plan and memory decisions too), so one file tells the story of a
 * compile. Records are JSON objects; append assigns "seq" (0, 1, ...) and
 * puts it first. Each record carries at least "stage" and "decision". */
typedef struct mcir_trace mcir_trace;

mcir_trace *mcir_trace_new(void);
void mcir_trace_free(mcir_trace *t);
/* Takes ownership of `record` (a JSON object). */
void mcir_trace_append(mcir_trace *t, struct json_t *record);
int mcir_trace_count(const mcir_trace *t);
struct json_t *mcir_trace_get(const mcir_trace *t, int i);   /* borrowed */
/* JSON lines, one record a line, keys in insertion order. */
bool mcir_trace_write_jsonl(const mcir_trace *t, FILE *out);

#endif /* MCIR_H */
