/*
 * test_writers.c — the mcir artifact and Graphviz writers: read → write →
 * read → write gives the same text; the artifact carries properties,
 * memory states, groups, in-place reuse and origins and reads back; data
 * a rewrite put in memory is written as "value" and reads back bit-exact;
 * defaults stay unwritten; the dot output has clusters, styles and a
 * legend, and Graphviz accepts it where `dot` is installed.
 */
#include <check.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcir/mcir.h"
#include "test_util.h"

static char *write_json(const mcir_graph *g) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert(mcir_graph_write_json(g, f));
    fclose(f);
    return buf;
}

static char *write_dot(const mcir_graph *g) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert(mcir_graph_write_dot(g, f));
    fclose(f);
    return buf;
}

static mcir_graph *read_file(const char *path) {
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g = mcir_graph_read_json(path, &d);
    ck_assert_msg(g, "%s rejected", path);
    return g;
}

static mcir_graph *read_string(const char *text) {
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g = mcir_graph_read_json_string(text, "artifact.mcir.json", &d);
    ck_assert_msg(g, "artifact rejected:\n%s", text);
    return g;
}

/* read → write → read → write: the two texts are equal. */
static void check_round_trip(const char *path) {
    mcir_graph *g = read_file(path);
    char *a = write_json(g);
    mcir_graph *h = read_string(a);
    char *b = write_json(h);
    ck_assert_msg(strcmp(a, b) == 0, "%s: round trip differs:\n%s\n----\n%s", path, a, b);
    free(a);
    free(b);
    mcir_graph_free(g);
    mcir_graph_free(h);
}

START_TEST(test_round_trip_good_graphs) {
    static const char *const paths[] = {"data/good/basic.json", "data/good/dtypes.json",
                                        "data/good/unordered.json", "data/good/artifact.json"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) check_round_trip(paths[i]);
}
END_TEST

START_TEST(test_round_trip_examples) {
    const char *root = getenv("MCIR_SOURCE_DIR");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/examples", root ? root : "..");
    DIR *d = opendir(dir);
    if (!d) return; /* no examples in this tree */
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s/graph.json", dir, e->d_name);
        if (access(path, R_OK) != 0) continue;
        check_round_trip(path);
        n++;
    }
    closedir(d);
    ck_assert_int_ge(n, 0);
}
END_TEST

START_TEST(test_artifact_fields) {
    mcir_graph *g = read_file("data/good/basic.json");
    mcir_node *sm = mcir_graph_find_node(g, "sm");
    mcir_node *bias = mcir_graph_find_node(g, "bias");
    mcir_node_add_property(g, sm, "weighted_streaming_reduction");
    sm->group = 3;
    bias->group = 3;
    bias->inplace_input = 0;
    bias->origin_rule = "fold_bias";
    bias->origin_nodes = "matmul,bias";
    mcir_graph_find_tensor(g, "hb")->memory_state = MCIR_MEM_STREAMING;
    mcir_graph_find_tensor(g, "ha")->memory_state = MCIR_MEM_RECOMPUTABLE;
    char *a = write_json(g);
    ck_assert(strstr(a, "\"properties\": [\"weighted_streaming_reduction\"]"));
    ck_assert(strstr(a, "\"group\": 3"));
    ck_assert(strstr(a, "\"inplace_input\": 0"));
    ck_assert(strstr(a, "\"origin\": {\"rule\": \"fold_bias\", \"nodes\": [\"matmul\", \"bias\"]}"));
    ck_assert(strstr(a, "\"hb\": {\"dtype\": \"f32\", \"shape\": [2, 4], \"kind\": \"intermediate\", "
                        "\"memory_state\": \"streaming\"}"));
    ck_assert(strstr(a, "\"y\": {\"dtype\": \"f32\", \"shape\": [2, 4], \"kind\": \"output\", "
                        "\"memory_state\": \"materialized\"}"));
    /* only given attributes are written: softmax has none */
    ck_assert(!strstr(a, "\"axis\""));
    ck_assert(strstr(a, "\"attrs\": {\"value\": 2.0}"));

    mcir_graph *h = read_string(a);
    mcir_node *sm2 = mcir_graph_find_node(h, "sm"), *bias2 = mcir_graph_find_node(h, "bias");
    ck_assert(mcir_node_has_property(sm2, "weighted_streaming_reduction"));
    ck_assert_int_eq(sm2->group, 3);
    ck_assert_int_eq(bias2->inplace_input, 0);
    ck_assert_str_eq(bias2->origin_rule, "fold_bias");
    ck_assert_str_eq(bias2->origin_nodes, "matmul,bias");
    ck_assert_int_eq(mcir_graph_find_tensor(h, "hb")->memory_state, MCIR_MEM_STREAMING);
    ck_assert_int_eq(mcir_graph_find_tensor(h, "ha")->memory_state, MCIR_MEM_RECOMPUTABLE);
    char *b = write_json(h);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    mcir_graph_free(g);
    mcir_graph_free(h);
}
END_TEST

START_TEST(test_in_memory_weights_written_as_value) {
    mcir_graph *g = read_file("data/good/basic.json");
    /* a folded constant made by a rewrite: 3x40 = 120 elements, no file */
    mcir_tensor *c = mcir_graph_add_tensor(g, "folded", MCIR_DTYPE_F32, 2, (int64_t[]){3, 40},
                                           MCIR_TENSOR_WEIGHT);
    ck_assert_ptr_nonnull(c);
    float *v = mcir_arena_alloc(g->arena, sizeof(float) * 120);
    for (int i = 0; i < 120; i++) v[i] = (float)(i - 60) / 7.0f + 1e-3f * (float)i;
    v[5] = 1e-30f;
    v[6] = -3.4e38f;
    c->data = v;
    mcir_tensor *hc = mcir_graph_add_tensor(g, "folded_h", MCIR_DTYPE_F16, 1, (int64_t[]){70},
                                            MCIR_TENSOR_WEIGHT);
    uint16_t *hv = mcir_arena_alloc(g->arena, sizeof(uint16_t) * 70);
    for (int i = 0; i < 70; i++) hv[i] = mcir_f32_to_f16((float)i * 0.37f - 9.0f);
    hc->data = hv;
    char *a = write_json(g);
    mcir_graph *h = read_string(a);
    mcir_tensor *c2 = mcir_graph_find_tensor(h, "folded");
    ck_assert_ptr_nonnull(c2);
    ck_assert_ptr_nonnull(c2->data);
    ck_assert(memcmp(c2->data, v, sizeof(float) * 120) == 0);
    mcir_tensor *hc2 = mcir_graph_find_tensor(h, "folded_h");
    ck_assert(memcmp(hc2->data, hv, sizeof(uint16_t) * 70) == 0);
    /* seeded weights stay seeded, file weights keep their file */
    ck_assert_ptr_null(mcir_graph_find_tensor(h, "seeded")->data);
    ck_assert_ptr_nonnull(mcir_graph_find_tensor(h, "w")->data_path);
    char *b = write_json(h);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    mcir_graph_free(g);
    mcir_graph_free(h);
}
END_TEST

START_TEST(test_dead_nodes_skipped) {
    mcir_graph *g = read_file("data/good/unordered.json");
    /* kill the tanh at the end and return n instead */
    mcir_node *last = g->nodes[g->n_nodes - 1];
    last->dead = true;
    mcir_graph_replace_uses(g, last->outputs[0], mcir_graph_find_tensor(g, "n"));
    char *a = write_json(g);
    ck_assert(!strstr(a, "\"tanh\""));
    mcir_graph *h = read_string(a);
    ck_assert_int_eq(h->n_nodes, 3);
    ck_assert_str_eq(h->outputs[0]->name, "n");
    mcir_graph_free(h);
    free(a);
    mcir_graph_free(g);
}
END_TEST

START_TEST(test_dot_output) {
    mcir_graph *g = read_file("data/good/artifact.json");
    char *dot = write_dot(g);
    ck_assert(strncmp(dot, "digraph \"artifact\" {", 20) == 0);
    ck_assert(strstr(dot, "subgraph cluster_group_0"));
    ck_assert(strstr(dot, "cluster_legend"));
    ck_assert(strstr(dot, "style=dotted, label=\"ex\\n[4, 16] f32\""));  /* recomputable */
    ck_assert(strstr(dot, "style=dashed, label=\"s1\\n[4, 10] f32\""));  /* streaming */
    ck_assert(strstr(dot, "style=solid, label=\"x\\n[4, 16] f32\""));    /* materialized */
    ck_assert(strstr(dot, "[weighted_streaming_reduction]"));
    ck_assert(dot[strlen(dot) - 2] == '}');

    /* Graphviz accepts it, where installed. */
    if (system("command -v dot > /dev/null 2>&1") == 0) {
        char path[] = "/tmp/mcir_dot_XXXXXX";
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        FILE *f = fdopen(fd, "w");
        fputs(dot, f);
        fclose(f);
        char cmd[256];
        snprintf(cmd, sizeof cmd, "dot -Tsvg %s > /dev/null", path);
        int rc = system(cmd);
        unlink(path);
        ck_assert_msg(rc == 0, "dot rejected the output:\n%s", dot);
    }
    free(dot);
    mcir_graph_free(g);
}
END_TEST

START_TEST(test_dot_escapes_names) {
    mcir_graph *g = mcir_graph_new("we\"ird");
    mcir_tensor *x = mcir_graph_add_tensor(g, "x\"\\", MCIR_DTYPE_F32, 1, (int64_t[]){2},
                                           MCIR_TENSOR_INPUT);
    mcir_tensor *y = mcir_graph_add_tensor(g, "y\n", MCIR_DTYPE_F32, -1, NULL,
                                           MCIR_TENSOR_INTERMEDIATE);
    mcir_graph_add_node(g, MCIR_OP_RELU, "r\"", 1, &x, 1, &y);
    mcir_graph_mark_output(g, y);
    char *dot = write_dot(g);
    ck_assert(strstr(dot, "digraph \"we\\\"ird\""));
    ck_assert(strstr(dot, "label=\"x\\\"\\\\\\n[2] f32\""));
    if (system("command -v dot > /dev/null 2>&1") == 0) {
        FILE *p = popen("dot -Tsvg > /dev/null", "w");
        ck_assert_ptr_nonnull(p);
        fputs(dot, p);
        ck_assert_int_eq(pclose(p), 0);
    }
    free(dot);
    mcir_graph_free(g);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("writers");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_round_trip_good_graphs);
    tcase_add_test(tc, test_round_trip_examples);
    tcase_add_test(tc, test_artifact_fields);
    tcase_add_test(tc, test_in_memory_weights_written_as_value);
    tcase_add_test(tc, test_dead_nodes_skipped);
    tcase_add_test(tc, test_dot_output);
    tcase_add_test(tc, test_dot_escapes_names);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_main(suite()); }
