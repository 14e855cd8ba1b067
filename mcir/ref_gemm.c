/*
 * ref_gemm.c — the f32 GEMM under the reference matmul, conv2d and
 * attention kernels: GotoBLAS-style blocking (B packed into KC×NR strips,
 * A into MC×KC blocks of MR-row strips) around a 6×16 register-tiled
 * micro-kernel written with GCC vector extensions.
 *
 * The micro-kernel is compiled twice: for baseline x86-64 and with AVX2
 * (selected at run time, so the binary runs on any x86-64). Neither uses
 * FMA and both vectorise across columns only, so every C element is summed
 * in the same order (p = 0..K-1 within KC blocks, blocks added in order):
 * results are bit-identical across machines, ISAs and thread counts.
 */
#include <stdlib.h>
#include <string.h>

#include "interp-impl.h"

#define MR 6
#define NR 16
#define MC 96   /* rows of A per packed block (multiple of MR) */
#define KC 256  /* depth of a packed block */
#define NC 2048 /* columns of B per packed panel (multiple of NR) */

typedef float v8sf __attribute__((vector_size(32)));
typedef float v8sf_u __attribute__((vector_size(32), aligned(4), may_alias));

/* C[mr, nr] (+)= Apack[MR, kc] · Bpack[kc, NR]; pa is p-major (MR floats
 * per p), pb is p-major (NR floats per p). */
static inline __attribute__((always_inline)) void
ukernel_body(int64_t kc, const float *restrict pa, const float *restrict pb,
             float *c, int64_t ldc, int mr, int nr, bool acc) {
    v8sf c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
    v8sf c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
    for (int64_t p = 0; p < kc; p++) {
        const v8sf b0 = *(const v8sf *)(pb + p * NR);
        const v8sf b1 = *(const v8sf *)(pb + p * NR + 8);
        const float *a = pa + p * MR;
        /* One row at a time keeps 12 accumulators + 2 B vectors + 1 A
         * broadcast + 1 product in the 16 vector registers (no spills). */
#define ROW(r)                                                  \
    do {                                                        \
        const float x = a[r];                                   \
        const v8sf av = {x, x, x, x, x, x, x, x};               \
        c##r##0 += av * b0;                                     \
        c##r##1 += av * b1;                                     \
    } while (0)
        ROW(0);
        ROW(1);
        ROW(2);
        ROW(3);
        ROW(4);
        ROW(5);
#undef ROW
    }
    v8sf rows[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                        {c30, c31}, {c40, c41}, {c50, c51}};
    if (mr == MR && nr == NR) {
        for (int i = 0; i < MR; i++) {
            v8sf_u *cp = (v8sf_u *)(c + i * ldc);
            v8sf_u *cq = (v8sf_u *)(c + i * ldc + 8);
            if (acc) {
                *cp = *cp + rows[i][0];
                *cq = *cq + rows[i][1];
            } else {
                *cp = rows[i][0];
                *cq = rows[i][1];
            }
        }
        return;
    }
    float tile[MR][NR];
    memcpy(tile, rows, sizeof tile);
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            c[i * ldc + j] = acc ? c[i * ldc + j] + tile[i][j] : tile[i][j];
}

typedef void (*ukernel_fn)(int64_t, const float *, const float *, float *, int64_t,
                           int, int, bool);

/* Baseline (SSE2) version: 16 xmm registers cannot hold a 6x16 tile, so
 * the strip is done as two 6x8 halves; each element is still summed over
 * p = 0..kc-1 in order, as in ukernel_body. */
typedef float v4sf __attribute__((vector_size(16)));

static void ukernel_generic(int64_t kc, const float *pa, const float *pb, float *c,
                            int64_t ldc, int mr, int nr, bool acc) {
    float tile[MR][NR];
    for (int h = 0; h < 2; h++) {
        v4sf c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
        v4sf c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
        for (int64_t p = 0; p < kc; p++) {
            const v4sf b0 = *(const v4sf *)(pb + p * NR + 8 * h);
            const v4sf b1 = *(const v4sf *)(pb + p * NR + 8 * h + 4);
            const float *a = pa + p * MR;
#define ROW(r)                                                  \
    do {                                                        \
        const float x = a[r];                                   \
        const v4sf av = {x, x, x, x};                           \
        c##r##0 += av * b0;                                     \
        c##r##1 += av * b1;                                     \
    } while (0)
            ROW(0);
            ROW(1);
            ROW(2);
            ROW(3);
            ROW(4);
            ROW(5);
#undef ROW
        }
        v4sf rows[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                            {c30, c31}, {c40, c41}, {c50, c51}};
        for (int i = 0; i < MR; i++) memcpy(&tile[i][8 * h], rows[i], sizeof rows[i]);
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            c[i * ldc + j] = acc ? c[i * ldc + j] + tile[i][j] : tile[i][j];
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) static void
ukernel_avx2(int64_t kc, const float *pa, const float *pb, float *c, int64_t ldc,
             int mr, int nr, bool acc) {
    ukernel_body(kc, pa, pb, c, ldc, mr, nr, acc);
}
#endif

static bool force_generic;

void mcir_sgemm_force_baseline(bool on) { __atomic_store_n(&force_generic, on, __ATOMIC_RELAXED); }

static ukernel_fn pick_ukernel(void) {
    if (__atomic_load_n(&force_generic, __ATOMIC_RELAXED)) return ukernel_generic;
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx2")) return ukernel_avx2;
#endif
    return ukernel_generic;
}

/* Packs rows [0, mc) x depth [0, kc) of A into MR-row strips, zero-padded. */
static void pack_a(int64_t mc, int64_t kc, const float *a, int64_t rsa, int64_t csa,
                   float *pa) {
    for (int64_t i0 = 0; i0 < mc; i0 += MR) {
        int mr = (int)(mc - i0 < MR ? mc - i0 : MR);
        float *dst = pa + i0 * kc;
        if (csa == 1) {
            for (int i = 0; i < MR; i++) {
                const float *src = a + (i0 + i) * rsa;
                if (i < mr)
                    for (int64_t p = 0; p < kc; p++) dst[p * MR + i] = src[p];
                else
                    for (int64_t p = 0; p < kc; p++) dst[p * MR + i] = 0.0f;
            }
        } else {
            for (int64_t p = 0; p < kc; p++)
                for (int i = 0; i < MR; i++)
                    dst[p * MR + i] = i < mr ? a[(i0 + i) * rsa + p * csa] : 0.0f;
        }
    }
}

/* Packs depth [0, kc) x columns [0, nc) of B into NR-column strips. */
static void pack_b(int64_t kc, int64_t nc, const float *b, int64_t rsb, int64_t csb,
                   float *pb) {
    for (int64_t j0 = 0; j0 < nc; j0 += NR) {
        int nr = (int)(nc - j0 < NR ? nc - j0 : NR);
        float *dst = pb + j0 * kc;
        if (csb == 1 && nr == NR) {
            for (int64_t p = 0; p < kc; p++)
                memcpy(dst + p * NR, b + p * rsb + j0, NR * sizeof(float));
        } else if (rsb == 1) {
            for (int j = 0; j < NR; j++) {
                const float *src = b + (j0 + j) * csb;
                if (j < nr)
                    for (int64_t p = 0; p < kc; p++) dst[p * NR + j] = src[p];
                else
                    for (int64_t p = 0; p < kc; p++) dst[p * NR + j] = 0.0f;
            }
        } else {
            for (int64_t p = 0; p < kc; p++)
                for (int j = 0; j < NR; j++)
                    dst[p * NR + j] = j < nr ? b[p * rsb + (j0 + j) * csb] : 0.0f;
        }
    }
}

static void *alloc_aligned(size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes ? bytes : 64);
    MCIR_ASSERT(p);
    return p;
}

void mcir_sgemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa,
                int64_t csa, const float *b, int64_t rsb, int64_t csb, float *c,
                int64_t ldc, bool accumulate) {
    ukernel_fn ukernel = pick_ukernel(); /* a few instructions once per call */
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        if (!accumulate)
            for (int64_t i = 0; i < m; i++) memset(c + i * ldc, 0, sizeof(float) * (size_t)n);
        return;
    }
    int64_t kc_max = k < KC ? k : KC;
    int64_t nc_max = n < NC ? (n + NR - 1) / NR * NR : NC;
    int64_t mc_max = m < MC ? (m + MR - 1) / MR * MR : MC;
    float *pb = alloc_aligned(sizeof(float) * (size_t)(kc_max * nc_max));
    float *pa = alloc_aligned(sizeof(float) * (size_t)(kc_max * mc_max));
    for (int64_t jc = 0; jc < n; jc += NC) {
        int64_t nc = n - jc < NC ? n - jc : NC;
        for (int64_t pc = 0; pc < k; pc += KC) {
            int64_t kc = k - pc < KC ? k - pc : KC;
            bool acc = accumulate || pc > 0;
            pack_b(kc, nc, b + pc * rsb + jc * csb, rsb, csb, pb);
            for (int64_t ic = 0; ic < m; ic += MC) {
                int64_t mc = m - ic < MC ? m - ic : MC;
                pack_a(mc, kc, a + ic * rsa + pc * csa, rsa, csa, pa);
                for (int64_t jr = 0; jr < nc; jr += NR) {
                    int nr = (int)(nc - jr < NR ? nc - jr : NR);
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        int mr = (int)(mc - ir < MR ? mc - ir : MR);
                        ukernel(kc, pa + ir * kc, pb + jr * kc,
                                c + (ic + ir) * ldc + jc + jr, ldc, mr, nr, acc);
                    }
                }
            }
        }
    }
    free(pa);
    free(pb);
}
