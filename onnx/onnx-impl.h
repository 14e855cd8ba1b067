/*
 * onnx-impl.h — internals of the ONNX importer shared by its files:
 * import.c (the model walk, onnx.h's entry points, diagnostics),
 * protobuf.c (the nesting bound, attributes, TensorProto data), values.c
 * (the name table, runtime values and the MCIR nodes emitted for them),
 * ops.c (the op table) with the handlers by family in ops_*.c and the
 * steps they are written with in ops_steps.c, and eval.c (the import-time
 * evaluator of constant tensors).
 *
 * Every ONNX tensor name maps to one ox_value: either a constant known at
 * import time (initializers, Constant nodes, folded subgraphs; int64, bool
 * and float element types) or a runtime MCIR tensor (f32, f16, bf16, i32,
 * i64, u8 or bool). Constants become MCIR weights only when a runtime op
 * consumes them: shapes, axes and constant indices never reach the graph.
 */
#ifndef MCIR_ONNX_IMPL_H
#define MCIR_ONNX_IMPL_H

#include "onnx/onnx.h"
#include "onnx.pb-c.h"

/* ONNX TensorProto.DataType values. */
enum {
    OX_FLOAT = 1, OX_UINT8 = 2, OX_INT8 = 3, OX_UINT16 = 4, OX_INT16 = 5,
    OX_INT32 = 6, OX_INT64 = 7, OX_STRING = 8, OX_BOOL = 9, OX_FLOAT16 = 10,
    OX_DOUBLE = 11, OX_UINT32 = 12, OX_UINT64 = 13, OX_BFLOAT16 = 16,
};

typedef struct ox_value {
    const char *name;            /* the ONNX name it was defined under */
    bool is_const;
    int elem;                    /* ONNX element type */
    int rank;
    int64_t shape[MCIR_MAX_RANK];
    int64_t numel;

    /* Constants: integer and bool types in iv, float types in fv (values
     * already rounded to the element type). */
    int64_t *iv;
    float *fv;
    mcir_tensor *weight[MCIR_DTYPE_COUNT];   /* materialised, per dtype */

    /* Runtime values. expand: an Expand not materialised yet — t has the
     * source shape, rank/shape the expanded one (see ox_runtime). */
    mcir_tensor *t;
    bool expand;
    mcir_tensor *expanded;
} ox_value;

typedef struct ox_entry {
    const char *key;
    ox_value *v;                 /* NULL: a reserved name, not defined yet */
    int uses;                    /* consumers in the graph (node inputs, outputs) */
} ox_entry;

typedef struct ox {
    mcir_arena *a;               /* importer scratch; freed at the end */
    mcir_graph *g;
    mcir_diag *d;
    const char *path, *dir;
    int64_t opset;
    /* the node being imported */
    const Onnx__NodeProto *node;
    int node_index;
    uint64_t used_attrs;         /* bit i: node->attribute[i] was read */
    bool failed;
    /* storage of constants so far and its bound (from the file size), so
     * that import-time values cannot exhaust memory */
    int64_t const_bytes, const_budget;
    /* name table: every ONNX name (defined values and reserved names) */
    ox_entry *names;
    int names_cap, n_names;
    /* --dim NAME=N: dim_params fixed to a size, and which were used */
    const mcir_onnx_dim *dims;
    int n_dims;
    bool *dim_used;
    /* an import at one probe size of a dimension kept symbolic
     * (symbolic.c): constants of rank >= 2 sliced and integer Ranges stay
     * runtime ops, since their sizes may follow the dimension */
    bool probing;
    struct ox_limits *limits;    /* probing: bounds found on the way */
} ox;

/* A bound a probe import found: the causal mask computed by arange node
 * `node` stands for a slice of `buffer`, which has `bound` rows, so the
 * mask's length may not exceed it (the model fails beyond). Names are in
 * the graph's arena. */
typedef struct ox_limit {
    const char *node, *buffer, *onnx_node;
    int64_t bound;
} ox_limit;

typedef struct ox_limits {
    int n;
    ox_limit item[32];
} ox_limits;

/* Diagnostics: "PATH: error: node 'N' (Op, opset K): ..." for the current
 * node, "PATH: error: ..." outside one. Both set x->failed, return false. */
bool ox_error(ox *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline bool ox_is_float(int elem) {
    return elem == OX_FLOAT || elem == OX_FLOAT16 || elem == OX_BFLOAT16 ||
           elem == OX_DOUBLE;
}
const char *ox_elem_name(int elem);
bool ox_elem_supported(int elem);

/* Constants. Their size is bounded (an import-time value, or an
 * initializer whose data must be in memory anyway): 2^28 elements. */
#define OX_MAX_CONST_ELEMS ((int64_t)1 << 28)
ox_value *ox_const_new(ox *x, int elem, int rank, const int64_t *shape);
double ox_get(const ox_value *v, int64_t i);
int64_t ox_geti(const ox_value *v, int64_t i);
void ox_set(ox_value *v, int64_t i, double f);     /* rounds to the elem type */
void ox_seti(ox_value *v, int64_t i, int64_t k);
/* Element i of v copied to element j of out (same class of elem). */
void ox_copy_elem(ox_value *out, int64_t j, const ox_value *v, int64_t i);
/* The values of a 1-D (or scalar) integer constant; false + error if v is
 * not one. count <= max. */
bool ox_ints_of(ox *x, const ox_value *v, const char *what, int64_t *out, int *count,
                int max);

/* protobuf.c. Messages nest at most OX_MAX_NESTING deep: ox_nesting_ok
 * checks the encoded bytes of a message of type desc before protobuf-c
 * unpacks them (recursively). */
#define OX_MAX_NESTING 64
bool ox_nesting_ok(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
                   const uint8_t *end, int depth);
/* The current node's attribute `name` of the given type, marked read;
 * NULL if absent (or on an error). The typed getters return def when it
 * is absent; ox_attr_ints its count, or -1. */
const Onnx__AttributeProto *ox_attr_get(ox *x, const char *name, int type);
int64_t ox_attr_int(ox *x, const char *name, int64_t def);
float ox_attr_float(ox *x, const char *name, float def);
const char *ox_attr_str(ox *x, const char *name, const char *def, char *buf, size_t n);
int ox_attr_ints(ox *x, const char *name, int64_t *out, int max);
/* A TensorProto (initializer, attribute) as a constant; what names it in
 * errors. */
ox_value *ox_tensor_value(ox *x, const Onnx__TensorProto *tp, const char *what);

/* values.c: the name table. */
ox_entry *ox_lookup(ox *x, const char *name, bool create);
const char *ox_fresh(ox *x, const char *stem);
const char *ox_fresh_node_name(ox *x, const char *stem);
bool ox_define(ox *x, const char *name, ox_value *v);
const char *ox_out_name(ox *x, int i);
bool ox_define_out(ox *x, int i, ox_value *v);
bool ox_only_first_output(ox *x);

/* values.c: runtime values. Emitted nodes belong to the current ONNX
 * node; out_index >= 0 names an output after ONNX output out_index, -1
 * makes an intermediate. */
bool ox_elem_dtype(int elem, mcir_dtype *dt);
int ox_dtype_elem(mcir_dtype dt);
/* The MCIR dtype value v has at run time (a constant: its element type's);
 * false + error if MCIR has no such dtype. */
bool ox_value_dtype(ox *x, const ox_value *v, mcir_dtype *dt);
ox_value *ox_runtime_value(ox *x, mcir_tensor *t);
mcir_dtype ox_node_dtype(ox_value *const *in, int n_in);
bool ox_infer_now(ox *x, mcir_node *n);
mcir_node *ox_emit(ox *x, mcir_op op, int n_in, mcir_tensor *const *ins, int n_out,
                   const int *onnx_out);
mcir_node *ox_emit1(ox *x, mcir_op op, int n_in, mcir_tensor *const *ins, int out_index);
mcir_tensor *ox_done(ox *x, mcir_node *n);
bool ox_define_rt(ox *x, int i, mcir_tensor *t);
mcir_tensor *ox_weight_of(ox *x, ox_value *v, mcir_dtype dt);
ox_value *ox_new_float_const(ox *x, const char *stem, mcir_dtype dt, int rank,
                             const int64_t *shape);
mcir_tensor *ox_runtime(ox *x, ox_value *v, mcir_dtype dt);
mcir_tensor *ox_operand(ox *x, ox_value *v, mcir_dtype dt, ox_value *const *others,
                        int n_others);
bool ox_all_const(ox_value *const *in, int n_in);
bool ox_reshape_to(ox *x, ox_value *v, int rank, const int64_t *shape, int out_index);
bool ox_norm_axis(ox *x, int64_t axis, int rank, const char *what, int *out);

/* ops.c: imports the current node (x->node) through its handler. */
bool ox_import_node(ox *x);

/* The op handlers (ops_*.c), one row each of ops.c's table: ox_import_OP
 * imports the current node, its inputs in[0..n_in) (NULL where an optional
 * input is empty): it reads the attributes it supports and defines the
 * node's outputs; false on an error. */
typedef bool (*ox_handler)(ox *x, ox_value **in, int n_in);
/* ops_const.c: values known at import time. */
bool ox_import_constant(ox *x, ox_value **in, int n_in);
bool ox_import_constant_of_shape(ox *x, ox_value **in, int n_in);
bool ox_import_eye_like(ox *x, ox_value **in, int n_in);
bool ox_import_shape(ox *x, ox_value **in, int n_in);
bool ox_import_size(ox *x, ox_value **in, int n_in);
bool ox_import_range(ox *x, ox_value **in, int n_in);
/* ops_elementwise.c */
bool ox_import_elementwise(ox *x, ox_value **in, int n_in);
bool ox_import_where(ox *x, ox_value **in, int n_in);
bool ox_import_cast(ox *x, ox_value **in, int n_in);
bool ox_import_cast_like(ox *x, ox_value **in, int n_in);
bool ox_import_clip(ox *x, ox_value **in, int n_in);
bool ox_import_hard_sigmoid(ox *x, ox_value **in, int n_in);   /* and HardSwish */
bool ox_import_activation(ox *x, ox_value **in, int n_in);
bool ox_import_is_nan_inf(ox *x, ox_value **in, int n_in);   /* IsNaN, IsInf */
/* ops_shape.c: layout and data movement. */
bool ox_import_identity(ox *x, ox_value **in, int n_in);       /* and Dropout */
bool ox_import_transpose(ox *x, ox_value **in, int n_in);
bool ox_import_reshape(ox *x, ox_value **in, int n_in);
bool ox_import_flatten(ox *x, ox_value **in, int n_in);
bool ox_import_unsqueeze(ox *x, ox_value **in, int n_in);
bool ox_import_squeeze(ox *x, ox_value **in, int n_in);
bool ox_import_concat(ox *x, ox_value **in, int n_in);
bool ox_import_split(ox *x, ox_value **in, int n_in);
bool ox_import_slice(ox *x, ox_value **in, int n_in);
bool ox_import_gather(ox *x, ox_value **in, int n_in);
bool ox_import_gather_elements(ox *x, ox_value **in, int n_in);
bool ox_import_gather_nd(ox *x, ox_value **in, int n_in);
bool ox_import_expand(ox *x, ox_value **in, int n_in);
bool ox_import_pad(ox *x, ox_value **in, int n_in);
bool ox_import_scatter_nd(ox *x, ox_value **in, int n_in);
bool ox_import_trilu(ox *x, ox_value **in, int n_in);
bool ox_import_one_hot(ox *x, ox_value **in, int n_in);
/* ops_reduce.c */
bool ox_import_reduce(ox *x, ox_value **in, int n_in);
bool ox_import_argmax(ox *x, ox_value **in, int n_in);        /* and ArgMin */
bool ox_import_cumsum(ox *x, ox_value **in, int n_in);
/* ops_nn.c: matrix products, softmax and norms. */
bool ox_import_matmul(ox *x, ox_value **in, int n_in);
bool ox_import_gemm(ox *x, ox_value **in, int n_in);
bool ox_import_softmax(ox *x, ox_value **in, int n_in);
bool ox_import_log_softmax(ox *x, ox_value **in, int n_in);
bool ox_import_hardmax(ox *x, ox_value **in, int n_in);
bool ox_import_layernorm(ox *x, ox_value **in, int n_in);
bool ox_import_batchnorm(ox *x, ox_value **in, int n_in);
/* ops_spatial.c: conv, pools, resize. */
bool ox_import_conv(ox *x, ox_value **in, int n_in);
bool ox_import_pool(ox *x, ox_value **in, int n_in);           /* MaxPool, AveragePool */
bool ox_import_global_avg_pool(ox *x, ox_value **in, int n_in);
bool ox_import_conv_transpose(ox *x, ox_value **in, int n_in);
bool ox_import_resize(ox *x, ox_value **in, int n_in);         /* and Upsample */

/* ops_elementwise.c: the MCIR op of elementwise ONNX op `op` (its ew_map),
 * or -1 for one evaluated at import time only. */
int ox_ew_op(const char *op);
/* Output 0 is v cast to element type `to` (Cast, CastLike, Hardmax). */
bool ox_cast_to(ox *x, ox_value *v, int to);

/* ops_steps.c: the steps the handlers are written with (which fold
 * constants: see there). out_index names the result after that ONNX output
 * of the node (-1: an intermediate), which the caller then defines. */
/* A scalar constant of element type elem, named after stem. */
ox_value *ox_scalar_of(ox *x, int elem, const char *stem, double val);
/* ONNX elementwise op `op` (one of ew_map) on a, or on a and b. */
ox_value *ox_ew_step(ox *x, const char *op, ox_value *a, ox_value *b, int out_index);
/* Where(c, a, b): a bool condition, values of one dtype. */
ox_value *ox_where_step(ox *x, ox_value *c, ox_value *a, ox_value *b, int out_index);
/* MCIR's cast of runtime v to dt. */
ox_value *ox_cast_step(ox *x, ox_value *v, mcir_dtype dt, int out_index);
/* |v| = max(v, -v). */
ox_value *ox_abs_step(ox *x, ox_value *v);
/* The reduction mop of v over axes. */
ox_value *ox_reduce_step(ox *x, mcir_op mop, ox_value *v, int n_axes, const int64_t *axes,
                         bool keep, int out_index);
/* v reshaped (never an ONNX output). */
ox_value *ox_reshape_step(ox *x, ox_value *v, int rank, const int64_t *shape);
/* A slice of v on axis ax; ox_slice_rt: of runtime t (first, len and step
 * as ox_slice_bounds gives them). */
ox_value *ox_slice_step(ox *x, ox_value *v, int ax, int64_t first, int64_t len,
                        int64_t step);
mcir_tensor *ox_slice_rt(ox *x, mcir_tensor *t, int ax, int64_t first, int64_t len,
                         int64_t step, int out_index);
/* Axis ax of v multiplied by the constant matrix A [out, in_len] (row o:
 * the weights of the input positions output position o reads). */
ox_value *ox_axis_matrix(ox *x, ox_value *v, int ax, const double *A, int64_t out,
                         int64_t in_len, const char *stem, int out_index);


/* The import-time evaluator: ops over constants. Returns true and sets
 * *out (one output) when op_type is one it evaluates; false with no error
 * when it does not know the op; false with x->failed on an error. */
typedef enum ox_fold {
    OX_FOLD_NONE,   /* not an op the evaluator knows */
    OX_FOLD_OK,
    OX_FOLD_ERROR,
} ox_fold;
ox_fold ox_fold_elementwise(ox *x, const char *op, ox_value *const *in, int n_in,
                            ox_value **out);
ox_value *ox_fold_cast(ox *x, const ox_value *v, int to);
ox_value *ox_fold_transpose(ox *x, const ox_value *v, const int64_t *perm);
ox_value *ox_fold_concat(ox *x, ox_value *const *in, int n_in, int axis);
ox_value *ox_fold_slice(ox *x, const ox_value *v, int axis, int64_t start, int64_t step,
                        int64_t len);
ox_value *ox_fold_gather(ox *x, const ox_value *data, const ox_value *idx, int axis);
ox_value *ox_fold_expand(ox *x, const ox_value *v, int rank, const int64_t *shape);
ox_value *ox_fold_reshape(ox *x, const ox_value *v, int rank, const int64_t *shape);

/* import.c: one import with every dim_param fixed (probing where limits is
 * not NULL: see ox). */
mcir_graph *ox_read_fixed(const void *bytes, size_t len, const char *path,
                          const mcir_onnx_shape *shapes, int n_shapes, const mcir_onnx_dim *dims,
                          int n_dims, ox_limits *limits, mcir_diag *d);
/* symbolic.c: an import with dims that range over sizes. */
mcir_graph *ox_read_symbolic(const void *bytes, size_t len, const char *path,
                             const mcir_onnx_shape *shapes, int n_shapes,
                             const mcir_onnx_dim *dims, int n_dims, mcir_diag *d);

/* ONNX Slice bounds on one axis: first index and length (>= 0). */
void ox_slice_bounds(int64_t dim, int64_t start, int64_t end, int64_t step,
                     int64_t *first, int64_t *len);

#endif /* MCIR_ONNX_IMPL_H */
