/*
 * launch_sm90.c — when streaming attention takes the sm_90a path (TMA,
 * mbarriers, wgmma, a producer warp group and one or two consumer warp
 * groups) and with which tiles; see launch_sm90.h. The tiles follow
 * FlashAttention-3's choices for head dims 64/128/256 within the 227 KiB
 * of an H100 block: 128 query rows (2 consumer groups; 64 for Nq <= 64),
 * K/V tiles of 128 keys (64 at d = 256), a 2-stage ring.
 */
#include <string.h>

#include "kernelplan/launch_sm90.h"

/* Q/K/V must be read as stored or through a folded transpose whose
 * strides a tensor map can hold: unit innermost stride, the others
 * multiples of 16 bytes. */
static bool tma_describable(const mcir_kernel_plan *k, const mcir_tensor *t) {
    const mcir_kernel_access *x = mcir_kernel_access_of(k, t);
    if (!x || x < k->read_access || x >= k->read_access + k->n_reads) return false;
    if (x->rank < 2 || x->rank > 5 || x->strides[x->rank - 1] != 1) return false;
    for (int i = 0; i < x->rank - 1; i++)
        if (t->shape[i] != 1 && (x->strides[i] * 2) % 16 != 0) return false;
    return true;
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
    if ((Q->dtype != MCIR_DTYPE_F16 && Q->dtype != MCIR_DTYPE_BF16) || K->dtype != Q->dtype ||
        V->dtype != Q->dtype || O->dtype != Q->dtype) {
        *why = "Q, K, V and O are not all f16 or all bf16";
        return false;
    }
    if (n->n_inputs > 3) {
        *why = "an additive mask (not in the sm_90a template yet)";
        return false;
    }
    int64_t d = Q->shape[Q->rank - 1];
    if (K->shape[K->rank - 1] != d || V->shape[V->rank - 1] != d || (d != 64 && d != 128 && d != 256)) {
        *why = "head dims other than 64, 128, 256 (or d != dv)";
        return false;
    }
    if (Q->rank != O->rank || K->rank != O->rank || V->rank != O->rank || O->rank > 5) {
        *why = "Q, K, V and O differ in rank (broadcast heads)";
        return false;
    }
    for (int i = 0; i < O->rank - 2; i++)
        if (Q->shape[i] != O->shape[i] || K->shape[i] != O->shape[i] || V->shape[i] != O->shape[i]) {
            *why = "Q, K or V broadcast over a leading dim";
            return false;
        }
    if (!tma_describable(k, Q) || !tma_describable(k, K) || !tma_describable(k, V)) {
        *why = "Q, K or V is not a kernel read with unit innermost stride and 16-byte row strides (no tensor map)";
        return false;
    }
    for (int i = 0; i < k->tiling.n_dims; i++)
        if (k->tiling.dim_names[i] && strcmp(k->tiling.dim_names[i], "kv_split") == 0) {
            *why = "split-KV decoding (the mma.sync split kernel and its merge)";
            return false;
        }
    int64_t nq = Q->shape[Q->rank - 2], bh = 1;
    for (int i = 0; i < O->rank - 2; i++) bh *= O->shape[i];
    l->d = d;
    l->consumers = nq > 64 ? 2 : 1;
    l->bm = 64 * l->consumers;
    l->bn = d == 256 ? 64 : 128;
    l->stages = 2;
    l->threads = 128 * (1 + l->consumers);
    l->qtiles = (nq + l->bm - 1) / l->bm;
    l->grid = l->qtiles * bh;
    l->smem_bytes = (int64_t)l->consumers * 64 * d * 2 + l->stages * 2 * l->bn * d * 2 + 1024;
    l->producer_regs = 24;
    l->consumer_regs = 240;
    if (l->smem_bytes > t->smem_per_block_optin || l->threads > t->max_threads_per_block) {
        *why = "the tiles do not fit the target's shared memory";
        return false;
    }
    if (l->grid >= (1ll << 31)) {
        *why = "more blocks than a grid holds";
        return false;
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
    static const char *const names[] = {"q", "kv", "d", "wg"};
    int64_t tile[] = {l.bm, l.bn, l.d, l.consumers};
    ti->n_dims = 4;
    for (int i = 0; i < 4; i++) ti->dim_names[i] = names[i], ti->block_tile[i] = tile[i];
    ti->warps = l.threads / 32;
    ti->stages = l.stages;
    ti->vector_width = 64;   /* TMA boxes of 64 columns */
    ti->working_set_bytes = l.smem_bytes;
    ti->blocks_per_sm = 1;
    /* the kernel's register count (what occupancy sees; setmaxnreg moves
     * registers between the warp groups at run time): ptxas fills the
     * 65536 / threads cap (168 for 384 threads) with two consumer groups,
     * ~205 with one since the pipelined loop (P of the previous tile kept
     * as A fragments) and the TMA store of O (ptxas 13.0, Nq 1/64, causal
     * or not, Nk 300: 180..232 d=64, 184..222 d=128, 207..212 d=256;
     * before them 104..110 / 140 / 178) */
    int cap = (65536 / l.threads) / 8 * 8;
    int regs = l.consumers > 1 ? cap : 205;
    ti->registers_estimate = regs < cap ? regs : cap;
    ti->reason = mcir_arena_printf(
        a,
        "sm_90a path (TMA + mbarriers + wgmma, warp specialised), d=%lld: BLOCK_M=%lld (%d consumer warp "
        "group%s of 64 query rows, setmaxnreg %d) BLOCK_N=%lld, a %d-stage K/V ring fed by a producer warp "
        "group (setmaxnreg %d): Q %lld KiB + ring %lld KiB of 128-byte-swizzled shared memory <= %lld KiB; "
        "%lld q-tiles x %lld batch*heads -> %lld blocks of %d threads",
        (long long)l.d, (long long)l.bm, l.consumers, l.consumers > 1 ? "s" : "", l.consumer_regs,
        (long long)l.bn, l.stages, l.producer_regs, (long long)(l.consumers * 64 * l.d * 2 / 1024),
        (long long)(l.stages * 2 * l.bn * l.d * 2 / 1024), (long long)(t->smem_per_block_optin / 1024),
        (long long)l.qtiles, (long long)(l.grid / l.qtiles), (long long)l.grid, l.threads);
    k->scratch_bytes = 0;
    k->grid[0] = l.grid;
    k->grid[1] = k->grid[2] = 1;
    k->block[0] = l.threads;
    k->block[1] = k->block[2] = 1;
    k->smem_bytes = l.smem_bytes;   /* the mbarriers' few static bytes are not counted, as elsewhere */
}
