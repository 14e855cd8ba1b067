/*
 * test_ruletest.c — rule tests (`tests:` in a catalog, mcirc
 * --test-catalog): every built-in rule carries tests that pass, the
 * tutorial's rule file passes, and a test whose expectation is wrong fails
 * with a line that says what the trace showed instead.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "rewrites/rewrites.h"
#include "test_util.h"

/* Loads the built-in catalog, then `file` (or `text` under the name
 * `file`), and runs the tests it carries. Returns the failures; *run and
 * the report text (diagnostics included) come back. */
static int run_tests(const char *file, const char *text, int *run, char **report) {
    size_t len;
    FILE *out = open_memstream(report, &len);
    ck_assert_ptr_nonnull(out);
    mcir_diag d = mcir_diag_to(out);
    mcir_catalog *c = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(c, &d));
    bool loaded = text ? mcir_catalog_load_string(c, text, strlen(text), file, &d)
                       : mcir_catalog_load_file(c, file, &d);
    ck_assert_msg(loaded, "%s does not load", file);
    int failed = mcir_rule_tests_run(c, file, mcir_target_find("sm_90"), out, run, &d);
    mcir_catalog_free(c);
    fclose(out);
    return failed;
}

static int run_file(const char *file, int *run, char **report) {
    return run_tests(file, NULL, run, report);
}

START_TEST(test_builtin_rule_tests_pass) {
    int run = 0;
    char *report = NULL;
    int failed = run_file(test_path("catalog/default.tests.yaml"), &run, &report);
    ck_assert_msg(failed == 0, "built-in rule tests failed:\n%s", report);
    ck_assert_int_ge(run, 20);
    ck_assert_ptr_null(strstr(report, "FAIL"));
    free(report);
}
END_TEST

/* No built-in rule goes untested. */
START_TEST(test_every_builtin_rule_has_a_test) {
    mcir_diag d = mcir_diag_stderr();
    mcir_catalog *c = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(c, &d));
    int builtin = mcir_catalog_n_patterns(c);
    ck_assert(mcir_catalog_load_file(c, test_path("catalog/default.tests.yaml"), &d));
    for (int i = 0; i < builtin; i++) {
        const char *name = mcir_catalog_pattern(c, i)->name;
        bool tested = false;
        for (int k = 0; k < mcir_catalog_n_tests(c) && !tested; k++)
            tested = strcmp(mcir_catalog_test(c, k)->rule, name) == 0;
        ck_assert_msg(tested, "built-in rule '%s' has no test in catalog/default.tests.yaml",
                      name);
    }
    mcir_catalog_free(c);
}
END_TEST

START_TEST(test_tutorial_rule_passes) {
    int run = 0;
    char *report = NULL;
    int failed = run_file(test_path("examples/rules/rms_reciprocal.yaml"), &run, &report);
    ck_assert_msg(failed == 0, "%s", report);
    ck_assert_int_eq(run, 3);
    ck_assert_ptr_nonnull(strstr(report, "rmsnorm_reciprocal: applied, verified"));
    free(report);
}
END_TEST

/* The same graphs with the wrong expectations: every test fails, and the
 * report says what the rule did instead. */
START_TEST(test_wrong_expectations_fail) {
    static const char *const graph =
        "    graph: |\n"
        "      {\"mcir\": 1, \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4, 16]}],\n"
        "       \"nodes\": [{\"name\": \"s\", \"op\": \"sigmoid\", \"inputs\": [\"x\"], \"outputs\": [\"g\"]},\n"
        "                 {\"name\": \"m\", \"op\": \"mul\", \"inputs\": [\"x\", \"g\"], \"outputs\": [\"y\"]}],\n"
        "       \"outputs\": [\"y\"]}\n";
    char text[4096];
    snprintf(text, sizeof text,
             "mcir_catalog: 1\n"
             "tests:\n"
             "  - rule: silu_decomposed\n    expect: not_matched\n%s"
             "  - rule: silu_decomposed\n    expect: rejected\n    check: pure\n%s"
             "  - rule: silu_decomposed\n    expect: applied\n    at: [nowhere]\n%s"
             "  - rule: softmax_decomposed\n    expect: applied\n%s",
             graph, graph, graph, graph);
    char *report = NULL;
    int run = 0;
    int failed = run_tests("wrong.yaml", text, &run, &report);
    ck_assert_int_eq(run, 4);
    ck_assert_msg(failed == 4, "%s", report);
    ck_assert_ptr_nonnull(strstr(report, "it matched and was applied"));
    ck_assert_ptr_nonnull(strstr(report, "expected rejected by pure; got 1 applied"));
    ck_assert_ptr_nonnull(strstr(report, "expected applied at the given nodes"));
    ck_assert_ptr_nonnull(strstr(report, "softmax_decomposed: expected applied; got 0 applied"));
    free(report);
}
END_TEST

/* A test whose graph does not read fails and the graph's message names
 * the inline graph. */
START_TEST(test_bad_inline_graph_fails) {
    const char *text = "mcir_catalog: 1\n"
                       "tests:\n"
                       "  - rule: silu_decomposed\n"
                       "    expect: applied\n"
                       "    graph: '{\"mcir\": 1, \"inputs\": []}'\n";
    char *report = NULL;
    int run = 0;
    int failed = run_tests("bad.yaml", text, &run, &report);
    ck_assert_int_eq(failed, 1);
    ck_assert_ptr_nonnull(strstr(report, "bad.yaml:5 (test 1, inline graph)"));
    ck_assert_ptr_nonnull(strstr(report, "its graph does not read"));
    free(report);
}
END_TEST

/* ---------------------------------------------- termination and bisect */

static mcir_catalog *catalog_with(const char *text) {
    mcir_diag d = mcir_diag_stderr();
    mcir_catalog *c = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(c, &d));
    ck_assert(mcir_catalog_load_string(c, text, strlen(text), "rules.yaml", &d));
    return c;
}

static const char *const small_graph =
    "{\"mcir\": 1, \"name\": \"small\",\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4, 8]}],\n"
    " \"nodes\": [{\"name\": \"a\", \"op\": \"relu\", \"inputs\": [\"x\"], \"outputs\": [\"r\"]},\n"
    "           {\"name\": \"b\", \"op\": \"tanh\", \"inputs\": [\"r\"], \"outputs\": [\"y\"]}],\n"
    " \"outputs\": [\"y\"]}\n";

static mcir_graph *small(void) {
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g = mcir_graph_read_json_string(small_graph, "small.json", &d);
    ck_assert_ptr_nonnull(g);
    return g;
}

/* relu -> relu changes nothing: refused once, traced, and the run ends. */
START_TEST(test_identity_rewrite_is_refused) {
    mcir_catalog *c = catalog_with(
        "mcir_catalog: 1\npatterns:\n  - name: relu_again\n"
        "    property: rematerializable_intermediate\n    priority: 5\n"
        "    match: [{id: r, op: relu, in: [X]}]\n    legality: [pure]\n"
        "    rewrite: {action: replace_op, op: relu, inputs: [X]}\n");
    mcir_graph *g = small();
    mcir_trace *t = mcir_trace_new();
    mcir_rewrite_stats st;
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_rewrite_run_ex(g, c, NULL, t, NULL, &st, &d));
    ck_assert_int_eq(st.refused, 1);
    int refusals = 0;
    for (int i = 0; i < mcir_trace_count(t); i++) {
        json_t *r = mcir_trace_get(t, i);
        if (strcmp(json_string_value(json_object_get(r, "rule")), "relu_again") != 0) continue;
        ck_assert_str_eq(json_string_value(json_object_get(r, "decision")), "rejected");
        char *l = json_dumps(json_object_get(r, "legality"), 0);
        ck_assert_ptr_nonnull(strstr(l, "rewrite:replace_op"));
        ck_assert_ptr_nonnull(strstr(l, "changes nothing"));
        free(l);
        refusals++;
    }
    ck_assert_int_eq(refusals, 1);
    mcir_trace_free(t);
    mcir_graph_free(g);
    mcir_catalog_free(c);
}
END_TEST

/* tanh -> sigmoid -> tanh: an error naming both rules, at once. */
START_TEST(test_rules_that_undo_each_other_are_named) {
    mcir_catalog *c = catalog_with(
        "mcir_catalog: 1\npatterns:\n"
        "  - name: tanh_to_sigmoid\n    property: rematerializable_intermediate\n"
        "    priority: 5\n    match: [{id: t, op: tanh, in: [X]}]\n    legality: [pure]\n"
        "    rewrite: {action: replace_op, op: sigmoid, inputs: [X]}\n"
        "  - name: sigmoid_to_tanh\n    property: rematerializable_intermediate\n"
        "    priority: 5\n    match: [{id: s, op: sigmoid, in: [X]}]\n    legality: [pure]\n"
        "    rewrite: {action: replace_op, op: tanh, inputs: [X]}\n");
    mcir_graph *g = small();
    char *text = NULL;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    mcir_diag d = mcir_diag_to(f);
    mcir_rewrite_stats st;
    ck_assert(!mcir_rewrite_run_ex(g, c, NULL, NULL, NULL, &st, &d));
    fclose(f);
    ck_assert_int_le(st.applied, 2);
    ck_assert_ptr_nonnull(strstr(text, "rules do not reach a fixpoint"));
    ck_assert_ptr_nonnull(strstr(text, "'sigmoid_to_tanh'"));
    ck_assert_ptr_nonnull(strstr(text, "'tanh_to_sigmoid'"));
    free(text);
    mcir_graph_free(g);
    mcir_catalog_free(c);
}
END_TEST

/* --verify's bisection names the rule that changed the outputs. */
START_TEST(test_bisect_names_the_breaking_rewrite) {
    mcir_diag d = mcir_diag_stderr();
    mcir_catalog *c = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(c, &d));
    ck_assert(mcir_catalog_load_file(c, test_path("tests/data/catalog/good/wrong_tanh.yaml"), &d));
    mcir_graph *g = mcir_graph_read_json(test_path("examples/gpt2_block/graph.json"), &d);
    ck_assert_ptr_nonnull(g);
    mcir_graph *original = mcir_graph_clone(g);
    mcir_rewrite_stats st;
    ck_assert(mcir_rewrite_run_ex(g, c, NULL, NULL, NULL, &st, &d));
    ck_assert(!mcir_rewrite_verify(original, g, 0, NULL, &d));
    char *text = NULL;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    int k = mcir_rewrite_bisect(original, c, NULL, st.applied, 0, f);
    fclose(f);
    ck_assert_int_ge(k, 1);
    ck_assert_int_le(k, st.applied);
    ck_assert_msg(strstr(text, "rule 'tanh_is_not_sigmoid'") != NULL, "%s", text);
    ck_assert_ptr_nonnull(strstr(text, "beyond tolerance"));
    free(text);
    /* stopping after k-1 rewrites still agrees, after k it does not */
    for (int stop = k - 1; stop <= k; stop++) {
        if (stop == 0) continue;   /* max_applied 0 means "to the fixpoint" */
        mcir_graph *h = mcir_graph_clone(original);
        mcir_rewrite_options o = {.max_applied = stop};
        mcir_rewrite_stats st2;
        ck_assert(mcir_rewrite_run_ex(h, c, NULL, NULL, &o, &st2, &d));
        ck_assert_int_eq(st2.applied, stop);
        ck_assert(mcir_rewrite_verify(original, h, 0, NULL, &d) == (stop < k));
        mcir_graph_free(h);
    }
    mcir_graph_free(original);
    mcir_graph_free(g);
    mcir_catalog_free(c);
}
END_TEST

/* The statistics tell fusions from bookkeeping and add up. */
START_TEST(test_stats_tell_fusions_from_bookkeeping) {
    mcir_diag d = mcir_diag_stderr();
    mcir_catalog *c = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(c, &d));
    mcir_graph *g = mcir_graph_read_json(test_path("examples/gpt2_block/graph.json"), &d);
    ck_assert_ptr_nonnull(g);
    mcir_trace *t = mcir_trace_new();
    mcir_rewrite_stats st;
    ck_assert(mcir_rewrite_run_ex(g, c, NULL, t, NULL, &st, &d));
    ck_assert_int_ge(st.structural, 4);   /* 2 layer norms, attention, GELU */
    ck_assert_int_ge(st.groups, 1);
    ck_assert_int_ge(st.annotations, 1);
    ck_assert_int_eq(st.applied, st.structural + st.groups + st.annotations + st.in_place);
    int applied = 0;
    for (int i = 0; i < mcir_trace_count(t); i++) {
        const char *dec = json_string_value(json_object_get(mcir_trace_get(t, i), "decision"));
        applied += dec && strcmp(dec, "applied") == 0;
    }
    ck_assert_int_eq(applied, st.applied);
    mcir_trace_free(t);
    mcir_graph_free(g);
    mcir_catalog_free(c);
}
END_TEST

/* --trace=all records partial matches the default leaves out (the
 * reciprocal RMS norm of the tutorial: the built-in rule matches its first
 * nodes, then finds a reciprocal where it wants rsqrt). */
START_TEST(test_all_near_misses) {
    mcir_diag d = mcir_diag_stderr();
    mcir_catalog *c = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(c, &d));
    int counts[2];
    for (int all = 0; all < 2; all++) {
        mcir_graph *g = mcir_graph_read_json(test_path("examples/rules/rms_reciprocal.json"), &d);
        ck_assert_ptr_nonnull(g);
        mcir_trace *t = mcir_trace_new();
        mcir_rewrite_options o = {.all_near_misses = all};
        ck_assert(mcir_rewrite_run_ex(g, c, NULL, t, &o, NULL, &d));
        counts[all] = 0;
        for (int i = 0; i < mcir_trace_count(t); i++) {
            json_t *r = mcir_trace_get(t, i);
            char *l = json_dumps(json_object_get(r, "legality"), 0);
            if (l && strstr(l, "\"structure\"") &&
                !strcmp(json_string_value(json_object_get(r, "rule")), "rmsnorm_decomposed"))
                counts[all]++;
            free(l);
        }
        mcir_trace_free(t);
        mcir_graph_free(g);
    }
    ck_assert_int_gt(counts[1], counts[0]);
    mcir_catalog_free(c);
}
END_TEST

/* A name regex that hits PCRE2's limits on a node name: not a match, and
 * the trace says so instead of staying silent. */
START_TEST(test_name_regex_limit_is_traced) {
    mcir_catalog *c = catalog_with(
        "mcir_catalog: 1\npatterns:\n  - name: catastrophic\n"
        "    property: rematerializable_intermediate\n"
        "    match: [{id: r, op: relu, name: \"(a|aa)+\", in: [X]}]\n    legality: [pure]\n"
        "    rewrite: {action: replace_op, op: relu, inputs: [X]}\n");
    const char *text =
        "{\"mcir\": 1, \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4]}],\n"
        " \"nodes\": [{\"name\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac\", \"op\": \"relu\","
        " \"inputs\": [\"x\"], \"outputs\": [\"y\"]}], \"outputs\": [\"y\"]}\n";
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g = mcir_graph_read_json_string(text, "names.json", &d);
    ck_assert_ptr_nonnull(g);
    mcir_trace *t = mcir_trace_new();
    ck_assert(mcir_rewrite_run(g, c, NULL, t, &d));
    int notes = 0;
    for (int i = 0; i < mcir_trace_count(t); i++) {
        json_t *r = mcir_trace_get(t, i);
        if (strcmp(json_string_value(json_object_get(r, "rule")), "catastrophic") != 0) continue;
        ck_assert_str_eq(json_string_value(json_object_get(r, "decision")), "rejected");
        char *l = json_dumps(json_object_get(r, "legality"), 0);
        ck_assert_ptr_nonnull(strstr(l, "PCRE2's match or depth limit"));
        free(l);
        notes++;
    }
    ck_assert_int_eq(notes, 1);
    mcir_trace_free(t);
    mcir_graph_free(g);
    mcir_catalog_free(c);
}
END_TEST

static Suite *ruletest_suite(void) {
    Suite *s = suite_create("ruletest");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_builtin_rule_tests_pass);
    tcase_add_test(tc, test_every_builtin_rule_has_a_test);
    tcase_add_test(tc, test_tutorial_rule_passes);
    tcase_add_test(tc, test_wrong_expectations_fail);
    tcase_add_test(tc, test_bad_inline_graph_fails);
    tcase_add_test(tc, test_identity_rewrite_is_refused);
    tcase_add_test(tc, test_rules_that_undo_each_other_are_named);
    tcase_add_test(tc, test_bisect_names_the_breaking_rewrite);
    tcase_add_test(tc, test_stats_tell_fusions_from_bookkeeping);
    tcase_add_test(tc, test_all_near_misses);
    tcase_add_test(tc, test_name_regex_limit_is_traced);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_main(ruletest_suite()); }
