// cuda_emu.h — a small CPU emulator for the generated kernels, so their
// index math, bounds checks, barriers and reductions are executed (and
// checked against the reference interpreter) on machines without a GPU,
// and a sanitizer for them (what compute-sanitizer's memcheck, racecheck
// and initcheck would report on a GPU).
//
// Each CUDA thread of a block is a coroutine (ucontext) on one OS thread;
// __syncthreads parks a thread until every live thread of the block arrives;
// warp shuffles, __syncwarp and the mma.sync emulation park until all 32
// lanes of the warp arrive (a divergent shuffle or barrier is reported as a
// deadlock). __shared__ variables become statics in the section "emu_smem"
// (blocks run one after another). emu_mma_m16n8k16 implements the PTX
// fragment layouts of mma.m16n8k16.row.col (A: a0..a3 rows g/g+8, cols
// 2t(+1)/2t+8(+1); B: rows 2t(+1)/2t+8(+1), col g; C: rows g/g+8, cols
// 2t(+1)). Only what the mcir templates use is provided. Compiled as C++ by
// the test with the generated source after it.
//
// The sanitizer: the templates reach memory only through the MC_GLD /
// MC_GST / MC_GLDV / MC_SLD / MC_SST macros of the prelude, which here
// check each access (shadow arrays, no maps):
// - bounds: a global access must lie inside the buffer its kernel argument
//   points into (the run's buffers share one arena, so a neighbour is
//   named); a shared access inside the block's shared memory; alignment;
// - races: two threads touching the same 2-byte granule of shared memory
//   with no __syncthreads between them (same-warp lanes: no __syncthreads
//   or __syncwarp; shuffles and mma order nothing), one writing; the same
//   for global memory, where threads of different blocks are never ordered;
// - uninitialised reads: arena bytes no kernel of the run wrote, shared
//   bytes not written earlier by this block;
// - emu_stats: bytes of global memory the launch requested (every load and
//   store, re-reads included) — emu_stats_last() in the kernel's .so, or
//   emu_launch.stats after emu_run.
// The C part below is the interface the test (C) shares with it.
#ifndef MCIR_CUDA_EMU_H
#define MCIR_CUDA_EMU_H

#include <stddef.h>

/* Global memory one launch requested: every load and store of a kernel
 * argument, re-reads included, whatever caches would absorb. */
typedef struct emu_stats {
    unsigned long long bytes_read, bytes_written, loads, stores;
} emu_stats;

/* A buffer of the run's "device memory": a root tensor in the arena or an
 * input / weight. init: per byte, nonzero once written in the run (the
 * uninitialised-read shadow; NULL: all bytes initialised by the host). */
typedef struct emu_buffer {
    const char *name;
    unsigned char *base;
    size_t bytes;
    unsigned char *init;
} emu_buffer;

enum { EMU_CHECK_BOUNDS = 1, EMU_CHECK_RACES = 2, EMU_CHECK_INIT = 4, EMU_CHECK_ALL = 7 };
enum { EMU_FIND_BOUNDS, EMU_FIND_RACE, EMU_FIND_INIT, EMU_FIND_HANG, EMU_FIND_KINDS };

typedef struct emu_launch {
    const char *kernel;
    void (*body)(void **);    /* the .so's emu_kernel: calls the kernel */
    void **args;              /* kernel arguments: pointers into buffers */
    int n_args;
    unsigned grid, block;
    size_t smem;              /* dynamic shared memory */
    unsigned long long write_args;   /* bit k: the kernel writes through args[k] */
    const emu_buffer *buffers;   /* every buffer of the run */
    int n_buffers;
    const int *arg_buffer;    /* per argument: its buffer (where buffers share
                                 bytes); NULL: the first buffer holding it */
    int checks;               /* EMU_CHECK_* */
    /* results */
    emu_stats stats;
    int findings[EMU_FIND_KINDS];
} emu_launch;

/* Runs the launch; 0, or -1 on a finding (printed to stderr) or a hang. */
typedef int (*emu_run_fn)(emu_launch *launch);

#ifdef __cplusplus
#include <cmath>
#include <cstdarg>
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
#define __shared__ static __attribute__((section("emu_smem")))
#define __align__(n) __attribute__((aligned(n)))
#define MC_DYNAMIC_SMEM(name) unsigned char *name = emu_dyn_smem

struct emu_dim3 { unsigned x, y, z; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
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
static emu_launch *emu_L;
static int emu_failed;

#define threadIdx (emu_threads[emu_cur_i].tid)
#define blockIdx emu_block
#define blockDim emu_bdim
#define gridDim emu_gdim

/* ---- sanitizer state of the launch
 * Ordering is tracked with stamps: every warp has the stamp of its current
 * interval, renewed at each __syncthreads (all warps; emu_blast is the
 * first of the new stamps) and each __syncwarp (that warp); emu_bstart is
 * the stamp at which the running block began. An earlier access (stamp s,
 * thread u) and the current one (thread t) are unordered when s belongs to
 * an earlier block (global memory only), or u and t share a warp and s is
 * still the warp's stamp, or they are in different warps and s >= emu_blast. */
struct emu_cell { uint32_t ws, rs, r2s; uint16_t wt, rt, r2t; };   /* per 2-byte granule */
struct emu_gbuf { const emu_buffer *b; emu_cell *cells; };
static uint32_t emu_clock, emu_bstart, emu_blast, emu_wstamp[32];
static unsigned char emu_wsync[32];
static uint32_t *emu_block_stamp;   /* stamp at which each block began */
static emu_gbuf *emu_gb;            /* per buffer of the run */
static int *emu_arg_buf;            /* per kernel argument: its buffer, or -1 */
static emu_cell *emu_dyn_cells, *emu_st_cells;
static int emu_reports[EMU_FIND_KINDS];
static emu_stats emu_last_stats;
static unsigned char emu_sink[64] __attribute__((aligned(16)));
extern "C" char __start_emu_smem[] __attribute__((weak));
extern "C" char __stop_emu_smem[] __attribute__((weak));

extern "C" emu_stats emu_stats_last(void) { return emu_last_stats; }

static void emu_report(int kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emu_report(int kind, const char *fmt, ...) {
    emu_L->findings[kind]++;
    if (++emu_reports[kind] > 3) return;   /* the first three of each kind */
    static const char *what[] = {"out of bounds", "race", "uninitialised read", "hang"};
    fprintf(stderr, "emu: %s: %s: ", emu_L->kernel, what[kind]);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static unsigned emu_block_of(uint32_t s) {
    unsigned b = emu_block.x;
    while (b > 0 && emu_block_stamp[b] > s) b--;
    return b;
}

static bool emu_unordered(uint32_t s, int u, bool global) {
    if (s == 0) return false;
    if (s < emu_bstart) return global;
    int t = emu_cur_i;
    if (u == t) return false;
    if ((u >> 5) == (t >> 5)) return s == emu_wstamp[t >> 5];
    return s >= emu_blast;
}

/* Records an access to the granules of cells[0..n) and reports a race with
 * an earlier one; where: "shared offset N" / "'buf' + N". */
static bool emu_live(uint32_t s, bool global) {
    return s && (s >= emu_blast || (global && s < emu_bstart));
}

static void emu_race(emu_cell *c, size_t n, bool write, bool global, const char *space, size_t off) {
    int t = emu_cur_i;
    uint32_t now = emu_wstamp[t >> 5];
    for (size_t k = 0; k < n; k++, c++) {
        uint32_t ps = 0;
        int pu = 0, pw = 0;
        if (emu_unordered(c->ws, c->wt, global)) { ps = c->ws; pu = c->wt; pw = 1; }
        else if (write && emu_unordered(c->rs, c->rt, global)) { ps = c->rs; pu = c->rt; }
        else if (write && emu_unordered(c->r2s, c->r2t, global)) { ps = c->r2s; pu = c->r2t; }
        if (ps) {
            emu_report(EMU_FIND_RACE, "%s%s%s byte %zu: thread (block %u, thread %d) %s it, "
                       "thread (block %u, thread %d) %s it with no %s between",
                       global ? "global '" : "", space, global ? "'" : " memory", off + 2 * k, emu_block_of(ps), pu,
                       pw ? "wrote" : "read", emu_block.x, t, write ? "writes" : "reads",
                       ps < emu_bstart ? "ordering (another block of the launch)"
                       : (pu >> 5) == (t >> 5) ? "__syncwarp or __syncthreads" : "__syncthreads");
            break;
        }
        if (write) {
            c->ws = now; c->wt = (uint16_t)t;
            c->rs = c->r2s = 0;
        } else if (c->rs != now || c->rt != t) {
            if (c->rt != t && emu_live(c->rs, global)) { c->r2s = c->rs; c->r2t = c->rt; }
            c->rs = now; c->rt = (uint16_t)t;
        }
    }
}

/* Global access of n bytes at element i (size sz) of kernel argument p;
 * returns where the access may go (the sink when it is out of bounds). */
static void *emu_global(const void *p, long long i, size_t sz, size_t n, bool write) {
    emu_launch *L = emu_L;
    if (write) { L->stats.bytes_written += n; L->stats.stores++; }
    else { L->stats.bytes_read += n; L->stats.loads++; }
    unsigned char *a = (unsigned char *)p + i * (long long)sz;
    if (!L->checks) return a;
    int bi = -1;
    /* the argument p is; in place (a read and a written argument at one
     * address) a store goes through the written one */
    for (int k = 0; k < L->n_args; k++)
        if (L->args[k] == p && (bi < 0 || (k < 64 && (int)((L->write_args >> k) & 1) == (int)write))) bi = emu_arg_buf[k];
    if (bi < 0)
        for (int k = 0; k < L->n_buffers; k++)
            if ((const unsigned char *)p >= L->buffers[k].base &&
                (const unsigned char *)p < L->buffers[k].base + L->buffers[k].bytes) { bi = k; break; }
    if (bi < 0) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d) %s through %p, which points into no buffer",
                   emu_block.x, emu_cur_i, write ? "writes" : "reads", p);
        return emu_sink;
    }
    const emu_buffer *b = L->buffers + bi;
    long long off = (long long)(a - b->base);
    if ((L->checks & EMU_CHECK_BOUNDS) && (off < 0 || off + (long long)n > (long long)b->bytes)) {
        const char *nb = NULL;
        long long noff = 0;
        for (int k = 0; k < L->n_buffers && !nb; k++)
            if (a >= L->buffers[k].base && a < L->buffers[k].base + L->buffers[k].bytes) {
                nb = L->buffers[k].name;
                noff = (long long)(a - L->buffers[k].base);
            }
        char into[160] = "";
        if (nb) snprintf(into, sizeof into, ", inside '%s' at byte %lld", nb, noff);
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d) %s %zu bytes at element %lld of '%s' "
                   "(byte %lld of %zu)%s", emu_block.x, emu_cur_i, write ? "writes" : "reads", n, i,
                   b->name, off, b->bytes, into);
        return emu_sink;
    }
    if ((L->checks & EMU_CHECK_BOUNDS) && ((uintptr_t)a & (n - 1) & ((n & (n - 1)) ? 0 : ~(uintptr_t)0)) != 0)
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): misaligned %zu-byte %s at byte %lld of '%s'",
                   emu_block.x, emu_cur_i, n, write ? "store" : "load", off, b->name);
    if ((L->checks & EMU_CHECK_INIT) && b->init) {
        const unsigned char *z;
        if (write) memset(b->init + off, 1, n);
        else if ((z = (const unsigned char *)memchr(b->init + off, 0, n)) != NULL)
            emu_report(EMU_FIND_INIT, "thread (block %u, thread %d) reads byte %lld of '%s', "
                       "which no kernel of the run wrote", emu_block.x, emu_cur_i, (long long)(z - b->init),
                       b->name);
    }
    if (emu_gb[bi].cells)
        emu_race(emu_gb[bi].cells + off / 2, (n + (size_t)(off & 1) + 1) / 2, write, true, b->name,
                 (size_t)(off & ~1ll));
    return a;
}

/* Shared access of n bytes at a. */
static void *emu_shared(void *p, size_t n, size_t align, bool write) {
    emu_launch *L = emu_L;
    unsigned char *a = (unsigned char *)p;
    if (!L->checks) return a;
    emu_cell *cells = NULL;
    size_t off = 0;
    const char *space = "dynamic shared";
    if (a >= emu_dyn_smem && a + n <= emu_dyn_smem + L->smem) {
        cells = emu_dyn_cells;
        off = (size_t)(a - emu_dyn_smem);
    } else if (__start_emu_smem && a >= (unsigned char *)__start_emu_smem && a + n <= (unsigned char *)__stop_emu_smem) {
        cells = emu_st_cells;
        off = (size_t)(a - (unsigned char *)__start_emu_smem);
        space = "static shared";
    } else {
        if (L->checks & EMU_CHECK_BOUNDS)
            emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d) %s %zu bytes of shared memory outside "
                       "the block's %zu dynamic and %zu static bytes (%+lld from the dynamic base)",
                       emu_block.x, emu_cur_i, write ? "writes" : "reads", n, L->smem,
                       (size_t)(__stop_emu_smem - __start_emu_smem), (long long)(a - emu_dyn_smem));
        return emu_sink;
    }
    if ((L->checks & EMU_CHECK_BOUNDS) && ((uintptr_t)a % align) != 0)
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): misaligned %zu-byte shared %s at %s offset %zu",
                   emu_block.x, emu_cur_i, n, write ? "store" : "load", space, off);
    emu_cell *c = cells + off / 2;
    size_t g = (n + (off & 1) + 1) / 2;
    if (!write && (L->checks & EMU_CHECK_INIT))
        for (size_t k = 0; k < g; k++)
            if (c[k].ws < emu_bstart) {
                emu_report(EMU_FIND_INIT, "thread (block %u, thread %d) reads %s memory at offset %zu, "
                           "which this block never wrote", emu_block.x, emu_cur_i, space, (off & ~(size_t)1) + 2 * k);
                break;
            }
    if (L->checks & EMU_CHECK_RACES) emu_race(c, g, write, false, space, off & ~(size_t)1);
    else if (write) for (size_t k = 0; k < g; k++) c[k].ws = emu_wstamp[emu_cur_i >> 5];
    return a;
}

template <class T> static inline const T *emu_gld(const T *p, long long i) {
    return (const T *)emu_global(p, i, sizeof(T), sizeof(T), false);
}
template <class T> static inline T *emu_gst(T *p, long long i) {
    return (T *)emu_global(p, i, sizeof(T), sizeof(T), true);
}
template <class V, class T> static inline const V *emu_gldv(const T *p, long long i) {
    return (const V *)emu_global(p, i, sizeof(T), sizeof(V), false);
}
template <class T> static inline const T *emu_sld(const T *p) { return (const T *)emu_shared((void *)p, sizeof(T), alignof(T), false); }
template <class T> static inline T *emu_sst(T *p) { return (T *)emu_shared(p, sizeof(T), alignof(T), true); }
#define MC_GLD(p, i) (*emu_gld(p, i))
#define MC_GST(p, i, v) (*emu_gst(p, i) = (v))
#define MC_GLDV(T, p, i) (*emu_gldv<T>(p, i))
#define MC_SLD(x) (*emu_sld(&(x)))
#define MC_SST(x, v) (*emu_sst(&(x)) = (v))

static inline void emu_park(int state) {
    emu_threads[emu_cur_i].state = state;
    swapcontext(&emu_threads[emu_cur_i].ctx, &emu_sched);
}
static inline void __syncthreads() { emu_park(EMU_BARRIER); }
static inline void __syncwarp(unsigned = 0xffffffffu) {
    emu_wsync[emu_cur_i >> 5] = 1;
    emu_park(EMU_WARP);
}

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
    emu_L->body(emu_L->args);
    emu_threads[emu_cur_i].state = EMU_DONE;
    swapcontext(&emu_threads[emu_cur_i].ctx, &emu_sched);
}

/* New stamps for every warp: a block begins or passes __syncthreads. */
static void emu_barrier_stamps() {
    emu_blast = emu_clock;
    for (int w = 0; w < (emu_nthreads + 31) / 32; w++) emu_wstamp[w] = emu_clock++;
}

static emu_cell *emu_cells(size_t bytes) {
    return bytes ? (emu_cell *)calloc((bytes + 1) / 2, sizeof(emu_cell)) : NULL;
}

extern "C" int emu_run(emu_launch *L) {
    const size_t STACK = 256 * 1024;
    unsigned grid = L->grid, block = L->block;
    size_t smem = L->smem;
    emu_L = L;
    memset(&L->stats, 0, sizeof L->stats);
    memset(L->findings, 0, sizeof L->findings);
    memset(emu_reports, 0, sizeof emu_reports);
    emu_bdim = {block, 1, 1};
    emu_gdim = {grid, 1, 1};
    emu_nthreads = (int)block;
    emu_threads = (emu_thread *)calloc(block, sizeof(emu_thread));
    emu_dyn_smem = (unsigned char *)aligned_alloc(16, smem ? (smem + 15) / 16 * 16 : 16);
    for (unsigned t = 0; t < block; t++) emu_threads[t].stack = (char *)malloc(STACK);
    /* shadows: races on the buffers the kernel writes, shared memory */
    emu_clock = 1;
    emu_block_stamp = (uint32_t *)calloc(grid ? grid : 1, sizeof(uint32_t));
    emu_gb = (emu_gbuf *)calloc((size_t)L->n_buffers + 1, sizeof(emu_gbuf));
    emu_arg_buf = (int *)calloc((size_t)L->n_args + 1, sizeof(int));
    for (int k = 0; k < L->n_args; k++) {
        emu_arg_buf[k] = L->arg_buffer ? L->arg_buffer[k] : -1;
        for (int j = 0; j < L->n_buffers && emu_arg_buf[k] < 0; j++)
            if ((unsigned char *)L->args[k] >= L->buffers[j].base &&
                (unsigned char *)L->args[k] < L->buffers[j].base + L->buffers[j].bytes) {
                emu_arg_buf[k] = j;
                break;
            }
    }
    /* race shadow over the bytes the launch writes and every buffer that
     * shares them (the memory plan reuses arena bytes, in place too), by
     * address: a read of A and a write of B at the same byte meet */
    emu_cell *span_cells = NULL;
    for (int j = 0; j < L->n_buffers; j++) emu_gb[j].b = &L->buffers[j];
    if (L->checks & EMU_CHECK_RACES) {
        unsigned char *lo = NULL, *hi = NULL;
        char *tracked = (char *)calloc((size_t)L->n_buffers + 1, 1);
        for (int k = 0; k < L->n_args && k < 64; k++)
            if (emu_arg_buf[k] >= 0 && ((L->write_args >> k) & 1)) tracked[emu_arg_buf[k]] = 2;
        for (int j = 0; j < L->n_buffers; j++)
            for (int w = 0; w < L->n_buffers && !tracked[j]; w++)
                if (tracked[w] == 2 && L->buffers[j].base < L->buffers[w].base + L->buffers[w].bytes &&
                    L->buffers[w].base < L->buffers[j].base + L->buffers[j].bytes)
                    tracked[j] = 1;
        for (int j = 0; j < L->n_buffers; j++)
            if (tracked[j]) {
                if (!lo || L->buffers[j].base < lo) lo = L->buffers[j].base;
                if (!hi || L->buffers[j].base + L->buffers[j].bytes > hi) hi = L->buffers[j].base + L->buffers[j].bytes;
            }
        lo = (unsigned char *)((uintptr_t)lo & ~(uintptr_t)1);
        if (lo && hi > lo) span_cells = emu_cells((size_t)(hi - lo));
        for (int j = 0; j < L->n_buffers && span_cells; j++)
            if (tracked[j] && ((uintptr_t)L->buffers[j].base & 1) == 0)
                emu_gb[j].cells = span_cells + (L->buffers[j].base - lo) / 2;
        free(tracked);
    }
    emu_dyn_cells = emu_cells(smem);
    emu_st_cells = emu_cells(__start_emu_smem ? (size_t)(__stop_emu_smem - __start_emu_smem) : 0);
    emu_failed = 0;
    for (unsigned bx = 0; bx < grid && !emu_failed; bx++) {
        emu_block = {bx, 0, 0};
        memset(emu_dyn_smem, 0xcd, smem ? smem : 16);   /* garbage, like the GPU */
        emu_bstart = emu_block_stamp[bx] = emu_clock;
        emu_barrier_stamps();
        memset(emu_wsync, 0, sizeof emu_wsync);
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
                    if (emu_wsync[w / 32]) emu_wstamp[w / 32] = emu_clock++;   /* __syncwarp */
                    emu_wsync[w / 32] = 0;
                    released = true;
                } else if (at > 0) {
                    emu_report(EMU_FIND_HANG, "block %u warp %d: %d of %d lanes at a warp primitive, others not "
                               "(divergence)", bx, w / 32, at, n);
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
                emu_barrier_stamps();
                continue;
            }
            emu_report(EMU_FIND_HANG, "block %u: %d threads at __syncthreads, %d exited (barrier divergence)", bx,
                       bar, done);
            emu_failed = 1;
        }
    }
    for (unsigned t = 0; t < block; t++) free(emu_threads[t].stack);
    free(emu_threads);
    free(emu_dyn_smem);
    free(span_cells);
    free(emu_gb);
    free(emu_arg_buf);
    free(emu_block_stamp);
    free(emu_dyn_cells);
    free(emu_st_cells);
    emu_last_stats = L->stats;
    int total = 0, more = 0;
    for (int k = 0; k < EMU_FIND_KINDS; k++) {
        total += L->findings[k];
        more += L->findings[k] > 3 ? L->findings[k] - 3 : 0;
    }
    if (more) fprintf(stderr, "emu: %s: %d more findings\n", L->kernel, more);
    return emu_failed || total ? -1 : 0;
}

#endif /* __cplusplus */
#endif
