/*
 * test_examples.c — every bundled example through mcirc, by its command
 * line: `--run --device cpu -o DIR` must reproduce the outputs PyTorch
 * computed for the same seeded weights and inputs (examples/index.json;
 * 1e-4 relative for f32, 2e-2 for f16/bf16, relative to the largest
 * magnitude of the expected output; integer outputs exactly), and
 * `--verify` must show that the rewrites kept the meaning of the graph;
 * the decode step's plan splits its attention over the keys.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "mcir/mcir.h"
#include "test_util.h"

static json_t *index_json;
static const char *names[64];
static int n_names;

static void load_index(void) {
    json_error_t err;
    index_json = json_load_file(test_path("examples/index.json"), 0, &err);
    if (!index_json) {
        fprintf(stderr, "examples/index.json: %s\n", err.text);
        exit(1);
    }
    const char *key;
    json_t *v;
    json_object_foreach(index_json, key, v) names[n_names++] = key;
}

/* Pushes "--input NAME=PATH" pairs of the example onto args. */
static int add_inputs(json_t *ex, const char **args, int k, char paths[][1024]) {
    const char *in;
    json_t *p;
    int i = 0;
    json_object_foreach(json_object_get(ex, "inputs"), in, p) {
        snprintf(paths[i], 1024, "%s=%s/examples/%s", in,
                 test_source_dir(), json_string_value(p));
        args[k++] = "--input";
        args[k++] = paths[i++];
    }
    return k;
}

static double compare_npy(const char *got_path, const char *want_path, char *why, size_t n,
                          double *tol) {
    mcir_diag d = mcir_diag_stderr();
    mcir_npy got, want;
    if (!mcir_npy_read(got_path, &got, &d)) {
        snprintf(why, n, "cannot read %s", got_path);
        return INFINITY;
    }
    if (!mcir_npy_read(want_path, &want, &d)) {
        mcir_npy_free(&got);
        snprintf(why, n, "cannot read %s", want_path);
        return INFINITY;
    }
    int64_t count = 1;
    bool same = got.rank == want.rank;
    for (int i = 0; same && i < got.rank; i++) {
        same = got.shape[i] == want.shape[i];
        count *= got.shape[i];
    }
    double rel = INFINITY;
    if (!same) snprintf(why, n, "%s: shape differs from %s", got_path, want_path);
    else {   /* the one comparison (mcir/value.c) */
        float *a = malloc(sizeof(float) * (size_t)(count ? count : 1));
        float *b = malloc(sizeof(float) * (size_t)(count ? count : 1));
        ck_assert(a && b);
        mcir_values_to_f32(got.dtype, got.data, a, count);
        mcir_values_to_f32(want.dtype, want.data, b, count);
        mcir_compare_result r;
        mcir_values_compare(a, b, count, &r);
        if (mcir_dtype_is_integer(got.dtype)) *tol = mcir_compare_tolerance(got.dtype);
        rel = r.max_rel;
        snprintf(why, n, "%s: max abs err %.3g, max rel err %.3g", got_path, r.max_abs, rel);
        free(a);
        free(b);
    }
    mcir_npy_free(&got);
    mcir_npy_free(&want);
    return rel;
}

START_TEST(example_matches_pytorch) {
    const char *name = names[_i];
    json_t *ex = json_object_get(index_json, name);
    const char *dtype = json_string_value(json_object_get(ex, "dtype"));
    double tol = dtype && strcmp(dtype, "f32") == 0 ? 1e-4 : 2e-2;
    char *dir = cli_tempdir();
    char graph[1024], paths[16][1024];
    snprintf(graph, sizeof graph, "%s/examples/%s",
             test_source_dir(), json_string_value(json_object_get(ex, "graph")));
    const char *args[64] = {"--run", "--device", "cpu", "-o", dir};
    int k = add_inputs(ex, args, 5, paths);
    args[k++] = graph;
    args[k] = NULL;
    cli_result r = cli_run(args);
    ck_assert_msg(r.status == 0, "%s: mcirc exit %d\n%s", name, r.status, r.err);
    const char *out;
    json_t *want;
    json_object_foreach(json_object_get(ex, "outputs"), out, want) {
        char got_path[1200], want_path[1200], why[4096];
        snprintf(got_path, sizeof got_path, "%s/%s.npy", dir, out);
        snprintf(want_path, sizeof want_path, "%s/examples/%s",
                 test_source_dir(), json_string_value(want));
        double out_tol = tol;   /* integer outputs (token ids): exact */
        double rel = compare_npy(got_path, want_path, why, sizeof why, &out_tol);
        ck_assert_msg(rel <= out_tol, "%s output %s: %s (tolerance %g)", name, out, why, out_tol);
    }
    cli_result_free(&r);
    cli_remove_tree(dir);
    free(dir);
}
END_TEST

START_TEST(example_rewrites_verify) {
    const char *name = names[_i];
    json_t *ex = json_object_get(index_json, name);
    char graph[1024], paths[16][1024];
    snprintf(graph, sizeof graph, "%s/examples/%s",
             test_source_dir(), json_string_value(json_object_get(ex, "graph")));
    const char *args[64] = {"--verify"};
    int k = add_inputs(ex, args, 1, paths);
    args[k++] = graph;
    args[k] = NULL;
    cli_result r = cli_run(args);
    ck_assert_msg(r.status == 0, "%s: mcirc --verify exit %d\n%s\n%s", name, r.status, r.out,
                  r.err);
    ck_assert_msg(strstr(r.out, "verify ") != NULL, "%s: no verify report:\n%s", name, r.out);
    ck_assert_msg(strstr(r.out, "FAIL") == NULL, "%s:\n%s", name, r.out);
    cli_result_free(&r);
}
END_TEST

/* The decode step attends with one query over 1024 cached keys: the
 * planner splits the keys (split-KV) so the few heads fill the GPU. */
START_TEST(decode_step_plans_split_kv_attention) {
    char *dir = cli_tempdir();
    const char *args[] = {"--emit", "plan", "-o", dir, test_path("examples/gpt2_decode/graph.json"), NULL};
    cli_result r = cli_run(args);
    ck_assert_msg(r.status == 0, "mcirc exit %d\n%s", r.status, r.err);
    char path[1200];
    snprintf(path, sizeof path, "%s/plan.json", dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char buf[1 << 16];
    int splits = 0, attention = 0;
    while (fgets(buf, sizeof buf, f)) {
        char *k = strstr(buf, "\"kv_split\": ");
        if (k && atoi(k + 12) > 1) splits++;
        if (strstr(buf, "\"template\": \"streaming_attention\"")) attention++;
    }
    fclose(f);
    ck_assert_int_eq(attention, 2);   /* one per block */
    ck_assert_int_eq(splits, 2);
    cli_result_free(&r);
    cli_remove_tree(dir);
    free(dir);
}
END_TEST

int main(void) {
    load_index();
    Suite *s = suite_create("examples");
    TCase *run = tcase_create("run_cpu_vs_pytorch");
    tcase_set_timeout(run, 600);
    tcase_add_loop_test(run, example_matches_pytorch, 0, n_names);
    suite_add_tcase(s, run);
    TCase *verify = tcase_create("verify_rewrites");
    tcase_set_timeout(verify, 600);
    tcase_add_loop_test(verify, example_rewrites_verify, 0, n_names);
    suite_add_tcase(s, verify);
    TCase *plan = tcase_create("plans");
    tcase_set_timeout(plan, 600);
    tcase_add_test(plan, decode_step_plans_split_kv_attention);
    suite_add_tcase(s, plan);
    int failed = test_main(s);
    json_decref(index_json);
    return failed;
}
