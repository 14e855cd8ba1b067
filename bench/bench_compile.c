/*
 * bench_compile.c — compile time, measured without a GPU: for each graph
 * (default: every examples/NAME/graph.json), the whole mcirc pipeline
 * (mcir_compile: read, rewrite, plan, memory plan, generate, NVRTC) with
 * an empty kernel cache (cold) and again with the cache filled (cached,
 * median of --reps), the part before NVRTC alone, and every kernel's NVRTC
 * compile on its own: cold (NVRTC called directly, no cache) and cached
 * (through the cache, a hit). Each measurement uses a fresh cache
 * directory under $TMPDIR (MCIR_CACHE_DIR is set per measurement).
 *
 * usage: bench_compile [--arch sm_90] [--reps N] [--pipeline-csv FILE]
 *          [--kernels-csv FILE] [--examples DIR] [graph.json ...]
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "codegen/codegen-impl.h"

static char cache_root[256];
static int cache_serial;

/* A new, empty cache directory for the next measurement. */
static void fresh_cache(void) {
    char dir[320];
    snprintf(dir, sizeof dir, "%s/c%d", cache_root, cache_serial++);
    mkdir(dir, 0700);
    setenv("MCIR_CACHE_DIR", dir, 1);
}

static void rm_rf_cache(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_root);
    if (system(cmd) != 0) fprintf(stderr, "bench_compile: could not remove %s\n", cache_root);
}

static double time_compile(const char *path, const char *arch, bool ptx, int *kernels, long *nvrtc_calls) {
    mcir_options o = mcir_options_default();
    o.graph_path = path;
    o.arch = arch;
    o.want_cuda = true;
    o.want_ptx = ptx;
    mcir_diag d = mcir_diag_stderr();
    mcir_compilation c;
    long before = mcir_nvrtc_invocations();
    double t0 = bench_now();
    int st = mcir_compile(&o, &c, &d);
    double t = bench_now() - t0;
    if (kernels) *kernels = c.plan ? c.plan->n_kernels : 0;
    if (nvrtc_calls) *nvrtc_calls = mcir_nvrtc_invocations() - before;
    mcir_compilation_free(&c);
    return st == MCIR_EXIT_OK ? t : -1.0;
}

static const char *example_name(const char *path, char *buf, size_t n) {
    /* examples/NAME/graph.json → NAME; else the file name */
    snprintf(buf, n, "%s", path);
    char *slash = strrchr(buf, '/');
    if (slash && strcmp(slash, "/graph.json") == 0) {
        *slash = 0;
        char *prev = strrchr(buf, '/');
        memmove(buf, prev ? prev + 1 : buf, strlen(prev ? prev + 1 : buf) + 1);
    } else if (slash) {
        memmove(buf, slash + 1, strlen(slash + 1) + 1);
    }
    return buf;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Per kernel: NVRTC cold (no cache) and cached (a hit). */
static void kernel_rows(const char *path, const char *ex, const char *arch, FILE *kcsv, double *sum_cold) {
    mcir_options o = mcir_options_default();
    o.graph_path = path;
    o.arch = arch;
    o.want_cuda = true;
    mcir_diag d = mcir_diag_stderr();
    mcir_compilation c;
    *sum_cold = 0;
    if (mcir_compile(&o, &c, &d) != MCIR_EXIT_OK || !c.codegen) {
        mcir_compilation_free(&c);
        return;
    }
    fresh_cache();
    for (int i = 0; i < mcir_codegen_kernel_count(c.codegen); i++) {
        const cg_kernel *k = &c.codegen->k[i];
        for (int part = 0; part < 2; part++) {
            const char *src = part ? k->epi_source : k->source;
            const char *name = part ? k->epi_name : k->kp->name;
            if (!src) continue;
            mcir_compiled raw = {0}, hit = {0}, fill = {0};
            char why[512], *log = NULL;
            double t0 = bench_now();
            bool ok = cg_nvrtc_compile(name, src, arch, &raw, &log, why, sizeof why);
            double cold = bench_now() - t0;
            free(log);
            double cached = -1;
            if (ok && mcir_nvrtc_compile_source(name, src, arch, &fill, &d)) {   /* fills the cache */
                t0 = bench_now();
                if (mcir_nvrtc_compile_source(name, src, arch, &hit, &d)) cached = bench_now() - t0;
            }
            if (ok) *sum_cold += cold;
            fprintf(kcsv, "%s,%s,%s,%zu,%.4f,%.6f,%d,%d,%s\n", ex, name,
                    part ? "matmul_epilogue" : cg_template_name(k->kp->tpl), strlen(src), ok ? cold : -1.0,
                    cached, raw.registers, raw.spill_bytes, ok ? "ok" : "failed");
            fflush(kcsv);
            mcir_compiled_free(&raw);
            mcir_compiled_free(&hit);
            mcir_compiled_free(&fill);
        }
    }
    mcir_compilation_free(&c);
}

int main(int argc, char **argv) {
    const char *arch = MCIR_DEFAULT_ARCH, *pcsv_path = NULL, *kcsv_path = NULL, *exdir = NULL;
    int reps = 3;
    char **paths = calloc((size_t)argc + 256, sizeof *paths);
    int n = 0;
    MCIR_ASSERT(paths != NULL);
    for (int i = 1; i < argc; i++) {
        bool more = i + 1 < argc;
        if (strcmp(argv[i], "--arch") == 0 && more) arch = argv[++i];
        else if (strcmp(argv[i], "--reps") == 0 && more) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--pipeline-csv") == 0 && more) pcsv_path = argv[++i];
        else if (strcmp(argv[i], "--kernels-csv") == 0 && more) kcsv_path = argv[++i];
        else if (strcmp(argv[i], "--examples") == 0 && more) exdir = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: bench_compile [--arch sm_90] [--reps N] [--pipeline-csv FILE] "
                            "[--kernels-csv FILE] [--examples DIR] [graph.json ...]\n");
            free(paths);
            return 2;
        } else paths[n++] = strdup(argv[i]);
    }
    char why[256];
    if (!mcir_nvrtc_available(why, sizeof why)) {
        printf("bench_compile: skipped, no NVRTC: %s\n", why);
        free(paths);
        return 77;
    }
    if (n == 0) {
        if (!exdir) exdir = MCIR_BENCH_EXAMPLES_DIR;
        DIR *dir = opendir(exdir);
        struct dirent *e;
        while (dir && (e = readdir(dir)) && n < 256) {
            char p[1024];
            struct stat st;
            snprintf(p, sizeof p, "%s/%s/graph.json", exdir, e->d_name);
            if (e->d_name[0] != '.' && stat(p, &st) == 0) paths[n++] = strdup(p);
        }
        if (dir) closedir(dir);
        qsort(paths, (size_t)n, sizeof *paths, cmp_str);
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(cache_root, sizeof cache_root, "%s/mcir-bench-compile-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(cache_root)) {
        fprintf(stderr, "bench_compile: cannot create a temporary directory\n");
        return 1;
    }
    bench_csv pcsv_file, kcsv_file;
    FILE *pcsv = bench_csv_open(&pcsv_file, pcsv_path);
    FILE *kcsv = pcsv && kcsv_path ? bench_csv_open(&kcsv_file, kcsv_path) : NULL;
    if (!pcsv || (kcsv_path && !kcsv)) {
        if (pcsv) mcir_outfile_discard(&pcsv_file.out);
        return 2;
    }
    fprintf(pcsv, "example,kernels,nvrtc_calls,front_s,pipeline_cold_s,pipeline_cached_s,kernel_nvrtc_sum_s,"
                  "nvrtc,arch\n");
    if (kcsv) fprintf(kcsv, "example,kernel,template,source_bytes,nvrtc_cold_s,cached_s,registers,spill_bytes,status\n");
    int failures = 0;
    for (int i = 0; i < n; i++) {
        char ex[256];
        example_name(paths[i], ex, sizeof ex);
        int kernels = 0;
        long calls = 0;
        fresh_cache();
        double front = time_compile(paths[i], arch, false, NULL, NULL);
        fresh_cache();
        double cold = time_compile(paths[i], arch, true, &kernels, &calls);
        double cached_v[16];
        int r = reps < 1 ? 1 : reps > 16 ? 16 : reps;
        for (int k = 0; k < r; k++) cached_v[k] = time_compile(paths[i], arch, true, NULL, NULL);
        double cached = bench_median(cached_v, r);
        double sum_cold = 0;
        if (kcsv) kernel_rows(paths[i], ex, arch, kcsv, &sum_cold);
        if (front < 0 || cold < 0 || cached < 0) failures++;
        fprintf(pcsv, "%s,%d,%ld,%.4f,%.3f,%.4f,%.3f,%s,%s\n", ex, kernels, calls, front, cold, cached, sum_cold,
                mcir_nvrtc_version(), arch);
        fflush(pcsv);
        if (!pcsv_file.to_stdout)
            printf("%-16s %3d kernels  front %.3f s  cold %.2f s (%ld NVRTC calls)  cached %.3f s\n", ex,
                   kernels, front, cold, calls, cached);
    }
    if (!bench_csv_close(&pcsv_file)) failures++;
    if (kcsv && !bench_csv_close(&kcsv_file)) failures++;
    rm_rf_cache();
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    return failures ? 1 : 0;
}
