/*
 * test_ints.c — integer and bool tensors on the CPU path: the value
 * toolkit (every dtype to and from f32, truncation and saturation, the one
 * comparison), graph.json values and dtypes, and each op of mcir/ops_int.c
 * through the interpreter — casts that truncate, saturate and wrap,
 * comparisons and where with broadcasting, gather (axis 0 and 1, negative
 * indices, an index out of range reported as an error), argmax/argmin
 * (first index wins, NaN), arange — plus float-only ops refusing integers;
 * and every integer op exact beyond 2^24, 2^31 and 2^53, byte for byte
 * NumPy's (tests/data/ints/).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcir/mcir.h"
#include "test_util.h"

/* Reads a graph from JSON text; errors go to `errs` (may be NULL). */
static mcir_graph *graph_of(const char *json, char *errs, size_t n) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mcir_diag d = mcir_diag_to(f);
    mcir_graph *g = mcir_graph_read_json_string(json, "t.json", &d);
    fclose(f);
    if (errs) snprintf(errs, n, "%s", buf ? buf : "");
    free(buf);
    return g;
}

/* Runs g; returns the env (caller frees) or NULL with the errors in errs. */
static mcir_env *run(mcir_graph *g, char *errs, size_t n) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mcir_diag d = mcir_diag_to(f);
    mcir_env *e = mcir_env_new(g, 0);
    bool ok = mcir_interp_run(g, e, &d);
    fclose(f);
    if (errs) snprintf(errs, n, "%s", buf ? buf : "");
    free(buf);
    if (!ok) {
        mcir_env_free(e);
        return NULL;
    }
    return e;
}

static const float *value(mcir_env *e, mcir_graph *g, const char *name) {
    const float *v = mcir_env_get(e, mcir_graph_find_tensor(g, name));
    ck_assert_msg(v != NULL, "no value for %s", name);
    return v;
}

#define ASSERT_VALUES(v, ...)                                                        \
    do {                                                                             \
        const float want_[] = {__VA_ARGS__};                                         \
        for (size_t k_ = 0; k_ < sizeof want_ / sizeof *want_; k_++)                 \
            ck_assert_msg((v)[k_] == want_[k_], "element %zu: %g, want %g", k_,      \
                          (double)(v)[k_], (double)want_[k_]);                       \
    } while (0)

/* ------------------------------------------------------------- toolkit */

START_TEST(every_dtype_round_trips_through_f32) {
    const float src[] = {0, 1, -2, 3.75f, 100, -100, 255, 300};
    for (int t = 0; t < MCIR_DTYPE_COUNT; t++) {
        unsigned char raw[8 * 8];
        float back[8];
        mcir_values_from_f32((mcir_dtype)t, src, raw, 8);
        mcir_values_to_f32((mcir_dtype)t, raw, back, 8);
        for (int i = 0; i < 8; i++)
            ck_assert_msg(back[i] == mcir_dtype_round((mcir_dtype)t, src[i]), "%s element %d: %g",
                          mcir_dtype_name((mcir_dtype)t), i, (double)back[i]);
    }
}
END_TEST

START_TEST(float_to_integer_truncates_and_saturates) {
    ck_assert_int_eq(mcir_value_to_int(MCIR_DTYPE_I32, -3.9), -3);
    ck_assert_int_eq(mcir_value_to_int(MCIR_DTYPE_I32, 3.9), 3);
    ck_assert_int_eq(mcir_value_to_int(MCIR_DTYPE_I32, 1e12), 2147483647);
    ck_assert_int_eq(mcir_value_to_int(MCIR_DTYPE_I32, -1e12), -2147483647 - 1);
    ck_assert_int_eq(mcir_value_to_int(MCIR_DTYPE_U8, -5), 0);
    ck_assert_int_eq(mcir_value_to_int(MCIR_DTYPE_U8, 256.5), 255);
    ck_assert_int_eq(mcir_value_to_int(MCIR_DTYPE_I64, NAN), 0);
    ck_assert(mcir_value_to_int(MCIR_DTYPE_I64, 1e30) == INT64_MAX);
    ck_assert_int_eq(mcir_value_to_int(MCIR_DTYPE_BOOL, -0.5), 1);
    ck_assert_int_eq(mcir_value_to_int(MCIR_DTYPE_BOOL, 0), 0);
    int64_t big = (INT64_C(1) << 60) + 1, got;
    unsigned char raw[8];
    memcpy(raw, &big, 8);
    mcir_values_to_int(MCIR_DTYPE_I64, raw, &got, 1);
    ck_assert(got == big);   /* exact, not through a double */
}
END_TEST

START_TEST(one_comparison_for_every_caller) {
    mcir_compare_result r;
    const float want[] = {1, -2, 4}, close[] = {1, -2, 4.0002f}, zero[] = {0, 0, 0};
    mcir_values_compare(close, want, 3, &r);
    ck_assert(fabs(r.max_rel - 0.0002 / 4) < 1e-6 && r.worst == 2);
    ck_assert(mcir_compare_within(&r, mcir_compare_tolerance(MCIR_DTYPE_F32)));
    ck_assert(!mcir_compare_within(&r, mcir_compare_tolerance(MCIR_DTYPE_I64)));
    /* all-zero expectation: the error is absolute, not divided by ~0 */
    const float tiny[] = {0, 1e-5f, 0};
    mcir_values_compare(tiny, zero, 3, &r);
    ck_assert(r.max_rel < 2e-5 && mcir_compare_within(&r, 1e-4));
    /* NaN on one side only: infinite, whatever the tolerance */
    const float nan1[] = {1, NAN, 4}, nan2[] = {1, NAN, 4}, inf1[] = {1, -2, INFINITY};
    mcir_values_compare(nan1, want, 3, &r);
    ck_assert(r.nonfinite_mismatch && isinf(r.max_rel) && r.worst == 1);
    mcir_values_compare(nan1, nan2, 3, &r);
    ck_assert(!r.nonfinite_mismatch && r.max_abs == 0);
    mcir_values_compare(inf1, want, 3, &r);
    ck_assert(!mcir_compare_within(&r, 1e9));
}
END_TEST

/* ---------------------------------------------------------- graph.json */

START_TEST(integer_weights_take_integral_values_in_range) {
    char errs[2048];
    mcir_graph *g = graph_of(
        "{\"mcir\":1,\"inputs\":[],\"weights\":[{\"name\":\"w\",\"dtype\":\"i64\",\"shape\":[3],"
        "\"value\":[9007199254740993,-4,7.0]}],\"nodes\":[{\"op\":\"cast\",\"inputs\":[\"w\"],"
        "\"outputs\":[\"y\"],\"attrs\":{\"to\":\"i32\"}}],\"outputs\":[\"y\"]}",
        errs, sizeof errs);
    ck_assert_msg(g, "%s", errs);
    int64_t v;
    memcpy(&v, (const char *)mcir_graph_find_tensor(g, "w")->data, 8);
    ck_assert(v == INT64_C(9007199254740993));   /* above 2^53, kept exactly */
    mcir_graph_free(g);
    static const char *const bad[][2] = {
        {"\"u8\",\"shape\":[1],\"value\":[256]", "value 256 is not in range for u8"},
        {"\"i32\",\"shape\":[1],\"value\":[1.5]", "value 1.5 is not an integer for i32"},
        {"\"bool\",\"shape\":[1],\"value\":[2]", "value 2 is not in range for bool"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"mcir\":1,\"inputs\":[],\"weights\":[{\"name\":\"w\",\"dtype\":%s}],"
                 "\"nodes\":[{\"op\":\"neg\",\"inputs\":[\"w\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}",
                 bad[i][0]);
        g = graph_of(json, errs, sizeof errs);
        ck_assert(g == NULL);
        ck_assert_msg(strstr(errs, bad[i][1]), "%s", errs);
    }
}
END_TEST

START_TEST(float_only_ops_refuse_integers) {
    char errs[2048];
    mcir_graph *g = graph_of(
        "{\"mcir\":1,\"inputs\":[{\"name\":\"x\",\"dtype\":\"i64\",\"shape\":[4]}],"
        "\"nodes\":[{\"name\":\"e\",\"op\":\"exp\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}",
        errs, sizeof errs);
    ck_assert(g == NULL);
    ck_assert_msg(strstr(errs, "node 'e' (exp): takes floating-point tensors, but 'x' is i64 (cast it first)"),
                  "%s", errs);
    g = graph_of("{\"mcir\":1,\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[4]},"
                 "{\"name\":\"i\",\"dtype\":\"f32\",\"shape\":[2]}],\"nodes\":[{\"name\":\"g\",\"op\":\"gather\","
                 "\"inputs\":[\"x\",\"i\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}",
                 errs, sizeof errs);
    ck_assert(g == NULL);
    ck_assert_msg(strstr(errs, "indices 'i' must be i32, i64 or u8, got f32"), "%s", errs);
    g = graph_of("{\"mcir\":1,\"inputs\":[{\"name\":\"c\",\"dtype\":\"u8\",\"shape\":[2]},"
                 "{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[2]}],\"nodes\":[{\"name\":\"w\",\"op\":\"where\","
                 "\"inputs\":[\"c\",\"x\",\"x\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}",
                 errs, sizeof errs);
    ck_assert(g == NULL);
    ck_assert_msg(strstr(errs, "condition 'c' must be bool, got u8"), "%s", errs);
}
END_TEST

/* ----------------------------------------------------------------- ops */

static const char CASTS[] =
    "{\"mcir\":1,\"inputs\":[],\"weights\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[6],"
    "\"value\":[-2.7,-0.5,0,0.5,300.9,\"nan\"]},{\"name\":\"n\",\"dtype\":\"i32\",\"shape\":[4],"
    "\"value\":[-1,256,257,7]}],"
    "\"nodes\":[{\"op\":\"cast\",\"inputs\":[\"x\"],\"outputs\":[\"xi\"],\"attrs\":{\"to\":\"i32\"}},"
    "{\"op\":\"cast\",\"inputs\":[\"x\"],\"outputs\":[\"xu\"],\"attrs\":{\"to\":\"u8\"}},"
    "{\"op\":\"cast\",\"inputs\":[\"x\"],\"outputs\":[\"xb\"],\"attrs\":{\"to\":\"bool\"}},"
    "{\"op\":\"cast\",\"inputs\":[\"n\"],\"outputs\":[\"nu\"],\"attrs\":{\"to\":\"u8\"}},"
    "{\"op\":\"cast\",\"inputs\":[\"n\"],\"outputs\":[\"nh\"],\"attrs\":{\"to\":\"f16\"}},"
    "{\"op\":\"cast\",\"inputs\":[\"xb\"],\"outputs\":[\"bf\"],\"attrs\":{\"to\":\"f32\"}}],"
    "\"outputs\":[\"xi\",\"xu\",\"xb\",\"nu\",\"nh\",\"bf\"]}";

START_TEST(casts_truncate_saturate_and_wrap) {
    char errs[2048];
    mcir_graph *g = graph_of(CASTS, errs, sizeof errs);
    ck_assert_msg(g, "%s", errs);
    ck_assert_int_eq(mcir_graph_find_tensor(g, "xu")->dtype, MCIR_DTYPE_U8);
    mcir_env *e = run(g, errs, sizeof errs);
    ck_assert_msg(e, "%s", errs);
    ASSERT_VALUES(value(e, g, "xi"), -2, 0, 0, 0, 300, 0);    /* toward zero; NaN -> 0 */
    ASSERT_VALUES(value(e, g, "xu"), 0, 0, 0, 0, 255, 0);     /* float -> u8 saturates */
    ASSERT_VALUES(value(e, g, "xb"), 1, 1, 0, 1, 1, 1);       /* v != 0, NaN too */
    ASSERT_VALUES(value(e, g, "nu"), 255, 0, 1, 7);           /* integer -> u8 wraps */
    ASSERT_VALUES(value(e, g, "nh"), -1, 256, 257, 7);
    ASSERT_VALUES(value(e, g, "bf"), 1, 1, 0, 1, 1, 1);
    mcir_env_free(e);
    mcir_graph_free(g);
}
END_TEST

static const char SELECT[] =
    "{\"mcir\":1,\"inputs\":[],\"weights\":[{\"name\":\"a\",\"dtype\":\"i64\",\"shape\":[2,3],"
    "\"value\":[[1,5,3],[7,2,3]]},{\"name\":\"b\",\"dtype\":\"i64\",\"shape\":[3],\"value\":[1,4,3]},"
    "{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[2,3],\"value\":[[0.5,1.5,2.5],[3.5,4.5,5.5]]},"
    "{\"name\":\"y\",\"dtype\":\"f32\",\"shape\":[],\"value\":-1}],"
    "\"nodes\":[{\"op\":\"equal\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"eq\"]},"
    "{\"op\":\"not_equal\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"ne\"]},"
    "{\"op\":\"less\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"lt\"]},"
    "{\"op\":\"less_equal\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"le\"]},"
    "{\"op\":\"greater\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"gt\"]},"
    "{\"op\":\"greater_equal\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"ge\"]},"
    "{\"op\":\"where\",\"inputs\":[\"gt\",\"x\",\"y\"],\"outputs\":[\"w\"]},"
    "{\"op\":\"add\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"s\"]}],"
    "\"outputs\":[\"eq\",\"ne\",\"lt\",\"le\",\"gt\",\"ge\",\"w\",\"s\"]}";

START_TEST(comparisons_and_where_broadcast) {
    char errs[2048];
    mcir_graph *g = graph_of(SELECT, errs, sizeof errs);
    ck_assert_msg(g, "%s", errs);
    ck_assert_int_eq(mcir_graph_find_tensor(g, "eq")->dtype, MCIR_DTYPE_BOOL);
    ck_assert_int_eq(mcir_graph_find_tensor(g, "s")->dtype, MCIR_DTYPE_I64);
    mcir_env *e = run(g, errs, sizeof errs);
    ck_assert_msg(e, "%s", errs);
    ASSERT_VALUES(value(e, g, "eq"), 1, 0, 1, 0, 0, 1);
    ASSERT_VALUES(value(e, g, "ne"), 0, 1, 0, 1, 1, 0);
    ASSERT_VALUES(value(e, g, "lt"), 0, 0, 0, 0, 1, 0);
    ASSERT_VALUES(value(e, g, "le"), 1, 0, 1, 0, 1, 1);
    ASSERT_VALUES(value(e, g, "gt"), 0, 1, 0, 1, 0, 0);
    ASSERT_VALUES(value(e, g, "ge"), 1, 1, 1, 1, 0, 1);
    ASSERT_VALUES(value(e, g, "w"), -1, 1.5f, -1, 3.5f, -1, -1);
    ASSERT_VALUES(value(e, g, "s"), 2, 9, 6, 8, 6, 6);
    mcir_env_free(e);
    mcir_graph_free(g);
}
END_TEST

static const char *gather_graph(char *json, size_t n, const char *indices) {
    snprintf(json, n,
             "{\"mcir\":1,\"inputs\":[],\"weights\":[{\"name\":\"t\",\"dtype\":\"f32\",\"shape\":[4,3],"
             "\"value\":[[0,1,2],[10,11,12],[20,21,22],[30,31,32]]},"
             "{\"name\":\"i\",\"dtype\":\"i64\",\"shape\":[2,2],\"value\":%s},"
             "{\"name\":\"j\",\"dtype\":\"i32\",\"shape\":[2],\"value\":[2,-3]}],"
             "\"nodes\":[{\"name\":\"rows\",\"op\":\"gather\",\"inputs\":[\"t\",\"i\"],\"outputs\":[\"r\"]},"
             "{\"name\":\"cols\",\"op\":\"gather\",\"inputs\":[\"t\",\"j\"],\"outputs\":[\"c\"],\"attrs\":{\"axis\":-1}}],"
             "\"outputs\":[\"r\",\"c\"]}",
             indices);
    return json;
}

START_TEST(gather_takes_rows_and_columns) {
    char json[2048], errs[2048];
    mcir_graph *g = graph_of(gather_graph(json, sizeof json, "[[3,0],[-1,1]]"), errs, sizeof errs);
    ck_assert_msg(g, "%s", errs);
    const mcir_tensor *r = mcir_graph_find_tensor(g, "r");
    ck_assert(r->rank == 3 && r->shape[0] == 2 && r->shape[1] == 2 && r->shape[2] == 3);
    mcir_env *e = run(g, errs, sizeof errs);
    ck_assert_msg(e, "%s", errs);
    ASSERT_VALUES(value(e, g, "r"), 30, 31, 32, 0, 1, 2, 30, 31, 32, 10, 11, 12);
    ASSERT_VALUES(value(e, g, "c"), 2, 0, 12, 10, 22, 20, 32, 30);
    mcir_env_free(e);
    mcir_graph_free(g);
}
END_TEST

START_TEST(gather_index_out_of_range_is_an_error) {
    char json[2048], errs[2048];
    static const char *const bad[] = {"[[0,4],[1,1]]", "[[0,1],[-5,1]]"};
    for (int k = 0; k < 2; k++) {
        mcir_graph *g = graph_of(gather_graph(json, sizeof json, bad[k]), errs, sizeof errs);
        ck_assert_msg(g, "%s", errs);
        ck_assert(run(g, errs, sizeof errs) == NULL);
        ck_assert_msg(strstr(errs, "node 'rows' (gather): index") &&
                          strstr(errs, "is out of range for axis 0 of 't' (size 4)"),
                      "%s", errs);
        mcir_graph_free(g);
    }
}
END_TEST

/* index_copy (a KV cache's update): rows of the updates over the indexed
 * rows, along axis 1 of f32 and axis 0 of i64 values past 2^53, a
 * negative index, a repeated one (its last row wins). */
static const char *index_copy_graph(char *json, size_t n, const char *rows, const char *extra) {
    snprintf(json, n,
             "{\"mcir\":1,\"inputs\":[],\"weights\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[2,4],"
             "\"value\":[[0,1,2,3],[10,11,12,13]]},"
             "{\"name\":\"i\",\"dtype\":\"i64\",\"shape\":[3],\"value\":%s},"
             "{\"name\":\"u\",\"dtype\":\"f32\",\"shape\":[2,3],\"value\":[[-1,-2,-3],[-4,-5,-6]]},"
             "{\"name\":\"t\",\"dtype\":\"i64\",\"shape\":[3,2],\"value\":[[9007199254740993,1],[2,3],[4,5]]},"
             "{\"name\":\"j\",\"dtype\":\"i32\",\"shape\":[1],\"value\":[-1]},"
             "{\"name\":\"r\",\"dtype\":\"i64\",\"shape\":[1,2],\"value\":[[-9007199254740993,7]]}%s],"
             "\"nodes\":[{\"name\":\"upd\",\"op\":\"index_copy\",\"inputs\":[\"x\",\"i\",\"u\"],\"outputs\":[\"y\"],"
             "\"attrs\":{\"axis\":1}},"
             "{\"name\":\"upi\",\"op\":\"index_copy\",\"inputs\":[\"t\",\"j\",\"r\"],\"outputs\":[\"z\"]}],"
             "\"outputs\":[\"y\",\"z\"]}",
             rows, extra);
    return json;
}

START_TEST(index_copy_writes_rows_by_index) {
    char json[4096], errs[2048];
    mcir_graph *g = graph_of(index_copy_graph(json, sizeof json, "[3,-4,3]", ""), errs, sizeof errs);
    ck_assert_msg(g, "%s", errs);
    mcir_env *e = run(g, errs, sizeof errs);
    ck_assert_msg(e, "%s", errs);
    /* column 3 gets u's column 0, then column 2 (the last write of index 3) */
    ASSERT_VALUES(value(e, g, "y"), -2, 1, 2, -3, -5, 11, 12, -6);
    const int64_t *z = mcir_env_get_int(e, mcir_graph_find_tensor(g, "z"));
    ck_assert(z[0] == 9007199254740993LL && z[1] == 1 && z[2] == 2 && z[3] == 3 &&
              z[4] == -9007199254740993LL && z[5] == 7);
    mcir_env_free(e);
    mcir_graph_free(g);
    /* an index out of range is a run-time error naming it */
    g = graph_of(index_copy_graph(json, sizeof json, "[0,4,1]", ""), errs, sizeof errs);
    ck_assert_msg(g, "%s", errs);
    ck_assert(run(g, errs, sizeof errs) == NULL);
    ck_assert_msg(strstr(errs, "node 'upd' (index_copy): index 4 (element 1 of 'i') is out of range "
                               "for axis 1 of 'x' (size 4)"), "%s", errs);
    mcir_graph_free(g);
}
END_TEST

START_TEST(index_copy_checks_its_operands) {
    static const struct {
        const char *node, *want;
    } bad[] = {
        {"{\"op\":\"index_copy\",\"inputs\":[\"x\",\"u\",\"u\"],\"outputs\":[\"q\"],\"attrs\":{\"axis\":1}}",
         "indices 'u' must be i32, i64 or u8, got f32"},
        {"{\"op\":\"index_copy\",\"inputs\":[\"x\",\"t\",\"u\"],\"outputs\":[\"q\"],\"attrs\":{\"axis\":1}}",
         "indices 't' must be 1-D, got rank 2"},
        {"{\"op\":\"index_copy\",\"inputs\":[\"x\",\"i\",\"r\"],\"outputs\":[\"q\"],\"attrs\":{\"axis\":1}}",
         "updates 'r' must have the dtype of 'x' (f32), got i64"},
        {"{\"op\":\"index_copy\",\"inputs\":[\"x\",\"i\",\"u\"],\"outputs\":[\"q\"],\"attrs\":{\"axis\":0}}",
         "updates 'u' have 2 in dim 0 where the indices give 3"},
        {"{\"op\":\"index_copy\",\"inputs\":[\"x\",\"i\",\"u\"],\"outputs\":[\"q\"],\"attrs\":{\"axis\":2}}",
         "axis 2 is out of range for rank 2"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char json[4096], errs[2048], extra[512];
        snprintf(extra, sizeof extra, "],\"nodes\":[%s],\"outputs\":[\"q\"]}", bad[k].node);
        index_copy_graph(json, sizeof json, "[0,1,2]", "");
        char *cut = strstr(json, "],\"nodes\"");
        ck_assert(cut);
        snprintf(cut, sizeof json - (size_t)(cut - json), "%s", extra);
        ck_assert_msg(graph_of(json, errs, sizeof errs) == NULL, "%zu accepted", k);
        ck_assert_msg(strstr(errs, bad[k].want), "%zu: %s", k, errs);
    }
}
END_TEST

START_TEST(argmax_argmin_take_the_first_extreme) {
    char errs[2048];
    mcir_graph *g = graph_of(
        "{\"mcir\":1,\"inputs\":[],\"weights\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[3,4],"
        "\"value\":[[1,7,7,-2],[4,\"nan\",9,0],[-1,-1,3,3]]}],"
        "\"nodes\":[{\"op\":\"argmax\",\"inputs\":[\"x\"],\"outputs\":[\"am\"]},"
        "{\"op\":\"argmin\",\"inputs\":[\"x\"],\"outputs\":[\"an\"]},"
        "{\"op\":\"argmax\",\"inputs\":[\"x\"],\"outputs\":[\"a0\"],\"attrs\":{\"axis\":0,\"keepdims\":true}}],"
        "\"outputs\":[\"am\",\"an\",\"a0\"]}",
        errs, sizeof errs);
    ck_assert_msg(g, "%s", errs);
    const mcir_tensor *a0 = mcir_graph_find_tensor(g, "a0");
    ck_assert(a0->dtype == MCIR_DTYPE_I64 && a0->rank == 2 && a0->shape[0] == 1 && a0->shape[1] == 4);
    mcir_env *e = run(g, errs, sizeof errs);
    ck_assert_msg(e, "%s", errs);
    ASSERT_VALUES(value(e, g, "am"), 1, 1, 2);   /* ties: first; NaN wins */
    ASSERT_VALUES(value(e, g, "an"), 3, 1, 0);
    ASSERT_VALUES(value(e, g, "a0"), 1, 1, 1, 2);
    mcir_env_free(e);
    mcir_graph_free(g);
}
END_TEST

START_TEST(arange_counts_in_steps) {
    char errs[2048];
    mcir_graph *g = graph_of(
        "{\"mcir\":1,\"inputs\":[],\"nodes\":[{\"op\":\"arange\",\"inputs\":[],\"outputs\":[\"p\"],"
        "\"attrs\":{\"start\":5,\"end\":-2,\"step\":-3}},{\"op\":\"arange\",\"inputs\":[],\"outputs\":[\"q\"],"
        "\"attrs\":{\"end\":4,\"dtype\":\"f16\"}}],\"outputs\":[\"p\",\"q\"]}",
        errs, sizeof errs);
    ck_assert_msg(g, "%s", errs);
    ck_assert_int_eq(mcir_graph_find_tensor(g, "p")->shape[0], 3);
    ck_assert_int_eq(mcir_graph_find_tensor(g, "p")->dtype, MCIR_DTYPE_I64);
    mcir_env *e = run(g, errs, sizeof errs);
    ck_assert_msg(e, "%s", errs);
    ASSERT_VALUES(value(e, g, "p"), 5, 2, -1);
    ASSERT_VALUES(value(e, g, "q"), 0, 1, 2, 3);
    mcir_env_free(e);
    mcir_graph_free(g);
    g = graph_of("{\"mcir\":1,\"inputs\":[],\"nodes\":[{\"name\":\"a\",\"op\":\"arange\",\"inputs\":[],"
                 "\"outputs\":[\"p\"],\"attrs\":{\"start\":3,\"end\":3}}],\"outputs\":[\"p\"]}",
                 errs, sizeof errs);
    ck_assert(g == NULL);
    ck_assert_msg(strstr(errs, "node 'a' (arange): start 3, end 3, step 1 give no values"), "%s", errs);
}
END_TEST

START_TEST(seeded_integer_inputs_are_small_indices) {
    char errs[2048];
    mcir_graph *g = graph_of(
        "{\"mcir\":1,\"inputs\":[{\"name\":\"ids\",\"dtype\":\"i64\",\"shape\":[64]},"
        "{\"name\":\"m\",\"dtype\":\"bool\",\"shape\":[64]}],\"weights\":[{\"name\":\"t\",\"dtype\":\"f32\","
        "\"shape\":[16,2]}],\"nodes\":[{\"op\":\"gather\",\"inputs\":[\"t\",\"ids\"],\"outputs\":[\"y\"]},"
        "{\"op\":\"cast\",\"inputs\":[\"m\"],\"outputs\":[\"mf\"],\"attrs\":{\"to\":\"f32\"}}],"
        "\"outputs\":[\"y\",\"mf\"]}",
        errs, sizeof errs);
    ck_assert_msg(g, "%s", errs);
    mcir_env *e = run(g, errs, sizeof errs);
    ck_assert_msg(e, "%s", errs);
    const float *ids = value(e, g, "ids"), *m = value(e, g, "m");
    int distinct = 0, ones = 0;
    bool seen[16] = {false};
    for (int i = 0; i < 64; i++) {
        ck_assert(ids[i] >= 0 && ids[i] < 16 && ids[i] == floorf(ids[i]));
        if (!seen[(int)ids[i]]) distinct++;
        seen[(int)ids[i]] = true;
        ck_assert(m[i] == 0 || m[i] == 1);
        ones += m[i] == 1;
    }
    ck_assert_int_gt(distinct, 8);
    ck_assert(ones > 10 && ones < 54);
    mcir_env_free(e);
    mcir_graph_free(g);
}
END_TEST

/* ------------------------------------------------- exact, against NumPy */

/* tests/data/ints/exact.json: every integer op on values beyond 2^24, 2^31
 * and 2^53 (wrap-around, divisions by zero and by -1, shifts out of
 * range, casts between every pair), each output byte for byte NumPy's
 * (expected/NAME.npy, from gen_exact.py there). */
START_TEST(integer_ops_are_exact_as_numpy) {
    char errs[4096];
    const char *path = test_path("tests/data/ints/exact.json");
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g = mcir_graph_read_json(path, &d);
    ck_assert_msg(g, "cannot read %s", path);
    mcir_env *e = run(g, errs, sizeof errs);
    ck_assert_msg(e, "%s", errs);
    int beyond_2_53 = 0, wrapped = 0;
    for (int i = 0; i < g->n_outputs; i++) {
        const mcir_tensor *t = g->outputs[i];
        char rel[300];
        snprintf(rel, sizeof rel, "tests/data/ints/expected/%s.npy", t->name);
        const char *npy_path = test_path(rel);
        mcir_npy want;
        ck_assert_msg(mcir_npy_read(npy_path, &want, &d), "cannot read %s", npy_path);
        ck_assert_msg(want.dtype == t->dtype && mcir_tensor_bytes(t) > 0, "%s: dtype %s, want %s",
                      t->name, mcir_dtype_name(t->dtype), mcir_dtype_name(want.dtype));
        size_t bytes = (size_t)mcir_tensor_bytes(t);
        unsigned char *got = malloc(bytes);
        ck_assert(mcir_env_get_raw(e, t, got));
        for (int64_t k = 0; k < mcir_tensor_numel(t); k++) {
            int64_t gv = mcir_value_get_int(t->dtype, got, k), wv = mcir_value_get_int(want.dtype, want.data, k);
            if (mcir_dtype_is_float(t->dtype)) {
                double gf = mcir_value_get(t->dtype, got, k), wf = mcir_value_get(want.dtype, want.data, k);
                ck_assert_msg(gf == wf, "%s[%lld]: %.17g, NumPy %.17g", t->name, (long long)k, gf, wf);
                continue;
            }
            ck_assert_msg(gv == wv, "%s[%lld]: %lld, NumPy %lld", t->name, (long long)k, (long long)gv,
                          (long long)wv);
            beyond_2_53 += gv > (INT64_C(1) << 53) || gv < -(INT64_C(1) << 53);
        }
        ck_assert_msg(memcmp(got, want.data, bytes) == 0, "%s: bytes differ from NumPy's", t->name);
        wrapped += strstr(t->name, "mul_") || strstr(t->name, "add_") || strstr(t->name, "cumsum");
        free(got);
        mcir_npy_free(&want);
    }
    ck_assert_int_ge(g->n_outputs, 90);
    ck_assert_int_gt(beyond_2_53, 40);   /* the data does reach past 2^53 */
    ck_assert_int_ge(wrapped, 8);
    mcir_env_free(e);
    mcir_graph_free(g);
}
END_TEST

/* The measurements (mcirc --run --device cpu, i64): each was
 * rounded through f32 before. */
START_TEST(values_past_2_24_stay_exact) {
    char errs[2048];
    mcir_graph *g = graph_of(
        "{\"mcir\":1,\"inputs\":[{\"name\":\"x\",\"dtype\":\"i64\",\"shape\":[2]}],"
        "\"weights\":[{\"name\":\"k\",\"dtype\":\"i64\",\"shape\":[],\"value\":3}],"
        "\"nodes\":[{\"op\":\"add\",\"inputs\":[\"x\",\"k\"],\"outputs\":[\"s\"]},"
        "{\"op\":\"max\",\"inputs\":[\"x\",\"x\"],\"outputs\":[\"m\"]},"
        "{\"op\":\"mul\",\"inputs\":[\"x\",\"k\"],\"outputs\":[\"p\"]},"
        "{\"op\":\"cast\",\"inputs\":[\"x\"],\"outputs\":[\"c\"],\"attrs\":{\"to\":\"i32\"}}],"
        "\"outputs\":[\"s\",\"m\",\"p\",\"c\"]}",
        errs, sizeof errs);
    ck_assert_msg(g, "%s", errs);
    mcir_env *e = mcir_env_new(g, 0);
    const int64_t x[2] = {(INT64_C(1) << 40) + 1, 16777217};
    mcir_env_set_int(e, g->inputs[0], x);
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_interp_run(g, e, &d));
    const int64_t *s = mcir_env_get_int(e, mcir_graph_find_tensor(g, "s")),
                  *m = mcir_env_get_int(e, mcir_graph_find_tensor(g, "m")),
                  *p = mcir_env_get_int(e, mcir_graph_find_tensor(g, "p")),
                  *c = mcir_env_get_int(e, mcir_graph_find_tensor(g, "c"));
    ck_assert(s[0] == INT64_C(1099511627780) && s[1] == 16777220);
    ck_assert(m[0] == x[0] && m[1] == 16777217);
    ck_assert(p[0] == INT64_C(3298534883331) && p[1] == 50331651);
    ck_assert(c[0] == 1 && c[1] == 16777217);   /* wraps modulo 2^32 */
    /* the f32 view is for summaries only: exact values come from _get_int / _get_raw */
    ck_assert(mcir_env_get(e, mcir_graph_find_tensor(g, "m"))[1] == 16777216.0f);
    int64_t raw[2];
    ck_assert(mcir_env_get_raw(e, mcir_graph_find_tensor(g, "s"), raw));
    ck_assert(raw[0] == INT64_C(1099511627780));
    mcir_env_free(e);
    mcir_graph_free(g);
}
END_TEST

START_TEST(bitwise_ops_refuse_floats_and_shifts_bools) {
    char errs[2048];
    static const char *const bad[][3] = {
        {"bitwise_and", "f32", "takes integer or bool tensors, but 'x' is f32"},
        {"left_shift", "bool", "takes integer tensors, but 'x' is bool"},
        {"right_shift", "f16", "takes integer tensors, but 'x' is f16"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"mcir\":1,\"inputs\":[{\"name\":\"x\",\"dtype\":\"%s\",\"shape\":[2]}],"
                 "\"nodes\":[{\"name\":\"b\",\"op\":\"%s\",\"inputs\":[\"x\",\"x\"],\"outputs\":[\"y\"]}],"
                 "\"outputs\":[\"y\"]}", bad[i][1], bad[i][0]);
        mcir_graph *g = graph_of(json, errs, sizeof errs);
        ck_assert(g == NULL);
        ck_assert_msg(strstr(errs, bad[i][2]), "%s", errs);
    }
    mcir_graph *g = graph_of(
        "{\"mcir\":1,\"inputs\":[{\"name\":\"x\",\"dtype\":\"bool\",\"shape\":[2]}],"
        "\"nodes\":[{\"name\":\"c\",\"op\":\"cumsum\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
        "\"attrs\":{\"axis\":0}}],\"outputs\":[\"y\"]}", errs, sizeof errs);
    ck_assert(g == NULL);
    ck_assert_msg(strstr(errs, "node 'c' (cumsum): takes numeric tensors, but 'x' is bool"), "%s", errs);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ints");
    TCase *tv = tcase_create("values");
    tcase_add_test(tv, every_dtype_round_trips_through_f32);
    tcase_add_test(tv, float_to_integer_truncates_and_saturates);
    tcase_add_test(tv, one_comparison_for_every_caller);
    tcase_add_test(tv, integer_weights_take_integral_values_in_range);
    tcase_add_test(tv, float_only_ops_refuse_integers);
    suite_add_tcase(s, tv);
    TCase *to = tcase_create("ops");
    tcase_add_test(to, casts_truncate_saturate_and_wrap);
    tcase_add_test(to, comparisons_and_where_broadcast);
    tcase_add_test(to, gather_takes_rows_and_columns);
    tcase_add_test(to, gather_index_out_of_range_is_an_error);
    tcase_add_test(to, index_copy_writes_rows_by_index);
    tcase_add_test(to, index_copy_checks_its_operands);
    tcase_add_test(to, argmax_argmin_take_the_first_extreme);
    tcase_add_test(to, arange_counts_in_steps);
    tcase_add_test(to, seeded_integer_inputs_are_small_indices);
    tcase_add_test(to, integer_ops_are_exact_as_numpy);
    tcase_add_test(to, values_past_2_24_stay_exact);
    tcase_add_test(to, bitwise_ops_refuse_floats_and_shifts_bools);
    suite_add_tcase(s, to);
    return test_main(s);
}
