/*
 * target.h — what kernels may assume about a GPU architecture: on-chip
 * memory, registers, warp size, and the peak figures benchmarks compare
 * against, and the roofline of the cost model. Legality checks (working set fits on chip) and tile choice
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
    /* The occupancy calculator's allocation rules (CUDA's cuda_occupancy.h):
     * registers go to warps in units of reg_alloc_unit, split over
     * sm_partitions register files; each block is charged
     * smem_reserved_per_block more shared memory, rounded to smem_alloc_unit. */
    int max_blocks_per_sm;
    int sm_partitions;
    int reg_alloc_unit;
    int smem_reserved_per_block;
    int smem_alloc_unit;
    bool has_wgmma;               /* Hopper warpgroup MMA */

    /* The roofline of the cost model (kernelplan/cost.c): peaks of the
     * named part, dense (no structured sparsity), FMA counted as 2 flops. */
    double dram_gbps;             /* device memory bandwidth, GB/s (HBM or GDDR) */
    int64_t l2_bytes;             /* L2 cache: tile re-reads beyond it cross DRAM again */
    double f32_fma_tflops;        /* CUDA cores, f32 FMA */
    double f16_tc_tflops;         /* tensor cores, f16 in, f32 accumulate */
    double bf16_tc_tflops;        /* tensor cores, bf16 in, f32 accumulate */
    double launch_us;             /* host-side cost of one kernel launch, back to back */
    /* The L2's read bandwidth into the SMs, GB/s, all SMs together (public
     * microbenchmarks of the named part); 0: not modelled. The sm_90a
     * attention's K/V tiles come from it (kernelplan/cost.c). */
    double l2_gbps;
    /* The issue bound (kernelplan/cost.c, the SASS audit): every SM issues
     * at most issue_per_clock warp instructions a clock (one per scheduler,
     * four schedulers) at clock_ghz (the named part's boost clock). */
    double clock_ghz;
    int issue_per_clock;
    /* Between the GPUs of a node (collectives, kernelplan/cost.c): the link
     * of the named part's usual system and its bandwidth per direction per
     * GPU, GB/s (NVLink on SXM parts, PCIe otherwise). */
    const char *link;
    double link_gbps;
} mcir_target;

/* NULL if the architecture is not known. */
const mcir_target *mcir_target_find(const char *name);
/* NULL-terminated list of known targets, for --help and tests. */
const mcir_target *const *mcir_target_list(void);
#define MCIR_DEFAULT_ARCH "sm_90"

#endif /* MCIR_TARGET_H */
