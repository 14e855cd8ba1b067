/*
 * interp_test.h — helpers shared by the inference, reference-kernel and
 * interpreter suites: build one-node graphs through the graph API, run
 * inference capturing the diagnostic, run a node's reference kernel, and
 * a small deterministic random generator. Header-only (static functions).
 */
#ifndef MCIR_INTERP_TEST_H
#define MCIR_INTERP_TEST_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcir/interp-impl.h"

/* Check's ck_assert records every passing check (a write per call): in
 * loops over elements only the failure path may call into Check. */
#define TT_CHECK(cond, ...) \
    do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

#define SHAPE(...) (sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

/* A tensor of the given dtype and shape (rank, dims). */
static inline mcir_tensor *tt_tensor(mcir_graph *g, const char *name, mcir_tensor_kind kind,
                                     mcir_dtype dt, int rank, const int64_t *shape) {
    mcir_tensor *t = mcir_graph_add_tensor(g, name, dt, rank, shape, kind);
    ck_assert_msg(t, "tensor %s", name);
    return t;
}

static inline mcir_tensor *tt_in(mcir_graph *g, const char *name, int rank,
                                 const int64_t *shape) {
    return tt_tensor(g, name, MCIR_TENSOR_INPUT, MCIR_DTYPE_F32, rank, shape);
}

static inline mcir_tensor *tt_scalar(mcir_graph *g, const char *name) {
    return tt_tensor(g, name, MCIR_TENSOR_INPUT, MCIR_DTYPE_F32, 0, NULL);
}

/* A node with n_out fresh outputs named "<name>_y<i>" (shape unknown). */
static inline mcir_node *tt_node(mcir_graph *g, mcir_op op, const char *name, int n_in,
                                 mcir_tensor *const *ins, int n_out) {
    mcir_tensor *outs[16];
    ck_assert_int_le(n_out, 16);
    for (int i = 0; i < n_out; i++) {
        char buf[128];
        snprintf(buf, sizeof buf, "%s_y%d", name, i);
        outs[i] = mcir_graph_add_tensor(g, buf, MCIR_DTYPE_F32, -1, NULL,
                                        MCIR_TENSOR_INTERMEDIATE);
        ck_assert(outs[i]);
    }
    return mcir_graph_add_node(g, op, name, n_in, ins, n_out, outs);
}

/* Runs n's inference; returns its result and copies what it printed into
 * msg (may be NULL). */
static inline bool tt_infer(mcir_graph *g, mcir_node *n, char *msg, size_t cap) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert(f);
    mcir_diag d = mcir_diag_to(f);
    bool ok = mcir_op_desc_of(n->op)->infer(g, n, &d);
    fclose(f);
    if (msg) snprintf(msg, cap, "%s", buf ? buf : "");
    ck_assert_int_eq(ok, d.n_errors == 0);
    free(buf);
    return ok;
}

/* Inference must succeed. */
static inline void tt_infer_ok(mcir_graph *g, mcir_node *n) {
    char msg[2048];
    bool ok = tt_infer(g, n, msg, sizeof msg);
    ck_assert_msg(ok, "inference failed: %s", msg);
}

/* Inference must fail with a message containing every given fragment. */
static inline void tt_infer_fails(mcir_graph *g, mcir_node *n, const char *const *frags) {
    char msg[2048];
    bool ok = tt_infer(g, n, msg, sizeof msg);
    ck_assert_msg(!ok, "inference of '%s' unexpectedly succeeded", n->name);
    for (int i = 0; frags[i]; i++)
        ck_assert_msg(strstr(msg, frags[i]), "message lacks \"%s\": %s", frags[i], msg);
}
#define TT_FAILS(g, n, ...) tt_infer_fails(g, n, (const char *const[]){__VA_ARGS__, NULL})

static inline void tt_shape_is(const mcir_tensor *t, int rank, const int64_t *shape) {
    char a[256], b[256];
    mcir_tensor tmp = {.rank = rank};
    memcpy(tmp.shape, shape, sizeof(int64_t) * (size_t)rank);
    ck_assert_msg(t->rank == rank &&
                      (rank == 0 || memcmp(t->shape, shape, sizeof(int64_t) * (size_t)rank) == 0),
                  "'%s' is %s, expected %s", t->name, mcir_shape_str(t, a, sizeof a),
                  mcir_shape_str(&tmp, b, sizeof b));
}

/* Runs the node's reference kernel; returns malloc'd outputs (caller frees
 * each with tt_free_outs). Inference must have run. */
static inline float **tt_run(const mcir_node *n, const float *const *in) {
    float **out = calloc((size_t)n->n_outputs, sizeof(float *));
    for (int i = 0; i < n->n_outputs; i++) {
        int64_t k = mcir_tensor_numel(n->outputs[i]);
        out[i] = malloc(sizeof(float) * (size_t)k);
        for (int64_t j = 0; j < k; j++) out[i][j] = NAN; /* every element must be written */
    }
    mcir_ref_run_node(n, in, out);
    return out;
}

static inline void tt_free_outs(const mcir_node *n, float **out) {
    for (int i = 0; i < n->n_outputs; i++) free(out[i]);
    free(out);
}

/* Deterministic uniform values in [lo, hi). */
static inline uint64_t tt_rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline float *tt_rand(int64_t n, uint64_t seed, float lo, float hi) {
    float *v = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * (float)((double)(tt_rng_next(&s) >> 40) * 0x1p-24);
    return v;
}

static inline float *tt_rand_t(const mcir_tensor *t, uint64_t seed) {
    return tt_rand(mcir_tensor_numel(t), seed, -1.0f, 1.0f);
}

/* |got - want| <= atol + rtol * |want| everywhere; NaNs must match. */
static inline void tt_close(const float *got, const double *want, int64_t n, double atol,
                            double rtol, const char *what) {
    for (int64_t i = 0; i < n; i++) {
        if (isnan(want[i])) {
            TT_CHECK(isnan(got[i]), "%s[%lld]: got %.9g, want NaN", what, (long long)i,
                          got[i]);
            continue;
        }
        if (isinf(want[i])) {
            TT_CHECK(got[i] == want[i], "%s[%lld]: got %.9g, want %g", what,
                          (long long)i, got[i], want[i]);
            continue;
        }
        double err = fabs((double)got[i] - want[i]);
        TT_CHECK(err <= atol + rtol * fabs(want[i]),
                      "%s[%lld]: got %.9g, want %.9g (err %.3g)", what, (long long)i,
                      got[i], want[i], err);
    }
}

/* Same, want given as floats. */
static inline void tt_closef(const float *got, const float *want, int64_t n, double atol,
                             const char *what) {
    double *w = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) w[i] = want[i];
    tt_close(got, w, n, atol, 0.0, what);
    free(w);
}

#endif /* MCIR_INTERP_TEST_H */
