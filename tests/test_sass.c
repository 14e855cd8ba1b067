/*
 * test_sass.c — the SASS audit (codegen/sass.c; docs/codegen.md "Kernel
 * audit").
 *
 *   test_sass            the parser on committed nvdisasm texts
 *                        (tests/data/sass/): instruction, LDG/STG width,
 *                        MUFU, FCHK and slow-path counts, loops and the
 *                        main loop, instructions per 16 bytes (plain and
 *                        weighted), the loads in flight before first use,
 *                        the wgmma loops and the EX2 under an in-flight
 *                        wgmma;
 *                        an audit without a disassembly says why. Needs
 *                        nothing but the texts.
 *   test_sass nvdisasm   real kernels through NVRTC and nvdisasm: a
 *                        division per element has FCHK and slow paths,
 *                        rsqrtf and __fdividef none; 16-byte loads count
 *                        as LDG .128; a scalar variant of the same copy
 *                        issues more per 16 bytes; a pipeline's f16
 *                        layernorm and silu(g) * u get the audit with its
 *                        issue and memory times. Exits 77 without nvdisasm
 *                        or NVRTC.
 *
 * No timed assertion: every figure is a static count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "pipeline_test.h"
#include "test_util.h"

static mcir_sass_audit parse(const char *file, const char *entry) {
    char *text = test_slurp(test_path(file), NULL);
    ck_assert_msg(text != NULL, "%s", file);
    mcir_sass_audit s;
    ck_assert_msg(cg_sass_parse(text, entry, &s), "%s: %s", entry, s.why);
    free(text);
    ck_assert_int_eq(s.state, 1);
    return s;
}

static const char *const GRID = "tests/data/sass/grid_stride_sm90.sass";

/* What a sample's entry must show, counted by hand from its text
 * (instruction addresses step by 0x10). Widths and MUFU functions:
 * {8/16-bit, 32, 64, 128} and {ex2, rcp, rsq}, the kernel's; `loop_*` the
 * main loops' (one iteration of each, hot blocks). */
typedef struct expect {
    const char *file, *entry;
    int instructions, subroutine, loops, main_loops;
    int ldg[4], stg[4], mufu[3], fchk, slow_paths, int_div;
    int loop_instructions, loop_bytes, loop_mufu, loop_fchk, loop_slow, inflight;
} expect;

static mcir_sass_audit check(const expect *e) {
    mcir_sass_audit s = parse(e->file, e->entry);
    const int got[] = {s.kernel.instructions, s.subroutine_instructions, s.loops, s.main_loops,
                       s.kernel.ldg[0], s.kernel.ldg[1], s.kernel.ldg[2], s.kernel.ldg[3],
                       s.kernel.stg[0], s.kernel.stg[1], s.kernel.stg[2], s.kernel.stg[3],
                       s.kernel.mufu[MCIR_MUFU_ex2], s.kernel.mufu[MCIR_MUFU_rcp], s.kernel.mufu[MCIR_MUFU_rsq],
                       s.kernel.fchk, s.kernel.slow_paths, s.kernel.int_div_calls, s.loop.instructions, s.loop_bytes,
                       s.loop.mufu[MCIR_MUFU_ex2] + s.loop.mufu[MCIR_MUFU_rcp] + s.loop.mufu[MCIR_MUFU_rsq],
                       s.loop.fchk, s.loop.slow_paths, s.inflight_thread_bytes};
    const int want[] = {e->instructions, e->subroutine, e->loops, e->main_loops, e->ldg[0], e->ldg[1], e->ldg[2],
                        e->ldg[3], e->stg[0], e->stg[1], e->stg[2], e->stg[3], e->mufu[0], e->mufu[1], e->mufu[2],
                        e->fchk, e->slow_paths, e->int_div, e->loop_instructions, e->loop_bytes, e->loop_mufu,
                        e->loop_fchk, e->loop_slow, e->inflight};
    static const char *const what[] = {"instructions", "subroutine instructions", "loops", "main loops",
                                       "LDG 8/16", "LDG 32", "LDG 64", "LDG 128", "STG 8/16", "STG 32", "STG 64",
                                       "STG 128", "ex2", "rcp", "rsq", "FCHK", "slow paths", "integer divisions",
                                       "loop instructions", "loop bytes", "loop MUFU", "loop FCHK",
                                       "loop slow paths", "in flight"};
    for (size_t i = 0; i < sizeof got / sizeof *got; i++)
        ck_assert_msg(got[i] == want[i], "%s: %s %d, expected %d", e->entry, what[i], got[i], want[i]);
    /* the figures per 16 bytes follow from the counts */
    double vectors = e->loop_bytes / 16.0;
    ck_assert_double_eq_tol(s.per_16b, e->loop_instructions / vectors, 1e-9);
    ck_assert_double_eq_tol(s.weighted_per_16b,
                            (e->loop_instructions + 3.0 * e->loop_mufu + 10.0 * e->loop_slow) / vectors, 1e-9);
    return s;
}

/* c[i] = a[i] * 2 with 4-byte loads: one grid-stride loop (.L_x_0:
 * 0x1b0 .. 0x2a0) moving 8 bytes a lane, 32 instructions per 16 bytes;
 * the load's register is read by the FADD after it, 4 bytes loaded
 * before. The trap loop after EXIT is unreachable: not a loop. */
START_TEST(scalar_copy_loop) {
    check(&(expect){GRID, "scale_f32", 45, 0, 1, 1, {0, 1, 0, 0}, {0, 1, 0, 0}, {0}, 0, 0, 0, 16, 8, 0, 0, 0, 4});
}
END_TEST

/* The same copy over float4: LDG.E.128 / STG.E.128, 19 instructions per
 * 32 bytes, R4..R7 loaded before the FMULs read them — and the scalar loop
 * above issues 3.4 times as many per 16 bytes (the mutant the audit must
 * tell apart). */
START_TEST(vector_copy_loop) {
    mcir_sass_audit s = check(
        &(expect){GRID, "scale_v4", 48, 0, 1, 1, {0, 0, 0, 1}, {0, 0, 0, 1}, {0}, 0, 0, 0, 19, 32, 0, 0, 0, 16});
    ck_assert_int_eq(s.loop.ldg[MCIR_SASS_B128], 1);
    ck_assert(parse(GRID, "scale_f32").per_16b > 3 * s.per_16b);
}
END_TEST

/* __frcp_rn and rsqrtf: MUFU.RCP and MUFU.RSQ, no FCHK — but the IEEE
 * reciprocal's slow path is a call (__cuda_sm20_rcp_rn_f32_slowpath, 54
 * instructions), cold: its block is not counted per iteration, the call
 * is weighted. */
START_TEST(reciprocal_slow_path) {
    mcir_sass_audit s = check(
        &(expect){GRID, "rcp_f32", 66, 54, 1, 1, {0, 2, 0, 0}, {0, 1, 0, 0}, {0, 1, 1}, 0, 1, 0, 31, 12, 2, 0, 1, 4});
    ck_assert_int_eq(s.kernel.calls, 1);
}
END_TEST

/* a[i] / b[i]: nvcc unrolls the grid-stride loop by 4 with a remainder
 * loop — two main loops moving (1 + 4) x 12 bytes, five divisions (FCHK +
 * a slow-path call each), the trip count's 64-bit division a call of its
 * own outside them; both operands are loaded before MUFU.RCP reads one. */
START_TEST(division_loops) {
    mcir_sass_audit s = check(&(expect){GRID, "div_f32", 225, 172, 2, 2, {0, 10, 0, 0}, {0, 5, 0, 0}, {0, 6, 0}, 5, 5,
                                        1, 117, 60, 5, 5, 5, 8});
    ck_assert_int_eq(s.kernel.calls, 6);
    ck_assert_int_eq(s.loop.int_div_calls, 0);
}
END_TEST

/* mcirc's silu(g) * u over f16 (main ba63c2e): 2-byte loads and store,
 * EX2 and the IEEE division's RCP + FCHK + slow path per element; the loop
 * (0x100 .. 0x3e0) less the call's block (3); g is converted before u is
 * loaded. */
START_TEST(elementwise_silu_mul) {
    check(&(expect){"tests/data/sass/silu_mul_f16_sm90.sass", "mc_elementwise_7d5fea9982d8f403", 64, 105, 1, 1,
                    {2, 0, 0, 0}, {1, 0, 0, 0}, {1, 1, 0}, 1, 1, 0, 44, 6, 2, 1, 1, 2});
}
END_TEST

/* An rmsnorm over rows of 64 bf16 (examples/layernorm_bf16): the warp
 * shuffles' divergent fallbacks (reached by BRA.DIV, after EXIT) branch
 * back into the row loop; they are not loops, nor part of it. The loop
 * (.L_x_30: 0x160 .. 0xbb0, 166) less 21 instructions in 5 call blocks
 * (4 divisions, 1 square root). */
START_TEST(norm_divergent_fallbacks) {
    check(&(expect){"tests/data/sass/rmsnorm_bf16_w64_sm90.sass", "mc_streaming_norm_b7763215d6866f1c", 344, 128, 1,
                    1, {0, 0, 2, 0}, {0, 0, 1, 0}, {0, 4, 1}, 4, 5, 0, 145, 24, 5, 4, 5, 8});
}
END_TEST

/* The wgmma loops (tests/data/sass/wgmma_loop_sm90.sass): a loop holding
 * HGMMA, its EX2 counted while a wait leaves a group in flight (after
 * DEPBAR gsb0 0x1, before 0x0); the EX2 after the loop is not the loop's.
 * att_late_wait: both of its two under the P V wgmma, 12 instructions
 * (0x10 .. 0xc0); att_early_wait: one of three, 11 instructions. */
/* The loop around a wgmma loop (gemm_item_loop: a persistent GEMM's
 * item loop, hand-written): its 35 instructions (0x10 .. 0x1f0 and the
 * barrier wait's retry at 0x210 .. 0x240) less the K loop's 4 — 31 per
 * item. Inside it an epilogue loop of 11 (flagged: counted once, not as
 * it runs) and a TMA store's waterfall of 10 closed by BRA.U.ANY (not
 * flagged); the retry's own spin is 3. */
START_TEST(wgmma_item_loop) {
    mcir_sass_audit s = parse("tests/data/sass/wgmma_loop_sm90.sass", "gemm_item_loop");
    ck_assert_int_eq(s.wgmma_loops, 1);
    ck_assert_int_eq(s.wgmma_loop_instructions, 4);
    ck_assert_int_eq(s.item_loops, 1);
    ck_assert_int_eq(s.item_instructions, 31);
    ck_assert_int_eq(s.item_inner_loops, 1);
    /* the attention samples' wgmma loops have no loop around them */
    s = parse("tests/data/sass/wgmma_loop_sm90.sass", "att_late_wait");
    ck_assert_int_eq(s.item_loops, 0);
    ck_assert_int_eq(s.item_instructions, 0);
}
END_TEST

START_TEST(wgmma_loop_overlap) {
    static const char *const F = "tests/data/sass/wgmma_loop_sm90.sass";
    mcir_sass_audit s = parse(F, "att_late_wait");
    ck_assert_int_eq(s.wgmma_loops, 1);
    ck_assert_int_eq(s.wgmma_loop_instructions, 12);
    ck_assert_int_eq(s.wgmma_loop_hgmma, 2);
    ck_assert_int_eq(s.wgmma_loop_ex2, 2);
    ck_assert_int_eq(s.wgmma_loop_ex2_overlapped, 2);
    ck_assert_int_eq(s.wgmma_loops_overlapped, 1);
    ck_assert_int_eq(s.kernel.mufu[MCIR_MUFU_ex2], 3);
    s = parse(F, "att_early_wait");
    ck_assert_int_eq(s.wgmma_loops, 1);
    ck_assert_int_eq(s.wgmma_loop_instructions, 11);
    ck_assert_int_eq(s.wgmma_loop_ex2, 3);
    ck_assert_int_eq(s.wgmma_loop_ex2_overlapped, 1);
    ck_assert_int_eq(s.wgmma_loops_overlapped, 0);
    /* setmaxnreg regions (ws_regions): the consumers' TRY_ALLOC 240 reach
     * R199 (STS.128's data R196..R199; the HGMMAs R24..R87, R88..R151 and
     * A R152..R155), within; the producer's DEALLOC 24 reaches R31
     * (LDG.E.64 into R30..R31; IMAD.WIDE R22..R23), over its count */
    s = parse(F, "ws_regions");
    ck_assert_int_eq(s.setmaxnreg_regions, 2);
    ck_assert_int_eq(s.maxnreg_budget[0], 240);
    ck_assert_int_eq(s.maxnreg_used[0], 200);
    ck_assert_int_eq(s.maxnreg_budget[1], 24);
    ck_assert_int_eq(s.maxnreg_used[1], 32);
    ck_assert_int_eq(s.setmaxnreg_over, 1);
    s = parse(F, "att_late_wait");
    ck_assert_int_eq(s.setmaxnreg_regions, 0);
    /* no HGMMA, no wgmma loop */
    s = parse(GRID, "scale_f32");
    ck_assert_int_eq(s.wgmma_loops, 0);
    ck_assert_int_eq(s.wgmma_loop_ex2, 0);
}
END_TEST

START_TEST(missing_entry_and_no_text) {
    char *text = test_slurp(test_path(GRID), NULL);
    mcir_sass_audit s;
    ck_assert(!cg_sass_parse(text, "scale", &s));   /* a prefix of scale_f32 is not it */
    ck_assert_int_eq(s.state, -1);
    ck_assert_ptr_nonnull(strstr(s.why, "not in the disassembly"));
    free(text);
    mcir_kernel_audit a;
    memset(&a, 0, sizeof a);
    cg_audit_sass(&a, NULL, "nvdisasm not found (test)", NULL, NULL);
    ck_assert_int_eq(a.sass.state, -1);
    ck_assert_str_eq(a.sass.why, "nvdisasm not found (test)");
}
END_TEST

/* --------------------------------------------------- with nvdisasm */

#define KERNELS                                                                                            \
    "extern \"C\" __global__ void k_div(const float* __restrict__ a, const float* __restrict__ b,\n"       \
    "                                   float* __restrict__ c, long n) {\n"                               \
    "  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)\n" \
    "    c[i] = a[i] / b[i];\n"                                                                            \
    "}\n"                                                                                                  \
    "extern \"C\" __global__ void k_fast(const float* __restrict__ a, const float* __restrict__ b,\n"      \
    "                                    float* __restrict__ c, long n) {\n"                              \
    "  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)\n" \
    "    c[i] = __fdividef(a[i], b[i]) + rsqrtf(b[i]);\n"                                                  \
    "}\n"                                                                                                  \
    "extern \"C\" __global__ void k_rcp(const float* __restrict__ a, const float* __restrict__ b,\n"       \
    "                                   float* __restrict__ c, long n) {\n"                               \
    "  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)\n" \
    "    c[i] = a[i] * __frcp_rn(b[i]);\n"                                                                 \
    "}\n"                                                                                                  \
    "extern \"C\" __global__ void k_v4(const float4* __restrict__ a, float4* __restrict__ c, long n) {\n" \
    "  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {\n" \
    "    float4 v = a[i]; v.x *= 2.f; v.y *= 2.f; v.z *= 2.f; v.w *= 2.f; c[i] = v; }\n"                  \
    "}\n"                                                                                                  \
    "extern \"C\" __global__ void k_scalar(const float* __restrict__ a, float* __restrict__ c, long n) {\n" \
    "  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)\n" \
    "    c[i] = a[i] * 2.f;\n"                                                                             \
    "}\n"

static char cache_dir[512];
static mcir_compiled bin;

static void compile_kernels(void) {
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_nvrtc_compile_source("sass_kernels", KERNELS, "sm_90", &bin, &d));
    char why[200] = "";
    ck_assert_msg(cg_sass_disassemble(&bin, why, sizeof why), "%s", why);
    ck_assert_ptr_nonnull(bin.sass);
}

static mcir_sass_audit real(const char *entry) {
    if (!bin.sass) compile_kernels();   /* once: the tests share this process (CK_NOFORK) */
    mcir_sass_audit s;
    ck_assert_msg(cg_sass_parse(bin.sass, entry, &s), "%s: %s", entry, s.why);
    ck_assert_int_ge(s.main_loops, 1);
    return s;
}

START_TEST(real_division_has_slow_paths) {
    mcir_sass_audit div = real("k_div"), fast = real("k_fast"), rcp = real("k_rcp");
    ck_assert_int_gt(div.kernel.fchk, 0);
    ck_assert_int_gt(div.kernel.slow_paths, 0);
    ck_assert_int_gt(div.loop.fchk, 0);
    ck_assert_int_gt(div.loop.slow_paths, 0);
    ck_assert_int_eq(fast.kernel.fchk, 0);   /* __fdividef and rsqrtf: MUFU only */
    ck_assert_int_eq(fast.kernel.slow_paths, 0);
    ck_assert_int_gt(fast.kernel.mufu[MCIR_MUFU_rsq], 0);
    ck_assert_int_gt(fast.kernel.mufu[MCIR_MUFU_rcp], 0);
    ck_assert_int_eq(rcp.kernel.fchk, 0);   /* __frcp_rn: no FCHK, but a slow-path call */
    ck_assert(div.weighted_per_16b > div.per_16b);
    ck_assert(div.weighted_per_16b > fast.weighted_per_16b);
}
END_TEST

START_TEST(real_vector_loads) {
    mcir_sass_audit v4 = real("k_v4"), sc = real("k_scalar");
    ck_assert_int_gt(v4.kernel.ldg[MCIR_SASS_B128], 0);
    ck_assert_int_gt(v4.loop.ldg[MCIR_SASS_B128], 0);
    ck_assert_int_gt(v4.loop.stg[MCIR_SASS_B128], 0);
    ck_assert_int_eq(v4.kernel.ldg[MCIR_SASS_B32], 0);
    ck_assert_int_gt(sc.loop.ldg[MCIR_SASS_B32], 0);
    ck_assert_int_eq(sc.kernel.ldg[MCIR_SASS_B128], 0);
    /* the mutant: the same copy with scalar loads issues more per 16 bytes */
    ck_assert(sc.per_16b > v4.per_16b);
    ck_assert_int_ge(v4.inflight_thread_bytes, 16);
}
END_TEST

/* The pipeline's kernels, as `mcirc --emit audit` reads them: the f16
 * layernorm and silu(g) * u get the SASS audit with their issue and memory
 * times; the table prints it. */
START_TEST(pipeline_kernels_audited) {
    static const char *const graphs[] = {
        "{\"mcir\": 1, \"name\": \"ln\", \"inputs\": [{\"name\": \"x\", \"dtype\": \"f16\", \"shape\": [32768, 1024]}],"
        " \"weights\": [{\"name\": \"g\", \"dtype\": \"f16\", \"shape\": [1024]}, {\"name\": \"b\", \"dtype\": \"f16\","
        " \"shape\": [1024]}], \"nodes\": [{\"name\": \"n\", \"op\": \"layernorm\", \"inputs\": [\"x\", \"g\", \"b\"],"
        " \"outputs\": [\"y\"], \"attrs\": {\"eps\": 1e-05}}], \"outputs\": [\"y\"]}",
        "{\"mcir\": 1, \"name\": \"swiglu\", \"inputs\": [{\"name\": \"g\", \"dtype\": \"f16\", \"shape\": [8192, 11008]},"
        " {\"name\": \"u\", \"dtype\": \"f16\", \"shape\": [8192, 11008]}], \"nodes\": [{\"name\": \"s\", \"op\": \"silu\","
        " \"inputs\": [\"g\"], \"outputs\": [\"sg\"]}, {\"name\": \"m\", \"op\": \"mul\", \"inputs\": [\"sg\", \"u\"],"
        " \"outputs\": [\"y\"]}], \"outputs\": [\"y\"]}"};
    for (int gi = 0; gi < 2; gi++) {
        mcir_compilation c;
        cgt_compile_js(graphs[gi], "sm_90", true, &c);
        mcir_codegen_audit_sass(c.codegen);
        int k = cgt_kernel_index(c.plan, gi ? MCIR_TEMPLATE_ELEMENTWISE : MCIR_TEMPLATE_STREAMING_NORM, "audited");
        const mcir_sass_audit *s = &c.plan->kernels[k].audit.sass;
        ck_assert_msg(s->state == 1, "%s", s->why);
        ck_assert_int_ge(s->main_loops, 1);
        ck_assert(s->weighted_per_16b >= s->per_16b && s->per_16b > 0);
        ck_assert_int_gt(s->inflight_sm_bytes, 0);
        ck_assert(s->issue_us > 0 && s->memory_us > 0);
        /* the same bytes as the cost model's memory time */
        mcir_kernel_cost cost;
        mcir_cost_kernel(&c.plan->kernels[k], c.plan->target, NULL, &cost);
        ck_assert_double_eq_tol(s->memory_us, cost.memory_us, 1e-9);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        ck_assert(mcir_codegen_write_audit(c.codegen, f));
        fclose(f);
        ck_assert_msg(strstr(buf, "SASS main loop") && strstr(buf, "per 16 B (weighted") && strstr(buf, "vs memory"),
                      "%s", buf);
        free(buf);
        mcir_compilation_free(&c);
    }
}
END_TEST

int main(int argc, char **argv) {
    Suite *s = suite_create("sass");
    TCase *tc = tcase_create("sass");
    if (argc > 1 && strcmp(argv[1], "nvdisasm") == 0) {
        char why[256];
        if (!mcir_nvrtc_available(why, sizeof why)) return test_skip(why);
        if (!mcir_nvdisasm_path(why, sizeof why)) return test_skip(why);
        cgt_temp_cache(cache_dir, sizeof cache_dir);
        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, real_division_has_slow_paths);
        tcase_add_test(tc, real_vector_loads);
        tcase_add_test(tc, pipeline_kernels_audited);
        suite_add_tcase(s, tc);
        int failed = test_main_nofork(s);
        mcir_compiled_free(&bin);
        test_remove_dir(cache_dir);
        return failed;
    }
    tcase_add_test(tc, scalar_copy_loop);
    tcase_add_test(tc, vector_copy_loop);
    tcase_add_test(tc, reciprocal_slow_path);
    tcase_add_test(tc, division_loops);
    tcase_add_test(tc, elementwise_silu_mul);
    tcase_add_test(tc, norm_divergent_fallbacks);
    tcase_add_test(tc, wgmma_loop_overlap);
    tcase_add_test(tc, wgmma_item_loop);
    tcase_add_test(tc, missing_entry_and_no_text);
    suite_add_tcase(s, tc);
    return test_main(s);
}
