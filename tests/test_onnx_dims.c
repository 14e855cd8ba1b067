/*
 * test_onnx_dims.c — ONNX dim_params kept symbolic over a range
 * (onnx/symbolic.c, docs/onnx.md "Symbolic dimensions"; issue #33):
 *  - PyTorch exports with dynamic axes (a causal block, a tiny GPT-2, a
 *    TransformerEncoderLayer, Hugging Face's GPT-2 mask, torchvision's
 *    ViT; tests/data/onnx/dims, made by
 *    scripts/gen_onnx_dims.py) compiled once by mcirc with --dim ranges,
 *    run on the emulated device at three sizes each against onnxruntime's
 *    outputs, nothing compiled again after the first size;
 *  - the graph the importer hands back: dims, symbolic input shapes;
 *  - the models a range cannot keep symbolic (a shape that is no
 *    polynomial, a folded constant that depends on the size, a range past
 *    a causal mask's buffer): "PATH: error: ..." and exit 1; a run size
 *    outside the range: exit 2.
 * Tolerance: max|got − want| / max|want| <= 1e-4 (f32), the project's rule.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "mcir/mcir.h"
#include "onnx/onnx.h"
#include "test_util.h"

#define RUN(...) cli_run((const char *const[]){__VA_ARGS__, NULL})
#define REL_TOL 1e-4

static const char *dims_path(const char *rel) {
    char r[512];
    snprintf(r, sizeof r, "tests/data/onnx/dims/%s", rel);
    return cli_src(r);
}

/* got against want (f32 .npy files): same shape, finite, varied values,
 * max|got − want| / max|want| within REL_TOL. */
static void check_npy(const char *got_path, const char *want_path) {
    mcir_diag d = mcir_diag_stderr();
    mcir_npy got, want;
    ck_assert_msg(mcir_npy_read(got_path, &got, &d), "%s", got_path);
    ck_assert_msg(mcir_npy_read(want_path, &want, &d), "%s", want_path);
    ck_assert_int_eq(got.rank, want.rank);
    for (int i = 0; i < got.rank; i++) ck_assert_int_eq(got.shape[i], want.shape[i]);
    ck_assert(got.dtype == MCIR_DTYPE_F32 && want.dtype == MCIR_DTYPE_F32);
    int64_t n = 1;
    for (int i = 0; i < got.rank; i++) n *= got.shape[i];
    const float *g = got.data, *w = want.data;
    double err = 0, scale = 0, lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(isfinite(g[i]), "%s: element %lld is not finite", got_path, (long long)i);
        err = fmax(err, fabs((double)g[i] - w[i]));
        scale = fmax(scale, fabs((double)w[i]));
        lo = fmin(lo, g[i]);
        hi = fmax(hi, g[i]);
    }
    ck_assert_msg(hi - lo > 1e-3, "%s: the values do not vary", got_path);
    ck_assert_msg(err <= REL_TOL * scale, "%s against %s: max abs err %g, max |want| %g", got_path,
                  want_path, err, scale);
    mcir_npy_free(&got);
    mcir_npy_free(&want);
}

/* Every run of model `key` in index.json: mcirc with the ranges in
 * dims[0..n_dims) runs `device` (emu: the emulated device; cpu: the
 * reference interpreter on the one size-generic graph) at the run's sizes
 * (from the input file), --verify on, and its output matches
 * onnxruntime's. */
static void run_model_on(const char *key, const char *const *dims, int n_dims, const char *summary,
                         const char *device) {
    bool emu = !strcmp(device, "emu");
    if (emu && !test_have_cxx()) return;   /* the emulator compiles kernels with g++ */
    json_error_t je;
    json_t *index = json_load_file(dims_path("index.json"), 0, &je);
    ck_assert_msg(index, "%s", je.text);
    json_t *e = json_object_get(index, key);
    ck_assert(e);
    json_t *runs = json_object_get(e, "runs");
    ck_assert_int_ge(json_array_size(runs), 3);
    char rel_model[256], model[700];
    snprintf(rel_model, sizeof rel_model, "%s/%s", key,
             json_string_value(json_object_get(e, "model")));
    snprintf(model, sizeof model, "%s", dims_path(rel_model));
    const char *in_name = json_string_value(json_object_get(e, "input"));
    for (size_t i = 0; i < json_array_size(runs); i++) {
        json_t *r = json_array_get(runs, i);
        char rel[256], input[700], want[700], dir[256], got[300];
        snprintf(rel, sizeof rel, "%s/%s", key, json_string_value(json_object_get(r, "input")));
        snprintf(input, sizeof input, "%s=%s", in_name, dims_path(rel));
        snprintf(rel, sizeof rel, "%s/%s", key, json_string_value(json_object_get(r, "output")));
        snprintf(want, sizeof want, "%s", dims_path(rel));
        ck_assert(test_tempdir("onnx_dims", dir, sizeof dir));
        const char *args[32];
        int k = 0;
        for (int j = 0; j < n_dims; j++) args[k++] = "--dim", args[k++] = dims[j];
        const char *tail[] = {"--run", "--device", device, "--verify", "--input", input, "-o", dir,
                              model, NULL};
        for (int j = 0; tail[j]; j++) args[k++] = tail[j];
        args[k] = NULL;
        cli_result res = cli_run(args);
        ck_assert_msg(res.status == 0, "%s run %zu: exit %d\n%s%s", key, i, res.status, res.out,
                      res.err);
        ck_assert_msg(strstr(res.out, summary) != NULL, "%s: no '%s' in\n%s", key, summary, res.out);
        if (emu) ck_assert_ptr_nonnull(strstr(res.out, "(emu vs the original graph)"));
        ck_assert_msg(strstr(res.out, " ok\n") && !strstr(res.out, "FAIL"), "%s", res.out);
        if (emu && i > 0)   /* compiled once: later sizes reuse every kernel */
            ck_assert_msg(strstr(res.out, "\n  emu      0 compiles") != NULL, "%s", res.out);
        snprintf(got, sizeof got, "%s/y.npy", dir);
        check_npy(got, want);
        cli_result_free(&res);
        cli_remove_tree(dir);
    }
    json_decref(index);
}

static void run_model(const char *key, const char *const *dims, int n_dims, const char *summary) {
    run_model_on(key, dims, n_dims, summary, "emu");
}

/* nanoGPT's causal block over batch and seq: the mask sliced from its
 * [1, 1, 16, 16] buffer becomes the causal attention */
START_TEST(causal_block_over_batch_and_seq) {
    const char *dims[] = {"seq=1..16", "batch=1..4"};
    run_model("causal_block", dims, 2,
              "dims     seq in [1, 16], batch in [1, 4]; shapes checked for every size, plan and "
              "arena at the largest; 7 of 7 kernels size-generic\n");
}
END_TEST

/* a tiny GPT-2 over seq: positions arange(seq), two causal blocks */
START_TEST(gpt2_tiny_over_seq) {
    const char *dims[] = {"seq=1..16"};
    run_model("gpt2_tiny", dims, 1, "dims     seq in [1, 16]; ");
}
END_TEST

/* nn.TransformerEncoderLayer over batch and seq: its reshapes to
 * [seq, batch*heads, 16] keep the product as -1 */
START_TEST(encoder_layer_over_batch_and_seq) {
    const char *dims[] = {"batch=1..4", "seq=1..32"};
    run_model("encoder_layer", dims, 2, "dims     batch in [1, 4], seq in [1, 32]; ");
}
END_TEST

/* Hugging Face GPT-2's mask: where(bool buffer [.., k-q:k, :k], scores,
 * min) is the causal attention too, with no mask tensor */
/* Hugging Face GPT-2, Llama (GQA, rotary) and BERT exported by torch's
 * dynamo exporter with a dynamic seq (scripts/gen_onnx_hf.py --dynamic):
 * the mask's GatherND index tuples (an integer constant expanded to the
 * positions' shape, strides that follow seq) and BERT's GatherElements
 * stay runtime ops, so each imports as one graph over seq in [2, 32],
 * within 1e-4 of onnxruntime at seq 2, 5 and 11 — BERT's kernels on the
 * emulated device, GPT-2's and Llama's (and BERT's TorchScript export)
 * through the interpreter (the
 * emulator's symbolic kernels are covered above at a fraction of the
 * time under the sanitizers). */
START_TEST(hf_dynamo_exports_over_seq) {
    const char *dims[] = {"seq=2..32"};
    run_model_on("hf_bert_dynamo", dims, 1, "dims     seq in [2, 32]; ", "emu");
    run_model_on("hf_gpt2_dynamo", dims, 1, "dims     seq in [2, 32]; ", "cpu");
    run_model_on("hf_llama_dynamo", dims, 1, "dims     seq in [2, 32]; ", "cpu");
    /* BERT by the TorchScript exporter (GPT-2 and Llama stop there, in
     * PyTorch, at aten::diff) */
    run_model_on("hf_bert_torchscript", dims, 1, "dims     seq in [2, 32]; ", "cpu");
}
END_TEST

START_TEST(hf_attention_mask_is_causal) {
    const char *dims[] = {"seq=1..24", "batch=1..4"};
    cli_result r = RUN("--emit", "mcir", "--dim", "seq=1..24", "--dim", "batch=1..4",
                       dims_path("hf_attention/model.onnx"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "\"causal\": true"));
    ck_assert_ptr_null(strstr(r.out, "\"op\": \"softmax\""));
    ck_assert_ptr_null(strstr(r.out, "\"op\": \"where\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"shape\": [\"batch\", \"seq\", 32]"));
    cli_result_free(&r);
    run_model("hf_attention", dims, 2,
              "dims     seq in [1, 24], batch in [1, 4]; shapes checked for every size, plan and "
              "arena at the largest; 2 of 2 kernels size-generic\n");
}
END_TEST

/* torchvision's ViT over the batch: the class token expanded to it stays
 * a runtime broadcast (src + zeros of arange(batch)) */
START_TEST(vit_over_batch) {
    const char *dims[] = {"batch=1..4"};
    run_model("vit", dims, 1, "dims     batch in [1, 4]; ");
}
END_TEST

/* the graph an ONNX range gives survives graph.json: -o's graph.mcir.json
 * declares the dims and runs at a size in range like the model */
START_TEST(symbolic_import_round_trips_through_graph_json) {
    char dir[256], dir2[256], graph[400], input[600], got[400];
    ck_assert(test_tempdir("onnx_dims_rt", dir, sizeof dir));
    ck_assert(test_tempdir("onnx_dims_rt2", dir2, sizeof dir2));
    cli_result r = RUN("--dim", "seq=1..16", "-o", dir, dims_path("gpt2_tiny/model.onnx"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    cli_result_free(&r);
    snprintf(graph, sizeof graph, "%s/graph.mcir.json", dir);
    char *text = test_slurp(graph, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "\"seq\": {\"min\": 1, \"max\": 16}"));
    ck_assert_ptr_nonnull(strstr(text, "\"shape\": [1, \"seq\"]"));
    free(text);
    snprintf(input, sizeof input, "input_ids=%s", dims_path("gpt2_tiny/x_b1_s6.npy"));
    r = RUN("--run", "--device", "cpu", "--input", input, "-o", dir2, graph);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "output   y f32 [1, 6, 128]"));
    cli_result_free(&r);
    snprintf(got, sizeof got, "%s/y.npy", dir2);
    check_npy(got, dims_path("gpt2_tiny/y_b1_s6.npy"));
    cli_remove_tree(dir);
    cli_remove_tree(dir2);
}
END_TEST

static mcir_graph *import_capture(const char *path, const mcir_onnx_dim *dims, int n_dims,
                                  char **msg) {
    size_t len = 0;
    *msg = NULL;
    FILE *f = open_memstream(msg, &len);
    ck_assert(f);
    mcir_diag d = mcir_diag_to(f);
    mcir_graph *g = mcir_onnx_read_ex(path, NULL, 0, dims, n_dims, &d);
    fclose(f);
    ck_assert_int_eq(g == NULL, d.n_errors > 0);
    return g;
}

/* the C API: dims with their ranges, input shapes that name them, bound at
 * the largest sizes; a dim_param fixed besides stays an integer */
START_TEST(import_gives_dims_and_symbolic_inputs) {
    char *msg;
    const char *m = dims_path("causal_block/model.onnx");
    mcir_onnx_dim dims[2] = {{"seq", 2, 12}, {"batch", 1, 3}};
    mcir_graph *g = import_capture(m, dims, 2, &msg);
    ck_assert_msg(g != NULL, "%s", msg);
    free(msg);
    ck_assert_int_eq(g->n_dims, 2);
    ck_assert_str_eq(g->dims[0].name, "seq");
    ck_assert(g->dims[0].min == 2 && g->dims[0].max == 12 && g->dims[0].value == 12);
    ck_assert(g->dims[1].min == 1 && g->dims[1].max == 3 && g->dims[1].value == 3);
    const mcir_tensor *x = mcir_graph_find_tensor(g, "x"), *y = mcir_graph_find_tensor(g, "y");
    ck_assert(x && x->sym && y && y->sym);
    char buf[64];
    ck_assert_str_eq(mcir_extent_str(g, &x->sym[0], buf, sizeof buf), "batch");
    ck_assert_str_eq(mcir_extent_str(g, &x->sym[1], buf, sizeof buf), "seq");
    ck_assert_int_eq(x->shape[2], 64);
    ck_assert(x->shape[0] == 3 && x->shape[1] == 12 && y->shape[1] == 12);
    mcir_graph_free(g);

    mcir_onnx_dim one[2] = {{"seq", 1, 16}, {"batch", 2, 0}};   /* batch fixed to 2 */
    g = import_capture(m, one, 2, &msg);
    ck_assert_msg(g != NULL, "%s", msg);
    free(msg);
    ck_assert_int_eq(g->n_dims, 1);
    x = mcir_graph_find_tensor(g, "x");
    ck_assert(x->sym && x->shape[0] == 2 && mcir_extent_is_const(&x->sym[0], NULL));
    mcir_graph_free(g);

    /* a range for one dim_param, none for the other: today's error */
    g = import_capture(m, one, 1, &msg);
    ck_assert_ptr_null(g);
    ck_assert_msg(strstr(msg, "graph input 'x' has a dynamic dimension 0 ('batch'); pin it with "
                             "--shape x=D1xD2x... or --dim batch=N"), "%s", msg);
    free(msg);
}
END_TEST

/* what a range cannot keep symbolic: exit 1, "PATH: error: ..." naming the
 * node or tensor and the dimension */
START_TEST(what_a_range_cannot_keep_symbolic) {
    static const struct {
        const char *model, *dim, *msg;
    } cases[] = {
        /* x[:, ::2]: ceil(seq / 2) rows */
        {"errors/every_other.onnx", "seq=1..16",
         "every_other.onnx: error: extent 1 of tensor '/Slice_output_0' (made by node '/Slice') "
         "is not a polynomial in dimension 'seq' with integer coefficients (it is 3 at seq=5, 4 "
         "at seq=7, 6 at seq=11, 7 at seq=13), so it cannot be kept symbolic over the range; fix "
         "the size with --dim seq=N"},
        /* x + torch.ones(x.size(1)): a folded constant of seq elements */
        {"errors/ones_of_length.onnx", "seq=1..16",
         "ones_of_length.onnx: error: the importer folds tensor '/ConstantOfShape_output_0' "
         "(read by node '/Add') into a constant (a weight) that depends on dimension 'seq' ([5] at "
         "seq=5, [7] at seq=7): a weight cannot vary over the range"},
        /* the causal mask's buffer has 16 rows */
        {"causal_block/model.onnx", "seq=1..64",
         "model.onnx: error: node '/Where': the mask is a slice [:seq, :seq] of buffer 'bias', "
         "which has 16 rows, but seq reaches 64 for dimension 'seq' in [1, 64] (the model cannot "
         "run beyond 16); narrow the range with --dim seq=1..16"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cli_result r = RUN("--dim", cases[i].dim, "--dim", "batch=1..2", dims_path(cases[i].model));
        if (strstr(cases[i].model, "errors/")) {   /* no batch there */
            cli_result_free(&r);
            r = RUN("--dim", cases[i].dim, dims_path(cases[i].model));
        }
        ck_assert_msg(r.status == 1, "%s: exit %d\n%s", cases[i].model, r.status, r.err);
        ck_assert_msg(strstr(r.err, cases[i].msg) != NULL, "%s: no '%s' in\n%s", cases[i].model,
                      cases[i].msg, r.err);
        ck_assert_ptr_null(strstr(r.out, "kernels"));
        cli_result_free(&r);
    }
    /* a run size outside the range: a usage error */
    cli_result r = RUN("--run", "--device", "cpu", "--dim", "seq=1..16", "--dim", "batch=1..2",
                       "--dim", "seq=20", dims_path("causal_block/model.onnx"));
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--dim seq=20: dimension 'seq' ranges over [1, 16]"));
    cli_result_free(&r);
    /* an input file outside the range: invalid input */
    char input[600];
    snprintf(input, sizeof input, "x=%s", dims_path("causal_block/x_b3_s16.npy"));
    r = RUN("--run", "--device", "cpu", "--dim", "seq=1..8", "--dim", "batch=1..4", "--input",
            input, dims_path("causal_block/model.onnx"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "x_b3_s16.npy: error: input 'x' has 16 in dim 1, which is "
                                "dimension 'seq': outside its range [1, 8]"), "%s", r.err);
    cli_result_free(&r);
    /* a fixed size inside the range runs on the CPU at it */
    r = RUN("--run", "--device", "cpu", "--dim", "seq=1..16", "--dim", "batch=1..2", "--dim",
            "seq=5", dims_path("causal_block/model.onnx"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "output   y f32 [2, 5, 64]"));
    cli_result_free(&r);
}
END_TEST

static Suite *onnx_dims_suite(void) {
    Suite *s = suite_create("onnx_dims");
    TCase *tc = tcase_create("ranges");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, import_gives_dims_and_symbolic_inputs);
    tcase_add_test(tc, what_a_range_cannot_keep_symbolic);
    tcase_add_test(tc, causal_block_over_batch_and_seq);
    tcase_add_test(tc, gpt2_tiny_over_seq);
    tcase_add_test(tc, encoder_layer_over_batch_and_seq);
    tcase_add_test(tc, hf_attention_mask_is_causal);
    tcase_add_test(tc, hf_dynamo_exports_over_seq);
    tcase_add_test(tc, vit_over_batch);
    tcase_add_test(tc, symbolic_import_round_trips_through_graph_json);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_main(onnx_dims_suite()); }
