/*
 * mcir_capi.h — the C entry points of the Python package (libmcir_capi.so;
 * python/mcir/_lib.py binds them with ctypes). mcir_capi.c says what each
 * does; docs/python.md how Python uses them.
 */
#ifndef MCIR_CAPI_H
#define MCIR_CAPI_H

typedef struct mcir_capi mcir_capi;

enum { MCIR_CAPI_NO_REWRITE = 1, MCIR_CAPI_CODE = 2, MCIR_CAPI_PTX = 4, MCIR_CAPI_EXACT_MATH = 8 };

int mcir_capi_version(void);
mcir_capi *mcir_capi_compile(const char *graph_json, const char *name, int n_weights,
                             const char *const *weight_names, const void *const *weight_data,
                             const long long *weight_bytes, const char *arch, int flags,
                             const char *const *catalogs, int n_catalogs);
void mcir_capi_free(mcir_capi *h);
int mcir_capi_status(const mcir_capi *h);
const char *mcir_capi_errors(const mcir_capi *h);
void mcir_capi_counts(const mcir_capi *h, int *nodes_before, int *nodes_after, int *kernels,
                      int *rewrites);
int mcir_capi_run_device(mcir_capi *h, int n_inputs, const char *const *names,
                         const unsigned long long *in_ptrs, const long long *in_bytes,
                         const unsigned long long *out_ptrs, const long long *out_bytes);
int mcir_capi_bind(mcir_capi *h, int n_inputs, const char *const *names, const int *ranks,
                   const long long *shapes);
int mcir_capi_dim(const mcir_capi *h, int i, const char **name, long long *min, long long *max,
                  long long *value);
int mcir_capi_output(const mcir_capi *h, int i, const char **dtype, long long *shape);
const char *mcir_capi_artifact(mcir_capi *h, const char *what);
int mcir_capi_run(mcir_capi *h, const char *device, int n_inputs, const char *const *names,
                  const void *const *data, const long long *bytes, void *const *outputs,
                  const long long *output_bytes, unsigned long long seed);

/* A collective of an outside group (mcir_capi_set_group): op "all_reduce",
 * "all_gather" or "reduce_scatter"; reduce "sum", "max", "min" ("" for a
 * gather); axis (-1 for all_reduce); ranks; integer: the buffers hold
 * int64 values, else float32; the input's rank and shape (this rank's);
 * in / out: this rank's buffers. 0 on success. */
typedef int (*mcir_capi_collective_fn)(void *ctx, const char *op, const char *reduce, int axis,
                                       int ranks, int integer, int ndim,
                                       const long long *shape, const void *in, void *out);
int mcir_capi_set_group(mcir_capi *h, int rank, mcir_capi_collective_fn fn, void *ctx);

/* Device runs as CUDA graphs (1), not (0), or as MCIR_GPU_GRAPHS says
 * (-1, the default); and what the last device run did. */
int mcir_capi_set_graphs(mcir_capi *h, int on);
void mcir_capi_last_step(const mcir_capi *h, int *graph, int *graph_sizes);

#endif /* MCIR_CAPI_H */
