/*
 * launch_sm90.h — the launch model of the sm_90a streaming-attention
 * template (codegen/templates/attention_sm90.cuh): whether an attention
 * kernel takes it, and how — tiles, GQA / MQA head packing, the mask's
 * form, split-KV. Called after the generic attention tiling
 * (kernelplan/tiling.c); on a yes it replaces the tiling, launch, shared
 * memory and scratch, and the plan's reason says so; on a no for a Hopper
 * target the reason gains why not. Codegen (codegen/tpl_attention_sm90.c)
 * and the cost model read the same layout, so the three agree.
 *
 *     mcir_attention_sm90 l;
 *     const char *why;
 *     if (mcir_attention_sm90_layout(target, kp, &l, &why)) ... l.pack, l.splits
 *
 * The template is marked by the tiling dimension "wg" (consumer warp
 * groups); codegen dispatches on it.
 */
#ifndef MCIR_LAUNCH_SM90_H
#define MCIR_LAUNCH_SM90_H

#include "kernelplan/kernelplan.h"

typedef enum mcir_sm90_mask {
    MCIR_SM90_MASK_NONE,
    MCIR_SM90_MASK_ROWS,    /* a mask row per query row: 128-byte boxes x 64 rows per consumer group */
    MCIR_SM90_MASK_ONE_ROW, /* the mask broadcasts over the queries (padding masks): one row of BN per tile */
} mcir_sm90_mask;

typedef struct mcir_attention_sm90 {
    int64_t bm, bn;          /* query rows per block (64 per consumer group), keys per K/V tile */
    int64_t d;               /* head dim (= dv): 64, 96, 128, 256 */
    int consumers;           /* consumer warp groups (1 or 2); + 1 producer group */
    int stages;              /* K/V ring depth */
    int threads;
    /* GQA / MQA: the query heads sharing a K/V head packed into the rows
     * (FlashAttention-3's pack_gqa): O's leading dim pack_dim (the one next
     * to the rows, where K and V broadcast) joins the rows; -1, 1: none */
    int pack_dim;
    int64_t pack;
    int64_t nq, nk;          /* queries per head, keys */
    int64_t rows;            /* query rows of an item: pack * nq */
    int64_t items;           /* leading-dim items: batch*heads / pack */
    int64_t qtiles;          /* ceil(rows / bm) */
    int64_t splits, chunk;   /* split-KV decoding: splits of chunk keys (1, nk: none) */
    bool split_kv;           /* the split-KV path (partials + merge), even where one split
                                covers the keys at these sizes (the plan split at the largest) */
    int64_t grid;            /* blocks: persistent, at most one per SM, each walking the items
                                (items x qtiles x splits) */
    int order;               /* the items' order: 0 q-tiles fastest; 1 (causal) longest first, in
                                sections of sec leading items */
    int64_t sec;
    /* the scheduler: static (block k takes items k, 2G-1-k, 2G+k, ...: a
     * snake) or dynamic (each block's first item is its index, the next
     * ones claimed from a counter as it nears the end of one: FlashAttention-3's
     * DynamicPersistentTileScheduler). Both makespans in K/V tiles (+1 an
     * item), from mcir_attention_sm90_schedule; dynamic where the items'
     * lengths differ and it is not longer. */
    bool dynamic;
    double static_tiles, dynamic_tiles;
    /* 2: blocks in 2-block clusters, the pair taking adjacent q-tiles of a
     * head and multicasting half of each K and V tile into both (the L2
     * sends a tile once per cluster); 1: none. Where every item streams
     * the same tiles (non-causal, no mask, no split-KV, the static walk),
     * the q-tiles and the 64-column boxes are even (d 96, 128, 256) and
     * there are at least two clusters; MCIR_ATT_CLUSTER=1|2 overrides
     * where legal (tests). Tiling dim "cluster" where 2. */
    int cluster;
    bool o_stage;            /* shared memory holds an O stage of Q's size apart from Q: O's TMA
                                store leaves Q's slot free for the next item's Q */
    mcir_sm90_mask mask;
    int mask_esize;          /* the mask's element bytes (4, 2) */
    int64_t smem_bytes;      /* Q + K ring (with mask tiles) + V ring (+ O stage) + 1 KiB to
                                align the swizzled tiles */
    int64_t scratch_bytes;   /* split-KV partials: f32 O, max, sum per row and split */
    int64_t merge_grid;      /* the merge kernel (splits > 1) */
    int merge_block;
    int producer_regs, consumer_regs;   /* setmaxnreg */
    int registers;           /* ptxas's count for the kernel (what occupancy sees) */
    int max_registers;       /* one consumer group: the __maxnreg__ budget (0: the launch bounds') */
} mcir_attention_sm90;

/* Whether k's attention fits the sm_90a template on t, and its layout;
 * why: the reason it does not (static text naming what is missing). */
bool mcir_attention_sm90_layout(const mcir_target *t, const mcir_kernel_plan *k, mcir_attention_sm90 *l,
                                const char **why);

/* The tiles an item costs beyond its K/V tiles (its first S and softmax
 * alone, its last P V and epilogue: kernelplan/cost.c's pipeline model). */
#define MCIR_ATT_SM90_ITEM_TILES 1.0

/* The makespans, in K/V tiles (+ item_tiles an item), of the static and
 * the dynamic schedule of l's items over l->grid blocks; 0 where there
 * are more than max_items items (then neither is simulated). */
void mcir_attention_sm90_schedule(const mcir_attention_sm90 *l, bool causal, double item_tiles,
                                  int64_t max_items, double *static_tiles, double *dynamic_tiles);

/* Applies the choice to k (tiling, launch, smem, scratch, reason). */
void mcir_attention_sm90_choose(const mcir_target *t, mcir_kernel_plan *k, mcir_arena *a);

#endif
