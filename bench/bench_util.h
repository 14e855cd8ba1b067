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
    long cache_misses;   /* the kernel cache's (mcir_cache_misses) before NVRTC */
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
/* Times the whole compiled graph of b through the runtime
 * (mcir_gpu_run_bound, POOL): graph inputs and outputs in device buffers
 * of g filled once with seeded values; weights without data given the
 * runtime's seeded values once, as data (each run uploads them, as every
 * mcir_gpu_run does); warmup runs, then reps runs each after an L2 flush,
 * timed by the runtime's events around the plan's launches (library calls
 * included); the first output is read back and must be finite. status as
 * bench_time_kernel's, with the runtime's first warning after "ok; " (a
 * cuBLASLt call that fell back to the generated kernel). */
bool bench_time_graph(bench_gpu *g, bench_graph *b, int warmup, int reps, bench_gpu_timing *t,
                      char *status, size_t n);
/* Device bytes a run of b needs: graph inputs, weights and outputs, the
 * arena, and the staging product of a cuBLAS + epilogue matmul. */
int64_t bench_graph_device_bytes(const bench_graph *b);

/* The GPU benchmarks' start: at least 20 timed runs unless dry, the GPU
 * opened (*gpu; not for a dry run), *arch the device's where not given.
 * Returns -1 to go on, else the exit status (2: bad --reps, 77: no GPU
 * and not a dry run; the reason printed, prefixed with prog). */
int bench_gpu_start(const char *prog, bool dry, int reps, bench_gpu *g, bool *gpu, const char **arch);

/* Whether name contains any of the comma-separated texts of match (NULL:
 * everything matches): the benchmarks' --match. */
bool bench_match(const char *name, const char *match);
/* A CSV cell from free text: commas and newlines become ';'. */
void bench_csv_cell(char *s);
/* compile_s and compile_cache ("cold" when NVRTC ran, else "cached") cells
 * of b; "" when it was not compiled. */
void bench_compile_cells(const bench_graph *b, char comp[32], char cache[16]);

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

/* The command line of the GPU sweeps (bench_attention, bench_gemm):
 * --dry-run, --suite S (one of suites, NULL-terminated; default "all"),
 * --match TEXT[,TEXT...], --compile N (-1: every shape), --reps N (30),
 * --warmup N (5), --arch sm_XX (checked against the targets), --csv FILE,
 * --help (usage on stdout). */
typedef struct bench_args {
    bool dry;
    const char *suite, *match, *arch, *csv;
    int compile_n, reps, warmup;
} bench_args;
/* -1 to go on, else the exit status: 0 after --help, 2 after a message
 * naming prog and the bad argument (and usage) on stderr. */
int bench_args_parse(bench_args *a, const char *prog, const char *const *suites, const char *usage, int argc,
                     char **argv);

/* A GPU sweep under way: the GPU (not for a dry run), the target, the CSV. */
typedef struct bench_sweep {
    bench_gpu gpu;           /* open when on_gpu */
    bool on_gpu;
    const char *arch;        /* --arch, else the device's, else MCIR_DEFAULT_ARCH */
    bench_csv csv_file;
    FILE *csv;
    int compile_n, compiled; /* --compile N; shapes compiled so far */
} bench_sweep;
/* After bench_args_parse: bench_gpu_start (77 without a GPU, unless a dry
 * run), the architecture checked against mcir's targets, the CSV opened,
 * one line on stderr naming the device. -1 to go on (close with
 * bench_sweep_close), else the exit status, everything released. */
int bench_sweep_open(bench_sweep *w, const char *prog, const bench_args *a);
/* One shape's graph.json through the pipeline (bench_graph_build), NVRTC
 * too on a GPU or for the first --compile N shapes of a dry run. */
bool bench_sweep_build(bench_sweep *w, bench_graph *b, const char *json, const char *name, mcir_diag *d);
/* Publishes the CSV and closes the GPU; false if the CSV was not written. */
bool bench_sweep_close(bench_sweep *w);

#endif /* MCIR_BENCH_UTIL_H */
