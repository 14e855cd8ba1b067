/*
 * test_emu_device.c — the emulated device (emu/emu.h) under the real
 * runtime (codegen/runtime.c), through the pipeline mcirc runs:
 *  - a compiled graph runs in every allocation mode and matches the
 *    interpreter; the launches are recorded; the peaks order as on a GPU
 *    (pool <= lazy <= eager);
 *  - mutants of what the runtime and the kernels do, each put into the
 *    compilation between codegen and the run, each found and named:
 *      a removed __syncthreads (a block-per-row norm's reduction of its
 *      warps' partials: race on shared memory), a dropped mbarrier wait (the sm_90a attention's
 *      consumers reading a K/V stage the TMA has not completed: race), an
 *      off-by-one tile bound (the matmul template storing row M: out of
 *      bounds of the output), a wrong leading dimension in a cuBLAS call
 *      (B's span past its tensor: out of bounds), a split-KV scratch placed
 *      over a tensor the kernel still reads (race, or a wrong result);
 *  - a launch asking for more dynamic shared memory than the function
 *    allows fails with a message, like the driver's.
 * Skips (77) without a C++ compiler for the emulator's modules.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "codegen/runtime.h"
#include "emu/emu.h"
#include "mcirc/pipeline.h"
#include "test_util.h"

static char work_dir[256];

/* A compilation of graph.json text for arch, planned and generated (not
 * compiled, not run): what mcirc has before --run. */
static void compile_text(const char *name, const char *json, const char *arch, mcir_compilation *c) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s.json", work_dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(json, f);
    fclose(f);
    mcir_options o = mcir_options_default();
    o.graph_path = path;
    o.arch = arch;
    o.want_plan = o.want_cuda = true;
    mcir_diag d = mcir_diag_stderr();
    memset(c, 0, sizeof *c);
    ck_assert_int_eq(mcir_compile(&o, c, &d), 0);
    ck_assert_ptr_nonnull(c->codegen);
}

/* The run on the emulated device: ok, and its diagnostics in *diag (malloc'd). */
static bool emu_run(mcir_compilation *c, mcir_alloc_mode mode, mcir_env **env, mcir_gpu_stats *st, char **diag) {
    size_t len = 0;
    FILE *mem = open_memstream(diag, &len);
    ck_assert_ptr_nonnull(mem);
    mcir_diag d = mcir_diag_to(mem);
    *env = mcir_env_new(c->graph, 7);
    bool ok = mcir_emu_run(c->codegen, *env, mode, st, &d);
    fclose(mem);
    if (*diag && **diag) fprintf(stderr, "%s", *diag);
    return ok;
}

/* max |emu - interpreter| / max |interpreter| over every output */
static double rel_error(mcir_compilation *c, mcir_env *emu) {
    mcir_env *ref = mcir_env_new(c->graph, 7);
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_interp_run(c->graph, ref, &d));
    double worst = 0;
    for (int i = 0; i < c->graph->n_outputs; i++) {
        const mcir_tensor *t = c->graph->outputs[i];
        mcir_compare_result r;
        ck_assert(mcir_env_compare(emu, t, ref, t, &r));
        double den = 0;
        const float *v = mcir_env_get(ref, t);
        for (int64_t k = 0; k < mcir_tensor_numel(t); k++) den = fmax(den, fabs(v[k]));
        ck_assert_msg(den > 0, "an all-zero reference output asserts nothing");
        worst = fmax(worst, r.max_abs / den);
    }
    mcir_env_free(ref);
    return worst;
}

static int kernel_of(const mcir_compilation *c, mcir_template t) {
    for (int i = 0; i < c->plan->n_kernels; i++)
        if (c->plan->kernels[i].tpl == t && c->codegen->k[i].source) return i;
    ck_abort_msg("no %s kernel in the plan", mcir_template_name(t));
    return -1;
}

/* Replaces the first `from` in kernel i's compile unit with `to` (the
 * unit the emulator's module is built from). */
static void mutate_unit(mcir_compilation *c, int i, const char *from, const char *to, int occurrence) {
    cg_kernel *k = &c->codegen->k[i];
    char *at = k->unit;
    for (int n = 0; n <= occurrence; n++) {
        at = strstr(n ? at + 1 : at, from);
        ck_assert_msg(at != NULL, "kernel %s: '%s' (occurrence %d) not in its unit: update the mutant",
                      k->kp->name, from, occurrence);
    }
    size_t lu = strlen(k->unit), lf = strlen(from), lt = strlen(to), off = (size_t)(at - k->unit);
    char *u = malloc(lu - lf + lt + 1);
    ck_assert_ptr_nonnull(u);
    memcpy(u, k->unit, off);
    memcpy(u + off, to, lt);
    memcpy(u + off + lt, at + lf, lu - off - lf + 1);
    free(k->unit);
    k->unit = u;
}

static void expect_finding(const char *diag, const char *kernel, const char *kind, const char *names) {
    char want[300];
    snprintf(want, sizeof want, "%s: error: %s: ", kernel, kind);
    ck_assert_msg(diag && strstr(diag, want), "no '%s' in:\n%s", want, diag ? diag : "");
    ck_assert_msg(strstr(diag, names), "the finding does not name '%s':\n%s", names, diag);
}

/* -------------------------------------------------------------- runs */

static const char MLP[] =
    "{\"mcir\":1,\"name\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[40,64]}],"
    "\"weights\":[{\"name\":\"w1\",\"dtype\":\"f32\",\"shape\":[64,96]},{\"name\":\"w2\",\"dtype\":\"f32\","
    "\"shape\":[96,24]},{\"name\":\"g\",\"dtype\":\"f32\",\"shape\":[96]}],"
    "\"nodes\":[{\"name\":\"mm1\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w1\"],\"outputs\":[\"h\"]},"
    "{\"name\":\"act\",\"op\":\"gelu\",\"inputs\":[\"h\"],\"outputs\":[\"a\"]},"
    "{\"name\":\"ln\",\"op\":\"rmsnorm\",\"inputs\":[\"a\",\"g\"],\"outputs\":[\"n\"],\"attrs\":{\"axis\":-1}},"
    "{\"name\":\"mm2\",\"op\":\"matmul\",\"inputs\":[\"n\",\"w2\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}";

START_TEST(test_runs_in_every_mode) {
    mcir_compilation c;
    compile_text("mlp", MLP, "sm_90", &c);
    static const mcir_alloc_mode modes[] = {MCIR_ALLOC_POOL, MCIR_ALLOC_LAZY, MCIR_ALLOC_EAGER};
    int64_t peak[3];
    for (int m = 0; m < 3; m++) {
        mcir_emu_reset_launches();
        mcir_env *env;
        mcir_gpu_stats st;
        char *diag = NULL;
        ck_assert_msg(emu_run(&c, modes[m], &env, &st, &diag), "%s", diag);
        double rel = rel_error(&c, env);
        const mcir_emu_launch_record *rec;
        int n = mcir_emu_launches(&rec);
        fprintf(stderr, "  %s: %d launches, peak %lld bytes, rel err %.3g (%s)\n", mcir_alloc_mode_name(modes[m]), n,
                (long long)st.peak_device_bytes, rel, st.device_name);
        ck_assert_double_le(rel, 1e-4);
        ck_assert_int_ge(n, 2);
        ck_assert_ptr_nonnull(strstr(st.device_name, "emulator"));
        peak[m] = st.peak_device_bytes;
        mcir_env_free(env);
        free(diag);
    }
    ck_assert_int_le(peak[1], peak[2]);   /* lazy <= eager */
    mcir_compilation_free(&c);
}
END_TEST

/* ----------------------------------------------------------- mutants */

/* a block-per-row norm (rows of 3000): its reduction's __syncthreads */
START_TEST(test_removed_syncthreads_is_a_race) {
    static const char g[] =
        "{\"mcir\":1,\"name\":\"norm\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[3,3000]}],"
        "\"weights\":[{\"name\":\"g\",\"dtype\":\"f32\",\"shape\":[3000]}],\"nodes\":[{\"name\":\"n\",\"op\":"
        "\"rmsnorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"y\"],\"attrs\":{\"axis\":-1}}],\"outputs\":[\"y\"]}";
    mcir_compilation c;
    compile_text("norm", g, "sm_90", &c);
    int i = kernel_of(&c, MCIR_TEMPLATE_STREAMING_NORM);
    /* the barrier between the warps' partials written and read back */
    mutate_unit(&c, i, "MC_SST(part[warp], s);\n        __syncthreads();\n", "MC_SST(part[warp], s);\n", 0);
    mcir_env *env;
    mcir_gpu_stats st;
    char *diag = NULL;
    ck_assert(!emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag));
    expect_finding(diag, c.plan->kernels[i].name, "race", "shared 'part'");   /* the array, by its name */
    mcir_env_free(env);
    free(diag);
    mcir_compilation_free(&c);
}
END_TEST

/* the sm_90a attention: a consumer's wait for a K/V stage dropped */
START_TEST(test_dropped_mbarrier_wait_is_a_race) {
    static const char g[] =
        "{\"mcir\":1,\"name\":\"att\",\"inputs\":[{\"name\":\"q\",\"dtype\":\"f16\",\"shape\":[1,1,70,64]},"
        "{\"name\":\"k\",\"dtype\":\"f16\",\"shape\":[1,1,300,64]},{\"name\":\"v\",\"dtype\":\"f16\",\"shape\":[1,1,"
        "300,64]}],\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":["
        "\"y\"]}],\"outputs\":[\"y\"]}";
    mcir_compilation c;
    compile_text("att", g, "sm_90", &c);
    int i = kernel_of(&c, MCIR_TEMPLATE_STREAMING_ATTENTION);
    ck_assert(c.codegen->k[i].sm90a);
    mutate_unit(&c, i, "            mc_ring_wait(ring, st);\n", "", 0);   /* the mainloop's */
    mcir_env *env;
    mcir_gpu_stats st;
    char *diag = NULL;
    ck_assert(!emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag));
    expect_finding(diag, c.plan->kernels[i].name, "race", "dynamic shared memory");
    mcir_env_free(env);
    free(diag);
    mcir_compilation_free(&c);
}
END_TEST

/* the generated matmul (no cuBLAS): its store bound one row too far */
START_TEST(test_off_by_one_tile_bound_is_out_of_bounds) {
    setenv("MCIR_NO_CUBLAS", "1", 1);
    static const char g[] =
        "{\"mcir\":1,\"name\":\"mm\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[100,64]}],"
        "\"weights\":[{\"name\":\"w\",\"dtype\":\"f32\",\"shape\":[64,40]}],\"nodes\":[{\"name\":\"p\",\"op\":"
        "\"matmul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}";
    mcir_compilation c;
    compile_text("mm", g, "sm_90", &c);
    int i = kernel_of(&c, MCIR_TEMPLATE_MATMUL);
    for (int n = 0; n < 2; n++)   /* the tensor-core and the FMA store */
        mutate_unit(&c, i, "if (m < MM_M && n < MM_N)", "if (m <= MM_M && n < MM_N)", 0);
    mcir_env *env;
    mcir_gpu_stats st;
    char *diag = NULL;
    ck_assert(!emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag));
    expect_finding(diag, c.plan->kernels[i].name, "out-of-bounds", "'y'");
    mcir_env_free(env);
    free(diag);
    mcir_compilation_free(&c);
    unsetenv("MCIR_NO_CUBLAS");
}
END_TEST

/* a bare matmul through cuBLAS: B's leading dimension off by a row of 8 */
START_TEST(test_wrong_cublas_leading_dim_is_out_of_bounds) {
    unsetenv("MCIR_NO_CUBLAS");
    setenv("MCIR_NO_CUBLASLT", "1", 1);   /* cublasGemmStridedBatchedEx itself */
    static const char g[] =
        "{\"mcir\":1,\"name\":\"bl\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[64,32]}],"
        "\"weights\":[{\"name\":\"w\",\"dtype\":\"f32\",\"shape\":[32,48]}],\"nodes\":[{\"name\":\"p\",\"op\":"
        "\"matmul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}";
    mcir_compilation c;
    compile_text("bl", g, "sm_90", &c);
    int i = kernel_of(&c, MCIR_TEMPLATE_MATMUL);
    cg_gemm_desc *gd = &c.codegen->k[i].gemm;
    ck_assert_msg(gd->ok, "the matmul does not take cuBLAS");
    /* first the unmutated call is right */
    mcir_env *env;
    mcir_gpu_stats st;
    char *diag = NULL;
    ck_assert_msg(emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag), "%s", diag);
    ck_assert_double_le(rel_error(&c, env), 1e-5);
    mcir_env_free(env);
    free(diag);
    gd->ldb += 8;
    diag = NULL;
    ck_assert(!emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag));
    expect_finding(diag, c.plan->kernels[i].name, "out-of-bounds", "'w'");
    mcir_env_free(env);
    free(diag);
    mcir_compilation_free(&c);
    unsetenv("MCIR_NO_CUBLASLT");
}
END_TEST

/* split-KV decode whose Q is an arena tensor (a kernel computes it):
 * the partials' scratch placed over Q */
START_TEST(test_scratch_over_a_live_tensor_is_found) {
    static const char g[] =
        "{\"mcir\":1,\"name\":\"dec\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[1,4,1,64]},"
        "{\"name\":\"k\",\"dtype\":\"f32\",\"shape\":[1,4,2048,64]},{\"name\":\"v\",\"dtype\":\"f32\",\"shape\":[1,4,"
        "2048,64]}],\"weights\":[{\"name\":\"g\",\"dtype\":\"f32\",\"shape\":[64]}],\"nodes\":[{\"name\":\"qn\",\"op\":\"rmsnorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"q\"],\"attrs\":{"
        "\"axis\":-1}},{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":[\"y\"]}],"
        "\"outputs\":[\"y\"]}";
    mcir_compilation c;
    compile_text("dec", g, "sm_90", &c);
    int i = kernel_of(&c, MCIR_TEMPLATE_STREAMING_ATTENTION);
    ck_assert_msg(c.codegen->k[i].merge_grid > 0, "the decode attention does not split");
    mcir_memplan *m = c.memory;
    int scratch = -1, q = -1;
    for (int b = 0; b < m->n_buffers; b++) {
        if (!m->buffers[b].tensor && m->buffers[b].first == i) scratch = b;
        if (m->buffers[b].tensor && strcmp(m->buffers[b].tensor->name, "q") == 0) q = b;
    }
    ck_assert_msg(scratch >= 0 && q >= 0, "no scratch or no q in the arena");
    ck_assert_int_eq(m->buffers[scratch].pool, m->buffers[q].pool);
    m->buffers[scratch].offset = m->buffers[q].offset;
    mcir_env *env;
    mcir_gpu_stats st;
    char *diag = NULL;
    bool ok = emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag);
    double rel = ok ? rel_error(&c, env) : INFINITY;
    fprintf(stderr, "  scratch over q: %s, rel err %.3g\n", ok ? "ran" : "failed", rel);
    if (ok) ck_assert_double_gt(rel, 1e-3);   /* a wrong result (--verify: exit 1) */
    else expect_finding(diag, c.plan->kernels[i].name, "race", "split-KV scratch");
    mcir_env_free(env);
    free(diag);
    mcir_compilation_free(&c);
}
END_TEST

/* dynamic shared memory beyond what the function was allowed */
START_TEST(test_shared_memory_beyond_the_attribute_fails) {
    static const char g[] =
        "{\"mcir\":1,\"name\":\"att2\",\"inputs\":[{\"name\":\"q\",\"dtype\":\"f16\",\"shape\":[1,1,70,64]},"
        "{\"name\":\"k\",\"dtype\":\"f16\",\"shape\":[1,1,300,64]},{\"name\":\"v\",\"dtype\":\"f16\",\"shape\":[1,1,"
        "300,64]}],\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":["
        "\"y\"]}],\"outputs\":[\"y\"]}";
    mcir_compilation c;
    compile_text("att2", g, "sm_90", &c);
    int i = kernel_of(&c, MCIR_TEMPLATE_STREAMING_ATTENTION);
    ck_assert_int_gt(c.codegen->k[i].smem, 48 * 1024);
    c.codegen->k[i].unit_smem = 0;   /* the runtime would not raise the function's limit */
    mcir_env *env;
    mcir_gpu_stats st;
    char *diag = NULL;
    ck_assert(!emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag));
    ck_assert_ptr_nonnull(strstr(diag, "dynamic shared memory"));
    mcir_env_free(env);
    free(diag);
    mcir_compilation_free(&c);
}
END_TEST

int main(void) {
    char why[256];
    if (!mcir_emu_available(why, sizeof why)) return test_skip(why);
    if (!test_tempdir("emudev", work_dir, sizeof work_dir)) return 1;
    Suite *s = suite_create("emu_device");
    TCase *tc = tcase_create("device");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_runs_in_every_mode);
    tcase_add_test(tc, test_removed_syncthreads_is_a_race);
    tcase_add_test(tc, test_dropped_mbarrier_wait_is_a_race);
    tcase_add_test(tc, test_off_by_one_tile_bound_is_out_of_bounds);
    tcase_add_test(tc, test_wrong_cublas_leading_dim_is_out_of_bounds);
    tcase_add_test(tc, test_scratch_over_a_live_tensor_is_found);
    tcase_add_test(tc, test_shared_memory_beyond_the_attribute_fails);
    suite_add_tcase(s, tc);
    int failed = test_main_nofork(s);
    test_remove_dir(work_dir);
    return failed;
}
