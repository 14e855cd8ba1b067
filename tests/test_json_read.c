/*
 * test_json_read.c — the graph.json reader: valid graphs come back sorted,
 * inferred and as written (no defaults materialised); every file of the
 * malformed-input corpus (tests/data/bad, *.json) is rejected with exactly
 * the messages of its golden *.expected file; truncated and mutated
 * inputs never crash.
 *
 * Set MCIR_UPDATE_GOLDEN=1 to rewrite the *.expected files from the
 * current messages (then review the diff).
 */
#include <check.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "mcir/json_pos.h"
#include "io_test.h"
#include "mcir/mcir.h"
#include "test_util.h"

/* ------------------------------------------------------------- helpers */

static mcir_graph *read_quiet(const char *path, char **msgs) {
    capture c;
    cap_open(&c);
    mcir_graph *g = mcir_graph_read_json(path, &c.d);
    char *m = cap_close(&c);
    if (msgs) *msgs = m;
    else free(m);
    return g;
}

static mcir_graph *read_ok(const char *path) {
    char *msgs;
    mcir_graph *g = read_quiet(path, &msgs);
    ck_assert_msg(g, "%s rejected:\n%s", path, msgs);
    ck_assert_str_eq(msgs, "");
    free(msgs);
    return g;
}

static mcir_graph *read_text(const char *text, char **msgs) {
    capture c;
    cap_open(&c);
    mcir_graph *g = mcir_graph_read_json_string(text, "t.json", &c.d);
    char *m = cap_close(&c);
    if (msgs) *msgs = m;
    else free(m);
    return g;
}

/* ------------------------------------------------------ malformed corpus */

/* Runs one corpus directory: every NAME.json must be rejected with the
 * messages of NAME.expected. Returns the number of files. */
static int run_corpus(const char *dir) {
    char **names;
    int n = list_dir(dir, ".json", &names);
    bool update = getenv("MCIR_UPDATE_GOLDEN") && *getenv("MCIR_UPDATE_GOLDEN") == '1';
    int failures = 0;
    for (int i = 0; i < n; i++) {
        char path[512], gold[512];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(gold, sizeof gold, "%s/%.*s.expected", dir, (int)(strlen(names[i]) - 5), names[i]);
        char *msgs;
        mcir_graph *g = read_quiet(path, &msgs);
        if (g) {
            fprintf(stderr, "%s: accepted, expected an error\n", path);
            mcir_graph_free(g);
            failures++;
        }
        if (update) {
            FILE *f = fopen(gold, "w");
            ck_assert(f);
            fputs(msgs, f);
            fclose(f);
        } else {
            char *want = slurp(gold, NULL);
            if (!want) {
                fprintf(stderr, "%s: missing golden file %s\n", path, gold);
                failures++;
            } else if (strcmp(want, msgs) != 0) {
                fprintf(stderr, "%s: messages differ\n--- expected\n%s--- got\n%s", path, want,
                        msgs);
                failures++;
            }
            free(want);
        }
        if (!msgs[0]) {
            fprintf(stderr, "%s: no message\n", path);
            failures++;
        }
        free(msgs);
        free(names[i]);
    }
    free(names);
    ck_assert_msg(failures == 0, "%d corpus failure(s) in %s", failures, dir);
    return n;
}

START_TEST(test_bad_corpus) {
    int n = run_corpus("data/bad");
    ck_assert_int_ge(n, 100);
}
END_TEST

/* ------------------------------------------------------------ valid input */

START_TEST(test_good_graphs_read) {
    char **names;
    int n = list_dir("data/good", ".json", &names);
    ck_assert_int_ge(n, 4);
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "data/good/%s", names[i]);
        mcir_graph *g = read_ok(path);
        ck_assert(mcir_graph_verify(g, NULL));
        mcir_graph_free(g);
        free(names[i]);
    }
    free(names);
}
END_TEST

START_TEST(test_basic_structure) {
    mcir_graph *g = read_ok("data/good/basic.json");
    ck_assert_str_eq(g->name, "basic");
    ck_assert_str_eq(g->path, "data/good/basic.json");
    ck_assert_str_eq(g->dir, "data/good");
    ck_assert_int_eq(g->n_inputs, 1);
    ck_assert_int_eq(g->n_weights, 4);
    ck_assert_int_eq(g->n_nodes, 6);
    ck_assert_int_eq(g->n_outputs, 1);
    ck_assert_str_eq(g->outputs[0]->name, "y");
    ck_assert_int_eq(g->outputs[0]->kind, MCIR_TENSOR_OUTPUT);
    ck_assert_int_eq(g->outputs[0]->rank, 2);
    ck_assert_int_eq(g->outputs[0]->shape[1], 4);
    /* node positions are those of the node objects */
    mcir_node *sm = mcir_graph_find_node(g, "sm");
    ck_assert_ptr_nonnull(sm);
    ck_assert_int_eq(sm->loc.line, 19);
    ck_assert_int_eq(sm->loc.col, 5);
    mcir_tensor *x = mcir_graph_find_tensor(g, "x");
    ck_assert_int_eq(x->loc.line, 5);
    mcir_graph_free(g);
}
END_TEST

START_TEST(test_defaults_not_materialised) {
    mcir_graph *g = read_ok("data/good/basic.json");
    mcir_node *sm = mcir_graph_find_node(g, "sm");
    ck_assert_int_eq(sm->n_attrs, 0);
    ck_assert_int_eq(mcir_node_int(sm, "axis"), -1);
    mcir_node *mm = mcir_graph_find_node(g, "matmul");
    ck_assert_ptr_nonnull(mm);
    ck_assert_int_eq(mm->n_attrs, 0);
    ck_assert(!mcir_node_bool(mm, "transpose_a"));
    mcir_graph_free(g);
}
END_TEST

START_TEST(test_float_attr_accepts_integer) {
    mcir_graph *g = read_ok("data/good/basic.json");
    mcir_node *sc = mcir_graph_find_node(g, "sc");
    ck_assert_int_eq(sc->n_attrs, 1);
    ck_assert_int_eq(sc->attrs[0].type, MCIR_ATTR_FLOAT);
    ck_assert(mcir_node_float(sc, "value") == 2.0);
    ck_assert_int_eq(sc->attrs[0].loc.line, 17);
    ck_assert_int_eq(sc->attrs[0].loc.col, 91);
    mcir_graph_free(g);
}
END_TEST

START_TEST(test_weights_data_and_value) {
    mcir_graph *g = read_ok("data/good/basic.json");
    mcir_tensor *w = mcir_graph_find_tensor(g, "w");
    ck_assert_ptr_nonnull(w->data);
    ck_assert_ptr_nonnull(w->data_path);
    ck_assert_msg(w->data_path[0] == '/', "data_path resolved: %s", w->data_path);
    ck_assert(strstr(w->data_path, "tests/data/good/w/w_f32.npy"));
    const float *wf = w->data;
    ck_assert(wf[0] == 0.0f && wf[9] == 9 / 8.0f && wf[31] == 31 / 8.0f);

    mcir_tensor *b = mcir_graph_find_tensor(g, "b");
    const float *bf = b->data;
    ck_assert_ptr_null(b->data_path);
    ck_assert(bf[0] == 0.5f && bf[1] == -1.0f && bf[2] == 2.25f && bf[3] == 0.1f);
    mcir_tensor *half = mcir_graph_find_tensor(g, "half");
    ck_assert_int_eq(half->rank, 0);
    ck_assert(*(const float *)half->data == 0.5f);
    ck_assert_ptr_null(mcir_graph_find_tensor(g, "seeded")->data);
    mcir_graph_free(g);
}
END_TEST

START_TEST(test_weights_half_precision) {
    mcir_graph *g = read_ok("data/good/dtypes.json");
    const uint16_t *bh = mcir_graph_find_tensor(g, "bh")->data; /* npy v2.0, <f2 */
    ck_assert(mcir_f16_to_f32(bh[3]) == 4.0f);
    const uint16_t *gb = mcir_graph_find_tensor(g, "gb")->data; /* npy v3.0, <u2 */
    ck_assert_int_eq(mcir_graph_find_tensor(g, "gb")->dtype, MCIR_DTYPE_BF16);
    ck_assert(mcir_bf16_to_f32(gb[2]) == 3.0f);
    const uint16_t *vh = mcir_graph_find_tensor(g, "vh")->data;
    ck_assert_int_eq(vh[0], mcir_f32_to_f16(0.1f));
    ck_assert(mcir_f16_to_f32(vh[1]) == 65504.0f);
    const uint16_t *vb = mcir_graph_find_tensor(g, "vb")->data;
    ck_assert_int_eq(vb[0], mcir_f32_to_bf16(3.0e38f));
    ck_assert(*(const float *)mcir_graph_find_tensor(g, "s")->data == 0.5f);
    mcir_graph_free(g);
}
END_TEST

START_TEST(test_order_and_generated_names) {
    mcir_graph *g = read_ok("data/good/unordered.json");
    ck_assert_str_eq(g->name, "unordered"); /* the file stem */
    ck_assert_int_eq(g->nodes[0]->op, MCIR_OP_RELU);
    ck_assert_int_eq(g->nodes[1]->op, MCIR_OP_EXP);
    /* the names given later keep their names; generated ones step aside */
    ck_assert_str_eq(g->nodes[2]->name, "relu");
    ck_assert_str_eq(g->nodes[3]->name, "exp");
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = i + 1; j < g->n_nodes; j++)
            ck_assert_str_ne(g->nodes[i]->name, g->nodes[j]->name);
    mcir_graph_free(g);
}
END_TEST

START_TEST(test_artifact_fields_restored) {
    mcir_graph *g = read_ok("data/good/artifact.json");
    mcir_node *e = mcir_graph_find_node(g, "e");
    ck_assert_int_eq(e->group, 0);
    ck_assert_int_eq(e->inplace_input, 0);
    ck_assert(mcir_node_has_property(e, "recomputable_elementwise"));
    mcir_node *s = mcir_graph_find_node(g, "s");
    ck_assert_int_eq(s->inplace_input, -1);
    ck_assert_int_eq(s->n_outputs, 2);
    mcir_node *f = mcir_graph_find_node(g, "fused_sum");
    ck_assert_int_eq(f->group, -1);
    ck_assert_int_eq(f->n_properties, 2);
    ck_assert_str_eq(f->origin_rule, "fold_sum");
    ck_assert_str_eq(f->origin_nodes, "a,b");
    ck_assert_int_eq(mcir_graph_find_tensor(g, "ex")->memory_state, MCIR_MEM_RECOMPUTABLE);
    ck_assert_int_eq(mcir_graph_find_tensor(g, "s1")->memory_state, MCIR_MEM_STREAMING);
    ck_assert_int_eq(mcir_graph_find_tensor(g, "s0")->memory_state, MCIR_MEM_MATERIALIZED);
    mcir_graph_free(g);
}
END_TEST

START_TEST(test_read_string) {
    const char *text = "{\"mcir\": 1, \"inputs\": [{\"name\": \"a\", \"dtype\": \"bf16\", "
                       "\"shape\": []}], \"nodes\": [], \"outputs\": [\"a\"]}";
    char *msgs;
    mcir_graph *g = read_text(text, &msgs);
    ck_assert_msg(g, "%s", msgs);
    free(msgs);
    ck_assert_str_eq(g->name, "t");
    ck_assert_str_eq(g->dir, ".");
    ck_assert_int_eq(g->n_outputs, 1);
    ck_assert_int_eq(g->outputs[0]->kind, MCIR_TENSOR_INPUT);
    mcir_graph_free(g);

    capture c;
    cap_open(&c);
    g = mcir_graph_read_json_string("{\"mcir\": 1, \"nodes\": [], \"outputs\": []}", NULL,
                                    &c.d);
    msgs = cap_close(&c);
    ck_assert_ptr_null(g);
    ck_assert_str_eq(msgs, "<input>:1:1: error: missing required field 'inputs'\n"
                           "<input>:1:37: error: 'outputs' is empty; the graph must return at "
                           "least one tensor\n");
    free(msgs);
}
END_TEST

START_TEST(test_missing_file) {
    char *msgs;
    mcir_graph *g = read_quiet("data/good/no_such_graph.json", &msgs);
    ck_assert_ptr_null(g);
    ck_assert_str_eq(msgs, "data/good/no_such_graph.json: error: cannot open: No such file or "
                           "directory\n");
    free(msgs);
}
END_TEST

START_TEST(test_error_count_in_diag) {
    capture c;
    cap_open(&c);
    mcir_graph *g = mcir_graph_read_json("data/bad/many_errors.json", &c.d);
    free(cap_close(&c));
    ck_assert_ptr_null(g);
    ck_assert_int_eq(c.d.n_errors, 9);
}
END_TEST

/* ------------------------------------------------------------- positions */

START_TEST(test_json_pos_paths) {
    const char *text = "{\n  \"a\": [1, {\"b\": \"x\"}],\n  \"c/d\": true,\n"
                       "  \"\\u00e9\": {\"k\": null}\n}";
    mcir_json_pos *p = mcir_json_pos_scan(text, strlen(text));
    mcir_loc l = mcir_json_pos_loc(p, mcir_json_pos_find(p, ""), "f");
    ck_assert(l.line == 1 && l.col == 1);
    l = mcir_json_pos_loc(p, mcir_json_pos_find(p, "/a/1/b"), "f");
    ck_assert(l.line == 2 && l.col == 18);
    l = mcir_json_pos_key_loc(p, mcir_json_pos_find(p, "/a/1/b"), "f");
    ck_assert(l.line == 2 && l.col == 13);
    l = mcir_json_pos_loc(p, mcir_json_pos_find(p, "/c~1d"), "f");
    ck_assert(l.line == 3 && l.col == 10);
    l = mcir_json_pos_loc(p, mcir_json_pos_find(p, "/\xc3\xa9/k"), "f");
    ck_assert(l.line == 4 && l.col == 19);
    ck_assert_int_eq(mcir_json_pos_find(p, "/a/2"), -1);
    ck_assert_int_eq(mcir_json_pos_find(p, "/zz"), -1);
    ck_assert_int_eq(mcir_json_pos_count(p, mcir_json_pos_find(p, "/a")), 2);
    ck_assert_int_eq(mcir_json_pos_loc(p, -1, "f").line, 0);
    mcir_json_pos_free(p);

    /* columns count characters, not bytes */
    const char *utf = "[\"\xc3\xa9\xc3\xa9\", 7]";
    p = mcir_json_pos_scan(utf, strlen(utf));
    ck_assert_int_eq(mcir_json_pos_loc(p, mcir_json_pos_find(p, "/1"), "f").col, 8);
    mcir_json_pos_free(p);

    /* malformed text: partial table, no crash */
    const char *bad[] = {"", "{", "[1, 2", "{\"a\": ", "}}}", "\"abc", "{\"a\" 1}", "[[[[", "x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = mcir_json_pos_scan(bad[i], strlen(bad[i]));
        mcir_json_pos_find(p, "/a/0");
        mcir_json_pos_free(p);
    }
}
END_TEST

/* ----------------------------------------------------------- robustness */

START_TEST(test_truncations_never_crash) {
    size_t len;
    char *text = slurp("data/good/artifact.json", &len);
    ck_assert_ptr_nonnull(text);
    for (size_t n = 0; n < len; n++) {
        char *t = strndup(text, n);
        char *msgs;
        mcir_graph *g = read_text(t, &msgs);
        ck_assert_msg(!g || n + 2 >= len, "prefix of %zu bytes accepted", n);
        mcir_graph_free(g);
        free(msgs);
        free(t);
    }
    free(text);
}
END_TEST

START_TEST(test_mutations_never_crash) {
    size_t len;
    char *text = slurp("data/good/basic.json", &len);
    ck_assert_ptr_nonnull(text);
    static const char subst[] = "[]{}\",:0-1e9x \\\x01\xff";
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (int iter = 0; iter < 3000; iter++) {
        char *t = strdup(text);
        int edits = 1 + iter % 3;
        for (int e = 0; e < edits; e++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            size_t pos = (size_t)(state >> 33) % len;
            t[pos] = subst[(state >> 17) % (sizeof subst - 1)];
        }
        char *msgs;
        mcir_graph *g = read_text(t, &msgs);
        if (g) {
            ck_assert(mcir_graph_verify(g, NULL));
            mcir_graph_free(g);
        } else {
            ck_assert_msg(msgs[0], "rejected without a message");
        }
        free(msgs);
        free(t);
    }
    free(text);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("json_read");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_bad_corpus);
    tcase_add_test(tc, test_good_graphs_read);
    tcase_add_test(tc, test_basic_structure);
    tcase_add_test(tc, test_defaults_not_materialised);
    tcase_add_test(tc, test_float_attr_accepts_integer);
    tcase_add_test(tc, test_weights_data_and_value);
    tcase_add_test(tc, test_weights_half_precision);
    tcase_add_test(tc, test_order_and_generated_names);
    tcase_add_test(tc, test_artifact_fields_restored);
    tcase_add_test(tc, test_read_string);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_error_count_in_diag);
    tcase_add_test(tc, test_json_pos_paths);
    tcase_add_test(tc, test_truncations_never_crash);
    tcase_add_test(tc, test_mutations_never_crash);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_main(suite()); }
