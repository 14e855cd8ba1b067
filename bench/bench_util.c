/*
 * bench_util.c — the benchmarks' copy of the pipeline's stage order
 * (mcirc/pipeline.c), for graphs the benchmark writes in memory, timed per
 * part; medians, growable text, CSV files.
 */
#include "bench/bench_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/codegen-impl.h"

int bench_gpu_start(const char *prog, bool dry, int reps, bench_gpu *g, bool *gpu, const char **arch) {
    if (reps < 20 && !dry) {
        fprintf(stderr, "%s: --reps %d: at least 20 timed runs\n", prog, reps);
        return 2;
    }
    char why[512] = "";
    *gpu = !dry && bench_gpu_open(g, why, sizeof why);
    if (!dry && !*gpu) {
        printf("%s: skipped, no GPU: %s (--dry-run compiles without one)\n", prog, why);
        return 77;
    }
    if (!*arch) *arch = *gpu ? g->arch : MCIR_DEFAULT_ARCH;
    return -1;
}

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

FILE *bench_csv_open(bench_csv *c, const char *path) {
    mcir_diag d = mcir_diag_stderr();
    c->to_stdout = mcir_path_is_stdout(path ? path : "-");
    return mcir_outfile_open(&c->out, path ? path : "-", &d) ? c->out.f : NULL;
}

bool bench_csv_close(bench_csv *c) {
    mcir_diag d = mcir_diag_stderr();
    return mcir_outfile_commit(&c->out, &d);
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
    b->memory = mcir_memplan_build(b->plan, NULL, b->trace, d);
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
    mcir_memplan_free(b->memory);
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

/* Times kernel k of b on device buffers filled with seeded values; the
 * output is read back and must be finite. */
bool bench_time_kernel(bench_gpu *g, bench_graph *b, int k, int warmup, int reps, bench_gpu_timing *t,
                        char *status, size_t n) {
    const mcir_kernel_plan *kp = &b->plan->kernels[k];
    const cg_kernel *ck = &b->cg->k[k];
    int np = kp->n_reads + kp->n_writes;
    uint64_t *ptr = calloc((size_t)np, sizeof *ptr);
    void **params = calloc((size_t)np, sizeof *params);
    MCIR_ASSERT(ptr && params);
    bool ok = true;
    for (int j = 0; j < np && ok; j++) {
        const mcir_tensor *tn = j < kp->n_reads ? kp->reads[j] : kp->writes[j - kp->n_reads];
        ok = bench_gpu_alloc(g, (size_t)mcir_tensor_bytes(tn), &ptr[j]) &&
             (j >= kp->n_reads || bench_gpu_fill(g, ptr[j], mcir_tensor_numel(tn), tn->dtype, (uint64_t)j + 1));
        params[j] = &ptr[j];
    }
    void *fn = NULL;
    /* the compile unit: shared by identical kernels, launched as its content-named entry */
    if (ok) ok = bench_gpu_load(g, cg_kernel_bin(b->cg, k)->cubin, ck->entry, ck->smem, &fn);
    if (ok) ok = bench_gpu_time(g, fn, ck->grid, ck->block, ck->smem, params, warmup, reps, t);
    if (ok && kp->n_writes > 0) {   /* the output must be finite */
        const mcir_tensor *o = kp->writes[0];
        size_t bytes = (size_t)mcir_tensor_bytes(o);
        unsigned char *h = malloc(bytes);
        MCIR_ASSERT(h != NULL);
        ok = bench_gpu_download(g, h, ptr[kp->n_reads], bytes);
        int64_t bad = 0, cnt = mcir_tensor_numel(o);
        for (int64_t i = 0; ok && i < cnt; i++) {
            float v = o->dtype == MCIR_DTYPE_F32 ? ((float *)h)[i]
                    : o->dtype == MCIR_DTYPE_F16 ? mcir_f16_to_f32(((uint16_t *)h)[i])
                                                 : mcir_bf16_to_f32(((uint16_t *)h)[i]);
            bad += !isfinite(v);
        }
        free(h);
        snprintf(status, n, bad ? "ran, %lld non-finite outputs" : "ok", (long long)bad);
    }
    if (!ok) snprintf(status, n, "failed: %s", g->why);
    for (int j = 0; j < np; j++) bench_gpu_free(g, ptr[j]);
    free(ptr);
    free(params);
    return ok;
}
