/*
 * bench_norms.c — mcir's one-pass norm kernels (layernorm, rmsnorm,
 * softmax over the last axis) on rows of 1k…256k elements, f32/f16/bf16,
 * 2^25 elements per shape: each shape is a one-node graph taken through
 * the pipeline, its streaming_norm kernel timed on the GPU like
 * bench_attention (CUDA events, warm-up, median of --reps, L2 flushed,
 * inputs resident). GB/s counts bytes read + written (x, y and the
 * weights); next to it the device-to-device copy of x measured in the same
 * run (2·bytes(x) moved) and the fraction of it the kernel reaches.
 *
 * Without a GPU: exit 77 with one line; --dry-run plans and generates
 * every shape, compiles the first --compile N, prints "not run (no GPU)".
 *
 * usage: bench_norms [--dry-run] [--op layernorm|rmsnorm|softmax] [--match TEXT]
 *          [--compile N] [--reps N] [--warmup N] [--arch sm_XX] [--csv FILE]
 */
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"

static const char *const ops[] = {"layernorm", "rmsnorm", "softmax"};
static const mcir_dtype dtypes[] = {MCIR_DTYPE_F32, MCIR_DTYPE_F16, MCIR_DTYPE_BF16};
#define ELEMENTS ((int64_t)1 << 25)

static void graph_json(bench_text *t, const char *op, mcir_dtype dt, int64_t rows, int64_t width) {
    const char *d = mcir_dtype_name(dt);
    bench_text_printf(t, "{\"mcir\": 1, \"name\": \"norm\", \"inputs\": [{\"name\": \"x\", \"dtype\": \"%s\", "
                         "\"shape\": [%lld, %lld]}],\n \"weights\": [", d, (long long)rows, (long long)width);
    if (strcmp(op, "softmax") != 0)
        bench_text_printf(t, "{\"name\": \"gamma\", \"dtype\": \"%s\", \"shape\": [%lld]}", d, (long long)width);
    if (strcmp(op, "layernorm") == 0)
        bench_text_printf(t, ", {\"name\": \"beta\", \"dtype\": \"%s\", \"shape\": [%lld]}", d, (long long)width);
    const char *ins = strcmp(op, "layernorm") == 0 ? "\"x\", \"gamma\", \"beta\""
                    : strcmp(op, "rmsnorm") == 0  ? "\"x\", \"gamma\""
                                                  : "\"x\"";
    const char *attrs = strcmp(op, "softmax") == 0 ? "{\"axis\": -1}" : "{\"eps\": 1e-05}";
    bench_text_printf(t, "],\n \"nodes\": [{\"name\": \"n\", \"op\": \"%s\", \"inputs\": [%s], \"outputs\": "
                         "[\"y\"], \"attrs\": %s}],\n \"outputs\": [\"y\"]}\n", op, ins, attrs);
}

int main(int argc, char **argv) {
    bool dry = false;
    const char *only_op = NULL, *match = NULL, *arch = NULL, *csv_path = NULL;
    int compile_n = -1, reps = 30, warmup = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool more = i + 1 < argc;
        if (strcmp(a, "--dry-run") == 0) dry = true;
        else if (strcmp(a, "--op") == 0 && more) only_op = argv[++i];
        else if (strcmp(a, "--match") == 0 && more) match = argv[++i];
        else if (strcmp(a, "--compile") == 0 && more) compile_n = atoi(argv[++i]);
        else if (strcmp(a, "--reps") == 0 && more) reps = atoi(argv[++i]);
        else if (strcmp(a, "--warmup") == 0 && more) warmup = atoi(argv[++i]);
        else if (strcmp(a, "--arch") == 0 && more) arch = argv[++i];
        else if (strcmp(a, "--csv") == 0 && more) csv_path = argv[++i];
        else {
            fprintf(stderr, "usage: bench_norms [--dry-run] [--op layernorm|rmsnorm|softmax] [--match TEXT]\n"
                            "         [--compile N] [--reps N] [--warmup N] [--arch sm_XX] [--csv FILE]\n");
            return strcmp(a, "--help") == 0 ? 0 : 2;
        }
    }
    bench_gpu g;
    bool gpu;
    int st = bench_gpu_start("bench_norms", dry, reps, &g, &gpu, &arch);
    if (st >= 0) return st;
    bench_csv csv_file;
    FILE *csv = bench_csv_open(&csv_file, csv_path);
    if (!csv || !mcir_target_find(arch)) {   /* a CSV that cannot be written: said on stderr */
        if (csv) {
            fprintf(stderr, "bench_norms: unknown --arch\n");
            mcir_outfile_discard(&csv_file.out);
        }
        if (gpu) bench_gpu_close(&g);
        return 2;
    }
    fprintf(csv, "op,impl,dtype,rows,width,median_ms,min_ms,gbps,copy_gbps,fraction_of_copy,device,status\n");
    mcir_diag d = mcir_diag_stderr();
    double copy_gbps[3] = {0};   /* by dtype: copying x once, in this run */
    int failures = 0, compiled = 0, selected = 0;
    for (int o = 0; o < 3; o++)
        for (int ti = 0; ti < 3; ti++)
            for (int64_t w = 1024; w <= 262144; w *= 2) {
                const char *op = ops[o];
                mcir_dtype dt = dtypes[ti];
                int64_t rows = ELEMENTS / w;
                char nm[96];
                snprintf(nm, sizeof nm, "%s/%s/r%lld/w%lld", op, mcir_dtype_name(dt), (long long)rows, (long long)w);
                if ((only_op && strcmp(only_op, op) != 0) || (match && !strstr(nm, match))) continue;
                selected++;
                int64_t es = mcir_dtype_size(dt);
                int64_t wbytes = (strcmp(op, "layernorm") == 0 ? 2 : strcmp(op, "rmsnorm") == 0) * w * es;
                double traffic = 2.0 * (double)(ELEMENTS * es) + (double)wbytes;
                bool compile = gpu || compile_n < 0 || compiled < compile_n;
                bench_text json = {0};
                graph_json(&json, op, dt, rows, w);
                bench_graph b;
                bool ok = bench_graph_build(&b, json.s, nm, arch, compile, &d);
                bench_text_free(&json);
                compiled += compile && ok;
                int k = ok ? bench_graph_kernel(&b, MCIR_TEMPLATE_STREAMING_NORM) : -1;
                char status[600];
                bench_gpu_timing t = {0};
                if (!ok) snprintf(status, sizeof status, "pipeline failed");
                else if (k < 0) snprintf(status, sizeof status, "no streaming_norm kernel in the plan");
                else if (!gpu) snprintf(status, sizeof status, "not run (no GPU)");
                else {
                    if (copy_gbps[ti] == 0) {
                        bench_gpu_timing c;
                        if (bench_gpu_time_copy(&g, (size_t)(ELEMENTS * es), warmup, reps, &c))
                            copy_gbps[ti] = 2.0 * (double)(ELEMENTS * es) / (c.median_ms * 1e-3) / 1e9;
                    }
                    if (!bench_time_kernel(&g, &b, k, warmup, reps, &t, status, sizeof status)) ok = false;
                }
                if (!ok || k < 0) failures++;
                bench_csv_cell(status);
                char med[32] = "", mn[32] = "", bw[32] = "", cp[32] = "", fr[32] = "";
                if (t.reps) {
                    double gbps = traffic / (t.median_ms * 1e-3) / 1e9;
                    snprintf(med, sizeof med, "%.4f", t.median_ms);
                    snprintf(mn, sizeof mn, "%.4f", t.min_ms);
                    snprintf(bw, sizeof bw, "%.1f", gbps);
                    if (copy_gbps[ti] > 0) {
                        snprintf(cp, sizeof cp, "%.1f", copy_gbps[ti]);
                        snprintf(fr, sizeof fr, "%.3f", gbps / copy_gbps[ti]);
                    }
                    if (!csv_file.to_stdout) printf("%-36s %8.3f ms %8.1f GB/s (copy %s)\n", nm, t.median_ms, gbps, cp);
                }
                fprintf(csv, "%s,mcir,%s,%lld,%lld,%s,%s,%s,%s,%s,%s,%s\n", op, mcir_dtype_name(dt),
                        (long long)rows, (long long)w, med, mn, bw, cp, fr, gpu ? g.name : "", status);
                fflush(csv);
                bench_graph_free(&b);
            }
    if (!bench_csv_close(&csv_file)) failures++;
    if (gpu) bench_gpu_close(&g);
    if (selected == 0) {
        fprintf(stderr, "bench_norms: nothing selected\n");
        return 2;
    }
    return failures ? 1 : 0;
}
