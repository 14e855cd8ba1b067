/*
 * cublas.c — cuBLAS loaded with dlopen (libcublas.so.13, then .12), so
 * nothing links to it at build time. Only cublasGemmStridedBatchedEx is
 * used: the runtime calls it for MATMUL kernels whose description says
 * cuBLAS may run them (a bare matmul of plain reads, uniform batch strides).
 *
 * Row-major C = op(A) op(B) is computed as column-major C^T = op(B)^T op(A)^T,
 * i.e. cuBLAS gets B first, m = N, n = M, with the row-major leading dims.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "codegen/runtime-impl.h"

typedef int (*fn_create)(void **);
typedef int (*fn_destroy)(void *);
typedef int (*fn_set_stream)(void *, void *);
typedef int (*fn_gemm_sb_ex)(void *, int, int, int, int, int, const void *, const void *, int, int,
                             long long, const void *, int, int, long long, const void *, void *,
                             int, int, long long, int, int, int);

static struct {
    bool tried, ok;
    char why[256];
    void *lib;
    fn_create create;
    fn_destroy destroy;
    fn_set_stream set_stream;
    fn_gemm_sb_ex gemm;
} cb;

enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_COMPUTE_32F = 68, CUBLAS_GEMM_DEFAULT = -1,
       CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };

static bool cublas_load(void) {
    if (cb.tried) return cb.ok;
    cb.tried = true;
    const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    for (size_t i = 0; i < 3 && !cb.lib; i++) cb.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!cb.lib) {
        snprintf(cb.why, sizeof cb.why, "cannot load libcublas.so.13/.12: %s", dlerror());
        return false;
    }
    cb.create = (fn_create)dlsym(cb.lib, "cublasCreate_v2");
    cb.destroy = (fn_destroy)dlsym(cb.lib, "cublasDestroy_v2");
    cb.set_stream = (fn_set_stream)dlsym(cb.lib, "cublasSetStream_v2");
    cb.gemm = (fn_gemm_sb_ex)dlsym(cb.lib, "cublasGemmStridedBatchedEx");
    if (!cb.create || !cb.destroy || !cb.set_stream || !cb.gemm) {
        snprintf(cb.why, sizeof cb.why, "libcublas lacks cublasGemmStridedBatchedEx / cublasCreate_v2");
        return false;
    }
    cb.ok = true;
    return true;
}

bool mcir_cublas_available(char *why, size_t n) {
    if (getenv("MCIR_NO_CUBLAS")) {
        if (why) snprintf(why, n, "disabled by MCIR_NO_CUBLAS");
        return false;
    }
    bool ok = cublas_load();
    if (!ok && why) snprintf(why, n, "%s", cb.why);
    return ok;
}

static const char *cublas_err(int rc) {
    switch (rc) {
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
    }
}

bool cg_cublas_open(void **handle, void *stream, char *why, size_t n) {
    *handle = NULL;
    if (!mcir_cublas_available(why, n)) return false;
    CG_CHECK("cuBLAS", cb.create(handle), 0, cublas_err, why, n);
    CG_CHECK("cuBLAS", cb.set_stream(*handle, stream), 0, cublas_err, why, n);
    return true;
fail:
    if (*handle) cb.destroy(*handle);
    *handle = NULL;
    return false;
}

void cg_cublas_close(void *handle) {
    if (handle && cb.ok) cb.destroy(handle);
}

bool cg_cublas_gemm(void *handle, const cg_gemm_desc *g, unsigned long long a,
                    unsigned long long b, unsigned long long c, char *why, size_t n) {
    int dt = g->dtype == MCIR_DTYPE_F16 ? CUDA_R_16F : g->dtype == MCIR_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    int ct = g->c_dtype == MCIR_DTYPE_F16 ? CUDA_R_16F : g->c_dtype == MCIR_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    float alpha = 1.0f, beta = 0.0f;
    CG_CHECK("cuBLAS",
             cb.gemm(handle, g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                     (int)g->n, (int)g->m, (int)g->k, &alpha, (const void *)(uintptr_t)b, dt,
                     (int)g->ldb, (long long)g->stride_b, (const void *)(uintptr_t)a, dt, (int)g->lda,
                     (long long)g->stride_a, &beta, (void *)(uintptr_t)c, ct, (int)g->ldc,
                     (long long)g->stride_c, (int)g->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             0, cublas_err, why, n);
    return true;
fail:
    return false;
}
