/*
 * bench_util.h — what the benchmark programs share: a graph held in memory
 * (graph.json text built by the benchmark) taken through the same stages
 * as mcir_compile (read, catalog, rewrite, plan kernels, plan memory,
 * generate, NVRTC), with the time of each part; medians; CSV cells.
 *
 * Usage:
 *     bench_graph b;
 *     if (!bench_graph_build(&b, json_text, "attn_f16", "sm_90", true, &d)) ...;
 *     int k = bench_graph_kernel(&b, MCIR_TEMPLATE_STREAMING_ATTENTION);
 *     ... b.cg, b.plan->kernels[k], b.pipeline_s, b.compile_s ...
 *     bench_graph_free(&b);
 */
#ifndef MCIR_BENCH_UTIL_H
#define MCIR_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "bench/gpu_timer.h"
#include "mcirc/pipeline.h"

typedef struct bench_graph {
    mcir_graph *graph;
    mcir_catalog *catalog;
    mcir_trace *trace;
    mcir_plan *plan;
    mcir_memplan *memory;
    mcir_codegen *cg;
    const mcir_target *target;
    double pipeline_s;   /* read → generate (no NVRTC) */
    double compile_s;    /* NVRTC through the kernel cache */
    bool compiled;
} bench_graph;

/* Runs the pipeline on graph.json text; compile: also NVRTC for arch.
 * On failure the diagnostics are reported and b holds what was built. */
bool bench_graph_build(bench_graph *b, const char *json, const char *name, const char *arch,
                       bool compile, mcir_diag *d);
void bench_graph_free(bench_graph *b);
/* Index of the first kernel using template t, or -1. */
int bench_graph_kernel(const bench_graph *b, mcir_template t);

/* Times kernel k of b (compiled) on the GPU: device buffers for its
 * reads (seeded values) and writes, warmup + reps launches from its cubin
 * (bench_gpu_time); the first write is read back and must be finite.
 * status: "ok", or what went wrong. */
bool bench_time_kernel(bench_gpu *g, bench_graph *b, int k, int warmup, int reps, bench_gpu_timing *t,
                       char *status, size_t n);

/* The GPU benchmarks' start: at least 20 timed runs unless dry, the GPU
 * opened (*gpu; not for a dry run), *arch the device's where not given.
 * Returns -1 to go on, else the exit status (2: bad --reps, 77: no GPU
 * and not a dry run; the reason printed, prefixed with prog). */
int bench_gpu_start(const char *prog, bool dry, int reps, bench_gpu *g, bool *gpu, const char **arch);

double bench_now(void);
/* Median of v[0..n) (sorts v). */
double bench_median(double *v, int n);

/* Growable text, for graph.json built by printf. */
typedef struct bench_text {
    char *s;
    size_t len, cap;
} bench_text;
void bench_text_printf(bench_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void bench_text_free(bench_text *t);

/* A benchmark's CSV through mcir_outfile (NULL or "-": stdout): it
 * appears whole when the program closes it, never half written. */
typedef struct bench_csv {
    mcir_outfile out;
    bool to_stdout;   /* then the programs leave out their human table */
} bench_csv;
/* The stream to write rows to; NULL after an error message on stderr. */
FILE *bench_csv_open(bench_csv *c, const char *path);
/* Publishes the CSV; false (reported on stderr) if it cannot be written. */
bool bench_csv_close(bench_csv *c);

#endif /* MCIR_BENCH_UTIL_H */
