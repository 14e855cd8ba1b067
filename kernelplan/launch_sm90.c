/*
 * launch_sm90.c — when streaming attention takes the sm_90a path (TMA,
 * mbarriers, wgmma, a producer warp group and one or two consumer warp
 * groups) and how; see launch_sm90.h. The tiles follow FlashAttention-3's
 * choices for head dims 64/96/128/256 within the 227 KiB of an H100 block:
 * 128 query rows (2 consumer groups; 64 for <= 64 rows), K/V tiles of 128
 * keys (64 at d = 256; halved until a mask tile fits too), a 2-stage ring.
 * GQA / MQA packs the query heads of a group into the rows when queries
 * are few (decode), so one block reads its K/V head once for the whole
 * group; else the K/V coordinates of a head repeat per query head (read
 * through the tensor map, never copied). Short query tiles that cannot
 * fill the SMs split the keys (flash-decoding) and merge the partials.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernelplan/launch.h"
#include "kernelplan/launch_sm90.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Operand x's dim for O's leading dim i (rl of them), right-aligned: its
 * size (1 where x lacks it) and stride (elements; 0 where absent). */
static int64_t lead_size(const mcir_tensor *x, int rl, int i) {
    int xi = i - (rl - (x->rank - 2));
    return xi >= 0 ? x->shape[xi] : 1;
}
static int64_t lead_stride(const mcir_tensor *x, const mcir_kernel_access *a, int rl, int i) {
    int xi = i - (rl - (x->rank - 2));
    return xi >= 0 ? a->strides[xi] : 0;
}

/* A kernel read a tensor map can describe: unit innermost stride, the
 * other strides of non-unit dims multiples of 16 bytes. */
static const mcir_kernel_access *tma_read(const mcir_kernel_plan *k, const mcir_tensor *t, int esize) {
    const mcir_kernel_access *x = mcir_kernel_access_of(k, t);
    if (!x || x < k->read_access || x >= k->read_access + k->n_reads) return NULL;
    if (x->rank < 1 || x->strides[x->rank - 1] != 1) return NULL;
    for (int i = 0; i < x->rank - 1; i++)
        if (t->shape[i] != 1 && (x->strides[i] * esize) % 16 != 0) return NULL;
    /* symbolic dims: the buffer's strides (products of its extents) are
     * multiples of 16 bytes for every size, not only at these: every term
     * of each product a multiple ([seq, seq] f16 has rows of 2*seq bytes) */
    const mcir_tensor *r = x->tensor;
    if (r && r->sym) {
        mcir_extent p = mcir_extent_const(esize), q;
        for (int i = r->rank - 1; i > 0; i--) {
            mcir_extent e = mcir_tensor_extent(r, i);
            if (!mcir_extent_mul(&p, &e, &q)) return NULL;
            p = q;
            for (int j = 0; j < p.n_terms; j++)
                if (p.terms[j].coef % 16 != 0) return NULL;
        }
    }
    return x;
}

static bool is_half(mcir_dtype t) { return t == MCIR_DTYPE_F16 || t == MCIR_DTYPE_BF16; }

/* Whether t's extents are the same at every size of the graph */
static bool sizes_fixed(const mcir_tensor *t) {
    for (int k = 0; t->sym && k < t->rank; k++)
        if (!mcir_extent_is_const(&t->sym[k], NULL)) return false;
    return true;
}

static int64_t tile_of(const mcir_tiling *t, const char *dim) {
    for (int i = 0; i < t->n_dims && i < MCIR_MAX_TILE_DIMS; i++)
        if (t->dim_names[i] && strcmp(t->dim_names[i], dim) == 0) return t->block_tile[i];
    return 0;
}

/* Work item t's K/V tiles (att_item_of in attention_sm90.cuh: the same
 * order, the same causal limit; an item with no visible key streams one). */
static int64_t sched_item_tiles(const mcir_attention_sm90 *l, bool causal, int64_t t) {
    const int64_t split = t % l->splits, Q = l->qtiles;
    t /= l->splits;
    int64_t r0;
    if (l->order == 1) {
        const int64_t sec = l->sec, full = l->items / sec * sec;
        int64_t n = sec, u = t;
        if (t < full * Q) {
            u = t % (sec * Q);
        } else {
            n = l->items - full;
            u = t - full * Q;
        }
        r0 = (Q - 1 - u / n) * l->bm;
    } else {
        r0 = (t % Q) * l->bm;
    }
    const int64_t kv0 = split * l->chunk;
    int64_t end = kv0 + l->chunk < l->nk ? kv0 + l->chunk : l->nk;
    if (causal) {
        const int64_t last = r0 + l->bm - 1 < l->rows - 1 ? r0 + l->bm - 1 : l->rows - 1;
        const int64_t qmax = l->pack > 1 && last / l->nq != r0 / l->nq ? l->nq - 1 : last % l->nq;
        const int64_t lim = qmax + (l->nk - l->nq) + 1;
        if (lim < end) end = lim;
    }
    return end > kv0 ? ceil_div(end - kv0, l->bn) : 1;
}

/* Whether the items' lengths differ. */
static bool sched_uneven(const mcir_attention_sm90 *l, bool causal) {
    const int64_t n = l->items * l->qtiles * l->splits;
    const int64_t first = n > 0 ? sched_item_tiles(l, causal, 0) : 0;
    for (int64_t t = 1; t < n && t < (1 << 21); t++)
        if (sched_item_tiles(l, causal, t) != first) return true;
    return false;
}

/* A block of the dynamic schedule: it claims its next item at `claim`
 * (when its producer has issued the current item's last K tile: the K
 * ring's SCHED_LEAD tiles and the item's own overhead before `free`, or at
 * the item's start if that is later), and is busy until `free`. */
#define SCHED_LEAD 2.0
typedef struct sched_slot {
    double claim, free;
    int64_t block;
} sched_slot;
static bool slot_before(const sched_slot *a, const sched_slot *b) {
    return a->claim < b->claim || (a->claim == b->claim && a->block < b->block);
}
static void heap_down(sched_slot *h, int64_t n, int64_t i) {
    for (;;) {
        int64_t m = i, a = 2 * i + 1, b = a + 1;
        if (a < n && slot_before(&h[a], &h[m])) m = a;
        if (b < n && slot_before(&h[b], &h[m])) m = b;
        if (m == i) return;
        sched_slot x = h[i];
        h[i] = h[m];
        h[m] = x;
        i = m;
    }
}

void mcir_attention_sm90_schedule(const mcir_attention_sm90 *l, bool causal, double item_tiles,
                                  int64_t max_items, double *static_tiles, double *dynamic_tiles) {
    const int64_t n = l->items * l->qtiles * l->splits, G = l->grid;
    *static_tiles = *dynamic_tiles = 0;
    if (n <= 0 || G <= 0 || n > max_items) return;
    double *sum = calloc((size_t)G, sizeof *sum);
    sched_slot *h = calloc((size_t)G, sizeof *h);
    MCIR_ASSERT(sum && h);
    /* static: pass p gives block k item pG + k, reversed on odd passes
     * where the items run longest first (att_walk) */
    for (int64_t t = 0; t < n; t++) {
        const int64_t p = t / G, r = t % G;
        const int64_t k = (p & 1) && l->order == 1 ? G - 1 - r : r;
        sum[k] += (double)sched_item_tiles(l, causal, t) + item_tiles;
    }
    for (int64_t k = 0; k < G; k++)
        if (sum[k] > *static_tiles) *static_tiles = sum[k];
    /* dynamic: block k starts item k at 0; the claims go in the order of
     * their time */
    for (int64_t k = 0; k < G; k++)
        h[k] = (sched_slot){0.0, (double)sched_item_tiles(l, causal, k) + item_tiles, k};
    for (int64_t k = 0; k < G; k++) {
        const double c = h[k].free - SCHED_LEAD - item_tiles;
        h[k].claim = c > 0 ? c : 0;
    }
    for (int64_t i = G / 2; i-- > 0;) heap_down(h, G, i);
    for (int64_t t = G; t < n; t++) {
        const double start = h[0].free, end = start + (double)sched_item_tiles(l, causal, t) + item_tiles;
        const double c = end - SCHED_LEAD - item_tiles;
        h[0].claim = c > start ? c : start;
        h[0].free = end;
        heap_down(h, G, 0);
    }
    for (int64_t k = 0; k < G; k++)
        if (h[k].free > *dynamic_tiles) *dynamic_tiles = h[k].free;
    free(sum);
    free(h);
}

bool mcir_attention_sm90_layout(const mcir_target *t, const mcir_kernel_plan *k, mcir_attention_sm90 *l,
                                const char **why) {
    const mcir_node *n = k->anchor;
    memset(l, 0, sizeof *l);
    *why = NULL;
    if (!t || !t->has_wgmma) {
        *why = "the target has no wgmma";
        return false;
    }
    if (!n || n->op != MCIR_OP_ATTENTION) {
        *why = "not an attention anchor";
        return false;
    }
    const mcir_tensor *Q = n->inputs[0], *K = n->inputs[1], *V = n->inputs[2], *O = n->outputs[0];
    const mcir_tensor *M = n->n_inputs > 3 ? n->inputs[3] : NULL;
    if (!is_half(Q->dtype) || K->dtype != Q->dtype || V->dtype != Q->dtype || O->dtype != Q->dtype) {
        *why = "Q, K, V and O are not all f16 or all bf16";
        return false;
    }
    int64_t d = Q->shape[Q->rank - 1];
    if (K->shape[K->rank - 1] != d || V->shape[V->rank - 1] != d || (d != 64 && d != 96 && d != 128 && d != 256)) {
        *why = "head dims other than 64, 96, 128, 256 (or d != dv)";
        return false;
    }
    const int rl = O->rank - 2;
    const mcir_kernel_access *qa = tma_read(k, Q, 2), *ka = tma_read(k, K, 2), *va = tma_read(k, V, 2);
    if (!qa || !ka || !va) {
        *why = "Q, K or V is not a kernel read with unit innermost stride and 16-byte row strides (no tensor map)";
        return false;
    }
    const int64_t nq = Q->shape[Q->rank - 2], nk = K->shape[K->rank - 2];
    for (int i = 0; i < rl; i++)
        if (lead_size(Q, rl, i) != O->shape[i]) {
            *why = "Q broadcast over a leading dim (only K and V may be shared)";
            return false;
        }

    /* the mask: a kernel read of f32 / f16 / bf16 over the keys */
    const mcir_kernel_access *ma = NULL;
    int mes = 0;
    bool mask_rows = false;   /* the mask varies over the queries */
    if (M) {
        mes = M->dtype == MCIR_DTYPE_F32 ? 4 : is_half(M->dtype) ? 2 : 0;
        if (!mes) {
            *why = "a mask that is not f32, f16 or bf16";
            return false;
        }
        if (M->rank < 1 || M->shape[M->rank - 1] != nk) {
            *why = "a mask broadcast over the keys";
            return false;
        }
        if (!(ma = tma_read(k, M, mes))) {
            *why = "the mask is not a kernel read with unit key stride and 16-byte row strides (no tensor map)";
            return false;
        }
        /* (an extent that is 1 only at some sizes of a symbolic dim is a
         * row per query: the same kernel for every size) */
        mcir_extent mr = M->rank >= 2 ? mcir_tensor_extent(M, M->rank - 2) : mcir_extent_const(1);
        int64_t one;
        mask_rows = M->rank >= 2 && !(mcir_extent_is_const(&mr, &one) && one == 1);
        /* the mask rides in S's accumulators as mask / scale */
        double scale = mcir_node_attr(n, "scale") ? mcir_node_float(n, "scale") : 1.0 / sqrt((double)d);
        if (!(fabs(scale) >= 1e-30 && fabs(scale) <= 1e30)) {
            *why = "a mask with a scale of 0 or beyond 1e30 (the mask enters S as mask / scale)";
            return false;
        }
    }

    /* Once the plan chose the sm_90a path (its tiling has "wg"), the
     * choices that depend on the sizes — consumer groups, K/V tile, GQA
     * packing, split-KV chunk — are the plan's, made at the largest sizes:
     * a kernel of a graph whose dims range over sizes is generated again at
     * other sizes with the same ones (docs/kernelplan.md) */
    const int64_t planned_wg = tile_of(&k->tiling, "wg");
    const bool planned = planned_wg > 0;

    /* GQA / MQA packing: O's innermost leading dim j, where K and V
     * broadcast and Q does not, joins the rows when the queries are fewer
     * than a tile and Q (and a mask that varies over j) step by whole heads */
    l->pack_dim = -1;
    l->pack = 1;
    if (rl >= 1 && (planned ? tile_of(&k->tiling, "pack") > 1 : nq < 128)) {
        const int j = rl - 1;
        const int64_t g = O->shape[j];
        bool ok = g > 1 && lead_size(K, rl, j) == 1 && lead_size(V, rl, j) == 1;
        /* (the kernel's access strides are the plan's, at the largest
         * sizes: with the plan's packing, codegen checks the rows' views
         * at these sizes instead, packed_row_stride) */
        ok = ok && (planned || nq == 1 || lead_stride(Q, qa, rl, j) == nq * qa->strides[Q->rank - 2]);
        if (ok && M) {
            const int rm = M->rank;
            int mj = j - (rl + 2 - rm);   /* the mask's dim j */
            int64_t msz = mj >= 0 ? M->shape[mj] : 1;
            if (msz == 1) ok = !mask_rows;   /* one mask row for every packed query */
            else ok = nq == 1 || (mask_rows && (planned || ma->strides[mj] == nq * ma->strides[rm - 2]));
            if (ok && msz != 1) mask_rows = true;   /* the packed rows index the mask */
        }
        if (ok) {
            l->pack_dim = j;
            l->pack = g;
        } else if (planned) {
            *why = "the plan's GQA packing does not hold at these sizes";
            return false;
        }
    }
    if (rl - (l->pack > 1 ? 1 : 0) > 3) {
        *why = "more than 3 leading dims (a tensor map has 5)";
        return false;
    }
    if (nq * l->pack > (1ll << 30) || nk > (1ll << 30)) {
        *why = "more than 2^30 query rows or keys (the TMA's coordinates are 32-bit)";
        return false;
    }
    l->mask = !M ? MCIR_SM90_MASK_NONE : mask_rows ? MCIR_SM90_MASK_ROWS : MCIR_SM90_MASK_ONE_ROW;
    l->mask_esize = mes;

    int64_t bh = 1;
    for (int i = 0; i < rl; i++) bh *= O->shape[i];
    l->d = d;
    l->nq = nq;
    l->nk = nk;
    l->rows = nq * l->pack;
    l->items = bh / l->pack;
    l->consumers = planned ? (int)planned_wg : l->rows > 64 ? 2 : 1;
    l->bm = 64 * l->consumers;
    l->stages = 2;
    l->threads = 128 * (1 + l->consumers);
    l->qtiles = ceil_div(l->rows, l->bm);

    /* K/V tiles: FA3's 128 keys (64 at d = 256), halved while Q + the
     * rings (with the mask tiles) exceed the shared memory. At d = 64
     * without causality or a mask, with two consumer groups (240
     * registers: S 96 + P 48 + O 32), FA3's 192: the softmax's per-score
     * work is as long as a d-64 tile's products, and the per-tile rest
     * (O's rescale, descriptors, waits) spreads over half again as many
     * keys. The plan's tile where it chose one. MCIR_ATT_BN=n (a
     * multiple of 16 in 32..256; kernels without a mask) sets the first
     * candidate: FA3's 176 at d 128 non-causal, which the pipeline model
     * prices below 128 (tensor-bound either way, a ragged last tile and an
     * item's overhead larger) — the comparison to run on a GPU. Halving
     * keeps a multiple of 16 (P V's k-steps). */
    /* a row in 64-column boxes (d 96: two, the second half zeros) */
    const int64_t dp = (d + 63) / 64 * 64;
    int64_t q_bytes = (int64_t)l->consumers * 64 * dp * 2;
    l->smem_bytes = 0;
    bool wide = d == 64 && !mcir_node_bool(n, "causal") && !M && l->consumers == 2;
    const char *bnf = getenv("MCIR_ATT_BN");
    int64_t forced = bnf && !planned && !M ? atoll(bnf) : 0;
    if (forced < 32 || forced > 256 || forced % 16) forced = 0;
    int64_t bn0 = forced ? forced : planned ? tile_of(&k->tiling, "kv")
                  : d == 256 ? (l->mask == MCIR_SM90_MASK_ROWS ? 32 : 64)
                  : wide     ? 192
                             : 128;
    for (int64_t bn = bn0; bn >= 32; bn = bn / 2 / 16 * 16) {
        int64_t mask_bytes = 0;
        if (l->mask == MCIR_SM90_MASK_ROWS) {   /* 64-row boxes of min(128, bn x es) bytes per group */
            mask_bytes = (int64_t)l->consumers * bn * mes * 64;
        } else if (l->mask == MCIR_SM90_MASK_ONE_ROW) {
            mask_bytes = (bn * mes + 1023) / 1024 * 1024;
        }
        int64_t smem = q_bytes + l->stages * (2 * bn * dp * 2 + mask_bytes) + 1024;
        /* the static part: the Q, K and V rings' mbarriers, a 4-byte slot
         * per consumer thread (mc_anchor_wait) and the dynamic scheduler's
         * two item slots (16 bytes with their alignment) */
        int64_t smem_static = 8 * (2 + 4 * l->stages) + 4 * 128 * l->consumers + 16;
        if (planned && bn != tile_of(&k->tiling, "kv")) continue;
        if (smem + smem_static <= t->smem_per_block_optin) {
            l->bn = bn;
            l->smem_bytes = smem;
            /* an O stage of Q's size where it fits besides (d 64 and 128
             * without mask tiles; d 256's tiles leave no room) */
            if (smem + q_bytes + smem_static <= t->smem_per_block_optin) {
                l->o_stage = true;
                l->smem_bytes += q_bytes;
            }
            break;
        }
    }
    if (!l->bn || l->threads > t->max_threads_per_block) {
        *why = "the tiles do not fit the target's shared memory";
        return false;
    }

    /* split-KV (flash-decoding): few short query tiles and many keys; about
     * one block per SM (a block holds most of one), >= 256 keys per split,
     * a split a whole number of K/V tiles */
    l->splits = 1;
    l->chunk = nk;
    int64_t qblocks = l->items * l->qtiles;
    const int64_t planned_chunk = planned ? tile_of(&k->tiling, "kv_split") : 0;
    if (planned_chunk > 0) {   /* the plan's chunk; the splits this many keys need (1 or more) */
        l->chunk = planned_chunk;
        l->splits = ceil_div(nk, planned_chunk);
        l->split_kv = true;
        l->scratch_bytes = l->items * l->rows * l->splits * (d + 2) * 4;
        mcir_attention_merge_launch(l->items * l->rows, d, &l->merge_grid, &l->merge_block);
    } else if (!planned && nq <= 16 && qblocks < t->sm_count && nk >= 512) {
        int64_t splits = ceil_div(t->sm_count, qblocks);
        if (splits > nk / 256) splits = nk / 256;
        if (splits >= 2) {
            int64_t chunk = ceil_div(ceil_div(nk, splits), l->bn) * l->bn;
            if (ceil_div(nk, chunk) >= 2) {
                l->chunk = chunk;
                l->splits = ceil_div(nk, chunk);
                l->split_kv = true;
                l->scratch_bytes = l->items * l->rows * l->splits * (d + 2) * 4;
                mcir_attention_merge_launch(l->items * l->rows, d, &l->merge_grid, &l->merge_block);
            }
        }
    }
    if (l->split_kv && l->o_stage) {   /* the partials go out per thread: no O stage */
        l->o_stage = false;
        l->smem_bytes -= q_bytes;
    }
    int64_t blocks = qblocks * l->splits;
    if (blocks >= (1ll << 31)) {
        *why = "more blocks than a grid holds";
        return false;
    }
    /* persistent (FlashAttention-3's scheduler): one block per SM walks the
     * items, so an item's setup, first loads and O store overlap the
     * neighbouring items' work */
    l->grid = blocks < t->sm_count ? blocks : t->sm_count;
    /* causal: the longest items first, in sections of as many K/V heads as
     * half the L2 holds (codegen's ATT_SEC) */
    const bool causal = mcir_node_bool(n, "causal");
    l->order = causal ? 1 : 0;
    l->sec = (int64_t)(t->l2_bytes / 2) / (nk * 2 * d * 2);
    if (l->sec > l->items) l->sec = l->items;
    if (l->sec < 1) l->sec = 1;
    /* the scheduler: dynamic where the items' lengths differ (causal, a
     * short last split) and the model does not make it longer */
    mcir_attention_sm90_schedule(l, causal, MCIR_ATT_SM90_ITEM_TILES, 1 << 21, &l->static_tiles, &l->dynamic_tiles);
    l->dynamic = l->dynamic_tiles > 0 && l->dynamic_tiles <= l->static_tiles && sched_uneven(l, causal);
    /* 2-block clusters multicasting K and V (docs/kernelplan.md "The
     * sm_90a attention's pipeline": at d >= 96 the tile's binding term is
     * the L2's bandwidth, which a cluster halves): where legal and at
     * least two clusters; at other sizes of a planned kernel, the plan's
     * choice where it still holds */
    l->cluster = 1;
    {
        /* (sizes fixed: a kernel over symbolic dims runs every size, and
         * an odd q-tile count at one of them would leave a block unpaired) */
        const bool legal = !causal && l->mask == MCIR_SM90_MASK_NONE && !l->split_kv && !l->dynamic &&
                           l->qtiles % 2 == 0 && (dp / 64) % 2 == 0 && blocks >= 4 && t->sm_count >= 2 &&
                           sizes_fixed(Q) && sizes_fixed(K) && sizes_fixed(O);
        const char *force = getenv("MCIR_ATT_CLUSTER");
        bool want = planned ? tile_of(&k->tiling, "cluster") == 2 : true;
        if (!planned && force && (force[0] == '1' || force[0] == '2') && !force[1]) want = force[0] == '2';
        if (legal && want) {
            l->cluster = 2;
            l->grid &= ~(int64_t)1;   /* whole clusters */
        }
    }
    /* setmaxnreg (two consumer groups) shares out what the block holds
     * at entry, 384 x 168 = 64512 registers (not the SM's 65536): 24 for
     * the producer and 240 per consumer as FA3 (128 x 24 + 256 x 240 =
     * 64512); where it also loads mask tiles the producer needs 40 (at
     * 24 ptxas spilled their coordinates), so the consumers get 232. An
     * inc past the block's registers waits forever: 32 + 240 hung the
     * masked kernel on an H200 (2026-11-27) */
    l->producer_regs = M ? 40 : 24;
    l->consumer_regs = M ? 232 : 240;
    /* the kernel's register count (what occupancy sees; setmaxnreg moves
     * registers between the warp groups at run time): ptxas fills the
     * 65536 / threads cap (168 for 384 threads) with two consumer groups.
     * One group (256 threads, one block per SM whatever it uses) holds O
     * (d/2), S (BN/2) and P (BN/4) plus ~50 more (56 before the softmax
     * took one FFMA and one ex2 per score); left to the launch bounds
     * ptxas took 172..255 by shape (NVRTC 13.0: d 64 177..223, d 128
     * 206..254), so d 64 and 128 get a __maxnreg__ budget that pins them
     * without spills (d 64: 167..192 under 192, d 128: 200..224 under 224;
     * d 256 keeps the 255 of the launch bounds: 219..228 at BN 32,
     * 247..254 at BN 64). With the K and V rings apart and the
     * descriptors advanced by adds (#43) the estimate is +45 (NVRTC 13.0:
     * d 64 158..164, d 128 187 split-KV .. 224 with the TMA store, d 256
     * 203 at BN 64). */
    int cap = (65536 / l->threads) / 8 * 8;
    MCIR_ASSERT(128 * (l->producer_regs + l->consumers * l->consumer_regs) <= l->threads * cap);
    if (l->consumers > 1) {
        l->registers = cap;
    } else {
        l->max_registers = d == 64 ? 192 : d <= 128 ? 224 : 0;
        int est = (int)(d / 2 + 3 * l->bn / 4 + 45);
        l->registers = est < 255 ? est : 255;
    }
    return true;
}

void mcir_attention_sm90_choose(const mcir_target *t, mcir_kernel_plan *k, mcir_arena *a) {
    mcir_attention_sm90 l;
    const char *why = NULL;
    if (!mcir_attention_sm90_layout(t, k, &l, &why)) {
        if (t && t->has_wgmma && k->tiling.reason)
            k->tiling.reason = mcir_arena_printf(a, "%s; not the sm_90a path: %s", k->tiling.reason, why);
        return;
    }
    mcir_tiling *ti = &k->tiling;
    const char *names[MCIR_MAX_TILE_DIMS] = {"q", "kv", "d", "wg"};
    int64_t tile[MCIR_MAX_TILE_DIMS] = {l.bm, l.bn, l.d, l.consumers};
    int nd = 4;
    if (l.pack > 1) names[nd] = "pack", tile[nd++] = l.pack;
    if (l.split_kv) names[nd] = "kv_split", tile[nd++] = l.chunk;
    if (l.cluster > 1) names[nd] = "cluster", tile[nd++] = l.cluster;
    ti->n_dims = nd;
    for (int i = 0; i < nd; i++) ti->dim_names[i] = names[i], ti->block_tile[i] = tile[i];
    ti->warps = l.threads / 32;
    ti->stages = l.stages;
    ti->vector_width = 64;   /* TMA boxes of 64 columns */
    ti->working_set_bytes = l.smem_bytes;
    ti->blocks_per_sm = 1;
    ti->registers_estimate = l.registers;
    const char *mask = l.mask == MCIR_SM90_MASK_ROWS      ? "; the mask's tiles ride in the ring"
                       : l.mask == MCIR_SM90_MASK_ONE_ROW ? "; the mask's one row per K/V tile rides in the ring"
                                                          : "";
    const char *pack = l.pack > 1 ? mcir_arena_printf(a, "; GQA/MQA: the %lld query heads of a K/V head packed "
                                                         "into the rows (%lld rows an item), K/V read once per group",
                                                      (long long)l.pack, (long long)l.rows)
                                  : "";
    ti->reason = mcir_arena_printf(
        a,
        "sm_90a path (TMA + mbarriers + wgmma, warp specialised), d=%lld: BLOCK_M=%lld (%d consumer warp "
        "group%s of 64 query rows, setmaxnreg %d) BLOCK_N=%lld, %d-stage K and V rings fed by a producer warp "
        "group (setmaxnreg %d): %lld KiB of 128-byte-swizzled shared memory <= %lld KiB%s%s%s%s; "
        "%lld q-tiles x %lld items, walked by %lld persistent blocks of %d threads%s; %s",
        (long long)l.d, (long long)l.bm, l.consumers, l.consumers > 1 ? "s" : "", l.consumer_regs,
        (long long)l.bn, l.stages, l.producer_regs, (long long)(l.smem_bytes / 1024),
        (long long)(t->smem_per_block_optin / 1024), mask, pack,
        l.o_stage ? "; an O stage apart from Q, so the next item's Q loads under this one's epilogue" : "",
        l.cluster > 1 ? "; 2-block clusters on adjacent q-tiles of a head: each block's producer multicasts half of "
                        "every K and V tile into both (the L2 sends a tile once per cluster)"
                      : "",
        (long long)l.qtiles, (long long)l.items, (long long)l.grid, l.threads,
        l.order == 1 ? ", longest items first" : "",
        l.dynamic ? mcir_arena_printf(a, "dynamic scheduler: each block claims its next item from a counter once it "
                                         "has issued its item's last K tile (makespan %.0f K/V tiles, static %.0f)",
                                      l.dynamic_tiles, l.static_tiles)
        : l.dynamic_tiles > 0 && l.dynamic_tiles > l.static_tiles
            ? mcir_arena_printf(a, "static scheduler: a snake over the items (makespan %.0f K/V tiles, dynamic %.0f)",
                                l.static_tiles, l.dynamic_tiles)
            : "static scheduler: the items are of one length");
    if (l.split_kv)
        ti->reason = mcir_arena_printf(
            a, "%s; split-KV: %lld items < %d SMs, so Nk=%lld is split into %lld chunks of %lld keys -> %lld "
               "items; partial O, max and sum per split in %lld KiB of f32 scratch, merged by NAME_merge "
               "(%lld blocks of %d threads)",
            ti->reason, (long long)(l.qtiles * l.items), t->sm_count, (long long)l.nk, (long long)l.splits,
            (long long)l.chunk, (long long)(l.qtiles * l.items * l.splits),
            (long long)((l.scratch_bytes + 1023) / 1024),
            (long long)l.merge_grid, l.merge_block);
    k->scratch_bytes = l.scratch_bytes;
    k->sched_bytes = l.dynamic ? MCIR_SCHED_BYTES : 0;
    k->grid[0] = l.grid;
    k->grid[1] = k->grid[2] = 1;
    k->block[0] = l.threads;
    k->block[1] = k->block[2] = 1;
    k->smem_bytes = l.smem_bytes;   /* the mbarriers' few static bytes are not counted, as elsewhere */
}
