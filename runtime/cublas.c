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
 * beta 1. Each such GEMM is prepared once per run (cg_cublaslt_prepare:
 * its descriptor and layouts, and the algorithm cublasLtMatmulAlgoGetHeuristic
 * picks within the workspace the runtime offers, kept per process by
 * shape and device), then every call passes that algorithm and the
 * runtime's workspace. No algorithm (CUBLAS_STATUS_NOT_SUPPORTED) is not
 * an error: the runtime runs the generated kernel instead.
 *
 * The entry points are a table (runtime/blas_api.h): the libraries', or
 * the emulated device's host reference (emu/blas.c), which a run selects.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime-impl.h"
#include "runtime/blas_api.h"

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
            sym(lt.lib, "cublasLtMatmul", &real.lt_matmul, lt.why, sizeof lt.why) &&
            sym(lt.lib, "cublasLtMatmulPreferenceCreate", &real.lt_pref_create, lt.why, sizeof lt.why) &&
            sym(lt.lib, "cublasLtMatmulPreferenceDestroy", &real.lt_pref_destroy, lt.why, sizeof lt.why) &&
            sym(lt.lib, "cublasLtMatmulPreferenceSetAttribute", &real.lt_pref_set, lt.why, sizeof lt.why) &&
            sym(lt.lib, "cublasLtMatmulAlgoGetHeuristic", &real.lt_heuristic, lt.why, sizeof lt.why);
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

/* The algorithms chosen in this process, by what the heuristic saw: the
 * GEMM's shape, types, layouts and epilogue, the workspace offered and the
 * device. A later run of the same GEMM (the next call of a Python model)
 * asks no heuristic. */
typedef struct lt_key {
    long long m, n, k, lda, ldb, ldc;
    int trans_a, trans_b, dtype, d_dtype, epilogue, bias, residual;
    size_t workspace;
    char device[96];
} lt_key;
static struct {
    lt_key key;
    mcir_lt_heuristic algo;
    int status;
} lt_chosen[256];
static int n_lt_chosen;
static long lt_heuristic_calls;

long cg_cublaslt_heuristic_calls(void) { return lt_heuristic_calls; }

static lt_key key_of(const cg_gemm_desc *g, size_t workspace, const char *device) {
    lt_key k;
    memset(&k, 0, sizeof k);   /* the padding too: keys compare by memcmp */
    k.m = g->m, k.n = g->n, k.k = g->k, k.lda = g->lda, k.ldb = g->ldb, k.ldc = g->ldc;
    k.trans_a = g->trans_a, k.trans_b = g->trans_b, k.dtype = g->dtype, k.d_dtype = g->d_dtype;
    k.epilogue = g->lt_epilogue, k.bias = g->read_bias >= 0, k.residual = g->read_residual >= 0;
    k.workspace = workspace;
    snprintf(k.device, sizeof k.device, "%s", device ? device : "");
    return k;
}

void cg_cublaslt_release(cg_lt_plan *p) {
    if (p->la) api()->lt_layout_destroy(p->la);
    if (p->lb) api()->lt_layout_destroy(p->lb);
    if (p->lc) api()->lt_layout_destroy(p->lc);
    if (p->desc) api()->lt_desc_destroy(p->desc);
    memset(p, 0, sizeof *p);
}

bool cg_cublaslt_prepare(void *handle, const cg_gemm_desc *g, size_t workspace, const char *device, cg_lt_plan *p,
                         char *why, size_t n) {
    memset(p, 0, sizeof *p);
    int dt = cuda_type(g->dtype), ot = cuda_type(g->d_dtype);
    /* column-major: Lt's A is our B ([N, K] op), Lt's B our A, D is [N, M] */
    int op_b = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    unsigned long long b_rows = g->trans_b ? g->k : g->n, b_cols = g->trans_b ? g->n : g->k;
    unsigned long long a_rows = g->trans_a ? g->m : g->k, a_cols = g->trans_a ? g->k : g->m;
    int epi = g->lt_epilogue;
    const struct { int attr; const void *val; size_t size; } attrs[] = {
        {LT_DESC_TRANSA, &op_b, sizeof op_b},
        {LT_DESC_TRANSB, &op_a, sizeof op_a},
        {LT_DESC_EPILOGUE, &epi, sizeof epi},
        {LT_DESC_BIAS_DATA_TYPE, &ot, sizeof ot},
    };
    void *pref = NULL;
    CG_CHECK("cuBLASLt", api()->lt_desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), 0, cublas_err, why, n);
    for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++) {
        if (attrs[i].attr == LT_DESC_BIAS_DATA_TYPE && g->read_bias < 0) continue;
        CG_CHECK("cuBLASLt", api()->lt_desc_set(p->desc, attrs[i].attr, attrs[i].val, attrs[i].size), 0,
                 cublas_err, why, n);
    }
    CG_CHECK("cuBLASLt", api()->lt_layout_create(&p->lb, dt, b_rows, b_cols, (long long)g->ldb), 0, cublas_err, why, n);
    CG_CHECK("cuBLASLt", api()->lt_layout_create(&p->la, dt, a_rows, a_cols, (long long)g->lda), 0, cublas_err, why, n);
    CG_CHECK("cuBLASLt", api()->lt_layout_create(&p->lc, ot, (unsigned long long)g->n, (unsigned long long)g->m,
                                          (long long)g->ldc), 0, cublas_err, why, n);
    lt_key key = key_of(g, workspace, device);
    for (int i = 0; i < n_lt_chosen; i++)
        if (memcmp(&lt_chosen[i].key, &key, sizeof key) == 0) {
            p->algo = lt_chosen[i].algo;
            p->status = lt_chosen[i].status;
            goto chosen;
        }
    CG_CHECK("cuBLASLt", api()->lt_pref_create(&pref), 0, cublas_err, why, n);
    CG_CHECK("cuBLASLt", api()->lt_pref_set(pref, MCIR_LT_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace), 0,
             cublas_err, why, n);
    int found = 0;
    lt_heuristic_calls++;
    p->status = api()->lt_heuristic(handle, p->desc, p->lb, p->la, p->lc, p->lc, pref, 1, &p->algo, &found);
    api()->lt_pref_destroy(pref);
    pref = NULL;
    if (p->status == 0 && (found < 1 || p->algo.state != 0)) p->status = MCIR_CUBLAS_STATUS_NOT_SUPPORTED;
    if (p->status != 0 && p->status != MCIR_CUBLAS_STATUS_NOT_SUPPORTED) {
        snprintf(why, n, "cuBLASLt error %d (%s) in cublasLtMatmulAlgoGetHeuristic", p->status, cublas_err(p->status));
        goto fail;
    }
    if (n_lt_chosen < (int)(sizeof lt_chosen / sizeof *lt_chosen)) {
        lt_chosen[n_lt_chosen].key = key;
        lt_chosen[n_lt_chosen].algo = p->algo;
        lt_chosen[n_lt_chosen++].status = p->status;
    }
chosen:
    if (p->status != 0) {
        snprintf(why, n, "cuBLASLt has no algorithm for it (CUBLAS_STATUS_NOT_SUPPORTED)");
        cg_cublaslt_release(p);
        p->status = MCIR_CUBLAS_STATUS_NOT_SUPPORTED;
        return false;
    }
    p->ready = true;
    return true;
fail:
    if (pref) api()->lt_pref_destroy(pref);
    cg_cublaslt_release(p);
    return false;
}

bool cg_cublaslt_run(void *handle, void *stream, cg_lt_plan *p, const cg_gemm_desc *g, unsigned long long a,
                     unsigned long long b, unsigned long long bias, unsigned long long residual,
                     unsigned long long d, unsigned long long workspace, size_t workspace_bytes, char *why,
                     size_t n) {
    void *bias_ptr = (void *)(uintptr_t)bias;
    float alpha = 1.0f, beta = residual ? 1.0f : 0.0f;
    (void)g;
    if (bias)
        CG_CHECK("cuBLASLt", api()->lt_desc_set(p->desc, LT_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr), 0,
                 cublas_err, why, n);
    p->status = api()->lt_matmul(handle, p->desc, &alpha, (const void *)(uintptr_t)b, p->lb,
                                 (const void *)(uintptr_t)a, p->la, &beta,
                                 residual ? (const void *)(uintptr_t)residual : (const void *)(uintptr_t)d, p->lc,
                                 (void *)(uintptr_t)d, p->lc, p->algo.algo, (void *)(uintptr_t)workspace,
                                 p->algo.workspace ? workspace_bytes : 0, stream);
    if (p->status != 0) {
        snprintf(why, n, "cuBLASLt error %d (%s) in cublasLtMatmul", p->status, cublas_err(p->status));
        return false;
    }
    return true;
fail:
    return false;
}
