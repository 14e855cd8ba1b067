/*
 * module.h — the compiled-module format: what code generation hands the
 * runtime (runtime/) for each kernel of a plan — its entry, its compiled
 * binaries (cubin for the GPU, a host shared object for the emulated
 * device), its launch (grid, block, shared memory), the TMA tensor maps it
 * takes, and the cuBLAS / cuBLASLt call that may run it instead. codegen/
 * writes it; runtime/ reads it and nothing else of codegen/.
 *
 * Invariant: a kernel's pointer parameters are the plan's reads, then its
 * writes, in plan order; `owner` names the kernel whose binaries it shares
 * (its compile unit is the same), and only owners hold binaries.
 */
#ifndef MCIR_CODEGEN_MODULE_H
#define MCIR_CODEGEN_MODULE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "codegen/codegen.h"

/* What the generator hands back for one kernel. */
typedef struct cg_gemm_desc {
    bool ok;                 /* cuBLAS may run this kernel instead */
    bool epilogue;           /* C goes to an f32 staging buffer, then the
                                kernel's epilogue source (NAME_epilogue) */
    bool trans_a, trans_b;   /* in row-major terms */
    int64_t m, n, k, batch;
    int64_t lda, ldb, ldc;   /* row-major leading dims */
    int64_t stride_a, stride_b, stride_c;
    int read_a, read_b, write_c;    /* write_c -1: the staging buffer */
    mcir_dtype dtype;                /* A and B */
    mcir_dtype c_dtype;              /* C: the write's, or f32 when staged */
    /* cuBLASLt runs the whole region in one call (where it loads):
     * D = act(A·B + bias + R), written in the output's dtype. */
    bool lt;
    int lt_epilogue;                 /* cublasLtEpilogue_t */
    int read_bias, read_residual;    /* read indices, -1: none */
    int write_d;
    mcir_dtype d_dtype;
} cg_gemm_desc;

typedef struct cg_kernel {
    mcir_kernel_plan *kp;
    char *source;            /* NULL: no kernel (alias) */
    char *epi_source;        /* MATMUL via cuBLAS with an epilogue: NAME_epilogue */
    char epi_name[256];
    mcir_compiled epi_bin;
    bool epi_compiled;
    int64_t epi_grid;        /* blocks of 256 threads */
    /* split-KV attention: the kernel takes the plan's scratch as one more
     * argument, and a second entry (entry + "_merge", in the same unit,
     * same arguments) merges the partials: merge_grid blocks of merge_block */
    int64_t merge_grid;      /* 0: no merge kernel */
    /* a dynamic persistent scheduler: the kernel takes its counters
     * (kp->sched_bytes, zero at launch) after the scratch */
    bool sched;
    /* sm_90a attention (tpl_attention_sm90.c): compiled for sm_90a, takes
     * n_tmaps CUtensorMap parameters after its pointers, split-KV
     * scratch and scheduler counters (Q, K, V, the mask where there is
     * one and, where O's view has one, O for the TMA store) */
    bool sm90a;
    int n_tmaps;
    mcir_tensor_map_desc tmaps[5];
    int merge_block;
    int64_t grid[3];
    int block[3];
    int64_t smem;            /* dynamic shared memory bytes */
    int64_t smem_static;     /* __shared__ arrays the template declares */
    int cluster;             /* blocks per thread-block cluster (__cluster_dims__; 0 or 1: none) */
    cg_gemm_desc gemm;
    mcir_compiled bin;       /* owner < 0 only; a sharer's is its owner's */
    bool compiled;
    /* the emulated device's modules (owners only): host shared objects */
    mcir_compiled emu_bin, epi_emu_bin;
    /* The compile unit (codegen.c): the source as NVRTC compiles it —
     * entry named by content, value functions renumbered, comments
     * blanked, line numbers kept — so identical layers share one compile
     * and one module. owner: the first kernel with the same unit, or -1. */
    char *unit;
    char entry[64];
    int owner;
    int64_t unit_smem;       /* largest dynamic smem among the kernels sharing it */
    char *epi_unit;
    char epi_entry[64];
    int epi_owner;
    /* A graph whose dims range over more than one size: whether the
     * kernel's code is the same at every size checked (mcir_codegen_new
     * generates it again at other bindings), else why not. */
    bool generic;
    char generic_why[400];
} cg_kernel;

struct mcir_codegen {
    mcir_plan *plan;
    const mcir_memplan *mem;
    int n;
    cg_kernel *k;
    char arch[16];
    mcir_compile_stats stats;
    int n_dims;              /* size-generic kernels: the dims each takes after its pointers */
    bool emu_ready;          /* the emulated device's modules are built */
    mcir_compile_stats emu_stats;
};

/* Kernel i's compiled object (its owner's where it shares one). */
const mcir_compiled *cg_kernel_bin(const mcir_codegen *cg, int i);
const mcir_compiled *cg_kernel_epi_bin(const mcir_codegen *cg, int i);

/* One checking macro for NVRTC / CUDA / cuBLAS calls: records the call,
 * file and line into `why` and jumps to `fail`. */
#define CG_CHECK(kind, call, okval, errstr, why, n)                              \
    do {                                                                         \
        int cg_rc_ = (int)(call);                                                \
        if (cg_rc_ != (int)(okval)) {                                            \
            snprintf((why), (n), "%s error %d (%s) in %s at %s:%d", (kind),      \
                     cg_rc_, (errstr)(cg_rc_), #call, __FILE__, __LINE__);       \
            goto fail;                                                           \
        }                                                                        \
    } while (0)

#endif /* MCIR_CODEGEN_MODULE_H */
