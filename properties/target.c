/*
 * target.c — the table of GPU architectures (CUDA C Programming Guide,
 * "Technical Specifications per Compute Capability"; peak figures from the
 * vendors' data sheets of the named part, dense, without sparsity):
 *
 *   part             memory          L2     f32 FMA   f16/bf16 tensor cores
 *   A100-SXM4-80GB   2039 GB/s HBM2e 40 MB  19.5 TF   312 TF   (A100 data sheet)
 *   A10              600 GB/s GDDR6   6 MB  31.2 TF   125 TF   (A10 data sheet)
 *   L4               300 GB/s GDDR6  48 MB  30.3 TF   121 TF   (L4 data sheet: 242 with sparsity)
 *   H100-SXM5-80GB   3350 GB/s HBM3  50 MB  67 TF     989 TF   (H100 data sheet: 1979 with sparsity)
 *
 * clock_ghz is the part's boost clock (A100 1.41 GHz, A10 1.695 GHz, L4
 * 2.04 GHz, H100 SXM5 1.98 GHz: the vendors' data sheets and NVIDIA's
 * architecture whitepapers, which derive the peaks above from it:
 * 132 SMs x 128 FP32 lanes x 2 x 1.98 GHz = 67 TF on the H100), and
 * issue_per_clock the warp instructions an SM issues a clock: four
 * schedulers (SM sub-partitions), one instruction each, on every part here
 * (the CUDA C Programming Guide's "Hardware Multithreading" and the
 * whitepapers' SM diagrams). Together they bound a kernel's instruction
 * issue: SMs x 4 x clock warp instructions a second.
 *
 * l2_gbps (sm_90 only) is not a data-sheet figure either: the L2's read
 * bandwidth into the SMs measured by public microbenchmarks of the H100
 * (about 5.5 TB/s); the sm_90a attention's model reads its K/V tiles at
 * the SM's share of it.
 *
 * launch_us is not a data-sheet figure: it is the usual gap between
 * back-to-back kernel launches on one stream without CUDA graphs (a few
 * microseconds on every recent driver); the cost model charges it per
 * launch, library calls included.
 */
#include <string.h>

#include "properties/target.h"

#define MB (1024 * 1024)

static const mcir_target sm_80 = {
    .name = "sm_80", .sm = 80, .example_gpu = "A100-SXM4-80GB",
    .smem_per_block = 48 * 1024, .smem_per_block_optin = 163 * 1024,
    .smem_per_sm = 164 * 1024, .regs_per_sm = 65536, .regs_per_thread = 255,
    .max_threads_per_block = 1024, .max_threads_per_sm = 2048, .warp_size = 32,
    .max_blocks_per_sm = 32, .sm_partitions = 4, .reg_alloc_unit = 256,
    .smem_reserved_per_block = 1024, .smem_alloc_unit = 128,
    .sm_count = 108, .has_wgmma = false,
    .dram_gbps = 2039.0, .l2_bytes = 40 * MB, .f32_fma_tflops = 19.5,
    .f16_tc_tflops = 312.0, .bf16_tc_tflops = 312.0, .launch_us = 3.0,
    .clock_ghz = 1.41, .issue_per_clock = 4,
    .link = "NVLink 3 (12 links)", .link_gbps = 300};
static const mcir_target sm_86 = {
    .name = "sm_86", .sm = 86, .example_gpu = "A10",
    .smem_per_block = 48 * 1024, .smem_per_block_optin = 99 * 1024,
    .smem_per_sm = 100 * 1024, .regs_per_sm = 65536, .regs_per_thread = 255,
    .max_threads_per_block = 1024, .max_threads_per_sm = 1536, .warp_size = 32,
    .max_blocks_per_sm = 16, .sm_partitions = 4, .reg_alloc_unit = 256,
    .smem_reserved_per_block = 1024, .smem_alloc_unit = 128,
    .sm_count = 72, .has_wgmma = false,
    .dram_gbps = 600.0, .l2_bytes = 6 * MB, .f32_fma_tflops = 31.2,
    .f16_tc_tflops = 125.0, .bf16_tc_tflops = 125.0, .launch_us = 3.0,
    .clock_ghz = 1.695, .issue_per_clock = 4,
    .link = "PCIe 4.0 x16", .link_gbps = 32};
static const mcir_target sm_89 = {
    .name = "sm_89", .sm = 89, .example_gpu = "L4",
    .smem_per_block = 48 * 1024, .smem_per_block_optin = 99 * 1024,
    .smem_per_sm = 100 * 1024, .regs_per_sm = 65536, .regs_per_thread = 255,
    .max_threads_per_block = 1024, .max_threads_per_sm = 1536, .warp_size = 32,
    .max_blocks_per_sm = 24, .sm_partitions = 4, .reg_alloc_unit = 256,
    .smem_reserved_per_block = 1024, .smem_alloc_unit = 128,
    .sm_count = 58, .has_wgmma = false,
    .dram_gbps = 300.0, .l2_bytes = 48 * MB, .f32_fma_tflops = 30.3,
    .f16_tc_tflops = 121.0, .bf16_tc_tflops = 121.0, .launch_us = 3.0,
    .clock_ghz = 2.04, .issue_per_clock = 4,
    .link = "PCIe 4.0 x16", .link_gbps = 32};
static const mcir_target sm_90 = {
    .name = "sm_90", .sm = 90, .example_gpu = "H100-SXM5-80GB",
    .smem_per_block = 48 * 1024, .smem_per_block_optin = 227 * 1024,
    .smem_per_sm = 228 * 1024, .regs_per_sm = 65536, .regs_per_thread = 255,
    .max_threads_per_block = 1024, .max_threads_per_sm = 2048, .warp_size = 32,
    .max_blocks_per_sm = 32, .sm_partitions = 4, .reg_alloc_unit = 256,
    .smem_reserved_per_block = 1024, .smem_alloc_unit = 128,
    .sm_count = 132, .has_wgmma = true,
    .dram_gbps = 3350.0, .l2_bytes = 50 * MB, .f32_fma_tflops = 67.0,
    .f16_tc_tflops = 989.0, .bf16_tc_tflops = 989.0, .launch_us = 3.0, .l2_gbps = 5500.0,
    .clock_ghz = 1.98, .issue_per_clock = 4,
    .link = "NVLink 4 (18 links)", .link_gbps = 450};

static const mcir_target *const targets[] = {&sm_80, &sm_86, &sm_89, &sm_90, NULL};

const mcir_target *mcir_target_find(const char *name) {
    for (int i = 0; targets[i]; i++)
        if (strcmp(targets[i]->name, name) == 0) return targets[i];
    return NULL;
}

const mcir_target *const *mcir_target_list(void) { return targets; }
