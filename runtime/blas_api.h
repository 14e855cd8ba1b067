/*
 * blas_api.h — the cuBLAS and cuBLASLt entry points mcir calls, as one
 * table: the libraries' own (dlopen'd by runtime/cublas.c) or the
 * emulated device's host reference (emu/blas.c), chosen per run by the
 * driver table (mcir_cu_driver.blas). Signatures and enum values are the
 * C API's (cublas_api.h, cublasLt.h), declared here by hand: nothing
 * includes the toolkit's headers.
 */
#ifndef MCIR_BLAS_API_H
#define MCIR_BLAS_API_H

#include <stddef.h>

/* cublasLtMatmulHeuristicResult_t, as cublasLt.h lays it out: the chosen
 * algorithm (cublasLtMatmulAlgo_t, opaque), the workspace it needs, its
 * status, its waves count. */
typedef struct mcir_lt_heuristic {
    unsigned long long algo[8];
    size_t workspace;
    int state;
    float waves;
    int reserved[4];
} mcir_lt_heuristic;
_Static_assert(sizeof(mcir_lt_heuristic) == 96, "cublasLtMatmulHeuristicResult_t is 96 bytes");

typedef struct mcir_blas_api {
    /* cuBLAS */
    int (*create)(void **handle);
    int (*destroy)(void *handle);
    int (*set_stream)(void *handle, void *stream);
    int (*gemm_strided_batched_ex)(void *handle, int transa, int transb, int m, int n, int k, const void *alpha,
                                   const void *a, int a_type, int lda, long long stride_a, const void *b, int b_type,
                                   int ldb, long long stride_b, const void *beta, void *c, int c_type, int ldc,
                                   long long stride_c, int batch, int compute_type, int algo);
    /* cuBLASLt */
    int (*lt_create)(void **handle);
    int (*lt_destroy)(void *handle);
    int (*lt_desc_create)(void **desc, int compute_type, int scale_type);
    int (*lt_desc_destroy)(void *desc);
    int (*lt_desc_set)(void *desc, int attr, const void *value, size_t size);
    int (*lt_layout_create)(void **layout, int type, unsigned long long rows, unsigned long long cols, long long ld);
    int (*lt_layout_destroy)(void *layout);
    int (*lt_matmul)(void *handle, void *desc, const void *alpha, const void *a, void *a_layout, const void *b,
                     void *b_layout, const void *beta, const void *c, void *c_layout, void *d, void *d_layout,
                     const void *algo, void *workspace, size_t workspace_bytes, void *stream);
    int (*lt_pref_create)(void **pref);
    int (*lt_pref_destroy)(void *pref);
    int (*lt_pref_set)(void *pref, int attr, const void *value, size_t size);
    int (*lt_heuristic)(void *handle, void *desc, void *a_layout, void *b_layout, void *c_layout, void *d_layout,
                        void *pref, int requested, mcir_lt_heuristic *results, int *returned);
} mcir_blas_api;

enum {
    MCIR_CUBLAS_OP_N = 0,
    MCIR_CUBLAS_OP_T = 1,
    MCIR_CUBLAS_COMPUTE_32F = 68,
    MCIR_CUBLAS_GEMM_DEFAULT = -1,
    MCIR_CUDA_R_32F = 0,
    MCIR_CUDA_R_16F = 2,
    MCIR_CUDA_R_16BF = 14,
    MCIR_CUBLAS_STATUS_NOT_INITIALIZED = 1,
    MCIR_CUBLAS_STATUS_INVALID_VALUE = 7,
    MCIR_CUBLAS_STATUS_EXECUTION_FAILED = 13,
    MCIR_CUBLAS_STATUS_NOT_SUPPORTED = 15,
    /* cublasLtMatmulDescAttributes_t */
    MCIR_LT_DESC_TRANSA = 3,
    MCIR_LT_DESC_TRANSB = 4,
    MCIR_LT_DESC_EPILOGUE = 7,
    MCIR_LT_DESC_BIAS_POINTER = 8,
    MCIR_LT_DESC_BIAS_DATA_TYPE = 26,
    /* cublasLtMatmulPreferenceAttributes_t */
    MCIR_LT_PREF_MAX_WORKSPACE_BYTES = 1,
    /* cublasLtEpilogue_t */
    MCIR_LT_EPILOGUE_DEFAULT = 1,
    MCIR_LT_EPILOGUE_RELU = 2,
    MCIR_LT_EPILOGUE_BIAS = 4,
    MCIR_LT_EPILOGUE_GELU = 32,
};

#endif /* MCIR_BLAS_API_H */
