/*
 * target.c — the table of GPU architectures (CUDA C Programming Guide,
 * "Technical Specifications per Compute Capability"; peak figures from the
 * vendors' data sheets of the named part).
 */
#include <string.h>

#include "properties/target.h"

static const mcir_target sm_80 = {
    .name = "sm_80", .sm = 80, .example_gpu = "A100-SXM4-80GB",
    .smem_per_block = 48 * 1024, .smem_per_block_optin = 163 * 1024,
    .smem_per_sm = 164 * 1024, .regs_per_sm = 65536, .regs_per_thread = 255,
    .max_threads_per_block = 1024, .max_threads_per_sm = 2048, .warp_size = 32,
    .sm_count = 108, .dram_gbps = 2039.0, .fp16_tflops = 312.0, .has_wgmma = false};
static const mcir_target sm_86 = {
    .name = "sm_86", .sm = 86, .example_gpu = "A10",
    .smem_per_block = 48 * 1024, .smem_per_block_optin = 99 * 1024,
    .smem_per_sm = 100 * 1024, .regs_per_sm = 65536, .regs_per_thread = 255,
    .max_threads_per_block = 1024, .max_threads_per_sm = 1536, .warp_size = 32,
    .sm_count = 72, .dram_gbps = 600.0, .fp16_tflops = 125.0, .has_wgmma = false};
static const mcir_target sm_89 = {
    .name = "sm_89", .sm = 89, .example_gpu = "L4",
    .smem_per_block = 48 * 1024, .smem_per_block_optin = 99 * 1024,
    .smem_per_sm = 100 * 1024, .regs_per_sm = 65536, .regs_per_thread = 255,
    .max_threads_per_block = 1024, .max_threads_per_sm = 1536, .warp_size = 32,
    .sm_count = 58, .dram_gbps = 300.0, .fp16_tflops = 121.0, .has_wgmma = false};
static const mcir_target sm_90 = {
    .name = "sm_90", .sm = 90, .example_gpu = "H100-SXM5-80GB",
    .smem_per_block = 48 * 1024, .smem_per_block_optin = 227 * 1024,
    .smem_per_sm = 228 * 1024, .regs_per_sm = 65536, .regs_per_thread = 255,
    .max_threads_per_block = 1024, .max_threads_per_sm = 2048, .warp_size = 32,
    .sm_count = 132, .dram_gbps = 3350.0, .fp16_tflops = 989.0, .has_wgmma = true};

static const mcir_target *const targets[] = {&sm_80, &sm_86, &sm_89, &sm_90, NULL};

const mcir_target *mcir_target_find(const char *name) {
    for (int i = 0; targets[i]; i++)
        if (strcmp(targets[i]->name, name) == 0) return targets[i];
    return NULL;
}

const mcir_target *const *mcir_target_list(void) { return targets; }
