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
// 2t(+1)). The sm_90a section emulates wgmma.mma_async (shared-memory
// descriptors with swizzle, deferred to wgmma.wait_group), TMA tile loads
// from tensor maps, mbarriers with transaction counts, named barriers and
// setmaxnreg (docs/codegen.md "The sm_90a emulator"); the sm_80 section
// cp.async with its commit / wait groups (a copy lands at the wait) and
// ldmatrix. Only what the mcir
// templates use is provided. Compiled as C++ by the test with the generated
// source after it.
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
enum { EMU_RUN, EMU_BARRIER, EMU_WARP, EMU_DONE };
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
/* emu_seen[t][u]: the latest stamp of warp u (32: the TMA unit) that
 * happens before warp t's current interval through mbarriers and named
 * barriers (sm_90a section below) */
enum { EMU_TMA_WARP = 32, EMU_WARPS = 33 };
static uint32_t emu_seen[EMU_WARPS][EMU_WARPS];
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
 * the count at its last fence.proxy.async. */
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
    if (s < emu_bstart) return global;
    int t = emu_cur_i;
    if (u == t) return false;
    if ((u >> 5) == (t >> 5)) return s == emu_wstamp[t >> 5];
    return s >= emu_blast && s > emu_seen[t >> 5][u >> 5];
}

/* Records an access to the granules of cells[0..n) and reports a race with
 * an earlier one; where: "shared offset N" / "'buf' + N". */
static bool emu_live(uint32_t s, bool global) {
    return s && (s >= emu_blast || (global && s < emu_bstart));
}

/* The granules an access of n bytes at byte off covers. */
static size_t emu_granules(size_t off, size_t n) {
    return ((off + n - 1) >> emu_gshift) - (off >> emu_gshift) + 1;
}

static void emu_race(emu_cell *c, size_t n, bool write, bool global, const char *space, size_t off);

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
    int t = emu_cur_i;
    uint32_t now = emu_wstamp[t >> 5];
    for (size_t k = 0; k < n; k++, c++) {
        uint32_t ps = 0;
        int pu = 0, pw = 0;
        if (emu_unordered(c->ws, c->wt, global)) { ps = c->ws; pu = c->wt; pw = 1; }
        else if (write && emu_unordered(c->rs, c->rt, global)) { ps = c->rs; pu = c->rt; }
        else if (write && emu_unordered(c->r2s, c->r2t, global)) { ps = c->r2s; pu = c->r2t; }
        if (ps) {
            char w[200];
            emu_report(EMU_FIND_RACE, "%s: thread (block %u, thread %d%s) %s it, "
                       "thread (block %u, thread %d) %s it with no %s between",
                       emu_where(w, sizeof w, global, space, off + (k << emu_gshift)), emu_block_of(ps), pu,
                       pu >> 5 == 32 ? ": the TMA unit" : "", pw ? "wrote" : "read", emu_block.x, t,
                       write ? "writes" : "reads",
                       ps < emu_bstart ? "ordering (another block of the launch)"
                       : (pu >> 5) == (t >> 5) ? "__syncwarp or __syncthreads"
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
static void *emu_global(const void *p, long long i, size_t sz, size_t n, bool write) {
    emu_launch *L = emu_L;
    {   /* a generic pointer into the block's shared memory (a value chain
         * pointed at a staged tile, gemm_sm90.cuh's prologue): a shared access */
        unsigned char *a = (unsigned char *)p + i * (long long)sz;
        if ((a >= emu_dyn_smem && a < emu_dyn_smem + L->smem) ||
            (__start_emu_smem && a >= (unsigned char *)__start_emu_smem && a < (unsigned char *)__stop_emu_smem))
            return emu_shared(a, n, sz, write);
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
    if (emu_gb[bi].cells)
        emu_race_at(emu_gb[bi].cells, (size_t)off, n, write, true, b->name);
    return a;
}

/* sm_80 cp.async in flight (section below): per 16 bytes of dynamic
 * shared memory, the copies that will still write them; their count. */
static uint16_t *emu_cpa_pend;
static long emu_cpa_inflight;

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
        for (size_t q = off >> 4; q <= (off + n - 1) >> 4; q++)
            if (emu_cpa_pend[q]) {
                emu_report(EMU_FIND_RACE, "%s: thread (block %u, thread %d) %s it while a cp.async to it is "
                           "in flight (no cp.async.wait_group that lands it, or no __syncthreads after that)",
                           emu_where(w, sizeof w, false, space, q << 4), emu_block.x, emu_cur_i,
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
    if (write && cells == emu_dyn_cells && emu_dyn_pw) {
        ++emu_pclock;
        for (size_t k = 0; k < g; k++) {
            emu_dyn_pw[(off >> emu_gshift) + k] = emu_pclock;
            emu_dyn_pt[(off >> emu_gshift) + k] = (uint16_t)emu_cur_i;
        }
    }
    return a;
}

/* An async-proxy read of n bytes of shared memory at p (a wgmma operand, a
 * TMA store's source): a granule a thread wrote through the generic proxy
 * in this block with no fence.proxy.async of that thread since is a race. */
static void emu_proxy_read(const unsigned char *p, size_t n, const char *what) {
    emu_launch *L = emu_L;
    if (!(L->checks & EMU_CHECK_RACES) || !emu_dyn_pw || p < emu_dyn_smem || p + n > emu_dyn_smem + L->smem) return;
    size_t off = (size_t)(p - emu_dyn_smem), g = emu_granules(off, n);
    for (size_t k = 0; k < g; k++) {
        size_t gi = (off >> emu_gshift) + k;
        unsigned long long w = emu_dyn_pw[gi];
        int wt = emu_dyn_pt[gi];
        if (w > emu_pbstart && emu_pfence[wt] < w) {
            char at[200];
            emu_report(EMU_FIND_RACE, "%s: thread (block %u, thread %d) wrote it through the generic proxy and %s "
                       "reads it through the async proxy with no fence.proxy.async by that thread between",
                       emu_where(at, sizeof at, false, "dynamic shared", gi << emu_gshift), emu_block.x, wt, what);
            return;
        }
    }
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

/* ---- sm_90a: shared addresses, mbarriers, TMA, wgmma, named barriers
 * (what the Hopper attention template uses). A shared address (what
 * __cvta_generic_to_shared gives, and descriptors and mbarrier operands
 * hold) is the byte offset in the block's window: dynamic shared memory
 * at 0 (1024-aligned, so swizzle patterns that follow address bits match
 * the GPU's), the static __shared__ section after it.
 *
 * Ordering for the race detector: besides __syncthreads and __syncwarp,
 * an mbarrier phase, a named barrier and the TMA order accesses. Each warp
 * knows, per other warp (and the TMA unit, warp EMU_TMA_WARP), the latest
 * stamp that happens before its current interval (emu_seen); arriving on
 * an mbarrier or a named barrier publishes the warp's knowledge and starts
 * a new interval; completing a wait acquires what the barrier's completed
 * phase published. A TMA copy writes shared memory under a fresh stamp of
 * the TMA unit, published by complete_tx on its mbarrier. Granularity is
 * the warp: an arrive by one lane orders its warp-mates too (a race between
 * lanes of one warp across an mbarrier is missed).
 *
 * Asynchrony: TMA copies land at issue; wgmma.mma_async operations are
 * queued per warp group and executed, in order, when wgmma.wait_group
 * retires their commit group (shared operands read and accumulators
 * written then), so a kernel that reads accumulators or overwrites an
 * operand's shared memory before the wait sees wrong values or a race. */
enum { EMU_MBAR = EMU_DONE + 1, EMU_NAMED, EMU_WGROUP };

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

/* Joins what warp w knows into acc (release) and starts w's next interval. */
static void emu_publish(uint32_t *acc, int w) {
    for (int x = 0; x < EMU_WARPS; x++)
        if (emu_seen[w][x] > acc[x]) acc[x] = emu_seen[w][x];
    if (emu_wstamp[w] > acc[w]) acc[w] = emu_wstamp[w];
    emu_wstamp[w] = emu_clock++;
}
static void emu_acquire(int w, const uint32_t *acc) {
    for (int x = 0; x < EMU_WARPS; x++)
        if (acc[x] > emu_seen[w][x]) emu_seen[w][x] = acc[x];
}

/* mbarriers: side table by shared address (the 8 bytes hold nothing) */
struct emu_mbar {
    uint32_t at;
    unsigned count, pending, phase;
    long long tx;
    uint32_t acc[EMU_WARPS], done[EMU_WARPS];
};
enum { EMU_MAX_MBARS = 64 };
static emu_mbar emu_mbars[EMU_MAX_MBARS];
static int emu_n_mbars;
static int emu_wait_arg[1024];   /* per thread: mbarrier index / barrier id */
static unsigned emu_wait_parity[1024];

static emu_mbar *emu_mbar_find(const void *bar, bool create) {
    uint32_t at = __cvta_generic_to_shared(bar);
    if ((at & 7) != 0 && at != 0xffffffffu)
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): mbarrier at shared address %u is not 8-byte "
                   "aligned", emu_block.x, emu_cur_i, at);
    for (int i = 0; i < emu_n_mbars; i++)
        if (emu_mbars[i].at == at) return &emu_mbars[i];
    if (!create || emu_n_mbars == EMU_MAX_MBARS) {
        emu_report(EMU_FIND_INIT, "thread (block %u, thread %d) uses an mbarrier at shared address %u that "
                   "was never initialised", emu_block.x, emu_cur_i, at);
        return NULL;
    }
    emu_mbar *m = &emu_mbars[emu_n_mbars++];
    memset(m, 0, sizeof *m);
    m->at = at;
    return m;
}

/* The phase completes when every expected arrival came and the
 * transaction count is back to zero: waiters of that parity wake. */
static void emu_mbar_progress(emu_mbar *m) {
    if (m->pending != 0 || m->tx != 0) return;
    memcpy(m->done, m->acc, sizeof m->done);
    memset(m->acc, 0, sizeof m->acc);
    m->phase++;
    m->pending = m->count;
    int mi = (int)(m - emu_mbars);
    for (int t = 0; t < emu_nthreads; t++)
        if (emu_threads[t].state == EMU_MBAR && emu_wait_arg[t] == mi && (m->phase & 1) != emu_wait_parity[t]) {
            emu_acquire(t >> 5, m->done);
            emu_threads[t].state = EMU_RUN;
        }
}

static inline void emu_mbar_init(void *bar, unsigned count) {
    emu_mbar *m = emu_mbar_find(bar, true);
    if (!m) return;
    if (count == 0 || count >= (1u << 20))
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): mbarrier.init with count %u", emu_block.x,
                   emu_cur_i, count);
    m->count = m->pending = count;
    m->phase = 0;
    m->tx = 0;
    memset(m->acc, 0, sizeof m->acc);
    memset(m->done, 0, sizeof m->done);
    emu_publish(m->done, emu_cur_i >> 5);   /* waiting on the init orders after it */
}
static inline void emu_mbar_expect_tx(void *bar, unsigned bytes) {
    emu_mbar *m = emu_mbar_find(bar, false);
    if (m) m->tx += bytes;
}
static inline void emu_mbar_arrive(void *bar) {
    emu_mbar *m = emu_mbar_find(bar, false);
    if (!m) return;
    if (m->pending == 0) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): arrival on mbarrier %u beyond its count %u in "
                   "phase %u", emu_block.x, emu_cur_i, m->at, m->count, m->phase);
        return;
    }
    emu_publish(m->acc, emu_cur_i >> 5);
    m->pending--;
    emu_mbar_progress(m);
}
static inline void emu_mbar_arrive_expect_tx(void *bar, unsigned bytes) {
    emu_mbar_expect_tx(bar, bytes);
    emu_mbar_arrive(bar);
}
/* try_wait.parity: true once the phase of that parity completed; the
 * emulator parks the thread until then (the GPU's retry loop collapses). */
static inline bool emu_mbar_try_wait_parity(void *bar, unsigned parity) {
    emu_mbar *m = emu_mbar_find(bar, false);
    if (!m) return true;
    if ((m->phase & 1) == (parity & 1)) {
        emu_wait_arg[emu_cur_i] = (int)(m - emu_mbars);
        emu_wait_parity[emu_cur_i] = parity & 1;
        emu_park(EMU_MBAR);   /* woken by emu_mbar_progress, clocks acquired */
    } else {
        emu_acquire(emu_cur_i >> 5, m->done);
    }
    return true;
}

/* Named barriers (bar.sync / bar.arrive id, count): released at once when
 * the count-th thread arrives. */
struct emu_nbar { unsigned arrived, count; uint32_t acc[EMU_WARPS]; };
static emu_nbar emu_nbars[16];
static void emu_nbar_arrive(int id, unsigned count, bool wait) {
    if (id < 0 || id > 15 || count == 0 || count % 32 != 0 || count > (unsigned)emu_nthreads) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): bar id %d count %u (id 0..15, count a "
                   "multiple of 32 up to the block's %d threads)", emu_block.x, emu_cur_i, id, count, emu_nthreads);
        return;
    }
    emu_nbar *b = &emu_nbars[id];
    if (!wait) emu_L->stats.bar_arrives++;
    if (b->arrived && b->count != count)
        emu_report(EMU_FIND_HANG, "thread (block %u, thread %d): barrier %d used with counts %u and %u",
                   emu_block.x, emu_cur_i, id, b->count, count);
    b->count = count;
    emu_publish(b->acc, emu_cur_i >> 5);
    if (++b->arrived < count) {
        if (wait) {
            emu_wait_arg[emu_cur_i] = id;
            emu_park(EMU_NAMED);
        }
        return;
    }
    for (int t = 0; t < emu_nthreads; t++)
        if (emu_threads[t].state == EMU_NAMED && emu_wait_arg[t] == id) {
            emu_acquire(t >> 5, b->acc);
            emu_threads[t].state = EMU_RUN;
        }
    if (wait) emu_acquire(emu_cur_i >> 5, b->acc);
    b->arrived = 0;
    memset(b->acc, 0, sizeof b->acc);
}
static inline void emu_bar_sync(int id, unsigned count) { emu_nbar_arrive(id, count, true); }
static inline void emu_bar_arrive(int id, unsigned count) { emu_nbar_arrive(id, count, false); }

/* setmaxnreg: the request is checked and recorded per warp group in
 * emu_stats.maxnreg, and the registers each warp holds are counted. A
 * block starts with what ptxas gives a kernel of its size that uses
 * setmaxnreg, the 65536 / threads cap (168 for 384 threads: 64512, not
 * the SM's 65536; tests audit ptxas's count against it); an inc only
 * moves registers that other warps gave back, so where the warps' final
 * counts add up to more than the block holds, an inc waits forever
 * (emu_sm90_block_end reports it: the hang an H200 showed). */
static int emu_warp_regs[32], emu_regs_used;
static int emu_entry_regs() {
    int cap = 65536 / (((emu_nthreads + 31) / 32) * 32) / 8 * 8;
    return cap < 256 ? cap : 256;
}
static inline void emu_setmaxnreg(bool inc, int n) {
    if (n < 24 || n > 256 || n % 8 != 0)
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): setmaxnreg %d (24..256, a multiple of 8)",
                   emu_block.x, emu_cur_i, n);
    if (emu_cur_i / 128 < 8) emu_L->stats.maxnreg[emu_cur_i / 128] = inc ? n : -n;
    int w = emu_cur_i / 32, had = emu_warp_regs[w] ? emu_warp_regs[w] : emu_entry_regs();
    if (w < 32 && (emu_cur_i & 31) == 0) {
        if (inc ? n < had : n > had)
            emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): setmaxnreg.%s %d with %d registers held "
                       "(inc never lowers, dec never raises the count)", emu_block.x, emu_cur_i,
                       inc ? "inc" : "dec", n, had);
        emu_warp_regs[w] = n;
        emu_regs_used = 1;
    }
}

/* A shared write of n bytes at p by the async proxy (TMA), ordered after
 * what the issuing thread knows; its bytes take the TMA's stamp. */
static void emu_async_write(unsigned char *p, size_t n, uint32_t stamp) {
    emu_launch *L = emu_L;
    if (!L->checks || p == emu_sink) return;
    emu_cell *c = NULL;
    size_t off = 0;
    const char *space = "dynamic shared";
    if (p >= emu_dyn_smem && p + n <= emu_dyn_smem + L->smem) c = emu_dyn_cells, off = (size_t)(p - emu_dyn_smem);
    else c = emu_st_cells, off = (size_t)(p - (unsigned char *)__start_emu_smem), space = "static shared";
    if (L->checks & EMU_CHECK_RACES) emu_race_at(c, off, n, true, false, space);
    size_t g = emu_granules(off, n);
    if (c == emu_dyn_cells && emu_dyn_pw) memset(emu_dyn_pw + (off >> emu_gshift), 0, g * sizeof *emu_dyn_pw);
    c += off >> emu_gshift;
    for (size_t k = 0; k < g; k++) c[k].ws = stamp, c[k].wt = (uint16_t)(EMU_TMA_WARP * 32);
}
static inline void emu_fence_proxy_async() { emu_pfence[emu_cur_i] = emu_pclock; }

static inline unsigned emu_swizzle(unsigned addr, int mode) {   /* mode: 0 none, 1 32B, 2 64B, 3 128B */
    return mode ? addr ^ ((addr >> 3) & (((1u << mode) - 1) << 4)) : addr;
}

/* A TMA box's elements along each dimension (n[k], innermost first; the
 * box over the element strides) and in all. */
static inline size_t emu_tma_box(const emu_tensor_map *m, unsigned n[5]) {
    size_t total = 1;
    for (int k = 0; k < 5; k++) {
        n[k] = (m->box[k] + m->estride[k] - 1) / m->estride[k];
        total *= n[k];
    }
    return total;
}

/* Element e of a TMA box (n[k] elements along dimension k, innermost
 * first) at coords: its global element offset, and whether it lies outside
 * the tensor. */
static inline bool emu_tma_element(const emu_tensor_map *m, const int *coords, const unsigned *n, size_t e,
                                   long long *off) {
    bool oob = false;
    *off = 0;
    for (int k = 0; k < 5; k++) {
        long long c = (long long)(k < m->rank ? coords[k] : 0) + (long long)(e % n[k]) * m->estride[k];
        e /= n[k];
        if (c < 0 || c >= (long long)m->dims[k]) oob = true;
        *off += c * (long long)m->strides[k];
    }
    return oob;
}

/* cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes
 * [dst], [map, {c0..}], [bar]: the box at coords (innermost first), written
 * row after row at dst with the map's swizzle of the shared address bits,
 * out-of-bound elements zero (or NaN); the box's bytes complete on bar. */
struct __attribute__((aligned(64))) CUtensorMap { unsigned long long opaque[16]; };
static_assert(sizeof(emu_tensor_map) <= sizeof(CUtensorMap), "tensor map fits a CUtensorMap");
static inline void emu_tma_load(void *dst, const CUtensorMap *tmap, const int *coords, void *bar) {
    emu_tensor_map m;
    memcpy(&m, tmap, sizeof m);
    uint32_t s0 = __cvta_generic_to_shared(dst);
    unsigned need = m.swizzle ? 128u << m.swizzle : 128u;
    if (s0 % need != 0)
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): TMA destination at shared address %u is not "
                   "%u-byte aligned (%s)", emu_block.x, emu_cur_i, s0, need, m.swizzle ? "swizzle repeat" : "bulk copy");
    unsigned n[5];
    size_t total = emu_tma_box(&m, n);
    size_t rowb = (size_t)n[0] * m.esize, bytes = total * m.esize;
    uint32_t stamp = emu_clock++;
    emu_L->stats.tma_loads++;
    emu_L->stats.tma_bytes += bytes;
    unsigned char *base = emu_sptr(s0, bytes);
    unsigned char fill[8];
    memset(fill, 0, sizeof fill);
    if (m.oob_nan) memset(fill, 0xff, sizeof fill);
    for (size_t e = 0; e < total && base != emu_sink; e++) {
        long long off;
        bool oob = emu_tma_element(&m, coords, n, e, &off);
        size_t lin = (e % n[0]) * m.esize + (e / n[0]) * rowb;
        unsigned char *to = emu_sptr(emu_swizzle(s0 + (uint32_t)lin, m.swizzle), m.esize);
        const void *from = fill;
        if (!oob) from = emu_global(m.base, off, 1, m.esize, false);
        emu_async_write(to, m.esize, stamp);
        memcpy(to, from, m.esize);
    }
    emu_mbar *mb = emu_mbar_find(bar, false);
    if (mb) {
        int w = emu_cur_i >> 5;
        for (int x = 0; x < EMU_WARPS; x++)
            if (emu_seen[w][x] > mb->acc[x]) mb->acc[x] = emu_seen[w][x];
        if (emu_wstamp[w] > mb->acc[w]) mb->acc[w] = emu_wstamp[w];
        if (stamp > mb->acc[EMU_TMA_WARP]) mb->acc[EMU_TMA_WARP] = stamp;
        mb->tx -= (long long)bytes;
        emu_mbar_progress(mb);
    }
}

/* cp.async.bulk.tensor.Nd.global.shared::cta.bulk_group [map, {c0..}], [src]:
 * the box at the coordinates read from src (the map's swizzle of the
 * shared-address bits) and written to global memory; elements outside the
 * tensor are not written (PTX: the box is clipped). Executed at issue: the
 * shared reads are the issuing thread's (ordered by what it knows: a named
 * barrier after the other threads' writes), the global writes too.
 * commit_group / wait_group[.read] have nothing left to wait for. */
static inline void emu_tma_store(const CUtensorMap *tmap, const int *coords, const void *src) {
    emu_tensor_map m;
    memcpy(&m, tmap, sizeof m);
    uint32_t s0 = __cvta_generic_to_shared(src);
    unsigned need = m.swizzle ? 128u << m.swizzle : 16u;
    if (s0 % need != 0)
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): TMA store source at shared address %u is not "
                   "%u-byte aligned", emu_block.x, emu_cur_i, s0, need);
    unsigned n[5];
    size_t total = emu_tma_box(&m, n);
    size_t rowb = (size_t)n[0] * m.esize;
    emu_L->stats.tma_stores++;
    for (size_t e = 0; e < total; e++) {
        long long off;
        bool oob = emu_tma_element(&m, coords, n, e, &off);
        if (oob) continue;
        size_t lin = (e % n[0]) * m.esize + (e / n[0]) * rowb;
        unsigned char *from = emu_sptr(emu_swizzle(s0 + (uint32_t)lin, m.swizzle), m.esize);
        if (from == emu_sink) break;
        from = (unsigned char *)emu_shared(from, m.esize, 1, false);
        emu_proxy_read(from, m.esize, "a TMA store");
        void *to = emu_global(m.base, off, 1, m.esize, true);
        memcpy(to, from, m.esize);
        emu_L->stats.tma_store_bytes += m.esize;
    }
}
static inline void emu_bulk_commit() {}
static inline void emu_bulk_wait(int n, bool read) { (void)n; (void)read; }

/* ---- wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}: queued per warp
 * group, executed at wgmma.wait_group. Its register operands belong to the
 * asynchronous unit from issue to that wait (PTX ISA: accessing them
 * earlier is undefined), and the emulator checks it: at issue each thread's
 * accumulators move to a shadow (the ops compute there) and the registers
 * get a poison NaN, its A fragments are snapshot; when the wait retires the
 * ops, A fragments that changed and accumulators that no longer hold the
 * poison are race findings (written while in flight), then the results
 * land. A read of in-flight accumulators reads the poison: NaN downstream.
 * Fragments (thread t of the group:
 * warp w = t/32, g = lane/4, q = lane%4):
 *   D value v: row 16w + g + 8((v/2)%2), col 8(v/4) + 2q + v%2;
 *   A register r half h (A from registers): row 16w + g + 8(r%2), col 2q + h + 8(r/2).
 * Shared operands through a 64-bit matrix descriptor: start address
 * bits 0..13, leading byte offset 16..29, stride byte offset 32..45 (each
 * >> 4), base offset 49..51 (must be 0 here), layout 62..63 (0 none,
 * 1 128B, 2 64B, 3 32B swizzle); element (mn, k) of a K-major (tnsp 0) or
 * MN-major (tnsp 1) operand is at emu_desc_addr. */
struct emu_wgop {
    int n, tnsp_a, tnsp_b, scale_d, bf16, a_regs, group, issued;
    unsigned long long da, db;
    float *d[128];            /* the accumulators' shadow (emu_acc.shadow) */
    unsigned char acc[128];   /* per thread: its emu_acc slot */
    unsigned a[128][4];       /* the A fragments at issue */
    const unsigned *a_at[128];   /* where they live */
};
enum { EMU_WGQ = 64 };
static emu_wgop emu_wgq[8][EMU_WGQ];
static int emu_wg_head[8], emu_wg_tail[8], emu_wg_arrived[8], emu_wg_keep[8];
static int emu_th_issue[1024], emu_th_group[1024];

/* A thread's accumulator arrays in flight: the registers (regs, n floats,
 * poisoned), their shadow and the ops not yet retired that use them. */
struct emu_acc {
    float *regs;
    int n, pending;
    float shadow[128];
};
enum { EMU_ACCS = 4 };
static emu_acc emu_accs[1024][EMU_ACCS];
static const uint32_t EMU_POISON = 0x7fbadbadu;   /* a signalling NaN */

static unsigned emu_desc_addr(unsigned long long desc, bool mn_major, int mn, int k) {
    unsigned start = (unsigned)(desc & 0x3fff) << 4, lbo = (unsigned)((desc >> 16) & 0x3fff) << 4;
    unsigned sbo = (unsigned)((desc >> 32) & 0x3fff) << 4, lay = (unsigned)(desc >> 62) & 3;
    int mode = lay == 1 ? 3 : lay == 2 ? 2 : lay == 3 ? 1 : 0, w = 1 << mode;   /* w: 16-byte units per row */
    unsigned a;
    if (!mn_major) {
        a = start + (unsigned)(mn / 8) * sbo + (unsigned)(k % 8) * 2;
        a += mode ? (unsigned)(mn % 8) * 16u * (unsigned)w + (unsigned)(k / 8) * 16u
                  : (unsigned)(mn % 8) * 16u + (unsigned)(k / 8) * lbo;
    } else {
        a = start + (unsigned)(mn % 8) * 2;
        a += mode ? (unsigned)((mn / 8) % w) * 16u + (unsigned)(mn / (8 * w)) * lbo + (unsigned)(k % 8) * 16u * (unsigned)w +
                        (unsigned)(k / 8) * sbo
                  : (unsigned)(mn / 8) * sbo + (unsigned)(k % 8) * 16u + (unsigned)(k / 8) * lbo;
    }
    return emu_swizzle(a, mode);
}

static float emu_desc_load(unsigned long long desc, bool mn_major, int mn, int k, int bf16) {
    if ((desc >> 49) & 7)
        emu_report(EMU_FIND_BOUNDS, "block %u: wgmma descriptor with base offset %llu (not modelled: align the "
                   "operand to its swizzle repeat)", emu_block.x, (desc >> 49) & 7);
    unsigned char *p = emu_sptr(emu_desc_addr(desc, mn_major, mn, k), 2);
    unsigned short h;
    memcpy(&h, emu_shared(p, 2, 2, false), 2);
    emu_proxy_read(p, 2, "a wgmma");
    return bf16 ? mc_bf16_to_f32(h) : mc_f16_to_f32(h);
}

static void emu_wgop_run(int wg, emu_wgop *op) {
    static float A[64][16], B[16][256];
    emu_L->stats.wgmma++;
    if (op->issued != 128) {
        emu_report(EMU_FIND_HANG, "block %u warp group %d: wgmma issued by %d of 128 threads", emu_block.x, wg,
                   op->issued);
        emu_failed = 1;
        return;
    }
    for (int t = 0; t < 128 && op->a_regs; t++)
        if (memcmp(op->a_at[t], op->a[t], sizeof op->a[t]) != 0)
            emu_report(EMU_FIND_RACE, "block %u warp group %d thread %d: the A fragment registers of an in-flight "
                       "wgmma (m64n%dk16, A from registers) were written before the wgmma.wait_group that retires "
                       "it", emu_block.x, wg, 128 * wg + t, op->n);
    for (int t = 0; t < 128; t++)
        for (int r = 0; r < 4 && op->a_regs; r++)
            for (int h = 0; h < 2; h++) {
                int lane = t & 31, row = 16 * (t >> 5) + (lane >> 2) + 8 * (r % 2), col = 2 * (lane & 3) + h + 8 * (r / 2);
                A[row][col] = emu_half(op->a[t][r], h, op->bf16);
            }
    for (int m = 0; m < 64 && !op->a_regs; m++)
        for (int k = 0; k < 16; k++) A[m][k] = emu_desc_load(op->da, op->tnsp_a, m, k, op->bf16);
    for (int nn = 0; nn < op->n; nn++)
        for (int k = 0; k < 16; k++) B[k][nn] = emu_desc_load(op->db, op->tnsp_b, nn, k, op->bf16);
    for (int t = 0; t < 128; t++)
        for (int v = 0; v < op->n / 2; v++) {
            int lane = t & 31, row = 16 * (t >> 5) + (lane >> 2) + 8 * ((v / 2) % 2), col = 8 * (v / 4) + 2 * (lane & 3) + v % 2;
            float acc = op->scale_d ? op->d[t][v] : 0.0f;
            for (int k = 0; k < 16; k++) acc += A[row][k] * B[k][col];
            op->d[t][v] = acc;
        }
}

/* d: this thread's n/2 accumulators; a: its 4 A registers, or NULL (A
 * from shared memory through da). */
static inline void emu_wgmma(float *d, int n, const unsigned *a, unsigned long long da, unsigned long long db,
                             int tnsp_a, int tnsp_b, int scale_d, int bf16) {
    int t = emu_cur_i, wg = t / 128;
    if (n < 8 || n > 256 || n % 8 != 0 || emu_nthreads % 128 != 0 || wg >= 8) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): wgmma m64n%dk16 (N a multiple of 8 up to "
                   "256, blocks of whole warp groups)", emu_block.x, t, n);
        return;
    }
    int i = emu_th_issue[t]++;
    if (i - emu_wg_head[wg] >= EMU_WGQ) {
        emu_report(EMU_FIND_HANG, "block %u warp group %d: more than %d wgmma operations in flight", emu_block.x,
                   wg, EMU_WGQ);
        emu_failed = 1;
        return;
    }
    emu_wgop *op = &emu_wgq[wg][i % EMU_WGQ];
    if (i == emu_wg_tail[wg]) {
        emu_wg_tail[wg]++;
        op->n = n, op->tnsp_a = tnsp_a, op->tnsp_b = tnsp_b, op->scale_d = scale_d, op->bf16 = bf16;
        op->a_regs = a != NULL, op->da = da, op->db = db, op->group = emu_th_group[t], op->issued = 0;
    } else if (op->n != n || op->a_regs != (a != NULL) || op->db != db || (!a && op->da != da) ||
               op->tnsp_b != tnsp_b || op->scale_d != scale_d || op->group != emu_th_group[t]) {
        emu_report(EMU_FIND_HANG, "thread (block %u, thread %d): wgmma %d differs from the one its warp group "
                   "issued (shape, descriptors or commit group)", emu_block.x, t, i);
    }
    op->issued++;
    /* the accumulators go to their shadow (an array already in flight
     * keeps its shadow: the ops chain there), the registers are poisoned */
    emu_acc *acc = NULL;
    for (int k = 0; k < EMU_ACCS; k++)
        if (emu_accs[t][k].pending > 0) {
            float *r0 = emu_accs[t][k].regs;
            if (r0 == d && emu_accs[t][k].n == n / 2) acc = &emu_accs[t][k];
            else if (d < r0 + emu_accs[t][k].n && r0 < d + n / 2)
                emu_report(EMU_FIND_RACE, "thread (block %u, thread %d): wgmma %d's accumulators overlap another "
                           "in-flight wgmma's", emu_block.x, t, i);
        }
    for (int k = 0; k < EMU_ACCS && !acc; k++)
        if (emu_accs[t][k].pending == 0) {
            acc = &emu_accs[t][k];
            acc->regs = d;
            acc->n = n / 2;
            memcpy(acc->shadow, d, sizeof(float) * (size_t)(n / 2));
            for (int v = 0; v < n / 2; v++) memcpy(&d[v], &EMU_POISON, 4);
        }
    if (!acc) {
        emu_report(EMU_FIND_HANG, "thread (block %u, thread %d): more than %d accumulator arrays in flight",
                   emu_block.x, t, EMU_ACCS);
        emu_failed = 1;
        return;
    }
    acc->pending++;
    op->d[t % 128] = acc->shadow;
    op->acc[t % 128] = (unsigned char)(acc - emu_accs[t]);
    if (a) {
        memcpy(op->a[t % 128], a, 16);
        op->a_at[t % 128] = a;
    }
}

/* The ops of warp group wg up to its head retired: accumulators with no op
 * left land in their registers, which must still hold the poison. */
static void emu_acc_land(int wg, const emu_wgop *op) {
    for (int t = 0; t < 128; t++) {
        int th = 128 * wg + t;
        emu_acc *acc = &emu_accs[th][op->acc[t]];
        if (--acc->pending > 0) continue;
        for (int v = 0; v < acc->n; v++)
            if (memcmp(&acc->regs[v], &EMU_POISON, 4) != 0) {
                emu_report(EMU_FIND_RACE, "block %u warp group %d thread %d: accumulator register %d of an "
                           "in-flight wgmma (m64n%dk16) was written before the wgmma.wait_group that retires it",
                           emu_block.x, wg, th, v, op->n);
                break;
            }
        memcpy(acc->regs, acc->shadow, sizeof(float) * (size_t)acc->n);
    }
}
static inline void emu_wgmma_fence() {}
static inline void emu_wgmma_commit() { emu_th_group[emu_cur_i]++; }
/* wgmma.wait_group N: the warp group's threads meet; operations of all but
 * the newest N committed groups run. */
static inline void emu_wgmma_wait(int keep) {
    int t = emu_cur_i, wg = t / 128;
    if (wg >= 8) return;
    if (emu_wg_arrived[wg] && emu_wg_keep[wg] != keep)
        emu_report(EMU_FIND_HANG, "thread (block %u, thread %d): wgmma.wait_group %d while its warp group waits "
                   "with %d", emu_block.x, t, keep, emu_wg_keep[wg]);
    emu_wg_keep[wg] = keep;
    if (++emu_wg_arrived[wg] < 128) {
        emu_park(EMU_WGROUP);
        return;
    }
    emu_wg_arrived[wg] = 0;
    int done = emu_th_group[t] - keep;
    /* the retired operations read shared memory as this (the last) warp,
     * in an interval of their own that every warp of the group has seen
     * once its wait returns: the group may overwrite their operands then */
    const int w = t >> 5;
    const uint32_t ops = emu_wstamp[w] = emu_clock++;
    while (emu_wg_head[wg] < emu_wg_tail[wg] && emu_wgq[wg][emu_wg_head[wg] % EMU_WGQ].group < done) {
        emu_wgop_run(wg, &emu_wgq[wg][emu_wg_head[wg] % EMU_WGQ]);
        if (emu_wgq[wg][emu_wg_head[wg] % EMU_WGQ].issued == 128) emu_acc_land(wg, &emu_wgq[wg][emu_wg_head[wg] % EMU_WGQ]);
        emu_wg_head[wg]++;
    }
    emu_wstamp[w] = emu_clock++;
    for (int x = wg * 4; x < wg * 4 + 4; x++)
        if (emu_seen[x][w] < ops) emu_seen[x][w] = ops;
    for (int u = wg * 128; u < wg * 128 + 128; u++)
        if (emu_threads[u].state == EMU_WGROUP) emu_threads[u].state = EMU_RUN;
}

/* ---- sm_80: cp.async (the non-bulk LDGSTS) and ldmatrix (what the
 * sm_80 GEMM's mainloop uses, templates/matmul.cuh).
 *
 * cp.async.cg.shared.global [dst], [src], 16, src_size: the global read
 * happens, and is checked, at issue (src_size bytes; the rest of the 16
 * are zeros); the shared write lands only when the issuing thread's
 * cp.async.wait_group retires the commit group the copy belongs to (or at
 * the thread's exit), as a write by that thread in its interval then. It
 * is also checked as a write at issue (it may land at once on the GPU).
 * While it is in flight its 16 destination bytes are marked: any access
 * of them, the issuing thread's included, is a race finding. So a
 * missing wait_group (the data is read while in flight) and a missing
 * __syncthreads after it (another warp reads what this thread landed, in
 * the same interval) are both found. Destinations: 16-byte aligned
 * dynamic shared memory; at most EMU_CPA_MAX copies in flight per thread.
 *
 * ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16: lanes 8q..8q+7 give
 * the row addresses of matrix q (8 b16 elements, 16-byte aligned); lane l
 * receives of matrix q row l/4, columns 2(l%4) and 2(l%4)+1 (.trans: rows
 * 2(l%4) and 2(l%4)+1 of column l/4), low half first; the reads are the
 * receiving lane's. */
struct emu_cpa { uint32_t dst; int group; unsigned char bytes[16]; };
enum { EMU_CPA_MAX = 512 };
static emu_cpa *emu_cpaq;          /* per thread a ring of EMU_CPA_MAX */
static int *emu_cpa_head, *emu_cpa_tail, *emu_cpa_commits;

static inline void emu_cp_async16(void *sdst, const void *gsrc, long long i, size_t esz, int src_bytes) {
    int t = emu_cur_i;
    unsigned char *d = (unsigned char *)sdst;
    emu_L->stats.cp_async++;
    if (!(d >= emu_dyn_smem && d + 16 <= emu_dyn_smem + emu_L->smem) || ((d - emu_dyn_smem) & 15) ||
        src_bytes < 0 || src_bytes > 16) {
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): cp.async of %d bytes to %p: not a 16-byte "
                   "aligned destination in the block's %zu bytes of dynamic shared memory, or src_size beyond 16",
                   emu_block.x, t, src_bytes, sdst, emu_L->smem);
        return;
    }
    if (emu_cpa_tail[t] - emu_cpa_head[t] == EMU_CPA_MAX) {
        emu_report(EMU_FIND_HANG, "thread (block %u, thread %d): more than %d cp.async in flight (no "
                   "cp.async.wait_group)", emu_block.x, t, (int)EMU_CPA_MAX);
        return;
    }
    uint32_t off = (uint32_t)(d - emu_dyn_smem);
    emu_cpa *c = &emu_cpaq[(size_t)t * EMU_CPA_MAX + (size_t)(emu_cpa_tail[t] % EMU_CPA_MAX)];
    memset(c->bytes, 0, 16);
    if (src_bytes > 0) memcpy(c->bytes, emu_global(gsrc, i, esz, (size_t)src_bytes, false), (size_t)src_bytes);
    c->dst = off;
    c->group = emu_cpa_commits[t];
    emu_cpa_tail[t]++;
    emu_shared(d, 16, 16, true);   /* checked as a write now; bytes unchanged until it lands */
    emu_cpa_pend[off >> 4]++;
    emu_cpa_inflight++;
}
static inline void emu_cp_async_commit() { emu_cpa_commits[emu_cur_i]++; }
/* cp.async.wait_group keep: the calling thread's copies of all but its
 * newest keep commit groups land. */
static void emu_cp_async_wait(int keep) {
    int t = emu_cur_i, done = emu_cpa_commits[t] - keep;
    while (emu_cpa_head[t] < emu_cpa_tail[t]) {
        emu_cpa *c = &emu_cpaq[(size_t)t * EMU_CPA_MAX + (size_t)(emu_cpa_head[t] % EMU_CPA_MAX)];
        if (c->group >= done) break;
        emu_cpa_pend[c->dst >> 4]--;
        emu_cpa_inflight--;
        memcpy(emu_shared(emu_dyn_smem + c->dst, 16, 16, true), c->bytes, 16);
        emu_cpa_head[t]++;
    }
}

static uint32_t emu_ldm_addr[1024];
static inline void emu_ldmatrix(unsigned *r, uint32_t addr, int num, bool trans) {
    int me = emu_cur_i, base = me & ~31, lane = me & 31;
    if (lane < 8 * num && (addr & 15))
        emu_report(EMU_FIND_BOUNDS, "thread (block %u, thread %d): ldmatrix row address %u is not 16-byte aligned",
                   emu_block.x, me, addr);
    emu_ldm_addr[me] = addr;
    emu_L->stats.ldmatrix++;
    emu_park(EMU_WARP);
    for (int q = 0; q < num; q++) {
        if (trans) {
            uint32_t a0 = emu_ldm_addr[base + q * 8 + 2 * (lane & 3)] + 2u * (uint32_t)(lane >> 2);
            uint32_t a1 = emu_ldm_addr[base + q * 8 + 2 * (lane & 3) + 1] + 2u * (uint32_t)(lane >> 2);
            unsigned lo = MC_SLD(*(const unsigned short *)emu_sptr(a0, 2));
            unsigned hi = MC_SLD(*(const unsigned short *)emu_sptr(a1, 2));
            r[q] = lo | (hi << 16);
        } else {
            uint32_t a = emu_ldm_addr[base + q * 8 + (lane >> 2)] + 4u * (uint32_t)(lane & 3);
            r[q] = MC_SLD(*(const unsigned *)emu_sptr(a, 4));
        }
    }
    emu_park(EMU_WARP);
}

static void emu_sm80_block_begin() {
    memset(emu_cpa_head, 0, sizeof(int) * (size_t)emu_nthreads);
    memset(emu_cpa_tail, 0, sizeof(int) * (size_t)emu_nthreads);
    memset(emu_cpa_commits, 0, sizeof(int) * (size_t)emu_nthreads);
    memset(emu_cpa_pend, 0, sizeof(uint16_t) * (emu_L->smem / 16 + 1));
    emu_cpa_inflight = 0;
}

static void emu_sm90_block_begin() {
    memset(emu_seen, 0, sizeof emu_seen);
    emu_n_mbars = 0;
    memset(emu_nbars, 0, sizeof emu_nbars);
    memset(emu_wg_head, 0, sizeof emu_wg_head);
    memset(emu_wg_tail, 0, sizeof emu_wg_tail);
    memset(emu_wg_arrived, 0, sizeof emu_wg_arrived);
    memset(emu_th_issue, 0, sizeof emu_th_issue);
    memset(emu_th_group, 0, sizeof emu_th_group);
    memset(emu_accs, 0, sizeof emu_accs);
    memset(emu_warp_regs, 0, sizeof emu_warp_regs);
    emu_regs_used = 0;
}
static void emu_sm90_block_end() {
    if (emu_regs_used) {
        int warps = (emu_nthreads + 31) / 32, entry = emu_entry_regs(), need = 0;
        for (int w = 0; w < warps && w < 32; w++) need += 32 * (emu_warp_regs[w] ? emu_warp_regs[w] : entry);
        if (need > 32 * warps * entry)
            emu_report(EMU_FIND_HANG, "block %u: setmaxnreg asks for %d registers in all, the block holds %d "
                       "(%d threads x %d at entry): an inc waits forever for registers no warp gives back",
                       emu_block.x, need, 32 * warps * entry, emu_nthreads, entry);
    }
    for (int wg = 0; wg < 8; wg++)
        if (emu_wg_head[wg] < emu_wg_tail[wg])
            emu_report(EMU_FIND_HANG, "block %u warp group %d: %d wgmma operations never retired by "
                       "wgmma.wait_group", emu_block.x, wg, emu_wg_tail[wg] - emu_wg_head[wg]);
    /* a bar.arrive nobody syncs on: an unbalanced hand-over protocol */
    for (int id = 1; id < 16; id++)
        if (emu_nbars[id].arrived)
            emu_report(EMU_FIND_HANG, "block %u: named barrier %d exits with %u of %u arrivals pending (a "
                       "bar.arrive no bar.sync consumed)", emu_block.x, id, emu_nbars[id].arrived,
                       emu_nbars[id].count);
}

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

extern "C" int emu_run(emu_launch *L) {
    const size_t STACK = 256 * 1024;
    unsigned grid = L->grid, block = L->block;
    size_t smem = L->smem;
    emu_L = L;
    memset(&L->stats, 0, sizeof L->stats);
    memset(L->findings, 0, sizeof L->findings);
    if (L->messages && L->messages_size) L->messages[0] = 0;
    memset(emu_reports, 0, sizeof emu_reports);
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
    emu_dyn_cells = emu_cells(smem);
    emu_dyn_pw = smem ? (unsigned long long *)calloc(emu_granules(0, smem), sizeof *emu_dyn_pw) : NULL;
    emu_dyn_pt = smem ? (uint16_t *)calloc(emu_granules(0, smem), sizeof *emu_dyn_pt) : NULL;
    emu_cpaq = (emu_cpa *)malloc(sizeof(emu_cpa) * EMU_CPA_MAX * block);
    emu_cpa_head = (int *)calloc(block, sizeof(int));
    emu_cpa_tail = (int *)calloc(block, sizeof(int));
    emu_cpa_commits = (int *)calloc(block, sizeof(int));
    emu_cpa_pend = (uint16_t *)calloc(smem / 16 + 1, sizeof(uint16_t));
    emu_st_cells = emu_cells(__start_emu_smem ? (size_t)(__stop_emu_smem - __start_emu_smem) : 0);
    emu_failed = 0;
    for (unsigned bx = 0; bx < grid && !emu_failed; bx++) {
        emu_block = {bx, 0, 0};
        memset(emu_dyn_smem, 0xcd, smem ? smem : 16);   /* garbage, like the GPU */
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
        for (;;) {
            bool ran = false;
            for (int t = 0; t < emu_nthreads; t++)
                if (emu_threads[t].state == EMU_RUN) {
                    emu_cur_i = t;
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
            if (emu_failed) break;
            if (released) continue;
            int done = 0, bar = 0, other = 0;
            for (int t = 0; t < emu_nthreads; t++) {
                done += emu_threads[t].state == EMU_DONE;
                bar += emu_threads[t].state == EMU_BARRIER;
                other += emu_threads[t].state > EMU_DONE;
            }
            if (done == emu_nthreads) {
                emu_sm90_block_end();
                break;
            }
            if (bar + done == emu_nthreads && done == 0) {
                for (int t = 0; t < emu_nthreads; t++) emu_threads[t].state = EMU_RUN;
                emu_barrier_stamps();
                continue;
            }
            emu_report(EMU_FIND_HANG, "block %u: %d threads at __syncthreads, %d at an mbarrier, named barrier "
                       "or wgmma wait, %d exited (barrier divergence or a wait nobody completes)", bx, bar, other,
                       done);
            emu_failed = 1;
        }
    }
    for (unsigned t = 0; t < block; t++) free(emu_threads[t].stack);
    free(emu_threads);
    free(emu_dyn_smem);
    for (int k = 0; k < n_spans; k++) free(spans[k]);
    free(spans);
    free(emu_gb);
    free(emu_arg_buf);
    free(emu_block_stamp);
    free(emu_dyn_cells);
    free(emu_dyn_pw);
    free(emu_dyn_pt);
    emu_dyn_pw = NULL;
    emu_dyn_pt = NULL;
    free(emu_st_cells);
    free(emu_cpaq);
    free(emu_cpa_head);
    free(emu_cpa_tail);
    free(emu_cpa_commits);
    free(emu_cpa_pend);
    emu_cpa_inflight = 0;
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
