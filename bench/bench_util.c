/*
 * bench_util.c — the benchmarks' copy of the pipeline's stage order
 * (mcirc/pipeline.c), for graphs the benchmark writes in memory, timed per
 * part; medians, growable text, CSV files.
 */
#include "bench/bench_util.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_median(double *v, int n) {
    if (n <= 0) return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bench_text_printf(bench_text *t, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    MCIR_ASSERT(need >= 0);
    if (t->len + (size_t)need + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 1024;
        while (cap < t->len + (size_t)need + 1) cap *= 2;
        t->s = realloc(t->s, cap);
        MCIR_ASSERT(t->s != NULL);
        t->cap = cap;
    }
    vsnprintf(t->s + t->len, (size_t)need + 1, fmt, ap2);
    va_end(ap2);
    t->len += (size_t)need;
}

void bench_text_free(bench_text *t) {
    free(t->s);
    memset(t, 0, sizeof *t);
}

FILE *bench_csv_open(const char *path) {
    if (!path || strcmp(path, "-") == 0) return stdout;
    return fopen(path, "w");
}

void bench_csv_close(FILE *f) {
    if (f && f != stdout) fclose(f);
    else if (f) fflush(f);
}

bool bench_graph_build(bench_graph *b, const char *json, const char *name, const char *arch,
                       bool compile, mcir_diag *d) {
    memset(b, 0, sizeof *b);
    double t0 = bench_now();
    b->target = mcir_target_find(arch);
    if (!b->target) {
        mcir_error(d, (mcir_loc){name, 0, 0}, "unknown architecture %s", arch);
        return false;
    }
    b->trace = mcir_trace_new();
    b->graph = mcir_graph_read_json_string(json, name, d);
    if (!b->graph) return false;
    b->catalog = mcir_catalog_new();
    if (!mcir_catalog_load_default(b->catalog, d)) return false;
    if (!mcir_rewrite_run(b->graph, b->catalog, b->target, b->trace, d)) return false;
    b->plan = mcir_plan_build(b->graph, b->target, b->trace, d);
    if (!b->plan) return false;
    b->memory = mcir_memory_plan_build(b->plan, NULL, b->trace, d);
    if (!b->memory) return false;
    b->cg = mcir_codegen_new(b->plan, b->memory, d);
    if (!b->cg) return false;
    double t1 = bench_now();
    b->pipeline_s = t1 - t0;
    if (compile) {
        if (!mcir_codegen_compile(b->cg, arch, d)) return false;
        b->compile_s = bench_now() - t1;
        b->compiled = true;
    }
    return true;
}

void bench_graph_free(bench_graph *b) {
    mcir_codegen_free(b->cg);
    mcir_memory_plan_free(b->memory);
    mcir_plan_free(b->plan);
    mcir_catalog_free(b->catalog);
    mcir_trace_free(b->trace);
    mcir_graph_free(b->graph);
    memset(b, 0, sizeof *b);
}

int bench_graph_kernel(const bench_graph *b, mcir_template t) {
    if (!b->plan) return -1;
    for (int i = 0; i < b->plan->n_kernels; i++)
        if (b->plan->kernels[i].tpl == t) return i;
    return -1;
}
