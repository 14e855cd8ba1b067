/*
 * test_infer.c — shape and dtype inference: the shapes each op produces,
 * including NumPy corners (rank-1 matmul, broadcasting, negative axes,
 * slice clamping), and one test per rejection rule checking that the
 * message names the node, the op, the tensors and their shapes.
 */
#include "interp_test.h"
#include "test_util.h"

static mcir_graph *G;

static void setup(void) { G = mcir_graph_new("t"); }
static void teardown(void) { mcir_graph_free(G); }

static mcir_node *node1(mcir_op op, const char *name, mcir_tensor *x) {
    return tt_node(G, op, name, 1, &x, 1);
}

static mcir_node *node2(mcir_op op, const char *name, mcir_tensor *a, mcir_tensor *b) {
    return tt_node(G, op, name, 2, (mcir_tensor *[]){a, b}, 1);
}

/* ------------------------------------------------------------- helpers */

START_TEST(broadcast_and_axis_helpers) {
    int64_t out[MCIR_MAX_RANK];
    int r;
    ck_assert(mcir_broadcast_shape(2, (int64_t[]){7, 1}, 3, (int64_t[]){2, 1, 5}, &r, out));
    ck_assert_int_eq(r, 3);
    ck_assert(out[0] == 2 && out[1] == 7 && out[2] == 5);
    ck_assert(mcir_broadcast_shape(0, NULL, 1, (int64_t[]){4}, &r, out));
    ck_assert(r == 1 && out[0] == 4);
    ck_assert(mcir_broadcast_shape(0, NULL, 0, NULL, &r, out));
    ck_assert_int_eq(r, 0);
    ck_assert(!mcir_broadcast_shape(1, (int64_t[]){3}, 1, (int64_t[]){4}, &r, out));
    int a;
    ck_assert(mcir_norm_axis(-1, 3, &a) && a == 2);
    ck_assert(mcir_norm_axis(-3, 3, &a) && a == 0);
    ck_assert(!mcir_norm_axis(3, 3, &a));
    ck_assert(!mcir_norm_axis(-4, 3, &a));
    ck_assert(!mcir_norm_axis(0, 0, &a));
}
END_TEST

START_TEST(slice_range_matches_numpy) {
    /* (dim, start, end, step) -> (first, len), from Python's slice.indices */
    struct {
        int64_t dim, start, end, step, first, len;
    } c[] = {
        {10, 2, 5, 1, 2, 3},      {10, -3, -1, 1, 7, 2},     {10, 5, 2, 1, 5, 0},
        {10, 9, -11, -1, 9, 10},  {10, 5, 1, -2, 5, 2},      {10, -100, 100, 4, 0, 3},
        {10, 100, -100, -4, 9, 3}, {1, 0, 1, 1, 0, 1},        {10, INT64_MIN, INT64_MAX, 1, 0, 10},
        {10, INT64_MAX, INT64_MIN, INT64_MIN, 9, 1},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        int64_t first, len;
        mcir_slice_range(c[i].dim, c[i].start, c[i].end, c[i].step, &first, &len);
        ck_assert_msg(len == c[i].len && (len == 0 || first == c[i].first),
                      "case %zu: first %lld len %lld", i, (long long)first, (long long)len);
    }
}
END_TEST

/* -------------------------------------------------------------- matmul */

START_TEST(matmul_shapes) {
    struct {
        int ra;
        int64_t as[4];
        int rb;
        int64_t bs[4];
        bool ta, tb;
        int ry;
        int64_t ys[4];
    } c[] = {
        {2, {3, 4}, 2, {4, 5}, false, false, 2, {3, 5}},
        {4, {2, 1, 3, 4}, 3, {7, 4, 5}, false, false, 4, {2, 7, 3, 5}},
        {2, {4, 3}, 2, {5, 4}, true, true, 2, {3, 5}},
        {1, {4}, 2, {4, 5}, false, false, 1, {5}},
        {3, {2, 3, 4}, 1, {4}, false, false, 2, {2, 3}},
        {1, {4}, 1, {4}, true, true, 0, {0}},
        {1, {4}, 3, {6, 5, 4}, false, true, 2, {6, 5}},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char a[8], b[8], nm[8];
        snprintf(a, 8, "a%zu", i);
        snprintf(b, 8, "b%zu", i);
        snprintf(nm, 8, "m%zu", i);
        mcir_node *n = node2(MCIR_OP_MATMUL, nm, tt_in(G, a, c[i].ra, c[i].as),
                             tt_in(G, b, c[i].rb, c[i].bs));
        mcir_node_set_bool(G, n, "transpose_a", c[i].ta);
        mcir_node_set_bool(G, n, "transpose_b", c[i].tb);
        tt_infer_ok(G, n);
        tt_shape_is(n->outputs[0], c[i].ry, c[i].ys);
        ck_assert_int_eq(n->outputs[0]->dtype, MCIR_DTYPE_F32);
    }
}
END_TEST

START_TEST(matmul_errors) {
    mcir_tensor *q = tt_in(G, "q", SHAPE(1, 12, 128, 64)), *k = tt_in(G, "k", SHAPE(1, 12, 128, 64));
    TT_FAILS(G, node2(MCIR_OP_MATMUL, "qk", q, k),
             "node 'qk' (matmul): inner dimensions differ: A 'q' [1, 12, 128, 64] has 64 "
             "columns, B 'k' [1, 12, 128, 64] has 128 rows");
    mcir_node *t = node2(MCIR_OP_MATMUL, "qkt", q, k);
    mcir_node_set_bool(G, t, "transpose_b", true);
    tt_infer_ok(G, t);
    tt_shape_is(t->outputs[0], SHAPE(1, 12, 128, 128));
    mcir_tensor *x = tt_in(G, "x", SHAPE(2, 3, 4)), *y = tt_in(G, "y", SHAPE(5, 4, 2));
    TT_FAILS(G, node2(MCIR_OP_MATMUL, "bb", x, y), "node 'bb' (matmul)",
             "batch dimensions do not broadcast", "[2, 3, 4]", "[5, 4, 2]");
    mcir_tensor *s = tt_scalar(G, "s");
    TT_FAILS(G, node2(MCIR_OP_MATMUL, "sc", s, x), "rank >= 1");
    mcir_tensor *h = tt_tensor(G, "h", MCIR_TENSOR_INPUT, MCIR_DTYPE_F16, SHAPE(4, 2));
    TT_FAILS(G, node2(MCIR_OP_MATMUL, "dt", x, h), "node 'dt' (matmul)", "share one dtype",
             "'x' is f32", "'h' is f16");
    TT_FAILS(G, node1(MCIR_OP_MATMUL, "one", x), "takes 2 inputs, got 1");
    /* element count overflow */
    mcir_tensor *big1 = tt_in(G, "big1", SHAPE(INT64_C(1) << 40, 2));
    mcir_tensor *big2 = tt_in(G, "big2", SHAPE(2, INT64_C(1) << 40));
    TT_FAILS(G, node2(MCIR_OP_MATMUL, "ov", big1, big2), "too many elements");
}
END_TEST

/* -------------------------------------------------------- elementwise */

START_TEST(binary_and_unary_shapes) {
    mcir_tensor *a = tt_in(G, "a", SHAPE(7, 1, 5)), *b = tt_in(G, "b", SHAPE(3, 1));
    mcir_node *n = node2(MCIR_OP_ADD, "add", a, b);
    tt_infer_ok(G, n);
    tt_shape_is(n->outputs[0], SHAPE(7, 3, 5));
    mcir_node *s = node2(MCIR_OP_MUL, "mul", tt_scalar(G, "s"), a);
    tt_infer_ok(G, s);
    tt_shape_is(s->outputs[0], SHAPE(7, 1, 5));
    mcir_tensor *h = tt_tensor(G, "h", MCIR_TENSOR_INPUT, MCIR_DTYPE_BF16, SHAPE(2, 2));
    mcir_node *u = node1(MCIR_OP_GELU, "gelu", h);
    tt_infer_ok(G, u);
    tt_shape_is(u->outputs[0], SHAPE(2, 2));
    ck_assert_int_eq(u->outputs[0]->dtype, MCIR_DTYPE_BF16);
    mcir_node *bad = node2(MCIR_OP_SUB, "sub", a, tt_in(G, "c", SHAPE(4, 3)));
    TT_FAILS(G, bad, "node 'sub' (sub): cannot broadcast 'a' [7, 1, 5] with 'c' [4, 3]",
             "dimension 5 vs 3");
    mcir_node *g = node1(MCIR_OP_GELU, "gx", a);
    mcir_node_set_string(G, g, "approximate", "fast");
    TT_FAILS(G, g, "node 'gx' (gelu)", "approximate", "\"fast\"");
    TT_FAILS(G, node1(MCIR_OP_SCALE, "sc", a), "missing required attribute 'value'");
    mcir_node *sw = node1(MCIR_OP_SCALE, "sw", a);
    mcir_node_set_int(G, sw, "value", 2);
    TT_FAILS(G, sw, "attribute 'value' must be float, got int");
}
END_TEST

/* ------------------------------------------------------------- norms */

START_TEST(softmax_and_norm_rules) {
    mcir_tensor *x = tt_in(G, "x", SHAPE(2, 13, 5));
    mcir_node *s = node1(MCIR_OP_SOFTMAX, "sm", x);
    mcir_node_set_int(G, s, "axis", -3);
    tt_infer_ok(G, s);
    mcir_node *s2 = node1(MCIR_OP_SOFTMAX, "sm2", x);
    mcir_node_set_int(G, s2, "axis", 3);
    TT_FAILS(G, s2, "node 'sm2' (softmax): axis 3 is out of range for 'x' [2, 13, 5] (rank 3)");
    TT_FAILS(G, node1(MCIR_OP_SOFTMAX, "sms", tt_scalar(G, "sc")), "out of range");

    /* gamma broadcastable to the normalised dims [13, 5] */
    mcir_tensor *g1 = tt_in(G, "g1", SHAPE(13, 5)), *g2 = tt_in(G, "g2", SHAPE(13, 1)),
                *g3 = tt_in(G, "g3", SHAPE(5)), *g4 = tt_in(G, "g4", SHAPE(2, 13, 5)),
                *g5 = tt_in(G, "g5", SHAPE(13));
    mcir_tensor *gs[] = {g1, g2, g3};
    for (int i = 0; i < 3; i++) {
        char nm[8];
        snprintf(nm, 8, "ln%d", i);
        mcir_node *n = tt_node(G, MCIR_OP_LAYERNORM, nm, 3, (mcir_tensor *[]){x, gs[i], g3}, 1);
        mcir_node_set_int(G, n, "axis", -2);
        tt_infer_ok(G, n);
        tt_shape_is(n->outputs[0], SHAPE(2, 13, 5));
    }
    mcir_node *b1 = tt_node(G, MCIR_OP_LAYERNORM, "lnb", 2, (mcir_tensor *[]){x, g4}, 1);
    mcir_node_set_int(G, b1, "axis", 1);
    TT_FAILS(G, b1,
             "node 'lnb' (layernorm): gamma 'g4' [2, 13, 5] does not match the normalised "
             "dims [13, 5] of 'x' [2, 13, 5] (axis 1)");
    mcir_node *b2 = tt_node(G, MCIR_OP_RMSNORM, "rmsb", 2, (mcir_tensor *[]){x, g5}, 1);
    TT_FAILS(G, b2, "node 'rmsb' (rmsnorm): gamma 'g5' [13] does not match", "[5]");
    mcir_node *b3 = tt_node(G, MCIR_OP_LAYERNORM, "lnbeta", 3, (mcir_tensor *[]){x, g3, g5}, 1);
    TT_FAILS(G, b3, "beta 'g5' [13]");
    mcir_node *b4 = tt_node(G, MCIR_OP_LAYERNORM, "lneps", 2, (mcir_tensor *[]){x, g3}, 1);
    mcir_node_set_float(G, b4, "eps", -1);
    TT_FAILS(G, b4, "eps -1 must be >= 0");
    mcir_node *b5 = tt_node(G, MCIR_OP_LAYERNORM, "ln4", 4, (mcir_tensor *[]){x, g3, g3, g3}, 1);
    TT_FAILS(G, b5, "takes 2 to 3 inputs, got 4");
}
END_TEST

/* -------------------------------------------------------- reductions */

START_TEST(reduce_rules) {
    mcir_tensor *x = tt_in(G, "x", SHAPE(2, 3, 4));
    mcir_node *a = node1(MCIR_OP_REDUCE_SUM, "keep", x);
    mcir_node_set_ints(G, a, "axes", 2, (int64_t[]){-1, 0});
    tt_infer_ok(G, a);
    tt_shape_is(a->outputs[0], SHAPE(1, 3, 1));
    mcir_node *b = node1(MCIR_OP_REDUCE_MEAN, "drop", x);
    mcir_node_set_ints(G, b, "axes", 2, (int64_t[]){1, 2});
    mcir_node_set_bool(G, b, "keepdims", false);
    tt_infer_ok(G, b);
    tt_shape_is(b->outputs[0], SHAPE(2));
    mcir_node *dup = node1(MCIR_OP_REDUCE_MAX, "dup", x);
    mcir_node_set_ints(G, dup, "axes", 2, (int64_t[]){1, -2});
    TT_FAILS(G, dup, "node 'dup' (reduce_max): axis -2 repeats axis 1");
    mcir_node *oor = node1(MCIR_OP_REDUCE_SUM, "oor", x);
    mcir_node_set_ints(G, oor, "axes", 1, (int64_t[]){3});
    TT_FAILS(G, oor, "axis 3 is out of range for 'x' [2, 3, 4]");
    mcir_node *empty = node1(MCIR_OP_REDUCE_SUM, "empty", x);
    mcir_node_set_ints(G, empty, "axes", 0, NULL);
    TT_FAILS(G, empty, "axes must not be empty");
    TT_FAILS(G, node1(MCIR_OP_REDUCE_SUM, "noaxes", x), "missing required attribute 'axes'");
}
END_TEST

/* ------------------------------------------------------ data movement */

START_TEST(transpose_reshape_rules) {
    mcir_tensor *x = tt_in(G, "x", SHAPE(2, 3, 4));
    mcir_node *t = node1(MCIR_OP_TRANSPOSE, "t", x);
    mcir_node_set_ints(G, t, "perm", 3, (int64_t[]){2, 0, 1});
    tt_infer_ok(G, t);
    tt_shape_is(t->outputs[0], SHAPE(4, 2, 3));
    mcir_node *t2 = node1(MCIR_OP_TRANSPOSE, "t2", x);
    mcir_node_set_ints(G, t2, "perm", 3, (int64_t[]){0, 0, 1});
    TT_FAILS(G, t2, "node 't2' (transpose): perm [0, 0, 1] is not a permutation of 0..2");
    mcir_node *t3 = node1(MCIR_OP_TRANSPOSE, "t3", x);
    mcir_node_set_ints(G, t3, "perm", 2, (int64_t[]){1, 0});
    TT_FAILS(G, t3, "perm [1, 0] has 2 entries but 'x' [2, 3, 4] has rank 3");

    struct {
        int k;
        int64_t shape[4];
        const char *err;
        int ry;
        int64_t ys[4];
    } c[] = {
        {2, {-1, 4}, NULL, 2, {6, 4}},
        {4, {1, 24, 1, -1}, NULL, 4, {1, 24, 1, 1}},
        {1, {24}, NULL, 1, {24}},
        {2, {-1, -1}, "more than one -1", 0, {0}},
        {2, {0, 24}, "has a 0 dimension", 0, {0}},
        {2, {-2, 12}, "negative dimension -2", 0, {0}},
        {2, {5, 5}, "cannot reshape 'x' [2, 3, 4] (24 elements) to [5, 5] (25 elements)", 0, {0}},
        {2, {-1, 5}, "24 is not a multiple of 5", 0, {0}},
        {2, {INT64_C(1) << 62, 8}, "too many elements", 0, {0}},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char nm[8];
        snprintf(nm, 8, "r%zu", i);
        mcir_node *n = node1(MCIR_OP_RESHAPE, nm, x);
        mcir_node_set_ints(G, n, "shape", c[i].k, c[i].shape);
        if (c[i].err) {
            TT_FAILS(G, n, "(reshape)", c[i].err);
        } else {
            tt_infer_ok(G, n);
            tt_shape_is(n->outputs[0], c[i].ry, c[i].ys);
        }
    }
    /* a scalar reshapes to [1, 1] and back */
    mcir_node *s = node1(MCIR_OP_RESHAPE, "sc", tt_scalar(G, "s"));
    mcir_node_set_ints(G, s, "shape", 2, (int64_t[]){1, -1});
    tt_infer_ok(G, s);
    tt_shape_is(s->outputs[0], SHAPE(1, 1));
}
END_TEST

START_TEST(split_concat_slice_rules) {
    mcir_tensor *x = tt_in(G, "x", SHAPE(2, 6));
    mcir_node *s = tt_node(G, MCIR_OP_SPLIT, "sp", 1, &x, 2);
    mcir_node_set_int(G, s, "axis", -1);
    mcir_node_set_ints(G, s, "sizes", 2, (int64_t[]){4, 2});
    tt_infer_ok(G, s);
    tt_shape_is(s->outputs[0], SHAPE(2, 4));
    tt_shape_is(s->outputs[1], SHAPE(2, 2));
    mcir_node *s2 = tt_node(G, MCIR_OP_SPLIT, "sp2", 1, &x, 2);
    mcir_node_set_int(G, s2, "axis", 1);
    mcir_node_set_ints(G, s2, "sizes", 2, (int64_t[]){4, 3});
    TT_FAILS(G, s2, "node 'sp2' (split): sizes sum to 7 but axis 1 of 'x' [2, 6] is 6");
    mcir_node *s3 = tt_node(G, MCIR_OP_SPLIT, "sp3", 1, &x, 3);
    mcir_node_set_int(G, s3, "axis", 1);
    mcir_node_set_ints(G, s3, "sizes", 2, (int64_t[]){4, 2});
    TT_FAILS(G, s3, "sizes has 2 entries but the node has 3 outputs");
    mcir_node *s4 = tt_node(G, MCIR_OP_SPLIT, "sp4", 1, &x, 2);
    mcir_node_set_int(G, s4, "axis", 1);
    mcir_node_set_ints(G, s4, "sizes", 2, (int64_t[]){6, 0});
    TT_FAILS(G, s4, "sizes[1] = 0 must be >= 1");

    mcir_tensor *y = tt_in(G, "y", SHAPE(2, 3)), *z = tt_in(G, "z", SHAPE(3, 6));
    mcir_node *c = tt_node(G, MCIR_OP_CONCAT, "cc", 3, (mcir_tensor *[]){x, y, x}, 1);
    mcir_node_set_int(G, c, "axis", 1);
    tt_infer_ok(G, c);
    tt_shape_is(c->outputs[0], SHAPE(2, 15));
    mcir_node *c2 = tt_node(G, MCIR_OP_CONCAT, "cc2", 2, (mcir_tensor *[]){x, z}, 1);
    mcir_node_set_int(G, c2, "axis", 1);
    TT_FAILS(G, c2, "node 'cc2' (concat): 'z' [3, 6] differs from 'x' [2, 6] in dim 0");
    mcir_node *c3 = tt_node(G, MCIR_OP_CONCAT, "cc3", 2,
                            (mcir_tensor *[]){x, tt_in(G, "w", SHAPE(2, 6, 1))}, 1);
    mcir_node_set_int(G, c3, "axis", 0);
    TT_FAILS(G, c3, "'w' [2, 6, 1] has rank 3 but 'x' [2, 6] has rank 2");
    mcir_node *c4 = tt_node(G, MCIR_OP_CONCAT, "cc4", 1, (mcir_tensor *[]){x}, 1);
    mcir_node_set_int(G, c4, "axis", 0);
    tt_infer_ok(G, c4);
    TT_FAILS(G, tt_node(G, MCIR_OP_CONCAT, "cc5", 1, (mcir_tensor *[]){x}, 1),
             "missing required attribute 'axis'");

    mcir_node *l = node1(MCIR_OP_SLICE, "sl", x);
    mcir_node_set_int(G, l, "axis", 1);
    mcir_node_set_int(G, l, "start", -1);
    mcir_node_set_int(G, l, "end", -7);
    mcir_node_set_int(G, l, "step", -2);
    tt_infer_ok(G, l);
    tt_shape_is(l->outputs[0], SHAPE(2, 3)); /* 5, 3, 1 */
    mcir_node *l2 = node1(MCIR_OP_SLICE, "sl2", x);
    mcir_node_set_int(G, l2, "axis", 1);
    mcir_node_set_int(G, l2, "start", 4);
    mcir_node_set_int(G, l2, "end", 2);
    TT_FAILS(G, l2, "node 'sl2' (slice): slice 4:2:1 of axis 1 of 'x' [2, 6] is empty");
    mcir_node *l3 = node1(MCIR_OP_SLICE, "sl3", x);
    mcir_node_set_int(G, l3, "axis", 0);
    mcir_node_set_int(G, l3, "start", 0);
    mcir_node_set_int(G, l3, "end", 1);
    mcir_node_set_int(G, l3, "step", 0);
    TT_FAILS(G, l3, "step must not be 0");
    mcir_node *l4 = node1(MCIR_OP_SLICE, "sl4", x);
    mcir_node_set_int(G, l4, "axis", -3);
    mcir_node_set_int(G, l4, "start", 0);
    mcir_node_set_int(G, l4, "end", 1);
    TT_FAILS(G, l4, "axis -3 is out of range");
}
END_TEST

/* ------------------------------------------------------- convolutions */

START_TEST(conv2d_rules) {
    mcir_tensor *x = tt_in(G, "x", SHAPE(2, 6, 11, 7));
    mcir_tensor *w = tt_in(G, "w", SHAPE(8, 3, 3, 3)), *b = tt_in(G, "b", SHAPE(8));
    mcir_node *n = tt_node(G, MCIR_OP_CONV2D, "cv", 3, (mcir_tensor *[]){x, w, b}, 1);
    mcir_node_set_int(G, n, "groups", 2);
    mcir_node_set_ints(G, n, "strides", 2, (int64_t[]){2, 1});
    mcir_node_set_ints(G, n, "pads", 4, (int64_t[]){1, 0, 0, 2});
    mcir_node_set_ints(G, n, "dilations", 2, (int64_t[]){2, 1});
    tt_infer_ok(G, n);
    /* H: (11 + 1 + 0 - 2*2 - 1)/2 + 1 = 4; W: (7 + 0 + 2 - 2 - 1)/1 + 1 = 7 */
    tt_shape_is(n->outputs[0], SHAPE(2, 8, 4, 7));

    mcir_node *g = tt_node(G, MCIR_OP_CONV2D, "cg", 2, (mcir_tensor *[]){x, w}, 1);
    mcir_node_set_int(G, g, "groups", 4);
    TT_FAILS(G, g, "node 'cg' (conv2d): groups 4 must divide the input channels 6 of 'x'",
             "output channels 8 of 'w' [8, 3, 3, 3]");
    mcir_node *i = tt_node(G, MCIR_OP_CONV2D, "ci", 2, (mcir_tensor *[]){x, w}, 1);
    TT_FAILS(G, i, "weight 'w' [8, 3, 3, 3] has 3 input channels per group, expected 6");
    mcir_node *bb = tt_node(G, MCIR_OP_CONV2D, "cb", 3,
                            (mcir_tensor *[]){x, w, tt_in(G, "b2", SHAPE(6))}, 1);
    mcir_node_set_int(G, bb, "groups", 2);
    TT_FAILS(G, bb, "bias 'b2' [6] must have shape [8]");
    mcir_tensor *wk = tt_in(G, "wk", SHAPE(4, 6, 5, 5));
    mcir_node *fit = tt_node(G, MCIR_OP_CONV2D, "cf", 2, (mcir_tensor *[]){x, wk}, 1);
    mcir_node_set_ints(G, fit, "dilations", 2, (int64_t[]){1, 2});
    TT_FAILS(G, fit, "kernel 'wk' [4, 6, 5, 5] (dilation 2) does not fit in width 7 of 'x'");
    mcir_node *st = tt_node(G, MCIR_OP_CONV2D, "cs", 2, (mcir_tensor *[]){x, wk}, 1);
    mcir_node_set_ints(G, st, "strides", 2, (int64_t[]){0, 1});
    TT_FAILS(G, st, "attribute 'strides' value 0 must be >= 1");
    mcir_node *pd = tt_node(G, MCIR_OP_CONV2D, "cp", 2, (mcir_tensor *[]){x, wk}, 1);
    mcir_node_set_ints(G, pd, "pads", 2, (int64_t[]){1, 1});
    TT_FAILS(G, pd, "attribute 'pads' must have 4 values, got 2");
    mcir_tensor *x3 = tt_in(G, "x3", SHAPE(6, 11, 7));
    TT_FAILS(G, tt_node(G, MCIR_OP_CONV2D, "c3", 2, (mcir_tensor *[]){x3, w}, 1),
             "input 'x3' [6, 11, 7] must be NCHW (rank 4)");
}
END_TEST

START_TEST(pool_rules) {
    mcir_tensor *x = tt_in(G, "x", SHAPE(1, 3, 7, 8));
    mcir_node *m = node1(MCIR_OP_MAX_POOL2D, "mp", x);
    mcir_node_set_ints(G, m, "kernel", 2, (int64_t[]){2, 3});
    tt_infer_ok(G, m);
    tt_shape_is(m->outputs[0], SHAPE(1, 3, 3, 2)); /* strides default to the kernel */
    mcir_node *a = node1(MCIR_OP_AVG_POOL2D, "ap", x);
    mcir_node_set_ints(G, a, "kernel", 2, (int64_t[]){3, 3});
    mcir_node_set_ints(G, a, "strides", 2, (int64_t[]){2, 2});
    mcir_node_set_ints(G, a, "pads", 4, (int64_t[]){1, 1, 1, 1});
    tt_infer_ok(G, a);
    tt_shape_is(a->outputs[0], SHAPE(1, 3, 4, 4));
    mcir_node *p = node1(MCIR_OP_AVG_POOL2D, "app", x);
    mcir_node_set_ints(G, p, "kernel", 2, (int64_t[]){2, 2});
    mcir_node_set_ints(G, p, "pads", 4, (int64_t[]){0, 2, 0, 0});
    TT_FAILS(G, p, "node 'app' (avg_pool2d): pad 2 must be smaller than the kernel size 2");
    mcir_node *f = node1(MCIR_OP_MAX_POOL2D, "mpf", x);
    mcir_node_set_ints(G, f, "kernel", 2, (int64_t[]){8, 2});
    TT_FAILS(G, f, "kernel 8x2 does not fit in height 7 of 'x' [1, 3, 7, 8]");
    TT_FAILS(G, node1(MCIR_OP_MAX_POOL2D, "mpk", x), "missing required attribute 'kernel'");
    mcir_node *k1 = node1(MCIR_OP_MAX_POOL2D, "mk1", x);
    mcir_node_set_ints(G, k1, "kernel", 1, (int64_t[]){2});
    TT_FAILS(G, k1, "attribute 'kernel' must have 2 values, got 1");
    mcir_node *ga = node1(MCIR_OP_GLOBAL_AVG_POOL, "gap", x);
    tt_infer_ok(G, ga);
    tt_shape_is(ga->outputs[0], SHAPE(1, 3, 1, 1));
    TT_FAILS(G, node1(MCIR_OP_GLOBAL_AVG_POOL, "gap2", tt_in(G, "v", SHAPE(3, 7))),
             "input 'v' [3, 7] must be NCHW");
}
END_TEST

/* ---------------------------------------------------------- attention */

START_TEST(attention_rules) {
    mcir_tensor *q = tt_in(G, "q", SHAPE(2, 12, 9, 64)), *k = tt_in(G, "k", SHAPE(1, 12, 16, 64)),
                *v = tt_in(G, "v", SHAPE(12, 16, 32));
    mcir_node *n = tt_node(G, MCIR_OP_ATTENTION, "at", 3, (mcir_tensor *[]){q, k, v}, 1);
    tt_infer_ok(G, n);
    tt_shape_is(n->outputs[0], SHAPE(2, 12, 9, 32));
    mcir_tensor *m1 = tt_in(G, "m1", SHAPE(9, 16)), *m2 = tt_in(G, "m2", SHAPE(2, 1, 1, 16)),
                *m3 = tt_in(G, "m3", SHAPE(3, 2, 12, 9, 16)), *m4 = tt_in(G, "m4", SHAPE(9, 15));
    mcir_node *ok1 = tt_node(G, MCIR_OP_ATTENTION, "a1", 4, (mcir_tensor *[]){q, k, v, m1}, 1);
    mcir_node *ok2 = tt_node(G, MCIR_OP_ATTENTION, "a2", 4, (mcir_tensor *[]){q, k, v, m2}, 1);
    tt_infer_ok(G, ok1);
    tt_infer_ok(G, ok2);
    TT_FAILS(G, tt_node(G, MCIR_OP_ATTENTION, "a3", 4, (mcir_tensor *[]){q, k, v, m3}, 1),
             "node 'a3' (attention): mask 'm3' [3, 2, 12, 9, 16] does not broadcast to the "
             "scores [2, 12, 9, 16]");
    TT_FAILS(G, tt_node(G, MCIR_OP_ATTENTION, "a4", 4, (mcir_tensor *[]){q, k, v, m4}, 1),
             "mask 'm4' [9, 15]");
    mcir_tensor *kd = tt_in(G, "kd", SHAPE(12, 16, 32));
    TT_FAILS(G, tt_node(G, MCIR_OP_ATTENTION, "a5", 3, (mcir_tensor *[]){q, kd, v}, 1),
             "Q 'q' [2, 12, 9, 64] and K 'kd' [12, 16, 32] differ in head size (64 vs 32)");
    mcir_tensor *vn = tt_in(G, "vn", SHAPE(12, 15, 32));
    TT_FAILS(G, tt_node(G, MCIR_OP_ATTENTION, "a6", 3, (mcir_tensor *[]){q, k, vn}, 1),
             "K 'k' [1, 12, 16, 64] has 16 keys but V 'vn' [12, 15, 32] has 15 values");
    mcir_tensor *kb = tt_in(G, "kb", SHAPE(3, 12, 16, 64));
    TT_FAILS(G, tt_node(G, MCIR_OP_ATTENTION, "a7", 3, (mcir_tensor *[]){q, kb, v}, 1),
             "leading dims of Q 'q' [2, 12, 9, 64], K 'kb' [3, 12, 16, 64]", "do not broadcast");
    mcir_tensor *r1 = tt_in(G, "r1", SHAPE(64));
    TT_FAILS(G, tt_node(G, MCIR_OP_ATTENTION, "a8", 3, (mcir_tensor *[]){r1, k, v}, 1),
             "Q 'r1' [64] must have rank >= 2");
    /* causal is allowed for any Nq, Nk */
    mcir_node *c = tt_node(G, MCIR_OP_ATTENTION, "a9", 3, (mcir_tensor *[]){q, k, v}, 1);
    mcir_node_set_bool(G, c, "causal", true);
    mcir_node_set_float(G, c, "scale", 0.5);
    tt_infer_ok(G, c);
}
END_TEST

static Suite *infer_suite(void) {
    Suite *s = suite_create("infer");
    TCase *tc = tcase_create("rules");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, broadcast_and_axis_helpers);
    tcase_add_test(tc, slice_range_matches_numpy);
    tcase_add_test(tc, matmul_shapes);
    tcase_add_test(tc, matmul_errors);
    tcase_add_test(tc, binary_and_unary_shapes);
    tcase_add_test(tc, softmax_and_norm_rules);
    tcase_add_test(tc, reduce_rules);
    tcase_add_test(tc, transpose_reshape_rules);
    tcase_add_test(tc, split_concat_slice_rules);
    tcase_add_test(tc, conv2d_rules);
    tcase_add_test(tc, pool_rules);
    tcase_add_test(tc, attention_rules);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_main(infer_suite()); }
