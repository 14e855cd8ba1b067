/*
 * interp-impl.h — internals shared by shape inference (infer.c), the
 * reference kernels (ref*.c) and the interpreter (interp.c): the thread
 * pool and the f32 GEMM.
 * Not part of the public API.
 */
#ifndef MCIR_INTERP_IMPL_H
#define MCIR_INTERP_IMPL_H

#include "mcir-impl.h"

/* Runs fn(ctx, lo, hi) over [0, n) split into contiguous chunks, one per
 * worker (at most mcir_get_threads(), fewer when n is small or the work
 * estimate `cost` — total flops or bytes — is too small to pay for
 * threads). Deterministic: results never depend on the split as long as
 * fn writes disjoint outputs. Nested calls run serially. */
typedef void (*mcir_range_fn)(void *ctx, int64_t lo, int64_t hi);
void mcir_parallel_for(int64_t n, double cost, mcir_range_fn fn, void *ctx);

/* C[m,n] (+)= A[m,k] · B[k,n] in f32, single-threaded (callers split work
 * across rows or batches). Element (i,p) of A is a[i*rsa + p*csa]; element
 * (p,j) of B is b[p*rsb + j*csb]; C is row-major with leading dim ldc.
 * accumulate false: C is overwritten. The summation order of each C
 * element depends only on k (never on the ISA, thread count or tile
 * position), so results are bit-reproducible. */
void mcir_sgemm(int64_t m, int64_t n, int64_t k,
                const float *a, int64_t rsa, int64_t csa,
                const float *b, int64_t rsb, int64_t csb,
                float *c, int64_t ldc, bool accumulate);

/* Tests: use the baseline x86-64 micro-kernel even where AVX2 exists. */
void mcir_sgemm_force_baseline(bool on);

#endif /* MCIR_INTERP_IMPL_H */
