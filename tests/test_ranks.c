/*
 * test_ranks.c — graphs with ranks (docs/graph-format.md "Ranks and
 * collectives"): `ranks`, `shard` and the collectives parsed, inferred and
 * checked; the reference interpreter running every rank in lockstep, each
 * collective against values computed here from the whole tensors; the
 * sharded MLP against the same MLP on one rank; the mcir writer's round
 * trip; and mcirc by its contract (--run --device cpu and emu, --verify
 * per rank, per-rank output files, --graphs refused with exit 3, errors at
 * path:line:col). The emulated runs' own checks: test_emu_device.
 */
#define _GNU_SOURCE
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "mcir/mcir.h"

/* The sanitizer build leaves out the emulated runs of the --tp rules that
 * its other tests do not add to (the emulator's checks run them in the
 * normal build; ASan's share is the host code, which test_emu_device
 * runs there): CI time. */
#ifdef MCIR_SANITIZED_BUILD
#define TP_EMU_RUNS 0
#else
#define TP_EMU_RUNS 1
#endif

/* Reads a graph from text; on failure the diagnostics are in *errs. */
static mcir_graph *read_graph(const char *text, char **errs) {
    size_t len = 0;
    char *buf = NULL;
    FILE *f = open_memstream(&buf, &len);
    mcir_diag d = mcir_diag_to(f);
    mcir_graph *g = mcir_graph_read_json_string(text, "g.json", &d);
    fclose(f);
    if (errs) *errs = buf;
    else free(buf);
    return g;
}

static void expect_error(const char *text, const char *want) {
    char *errs = NULL;
    mcir_graph *g = read_graph(text, &errs);
    ck_assert_msg(g == NULL, "accepted a graph that should fail with '%s'", want);
    ck_assert_msg(strstr(errs, want) != NULL, "wanted '%s' in:\n%s", want, errs);
    ck_assert_msg(strncmp(errs, "g.json:", 7) == 0, "no position: %s", errs);
    free(errs);
}

static mcir_tensor *tensor(const mcir_graph *g, const char *name) {
    mcir_tensor *t = mcir_graph_find_tensor(g, name);
    ck_assert_ptr_nonnull(t);
    return t;
}

/* One input x (shape, dtype, optional shard axis), one node, output y. */
static char *one_node(int ranks, const char *dtype, const char *shape, const char *shard,
                      const char *op, const char *attrs) {
    char *s = NULL;
    ck_assert_int_gt(asprintf(&s,
                              "{\"mcir\": 1, \"ranks\": %d, \"inputs\": [{\"name\": \"x\", \"dtype\": \"%s\", "
                              "\"shape\": %s%s}], \"nodes\": [{\"op\": \"%s\", \"inputs\": [\"x\"], "
                              "\"outputs\": [\"y\"]%s%s}], \"outputs\": [\"y\"]}",
                              ranks, dtype, shape, shard ? shard : "", op, attrs ? ", \"attrs\": " : "",
                              attrs ? attrs : ""),
                     0);
    return s;
}

START_TEST(test_parse_and_infer) {
    char *errs = NULL;
    mcir_graph *g = read_graph(
        "{\"mcir\": 1, \"ranks\": 2,"
        " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f16\", \"shape\": [8, 1024, 4096]}],"
        " \"weights\": [{\"name\": \"w_up\", \"dtype\": \"f16\", \"shape\": [4096, 11008], \"shard\": {\"axis\": 1}},"
        "   {\"name\": \"w_down\", \"dtype\": \"f16\", \"shape\": [11008, 4096], \"shard\": {\"axis\": -2}}],"
        " \"nodes\": [{\"op\": \"matmul\", \"inputs\": [\"x\", \"w_up\"], \"outputs\": [\"h\"]},"
        "   {\"op\": \"gelu\", \"inputs\": [\"h\"], \"outputs\": [\"a\"]},"
        "   {\"op\": \"matmul\", \"inputs\": [\"a\", \"w_down\"], \"outputs\": [\"p\"]},"
        "   {\"op\": \"all_reduce\", \"inputs\": [\"p\"], \"outputs\": [\"y\"]},"
        "   {\"op\": \"all_gather\", \"inputs\": [\"a\"], \"outputs\": [\"ag\"], \"attrs\": {\"axis\": -1}},"
        "   {\"op\": \"reduce_scatter\", \"inputs\": [\"p\"], \"outputs\": [\"rs\"], \"attrs\": {\"axis\": 1, \"op\": \"max\"}}],"
        " \"outputs\": [\"y\", \"ag\", \"rs\"]}",
        &errs);
    ck_assert_msg(g != NULL, "%s", errs);
    free(errs);
    ck_assert_int_eq(g->ranks, 2);
    mcir_tensor *up = tensor(g, "w_up"), *down = tensor(g, "w_down");
    ck_assert_int_eq(up->shard_axis, 1);
    ck_assert_int_eq(up->shard_parts, 2);
    ck_assert_int_eq(up->shape[1], 5504);   /* each rank's part */
    ck_assert_int_eq(down->shard_axis, 0);
    ck_assert_int_eq(down->shape[0], 5504);
    ck_assert_int_eq(mcir_tensor_whole_numel(up), 4096LL * 11008);
    ck_assert_int_eq(tensor(g, "x")->shard_axis, -1);
    ck_assert_int_eq(tensor(g, "h")->shape[2], 5504);   /* inferred shapes are each rank's own */
    ck_assert_int_eq(tensor(g, "y")->shape[2], 4096);
    ck_assert_int_eq(tensor(g, "ag")->shape[2], 11008);
    ck_assert_int_eq(tensor(g, "rs")->shape[1], 512);
    ck_assert(mcir_op_desc_of(MCIR_OP_ALL_REDUCE)->flags & MCIR_OPF_COLLECTIVE);
    ck_assert(!(mcir_op_desc_of(MCIR_OP_ALL_REDUCE)->flags & MCIR_OPF_PURE));   /* never recomputed */
    mcir_graph_free(g);
}
END_TEST

START_TEST(test_errors) {
    expect_error("{\"mcir\": 1, \"ranks\": 0, \"inputs\": [], \"nodes\": [], \"outputs\": []}",
                 "'ranks' must be from 1 to 1024");
    expect_error("{\"mcir\": 1, \"ranks\": \"2\", \"inputs\": [], \"nodes\": [], \"outputs\": []}",
                 "'ranks' must be an integer");
    char *s = one_node(4, "f32", "[2, 8, 30]", ", \"shard\": {\"axis\": 2}", "relu", NULL);
    expect_error(s, "input 'x': shard axis 2 (extent 30) does not divide into 4 equal parts");
    free(s);
    s = one_node(2, "f32", "[2, 8]", ", \"shard\": {\"axis\": 2}", "relu", NULL);
    expect_error(s, "shard axis 2 is out of range for shape [2, 8]");
    free(s);
    s = one_node(2, "f32", "[2, 8]", ", \"shard\": {\"axis\": 0, \"blocks\": 2}", "relu", NULL);
    expect_error(s, "blocks");
    free(s);
    s = one_node(2, "f32", "[2, 8]", ", \"shard\": {\"axis\": 1, \"blocks\": 3}", "relu", NULL);
    expect_error(s, "shard axis 1 (extent 8) does not divide into 3 blocks of 2 equal parts");
    free(s);
    s = one_node(2, "f32", "[2, 8]", ", \"shard\": {\"axis\": 1, \"blocks\": 0}", "relu", NULL);
    expect_error(s, "shard blocks must be an integer from 1 to 8");
    free(s);
    s = one_node(2, "f32", "[2, 8]", ", \"shard\": 1", "relu", NULL);
    expect_error(s, "'shard' must be an object");
    free(s);
    s = one_node(2, "f32", "[2, 8]", NULL, "all_gather", "{\"axis\": 5}");
    expect_error(s, "node 'all_gather' (all_gather): axis 5 is out of range");
    free(s);
    s = one_node(2, "f32", "[3, 5]", NULL, "reduce_scatter", "{\"axis\": 1}");
    expect_error(s, "axis 1 of 'x' [3, 5] (extent 5) does not divide into 2 equal parts");
    free(s);
    s = one_node(2, "f32", "[4, 4]", NULL, "all_gather", NULL);
    expect_error(s, "axis");
    free(s);
    s = one_node(2, "f32", "[4, 4]", NULL, "all_reduce", "{\"op\": \"prod\"}");
    expect_error(s, "allowed values are");
    free(s);
}
END_TEST

/* The whole tensor's seeded values: the same tensor, unsharded. */
static float *whole_values(const mcir_tensor *t, uint64_t seed) {
    mcir_tensor w = *t;
    mcir_tensor_whole_shape(t, w.shape);
    w.shard_axis = -1;
    w.shard_parts = 1;
    float *v = malloc(sizeof(float) * (size_t)mcir_tensor_numel(&w));
    ck_assert_ptr_nonnull(v);
    mcir_fill_seeded(&w, seed, v);
    return v;
}

static int64_t numel(const mcir_tensor *t) { return mcir_tensor_numel(t); }

START_TEST(test_collectives_in_lockstep) {
    /* all_gather of a sharded input rebuilds the whole input on every rank */
    char *s = one_node(4, "f32", "[6, 8, 5]", ", \"shard\": {\"axis\": 1}", "all_gather", "{\"axis\": 1}");
    char *errs = NULL;
    mcir_graph *g = read_graph(s, &errs);
    ck_assert_msg(g, "%s", errs);
    free(errs);
    free(s);
    const mcir_tensor *x = tensor(g, "x"), *y = tensor(g, "y");
    ck_assert_int_eq(x->shape[1], 2);
    ck_assert_int_eq(y->shape[1], 8);
    mcir_env *e = mcir_env_new(g, 7);
    ck_assert_int_eq(mcir_env_ranks(e), 4);
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_interp_run(g, e, &d));
    float *whole = whole_values(x, 7);
    double amax = 0;
    for (int r = 0; r < 4; r++) {
        mcir_env_select_rank(e, r);
        const float *v = mcir_env_get(e, y), *xr = mcir_env_get(e, x);
        for (int64_t i = 0; i < numel(y); i++) {
            ck_assert_float_eq(v[i], whole[i]);
            amax = fmax(amax, fabs(v[i]));
        }
        /* rank r's x is the part r along axis 1: whole[a][2r + b][c] */
        for (int a = 0; a < 6; a++)
            for (int b = 0; b < 2; b++)
                for (int c = 0; c < 5; c++)
                    ck_assert_float_eq(xr[(a * 2 + b) * 5 + c], whole[(a * 8 + 2 * r + b) * 5 + c]);
    }
    ck_assert(amax > 0.5);   /* varied, finite values */
    free(whole);
    mcir_env_free(e);
    mcir_graph_free(g);

    /* all_reduce max / min / sum of a sharded input: the parts combined */
    static const char *const ops[] = {"max", "min", "sum"};
    for (int o = 0; o < 3; o++) {
        char attrs[64];
        snprintf(attrs, sizeof attrs, "{\"op\": \"%s\"}", ops[o]);
        s = one_node(2, "f32", "[4, 5]", ", \"shard\": {\"axis\": 0}", "all_reduce", attrs);
        g = read_graph(s, NULL);
        free(s);
        ck_assert_ptr_nonnull(g);
        x = tensor(g, "x");
        y = tensor(g, "y");
        e = mcir_env_new(g, 3);
        ck_assert(mcir_interp_run(g, e, &d));
        whole = whole_values(x, 3);
        for (int r = 0; r < 2; r++) {
            mcir_env_select_rank(e, r);
            const float *v = mcir_env_get(e, y);
            for (int i = 0; i < 10; i++) {
                float a = whole[i], b = whole[10 + i];
                float want = o == 0 ? fmaxf(a, b) : o == 1 ? fminf(a, b) : a + b;
                ck_assert_float_eq_tol(v[i], want, 1e-7);
            }
        }
        free(whole);
        mcir_env_free(e);
        mcir_graph_free(g);
    }

    /* integers: an i32 sum over 3 ranks, exact */
    s = one_node(3, "i32", "[6, 2]", ", \"shard\": {\"axis\": 0}", "all_reduce", NULL);
    g = read_graph(s, NULL);
    free(s);
    ck_assert_ptr_nonnull(g);
    x = tensor(g, "x");
    y = tensor(g, "y");
    e = mcir_env_new(g, 5);
    ck_assert(mcir_interp_run(g, e, &d));
    whole = whole_values(x, 5);
    mcir_env_select_rank(e, 2);
    const int64_t *iv = mcir_env_get_int(e, y);
    ck_assert_ptr_nonnull(iv);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(iv[i], (int64_t)(whole[i] + whole[4 + i] + whole[8 + i]));
    free(whole);
    mcir_env_free(e);
    mcir_graph_free(g);
}
END_TEST

/* reduce_scatter of an f16 tensor split along its columns: rank r gets
 * rows part r of the sum over the ranks of tanh of their columns (each
 * rank's tanh rounded to f16, the sum rounded once). The input is set
 * whole through the group (each rank takes its columns). */
START_TEST(test_reduce_scatter_and_group_inputs) {
    mcir_graph *g = mcir_graph_read_json(cli_src("tests/data/ranks/scatter.json"), NULL);
    ck_assert_ptr_nonnull(g);
    const mcir_tensor *x = tensor(g, "x"), *y = tensor(g, "y");
    ck_assert_int_eq(y->shape[0], 4);
    ck_assert_int_eq(y->shape[1], 3);
    float xv[48];
    for (int i = 0; i < 48; i++) xv[i] = (float)((i * 37) % 23 - 11) / 8.0f;
    mcir_env *e = mcir_env_new(g, 1);
    mcir_env_set(e, x, xv);
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_interp_run(g, e, &d));
    for (int r = 0; r < 2; r++) {
        mcir_env_select_rank(e, r);
        const float *v = mcir_env_get(e, y);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) {
                int row = 4 * r + i;
                float a = mcir_dtype_round(MCIR_DTYPE_F16, tanhf(mcir_dtype_round(MCIR_DTYPE_F16, xv[row * 6 + j])));
                float b = mcir_dtype_round(MCIR_DTYPE_F16, tanhf(mcir_dtype_round(MCIR_DTYPE_F16, xv[row * 6 + 3 + j])));
                ck_assert_float_eq_tol(v[i * 3 + j], mcir_dtype_round(MCIR_DTYPE_F16, a + b), 1e-3);
            }
    }
    mcir_env_free(e);
    mcir_graph_free(g);
}
END_TEST

/* The MLP with its weights split column- then row-parallel and one
 * all_reduce equals the MLP on one rank (weights seeded by name, the whole
 * tensor's values), on every rank. */
START_TEST(test_sharded_mlp_matches_one_rank) {
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g2 = mcir_graph_read_json(cli_src("tests/data/ranks/mlp.json"), &d);
    mcir_graph *g1 = mcir_graph_read_json(cli_src("tests/data/ranks/mlp_one_rank.json"), &d);
    ck_assert(g2 && g1);
    mcir_env *e2 = mcir_env_new(g2, 11), *e1 = mcir_env_new(g1, 11);
    ck_assert(mcir_interp_run(g2, e2, &d) && mcir_interp_run(g1, e1, &d));
    const mcir_tensor *y2 = tensor(g2, "y"), *y1 = tensor(g1, "y");
    for (int r = 0; r < 2; r++) {
        mcir_env_select_rank(e2, r);
        mcir_compare_result c;
        ck_assert(mcir_env_compare(e2, y2, e1, y1, &c));
        ck_assert_msg(c.max_abs < 1e-5, "rank %d: max abs err %g", r, c.max_abs);
    }
    const float *v = mcir_env_get(e1, y1);
    double amax = 0;
    for (int64_t i = 0; i < numel(y1); i++) amax = fmax(amax, fabs(v[i]));
    ck_assert(amax > 0.05 && isfinite(amax));
    mcir_env_free(e1);
    mcir_env_free(e2);
    mcir_graph_free(g1);
    mcir_graph_free(g2);
}
END_TEST

/* One rank of an outside group (mcir_env_new_member, what the Python
 * package runs under torch.distributed): each rank of the sharded MLP run
 * alone, its collective handed to a group function that sees this rank's
 * input (checked against the lockstep run's) and answers with every
 * rank's, gives that rank's y of the lockstep run exactly; a failing group
 * is an error naming the node. */
typedef struct fake_group {
    const float *p[2];   /* each rank's all_reduce input, from the lockstep run */
    int64_t count;
    int calls;
    bool fail;
} fake_group;

static bool fake_collective(void *ctx, const mcir_node *n, const void *in, void *out, mcir_diag *d) {
    (void)d;
    fake_group *fg = ctx;
    fg->calls++;
    if (fg->fail) return false;
    ck_assert_int_eq(n->op, MCIR_OP_ALL_REDUCE);
    ck_assert_int_eq(mcir_tensor_numel(n->inputs[0]), fg->count);
    const void *ins[2] = {fg->p[0], fg->p[1]};
    float *outs0 = malloc(sizeof(float) * (size_t)fg->count), *outs1 = malloc(sizeof(float) * (size_t)fg->count);
    void *outs[2] = {outs0, outs1};
    mcir_collective_run(n, 2, ins, outs);
    memcpy(out, outs0, sizeof(float) * (size_t)fg->count);
    bool mine = !memcmp(in, fg->p[0], sizeof(float) * (size_t)fg->count) ||
                !memcmp(in, fg->p[1], sizeof(float) * (size_t)fg->count);
    free(outs0);
    free(outs1);
    return mine;
}

START_TEST(test_member_of_an_outside_group) {
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g = mcir_graph_read_json(cli_src("tests/data/ranks/mlp.json"), &d);
    ck_assert(g);
    mcir_env *grp = mcir_env_new(g, 5);
    mcir_env_keep_all(grp, true);
    ck_assert(mcir_interp_run(g, grp, &d));
    const mcir_tensor *p = tensor(g, "p"), *y = tensor(g, "y");
    fake_group fg = {.count = numel(p)};
    float *parts[2];
    for (int r = 0; r < 2; r++) {
        mcir_env_select_rank(grp, r);
        parts[r] = malloc(sizeof(float) * (size_t)fg.count);
        memcpy(parts[r], mcir_env_get(grp, p), sizeof(float) * (size_t)fg.count);
        fg.p[r] = parts[r];
    }
    ck_assert_msg(memcmp(parts[0], parts[1], sizeof(float) * (size_t)fg.count) != 0, "the ranks' partial sums agree");
    for (int r = 0; r < 2; r++) {
        mcir_group group = {r, fake_collective, &fg};
        mcir_env *e = mcir_env_new_member(g, 5, &group);
        fg.calls = 0;
        ck_assert(mcir_interp_run(g, e, &d));
        ck_assert_int_eq(fg.calls, 1);
        mcir_env_select_rank(grp, r);
        mcir_compare_result c;
        ck_assert(mcir_env_compare(e, y, grp, y, &c));
        ck_assert_msg(c.max_abs == 0, "rank %d: max abs err %g", r, c.max_abs);
        mcir_env_free(e);
    }
    /* a group that fails: an error naming the node, the run false */
    fg.fail = true;
    mcir_group group = {1, fake_collective, &fg};
    mcir_env *e = mcir_env_new_member(g, 5, &group);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mcir_diag df = mcir_diag_to(f);
    ck_assert(!mcir_interp_run(g, e, &df));
    fclose(f);
    ck_assert_msg(strstr(buf, "node 'all_reduce' (all_reduce): the group's collective failed") ||
                  strstr(buf, "(all_reduce): the group's collective failed"), "%s", buf);
    free(buf);
    mcir_env_free(e);
    free(parts[0]);
    free(parts[1]);
    mcir_env_free(grp);
    mcir_graph_free(g);
}
END_TEST

/* A sharded weight's data ("value") is the whole tensor; each rank takes
 * its part. The writer gives back the whole shape, the shard and the data. */
START_TEST(test_weight_data_parts_and_round_trip) {
    const char *text =
        "{\"mcir\": 1, \"ranks\": 2, \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [2]}],"
        " \"weights\": [{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [2, 4], \"shard\": {\"axis\": 1},"
        "   \"value\": [[1, 2, 3, 4], [5, 6, 7, 8]]}],"
        " \"nodes\": [{\"op\": \"scale\", \"inputs\": [\"w\"], \"outputs\": [\"y\"], \"attrs\": {\"value\": 2.0}}],"
        " \"outputs\": [\"y\"]}";
    char *errs = NULL;
    mcir_graph *g = read_graph(text, &errs);
    ck_assert_msg(g, "%s", errs);
    free(errs);
    mcir_env *e = mcir_env_new(g, 0);
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_interp_run(g, e, &d));
    static const float want[2][4] = {{2, 4, 10, 12}, {6, 8, 14, 16}};
    for (int r = 0; r < 2; r++) {
        mcir_env_select_rank(e, r);
        const float *v = mcir_env_get(e, tensor(g, "y"));
        for (int i = 0; i < 4; i++) ck_assert_float_eq(v[i], want[r][i]);
    }
    mcir_env_free(e);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    ck_assert(mcir_graph_write_json(g, f));
    fclose(f);
    ck_assert_msg(strstr(out, "\"ranks\": 2"), "%s", out);
    ck_assert_msg(strstr(out, "\"shard\": {\"axis\": 1}"), "%s", out);
    mcir_graph *back = read_graph(out, &errs);
    ck_assert_msg(back, "%s\n%s", errs, out);
    free(errs);
    free(out);
    ck_assert_int_eq(back->ranks, 2);
    const mcir_tensor *w = tensor(back, "w");
    ck_assert_int_eq(w->shard_axis, 1);
    ck_assert_int_eq(w->shape[1], 2);
    ck_assert(memcmp(w->data, tensor(g, "w")->data, 32) == 0);
    mcir_graph_free(back);
    mcir_graph_free(g);

    /* blocks: the axis is 3 blocks of 2 columns; rank r holds column r of each */
    g = read_graph("{\"mcir\": 1, \"ranks\": 2, \"inputs\": [],"
                   " \"weights\": [{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [1, 6],"
                   "   \"shard\": {\"axis\": 1, \"blocks\": 3}, \"value\": [[1, 2, 3, 4, 5, 6]]}],"
                   " \"nodes\": [{\"op\": \"neg\", \"inputs\": [\"w\"], \"outputs\": [\"y\"]}],"
                   " \"outputs\": [\"y\"]}", &errs);
    ck_assert_msg(g, "%s", errs);
    free(errs);
    e = mcir_env_new(g, 0);
    ck_assert(mcir_interp_run(g, e, &d));
    static const float blocked[2][3] = {{-1, -3, -5}, {-2, -4, -6}};
    for (int r = 0; r < 2; r++) {
        mcir_env_select_rank(e, r);
        const float *v = mcir_env_get(e, tensor(g, "y"));
        for (int i = 0; i < 3; i++) ck_assert_float_eq(v[i], blocked[r][i]);
    }
    mcir_env_free(e);
    mcir_graph_free(g);
}
END_TEST

/* With one rank a collective is the identity. */
START_TEST(test_one_rank_identity) {
    char *s = one_node(1, "f32", "[4, 6]", ", \"shard\": {\"axis\": 0}", "reduce_scatter", "{\"axis\": 1}");
    mcir_graph *g = read_graph(s, NULL);
    free(s);
    ck_assert_ptr_nonnull(g);
    mcir_env *e = mcir_env_new(g, 2);
    ck_assert_int_eq(mcir_env_ranks(e), 1);
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_interp_run(g, e, &d));
    const float *x = mcir_env_get(e, tensor(g, "x")), *y = mcir_env_get(e, tensor(g, "y"));
    ck_assert(memcmp(x, y, 24 * sizeof(float)) == 0);
    mcir_env_free(e);
    mcir_graph_free(g);
}
END_TEST

/* mcirc by its contract. */
START_TEST(test_cli_runs_every_rank) {
    char *dir = cli_tempdir();
    const char *mlp = cli_src("tests/data/ranks/mlp.json");
    const char *run[] = {mlp, "--run", "--device", "cpu", "--verify", "-o", dir, NULL};
    cli_result r = cli_run(run);
    ck_assert_msg(r.status == 0, "%s%s", r.out, r.err);
    ck_assert_msg(strstr(r.out, "verify   y (rank 0): max abs err"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "verify   y (rank 1): max abs err"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "ranks    2, run in lockstep"), "%s", r.out);
    char path[1200];
    snprintf(path, sizeof path, "%s/y.npy", dir);   /* all_reduce: every rank's y is the same */
    ck_assert(cli_file_exists(path));
    cli_result_free(&r);
    cli_remove_tree(dir);
    free(dir);

    dir = cli_tempdir();
    const char *scatter[] = {cli_src("tests/data/ranks/scatter.json"), "--run", "--device", "cpu", "-o", dir, NULL};
    r = cli_run(scatter);
    ck_assert_msg(r.status == 0, "%s%s", r.out, r.err);
    ck_assert_msg(strstr(r.out, "output   y (rank 1) f16 [4, 3]"), "%s", r.out);
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/y.rank%d.npy", dir, k);
        ck_assert_msg(cli_file_exists(path), "%s missing", path);
    }
    snprintf(path, sizeof path, "%s/y.npy", dir);
    ck_assert(!cli_file_exists(path));
    cli_result_free(&r);
    cli_remove_tree(dir);
    free(dir);

    /* the plan names the collective; a device run is refused (exit 3) */
    const char *plan[] = {mlp, "--emit", "plan", NULL};
    r = cli_run(plan);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, "\"template\": \"collective\"") && strstr(r.out, "ncclAllReduce sum f32"), "%s",
                  r.out);
    cli_result_free(&r);
    /* the emulated device runs every rank: its outputs against the original's, per rank */
    const char *emu[] = {cli_src("tests/data/ranks/gather.json"), "--run", "--device", "emu", "--verify", NULL};
    r = cli_run(emu);
    ck_assert_msg(r.status == 0, "%s%s", r.out, r.err);
    ck_assert_msg(strstr(r.out, "verify   y (emu vs the original graph) (rank 3): max abs err"), "%s", r.out);
    cli_result_free(&r);
    const char *graphs[] = {mlp, "--run", "--device", "emu", "--graphs", NULL};
    r = cli_run(graphs);
    ck_assert_int_eq(r.status, 3);
    ck_assert_msg(strstr(r.err, "the graph has 2 ranks: CUDA graphs and --sync are not built"), "%s", r.err);
    cli_result_free(&r);

    const char *bad[] = {cli_src("tests/data/ranks/bad_shard.json"), NULL};
    r = cli_run(bad);
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "bad_shard.json:3:85: error: input 'x': shard axis 2 (extent 30) does not divide"),
                  "%s", r.err);
    ck_assert_str_eq(r.out, "");
    cli_result_free(&r);
}
END_TEST

/* --tp N: every example verifies at 2 and 4 ranks (each rank's outputs
 * against the one-rank graph); the Megatron figure of two all_reduces per
 * transformer block; the fused QKV weight split by blocks; the trace's
 * records; a mutant that adds the row-parallel bias to every rank's
 * partial sums is caught by --verify. */
static int count(const char *hay, const char *needle) {
    int k = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) k++;
    return k;
}

/* Whether a trace (JSON lines) has a record of rule applied. */
static bool applied_line(const char *trace, const char *rule) {
    char want[128];
    snprintf(want, sizeof want, "\"rule\":\"%s\"", rule);
    for (const char *p = trace; (p = strstr(p, want)); p++) {
        const char *end = strchr(p, '\n');
        const char *dec = strstr(p, "\"decision\":\"applied\"");
        if (dec && (!end || dec < end)) return true;
    }
    return false;
}

START_TEST(test_tp_examples_verify) {
    static const char *const examples[] = {"mlp_tiny", "gpt2_block", "llama_block", "bert_layer", "gpt2_decode",
                                           "gpt2_lm", "attention_f16", "cross_attention", "layernorm_bf16",
                                           "ops_misc", "resnet_small"};
    for (size_t e = 0; e < sizeof examples / sizeof *examples; e++)
        for (int n = 2; n <= 4; n += 2) {
            char path[256], tp[8];
            snprintf(path, sizeof path, "examples/%s/graph.json", examples[e]);
            snprintf(tp, sizeof tp, "%d", n);
            const char *args[] = {cli_src(path), "--tp", tp, "--verify", NULL};
            cli_result r = cli_run(args);
            ck_assert_msg(r.status == 0, "%s --tp %d: %s%s", examples[e], n, r.out, r.err);
            char want[64];
            snprintf(want, sizeof want, "(rank %d): max abs err", n - 1);
            ck_assert_msg(strstr(r.out, want) && !strstr(r.out, "FAIL"), "%s --tp %d: %s", examples[e], n, r.out);
            cli_result_free(&r);
        }
    /* a blocked product taken whole (its bias is read whole elsewhere):
     * gathered, then reordered block-major; verified on the emulator */
    const char *blk[] = {cli_src("tests/data/ranks/tp_blocked_gather.json"), "--tp", "2", "--run", "--device", "emu",
                         "--verify", "--emit", "trace", NULL};
    cli_result rb = cli_run(blk);
    ck_assert_msg(rb.status == 0 && applied_line(rb.out, "tp_gather") && applied_line(rb.out, "tp_column_parallel"),
                  "%.2000s%s", rb.out, rb.err);
    cli_result_free(&rb);
    const char *blkv[] = {cli_src("tests/data/ranks/tp_blocked_gather.json"), "--tp", "2", "--run", "--device", "emu",
                          "--verify", NULL};
    rb = cli_run(blkv);
    ck_assert_msg(rb.status == 0 && strstr(rb.out, "verify   y (emu vs the original graph) (rank 1)") &&
                      !strstr(rb.out, "FAIL"), "%s%s", rb.out, rb.err);
    cli_result_free(&rb);
    /* two all_reduces per block, no gathers */
    static const char *const blocks[] = {"gpt2_block", "llama_block", "bert_layer"};
    for (int b = 0; b < 3; b++) {
        char path[256];
        snprintf(path, sizeof path, "examples/%s/graph.json", blocks[b]);
        const char *args[] = {cli_src(path), "--tp", "2", "--emit", "plan", NULL};
        cli_result r = cli_run(args);
        ck_assert_int_eq(r.status, 0);
        ck_assert_msg(count(r.out, "ncclAllReduce") == 2 && count(r.out, "ncclAllGather") == 0, "%s: %.2000s", blocks[b],
                      r.out);
        cli_result_free(&r);
    }
    const char *mcir[] = {cli_src("examples/gpt2_block/graph.json"), "--tp", "2", "--no-rewrite", "--emit", "mcir", NULL};
    cli_result r = cli_run(mcir);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, "\"ranks\": 2") && count(r.out, "\"shard\": {\"axis\": 1, \"blocks\": 3}") == 1 &&
                      count(r.out, "\"shard\": {\"axis\": 0, \"blocks\": 3}") == 1,
                  "%.2000s", r.out);
    cli_result_free(&r);
    const char *trace[] = {cli_src("examples/llama_block/graph.json"), "--tp", "4", "--emit", "trace", NULL};
    r = cli_run(trace);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(count(r.out, "\"rule\":\"tp_row_parallel\"") == 2 &&
                      strstr(r.out, "\"check\":\"weight_rows_divide\"") &&
                      strstr(r.out, "\"property\":\"tensor_parallel\""), "%.2000s", r.out);
    cli_result_free(&r);
    /* the summary's per-rank line */
    const char *sum[] = {cli_src("examples/llama_block/graph.json"), "--tp", "4", NULL};
    r = cli_run(sum);
    ck_assert_msg(strstr(r.out, "ranks    4 (--tp: 2 collectives inserted): per rank") &&
                      strstr(r.out, "2 all_reduce") && strstr(r.out, "NVLink"), "%.2000s", r.out);
    cli_result_free(&r);
    /* the vocabulary-parallel embedding and its tied LM head (GPT-2's wte
     * read by the lookup and, transposed, by the head): the table split by
     * rows, each rank's lookup masked to its range and all_reduced once
     * with the positions', the head column-parallel over the vocabulary
     * with its logits gathered — per rank 357 KiB of weights (517 whole);
     * emulated at 4 ranks on the example's ids (11 to 252: all four
     * ranges; seeded ids lie in rank 0's), each rank's logits and token
     * the original graph's; a lookup that leaves ids past its rows
     * unmasked fails --verify */
    const char *voc[] = {cli_src("examples/gpt2_lm/graph.json"), "--tp", "2", "--emit", "trace", NULL};
    r = cli_run(voc);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(applied_line(r.out, "tp_vocab_parallel") && applied_line(r.out, "tp_column_parallel"), "%.3000s",
                  r.out);
    ck_assert_msg(strstr(r.out, "'wte' has 256 rows, a multiple of the ranks"), "%.3000s", r.out);
    cli_result_free(&r);
    const char *voc_sum[] = {cli_src("examples/gpt2_lm/graph.json"), "--tp", "2", NULL};
    r = cli_run(voc_sum);
    ck_assert_msg(strstr(r.out, "weights 357.3 KiB; collectives: 5 all_reduce, 2 all_gather"), "%.2000s", r.out);
    cli_result_free(&r);
    char ids[1100];
    snprintf(ids, sizeof ids, "input_ids=%s", cli_src("examples/gpt2_lm/inputs/input_ids.npy"));
    const char *voc_run[] = {cli_src("examples/gpt2_lm/graph.json"), "--tp", "4", "--run", "--device", "emu",
                             "--verify", "--input", ids, NULL};
    r = cli_run(voc_run);
    ck_assert_msg(r.status == 0 && strstr(r.out, "verify   next_token (emu vs the original graph) (rank 3)") &&
                      !strstr(r.out, "FAIL"), "%s%s", r.out, r.err);
    cli_result_free(&r);
    setenv("MCIR_TP_MUTANT", "vocab_unmasked", 1);
    const char *voc_mut[] = {cli_src("examples/gpt2_lm/graph.json"), "--tp", "4", "--verify", "--input", ids, NULL};
    r = cli_run(voc_mut);
    unsetenv("MCIR_TP_MUTANT");
    ck_assert_msg(r.status == 1 && strstr(r.out, "FAIL"), "the unmasked lookup went unnoticed: %s%s", r.out, r.err);
    cli_result_free(&r);
    /* errors */
    const char *twice[] = {cli_src("tests/data/ranks/mlp.json"), "--tp", "2", NULL};
    r = cli_run(twice);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "--tp takes a graph of one rank"), "%s", r.err);
    cli_result_free(&r);
    const char *zero[] = {cli_src("examples/mlp_tiny/graph.json"), "--tp", "0", NULL};
    r = cli_run(zero);
    ck_assert_int_eq(r.status, 2);
    cli_result_free(&r);
    /* the folding rules on split weights build each rank's constant from
     * its parts: the gamma fold and the horizontal Q/K/V on Llama at 2
     * ranks; the paired epilogue on the SwiGLU at 5 (F = 40: 8 a rank),
     * emulated and verified */
    const char *fold[] = {cli_src("examples/llama_block/graph.json"), "--tp", "2", "--emit", "trace", NULL};
    r = cli_run(fold);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(applied_line(r.out, "norm_gamma_fold") && applied_line(r.out, "horizontal_matmul"), "%.2000s", r.out);
    cli_result_free(&r);
    setenv("MCIR_GLU", "always", 1);
    const char *glu_trace[] = {cli_src("tests/golden/swiglu_bf16/input.json"), "--tp", "5", "--emit", "trace", NULL};
    r = cli_run(glu_trace);
    ck_assert_msg(r.status == 0 && applied_line(r.out, "glu_matmul"), "%.3000s", r.out);
    cli_result_free(&r);
    const char *glu_run[] = {cli_src("tests/golden/swiglu_bf16/input.json"), "--tp", "5", "--run", "--device", "emu",
                             "--verify", NULL};
    r = cli_run(glu_run);
    unsetenv("MCIR_GLU");
    ck_assert_msg(r.status == 0 && strstr(r.out, "verify   y (emu vs the original graph) (rank 4)") &&
                      !strstr(r.out, "FAIL"), "%s%s", r.out, r.err);
    cli_result_free(&r);
    /* the mutant */
    setenv("MCIR_TP_MUTANT", "bias_on_partials", 1);
    const char *mut[] = {cli_src("examples/gpt2_block/graph.json"), "--tp", "2", "--verify", NULL};
    r = cli_run(mut);
    unsetenv("MCIR_TP_MUTANT");
    ck_assert_msg(r.status == 1 && strstr(r.out, "FAIL"), "the mutant went unnoticed: %s%s", r.out, r.err);
    cli_result_free(&r);
    setenv("MCIR_TP_MUTANT", "drop_reduce", 1);   /* an all_reduce dropped */
    r = cli_run(mut);
    unsetenv("MCIR_TP_MUTANT");
    ck_assert_msg(r.status == 1 && strstr(r.out, "FAIL"), "the dropped all_reduce went unnoticed: %s%s", r.out, r.err);
    cli_result_free(&r);
}
END_TEST

/* The decode step's KV cache split by heads: each layer's past K and V
 * (graph inputs) are first read by the concat with the step's K / V heads,
 * split along axis 1; the inputs are declared sharded there (rule
 * tp_split_input), so attention runs on each rank's heads and the output
 * projection is row-parallel — two all_reduces a block (+ the embedding's),
 * the logits the only gather. Emulated at 4 ranks with the cache at 37
 * tokens, every rank's logits the original graph's. */
START_TEST(test_tp_kv_cache_by_heads) {
    const char *g = cli_src("examples/gpt2_decode/graph.json");
    const char *trace[] = {g, "--tp", "2", "--emit", "trace", NULL};
    cli_result r = cli_run(trace);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(count(r.out, "\"rule\":\"tp_split_input\"") == 4 && applied_line(r.out, "tp_split_input") &&
                      count(r.out, "\"rule\":\"tp_row_parallel\"") == 4 &&
                      strstr(r.out, "graph input 'past_k0' is first read by 'h0.attn.k_all' (concat)"),
                  "%.3000s", r.out);
    cli_result_free(&r);
    const char *plan[] = {g, "--tp", "2", "--emit", "plan", NULL};
    r = cli_run(plan);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(count(r.out, "ncclAllReduce") == 5 && count(r.out, "ncclAllGather") == 1, "%.2000s", r.out);
    cli_result_free(&r);
    const char *mcir[] = {g, "--tp", "2", "--emit", "mcir", NULL};
    r = cli_run(mcir);
    ck_assert_msg(r.status == 0 && count(r.out, "\"shard\": {\"axis\": 1}") >= 4, "%.2000s", r.out);
    cli_result_free(&r);
    char ids[1100];
    snprintf(ids, sizeof ids, "input_ids=%s", cli_src("examples/gpt2_decode/inputs/input_ids.npy"));
    const char *run[] = {g, "--tp", "4", "--run", "--device", "emu", "--verify", "--dim", "past=37", "--input", ids,
                         NULL};
    if (TP_EMU_RUNS) {
        r = cli_run(run);
        ck_assert_msg(r.status == 0 && strstr(r.out, "verify   logits (emu vs the original graph) (rank 3)") &&
                          !strstr(r.out, "FAIL"), "%s%s", r.out, r.err);
        cli_result_free(&r);
    }
    /* a cache an earlier node read whole stays whole (check
     * input_first_read); the other one is split */
    const char *first[] = {cli_src("tests/data/ranks/kv_cache_read_first.json"), "--tp", "2", "--verify", "--emit",
                           "trace", NULL};
    r = cli_run(first);
    ck_assert_msg(r.status == 0 && strstr(r.out, "graph input 'past_k' was read whole before 'concat'") &&
                      strstr(r.out, "graph input 'past_v' is first read by") && !strstr(r.out, "FAIL") &&
                      count(r.err, "verify   k_sum (rank 1)") == 1, "%.3000s%s", r.out, r.err);
    cli_result_free(&r);
}
END_TEST

/* A row-parallel product's all_reduce in two chunks of rows, so the first
 * chunk's all_reduce runs beside the second chunk's product (rule
 * tp_overlap_chunks): applied on a Llama-7B MLP at 4096 tokens (the model:
 * the all_reduce 78.6 us, the product 186.7 us on sm_90), rejected on
 * GPT-2's block at 128 tokens (a 4.9 us all_reduce hides less than a
 * second ring costs); forced there, it verifies on every rank, runs on
 * the emulated device with each second-chunk product beside the first
 * chunk's all_reduce (the order check of the emulated device on), and the
 * chunks joined the wrong way round fail --verify. */
START_TEST(test_tp_overlap_chunks) {
    const char *big[] = {cli_src("tests/data/ranks/mlp_llama7b.json"), "--tp", "2", "--emit", "trace", NULL};
    cli_result r = cli_run(big);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(applied_line(r.out, "tp_overlap_chunks") && strstr(r.out, "'h' has 4096 rows along axis 1: two "
                                                                        "chunks of 2048"), "%.3000s", r.out);
    cli_result_free(&r);
    const char *big_sum[] = {cli_src("tests/data/ranks/mlp_llama7b.json"), "--tp", "2", NULL};
    r = cli_run(big_sum);
    ck_assert_msg(r.status == 0 && strstr(r.out, "collectives: 2 all_reduce") && strstr(r.out, "of it beside the kernels"),
                  "%s%s", r.out, r.err);
    cli_result_free(&r);
    const char *g = cli_src("examples/gpt2_block/graph.json");
    const char *small[] = {g, "--tp", "2", "--emit", "trace", NULL};
    r = cli_run(small);
    ck_assert_msg(r.status == 0 && !applied_line(r.out, "tp_overlap_chunks") &&
                      strstr(r.out, "\"check\":\"overlap_pays\",\"ok\":false"), "%.3000s", r.out);
    cli_result_free(&r);
    setenv("MCIR_TP_CHUNKS", "always", 1);
    const char *run[] = {g, "--tp", "2", "--run", "--device", "emu", "--verify", NULL};
    if (TP_EMU_RUNS) {
        r = cli_run(run);
        ck_assert_msg(r.status == 0 && strstr(r.out, "verify   y (emu vs the original graph) (rank 1)") &&
                          strstr(r.out, "the collectives on a second stream, 2 kernels ran beside one") &&
                          !strstr(r.out, "FAIL"), "%s%s", r.out, r.err);
        cli_result_free(&r);
    }
    const char *plan[] = {g, "--tp", "2", "--emit", "plan", NULL};
    r = cli_run(plan);
    ck_assert_msg(r.status == 0 && count(r.out, "ncclAllReduce") == 4, "%.2000s", r.out);
    cli_result_free(&r);
    setenv("MCIR_TP_MUTANT", "chunks_swapped", 1);
    const char *mut[] = {g, "--tp", "2", "--verify", NULL};
    r = cli_run(mut);
    unsetenv("MCIR_TP_MUTANT");
    unsetenv("MCIR_TP_CHUNKS");
    ck_assert_msg(r.status == 1 && strstr(r.out, "FAIL"), "the swapped chunks went unnoticed: %s%s", r.out, r.err);
    cli_result_free(&r);
}
END_TEST

/* Sequence parallelism (--tp-sp, rule tp_sequence_parallel): on the
 * Llama block at 2 ranks the all_reduces become a reduce_scatter of the
 * row-parallel products' partial sums by rows, the residual and the
 * RMSNorm on each rank's 64 of 128 rows, an all_gather before the MLP's
 * products and one of the output — no all_reduce; every example of
 * several rows verifies at 4 ranks, the Llama block on the emulated
 * device too; a decode step (one row) keeps its all_reduces (the check
 * says why); --tp-sp without --tp is a usage error. */
START_TEST(test_tp_sequence_parallel) {
    const char *g = cli_src("examples/llama_block/graph.json");
    const char *plan[] = {g, "--tp", "2", "--tp-sp", "--emit", "plan", NULL};
    cli_result r = cli_run(plan);
    ck_assert_msg(r.status == 0 && count(r.out, "ncclReduceScatter") == 2 && count(r.out, "ncclAllGather") == 2 &&
                      count(r.out, "ncclAllReduce") == 0, "%.3000s%s", r.out, r.err);
    cli_result_free(&r);
    const char *trace[] = {g, "--tp", "2", "--tp-sp", "--emit", "trace", NULL};
    r = cli_run(trace);
    ck_assert_msg(r.status == 0 && count(r.out, "\"rule\":\"tp_sequence_parallel\"") == 2 &&
                      applied_line(r.out, "tp_sequence_parallel") &&
                      strstr(r.out, "'l0.attn.residual.y' has 128 rows along axis 1, a multiple of the ranks"),
                  "%.3000s", r.out);
    cli_result_free(&r);
    const char *run[] = {g, "--tp", "2", "--tp-sp", "--run", "--device", "emu", "--verify", NULL};
    if (TP_EMU_RUNS) {
        r = cli_run(run);
        ck_assert_msg(r.status == 0 && strstr(r.out, "verify   y (emu vs the original graph) (rank 1)") &&
                          !strstr(r.out, "FAIL"), "%s%s", r.out, r.err);
        cli_result_free(&r);
    }
    static const char *const examples[] = {"gpt2_block", "bert_layer", "gpt2_lm", "gpt2_stack"};
    for (int e = 0; e < (TP_EMU_RUNS ? 4 : 3); e++) {   /* (the 12-layer stack: not in the sanitizer build) */
        char path[256];
        snprintf(path, sizeof path, "examples/%s/graph.json", examples[e]);
        const char *args[] = {cli_src(path), "--tp", "4", "--tp-sp", "--verify", NULL};
        r = cli_run(args);
        ck_assert_msg(r.status == 0 && strstr(r.out, "(rank 3): max abs err") && strstr(r.out, "reduce_scatter") &&
                          !strstr(r.out, "FAIL"), "%s: %s%s", examples[e], r.out, r.err);
        cli_result_free(&r);
    }
    const char *dec[] = {cli_src("examples/gpt2_decode/graph.json"), "--tp", "2", "--tp-sp", "--emit", "trace", NULL};
    r = cli_run(dec);
    ck_assert_msg(r.status == 0 && !applied_line(r.out, "tp_sequence_parallel") &&
                      strstr(r.out, "has no rows that split over the ranks"), "%.3000s", r.out);
    cli_result_free(&r);
    const char *alone[] = {g, "--tp-sp", NULL};
    r = cli_run(alone);
    ck_assert_msg(r.status == 2 && strstr(r.err, "--tp-sp needs --tp N"), "%s", r.err);
    cli_result_free(&r);
}
END_TEST

/* --tp on graphs the examples do not cover: the generation graphs with
 * symbolic lengths (the vocabulary-parallel lookup's mask reshaped to
 * [.., 1] with its extents naming the graph's dims; the head split's
 * reshapes keep theirs), a decode step whose position lookup is
 * vocabulary-parallel too (its partial sums meet the residual through a
 * whole copy: the collective's output keeps the rank of its input, so the
 * rules after it see it), and torch's dynamo exports of GPT-2 and Llama
 * over seq in [2, 32] — each verifies on every rank. */
START_TEST(test_tp_symbolic_and_generation_graphs) {
    static const char *const graphs[] = {"tests/data/dims/generate/prefill.json", "tests/data/dims/generate/decode.json",
                                         "tests/data/dims/generate/decode_state.json",
                                         "tests/data/dims/gpt2_block_batch_seq.json",
                                         "tests/data/dims/llama_block_seq.json"};
    for (int i = 0; i < 5; i++) {
        const char *args[] = {cli_src(graphs[i]), "--tp", "2", "--verify", NULL};
        cli_result r = cli_run(args);
        ck_assert_msg(r.status == 0 && strstr(r.out, "(rank 1): max abs err") && !strstr(r.out, "FAIL"), "%s: %s%s",
                      graphs[i], r.out, r.err);
        cli_result_free(&r);
    }
#ifdef MCIR_HAVE_ONNX
    static const char *const models[] = {"tests/data/onnx/dims/hf_gpt2_dynamo/model.onnx",
                                         "tests/data/onnx/dims/hf_llama_dynamo/model.onnx"};
    for (int i = 0; i < 2; i++) {
        const char *args[] = {cli_src(models[i]), "--tp", "2", "--dim", "seq=2..32", "--verify", NULL};
        cli_result r = cli_run(args);
        ck_assert_msg(r.status == 0 && strstr(r.out, "(rank 1): max abs err") && !strstr(r.out, "FAIL"), "%s: %s%s",
                      models[i], r.out, r.err);
        cli_result_free(&r);
    }
#endif
}
END_TEST

/* Grouped-query attention with fewer K/V heads than ranks (8 query heads,
 * 2 K/V heads) at --tp 2, 4 and 8: the K / V projections stay whole (rule
 * tp_column_parallel rejected: heads_divide), the query heads regrouped so
 * each rank's share one K/V head, each rank gathering its K/V head from the
 * whole K and V; one all_reduce, nothing gathered across ranks, every rank
 * verifies — on the emulated device too. */
START_TEST(test_tp_gqa_fewer_kv_heads) {
    const char *g = cli_src("tests/data/ranks/gqa_block.json");
    static const char *const ns[] = {"2", "4", "8"};
    for (int i = 0; i < 3; i++) {
        const char *verify[] = {g, "--tp", ns[i], "--verify", NULL};
        cli_result r = cli_run(verify);
        ck_assert_msg(r.status == 0, "--tp %s: %s%s", ns[i], r.out, r.err);
        ck_assert_msg(strstr(r.out, "collectives: 1 all_reduce,"), "--tp %s: %s", ns[i], r.out);
        ck_assert_int_eq(count(r.err, "ok\n") + count(r.out, "ok\n"), atoi(ns[i]));
        cli_result_free(&r);
    }
    const char *trace[] = {g, "--tp", "4", "--emit", "trace", NULL};
    cli_result r = cli_run(trace);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, "'k' splits into 2 heads, fewer than (or not a multiple of) the 4 ranks"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "\"check\":\"kv_heads_replicated\""), "%s", r.out);
    ck_assert_msg(strstr(r.out, "\"check\":\"rank_heads_in_one_group\""), "%s", r.out);
    ck_assert_msg(!strstr(r.out, "\"rule\":\"tp_gather\""), "%s", r.out);
    cli_result_free(&r);
    const char *emu[] = {g, "--tp", "4", "--run", "--device", "emu", "--verify", NULL};
    r = cli_run(emu);
    ck_assert_msg(r.status == 0, "%s%s", r.out, r.err);
    ck_assert_msg(strstr(r.out, "verify   y (emu vs the original graph) (rank 3): max abs err"), "%s", r.out);
    cli_result_free(&r);
}
END_TEST

/* One tensor through the same all_gather twice (what DTensor's sequence
 * parallelism gives each column-parallel product): the second gather and
 * the relu that repeats the first's are dropped, the trace says why, one
 * collective kernel remains, and every rank still verifies; --no-rewrite
 * keeps both. */
START_TEST(test_shared_collectives_merge) {
    const char *g = cli_src("tests/data/ranks/shared_gather.json");
    const char *verify[] = {g, "--verify", NULL};
    cli_result r = cli_run(verify);
    ck_assert_msg(r.status == 0, "%s%s", r.out, r.err);
    ck_assert_msg(strstr(r.out, "verify   y (rank 1): max abs err"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "collectives: 1 all_gather,"), "%s", r.out);
    cli_result_free(&r);
    const char *trace[] = {g, "--emit", "trace", NULL};
    r = cli_run(trace);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(applied_line(r.out, "tp_shared_collective"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "all_gather of 'h' with the same attributes"), "%s", r.out);
    cli_result_free(&r);
    const char *plan[] = {g, "--emit", "plan", NULL};
    r = cli_run(plan);
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(count(r.out, "\"template\": \"collective\""), 1);
    cli_result_free(&r);
    const char *raw[] = {g, "--no-rewrite", "--emit", "plan", NULL};
    r = cli_run(raw);
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(count(r.out, "\"template\": \"collective\""), 2);
    cli_result_free(&r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ranks");
    TCase *tc = tcase_create("ranks");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_parse_and_infer);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_collectives_in_lockstep);
    tcase_add_test(tc, test_reduce_scatter_and_group_inputs);
    tcase_add_test(tc, test_sharded_mlp_matches_one_rank);
    tcase_add_test(tc, test_member_of_an_outside_group);
    tcase_add_test(tc, test_weight_data_parts_and_round_trip);
    tcase_add_test(tc, test_one_rank_identity);
    tcase_add_test(tc, test_cli_runs_every_rank);
    tcase_add_test(tc, test_tp_examples_verify);
    tcase_add_test(tc, test_shared_collectives_merge);
    tcase_add_test(tc, test_tp_gqa_fewer_kv_heads);
    tcase_add_test(tc, test_tp_kv_cache_by_heads);
    tcase_add_test(tc, test_tp_overlap_chunks);
    tcase_add_test(tc, test_tp_sequence_parallel);
    tcase_add_test(tc, test_tp_symbolic_and_generation_graphs);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
