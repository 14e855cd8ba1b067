/*
 * test_tune.c — choice by measurement without a GPU: mcir_plan_tune with
 * an injected deterministic timer picks the fastest candidate, records it
 * in the tuning cache, and a later plan reads it back ("tuned: measured X
 * us vs model's pick Y us"); the cache is keyed by arch and driver; the
 * GEMM candidates are legal and best first.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernelplan/kernelplan.h"
#include "test_util.h"

static const char *MM =
    "{\"mcir\":1,\"name\":\"t\",\"inputs\":[{\"name\":\"a\",\"dtype\":\"f16\",\"shape\":[512,768]}],"
    "\"weights\":[{\"name\":\"w\",\"dtype\":\"f16\",\"shape\":[768,1024]}],"
    "\"nodes\":[{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"w\"],\"outputs\":[\"y\"]}],"
    "\"outputs\":[\"y\"]}";

static mcir_plan *plan_mm(mcir_graph **g, const char *arch) {
    mcir_diag d = mcir_diag_stderr();
    *g = mcir_graph_read_json_string(MM, "<test>", &d);
    ck_assert_ptr_nonnull(*g);
    mcir_plan *p = mcir_plan_build(*g, mcir_target_find(arch), NULL, &d);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(p->n_kernels, 1);
    return p;
}

/* Deterministic "measurement": the tile's area decides (smaller faster). */
static int timer_calls;
static double area_timer(void *ctx, mcir_plan *p, int kernel) {
    (void)ctx;
    timer_calls++;
    const mcir_tiling *t = &p->kernels[kernel].tiling;
    return (double)(t->block_tile[0] * t->block_tile[1]) / 64.0 + t->block_tile[2] / 16.0 + t->warps;
}

static double failing_timer(void *ctx, mcir_plan *p, int kernel) {
    (void)ctx;
    (void)p;
    (void)kernel;
    return -1;
}

START_TEST(candidates_are_legal_and_best_first) {
    mcir_graph *g;
    /* on sm_90 the product takes the sm_90a GEMM, which has no tuning key */
    mcir_plan *p = plan_mm(&g, "sm_90");
    char key[256];
    ck_assert_ptr_nonnull(strstr(p->kernels[0].tiling.reason, "sm_90a GEMM"));
    ck_assert(!mcir_tuning_key(&p->kernels[0], key, sizeof key));
    mcir_plan_free(p);
    mcir_graph_free(g);
    p = plan_mm(&g, "sm_80");
    ck_assert(mcir_tuning_key(&p->kernels[0], key, sizeof key));
    mcir_gemm_candidate c[8];
    int n = mcir_gemm_candidates(p, &p->kernels[0], c, 8);
    ck_assert_int_gt(n, 8);
    mcir_gemm_problem gp;
    ck_assert(mcir_gemm_problem_of(&p->kernels[0], &gp));
    ck_assert(gp.mma);
    for (int i = 0; i < 8; i++) {
        mcir_gemm_layout l;
        ck_assert(mcir_gemm_layout_of(p->target, &gp, &c[i].tiling, &l, NULL));
        ck_assert_int_le(l.smem_bytes, p->target->smem_per_block_optin);
        if (i) ck_assert(c[i - 1].modelled_us <= c[i].modelled_us);
    }
    /* the plan's tile is the model's best, its launch the layout's */
    ck_assert_int_eq(p->kernels[0].tiling.block_tile[0], c[0].tiling.block_tile[0]);
    ck_assert_int_eq(p->kernels[0].block[0], 32 * c[0].tiling.warps);
    ck_assert_ptr_nonnull(strstr(p->kernels[0].tiling.reason, "runner-up"));
    ck_assert_str_eq(p->kernels[0].library, "cublas");
    ck_assert_ptr_nonnull(strstr(p->kernels[0].library_op, "cublasGemmStridedBatchedEx f16 NN"));
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

START_TEST(tune_keeps_the_fastest_and_a_later_plan_reads_it) {
    char path[] = "/tmp/mcir-tune-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    unlink(path);
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g;
    mcir_plan *p = plan_mm(&g, "sm_80");
    mcir_gemm_candidate c[4];
    ck_assert_int_ge(mcir_gemm_candidates(p, &p->kernels[0], c, 4), 4);
    int best = 0;
    double best_us = 0;
    for (int i = 0; i < 4; i++) {
        mcir_plan *q = p;
        mcir_tiling keep = q->kernels[0].tiling;
        q->kernels[0].tiling = c[i].tiling;
        double us = area_timer(NULL, q, 0);
        q->kernels[0].tiling = keep;
        if (i == 0 || us < best_us) {
            best = i;
            best_us = us;
        }
    }
    mcir_tuning *t = mcir_tuning_load(path, &d);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(mcir_tuning_count(t), 0);
    timer_calls = 0;
    ck_assert_int_eq(mcir_plan_tune(p, 4, area_timer, NULL, t, "injected-test", NULL), 1);
    ck_assert_int_eq(timer_calls, 4);
    const mcir_tiling *won = &p->kernels[0].tiling;
    ck_assert_int_eq(won->block_tile[0], c[best].tiling.block_tile[0]);
    ck_assert_int_eq(won->block_tile[1], c[best].tiling.block_tile[1]);
    ck_assert_int_eq(won->warps, c[best].tiling.warps);
    ck_assert_int_eq(p->kernels[0].block[0], 32 * won->warps);
    ck_assert_ptr_eq(strstr(won->reason, "tuned: measured"), won->reason);
    ck_assert(mcir_tuning_save(t, &d));
    mcir_tuning_free(t);
    mcir_plan_free(p);
    mcir_graph_free(g);

    /* a later compile: same arch and driver apply, another driver or arch not */
    t = mcir_tuning_load(path, &d);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(mcir_tuning_count(t), 1);
    p = plan_mm(&g, "sm_80");
    ck_assert_int_eq(mcir_tuning_apply(p, t, "cuda-13000"), 0);
    ck_assert_int_eq(mcir_tuning_apply(p, t, "injected-test"), 1);
    ck_assert_int_eq(p->kernels[0].tiling.block_tile[0], c[best].tiling.block_tile[0]);
    char want[64];
    snprintf(want, sizeof want, "tuned: measured %.2f us", best_us);
    ck_assert_ptr_nonnull(strstr(p->kernels[0].tiling.reason, want));
    mcir_plan_free(p);
    mcir_graph_free(g);
    p = plan_mm(&g, "sm_90");
    ck_assert_int_eq(mcir_tuning_apply(p, t, "injected-test"), 0);
    mcir_plan_free(p);
    mcir_graph_free(g);
    /* a timer that fails stops the tuner */
    p = plan_mm(&g, "sm_80");
    ck_assert_int_eq(mcir_plan_tune(p, 2, failing_timer, NULL, t, "injected-test", NULL), -1);
    mcir_plan_free(p);
    mcir_graph_free(g);
    mcir_tuning_free(t);
    unlink(path);
}
END_TEST

START_TEST(malformed_cache_line_is_an_error) {
    char path[] = "/tmp/mcir-tune-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_gt(write(fd, "matmul x\tsm_90\tcuda\t64\n", 23), 0);
    close(fd);
    mcir_diag d = mcir_diag_stderr();
    ck_assert_ptr_null(mcir_tuning_load(path, &d));
    unlink(path);
}
END_TEST

static Suite *tune_suite(void) {
    Suite *s = suite_create("tune");
    TCase *tc = tcase_create("tune");
    tcase_add_test(tc, candidates_are_legal_and_best_first);
    tcase_add_test(tc, tune_keeps_the_fastest_and_a_later_plan_reads_it);
    tcase_add_test(tc, malformed_cache_line_is_an_error);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_main(tune_suite()); }
