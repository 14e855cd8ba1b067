/*
 * bench_steps.c — the per-step CPU overhead of a session (runtime/runtime.h)
 * with and without CUDA graphs: the host time to issue one step's
 * launches (mcir_gpu_stats.host_us: cuLaunchKernel and the library calls
 * one by one, or one cuGraphLaunch), and the step's stream-timed GPU time,
 * medians of --reps steps after --warmup (with graphs, the first step's
 * warm-up launches and capture are reported apart as capture_us). Inputs
 * are uploaded at every step, outside both intervals.
 *
 * The overhead is a GPU figure. Without a GPU: exit 77 with one line;
 * --dry-run runs the same sessions on the emulated device (2 steps, grids
 * capped at 4 blocks) so the code path is exercised: its host times
 * include the emulated kernels, which run as they are issued, and mean
 * nothing; its launch_calls column (the calls that issue work in a step
 * after the first: cuLaunchKernel and cuBLAS / cuBLASLt GEMMs, or one
 * cuGraphLaunch) is what CI checks.
 *
 * usage: bench_steps [--dry-run] [--reps N] [--warmup N] [--csv FILE] [graph.json...]
 *        (default: the examples mlp_tiny, gpt2_decode, gpt2_block)
 */
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "runtime/runtime.h"
#include "emu/emu.h"

typedef struct steps_timing {
    double host_us, gpu_ms, capture_us;
    long launch_calls;   /* emulated: launch calls of a step after the first (kernels, GEMMs, graphs); -1 on a GPU */
    char status[400];
} steps_timing;

/* warmup + reps steps of one session; graphs on or off. */
static bool time_steps(mcir_compilation *c, bool emulated, bool graphs, int warmup, int reps, steps_timing *t) {
    mcir_diag d = mcir_diag_stderr();
    mcir_env *env = mcir_env_new(c->graph, 0);
    mcir_gpu_session_options o = {.mode = MCIR_ALLOC_POOL, .graphs = graphs};
    mcir_gpu_session *s = emulated ? mcir_emu_session_open(c->codegen, env, &o, &d)
                                   : mcir_gpu_session_open(c->codegen, env, &o, &d);
    double *host = calloc((size_t)reps, sizeof *host), *gpu = calloc((size_t)reps, sizeof *gpu);
    MCIR_ASSERT(host && gpu);
    bool ok = s != NULL;
    t->launch_calls = -1;
    for (int k = 0; ok && k < warmup + reps; k++) {
        mcir_gpu_stats st;
        if (emulated) mcir_emu_reset_launches();
        ok = mcir_gpu_session_step(s, env, NULL, &st, &d);
        if (ok && k == 0) t->capture_us = st.capture_us;
        if (ok && emulated && k > 0) {
            mcir_emu_calls calls;
            mcir_emu_call_counts(&calls);
            t->launch_calls = calls.launch_kernel + calls.library + calls.graph_launch;
        }
        if (ok && k >= warmup) {
            host[k - warmup] = st.host_us;
            gpu[k - warmup] = st.elapsed_ms;
        }
    }
    if (ok) {
        t->host_us = bench_median(host, reps);
        t->gpu_ms = bench_median(gpu, reps);
    }
    snprintf(t->status, sizeof t->status, "%s", ok ? "ok" : "run failed (diagnostics on stderr)");
    mcir_gpu_session_close(s);
    mcir_env_free(env);
    free(host);
    free(gpu);
    return ok;
}

int main(int argc, char **argv) {
    bool dry = false;
    const char *csv_path = NULL;
    int reps = 50, warmup = 5, n = 0;
    const char **paths = calloc((size_t)argc + 3, sizeof *paths);
    MCIR_ASSERT(paths != NULL);
    for (int i = 1; i < argc; i++) {
        bool more = i + 1 < argc;
        if (strcmp(argv[i], "--dry-run") == 0) dry = true;
        else if (strcmp(argv[i], "--reps") == 0 && more) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--warmup") == 0 && more) warmup = atoi(argv[++i]);
        else if (strcmp(argv[i], "--csv") == 0 && more) csv_path = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: bench_steps [--dry-run] [--reps N] [--warmup N] [--csv FILE] [graph.json...]\n");
            free(paths);
            return 2;
        } else paths[n++] = argv[i];
    }
    if (reps < 1 || warmup < 1) {   /* warmup >= 1: the first step captures */
        fprintf(stderr, "bench_steps: --reps and --warmup must be at least 1\n");
        free(paths);
        return 2;
    }
    if (n == 0) {
        paths[n++] = MCIR_BENCH_EXAMPLES_DIR "/mlp_tiny/graph.json";
        paths[n++] = MCIR_BENCH_EXAMPLES_DIR "/gpt2_decode/graph.json";
        paths[n++] = MCIR_BENCH_EXAMPLES_DIR "/gpt2_block/graph.json";
    }
    char why[512] = "", arch[16] = MCIR_DEFAULT_ARCH, device[128] = "emulator (host times include the kernels)";
    bench_gpu g;
    bool gpu = !dry && bench_gpu_open(&g, why, sizeof why);
    if (!dry && !gpu) {
        printf("bench_steps: skipped, no GPU: %s (--dry-run runs the steps on the emulated device)\n", why);
        free(paths);
        return 77;
    }
    if (gpu) {   /* the device's architecture, for the compile; the runtime opens its own context */
        snprintf(arch, sizeof arch, "%s", g.arch);
        snprintf(device, sizeof device, "%s", g.name);
        bench_gpu_close(&g);
    } else {
        if (!mcir_emu_available(why, sizeof why)) {
            printf("bench_steps: skipped, no emulated device: %s\n", why);
            free(paths);
            return 77;
        }
        reps = warmup = 1;   /* step 0 (capture), step 1 (replay) */
        mcir_emu_set_max_blocks(4);
    }
    bench_csv csv_file;
    FILE *csv = bench_csv_open(&csv_file, csv_path);
    if (!csv) {
        free(paths);
        return 2;
    }
    fprintf(csv, "graph,kernels,mode,steps,host_us_median,gpu_ms_median,capture_us,launch_calls,device,status\n");
    int failures = 0;
    for (int i = 0; i < n; i++) {
        mcir_options o = mcir_options_default();
        o.graph_path = paths[i];
        o.arch = arch;
        o.want_plan = true;
        if (gpu) o.want_ptx = true;
        else o.want_cuda = true;
        mcir_diag d = mcir_diag_stderr();
        mcir_compilation c;
        bool ok = mcir_compile(&o, &c, &d) == MCIR_EXIT_OK && c.codegen;
        char ex[256];
        snprintf(ex, sizeof ex, "%s", paths[i]);
        char *sl = strrchr(ex, '/');
        if (sl && strcmp(sl, "/graph.json") == 0) *sl = 0, sl = strrchr(ex, '/');
        for (int graphs = 0; graphs < 2; graphs++) {
            steps_timing t = {0};
            snprintf(t.status, sizeof t.status, "pipeline failed");
            bool ran = ok && time_steps(&c, !gpu, graphs, warmup, reps, &t);
            if (!ran) failures++;
            fprintf(csv, "%s,%d,%s,%d,", sl ? sl + 1 : ex, c.plan ? c.plan->n_kernels : 0,
                    graphs ? "graph" : "launches", reps);
            if (ran) fprintf(csv, "%.1f,%.4f,%.1f,", t.host_us, t.gpu_ms, t.capture_us);
            else fprintf(csv, ",,,");
            if (t.launch_calls >= 0) fprintf(csv, "%ld,", t.launch_calls);
            else fprintf(csv, ",");
            fprintf(csv, "%s,%s\n", device, t.status);
            fflush(csv);
        }
        mcir_compilation_free(&c);
    }
    if (!bench_csv_close(&csv_file)) failures++;
    free(paths);
    return failures ? 1 : 0;
}
