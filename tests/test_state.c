/*
 * test_state.c — states carried from step to step (graph.json "state",
 * docs/graph-format.md; issue #33's KV cache updated in place): the
 * format's errors at their line and column; the plan writing a state
 * output over its input (one buffer, the concat computing only the new
 * rows, memory.json's "states") or declining with its reason; sessions on
 * the emulated device keeping the state resident (filled at the first
 * step only, never copied back unless asked), in place and through the
 * fallback copy, with and without CUDA graphs; and the in-place GPT-2
 * decode step (tests/data/dims/generate/decode_state.json) run through
 * mcirc at three cache lengths against the interpreter, then greedy
 * generation through the C session API, every token PyTorch's.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "codegen/codegen.h"
#include "runtime/runtime.h"
#include "pipeline_test.h"
#include "test_util.h"

#define RUN(...) cli_run((const char *const[]){__VA_ARGS__, NULL})

static char work_dir[256];

static char *read_errors(const char *text, mcir_graph **out) {
    size_t len = 0;
    char *buf = NULL;
    FILE *f = open_memstream(&buf, &len);
    mcir_diag d = mcir_diag_to(f);
    mcir_graph *g = mcir_graph_read_json_string(text, "g.json", &d);
    fclose(f);
    if (out) *out = g;
    else mcir_graph_free(g);
    return buf;
}

static void expect_error(const char *text, const char *what) {
    mcir_graph *g;
    char *errs = read_errors(text, &g);
    ck_assert_msg(g == NULL, "accepted: %s", text);
    ck_assert_msg(strstr(errs, "g.json:") && strstr(errs, ": error: ") && strstr(errs, what), "want '%s', got: %s",
                  what, errs);
    mcir_graph_free(g);
    free(errs);
}

/* x [1, 8] a state; y = concat(x[:, :n], new, x[:, n+1:]) written over it. */
#define CACHE_GRAPH(STATE)                                                                                      \
    "{\"mcir\":1,\"dims\":{\"n\":{\"min\":1,\"max\":6}},"                                                       \
    "\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[1,8]},{\"name\":\"new\",\"dtype\":\"f32\","      \
    "\"shape\":[1,1]},{\"name\":\"z\",\"dtype\":\"f16\",\"shape\":[1,8]}],"                                    \
    "\"nodes\":[{\"name\":\"head\",\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"h\"],"                    \
    "\"attrs\":{\"axis\":1,\"start\":0,\"end\":\"n\"}},"                                                        \
    "{\"name\":\"tail\",\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"t\"],"                               \
    "\"attrs\":{\"axis\":1,\"start\":\"n+1\",\"end\":8}},"                                                      \
    "{\"name\":\"update\",\"op\":\"concat\",\"inputs\":[\"h\",\"new\",\"t\"],\"outputs\":[\"y\"],"              \
    "\"attrs\":{\"axis\":1}},"                                                                                  \
    "{\"name\":\"valid\",\"op\":\"slice\",\"inputs\":[\"y\"],\"outputs\":[\"v\"],"                              \
    "\"attrs\":{\"axis\":1,\"start\":0,\"end\":\"n+1\"}},"                                                      \
    "{\"name\":\"total\",\"op\":\"reduce_sum\",\"inputs\":[\"v\"],\"outputs\":[\"s\"],"                         \
    "\"attrs\":{\"axes\":[1]}},"                                                                                \
    "{\"name\":\"zz\",\"op\":\"scale\",\"inputs\":[\"z\"],\"outputs\":[\"z2\"],\"attrs\":{\"value\":2.0}}],"     \
    "\"outputs\":[\"s\",\"y\",\"z2\"]" STATE "}"

START_TEST(state_format_errors) {
    mcir_graph *g;
    char *errs = read_errors(CACHE_GRAPH(",\"state\":[{\"input\":\"x\",\"output\":\"y\"}]"), &g);
    ck_assert_msg(g != NULL, "%s", errs);
    free(errs);
    mcir_tensor *y = mcir_graph_find_tensor(g, "y");
    ck_assert_ptr_eq(y->state_input, mcir_graph_find_tensor(g, "x"));
    /* the round trip keeps the pair and "n+1" */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert(mcir_graph_write_json(g, f));
    fclose(f);
    ck_assert_msg(strstr(text, "\"n+1\"") && strstr(text, "\"state\""), "%s", text);
    mcir_graph *back;
    errs = read_errors(text, &back);
    ck_assert_msg(back && mcir_graph_find_tensor(back, "y")->state_input, "%s", errs);
    free(errs);
    free(text);
    mcir_graph_free(back);
    mcir_graph_free(g);

    expect_error(CACHE_GRAPH(",\"state\":[{\"input\":\"z\",\"output\":\"y\"}]"),
                 "state 0: output 'y' (f32 [1, 8]) is not the same dtype and shape as input 'z' (f16 [1, 8])");
    expect_error(CACHE_GRAPH(",\"state\":[{\"input\":\"new\",\"output\":\"y\"}]"),
                 "is not the same dtype and shape as input 'new'");
    expect_error(CACHE_GRAPH(",\"state\":[{\"input\":\"h\",\"output\":\"y\"}]"), "state 0: 'h' is not a graph input");
    expect_error(CACHE_GRAPH(",\"state\":[{\"input\":\"x\",\"output\":\"t\"}]"), "state 0: 't' is not a graph output");
    expect_error(CACHE_GRAPH(",\"state\":[{\"input\":\"x\"}]"), "state 0: missing required field 'output'");
    expect_error(CACHE_GRAPH(",\"state\":[{\"input\":\"x\",\"output\":\"y\",\"size\":3}]"), "unknown field 'size'");
    expect_error(CACHE_GRAPH(",\"state\":{\"input\":\"x\"}"), "'state' must be a list");
    expect_error(CACHE_GRAPH(",\"state\":[{\"input\":\"x\",\"output\":\"y\"},{\"input\":\"x\",\"output\":\"s\"}]"),
                 "state 1: output 's' (f32 [1, 1])");
    /* the dimension expressions */
    static const char *const bad[] = {"n+", "n+x", "n-", "n+1+1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text2[2048];
        snprintf(text2, sizeof text2,
                 "{\"mcir\":1,\"dims\":{\"n\":{\"min\":1,\"max\":6}},\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\","
                 "\"shape\":[1,8]}],\"nodes\":[{\"name\":\"s\",\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                 "\"attrs\":{\"axis\":1,\"start\":0,\"end\":\"%s\"}}],\"outputs\":[\"y\"]}",
                 bad[i]);
        expect_error(text2, "a dimension, or a dimension plus or minus an integer (\"past+1\"), was expected");
    }
    expect_error("{\"mcir\":1,\"dims\":{\"n\":{\"min\":1,\"max\":6}},\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\","
                 "\"shape\":[1,8]}],\"nodes\":[{\"name\":\"s\",\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                 "\"attrs\":{\"axis\":1,\"start\":0,\"end\":\"m+1\"}}],\"outputs\":[\"y\"]}",
                 "names 'm', which is not a declared dimension");
    /* n+3 passes the end of the axis for n = 6 */
    expect_error("{\"mcir\":1,\"dims\":{\"n\":{\"min\":1,\"max\":6}},\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\","
                 "\"shape\":[1,8]}],\"nodes\":[{\"name\":\"s\",\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                 "\"attrs\":{\"axis\":1,\"start\":\"n+3\",\"end\":8}}],\"outputs\":[\"y\"]}",
                 "slice 9:8:1 of axis 1 of 'x' [1, 8] is empty (shapes must be positive) (at dimension 'n' = 6");
}
END_TEST

/* The graphs compiled for sm_90 with their CUDA, as mcirc has them before --run. */
static const cgt_pipe SM90 = {.arch = "sm_90", .cuda = true};

static const mcir_kernel_plan *writer_of(const mcir_plan *p, const char *name, int *w) {
    for (int k = 0; k < p->n_kernels; k++)
        for (int j = 0; j < p->kernels[k].n_writes; j++)
            if (!strcmp(p->kernels[k].writes[j]->name, name)) {
                *w = j;
                return &p->kernels[k];
            }
    return NULL;
}

static char *memory_json(const mcir_compilation *c) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert(mcir_memplan_write_json(c->memory, c->plan, f));
    fclose(f);
    return text;
}

/* The small cache: y written over x, the concat computing one row, at
 * n = 1..4 in one session (rebinding n), x filled at the first step only;
 * then CUDA graphs at a fixed n. */
START_TEST(state_in_place_session) {
    if (!test_have_cxx()) return;
    mcir_compilation c;
    cgt_compile_text(work_dir, "cache", CACHE_GRAPH(",\"state\":[{\"input\":\"x\",\"output\":\"y\"}]"), SM90, &c);
    const mcir_graph *g = c.graph;
    const mcir_tensor *x = mcir_graph_find_tensor(g, "x"), *y = mcir_graph_find_tensor(g, "y"),
                      *nw = mcir_graph_find_tensor(g, "new"), *s_out = mcir_graph_find_tensor(g, "s");
    ck_assert_ptr_eq(c.plan->alias_root[y->id], x);   /* one buffer */
    int w;
    const mcir_kernel_plan *k = writer_of(c.plan, "y", &w);
    ck_assert_ptr_nonnull(k);
    ck_assert(k->windows && k->windows[w].axis == 1);
    char *mem = memory_json(&c);
    ck_assert_msg(strstr(mem, "\"in_place\": true") && strstr(mem, "\"buffer\": \"x\""), "%s", mem);
    free(mem);
    mcir_diag d = mcir_diag_stderr();
    for (int graphs = 0; graphs < 2; graphs++) {
        mcir_env *env = mcir_env_new(g, 3);
        float x0[8] = {10, 11, 12, 13, 14, 15, 16, 17}, want[8];
        memcpy(want, x0, sizeof want);
        mcir_env_set(env, x, x0);
        mcir_gpu_session_options o = {.mode = MCIR_ALLOC_POOL, .graphs = graphs, .keep_state = true};
        mcir_gpu_session *s = mcir_emu_session_open(c.codegen, env, &o, &d);
        ck_assert_ptr_nonnull(s);
        for (int step = 0; step < 4; step++) {
            int64_t n = graphs ? 3 : 1 + step;
            ck_assert(mcir_codegen_rebind(c.codegen, &n, &d));
            float v = 100.0f + (float)step;
            mcir_env_set(env, nw, &v);
            want[n] = v;
            mcir_gpu_stats st;
            ck_assert(mcir_gpu_session_step(s, env, NULL, &st, &d));
            ck_assert(st.graph == (graphs == 1));
            ck_assert_int_eq(k->grid[0], 1);   /* one row's launch, whatever n */
            ck_assert_int_eq(mcir_kernel_write_items(k, w), 1);
            float sum = 0;
            for (int i = 0; i <= n; i++) sum += want[i];
            ck_assert_msg(fabsf(mcir_env_get(env, s_out)[0] - sum) < 1e-3f, "step %d: sum %g, want %g", step,
                          mcir_env_get(env, s_out)[0], sum);
            ck_assert_ptr_null(mcir_env_get(env, y));   /* kept on the device */
            float junk[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
            mcir_env_set(env, x, junk);   /* read at the first step only */
        }
        ck_assert(mcir_gpu_session_read(s, env, y, &d));
        for (int i = 0; i < 8; i++) ck_assert_msg(mcir_env_get(env, y)[i] == want[i], "y[%d]", i);
        /* a new sequence: reset_state fills x from env again */
        mcir_gpu_session_reset_state(s);
        mcir_env_set(env, x, x0);
        mcir_gpu_stats st;
        ck_assert(mcir_gpu_session_step(s, env, NULL, &st, &d));
        ck_assert(mcir_gpu_session_read(s, env, y, &d));
        ck_assert(mcir_env_get(env, y)[0] == 10 && mcir_env_get(env, y)[7] == 17);
        mcir_gpu_session_close(s);
        mcir_env_free(env);
    }
    int64_t top = 6;
    ck_assert(mcir_codegen_rebind(c.codegen, &top, &d));
    mcir_compilation_free(&c);
}
END_TEST

/* A state the plan cannot write in place (z = y + x reads x after the
 * kernel that writes y = 2x, or in the same kernel element by element):
 * declined with the reason in the trace; the session copies y over x on
 * the device between steps. */
START_TEST(state_not_in_place_falls_back_to_a_copy) {
    if (!test_have_cxx()) return;
    static const char G[] =
        "{\"mcir\":1,\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[4]}],"
        "\"nodes\":[{\"name\":\"twice\",\"op\":\"scale\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
        "\"attrs\":{\"value\":2.0}},"
        "{\"name\":\"plus\",\"op\":\"add\",\"inputs\":[\"y\",\"x\"],\"outputs\":[\"z\"]}],"
        "\"outputs\":[\"y\",\"z\"],\"state\":[{\"input\":\"x\",\"output\":\"y\"}]}";
    mcir_compilation c;
    cgt_compile_text(work_dir, "copy", G, SM90, &c);
    const mcir_graph *g = c.graph;
    const mcir_tensor *x = mcir_graph_find_tensor(g, "x"), *y = mcir_graph_find_tensor(g, "y"),
                      *z = mcir_graph_find_tensor(g, "z");
    ck_assert_ptr_eq(c.plan->alias_root[y->id], y);   /* a buffer of its own */
    char *mem = memory_json(&c);
    ck_assert_msg(strstr(mem, "\"in_place\": false"), "%s", mem);
    free(mem);
    char *trace = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&trace, &len);
    mcir_trace_write_jsonl(c.trace, f);
    fclose(f);
    ck_assert_msg(strstr(trace, "\"rule\":\"state_in_place\"") && strstr(trace, "\"decision\":\"rejected\"") &&
                      strstr(trace, "reads 'x'"),
                  "%s", trace);
    free(trace);
    mcir_diag d = mcir_diag_stderr();
    for (int graphs = 0; graphs < 2; graphs++) {
        mcir_env *env = mcir_env_new(g, 3);
        float v[4] = {1, 2, 3, 4};
        mcir_env_set(env, x, v);
        mcir_gpu_session_options o = {.mode = MCIR_ALLOC_POOL, .graphs = graphs, .keep_state = graphs == 1};
        mcir_gpu_session *s = mcir_emu_session_open(c.codegen, env, &o, &d);
        ck_assert_ptr_nonnull(s);
        for (int step = 0; step < 3; step++) {
            mcir_gpu_stats st;
            ck_assert(mcir_gpu_session_step(s, env, NULL, &st, &d));
            if (graphs) ck_assert(mcir_gpu_session_read(s, env, y, &d));
            for (int i = 0; i < 4; i++) {
                ck_assert_msg(mcir_env_get(env, y)[i] == 2 * v[i], "graphs %d step %d: y[%d] = %g, want %g", graphs,
                              step, i, mcir_env_get(env, y)[i], 2 * v[i]);
                ck_assert(mcir_env_get(env, z)[i] == 3 * v[i]);
                v[i] *= 2;
            }
        }
        mcir_gpu_session_close(s);
        mcir_env_free(env);
    }
    mcir_compilation_free(&c);
}
END_TEST

/* The in-place decode step through mcirc at three cache lengths against
 * the interpreter (the whole caches compared too), compiled once. */
START_TEST(decode_state_on_emu_at_three_lengths) {
    if (!test_have_cxx()) return;
    static const int lengths[] = {1, 29, 62};
    const char *graph = cli_src("tests/data/dims/generate/decode_state.json");
    for (int i = 0; i < 3; i++) {
        char dim[32];
        snprintf(dim, sizeof dim, "past=%d", lengths[i]);
        cli_result r = RUN("--run", "--device", "emu", "--verify", "--dim", dim, graph);
        ck_assert_msg(r.status == 0, "%s: %s", dim, r.err);
        ck_assert_ptr_nonnull(strstr(r.out, "verify   cache_v1_out (emu vs the original graph)"));
        ck_assert_msg(strstr(r.out, " ok\n") && !strstr(r.out, "FAIL"), "%s:\n%s", dim, r.out);
        if (i > 0) ck_assert_msg(strstr(r.out, "\n  emu      0 compiles") != NULL, "%s", r.out);
        cli_result_free(&r);
    }
    /* the other allocation modes, and a CUDA graph (its warm-up runs the
     * step once more: the state comes out the same) */
    static const char *const modes[3][2] = {{"--alloc", "lazy"}, {"--alloc", "eager"}, {"--graphs", "--graphs"}};
    for (int m = 0; m < 3; m++) {
        cli_result r = RUN("--run", "--device", "emu", "--verify", "--dim", "past=40", modes[m][0], modes[m][1], graph);
        ck_assert_msg(r.status == 0, "%s %s: %s", modes[m][0], modes[m][1], r.err);
        ck_assert_ptr_nonnull(strstr(r.out, "verify   cache_k1_out (emu vs the original graph)"));
        ck_assert_msg(!strstr(r.out, "FAIL"), "%s", r.out);
        cli_result_free(&r);
    }
    /* each layer's update kernel computes the new row of K and V, in the
     * caches' own buffers */
    cli_result r = RUN("--emit", "plan", graph);
    ck_assert_int_eq(r.status, 0);
    json_error_t je;
    json_t *plan = json_loads(r.out, 0, &je);
    ck_assert_ptr_nonnull(plan);
    int windows = 0, attentions = 0;
    json_t *k;
    size_t i;
    json_array_foreach(json_object_get(plan, "kernels"), i, k) {
        json_t *ws = json_object_get(k, "write_windows"), *x;
        size_t j;
        json_array_foreach(ws, j, x) {
            ck_assert_str_eq(json_string_value(json_object_get(x, "start")), "past");
            ck_assert_str_eq(json_string_value(json_object_get(x, "rows")), "1");
            ck_assert_int_eq(json_integer_value(json_object_get(x, "elements")), 4 * 16);
            windows++;
        }
        if (ws) ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(k, "grid"), 0)), 1);
        /* attention reads the valid rows where they are (no copy kernel) */
        json_array_foreach(json_object_get(k, "writes"), j, x)
            ck_assert_msg(!strstr(json_string_value(x), "k_all") && !strstr(json_string_value(x), "v_all"), "%s",
                          json_string_value(x));
        if (!strcmp(json_string_value(json_object_get(k, "template")), "streaming_attention")) {
            bool reads_cache = false;
            json_array_foreach(json_object_get(k, "reads"), j, x) reads_cache |= !strncmp(json_string_value(x), "cache_", 6);
            ck_assert(reads_cache);
            attentions++;
        }
    }
    ck_assert_int_eq(windows, 4);
    ck_assert_int_eq(attentions, 2);
    json_decref(plan);
    cli_result_free(&r);
    r = RUN("--emit", "memory", graph);
    ck_assert_int_eq(r.status, 0);
    int in_place = 0;
    for (const char *p = r.out; (p = strstr(p, "\"in_place\": true")); p++) in_place++;
    ck_assert_msg(in_place == 4 && !strstr(r.out, "\"tensor\": \"cache_"), "%s", r.out);
    cli_result_free(&r);
}
END_TEST

static int64_t argmax(const float *v, int n) {
    int64_t best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    for (int i = 0; i < n; i++) ck_assert(isfinite(v[i]));
    return best;
}

/* Greedy generation with the caches resident: the prompt through the
 * prefill graph (mcirc, seq = 5), its keys and values into caches of 64
 * rows, then 7 decode steps of decode_state.json on ONE session on the
 * emulated device — the length rebound each step, the caches filled at
 * the first step only (env's copies are overwritten with junk after it)
 * and never copied back — each token PyTorch's. The update kernel's
 * launch covers the new row only, at every length. */
START_TEST(greedy_generation_with_resident_cache) {
    if (!test_have_cxx()) return;
    char dir[256], out[320], arg[400], path[400];
    ck_assert(test_tempdir("state_gen", dir, sizeof dir));
    mcir_diag d = mcir_diag_stderr();
    mcir_npy want;
    ck_assert(mcir_npy_read(cli_src("tests/data/dims/generate/tokens.npy"), &want, &d));
    const int64_t *tokens = want.data;
    int n_tokens = (int)want.shape[0];
    ck_assert_int_ge(n_tokens, 8);
    snprintf(out, sizeof out, "%s/prefill", dir);
    snprintf(arg, sizeof arg, "input_ids=%s", cli_src("tests/data/dims/generate/prompt.npy"));
    cli_result r = RUN("--run", "--device", "emu", "--input", arg, "-o", out,
                       cli_src("tests/data/dims/generate/prefill.json"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    cli_result_free(&r);
    mcir_npy logits0;
    snprintf(path, sizeof path, "%s/logits.npy", out);
    ck_assert(mcir_npy_read(path, &logits0, &d));
    int64_t tok = argmax((const float *)logits0.data + 4 * 256, 256);
    mcir_npy_free(&logits0);
    ck_assert_int_eq(tok, tokens[0]);

    mcir_compilation c;
    cgt_compile_path(cli_src("tests/data/dims/generate/decode_state.json"), SM90, &c);
    const mcir_graph *g = c.graph;
    mcir_env *env = mcir_env_new(g, 0);
    static const char *const names[4] = {"cache_k0", "cache_v0", "cache_k1", "cache_v1"};
    static const char *const kv[4] = {"k", "v", "k", "v"};
    const mcir_tensor *caches[4], *outs[4];
    float *prefilled[4];
    for (int i = 0; i < 4; i++) {
        caches[i] = mcir_graph_find_tensor(g, names[i]);
        char on[32];
        snprintf(on, sizeof on, "%s_out", names[i]);
        outs[i] = mcir_graph_find_tensor(g, on);
        ck_assert(caches[i] && outs[i] && outs[i]->state_input == caches[i]);
        ck_assert_ptr_eq(c.plan->alias_root[outs[i]->id], caches[i]);
        mcir_npy kvn;
        snprintf(path, sizeof path, "%s/h%d.attn.%s.to_heads.y.npy", out, i / 2, kv[i]);
        ck_assert(mcir_npy_read(path, &kvn, &d));
        ck_assert(kvn.rank == 4 && kvn.shape[1] == 4 && kvn.shape[2] == 5 && kvn.shape[3] == 16);
        prefilled[i] = calloc(4 * 64 * 16, sizeof(float));
        for (int h = 0; h < 4; h++)
            for (int row = 0; row < 5; row++)
                memcpy(prefilled[i] + (h * 64 + row) * 16, (const float *)kvn.data + (h * 5 + row) * 16,
                       16 * sizeof(float));
        mcir_npy_free(&kvn);
        mcir_env_set(env, caches[i], prefilled[i]);
    }
    int w;
    const mcir_kernel_plan *update = writer_of(c.plan, "cache_k0_out", &w);
    ck_assert(update && update->windows && update->windows[w].axis == 2);
    const mcir_tensor *ids = mcir_graph_find_tensor(g, "input_ids"), *pos = mcir_graph_find_tensor(g, "position_ids"),
                      *logits = mcir_graph_find_tensor(g, "logits");
    int64_t tok0 = tok;
    for (int graphs = 0; graphs < 2; graphs++) {   /* with graphs: captured again at each length */
        tok = tok0;
        if (graphs) {   /* a fresh env: no output of the first session in it */
            mcir_env_free(env);
            env = mcir_env_new(g, 0);
        }
        for (int i = 0; i < 4; i++) mcir_env_set(env, caches[i], prefilled[i]);
        mcir_gpu_session_options o = {.mode = MCIR_ALLOC_POOL, .graphs = graphs, .keep_state = true};
        mcir_gpu_session *s = mcir_emu_session_open(c.codegen, env, &o, &d);
        ck_assert_ptr_nonnull(s);
        mcir_compile_stats cs0, cs;
        int64_t grid = -1;
        for (int step = 1; step < n_tokens; step++) {
            int64_t past = 4 + step;   /* the prompt's 5 tokens, then one a step */
            ck_assert(mcir_codegen_rebind(c.codegen, &past, &d));
            mcir_env_set_int(env, ids, &tok);
            mcir_env_set_int(env, pos, &past);
            mcir_gpu_stats st;
            ck_assert_msg(mcir_gpu_session_step(s, env, NULL, &st, &d), "step %d", step);
            ck_assert(st.graph == (graphs == 1));
            ck_assert_int_eq(st.recaptures, graphs ? step - 1 : 0);
            if (step == 1) mcir_codegen_emu_compile_stats(c.codegen, &cs0);
            mcir_codegen_emu_compile_stats(c.codegen, &cs);
            ck_assert_int_eq(cs.nvrtc_compiles, cs0.nvrtc_compiles);
            if (grid < 0) grid = update->grid[0];
            ck_assert_int_eq(update->grid[0], grid);   /* the same launch at every length */
            ck_assert_int_eq(mcir_kernel_write_items(update, w), 4 * 16);   /* one row per head */
            tok = argmax(mcir_env_get(env, logits), 256);
            ck_assert_msg(tok == tokens[step], "graphs %d step %d: token %lld, PyTorch's %lld", graphs, step,
                          (long long)tok, (long long)tokens[step]);
            for (int i = 0; i < 4; i++) {
                ck_assert_ptr_null(mcir_env_get(env, outs[i]));   /* never copied back */
                float *junk = calloc(4 * 64 * 16, sizeof(float));
                for (int e = 0; e < 4 * 64 * 16; e++) junk[e] = 1e3f;
                mcir_env_set(env, caches[i], junk);   /* a step that uploaded it would go wrong */
                free(junk);
            }
        }
        /* the caches as the session left them: the prompt's rows as
         * prefilled, one row a step after them, the rest never written */
        int valid = 4 + n_tokens;
        for (int i = 0; i < 4; i++) {
            ck_assert(mcir_gpu_session_read(s, env, outs[i], &d));
            const float *cache = mcir_env_get(env, outs[i]);
            for (int h = 0; h < 4; h++)
                for (int row = 0; row < 64; row++) {
                    const float *a = cache + (h * 64 + row) * 16, *b = prefilled[i] + (h * 64 + row) * 16;
                    bool nonzero = false;
                    for (int e = 0; e < 16; e++) nonzero |= a[e] != 0;
                    if (row < 5) ck_assert(memcmp(a, b, 16 * sizeof(float)) == 0);
                    else ck_assert_msg(nonzero == (row < valid), "%s head %d row %d", names[i], h, row);
                }
        }
        mcir_gpu_session_close(s);
    }
    for (int i = 0; i < 4; i++) free(prefilled[i]);
    mcir_env_free(env);
    mcir_compilation_free(&c);
    mcir_npy_free(&want);
    test_remove_dir(dir);
}
END_TEST

int main(void) {
    if (!test_tempdir("state", work_dir, sizeof work_dir)) return 1;
    unsetenv("MCIR_GPU_GRAPHS");
    Suite *s = suite_create("state");
    TCase *tc = tcase_create("state");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, state_format_errors);
    tcase_add_test(tc, state_in_place_session);
    tcase_add_test(tc, state_not_in_place_falls_back_to_a_copy);
    tcase_add_test(tc, decode_state_on_emu_at_three_lengths);
    tcase_add_test(tc, greedy_generation_with_resident_cache);
    suite_add_tcase(s, tc);
    int rc = test_main_nofork(s);
    test_remove_dir(work_dir);
    return rc;
}
