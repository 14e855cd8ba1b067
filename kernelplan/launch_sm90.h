/*
 * launch_sm90.h — the launch model of the sm_90a streaming-attention
 * template (codegen/templates/attention_sm90.cuh): whether an attention
 * kernel takes it, and its tiles. Called after the generic attention
 * tiling (kernelplan/tiling.c); on a yes it replaces the tiling, launch and
 * shared memory, and the plan's reason says so; on a no for a Hopper
 * target the reason gains why not.
 *
 * The template is marked by the tiling dimension "wg" (consumer warp
 * groups); codegen dispatches on it.
 */
#ifndef MCIR_LAUNCH_SM90_H
#define MCIR_LAUNCH_SM90_H

#include "kernelplan/kernelplan.h"

typedef struct mcir_attention_sm90 {
    int64_t bm, bn;          /* query rows per block (64 per consumer group), keys per K/V tile */
    int64_t d;               /* head dim (= dv): 64, 128, 256 */
    int consumers;           /* consumer warp groups (1 or 2); + 1 producer group */
    int stages;              /* K/V ring depth */
    int threads;
    int64_t qtiles, grid;
    int64_t smem_bytes;      /* Q + ring + 1 KiB to align the swizzled tiles */
    int producer_regs, consumer_regs;   /* setmaxnreg */
} mcir_attention_sm90;

/* Whether k's attention fits the sm_90a template on t; why: the reason it
 * does not (static text). */
bool mcir_attention_sm90_layout(const mcir_target *t, const mcir_kernel_plan *k, mcir_attention_sm90 *l,
                                const char **why);

/* Applies the choice to k (tiling, launch, smem, reason). */
void mcir_attention_sm90_choose(const mcir_target *t, mcir_kernel_plan *k, mcir_arena *a);

#endif
