/*
 * bench_norms.c — mcir's memory-bound kernels against the copy rate, in two
 * suites (--suite norms|elementwise|all, default all):
 *
 *  - norms: the one-pass norm kernels (layernorm, rmsnorm, softmax over
 *    the last axis) on rows of 1k…256k elements, f32/f16/bf16, 2^25
 *    elements per shape, each timed as its streaming_norm kernel;
 *  - elementwise: the chains a transformer's MLP and residual stream leave
 *    between GEMMs, each a two-node graph: swiglu = silu(g) * u, g and u
 *    [T, 11008] (Llama-7B's MLP); bias_gelu = gelu_tanh(x + b), x [T, 3072],
 *    b [3072] (GPT-2's MLP); add_cast = cast(x + r), x and r f32 [T, 4096]
 *    (Llama-7B's hidden size), to f16 or bf16 (dtype cell "f32-f16" /
 *    "f32-bf16"); swiglu and bias_gelu in f16 and bf16; T = 512 and 4096
 *    tokens. mcir fuses each chain into one elementwise kernel (add_cast
 *    through the catalog's pointwise_cast), timed as a norm's is; a plan
 *    of more kernels would be timed whole, every launch through the
 *    runtime (bench_time_graph: the same events, warm-up, median and L2
 *    flush).
 *
 * Each shape is a small graph taken through the pipeline, its kernel timed
 * on the GPU like bench_attention (CUDA events, warm-up, median of --reps,
 * L2 flushed, inputs resident). GB/s counts bytes read + written (every
 * input, weights included, and the output); next to it a device-to-device
 * copy measured in the same run and the fraction of its rate the kernel
 * reaches: for a norm the copy of x (2·bytes(x) moved, once per dtype), for
 * an elementwise chain a copy moving the chain's own bytes (half read, half
 * written: at T = 512 part of the traffic fits in L2 for both alike).
 * Rows name their path in the impl cell: "mcir" for a norm (its
 * streaming_norm kernel), "mcir_" and the templates of the plan's kernels
 * joined by '+' for an elementwise chain ("mcir_elementwise": one fused
 * kernel; "mcir_elementwise+elementwise": two launches). The shape's name,
 * for --match (comma-separated texts, any of them), is
 * OP/DTYPE/rROWS/wWIDTH.
 *
 * Without a GPU: exit 77 with one line; --dry-run plans and generates
 * every shape, compiles the first --compile N, prints "not run (no GPU)".
 *
 * usage: bench_norms [--dry-run] [--suite norms|elementwise|all] [--op OP] [--match TEXT[,TEXT...]]
 *          [--compile N] [--reps N] [--warmup N] [--arch sm_XX] [--csv FILE]
 *   OP: layernorm|rmsnorm|softmax|swiglu|bias_gelu|add_cast
 */
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"

#define ELEMENTS ((int64_t)1 << 25)

typedef struct shape {
    const char *op;
    bool ew;           /* the elementwise suite */
    mcir_dtype dt;     /* the tensors' dtype; add_cast: its output's */
    mcir_dtype in;     /* the inputs' dtype: dt, f32 for add_cast */
    int64_t rows, width;
} shape;

/* The sweep, in CSV order: the norms (81 shapes), then the elementwise
 * suite (12). Returns the count; s holds at least 96. */
static int shapes(shape *s) {
    static const char *const norm_ops[] = {"layernorm", "rmsnorm", "softmax"};
    static const mcir_dtype dtypes[] = {MCIR_DTYPE_F32, MCIR_DTYPE_F16, MCIR_DTYPE_BF16};
    static const int64_t tokens[] = {512, 4096};
    int n = 0;
    for (int o = 0; o < 3; o++)
        for (int ti = 0; ti < 3; ti++)
            for (int64_t w = 1024; w <= 262144; w *= 2)
                s[n++] = (shape){norm_ops[o], false, dtypes[ti], dtypes[ti], ELEMENTS / w, w};
    static const struct { const char *op; int64_t width; } ew[] = {
        {"swiglu", 11008}, {"bias_gelu", 3072}, {"add_cast", 4096}};
    static const mcir_dtype half[] = {MCIR_DTYPE_F16, MCIR_DTYPE_BF16};
    for (int o = 0; o < 3; o++)
        for (int di = 0; di < 2; di++)
            for (int t = 0; t < 2; t++) {
                bool cast = strcmp(ew[o].op, "add_cast") == 0;
                s[n++] = (shape){ew[o].op, true, half[di], cast ? MCIR_DTYPE_F32 : half[di], tokens[t], ew[o].width};
            }
    return n;
}

/* The dtype cell: "f16", or "f32-bf16" for a cast from f32 to bf16. */
static void dtype_cell(const shape *s, char *buf, size_t n) {
    if (s->in == s->dt) snprintf(buf, n, "%s", mcir_dtype_name(s->dt));
    else snprintf(buf, n, "%s-%s", mcir_dtype_name(s->in), mcir_dtype_name(s->dt));
}

/* Bytes read + written: every input (weights included) and the output. */
static double traffic(const shape *s) {
    double n = (double)(s->rows * s->width), w = (double)s->width;
    double in = (double)mcir_dtype_size(s->in), out = (double)mcir_dtype_size(s->dt);
    if (strcmp(s->op, "layernorm") == 0) return 2 * n * in + 2 * w * in;
    if (strcmp(s->op, "rmsnorm") == 0) return 2 * n * in + w * in;
    if (strcmp(s->op, "softmax") == 0) return 2 * n * in;
    if (strcmp(s->op, "bias_gelu") == 0) return n * in + w * in + n * out;
    return 2 * n * in + n * out;   /* swiglu, add_cast: two inputs of the output's shape */
}

static void norm_json(bench_text *t, const char *op, mcir_dtype dt, int64_t rows, int64_t width) {
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

/* The elementwise chains: two nodes each, one graph output y. */
static void elementwise_json(bench_text *t, const shape *s) {
    const char *in = mcir_dtype_name(s->in), *out = mcir_dtype_name(s->dt);
    long long r = (long long)s->rows, w = (long long)s->width;
    const char *a = strcmp(s->op, "swiglu") == 0 ? "g" : "x";
    bench_text_printf(t, "{\"mcir\": 1, \"name\": \"%s\", \"inputs\": [{\"name\": \"%s\", \"dtype\": \"%s\", "
                         "\"shape\": [%lld, %lld]}", s->op, a, in, r, w);
    if (strcmp(s->op, "bias_gelu") == 0)
        bench_text_printf(t, "],\n \"weights\": [{\"name\": \"b\", \"dtype\": \"%s\", \"shape\": [%lld]}],\n"
                             " \"nodes\": [{\"name\": \"bias\", \"op\": \"add\", \"inputs\": [\"x\", \"b\"], "
                             "\"outputs\": [\"h\"]},\n  {\"name\": \"gelu\", \"op\": \"gelu\", \"inputs\": [\"h\"], "
                             "\"outputs\": [\"y\"], \"attrs\": {\"approximate\": \"tanh\"}}],\n", in, w);
    else if (strcmp(s->op, "swiglu") == 0)
        bench_text_printf(t, ", {\"name\": \"u\", \"dtype\": \"%s\", \"shape\": [%lld, %lld]}],\n"
                             " \"nodes\": [{\"name\": \"silu\", \"op\": \"silu\", \"inputs\": [\"g\"], "
                             "\"outputs\": [\"h\"]},\n  {\"name\": \"mul\", \"op\": \"mul\", "
                             "\"inputs\": [\"h\", \"u\"], "
                             "\"outputs\": [\"y\"]}],\n", in, r, w);
    else   /* add_cast */
        bench_text_printf(t, ", {\"name\": \"r\", \"dtype\": \"%s\", \"shape\": [%lld, %lld]}],\n"
                             " \"nodes\": [{\"name\": \"residual\", \"op\": \"add\", \"inputs\": [\"x\", \"r\"], "
                             "\"outputs\": [\"h\"]},\n  {\"name\": \"cast\", \"op\": \"cast\", \"inputs\": [\"h\"], "
                             "\"outputs\": [\"y\"], \"attrs\": {\"to\": \"%s\"}}],\n", in, r, w, out);
    bench_text_printf(t, " \"outputs\": [\"y\"]}\n");
}

/* The impl cell of an elementwise row, naming mcir's path: "mcir_" and
 * the templates of the plan's kernels, in launch order, joined by '+'
 * ("mcir_elementwise": the one fused kernel the suite expects). */
static void elementwise_path(const bench_graph *b, char *buf, size_t n) {
    int len = snprintf(buf, n, "mcir_");
    for (int i = 0; b->plan && i < b->plan->n_kernels && len > 0 && (size_t)len < n; i++)
        len += snprintf(buf + len, n - (size_t)len, "%s%s", i ? "+" : "", mcir_template_name(b->plan->kernels[i].tpl));
}

/* An elementwise shape's copy: the rate of a copy moving `bytes`. */
typedef struct ew_copy_rate {
    double bytes, gbps;
} ew_copy_rate;

int main(int argc, char **argv) {
    static const char usage[] =
        "usage: bench_norms [--dry-run] [--suite norms|elementwise|all] [--op OP] [--match TEXT[,TEXT...]]\n"
        "         [--compile N] [--reps N] [--warmup N] [--arch sm_XX] [--csv FILE]\n"
        "  OP: layernorm|rmsnorm|softmax (norms), swiglu|bias_gelu|add_cast (elementwise)\n";
    bool dry = false;
    const char *suite = "all", *only_op = NULL, *match = NULL, *arch = NULL, *csv_path = NULL;
    int compile_n = -1, reps = 30, warmup = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool more = i + 1 < argc;
        if (strcmp(a, "--dry-run") == 0) dry = true;
        else if (strcmp(a, "--suite") == 0 && more) suite = argv[++i];
        else if (strcmp(a, "--op") == 0 && more) only_op = argv[++i];
        else if (strcmp(a, "--match") == 0 && more) match = argv[++i];
        else if (strcmp(a, "--compile") == 0 && more) compile_n = atoi(argv[++i]);
        else if (strcmp(a, "--reps") == 0 && more) reps = atoi(argv[++i]);
        else if (strcmp(a, "--warmup") == 0 && more) warmup = atoi(argv[++i]);
        else if (strcmp(a, "--arch") == 0 && more) arch = argv[++i];
        else if (strcmp(a, "--csv") == 0 && more) csv_path = argv[++i];
        else {
            fputs(usage, strcmp(a, "--help") == 0 ? stdout : stderr);
            return strcmp(a, "--help") == 0 ? 0 : 2;
        }
    }
    if (strcmp(suite, "norms") != 0 && strcmp(suite, "elementwise") != 0 && strcmp(suite, "all") != 0) {
        fprintf(stderr, "bench_norms: unknown --suite %s\n%s", suite, usage);
        return 2;
    }
    shape all[96];
    int n_shapes = shapes(all);
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
    double copy_gbps[MCIR_DTYPE_COUNT] = {0};   /* norms, by dtype: copying 2^25 elements once, in this run */
    ew_copy_rate ew_copy[8];                    /* elementwise, by bytes moved */
    int n_ew_copy = 0;
    int failures = 0, compiled = 0, selected = 0;
    for (int si = 0; si < n_shapes; si++) {
        const shape *s = &all[si];
        if (strcmp(suite, "all") != 0 && strcmp(suite, s->ew ? "elementwise" : "norms") != 0) continue;
        char dtc[24], nm[96];
        dtype_cell(s, dtc, sizeof dtc);
        snprintf(nm, sizeof nm, "%s/%s/r%lld/w%lld", s->op, dtc, (long long)s->rows, (long long)s->width);
        if ((only_op && strcmp(only_op, s->op) != 0) || !bench_match(nm, match)) continue;
        selected++;
        double bytes = traffic(s);
        bool compile = gpu || compile_n < 0 || compiled < compile_n;
        bench_text json = {0};
        if (s->ew) elementwise_json(&json, s);
        else norm_json(&json, s->op, s->dt, s->rows, s->width);
        bench_graph b;
        bool ok = bench_graph_build(&b, json.s, nm, arch, compile, &d);
        bench_text_free(&json);
        compiled += compile && ok;
        /* a norm: its streaming_norm kernel; an elementwise chain: its one
         * kernel, or every kernel of its plan (the runtime's launches,
         * timed alike) where the rewriter left it more than one */
        char status[600], impl[96] = "mcir";
        int k = -1;
        bool whole = false;   /* time every launch of the plan */
        if (ok && !s->ew) k = bench_graph_kernel(&b, MCIR_TEMPLATE_STREAMING_NORM);
        if (ok && s->ew) {
            elementwise_path(&b, impl, sizeof impl);
            k = b.plan->n_kernels > 0 ? 0 : -1;
            whole = b.plan->n_kernels > 1;
        }
        bench_gpu_timing t = {0};
        double cp_gbps = 0;
        if (!ok) snprintf(status, sizeof status, "pipeline failed");
        else if (k < 0)
            snprintf(status, sizeof status, s->ew ? "no kernel in the plan" : "no streaming_norm kernel in the plan");
        else if (!gpu) snprintf(status, sizeof status, "not run (no GPU)");
        else {
            bench_gpu_timing c;
            if (!s->ew) {
                size_t xb = (size_t)ELEMENTS * mcir_dtype_size(s->dt);
                if (copy_gbps[s->dt] == 0 && bench_gpu_time_copy(&g, xb, warmup, reps, &c))
                    copy_gbps[s->dt] = 2.0 * (double)xb / (c.median_ms * 1e-3) / 1e9;
                cp_gbps = copy_gbps[s->dt];
            } else {
                for (int j = 0; j < n_ew_copy; j++)
                    if (ew_copy[j].bytes == bytes) cp_gbps = ew_copy[j].gbps;
                size_t half = ((size_t)(bytes / 2) + 15) / 16 * 16;   /* read half, write half */
                if (cp_gbps == 0 && bench_gpu_time_copy(&g, half, warmup, reps, &c)) {
                    cp_gbps = 2.0 * (double)half / (c.median_ms * 1e-3) / 1e9;
                    if (n_ew_copy < 8) ew_copy[n_ew_copy++] = (ew_copy_rate){bytes, cp_gbps};
                }
            }
            bool timed = whole ? bench_time_graph(&g, &b, warmup, reps, &t, status, sizeof status)
                               : bench_time_kernel(&g, &b, k, warmup, reps, &t, status, sizeof status);
            if (!timed) ok = false;
        }
        if (!ok || k < 0) failures++;
        bench_csv_cell(status);
        char med[32] = "", mn[32] = "", bw[32] = "", cp[32] = "", fr[32] = "";
        if (t.reps) {
            double gbps = bytes / (t.median_ms * 1e-3) / 1e9;
            snprintf(med, sizeof med, "%.4f", t.median_ms);
            snprintf(mn, sizeof mn, "%.4f", t.min_ms);
            snprintf(bw, sizeof bw, "%.1f", gbps);
            if (cp_gbps > 0) {
                snprintf(cp, sizeof cp, "%.1f", cp_gbps);
                snprintf(fr, sizeof fr, "%.3f", gbps / cp_gbps);
            }
            if (!csv_file.to_stdout) printf("%-36s %8.3f ms %8.1f GB/s (copy %s)\n", nm, t.median_ms, gbps, cp);
        }
        fprintf(csv, "%s,%s,%s,%lld,%lld,%s,%s,%s,%s,%s,%s,%s\n", s->op, impl, dtc,
                (long long)s->rows, (long long)s->width, med, mn, bw, cp, fr, gpu ? g.name : "", status);
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
