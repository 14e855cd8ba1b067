/*
 * test_rewrites.c — the rewrite engine: every built-in rule on small
 * graphs, the negative cases with the check that must reject them, user
 * rules from YAML, the example models (fused forms and node counts,
 * checked against the reference interpreter), determinism, and the golden
 * cases of tests/golden/ (MCIR_UPDATE_GOLDEN=1 rewrites the expected
 * files).
 */
#include <check.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "rewrites/rewrites.h"
#include "test_util.h"

static mcir_catalog *default_catalog(const char *extra) {
    mcir_diag d = mcir_diag_stderr();
    mcir_catalog *c = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(c, &d));
    if (extra) ck_assert(mcir_catalog_load_file(c, test_path(extra), &d));
    return c;
}

/* A compiled case: the graph as read, rewritten, and its trace. */
typedef struct rewritten {
    mcir_graph *before, *g;
    mcir_trace *trace;
} rewritten;

static rewritten rewrite_graph(mcir_graph *g, const mcir_catalog *c, const char *arch) {
    mcir_diag d = mcir_diag_stderr();
    rewritten r = {mcir_graph_clone(g), g, mcir_trace_new()};
    ck_assert(mcir_rewrite_run(g, c, arch ? mcir_target_find(arch) : NULL, r.trace, &d));
    ck_assert(mcir_graph_verify(g, &d));
    return r;
}

static rewritten rewrite_file(const char *rel, const mcir_catalog *c) {
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g = mcir_graph_read_json(test_path(rel), &d);
    ck_assert_msg(g != NULL, "cannot read %s", rel);
    return rewrite_graph(g, c, NULL);
}

static rewritten rewrite_text(const char *json, const mcir_catalog *c) {
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g = mcir_graph_read_json_string(json, "test.json", &d);
    ck_assert_msg(g != NULL, "bad test graph");
    return rewrite_graph(g, c, NULL);
}

static void rewritten_free(rewritten *r) {
    mcir_graph_free(r->before);
    mcir_graph_free(r->g);
    mcir_trace_free(r->trace);
}

static void assert_verifies(const rewritten *r) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    mcir_diag d = mcir_diag_stderr();
    bool ok = mcir_rewrite_verify(r->before, r->g, 0, f, &d);
    fclose(f);
    ck_assert_msg(ok, "verify failed: %s", text);
    ck_assert(strstr(text, "output ") && strstr(text, "max abs err"));
    free(text);
}

static int count_op(const mcir_graph *g, mcir_op op) {
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) k += !g->nodes[i]->dead && g->nodes[i]->op == op;
    return k;
}

static mcir_node *first_op(const mcir_graph *g, mcir_op op) {
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead && g->nodes[i]->op == op) return g->nodes[i];
    return NULL;
}

/* The first trace record of a rule with a decision, or NULL. */
static json_t *find_record(const mcir_trace *t, const char *rule, const char *decision) {
    for (int i = 0; i < mcir_trace_count(t); i++) {
        json_t *r = mcir_trace_get(t, i);
        if (strcmp(json_string_value(json_object_get(r, "rule")), rule) == 0 &&
            strcmp(json_string_value(json_object_get(r, "decision")), decision) == 0)
            return r;
    }
    return NULL;
}

/* The failed check of a record and its detail. */
static const char *failed_check(const json_t *r, const char **detail) {
    const json_t *l = json_object_get(r, "legality");
    for (size_t i = 0; i < json_array_size(l); i++) {
        const json_t *c = json_array_get(l, i);
        if (!json_is_true(json_object_get(c, "ok"))) {
            if (detail) *detail = json_string_value(json_object_get(c, "detail"));
            return json_string_value(json_object_get(c, "check"));
        }
    }
    return NULL;
}

/* ------------------------------------------------------- small graphs */

/* q, k, v [1,2,8,4]; K through transpose [0,1,3,2]; scores / 2; mask. */
static char *attention_json(const char *mask_decl, const char *mask_name,
                            const char *extra_outputs, const char *softmax_axis) {
    static char buf[8192];
    snprintf(buf, sizeof buf,
             "{\"mcir\": 1, \"name\": \"t\","
             " \"inputs\": [{\"name\": \"q\", \"dtype\": \"f32\", \"shape\": [1, 2, 8, 4]},"
             "  {\"name\": \"k\", \"dtype\": \"f32\", \"shape\": [1, 2, 8, 4]},"
             "  {\"name\": \"v\", \"dtype\": \"f32\", \"shape\": [1, 2, 8, 4]}%s],"
             " \"weights\": [{\"name\": \"c\", \"dtype\": \"f32\", \"shape\": [], \"value\": 2.0}],"
             " \"nodes\": ["
             "  {\"name\": \"kt\", \"op\": \"transpose\", \"inputs\": [\"k\"], \"outputs\": [\"kt.y\"],"
             "   \"attrs\": {\"perm\": [0, 1, 3, 2]}},"
             "  {\"name\": \"qk\", \"op\": \"matmul\", \"inputs\": [\"q\", \"kt.y\"], \"outputs\": [\"s\"]},"
             "  {\"name\": \"div\", \"op\": \"div\", \"inputs\": [\"s\", \"c\"], \"outputs\": [\"s2\"]},"
             "  {\"name\": \"mask\", \"op\": \"add\", \"inputs\": [\"s2\", \"%s\"], \"outputs\": [\"s3\"]},"
             "  {\"name\": \"sm\", \"op\": \"softmax\", \"inputs\": [\"s3\"], \"outputs\": [\"p\"],"
             "   \"attrs\": {\"axis\": %s}},"
             "  {\"name\": \"pv\", \"op\": \"matmul\", \"inputs\": [\"p\", \"v\"], \"outputs\": [\"y\"]}],"
             " \"outputs\": [\"y\"%s]}",
             mask_decl, mask_name, softmax_axis, extra_outputs);
    return buf;
}

START_TEST(test_attention_mask_input) {
    mcir_catalog *c = default_catalog(NULL);
    rewritten r = rewrite_text(
        attention_json(", {\"name\": \"m\", \"dtype\": \"f32\", \"shape\": [1, 1, 8, 8]}", "m", "",
                       "-1"),
        c);
    ck_assert_int_eq(mcir_graph_live_nodes(r.g), 1);
    mcir_node *a = first_op(r.g, MCIR_OP_ATTENTION);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(a->n_inputs, 4);
    ck_assert_str_eq(a->inputs[3]->name, "m");
    ck_assert_str_eq(a->inputs[1]->name, "k");
    ck_assert(!mcir_node_bool(a, "causal"));
    ck_assert(mcir_node_float(a, "scale") == 0.5);
    ck_assert_str_eq(a->outputs[0]->name, "y");
    ck_assert_str_eq(a->origin_rule, "attention_decomposed");
    ck_assert(mcir_node_has_property(a, "weighted_streaming_reduction"));
    json_t *rec = find_record(r.trace, "attention_decomposed", "applied");
    ck_assert_ptr_nonnull(rec);
    json_t *streaming = json_object_get(rec, "streaming");
    ck_assert_int_eq(json_array_size(streaming), 4);
    assert_verifies(&r);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

/* The scale on K (a div before a one-step transpose [0,2,3,1] straight
 * from [B,N,H,d]) and on Q (a scale op); V through transpose_b. */
START_TEST(test_attention_scale_on_k) {
    const char *json =
        "{\"mcir\": 1, \"inputs\": [{\"name\": \"q\", \"dtype\": \"f32\", \"shape\": [1, 2, 6, 4]},"
        " {\"name\": \"k\", \"dtype\": \"f32\", \"shape\": [1, 7, 2, 4]},"
        " {\"name\": \"vt\", \"dtype\": \"f32\", \"shape\": [1, 2, 3, 7]}],"
        " \"weights\": [{\"name\": \"c4\", \"dtype\": \"f32\", \"shape\": [1], \"value\": [4.0]}],"
        " \"nodes\": [{\"name\": \"ks\", \"op\": \"div\", \"inputs\": [\"k\", \"c4\"], \"outputs\": [\"ks.y\"]},"
        " {\"name\": \"kt\", \"op\": \"transpose\", \"inputs\": [\"ks.y\"], \"outputs\": [\"kt.y\"],"
        "  \"attrs\": {\"perm\": [0, 2, 3, 1]}},"
        " {\"name\": \"qs\", \"op\": \"scale\", \"inputs\": [\"q\"], \"outputs\": [\"qs.y\"],"
        "  \"attrs\": {\"value\": 3.0}},"
        " {\"name\": \"qk\", \"op\": \"matmul\", \"inputs\": [\"qs.y\", \"kt.y\"], \"outputs\": [\"s\"]},"
        " {\"name\": \"sm\", \"op\": \"softmax\", \"inputs\": [\"s\"], \"outputs\": [\"p\"]},"
        " {\"name\": \"pv\", \"op\": \"matmul\", \"inputs\": [\"p\", \"vt\"], \"outputs\": [\"y\"],"
        "  \"attrs\": {\"transpose_b\": true}}],"
        " \"outputs\": [\"y\"]}";
    mcir_catalog *c = default_catalog(NULL);
    rewritten r = rewrite_text(json, c);
    mcir_node *a = first_op(r.g, MCIR_OP_ATTENTION);
    ck_assert_ptr_nonnull(a);
    ck_assert(mcir_node_float(a, "scale") == 0.75);
    ck_assert_str_eq(a->inputs[0]->name, "q");
    /* K [1,7,2,4] -> [1,2,7,4] by one new transpose; V^T -> V likewise */
    ck_assert_int_eq(a->inputs[1]->producer->op, MCIR_OP_TRANSPOSE);
    ck_assert_int_eq(a->inputs[1]->shape[2], 7);
    ck_assert_int_eq(a->inputs[2]->producer->op, MCIR_OP_TRANSPOSE);
    ck_assert_int_eq(mcir_graph_live_nodes(r.g), 3);
    assert_verifies(&r);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

START_TEST(test_attention_scores_used_elsewhere) {
    mcir_catalog *c = default_catalog(NULL);
    /* the scaled scores are also returned */
    rewritten r = rewrite_text(
        attention_json(", {\"name\": \"m\", \"dtype\": \"f32\", \"shape\": [8, 8]}", "m",
                       ", \"s2\"", "-1"),
        c);
    ck_assert_int_eq(count_op(r.g, MCIR_OP_ATTENTION), 0);
    json_t *rec = find_record(r.trace, "attention_decomposed", "rejected");
    ck_assert_ptr_nonnull(rec);
    const char *detail;
    ck_assert_str_eq(failed_check(rec, &detail), "only_used_in_match");
    ck_assert(strstr(detail, "'s2' (Ss) is a graph output") != NULL);
    assert_verifies(&r);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

START_TEST(test_attention_softmax_not_last_axis) {
    mcir_catalog *c = default_catalog(NULL);
    rewritten r = rewrite_text(
        attention_json(", {\"name\": \"m\", \"dtype\": \"f32\", \"shape\": [8, 8]}", "m", "", "2"),
        c);
    ck_assert_int_eq(count_op(r.g, MCIR_OP_ATTENTION), 0);
    json_t *rec = find_record(r.trace, "attention_decomposed", "rejected");
    ck_assert_ptr_nonnull(rec);
    const char *detail;
    ck_assert_str_eq(failed_check(rec, &detail), "reduction_last_axis");
    ck_assert(strstr(detail, "not only the last axis") != NULL);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

START_TEST(test_attention_working_set_per_arch) {
    /* head dim 512 f32: fits sm_90's 227 KiB at a small tile, not sm_80's
     * 163 KiB */
    const char *json =
        "{\"mcir\": 1, \"inputs\": [{\"name\": \"q\", \"dtype\": \"f32\", \"shape\": [1, 4, 736]},"
        " {\"name\": \"k\", \"dtype\": \"f32\", \"shape\": [1, 4, 736]},"
        " {\"name\": \"v\", \"dtype\": \"f32\", \"shape\": [1, 4, 736]}],"
        " \"nodes\": [{\"name\": \"qk\", \"op\": \"matmul\", \"inputs\": [\"q\", \"k\"],"
        "  \"outputs\": [\"s\"], \"attrs\": {\"transpose_b\": true}},"
        " {\"name\": \"sm\", \"op\": \"softmax\", \"inputs\": [\"s\"], \"outputs\": [\"p\"]},"
        " {\"name\": \"pv\", \"op\": \"matmul\", \"inputs\": [\"p\", \"v\"], \"outputs\": [\"y\"]}],"
        " \"outputs\": [\"y\"]}";
    mcir_catalog *c = default_catalog(NULL);
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g80 = mcir_graph_read_json_string(json, "t.json", &d);
    rewritten r80 = rewrite_graph(g80, c, "sm_80");
    ck_assert_int_eq(count_op(r80.g, MCIR_OP_ATTENTION), 0);
    json_t *rec = find_record(r80.trace, "attention_decomposed", "rejected");
    ck_assert_ptr_nonnull(rec);
    const char *detail;
    ck_assert_str_eq(failed_check(rec, &detail), "fits_on_chip");
    ck_assert_msg(strstr(detail, "KiB > 163 KiB (sm_80") != NULL, "%s", detail);
    mcir_graph *g90 = mcir_graph_read_json_string(json, "t.json", &d);
    rewritten r90 = rewrite_graph(g90, c, "sm_90");
    ck_assert_int_eq(count_op(r90.g, MCIR_OP_ATTENTION), 1);
    assert_verifies(&r90);
    rewritten_free(&r80);
    rewritten_free(&r90);
    mcir_catalog_free(c);
}
END_TEST

/* prologue_pays: Llama-7B's SwiGLU down projection at 8192 tokens in bf16
 * keeps its prologue apart on sm_90 (the fused sm_90a template ran 4.4x
 * slower than silu*mul + cuBLAS on an H200) and fuses it on sm_80 (no
 * measurement says otherwise); at 64 tokens it stays apart too (bound by
 * the 90 MB weight either way, the fused product's compute at its
 * measured rate is the longer), while a small product fuses (one launch
 * less) */
static const char *swiglu_json(int tokens, int k, int n_out, char *buf, size_t n) {
    snprintf(buf, n,
             "{\"mcir\": 1, \"inputs\": [{\"name\": \"g\", \"dtype\": \"bf16\", \"shape\": [%d, %d]},"
             " {\"name\": \"u\", \"dtype\": \"bf16\", \"shape\": [%d, %d]}],"
             " \"weights\": [{\"name\": \"w\", \"dtype\": \"bf16\", \"shape\": [%d, %d]}],"
             " \"nodes\": [{\"name\": \"p1\", \"op\": \"silu\", \"inputs\": [\"g\"], \"outputs\": [\"sg\"]},"
             " {\"name\": \"p2\", \"op\": \"mul\", \"inputs\": [\"sg\", \"u\"], \"outputs\": [\"x\"]},"
             " {\"name\": \"mm\", \"op\": \"matmul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"y\"],"
             "  \"attrs\": {\"transpose_b\": true}}], \"outputs\": [\"y\"]}",
             tokens, k, tokens, k, n_out, k);
    return buf;
}

START_TEST(test_prologue_pays_per_arch) {
    mcir_catalog *c = default_catalog(NULL);
    mcir_diag d = mcir_diag_stderr();
    char buf[1200];
    static const struct { const char *arch; int tokens, k, n; bool fused; } cases[] = {
        {"sm_90", 8192, 11008, 4096, false}, {"sm_80", 8192, 11008, 4096, true},
        {"sm_90", 64, 11008, 4096, false}, {"sm_90", 64, 256, 256, true}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mcir_graph *g = mcir_graph_read_json_string(swiglu_json(cases[i].tokens, cases[i].k, cases[i].n, buf, sizeof buf), "t.json", &d);
        ck_assert_ptr_nonnull(g);
        rewritten r = rewrite_graph(g, c, cases[i].arch);
        json_t *rec = find_record(r.trace, "gemm_prologue", cases[i].fused ? "applied" : "rejected");
        ck_assert_msg(rec != NULL, "%s, %d tokens: gemm_prologue not %s", cases[i].arch, cases[i].tokens,
                      cases[i].fused ? "applied" : "rejected");
        if (!cases[i].fused) {
            const char *detail;
            ck_assert_str_eq(failed_check(rec, &detail), "prologue_pays");
            ck_assert_msg(strstr(detail, "> ") && strstr(detail, "materialised"), "%s", detail);
        }
        ck_assert_int_eq(mcir_graph_find_node(r.g, "p2")->group == mcir_graph_find_node(r.g, "mm")->group &&
                         mcir_graph_find_node(r.g, "mm")->group >= 0, cases[i].fused);
        rewritten_free(&r);
    }
    mcir_catalog_free(c);
}
END_TEST

/* glu_pays (the rule glu_matmul): Llama-7B's gate and up projections at
 * 16 tokens fuse on sm_90 (bound by the 180 MB of weights either way, one
 * launch and the [16, 22016] product's round trip saved); at 4096 tokens
 * they stay the library's product and an elementwise kernel (the generated
 * GEMM at its measured 58 % of peak against the library's 78 %); on sm_80
 * there is no measured rate to say otherwise: fused. Where fused, the
 * rewrite preserves meaning (the interleaved product and its halves, the
 * interpreter against the original graph), at a smaller size. */
static const char *glu_json(int tokens, int k, int f, char *buf, size_t n) {
    snprintf(buf, n,
             "{\"mcir\": 1, \"inputs\": [{\"name\": \"x\", \"dtype\": \"f16\", \"shape\": [%d, %d]}],"
             " \"weights\": [{\"name\": \"wg\", \"dtype\": \"f16\", \"shape\": [%d, %d]},"
             " {\"name\": \"wu\", \"dtype\": \"f16\", \"shape\": [%d, %d]}],"
             " \"nodes\": [{\"name\": \"gate\", \"op\": \"matmul\", \"inputs\": [\"x\", \"wg\"], \"outputs\": [\"g\"],"
             "  \"attrs\": {\"transpose_b\": true}},"
             " {\"name\": \"up\", \"op\": \"matmul\", \"inputs\": [\"x\", \"wu\"], \"outputs\": [\"u\"],"
             "  \"attrs\": {\"transpose_b\": true}},"
             " {\"name\": \"act\", \"op\": \"silu\", \"inputs\": [\"g\"], \"outputs\": [\"ga\"]},"
             " {\"name\": \"glu\", \"op\": \"mul\", \"inputs\": [\"ga\", \"u\"], \"outputs\": [\"h\"]}],"
             " \"outputs\": [\"h\"]}",
             tokens, k, f, k, f, k);
    return buf;
}

START_TEST(test_glu_pays_per_arch) {
    mcir_catalog *c = default_catalog(NULL);
    mcir_diag d = mcir_diag_stderr();
    char buf[1600];
    static const struct { const char *arch; int tokens, k, f; bool fused, verify; } cases[] = {
        {"sm_90", 16, 4096, 11008, true, false}, {"sm_90", 4096, 4096, 11008, false, false},
        {"sm_80", 4096, 1024, 2816, true, false}, {"sm_90", 64, 128, 256, true, true}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mcir_graph *g = mcir_graph_read_json_string(glu_json(cases[i].tokens, cases[i].k, cases[i].f, buf, sizeof buf),
                                                    "t.json", &d);
        ck_assert_ptr_nonnull(g);
        rewritten r = rewrite_graph(g, c, cases[i].arch);
        json_t *rec = find_record(r.trace, "glu_matmul", cases[i].fused ? "applied" : "rejected");
        ck_assert_msg(rec != NULL, "%s, %d tokens: glu_matmul not %s", cases[i].arch, cases[i].tokens,
                      cases[i].fused ? "applied" : "rejected");
        const char *detail = NULL;
        if (!cases[i].fused) {
            ck_assert_str_eq(failed_check(rec, &detail), "glu_pays");
            ck_assert_msg(strstr(detail, "> ") && strstr(detail, "apart"), "%s", detail);
        }
        /* fused: the interleaved product (apart, horizontal_matmul joins the
         * two projections into a concatenated one instead) */
        ck_assert_int_eq(mcir_graph_find_node(r.g, "glu.matmul") != NULL, cases[i].fused);
        ck_assert_int_eq(count_op(r.g, MCIR_OP_MATMUL), 1);
        if (cases[i].verify) assert_verifies(&r);
        rewritten_free(&r);
    }
    mcir_catalog_free(c);
}
END_TEST

/* norm_gamma_fold then glu_matmul on a Llama MLP in f16 (RMSNorm, gate and
 * up, SiLU · up, down): the norm's gamma folds into the gate's and up's
 * weights (one norm without gamma, shared), then the two projections over
 * the folded weights become the paired-epilogue GEMM; the down projection
 * reads no norm and keeps its weight; the interpreter agrees with the
 * original graph */
START_TEST(test_norm_gamma_fold_then_glu) {
    mcir_catalog *c = default_catalog(NULL);
    mcir_diag d = mcir_diag_stderr();
    static const char *json =
        "{\"mcir\": 1, \"inputs\": [{\"name\": \"x\", \"dtype\": \"f16\", \"shape\": [2, 24, 64]}],"
        " \"weights\": [{\"name\": \"gamma\", \"dtype\": \"f16\", \"shape\": [64]},"
        " {\"name\": \"wg\", \"dtype\": \"f16\", \"shape\": [128, 64]},"
        " {\"name\": \"wu\", \"dtype\": \"f16\", \"shape\": [128, 64]},"
        " {\"name\": \"wd\", \"dtype\": \"f16\", \"shape\": [64, 128]}],"
        " \"nodes\": [{\"name\": \"norm\", \"op\": \"rmsnorm\", \"inputs\": [\"x\", \"gamma\"], \"outputs\": [\"n\"]},"
        " {\"name\": \"gate\", \"op\": \"matmul\", \"inputs\": [\"n\", \"wg\"], \"outputs\": [\"g\"],"
        "  \"attrs\": {\"transpose_b\": true}},"
        " {\"name\": \"up\", \"op\": \"matmul\", \"inputs\": [\"n\", \"wu\"], \"outputs\": [\"u\"],"
        "  \"attrs\": {\"transpose_b\": true}},"
        " {\"name\": \"act\", \"op\": \"silu\", \"inputs\": [\"g\"], \"outputs\": [\"ga\"]},"
        " {\"name\": \"glu\", \"op\": \"mul\", \"inputs\": [\"ga\", \"u\"], \"outputs\": [\"h\"]},"
        " {\"name\": \"down\", \"op\": \"matmul\", \"inputs\": [\"h\", \"wd\"], \"outputs\": [\"y\"],"
        "  \"attrs\": {\"transpose_b\": true}}],"
        " \"outputs\": [\"y\"]}";
    mcir_graph *g = mcir_graph_read_json_string(json, "t.json", &d);
    ck_assert_ptr_nonnull(g);
    rewritten r = rewrite_graph(g, c, "sm_90");
    ck_assert_ptr_nonnull(find_record(r.trace, "norm_gamma_fold", "applied"));
    ck_assert_ptr_nonnull(find_record(r.trace, "glu_matmul", "applied"));
    ck_assert_int_eq(count_op(r.g, MCIR_OP_RMSNORM), 1);
    const mcir_node *norm = first_op(r.g, MCIR_OP_RMSNORM);
    ck_assert_str_eq(norm->name, "norm.unit");
    float ones[64];
    ck_assert(mcir_weight_values(norm->inputs[1], ones));
    for (int i = 0; i < 64; i++) ck_assert(ones[i] == 1.0f);
    ck_assert_int_eq(count_op(r.g, MCIR_OP_MATMUL), 2);   /* the paired-epilogue GEMM and the down projection */
    ck_assert_ptr_nonnull(mcir_graph_find_node(r.g, "glu.matmul"));
    ck_assert_str_eq(mcir_graph_find_node(r.g, "down")->inputs[1]->name, "wd");
    assert_verifies(&r);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

/* prologue_pays for a scale per row of A ([M, 1]: a dequantisation scale,
 * a row norm): the sm_90a template reads x as A and scales the product's
 * rows at the epilogue, at its plain rate, priced as its plan prices it
 * (the tiles it picks, padded, in waves). A GQA key projection (8192
 * tokens, 4096 -> 1024) fuses it: the library's extra pass over A costs
 * more than its better rate saves. Llama-7B's down projection does not:
 * at 64 tokens one wave of 64-row tiles fills half the SMs (the model
 * priced it at the whole GPU's rate before and fused it), at 8192 the
 * library's rate wins over the pass */
START_TEST(test_prologue_pays_row_scale) {
    mcir_catalog *c = default_catalog(NULL);
    mcir_diag d = mcir_diag_stderr();
    char buf[1200];
    static const struct {
        int tokens, k, n;
        bool fused;
    } cases[] = {{8192, 4096, 1024, true}, {64, 11008, 4096, false}, {8192, 11008, 4096, false}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const int tokens = cases[i].tokens;
        snprintf(buf, sizeof buf,
                 "{\"mcir\": 1, \"inputs\": [{\"name\": \"x\", \"dtype\": \"bf16\", \"shape\": [%d, %d]},"
                 " {\"name\": \"s\", \"dtype\": \"bf16\", \"shape\": [%d, 1]}],"
                 " \"weights\": [{\"name\": \"w\", \"dtype\": \"bf16\", \"shape\": [%d, %d]}],"
                 " \"nodes\": [{\"name\": \"p2\", \"op\": \"mul\", \"inputs\": [\"x\", \"s\"], \"outputs\": [\"a\"]},"
                 " {\"name\": \"mm\", \"op\": \"matmul\", \"inputs\": [\"a\", \"w\"], \"outputs\": [\"y\"],"
                 "  \"attrs\": {\"transpose_b\": true}}], \"outputs\": [\"y\"]}",
                 tokens, cases[i].k, tokens, cases[i].n, cases[i].k);
        mcir_graph *g = mcir_graph_read_json_string(buf, "t.json", &d);
        ck_assert_ptr_nonnull(g);
        rewritten r = rewrite_graph(g, c, "sm_90");
        json_t *rec = find_record(r.trace, "gemm_prologue", cases[i].fused ? "applied" : "rejected");
        ck_assert_msg(rec != NULL, "%d x %d -> %d: gemm_prologue not %s", tokens, cases[i].k, cases[i].n,
                      cases[i].fused ? "applied" : "rejected");
        const char *detail = NULL;
        if (!cases[i].fused) {
            ck_assert_str_eq(failed_check(rec, &detail), "prologue_pays");
            ck_assert_msg(strstr(detail, "> ") && strstr(detail, "materialised"), "%s", detail);
        }
        ck_assert_int_eq(mcir_graph_find_node(r.g, "p2")->group == mcir_graph_find_node(r.g, "mm")->group &&
                         mcir_graph_find_node(r.g, "mm")->group >= 0, cases[i].fused);
        rewritten_free(&r);
    }
    mcir_catalog_free(c);
}
END_TEST

/* a cast into a matmul's A: fused on sm_90 from the other 16-bit dtype
 * and from f32 (the sm_90a template converts the leaf's boxes; an f32
 * leaf's read priced at its 4 bytes an element) where the pass it saves
 * outweighs the prologue's rate: a narrow product over many rows (16384 x
 * 1024 -> 64); kept apart on sm_80 (no template converts it there) and
 * where it does not pay: 16 tokens of a 4096 x 4096 projection (priced as
 * the plan prices it: 64-row tiles, a wave on half the SMs; 50.5 us fused
 * against 16.2 apart), and Llama-7B's down projection over 8192 tokens,
 * where the library's rate wins even over the cast's extra pass (both
 * times traced) */
START_TEST(test_prologue_pays_cast) {
    mcir_catalog *c = default_catalog(NULL);
    mcir_diag d = mcir_diag_stderr();
    char buf[1200];
    static const struct {
        const char *arch, *from;
        int m, k, n;
        bool fused;
        const char *why;
    } cases[] = {
        {"sm_90", "f16", 16384, 1024, 64, true, NULL},
        {"sm_90", "f32", 16384, 1024, 64, true, NULL},
        /* few rows: one 64-row tile per 64 columns, a wave on half the SMs */
        {"sm_90", "f32", 16, 4096, 4096, false, "materialised"},
        {"sm_80", "f16", 128, 256, 128, false, "only on the sm_90a template"},
        {"sm_80", "f32", 128, 256, 128, false, "only on the sm_90a template"},
        {"sm_90", "f32", 8192, 11008, 4096, false, "materialised"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(buf, sizeof buf,
                 "{\"mcir\": 1, \"inputs\": [{\"name\": \"x\", \"dtype\": \"%s\", \"shape\": [%d, %d]}],"
                 " \"weights\": [{\"name\": \"w\", \"dtype\": \"bf16\", \"shape\": [%d, %d]}],"
                 " \"nodes\": [{\"name\": \"pc\", \"op\": \"cast\", \"inputs\": [\"x\"], \"outputs\": [\"a\"],"
                 "  \"attrs\": {\"to\": \"bf16\"}},"
                 " {\"name\": \"mm\", \"op\": \"matmul\", \"inputs\": [\"a\", \"w\"], \"outputs\": [\"y\"]}],"
                 " \"outputs\": [\"y\"]}", cases[i].from, cases[i].m, cases[i].k, cases[i].k, cases[i].n);
        mcir_graph *g = mcir_graph_read_json_string(buf, "t.json", &d);
        ck_assert_ptr_nonnull(g);
        rewritten r = rewrite_graph(g, c, cases[i].arch);
        json_t *rec = find_record(r.trace, "gemm_prologue", cases[i].fused ? "applied" : "rejected");
        ck_assert_msg(rec != NULL, "%s from %s: gemm_prologue not %s", cases[i].arch, cases[i].from,
                      cases[i].fused ? "applied" : "rejected");
        if (!cases[i].fused) {
            const char *detail;
            ck_assert_str_eq(failed_check(rec, &detail), "prologue_pays");
            ck_assert_msg(strstr(detail, cases[i].why), "%s", detail);
        }
        ck_assert_int_eq(mcir_graph_find_node(r.g, "pc")->group == mcir_graph_find_node(r.g, "mm")->group &&
                         mcir_graph_find_node(r.g, "mm")->group >= 0, cases[i].fused);
        rewritten_free(&r);
    }
    mcir_catalog_free(c);
}
END_TEST

/* chains with a cast anywhere, fused whole into the GEMM on sm_90
 * (gemm_prologue_cast, gemm_prologue_cast_input): every node of the chain
 * in the matmul's group; a cast whose group holds no matmul is refused
 * with the reason */
START_TEST(test_prologue_cast_chains) {
    mcir_catalog *c = default_catalog(NULL);
    mcir_diag d = mcir_diag_stderr();
    static const struct {
        const char *name, *nodes, *rule, *members[4];
    } cases[] = {
        {"cast(silu(g) * u)",
         "{\"name\": \"p1\", \"op\": \"silu\", \"inputs\": [\"g\"], \"outputs\": [\"sg\"]},"
         "{\"name\": \"p2\", \"op\": \"mul\", \"inputs\": [\"sg\", \"u\"], \"outputs\": [\"h\"]},"
         "{\"name\": \"pc\", \"op\": \"cast\", \"inputs\": [\"h\"], \"outputs\": [\"a\"], \"attrs\": {\"to\": \"f16\"}}",
         "gemm_prologue_cast", {"p1", "p2", "pc", NULL}},
        {"cast(g * gamma)",
         "{\"name\": \"p1\", \"op\": \"mul\", \"inputs\": [\"g\", \"gamma\"], \"outputs\": [\"h\"]},"
         "{\"name\": \"pc\", \"op\": \"cast\", \"inputs\": [\"h\"], \"outputs\": [\"a\"], \"attrs\": {\"to\": \"f16\"}}",
         "gemm_prologue_cast", {"p1", "pc", NULL}},
        {"cast(g) * s",
         "{\"name\": \"pc\", \"op\": \"cast\", \"inputs\": [\"g\"], \"outputs\": [\"h\"], \"attrs\": {\"to\": \"f16\"}},"
         "{\"name\": \"p1\", \"op\": \"mul\", \"inputs\": [\"h\", \"s\"], \"outputs\": [\"a\"]}",
         "gemm_prologue_cast_input", {"pc", "p1", NULL}},
        {"relu(cast(g)) * u16",
         "{\"name\": \"pc\", \"op\": \"cast\", \"inputs\": [\"g\"], \"outputs\": [\"h\"], \"attrs\": {\"to\": \"f16\"}},"
         "{\"name\": \"p1\", \"op\": \"relu\", \"inputs\": [\"h\"], \"outputs\": [\"rh\"]},"
         "{\"name\": \"p2\", \"op\": \"mul\", \"inputs\": [\"rh\", \"u16\"], \"outputs\": [\"a\"]}",
         "gemm_prologue_cast_input", {"pc", "p1", "p2", NULL}},
    };
    char buf[2400];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(buf, sizeof buf,
                 "{\"mcir\": 1, \"inputs\": [{\"name\": \"g\", \"dtype\": \"f32\", \"shape\": [96, 128]},"
                 " {\"name\": \"u\", \"dtype\": \"f32\", \"shape\": [96, 128]},"
                 " {\"name\": \"u16\", \"dtype\": \"f16\", \"shape\": [96, 128]}],"
                 " \"weights\": [{\"name\": \"w\", \"dtype\": \"f16\", \"shape\": [128, 64]},"
                 " {\"name\": \"gamma\", \"dtype\": \"f32\", \"shape\": [128]},"
                 " {\"name\": \"s\", \"dtype\": \"f16\", \"shape\": [96, 1]}],"
                 " \"nodes\": [%s, {\"name\": \"mm\", \"op\": \"matmul\", \"inputs\": [\"a\", \"w\"], \"outputs\": [\"y\"]}],"
                 " \"outputs\": [\"y\"]}", cases[i].nodes);
        mcir_graph *g = mcir_graph_read_json_string(buf, "t.json", &d);
        ck_assert_ptr_nonnull(g);
        rewritten r = rewrite_graph(g, c, "sm_90");
        ck_assert_msg(find_record(r.trace, cases[i].rule, "applied"), "%s: %s not applied", cases[i].name,
                      cases[i].rule);
        const int gid = mcir_graph_find_node(r.g, "mm")->group;
        ck_assert_int_ge(gid, 0);
        for (int j = 0; cases[i].members[j]; j++)
            ck_assert_msg(mcir_graph_find_node(r.g, cases[i].members[j])->group == gid, "%s: '%s' not in the GEMM",
                          cases[i].name, cases[i].members[j]);
        rewritten_free(&r);
    }
    /* a cast next to pointwise ops with no GEMM to feed: no prologue to
     * join; the pointwise rules make the chain one elementwise kernel */
    const char *lone =
        "{\"mcir\": 1, \"inputs\": [{\"name\": \"g\", \"dtype\": \"f32\", \"shape\": [96, 128]}],"
        " \"nodes\": [{\"name\": \"p1\", \"op\": \"relu\", \"inputs\": [\"g\"], \"outputs\": [\"h\"]},"
        " {\"name\": \"pc\", \"op\": \"cast\", \"inputs\": [\"h\"], \"outputs\": [\"a\"], \"attrs\": {\"to\": \"f16\"}},"
        " {\"name\": \"p2\", \"op\": \"exp\", \"inputs\": [\"a\"], \"outputs\": [\"y\"]}], \"outputs\": [\"y\"]}";
    mcir_graph *g = mcir_graph_read_json_string(lone, "t.json", &d);
    ck_assert_ptr_nonnull(g);
    rewritten r = rewrite_graph(g, c, "sm_90");
    ck_assert(find_record(r.trace, "pointwise_cast", "applied"));
    ck_assert(find_record(r.trace, "pointwise_cast_input", "applied"));
    ck_assert(!find_record(r.trace, "gemm_prologue_cast", "applied"));
    int lone_gid = mcir_graph_find_node(r.g, "pc")->group;
    ck_assert_int_ge(lone_gid, 0);
    ck_assert_int_eq(mcir_graph_find_node(r.g, "p1")->group, lone_gid);
    ck_assert_int_eq(mcir_graph_find_node(r.g, "p2")->group, lone_gid);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

START_TEST(test_working_set_numbers) {
    const mcir_target *t = mcir_target_find("sm_90");
    mcir_working_set ws;
    int64_t dims[2] = {64, 64};
    mcir_working_set_compute(t, MCIR_WS_ATTENTION, dims, MCIR_DTYPE_F16, &ws);
    ck_assert(ws.fits);
    ck_assert_int_eq(ws.tile[0], 128);
    ck_assert_int_le(ws.bytes, t->smem_per_block_optin);
    int64_t big[2] = {1024, 1024};
    mcir_working_set_compute(t, MCIR_WS_ATTENTION, big, MCIR_DTYPE_F32, &ws);
    ck_assert(!ws.fits);
    ck_assert_int_eq(ws.limit, 227 * 1024);
    char buf[32];
    ck_assert_str_eq(mcir_bytes_str(227 * 1024, buf, sizeof buf), "227 KiB");
}
END_TEST

START_TEST(test_layernorm_without_affine) {
    mcir_catalog *c = default_catalog(NULL);
    rewritten r = rewrite_file("tests/golden/layernorm_pow_rsqrt/input.json", c);
    ck_assert_int_eq(mcir_graph_live_nodes(r.g), 1);
    mcir_node *ln = first_op(r.g, MCIR_OP_LAYERNORM);
    ck_assert_ptr_nonnull(ln);
    ck_assert_int_eq(ln->n_inputs, 2);   /* gamma of ones synthesised, no beta */
    ck_assert_int_eq(ln->inputs[1]->kind, MCIR_TENSOR_WEIGHT);
    ck_assert_ptr_nonnull(ln->inputs[1]->data);
    ck_assert(mcir_node_float(ln, "eps") > 0.99e-5 && mcir_node_float(ln, "eps") < 1.01e-5);
    ck_assert(mcir_node_has_property(ln, "online_reducible_norm"));
    assert_verifies(&r);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

START_TEST(test_softmax_and_rmsnorm) {
    mcir_catalog *c = default_catalog(NULL);
    rewritten r = rewrite_file("tests/golden/softmax_decomposed/input.json", c);
    ck_assert_int_eq(mcir_graph_live_nodes(r.g), 1);
    ck_assert_int_eq(count_op(r.g, MCIR_OP_SOFTMAX), 1);
    assert_verifies(&r);
    rewritten_free(&r);
    r = rewrite_file("tests/golden/rmsnorm_div_sqrt/input.json", c);
    ck_assert_int_eq(count_op(r.g, MCIR_OP_RMSNORM), 1);
    ck_assert_int_eq(mcir_graph_live_nodes(r.g), 2);
    assert_verifies(&r);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

START_TEST(test_gelu_and_epilogue) {
    mcir_catalog *c = default_catalog(NULL);
    rewritten r = rewrite_file("tests/golden/mlp_gelu_onnx/input.json", c);
    mcir_node *gelu = first_op(r.g, MCIR_OP_GELU);
    ck_assert_ptr_nonnull(gelu);
    ck_assert_str_eq(mcir_node_string(gelu, "approximate"), "none");
    /* fc1, bias add and gelu form one kernel; their intermediates are
     * recomputed */
    mcir_node *fc1 = mcir_graph_find_node(r.g, "fc1");
    ck_assert_int_ge(fc1->group, 0);
    ck_assert_int_eq(gelu->group, fc1->group);
    ck_assert_int_eq(mcir_graph_find_tensor(r.g, "fc1.y")->memory_state, MCIR_MEM_RECOMPUTABLE);
    ck_assert_int_eq(mcir_graph_find_tensor(r.g, "h")->memory_state, MCIR_MEM_RECOMPUTABLE);
    ck_assert_str_eq(gelu->outputs[0]->name, "act.y");
    assert_verifies(&r);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

START_TEST(test_conv_relu_and_inplace) {
    mcir_catalog *c = default_catalog(NULL);
    rewritten r = rewrite_file("tests/golden/conv_bias_relu/input.json", c);
    mcir_node *conv = mcir_graph_find_node(r.g, "conv");
    mcir_node *relu = mcir_graph_find_node(r.g, "conv.relu");
    ck_assert_int_ge(conv->group, 0);
    ck_assert_int_eq(relu->group, conv->group);
    ck_assert_int_eq(mcir_graph_find_node(r.g, "conv.bias")->group, conv->group);
    ck_assert_int_eq(mcir_graph_find_tensor(r.g, "conv.y")->memory_state, MCIR_MEM_RECOMPUTABLE);
    /* h has two consumers: stays materialized, outside any in-place */
    ck_assert_int_eq(mcir_graph_find_tensor(r.g, "h")->memory_state, MCIR_MEM_MATERIALIZED);
    mcir_node *sum = mcir_graph_find_node(r.g, "sum");
    ck_assert_int_eq(sum->inplace_input, 0);   /* writes over p, which dies there */
    ck_assert(mcir_node_has_property(sum, "coalescable_buffer"));
    assert_verifies(&r);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

START_TEST(test_user_rule_without_default) {
    mcir_diag d = mcir_diag_stderr();
    mcir_catalog *c = mcir_catalog_new();
    ck_assert(mcir_catalog_load_file(c, test_path("tests/data/catalog/good/user_silu.yaml"), &d));
    const char *json =
        "{\"mcir\": 1, \"inputs\": [{\"name\": \"x\", \"dtype\": \"f16\", \"shape\": [4, 8]}],"
        " \"nodes\": [{\"name\": \"g\", \"op\": \"sigmoid\", \"inputs\": [\"x\"], \"outputs\": [\"s\"]},"
        "  {\"name\": \"m\", \"op\": \"mul\", \"inputs\": [\"s\", \"x\"], \"outputs\": [\"y\"]}],"
        " \"outputs\": [\"y\"]}";
    rewritten r = rewrite_text(json, c);
    ck_assert_int_eq(mcir_graph_live_nodes(r.g), 1);
    mcir_node *n = first_op(r.g, MCIR_OP_SILU);
    ck_assert_ptr_nonnull(n);
    ck_assert_str_eq(n->origin_rule, "my_silu");
    ck_assert_str_eq(n->origin_nodes, "m,g");
    ck_assert(mcir_node_has_property(n, "my_recomputable"));
    json_t *rec = find_record(r.trace, "my_silu", "applied");
    ck_assert_ptr_nonnull(rec);
    ck_assert_int_eq(json_array_size(json_object_get(rec, "recomputable")), 1);
    /* the tutorial's --trace output (docs/catalog.md) */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    mcir_trace_print_human(r.trace, f);
    fclose(f);
    ck_assert_msg(strstr(text, "[0] applied my_silu at 'm' (my_recomputable -> replace_op)\n"
                               "      matched: m, g\n") != NULL, "%s", text);
    ck_assert(strstr(text, "ok   only_used_in_match     's' (S) is used only inside the pattern"));
    ck_assert(strstr(text, "ok   dtype_allowed          'x' (X) is f16"));
    ck_assert(strstr(text, "recomputable: s\n"));
    free(text);
    assert_verifies(&r);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

/* Rules that would produce a cycle, steal a tensor they did not match, or
 * overwrite a graph input are refused with the reason in the trace. */
START_TEST(test_misused_actions_refused) {
    mcir_diag d = mcir_diag_stderr();
    mcir_catalog *c = mcir_catalog_new();
    ck_assert(mcir_catalog_load_file(c, test_path("tests/data/catalog/good/misuse.yaml"), &d));
    const char *json =
        "{\"mcir\": 1, \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4, 8]}],"
        " \"nodes\": [{\"name\": \"g\", \"op\": \"sigmoid\", \"inputs\": [\"x\"], \"outputs\": [\"s\"]},"
        "  {\"name\": \"m\", \"op\": \"mul\", \"inputs\": [\"s\", \"x\"], \"outputs\": [\"y\"]}],"
        " \"outputs\": [\"y\"]}";
    rewritten r = rewrite_text(json, c);
    ck_assert_int_eq(mcir_graph_live_nodes(r.g), 2);
    const char *detail;
    json_t *rec = find_record(r.trace, "self_loop", "rejected");
    ck_assert_ptr_nonnull(rec);
    ck_assert_str_eq(failed_check(rec, &detail), "rewrite:replace_op");
    ck_assert(strstr(detail, "would read its own output 'y'") != NULL);
    rec = find_record(r.trace, "steal_tensor", "rejected");
    ck_assert_ptr_nonnull(rec);
    ck_assert(strstr(failed_check(rec, &detail), "rewrite:replace_op") != NULL);
    ck_assert(strstr(detail, "'s' is not produced by a matched node") != NULL);
    rec = find_record(r.trace, "overwrite_input", "rejected");
    ck_assert_ptr_nonnull(rec);
    failed_check(rec, &detail);
    ck_assert(strstr(detail, "'x' is a graph input") != NULL);
    ck_assert_int_eq(mcir_graph_find_node(r.g, "g")->inplace_input, -1);
    assert_verifies(&r);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

START_TEST(test_user_rule_on_top_of_default) {
    mcir_catalog *c = default_catalog("tests/data/catalog/good/extra_relu.yaml");
    const char *json =
        "{\"mcir\": 1, \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4, 8]}],"
        " \"weights\": [{\"name\": \"zero\", \"dtype\": \"f32\", \"shape\": [], \"value\": 0}],"
        " \"nodes\": [{\"name\": \"r\", \"op\": \"max\", \"inputs\": [\"zero\", \"x\"], \"outputs\": [\"y\"]},"
        "  {\"name\": \"attn_probs\", \"op\": \"softmax\", \"inputs\": [\"y\"], \"outputs\": [\"z\"]}],"
        " \"outputs\": [\"z\"]}";
    rewritten r = rewrite_text(json, c);
    ck_assert_int_eq(count_op(r.g, MCIR_OP_RELU), 1);
    ck_assert_int_eq(count_op(r.g, MCIR_OP_MAX), 0);
    ck_assert_ptr_nonnull(find_record(r.trace, "max_zero_is_relu", "applied"));
    ck_assert_ptr_nonnull(find_record(r.trace, "softmax_by_name", "applied"));
    ck_assert(mcir_node_has_property(first_op(r.g, MCIR_OP_SOFTMAX), "attention_probabilities"));
    assert_verifies(&r);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

/* A structure that is almost attention: the trace says where it broke. */
START_TEST(test_near_miss) {
    const char *json =
        "{\"mcir\": 1, \"inputs\": [{\"name\": \"q\", \"dtype\": \"f32\", \"shape\": [2, 4, 8]},"
        " {\"name\": \"k\", \"dtype\": \"f32\", \"shape\": [2, 4, 8]},"
        " {\"name\": \"v\", \"dtype\": \"f32\", \"shape\": [2, 4, 8]}],"
        " \"nodes\": [{\"name\": \"qk\", \"op\": \"matmul\", \"inputs\": [\"q\", \"k\"],"
        "  \"outputs\": [\"s\"], \"attrs\": {\"transpose_b\": true}},"
        " {\"name\": \"clip\", \"op\": \"relu\", \"inputs\": [\"s\"], \"outputs\": [\"s2\"]},"
        " {\"name\": \"sm\", \"op\": \"softmax\", \"inputs\": [\"s2\"], \"outputs\": [\"p\"]},"
        " {\"name\": \"pv\", \"op\": \"matmul\", \"inputs\": [\"p\", \"v\"], \"outputs\": [\"y\"]}],"
        " \"outputs\": [\"y\"]}";
    mcir_catalog *c = default_catalog(NULL);
    rewritten r = rewrite_text(json, c);
    ck_assert_int_eq(count_op(r.g, MCIR_OP_ATTENTION), 0);
    json_t *rec = find_record(r.trace, "attention_decomposed", "rejected");
    ck_assert_ptr_nonnull(rec);
    const char *detail;
    ck_assert_str_eq(failed_check(rec, &detail), "structure");
    ck_assert_msg(strstr(detail, "pattern node 'qk' wants op 'matmul'") &&
                      strstr(detail, "produced by 'clip' (relu)"),
                  "%s", detail);
    ck_assert_str_eq(json_string_value(json_object_get(rec, "anchor")), "pv");
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

START_TEST(test_trace_human) {
    mcir_catalog *c = default_catalog(NULL);
    rewritten r = rewrite_file("tests/golden/attention_too_big/input.json", c);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    mcir_trace_print_human(r.trace, f);
    fclose(f);
    ck_assert_msg(strstr(text, "rejected attention_decomposed at 'attn.pv'") != NULL, "%s", text);
    ck_assert(strstr(text, "matched: attn.pv, attn.softmax, attn.qk") != NULL);
    ck_assert(strstr(text, "FAIL fits_on_chip") != NULL);
    ck_assert(strstr(text, "working set 272.1 KiB > 227 KiB (sm_90") != NULL);   /* the FMA template at 4 query rows */
    ck_assert(strstr(text, "applied tile_fit") != NULL);
    free(text);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

/* A graph whose output is its input has no node to rewrite: the engine
 * leaves it as it is (no null pointer reaches memcpy; UBSan build). */
START_TEST(test_graph_without_nodes) {
    mcir_catalog *c = default_catalog(NULL);
    rewritten r = rewrite_text("{\"mcir\": 1, \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\","
                               " \"shape\": [2, 3]}], \"nodes\": [], \"outputs\": [\"x\"]}",
                               c);
    ck_assert_int_eq(r.g->n_nodes, 0);
    ck_assert_int_eq(mcir_trace_count(r.trace), 0);
    ck_assert_int_eq(r.g->n_outputs, 1);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

/* ------------------------------------------------------------ examples */

typedef struct example_expect {
    const char *name;
    int nodes_before, nodes_after;
    int attention, layernorm, rmsnorm, gelu, silu;
    int matmul, split;      /* horizontal fusion: one matmul + split per shared input */
    int attention_inputs;   /* of the first attention: 3, or 4 with a mask */
    bool causal;
} example_expect;

static const example_expect examples[] = {
    {"gpt2_block", 51, 23, 1, 2, 0, 1, 0, 4, 1, 3, true},
    {"bert_layer", 50, 23, 1, 2, 0, 1, 0, 4, 1, 4, false},      /* Q, K, V: one matmul */
    {"llama_block", 51, 35, 1, 0, 2, 0, 1, 4, 2, 3, true},      /* QKV; gate and up */
    {"cross_attention", 18, 14, 1, 0, 0, 0, 0, 3, 1, 3, false},  /* K and V of the context */
    {"resnet_small", 35, 35, 0, 0, 0, 0, 0, 1, 0, 0, false},
};

START_TEST(test_examples) {
    const example_expect *x = &examples[_i];
    mcir_catalog *c = default_catalog(NULL);
    char rel[256];
    snprintf(rel, sizeof rel, "examples/%s/graph.json", x->name);
    rewritten r = rewrite_file(rel, c);
    ck_assert_int_eq(mcir_graph_live_nodes(r.before), x->nodes_before);
    ck_assert_msg(mcir_graph_live_nodes(r.g) == x->nodes_after, "%s: %d nodes after", x->name,
                  mcir_graph_live_nodes(r.g));
    ck_assert_int_eq(count_op(r.g, MCIR_OP_ATTENTION), x->attention);
    ck_assert_int_eq(count_op(r.g, MCIR_OP_LAYERNORM), x->layernorm);
    ck_assert_int_eq(count_op(r.g, MCIR_OP_RMSNORM), x->rmsnorm);
    ck_assert_int_eq(count_op(r.g, MCIR_OP_GELU), x->gelu);
    ck_assert_int_eq(count_op(r.g, MCIR_OP_SILU), x->silu);
    ck_assert_msg(count_op(r.g, MCIR_OP_MATMUL) == x->matmul, "%s: %d matmuls", x->name,
                  count_op(r.g, MCIR_OP_MATMUL));
    ck_assert_int_eq(count_op(r.g, MCIR_OP_SPLIT), x->split);
    mcir_node *a = first_op(r.g, MCIR_OP_ATTENTION);
    if (a) {
        ck_assert_int_eq(a->n_inputs, x->attention_inputs);
        ck_assert(mcir_node_bool(a, "causal") == x->causal);
        ck_assert(mcir_node_has_property(a, "weighted_streaming_reduction"));
        ck_assert(mcir_node_has_property(a, "tile_compatible_compute"));
    }
    if (strcmp(x->name, "gpt2_block") == 0)
        ck_assert_str_eq(mcir_node_string(first_op(r.g, MCIR_OP_GELU), "approximate"), "tanh");
    if (strcmp(x->name, "cross_attention") == 0) {
        ck_assert_int_eq(a->inputs[0]->shape[2], 77);
        ck_assert_int_eq(a->inputs[1]->shape[2], 196);
        ck_assert_int_eq(a->inputs[0]->shape[3], 80);
    }
    if (strcmp(x->name, "resnet_small") == 0) {
        /* every conv followed by relu shares its kernel */
        mcir_node *conv = mcir_graph_find_node(r.g, "stem.conv");
        ck_assert_int_ge(conv->group, 0);
        ck_assert_int_eq(mcir_graph_find_node(r.g, "stem.conv.relu")->group, conv->group);
    }
    /* every graph output keeps its name */
    for (int i = 0; i < r.before->n_outputs; i++)
        ck_assert_ptr_nonnull(mcir_graph_find_tensor(r.g, r.before->outputs[i]->name));
    assert_verifies(&r);
    rewritten_free(&r);
    mcir_catalog_free(c);
}
END_TEST

/* The same input gives the same graph and trace, byte for byte. */
START_TEST(test_deterministic) {
    mcir_catalog *c = default_catalog(NULL);
    char *out[2];
    for (int k = 0; k < 2; k++) {
        rewritten r = rewrite_file("examples/bert_layer/graph.json", c);
        size_t len = 0;
        FILE *f = open_memstream(&out[k], &len);
        mcir_graph_write_json(r.g, f);
        mcir_trace_write_jsonl(r.trace, f);
        fclose(f);
        rewritten_free(&r);
    }
    ck_assert_str_eq(out[0], out[1]);
    free(out[0]);
    free(out[1]);
    mcir_catalog_free(c);
}
END_TEST

/* ------------------------------------------------------- random graphs */

/* A small random generator of decomposed attention and layer norm in the
 * shapes exporters produce, with random perturbations (intermediates
 * returned, softmax or mean over the wrong axis, non-constant scales):
 * whatever fires must keep the outputs within tolerance. */
typedef struct gen {
    uint64_t s;
    char *buf;
    size_t len, cap;
    int k;
    char names[512][16];   /* tensor names handed out, by k */
    char inputs[2048], weights[4096], nodes[16384], outputs[512];
} gen;

static char *gen_name(gen *g, char prefix) {
    MCIR_ASSERT(g->k < 512);
    char *name = g->names[g->k];
    snprintf(name, sizeof g->names[0], "%c%d", prefix, g->k);
    g->k++;
    return name;
}

static unsigned gen_next(gen *g, unsigned n) {
    g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(g->s >> 33) % n;
}

static void cat(char *dst, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void cat(char *dst, size_t cap, const char *fmt, ...) {
    size_t len = strlen(dst);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst + len, cap - len, fmt, ap);
    va_end(ap);
}

static const char *gen_input(gen *g, const char *shape, const char *dt) {
    const char *name = gen_name(g, 'i');
    cat(g->inputs, sizeof g->inputs, "%s{\"name\": \"%s\", \"dtype\": \"%s\", \"shape\": %s}",
        g->inputs[0] ? ", " : "", name, dt, shape);
    return name;
}

static const char *gen_const(gen *g, const char *shape, const char *value, const char *dt) {
    const char *name = gen_name(g, 'c');
    cat(g->weights, sizeof g->weights, "%s{\"name\": \"%s\", \"dtype\": \"%s\", \"shape\": %s%s%s}",
        g->weights[0] ? ", " : "", name, dt, shape, value ? ", \"value\": " : "",
        value ? value : "");
    return name;
}

static const char *gen_op(gen *g, const char *op, const char *a, const char *b,
                          const char *attrs) {
    const char *out = gen_name(g, 't');
    char ins[128];
    if (b) snprintf(ins, sizeof ins, "\"%s\", \"%s\"", a, b);
    else snprintf(ins, sizeof ins, "\"%s\"", a);
    cat(g->nodes, sizeof g->nodes,
        "%s{\"name\": \"n%s\", \"op\": \"%s\", \"inputs\": [%s], \"outputs\": [\"%s\"]%s%s%s}",
        g->nodes[0] ? ", " : "", out, op, ins, out, attrs ? ", \"attrs\": " : "",
        attrs ? attrs : "", "");
    return out;
}

static void gen_output(gen *g, const char *t) {
    cat(g->outputs, sizeof g->outputs, "%s\"%s\"", g->outputs[0] ? ", " : "", t);
}

/* A constant or runtime scaling of t, or none. */
static const char *gen_scale(gen *g, const char *t, const char *dt) {
    switch (gen_next(g, 6)) {
    case 0: return gen_op(g, "scale", t, NULL, "{\"value\": 0.5}");
    case 1: return gen_op(g, "mul", t, gen_const(g, "[]", "0.25", dt), NULL);
    case 2: return gen_op(g, "mul", gen_const(g, "[1]", "[2.0]", dt), t, NULL);
    case 3: return gen_op(g, "div", t, gen_const(g, "[]", "4.0", dt), NULL);
    default: return t;
    }
}

static void gen_attention(gen *g, const char *dt) {
    int nq = 4 + 2 * (int)gen_next(g, 2), nk = 6, d = 4;
    char shape[64];
    snprintf(shape, sizeof shape, "[2, 2, %d, %d]", nq, d);
    const char *q = gen_scale(g, gen_input(g, shape, dt), dt);
    snprintf(shape, sizeof shape, "[2, 2, %d, 3]", nk);
    const char *v = gen_input(g, shape, dt);
    const char *s;
    switch (gen_next(g, 3)) {
    case 0: { /* K through a transpose of the last two dims */
        snprintf(shape, sizeof shape, "[2, 2, %d, %d]", nk, d);
        const char *k = gen_scale(g, gen_input(g, shape, dt), dt);
        const char *kt = gen_op(g, "transpose", k, NULL, "{\"perm\": [0, 1, 3, 2]}");
        s = gen_op(g, "matmul", q, kt, NULL);
        break;
    }
    case 1: { /* transpose_b */
        snprintf(shape, sizeof shape, "[2, 2, %d, %d]", nk, d);
        const char *k = gen_scale(g, gen_input(g, shape, dt), dt);
        s = gen_op(g, "matmul", q, k, "{\"transpose_b\": true}");
        break;
    }
    default: { /* one transpose from [B, N, H, d] */
        snprintf(shape, sizeof shape, "[2, %d, 2, %d]", nk, d);
        const char *k = gen_input(g, shape, dt);
        const char *kt = gen_op(g, "transpose", k, NULL, "{\"perm\": [0, 2, 3, 1]}");
        s = gen_op(g, "matmul", q, kt, NULL);
        break;
    }
    }
    s = gen_scale(g, s, dt);
    if (gen_next(g, 10) == 0) gen_output(g, s);
    switch (gen_next(g, 3)) {
    case 0: { /* constant causal mask */
        char value[2048] = "[";
        for (int i = 0; i < nq; i++) {
            cat(value, sizeof value, "%s[", i ? ", " : "");
            for (int j = 0; j < nk; j++)
                cat(value, sizeof value, "%s%s", j ? ", " : "", j <= i + nk - nq ? "0" : "-10000");
            cat(value, sizeof value, "]");
        }
        cat(value, sizeof value, "]");
        snprintf(shape, sizeof shape, "[%d, %d]", nq, nk);
        s = gen_op(g, "add", gen_const(g, shape, value, dt), s, NULL);
        break;
    }
    case 1:
        snprintf(shape, sizeof shape, "[2, 1, 1, %d]", nk);
        s = gen_op(g, "add", s, gen_input(g, shape, dt), NULL);
        break;
    default: break;
    }
    const char *p = gen_op(g, "softmax", s, NULL,
                           gen_next(g, 8) ? "{\"axis\": -1}" : "{\"axis\": -2}");
    if (gen_next(g, 10) == 0) gen_output(g, p);
    gen_output(g, gen_op(g, "matmul", p, v, NULL));
}

static void gen_layernorm(gen *g, const char *dt) {
    const char *x = gen_input(g, "[3, 5, 16]", dt);
    const char *mean = gen_op(g, "reduce_mean", x, NULL,
                              gen_next(g, 8) ? "{\"axes\": [-1]}" : "{\"axes\": [1]}");
    const char *xc = gen_op(g, "sub", x, mean, NULL);
    const char *sq = gen_next(g, 2) ? gen_op(g, "mul", xc, xc, NULL)
                                    : gen_op(g, "pow", xc, gen_const(g, "[]", "2.0", dt),
                                             NULL);
    const char *var = gen_op(g, "reduce_mean", sq, NULL, "{\"axes\": [-1]}");
    const char *ve = gen_op(g, "add", var, gen_const(g, "[]", "1e-5", dt), NULL);
    const char *y = gen_next(g, 2)
                        ? gen_op(g, "div", xc, gen_op(g, "sqrt", ve, NULL, NULL), NULL)
                        : gen_op(g, "mul", gen_op(g, "rsqrt", ve, NULL, NULL), xc, NULL);
    if (gen_next(g, 10) == 0) gen_output(g, xc);
    if (gen_next(g, 3)) y = gen_op(g, "mul", y, gen_const(g, "[16]", NULL, dt), NULL);
    if (gen_next(g, 2)) y = gen_op(g, "add", gen_const(g, "[16]", NULL, dt), y, NULL);
    gen_output(g, y);
}

START_TEST(test_random_graphs) {
    mcir_catalog *c = default_catalog(NULL);
    int fused = 0;
    for (int seed = 1; seed <= 60; seed++) {
        gen g;
        memset(&g, 0, sizeof g);
        g.s = (uint64_t)seed * 0x9e3779b97f4a7c15ull;
        const char *dt = gen_next(&g, 3) ? "f32" : "f16";
        int parts = 1 + (int)gen_next(&g, 3);
        for (int i = 0; i < parts; i++) {
            if (gen_next(&g, 3)) gen_attention(&g, dt);
            else gen_layernorm(&g, dt);
        }
        char *json = malloc(32768);
        ck_assert_ptr_nonnull(json);
        snprintf(json, 32768,
                 "{\"mcir\": 1, \"name\": \"random%d\", \"inputs\": [%s], \"weights\": [%s],"
                 " \"nodes\": [%s], \"outputs\": [%s]}",
                 seed, g.inputs, g.weights, g.nodes, g.outputs);
        mcir_diag d = mcir_diag_stderr();
        mcir_graph *graph = mcir_graph_read_json_string(json, "random.json", &d);
        ck_assert_msg(graph != NULL, "seed %d: %s", seed, json);
        rewritten r = rewrite_graph(graph, c, NULL);
        fused += count_op(r.g, MCIR_OP_ATTENTION) + count_op(r.g, MCIR_OP_LAYERNORM);
        assert_verifies(&r);
        rewritten_free(&r);
        free(json);
    }
    ck_assert_int_ge(fused, 30);
    mcir_catalog_free(c);
}
END_TEST

/* -------------------------------------------------------------- golden */

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* First differing line of two texts, for the failure message. */
static void first_difference(const char *a, const char *b, char *out, size_t n) {
    int line = 1;
    const char *la = a, *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') {
            line++;
            la = a + 1;
            lb = b + 1;
        }
        a++;
        b++;
    }
    const char *ea = strchr(la, '\n'), *eb = strchr(lb, '\n');
    snprintf(out, n, "line %d:\n  expected: %.*s\n  got:      %.*s", line,
             (int)(eb ? eb - lb : (long)strlen(lb)), lb, (int)(ea ? ea - la : (long)strlen(la)),
             la);
}

static void check_golden(const char *dir, const char *file, const char *got, bool update) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (update) {
        write_text(path, got);
        return;
    }
    char *want = test_slurp(path, NULL);
    ck_assert_msg(want != NULL, "%s is missing (run with MCIR_UPDATE_GOLDEN=1)", path);
    if (strcmp(want, got) != 0) {
        char diff[1024];
        first_difference(got, want, diff, sizeof diff);
        ck_abort_msg("%s differs (MCIR_UPDATE_GOLDEN=1 to accept): %s", path, diff);
    }
    free(want);
}

START_TEST(test_golden) {
    const char *root = test_path("tests/golden");
    bool update = getenv("MCIR_UPDATE_GOLDEN") && strcmp(getenv("MCIR_UPDATE_GOLDEN"), "0");
    DIR *dp = opendir(root);
    ck_assert_ptr_nonnull(dp);
    char names[64][256];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(dp)) && n < 64) {
        if (de->d_name[0] == '.') continue;
        char in[2048];
        snprintf(in, sizeof in, "%s/%s/input.json", root, de->d_name);
        FILE *f = fopen(in, "r");
        if (!f) continue;
        fclose(f);
        snprintf(names[n++], sizeof names[0], "%s", de->d_name);
    }
    closedir(dp);
    ck_assert_int_ge(n, 8);
    mcir_catalog *c = default_catalog(NULL);
    for (int i = 0; i < n; i++) {
        char dir[1400], in[1500];
        snprintf(dir, sizeof dir, "%.1000s/%.255s", root, names[i]);
        snprintf(in, sizeof in, "%s/input.json", dir);
        mcir_diag d = mcir_diag_stderr();
        mcir_graph *g = mcir_graph_read_json(in, &d);
        ck_assert_msg(g != NULL, "%s", in);
        rewritten r = rewrite_graph(g, c, "sm_90");
        char *mcir = NULL, *trace = NULL;
        size_t l1 = 0, l2 = 0;
        FILE *f = open_memstream(&mcir, &l1);
        ck_assert(mcir_graph_write_json(r.g, f));
        fclose(f);
        f = open_memstream(&trace, &l2);
        ck_assert(mcir_trace_write_jsonl(r.trace, f));
        fclose(f);
        check_golden(dir, "expected.mcir.json", mcir, update);
        check_golden(dir, "expected.trace.jsonl", trace, update);
        assert_verifies(&r);
        free(mcir);
        free(trace);
        rewritten_free(&r);
    }
    mcir_catalog_free(c);
}
END_TEST

/* The engine's fusion-group index answers as a scan of every node does:
 * members in node order across merged groups, the largest live group. */
START_TEST(test_group_index_matches_scan) {
    mcir_graph *g = mcir_graph_new("groups");
    int64_t shape[1] = {8};
    mcir_tensor *t = mcir_graph_add_tensor(g, "x", MCIR_DTYPE_F32, 1, shape, MCIR_TENSOR_INPUT);
    mcir_node *n[8];
    for (int i = 0; i < 8; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        mcir_tensor *o = mcir_graph_add_tensor(g, name, MCIR_DTYPE_F32, 1, shape,
                                               MCIR_TENSOR_INTERMEDIATE);
        n[i] = mcir_graph_add_node(g, MCIR_OP_RELU, NULL, 1, &t, 1, &o);
        t = o;
    }
    mcir_graph_index_groups(g, true);
    /* groups grow at both ends and merge, as fuse_group makes them */
    mcir_graph_set_group(g, n[5], 0);
    mcir_graph_set_group(g, n[4], 0);
    mcir_graph_set_group(g, n[6], 0);
    mcir_graph_set_group(g, n[1], 1);
    mcir_graph_set_group(g, n[2], 1);
    mcir_graph_set_group(g, n[7], 2);
    ck_assert_int_eq(mcir_graph_max_group(g), 2);
    mcir_graph_set_group(g, n[7], 0);   /* group 2 empties: the max drops */
    ck_assert_int_eq(mcir_graph_max_group(g), 1);
    ck_assert_int_eq(mcir_graph_group_size(g, 0), 4);
    const mcir_node *idx[8], *scan[8];
    int both[2] = {0, 1};
    int k = mcir_graph_group_members(g, both, 2, idx, 8);
    int first3 = mcir_graph_group_members(g, both, 2, idx, 3);
    ck_assert_int_eq(first3, 3);
    k = mcir_graph_group_members(g, both, 2, idx, 8);
    mcir_graph_index_groups(g, false);
    int ks = mcir_graph_group_members(g, both, 2, scan, 8);
    ck_assert_int_eq(k, 6);
    ck_assert_int_eq(ks, k);
    for (int i = 0; i < k; i++) ck_assert_ptr_eq(idx[i], scan[i]);
    ck_assert_ptr_eq(idx[0], n[1]);   /* node order, not group order */
    ck_assert_ptr_eq(idx[2], n[4]);
    ck_assert_ptr_eq(idx[5], n[7]);
    ck_assert_int_eq(mcir_graph_max_group(g), 1);
    mcir_graph_free(g);
}
END_TEST

static Suite *rewrites_suite(void) {
    Suite *s = suite_create("rewrites");
    TCase *tc = tcase_create("rules");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_attention_mask_input);
    tcase_add_test(tc, test_attention_scale_on_k);
    tcase_add_test(tc, test_attention_scores_used_elsewhere);
    tcase_add_test(tc, test_attention_softmax_not_last_axis);
    tcase_add_test(tc, test_attention_working_set_per_arch);
    tcase_add_test(tc, test_prologue_pays_per_arch);
    tcase_add_test(tc, test_glu_pays_per_arch);
    tcase_add_test(tc, test_norm_gamma_fold_then_glu);
    tcase_add_test(tc, test_prologue_pays_row_scale);
    tcase_add_test(tc, test_prologue_pays_cast);
    tcase_add_test(tc, test_prologue_cast_chains);
    tcase_add_test(tc, test_working_set_numbers);
    tcase_add_test(tc, test_layernorm_without_affine);
    tcase_add_test(tc, test_softmax_and_rmsnorm);
    tcase_add_test(tc, test_gelu_and_epilogue);
    tcase_add_test(tc, test_conv_relu_and_inplace);
    tcase_add_test(tc, test_user_rule_without_default);
    tcase_add_test(tc, test_user_rule_on_top_of_default);
    tcase_add_test(tc, test_misused_actions_refused);
    tcase_add_test(tc, test_near_miss);
    tcase_add_test(tc, test_trace_human);
    tcase_add_test(tc, test_graph_without_nodes);
    tcase_add_test(tc, test_group_index_matches_scan);
    suite_add_tcase(s, tc);
    TCase *ex = tcase_create("examples");
    tcase_set_timeout(ex, 900);
    tcase_add_loop_test(ex, test_examples, 0, (int)(sizeof examples / sizeof examples[0]));
    tcase_add_test(ex, test_deterministic);
    tcase_add_test(ex, test_random_graphs);
    suite_add_tcase(s, ex);
    TCase *gold = tcase_create("golden");
    tcase_set_timeout(gold, 600);
    tcase_add_test(gold, test_golden);
    suite_add_tcase(s, gold);
    return s;
}

int main(void) { return test_main(rewrites_suite()); }
