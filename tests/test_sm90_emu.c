/*
 * test_sm90_emu.c — the emulator's sm_90a semantics (emu/cuda_emu_sm90.h)
 * checked against data it was not written from:
 *  - wgmma m64nNk16 with shared operands: for each descriptor case of
 *    tests/data/layouts/gmma_smem_desc.txt (CuTe's canonical GMMA layouts
 *    and SW128 atoms tiled over Q/K and V tiles, none/32B/64B/128B
 *    swizzle, K- and MN-major), the operand is written to shared memory at
 *    the data's byte offsets, A (registers) and D are placed / read by the
 *    CuTe fragment maps of wgmma_m64nNk16.txt, and D must equal A B + C
 *    exactly (small integers, f16 and bf16); the same with A from shared
 *    memory (SS), K- and MN-major (the sm_90a GEMM's transposed A: one
 *    64 x 64 MN-major box, 128-byte swizzle, per k-step);
 *  - TMA tile loads: for each case of tma_box.txt (box coordinates inside,
 *    on the edge, negative, element strides; each swizzle), every 2-byte
 *    slot of shared memory must hold the global element the data names, or
 *    zero out of bounds (NaN with the NaN fill), and the mbarrier's
 *    transaction count must complete with the box's bytes;
 *  - ordering: a producer/consumer ring through mbarriers and a named
 *    barrier run clean with every check on, and dropping a wait shows a
 *    race (consumer reads before the TMA completes; a buffer refilled
 *    before the consumers released it); a wait nobody completes is a hang;
 *    the register operands of an in-flight wgmma: accumulators land at
 *    wgmma.wait_group (a read before it gets the poison), and writing them
 *    or the A fragments before that wait is a race finding;
 *    setmaxnreg is recorded.
 * Skips (77) without a C++ compiler.
 */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcir/mcir.h"
#include "emu/cuda_emu.h"
#include "test_util.h"

static char work_dir[256];

/* The probe kernels; emu_kernel dispatches on p[0][0]. */
static const char PROBE[] =
    "typedef unsigned long long u64;\n"
    "/* mode 0: one wgmma. p: mode, cfg[8] = {n, a_regs, tnsp_a, tnsp_b, bf16, scale_d, smem bytes, 0},\n"
    " * desc[2], smem image (u16), a regs [128][4], c/d [128][128] */\n"
    "static void wgmma_probe(const int* cfg, const u64* desc, const unsigned short* img, const unsigned* a,\n"
    "                        float* cd) {\n"
    "    MC_DYNAMIC_SMEM(sm);\n"
    "    unsigned short* s = (unsigned short*)sm;\n"
    "    const int t = threadIdx.x, n = cfg[0];\n"
    "    for (int i = t; i < cfg[6] / 2; i += blockDim.x) MC_SST(s[i], MC_GLD(img, i));\n"
    "    emu_fence_proxy_async();   // generic stores, read by wgmma (the async proxy)\n"
    "    __syncthreads();\n"
    "    unsigned ra[4];\n"
    "    float d[128];\n"
    "    for (int i = 0; i < 4; i++) ra[i] = MC_GLD(a, t * 4 + i);\n"
    "    for (int v = 0; v < n / 2; v++) d[v] = MC_GLD(cd, t * 128 + v);\n"
    "    emu_wgmma_fence();\n"
    "    emu_wgmma(d, n, cfg[1] ? ra : 0, desc[0], desc[1], cfg[2], cfg[3], cfg[5], cfg[4]);\n"
    "    emu_wgmma_commit();\n"
    "    emu_wgmma_wait(0);\n"
    "    for (int v = 0; v < n / 2; v++) MC_GST(cd, t * 128 + v, d[v]);\n"
    "}\n"
    "/* mode 1: one TMA load into smem, copied out. p: mode, map, out (u16), cfg = {bytes, rank, coords[5]} */\n"
    "static void tma_probe(const CUtensorMap* map, unsigned short* out, const int* cfg) {\n"
    "    MC_DYNAMIC_SMEM(sm);\n"
    "    __shared__ __align__(8) u64 bar;\n"
    "    const int t = threadIdx.x;\n"
    "    if (t == 0) emu_mbar_init(&bar, 1);\n"
    "    __syncthreads();\n"
    "    if (t == 0) {\n"
    "        int c[5];\n"
    "        for (int k = 0; k < 5; k++) c[k] = cfg[2 + k];\n"
    "        emu_mbar_arrive_expect_tx(&bar, (unsigned)cfg[0]);\n"
    "        emu_tma_load(sm, map, c, &bar);\n"
    "    }\n"
    "    emu_mbar_try_wait_parity(&bar, 0);\n"
    "    for (int i = t; i < cfg[0] / 2; i += blockDim.x) MC_GST(out, i, MC_SLD(((unsigned short*)sm)[i]));\n"
    "}\n"
    "/* mode 2: a two-stage ring, a producer warp group (warp 0 lane 0 loads rows of a [rows][64] f16\n"
    " * tensor), a consumer warp group summing each row; cfg = {rows, bug}: bug 1: consumers skip the full\n"
    " * wait, bug 2: the producer skips the empty wait, bug 3: the named-barrier handshake dropped, bug 4:\n"
    " * a wait nobody completes, bug 5: a bar.arrive nobody syncs on (pending at exit). out[0] = the sum (thread 128 after bar.sync 1, 128). */\n"
    "static void ring_probe(const CUtensorMap* map, float* out, const int* cfg) {\n"
    "    MC_DYNAMIC_SMEM(sm);\n"
    "    __shared__ __align__(8) u64 full[2], empty[2];\n"
    "    __shared__ float part[4];\n"
    "    const int t = threadIdx.x, warp = t >> 5, lane = t & 31, rows = cfg[0], bug = cfg[1];\n"
    "    if (t == 0) for (int s = 0; s < 2; s++) { emu_mbar_init(&full[s], 1); emu_mbar_init(&empty[s], 4); }\n"
    "    __syncthreads();\n"
    "    if (warp < 4) {\n"
    "        emu_setmaxnreg(false, 40);\n"
    "        if (t != 0) return;\n"
    "        for (int r = 0; r < rows; r++) {\n"
    "            const int s = r & 1;\n"
    "            if (r >= 2 && bug != 2) emu_mbar_try_wait_parity(&empty[s], ((r >> 1) - 1) & 1);\n"
    "            emu_mbar_arrive_expect_tx(&full[s], 128);\n"
    "            int c[5] = {0, r, 0, 0, 0};\n"
    "            emu_tma_load(sm + s * 1024, map, c, &full[s]);\n"
    "        }\n"
    "        if (bug == 4) emu_mbar_try_wait_parity(&full[0], 1);\n"
    "        return;\n"
    "    }\n"
    "    emu_setmaxnreg(true, 256);\n"
    "    float acc = 0.0f;\n"
    "    for (int r = 0; r < rows; r++) {\n"
    "        const int s = r & 1;\n"
    "        if (bug != 1) emu_mbar_try_wait_parity(&full[s], (r >> 1) & 1);\n"
    "        const unsigned short* x = (const unsigned short*)(sm + s * 1024);\n"
    "        float v = mc_f16_to_f32(MC_SLD(x[lane])) + mc_f16_to_f32(MC_SLD(x[lane + 32]));\n"
    "        v = mc_warp_sum(v);\n"
    "        acc += v;\n"
    "        __syncwarp();\n"
    "        if (lane == 0) emu_mbar_arrive(&empty[s]);\n"
    "    }\n"
    "    if (lane == 0) MC_SST(part[warp - 4], acc);\n"
    "    if (bug != 3) emu_bar_sync(1, 128);\n"
    "    if (bug == 5) emu_bar_arrive(2, 256);\n"
    "    if (t == 128) MC_GST(out, 0, MC_SLD(part[0]) + MC_SLD(part[1]) + MC_SLD(part[2]) + MC_SLD(part[3]));\n"
    "}\n"
    "/* mode 4: the threads write a 64 x 8 f16 box into shared memory with the 128-byte swizzle, thread 0\n"
    " * stores it with the TMA at cfg = {col, row} (clipped to the tensor). */\n"
    "static void store_probe(const CUtensorMap* map, const unsigned short* img, const int* cfg) {\n"
    "    MC_DYNAMIC_SMEM(sm);\n"
    "    const int t = threadIdx.x;\n"
    "    for (int i = t; i < 8 * 64; i += blockDim.x) {\n"
    "        const unsigned lin = (unsigned)((i / 64) * 128 + (i % 64) * 2);\n"
    "        MC_SST(*(unsigned short*)(sm + (lin ^ ((lin >> 3) & 0x70u))), MC_GLD(img, i));\n"
    "    }\n"
    "    emu_fence_proxy_async();   // read by the TMA store (the async proxy)\n"
    "    __syncthreads();\n"
    "    if (t == 0) {\n"
    "        int c[5] = {cfg[0], cfg[1], 0, 0, 0};\n"
    "        emu_tma_store(map, c, sm);\n"
    "        emu_bulk_commit();\n"
    "        emu_bulk_wait(0, false);\n"
    "    }\n"
    "}\n"
    "/* mode 3: the register operands of an in-flight wgmma (m64n8k16, B from shared memory, A from\n"
    " * registers when cfg[0] > 1). cfg[0]: 0 the accumulator read between commit and wait (the poison),\n"
    " * 1 an accumulator written then, 2 the A fragments written then, 3 nothing touched. out[t * 8 + 0]:\n"
    " * the value read before the wait (mode 0), out[t * 8 + 1]: d[0] after it. */\n"
    "static void operand_probe(const unsigned short* img, float* out, const int* cfg) {\n"
    "    MC_DYNAMIC_SMEM(sm);\n"
    "    unsigned short* s = (unsigned short*)sm;\n"
    "    const int t = threadIdx.x, bug = cfg[0];\n"
    "    for (int i = t; i < 64 * 16 + 8 * 16; i += blockDim.x) MC_SST(s[i], MC_GLD(img, i));\n"
    "    emu_fence_proxy_async();\n"
    "    __syncthreads();\n"
    "    float d[4] = {5.0f, 5.0f, 5.0f, 5.0f};\n"
    "    unsigned a[4];\n"
    "    for (int r = 0; r < 4; r++) a[r] = 0x3c003c00u;   /* f16 1.0, 1.0 */\n"
    "    /* K-major, no swizzle: core matrices of 8 rows x 16 B; A 64 x 16 at 0 (LBO 128, SBO 256), B 8 x 16 at 2048 */\n"
    "    const u64 da = (0ull) | (8ull << 16) | (16ull << 32), db = (2048ull >> 4) | (8ull << 16) | (16ull << 32);\n"
    "    emu_wgmma(d, 8, bug >= 2 ? a : 0, da, db, 0, 0, 1, 0);\n"
    "    emu_wgmma_commit();\n"
    "    if (bug == 0) MC_GST(out, t * 8 + 0, d[0]);\n"
    "    if (bug == 1) d[1] = 7.0f;\n"
    "    if (bug == 2) a[0] = 0u;\n"
    "    emu_wgmma_wait(0);\n"
    "    MC_GST(out, t * 8 + 1, d[0]);\n"
    "}\n"
    "/* mode 5: setmaxnreg in a block of 384 threads: warp group 0 gives back to cfg[0], groups 1 and 2\n"
    " * take cfg[1] (a block of 384 holds 384 x 168 registers); out[t] = t after it */\n"
    "static void regs_probe(float* out, const int* cfg) {\n"
    "    const int t = threadIdx.x;\n"
    "    if (t < 128) emu_setmaxnreg(false, cfg[0]);\n"
    "    else emu_setmaxnreg(true, cfg[1]);\n"
    "    MC_GST(out, t, (float)t);\n"
    "}\n"
    "/* mode 6: a 2-block cluster sharing a two-stage ring of [rows][64] f16 rows: block r's producer\n"
    " * (thread 0) multicasts columns 32r..32r+31 of each row into both blocks (at byte 128r of the stage), each block's consumer warps\n"
    " * sum every row and release the stage to both producers (remote arrivals), and each producer ends\n"
    " * by acquiring every stage once more (the tail: no block exits while its peer may arrive on it).\n"
    " * cfg = {rows, bug}: bug 1: consumers release their own block only (empty count 4, not 8), bug 2:\n"
    " * no producer tail, bug 3: no barrier.cluster after the init. out[block] = the block's sum. */\n"
    "static void cluster_probe(const CUtensorMap* map, float* out, const int* cfg) {\n"
    "    MC_DYNAMIC_SMEM(sm);\n"
    "    __shared__ __align__(8) u64 full[2], empty[2];\n"
    "    __shared__ float part[4];\n"
    "    const int t = threadIdx.x, warp = t >> 5, lane = t & 31, rows = cfg[0], bug = cfg[1];\n"
    "    const unsigned me = mc_cluster_rank();\n"
    "    if (t == 0) for (int s = 0; s < 2; s++) { emu_mbar_init(&full[s], 1); emu_mbar_init(&empty[s], bug == 1 ? 4 : 8); }\n"
    "    if (bug != 3) mc_cluster_sync();\n"
    "    else __syncthreads();\n"
    "    if (warp < 4) {\n"
    "        if (t != 0) return;\n"
    "        for (int r = 0; r < rows + (bug == 2 ? 0 : 2); r++) {\n"
    "            const int s = r & 1;\n"
    "            if (r >= 2) emu_mbar_try_wait_parity(&empty[s], ((r >> 1) - 1) & 1);\n"
    "            if (r >= rows) continue;   /* the tail */\n"
    "            emu_mbar_arrive_expect_tx(&full[s], 128);\n"
    "            int c[5] = {32 * (int)me, r, 0, 0, 0};\n"
    "            emu_tma_load_multicast(sm + s * 1024 + 128 * me, map, c, &full[s], 3);\n"
    "        }\n"
    "        return;\n"
    "    }\n"
    "    float acc = 0.0f;\n"
    "    for (int r = 0; r < rows; r++) {\n"
    "        const int s = r & 1;\n"
    "        emu_mbar_try_wait_parity(&full[s], (r >> 1) & 1);\n"
    "        const unsigned short* x = (const unsigned short*)(sm + s * 1024);\n"
    "        float v = mc_f16_to_f32(MC_SLD(x[lane])) + mc_f16_to_f32(MC_SLD(x[lane + 64]));   /* the halves 128 B apart */\n"
    "        v = mc_warp_sum(v);\n"
    "        acc += v;\n"
    "        __syncwarp();\n"
    "        if (lane == 0) emu_mbar_arrive_cluster(&empty[s], me);\n"
    "        if (lane == 1 && bug != 1) emu_mbar_arrive_cluster(&empty[s], me ^ 1u);\n"
    "    }\n"
    "    if (lane == 0) MC_SST(part[warp - 4], acc);\n"
    "    emu_bar_sync(1, 128);\n"
    "    if (t == 128) MC_GST(out, blockIdx.x, MC_SLD(part[0]) + MC_SLD(part[1]) + MC_SLD(part[2]) + MC_SLD(part[3]));\n"
    "}\n"
    "extern \"C\" void emu_kernel(void **p) {\n"
    "    switch (*(const int*)p[0]) {\n"
    "    case 0: wgmma_probe((const int*)p[1], (const u64*)p[2], (const unsigned short*)p[3], (const unsigned*)p[4],\n"
    "                        (float*)p[5]); break;\n"
    "    case 1: tma_probe((const CUtensorMap*)p[1], (unsigned short*)p[2], (const int*)p[3]); break;\n"
    "    case 2: ring_probe((const CUtensorMap*)p[1], (float*)p[2], (const int*)p[3]); break;\n"
    "    case 3: operand_probe((const unsigned short*)p[1], (float*)p[2], (const int*)p[3]); break;\n"
    "    case 4: store_probe((const CUtensorMap*)p[1], (const unsigned short*)p[2], (const int*)p[3]); break;\n"
    "    case 5: regs_probe((float*)p[1], (const int*)p[2]); break;\n"
    "    case 6: cluster_probe((const CUtensorMap*)p[1], (float*)p[2], (const int*)p[3]); break;\n"
    "    }\n"
    "}\n";

static void *probe_lib;
static emu_run_fn probe_run;
static void (*probe_body)(void **);

static void setup(void) {
    if (probe_lib) return;
    char cpp[600], so[600], cmd[2000];
    snprintf(cpp, sizeof cpp, "%s/probe.cpp", work_dir);
    snprintf(so, sizeof so, "%s/probe.so", work_dir);
    FILE *f = fopen(cpp, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "#include \"cuda_emu.h\"\n__device__ __forceinline__ float mc_warp_sum(float v) {\n"
               "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n    return v;\n}\n%s",
            PROBE);
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

/* ------------------------------------------------------------ data files */

static FILE *open_data(const char *name) {
    char path[600];
    snprintf(path, sizeof path, "%s/tests/data/layouts/%s", test_source_dir(), name);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    return f;
}

/* wgmma_m64nNk16.txt: A (registers) and C<N> maps */
static int a_rc[128][8][2], c_rc[3][128][64][2];   /* C64, C128 (index 1, 2) */

static void load_fragments(void) {
    FILE *f = open_data("wgmma_m64nNk16.txt");
    char line[128], op[8];
    int t, v, row, col, na = 0, nc = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        ck_assert_int_eq(sscanf(line, "%7s %d %d %d %d", op, &t, &v, &row, &col), 5);
        if (strcmp(op, "A") == 0) a_rc[t][v][0] = row, a_rc[t][v][1] = col, na++;
        else if (strcmp(op, "C64") == 0) c_rc[1][t][v][0] = row, c_rc[1][t][v][1] = col, nc++;
        else if (strcmp(op, "C128") == 0) c_rc[2][t][v][0] = row, c_rc[2][t][v][1] = col, nc++;
    }
    fclose(f);
    ck_assert_int_eq(na, 128 * 8);
    ck_assert_int_eq(nc, 128 * 32 + 128 * 64);
}

typedef struct desc_case {
    char name[32];
    int mn_major, swz, mn, start, lbo, sbo;
    int off[128][16];   /* byte offset of (mn, k) */
} desc_case;

static desc_case *cases;
static int n_cases;

static void load_desc_cases(void) {
    if (cases) return;
    FILE *f = open_data("gmma_smem_desc.txt");
    char line[160];
    cases = calloc(64, sizeof *cases);
    desc_case *c = NULL;
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        if (strncmp(line, "case ", 5) == 0) {
            if (c) ck_assert_int_eq(lines, c->mn * 16);
            ck_assert_int_lt(n_cases, 64);
            c = &cases[n_cases++];
            char major[4];
            ck_assert_int_eq(sscanf(line + 5, "%31s %3s %d %d %d %d %d", c->name, major, &c->swz, &c->mn, &c->start,
                                    &c->lbo, &c->sbo), 7);
            c->mn_major = strcmp(major, "MN") == 0;
            ck_assert(c->mn == 64 || c->mn == 128);
            lines = 0;
            continue;
        }
        int r, k, b;
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(sscanf(line, "%d %d %d", &r, &k, &b), 3);
        ck_assert(r >= 0 && r < c->mn && k >= 0 && k < 16 && b >= 0 && b < 32768);
        c->off[r][k] = b;
        lines++;
    }
    fclose(f);
    ck_assert_int_eq(lines, c->mn * 16);
    ck_assert_int_ge(n_cases, 20);
}

/* The descriptor, bit by bit as CuTe's GmmaDescriptor bitfield lays it out
 * (mma_sm90_desc.hpp): start >> 4 at 0, LBO >> 4 at 16, SBO >> 4 at 32,
 * layout type at 62 (B128 1, B64 2, B32 3). */
static uint64_t make_desc(const desc_case *c, int at) {
    uint64_t lay = c->swz == 128 ? 1 : c->swz == 64 ? 2 : c->swz == 32 ? 3 : 0;
    return (uint64_t)((unsigned)(c->start + at) >> 4) | ((uint64_t)(c->lbo >> 4) << 16) |
           ((uint64_t)(c->sbo >> 4) << 32) | (lay << 62);
}

static uint16_t to16(float x, int bf16) { return bf16 ? mcir_f32_to_bf16(x) : mcir_f32_to_f16(x); }

static unsigned lcg = 2024;
static float small_int(int range) { return (float)((int)((lcg = lcg * 1103515245u + 12345u) >> 16) % range - range / 2); }

/* Runs D = A B + C with B from case bc (N = bc->mn) and A from registers
 * (ac NULL) or from shared memory laid out as case ac (64 rows) at 16 KiB. */
static int run_wgmma_case(const desc_case *bc, const desc_case *ac, int bf16) {
    enum { IMG = 48 * 1024, A_AT = 32 * 1024 };
    static unsigned short img[IMG / 2];
    static unsigned ra[128 * 4];
    static float cd[128 * 128];
    static float A[64][16], B[16][128], C[64][128];
    int n = bc->mn, ci = n == 64 ? 1 : 2;
    for (int m = 0; m < 64; m++)
        for (int k = 0; k < 16; k++) A[m][k] = small_int(16);
    for (int k = 0; k < 16; k++)
        for (int j = 0; j < n; j++) B[k][j] = small_int(16);
    for (int m = 0; m < 64; m++)
        for (int j = 0; j < n; j++) C[m][j] = small_int(64);
    memset(img, 0xff, sizeof img);   /* NaN where the operand is not */
    for (int j = 0; j < n; j++)
        for (int k = 0; k < 16; k++) img[bc->off[j][k] / 2] = to16(B[k][j], bf16);
    if (ac)
        for (int m = 0; m < 64; m++)
            for (int k = 0; k < 16; k++) img[(A_AT + ac->off[m][k]) / 2] = to16(A[m][k], bf16);
    memset(ra, 0, sizeof ra);
    for (int t = 0; t < 128; t++) {
        for (int v = 0; v < 8; v++) ra[t * 4 + v / 2] |= (unsigned)to16(A[a_rc[t][v][0]][a_rc[t][v][1]], bf16) << (16 * (v % 2));
        for (int v = 0; v < n / 2; v++) cd[t * 128 + v] = C[c_rc[ci][t][v][0]][c_rc[ci][t][v][1]];
    }
    int mode = 0, cfg[8] = {n, ac == NULL, ac ? ac->mn_major : 0, bc->mn_major, bf16, 1, IMG, 0};
    uint64_t desc[2] = {ac ? make_desc(ac, A_AT) : 0, make_desc(bc, 0)};
    emu_buffer bufs[6] = {{"mode", (unsigned char *)&mode, sizeof mode, NULL},
                          {"cfg", (unsigned char *)cfg, sizeof cfg, NULL},
                          {"desc", (unsigned char *)desc, sizeof desc, NULL},
                          {"img", (unsigned char *)img, sizeof img, NULL},
                          {"a", (unsigned char *)ra, sizeof ra, NULL},
                          {"cd", (unsigned char *)cd, sizeof cd, NULL}};
    void *args[6] = {&mode, cfg, desc, img, ra, cd};
    emu_launch L = {.kernel = "wgmma_probe", .body = probe_body, .args = args, .n_args = 6, .grid = 1,
                    .block = 128, .smem = IMG, .write_args = 1ull << 5, .buffers = bufs, .n_buffers = 6,
                    .checks = EMU_CHECK_ALL};
    ck_assert_int_eq(probe_run(&L), 0);
    ck_assert_int_eq(L.stats.wgmma, 1);
    int bad = 0;
    for (int t = 0; t < 128; t++)
        for (int v = 0; v < n / 2; v++) {
            int m = c_rc[ci][t][v][0], j = c_rc[ci][t][v][1];
            float want = C[m][j];
            for (int k = 0; k < 16; k++) want += A[m][k] * B[k][j];
            if (cd[t * 128 + v] != want && bad++ < 3)
                fprintf(stderr, "  %s%s%s %s: D[%d][%d] = %g, A B + C = %g\n", ac ? ac->name : "regs", " x ",
                        bc->name, bf16 ? "bf16" : "f16", m, j, cd[t * 128 + v], want);
        }
    return bad;
}

START_TEST(test_wgmma_shared_b_matches_cute_layouts) {
    setup();
    load_fragments();
    load_desc_cases();
    int bad = 0;
    for (int i = 0; i < n_cases; i++)
        for (int bf = 0; bf < 2; bf++) bad += run_wgmma_case(&cases[i], NULL, bf) != 0;
    fprintf(stderr, "  wgmma RS: %d descriptor cases x f16/bf16, %d wrong\n", n_cases, bad);
    ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(test_wgmma_shared_a_matches_cute_layouts) {
    setup();
    load_fragments();
    load_desc_cases();
    int bad = 0, runs = 0;
    const desc_case *b128 = NULL;
    for (int i = 0; i < n_cases; i++)
        if (strcmp(cases[i].name, "k_sw128") == 0) b128 = &cases[i];
    ck_assert_ptr_nonnull(b128);
    int mn_sw128 = 0;   /* the GEMM's transposed A: MN-major, 128-byte swizzle (tnspA) */
    for (int i = 0; i < n_cases; i++)
        if (cases[i].mn == 64) {
            bad += run_wgmma_case(b128, &cases[i], runs & 1) != 0;
            runs++;
            if (cases[i].mn_major && cases[i].swz == 128) {
                bad += run_wgmma_case(b128, &cases[i], !(runs & 1)) != 0;
                mn_sw128++;
            }
        }
    fprintf(stderr, "  wgmma SS: %d A-operand cases (%d MN-major 128B, both dtypes), %d wrong\n", runs, mn_sw128, bad);
    ck_assert_int_ge(runs, 10);
    ck_assert_int_ge(mn_sw128, 4);
    ck_assert_int_eq(bad, 0);
}
END_TEST

/* ------------------------------------------------------------ TMA */

static const unsigned char NOT_WRITTEN = 0xab;

START_TEST(test_tma_box_matches_driver_rules) {
    setup();
    FILE *f = open_data("tma_box.txt");
    char line[200];
    int n_case = 0, bad = 0;
    static unsigned short global[64 * 1024], out[16 * 1024];
    static unsigned char want_oob[32 * 1024];
    static int want_rc[16 * 1024][2], seen;
    char name[40] = "";
    int w = 0, h = 0, rs = 0, b0 = 0, b1 = 0, es1 = 1, swz = 0, c0 = 0, c1 = 0, slots = 0;
    for (;;) {
        char *got = fgets(line, sizeof line, f);
        if (got && (line[0] == '#' || line[0] == '\n')) continue;
        if (!got || strncmp(line, "case ", 5) == 0) {
            if (name[0]) {
                /* run the case twice: zero fill, then NaN fill */
                for (int nanfill = 0; nanfill < 2; nanfill++) {
                    int bytes = b0 * ((b1 + es1 - 1) / es1) * 2;
                    ck_assert_int_eq(slots, bytes / 2);
                    for (int r = 0; r < h; r++)
                        for (int c = 0; c < rs / 2; c++) global[r * (rs / 2) + c] = (unsigned short)(c < w ? r * w + c + 1 : 0xffff);
                    unsigned char map[128] __attribute__((aligned(64)));
                    unsigned long long dims[2] = {(unsigned long long)w, (unsigned long long)h},
                                       strides[1] = {(unsigned long long)rs};
                    unsigned box[2] = {(unsigned)b0, (unsigned)b1}, est[2] = {1, (unsigned)es1};
                    ck_assert_int_eq(emu_tensor_map_encode_tiled(map, 6, 2, global, dims, strides, box, est, 0,
                                                                 swz == 128 ? 3 : swz == 64 ? 2 : swz == 32 ? 1 : 0, 2,
                                                                 nanfill), 0);
                    int mode = 1, cfg[7] = {bytes, 2, c0, c1, 0, 0, 0};
                    memset(out, NOT_WRITTEN, sizeof out);
                    emu_buffer bufs[4] = {{"mode", (unsigned char *)&mode, sizeof mode, NULL},
                                          {"map", map, sizeof map, NULL},
                                          {"out", (unsigned char *)out, (size_t)bytes, NULL},
                                          {"cfg", (unsigned char *)cfg, sizeof cfg, NULL}};
                    emu_buffer gb = {"global", (unsigned char *)global, (size_t)rs * (size_t)h, NULL};
                    emu_buffer all[5] = {bufs[0], bufs[1], bufs[2], bufs[3], gb};
                    void *args[4] = {&mode, map, out, cfg};
                    emu_launch L = {.kernel = "tma_probe", .body = probe_body, .args = args, .n_args = 4, .grid = 1,
                                    .block = 64, .smem = 32 * 1024, .write_args = 1ull << 2, .buffers = all,
                                    .n_buffers = 5, .checks = EMU_CHECK_ALL};
                    int rc = probe_run(&L);
                    if (rc != 0) bad++, fprintf(stderr, "  tma %s: emulator findings\n", name);
                    ck_assert_int_eq(L.stats.tma_loads, 1);
                    ck_assert_int_eq(L.stats.tma_bytes, bytes);
                    for (int s = 0; s < bytes / 2; s++) {
                        unsigned short want = want_oob[s] ? (nanfill ? 0xffff : 0)
                                                          : (unsigned short)(want_rc[s][0] * w + want_rc[s][1] + 1);
                        if (out[s] != want && bad++ < 6)
                            fprintf(stderr, "  tma %s%s: byte %d holds %u, want %u\n", name, nanfill ? " (nan fill)" : "",
                                    2 * s, out[s], want);
                    }
                }
                n_case++;
            }
            if (!got) break;
            ck_assert_int_eq(sscanf(line + 5, "%39s %d %d %d %d %d %d %d %d %d", name, &w, &h, &rs, &b0, &b1, &es1, &swz,
                                    &c0, &c1), 10);
            ck_assert(rs / 2 * h <= 64 * 1024);
            slots = 0;
            memset(want_oob, 0, sizeof want_oob);
            continue;
        }
        int byte, r, c;
        char word[8];
        if (sscanf(line, "%d %7s", &byte, word) == 2 && strcmp(word, "oob") == 0) {
            ck_assert(byte % 2 == 0 && byte < 32 * 1024);
            want_oob[byte / 2] = 1;
        } else {
            ck_assert_int_eq(sscanf(line, "%d %d %d", &byte, &r, &c), 3);
            ck_assert(byte % 2 == 0 && byte < 32 * 1024);
            want_rc[byte / 2][0] = r, want_rc[byte / 2][1] = c;
        }
        slots++;
    }
    fclose(f);
    (void)seen;
    fprintf(stderr, "  tma: %d cases x zero/NaN fill, %d wrong\n", n_case, bad);
    ck_assert_int_ge(n_case, 6);
    ck_assert_int_eq(bad, 0);
}
END_TEST

/* ------------------------------------------------------------ ordering */

typedef struct ring_result { int rc, findings[EMU_FIND_KINDS], maxnreg[2]; float sum, want; } ring_result;

static ring_result run_ring(int bug) {
    enum { ROWS = 6 };
    static unsigned short x[ROWS * 64];
    float want = 0.0f;
    for (int i = 0; i < ROWS * 64; i++) {
        float v = (float)(i % 7 - 3);
        x[i] = mcir_f32_to_f16(v);
        want += v;
    }
    unsigned char map[128] __attribute__((aligned(64)));
    unsigned long long dims[2] = {64, ROWS}, strides[1] = {128};
    unsigned box[2] = {64, 1}, est[2] = {1, 1};
    ck_assert_int_eq(emu_tensor_map_encode_tiled(map, 6, 2, x, dims, strides, box, est, 0, 0, 2, 0), 0);
    float out = 0.0f;
    int mode = 2, cfg[2] = {ROWS, bug};
    emu_buffer bufs[5] = {{"mode", (unsigned char *)&mode, sizeof mode, NULL}, {"map", map, sizeof map, NULL},
                          {"out", (unsigned char *)&out, sizeof out, NULL},
                          {"cfg", (unsigned char *)cfg, sizeof cfg, NULL},
                          {"x", (unsigned char *)x, sizeof x, NULL}};
    void *args[4] = {&mode, map, &out, cfg};
    emu_launch L = {.kernel = "ring_probe", .body = probe_body, .args = args, .n_args = 4, .grid = 1, .block = 256,
                    .smem = 2048, .write_args = 1ull << 2, .buffers = bufs, .n_buffers = 5, .checks = EMU_CHECK_ALL};
    ring_result r = {.rc = probe_run(&L), .sum = out, .want = 4 * want};   /* each consumer warp sums every row */
    memcpy(r.findings, L.findings, sizeof r.findings);
    r.maxnreg[0] = L.stats.maxnreg[0];
    r.maxnreg[1] = L.stats.maxnreg[1];
    return r;
}

/* A ring shared by a 2-block cluster: multicast copies, remote releases,
 * the producers' tail (cluster_probe) */
typedef struct cluster_result {
    int rc, findings[EMU_FIND_KINDS];
    float sum[4], want;
    unsigned long long multicasts, remote_arrives, tma_loads;
    char messages[2048];
} cluster_result;

static cluster_result run_cluster(int bug) {
    enum { ROWS = 7 };
    static unsigned short x[ROWS * 64];
    float want = 0.0f;
    for (int i = 0; i < ROWS * 64; i++) {
        float v = (float)(i % 11 - 5) + 0.25f * (float)(i % 3);
        x[i] = mcir_f32_to_f16(v);
        want += v;
    }
    unsigned char map[128] __attribute__((aligned(64)));
    unsigned long long dims[2] = {64, ROWS}, strides[1] = {128};
    unsigned box[2] = {32, 1}, est[2] = {1, 1};
    ck_assert_int_eq(emu_tensor_map_encode_tiled(map, 6, 2, x, dims, strides, box, est, 0, 0, 2, 0), 0);
    float out[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int mode = 6, cfg[2] = {ROWS, bug};
    emu_buffer bufs[5] = {{"mode", (unsigned char *)&mode, sizeof mode, NULL}, {"map", map, sizeof map, NULL},
                          {"out", (unsigned char *)out, sizeof out, NULL},
                          {"cfg", (unsigned char *)cfg, sizeof cfg, NULL},
                          {"x", (unsigned char *)x, sizeof x, NULL}};
    void *args[4] = {&mode, map, out, cfg};
    static cluster_result r;
    memset(&r, 0, sizeof r);
    emu_launch L = {.kernel = "cluster_probe", .body = probe_body, .args = args, .n_args = 4, .grid = 4, .block = 256,
                    .smem = 2048, .cluster = 2, .write_args = 1ull << 2, .buffers = bufs, .n_buffers = 5,
                    .checks = EMU_CHECK_ALL, .quiet = 1, .messages = r.messages, .messages_size = sizeof r.messages};
    r.rc = probe_run(&L);
    memcpy(r.findings, L.findings, sizeof r.findings);
    memcpy(r.sum, out, sizeof out);
    r.want = 4 * want;   /* each consumer warp sums every row */
    r.multicasts = L.stats.tma_multicasts;
    r.remote_arrives = L.stats.remote_arrives;
    r.tma_loads = L.stats.tma_loads;
    return r;
}

START_TEST(test_cluster_multicast_ring) {
    setup();
    cluster_result r = run_cluster(0);
    ck_assert_msg(r.rc == 0, "clean cluster ring: %s", r.messages);
    for (int b = 0; b < 4; b++) ck_assert_float_eq(r.sum[b], r.want);
    /* 2 clusters: per block 7 multicasts into 2 blocks, 4 warps x 7 remote releases */
    ck_assert_int_eq(r.multicasts, 2 * 2 * 7);
    ck_assert_int_eq(r.tma_loads, 2 * 2 * 7 * 2);
    ck_assert_int_eq(r.remote_arrives, 2 * 2 * 4 * 7);
    /* a consumer that releases its own block only: the peer's producer overwrites a stage this
     * block still reads (or has read, unordered): a race */
    r = run_cluster(1);
    fprintf(stderr, "  release to one block only: %s", r.messages);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_int_gt(r.findings[EMU_FIND_RACE], 0);
    ck_assert_ptr_nonnull(strstr(r.messages, "the TMA unit"));
    /* no producer tail: a block exits while its peer's consumers still arrive on it */
    r = run_cluster(2);
    fprintf(stderr, "  no producer tail: %s", r.messages);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_ptr_nonnull(strstr(r.messages, "which has exited"));
    /* no barrier.cluster after the init: a copy completes on a peer's mbarrier not yet initialised */
    r = run_cluster(3);
    fprintf(stderr, "  no cluster barrier after the init: %s", r.messages);
    ck_assert_int_ne(r.rc, 0);
    ck_assert_int_gt(r.findings[EMU_FIND_INIT], 0);
    ck_assert_ptr_nonnull(strstr(r.messages, "never initialised"));
}
END_TEST

START_TEST(test_ring_through_mbarriers_is_clean) {
    setup();
    ring_result r = run_ring(0);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_float_eq(r.sum, r.want);
    ck_assert_int_eq(r.maxnreg[0], -40);
    ck_assert_int_eq(r.maxnreg[1], 256);
}
END_TEST

/* setmaxnreg shares out what a block holds at entry (384 x 168): FA3's
 * 24 / 240 and the GEMM's 40 / 232 fit exactly; 32 / 240 asks for 1024
 * more, and its inc waits forever (what hung the masked attention kernel
 * on an H200); an inc below the entry count is refused */
static int run_regs(int producer, int consumer, int findings[EMU_FIND_KINDS]) {
    static float out[384];
    int mode = 5, cfg[2] = {producer, consumer};
    emu_buffer bufs[3] = {{"mode", (unsigned char *)&mode, sizeof mode, NULL},
                          {"out", (unsigned char *)out, sizeof out, NULL},
                          {"cfg", (unsigned char *)cfg, sizeof cfg, NULL}};
    void *args[3] = {&mode, out, cfg};
    emu_launch L = {.kernel = "regs_probe", .body = probe_body, .args = args, .n_args = 3, .grid = 1, .block = 384,
                    .write_args = 1ull << 1, .buffers = bufs, .n_buffers = 3, .checks = EMU_CHECK_ALL};
    int rc = probe_run(&L);
    memcpy(findings, L.findings, sizeof L.findings);
    return rc;
}

START_TEST(test_setmaxnreg_within_the_block) {
    setup();
    int f[EMU_FIND_KINDS];
    ck_assert_int_eq(run_regs(24, 240, f), 0);
    ck_assert_int_eq(run_regs(40, 232, f), 0);
    ck_assert_int_ne(run_regs(32, 240, f), 0);
    ck_assert_int_gt(f[EMU_FIND_HANG], 0);
    ck_assert_int_ne(run_regs(24, 160, f), 0);   /* an inc below the 168 held */
    ck_assert_int_gt(f[EMU_FIND_BOUNDS], 0);
}
END_TEST

START_TEST(test_dropped_waits_are_found) {
    setup();
    static const char *const what[] = {"", "consumers skip the full wait", "producer skips the empty wait",
                                       "named barrier dropped", "a wait nobody completes",
                                       "a bar.arrive left pending"};
    for (int bug = 1; bug <= 5; bug++) {
        ring_result r = run_ring(bug);
        fprintf(stderr, "  ring, %s: %d races, %d hangs\n", what[bug], r.findings[EMU_FIND_RACE],
                r.findings[EMU_FIND_HANG]);
        ck_assert_int_ne(r.rc, 0);
        if (bug < 4) ck_assert_int_gt(r.findings[EMU_FIND_RACE], 0);
        else ck_assert_int_gt(r.findings[EMU_FIND_HANG], 0);
    }
}
END_TEST

/* The register operands of an in-flight wgmma: its accumulators land at
 * wgmma.wait_group (read before: the poison, a NaN), writing them or the A
 * fragments before that wait is a race finding. */
START_TEST(test_register_operands_belong_to_the_wgmma) {
    setup();
    static unsigned short img[64 * 16 + 8 * 16];
    static float out[128 * 8];
    for (size_t i = 0; i < sizeof img / sizeof *img; i++) img[i] = mcir_f32_to_f16(1.0f);
    for (int bug = 0; bug <= 3; bug++) {
        int mode = 3, cfg[1] = {bug};
        memset(out, 0, sizeof out);
        emu_buffer bufs[4] = {{"mode", (unsigned char *)&mode, sizeof mode, NULL},
                              {"img", (unsigned char *)img, sizeof img, NULL},
                              {"out", (unsigned char *)out, sizeof out, NULL},
                              {"cfg", (unsigned char *)cfg, sizeof cfg, NULL}};
        void *args[4] = {&mode, img, out, cfg};
        emu_launch L = {.kernel = "operand_probe", .body = probe_body, .args = args, .n_args = 4, .grid = 1,
                        .block = 128, .smem = 4096, .write_args = 1ull << 2, .buffers = bufs, .n_buffers = 4,
                        .checks = EMU_CHECK_ALL};
        int rc = probe_run(&L);
        fprintf(stderr, "  in-flight operands, case %d: rc %d, %d races\n", bug, rc, L.findings[EMU_FIND_RACE]);
        if (bug == 1 || bug == 2) {   /* written while in flight */
            ck_assert_int_ne(rc, 0);
            ck_assert_int_gt(L.findings[EMU_FIND_RACE], 0);
            continue;
        }
        ck_assert_int_eq(rc, 0);
        for (int t = 0; t < 128; t++) {
            if (bug == 0) ck_assert(isnan(out[t * 8 + 0]));   /* read before the wait: the poison */
            ck_assert_float_eq(out[t * 8 + 1], 21.0f);   /* after: C + 16 (1 x 1 over k = 16) */
        }
    }
}
END_TEST

/* cp.async.bulk.tensor store: a 64 x 8 box of f16 (128-byte swizzle, as
 * the threads wrote it into shared memory) stored at row -2 of a 64 x 5
 * tensor whose buffer has 8 rows: box rows 2..6 land in rows 0..4, box
 * rows 0, 1 and 7 fall outside the tensor and are not written (the
 * buffer's rows 5..7 keep their bytes, no bounds finding). */
START_TEST(test_tma_store_clips_the_box) {
    setup();
    static unsigned short img[8 * 64], dst[8 * 64];
    for (int i = 0; i < 8 * 64; i++) img[i] = mcir_f32_to_f16((float)(i % 61) - 30.0f);
    for (int i = 0; i < 8 * 64; i++) dst[i] = 0x7777;
    unsigned char map[128] __attribute__((aligned(64)));
    unsigned long long dims[2] = {64, 5}, strides[1] = {128};
    unsigned box[2] = {64, 8}, est[2] = {1, 1};
    ck_assert_int_eq(emu_tensor_map_encode_tiled(map, 6, 2, dst, dims, strides, box, est, 0, 3, 2, 0), 0);
    int mode = 4, cfg[2] = {0, -2};
    emu_buffer bufs[5] = {{"mode", (unsigned char *)&mode, sizeof mode, NULL}, {"map", map, sizeof map, NULL},
                          {"img", (unsigned char *)img, sizeof img, NULL},
                          {"cfg", (unsigned char *)cfg, sizeof cfg, NULL},
                          {"dst", (unsigned char *)dst, sizeof dst, NULL}};
    void *args[4] = {&mode, map, img, cfg};
    emu_launch L = {.kernel = "store_probe", .body = probe_body, .args = args, .n_args = 4, .grid = 1, .block = 128,
                    .smem = 1024, .buffers = bufs, .n_buffers = 5, .checks = EMU_CHECK_ALL};
    ck_assert_int_eq(probe_run(&L), 0);
    ck_assert_int_eq(L.stats.tma_stores, 1);
    ck_assert_int_eq(L.stats.tma_store_bytes, 5 * 64 * 2);
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 64; c++)
            ck_assert_uint_eq(dst[r * 64 + c], r < 5 ? img[(r + 2) * 64 + c] : 0x7777);
}
END_TEST

int main(void) {
    if (!test_have_cxx()) return test_skip("no C++ compiler for the kernel emulator");
    if (!test_tempdir("sm90", work_dir, sizeof work_dir)) return 1;
    Suite *s = suite_create("sm90_emu");
    TCase *tc = tcase_create("sm90");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_wgmma_shared_b_matches_cute_layouts);
    tcase_add_test(tc, test_wgmma_shared_a_matches_cute_layouts);
    tcase_add_test(tc, test_tma_box_matches_driver_rules);
    tcase_add_test(tc, test_ring_through_mbarriers_is_clean);
    tcase_add_test(tc, test_cluster_multicast_ring);
    tcase_add_test(tc, test_dropped_waits_are_found);
    tcase_add_test(tc, test_setmaxnreg_within_the_block);
    tcase_add_test(tc, test_register_operands_belong_to_the_wgmma);
    tcase_add_test(tc, test_tma_store_clips_the_box);
    suite_add_tcase(s, tc);
    int failed = test_main_nofork(s);
    if (probe_lib) dlclose(probe_lib);
    free(cases);
    test_remove_dir(work_dir);
    return failed;
}
