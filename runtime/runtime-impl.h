/*
 * runtime-impl.h — what runtime.c needs from cublas.c (both dlopen'd;
 * handles and device pointers are passed as opaque values) and from
 * tensor_map.c. Reads codegen's compiled-module format (codegen/module.h)
 * and nothing else of codegen/.
 */
#ifndef MCIR_RUNTIME_IMPL_H
#define MCIR_RUNTIME_IMPL_H

#include "codegen/module.h"
#include "runtime/cuda_driver.h"
#include "runtime/runtime.h"

/* A deliberate fault in the runtime, for the tests that must catch it
 * (tests/test_graphs.c): REPLAY_SKIPS_INPUTS, a graph step after the
 * capture leaves the inputs of the step before in place (no upload);
 * WAIT_WHILE_CAPTURING, the capture waits for the stream after the first
 * kernel (as LAZY's frees or --sync's waits would). */
enum { CG_MUTANT_NONE, CG_MUTANT_REPLAY_SKIPS_INPUTS, CG_MUTANT_WAIT_WHILE_CAPTURING,
       CG_MUTANT_COLLECTIVE_READS_RANK0, /* a collective of several ranks takes rank 0's input for every rank */
       CG_MUTANT_COLLECTIVE_NO_JOIN /* kernels after a collective on the second stream do not wait for it */ };
extern int cg_runtime_mutant;

struct mcir_blas_api;
/* The cuBLAS / cuBLASLt entry points of the runs that follow: the
 * emulated device's (emu/blas.c), or NULL for the libraries. */
void cg_blas_select(const struct mcir_blas_api *api);
bool cg_cublas_open(void **handle, void *stream, char *why, size_t n);
void cg_cublas_close(void *handle);
bool cg_cublas_gemm(void *handle, const cg_gemm_desc *g, unsigned long long a,
                    unsigned long long b, unsigned long long c, char *why, size_t n);

/* cuBLASLt: one call computes a matmul with its epilogue (g->lt); false
 * with the reason where the library cannot load (or MCIR_NO_CUBLASLT). */
bool mcir_cublaslt_available(char *why, size_t n);
bool cg_cublaslt_open(void **handle, char *why, size_t n);
void cg_cublaslt_close(void *handle);

/* One GEMM prepared for cuBLASLt: its descriptor and layouts (built once
 * per run) and the algorithm the heuristic chose for at most `workspace`
 * bytes (kept per process, by shape and device). */
#include "runtime/blas_api.h"
typedef struct cg_lt_plan {
    void *desc, *la, *lb, *lc;
    mcir_lt_heuristic algo;   /* algo.workspace: the bytes it needs */
    int status;               /* the last cuBLAS status (15: not supported) */
    bool ready;
} cg_lt_plan;
/* False with why: an error, or (p->status 15) no algorithm for it, when
 * the generated kernel is to run instead. */
bool cg_cublaslt_prepare(void *handle, const cg_gemm_desc *g, size_t workspace, const char *device, cg_lt_plan *p,
                         char *why, size_t n);
/* D = epilogue(A B [+ residual]) with the prepared algorithm; false with
 * why (p->status 15: not supported at run time). */
bool cg_cublaslt_run(void *handle, void *stream, cg_lt_plan *p, const cg_gemm_desc *g, unsigned long long a,
                     unsigned long long b, unsigned long long bias, unsigned long long residual,
                     unsigned long long d, unsigned long long workspace, size_t workspace_bytes, char *why,
                     size_t n);
void cg_cublaslt_release(cg_lt_plan *p);
/* How many times this process asked cuBLASLt's heuristic (tests). */
long cg_cublaslt_heuristic_calls(void);

/* Encodes k's n_tmaps tensor maps (tensor_map.c) for the device pointers
 * of its pointer parameters (reads, then writes) into maps (64-byte
 * aligned) with the run's driver table's cuTensorMapEncodeTiled; false and
 * why on failure. */
bool cg_tensor_maps_encode(const mcir_cu_driver *cu, const cg_kernel *k, const unsigned long long *ptrs,
                           unsigned char (*maps)[128], char *why, size_t n);

#endif
