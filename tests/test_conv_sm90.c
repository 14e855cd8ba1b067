/*
 * test_conv_sm90.c — KxK convs as implicit GEMMs on the sm_90a GEMM
 * template (catalog rule conv_kxk_tap_major, kernelplan/launch_gemm_sm90.c
 * conv_operands, templates/gemm_sm90.cuh GM_CONV; docs/kernelplan.md
 * "KxK convs on the sm_90a GEMM"):
 *  - on sm_90 a stride-1 f16 / bf16 conv with a constant weight gets its
 *    weight repacked tap-major [KH, KW, O, C] at compile time, read through
 *    a transpose folded into the conv's kernel (one kernel, no repack
 *    launch); the planner takes the sm_90a template where the cost model
 *    prices it lower than the mma.sync implicit GEMM and traces both
 *    figures either way (a large conv takes it, a small one keeps
 *    mma.sync); sm_80 keeps the conv as it was;
 *  - refused with the reason traced (the conv keeps the mma.sync implicit
 *    GEMM): a stride, a dilation, groups, image rows or channels not a
 *    multiple of 16 bytes, f32, a weight computed at run time;
 *  - every kernel of the sweep compiles with NVRTC for sm_90a with
 *    wgmma.mma_async and cp.async.bulk.tensor, no spills, no ptxas
 *    advisory, registers within 10 % of the plan's estimate;
 *  - on the emulated device through the real runtime (tensor maps
 *    encoded by the runtime; TMA, mbarriers, wgmma and every sanitizer
 *    check on) each of 11 convs matches the reference interpreter: 3x3
 *    with and without padding (asymmetric too), 5x5, 7x7, partial tiles in
 *    O, in pixels (OW not a multiple of 64) and in C (C not a multiple of
 *    64), both dtypes, batches, bias + ReLU, a residual add, one and two
 *    consumer groups, N tiles of 64 and 128 (MCIR_SM90_CONV=always: the small shapes the
 *    emulator runs quickly would keep mma.sync by the model);
 *  - the check catches a wrong kernel: the tap's column offset dropped,
 *    the store's mask past the row dropped.
 * The generated kernel runs, not cuBLAS (MCIR_NO_CUBLAS).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_util.h"
#include "codegen/codegen-impl.h"
#include "emu/cuda_emu.h"
#include "kernelplan/kernelplan.h"
#include "mcirc/pipeline.h"
#include "pipeline_test.h"
#include "test_util.h"

typedef struct conv_shape {
    const char *name, *dt;
    int n, c, h, w, o, kh, kw;
    int pads[4];         /* top, left, bottom, right */
    const char *epi;     /* none, bias, bias_relu, res, bias_res */
    int stride, dil, groups;
    bool w_input;        /* the weight a graph input (computed at run time) */
} conv_shape;

static const conv_shape SHAPES[] = {
    {"c3p1_f16", "f16", 2, 64, 16, 64, 64, 3, 3, {1, 1, 1, 1}, "bias_relu", 1, 1, 1, false},
    {"c3p0_o128_bf16", "bf16", 1, 64, 10, 64, 128, 3, 3, {0, 0, 0, 0}, "bias", 1, 1, 1, false},
    {"c5_w56_c40_bf16", "bf16", 2, 40, 20, 56, 72, 5, 5, {2, 2, 2, 2}, "bias_res", 1, 1, 1, false},
    {"c7_w72_f16", "f16", 1, 24, 12, 72, 40, 7, 7, {3, 3, 3, 3}, "res", 1, 1, 1, false},
    {"c3p0_o136_b3_f16", "f16", 3, 24, 9, 56, 136, 3, 3, {0, 0, 0, 0}, "bias_relu", 1, 1, 1, false},
    {"c3_c136_w16_bf16", "bf16", 2, 136, 8, 16, 64, 3, 3, {1, 1, 1, 1}, "bias_relu", 1, 1, 1, false},
    {"c3_w128_f16", "f16", 1, 32, 8, 128, 96, 3, 3, {1, 1, 1, 1}, "bias", 1, 1, 1, false},
    {"c5p1_c8_bf16", "bf16", 2, 8, 11, 24, 16, 5, 5, {1, 1, 1, 1}, "none", 1, 1, 1, false},
    {"c3_asym_f16", "f16", 2, 16, 12, 40, 48, 3, 3, {0, 1, 2, 0}, "bias_res", 1, 1, 1, false},
    {"c3x1_bf16", "bf16", 1, 64, 6, 64, 64, 3, 1, {1, 0, 1, 0}, "relu", 1, 1, 1, false},
    /* enough work items for N tiles of 128 (two row segments per box set) */
    {"c3_b8_o128_f16", "f16", 8, 64, 32, 64, 128, 3, 3, {1, 1, 1, 1}, "bias_res", 1, 1, 1, false},
    /* large enough for the model to take the sm_90a template unforced */
    {"c3_model_f16", "f16", 4, 64, 32, 64, 64, 3, 3, {1, 1, 1, 1}, "bias_relu", 1, 1, 1, false},
};
enum { N_SHAPES = sizeof SHAPES / sizeof *SHAPES, MODEL_SHAPE = N_SHAPES - 1 };

static int out_h(const conv_shape *s) { return (s->h + s->pads[0] + s->pads[2] - s->dil * (s->kh - 1) - 1) / s->stride + 1; }
static int out_w(const conv_shape *s) { return (s->w + s->pads[1] + s->pads[3] - s->dil * (s->kw - 1) - 1) / s->stride + 1; }

/* The graph of s: conv2d (+ bias) then the epilogue, output "z" */
static char *conv_graph(const conv_shape *s) {
    char *js = malloc(4096);
    ck_assert_ptr_nonnull(js);
    const bool bias = strncmp(s->epi, "bias", 4) == 0, relu = strstr(s->epi, "relu") != NULL,
               res = strstr(s->epi, "res") != NULL;
    char wdecl[128], ins[512], ws[512], nodes[1024];
    snprintf(wdecl, sizeof wdecl, "{\"name\":\"w\",\"dtype\":\"%s\",\"shape\":[%d,%d,%d,%d]}", s->dt, s->o,
             s->c / s->groups, s->kh, s->kw);
    int ni = snprintf(ins, sizeof ins, "{\"name\":\"x\",\"dtype\":\"%s\",\"shape\":[%d,%d,%d,%d]}%s%s", s->dt, s->n,
                      s->c, s->h, s->w, s->w_input ? "," : "", s->w_input ? wdecl : "");
    if (res)
        snprintf(ins + ni, sizeof ins - (size_t)ni, ",{\"name\":\"r\",\"dtype\":\"%s\",\"shape\":[%d,%d,%d,%d]}", s->dt,
                 s->n, s->o, out_h(s), out_w(s));
    snprintf(ws, sizeof ws, "%s%s%s", s->w_input ? "" : wdecl, bias && !s->w_input ? "," : "", "");
    if (bias)
        snprintf(ws + strlen(ws), sizeof ws - strlen(ws), "{\"name\":\"b\",\"dtype\":\"%s\",\"shape\":[%d]}", s->dt,
                 s->o);
    int nn = snprintf(nodes, sizeof nodes,
                      "{\"name\":\"conv\",\"op\":\"conv2d\",\"inputs\":[\"x\",\"w\"%s],\"outputs\":[\"y0\"],"
                      "\"attrs\":{\"pads\":[%d,%d,%d,%d],\"strides\":[%d,%d],\"dilations\":[%d,%d],\"groups\":%d}}",
                      bias ? ",\"b\"" : "", s->pads[0], s->pads[1], s->pads[2], s->pads[3], s->stride, s->stride,
                      s->dil, s->dil, s->groups);
    const char *last = "y0";
    if (relu) {
        nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                       ",{\"name\":\"act\",\"op\":\"relu\",\"inputs\":[\"y0\"],\"outputs\":[\"y1\"]}");
        last = "y1";
    }
    if (res) {
        nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                       ",{\"name\":\"add\",\"op\":\"add\",\"inputs\":[\"%s\",\"r\"],\"outputs\":[\"z\"]}", last);
        last = "z";
    }
    snprintf(js, 4096, "{\"mcir\":1,\"name\":\"%s\",\"inputs\":[%s],\"weights\":[%s],\"nodes\":[%s],\"outputs\":[\"%s\"]}",
             s->name, ins, ws, nodes, last);
    return js;
}

static int conv_index(const mcir_plan *p) { return cgt_kernel_index(p, MCIR_TEMPLATE_CONV2D, "conv2d"); }

static int64_t tile(const mcir_kernel_plan *k, const char *dim) {
    for (int i = 0; i < k->tiling.n_dims; i++)
        if (strcmp(k->tiling.dim_names[i], dim) == 0) return k->tiling.block_tile[i];
    return 0;
}

static bool sm90_tiled(const mcir_kernel_plan *k) { return tile(k, "wg") > 0; }

/* The rewrite trace as JSON lines */
static char *trace_text(const mcir_compilation *c) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    mcir_trace_write_jsonl(c->trace, f);
    fclose(f);
    return text;
}

static void force(bool on) {
    if (on) setenv("MCIR_SM90_CONV", "always", 1);
    else unsetenv("MCIR_SM90_CONV");
}

START_TEST(test_plan_takes_sm90_for_convs) {
    for (int i = 0; i < N_SHAPES; i++) {
        const conv_shape *s = &SHAPES[i];
        char *js = conv_graph(s);
        mcir_compilation c;
        force(i != MODEL_SHAPE);
        cgt_compile_js(js, "sm_90", false, &c);
        const mcir_plan *p = c.plan;
        ck_assert_msg(p->n_kernels == 1, "%s: %d kernels (the weight's transpose folded in, the epilogue fused)",
                      s->name, p->n_kernels);
        const mcir_kernel_plan *k = &p->kernels[conv_index(p)];
        ck_assert_msg(sm90_tiled(k), "%s: %s", s->name, k->tiling.reason);
        char what[64];
        snprintf(what, sizeof what, "conv2d %dx%d as an implicit GEMM on the sm_90a template", s->kh, s->kw);
        ck_assert_msg(strstr(k->tiling.reason, what) && strstr(k->tiling.reason, "sm_90a GEMM (TMA") &&
                          strstr(k->tiling.reason, "for the mma.sync implicit GEMM") &&
                          strstr(k->tiling.reason, "(conv2d as implicit GEMM (M=N*OH*OW"),
                      "%s: %s", s->name, k->tiling.reason);
        /* the model's own choice where not forced */
        ck_assert((strstr(k->tiling.reason, "taken as MCIR_SM90_CONV=always says") == NULL) == (i == MODEL_SHAPE) ||
                  i != MODEL_SHAPE);
        if (i == MODEL_SHAPE) ck_assert_ptr_null(strstr(k->tiling.reason, "MCIR_SM90_CONV"));
        char *tr = trace_text(&c);
        ck_assert_msg(strstr(tr, "\"rule\":\"conv_kxk_tap_major\"") && strstr(tr, "\"decision\":\"applied\""), "%s",
                      s->name);
        free(tr);
        mcir_compilation_free(&c);
        force(false);
        cgt_compile_js(js, "sm_80", false, &c);   /* sm_80: no repack, the mma.sync implicit GEMM */
        k = &c.plan->kernels[conv_index(c.plan)];
        ck_assert(!sm90_tiled(k));
        tr = trace_text(&c);
        ck_assert_msg(strstr(tr, "sm_80 has no wgmma (sm_90a)"), "%s", s->name);
        free(tr);
        mcir_compilation_free(&c);
        free(js);
    }
    /* a small conv: the model keeps mma.sync, with both figures */
    const conv_shape small = {"small", "f16", 1, 64, 16, 64, 64, 3, 3, {1, 1, 1, 1}, "bias", 1, 1, 1, false};
    char *js = conv_graph(&small);
    mcir_compilation c;
    cgt_compile_js(js, "sm_90", false, &c);
    const mcir_kernel_plan *k = &c.plan->kernels[conv_index(c.plan)];
    ck_assert(!sm90_tiled(k));
    ck_assert_msg(strstr(k->tiling.reason, "; not the sm_90a GEMM: modelled ") &&
                      strstr(k->tiling.reason, " us there against "),
                  "%s", k->tiling.reason);
    mcir_compilation_free(&c);
    free(js);
}
END_TEST

/* What keeps the conv as it was on sm_90, and why (the rewrite's trace) */
START_TEST(test_refusals_say_why) {
    static const struct {
        conv_shape s;
        const char *why;
    } no[] = {
        {{"stride2", "f16", 1, 64, 16, 64, 64, 3, 3, {1, 1, 1, 1}, "bias", 2, 1, 1, false},
         "'conv' has strides 2: the TMA boxes read stride-1, undilated, single-group convs"},
        {{"dil2", "f16", 1, 64, 16, 64, 64, 3, 3, {2, 2, 2, 2}, "bias", 1, 2, 1, false}, "'conv' has dilations 2"},
        {{"groups2", "bf16", 1, 64, 16, 64, 64, 3, 3, {1, 1, 1, 1}, "none", 1, 1, 2, false}, "'conv' has groups 2"},
        {{"w60", "f16", 1, 64, 16, 60, 64, 3, 3, {1, 1, 1, 1}, "none", 1, 1, 1, false},
         "image rows of 60 elements are not a multiple of 16 bytes"},
        {{"c20", "f16", 1, 20, 16, 64, 64, 3, 3, {1, 1, 1, 1}, "none", 1, 1, 1, false},
         "20 channels are not a multiple of 16 bytes"},
        {{"f32", "f32", 1, 64, 16, 64, 64, 3, 3, {1, 1, 1, 1}, "none", 1, 1, 1, false},
         "is f32 x f32: the sm_90a GEMM takes f16 or bf16"},
        {{"w_input", "f16", 1, 64, 16, 64, 64, 3, 3, {1, 1, 1, 1}, "none", 1, 1, 1, true}, NULL},
    };
    for (int i = 0; i < (int)(sizeof no / sizeof *no); i++) {
        char *js = conv_graph(&no[i].s);
        mcir_compilation c;
        force(true);
        cgt_compile_js(js, "sm_90", false, &c);
        force(false);
        const mcir_kernel_plan *k = &c.plan->kernels[conv_index(c.plan)];
        ck_assert_msg(!sm90_tiled(k), "%s", no[i].s.name);
        /* the planner's reason: the stride or dilation, else the weight as stored */
        ck_assert_msg(strstr(k->tiling.reason, no[i].s.stride > 1   ? "not the sm_90a GEMM: a stride other than 1"
                                               : no[i].s.dil > 1    ? "not the sm_90a GEMM: a dilation"
                                               : strcmp(no[i].s.dt, "f32") == 0
                                                   ? "not the sm_90a GEMM: input and weight not both f16 or both bf16"
                                               : no[i].s.groups > 1 ? "not the sm_90a GEMM: a grouped conv"
                                                                    : "not the sm_90a GEMM: the weight is not read "
                                                                      "tap-major"),
                      "%s: %s",
                      no[i].s.name, k->tiling.reason);
        char *tr = trace_text(&c);
        if (no[i].why)   /* the rewrite's refusal */
            ck_assert_msg(strstr(tr, no[i].why), "%s: %s", no[i].s.name, tr);
        else             /* a weight computed at run time: the pattern (constants: [W]) does not match */
            ck_assert_ptr_null(strstr(tr, "\"rule\":\"conv_kxk_tap_major\""));
        free(tr);
        mcir_compilation_free(&c);
        free(js);
    }
}
END_TEST

/* Every conv of the sweep: NVRTC for sm_90a, the audit clean */
START_TEST(test_sm90_convs_compile_clean) {
    char why[256];
    if (!mcir_nvrtc_available(why, sizeof why)) {
        fprintf(stderr, "  skipped: %s\n", why);
        return;
    }
    for (int i = 0; i < N_SHAPES; i++) {
        const conv_shape *s = &SHAPES[i];
        char *js = conv_graph(s);
        mcir_compilation c;
        force(i != MODEL_SHAPE);
        cgt_compile_js(js, "sm_90", true, &c);
        force(false);
        const int ki = conv_index(c.plan);
        const char *ptx = mcir_codegen_kernel_ptx(c.codegen, ki);
        ck_assert_ptr_nonnull(ptx);
        ck_assert_ptr_nonnull(strstr(ptx, ".target sm_90a"));
        ck_assert_ptr_nonnull(strstr(ptx, "wgmma.mma_async"));
        ck_assert_ptr_nonnull(strstr(ptx, "cp.async.bulk.tensor"));
        const mcir_kernel_plan *kp = &c.plan->kernels[ki];
        const mcir_kernel_audit *a = &kp->audit;
        fprintf(stderr, "  sm_90a %-18s %-4s BN=%-3lld wg=%lld: %d registers (plan %d), spills %d/%d, wgmma %d, "
                        "bulk %d, ld.global %d, advisories %d%s%s\n",
                s->name, s->dt, (long long)tile(kp, "N"), (long long)tile(kp, "wg"), a->registers,
                kp->tiling.registers_estimate, a->spill_store_bytes, a->spill_load_bytes, a->wgmma, a->cp_async_bulk,
                a->ld_global[0] + a->ld_global[1] + a->ld_global[2], a->advisories, a->advisories ? ": " : "",
                a->advisory);
        ck_assert(a->valid);
        ck_assert_int_gt(a->wgmma, 0);
        ck_assert_int_gt(a->cp_async_bulk, 0);
        ck_assert_int_ge(a->mainloop.loops, 2);
        ck_assert_int_gt(a->mainloop.wgmma, 0);
        ck_assert_int_gt(a->mainloop.cp_async_bulk, 0);
        ck_assert_int_eq(a->mainloop.ld_global, 0);
        ck_assert_int_eq(a->mainloop.st_global, 0);
        ck_assert_int_eq(a->mma, 0);
        ck_assert_int_eq(a->spill_store_bytes, 0);
        ck_assert_int_eq(a->spill_load_bytes, 0);
        ck_assert_msg(a->advisories == 0, "%s: %s", s->name, a->advisory);
        const int est = kp->tiling.registers_estimate;
        ck_assert_msg(a->registers >= est * 0.9 && a->registers <= est * 1.1, "%s: %d registers, plan %d", s->name,
                      a->registers, est);
        mcir_compilation_free(&c);
        free(js);
    }
}
END_TEST

/* ------------------------------------------------------------ emulated */

static void (*unit_mutation)(char *unit);
static void mutate_unit(mcir_codegen *cg) { unit_mutation(cg->k[conv_index(cg->plan)].unit); }

static cgt_emu_result run_emulated(const conv_shape *s, bool forced, void (*mutate)(char *unit)) {
    char *js = conv_graph(s);
    mcir_compilation c;
    force(forced);
    cgt_compile_js(js, "sm_90", false, &c);
    force(false);
    mcir_plan *p = c.plan;
    ck_assert(sm90_tiled(&p->kernels[conv_index(p)]));
    unit_mutation = mutate;
    char *diag = NULL;
    cgt_emu_result r = cgt_emu_device(c.graph, p, c.memory, 4, 7, NULL, mutate ? mutate_unit : NULL,
                                      mutate ? &diag : NULL);
    if (diag) {
        fprintf(stderr, "%.600s", diag);
        free(diag);
    }
    const mcir_kernel_plan *k = &p->kernels[conv_index(p)];
    fprintf(stderr, "  sm_90a %-18s %-4s N=%d C=%-3d %dx%d O=%-3d %dx%d pads %d,%d,%d,%d BN=%-3lld wg=%lld %-9s: "
                    "%llu wgmma, %llu TMA loads, rel err %.3g %s\n",
            s->name, s->dt, s->n, s->c, s->h, s->w, s->o, s->kh, s->kw, s->pads[0], s->pads[1], s->pads[2], s->pads[3],
            (long long)tile(k, "N"), (long long)tile(k, "wg"), s->epi, r.wgmma, r.tma_loads, r.rel,
            r.ran && r.rel <= 2e-2 && r.finite ? "ok" : "FAIL");
    mcir_compilation_free(&c);
    free(js);
    return r;
}

START_TEST(test_sm90_convs_match_reference_emulated) {
    if (!test_have_cxx()) {
        fprintf(stderr, "  skipped: no C++ compiler for the kernel emulator\n");
        return;
    }
    int failed = 0;
    for (int i = 0; i < N_SHAPES; i++) {
        cgt_emu_result r = run_emulated(&SHAPES[i], i != MODEL_SHAPE, NULL);
        failed += !(r.ran && r.rel <= 2e-2 && r.finite && r.wgmma > 0 && r.tma_loads > 0);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* Mutants: the check fails when the kernel is wrong */
static void replace_same(char *src, const char *what, const char *with) {
    char *at = strstr(src, what);
    ck_assert_msg(at, "'%s' moved: update the mutation", what);
    ck_assert_uint_eq(strlen(what), strlen(with));
    memcpy(at, with, strlen(with));
}

/* the tap's column offset dropped: every tap reads the column of kw = 0 */
static void drop_tap_column(char *src) { replace_same(src, "+ kw - CV_PL", "+ 0  - CV_PL"); }

/* the store's mask past the row dropped: pixels past OW land on the next row */
static void drop_row_mask(char *src) {
    replace_same(src, "if (ow >= CV_OW) return;", "                        ");
}

START_TEST(test_mutants_are_caught) {
    if (!test_have_cxx()) {
        fprintf(stderr, "  skipped: no C++ compiler for the kernel emulator\n");
        return;
    }
    cgt_emu_result r = run_emulated(&SHAPES[2], true, drop_tap_column);
    ck_assert_msg(!r.ran || r.rel > 2e-2, "dropped tap offset: rel %.3g", r.rel);
    r = run_emulated(&SHAPES[2], true, drop_row_mask);
    ck_assert_msg(!r.ran || r.rel > 2e-2, "dropped row mask: rel %.3g", r.rel);
}
END_TEST

int main(void) {
    char cache[256];
    cgt_kernel_cache(cache, sizeof cache);
    setenv("MCIR_NO_CUBLAS", "1", 1);   /* the generated kernel runs */
    Suite *s = suite_create("conv_sm90");
    TCase *tc = tcase_create("conv_sm90");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, test_plan_takes_sm90_for_convs);
    tcase_add_test(tc, test_refusals_say_why);
    tcase_add_test(tc, test_sm90_convs_compile_clean);
    tcase_add_test(tc, test_mutants_are_caught);
    tcase_add_test(tc, test_sm90_convs_match_reference_emulated);
    suite_add_tcase(s, tc);
    int failed = test_main_nofork(s);
    if (cache[0]) test_remove_dir(cache);
    return failed;
}
