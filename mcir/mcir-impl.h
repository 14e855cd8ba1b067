/*
 * mcir-impl.h — internals shared by the files of mcir/: the shape-inference
 * and reference-kernel functions the op table (ops.c) points at, and small
 * helpers for broadcasting and axes. Not part of the public API.
 */
#ifndef MCIR_IMPL_H
#define MCIR_IMPL_H

#include "mcir.h"

/* Shape inference (infer.c). */
bool mcir_infer_matmul(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_binary(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_unary(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_softmax(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_norm(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_reduce(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_transpose(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_reshape(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_split(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_concat(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_slice(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_conv2d(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_pool2d(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_global_avg_pool(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_attention(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_collective(mcir_graph *g, mcir_node *n, mcir_diag *d);
/* Arity, output count, attribute presence and types, input shapes known:
 * the checks every inference function starts with. */
bool mcir_infer_check_node(mcir_node *n, mcir_diag *d);

/* Integer and bool ops (ops_int.c): inference and run-time checks. */
bool mcir_infer_cast(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_compare(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_where(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_gather(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_argreduce(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_arange(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_bitwise(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_infer_cumsum(mcir_graph *g, mcir_node *n, mcir_diag *d);
bool mcir_check_gather(const mcir_node *n, const void *const *in, mcir_diag *d);
bool mcir_infer_index_copy(mcir_graph *g, mcir_node *n, mcir_diag *d);

/* Reference kernels (ref.c, ops_int.c): the f32 one of each op that can
 * have only float tensors (mcir_ref_fn), and the typed one of each op that
 * takes integer or bool tensors (mcir_ref_typed_fn). */
#define X(id, name) \
    void mcir_ref_##id(const mcir_node *n, const float *const *in, float *const *out); \
    void mcir_typed_##id(const mcir_node *n, const void *const *in, void *const *out);
MCIR_OPS(X)
#undef X

#endif /* MCIR_IMPL_H */
