/*
 * runtime-impl.h — what runtime.c needs from cublas.c (both dlopen'd;
 * handles and device pointers are passed as opaque values).
 */
#ifndef MCIR_RUNTIME_IMPL_H
#define MCIR_RUNTIME_IMPL_H

#include "codegen/codegen-impl.h"
#include "codegen/runtime.h"

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
bool cg_cublaslt_matmul(void *handle, void *stream, const cg_gemm_desc *g, unsigned long long a,
                        unsigned long long b, unsigned long long bias,
                        unsigned long long residual, unsigned long long d, char *why, size_t n);

#endif
