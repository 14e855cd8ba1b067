/*
 * gpu_timer.h — timing one kernel on the GPU for the benchmarks: the CUDA
 * driver loaded with dlopen (like runtime/runtime.c, so the benchmarks
 * build and dry-run without one), device buffers that stay resident,
 * kernels loaded from the cubin codegen produced, and CUDA-event timing
 * with the L2 cache flushed before every timed launch (a memset of a
 * buffer four times the L2 size, outside the timed interval).
 *
 * Usage:
 *     bench_gpu g;
 *     if (!bench_gpu_open(&g, why, sizeof why)) { puts(why); return 77; }
 *     uint64_t q; bench_gpu_alloc(&g, bytes, &q); bench_gpu_fill(&g, q, n, MCIR_DTYPE_F16, 1);
 *     void *fn; bench_gpu_load(&g, cubin, "attn_kernel", smem, &fn);
 *     bench_gpu_timing t; bench_gpu_time(&g, fn, grid, block, smem, params, 5, 30, &t);
 *     bench_gpu_close(&g);
 */
#ifndef MCIR_BENCH_GPU_TIMER_H
#define MCIR_BENCH_GPU_TIMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcir/mcir.h"

typedef struct bench_gpu {
    char name[128];
    char arch[16];          /* "sm_90" */
    int l2_bytes;
    size_t total_bytes;
    void *ctx, *stream, *ev0, *ev1;
    int device;
    uint64_t flush;         /* L2 flush buffer */
    size_t flush_bytes;
    void **modules;
    int n_modules, cap_modules;
    char why[512];          /* the last failure */
} bench_gpu;

typedef struct bench_gpu_timing {
    double median_ms, min_ms, max_ms;
    int reps;
} bench_gpu_timing;

/* Loads the driver, makes device 0's primary context current, creates a
 * stream, two events and the flush buffer. false and why without a GPU. */
bool bench_gpu_open(bench_gpu *g, char *why, size_t n);
void bench_gpu_close(bench_gpu *g);

bool bench_gpu_alloc(bench_gpu *g, size_t bytes, uint64_t *ptr);
void bench_gpu_free(bench_gpu *g, uint64_t ptr);
/* n values uniform in [-1, 1) (seeded), stored as dtype. */
bool bench_gpu_fill(bench_gpu *g, uint64_t ptr, int64_t n, mcir_dtype dtype, uint64_t seed);
bool bench_gpu_download(bench_gpu *g, void *host, uint64_t ptr, size_t bytes);
/* Loads a cubin, gets kernel `name`, opts into `smem` dynamic bytes. */
bool bench_gpu_load(bench_gpu *g, const void *cubin, const char *name, int64_t smem, void **fn);

/* warmup untimed launches, then reps launches each timed by CUDA events
 * with the L2 flushed before it. params as cuLaunchKernel takes them. */
bool bench_gpu_time(bench_gpu *g, void *fn, const int64_t grid[3], const int block[3], int64_t smem,
                    void **params, int warmup, int reps, bench_gpu_timing *t);
/* Device-to-device copy of `bytes`, timed the same way. */
bool bench_gpu_time_copy(bench_gpu *g, size_t bytes, int warmup, int reps, bench_gpu_timing *t);
/* The L2 flush alone, finished when it returns: before work timed
 * elsewhere (the runtime's own events). */
bool bench_gpu_flush(bench_gpu *g);
/* min, max and median of ms[0..reps) (reordered) into t. */
void bench_gpu_timing_of(double *ms, int reps, bench_gpu_timing *t);

#endif /* MCIR_BENCH_GPU_TIMER_H */
