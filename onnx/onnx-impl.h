/*
 * onnx-impl.h — internals of the ONNX importer shared by import.c (model
 * parsing, op mapping, graph building) and eval.c (the import-time
 * evaluator of constant tensors).
 *
 * Every ONNX tensor name maps to one ox_value: either a constant known at
 * import time (initializers, Constant nodes, folded subgraphs; int64, bool
 * and float element types) or a runtime MCIR tensor. Constants become MCIR
 * weights only when a runtime op consumes them, which is why int64 data is
 * fine as long as it is consumed at import time (shapes, axes, indices).
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
} ox;

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

/* ONNX Slice bounds on one axis: first index and length (>= 0). */
void ox_slice_bounds(int64_t dim, int64_t start, int64_t end, int64_t step,
                     int64_t *first, int64_t *len);

#endif /* MCIR_ONNX_IMPL_H */
