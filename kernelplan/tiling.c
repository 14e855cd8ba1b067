/*
 * tiling.c — tile choice per kernel template from the target description
 * (shared memory per block and per SM, registers, threads, warp size) and
 * the kernel's working set. One chooser per template, in a table.
 *
 * Invariant: every chosen tile has working_set_bytes == smem_bytes ≤ the
 * target's smem_per_block_optin, a block of at most max_threads_per_block
 * threads, and a reason that says why in numbers.
 */
#include <string.h>

#include "kernelplan/plan-impl.h"
#include "kernelplan/launch_sm90.h"

typedef struct tile_ctx {
    mcir_plan *p;
    mcir_kernel_plan *k;
    const mcir_target *t;
    mcir_arena *a;
    mcir_diag *d;
} tile_ctx;

static int64_t next_pow2(int64_t x) {
    int64_t v = 1;
    while (v < x) v <<= 1;
    return v;
}

static int64_t clamp64(int64_t x, int64_t lo, int64_t hi) {
    return x < lo ? lo : x > hi ? hi : x;
}

static int64_t round_up(int64_t x, int64_t m) { return plan_ceil_div(x, m) * m; }

/* Blocks of one kernel resident on an SM, and what limits them. */
static int blocks_per_sm(const mcir_target *t, int64_t smem, int threads, int regs,
                         const char **limit) {
    int by_threads = t->max_threads_per_sm / threads;
    int64_t by_smem = smem > 0 ? t->smem_per_sm / (smem + 1024) : 32;  /* 1 KiB reserved per block */
    int regs_alloc = (int)round_up(regs > 0 ? regs : 32, 8);
    int by_regs = t->regs_per_sm / (regs_alloc * threads);
    int b = 32;
    *limit = "the 32-block limit";
    if (by_threads < b) { b = by_threads; *limit = "threads"; }
    if (by_regs < b) { b = by_regs; *limit = "registers"; }
    if (by_smem < b) { b = (int)by_smem; *limit = "shared memory"; }
    return b;
}

static void set_dims(mcir_tiling *ti, int n, const char *const *names, const int64_t *tile) {
    ti->n_dims = n;
    for (int i = 0; i < n; i++) {
        ti->dim_names[i] = names[i];
        ti->block_tile[i] = tile[i];
    }
}

static void launch(mcir_kernel_plan *k, int64_t gx, int64_t gy, int64_t gz, int threads) {
    k->grid[0] = gx < 1 ? 1 : gx;
    k->grid[1] = gy < 1 ? 1 : gy;
    k->grid[2] = gz < 1 ? 1 : gz;
    k->block[0] = threads;
    k->block[1] = 1;
    k->block[2] = 1;
}

static bool is_half(mcir_dtype t) { return t == MCIR_DTYPE_F16 || t == MCIR_DTYPE_BF16; }

/* Widest load (16 bytes at most) that divides `len` elements. */
static int vector_width(int64_t len, mcir_dtype dt) {
    int v = 16 / (int)mcir_dtype_size(dt);
    while (v > 1 && len % v) v /= 2;
    return v;
}

static const char *kib(tile_ctx *c, int64_t b) { return mcir_plan_bytes_str(c->a, b); }

/* ------------------------------------------------------------ attention */

static bool tile_attention(tile_ctx *c) {
    mcir_kernel_plan *k = c->k;
    const mcir_target *t = c->t;
    const mcir_node *n = k->anchor;
    const mcir_tensor *Q = n->inputs[0], *K = n->inputs[1], *V = n->inputs[2];
    const mcir_tensor *O = n->outputs[0];
    int r = Q->rank;
    int64_t nq = Q->shape[r - 2], d = Q->shape[r - 1], nk = K->shape[K->rank - 2];
    int64_t dv = V->shape[V->rank - 1];
    int64_t bh = mcir_tensor_numel(O) / (nq * dv);
    bool tc = is_half(Q->dtype);
    int64_t es = (int64_t)mcir_dtype_size(Q->dtype);
    int64_t dp = round_up(d, 16), dvp = round_up(dv, 16), dmax = dp > dvp ? dp : dvp;

    /* preferred tile by head dim and dtype (FlashAttention-2/3 choices) */
    int64_t bm, bn;
    int warps;
    if (tc) {
        if (dmax <= 64 && t->has_wgmma) { bm = 128; bn = 128; warps = 8; }
        else if (dmax <= 128) { bm = 128; bn = 64; warps = 4; }
        else { bm = 64; bn = 64; warps = 4; }
    } else {
        if (dmax <= 64) { bm = 64; bn = 64; warps = 4; }
        else if (dmax <= 128) { bm = 64; bn = 32; warps = 4; }
        else { bm = 32; bn = 32; warps = 4; }
    }
    const char *shrunk = "";
    int64_t bm_fit = clamp64(next_pow2(nq), 16, bm), bn_fit = clamp64(next_pow2(nk), 16, bn);
    if (bm_fit < bm || bn_fit < bn) {
        shrunk = mcir_arena_printf(c->a, " (clamped to Nq=%lld, Nk=%lld)", (long long)nq,
                                   (long long)nk);
        bm = bm_fit;
        bn = bn_fit;
        if (warps > bm / 16) warps = (int)(bm / 16 < 1 ? 1 : bm / 16);
    }
#define ATT_WS(st) (es * (bm * dp + (st) * bn * (dp + dvp)))
#define ATT_REGS() ((int)((bm * dvp + bm * bn) / (warps * 32) + 40))
    /* shrink until one stage fits on chip and in registers */
    while (ATT_WS(1) > t->smem_per_block_optin || ATT_REGS() > t->regs_per_thread) {
        if (bn > 16) bn /= 2;
        else if (bm > 16) {
            bm /= 2;
            if (warps > bm / 16) warps = (int)(bm / 16);
        } else {
            mcir_error(c->d, n->loc,
                       "attention '%s': head dim %lld does not fit the shared memory of %s "
                       "(%s per block)", n->name, (long long)d, t->name,
                       kib(c, t->smem_per_block_optin));
            return false;
        }
        shrunk = " (shrunk to fit)";
    }
    /* stages: the most blocks per SM; among equals, the deeper pipeline */
    int threads = warps * 32, regs = ATT_REGS();
    int stages = 1, bps = -1;
    const char *limit = "";
    for (int st = 2; st >= 1; st--) {
        if (ATT_WS(st) > t->smem_per_block_optin) continue;
        const char *lim;
        int b = blocks_per_sm(t, ATT_WS(st), threads, regs, &lim);
        if (b > bps) { bps = b; stages = st; limit = lim; }
    }
    int64_t ws = ATT_WS(stages);
    /* split-KV (flash-decoding): when the (q-block, batch*head) grid cannot
     * fill the SMs (decode: Nq = 1), Nk is split so the grid reaches about
     * two blocks per SM, each split streaming at least 256 keys; a split is
     * a multiple of 128 keys (every K/V tile codegen may pick divides it).
     * Decode-sized Nq only (<= 16 rows: one query tile, e.g. speculative
     * decoding); a short prefill on few heads keeps the unsplit kernel */
    int64_t qblocks = plan_ceil_div(nq, bm) * bh, splits = 1, chunk = 0;
    if (nq <= 16 && qblocks < t->sm_count && nk >= 512) {
        splits = clamp64(plan_ceil_div(2 * t->sm_count, qblocks), 1, nk / 256);
        chunk = round_up(plan_ceil_div(nk, splits), 128);
        splits = plan_ceil_div(nk, chunk);
    }
    mcir_tiling *ti = &k->tiling;
    static const char *const names[] = {"q", "kv", "d", "kv_split"};
    int64_t tile[] = {bm, bn, dp, chunk};
    set_dims(ti, splits > 1 ? 4 : 3, names, tile);
    ti->warps = warps;
    ti->stages = stages;
    ti->vector_width = vector_width(d, Q->dtype);
    ti->working_set_bytes = ws;
    ti->blocks_per_sm = bps;
    ti->registers_estimate = regs;
    ti->reason = mcir_arena_printf(
        c->a,
        "%s %s path, d=%lld: BLOCK_M=%lld BLOCK_N=%lld%s, %d warps: Q tile %s + K/V tiles "
        "%s+%s x%d stage%s = %s <= %s (%s opt-in); %d block%s/SM (limited by %s, ~%d "
        "registers/thread); grid %lld q-blocks x %lld batch*heads",
        mcir_dtype_name(Q->dtype), tc ? "tensor-core" : "FMA", (long long)d, (long long)bm,
        (long long)bn, shrunk, warps, kib(c, es * bm * dp), kib(c, es * bn * dp),
        kib(c, es * bn * dvp), stages, stages > 1 ? "s" : "", kib(c, ws),
        kib(c, t->smem_per_block_optin), t->name, bps, bps == 1 ? "" : "s", limit, regs,
        (long long)plan_ceil_div(nq, bm), (long long)bh);
#undef ATT_WS
#undef ATT_REGS
    if (splits > 1) {
        k->scratch_bytes = bh * nq * splits * (dv + 2) * 4;
        ti->reason = mcir_arena_printf(
            c->a, "%s; split-KV: %lld blocks < %d SMs, so Nk=%lld is split into %lld chunks of %lld "
                  "keys (about 2 blocks per SM, >= 256 keys each); partial O, max and sum per split "
                  "in %s of f32 scratch, merged by a second kernel (online-softmax merge)",
            ti->reason, (long long)qblocks, t->sm_count, (long long)nk, (long long)splits,
            (long long)chunk, kib(c, k->scratch_bytes));
    }
    launch(k, plan_ceil_div(nq, bm), bh, splits, threads);
    k->smem_bytes = ws;
    return true;
}

/* ------------------------------------------------------------ row kernels */

/* One warp per row up to 1024 elements (4 rows per block), else one block
 * per row; state_words: per-warp running values exchanged through smem. */
static void tile_rows(tile_ctx *c, int64_t rows, int64_t row_len, int64_t row_stride,
                      mcir_dtype dt, int state_words, const char *what) {
    mcir_kernel_plan *k = c->k;
    const mcir_target *t = c->t;
    mcir_tiling *ti = &k->tiling;
    int vec = row_stride == 1 ? vector_width(row_len, dt) : 1;
    int ws = t->warp_size;
    static const char *const names[] = {"row", "col"};
    if (row_len <= 1024) {
        int warps = 4;
        int64_t per_lane = plan_ceil_div(row_len, ws);
        int64_t tile[] = {warps, row_len};
        set_dims(ti, 2, names, tile);
        ti->warps = warps;
        ti->stages = 1;
        ti->vector_width = vec;
        ti->working_set_bytes = 0;
        ti->registers_estimate = (int)(per_lane + 32);
        const char *lim;
        ti->blocks_per_sm = blocks_per_sm(t, 0, warps * ws, ti->registers_estimate, &lim);
        ti->reason = mcir_arena_printf(
            c->a,
            "%s: row of %lld %s <= 1024: one warp per row, %d rows per block, %lld "
            "elements per lane kept in registers, vector width %d%s; %lld rows -> %lld blocks",
            what, (long long)row_len, mcir_dtype_name(dt), warps, (long long)per_lane, vec,
            row_stride == 1 ? "" : " (strided rows)", (long long)rows,
            (long long)plan_ceil_div(rows, warps));
        launch(k, plan_ceil_div(rows, warps), 1, 1, warps * ws);
        k->smem_bytes = 0;
        return;
    }
    int64_t threads = clamp64(next_pow2(plan_ceil_div(row_len, (int64_t)vec * 8)), 128,
                              t->max_threads_per_block);
    int warps = (int)(threads / ws);
    int64_t per_thread = plan_ceil_div(row_len, threads);
    bool in_regs = per_thread <= 32;
    int64_t smem = (int64_t)warps * state_words * 4;
    int64_t tile[] = {1, row_len};
    set_dims(ti, 2, names, tile);
    ti->warps = warps;
    ti->stages = 1;
    ti->vector_width = vec;
    ti->working_set_bytes = smem;
    ti->registers_estimate = (int)((in_regs ? per_thread : 8) + 32);
    const char *lim;
    ti->blocks_per_sm = blocks_per_sm(t, smem, (int)threads, ti->registers_estimate, &lim);
    ti->reason = mcir_arena_printf(
        c->a,
        "%s: row of %lld %s > 1024: one block of %lld threads per row, vector width %d, "
        "%lld elements per thread %s; %s of cross-warp state in shared memory; %lld blocks",
        what, (long long)row_len, mcir_dtype_name(dt), (long long)threads, vec,
        (long long)per_thread,
        in_regs ? "kept in registers" : "(the second pass re-reads the row from L2)",
        kib(c, smem), (long long)rows);
    launch(k, rows, 1, 1, (int)threads);
    k->smem_bytes = smem;
}

static bool tile_norm(tile_ctx *c) {
    const mcir_node *n = c->k->anchor;
    const mcir_tensor *X = n->inputs[0];
    int axis = (int)mcir_node_int(n, "axis");
    if (axis < 0) axis += X->rank;
    int64_t row_len = 1, stride = 1;
    if (n->op == MCIR_OP_SOFTMAX) {
        row_len = X->shape[axis];
        for (int i = axis + 1; i < X->rank; i++) stride *= X->shape[i];
    } else {
        for (int i = axis; i < X->rank; i++) row_len *= X->shape[i];
    }
    int64_t rows = mcir_tensor_numel(X) / (row_len ? row_len : 1);
    int words = c->k->streaming_state == MCIR_STREAM_WELFORD ? 3
              : c->k->streaming_state == MCIR_STREAM_SOFTMAX ? 2 : 1;
    tile_rows(c, rows, row_len, stride, X->dtype, words,
              mcir_arena_printf(c->a, "%s (%s)", mcir_op_name(n->op),
                                mcir_streaming_state_name(c->k->streaming_state)));
    return true;
}

static bool tile_reduce(tile_ctx *c) {
    mcir_kernel_plan *k = c->k;
    const mcir_node *n = k->anchor;
    const mcir_tensor *X = n->inputs[0];
    bool reduced[MCIR_MAX_RANK] = {false};
    if (n->op == MCIR_OP_GLOBAL_AVG_POOL) {
        for (int i = 2; i < X->rank; i++) reduced[i] = true;
    } else {
        const int64_t *axes;
        int na = mcir_node_ints(n, "axes", &axes);
        for (int i = 0; i < na; i++) {
            int64_t ax = axes[i] < 0 ? axes[i] + X->rank : axes[i];
            if (ax >= 0 && ax < X->rank) reduced[ax] = true;
        }
    }
    int64_t R = 1;
    bool trailing = true, seen_kept = false;
    for (int i = X->rank - 1; i >= 0; i--) {
        if (reduced[i]) {
            R *= X->shape[i];
            if (seen_kept && X->shape[i] > 1) trailing = false;
        } else if (X->shape[i] > 1) {
            seen_kept = true;
        }
    }
    int64_t outs = mcir_tensor_numel(X) / (R ? R : 1);
    const char *what = mcir_arena_printf(c->a, "%s over %lld elements", mcir_op_name(n->op),
                                         (long long)R);
    if (!trailing) {
        /* column reduction: one thread per output, coalesced across threads */
        mcir_tiling *ti = &k->tiling;
        static const char *const names[] = {"out", "reduce"};
        int64_t tile[] = {256, R};
        set_dims(ti, 2, names, tile);
        ti->warps = 8;
        ti->stages = 1;
        ti->vector_width = 1;
        ti->registers_estimate = 32;
        const char *lim;
        ti->blocks_per_sm = blocks_per_sm(c->t, 0, 256, 32, &lim);
        ti->reason = mcir_arena_printf(
            c->a, "%s, reduced dims not innermost: one thread per output walks the reduced "
                  "dims (coalesced across outputs), 256 threads; %lld outputs -> %lld blocks",
            what, (long long)outs, (long long)plan_ceil_div(outs, 256));
        launch(k, plan_ceil_div(outs, 256), 1, 1, 256);
        return true;
    }
    /* a few long rows: split each across blocks, partial results in scratch */
    if (outs < c->t->sm_count && R >= 65536) {
        int64_t splits = clamp64(plan_ceil_div(2 * c->t->sm_count, outs), 2, R / 8192);
        mcir_tiling *ti = &k->tiling;
        static const char *const names[] = {"row", "split"};
        int64_t tile[] = {1, plan_ceil_div(R, splits)};
        set_dims(ti, 2, names, tile);
        ti->warps = 8;
        ti->stages = 1;
        ti->vector_width = vector_width(R, X->dtype);
        ti->working_set_bytes = 8 * 4;
        ti->registers_estimate = 40;
        const char *lim;
        ti->blocks_per_sm = blocks_per_sm(c->t, 32, 256, 40, &lim);
        k->scratch_bytes = outs * splits * 4;
        ti->reason = mcir_arena_printf(
            c->a, "%s in %lld rows < %d SMs: each row split over %lld blocks of 256 threads, "
                  "f32 partials in %s of scratch, then a second pass",
            what, (long long)outs, c->t->sm_count, (long long)splits, kib(c, k->scratch_bytes));
        launch(k, splits, outs, 1, 256);
        k->smem_bytes = 32;
        return true;
    }
    tile_rows(c, outs, R, 1, X->dtype, 1, what);
    return true;
}

/* ------------------------------------------------------ GEMM-shaped kernels */

static bool tile_gemm(tile_ctx *c, int64_t M, int64_t N, int64_t K, int64_t batch,
                      mcir_dtype dt, const char *what) {
    mcir_kernel_plan *k = c->k;
    const mcir_target *t = c->t;
    bool tc = is_half(dt);
    int64_t es = (int64_t)mcir_dtype_size(dt);
    int64_t bk = tc ? 32 : 8;
    int64_t bm = clamp64(next_pow2(M), 16, 128), bn = clamp64(next_pow2(N), 16, 128);
    /* fill the machine: smaller tiles while there are fewer tiles than SMs */
    const char *split = "";
    while (plan_ceil_div(M, bm) * plan_ceil_div(N, bn) * batch < t->sm_count &&
           (bm > 32 || bn > 32)) {
        if (bn >= bm && bn > 32) bn /= 2;
        else bm /= 2;
        split = mcir_arena_printf(c->a, " (halved until %lld tiles >= %d SMs or 32x32)",
                                  (long long)(plan_ceil_div(M, bm) * plan_ceil_div(N, bn) * batch),
                                  t->sm_count);
    }
    int warps = (int)clamp64(bm * bn / (tc ? 4096 : 2048), 2, 8);
    int threads = warps * 32;
    int regs = (int)(bm * bn / threads + (tc ? 64 : 40));
    if (regs > t->regs_per_thread) regs = t->regs_per_thread;
    int max_stages = tc ? (t->sm >= 90 ? 4 : 3) : 2;
    int stages = 1, bps = -1;
    const char *limit = "";
    for (int st = max_stages; st >= 1; st--) {
        int64_t ws = st * (bm * bk + bk * bn) * es;
        if (ws > t->smem_per_block_optin) continue;
        const char *lim;
        int b = blocks_per_sm(t, ws, threads, regs, &lim);
        if (b > bps) { bps = b; stages = st; limit = lim; }
    }
    int64_t ws = stages * (bm * bk + bk * bn) * es;
    mcir_tiling *ti = &k->tiling;
    static const char *const names[] = {"M", "N", "K"};
    int64_t tile[] = {bm, bn, bk};
    set_dims(ti, 3, names, tile);
    ti->warps = warps;
    ti->stages = stages;
    ti->vector_width = vector_width(K, dt);
    ti->working_set_bytes = ws;
    ti->blocks_per_sm = bps;
    ti->registers_estimate = regs;
    ti->reason = mcir_arena_printf(
        c->a,
        "%s M=%lld N=%lld K=%lld batch=%lld, %s %s: BLOCK_M=%lld BLOCK_N=%lld BLOCK_K=%lld%s, "
        "%d warps, %d stages x (A %s + B %s) = %s <= %s (%s opt-in); %d block%s/SM "
        "(limited by %s)",
        what, (long long)M, (long long)N, (long long)K, (long long)batch,
        mcir_dtype_name(dt), tc ? "tensor cores" : "FMA", (long long)bm, (long long)bn,
        (long long)bk, split, warps, stages, kib(c, bm * bk * es), kib(c, bk * bn * es),
        kib(c, ws), kib(c, t->smem_per_block_optin), t->name, bps, bps == 1 ? "" : "s", limit);
    launch(k, plan_ceil_div(N, bn), plan_ceil_div(M, bm), batch, threads);
    k->smem_bytes = ws;
    return true;
}

static bool tile_matmul(tile_ctx *c) {
    const mcir_node *n = c->k->anchor;
    const mcir_tensor *A = n->inputs[0], *B = n->inputs[1], *Y = n->outputs[0];
    bool ta = mcir_node_bool(n, "transpose_a"), tb = mcir_node_bool(n, "transpose_b");
    int ra = A->rank, rb = B->rank;
    int64_t M = ra >= 2 ? (ta ? A->shape[ra - 1] : A->shape[ra - 2]) : 1;
    int64_t K = ra >= 2 ? (ta ? A->shape[ra - 2] : A->shape[ra - 1]) : A->shape[0];
    int64_t N = rb >= 2 ? (tb ? B->shape[rb - 2] : B->shape[rb - 1]) : 1;
    int64_t batch = mcir_tensor_numel(Y) / (M * N > 0 ? M * N : 1);
    int epilogue = 0;
    for (int i = 0; i < c->k->n_nodes; i++)
        epilogue += c->k->nodes[i] != n && c->k->nodes[i]->op != MCIR_OP_TRANSPOSE;
    const char *what = epilogue
        ? mcir_arena_printf(c->a, "matmul + %d-node epilogue,", epilogue)
        : "matmul";
    return tile_gemm(c, M, N, K, batch < 1 ? 1 : batch, A->dtype, what);
}

static bool tile_conv2d(tile_ctx *c) {
    const mcir_node *n = c->k->anchor;
    const mcir_tensor *X = n->inputs[0], *W = n->inputs[1], *Y = n->outputs[0];
    int64_t groups = mcir_node_int(n, "groups");
    int64_t M = Y->shape[0] * Y->shape[2] * Y->shape[3];
    int64_t N = Y->shape[1] / groups;
    int64_t K = W->shape[1] * W->shape[2] * W->shape[3];
    const char *what = mcir_arena_printf(
        c->a, "implicit GEMM (M=N*OH*OW, N=OC/groups, K=C/groups*KH*KW%s),",
        c->k->n_nodes > 1 ? ", bias/activation epilogue" : "");
    return tile_gemm(c, M, N, K, groups, X->dtype, what);
}

/* ------------------------------------------------------ data-parallel kernels */

static int64_t max_write_numel(const mcir_kernel_plan *k) {
    int64_t m = 1;
    for (int i = 0; i < k->n_writes; i++) {
        int64_t v = mcir_tensor_numel(k->write_access[i].logical);
        if (v > m) m = v;
    }
    return m;
}

/* 256 threads, `vec` elements per thread, a grid covering numel (a
 * grid-stride loop beyond 2^31-1 blocks). */
static void tile_flat(tile_ctx *c, int64_t numel, int vec, int64_t smem, const char *what) {
    mcir_kernel_plan *k = c->k;
    mcir_tiling *ti = &k->tiling;
    static const char *const names[] = {"elements"};
    int64_t per_block = 256 * (int64_t)vec;
    int64_t tile[] = {per_block};
    set_dims(ti, 1, names, tile);
    ti->warps = 8;
    ti->stages = 1;
    ti->vector_width = vec;
    ti->working_set_bytes = smem;
    ti->registers_estimate = 32;
    const char *lim;
    ti->blocks_per_sm = blocks_per_sm(c->t, smem, 256, 32, &lim);
    int64_t grid = plan_ceil_div(numel, per_block);
    bool capped = grid > INT32_MAX;
    if (capped) grid = INT32_MAX;
    ti->reason = mcir_arena_printf(
        c->a, "%s: %lld elements, 256 threads x vector width %d -> %lld blocks%s%s%s",
        what, (long long)numel, vec, (long long)grid, capped ? " (grid-stride loop)" : "",
        smem ? ", shared tile " : "", smem ? kib(c, smem) : "");
    launch(k, grid, 1, 1, 256);
    k->smem_bytes = smem;
}

static bool tile_elementwise(tile_ctx *c) {
    mcir_kernel_plan *k = c->k;
    int64_t numel = max_write_numel(k);
    mcir_dtype dt = k->anchor->outputs[0]->dtype;
    int vec = vector_width(numel, dt);
    /* a broadcast operand must not change inside one vector: same-size and
     * scalar operands always line up; the others (last dim equal or 1)
     * need rows that are a multiple of the vector */
    const mcir_tensor *y = k->write_access[0].logical;
    for (int i = 1; i < k->n_writes; i++)
        if (mcir_tensor_numel(k->write_access[i].logical) > mcir_tensor_numel(y))
            y = k->write_access[i].logical;
    int64_t row = y->rank ? y->shape[y->rank - 1] : 1;
    for (int i = 0; i < k->n_reads; i++) {
        const mcir_tensor *x = k->read_access[i].logical;
        int64_t nx = mcir_tensor_numel(x);
        if (k->read_access[i].folded) vec = 1;
        else if (nx != 1 && nx != numel && row % vec) vec = vector_width(row, dt);
    }
    const char *what = k->n_nodes > 1
        ? mcir_arena_printf(c->a, "fused chain of %d nodes (%d intermediates in registers)",
                            k->n_nodes, k->n_internal)
        : mcir_op_name(k->anchor->op);
    tile_flat(c, numel, vec, 0, what);
    return true;
}

static bool tile_pool(tile_ctx *c) {
    const mcir_node *n = c->k->anchor;
    if (n->op == MCIR_OP_GLOBAL_AVG_POOL) return tile_reduce(c);
    const int64_t *kern;
    int nk = mcir_node_ints(n, "kernel", &kern);
    const char *what = mcir_arena_printf(c->a, "%s %lldx%lld window, one thread per output",
                                         mcir_op_name(n->op), (long long)kern[0],
                                         (long long)(nk > 1 ? kern[1] : kern[0]));
    tile_flat(c, mcir_tensor_numel(n->outputs[0]), 1, 0, what);
    return true;
}

static bool tile_copy(tile_ctx *c) {
    mcir_kernel_plan *k = c->k;
    const mcir_node *n = k->anchor;
    int64_t numel = 0;
    for (int i = 0; i < k->n_writes; i++) numel += mcir_tensor_numel(k->writes[i]);
    if (numel == 0) numel = 1;
    mcir_dtype dt = n->outputs[0]->dtype;
    if (n->op == MCIR_OP_TRANSPOSE) {
        const int64_t *perm;
        int r = mcir_node_ints(n, "perm", &perm);
        int64_t last = r < 1 ? 0 : perm[r - 1] < 0 ? perm[r - 1] + r : perm[r - 1];
        if (r >= 2 && last != r - 1) {
            /* the innermost dim changes: stage 32x32 tiles in shared memory
             * (33 columns: no bank conflicts) so reads and writes coalesce */
            int64_t smem = 32 * 33 * (int64_t)mcir_dtype_size(dt);
            mcir_tiling *ti = &k->tiling;
            static const char *const names[] = {"rows", "cols"};
            int64_t tile[] = {32, 32};
            set_dims(ti, 2, names, tile);
            ti->warps = 8;
            ti->stages = 1;
            ti->vector_width = 1;
            ti->working_set_bytes = smem;
            ti->registers_estimate = 32;
            const char *lim;
            ti->blocks_per_sm = blocks_per_sm(c->t, smem, 256, 32, &lim);
            int64_t grid = plan_ceil_div(numel, 1024);
            ti->reason = mcir_arena_printf(
                c->a, "transpose moving the innermost dim: 32x32 tiles through %s of shared "
                      "memory, 256 threads (32x8), %lld elements -> %lld blocks",
                kib(c, smem), (long long)numel, (long long)grid);
            launch(k, grid, 1, 1, 256);
            k->smem_bytes = smem;
            return true;
        }
    }
    tile_flat(c, numel, 1, 0, mcir_arena_printf(c->a, "%s copy", mcir_op_name(n->op)));
    return true;
}

typedef bool (*tile_fn)(tile_ctx *c);

static const tile_fn tile_fns[MCIR_TEMPLATE_COUNT] = {
    [MCIR_TEMPLATE_STREAMING_ATTENTION] = tile_attention,
    [MCIR_TEMPLATE_STREAMING_NORM] = tile_norm,
    [MCIR_TEMPLATE_MATMUL] = tile_matmul,
    [MCIR_TEMPLATE_CONV2D] = tile_conv2d,
    [MCIR_TEMPLATE_REDUCE] = tile_reduce,
    [MCIR_TEMPLATE_POOL] = tile_pool,
    [MCIR_TEMPLATE_COPY] = tile_copy,
    [MCIR_TEMPLATE_ELEMENTWISE] = tile_elementwise,
};

/* ------------------------------------------------ library epilogues */

/* t is read by k as stored (a library call gets its pointer): no view,
 * at most a folded transpose of the last two dims for an operand. */
static bool kernel_reads(const mcir_kernel_plan *k, const mcir_tensor *t, bool operand) {
    const mcir_kernel_access *x = mcir_kernel_access_of(k, t);
    if (!x || x < k->read_access || x >= k->read_access + k->n_reads) return false;
    if (!x->folded) return true;
    return operand && x->folded->op == MCIR_OP_TRANSPOSE && x->folded->inputs[0] == x->tensor;
}

/* The one region node reading t, or NULL (none or several). */
static const mcir_node *sole_reader(const mcir_kernel_plan *k, const mcir_tensor *t) {
    const mcir_node *found = NULL;
    for (int i = 0; i < k->n_nodes; i++)
        for (int j = 0; j < k->nodes[i]->n_inputs; j++)
            if (k->nodes[i]->inputs[j] == t) {
                if (found && found != k->nodes[i]) return NULL;
                found = k->nodes[i];
            }
    return found;
}

bool mcir_kernel_gemm_epilogue(const mcir_kernel_plan *k, mcir_gemm_epilogue *e) {
    memset(e, 0, sizeof *e);
    const mcir_node *mm = k->anchor;
    if (k->tpl != MCIR_TEMPLATE_MATMUL || mm->op != MCIR_OP_MATMUL) {
        e->why = "not a matmul";
        return false;
    }
    const mcir_tensor *A = mm->inputs[0], *B = mm->inputs[1], *t = mm->outputs[0];
    if (t->rank < 2 || mcir_tensor_numel(t) != t->shape[t->rank - 1] * t->shape[t->rank - 2]) {
        e->why = "batched";
        return false;
    }
    if (!kernel_reads(k, A, true) || !kernel_reads(k, B, true) || A->dtype != B->dtype) {
        e->why = "an operand is computed in the kernel (a prologue) or the dtypes differ";
        return false;
    }
    int64_t n_cols = t->shape[t->rank - 1];
    bool act = false, relu = false;
    int chain = 0;
    while (k->n_writes != 1 || k->write_access[0].logical != t) {
        const mcir_node *x = sole_reader(k, t);
        if (!x || mcir_kernel_access_of(k, t)) {
            e->why = "an intermediate of the epilogue is stored or read twice";
            return false;
        }
        const mcir_tensor *o = x->outputs[0];
        if ((x->op == MCIR_OP_RELU || (x->op == MCIR_OP_GELU &&
             strcmp(mcir_node_string(x, "approximate"), "tanh") == 0)) && !act && !e->residual) {
            act = true;
            relu = x->op == MCIR_OP_RELU;
        } else if (x->op == MCIR_OP_ADD && x->n_inputs == 2 && !act) {
            const mcir_tensor *other = x->inputs[0] == t ? x->inputs[1] : x->inputs[0];
            if (other == t || other->dtype != o->dtype) {
                e->why = "an add that is neither a bias nor a residual";
                return false;
            }
            if (!e->bias && other->kind == MCIR_TENSOR_WEIGHT && other->rank == 1 &&
                other->shape[0] == n_cols && kernel_reads(k, other, false)) {
                e->bias = other;
            } else if (!e->residual && kernel_reads(k, other, false) && other->rank == o->rank &&
                       memcmp(other->shape, o->shape, sizeof(int64_t) * (size_t)o->rank) == 0) {
                e->residual = other;
            } else {
                e->why = "an add that is neither a bias nor a residual";
                return false;
            }
        } else {
            e->why = "an op the library epilogues lack (only bias, ReLU, tanh-GELU, residual)";
            return false;
        }
        if (o->dtype != t->dtype && chain > 0) {
            e->why = "the epilogue changes dtype";
            return false;
        }
        t = o;
        if (++chain > 4) {
            e->why = "too long";
            return false;
        }
    }
    if (chain == 0) {
        e->why = "no epilogue";
        return false;
    }
    int fused_nodes = 1 + chain;
    for (int i = 0; i < k->n_nodes; i++)
        if (k->nodes[i]->op == MCIR_OP_TRANSPOSE || k->nodes[i]->op == MCIR_OP_RESHAPE ||
            k->nodes[i]->op == MCIR_OP_SPLIT)
            fused_nodes++;   /* folded operand views */
    if (fused_nodes != k->n_nodes) {
        e->why = "the region holds more than the matmul and its epilogue chain";
        return false;
    }
    e->out = t;
    e->code = act ? (relu ? 2 : 32) : 1;
    if (e->bias) e->code = act ? e->code | 4 : 4;
    return true;
}

bool mcir_plan_choose_tiling(mcir_plan *p, mcir_kernel_plan *k, mcir_diag *d) {
    tile_ctx c = {.p = p, .k = k, .t = p->target, .a = p->arena, .d = d};
    memset(&k->tiling, 0, sizeof k->tiling);
    k->scratch_bytes = 0;
    MCIR_ASSERT(tile_fns[k->tpl]);
    if (!tile_fns[k->tpl](&c)) return false;
    if (k->tpl == MCIR_TEMPLATE_STREAMING_ATTENTION) mcir_attention_sm90_choose(p->target, k, p->arena);
    MCIR_ASSERT(k->smem_bytes <= p->target->smem_per_block_optin);
    MCIR_ASSERT(k->block[0] * k->block[1] * k->block[2] <= p->target->max_threads_per_block);
    return true;
}
