/*
 * target.h — what kernels may assume about a GPU architecture: on-chip
 * memory, registers, warp size, and the peak figures benchmarks compare
 * against. Legality checks (working set fits on chip) and tile choice
 * read it; nothing else hard-codes an architecture number.
 *
 *     const mcir_target *t = mcir_target_find("sm_90");
 *     if (working_set > t->smem_per_block_optin) ...
 */
#ifndef MCIR_TARGET_H
#define MCIR_TARGET_H

#include <stdbool.h>
#include <stdint.h>

typedef struct mcir_target {
    const char *name;             /* "sm_90": the --arch spelling */
    int sm;                       /* 90 */
    const char *example_gpu;      /* the data-centre part the numbers come from */
    int64_t smem_per_block;       /* static shared memory without opt-in */
    int64_t smem_per_block_optin; /* dynamic shared memory with opt-in */
    int64_t smem_per_sm;
    int regs_per_sm;              /* 32-bit registers */
    int regs_per_thread;          /* max per thread */
    int max_threads_per_block;
    int max_threads_per_sm;
    int warp_size;
    int sm_count;
    double dram_gbps;             /* memory bandwidth, GB/s */
    double fp16_tflops;           /* dense tensor-core peak, f16 in f32 out */
    bool has_wgmma;               /* Hopper warpgroup MMA */
} mcir_target;

/* NULL if the architecture is not known. */
const mcir_target *mcir_target_find(const char *name);
/* NULL-terminated list of known targets, for --help and tests. */
const mcir_target *const *mcir_target_list(void);
#define MCIR_DEFAULT_ARCH "sm_90"

#endif /* MCIR_TARGET_H */
