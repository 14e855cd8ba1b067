/*
 * bench_cpu.c — the CPU path (`mcirc --run --device cpu`: the reference
 * interpreter on the rewritten graph) per graph, next to the same graph
 * without rewrites, at a fixed thread count. The env is kept between runs,
 * so after one untimed run (which seeds inputs and weights) the timed runs
 * measure execution only: median of --reps wall-clock seconds.
 * bench/torch_cpu.py times PyTorch on the same graphs and inputs.
 *
 * usage: bench_cpu [--threads N] [--reps N] [--csv FILE] [--examples DIR] [graph.json ...]
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "bench/bench_util.h"

/* CPU seconds of the process (all threads): on a shared machine the
 * wall-clock time includes waiting for a core, CPU time does not. */
static double cpu_seconds(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec * 1e-6 + (double)r.ru_stime.tv_sec +
           (double)r.ru_stime.tv_usec * 1e-6;
}

static double run_median(const char *path, bool rewrite, int reps, int *nodes, double *cpu_med) {
    mcir_options o = mcir_options_default();
    o.graph_path = path;
    o.no_rewrite = !rewrite;
    mcir_diag d = mcir_diag_stderr();
    mcir_compilation c;
    double med = -1;
    if (mcir_compile(&o, &c, &d) == MCIR_EXIT_OK) {
        *nodes = c.nodes_after;
        mcir_env *env = mcir_env_new(c.graph, 0);
        double *s = calloc((size_t)reps, sizeof *s), *cs = calloc((size_t)reps, sizeof *cs);
        MCIR_ASSERT(s && cs);
        bool ok = mcir_interp_run(c.graph, env, &d);   /* warm-up: seeds the leaves */
        for (int r = 0; ok && r < reps; r++) {
            double t0 = bench_now(), c0 = cpu_seconds();
            ok = mcir_interp_run(c.graph, env, &d);
            s[r] = bench_now() - t0;
            cs[r] = cpu_seconds() - c0;
        }
        if (ok) med = bench_median(s, reps), *cpu_med = bench_median(cs, reps);
        free(s);
        free(cs);
        mcir_env_free(env);
    }
    mcir_compilation_free(&c);
    return med;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    const char *csv_path = NULL, *exdir = MCIR_BENCH_EXAMPLES_DIR;
    int threads = 2, reps = 5, n = 0;
    char *paths[256];
    for (int i = 1; i < argc; i++) {
        bool more = i + 1 < argc;
        if (strcmp(argv[i], "--threads") == 0 && more) threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && more) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--csv") == 0 && more) csv_path = argv[++i];
        else if (strcmp(argv[i], "--examples") == 0 && more) exdir = argv[++i];
        else if (argv[i][0] == '-' || n == 256) {
            fprintf(stderr, "usage: bench_cpu [--threads N] [--reps N] [--csv FILE] [--examples DIR] [graph.json ...]\n");
            return 2;
        } else paths[n++] = strdup(argv[i]);
    }
    if (reps < 1) reps = 1;
    if (n == 0) {
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
    mcir_set_threads(threads);
    bench_csv csv_file;
    FILE *csv = bench_csv_open(&csv_file, csv_path);
    if (!csv) return 2;
    fprintf(csv, "example,nodes_unfused,nodes_fused,mcir_fused_s,mcir_unfused_s,mcir_fused_cpu_s,mcir_unfused_cpu_s,threads,reps\n");
    int failures = 0;
    for (int i = 0; i < n; i++) {
        char ex[256];
        snprintf(ex, sizeof ex, "%s", paths[i]);
        char *s = strrchr(ex, '/');
        if (s && strcmp(s, "/graph.json") == 0) *s = 0, s = strrchr(ex, '/');
        int nf = 0, nu = 0;
        double fc = 0, uc = 0;
        double fused = run_median(paths[i], true, reps, &nf, &fc);
        double unfused = run_median(paths[i], false, reps, &nu, &uc);
        if (fused < 0 || unfused < 0) failures++;
        fprintf(csv, "%s,%d,%d,%.5f,%.5f,%.5f,%.5f,%d,%d\n", s ? s + 1 : ex, nu, nf, fused, unfused, fc, uc, threads,
                reps);
        fflush(csv);
        free(paths[i]);
    }
    if (!bench_csv_close(&csv_file)) failures++;
    return failures ? 1 : 0;
}
