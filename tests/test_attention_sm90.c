/*
 * test_attention_sm90.c — the sm_90a streaming-attention path
 * (templates/attention_sm90.cuh: TMA + mbarriers + wgmma, a producer warp
 * group and consumer warp groups): the planner picks it on sm_90 for
 * f16/bf16 head dims 64/128/256 and says why not elsewhere; the kernels
 * compile with NVRTC for sm_90a with wgmma and cp.async.bulk.tensor in the
 * PTX and no spills (the static audit); and, executed on the CPU emulator
 * (tests/cuda_emu.h: wgmma, TMA with the runtime's tensor maps encoded by
 * emu_tensor_map_encode_tiled, mbarriers, every sanitizer check on), they
 * match the reference interpreter for head dims 64/128/256, causal and
 * not, Nq=77 Nk=133, two q-tiles, and a decode shape (f16 tolerance 2e-2
 * relative, as test_codegen_emu).
 */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_util.h"
#include "cuda_emu.h"
#include "kernelplan/kernelplan.h"
#include "test_util.h"

static char work_dir[256];

static char *att_graph(const char *dt, int b, int h, int nq, int nk, int d, bool causal) {
    char *s = malloc(1024);
    ck_assert_ptr_nonnull(s);
    snprintf(s, 1024,
             "{\"mcir\":1,\"name\":\"h_%s_%d_%d_%d%s\",\"inputs\":["
             "{\"name\":\"q\",\"dtype\":\"%s\",\"shape\":[%d,%d,%d,%d]},"
             "{\"name\":\"k\",\"dtype\":\"%s\",\"shape\":[%d,%d,%d,%d]},"
             "{\"name\":\"v\",\"dtype\":\"%s\",\"shape\":[%d,%d,%d,%d]}],"
             "\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],"
             "\"outputs\":[\"y\"],\"attrs\":{\"causal\":%s}}],\"outputs\":[\"y\"]}",
             dt, nq, nk, d, causal ? "c" : "", dt, b, h, nq, d, dt, b, h, nk, d, dt, b, h, nk, d,
             causal ? "true" : "false");
    return s;
}

static mcir_plan *plan_of(mcir_graph *g, const char *arch) {
    mcir_diag d = mcir_diag_stderr();
    mcir_plan *p = mcir_plan_build(g, mcir_target_find(arch), NULL, &d);
    ck_assert_ptr_nonnull(p);
    return p;
}

static int attention_index(const mcir_plan *p) {
    for (int i = 0; i < p->n_kernels; i++)
        if (p->kernels[i].tpl == MCIR_TEMPLATE_STREAMING_ATTENTION) return i;
    ck_abort_msg("no attention kernel in the plan");
    return -1;
}

static bool sm90_tiled(const mcir_kernel_plan *k) {
    for (int i = 0; i < k->tiling.n_dims; i++)
        if (strcmp(k->tiling.dim_names[i], "wg") == 0) return k->tiling.block_tile[i] > 0;
    return false;
}

typedef struct shape { const char *dt; int b, h, nq, nk, d; bool causal; } shape;
static const shape SHAPES[] = {
    {"f16", 1, 2, 77, 133, 64, false},  {"f16", 1, 2, 77, 133, 64, true},
    {"f16", 1, 2, 77, 133, 128, false}, {"bf16", 1, 2, 77, 133, 128, true},
    {"f16", 1, 1, 77, 133, 256, false}, {"f16", 1, 1, 77, 133, 256, true},
    {"f16", 1, 1, 200, 150, 64, true},  /* two q-tiles, Nq > Nk (rows with nothing to see) */
    {"f16", 2, 2, 1, 133, 128, false},  /* decode */
    {"f16", 1, 2, 200, 40, 64, true},   /* 4 items on 3 blocks: 0 K/V tiles, then 1 (the turns run on) */
};
enum { N_SHAPES = sizeof SHAPES / sizeof *SHAPES };

START_TEST(test_plan_picks_sm90_path) {
    for (int i = 0; i < N_SHAPES; i++) {
        const shape *s = &SHAPES[i];
        char *js = att_graph(s->dt, s->b, s->h, s->nq, s->nk, s->d, s->causal);
        mcir_graph *g = cgt_graph(js);
        mcir_plan *p = plan_of(g, "sm_90");
        const mcir_kernel_plan *k = &p->kernels[attention_index(p)];
        ck_assert_msg(sm90_tiled(k), "%s d=%d: %s", s->dt, s->d, k->tiling.reason);
        ck_assert_ptr_nonnull(strstr(k->tiling.reason, "sm_90a path"));
        mcir_plan_free(p);
        /* sm_80 keeps the mma.sync path */
        p = plan_of(g, "sm_80");
        ck_assert(!sm90_tiled(&p->kernels[attention_index(p)]));
        mcir_plan_free(p);
        mcir_graph_free(g);
        free(js);
    }
    /* f32, head dim 80: the current path, with the reason */
    static const struct { const char *dt; int d; const char *why; } no[] = {
        {"f32", 64, "not all f16"}, {"f16", 80, "head dims other than"}};
    for (int i = 0; i < 2; i++) {
        char *js = att_graph(no[i].dt, 1, 2, 77, 133, no[i].d, false);
        mcir_graph *g = cgt_graph(js);
        mcir_plan *p = plan_of(g, "sm_90");
        const mcir_kernel_plan *k = &p->kernels[attention_index(p)];
        ck_assert(!sm90_tiled(k));
        ck_assert_msg(strstr(k->tiling.reason, "not the sm_90a path") && strstr(k->tiling.reason, no[i].why),
                      "%s", k->tiling.reason);
        mcir_plan_free(p);
        mcir_graph_free(g);
        free(js);
    }
}
END_TEST

START_TEST(test_sm90_kernels_compile_nvrtc) {
    char why[256];
    if (!mcir_nvrtc_available(why, sizeof why)) {
        fprintf(stderr, "  skipped: %s\n", why);
        return;
    }
    /* d 64 causal f16, d 128 causal bf16, d 256 causal f16 (two consumer
     * groups: the turns), decode d 128 (one group) */
    static const int pick[] = {1, 3, 5, 7};
    for (int j = 0; j < 4; j++) {
        const shape *s = &SHAPES[pick[j]];
        char *js = att_graph(s->dt, s->b, s->h, s->nq, s->nk, s->d, s->causal);
        mcir_graph *g = cgt_graph(js);
        mcir_plan *p = plan_of(g, "sm_90");
        mcir_diag d = mcir_diag_stderr();
        mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
        ck_assert_ptr_nonnull(cg);
        int ki = attention_index(p);
        ck_assert_msg(mcir_codegen_compile(cg, "sm_90", &d), "%s d=%d", s->dt, s->d);
        const char *ptx = mcir_codegen_kernel_ptx(cg, ki);
        ck_assert_ptr_nonnull(ptx);
        ck_assert_ptr_nonnull(strstr(ptx, ".target sm_90a"));
        const mcir_kernel_audit *a = &p->kernels[ki].audit;
        fprintf(stderr, "  sm_90a %-4s d=%-3d: %d registers, spills %d/%d, wgmma %d, cp.async.bulk %d, smem %lld\n",
                s->dt, s->d, a->registers, a->spill_store_bytes, a->spill_load_bytes, a->wgmma, a->cp_async_bulk,
                (long long)a->smem_dynamic_bytes);
        ck_assert(a->valid);
        ck_assert_int_gt(a->wgmma, 0);
        ck_assert_int_gt(a->cp_async_bulk, 0);
        ck_assert_int_eq(a->spill_store_bytes, 0);
        ck_assert_int_eq(a->spill_load_bytes, 0);
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

/* Runs the plan's attention kernel on the emulator, every block, its
 * tensor maps encoded from the codegen's descriptions as the runtime does. */
static bool run_emulated(const shape *sh) {
    char *js = att_graph(sh->dt, sh->b, sh->h, sh->nq, sh->nk, sh->d, sh->causal);
    mcir_graph *g = cgt_graph(js);
    mcir_plan *p = plan_of(g, "sm_90");
    mcir_diag d = mcir_diag_stderr();
    ck_assert_int_eq(p->n_kernels, 1);
    const mcir_kernel_plan *kp = &p->kernels[0];
    ck_assert(sm90_tiled(kp));
    mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
    ck_assert_ptr_nonnull(cg);
    mcir_tensor_map_desc maps[4];
    const int n_maps = mcir_codegen_kernel_tensor_maps(cg, 0, maps, 4);
    ck_assert_int_eq(n_maps, 4);   /* Q, K, V, and O for the TMA store */
    ck_assert_int_eq(maps[3].read, kp->n_reads);

    mcir_env *cpu = mcir_env_new(g, 5);
    for (int i = 0; i < g->n_inputs; i++) {
        float *v = malloc(sizeof(float) * (size_t)mcir_tensor_numel(g->inputs[i]));
        mcir_fill_seeded(g->inputs[i], 5, v);
        mcir_env_set(cpu, g->inputs[i], v);
        free(v);
    }
    ck_assert(mcir_interp_run(g, cpu, &d));

    int nr = kp->n_reads, nb = nr + 1;
    ck_assert_int_eq(kp->n_writes, 1);
    ck_assert_int_le(nb, 4);
    emu_buffer bufs[4];
    const mcir_tensor *ts[4];
    size_t at[4], total = 0;
    for (int i = 0; i < nb; i++) {
        ts[i] = i < nr ? kp->reads[i] : kp->writes[0];
        at[i] = total;
        total += (size_t)(mcir_tensor_bytes(ts[i]) + 255) / 256 * 256;
        bufs[i] = (emu_buffer){.name = ts[i]->name, .bytes = (size_t)mcir_tensor_bytes(ts[i])};
    }
    unsigned char *arena = aligned_alloc(256, total);
    ck_assert_ptr_nonnull(arena);
    memset(arena, 0xff, total);
    void *args[8];
    int arg_buf[8];
    static unsigned char tmaps[4][128] __attribute__((aligned(64)));
    for (int i = 0; i < nb; i++) {
        bufs[i].base = arena + at[i];
        args[i] = bufs[i].base;
        arg_buf[i] = i;
        if (i < nr) to_storage(ts[i], mcir_env_get(cpu, ts[i]), bufs[i].base);
        else bufs[i].init = calloc(bufs[i].bytes, 1);
    }
    for (int m = 0; m < n_maps; m++) {
        const mcir_tensor_map_desc *x = &maps[m];
        unsigned es[5] = {1, 1, 1, 1, 1};
        ck_assert(x->read >= 0 && x->read < nb);
        ck_assert_int_eq(emu_tensor_map_encode_tiled(tmaps[m], x->dtype, (unsigned)x->rank,
                                                     bufs[x->read].base + x->offset * 2, (const unsigned long long *)x->dims,
                                                     (const unsigned long long *)x->strides, x->box, es, 0, x->swizzle,
                                                     2, 0),
                         0);
        args[nb + m] = tmaps[m];
        arg_buf[nb + m] = -1;
    }
    char call[1024];
    int n = snprintf(call, sizeof call, "%s(", kp->name);
    for (int i = 0; i < nr; i++) n += snprintf(call + n, sizeof call - (size_t)n, "(const unsigned short*)a[%d], ", i);
    snprintf(call + n, sizeof call - (size_t)n,
             "(unsigned short*)a[%d], *(const CUtensorMap*)a[%d], *(const CUtensorMap*)a[%d], *(const CUtensorMap*)a[%d], "
             "*(const CUtensorMap*)a[%d]);",
             nr, nb, nb + 1, nb + 2, nb + 3);
    int64_t grid[3], smem;
    int block[3];
    mcir_codegen_kernel_launch(cg, 0, grid, block, &smem);
    void *h = cgt_emu_compile(work_dir, test_source_dir(), kp->name, mcir_codegen_kernel_source(cg, 0), call, NULL);
    ck_assert_ptr_nonnull(h);
    emu_run_fn run = (emu_run_fn)dlsym(h, "emu_run");
    void (*launch)(void **) = (void (*)(void **))dlsym(h, "emu_kernel");
    ck_assert(run && launch);
    emu_launch L = {.kernel = kp->name, .body = launch, .args = args, .n_args = nb + n_maps, .buffers = bufs,
                    .n_buffers = nb, .arg_buffer = arg_buf, .checks = EMU_CHECK_ALL};
    L.write_args = 1ull << nr;
    L.grid = (unsigned)(grid[0] < 3 ? grid[0] : 3);   /* the decode shape's 4 items: a block takes two */
    L.block = (unsigned)block[0];
    L.smem = (size_t)smem;
    bool ok = run(&L) == 0;
    dlclose(h);
    const mcir_tensor *y = g->outputs[0];
    const float *ref = mcir_env_get(cpu, y);
    int64_t cnt = mcir_tensor_numel(y);
    double maxref = 0, maxerr = 0;
    for (int64_t i = 0; i < cnt && ok; i++) {
        float v = from_storage(y, bufs[nr].base, i);
        if (fabs(ref[i]) > maxref) maxref = fabs(ref[i]);
        double e = isfinite(v) ? fabs((double)v - (double)ref[i]) : INFINITY;
        if (e > maxerr) maxerr = e;
    }
    double rel = maxerr / (maxref > 1e-6 ? maxref : 1e-6);
    fprintf(stderr, "  sm_90a %-4s b%d h%d Nq=%-3d Nk=%-3d d=%-3d%s: %u blocks x %u threads, %llu wgmma, %llu TMA "
                    "loads, %llu TMA stores (%llu bytes), rel err %.3g %s\n",
            sh->dt, sh->b, sh->h, sh->nq, sh->nk, sh->d, sh->causal ? " causal" : "       ", L.grid, L.block,
            L.stats.wgmma, L.stats.tma_loads, L.stats.tma_stores, L.stats.tma_store_bytes, rel,
            ok && rel <= 2e-2 && maxref > 0 ? "ok" : "FAIL");
    ok = ok && rel <= 2e-2 && maxref > 0 && L.stats.wgmma > 0 && L.stats.tma_loads > 0 && L.stats.tma_stores > 0;
    /* every element of O written once, by the TMA: the box rows past Nq
     * are clipped (the grid-stride loop covers every item on <= 3 blocks) */
    ok = ok && L.stats.tma_store_bytes == (unsigned long long)mcir_tensor_bytes(ts[nr]);
    /* two consumer groups: the producer gives registers to them, and they
     * take turns (group 1 opens group 0's first, then one hand-over per
     * K/V tile each: bar.arrive by 128 threads) */
    if (L.block == 384)
        ok = ok && L.stats.maxnreg[0] == -24 && L.stats.maxnreg[1] == 240 && L.stats.maxnreg[2] == 240 &&
             L.stats.bar_arrives >= 128 * L.grid && L.stats.bar_arrives % 128 == 0;
    free(bufs[nr].init);
    free(arena);
    mcir_env_free(cpu);
    mcir_codegen_free(cg);
    mcir_plan_free(p);
    mcir_graph_free(g);
    free(js);
    return ok;
}

START_TEST(test_sm90_matches_reference_emulated) {
    if (!test_have_cxx()) {
        fprintf(stderr, "  skipped: no C++ compiler for the kernel emulator\n");
        return;
    }
    int failed = 0;
    for (int i = 0; i < N_SHAPES; i++) failed += !run_emulated(&SHAPES[i]);
    ck_assert_int_eq(failed, 0);
}
END_TEST

int main(void) {
    if (!test_tempdir("sm90att", work_dir, sizeof work_dir)) return 1;
    char cache[256];
    cgt_temp_cache(cache, sizeof cache);
    Suite *s = suite_create("attention_sm90");
    TCase *tc = tcase_create("sm90");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_plan_picks_sm90_path);
    tcase_add_test(tc, test_sm90_kernels_compile_nvrtc);
    tcase_add_test(tc, test_sm90_matches_reference_emulated);
    suite_add_tcase(s, tc);
    int failed = test_main_nofork(s);
    test_remove_dir(work_dir);
    test_remove_dir(cache);
    return failed;
}
