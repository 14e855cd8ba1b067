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
 */
#include <dlfcn.h>
#include <stddef.h>
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

/* ------------------------------------------------------------ cuBLASLt */

typedef int (*fn_lt_create)(void **);
typedef int (*fn_lt_destroy)(void *);
typedef int (*fn_lt_desc_create)(void **, int, int);
typedef int (*fn_lt_desc_set)(void *, int, const void *, size_t);
typedef int (*fn_lt_layout_create)(void **, int, unsigned long long, unsigned long long, long long);
typedef int (*fn_lt_matmul)(void *, void *, const void *, const void *, void *, const void *,
                            void *, const void *, const void *, void *, void *, void *,
                            const void *, void *, size_t, void *);

static struct {
    bool tried, ok;
    char why[256];
    void *lib;
    fn_lt_create create;
    fn_lt_destroy destroy, desc_destroy, layout_destroy;
    fn_lt_desc_create desc_create;
    fn_lt_desc_set desc_set;
    fn_lt_layout_create layout_create;
    fn_lt_matmul matmul;
} lt;

/* cublasLt.h values (cublasLtMatmulDescAttributes_t), copied by hand:
 * nothing here includes the toolkit's headers. */
enum { LT_DESC_TRANSA = 3, LT_DESC_TRANSB = 4, LT_DESC_EPILOGUE = 7, LT_DESC_BIAS_POINTER = 8,
       LT_DESC_BIAS_DATA_TYPE = 26 };

static bool lt_load(void) {
    if (lt.tried) return lt.ok;
    lt.tried = true;
    const char *names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    for (size_t i = 0; i < 3 && !lt.lib; i++) lt.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lt.lib) {
        snprintf(lt.why, sizeof lt.why, "cannot load libcublasLt.so.13/.12: %s", dlerror());
        return false;
    }
    static const struct { const char *name; size_t off; } syms[] = {
        {"cublasLtCreate", offsetof(__typeof__(lt), create)},
        {"cublasLtDestroy", offsetof(__typeof__(lt), destroy)},
        {"cublasLtMatmulDescCreate", offsetof(__typeof__(lt), desc_create)},
        {"cublasLtMatmulDescDestroy", offsetof(__typeof__(lt), desc_destroy)},
        {"cublasLtMatmulDescSetAttribute", offsetof(__typeof__(lt), desc_set)},
        {"cublasLtMatrixLayoutCreate", offsetof(__typeof__(lt), layout_create)},
        {"cublasLtMatrixLayoutDestroy", offsetof(__typeof__(lt), layout_destroy)},
        {"cublasLtMatmul", offsetof(__typeof__(lt), matmul)},
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
        void *f = dlsym(lt.lib, syms[i].name);
        if (!f) {
            snprintf(lt.why, sizeof lt.why, "libcublasLt lacks %s", syms[i].name);
            return false;
        }
        memcpy((char *)&lt + syms[i].off, &f, sizeof f);
    }
    lt.ok = true;
    return true;
}

bool mcir_cublaslt_available(char *why, size_t n) {
    if (getenv("MCIR_NO_CUBLAS") || getenv("MCIR_NO_CUBLASLT")) {
        if (why) snprintf(why, n, "disabled by MCIR_NO_CUBLAS / MCIR_NO_CUBLASLT");
        return false;
    }
    bool ok = lt_load();
    if (!ok && why) snprintf(why, n, "%s", lt.why);
    return ok;
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

bool cg_cublaslt_open(void **handle, char *why, size_t n) {
    *handle = NULL;
    if (!mcir_cublaslt_available(why, n)) return false;
    CG_CHECK("cuBLASLt", lt.create(handle), 0, cublas_err, why, n);
    return true;
fail:
    *handle = NULL;
    return false;
}

void cg_cublaslt_close(void *handle) {
    if (handle && lt.ok) lt.destroy(handle);
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
    CG_CHECK("cuBLASLt", lt.desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), 0, cublas_err, why, n);
    for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++) {
        if ((attrs[i].attr == LT_DESC_BIAS_POINTER || attrs[i].attr == LT_DESC_BIAS_DATA_TYPE) && !bias)
            continue;
        CG_CHECK("cuBLASLt", lt.desc_set(desc, attrs[i].attr, attrs[i].val, attrs[i].size), 0,
                 cublas_err, why, n);
    }
    CG_CHECK("cuBLASLt", lt.layout_create(&lb, dt, b_rows, b_cols, (long long)g->ldb), 0, cublas_err, why, n);
    CG_CHECK("cuBLASLt", lt.layout_create(&la, dt, a_rows, a_cols, (long long)g->lda), 0, cublas_err, why, n);
    CG_CHECK("cuBLASLt", lt.layout_create(&lc, ot, (unsigned long long)g->n, (unsigned long long)g->m,
                                          (long long)g->ldc), 0, cublas_err, why, n);
    CG_CHECK("cuBLASLt",
             lt.matmul(handle, desc, &alpha, (const void *)(uintptr_t)b, lb, (const void *)(uintptr_t)a, la,
                       &beta, residual ? (const void *)(uintptr_t)residual : (const void *)(uintptr_t)d, lc,
                       (void *)(uintptr_t)d, lc, NULL, NULL, 0, stream),
             0, cublas_err, why, n);
    lt.layout_destroy(la);
    lt.layout_destroy(lb);
    lt.layout_destroy(lc);
    lt.desc_destroy(desc);
    return true;
fail:
    if (la) lt.layout_destroy(la);
    if (lb) lt.layout_destroy(lb);
    if (lc) lt.layout_destroy(lc);
    if (desc) lt.desc_destroy(desc);
    return false;
}
