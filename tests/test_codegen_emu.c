/*
 * test_codegen_emu.c — the generated kernels executed on the CPU. The plans
 * run on the emulated device (emu/emu.h) through the real runtime
 * (runtime/runtime.c): each compile unit's CUDA source built as C++ against
 * emu/cuda_emu.h (threads as coroutines, real barriers and warp shuffles,
 * the mma.sync / wgmma fragment layouts, TMA and mbarriers emulated), the
 * arena, tensor maps, split-KV scratch, cuBLAS arguments and launches as on
 * a GPU; the outputs must match the reference interpreter with the GPU
 * test's tolerances (1e-3 relative for f32, 2e-2 for f16/bf16; integers
 * exactly). This exercises the templates' index math, bounds checks,
 * tiling, online softmax and reductions where no GPU exists. Grids are
 * capped at 3 blocks (every template is a grid-stride loop, so this also
 * tests the stride logic). The detector tests run small hand-written
 * kernels on the emulator directly, each with one bug. Skips (77) without
 * a C++ compiler.
 */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "codegen_util.h"
#include "emu/emu.h"
#include "kernelplan/launch.h"
#include "emu/cuda_emu.h"
#include "test_util.h"

static char work_dir[256];

/* Global traffic and time over all emulated launches. */
static unsigned long long total_bytes_read, total_bytes_written;
static int total_launches;
static double emu_s;   /* seconds inside emulated launches */

/* Called for every kernel plan run_emulated launched, with the global bytes
 * its launches requested (grid-stride loops make them independent of the
 * capped grid) and whether it ran as a cuBLAS product and its generated
 * epilogue (staged), e.g. to compare with the cost model's global_bytes. */
static void (*launch_hook)(const mcir_kernel_plan *kp, bool staged, unsigned long long bytes);

/* MCIR_EMU_SPLIT=normal (the normal build's CTest entry, tests/codegen.cmake):
 * of the sweeps the sanitizer build runs a share of (norm vector paths,
 * pointwise vectors), only the share it leaves out, so the two builds run
 * each case once between them (CI time, docs/testing.md). Unset (by hand):
 * every case. */
#ifndef MCIR_EMU_SANITIZED
static bool sanitizer_runs_share(void) {
    const char *e = getenv("MCIR_EMU_SPLIT");
    return e && !strcmp(e, "normal");
}
#endif

/* ------------------------------------------------------------ coverage
 * Each emulated launch is filed under "template dtype code-path", read from
 * its generated source; main prints the table. */
typedef struct cov_row { char key[120]; int launches; } cov_row;
static cov_row coverage[256];
static int n_coverage;

static bool has(const char *src, const char *s) { return strstr(src, s) != NULL; }

static void coverage_key(const mcir_kernel_plan *kp, const char *src, bool staged, char *key, size_t n) {
    const mcir_tensor *out = kp->anchor && kp->anchor->n_outputs ? kp->anchor->outputs[0]
                             : kp->n_writes ? kp->writes[0] : NULL;
    const mcir_tensor *in = kp->anchor && kp->anchor->n_inputs ? kp->anchor->inputs[0]
                            : kp->n_reads ? kp->reads[0] : out;
    const char *dt = in ? mcir_dtype_name(in->dtype) : "-";
    const char *odt = out ? mcir_dtype_name(out->dtype) : "-";
    char path[96] = "";
    size_t m = 0;
#define ADD(cond, s) do { if (cond) m += (size_t)snprintf(path + m, sizeof path - m, " %s", s); } while (0)
    switch (kp->tpl) {
    case MCIR_TEMPLATE_STREAMING_ATTENTION:
        ADD(has(src, "ATT_BF16"), "mma");
        ADD(!has(src, "ATT_BF16"), "fma");
        ADD(has(src, "ATT_CAUSAL 1"), "causal");
        ADD(has(src, "ATT_HAS_MASK 1"), "mask");
        ADD(has(src, "ATT_VEC_Q true") || has(src, "ATT_VEC_K true"), "vec16B");
        ADD(has(src, "mc_scratch"), "split-kv+merge");
        ADD(strcmp(dt, odt) != 0, "mixed-out");
        break;
    case MCIR_TEMPLATE_STREAMING_NORM:
        ADD(has(src, "NORM_KIND 0"), "softmax");
        ADD(has(src, "NORM_KIND 1"), "layernorm");
        ADD(has(src, "NORM_KIND 2"), "rmsnorm");
        ADD(has(src, "NORM_WARP_ROW 1"), "warp-row");
        ADD(has(src, "NORM_WARP_ROW 0") && has(src, "NORM_CACHE 1"), "block-row-cached");
        ADD(has(src, "NORM_WARP_ROW 0") && has(src, "NORM_CACHE 0"), "wide-row");
        ADD(has(src, "NORM_V 4"), "vec4");
        ADD(has(src, "NORM_V 8"), "vec8");
        ADD(!has(src, "NORM_INNER 1LL"), "strided-axis");
        break;
    case MCIR_TEMPLATE_MATMUL:
        ADD(staged, "cuBLAS+epilogue");
        ADD(!staged, "tiled");
        ADD(!staged && has(src, "#define MM_MMA 1"), "mma");
        ADD(!staged && has(src, "#define MM_MMA 0"), "fma");
        ADD(!staged && has(src, "#define MM_STAGES 2"), "2-stage");
        ADD(has(src, "MM_TRANS_A 1") && !staged, "trans-a");
        ADD(has(src, "MM_TRANS_B 1") && !staged, "trans-b");
        break;
    case MCIR_TEMPLATE_CONV2D:
        ADD(has(src, "#define MM_MMA 1"), "implicit-gemm mma");
        ADD(has(src, "#define MM_MMA 0"), "implicit-gemm fma");
        ADD(has(src, "#define MM_STAGES 2"), "2-stage");
        break;
    case MCIR_TEMPLATE_COPY:
        ADD(has(src, "TR_R"), "tiled-transpose");
        ADD(!has(src, "TR_R"), "strided");
        break;
    case MCIR_TEMPLATE_REDUCE:
        ADD(has(src, "red_take("), "arg");
        ADD(has(src, "a, scratch)") || has(src, "MC_SST(scratch[warp], a)"), "block-row");   /* mc_block_sum / max; every prelude defines them */
        ADD(!has(src, "a, scratch)") && !has(src, "MC_SST(scratch[warp], a)"), "warp-row");
        break;
    case MCIR_TEMPLATE_POOL:
        ADD(has(src, "P_H * P_W + q"), "global-avg");
        ADD(!has(src, "P_H * P_W + q"), "window");
        break;
    default: break;
    }
    ADD(kp->n_nodes > 1, "fused");
#undef ADD
    snprintf(key, n, "%-20s %-5s%s", mcir_template_name(kp->tpl), dt, path);
}

static bool coverage_has(const char *key) {
    for (int i = 0; i < n_coverage; i++)
        if (strcmp(coverage[i].key, key) == 0) return true;
    return false;
}

static void coverage_add(const char *key) {
    for (int i = 0; i < n_coverage; i++)
        if (strcmp(coverage[i].key, key) == 0) {
            coverage[i].launches++;
            return;
        }
    if (n_coverage < (int)(sizeof coverage / sizeof *coverage)) {
        snprintf(coverage[n_coverage].key, sizeof coverage[n_coverage].key, "%s", key);
        coverage[n_coverage++].launches = 1;
    }
}

static int cov_cmp(const void *a, const void *b) { return strcmp(((const cov_row *)a)->key, ((const cov_row *)b)->key); }

static void coverage_print(void) {
    qsort(coverage, (size_t)n_coverage, sizeof *coverage, cov_cmp);
    fprintf(stderr, "emulated code paths (every launch with bounds, race and uninitialised-read checks):\n");
    fprintf(stderr, "  %-20s %-5s %-44s %s\n", "template", "dtype", "path", "launches");
    for (int i = 0; i < n_coverage; i++) fprintf(stderr, "  %-71s %d\n", coverage[i].key, coverage[i].launches);
}

/* The launches of kernel i among the emulated device's records, each the
 * first not yet claimed of its name: its entry and its split-KV merge
 * (generated), or its cuBLAS epilogue (*staged); their global bytes
 * summed. Kernels with the same code share an entry. */
static bool launches_of(mcir_codegen *cg, int i, const mcir_emu_launch_record *r, int n, bool *staged,
                        unsigned long long *bytes, bool *used) {
    const char *entry = mcir_codegen_kernel_entry(cg, i);
    char merge[300];
    snprintf(merge, sizeof merge, "%s_merge", entry ? entry : "");
    const char *names[3] = {entry, merge, mcir_codegen_kernel_epilogue_entry(cg, i)};
    bool any = false;
    *staged = false;
    *bytes = 0;
    for (int w = 0; w < 3; w++) {
        if (!names[w]) continue;
        for (int k = 0; k < n; k++) {
            if (used[k] || strcmp(r[k].kernel, names[w]) != 0) continue;
            used[k] = true;
            any = true;
            *staged |= w == 2;
            *bytes += r[k].bytes_read + r[k].bytes_written;
            break;
        }
    }
    return any;
}

/* Plan p (with memory plan mp: the pool arena, else each tensor its own
 * allocation) run on the emulated device through the real runtime
 * (runtime/runtime.c, emu/emu.h): the arena, tensor maps, split-KV scratch
 * and launches as on a GPU, every launch at most 3 blocks (every template
 * is a grid-stride loop, so this also tests the stride logic), with the
 * bounds, race and uninitialised-read checks. via_cublas: matrix products
 * go to the emulated cuBLAS (a host GEMM honouring the runtime's arguments)
 * and their generated epilogues (MCIR_NO_CUBLASLT: cuBLASLt would take the
 * epilogue itself; mcirc --device emu runs that path, tests/emu_examples.sh);
 * otherwise MCIR_NO_CUBLAS and every kernel is generated. Outputs against the interpreter's on the same
 * inputs: integers exactly, f32 within 1e-3 and f16 / bf16 within 2e-2 of
 * the largest reference value. */
static bool run_emulated(mcir_graph *g, mcir_plan *p, const mcir_memplan *mp, const char *what, bool via_cublas) {
    mcir_diag d = mcir_diag_stderr();
    mcir_codegen *cg = mcir_codegen_new(p, mp, &d);
    ck_assert_msg(cg != NULL, "%s: codegen failed", what);
    mcir_env *cpu = mcir_env_new(g, 3), *dev = mcir_env_new(g, 3);
    mcir_env_keep_all(cpu, true);
    ck_assert(mcir_interp_run(g, cpu, &d));
    setenv(via_cublas ? "MCIR_NO_CUBLASLT" : "MCIR_NO_CUBLAS", "1", 1);
    mcir_emu_set_max_blocks(3);
    mcir_emu_reset_launches();
    mcir_gpu_stats st;
    bool ok = mcir_emu_run(cg, dev, mp ? MCIR_ALLOC_POOL : MCIR_ALLOC_EAGER, &st, &d);
    mcir_emu_set_max_blocks(0);
    unsetenv(via_cublas ? "MCIR_NO_CUBLASLT" : "MCIR_NO_CUBLAS");
    const mcir_emu_launch_record *r;
    int n = mcir_emu_launches(&r);
    bool *used = calloc((size_t)n + 1, 1);
    for (int k = 0; k < n; k++) {
        emu_s += r[k].seconds;
        total_bytes_read += r[k].bytes_read;
        total_bytes_written += r[k].bytes_written;
    }
    total_launches += n;
    for (int i = 0; i < p->n_kernels && ok; i++) {
        const mcir_kernel_plan *kp = &p->kernels[i];
        const char *src = mcir_codegen_kernel_source(cg, i);
        bool staged;
        unsigned long long bytes;
        if (!src || !launches_of(cg, i, r, n, &staged, &bytes, used)) continue;
        const char *epi_name = NULL;
        int64_t epi_grid = 0;
        const char *epi = mcir_codegen_kernel_epilogue(cg, i, &epi_name, &epi_grid);
        if (launch_hook) launch_hook(kp, staged, bytes);
        char key[120];
        coverage_key(kp, staged ? epi : src, staged, key, sizeof key);
        coverage_add(key);
    }
    free(used);
    for (int j = 0; j < g->n_outputs && ok; j++) {
        const mcir_tensor *t = g->outputs[j];
        int64_t n_el = mcir_tensor_numel(t);
        void *raw = malloc((size_t)mcir_tensor_bytes(t) + 1);
        ck_assert(mcir_env_get_raw(dev, t, raw));
        if (mcir_dtype_is_integer(t->dtype)) {   /* exactly the interpreter's integers */
            const int64_t *c = mcir_env_get_int(cpu, t);
            int64_t bad = -1, nonzero = 0;
            for (int64_t k = 0; k < n_el; k++) {
                if (bad < 0 && mcir_value_get_int(t->dtype, raw, k) != c[k]) bad = k;
                nonzero += c[k] != 0;
            }
            fprintf(stderr, "  %-28s%s %-6s %s exact", what, via_cublas ? " (cuBLAS)" : "", t->name,
                    bad < 0 && nonzero ? "ok  " : "FAIL");
            if (bad >= 0)
                fprintf(stderr, " (at %lld: cpu %lld emu %lld)", (long long)bad, (long long)c[bad],
                        (long long)mcir_value_get_int(t->dtype, raw, bad));
            if (!nonzero) fprintf(stderr, " (all zero: nothing compared)");
            fputc('\n', stderr);
            if (bad >= 0 || !nonzero) ok = false;
            free(raw);
            continue;
        }
        const float *c = mcir_env_get(cpu, t);
        int64_t worst = 0, nonfinite = 0;
        double maxref = 0, maxerr = 0;
        for (int64_t k = 0; k < n_el; k++) {
            nonfinite += !isfinite(c[k]);
            float v = (float)mcir_value_get(t->dtype, raw, k);
            if (fabs(c[k]) > maxref) maxref = fabs(c[k]);
            double e = isnan(v) != isnan(c[k]) ? INFINITY : fabs((double)v - (double)c[k]);
            if (isnan(v) && isnan(c[k])) e = 0;
            if (e > maxerr) { maxerr = e; worst = k; }
        }
        double rel = maxerr / (maxref > 1e-6 ? maxref : 1e-6);
        /* an f32 output cast from a 16-bit value carries 16-bit precision
         * (softmax over 262144 columns: f16 subnormals, 1 ulp 0.7 % of the
         * largest) */
        bool narrow = t->dtype != MCIR_DTYPE_F32 ||
                      (t->producer && t->producer->op == MCIR_OP_CAST && t->producer->inputs[0]->dtype != MCIR_DTYPE_F32);
        double tol = narrow ? 2e-2 : 1e-3;
        float wv = n_el == 0 ? 0.0f : (float)mcir_value_get(t->dtype, raw, worst);
        /* a comparison that can fail: an output that is empty, all zero or
         * mostly NaN / inf in the reference says nothing about the kernel */
        const char *vacuous = n_el == 0 ? "empty" : 2 * nonfinite > n_el ? "mostly non-finite" : maxref == 0 ? "all zero" : NULL;
        fprintf(stderr, "  %-28s%s %-6s %s rel err %.3g (at %lld: cpu %g emu %g)", what,
                via_cublas ? " (cuBLAS)" : "", t->name, rel <= tol && !vacuous ? "ok  " : "FAIL", rel,
                (long long)worst, n_el ? c[worst] : 0.0f, n_el ? wv : 0.0f);
        if (nonfinite) fprintf(stderr, " %lld of %lld non-finite", (long long)nonfinite, (long long)n_el);
        if (vacuous) fprintf(stderr, " (%s: nothing compared)", vacuous);
        fputc('\n', stderr);
        if (!(rel <= tol) || vacuous) ok = false;
        free(raw);
    }
    mcir_env_free(cpu);
    mcir_env_free(dev);
    mcir_codegen_free(cg);
    return ok;
}

/* ------------------------------------------------ the detectors firing
 * Small hand-written kernels, each with one bug compute-sanitizer would
 * report, run over a three-buffer arena: x (an input, 256 floats), y (200
 * floats the kernel writes) and its neighbour z (64 floats). */
enum { BX = 256, BY = 200, BZ = 64 };

typedef struct broken_run {
    emu_launch L;
    int rc;
} broken_run;

/* blocks per cluster of the next run_broken (the cluster tests set it) */
static unsigned broken_cluster;

static broken_run run_broken_checks(const char *name, const char *source, unsigned grid, unsigned block, size_t smem,
                                    int checks) {
    static float arena[BX + BY + BZ] __attribute__((aligned(256)));
    static unsigned char y_init[BY * 4], z_init[BZ * 4];
    for (int i = 0; i < BX; i++) arena[i] = (float)(i % 17) - 8.0f;
    memset(arena + BX, 0xff, (BY + BZ) * 4);
    memset(y_init, 0, sizeof y_init);
    memset(z_init, 0, sizeof z_init);
    emu_buffer bufs[3] = {{"x", (unsigned char *)arena, BX * 4, NULL},
                          {"y", (unsigned char *)(arena + BX), BY * 4, y_init},
                          {"z", (unsigned char *)(arena + BX + BY), BZ * 4, z_init}};
    char call[256];
    snprintf(call, sizeof call, "%s((const float*)a[0], (float*)a[1]);", name);
    void *h = cgt_emu_compile(work_dir, test_source_dir(), name, source, call, NULL);
    ck_assert_ptr_nonnull(h);
    emu_run_fn run = (emu_run_fn)dlsym(h, "emu_run");
    void (*body)(void **) = (void (*)(void **))dlsym(h, "emu_kernel");
    ck_assert(run && body);
    void *args[2] = {bufs[0].base, bufs[1].base};
    broken_run r = {.L = {.kernel = name, .body = body, .args = args, .n_args = 2, .grid = grid, .block = block,
                          .smem = smem, .cluster = broken_cluster, .write_args = 2, .buffers = bufs, .n_buffers = 3,
                          .checks = checks}};
    r.rc = run(&r.L);
    r.L.args = NULL;
    r.L.buffers = NULL;
    dlclose(h);
    return r;
}

static broken_run run_broken(const char *name, const char *source, unsigned grid, unsigned block, size_t smem) {
    return run_broken_checks(name, source, grid, block, smem, EMU_CHECK_ALL);
}

#define KERNEL(name, body) \
    "extern \"C\" __global__ void " name "(const float* x, float* y) {\n" body "\n}\n"

START_TEST(test_detector_smem_race_missing_barrier) {
    /* each thread stages x in shared memory and reads its neighbour's
     * (another warp's) value without __syncthreads between */
    broken_run r = run_broken("k_missing_barrier", KERNEL("k_missing_barrier",
        "    __shared__ float buf[128];\n"
        "    int t = threadIdx.x;\n"
        "    MC_SST(buf[t], MC_GLD(x, t));\n"
        "    MC_GST(y, t, MC_SLD(buf[(t + 32) % 128]));"), 1, 128, 0);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_int_gt(r.L.findings[EMU_FIND_RACE], 0);
    /* the fixed kernel is clean */
    r = run_broken("k_with_barrier", KERNEL("k_with_barrier",
        "    __shared__ float buf[128];\n"
        "    int t = threadIdx.x;\n"
        "    MC_SST(buf[t], MC_GLD(x, t));\n"
        "    __syncthreads();\n"
        "    MC_GST(y, t, MC_SLD(buf[(t + 32) % 128]));"), 1, 128, 0);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_int_eq(r.L.findings[EMU_FIND_RACE] + r.L.findings[EMU_FIND_INIT] + r.L.findings[EMU_FIND_BOUNDS], 0);
}
END_TEST

START_TEST(test_detector_smem_race_within_warp) {
    /* lanes of one warp exchange values through shared memory: unordered
     * on Volta+ without __syncwarp (a shuffle orders no memory) */
    broken_run r = run_broken("k_warp_nosync", KERNEL("k_warp_nosync",
        "    __shared__ float buf[32];\n"
        "    int t = threadIdx.x;\n"
        "    MC_SST(buf[t], MC_GLD(x, t));\n"
        "    float v = __shfl_xor_sync(0xffffffffu, 1.0f, 1);\n"
        "    MC_GST(y, t, MC_SLD(buf[t ^ 1]) * v);"), 1, 32, 0);
    ck_assert_int_gt(r.L.findings[EMU_FIND_RACE], 0);
    r = run_broken("k_warp_syncwarp", KERNEL("k_warp_syncwarp",
        "    __shared__ float buf[32];\n"
        "    int t = threadIdx.x;\n"
        "    MC_SST(buf[t], MC_GLD(x, t));\n"
        "    __syncwarp();\n"
        "    MC_GST(y, t, MC_SLD(buf[t ^ 1]));"), 1, 32, 0);
    ck_assert_int_eq(r.rc, 0);
}
END_TEST

START_TEST(test_detector_global_race_across_blocks) {
    /* every block writes the same elements of y (no grid-stride offset) */
    broken_run r = run_broken("k_global_race", KERNEL("k_global_race",
        "    int t = threadIdx.x;\n"
        "    if (t < 200) MC_GST(y, t, MC_GLD(x, t) + (float)blockIdx.x);"), 2, 256, 0);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_int_gt(r.L.findings[EMU_FIND_RACE], 0);
    ck_assert_int_eq(r.L.findings[EMU_FIND_BOUNDS], 0);
    /* one block reads what another writes: also a race */
    r = run_broken("k_global_raw", KERNEL("k_global_raw",
        "    int i = blockIdx.x * 100 + threadIdx.x;\n"
        "    if (blockIdx.x == 0) MC_GST(y, i, MC_GLD(x, i));\n"
        "    else MC_GST(y, i, MC_GLD(y, i - 100) + 1.0f);"), 2, 100, 0);
    ck_assert_int_gt(r.L.findings[EMU_FIND_RACE], 0);
}
END_TEST

START_TEST(test_detector_one_byte_race) {
    /* bool/u8 outputs: the race shadow is byte-exact, so neighbouring
     * threads storing neighbouring bytes are clean ... */
    static const char BYTES_OK[] = KERNEL("k_bytes_ok",
        "    unsigned char* b = (unsigned char*)y;\n"
        "    int i = blockIdx.x * 128 + threadIdx.x;\n"
        "    MC_GST(b, i, (unsigned char)(MC_GLD(x, i) > 0.0f));");
    const int bytes = EMU_CHECK_ALL | EMU_CHECK_BYTES;
    broken_run r = run_broken_checks("k_bytes_ok", BYTES_OK, 2, 128, 0, bytes);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_int_eq(r.L.findings[EMU_FIND_RACE] + r.L.findings[EMU_FIND_INIT] + r.L.findings[EMU_FIND_BOUNDS], 0);
    /* (2-byte granules cannot track them: every 1-byte store is reported) */
    r = run_broken("k_bytes_ok", BYTES_OK, 2, 128, 0);
    ck_assert_int_eq(r.L.findings[EMU_FIND_RACE], 256);
    /* ... and two threads of different warps storing one byte race, with
     * the neighbouring bytes stored by others (a 2-byte granule would
     * also have flagged the clean kernel above) */
    r = run_broken_checks("k_bytes_race", KERNEL("k_bytes_race",
        "    unsigned char* b = (unsigned char*)y;\n"
        "    int t = threadIdx.x;\n"
        "    MC_GST(b, t == 127 ? 0 : t, (unsigned char)t);"), 1, 128, 0, bytes);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_int_eq(r.L.findings[EMU_FIND_RACE], 1);
    ck_assert_int_eq(r.L.findings[EMU_FIND_BOUNDS], 0);
    /* the same in shared memory: a byte written by one warp and read by
     * another without a barrier; the neighbouring bytes are clean */
    r = run_broken_checks("k_bytes_smem", KERNEL("k_bytes_smem",
        "    __shared__ unsigned char s[64];\n"
        "    int t = threadIdx.x;\n"
        "    MC_SST(s[t], (unsigned char)t);\n"
        "    __syncthreads();\n"
        "    if (t == 40) MC_SST(s[3], 7);\n"
        "    MC_GST(y, t, (float)MC_SLD(s[t ^ 1]));"), 1, 64, 0, bytes);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_int_eq(r.L.findings[EMU_FIND_RACE], 1);
}
END_TEST

START_TEST(test_detector_bounds_into_neighbour) {
    /* y has 200 elements; the kernel's bound is x's 256: the last 56
     * stores land in z, inside the same allocation (ASan sees nothing) */
    broken_run r = run_broken("k_oob", KERNEL("k_oob",
        "    int t = threadIdx.x;\n"
        "    MC_GST(y, t, MC_GLD(x, t));"), 1, 256, 0);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_int_eq(r.L.findings[EMU_FIND_BOUNDS], 56);
    ck_assert_int_eq(r.L.stats.bytes_written, 256 * 4);
    /* shared memory past the dynamic allocation */
    r = run_broken("k_oob_smem", KERNEL("k_oob_smem",
        "    MC_DYNAMIC_SMEM(sm);\n"
        "    float* s = (float*)sm;\n"
        "    int t = threadIdx.x;\n"
        "    MC_SST(s[t], MC_GLD(x, t));\n"
        "    if (t < 200) MC_GST(y, t, 1.0f);"), 1, 256, 128 * 4);
    ck_assert_int_eq(r.L.findings[EMU_FIND_BOUNDS], 128);
}
END_TEST

START_TEST(test_detector_uninitialised_reads) {
    /* y was never written in the run */
    broken_run r = run_broken("k_uninit_global", KERNEL("k_uninit_global",
        "    int t = threadIdx.x;\n"
        "    if (t < 200) { float v = MC_GLD(y, t); MC_GST(y, t, v + MC_GLD(x, t)); }"), 1, 256, 0);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_int_eq(r.L.findings[EMU_FIND_INIT], 200);
    /* dynamic shared memory read before any thread of the block wrote it */
    r = run_broken("k_uninit_smem", KERNEL("k_uninit_smem",
        "    MC_DYNAMIC_SMEM(sm);\n"
        "    float* s = (float*)sm;\n"
        "    int t = threadIdx.x;\n"
        "    if (t < 64) MC_SST(s[t], MC_GLD(x, t));\n"
        "    __syncthreads();\n"
        "    MC_GST(y, t, MC_SLD(s[t]));"), 1, 128, 128 * 4);
    ck_assert_int_eq(r.L.findings[EMU_FIND_INIT], 64);
    ck_assert_int_eq(r.L.findings[EMU_FIND_RACE], 0);
    ck_assert_int_eq(r.L.stats.bytes_read, 64 * 4);
}
END_TEST

START_TEST(test_detector_in_place_race) {
    /* the memory plan put y_out on y_in's bytes (in place): thread t reads
     * y_in[t] but writes y_out[t + 1], which thread t + 1 reads — a race
     * between two buffers that share an address */
    static float arena[256] __attribute__((aligned(256)));
    static unsigned char out_init[256 * 4];
    for (int i = 0; i < 256; i++) arena[i] = (float)i;
    memset(out_init, 0, sizeof out_init);
    emu_buffer bufs[2] = {{"y_in", (unsigned char *)arena, 256 * 4, NULL},
                          {"y_out", (unsigned char *)arena, 256 * 4, out_init}};
    const char *src = "extern \"C\" __global__ void k_in_place(const float* a, float* b) {\n"
                      "    int t = threadIdx.x;\n"
                      "    float v = MC_GLD(a, t);\n"
                      "    MC_GST(b, (t + 1) % 256, v * 2.0f);\n"
                      "}\n";
    void *h = cgt_emu_compile(work_dir, test_source_dir(), "k_in_place", src, "k_in_place((const float*)a[0], (float*)a[1]);", NULL);
    ck_assert_ptr_nonnull(h);
    emu_run_fn run = (emu_run_fn)dlsym(h, "emu_run");
    void (*body)(void **) = (void (*)(void **))dlsym(h, "emu_kernel");
    ck_assert(run && body);
    void *args[2] = {arena, arena};
    int arg_buf[2] = {0, 1};
    emu_launch L = {.kernel = "k_in_place", .body = body, .args = args, .n_args = 2, .grid = 1, .block = 256,
                    .write_args = 2, .buffers = bufs, .n_buffers = 2, .arg_buffer = arg_buf,
                    .checks = EMU_CHECK_ALL};
    ck_assert_int_ne(run(&L), 0);
    ck_assert_int_gt(L.findings[EMU_FIND_RACE], 0);
    ck_assert_int_eq(L.findings[EMU_FIND_BOUNDS] + L.findings[EMU_FIND_INIT], 0);
    dlclose(h);
}
END_TEST

/* Thread-block clusters: the blocks of a cluster run together; each
 * publishes a value in its shared memory, and after barrier.cluster every
 * thread sums the cluster's values through distributed shared memory. */
#define CLUSTER_SUM(name, first_sync, last_sync)                                               \
    KERNEL(name, "    __shared__ float2 v[1];\n"                                                \
                 "    int t = threadIdx.x;\n"                                                   \
                 "    if (t == 0) MC_SST(v[0], make_float2(MC_GLD(x, blockIdx.x), 1.0f));\n"    \
                 first_sync                                                                      \
                 "    float s = 0.0f;\n"                                                        \
                 "    for (unsigned q = 0; q < mc_cluster_size(); q++) s += mc_dsmem_ld(&v[0], q).x;\n" \
                 "    MC_GST(y, blockIdx.x * blockDim.x + t, s);\n" last_sync)

START_TEST(test_detector_clusters) {
    broken_cluster = 2;
    broken_run r = run_broken("k_cluster_sum", CLUSTER_SUM("k_cluster_sum", "    mc_cluster_sync();\n",
                                                           "    mc_cluster_sync();\n"), 4, 32, 0);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_int_eq(r.L.findings[EMU_FIND_RACE] + r.L.findings[EMU_FIND_INIT] + r.L.findings[EMU_FIND_BOUNDS] +
                         r.L.findings[EMU_FIND_HANG], 0);
    ck_assert_int_eq(r.L.stats.bytes_written, 4 * 32 * 4);
    /* no barrier.cluster between the write and the remote reads: a race */
    r = run_broken("k_cluster_nosync", CLUSTER_SUM("k_cluster_nosync", "", "    mc_cluster_sync();\n"), 4, 32, 0);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_int_gt(r.L.findings[EMU_FIND_RACE] + r.L.findings[EMU_FIND_INIT], 0);
    /* no barrier.cluster before exit: a block reads the shared memory of
     * one that has exited */
    r = run_broken("k_cluster_exit", CLUSTER_SUM("k_cluster_exit", "    mc_cluster_sync();\n", ""), 4, 32, 0);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_int_gt(r.L.findings[EMU_FIND_BOUNDS], 0);
    /* one block skips the barrier: a hang, named */
    r = run_broken("k_cluster_skip", CLUSTER_SUM("k_cluster_skip", "    if (mc_cluster_rank() == 0) mc_cluster_sync();\n",
                                                 ""), 4, 32, 0);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_int_gt(r.L.findings[EMU_FIND_HANG], 0);
    /* a rank outside the cluster */
    r = run_broken("k_cluster_rank", KERNEL("k_cluster_rank",
        "    __shared__ float2 v[1];\n"
        "    if (threadIdx.x == 0) MC_SST(v[0], make_float2(1.0f, 1.0f));\n"
        "    mc_cluster_sync();\n"
        "    MC_GST(y, blockIdx.x * blockDim.x + threadIdx.x, mc_dsmem_ld(&v[0], 2).x);\n"
        "    mc_cluster_sync();"), 4, 32, 0);
    ck_assert_int_gt(r.L.findings[EMU_FIND_BOUNDS], 0);
    /* a grid that is not whole clusters */
    r = run_broken("k_cluster_sum3", CLUSTER_SUM("k_cluster_sum3", "    mc_cluster_sync();\n",
                                                 "    mc_cluster_sync();\n"), 3, 32, 0);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_int_gt(r.L.findings[EMU_FIND_BOUNDS], 0);
    /* global memory: a block reads what another block of its cluster wrote
     * before barrier.cluster (ordered); without the barrier, a race */
    r = run_broken("k_cluster_global", KERNEL("k_cluster_global",
        "    if (mc_cluster_rank() == 0) MC_GST(y, blockIdx.x * blockDim.x + threadIdx.x, 1.0f);\n"
        "    mc_cluster_sync();\n"
        "    if (mc_cluster_rank() == 1) MC_GST(y, blockIdx.x * blockDim.x + threadIdx.x, "
        "MC_GLD(y, (blockIdx.x - 1) * blockDim.x + threadIdx.x));"), 4, 32, 0);
    ck_assert_int_eq(r.rc, 0);
    r = run_broken("k_cluster_global_race", KERNEL("k_cluster_global_race",
        "    if (mc_cluster_rank() == 0) MC_GST(y, blockIdx.x * blockDim.x + threadIdx.x, 1.0f);\n"
        "    if (mc_cluster_rank() == 1) MC_GST(y, blockIdx.x * blockDim.x + threadIdx.x, "
        "MC_GLD(y, (blockIdx.x - 1) * blockDim.x + threadIdx.x));"), 4, 32, 0);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_int_gt(r.L.findings[EMU_FIND_RACE], 0);
    broken_cluster = 0;
}
END_TEST

START_TEST(test_emu_stats_count_requested_bytes) {
    /* re-reads count: 3 loads of x per thread, one f32 store */
    broken_run r = run_broken("k_traffic", KERNEL("k_traffic",
        "    for (int i = threadIdx.x; i < 200; i += blockDim.x)\n"
        "        MC_GST(y, i, MC_GLD(x, i) + MC_GLD(x, i) * MC_GLD(x, (i + 1) % 200));"), 1, 64, 0);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_int_eq(r.L.stats.bytes_read, 200 * 3 * 4);
    ck_assert_int_eq(r.L.stats.bytes_written, 200 * 4);
    ck_assert_int_eq(r.L.stats.loads, 600);
    ck_assert_int_eq(r.L.stats.stores, 200);
}
END_TEST

#define ATT(name, dt, nq, nk, d, dv, extra_in, extra_arg, attrs)                                        \
    "{\"mcir\":1,\"name\":\"" name "\",\"inputs\":[{\"name\":\"q\",\"dtype\":\"" dt "\",\"shape\":[1,2," #nq "," #d "]},"     \
    "{\"name\":\"k\",\"dtype\":\"" dt "\",\"shape\":[1,2," #nk "," #d "]},{\"name\":\"v\",\"dtype\":\"" dt "\",\"shape\":[1,2," #nk "," #dv "]}" \
    extra_in "],\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"" extra_arg "],\"outputs\":[\"y\"]," \
    "\"attrs\":{" attrs "}}],\"outputs\":[\"y\"]}"

static const char *const ATTENTION[] = {
    ATT("e_att_f16_c", "f16", 77, 96, 80, 80, "", "", "\"causal\":true"),
    ATT("e_att_bf16_m", "bf16", 33, 70, 64, 64, ",{\"name\":\"m\",\"dtype\":\"bf16\",\"shape\":[1,1,33,70]}", ",\"m\"", "\"causal\":false"),
    ATT("e_att_f16_nq_gt_nk", "f16", 40, 24, 32, 32, "", "", "\"causal\":true"),
    ATT("e_att_f32_c", "f32", 33, 50, 40, 24, "", "", "\"causal\":true"),
    ATT("e_att_f32_m", "f32", 20, 37, 64, 64, ",{\"name\":\"m\",\"dtype\":\"f32\",\"shape\":[37]}", ",\"m\"", "\"scale\":0.3"),
};

/* The cost model (kernelplan/cost.c) against the kernels: every emulated
 * generated kernel's launches request within 10 % of the global_bytes the
 * model gives its generated path (the emulator counts every load and
 * store, re-reads included), and a staged cuBLAS epilogue runs only where
 * the model puts a library epilogue. Installed as launch_hook by
 * test_cost_model_counts_what_kernels_request, it checks every launch of
 * the tests that run after it (the unit graphs and the examples). */
static int cost_checked;

static void check_cost_model(const mcir_kernel_plan *kp, bool staged, unsigned long long bytes) {
    const mcir_target *t = mcir_target_find("sm_90");   /* global bytes do not depend on it */
    mcir_kernel_cost model;
    if (staged) {
        mcir_cost_kernel(kp, t, NULL, &model);
        ck_assert_msg(model.library && (model.launches == 2 || !strcmp(model.library, "cublasLt")),
                      "%s: codegen staged an epilogue the cost model does not expect", kp->name);
        return;
    }
    mcir_cost_kernel(kp, t, &(mcir_cost_options){.generated_only = true}, &model);
    double got = (double)bytes, want = (double)model.global_bytes;
    ck_assert_msg(fabs(got - want) <= 0.1 * want,
                  "%s (%s): the kernel requested %.0f global bytes, the cost model says %.0f",
                  kp->name, mcir_template_name(kp->tpl), got, want);
    cost_checked++;
}

START_TEST(test_cost_model_counts_what_kernels_request) {
    launch_hook = check_cost_model;   /* stays installed for the tests after this one */
    mcir_graph *g = cgt_graph(
        "{\"mcir\":1,\"name\":\"e_cost\",\"inputs\":[{\"name\":\"a\",\"dtype\":\"f32\",\"shape\":[2,40,24]}],"
        "\"weights\":[{\"name\":\"w\",\"dtype\":\"f32\",\"shape\":[24,72]},{\"name\":\"b\",\"dtype\":\"f32\",\"shape\":[72]}],"
        "\"nodes\":[{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"w\"],\"outputs\":[\"y\"]},"
        "{\"name\":\"ad\",\"op\":\"add\",\"inputs\":[\"y\",\"b\"],\"outputs\":[\"z\"]},"
        "{\"name\":\"sm\",\"op\":\"softmax\",\"inputs\":[\"z\"],\"outputs\":[\"s\"]}],\"outputs\":[\"s\"]}");
    cgt_kspec ks[] = {{MCIR_TEMPLATE_MATMUL, "mm", "mm,ad"}, {MCIR_TEMPLATE_STREAMING_NORM, "sm", "sm"}};
    mcir_plan *p = cgt_plan(g, "sm_90", 2, ks);
    ck_assert(run_emulated(g, p, NULL, g->name, false));
    ck_assert(run_emulated(g, p, NULL, g->name, true));
    ck_assert_int_ge(cost_checked, 3);
    mcir_graph_free(g);
}
END_TEST

START_TEST(test_attention_emulated) {
    int failed = 0;
    for (size_t i = 0; i < sizeof ATTENTION / sizeof *ATTENTION; i++) {
        mcir_graph *g = cgt_graph(ATTENTION[i]);
        mcir_plan *p = cgt_plan_naive(g, "sm_90");
        if (!run_emulated(g, p, NULL, g->name, false)) failed++;
        mcir_graph_free(g);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST

START_TEST(test_attention_head_split_merge_emulated) {
    static const char *dts[] = {"f32", "f16"};
    int failed = 0;
    for (int t = 0; t < 2; t++) {
        char json[4096];
        snprintf(json, sizeof json,
                 "{\"mcir\":1,\"name\":\"e_mha_%s\",\"inputs\":["
                 "{\"name\":\"xq\",\"dtype\":\"%s\",\"shape\":[2,21,96]},{\"name\":\"xk\",\"dtype\":\"%s\",\"shape\":[2,35,96]},"
                 "{\"name\":\"xv\",\"dtype\":\"%s\",\"shape\":[2,35,96]}],\"nodes\":["
                 "{\"name\":\"rq\",\"op\":\"reshape\",\"inputs\":[\"xq\"],\"outputs\":[\"q4\"],\"attrs\":{\"shape\":[2,21,3,32]}},"
                 "{\"name\":\"tq\",\"op\":\"transpose\",\"inputs\":[\"q4\"],\"outputs\":[\"q\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
                 "{\"name\":\"rk\",\"op\":\"reshape\",\"inputs\":[\"xk\"],\"outputs\":[\"k4\"],\"attrs\":{\"shape\":[2,35,3,32]}},"
                 "{\"name\":\"tk\",\"op\":\"transpose\",\"inputs\":[\"k4\"],\"outputs\":[\"k\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
                 "{\"name\":\"rv\",\"op\":\"reshape\",\"inputs\":[\"xv\"],\"outputs\":[\"v4\"],\"attrs\":{\"shape\":[2,35,3,32]}},"
                 "{\"name\":\"tv\",\"op\":\"transpose\",\"inputs\":[\"v4\"],\"outputs\":[\"v\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
                 "{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":[\"o\"],\"attrs\":{\"causal\":true}},"
                 "{\"name\":\"to\",\"op\":\"transpose\",\"inputs\":[\"o\"],\"outputs\":[\"o4\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
                 "{\"name\":\"ro\",\"op\":\"reshape\",\"inputs\":[\"o4\"],\"outputs\":[\"y\"],\"attrs\":{\"shape\":[2,21,96]}}],"
                 "\"outputs\":[\"y\"]}", dts[t], dts[t], dts[t], dts[t]);
        mcir_graph *g = cgt_graph(json);
        cgt_kspec ks[] = {{MCIR_TEMPLATE_STREAMING_ATTENTION, "at", "rq,tq,rk,tk,rv,tv,at,to,ro"}};
        mcir_plan *p = cgt_plan(g, "sm_90", 1, ks);
        if (!run_emulated(g, p, NULL, g->name, false)) failed++;
        mcir_graph_free(g);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST

static const char *const MISC[] = {
    /* norms with a fused prologue / epilogue, warp rows and block rows */
    "{\"mcir\":1,\"name\":\"e_norms\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[5,77]},"
    "{\"name\":\"r\",\"dtype\":\"f32\",\"shape\":[5,77]},{\"name\":\"g\",\"dtype\":\"f32\",\"shape\":[77]},"
    "{\"name\":\"b\",\"dtype\":\"f32\",\"shape\":[77]},{\"name\":\"w\",\"dtype\":\"f32\",\"shape\":[3,3000]},"
    "{\"name\":\"gw\",\"dtype\":\"f32\",\"shape\":[3000]}],"
    "\"nodes\":[{\"name\":\"sm\",\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y1\"]},"
    "{\"name\":\"ln\",\"op\":\"layernorm\",\"inputs\":[\"x\",\"g\",\"b\"],\"outputs\":[\"y2\"]},"
    "{\"name\":\"rn\",\"op\":\"rmsnorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"y3\"]},"
    "{\"name\":\"smw\",\"op\":\"softmax\",\"inputs\":[\"w\"],\"outputs\":[\"y4\"]},"
    "{\"name\":\"lnw\",\"op\":\"layernorm\",\"inputs\":[\"w\",\"gw\"],\"outputs\":[\"y5\"]},"
    "{\"name\":\"sm1\",\"op\":\"softmax\",\"inputs\":[\"r\"],\"outputs\":[\"y6\"],\"attrs\":{\"axis\":0}}],"
    "\"outputs\":[\"y1\",\"y2\",\"y3\",\"y4\",\"y5\",\"y6\"]}",
    "{\"mcir\":1,\"name\":\"e_normb\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"bf16\",\"shape\":[4,2,96]},"
    "{\"name\":\"g\",\"dtype\":\"bf16\",\"shape\":[96]}],"
    "\"nodes\":[{\"name\":\"ln\",\"op\":\"layernorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"y1\"],\"attrs\":{\"axis\":-2}},"
    "{\"name\":\"rn\",\"op\":\"rmsnorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"y2\"]}],\"outputs\":[\"y1\",\"y2\"]}",
    /* conv + pools + reductions + copies */
    "{\"mcir\":1,\"name\":\"e_misc\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[2,6,9,11]},"
    "{\"name\":\"w\",\"dtype\":\"f32\",\"shape\":[8,3,3,3]},{\"name\":\"cb\",\"dtype\":\"f32\",\"shape\":[8]}],"
    "\"nodes\":[{\"name\":\"cv\",\"op\":\"conv2d\",\"inputs\":[\"x\",\"w\",\"cb\"],\"outputs\":[\"c\"],"
    "\"attrs\":{\"strides\":[2,1],\"pads\":[1,1,1,1],\"dilations\":[1,2],\"groups\":2}},"
    "{\"name\":\"re\",\"op\":\"relu\",\"inputs\":[\"c\"],\"outputs\":[\"cr\"]},"
    "{\"name\":\"mp\",\"op\":\"max_pool2d\",\"inputs\":[\"cr\"],\"outputs\":[\"p1\"],\"attrs\":{\"kernel\":[3,3],\"strides\":[2,2],\"pads\":[1,1,1,1]}},"
    "{\"name\":\"ap\",\"op\":\"avg_pool2d\",\"inputs\":[\"cr\"],\"outputs\":[\"p2\"],\"attrs\":{\"kernel\":[2,3],\"pads\":[1,1,0,1]}},"
    "{\"name\":\"gp\",\"op\":\"global_avg_pool\",\"inputs\":[\"cr\"],\"outputs\":[\"p3\"]},"
    "{\"name\":\"rs\",\"op\":\"reduce_sum\",\"inputs\":[\"x\"],\"outputs\":[\"s1\"],\"attrs\":{\"axes\":[1,3]}},"
    "{\"name\":\"rm\",\"op\":\"reduce_mean\",\"inputs\":[\"x\"],\"outputs\":[\"s2\"],\"attrs\":{\"axes\":[-1],\"keepdims\":false}},"
    "{\"name\":\"rx\",\"op\":\"reduce_max\",\"inputs\":[\"x\"],\"outputs\":[\"s3\"],\"attrs\":{\"axes\":[0,1,2,3]}},"
    "{\"name\":\"t2\",\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"xt\"],\"attrs\":{\"perm\":[0,1,3,2]}},"
    "{\"name\":\"t3\",\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"xu\"],\"attrs\":{\"perm\":[3,0,2,1]}},"
    "{\"name\":\"sl\",\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"xs\"],\"attrs\":{\"axis\":2,\"start\":-2,\"end\":1,\"step\":-3}},"
    "{\"name\":\"sp\",\"op\":\"split\",\"inputs\":[\"x\"],\"outputs\":[\"xa\",\"xb\"],\"attrs\":{\"axis\":1,\"sizes\":[2,4]}},"
    "{\"name\":\"cc\",\"op\":\"concat\",\"inputs\":[\"xb\",\"xa\",\"xb\"],\"outputs\":[\"xc\"],\"attrs\":{\"axis\":1}}],"
    "\"outputs\":[\"p1\",\"p2\",\"p3\",\"s1\",\"s2\",\"s3\",\"xt\",\"xu\",\"xs\",\"xc\"]}",
    /* big reduction (block per output) */
    "{\"mcir\":1,\"name\":\"e_bigred\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[3,2000]}],"
    "\"nodes\":[{\"name\":\"rs\",\"op\":\"reduce_sum\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"axes\":[1]}}],\"outputs\":[\"y\"]}",
};

START_TEST(test_norms_reductions_copies_conv_emulated) {
    int failed = 0;
    for (size_t i = 0; i < sizeof MISC / sizeof *MISC; i++) {
        mcir_graph *g = cgt_graph(MISC[i]);
        mcir_plan *p = cgt_plan_naive(g, "sm_90");
        if (!run_emulated(g, p, NULL, g->name, false)) failed++;
        mcir_graph_free(g);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* The norms' vector paths (16 bytes per lane: NORM_V 8 for f16/bf16, 4
 * for f32; 8 bytes where only 4 | W; scalar for odd widths) in every dtype
 * at widths from a warp's row to a block per row of 262144 (two rows keep
 * the emulator quick): layernorm + gelu fused after it, rmsnorm + a
 * residual add after it, softmax + a cast to another dtype (packed stores
 * of f32 from 16-bit X and of f16 from f32), a residual add before a
 * layernorm without beta (X computed: the scalar path), and softmax over
 * the first axis (strided rows). */
START_TEST(test_norm_vector_paths_emulated) {
    static const char *dts[] = {"f32", "f16", "bf16"};
    static const int W[] = {1024, 4096, 1000, 77, 262144};
    int failed = 0;
    for (int t = 0; t < 3; t++)
        for (int w = 0; w < 5; w++) {
#ifdef MCIR_EMU_SANITIZED
            /* the sanitizer build: every other (dtype, width), each dtype
             * and each width still run (the normal build runs all 15; CI
             * time, docs/testing.md) */
            if ((t * 5 + w) % 2) continue;
#else
            if (sanitizer_runs_share() && (t * 5 + w) % 2 == 0) continue;   /* run there */
#endif
            const char *dt = dts[t], *other = t == 0 ? "f16" : "f32";
            int rows = W[w] > 20000 ? 2 : W[w] > 2000 ? 3 : 9;
            char json[4096];
            snprintf(json, sizeof json,
                "{\"mcir\":1,\"name\":\"e_nv_%s_%d\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"%s\",\"shape\":[%d,%d]},"
                "{\"name\":\"r\",\"dtype\":\"%s\",\"shape\":[%d,%d]},{\"name\":\"g\",\"dtype\":\"%s\",\"shape\":[%d]},"
                "{\"name\":\"b\",\"dtype\":\"%s\",\"shape\":[%d]}],"
                "\"nodes\":[{\"name\":\"ln\",\"op\":\"layernorm\",\"inputs\":[\"x\",\"g\",\"b\"],\"outputs\":[\"y1\"]},"
                "{\"name\":\"ge\",\"op\":\"gelu\",\"inputs\":[\"y1\"],\"outputs\":[\"z1\"]},"
                "{\"name\":\"rn\",\"op\":\"rmsnorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"y2\"]},"
                "{\"name\":\"ra\",\"op\":\"add\",\"inputs\":[\"y2\",\"r\"],\"outputs\":[\"z2\"]},"
                "{\"name\":\"sm\",\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y3\"]},"
                "{\"name\":\"ca\",\"op\":\"cast\",\"inputs\":[\"y3\"],\"outputs\":[\"z3\"],\"attrs\":{\"to\":\"%s\"}},"
                "{\"name\":\"pa\",\"op\":\"add\",\"inputs\":[\"x\",\"r\"],\"outputs\":[\"h\"]},"
                "{\"name\":\"lp\",\"op\":\"layernorm\",\"inputs\":[\"h\",\"g\"],\"outputs\":[\"z4\"]}%s],"
                "\"outputs\":[\"z1\",\"z2\",\"z3\",\"z4\"%s]}",
                dt, W[w], dt, rows, W[w], dt, rows, W[w], dt, W[w], dt, W[w], other,
                W[w] <= 1024 ? ",{\"name\":\"s0\",\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"z5\"],\"attrs\":{\"axis\":0}}" : "",
                W[w] <= 1024 ? ",\"z5\"" : "");
            mcir_graph *g = cgt_graph(json);
            cgt_kspec ks[] = {{MCIR_TEMPLATE_STREAMING_NORM, "ln", "ln,ge"},
                              {MCIR_TEMPLATE_STREAMING_NORM, "rn", "rn,ra"},
                              {MCIR_TEMPLATE_STREAMING_NORM, "sm", "sm,ca"},
                              {MCIR_TEMPLATE_STREAMING_NORM, "lp", "pa,lp"},
                              {MCIR_TEMPLATE_STREAMING_NORM, "s0", "s0"}};
            mcir_plan *p = cgt_plan(g, "sm_90", W[w] <= 1024 ? 5 : 4, ks);
            if (!run_emulated(g, p, NULL, g->name, false)) failed++;
            mcir_graph_free(g);
        }
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* The same norms over a row width that is a dimension (seq in [1, 200]),
 * in every dtype: one codegen, size-generic (the plan's width-dependent
 * choices made for the range), then rebound and run at seq = 1, 37 and
 * 200 against the interpreter at each, with no compile after the first.
 * Over [3, seq]: a warp per row, scalar (seq is not a multiple of a
 * vector at every size), gamma/beta [seq] by column, the epilogues as
 * above, a residual-add prologue (X computed) and softmax over the first
 * axis of [8, seq] (rows of 8 strided by seq: 1 only at seq = 1, so
 * scalar at every size, not 4-wide); over [2, seq, 8]
 * normalised over its last two axes: a block per row with the row in its
 * threads' registers for 8*200 elements, 16-byte loads (8*seq is a multiple of 8 and 4 at
 * every size) for rmsnorm, a mul prologue (scalar) for layernorm, gamma
 * [8] through the broadcast (a column only at seq = 1). */
START_TEST(test_norms_over_a_symbolic_width_emulated) {
    static const char *dts[] = {"f32", "f16", "bf16"};
    static const int64_t sizes[] = {1, 37, 200};
    int failed = 0;
    for (int t = 0; t < 3; t++) {
        const char *dt = dts[t], *other = t == 0 ? "f16" : "f32";
        char json[4096];
        snprintf(json, sizeof json,
            "{\"mcir\":1,\"name\":\"e_nsym_%s\",\"dims\":{\"seq\":{\"min\":1,\"max\":200}},"
            "\"inputs\":[{\"name\":\"x\",\"dtype\":\"%s\",\"shape\":[3,\"seq\"]},"
            "{\"name\":\"r\",\"dtype\":\"%s\",\"shape\":[3,\"seq\"]},{\"name\":\"g\",\"dtype\":\"%s\",\"shape\":[\"seq\"]},"
            "{\"name\":\"b\",\"dtype\":\"%s\",\"shape\":[\"seq\"]},{\"name\":\"w\",\"dtype\":\"%s\",\"shape\":[2,\"seq\",8]},"
            "{\"name\":\"rw\",\"dtype\":\"%s\",\"shape\":[2,\"seq\",8]},{\"name\":\"gw\",\"dtype\":\"%s\",\"shape\":[8]},"
            "{\"name\":\"x8\",\"dtype\":\"%s\",\"shape\":[8,\"seq\"]}],"
            "\"nodes\":[{\"name\":\"ln\",\"op\":\"layernorm\",\"inputs\":[\"x\",\"g\",\"b\"],\"outputs\":[\"y1\"]},"
            "{\"name\":\"ge\",\"op\":\"gelu\",\"inputs\":[\"y1\"],\"outputs\":[\"z1\"]},"
            "{\"name\":\"rn\",\"op\":\"rmsnorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"y2\"]},"
            "{\"name\":\"ra\",\"op\":\"add\",\"inputs\":[\"y2\",\"r\"],\"outputs\":[\"z2\"]},"
            "{\"name\":\"sm\",\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y3\"]},"
            "{\"name\":\"ca\",\"op\":\"cast\",\"inputs\":[\"y3\"],\"outputs\":[\"z3\"],\"attrs\":{\"to\":\"%s\"}},"
            "{\"name\":\"pa\",\"op\":\"add\",\"inputs\":[\"x\",\"r\"],\"outputs\":[\"h\"]},"
            "{\"name\":\"lp\",\"op\":\"layernorm\",\"inputs\":[\"h\",\"g\"],\"outputs\":[\"z4\"]},"
            "{\"name\":\"s0\",\"op\":\"softmax\",\"inputs\":[\"x8\"],\"outputs\":[\"z5\"],\"attrs\":{\"axis\":0}},"
            "{\"name\":\"pm\",\"op\":\"mul\",\"inputs\":[\"w\",\"rw\"],\"outputs\":[\"hw\"]},"
            "{\"name\":\"lw\",\"op\":\"layernorm\",\"inputs\":[\"hw\",\"gw\"],\"outputs\":[\"z6\"],\"attrs\":{\"axis\":1}},"
            "{\"name\":\"rv\",\"op\":\"rmsnorm\",\"inputs\":[\"w\",\"gw\"],\"outputs\":[\"z7\"],\"attrs\":{\"axis\":1}}],"
            "\"outputs\":[\"z1\",\"z2\",\"z3\",\"z4\",\"z5\",\"z6\",\"z7\"]}",
            dt, dt, dt, dt, dt, dt, dt, dt, dt, other);
        mcir_graph *g = cgt_graph(json);
        cgt_kspec ks[] = {{MCIR_TEMPLATE_STREAMING_NORM, "ln", "ln,ge"},
                          {MCIR_TEMPLATE_STREAMING_NORM, "rn", "rn,ra"},
                          {MCIR_TEMPLATE_STREAMING_NORM, "sm", "sm,ca"},
                          {MCIR_TEMPLATE_STREAMING_NORM, "lp", "pa,lp"},
                          {MCIR_TEMPLATE_STREAMING_NORM, "s0", "s0"},
                          {MCIR_TEMPLATE_STREAMING_NORM, "lw", "pm,lw"},
                          {MCIR_TEMPLATE_STREAMING_NORM, "rv", "rv"}};
        mcir_plan *p = cgt_plan(g, "sm_90", 7, ks);
        /* the plan's layouts: warp rows over seq, block rows over 8*seq */
        int v16 = t == 0 ? 4 : 8;
        for (int i = 0; i < 7; i++) {
            const mcir_kernel_plan *kp = &p->kernels[i];
            bool wide = i >= 5;
            ck_assert_msg(kp->smem_bytes == 0 && kp->smem_static_bytes == (wide ? 128 : 0), "%s: %lld + %lld B",
                          kp->name, (long long)kp->smem_static_bytes, (long long)kp->smem_bytes);
            ck_assert_int_eq(kp->tiling.vector_width, i == 6 ? v16 : 1);
        }
        mcir_diag d = mcir_diag_stderr();
        mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
        ck_assert_ptr_nonnull(cg);
        for (int i = 0; i < 7; i++) {
            const char *why;
            ck_assert_msg(mcir_codegen_kernel_generic(cg, i, &why), "%s: %s", p->kernels[i].name, why);
        }
        int compiles = -1;
        for (int si = 0; si < 3; si++) {
            ck_assert(mcir_codegen_rebind(cg, &sizes[si], &d));
            mcir_env *cpu = mcir_env_new(g, 3), *dev = mcir_env_new(g, 3);
            ck_assert(mcir_interp_run(g, cpu, &d));
            mcir_gpu_stats st;
            bool ok = mcir_emu_run(cg, dev, MCIR_ALLOC_EAGER, &st, &d);
            if (!ok) fprintf(stderr, "%s at seq=%lld: the emulated run failed\n", g->name, (long long)sizes[si]);
            for (int j = 0; j < g->n_outputs && ok; j++) {
                const mcir_tensor *o = g->outputs[j];
                mcir_compare_result cmp;
                mcir_values_compare(mcir_env_get(dev, o), mcir_env_get(cpu, o), mcir_tensor_numel(o), &cmp);
                if (!mcir_compare_within(&cmp, mcir_compare_tolerance(o->dtype))) {
                    fprintf(stderr, "%s at seq=%lld: %s max rel err %g\n", g->name, (long long)sizes[si], o->name,
                            cmp.max_rel);
                    ok = false;
                }
            }
            if (!ok) failed++;
            mcir_compile_stats es;
            mcir_codegen_emu_compile_stats(cg, &es);
            if (si > 0 && es.nvrtc_compiles != compiles) {
                fprintf(stderr, "%s at seq=%lld: compiled again\n", g->name, (long long)sizes[si]);
                failed++;
            }
            compiles = es.nvrtc_compiles;
            mcir_env_free(cpu);
            mcir_env_free(dev);
        }
        fprintf(stderr, "  %-28s 7 kernels size-generic, run at seq=1, 37, 200: %d compiles at the first "
                        "size (the rest from the cache), none after\n", g->name, compiles);
        mcir_codegen_free(cg);
        mcir_graph_free(g);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* cos and sin (a rotary table computed at run time: positions times
 * frequencies) in one elementwise kernel, f32 and f16, against the
 * interpreter. */
/* cos and sin (mc_cos / mc_sin, prelude.cuh) over the whole float range:
 * the rotary chain at angles up to ~200 (Cody-Waite reduction), and the
 * seeded values scaled past 105615 (Payne-Hanek in registers) up to
 * ~1e37, each against the interpreter's libm (2 ulp apart at most). */
START_TEST(test_trig_emulated) {
    int failed = 0;
    static const char *const scales[] = {"3.0e5", "7.0e11", "2.5e23", "1.0e37"};
    for (int k = 0; k < 4; k++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"mcir\":1,\"name\":\"e_trig_large%d\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[512]}],"
                 "\"nodes\":[{\"name\":\"big\",\"op\":\"scale\",\"inputs\":[\"x\"],\"outputs\":[\"b\"],\"attrs\":{\"value\":%s}},"
                 "{\"name\":\"c\",\"op\":\"cos\",\"inputs\":[\"b\"],\"outputs\":[\"co\"]},"
                 "{\"name\":\"s\",\"op\":\"sin\",\"inputs\":[\"b\"],\"outputs\":[\"si\"]}],"
                 "\"outputs\":[\"co\",\"si\"]}", k, scales[k]);
        mcir_graph *g = cgt_graph(json);
        cgt_kspec ks[] = {{MCIR_TEMPLATE_ELEMENTWISE, NULL, "big,c,s"}};
        mcir_plan *p = cgt_plan(g, "sm_90", 1, ks);
        if (!run_emulated(g, p, NULL, g->name, false)) failed++;
        mcir_graph_free(g);
    }
    static const char *dts[] = {"f32", "f16"};
    for (int t = 0; t < 2; t++) {
        char json[2048];
        snprintf(json, sizeof json,
                 "{\"mcir\":1,\"name\":\"e_trig_%s\",\"inputs\":[{\"name\":\"pos\",\"dtype\":\"%s\",\"shape\":[37,1]},"
                 "{\"name\":\"x\",\"dtype\":\"%s\",\"shape\":[37,24]}],"
                 "\"weights\":[{\"name\":\"freq\",\"dtype\":\"%s\",\"shape\":[24]}],"
                 "\"nodes\":[{\"name\":\"ang\",\"op\":\"mul\",\"inputs\":[\"pos\",\"freq\"],\"outputs\":[\"a\"]},"
                 "{\"name\":\"a8\",\"op\":\"scale\",\"inputs\":[\"a\"],\"outputs\":[\"a2\"],\"attrs\":{\"value\":40.0}},"
                 "{\"name\":\"c\",\"op\":\"cos\",\"inputs\":[\"a2\"],\"outputs\":[\"co\"]},"
                 "{\"name\":\"s\",\"op\":\"sin\",\"inputs\":[\"a2\"],\"outputs\":[\"si\"]},"
                 "{\"name\":\"xc\",\"op\":\"mul\",\"inputs\":[\"x\",\"co\"],\"outputs\":[\"p\"]},"
                 "{\"name\":\"xs\",\"op\":\"mul\",\"inputs\":[\"x\",\"si\"],\"outputs\":[\"q\"]},"
                 "{\"name\":\"y\",\"op\":\"sub\",\"inputs\":[\"p\",\"q\"],\"outputs\":[\"y\"]}],"
                 "\"outputs\":[\"y\"]}", dts[t], dts[t], dts[t], dts[t]);
        mcir_graph *g = cgt_graph(json);
        cgt_kspec ks[] = {{MCIR_TEMPLATE_ELEMENTWISE, NULL, "ang,a8,c,s,xc,xs,y"}};
        mcir_plan *p = cgt_plan(g, "sm_90", 1, ks);
        if (!run_emulated(g, p, NULL, g->name, false)) failed++;
        mcir_graph_free(g);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST

START_TEST(test_fused_chains_emulated) {
    int failed = 0;
    static const char *dts[] = {"f32", "f16", "bf16"};
    for (int t = 0; t < 3; t++) {
        char json[4096];
        snprintf(json, sizeof json,
                 "{\"mcir\":1,\"name\":\"e_fused_%s\",\"inputs\":[{\"name\":\"a\",\"dtype\":\"%s\",\"shape\":[2,37,45]},"
                 "{\"name\":\"b\",\"dtype\":\"%s\",\"shape\":[70,45]},{\"name\":\"bias\",\"dtype\":\"%s\",\"shape\":[70]},"
                 "{\"name\":\"res\",\"dtype\":\"%s\",\"shape\":[2,37,70]},{\"name\":\"g\",\"dtype\":\"%s\",\"shape\":[70]}],"
                 "\"nodes\":[{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"c\"],\"attrs\":{\"transpose_b\":true}},"
                 "{\"name\":\"ad\",\"op\":\"add\",\"inputs\":[\"c\",\"bias\"],\"outputs\":[\"h\"]},"
                 "{\"name\":\"ge\",\"op\":\"gelu\",\"inputs\":[\"h\"],\"outputs\":[\"h2\"],\"attrs\":{\"approximate\":\"tanh\"}},"
                 "{\"name\":\"r\",\"op\":\"add\",\"inputs\":[\"h2\",\"res\"],\"outputs\":[\"h3\"]},"
                 "{\"name\":\"ln\",\"op\":\"rmsnorm\",\"inputs\":[\"h3\",\"g\"],\"outputs\":[\"z\"]},"
                 "{\"name\":\"si\",\"op\":\"silu\",\"inputs\":[\"z\"],\"outputs\":[\"z2\"]},"
                 "{\"name\":\"ex\",\"op\":\"exp\",\"inputs\":[\"z2\"],\"outputs\":[\"z2e\"]},"
                 "{\"name\":\"pw\",\"op\":\"pow\",\"inputs\":[\"z2e\",\"g\"],\"outputs\":[\"z3\"]},"
                 "{\"name\":\"mx\",\"op\":\"max\",\"inputs\":[\"z3\",\"z\"],\"outputs\":[\"y\"]}],"
                 "\"outputs\":[\"y\",\"h2\"]}", dts[t], dts[t], dts[t], dts[t], dts[t], dts[t]);
        mcir_graph *g = cgt_graph(json);
        cgt_kspec ks[] = {{MCIR_TEMPLATE_MATMUL, "mm", "mm,ad,ge,r"},
                          {MCIR_TEMPLATE_STREAMING_NORM, "ln", "ln,si"},
                          {MCIR_TEMPLATE_ELEMENTWISE, NULL, "ex,pw,mx"}};
        mcir_plan *p = cgt_plan(g, "sm_90", 3, ks);
        if (!run_emulated(g, p, NULL, g->name, false)) failed++;
        if (!run_emulated(g, p, NULL, g->name, true)) failed++;
        mcir_graph_free(g);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* Integer and bool tensors: gathers (axis 0 with i64 ids, axis 1 with
 * negative i32 indices), argmax/argmin, casts that truncate and wrap,
 * comparisons, where, arange, each kernel alone and fused into chains;
 * the emulated kernels must give exactly the interpreter's values. */
static const char INT_OPS[] =
    "{\"mcir\":1,\"name\":\"e_ints\",\"inputs\":[{\"name\":\"ids\",\"dtype\":\"i64\",\"shape\":[3,7]},"
    "{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[3,7]},{\"name\":\"i\",\"dtype\":\"i32\",\"shape\":[3,7]}],"
    "\"weights\":[{\"name\":\"emb\",\"dtype\":\"f32\",\"shape\":[20,9]},"
    "{\"name\":\"pick\",\"dtype\":\"i32\",\"shape\":[2,2],\"value\":[[6,-1],[0,3]]},"
    "{\"name\":\"zero\",\"dtype\":\"f32\",\"shape\":[],\"value\":0}],"
    "\"nodes\":[{\"name\":\"ga\",\"op\":\"gather\",\"inputs\":[\"emb\",\"ids\"],\"outputs\":[\"e\"]},"
    "{\"name\":\"gb\",\"op\":\"gather\",\"inputs\":[\"x\",\"pick\"],\"outputs\":[\"g2\"],\"attrs\":{\"axis\":1}},"
    "{\"name\":\"am\",\"op\":\"argmax\",\"inputs\":[\"e\"],\"outputs\":[\"amx\"]},"
    "{\"name\":\"an\",\"op\":\"argmin\",\"inputs\":[\"e\"],\"outputs\":[\"amn\"],\"attrs\":{\"axis\":1,\"keepdims\":true}},"
    "{\"name\":\"sc\",\"op\":\"scale\",\"inputs\":[\"x\"],\"outputs\":[\"xs\"],\"attrs\":{\"value\":300.0}},"
    "{\"name\":\"ci\",\"op\":\"cast\",\"inputs\":[\"xs\"],\"outputs\":[\"xi\"],\"attrs\":{\"to\":\"i32\"}},"
    "{\"name\":\"cu\",\"op\":\"cast\",\"inputs\":[\"xi\"],\"outputs\":[\"xu\"],\"attrs\":{\"to\":\"u8\"}},"
    "{\"name\":\"c64\",\"op\":\"cast\",\"inputs\":[\"i\"],\"outputs\":[\"i64v\"],\"attrs\":{\"to\":\"i64\"}},"
    "{\"name\":\"ge\",\"op\":\"greater_equal\",\"inputs\":[\"ids\",\"i64v\"],\"outputs\":[\"geq\"]},"
    "{\"name\":\"lt\",\"op\":\"less\",\"inputs\":[\"x\",\"zero\"],\"outputs\":[\"m\"]},"
    "{\"name\":\"wh\",\"op\":\"where\",\"inputs\":[\"m\",\"x\",\"xs\"],\"outputs\":[\"w\"]},"
    "{\"name\":\"ar\",\"op\":\"arange\",\"inputs\":[],\"outputs\":[\"r\"],\"attrs\":{\"start\":2,\"end\":23,\"step\":3,\"dtype\":\"i32\"}},"
    "{\"name\":\"ai\",\"op\":\"add\",\"inputs\":[\"xi\",\"r\"],\"outputs\":[\"s\"]}],"
    "\"outputs\":[\"e\",\"g2\",\"amx\",\"amn\",\"xu\",\"geq\",\"m\",\"w\",\"s\"]}";

START_TEST(test_integer_ops_emulated) {
    int failed = 0;
    mcir_graph *g = cgt_graph(INT_OPS);
    mcir_plan *p = cgt_plan_naive(g, "sm_90");
    if (!run_emulated(g, p, NULL, "e_ints (a kernel per node)", false)) failed++;
    mcir_graph_free(g);
    g = cgt_graph(INT_OPS);
    cgt_kspec ks[] = {{MCIR_TEMPLATE_ELEMENTWISE, NULL, "ga,am"},
                      {MCIR_TEMPLATE_ELEMENTWISE, NULL, "an"},
                      {MCIR_TEMPLATE_ELEMENTWISE, NULL, "gb"},
                      {MCIR_TEMPLATE_ELEMENTWISE, NULL, "sc,ci,cu,ar,ai"},
                      {MCIR_TEMPLATE_ELEMENTWISE, NULL, "c64,ge"},
                      {MCIR_TEMPLATE_ELEMENTWISE, NULL, "lt,wh"}};
    p = cgt_plan(g, "sm_90", 6, ks);
    if (!run_emulated(g, p, NULL, "e_ints (fused chains)", false)) failed++;
    mcir_graph_free(g);
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* index_copy (a KV cache's update): f32 rows over axis 2 of a [2, 3, 8, 4]
 * cache with a negative and a repeated index (the last write wins), the
 * result read by an add; i64 rows over axis 0; f16 over the last axis. */
static const char INDEX_COPY[] =
    "{\"mcir\":1,\"name\":\"e_index_copy\",\"inputs\":[{\"name\":\"cache\",\"dtype\":\"f32\",\"shape\":[2,3,8,4]},"
    "{\"name\":\"new\",\"dtype\":\"f32\",\"shape\":[2,3,3,4]},{\"name\":\"h\",\"dtype\":\"f16\",\"shape\":[5,6]},"
    "{\"name\":\"hn\",\"dtype\":\"f16\",\"shape\":[5,2]}],"
    "\"weights\":[{\"name\":\"pos\",\"dtype\":\"i64\",\"shape\":[3],\"value\":[5,-1,5]},"
    "{\"name\":\"ids\",\"dtype\":\"i64\",\"shape\":[3,2],\"value\":[[1,2],[3,4],[5,6]]},"
    "{\"name\":\"row\",\"dtype\":\"i32\",\"shape\":[1],\"value\":[1]},"
    "{\"name\":\"nid\",\"dtype\":\"i64\",\"shape\":[1,2],\"value\":[[-7,70000000000]]},"
    "{\"name\":\"cols\",\"dtype\":\"u8\",\"shape\":[2],\"value\":[0,4]}],"
    "\"nodes\":[{\"name\":\"upd\",\"op\":\"index_copy\",\"inputs\":[\"cache\",\"pos\",\"new\"],\"outputs\":[\"c2\"],"
    "\"attrs\":{\"axis\":2}},"
    "{\"name\":\"use\",\"op\":\"add\",\"inputs\":[\"c2\",\"cache\"],\"outputs\":[\"s\"]},"
    "{\"name\":\"upi\",\"op\":\"index_copy\",\"inputs\":[\"ids\",\"row\",\"nid\"],\"outputs\":[\"i2\"]},"
    "{\"name\":\"uph\",\"op\":\"index_copy\",\"inputs\":[\"h\",\"cols\",\"hn\"],\"outputs\":[\"h2\"],\"attrs\":{\"axis\":-1}}],"
    "\"outputs\":[\"c2\",\"s\",\"i2\",\"h2\"]}";

START_TEST(test_index_copy_emulated) {
    int failed = 0;
    mcir_graph *g = cgt_graph(INDEX_COPY);
    mcir_plan *p = cgt_plan_naive(g, "sm_90");
    if (!run_emulated(g, p, NULL, "e_index_copy (a kernel per node)", false)) failed++;
    mcir_graph_free(g);
    g = cgt_graph(INDEX_COPY);
    cgt_kspec ks[] = {{MCIR_TEMPLATE_ELEMENTWISE, NULL, "upd,use"},
                      {MCIR_TEMPLATE_ELEMENTWISE, NULL, "upi"},
                      {MCIR_TEMPLATE_ELEMENTWISE, NULL, "uph"}};
    p = cgt_plan(g, "sm_80", 3, ks);
    if (!run_emulated(g, p, NULL, "e_index_copy (the update fused into its reader)", false)) failed++;
    mcir_graph_free(g);
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* matmul with NumPy's rank-1 operands (a row vector times a matrix, a
 * matrix times a column vector, a dot product to a scalar, a vector times
 * a batch of matrices, a transposed B, f16 on tensor cores, a fused relu):
 * the template indexes their 2-D forms. */
static const char RANK1_MATMULS[] =
    "{\"mcir\":1,\"name\":\"e_rank1\",\"inputs\":[{\"name\":\"v\",\"dtype\":\"f32\",\"shape\":[40]},"
    "{\"name\":\"u\",\"dtype\":\"f32\",\"shape\":[24]},{\"name\":\"m\",\"dtype\":\"f32\",\"shape\":[40,24]},"
    "{\"name\":\"bm\",\"dtype\":\"f32\",\"shape\":[3,40,24]},{\"name\":\"vh\",\"dtype\":\"f16\",\"shape\":[48]},"
    "{\"name\":\"mh\",\"dtype\":\"f16\",\"shape\":[48,40]}],"
    "\"nodes\":[{\"name\":\"vm\",\"op\":\"matmul\",\"inputs\":[\"v\",\"m\"],\"outputs\":[\"y1\"]},"
    "{\"name\":\"mv\",\"op\":\"matmul\",\"inputs\":[\"bm\",\"u\"],\"outputs\":[\"y2\"]},"
    "{\"name\":\"dot\",\"op\":\"matmul\",\"inputs\":[\"v\",\"v\"],\"outputs\":[\"y3\"]},"
    "{\"name\":\"vb\",\"op\":\"matmul\",\"inputs\":[\"v\",\"bm\"],\"outputs\":[\"vb\"]},"
    "{\"name\":\"vr\",\"op\":\"relu\",\"inputs\":[\"vb\"],\"outputs\":[\"y4\"]},"
    "{\"name\":\"ut\",\"op\":\"matmul\",\"inputs\":[\"u\",\"m\"],\"outputs\":[\"y5\"],\"attrs\":{\"transpose_b\":true}},"
    "{\"name\":\"hm\",\"op\":\"matmul\",\"inputs\":[\"vh\",\"mh\"],\"outputs\":[\"y6\"]}],"
    "\"outputs\":[\"y1\",\"y2\",\"y3\",\"y4\",\"y5\",\"y6\"]}";

START_TEST(test_rank1_matmuls_emulated) {
    mcir_graph *g = cgt_graph(RANK1_MATMULS);
    ck_assert_int_eq(g->outputs[2]->rank, 0);
    mcir_plan *p = cgt_plan_naive(g, "sm_90");
    bool ok = run_emulated(g, p, NULL, "e_rank1 (a kernel per node)", false);
    mcir_graph_free(g);
    g = cgt_graph(RANK1_MATMULS);
    cgt_kspec ks[] = {{MCIR_TEMPLATE_MATMUL, "vm", "vm"}, {MCIR_TEMPLATE_MATMUL, "mv", "mv"},
                      {MCIR_TEMPLATE_MATMUL, "dot", "dot"}, {MCIR_TEMPLATE_MATMUL, "vb", "vb,vr"},
                      {MCIR_TEMPLATE_MATMUL, "ut", "ut"}, {MCIR_TEMPLATE_MATMUL, "hm", "hm"}};
    p = cgt_plan(g, "sm_80", 6, ks);
    ok &= run_emulated(g, p, NULL, "e_rank1 (relu fused, sm_80)", false);
    mcir_graph_free(g);
    ck_assert(ok);
}
END_TEST

/* argmax / argmin in the reduce template: rows shorter than a warp's
 * stride and longer than a block (256), a strided axis, f32 and f16
 * inputs; ties (values rounded to integers through casts: the first index
 * must win) and NaN (sqrt of negatives: the first NaN wins), exactly the
 * interpreter's indices. */
static const char ARG_OPS[] =
    "{\"mcir\":1,\"name\":\"e_args\",\"inputs\":[{\"name\":\"a\",\"dtype\":\"f32\",\"shape\":[3,37]},"
    "{\"name\":\"b\",\"dtype\":\"f32\",\"shape\":[2,3000]},{\"name\":\"c\",\"dtype\":\"f16\",\"shape\":[5,300]}],"
    "\"nodes\":[{\"name\":\"s1\",\"op\":\"scale\",\"inputs\":[\"a\"],\"outputs\":[\"a3\"],\"attrs\":{\"value\":3.0}},"
    "{\"name\":\"i1\",\"op\":\"cast\",\"inputs\":[\"a3\"],\"outputs\":[\"ai\"],\"attrs\":{\"to\":\"i32\"}},"
    "{\"name\":\"t1\",\"op\":\"cast\",\"inputs\":[\"ai\"],\"outputs\":[\"at\"],\"attrs\":{\"to\":\"f32\"}},"
    "{\"name\":\"am1\",\"op\":\"argmax\",\"inputs\":[\"at\"],\"outputs\":[\"y1\"],\"attrs\":{\"axis\":1}},"
    "{\"name\":\"an1\",\"op\":\"argmin\",\"inputs\":[\"at\"],\"outputs\":[\"y2\"],\"attrs\":{\"axis\":-1,\"keepdims\":true}},"
    "{\"name\":\"s2\",\"op\":\"scale\",\"inputs\":[\"b\"],\"outputs\":[\"b3\"],\"attrs\":{\"value\":3.0}},"
    "{\"name\":\"i2\",\"op\":\"cast\",\"inputs\":[\"b3\"],\"outputs\":[\"bi\"],\"attrs\":{\"to\":\"i32\"}},"
    "{\"name\":\"t2\",\"op\":\"cast\",\"inputs\":[\"bi\"],\"outputs\":[\"bt\"],\"attrs\":{\"to\":\"f32\"}},"
    "{\"name\":\"am2\",\"op\":\"argmax\",\"inputs\":[\"bt\"],\"outputs\":[\"y3\"],\"attrs\":{\"axis\":1}},"
    "{\"name\":\"an2\",\"op\":\"argmin\",\"inputs\":[\"b\"],\"outputs\":[\"y4\"],\"attrs\":{\"axis\":0}},"
    "{\"name\":\"am3\",\"op\":\"argmax\",\"inputs\":[\"c\"],\"outputs\":[\"y5\"],\"attrs\":{\"axis\":1}},"
    "{\"name\":\"sq\",\"op\":\"sqrt\",\"inputs\":[\"c\"],\"outputs\":[\"cs\"]},"
    "{\"name\":\"an3\",\"op\":\"argmin\",\"inputs\":[\"cs\"],\"outputs\":[\"y6\"],\"attrs\":{\"axis\":1}},"
    "{\"name\":\"am4\",\"op\":\"argmax\",\"inputs\":[\"cs\"],\"outputs\":[\"y7\"],\"attrs\":{\"axis\":0}}],"
    "\"outputs\":[\"y1\",\"y2\",\"y3\",\"y4\",\"y5\",\"y6\",\"y7\"]}";

START_TEST(test_argmax_reduce_emulated) {
    mcir_graph *g = cgt_graph(ARG_OPS);
    cgt_kspec ks[] = {{MCIR_TEMPLATE_ELEMENTWISE, NULL, "s1,i1,t1"}, {MCIR_TEMPLATE_REDUCE, "am1", "am1"},
                      {MCIR_TEMPLATE_REDUCE, "an1", "an1"}, {MCIR_TEMPLATE_REDUCE, "am2", "s2,i2,t2,am2"},
                      {MCIR_TEMPLATE_REDUCE, "an2", "an2"}, {MCIR_TEMPLATE_REDUCE, "am3", "am3"},
                      {MCIR_TEMPLATE_ELEMENTWISE, NULL, "sq"}, {MCIR_TEMPLATE_REDUCE, "an3", "an3"},
                      {MCIR_TEMPLATE_REDUCE, "am4", "am4"}};
    mcir_plan *p = cgt_plan(g, "sm_90", 9, ks);
    int reduce = 0;
    for (int i = 0; i < p->n_kernels; i++)
        reduce += p->kernels[i].tpl == MCIR_TEMPLATE_REDUCE;
    ck_assert_int_eq(reduce, 7);   /* every argmax / argmin a row reduction */
    ck_assert(run_emulated(g, p, NULL, "e_args (reduce template)", false));
    mcir_graph_free(g);
}
END_TEST

/* A slice whose start is known only at run time, with a static length
 * (graph.json's slice takes constant attributes): gather(x, arange(0, L)
 * + start, axis) — docs/ops.md "Runtime-start slices". The start is an
 * i64 input (seeded in [0, 16)); a kernel per node and all in one chain. */
static const char DYN_SLICE[] =
    "{\"mcir\":1,\"name\":\"e_dyn_slice\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[4,50]},"
    "{\"name\":\"start\",\"dtype\":\"i64\",\"shape\":[1]}],"
    "\"nodes\":[{\"name\":\"ar\",\"op\":\"arange\",\"inputs\":[],\"outputs\":[\"r\"],"
    "\"attrs\":{\"start\":0,\"end\":8,\"step\":1,\"dtype\":\"i64\"}},"
    "{\"name\":\"ad\",\"op\":\"add\",\"inputs\":[\"r\",\"start\"],\"outputs\":[\"idx\"]},"
    "{\"name\":\"ga\",\"op\":\"gather\",\"inputs\":[\"x\",\"idx\"],\"outputs\":[\"y\"],\"attrs\":{\"axis\":1}}],"
    "\"outputs\":[\"y\"]}";

START_TEST(test_runtime_start_slice_emulated) {
    mcir_graph *g = cgt_graph(DYN_SLICE);
    ck_assert_int_eq(g->outputs[0]->shape[1], 8);   /* the shape stays static */
    mcir_plan *p = cgt_plan_naive(g, "sm_90");
    ck_assert(run_emulated(g, p, NULL, "e_dyn_slice (a kernel per node)", false));
    mcir_graph_free(g);
    g = cgt_graph(DYN_SLICE);
    cgt_kspec ks[] = {{MCIR_TEMPLATE_ELEMENTWISE, NULL, "ar,ad,ga"}};
    p = cgt_plan(g, "sm_90", 1, ks);
    ck_assert(run_emulated(g, p, NULL, "e_dyn_slice (one chain)", false));
    mcir_graph_free(g);
}
END_TEST

/* tests/data/ints/exact.json (test_ints checks the interpreter on it
 * against NumPy byte for byte): every integer op on values beyond 2^24,
 * 2^31 and 2^53 — wrap-around, division and remainder by zero and -1,
 * shifts out of range, casts between every pair, gather, argmax, cumsum,
 * arange — as a kernel per node, exactly the interpreter's values (and so
 * NumPy's). The pipeline's own plan (fused chains, argmax in the reduce
 * template) follows with the examples. */
START_TEST(test_exact_integers_emulated) {
    char *json = test_slurp(test_path("tests/data/ints/exact.json"), NULL);
    ck_assert_ptr_nonnull(json);
    mcir_graph *g = cgt_graph(json);
    free(json);
    mcir_plan *p = cgt_plan_naive(g, "sm_90");
    ck_assert(run_emulated(g, p, NULL, "exact_ints (a kernel per node)", false));
    mcir_graph_free(g);
}
END_TEST

/* ------------------------------------ pointwise kernels a vector at a time
 * Elementwise chains at Llama-7B / GPT-2 shapes scaled down for the
 * emulator, each one ELEMENTWISE kernel (codegen/tpl_simple.c
 * gen_pointwise_vec), in f32 / f16 / bf16: on the emulated device with
 * every check against the interpreter, the global bytes the kernel
 * requests exactly the cost model's; compiled by NVRTC for sm_90, the
 * plan's vector width, and the PTX's global accesses: 16-byte (8-byte)
 * vectors only where no tail, broadcast scalar or lane-by-lane operand
 * needs a scalar one, and no IEEE division (div.rn.f32: a slow path per
 * element) in the transcendental chains; slices, concats, transposes that
 * keep the last axis, embeddings and a rotary half-rotation a vector at a
 * time too (mcir_vector_remap). A mutant (MCIR_POINTWISE_SCALAR:
 * the element-at-a-time loop though the plan vectorises) must fail the
 * access check. */
typedef struct pw_case {
    const char *name;
    const char *json;        /* graph.json; %1$s: the dtype (f32 / f16 / bf16), where it has one */
    const char *nodes;       /* the kernel's region */
    bool typed;              /* run in each dtype (else as written) */
    int scalar_loads;        /* scalar ld.global in the PTX: broadcast values (-1: a tail or lanes, >= 1) */
    bool transcendental;     /* silu / sigmoid / gelu / div: no div.rn.f32 */
    bool copy;               /* a COPY kernel (index remaps only), else ELEMENTWISE */
} pw_case;

#define PW_IN(n, s) "{\"name\":\"" n "\",\"dtype\":\"%1$s\",\"shape\":" s "}"
#define PW_NODE(n, op, ins, out, attrs) \
    "{\"name\":\"" n "\",\"op\":\"" op "\",\"inputs\":[" ins "],\"outputs\":[\"" out "\"]" attrs "}"

static const pw_case PW_CASES[] = {
    {"pw_swiglu", /* Llama-7B's FFN gate, 11008 / 16 columns */
     "{\"mcir\":1,\"name\":\"pw_swiglu_%1$s\",\"inputs\":[" PW_IN("g", "[16,688]") "," PW_IN("u", "[16,688]") "],"
     "\"nodes\":[" PW_NODE("si", "silu", "\"g\"", "s", "") "," PW_NODE("mu", "mul", "\"s\",\"u\"", "y", "") "],"
     "\"outputs\":[\"y\"]}", "si,mu", true, 0, true, false},
    {"pw_bias_gelu", /* GPT-2's FFN: bias [N] over [M, N], tanh GELU */
     "{\"mcir\":1,\"name\":\"pw_bias_gelu_%1$s\",\"inputs\":[" PW_IN("a", "[32,768]") "],"
     "\"weights\":[" PW_IN("b", "[768]") "],"
     "\"nodes\":[" PW_NODE("ad", "add", "\"a\",\"b\"", "h", "") ","
     PW_NODE("ge", "gelu", "\"h\"", "y", ",\"attrs\":{\"approximate\":\"tanh\"}") "],"
     "\"outputs\":[\"y\"]}", "ad,ge", true, 0, true, false},
    {"pw_residual_cast", /* f32 residual stream, bf16 out: 8 lanes, two float4 a read */
     "{\"mcir\":1,\"name\":\"pw_residual_cast\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[32,512]},"
     "{\"name\":\"r\",\"dtype\":\"f32\",\"shape\":[32,512]}],"
     "\"nodes\":[" PW_NODE("ad", "add", "\"x\",\"r\"", "h", "") ","
     PW_NODE("ca", "cast", "\"h\"", "y", ",\"attrs\":{\"to\":\"bf16\"}") "],\"outputs\":[\"y\"]}",
     "ad,ca", false, 0, false, false},
    {"pw_scalar_scale", /* a scalar tensor and a scale attribute: one broadcast load a vector */
     "{\"mcir\":1,\"name\":\"pw_scalar_scale_%1$s\",\"inputs\":[" PW_IN("x", "[32,512]") "],"
     "\"weights\":[{\"name\":\"k\",\"dtype\":\"%1$s\",\"shape\":[],\"value\":0.7}],"
     "\"nodes\":[" PW_NODE("mk", "mul", "\"x\",\"k\"", "h", "") ","
     PW_NODE("sc", "scale", "\"h\"", "y", ",\"attrs\":{\"value\":0.125}") "],\"outputs\":[\"y\"]}",
     "mk,sc", true, 1, false, false},
    {"pw_odd_tail", /* 4995 elements: vectors, then a scalar tail */
     "{\"mcir\":1,\"name\":\"pw_odd_tail_%1$s\",\"inputs\":[" PW_IN("g", "[3,37,45]") "," PW_IN("u", "[3,37,45]") "],"
     "\"nodes\":[" PW_NODE("sg", "sigmoid", "\"g\"", "s", "") "," PW_NODE("mu", "div", "\"u\",\"s\"", "y", "") "],"
     "\"outputs\":[\"y\"]}", "sg,mu", true, -1, true, false},
    {"pw_transpose_leaf", /* a transposed operand a lane at a time, beside a vector one */
     "{\"mcir\":1,\"name\":\"pw_transpose_leaf_%1$s\",\"inputs\":[" PW_IN("t", "[64,48]") "," PW_IN("c", "[48,64]") "],"
     "\"nodes\":[" PW_NODE("tr", "transpose", "\"t\"", "tt", ",\"attrs\":{\"perm\":[1,0]}") ","
     PW_NODE("ad", "add", "\"tt\",\"c\"", "h", "") "," PW_NODE("ex", "exp", "\"h\"", "y", "") "],"
     "\"outputs\":[\"y\"]}", "tr,ad,ex", true, -1, false, false},
    {"pw_two_writes", /* two writes (segments), a row scale [M, 1] and a where on a bool */
     "{\"mcir\":1,\"name\":\"pw_two_writes_%1$s\",\"inputs\":[" PW_IN("a", "[24,256]") "," PW_IN("b", "[24,256]") ","
     PW_IN("s", "[24,1]") "],"
     "\"nodes\":[" PW_NODE("ms", "mul", "\"a\",\"s\"", "y1", "") "," PW_NODE("gt", "greater", "\"a\",\"b\"", "m", "") ","
     PW_NODE("wh", "where", "\"m\",\"a\",\"y1\"", "y2", "") "],\"outputs\":[\"y1\",\"y2\"]}",
     "ms,gt,wh", true, -1, false, false},
    {"pw_symbolic", /* rows of a dimension: size-generic, a bias of 45 a lane at a time, a tail at every size */
     "{\"mcir\":1,\"name\":\"pw_symbolic_%1$s\",\"dims\":{\"seq\":{\"min\":1,\"max\":64}},"
     "\"inputs\":[" PW_IN("a", "[\"seq\",45]") "],\"weights\":[" PW_IN("b", "[45]") "],"
     "\"nodes\":[" PW_NODE("ad", "add", "\"a\",\"b\"", "h", "") ","
     PW_NODE("ge", "gelu", "\"h\"", "y", ",\"attrs\":{\"approximate\":\"tanh\"}") "],"
     "\"outputs\":[\"y\"]}", "ad,ge", true, -1, true, false},
    /* index remaps that keep rows of a vector together (mcir_vector_remap):
     * each output vector is its operand's vector at the remapped index */
    {"pw_slice_rows", /* rows 8..40 of a [64, 256] tensor (a KV cache window) */
     "{\"mcir\":1,\"name\":\"pw_slice_rows_%1$s\",\"inputs\":[" PW_IN("x", "[64,256]") "],"
     "\"nodes\":[" PW_NODE("sl", "slice", "\"x\"", "y", ",\"attrs\":{\"axis\":0,\"start\":8,\"end\":40}") "],"
     "\"outputs\":[\"y\"]}", "sl", true, 0, false, true},
    {"pw_concat_cols", /* [32, 128] ++ [32, 64] along the last axis: each part a multiple of the vector */
     "{\"mcir\":1,\"name\":\"pw_concat_cols_%1$s\",\"inputs\":[" PW_IN("a", "[32,128]") "," PW_IN("b", "[32,64]") "],"
     "\"nodes\":[" PW_NODE("cc", "concat", "\"a\",\"b\"", "y", ",\"attrs\":{\"axis\":1}") "],"
     "\"outputs\":[\"y\"]}", "cc", true, 0, false, true},
    {"pw_heads", /* [seq, heads, d] -> [heads, seq, d]: the last axis stays last */
     "{\"mcir\":1,\"name\":\"pw_heads_%1$s\",\"inputs\":[" PW_IN("x", "[16,4,64]") "],"
     "\"nodes\":[" PW_NODE("tr", "transpose", "\"x\"", "y", ",\"attrs\":{\"perm\":[1,0,2]}") "],"
     "\"outputs\":[\"y\"]}", "tr", true, 0, false, true},
    {"pw_embedding", /* rows of a [100, 64] table by i64 ids: one index load a vector */
     "{\"mcir\":1,\"name\":\"pw_embedding_%1$s\",\"inputs\":[{\"name\":\"ids\",\"dtype\":\"i64\",\"shape\":[2,8]}],"
     "\"weights\":[" PW_IN("w", "[100,64]") "],"
     "\"nodes\":[" PW_NODE("ga", "gather", "\"w\",\"ids\"", "y", ",\"attrs\":{\"axis\":0}") "],"
     "\"outputs\":[\"y\"]}", "ga", true, 1, false, false},
    {"pw_rotate_half", /* x cos + rotate_half(x) sin: slices, a negation and a concat of halves */
     "{\"mcir\":1,\"name\":\"pw_rotate_half_%1$s\",\"inputs\":[" PW_IN("x", "[8,64]") "," PW_IN("c", "[8,64]") ","
     PW_IN("s", "[8,64]") "],"
     "\"nodes\":[" PW_NODE("lo", "slice", "\"x\"", "x1", ",\"attrs\":{\"axis\":1,\"start\":0,\"end\":32}") ","
     PW_NODE("hi", "slice", "\"x\"", "x2", ",\"attrs\":{\"axis\":1,\"start\":32,\"end\":64}") ","
     PW_NODE("ng", "neg", "\"x2\"", "n2", "") "," PW_NODE("cc", "concat", "\"n2\",\"x1\"", "r", ",\"attrs\":{\"axis\":1}") ","
     PW_NODE("m1", "mul", "\"x\",\"c\"", "p", "") "," PW_NODE("m2", "mul", "\"r\",\"s\"", "q", "") ","
     PW_NODE("ad", "add", "\"p\",\"q\"", "y", "") "],"
     "\"outputs\":[\"y\"]}", "lo,hi,ng,cc,m1,m2,ad", true, 0, false, false},
};

/* Global accesses 16 (8) bytes wide only, but for `scalar_loads` broadcast
 * values: what a kernel run a vector at a time shows without a tail. */
static bool only_vector_accesses(const mcir_kernel_audit *a, int scalar_loads) {
    return a->ld_global[0] == scalar_loads && a->st_global[0] == 0 && a->ld_global[1] + a->ld_global[2] > 0 &&
           a->st_global[1] + a->st_global[2] > 0;
}

static int pw_exact;   /* kernels whose requested bytes matched the cost model exactly */

static void check_cost_exact(const mcir_kernel_plan *kp, bool staged, unsigned long long bytes) {
    mcir_kernel_cost model;
    ck_assert(!staged);
    mcir_cost_kernel(kp, mcir_target_find("sm_90"), &(mcir_cost_options){.generated_only = true}, &model);
    ck_assert_msg((long long)bytes == (long long)model.global_bytes,
                  "%s: the kernel requested %llu global bytes, the cost model says %lld", kp->name, bytes,
                  (long long)model.global_bytes);
    pw_exact++;
}

/* The case's kernel compiled by NVRTC for sm_90: its audit and PTX
 * checked as the case says; mutant: the scalar loop was forced, so the
 * access check must fail. */
static void pw_check_ptx(const pw_case *c, mcir_plan *p, const char *what, bool mutant) {
    mcir_diag d = mcir_diag_stderr();
    mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
    ck_assert_ptr_nonnull(cg);
    ck_assert_msg(mcir_codegen_compile(cg, "sm_90", &d), "%s", what);
    const mcir_kernel_plan *kp = &p->kernels[0];
    const mcir_kernel_audit *a = &kp->audit;
    const char *ptx = mcir_codegen_kernel_ptx(cg, 0);
    ck_assert(a->valid && ptx);
    fprintf(stderr, "  %-28s%s V %d: ld.global %d/%d/%d, st.global %d/%d/%d, %d registers (plan %d)\n", what,
            mutant ? " (mutant)" : "", kp->tiling.vector_width, a->ld_global[0], a->ld_global[1], a->ld_global[2],
            a->st_global[0], a->st_global[1], a->st_global[2], a->registers, kp->tiling.registers_estimate);
    if (mutant) {
        ck_assert_msg(!only_vector_accesses(a, 0), "%s: the scalar mutant passes the vector access check", what);
    } else if (c->scalar_loads >= 0) {
        ck_assert_msg(only_vector_accesses(a, c->scalar_loads), "%s: scalar global accesses in a vectorised kernel",
                      what);
    } else {   /* a tail or operands a lane at a time: scalar accesses beside the vectors */
        ck_assert_msg(a->ld_global[1] + a->ld_global[2] > 0 && a->st_global[1] + a->st_global[2] > 0,
                      "%s: no vector access", what);
    }
    ck_assert_msg(!c->transcendental || !strstr(ptx, "div.rn.f32"), "%s: an IEEE division per element", what);
    ck_assert_int_eq(a->spill_store_bytes + a->spill_load_bytes, 0);
    mcir_codegen_free(cg);
}

START_TEST(test_pointwise_vectors_emulated) {
    static const char *const dts[] = {"f32", "f16", "bf16"};
    char why[256];
    bool nvrtc = mcir_nvrtc_available(why, sizeof why);
    if (!nvrtc) fprintf(stderr, "  PTX checks skipped: %s\n", why);
    void (*hook)(const mcir_kernel_plan *, bool, unsigned long long) = launch_hook;
    launch_hook = check_cost_exact;
    int failed = 0, runs = 0;
    for (size_t i = 0; i < sizeof PW_CASES / sizeof *PW_CASES; i++) {
        const pw_case *c = &PW_CASES[i];
        for (int t = 0; t < (c->typed ? 3 : 1); t++) {
#ifdef MCIR_EMU_SANITIZED
            /* the sanitizer build: a typed case in one dtype, the cases
             * taking the three in turn (the first, with its mutant, in all;
             * the normal build runs every case in every dtype) */
            if (c->typed && i != 0 && t != (int)(i % 3)) continue;
#else
            if (sanitizer_runs_share() && c->typed && i != 0 && t == (int)(i % 3)) continue;   /* run there */
#endif
            char json[4096], what[64];
            snprintf(json, sizeof json, c->json, dts[t]);
            snprintf(what, sizeof what, "%s%s%s", c->name, c->typed ? " " : "", c->typed ? dts[t] : "");
            mcir_graph *g = cgt_graph(json);
            cgt_kspec ks[] = {{c->copy ? MCIR_TEMPLATE_COPY : MCIR_TEMPLATE_ELEMENTWISE, NULL, c->nodes}};
            mcir_plan *p = cgt_plan(g, "sm_90", 1, ks);
            const mcir_kernel_plan *kp = &p->kernels[0];
            bool half = c->typed ? t > 0 : true;   /* (the residual's write is bf16) */
            ck_assert_int_eq(mcir_pointwise_vector_width(kp), half ? 8 : 4);
            ck_assert_int_eq(kp->tiling.vector_width, half ? 8 : 4);
            if (!run_emulated(g, p, NULL, what, false)) failed++;
            runs++;
            if (nvrtc) pw_check_ptx(c, p, what, false);
            if (nvrtc && i == 0) {   /* the mutant: an element at a time, though the plan vectorises */
                setenv("MCIR_POINTWISE_SCALAR", "1", 1);
                launch_hook = NULL;   /* (its bytes are the scalar kernel's) */
                if (!run_emulated(g, p, NULL, what, false)) failed++;
                pw_check_ptx(c, p, what, true);
                unsetenv("MCIR_POINTWISE_SCALAR");
                launch_hook = check_cost_exact;
            }
            mcir_graph_free(g);
        }
    }
    launch_hook = hook;
    ck_assert_int_eq(failed, 0);
    ck_assert_int_eq(pw_exact, runs);
}
END_TEST

/* The tiled transpose of the last two dims a vector at a time
 * (mcir_transpose_vector_width): 16-byte loads and stores through a
 * swizzled T x T tile where both extents are multiples of the vector
 * (partial tiles at both edges, a batch of them), an element a lane
 * otherwise; on the emulated device against the interpreter, the PTX's
 * global accesses all 16 bytes wide. */
START_TEST(test_tiled_transpose_vectors_emulated) {
    static const struct { const char *dt; int b, r, c, vec; } cases[] = {
        {"f16", 2, 96, 160, 8}, {"bf16", 1, 64, 64, 8}, {"f32", 3, 40, 36, 4},
        {"f16", 2, 36, 44, 4 /* not multiples of 8: an element a lane */}, {"f32", 2, 37, 45, 1}};
    char why[256];
    bool nvrtc = mcir_nvrtc_available(why, sizeof why);
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char json[1024], what[64];
        snprintf(what, sizeof what, "tt_%s_%dx%dx%d", cases[i].dt, cases[i].b, cases[i].r, cases[i].c);
        snprintf(json, sizeof json,
                 "{\"mcir\":1,\"name\":\"%s\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"%s\",\"shape\":[%d,%d,%d]}],"
                 "\"nodes\":[{\"name\":\"t\",\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                 "\"attrs\":{\"perm\":[0,2,1]}}],\"outputs\":[\"y\"]}",
                 what, cases[i].dt, cases[i].b, cases[i].r, cases[i].c);
        mcir_graph *g = cgt_graph(json);
        cgt_kspec ks[] = {{MCIR_TEMPLATE_COPY, NULL, "t"}};
        mcir_plan *p = cgt_plan(g, "sm_90", 1, ks);
        const mcir_kernel_plan *kp = &p->kernels[0];
        ck_assert(mcir_kernel_is_last2_transpose(kp));
        int want = cases[i].vec == 4 && strcmp(cases[i].dt, "f32") != 0 ? 1 : cases[i].vec;   /* 16-bit: 8 or nothing */
        ck_assert_int_eq(mcir_transpose_vector_width(kp), want);
        ck_assert_int_eq(kp->tiling.vector_width, want);
        if (!run_emulated(g, p, NULL, what, false)) failed++;
        if (nvrtc && want > 1) {
            mcir_diag d = mcir_diag_stderr();
            mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
            ck_assert_ptr_nonnull(cg);
            ck_assert(mcir_codegen_compile(cg, "sm_90", &d));
            const mcir_kernel_audit *a = &kp->audit;
            fprintf(stderr, "  %-28s V %d: ld.global %d/%d/%d, st.global %d/%d/%d, %d registers (plan %d)\n", what,
                    want, a->ld_global[0], a->ld_global[1], a->ld_global[2], a->st_global[0], a->st_global[1],
                    a->st_global[2], a->registers, kp->tiling.registers_estimate);
            ck_assert_msg(a->ld_global[0] + a->ld_global[1] + a->st_global[0] + a->st_global[1] == 0 &&
                              a->ld_global[2] > 0 && a->st_global[2] > 0,
                          "%s: global accesses narrower than 16 bytes", what);
            ck_assert_int_eq(a->spill_store_bytes + a->spill_load_bytes, 0);
            mcir_codegen_free(cg);
        }
        mcir_graph_free(g);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST

#ifdef MCIR_HAVE_PIPELINE
#include <dirent.h>

#include "pipeline_test.h"

/* ---------------------------------------- every GEMM tile the model picks
 * The tiles the cost model picks for every matmul and conv of the
 * examples on sm_80 and sm_90 (with the next three: the candidates
 * `--tune` times), and its picks for the same GEMM shapes in f32 (FMA) and
 * f16 / bf16 (tensor cores): each distinct tile
 * runs once in the emulator on a small problem with partial M, N and K
 * tiles (matmul + bias, transposed operands; conv with groups, stride,
 * padding) against the reference interpreter. */
typedef struct gemm_case {
    const char *arch;       /* sm_80: f16/bf16 matmuls take the cp.async ring; else sm_90 */
    bool conv;
    int dt;                 /* 0 f32, 1 f16, 2 bf16 */
    mcir_tiling tile;
} gemm_case;

static const char *const GEMM_DT[] = {"f32", "f16", "bf16"};

static bool same_tile(const mcir_tiling *a, const mcir_tiling *b) {
    return a->warps == b->warps && a->stages == b->stages &&
           memcmp(a->block_tile, b->block_tile, sizeof a->block_tile) == 0;
}

static void gemm_case_add(gemm_case *cs, int *n, int max, bool conv, int dt, const mcir_tiling *t,
                          const char *arch) {
    for (int i = 0; i < t->n_dims; i++)   /* the sm_90a GEMM's tiles: tests/test_gemm_sm90.c */
        if (strcmp(t->dim_names[i], "wg") == 0) return;
    arch = dt != 0 && !conv && strcmp(arch, "sm_80") == 0 ? "sm_80" : "sm_90";
    if (conv && t->stages > 2) return;   /* a matmul's sm_80 ring pick for a conv's shape: no conv tile */
    for (int i = 0; i < *n; i++)
        if (cs[i].conv == conv && cs[i].dt == dt && same_tile(&cs[i].tile, t) && strcmp(cs[i].arch, arch) == 0)
            return;
    ck_assert_int_lt(*n, max);
    cs[*n].arch = arch;   /* the template the tile runs in: see gemm_case */
    cs[*n].conv = conv;
    cs[*n].dt = dt;
    cs[*n].tile = *t;
    (*n)++;
}

/* The GEMM problem (M, N, K) of an example kernel, planned alone in each
 * dtype on arch: the model's pick. */
static void collect_picks(const mcir_gemm_problem *g, bool conv, const char *arch, gemm_case *cs,
                          int *n, int max) {
    for (int dt = 0; dt < 3; dt++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"mcir\":1,\"name\":\"pick\",\"inputs\":[{\"name\":\"a\",\"dtype\":\"%s\",\"shape\":[%lld,%lld]},"
                 "{\"name\":\"b\",\"dtype\":\"%s\",\"shape\":[%lld,%lld]}],"
                 "\"nodes\":[{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"]}],"
                 "\"outputs\":[\"y\"]}",
                 GEMM_DT[dt], (long long)(g->m * g->batch), (long long)g->k, GEMM_DT[dt],
                 (long long)g->k, (long long)g->n);
        mcir_graph *gr = cgt_graph(json);
        mcir_plan *p = cgt_plan(gr, arch, 1, (cgt_kspec[]){{MCIR_TEMPLATE_MATMUL, "mm", "mm"}});
        gemm_case_add(cs, n, max, conv, dt, &p->kernels[0].tiling, arch);
        mcir_graph_free(gr);
    }
}

static int64_t isqrt_up(int64_t v) {
    int64_t r = 1;
    while (r * r < v) r++;
    return r;
}

START_TEST(test_gemm_tiles_emulated) {
    enum { MAX = 320 };
    static gemm_case cs[MAX];
    int n = 0;
    static const char *const archs[] = {"sm_80", "sm_90"};
    char dir[1024], path[1400];
    snprintf(dir, sizeof dir, "%s/examples", test_source_dir());
    DIR *dd = opendir(dir);
    ck_assert_ptr_nonnull(dd);
    struct dirent *e;
    while ((e = readdir(dd))) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "gpt2_stack") == 0) continue;
        snprintf(path, sizeof path, "%s/%s/graph.json", dir, e->d_name);
        if (access(path, R_OK) != 0) continue;
        for (int a = 0; a < 2; a++) {
            mcir_compilation c;
            cgt_compile_path(path, (cgt_pipe){.arch = archs[a]}, &c);
            for (int i = 0; i < c.plan->n_kernels; i++) {
                mcir_kernel_plan *k = &c.plan->kernels[i];
                mcir_gemm_problem g;
                if (!mcir_gemm_problem_of(k, &g)) continue;
                bool conv = k->tpl == MCIR_TEMPLATE_CONV2D;
                int dt = g.dtype == MCIR_DTYPE_F16 ? 1 : g.dtype == MCIR_DTYPE_BF16 ? 2 : 0;
                mcir_gemm_candidate top[4];   /* what --tune times by default */
#if defined(__SANITIZE_ADDRESS__)
                int nt = 0;   /* the sanitizer build: the picks only (CI time) */
#else
                int nt = mcir_gemm_candidates(c.plan, k, top, 4);
#endif
                gemm_case_add(cs, &n, MAX, conv, dt, &k->tiling, archs[a]);
                for (int j = 0; j < nt && j < 4; j++) gemm_case_add(cs, &n, MAX, conv, dt, &top[j].tiling, archs[a]);
                collect_picks(&g, conv, archs[a], cs, &n, MAX);
            }
            mcir_compilation_free(&c);
        }
    }
    closedir(dd);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        const mcir_tiling *t = &cs[i].tile;
        int64_t bm = t->block_tile[0], bn = t->block_tile[1], bk = t->block_tile[2];
        const char *dt = GEMM_DT[cs[i].dt];
        char json[2048], name[64];
        snprintf(name, sizeof name, "g%s_%s_%s_%lldx%lldx%lld_w%d_s%d", cs[i].conv ? "conv" : "mm", cs[i].arch + 3, dt,
                 (long long)bm, (long long)bn, (long long)bk, t->warps, t->stages);
        cgt_kspec ks;
        if (!cs[i].conv) {
            /* partial tiles in M and N, K over two tiles and a remainder;
             * A stored transposed on odd cases, B transposed on even ones */
            int64_t M = bm + bm / 2 + 1, N = bn + 3, K = 2 * bk + 5;
            bool ta = i % 2, tb = !ta;
            snprintf(json, sizeof json,
                     "{\"mcir\":1,\"name\":\"%s\",\"inputs\":[{\"name\":\"a\",\"dtype\":\"%s\",\"shape\":[%lld,%lld]},"
                     "{\"name\":\"b\",\"dtype\":\"%s\",\"shape\":[%lld,%lld]},{\"name\":\"bias\",\"dtype\":\"%s\",\"shape\":[%lld]}],"
                     "\"nodes\":[{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"c\"],"
                     "\"attrs\":{\"transpose_a\":%s,\"transpose_b\":%s}},"
                     "{\"name\":\"ad\",\"op\":\"add\",\"inputs\":[\"c\",\"bias\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}",
                     name, dt, (long long)(ta ? K : M), (long long)(ta ? M : K), dt, (long long)(tb ? N : K),
                     (long long)(tb ? K : N), dt, (long long)N, ta ? "true" : "false", tb ? "true" : "false");
            ks = (cgt_kspec){MCIR_TEMPLATE_MATMUL, "mm", "mm,ad"};
        } else {
            /* 2 groups, 3x3 window, stride 1, pad 1: M = H*W > BLOCK_M,
             * N = OC/2 = BLOCK_N + 3, K = C/2 * 9 > 2 BLOCK_K */
            int64_t hw = isqrt_up(bm + bm / 2 + 1), oc = 2 * (bn + 3), cg = (2 * bk + 5 + 8) / 9;
            snprintf(json, sizeof json,
                     "{\"mcir\":1,\"name\":\"%s\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"%s\",\"shape\":[1,%lld,%lld,%lld]},"
                     "{\"name\":\"w\",\"dtype\":\"%s\",\"shape\":[%lld,%lld,3,3]},{\"name\":\"cb\",\"dtype\":\"%s\",\"shape\":[%lld]}],"
                     "\"nodes\":[{\"name\":\"cv\",\"op\":\"conv2d\",\"inputs\":[\"x\",\"w\",\"cb\"],\"outputs\":[\"c\"],"
                     "\"attrs\":{\"pads\":[1,1,1,1],\"groups\":2}},"
                     "{\"name\":\"re\",\"op\":\"relu\",\"inputs\":[\"c\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}",
                     name, dt, (long long)(2 * cg), (long long)hw, (long long)hw, dt, (long long)oc,
                     (long long)cg, dt, (long long)oc);
            ks = (cgt_kspec){MCIR_TEMPLATE_CONV2D, "cv", "cv,re"};
        }
        mcir_graph *g = cgt_graph(json);
        mcir_plan *p = cgt_plan(g, cs[i].arch, 1, &ks);   /* the arch that picked it: sm_80's is the cp.async ring */
        ck_assert_msg(mcir_gemm_apply(p, &p->kernels[0], t, NULL), "%s: tile not legal", name);
        if (!run_emulated(g, p, NULL, name, false)) failed++;
        mcir_graph_free(g);
    }
    fprintf(stderr, "  %d distinct GEMM tiles picked for the examples, each emulated\n", n);
    ck_assert_int_gt(n, 3);
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* The code paths a compiled graph's kernels take that no emulated launch
 * has taken yet. */
static int uncovered_paths(const mcir_compilation *c) {
    mcir_diag d = mcir_diag_stderr();
    mcir_codegen *cg = mcir_codegen_new(c->plan, NULL, &d);
    ck_assert_ptr_nonnull(cg);
    int missing = 0;
    for (int i = 0; i < c->plan->n_kernels; i++) {
        const char *src = mcir_codegen_kernel_source(cg, i), *epi_name = NULL;
        int64_t epi_grid;
        if (!src) continue;
        const char *epi = mcir_codegen_kernel_epilogue(cg, i, &epi_name, &epi_grid);
        char key[120];
        coverage_key(&c->plan->kernels[i], src, false, key, sizeof key);
        missing += !coverage_has(key);
        if (epi) {
            coverage_key(&c->plan->kernels[i], epi, true, key, sizeof key);
            missing += !coverage_has(key);
        }
    }
    mcir_codegen_free(cg);
    return missing;
}

/* Every bundled example through the real pipeline (rewrites, kernel
 * planner with its fusions and folded transposes), each kernel emulated,
 * the outputs against the reference run of the rewritten graph; then every
 * golden graph of tests/golden/ whose kernels take a code path the
 * examples did not (so every path of an example or golden graph runs). */
START_TEST(test_examples_emulated) {
#ifdef MCIR_EMU_SANITIZED
    /* the sanitizer build: emu_examples runs these graphs on the emulated
     * device under the sanitizers (its sanitizer mode: every golden graph
     * and the examples but the three largest, every check on, verified);
     * here they ran again (about 180 s of the sanitizer pass). The normal
     * build runs every example and asserts every path is emulated. */
    fprintf(stderr, "  sanitizer build: the example and golden graphs run in emu_examples\n");
    return;
#endif
    static const char *const dirs[] = {"examples", "tests/golden"};
    static const char *const files[] = {"graph.json", "input.json"};
    int failed = 0, count = 0, golden = 0;
    /* the cost model over every example kernel, also where the "emu" case
     * (whose first test installs the check) did not run before this one */
    if (!launch_hook) launch_hook = check_cost_model;
    const char *only = getenv("MCIR_EMU_ONLY");   /* debugging: graphs whose directory name contains it */
    for (int pass = 0; pass < 2; pass++) {
        char dir[1024], path[1400];
        snprintf(dir, sizeof dir, "%s/%s", test_source_dir(), dirs[pass]);
        DIR *dd = opendir(dir);
        ck_assert_ptr_nonnull(dd);
        struct dirent *e;
        while ((e = readdir(dd))) {
            if (e->d_name[0] == '.' || strcmp(e->d_name, "gpt2_stack") == 0) continue;   /* = 4 x gpt2_block */
            if (only && !strstr(e->d_name, only)) continue;
            snprintf(path, sizeof path, "%s/%s/%s", dir, e->d_name, files[pass]);
            if (access(path, R_OK) != 0) continue;
            mcir_compilation c;
            cgt_compile_path(path, (cgt_pipe){.cuda = true}, &c);
            bool run = pass == 0 || uncovered_paths(&c) > 0;
            if (run) {
                if (!run_emulated(c.graph, c.plan, c.memory, e->d_name, false)) failed++;
                /* the library-call variant (cuBLAS, its epilogue a kernel
                 * of its own) only where it launches a path the generated
                 * kernels did not (a cuBLAS product's epilogue kernel):
                 * emu_examples runs every example through the library's
                 * default path (cuBLASLt) end to end; CI time, docs/testing.md */
                if (uncovered_paths(&c) > 0)
                    if (!run_emulated(c.graph, c.plan, c.memory, e->d_name, true)) failed++;
                count++;
                golden += pass;
            }
            ck_assert_int_eq(uncovered_paths(&c), 0);
            mcir_compilation_free(&c);
        }
        closedir(dd);
    }
    fprintf(stderr, "  %d graphs emulated (%d golden ones with paths the examples lack)\n", count, golden);
    ck_assert_int_gt(count, only ? 0 : 1);
    ck_assert_int_eq(failed, 0);
}
END_TEST
#endif

#ifdef MCIR_HAVE_PIPELINE
/* The ONNX ops the importer writes out as other MCIR ops (docs/onnx.md):
 * the imported graphs through the pipeline and the emulator, against the
 * interpreter — interpolation and zero-insertion matmuls with a broadcast
 * constant A, reversed slices and concats (Pad), index_copy by constant
 * positions (ScatterND), the clamps and reductions of the others; and the
 * imported integer and bool graphs (gather, cast, comparisons, where,
 * argmax) with their seeded inputs. */
/* exact.json through the pipeline: the partitioner's fused integer chains
 * (mul -> add -> mod -> cast -> shift in one kernel, the comparisons with
 * their slices and concat), argmax and argmin over i64 in the reduce
 * template (values across warp shuffles as two halves), i64 transposes. */
START_TEST(test_exact_integers_pipeline_emulated) {
    mcir_compilation c;
    cgt_compile_path(test_path("tests/data/ints/exact.json"), (cgt_pipe){.cuda = true}, &c);
    int fused = 0, reduce = 0;
    for (int i = 0; i < c.plan->n_kernels; i++) {
        fused += c.plan->kernels[i].n_nodes >= 5;
        reduce += c.plan->kernels[i].tpl == MCIR_TEMPLATE_REDUCE;
    }
    ck_assert_int_ge(fused, 1);
    ck_assert_int_ge(reduce, 2);
    ck_assert(run_emulated(c.graph, c.plan, c.memory, "exact_ints (pipeline)", false));
    mcir_compilation_free(&c);
}
END_TEST

START_TEST(test_onnx_decompositions_emulated) {
    static const char *const models[] = {
        "resize_linear_half_pixel_scales", "resize_cubic_exclude_outside", "pad_reflect",
        "pad_edge", "convtranspose_stride_pads", "convtranspose_group_dilation",
        "scatternd_runtime_updates", "hardswish", "logsoftmax_axis1",
        "batchnorm_runtime_params", "reducel2", "clip",
        /* integer and bool tensors at run time, and the ops written with
         * where, comparisons, argmax and matmul */
        "gather_runtime_ids", "gather_runtime_ids_negative", "cast_runtime",
        "compare_where_runtime", "where_runtime_condition", "int64_arith_equal",
        "argmax_keepdims", "argmin_last_axis", "greater_bool_output", "activations",
        "reduce_prod_l1", "trilu_hardmax_cumsum", "onehot_runtime"};
    int failed = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char path[1400];
        snprintf(path, sizeof path, "%s/tests/data/onnx/ops/%s/model.onnx", test_source_dir(), models[i]);
        mcir_compilation c;
        int st = cgt_compile_status(path, (cgt_pipe){.cuda = true}, &c);
        if (st == 3) return;   /* built without ONNX import */
        ck_assert_msg(st == 0, "pipeline failed on %s", models[i]);
        if (!run_emulated(c.graph, c.plan, c.memory, models[i], false)) failed++;
        mcir_compilation_free(&c);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST
#endif


/* mcirc --exact-math (mcir_plan.exact_math): the value chains' exponentials,
 * divisions and reciprocal square roots in the interpreter's exact forms
 * (expf, IEEE division, 1 / sqrtf), in an elementwise kernel and in a
 * GEMM's epilogue: the PTX has IEEE divisions and no rsqrt.approx where the
 * SFU forms had none of the one and some of the other, and the emulated
 * run is at least as close to the interpreter as the approximate forms'
 * (on the emulator mc_exp2 is exp2f: what differs is e^x's x log2 e) */
static const char EXACT_FORMS[] =
    "{\"mcir\":1,\"name\":\"exact_forms\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[64,96]},"
    "{\"name\":\"y\",\"dtype\":\"f32\",\"shape\":[64,96]}],"
    "\"weights\":[{\"name\":\"w\",\"dtype\":\"f32\",\"shape\":[96,48]}],"
    "\"nodes\":[{\"op\":\"silu\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]},"
    "{\"op\":\"sigmoid\",\"inputs\":[\"y\"],\"outputs\":[\"b\"]},"
    "{\"op\":\"div\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"c\"]},"
    "{\"op\":\"exp\",\"inputs\":[\"b\"],\"outputs\":[\"d\"]},"
    "{\"op\":\"reciprocal\",\"inputs\":[\"d\"],\"outputs\":[\"e\"]},"
    "{\"op\":\"gelu\",\"inputs\":[\"c\"],\"outputs\":[\"f\"],\"attrs\":{\"approximate\":\"tanh\"}},"
    "{\"op\":\"add\",\"inputs\":[\"f\",\"e\"],\"outputs\":[\"g\"]},"
    "{\"op\":\"rsqrt\",\"inputs\":[\"d\"],\"outputs\":[\"h\"]},"
    "{\"op\":\"mul\",\"inputs\":[\"g\",\"h\"],\"outputs\":[\"z\"]},"
    "{\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"m\"]},"
    "{\"op\":\"silu\",\"inputs\":[\"m\"],\"outputs\":[\"ms\"]},"
    "{\"op\":\"div\",\"inputs\":[\"ms\",\"m\"],\"outputs\":[\"o\"]}],"
    "\"outputs\":[\"z\",\"o\"]}";

START_TEST(test_exact_math_emulated) {
    char path[400], why[256];
    snprintf(path, sizeof path, "%s/exact_forms.json", work_dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(EXACT_FORMS, f);
    fclose(f);
    const bool nvrtc = mcir_nvrtc_available(why, sizeof why);
    double rel[2];
    for (int exact = 0; exact < 2; exact++) {
        mcir_options o = mcir_options_default();
        o.graph_path = path;
        o.exact_math = exact;
        mcir_compilation c;
        ck_assert_int_eq(cgt_compile_options(&o, (cgt_pipe){.arch = "sm_90", .cuda = true, .ptx = nvrtc}, &c), 0);
        ck_assert(c.plan->exact_math == exact);
        int div_rn = 0, rsqrt = 0, kernels = 0;
        for (int i = 0; nvrtc && i < c.plan->n_kernels; i++) {
            const char *ptx = mcir_codegen_kernel_ptx(c.codegen, i);
            if (!ptx) continue;
            kernels++;
            for (const char *q = strstr(ptx, "div.rn.f32"); q; q = strstr(q + 1, "div.rn.f32")) div_rn++;
            for (const char *q = strstr(ptx, "rsqrt.approx"); q; q = strstr(q + 1, "rsqrt.approx")) rsqrt++;
        }
        if (nvrtc) {
            ck_assert_int_ge(kernels, 2);
            ck_assert_msg(exact ? div_rn >= 3 && rsqrt == 0 : div_rn == 0 && rsqrt > 0,
                          "exact %d: %d div.rn.f32, %d rsqrt.approx", exact, div_rn, rsqrt);
        }
        cgt_emu_result r = cgt_emu_device(c.graph, c.plan, c.memory, 0, 11, NULL, NULL, NULL);
        ck_assert(r.ran && r.finite);
        rel[exact] = r.rel;
        fprintf(stderr, "  exact_forms (%s): %d div.rn.f32, %d rsqrt.approx, rel err %.3g against the interpreter\n",
                exact ? "--exact-math" : "SFU forms", div_rn, rsqrt, r.rel);
        mcir_compilation_free(&c);
    }
    ck_assert(rel[0] <= 1e-5 && rel[1] <= 1e-6 && rel[1] <= rel[0]);
}
END_TEST

int main(void) {
    if (!test_have_cxx()) return test_skip("no C++ compiler for the kernel emulator");
    if (!test_tempdir("emu", work_dir, sizeof work_dir)) return 1;
    Suite *s = suite_create("codegen_emu");
    /* Tagged "asan_pass": the cases the sanitizer build runs unchanged
     * (no MCIR_EMU_SANITIZED cut), with the sanitizers on top. The normal
     * build's CTest entry leaves them out (CK_EXCLUDE_TAGS=asan_pass,
     * tests/codegen.cmake; CI time, docs/testing.md); the binary run by
     * hand runs every case. */
    TCase *td = tcase_create("detectors");   /* CK_RUN_CASE=detectors runs these alone */
    tcase_set_tags(td, "asan_pass");
    tcase_set_timeout(td, 300);
    tcase_add_test(td, test_emu_stats_count_requested_bytes);
    tcase_add_test(td, test_detector_smem_race_missing_barrier);
    tcase_add_test(td, test_detector_clusters);
    tcase_add_test(td, test_detector_smem_race_within_warp);
    tcase_add_test(td, test_detector_global_race_across_blocks);
    tcase_add_test(td, test_detector_one_byte_race);
    tcase_add_test(td, test_detector_bounds_into_neighbour);
    tcase_add_test(td, test_detector_uninitialised_reads);
    tcase_add_test(td, test_detector_in_place_race);
    suite_add_tcase(s, td);
    TCase *tc = tcase_create("emu");
    tcase_set_tags(tc, "asan_pass");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_cost_model_counts_what_kernels_request);   /* first: installs the check */
    tcase_add_test(tc, test_norms_reductions_copies_conv_emulated);
    tcase_add_test(tc, test_fused_chains_emulated);
    tcase_add_test(tc, test_trig_emulated);
    tcase_add_test(tc, test_exact_math_emulated);
    tcase_add_test(tc, test_integer_ops_emulated);
    tcase_add_test(tc, test_index_copy_emulated);
    tcase_add_test(tc, test_rank1_matmuls_emulated);
    tcase_add_test(tc, test_argmax_reduce_emulated);
    tcase_add_test(tc, test_runtime_start_slice_emulated);
    tcase_add_test(tc, test_exact_integers_emulated);
    tcase_add_test(tc, test_attention_emulated);
    tcase_add_test(tc, test_attention_head_split_merge_emulated);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("pointwise_vectors");   /* CK_RUN_CASE=pointwise_vectors runs it alone */
    tcase_set_timeout(tp, 900);
    tcase_add_test(tp, test_pointwise_vectors_emulated);
    tcase_add_test(tp, test_tiled_transpose_vectors_emulated);
    suite_add_tcase(s, tp);
    TCase *tn = tcase_create("norm_vectors");   /* CK_RUN_CASE=norm_vectors runs it alone */
    tcase_set_timeout(tn, 900);
    tcase_add_test(tn, test_norm_vector_paths_emulated);
    tcase_add_test(tn, test_norms_over_a_symbolic_width_emulated);
    suite_add_tcase(s, tn);
#ifdef MCIR_HAVE_PIPELINE
    TCase *te = tcase_create("examples");   /* CK_RUN_CASE=examples MCIR_EMU_ONLY=NAME: one graph */
    tcase_set_timeout(te, 900);
    tcase_add_test(te, test_examples_emulated);
    tcase_add_test(te, test_gemm_tiles_emulated);
    tcase_add_test(te, test_onnx_decompositions_emulated);
    tcase_add_test(te, test_exact_integers_pipeline_emulated);
    suite_add_tcase(s, te);
#endif
    int failed = test_main_nofork(s);
    coverage_print();
    fprintf(stderr, "%d launches on the emulated device (%.1f s in them), %llu bytes read and %llu written (global)\n",
            total_launches, emu_s, total_bytes_read, total_bytes_written);
    test_remove_dir(work_dir);
    return failed;
}
