/*
 * test_mma_layout.c — the emulator's mma.sync m16n8k16 fragment layout
 * (emu/cuda_emu.h, emu_mma_m16n8k16) checked against a second source:
 * tests/data/layouts/mma_m16n8k16.txt, the lane/value -> (row, col) maps
 * evaluated from CuTe's SM80_16x8x16 layouts. A one-warp kernel runs one
 * emu_mma_m16n8k16 on fragments that the test fills from the data file's A
 * and B maps and reads back through its C map:
 *  - one-hot A (every (m, k)) times B[k][n] = k + 1: D must be k + 1 in row
 *    m and 0 elsewhere;
 *  - A[m][k] = k + 1 times one-hot B (every (k, n)): D must be k + 1 in
 *    column n and 0 elsewhere;
 *  - small random integer A, B and C (exact in f16, bf16 and f32): D must be
 *    A B + C exactly, in f16 and bf16 (the bf16 flag of the emulator).
 * Skips (77) without a C++ compiler.
 */
#include <check.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcir/mcir.h"
#include "emu/cuda_emu.h"
#include "test_util.h"

static char work_dir[256];

/* The data file's maps: per lane and value, row and col (reg/half checked
 * to be v/2, v%2 for A and B and v for C when read). */
static int a_rc[32][8][2], b_rc[32][4][2], c_rc[32][4][2];

static void load_maps(void) {
    char line[256];
    const char *path = test_path("tests/data/layouts/mma_m16n8k16.txt");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    int seen[3] = {0, 0, 0};
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char op;
        int lane, v, reg, half, row, col;
        ck_assert_int_eq(sscanf(line, "%c %d %d %d %d %d %d", &op, &lane, &v, &reg, &half, &row, &col), 7);
        ck_assert(lane >= 0 && lane < 32);
        if (op == 'A') {
            ck_assert(v >= 0 && v < 8 && reg == v / 2 && half == v % 2 && row < 16 && col < 16);
            a_rc[lane][v][0] = row, a_rc[lane][v][1] = col, seen[0]++;
        } else if (op == 'B') {
            ck_assert(v >= 0 && v < 4 && reg == v / 2 && half == v % 2 && row < 16 && col < 8);
            b_rc[lane][v][0] = row, b_rc[lane][v][1] = col, seen[1]++;
        } else {
            ck_assert(op == 'C' && v >= 0 && v < 4 && reg == v && row < 16 && col < 8);
            c_rc[lane][v][0] = row, c_rc[lane][v][1] = col, seen[2]++;
        }
    }
    fclose(f);
    ck_assert_int_eq(seen[0], 256);
    ck_assert_int_eq(seen[1], 128);
    ck_assert_int_eq(seen[2], 128);
}

/* One warp: each lane loads its a[4], b[2], c[4] words, runs the mma, stores d[4]. */
static const char PROBE[] =
    "extern \"C\" __global__ void mma_probe(const unsigned* a, const unsigned* b, const float* c, float* d,\n"
    "                                       const unsigned* bf16) {\n"
    "    const int lane = threadIdx.x;\n"
    "    unsigned ra[4], rb[2];\n"
    "    float rc[4];\n"
    "    for (int i = 0; i < 4; i++) ra[i] = a[lane * 4 + i];\n"
    "    for (int i = 0; i < 2; i++) rb[i] = b[lane * 2 + i];\n"
    "    for (int i = 0; i < 4; i++) rc[i] = c[lane * 4 + i];\n"
    "    emu_mma_m16n8k16(rc, ra, rb, (int)bf16[0]);\n"
    "    for (int i = 0; i < 4; i++) d[lane * 4 + i] = rc[i];\n"
    "}\n"
    "extern \"C\" void emu_kernel(void **p) {\n"
    "    mma_probe((const unsigned*)p[0], (const unsigned*)p[1], (const float*)p[2], (float*)p[3],\n"
    "              (const unsigned*)p[4]);\n"
    "}\n";

static void *probe_lib;

static void *compile_probe(void) {
    char cpp[600], so[600], cmd[2000];
    snprintf(cpp, sizeof cpp, "%s/probe.cpp", work_dir);
    snprintf(so, sizeof so, "%s/probe.so", work_dir);
    FILE *f = fopen(cpp, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "#include \"cuda_emu.h\"\n%s", PROBE);
    fclose(f);
    snprintf(cmd, sizeof cmd, "c++ -std=c++17 -O1 -w -shared -fPIC -fno-gnu-unique -I%s/emu -o %s %s",
             test_source_dir(), so, cpp);
    ck_assert_msg(system(cmd) == 0, "emulated compile failed: %s", cmd);
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib != NULL, "dlopen: %s", dlerror());
    return lib;
}

/* The maps and the probe, once (inside a test: they assert). */
static void setup(void) {
    if (probe_lib) return;
    load_maps();
    probe_lib = compile_probe();
}

static uint16_t to16(float x, bool bf16) { return bf16 ? mcir_f32_to_bf16(x) : mcir_f32_to_f16(x); }

/* D = A B + C through the emulator, fragments placed by the data file. */
static void emulated_mma(const float A[16][16], const float B[16][8], const float C[16][8], bool bf16,
                         float D[16][8]) {
    static unsigned ra[32 * 4], rb[32 * 2], flag[1];
    static float rc[32 * 4], rd[32 * 4];
    memset(ra, 0, sizeof ra);
    memset(rb, 0, sizeof rb);
    for (int l = 0; l < 32; l++) {
        for (int v = 0; v < 8; v++)
            ra[l * 4 + v / 2] |= (unsigned)to16(A[a_rc[l][v][0]][a_rc[l][v][1]], bf16) << (16 * (v % 2));
        for (int v = 0; v < 4; v++)
            rb[l * 2 + v / 2] |= (unsigned)to16(B[b_rc[l][v][0]][b_rc[l][v][1]], bf16) << (16 * (v % 2));
        for (int v = 0; v < 4; v++) rc[l * 4 + v] = C[c_rc[l][v][0]][c_rc[l][v][1]];
    }
    flag[0] = bf16;
    emu_buffer bufs[5] = {{"a", (unsigned char *)ra, sizeof ra, NULL}, {"b", (unsigned char *)rb, sizeof rb, NULL},
                          {"c", (unsigned char *)rc, sizeof rc, NULL}, {"d", (unsigned char *)rd, sizeof rd, NULL},
                          {"flag", (unsigned char *)flag, sizeof flag, NULL}};
    void *args[5] = {ra, rb, rc, rd, flag};
    emu_run_fn run = (emu_run_fn)dlsym(probe_lib, "emu_run");
    void (*body)(void **) = (void (*)(void **))dlsym(probe_lib, "emu_kernel");
    ck_assert(run && body);
    emu_launch L = {.kernel = "mma_probe", .body = body, .args = args, .n_args = 5, .grid = 1, .block = 32,
                    .write_args = 1ull << 3, .buffers = bufs, .n_buffers = 5, .checks = 0};
    ck_assert_int_eq(run(&L), 0);
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 8; n++) D[m][n] = -1e30f;   /* every element must be covered by the C map */
    for (int l = 0; l < 32; l++)
        for (int v = 0; v < 4; v++) D[c_rc[l][v][0]][c_rc[l][v][1]] = rd[l * 4 + v];
}

START_TEST(test_a_fragment_one_hot) {
    setup();
    float A[16][16], B[16][8], C[16][8] = {{0}}, D[16][8];
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++) B[k][n] = (float)(k + 1);   /* D names the k it met */
    int bad = 0;
    for (int m0 = 0; m0 < 16; m0++)
        for (int k0 = 0; k0 < 16; k0++) {
            memset(A, 0, sizeof A);
            A[m0][k0] = 1.0f;
            emulated_mma(A, B, C, false, D);
            for (int m = 0; m < 16; m++)
                for (int n = 0; n < 8; n++)
                    if (D[m][n] != (m == m0 ? (float)(k0 + 1) : 0.0f)) {
                        if (bad++ < 5) fprintf(stderr, "  A one-hot (%d,%d): D[%d][%d] = %g\n", m0, k0, m, n, D[m][n]);
                    }
        }
    ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(test_b_fragment_one_hot) {
    setup();
    float A[16][16], B[16][8], C[16][8] = {{0}}, D[16][8];
    for (int m = 0; m < 16; m++)
        for (int k = 0; k < 16; k++) A[m][k] = (float)(k + 1);
    int bad = 0;
    for (int k0 = 0; k0 < 16; k0++)
        for (int n0 = 0; n0 < 8; n0++) {
            memset(B, 0, sizeof B);
            B[k0][n0] = 1.0f;
            emulated_mma(A, B, C, true, D);
            for (int m = 0; m < 16; m++)
                for (int n = 0; n < 8; n++)
                    if (D[m][n] != (n == n0 ? (float)(k0 + 1) : 0.0f)) {
                        if (bad++ < 5) fprintf(stderr, "  B one-hot (%d,%d): D[%d][%d] = %g\n", k0, n0, m, n, D[m][n]);
                    }
        }
    ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(test_product_of_distinct_integers) {
    setup();
    float A[16][16], B[16][8], C[16][8], D[16][8];
    unsigned s = 12345;
    for (int bf = 0; bf < 2; bf++)
        for (int trial = 0; trial < 4; trial++) {
            /* integers in [-8, 8): exact in bf16 and f16, sums exact in f32 */
            for (int m = 0; m < 16; m++)
                for (int k = 0; k < 16; k++) A[m][k] = (float)((int)((s = s * 1103515245u + 12345u) >> 16) % 16 - 8);
            for (int k = 0; k < 16; k++)
                for (int n = 0; n < 8; n++) B[k][n] = (float)((int)((s = s * 1103515245u + 12345u) >> 16) % 16 - 8);
            for (int m = 0; m < 16; m++)
                for (int n = 0; n < 8; n++) C[m][n] = (float)((int)((s = s * 1103515245u + 12345u) >> 16) % 64 - 32);
            emulated_mma(A, B, C, bf, D);
            for (int m = 0; m < 16; m++)
                for (int n = 0; n < 8; n++) {
                    float want = C[m][n];
                    for (int k = 0; k < 16; k++) want += A[m][k] * B[k][n];
                    ck_assert_msg(D[m][n] == want, "%s trial %d: D[%d][%d] = %g, A B + C = %g",
                                  bf ? "bf16" : "f16", trial, m, n, D[m][n], want);
                }
        }
}
END_TEST

/* wgmma_m64nNk16.txt (kept for the wgmma emulator to come): each operand
 * covers its tile exactly once, and warp w of the warp group holds rows
 * 16w..16w+15 (the ISA's rule that each warp owns a quarter of M). */
START_TEST(test_wgmma_vectors_cover_tiles) {
    char line[256], cur[8] = "";
    const char *path = test_path("tests/data/layouts/wgmma_m64nNk16.txt");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    static unsigned char seen[64][256];
    int operands = 0, count = 0, cols = 0;
    for (;;) {
        char *got = fgets(line, sizeof line, f);
        char op[8] = "";
        int t = 0, v = 0, row = 0, col = 0;
        if (got && (line[0] == '#' || line[0] == '\n')) continue;
        if (got) ck_assert_int_eq(sscanf(line, "%7s %d %d %d %d", op, &t, &v, &row, &col), 5);
        if (!got || strcmp(op, cur) != 0) {
            if (cur[0]) {   /* close the previous operand: every element once */
                ck_assert_int_eq(count, 64 * cols);
                for (int r = 0; r < 64; r++)
                    for (int c = 0; c < cols; c++) ck_assert_int_eq(seen[r][c], 1);
                operands++;
            }
            if (!got) break;
            snprintf(cur, sizeof cur, "%s", op);
            cols = op[0] == 'A' ? 16 : atoi(op + 1);
            ck_assert(cols > 0 && cols <= 256);
            memset(seen, 0, sizeof seen);
            count = 0;
        }
        ck_assert(t >= 0 && t < 128 && row >= 0 && row < 64 && col >= 0 && col < cols);
        ck_assert_int_eq(row / 16, t / 32);
        seen[row][col]++;
        count++;
    }
    fclose(f);
    ck_assert_int_eq(operands, 5);
}
END_TEST

int main(void) {
    if (!test_have_cxx()) return test_skip("no C++ compiler for the kernel emulator");
    if (!test_tempdir("mma", work_dir, sizeof work_dir)) return 1;
    Suite *s = suite_create("mma_layout");
    TCase *tc = tcase_create("m16n8k16");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_a_fragment_one_hot);
    tcase_add_test(tc, test_b_fragment_one_hot);
    tcase_add_test(tc, test_product_of_distinct_integers);
    tcase_add_test(tc, test_wgmma_vectors_cover_tiles);
    suite_add_tcase(s, tc);
    int failed = test_main_nofork(s);
    if (probe_lib) dlclose(probe_lib);
    test_remove_dir(work_dir);
    return failed;
}
