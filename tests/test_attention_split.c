/*
 * test_attention_split.c — split-KV ("flash-decoding") attention: the
 * kernel planner splits Nk across blocks for decode shapes (Nq x batch x
 * heads far below the SM count) and not for prefill shapes; the split
 * kernel and its merge kernel compile with NVRTC for sm_80 and sm_90; and,
 * run on the emulated device through the real runtime (the memory plan
 * places the partials' scratch, the runtime launches the merge), the
 * mma.sync / FMA split kernels (sm_80; on sm_90 f16 / bf16 decode takes
 * the sm_90a template, whose split-KV runs in test_attention_sm90) match
 * the reference interpreter (f16 tolerance 2e-2 relative, f32 1e-3, as
 * test_codegen_emu).
 */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_util.h"
#include "emu/cuda_emu.h"
#include "kernelplan/kernelplan.h"
#include "test_util.h"

static char work_dir[256];

/* {"q":[B,H,NQ,D], "k":[B,H,NK,D], "v":[B,H,NK,D]} -> attention -> y */
static char *decode_graph(const char *dt, int b, int h, int nq, int nk, int d, bool causal) {
    char *s = malloc(1024);
    ck_assert_ptr_nonnull(s);
    snprintf(s, 1024,
             "{\"mcir\":1,\"name\":\"att_%s_%d_%d\",\"inputs\":["
             "{\"name\":\"q\",\"dtype\":\"%s\",\"shape\":[%d,%d,%d,%d]},"
             "{\"name\":\"k\",\"dtype\":\"%s\",\"shape\":[%d,%d,%d,%d]},"
             "{\"name\":\"v\",\"dtype\":\"%s\",\"shape\":[%d,%d,%d,%d]}],"
             "\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],"
             "\"outputs\":[\"y\"],\"attrs\":{\"causal\":%s}}],\"outputs\":[\"y\"]}",
             dt, nk, d, dt, b, h, nq, d, dt, b, h, nk, d, dt, b, h, nk, d, causal ? "true" : "false");
    return s;
}

static mcir_plan *plan_of(mcir_graph *g, const char *arch) {
    mcir_diag d = mcir_diag_stderr();
    mcir_plan *p = mcir_plan_build(g, mcir_target_find(arch), NULL, &d);
    ck_assert_ptr_nonnull(p);
    return p;
}

static const mcir_kernel_plan *attention_kernel(const mcir_plan *p) {
    for (int i = 0; i < p->n_kernels; i++)
        if (p->kernels[i].tpl == MCIR_TEMPLATE_STREAMING_ATTENTION) return &p->kernels[i];
    ck_abort_msg("no attention kernel in the plan");
    return NULL;
}

static int64_t split_chunk(const mcir_kernel_plan *k) {
    for (int i = 0; i < k->tiling.n_dims; i++)
        if (strcmp(k->tiling.dim_names[i], "kv_split") == 0) return k->tiling.block_tile[i];
    return 0;
}

START_TEST(test_plan_splits_decode_shapes_only) {
    static const char *const arch[] = {"sm_80", "sm_90"};
    for (int a = 0; a < 2; a++) {
        for (int nk = 1024; nk <= 131072; nk *= 2) {
            char *js = decode_graph("f16", 2, 4, 1, nk, 128, false);
            mcir_graph *g = cgt_graph(js);
            mcir_plan *p = plan_of(g, arch[a]);
            const mcir_kernel_plan *k = attention_kernel(p);
            int64_t chunk = split_chunk(k), splits = chunk ? (nk + chunk - 1) / chunk : 1;
            fprintf(stderr, "  %s decode b2 h4 Nq=1 Nk=%-6d d=128: %lld splits of %lld keys, grid %lld, "
                            "scratch %lld B\n", arch[a], nk, (long long)splits, (long long)chunk,
                    (long long)(k->grid[0] * k->grid[1] * k->grid[2]), (long long)k->scratch_bytes);
            ck_assert_int_ge(splits, 2);
            ck_assert_int_eq(chunk % 128, 0);
            ck_assert_int_ge(chunk, 256);
            /* (batch*head, split) work items: a block each on sm_80, on
             * sm_90 persistent blocks (at most one per SM) walking them */
            int64_t items = 2 * 4 * splits, sms = p->target->sm_count;
            ck_assert_int_eq(k->grid[0], a == 0 || items < sms ? items : sms);
            ck_assert_int_eq(k->scratch_bytes, 2 * 4 * 1 * splits * (128 + 2) * 4);
            ck_assert_ptr_nonnull(strstr(k->tiling.reason, "split-KV"));
            mcir_plan_free(p);
            mcir_graph_free(g);
            free(js);
        }
        /* prefill: 16 q-blocks x 32 (batch, head) fill the GPU — no split */
        char *js = decode_graph("f16", 2, 16, 2048, 2048, 128, true);
        mcir_graph *g = cgt_graph(js);
        mcir_plan *p = plan_of(g, arch[a]);
        const mcir_kernel_plan *k = attention_kernel(p);
        ck_assert_int_eq(split_chunk(k), 0);
        ck_assert_int_eq(k->scratch_bytes, 0);
        ck_assert_ptr_null(strstr(k->tiling.reason, "split-KV"));
        mcir_plan_free(p);
        mcir_graph_free(g);
        free(js);
        /* short decode: too few keys to split */
        js = decode_graph("f32", 1, 1, 1, 300, 64, false);
        g = cgt_graph(js);
        p = plan_of(g, arch[a]);
        k = attention_kernel(p);
        ck_assert_int_eq(split_chunk(k), 0);
        mcir_plan_free(p);
        mcir_graph_free(g);
        free(js);
    }
}
END_TEST

typedef struct shape { const char *dt; int nk, d; bool causal; } shape;
static const shape SHAPES[] = {
    {"f16", 4096, 64, false}, {"f16", 4096, 128, false}, {"f32", 4096, 64, false},
    {"f32", 4096, 128, false}, {"f16", 1000, 64, false}, {"f32", 1000, 128, false},
    {"bf16", 1000, 64, true},
};

START_TEST(test_split_kernels_compile_nvrtc) {
    char why[256];
    if (!mcir_nvrtc_available(why, sizeof why)) {
        fprintf(stderr, "  skipped: %s\n", why);
        return;
    }
    static const char *const arch[] = {"sm_80", "sm_90"};
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i += 2)   /* f16 d64, f32 d64, f16 odd, bf16 causal */
        for (int a = 0; a < 2; a++) {
            char *js = decode_graph(SHAPES[i].dt, 2, 4, 1, SHAPES[i].nk, SHAPES[i].d, SHAPES[i].causal);
            mcir_graph *g = cgt_graph(js);
            mcir_plan *p = plan_of(g, arch[a]);
            mcir_diag d = mcir_diag_stderr();
            mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
            ck_assert_ptr_nonnull(cg);
            int ki = (int)(attention_kernel(p) - p->kernels);
            int64_t mg = 0;
            int mb = 0;
            ck_assert(mcir_codegen_kernel_merge(cg, ki, &mg, &mb));
            ck_assert_int_eq(mg, 2 * 4);
            ck_assert_msg(mcir_codegen_compile(cg, arch[a], &d), "%s Nk=%d d=%d on %s", SHAPES[i].dt,
                          SHAPES[i].nk, SHAPES[i].d, arch[a]);
            /* both entries are in the PTX */
            const char *ptx = mcir_codegen_kernel_ptx(cg, ki);
            ck_assert_ptr_nonnull(ptx);
            ck_assert_ptr_nonnull(strstr(ptx, "_merge("));
            mcir_codegen_free(cg);
            mcir_plan_free(p);
            mcir_graph_free(g);
            free(js);
        }
}
END_TEST

/* ------------------------------------------------------------ emulated */

/* The graph's attention (split kernel + merge) on the emulated device
 * through the real runtime: the memory plan places the scratch, the
 * runtime launches the split kernel and its merge; capped at 5 blocks a
 * launch (the kernels are grid-stride loops). sm_80 plans: the mma.sync /
 * FMA split path (sm_90 f16 decode takes the sm_90a template). */
static bool run_split_emulated(const shape *sh) {
    char *js = decode_graph(sh->dt, 2, 4, 1, sh->nk, sh->d, sh->causal);
    mcir_graph *g = cgt_graph(js);
    mcir_plan *p = plan_of(g, "sm_80");
    mcir_diag d = mcir_diag_stderr();
    ck_assert_int_eq(p->n_kernels, 1);
    const mcir_kernel_plan *kp = &p->kernels[0];
    ck_assert(split_chunk(kp) > 0);
    int64_t splits = (sh->nk + split_chunk(kp) - 1) / split_chunk(kp);
    mcir_memplan *mp = mcir_memplan_build(p, NULL, NULL, &d);
    ck_assert_ptr_nonnull(mp);
    cgt_emu_result r = cgt_emu_device(g, p, mp, 5, 3, NULL, NULL, NULL);
    const mcir_tensor *y = g->outputs[0];
    double tol = y->dtype == MCIR_DTYPE_F32 ? 1e-3 : 2e-2;
    bool ok = r.ran && r.finite && r.rel <= tol && r.launches == 2;   /* the split kernel and its merge */
    fprintf(stderr, "  split %-4s Nk=%-5d d=%-3d%s %lld splits: %d launches, rel err %.3g %s\n", sh->dt, sh->nk, sh->d,
            sh->causal ? " causal" : "", (long long)splits, r.launches, r.rel, ok ? "ok" : "FAIL");
    mcir_memplan_free(mp);
    mcir_plan_free(p);
    mcir_graph_free(g);
    free(js);
    return ok;
}

START_TEST(test_split_decode_matches_reference_emulated) {
    if (!test_have_cxx()) {
        fprintf(stderr, "  skipped: no C++ compiler for the kernel emulator\n");
        return;
    }
    int failed = 0;
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++) failed += !run_split_emulated(&SHAPES[i]);
    ck_assert_int_eq(failed, 0);
}
END_TEST

int main(void) {
    if (!test_tempdir("split", work_dir, sizeof work_dir)) return 1;
    char cache[256];
    cgt_kernel_cache(cache, sizeof cache);
    Suite *s = suite_create("attention_split");
    TCase *tc = tcase_create("split");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_plan_splits_decode_shapes_only);
    tcase_add_test(tc, test_split_kernels_compile_nvrtc);
    tcase_add_test(tc, test_split_decode_matches_reference_emulated);
    suite_add_tcase(s, tc);
    int failed = test_main_nofork(s);
    test_remove_dir(work_dir);
    if (cache[0]) test_remove_dir(cache);
    return failed;
}
