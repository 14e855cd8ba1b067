/*
 * test_attention_split.c — split-KV ("flash-decoding") attention: the
 * kernel planner splits Nk across blocks for decode shapes (Nq x batch x
 * heads far below the SM count) and not for prefill shapes; the split
 * kernel and its merge kernel compile with NVRTC for sm_80 and sm_90; and,
 * executed on the CPU emulator (emu/cuda_emu.h) with the partials in a
 * scratch buffer, the mma.sync / FMA split kernels (sm_80; on sm_90 f16 /
 * bf16 decode takes the sm_90a template, whose split-KV runs in
 * test_attention_sm90) match the reference interpreter (f16 tolerance 2e-2
 * relative, f32 1e-3, as test_codegen_emu); the emulator's compile and
 * arena rounding are codegen_util's.
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
            ck_assert_int_eq(k->grid[0], 2 * 4 * splits);   /* (batch*head, split) per block */
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


static void to_storage(const mcir_tensor *t, const float *v, void *out) {
    mcir_values_from_f32(t->dtype, v, out, mcir_tensor_numel(t));
}

static float from_storage(const mcir_tensor *t, const void *raw, int64_t i) {
    return (float)mcir_value_get(t->dtype, raw, i);
}

/* Runs the graph's single attention kernel (split + merge) on the emulator:
 * q, k, v, y and the scratch each their own buffer of one arena; the
 * grid is capped at 5 blocks (the kernels are grid-stride loops). */
static bool run_split_emulated(const shape *sh) {
    char *js = decode_graph(sh->dt, 2, 4, 1, sh->nk, sh->d, sh->causal);
    mcir_graph *g = cgt_graph(js);
    mcir_plan *p = plan_of(g, "sm_80");
    mcir_diag d = mcir_diag_stderr();
    ck_assert_int_eq(p->n_kernels, 1);
    const mcir_kernel_plan *kp = &p->kernels[0];
    ck_assert(split_chunk(kp) > 0);
    mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
    ck_assert_ptr_nonnull(cg);
    int64_t mgrid = 0;
    int mblock = 0;
    ck_assert(mcir_codegen_kernel_merge(cg, 0, &mgrid, &mblock));

    mcir_env *cpu = mcir_env_new(g, 3);
    for (int i = 0; i < g->n_inputs; i++) {
        float *v = malloc(sizeof(float) * (size_t)mcir_tensor_numel(g->inputs[i]));
        mcir_fill_seeded(g->inputs[i], 3, v);
        mcir_env_set(cpu, g->inputs[i], v);
        free(v);
    }
    ck_assert(mcir_interp_run(g, cpu, &d));

    /* buffers: the kernel's reads, its write, the scratch */
    int nr = kp->n_reads, nw = kp->n_writes, nb = nr + nw + 1;
    ck_assert_int_eq(nw, 1);
    emu_buffer bufs[8];
    const mcir_tensor *ts[8];
    size_t at[8], total = 0;
    ck_assert_int_le(nb, 8);
    for (int i = 0; i < nb; i++) {
        ts[i] = i < nr ? kp->reads[i] : i < nr + nw ? kp->writes[i - nr] : NULL;
        int64_t bytes = ts[i] ? mcir_tensor_bytes(ts[i]) : kp->scratch_bytes;
        at[i] = total;
        total += cgt_arena_round(bytes);
        bufs[i] = (emu_buffer){.name = ts[i] ? ts[i]->name : "scratch", .bytes = (size_t)bytes};
    }
    unsigned char *arena = aligned_alloc(256, total);
    ck_assert_ptr_nonnull(arena);
    memset(arena, 0xff, total);   /* NaN garbage */
    void *args[8];
    int arg_buf[8];
    for (int i = 0; i < nb; i++) {
        bufs[i].base = arena + at[i];
        args[i] = bufs[i].base;
        arg_buf[i] = i;
        if (i < nr) to_storage(ts[i], mcir_env_get(cpu, ts[i]), bufs[i].base);
        else bufs[i].init = calloc(bufs[i].bytes, 1);
    }
    const char *ct = kp->writes[0]->dtype == MCIR_DTYPE_F32 ? "float" : "unsigned short";
    char call[2][1024];
    for (int m = 0; m < 2; m++) {
        int n = snprintf(call[m], sizeof call[m], "%s%s(", kp->name, m ? "_merge" : "");
        for (int i = 0; i < nr; i++)
            n += snprintf(call[m] + n, sizeof call[m] - (size_t)n, "(const %s*)a[%d], ",
                          kp->reads[i]->dtype == MCIR_DTYPE_F32 ? "float" : "unsigned short", i);
        snprintf(call[m] + n, sizeof call[m] - (size_t)n, "(%s*)a[%d], (float*)a[%d]);", ct, nr, nr + 1);
    }
    int64_t grid[3], smem;
    int block[3];
    mcir_codegen_kernel_launch(cg, 0, grid, block, &smem);
    bool ok = true;
    for (int m = 0; m < 2 && ok; m++) {
        char name[300];
        snprintf(name, sizeof name, "%s%s", kp->name, m ? "_merge" : "");
        void *h = cgt_emu_compile(work_dir, test_source_dir(), name, mcir_codegen_kernel_source(cg, 0), call[m], NULL);
        ck_assert_ptr_nonnull(h);
        emu_run_fn run = (emu_run_fn)dlsym(h, "emu_run");
        void (*launch)(void **) = (void (*)(void **))dlsym(h, "emu_kernel");
        ck_assert(run && launch);
        emu_launch L = {.kernel = name, .body = launch, .args = args, .n_args = nb, .buffers = bufs,
                        .n_buffers = nb, .arg_buffer = arg_buf, .checks = EMU_CHECK_ALL};
        /* the split kernel writes the scratch; the merge reads it and writes y */
        L.write_args = m ? 1ull << nr : 1ull << (nr + 1);
        int64_t gx = m ? mgrid : grid[0];
        L.grid = (unsigned)(gx < 5 ? gx : 5);
        L.block = (unsigned)(m ? mblock : block[0]);
        L.smem = m ? 0 : (size_t)smem;
        if (run(&L) != 0) ok = false;
        dlclose(h);
    }
    const mcir_tensor *y = g->outputs[0];
    const float *ref = mcir_env_get(cpu, y);
    int64_t n = mcir_tensor_numel(y);
    double maxref = 0, maxerr = 0;
    for (int64_t i = 0; i < n && ok; i++) {
        float v = from_storage(y, bufs[nr].base, i);
        if (fabs(ref[i]) > maxref) maxref = fabs(ref[i]);
        double e = isfinite(v) ? fabs((double)v - (double)ref[i]) : INFINITY;
        if (e > maxerr) maxerr = e;
    }
    double rel = maxerr / (maxref > 1e-6 ? maxref : 1e-6), tol = y->dtype == MCIR_DTYPE_F32 ? 1e-3 : 2e-2;
    fprintf(stderr, "  split %-4s Nk=%-5d d=%-3d%s %lld splits: rel err %.3g %s\n", sh->dt, sh->nk, sh->d,
            sh->causal ? " causal" : "", (long long)((sh->nk + split_chunk(kp) - 1) / split_chunk(kp)), rel,
            ok && rel <= tol && maxref > 0 ? "ok" : "FAIL");
    ok = ok && rel <= tol && maxref > 0;
    for (int i = 0; i < nb; i++) free(bufs[i].init);
    free(arena);
    mcir_env_free(cpu);
    mcir_codegen_free(cg);
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
    cgt_temp_cache(cache, sizeof cache);
    Suite *s = suite_create("attention_split");
    TCase *tc = tcase_create("split");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_plan_splits_decode_shapes_only);
    tcase_add_test(tc, test_split_kernels_compile_nvrtc);
    tcase_add_test(tc, test_split_decode_matches_reference_emulated);
    suite_add_tcase(s, tc);
    int failed = test_main_nofork(s);
    test_remove_dir(work_dir);
    test_remove_dir(cache);
    return failed;
}
