/*
 * test_gemm_sm80.c — the sm_80-class GEMM mainloop (templates/matmul.cuh,
 * MM_ASYNC: a cp.async ring of 2..4 stages, ldmatrix fragments, mma.sync
 * m16n8k16) and the emulator's model of its primitives:
 *  - emulator: ldmatrix x4 / x2 (and .trans) hand each lane the elements
 *    the PTX ISA's definition names; cp.async lands at the wait_group that
 *    retires its group, zero-fills past src_size, and reading a copy in
 *    flight (no wait, or no __syncthreads after another thread's wait) is
 *    a race finding;
 *  - planner: sm_80 / sm_86 / sm_89 f16 / bf16 matmuls take the ring with
 *    3 or 4 stages where K has the tiles for it, in the target's shared
 *    memory;
 *  - every kernel of the sweep compiles with NVRTC for sm_80 with cp.async
 *    (where an operand is plain) and ldmatrix, no spills, no advisory;
 *  - on the emulated device (MCIR_NO_CUBLAS: the generated kernel runs,
 *    every sanitizer check on) they match the reference interpreter:
 *    partial tiles in M, N and K, f16 and bf16, transposed A and B (and a
 *    folded transpose), true and broadcast batches, the epilogues (bias,
 *    ReLU, GELU tanh / erf, sigmoid, residual, scale, a cast to f32) and
 *    the prologues (SwiGLU, a cast, a norm's scale) through the element-wise
 *    path, and a rank-1 B (a matrix times a vector);
 *  - dropping the mainloop's cp.async.wait_group, or its __syncthreads,
 *    from the generated kernel is a race finding.
 */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen_util.h"
#include "codegen/codegen-impl.h"
#include "emu/cuda_emu.h"
#include "kernelplan/kernelplan.h"
#include "test_util.h"

static char work_dir[256];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------- emulator primitives */

static const char PROBE[] =
    "/* mode 0: ldmatrix. img [64][8] u16 in shared memory (row r at byte 16 r); cfg = {num, trans};\n"
    " * lane l gives row address of row (l * 5) % 64 (a scrambled order); out[l * 4 + q] = r[q]. */\n"
    "static void ldm_probe(const unsigned short* img, unsigned* out, const int* cfg) {\n"
    "    MC_DYNAMIC_SMEM(sm);\n"
    "    unsigned short* s = (unsigned short*)sm;\n"
    "    const int t = threadIdx.x;\n"
    "    for (int i = t; i < 64 * 8; i += blockDim.x) MC_SST(s[i], MC_GLD(img, i));\n"
    "    __syncthreads();\n"
    "    unsigned r[4] = {0, 0, 0, 0};\n"
    "    const void* row = s + ((t * 5) % 64) * 8;\n"
    "    if (cfg[0] == 4) { if (cfg[1]) mc_ldmatrix_x4<true>(r, row); else mc_ldmatrix_x4<false>(r, row); }\n"
    "    else { if (cfg[1]) mc_ldmatrix_x2<true>(r, row); else mc_ldmatrix_x2<false>(r, row); }\n"
    "    for (int q = 0; q < 4; q++) MC_GST(out, t * 4 + q, r[q]);\n"
    "}\n"
    "/* mode 1: 64 threads, a 3-stage cp.async ring over src [rounds][64][8] u16: round k, thread t copies\n"
    " * chunk t (src_size 16, 8 for t % 4 == 1, 0 for t % 4 == 3) into stage k % 3, then each thread\n"
    " * sums chunk 63 - t of the stage; out[k * 64 + t]. cfg = {rounds, bug}: bug 1 no wait_group,\n"
    " * bug 2 no __syncthreads after it, bug 3 the thread reads its own chunk before the wait. */\n"
    "static void ring_probe(const unsigned short* src, float* out, const int* cfg) {\n"
    "    MC_DYNAMIC_SMEM(sm);\n"
    "    unsigned short* s = (unsigned short*)sm;\n"
    "    const int t = threadIdx.x, rounds = cfg[0], bug = cfg[1];\n"
    "    for (int k = 0; k < 2; k++) {\n"
    "        const int n = t % 4 == 3 ? 0 : t % 4 == 1 ? 8 : 16;\n"
    "        if (k < rounds) mc_cp_async<16>(s + (k % 3) * 512 + t * 8, src, n ? (k * 64 + t) * 8 : 0, n);\n"
    "        mc_cp_async_commit();\n"
    "    }\n"
    "    for (int k = 0; k < rounds; k++) {\n"
    "        if (bug == 3) (void)MC_SLD(s[(k % 3) * 512 + t * 8]);\n"
    "        if (bug != 1) mc_cp_async_wait<1>();\n"
    "        if (bug != 2) __syncthreads();\n"
    "        const int nk = k + 2;\n"
    "        const int n = t % 4 == 3 ? 0 : t % 4 == 1 ? 8 : 16;\n"
    "        if (nk < rounds) mc_cp_async<16>(s + (nk % 3) * 512 + t * 8, src, n ? (nk * 64 + t) * 8 : 0, n);\n"
    "        mc_cp_async_commit();\n"
    "        float v = 0.0f;\n"
    "        for (int e = 0; e < 8; e++) v += mc_f16_to_f32(MC_SLD(s[(k % 3) * 512 + (63 - t) * 8 + e]));\n"
    "        MC_GST(out, k * 64 + t, v);\n"
    "    }\n"
    "}\n"
    "extern \"C\" void emu_kernel(void **p) {\n"
    "    switch (*(const int*)p[0]) {\n"
    "    case 0: ldm_probe((const unsigned short*)p[1], (unsigned*)p[2], (const int*)p[3]); break;\n"
    "    case 1: ring_probe((const unsigned short*)p[1], (float*)p[2], (const int*)p[3]); break;\n"
    "    }\n"
    "}\n";

static void *probe_lib;
static emu_run_fn probe_run;
static void (*probe_body)(void **);

static void probe_setup(void) {
    if (probe_lib) return;
    char cpp[600], so[600], cmd[2000];
    snprintf(cpp, sizeof cpp, "%s/probe80.cpp", work_dir);
    snprintf(so, sizeof so, "%s/probe80.so", work_dir);
    FILE *f = fopen(cpp, "w");
    ck_assert_ptr_nonnull(f);
    /* the prelude's sm_80 wrappers over the emulator, as a generated unit has them */
    fprintf(f, "#include \"cuda_emu.h\"\n%s\n%s", mcir_tpl_prelude, PROBE);
    fclose(f);
#if defined(__SANITIZE_ADDRESS__)
    const char *san = "-fsanitize=address -fno-omit-frame-pointer";
#else
    const char *san = "";
#endif
    snprintf(cmd, sizeof cmd, "c++ -std=c++17 -O1 -w -shared -fPIC -fno-gnu-unique %s -I%s/emu -o %s %s", san,
             test_source_dir(), so, cpp);
    ck_assert_msg(system(cmd) == 0, "emulated compile failed: %s", cmd);
    probe_lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(probe_lib != NULL, "dlopen: %s", dlerror());
    probe_run = (emu_run_fn)dlsym(probe_lib, "emu_run");
    probe_body = (void (*)(void **))dlsym(probe_lib, "emu_kernel");
    ck_assert(probe_run && probe_body);
}

/* PTX ISA, "Warp-level matrix load instruction: ldmatrix": for .m8n8.b16
 * each of the num matrices has its 8 rows at the addresses of threads
 * 8q..8q+7; thread l receives in register q the elements (row l/4, columns
 * 2(l%4), 2(l%4)+1) of matrix q, and with .trans those of the transposed
 * matrix: (rows 2(l%4), 2(l%4)+1 of column l/4). The image element at row
 * R, column C is R * 8 + C + 1. */
START_TEST(test_emu_ldmatrix_fragments) {
    if (!test_have_cxx()) {
        fprintf(stderr, "  skipped: no C++ compiler for the kernel emulator\n");
        return;
    }
    probe_setup();
    unsigned short img[64 * 8];
    for (int i = 0; i < 64 * 8; i++) img[i] = (unsigned short)(i + 1);
    unsigned out[32 * 4];
    int mode = 0, bad = 0;
    for (int num = 2; num <= 4; num += 2)
        for (int trans = 0; trans < 2; trans++) {
            int cfg[2] = {num, trans};
            memset(out, 0, sizeof out);
            emu_buffer bufs[] = {{"mode", (unsigned char *)&mode, sizeof mode, NULL},
                                 {"img", (unsigned char *)img, sizeof img, NULL},
                                 {"out", (unsigned char *)out, sizeof out, NULL},
                                 {"cfg", (unsigned char *)cfg, sizeof cfg, NULL}};
            void *args[] = {&mode, img, out, cfg};
            emu_launch L = {.kernel = "ldm_probe", .body = probe_body, .args = args, .n_args = 4, .grid = 1,
                            .block = 32, .smem = sizeof img, .write_args = 1ull << 2, .buffers = bufs,
                            .n_buffers = 4, .checks = EMU_CHECK_ALL};
            ck_assert_int_eq(probe_run(&L), 0);
            ck_assert_int_eq(L.stats.ldmatrix, 32);
            for (int l = 0; l < 32; l++)
                for (int q = 0; q < num; q++) {
                    unsigned e[2];
                    for (int h = 0; h < 2; h++) {
                        int row = trans ? 2 * (l % 4) + h : l / 4, col = trans ? l / 4 : 2 * (l % 4) + h;
                        int at = ((8 * q + row) * 5) % 64;   /* the row thread 8q + row addressed */
                        e[h] = (unsigned)(at * 8 + col + 1);
                    }
                    unsigned want = e[0] | (e[1] << 16);
                    if (out[l * 4 + q] != want && bad++ < 4)
                        fprintf(stderr, "  ldmatrix x%d%s lane %d reg %d: %08x, want %08x\n", num,
                                trans ? ".trans" : "", l, q, out[l * 4 + q], want);
                }
        }
    fprintf(stderr, "  ldmatrix x2 / x4, plain and .trans: %d wrong registers\n", bad);
    ck_assert_int_eq(bad, 0);
}
END_TEST

/* f16 bits of a small integer (exact) */
static unsigned short f16_of_int(int v) {
    if (v == 0) return 0;
    unsigned sign = v < 0 ? 0x8000u : 0, a = (unsigned)(v < 0 ? -v : v);
    int e = 0;
    while ((a >> (e + 1)) != 0) e++;
    return (unsigned short)(sign | (unsigned)(e + 15) << 10 | ((a << (10 - e)) & 0x3ffu));
}

/* The 3-stage ring of the probe; its findings by kind. */
static void run_ring(int bug, int findings[EMU_FIND_KINDS], float *out, int rounds) {
    unsigned short src[5 * 64 * 8];
    for (int i = 0; i < 5 * 64 * 8; i++) src[i] = f16_of_int(i % 13 - 6);
    int mode = 1, cfg[2] = {rounds, bug};
    char msg[2048] = "";
    emu_buffer bufs[] = {{"mode", (unsigned char *)&mode, sizeof mode, NULL},
                         {"src", (unsigned char *)src, sizeof src, NULL},
                         {"out", (unsigned char *)out, sizeof(float) * 5 * 64, NULL},
                         {"cfg", (unsigned char *)cfg, sizeof cfg, NULL}};
    void *args[] = {&mode, src, out, cfg};
    emu_launch L = {.kernel = "ring_probe", .body = probe_body, .args = args, .n_args = 4, .grid = 1, .block = 64,
                    .smem = 3 * 512 * 2, .write_args = 1ull << 2, .buffers = bufs, .n_buffers = 4,
                    .checks = EMU_CHECK_ALL, .quiet = 1, .messages = msg, .messages_size = sizeof msg};
    probe_run(&L);
    memcpy(findings, L.findings, sizeof L.findings);
    char *nl = strchr(msg, '\n');
    if (nl) *nl = 0;
    if (bug) fprintf(stderr, "  cp.async ring, bug %d: %s\n", bug, msg);
    ck_assert_int_eq(L.stats.cp_async, (unsigned long long)rounds * 64);
}

START_TEST(test_emu_cp_async_lands_at_wait) {
    if (!test_have_cxx()) {
        fprintf(stderr, "  skipped: no C++ compiler for the kernel emulator\n");
        return;
    }
    probe_setup();
    float out[5 * 64];
    int f[EMU_FIND_KINDS];
    run_ring(0, f, out, 5);
    for (int k = 0; k < EMU_FIND_KINDS; k++) ck_assert_int_eq(f[k], 0);
    int bad = 0;
    for (int k = 0; k < 5; k++)
        for (int t = 0; t < 64; t++) {
            int c = 63 - t, n = c % 4 == 3 ? 0 : c % 4 == 1 ? 4 : 8;   /* elements copied; the rest zero */
            float want = 0;
            for (int e = 0; e < n; e++) want += (float)(((k * 64 + c) * 8 + e) % 13) - 6.0f;
            if (out[k * 64 + t] != want && bad++ < 4)
                fprintf(stderr, "  round %d thread %d: %g, want %g\n", k, t, out[k * 64 + t], want);
        }
    ck_assert_int_eq(bad, 0);
    for (int bug = 1; bug <= 3; bug++) {
        run_ring(bug, f, out, 5);
        ck_assert_msg(f[EMU_FIND_RACE] > 0, "bug %d: no race finding", bug);
    }
}
END_TEST

/* ------------------------------------------------------------- shapes */

/* One matmul problem: A's and B's shapes (as the matmul sees them, before
 * transpose flags), flags, an epilogue and a prologue. */
typedef struct shape {
    const char *name, *dt;
    const char *a, *b, *c;    /* JSON shapes; c: the product's */
    bool ta, tb;
    const char *epi;          /* "", bias, bias_relu, bias_gelu, gelu_erf, sigmoid, residual, scale, cast_f32 */
    const char *pro;          /* "", swiglu, cast, gamma (a * g[K]), transpose (A read through a transpose node) */
    const char *n_shape;      /* bias shape [N] */
    bool want_cpa_a, want_cpa_b;
    int tile[5];              /* BM, BN, BK, warps, stages in place of the model's pick (0: the pick) */
} shape;

static const shape SHAPES[] = {
    {"square", "f16", "[128,64]", "[64,128]", "[128,128]", false, false, "", "", "", true, true, {64, 64, 32, 4, 3}},
    {"partial_mnk", "bf16", "[200,72]", "[72,136]", "[200,136]", false, false, "", "", "", true, true, {128, 64, 32, 8, 4}},
    {"nt", "f16", "[77,120]", "[96,120]", "[77,96]", false, true, "", "", "", true, true, {16, 32, 32, 4, 3}},
    {"tn", "f16", "[56,64]", "[56,80]", "[64,80]", true, false, "", "", "", true, true, {0}},
    {"tt_bf16", "bf16", "[48,40]", "[72,48]", "[40,72]", true, true, "", "", "", true, true, {32, 64, 16, 2, 4}},
    /* odd K: A staged element by element; B's rows of 140 bytes: 4-byte copies */
    {"unaligned", "f16", "[65,45]", "[45,70]", "[65,70]", false, false, "", "", "", false, true, {0}},
    /* B's rows of 60 bytes: 4-byte copies */
    {"half_aligned", "bf16", "[50,64]", "[64,30]", "[50,30]", false, false, "", "", "", true, true, {0}},
    /* rows of 72 and 2468 bytes: 8- and 4-byte copies (the [.., 1234] f16 weight #44 names) */
    {"odd_strides", "f16", "[40,36]", "[36,1234]", "[40,1234]", false, false, "", "", "", true, true, {0}},
    /* B stored [N, K] with rows of 100 bytes (K = 50): 4-byte copies along K */
    {"odd_strides_nt", "bf16", "[33,50]", "[24,50]", "[33,24]", false, true, "", "", "", true, true, {0}},
    {"long_k", "f16", "[64,520]", "[520,64]", "[64,64]", false, false, "", "", "", true, true, {0}},
    {"batch", "f16", "[3,48,64]", "[3,64,40]", "[3,48,40]", false, false, "", "", "", true, true, {0}},
    {"bcast_b", "bf16", "[2,3,40,32]", "[32,56]", "[2,3,40,56]", false, false, "", "", "", true, true, {16, 32, 16, 4, 2}},
    {"bcast_a_nt", "f16", "[40,32]", "[4,24,32]", "[4,40,24]", false, true, "", "", "", true, true, {0}},
    {"bias", "f16", "[70,64]", "[64,96]", "[70,96]", false, false, "bias", "", "[96]", true, true, {0}},
    {"bias_relu", "bf16", "[33,64]", "[80,64]", "[33,80]", false, true, "bias_relu", "", "[80]", true, true, {0}},
    {"bias_gelu", "f16", "[2,37,48]", "[48,72]", "[2,37,72]", false, false, "bias_gelu", "", "[72]", true, true, {0}},
    {"gelu_erf", "bf16", "[60,96]", "[96,40]", "[60,40]", false, false, "gelu_erf", "", "", true, true, {0}},
    {"sigmoid", "f16", "[24,32]", "[32,48]", "[24,48]", false, false, "sigmoid", "", "", true, true, {0}},
    {"residual", "f16", "[90,40]", "[40,64]", "[90,64]", false, false, "residual", "", "", true, true, {0}},
    {"scale", "bf16", "[45,64]", "[64,56]", "[45,56]", false, false, "scale", "", "", true, true, {0}},
    {"cast_f32", "f16", "[52,48]", "[48,88]", "[52,88]", false, false, "cast_f32", "", "", true, true, {0}},
    {"swiglu", "bf16", "[2,20,96]", "[96,64]", "[2,20,64]", false, false, "", "swiglu", "", false, true, {32, 64, 32, 4, 3}},
    {"cast_prologue", "f16", "[40,64]", "[64,48]", "[40,48]", false, false, "", "cast", "", false, true, {0}},
    {"folded_transpose", "f16", "[72,56]", "[56,40]", "[72,40]", false, false, "", "transpose", "", true, true, {0}},
    {"gamma_prologue", "bf16", "[36,80]", "[80,40]", "[36,40]", false, false, "", "gamma", "", false, true, {0}},
    {"matvec", "f16", "[40,64]", "[64]", "[40]", false, false, "", "", "", true, false, {0}},
    {"small_k", "bf16", "[100,16]", "[16,64]", "[100,64]", false, false, "bias_relu", "", "[64]", true, true, {0}},
};
enum { N_SHAPES = sizeof SHAPES / sizeof *SHAPES };

/* "[a,b,c]" with its last two dims swapped */
static void swap_last(const char *s, char *out, size_t n) {
    int d[6], r = 0, off = 0;
    const char *p = s + 1;
    while (*p && *p != ']') {
        d[r++] = (int)strtol(p, (char **)&p, 10);
        if (*p == ',') p++;
    }
    int t = d[r - 1];
    d[r - 1] = d[r - 2];
    d[r - 2] = t;
    off += snprintf(out + off, n - (size_t)off, "[");
    for (int i = 0; i < r; i++) off += snprintf(out + off, n - (size_t)off, "%s%d", i ? "," : "", d[i]);
    snprintf(out + off, n - (size_t)off, "]");
}

static char *gemm_graph(const shape *s) {
    char *js = malloc(8192), in[2048] = "", nodes[4096] = "", a_in[16] = "a";
    ck_assert_ptr_nonnull(js);
    int ni = 0, nn = 0;
    const char *dt = s->dt;
    /* prologue: what feeds the matmul's A */
    if (!strcmp(s->pro, "swiglu")) {
        ni += snprintf(in + ni, sizeof in - (size_t)ni,
                       "{\"name\":\"gate\",\"dtype\":\"%s\",\"shape\":%s},{\"name\":\"up\",\"dtype\":\"%s\",\"shape\":%s}",
                       dt, s->a, dt, s->a);
        nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                       "{\"name\":\"si\",\"op\":\"silu\",\"inputs\":[\"gate\"],\"outputs\":[\"sg\"]},"
                       "{\"name\":\"mu\",\"op\":\"mul\",\"inputs\":[\"sg\",\"up\"],\"outputs\":[\"a\"]},");
    } else if (!strcmp(s->pro, "cast")) {
        ni += snprintf(in + ni, sizeof in - (size_t)ni, "{\"name\":\"a32\",\"dtype\":\"f32\",\"shape\":%s}", s->a);
        nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                       "{\"name\":\"ca\",\"op\":\"cast\",\"inputs\":[\"a32\"],\"outputs\":[\"a\"],\"attrs\":{\"to\":\"%s\"}},",
                       dt);
    } else if (!strcmp(s->pro, "gamma")) {   /* a norm's scale folded into the operand: a * g[K] */
        char k[16];
        snprintf(k, sizeof k, "[%d]", atoi(strrchr(s->a, ',') + 1));
        ni += snprintf(in + ni, sizeof in - (size_t)ni,
                       "{\"name\":\"a0\",\"dtype\":\"%s\",\"shape\":%s},{\"name\":\"g\",\"dtype\":\"%s\",\"shape\":%s}",
                       dt, s->a, dt, k);
        nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                       "{\"name\":\"sc\",\"op\":\"mul\",\"inputs\":[\"a0\",\"g\"],\"outputs\":[\"a\"]},");
    } else if (!strcmp(s->pro, "transpose")) {
        char sw[64];
        swap_last(s->a, sw, sizeof sw);
        ni += snprintf(in + ni, sizeof in - (size_t)ni, "{\"name\":\"at\",\"dtype\":\"%s\",\"shape\":%s}", dt, sw);
        nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                       "{\"name\":\"tr\",\"op\":\"transpose\",\"inputs\":[\"at\"],\"outputs\":[\"a\"],\"attrs\":{\"perm\":[1,0]}},");
    } else {
        ni += snprintf(in + ni, sizeof in - (size_t)ni, "{\"name\":\"a\",\"dtype\":\"%s\",\"shape\":%s}", dt, s->a);
    }
    (void)a_in;
    ni += snprintf(in + ni, sizeof in - (size_t)ni, ",{\"name\":\"b\",\"dtype\":\"%s\",\"shape\":%s}", dt, s->b);
    nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                   "{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"c\"],"
                   "\"attrs\":{\"transpose_a\":%s,\"transpose_b\":%s}}",
                   s->ta ? "true" : "false", s->tb ? "true" : "false");
    const char *e = s->epi;
    if (!strncmp(e, "bias", 4)) {
        ni += snprintf(in + ni, sizeof in - (size_t)ni, ",{\"name\":\"bias\",\"dtype\":\"%s\",\"shape\":%s}", dt,
                       s->n_shape);
        nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                       ",{\"name\":\"ad\",\"op\":\"add\",\"inputs\":[\"c\",\"bias\"],\"outputs\":[\"%s\"]}",
                       strcmp(e, "bias") ? "h" : "y");
        if (!strcmp(e, "bias_relu"))
            nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                           ",{\"name\":\"re\",\"op\":\"relu\",\"inputs\":[\"h\"],\"outputs\":[\"y\"]}");
        if (!strcmp(e, "bias_gelu"))
            nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                           ",{\"name\":\"ge\",\"op\":\"gelu\",\"inputs\":[\"h\"],\"outputs\":[\"y\"],"
                           "\"attrs\":{\"approximate\":\"tanh\"}}");
    } else if (!strcmp(e, "gelu_erf")) {
        nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                       ",{\"name\":\"ge\",\"op\":\"gelu\",\"inputs\":[\"c\"],\"outputs\":[\"y\"]}");
    } else if (!strcmp(e, "sigmoid")) {
        nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                       ",{\"name\":\"sg\",\"op\":\"sigmoid\",\"inputs\":[\"c\"],\"outputs\":[\"y\"]}");
    } else if (!strcmp(e, "residual")) {
        ni += snprintf(in + ni, sizeof in - (size_t)ni, ",{\"name\":\"res\",\"dtype\":\"%s\",\"shape\":%s}", dt, s->c);
        nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                       ",{\"name\":\"ad\",\"op\":\"add\",\"inputs\":[\"c\",\"res\"],\"outputs\":[\"y\"]}");
    } else if (!strcmp(e, "scale")) {
        nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                       ",{\"name\":\"sc\",\"op\":\"scale\",\"inputs\":[\"c\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":0.125}}");
    } else if (!strcmp(e, "cast_f32")) {
        nn += snprintf(nodes + nn, sizeof nodes - (size_t)nn,
                       ",{\"name\":\"cf\",\"op\":\"cast\",\"inputs\":[\"c\"],\"outputs\":[\"y\"],\"attrs\":{\"to\":\"f32\"}}");
    }
    snprintf(js, 8192, "{\"mcir\":1,\"name\":\"g80_%s\",\"inputs\":[%s],\"nodes\":[%s],\"outputs\":[\"%s\"]}",
             s->name, in, nodes, *e ? "y" : "c");
    return js;
}

static mcir_plan *plan_of(mcir_graph *g, const char *arch) {
    mcir_diag d = mcir_diag_stderr();
    mcir_plan *p = mcir_plan_build(g, mcir_target_find(arch), NULL, &d);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* The graph as one MATMUL kernel: every node in the matmul's region
 * (prologue, folded transpose, epilogue), its tile the launch model's or
 * tile (BM, BN, BK, warps, stages; NULL or zeros: the model's). The
 * forced tiles cover warp grids of 2 x 2 and 4 x 2, two m16 tiles per
 * warp, an odd count of n8 tiles per warp (ldmatrix .x2, plain and
 * .trans), 2 and 4 stages. */
static mcir_plan *fused_plan_of(mcir_graph *g, const char *arch, const int *tile) {
    char nodes[1024] = "";
    size_t n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += (size_t)snprintf(nodes + n, sizeof nodes - n, "%s%s", i ? "," : "", g->nodes[i]->name);
    cgt_kspec ks[] = {{MCIR_TEMPLATE_MATMUL, "mm", nodes}};
    mcir_plan *p = cgt_plan(g, arch, 1, ks);
    if (tile && tile[0]) {
        mcir_tiling t = p->kernels[0].tiling;
        for (int i = 0; i < 3; i++) t.block_tile[i] = tile[i];
        t.warps = tile[3];
        t.stages = tile[4];
        ck_assert_msg(mcir_gemm_apply(p, &p->kernels[0], &t, NULL), "%s: tile not legal", g->name);
    }
    return p;
}

static int matmul_index(const mcir_plan *p) {
    for (int i = 0; i < p->n_kernels; i++)
        if (p->kernels[i].tpl == MCIR_TEMPLATE_MATMUL) return i;
    ck_abort_msg("no matmul kernel in the plan");
    return -1;
}

/* ------------------------------------------------------------- planner */

START_TEST(test_plan_takes_the_ring) {
    static const char *const archs[] = {"sm_80", "sm_86", "sm_89"};
    for (int a = 0; a < 3; a++) {
        const mcir_target *t = mcir_target_find(archs[a]);
        int deep = 0;
        for (int i = 0; i < N_SHAPES; i++) {
            const shape *s = &SHAPES[i];
            char *js = gemm_graph(s);
            mcir_graph *g = cgt_graph(js);
            mcir_plan *p = plan_of(g, archs[a]);
            const mcir_kernel_plan *k = &p->kernels[matmul_index(p)];
            mcir_gemm_problem gp;
            mcir_gemm_layout l;
            ck_assert(mcir_gemm_problem_of(k, &gp));
            ck_assert(mcir_gemm_layout_of(t, &gp, &k->tiling, &l, NULL));
            ck_assert_msg(l.async, "%s %s: not the cp.async ring", archs[a], s->name);
            ck_assert_int_ge(l.stages, 2);
            ck_assert_int_le(l.stages, 4);
            ck_assert_int_le(l.smem_bytes, t->smem_per_block_optin);
            int64_t nk = (gp.k + l.bk - 1) / l.bk;
            if (nk >= 2) ck_assert_msg(l.stages >= 3, "%s %s: %d stages with %lld K tiles", archs[a], s->name,
                                       l.stages, (long long)nk);
            deep += l.stages >= 3;
            mcir_plan_free(p);
            mcir_graph_free(g);
            free(js);
        }
        ck_assert_int_gt(deep, N_SHAPES / 2);
    }
    /* large products: a large tile, a deep ring, the modelled rate at
     * most the attainable fraction of the part's peak (most of it on the
     * A100; A10 / L4 have a fifth / a seventh of its bandwidth) */
    static const shape big[] = {
        {"4096^3", "f16", "[4096,4096]", "[4096,4096]", "[4096,4096]", false, false, "", "", "", true, true, {0}},
        {"llama_down", "bf16", "[8192,11008]", "[11008,4096]", "[8192,4096]", false, false, "", "", "", true, true, {0}},
    };
    for (int a = 0; a < 3; a++)
        for (int i = 0; i < 2; i++) {
            const mcir_target *t = mcir_target_find(archs[a]);
            char *js = gemm_graph(&big[i]);
            mcir_graph *g = cgt_graph(js);
            mcir_plan *p = fused_plan_of(g, archs[a], NULL);
            const mcir_kernel_plan *k = &p->kernels[0];
            mcir_gemm_problem gp;
            mcir_gemm_layout l;
            ck_assert(mcir_gemm_problem_of(k, &gp) && mcir_gemm_layout_of(t, &gp, &k->tiling, &l, NULL));
            mcir_kernel_cost c;
            mcir_cost_options o = {.generated_only = true};
            mcir_cost_kernel(k, t, &o, &c);
            double tf = 2.0 * (double)gp.m * (double)gp.n * (double)gp.k / (c.modelled_us * 1e6);
            double peak = gp.dtype == MCIR_DTYPE_BF16 ? t->bf16_tc_tflops : t->f16_tc_tflops;
            fprintf(stderr, "  %s %-10s %lldx%lldx%lld, %d warps, %d stages, %lld KiB shared, %d block(s)/SM: "
                            "modelled %.0f us, %.0f TF/s of %.0f (%.2f)\n",
                    archs[a], big[i].name, (long long)l.bm, (long long)l.bn, (long long)l.bk, l.warps, l.stages,
                    (long long)(l.smem_bytes / 1024), l.blocks_per_sm, c.modelled_us, tf, peak, tf / peak);
            ck_assert(l.async && l.stages >= 3 && l.bm * l.bn >= 64 * 128);
            ck_assert(tf / peak <= 0.88 + 1e-9);   /* L4 and A10 are memory-bound on some */
            if (a == 0) ck_assert(tf / peak > 0.7);
            mcir_graph_free(g);
            free(js);
        }
    /* sm_90 takes the sm_90a GEMM instead (tests/test_gemm_sm90.c) */
    char *js = gemm_graph(&SHAPES[0]);
    mcir_graph *g = cgt_graph(js);
    mcir_plan *p = plan_of(g, "sm_90");
    const mcir_kernel_plan *k = &p->kernels[matmul_index(p)];
    bool wg = false;
    for (int i = 0; i < k->tiling.n_dims; i++) wg = wg || strcmp(k->tiling.dim_names[i], "wg") == 0;
    ck_assert_msg(wg, "%s", k->tiling.reason);
    mcir_plan_free(p);
    mcir_graph_free(g);
    free(js);
}
END_TEST

/* -------------------------------------------------------- ptxas audit */

START_TEST(test_sm80_kernels_compile_clean) {
    char why[256];
    if (!mcir_nvrtc_available(why, sizeof why)) {
        fprintf(stderr, "  skipped: %s\n", why);
        return;
    }
    double t0 = now_s();
    for (int i = 0; i < N_SHAPES; i++) {
        const shape *s = &SHAPES[i];
        char *js = gemm_graph(s);
        mcir_graph *g = cgt_graph(js);
        mcir_plan *p = fused_plan_of(g, "sm_80", s->tile);
        mcir_diag d = mcir_diag_stderr();
        mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
        ck_assert_ptr_nonnull(cg);
        int ki = matmul_index(p);
        ck_assert_msg(mcir_codegen_compile(cg, "sm_80", &d), "%s", s->name);
        const char *src = mcir_codegen_kernel_source(cg, ki);
        const mcir_kernel_plan *kp = &p->kernels[ki];
        const mcir_kernel_audit *a = &kp->audit;
        int est = kp->tiling.registers_estimate;
        bool cpa_a = strstr(src, "#define MM_A_CPA 1") != NULL, cpa_b = strstr(src, "#define MM_B_CPA 1") != NULL;
        fprintf(stderr, "  sm_80 %-16s %-4s %lldx%lldx%lld %d warps %d stages: %d registers (plan %d), spills %d/%d, "
                        "mma %d, ldmatrix %d, cp.async %d (A %s, B %s), advisories %d\n",
                s->name, s->dt, (long long)kp->tiling.block_tile[0], (long long)kp->tiling.block_tile[1],
                (long long)kp->tiling.block_tile[2], kp->tiling.warps, kp->tiling.stages, a->registers, est,
                a->spill_store_bytes, a->spill_load_bytes, a->mma, a->ldmatrix, a->cp_async, cpa_a ? "cp.async" : "staged",
                cpa_b ? "cp.async" : "staged", a->advisories);
        ck_assert(a->valid);
        ck_assert_msg(cpa_a == s->want_cpa_a && cpa_b == s->want_cpa_b, "%s: operand paths A %d B %d", s->name,
                      cpa_a, cpa_b);
        ck_assert_int_gt(a->mma, 0);
        ck_assert_int_gt(a->ldmatrix, 0);
        if (cpa_a || cpa_b) ck_assert_int_gt(a->cp_async, 0);
        /* the main loop itself: mma, ldmatrix, and cp.async wherever an
         * operand is plain (where ptxas unrolls a short K whole, the main
         * loop is the block's item loop, epilogue loads included) */
        ck_assert_int_gt(a->mainloop.loops, 0);
        ck_assert_int_gt(a->mainloop.mma, 0);
        ck_assert_int_gt(a->mainloop.ldmatrix, 0);
        if (cpa_a || cpa_b) ck_assert_int_gt(a->mainloop.cp_async, 0);
        ck_assert_int_eq(a->spill_store_bytes, 0);
        ck_assert_int_eq(a->spill_load_bytes, 0);
        ck_assert_msg(a->advisories == 0, "%s: %s", s->name, a->advisory);
        mcir_codegen_free(cg);
        mcir_graph_free(g);   /* and the plan, in its arena */
        free(js);
    }
    fprintf(stderr, "  %d sm_80 GEMMs audited, %.1f s\n", N_SHAPES, now_s() - t0);
}
END_TEST

/* ------------------------------------------------------------ emulated */

static void (*unit_mutation)(char *unit);
static void mutate_unit(mcir_codegen *cg) {
    for (int i = 0; i < cg->n; i++)
        if (cg->k[i].kp->tpl == MCIR_TEMPLATE_MATMUL) unit_mutation(cg->k[i].unit);
}

static cgt_emu_result run_emulated_on(const char *arch, const shape *s, void (*mutate)(char *unit)) {
    char *js = gemm_graph(s);
    mcir_graph *g = cgt_graph(js);
    mcir_plan *p = fused_plan_of(g, arch, s->tile);
    ck_assert_int_eq(p->n_kernels, 1);
    mcir_memplan *mp = NULL;   /* each tensor its own (256-byte aligned) allocation */
    const mcir_kernel_plan *k = &p->kernels[matmul_index(p)];
    unit_mutation = mutate;
    char *diag = NULL;
    setenv("MCIR_NO_CUBLAS", "1", 1);
    double t0 = now_s();
    cgt_emu_result r = cgt_emu_device(g, p, mp, 3, 11, NULL, mutate ? mutate_unit : NULL, mutate ? &diag : NULL);
    unsetenv("MCIR_NO_CUBLAS");
    if (diag) {
        fprintf(stderr, "%.600s", diag);
        free(diag);
    }
    fprintf(stderr, "  %s %-16s %-4s %lldx%lldx%lld, %d warps, %d stages: %d launches, rel err %.3g, %.1f s %s\n",
            arch, s->name, s->dt, (long long)k->tiling.block_tile[0], (long long)k->tiling.block_tile[1],
            (long long)k->tiling.block_tile[2], k->tiling.warps, k->tiling.stages, r.launches, r.rel, now_s() - t0,
            r.ran && r.rel <= 2e-2 && r.finite ? "ok" : "FAIL");
    mcir_graph_free(g);   /* and the plan, in its arena */
    free(js);
    return r;
}
static cgt_emu_result run_emulated(const shape *s, void (*mutate)(char *unit)) {
    return run_emulated_on("sm_80", s, mutate);
}

START_TEST(test_sm80_matches_reference_emulated) {
    if (!test_have_cxx()) {
        fprintf(stderr, "  skipped: no C++ compiler for the kernel emulator\n");
        return;
    }
    int failed = 0;
    double t0 = now_s();
    for (int i = 0; i < N_SHAPES; i++) {
        cgt_emu_result r = run_emulated(&SHAPES[i], NULL);
        failed += !(r.ran && r.rel <= 2e-2 && r.finite);
    }
    fprintf(stderr, "  %d sm_80 GEMMs emulated, %d failed, %.1f s\n", N_SHAPES, failed, now_s() - t0);
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* Blanks a statement of the mainloop: its wait_group (what 0), or the
 * __syncthreads after it (what 1), so the kernel runs without it. */
static int drop_what;
static void drop_statement(char *src) {
    const char *wait = "mc_cp_async_wait<MM_STAGES - 2>();", *bar = "__syncthreads();";
    char *w = strstr(src, wait);   /* the template's one wait_group: the mainloop's */
    ck_assert_msg(w != NULL, "the mainloop's wait_group is not in the generated unit: update the mutation");
    if (drop_what == 1) w = strstr(w, bar);
    ck_assert_ptr_nonnull(w);
    memset(w, ' ', strlen(drop_what ? bar : wait));
}

START_TEST(test_dropped_wait_or_barrier_is_a_race) {
    if (!test_have_cxx()) {
        fprintf(stderr, "  skipped: no C++ compiler for the kernel emulator\n");
        return;
    }
    static const char *const drops[] = {"cp.async.wait_group", "__syncthreads after it"};
    const shape s = {"mutant", "f16", "[64,256]", "[256,64]", "[64,64]", false, false, "", "", "", true, true, {0}};
    for (int i = 0; i < 2; i++) {
        drop_what = i;
        cgt_emu_result r = run_emulated(&s, drop_statement);
        fprintf(stderr, "  without the mainloop's %s: %d race findings\n", drops[i], r.findings[EMU_FIND_RACE]);
        ck_assert_msg(!r.ran && r.findings[EMU_FIND_RACE] > 0, "dropping the %s: ran %d, %d race findings", drops[i],
                      r.ran, r.findings[EMU_FIND_RACE]);
    }
}
END_TEST

/* The copy size follows the rows' alignment: a kernel that copies B's
 * 4-byte aligned rows 8 bytes at a time (a mutant) is an emulator finding. */
static void widen_b_copies(char *src) {
    char *c = strstr(src, "#define MM_B_CPB 4\n");
    ck_assert_msg(c != NULL, "odd_strides: B's 4-byte copies are not in the unit: update the mutation");
    c[strlen("#define MM_B_CPB ")] = '8';
}

/* sm_90 where the wgmma path cannot read an operand (rows not a multiple
 * of 16 bytes): the cp.async ring, never register staging; the odd-stride
 * shapes on the emulated device match the interpreter, and the mutant
 * above is found. */
START_TEST(test_sm90_fallback_is_the_ring) {
    static const char *const names[] = {"unaligned", "half_aligned", "odd_strides", "odd_strides_nt"};
    int failed = 0;
    for (int n = 0; n < 4; n++) {
        const shape *s = NULL;
        for (int i = 0; i < N_SHAPES; i++)
            if (strcmp(SHAPES[i].name, names[n]) == 0) s = &SHAPES[i];
        ck_assert_ptr_nonnull(s);
        char *js = gemm_graph(s);
        mcir_graph *g = cgt_graph(js);
        mcir_plan *p = fused_plan_of(g, "sm_90", s->tile);
        mcir_diag d = mcir_diag_stderr();
        mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
        ck_assert_ptr_nonnull(cg);
        const char *src = mcir_codegen_kernel_source(cg, matmul_index(p));
        ck_assert_msg(strstr(src, "#define MM_ASYNC 1") != NULL && strstr(src, "#define MM_MMA 1") != NULL,
                      "%s: not the cp.async ring on sm_90", s->name);
        if (strcmp(s->name, "odd_strides") == 0)
            ck_assert_msg(strstr(src, "#define MM_A_CPB 8") && strstr(src, "#define MM_B_CPB 4"), "%s", src);
        mcir_codegen_free(cg);
        mcir_graph_free(g);
        free(js);
        if (!test_have_cxx()) continue;
        cgt_emu_result r = run_emulated_on("sm_90", s, NULL);
        failed += !(r.ran && r.rel <= 2e-2 && r.finite);
    }
    ck_assert_int_eq(failed, 0);
    if (!test_have_cxx()) {
        fprintf(stderr, "  skipped: no C++ compiler for the kernel emulator\n");
        return;
    }
    for (int i = 0; i < N_SHAPES; i++)
        if (strcmp(SHAPES[i].name, "odd_strides") == 0) {
            cgt_emu_result r = run_emulated(&SHAPES[i], widen_b_copies);
            fprintf(stderr, "  8-byte copies of 4-byte aligned rows: %d out-of-bounds findings\n",
                    r.findings[EMU_FIND_BOUNDS]);
            ck_assert(!r.ran && r.findings[EMU_FIND_BOUNDS] > 0);
        }
}
END_TEST

int main(void) {
    if (!test_tempdir("gemm80", work_dir, sizeof work_dir)) return 1;
    char cache[256];
    cgt_kernel_cache(cache, sizeof cache);
    Suite *s = suite_create("gemm_sm80");
    TCase *tc = tcase_create("sm80");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, test_emu_ldmatrix_fragments);
    tcase_add_test(tc, test_emu_cp_async_lands_at_wait);
    tcase_add_test(tc, test_plan_takes_the_ring);
    tcase_add_test(tc, test_sm80_kernels_compile_clean);
    tcase_add_test(tc, test_dropped_wait_or_barrier_is_a_race);
    tcase_add_test(tc, test_sm80_matches_reference_emulated);
    tcase_add_test(tc, test_sm90_fallback_is_the_ring);
    suite_add_tcase(s, tc);
    int failed = test_main_nofork(s);
    test_remove_dir(work_dir);
    if (cache[0]) test_remove_dir(cache);
    return failed;
}
