/*
 * onnx.h — ONNX import: an .onnx model becomes an MCIR graph, so that
 * `mcirc model.onnx` works like `mcirc graph.json`.
 *
 * The model is parsed with protobuf-c (code generated at build time from
 * the onnx.proto of libonnx-dev). Initializers become weights; the
 * shape-computing subgraphs exporters emit (Shape, Gather, Unsqueeze,
 * Concat, ConstantOfShape, Expand, Equal, Cast, Range, ...) are evaluated
 * at import time, so a static graph comes out. Supported ops and the
 * mapping rules are in docs/onnx.md.
 *
 * Usage:
 *     mcir_diag d = mcir_diag_stderr();
 *     mcir_onnx_shape pin;
 *     if (!mcir_onnx_parse_shape("x=1x128x768", &pin)) return 2;
 *     mcir_graph *g = mcir_onnx_read("model.onnx", &pin, 1, &d);
 *     if (!g) return 1;                  // "model.onnx: error: ..." printed
 *     ...                                // like mcir_graph_read_json's graph
 *     mcir_graph_free(g);
 */
#ifndef MCIR_ONNX_H
#define MCIR_ONNX_H

#include "mcir/mcir.h"

/* A pinned shape for a graph input (--shape NAME=1x128x768). */
typedef struct mcir_onnx_shape {
    const char *name;
    int rank;
    int64_t dims[MCIR_MAX_RANK];
} mcir_onnx_shape;

/* Imports an ONNX model into a sorted, shape-inferred, verified graph (like
 * mcir_graph_read_json). shapes (n_shapes entries, may be NULL) pin the
 * dimensions of graph inputs; an input with a dynamic dimension needs one.
 * Errors are "PATH: error: ..." naming the op, node and opset; NULL then. */
mcir_graph *mcir_onnx_read(const char *path, const mcir_onnx_shape *shapes,
                           int n_shapes, mcir_diag *d);

/* Same, from bytes in memory; path is used in messages and to resolve
 * external data files (relative to its directory). */
mcir_graph *mcir_onnx_read_bytes(const void *bytes, size_t len, const char *path,
                                 const mcir_onnx_shape *shapes, int n_shapes,
                                 mcir_diag *d);

/* A named dimension of the model's inputs (an ONNX dim_param, such as
 * "batch" or "sequence_length"): fixed to one size (value; max 0 or equal
 * to it: mcirc --dim NAME=N or --dim NAME=N..N), or kept symbolic over
 * [value, max] (max > value: --dim NAME=MIN..MAX), when the graph comes
 * back with a dimension of that name (mcir.h "symbolic extents") and
 * input shapes, reshapes, slices and aranges that use it. It applies
 * wherever an input's dimension has that dim_param and no --shape pins
 * the input. */
typedef struct mcir_onnx_dim {
    const char *name;
    int64_t value;
    int64_t max;
} mcir_onnx_dim;

/* mcir_onnx_read / _bytes with dims (n_dims entries, may be NULL): a name
 * no input dimension has is an error. */
mcir_graph *mcir_onnx_read_ex(const char *path, const mcir_onnx_shape *shapes, int n_shapes,
                              const mcir_onnx_dim *dims, int n_dims, mcir_diag *d);
mcir_graph *mcir_onnx_read_bytes_ex(const void *bytes, size_t len, const char *path,
                                    const mcir_onnx_shape *shapes, int n_shapes,
                                    const mcir_onnx_dim *dims, int n_dims, mcir_diag *d);

/* Parses "NAME=D1xD2x..." (each D >= 1; "NAME=" alone is a scalar).
 * out->name points into spec. False on a malformed spec. */
bool mcir_onnx_parse_shape(const char *spec, mcir_onnx_shape *out);

/* True if path names an ONNX model (ends in ".onnx"). */
bool mcir_onnx_is_model_path(const char *path);

#endif /* MCIR_ONNX_H */
