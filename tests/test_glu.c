/*
 * test_glu.c — the paired epilogue (#44): a gated MLP's act(x·Wg) * (x·Wu)
 * as one GEMM over the two constant weights interleaved in blocks of 8
 * columns (the rule glu_matmul, rewrites' fuse_glu_matmul), the epilogue
 * computing act(gate) * up from each thread's accumulator pairs:
 *  - the plan: one kernel computes the product [.., 2F] and writes only
 *    [.., F]; on sm_90 the sm_90a template (a paired epilogue named in its
 *    reason, TMA stores where BLOCK_N >= 128), on sm_80 the mma.sync ring
 *    with warp tiles of whole 16-column blocks;
 *  - every kernel compiles for its target with no spill, no ptxas
 *    advisory, and registers within the model's band;
 *  - on the emulated device (the real runtime, every sanitizer check on)
 *    each shape matches the reference interpreter run on the original
 *    graph: f16 and bf16, SiLU, GELU (erf and tanh), ReLU, weights [F, K]
 *    and [K, F], partial tiles in M and in the output's columns, a leading
 *    batch dim, BLOCK_N 64 (per-thread stores) and 128 (TMA stores; 256
 *    in the compiled-only Llama shapes), an epilogue after the product (a
 *    scale, a residual), a down projection after it, and a cast from f32
 *    before it (on sm_90 the cast is the same kernel's prologue);
 *  - mutants: the pair's halves swapped (the GLU reading the wrong half)
 *    and the up value taken from the gate's own block are wrong results.
 * The generated kernel runs, not cuBLAS (MCIR_NO_CUBLAS); MCIR_GLU=always
 * fuses at the emulator's sizes (test_rewrites checks the model's choice).
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_util.h"
#include "codegen/codegen-impl.h"
#include "emu/cuda_emu.h"
#include "kernelplan/kernelplan.h"
#include "pipeline_test.h"
#include "test_util.h"

static char work_dir[256];

typedef struct glu_case {
    const char *name, *dt;
    int lead;           /* a leading batch dim (0: none) */
    int m, k, f;        /* x [.., M, K], the projections' F columns each */
    bool tb;            /* weights [F, K] (transpose_b), else [K, F] */
    const char *act;    /* silu, gelu, gelu_tanh, relu */
    const char *tail;   /* none, scale (h * 0.5 in the GEMM's epilogue), residual (h + r, r an input of h's
                         * shape), down (a down projection [F] -> [K] after) */
    bool from_f32;      /* x given in f32 and cast to dt first (on sm_90 the cast is the GEMM's prologue) */
} glu_case;

static const glu_case CASES[] = {
    {"silu_tb", "f16", 2, 96, 128, 136, true, "silu", "none", false},         /* partial N (272 = 256 + 16), batch */
    {"gelu_kn_bf", "bf16", 0, 200, 72, 64, false, "gelu", "none", false},    /* partial M and K, BN 64: per-thread stores */
    {"relu_tb", "f16", 0, 256, 128, 512, true, "relu", "none", false},       /* tiles divide: unchecked */
    {"silu_bn256", "f16", 0, 256, 64, 1024, true, "silu", "none", false},    /* N = 2048: BN 128, TMA stores */
    {"geluT_bf", "bf16", 0, 130, 96, 192, true, "gelu_tanh", "none", false}, /* partial output box (192 = 128 + 64) */
    {"silu_scale", "f16", 0, 128, 64, 256, false, "silu", "scale", false},   /* one more op in the epilogue */
    {"silu_res_bf", "bf16", 2, 64, 64, 128, true, "silu", "residual", false},/* a residual read at the output's index */
    {"mlp_down", "f16", 0, 128, 256, 512, true, "silu", "down", false},      /* the down projection after */
    {"cast_silu", "f16", 0, 128, 128, 256, true, "silu", "none", true}, /* a cast from f32 before: a prologue */
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

/* compiled only (the emulator would take hours): Llama-7B's and
 * Llama-3-8B's gate and up projections at 4096 tokens (BLOCK_N 256, the
 * grouped tile order), and at 16 (one consumer group) */
static const glu_case BIG[] = {
    {"llama7_4096", "f16", 0, 4096, 4096, 11008, true, "silu", "none", false},
    {"llama3_4096", "bf16", 0, 4096, 4096, 14336, true, "silu", "none", false},
    {"llama7_16", "f16", 0, 16, 4096, 11008, true, "silu", "none", false},
};
#define N_BIG ((int)(sizeof BIG / sizeof BIG[0]))

static char *glu_graph(const glu_case *c) {
    char *js = malloc(8192), x[64], h[64], w[64], wd[64];
    ck_assert_ptr_nonnull(js);
    if (c->lead) {
        snprintf(x, sizeof x, "[%d, %d, %d]", c->lead, c->m, c->k);
        snprintf(h, sizeof h, "[%d, %d, %d]", c->lead, c->m, c->f);
    } else {
        snprintf(x, sizeof x, "[%d, %d]", c->m, c->k);
        snprintf(h, sizeof h, "[%d, %d]", c->m, c->f);
    }
    snprintf(w, sizeof w, "[%d, %d]", c->tb ? c->f : c->k, c->tb ? c->k : c->f);
    snprintf(wd, sizeof wd, "[%d, %d]", c->k, c->f);   /* down: [K, F] with transpose_b */
    const bool gelu = strncmp(c->act, "gelu", 4) == 0;
    char act[160];
    snprintf(act, sizeof act, "{\"name\": \"act\", \"op\": \"%s\", \"inputs\": [\"g\"], \"outputs\": [\"ga\"]%s}",
             gelu ? "gelu" : c->act,
             gelu ? (strcmp(c->act, "gelu_tanh") == 0 ? ", \"attrs\": {\"approximate\": \"tanh\"}"
                                                       : ", \"attrs\": {\"approximate\": \"none\"}")
                  : "");
    const char *tail = "", *out = "h";
    char cast[160] = "";
    if (c->from_f32)
        snprintf(cast, sizeof cast, "\n  {\"name\": \"cast\", \"op\": \"cast\", \"inputs\": [\"x32\"], \"outputs\": [\"x\"], "
                                    "\"attrs\": {\"to\": \"%s\"}},", c->dt);
    char tail_buf[512], inputs_extra[128] = "", weights_extra[128] = "";
    if (strcmp(c->tail, "scale") == 0) {
        tail = ", {\"name\": \"sc\", \"op\": \"scale\", \"inputs\": [\"h\"], \"outputs\": [\"y\"], "
               "\"attrs\": {\"value\": 0.5}}";
        out = "y";
    } else if (strcmp(c->tail, "residual") == 0) {
        tail = ", {\"name\": \"res\", \"op\": \"add\", \"inputs\": [\"h\", \"r\"], \"outputs\": [\"y\"]}";
        snprintf(inputs_extra, sizeof inputs_extra, ", {\"name\": \"r\", \"dtype\": \"%s\", \"shape\": %s}", c->dt, h);
        out = "y";
    } else if (strcmp(c->tail, "down") == 0) {
        snprintf(tail_buf, sizeof tail_buf,
                 ", {\"name\": \"down\", \"op\": \"matmul\", \"inputs\": [\"h\", \"wd\"], \"outputs\": [\"y\"], "
                 "\"attrs\": {\"transpose_b\": true}}");
        tail = tail_buf;
        snprintf(weights_extra, sizeof weights_extra, ", {\"name\": \"wd\", \"dtype\": \"%s\", \"shape\": %s}", c->dt,
                 wd);
        out = "y";
    }
    snprintf(js, 8192,
             "{\"mcir\": 1, \"name\": \"glu_%s\",\n"
             " \"inputs\": [{\"name\": \"%s\", \"dtype\": \"%s\", \"shape\": %s}%s],\n"
             " \"weights\": [{\"name\": \"wg\", \"dtype\": \"%s\", \"shape\": %s},"
             " {\"name\": \"wu\", \"dtype\": \"%s\", \"shape\": %s}%s],\n"
             " \"nodes\": [%s\n"
             "  {\"name\": \"gate\", \"op\": \"matmul\", \"inputs\": [\"x\", \"wg\"], \"outputs\": [\"g\"], "
             "\"attrs\": {\"transpose_b\": %s}},\n"
             "  {\"name\": \"up\", \"op\": \"matmul\", \"inputs\": [\"x\", \"wu\"], \"outputs\": [\"u\"], "
             "\"attrs\": {\"transpose_b\": %s}},\n"
             "  %s,\n"
             "  {\"name\": \"glu\", \"op\": \"mul\", \"inputs\": [\"ga\", \"u\"], \"outputs\": [\"h\"]}%s],\n"
             " \"outputs\": [\"%s\"]}\n",
             c->name, c->from_f32 ? "x32" : "x", c->from_f32 ? "f32" : c->dt, x, inputs_extra, c->dt, w, c->dt, w,
             weights_extra, cast, c->tb ? "true" : "false",
             c->tb ? "true" : "false", act, tail, out);
    return js;
}

/* The kernel computing the interleaved product. */
static int glu_index(const mcir_plan *p) {
    for (int i = 0; i < p->n_kernels; i++) {
        const mcir_kernel_plan *k = &p->kernels[i];
        if (k->tpl == MCIR_TEMPLATE_MATMUL && k->anchor && strstr(k->anchor->name, "glu.matmul")) return i;
    }
    ck_abort_msg("no kernel computes the interleaved product");
    return -1;
}

static int64_t tile(const mcir_kernel_plan *k, const char *dim) {
    for (int i = 0; i < k->tiling.n_dims && i < MCIR_MAX_TILE_DIMS; i++)
        if (strcmp(k->tiling.dim_names[i], dim) == 0) return k->tiling.block_tile[i];
    return 0;
}

static const char *const ARCHS[] = {"sm_90", "sm_80"};

/* One kernel computes the product and writes only the half-width output
 * (or what the epilogue after it makes of it); the product is internal. */
START_TEST(test_glu_plan) {
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < N_CASES; i++) {
            const glu_case *c = &CASES[i];
            char *js = glu_graph(c);
            mcir_compilation cp;
            cgt_compile_js(js, ARCHS[a], false, &cp);
            const mcir_plan *p = cp.plan;
            const mcir_kernel_plan *k = &p->kernels[glu_index(p)];
            const mcir_tensor *P = k->anchor->outputs[0];
            ck_assert_int_eq(P->shape[P->rank - 1], 2 * c->f);
            ck_assert_int_eq(k->n_writes, 1);
            const mcir_tensor *w = k->writes[0];
            ck_assert_int_eq(w->shape[w->rank - 1], c->f);
            ck_assert_str_eq(w->name, strcmp(c->tail, "scale") == 0 || strcmp(c->tail, "residual") == 0 ? "y" : "h");
            for (int r = 0; r < k->n_reads; r++) ck_assert(k->reads[r] != P);
            /* the gate's and the up's products are gone: one GEMM reads x */
            ck_assert_ptr_null(mcir_graph_find_node(cp.graph, "gate"));
            ck_assert_ptr_null(mcir_graph_find_node(cp.graph, "up"));
            const bool sm90 = tile(k, "wg") > 0;
            ck_assert_int_eq(sm90, a == 0);
            if (sm90)
                ck_assert_msg(strstr(k->tiling.reason, "paired epilogue") != NULL, "%s: %s", c->name,
                              k->tiling.reason);
            fprintf(stderr, "  %s %-12s BN=%-3lld %s\n", ARCHS[a], c->name, (long long)tile(k, "N"),
                    sm90 ? strstr(k->tiling.reason, "the output by") : "mma.sync ring");
            mcir_compilation_free(&cp);
            free(js);
        }
}
END_TEST

START_TEST(test_glu_compiles_clean) {
    char why[256];
    if (!mcir_nvrtc_available(why, sizeof why)) {
        fprintf(stderr, "  skipped: %s\n", why);
        return;
    }
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < N_CASES + N_BIG; i++) {
            const glu_case *c = i < N_CASES ? &CASES[i] : &BIG[i - N_CASES];
            char *js = glu_graph(c);
            mcir_compilation cp;
            cgt_compile_js(js, ARCHS[a], true, &cp);
            const int ki = glu_index(cp.plan);
            const mcir_kernel_plan *k = &cp.plan->kernels[ki];
            const mcir_kernel_audit *au = &k->audit;
            const int est = k->tiling.registers_estimate;
            fprintf(stderr, "  %s %-12s BN=%-3lld: %d registers (plan %d), spills %d/%d, advisories %d%s%s\n", ARCHS[a],
                    c->name, (long long)tile(k, "N"), au->registers, est, au->spill_store_bytes, au->spill_load_bytes,
                    au->advisories, au->advisories ? ": " : "", au->advisory);
            ck_assert(au->valid);
            ck_assert_int_eq(au->spill_store_bytes, 0);
            ck_assert_int_eq(au->spill_load_bytes, 0);
            ck_assert_msg(au->advisories == 0, "%s: %s", c->name, au->advisory);
            if (a == 0) ck_assert_int_gt(au->wgmma, 0);
            else ck_assert_int_gt(au->mma, 0);
            /* the band of test_gemm_sm90 (10 % or 8) on sm_90a, test_launch's 10 % on sm_80 */
            const int tol = a == 0 ? (est / 10 > 8 ? est / 10 : 8) : (est + 9) / 10;
            if (getenv("MCIR_TEST_ALL_REGS") && abs(au->registers - est) > tol)
                fprintf(stderr, "  OFF %s %s: %d registers, plan %d\n", ARCHS[a], c->name, au->registers, est);
            else
                ck_assert_msg(abs(au->registers - est) <= tol, "%s %s: %d registers, plan %d", ARCHS[a], c->name,
                              au->registers, est);
            mcir_compilation_free(&cp);
            free(js);
        }
}
END_TEST

/* ------------------------------------------------------------ emulated */

static void (*unit_mutation)(char *unit);
static void mutate_unit(mcir_codegen *cg) { unit_mutation(cg->k[glu_index(cg->plan)].unit); }

static cgt_emu_result run_emulated(const glu_case *c, const char *arch, void (*mutate)(char *unit)) {
    char *js = glu_graph(c);
    mcir_compilation cp;
    cgt_compile_js(js, arch, false, &cp);
    mcir_plan *p = cp.plan;
    unit_mutation = mutate;
    char *diag = NULL;
    cgt_emu_result r = cgt_emu_device(cp.graph, p, cp.memory, 4, 11, NULL, mutate ? mutate_unit : NULL,
                                      mutate ? &diag : NULL);
    if (diag) {
        fprintf(stderr, "%.600s", diag);
        free(diag);
    }
    const mcir_kernel_plan *k = &p->kernels[glu_index(p)];
    const int findings = r.findings[0] + r.findings[1] + r.findings[2] + r.findings[3];
    fprintf(stderr, "  %s %-12s %-4s M=%-4d K=%-4d F=%-4d BN=%-3lld %-9s %-9s: %llu wgmma, %llu TMA stores, %d "
                    "findings, rel err %.3g %s\n",
            arch, c->name, c->dt, c->m, c->k, c->f, (long long)tile(k, "N"), c->act, c->tail, r.wgmma, r.tma_stores,
            findings, r.rel, r.ran && r.rel <= 2e-2 && r.finite && !findings ? "ok" : "FAIL");
    mcir_compilation_free(&cp);
    free(js);
    return r;
}

START_TEST(test_glu_matches_reference_emulated) {
    if (!test_have_cxx()) {
        fprintf(stderr, "  skipped: no C++ compiler for the kernel emulator\n");
        return;
    }
    int failed = 0;
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < N_CASES; i++) {
            cgt_emu_result r = run_emulated(&CASES[i], ARCHS[a], NULL);
            const int findings = r.findings[0] + r.findings[1] + r.findings[2] + r.findings[3];
            failed += !(r.ran && r.rel <= 2e-2 && r.finite && findings == 0 && (a == 1 || r.wgmma > 0));
        }
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* the pair's halves swapped: the gate's value read as the up's and the
 * up's as the gate's (the same lengths: " & 0xffffu" / " >> 16") */
static void swap_halves(char *src) {
    char *a = strstr(src, "__float_as_int(acc) & 0xffffu"), *b = strstr(src, "__float_as_int(acc) >> 16");
    ck_assert_msg(a && b, "no pair function in the GEMM's kernel: update the mutation");
    a += strlen("__float_as_int(acc)");
    b += strlen("__float_as_int(acc)");
    memcpy(a, " >> 16    ", 10);
    memcpy(b, "&65535", 6);
}

/* the up value taken from the gate's own block (v + 1, the next column),
 * not the next block's (v + 4) */
static void up_from_gate_block(char *src) {
    /* every occurrence: the box path's (d[..]) and the per-thread path's (dr[..]: a row block's) */
    char *p = strstr(src, "[v + 4], rs, v)");
    ck_assert_msg(p, "no pair read in the sm_90a template: update the mutation");
    for (; p; p = strstr(p + 1, "[v + 4], rs, v)")) p[strlen("[v + ")] = '1';
}

START_TEST(test_glu_mutants_are_wrong) {
    if (!test_have_cxx()) {
        fprintf(stderr, "  skipped: no C++ compiler for the kernel emulator\n");
        return;
    }
    const glu_case *c = &CASES[1];   /* per-thread stores on sm_90 */
    for (int a = 0; a < 2; a++) {
        cgt_emu_result r = run_emulated(c, ARCHS[a], swap_halves);
        ck_assert(r.ran);
        ck_assert_msg(!(r.rel <= 2e-2 && r.finite), "%s: the halves swapped went unnoticed", ARCHS[a]);
    }
    cgt_emu_result r = run_emulated(c, "sm_90", up_from_gate_block);
    ck_assert(r.ran);
    ck_assert_msg(!(r.rel <= 2e-2 && r.finite), "the up value from the gate's block went unnoticed");
}
END_TEST

int main(void) {
    if (!test_tempdir("glu", work_dir, sizeof work_dir)) return 1;
    char cache[256];
    cgt_kernel_cache(cache, sizeof cache);
    setenv("MCIR_NO_CUBLAS", "1", 1);   /* the generated kernels run */
    setenv("MCIR_GLU", "always", 1);    /* fused at the emulator's sizes, whatever the model says */
    setenv("MCIR_SM90_PROLOGUE", "always", 1);   /* the cast too (test_rewrites checks prologue_pays) */
    Suite *s = suite_create("glu");
    TCase *tc = tcase_create("glu");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, test_glu_plan);
    tcase_add_test(tc, test_glu_compiles_clean);
    tcase_add_test(tc, test_glu_mutants_are_wrong);
    tcase_add_test(tc, test_glu_matches_reference_emulated);
    suite_add_tcase(s, tc);
    int failed = test_main_nofork(s);
    test_remove_dir(work_dir);
    if (cache[0]) test_remove_dir(cache);
    return failed;
}
