/*
 * test_conv_gemm.c — pointwise convs as GEMMs (the catalog rule
 * conv1x1_as_matmul; docs/catalog.md, docs/codegen.md "Pointwise convs"):
 *  - a ResNet bottleneck over a symbolic batch: its two 1x1 convs become
 *    batched matmuls (W [O, C] times each image as [C, H*W]) that take
 *    their bias, ReLU, residual add and ReLU as the epilogue through the
 *    reshape back to NCHW — on sm_90 in f16 the sm_90a GEMM (TMA +
 *    wgmma), on sm_80 the cp.async ring — while the 3x3 conv keeps the
 *    implicit GEMM; 3 kernels;
 *  - a batch norm after a bias-free 1x1 conv is folded first, then the
 *    GEMM; a runtime per-channel scale and a residual input broadcast
 *    through the reshape; 81-pixel images (no TMA: rows of 162 bytes);
 *  - refused, with the reason in the trace: 49 pixels per image, a
 *    strided 1x1 conv, a 3x3 kernel;
 *  - a 3x3 f16 conv (bias, residual, ReLU) large enough for the cost
 *    model: on sm_90 the sm_90a implicit GEMM (rule conv_kxk_tap_major,
 *    one kernel), on sm_80 the mma.sync implicit GEMM;
 *  - PyTorch's output of a 3x3 bf16 conv (asymmetric pads, bias, ReLU, a
 *    residual; tests/data/conv_gemm/kxk_torch) matches the emulated
 *    device's, on the sm_90a implicit GEMM and on the mma.sync one;
 *  - every graph on the emulated device (sm_90 and sm_80) matches the
 *    interpreter on the original graph, the bottleneck at two batch sizes
 *    with nothing compiled at the second.
 * Emulator runs skip without a C++ compiler.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "mcir/mcir.h"
#include "test_util.h"

#define RUN(...) cli_run((const char *const[]){__VA_ARGS__, NULL})

static const char *graph(const char *name) {
    static char rel[8][128];
    static int k;
    char *r = rel[k++ % 8];
    snprintf(r, 128, "tests/data/conv_gemm/%s.json", name);
    return cli_src(r);
}

/* The number of times needle occurs in hay. */
static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

START_TEST(test_bottleneck_plans) {
    cli_result r = RUN("--arch", "sm_90", graph("bottleneck_f16"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "kernels  3 for sm_90"));
    cli_result_free(&r);
    r = RUN("--arch", "sm_90", "--emit", "plan", graph("bottleneck_f16"));
    ck_assert_int_eq(r.status, 0);
    /* the two 1x1 convs: the sm_90a GEMM, one image per batch, the weight shared */
    ck_assert_int_eq(count(r.out, "sm_90a GEMM (TMA + mbarriers + wgmma, warp specialised) M=32 N=256 K=64 batch=4"), 1);
    ck_assert_int_eq(count(r.out, "sm_90a GEMM (TMA + mbarriers + wgmma, warp specialised) M=64 N=256 K=32 batch=4"), 1);
    ck_assert_int_eq(count(r.out, "conv2d as implicit GEMM"), 1);   /* the 3x3 */
    cli_result_free(&r);
    r = RUN("--arch", "sm_90", "--emit", "trace", graph("bottleneck_f16"));
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(count(r.out, "\"rule\":\"conv1x1_as_matmul\""), 3);
    ck_assert_ptr_nonnull(strstr(r.out, "\"anchor\":\"c1\",\"matched\":[\"c1\"]"));
    ck_assert_ptr_nonnull(strstr(r.out, "'c2' has a 3x3 kernel, not 1x1"));
    /* the epilogue through the reshape back to NCHW: c3's bias, the residual, the ReLU */
    ck_assert_ptr_nonnull(strstr(r.out, "\"matched\":[\"r3\",\"res\"]"));
    cli_result_free(&r);
    r = RUN("--arch", "sm_80", "--emit", "plan", graph("bottleneck_f16"));
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(count(r.out, "f16 tensor cores (mma.sync m16n8k16, f32 accumulate)"), 3);
    ck_assert_int_eq(count(r.out, "matmul + 3-node epilogue M=32 N=256 K=64 batch=4"), 1);
    cli_result_free(&r);
}
END_TEST

/* A 3x3 conv the cost model gives the sm_90a implicit GEMM on sm_90: its
 * weight repacked tap-major at compile time (a transpose folded into the
 * conv's read: one kernel), bias, residual and ReLU fused; sm_80 keeps the
 * mma.sync implicit GEMM (docs/kernelplan.md "KxK convs on the sm_90a GEMM") */
START_TEST(test_kxk_plans) {
    cli_result r = RUN("--arch", "sm_90", "--emit", "plan", graph("kxk_f16"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_eq(count(r.out, "\"template\": \"conv2d\""), 1);
    ck_assert_int_eq(count(r.out, "conv2d 3x3 as an implicit GEMM on the sm_90a template"), 1);
    ck_assert_int_eq(count(r.out, "for the mma.sync implicit GEMM (conv2d as implicit GEMM"), 1);
    ck_assert_int_eq(count(r.out, "\"folded\": \"k.weight\""), 1);
    cli_result_free(&r);
    r = RUN("--arch", "sm_90", "--emit", "trace", graph("kxk_f16"));
    ck_assert_ptr_nonnull(strstr(r.out, "\"rule\":\"conv_kxk_tap_major\",\"property\":\"tile_compatible_compute\","
                                        "\"action\":\"conv_tap_major\",\"anchor\":\"k\""));
    cli_result_free(&r);
    r = RUN("--arch", "sm_80", "--emit", "plan", graph("kxk_f16"));
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(count(r.out, "sm_90a"), 0);
    ck_assert_int_eq(count(r.out, "conv2d as implicit GEMM"), 1);
    cli_result_free(&r);
}
END_TEST

/* The bf16 values of an .npy file as floats */
static float *bf16_npy(const char *path, int64_t *n) {
    mcir_npy a;
    mcir_diag d = mcir_diag_stderr();
    ck_assert_msg(mcir_npy_read(path, &a, &d), "%s", path);
    ck_assert_int_eq(a.dtype, MCIR_DTYPE_BF16);
    *n = 1;
    for (int i = 0; i < a.rank; i++) *n *= a.shape[i];
    float *v = malloc((size_t)*n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < *n; i++) {
        const uint32_t bits = (uint32_t)((const uint16_t *)a.data)[i] << 16;
        memcpy(&v[i], &bits, sizeof bits);
    }
    mcir_npy_free(&a);
    return v;
}

/* PyTorch's output (tests/data/conv_gemm/kxk_torch/gen.py: a 3x3 bf16 conv
 * with asymmetric pads, bias, ReLU and a residual, OW 56, C 24) against the
 * emulated device's: the sm_90a implicit GEMM (MCIR_SM90_CONV=always) and
 * the mma.sync one (sm_80) */
START_TEST(test_kxk_matches_torch) {
    if (!test_have_cxx()) return;
    char dir[256];
    ck_assert(test_tempdir("kxk_torch", dir, sizeof dir));
    int64_t n, ne;
    float *want = bf16_npy(cli_src("tests/data/conv_gemm/kxk_torch/expected_z.npy"), &ne);
    static const char *const archs[] = {"sm_90", "sm_80"};
    for (int a = 0; a < 2; a++) {
        char out[300], xin[512], rin[512], got_path[320];
        snprintf(out, sizeof out, "%s/%s", dir, archs[a]);
        snprintf(xin, sizeof xin, "x=%s", cli_src("tests/data/conv_gemm/kxk_torch/x.npy"));
        snprintf(rin, sizeof rin, "r=%s", cli_src("tests/data/conv_gemm/kxk_torch/r.npy"));
        setenv("MCIR_SM90_CONV", "always", 1);
        cli_result r = RUN("--arch", archs[a], "--run", "--device", "emu", "--input", xin, "--input", rin, "-o", out,
                           cli_src("tests/data/conv_gemm/kxk_torch/graph.json"));
        unsetenv("MCIR_SM90_CONV");
        ck_assert_msg(r.status == 0, "%s: %s", archs[a], r.err);
        cli_result_free(&r);
        setenv("MCIR_SM90_CONV", "always", 1);   /* what ran: the sm_90a template on sm_90 only */
        r = RUN("--arch", archs[a], "--emit", "plan", cli_src("tests/data/conv_gemm/kxk_torch/graph.json"));
        unsetenv("MCIR_SM90_CONV");
        ck_assert_int_eq(count(r.out, "conv2d 3x3 as an implicit GEMM on the sm_90a template"), a == 0);
        cli_result_free(&r);
        snprintf(got_path, sizeof got_path, "%s/z.npy", out);
        float *got = bf16_npy(got_path, &n);
        ck_assert_int_eq(n, ne);
        double err = 0, mag = 0;
        for (int64_t i = 0; i < n; i++) {
            err = fmax(err, fabs((double)got[i] - want[i]));
            mag = fmax(mag, fabs((double)want[i]));
        }
        fprintf(stderr, "  kxk_torch on %s: max |err| %g of max |z| %g\n", archs[a], err, mag);
        ck_assert_msg(err <= 2e-2 * mag, "%s: max |err| %g of %g", archs[a], err, mag);
        free(got);
    }
    free(want);
    test_remove_dir(dir);
}
END_TEST

START_TEST(test_refusals_say_why) {
    cli_result r = RUN("--emit", "trace", graph("refused_f16"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "'small': 49 pixels per image (< 64)"));
    ck_assert_ptr_nonnull(strstr(r.out, "'down' has strides 2: not a plain pointwise conv"));
    cli_result_free(&r);
    r = RUN("--emit", "plan", graph("refused_f16"));
    ck_assert_int_eq(count(r.out, "\"template\": \"conv2d\""), 2);
    cli_result_free(&r);
    r = RUN("--emit", "trace", graph("bn_fold_f32"));
    ck_assert_ptr_nonnull(strstr(r.out, "\"rule\":\"conv_affine_fold\""));
    ck_assert_int_eq(count(r.out, "\"rule\":\"conv1x1_as_matmul\""), 1);
    ck_assert_ptr_nonnull(strstr(r.out, "\"anchor\":\"conv_folded\""));
    cli_result_free(&r);
}
END_TEST

/* Each graph on the emulated device against the interpreter on the
 * original graph, on sm_90 and sm_80. */
START_TEST(test_emulated_runs_match) {
    if (!test_have_cxx()) return;
    static const char *const graphs[] = {"bottleneck_f16", "bottleneck_f32", "bn_fold_f32", "scaled_bf16",
                                         "refused_f16", "kxk_f16"};
    static const char *const archs[] = {"sm_90", "sm_80"};
    for (size_t g = 0; g < sizeof graphs / sizeof *graphs; g++)
        for (int a = 0; a < 2; a++) {
            bool dims = !strncmp(graphs[g], "bottleneck", 10);
            for (int size = 0; size < (dims ? 2 : 1); size++) {
                cli_result r = dims ? RUN("--arch", archs[a], "--run", "--device", "emu", "--verify", "--dim",
                                          size ? "batch=3" : "batch=1", graph(graphs[g]))
                                    : RUN("--arch", archs[a], "--run", "--device", "emu", "--verify", graph(graphs[g]));
                ck_assert_msg(r.status == 0, "%s on %s: %s", graphs[g], archs[a], r.err);
                ck_assert_msg(strstr(r.out, "(emu vs the original graph)") != NULL, "%s", r.out);
                ck_assert_ptr_null(strstr(r.out, "FAIL"));
                if (size) ck_assert_msg(strstr(r.out, "\n  emu      0 compiles") != NULL, "%s", r.out);
                cli_result_free(&r);
            }
        }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("conv_gemm");
    TCase *tc = tcase_create("conv_gemm");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_bottleneck_plans);
    tcase_add_test(tc, test_kxk_plans);
    tcase_add_test(tc, test_kxk_matches_torch);
    tcase_add_test(tc, test_refusals_say_why);
    tcase_add_test(tc, test_emulated_runs_match);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
