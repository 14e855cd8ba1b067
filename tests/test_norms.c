/*
 * test_norms.c — the row norms at copy speed, read without a GPU (#42):
 * on the benchmark's shapes (bench/bench_norms.c: layernorm, rmsnorm and
 * softmax over rows of 1k..256k elements, f32 / f16 / bf16, 2^25
 * elements), every kernel compiled by NVRTC for sm_90 and its PTX and
 * plan checked:
 *  - no IEEE division or square root (div.rn / sqrt.rn) anywhere: the
 *    statistics take one reciprocal or rsqrt per row (MUFU approximations);
 *  - softmax's exponential once per element where the row stays in
 *    registers (exactly the values a thread holds), twice in the layouts
 *    that re-read the row (the shared-memory cache holds X's dtype; the
 *    streamed row): the template's static count exactly; none in the other
 *    norms;
 *  - no scalar global access (X, gamma, beta and Y are contiguous and
 *    aligned: 16-byte vectors), but layernorm's one shift value per row
 *    where the row is read twice;
 *  - no spill, the plan's registers within 10 % of ptxas;
 *  - the plan's modelled bytes in flight per SM at least 32 KiB (Little's
 *    law on an H100/H200), and the modelled issue time at most half the
 *    memory time (0.6 for softmax over a row read twice, which no
 *    benchmark shape is on sm_90);
 *  - in the SASS (nvdisasm; skipped where it is missing): no FCHK or IEEE
 *    slow-path call, no global access narrower than 16 bytes in the main
 *    loops, at most 80 weighted instructions per 16 bytes moved, and the
 *    SASS's own bytes in flight per SM at least 32 KiB;
 * and two mutants of a generated source — the per-element division
 * restored, a scalar load of X — each caught by those checks. A set of
 * shapes covering every row layout (a warp's registers, a block's, the
 * shared-memory cache, a cluster per row, the row read twice) and each norm runs on the
 * emulated device with its race / bounds / init checks against the
 * interpreter, with finite, varied outputs.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelplan/launch.h"
#include "pipeline_test.h"
#include "test_util.h"

static const char *const ops[] = {"layernorm", "rmsnorm", "softmax"};
static const char *const dtypes[] = {"f32", "f16", "bf16"};

static char *norm_graph(const char *op, const char *dt, long long rows, long long width) {
    char *js = malloc(2048);
    ck_assert_ptr_nonnull(js);
    bool sm = strcmp(op, "softmax") == 0, ln = strcmp(op, "layernorm") == 0;
    char weights[512] = "";
    if (!sm)
        snprintf(weights, sizeof weights, "{\"name\": \"gamma\", \"dtype\": \"%s\", \"shape\": [%lld]}", dt, width);
    if (ln) {
        size_t n = strlen(weights);
        snprintf(weights + n, sizeof weights - n, ", {\"name\": \"beta\", \"dtype\": \"%s\", \"shape\": [%lld]}", dt,
                 width);
    }
    snprintf(js, 2048,
             "{\"mcir\": 1, \"name\": \"n\", \"inputs\": [{\"name\": \"x\", \"dtype\": \"%s\", \"shape\": [%lld, "
             "%lld]}],\n \"weights\": [%s],\n \"nodes\": [{\"name\": \"n\", \"op\": \"%s\", \"inputs\": [%s], "
             "\"outputs\": [\"y\"], \"attrs\": %s}],\n \"outputs\": [\"y\"]}\n",
             dt, rows, width, weights, op,
             ln   ? "\"x\", \"gamma\", \"beta\""
             : sm ? "\"x\""
                  : "\"x\", \"gamma\"",
             sm ? "{\"axis\": -1}" : "{\"eps\": 1e-05}");
    return js;
}

/* Occurrences of `op` as an instruction in PTX text ("div.rn.f32" matches
 * "div.rn.f32" and "div.rn.ftz.f32"-less forms exactly as written). */
static int ptx_count(const char *ptx, const char *op) {
    int n = 0;
    size_t k = strlen(op);
    for (const char *p = ptx; (p = strstr(p, op)); p += k)
        if (p == ptx || p[-1] == '\t' || p[-1] == ' ') n++;
    return n;
}

/* What the static checks found wrong with one compiled norm kernel; "" when
 * nothing. */
typedef struct norm_facts {
    bool softmax, layernorm;
    mcir_rows_mode mode;
    int values;                  /* the registers layouts: values a thread holds */
    int vec;
    int cluster;
    int64_t inflight_sm;
} norm_facts;

static void check_ptx(const char *ptx, const mcir_kernel_audit *a, const norm_facts *f, char *why, size_t n) {
    why[0] = 0;
    int div = ptx_count(ptx, "div.rn.f32") + ptx_count(ptx, "div.full.f32") + ptx_count(ptx, "sqrt.rn.f32");
    int ex2 = ptx_count(ptx, "ex2.approx");
    bool regs = f->mode == MCIR_ROWS_WARP_REGS || f->mode == MCIR_ROWS_BLOCK_REGS;
    /* the static count: one a value held (registers); the cache's sum pass
     * (V) and output pass (4 vectors: 4V); the streamed row's first pass
     * (4 vectors, each V and one rescale), the merge's one and the output
     * pass's 4V — twice per element executed in both; a cluster's blocks
     * as the cache, and one rescale per block in the cluster's merge; the
     * cache's first pass merges (max, sum) online as the streamed row's */
    int ex2_max = !f->softmax                           ? 0
                  : regs                                ? f->values
                  : f->mode == MCIR_ROWS_CLUSTER_SMEM ? 4 * (f->vec + 1) + 1 + 4 * f->vec + f->cluster
                                                        : 4 * (f->vec + 1) + 1 + 4 * f->vec;
    int scalar_ld = f->layernorm && f->mode == MCIR_ROWS_BLOCK_STREAM ? 1 : 0;
    size_t used = 0;
#define WHY(...) used += (size_t)snprintf(why + used, used < n ? n - used : 0, __VA_ARGS__)
    if (div) WHY("%d IEEE divisions / square roots; ", div);
    if (ex2 != ex2_max) WHY("%d ex2 (want %d); ", ex2, ex2_max);
    if (a->ld_global[0] > scalar_ld || a->st_global[0] || a->ld_global[1] || a->st_global[1])
        WHY("scalar or 8-byte global accesses: ld %d/%d/%d st %d/%d/%d; ", a->ld_global[0], a->ld_global[1],
            a->ld_global[2], a->st_global[0], a->st_global[1], a->st_global[2]);
    if (!a->ld_global[2] || !a->st_global[2]) WHY("no 16-byte global accesses; ");
    if (a->spill_load_bytes + a->spill_store_bytes) WHY("spills; ");
    if (f->inflight_sm < 32 * 1024) WHY("%lld bytes in flight per SM; ", (long long)f->inflight_sm);
#undef WHY
}

static void facts_of(const mcir_compilation *c, const mcir_kernel_plan *k, norm_facts *f) {
    mcir_rows_problem g;
    mcir_rows_layout l;
    const char *why = "";
    ck_assert(mcir_rows_problem_of(NULL, k, &g));
    ck_assert_msg(mcir_rows_layout_of_tiling(c->target, &g, &k->tiling, &l, &why), "%s", why);
    f->softmax = g.op == MCIR_OP_SOFTMAX;
    f->layernorm = g.op == MCIR_OP_LAYERNORM;
    f->mode = l.mode;
    f->values = l.chunks * l.vector_width;
    f->vec = l.vector_width;
    f->cluster = l.cluster;
    f->inflight_sm = l.inflight_sm_bytes;
}

static int norm_kernel(const mcir_compilation *c) {
    return cgt_kernel_index(c->plan, MCIR_TEMPLATE_STREAMING_NORM, "streaming norm");
}

/* Every benchmark shape: 3 ops x 3 dtypes x widths 1024..262144, 2^25
 * elements each. */
START_TEST(benchmark_shapes_pass_the_static_checks) {
    if (!mcir_nvrtc_available(NULL, 0)) {
        fprintf(stderr, "  skipped: no NVRTC\n");
        return;
    }
    int checked = 0, seen[5] = {0}, sass_seen = 0;
    for (int o = 0; o < 3; o++)
        for (int d = 0; d < 3; d++)
            for (long long w = 1024; w <= 262144; w *= 2) {
                char *js = norm_graph(ops[o], dtypes[d], (1LL << 25) / w, w);
                mcir_compilation c;
                cgt_compile_js(js, "sm_90", true, &c);
                free(js);
                int i = norm_kernel(&c);
                const mcir_kernel_plan *k = &c.plan->kernels[i];
                norm_facts f;
                facts_of(&c, k, &f);
                char why[512];
                check_ptx(mcir_codegen_kernel_ptx(c.codegen, i), &k->audit, &f, why, sizeof why);
                fprintf(stderr, "  %-9s %-4s %6lld: %-19s %2d values, %3d regs (plan %2d), %4lld KiB in flight/SM%s%s\n",
                        ops[o], dtypes[d], w, mcir_rows_mode_name(f.mode), f.values, k->audit.registers,
                        k->tiling.registers_estimate, (long long)f.inflight_sm / 1024, why[0] ? ": " : "", why);
                ck_assert_msg(!why[0], "%s %s %lld: %s", ops[o], dtypes[d], w, why);
                /* the SASS the SM executes (nvdisasm; where it is missing the
                 * PTX checks above stand alone) */
                mcir_codegen_audit_sass(c.codegen);
                const mcir_sass_audit *sa = &k->audit.sass;
                mcir_kernel_cost cost;
                mcir_cost_kernel(k, c.target, NULL, &cost);
                double issue_share = cost.memory_us > 0 ? cost.issue_us / cost.memory_us : 0;
                /* softmax over a row read twice computes its exponential
                 * twice and its loads twice: the one documented exception
                 * (no benchmark shape on sm_90) */
                double share_max = f.softmax && f.mode == MCIR_ROWS_BLOCK_STREAM ? 0.6 : 0.5;
                ck_assert_msg(issue_share <= share_max, "%s %s %lld: modelled issue %.1f us, memory %.1f us", ops[o],
                              dtypes[d], w, cost.issue_us, cost.memory_us);
                if (sa->state == 1) {
                    sass_seen++;
                    fprintf(stderr, "            SASS: %.1f weighted instructions per 16 B, %lld KiB in flight/SM, "
                                    "issue %.2f of memory\n",
                            sa->weighted_per_16b, (long long)sa->inflight_sm_bytes / 1024, issue_share);
                    ck_assert_msg(sa->kernel.fchk == 0 && sa->kernel.slow_paths == 0, "%s %s %lld: IEEE slow paths",
                                  ops[o], dtypes[d], w);
                    ck_assert_msg(sa->loop.ldg[0] + sa->loop.ldg[1] + sa->loop.ldg[2] == 0 &&
                                      sa->loop.stg[0] + sa->loop.stg[1] + sa->loop.stg[2] == 0,
                                  "%s %s %lld: narrow global accesses in the main loop", ops[o], dtypes[d], w);
                    ck_assert_msg(sa->weighted_per_16b > 0 && sa->weighted_per_16b <= 80,
                                  "%s %s %lld: %.1f weighted SASS instructions per 16 B", ops[o], dtypes[d], w,
                                  sa->weighted_per_16b);
                    ck_assert_msg(sa->inflight_sm_bytes >= 32 * 1024, "%s %s %lld: %lld bytes in flight per SM",
                                  ops[o], dtypes[d], w, (long long)sa->inflight_sm_bytes);
                }
                int est = k->tiling.registers_estimate, got = k->audit.registers;
                if (getenv("NORMS_REGS")) fprintf(stderr, "REGS %s %s %lld %s est %d got %d\n", ops[o], dtypes[d], w,
                                                  mcir_rows_mode_name(f.mode), est, got);
                else ck_assert_msg(abs(est - got) <= 0.1 * got + 0.5, "%s %s %lld: plan %d registers, ptxas %d", ops[o],
                              dtypes[d], w, est, got);
                seen[f.mode]++;
                checked++;
                mcir_compilation_free(&c);
            }
    ck_assert_int_eq(checked, 81);
    if (!sass_seen) fprintf(stderr, "  SASS: not available (nvdisasm): the SASS checks did not run\n");
    /* sm_90 splits the rows too wide for one block over a cluster: no
     * benchmark shape reads its row twice there (the emulator test runs
     * that layout on sm_80) */
    for (int m = 0; m < 5; m++)
        ck_assert_msg(m == MCIR_ROWS_BLOCK_STREAM ? seen[m] == 0 : seen[m] > 0, "%d shapes in layout %s", seen[m],
                      mcir_rows_mode_name(m));
}
END_TEST

/* A mutant's source: compiled by NVRTC and checked like the real one. */
static void check_mutant(const char *op, const char *dt, long long w, void (*mutate)(char **src), const char *want) {
    char *js = norm_graph(op, dt, (1LL << 25) / w, w);
    mcir_compilation c;
    cgt_compile_js(js, "sm_90", true, &c);
    free(js);
    int i = norm_kernel(&c);
    norm_facts f;
    facts_of(&c, &c.plan->kernels[i], &f);
    char *src = strdup(mcir_codegen_kernel_source(c.codegen, i));
    mutate(&src);
    mcir_compiled bin;
    memset(&bin, 0, sizeof bin);
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_nvrtc_compile_source("mutant", src, "sm_90", &bin, &d));
    mcir_kernel_audit a;
    memset(&a, 0, sizeof a);
    a = c.plan->kernels[i].audit;   /* resources as the original; the census of the mutant's PTX */
    char *ptx = strndup(bin.ptx, bin.ptx_size);
    /* the mutant's global accesses: count them in its PTX */
    a.ld_global[0] = ptx_count(ptx, "ld.global.f32") + ptx_count(ptx, "ld.global.u16") +
                     ptx_count(ptx, "ld.global.nc.f32") + ptx_count(ptx, "ld.global.nc.u16") +
                     ptx_count(ptx, "ld.global.b16") + ptx_count(ptx, "ld.global.nc.b16");
    char why[512];
    check_ptx(ptx, &a, &f, why, sizeof why);
    fprintf(stderr, "  mutant %s %s %lld: %s\n", op, dt, w, why[0] ? why : "(nothing found)");
    ck_assert_msg(strstr(why, want), "the mutant was not caught: want '%s', got '%s'", want, why);
    free(ptx);
    free(src);
    mcir_compiled_free(&bin);
    mcir_compilation_free(&c);
}

/* Replaces the first occurrence of `from` in *src by `to` (fails the test
 * when the template moved). */
static void replace(char **src, const char *from, const char *to) {
    char *p = strstr(*src, from);
    ck_assert_msg(p, "'%s' is not in the source: update the mutation", from);
    size_t a = (size_t)(p - *src), nf = strlen(from), nt = strlen(to), n = strlen(*src);
    char *out = malloc(n - nf + nt + 1);
    memcpy(out, *src, a);
    memcpy(out + a, to, nt);
    memcpy(out + a + nt, p + nf, n - a - nf + 1);
    free(*src);
    *src = out;
}

/* layernorm's output divided by the deviation per element, as before #42 */
static void restore_division(char **src) {
    replace(src, "const float n = (v[u] - a) * b;", "const float n = (v[u] - a) / sqrtf(1.0f / (b * b));");
}

/* X read element by element (its value function), not 16 bytes at a time */
static void scalar_x(char **src) {
    replace(src, "__device__ __forceinline__ void x_load(i64 xi, float* out, MC_PARAMS) {\n",
            "__device__ __forceinline__ float x_first(i64 xi, MC_PARAMS);\n"
            "__device__ __forceinline__ void x_load(i64 xi, float* out, MC_PARAMS) {\n"
            "    for (int u = 0; u < NORM_V; u++) out[u] = x_first(xi + u, MC_ARGS);\n    return;\n");
}

START_TEST(mutants_are_caught) {
    if (!mcir_nvrtc_available(NULL, 0)) {
        fprintf(stderr, "  skipped: no NVRTC\n");
        return;
    }
    check_mutant("layernorm", "f16", 1024, restore_division, "IEEE divisions");
    check_mutant("layernorm", "bf16", 8192, restore_division, "IEEE divisions");
    check_mutant("rmsnorm", "f16", 4096, scalar_x, "scalar or 8-byte global accesses");
    check_mutant("softmax", "f32", 1024, scalar_x, "scalar or 8-byte global accesses");
}
END_TEST

/* Every layout of each norm on the emulated device against the
 * interpreter: few rows, the benchmark's widths where the emulator allows. */
START_TEST(every_layout_matches_the_interpreter_on_emu) {
    if (!test_have_cxx()) {
        fprintf(stderr, "  skipped: no C++ compiler for the kernel emulator\n");
        return;
    }
    /* on sm_90 a row too wide for one block's shared memory is split over
     * a cluster (200004 f32: 4 blocks, the last slice shorter); sm_80 has
     * no clusters and reads it twice */
    static const struct {
        const char *dt;
        long long rows, width;
        mcir_rows_mode mode;
        const char *arch;
    } cases[] = {
        {"f16", 24, 1024, MCIR_ROWS_WARP_REGS, "sm_90"},    {"f32", 9, 800, MCIR_ROWS_WARP_REGS, "sm_90"},
        {"bf16", 3, 4096, MCIR_ROWS_BLOCK_REGS, "sm_90"},   {"f32", 2, 12296, MCIR_ROWS_BLOCK_REGS, "sm_90"},
        {"f16", 2, 40000, MCIR_ROWS_BLOCK_SMEM, "sm_90"},   {"f32", 2, 60000, MCIR_ROWS_CLUSTER_SMEM, "sm_90"},
        {"f32", 2, 60000, MCIR_ROWS_BLOCK_STREAM, "sm_80"},
#if !defined(__SANITIZE_ADDRESS__)   /* the sanitizer build: the small ones (CI time, docs/testing.md) */
        {"bf16", 2, 131072, MCIR_ROWS_CLUSTER_SMEM, "sm_90"}, {"f32", 2, 200004, MCIR_ROWS_CLUSTER_SMEM, "sm_90"},
        {"bf16", 2, 131072, MCIR_ROWS_BLOCK_STREAM, "sm_80"},
#endif
    };
    for (size_t s = 0; s < sizeof cases / sizeof *cases; s++)
        for (int o = 0; o < 3; o++) {
            char *js = norm_graph(ops[o], cases[s].dt, cases[s].rows, cases[s].width);
            mcir_compilation c;
            cgt_compile_js(js, cases[s].arch, false, &c);
            free(js);
            int i = norm_kernel(&c);
            norm_facts f;
            facts_of(&c, &c.plan->kernels[i], &f);
            ck_assert_msg(f.mode == cases[s].mode, "%s %s %lld: layout %s", ops[o], cases[s].dt, cases[s].width,
                          mcir_rows_mode_name(f.mode));
            char *diag = NULL;
            cgt_emu_result r = cgt_emu_device(c.graph, c.plan, c.memory, 0, 11, NULL, NULL, &diag);
            double tol = strcmp(cases[s].dt, "f32") == 0 ? 1e-5 : 1e-2;
            fprintf(stderr, "  emu %-9s %-4s %6lld x %lld %s (%s): rel err %.3g%s\n", ops[o], cases[s].dt,
                    cases[s].rows, cases[s].width, cases[s].arch, mcir_rows_mode_name(f.mode), r.rel,
                    r.ran && r.finite && r.rel <= tol ? "" : " FAIL");
            ck_assert_msg(r.ran && r.finite && r.rel <= tol, "%s %s %lld: %s", ops[o], cases[s].dt, cases[s].width,
                          diag ? diag : "");
            for (int k = 0; k < 4; k++) ck_assert_int_eq(r.findings[k], 0);
            free(diag);
            mcir_compilation_free(&c);
        }
}
END_TEST

static Suite *norms_suite(void) {
    Suite *s = suite_create("norms");
    TCase *tc = tcase_create("static");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, benchmark_shapes_pass_the_static_checks);
    tcase_add_test(tc, mutants_are_caught);
    suite_add_tcase(s, tc);
    TCase *emu = tcase_create("emu");
    tcase_set_timeout(emu, 1200);
    tcase_add_test(emu, every_layout_matches_the_interpreter_on_emu);
    suite_add_tcase(s, emu);
    return s;
}

int main(void) { return test_main_nofork(norms_suite()); }
