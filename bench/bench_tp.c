/*
 * bench_tp.c — the modelled scaling of tensor parallelism (`mcirc --tp N`,
 * docs/performance.md "Tensor parallelism, modelled"): one Llama layer
 * (RMSNorm, Q/K/V with grouped K/V heads, causal attention, the output
 * projection, the SwiGLU MLP, two residuals) of Llama-2-7B and Llama-2-70B
 * shapes in bf16, compiled for N = 1, 2, 4, 8 ranks on sm_90 (H100 SXM5,
 * NVLink 4), through the whole pipeline (the --tp rewrite, the catalog's
 * rules, kernel and memory planning). Every figure is the cost model's
 * (kernelplan/cost.c), not a measurement: per rank the kernels' modelled
 * time, the collectives' (NCCL's ring on the link), weights and arena.
 *
 * usage: bench_tp [--quick] [--tokens N ...]
 *   --quick: Llama-2-7B at 128 tokens only, N = 1, 2 (the CI's smoke run)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcirc/pipeline.h"

typedef struct model {
    const char *name;
    int hidden, heads, kv_heads, head_dim, ffn;
} model;

static const model models[] = {
    {"llama2_7b", 4096, 32, 32, 128, 11008},
    {"llama2_70b", 8192, 64, 8, 128, 28672},
};

/* One layer as graph.json text (weights seeded: nothing is allocated). */
static char *layer_json(const model *m, int tokens) {
    int H = m->hidden, KV = m->kv_heads, G = m->heads / m->kv_heads, D = m->head_dim, F = m->ffn;
    int KVD = KV * D;
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f) return NULL;
    fprintf(f, "{\"mcir\": 1, \"name\": \"%s_t%d\",\n", m->name, tokens);
    fprintf(f, " \"inputs\": [{\"name\": \"x\", \"dtype\": \"bf16\", \"shape\": [1, %d, %d]}],\n", tokens, H);
    fprintf(f, " \"weights\": [\n");
    fprintf(f, "  {\"name\": \"in_norm\", \"dtype\": \"bf16\", \"shape\": [%d]},\n", H);
    fprintf(f, "  {\"name\": \"wq\", \"dtype\": \"bf16\", \"shape\": [%d, %d]},\n", H, H);
    fprintf(f, "  {\"name\": \"wk\", \"dtype\": \"bf16\", \"shape\": [%d, %d]},\n", KVD, H);
    fprintf(f, "  {\"name\": \"wv\", \"dtype\": \"bf16\", \"shape\": [%d, %d]},\n", KVD, H);
    fprintf(f, "  {\"name\": \"wo\", \"dtype\": \"bf16\", \"shape\": [%d, %d]},\n", H, H);
    fprintf(f, "  {\"name\": \"post_norm\", \"dtype\": \"bf16\", \"shape\": [%d]},\n", H);
    fprintf(f, "  {\"name\": \"w_gate\", \"dtype\": \"bf16\", \"shape\": [%d, %d]},\n", F, H);
    fprintf(f, "  {\"name\": \"w_up\", \"dtype\": \"bf16\", \"shape\": [%d, %d]},\n", F, H);
    fprintf(f, "  {\"name\": \"w_down\", \"dtype\": \"bf16\", \"shape\": [%d, %d]}],\n", H, F);
    fprintf(f, " \"nodes\": [\n");
#define MM(a, w, o) \
    fprintf(f, "  {\"op\": \"matmul\", \"inputs\": [\"%s\", \"%s\"], \"outputs\": [\"%s\"], " \
               "\"attrs\": {\"transpose_b\": true}},\n", a, w, o)
    fprintf(f, "  {\"op\": \"rmsnorm\", \"inputs\": [\"x\", \"in_norm\"], \"outputs\": [\"h\"]},\n");
    MM("h", "wq", "q2");
    MM("h", "wk", "k2");
    MM("h", "wv", "v2");
    /* heads: q [1, T, KV, G, D] -> [1, KV, G, T, D]; k, v [1, T, KV, 1, D] -> [1, KV, 1, T, D] */
    const char *names[3][3] = {{"q2", "q5", "q"}, {"k2", "k5", "k"}, {"v2", "v5", "v"}};
    for (int i = 0; i < 3; i++) {
        fprintf(f, "  {\"op\": \"reshape\", \"inputs\": [\"%s\"], \"outputs\": [\"%s\"], "
                   "\"attrs\": {\"shape\": [1, %d, %d, %d, %d]}},\n",
                names[i][0], names[i][1], tokens, KV, i ? 1 : G, D);
        fprintf(f, "  {\"op\": \"transpose\", \"inputs\": [\"%s\"], \"outputs\": [\"%s\"], "
                   "\"attrs\": {\"perm\": [0, 2, 3, 1, 4]}},\n", names[i][1], names[i][2]);
    }
    fprintf(f, "  {\"op\": \"attention\", \"inputs\": [\"q\", \"k\", \"v\"], \"outputs\": [\"a5\"], "
               "\"attrs\": {\"causal\": true}},\n");
    fprintf(f, "  {\"op\": \"transpose\", \"inputs\": [\"a5\"], \"outputs\": [\"a5t\"], "
               "\"attrs\": {\"perm\": [0, 3, 1, 2, 4]}},\n");
    fprintf(f, "  {\"op\": \"reshape\", \"inputs\": [\"a5t\"], \"outputs\": [\"a\"], "
               "\"attrs\": {\"shape\": [1, %d, %d]}},\n", tokens, H);
    MM("a", "wo", "o");
    fprintf(f, "  {\"op\": \"add\", \"inputs\": [\"x\", \"o\"], \"outputs\": [\"x1\"]},\n");
    fprintf(f, "  {\"op\": \"rmsnorm\", \"inputs\": [\"x1\", \"post_norm\"], \"outputs\": [\"h1\"]},\n");
    MM("h1", "w_gate", "g");
    MM("h1", "w_up", "u");
    fprintf(f, "  {\"op\": \"silu\", \"inputs\": [\"g\"], \"outputs\": [\"sg\"]},\n");
    fprintf(f, "  {\"op\": \"mul\", \"inputs\": [\"sg\", \"u\"], \"outputs\": [\"m\"]},\n");
    MM("m", "w_down", "dn");
    fprintf(f, "  {\"op\": \"add\", \"inputs\": [\"x1\", \"dn\"], \"outputs\": [\"y\"]}],\n");
#undef MM
    fprintf(f, " \"outputs\": [\"y\"]}\n");
    fclose(f);
    return s;
}

typedef struct figures {
    int kernels, collectives;
    double compute_us, collective_us, link_bytes;
    double total_us, beside_us;   /* the plan on two streams (mcir_cost_plan): the collectives' time beside kernels */
    int64_t weight_bytes, arena_bytes;
} figures;

static int compile_at(const char *path, int ranks, figures *out) {
    mcir_options o = mcir_options_default();
    o.graph_path = path;
    o.want_plan = true;
    o.arch = "sm_90";
    o.tp = ranks;
    mcir_compilation c;
    mcir_diag d = mcir_diag_stderr();
    int st = mcir_compile(&o, &c, &d);
    if (st == 0) {
        memset(out, 0, sizeof *out);
        for (int i = 0; i < c.plan->n_kernels; i++) {
            const mcir_kernel_plan *k = &c.plan->kernels[i];
            if (k->tpl == MCIR_TEMPLATE_ALIAS) continue;
            mcir_kernel_cost kc;
            mcir_cost_kernel(k, c.target, NULL, &kc);
            if (k->tpl == MCIR_TEMPLATE_COLLECTIVE) {
                double b, us;
                mcir_cost_collective(k, c.target, &b, &us);
                out->collectives++;
                out->link_bytes += b;
                out->collective_us += kc.modelled_us;
            } else {
                out->kernels++;
                out->compute_us += kc.modelled_us;
            }
        }
        mcir_plan_cost pc;
        mcir_cost_plan(c.plan, &pc);
        out->total_us = pc.modelled_us;
        out->beside_us = pc.overlap_us;
        for (int i = 0; i < c.graph->n_weights; i++) out->weight_bytes += mcir_tensor_bytes(c.graph->weights[i]);
        out->arena_bytes = c.memory ? c.memory->arena_bytes : 0;
    }
    mcir_compilation_free(&c);
    return st;
}

int main(int argc, char **argv) {
    bool quick = false;
    int tokens[8] = {128, 2048}, n_tokens = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = true;
        } else if (!strcmp(argv[i], "--tokens")) {
            n_tokens = 0;
            while (i + 1 < argc && argv[i + 1][0] != '-' && n_tokens < 8) tokens[n_tokens++] = atoi(argv[++i]);
            for (int k = 0; k < n_tokens; k++)
                if (tokens[k] < 1 || tokens[k] > 65536) {
                    fprintf(stderr, "bench_tp: --tokens: %d is not a token count\n", tokens[k]);
                    return 2;
                }
        } else {
            fprintf(stderr, "usage: bench_tp [--quick] [--tokens N ...]\n");
            return 2;
        }
    }
    if (quick) {
        tokens[0] = 128;
        n_tokens = 1;
    }
    char dir[] = "/tmp/mcir-bench-tp-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("bench_tp: mkdtemp");
        return 1;
    }
    printf("# modelled by kernelplan/cost.c (not measured): one layer per rank on sm_90 (H100-SXM5-80GB),\n"
           "# collectives as NCCL's ring on NVLink 4 (450 GB/s per direction, 2 us a ring step); bf16, batch 1\n");
    printf("%-11s %6s %2s %7s %11s %10s %11s %5s %10s %12s %10s %10s %8s %6s\n", "model", "tokens", "N", "kernels",
           "weights/MB", "arena/MB", "compute/us", "coll", "link/MB", "collective/us", "beside/us", "total/us",
           "speedup", "eff");
    int rc = 0;
    for (size_t mi = 0; mi < sizeof models / sizeof *models && !(quick && mi > 0); mi++)
        for (int ti = 0; ti < n_tokens; ti++) {
            char path[64];
            snprintf(path, sizeof path, "%s/layer.json", dir);
            char *text = layer_json(&models[mi], tokens[ti]);
            FILE *f = text ? fopen(path, "w") : NULL;
            if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
                fprintf(stderr, "bench_tp: cannot write %s\n", path);
                free(text);
                rc = 1;
                break;
            }
            free(text);
            double base = 0;
            for (int n = 1; n <= (quick ? 2 : 8); n *= 2) {
                figures x;
                int st = compile_at(path, n, &x);
                if (st) {
                    fprintf(stderr, "bench_tp: %s at %d tokens, %d ranks: compile failed (%d)\n", models[mi].name,
                            tokens[ti], n, st);
                    rc = 1;
                    continue;
                }
                /* compute + collectives, less what of the collectives runs beside the kernels */
                double total = x.total_us;
                if (n == 1) base = total;
                printf("%-11s %6d %2d %7d %11.1f %10.1f %11.1f %5d %10.2f %12.1f %10.1f %10.1f %7.2fx %5.0f%%\n",
                       models[mi].name, tokens[ti], n, x.kernels, x.weight_bytes / 1e6, x.arena_bytes / 1e6,
                       x.compute_us, x.collectives, x.link_bytes / 1e6, x.collective_us, x.beside_us, total,
                       base / total, 100.0 * base / total / n);
            }
            unlink(path);
        }
    rmdir(dir);
    return rc;
}
