/*
 * bench_util.c — the benchmarks' copy of the pipeline's stage order
 * (mcirc/pipeline.c), for graphs the benchmark writes in memory, timed per
 * part; medians, growable text, CSV files.
 */
#include "bench/bench_util.h"

#include <errno.h>
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

/* text as an integer in [min, max] into *out; false after a message */
static bool parse_int(const char *prog, const char *opt, const char *text, int min, int max, int *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno == ERANGE || v < min || v > max) {
        fprintf(stderr, "%s: %s %s: expected an integer from %d to %d\n", prog, opt, text, min, max);
        return false;
    }
    *out = (int)v;
    return true;
}

int bench_args_parse(bench_args *a, const char *prog, const char *const *suites, const char *usage, int argc,
                     char **argv) {
    *a = (bench_args){.suite = "all", .compile_n = -1, .reps = 30, .warmup = 5};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        bool more = i + 1 < argc, ok = true;
        if (strcmp(o, "--dry-run") == 0) a->dry = true;
        else if (strcmp(o, "--suite") == 0 && more) a->suite = argv[++i];
        else if (strcmp(o, "--match") == 0 && more) a->match = argv[++i];
        else if (strcmp(o, "--compile") == 0 && more) ok = parse_int(prog, o, argv[++i], 0, 100000, &a->compile_n);
        else if (strcmp(o, "--reps") == 0 && more) ok = parse_int(prog, o, argv[++i], 1, 100000, &a->reps);
        else if (strcmp(o, "--warmup") == 0 && more) ok = parse_int(prog, o, argv[++i], 0, 100000, &a->warmup);
        else if (strcmp(o, "--arch") == 0 && more) a->arch = argv[++i];
        else if (strcmp(o, "--csv") == 0 && more) a->csv = argv[++i];
        else if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        } else {
            fprintf(stderr, "%s: unknown or incomplete option '%s'\n%s", prog, o, usage);
            return 2;
        }
        if (!ok) return 2;
    }
    bool known = false;
    for (int i = 0; suites[i]; i++) known |= strcmp(a->suite, suites[i]) == 0;
    if (!known) {
        fprintf(stderr, "%s: --suite %s: expected", prog, a->suite);
        for (int i = 0; suites[i]; i++) fprintf(stderr, "%s %s", i == 0 ? "" : suites[i + 1] ? "," : " or", suites[i]);
        fprintf(stderr, "\n");
        return 2;
    }
    if (a->arch && !mcir_target_find(a->arch)) {
        fprintf(stderr, "%s: --arch %s: no mcir target (known: sm_80, sm_86, sm_89, sm_90)\n", prog, a->arch);
        return 2;
    }
    return -1;
}

int bench_sweep_open(bench_sweep *w, const char *prog, const bench_args *a) {
    memset(w, 0, sizeof *w);
    w->arch = a->arch;
    w->compile_n = a->compile_n;
    int st = bench_gpu_start(prog, a->dry, a->reps, &w->gpu, &w->on_gpu, &w->arch);
    if (st >= 0) return st;
    if (!mcir_target_find(w->arch)) {   /* the device's own */
        fprintf(stderr, "%s: no mcir target for %s (known: sm_80, sm_86, sm_89, sm_90)\n", prog, w->arch);
        st = 2;
    } else if (!(w->csv = bench_csv_open(&w->csv_file, a->csv))) {
        st = 2;   /* the reason is on stderr */
    }
    if (st >= 0) {
        if (w->on_gpu) bench_gpu_close(&w->gpu);
        return st;
    }
    if (w->on_gpu)
        fprintf(stderr, "%s: %s (%s), L2 %d KiB, %d warm-up + %d timed runs per shape\n", prog, w->gpu.name,
                w->gpu.arch, w->gpu.l2_bytes >> 10, a->warmup, a->reps);
    return -1;
}

bool bench_sweep_build(bench_sweep *w, bench_graph *b, const char *json, const char *name, mcir_diag *d) {
    bool compile = w->on_gpu || w->compile_n < 0 || w->compiled < w->compile_n;
    bool ok = bench_graph_build(b, json, name, w->arch, compile, d);
    w->compiled += compile && ok;
    return ok;
}

bool bench_sweep_close(bench_sweep *w) {
    bool ok = bench_csv_close(&w->csv_file);
    if (w->on_gpu) bench_gpu_close(&w->gpu);
    return ok;
}

bool bench_match(const char *name, const char *match) {
    if (!match) return true;
    for (const char *p = match; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char part[200];
        snprintf(part, sizeof part, "%.*s", (int)(len < sizeof part ? len : sizeof part - 1), p);
        if (len && strstr(name, part)) return true;
        p += len + (e ? 1 : 0);
    }
    return false;
}

void bench_csv_cell(char *s) {
    for (; *s; s++)
        if (*s == ',' || *s == '\n') *s = ';';
}

void bench_compile_cells(const bench_graph *b, char comp[32], char cache[16]) {
    comp[0] = cache[0] = 0;
    if (!b->compiled) return;
    snprintf(comp, 32, "%.3f", b->compile_s);
    snprintf(cache, 16, "%s", mcir_cache_misses() > b->cache_misses ? "cold" : "cached");
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
        b->cache_misses = mcir_cache_misses();
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

/* Reads output o back from ptr: status "ok", or how many of its values
 * are not finite (f32, f16 and bf16; other dtypes are not looked at). */
static bool check_finite(bench_gpu *g, const mcir_tensor *o, uint64_t ptr, char *status, size_t n) {
    size_t bytes = (size_t)mcir_tensor_bytes(o);
    unsigned char *h = malloc(bytes + 1);
    MCIR_ASSERT(h != NULL);
    bool ok = bench_gpu_download(g, h, ptr, bytes);
    bool is_float = o->dtype == MCIR_DTYPE_F32 || o->dtype == MCIR_DTYPE_F16 || o->dtype == MCIR_DTYPE_BF16;
    int64_t bad = 0, cnt = is_float ? mcir_tensor_numel(o) : 0;
    for (int64_t i = 0; ok && i < cnt; i++) {
        float v = o->dtype == MCIR_DTYPE_F32 ? ((float *)h)[i]
                : o->dtype == MCIR_DTYPE_F16 ? mcir_f16_to_f32(((uint16_t *)h)[i])
                                             : mcir_bf16_to_f32(((uint16_t *)h)[i]);
        bad += !isfinite(v);
    }
    free(h);
    if (ok) snprintf(status, n, bad ? "ran, %lld non-finite outputs" : "ok", (long long)bad);
    return ok;
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
    if (ok && kp->n_writes > 0) ok = check_finite(g, kp->writes[0], ptr[kp->n_reads], status, n);
    if (!ok) snprintf(status, n, "failed: %s", g->why);
    for (int j = 0; j < np; j++) bench_gpu_free(g, ptr[j]);
    free(ptr);
    free(params);
    return ok;
}

int64_t bench_graph_device_bytes(const bench_graph *b) {
    const mcir_graph *gr = b->plan->graph;
    int64_t bytes = 0;
    for (int i = 0; i < gr->n_tensors; i++) {
        const mcir_tensor *t = gr->tensors[i];
        if (t->kind == MCIR_TENSOR_INPUT || t->kind == MCIR_TENSOR_WEIGHT || t->is_output)
            bytes += mcir_tensor_bytes(t);
    }
    for (int p = 0; b->memory && p < b->memory->n_pools; p++) bytes += b->memory->pool_bytes[p];
    for (int k = 0; k < b->plan->n_kernels; k++) {
        mcir_kernel_cost c;
        mcir_cost_kernel(&b->plan->kernels[k], b->plan->target, NULL, &c);
        bytes += c.staging_bytes / 2;   /* written and re-read: counted twice in the cost */
    }
    return bytes;
}

/* A failed run's status: the first line of the diagnostics the runtime
 * wrote into the memory stream f (*text), all of them echoed to stderr. */
static void run_failure(FILE *f, char **text, char *status, size_t n) {
    fflush(f);
    const char *all = *text && **text ? *text : "(no diagnostic)\n";
    fputs(all, stderr);
    size_t len = strcspn(all, "\n");
    snprintf(status, n, "GPU run failed: %.*s", (int)(len < 400 ? len : 400), all);
}

bool bench_time_graph(bench_gpu *g, bench_graph *b, int warmup, int reps, bench_gpu_timing *t,
                      char *status, size_t n) {
    const mcir_graph *gr = b->plan->graph;
    uint64_t *bound = calloc((size_t)gr->n_tensors + 1, sizeof *bound);
    double *ms = calloc((size_t)reps + 1, sizeof *ms);
    MCIR_ASSERT(bound && ms);
    mcir_env *env = mcir_env_new(gr, 1);
    bool ok = true;
    for (int i = 0; i < gr->n_inputs && ok; i++) {
        const mcir_tensor *x = gr->inputs[i];
        ok = bench_gpu_alloc(g, (size_t)mcir_tensor_bytes(x), &bound[x->id]) &&
             bench_gpu_fill(g, bound[x->id], mcir_tensor_numel(x), x->dtype, (uint64_t)i + 1);
    }
    for (int i = 0; i < gr->n_outputs && ok; i++) {
        const mcir_tensor *y = gr->outputs[i];
        if (!bound[y->id]) ok = bench_gpu_alloc(g, (size_t)mcir_tensor_bytes(y), &bound[y->id]);
    }
    if (!ok) snprintf(status, n, "failed: %s", g->why);
    for (int i = 0; i < b->graph->n_weights && ok; i++) {
        /* the runtime's seeded values (seed 0), made once as the weight's
         * data: each run then only copies and uploads them */
        mcir_tensor *w = b->graph->weights[i];
        if (w->data) continue;
        float *v = malloc(sizeof *v * (size_t)mcir_tensor_numel(w) + 1);
        MCIR_ASSERT(v != NULL);
        mcir_fill_seeded(w, 0, v);
        w->data = mcir_arena_alloc(b->graph->arena, (size_t)mcir_tensor_bytes(w));
        mcir_values_from_f32(w->dtype, v, w->data, mcir_tensor_numel(w));
        free(v);
    }
    /* the runtime's diagnostics, kept for the status column */
    char *text = NULL;
    size_t text_n = 0;
    FILE *f = open_memstream(&text, &text_n);
    MCIR_ASSERT(f != NULL);
    mcir_diag d = mcir_diag_to(f);
    mcir_gpu_stats st;
    for (int i = 0; ok && i < warmup + reps; i++) {
        if (i >= warmup && !bench_gpu_flush(g)) {
            snprintf(status, n, "failed: %s", g->why);
            ok = false;
        } else if (!mcir_gpu_run_bound(b->cg, env, bound, MCIR_ALLOC_POOL, &st, &d)) {
            run_failure(f, &text, status, n);
            ok = false;
        } else if (i >= warmup) {
            ms[i - warmup] = st.elapsed_ms;
        }
    }
    fflush(f);
    if (ok) {
        bench_gpu_timing_of(ms, reps, t);
        const mcir_tensor *y = gr->outputs[0];
        ok = check_finite(g, y, bound[y->id], status, n);
        if (!ok) snprintf(status, n, "failed: %s", g->why);
    }
    if (ok && d.n_warnings && text) {   /* e.g. cuBLASLt's fallback to the generated kernel */
        size_t len = strlen(status), w = strcspn(text, "\n");
        fputs(text, stderr);
        if (len < n) snprintf(status + len, n - len, "; %.*s", (int)(w < 300 ? w : 300), text);
    }
    fclose(f);
    free(text);
    for (int i = 0; i < gr->n_tensors; i++) bench_gpu_free(g, bound[i]);
    mcir_env_free(env);
    free(bound);
    free(ms);
    return ok;
}
