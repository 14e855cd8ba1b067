/*
 * bench_interp.c — speed of the CPU reference interpreter: the f32 GEMM at
 * 512×768×3072, a GPT-2-small stack (12 blocks, seq 512, d 768, 12 heads,
 * fused attention) built through the graph API, and, when present, the
 * decomposed examples/gpt2_stack/graph.json. Prints seconds and GFLOP/s
 * (counting matmul, attention and conv2d multiply-adds as 2 flops).
 *
 * usage: bench_interp [--threads N] [--layers L] [--seq S] [graph.json]
 */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "mcir/interp-impl.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* CPU seconds used by the process (all threads): on a shared machine,
 * flops per CPU-second show the kernels' speed when wall time cannot. */
static double cpu_seconds(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec * 1e-6 +
           (double)r.ru_stime.tv_sec + (double)r.ru_stime.tv_usec * 1e-6;
}

/* Flops of the dot-product ops of a graph (inferred shapes). */
static double graph_flops(const mcir_graph *g) {
    double f = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const mcir_node *n = g->nodes[i];
        if (n->dead) continue;
        const mcir_tensor *y = n->outputs[0];
        if (n->op == MCIR_OP_MATMUL) {
            const mcir_tensor *a = n->inputs[0];
            bool ta = mcir_node_bool(n, "transpose_a") && a->rank >= 2;
            int64_t k = a->rank >= 2 ? a->shape[a->rank - (ta ? 2 : 1)] : a->shape[0];
            f += 2.0 * (double)mcir_tensor_numel(y) * (double)k;
        } else if (n->op == MCIR_OP_ATTENTION) {
            const mcir_tensor *q = n->inputs[0], *k = n->inputs[1];
            double per_row = (double)k->shape[k->rank - 2] *
                             (double)(q->shape[q->rank - 1] + y->shape[y->rank - 1]);
            f += 2.0 * (double)(mcir_tensor_numel(y) / y->shape[y->rank - 1]) * per_row;
        } else if (n->op == MCIR_OP_CONV2D) {
            const mcir_tensor *w = n->inputs[1];
            f += 2.0 * (double)mcir_tensor_numel(y) * (double)(mcir_tensor_numel(w) / w->shape[0]);
        }
    }
    return f;
}

static mcir_tensor *tensor(mcir_graph *g, const char *name, mcir_tensor_kind kind, int rank,
                           const int64_t *shape) {
    mcir_tensor *t = mcir_graph_add_tensor(g, name, MCIR_DTYPE_F32, rank, shape, kind);
    MCIR_ASSERT(t);
    return t;
}

static mcir_tensor *weight(mcir_graph *g, const char *name, int64_t d0, int64_t d1) {
    int64_t s[2] = {d0, d1};
    return tensor(g, name, MCIR_TENSOR_WEIGHT, d1 ? 2 : 1, s);
}

static mcir_tensor *node(mcir_graph *g, mcir_op op, const char *name, int n_in,
                         mcir_tensor *const *ins, mcir_node **out_node) {
    char tn[96];
    snprintf(tn, sizeof tn, "%s.out", name);
    mcir_tensor *y = tensor(g, tn, MCIR_TENSOR_INTERMEDIATE, -1, NULL);
    mcir_node *n = mcir_graph_add_node(g, op, name, n_in, ins, 1, &y);
    if (out_node) *out_node = n;
    return y;
}

/* GPT-2 small: pre-LN blocks, fused causal attention, tanh GELU. */
static mcir_graph *build_gpt2(int layers, int64_t seq) {
    const int64_t dm = 768, heads = 12, hd = 64;
    mcir_graph *g = mcir_graph_new("gpt2_api");
    int64_t xs[3] = {1, seq, dm};
    mcir_tensor *x = tensor(g, "x", MCIR_TENSOR_INPUT, 3, xs);
    char nm[96];
#define NM(fmt) (snprintf(nm, sizeof nm, "h%d." fmt, l), nm)
    for (int l = 0; l < layers; l++) {
        mcir_node *n;
        mcir_tensor *ln1 = node(g, MCIR_OP_LAYERNORM, NM("ln_1"), 3,
                                (mcir_tensor *[]){x, weight(g, NM("ln_1.g"), dm, 0),
                                                  weight(g, NM("ln_1.b"), dm, 0)}, NULL);
        mcir_tensor *qkv = node(g, MCIR_OP_MATMUL, NM("c_attn"), 2,
                                (mcir_tensor *[]){ln1, weight(g, NM("c_attn.w"), dm, 3 * dm)},
                                NULL);
        qkv = node(g, MCIR_OP_ADD, NM("c_attn_b"), 2,
                   (mcir_tensor *[]){qkv, weight(g, NM("c_attn.b"), 3 * dm, 0)}, NULL);
        mcir_tensor *parts[3];
        for (int i = 0; i < 3; i++) {
            snprintf(nm, sizeof nm, "h%d.%c", l, "qkv"[i]);
            parts[i] = tensor(g, nm, MCIR_TENSOR_INTERMEDIATE, -1, NULL);
        }
        n = mcir_graph_add_node(g, MCIR_OP_SPLIT, NM("split"), 1, &qkv, 3, parts);
        mcir_node_set_int(g, n, "axis", -1);
        mcir_node_set_ints(g, n, "sizes", 3, (int64_t[]){dm, dm, dm});
        mcir_tensor *hp[3];
        for (int i = 0; i < 3; i++) {
            snprintf(nm, sizeof nm, "h%d.%c_r", l, "qkv"[i]);
            mcir_tensor *r = node(g, MCIR_OP_RESHAPE, nm, 1, &parts[i], &n);
            mcir_node_set_ints(g, n, "shape", 4, (int64_t[]){1, seq, heads, hd});
            snprintf(nm, sizeof nm, "h%d.%c_t", l, "qkv"[i]);
            hp[i] = node(g, MCIR_OP_TRANSPOSE, nm, 1, &r, &n);
            mcir_node_set_ints(g, n, "perm", 4, (int64_t[]){0, 2, 1, 3});
        }
        mcir_tensor *a = node(g, MCIR_OP_ATTENTION, NM("attn"), 3, hp, &n);
        mcir_node_set_bool(g, n, "causal", true);
        a = node(g, MCIR_OP_TRANSPOSE, NM("merge_t"), 1, &a, &n);
        mcir_node_set_ints(g, n, "perm", 4, (int64_t[]){0, 2, 1, 3});
        a = node(g, MCIR_OP_RESHAPE, NM("merge"), 1, &a, &n);
        mcir_node_set_ints(g, n, "shape", 3, xs);
        a = node(g, MCIR_OP_MATMUL, NM("c_proj"), 2,
                 (mcir_tensor *[]){a, weight(g, NM("c_proj.w"), dm, dm)}, NULL);
        a = node(g, MCIR_OP_ADD, NM("c_proj_b"), 2,
                 (mcir_tensor *[]){a, weight(g, NM("c_proj.b"), dm, 0)}, NULL);
        x = node(g, MCIR_OP_ADD, NM("res1"), 2, (mcir_tensor *[]){x, a}, NULL);
        mcir_tensor *ln2 = node(g, MCIR_OP_LAYERNORM, NM("ln_2"), 3,
                                (mcir_tensor *[]){x, weight(g, NM("ln_2.g"), dm, 0),
                                                  weight(g, NM("ln_2.b"), dm, 0)}, NULL);
        mcir_tensor *f = node(g, MCIR_OP_MATMUL, NM("c_fc"), 2,
                              (mcir_tensor *[]){ln2, weight(g, NM("c_fc.w"), dm, 4 * dm)}, NULL);
        f = node(g, MCIR_OP_ADD, NM("c_fc_b"), 2,
                 (mcir_tensor *[]){f, weight(g, NM("c_fc.b"), 4 * dm, 0)}, NULL);
        f = node(g, MCIR_OP_GELU, NM("gelu"), 1, &f, &n);
        mcir_node_set_string(g, n, "approximate", "tanh");
        f = node(g, MCIR_OP_MATMUL, NM("mlp_proj"), 2,
                 (mcir_tensor *[]){f, weight(g, NM("mlp_proj.w"), 4 * dm, dm)}, NULL);
        f = node(g, MCIR_OP_ADD, NM("mlp_proj_b"), 2,
                 (mcir_tensor *[]){f, weight(g, NM("mlp_proj.b"), dm, 0)}, NULL);
        x = node(g, MCIR_OP_ADD, NM("res2"), 2, (mcir_tensor *[]){x, f}, NULL);
    }
#undef NM
    mcir_graph_mark_output(g, x);
    mcir_diag d = mcir_diag_stderr();
    if (!mcir_graph_sort(g, &d) || !mcir_graph_infer(g, &d) || !mcir_graph_verify(g, &d)) {
        mcir_graph_free(g);
        return NULL;
    }
    return g;
}

/* Runs g once (after a warm-up run when `warm`) and reports. */
static bool bench_graph(const char *label, const mcir_graph *g, bool warm) {
    mcir_diag d = mcir_diag_stderr();
    double flops = graph_flops(g), best = 1e30, best_cpu = 0;
    for (int rep = 0; rep < (warm ? 2 : 1); rep++) {
        mcir_env *e = mcir_env_new(g, 0);
        double t0 = now(), c0 = cpu_seconds();
        bool ok = mcir_interp_run(g, e, &d);
        double t = now() - t0, c = cpu_seconds() - c0;
        mcir_env_free(e);
        if (!ok) return false;
        if (t < best) best = t, best_cpu = c;
    }
    printf("%-34s %4d nodes  %6.1f GFLOP  %7.3f s  %6.1f GFLOP/s  (cpu %.3f s, %.1f GFLOP/cpu-s)\n",
           label, mcir_graph_live_nodes(g), flops * 1e-9, best, flops * 1e-9 / best, best_cpu,
           flops * 1e-9 / best_cpu);
    return true;
}

static void bench_matmul(int64_t m, int64_t k, int64_t n) {
    mcir_graph *g = mcir_graph_new("mm");
    mcir_tensor *a = tensor(g, "a", MCIR_TENSOR_INPUT, 2, (int64_t[]){m, k});
    mcir_tensor *b = tensor(g, "b", MCIR_TENSOR_INPUT, 2, (int64_t[]){k, n});
    mcir_node *nd;
    node(g, MCIR_OP_MATMUL, "mm", 2, (mcir_tensor *[]){a, b}, &nd);
    mcir_diag d = mcir_diag_stderr();
    MCIR_ASSERT(mcir_graph_infer(g, &d));
    float *av = malloc(sizeof(float) * (size_t)(m * k)), *bv = malloc(sizeof(float) * (size_t)(k * n));
    float *cv = malloc(sizeof(float) * (size_t)(m * n));
    MCIR_ASSERT(av && bv && cv);
    mcir_fill_seeded(a, 1, av);
    mcir_fill_seeded(b, 2, bv);
    double flops = 2.0 * (double)m * (double)n * (double)k;
    int threads = mcir_get_threads();
    int counts[2] = {1, threads};
    for (int c = 0; c < (threads > 1 ? 2 : 1); c++) {
        int t = counts[c];
        mcir_set_threads(t);
        double best = 1e30, best_cpu = 0;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = now(), c0 = cpu_seconds();
            mcir_ref_run_node(nd, (const float *[]){av, bv}, (float *[]){cv});
            double dt = now() - t0, dc = cpu_seconds() - c0;
            if (dt < best) best = dt, best_cpu = dc;
        }
        printf("matmul %lldx%lldx%lld, %d thread%s %7.4f s  %6.1f GFLOP/s  (cpu %.4f s, %.1f "
               "GFLOP/cpu-s)\n",
               (long long)m, (long long)k, (long long)n, t, t == 1 ? " " : "s", best,
               flops * 1e-9 / best, best_cpu, flops * 1e-9 / best_cpu);
    }
    mcir_set_threads(threads);
    free(av);
    free(bv);
    free(cv);
    mcir_graph_free(g);
}

int main(int argc, char **argv) {
    int layers = 12;
    int64_t seq = 512;
    const char *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) mcir_set_threads(atoi(argv[++i]));
        else if (strcmp(argv[i], "--layers") == 0 && i + 1 < argc) layers = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seq") == 0 && i + 1 < argc) seq = atoll(argv[++i]);
        else if (argv[i][0] != '-') json = argv[i];
        else {
            fprintf(stderr, "usage: %s [--threads N] [--layers L] [--seq S] [graph.json]\n", argv[0]);
            return 2;
        }
    }
    printf("reference interpreter, %d threads\n", mcir_get_threads());
    bench_matmul(512, 768, 3072);

    mcir_graph *g = build_gpt2(layers, seq);
    if (!g || !bench_graph("gpt2-small (graph API, fused attn)", g, false)) return 1;
    mcir_graph_free(g);

    char path[4096];
    if (!json) {
        const char *root = getenv("MCIR_SOURCE_DIR");
        snprintf(path, sizeof path, "%s/examples/gpt2_stack/graph.json", root ? root : ".");
        FILE *f = fopen(path, "r");
        if (f) {
            fclose(f);
            json = path;
        }
    }
    if (json) {
        mcir_diag d = mcir_diag_stderr();
        mcir_graph *jg = mcir_graph_read_json(json, &d);
        if (!jg || !bench_graph("graph.json (decomposed)", jg, false)) return 1;
        mcir_graph_free(jg);
    }
    return 0;
}
