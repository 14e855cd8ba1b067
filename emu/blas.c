/*
 * blas.c — the emulated device's cuBLAS and cuBLASLt: host reference GEMMs
 * over the entry points mcir calls (runtime/blas_api.h), honouring exactly
 * the arguments given — column-major operands, transposes, leading dims,
 * batch strides, alpha / beta, the input and output types, cuBLASLt's
 * epilogues (ReLU, GELU, bias per row of D) and its matrix layouts — so a
 * wrong argument of the runtime shows as a wrong result, or as a finding:
 * an operand that reaches past the tensor its pointer names is
 * out-of-bounds, a read of bytes never written is uninitialised (both
 * checked against the device's memory and the runtime's names), and an
 * argument cuBLAS itself rejects (a leading dim below the rows) is
 * CUBLAS_STATUS_INVALID_VALUE.
 *
 * Invariant: values are read and written in their storage type and
 * accumulated in f32 in k order (cuBLAS's own order is not specified; the
 * comparison with the interpreter has the dtype's tolerance).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emu/emu-impl.h"
#include "mcir/mcir.h"

enum { EMU_HANDLE_MAGIC = 0x6d626c73 };

typedef struct handle { int magic; void *stream; } handle;   /* stream: cublasSetStream's */
typedef struct lt_desc { int transa, transb, epilogue, bias_type; const void *bias; } lt_desc;
typedef struct lt_layout { int type; unsigned long long rows, cols; long long ld; } lt_layout;

static int esize(int type) { return type == MCIR_CUDA_R_32F ? 4 : type == MCIR_CUDA_R_16F || type == MCIR_CUDA_R_16BF ? 2 : 0; }

static float load(int type, const unsigned char *p) {
    if (type == MCIR_CUDA_R_32F) {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return type == MCIR_CUDA_R_16F ? mcir_f16_to_f32(h) : mcir_bf16_to_f32(h);
}

static void store(int type, unsigned char *p, float v) {
    if (type == MCIR_CUDA_R_32F) {
        memcpy(p, &v, 4);
        return;
    }
    uint16_t h = type == MCIR_CUDA_R_16F ? mcir_f32_to_f16(v) : mcir_f32_to_bf16(v);
    memcpy(p, &h, 2);
}

/* One operand of a call: the elements it touches, [lo, hi) in bytes from
 * its pointer, must lie in the tensor the runtime named at that pointer
 * (or, unnamed, in one allocation). */
typedef struct operand {
    const char *call, *what;
    uintptr_t p;
    int type;
    const emu_mem *mem;
    size_t off;   /* p's offset in mem */
} operand;

static bool operand_check(operand *o, size_t span, bool write) {
    uintptr_t start;
    size_t bytes;
    const char *name = emu_dev_name_of(o->p, &start, &bytes);
    o->mem = emu_dev_find(o->p, 0, &o->off);
    if (!o->mem) {
        emu_dev_finding("out-of-bounds", "%s %s %s at %#lx, which is no device memory", o->call,
                        write ? "writes" : "reads", o->what, (unsigned long)o->p);
        return false;
    }
    if (o->p < start || (o->p - start) + span > bytes) {
        emu_dev_finding("out-of-bounds", "%s %s %s through '%s': %zu bytes from byte %zu of its %zu", o->call,
                        write ? "writes" : "reads", o->what, name, span, (size_t)(o->p - start), bytes);
        return false;
    }
    if (o->off + span > o->mem->bytes) {
        emu_dev_finding("out-of-bounds", "%s %s %s past its allocation", o->call, write ? "writes" : "reads", o->what);
        return false;
    }
    return true;
}

/* Element (r, c) of a column-major matrix with leading dim ld, batch b. */
static size_t at(int64_t r, int64_t c, int64_t ld, int64_t b, long long stride, int es) {
    return (size_t)((r + c * ld + b * stride) * es);
}

static bool read_init(operand *o, size_t byte, int es) {
    if (!emu_dev_init_checked()) return true;
    const unsigned char *init = o->mem->init + o->off + byte;
    for (int i = 0; i < es; i++)
        if (!init[i]) {
            uintptr_t start;
            const char *name = emu_dev_name_of(o->p, &start, NULL);
            emu_dev_finding("uninitialised", "%s reads %s: byte %zu of '%s', which nothing wrote", o->call, o->what,
                            (size_t)(o->p + byte - start), name);
            return false;
        }
    return true;
}

/* op(X) of a column-major rows x cols operand as an f32 matrix
 * out[r * cols_op + c] of op(X) (op: transpose or not), every element
 * checked initialised; false (a finding) otherwise. */
static bool unpack(operand *o, const unsigned char *base, bool trans, int64_t rows_op, int64_t cols_op, int64_t ld,
                   int64_t b, long long stride, int es, float *out) {
    for (int64_t r = 0; r < rows_op; r++)
        for (int64_t c = 0; c < cols_op; c++) {
            size_t x = trans ? at(c, r, ld, b, stride, es) : at(r, c, ld, b, stride, es);
            if (!read_init(o, x, es)) return false;
            out[r * cols_op + c] = load(o->type, base + x);
        }
    return true;
}

/* acc[i][j] = sum_l a[i][l] b[l][j] (row-major, f32, l in order) */
static void gemm_f32(const float *a, const float *b, float *acc, int64_t m, int64_t n, int64_t k) {
    memset(acc, 0, sizeof(float) * (size_t)(m * n));
    for (int64_t i = 0; i < m; i++)
        for (int64_t l = 0; l < k; l++) {
            const float x = a[i * k + l], *br = b + l * n;
            float *cr = acc + i * n;
            for (int64_t j = 0; j < n; j++) cr[j] += x * br[j];
        }
}

static float *buffer(int64_t n) {
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    MCIR_ASSERT(p != NULL);
    return p;
}

/* The span of an operand: its last touched element's end. */
static size_t span_of(int64_t rows, int64_t cols, int64_t ld, int batch, long long stride, int es) {
    if (rows <= 0 || cols <= 0 || batch <= 0) return 0;
    return at(rows - 1, cols - 1, ld, batch - 1, stride, es) + (size_t)es;
}

/* MCIR_EMU_BLAS_OPEN=fail: neither handle opens (a library that does not
 * load or initialise on the machine); =lt: cuBLASLt's does not. */
static int create_handle(void **h) {
    handle *x = malloc(sizeof *x);
    if (!x) return 3;
    x->magic = EMU_HANDLE_MAGIC;
    x->stream = NULL;
    *h = x;
    return 0;
}

static int create(void **h) {
    const char *f = getenv("MCIR_EMU_BLAS_OPEN");
    if (f && !strcmp(f, "fail")) return MCIR_CUBLAS_STATUS_NOT_INITIALIZED;
    return create_handle(h);
}

static int lt_create(void **h) {
    const char *f = getenv("MCIR_EMU_BLAS_OPEN");
    if (f && (!strcmp(f, "fail") || !strcmp(f, "lt"))) return MCIR_CUBLAS_STATUS_NOT_INITIALIZED;
    return create_handle(h);
}

static int destroy(void *h) {
    free(h);
    return 0;
}

static int set_stream(void *h, void *s) {
    if (!h || ((handle *)h)->magic != EMU_HANDLE_MAGIC) return MCIR_CUBLAS_STATUS_NOT_INITIALIZED;
    ((handle *)h)->stream = s;
    return 0;
}

/* C[b] = alpha op(A[b]) op(B[b]) + beta C[b], column-major: op(A) m x k,
 * op(B) k x n, C m x n. */
static int gemm_run(void *h, int transa, int transb, int m, int n, int k, const void *alpha,
                                   const void *a, int a_type, int lda, long long stride_a, const void *b, int b_type,
                                   int ldb, long long stride_b, const void *beta, void *c, int c_type, int ldc,
                                   long long stride_c, int batch, int compute_type, int algo) {
    (void)algo;
    if (!h || ((handle *)h)->magic != EMU_HANDLE_MAGIC) return 1;   /* CUBLAS_STATUS_NOT_INITIALIZED */
    if (emu_dev_sticky()) return 13;   /* CUBLAS_STATUS_EXECUTION_FAILED: the context has an error */
    if (emu_dev_hung()) return 0;      /* queued behind a launch that never completes */
    int ea = esize(a_type), eb = esize(b_type), ec = esize(c_type);
    int64_t ar = transa == MCIR_CUBLAS_OP_N ? m : k, ac = transa == MCIR_CUBLAS_OP_N ? k : m;
    int64_t br = transb == MCIR_CUBLAS_OP_N ? k : n, bc = transb == MCIR_CUBLAS_OP_N ? n : k;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || !ea || !eb || !ec || compute_type != MCIR_CUBLAS_COMPUTE_32F ||
        (transa != MCIR_CUBLAS_OP_N && transa != MCIR_CUBLAS_OP_T) ||
        (transb != MCIR_CUBLAS_OP_N && transb != MCIR_CUBLAS_OP_T) || lda < (ar > 1 ? ar : 1) ||
        ldb < (br > 1 ? br : 1) || ldc < (m > 1 ? m : 1))
        return MCIR_CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0 || batch == 0) return 0;
    emu_dev_clear_findings();
    const char *call = "cublasGemmStridedBatchedEx";
    operand A = {call, "A", (uintptr_t)a, a_type, NULL, 0}, B = {call, "B", (uintptr_t)b, b_type, NULL, 0},
            C = {call, "C", (uintptr_t)c, c_type, NULL, 0};
    if (k > 0 && (!operand_check(&A, span_of(ar, ac, lda, batch, stride_a, ea), false) ||
                  !operand_check(&B, span_of(br, bc, ldb, batch, stride_b, eb), false)))
        return MCIR_CUBLAS_STATUS_EXECUTION_FAILED;
    if (!operand_check(&C, span_of(m, n, ldc, batch, stride_c, ec), true)) return MCIR_CUBLAS_STATUS_EXECUTION_FAILED;
    float al = *(const float *)alpha, be = *(const float *)beta;
    float *fa = buffer(m * k), *fb = buffer(k * n), *acc = buffer(m * n);
    int rc = 0;
    for (int bi = 0; bi < batch && !rc; bi++) {
        if (!unpack(&A, a, transa != MCIR_CUBLAS_OP_N, m, k, lda, bi, stride_a, ea, fa) ||
            !unpack(&B, b, transb != MCIR_CUBLAS_OP_N, k, n, ldb, bi, stride_b, eb, fb)) {
            rc = MCIR_CUBLAS_STATUS_EXECUTION_FAILED;
            break;
        }
        gemm_f32(fa, fb, acc, m, n, k);
        unsigned char *pc = c;
        for (int64_t j = 0; j < n && !rc; j++)
            for (int64_t i = 0; i < m; i++) {
                size_t xc = at(i, j, ldc, bi, stride_c, ec);
                float v = al * acc[i * n + j];
                if (be != 0.0f) {
                    if (!read_init(&C, xc, ec)) {
                        rc = MCIR_CUBLAS_STATUS_EXECUTION_FAILED;
                        break;
                    }
                    v += be * load(c_type, pc + xc);
                }
                store(c_type, pc + xc, v);
                memset(C.mem->init + C.off + xc, 1, (size_t)ec);
            }
    }
    free(fa);
    free(fb);
    free(acc);
    return rc;
}

/* A call on a stream that is capturing (CUDA graphs): its arguments, the
 * scalars by value (host pointer mode: cuBLAS reads them when called),
 * recorded to run at each replay. */
typedef struct gemm_args {
    void *h;
    int transa, transb, m, n, k;
    float alpha, beta;
    const void *a, *b;
    void *c;
    int a_type, lda, b_type, ldb, c_type, ldc, batch, compute_type, algo;
    long long stride_a, stride_b, stride_c;
} gemm_args;

static int gemm_replay(const void *args) {
    const gemm_args *x = args;
    return gemm_run(x->h, x->transa, x->transb, x->m, x->n, x->k, &x->alpha, x->a, x->a_type, x->lda, x->stride_a,
                    x->b, x->b_type, x->ldb, x->stride_b, &x->beta, x->c, x->c_type, x->ldc, x->stride_c, x->batch,
                    x->compute_type, x->algo);
}

static int gemm_strided_batched_ex(void *h, int transa, int transb, int m, int n, int k, const void *alpha,
                                   const void *a, int a_type, int lda, long long stride_a, const void *b, int b_type,
                                   int ldb, long long stride_b, const void *beta, void *c, int c_type, int ldc,
                                   long long stride_c, int batch, int compute_type, int algo) {
    if (!h || ((handle *)h)->magic != EMU_HANDLE_MAGIC) return 1;   /* CUBLAS_STATUS_NOT_INITIALIZED */
    gemm_args x = {h, transa, transb, m, n, k, *(const float *)alpha, *(const float *)beta, a, b, c, a_type, lda,
                   b_type, ldb, c_type, ldc, batch, compute_type, algo, stride_a, stride_b, stride_c};
    if (emu_dev_capture_call(((handle *)h)->stream, gemm_replay, &x, sizeof x)) return 0;
    emu_touch t[3] = {{(uintptr_t)a, 0, false}, {(uintptr_t)b, 0, false}, {(uintptr_t)c, 0, true}};
    if (!emu_dev_stream_touch(((handle *)h)->stream, "cublasGemmStridedBatchedEx", 3, t)) return 13;
    return gemm_run(h, transa, transb, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb, stride_b, beta, c,
                    c_type, ldc, stride_c, batch, compute_type, algo);
}

/* ------------------------------------------------------------ cuBLASLt */

static int lt_desc_create(void **d, int compute_type, int scale_type) {
    if (compute_type != MCIR_CUBLAS_COMPUTE_32F || scale_type != MCIR_CUDA_R_32F) return MCIR_CUBLAS_STATUS_NOT_SUPPORTED;
    lt_desc *x = calloc(1, sizeof *x);
    if (!x) return 3;
    x->epilogue = MCIR_LT_EPILOGUE_DEFAULT;
    x->bias_type = -1;
    *d = x;
    return 0;
}

static int lt_desc_set(void *d, int attr, const void *value, size_t size) {
    lt_desc *x = d;
    int v = 0;
    if (size == sizeof(int)) memcpy(&v, value, sizeof v);
    switch (attr) {
    case MCIR_LT_DESC_TRANSA: x->transa = v; break;
    case MCIR_LT_DESC_TRANSB: x->transb = v; break;
    case MCIR_LT_DESC_EPILOGUE: x->epilogue = v; break;
    case MCIR_LT_DESC_BIAS_DATA_TYPE: x->bias_type = v; break;
    case MCIR_LT_DESC_BIAS_POINTER:
        if (size != sizeof(void *)) return MCIR_CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&x->bias, value, sizeof x->bias);
        break;
    default: return MCIR_CUBLAS_STATUS_INVALID_VALUE;
    }
    return 0;
}

static int lt_layout_create(void **l, int type, unsigned long long rows, unsigned long long cols, long long ld) {
    if (!esize(type)) return MCIR_CUBLAS_STATUS_NOT_SUPPORTED;
    if (ld < (long long)(rows > 1 ? rows : 1)) return MCIR_CUBLAS_STATUS_INVALID_VALUE;
    lt_layout *x = calloc(1, sizeof *x);
    if (!x) return 3;
    *x = (lt_layout){type, rows, cols, ld};
    *l = x;
    return 0;
}

static int lt_free(void *p) {
    free(p);
    return 0;
}

/* Preferences: the most workspace an algorithm may ask for. */
typedef struct lt_pref { size_t max_workspace; } lt_pref;

static int lt_pref_create(void **p) {
    *p = calloc(1, sizeof(lt_pref));
    return *p ? 0 : 3;
}

static int lt_pref_set(void *p, int attr, const void *value, size_t size) {
    if (attr != MCIR_LT_PREF_MAX_WORKSPACE_BYTES || size != sizeof(size_t)) return MCIR_CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&((lt_pref *)p)->max_workspace, value, sizeof(size_t));
    return 0;
}

enum { EMU_ALGO_MAGIC = 0x6f676c4174756d65ull };   /* "emutAlgo" */
static long emu_heuristics, emu_lt_calls;

void mcir_emu_blas_counts(long *heuristics, long *lt_calls) {
    *heuristics = emu_heuristics;
    *lt_calls = emu_lt_calls;
}

/* The problem an Lt call computes, from its layouts: m, n, k. */
static bool lt_problem(const lt_desc *x, const lt_layout *la, const lt_layout *lb, int64_t *m, int64_t *n, int64_t *k) {
    *m = (int64_t)(x->transa == MCIR_CUBLAS_OP_N ? la->rows : la->cols);
    *k = (int64_t)(x->transa == MCIR_CUBLAS_OP_N ? la->cols : la->rows);
    int64_t kb = (int64_t)(x->transb == MCIR_CUBLAS_OP_N ? lb->rows : lb->cols);
    *n = (int64_t)(x->transb == MCIR_CUBLAS_OP_N ? lb->cols : lb->rows);
    return *k == kb;
}

/* One algorithm per problem, as a library's heuristic returns it: it names
 * the problem it was chosen for (a call of another shape with it is
 * CUBLAS_STATUS_INVALID_VALUE) and needs a workspace (a split-K's f32
 * partial products: 4 m n bytes, at most what the preference allows).
 * MCIR_EMU_LT_UNSUPPORTED=1: no algorithm (NOT_SUPPORTED); =run: the
 * heuristic answers and cublasLtMatmul refuses. */
static int lt_heuristic(void *h, void *desc, void *a_layout, void *b_layout, void *c_layout, void *d_layout,
                        void *pref, int requested, mcir_lt_heuristic *results, int *returned) {
    (void)c_layout;
    (void)d_layout;
    if (!h || ((handle *)h)->magic != EMU_HANDLE_MAGIC) return 1;
    if (requested < 1) return MCIR_CUBLAS_STATUS_INVALID_VALUE;
    emu_heuristics++;
    *returned = 0;
    const char *u = getenv("MCIR_EMU_LT_UNSUPPORTED");
    if (u && !strcmp(u, "1")) return MCIR_CUBLAS_STATUS_NOT_SUPPORTED;
    int64_t m, n, k;
    if (!lt_problem(desc, a_layout, b_layout, &m, &n, &k)) return MCIR_CUBLAS_STATUS_INVALID_VALUE;
    memset(results, 0, sizeof *results);
    results->algo[0] = EMU_ALGO_MAGIC;
    results->algo[1] = (unsigned long long)m;
    results->algo[2] = (unsigned long long)n;
    results->algo[3] = (unsigned long long)k;
    size_t want = (size_t)(4 * m * n), most = ((const lt_pref *)pref)->max_workspace;
    results->workspace = want < most ? want : most;
    results->algo[4] = results->workspace;   /* what a call with it must be given */
    results->waves = 1.0f;
    *returned = 1;
    return 0;
}

/* [p, p + n) and [q, q + m) share a byte. */
static bool overlaps(uintptr_t p, size_t n, uintptr_t q, size_t m) { return n && m && p < q + m && q < p + n; }

/* cuBLASLt's GELU epilogue: the tanh approximation. */
static float gelu_tanh(float x) { return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x))); }

/* D = epilogue(alpha op(A) op(B) + beta C), column-major layouts; the bias
 * (one value per row of D) is added before the activation. */
static int lt_matmul_run(void *h, void *desc, const void *alpha, const void *a, void *a_layout, const void *b,
                     void *b_layout, const void *beta, const void *c, void *c_layout, void *d, void *d_layout,
                     const void *algo, void *workspace, size_t workspace_bytes, void *stream) {
    (void)stream;
    if (emu_dev_sticky()) return 13;   /* CUBLAS_STATUS_EXECUTION_FAILED */
    if (emu_dev_hung()) return 0;
    if (!h || ((handle *)h)->magic != EMU_HANDLE_MAGIC) return 1;
    emu_lt_calls++;
    const lt_desc *x = desc;
    const lt_layout *la = a_layout, *lb = b_layout, *lc = c_layout, *ld = d_layout;
    int64_t m, n, k;
    if (!lt_problem(x, la, lb, &m, &n, &k) || (int64_t)lc->rows != m || (int64_t)lc->cols != n ||
        (int64_t)ld->rows != m || (int64_t)ld->cols != n)
        return MCIR_CUBLAS_STATUS_INVALID_VALUE;
    const char *u = getenv("MCIR_EMU_LT_UNSUPPORTED");
    if (u && !strcmp(u, "run")) return MCIR_CUBLAS_STATUS_NOT_SUPPORTED;
    /* the algorithm: one the heuristic chose for this very problem */
    mcir_lt_heuristic chosen;
    if (algo) memcpy(chosen.algo, algo, sizeof chosen.algo);
    if (!algo || chosen.algo[0] != EMU_ALGO_MAGIC || chosen.algo[1] != (unsigned long long)m ||
        chosen.algo[2] != (unsigned long long)n || chosen.algo[3] != (unsigned long long)k) {
        emu_dev_clear_findings();
        emu_dev_finding("out-of-bounds", "cublasLtMatmul with %s", algo ? "an algorithm chosen for another problem"
                                                                          : "no algorithm (NULL: a heuristic per call)");
        return MCIR_CUBLAS_STATUS_INVALID_VALUE;
    }
    int epi = x->epilogue;
    bool bias = epi & MCIR_LT_EPILOGUE_BIAS, relu = epi & MCIR_LT_EPILOGUE_RELU, gelu = epi & MCIR_LT_EPILOGUE_GELU;
    if ((epi & ~(MCIR_LT_EPILOGUE_DEFAULT | MCIR_LT_EPILOGUE_RELU | MCIR_LT_EPILOGUE_BIAS | MCIR_LT_EPILOGUE_GELU)) ||
        (relu && gelu) || (bias && (!x->bias || !esize(x->bias_type))))
        return MCIR_CUBLAS_STATUS_NOT_SUPPORTED;
    emu_dev_clear_findings();
    const char *call = "cublasLtMatmul";
    int ea = esize(la->type), eb = esize(lb->type), ec = esize(lc->type), ed = esize(ld->type);
    operand A = {call, "A", (uintptr_t)a, la->type, NULL, 0}, B = {call, "B", (uintptr_t)b, lb->type, NULL, 0},
            C = {call, "C", (uintptr_t)c, lc->type, NULL, 0}, D = {call, "D", (uintptr_t)d, ld->type, NULL, 0},
            Bias = {call, "the bias", (uintptr_t)x->bias, x->bias_type, NULL, 0};
    float al = *(const float *)alpha, be = *(const float *)beta;
    if (k > 0 && (!operand_check(&A, span_of((int64_t)la->rows, (int64_t)la->cols, la->ld, 1, 0, ea), false) ||
                  !operand_check(&B, span_of((int64_t)lb->rows, (int64_t)lb->cols, lb->ld, 1, 0, eb), false)))
        return MCIR_CUBLAS_STATUS_EXECUTION_FAILED;
    if ((be != 0.0f && !operand_check(&C, span_of(m, n, lc->ld, 1, 0, ec), false)) ||
        !operand_check(&D, span_of(m, n, ld->ld, 1, 0, ed), true) ||
        (bias && !operand_check(&Bias, (size_t)(m * esize(x->bias_type)), false)))
        return MCIR_CUBLAS_STATUS_EXECUTION_FAILED;
    /* the workspace the algorithm needs: device memory of its own, which
     * the library overwrites (a workspace over an operand is a race) */
    size_t need = (size_t)chosen.algo[4];
    if (need > workspace_bytes) {
        emu_dev_finding("out-of-bounds", "cublasLtMatmul: the algorithm needs %zu bytes of workspace, %zu given",
                        need, workspace_bytes);
        return MCIR_CUBLAS_STATUS_INVALID_VALUE;
    }
    if (need > 0) {
        operand W = {call, "its workspace", (uintptr_t)workspace, MCIR_CUDA_R_32F, NULL, 0};
        if (!workspace) {
            emu_dev_finding("out-of-bounds", "cublasLtMatmul: the algorithm needs %zu bytes of workspace, none given",
                            need);
            return MCIR_CUBLAS_STATUS_INVALID_VALUE;
        }
        if (!operand_check(&W, need, true)) return MCIR_CUBLAS_STATUS_EXECUTION_FAILED;
        const struct { const operand *o; size_t span; } ops[] = {
            {&A, k > 0 ? span_of((int64_t)la->rows, (int64_t)la->cols, la->ld, 1, 0, ea) : 0},
            {&B, k > 0 ? span_of((int64_t)lb->rows, (int64_t)lb->cols, lb->ld, 1, 0, eb) : 0},
            {&C, be != 0.0f ? span_of(m, n, lc->ld, 1, 0, ec) : 0},
            {&D, span_of(m, n, ld->ld, 1, 0, ed)},
            {&Bias, bias ? (size_t)(m * esize(x->bias_type)) : 0},
        };
        for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
            if (overlaps((uintptr_t)workspace, need, ops[i].o->p, ops[i].span)) {
                emu_dev_finding("race", "cublasLtMatmul's workspace (%zu bytes) overlaps %s", need, ops[i].o->what);
                return MCIR_CUBLAS_STATUS_EXECUTION_FAILED;
            }
        memset(W.mem->base + W.off, 0xa5, need);   /* the partial products, garbage to anyone else */
        memset(W.mem->init + W.off, 1, need);
    }
    const unsigned char *pc = c, *pbias = x->bias;
    unsigned char *pd = d;
    float *fa = buffer(m * k), *fb = buffer(k * n), *acc = buffer(m * n);
    int rc = 0;
    if (!unpack(&A, a, x->transa != MCIR_CUBLAS_OP_N, m, k, la->ld, 0, 0, ea, fa) ||
        !unpack(&B, b, x->transb != MCIR_CUBLAS_OP_N, k, n, lb->ld, 0, 0, eb, fb))
        rc = MCIR_CUBLAS_STATUS_EXECUTION_FAILED;
    if (!rc) gemm_f32(fa, fb, acc, m, n, k);
    for (int64_t j = 0; j < n && !rc; j++)
        for (int64_t i = 0; i < m; i++) {
            float v = al * acc[i * n + j];
            if (be != 0.0f) {
                size_t xc = at(i, j, lc->ld, 0, 0, ec);
                if (!read_init(&C, xc, ec)) {
                    rc = MCIR_CUBLAS_STATUS_EXECUTION_FAILED;
                    break;
                }
                v += be * load(lc->type, pc + xc);
            }
            if (bias) {
                size_t xb = (size_t)(i * esize(x->bias_type));
                if (!read_init(&Bias, xb, esize(x->bias_type))) {
                    rc = MCIR_CUBLAS_STATUS_EXECUTION_FAILED;
                    break;
                }
                v += load(x->bias_type, pbias + xb);
            }
            if (relu) v = v > 0.0f ? v : 0.0f;
            if (gelu) v = gelu_tanh(v);
            size_t xd = at(i, j, ld->ld, 0, 0, ed);
            store(ld->type, pd + xd, v);
            memset(D.mem->init + D.off + xd, 1, (size_t)ed);
        }
    free(fa);
    free(fb);
    free(acc);
    return rc;
}


/* cublasLtMatmul on a stream that is capturing: as gemm_args, with the
 * descriptor and the layouts copied (a replay runs the kernels the call
 * launched, with the values it read then: the descriptors may be
 * destroyed, or prepared again for other sizes, after the capture). */
typedef struct lt_args {
    void *h, *d, *workspace;
    const void *a, *b, *c;
    lt_desc desc;
    lt_layout layouts[4];   /* a, b, c, d */
    float alpha, beta;
    unsigned long long algo[8];
    bool has_algo;
    size_t workspace_bytes;
} lt_args;

static int lt_replay(const void *args) {
    lt_args *x = (lt_args *)args;
    return lt_matmul_run(x->h, &x->desc, &x->alpha, x->a, &x->layouts[0], x->b, &x->layouts[1], &x->beta, x->c,
                         &x->layouts[2], x->d, &x->layouts[3], x->has_algo ? x->algo : NULL, x->workspace,
                         x->workspace_bytes, NULL);
}

static int lt_matmul(void *h, void *desc, const void *alpha, const void *a, void *a_layout, const void *b,
                     void *b_layout, const void *beta, const void *c, void *c_layout, void *d, void *d_layout,
                     const void *algo, void *workspace, size_t workspace_bytes, void *stream) {
    if (!h || ((handle *)h)->magic != EMU_HANDLE_MAGIC) return 1;
    if (!desc || !a_layout || !b_layout || !c_layout || !d_layout) return 7;   /* CUBLAS_STATUS_INVALID_VALUE */
    lt_args x = {h, d, workspace, a, b, c, *(const lt_desc *)desc,
                 {*(const lt_layout *)a_layout, *(const lt_layout *)b_layout, *(const lt_layout *)c_layout,
                  *(const lt_layout *)d_layout},
                 *(const float *)alpha, *(const float *)beta, {0}, algo != NULL, workspace_bytes};
    if (algo) memcpy(x.algo, algo, sizeof x.algo);   /* cublasLtMatmulAlgo_t: 8 words */
    if (emu_dev_capture_call(stream, lt_replay, &x, sizeof x)) return 0;
    emu_touch t[5] = {{(uintptr_t)a, 0, false}, {(uintptr_t)b, 0, false}, {(uintptr_t)d, 0, true}};
    int nt = 3;
    if (c) t[nt++] = (emu_touch){(uintptr_t)c, 0, false};
    if (workspace && workspace_bytes) t[nt++] = (emu_touch){(uintptr_t)workspace, workspace_bytes, true};
    if (!emu_dev_stream_touch(stream, "cublasLtMatmul", nt, t)) return 13;   /* CUBLAS_STATUS_EXECUTION_FAILED */
    return lt_matmul_run(h, desc, alpha, a, a_layout, b, b_layout, beta, c, c_layout, d, d_layout, algo, workspace,
                         workspace_bytes, stream);
}

const mcir_blas_api emu_blas_api = {
    .create = create,
    .destroy = destroy,
    .set_stream = set_stream,
    .gemm_strided_batched_ex = gemm_strided_batched_ex,
    .lt_create = lt_create,
    .lt_destroy = destroy,
    .lt_desc_create = lt_desc_create,
    .lt_desc_destroy = lt_free,
    .lt_desc_set = lt_desc_set,
    .lt_layout_create = lt_layout_create,
    .lt_layout_destroy = lt_free,
    .lt_matmul = lt_matmul,
    .lt_pref_create = lt_pref_create,
    .lt_pref_destroy = lt_free,
    .lt_pref_set = lt_pref_set,
    .lt_heuristic = lt_heuristic,
};
