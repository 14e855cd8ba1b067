/*
 * codegen.h — from KernelPlans to CUDA: one CUDA C source per kernel
 * (a template of codegen/templates/ instantiated with the plan's shapes,
 * dtypes, strides and fused elementwise chains), compiled at run time by
 * NVRTC to PTX and cubin through an on-disk cache (and, for the emulated
 * device, to host code through emu/compile.h). The result is a set of
 * modules (codegen/module.h); running them is runtime/'s (runtime/runtime.h):
 * nothing here calls a driver.
 *
 * Invariants: a generated source is a pure function of the plan (same plan,
 * same bytes — the cache key depends on it); every kernel is an
 * extern "C" __global__ function named like its KernelPlan, with no host
 * code; its parameters are the plan's reads, then its writes, as device
 * pointers, in plan order. Nothing here links to libcuda or libcublas: both
 * are dlopen'd, so the library works (and tests pass) without a GPU.
 *
 * Usage:
 *     mcir_codegen *cg = mcir_codegen_new(plan, mem, &d);
 *     if (!cg || !mcir_codegen_compile(cg, "sm_90", &d)) return 3;
 *     mcir_codegen_write_dir(cg, "out", &d);       // out/kernels/NAME.cu, .ptx
 *     mcir_gpu_run(cg, env, MCIR_ALLOC_POOL, &st, &d);   // runtime/runtime.h
 *     mcir_codegen_free(cg);
 */
#ifndef MCIR_CODEGEN_H
#define MCIR_CODEGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kernelplan/kernelplan.h"
#include "mcir/mcir.h"

typedef struct mcir_codegen mcir_codegen;

/* Generates CUDA C for every kernel of the plan (ALIAS kernels get none;
 * MATMUL kernels get a generated tiled kernel with the fused epilogue, and
 * a cuBLAS call description the runtime prefers when cuBLAS loads and the
 * group has no epilogue). m may be NULL (then mcir_gpu_run gives
 * every tensor an allocation of its own).
 * Returns NULL with a diagnostic naming the kernel if a region cannot be
 * lowered. The plan must outlive the result. */
mcir_codegen *mcir_codegen_new(mcir_plan *p, const mcir_memplan *m, mcir_diag *d);
void mcir_codegen_free(mcir_codegen *cg);

/* NVRTC → PTX and cubin for arch ("sm_80", "sm_86", "sm_89", "sm_90"),
 * through the kernel cache; fills p->kernels[i].registers / spill_bytes
 * and .audit / .epilogue_audit (from ptxas's report and the PTX). On a
 * compile error: false, NVRTC's log and the offending source lines in the
 * diagnostic. */
bool mcir_codegen_compile(mcir_codegen *cg, const char *arch, mcir_diag *d);

/* What the last mcir_codegen_compile did. */
typedef struct mcir_compile_stats {
    int kernels;         /* compiled kernels, cuBLAS epilogue kernels included */
    int units;           /* distinct compile units among them */
    int nvrtc_compiles;  /* NVRTC calls (units not in the cache) */
    int cache_hits;
    int threads;         /* NVRTC worker threads */
    double seconds;      /* wall time */
} mcir_compile_stats;
void mcir_codegen_compile_stats(const mcir_codegen *cg, mcir_compile_stats *out);
/* The same for the emulated device's modules (built by its first run;
 * nvrtc_compiles counts the host compiler's). */
void mcir_codegen_emu_compile_stats(const mcir_codegen *cg, mcir_compile_stats *out);

/* Each kernel preceded by a comment line "// kernel NAME (template)". */
bool mcir_codegen_write_cuda(const mcir_codegen *cg, FILE *out);
/* NVRTC's PTX, each kernel preceded by "// kernel NAME". Needs compile. */
bool mcir_codegen_write_ptx(const mcir_codegen *cg, FILE *out);
/* The kernel audit as a table, one row per compiled kernel (epilogues
 * included): registers, spills, local and shared memory, occupancy, PTX
 * instruction classes (docs/codegen.md "Kernel audit"). Needs compile. */
bool mcir_codegen_write_audit(const mcir_codegen *cg, FILE *out);
/* The SASS audit (docs/codegen.md "Kernel audit"): nvdisasm on every
 * compiled kernel's cubin (its text cached beside the kernel cache's
 * entries; several units at once), read into p->kernels[i].audit.sass and
 * .epilogue_audit.sass. Needs compile; never fails: where nvdisasm is not
 * found or fails, each audit says why (sass.state -1). */
void mcir_codegen_audit_sass(mcir_codegen *cg);
/* Where nvdisasm is ($MCIR_NVDISASM, "off" for none; PATH; $CUDA_HOME/bin,
 * /usr/local/cuda/bin; python3's nvidia-cuda-nvdisasm package), looked
 * for once per process; NULL with why where it is not found. */
const char *mcir_nvdisasm_path(char *why, size_t n);
/* DIR/kernels/NAME.cu, and NAME.ptx once compiled (temp name + rename). */
bool mcir_codegen_write_dir(const mcir_codegen *cg, const char *dir, mcir_diag *d);

/* Introspection, for tests and the CLI. */
/* Size-generic kernels (a graph whose dims range over more than one size;
 * docs/kernelplan.md, "Symbolic dimensions"): the kernels take the dims'
 * values at launch, and mcir_codegen_new generates each again at other
 * sizes in range to check that its code is the same there. Whether kernel
 * i is (why: NULL, or the reason it is not: its code differs at a size). */
bool mcir_codegen_kernel_generic(const mcir_codegen *cg, int i, const char **why);
/* Rebinds the plan's graph to values (one per dim, in range) and takes
 * each kernel's launch at those sizes — grids, library calls, tensor maps —
 * keeping the compiled code; false (one error naming the kernel) where a
 * kernel is not size-generic. */
bool mcir_codegen_rebind(mcir_codegen *cg, const int64_t *values, mcir_diag *d);

int mcir_codegen_kernel_count(const mcir_codegen *cg);
/* NULL for kernels without source (alias). */
const char *mcir_codegen_kernel_source(const mcir_codegen *cg, int i);
/* The function kernel i launches: named by the content of its source
 * ("mc_streaming_attention_0123456789abcdef"), shared by every kernel of
 * the plan whose source differs only in names; NULL without source. */
const char *mcir_codegen_kernel_entry(const mcir_codegen *cg, int i);
const char *mcir_codegen_kernel_ptx(const mcir_codegen *cg, int i);
/* Dynamic shared memory the generated kernel launches with. */
int64_t mcir_codegen_kernel_smem(const mcir_codegen *cg, int i);
/* For a MATMUL kernel the runtime may run as cuBLAS + epilogue: the
 * epilogue kernel's source (NULL if none), its name and grid (blocks of
 * 256); its parameters are the kernel's, then `const float* acc`, the
 * f32 product [batch, M, N]. */
const char *mcir_codegen_kernel_epilogue(const mcir_codegen *cg, int i, const char **name,
                                         int64_t *grid);
/* The function the epilogue launches (named by its content, as
 * mcir_codegen_kernel_entry); NULL without an epilogue. */
const char *mcir_codegen_kernel_epilogue_entry(const mcir_codegen *cg, int i);
/* The launch configuration of kernel i (grid, block, dynamic smem). */
void mcir_codegen_kernel_launch(const mcir_codegen *cg, int i, int64_t grid[3], int block[3],
                                int64_t *smem);
/* Split-KV attention: true when kernel i takes the plan's scratch
 * (kp->scratch_bytes) as one more argument after its reads and writes, and
 * is followed by a merge kernel in the same source, entry `<name>_merge`
 * with the same arguments, launched as grid blocks of block threads. */
bool mcir_codegen_kernel_merge(const mcir_codegen *cg, int i, int64_t *grid, int *block);
/* sm_90a attention: the TMA tensor maps kernel i takes as __grid_constant__
 * CUtensorMap parameters after its pointers, in order (at most 4: Q, K, V,
 * then O where it is stored by TMA) — the arguments of
 * cuTensorMapEncodeTiled for pointer parameter `read` of the kernel (its
 * reads, then its writes), from element `offset` of its buffer. Returns
 * how many (0: none; at most max written). */
typedef struct mcir_tensor_map_desc {
    int read;                   /* the pointer parameter: kp->reads[read], or kp->writes[read - n_reads] */
    int64_t offset;             /* elements from the read's base */
    int esize;                  /* bytes per element */
    int dtype;                  /* CUtensorMapDataType: 6 f16, 7 f32, 9 bf16 */
    int rank;
    uint64_t dims[5];           /* innermost first */
    uint64_t strides[4];        /* bytes, of dims 1.. */
    unsigned box[5];
    int swizzle;                /* CUtensorMapSwizzle: 3 = 128 bytes */
} mcir_tensor_map_desc;
int mcir_codegen_kernel_tensor_maps(const mcir_codegen *cg, int i, mcir_tensor_map_desc *out, int max);

/* ---------------------------------------------------------------- NVRTC */

/* True when NVRTC was built in; otherwise why (e.g. "built without the
 * CUDA toolkit"). */
bool mcir_nvrtc_available(char *why, size_t n);
/* "13.0" */
const char *mcir_nvrtc_version(void);
/* Number of nvrtcCompileProgram calls made by this process (the cache
 * test checks that a second compile makes none). */
long mcir_nvrtc_invocations(void);

/* One compiled kernel: PTX text and cubin bytes (malloc'd), and ptxas's
 * resource report for it. */
typedef struct mcir_compiled {
    char *ptx;
    size_t ptx_size;
    unsigned char *cubin;
    size_t cubin_size;
    int registers;
    int spill_bytes;   /* spill stores + spill loads, bytes */
    int stack_bytes;   /* the entry's stack frame: its local memory per thread */
    int spill_store_bytes, spill_load_bytes;
    int smem_static_bytes;   /* __shared__ arrays (dynamic smem is a launch parameter) */
    /* ptxas's advisories and warnings: "(C7514) Potential Performance
     * Loss: wgmma ... serialized", "(C7517) warpgroup.wait is injected",
     * "ptxas warning : ..." (each a defect of the generated code); the
     * first of them, "C7514: ..." */
    int advisories;
    char advisory[256];
    char *log;         /* NVRTC's log (warnings), may be NULL */
    char *sass;        /* nvdisasm's text of the cubin (mcir_codegen_audit_sass), or NULL */
} mcir_compiled;

/* Compiles one CUDA source through the cache (the entry point tests use to
 * force a broken source). name: the kernel, for diagnostics. */
bool mcir_nvrtc_compile_source(const char *name, const char *source,
                               const char *arch, mcir_compiled *out, mcir_diag *d);
void mcir_compiled_free(mcir_compiled *c);
/* Registers, spill bytes (stores + loads) and stack bytes from ptxas -v. */
void mcir_ptxas_parse(const char *log, int *registers, int *spill_bytes, int *stack_bytes);
/* The whole ptxas -v report of a one-entry compile into c's resource
 * fields: registers of the entry, spill stores and loads summed over every
 * function (a non-inlined callee spills too), the entry's stack frame,
 * static shared memory. Fields ptxas does not print stay 0 (registers -1). */
void mcir_ptxas_report(const char *log, mcir_compiled *c);

/* ---------------------------------------------------------------- cache */

/* The cache directory: $MCIR_CACHE_DIR, else $XDG_CACHE_HOME/mcir, else
 * ~/.cache/mcir (written into buf; false if none can be formed). */
bool mcir_cache_dir(char *buf, size_t n);
/* Cache hits / misses of this process. */
long mcir_cache_hits(void);
long mcir_cache_misses(void);

#endif /* MCIR_CODEGEN_H */
