// cuda_emu.h — a small CPU emulator for the generated kernels, so their
// index math, bounds checks, barriers and reductions are executed (and
// checked against the reference interpreter) on machines without a GPU,
// and a sanitizer for them (what compute-sanitizer's memcheck, racecheck
// and initcheck would report on a GPU).
//
// Each CUDA thread of a block is a coroutine on one OS thread (its own
// stack; switched by hand on x86-64, by ucontext elsewhere);
// __syncthreads parks a thread until every live thread of the block arrives;
// warp shuffles, __syncwarp and the mma.sync emulation park until all 32
// lanes of the warp arrive (a divergent shuffle or barrier is reported as a
// deadlock). __shared__ variables become statics in the section "emu_smem"
// (blocks run one after another). emu_mma_m16n8k16 implements the PTX
// fragment layouts of mma.m16n8k16.row.col (A: a0..a3 rows g/g+8, cols
// 2t(+1)/2t+8(+1); B: rows 2t(+1)/2t+8(+1), col g; C: rows g/g+8, cols
// 2t(+1)). Only what the mcir templates use is provided. Compiled as C++
// by the test with the generated source after it.
//
// This header is the core (the C interface, the scheduler, the sanitizer,
// the memory macros, shared addresses, emu_run); the instructions of one
// architecture are in a sibling header it includes (its C++ part, before
// emu_run, which calls their per-block hooks; the three travel together:
// emu/compile.c writes them into one directory):
// - cuda_emu_sm90.h: wgmma.mma_async (shared-memory descriptors with
//   swizzle, deferred to wgmma.wait_group), TMA tile loads and stores from
//   tensor maps, mbarriers with transaction counts, named barriers and
//   setmaxnreg (docs/codegen.md "The sm_90a emulator");
// - cuda_emu_sm80.h: cp.async with its commit / wait groups (a copy lands
//   at the wait) and ldmatrix.
//
// The sanitizer: the templates reach memory only through the MC_GLD /
// MC_GST / MC_GLDV / MC_GSTV / MC_SLD / MC_SST macros of the prelude, which here
// check each access (shadow arrays, no maps):
// - bounds: a global access must lie inside the buffer its kernel argument
//   points into (the run's buffers share one arena, so a neighbour is
//   named); a shared access inside the block's shared memory; alignment;
// - races: two threads touching the same 2-byte granule (byte, with
//   EMU_CHECK_BYTES) of shared memory
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
#include <string.h>

/* Global memory one launch requested: every load and store of a kernel
 * argument, re-reads included, whatever caches would absorb. */
typedef struct emu_stats {
    unsigned long long bytes_read, bytes_written, loads, stores;
    /* sm_90a: wgmma.mma_async executed (per warp group), TMA tile loads,
     * bytes they moved; maxnreg[wg]: the last setmaxnreg of warp group wg
     * (+n: inc, -n: dec, 0: none) */
    unsigned long long wgmma, tma_loads, tma_bytes;
    int maxnreg[8];
    /* bar.arrive executed (threads); TMA tile stores, the bytes they wrote */
    unsigned long long bar_arrives, tma_stores, tma_store_bytes;
    /* sm_80: cp.async issued and ldmatrix executed (per lane) */
    unsigned long long cp_async, ldmatrix;
    /* global atomics executed (per thread) */
    unsigned long long atomics;
    /* sm_90a clusters: multicast TMA loads (each counted once more per
     * block it writes in tma_loads / tma_bytes), remote mbarrier arrivals */
    unsigned long long tma_multicasts, remote_arrives;
    /* sm_90: stmatrix executed (per lane) */
    unsigned long long stmatrix;
} emu_stats;

/* A TMA tensor map as the emulator reads it: the arguments of the driver's
 * cuTensorMapEncodeTiled, packed into the 128 bytes of a CUtensorMap
 * (emu_tensor_map_encode_tiled; the runtime encodes the same values with
 * the driver on a GPU). Enum values are the driver's: dtype
 * CU_TENSOR_MAP_DATA_TYPE_* (6 f16, 7 f32, 9 bf16), swizzle 0 none, 1 32B,
 * 2 64B, 3 128B; oob_nan: CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA. */
typedef struct emu_tensor_map {
    void *base;
    unsigned long long strides[5];   /* strides[0] = element bytes, then bytes per dim */
    unsigned dims[5], box[5], estride[5];
    unsigned char rank, esize, swizzle, oob_nan;
} emu_tensor_map;

/* 0, or -1 when the arguments break a rule of cuTensorMapEncodeTiled that
 * the emulator relies on (rank, 16-byte aligned base and strides, box <=
 * 256 with a 16-byte multiple inner extent no wider than the swizzle span). */
static inline int emu_tensor_map_encode_tiled(void *map128, int dtype, unsigned rank, void *base,
                                              const unsigned long long *dims, const unsigned long long *strides,
                                              const unsigned *box, const unsigned *estride, int interleave,
                                              int swizzle, int l2promotion, int oob_fill) {
    emu_tensor_map m;
    unsigned k;
    int es = dtype == 6 || dtype == 9 || dtype == 1 ? 2 : dtype == 7 || dtype == 2 || dtype == 3 ? 4 : dtype == 0 ? 1 : 8;
    (void)l2promotion;
    if (rank < 1 || rank > 5 || interleave != 0 || swizzle < 0 || swizzle > 3 || ((unsigned long long)base & 15)) return -1;
    if (box[0] * (unsigned)es % 16 != 0 || (swizzle && box[0] * (unsigned)es > (16u << swizzle))) return -1;
    for (k = 0; k < 5; k++) m.dims[k] = 1, m.strides[k] = 0, m.box[k] = 1, m.estride[k] = 1;
    m.base = base;
    m.rank = (unsigned char)rank;
    m.esize = (unsigned char)es;
    m.swizzle = (unsigned char)swizzle;
    m.oob_nan = oob_fill != 0;
    m.strides[0] = (unsigned long long)es;
    for (k = 0; k < rank; k++) {
        if (dims[k] == 0 || dims[k] > 0xffffffffull || box[k] == 0 || box[k] > 256 || estride[k] == 0 ||
            estride[k] > 8)
            return -1;
        m.dims[k] = (unsigned)dims[k];
        m.box[k] = box[k];
        m.estride[k] = k ? estride[k] : 1;
        if (k) {
            if (strides[k - 1] % 16 != 0) return -1;
            m.strides[k] = strides[k - 1];
        }
    }
    memset(map128, 0, 128);
    memcpy(map128, &m, sizeof m);
    return 0;
}

/* A buffer of the run's "device memory": a root tensor in the arena or an
 * input / weight. init: per byte, nonzero once written in the run (the
 * uninitialised-read shadow; NULL: all bytes initialised by the host). */
typedef struct emu_buffer {
    const char *name;
    unsigned char *base;
    size_t bytes;
    unsigned char *init;
} emu_buffer;

/* A static __shared__ array of the kernel's module: its offset and bytes
 * in the module's static shared memory (the emu_smem section), its name
 * as declared; the device reads them from the module's symbol table so
 * findings name the array. */
typedef struct emu_smem_symbol {
    size_t offset, bytes;
    const char *name;
} emu_smem_symbol;

/* EMU_CHECK_BYTES: the race shadow per byte, for launches that touch 1-byte
 * elements (bool, u8, i8); else per 2-byte granule (exact when every access
 * is 2-byte aligned and at least 2 bytes; about 25 % less CPU), and a 1-byte
 * access is reported as a race finding rather than tracked inexactly. */
enum { EMU_CHECK_BOUNDS = 1, EMU_CHECK_RACES = 2, EMU_CHECK_INIT = 4, EMU_CHECK_ALL = 7, EMU_CHECK_BYTES = 8 };
enum { EMU_FIND_BOUNDS, EMU_FIND_RACE, EMU_FIND_INIT, EMU_FIND_HANG, EMU_FIND_KINDS };

typedef struct emu_launch {
    const char *kernel;
    void (*body)(void **);    /* the .so's emu_kernel: calls the kernel */
    void **args;              /* kernel arguments: pointers into buffers */
    void **body_args;         /* what body gets (cuLaunchKernel's kernelParams); NULL: args */
    int n_args;
    unsigned grid, block;
    size_t smem;              /* dynamic shared memory */
    unsigned cluster;         /* blocks per thread-block cluster (0 or 1: none);
                                 the grid a multiple of it */
    unsigned long long write_args;   /* bit k: the kernel writes through args[k] */
    const emu_buffer *buffers;   /* every buffer of the run */
    int n_buffers;
    const int *arg_buffer;    /* per argument: its buffer (where buffers share
                                 bytes); NULL: the first buffer holding it */
    int checks;               /* EMU_CHECK_* */
    /* findings: printed to stderr ("emu: KERNEL: race: ..."), or, with
     * quiet, only written to messages (when given) as lines
     * "race|out-of-bounds|uninitialised|hang: WHAT", the first three of
     * each kind and a count of the rest */
    int quiet;
    char *messages;
    size_t messages_size;
    const emu_smem_symbol *smem_symbols;   /* may be NULL: offsets only */
    int n_smem_symbols;
    /* results */
    emu_stats stats;
    int findings[EMU_FIND_KINDS];
} emu_launch;

/* The finding kinds as the CLI names them. */
static inline const char *emu_finding_name(int kind) {
    return kind == EMU_FIND_BOUNDS ? "out-of-bounds" : kind == EMU_FIND_RACE ? "race"
           : kind == EMU_FIND_INIT ? "uninitialised" : "hang";
}

/* Runs the launch; 0, or -1 on a finding (reported as above) or a hang. */
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
#pragma GCC diagnostic ignored "-Wpsabi"   /* CUtensorMap (64-byte aligned) passed by value */
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __cluster_dims__(...)
#define __shared__ static __attribute__((section("emu_smem")))
#define __align__(n) __attribute__((aligned(n)))
#define MC_DYNAMIC_SMEM(name) unsigned char *name = emu_dyn_smem

struct emu_dim3 { unsigned x, y, z; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) float2 { float x, y; };
static inline float2 make_float2(float a, float b) { return {a, b}; }
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }

static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __int_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
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
enum { EMU_RUN, EMU_BARRIER, EMU_WARP, EMU_DONE, EMU_CLUSTER = 64 };
/* Switching between the scheduler and a thread: on x86-64 a user-space
 * switch of the callee-saved registers and the stack pointer (swapcontext
 * saves the signal mask with two system calls a switch: they were 60 % of
 * an emulated BERT layer); elsewhere, and under AddressSanitizer (which
 * follows ucontext switches, not hand-made ones), ucontext. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define EMU_FAST_SWITCH 1
extern "C" void emu_ctx_switch(void **save_sp, void *load_sp);
extern "C" void emu_ctx_start(void);
__asm__(".text\n.p2align 4\n.hidden emu_ctx_switch\n.globl emu_ctx_switch\n.type emu_ctx_switch,@function\n"
        "emu_ctx_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size emu_ctx_switch, .-emu_ctx_switch\n");
#else
#define EMU_FAST_SWITCH 0
#endif
struct emu_thread { ucontext_t ctx; void *sp; emu_dim3 tid; int state; char *stack; };
static emu_thread *emu_threads;
static int emu_nthreads, emu_cur_i;
static ucontext_t emu_sched;
static void *emu_sched_sp;

/* The running thread gives the CPU back to the scheduler. */
static inline void emu_to_sched() {
#if EMU_FAST_SWITCH
    emu_ctx_switch(&emu_threads[emu_cur_i].sp, emu_sched_sp);
#else
    swapcontext(&emu_threads[emu_cur_i].ctx, &emu_sched);
#endif
}
static emu_dim3 emu_block, emu_bdim, emu_gdim;
static unsigned char *emu_dyn_smem;
static emu_launch *emu_L;
static int emu_failed;

/* ---- thread-block clusters (docs/codegen.md "Clusters in the emulator"):
 * the blocks of a cluster run together, one at a time on the scheduler
 * until each is done or waits at barrier.cluster; switching blocks swaps
 * the per-block state below (the static __shared__ section by copy).
 * emu_cl_n: blocks per cluster (1: none); emu_cl_rank: the running block's
 * rank; emu_cstart: the stamp at which the cluster began (emu_bstart
 * without clusters); emu_cl_stamp: at the last barrier.cluster; emu_cl_epoch
 * counts them. A thread's identity in the race shadow is rank * block +
 * thread (emu_me). */
static unsigned emu_cl_n = 1, emu_cl_rank;
static uint32_t emu_cstart, emu_cl_stamp, emu_cl_epoch;
static inline int emu_me() { return (int)emu_cl_rank * emu_nthreads + emu_cur_i; }

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
struct emu_cell { uint32_t ws, rs, r2s; uint16_t wt, rt, r2t; };   /* per granule */
struct emu_gbuf { const emu_buffer *b; emu_cell *cells; };
static uint32_t emu_clock, emu_bstart, emu_blast, emu_wstamp[32];
/* What each warp has seen: EMU_SEEN(t, u), the latest stamp of warp u
 * that happens before warp t's current interval through mbarriers and
 * named barriers (cuda_emu_sm90.h). Warps are numbered across the cluster
 * (rank * EMU_WARPS + warp: emu_gw), so an arrival on another block's
 * mbarrier carries what the arriving warp knows to that block's waiters.
 * Each block's TMA unit counts as EMU_TMA_UNITS warps (32..39), one per
 * mbarrier its copies complete on (its index mod EMU_TMA_UNITS): copies
 * completing on different mbarriers are not ordered with each other, as
 * on the GPU, so waiting for one does not make another's bytes visible.
 * The matrix is emu_G x emu_G (emu_G = blocks per cluster x EMU_WARPS). */
enum { EMU_TMA_WARP = 32, EMU_TMA_UNITS = 8, EMU_WARPS = EMU_TMA_WARP + EMU_TMA_UNITS, EMU_CL_MAX = 8,
       EMU_GMAX = EMU_CL_MAX * EMU_WARPS };
static uint32_t *emu_seen_m;
static int emu_G = EMU_WARPS;
static inline int emu_gw(unsigned rank, int w) { return (int)rank * EMU_WARPS + w; }
#define EMU_SEEN(t, u) (emu_seen_m[(size_t)(t) * (size_t)emu_G + (size_t)(u)])
/* The identities the race shadow records (16 bits): a thread is rank *
 * threads per block + its index (emu_me); the TMA unit k of block rank is
 * EMU_ID_TMA | rank << 4 | k. */
enum { EMU_ID_TMA = 0x8000 };
static inline unsigned emu_id_rank(int u) {
    return (u & EMU_ID_TMA) ? (unsigned)(u >> 4) & 0x7ffu : emu_cl_n > 1 ? (unsigned)(u / emu_nthreads) : 0u;
}
/* (no division without a cluster: these run in every race check) */
static inline int emu_id_thread(int u) {   /* -1: the TMA */
    return (u & EMU_ID_TMA) ? -1 : emu_cl_n > 1 ? u % emu_nthreads : u;
}
static inline int emu_id_warp(int u) {
    return (u & EMU_ID_TMA) ? EMU_TMA_WARP + (u & 15) : (emu_cl_n > 1 ? u % emu_nthreads : u) >> 5;
}
static unsigned char emu_wsync[32];
static uint32_t *emu_block_stamp;   /* stamp at which each block began */
static emu_gbuf *emu_gb;            /* per buffer of the run */
static int *emu_arg_buf;            /* per kernel argument: its buffer, or -1 */
static emu_cell *emu_dyn_cells, *emu_st_cells;
/* The proxies (PTX ISA "Proxies"): wgmma's shared-memory operands and a
 * TMA store's source are read by the async proxy, which sees a generic
 * (st.shared) write only after a fence.proxy.async of the writing thread
 * (then the usual barrier). Per granule of dynamic shared memory: the count
 * of generic shared writes at its last generic write (emu_dyn_pw; 0 when
 * the async proxy, a TMA load, wrote it last) and the writer; per thread:
 * the count at its last fence.proxy.async (cuda_emu_sm90.h: the fence, and
 * emu_proxy_read, which checks the async proxy's reads). */
static unsigned long long emu_pclock, emu_pbstart, emu_pfence[1024];
static unsigned long long *emu_dyn_pw;
static uint16_t *emu_dyn_pt;
static int emu_gshift;              /* race shadow granule: 1 << emu_gshift bytes */
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
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (!emu_L->quiet) fprintf(stderr, "emu: %s: %s: %s\n", emu_L->kernel, what[kind], text);
    if (emu_L->messages && emu_L->messages_size) {
        size_t used = strlen(emu_L->messages);
        if (used < emu_L->messages_size)
            snprintf(emu_L->messages + used, emu_L->messages_size - used, "%s: %s\n", emu_finding_name(kind), text);
    }
}

/* Where an access lands, for findings: "global 'y' byte 12", "shared
 * 'part' byte 4 (static shared memory offset 12)", "dynamic shared memory
 * byte 49152". */
static const char *emu_where(char *buf, size_t n, bool global, const char *space, size_t off) {
    if (global) {
        snprintf(buf, n, "global '%s' byte %zu", space, off);
        return buf;
    }
    if (!strcmp(space, "static shared"))
        for (int k = 0; k < emu_L->n_smem_symbols; k++) {
            const emu_smem_symbol *y = &emu_L->smem_symbols[k];
            if (off >= y->offset && off - y->offset < y->bytes) {
                snprintf(buf, n, "shared '%s' byte %zu (static shared memory offset %zu)", y->name, off - y->offset, off);
                return buf;
            }
        }
    snprintf(buf, n, "%s memory byte %zu", space, off);
    return buf;
}

static unsigned emu_block_of(uint32_t s) {
    unsigned b = emu_block.x;
    while (b > 0 && emu_block_stamp[b] > s) b--;
    return b;
}

static bool emu_unordered(uint32_t s, int u, bool global) {
    if (s == 0) return false;
    if (s < emu_cstart) return global;
    int t = emu_cur_i, tw = emu_gw(emu_cl_rank, t >> 5);
    unsigned ur = emu_id_rank(u);
    if (ur != emu_cl_rank)   /* another block of the cluster: barrier.cluster, or through mbarriers */
        return s >= emu_cl_stamp && s > EMU_SEEN(tw, emu_gw(ur, emu_id_warp(u)));
    int ut = emu_id_thread(u);
    if (ut == t) return false;
    if (ut >= 0 && (ut >> 5) == (t >> 5)) return s == emu_wstamp[t >> 5];
    return s >= emu_blast && s > EMU_SEEN(tw, emu_gw(ur, emu_id_warp(u)));
}

/* Records an access to the granules of cells[0..n) and reports a race with
 * an earlier one; where: "shared offset N" / "'buf' + N". */
static bool emu_live(uint32_t s, bool global) {
    return s && (s >= emu_blast || (global && (s < emu_cstart || emu_cl_n > 1)));
}

/* The granules an access of n bytes at byte off covers. */
static size_t emu_granules(size_t off, size_t n) {
    return ((off + n - 1) >> emu_gshift) - (off >> emu_gshift) + 1;
}

static void emu_race(emu_cell *c, size_t n, bool write, bool global, const char *space, size_t off);
/* while a thread writes another block's shared memory (a multicast TMA
 * load): " of block N", for findings */
static const char *emu_remote_owner;

/* An access of n bytes at byte off of the race shadow, per granule; a
 * 1-byte access under 2-byte granules is reported (it cannot be tracked). */
static void emu_race_at(emu_cell *cells, size_t off, size_t n, bool write, bool global, const char *space) {
    char w[200];
    if (emu_gshift && ((off | n) & 1))   /* reported, not tracked */
        emu_report(EMU_FIND_RACE, "%s: thread (block %u, thread %d) %s %zu bytes; the race shadow "
                   "has 2-byte granules (run the launch with EMU_CHECK_BYTES)",
                   emu_where(w, sizeof w, global, space, off), emu_block.x, emu_cur_i, write ? "writes" : "reads", n);
    else emu_race(cells + (off >> emu_gshift), emu_granules(off, n), write, global, space, off >> emu_gshift << emu_gshift);
}

static void emu_race(emu_cell *c, size_t n, bool write, bool global, const char *space, size_t off) {
    int t = emu_me();
    uint32_t now = emu_wstamp[emu_cur_i >> 5];
    for (size_t k = 0; k < n; k++, c++) {
        uint32_t ps = 0;
        int pu = 0, pw = 0;
        if (emu_unordered(c->ws, c->wt, global)) { ps = c->ws; pu = c->wt; pw = 1; }
        else if (write && emu_unordered(c->rs, c->rt, global)) { ps = c->rs; pu = c->rt; }
        else if (write && emu_unordered(c->r2s, c->r2t, global)) { ps = c->r2s; pu = c->r2t; }
        if (ps) {
            char w[200];
            const bool this_run = ps >= emu_cstart, tma = pu & EMU_ID_TMA;
            const unsigned pr = this_run ? emu_id_rank(pu) : 0;
            bool other = emu_cl_n > 1 && this_run && pr != emu_cl_rank;
            unsigned pb = this_run && emu_cl_n > 1 ? emu_block.x - emu_cl_rank + pr : emu_block_of(ps);
            pu = tma ? emu_id_warp(pu) * 32 : emu_id_thread(pu);
            emu_report(EMU_FIND_RACE, "%s%s: thread (block %u, thread %d%s) %s it, "
                       "thread (block %u, thread %d) %s it with no %s between",
                       emu_where(w, sizeof w, global, space, off + (k << emu_gshift)),
                       emu_remote_owner ? emu_remote_owner : "", pb, pu,
                       tma ? ": the TMA unit" : "", pw ? "wrote" : "read", emu_block.x, emu_cur_i,
                       write ? "writes" : "reads",
                       other ? "barrier.cluster or mbarrier wait" : ps < emu_cstart ? "ordering (another block of the launch)"
                       : !tma && (pu >> 5) == (emu_cur_i >> 5) ? "__syncwarp or __syncthreads"
                                                       : "__syncthreads or barrier wait");
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
static void *emu_shared(void *p, size_t n, size_t align, bool write);
static bool emu_in_atomic;   /* an atomic's access: not entered in the race shadow */
static void *emu_global(const void *p, long long i, size_t sz, size_t n, bool write) {
    emu_launch *L = emu_L;
    {   /* a generic pointer into the block's shared memory (a value chain
         * pointed at a staged tile, gemm_sm90.cuh's prologue): a shared access,
         * aligned to its whole width (a vector's 16 bytes: LDS.128) */
        unsigned char *a = (unsigned char *)p + i * (long long)sz;
        if ((a >= emu_dyn_smem && a < emu_dyn_smem + L->smem) ||
            (__start_emu_smem && a >= (unsigned char *)__start_emu_smem && a < (unsigned char *)__stop_emu_smem))
            return emu_shared(a, n, n, write);
    }
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
    if (emu_gb[bi].cells && !emu_in_atomic)
        emu_race_at(emu_gb[bi].cells, (size_t)off, n, write, true, b->name);
    return a;
}

/* A global atomic on the u32 at p (add v, or exchange for v): checked for
 * bounds and initialisation like a load and a store; atomics are not
 * entered in the race shadow (two of them never race, and blocks run one
 * after another here). Returns the old value. */
static unsigned emu_atomic_u32(unsigned *p, unsigned v, bool add) {
    emu_L->stats.atomics++;
    emu_in_atomic = true;
    unsigned *r = (unsigned *)emu_global(p, 0, 4, 4, false);
    if (r != (unsigned *)emu_sink) r = (unsigned *)emu_global(p, 0, 4, 4, true);
    emu_in_atomic = false;
    unsigned old = *r;
    *r = add ? old + v : v;
    return old;
}

/* sm_80 cp.async in flight (cuda_emu_sm80.h): per 4 bytes of dynamic
 * shared memory, the copies that will still write them; their count. */
static uint16_t *emu_cpa_pend;
static long emu_cpa_inflight;

/* The cluster shadow of a block's shared memory, per granule: the
 * barrier.cluster epoch of its last write (0: none in this cluster's run)
 * and the writer's rank; the epoch of its last reads through distributed
 * shared memory and the ranks that read. A write and another rank's read
 * in one epoch are a race; a remote read of a granule never written is
 * uninitialised. */
struct emu_xcell { uint32_t w_ep, r_ep; uint16_t r_mask; uint8_t w_rank; };
static emu_xcell *emu_x_dyn, *emu_x_st;   /* the running block's */
static void emu_xwrite(emu_xcell *x, size_t g, const char *space, size_t off) {
    for (size_t k = 0; k < g; k++, x++) {
        if ((emu_L->checks & EMU_CHECK_RACES) && x->r_ep == emu_cl_epoch && (x->r_mask & ~(1u << emu_cl_rank))) {
            char w[200];
            unsigned q = 0;
            while (!((x->r_mask >> q) & 1) || q == emu_cl_rank) q++;
            emu_report(EMU_FIND_RACE, "%s: block %u (cluster rank %u) read it through distributed shared memory, "
                       "thread (block %u, thread %d) writes it with no barrier.cluster between",
                       emu_where(w, sizeof w, false, space, off + (k << emu_gshift)), emu_block.x - emu_cl_rank + q,
                       q, emu_block.x, emu_cur_i);
            x->r_mask = 0;
        }
        x->w_ep = emu_cl_epoch;
        x->w_rank = (uint8_t)emu_cl_rank;
    }
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
    char w[200];
    if ((L->checks & EMU_CHECK_BOUNDS) && ((uintptr_t)a % align) != 0)
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): misaligned %zu-byte shared %s at %s",
                   emu_block.x, emu_cur_i, n, write ? "store" : "load", emu_where(w, sizeof w, false, space, off));
    emu_cell *c = cells + (off >> emu_gshift);
    size_t g = emu_granules(off, n);
    if (emu_cpa_inflight && cells == emu_dyn_cells && (L->checks & EMU_CHECK_RACES))
        for (size_t q = off >> 2; q <= (off + n - 1) >> 2; q++)
            if (emu_cpa_pend[q]) {
                emu_report(EMU_FIND_RACE, "%s: thread (block %u, thread %d) %s it while a cp.async to it is "
                           "in flight (no cp.async.wait_group that lands it, or no __syncthreads after that)",
                           emu_where(w, sizeof w, false, space, q << 2), emu_block.x, emu_cur_i,
                           write ? "writes" : "reads");
                break;
            }
    if (!write && (L->checks & EMU_CHECK_INIT))
        for (size_t k = 0; k < g; k++)
            if (c[k].ws < emu_bstart) {
                emu_report(EMU_FIND_INIT, "thread (block %u, thread %d) reads %s, which this block never wrote",
                           emu_block.x, emu_cur_i,
                           emu_where(w, sizeof w, false, space, (off >> emu_gshift << emu_gshift) + (k << emu_gshift)));
                break;
            }
    if (L->checks & EMU_CHECK_RACES) emu_race_at(cells, off, n, write, false, space);
    else if (write) for (size_t k = 0; k < g; k++) c[k].ws = emu_wstamp[emu_cur_i >> 5];
    if (write && emu_cl_n > 1)
        emu_xwrite((cells == emu_dyn_cells ? emu_x_dyn : emu_x_st) + (off >> emu_gshift), g, space,
                   off >> emu_gshift << emu_gshift);
    if (write && cells == emu_dyn_cells && emu_dyn_pw) {
        ++emu_pclock;
        for (size_t k = 0; k < g; k++) {
            emu_dyn_pw[(off >> emu_gshift) + k] = emu_pclock;
            emu_dyn_pt[(off >> emu_gshift) + k] = (uint16_t)emu_cur_i;
        }
    }
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
template <class V, class T> static inline V *emu_gstv(T *p, long long i) {
    return (V *)emu_global(p, i, sizeof(T), sizeof(V), true);
}
template <class T> static inline const T *emu_sld(const T *p) { return (const T *)emu_shared((void *)p, sizeof(T), alignof(T), false); }
template <class T> static inline T *emu_sst(T *p) { return (T *)emu_shared(p, sizeof(T), alignof(T), true); }
#define MC_GLD(p, i) (*emu_gld(p, i))
#define MC_GST(p, i, v) (*emu_gst(p, i) = (v))
#define MC_GLDV(T, p, i) (*emu_gldv<T>(p, i))
#define MC_GSTV(T, p, i, v) (*emu_gstv<T>(p, i) = (v))
#define MC_SLD(x) (*emu_sld(&(x)))
#define MC_SST(x, v) (*emu_sst(&(x)) = (v))

static inline void emu_park(int state) {
    emu_threads[emu_cur_i].state = state;
    emu_to_sched();
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

/* ---- shared addresses: a shared address (what __cvta_generic_to_shared
 * gives, and ldmatrix row addresses, wgmma descriptors and mbarrier
 * operands hold) is the byte offset in the block's window: dynamic shared
 * memory at 0 (1024-aligned, so swizzle patterns that follow address bits
 * match the GPU's), the static __shared__ section after it. */
static uint32_t emu_smem_static_at() { return (uint32_t)((emu_L->smem + 1023) / 1024 * 1024); }
static inline uint32_t __cvta_generic_to_shared(const void *p) {
    const unsigned char *a = (const unsigned char *)p;
    if (a >= emu_dyn_smem && a <= emu_dyn_smem + emu_L->smem) return (uint32_t)(a - emu_dyn_smem);
    if (__start_emu_smem && a >= (unsigned char *)__start_emu_smem && a <= (unsigned char *)__stop_emu_smem)
        return emu_smem_static_at() + (uint32_t)(a - (unsigned char *)__start_emu_smem);
    emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d) takes the shared address of %p, which is not "
               "shared memory", emu_block.x, emu_cur_i, p);
    return 0xffffffffu;
}
/* The host pointer of shared address s, or the sink (reported) */
static unsigned char *emu_sptr(uint32_t s, size_t n) {
    uint32_t st = emu_smem_static_at();
    size_t nst = __start_emu_smem ? (size_t)(__stop_emu_smem - __start_emu_smem) : 0;
    if ((size_t)s + n <= emu_L->smem) return emu_dyn_smem + s;
    if (s >= st && (size_t)(s - st) + n <= nst) return (unsigned char *)__start_emu_smem + (s - st);
    emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): shared address %u (+%zu bytes) is outside the "
               "block's %zu dynamic and %zu static bytes", emu_block.x, emu_cur_i, s, n, emu_L->smem, nst);
    return emu_sink;
}

/* ---- a cluster's blocks: the state one block keeps while another runs */
struct emu_bs {
    emu_thread *threads;
    emu_dim3 block;
    unsigned char *dyn, *st_save;
    emu_cell *dyn_cells, *st_cells;
    emu_xcell *x_dyn, *x_st;
    unsigned long long *dyn_pw;
    uint16_t *dyn_pt;
    uint32_t bstart, blast, wstamp[32];
    struct emu_s90 *s90;   /* the sm_90a state (cuda_emu_sm90.h) */
    unsigned char wsync[32];
    unsigned long long pbstart, pfence[1024];
    bool exited;
};
static emu_bs *emu_cl_bs;   /* emu_cl_n of them */
static struct emu_s90 *emu_s9;   /* the running block's sm_90a state */
static size_t emu_st_bytes() { return __start_emu_smem ? (size_t)(__stop_emu_smem - __start_emu_smem) : 0; }
static void emu_cl_save() {
    emu_bs *b = &emu_cl_bs[emu_cl_rank];
    /* a warp's exchange (ldmatrix, stmatrix, shuffles: their row
     * addresses and values in arrays shared by the cluster's blocks) is
     * never left half done by a switch */
    for (int t = 0; t < emu_nthreads; t++)
        if (emu_threads[t].state == EMU_WARP) {
            emu_report(EMU_FIND_HANG, "block %u, thread %d: the cluster's blocks switched while its warp was in a "
                       "warp-wide exchange (some lanes wait elsewhere: a divergent collective)", emu_block.x, t);
            emu_failed = 1;
            break;
        }
    b->bstart = emu_bstart;
    b->blast = emu_blast;
    memcpy(b->wstamp, emu_wstamp, sizeof emu_wstamp);
    memcpy(b->wsync, emu_wsync, sizeof emu_wsync);
    b->pbstart = emu_pbstart;
    memcpy(b->pfence, emu_pfence, sizeof emu_pfence);
    if (b->st_save && emu_st_bytes()) memcpy(b->st_save, __start_emu_smem, emu_st_bytes());
}
static void emu_cl_load(unsigned r) {
    emu_bs *b = &emu_cl_bs[r];
    emu_cl_rank = r;
    emu_threads = b->threads;
    emu_block = b->block;
    emu_dyn_smem = b->dyn;
    emu_dyn_cells = b->dyn_cells;
    emu_st_cells = b->st_cells;
    emu_x_dyn = b->x_dyn;
    emu_x_st = b->x_st;
    emu_dyn_pw = b->dyn_pw;
    emu_dyn_pt = b->dyn_pt;
    emu_bstart = b->bstart;
    emu_blast = b->blast;
    memcpy(emu_wstamp, b->wstamp, sizeof emu_wstamp);
    emu_s9 = b->s90;
    memcpy(emu_wsync, b->wsync, sizeof emu_wsync);
    emu_pbstart = b->pbstart;
    memcpy(emu_pfence, b->pfence, sizeof emu_pfence);
    if (b->st_save && emu_st_bytes()) memcpy(__start_emu_smem, b->st_save, emu_st_bytes());
}
/* Makes block r of the cluster the running one. */
static void emu_cl_switch(unsigned r) {
    if (emu_cl_n <= 1 || r == emu_cl_rank) return;
    emu_cl_save();
    emu_cl_load(r);
}

/* %cluster_ctarank, %cluster_nctarank; barrier.cluster.arrive.release +
 * barrier.cluster.wait.acquire (a lone block is a cluster of one) */
static inline unsigned mc_cluster_rank() { return emu_cl_rank; }
static inline unsigned mc_cluster_size() { return emu_cl_n; }
static inline void mc_cluster_sync() { emu_park(EMU_CLUSTER); }

/* mapa.shared::cluster + ld.shared::cluster: n bytes at p (an address in
 * this block's shared memory) in the shared memory of the cluster's block
 * of the given rank; checked for the rank, the bounds, the alignment, a
 * block that has exited, a granule never written and a write in the same
 * barrier.cluster epoch by another rank. */
static const void *emu_dsmem(const void *p, size_t n, size_t align, unsigned rank) {
    if (rank == emu_cl_rank) return emu_shared((void *)p, n, align, false);
    const unsigned char *a = (const unsigned char *)p;
    if (rank >= emu_cl_n) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d) maps shared memory of cluster rank %u; the "
                   "cluster has %u blocks", emu_block.x, emu_cur_i, rank, emu_cl_n);
        return emu_sink;
    }
    emu_bs *b = &emu_cl_bs[rank];
    const unsigned char *host;
    emu_xcell *x;
    size_t off;
    const char *space;
    if (a >= emu_dyn_smem && a + n <= emu_dyn_smem + emu_L->smem) {
        off = (size_t)(a - emu_dyn_smem);
        host = b->dyn + off;
        x = b->x_dyn;
        space = "dynamic shared";
    } else if (emu_st_bytes() && a >= (unsigned char *)__start_emu_smem && a + n <= (unsigned char *)__stop_emu_smem) {
        off = (size_t)(a - (unsigned char *)__start_emu_smem);
        host = b->st_save + off;
        x = b->x_st;
        space = "static shared";
    } else {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d) reads %zu bytes of distributed shared memory "
                   "outside the block's shared memory (%+lld from the dynamic base)", emu_block.x, emu_cur_i, n,
                   (long long)(a - emu_dyn_smem));
        return emu_sink;
    }
    if (!emu_L->checks) return host;
    char w[200];
    if ((emu_L->checks & EMU_CHECK_BOUNDS) && ((uintptr_t)a % align) != 0)
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): misaligned %zu-byte distributed shared load at %s",
                   emu_block.x, emu_cur_i, n, emu_where(w, sizeof w, false, space, off));
    if (b->exited) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d) reads %s of block %u (cluster rank %u), which has "
                   "exited (a barrier.cluster before it exits keeps its shared memory)", emu_block.x, emu_cur_i,
                   emu_where(w, sizeof w, false, space, off), b->block.x, rank);
        return emu_sink;
    }
    x += off >> emu_gshift;
    for (size_t k = 0; k < emu_granules(off, n); k++, x++) {
        size_t at = (off >> emu_gshift << emu_gshift) + (k << emu_gshift);
        if ((emu_L->checks & EMU_CHECK_INIT) && x->w_ep == 0)
            emu_report(EMU_FIND_INIT, "thread (block %u, thread %d) reads %s of block %u (cluster rank %u), which "
                       "that block never wrote", emu_block.x, emu_cur_i, emu_where(w, sizeof w, false, space, at),
                       b->block.x, rank);
        else if ((emu_L->checks & EMU_CHECK_RACES) && x->w_ep == emu_cl_epoch && x->w_rank != emu_cl_rank)
            emu_report(EMU_FIND_RACE, "%s of block %u (cluster rank %u): written by that block, read by thread "
                       "(block %u, thread %d) through distributed shared memory with no barrier.cluster between",
                       emu_where(w, sizeof w, false, space, at), b->block.x, rank, emu_block.x, emu_cur_i);
        if (x->r_ep != emu_cl_epoch) x->r_ep = emu_cl_epoch, x->r_mask = 0;
        x->r_mask |= (uint16_t)(1u << emu_cl_rank);
    }
    return host;
}
template <class T> static inline T mc_dsmem_ld(const T *p, unsigned rank) {
    return *(const T *)emu_dsmem(p, sizeof(T), alignof(T), rank);
}

/* ---- the instructions of each architecture, in sibling headers (found
 * next to this one, wherever it lives): they use everything above, and
 * emu_entry / emu_run below call their per-block and per-launch hooks. */
#include "cuda_emu_sm90.h"
#include "cuda_emu_sm80.h"

static void emu_entry() {
    emu_L->body(emu_L->body_args ? emu_L->body_args : emu_L->args);
    emu_cp_async_wait(0);   /* copies still in flight complete */
    emu_threads[emu_cur_i].state = EMU_DONE;
    emu_to_sched();
}

#if EMU_FAST_SWITCH
/* A fresh thread's stack: the six callee-saved registers emu_ctx_switch
 * pops, then emu_entry as the address it returns to, then a null return
 * address for emu_entry (which never returns): at emu_entry's first
 * instruction the stack is aligned as after a call. */
static void *emu_fresh_stack(char *stack, size_t bytes) {
    uintptr_t top = ((uintptr_t)(stack + bytes)) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = 0;
    *--sp = (void *)emu_entry;
    for (int i = 0; i < 6; i++) *--sp = 0;
    return sp;
}
#endif

/* New stamps for every warp: a block begins or passes __syncthreads. */
static void emu_barrier_stamps() {
    emu_blast = emu_clock;
    for (int w = 0; w < (emu_nthreads + 31) / 32; w++) emu_wstamp[w] = emu_clock++;
}

static emu_cell *emu_cells(size_t bytes) {
    return bytes ? (emu_cell *)calloc(emu_granules(0, bytes), sizeof(emu_cell)) : NULL;
}

/* Thread switches so far: a cluster whose blocks all return without one
 * more is stuck. */
static unsigned long long emu_progress;

/* The running block's threads by state, for a hang's finding */
static void emu_block_states(char *buf, size_t n) {
    int bar = 0, clu = 0, mbar = 0, other = 0, done = 0;
    for (int t = 0; t < emu_nthreads; t++) {
        int st = emu_threads[t].state;
        done += st == EMU_DONE;
        bar += st == EMU_BARRIER;
        clu += st == EMU_CLUSTER;
        mbar += st == EMU_DONE + 1;   /* EMU_MBAR (cuda_emu_sm90.h) */
        other += st > EMU_DONE + 1 && st != EMU_CLUSTER;
    }
    snprintf(buf, n, "%d threads at __syncthreads, %d at barrier.cluster, %d at an mbarrier, %d at a named barrier "
             "or wgmma wait, %d exited", bar, clu, mbar, other, done);
}

/* Runs the running block's threads until every one has exited (0), every
 * one waits at barrier.cluster (1), in a cluster: none can run but some
 * wait on an mbarrier another block may complete (2), or a hang (-1,
 * reported). */
static int emu_block_run() {
    unsigned bx = emu_block.x;
    for (;;) {
        bool ran = false;
        for (int t = 0; t < emu_nthreads; t++)
            if (emu_threads[t].state == EMU_RUN) {
                emu_cur_i = t;
                emu_progress++;
#if EMU_FAST_SWITCH
                emu_ctx_switch(&emu_sched_sp, emu_threads[t].sp);
#else
                swapcontext(&emu_sched, &emu_threads[t].ctx);
#endif
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
        if (emu_failed) return -1;
        if (released) continue;
        int done = 0, bar = 0, other = 0, clu = 0;
        for (int t = 0; t < emu_nthreads; t++) {
            done += emu_threads[t].state == EMU_DONE;
            bar += emu_threads[t].state == EMU_BARRIER;
            clu += emu_threads[t].state == EMU_CLUSTER;
            other += emu_threads[t].state > EMU_DONE && emu_threads[t].state != EMU_CLUSTER;
        }
        if (done == emu_nthreads) {
            emu_sm90_block_end();
            return 0;
        }
        if (bar + done == emu_nthreads && done == 0) {
            for (int t = 0; t < emu_nthreads; t++) emu_threads[t].state = EMU_RUN;
            emu_barrier_stamps();
            continue;
        }
        if (clu == emu_nthreads) return 1;
        if (emu_cl_n > 1) {   /* a remote arrival or multicast may complete a wait: the cluster decides */
            for (int t = 0; t < emu_nthreads; t++)
                if (emu_threads[t].state == EMU_DONE + 1) return 2;
        }
        char what[200];
        emu_block_states(what, sizeof what);
        emu_report(EMU_FIND_HANG, "block %u: %s (barrier divergence or a wait nobody completes)", bx, what);
        emu_failed = 1;
        return -1;
    }
}

extern "C" int emu_run(emu_launch *L) {
    const size_t STACK = 256 * 1024;
    unsigned grid = L->grid, block = L->block;
    size_t smem = L->smem;
    emu_L = L;
    memset(&L->stats, 0, sizeof L->stats);
    memset(L->findings, 0, sizeof L->findings);
    if (L->messages && L->messages_size) L->messages[0] = 0;
    memset(emu_reports, 0, sizeof emu_reports);
    emu_failed = 0;
    emu_bdim = {block, 1, 1};
    emu_gdim = {grid, 1, 1};
    emu_nthreads = (int)block;
    emu_threads = (emu_thread *)calloc(block, sizeof(emu_thread));
    emu_dyn_smem = (unsigned char *)aligned_alloc(1024, smem ? (smem + 1023) / 1024 * 1024 : 1024);
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
    /* one shadow per cluster of overlapping tracked buffers (one device
     * allocation and what lies in it), never one span across allocations
     * that lie far apart in the host's address space */
    emu_cell **spans = (emu_cell **)calloc((size_t)L->n_buffers + 1, sizeof(emu_cell *));
    int n_spans = 0;
    emu_gshift = (L->checks & EMU_CHECK_BYTES) ? 0 : 1;
    for (int j = 0; j < L->n_buffers; j++) emu_gb[j].b = &L->buffers[j];
    if (L->checks & EMU_CHECK_RACES) {
        char *tracked = (char *)calloc((size_t)L->n_buffers + 1, 1);
        int *cluster = (int *)malloc(sizeof(int) * ((size_t)L->n_buffers + 1));
        for (int k = 0; k < L->n_args && k < 64; k++)
            if (emu_arg_buf[k] >= 0 && ((L->write_args >> k) & 1)) tracked[emu_arg_buf[k]] = 2;
        for (int j = 0; j < L->n_buffers; j++)
            for (int w = 0; w < L->n_buffers && !tracked[j]; w++)
                if (tracked[w] == 2 && L->buffers[j].base < L->buffers[w].base + L->buffers[w].bytes &&
                    L->buffers[w].base < L->buffers[j].base + L->buffers[j].bytes)
                    tracked[j] = 1;
        for (int j = 0; j < L->n_buffers; j++) cluster[j] = tracked[j] ? j : -1;
        for (bool merged = true; merged;) {   /* overlapping tracked buffers share a cluster (its lowest index) */
            merged = false;
            for (int j = 0; j < L->n_buffers; j++)
                for (int w = 0; w < L->n_buffers; w++)
                    if (cluster[j] >= 0 && cluster[w] > cluster[j] &&
                        L->buffers[j].base < L->buffers[w].base + L->buffers[w].bytes &&
                        L->buffers[w].base < L->buffers[j].base + L->buffers[j].bytes) {
                        cluster[w] = cluster[j];
                        merged = true;
                    }
        }
        for (int c = 0; c < L->n_buffers; c++) {
            unsigned char *lo = NULL, *hi = NULL;
            for (int j = 0; j < L->n_buffers; j++)
                if (cluster[j] == c) {
                    if (!lo || L->buffers[j].base < lo) lo = L->buffers[j].base;
                    if (!hi || L->buffers[j].base + L->buffers[j].bytes > hi) hi = L->buffers[j].base + L->buffers[j].bytes;
                }
            lo = (unsigned char *)((uintptr_t)lo >> emu_gshift << emu_gshift);
            if (!lo || hi <= lo) continue;
            emu_cell *cells = emu_cells((size_t)(hi - lo));
            spans[n_spans++] = cells;
            for (int j = 0; j < L->n_buffers; j++)   /* granule-aligned buffers */
                if (cluster[j] == c &&
                    ((uintptr_t)L->buffers[j].base >> emu_gshift << emu_gshift) == (uintptr_t)L->buffers[j].base)
                    emu_gb[j].cells = cells + (L->buffers[j].base - lo) / (1 << emu_gshift);
        }
        free(cluster);
        free(tracked);
    }
    emu_sm80_launch_begin(block, smem);
    /* the blocks of a cluster: their threads, shared memory and shadows */
    unsigned C = L->cluster > 1 ? L->cluster : 1;
    size_t nst = emu_st_bytes();
    if (C > EMU_CL_MAX) {
        emu_report(EMU_FIND_BOUNDS, "clusters of %u blocks (the emulator runs up to %d)", C, EMU_CL_MAX);
        C = 1;
        grid = 0;
        emu_failed = 1;
    }
    emu_G = (int)C * EMU_WARPS;
    emu_seen_m = (uint32_t *)calloc((size_t)emu_G * (size_t)emu_G, sizeof(uint32_t));
    emu_cl_n = C;
    emu_cl_rank = 0;
    emu_cl_bs = (emu_bs *)calloc(C, sizeof(emu_bs));
    for (unsigned r = 0; r < C; r++) {
        emu_bs *b = &emu_cl_bs[r];
        b->threads = r ? (emu_thread *)calloc(block, sizeof(emu_thread)) : emu_threads;
        b->s90 = emu_sm90_state_new(r);
        if (r) for (unsigned t = 0; t < block; t++) b->threads[t].stack = (char *)malloc(STACK);
        b->dyn = r ? (unsigned char *)aligned_alloc(1024, smem ? (smem + 1023) / 1024 * 1024 : 1024) : emu_dyn_smem;
        b->dyn_cells = emu_cells(smem);
        b->st_cells = emu_cells(nst);
        b->dyn_pw = smem ? (unsigned long long *)calloc(emu_granules(0, smem), sizeof *b->dyn_pw) : NULL;
        b->dyn_pt = smem ? (uint16_t *)calloc(emu_granules(0, smem), sizeof *b->dyn_pt) : NULL;
        if (C > 1) {
            b->st_save = (unsigned char *)calloc(nst ? nst : 1, 1);
            b->x_dyn = (emu_xcell *)calloc(smem ? emu_granules(0, smem) : 1, sizeof(emu_xcell));
            b->x_st = (emu_xcell *)calloc(nst ? emu_granules(0, nst) : 1, sizeof(emu_xcell));
        }
    }
    emu_cl_load(0);
    if (grid % C) {
        emu_report(EMU_FIND_BOUNDS, "a grid of %u blocks in clusters of %u (the grid must be a multiple)", grid, C);
        emu_failed = 1;
    }
    for (unsigned cb = 0; cb < grid && !emu_failed; cb += C) {
        /* every block of the cluster begins before any runs */
        emu_cstart = emu_cl_stamp = emu_clock;
        emu_cl_epoch = 1;
        for (unsigned r = 0; r < C; r++) {
            emu_cl_switch(r);
            unsigned bx = cb + r;
            emu_cl_bs[r].block = emu_block = {bx, 0, 0};
            emu_cl_bs[r].exited = false;
            memset(emu_dyn_smem, 0xcd, smem ? smem : 16);   /* garbage, like the GPU */
            if (C > 1) {
                memset(emu_x_dyn, 0, (smem ? emu_granules(0, smem) : 1) * sizeof(emu_xcell));
                memset(emu_x_st, 0, (nst ? emu_granules(0, nst) : 1) * sizeof(emu_xcell));
            }
            emu_bstart = emu_block_stamp[bx] = emu_clock;
            emu_pbstart = emu_pclock;
            emu_barrier_stamps();
            memset(emu_wsync, 0, sizeof emu_wsync);
            emu_sm80_block_begin();
            emu_sm90_block_begin();
            for (unsigned t = 0; t < block; t++) {
                emu_thread *th = &emu_threads[t];
                th->tid = {t, 0, 0};
                th->state = EMU_RUN;
#if EMU_FAST_SWITCH
                th->sp = emu_fresh_stack(th->stack, STACK);
                continue;
#endif
                getcontext(&th->ctx);
                th->ctx.uc_stack.ss_sp = th->stack;
                th->ctx.uc_stack.ss_size = STACK;
                th->ctx.uc_link = NULL;
                makecontext(&th->ctx, emu_entry, 0);
            }
        }
        /* each block runs until it is done or all its threads wait at
         * barrier.cluster; when every block of the cluster waits there,
         * all are released */
        for (;;) {
            unsigned waiting = 0, exited = 0;
            const unsigned long long before = emu_progress;
            for (unsigned r = 0; r < C && !emu_failed; r++) {
                if (emu_cl_bs[r].exited) {
                    exited++;
                    continue;
                }
                emu_cl_switch(r);
                int rc = emu_block_run();
                if (rc == 0) {
                    emu_cl_bs[r].exited = true;
                    exited++;
                } else if (rc == 1) {
                    waiting++;
                }
            }
            if (emu_failed || exited == C) break;
            if (waiting < C && emu_progress != before) continue;   /* a block ran: another may run now */
            if (waiting == C) {
                emu_cl_stamp = emu_clock;
                emu_cl_epoch++;
                for (unsigned r = 0; r < C; r++) {
                    emu_cl_switch(r);
                    for (int t = 0; t < emu_nthreads; t++) emu_threads[t].state = EMU_RUN;
                    emu_barrier_stamps();
                }
                continue;
            }
            char what[600] = "";
            for (unsigned r = 0; r < C; r++) {
                if (emu_cl_bs[r].exited) continue;
                emu_cl_switch(r);
                size_t used = strlen(what);
                snprintf(what + used, sizeof what - used, "; block %u: ", cb + r);
                used = strlen(what);
                emu_block_states(what + used, sizeof what - used);
            }
            emu_report(EMU_FIND_HANG, "cluster of blocks %u..%u: %u blocks wait at barrier.cluster, %u have exited%s "
                       "(a block that skips the cluster barrier, or a wait no block of the cluster completes)", cb,
                       cb + C - 1, waiting, exited, what);
            emu_failed = 1;
        }
    }
    /* cp.async's per-thread queues are not a block's state the cluster's
     * switch keeps (ldmatrix's and stmatrix's row addresses are: a warp's
     * exchange completes inside its block's run, emu_cl_save checks) */
    if (C > 1 && L->stats.cp_async) {
        emu_report(EMU_FIND_HANG, "a cluster launch used cp.async: the emulator runs clusters of sm_90a blocks "
                   "(TMA, mbarriers, wgmma, named barriers, ldmatrix / stmatrix), not sm_80 pipelines");
        emu_failed = 1;
    }
    emu_cl_switch(0);
    for (unsigned r = 0; r < C; r++) {
        emu_bs *b = &emu_cl_bs[r];
        if (r) {
            for (unsigned t = 0; t < block; t++) free(b->threads[t].stack);
            free(b->threads);
            free(b->dyn);
        }
        free(b->dyn_cells);
        free(b->st_cells);
        free(b->dyn_pw);
        free(b->dyn_pt);
        free(b->st_save);
        free(b->x_dyn);
        free(b->x_st);
        emu_sm90_state_free(b->s90);
    }
    emu_s9 = NULL;
    free(emu_seen_m);
    emu_seen_m = NULL;
    emu_G = EMU_WARPS;
    free(emu_cl_bs);
    emu_cl_bs = NULL;
    emu_cl_n = 1;
    emu_cl_rank = 0;
    emu_dyn_pw = NULL;
    emu_dyn_pt = NULL;
    emu_x_dyn = emu_x_st = NULL;
    for (unsigned t = 0; t < block; t++) free(emu_threads[t].stack);
    free(emu_threads);
    free(emu_dyn_smem);
    for (int k = 0; k < n_spans; k++) free(spans[k]);
    free(spans);
    free(emu_gb);
    free(emu_arg_buf);
    free(emu_block_stamp);
    emu_sm80_launch_end();
    emu_last_stats = L->stats;
    int total = 0, more = 0;
    for (int k = 0; k < EMU_FIND_KINDS; k++) {
        total += L->findings[k];
        more += L->findings[k] > 3 ? L->findings[k] - 3 : 0;
    }
    if (more && !L->quiet) fprintf(stderr, "emu: %s: %d more findings\n", L->kernel, more);
    if (more && L->messages && L->messages_size) {
        size_t used = strlen(L->messages);
        if (used < L->messages_size)
            snprintf(L->messages + used, L->messages_size - used, "(%d more findings)\n", more);
    }
    return emu_failed || total ? -1 : 0;
}

#endif /* __cplusplus */
#endif
