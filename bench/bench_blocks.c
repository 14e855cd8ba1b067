/*
 * bench_blocks.c — whole graphs on the GPU (GPT-2 / Llama blocks from
 * bench/gen_blocks.py at batch 8, seq 1024 and 2048, f16): latency of
 * mcir_gpu_run with the arena (--alloc pool), median of --reps runs after
 * warm-up (each run's launches stream-timed by the runtime with CUDA
 * events; uploads and read-back are outside the interval; the L2 is not
 * flushed between runs — a whole block's traffic is many times L2), and
 * the peak device bytes of pool, lazy and eager (runtime's own count of its
 * live allocations). Compile time (pipeline + NVRTC) reported apart.
 *
 * Without a GPU: exit 77 with one line; --dry-run compiles every graph and
 * prints "not run (no GPU)" rows.
 *
 * usage: bench_blocks [--dry-run] [--reps N] [--warmup N] [--csv FILE] graph.json...
 */
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"

int main(int argc, char **argv) {
    bool dry = false;
    const char *csv_path = NULL;
    int reps = 20, warmup = 3, n = 0;
    const char **paths = calloc((size_t)argc, sizeof *paths);
    MCIR_ASSERT(paths != NULL);
    for (int i = 1; i < argc; i++) {
        bool more = i + 1 < argc;
        if (strcmp(argv[i], "--dry-run") == 0) dry = true;
        else if (strcmp(argv[i], "--reps") == 0 && more) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--warmup") == 0 && more) warmup = atoi(argv[++i]);
        else if (strcmp(argv[i], "--csv") == 0 && more) csv_path = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: bench_blocks [--dry-run] [--reps N] [--warmup N] [--csv FILE] graph.json...\n");
            free(paths);
            return 2;
        } else paths[n++] = argv[i];
    }
    if (n == 0 || reps < 1) {
        fprintf(stderr, "bench_blocks: no graph given (bench/gen_blocks.py writes them)\n");
        free(paths);
        return 2;
    }
    char why[512] = "", arch[16] = MCIR_DEFAULT_ARCH, device[128] = "";
    bench_gpu g;
    bool gpu = !dry && bench_gpu_open(&g, why, sizeof why);
    if (!dry && !gpu) {
        printf("bench_blocks: skipped, no GPU: %s (--dry-run compiles without one)\n", why);
        free(paths);
        return 77;
    }
    if (gpu) {   /* the device's architecture, for the compile; the runtime opens its own context */
        snprintf(arch, sizeof arch, "%s", g.arch);
        snprintf(device, sizeof device, "%s", g.name);
        bench_gpu_close(&g);
    }
    bench_csv csv_file;
    FILE *csv = bench_csv_open(&csv_file, csv_path);
    if (!csv) {
        free(paths);
        return 2;
    }
    fprintf(csv, "graph,kernels,compile_s,pool_median_ms,pool_min_ms,lazy_median_ms,pool_peak_bytes,lazy_peak_bytes,"
                 "eager_peak_bytes,device,status\n");
    int failures = 0;
    for (int i = 0; i < n; i++) {
        mcir_options o = mcir_options_default();
        o.graph_path = paths[i];
        o.arch = arch;
        o.want_ptx = true;
        mcir_diag d = mcir_diag_stderr();
        mcir_compilation c;
        double t0 = bench_now();
        bool ok = mcir_compile(&o, &c, &d) == MCIR_EXIT_OK;
        double compile_s = bench_now() - t0;
        char status[600] = "not run (no GPU)";
        double pool_med = 0, pool_min = 0, lazy_med = 0;
        int64_t peak[3] = {0};
        if (!ok) snprintf(status, sizeof status, "pipeline failed");
        else if (gpu) {
            mcir_env *env = mcir_env_new(c.graph, 0);
            mcir_gpu_stats st;
            double *ms = calloc((size_t)reps, sizeof *ms);
            MCIR_ASSERT(ms != NULL);
            const mcir_alloc_mode modes[3] = {MCIR_ALLOC_POOL, MCIR_ALLOC_LAZY, MCIR_ALLOC_EAGER};
            for (int m = 0; m < 3 && ok; m++) {
                int r = m == 2 ? 1 : reps;
                for (int k = 0; k < warmup + r && ok; k++) {
                    ok = mcir_gpu_run(c.codegen, env, modes[m], &st, &d);
                    if (k >= warmup) ms[k - warmup] = st.elapsed_ms;
                }
                if (!ok) break;
                peak[m] = st.peak_device_bytes;
                double mn = ms[0];
                for (int k = 1; k < r; k++)
                    if (ms[k] < mn) mn = ms[k];
                double med = bench_median(ms, r);
                if (m == 0) pool_med = med, pool_min = mn;
                if (m == 1) lazy_med = med;
            }
            snprintf(status, sizeof status, ok ? "ok" : "GPU run failed");
            free(ms);
            mcir_env_free(env);
        }
        if (!ok) failures++;
        char ex[256];
        snprintf(ex, sizeof ex, "%s", paths[i]);
        char *s = strrchr(ex, '/');
        if (s && strcmp(s, "/graph.json") == 0) *s = 0, s = strrchr(ex, '/');
        fprintf(csv, "%s,%d,%.3f,", s ? s + 1 : ex, c.plan ? c.plan->n_kernels : 0, compile_s);
        if (pool_med > 0)
            fprintf(csv, "%.4f,%.4f,%.4f,%lld,%lld,%lld,", pool_med, pool_min, lazy_med, (long long)peak[0],
                    (long long)peak[1], (long long)peak[2]);
        else
            fprintf(csv, ",,,,,,");
        fprintf(csv, "%s,%s\n", device, status);
        fflush(csv);
        mcir_compilation_free(&c);
    }
    if (!bench_csv_close(&csv_file)) failures++;
    free(paths);
    return failures ? 1 : 0;
}
