/*
 * runtime.c — runs a compiled plan on the GPU. The CUDA driver is loaded
 * with dlopen (libcuda.so.1) and declared here with its own minimal types,
 * so mcirc builds and runs (CPU path) where there is no driver; every
 * driver call goes through CU_CHECK, which records call, file and line.
 *
 * Invariants: device memory is one allocation per arena pool (offsets from
 * the memory plan) plus one per graph input, weight and output (POOL, the
 * default), or one per tensor up front (EAGER), or one per intermediate
 * between the kernels that first and last touch it (LAZY) — the Occamy
 * comparison; peak bytes count every live allocation of ours. Kernels
 * launch in plan order on one stream; outputs are copied back into env.
 * Everything allocated is released on every path.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "codegen/runtime-impl.h"

/* ------------------------------------------------------------- driver */

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent;
typedef unsigned long long CUdeviceptr;

enum { CUDA_SUCCESS = 0, CUDA_ERROR_OUT_OF_MEMORY = 2, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
       CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76 };

#define CU_FUNCS(X)                                                                        \
    X(cuInit, (unsigned))                                                      \
    X(cuDeviceGetCount, (int *))                                               \
    X(cuDeviceGet, (CUdevice *, int))                                          \
    X(cuDeviceGetName, (char *, int, CUdevice))                                \
    X(cuDeviceGetAttribute, (int *, int, CUdevice))                            \
    X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                       \
    X(cuDevicePrimaryCtxRelease_v2, (CUdevice))                                \
    X(cuCtxSetCurrent, (CUcontext))                                            \
    X(cuModuleLoadData, (CUmodule *, const void *))                            \
    X(cuModuleUnload, (CUmodule))                                              \
    X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *))             \
    X(cuFuncSetAttribute, (CUfunction, int, int))                              \
    X(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned,     \
                                   unsigned, unsigned, unsigned, CUstream, void **, void **)) \
    X(cuMemAlloc_v2, (CUdeviceptr *, size_t))                                  \
    X(cuMemFree_v2, (CUdeviceptr))                                             \
    X(cuMemGetInfo_v2, (size_t *, size_t *))                                   \
    X(cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t))                    \
    X(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t))                          \
    X(cuStreamCreate, (CUstream *, unsigned))                                  \
    X(cuStreamSynchronize, (CUstream))                                         \
    X(cuStreamDestroy_v2, (CUstream))                                          \
    X(cuEventCreate, (CUevent *, unsigned))                                    \
    X(cuEventRecord, (CUevent, CUstream))                                      \
    X(cuEventSynchronize, (CUevent))                                           \
    X(cuEventDestroy_v2, (CUevent))

static struct {
    bool tried, ok;
    char why[256];
    void *lib;
#define X(name, args) CUresult(*name) args;
    CU_FUNCS(X)
#undef X
    CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*cuGetErrorString)(CUresult, const char **);
} cu;

static const char *cu_err(int rc) {
    const char *s = NULL;
    if (cu.cuGetErrorString && cu.cuGetErrorString(rc, &s) == CUDA_SUCCESS && s) return s;
    return "CUDA error";
}

#define CU_CHECK(call, why, n) CG_CHECK("CUDA", call, CUDA_SUCCESS, cu_err, why, n)

static bool driver_load(void) {
    if (cu.tried) return cu.ok;
    cu.tried = true;
    cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu.lib) {
        snprintf(cu.why, sizeof cu.why, "no CUDA driver: cannot load libcuda.so.1 (%s)", dlerror());
        return false;
    }
#define X(name, args)                                                                       \
    if (!(cu.name = (CUresult(*) args)dlsym(cu.lib, #name))) {                                           \
        snprintf(cu.why, sizeof cu.why, "the CUDA driver lacks %s", #name);                  \
        return false;                                                                        \
    }
    CU_FUNCS(X)
#undef X
    cu.cuEventElapsedTime = (CUresult(*)(float *, CUevent, CUevent))dlsym(cu.lib, "cuEventElapsedTime_v2");
    if (!cu.cuEventElapsedTime)
        cu.cuEventElapsedTime = (CUresult(*)(float *, CUevent, CUevent))dlsym(cu.lib, "cuEventElapsedTime");
    cu.cuGetErrorString = (CUresult(*)(CUresult, const char **))dlsym(cu.lib, "cuGetErrorString");
    int rc = cu.cuInit(0), count = 0;
    if (rc != CUDA_SUCCESS) {
        snprintf(cu.why, sizeof cu.why, "cuInit failed: %s (%d)", cu_err(rc), rc);
        return false;
    }
    rc = cu.cuDeviceGetCount(&count);
    if (rc != CUDA_SUCCESS || count < 1) {
        snprintf(cu.why, sizeof cu.why, "no CUDA device (cuDeviceGetCount: %d devices, rc %d)", count, rc);
        return false;
    }
    cu.ok = true;
    return true;
}

bool mcir_gpu_available(char *why, size_t n) {
    bool ok = driver_load();
    if (why && n) snprintf(why, n, "%s", ok ? "" : cu.why);
    return ok;
}

const char *mcir_alloc_mode_name(mcir_alloc_mode m) {
    return m == MCIR_ALLOC_LAZY ? "lazy" : m == MCIR_ALLOC_EAGER ? "eager" : "pool";
}

bool mcir_alloc_mode_parse(const char *s, mcir_alloc_mode *out) {
    if (strcmp(s, "pool") == 0) *out = MCIR_ALLOC_POOL;
    else if (strcmp(s, "lazy") == 0) *out = MCIR_ALLOC_LAZY;
    else if (strcmp(s, "eager") == 0) *out = MCIR_ALLOC_EAGER;
    else return false;
    return true;
}

/* ------------------------------------------------------------ the run */

typedef struct run_state {
    mcir_codegen *cg;
    const mcir_plan *p;
    const mcir_graph *g;
    int nt;
    CUdeviceptr *ptr;        /* by root tensor id */
    unsigned char *owned;    /* by root tensor id: ptr is our own allocation */
    int64_t *bytes;          /* by root tensor id: size of that allocation */
    int *first, *last;       /* by root tensor id: kernels touching it */
    CUdeviceptr *pools;
    int n_pools;
    int64_t cur, peak;
    char why[768];
} run_state;

static const mcir_tensor *root_of(const run_state *s, const mcir_tensor *t) {
    return s->p->alias_root ? s->p->alias_root[t->id] : t;
}

static bool is_graph_tensor(const mcir_tensor *t) {
    return t->kind == MCIR_TENSOR_INPUT || t->kind == MCIR_TENSOR_WEIGHT ||
           t->kind == MCIR_TENSOR_OUTPUT || t->is_output;
}

static bool dev_alloc(run_state *s, const mcir_tensor *t, int64_t bytes) {
    CUdeviceptr p = 0;
    int rc = cu.cuMemAlloc_v2(&p, (size_t)bytes);
    if (rc != CUDA_SUCCESS) {
        size_t free_b = 0, total_b = 0;
        cu.cuMemGetInfo_v2(&free_b, &total_b);
        snprintf(s->why, sizeof s->why,
                 "%s: cuMemAlloc of %lld bytes for '%s' failed (%s, rc %d); device has %zu bytes free of %zu",
                 rc == CUDA_ERROR_OUT_OF_MEMORY ? "out of device memory" : "device allocation failed",
                 (long long)bytes, t ? t->name : "arena", cu_err(rc), rc, free_b, total_b);
        return false;
    }
    if (t) {
        s->ptr[t->id] = p;
        s->owned[t->id] = 1;
        s->bytes[t->id] = bytes;
    } else {
        s->pools[s->n_pools++] = p;
    }
    s->cur += bytes;
    if (s->cur > s->peak) s->peak = s->cur;
    return true;
}

static void dev_free(run_state *s, const mcir_tensor *t) {
    if (!s->owned[t->id]) return;
    cu.cuMemFree_v2(s->ptr[t->id]);
    s->cur -= s->bytes[t->id];
    s->owned[t->id] = 0;
    s->ptr[t->id] = 0;
}

/* f32 values into storage-dtype bytes. */
static void *to_storage(const mcir_tensor *t, const float *v) {
    int64_t n = mcir_tensor_numel(t);
    void *out = malloc((size_t)mcir_tensor_bytes(t));
    MCIR_ASSERT(out != NULL);
    if (t->dtype == MCIR_DTYPE_F32) memcpy(out, v, (size_t)n * 4);
    else
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)out)[i] = t->dtype == MCIR_DTYPE_F16 ? mcir_f32_to_f16(v[i]) : mcir_f32_to_bf16(v[i]);
    return out;
}

static float *from_storage(const mcir_tensor *t, const void *raw) {
    int64_t n = mcir_tensor_numel(t);
    float *v = malloc((size_t)n * sizeof(float));
    MCIR_ASSERT(v != NULL);
    if (t->dtype == MCIR_DTYPE_F32) memcpy(v, raw, (size_t)n * 4);
    else
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = ((const uint16_t *)raw)[i];
            v[i] = t->dtype == MCIR_DTYPE_F16 ? mcir_f16_to_f32(h) : mcir_bf16_to_f32(h);
        }
    return v;
}

/* The bytes a leaf (input or weight) starts with: env's values if set,
 * else the weight's data, else seeded like the interpreter (inputs: seed
 * 0 — set inputs in env to use another seed; weights: seed 0). */
static void *leaf_bytes(const mcir_tensor *t, mcir_env *env) {
    float *v = mcir_env_get(env, t);
    if (v) return to_storage(t, v);
    if (t->kind == MCIR_TENSOR_WEIGHT && t->data) {
        void *out = malloc((size_t)mcir_tensor_bytes(t));
        MCIR_ASSERT(out != NULL);
        memcpy(out, t->data, (size_t)mcir_tensor_bytes(t));
        return out;
    }
    float *tmp = malloc((size_t)mcir_tensor_numel(t) * sizeof(float));
    MCIR_ASSERT(tmp != NULL);
    mcir_fill_seeded(t, 0, tmp);
    void *out = to_storage(t, tmp);
    free(tmp);
    return out;
}

/* Where the memory plan put t (by its buffer; aliases share their root's). */
static bool arena_locate(const mcir_memplan *m, const mcir_tensor *t, int *pool, int64_t *off) {
    if (!m->buffer_of) return false;
    int b = m->buffer_of[t->id];
    if (b < 0 || b >= m->n_buffers || m->buffers[b].pool < 0 || m->buffers[b].pool >= m->n_pools) return false;
    *pool = m->buffers[b].pool;
    *off = m->buffers[b].offset;
    return true;
}

/* The arena bytes the memory plan gave kernel i's scratch (split-KV partials). */
static bool scratch_locate(const mcir_memplan *m, int i, int *pool, int64_t *off) {
    for (int b = 0; m && b < m->n_buffers; b++)
        if (!m->buffers[b].tensor && m->buffers[b].first == i && m->buffers[b].pool >= 0 &&
            m->buffers[b].pool < m->n_pools) {
            *pool = m->buffers[b].pool;
            *off = m->buffers[b].offset;
            return true;
        }
    return false;
}

static void note_use(run_state *s, const mcir_tensor *t, int k) {
    const mcir_tensor *r = root_of(s, t);
    if (s->first[r->id] < 0) s->first[r->id] = k;
    s->last[r->id] = k;
}

bool mcir_gpu_run(mcir_codegen *cg, mcir_env *env, mcir_alloc_mode mode, mcir_gpu_stats *stats,
                  mcir_diag *d) {
    run_state s = {.cg = cg, .p = cg->plan, .g = cg->plan->graph};
    if (stats) memset(stats, 0, sizeof *stats);
    if (!driver_load()) {
        mcir_error(d, (mcir_loc){0}, "cannot run on the GPU: %s", cu.why);
        return false;
    }
    const mcir_memplan *m = cg->mem;
    if (mode == MCIR_ALLOC_POOL && !m) mode = MCIR_ALLOC_EAGER;   /* no arena plan: one per tensor */
    s.nt = s.g->n_tensors;
    s.ptr = calloc((size_t)s.nt, sizeof *s.ptr);
    s.owned = calloc((size_t)s.nt, 1);
    s.bytes = calloc((size_t)s.nt, sizeof *s.bytes);
    s.first = malloc(sizeof *s.first * (size_t)s.nt);
    s.last = malloc(sizeof *s.last * (size_t)s.nt);
    s.pools = calloc((size_t)(m && m->n_pools ? m->n_pools : 1), sizeof *s.pools);
    MCIR_ASSERT(s.ptr && s.owned && s.bytes && s.first && s.last && s.pools);
    for (int i = 0; i < s.nt; i++) s.first[i] = s.last[i] = -1;

    CUdevice dev = 0;
    CUcontext ctx = NULL;
    CUstream stream = NULL;
    CUevent ev0 = NULL, ev1 = NULL;
    CUmodule *mods = calloc((size_t)(cg->n ? cg->n : 1), sizeof *mods);
    CUfunction *funcs = calloc((size_t)(cg->n ? cg->n : 1), sizeof *funcs);
    CUmodule *epi_mods = calloc((size_t)(cg->n ? cg->n : 1), sizeof *epi_mods);
    CUfunction *epi_funcs = calloc((size_t)(cg->n ? cg->n : 1), sizeof *epi_funcs);
    CUdeviceptr staging = 0;      /* f32 product of cuBLAS matmuls with an epilogue */
    int64_t staging_bytes = 0;
    CUfunction *merge_funcs = calloc((size_t)(cg->n ? cg->n : 1), sizeof *merge_funcs);
    CUdeviceptr scratch = 0;      /* split-KV partials outside a pool plan */
    int64_t scratch_bytes = 0;
    void *blas = NULL, *blas_lt = NULL;
    bool ok = false;
    size_t W = sizeof s.why;
    MCIR_ASSERT(mods && funcs && epi_mods && epi_funcs && merge_funcs);

    CU_CHECK(cu.cuDeviceGet(&dev, 0), s.why, W);
    CU_CHECK(cu.cuDevicePrimaryCtxRetain(&ctx, dev), s.why, W);
    CU_CHECK(cu.cuCtxSetCurrent(ctx), s.why, W);
    char name[128] = "";
    CU_CHECK(cu.cuDeviceGetName(name, sizeof name, dev), s.why, W);
    if (stats) snprintf(stats->device_name, sizeof stats->device_name, "%s", name);
    int major = 0, minor = 0;
    CU_CHECK(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), s.why, W);
    CU_CHECK(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), s.why, W);
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d%d", major, minor);
    bool compiled = cg->arch[0] && strcmp(cg->arch, arch) == 0;
    for (int i = 0; i < cg->n && compiled; i++)
        if ((cg->k[i].source && !cg->k[i].compiled) || (cg->k[i].epi_source && !cg->k[i].epi_compiled))
            compiled = false;
    if (!compiled && !mcir_codegen_compile(cg, arch, d)) {
        snprintf(s.why, W, "kernels did not compile for the device (%s, %s)", name, arch);
        goto fail;
    }
    CU_CHECK(cu.cuStreamCreate(&stream, 0), s.why, W);
    CU_CHECK(cu.cuEventCreate(&ev0, 0), s.why, W);
    CU_CHECK(cu.cuEventCreate(&ev1, 0), s.why, W);
    for (int i = 0; i < cg->n; i++) {
        cg_kernel *k = &cg->k[i];
        if (!k->source) continue;
        /* one module per compile unit: identical layers share it */
        if (k->owner >= 0) {
            funcs[i] = funcs[k->owner];
        } else {
            CU_CHECK(cu.cuModuleLoadData(&mods[i], k->bin.cubin), s.why, W);
            CU_CHECK(cu.cuModuleGetFunction(&funcs[i], mods[i], k->entry), s.why, W);
        }
        if (k->merge_grid > 0 && k->owner >= 0) {
            merge_funcs[i] = merge_funcs[k->owner];
        } else if (k->merge_grid > 0) {
            char me[80];
            snprintf(me, sizeof me, "%s_merge", k->entry);
            CU_CHECK(cu.cuModuleGetFunction(&merge_funcs[i], mods[i], me), s.why, W);
        }
        int sp;
        int64_t so;
        if (k->merge_grid > 0 && k->kp->scratch_bytes > scratch_bytes &&
            !(mode == MCIR_ALLOC_POOL && scratch_locate(m, i, &sp, &so)))
            scratch_bytes = k->kp->scratch_bytes;   /* one buffer for all: kernels run in order */
        if (k->owner < 0 && k->unit_smem > 0)   /* dynamic + static may pass the default 48 KB */
            CU_CHECK(cu.cuFuncSetAttribute(funcs[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           (int)k->unit_smem),
                     s.why, W);
        if (k->gemm.ok && !blas) {
            char bw[256];
            if (!cg_cublas_open(&blas, stream, bw, sizeof bw)) blas = NULL;   /* generated kernel instead */
        }
        if (k->gemm.ok && k->gemm.lt && !blas_lt) {
            char bw[256];
            if (!cg_cublaslt_open(&blas_lt, bw, sizeof bw)) blas_lt = NULL;   /* cuBLAS + epilogue instead */
        }
        if (k->epi_source && k->epi_compiled && k->epi_owner >= 0) {
            epi_funcs[i] = epi_funcs[k->epi_owner];
        } else if (k->epi_source && k->epi_compiled) {
            CU_CHECK(cu.cuModuleLoadData(&epi_mods[i], k->epi_bin.cubin), s.why, W);
            CU_CHECK(cu.cuModuleGetFunction(&epi_funcs[i], epi_mods[i], k->epi_entry), s.why, W);
        }
    }
    for (int i = 0; i < cg->n && blas; i++) {
        const cg_gemm_desc *gd = &cg->k[i].gemm;
        int64_t bytes = gd->batch * gd->m * gd->n * 4;
        if (gd->ok && gd->epilogue && !(gd->lt && blas_lt) && epi_funcs[i] && bytes > staging_bytes)
            staging_bytes = bytes;   /* cuBLASLt stages nothing */
    }
    if (scratch_bytes > 0) {
        CU_CHECK(cu.cuMemAlloc_v2(&scratch, (size_t)scratch_bytes), s.why, W);
        s.cur += scratch_bytes;
        if (s.cur > s.peak) s.peak = s.cur;
    }
    if (staging_bytes > 0) {
        int rc = cu.cuMemAlloc_v2(&staging, (size_t)staging_bytes);
        if (rc != CUDA_SUCCESS) {
            size_t free_b = 0, total_b = 0;
            cu.cuMemGetInfo_v2(&free_b, &total_b);
            snprintf(s.why, W, "%s: cuMemAlloc of %lld bytes for the matmul staging buffer failed (%s, rc %d); "
                     "device has %zu bytes free of %zu",
                     rc == CUDA_ERROR_OUT_OF_MEMORY ? "out of device memory" : "device allocation failed",
                     (long long)staging_bytes, cu_err(rc), rc, free_b, total_b);
            staging = 0;
            goto fail;
        }
        s.cur += staging_bytes;
        if (s.cur > s.peak) s.peak = s.cur;
    }

    /* where every tensor lives */
    for (int i = 0; i < cg->n; i++) {
        const mcir_kernel_plan *kp = cg->k[i].kp;
        for (int j = 0; j < kp->n_reads; j++) note_use(&s, kp->reads[j], i);
        for (int j = 0; j < kp->n_writes; j++) note_use(&s, kp->writes[j], i);
    }
    /* outputs stay until copied back: their last use is past the last kernel */
    for (int j = 0; j < s.g->n_outputs; j++) note_use(&s, s.g->outputs[j], cg->n);
    if (mode == MCIR_ALLOC_POOL)
        for (int pl = 0; pl < m->n_pools; pl++)
            if (!dev_alloc(&s, NULL, m->pool_bytes[pl] > 0 ? m->pool_bytes[pl] : 1)) goto fail;
    for (int t = 0; t < s.nt; t++) {
        if (s.first[t] < 0) continue;
        const mcir_tensor *r = s.g->tensors[t];
        int pool;
        int64_t off;
        if (mode == MCIR_ALLOC_POOL && !is_graph_tensor(r) && arena_locate(m, r, &pool, &off)) {
            s.ptr[t] = s.pools[pool] + (CUdeviceptr)off;
            continue;
        }
        if (mode == MCIR_ALLOC_LAZY && !is_graph_tensor(r)) continue;   /* at first use */
        if (!dev_alloc(&s, r, mcir_tensor_bytes(r))) goto fail;
        if (r->kind == MCIR_TENSOR_INPUT || r->kind == MCIR_TENSOR_WEIGHT) {
            void *h = leaf_bytes(r, env);
            int rc = cu.cuMemcpyHtoD_v2(s.ptr[t], h, (size_t)mcir_tensor_bytes(r));
            free(h);
            CU_CHECK(rc, s.why, W);
        }
    }

    CU_CHECK(cu.cuEventRecord(ev0, stream), s.why, W);
    for (int i = 0; i < cg->n; i++) {
        cg_kernel *k = &cg->k[i];
        const mcir_kernel_plan *kp = k->kp;
        if (mode == MCIR_ALLOC_LAZY)
            for (int t = 0; t < s.nt; t++)
                if (s.first[t] == i && !is_graph_tensor(s.g->tensors[t]) && !s.ptr[t])
                    if (!dev_alloc(&s, s.g->tensors[t], mcir_tensor_bytes(s.g->tensors[t]))) goto fail;
        if (k->source) {
            int np = kp->n_reads + kp->n_writes;
            CUdeviceptr args[np > 0 ? np : 1];
            void *params[np > 0 ? np : 1];
            for (int j = 0; j < kp->n_reads; j++) args[j] = s.ptr[root_of(&s, kp->reads[j])->id];
            for (int j = 0; j < kp->n_writes; j++)
                args[kp->n_reads + j] = s.ptr[root_of(&s, kp->writes[j])->id];
            for (int j = 0; j < np; j++) params[j] = &args[j];
            int dummy = 0;
            void *dummy_param[1] = {&dummy};
            if (blas_lt && k->gemm.ok && k->gemm.lt) {
                const cg_gemm_desc *gd = &k->gemm;
                if (!cg_cublaslt_matmul(blas_lt, stream, gd, args[gd->read_a], args[gd->read_b],
                                        gd->read_bias >= 0 ? args[gd->read_bias] : 0,
                                        gd->read_residual >= 0 ? args[gd->read_residual] : 0,
                                        args[kp->n_reads + gd->write_d], s.why, W))
                    goto fail;
            } else if (blas && k->gemm.ok && (!k->gemm.epilogue || (epi_funcs[i] && staging))) {
                CUdeviceptr c = k->gemm.epilogue ? staging : args[kp->n_reads + k->gemm.write_c];
                if (!cg_cublas_gemm(blas, &k->gemm, args[k->gemm.read_a], args[k->gemm.read_b], c, s.why, W))
                    goto fail;
                if (k->gemm.epilogue) {
                    CUdeviceptr eargs[np + 1];
                    void *eparams[np + 1];
                    for (int j = 0; j < np; j++) eargs[j] = args[j];
                    eargs[np] = staging;
                    for (int j = 0; j <= np; j++) eparams[j] = &eargs[j];
                    CU_CHECK(cu.cuLaunchKernel(epi_funcs[i], (unsigned)k->epi_grid, 1, 1, 256, 1, 1, 0, stream,
                                               eparams, NULL),
                             s.why, W);
                }
            } else if (k->merge_grid > 0) {
                /* split-KV attention: partials into the scratch, then the merge */
                CUdeviceptr sargs[np + 1];
                void *sparams[np + 1];
                for (int j = 0; j < np; j++) sargs[j] = args[j];
                int sp;
                int64_t so;
                sargs[np] = scratch;
                if (mode == MCIR_ALLOC_POOL && scratch_locate(m, i, &sp, &so) && sp < s.n_pools)
                    sargs[np] = s.pools[sp] + (CUdeviceptr)so;
                if (!sargs[np]) {
                    snprintf(s.why, W, "kernel %s: split-KV attention has no scratch buffer", kp->name);
                    goto fail;
                }
                for (int j = 0; j <= np; j++) sparams[j] = &sargs[j];
                CU_CHECK(cu.cuLaunchKernel(funcs[i], (unsigned)k->grid[0], (unsigned)k->grid[1],
                                           (unsigned)k->grid[2], (unsigned)k->block[0],
                                           (unsigned)k->block[1], (unsigned)k->block[2],
                                           (unsigned)k->smem, stream, sparams, NULL),
                         s.why, W);
                CU_CHECK(cu.cuLaunchKernel(merge_funcs[i], (unsigned)k->merge_grid, 1, 1,
                                           (unsigned)k->merge_block, 1, 1, 0, stream, sparams, NULL),
                         s.why, W);
            } else {
                CU_CHECK(cu.cuLaunchKernel(funcs[i], (unsigned)k->grid[0], (unsigned)k->grid[1],
                                           (unsigned)k->grid[2], (unsigned)k->block[0],
                                           (unsigned)k->block[1], (unsigned)k->block[2],
                                           (unsigned)k->smem, stream, np ? params : dummy_param, NULL),
                         s.why, W);
            }
        }
        if (mode == MCIR_ALLOC_LAZY) {
            bool synced = false;
            for (int t = 0; t < s.nt; t++)
                if (s.last[t] == i && !is_graph_tensor(s.g->tensors[t]) && s.owned[t]) {
                    if (!synced) CU_CHECK(cu.cuStreamSynchronize(stream), s.why, W);
                    synced = true;
                    dev_free(&s, s.g->tensors[t]);
                }
        }
    }
    CU_CHECK(cu.cuEventRecord(ev1, stream), s.why, W);
    CU_CHECK(cu.cuStreamSynchronize(stream), s.why, W);
    float ms = 0.0f;
    if (cu.cuEventElapsedTime) CU_CHECK(cu.cuEventElapsedTime(&ms, ev0, ev1), s.why, W);

    /* outputs back into env */
    for (int j = 0; j < s.g->n_outputs; j++) {
        const mcir_tensor *t = s.g->outputs[j];
        const mcir_tensor *r = root_of(&s, t);
        if (!s.ptr[r->id]) {
            snprintf(s.why, W, "output '%s' was never placed on the device", t->name);
            goto fail;
        }
        void *h = malloc((size_t)mcir_tensor_bytes(t));
        MCIR_ASSERT(h != NULL);
        int rc = cu.cuMemcpyDtoH_v2(h, s.ptr[r->id], (size_t)mcir_tensor_bytes(t));
        if (rc == CUDA_SUCCESS) {
            float *v = from_storage(t, h);
            mcir_env_set(env, t, v);
            free(v);
        }
        free(h);
        CU_CHECK(rc, s.why, W);
    }
    if (stats) {
        stats->elapsed_ms = ms;
        stats->peak_device_bytes = s.peak;
    }
    ok = true;
fail:
    if (!ok) mcir_error(d, (mcir_loc){0}, "GPU run failed: %s", s.why);
    if (stream) cu.cuStreamSynchronize(stream);
    cg_cublas_close(blas);
    cg_cublaslt_close(blas_lt);
    for (int t = 0; t < s.nt; t++)
        if (s.owned[t]) dev_free(&s, s.g->tensors[t]);
    for (int pl = 0; pl < s.n_pools; pl++) cu.cuMemFree_v2(s.pools[pl]);
    for (int i = 0; i < cg->n; i++) {
        if (mods[i]) cu.cuModuleUnload(mods[i]);
        if (epi_mods[i]) cu.cuModuleUnload(epi_mods[i]);
    }
    if (staging) cu.cuMemFree_v2(staging);
    if (scratch) cu.cuMemFree_v2(scratch);
    if (ev0) cu.cuEventDestroy_v2(ev0);
    if (ev1) cu.cuEventDestroy_v2(ev1);
    if (stream) cu.cuStreamDestroy_v2(stream);
    if (ctx) cu.cuDevicePrimaryCtxRelease_v2(dev);
    free(mods);
    free(funcs);
    free(epi_mods);
    free(epi_funcs);
    free(merge_funcs);
    free(s.ptr);
    free(s.owned);
    free(s.bytes);
    free(s.first);
    free(s.last);
    free(s.pools);
    return ok;
}

/* ------------------------------------------------------------ backend */

static bool cuda_supports(const mcir_kernel_plan *k, char *why, size_t n) {
    const cg_template_desc *t = cg_template_find(k->tpl);
    if (!t) {
        if (why) snprintf(why, n, "no CUDA template for kernel %s", k->name);
        return false;
    }
    return true;
}

static const mcir_backend cuda_backend = {
    .name = "cuda",
    .available = mcir_gpu_available,
    .supports = cuda_supports,
    .run = mcir_gpu_run,
};

const mcir_backend *mcir_backend_cuda(void) { return &cuda_backend; }
