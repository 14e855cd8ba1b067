/*
 * test_dims.c — symbolic dimensions (docs/graph-format.md "Symbolic dimensions",
 * docs/cli.md --dim): the extent algebra; graph.json "dims" and its
 * format errors at their line and column; the range rules (a shape rule
 * that holds only for some sizes is an error naming the dimension); the
 * artifact's round trip; and through mcirc, a GPT-2 block with a symbolic
 * seq and a CNN with a symbolic batch, each run on the CPU path at three
 * sizes from --input files and checked against the reference interpreter
 * of the same graph written with integer shapes at that size — an oracle
 * that never sees a symbol (the block also with batch and seq both
 * symbolic). Also --dim's usage errors, inputs that
 * disagree on a dimension, a rewrite that holds only at the largest size,
 * and the refusal to run unspecialised kernels on a device.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "mcir/mcir.h"
#include "test_util.h"

/* The emulated device's runs at several sizes: three, the largest last;
 * two in the sanitizer build (ASan and UBSan watch the host code, which
 * the third size runs no differently, at a third of the test's time
 * there; the emulator's own checks run at every size in the normal
 * build). */
#ifdef MCIR_SANITIZED_BUILD
#define EMU_SIZES 2
#else
#define EMU_SIZES 3
#endif

#define RUN(...) cli_run((const char *const[]){__VA_ARGS__, NULL})

/* Reads graph text; the diagnostics in *errs (malloc'd) when errs. */
/* path: where the text's relative data files are found from */
static mcir_graph *read_text_at(const char *text, const char *path, char **errs) {
    size_t len = 0;
    char *buf = NULL;
    FILE *f = open_memstream(&buf, &len);
    mcir_diag d = mcir_diag_to(f);
    mcir_graph *g = mcir_graph_read_json_string(text, path, &d);
    fclose(f);
    if (errs) *errs = buf;
    else free(buf);
    return g;
}

static mcir_graph *read_text(const char *text, char **errs) { return read_text_at(text, "g.json", errs); }

static void expect_error(const char *text, const char *where, const char *what) {
    char *errs;
    mcir_graph *g = read_text(text, &errs);
    ck_assert_msg(g == NULL, "accepted: %s", text);
    ck_assert_msg(strstr(errs, where) && strstr(errs, what), "want '%s' ... '%s', got: %s", where,
                  what, errs);
    free(errs);
}

/* ------------------------------------------------------------- extents */

START_TEST(extent_algebra) {
    mcir_graph *g = mcir_graph_new("t");
    int b = mcir_graph_add_dim(g, "batch", 1, 8), s = mcir_graph_add_dim(g, "seq", 2, 64);
    ck_assert(b == 0 && s == 1);
    ck_assert_int_eq(mcir_graph_add_dim(g, "seq", 1, 2), -1);
    mcir_extent eb = mcir_extent_dim(b), es = mcir_extent_dim(s), c768 = mcir_extent_const(768);
    mcir_extent bs, bs768, sum, one = mcir_extent_const(1);
    ck_assert(mcir_extent_mul(&eb, &es, &bs) && mcir_extent_mul(&bs, &c768, &bs768));
    ck_assert(mcir_extent_add(&es, &one, &sum));
    char buf[64];
    ck_assert_str_eq(mcir_extent_str(g, &bs768, buf, sizeof buf), "768*batch*seq");
    ck_assert_str_eq(mcir_extent_str(g, &sum, buf, sizeof buf), "seq+1");
    /* the same polynomial however it was built */
    mcir_extent sb, sb768;
    ck_assert(mcir_extent_mul(&es, &c768, &sb) && mcir_extent_mul(&sb, &eb, &sb768));
    ck_assert(mcir_extent_equal(&bs768, &sb768));
    ck_assert(!mcir_extent_equal(&bs768, &bs));
    int64_t v;
    ck_assert(mcir_extent_is_const(&c768, &v) && v == 768);
    ck_assert(!mcir_extent_is_const(&sum, NULL));
    int64_t lo, hi;
    mcir_extent_bounds(g, &bs768, &lo, &hi);
    ck_assert(lo == 768 * 2 && hi == 768 * 8 * 64);
    ck_assert_int_eq(mcir_extent_eval(g, &sum), 65);   /* bound at max */
    ck_assert_int_eq(mcir_extent_first_dim(&sum), s);
    ck_assert_int_eq(mcir_extent_first_dim(&c768), -1);
    /* more than MCIR_EXTENT_TERMS terms is refused, not truncated */
    mcir_extent p = mcir_extent_const(1), q;
    mcir_extent bp1, sp1;
    ck_assert(mcir_extent_add(&eb, &one, &bp1) && mcir_extent_add(&es, &one, &sp1));
    ck_assert(mcir_extent_mul(&bp1, &sp1, &p));          /* 4 terms */
    ck_assert(!mcir_extent_mul(&p, &bp1, &q));           /* 6 */
    mcir_graph_free(g);
}
END_TEST

/* --------------------------------------------------------- format errors */

START_TEST(dims_format_errors) {
    static const char *const head = "{\"mcir\": 1, \"dims\": ";
    struct {
        const char *dims, *rest, *where, *what;
    } c[] = {
        {"{\"seq\": {\"min\": 0, \"max\": 8}}", "", "g.json:1:37:", "'min' is 0; a dimension is at least 1"},
        {"{\"seq\": {\"min\": 9, \"max\": 8}}", "", "g.json:1:37:", "'min' 9 is above 'max' 8"},
        {"{\"seq\": {\"min\": 1.5, \"max\": 8}}", "", "g.json:1:37:", "'min' must be an integer, got a number"},
        {"{\"seq\": {\"min\": 1}}", "", "g.json:1:", "dims: 'seq': missing required field 'max'"},
        {"{\"seq\": 8}", "", "g.json:1:29:", "dims: 'seq' must be an object"},
        {"{\"seq\": {\"min\": 1, \"max\": 8, \"step\": 2}}", "", "g.json:1:", "unknown field 'step'"},
        {"[1, 8]", "", "g.json:1:21:", "'dims' must be an object"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "%s%s,\n\"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4]}],\n"
                 "\"nodes\": [{\"op\": \"relu\", \"inputs\": [\"x\"], \"outputs\": [\"y\"]}],\n"
                 "\"outputs\": [\"y\"]}", head, c[i].dims);
        expect_error(text, c[i].where, c[i].what);
    }
}
END_TEST

/* A one-node graph over x [batch, seq, 8] with batch in [1, 4] and seq
 * in [2, 16], plus whatever weights and attributes a case needs. */
static char *graph_text(const char *x_shape, const char *weights, const char *op,
                        const char *inputs, const char *attrs) {
    char *t = malloc(4096);
    snprintf(t, 4096,
             "{\"mcir\": 1,\n"
             "\"dims\": {\"batch\": {\"min\": 1, \"max\": 4}, \"seq\": {\"min\": 2, \"max\": 16}},\n"
             "\"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": %s}],\n"
             "\"weights\": [%s],\n"
             "\"nodes\": [{\"name\": \"n\", \"op\": \"%s\", \"inputs\": %s, \"outputs\": [\"y\"]%s%s}],\n"
             "\"outputs\": [\"y\"]}",
             x_shape, weights, op, inputs, attrs[0] ? ", \"attrs\": " : "", attrs);
    return t;
}

START_TEST(names_in_shapes_and_attrs_errors) {
    struct {
        const char *x, *w, *op, *in, *attrs, *where, *what;
    } c[] = {
        {"[\"batch\", \"sek\", 8]", "", "relu", "[\"x\"]", "", "g.json:3:61:",
         "shape dimension 1 names 'sek', which is not a declared dimension (dims: 'batch', 'seq') "
         "(did you mean 'seq'?)"},
        {"[\"batch\", \"seq\", 8]", "{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [\"seq\", 8]}",
         "add", "[\"x\", \"w\"]", "", "g.json:4:53:",
         "weight 'w': shape dimension 0 is 'seq'; weights have integer shapes"},
        {"[\"batch\", \"seq\", 8]", "", "softmax", "[\"x\"]", "{\"axis\": \"seq\"}", "g.json:5:",
         "attribute 'axis' names dimension 'seq'; only reshape's 'shape', arange's 'end' and "
         "slice's 'start' and 'end' may"},
        {"[\"batch\", \"seq\", 8]", "", "reshape", "[\"x\"]", "{\"shape\": [\"batch\", \"len\", 8]}",
         "g.json:5:", "attribute 'shape' entry 1 names 'len', which is not a declared dimension"},
        {"[\"batch\", \"seq\", 8]", "", "slice", "[\"x\"]",
         "{\"axis\": 1, \"start\": 0, \"end\": \"sequence\"}", "g.json:5:",
         "attribute 'end' names 'sequence', which is not a declared dimension"},
        {"[\"batch\", 2.5, 8]", "", "relu", "[\"x\"]", "", "g.json:3:",
         "shape dimension 1 must be a positive integer, got a number"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char *t = graph_text(c[i].x, c[i].w, c[i].op, c[i].in, c[i].attrs);
        expect_error(t, c[i].where, c[i].what);
        free(t);
    }
    /* no dims at all: the name is not a dimension of anything */
    expect_error("{\"mcir\": 1, \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"seq\"]}],"
                 " \"nodes\": [{\"op\": \"relu\", \"inputs\": [\"x\"], \"outputs\": [\"y\"]}],"
                 " \"outputs\": [\"y\"]}",
                 "g.json:1:64:", "shape dimension 0 names 'seq', but the graph declares no 'dims'");
    /* nine dimensions: one too many */
    char text[2048];
    size_t k = (size_t)snprintf(text, sizeof text, "{\"mcir\": 1, \"dims\": {");
    for (int i = 0; i < 9; i++)
        k += (size_t)snprintf(text + k, sizeof text - k, "%s\"d%d\": {\"min\": 1, \"max\": 2}",
                              i ? ", " : "", i);
    snprintf(text + k, sizeof text - k,
             "}, \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4]}],"
             " \"nodes\": [{\"op\": \"relu\", \"inputs\": [\"x\"], \"outputs\": [\"y\"]}],"
             " \"outputs\": [\"y\"]}");
    expect_error(text, "g.json:1:", "dims: 'd8': more than 8 dimensions");
}
END_TEST

/* ----------------------------------------------------------- range rules */

START_TEST(rules_must_hold_for_every_size) {
    struct {
        const char *x, *w, *op, *in, *attrs, *what;
    } c[] = {
        /* broadcasting seq against 16 (its max) */
        {"[\"batch\", \"seq\", 8]", "{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [16, 8]}",
         "add", "[\"x\", \"w\"]", "",
         "'x' [batch, seq, 8] and 'w' [16, 8] do not broadcast for every size: seq against 16 "
         "(dim 1) agree only for some values of dimension 'seq' (2..16)"},
        /* two dims against each other */
        {"[\"batch\", \"seq\", 8]", "", "add", "[\"x\", \"x2\"]", "", NULL},
        /* wrong at the largest sizes already: the op's own message, with the sizes */
        {"[\"batch\", \"seq\", 8]", "{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [5, 8]}",
         "mul", "[\"x\", \"w\"]", "",
         "(at dimension 'batch' = 4 (of 1..4), dimension 'seq' = 16 (of 2..16))"},
        /* a split of a symbolic axis into fixed sizes */
        {"[\"batch\", \"seq\", 8]", "", "split", "[\"x\"]", "{\"axis\": 1, \"sizes\": [16]}",
         "splits axis 1 of 'x' [batch, seq, 8], of extent seq, into fixed sizes: they add up only "
         "for some values of dimension 'seq' (2..16)"},
        /* a reshape whose sizes add up only for some values */
        {"[\"batch\", \"seq\", 8]", "", "reshape", "[\"x\"]", "{\"shape\": [\"batch\", -1, 16]}",
         "cannot reshape 'x' [batch, seq, 8] to [batch, -1, 16] for every size: 8*batch*seq "
         "elements divided by 16*batch is whole only for some values of dimension 'batch'"},
        {"[\"batch\", \"seq\", 8]", "", "reshape", "[\"x\"]", "{\"shape\": [\"batch\", 128]}",
         "cannot reshape 'x' [batch, seq, 8] to [batch, 128] for every size: 8*batch*seq "
         "elements against 128*batch agree only for some values of dimension 'batch'"},
        /* matmul's inner dimension */
        {"[\"batch\", 8, \"seq\"]", "{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [16, 4]}",
         "matmul", "[\"x\", \"w\"]", "",
         "the inner dimensions of the product: seq and 16 agree only for some values of "
         "dimension 'seq' (2..16)"},
        /* slices: out of range for small seq, or named beyond the axis */
        {"[\"batch\", \"seq\", 8]", "", "slice", "[\"x\"]", "{\"axis\": 1, \"start\": 3, \"end\": 100}",
         "slice 3:100 of axis 1 (extent seq) is a non-empty slice of the same form only for "
         "some values of dimension 'seq' (2..16)"},
        {"[\"batch\", 8, 8]", "", "slice", "[\"x\"]", "{\"axis\": 1, \"start\": 0, \"end\": \"seq\"}",
         "slice 0:seq of axis 1 (extent 8) is a non-empty slice of the same form only for some "
         "values of dimension 'seq' (2..16)"},
        /* a convolution over a symbolic spatial extent */
        {"[\"batch\", 3, \"seq\", 8]", "{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [4, 3, 1, 1]}",
         "conv2d", "[\"x\", \"w\"]", "",
         "dim 2 of 'x' depends on dimension 'seq' (2..16); only the batch (dim 0) of a "
         "convolution or pooling may be symbolic yet"},
        /* arange past the smallest size */
        {"[\"batch\", \"seq\", 8]", "", "arange", "[]", "{\"start\": 2, \"end\": \"seq\"}",
         "start 2 and end seq give no values for some values of dimension 'seq' (2..16)"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char *t;
        if (!c[i].what) {   /* x [a, 8] + x2 [b, 8]: equal at the largest sizes only */
            t = malloc(4096);
            snprintf(t, 4096,
                     "{\"mcir\": 1, \"dims\": {\"a\": {\"min\": 1, \"max\": 8}, \"b\": {\"min\": 2, \"max\": 8}},"
                     " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"a\", 8]},"
                     " {\"name\": \"x2\", \"dtype\": \"f32\", \"shape\": [\"b\", 8]}],"
                     " \"nodes\": [{\"name\": \"n\", \"op\": \"add\", \"inputs\": [\"x\", \"x2\"], \"outputs\": [\"y\"]}],"
                     " \"outputs\": [\"y\"]}");
            expect_error(t, "node 'n' (add)", "a against b (dim 0) agree only for some values "
                         "of dimension 'a' (1..8)");
            free(t);
            continue;
        }
        t = graph_text(c[i].x, c[i].w, c[i].op, c[i].in, c[i].attrs);
        char node[64];
        snprintf(node, sizeof node, "g.json:5:11: error: node 'n' (%s)", c[i].op);
        expect_error(t, node, c[i].what);
        free(t);
    }
}
END_TEST

/* Shapes that hold for every size, and what they become. */
START_TEST(symbolic_shapes_inferred) {
    const char *text =
        "{\"mcir\": 1, \"dims\": {\"batch\": {\"min\": 1, \"max\": 4}, \"seq\": {\"min\": 2, \"max\": 16}},\n"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"batch\", \"seq\", 8]},\n"
        "            {\"name\": \"t\", \"dtype\": \"f32\", \"shape\": [\"batch\", 1, 8]}],\n"
        " \"weights\": [{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [8, 6]},\n"
        "             {\"name\": \"pos\", \"dtype\": \"f32\", \"shape\": [16, 8]}],\n"
        " \"nodes\": [\n"
        "  {\"name\": \"flat\", \"op\": \"reshape\", \"inputs\": [\"x\"], \"outputs\": [\"f\"], \"attrs\": {\"shape\": [-1, 8]}},\n"
        "  {\"name\": \"mm\", \"op\": \"matmul\", \"inputs\": [\"f\", \"w\"], \"outputs\": [\"h\"]},\n"
        "  {\"name\": \"back\", \"op\": \"reshape\", \"inputs\": [\"h\"], \"outputs\": [\"h3\"], \"attrs\": {\"shape\": [\"batch\", \"seq\", 6]}},\n"
        "  {\"name\": \"cat\", \"op\": \"concat\", \"inputs\": [\"x\", \"t\"], \"outputs\": [\"kv\"], \"attrs\": {\"axis\": 1}},\n"
        "  {\"name\": \"last\", \"op\": \"slice\", \"inputs\": [\"kv\"], \"outputs\": [\"tail\"], \"attrs\": {\"axis\": 1, \"start\": -1, \"end\": 1000}},\n"
        "  {\"name\": \"drop\", \"op\": \"slice\", \"inputs\": [\"kv\"], \"outputs\": [\"head\"], \"attrs\": {\"axis\": 1, \"start\": 1, \"end\": \"seq\"}},\n"
        "  {\"name\": \"p\", \"op\": \"slice\", \"inputs\": [\"pos\"], \"outputs\": [\"ps\"], \"attrs\": {\"axis\": 0, \"start\": 0, \"end\": \"seq\"}},\n"
        "  {\"name\": \"addp\", \"op\": \"add\", \"inputs\": [\"x\", \"ps\"], \"outputs\": [\"xp\"]},\n"
        "  {\"name\": \"tr\", \"op\": \"transpose\", \"inputs\": [\"xp\"], \"outputs\": [\"xt\"], \"attrs\": {\"perm\": [2, 0, 1]}},\n"
        "  {\"name\": \"red\", \"op\": \"reduce_sum\", \"inputs\": [\"xt\"], \"outputs\": [\"r\"], \"attrs\": {\"axes\": [0]}}\n"
        " ],\n"
        " \"outputs\": [\"h3\", \"tail\", \"head\", \"r\"]}\n";
    char *errs;
    mcir_graph *g = read_text(text, &errs);
    ck_assert_msg(g != NULL, "%s", errs);
    free(errs);
    struct {
        const char *tensor, *shape;
    } want[] = {
        {"f", "[batch*seq, 8]"},   {"h", "[batch*seq, 6]"},      {"h3", "[batch, seq, 6]"},
        {"kv", "[batch, seq+1, 8]"}, {"tail", "[batch, 1, 8]"}, {"head", "[batch, seq-1, 8]"},
        {"ps", "[seq, 8]"},        {"xt", "[8, batch, seq]"},    {"r", "[1, batch, seq]"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const mcir_tensor *t = mcir_graph_find_tensor(g, want[i].tensor);
        char got[256] = "[", e[64];
        for (int k = 0; k < t->rank; k++) {
            mcir_extent x = mcir_tensor_extent(t, k);
            strcat(got, k ? ", " : "");
            strcat(got, mcir_extent_str(g, &x, e, sizeof e));
        }
        strcat(got, "]");
        ck_assert_msg(!strcmp(got, want[i].shape), "%s: %s, want %s", want[i].tensor, got,
                      want[i].shape);
    }
    /* bound at the largest sizes; rebinding changes shapes and attributes */
    ck_assert_int_eq(mcir_graph_find_tensor(g, "kv")->shape[1], 17);
    mcir_diag d = mcir_diag_to(NULL);
    ck_assert(mcir_graph_bind_dims(g, (int64_t[]){3, 5}, &d));
    const mcir_tensor *kv = mcir_graph_find_tensor(g, "kv"), *h = mcir_graph_find_tensor(g, "h");
    ck_assert(kv->shape[0] == 3 && kv->shape[1] == 6 && h->shape[0] == 15);
    ck_assert_int_eq(mcir_node_int(mcir_graph_find_node(g, "p"), "end"), 5);
    char b[64];
    ck_assert_str_eq(mcir_dims_binding_str(g, b, sizeof b), "batch=3, seq=5");
    /* the artifact keeps the names and reads back the same */
    char *t1 = NULL, *t2 = NULL;
    size_t n1, n2;
    FILE *f = open_memstream(&t1, &n1);
    ck_assert(mcir_graph_write_json(g, f));
    fclose(f);
    ck_assert_ptr_nonnull(strstr(t1, "\"shape\": [\"batch\", \"seq\", 8]"));
    ck_assert_ptr_nonnull(strstr(t1, "\"end\": \"seq\""));
    ck_assert_ptr_nonnull(strstr(t1, "\"shape\": [\"batch\", \"seq+1\", 8]"));
    mcir_graph *g2 = read_text(t1, &errs);
    ck_assert_msg(g2 != NULL, "%s", errs);
    free(errs);
    f = open_memstream(&t2, &n2);
    ck_assert(mcir_graph_write_json(g2, f));
    fclose(f);
    ck_assert_str_eq(t1, t2);
    /* a "tensors" record that disagrees is caught as text */
    char *bad = strdup(t1), *at = strstr(bad, "\"seq+1\"");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "\"seq+2\"", 7);
    mcir_graph_free(read_text(bad, &errs));
    ck_assert_ptr_nonnull(strstr(errs, "tensors: 'kv' is declared with shape [batch, seq+2, 8] "
                                       "but has shape [batch, seq+1, 8]"));
    free(errs);
    free(bad);
    free(t1);
    free(t2);
    mcir_graph_free(g2);
    mcir_graph_free(g);
}
END_TEST

/* ------------------------------------------------ runs at several sizes */

/* Finite, varied values: a mix of frequencies and a slow drift, so no
 * two rows, heads or channels see the same numbers. */
static float input_value(int64_t i) {
    return (float)(0.8 * sin(0.731 * (double)i) + 0.3 * cos(0.057 * (double)i) +
                   0.05 * (double)(i % 7) - 0.1);
}

/* The graph text with every dimension written as its integer at `values`
 * and "dims" gone: an ordinary graph, the interpreter's oracle. */
static char *concrete_text(const char *path, const char *const *names, const int64_t *values,
                           int n) {
    json_error_t e;
    json_t *root = json_load_file(path, 0, &e);
    ck_assert_msg(root != NULL, "%s: %s", path, e.text);
    json_object_del(root, "dims");
    json_t *lists[2] = {json_object_get(root, "inputs"), json_object_get(root, "nodes")};
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < json_array_size(lists[l]); i++) {
            json_t *item = json_array_get(lists[l], i);
            json_t *holders[2] = {item, l ? json_object_get(item, "attrs") : NULL};
            for (int h = 0; h < 2; h++) {
                const char *key;
                json_t *v;
                json_object_foreach(holders[h], key, v) {
                    if (l == 1 && h == 0) continue;   /* a node's own fields */
                    json_t *vals = json_is_array(v) ? v : NULL;
                    for (int k = 0; k < n; k++) {
                        if (json_is_string(v) && !strcmp(json_string_value(v), names[k]))
                            json_object_set_new(holders[h], key, json_integer(values[k]));
                        for (size_t j = 0; vals && j < json_array_size(vals); j++) {
                            json_t *x = json_array_get(vals, j);
                            if (json_is_string(x) && !strcmp(json_string_value(x), names[k]))
                                json_array_set_new(vals, j, json_integer(values[k]));
                        }
                    }
                }
            }
        }
    char *text = json_dumps(root, 0);
    json_decref(root);
    return text;
}

/* Runs graph `rel` through mcirc on the CPU path at the sizes `values`
 * (input x from a file of those sizes, --verify on), then checks every
 * output file against the interpreter on the integer-shaped graph. */
static void run_on(const char *rel, const char *const *names, const int64_t *values, int n,
                   const char *out_name, const char *device, bool cached) {
    char dir[256];
    ck_assert(test_tempdir("dims", dir, sizeof dir));
    char *text = concrete_text(cli_src(rel), names, values, n);
    char *errs;
    mcir_graph *oracle = read_text_at(text, cli_src(rel), &errs);
    ck_assert_msg(oracle != NULL, "%s", errs);
    free(errs);
    free(text);
    const mcir_tensor *x = mcir_graph_find_tensor(oracle, "x");
    int64_t nx = mcir_tensor_numel(x);
    float *xv = malloc((size_t)nx * sizeof *xv);
    for (int64_t i = 0; i < nx; i++) xv[i] = input_value(i);
    char xpath[300], opath[400];
    snprintf(xpath, sizeof xpath, "%s/x.npy", dir);
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_npy_write(xpath, MCIR_DTYPE_F32, x->rank, x->shape, xv, &d));
    char input_arg[320], out_dir[300];
    snprintf(input_arg, sizeof input_arg, "x=%s", xpath);
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    cli_result r = RUN("--run", "--device", device, "--verify", "--input", input_arg, "-o", out_dir,
                       cli_src(rel));
    ck_assert_msg(r.status == 0, "%s at %s=%lld: exit %d\n%s", rel, names[0],
                  (long long)values[0], r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, " ok\n"));
    ck_assert_ptr_null(strstr(r.out, "FAIL"));
    if (strcmp(device, "emu") == 0) {
        /* the kernels ran (and matched the original graph), each size-generic,
         * and after the first size nothing was compiled again */
        ck_assert_ptr_nonnull(strstr(r.out, "(emu vs the original graph)"));
        ck_assert_msg(strstr(r.out, "kernels size-generic\n") && !strstr(r.out, "size-generic (not:"), "%s",
                      r.out);
        if (cached) ck_assert_msg(strstr(r.out, "\n  emu      0 compiles") != NULL, "%s", r.out);
    }

    mcir_env *env = mcir_env_new(oracle, 0);
    mcir_env_set(env, x, xv);
    ck_assert(mcir_interp_run(oracle, env, &d));
    const mcir_tensor *y = mcir_graph_find_tensor(oracle, out_name);
    snprintf(opath, sizeof opath, "%s/%s.npy", out_dir, out_name);
    mcir_npy got;
    ck_assert(mcir_npy_read(opath, &got, &d));
    ck_assert_int_eq(got.rank, y->rank);
    for (int k = 0; k < y->rank; k++) ck_assert_int_eq(got.shape[k], y->shape[k]);
    mcir_compare_result cmp;
    mcir_values_compare((const float *)got.data, mcir_env_get(env, y), mcir_tensor_numel(y), &cmp);
    ck_assert_msg(mcir_compare_within(&cmp, mcir_compare_tolerance(y->dtype)),
                  "%s at %s=%lld: max rel err %g", rel, names[0], (long long)values[0], cmp.max_rel);
    /* and not trivially: the output varies */
    const float *yv = got.data;
    float lo = yv[0], hi = yv[0];
    for (int64_t i = 0; i < mcir_tensor_numel(y); i++) {
        ck_assert(isfinite(yv[i]));
        lo = fminf(lo, yv[i]);
        hi = fmaxf(hi, yv[i]);
    }
    ck_assert(hi > lo);
    mcir_npy_free(&got);
    mcir_env_free(env);
    cli_result_free(&r);
    free(xv);
    mcir_graph_free(oracle);
    test_remove_dir(dir);
}

static void run_at(const char *rel, const char *const *names, const int64_t *values, int n,
                   const char *out_name) {
    run_on(rel, names, values, n, out_name, "cpu", false);
}

/* The causal mask a symbolic graph computes (arange, greater, where) is
 * recognised: the attention takes causal: true and the nodes that built
 * the mask go, so the block is the static example's 7 kernels. */
START_TEST(computed_causal_mask_becomes_causal) {
    cli_result r = RUN("--emit", "mcir", cli_src("tests/data/dims/gpt2_block_seq.json"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "\"causal\": true"));
    ck_assert_ptr_null(strstr(r.out, "\"op\": \"where\""));
    ck_assert_ptr_null(strstr(r.out, "\"op\": \"arange\""));
    cli_result_free(&r);
    r = RUN(cli_src("tests/data/dims/gpt2_block_seq.json"));
    ck_assert_ptr_nonnull(strstr(r.out, "  kernels  7 for sm_90"));
    cli_result_free(&r);
}
END_TEST

START_TEST(gpt2_block_at_three_seq_lengths) {
    static const char *const names[] = {"seq"};
    int64_t sizes[] = {1, 37, 128};
    for (int i = 0; i < 3; i++)
        run_at("tests/data/dims/gpt2_block_seq.json", names, &sizes[i], 1, "y");
}
END_TEST

START_TEST(gpt2_block_at_three_batch_and_seq_sizes) {
    static const char *const names[] = {"batch", "seq"};
    int64_t sizes[][2] = {{1, 1}, {2, 9}, {3, 128}};
    for (int i = 0; i < 3; i++)
        run_at("tests/data/dims/gpt2_block_batch_seq.json", names, sizes[i], 2, "y");
}
END_TEST

START_TEST(cnn_at_three_batch_sizes) {
    static const char *const names[] = {"batch"};
    int64_t sizes[] = {1, 3, 4};
    for (int i = 0; i < 3; i++) {
        run_at("tests/data/dims/cnn_batch.json", names, &sizes[i], 1, "logits");
        run_at("tests/data/dims/cnn_batch.json", names, &sizes[i], 1, "stem_out");
    }
}
END_TEST

/* Size-generic kernels on the emulated device: one compilation (the
 * kernels take the dims at launch), three sizes, each against the
 * interpreter on the graph with integer shapes. */
START_TEST(blocks_on_emu_at_three_sizes_compile_once) {
    if (!test_have_cxx()) return;
    static const char *const seq[] = {"seq"}, *const bs[] = {"batch", "seq"}, *const batch[] = {"batch"};
    int64_t g_sizes[] = {1, 9, 33}, l_sizes[] = {1, 5, 17}, c_sizes[] = {1, 2, 3};
    int64_t gb_sizes[][2] = {{1, 1}, {2, 9}, {3, 5}};
    for (int i = 0; i < EMU_SIZES; i++) {
        run_on("tests/data/dims/gpt2_block_seq.json", seq, &g_sizes[i], 1, "y", "emu", i > 0);
        run_on("tests/data/dims/gpt2_block_batch_seq.json", bs, gb_sizes[i], 2, "y", "emu", i > 0);
        run_on("tests/data/dims/llama_block_seq.json", seq, &l_sizes[i], 1, "y", "emu", i > 0);
        run_on("tests/data/dims/cnn_batch.json", batch, &c_sizes[i], 1, "logits", "emu", i > 0);
    }
}
END_TEST

/* The argmax of the last row of logits .npy file `path` ([1, T, V]). */
static int64_t last_argmax(const char *path) {
    mcir_diag d = mcir_diag_stderr();
    mcir_npy n;
    ck_assert(mcir_npy_read(path, &n, &d));
    ck_assert_int_eq(n.rank, 3);
    int64_t t = n.shape[1], v = n.shape[2], best = 0;
    const float *row = (const float *)n.data + (t - 1) * v;
    for (int64_t i = 1; i < v; i++)
        if (row[i] > row[best]) best = i;
    for (int64_t i = 0; i < v; i++) ck_assert(isfinite(row[i]));
    mcir_npy_free(&n);
    return best;
}

static void write_i64(const char *path, int64_t value) {
    mcir_diag d = mcir_diag_stderr();
    int64_t shape[2] = {1, 1};
    ck_assert(mcir_npy_write(path, MCIR_DTYPE_I64, 2, shape, &value, &d));
}

/* Greedy generation on the emulated device (tests/data/dims/generate,
 * gen_decode.py): the prompt through the prefill graph (seq = 5), then 7
 * decode steps of one compiled graph whose caches grow by a token a step
 * (past = 5 .. 11, each step's present caches the next step's inputs);
 * every token as PyTorch's greedy decoding of the whole sequence gives it,
 * and no step after the first compiles anything. */
START_TEST(greedy_generation_matches_pytorch) {
    if (!test_have_cxx()) return;
    char dir[256], out[320], prev[320], args[6][400], path[400];
    ck_assert(test_tempdir("gen", dir, sizeof dir));
    mcir_diag d = mcir_diag_stderr();
    mcir_npy want;
    ck_assert(mcir_npy_read(cli_src("tests/data/dims/generate/tokens.npy"), &want, &d));
    const int64_t *tokens = want.data;
    int n_tokens = (int)want.shape[0];
    ck_assert_int_ge(n_tokens, 8);
    snprintf(out, sizeof out, "%s/step0", dir);
    snprintf(args[0], sizeof args[0], "input_ids=%s", cli_src("tests/data/dims/generate/prompt.npy"));
    cli_result r = RUN("--run", "--device", "emu", "--input", args[0], "-o", out,
                       cli_src("tests/data/dims/generate/prefill.json"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "at seq=5\n"));
    cli_result_free(&r);
    snprintf(path, sizeof path, "%s/logits.npy", out);
    int64_t tok = last_argmax(path);
    ck_assert_int_eq(tok, tokens[0]);
    static const char *const kv[4] = {"k", "v", "k", "v"};
    for (int step = 1; step < n_tokens; step++) {
        snprintf(prev, sizeof prev, "%s", out);
        snprintf(out, sizeof out, "%s/step%d", dir, step);
        char ids[360], pos[360];
        snprintf(ids, sizeof ids, "%s/ids%d.npy", dir, step);
        snprintf(pos, sizeof pos, "%s/pos%d.npy", dir, step);
        write_i64(ids, tok);
        write_i64(pos, 4 + step);   /* the prompt's 5 tokens, then one a step */
        snprintf(args[0], sizeof args[0], "input_ids=%s", ids);
        snprintf(args[1], sizeof args[1], "position_ids=%s", pos);
        for (int c = 0; c < 4; c++)   /* the caches the previous step returned */
            snprintf(args[2 + c], sizeof args[2 + c], "past_%s%d=%s/h%d.attn.%s%s.npy", kv[c], c / 2, prev,
                     c / 2, kv[c], step == 1 ? ".to_heads.y" : "_all.y");
        r = RUN("--run", "--device", "emu", "--input", args[0], "--input", args[1], "--input", args[2],
                "--input", args[3], "--input", args[4], "--input", args[5], "-o", out,
                cli_src("tests/data/dims/generate/decode.json"));
        ck_assert_msg(r.status == 0, "step %d: %s", step, r.err);
        char at[32];
        snprintf(at, sizeof at, "at past=%d\n", 4 + step);
        ck_assert_msg(strstr(r.out, at) != NULL, "%s", r.out);
        if (step > 1) ck_assert_msg(strstr(r.out, "\n  emu      0 compiles") != NULL, "%s", r.out);
        cli_result_free(&r);
        snprintf(path, sizeof path, "%s/logits.npy", out);
        tok = last_argmax(path);
        ck_assert_msg(tok == tokens[step], "step %d: token %lld, PyTorch's %lld", step, (long long)tok,
                      (long long)tokens[step]);
    }
    mcir_npy_free(&want);
    test_remove_dir(dir);
}
END_TEST

/* The sm_90a templates size-generic (planned tiles, extents from shared
 * memory) on the emulated device: causal attention, split-KV decoding
 * (its splits at launch from the length), GQA packing, and the GEMM with
 * a broadcast prologue and an epilogue, each at three sizes against the
 * original graph, compiled once. */
START_TEST(sm90a_templates_on_emu_at_three_sizes) {
    if (!test_have_cxx()) return;
    static const struct {
        const char *graph, *dim, *path;
        int sizes[3];
    } cases[] = {
        {"attention_f16_seq.json", "seq", "sm_90a path", {1, 77, 200}},
        {"decode_f16_past.json", "past", "split-KV", {1, 700, 3001}},
        {"gqa_f16_seq.json", "seq", "GQA/MQA", {1, 49, 96}},
        {"matmul_f16_seq.json", "seq", "sm_90a GEMM", {1, 77, 300}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char rel[128], dim[64];
        snprintf(rel, sizeof rel, "tests/data/dims/%s", cases[c].graph);
        cli_result r = RUN("--emit", "plan", cli_src(rel));
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_msg(strstr(r.out, cases[c].path) != NULL, "%s: no '%s' in the plan", rel, cases[c].path);
        ck_assert_ptr_null(strstr(r.out, "\"size_generic\": false"));
        cli_result_free(&r);
        for (int i = 0; i < EMU_SIZES; i++) {
            snprintf(dim, sizeof dim, "%s=%d", cases[c].dim, cases[c].sizes[i]);
            r = RUN("--run", "--device", "emu", "--verify", "--dim", dim, cli_src(rel));
            ck_assert_msg(r.status == 0, "%s at %s: %s", rel, dim, r.err);
            ck_assert_ptr_nonnull(strstr(r.out, "(emu vs the original graph)"));
            ck_assert_msg(strstr(r.out, " ok\n") && !strstr(r.out, "FAIL"), "%s at %s:\n%s", rel, dim, r.out);
            if (i > 0) ck_assert_msg(strstr(r.out, "\n  emu      0 compiles") != NULL, "%s", r.out);
            cli_result_free(&r);
        }
    }
}
END_TEST

/* Norms and softmax whose reduced width is a dimension: the choices that
 * depend on the width are the plan's for the whole range (the vector width
 * from the width's polynomial: 8*seq takes 16-byte f16 loads, seq scalar
 * ones; a warp or a block per row, where the block keeps the row — its
 * registers, the shared-memory cache or nowhere (read twice) — and the
 * registers from the largest width), the width is taken at launch, so one
 * source serves
 * every size. Each graph compiled once and run on the emulator at three
 * sizes (1, an odd one, and a large one) against the original graph; the
 * fused epilogues (gelu, a residual mul) and the separate residual add
 * included. */
START_TEST(norms_over_a_symbolic_width_on_emu_at_three_sizes) {
    if (!test_have_cxx()) return;
    static const struct {
        const char *graph, *layout, *nw, *nv;
        int sizes[3];
        const char *arch;
    } cases[] = {
        {"softmax_f16_seq.json", "one warp per row", "#define NORM_W (mc_d0)\n", "#define NORM_V 1\n",
         {1, 37, 128}, "sm_90"},
        {"softmax_f32_seq.json", "the row kept in registers (24 vectors a thread", "#define NORM_W (mc_d0)\n",
         "#define NORM_V 1\n", {1, 77, 2999}, "sm_90"},
        {"layernorm_f16_seq.json", "vector width 8", "#define NORM_W (8LL*mc_d0)\n", "#define NORM_V 8\n",
         {1, 37, 128}, "sm_90"},
        {"rmsnorm_bf16_seq.json", "one block of 640 threads per row, vector width 1, 32 elements per thread",
         "#define NORM_W (mc_d0)\n", "#define NORM_V 1\n", {1, 333, 19999}, "sm_90"},
        /* the layouts past the registers: the shared-memory cache (X's
         * dtype), a cluster per row over the opt-in limit on sm_90 (at
         * seq = 1 the second block's slice is empty), the row read twice
         * there on sm_80 */
        {"layernorm_f16_wide_seq.json", "cached in 128 KiB of dynamic shared memory in f16",
         "#define NORM_W (8LL*mc_d0)\n", "#define NORM_V 8\n", {1, 37, 8192}, "sm_90"},
        {"layernorm_f32_wider_seq.json", "split over a cluster of 2 blocks", "#define NORM_W (8LL*mc_d0)\n",
         "#define NORM_V 4\n", {1, 333, 9000}, "sm_90"},
        {"layernorm_f32_wider_seq.json", "read twice", "#define NORM_W (8LL*mc_d0)\n", "#define NORM_V 4\n",
         {1, 333, 9000}, "sm_80"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char rel[128], dim[64];
        const char *arch = cases[c].arch;
        snprintf(rel, sizeof rel, "tests/data/dims/%s", cases[c].graph);
        cli_result r = RUN("--arch", arch, "--emit", "plan", cli_src(rel));
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_msg(strstr(r.out, cases[c].layout) != NULL, "%s: no '%s' in the plan", rel, cases[c].layout);
        ck_assert_ptr_nonnull(strstr(r.out, "\"size_generic\": true"));
        ck_assert_ptr_null(strstr(r.out, "\"size_generic\": false"));
        cli_result_free(&r);
        r = RUN("--arch", arch, "--emit", "cuda", cli_src(rel));
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_msg(strstr(r.out, cases[c].nw) && strstr(r.out, cases[c].nv), "%s: no '%s' / '%s'", rel,
                      cases[c].nw, cases[c].nv);
        cli_result_free(&r);
        for (int i = 0; i < EMU_SIZES; i++) {
            snprintf(dim, sizeof dim, "seq=%d", cases[c].sizes[i]);
            r = RUN("--arch", arch, "--run", "--device", "emu", "--verify", "--dim", dim, cli_src(rel));
            ck_assert_msg(r.status == 0, "%s at %s: %s", rel, dim, r.err);
            ck_assert_ptr_nonnull(strstr(r.out, "(emu vs the original graph)"));
            ck_assert_msg(strstr(r.out, " ok\n") && !strstr(r.out, "FAIL"), "%s at %s:\n%s", rel, dim, r.out);
            char at[80];
            snprintf(at, sizeof at, " at %s\n", dim);
            ck_assert_msg(strstr(r.out, at) != NULL, "%s", r.out);
            if (i > 0) ck_assert_msg(strstr(r.out, "\n  emu      0 compiles") != NULL, "%s", r.out);
            cli_result_free(&r);
        }
    }
}
END_TEST

/* examples/gpt2_decode: one decode step for caches of 1..1023 tokens,
 * compiled once, on the emulated device at three lengths (the split-KV
 * attention's splits taken at launch) against the original graph. */
START_TEST(gpt2_decode_example_at_three_cache_lengths) {
    if (!test_have_cxx()) return;
    static const int lengths[] = {1, 300, 1023};
    char ids[400], dim[32];
    snprintf(ids, sizeof ids, "input_ids=%s", cli_src("examples/gpt2_decode/inputs/input_ids.npy"));
    for (int i = 0; i < EMU_SIZES; i++) {
        snprintf(dim, sizeof dim, "past=%d", lengths[i]);
        cli_result r = RUN("--run", "--device", "emu", "--verify", "--dim", dim, "--input", ids,
                           cli_src("examples/gpt2_decode/graph.json"));
        ck_assert_msg(r.status == 0, "%s: %s", dim, r.err);
        ck_assert_ptr_nonnull(strstr(r.out, "; 22 of 22 kernels size-generic\n"));
        ck_assert_ptr_nonnull(strstr(r.out, "verify   logits (emu vs the original graph)"));
        ck_assert_msg(!strstr(r.out, "FAIL"), "%s", r.out);
        char at[48];
        snprintf(at, sizeof at, " at past=%d\n", lengths[i]);
        ck_assert_msg(strstr(r.out, at) != NULL, "%s", r.out);
        if (i > 0) ck_assert_msg(strstr(r.out, "\n  emu      0 compiles") != NULL, "%s", r.out);
        cli_result_free(&r);
    }
}
END_TEST

/* ------------------------------------------------------- mcirc's --dim */

START_TEST(dim_option_usage_errors) {
    const char *g = cli_src("tests/data/dims/gpt2_block_seq.json");
    static const char *const bad[] = {"seq", "seq=", "=4", "seq=0", "seq=x", "seq=5..2",
                                      "seq=1..", "seq=..4", "seq=-3", "seq=1...4"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cli_result r = RUN("--dim", bad[i], g);
        ck_assert_msg(r.status == 2, "--dim %s: exit %d", bad[i], r.status);
        ck_assert_ptr_nonnull(strstr(r.err, "is not NAME=N or NAME=MIN..MAX"));
        cli_result_free(&r);
    }
    struct {
        const char *a, *b, *what;
    } c[] = {
        {"--dim=len=4", NULL, "--dim len: the graph has no dimension 'len'"},
        {"--dim=seq=200", NULL, "--dim seq=200: dimension 'seq' ranges over [1, 128]"},
        {"--dim=seq=4", "--dim=seq=5", "--dim: dimension 'seq' given twice"},
        {"--dim=seq=1..64", "--dim=seq=100", "--dim seq=100: dimension 'seq' ranges over [1, 64]"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        cli_result r = c[i].b ? RUN(c[i].a, c[i].b, "--run", "--device", "cpu", g)
                              : RUN(c[i].a, "--run", "--device", "cpu", g);
        ck_assert_msg(r.status == 2, "%s: exit %d", c[i].a, r.status);
        ck_assert_msg(strstr(r.err, c[i].what) != NULL, "%s", r.err);
        cli_result_free(&r);
    }
    /* a graph without dims */
    cli_result r = RUN("--dim", "seq=4", cli_src("examples/mlp_tiny/graph.json"));
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "the graph has no dimension 'seq' (it declares no 'dims')"));
    cli_result_free(&r);
    /* a range that breaks a rule: the slice of 'pos' needs seq <= 16 */
    r = RUN("--dim", "seq=1..32", cli_src("tests/data/dims/two_inputs.json"));
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "node 'p' (slice): slice 0:seq of axis 0 (extent 16)"));
    ck_assert_ptr_nonnull(strstr(r.err, "dimension 'seq' (1..32)"));
    cli_result_free(&r);
}
END_TEST

#ifdef MCIR_HAVE_ONNX
/* An ONNX model's dim_param takes one size by name, or a range it is kept
 * symbolic over (onnx/symbolic.c; tests/test_onnx_dims.c runs models) */
START_TEST(onnx_dim_param_takes_one_size_or_a_range) {
    const char *m = cli_src("tests/data/onnx/errors/dynamic_input.onnx");   /* x [batch, 4] */
    cli_result r = RUN("--run", "--device", "cpu", "--dim", "batch=3", m);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "output   y f32 [3, 4]"));
    cli_result_free(&r);
    r = RUN("--run", "--device", "cpu", "--dim", "batch=2..2", m);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "output   y f32 [2, 4]"));
    cli_result_free(&r);
    r = RUN("--dim", "batch=1..4", m);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "dims     batch in [1, 4]"));
    cli_result_free(&r);
    r = RUN("--run", "--device", "cpu", "--dim", "batch=3", "--dim", "batch=1..4", m);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "output   y f32 [3, 4]"));
    cli_result_free(&r);
    r = RUN("--run", "--device", "cpu", "--dim", "batch=1..4", "--dim", "batch=5", m);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--dim batch=5: dimension 'batch' ranges over [1, 4]"));
    cli_result_free(&r);
    r = RUN("--dim", "batch=2", "--dim", "batch=3..3", m);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--dim batch: given as 2 and as 3"));
    cli_result_free(&r);
}
END_TEST
#endif

static void write_input(const char *path, int64_t d0, int64_t d1) {
    float v[64 * 8];
    for (int i = 0; i < 64 * 8; i++) v[i] = input_value(i);
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_npy_write(path, MCIR_DTYPE_F32, 3, (int64_t[]){d0, d1, 8}, v, &d));
}

START_TEST(run_sizes_from_inputs) {
    char dir[256], a[300], b[300], c[300], ia[320], ib[320], ic[320];
    ck_assert(test_tempdir("dims-in", dir, sizeof dir));
    snprintf(a, sizeof a, "%s/a.npy", dir);
    snprintf(b, sizeof b, "%s/b.npy", dir);
    snprintf(c, sizeof c, "%s/c.npy", dir);
    write_input(a, 2, 5);
    write_input(b, 2, 6);
    write_input(c, 2, 30);
    snprintf(ia, sizeof ia, "x=%s", a);
    snprintf(ib, sizeof ib, "z=%s", b);
    snprintf(ic, sizeof ic, "x=%s", c);
    const char *g = cli_src("tests/data/dims/two_inputs.json");
    /* the sizes come from the files: seq = 5 */
    cli_result r = RUN("--run", "--device", "cpu", "--verify", "--input", ia, g);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "at batch=2, seq=5"));
    ck_assert_ptr_nonnull(strstr(r.out, "output   y f32 [2, 5, 8]"));
    cli_result_free(&r);
    /* inputs that disagree on seq */
    char ib5[320];
    snprintf(ib5, sizeof ib5, "z=%s", b);
    r = RUN("--run", "--device", "cpu", "--input", ia, "--input", ib5, g);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "inputs disagree on dimension 'seq': input 'z' has 6 in dim 1, "
                                "input 'x'") != NULL, "%s", r.err);
    cli_result_free(&r);
    /* a size out of range */
    r = RUN("--run", "--device", "cpu", "--input", ic, g);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "input 'x' has 30 in dim 1, which is dimension 'seq': outside its "
                                "range [1, 16]") != NULL, "%s", r.err);
    cli_result_free(&r);
    /* --dim N against a file */
    r = RUN("--run", "--device", "cpu", "--dim", "seq=4", "--input", ia, g);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "input 'x' has 5 in dim 1, which is dimension 'seq', but --dim seq=4"));
    cli_result_free(&r);
    /* seeded inputs at --dim sizes, the rest at their max */
    r = RUN("--run", "--device", "cpu", "--dim", "seq=3", g);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "at batch=4, seq=3"));
    cli_result_free(&r);
    test_remove_dir(dir);
}
END_TEST

START_TEST(compilation_of_a_symbolic_graph) {
    const char *g = cli_src("tests/data/dims/two_inputs.json");
    /* memory planned at the bound, plan specialised there, both say so */
    cli_result r = RUN("--emit", "memory", g);
    ck_assert_msg(r.status == 0, "%s", r.err);
    json_error_t e;
    json_t *m = json_loads(r.out, 0, &e);
    ck_assert_ptr_nonnull(m);
    json_t *seq = json_object_get(json_object_get(m, "dims"), "seq");
    ck_assert_int_eq(json_integer_value(json_object_get(seq, "planned_at")), 16);
    ck_assert_int_eq(json_integer_value(json_object_get(seq, "min")), 1);
    ck_assert(json_is_true(json_object_get(m, "bound_for_every_size")));
    json_decref(m);
    cli_result_free(&r);
    /* 16-seq elements: largest at the smallest size, so the arena planned
     * at the largest is not a bound, and memory.json says so */
    r = RUN("--no-rewrite", "--emit", "memory", cli_src("tests/data/dims/shrinking.json"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "\"bound_for_every_size\": false"));
    cli_result_free(&r);
    r = RUN("--emit", "plan", "--dim", "seq=2..8", g);
    ck_assert_msg(r.status == 0, "%s", r.err);
    m = json_loads(r.out, 0, &e);
    seq = json_object_get(json_object_get(m, "dims"), "seq");
    ck_assert_int_eq(json_integer_value(json_object_get(seq, "specialised_at")), 8);
    ck_assert_int_eq(json_integer_value(json_object_get(seq, "min")), 2);
    json_decref(m);
    cli_result_free(&r);
    /* the summary says what the compilation is */
    r = RUN(g);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "dims     batch in [1, 4], seq in [1, 16]; shapes checked "
                                        "for every size, plan and arena at the largest; 2 of 2 kernels "
                                        "size-generic\n"));
    ck_assert_ptr_nonnull(strstr(r.out, " (at the largest sizes)\n"));
    ck_assert_ptr_null(strstr(r.out, "traffic  at "));
    cli_result_free(&r);
    /* the cost model at a named size: the same kernels, less traffic */
    r = RUN("--dim", "seq=4", "--dim", "batch=1", "--emit", "plan", g);
    ck_assert_int_eq(r.status, 0);
    cli_result_free(&r);
    r = RUN("--dim", "seq=4", "--dim", "batch=1", g);
    ck_assert_int_eq(r.status, 0);
    const char *at = strstr(r.out, "traffic  at batch=1, seq=4: 2 launches, ");
    ck_assert_msg(at != NULL, "%s", r.out);
    const char *top = strstr(r.out, "traffic  2 launches, ");
    ck_assert_ptr_nonnull(top);
    /* the HBM figures differ: 2 x [4, 16, 8] f32 written at the largest,
     * 2 x [1, 4, 8] here */
    char hbm_at[32] = "", hbm_top[32] = "";
    sscanf(at + strlen("traffic  at batch=1, seq=4: 2 launches, "), "%31[^H]", hbm_at);
    sscanf(top + strlen("traffic  2 launches, "), "%31[^H]", hbm_top);
    ck_assert_msg(hbm_at[0] && strcmp(hbm_at, hbm_top) != 0, "'%s' vs '%s'", hbm_at, hbm_top);
    cli_result_free(&r);
    /* a kernel whose code differs at another size (the attention's head
     * dim sizes its tiles and registers: ATT_D is an integer): no device
     * run of a range, the kernel and the first line that differs named */
    const char *ad = cli_src("tests/data/dims/attention_f32_head_dim.json");
    r = RUN(ad);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "; 0 of 1 kernels size-generic (not: attd_a)\n"));
    cli_result_free(&r);
    r = RUN("--run", "--device", "gpu", "--dim", "d=8..40", ad);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--device gpu: dimension 'd' ranges over [8, 40], and kernel "
                                        "attd_a is not size-generic yet (its code at d=8 differs from the "
                                        "code at the largest sizes (line "));
    ck_assert_ptr_nonnull(strstr(r.err, "reads '#define ATT_D 8'"));
    ck_assert_ptr_nonnull(strstr(r.err, "or fix the size with --dim d=N..N"));
    cli_result_free(&r);
    r = RUN("--run", "--device", "emu", ad);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--device emu: dimension 'd' ranges over [8, 64], and kernel attd_a"));
    cli_result_free(&r);
    r = RUN("--emit", "plan", ad);
    ck_assert_ptr_nonnull(strstr(r.out, "\"size_generic\": false"));
    ck_assert_ptr_nonnull(strstr(r.out, "\"not_size_generic\": \"its code at d=8 differs"));
    cli_result_free(&r);
    /* the f16 softmax over seq, refused here until its vector width was
     * decided for the whole range, is size-generic */
    r = RUN(cli_src("tests/data/dims/softmax_f16_seq.json"));
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "; 1 of 1 kernels size-generic\n"));
    cli_result_free(&r);
    const char *a16 = cli_src("tests/data/dims/attention_f16_seq.json");
    if (test_have_cxx()) {   /* the sm_80 template takes the dims at launch */
        r = RUN("--run", "--device", "emu", "--arch", "sm_80", "--verify", "--dim", "seq=77", a16);
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_ptr_nonnull(strstr(r.out, "; 1 of 1 kernels size-generic\n"));
        ck_assert_ptr_nonnull(strstr(r.out, "output   o f16 [1, 4, 77, 64]"));
        ck_assert_ptr_nonnull(strstr(r.out, "verify   o (emu vs the original graph)"));
        ck_assert_ptr_null(strstr(r.out, "FAIL"));
        cli_result_free(&r);
        /* a slice whose start is a dimension (positions sliced by past) */
        r = RUN("--run", "--device", "emu", "--verify", "--dim", "past=7", "--dim", "batch=2",
                cli_src("tests/data/good/dims_kv_cache.json"));
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_ptr_nonnull(strstr(r.out, "; 6 of 6 kernels size-generic\n"));
        ck_assert_ptr_nonnull(strstr(r.out, "verify   o (emu vs the original graph)"));
        ck_assert_ptr_null(strstr(r.out, "FAIL"));
        cli_result_free(&r);
        /* a range on the emulated device: the run's sizes from --dim */
        r = RUN("--run", "--device", "emu", "--verify", "--dim", "seq=5", "--dim", "batch=2", g);
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_ptr_nonnull(strstr(r.out, "output   w f32 [2, 5, 8]"));
        ck_assert_ptr_nonnull(strstr(r.out, "verify   w (emu vs the original graph)"));
        ck_assert_ptr_null(strstr(r.out, "FAIL"));
        cli_result_free(&r);
    }
    /* a range of one size compiles like integer shapes and runs anywhere:
     * the emulated device runs the kernels at batch=2, seq=5 */
    if (test_have_cxx()) {
        r = RUN("--run", "--device", "emu", "--verify", "--dim", "seq=5..5", "--dim", "batch=2..2", g);
        ck_assert_msg(r.status == 0, "%s", r.err);
        ck_assert_ptr_nonnull(strstr(r.out, "output   w f32 [2, 5, 8]"));
        ck_assert_ptr_nonnull(strstr(r.out, "verify   w (emu vs the original graph)"));
        ck_assert_ptr_null(strstr(r.out, "FAIL"));
        cli_result_free(&r);
    }
    /* a rewrite that holds only at the largest size is refused, naming it */
    r = RUN("--catalog", cli_src("tests/data/dims/fixed_slice.yaml"), "--emit", "trace", g);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "\"rule\":\"slice_to_fixed_end\""));
    ck_assert_ptr_nonnull(strstr(r.out, "the fused slice would produce extent 16 in dim 0 but 'ps' "
                                        "has seq: they agree only for some values of dimension "
                                        "'seq' (1..16)"));
    ck_assert_ptr_nonnull(strstr(r.out, "\"decision\":\"rejected\""));
    cli_result_free(&r);
    /* a legality check on sizes: for every size, or it fails naming the dimension */
    r = RUN("--catalog", cli_src("tests/data/dims/divisible.yaml"), "--trace", "--emit", "trace",
            cli_src("tests/data/dims/divisible.json"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "FAIL shape_divisible        'x' (X) dim 1 = seq is "
                                        "divisible by 8 only for some values of dimension 'seq' (1..16)"));
    ck_assert_ptr_nonnull(strstr(r.err, "ok   shape_divisible        'xf' (X) dim 0 = 16*seq is "
                                        "divisible by 8 for every value of dimension 'seq' (1..16)"));
    cli_result_free(&r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("dims");
    TCase *tc = tcase_create("dims");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, extent_algebra);
    tcase_add_test(tc, dims_format_errors);
    tcase_add_test(tc, names_in_shapes_and_attrs_errors);
    tcase_add_test(tc, rules_must_hold_for_every_size);
    tcase_add_test(tc, symbolic_shapes_inferred);
    tcase_add_test(tc, dim_option_usage_errors);
    tcase_add_test(tc, run_sizes_from_inputs);
    tcase_add_test(tc, compilation_of_a_symbolic_graph);
#ifdef MCIR_HAVE_ONNX
    tcase_add_test(tc, onnx_dim_param_takes_one_size_or_a_range);
#endif
    tcase_add_test(tc, computed_causal_mask_becomes_causal);
    tcase_add_test(tc, gpt2_block_at_three_seq_lengths);
    tcase_add_test(tc, gpt2_block_at_three_batch_and_seq_sizes);
    tcase_add_test(tc, cnn_at_three_batch_sizes);
    tcase_add_test(tc, blocks_on_emu_at_three_sizes_compile_once);
    tcase_add_test(tc, greedy_generation_matches_pytorch);
    tcase_add_test(tc, sm90a_templates_on_emu_at_three_sizes);
    tcase_add_test(tc, norms_over_a_symbolic_width_on_emu_at_three_sizes);
    tcase_add_test(tc, gpt2_decode_example_at_three_cache_lengths);
    suite_add_tcase(s, tc);
    return test_main(s);
}
