/*
 * test_cli.c — mcirc by its contract (docs/cli.md): options, exit
 * statuses, error format, every artifact, atomic writing.
 */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "mcir/mcir.h"
#include "test_util.h"

#define RUN(...) cli_run((const char *const[]){__VA_ARGS__, NULL})

static const char *gpt2(void) { return cli_src("examples/gpt2_block/graph.json"); }
static const char *mlp(void) { return cli_src("examples/mlp_tiny/graph.json"); }

START_TEST(help_and_version) {
    cli_result r = RUN("--help");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: mcirc"));
    ck_assert_ptr_nonnull(strstr(r.out, "--emit"));
    cli_result_free(&r);
    r = RUN("--version");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "mcirc "));
    cli_result_free(&r);
}
END_TEST

START_TEST(usage_errors_exit_2) {
    static const char *const cases[][4] = {
        {"--bogus", "x.json", NULL},
        {"--emit", "pictures", "x.json", NULL},
        {"--arch", "sm_10", "x.json", NULL},
        {"--planner", "nope", "x.json", NULL},
        {"--device", "tpu", "--run", "x.json"},
        {"--device", "cpu", "x.json", NULL}, /* --device needs --run */
        {"--seed", "-3", "x.json", NULL},
        {"--watchdog", "-1", "x.json", NULL},
        {"--watchdog", "soon", "x.json", NULL},
        {"--input", "novalue", "x.json", NULL},
        {"a.json", "b.json", NULL, NULL},
        {"--emit", NULL, NULL, NULL},
        {NULL, NULL, NULL, NULL}, /* no graph */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[5] = {cases[i][0], cases[i][1], cases[i][2], cases[i][3], NULL};
        cli_result r = cli_run(args);
        ck_assert_msg(r.status == 2, "case %zu: exit %d (%s)", i, r.status, r.err);
        ck_assert_msg(strstr(r.err, "mcirc: error: ") == r.err, "case %zu: %s", i, r.err);
        ck_assert_msg(r.out[0] == 0, "case %zu printed on stdout: %s", i, r.out);
        cli_result_free(&r);
    }
}
END_TEST

START_TEST(planner_help_lists_planners) {
    cli_result r = RUN("--planner", "help");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "best"));
    ck_assert_ptr_nonnull(strstr(r.out, "exact"));
    ck_assert_ptr_nonnull(strstr(r.out, "greedy"));
    cli_result_free(&r);
}
END_TEST

START_TEST(missing_graph_is_exit_1_with_path) {
    cli_result r = RUN("/nonexistent/graph.json");
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "/nonexistent/graph.json: error: ") == r.err, "%s", r.err);
    cli_result_free(&r);
}
END_TEST

START_TEST(bad_graph_writes_nothing) {
    char *dir = cli_tempdir();
    char out[1024];
    snprintf(out, sizeof out, "%s/artifacts", dir);
    const char *bad = cli_src("tests/data/cli/cycle.json");
    cli_result r = RUN("-o", out, bad);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "cycle.json:") != NULL && strstr(r.err, ": error: "), "%s",
                  r.err);
    ck_assert_msg(!cli_file_exists(out), "a failed compile created %s", out);
    cli_result_free(&r);
    /* an existing directory stays untouched, too */
    r = RUN("-o", dir, bad);
    ck_assert_int_eq(r.status, 1);
    ck_assert_int_eq(cli_dir_entries(dir), 0);
    cli_result_free(&r);
    cli_remove_tree(dir);
    free(dir);
}
END_TEST

START_TEST(summary_by_default) {
    cli_result r = RUN(gpt2());
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "nodes"));
    ck_assert_ptr_nonnull(strstr(r.out, "rewrites applied"));
    ck_assert_ptr_nonnull(strstr(r.out, "kernels"));
    ck_assert_ptr_nonnull(strstr(r.out, "lower bound"));
    cli_result_free(&r);
    r = RUN("--no-rewrite", gpt2());
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "(0 fusions; 0 rewrites applied)"));
    cli_result_free(&r);
}
END_TEST

static json_t *parse_or_fail(const char *text, const char *what) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    ck_assert_msg(j != NULL, "%s is not JSON: %s at %d:%d", what, e.text, e.line, e.column);
    return j;
}

START_TEST(emit_mcir_has_properties_and_states) {
    cli_result r = RUN("--emit", "mcir", gpt2());
    ck_assert_msg(r.status == 0, "%s", r.err);
    json_t *j = parse_or_fail(r.out, "--emit mcir");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "mcir")), 1);
    json_t *tensors = json_object_get(j, "tensors");
    ck_assert(json_is_object(tensors));
    const char *k;
    json_t *v;
    json_object_foreach(tensors, k, v) {
        const char *st = json_string_value(json_object_get(v, "memory_state"));
        ck_assert_msg(st && (!strcmp(st, "materialized") || !strcmp(st, "streaming") ||
                             !strcmp(st, "recomputable")),
                      "tensor %s", k);
    }
    size_t i;
    bool has_attention = false;
    json_array_foreach(json_object_get(j, "nodes"), i, v) {
        ck_assert(json_is_array(json_object_get(v, "properties")));
        if (!strcmp(json_string_value(json_object_get(v, "op")), "attention"))
            has_attention = true;
    }
    ck_assert_msg(has_attention, "decomposed GPT-2 attention was not fused");
    json_decref(j);
    cli_result_free(&r);
}
END_TEST

START_TEST(emit_trace_is_json_lines) {
    cli_result r = RUN("--emit", "trace", gpt2());
    ck_assert_msg(r.status == 0, "%s", r.err);
    int lines = 0, applied = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *j = parse_or_fail(line, "a trace line");
        ck_assert(json_is_integer(json_object_get(j, "seq")));
        const char *stage = json_string_value(json_object_get(j, "stage"));
        if (stage && !strcmp(stage, "rewrite")) {
            static const char *const fields[] = {"rule", "property", "anchor", "matched",
                                                 "legality", "decision"};
            for (size_t f = 0; f < 6; f++)
                ck_assert_msg(json_object_get(j, fields[f]), "trace line lacks %s: %s",
                              fields[f], line);
            const char *dec = json_string_value(json_object_get(j, "decision"));
            if (!strcmp(dec, "applied")) {
                applied++;
                ck_assert(json_is_array(json_object_get(j, "result")));
            }
        }
        lines++;
        json_decref(j);
    }
    ck_assert_int_gt(lines, 0);
    ck_assert_int_gt(applied, 0);
    cli_result_free(&r);
}
END_TEST

START_TEST(emit_plan_and_memory) {
    cli_result r = RUN("--emit", "plan", "--arch", "sm_80", gpt2());
    ck_assert_msg(r.status == 0, "%s", r.err);
    json_t *p = parse_or_fail(r.out, "--emit plan");
    ck_assert_str_eq(json_string_value(json_object_get(p, "arch")), "sm_80");
    size_t i;
    json_t *k;
    static const char *const fields[] = {"name", "nodes", "template", "tiling_strategy",
                                         "recompute_policy", "streaming_state", "reads",
                                         "writes", "grid", "block", "smem_bytes"};
    ck_assert_int_gt(json_array_size(json_object_get(p, "kernels")), 0);
    json_array_foreach(json_object_get(p, "kernels"), i, k) {
        for (size_t f = 0; f < sizeof fields / sizeof *fields; f++)
            ck_assert_msg(json_object_get(k, fields[f]), "kernel %zu lacks %s", i, fields[f]);
    }
    json_decref(p);
    cli_result_free(&r);

    r = RUN("--emit", "memory", gpt2());
    ck_assert_msg(r.status == 0, "%s", r.err);
    json_t *m = parse_or_fail(r.out, "--emit memory");
    static const char *const mfields[] = {"planner", "alignment", "arena_bytes",
                                          "lower_bound_bytes", "buffers"};
    for (size_t f = 0; f < 5; f++) ck_assert(json_object_get(m, mfields[f]));
    ck_assert_int_ge(json_integer_value(json_object_get(m, "arena_bytes")),
                     json_integer_value(json_object_get(m, "lower_bound_bytes")));
    json_array_foreach(json_object_get(m, "buffers"), i, k) {
        static const char *const bf[] = {"tensor", "size", "offset", "first", "last", "pool"};
        for (size_t f = 0; f < 6; f++) ck_assert(json_object_get(k, bf[f]));
    }
    json_decref(m);
    cli_result_free(&r);
}
END_TEST

START_TEST(emit_dot_and_cuda) {
    cli_result r = RUN("--emit", "dot", gpt2());
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "digraph"));
    cli_result_free(&r);
    r = RUN("--emit", "cuda", gpt2());
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "__global__"));
    ck_assert_msg(r.out[0] == '/' && r.out[1] == '/', "each kernel starts with a comment line");
    cli_result_free(&r);
}
END_TEST

START_TEST(out_dir_has_every_artifact) {
    char *dir = cli_tempdir();
    cli_result r = RUN("-o", dir, "--run", "--device", "cpu", mlp());
    ck_assert_msg(r.status == 0, "%s", r.err);
    static const char *const files[] = {"graph.mcir.json", "trace.jsonl", "plan.json",
                                        "memory.json", "graph.dot", "memory.svg"};
    char path[1200];
    for (size_t i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        ck_assert_msg(cli_file_exists(path), "missing %s", files[i]);
    }
    snprintf(path, sizeof path, "%s/kernels", dir);
    ck_assert_msg(cli_dir_entries(path) > 0, "no kernels/ written");
    /* no temporary directory is left behind */
    int entries = cli_dir_entries(dir);
    ck_assert_int_ge(entries, 7);
    cli_result_free(&r);
    r = RUN("-o", dir, mlp());
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(cli_dir_entries(dir), entries); /* overwritten, nothing added */
    cli_result_free(&r);
    cli_remove_tree(dir);
    free(dir);
}
END_TEST

/* --emit audit: one row per compiled kernel (NVRTC needed, else exit 3),
 * its SASS lines under it (or why not: MCIR_NVDISASM=off turns them off);
 * -o's summary reports the NVRTC compiles. */
START_TEST(emit_audit_is_a_table) {
    cli_result r = RUN("--emit", "audit", mlp());
    if (r.status == 3) {   /* built without NVRTC */
        ck_assert_ptr_nonnull(strstr(r.err, "cannot compile kernels"));
        cli_result_free(&r);
        return;
    }
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "# kernel audit for sm_90"));
    ck_assert_ptr_nonnull(strstr(r.out, "occupancy"));
    ck_assert_ptr_nonnull(strstr(r.out, " mc_"));   /* the content-named entry */
    int rows = 0;
    for (const char *q = r.out; (q = strstr(q, " mc_")); q++) rows++;
    ck_assert_int_ge(rows, 1);
    /* the SASS lines: read where nvdisasm is found, else why not */
    ck_assert_msg(strstr(r.out, "   SASS: ") &&
                      (strstr(r.out, "SASS main loop") || strstr(r.out, "SASS: not available (")),
                  "%s", r.out);
    cli_result_free(&r);
    setenv("MCIR_NVDISASM", "off", 1);
    r = RUN("--emit", "audit", mlp());
    unsetenv("MCIR_NVDISASM");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "   SASS: not available (MCIR_NVDISASM=off)"));
    cli_result_free(&r);
    char *dir = cli_tempdir();
    r = RUN("-o", dir, mlp());
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "  nvrtc    "));
    ck_assert_ptr_nonnull(strstr(r.out, "distinct sources"));
    cli_result_free(&r);
    cli_remove_tree(dir);
    free(dir);
}
END_TEST

START_TEST(inputs_are_checked) {
    cli_result r = RUN("--run", "--device", "cpu", "--input", "nosuch=x.npy", mlp());
    ck_assert_int_eq(r.status, 2);
    cli_result_free(&r);
    r = RUN("--run", "--device", "cpu", "--input",
            "x=/nonexistent/x.npy", mlp());
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "/nonexistent/x.npy"));
    cli_result_free(&r);
    char arg[1100];
    snprintf(arg, sizeof arg, "x=%s", cli_src("tests/data/cli/wrong_shape.npy"));
    r = RUN("--run", "--device", "cpu", "--input", arg, mlp());
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "input 'x'"));
    cli_result_free(&r);
}
END_TEST

/* --run writes integer outputs exactly: tests/data/ints/exact.json's
 * values beyond 2^53 land in NAME.npy as NumPy computes them. */
START_TEST(run_writes_integers_exactly) {
    char *dir = cli_tempdir();
    cli_result r = RUN("--run", "--device", "cpu", "-o", dir, cli_src("tests/data/ints/exact.json"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    cli_result_free(&r);
    static const char *const outs[] = {"add_i64", "mul_i64", "cast_a_i32", "cumsum_i64", "gather_big",
                                       "arange_i64", "where_big"};
    mcir_diag d = mcir_diag_stderr();
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) {
        char got_path[1200], rel[200];
        snprintf(got_path, sizeof got_path, "%s/%s.npy", dir, outs[i]);
        snprintf(rel, sizeof rel, "tests/data/ints/expected/%s.npy", outs[i]);
        mcir_npy got, want;
        ck_assert(mcir_npy_read(got_path, &got, &d));
        ck_assert(mcir_npy_read(cli_src(rel), &want, &d));
        int64_t n = 1;
        for (int k = 0; k < want.rank; k++) n *= want.shape[k];
        ck_assert_int_eq(got.dtype, want.dtype);
        ck_assert_msg(memcmp(got.data, want.data, (size_t)n * mcir_dtype_size(want.dtype)) == 0,
                      "%s differs from NumPy's", outs[i]);
        mcir_npy_free(&got);
        mcir_npy_free(&want);
    }
    cli_remove_tree(dir);
    free(dir);
}
END_TEST

START_TEST(gpu_or_clear_exit_3) {
    cli_result r = RUN("--run", "--device", "gpu", mlp());
    /* without a GPU or driver: exit 3 and a message; with one: success */
    ck_assert_msg(r.status == 0 || (r.status == 3 && strstr(r.err, "error: ")),
                  "exit %d: %s", r.status, r.err);
    cli_result_free(&r);
}
END_TEST

START_TEST(verify_reports_every_output) {
    cli_result r = RUN("--verify", "--seed", "7", gpt2());
    ck_assert_msg(r.status == 0, "%s\n%s", r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "verify   y: max abs err"));
    ck_assert_ptr_nonnull(strstr(r.out, " ok"));
    cli_result_free(&r);
}
END_TEST

START_TEST(trace_is_printed_on_stderr) {
    cli_result r = RUN("--trace", "--emit", "mcir", gpt2());
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "weighted_streaming_reduction"));
    cli_result_free(&r);
}
END_TEST

START_TEST(bad_catalog_is_exit_1) {
    cli_result r = RUN("--catalog", "/nonexistent/rules.yaml", mlp());
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "/nonexistent/rules.yaml"));
    cli_result_free(&r);
}
END_TEST

START_TEST(user_catalog_without_default) {
    /* llama_block writes SiLU out as x*sigmoid(x); a user rule alone fuses it */
    const char *llama = cli_src("examples/llama_block/graph.json");
    const char *rules = cli_src("tests/data/catalog/good/user_silu.yaml");
    cli_result r = RUN("--no-default-catalog", "--catalog", rules, "--emit", "trace", llama);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "\"rule\":\"my_silu\""));
    ck_assert_ptr_null(strstr(r.out, "weighted_streaming_reduction"));
    cli_result_free(&r);
    r = RUN("--no-default-catalog", "--catalog", rules, "--verify", llama);
    ck_assert_msg(r.status == 0, "%s\n%s", r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "(1 fusions: 1 ops fused, 0 groups; 1 rewrites applied)"));
    cli_result_free(&r);
    /* without any catalog nothing is rewritten */
    r = RUN("--no-default-catalog", llama);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "(0 fusions; 0 rewrites applied)"));
    cli_result_free(&r);
}
END_TEST

START_TEST(catalog_error_has_yaml_position) {
    const char *bad = cli_src("tests/data/cli/bad_rule.yaml");
    cli_result r = RUN("--catalog", bad, mlp());
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "bad_rule.yaml:") && strstr(r.err, ": error: "), "%s", r.err);
    /* line:col present: "bad_rule.yaml:N:M: error" */
    const char *p = strstr(r.err, "bad_rule.yaml:") + strlen("bad_rule.yaml:");
    ck_assert_msg(*p >= '1' && *p <= '9', "%s", r.err);
    cli_result_free(&r);
}
END_TEST

#ifdef MCIR_HAVE_ONNX
START_TEST(onnx_model_compiles_and_verifies) {
    const char *m = cli_src("tests/data/onnx/models/encoder_layer_op14/model.onnx");
    cli_result r = RUN("--verify", m);
    ck_assert_msg(r.status == 0, "%s\n%s", r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, " ok"));
    cli_result_free(&r);
    r = RUN("--emit", "mcir", m);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "\"op\": \"attention\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"op\": \"layernorm\""));
    cli_result_free(&r);
    r = RUN("--shape", "bogus", m);
    ck_assert_int_eq(r.status, 2);
    cli_result_free(&r);
}
END_TEST
#endif

#ifdef MCIR_HAVE_ONNX
/* A language model from int64 token ids (a PyTorch export, GPT-2 style):
 * mcirc runs it on the CPU with the committed ids, --verify passes, and
 * the logits it writes match PyTorch's within 1e-4 of their largest. */
START_TEST(onnx_language_model_from_token_ids) {
    char m[1100], ids[1200], want[1100], got[400], dir[256];
    snprintf(m, sizeof m, "%s", test_path("tests/data/onnx/models/gpt2_tiny_op17/model.onnx"));
    snprintf(ids, sizeof ids, "input_ids=%s",
             test_path("tests/data/onnx/models/gpt2_tiny_op17/input_0.npy"));
    snprintf(want, sizeof want, "%s", test_path("tests/data/onnx/models/gpt2_tiny_op17/output_0.npy"));
    ck_assert(test_tempdir("cli-gpt2", dir, sizeof dir));
    cli_result r = RUN("--run", "--device", "cpu", "--verify", "--input", ids, "-o", dir, m);
    ck_assert_msg(r.status == 0, "%s\n%s", r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, " ok"));
    cli_result_free(&r);
    snprintf(got, sizeof got, "%s/y.npy", dir);
    mcir_diag d = mcir_diag_stderr();
    mcir_npy a, b;
    ck_assert(mcir_npy_read(got, &a, &d));
    ck_assert(mcir_npy_read(want, &b, &d));
    ck_assert(a.dtype == MCIR_DTYPE_F32 && b.dtype == MCIR_DTYPE_F32 && a.rank == 3 && b.rank == 3);
    int64_t n = a.shape[0] * a.shape[1] * a.shape[2];
    ck_assert_int_eq(n, b.shape[0] * b.shape[1] * b.shape[2]);
    mcir_compare_result c;
    mcir_values_compare(a.data, b.data, n, &c);
    ck_assert_msg(mcir_compare_within(&c, 1e-4), "logits rel err %g", c.max_rel);
    mcir_npy_free(&a);
    mcir_npy_free(&b);
    test_remove_dir(dir);
}
END_TEST
#endif

/* Runs mcirc over every file with the suffix in a corpus directory, as
 * the graph (or with `--catalog FILE` / `--input x=FILE`) and requires exit
 * 1 with a GCC-style error on stderr, nothing on stdout, no signal. */
static void run_corpus(const char *dir_rel, const char *suffix, const char *mode) {
    const char *dir = cli_src(dir_rel);
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "no corpus at %s", dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name), sl = strlen(suffix);
        if (len <= sl || strcmp(e->d_name + len - sl, suffix) != 0) continue;
        char path[2048], arg[2100];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        cli_result r;
        if (!strcmp(mode, "graph")) r = RUN(path);
        else if (!strcmp(mode, "catalog")) r = RUN("--catalog", path, mlp());
        else {
            snprintf(arg, sizeof arg, "x=%s", path);
            r = RUN("--run", "--device", "cpu", "--input", arg, mlp());
        }
        ck_assert_msg(r.status == 1, "%s: exit %d\n%s", path, r.status, r.err);
        ck_assert_msg(strstr(r.err, ": error: ") != NULL, "%s: no diagnostic: %s", path, r.err);
        ck_assert_msg(r.out[0] == 0, "%s: printed on stdout", path);
        cli_result_free(&r);
        n++;
    }
    closedir(d);
    ck_assert_int_gt(n, 0);
}

START_TEST(malformed_graphs_never_crash) { run_corpus("tests/data/bad", ".json", "graph"); }
END_TEST
#ifdef MCIR_HAVE_ONNX
START_TEST(malformed_onnx_never_crash) { run_corpus("tests/data/onnx/bad", ".onnx", "graph"); }
END_TEST
#else
/* Built with -DMCIR_ONNX=OFF: a model is refused, saying why. */
START_TEST(onnx_model_without_importer_is_exit_3) {
    const char *m = cli_src("tests/data/onnx/models/encoder_layer_op14/model.onnx");
    cli_result r = RUN(m);
    ck_assert_int_eq(r.status, 3);
    ck_assert_msg(strstr(r.err, "model.onnx: error: ") && strstr(r.err, "without ONNX import"), "%s", r.err);
    cli_result_free(&r);
    r = RUN("--shape", "x=1x4", cli_src("examples/mlp_tiny/graph.json"));
    ck_assert_int_eq(r.status, 2);
    cli_result_free(&r);
}
END_TEST
#endif
START_TEST(malformed_catalogs_never_crash) {
    run_corpus("tests/data/catalog/bad", ".yaml", "catalog");
}
END_TEST
START_TEST(malformed_npy_inputs_never_crash) { run_corpus("tests/data/bad/npy", ".npy", "npy"); }
END_TEST

/* Weight values JSON cannot spell (±inf, NaN, the f32 extremes) survive
 * the mcir artifact and read back identically. */
START_TEST(artifact_round_trips_nonfinite_weights) {
    char *dir = cli_tempdir();
    char first[1200], second[1200];
    snprintf(first, sizeof first, "%s/a.json", dir);
    snprintf(second, sizeof second, "%s/b.json", dir);
    cli_result r = RUN("--emit", "mcir", cli_src("tests/data/cli/nonfinite.json"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    FILE *f = fopen(first, "w");
    fputs(r.out, f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(r.out, "\"-inf\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"nan\""));
    cli_result r2 = RUN("--emit", "mcir", first);
    ck_assert_msg(r2.status == 0, "%s", r2.err);
    ck_assert_str_eq(r.out, r2.out);
    cli_result_free(&r);
    cli_result_free(&r2);
    cli_remove_tree(dir);
    free(dir);
}
END_TEST

static char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)len + 1);
    *n = fread(buf, 1, (size_t)len, f);
    fclose(f);
    return buf;
}

#ifdef MCIR_HAVE_ONNX
/* -o on an imported model: large weights go to weights/NAME.npy, and the
 * artifact compiles and runs to the very same outputs as the model. */
START_TEST(out_dir_artifact_reruns_identically) {
    const char *m = cli_src("tests/data/onnx/models/encoder_layer_op14/model.onnx");
    char *a = cli_tempdir(), *b = cli_tempdir();
    char artifact[1200], weights[1200], ya[1200], yb[1200];
    snprintf(artifact, sizeof artifact, "%s/graph.mcir.json", a);
    snprintf(weights, sizeof weights, "%s/weights", a);
    snprintf(ya, sizeof ya, "%s/y.npy", a);
    snprintf(yb, sizeof yb, "%s/y.npy", b);
    cli_result r = RUN("--run", "--device", "cpu", "-o", a, m);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_gt(cli_dir_entries(weights), 0);
    cli_result_free(&r);
    r = RUN("--run", "--device", "cpu", "-o", b, artifact);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cli_result_free(&r);
    size_t na, nb;
    char *da = read_all(ya, &na), *db = read_all(yb, &nb);
    ck_assert_msg(da && db && na == nb && memcmp(da, db, na) == 0,
                  "the artifact's output differs from the model's");
    free(da);
    free(db);
    cli_remove_tree(a);
    cli_remove_tree(b);
    free(a);
    free(b);
}
END_TEST
#endif

/* --sync and --watchdog reach the runtime: on the emulated device, with a
 * fault or a hang injected (MCIR_EMU_FAULT / MCIR_EMU_HANG), exit 3 naming
 * the kernel (test_emu_device checks the runtime's side in full). */
START_TEST(gpu_diagnostics_options) {
    if (!test_have_cxx()) return;   /* no emulated device without a host C++ compiler */
    const char *g = cli_src("examples/attention_f16/graph.json");
    setenv("MCIR_EMU_FAULT", "mc_streaming_attention", 1);
    cli_result r = RUN("--run", "--device", "emu", "--sync", g);
    ck_assert_msg(r.status == 3 && strstr(r.err, "GPU fault: CUDA_ERROR_ILLEGAL_ADDRESS (grid") &&
                  strstr(r.err, "synchronous mode"), "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "output") == NULL, "outputs after a fault: %s", r.out);
    cli_result_free(&r);
    unsetenv("MCIR_EMU_FAULT");
    setenv("MCIR_EMU_HANG", "mc_streaming_attention", 1);
    r = RUN("--run", "--device", "emu", "--watchdog", "0.3", g);
    ck_assert_msg(r.status == 3 && strstr(r.err, "error: hang: still running after") &&
                  strstr(r.err, "set by --watchdog"), "exit %d: %s", r.status, r.err);
    cli_result_free(&r);
    unsetenv("MCIR_EMU_HANG");
}
END_TEST

/* A cuBLAS or cuBLASLt that does not open (injected on the emulated device:
 * MCIR_EMU_BLAS_OPEN) is one warning naming why, and the run's outputs
 * still match the graph's (the generated kernels take the GEMMs). */
START_TEST(blas_that_does_not_load_is_a_warning) {
    if (!test_have_cxx()) return;
    const char *g = cli_src("examples/mlp_tiny/graph.json");
    static const char *const modes[] = {"fail", "lt"};
    static const char *const want[] = {"warning: cuBLAS did not load (cuBLAS error 1 (CUBLAS_STATUS_NOT_INITIALIZED)",
                                       "warning: cuBLASLt did not load (cuBLASLt error 1 (CUBLAS_STATUS_NOT_INITIALIZED)"};
    for (int i = 0; i < 2; i++) {
        setenv("MCIR_EMU_BLAS_OPEN", modes[i], 1);
        cli_result r = RUN("--run", "--device", "emu", "--verify", g);
        ck_assert_msg(r.status == 0 && strstr(r.err, want[i]) && strstr(r.out, "ok") && !strstr(r.out, "FAIL"),
                      "%s: exit %d: %s%s", modes[i], r.status, r.out, r.err);
        cli_result_free(&r);
    }
    unsetenv("MCIR_EMU_BLAS_OPEN");
    /* disabled on purpose: nothing to warn about */
    setenv("MCIR_NO_CUBLAS", "1", 1);
    cli_result r = RUN("--run", "--device", "emu", g);
    ck_assert_msg(r.status == 0 && !strstr(r.err, "did not load"), "exit %d: %s", r.status, r.err);
    cli_result_free(&r);
    unsetenv("MCIR_NO_CUBLAS");
}
END_TEST

int main(void) {
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("contract");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, help_and_version);
    tcase_add_test(tc, blas_that_does_not_load_is_a_warning);
    tcase_add_test(tc, usage_errors_exit_2);
    tcase_add_test(tc, planner_help_lists_planners);
    tcase_add_test(tc, run_writes_integers_exactly);
    tcase_add_test(tc, missing_graph_is_exit_1_with_path);
    tcase_add_test(tc, bad_graph_writes_nothing);
    tcase_add_test(tc, summary_by_default);
    tcase_add_test(tc, emit_mcir_has_properties_and_states);
    tcase_add_test(tc, emit_trace_is_json_lines);
    tcase_add_test(tc, emit_plan_and_memory);
    tcase_add_test(tc, emit_dot_and_cuda);
    tcase_add_test(tc, out_dir_has_every_artifact);
    tcase_add_test(tc, inputs_are_checked);
    tcase_add_test(tc, gpu_or_clear_exit_3);
    tcase_add_test(tc, gpu_diagnostics_options);
    tcase_add_test(tc, verify_reports_every_output);
    tcase_add_test(tc, trace_is_printed_on_stderr);
    tcase_add_test(tc, bad_catalog_is_exit_1);
    tcase_add_test(tc, user_catalog_without_default);
    tcase_add_test(tc, catalog_error_has_yaml_position);
#ifdef MCIR_HAVE_ONNX
    tcase_add_test(tc, onnx_model_compiles_and_verifies);
    tcase_add_test(tc, onnx_language_model_from_token_ids);
    tcase_add_test(tc, out_dir_artifact_reruns_identically);
    tcase_add_test(tc, malformed_onnx_never_crash);
#else
    tcase_add_test(tc, onnx_model_without_importer_is_exit_3);
#endif
    tcase_add_test(tc, artifact_round_trips_nonfinite_weights);
    tcase_add_test(tc, emit_audit_is_a_table);
    tcase_add_test(tc, malformed_graphs_never_crash);
    tcase_add_test(tc, malformed_catalogs_never_crash);
    tcase_add_test(tc, malformed_npy_inputs_never_crash);
    suite_add_tcase(s, tc);
    return test_main(s);
}
