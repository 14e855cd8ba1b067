/*
 * test_cost.c — the traffic and cost model (kernelplan/cost.c): the
 * target table's roofline figures, the bytes, flops and launches of each
 * kernel path counted by hand from the template's code, the tuner's
 * candidate tiles, the L2 spill rule, and the plan's totals against the
 * compulsory bytes (with the example graphs through the whole pipeline
 * where it is built, unfused baseline included).
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelplan/kernelplan.h"
#include "test_util.h"
#ifdef MCIR_HAVE_PIPELINE
#include "pipeline_test.h"
#endif

static mcir_graph *graph_of(const char *json) {
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g = mcir_graph_read_json_string(json, "<test>", &d);
    ck_assert_ptr_nonnull(g);
    return g;
}

/* Puts the named nodes into one fusion group, as the rewrites would. */
static void fuse(mcir_graph *g, const char *const *names, int n) {
    for (int i = 0; i < n; i++) {
        mcir_node *x = mcir_graph_find_node(g, names[i]);
        ck_assert_ptr_nonnull(x);
        x->group = 7;
    }
}

static mcir_plan *plan_of(mcir_graph *g, const char *arch) {
    mcir_diag d = mcir_diag_stderr();
    mcir_plan *p = mcir_plan_build(g, mcir_target_find(arch), NULL, &d);
    ck_assert_ptr_nonnull(p);
    return p;
}

static const mcir_kernel_plan *kernel_with(const mcir_plan *p, mcir_template tpl) {
    for (int i = 0; i < p->n_kernels; i++)
        if (p->kernels[i].tpl == tpl) return &p->kernels[i];
    ck_abort_msg("no %s kernel", mcir_template_name(tpl));
    return NULL;
}

static int64_t tile(const mcir_tiling *t, const char *dim) {
    for (int i = 0; i < t->n_dims; i++)
        if (!strcmp(t->dim_names[i], dim)) return t->block_tile[i];
    return 0;
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* One matmul [M,K] x [K,N] (+ bias when `bias`), f32 or f16. */
static mcir_graph *matmul_graph(const char *dt, int M, int K, int N, bool bias) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"mcir\":1,\"name\":\"mm\",\"inputs\":[{\"name\":\"a\",\"dtype\":\"%s\",\"shape\":[%d,%d]}],"
             "\"weights\":[{\"name\":\"w\",\"dtype\":\"%s\",\"shape\":[%d,%d]},"
             "{\"name\":\"b\",\"dtype\":\"%s\",\"shape\":[%d]}],"
             "\"nodes\":[{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"w\"],\"outputs\":[\"y\"]}%s],"
             "\"outputs\":[\"%s\"]}",
             dt, M, K, dt, K, N, dt, N,
             bias ? ",{\"name\":\"add\",\"op\":\"add\",\"inputs\":[\"y\",\"b\"],\"outputs\":[\"z\"]}" : "",
             bias ? "z" : "y");
    mcir_graph *g = graph_of(json);
    if (bias) fuse(g, (const char *const[]){"mm", "add"}, 2);
    return g;
}

START_TEST(targets_have_a_roofline) {
    for (const mcir_target *const *t = mcir_target_list(); *t; t++) {
        ck_assert_msg((*t)->dram_gbps > 100 && (*t)->l2_bytes >= 4 << 20, "%s", (*t)->name);
        ck_assert_msg((*t)->f32_fma_tflops > 1 && (*t)->launch_us > 0, "%s", (*t)->name);
        /* tensor cores beat the FMA pipes by a wide margin on every part */
        ck_assert_msg((*t)->f16_tc_tflops > 3 * (*t)->f32_fma_tflops, "%s", (*t)->name);
        ck_assert_msg((*t)->bf16_tc_tflops > 3 * (*t)->f32_fma_tflops, "%s", (*t)->name);
    }
    ck_assert_double_eq(mcir_target_find("sm_90")->dram_gbps, 3350.0);
    ck_assert_double_eq(mcir_target_find("sm_80")->f16_tc_tflops, 312.0);
}
END_TEST

/* A bare matmul goes to cuBLAS: one launch, each tensor once across DRAM,
 * A re-read by each column of tiles and B by each row in global memory. */
START_TEST(bare_matmul_is_one_cublas_launch) {
    mcir_graph *g = matmul_graph("f16", 256, 512, 384, false);
    mcir_plan *p = plan_of(g, "sm_90");
    const mcir_kernel_plan *k = kernel_with(p, MCIR_TEMPLATE_MATMUL);
    mcir_kernel_cost c;
    mcir_cost_kernel(k, p->target, NULL, &c);
    ck_assert_str_eq(c.library, "cublas");
    ck_assert_str_eq(c.unit, "f16_tensor_core");
    ck_assert_int_eq(c.launches, 1);
    int64_t A = 256 * 512 * 2, B = 512 * 384 * 2, C = 256 * 384 * 2;
    ck_assert_int_eq(c.hbm_bytes, A + B + C);
    ck_assert_int_eq(c.staging_bytes, 0);
    int64_t bm = tile(&k->tiling, "M"), bn = tile(&k->tiling, "N");
    ck_assert_int_eq(c.global_bytes, A * cdiv(384, bn) + B * cdiv(256, bm) + C);
    ck_assert_double_eq(c.flops, 2.0 * 256 * 512 * 384);
    const mcir_target *t = p->target;
    double mem = (double)(A + B + C) / (t->dram_gbps * 1e3);
    double comp = c.flops / (t->f16_tc_tflops * 1e6);
    ck_assert_double_eq_tol(c.modelled_us, fmax(mem, comp) + t->launch_us, 1e-9);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

/* A bias epilogue is cuBLASLt's: one call computes the product and adds
 * the bias, nothing staged (the product never reaches DRAM). */
START_TEST(matmul_bias_epilogue_is_one_library_call) {
    mcir_graph *g = matmul_graph("f32", 128, 256, 192, true);
    mcir_plan *p = plan_of(g, "sm_80");
    const mcir_kernel_plan *k = kernel_with(p, MCIR_TEMPLATE_MATMUL);
    ck_assert_int_eq(k->n_nodes, 2);
    mcir_kernel_cost c;
    mcir_cost_kernel(k, p->target, NULL, &c);
    ck_assert_str_eq(c.library, "cublasLt");
    ck_assert_int_eq(c.launches, 1);
    ck_assert_int_eq(c.staging_bytes, 0);
    int64_t once = (128 * 256 + 256 * 192 + 192 + 128 * 192) * 4;
    ck_assert_int_eq(c.hbm_bytes, once);
    ck_assert_double_eq_tol(c.launch_us, p->target->launch_us, 1e-12);
    int64_t bm = tile(&k->tiling, "M"), bn = tile(&k->tiling, "N");
    ck_assert_int_eq(c.global_bytes, (128 * 256 * cdiv(192, bn) + 256 * 192 * cdiv(128, bm)) * 4 +
                                         128 * 192 * (4 + 4));   /* bias load + store */

    /* where only cuBLAS loads, the product is staged in f32 and re-read by
     * the generated epilogue kernel: two launches, 2 x M x N x 4 more bytes */
    mcir_kernel_cost st;
    mcir_cost_kernel(k, p->target, &(mcir_cost_options){.no_cublaslt = true}, &st);
    ck_assert_str_eq(st.library, "cublas");
    ck_assert_int_eq(st.launches, 2);
    ck_assert_int_eq(st.staging_bytes, 2 * 128 * 192 * 4);
    ck_assert_int_eq(st.hbm_bytes, once + st.staging_bytes);
    ck_assert_double_eq_tol(st.launch_us, 2 * p->target->launch_us, 1e-12);

    /* the generated kernel (what the emulator runs) keeps the epilogue in
     * registers: one launch, no staging, the plan's tiles */
    mcir_cost_options gen = {.generated_only = true};
    mcir_kernel_cost e;
    mcir_cost_kernel(k, p->target, &gen, &e);
    ck_assert_ptr_null(e.library);
    ck_assert_int_eq(e.launches, 1);
    ck_assert_int_eq(e.hbm_bytes, once);
    int64_t loads = (128 * 256 * cdiv(192, bn) + 256 * 192 * cdiv(128, bm)) * 4;
    int64_t epilogue = 128 * 192 * (4 + 4);   /* bias load + store per element */
    ck_assert_int_eq(e.global_bytes, loads + epilogue);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

/* The tuner's entry: a candidate's tiles change the re-reads it pays. */
START_TEST(candidate_tiles_change_the_rereads) {
    mcir_graph *g = matmul_graph("f32", 512, 256, 512, true);
    mcir_plan *p = plan_of(g, "sm_90");
    const mcir_kernel_plan *k = kernel_with(p, MCIR_TEMPLATE_MATMUL);
    mcir_tiling small = k->tiling, big = k->tiling;
    for (int i = 0; i < small.n_dims; i++) {
        if (!strcmp(small.dim_names[i], "M") || !strcmp(small.dim_names[i], "N")) {
            small.block_tile[i] = 32;
            big.block_tile[i] = 128;
        }
    }
    mcir_cost_options os = {.tiles = &small, .generated_only = true};
    mcir_cost_options ob = {.tiles = &big, .generated_only = true};
    mcir_kernel_cost cs, cb;
    mcir_cost_kernel(k, p->target, &os, &cs);
    mcir_cost_kernel(k, p->target, &ob, &cb);
    ck_assert_int_gt(cs.global_bytes, cb.global_bytes);
    ck_assert_int_eq(cs.hbm_bytes, cb.hbm_bytes);   /* the L2 holds these re-reads */
    int64_t ab = (512 * 256 + 256 * 512) * 4;
    ck_assert_int_eq(cs.global_bytes - cb.global_bytes, ab * (512 / 32 - 512 / 128));
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

/* A weight larger than the L2, re-read by every row of tiles, crosses
 * DRAM once per row; within the L2 it crosses once. */
START_TEST(rereads_beyond_l2_spill_to_dram) {
    mcir_graph *g = matmul_graph("f32", 512, 4096, 4096, false);   /* B: 64 MiB */
    mcir_plan *p = plan_of(g, "sm_86");                            /* L2: 6 MiB */
    const mcir_kernel_plan *k = kernel_with(p, MCIR_TEMPLATE_MATMUL);
    mcir_kernel_cost c;
    mcir_cost_options gen = {.generated_only = true};
    mcir_cost_kernel(k, p->target, &gen, &c);
    int64_t B = 4096ll * 4096 * 4, rows = cdiv(512, tile(&k->tiling, "M"));
    ck_assert_int_gt(rows, 1);
    ck_assert_int_eq(c.l2_spill_bytes, B * (rows - 1));
    ck_assert_int_eq(c.hbm_bytes, (512ll * 4096 * 2) * 4 + B + c.l2_spill_bytes);
    /* the library rasterises bands of rows whose A panels fill half the
     * L2 (3 MiB / 16 KiB a row = 192 rows): B crosses DRAM once a band */
    mcir_cost_kernel(k, p->target, NULL, &c);
    ck_assert_ptr_nonnull(c.library);
    ck_assert_int_eq(c.l2_spill_bytes, B * (cdiv(512, 192) - 1));
    mcir_plan_free(p);
    mcir_graph_free(g);

    g = matmul_graph("f32", 512, 256, 256, false);   /* B: 256 KiB */
    p = plan_of(g, "sm_86");
    mcir_cost_kernel(kernel_with(p, MCIR_TEMPLATE_MATMUL), p->target, NULL, &c);
    ck_assert_int_eq(c.l2_spill_bytes, 0);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

/* f16 [M, K] . [K, N] with an epilogue chain ("" none, "bias", "bias gelu_tanh",
 * "bias gelu_erf"), the nodes in one group */
static mcir_graph *epilogue_graph(int M, int K, int N, const char *chain) {
    char json[4096], nodes[2048];
    int n = snprintf(nodes, sizeof nodes, "{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"w\"],\"outputs\":[\"y\"]}");
    const char *last = "y";
    if (strstr(chain, "bias")) {
        n += snprintf(nodes + n, sizeof nodes - (size_t)n,
                      ",{\"name\":\"add\",\"op\":\"add\",\"inputs\":[\"y\",\"b\"],\"outputs\":[\"z\"]}");
        last = "z";
    }
    if (strstr(chain, "gelu")) {
        n += snprintf(nodes + n, sizeof nodes - (size_t)n,
                      ",{\"name\":\"act\",\"op\":\"gelu\",\"inputs\":[\"%s\"],\"outputs\":[\"o\"]%s}", last,
                      strstr(chain, "tanh") ? ",\"attrs\":{\"approximate\":\"tanh\"}" : "");
        last = "o";
    }
    snprintf(json, sizeof json,
             "{\"mcir\":1,\"name\":\"mm\",\"inputs\":[{\"name\":\"a\",\"dtype\":\"f16\",\"shape\":[%d,%d]}],"
             "\"weights\":[{\"name\":\"w\",\"dtype\":\"f16\",\"shape\":[%d,%d]},"
             "{\"name\":\"b\",\"dtype\":\"f16\",\"shape\":[%d]}],\"nodes\":[%s],\"outputs\":[\"%s\"]}",
             M, K, K, N, N, nodes, last);
    mcir_graph *g = graph_of(json);
    fuse(g, (const char *const[]){"mm", "add", "act"}, strstr(chain, "gelu") ? 3 : strstr(chain, "bias") ? 2 : 1);
    return g;
}

/* The sm_90a GEMM's epilogue priced by its instruction mix
 * (launch_gemm_sm90.c, epilogue_issue: issue slots an output element
 * beyond a plain store, not overlapped with the mainloop): GPT-2's c_fc
 * shape, each heavier chain modelled slower, the plain product with no
 * epilogue term, the reason naming it; a grid of one wave reads B once
 * however large (its tiles walk K together: no DRAM re-reads); and where
 * no band's wave fits half the L2, A is re-read a wave. */
START_TEST(sm90_gemm_epilogue_by_instruction_mix) {
    static const char *const chains[] = {"", "bias", "bias gelu_tanh", "bias gelu_erf"};
    double prev = 0;
    for (int i = 0; i < 4; i++) {
        mcir_graph *g = epilogue_graph(2048, 768, 3072, chains[i]);
        mcir_plan *p = plan_of(g, "sm_90");
        const mcir_kernel_plan *k = kernel_with(p, MCIR_TEMPLATE_MATMUL);
        ck_assert_int_gt(tile(&k->tiling, "wg"), 0);   /* the sm_90a template */
        mcir_cost_options gen = {.generated_only = true};
        mcir_kernel_cost c;
        mcir_cost_kernel(k, p->target, &gen, &c);
        fprintf(stderr, "  sm_90a c_fc %-15s compute %.2f us\n", chains[i][0] ? chains[i] : "(plain)", c.compute_us);
        ck_assert_msg(c.compute_us > prev, "%s: %.2f us, not above %.2f", chains[i], c.compute_us, prev);
        ck_assert_msg((strstr(k->tiling.reason, "then the epilogue") != NULL) == (i > 0), "%s", k->tiling.reason);
        prev = c.compute_us;
        mcir_plan_free(p);
        mcir_graph_free(g);
    }
    /* ping-pong (the plan's choice for bias + tanh-GELU): the epilogue runs
     * under the other group's mainloop, but the block's last item's; the
     * cooperative kernel (MCIR_GEMM_PINGPONG=0) adds every item's (three
     * waves: a third of it left) */
    double plain = 0, pp = 0, coop = 0;
    for (int i = 0; i < 3; i++) {
        if (i == 2) setenv("MCIR_GEMM_PINGPONG", "0", 1);
        mcir_graph *g = epilogue_graph(2048, 768, 3072, i == 0 ? "" : "bias gelu_tanh");
        mcir_plan *p = plan_of(g, "sm_90");
        unsetenv("MCIR_GEMM_PINGPONG");
        const mcir_kernel_plan *k = kernel_with(p, MCIR_TEMPLATE_MATMUL);
        ck_assert_int_eq(tile(&k->tiling, "pingpong"), i == 1);
        mcir_cost_options gen = {.generated_only = true};
        mcir_kernel_cost c;
        mcir_cost_kernel(k, p->target, &gen, &c);
        *(i == 0 ? &plain : i == 1 ? &pp : &coop) = c.compute_us;
        mcir_plan_free(p);
        mcir_graph_free(g);
    }
    fprintf(stderr, "  sm_90a c_fc bias gelu_tanh: ping-pong %.2f us, cooperative %.2f us, plain %.2f us\n", pp, coop, plain);
    ck_assert_msg(plain < pp && pp < coop && pp - plain < (coop - plain) / 2, "plain %.2f, ping-pong %.2f, cooperative %.2f",
                  plain, pp, coop);
    /* [256, 11008] . [11008, 4096]: B 86 MiB over a 50 MiB L2, 64 tiles
     * of 128 x 256 (32 pairs) in one wave */
    mcir_graph *g = epilogue_graph(256, 11008, 4096, "bias gelu_tanh");
    mcir_plan *p = plan_of(g, "sm_90");
    const mcir_kernel_plan *k = kernel_with(p, MCIR_TEMPLATE_MATMUL);
    mcir_cost_options gen = {.generated_only = true};
    mcir_kernel_cost c;
    mcir_cost_kernel(k, p->target, &gen, &c);
    ck_assert_int_le(cdiv(256, tile(&k->tiling, "M")) * cdiv(4096, tile(&k->tiling, "N")), p->target->sm_count);
    ck_assert_int_eq(c.l2_spill_bytes, 0);
    mcir_plan_free(p);
    mcir_graph_free(g);
    /* Llama-7B's down projection at 4096 tokens: A and B 86 MiB each, no
     * band's wave within half the L2, so besides B once a band, A crosses
     * DRAM once a wave of its band */
    g = epilogue_graph(4096, 11008, 4096, "");
    p = plan_of(g, "sm_90");
    k = kernel_with(p, MCIR_TEMPLATE_MATMUL);
    mcir_cost_kernel(k, p->target, &gen, &c);
    const int64_t B = 11008ll * 4096 * 2, gm = tile(&k->tiling, "group_m") * tile(&k->tiling, "cluster");
    const int64_t bands = cdiv(cdiv(4096, tile(&k->tiling, "M")), gm);
    ck_assert_int_gt(gm, 1);
    ck_assert_msg(c.l2_spill_bytes > B * (bands - 1), "spill %lld, B's re-reads alone %lld", (long long)c.l2_spill_bytes,
                  (long long)(B * (bands - 1)));
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

static mcir_graph *layernorm_graph(int rows, int width) {
    char json[1024];
    snprintf(json, sizeof json,
             "{\"mcir\":1,\"name\":\"ln\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[%d,%d]}],"
             "\"weights\":[{\"name\":\"g\",\"dtype\":\"f32\",\"shape\":[%d]},{\"name\":\"b\",\"dtype\":\"f32\",\"shape\":[%d]}],"
             "\"nodes\":[{\"name\":\"ln\",\"op\":\"layernorm\",\"inputs\":[\"x\",\"g\",\"b\"],\"outputs\":[\"y\"],"
             "\"attrs\":{\"axis\":-1,\"eps\":1e-5}}],\"outputs\":[\"y\"]}",
             rows, width, width, width);
    return graph_of(json);
}

/* templates/norm.cuh: the row once (in registers, cached in shared
 * memory, or on sm_90 split over a cluster's caches) or twice (too wide to
 * cache on sm_80: then layernorm's shift, one value of X a thread and
 * row); gamma and beta at every element. */
START_TEST(norm_rereads_rows_too_wide_to_cache) {
    static const struct { int rows, width, passes, shift_threads; const char *arch; } cases[] = {
        {64, 768, 1, 0, "sm_90"},   {16, 8192, 1, 0, "sm_90"},  {4, 16384, 1, 0, "sm_90"},
        {2, 40000, 1, 0, "sm_90"},  {2, 70000, 1, 0, "sm_90"},  {2, 70000, 2, 512, "sm_80"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mcir_graph *g = layernorm_graph(cases[i].rows, cases[i].width);
        mcir_plan *p = plan_of(g, cases[i].arch);
        mcir_kernel_cost c;
        mcir_cost_kernel(kernel_with(p, MCIR_TEMPLATE_STREAMING_NORM), p->target, NULL, &c);
        int64_t n = (int64_t)cases[i].rows * cases[i].width;
        ck_assert_int_eq(c.global_bytes,
                         n * 4 * (cases[i].passes + 2 + 1) + (int64_t)cases[i].rows * cases[i].shift_threads * 4);
        ck_assert_int_eq(c.hbm_bytes, 2 * n * 4 + 2 * cases[i].width * 4);
        ck_assert_int_eq(c.launches, 1);
        mcir_plan_free(p);
        mcir_graph_free(g);
    }
}
END_TEST

/* The issue bound: every target issues 4 warp instructions a clock per SM
 * at its boost clock; a memory-bound kernel takes the slowest of its
 * memory, compute and issue times. An f16 softmax over rows of 1024
 * issues 52.6 weighted instructions per 16 bytes (cost.c's table, the
 * SASS audit of the two-pass kernel, #42; 383.4 before): under half its
 * DRAM time; so does a plain f32 add a vector at a time (8.0; 19.7
 * scalar). A kernel the table prices issue-bound takes its issue time. */
START_TEST(issue_bound_kernels) {
    for (const mcir_target *const *t = mcir_target_list(); *t; t++) {
        ck_assert_msg((*t)->clock_ghz > 1 && (*t)->clock_ghz < 3, "%s", (*t)->name);
        ck_assert_int_eq((*t)->issue_per_clock, 4);
        /* the f32 peak is the clock's: SMs x FP32 lanes x 2 flops x clock */
        double lanes = (*t)->f32_fma_tflops * 1e3 / (2.0 * (*t)->sm_count * (*t)->clock_ghz);
        ck_assert_msg(fabs(lanes - ((*t)->sm == 80 ? 64 : 128)) < 1.0, "%s: %.1f lanes", (*t)->name, lanes);
    }
    const mcir_target *h100 = mcir_target_find("sm_90");
    ck_assert_double_eq_tol(mcir_issue_us(h100, 132 * 4 * 1.98e3), 1.0, 1e-12);
    mcir_graph *g = graph_of("{\"mcir\":1,\"name\":\"sm\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f16\","
                             "\"shape\":[32768,1024]}],\"nodes\":[{\"name\":\"n\",\"op\":\"softmax\",\"inputs\":[\"x\"],"
                             "\"outputs\":[\"y\"],\"attrs\":{\"axis\":-1}}],\"outputs\":[\"y\"]}");
    mcir_plan *p = plan_of(g, "sm_90");
    mcir_kernel_cost c;
    mcir_cost_kernel(kernel_with(p, MCIR_TEMPLATE_STREAMING_NORM), p->target, NULL, &c);
    ck_assert_double_eq_tol(c.issue_us, mcir_issue_us(h100, 52.6 * (double)c.global_bytes / 512.0), 1e-9);
    ck_assert(c.issue_us < 0.5 * c.memory_us);
    ck_assert_double_eq_tol(c.modelled_us, fmax(c.memory_us, c.compute_us) + h100->launch_us, 1e-9);
    mcir_plan_cost pc;
    mcir_cost_plan(p, &pc);
    ck_assert_int_eq(pc.issue_bound, 0);
    /* issue-bound where the issue rate is lower: the same kernel on a
     * target of an eighth the clock */
    mcir_target slow = *h100;
    slow.clock_ghz /= 8;
    mcir_cost_kernel(kernel_with(p, MCIR_TEMPLATE_STREAMING_NORM), &slow, NULL, &c);
    ck_assert(c.issue_us > c.memory_us && c.issue_us > c.compute_us);
    ck_assert_double_eq_tol(c.modelled_us, c.issue_us + slow.launch_us, 1e-9);
    mcir_plan_free(p);
    mcir_graph_free(g);
    g = graph_of("{\"mcir\":1,\"name\":\"add\",\"inputs\":[{\"name\":\"a\",\"dtype\":\"f32\",\"shape\":[4096,4096]},"
                 "{\"name\":\"b\",\"dtype\":\"f32\",\"shape\":[4096,4096]}],\"nodes\":[{\"name\":\"n\",\"op\":\"add\","
                 "\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}");
    p = plan_of(g, "sm_90");
    mcir_cost_kernel(kernel_with(p, MCIR_TEMPLATE_ELEMENTWISE), p->target, NULL, &c);
    ck_assert_double_eq_tol(c.issue_us, mcir_issue_us(h100, 8.0 * (double)c.global_bytes / 512.0), 1e-9);
    ck_assert(c.issue_us > 0 && c.issue_us < c.memory_us);
    ck_assert_double_eq_tol(c.modelled_us, fmax(c.memory_us, c.compute_us) + h100->launch_us, 1e-9);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

static mcir_graph *attention_graph(const char *dt, int nq, int nk, int d, bool causal) {
    char json[1024];
    snprintf(json, sizeof json,
             "{\"mcir\":1,\"name\":\"att\",\"inputs\":["
             "{\"name\":\"q\",\"dtype\":\"%s\",\"shape\":[2,4,%d,%d]},"
             "{\"name\":\"k\",\"dtype\":\"%s\",\"shape\":[2,4,%d,%d]},"
             "{\"name\":\"v\",\"dtype\":\"%s\",\"shape\":[2,4,%d,%d]}],"
             "\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],"
             "\"outputs\":[\"o\"],\"attrs\":{\"causal\":%s}}],\"outputs\":[\"o\"]}",
             dt, nq, d, dt, nk, d, dt, nk, d, causal ? "true" : "false");
    return graph_of(json);
}

/* Streaming attention re-reads K and V once per Q tile; causal tiles stop
 * at the diagonal; f16 runs on tensor cores. */
START_TEST(attention_rereads_kv_per_q_tile) {
    mcir_graph *g = attention_graph("f16", 256, 256, 64, false);
    mcir_plan *p = plan_of(g, "sm_80");
    const mcir_kernel_plan *k = kernel_with(p, MCIR_TEMPLATE_STREAMING_ATTENTION);
    mcir_kernel_cost full;
    mcir_cost_kernel(k, p->target, NULL, &full);
    ck_assert_str_eq(full.unit, "f16_tensor_core");
    int64_t qkvo = 8 * 256 * 64 * 2;   /* one of Q, K, V, O */
    ck_assert_int_eq(full.hbm_bytes, 4 * qkvo);
    /* global = Q + O + (K + V) x Q tiles: solve for the tiles */
    int64_t qtiles = (full.global_bytes - 2 * qkvo) / (2 * qkvo);
    ck_assert_int_eq(full.global_bytes, 2 * qkvo + 2 * qkvo * qtiles);
    ck_assert_int_ge(qtiles, 2);
    ck_assert_double_eq(full.flops, 8.0 * 256 * 256 * 2 * 128);
    mcir_plan_free(p);
    mcir_graph_free(g);

    g = attention_graph("f16", 256, 256, 64, true);
    p = plan_of(g, "sm_80");
    mcir_kernel_cost causal;
    mcir_cost_kernel(kernel_with(p, MCIR_TEMPLATE_STREAMING_ATTENTION), p->target, NULL, &causal);
    ck_assert_int_lt(causal.global_bytes, full.global_bytes);
    ck_assert_double_lt(causal.flops, 0.8 * full.flops);   /* 128-row Q tiles: 3/4 */
    ck_assert_int_eq(causal.hbm_bytes, full.hbm_bytes);
    mcir_plan_free(p);
    mcir_graph_free(g);

    g = attention_graph("f32", 100, 70, 40, false);   /* FMA path, ragged tiles */
    p = plan_of(g, "sm_90");
    mcir_kernel_cost fma;
    mcir_cost_kernel(kernel_with(p, MCIR_TEMPLATE_STREAMING_ATTENTION), p->target, NULL, &fma);
    ck_assert_str_eq(fma.unit, "f32_fma");
    ck_assert_double_eq(fma.flops, 8.0 * 100 * 70 * 2 * 80);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

static mcir_graph *attention_graph_bh(const char *dt, int b, int h, int n, int d, bool causal) {
    char json[1024];
    snprintf(json, sizeof json,
             "{\"mcir\":1,\"name\":\"att\",\"inputs\":["
             "{\"name\":\"q\",\"dtype\":\"%s\",\"shape\":[%d,%d,%d,%d]},"
             "{\"name\":\"k\",\"dtype\":\"%s\",\"shape\":[%d,%d,%d,%d]},"
             "{\"name\":\"v\",\"dtype\":\"%s\",\"shape\":[%d,%d,%d,%d]}],"
             "\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],"
             "\"outputs\":[\"o\"],\"attrs\":{\"causal\":%s}}],\"outputs\":[\"o\"]}",
             dt, b, h, n, d, dt, b, h, n, d, dt, b, h, n, d, causal ? "true" : "false");
    return graph_of(json);
}

/* The sm_90a attention priced by its pipeline (cost.c): per K/V tile of a
 * block the longest of its tensor, issue and L2 clocks; the persistent
 * blocks (one per SM) walk the items; never above the tensor fraction of
 * the peak; causal about half the work; short sequences pay their
 * per-item tiles. */
START_TEST(attention_sm90_pipeline) {
    const mcir_target *h100 = mcir_target_find("sm_90");
    double tf[2][2];   /* [causal][seq 512, 4096] */
    for (int causal = 0; causal < 2; causal++)
        for (int si = 0; si < 2; si++) {
            int n = si ? 4096 : 512, b = 16384 / n;
            mcir_graph *g = attention_graph_bh("f16", b, 16, n, 128, causal);
            mcir_plan *p = plan_of(g, "sm_90");
            const mcir_kernel_plan *k = kernel_with(p, MCIR_TEMPLATE_STREAMING_ATTENTION);
            ck_assert_msg(strstr(k->tiling.reason, "sm_90a path") && strstr(k->tiling.reason, "persistent"), "%s",
                          k->tiling.reason);
            int64_t items = (int64_t)b * 16 * (n / 128);
            ck_assert_int_eq(k->grid[0], items < h100->sm_count ? items : h100->sm_count);
            mcir_kernel_cost c;
            mcir_cost_kernel(k, h100, NULL, &c);
            ck_assert(c.tile_tensor_clk > 0 && c.tile_issue_clk > 0 && c.tile_l2_clk > 0);
            ck_assert_double_eq(c.tile_clk, fmax(c.tile_tensor_clk, fmax(c.tile_issue_clk, c.tile_l2_clk)));
            ck_assert_double_eq_tol(c.items_per_block, (double)items / (double)k->grid[0], 1e-9);
            /* d 128, BN 128, two groups: the tensor clocks of 2 x 4·64·128·128 flops */
            double per_clk = h100->f16_tc_tflops * 1e12 / (h100->sm_count * h100->clock_ghz * 1e9);
            ck_assert_double_eq_tol(c.tile_tensor_clk, 2 * 4.0 * 64 * 128 * 128 / per_clk / 0.78, 1e-6);
            tf[causal][si] = c.flops / (c.compute_us * 1e6);
            ck_assert_double_le(tf[causal][si], 0.78 * h100->f16_tc_tflops);
            ck_assert_double_gt(c.modelled_us, c.memory_us);   /* compute-bound */
            mcir_plan_free(p);
            mcir_graph_free(g);
        }
    ck_assert_double_lt(tf[0][0], tf[0][1]);   /* the per-item tiles weigh more at 512 */
    ck_assert_double_lt(tf[1][0], tf[1][1]);
    ck_assert_double_lt(tf[1][1], tf[0][1]);   /* causal: the diagonal tiles' share */
    ck_assert_double_gt(tf[1][1], 0.8 * tf[0][1]);
}
END_TEST

/* Split-KV decode: the kernel loads Q once per split, streams each split's
 * keys, writes f32 partials (O row, max, sum) to the scratch; the merge is
 * a second launch that reads them back (every thread each split's max
 * twice and sum, then per column each split's max and partial) and writes
 * O. The scratch crosses DRAM twice (staging). */
START_TEST(split_kv_counts_the_merge) {
    mcir_graph *g = attention_graph("f16", 1, 4096, 64, false);
    mcir_plan *p = plan_of(g, "sm_80");
    const mcir_kernel_plan *k = kernel_with(p, MCIR_TEMPLATE_STREAMING_ATTENTION);
    int64_t chunk = tile(&k->tiling, "kv_split");
    ck_assert_msg(chunk > 0 && chunk < 4096, "%s", k->tiling.reason);
    int64_t splits = cdiv(4096, chunk), rows = 8;   /* batch*heads x Nq */
    int64_t scratch = rows * splits * (64 + 2) * 4, q = 8 * 64 * 2, kv = 8 * 4096 * 64 * 2;
    ck_assert_int_eq(k->scratch_bytes, scratch);
    mcir_kernel_cost c;
    mcir_cost_kernel(k, p->target, NULL, &c);
    ck_assert_int_eq(c.launches, 2);
    ck_assert_int_eq(c.staging_bytes, 2 * scratch);
    ck_assert_int_eq(c.l2_spill_bytes, 0);
    ck_assert_int_eq(c.hbm_bytes, q + 2 * kv + q + 2 * scratch);
    int64_t main_global = splits * q + 2 * kv + scratch;
    int64_t merge_global = rows * (64 * 3 * splits * 4 + 64 * splits * 8 + 64 * 2);   /* 64 merge threads */
    ck_assert_int_eq(c.global_bytes, main_global + merge_global);
    ck_assert_double_eq(c.flops, 8.0 * 4096 * 2 * 128 + (double)rows * (double)splits * (2 * 64 + 3));
    ck_assert_str_eq(c.unit, "f16_tensor_core");
    ck_assert_double_eq_tol(c.launch_us, 2 * p->target->launch_us, 1e-9);
    /* the same graph unsplit (Nk a single chunk) is one launch, no staging */
    mcir_graph *g2 = attention_graph("f16", 256, 4096, 64, false);
    mcir_plan *p2 = plan_of(g2, "sm_80");
    const mcir_kernel_plan *k2 = kernel_with(p2, MCIR_TEMPLATE_STREAMING_ATTENTION);
    ck_assert_int_eq(tile(&k2->tiling, "kv_split"), 0);
    mcir_kernel_cost c2;
    mcir_cost_kernel(k2, p2->target, NULL, &c2);
    ck_assert_int_eq(c2.launches, 1);
    ck_assert_int_eq(c2.staging_bytes, 0);
    mcir_plan_free(p2);
    mcir_graph_free(g2);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

/* A fused elementwise chain requests each read once per path that reaches
 * it (no common subexpressions in the value functions of codegen/emit.c);
 * DRAM sees each tensor once. */
START_TEST(elementwise_chain_counts_paths) {
    mcir_graph *g = graph_of(
        "{\"mcir\":1,\"name\":\"ew\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[1000]}],"
        "\"nodes\":[{\"name\":\"e\",\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"t\"]},"
        "{\"name\":\"m\",\"op\":\"mul\",\"inputs\":[\"t\",\"x\"],\"outputs\":[\"y\"]}],"
        "\"outputs\":[\"y\"]}");
    fuse(g, (const char *const[]){"e", "m"}, 2);
    mcir_plan *p = plan_of(g, "sm_90");
    ck_assert_int_eq(p->n_kernels, 1);
    mcir_kernel_cost c;
    mcir_cost_kernel(&p->kernels[0], p->target, NULL, &c);
    ck_assert_int_eq(c.global_bytes, 1000 * (4 + 4 + 4));   /* x twice, y once */
    ck_assert_int_eq(c.hbm_bytes, 1000 * 8);
    ck_assert_double_eq(c.flops, 2000);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

/* Integer ops count by their i64 cost on 32-bit units: a chain of i64
 * add (2), mul (3), div (40) and left_shift (4) is 49 slots per element,
 * the same chain on f32 (add, mul, div, and a pow standing in) 4; a cumsum
 * of i64 over 10 adds (10 + 1) / 2 loads and terms per element. */
START_TEST(integer_ops_count_their_cost) {
    static const char *const dts[] = {"i64", "f32"};
    for (int k = 0; k < 2; k++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"mcir\":1,\"name\":\"ints\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"%s\",\"shape\":[100]}],"
                 "\"nodes\":[{\"name\":\"a\",\"op\":\"add\",\"inputs\":[\"x\",\"x\"],\"outputs\":[\"t1\"]},"
                 "{\"name\":\"m\",\"op\":\"mul\",\"inputs\":[\"t1\",\"x\"],\"outputs\":[\"t2\"]},"
                 "{\"name\":\"d\",\"op\":\"div\",\"inputs\":[\"t2\",\"x\"],\"outputs\":[\"t3\"]},"
                 "{\"name\":\"s\",\"op\":\"%s\",\"inputs\":[\"t3\",\"x\"],\"outputs\":[\"y\"]}],"
                 "\"outputs\":[\"y\"]}", dts[k], k == 0 ? "left_shift" : "pow");
        mcir_graph *g = graph_of(json);
        fuse(g, (const char *const[]){"a", "m", "d", "s"}, 4);
        mcir_plan *p = plan_of(g, "sm_90");
        ck_assert_int_eq(p->n_kernels, 1);
        mcir_kernel_cost c;
        mcir_cost_kernel(&p->kernels[0], p->target, NULL, &c);
        ck_assert_double_eq(c.flops, k == 0 ? 100 * 49 : 100 * 4);
        mcir_plan_free(p);
        mcir_graph_free(g);
    }
    mcir_graph *g = graph_of(
        "{\"mcir\":1,\"name\":\"cs\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"i64\",\"shape\":[4,10]}],"
        "\"nodes\":[{\"name\":\"c\",\"op\":\"cumsum\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
        "\"attrs\":{\"axis\":1}}],\"outputs\":[\"y\"]}");
    mcir_plan *p = plan_of(g, "sm_90");
    mcir_kernel_cost c;
    mcir_cost_kernel(&p->kernels[0], p->target, NULL, &c);
    ck_assert_double_eq(c.flops, 40 * 5.5 * 2);
    ck_assert_int_eq(c.global_bytes, (int64_t)(40 * 5.5 * 8) + 40 * 8);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

/* A kernel reading a part of a tensor (a slice, the parts of a folded
 * split) moves that part across DRAM, once however many reads name it. */
START_TEST(reads_of_a_part_count_the_part) {
    mcir_graph *g = graph_of(
        "{\"mcir\":1,\"name\":\"part\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[4,1000]}],"
        "\"nodes\":[{\"name\":\"s\",\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"t\"],"
        "\"attrs\":{\"axis\":1,\"start\":0,\"end\":250}},"
        "{\"name\":\"e\",\"op\":\"exp\",\"inputs\":[\"t\"],\"outputs\":[\"y\"]}],"
        "\"outputs\":[\"y\"]}");
    fuse(g, (const char *const[]){"s", "e"}, 2);
    mcir_plan *p = plan_of(g, "sm_90");
    ck_assert_int_eq(p->n_kernels, 1);
    mcir_kernel_cost c;
    mcir_cost_kernel(&p->kernels[0], p->target, NULL, &c);
    ck_assert_int_eq(c.hbm_bytes, 2 * 4 * 250 * 4);
    ck_assert_int_eq(c.global_bytes, 2 * 4 * 250 * 4);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

/* Totals: the sum over kernels; compulsory = inputs and weights read once
 * plus outputs written once; unfused as the pipeline set it. */
START_TEST(plan_totals_and_compulsory_bytes) {
    mcir_graph *g = matmul_graph("f32", 128, 256, 192, true);
    mcir_plan *p = plan_of(g, "sm_90");
    mcir_plan_cost t;
    mcir_cost_plan(p, &t);
    ck_assert_int_eq(t.compulsory_bytes, (128 * 256 + 256 * 192 + 192 + 128 * 192) * 4);
    ck_assert_int_eq(t.launches, 1);   /* matmul + bias: one cuBLASLt call */
    ck_assert_int_eq(t.hbm_bytes, t.compulsory_bytes);
    ck_assert_int_eq(t.unfused_hbm_bytes, 0);
    p->unfused_hbm_bytes = 12345;
    mcir_cost_plan(p, &t);
    ck_assert_int_eq(t.unfused_hbm_bytes, 12345);

    /* the plan artifact carries the same figures */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert(mcir_plan_write_json(p, f));
    fclose(f);
    json_t *root = json_loads(buf, 0, NULL);
    ck_assert_ptr_nonnull(root);
    json_t *tot = json_object_get(root, "totals");
    ck_assert_int_eq(json_integer_value(json_object_get(tot, "hbm_bytes")), t.hbm_bytes);
    ck_assert_int_eq(json_integer_value(json_object_get(tot, "compulsory_bytes")), t.compulsory_bytes);
    ck_assert_int_eq(json_integer_value(json_object_get(tot, "unfused_hbm_bytes")), 12345);
    json_t *k0 = json_array_get(json_object_get(root, "kernels"), 0);
    static const char *const fields[] = {"hbm_bytes", "global_bytes", "flops", "launches",
                                         "modelled_us", "cost_model"};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        ck_assert_msg(json_object_get(k0, fields[i]), "kernel lacks %s", fields[i]);
    ck_assert_ptr_nonnull(json_object_get(json_object_get(k0, "cost_model"), "issue_us"));
    json_decref(root);
    free(buf);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

#ifdef MCIR_HAVE_PIPELINE
/* The examples as mcirc compiles them: fused traffic between compulsory
 * and the unfused baseline, which costs more launches' worth of bytes. */
START_TEST(examples_fused_move_fewer_bytes_than_unfused) {
    static const char *const examples[] = {"gpt2_block", "llama_block", "bert_layer"};
    for (size_t i = 0; i < sizeof examples / sizeof *examples; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/examples/%s/graph.json", test_source_dir(), examples[i]);
        mcir_compilation c;
        cgt_compile_path(path, (cgt_pipe){0}, &c);
        mcir_plan_cost t;
        mcir_cost_plan(c.plan, &t);
        ck_assert_int_ge(t.launches, c.plan->n_kernels);
        ck_assert_int_ge(t.hbm_bytes, t.compulsory_bytes);
        ck_assert_msg(t.unfused_hbm_bytes > t.hbm_bytes, "%s: unfused %lld <= fused %lld",
                      examples[i], (long long)t.unfused_hbm_bytes, (long long)t.hbm_bytes);
        ck_assert_int_ge(t.global_bytes, t.hbm_bytes - 4 * t.compulsory_bytes);
        ck_assert(t.modelled_us > t.launches * c.target->launch_us);
        fprintf(stderr, "  %-12s %2d launches, hbm %.2fx compulsory (unfused %.2fx), %.1f us\n",
                examples[i], t.launches, (double)t.hbm_bytes / (double)t.compulsory_bytes,
                (double)t.unfused_hbm_bytes / (double)t.compulsory_bytes, t.modelled_us);
        mcir_compilation_free(&c);
    }
}
END_TEST
#endif

static Suite *suite(void) {
    Suite *s = suite_create("cost");
    TCase *tc = tcase_create("model");
    tcase_add_test(tc, targets_have_a_roofline);
    tcase_add_test(tc, bare_matmul_is_one_cublas_launch);
    tcase_add_test(tc, integer_ops_count_their_cost);
    tcase_add_test(tc, matmul_bias_epilogue_is_one_library_call);
    tcase_add_test(tc, candidate_tiles_change_the_rereads);
    tcase_add_test(tc, rereads_beyond_l2_spill_to_dram);
    tcase_add_test(tc, sm90_gemm_epilogue_by_instruction_mix);
    tcase_add_test(tc, norm_rereads_rows_too_wide_to_cache);
    tcase_add_test(tc, issue_bound_kernels);
    tcase_add_test(tc, attention_rereads_kv_per_q_tile);
    tcase_add_test(tc, attention_sm90_pipeline);
    tcase_add_test(tc, split_kv_counts_the_merge);
    tcase_add_test(tc, elementwise_chain_counts_paths);
    tcase_add_test(tc, reads_of_a_part_count_the_part);
    tcase_add_test(tc, plan_totals_and_compulsory_bytes);
#ifdef MCIR_HAVE_PIPELINE
    tcase_add_test(tc, examples_fused_move_fewer_bytes_than_unfused);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_main(suite()); }
