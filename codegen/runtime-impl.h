/*
 * runtime-impl.h — what runtime.c needs from cublas.c (both dlopen'd;
 * handles and device pointers are passed as opaque values).
 */
#ifndef MCIR_RUNTIME_IMPL_H
#define MCIR_RUNTIME_IMPL_H

#include "codegen/codegen-impl.h"

bool cg_cublas_open(void **handle, void *stream, char *why, size_t n);
void cg_cublas_close(void *handle);
bool cg_cublas_gemm(void *handle, const cg_gemm_desc *g, unsigned long long a,
                    unsigned long long b, unsigned long long c, char *why, size_t n);

#endif
