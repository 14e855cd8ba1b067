/*
 * test_gemm_sm80.c — the emulator's model of the sm_80 primitives the GEMM
 * mainloop is to use (emu/cuda_emu.h, prelude.cuh's wrappers):
 * ldmatrix x4 / x2 (and .trans) hand each lane the elements the PTX ISA's
 * definition names; cp.async lands at the wait_group that retires its
 * group, zero-fills past src_size, and reading a copy in flight (no wait,
 * or no __syncthreads after another thread's wait, or before one's own
 * wait) is a race finding.
 */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_util.h"
#include "codegen/codegen-impl.h"
#include "emu/cuda_emu.h"
#include "kernelplan/kernelplan.h"
#include "test_util.h"

static char work_dir[256];

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
    "        if (k < rounds) mc_cp_async16(s + (k % 3) * 512 + t * 8, src, n ? (k * 64 + t) * 8 : 0, n);\n"
    "        mc_cp_async_commit();\n"
    "    }\n"
    "    for (int k = 0; k < rounds; k++) {\n"
    "        if (bug == 3) (void)MC_SLD(s[(k % 3) * 512 + t * 8]);\n"
    "        if (bug != 1) mc_cp_async_wait<1>();\n"
    "        if (bug != 2) __syncthreads();\n"
    "        const int nk = k + 2;\n"
    "        const int n = t % 4 == 3 ? 0 : t % 4 == 1 ? 8 : 16;\n"
    "        if (nk < rounds) mc_cp_async16(s + (nk % 3) * 512 + t * 8, src, n ? (nk * 64 + t) * 8 : 0, n);\n"
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

int main(void) {
    if (!test_tempdir("gemm80", work_dir, sizeof work_dir)) return 1;
    char cache[256];
    cgt_temp_cache(cache, sizeof cache);
    Suite *s = suite_create("gemm_sm80");
    TCase *tc = tcase_create("sm80");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, test_emu_ldmatrix_fragments);
    tcase_add_test(tc, test_emu_cp_async_lands_at_wait);
    suite_add_tcase(s, tc);
    int failed = test_main_nofork(s);
    test_remove_dir(work_dir);
    test_remove_dir(cache);
    return failed;
}
