/*
 * test_ref.c — the reference kernels against hand-computed values (worked
 * out in the comments) and against independent naive implementations
 * written here in f64 (triple-loop matmul, 7-loop conv, explicit
 * softmax·V attention, two-pass norms, bounds-checked pools). Tolerances:
 * 1e-5 absolute for elementwise and norms, 1e-4 (+1e-4 relative) for dot
 * products. Also checks that results do not depend on the thread count.
 */
#include "interp_test.h"
#include "test_util.h"

/* ------------------------------------------------------------- helpers */

/* Offset into a tensor of shape ts (rank rt) of the element that the
 * flat index `flat` of shape os (rank ro) reads under NumPy broadcasting. */
static int64_t bidx(int64_t flat, int ro, const int64_t *os, int rt, const int64_t *ts) {
    int64_t idx[MCIR_MAX_RANK + 2];
    for (int i = ro - 1; i >= 0; i--) {
        idx[i] = flat % os[i];
        flat /= os[i];
    }
    int64_t off = 0;
    for (int i = 0; i < rt; i++) {
        int io = i + (ro - rt);
        int64_t v = ts[i] == 1 ? 0 : idx[io];
        off = off * ts[i] + v;
    }
    return off;
}

static int64_t prod(int r, const int64_t *s) {
    int64_t p = 1;
    for (int i = 0; i < r; i++) p *= s[i];
    return p;
}

static mcir_graph *G;

static void setup(void) { G = mcir_graph_new("t"); }
static void teardown(void) {
    mcir_graph_free(G);
    mcir_set_threads(0);
}

/* Runs n once with the given thread count and returns output 0. */
static float *run_threads(const mcir_node *n, const float *const *in, int threads) {
    mcir_set_threads(threads);
    float **o = tt_run(n, in);
    float *y = o[0];
    for (int i = 1; i < n->n_outputs; i++) free(o[i]);
    free(o);
    return y;
}

/* Output 0 of n is bit-identical for 1, 2 and 3 threads; returns the
 * 1-thread result. */
static float *run_all_threads(const mcir_node *n, const float *const *in) {
    float *y1 = run_threads(n, in, 1);
    int64_t k = mcir_tensor_numel(n->outputs[0]);
    for (int t = 2; t <= 3; t++) {
        float *yt = run_threads(n, in, t);
        ck_assert_msg(memcmp(y1, yt, sizeof(float) * (size_t)k) == 0,
                      "%s: result differs with %d threads", n->name, t);
        free(yt);
    }
    mcir_set_threads(0);
    return y1;
}

/* -------------------------------------------------------------- matmul */

START_TEST(matmul_hand_2x3_3x2) {
    /* [[1,2,3],[4,5,6]] · [[7,8],[9,10],[11,12]]
     * = [[1*7+2*9+3*11, 1*8+2*10+3*12], [4*7+5*9+6*11, 4*8+5*10+6*12]]
     * = [[58, 64], [139, 154]] */
    mcir_tensor *a = tt_in(G, "a", SHAPE(2, 3)), *b = tt_in(G, "b", SHAPE(3, 2));
    mcir_node *n = tt_node(G, MCIR_OP_MATMUL, "mm", 2, (mcir_tensor *[]){a, b}, 1);
    tt_infer_ok(G, n);
    float av[] = {1, 2, 3, 4, 5, 6}, bv[] = {7, 8, 9, 10, 11, 12};
    float **y = tt_run(n, (const float *[]){av, bv});
    tt_closef(y[0], (float[]){58, 64, 139, 154}, 4, 0, "mm");
    tt_free_outs(n, y);
}
END_TEST

/* C = A·B by the definition, in f64, with NumPy's rank-1 and broadcasting
 * rules, from the shapes alone. */
static void check_matmul(int ra, const int64_t *as, int rb, const int64_t *bs, bool ta,
                         bool tb) {
    mcir_graph *g = mcir_graph_new("mm");
    mcir_tensor *A = tt_in(g, "A", ra, as), *B = tt_in(g, "B", rb, bs);
    mcir_node *n = tt_node(g, MCIR_OP_MATMUL, "mm", 2, (mcir_tensor *[]){A, B}, 1);
    if (ta) mcir_node_set_bool(g, n, "transpose_a", true);
    if (tb) mcir_node_set_bool(g, n, "transpose_b", true);
    tt_infer_ok(g, n);
    ta = ta && ra >= 2;
    tb = tb && rb >= 2;
    int64_t m = ra == 1 ? 1 : as[ra - (ta ? 1 : 2)];
    int64_t k = ra == 1 ? as[0] : as[ra - (ta ? 2 : 1)];
    int64_t nn = rb == 1 ? 1 : bs[rb - (tb ? 2 : 1)];
    const mcir_tensor *Y = n->outputs[0];
    int rbatch = Y->rank - (ra >= 2) - (rb >= 2);
    int64_t nbatch = prod(rbatch, Y->shape);
    float *av = tt_rand_t(A, 11), *bv = tt_rand_t(B, 12);
    double *want = calloc((size_t)(nbatch * m * nn), sizeof(double));
    for (int64_t bi = 0; bi < nbatch; bi++) {
        int64_t oa = ra >= 2 ? bidx(bi, rbatch, Y->shape, ra - 2, as) * m * k : 0;
        int64_t ob = rb >= 2 ? bidx(bi, rbatch, Y->shape, rb - 2, bs) * k * nn : 0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < nn; j++) {
                double s = 0;
                for (int64_t p = 0; p < k; p++) {
                    double x = av[oa + (ta ? p * m + i : i * k + p)];
                    double z = bv[ob + (tb ? j * k + p : p * nn + j)];
                    s += x * z;
                }
                want[(bi * m + i) * nn + j] = s;
            }
    }
    ck_assert_int_eq(mcir_tensor_numel(Y), nbatch * m * nn);
    float *y = run_all_threads(n, (const float *[]){av, bv});
    tt_close(y, want, nbatch * m * nn, 1e-4, 1e-4, "matmul");
    free(y);
    free(want);
    free(av);
    free(bv);
    mcir_graph_free(g);
}

START_TEST(matmul_vs_naive_odd_shapes) {
    check_matmul(SHAPE(7, 13), SHAPE(13, 5), false, false);
    check_matmul(SHAPE(1, 1), SHAPE(1, 1), false, false);
    check_matmul(SHAPE(1, 7), SHAPE(7, 1), false, false);
    check_matmul(SHAPE(13, 7), SHAPE(5, 13), true, true);
    check_matmul(SHAPE(13, 7), SHAPE(13, 5), true, false);
    check_matmul(SHAPE(7, 13), SHAPE(5, 13), false, true);
}
END_TEST

START_TEST(matmul_vs_naive_batched_broadcast) {
    check_matmul(SHAPE(2, 1, 7, 13), SHAPE(3, 13, 5), false, false);
    check_matmul(SHAPE(3, 1, 13, 7), SHAPE(4, 5, 13), true, true);
    check_matmul(SHAPE(1, 7, 13), SHAPE(4, 13, 5), false, false);
    check_matmul(SHAPE(12, 9, 8), SHAPE(12, 9, 8), false, true); /* q·kᵀ per head */
}
END_TEST

START_TEST(matmul_vs_naive_rank1) {
    check_matmul(SHAPE(13), SHAPE(13, 5), false, false);   /* -> [5] */
    check_matmul(SHAPE(7, 13), SHAPE(13), false, false);   /* -> [7] */
    check_matmul(SHAPE(13), SHAPE(13), false, false);      /* -> [] */
    check_matmul(SHAPE(4, 7, 13), SHAPE(13), false, false); /* -> [4, 7] */
    check_matmul(SHAPE(13), SHAPE(3, 13, 5), false, false); /* -> [3, 5] */
    check_matmul(SHAPE(13), SHAPE(3, 5, 13), false, true);  /* -> [3, 5] */
}
END_TEST

START_TEST(matmul_vs_naive_crosses_blocks) {
    /* K > KC (256), M > MC (96), N > NC (2048) and every fringe. */
    check_matmul(SHAPE(101, 300), SHAPE(300, 70), false, false);
    check_matmul(SHAPE(300, 101), SHAPE(70, 300), true, true);
    check_matmul(SHAPE(5, 3), SHAPE(3, 2100), false, false);
    check_matmul(SHAPE(2, 97, 33), SHAPE(2, 33, 17), false, false);
}
END_TEST

START_TEST(gemm_same_bits_baseline_and_avx2) {
    /* The micro-kernel is chosen at run time; both must sum every element
     * in the same order. Covers fringes and a K beyond one block. */
    mcir_tensor *a = tt_in(G, "a", SHAPE(2, 101, 300)), *b = tt_in(G, "b", SHAPE(300, 77));
    mcir_node *n = tt_node(G, MCIR_OP_MATMUL, "mm", 2, (mcir_tensor *[]){a, b}, 1);
    tt_infer_ok(G, n);
    float *av = tt_rand_t(a, 1), *bv = tt_rand_t(b, 2);
    float *fast = run_all_threads(n, (const float *[]){av, bv});
    mcir_sgemm_force_baseline(true);
    float *base = run_all_threads(n, (const float *[]){av, bv});
    mcir_sgemm_force_baseline(false);
    ck_assert(memcmp(fast, base, sizeof(float) * 2 * 101 * 77) == 0);
    free(fast);
    free(base);
    free(av);
    free(bv);
}
END_TEST

/* -------------------------------------------------------- elementwise */

static float *run1(mcir_op op, int rank, const int64_t *shape, const float *x,
                   const char *attr, double value) {
    mcir_graph *g = mcir_graph_new("u");
    mcir_tensor *X = tt_in(g, "x", rank, shape);
    mcir_node *n = tt_node(g, op, "u", 1, &X, 1);
    if (attr) mcir_node_set_float(g, n, attr, value);
    tt_infer_ok(g, n);
    float **y = tt_run(n, (const float *[]){x});
    float *r = y[0];
    free(y);
    mcir_graph_free(g);
    return r;
}

START_TEST(unary_hand_values) {
    float x[] = {-2.0f, -0.5f, 0.0f, 1.0f, 4.0f};
    const int64_t s[] = {5};
    struct {
        mcir_op op;
        double want[5];
    } cases[] = {
        {MCIR_OP_RELU, {0, 0, 0, 1, 4}},
        {MCIR_OP_NEG, {2, 0.5, -0.0, -1, -4}},
        {MCIR_OP_EXP, {exp(-2), exp(-0.5), 1, exp(1), exp(4)}},
        {MCIR_OP_TANH, {tanh(-2), tanh(-0.5), 0, tanh(1), tanh(4)}},
        {MCIR_OP_ERF, {erf(-2), erf(-0.5), 0, erf(1), erf(4)}},
        {MCIR_OP_COS, {cos(-2), cos(-0.5), 1, cos(1), cos(4)}},
        {MCIR_OP_SIN, {sin(-2), sin(-0.5), 0, sin(1), sin(4)}},
        {MCIR_OP_SIGMOID, {1 / (1 + exp(2)), 1 / (1 + exp(0.5)), 0.5, 1 / (1 + exp(-1)),
                           1 / (1 + exp(-4))}},
        {MCIR_OP_SILU, {-2 / (1 + exp(2)), -0.5 / (1 + exp(0.5)), 0, 1 / (1 + exp(-1)),
                        4 / (1 + exp(-4))}},
        {MCIR_OP_RECIPROCAL, {-0.5, -2, INFINITY, 1, 0.25}},
        {MCIR_OP_SQRT, {NAN, NAN, 0, 1, 2}},
        {MCIR_OP_RSQRT, {NAN, NAN, INFINITY, 1, 0.5}},
        {MCIR_OP_LOG, {NAN, NAN, -INFINITY, 0, log(4)}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float *y = run1(cases[i].op, 1, s, x, NULL, 0);
        tt_close(y, cases[i].want, 5, 1e-6, 1e-6, mcir_op_name(cases[i].op));
        free(y);
    }
    /* scale 2.5: [-5, -1.25, 0, 2.5, 10] */
    float *y = run1(MCIR_OP_SCALE, 1, s, x, "value", 2.5);
    tt_close(y, (double[]){-5, -1.25, 0, 2.5, 10}, 5, 0, 0, "scale");
    free(y);
}
END_TEST

START_TEST(gelu_both_forms) {
    float x[] = {-3.0f, -1.0f, 0.0f, 1.0f, 2.0f};
    double e[5], t[5];
    for (int i = 0; i < 5; i++) {
        double v = x[i];
        e[i] = 0.5 * v * (1 + erf(v / sqrt(2.0)));
        t[i] = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    }
    /* gelu(1): erf form 0.841344746..., tanh form 0.841191990... */
    ck_assert(fabs(e[3] - 0.8413447460685429) < 1e-12);
    ck_assert(fabs(t[3] - 0.8411919906082768) < 1e-12);
    mcir_graph *g = mcir_graph_new("g");
    mcir_tensor *X = tt_in(g, "x", SHAPE(5));
    mcir_node *ne = tt_node(g, MCIR_OP_GELU, "ge", 1, &X, 1);
    mcir_node *nt = tt_node(g, MCIR_OP_GELU, "gt", 1, &X, 1);
    mcir_node_set_string(g, nt, "approximate", "tanh");
    tt_infer_ok(g, ne);
    tt_infer_ok(g, nt);
    float **ye = tt_run(ne, (const float *[]){x}), **yt = tt_run(nt, (const float *[]){x});
    tt_close(ye[0], e, 5, 1e-6, 1e-6, "gelu erf");
    tt_close(yt[0], t, 5, 1e-6, 1e-6, "gelu tanh");
    tt_free_outs(ne, ye);
    tt_free_outs(nt, yt);
    mcir_graph_free(g);
}
END_TEST

static double ref_binary(mcir_op op, double a, double b) {
    switch (op) {
    case MCIR_OP_ADD: return (float)a + (float)b;
    case MCIR_OP_SUB: return (float)a - (float)b;
    case MCIR_OP_MUL: return (float)a * (float)b;
    case MCIR_OP_DIV: return (float)a / (float)b;
    case MCIR_OP_POW: return pow(a, b);
    case MCIR_OP_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case MCIR_OP_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    default: ck_abort();
    }
    return 0;
}

static void check_binary(mcir_op op, int ra, const int64_t *as, int rb, const int64_t *bs) {
    mcir_graph *g = mcir_graph_new("b");
    mcir_tensor *A = tt_in(g, "A", ra, as), *B = tt_in(g, "B", rb, bs);
    mcir_node *n = tt_node(g, op, "bin", 2, (mcir_tensor *[]){A, B}, 1);
    tt_infer_ok(g, n);
    const mcir_tensor *Y = n->outputs[0];
    float *av = tt_rand(mcir_tensor_numel(A), 3, 0.5f, 2.0f);
    float *bv = tt_rand(mcir_tensor_numel(B), 4, -2.0f, 2.0f);
    int64_t ny = mcir_tensor_numel(Y);
    double *want = malloc(sizeof(double) * (size_t)ny);
    for (int64_t i = 0; i < ny; i++)
        want[i] = ref_binary(op, av[bidx(i, Y->rank, Y->shape, ra, as)],
                             bv[bidx(i, Y->rank, Y->shape, rb, bs)]);
    float *y = run_all_threads(n, (const float *[]){av, bv});
    tt_close(y, want, ny, 1e-6, 1e-6, mcir_op_name(op));
    free(y);
    free(want);
    free(av);
    free(bv);
    mcir_graph_free(g);
}

START_TEST(binary_broadcast_corners) {
    static const mcir_op ops[] = {MCIR_OP_ADD, MCIR_OP_SUB, MCIR_OP_MUL, MCIR_OP_DIV,
                                  MCIR_OP_POW, MCIR_OP_MAX, MCIR_OP_MIN};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        check_binary(ops[i], SHAPE(7, 13), SHAPE(7, 13));
        check_binary(ops[i], SHAPE(7, 13), SHAPE(13));
        check_binary(ops[i], SHAPE(7, 1), SHAPE(1, 13));
        check_binary(ops[i], SHAPE(13), SHAPE(7, 1));
        check_binary(ops[i], SHAPE(2, 1, 5), SHAPE(3, 1));
        check_binary(ops[i], SHAPE(1), SHAPE(7, 13, 5));
        check_binary(ops[i], SHAPE(7, 13, 5), SHAPE(1, 1, 1));
        check_binary(ops[i], SHAPE(1, 1), SHAPE(1));
        check_binary(ops[i], SHAPE(3, 1, 5, 1), SHAPE(1, 4, 1, 6));
        check_binary(ops[i], 0, NULL, SHAPE(4, 3));
        check_binary(ops[i], SHAPE(4, 3), 0, NULL);
        check_binary(ops[i], 0, NULL, 0, NULL);
        check_binary(ops[i], SHAPE(300, 700), SHAPE(700)); /* threaded */
    }
}
END_TEST

START_TEST(binary_hand_and_nan) {
    /* [[1,2,3],[4,5,6]] + [10,20,30] = [[11,22,33],[14,25,36]] */
    mcir_tensor *a = tt_in(G, "a", SHAPE(2, 3)), *b = tt_in(G, "b", SHAPE(3));
    mcir_node *n = tt_node(G, MCIR_OP_ADD, "add", 2, (mcir_tensor *[]){a, b}, 1);
    tt_infer_ok(G, n);
    float **y = tt_run(n, (const float *[]){(float[]){1, 2, 3, 4, 5, 6}, (float[]){10, 20, 30}});
    tt_closef(y[0], (float[]){11, 22, 33, 14, 25, 36}, 6, 0, "add");
    tt_free_outs(n, y);
    /* max/min propagate NaN from either side (NumPy maximum/minimum);
     * pow(NaN, 1) = NaN, pow(1, NaN) = 1 (C and NumPy), pow(2, 3) = 8,
     * pow(-8, 1/3) = NaN. */
    mcir_tensor *p = tt_in(G, "p", SHAPE(4)), *q = tt_in(G, "q", SHAPE(4));
    float pv[] = {NAN, 1, 2, -8}, qv[] = {1, NAN, 3, 1.0f / 3};
    mcir_node *mx = tt_node(G, MCIR_OP_MAX, "mx", 2, (mcir_tensor *[]){p, q}, 1);
    mcir_node *mn = tt_node(G, MCIR_OP_MIN, "mn", 2, (mcir_tensor *[]){p, q}, 1);
    mcir_node *pw = tt_node(G, MCIR_OP_POW, "pw", 2, (mcir_tensor *[]){p, q}, 1);
    tt_infer_ok(G, mx);
    tt_infer_ok(G, mn);
    tt_infer_ok(G, pw);
    float **ymx = tt_run(mx, (const float *[]){pv, qv});
    float **ymn = tt_run(mn, (const float *[]){pv, qv});
    float **ypw = tt_run(pw, (const float *[]){pv, qv});
    tt_close(ymx[0], (double[]){NAN, NAN, 3, 1.0f / 3}, 4, 1e-7, 0, "max");
    tt_close(ymn[0], (double[]){NAN, NAN, 2, -8}, 4, 0, 0, "min");
    tt_close(ypw[0], (double[]){NAN, 1, 8, NAN}, 4, 0, 0, "pow");
    tt_free_outs(mx, ymx);
    tt_free_outs(mn, ymn);
    tt_free_outs(pw, ypw);
}
END_TEST

/* ------------------------------------------------------------ softmax */

START_TEST(softmax_hand_and_axes) {
    /* softmax([1,2,3]) = e^(x-3)/sum = [0.0900306, 0.2447285, 0.6652410] */
    mcir_tensor *x = tt_in(G, "x", SHAPE(3, 2));
    mcir_node *n0 = tt_node(G, MCIR_OP_SOFTMAX, "s0", 1, &x, 1);
    mcir_node_set_int(G, n0, "axis", -2); /* down the columns */
    tt_infer_ok(G, n0);
    float xv[] = {1, 10, 2, 10, 3, 10};
    float **y = tt_run(n0, (const float *[]){xv});
    tt_close(y[0],
             (double[]){0.09003057317038046, 1.0 / 3, 0.24472847105479764, 1.0 / 3,
                        0.6652409557748219, 1.0 / 3},
             6, 1e-7, 0, "softmax axis -2");
    tt_free_outs(n0, y);
    /* A fully -inf row gives zeros (like attention's fully masked rows);
     * huge equal values give 0.5 each, not NaN. */
    mcir_tensor *z = tt_in(G, "z", SHAPE(3, 2));
    mcir_node *n1 = tt_node(G, MCIR_OP_SOFTMAX, "s1", 1, &z, 1);
    tt_infer_ok(G, n1);
    float zv[] = {-INFINITY, -INFINITY, 1000, 1000, -INFINITY, 0};
    y = tt_run(n1, (const float *[]){zv});
    tt_close(y[0], (double[]){0, 0, 0.5, 0.5, 0, 1}, 6, 0, 0, "softmax corners");
    tt_free_outs(n1, y);
}
END_TEST

START_TEST(softmax_vs_naive_every_axis) {
    const int64_t s[] = {7, 13, 5};
    float *xv = tt_rand(7 * 13 * 5, 9, -6, 6);
    for (int axis = -3; axis < 3; axis++) {
        mcir_graph *g = mcir_graph_new("s");
        mcir_tensor *X = tt_in(g, "x", 3, s);
        mcir_node *n = tt_node(g, MCIR_OP_SOFTMAX, "sm", 1, &X, 1);
        mcir_node_set_int(g, n, "axis", axis);
        tt_infer_ok(g, n);
        int a = axis < 0 ? axis + 3 : axis;
        int64_t st[3] = {65, 5, 1};
        double want[7 * 13 * 5];
        for (int64_t i = 0; i < 7 * 13 * 5; i++) {
            int64_t base = i - (i / st[a] % s[a]) * st[a];
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < s[a]; j++) mx = fmax(mx, xv[base + j * st[a]]);
            for (int64_t j = 0; j < s[a]; j++) sum += exp(xv[base + j * st[a]] - mx);
            want[i] = exp(xv[i] - mx) / sum;
        }
        float *y = run_all_threads(n, (const float *[]){xv});
        tt_close(y, want, 7 * 13 * 5, 1e-6, 1e-5, "softmax");
        free(y);
        mcir_graph_free(g);
    }
    free(xv);
}
END_TEST

/* -------------------------------------------------------------- norms */

START_TEST(layernorm_hand) {
    /* x = [1,2,3,4]: mean 2.5, biased var 1.25; y = (x-2.5)/sqrt(1.25+1e-5)
     * * gamma + beta with gamma = [1,1,2,2], beta = [0,0,0,1]. */
    mcir_tensor *x = tt_in(G, "x", SHAPE(1, 4)), *gm = tt_in(G, "g", SHAPE(4)),
                *bt = tt_in(G, "b", SHAPE(4));
    mcir_node *n = tt_node(G, MCIR_OP_LAYERNORM, "ln", 3, (mcir_tensor *[]){x, gm, bt}, 1);
    tt_infer_ok(G, n);
    float **y = tt_run(n, (const float *[]){(float[]){1, 2, 3, 4}, (float[]){1, 1, 2, 2},
                                           (float[]){0, 0, 0, 1}});
    double r = 1 / sqrt(1.25 + 1e-5);
    tt_close(y[0], (double[]){-1.5 * r, -0.5 * r, 2 * 0.5 * r, 2 * 1.5 * r + 1}, 4, 1e-6, 0,
             "layernorm");
    tt_free_outs(n, y);
    /* rmsnorm([1,2,3,4]): mean(x²) = 30/4 = 7.5; y = x/sqrt(7.5+1e-6) */
    mcir_node *m = tt_node(G, MCIR_OP_RMSNORM, "rms", 2, (mcir_tensor *[]){x, gm}, 1);
    tt_infer_ok(G, m);
    y = tt_run(m, (const float *[]){(float[]){1, 2, 3, 4}, (float[]){1, 1, 1, 1}});
    double q = 1 / sqrt(7.5 + 1e-6);
    tt_close(y[0], (double[]){q, 2 * q, 3 * q, 4 * q}, 4, 1e-6, 0, "rmsnorm");
    tt_free_outs(m, y);
}
END_TEST

/* Norm over the trailing dims from axis of [7, 13, 5], gamma/beta given
 * broadcastable to those dims, against a two-pass f64 computation. */
static void check_norm(bool rms, int axis, int rg, const int64_t *gs, bool beta) {
    mcir_graph *g = mcir_graph_new("n");
    const int64_t xs[] = {7, 13, 5};
    mcir_tensor *X = tt_in(g, "x", 3, xs), *Gm = tt_in(g, "g", rg, gs);
    mcir_tensor *Bt = beta ? tt_in(g, "b", rg, gs) : NULL;
    mcir_node *n = tt_node(g, rms ? MCIR_OP_RMSNORM : MCIR_OP_LAYERNORM, "nm", beta ? 3 : 2,
                           (mcir_tensor *[]){X, Gm, Bt}, 1);
    mcir_node_set_int(g, n, "axis", axis);
    mcir_node_set_float(g, n, "eps", 1e-3);
    tt_infer_ok(g, n);
    int a = axis < 0 ? axis + 3 : axis;
    int64_t len = prod(3 - a, xs + a), rows = 7 * 13 * 5 / len;
    float *xv = tt_rand(7 * 13 * 5, 5, -3, 5), *gv = tt_rand_t(Gm, 6),
          *bv = beta ? tt_rand_t(Bt, 7) : NULL;
    double want[7 * 13 * 5];
    for (int64_t r = 0; r < rows; r++) {
        const float *x = xv + r * len;
        double mean = 0, var = 0, ss = 0;
        for (int64_t j = 0; j < len; j++) mean += x[j], ss += (double)x[j] * x[j];
        mean /= len;
        for (int64_t j = 0; j < len; j++) var += (x[j] - mean) * (x[j] - mean);
        var /= len;
        for (int64_t j = 0; j < len; j++) {
            double gj = gv[bidx(j, 3 - a, xs + a, rg, gs)];
            double bj = beta ? bv[bidx(j, 3 - a, xs + a, rg, gs)] : 0;
            want[r * len + j] = rms ? x[j] / sqrt(ss / len + 1e-3) * gj
                                    : (x[j] - mean) / sqrt(var + 1e-3) * gj + bj;
        }
    }
    const float *ins[] = {xv, gv, bv};
    float *y = run_all_threads(n, ins);
    tt_close(y, want, 7 * 13 * 5, 1e-5, 1e-5, rms ? "rmsnorm" : "layernorm");
    free(y);
    free(xv);
    free(gv);
    free(bv);
    mcir_graph_free(g);
}

START_TEST(norms_vs_two_pass) {
    for (int rms = 0; rms < 2; rms++) {
        check_norm(rms, -1, SHAPE(5), !rms);
        check_norm(rms, 2, SHAPE(1), !rms);
        check_norm(rms, -2, SHAPE(13, 5), !rms);
        check_norm(rms, -2, SHAPE(13, 1), !rms); /* per-row gamma */
        check_norm(rms, 1, SHAPE(5), !rms);      /* broadcast over 13 */
        check_norm(rms, 0, SHAPE(7, 13, 5), !rms);
        check_norm(rms, -3, 0, NULL, !rms);      /* scalar gamma */
    }
    check_norm(false, -1, SHAPE(5), false); /* layernorm without beta */
}
END_TEST

/* --------------------------------------------------------- reductions */

START_TEST(reductions_hand) {
    /* x = [[[1,2],[3,4],[5,6]]] shape [1,3,2].
     * sum over axes [0,2], keepdims: [[[3],[7],[11]]];
     * mean over -1, no keepdims: [[1.5, 3.5, 5.5]];
     * max over [1]: [[[5, 6]]]; sum over all, no keepdims: 21 (scalar). */
    float xv[] = {1, 2, 3, 4, 5, 6};
    mcir_tensor *x = tt_in(G, "x", SHAPE(1, 3, 2));
    struct {
        mcir_op op;
        int na;
        int64_t axes[3];
        bool keep;
        int rank;
        int64_t shape[3];
        double want[3];
    } cases[] = {
        {MCIR_OP_REDUCE_SUM, 2, {0, 2}, true, 3, {1, 3, 1}, {3, 7, 11}},
        {MCIR_OP_REDUCE_MEAN, 1, {-1}, false, 2, {1, 3}, {1.5, 3.5, 5.5}},
        {MCIR_OP_REDUCE_MAX, 1, {1}, true, 3, {1, 1, 2}, {5, 6}},
        {MCIR_OP_REDUCE_SUM, 3, {2, 0, -2}, false, 0, {0}, {21}},
    };
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "r%d", i);
        mcir_node *n = tt_node(G, cases[i].op, name, 1, &x, 1);
        mcir_node_set_ints(G, n, "axes", cases[i].na, cases[i].axes);
        mcir_node_set_bool(G, n, "keepdims", cases[i].keep);
        tt_infer_ok(G, n);
        tt_shape_is(n->outputs[0], cases[i].rank, cases[i].shape);
        float **y = tt_run(n, (const float *[]){xv});
        tt_close(y[0], cases[i].want, mcir_tensor_numel(n->outputs[0]), 1e-6, 0, name);
        tt_free_outs(n, y);
    }
    /* reduce_max propagates NaN, and works on all -inf. */
    mcir_tensor *z = tt_in(G, "z", SHAPE(2, 2));
    mcir_node *n = tt_node(G, MCIR_OP_REDUCE_MAX, "rz", 1, &z, 1);
    mcir_node_set_ints(G, n, "axes", 1, (int64_t[]){1});
    tt_infer_ok(G, n);
    float **y = tt_run(n, (const float *[]){(float[]){NAN, 1, -INFINITY, -INFINITY}});
    tt_close(y[0], (double[]){NAN, -INFINITY}, 2, 0, 0, "reduce_max nan");
    tt_free_outs(n, y);
}
END_TEST

START_TEST(reductions_vs_naive) {
    const int64_t s[] = {7, 13, 5};
    float *xv = tt_rand(455, 21, -1, 1);
    for (int mask = 1; mask < 8; mask++)
        for (int op = 0; op < 3; op++) {
            mcir_graph *g = mcir_graph_new("r");
            mcir_tensor *X = tt_in(g, "x", 3, s);
            mcir_op ops[] = {MCIR_OP_REDUCE_SUM, MCIR_OP_REDUCE_MEAN, MCIR_OP_REDUCE_MAX};
            mcir_node *n = tt_node(g, ops[op], "r", 1, &X, 1);
            int64_t axes[3];
            int na = 0;
            for (int a = 0; a < 3; a++)
                if (mask & (1 << a)) axes[na++] = a - 3 * (a & 1); /* mix negative axes */
            mcir_node_set_ints(g, n, "axes", na, axes);
            tt_infer_ok(g, n);
            /* Expected: walk outputs (keepdims shape) and sum their windows. */
            const mcir_tensor *Y = n->outputs[0];
            int64_t ny = mcir_tensor_numel(Y);
            double *want = malloc(sizeof(double) * (size_t)ny);
            for (int64_t o = 0; o < ny; o++) {
                int64_t i0 = o / (Y->shape[1] * Y->shape[2]), i1 = o / Y->shape[2] % Y->shape[1],
                        i2 = o % Y->shape[2];
                double acc = op == 2 ? -INFINITY : 0;
                int64_t cnt = 0;
                for (int64_t a = 0; a < 7; a++)
                    for (int64_t b = 0; b < 13; b++)
                        for (int64_t c = 0; c < 5; c++) {
                            if ((!(mask & 1) && a != i0) || (!(mask & 2) && b != i1) ||
                                (!(mask & 4) && c != i2))
                                continue;
                            double v = xv[(a * 13 + b) * 5 + c];
                            acc = op == 2 ? fmax(acc, v) : acc + v;
                            cnt++;
                        }
                want[o] = op == 1 ? acc / cnt : acc;
            }
            float **y = tt_run(n, (const float *[]){xv});
            tt_close(y[0], want, ny, 1e-5, 1e-6, mcir_op_name(ops[op]));
            tt_free_outs(n, y);
            free(want);
            mcir_graph_free(g);
        }
    free(xv);
}
END_TEST

/* ------------------------------------------------------ data movement */

START_TEST(transpose_vs_naive) {
    const int64_t s[] = {2, 3, 4, 5};
    float *xv = tt_rand(120, 1, -1, 1);
    const int64_t perms[][4] = {{0, 1, 2, 3}, {3, 2, 1, 0}, {0, 2, 1, 3}, {1, 3, 0, 2},
                                {-1, 0, -3, 2}};
    for (int p = 0; p < 5; p++) {
        mcir_graph *g = mcir_graph_new("t");
        mcir_tensor *X = tt_in(g, "x", 4, s);
        mcir_node *n = tt_node(g, MCIR_OP_TRANSPOSE, "tr", 1, &X, 1);
        mcir_node_set_ints(g, n, "perm", 4, perms[p]);
        tt_infer_ok(g, n);
        int pp[4];
        for (int i = 0; i < 4; i++) pp[i] = (int)((perms[p][i] + 4) % 4);
        const int64_t st[] = {60, 20, 5, 1};
        double want[120];
        const int64_t *ys = n->outputs[0]->shape;
        int64_t k = 0;
        for (int64_t a = 0; a < ys[0]; a++)
            for (int64_t b = 0; b < ys[1]; b++)
                for (int64_t c = 0; c < ys[2]; c++)
                    for (int64_t d = 0; d < ys[3]; d++)
                        want[k++] = xv[a * st[pp[0]] + b * st[pp[1]] + c * st[pp[2]] +
                                       d * st[pp[3]]];
        float **y = tt_run(n, (const float *[]){xv});
        tt_close(y[0], want, 120, 0, 0, "transpose");
        tt_free_outs(n, y);
        mcir_graph_free(g);
    }
    free(xv);
}
END_TEST

START_TEST(reshape_split_concat) {
    /* x = 0..11 as [2,6]; split axis 1 sizes [1,2,3]:
     *   [[0],[6]], [[1,2],[7,8]], [[3,4,5],[9,10,11]];
     * concat(parts[2], parts[0]) on axis -1: [[3,4,5,0],[9,10,11,6]];
     * reshape to [3,-1]: same 12 values as [3,4]. */
    float xv[12];
    for (int i = 0; i < 12; i++) xv[i] = (float)i;
    mcir_tensor *x = tt_in(G, "x", SHAPE(2, 6));
    mcir_node *sp = tt_node(G, MCIR_OP_SPLIT, "sp", 1, &x, 3);
    mcir_node_set_int(G, sp, "axis", 1);
    mcir_node_set_ints(G, sp, "sizes", 3, (int64_t[]){1, 2, 3});
    tt_infer_ok(G, sp);
    float **parts = tt_run(sp, (const float *[]){xv});
    tt_closef(parts[0], (float[]){0, 6}, 2, 0, "split 0");
    tt_closef(parts[1], (float[]){1, 2, 7, 8}, 4, 0, "split 1");
    tt_closef(parts[2], (float[]){3, 4, 5, 9, 10, 11}, 6, 0, "split 2");
    mcir_node *cc = tt_node(G, MCIR_OP_CONCAT, "cc", 2,
                            (mcir_tensor *[]){sp->outputs[2], sp->outputs[0]}, 1);
    mcir_node_set_int(G, cc, "axis", -1);
    tt_infer_ok(G, cc);
    tt_shape_is(cc->outputs[0], SHAPE(2, 4));
    float **c = tt_run(cc, (const float *[]){parts[2], parts[0]});
    tt_closef(c[0], (float[]){3, 4, 5, 0, 9, 10, 11, 6}, 8, 0, "concat");
    mcir_node *rs = tt_node(G, MCIR_OP_RESHAPE, "rs", 1, &x, 1);
    mcir_node_set_ints(G, rs, "shape", 2, (int64_t[]){3, -1});
    tt_infer_ok(G, rs);
    tt_shape_is(rs->outputs[0], SHAPE(3, 4));
    float **r = tt_run(rs, (const float *[]){xv});
    tt_closef(r[0], xv, 12, 0, "reshape");
    /* concat on axis 0 of three inputs: [2,6]+[2,6]+[2,6] -> [6,6] */
    mcir_node *c0 = tt_node(G, MCIR_OP_CONCAT, "c0", 3, (mcir_tensor *[]){x, x, x}, 1);
    mcir_node_set_int(G, c0, "axis", 0);
    tt_infer_ok(G, c0);
    float **c3 = tt_run(c0, (const float *[]){xv, xv, xv});
    for (int i = 0; i < 36; i++) TT_CHECK(c3[0][i] == xv[i % 12], "concat3[%d]", i);
    tt_free_outs(c0, c3);
    tt_free_outs(sp, parts);
    tt_free_outs(cc, c);
    tt_free_outs(rs, r);
}
END_TEST

/* x[..., start:end:step] on axis 1 of [2, 10] holding 10*row + col. */
static void check_slice(int64_t start, int64_t end, int64_t step, int count,
                        const int *cols) {
    mcir_graph *g = mcir_graph_new("s");
    mcir_tensor *X = tt_in(g, "x", SHAPE(2, 10));
    mcir_node *n = tt_node(g, MCIR_OP_SLICE, "sl", 1, &X, 1);
    mcir_node_set_int(g, n, "axis", -1);
    mcir_node_set_int(g, n, "start", start);
    mcir_node_set_int(g, n, "end", end);
    mcir_node_set_int(g, n, "step", step);
    tt_infer_ok(g, n);
    tt_shape_is(n->outputs[0], SHAPE(2, count));
    float xv[20];
    for (int i = 0; i < 20; i++) xv[i] = (float)(10 * (i / 10) + i % 10);
    float **y = tt_run(n, (const float *[]){xv});
    for (int r = 0; r < 2; r++)
        for (int j = 0; j < count; j++)
            TT_CHECK(y[0][r * count + j] == (float)(10 * r + cols[j]),
                          "slice %lld:%lld:%lld [%d,%d] = %g, want %d", (long long)start,
                          (long long)end, (long long)step, r, j, y[0][r * count + j],
                          10 * r + cols[j]);
    tt_free_outs(n, y);
    mcir_graph_free(g);
}

START_TEST(slice_numpy_semantics) {
    check_slice(2, 5, 1, 3, (int[]){2, 3, 4});
    check_slice(1, 100, 3, 3, (int[]){1, 4, 7});                       /* end clamps */
    check_slice(-3, -1, 1, 2, (int[]){7, 8});                          /* negative */
    check_slice(-100, 2, 1, 2, (int[]){0, 1});                         /* start clamps */
    check_slice(9, -11, -1, 10, (int[]){9, 8, 7, 6, 5, 4, 3, 2, 1, 0}); /* x[::-1] */
    check_slice(INT64_MAX, INT64_MIN, -1, 10, (int[]){9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
    check_slice(5, 1, -2, 2, (int[]){5, 3});
    check_slice(-1, -4, -2, 2, (int[]){9, 7});
    check_slice(100, 5, -3, 2, (int[]){9, 6}); /* start clamps to 9 */
    check_slice(100, 6, -3, 1, (int[]){9});    /* end excluded */
    check_slice(0, 1, INT64_MAX, 1, (int[]){0});
}
END_TEST

/* ------------------------------------------------------- convolutions */

START_TEST(conv2d_hand) {
    /* x = 1..9 as 3x3, kernel 2x2 of ones, bias 0.5:
     * [[1+2+4+5, 2+3+5+6], [4+5+7+8, 5+6+8+9]] + 0.5 = [[12.5,16.5],[24.5,28.5]].
     * With pads 1 all round and stride 2: outputs at (-1,-1),(−1,1),(1,-1),(1,1):
     * [[1, 2+3], [4+7, 5+6+8+9]] = [[1,5],[11,28]]. */
    float xv[9], wv[4] = {1, 1, 1, 1}, bv[1] = {0.5f};
    for (int i = 0; i < 9; i++) xv[i] = (float)(i + 1);
    mcir_tensor *x = tt_in(G, "x", SHAPE(1, 1, 3, 3)), *w = tt_in(G, "w", SHAPE(1, 1, 2, 2)),
                *b = tt_in(G, "b", SHAPE(1));
    mcir_node *n = tt_node(G, MCIR_OP_CONV2D, "cv", 3, (mcir_tensor *[]){x, w, b}, 1);
    tt_infer_ok(G, n);
    float **y = tt_run(n, (const float *[]){xv, wv, bv});
    tt_closef(y[0], (float[]){12.5f, 16.5f, 24.5f, 28.5f}, 4, 0, "conv");
    tt_free_outs(n, y);
    mcir_node *p = tt_node(G, MCIR_OP_CONV2D, "cp", 2, (mcir_tensor *[]){x, w}, 1);
    mcir_node_set_ints(G, p, "pads", 4, (int64_t[]){1, 1, 1, 1});
    mcir_node_set_ints(G, p, "strides", 2, (int64_t[]){2, 2});
    tt_infer_ok(G, p);
    tt_shape_is(p->outputs[0], SHAPE(1, 1, 2, 2));
    y = tt_run(p, (const float *[]){xv, wv});
    tt_closef(y[0], (float[]){1, 5, 11, 28}, 4, 0, "conv padded");
    tt_free_outs(p, y);
}
END_TEST

static void check_conv(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t KH,
                       int64_t KW, int64_t groups, const int64_t strides[2],
                       const int64_t pads[4], const int64_t dil[2], bool bias) {
    mcir_graph *g = mcir_graph_new("c");
    mcir_tensor *X = tt_in(g, "x", SHAPE(N, C, H, W));
    mcir_tensor *Wt = tt_in(g, "w", SHAPE(O, C / groups, KH, KW));
    mcir_tensor *B = bias ? tt_in(g, "b", SHAPE(O)) : NULL;
    mcir_node *n = tt_node(g, MCIR_OP_CONV2D, "cv", bias ? 3 : 2,
                           (mcir_tensor *[]){X, Wt, B}, 1);
    mcir_node_set_ints(g, n, "strides", 2, strides);
    mcir_node_set_ints(g, n, "pads", 4, pads);
    mcir_node_set_ints(g, n, "dilations", 2, dil);
    mcir_node_set_int(g, n, "groups", groups);
    tt_infer_ok(g, n);
    const int64_t *ys = n->outputs[0]->shape;
    int64_t OH = ys[2], OW = ys[3], cg = C / groups, og = O / groups;
    ck_assert_int_eq(OH, (H + pads[0] + pads[2] - dil[0] * (KH - 1) - 1) / strides[0] + 1);
    ck_assert_int_eq(OW, (W + pads[1] + pads[3] - dil[1] * (KW - 1) - 1) / strides[1] + 1);
    float *xv = tt_rand_t(X, 31), *wv = tt_rand_t(Wt, 32), *bv = bias ? tt_rand_t(B, 33) : NULL;
    int64_t ny = N * O * OH * OW;
    double *want = malloc(sizeof(double) * (size_t)ny);
    for (int64_t b = 0; b < N; b++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double s = bias ? bv[o] : 0;
                    int64_t gi = o / og;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t ih = oh * strides[0] - pads[0] + kh * dil[0];
                                int64_t iw = ow * strides[1] - pads[1] + kw * dil[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                s += (double)xv[((b * C + gi * cg + c) * H + ih) * W + iw] *
                                     wv[((o * cg + c) * KH + kh) * KW + kw];
                            }
                    want[((b * O + o) * OH + oh) * OW + ow] = s;
                }
    float *y = run_all_threads(n, (const float *[]){xv, wv, bv});
    tt_close(y, want, ny, 1e-4, 1e-4, "conv2d");
    free(y);
    free(want);
    free(xv);
    free(wv);
    free(bv);
    mcir_graph_free(g);
}

START_TEST(conv2d_vs_naive) {
    const int64_t s1[] = {1, 1}, s2[] = {2, 2}, s21[] = {2, 1};
    const int64_t p0[] = {0, 0, 0, 0}, p1[] = {1, 1, 1, 1}, pa[] = {1, 2, 0, 1};
    const int64_t d1[] = {1, 1}, d2[] = {2, 2}, d12[] = {1, 2};
    check_conv(1, 3, 7, 5, 4, 3, 3, 1, s1, p1, d1, true);
    check_conv(2, 4, 9, 8, 6, 3, 2, 2, s21, pa, d12, true);  /* groups 2, asym */
    check_conv(1, 6, 11, 7, 6, 3, 3, 6, s1, p1, d1, false);  /* depthwise */
    check_conv(2, 6, 11, 13, 12, 3, 3, 6, s2, p1, d2, true); /* depthwise x2, dil 2 */
    check_conv(1, 5, 13, 13, 7, 3, 3, 1, s1, p0, d2, false); /* dilation 2 */
    check_conv(2, 8, 6, 6, 16, 1, 1, 1, s1, p0, d1, true);   /* 1x1 */
    check_conv(1, 1, 1, 1, 1, 1, 1, 1, s1, p0, d1, false);
    check_conv(1, 3, 32, 32, 16, 3, 3, 1, s2, p1, d1, true); /* threads split pixels */
}
END_TEST

START_TEST(pools_hand) {
    /* x = 1..16 as 4x4. max 2x2 stride 2: [[6,8],[14,16]].
     * avg 3x3 stride 1 pad 1 on the top-left corner covers {1,2,5,6}:
     * 14/4 = 3.5 (padding excluded from the divisor); centre (1,1) covers
     * 1,2,3,5,6,7,9,10,11 -> 54/9 = 6. global avg: 8.5. */
    float xv[16];
    for (int i = 0; i < 16; i++) xv[i] = (float)(i + 1);
    mcir_tensor *x = tt_in(G, "x", SHAPE(1, 1, 4, 4));
    mcir_node *mp = tt_node(G, MCIR_OP_MAX_POOL2D, "mp", 1, &x, 1);
    mcir_node_set_ints(G, mp, "kernel", 2, (int64_t[]){2, 2});
    tt_infer_ok(G, mp);
    tt_shape_is(mp->outputs[0], SHAPE(1, 1, 2, 2));
    float **y = tt_run(mp, (const float *[]){xv});
    tt_closef(y[0], (float[]){6, 8, 14, 16}, 4, 0, "max_pool");
    tt_free_outs(mp, y);
    mcir_node *ap = tt_node(G, MCIR_OP_AVG_POOL2D, "ap", 1, &x, 1);
    mcir_node_set_ints(G, ap, "kernel", 2, (int64_t[]){3, 3});
    mcir_node_set_ints(G, ap, "strides", 2, (int64_t[]){1, 1});
    mcir_node_set_ints(G, ap, "pads", 4, (int64_t[]){1, 1, 1, 1});
    tt_infer_ok(G, ap);
    tt_shape_is(ap->outputs[0], SHAPE(1, 1, 4, 4));
    y = tt_run(ap, (const float *[]){xv});
    ck_assert(y[0][0] == 3.5f);
    ck_assert(y[0][5] == 6.0f);
    ck_assert(y[0][15] == (11 + 12 + 15 + 16) / 4.0f);
    tt_free_outs(ap, y);
    mcir_node *gp = tt_node(G, MCIR_OP_GLOBAL_AVG_POOL, "gp", 1, &x, 1);
    tt_infer_ok(G, gp);
    tt_shape_is(gp->outputs[0], SHAPE(1, 1, 1, 1));
    y = tt_run(gp, (const float *[]){xv});
    ck_assert(y[0][0] == 8.5f);
    tt_free_outs(gp, y);
}
END_TEST

static void check_pool(bool avg, int64_t H, int64_t W, const int64_t k[2],
                       const int64_t s[2], const int64_t p[4]) {
    mcir_graph *g = mcir_graph_new("p");
    mcir_tensor *X = tt_in(g, "x", SHAPE(2, 3, H, W));
    mcir_node *n = tt_node(g, avg ? MCIR_OP_AVG_POOL2D : MCIR_OP_MAX_POOL2D, "pl", 1, &X, 1);
    mcir_node_set_ints(g, n, "kernel", 2, k);
    mcir_node_set_ints(g, n, "strides", 2, s);
    mcir_node_set_ints(g, n, "pads", 4, p);
    tt_infer_ok(g, n);
    int64_t OH = n->outputs[0]->shape[2], OW = n->outputs[0]->shape[3];
    float *xv = tt_rand_t(X, 41);
    double *want = malloc(sizeof(double) * (size_t)(6 * OH * OW));
    for (int64_t pl = 0; pl < 6; pl++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double acc = avg ? 0 : -INFINITY;
                int cnt = 0;
                for (int64_t a = 0; a < k[0]; a++)
                    for (int64_t b = 0; b < k[1]; b++) {
                        int64_t ih = oh * s[0] - p[0] + a, iw = ow * s[1] - p[1] + b;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                        double v = xv[(pl * H + ih) * W + iw];
                        acc = avg ? acc + v : fmax(acc, v);
                        cnt++;
                    }
                want[(pl * OH + oh) * OW + ow] = avg ? acc / cnt : acc;
            }
    float *y = run_all_threads(n, (const float *[]){xv});
    tt_close(y, want, 6 * OH * OW, 1e-6, 1e-6, avg ? "avg_pool" : "max_pool");
    free(y);
    free(want);
    free(xv);
    mcir_graph_free(g);
}

START_TEST(pools_vs_naive) {
    for (int avg = 0; avg < 2; avg++) {
        check_pool(avg, 7, 9, (int64_t[]){3, 3}, (int64_t[]){2, 2}, (int64_t[]){1, 1, 1, 1});
        check_pool(avg, 8, 5, (int64_t[]){2, 3}, (int64_t[]){2, 3}, (int64_t[]){0, 0, 0, 0});
        check_pool(avg, 6, 7, (int64_t[]){3, 2}, (int64_t[]){1, 2}, (int64_t[]){2, 0, 1, 1});
        check_pool(avg, 1, 1, (int64_t[]){1, 1}, (int64_t[]){1, 1}, (int64_t[]){0, 0, 0, 0});
    }
}
END_TEST

/* ---------------------------------------------------------- attention */

/* softmax(scale·QKᵀ + M, causal) V written out in f64 per (lead, i). */
static void check_attention(int rq, const int64_t *qs, int rk, const int64_t *ks, int rv,
                            const int64_t *vs, int rm, const int64_t *ms, bool causal,
                            double scale, const float *mask_values) {
    mcir_graph *g = mcir_graph_new("a");
    mcir_tensor *Q = tt_in(g, "q", rq, qs), *K = tt_in(g, "k", rk, ks), *V = tt_in(g, "v", rv, vs);
    mcir_tensor *M = rm >= 0 ? tt_in(g, "m", rm, ms) : NULL;
    mcir_node *n = tt_node(g, MCIR_OP_ATTENTION, "at", M ? 4 : 3,
                           (mcir_tensor *[]){Q, K, V, M}, 1);
    if (causal) mcir_node_set_bool(g, n, "causal", true);
    if (scale > 0) mcir_node_set_float(g, n, "scale", scale);
    tt_infer_ok(g, n);
    const mcir_tensor *Y = n->outputs[0];
    int64_t nq = qs[rq - 2], d = qs[rq - 1], nk = ks[rk - 2], dv = vs[rv - 1];
    double sc = scale > 0 ? scale : 1 / sqrt((double)d);
    int rl = Y->rank - 2;
    int64_t nlead = prod(rl, Y->shape);
    float *qv = tt_rand_t(Q, 51), *kv = tt_rand(mcir_tensor_numel(K), 52, -2, 2),
          *vv = tt_rand_t(V, 53);
    float *mv = M ? (mask_values ? (float *)mask_values : tt_rand_t(M, 54)) : NULL;
    int64_t sshape[MCIR_MAX_RANK + 2];
    memcpy(sshape, Y->shape, sizeof(int64_t) * (size_t)rl);
    sshape[rl] = nq;
    sshape[rl + 1] = nk;
    double *want = calloc((size_t)(nlead * nq * dv), sizeof(double));
    double *s = malloc(sizeof(double) * (size_t)nk);
    for (int64_t b = 0; b < nlead; b++) {
        int64_t oq = bidx(b, rl, Y->shape, rq - 2, qs) * nq * d;
        int64_t ok = bidx(b, rl, Y->shape, rk - 2, ks) * nk * d;
        int64_t ov = bidx(b, rl, Y->shape, rv - 2, vs) * nk * dv;
        for (int64_t i = 0; i < nq; i++) {
            double mx = -INFINITY;
            for (int64_t j = 0; j < nk; j++) {
                if (causal && j > i + (nk - nq)) {
                    s[j] = -INFINITY;
                    continue;
                }
                double dot = 0;
                for (int64_t p = 0; p < d; p++)
                    dot += (double)qv[oq + i * d + p] * kv[ok + j * d + p];
                s[j] = sc * dot;
                if (M) s[j] += mv[bidx((b * nq + i) * nk + j, rl + 2, sshape, rm, ms)];
                mx = fmax(mx, s[j]);
            }
            if (mx == -INFINITY) continue; /* fully masked: zeros */
            double sum = 0;
            for (int64_t j = 0; j < nk; j++) sum += (s[j] = exp(s[j] - mx));
            for (int64_t j = 0; j < nk; j++)
                for (int64_t e = 0; e < dv; e++)
                    want[(b * nq + i) * dv + e] += s[j] / sum * vv[ov + j * dv + e];
        }
    }
    float *y = run_all_threads(n, (const float *[]){qv, kv, vv, mv});
    tt_close(y, want, nlead * nq * dv, 2e-5, 1e-4, "attention");
    free(y);
    free(want);
    free(s);
    free(qv);
    free(kv);
    free(vv);
    if (mv != mask_values) free(mv);
    mcir_graph_free(g);
}

START_TEST(attention_vs_naive_plain_and_mask) {
    check_attention(SHAPE(2, 3, 9, 8), SHAPE(2, 3, 9, 8), SHAPE(2, 3, 9, 8), -1, NULL, false,
                    0, NULL);
    check_attention(SHAPE(7, 5), SHAPE(13, 5), SHAPE(13, 3), -1, NULL, false, 0.3, NULL);
    check_attention(SHAPE(2, 3, 9, 8), SHAPE(2, 3, 11, 8), SHAPE(2, 3, 11, 4),
                    SHAPE(2, 1, 1, 11), false, 0, NULL); /* padding-style mask */
    check_attention(SHAPE(3, 9, 8), SHAPE(3, 11, 8), SHAPE(3, 11, 4), SHAPE(11), false, 0,
                    NULL);
    check_attention(SHAPE(3, 9, 8), SHAPE(3, 11, 8), SHAPE(3, 11, 4), SHAPE(9, 11), true, 0,
                    NULL);
    /* leading dims broadcast across Q, K, V */
    check_attention(SHAPE(2, 3, 5, 8), SHAPE(1, 3, 7, 8), SHAPE(2, 1, 7, 4),
                    SHAPE(1, 3, 5, 1), false, 0, NULL);
    /* long rows: several 64-row blocks and threads */
    check_attention(SHAPE(2, 150, 16), SHAPE(2, 150, 16), SHAPE(2, 150, 16), -1, NULL, true,
                    0, NULL);
}
END_TEST

START_TEST(attention_causal_nq_ne_nk) {
    /* Nq < Nk: query i sees keys j <= i + (Nk - Nq) (decoding with a cache). */
    check_attention(SHAPE(2, 5, 8), SHAPE(2, 12, 8), SHAPE(2, 12, 6), -1, NULL, true, 0, NULL);
    /* Nq > Nk: the first Nq - Nk rows see no key at all and are 0. */
    check_attention(SHAPE(2, 12, 8), SHAPE(2, 5, 8), SHAPE(2, 5, 6), -1, NULL, true, 0, NULL);
    check_attention(SHAPE(1, 1, 4), SHAPE(1, 1, 4), SHAPE(1, 1, 4), -1, NULL, true, 0, NULL);
}
END_TEST

START_TEST(attention_fully_masked_rows_are_zero) {
    /* Row 1 of the [3, 4] mask is all -inf: its output is 0, not NaN. Row 2
     * masks keys 0 and 3 only. */
    float m[] = {0, 0, 0, 0, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                 -INFINITY, 0, 0, -INFINITY};
    check_attention(SHAPE(2, 3, 8), SHAPE(2, 4, 8), SHAPE(2, 4, 5), SHAPE(3, 4), false, 0, m);
    check_attention(SHAPE(2, 3, 8), SHAPE(2, 4, 8), SHAPE(2, 4, 5), SHAPE(3, 4), true, 0, m);
    /* hand: a single key: output = V exactly. */
    mcir_tensor *q = tt_in(G, "q", SHAPE(1, 2)), *k = tt_in(G, "k", SHAPE(1, 2)),
                *v = tt_in(G, "v", SHAPE(1, 3));
    mcir_node *n = tt_node(G, MCIR_OP_ATTENTION, "at", 3, (mcir_tensor *[]){q, k, v}, 1);
    tt_infer_ok(G, n);
    float **y = tt_run(n, (const float *[]){(float[]){1, 2}, (float[]){3, 4},
                                           (float[]){5, 6, 7}});
    tt_closef(y[0], (float[]){5, 6, 7}, 3, 1e-6, "attention single key");
    tt_free_outs(n, y);
}
END_TEST

static Suite *ref_suite(void) {
    Suite *s = suite_create("ref");
    TCase *tc = tcase_create("kernels");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, matmul_hand_2x3_3x2);
    tcase_add_test(tc, matmul_vs_naive_odd_shapes);
    tcase_add_test(tc, matmul_vs_naive_batched_broadcast);
    tcase_add_test(tc, matmul_vs_naive_rank1);
    tcase_add_test(tc, matmul_vs_naive_crosses_blocks);
    tcase_add_test(tc, gemm_same_bits_baseline_and_avx2);
    tcase_add_test(tc, unary_hand_values);
    tcase_add_test(tc, gelu_both_forms);
    tcase_add_test(tc, binary_broadcast_corners);
    tcase_add_test(tc, binary_hand_and_nan);
    tcase_add_test(tc, softmax_hand_and_axes);
    tcase_add_test(tc, softmax_vs_naive_every_axis);
    tcase_add_test(tc, layernorm_hand);
    tcase_add_test(tc, norms_vs_two_pass);
    tcase_add_test(tc, reductions_hand);
    tcase_add_test(tc, reductions_vs_naive);
    tcase_add_test(tc, transpose_vs_naive);
    tcase_add_test(tc, reshape_split_concat);
    tcase_add_test(tc, slice_numpy_semantics);
    tcase_add_test(tc, conv2d_hand);
    tcase_add_test(tc, conv2d_vs_naive);
    tcase_add_test(tc, pools_hand);
    tcase_add_test(tc, pools_vs_naive);
    tcase_add_test(tc, attention_vs_naive_plain_and_mask);
    tcase_add_test(tc, attention_causal_nq_ne_nk);
    tcase_add_test(tc, attention_fully_masked_rows_are_zero);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_main(ref_suite()); }
