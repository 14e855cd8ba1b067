/*
 * test_onnx.c — the ONNX importer (onnx/onnx.h):
 *  - ONNX's own backend node tests for every mapped op (tests/data/onnx/
 *    node/index.json, made by scripts/gen_onnx_tests.py) through import
 *    and the reference interpreter;
 *  - PyTorch exports at opsets 14 and 17 (TransformerEncoderLayer, a
 *    nanoGPT causal block, torchvision's VisionTransformer, squeezenet)
 *    against PyTorch's outputs, and the rewrite engine fusing attention
 *    and layer norm on them without changing the result;
 *  - malformed files and unsupported models fail with a message, never a
 *    crash; --shape pins; external data; the Where → additive mask rule;
 *    the imported graph survives graph.json (--emit mcir) and back.
 * Tolerance: max|got − want| / max|want| <= 1e-4 (f32), the project's rule.
 */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "onnx/onnx.h"
#include "rewrites/rewrites.h"
#include "test_util.h"

#define REL_TOL 1e-4

/* tests/data/onnx/rel under the source tree (test_path's rotating buffers). */
static const char *data_path(const char *rel) {
    char r[2048];
    snprintf(r, sizeof r, "tests/data/onnx/%s", rel);
    return test_path(r);
}

static json_t *load_json(const char *rel) {
    json_error_t err;
    json_t *j = json_load_file(data_path(rel), 0, &err);
    if (!j) {
        fprintf(stderr, "%s: %s\n", data_path(rel), err.text);
        exit(1);
    }
    return j;
}

/* Imports path, capturing the diagnostics into *msg (malloc'd). */
static mcir_graph *import_capture(const char *path, const mcir_onnx_shape *pins, int n_pins,
                                  char **msg) {
    size_t len = 0;
    *msg = NULL;
    FILE *f = open_memstream(msg, &len);
    ck_assert(f);
    mcir_diag d = mcir_diag_to(f);
    mcir_graph *g = mcir_onnx_read(path, pins, n_pins, &d);
    fclose(f);
    ck_assert_int_eq(g == NULL, d.n_errors > 0);
    return g;
}

static mcir_graph *import_ok(const char *path) {
    char *msg;
    mcir_graph *g = import_capture(path, NULL, 0, &msg);
    ck_assert_msg(g, "%s did not import:\n%s", path, msg);
    free(msg);
    return g;
}

/* Sets the graph's inputs from .npy files (in order). */
static void set_inputs(mcir_graph *g, mcir_env *e, json_t *inputs) {
    mcir_diag d = mcir_diag_stderr();
    ck_assert_int_eq((int)json_array_size(inputs), g->n_inputs);
    for (size_t i = 0; i < json_array_size(inputs); i++) {
        mcir_npy n;
        const char *p = data_path(json_string_value(json_array_get(inputs, i)));
        ck_assert_msg(mcir_npy_read(p, &n, &d), "%s", p);
        const mcir_tensor *t = g->inputs[i];
        ck_assert_msg(n.dtype == t->dtype && n.rank == t->rank &&
                          !memcmp(n.shape, t->shape, sizeof(int64_t) * (size_t)t->rank),
                      "%s does not match input '%s'", p, t->name);
        mcir_env_set_raw(e, t, n.data);
        mcir_npy_free(&n);
    }
}

/* max|got-want| / max|want| over finite wants; non-finite wants must match. */
static double rel_error(const float *got, const float *want, int64_t n) {
    double maxref = 0, maxerr = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(want[i])) maxref = fmax(maxref, fabs(want[i]));
    for (int64_t i = 0; i < n; i++) {
        if (isnan(want[i])) {
            if (!isnan(got[i])) return INFINITY;
        } else if (isinf(want[i])) {
            if (got[i] != want[i]) return INFINITY;
        } else {
            double err = fabs((double)got[i] - want[i]);
            if (!(err <= maxerr)) maxerr = err; /* NaN got propagates */
        }
    }
    return maxerr / (maxref > 0 ? maxref : 1.0);
}

static void check_outputs(mcir_graph *g, mcir_env *e, json_t *outputs, const char *what) {
    mcir_diag d = mcir_diag_stderr();
    ck_assert_int_eq((int)json_array_size(outputs), g->n_outputs);
    for (size_t i = 0; i < json_array_size(outputs); i++) {
        mcir_npy n;
        const char *p = data_path(json_string_value(json_array_get(outputs, i)));
        ck_assert_msg(mcir_npy_read(p, &n, &d), "%s", p);
        const mcir_tensor *t = g->outputs[i];
        int64_t numel = 1;
        for (int k = 0; k < n.rank; k++) numel *= n.shape[k];
        ck_assert_msg(numel == mcir_tensor_numel(t), "%s: output '%s' has %lld elements, %s %lld",
                      what, t->name, (long long)mcir_tensor_numel(t), p, (long long)numel);
        ck_assert_msg(n.dtype == t->dtype, "%s: output '%s' is %s, %s holds %s", what, t->name,
                      mcir_dtype_name(t->dtype), p, mcir_dtype_name(n.dtype));
        if (mcir_dtype_is_integer(t->dtype)) {   /* integers and bool exactly, all 64 bits */
            const int64_t *gi = mcir_env_get_int(e, t);
            ck_assert(gi);
            for (int64_t k = 0; k < numel; k++)
                ck_assert_msg(gi[k] == mcir_value_get_int(n.dtype, n.data, k),
                              "%s: output '%s'[%lld] is %lld, expected %lld", what, t->name, (long long)k,
                              (long long)gi[k], (long long)mcir_value_get_int(n.dtype, n.data, k));
            mcir_npy_free(&n);
            continue;
        }
        float *got = mcir_env_get(e, t), *want = malloc(sizeof(float) * (size_t)(numel ? numel : 1));
        ck_assert(got && want);
        mcir_values_to_f32(n.dtype, n.data, want, numel);
        /* f32 to the suite's tolerance, f16 to its storage's */
        double tol = t->dtype == MCIR_DTYPE_F32 ? REL_TOL : mcir_compare_tolerance(t->dtype);
        double rel = rel_error(got, want, numel);
        ck_assert_msg(rel <= tol, "%s: output '%s' rel err %.3g > %g", what, t->name, rel, tol);
        free(want);
        mcir_npy_free(&n);
    }
}

/* Imports, runs and compares one index entry. */
static void run_entry(const char *name, json_t *entry) {
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g = import_ok(data_path(json_string_value(json_object_get(entry, "model"))));
    mcir_env *e = mcir_env_new(g, 0);
    set_inputs(g, e, json_object_get(entry, "inputs"));
    ck_assert_msg(mcir_interp_run(g, e, &d), "%s: interpreter failed", name);
    check_outputs(g, e, json_object_get(entry, "outputs"), name);
    mcir_env_free(e);
    mcir_graph_free(g);
}

/* ------------------------------------------------ backend node tests */

static json_t *node_index, *model_index;
static const char *node_names[1024], *model_names[64];
static int n_node, n_model;

static int keys_of(json_t *o, const char **out, int max) {
    const char *k;
    json_t *v;
    int n = 0;
    json_object_foreach(o, k, v) if (n < max) out[n++] = k;
    return n;
}

START_TEST(backend_node_test) {
    run_entry(node_names[_i], json_object_get(node_index, node_names[_i]));
}
END_TEST

START_TEST(every_mapped_op_has_backend_tests) {
    static const char *const ops[] = {
        "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Where", "Relu",
        "Sigmoid", "Tanh", "Exp", "Log", "Erf", "Cos", "Sin", "IsNaN", "IsInf", "GatherElements", "GatherND", "Sqrt", "Reciprocal", "Neg", "Softmax",
        "LayerNormalization", "ReduceMean", "ReduceSum", "ReduceMax", "Transpose", "Reshape",
        "Flatten", "Split", "Slice", "Concat", "Conv", "MaxPool", "AveragePool",
        "GlobalAveragePool", "Identity", "Dropout", "Constant", "Gather", "Unsqueeze",
        "Squeeze", "ConstantOfShape", "Expand", "Cast", "Range", "Clip", "HardSigmoid",
        "HardSwish", "LogSoftmax", "BatchNormalization", "ReduceMin", "ReduceL2",
        "ReduceSumSquare", "ReduceLogSum", "Pad", "Resize", "Upsample",
        "ConvTranspose", "ArgMax", "ArgMin", "Less", "Greater", "LessOrEqual",
        "GreaterOrEqual", "Equal", "Not", "And", "Or", "Xor", "Mod", "BitShift", "BitwiseAnd",
        "BitwiseOr", "BitwiseXor", "BitwiseNot", NULL};
    for (int i = 0; ops[i]; i++) {
        bool found = false;
        for (int k = 0; k < n_node && !found; k++) {
            json_t *l = json_object_get(json_object_get(node_index, node_names[k]), "ops");
            for (size_t j = 0; j < json_array_size(l); j++)
                found |= !strcmp(json_string_value(json_array_get(l, j)), ops[i]);
        }
        ck_assert_msg(found, "no backend node test exercises %s", ops[i]);
    }
}
END_TEST

/* ------------------------------------------------- decomposed ops */

/* ops/: each case of the ops the importer writes out as other MCIR ops
 * (Clip, HardSwish, BatchNormalization, Pad, Resize, ConvTranspose, ...)
 * matches onnxruntime on the reference interpreter. */
static json_t *ops_index;
static const char *ops_names[256];
static int n_ops;

START_TEST(decomposed_op_matches_onnxruntime) {
    run_entry(ops_names[_i], json_object_get(ops_index, ops_names[_i]));
}
END_TEST

/* Standalone BatchNormalization with constant parameters is one mul and
 * one add of per-channel constants; Clip is max then min; Resize and
 * ConvTranspose leave no op MCIR lacks. */
START_TEST(decompositions_use_existing_ops) {
    mcir_graph *g = import_ok(data_path("ops/batchnorm/model.onnx"));
    ck_assert_int_eq(g->n_nodes, 2);
    ck_assert_int_eq(g->nodes[0]->op, MCIR_OP_MUL);
    ck_assert_int_eq(g->nodes[1]->op, MCIR_OP_ADD);
    ck_assert_int_eq(g->nodes[0]->inputs[1]->shape[0], 3);
    ck_assert_int_eq(g->nodes[0]->inputs[1]->rank, 3);
    mcir_graph_free(g);
    g = import_ok(data_path("ops/clip/model.onnx"));
    ck_assert_int_eq(g->n_nodes, 2);
    ck_assert_int_eq(g->nodes[0]->op, MCIR_OP_MAX);
    ck_assert_int_eq(g->nodes[1]->op, MCIR_OP_MIN);
    mcir_graph_free(g);
    g = import_ok(data_path("ops/convtranspose_stride_pads/model.onnx"));
    ck_assert_int_eq(g->nodes[g->n_nodes - 1]->op, MCIR_OP_CONV2D);
    ck_assert_int_eq(g->n_nodes, 3); /* zero insertion along H and W, then the conv */
    mcir_graph_free(g);
}
END_TEST

/* ---------------------------------------------------- PyTorch exports */

START_TEST(pytorch_export) {
    run_entry(model_names[_i], json_object_get(model_index, model_names[_i]));
}
END_TEST

static int count_op(const mcir_graph *g, mcir_op op) {
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) k += !g->nodes[i]->dead && g->nodes[i]->op == op;
    return k;
}

/* The transformer exports: the default catalog fuses attention and layer
 * norm, and the rewritten graph still matches the imported one and
 * PyTorch. */
START_TEST(rewrites_fuse_attention_and_layernorm) {
    static const char *const models[] = {"encoder_layer_op14", "encoder_layer_op17",
                                         "causal_block_op14", "causal_block_op17",
                                         "vit_op14", "vit_op17", "gpt2_tiny_op17"};
    const char *name = models[_i];
    json_t *entry = json_object_get(model_index, name);
    ck_assert_msg(entry, "%s missing from models/index.json", name);
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g = import_ok(data_path(json_string_value(json_object_get(entry, "model"))));
    mcir_graph *before = mcir_graph_clone(g);
    mcir_catalog *c = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(c, &d));
    ck_assert(mcir_rewrite_run(g, c, NULL, NULL, &d));
    mcir_catalog_free(c);
    ck_assert_msg(count_op(g, MCIR_OP_ATTENTION) >= 1, "%s: no attention node after rewrites",
                  name);
    ck_assert_msg(count_op(g, MCIR_OP_LAYERNORM) >= 1, "%s: no layernorm node after rewrites",
                  name);
    ck_assert_int_eq(count_op(g, MCIR_OP_SOFTMAX), 0);
    /* the causal block's masked_fill became an additive mask, which the
     * rewrite recognises as causal */
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead && g->nodes[i]->op == MCIR_OP_ATTENTION)
            ck_assert_int_eq(mcir_node_bool(g->nodes[i], "causal"),
                             !strncmp(name, "causal", 6) || !strncmp(name, "gpt2", 4));
    ck_assert_msg(mcir_rewrite_verify(before, g, 0, NULL, &d),
                  "%s: rewritten graph differs from the imported one", name);
    /* and against PyTorch */
    mcir_env *e = mcir_env_new(g, 0);
    set_inputs(g, e, json_object_get(entry, "inputs"));
    ck_assert(mcir_interp_run(g, e, &d));
    check_outputs(g, e, json_object_get(entry, "outputs"), name);
    mcir_env_free(e);
    mcir_graph_free(before);
    mcir_graph_free(g);
}
END_TEST

/* Conv then BatchNormalization: the importer's per-channel mul + add folds
 * into the conv (catalog rule conv_affine_fold), and the result still
 * matches onnxruntime. */
START_TEST(batchnorm_folds_into_the_conv) {
    json_t *entry = json_object_get(ops_index, "conv_batchnorm");
    ck_assert_ptr_nonnull(entry);
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g = import_ok(data_path("ops/conv_batchnorm/model.onnx"));
    ck_assert_int_eq(g->n_nodes, 3);
    mcir_graph *before = mcir_graph_clone(g);
    mcir_catalog *c = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(c, &d));
    ck_assert(mcir_rewrite_run(g, c, NULL, NULL, &d));
    mcir_catalog_free(c);
    ck_assert_int_eq(count_op(g, MCIR_OP_CONV2D), 1);
    ck_assert_int_eq(count_op(g, MCIR_OP_MUL), 0);
    ck_assert_int_eq(count_op(g, MCIR_OP_ADD), 0);
    ck_assert(mcir_rewrite_verify(before, g, 0, NULL, &d));
    mcir_env *e = mcir_env_new(g, 0);
    set_inputs(g, e, json_object_get(entry, "inputs"));
    ck_assert(mcir_interp_run(g, e, &d));
    check_outputs(g, e, json_object_get(entry, "outputs"), "conv_batchnorm");
    mcir_env_free(e);
    mcir_graph_free(before);
    mcir_graph_free(g);
}
END_TEST

/* The causal block's masked_fill becomes an additive mask: no mul by a
 * 0/1 selector, one add of a constant that is 0 or very negative. */
START_TEST(where_becomes_additive_mask) {
    mcir_graph *g = import_ok(data_path("models/causal_block_op17/model.onnx"));
    mcir_node *w = mcir_graph_find_node(g, "/Where");
    ck_assert_msg(w, "no node /Where");
    ck_assert_int_eq(w->op, MCIR_OP_ADD);
    const mcir_tensor *m = w->inputs[1];
    ck_assert_int_eq(m->kind, MCIR_TENSOR_WEIGHT);
    ck_assert_ptr_nonnull(m->data);
    const float *v = m->data;
    int n_masked = 0;
    for (int64_t i = 0; i < mcir_tensor_numel(m); i++) {
        ck_assert(v[i] == 0.0f || v[i] <= -1e4f);
        n_masked += v[i] != 0.0f;
    }
    ck_assert_int_eq(n_masked, 16 * 15 / 2);
    mcir_graph_free(g);

    mcir_diag d = mcir_diag_stderr();
    json_t *entry = json_pack("{s:s, s:[s], s:[s]}", "model", "misc/where_mask.onnx", "inputs",
                              "misc/where_mask_s.npy", "outputs", "misc/where_mask_o.npy");
    run_entry("where_mask", entry);
    json_decref(entry);
    (void)d;
}
END_TEST

/* --emit mcir: the imported graph (weights with their data) written as
 * graph.json reads back and computes the same. */
START_TEST(imported_graph_round_trips_through_graph_json) {
    static const char *const models[] = {"causal_block_op17", "vit_op14", "squeezenet_op17"};
    mcir_diag d = mcir_diag_stderr();
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s/model.onnx", models[_i]);
    mcir_graph *g = import_ok(data_path(rel));
    char path[] = "/tmp/mcir_onnx_XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    ck_assert(mcir_graph_write_json(g, f));
    fclose(f);
    mcir_graph *back = mcir_graph_read_json(path, &d);
    unlink(path);
    ck_assert_msg(back, "%s: graph.json form does not read back", models[_i]);
    ck_assert_int_eq(back->n_weights, g->n_weights);
    for (int i = 0; i < back->n_weights; i++) ck_assert_ptr_nonnull(back->weights[i]->data);
    mcir_env *e1 = mcir_env_new(g, 3), *e2 = mcir_env_new(back, 3);
    ck_assert(mcir_interp_run(g, e1, &d) && mcir_interp_run(back, e2, &d));
    for (int i = 0; i < g->n_outputs; i++) {
        int64_t n = mcir_tensor_numel(g->outputs[i]);
        ck_assert(!memcmp(mcir_env_get(e1, g->outputs[i]), mcir_env_get(e2, back->outputs[i]),
                          sizeof(float) * (size_t)n));
    }
    mcir_env_free(e1);
    mcir_env_free(e2);
    mcir_graph_free(back);
    mcir_graph_free(g);
}
END_TEST

/* ------------------------------------------------------------- errors */

static char *bad_files[64];
static int n_bad;

static void list_bad(void) {
    DIR *dir = opendir(data_path("bad"));
    if (!dir) return;
    struct dirent *de;
    while ((de = readdir(dir)) && n_bad < 64)
        if (strstr(de->d_name, ".onnx")) bad_files[n_bad++] = strdup(de->d_name);
    closedir(dir);
}

START_TEST(malformed_file_is_an_error_not_a_crash) {
    char rel[512], *msg;
    snprintf(rel, sizeof rel, "bad/%s", bad_files[_i]);
    const char *p = data_path(rel);
    mcir_graph *g = import_capture(p, NULL, 0, &msg);
    ck_assert_msg(!g, "%s imported", p);
    char want[600];
    snprintf(want, sizeof want, "%s: error: ", p);
    ck_assert_msg(strstr(msg, want), "%s: message lacks \"%s\": %s", p, want, msg);
    free(msg);
}
END_TEST

START_TEST(unsupported_model_errors_name_op_node_opset_path) {
    json_t *exp = load_json("errors/errors.json");
    const char *file;
    json_t *frags;
    int n = 0;
    json_object_foreach(exp, file, frags) {
        char rel[512], *msg;
        snprintf(rel, sizeof rel, "errors/%s", file);
        mcir_graph *g = import_capture(data_path(rel), NULL, 0, &msg);
        ck_assert_msg(!g, "%s imported", file);
        ck_assert_msg(strstr(msg, data_path(rel)), "%s: no path in: %s", file, msg);
        for (size_t i = 0; i < json_array_size(frags); i++) {
            const char *s = json_string_value(json_array_get(frags, i));
            ck_assert_msg(strstr(msg, s), "%s: message lacks \"%s\": %s", file, s, msg);
        }
        free(msg);
        n++;
    }
    ck_assert_int_ge(n, 7);
    json_decref(exp);
}
END_TEST

START_TEST(missing_file_is_an_error) {
    char *msg;
    ck_assert(!import_capture("/nonexistent/model.onnx", NULL, 0, &msg));
    ck_assert(strstr(msg, "/nonexistent/model.onnx: error: cannot open"));
    free(msg);
}
END_TEST

/* ------------------------------------------------------------- shapes */

START_TEST(parse_shape_specs) {
    mcir_onnx_shape s;
    ck_assert(mcir_onnx_parse_shape("x=1x128x768", &s));
    ck_assert_int_eq(s.rank, 3);
    ck_assert(s.dims[0] == 1 && s.dims[1] == 128 && s.dims[2] == 768);
    ck_assert(!strncmp(s.name, "x=", 2));
    ck_assert(mcir_onnx_parse_shape("input.1=3", &s) && s.rank == 1 && s.dims[0] == 3);
    ck_assert(mcir_onnx_parse_shape("a=b=2x2", &s) && s.rank == 2);
    ck_assert(mcir_onnx_parse_shape("s=", &s) && s.rank == 0);
    ck_assert(!mcir_onnx_parse_shape("x", &s));
    ck_assert(!mcir_onnx_parse_shape("=1x2", &s));
    ck_assert(!mcir_onnx_parse_shape("x=0x2", &s));
    ck_assert(!mcir_onnx_parse_shape("x=-1", &s));
    ck_assert(!mcir_onnx_parse_shape("x=2xx3", &s));
    ck_assert(!mcir_onnx_parse_shape("x=2x", &s));
    ck_assert(!mcir_onnx_parse_shape("x=1x1x1x1x1x1x1x1x1", &s));
    ck_assert(!mcir_onnx_parse_shape("x=99999999999999999999999", &s));
    ck_assert(mcir_onnx_is_model_path("a/b.onnx") && !mcir_onnx_is_model_path("g.json"));
}
END_TEST

START_TEST(shape_pins_dynamic_dims) {
    const char *p = data_path("errors/dynamic_input.onnx");
    mcir_onnx_shape pin;
    char *msg;
    ck_assert(mcir_onnx_parse_shape("x=3x4", &pin));
    mcir_graph *g = import_capture(p, &pin, 1, &msg);
    ck_assert_msg(g, "%s", msg);
    free(msg);
    ck_assert_int_eq(g->inputs[0]->shape[0], 3);
    ck_assert_int_eq(g->outputs[0]->shape[0], 3);
    mcir_graph_free(g);

    ck_assert(mcir_onnx_parse_shape("x=3x5", &pin)); /* the model fixes dim 1 to 4 */
    ck_assert(!import_capture(p, &pin, 1, &msg));
    ck_assert_msg(strstr(msg, "dim 1") && strstr(msg, "fixes it to 4"), "%s", msg);
    free(msg);
    ck_assert(mcir_onnx_parse_shape("x=3", &pin));
    ck_assert(!import_capture(p, &pin, 1, &msg));
    ck_assert_msg(strstr(msg, "gives 1 dims"), "%s", msg);
    free(msg);
    ck_assert(mcir_onnx_parse_shape("nope=3x4", &pin));
    ck_assert(!import_capture(p, &pin, 1, &msg));
    ck_assert_msg(strstr(msg, "no graph input 'nope'"), "%s", msg);
    free(msg);
}
END_TEST

/* --dim NAME=N: a dim_param fixed to one size by its name (#33) */
START_TEST(named_dims_fix_dim_params) {
    const char *p = data_path("errors/dynamic_input.onnx");   /* x ["batch", 4] */
    char *msg = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&msg, &len);
    mcir_diag d = mcir_diag_to(f);
    mcir_onnx_dim batch = {"batch", 5, 0};
    mcir_graph *g = mcir_onnx_read_ex(p, NULL, 0, &batch, 1, &d);
    fclose(f);
    ck_assert_msg(g, "%s", msg);
    ck_assert_int_eq(g->inputs[0]->shape[0], 5);
    ck_assert_int_eq(g->inputs[0]->shape[1], 4);
    ck_assert_int_eq(g->n_dims, 0);   /* one size: an ordinary graph */
    mcir_graph_free(g);
    free(msg);
    /* a --shape pin wins over the name; a name no dimension has is an error */
    mcir_onnx_shape pin;
    ck_assert(mcir_onnx_parse_shape("x=2x4", &pin));
    msg = NULL;
    f = open_memstream(&msg, &len);
    d = mcir_diag_to(f);
    mcir_onnx_dim other[2] = {{"batch", 5, 0}, {"length", 7, 0}};
    g = mcir_onnx_read_ex(p, &pin, 1, other, 1, &d);
    fclose(f);
    ck_assert_ptr_null(g);
    ck_assert_msg(strstr(msg, "--dim batch: no input dimension of the model is named 'batch' "
                              "(dim_param) and left to it"), "%s", msg);
    free(msg);
    msg = NULL;
    f = open_memstream(&msg, &len);
    d = mcir_diag_to(f);
    g = mcir_onnx_read_ex(p, NULL, 0, other, 2, &d);
    fclose(f);
    ck_assert_ptr_null(g);
    ck_assert_msg(strstr(msg, "--dim length: no input dimension"), "%s", msg);
    free(msg);
    /* without either, the message offers both */
    ck_assert_ptr_null(import_capture(p, NULL, 0, &msg));
    ck_assert_msg(strstr(msg, "pin it with --shape x=D1xD2x... or --dim batch=N"), "%s", msg);
    free(msg);
}
END_TEST

START_TEST(external_data_relative_to_the_model) {
    json_t *entry = json_pack("{s:s, s:[s], s:[s]}", "model", "misc/external.onnx", "inputs",
                              "misc/external_x.npy", "outputs", "misc/external_y.npy");
    run_entry("external", entry);
    json_decref(entry);
}
END_TEST

/* Shape → Gather → Range → Mod → Equal → Where, ConstantOfShape, Cast
 * fold at import time; Expand feeding an add broadcasts without a copy,
 * Expand feeding a reduction is materialised; Gather with constant
 * indices, negative-step Slice and Squeeze on runtime tensors (expected
 * outputs from onnxruntime). */
START_TEST(import_time_evaluation_and_runtime_shape_ops) {
    json_t *idx = load_json("misc/index.json");
    json_t *entry = json_object_get(idx, "import_time");
    run_entry("import_time", entry);
    mcir_graph *g = import_ok(data_path("misc/import_time.onnx"));
    const mcir_tensor *t = mcir_graph_find_tensor(g, "o_expand_add");
    ck_assert(t && t->producer && t->producer->op == MCIR_OP_ADD);
    ck_assert_str_eq(t->producer->inputs[0]->name, "u"); /* not the expanded copy */
    t = mcir_graph_find_tensor(g, "o_mask");
    ck_assert(t && t->producer->op == MCIR_OP_SOFTMAX);
    ck_assert_int_eq(t->producer->inputs[0]->producer->op, MCIR_OP_ADD);
    mcir_graph_free(g);
    json_decref(idx);
}
END_TEST

/* A graph output that is an alias (Identity of an input) keeps its name. */
START_TEST(identity_is_a_rename) {
    mcir_graph *g = import_ok(data_path("models/encoder_layer_op17/model.onnx"));
    ck_assert_str_eq(g->outputs[0]->name, "y");
    for (int i = 0; i < g->n_nodes; i++) ck_assert(g->nodes[i]->op != MCIR_OP_RESHAPE ||
                                                   strcmp(g->nodes[i]->outputs[0]->name, "y"));
    mcir_graph_free(g);
    g = import_ok(data_path("node/test_identity/model.onnx"));
    ck_assert_str_eq(g->outputs[0]->name, "y");
    mcir_graph_free(g);
}
END_TEST

static Suite *onnx_suite(void) {
    Suite *s = suite_create("onnx");
    TCase *tc = tcase_create("backend");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, backend_node_test, 0, n_node);
    tcase_add_test(tc, every_mapped_op_has_backend_tests);
    suite_add_tcase(s, tc);

    tc = tcase_create("ops");
    tcase_add_loop_test(tc, decomposed_op_matches_onnxruntime, 0, n_ops);
    tcase_add_test(tc, decompositions_use_existing_ops);
    suite_add_tcase(s, tc);

    tc = tcase_create("pytorch");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, pytorch_export, 0, n_model);
    tcase_add_loop_test(tc, rewrites_fuse_attention_and_layernorm, 0, 7);
    tcase_add_test(tc, where_becomes_additive_mask);
    tcase_add_test(tc, batchnorm_folds_into_the_conv);
    tcase_add_loop_test(tc, imported_graph_round_trips_through_graph_json, 0, 3);
    tcase_add_test(tc, identity_is_a_rename);
    tcase_add_test(tc, import_time_evaluation_and_runtime_shape_ops);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_loop_test(tc, malformed_file_is_an_error_not_a_crash, 0, n_bad);
    tcase_add_test(tc, unsupported_model_errors_name_op_node_opset_path);
    tcase_add_test(tc, missing_file_is_an_error);
    tcase_add_test(tc, parse_shape_specs);
    tcase_add_test(tc, shape_pins_dynamic_dims);
    tcase_add_test(tc, named_dims_fix_dim_params);
    tcase_add_test(tc, external_data_relative_to_the_model);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    node_index = load_json("node/index.json");
    model_index = load_json("models/index.json");
    ops_index = load_json("ops/index.json");
    n_ops = keys_of(ops_index, ops_names, 256);
    n_node = keys_of(node_index, node_names, 1024);
    n_model = keys_of(model_index, model_names, 64);
    list_bad();
    int failed = test_main(onnx_suite());
    json_decref(node_index);
    json_decref(model_index);
    json_decref(ops_index);
    for (int i = 0; i < n_bad; i++) free(bad_files[i]);
    return failed;
}
