/*
 * properties.h — memory properties as declared facts: the table of
 * legality checks (named C predicates a catalog rule invokes with
 * parameters), the vocabulary of rewrite actions (names and parameter
 * schemas; the implementations live in rewrites/), and the on-chip
 * working-set model the `fits_on_chip` check and kernel tiling share.
 *
 * Invariant: every check and every action is one entry of a table here;
 * the catalog loader validates YAML against these tables, so a rule that
 * loads can always be evaluated.
 *
 *     const mcir_check_desc *c = mcir_check_find("single_consumer");
 *     char detail[512];
 *     bool ok = c->fn(&ctx, params, detail, sizeof detail);
 *     // ok == false, detail == "'attn.qk.y' (S) has 2 consumers: attn.scale, dbg"
 */
#ifndef MCIR_PROPERTIES_H
#define MCIR_PROPERTIES_H

#include "mcir/mcir.h"
#include "properties/target.h"

/* ------------------------------------------------------------ parameters */

/* Kinds of parameters a check or an action takes from YAML. References to
 * pattern variables and pattern nodes are resolved to indices at load. */
typedef enum mcir_param_kind {
    MCIR_PARAM_TENSOR,   /* one pattern variable */
    MCIR_PARAM_TENSORS,  /* a list of pattern variables (or one) */
    MCIR_PARAM_NODE,     /* one pattern node id */
    MCIR_PARAM_NODES,    /* a list of pattern node ids (or one) */
    MCIR_PARAM_INT,
    MCIR_PARAM_FLOAT,
    MCIR_PARAM_STRING,
    MCIR_PARAM_DTYPES,   /* a list of dtype names */
    MCIR_PARAM_OP,       /* an op name */
    MCIR_PARAM_ATTRS,    /* attributes of the op named by the "op" parameter */
} mcir_param_kind;

/* The values an INT or FLOAT parameter may take, checked at load time. */
typedef enum mcir_param_range {
    MCIR_RANGE_ANY,          /* any value of the kind */
    MCIR_RANGE_POSITIVE,     /* > 0 (divisors, sizes) */
    MCIR_RANGE_NONNEGATIVE,  /* >= 0 (tolerances) */
    MCIR_RANGE_AXIS,         /* an axis: -MCIR_MAX_RANK .. MCIR_MAX_RANK - 1 */
} mcir_param_range;

typedef struct mcir_param_spec {
    const char *name;
    mcir_param_kind kind;
    bool required;
    const char *doc;
    /* MCIR_PARAM_STRING: NULL-terminated allowed values, or NULL for any */
    const char *const *choices;
    mcir_param_range range;  /* MCIR_PARAM_INT / FLOAT */
} mcir_param_spec;

/* A parameter's value as loaded; indexed like the spec array. */
typedef struct mcir_param_value {
    bool set;
    int n;              /* TENSOR(S)/NODE(S): count of refs */
    int *refs;          /* variable indices or pattern node indices */
    int64_t i;
    double f;
    const char *s;
    unsigned dtypes;    /* DTYPES: bit (1u << dtype) per allowed dtype */
    mcir_op op;
    int n_attrs;
    mcir_attr *attrs;
} mcir_param_value;

/* ----------------------------------------------------------------- match */

/* What a pattern match bound: a graph node per pattern node (NULL where an
 * optional node is absent) and a tensor per pattern variable (NULL where
 * unbound). Checks and actions read it; names are for diagnostics. */
typedef struct mcir_match {
    mcir_graph *graph;
    int n_nodes;
    mcir_node **nodes;
    const char *const *node_ids;
    int n_vars;
    mcir_tensor **vars;
    const char *const *var_names;
    /* the anchor's output: the tensor a rewrite keeps (under its name) */
    mcir_tensor *output;
} mcir_match;

/* --------------------------------------------------------------- checks */

typedef struct mcir_check_ctx {
    const mcir_match *match;
    const mcir_target *target;
} mcir_check_ctx;

/* Returns whether the condition holds and writes what was measured
 * ("working set 56 KiB <= 227 KiB (sm_90, tile 64x64)") into detail. */
typedef bool (*mcir_check_fn)(const mcir_check_ctx *ctx, const mcir_param_value *params,
                              char *detail, size_t detail_size);

typedef struct mcir_check_desc {
    const char *name;
    const char *doc;
    const mcir_param_spec *params;
    int n_params;
    mcir_check_fn fn;
} mcir_check_desc;

extern const mcir_check_desc mcir_checks[];
extern const int mcir_n_checks;
const mcir_check_desc *mcir_check_find(const char *name);

/* -------------------------------------------------------------- actions */

/* The rewrite actions a catalog rule may name. Schemas here, the
 * implementations in rewrites/actions.c (indexed by mcir_action). */
#define MCIR_ACTIONS(X)                      \
    X(FUSE_ATTENTION, "fuse_attention")      \
    X(FUSE_LAYERNORM, "fuse_layernorm")      \
    X(FUSE_RMSNORM, "fuse_rmsnorm")          \
    X(FUSE_SOFTMAX, "fuse_softmax")          \
    X(REPLACE_OP, "replace_op")              \
    X(ANNOTATE_ONLY, "annotate_only")        \
    X(FUSE_GROUP, "fuse_group")              \
    X(INPLACE, "inplace")                    \
    X(FUSE_HORIZONTAL_MATMUL, "fuse_horizontal_matmul") \
    X(FOLD_CONV_AFFINE, "fold_conv_affine") \
    X(CONV_AS_MATMUL, "conv_as_matmul")     \
    X(CONV_TAP_MAJOR, "conv_tap_major")     \
    X(FUSE_GLU_MATMUL, "fuse_glu_matmul")   \
    X(FOLD_NORM_GAMMA, "fold_norm_gamma")

typedef enum mcir_action {
#define X(id, name) MCIR_ACTION_##id,
    MCIR_ACTIONS(X)
#undef X
    MCIR_ACTION_COUNT
} mcir_action;

typedef struct mcir_action_desc {
    const char *name;
    const char *doc;
    const mcir_param_spec *params;
    int n_params;
} mcir_action_desc;

extern const mcir_action_desc mcir_action_descs[MCIR_ACTION_COUNT];
bool mcir_action_parse(const char *name, mcir_action *out);
/* Index of a named parameter in a check's or action's spec, or -1. */
int mcir_param_index(const mcir_param_spec *specs, int n, const char *name);

/* ------------------------------------------------------------ lowerings */

/* The lowering strategies a property may name (`lowering_strategy:`):
 * how kernel planning lowers a node that carries the property. */
typedef struct mcir_lowering_desc {
    const char *name;
    const char *doc;
} mcir_lowering_desc;

extern const mcir_lowering_desc mcir_lowerings[];
extern const int mcir_n_lowerings;
const mcir_lowering_desc *mcir_lowering_find(const char *name);

/* ---------------------------------------------------------- working set */

/* Which kernel shape a working set is computed for. */
typedef enum mcir_ws_model {
    MCIR_WS_ATTENTION,  /* Q tile + K, V tiles + S tile + O accumulator */
    MCIR_WS_MATMUL,     /* A, B tiles, double-buffered */
    MCIR_WS_CONV2D,     /* implicit GEMM tiles */
    MCIR_WS_NORM,       /* one row staged in shared memory */
    MCIR_WS_AUTO,       /* by the op of the node measured */
} mcir_ws_model;

bool mcir_ws_model_parse(const char *name, mcir_ws_model *out);

/* The smallest-working-set tile that fits (or, if none fits, the
 * smallest tried), for a problem described by `dims`:
 *   ATTENTION: dims = {head dim d, value dim dv}
 *   MATMUL:    dims = {M, N, K}
 *   CONV2D:    dims = {N*OH*OW, Cout, Cin/groups*KH*KW}
 *   NORM:      dims = {row length} */
typedef struct mcir_working_set {
    int64_t bytes;      /* shared memory the tile needs */
    int64_t limit;      /* target->smem_per_block_optin */
    int tile[3];        /* ATTENTION: Br, Bc; MATMUL/CONV2D: BM, BN, BK; NORM: rows */
    bool fits;
} mcir_working_set;

void mcir_working_set_compute(const mcir_target *target, mcir_ws_model model,
                              const int64_t *dims, mcir_dtype dtype,
                              mcir_working_set *out);
/* "56 KiB", "1.3 MiB" into buf; returns buf. */
char *mcir_bytes_str(int64_t bytes, char *buf, size_t n);

/* ------------------------------------------------------------- helpers */

/* Values of a weight as f32 (its data converted, or the seeded fill with
 * the weight seed 0 when it has none); n = mcir_tensor_numel(t). Returns
 * false if t is not a weight. */
bool mcir_weight_values(const mcir_tensor *t, float *out);
/* The matmuls that could run as one GEMM with mm (mm first): live,
 * ungrouped, reading mm's A as their A, each B a constant rank-2 weight of
 * mm's dtype and contraction length, the same transpose flags, and no
 * product (or bias-added product) a graph output, and none whose product
 * feeds an elementwise chain of its own (an epilogue it would lose; a
 * chain joining two products, SwiGLU's, is no loss), and every part read
 * only where a strided view does (attention Q/K/V, pointwise ops, through
 * reshapes and transposes). Returns the
 * count (at most max written). */
#define MCIR_MAX_HORIZONTAL 8
int mcir_matmul_siblings(const mcir_graph *g, const mcir_node *mm, mcir_node **out, int max);


/* act(x·Wg) ∘ (x·Wu) as one GEMM (the rule glu_matmul; rewrites'
 * fuse_glu_matmul): gate and up are live, ungrouped matmuls reading the
 * same A (f16 or bf16, static shapes) with constant rank-2 weights of one
 * shape, dtype and transpose flags; act is a unary elementwise op of the
 * gate's product alone; glu multiplies act's output by the up's product;
 * each of those three tensors has that one reader and is no graph output;
 * F, the products' columns, is a multiple of 8 (the weights interleave in
 * blocks of 8). False with why (static text or printed into buf). */
bool mcir_glu_operands(const mcir_graph *g, const mcir_node *glu, const mcir_node *act, const mcir_node *gate,
                       const mcir_node *up, char *buf, size_t n);

/* A constant gamma of RMSNorm `norm` folds into the rows of the constant
 * weights of the matmuls reading its output (the rule norm_gamma_fold;
 * rewrites' fold_norm_gamma): norm is a live, ungrouped rmsnorm over the
 * last axis with a constant gamma of one value per column (K), not all
 * ones; its output is no graph output and every reader (1 to 8) is a
 * live, ungrouped matmul reading it as A (not transpose_a) with a constant
 * rank-2 weight of K rows ([K, N], or [N, K] under transpose_b) of at most
 * 2^28 elements. False with why printed into buf. */
bool mcir_norm_gamma_foldable(const mcir_graph *g, const mcir_node *norm, char *buf, size_t n);

#endif /* MCIR_PROPERTIES_H */
