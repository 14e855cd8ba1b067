/*
 * bench_scale.c — compile time and memory against graph size
 * (docs/performance.md, "Compile-time scaling").
 *
 * Three families, each case in a child process so that its peak RSS
 * (getrusage) is its own:
 *   - gpt2: examples/gpt2_block replicated L times (tensors renamed hN.*,
 *     the shared constants c.* once, layer N reads layer N-1's output),
 *     written as graph.json to a temporary directory;
 *   - chain: N elementwise nodes (relu, sigmoid, tanh, neg, ...) on 64x64;
 *   - memplan: N buffers all live at once, and N random short lifetimes.
 * Graph cases run what `mcirc GRAPH.json` runs by default: read + verify,
 * the built-in catalog, rewriting to a fixpoint, kernel partition, memory
 * planning (planner `best`) and CUDA source generation — no NVRTC (mcirc
 * compiles only for --emit ptx, -o or a GPU run), so no kernel cache is
 * involved. Stage times are CPU seconds of the process (one thread), the
 * last but one column its wall seconds; run it under `taskset -c 0` for
 * one core.
 *
 * usage: bench_scale [gpt2|chain|memplan|all] [--quick] [--timeout SECONDS]
 * (a case past the timeout, default 300 CPU seconds, is reported as such).
 */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mcirc/pipeline.h"

#ifndef MCIR_BENCH_EXAMPLES_DIR
#define MCIR_BENCH_EXAMPLES_DIR "examples"
#endif

/* CPU seconds of this (single-threaded) process: on a shared machine the
 * wall clock measures the neighbours. */
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double peak_rss_mib(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_maxrss / 1024.0;
}

static char tmpdir[256];
static unsigned timeout_s = 300;

/* ------------------------------------------------------------ graphs */

static const char *renamed(const char *s, int layer, int layers, char *buf, size_t n) {
    if (strcmp(s, "x") == 0) {
        if (layer == 0) return "x";
        snprintf(buf, n, "h%d.out", layer - 1);
        return buf;
    }
    if (strcmp(s, "y") == 0) {
        if (layer == layers - 1) return "y";
        snprintf(buf, n, "h%d.out", layer);
        return buf;
    }
    if (strncmp(s, "h0.", 3) == 0) {
        snprintf(buf, n, "h%d.%s", layer, s + 3);
        return buf;
    }
    return s;
}

static json_t *renamed_list(const json_t *names, int layer, int layers) {
    json_t *out = json_array();
    char buf[256];
    for (size_t i = 0; i < json_array_size(names); i++)
        json_array_append_new(out, json_string(renamed(json_string_value(json_array_get(names, i)),
                                                       layer, layers, buf, sizeof buf)));
    return out;
}

/* examples/gpt2_block stacked `layers` times; returns the file written. */
static const char *write_gpt2_stack(int layers) {
    static char path[512];
    json_error_t err;
    json_t *block = json_load_file(MCIR_BENCH_EXAMPLES_DIR "/gpt2_block/graph.json", 0, &err);
    if (!block) {
        fprintf(stderr, "bench_scale: %s: %s\n", MCIR_BENCH_EXAMPLES_DIR "/gpt2_block/graph.json",
                err.text);
        exit(1);
    }
    json_t *weights = json_array(), *nodes = json_array();
    const json_t *bw = json_object_get(block, "weights");
    for (size_t i = 0; i < json_array_size(bw); i++) {
        json_t *w = json_array_get(bw, i);
        if (strncmp(json_string_value(json_object_get(w, "name")), "c.", 2) == 0)
            json_array_append(weights, w);
    }
    char buf[256];
    for (int l = 0; l < layers; l++) {
        for (size_t i = 0; i < json_array_size(bw); i++) {
            json_t *w = json_array_get(bw, i);
            const char *name = json_string_value(json_object_get(w, "name"));
            if (strncmp(name, "c.", 2) == 0) continue;
            json_t *c = json_deep_copy(w);
            json_object_set_new(c, "name", json_string(renamed(name, l, layers, buf, sizeof buf)));
            json_array_append_new(weights, c);
        }
        const json_t *bn = json_object_get(block, "nodes");
        for (size_t i = 0; i < json_array_size(bn); i++) {
            json_t *c = json_deep_copy(json_array_get(bn, i));
            const char *name = json_string_value(json_object_get(c, "name"));
            json_object_set_new(c, "name", json_string(renamed(name, l, layers, buf, sizeof buf)));
            json_object_set_new(c, "inputs", renamed_list(json_object_get(c, "inputs"), l, layers));
            json_object_set_new(c, "outputs",
                                renamed_list(json_object_get(c, "outputs"), l, layers));
            json_array_append_new(nodes, c);
        }
    }
    json_object_set_new(block, "weights", weights);
    json_object_set_new(block, "nodes", nodes);
    snprintf(buf, sizeof buf, "gpt2_x%d", layers);
    json_object_set_new(block, "name", json_string(buf));
    snprintf(path, sizeof path, "%s/gpt2_x%d.json", tmpdir, layers);
    if (json_dump_file(block, path, JSON_COMPACT)) {
        fprintf(stderr, "bench_scale: cannot write %s\n", path);
        exit(1);
    }
    json_decref(block);
    return path;
}

static const char *write_chain(int n) {
    static char path[512];
    static const char *const ops[] = {"relu", "sigmoid", "tanh", "neg", "exp", "neg"};
    snprintf(path, sizeof path, "%s/chain%d.json", tmpdir, n);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench_scale: cannot write %s\n", path);
        exit(1);
    }
    fprintf(f, "{\"mcir\": 1, \"name\": \"chain%d\", \"inputs\": [{\"name\": \"x\", \"dtype\": "
               "\"f32\", \"shape\": [64, 64]}],\n \"nodes\": [\n", n);
    for (int i = 0; i < n; i++) {
        char in[32], out[32];
        snprintf(in, sizeof in, i ? "t%d" : "x", i - 1);
        snprintf(out, sizeof out, i == n - 1 ? "y" : "t%d", i);
        fprintf(f, "  {\"name\": \"n%d\", \"op\": \"%s\", \"inputs\": [\"%s\"], \"outputs\": "
                   "[\"%s\"]}%s\n", i, ops[i % 6], in, out, i == n - 1 ? "" : ",");
    }
    fprintf(f, " ],\n \"outputs\": [\"y\"]}\n");
    fclose(f);
    return path;
}

/* mcirc's default path, stage by stage. */
static void compile_graph(const char *kind, int size, const char *path) {
    mcir_diag d = mcir_diag_stderr();
    const mcir_target *target = mcir_target_find(MCIR_DEFAULT_ARCH);
    double w0 = wall(), t0 = now();
    mcir_graph *g = mcir_graph_read_json(path, &d);
    if (!g) exit(1);
    int before = mcir_graph_live_nodes(g);
    double t1 = now();
    mcir_catalog *c = mcir_catalog_new();
    if (!mcir_catalog_load_default(c, &d)) exit(1);
    mcir_trace *trace = mcir_trace_new();
    if (!mcir_rewrite_run(g, c, target, trace, &d)) exit(1);
    double t2 = now();
    mcir_plan *plan = mcir_plan_build(g, target, trace, &d);
    if (!plan) exit(1);
    double t3 = now();
    mcir_memplan_build_options mo = {0};
    mcir_memplan *mem = mcir_memplan_build(plan, &mo, trace, &d);
    if (!mem) exit(1);
    double t4 = now();
    mcir_codegen *cg = mcir_codegen_new(plan, mem, &d);
    if (!cg) exit(1);
    double t5 = now(), w5 = wall();
    printf("%-7s %7d %7d %7d %8.3f %8.3f %8.3f %8.3f %8.3f %9.3f %8.3f %8.1f\n", kind, size,
           before, mcir_graph_live_nodes(g), t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0,
           w5 - w0, peak_rss_mib());
    mcir_codegen_free(cg);
    mcir_memplan_free(mem);
    mcir_plan_free(plan);
    mcir_trace_free(trace);
    mcir_catalog_free(c);
    mcir_graph_free(g);
}

/* ----------------------------------------------------------- planner */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void plan_buffers(const char *kind, int n, const char *planner) {
    mcir_memplan_buffer *b = calloc((size_t)n, sizeof *b);
    if (!b) exit(1);
    bool all_live = strcmp(kind, "alllive") == 0;
    for (int i = 0; i < n; i++) {
        b[i].share_with = -1;
        if (all_live) {
            b[i].size = 256 * (1 + i % 7);
            b[i].first = 0;
            b[i].last = 9;
        } else {
            b[i].size = 256 * (int64_t)(1 + next_random() % 64);
            b[i].first = (int64_t)(next_random() % (uint64_t)(2 * n));
            b[i].last = b[i].first + (int64_t)(next_random() % 50);
        }
    }
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = (size_t)n, .alignment = 256};
    mcir_memplan_options opt = {.planner = planner, .time_limit_s = 10};
    mcir_memplan_result r;
    double t0 = now();
    mcir_memplan_status st = mcir_memplan_run(&pb, &opt, &r);
    double t1 = now();
    if (st != MCIR_MEMPLAN_OK) {
        fprintf(stderr, "bench_scale: %s %d: %s\n", kind, n, r.message);
        exit(1);
    }
    printf("%-8s %7d %-12s %14lld %14lld %9.3f %8.1f\n", kind, n, planner,
           (long long)r.arena_bytes, (long long)mcir_memplan_lower_bound(&pb), t1 - t0,
           peak_rss_mib());
    mcir_memplan_result_free(&r);
    free(b);
}

/* ------------------------------------------------------------ driver */

typedef enum { CASE_GPT2, CASE_CHAIN, CASE_ALLLIVE, CASE_RANDOM } case_kind;

static void run_case(case_kind k, int size) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        struct rlimit cpu = {timeout_s, timeout_s + 1};
        setrlimit(RLIMIT_CPU, &cpu);
        /* codegen emits a fused kernel's value expression recursively, one
         * frame per op: a 50 000-op chain needs more than the usual 8 MiB */
        struct rlimit stack = {64ull << 20, 64ull << 20};
        setrlimit(RLIMIT_STACK, &stack);
        switch (k) {
        case CASE_GPT2: compile_graph("gpt2", size, write_gpt2_stack(size)); break;
        case CASE_CHAIN: compile_graph("chain", size, write_chain(size)); break;
        case CASE_ALLLIVE: plan_buffers("alllive", size, "greedy-size"); break;
        case CASE_RANDOM: plan_buffers("random", size, "best"); break;
        }
        fflush(stdout);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    static const char *const names[] = {"gpt2", "chain", "alllive", "random"};
    if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGXCPU || WTERMSIG(status) == SIGKILL))
        printf("%-7s %7d  timeout: more than %u CPU s\n", names[k], size, timeout_s);
    else if (WIFSIGNALED(status))
        printf("%-7s %7d  failed: signal %d\n", names[k], size, WTERMSIG(status));
    else if (!WIFEXITED(status) || WEXITSTATUS(status))
        printf("%-7s %7d  failed\n", names[k], size);
}

int main(int argc, char **argv) {
    const char *which = "all";
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = true;
        else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
            timeout_s = (unsigned)atoi(argv[++i]);
        else if (argv[i][0] != '-') which = argv[i];
        else {
            fprintf(stderr,
                    "usage: bench_scale [gpt2|chain|memplan|all] [--quick] [--timeout S]\n");
            return 2;
        }
    }
    snprintf(tmpdir, sizeof tmpdir, "%s/mcir-bench-scale-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    bool all = strcmp(which, "all") == 0;
    if (all || strcmp(which, "gpt2") == 0 || strcmp(which, "chain") == 0)
        printf("graph      size   nodes   after     read  rewrite     plan   memory  codegen "
               "    total     wall  rss_MiB\n");
    if (all || strcmp(which, "gpt2") == 0) {
        static const int layers[] = {12, 24, 48, 96, 192};
        for (size_t i = 0; i < sizeof layers / sizeof *layers; i++)
            if (!quick || layers[i] <= 24) run_case(CASE_GPT2, layers[i]);
    }
    if (all || strcmp(which, "chain") == 0) {
        static const int lens[] = {500, 1000, 5000, 10000, 20000, 50000};
        for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
            if (!quick || lens[i] <= 1000) run_case(CASE_CHAIN, lens[i]);
    }
    if (all || strcmp(which, "memplan") == 0) {
        printf("buffers        n planner               arena    lower_bound   seconds  rss_MiB\n");
        static const int live[] = {1000, 2500, 5000, 10000, 20000};
        for (size_t i = 0; i < sizeof live / sizeof *live; i++)
            if (!quick || live[i] <= 2500) run_case(CASE_ALLLIVE, live[i]);
        static const int rnd[] = {1000, 10000, 100000};
        for (size_t i = 0; i < sizeof rnd / sizeof *rnd; i++)
            if (!quick || rnd[i] <= 10000) run_case(CASE_RANDOM, rnd[i]);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "bench_scale: could not remove %s\n", tmpdir);
    return 0;
}
