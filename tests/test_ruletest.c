/*
 * test_ruletest.c — rule tests (`tests:` in a catalog, mcirc
 * --test-catalog): every built-in rule carries tests that pass, the
 * tutorial's rule file passes, and a test whose expectation is wrong fails
 * with a line that says what the trace showed instead.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "rewrites/rewrites.h"

static const char *source_dir(void) {
    const char *s = getenv("MCIR_SOURCE_DIR");
    return s ? s : "..";
}

static char *path_of(const char *rel) {
    static char buf[4][1024];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", source_dir(), rel);
    return b;
}

/* Loads the built-in catalog, then `file`; runs the tests of `file`.
 * Returns the failures; *run and the report text come back. */
static int run_file(const char *file, int *run, char **report) {
    size_t len;
    FILE *out = open_memstream(report, &len);
    ck_assert_ptr_nonnull(out);
    mcir_diag d = mcir_diag_to(out);
    mcir_catalog *c = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(c, &d));
    ck_assert_msg(mcir_catalog_load_file(c, file, &d), "%s does not load", file);
    int failed = mcir_rule_tests_run(c, file, mcir_target_find("sm_90"), out, run, &d);
    mcir_catalog_free(c);
    fclose(out);
    return failed;
}

START_TEST(test_builtin_rule_tests_pass) {
    int run = 0;
    char *report = NULL;
    int failed = run_file(path_of("catalog/default.tests.yaml"), &run, &report);
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
    ck_assert(mcir_catalog_load_file(c, path_of("catalog/default.tests.yaml"), &d));
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
    int failed = run_file(path_of("examples/rules/rms_reciprocal.yaml"), &run, &report);
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
    size_t len;
    FILE *out = open_memstream(&report, &len);
    mcir_diag d = mcir_diag_to(out);
    mcir_catalog *c = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(c, &d));
    ck_assert(mcir_catalog_load_string(c, text, strlen(text), "wrong.yaml", &d));
    int run = 0;
    int failed = mcir_rule_tests_run(c, "wrong.yaml", mcir_target_find("sm_90"), out, &run, &d);
    mcir_catalog_free(c);
    fclose(out);
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
    size_t len;
    FILE *out = open_memstream(&report, &len);
    mcir_diag d = mcir_diag_to(out);
    mcir_catalog *c = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(c, &d));
    ck_assert(mcir_catalog_load_string(c, text, strlen(text), "bad.yaml", &d));
    int run = 0;
    int failed = mcir_rule_tests_run(c, NULL, NULL, out, &run, &d);
    mcir_catalog_free(c);
    fclose(out);
    ck_assert_int_eq(failed, 1);
    ck_assert_ptr_nonnull(strstr(report, "bad.yaml:5 (test 1, inline graph)"));
    ck_assert_ptr_nonnull(strstr(report, "its graph does not read"));
    free(report);
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
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(ruletest_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
