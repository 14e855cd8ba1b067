/*
 * bench_attention.c — mcir's streaming-attention kernels, one per shape,
 * timed on the GPU: for each shape a graph with one `attention` node is
 * written in memory and taken through the pipeline (rewrite, plan,
 * memory plan, generate, NVRTC — timed apart and reported as compile
 * time), then the generated kernel is launched from its cubin on inputs
 * resident on the device: warm-up launches, then the median of --reps
 * launches (≥ 20), each timed with CUDA events after an L2 flush.
 *
 * Shapes: the FlashAttention-3 paper's sweep (f16 and bf16, head dim
 * 64/128/256, seq 512…16k with batch·seq = 16k tokens, hidden 2048 so
 * heads = 2048/d, causal and not), decode (Nq = 1, Nk 1k…128k, batch
 * 1…64, batch·Nk ≤ 256k so K and V stay within mcir's 2^29 elements per
 * tensor; multi-head and Llama-3-style GQA, 32 query heads on 8 K/V
 * heads), grouped-query prefill (GQA 4:1 and 8:1, MQA; K/V heads
 * broadcast in graph.json: Q [B, Hkv, G, N, d], K/V [B, Hkv, 1, N, d]),
 * an additive mask (a padding mask [B, 1, 1, Nk] and a full one
 * [B, 1, Nq, Nk]) and cross-attention (Nq ≠ Nk). TFLOP/s counts
 * 4·B·H·Nq·Nk·d, halved when causal (FA3's convention); GB/s counts the
 * compulsory bytes (Q, K, V, O, the mask) over the median time — what
 * decode is bound by.
 *
 * Without a GPU it exits 77 with one line saying why; --dry-run instead
 * runs the pipeline for every selected shape, NVRTC for the first
 * --compile N of them, and prints the CSV with "not run (no GPU)".
 *
 * usage: bench_attention [--dry-run] [--suite fa3|decode|gqa|mask|cross|all]
 *          [--match TEXT[,TEXT...]] [--compile N] [--reps N] [--warmup N]
 *          [--arch sm_XX] [--csv FILE]
 * --match keeps the shapes whose name contains any of the texts.
 */
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "bench/gpu_timer.h"
#include "kernelplan/launch.h"

typedef enum { MASK_NONE, MASK_PAD, MASK_ROWS } mask_kind;

typedef struct shape {
    const char *suite;
    mcir_dtype dtype;
    int64_t batch, heads, nq, nk, d;
    bool causal;
    int64_t kv_heads;   /* 0: heads (multi-head) */
    mask_kind mask;
} shape;

static int64_t kv_heads(const shape *x) { return x->kv_heads ? x->kv_heads : x->heads; }

typedef struct shapes {
    mcir_arena *arena;
    shape *v;
    int n, cap;
} shapes;

static void add(shapes *s, shape x) {
    s->v = mcir_arena_grow(s->arena, s->v, &s->cap, s->n + 1, sizeof *s->v);
    s->v[s->n++] = x;
}

static void sweep(shapes *s, const char *suite) {
    bool all = strcmp(suite, "all") == 0;
    const mcir_dtype dts[] = {MCIR_DTYPE_F16, MCIR_DTYPE_BF16};
    if (all || strcmp(suite, "fa3") == 0) {
        const int64_t ds[] = {64, 128, 256};
        for (int c = 0; c < 2; c++)
            for (int t = 0; t < 2; t++)
                for (int i = 0; i < 3; i++)
                    for (int64_t seq = 512; seq <= 16384; seq *= 2)
                        add(s, (shape){"fa3", dts[t], 16384 / seq, 2048 / ds[i], seq, seq, ds[i], c == 1, 0,
                                       MASK_NONE});
    }
    if (all || strcmp(suite, "decode") == 0) {   /* multi-head, and Llama-3's 32 query heads on 8 */
        const int64_t bs[] = {1, 8, 64};
        for (int i = 0; i < 3; i++)
            for (int64_t nk = 1024; nk <= 131072; nk *= 2)
                if (bs[i] * nk <= (1 << 18) && (nk == 1024 || nk == 4096 || nk == 16384 || nk >= 65536)) {
                    add(s, (shape){"decode", MCIR_DTYPE_F16, bs[i], 16, 1, nk, 128, false, 0, MASK_NONE});
                    add(s, (shape){"decode", MCIR_DTYPE_F16, bs[i], 32, 1, nk, 128, false, 8, MASK_NONE});
                }
    }
    if (all || strcmp(suite, "gqa") == 0) {   /* GQA 4:1 (Llama-3-8B), 8:1, MQA */
        for (int t = 0; t < 2; t++)
            for (int c = 0; c < 2; c++) {
                for (int64_t seq = 1024; seq <= 4096; seq *= 4)
                    add(s, (shape){"gqa", dts[t], 16384 / seq, 32, seq, seq, 128, c == 1, 8, MASK_NONE});
                add(s, (shape){"gqa", dts[t], 8, 64, 2048, 2048, 128, c == 1, 8, MASK_NONE});
                add(s, (shape){"gqa", dts[t], 8, 16, 2048, 2048, 128, c == 1, 1, MASK_NONE});
            }
    }
    if (all || strcmp(suite, "mask") == 0) {   /* a padding mask, causal or not; a full mask */
        for (int64_t seq = 2048; seq <= 4096; seq *= 2) {
            for (int c = 0; c < 2; c++)
                add(s, (shape){"mask", MCIR_DTYPE_F16, 16384 / seq, 16, seq, seq, 128, c == 1, 0, MASK_PAD});
            add(s, (shape){"mask", MCIR_DTYPE_F16, 16384 / seq, 16, seq, seq, 128, false, 0, MASK_ROWS});
        }
    }
    if (all || strcmp(suite, "cross") == 0) {
        const int64_t pairs[][2] = {{4096, 77}, {77, 4096}, {1024, 4096}, {4096, 1024}, {128, 16384}};
        for (int d = 64; d <= 128; d *= 2)
            for (int i = 0; i < 5; i++)
                add(s, (shape){"cross", MCIR_DTYPE_F16, 8, 2048 / d, pairs[i][0], pairs[i][1], d, false, 0,
                               MASK_NONE});
    }
}

static const char *const MASK_NAMES[] = {"none", "pad", "rows"};

/* suite/dtype/dD/bB/hH[/kvK]/qNQ/kNK/causal|full[/mask-pad|rows] */
static void shape_name(const shape *x, char *buf, size_t n) {
    char kv[32] = "", m[32] = "";
    if (kv_heads(x) != x->heads) snprintf(kv, sizeof kv, "/kv%lld", (long long)kv_heads(x));
    if (x->mask) snprintf(m, sizeof m, "/mask-%s", MASK_NAMES[x->mask]);
    snprintf(buf, n, "%s/%s/d%lld/b%lld/h%lld%s/q%lld/k%lld/%s%s", x->suite, mcir_dtype_name(x->dtype),
             (long long)x->d, (long long)x->batch, (long long)x->heads, kv, (long long)x->nq, (long long)x->nk,
             x->causal ? "causal" : "full", m);
}

static double flops(const shape *x) {
    double f = 4.0 * (double)x->batch * (double)x->heads * (double)x->nq * (double)x->nk * (double)x->d;
    return x->causal ? f / 2 : f;
}

/* Multi-head and MQA: Q [B, H, Nq, d], K/V [B, Hkv, Nk, d] (Hkv = H or
 * 1); GQA: Q [B, Hkv, G, Nq, d], K/V [B, Hkv, 1, Nk, d]. The mask in the
 * dtype of Q, [B, 1, (1,) 1|Nq, Nk]. */
static void graph_json(bench_text *t, const shape *x) {
    const char *dt = mcir_dtype_name(x->dtype);
    long long b = x->batch, h = x->heads, hk = kv_heads(x), q = x->nq, k = x->nk, d = x->d;
    char qs[96], ks[96], ms[160] = "";
    bool gqa = hk > 1 && hk < h;
    if (gqa) {
        snprintf(qs, sizeof qs, "[%lld, %lld, %lld, %lld, %lld]", b, hk, h / hk, q, d);
        snprintf(ks, sizeof ks, "[%lld, %lld, 1, %lld, %lld]", b, hk, k, d);
    } else {
        snprintf(qs, sizeof qs, "[%lld, %lld, %lld, %lld]", b, h, q, d);
        snprintf(ks, sizeof ks, "[%lld, %lld, %lld, %lld]", b, hk, k, d);
    }
    if (x->mask)
        snprintf(ms, sizeof ms, ",\n {\"name\": \"m\", \"dtype\": \"%s\", \"shape\": [%lld, 1, %s%lld, %lld]}", dt, b,
                 gqa ? "1, " : "", x->mask == MASK_ROWS ? q : 1, k);
    bench_text_printf(t,
        "{\"mcir\": 1, \"name\": \"attn\", \"inputs\": [\n"
        " {\"name\": \"q\", \"dtype\": \"%s\", \"shape\": %s},\n"
        " {\"name\": \"k\", \"dtype\": \"%s\", \"shape\": %s},\n"
        " {\"name\": \"v\", \"dtype\": \"%s\", \"shape\": %s}%s],\n"
        " \"weights\": [],\n"
        " \"nodes\": [{\"name\": \"attention\", \"op\": \"attention\", \"inputs\": [\"q\", \"k\", \"v\"%s],"
        " \"outputs\": [\"o\"], \"attrs\": {\"causal\": %s}}],\n"
        " \"outputs\": [\"o\"]}\n",
        dt, qs, dt, ks, dt, ks, ms, x->mask ? ", \"m\"" : "", x->causal ? "true" : "false");
}

/* The compulsory bytes: Q and O, K and V (each K/V head once), the mask. */
static int64_t shape_bytes(const shape *x) {
    int64_t es = x->dtype == MCIR_DTYPE_F32 ? 4 : 2;
    int64_t m = x->mask == MASK_PAD ? x->batch * x->nk : x->mask == MASK_ROWS ? x->batch * x->nq * x->nk : 0;
    return es * (x->batch * x->d * (2 * x->heads * x->nq + 2 * kv_heads(x) * x->nk) + m);
}

/* Which template runs it: "sm90a" (TMA + wgmma), "split" (sm90a or
 * mma.sync with split-KV: "sm90a+split"), "mma" (mma.sync), "fma". */
static const char *attention_path(const mcir_kernel_plan *k) {
    bool sm90 = false, split = false;
    for (int i = 0; i < k->tiling.n_dims; i++) {
        sm90 = sm90 || strcmp(k->tiling.dim_names[i], "wg") == 0;
        split = split || strcmp(k->tiling.dim_names[i], "kv_split") == 0;
    }
    mcir_attention_problem g;
    bool mma = mcir_attention_problem_of(k, &g) && g.mma;
    return sm90 ? (split ? "sm90a+split" : "sm90a") : mma ? (split ? "mma+split" : "mma") : "fma";
}

static const char *const SUITES[] = {"fa3", "decode", "gqa", "mask", "cross", "all", NULL};
static const char USAGE[] =
    "usage: bench_attention [--dry-run] [--suite fa3|decode|gqa|mask|cross|all] [--match TEXT[,TEXT...]]\n"
    "         [--compile N] [--reps N] [--warmup N] [--arch sm_XX] [--csv FILE]\n";

int main(int argc, char **argv) {
    bench_args o;
    int st = bench_args_parse(&o, "bench_attention", SUITES, USAGE, argc, argv);
    if (st >= 0) return st;
    bench_sweep w;
    st = bench_sweep_open(&w, "bench_attention", &o);
    if (st >= 0) return st;
    const char *match = o.match;
    bench_gpu *g = &w.gpu;
    bool gpu = w.on_gpu;
    FILE *csv = w.csv;

    shapes s = {.arena = mcir_arena_new()};
    sweep(&s, o.suite);
    fprintf(csv, "suite,impl,dtype,batch,heads,seq_q,seq_k,head_dim,causal,kv_heads,mask,path,pipeline_s,"
                 "compile_s,compile_cache,median_ms,min_ms,tflops,gbps,modelled_us,device,status\n");
    mcir_diag d = mcir_diag_stderr();
    int failures = 0, selected = 0;
    for (int i = 0; i < s.n; i++) {
        const shape *x = &s.v[i];
        char nm[160];
        shape_name(x, nm, sizeof nm);
        if (!bench_match(nm, match)) continue;
        selected++;
        bench_text json = {0};
        graph_json(&json, x);
        bench_graph b;
        bool ok = bench_sweep_build(&w, &b, json.s, nm, &d);
        bench_text_free(&json);
        int k = ok ? bench_graph_kernel(&b, MCIR_TEMPLATE_STREAMING_ATTENTION) : -1;
        char status[600];
        bench_gpu_timing t = {0};
        if (!ok) snprintf(status, sizeof status, "pipeline failed");
        else if (k < 0) snprintf(status, sizeof status, "no streaming_attention kernel in the plan");
        else if (!gpu) snprintf(status, sizeof status, "not run (no GPU)");
        else if ((double)shape_bytes(x) > 0.8 * (double)g->total_bytes)
            snprintf(status, sizeof status, "not run (needs %lld bytes)", (long long)shape_bytes(x));
        else if (!bench_time_graph(g, &b, o.warmup, o.reps, &t, status, sizeof status)) ok = false;
        if (!ok || k < 0) failures++;
        char comp[32], cache[16];
        bench_compile_cells(&b, comp, cache);
        char med[32] = "", mn[32] = "", tf[32] = "", gb[32] = "";
        if (t.reps) {
            snprintf(med, sizeof med, "%.4f", t.median_ms);
            snprintf(mn, sizeof mn, "%.4f", t.min_ms);
            snprintf(tf, sizeof tf, "%.2f", flops(x) / (t.median_ms * 1e-3) / 1e12);
            snprintf(gb, sizeof gb, "%.1f", (double)shape_bytes(x) / (t.median_ms * 1e-3) / 1e9);
        }
        /* the plan's modelled time of the attention's launches (the
         * cost model's pipeline on sm_90a: the figure a GPU run checks) */
        char model[32] = "";
        if (k >= 0) {
            mcir_kernel_cost c;
            mcir_cost_kernel(&b.plan->kernels[k], b.plan->target, NULL, &c);
            snprintf(model, sizeof model, "%.2f", c.modelled_us);
        }
        bench_csv_cell(status);
        fprintf(csv, "%s,mcir,%s,%lld,%lld,%lld,%lld,%lld,%d,%lld,%s,%s,%.4f,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", x->suite,
                mcir_dtype_name(x->dtype), (long long)x->batch, (long long)x->heads, (long long)x->nq,
                (long long)x->nk, (long long)x->d, x->causal, (long long)kv_heads(x), MASK_NAMES[x->mask],
                k >= 0 ? attention_path(&b.plan->kernels[k]) : "", b.pipeline_s, comp, cache, med, mn, tf, gb, model,
                gpu ? g->name : "", status);
        fflush(csv);
        if (!w.csv_file.to_stdout && t.reps)
            printf("%-56s %9.3f ms %8.2f TFLOP/s %8.1f GB/s  (compile %s s)\n", nm, t.median_ms,
                   flops(x) / (t.median_ms * 1e-3) / 1e12, (double)shape_bytes(x) / (t.median_ms * 1e-3) / 1e9,
                   comp);
        bench_graph_free(&b);
    }
    if (!bench_sweep_close(&w)) failures++;
    mcir_arena_free(s.arena);
    if (selected == 0) {
        fprintf(stderr, "bench_attention: no shape matches '%s'\n", match ? match : "");
        return 2;
    }
    return failures ? 1 : 0;
}
