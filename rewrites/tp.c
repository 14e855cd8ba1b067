/*
 * tp.c — tensor parallelism as a rewrite (`mcirc --tp N`, docs/rewrites.md
 * "Tensor parallelism"): a one-rank graph becomes the program every one of
 * N ranks runs (graph.json "ranks", "shard"), Megatron-style.
 *
 * Every tensor gets a layout, decided node by node in topological order:
 *   R        replicated: every rank holds the whole tensor;
 *   S(a, b)  split along axis a: rank r holds part r (of every one of b
 *            equal blocks of the axis, for a fused QKV product);
 *   P        partial sums: the whole tensor is the sum over the ranks.
 * Inputs start R. A product x·W with x replicated and W a constant splits
 * W's columns (column-parallel: S(last)); a product whose x is split along
 * its K axis splits W's rows (row-parallel: P). Elementwise ops, reshapes,
 * transposes, softmax and norms over other axes, and attention keep a
 * split (so attention runs on each rank's heads); a constant operand that
 * spans the split axis (a bias) is split with it; P stays P through sums
 * of partials and linear views. Anything else takes its inputs whole: an
 * all_gather of S, an all_reduce of P (so a row-parallel bias is added
 * once, after the reduction), and graph outputs are made whole the same
 * way. Each decision is a trace record (stage "tp", property
 * "tensor_parallel") with its legality checks: the rules are this file's,
 * not the YAML catalog's (yet).
 *
 * The graph is rewritten in place on whole shapes; at the end the sharded
 * leaves take their per-rank shapes, reshape and split attributes their
 * per-rank extents, and shape inference runs again.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "rewrites/rewrites.h"

typedef enum { L_R, L_S, L_P } lkind;

typedef struct layout {
    lkind kind;
    int axis;     /* L_S */
    int blocks;   /* L_S: 1, or the blocks of a fused product's columns */
} layout;

typedef struct tp {
    mcir_graph *g;
    int n;                 /* ranks */
    mcir_trace *trace;
    layout *lay;           /* by tensor id */
    bool *decided;         /* weights: their layout is fixed (a consumer split it or took it whole) */
    mcir_tensor **whole;   /* by tensor id: its all_gather / all_reduce, once made */
    int cap;
    int reduces, gathers;  /* collectives inserted */
    bool sp;               /* sequence parallelism (--tp-sp): partial sums scattered by rows */
    int scatters;          /* reduce_scatters inserted */
} tp;

static const layout R = {L_R, -1, 1};

static void grow(tp *t) {
    int n = t->g->n_tensors;
    if (n <= t->cap) return;
    int cap = n * 2;
    t->lay = realloc(t->lay, sizeof *t->lay * (size_t)cap);
    t->decided = realloc(t->decided, sizeof *t->decided * (size_t)cap);
    t->whole = realloc(t->whole, sizeof *t->whole * (size_t)cap);
    MCIR_ASSERT(t->lay && t->decided && t->whole);
    for (int i = t->cap; i < cap; i++) {
        t->lay[i] = R;
        t->decided[i] = false;
        t->whole[i] = NULL;
    }
    t->cap = cap;
}

static layout lay_of(tp *t, const mcir_tensor *x) {
    grow(t);
    return t->lay[x->id];
}

static void set_lay(tp *t, const mcir_tensor *x, layout l) {
    grow(t);
    t->lay[x->id] = l;
}

/* ----------------------------------------------------------- the trace */

static json_t *check(const char *name, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static json_t *check(const char *name, bool ok, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return json_pack("{s:s, s:b, s:s}", "check", name, "ok", ok, "detail", buf);
}

/* One decision: rule at node n, its checks (stolen), applied or rejected,
 * what it made. */
static void record(tp *t, const char *rule, const mcir_node *n, json_t *legality, bool applied,
                   const char *result) {
    if (!t->trace) {
        json_decref(legality);
        return;
    }
    json_t *r = json_object();
    json_object_set_new(r, "stage", json_string("tp"));
    json_object_set_new(r, "rule", json_string(rule));
    json_object_set_new(r, "property", json_string("tensor_parallel"));
    json_object_set_new(r, "anchor", json_string(n->name));
    json_object_set_new(r, "matched", json_pack("[s]", n->name));
    json_object_set_new(r, "legality", legality ? legality : json_array());
    json_object_set_new(r, "decision", json_string(applied ? "applied" : "rejected"));
    if (applied && result) json_object_set_new(r, "result", json_pack("[s]", result));
    json_object_set_new(r, "ranks", json_integer(t->n));
    mcir_trace_append(t->trace, r);
}

static const char *lay_text(tp *t, const mcir_tensor *x, char *buf, size_t n) {
    layout l = lay_of(t, x);
    if (l.kind == L_R) snprintf(buf, n, "whole on every rank");
    else if (l.kind == L_P) snprintf(buf, n, "partial sums over the ranks");
    else if (l.blocks > 1) snprintf(buf, n, "split along axis %d (each of %d blocks)", l.axis, l.blocks);
    else snprintf(buf, n, "split along axis %d", l.axis);
    return buf;
}

/* ---------------------------------------------------- making tensors whole */

/* A new tensor of x's (whole) shape, so the rules after it see its rank
 * and extents (an unknown rank would read as broadcast along every axis);
 * shape inference gives it its per-rank shape at the end. */
static mcir_tensor *like(tp *t, const mcir_tensor *x, const char *name) {
    mcir_tensor *y = mcir_graph_add_tensor(t->g, name, x->dtype, x->rank, x->rank >= 0 ? x->shape : NULL,
                                           MCIR_TENSOR_INTERMEDIATE);
    MCIR_ASSERT(y);
    if (x->sym && x->rank > 0) y->sym = mcir_arena_memdup(t->g->arena, x->sym, sizeof *x->sym * (size_t)x->rank);
    return y;
}

/* The tests' mutants ($MCIR_TP_MUTANT): "bias_on_partials" adds a bias to
 * each rank's partial sums (so ranks times over); "drop_reduce" makes
 * partial sums whole without the all_reduce; "chunks_swapped" joins the
 * two chunks of tp_overlap_chunks the wrong way round. --verify must catch
 * them. */
static bool mutant(const char *name) {
    const char *m = getenv("MCIR_TP_MUTANT");
    return m && !strcmp(m, name);
}

static bool is_weight(const mcir_tensor *x) { return x->kind == MCIR_TENSOR_WEIGHT; }
static bool is_input(const mcir_tensor *x) { return x->kind == MCIR_TENSOR_INPUT && !x->is_output; }

static bool static_extent(const mcir_tensor *x, int axis) {
    if (!x->sym) return true;
    mcir_extent e = mcir_tensor_extent(x, axis);
    return mcir_extent_is_const(&e, NULL);
}

/* The collective that makes x (layout l) whole into y: an all_reduce of
 * partial sums, an all_gather of a split; counted, y whole. */
static mcir_node *add_collective(tp *t, mcir_tensor *x, mcir_tensor *y, layout l, const char *origin) {
    bool reduce = l.kind == L_P;
    mcir_op op = reduce ? MCIR_OP_ALL_REDUCE : MCIR_OP_ALL_GATHER;
    mcir_node *c = mcir_graph_add_node(t->g, op, mcir_graph_fresh_name(t->g, mcir_arena_printf(t->g->arena, "tp_%s",
                                                                           mcir_op_name(op))),
                                       1, &x, 1, &y);
    c->origin_rule = reduce ? "tp_reduce" : "tp_gather";
    c->origin_nodes = origin;
    if (!reduce) mcir_node_set_int(t->g, c, "axis", l.axis);
    if (reduce) t->reduces++;
    else t->gathers++;
    set_lay(t, y, R);
    return c;
}

/* x whole on every rank: itself, or its all_gather / all_reduce (made
 * once, right after its producer), recorded at n, the node that needs it. */
static mcir_tensor *whole(tp *t, mcir_tensor *x, const mcir_node *n, const char *why) {
    layout l = lay_of(t, x);
    if (l.kind == L_R) return x;
    if (t->whole[x->id]) return t->whole[x->id];
    if (l.kind == L_P && mutant("drop_reduce")) return x;
    char b[128];
    bool reduce = l.kind == L_P;
    const char *name = mcir_graph_fresh_name(t->g, mcir_arena_printf(t->g->arena, "%s_%s", x->name,
                                                                      reduce ? "reduced" : "gathered"));
    mcir_tensor *y = like(t, x, name);
    mcir_node *c = add_collective(t, x, y, l, n->name);
    if (!reduce && l.blocks > 1 && x->rank + 2 <= MCIR_MAX_RANK) {
        /* a blocked split gathers rank-major ([ranks, blocks, e] along the
         * axis): moved block-major by a reshape, a transpose, a reshape */
        int64_t s1[MCIR_MAX_RANK], perm[MCIR_MAX_RANK];
        int r1 = 0, a = l.axis;
        for (int i = 0; i < x->rank; i++) {
            if (i != a) {
                s1[r1++] = x->shape[i];
                continue;
            }
            s1[r1++] = t->n;
            s1[r1++] = l.blocks;
            s1[r1++] = x->shape[i] / ((int64_t)t->n * l.blocks);
        }
        for (int i = 0; i < r1; i++) perm[i] = i;
        perm[a] = a + 1;
        perm[a + 1] = a;
        mcir_tensor *prev = y;
        for (int step = 0; step < 3; step++) {
            mcir_op sop = step == 1 ? MCIR_OP_TRANSPOSE : MCIR_OP_RESHAPE;
            mcir_tensor *z = step == 2 ? like(t, x, mcir_graph_fresh_name(t->g, name))   /* what the rules read */
                                       : mcir_graph_add_tensor(t->g, mcir_graph_fresh_name(t->g, name), x->dtype, -1,
                                                               NULL, MCIR_TENSOR_INTERMEDIATE);
            MCIR_ASSERT(z);
            mcir_node *m = mcir_graph_add_node(t->g, sop, NULL, 1, &prev, 1, &z);
            m->origin_rule = "tp_gather";
            m->origin_nodes = n->name;
            if (step == 0) mcir_node_set_ints(t->g, m, "shape", r1, s1);
            else if (step == 1) mcir_node_set_ints(t->g, m, "perm", r1, perm);
            else mcir_node_set_ints(t->g, m, "shape", x->rank, x->shape);
            set_lay(t, z, R);
            prev = z;
        }
        y = prev;
    }
    grow(t);
    t->whole[x->id] = y;
    set_lay(t, y, R);
    json_t *leg = json_array();
    json_array_append_new(leg, check("input_layout", false, "'%s' is %s; %s", x->name, lay_text(t, x, b, sizeof b),
                                     why));
    record(t, reduce ? "tp_reduce" : "tp_gather", n, leg, true, c->name);
    return y;
}

/* ------------------------------------------------------------- the rules */


/* The axis of an operand of rank rx, aligned right against the output's
 * rank ro (broadcasting); -1 where the operand has no such axis. */
static int align(int axis, int ro, int rx) {
    int a = axis - (ro - rx);
    return a >= 0 && a < rx ? a : -1;
}

/* The only consumer of x, or NULL. */
static mcir_node *only_consumer(tp *t, const mcir_tensor *x, int *slot) {
    mcir_node *only = NULL;
    int readers = 0;
    for (int k = 0; k < t->g->n_nodes; k++) {
        mcir_node *c = t->g->nodes[k];
        for (int i = 0; !c->dead && i < c->n_inputs; i++)
            if (c->inputs[i] == x) {
                readers++;
                only = c;
                *slot = i;
            }
    }
    return readers == 1 && !x->is_output ? only : NULL;
}

/* The node a product's output y feeds past its bias add (at most two
 * adds, each y's only reader): that node, *y the tensor it reads; NULL
 * where y has several readers, is an output, or adds go on. */
static const mcir_node *past_bias(tp *t, const mcir_tensor **y) {
    int slot;
    for (int depth = 0; depth < 3; depth++) {
        const mcir_node *only = only_consumer(t, *y, &slot);
        if (!only) return NULL;
        if (only->op != MCIR_OP_ADD || only->n_outputs != 1) return only;
        *y = only->outputs[0];
    }
    return NULL;
}

/* Looks past a product's bias add for a split of its last axis into k
 * equal parts (a fused QKV projection): k, or 1. */
static int qkv_blocks(tp *t, const mcir_node *mm) {
    const mcir_tensor *y = mm->outputs[0];
    if (y->rank + 2 > MCIR_MAX_RANK) return 1;   /* a gather of blocks reorders through rank + 2 */
    const mcir_node *only = past_bias(t, &y);
    if (!only || only->op != MCIR_OP_SPLIT) return 1;
    int axis;
    const int64_t *sizes;
    int k = mcir_node_ints(only, "sizes", &sizes);
    if (!mcir_norm_axis(mcir_node_int(only, "axis"), y->rank, &axis) || axis != y->rank - 1 || k < 2) return 1;
    for (int i = 1; i < k; i++)
        if (sizes[i] != sizes[0]) return 1;
    return sizes[0] % t->n == 0 ? k : 1;
}

static bool divides(tp *t, int64_t extent, int blocks) { return extent % ((int64_t)t->n * blocks) == 0; }

/* A graph input no node has read yet, spanning axis ax of a consumer n
 * whose other operands are split along it (a KV cache concatenated with
 * the step's split K or V heads): declared sharded along ax, so each rank
 * is handed its part of it (graph.json "shard") and nothing is gathered.
 * False where it cannot be: read before, a symbolic or indivisible extent. */
static bool split_input(tp *t, mcir_tensor *x, int ax, int blocks, const mcir_node *n, const mcir_tensor *with) {
    grow(t);
    if (!is_input(x) || lay_of(t, x).kind != L_R || ax < 0 || ax >= x->rank) return false;
    bool first = !t->decided[x->id];
    bool ok = first && divides(t, x->shape[ax], blocks) && static_extent(x, ax);
    char b[128];
    json_t *leg = json_array();
    json_array_append_new(leg, check("input_first_read", first, first ? "graph input '%s' is first read by '%s' (%s), "
                                     "whose operand '%s' is %s" : "graph input '%s' was read whole before '%s' (%s), "
                                     "whose operand '%s' is %s", x->name, n->name, mcir_op_name(n->op), with->name,
                                     lay_text(t, with, b, sizeof b)));
    json_array_append_new(leg, check("input_axis_divides", divides(t, x->shape[ax], blocks) && static_extent(x, ax), "'%s' has %s along axis %d%s", x->name,
                                     static_extent(x, ax) ? mcir_arena_printf(t->g->arena, "%lld", (long long)x->shape[ax])
                                                          : "a symbolic extent",
                                     ax, divides(t, x->shape[ax], blocks) ? ", a multiple of the ranks"
                                                                          : ", not a multiple of the ranks"));
    record(t, "tp_split_input", n, leg, ok, ok ? x->name : NULL);
    if (!ok) return false;
    x->shard_axis = ax;
    x->shard_parts = t->n;
    x->shard_blocks = blocks;
    t->decided[x->id] = true;
    set_lay(t, x, (layout){L_S, ax, blocks});
    return true;
}

/* Looks past a product's bias add for the reshape that splits its last
 * axis into [.., heads, e]: the heads, or 0 where there is none. A split
 * of the columns whose heads do not divide by the ranks would be gathered
 * back at that reshape: GQA's K and V projections, fewer heads than ranks. */
static int64_t heads_of(tp *t, const mcir_node *mm) {
    const mcir_tensor *y = mm->outputs[0];
    const mcir_node *only = past_bias(t, &y);
    if (!only || only->op != MCIR_OP_RESHAPE) return 0;
    const mcir_tensor *z = only->outputs[0];
    if (z->rank != y->rank + 1 || z->rank < 2) return 0;
    for (int i = 0; i < y->rank - 1; i++)
        if (z->shape[i] != y->shape[i]) return 0;
    int64_t h = z->shape[z->rank - 2], e = z->shape[z->rank - 1];
    return h * e == y->shape[y->rank - 1] ? h : 0;
}

/* matmul: column-parallel, row-parallel, a split batch, or whole. */
static void rule_matmul(tp *t, mcir_node *n) {
    mcir_tensor *A = n->inputs[0], *B = n->inputs[1], *Y = n->outputs[0];
    bool ta = mcir_node_bool(n, "transpose_a"), tb = mcir_node_bool(n, "transpose_b");
    layout la = lay_of(t, A), lb = lay_of(t, B);
    char b1[128];
    if (is_weight(B) && B->rank == 2 && A->rank >= 2 && !ta) {
        int kaxis = tb ? 1 : 0, naxis = tb ? 0 : 1;
        int64_t K = B->shape[kaxis], N = B->shape[naxis];
        json_t *leg = json_array();
        if (la.kind == L_P) {
            A = n->inputs[0] = whole(t, A, n, "a product needs its A whole or split along K");
            la = R;
        }
        if (la.kind == L_S && la.axis == A->rank - 1 && la.blocks == 1) {
            bool ok = !t->decided[B->id] && divides(t, K, 1) && static_extent(B, kaxis);
            json_array_append_new(leg, check("a_split_along_k", true, "'%s' is split along its last axis (K = %lld)",
                                             A->name, (long long)K));
            json_array_append_new(leg, check("weight_rows_divide", ok,
                                             t->decided[B->id] ? "'%s' is already laid out for another product"
                                                               : "'%s' has %lld rows%s", B->name, (long long)K,
                                             divides(t, K, 1) ? ", a multiple of the ranks" : ", not a multiple of the ranks"));
            if (ok) {
                B->shard_axis = kaxis;
                B->shard_parts = t->n;
                B->shard_blocks = 1;
                t->decided[B->id] = true;
                set_lay(t, Y, (layout){L_P, -1, 1});
                record(t, "tp_row_parallel", n, leg, true, Y->name);
                return;
            }
            record(t, "tp_row_parallel", n, leg, false, NULL);
            A = n->inputs[0] = whole(t, A, n, "the row-parallel product does not apply");
            la = R;
        } else if (t->sp && la.kind == L_S && la.axis == A->rank - 2 && la.blocks == 1) {
            /* sequence parallelism: the rows gathered back for the product */
            A = n->inputs[0] = whole(t, A, n, "sequence parallelism: a product takes its rows whole");
            la = R;
        } else if (la.kind == L_S && la.axis < A->rank - 1 && A->rank == Y->rank) {
            /* rows or a batch split: every rank multiplies its rows by the whole B */
            if (lb.kind != L_R) B = n->inputs[1] = whole(t, B, n, "a split of A's rows takes B whole");
            t->decided[B->id] = true;
            set_lay(t, Y, la);
            json_decref(leg);
            return;
        } else if (la.kind == L_S) {
            A = n->inputs[0] = whole(t, A, n, "a product takes its A whole unless split along K or its rows");
            la = R;
        }
        int blocks = qkv_blocks(t, n);
        int64_t heads = blocks == 1 ? heads_of(t, n) : 0;
        if (heads > 0 && heads % t->n != 0) {
            /* K / V of grouped-query attention with fewer heads than ranks:
             * replicated (every rank computes them; the attention takes
             * each rank's heads from them, tp_attention_heads) */
            json_array_append_new(leg, check("heads_divide", false, "'%s' splits into %lld heads, fewer than (or not "
                                             "a multiple of) the %d ranks: its columns stay whole, K / V heads "
                                             "replicated", Y->name, (long long)heads, t->n));
            record(t, "tp_column_parallel", n, leg, false, NULL);
            if (lb.kind != L_R) B = n->inputs[1] = whole(t, B, n, "a replicated product takes B whole");
            t->decided[B->id] = true;
            set_lay(t, Y, R);
            return;
        }
        bool fits = divides(t, N, blocks) && static_extent(B, naxis);
        /* a table an earlier consumer split the same way (a tied LM head
         * after the vocabulary-parallel embedding) */
        bool same = t->decided[B->id] && B->shard_parts == t->n && B->shard_axis == naxis &&
                    B->shard_blocks == blocks;
        json_array_append_new(leg, check("a_whole", true, "'%s' is whole on every rank", A->name));
        json_array_append_new(
            leg, check("weight_columns_divide", fits && (!t->decided[B->id] || same),
                       t->decided[B->id] && !same ? "'%s' is already laid out for another product"
                                         : "'%s' has %lld columns%s%s", B->name, (long long)N,
                       blocks > 1 ? mcir_arena_printf(t->g->arena, " in %d blocks (its product is split in %d)", blocks,
                                                      blocks) : "",
                       fits ? ", each a multiple of the ranks" : ", not a multiple of the ranks"));
        if (fits && (!t->decided[B->id] || same)) {
            B->shard_axis = naxis;
            B->shard_parts = t->n;
            B->shard_blocks = blocks;
            t->decided[B->id] = true;
            set_lay(t, Y, (layout){L_S, Y->rank - 1, blocks});
            record(t, "tp_column_parallel", n, leg, true, Y->name);
            return;
        }
        record(t, "tp_column_parallel", n, leg, false, NULL);
        if (lb.kind != L_R) B = n->inputs[1] = whole(t, B, n, "a replicated product takes B whole");
        t->decided[B->id] = true;
        set_lay(t, Y, R);
        return;
    }
    /* two activations (attention's scores and its weighted sum): a split
     * batch axis carries through where the other operand has the same split
     * or spans 1 there */
    if (la.kind == L_P) A = n->inputs[0] = whole(t, A, n, "a product of activations takes them whole or split");
    if (lb.kind == L_P) B = n->inputs[1] = whole(t, B, n, "a product of activations takes them whole or split");
    la = lay_of(t, A);
    lb = lay_of(t, B);
    int ro = Y->rank;
    int axis = -1;
    if (la.kind == L_S && la.blocks == 1) axis = la.axis + (ro - A->rank);
    if (lb.kind == L_S && lb.blocks == 1) {
        int bo = lb.axis + (ro - B->rank);
        axis = axis < 0 || axis == bo ? bo : -2;
    }
    if (axis >= 0 && axis < ro - 2 && A->rank >= 2 && B->rank >= 2) {
        bool ok = true;
        for (int k = 0; k < 2; k++) {
            mcir_tensor *x = k ? B : A;
            layout lx = k ? lb : la;
            int ax = align(axis, ro, x->rank);
            if (lx.kind == L_S) ok &= lx.axis == ax;
            else ok &= ax < 0 || x->shape[ax] == 1;
        }
        if (ok) {
            set_lay(t, Y, (layout){L_S, axis, 1});
            return;
        }
    }
    if (la.kind != L_R) A = n->inputs[0] = whole(t, A, n, mcir_arena_printf(t->g->arena, "the other operand is %s",
                                                                              lay_text(t, B, b1, sizeof b1)));
    if (lb.kind != L_R) B = n->inputs[1] = whole(t, B, n, "the operands' splits do not agree");
    set_lay(t, Y, R);
}

/* ------------------------------------------------ sequence parallelism
 *
 * Megatron's sequence parallelism (--tp-sp): where partial sums meet a
 * nonlinear elementwise op (the residual add after a row-parallel
 * product), they are reduce_scattered along the rows (the tokens) instead
 * of all_reduced, the op and what follows it up to the next product — the
 * residual, the norm — run on each rank's rows, and the next product
 * all_gathers its rows back (same bytes over the links as the all_reduce,
 * the norms' work and activations 1/N a rank). */

static mcir_tensor *tp_node(tp *t, mcir_op op, int n_in, mcir_tensor **ins, mcir_dtype dt, int rank,
                            const int64_t *shape, const char *stem, const mcir_node *origin);
static mcir_tensor *tp_i64(tp *t, const char *stem, int rank, int64_t n, const int64_t *vals, bool split);

/* The rows of y (rank >= 2: axis rank - 2) when they split over the ranks:
 * that axis, else -1. */
static int sp_rows(tp *t, const mcir_tensor *y) {
    if (y->rank < 2) return -1;
    int a = y->rank - 2;
    return static_extent(y, a) && y->shape[a] % t->n == 0 && y->shape[a] >= t->n ? a : -1;
}

/* Each rank's rows of whole x along axis ax: a gather by the row indices,
 * split over the ranks — no communication. */
static mcir_tensor *rank_rows(tp *t, mcir_tensor *x, int ax, const mcir_node *n) {
    mcir_graph *g = t->g;
    int64_t E = x->shape[ax];
    int64_t *v = malloc(sizeof(int64_t) * (size_t)E);
    MCIR_ASSERT(v);
    for (int64_t j = 0; j < E; j++) v[j] = j;
    mcir_tensor *idx = tp_i64(t, mcir_arena_printf(g->arena, "%s_rank_rows", x->name), 1, E, v, true);
    free(v);
    mcir_tensor *ins[2] = {x, idx};
    mcir_tensor *y = tp_node(t, MCIR_OP_GATHER, 2, ins, x->dtype, x->rank, x->shape,
                             mcir_arena_printf(g->arena, "%s_rows", x->name), n);
    mcir_node *gn = y->producer;
    mcir_node_set_int(g, gn, "axis", ax);
    gn->origin_rule = "tp_sequence_parallel";
    set_lay(t, y, (layout){L_S, ax, 1});
    return y;
}

/* x (partial sums) reduce_scattered along axis ax: each rank its rows of
 * the sum. */
static mcir_tensor *scatter_rows(tp *t, mcir_tensor *x, int ax, const mcir_node *n) {
    mcir_graph *g = t->g;
    mcir_tensor *y = like(t, x, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s_scattered", x->name)));
    mcir_node *c = mcir_graph_add_node(g, MCIR_OP_REDUCE_SCATTER, mcir_graph_fresh_name(g, "tp_reduce_scatter"), 1,
                                       &x, 1, &y);
    mcir_node_set_int(g, c, "axis", ax);
    mcir_node_set_string(g, c, "op", "sum");
    c->origin_rule = "tp_sequence_parallel";
    c->origin_nodes = n->name;
    t->scatters++;
    grow(t);
    set_lay(t, y, (layout){L_S, ax, 1});
    return y;
}

/* A nonlinear elementwise op on partial sums, sequence-parallel: every
 * partial operand reduce_scattered by rows, every whole operand spanning
 * the rows taken by rows (an input declared sharded, an intermediate by a
 * local gather), operands split by rows kept; false (nothing changed)
 * where the rows do not split or an operand is split otherwise. */
static bool sp_elementwise(tp *t, mcir_node *n) {
    mcir_tensor *Y = n->outputs[0];
    int a = sp_rows(t, Y), ro = Y->rank;
    json_t *leg = json_array();
    bool ok = a >= 0;
    for (int i = 0; ok && i < n->n_inputs; i++) {
        const mcir_tensor *x = n->inputs[i];
        layout l = lay_of(t, x);
        int ax = align(a, ro, x->rank);
        if (l.kind == L_P) ok = x->rank == ro;
        else if (l.kind == L_S) ok = l.axis == ax && l.blocks == 1;
    }
    json_array_append_new(leg, check("rows_split", ok, a >= 0 ? "'%s' has %lld rows along axis %d, a multiple of the "
                                     "ranks%s" : "'%s' has no rows that split over the ranks (%lld along axis %d)",
                                     Y->name, (long long)(Y->rank >= 2 ? Y->shape[Y->rank - 2] : 0), Y->rank - 2,
                                     ok || a < 0 ? "" : "; an operand is split otherwise"));
    record(t, "tp_sequence_parallel", n, leg, ok, ok ? Y->name : NULL);
    if (!ok) return false;
    for (int i = 0; i < n->n_inputs; i++) {
        mcir_tensor *x = n->inputs[i];
        layout l = lay_of(t, x);
        int ax = align(a, ro, x->rank);
        if (l.kind == L_P) {
            n->inputs[i] = scatter_rows(t, x, a, n);
        } else if (l.kind == L_R && ax >= 0 && x->shape[ax] != 1) {
            const mcir_tensor *with = NULL;
            for (int k = 0; k < n->n_inputs && !with; k++)
                if (lay_of(t, n->inputs[k]).kind != L_R) with = n->inputs[k];
            if (!split_input(t, x, ax, 1, n, with ? with : Y)) n->inputs[i] = rank_rows(t, x, ax, n);
        }
    }
    set_lay(t, Y, (layout){L_S, a, 1});
    return true;
}

/* Elementwise ops (unary, binary, where, cast, ...): one split carried
 * through; a constant that spans the split axis is split with it. */
static void rule_elementwise(tp *t, mcir_node *n) {
    mcir_tensor *Y = n->outputs[0];
    int ro = Y->rank;
    /* partial sums: a sum of partials, or a scale of one, stays partial */
    bool any_p = false, all_p = true;
    for (int i = 0; i < n->n_inputs; i++) {
        bool p = lay_of(t, n->inputs[i]).kind == L_P;
        any_p |= p;
        all_p &= p;
    }
    if (any_p) {
        bool linear = (n->op == MCIR_OP_ADD || n->op == MCIR_OP_SUB) ? all_p
                      : n->op == MCIR_OP_SCALE || n->op == MCIR_OP_NEG;
        if (mutant("bias_on_partials") && n->op == MCIR_OP_ADD) linear = true;
        if (linear) {
            set_lay(t, Y, (layout){L_P, -1, 1});
            return;
        }
        if (t->sp && sp_elementwise(t, n)) return;
        for (int i = 0; i < n->n_inputs; i++)
            if (lay_of(t, n->inputs[i]).kind == L_P)
                n->inputs[i] = whole(t, n->inputs[i], n,
                                     mcir_arena_printf(t->g->arena, "'%s' (%s) is not linear in it", n->name,
                                                       mcir_op_name(n->op)));
    }
    /* the split of the output: every split input's, if they agree */
    int axis = -1, blocks = 1;
    bool agree = true;
    for (int i = 0; i < n->n_inputs; i++) {
        layout l = lay_of(t, n->inputs[i]);
        if (l.kind != L_S) continue;
        int a = l.axis + (ro - n->inputs[i]->rank);
        if (axis < 0) {
            axis = a;
            blocks = l.blocks;
        } else if (a != axis || l.blocks != blocks) {
            agree = false;
        }
    }
    if (axis < 0) {
        set_lay(t, Y, R);
        return;
    }
    bool ok = agree;
    for (int i = 0; ok && i < n->n_inputs; i++) {
        mcir_tensor *x = n->inputs[i];
        layout l = lay_of(t, x);
        if (l.kind == L_S) continue;
        int ax = align(axis, ro, x->rank);
        if (ax < 0 || x->shape[ax] == 1) continue;   /* broadcast along the split */
        /* a constant that spans the split axis (a bias) is split with it;
         * a graph input, declared sharded; under sequence parallelism an
         * intermediate by rows, each rank its own */
        if (t->sp && blocks == 1 && !is_weight(x) && l.kind == L_R && axis == sp_rows(t, Y) &&
            !(is_input(x) && !t->decided[x->id])) {
            n->inputs[i] = rank_rows(t, x, ax, n);
            continue;
        }
        if (is_input(x)) {
            const mcir_tensor *with = NULL;
            for (int k = 0; k < n->n_inputs && !with; k++)
                if (lay_of(t, n->inputs[k]).kind == L_S) with = n->inputs[k];
            ok = split_input(t, x, ax, blocks, n, with);
            continue;
        }
        ok = is_weight(x) && !t->decided[x->id] && divides(t, x->shape[ax], blocks) && static_extent(x, ax);
        if (ok) {
            x->shard_axis = ax;
            x->shard_parts = t->n;
            x->shard_blocks = blocks;
            t->decided[x->id] = true;
            set_lay(t, x, (layout){L_S, ax, blocks});
        }
    }
    if (ok) {
        for (int i = 0; i < n->n_inputs; i++)
            if (is_weight(n->inputs[i])) t->decided[n->inputs[i]->id] = true;
        set_lay(t, Y, (layout){L_S, axis, blocks});
        return;
    }
    for (int i = 0; i < n->n_inputs; i++)
        if (lay_of(t, n->inputs[i]).kind != L_R)
            n->inputs[i] = whole(t, n->inputs[i], n, "the operands' splits do not agree");
    set_lay(t, Y, R);
}

/* reshape: a split axis that maps onto one output axis (the same elements
 * before it, the output's extent a multiple of the ranks) stays split. */
/* Grouped-query attention's Q, [.., H, ..] split along the heads, regrouped
 * as [.., Hkv, g, ..] for an attention whose K and V have Hkv heads, fewer
 * than the ranks: the reshape groups the heads as [.., N, H/N, ..] instead
 * (rank r's H/N heads, all of one K/V head since H/N divides g), so the
 * split carries to the attention, which takes each rank's K/V head from
 * the whole K and V (rule_attention). */
static bool regroup(tp *t, mcir_node *n, layout l) {
    mcir_tensor *X = n->inputs[0], *Y = n->outputs[0];
    int a = l.axis, slot = -1;
    if (l.blocks != 1 || Y->rank != X->rank + 1 || Y->rank > MCIR_MAX_RANK) return false;
    mcir_node *att = only_consumer(t, Y, &slot);
    if (!att || att->op != MCIR_OP_ATTENTION || slot != 0) return false;
    for (int i = 0; i < a; i++)
        if (Y->shape[i] != X->shape[i]) return false;
    for (int i = a + 1; i < X->rank; i++)
        if (Y->shape[i + 1] != X->shape[i]) return false;
    int64_t E = X->shape[a], h1 = Y->shape[a], h2 = Y->shape[a + 1];
    if (h1 * h2 != E || h1 % t->n == 0 || t->n % h1 != 0 || h2 % (t->n / h1) != 0) return false;
    const mcir_attr *sa = mcir_node_attr(n, "shape");
    if (!sa || sa->n != Y->rank || (sa->dim_of && (sa->dim_of[a] >= 0 || sa->dim_of[a + 1] >= 0))) return false;
    int64_t v[MCIR_MAX_RANK];
    memcpy(v, sa->ints, sizeof(int64_t) * (size_t)sa->n);
    v[a] = t->n;
    v[a + 1] = E / t->n;
    const int8_t *dim_of = sa->dim_of;   /* the other extents that name a dimension stay named */
    int cnt = sa->n;
    mcir_attr *na = mcir_node_set_ints(t->g, n, "shape", cnt, v);
    na->dim_of = dim_of ? mcir_arena_memdup(t->g->arena, dim_of, (size_t)cnt) : NULL;
    Y->shape[a] = t->n;
    Y->shape[a + 1] = E / t->n;
    if (Y->sym) {
        Y->sym[a] = mcir_extent_const(Y->shape[a]);
        Y->sym[a + 1] = mcir_extent_const(Y->shape[a + 1]);
    }
    set_lay(t, Y, (layout){L_S, a, 1});
    json_t *leg = json_array();
    json_array_append_new(leg, check("kv_heads_fewer_than_ranks", true, "'%s' groups %lld heads as %lld K/V heads of "
                                     "%lld for '%s'; %lld K/V heads do not split over %d ranks", Y->name,
                                     (long long)E, (long long)h1, (long long)h2, att->name, (long long)h1, t->n));
    json_array_append_new(leg, check("rank_heads_in_one_group", true, "each rank's %lld heads share one K/V head: "
                                     "grouped as [%d, %lld]", (long long)(E / t->n), t->n, (long long)(E / t->n)));
    record(t, "tp_attention_heads", n, leg, true, Y->name);
    return true;
}

static void rule_reshape(tp *t, mcir_node *n) {
    mcir_tensor *X = n->inputs[0], *Y = n->outputs[0];
    layout l = lay_of(t, X);
    if (l.kind != L_S) {
        set_lay(t, Y, l);
        return;
    }
    int64_t before = 1;
    for (int i = 0; i < l.axis; i++) before *= X->shape[i];
    int64_t acc = 1;
    int o = -1;
    for (int i = 0; i < Y->rank; i++) {
        if (acc == before && Y->shape[i] % t->n == 0 && l.blocks == 1 && static_extent(Y, i)) {
            /* the elements from the axis on: the same count on both sides */
            int64_t xin = 1, yin = 1;
            for (int k = l.axis; k < X->rank; k++) xin *= X->shape[k];
            for (int k = i; k < Y->rank; k++) yin *= Y->shape[k];
            if (xin == yin && (Y->shape[i] >= t->n)) {
                o = i;
                break;
            }
        }
        acc *= Y->shape[i];
    }
    const mcir_attr *a = mcir_node_attr(n, "shape");
    if (o >= 0 && a && o < a->n && a->dim_of && a->dim_of[o] >= 0) o = -1;   /* a dimension's extent */
    if (o < 0 && regroup(t, n, l)) return;
    if (o < 0) {
        n->inputs[0] = whole(t, X, n, "the reshape does not keep the split axis whole");
        set_lay(t, Y, R);
        return;
    }
    set_lay(t, Y, (layout){L_S, o, 1});
}

static void rule_transpose(tp *t, mcir_node *n) {
    layout l = lay_of(t, n->inputs[0]);
    if (l.kind == L_S) {
        const int64_t *perm;
        int k = mcir_node_ints(n, "perm", &perm), to = -1;
        for (int i = 0; i < k; i++)
            if ((int)(perm[i] < 0 ? perm[i] + k : perm[i]) == l.axis) to = i;
        MCIR_ASSERT(to >= 0);
        l.axis = to;
    }
    set_lay(t, n->outputs[0], l);
}

/* The ops whose work runs along `axis` only (softmax, norms, reductions,
 * slices, concats, splits, cumsum): a split elsewhere stays. in_axes[i]:
 * whether axis i is one the op works along. */
static void rule_along(tp *t, mcir_node *n, const bool *in_axes, bool keepdims) {
    mcir_tensor *X = n->inputs[0];
    layout l = lay_of(t, X);
    if (l.kind == L_P) {
        X = n->inputs[0] = whole(t, X, n, mcir_arena_printf(t->g->arena, "'%s' (%s) is not linear", n->name,
                                                              mcir_op_name(n->op)));
        l = R;
    }
    if (n->op == MCIR_OP_CONCAT) {
        /* the parts: a graph input beside a split part is split with it
         * (a KV cache joined with the step's heads) */
        const mcir_tensor *with = NULL;
        for (int i = 0; i < n->n_inputs && !with; i++)
            if (lay_of(t, n->inputs[i]).kind == L_S) with = n->inputs[i];
        layout lw = with ? lay_of(t, with) : R;
        if (with && !in_axes[lw.axis])
            for (int i = 0; i < n->n_inputs; i++)
                if (lay_of(t, n->inputs[i]).kind == L_R) split_input(t, n->inputs[i], lw.axis, lw.blocks, n, with);
        l = lay_of(t, X);
    }
    bool ok = l.kind != L_S || (!in_axes[l.axis] && l.blocks == 1);
    if (n->op == MCIR_OP_SPLIT && l.kind == L_S && in_axes[l.axis] && l.blocks > 1) {
        /* a blocked split read block by block: each output is split */
        const int64_t *sizes;
        int k = mcir_node_ints(n, "sizes", &sizes);
        ok = k == l.blocks;
        if (ok) {
            for (int i = 0; i < n->n_outputs; i++) set_lay(t, n->outputs[i], (layout){L_S, l.axis, 1});
            return;
        }
    }
    for (int i = 1; i < n->n_inputs; i++) {   /* gamma, beta, other concat parts */
        layout li = lay_of(t, n->inputs[i]);
        if (n->op == MCIR_OP_CONCAT) ok &= li.kind == l.kind && li.axis == l.axis && li.blocks == l.blocks;
        else if (li.kind != L_R) n->inputs[i] = whole(t, n->inputs[i], n, "a norm takes its gamma and beta whole");
    }
    if (!ok) {
        for (int i = 0; i < n->n_inputs; i++)
            if (lay_of(t, n->inputs[i]).kind != L_R)
                n->inputs[i] = whole(t, n->inputs[i], n,
                                     l.kind == L_S && in_axes[l.axis]
                                         ? mcir_arena_printf(t->g->arena, "'%s' (%s) works along the split axis",
                                                             n->name, mcir_op_name(n->op))
                                         : mcir_arena_printf(t->g->arena, "the parts of '%s' (%s) are not split alike",
                                                             n->name, mcir_op_name(n->op)));
        l = R;
    }
    int out_axis = l.axis;
    if (l.kind == L_S && !keepdims)
        for (int i = 0; i < l.axis; i++) out_axis -= in_axes[i];
    for (int i = 0; i < n->n_outputs; i++)
        set_lay(t, n->outputs[i], l.kind == L_S ? (layout){L_S, out_axis, 1} : R);
}

/* The heads of whole x (EK along axis ax) that each rank's part of EQ
 * heads reads — head j of EQ reads head j * EK / EQ —: a gather by a
 * constant index list of EQ entries split over the ranks (rank r holds
 * its EQ / N), so x's gather is split along ax like the heads it serves.
 * No communication: every rank has x whole. */
static mcir_tensor *rank_heads(tp *t, mcir_tensor *x, int ax, int64_t EQ, const mcir_node *n) {
    mcir_graph *g = t->g;
    int64_t EK = x->shape[ax];
    int64_t shape[1] = {EQ};
    mcir_tensor *idx = mcir_graph_add_tensor(g, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s_rank_heads",
                                                                                             x->name)),
                                             MCIR_DTYPE_I64, 1, shape, MCIR_TENSOR_WEIGHT);
    MCIR_ASSERT(idx);
    int64_t *v = mcir_arena_alloc(g->arena, sizeof(int64_t) * (size_t)EQ);
    for (int64_t j = 0; j < EQ; j++) v[j] = j * EK / EQ;
    idx->data = v;
    idx->shard_axis = 0;
    idx->shard_parts = t->n;
    idx->shard_blocks = 1;
    grow(t);
    t->decided[idx->id] = true;
    int64_t ys[MCIR_MAX_RANK];
    memcpy(ys, x->shape, sizeof(int64_t) * (size_t)x->rank);
    ys[ax] = EQ;
    mcir_tensor *y = mcir_graph_add_tensor(g, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s_for_rank",
                                                                                           x->name)),
                                           x->dtype, x->rank, ys, MCIR_TENSOR_INTERMEDIATE);
    MCIR_ASSERT(y);
    mcir_tensor *ins[2] = {x, idx};
    mcir_node *gn = mcir_graph_add_node(g, MCIR_OP_GATHER, NULL, 2, ins, 1, &y);
    mcir_node_set_int(g, gn, "axis", ax);
    gn->origin_rule = "tp_attention_heads";
    gn->origin_nodes = n->name;
    grow(t);
    set_lay(t, idx, (layout){L_S, 0, 1});
    set_lay(t, y, (layout){L_S, ax, 1});
    json_t *leg = json_array();
    json_array_append_new(leg, check("kv_heads_replicated", true, "'%s' is whole with %lld heads along axis %d; each "
                                     "rank takes the ones its %lld of the %lld query heads (or head groups) along that "
                                     "axis read (gather by '%s', split over the ranks)", x->name, (long long)EK, ax, (long long)(EQ / t->n),
                                     (long long)EQ, idx->name));
    record(t, "tp_attention_heads", n, leg, true, y->name);
    return y;
}

/* attention: Q, K, V (and a mask) split along one leading axis — the
 * heads — run on each rank's heads. */
static void rule_attention(tp *t, mcir_node *n) {
    mcir_tensor *Y = n->outputs[0];
    int ro = Y->rank, axis = -1;
    bool ok = true;
    for (int i = 0; i < 3; i++) {
        layout l = lay_of(t, n->inputs[i]);
        if (l.kind != L_S) continue;
        int a = l.axis + (ro - n->inputs[i]->rank);
        if (axis < 0) axis = a;
        ok &= a == axis && l.blocks == 1;
    }
    ok &= axis >= 0 && axis < ro - 2;
    /* K, V whole with their own heads (replicated: fewer K/V heads than
     * ranks): each rank takes the heads its Q heads read */
    if (ok && lay_of(t, n->inputs[0]).kind == L_S) {
        mcir_tensor *Q = n->inputs[0];
        int qa = align(axis, ro, Q->rank);
        for (int i = 1; i < 3; i++) {
            mcir_tensor *x = n->inputs[i];
            int ax = align(axis, ro, x->rank);
            if (lay_of(t, x).kind != L_R || ax < 0 || x->shape[ax] == 1 || qa < 0) continue;
            int64_t EQ = Q->shape[qa], EK = x->shape[ax];
            if (EQ % EK != 0 || EQ % t->n != 0) continue;
            n->inputs[i] = rank_heads(t, x, ax, EQ, n);
        }
    }
    for (int i = 0; ok && i < n->n_inputs; i++) {
        mcir_tensor *x = n->inputs[i];
        layout l = lay_of(t, x);
        int ax = align(axis, ro, x->rank);
        if (l.kind == L_S) continue;
        ok = l.kind == L_R && (ax < 0 || x->shape[ax] == 1);
    }
    if (ok && n->inputs[0]->rank == ro)   /* Q regrouped (regroup): the output's lead extents follow */
        for (int i = 0; i < ro - 2; i++) Y->shape[i] = n->inputs[0]->shape[i];
    json_t *leg = json_array();
    char b[128];
    json_array_append_new(leg, ok ? check("heads_split", true, "Q, K and V are split along axis %d (the heads)", axis)
                                  : check("heads_split", false, "Q is %s: the heads are not split alike",
                                          lay_text(t, n->inputs[0], b, sizeof b)));
    record(t, "tp_attention_heads", n, leg, ok, ok ? Y->name : NULL);
    if (ok) {
        set_lay(t, Y, (layout){L_S, axis, 1});
        return;
    }
    for (int i = 0; i < n->n_inputs; i++)
        if (lay_of(t, n->inputs[i]).kind != L_R)
            n->inputs[i] = whole(t, n->inputs[i], n, "attention takes its operands whole unless its heads are split");
    set_lay(t, Y, R);
}

/* A tensor of the graph made by one new node of the rewrite. */
static mcir_tensor *tp_node(tp *t, mcir_op op, int n_in, mcir_tensor **ins, mcir_dtype dt, int rank,
                            const int64_t *shape, const char *stem, const mcir_node *origin) {
    mcir_graph *g = t->g;
    mcir_tensor *y = mcir_graph_add_tensor(g, mcir_graph_fresh_name(g, stem), dt, rank, shape,
                                           MCIR_TENSOR_INTERMEDIATE);
    MCIR_ASSERT(y);
    mcir_node *m = mcir_graph_add_node(g, op, NULL, n_in, ins, 1, &y);
    m->origin_rule = "tp_vocab_parallel";
    m->origin_nodes = origin->name;
    grow(t);
    set_lay(t, y, R);
    return y;
}

/* An i64 weight of n values (rank 0 or 1; split over the ranks when split). */
static mcir_tensor *tp_i64(tp *t, const char *stem, int rank, int64_t n, const int64_t *vals, bool split) {
    mcir_graph *g = t->g;
    int64_t shape[1] = {n};
    mcir_tensor *w = mcir_graph_add_tensor(g, mcir_graph_fresh_name(g, stem), MCIR_DTYPE_I64, rank, shape,
                                           MCIR_TENSOR_WEIGHT);
    MCIR_ASSERT(w);
    int64_t *v = mcir_arena_alloc(g->arena, sizeof(int64_t) * (size_t)n);
    memcpy(v, vals, sizeof(int64_t) * (size_t)n);
    w->data = v;
    if (split) {
        w->shard_axis = 0;
        w->shard_parts = t->n;
        w->shard_blocks = 1;
    }
    grow(t);
    t->decided[w->id] = true;
    set_lay(t, w, split ? (layout){L_S, 0, 1} : R);
    return w;
}

/* gather(table, ids) of an embedding table [V, D] (a weight) by whole ids:
 * vocabulary-parallel, Megatron's VocabParallelEmbedding — each rank holds
 * V/N rows and looks up the ids in its range (local = ids - r·V/N), zero
 * elsewhere; the ranks' rows sum to the lookup (partial: one all_reduce
 * where it is needed whole). A tied LM head (a product by the table
 * transposed) then splits along the same rows: column-parallel over the
 * vocabulary, its logits gathered. */
static bool rule_gather_vocab(tp *t, mcir_node *n) {
    mcir_tensor *T = n->inputs[0], *ids = n->inputs[1], *Y = n->outputs[0];
    int axis;
    if (!is_weight(T) || T->rank != 2 || !mcir_norm_axis(mcir_node_int(n, "axis"), T->rank, &axis) || axis != 0)
        return false;
    int64_t V = T->shape[0];
    bool ids_whole = lay_of(t, ids).kind == L_R;
    /* the mask's reshape to [.., 1]: each symbolic extent of the ids a
     * dimension of the graph (named in the shape), or one of them -1 */
    int8_t dim_of[MCIR_MAX_RANK + 1];
    int64_t ms[MCIR_MAX_RANK + 1];
    bool named = ids->rank + 1 <= MCIR_MAX_RANK, free_used = false, any_dim = false;
    for (int i = 0; named && i < ids->rank; i++) {
        dim_of[i] = -1;
        ms[i] = ids->shape[i];
        if (static_extent(ids, i)) continue;
        int k = -1;
        for (int d = 0; d < t->g->n_dims && k < 0; d++) {
            mcir_extent e = mcir_extent_dim(d);
            if (mcir_extent_equal(&ids->sym[i], &e)) k = d;
        }
        if (k >= 0) {
            dim_of[i] = (int8_t)k;
            any_dim = true;
        } else if (!free_used) {
            ms[i] = -1;
            free_used = true;
        } else {
            named = false;
        }
    }
    if (named) {
        dim_of[ids->rank] = -1;
        ms[ids->rank] = 1;
    }
    bool ok = !t->decided[T->id] && divides(t, V, 1) && static_extent(T, 0) && ids_whole && named;
    json_t *leg = json_array();
    json_array_append_new(leg, check("table_rows_divide", !t->decided[T->id] && divides(t, V, 1),
                                     t->decided[T->id] ? "'%s' is already laid out for another consumer"
                                                       : "'%s' has %lld rows%s", T->name, (long long)V,
                                     divides(t, V, 1) ? ", a multiple of the ranks" : ", not a multiple of the ranks"));
    json_array_append_new(leg, check("ids_whole", ids_whole, "'%s' is whole on every rank", ids->name));
    if (!named)
        json_array_append_new(leg, check("ids_shape", false, "'%s' has symbolic extents that name no one dimension "
                                         "(the mask's reshape to [.., 1] cannot be written)", ids->name));
    if (!ok) {
        record(t, "tp_vocab_parallel", n, leg, false, NULL);
        return false;
    }
    int64_t Vp = V / t->n, zero = 0;
    int64_t *offs = mcir_arena_alloc(t->g->arena, sizeof(int64_t) * (size_t)t->n);
    for (int r = 0; r < t->n; r++) offs[r] = (int64_t)r * Vp;
    T->shard_axis = 0;
    T->shard_parts = t->n;
    T->shard_blocks = 1;
    t->decided[T->id] = true;
    set_lay(t, T, (layout){L_S, 0, 1});
    mcir_tensor *id64 = ids;
    if (ids->dtype != MCIR_DTYPE_I64) {
        id64 = tp_node(t, MCIR_OP_CAST, 1, &ids, MCIR_DTYPE_I64, ids->rank, ids->shape, "tp_ids", n);
        mcir_node_set_string(t->g, id64->producer, "to", "i64");
    }
    mcir_tensor *off = tp_i64(t, "tp_vocab_offset", 1, t->n, offs, true);
    mcir_tensor *z = tp_i64(t, "tp_zero", 0, 1, &zero, false), *h = tp_i64(t, "tp_vocab_rows", 0, 1, &Vp, false);
    mcir_tensor *in1[2] = {id64, off};
    mcir_tensor *local = tp_node(t, MCIR_OP_SUB, 2, in1, MCIR_DTYPE_I64, ids->rank, ids->shape, "tp_local_ids", n);
    mcir_tensor *in2[2] = {local, z}, *in3[2] = {local, h};
    mcir_tensor *ge = tp_node(t, MCIR_OP_GREATER_EQUAL, 2, in2, MCIR_DTYPE_BOOL, ids->rank, ids->shape, "tp_ge", n);
    mcir_tensor *lt = tp_node(t, MCIR_OP_LESS, 2, in3, MCIR_DTYPE_BOOL, ids->rank, ids->shape, "tp_lt", n);
    mcir_tensor *in4[2] = {ge, lt};
    mcir_tensor *mine = tp_node(t, MCIR_OP_BITWISE_AND, 2, in4, MCIR_DTYPE_BOOL, ids->rank, ids->shape, "tp_mine", n);
    mcir_tensor *in5[3] = {mine, local, z};
    mcir_tensor *idx = tp_node(t, MCIR_OP_WHERE, 3, in5, MCIR_DTYPE_I64, ids->rank, ids->shape, "tp_rows", n);
    /* the lookup itself: n reads the rank's rows at idx, into a new tensor */
    mcir_tensor *rows = mcir_graph_add_tensor(t->g, mcir_graph_fresh_name(t->g, "tp_looked_up"), Y->dtype, Y->rank,
                                              Y->shape, MCIR_TENSOR_INTERMEDIATE);
    MCIR_ASSERT(rows);
    grow(t);
    n->inputs[1] = idx;
    n->outputs[0] = rows;
    rows->producer = n;
    set_lay(t, rows, R);
    int64_t cs[MCIR_MAX_RANK];   /* the mask column's extents now (for the rules after) */
    memcpy(cs, ids->shape, sizeof(int64_t) * (size_t)ids->rank);
    cs[ids->rank] = 1;
    /* (mutant vocab_unmasked: ids past the rank's rows not masked out) */
    mcir_tensor *keep = mutant("vocab_unmasked") ? ge : mine;
    mcir_tensor *m1 = tp_node(t, MCIR_OP_RESHAPE, 1, &keep, MCIR_DTYPE_BOOL, ids->rank + 1, cs, "tp_mine_col", n);
    mcir_attr *sa = mcir_node_set_ints(t->g, m1->producer, "shape", ids->rank + 1, ms);
    if (any_dim) sa->dim_of = mcir_arena_memdup(t->g->arena, dim_of, (size_t)(ids->rank + 1));
    mcir_tensor *mf = tp_node(t, MCIR_OP_CAST, 1, &m1, Y->dtype, ids->rank + 1, cs, "tp_mine_f", n);
    mcir_node_set_string(t->g, mf->producer, "to", mcir_dtype_name(Y->dtype));
    /* Y (the name its readers have) is the masked lookup: partial */
    mcir_tensor *in6[2] = {rows, mf};
    mcir_node *mul = mcir_graph_add_node(t->g, MCIR_OP_MUL, NULL, 2, in6, 1, &Y);
    mul->origin_rule = "tp_vocab_parallel";
    mul->origin_nodes = n->name;
    Y->producer = mul;
    grow(t);
    set_lay(t, Y, (layout){L_P, -1, 1});
    record(t, "tp_vocab_parallel", n, leg, true, Y->name);
    return true;
}

static void node_rule_of(tp *t, mcir_node *n);

/* A node's rule; then every weight it reads has its layout fixed: a later
 * consumer cannot split one this node read whole (a tied embedding and LM
 * head). */
static void node_rule(tp *t, mcir_node *n) {
    node_rule_of(t, n);
    grow(t);
    for (int i = 0; i < n->n_inputs; i++)
        if (is_weight(n->inputs[i]) || is_input(n->inputs[i])) t->decided[n->inputs[i]->id] = true;
}

static void node_rule_of(tp *t, mcir_node *n) {
    const unsigned fl = mcir_op_desc_of(n->op)->flags;
    mcir_tensor *X = n->n_inputs ? n->inputs[0] : NULL;
    bool axes[MCIR_MAX_RANK] = {false};
    int axis;
    switch (n->op) {
    case MCIR_OP_MATMUL: rule_matmul(t, n); return;
    case MCIR_OP_RESHAPE: rule_reshape(t, n); return;
    case MCIR_OP_TRANSPOSE: rule_transpose(t, n); return;
    case MCIR_OP_ATTENTION: rule_attention(t, n); return;
    case MCIR_OP_GATHER:
        if (rule_gather_vocab(t, n)) return;
        break;
    case MCIR_OP_SOFTMAX:
    case MCIR_OP_CUMSUM:
    case MCIR_OP_SPLIT:
    case MCIR_OP_CONCAT:
    case MCIR_OP_SLICE:
        MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), X->rank, &axis));
        axes[axis] = true;
        rule_along(t, n, axes, true);
        return;
    case MCIR_OP_LAYERNORM:
    case MCIR_OP_RMSNORM:
        MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), X->rank, &axis));
        for (int i = axis; i < X->rank; i++) axes[i] = true;
        rule_along(t, n, axes, true);
        return;
    case MCIR_OP_REDUCE_SUM:
    case MCIR_OP_REDUCE_MEAN:
    case MCIR_OP_REDUCE_MAX: {
        const int64_t *ax;
        int k = mcir_node_ints(n, "axes", &ax);
        for (int i = 0; i < k; i++)
            if (mcir_norm_axis(ax[i], X->rank, &axis)) axes[axis] = true;
        rule_along(t, n, axes, mcir_node_bool(n, "keepdims"));
        return;
    }
    default: break;
    }
    if (fl & MCIR_OPF_ELEMENTWISE) {
        rule_elementwise(t, n);
        return;
    }
    /* anything else takes its inputs whole */
    for (int i = 0; i < n->n_inputs; i++)
        if (lay_of(t, n->inputs[i]).kind != L_R)
            n->inputs[i] = whole(t, n->inputs[i], n,
                                 mcir_arena_printf(t->g->arena, "'%s' (%s) has no rule for split operands", n->name,
                                                   mcir_op_name(n->op)));
    for (int i = 0; i < n->n_outputs; i++) set_lay(t, n->outputs[i], R);
}

/* A graph output that is not whole: its producer writes a new tensor, and
 * the collective that makes it whole writes the output (the name stays). */
static void output_whole(tp *t, mcir_tensor *y) {
    layout l = lay_of(t, y);
    if (l.kind == L_R || !y->producer) return;
    mcir_node *p = y->producer;
    const char *name = mcir_graph_fresh_name(t->g, mcir_arena_printf(t->g->arena, "%s_part", y->name));
    mcir_tensor *part = mcir_graph_add_tensor(t->g, name, y->dtype, -1, NULL, MCIR_TENSOR_INTERMEDIATE);
    MCIR_ASSERT(part);
    for (int i = 0; i < p->n_outputs; i++)
        if (p->outputs[i] == y) p->outputs[i] = part;
    part->producer = p;
    for (int k = 0; k < t->g->n_nodes; k++) {
        mcir_node *c = t->g->nodes[k];
        for (int i = 0; !c->dead && i < c->n_inputs; i++)
            if (c->inputs[i] == y) c->inputs[i] = part;
    }
    set_lay(t, part, l);
    bool reduce = l.kind == L_P;
    mcir_node *c = add_collective(t, part, y, l, p->name);
    char b[128];
    json_t *leg = json_array();
    json_array_append_new(leg, check("output_whole", false, "graph output '%s' is %s; every rank returns it whole",
                                     y->name, lay_text(t, part, b, sizeof b)));
    record(t, reduce ? "tp_reduce" : "tp_gather", p, leg, true, c->name);
}

/* Per-rank extents: sharded leaves, and the reshape and split attributes
 * that name an extent along a split axis. */
static void per_rank_attrs(tp *t) {
    for (int k = 0; k < t->g->n_nodes; k++) {
        mcir_node *n = t->g->nodes[k];
        if (n->dead) continue;
        layout lo = lay_of(t, n->outputs[0]);
        if (n->op == MCIR_OP_RESHAPE && lo.kind == L_S) {
            const int64_t *shape;
            int c = mcir_node_ints(n, "shape", &shape);
            const mcir_attr *old = mcir_node_attr(n, "shape");
            const int8_t *dim_of = old ? old->dim_of : NULL;   /* extents that name a dimension stay named */
            int64_t v[MCIR_MAX_RANK];
            memcpy(v, shape, sizeof(int64_t) * (size_t)c);
            if (v[lo.axis] > 0) v[lo.axis] /= t->n;
            mcir_attr *a = mcir_node_set_ints(t->g, n, "shape", c, v);
            a->dim_of = dim_of ? mcir_arena_memdup(t->g->arena, dim_of, (size_t)c) : NULL;
        } else if (n->op == MCIR_OP_SPLIT && lo.kind == L_S) {
            int axis;
            MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), n->inputs[0]->rank, &axis));
            if (axis == lo.axis) {
                const int64_t *sizes;
                int c = mcir_node_ints(n, "sizes", &sizes);
                int64_t v[64];
                MCIR_ASSERT(c <= 64);
                for (int i = 0; i < c; i++) v[i] = sizes[i] / t->n;
                mcir_node_set_ints(t->g, n, "sizes", c, v);
            }
        }
    }
    for (int i = 0; i < t->g->n_weights + t->g->n_inputs; i++) {
        mcir_tensor *w = i < t->g->n_weights ? t->g->weights[i] : t->g->inputs[i - t->g->n_weights];
        if (w->shard_axis >= 0) {
            w->shape[w->shard_axis] /= t->n;
            if (w->sym) w->sym[w->shard_axis] = mcir_extent_const(w->shape[w->shard_axis]);
        }
    }
}

mcir_graph *mcir_tp_rewrite(const mcir_graph *src, int ranks, mcir_trace *trace, int *collectives, mcir_diag *d) {
    return mcir_tp_rewrite_ex(src, ranks, false, trace, collectives, d);
}

mcir_graph *mcir_tp_rewrite_ex(const mcir_graph *src, int ranks, bool sequence_parallel, mcir_trace *trace,
                               int *collectives, mcir_diag *d) {
    MCIR_ASSERT(ranks >= 1);
    if (src->ranks != 1) {
        mcir_error(d, (mcir_loc){src->path, 0, 0}, "--tp %d: the graph already has %d ranks; --tp takes a graph of "
                   "one rank", ranks, src->ranks);
        return NULL;
    }
    mcir_graph *g = mcir_graph_clone(src);
    tp t = {.g = g, .n = ranks, .trace = trace, .sp = sequence_parallel};
    grow(&t);
    int n0 = g->n_nodes;
    if (ranks > 1) {
        for (int k = 0; k < n0; k++)
            if (!g->nodes[k]->dead) node_rule(&t, g->nodes[k]);
        for (int i = 0; i < g->n_outputs; i++) output_whole(&t, g->outputs[i]);
        per_rank_attrs(&t);
    }
    g->ranks = ranks;
    for (int i = 0; i < g->n_tensors; i++)
        if (g->tensors[i]->producer) g->tensors[i]->rank = -1;   /* inferred again */
    bool ok = mcir_graph_sort(g, d) && mcir_graph_infer(g, d) && mcir_graph_verify(g, d);
    free(t.lay);
    free(t.decided);
    free(t.whole);
    if (!ok) {
        mcir_error(d, (mcir_loc){src->path, 0, 0}, "--tp %d: internal error: the rank program does not check", ranks);
        mcir_graph_free(g);
        return NULL;
    }
    if (collectives) *collectives = t.reduces + t.gathers + t.scatters;
    return g;
}

/* ------------------------------------------- collectives NCCL can run */

/* NCCL gathers and scatters flat buffers rank by rank: an all_gather or a
 * reduce_scatter along an axis with elements before it (outer > 1) is
 * that collective along axis 0 between two transposes moving the axis to
 * the front and back. The trace says so (rule "collective_axis_first"). */
int mcir_lower_collectives(mcir_graph *g, mcir_trace *trace, mcir_diag *d) {
    int lowered = 0, n0 = g->n_nodes;
    for (int k = 0; k < n0; k++) {
        mcir_node *n = g->nodes[k];
        if (n->dead || (n->op != MCIR_OP_ALL_GATHER && n->op != MCIR_OP_REDUCE_SCATTER)) continue;
        mcir_tensor *x = n->inputs[0], *y = n->outputs[0];
        int axis;
        MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis));
        int64_t outer = 1;
        for (int i = 0; i < axis; i++) outer *= x->shape[i];
        if (outer == 1) continue;
        int64_t perm[MCIR_MAX_RANK], inv[MCIR_MAX_RANK];
        perm[0] = axis;
        for (int i = 0, j = 1; i < x->rank; i++)
            if (i != axis) perm[j++] = i;
        for (int i = 0; i < x->rank; i++) inv[perm[i]] = i;
        const char *stem = mcir_arena_printf(g->arena, "%s_axis_first", x->name);
        mcir_tensor *xt = mcir_graph_add_tensor(g, mcir_graph_fresh_name(g, stem), x->dtype, -1, NULL,
                                                MCIR_TENSOR_INTERMEDIATE);
        mcir_tensor *yt = mcir_graph_add_tensor(g, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s_axis_first",
                                                                                             y->name)),
                                                y->dtype, -1, NULL, MCIR_TENSOR_INTERMEDIATE);
        mcir_node *t1 = mcir_graph_add_node(g, MCIR_OP_TRANSPOSE, NULL, 1, &x, 1, &xt);
        mcir_node_set_ints(g, t1, "perm", x->rank, perm);
        n->inputs[0] = xt;
        n->outputs[0] = yt;
        yt->producer = n;
        mcir_node_set_int(g, n, "axis", 0);
        mcir_node *t2 = mcir_graph_add_node(g, MCIR_OP_TRANSPOSE, NULL, 1, &yt, 1, &y);
        mcir_node_set_ints(g, t2, "perm", x->rank, inv);
        t1->origin_rule = t2->origin_rule = "collective_axis_first";
        t1->origin_nodes = t2->origin_nodes = n->name;
        lowered++;
        tp rec = {.g = g, .n = g->ranks, .trace = trace};
        json_t *leg = json_array();
        json_array_append_new(leg, check("axis_first", false, "'%s' %s along axis %d of '%s' (%lld elements before "
                                         "it): NCCL moves flat buffers rank by rank", n->name, mcir_op_name(n->op),
                                         axis, x->name, (long long)outer));
        record(&rec, "collective_axis_first", n, leg, true, t2->name);
    }
    if (lowered && !(mcir_graph_sort(g, d) && mcir_graph_infer(g, d) && mcir_graph_verify(g, d))) return -1;
    return lowered;
}

/* ------------------------------------------ identical collectives, once */

static bool attr_same(const mcir_attr *a, const mcir_attr *b) {
    if (a->type != b->type || a->dim_of || b->dim_of) return false;
    switch (a->type) {
    case MCIR_ATTR_INT: return a->i == b->i;
    case MCIR_ATTR_FLOAT: return a->f == b->f;
    case MCIR_ATTR_BOOL: return a->b == b->b;
    case MCIR_ATTR_STRING: return !strcmp(a->s, b->s);
    case MCIR_ATTR_INTS:
        return a->n == b->n && (a->n == 0 || !memcmp(a->ints, b->ints, sizeof(int64_t) * (size_t)a->n));
    }
    return false;
}

/* Whether m and n compute the same values: one op on the same tensors
 * with equal attributes (none naming a dimension). */
static bool same_node(const mcir_node *m, const mcir_node *n) {
    if (m->op != n->op || m->n_inputs != n->n_inputs || m->n_outputs != n->n_outputs ||
        m->n_attrs != n->n_attrs)
        return false;
    for (int i = 0; i < n->n_inputs; i++)
        if (m->inputs[i] != n->inputs[i]) return false;
    for (int i = 0; i < n->n_outputs; i++)
        if (m->outputs[i]->dtype != n->outputs[i]->dtype) return false;
    for (int i = 0; i < n->n_attrs; i++) {
        const mcir_attr *b = NULL;
        for (int j = 0; j < m->n_attrs && !b; j++)
            if (!strcmp(m->attrs[j].name, n->attrs[i].name)) b = &m->attrs[j];
        if (!b || !attr_same(b, &n->attrs[i])) return false;
    }
    return true;
}

static bool is_graph_output(const mcir_node *n) {
    for (int i = 0; i < n->n_outputs; i++)
        if (n->outputs[i]->is_output || n->outputs[i]->kind == MCIR_TENSOR_OUTPUT) return true;
    return false;
}

/* A graph of several ranks where one tensor goes through the same
 * collective twice — what DTensor's redistributions give: each
 * column-parallel product of a sequence-parallel norm's output gathers it
 * again — runs it once: the later copies read the first's result (every
 * rank runs the same program, so every rank drops the same copies), and
 * the pure nodes that then compute the same thing from it are merged too.
 * Each merged collective is a trace record (stage "tp", rule
 * "tp_shared_collective"). Returns how many collectives were dropped. */
int mcir_merge_collectives(mcir_graph *g, mcir_trace *trace, mcir_diag *d) {
    if (g->ranks < 2) return 0;
    int merged = 0, pure = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        mcir_node *n = g->nodes[k];
        unsigned flags = mcir_op_desc_of(n->op)->flags;
        bool coll = flags & MCIR_OPF_COLLECTIVE;
        if (n->dead || is_graph_output(n) || !(coll || ((flags & MCIR_OPF_PURE) && merged))) continue;
        for (int j = 0; j < k; j++) {
            mcir_node *m = g->nodes[j];
            if (m->dead || !same_node(m, n)) continue;
            for (int i = 0; i < n->n_outputs; i++) mcir_graph_replace_uses(g, n->outputs[i], m->outputs[i]);
            n->dead = true;
            if (coll) {
                merged++;
                tp rec = {.g = g, .n = g->ranks, .trace = trace};
                json_t *leg = json_array();
                json_array_append_new(leg, check("same_collective", true, "'%s' is '%s' again: %s of '%s' with the "
                                                 "same attributes", n->name, m->name, mcir_op_name(n->op),
                                                 n->inputs[0]->name));
                json_array_append_new(leg, check("every_rank_alike", true, "every rank runs this program, so "
                                                 "every rank drops the same copy and the ranks stay matched"));
                record(&rec, "tp_shared_collective", n, leg, true, m->name);
            } else {
                pure++;
            }
            break;
        }
    }
    if ((merged || pure) && !(mcir_graph_sort(g, d) && mcir_graph_infer(g, d) && mcir_graph_verify(g, d)))
        return -1;
    return merged;
}

/* ------------------------------------------- collectives beside compute */

/* Rows of a product that may go to a chunk of their own: fewer starve the
 * tensor cores (a GEMM's M tile is 64 to 128). */
#define TP_CHUNK_MIN_ROWS 64
#define TP_RING_STEP_US 2.0   /* kernelplan/cost.c's MCIR_COLLECTIVE_STEP_US */

/* all_reduce(x·W) of a row-parallel product, its rows split in two: each
 * half's product, each half's all_reduce, the halves joined — so the first
 * half's all_reduce runs on the collectives' stream while the second
 * half's product runs (runtime.c; the plan puts each all_reduce right
 * after its product). Where the overlap pays on the target's model: half
 * of the shorter of the all_reduce and the product hidden, against a
 * second ring's steps and launch. $MCIR_TP_CHUNKS=always / never (tests). */
int mcir_tp_overlap_chunks(mcir_graph *g, const mcir_target *target, mcir_trace *trace, mcir_diag *d) {
    if (g->ranks <= 1) return 0;
    const char *force = getenv("MCIR_TP_CHUNKS");
    bool always = force && !strcmp(force, "always"), never = force && !strcmp(force, "never");
    int chunked = 0, n0 = g->n_nodes;
    tp rec = {.g = g, .n = g->ranks, .trace = trace};
    for (int k = 0; k < n0 && !never; k++) {
        mcir_node *n = g->nodes[k];
        if (n->dead || n->op != MCIR_OP_ALL_REDUCE) continue;
        mcir_tensor *X = n->inputs[0], *Y = n->outputs[0];
        mcir_node *mm = X->producer;
        if (!mm || mm->dead || mm->op != MCIR_OP_MATMUL || X->is_output ||
            mcir_graph_consumers(g, X, NULL, 2) != 1)
            continue;
        mcir_tensor *A = mm->inputs[0], *B = mm->inputs[1];
        if (B->kind != MCIR_TENSOR_WEIGHT || B->rank != 2 || A->rank < 2 || mcir_node_bool(mm, "transpose_a") ||
            X->rank != A->rank)
            continue;
        int ax = A->rank - 2;
        int64_t T = A->shape[ax], K = B->shape[mcir_node_bool(mm, "transpose_b") ? 1 : 0];
        bool rows_static = static_extent(A, ax) && static_extent(X, ax);
        bool rows_ok = rows_static && T % 2 == 0 && T / 2 >= TP_CHUNK_MIN_ROWS;
        /* the model: the ring (kernelplan/cost.c) and the product at the tensor cores' peak */
        int ranks = g->ranks;
        double bytes = (double)mcir_tensor_bytes(X), steps = 2.0 * (ranks - 1);
        double ar_us = steps * TP_RING_STEP_US +
                       (target->link_gbps > 0 ? 2.0 * (ranks - 1) / ranks * bytes / (target->link_gbps * 1e3) : 0);
        double peak = X->dtype == MCIR_DTYPE_F16 ? target->f16_tc_tflops
                      : X->dtype == MCIR_DTYPE_BF16 ? target->bf16_tc_tflops : target->f32_fma_tflops;
        double mm_us = peak > 0 ? 2.0 * (double)mcir_tensor_numel(X) * (double)K / (peak * 1e6) : 0;
        /* the split of A's rows is a copy kernel (a matmul does not read a
         * split's part as a view yet): A read and written once more */
        double copy_us = target->dram_gbps > 0 ? 2.0 * (double)mcir_tensor_bytes(A) / (target->dram_gbps * 1e3) : 0;
        double hidden = (ar_us < mm_us ? ar_us : mm_us) / 2,
               extra = steps * TP_RING_STEP_US + 2 * target->launch_us + copy_us;
        bool pays = always || hidden > extra;
        json_t *leg = json_array();
        json_array_append_new(leg, check("row_parallel_product", true, "'%s' all_reduces '%s', the only use of the "
                                         "product '%s' of '%s' by the weight '%s'", n->name, X->name, mm->name,
                                         A->name, B->name));
        json_array_append_new(leg, check("rows_split", rows_ok, "'%s' has %s rows along axis %d%s", A->name,
                                         rows_static ? mcir_arena_printf(g->arena, "%lld", (long long)T) : "a symbolic number of",
                                         ax, rows_ok ? mcir_arena_printf(g->arena, ": two chunks of %lld", (long long)(T / 2))
                                         : mcir_arena_printf(g->arena, ", not two chunks of %d or more", TP_CHUNK_MIN_ROWS)));
        json_array_append_new(leg, check("overlap_pays", pays, "on %s: the all_reduce %.1f us, the product %.1f us; "
                                         "half of the shorter hidden (%.1f us) against a second ring, two "
                                         "launches and the copy of the rows' split (%.1f us)%s", target->name, ar_us,
                                         mm_us, hidden, extra,
                                         always && hidden <= extra ? "; MCIR_TP_CHUNKS=always" : ""));
        bool ok = rows_ok && pays;
        record(&rec, "tp_overlap_chunks", n, leg, ok, ok ? Y->name : NULL);
        if (!ok) continue;
        /* split A's rows; each half's product and all_reduce; concat */
        int64_t sizes[2] = {T / 2, T / 2};
        mcir_tensor *halves[2], *parts[2], *reduced[2];
        const char *stem = mcir_arena_printf(g->arena, "%s_chunk", A->name);
        for (int h = 0; h < 2; h++)
            halves[h] = mcir_graph_add_tensor(g, mcir_graph_fresh_name(g, stem), A->dtype, -1, NULL,
                                              MCIR_TENSOR_INTERMEDIATE);
        mcir_node *sp = mcir_graph_add_node(g, MCIR_OP_SPLIT, NULL, 1, &A, 2, halves);
        mcir_node_set_int(g, sp, "axis", ax);
        mcir_node_set_ints(g, sp, "sizes", 2, sizes);
        mcir_node *made[6] = {sp};
        for (int h = 0; h < 2; h++) {
            parts[h] = mcir_graph_add_tensor(g, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s_chunk", X->name)),
                                             X->dtype, -1, NULL, MCIR_TENSOR_INTERMEDIATE);
            mcir_tensor *ins[2] = {halves[h], B};
            mcir_node *m = mcir_graph_add_node(g, MCIR_OP_MATMUL, NULL, 2, ins, 1, &parts[h]);
            mcir_node_set_bool(g, m, "transpose_b", mcir_node_bool(mm, "transpose_b"));
            reduced[h] = mcir_graph_add_tensor(g, mcir_graph_fresh_name(g, mcir_arena_printf(g->arena, "%s_chunk",
                                                                                               Y->name)),
                                               Y->dtype, -1, NULL, MCIR_TENSOR_INTERMEDIATE);
            mcir_node *r = mcir_graph_add_node(g, MCIR_OP_ALL_REDUCE, NULL, 1, &parts[h], 1, &reduced[h]);
            const char *op = mcir_node_string(n, "op");
            if (op) mcir_node_set_string(g, r, "op", op);
            made[1 + 2 * h] = m;
            made[2 + 2 * h] = r;
        }
        if (mutant("chunks_swapped")) {   /* the test's mutant: the halves joined the wrong way round */
            mcir_tensor *t0 = reduced[0];
            reduced[0] = reduced[1];
            reduced[1] = t0;
        }
        mcir_node *cat = mcir_graph_add_node(g, MCIR_OP_CONCAT, NULL, 2, reduced, 1, &Y);
        mcir_node_set_int(g, cat, "axis", ax);
        made[5] = cat;
        for (int i = 0; i < 6; i++) {
            made[i]->origin_rule = "tp_overlap_chunks";
            made[i]->origin_nodes = n->name;
        }
        Y->producer = cat;
        n->dead = true;
        mm->dead = true;
        chunked++;
    }
    if (chunked && !(mcir_graph_sort(g, d) && mcir_graph_infer(g, d) && mcir_graph_verify(g, d))) return -1;
    return chunked;
}
