/*
 * cublas.c — cuBLAS loaded with dlopen (libcublas.so.13, then .12), so
 * nothing links to it at build time. Only cublasGemmStridedBatchedEx is
 * used: the runtime calls it for MATMUL kernels whose description says
 * cuBLAS may run them (a bare matmul of plain reads, uniform batch strides).
 *
 * Row-major C = op(A) op(B) is computed as column-major C^T = op(B)^T op(A)^T,
 * i.e. cuBLAS gets B first, m = N, n = M, with the row-major leading dims.
 *
 * cuBLASLt (libcublasLt.so.13/.12, loaded the same way) runs a matmul with
 * its epilogue in one call: D = epilogue(A·B + beta·C) with the bias per
 * output column (a row of the column-major D) and the residual as C with
 * beta 1. The calls are a fixed sequence over a table of attributes; the
 * library's own heuristic picks the algorithm (algo NULL, no workspace).
 *
 * The entry points are a table (codegen/blas_api.h): the libraries', or
 * the emulated device's host reference (emu/blas.c), which a run selects.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "codegen/blas_api.h"
#include "codegen/runtime-impl.h"

enum { CUBLAS_OP_N = MCIR_CUBLAS_OP_N, CUBLAS_OP_T = MCIR_CUBLAS_OP_T, CUBLAS_COMPUTE_32F = MCIR_CUBLAS_COMPUTE_32F,
       CUBLAS_GEMM_DEFAULT = MCIR_CUBLAS_GEMM_DEFAULT, CUDA_R_32F = MCIR_CUDA_R_32F, CUDA_R_16F = MCIR_CUDA_R_16F,
       CUDA_R_16BF = MCIR_CUDA_R_16BF, LT_DESC_TRANSA = MCIR_LT_DESC_TRANSA, LT_DESC_TRANSB = MCIR_LT_DESC_TRANSB,
       LT_DESC_EPILOGUE = MCIR_LT_DESC_EPILOGUE, LT_DESC_BIAS_POINTER = MCIR_LT_DESC_BIAS_POINTER,
       LT_DESC_BIAS_DATA_TYPE = MCIR_LT_DESC_BIAS_DATA_TYPE };

/* The libraries' entry points, dlopen'd once; the emulated device brings
 * its own table (mcir_cu_driver.blas) and a run selects it
 * (cg_blas_select). */
static struct {
    bool tried, ok;
    char why[256];
    void *lib;
} cb, lt;
static mcir_blas_api real;                 /* what loaded of the libraries */
static const mcir_blas_api *selected;      /* the emulated device's, or NULL */

void cg_blas_select(const mcir_blas_api *api) { selected = api; }

static const mcir_blas_api *api(void) { return selected ? selected : &real; }

static bool sym(void *lib, const char *name, void *slot, char *why, size_t n) {
    void *f = dlsym(lib, name);
    if (!f) {
        snprintf(why, n, "%s lacks %s", lib == cb.lib ? "libcublas" : "libcublasLt", name);
        return false;
    }
    memcpy(slot, &f, sizeof f);
    return true;
}

static bool cublas_load(void) {
    if (cb.tried) return cb.ok;
    cb.tried = true;
    const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    for (size_t i = 0; i < 3 && !cb.lib; i++) cb.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!cb.lib) {
        snprintf(cb.why, sizeof cb.why, "cannot load libcublas.so.13/.12: %s", dlerror());
        return false;
    }
    cb.ok = sym(cb.lib, "cublasCreate_v2", &real.create, cb.why, sizeof cb.why) &&
            sym(cb.lib, "cublasDestroy_v2", &real.destroy, cb.why, sizeof cb.why) &&
            sym(cb.lib, "cublasSetStream_v2", &real.set_stream, cb.why, sizeof cb.why) &&
            sym(cb.lib, "cublasGemmStridedBatchedEx", &real.gemm_strided_batched_ex, cb.why, sizeof cb.why);
    return cb.ok;
}

static bool lt_load(void) {
    if (lt.tried) return lt.ok;
    lt.tried = true;
    const char *names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    for (size_t i = 0; i < 3 && !lt.lib; i++) lt.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lt.lib) {
        snprintf(lt.why, sizeof lt.why, "cannot load libcublasLt.so.13/.12: %s", dlerror());
        return false;
    }
    lt.ok = sym(lt.lib, "cublasLtCreate", &real.lt_create, lt.why, sizeof lt.why) &&
            sym(lt.lib, "cublasLtDestroy", &real.lt_destroy, lt.why, sizeof lt.why) &&
            sym(lt.lib, "cublasLtMatmulDescCreate", &real.lt_desc_create, lt.why, sizeof lt.why) &&
            sym(lt.lib, "cublasLtMatmulDescDestroy", &real.lt_desc_destroy, lt.why, sizeof lt.why) &&
            sym(lt.lib, "cublasLtMatmulDescSetAttribute", &real.lt_desc_set, lt.why, sizeof lt.why) &&
            sym(lt.lib, "cublasLtMatrixLayoutCreate", &real.lt_layout_create, lt.why, sizeof lt.why) &&
            sym(lt.lib, "cublasLtMatrixLayoutDestroy", &real.lt_layout_destroy, lt.why, sizeof lt.why) &&
            sym(lt.lib, "cublasLtMatmul", &real.lt_matmul, lt.why, sizeof lt.why);
    return lt.ok;
}

bool mcir_cublaslt_available(char *why, size_t n) {
    if (getenv("MCIR_NO_CUBLAS") || getenv("MCIR_NO_CUBLASLT")) {
        if (why) snprintf(why, n, "disabled by MCIR_NO_CUBLAS / MCIR_NO_CUBLASLT");
        return false;
    }
    if (selected) return true;
    bool ok = lt_load();
    if (!ok && why) snprintf(why, n, "%s", lt.why);
    return ok;
}

bool mcir_cublas_available(char *why, size_t n) {
    if (getenv("MCIR_NO_CUBLAS")) {
        if (why) snprintf(why, n, "disabled by MCIR_NO_CUBLAS");
        return false;
    }
    if (selected) return true;
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
    CG_CHECK("cuBLAS", api()->create(handle), 0, cublas_err, why, n);
    CG_CHECK("cuBLAS", api()->set_stream(*handle, stream), 0, cublas_err, why, n);
    return true;
fail:
    if (*handle) api()->destroy(*handle);
    *handle = NULL;
    return false;
}

void cg_cublas_close(void *handle) {
    if (handle && (selected || cb.ok)) api()->destroy(handle);
}

bool cg_cublas_gemm(void *handle, const cg_gemm_desc *g, unsigned long long a,
                    unsigned long long b, unsigned long long c, char *why, size_t n) {
    int dt = g->dtype == MCIR_DTYPE_F16 ? CUDA_R_16F : g->dtype == MCIR_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    int ct = g->c_dtype == MCIR_DTYPE_F16 ? CUDA_R_16F : g->c_dtype == MCIR_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    float alpha = 1.0f, beta = 0.0f;
    CG_CHECK("cuBLAS",
             api()->gemm_strided_batched_ex(handle, g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                     (int)g->n, (int)g->m, (int)g->k, &alpha, (const void *)(uintptr_t)b, dt,
                     (int)g->ldb, (long long)g->stride_b, (const void *)(uintptr_t)a, dt, (int)g->lda,
                     (long long)g->stride_a, &beta, (void *)(uintptr_t)c, ct, (int)g->ldc,
                     (long long)g->stride_c, (int)g->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             0, cublas_err, why, n);
    return true;
fail:
    return false;
}

bool cg_cublaslt_open(void **handle, char *why, size_t n) {
    *handle = NULL;
    if (!mcir_cublaslt_available(why, n)) return false;
    CG_CHECK("cuBLASLt", api()->lt_create(handle), 0, cublas_err, why, n);
    return true;
fail:
    *handle = NULL;
    return false;
}

void cg_cublaslt_close(void *handle) {
    if (handle && (selected || lt.ok)) api()->lt_destroy(handle);
}

static int cuda_type(mcir_dtype t) {
    return t == MCIR_DTYPE_F16 ? CUDA_R_16F : t == MCIR_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

bool cg_cublaslt_matmul(void *handle, void *stream, const cg_gemm_desc *g, unsigned long long a,
                        unsigned long long b, unsigned long long bias,
                        unsigned long long residual, unsigned long long d, char *why, size_t n) {
    void *desc = NULL, *la = NULL, *lb = NULL, *lc = NULL;
    int dt = cuda_type(g->dtype), ot = cuda_type(g->d_dtype);
    /* column-major: Lt's A is our B ([N, K] op), Lt's B our A, D is [N, M] */
    int op_b = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    unsigned long long b_rows = g->trans_b ? g->k : g->n, b_cols = g->trans_b ? g->n : g->k;
    unsigned long long a_rows = g->trans_a ? g->m : g->k, a_cols = g->trans_a ? g->k : g->m;
    int epi = g->lt_epilogue;
    void *bias_ptr = (void *)(uintptr_t)bias;
    float alpha = 1.0f, beta = residual ? 1.0f : 0.0f;
    const struct { int attr; const void *val; size_t size; } attrs[] = {
        {LT_DESC_TRANSA, &op_b, sizeof op_b},
        {LT_DESC_TRANSB, &op_a, sizeof op_a},
        {LT_DESC_EPILOGUE, &epi, sizeof epi},
        {LT_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr},
        {LT_DESC_BIAS_DATA_TYPE, &ot, sizeof ot},
    };
    CG_CHECK("cuBLASLt", api()->lt_desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), 0, cublas_err, why, n);
    for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++) {
        if ((attrs[i].attr == LT_DESC_BIAS_POINTER || attrs[i].attr == LT_DESC_BIAS_DATA_TYPE) && !bias)
            continue;
        CG_CHECK("cuBLASLt", api()->lt_desc_set(desc, attrs[i].attr, attrs[i].val, attrs[i].size), 0,
                 cublas_err, why, n);
    }
    CG_CHECK("cuBLASLt", api()->lt_layout_create(&lb, dt, b_rows, b_cols, (long long)g->ldb), 0, cublas_err, why, n);
    CG_CHECK("cuBLASLt", api()->lt_layout_create(&la, dt, a_rows, a_cols, (long long)g->lda), 0, cublas_err, why, n);
    CG_CHECK("cuBLASLt", api()->lt_layout_create(&lc, ot, (unsigned long long)g->n, (unsigned long long)g->m,
                                          (long long)g->ldc), 0, cublas_err, why, n);
    CG_CHECK("cuBLASLt",
             api()->lt_matmul(handle, desc, &alpha, (const void *)(uintptr_t)b, lb, (const void *)(uintptr_t)a, la,
                       &beta, residual ? (const void *)(uintptr_t)residual : (const void *)(uintptr_t)d, lc,
                       (void *)(uintptr_t)d, lc, NULL, NULL, 0, stream),
             0, cublas_err, why, n);
    api()->lt_layout_destroy(la);
    api()->lt_layout_destroy(lb);
    api()->lt_layout_destroy(lc);
    api()->lt_desc_destroy(desc);
    return true;
fail:
    if (la) api()->lt_layout_destroy(la);
    if (lb) api()->lt_layout_destroy(lb);
    if (lc) api()->lt_layout_destroy(lc);
    if (desc) api()->lt_desc_destroy(desc);
    return false;
}
