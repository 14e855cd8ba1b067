// cuda_emu.h — a small CPU emulator for the generated kernels, so their
// index math, bounds checks, barriers and reductions are executed (and
// checked against the reference interpreter) on machines without a GPU.
//
// Each CUDA thread of a block is a coroutine (ucontext) on one OS thread;
// __syncthreads parks a thread until every live thread of the block arrives;
// warp shuffles and the mma.sync emulation park until all 32 lanes of the
// warp arrive (a divergent shuffle or barrier is reported as a deadlock).
// __shared__ variables become statics (blocks run one after another).
// emu_mma_m16n8k16 implements the PTX fragment layouts of
// mma.m16n8k16.row.col (A: a0..a3 rows g/g+8, cols 2t(+1)/2t+8(+1);
// B: rows 2t(+1)/2t+8(+1), col g; C: rows g/g+8, cols 2t(+1)).
// Only what the mcir templates use is provided. Compiled as C++ by the
// test with MC_EMULATE defined before the generated source.
#ifndef MCIR_CUDA_EMU_H
#define MCIR_CUDA_EMU_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ucontext.h>

#define MC_EMULATE 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define MC_DYNAMIC_SMEM(name) unsigned char *name = emu_dyn_smem

struct emu_dim3 { unsigned x, y, z; };
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
struct float4 { float x, y, z, w; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }

static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __int_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
#define __expf expf

/* IEEE half / bfloat16 conversions, round to nearest even. */
static inline float mc_f16_to_f32(unsigned short h) {
    unsigned s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023, u;
    if (e == 0) {
        if (m == 0) u = s << 31;
        else {
            int ex = -1;
            do { ex++; m <<= 1; } while (!(m & 1024));
            u = (s << 31) | ((unsigned)(127 - 15 - ex) << 23) | ((m & 1023) << 13);
        }
    } else if (e == 31) u = (s << 31) | 0x7f800000u | (m << 13);
    else u = (s << 31) | ((e + 127 - 15) << 23) | (m << 13);
    return __uint_as_float(u);
}
static inline unsigned short mc_f32_to_f16(float f) {
    unsigned u; memcpy(&u, &f, 4);
    unsigned s = (u >> 16) & 0x8000u;
    int e = (int)((u >> 23) & 255) - 127 + 15;
    unsigned m = u & 0x7fffffu;
    if (((u >> 23) & 255) == 255) return (unsigned short)(s | 0x7c00u | (m ? 0x200u : 0));
    if (e >= 31) return (unsigned short)(s | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return (unsigned short)s;
        m |= 0x800000u;
        int shift = 14 - e;
        unsigned half = m >> shift, rem = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (unsigned short)(s | half);
    }
    unsigned half = (unsigned)(e << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) half++;
    return (unsigned short)(s | half);
}
static inline float mc_bf16_to_f32(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }
static inline unsigned short mc_f32_to_bf16(float f) {
    unsigned u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return (unsigned short)(u >> 16);
}

/* ---- the scheduler */
enum { EMU_RUN, EMU_BARRIER, EMU_WARP, EMU_DONE };
struct emu_thread { ucontext_t ctx; emu_dim3 tid; int state; char *stack; };
static emu_thread *emu_threads;
static int emu_nthreads, emu_cur_i;
static ucontext_t emu_sched;
static emu_dim3 emu_block, emu_bdim, emu_gdim;
static unsigned char *emu_dyn_smem;
static void (*emu_body)(void **);
static void **emu_args;
static int emu_failed;

#define threadIdx (emu_threads[emu_cur_i].tid)
#define blockIdx emu_block
#define blockDim emu_bdim
#define gridDim emu_gdim

static inline void emu_park(int state) {
    emu_threads[emu_cur_i].state = state;
    swapcontext(&emu_threads[emu_cur_i].ctx, &emu_sched);
}
static inline void __syncthreads() { emu_park(EMU_BARRIER); }

static float emu_xf[1024];
static inline float __shfl_xor_sync(unsigned, float v, int o) {
    int me = emu_cur_i;
    emu_xf[me] = v;
    emu_park(EMU_WARP);
    float r = emu_xf[(me & ~31) | ((me & 31) ^ o)];
    emu_park(EMU_WARP);
    return r;
}
static inline float __shfl_sync(unsigned, float v, int src) {
    int me = emu_cur_i;
    emu_xf[me] = v;
    emu_park(EMU_WARP);
    float r = emu_xf[(me & ~31) | (src & 31)];
    emu_park(EMU_WARP);
    return r;
}

static unsigned emu_fa[1024][4], emu_fb[1024][2];
static inline float emu_half(unsigned reg, int hi, int bf16) {
    unsigned short h = (unsigned short)(hi ? reg >> 16 : reg & 0xffffu);
    return bf16 ? mc_bf16_to_f32(h) : mc_f16_to_f32(h);
}
static inline void emu_mma_m16n8k16(float *c, const unsigned *a, const unsigned *b, int bf16) {
    int me = emu_cur_i, base = me & ~31, lane = me & 31, g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) emu_fa[me][i] = a[i];
    for (int i = 0; i < 2; i++) emu_fb[me][i] = b[i];
    emu_park(EMU_WARP);
    float out[4];
    for (int e = 0; e < 4; e++) {
        int row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
        float acc = c[e];
        for (int k = 0; k < 16; k++) {
            int al = (row % 8) * 4 + (k % 8) / 2, ar = (row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
            int bl = col * 4 + (k % 8) / 2, br = k >= 8 ? 1 : 0;
            acc += emu_half(emu_fa[base + al][ar], k & 1, bf16) * emu_half(emu_fb[base + bl][br], k & 1, bf16);
        }
        out[e] = acc;
    }
    emu_park(EMU_WARP);
    for (int e = 0; e < 4; e++) c[e] = out[e];
}

static void emu_entry() {
    emu_body(emu_args);
    emu_threads[emu_cur_i].state = EMU_DONE;
    swapcontext(&emu_threads[emu_cur_i].ctx, &emu_sched);
}

/* Runs body(args) over the grid; returns 0, or -1 on a deadlock. */
extern "C" int emu_run(void (*body)(void **), void **args, unsigned grid, unsigned block, size_t smem) {
    const size_t STACK = 256 * 1024;
    emu_body = body;
    emu_args = args;
    emu_bdim = {block, 1, 1};
    emu_gdim = {grid, 1, 1};
    emu_nthreads = (int)block;
    emu_threads = (emu_thread *)calloc(block, sizeof(emu_thread));
    emu_dyn_smem = (unsigned char *)aligned_alloc(16, smem ? (smem + 15) / 16 * 16 : 16);
    for (unsigned t = 0; t < block; t++) emu_threads[t].stack = (char *)malloc(STACK);
    emu_failed = 0;
    for (unsigned bx = 0; bx < grid && !emu_failed; bx++) {
        emu_block = {bx, 0, 0};
        memset(emu_dyn_smem, 0xcd, smem ? smem : 16);   /* garbage, like the GPU */
        for (unsigned t = 0; t < block; t++) {
            emu_thread *th = &emu_threads[t];
            th->tid = {t, 0, 0};
            th->state = EMU_RUN;
            getcontext(&th->ctx);
            th->ctx.uc_stack.ss_sp = th->stack;
            th->ctx.uc_stack.ss_size = STACK;
            th->ctx.uc_link = NULL;
            makecontext(&th->ctx, emu_entry, 0);
        }
        for (;;) {
            bool ran = false;
            for (int t = 0; t < emu_nthreads; t++)
                if (emu_threads[t].state == EMU_RUN) {
                    emu_cur_i = t;
                    swapcontext(&emu_sched, &emu_threads[t].ctx);
                    ran = true;
                }
            if (ran) continue;
            /* release complete warp barriers */
            bool released = false;
            for (int w = 0; w < emu_nthreads; w += 32) {
                int n = emu_nthreads - w < 32 ? emu_nthreads - w : 32, at = 0;
                for (int l = 0; l < n; l++) at += emu_threads[w + l].state == EMU_WARP;
                if (at == n) {
                    for (int l = 0; l < n; l++) emu_threads[w + l].state = EMU_RUN;
                    released = true;
                } else if (at > 0) {
                    fprintf(stderr, "emu: block %u warp %d: %d of %d lanes at a warp primitive, others not (divergence)\n",
                            bx, w / 32, at, n);
                    emu_failed = 1;
                }
            }
            if (emu_failed) break;
            if (released) continue;
            int done = 0, bar = 0;
            for (int t = 0; t < emu_nthreads; t++) {
                done += emu_threads[t].state == EMU_DONE;
                bar += emu_threads[t].state == EMU_BARRIER;
            }
            if (done == emu_nthreads) break;
            if (bar + done == emu_nthreads && done == 0) {
                for (int t = 0; t < emu_nthreads; t++) emu_threads[t].state = EMU_RUN;
                continue;
            }
            fprintf(stderr, "emu: block %u: %d threads at __syncthreads, %d exited (barrier divergence)\n", bx,
                    bar, done);
            emu_failed = 1;
        }
    }
    for (unsigned t = 0; t < block; t++) free(emu_threads[t].stack);
    free(emu_threads);
    free(emu_dyn_smem);
    return emu_failed ? -1 : 0;
}

#endif
