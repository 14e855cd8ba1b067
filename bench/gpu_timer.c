/*
 * gpu_timer.c — the benchmarks' timing over the CUDA driver table the
 * runtime uses (runtime/cuda_driver.h, dlopen'd): buffers, module loading,
 * event timing with an L2 flush.
 *
 * Invariant: every timed interval holds one launch and nothing else; the
 * flush (a memset of 4× L2, at least 256 MiB) runs on the same stream
 * before the start event, so it is ordered before the launch and never
 * counted. Everything opened is released by bench_gpu_close.
 */
#include "bench/gpu_timer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda_driver.h"

static const mcir_cu_driver *cu;   /* set by bench_gpu_open */

/* Records call, file and line in g->why and jumps to fail. */
#define BG_CHECK(g, call)                                                                       \
    do {                                                                                        \
        int bg_rc_ = (int)(call);                                                               \
        if (bg_rc_ != CUDA_SUCCESS) {                                                           \
            snprintf((g)->why, sizeof (g)->why, "CUDA error %d (%s) in %s at %s:%d", bg_rc_,     \
                     mcir_cu_error(bg_rc_), #call, __FILE__, __LINE__);                         \
            goto fail;                                                                          \
        }                                                                                       \
    } while (0)

bool bench_gpu_open(bench_gpu *g, char *why, size_t n) {
    memset(g, 0, sizeof *g);
    if (!(cu = mcir_cu_load(why, n))) return false;
    int major = 0, minor = 0;
    BG_CHECK(g, cu->cuDeviceGet(&g->device, 0));
    BG_CHECK(g, cu->cuDevicePrimaryCtxRetain(&g->ctx, g->device));
    BG_CHECK(g, cu->cuCtxSetCurrent(g->ctx));
    BG_CHECK(g, cu->cuDeviceGetName(g->name, sizeof g->name, g->device));
    BG_CHECK(g, cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g->device));
    BG_CHECK(g, cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, g->device));
    BG_CHECK(g, cu->cuDeviceGetAttribute(&g->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, g->device));
    BG_CHECK(g, cu->cuDeviceTotalMem_v2(&g->total_bytes, g->device));
    snprintf(g->arch, sizeof g->arch, "sm_%d%d", major, minor);
    BG_CHECK(g, cu->cuStreamCreate(&g->stream, 0));
    BG_CHECK(g, cu->cuEventCreate(&g->ev0, 0));
    BG_CHECK(g, cu->cuEventCreate(&g->ev1, 0));
    g->flush_bytes = (size_t)g->l2_bytes * 4;
    if (g->flush_bytes < ((size_t)256 << 20)) g->flush_bytes = (size_t)256 << 20;
    CUdeviceptr flush = 0;
    BG_CHECK(g, cu->cuMemAlloc_v2(&flush, g->flush_bytes));
    g->flush = flush;
    return true;
fail:
    snprintf(why, n, "%s", g->why);
    bench_gpu_close(g);
    return false;
}

void bench_gpu_close(bench_gpu *g) {
    if (!cu) return;
    if (g->stream) cu->cuStreamSynchronize(g->stream);
    for (int i = 0; i < g->n_modules; i++) cu->cuModuleUnload(g->modules[i]);
    free(g->modules);
    if (g->flush) cu->cuMemFree_v2(g->flush);
    if (g->ev0) cu->cuEventDestroy_v2(g->ev0);
    if (g->ev1) cu->cuEventDestroy_v2(g->ev1);
    if (g->stream) cu->cuStreamDestroy_v2(g->stream);
    if (g->ctx) cu->cuDevicePrimaryCtxRelease_v2(g->device);
    g->modules = NULL;
    g->n_modules = 0;
    g->flush = 0;
    g->ev0 = g->ev1 = g->stream = g->ctx = NULL;
}

bool bench_gpu_alloc(bench_gpu *g, size_t bytes, uint64_t *ptr) {
    CUdeviceptr p = 0;
    *ptr = 0;
    BG_CHECK(g, cu->cuMemAlloc_v2(&p, bytes ? bytes : 1));
    *ptr = p;
    return true;
fail:
    return false;
}

void bench_gpu_free(bench_gpu *g, uint64_t ptr) {
    (void)g;
    if (ptr && cu) cu->cuMemFree_v2(ptr);
}

bool bench_gpu_fill(bench_gpu *g, uint64_t ptr, int64_t n, mcir_dtype dtype, uint64_t seed) {
    size_t es = dtype == MCIR_DTYPE_F32 ? 4 : 2;
    const int64_t chunk = 1 << 22;
    void *h = malloc((size_t)chunk * es);
    MCIR_ASSERT(h != NULL);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    bool ok = true;
    for (int64_t at = 0; at < n && ok; at += chunk) {
        int64_t m = n - at < chunk ? n - at : chunk;
        for (int64_t i = 0; i < m; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            float v = (float)((double)(s >> 11) * (2.0 / 9007199254740992.0) - 1.0);
            if (dtype == MCIR_DTYPE_F32) ((float *)h)[i] = v;
            else ((uint16_t *)h)[i] = dtype == MCIR_DTYPE_F16 ? mcir_f32_to_f16(v) : mcir_f32_to_bf16(v);
        }
        int rc = cu->cuMemcpyHtoD_v2(ptr + (uint64_t)at * es, h, (size_t)m * es);
        if (rc != CUDA_SUCCESS) {
            snprintf(g->why, sizeof g->why, "CUDA error %d (%s) in cuMemcpyHtoD_v2", rc, mcir_cu_error(rc));
            ok = false;
        }
    }
    free(h);
    return ok;
}

bool bench_gpu_download(bench_gpu *g, void *host, uint64_t ptr, size_t bytes) {
    BG_CHECK(g, cu->cuMemcpyDtoH_v2(host, ptr, bytes));
    return true;
fail:
    return false;
}

bool bench_gpu_load(bench_gpu *g, const void *cubin, const char *name, int64_t smem, void **fn) {
    void *mod = NULL;
    BG_CHECK(g, cu->cuModuleLoadData(&mod, cubin));
    if (g->n_modules == g->cap_modules) {
        g->cap_modules = g->cap_modules ? 2 * g->cap_modules : 16;
        g->modules = realloc(g->modules, sizeof *g->modules * (size_t)g->cap_modules);
        MCIR_ASSERT(g->modules != NULL);
    }
    g->modules[g->n_modules++] = mod;
    BG_CHECK(g, cu->cuModuleGetFunction(fn, mod, name));
    if (smem > 0) BG_CHECK(g, cu->cuFuncSetAttribute(*fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem));
    return true;
fail:
    return false;
}

void bench_gpu_timing_of(double *ms, int reps, bench_gpu_timing *t) {
    t->reps = reps;
    t->min_ms = t->max_ms = ms[0];
    for (int i = 1; i < reps; i++) {
        if (ms[i] < t->min_ms) t->min_ms = ms[i];
        if (ms[i] > t->max_ms) t->max_ms = ms[i];
    }
    /* median: insertion sort, reps is small */
    for (int i = 1; i < reps; i++)
        for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
            double x = ms[j];
            ms[j] = ms[j - 1];
            ms[j - 1] = x;
        }
    t->median_ms = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
}

/* One timed interval around `launch` (0: kernel, 1: copy). */
typedef struct launch {
    void *fn;
    const int64_t *grid;
    const int *block;
    int64_t smem;
    void **params;
    CUdeviceptr src, dst;
    size_t bytes;
} launch;

static bool run_one(bench_gpu *g, const launch *l) {
    if (l->fn)
        BG_CHECK(g, cu->cuLaunchKernel(l->fn, (unsigned)l->grid[0], (unsigned)l->grid[1], (unsigned)l->grid[2],
                                      (unsigned)l->block[0], (unsigned)l->block[1], (unsigned)l->block[2],
                                      (unsigned)l->smem, g->stream, l->params, NULL));
    else
        BG_CHECK(g, cu->cuMemcpyDtoDAsync_v2(l->dst, l->src, l->bytes, g->stream));
    return true;
fail:
    return false;
}

static bool time_launch(bench_gpu *g, const launch *l, int warmup, int reps, bench_gpu_timing *t) {
    if (reps < 1) reps = 1;
    double *ms = malloc(sizeof *ms * (size_t)reps);
    MCIR_ASSERT(ms != NULL);
    for (int i = 0; i < warmup; i++)
        if (!run_one(g, l)) goto fail;
    BG_CHECK(g, cu->cuStreamSynchronize(g->stream));
    for (int i = 0; i < reps; i++) {
        BG_CHECK(g, cu->cuMemsetD32Async(g->flush, (unsigned)i + 1u, g->flush_bytes / 4, g->stream));
        BG_CHECK(g, cu->cuEventRecord(g->ev0, g->stream));
        if (!run_one(g, l)) goto fail;
        BG_CHECK(g, cu->cuEventRecord(g->ev1, g->stream));
        BG_CHECK(g, cu->cuEventSynchronize(g->ev1));
        float f = 0.0f;
        BG_CHECK(g, cu->cuEventElapsedTime(&f, g->ev0, g->ev1));
        ms[i] = f;
    }
    bench_gpu_timing_of(ms, reps, t);
    free(ms);
    return true;
fail:
    free(ms);
    return false;
}

bool bench_gpu_time(bench_gpu *g, void *fn, const int64_t grid[3], const int block[3], int64_t smem,
                    void **params, int warmup, int reps, bench_gpu_timing *t) {
    launch l = {.fn = fn, .grid = grid, .block = block, .smem = smem, .params = params};
    return time_launch(g, &l, warmup, reps, t);
}

bool bench_gpu_time_copy(bench_gpu *g, size_t bytes, int warmup, int reps, bench_gpu_timing *t) {
    uint64_t src = 0, dst = 0;
    bool ok = bench_gpu_alloc(g, bytes, &src) && bench_gpu_alloc(g, bytes, &dst) &&
              bench_gpu_fill(g, src, (int64_t)(bytes / 4), MCIR_DTYPE_F32, 7);
    if (ok) {
        launch l = {.src = src, .dst = dst, .bytes = bytes};
        ok = time_launch(g, &l, warmup, reps, t);
    }
    bench_gpu_free(g, src);
    bench_gpu_free(g, dst);
    return ok;
}

bool bench_gpu_flush(bench_gpu *g) {
    static unsigned round;   /* a new value each time, as time_launch writes */
    BG_CHECK(g, cu->cuMemsetD32Async(g->flush, 0x80000000u + ++round, g->flush_bytes / 4, g->stream));
    BG_CHECK(g, cu->cuStreamSynchronize(g->stream));
    return true;
fail:
    return false;
}
