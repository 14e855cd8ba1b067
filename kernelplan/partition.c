/*
 * partition.c — the kernel partition: a rewritten graph becomes kernels in
 * execution order. One kernel per fused region (nodes sharing a group ≥ 0,
 * else one node), reshapes become aliases (no kernel, same bytes),
 * transposes fold into the kernels that can read (or, after attention,
 * write) through strides, and what remains is a COPY kernel. Liveness over
 * the kernel order is computed here too.
 *
 * Invariants: kernels are in an order where every tensor is written before
 * it is read; a region's intermediates that nothing outside reads are
 * `internal` (never in memory); every tensor a kernel touches in memory is
 * in its reads or writes with an access saying how (permutation, strides).
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kernelplan/launch.h"
#include "kernelplan/plan-impl.h"

/* ------------------------------------------------------- template table */

/* How an anchor op is lowered. `rank` decides the anchor of a fused
 * region: the member with the highest rank gives the template. Data
 * movement ranks below elementwise: a fused chain with slices or concats
 * (RoPE) is an elementwise kernel whose loads are views; only a region of
 * pure data movement is a COPY. */
typedef struct op_lowering {
    int rank;                    /* 0: not set (elementwise by flags) */
    mcir_template tpl;
    mcir_streaming_state state;
} op_lowering;

static const op_lowering op_lowerings[MCIR_OP_COUNT] = {
    [MCIR_OP_ATTENTION] = {100, MCIR_TEMPLATE_STREAMING_ATTENTION, MCIR_STREAM_SOFTMAX},
    [MCIR_OP_CONV2D] = {90, MCIR_TEMPLATE_CONV2D, MCIR_STREAM_NONE},
    [MCIR_OP_MATMUL] = {80, MCIR_TEMPLATE_MATMUL, MCIR_STREAM_NONE},
    [MCIR_OP_LAYERNORM] = {70, MCIR_TEMPLATE_STREAMING_NORM, MCIR_STREAM_WELFORD},
    [MCIR_OP_RMSNORM] = {70, MCIR_TEMPLATE_STREAMING_NORM, MCIR_STREAM_SUM_SQUARES},
    [MCIR_OP_SOFTMAX] = {70, MCIR_TEMPLATE_STREAMING_NORM, MCIR_STREAM_SOFTMAX},
    [MCIR_OP_REDUCE_SUM] = {60, MCIR_TEMPLATE_REDUCE, MCIR_STREAM_NONE},
    [MCIR_OP_REDUCE_MEAN] = {60, MCIR_TEMPLATE_REDUCE, MCIR_STREAM_NONE},
    [MCIR_OP_REDUCE_MAX] = {60, MCIR_TEMPLATE_REDUCE, MCIR_STREAM_NONE},
    [MCIR_OP_ARGMAX] = {60, MCIR_TEMPLATE_REDUCE, MCIR_STREAM_NONE},
    [MCIR_OP_ARGMIN] = {60, MCIR_TEMPLATE_REDUCE, MCIR_STREAM_NONE},
    [MCIR_OP_MAX_POOL2D] = {50, MCIR_TEMPLATE_POOL, MCIR_STREAM_NONE},
    [MCIR_OP_AVG_POOL2D] = {50, MCIR_TEMPLATE_POOL, MCIR_STREAM_NONE},
    [MCIR_OP_GLOBAL_AVG_POOL] = {50, MCIR_TEMPLATE_POOL, MCIR_STREAM_NONE},
    [MCIR_OP_TRANSPOSE] = {5, MCIR_TEMPLATE_COPY, MCIR_STREAM_NONE},
    [MCIR_OP_SLICE] = {5, MCIR_TEMPLATE_COPY, MCIR_STREAM_NONE},
    [MCIR_OP_CONCAT] = {5, MCIR_TEMPLATE_COPY, MCIR_STREAM_NONE},
    [MCIR_OP_SPLIT] = {5, MCIR_TEMPLATE_COPY, MCIR_STREAM_NONE},
    [MCIR_OP_RESHAPE] = {5, MCIR_TEMPLATE_COPY, MCIR_STREAM_NONE}, /* only when it must copy */
    [MCIR_OP_ALL_REDUCE] = {110, MCIR_TEMPLATE_COLLECTIVE, MCIR_STREAM_NONE},
    [MCIR_OP_ALL_GATHER] = {110, MCIR_TEMPLATE_COLLECTIVE, MCIR_STREAM_NONE},
    [MCIR_OP_REDUCE_SCATTER] = {110, MCIR_TEMPLATE_COLLECTIVE, MCIR_STREAM_NONE},
};

static op_lowering lowering_of(mcir_op op) {
    op_lowering l = op_lowerings[op];
    if (l.rank == 0) l = (op_lowering){10, MCIR_TEMPLATE_ELEMENTWISE, MCIR_STREAM_NONE};
    return l;
}

const char *mcir_template_name(mcir_template t) {
    static const char *const names[] = {
#define X(id, name) name,
        MCIR_TEMPLATES(X)
#undef X
    };
    MCIR_ASSERT(t >= 0 && t < MCIR_TEMPLATE_COUNT);
    return names[t];
}

static const struct {
    const char *name;
    const char *fields[4];
} stream_states[] = {
    [MCIR_STREAM_NONE] = {"none", {NULL}},
    [MCIR_STREAM_SOFTMAX] = {"softmax_state", {"running_max", "running_sum", NULL}},
    [MCIR_STREAM_WELFORD] = {"welford", {"count", "mean", "m2", NULL}},
    [MCIR_STREAM_SUM_SQUARES] = {"sum_squares", {"sum_sq", NULL}},
};

const char *mcir_streaming_state_name(mcir_streaming_state s) {
    MCIR_ASSERT(s >= MCIR_STREAM_NONE && s <= MCIR_STREAM_SUM_SQUARES);
    return stream_states[s].name;
}

const char *const *mcir_streaming_state_fields(mcir_streaming_state s) {
    MCIR_ASSERT(s >= MCIR_STREAM_NONE && s <= MCIR_STREAM_SUM_SQUARES);
    return stream_states[s].fields;
}

char *mcir_plan_bytes_str(mcir_arena *a, int64_t b) {
    if (b >= (int64_t)1 << 30 && b % ((int64_t)1 << 20) == 0)
        return mcir_arena_printf(a, "%.4g GiB", (double)b / (1 << 30));
    if (b >= (int64_t)1 << 20)
        return mcir_arena_printf(a, "%.4g MiB", (double)b / (1 << 20));
    if (b >= 1024) return mcir_arena_printf(a, "%.4g KiB", (double)b / 1024);
    return mcir_arena_printf(a, "%lld B", (long long)b);
}

/* ------------------------------------------------------------ node roles */

/* What becomes of a node. */
typedef enum node_role {
    ROLE_KERNEL,       /* member of a kernel's region */
    ROLE_ALIAS,        /* reshape (or data-free transpose): same bytes */
    ROLE_FOLD_IN,      /* transpose read through strides by every consumer */
    ROLE_VIEW,         /* split (and reshapes of its outputs): every reader
                          takes a strided view of the split's input */
    ROLE_FOLD_OUT,     /* transpose written through strides by its producer */
} node_role;

typedef struct part_ctx {
    const mcir_graph *g;
    mcir_plan *p;
    mcir_trace *trace;
    mcir_diag *d;
    int n_order;
    mcir_node **order;   /* live nodes, topological */
    int *pos;            /* by node id: position in order (-1: dead) */
    node_role *role;     /* by node id */
    int *unit_of;        /* by node id: region index (-1: none) */
    int *cons_start;     /* by tensor id: consumers cons[cons_start[t]..cons_start[t+1]) */
    mcir_node **cons;
    /* names of the kernels built so far: open addressing, cap a power of 2 */
    int n_names, cap_names;
    const char **names;
} part_ctx;

static mcir_loc node_loc(const mcir_node *n) { return n->loc; }

/* Consumers of every tensor among the live nodes (each node once), as
 * CSR by tensor id: built once, so the partition stays linear. */
static void index_consumers(part_ctx *c) {
    const mcir_graph *g = c->g;
    mcir_arena *a = c->p->arena;
    int nt = g->n_tensors;
    c->cons_start = mcir_arena_alloc(a, ((size_t)nt + 2) * sizeof *c->cons_start);
    int total = 0;
    for (int pass = 0; pass < 2; pass++) {
        int *fill = pass ? mcir_arena_alloc(a, ((size_t)nt + 1) * sizeof *fill) : NULL;
        for (int i = 0; i < c->n_order; i++) {
            mcir_node *v = c->order[i];
            for (int j = 0; j < v->n_inputs; j++) {
                int t = v->inputs[j]->id;
                bool dup = false;
                for (int q = 0; q < j; q++) dup |= v->inputs[q] == v->inputs[j];
                if (dup) continue;
                if (!pass) c->cons_start[t + 1]++;
                else c->cons[c->cons_start[t] + fill[t]++] = v;
            }
        }
        if (!pass) {
            for (int t = 0; t < nt; t++) c->cons_start[t + 1] += c->cons_start[t];
            total = c->cons_start[nt];
            c->cons = mcir_arena_alloc(a, ((size_t)total + 1) * sizeof *c->cons);
        }
    }
}

static int consumers_of(const part_ctx *c, const mcir_tensor *t, mcir_node ***out) {
    *out = c->cons + c->cons_start[t->id];
    return c->cons_start[t->id + 1] - c->cons_start[t->id];
}

/* Stable topological order of the live nodes: as early as inputs allow,
 * ties in g->nodes order. The graph's own order when it is already sorted
 * (what the reader and the rewrites leave); a quadratic sort otherwise. */
static bool topo_order(part_ctx *c) {
    const mcir_graph *g = c->g;
    int n = g->n_nodes;
    c->order = mcir_arena_alloc(c->p->arena, ((size_t)n + 1) * sizeof *c->order);
    c->pos = mcir_arena_alloc(c->p->arena, ((size_t)n + 1) * sizeof *c->pos);
    bool sorted = true;
    int k = 0;
    for (int i = 0; i < n; i++) c->pos[i] = -1;
    for (int i = 0; i < n; i++) {
        mcir_node *v = g->nodes[i];
        if (v->dead) continue;
        for (int j = 0; j < v->n_inputs; j++) {
            const mcir_node *pr = v->inputs[j]->producer;
            if (pr && !pr->dead && c->pos[pr->id] < 0) sorted = false;
        }
        c->pos[i] = k;
        c->order[k++] = v;
    }
    c->n_order = k;
    if (sorted) return true;

    int *indeg = calloc((size_t)n + 1, sizeof *indeg);
    bool *done = calloc((size_t)n + 1, sizeof *done);
    MCIR_ASSERT(indeg && done);
    for (int i = 0; i < n; i++) {
        c->pos[i] = -1;
        const mcir_node *v = g->nodes[i];
        if (v->dead) continue;
        for (int j = 0; j < v->n_inputs; j++) {
            const mcir_node *pr = v->inputs[j]->producer;
            if (pr && !pr->dead) indeg[i]++;
        }
    }
    int live = k;
    k = 0;
    while (k < live) {
        int pick = -1;
        for (int t = 0; t < n && pick < 0; t++)
            if (!g->nodes[t]->dead && !done[t] && indeg[t] == 0) pick = t;
        if (pick < 0) {
            free(indeg);
            free(done);
            mcir_error(c->d, (mcir_loc){g->path, 0, 0}, "graph '%s' has a cycle; cannot plan kernels",
                       g->name);
            return false;
        }
        done[pick] = true;
        mcir_node *v = g->nodes[pick];
        c->pos[pick] = k;
        c->order[k++] = v;
        for (int t = 0; t < n; t++) {
            const mcir_node *u = g->nodes[t];
            if (u->dead || done[t]) continue;
            for (int j = 0; j < u->n_inputs; j++)
                for (int o = 0; o < v->n_outputs; o++)
                    if (u->inputs[j] == v->outputs[o]) indeg[t]--;
        }
    }
    free(indeg);
    free(done);
    return true;
}

static bool tensor_external(const mcir_tensor *t) {
    return t->kind != MCIR_TENSOR_INTERMEDIATE || t->is_output;
}

/* perm of a transpose node into out[], returns the rank. */
static int node_perm(const mcir_node *n, int *out) {
    const int64_t *perm;
    int r = mcir_node_ints(n, "perm", &perm);
    int rank = n->inputs[0]->rank;
    MCIR_ASSERT(r == rank && rank <= MCIR_MAX_RANK);
    for (int i = 0; i < r; i++) out[i] = (int)(perm[i] < 0 ? perm[i] + rank : perm[i]);
    return r;
}

/* A transpose that only moves size-1 dims keeps C-order bytes. */
static bool perm_moves_no_data(const mcir_node *n) {
    int perm[MCIR_MAX_RANK];
    int r = node_perm(n, perm);
    int last = -1;
    for (int i = 0; i < r; i++) {
        if (n->inputs[0]->shape[perm[i]] == 1) continue;
        if (perm[i] < last) return false;
        last = perm[i];
    }
    return true;
}

static bool perm_swaps_last_two(const mcir_node *n) {
    int perm[MCIR_MAX_RANK];
    int r = node_perm(n, perm);
    if (r < 2) return false;
    for (int i = 0; i < r - 2; i++)
        if (perm[i] != i) return false;
    return perm[r - 2] == r - 1 && perm[r - 1] == r - 2;
}

static bool perm_keeps_last(const mcir_node *n) {
    int perm[MCIR_MAX_RANK];
    int r = node_perm(n, perm);
    return r >= 1 && perm[r - 1] == r - 1;
}

static json_t *legality(const char *check, bool ok, const char *detail) {
    return json_pack("{s:s, s:b, s:s}", "check", check, "ok", ok, "detail", detail);
}

static json_t *names_of(mcir_node *const *nodes, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_string(nodes[i]->name));
    return a;
}

static void trace_fold(part_ctx *c, const mcir_node *t, const char *rule, bool applied,
                       json_t *checks, const char *into) {
    if (!c->trace) { json_decref(checks); return; }
    json_t *r = json_object();
    json_object_set_new(r, "stage", json_string("plan"));
    json_object_set_new(r, "rule", json_string(rule));
    json_object_set_new(r, "property", json_null());
    json_object_set_new(r, "anchor", json_string(t->name));
    json_object_set_new(r, "matched", json_pack("[s]", t->name));
    json_object_set_new(r, "legality", checks);
    json_object_set_new(r, "decision", json_string(applied ? "applied" : "rejected"));
    if (applied && into) json_object_set_new(r, "result", json_pack("[s]", into));
    mcir_trace_append(c->trace, r);
}

/* The template a node's region will get: its own, or the highest of its
 * fusion group's members. */
static int region_rank(const part_ctx *c, const mcir_node *u) {
    int best = lowering_of(u->op).rank;
    if (u->group < 0) return best;
    for (int i = 0; i < c->n_order; i++)
        if (c->order[i]->group == u->group && lowering_of(c->order[i]->op).rank > best)
            best = lowering_of(c->order[i]->op).rank;
    return best;
}

/* Can consumer u read t's output (input index j) through strides? The
 * matmul template through its transpose flags, attention through strided
 * tile loads, and the value emitter of elementwise / copy kernels through
 * an index remap (kept to permutations that leave the innermost dim in
 * place, so loads stay coalesced; the tiled copy is better otherwise). */
static bool consumer_folds(const part_ctx *c, const mcir_node *t, const mcir_node *u, int j,
                           const char **why) {
    if (u->op == MCIR_OP_MATMUL) {
        if (j > 1) { *why = "not a matmul operand"; return false; }
        if (!perm_swaps_last_two(t)) {
            *why = "matmul folds only a swap of the last two dims (transpose flag)";
            return false;
        }
        return true;
    }
    if (u->op == MCIR_OP_CONV2D) {
        /* a weight repacked tap-major (rule conv_kxk_tap_major): the sm_90a
         * implicit GEMM reads the stored [KH, KW, O, C] per tap, the mma.sync
         * one through the strides */
        const int64_t *perm;
        if (j != 1 || mcir_node_ints(t, "perm", &perm) != 4 || perm[0] != 2 || perm[1] != 3 || perm[2] != 0 ||
            perm[3] != 1) {
            *why = "conv2d folds only its weight read tap-major (perm [2, 3, 0, 1])";
            return false;
        }
        return true;
    }
    if (u->op == MCIR_OP_ATTENTION) {
        if (j > 2) { *why = "the mask is read as given"; return false; }
        if (!perm_keeps_last(t)) {
            *why = "attention folds only permutations that keep the head dim innermost";
            return false;
        }
        return true;
    }
    unsigned fl = mcir_op_desc_of(u->op)->flags;
    bool pointwise = (fl & MCIR_OPF_ELEMENTWISE) || u->op == MCIR_OP_SLICE ||
                     u->op == MCIR_OP_CONCAT || u->op == MCIR_OP_SPLIT;
    if (!pointwise) {
        *why = "consumer reads neither through transpose flags, strided tiles nor an "
               "elementwise index";
        return false;
    }
    if (region_rank(c, u) > lowering_of(MCIR_OP_ADD).rank) {
        *why = "consumer is an epilogue or prologue of a matmul, conv, norm, reduction or "
               "pool kernel";
        return false;
    }
    if (!perm_keeps_last(t)) {
        *why = "an elementwise or copy kernel folds only permutations that keep the "
               "innermost dim (coalesced loads)";
        return false;
    }
    return true;
}

/* Can every reader of t (through reshapes and transposes) read it as a
 * strided view of a split's input? Attention through its strided tile
 * loads (Q, K, V), and pointwise ops in elementwise, copy or matmul
 * kernels (a prologue or epilogue of the generated GEMM) through the value
 * emitter's index remap; not a matmul operand itself, a norm, reduction,
 * pool or conv, which read their operands as whole tensors. */
static bool view_reshape(int *rank, int64_t *shape, int64_t *stride, int nrank,
                         const int64_t *nshape);

/* The access so far of a reader reached through reshapes and transposes
 * from a split output: shape and strides in the split input's storage, or
 * not one strided view (a reshape merging dims the split made apart). */
typedef struct {
    int rank;
    int64_t shape[MCIR_MAX_RANK], stride[MCIR_MAX_RANK];
    bool exact;
} view_walk;

static bool view_readers_ok(const part_ctx *c, const mcir_tensor *t, int depth, view_walk w,
                            const char **who, const char **why) {
    mcir_node **cons;
    int nc = consumers_of(c, t, &cons);
    if (tensor_external(t)) { *who = t->name; *why = "is a graph output and must be stored"; return false; }
    if (nc == 0) { *who = t->name; *why = "has no reader"; return false; }
    for (int u = 0; u < nc; u++) {
        const mcir_node *x = cons[u];
        *who = x->name;
        if (x->group < 0 && (x->op == MCIR_OP_RESHAPE || x->op == MCIR_OP_TRANSPOSE)) {
            if (depth > 8) { *why = "ends a chain of more than 8 reshapes and transposes"; return false; }
            view_walk nw = w;
            const mcir_tensor *out = x->outputs[0];
            if (nw.exact && x->op == MCIR_OP_RESHAPE) {
                nw.exact = view_reshape(&nw.rank, nw.shape, nw.stride, out->rank, out->shape);
            } else if (nw.exact) {
                int pm[MCIR_MAX_RANK];
                int r = node_perm(x, pm);
                for (int k = 0; k < r; k++) {
                    nw.shape[k] = w.shape[pm[k]];
                    nw.stride[k] = w.stride[pm[k]];
                }
            }
            if (!view_readers_ok(c, out, depth + 1, nw, who, why)) return false;
            continue;
        }
        if (x->op == MCIR_OP_ATTENTION) {
            for (int j = 3; j < x->n_inputs; j++)
                if (x->inputs[j] == t) { *why = "reads it as the mask, which is read as given"; return false; }
            if (!w.exact) {
                /* attention loads tiles through one set of strides */
                *why = "reads it through a reshape that merges dims the split keeps apart "
                       "(not one strided view)";
                return false;
            }
            continue;
        }
        unsigned fl = mcir_op_desc_of(x->op)->flags;
        bool pointwise = (fl & MCIR_OPF_ELEMENTWISE) || x->op == MCIR_OP_SLICE ||
                         x->op == MCIR_OP_CONCAT || x->op == MCIR_OP_SPLIT ||
                         x->op == MCIR_OP_TRANSPOSE || x->op == MCIR_OP_RESHAPE;
        int rk = region_rank(c, x);
        if (!pointwise || (rk > lowering_of(MCIR_OP_ADD).rank && rk != lowering_of(MCIR_OP_MATMUL).rank)) {
            *why = "reads its operand as a whole tensor (norm, reduction, pool, conv, or their "
                   "epilogue)";
            return false;
        }
    }
    return true;
}

static bool split_is_view(part_ctx *c, const mcir_node *v, json_t *ck) {
    mcir_arena *a = c->p->arena;
    for (int o = 0; o < v->n_outputs; o++) {
        const char *who = "", *why = "";
        const mcir_tensor *in = v->inputs[0], *out = v->outputs[o];
        view_walk w = {.rank = out->rank, .exact = true};
        int64_t acc = 1;
        for (int k = in->rank - 1; k >= 0; k--) {
            w.shape[k] = out->shape[k];
            w.stride[k] = acc;
            acc *= in->shape[k];
        }
        if (!view_readers_ok(c, out, 0, w, &who, &why)) {
            json_array_append_new(ck, legality("readers_take_views", false,
                mcir_arena_printf(a, "'%s': '%s' %s", v->outputs[o]->name, who, why)));
            return false;
        }
    }
    json_array_append_new(ck, legality("readers_take_views", true,
        mcir_arena_printf(a, "every reader of the %d outputs reads a strided view of '%s' "
                          "(attention tiles or pointwise index remaps): no copy",
                          v->n_outputs, v->inputs[0]->name)));
    return true;
}

/* Classifies every live node: alias, folded transpose, or kernel member;
 * fills alias_root along the way (topological order: inputs are final). */
static void classify(part_ctx *c) {
    const mcir_graph *g = c->g;
    mcir_plan *p = c->p;
    mcir_arena *a = p->arena;
    for (int i = 0; i < c->n_order; i++) {
        mcir_node *v = c->order[i];
        c->role[v->id] = ROLE_KERNEL;
        if (v->op == MCIR_OP_SPLIT && v->group < 0) {
            json_t *ck = json_array();
            bool ok = split_is_view(c, v, ck);
            if (ok) c->role[v->id] = ROLE_VIEW;
            trace_fold(c, v, "split_view", ok, ck, ok ? v->inputs[0]->name : NULL);
            continue;
        }
        if (v->group < 0 && (v->op == MCIR_OP_RESHAPE || v->op == MCIR_OP_TRANSPOSE) &&
            v->inputs[0]->producer && c->role[v->inputs[0]->producer->id] == ROLE_VIEW &&
            (v->op == MCIR_OP_RESHAPE || perm_moves_no_data(v))) {
            c->role[v->id] = ROLE_VIEW;   /* a view of a view: read through by its readers */
            continue;
        }
        bool view = (v->op == MCIR_OP_RESHAPE && v->group < 0) ||
                    (v->op == MCIR_OP_TRANSPOSE && v->group < 0 && perm_moves_no_data(v));
        if (view) {
            mcir_tensor *in = v->inputs[0], *out = v->outputs[0];
            mcir_tensor *root = p->alias_root[in->id];
            bool out_ext = tensor_external(out), root_ext = tensor_external(root);
            if (out_ext && root_ext) {
                /* two allocations that must both exist: copy */
                json_t *ck = json_array();
                json_array_append_new(ck, legality("bytes_owned_once", false,
                    mcir_arena_printf(a, "'%s' and '%s' are both graph inputs, weights or "
                                      "outputs and keep their own storage",
                                      root->name, out->name)));
                trace_fold(c, v, "alias", false, ck, NULL);
                continue;
            }
            if (out_ext) {
                /* the producer writes straight into the output's storage */
                for (int t = 0; t < g->n_tensors; t++)
                    if (p->alias_root[t] == root) p->alias_root[t] = out;
                p->alias_root[out->id] = out;
            } else {
                p->alias_root[out->id] = root;
            }
            c->role[v->id] = ROLE_ALIAS;
            p->alias_nodes[p->n_alias_nodes++] = v;
            json_t *ck = json_array();
            json_array_append_new(ck, legality("same_bytes", true,
                mcir_arena_printf(a, "%s keeps C-order bytes: '%s' shares the storage of '%s'",
                                  mcir_op_name(v->op), out->name,
                                  p->alias_root[out->id]->name)));
            trace_fold(c, v, "alias", true, ck, p->alias_root[out->id]->name);
            continue;
        }
        if (v->op != MCIR_OP_TRANSPOSE || v->group >= 0) continue;

        mcir_tensor *out = v->outputs[0], *in = v->inputs[0];
        mcir_node **cons_in;
        /* into the producer: attention writes the head-merge layout */
        mcir_node *pr = in->producer;
        if (pr && !pr->dead && pr->op == MCIR_OP_ATTENTION && !tensor_external(in) &&
            consumers_of(c, in, &cons_in) == 1 && perm_keeps_last(v) &&
            c->role[pr->id] == ROLE_KERNEL) {
            c->role[v->id] = ROLE_FOLD_OUT;
            json_t *ck = json_array();
            json_array_append_new(ck, legality("single_consumer", true,
                mcir_arena_printf(a, "'%s' is read only by this transpose", in->name)));
            json_array_append_new(ck, legality("head_dim_innermost", true,
                "the permutation keeps the last dim, so attention stores rows with strides"));
            trace_fold(c, v, "fold_transpose", true, ck, pr->name);
            continue;
        }
        /* into every consumer, or not at all */
        mcir_node **cons;
        int nc = consumers_of(c, out, &cons);
        json_t *ck = json_array();
        bool ok = nc > 0 && !tensor_external(out);
        if (tensor_external(out))
            json_array_append_new(ck, legality("not_graph_output", false,
                mcir_arena_printf(a, "'%s' is a graph output and must be stored", out->name)));
        if (nc == 0) json_array_append_new(ck, legality("has_consumer", false, "nothing reads it"));
        for (int u = 0; u < nc && ok; u++) {
            for (int j = 0; j < cons[u]->n_inputs; j++) {
                if (cons[u]->inputs[j] != out) continue;
                const char *why = NULL;
                bool f = consumer_folds(c, v, cons[u], j, &why);
                json_array_append_new(ck, legality("consumer_reads_strided", f,
                    f ? mcir_arena_printf(a, "'%s' (%s) reads input %d through strides",
                                          cons[u]->name, mcir_op_name(cons[u]->op), j)
                      : mcir_arena_printf(a, "'%s' (%s): %s", cons[u]->name,
                                          mcir_op_name(cons[u]->op), why)));
                if (!f) { ok = false; break; }
            }
        }
        if (ok) c->role[v->id] = ROLE_FOLD_IN;
        trace_fold(c, v, "fold_transpose", ok, ck, ok ? cons[0]->name : NULL);
    }
}

/* ----------------------------------------------------------- the regions */

typedef struct region {
    int group;            /* -1: a single node */
    int n, cap;
    mcir_node **nodes;    /* members (kernel role and folded-out transposes) */
    int min_pos;
    bool placed;
    uint64_t colls;       /* placed: the collectives it waits for (bit: collective index mod 64) */
} region;

static void region_add(mcir_arena *a, region *r, mcir_node *v, int pos) {
    r->nodes = mcir_arena_grow(a, r->nodes, &r->cap, r->n + 1, sizeof *r->nodes);
    r->nodes[r->n++] = v;
    if (pos < r->min_pos) r->min_pos = pos;
}

static bool is_collective_op(mcir_op op) {
    return op == MCIR_OP_ALL_REDUCE || op == MCIR_OP_ALL_GATHER || op == MCIR_OP_REDUCE_SCATTER;
}

/* The region that produces t, seen through aliases and folded-in
 * transposes (-1: none — an input or weight). */
static int producing_region(part_ctx *c, const mcir_tensor *t) {
    for (;;) {
        const mcir_node *pr = t->producer;
        if (!pr || pr->dead) return -1;
        if (c->role[pr->id] == ROLE_ALIAS || c->role[pr->id] == ROLE_FOLD_IN ||
            c->role[pr->id] == ROLE_VIEW) {
            t = pr->inputs[0];
            continue;
        }
        return c->unit_of[pr->id];
    }
}

static const int *sort_pos;   /* qsort has no context argument */
static int cmp_by_pos(const void *x, const void *y) {
    const mcir_node *a = *(mcir_node *const *)x, *b = *(mcir_node *const *)y;
    return sort_pos[a->id] - sort_pos[b->id];
}

static void compute_strides(const mcir_tensor *t, int64_t *s) {
    int64_t acc = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        s[i] = acc;
        acc *= t->shape[i];
    }
}

static void access_init(mcir_kernel_access *x, mcir_tensor *tensor, mcir_tensor *logical,
                        mcir_node *folded, const int *perm) {
    x->tensor = tensor;
    x->logical = logical;
    x->folded = folded;
    x->rank = logical->rank;
    int64_t st[MCIR_MAX_RANK];
    compute_strides(tensor, st);
    for (int k = 0; k < logical->rank; k++) {
        x->perm[k] = perm ? perm[k] : k;
        x->strides[k] = st[x->perm[k]];
    }
}

typedef struct kbuild {
    mcir_arena *a;
    int n_reads, cap_reads, n_writes, cap_writes, n_internal, cap_internal;
    mcir_tensor **reads, **writes, **internal;
    mcir_kernel_access *racc, *wacc;
    int cap_racc, cap_wacc;
} kbuild;

static void add_read(kbuild *b, mcir_tensor *tensor, mcir_tensor *logical, mcir_node *folded,
                     const int *perm) {
    for (int i = 0; i < b->n_reads; i++)
        if (b->racc[i].logical == logical) return;
    b->reads = mcir_arena_grow(b->a, b->reads, &b->cap_reads, b->n_reads + 1, sizeof *b->reads);
    b->racc = mcir_arena_grow(b->a, b->racc, &b->cap_racc, b->n_reads + 1, sizeof *b->racc);
    b->reads[b->n_reads] = tensor;
    access_init(&b->racc[b->n_reads], tensor, logical, folded, perm);
    b->n_reads++;
}

static void add_write(kbuild *b, mcir_tensor *tensor, mcir_tensor *logical, mcir_node *folded,
                      const int *perm) {
    b->writes = mcir_arena_grow(b->a, b->writes, &b->cap_writes, b->n_writes + 1,
                                sizeof *b->writes);
    b->wacc = mcir_arena_grow(b->a, b->wacc, &b->cap_wacc, b->n_writes + 1, sizeof *b->wacc);
    b->writes[b->n_writes] = tensor;
    access_init(&b->wacc[b->n_writes], tensor, logical, folded, perm);
    b->n_writes++;
}

static void add_internal(kbuild *b, mcir_tensor *t) {
    b->internal = mcir_arena_grow(b->a, b->internal, &b->cap_internal, b->n_internal + 1,
                                  sizeof *b->internal);
    b->internal[b->n_internal++] = t;
}

static bool in_region(part_ctx *c, const mcir_node *v, int unit) {
    return c->unit_of[v->id] == unit;
}

/* A C identifier from the graph and anchor names, unique in the plan. */
static size_t name_slot(const part_ctx *c, const char *name) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *q = name; *q; q++) h = (h ^ (unsigned char)*q) * 0x100000001b3ull;
    size_t mask = (size_t)c->cap_names - 1, i = (size_t)h & mask;
    while (c->names[i] && strcmp(c->names[i], name) != 0) i = (i + 1) & mask;
    return i;
}

/* Whether a kernel built so far has this name (a set, not a scan of every
 * kernel: a graph of n kernels names them in O(n)). */
static bool name_taken(const part_ctx *c, const char *name) {
    return c->cap_names && c->names[name_slot(c, name)];
}

static void name_add(part_ctx *c, const char *name) {
    if (2 * (c->n_names + 1) > c->cap_names) {
        const char **old = c->names;
        int old_cap = c->cap_names;
        c->cap_names = old_cap ? 2 * old_cap : 64;
        c->names = mcir_arena_alloc(c->p->arena, (size_t)c->cap_names * sizeof *c->names);
        for (int i = 0; i < old_cap; i++)
            if (old[i]) c->names[name_slot(c, old[i])] = old[i];
    }
    c->names[name_slot(c, name)] = name;
    c->n_names++;
}

static const char *kernel_name(part_ctx *c, const mcir_node *anchor) {
    mcir_arena *a = c->p->arena;
    char *s = mcir_arena_printf(a, "%s_%s", c->g->name ? c->g->name : "graph", anchor->name);
    for (char *q = s; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9')))
            *q = '_';
    if (s[0] >= '0' && s[0] <= '9') s = mcir_arena_printf(a, "k_%s", s);
    const char *name = s;
    for (int n = 2; name_taken(c, name); n++) name = mcir_arena_printf(a, "%s_%d", s, n);
    name_add(c, name);
    return name;
}

/* Whether reading pr's output goes through a split view. */
static bool through_view(const part_ctx *c, const mcir_node *pr) {
    for (; pr && !pr->dead; pr = pr->inputs[0]->producer) {
        if (c->role[pr->id] == ROLE_VIEW) return true;
        if (c->role[pr->id] != ROLE_FOLD_IN) return false;
    }
    return false;
}

/* NumPy's no-copy reshape of a strided view (dims of size 1 dropped);
 * false if the view cannot be reshaped in place. */
static bool view_reshape(int *rank, int64_t *shape, int64_t *stride, int nrank,
                         const int64_t *nshape) {
    int64_t os[MCIR_MAX_RANK], ost[MCIR_MAX_RANK], nst[MCIR_MAX_RANK];
    int on = 0;
    for (int i = 0; i < *rank; i++)
        if (shape[i] != 1) { os[on] = shape[i]; ost[on++] = stride[i]; }
    int oi = 0, oj = 1, ni = 0, nj = 1;
    while (ni < nrank && oi < on) {
        int64_t np = nshape[ni], op = os[oi];
        while (np != op) {
            if (np < op) { if (nj >= nrank) return false; np *= nshape[nj++]; }
            else { if (oj >= on) return false; op *= os[oj++]; }
        }
        for (int k = oi; k < oj - 1; k++)
            if (ost[k] != os[k + 1] * ost[k + 1]) return false;
        nst[nj - 1] = ost[oj - 1];
        for (int k = nj - 1; k > ni; k--) nst[k - 1] = nst[k] * nshape[k];
        ni = nj++;
        oi = oj++;
    }
    for (int i = ni; i < nrank; i++) {
        if (nshape[i] != 1) return false;
        nst[i] = 1;
    }
    *rank = nrank;
    for (int i = 0; i < nrank; i++) {
        shape[i] = nshape[i];
        stride[i] = nshape[i] == 1 ? 0 : nst[i];
    }
    return true;
}

/* A read of `logical` through a chain of split views, reshapes and
 * transposes: the bytes are the split's input; the access's strides (and
 * the perm of the last transpose) are in that tensor's storage, from the
 * offset of the split output. */
static void add_view_read(part_ctx *c, kbuild *b, mcir_tensor *logical) {
    (void)c;
    mcir_node *chain[2 * MCIR_MAX_RANK + 16];
    int n = 0;
    mcir_tensor *base = logical;
    mcir_node *first = NULL;
    for (mcir_node *pr = logical->producer;
         pr && !pr->dead && (c->role[pr->id] == ROLE_FOLD_IN || c->role[pr->id] == ROLE_VIEW) &&
         n < (int)(sizeof chain / sizeof *chain);
         pr = pr->inputs[0]->producer) {
        if (!first) first = pr;
        chain[n++] = pr;
        base = pr->inputs[0];
    }
    for (int i = 0; i < b->n_reads; i++)
        if (b->racc[i].logical == logical) return;
    int rank = base->rank, perm[MCIR_MAX_RANK];
    int64_t shape[MCIR_MAX_RANK], stride[MCIR_MAX_RANK];
    compute_strides(base, stride);
    for (int k = 0; k < rank; k++) shape[k] = base->shape[k];
    for (int k = 0; k < logical->rank; k++) perm[k] = k;
    bool exact = true;
    for (int i = n - 1; i >= 0 && exact; i--) {
        const mcir_node *v = chain[i];
        const mcir_tensor *out = v->outputs[0];
        if (v->op == MCIR_OP_SPLIT) {
            const mcir_tensor *o = i == 0 ? logical : chain[i - 1]->inputs[0];
            int axis;
            exact = mcir_norm_axis(mcir_node_int(v, "axis"), rank, &axis);
            if (exact) shape[axis] = o->shape[axis];
        } else if (v->op == MCIR_OP_RESHAPE) {
            exact = view_reshape(&rank, shape, stride, out->rank, out->shape);
        } else {
            int pm[MCIR_MAX_RANK];
            int r = node_perm(v, pm);
            int64_t s2[MCIR_MAX_RANK], st2[MCIR_MAX_RANK];
            for (int k = 0; k < r; k++) { s2[k] = shape[pm[k]]; st2[k] = stride[pm[k]]; perm[k] = pm[k]; }
            memcpy(shape, s2, sizeof(int64_t) * (size_t)r);
            memcpy(stride, st2, sizeof(int64_t) * (size_t)r);
        }
    }
    b->reads = mcir_arena_grow(b->a, b->reads, &b->cap_reads, b->n_reads + 1, sizeof *b->reads);
    b->racc = mcir_arena_grow(b->a, b->racc, &b->cap_racc, b->n_reads + 1, sizeof *b->racc);
    b->reads[b->n_reads] = base;
    mcir_kernel_access *x = &b->racc[b->n_reads];
    x->tensor = base;
    x->logical = logical;
    x->folded = first;
    x->rank = logical->rank;
    if (!exact || rank != logical->rank) {
        /* not one strided view (a reshape merging split dims): the
         * kernel's value emitter still maps each index back */
        compute_strides(logical, stride);
        for (int k = 0; k < logical->rank; k++) perm[k] = k;
    }
    for (int k = 0; k < logical->rank; k++) {
        x->perm[k] = perm[k];
        x->strides[k] = stride[k];
    }
    b->n_reads++;
}

/* ------------------------------------------- batching pointwise groups */

/* A fusion group of pointwise work only (what the rewrites' pointwise
 * rules make): elementwise ops, slices, concatenations. */
static bool pointwise_group_region(const part_ctx *c, const region *r) {
    if (r->group < 0 || r->n == 0) return false;
    for (int i = 0; i < r->n; i++) {
        const mcir_node *v = r->nodes[i];
        unsigned fl = mcir_op_desc_of(v->op)->flags;
        if (c->role[v->id] != ROLE_KERNEL || !(fl & MCIR_OPF_PURE) ||
            !((fl & MCIR_OPF_ELEMENTWISE) || v->op == MCIR_OP_SLICE || v->op == MCIR_OP_CONCAT))
            return false;
    }
    return true;
}

/* The tensor whose bytes a read of t touches: through aliases, folded
 * transposes and split views. */
static const mcir_tensor *source_of(const part_ctx *c, const mcir_tensor *t) {
    for (int guard = 0; guard < 64; guard++) {
        const mcir_node *pr = t->producer;
        if (!pr || pr->dead || c->unit_of[pr->id] >= 0) return t;
        t = pr->inputs[0];
    }
    return t;
}

/* Whether region `to` is reachable from region `from` (through the
 * consumers of every tensor `from` produces, nodes without a region —
 * aliases, folded transposes, views — passed through). */
static bool region_reaches(const part_ctx *c, int from, int to, const region *regions,
                           unsigned char *seen) {
    if (from == to) return true;
    if (seen[from]) return false;
    seen[from] = 1;
    const region *r = &regions[from];
    /* a small explicit stack of tensors to expand */
    for (int i = 0; i < r->n; i++) {
        const mcir_node *v = r->nodes[i];
        for (int o = 0; o < v->n_outputs; o++) {
            const mcir_tensor *stack[64];
            int sp = 0;
            stack[sp++] = v->outputs[o];
            while (sp > 0) {
                const mcir_tensor *t = stack[--sp];
                mcir_node **cons;
                int nc = consumers_of(c, t, &cons);
                for (int q = 0; q < nc; q++) {
                    int w = c->unit_of[cons[q]->id];
                    if (w == from) continue;
                    if (w >= 0) {
                        if (region_reaches(c, w, to, regions, seen)) return true;
                    } else {
                        for (int oo = 0; oo < cons[q]->n_outputs && sp < 64; oo++)
                            stack[sp++] = cons[q]->outputs[oo];
                    }
                }
            }
        }
    }
    return false;
}

static bool regions_share_a_source(const part_ctx *c, const region *a, const region *b) {
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < a->nodes[i]->n_inputs; j++) {
            const mcir_tensor *sa = source_of(c, a->nodes[i]->inputs[j]);
            if (mcir_tensor_numel(sa) <= 1) continue;   /* scalars say nothing */
            for (int k = 0; k < b->n; k++)
                for (int l = 0; l < b->nodes[k]->n_inputs; l++)
                    if (source_of(c, b->nodes[k]->inputs[l]) == sa) return true;
        }
    return false;
}

/* Independent pointwise groups that read the same tensor (RoPE on Q and
 * on K: the same projection, the same cos/sin tables) run as one launch:
 * one grid over both outputs, each read once from L2's point of view.
 * Only rewrite-made groups: ungrouped nodes stay a kernel each. */
static void batch_pointwise_groups(part_ctx *c, region *regions, int *n_regions) {
    int n = *n_regions;
    if (n < 2) return;
    unsigned char *seen = calloc((size_t)n, 1);
    MCIR_ASSERT(seen);
    mcir_arena *a = c->p->arena;
    for (int u = 0; u < n; u++) {
        if (!pointwise_group_region(c, &regions[u])) continue;
        for (int w = u + 1; w < n; w++) {
            if (!pointwise_group_region(c, &regions[w]) ||
                !regions_share_a_source(c, &regions[u], &regions[w]))
                continue;
            memset(seen, 0, (size_t)n);
            bool uw = region_reaches(c, u, w, regions, seen);
            memset(seen, 0, (size_t)n);
            bool wu = !uw && region_reaches(c, w, u, regions, seen);
            json_t *ck = json_array();
            json_array_append_new(ck, legality("independent", !uw && !wu,
                mcir_arena_printf(a, uw || wu ? "'%s' and '%s' depend on each other"
                                              : "'%s' and '%s' share a read and neither "
                                                "depends on the other",
                                  regions[u].nodes[0]->name, regions[w].nodes[0]->name)));
            trace_fold(c, regions[w].nodes[0], "batch_pointwise", !uw && !wu, ck,
                       !uw && !wu ? regions[u].nodes[0]->name : NULL);
            if (uw || wu) continue;
            for (int i = 0; i < regions[w].n; i++) {
                region_add(a, &regions[u], regions[w].nodes[i], c->pos[regions[w].nodes[i]->id]);
                c->unit_of[regions[w].nodes[i]->id] = u;
            }
            /* drop w: later regions move down one */
            for (int q = w + 1; q < n; q++) {
                regions[q - 1] = regions[q];
                for (int i = 0; i < regions[q - 1].n; i++)
                    c->unit_of[regions[q - 1].nodes[i]->id] = q - 1;
            }
            n--;
            w--;
        }
    }
    free(seen);
    *n_regions = n;
}

/* ------------------------------------------ state written in place */

/* A state output O written over input X (graph.json "state") that is
 * concat(pieces) along an axis: a piece slice(X, axis, s, e) placed at
 * offset s copies X's bytes onto themselves once O shares X's buffer.
 * Such a piece joins the concat's kernel (a view, not a copy kernel of
 * its own), the concat's kernel computes only the other pieces' rows (its
 * write window), and no kernel reads the rows it would have copied. */

/* Input k's offset along the concat's axis (a polynomial). */
static bool concat_offset(const mcir_node *n, int axis, int k, mcir_extent *out) {
    mcir_extent off = mcir_extent_const(0);
    for (int j = 0; j < k; j++) {
        mcir_extent e = mcir_tensor_extent(n->inputs[j], axis);
        if (!mcir_extent_add(&off, &e, &off)) return false;
    }
    *out = off;
    return true;
}

/* Whether input k of concat n (along axis) is X's own rows at their place. */
static bool self_piece(const mcir_node *n, int axis, int k, const mcir_tensor *x) {
    const mcir_node *s = n->inputs[k]->producer;
    if (!s || s->dead || s->op != MCIR_OP_SLICE || s->inputs[0] != x || mcir_node_int(s, "step") != 1) return false;
    int sa;
    if (!mcir_norm_axis(mcir_node_int(s, "axis"), x->rank, &sa) || sa != axis) return false;
    const mcir_attr *as = mcir_node_attr(s, "start");
    int64_t start = mcir_node_int(s, "start");
    if (!(as && as->dim_of && as->dim_of[0] >= 0) && start < 0) return false;
    mcir_extent se = as && as->dim_of && as->dim_of[0] >= 0 ? mcir_attr_extent(as, 0) : mcir_extent_const(start), off;
    return concat_offset(n, axis, k, &off) && mcir_extent_equal(&se, &off);
}

/* The concat producing state output o, with its axis; NULL if none. */
static const mcir_node *state_concat(const mcir_tensor *o, int *axis) {
    const mcir_node *n = o->producer;
    if (!o->state_input || !n || n->dead || n->op != MCIR_OP_CONCAT) return NULL;
    if (!mcir_norm_axis(mcir_node_int(n, "axis"), o->rank, axis)) return NULL;
    return n;
}

/* Single-node region of s joins region u (later regions move down one). */
static void region_move(part_ctx *c, region *regions, int *n_regions, mcir_node *s, int u) {
    int w = c->unit_of[s->id];
    region_add(c->p->arena, &regions[u], s, c->pos[s->id]);
    c->unit_of[s->id] = u;
    for (int q = w + 1; q < *n_regions; q++) {
        regions[q - 1] = regions[q];
        for (int j = 0; j < regions[q - 1].n; j++) c->unit_of[regions[q - 1].nodes[j]->id] = q - 1;
    }
    (*n_regions)--;
}

/* The self-copying pieces of each state concat join the concat's region;
 * so do the slices of the state that only attention reads (as K or V). */
static void state_pieces_join(part_ctx *c, region *regions, int *n_regions) {
    const mcir_graph *g = c->g;
    for (int i = 0; i < g->n_outputs; i++) {
        int axis;
        const mcir_node *n = state_concat(g->outputs[i], &axis);
        if (!g->outputs[i]->state_input) continue;
        for (int k = 0; n && c->unit_of[n->id] >= 0 && k < n->n_inputs; k++) {
            if (!self_piece(n, axis, k, g->outputs[i]->state_input)) continue;
            mcir_node *s = n->inputs[k]->producer;
            int w = c->unit_of[s->id], u = c->unit_of[n->id];
            int nc = c->cons_start[n->inputs[k]->id + 1] - c->cons_start[n->inputs[k]->id];
            if (w < 0 || w == u || regions[w].n != 1 || nc != 1 || c->role[s->id] != ROLE_KERNEL) continue;
            region_move(c, regions, n_regions, s, u);
        }
        /* the valid rows attention reads (slice(O, axis, 0, n)): a strided
         * view of the state inside the attention's kernel, not a copy */
        const mcir_tensor *o = g->outputs[i];
        for (int q = c->cons_start[o->id]; q < c->cons_start[o->id + 1]; q++) {
            mcir_node *s = c->cons[q];
            if (s->op != MCIR_OP_SLICE || mcir_node_int(s, "step") != 1 || s->outputs[0]->is_output ||
                c->role[s->id] != ROLE_KERNEL || c->unit_of[s->id] < 0 || regions[c->unit_of[s->id]].n != 1)
                continue;
            int u = -1;
            bool ok = c->cons_start[s->outputs[0]->id + 1] > c->cons_start[s->outputs[0]->id];
            for (int r = c->cons_start[s->outputs[0]->id]; ok && r < c->cons_start[s->outputs[0]->id + 1]; r++) {
                const mcir_node *at = c->cons[r];
                bool kv = at->n_inputs >= 3 && (at->inputs[1] == s->outputs[0] || at->inputs[2] == s->outputs[0]);
                for (int j = 0; kv && j < at->n_inputs; j++)
                    kv = (j == 1 || j == 2) || at->inputs[j] != s->outputs[0];
                ok = at->op == MCIR_OP_ATTENTION && kv && c->role[at->id] == ROLE_KERNEL &&
                     (u < 0 || u == c->unit_of[at->id]);
                u = c->unit_of[at->id];
            }
            if (ok && u >= 0 && u != c->unit_of[s->id]) region_move(c, regions, n_regions, s, u);
        }
    }
}

static bool kernel_has(const mcir_kernel_plan *k, const mcir_node *n) {
    for (int i = 0; i < k->n_nodes; i++)
        if (k->nodes[i] == n) return true;
    return false;
}

/* Each state output takes its input's bytes (alias_root) where that is
 * safe: one kernel W writes it; no other kernel reads the input; inside
 * W the input is read only by the concat's self-copying pieces. Then W
 * computes only the other pieces' rows. Otherwise the output keeps a
 * buffer of its own and the runtime copies it over the input between
 * steps; the trace says why. */
static void plan_states(part_ctx *c) {
    const mcir_graph *g = c->g;
    mcir_plan *p = c->p;
    mcir_arena *a = p->arena;
    for (int i = 0; i < g->n_outputs; i++) {
        mcir_tensor *o = g->outputs[i], *x = o->state_input;
        if (!x) continue;
        json_t *ck = json_array();
        int wk = -1, wi = -1, axis = -1;
        for (int k = 0; k < p->n_kernels; k++)
            for (int j = 0; j < p->kernels[k].n_writes; j++)
                if (p->kernels[k].writes[j] == o) wk = k, wi = j;
        bool ok = p->alias_root[o->id] == o && p->alias_root[x->id] == x && wk >= 0;
        json_array_append_new(ck, legality("one_writer", ok,
            ok ? mcir_arena_printf(a, "kernel %s writes '%s'", p->kernels[wk].name, o->name)
               : mcir_arena_printf(a, "'%s' is %s", o->name, wk < 0 ? "written by no kernel (a view of another tensor)"
                                                                    : "a view of another tensor")));
        /* no other kernel reads x: not after W (the bytes are o's then),
         * nor before (a step rerun — a CUDA graph's warm-up, then its
         * replay — would read what W wrote: the step must be idempotent
         * over its state) */
        for (int k = 0; ok && k < p->n_kernels; k++)
            for (int j = 0; ok && k != wk && j < p->kernels[k].n_reads; j++)
                if (p->alias_root[p->kernels[k].reads[j]->id] == x) {
                    ok = false;
                    json_array_append_new(ck, legality("read_by_its_writer_only", false,
                        mcir_arena_printf(a, "kernel %s reads '%s' %s kernel %s writes '%s' over it",
                                          p->kernels[k].name, x->name, k > wk ? "after" : "before",
                                          p->kernels[wk].name, o->name)));
                }
        const mcir_node *cat = ok ? state_concat(o, &axis) : NULL;
        if (ok) {
            const mcir_kernel_plan *w = &p->kernels[wk];
            for (int j = 0; ok && j < w->n_nodes; j++) {
                const mcir_node *v = w->nodes[j];
                bool reads_x = false;
                for (int q = 0; q < v->n_inputs; q++) reads_x |= v->inputs[q] == x;
                if (!reads_x) continue;
                bool piece = false;
                for (int q = 0; cat && q < cat->n_inputs; q++)
                    piece |= v->outputs[0] == cat->inputs[q] && self_piece(cat, axis, q, x);
                int nc = c->cons_start[v->outputs[0]->id + 1] - c->cons_start[v->outputs[0]->id];
                if (!piece || nc != 1 || !kernel_has(w, cat)) {
                    ok = false;
                    json_array_append_new(ck, legality("reads_only_its_own_rows", false,
                        mcir_arena_printf(a, "node '%s' of kernel %s reads '%s' other than as rows of '%s' "
                                          "at their own place", v->name, w->name, x->name, o->name)));
                }
            }
            if (ok)
                json_array_append_new(ck, legality("reads_only_its_own_rows", true,
                    mcir_arena_printf(a, "kernel %s reads '%s' only where '%s' keeps its rows", w->name,
                                      x->name, o->name)));
        }
        /* W's window: from the first piece that is not the input's own rows to the last */
        int first = -1, last = -1;
        for (int q = 0; ok && cat && q < cat->n_inputs; q++)
            if (!self_piece(cat, axis, q, x)) {
                if (first < 0) first = q;
                last = q;
            }
        mcir_kernel_plan *w = ok ? &p->kernels[wk] : NULL;
        bool window = ok && first >= 0 && (w->tpl == MCIR_TEMPLATE_COPY || w->tpl == MCIR_TEMPLATE_ELEMENTWISE) &&
                      !mcir_kernel_is_last2_transpose(w) && kernel_has(w, cat) && !w->write_access[wi].folded;
        mcir_write_window win = {.axis = axis, .concat = cat, .first = first, .last = last};
        mcir_extent ws, wl;
        window = window && mcir_write_window_extents(&win, &ws, &wl);
        if (ok) {
            for (int t = 0; t < g->n_tensors; t++)
                if (p->alias_root[t] == o) p->alias_root[t] = x;
            if (window) {
                if (!w->windows) {
                    w->windows = mcir_arena_alloc(a, (size_t)w->n_writes * sizeof *w->windows);
                    for (int j = 0; j < w->n_writes; j++) w->windows[j].axis = -1;
                }
                w->windows[wi] = win;
                char sb[96], lb[96];
                json_array_append_new(ck, legality("window", true,
                    mcir_arena_printf(a, "kernel %s computes %s rows from row %s of axis %d of '%s'; the "
                                      "others are '%s''s own", w->name, mcir_extent_str(g, &wl, lb, sizeof lb),
                                      mcir_extent_str(g, &ws, sb, sizeof sb), axis, o->name, x->name)));
            }
        }
        trace_fold(c, o->producer ? o->producer : g->nodes[0], "state_in_place", ok, ck,
                   ok ? mcir_arena_printf(a, "'%s' written over '%s'", o->name, x->name) : NULL);
    }
}

/* Fills kernel k from region r (unit index u). */
static void build_kernel(part_ctx *c, mcir_kernel_plan *k, region *r, int u) {
    mcir_arena *a = c->p->arena;
    kbuild b = {.a = a};

    /* nodes: members plus the transposes folded into their reads */
    int n_nodes = 0, cap_nodes = 0;
    mcir_node **nodes = NULL;
    for (int i = 0; i < r->n; i++) {
        mcir_node *v = r->nodes[i];
        for (int j = 0; j < v->n_inputs; j++) {
            /* folded transposes and split views (with their reshapes) */
            for (mcir_node *pr = v->inputs[j]->producer;
                 pr && !pr->dead && (c->role[pr->id] == ROLE_FOLD_IN || c->role[pr->id] == ROLE_VIEW);
                 pr = pr->inputs[0]->producer) {
                bool dup = false;
                for (int q = 0; q < n_nodes; q++) dup |= nodes[q] == pr;
                if (dup) continue;
                nodes = mcir_arena_grow(a, nodes, &cap_nodes, n_nodes + 1, sizeof *nodes);
                nodes[n_nodes++] = pr;
            }
        }
        nodes = mcir_arena_grow(a, nodes, &cap_nodes, n_nodes + 1, sizeof *nodes);
        nodes[n_nodes++] = v;
    }
    sort_pos = c->pos;
    qsort(nodes, (size_t)n_nodes, sizeof *nodes, cmp_by_pos);
    k->n_nodes = n_nodes;
    k->nodes = nodes;

    /* anchor: highest rank, first in order */
    mcir_node *anchor = NULL;
    int best = -1;
    for (int i = 0; i < n_nodes; i++) {
        mcir_node *v = nodes[i];
        if (!in_region(c, v, u) || c->role[v->id] == ROLE_FOLD_OUT) continue;
        int rk = lowering_of(v->op).rank;
        if (rk > best) { best = rk; anchor = v; }
    }
    MCIR_ASSERT(anchor);
    op_lowering low = lowering_of(anchor->op);
    k->anchor = anchor;
    k->tpl = low.tpl;
    k->streaming_state = low.state;

    /* reads: in order of first use */
    for (int i = 0; i < r->n; i++) {
        mcir_node *v = r->nodes[i];
        for (int j = 0; j < v->n_inputs; j++) {
            mcir_tensor *t = v->inputs[j];
            mcir_node *pr = t->producer;
            if (pr && !pr->dead && in_region(c, pr, u)) continue;     /* internal */
            if (pr && !pr->dead && through_view(c, pr)) {
                add_view_read(c, &b, t);
            } else if (pr && !pr->dead && c->role[pr->id] == ROLE_FOLD_IN) {
                int perm[MCIR_MAX_RANK];
                node_perm(pr, perm);
                add_read(&b, pr->inputs[0], t, pr, perm);
            } else {
                add_read(&b, t, t, NULL, NULL);
            }
        }
    }
    /* writes and internals */
    for (int i = 0; i < r->n; i++) {
        mcir_node *v = r->nodes[i];
        for (int o = 0; o < v->n_outputs; o++) {
            mcir_tensor *t = v->outputs[o];
            if (c->role[v->id] == ROLE_FOLD_OUT) {
                int perm[MCIR_MAX_RANK], inv[MCIR_MAX_RANK];
                int rank = node_perm(v, perm);
                for (int q = 0; q < rank; q++) inv[perm[q]] = q;
                add_write(&b, t, v->inputs[0], v, inv);
                continue;
            }
            bool outside = tensor_external(t);
            mcir_node **cons;
            int nc = consumers_of(c, t, &cons);
            for (int q = 0; q < nc; q++)
                if (!in_region(c, cons[q], u)) outside = true;
            if (nc == 0) outside = true;   /* stored even if unused: the template writes it */
            if (outside) add_write(&b, t, t, NULL, NULL);
            else add_internal(&b, t);
        }
    }
    k->n_reads = b.n_reads;
    k->reads = b.reads;
    k->read_access = b.racc;
    k->n_writes = b.n_writes;
    k->writes = b.writes;
    k->write_access = b.wacc;
    k->n_internal = b.n_internal;
    k->internal = b.internal;

    if (k->tpl == MCIR_TEMPLATE_STREAMING_ATTENTION) k->recompute_policy = "stream_tiles";
    else if (k->tpl == MCIR_TEMPLATE_STREAMING_NORM) k->recompute_policy = "stream_rows";
    else if (k->n_internal > 0) k->recompute_policy = "recompute_in_consumer";
    else k->recompute_policy = "none";

    if (k->tpl == MCIR_TEMPLATE_MATMUL) {
        k->trans_a = mcir_node_bool(anchor, "transpose_a");
        k->trans_b = mcir_node_bool(anchor, "transpose_b");
        for (int j = 0; j < 2; j++) {
            const mcir_kernel_access *x = mcir_kernel_access_of(k, anchor->inputs[j]);
            if (x && x->folded) {
                if (j == 0) k->trans_a = !k->trans_a;
                else k->trans_b = !k->trans_b;
            }
        }
    }
    k->registers = -1;
    k->spill_bytes = -1;
    k->name = kernel_name(c, anchor);
}

/* ------------------------------------------------------------- liveness */

static void liveness(mcir_plan *p) {
    const mcir_graph *g = p->graph;
    for (int t = 0; t < g->n_tensors; t++) p->first_use[t] = p->last_use[t] = -1;
    for (int k = 0; k < p->n_kernels; k++) {
        const mcir_kernel_plan *kp = &p->kernels[k];
        for (int i = 0; i < kp->n_writes; i++) {
            int r = p->alias_root[kp->writes[i]->id]->id;
            if (p->first_use[r] < 0) p->first_use[r] = k;
            if (p->last_use[r] < k) p->last_use[r] = k;
        }
        for (int i = 0; i < kp->n_reads; i++) {
            int r = p->alias_root[kp->reads[i]->id]->id;
            if (p->last_use[r] < k) p->last_use[r] = k;
        }
    }
    /* ranks: a collective runs on a second stream until the first kernel
     * that reads what it writes (runtime.c): its input stays until then,
     * so no kernel in between is placed over the bytes it still sends */
    for (int k = 0; g->ranks > 1 && k < p->n_kernels; k++) {
        const mcir_kernel_plan *kp = &p->kernels[k];
        if (kp->tpl != MCIR_TEMPLATE_COLLECTIVE) continue;
        int out = p->alias_root[kp->anchor->outputs[0]->id]->id, in = p->alias_root[kp->anchor->inputs[0]->id]->id;
        int join = p->n_kernels - 1;
        for (int j = k + 1; j < p->n_kernels && join == p->n_kernels - 1; j++)
            for (int i = 0; i < p->kernels[j].n_reads; i++)
                if (p->alias_root[p->kernels[j].reads[i]->id]->id == out) join = j - 1 < k ? k : j - 1;
        if (p->last_use[in] < join) p->last_use[in] = join;
    }
    /* graph outputs read after the last kernel are not in the arena; an
     * alias reports its root's range */
    for (int t = 0; t < g->n_tensors; t++) {
        int r = p->alias_root[t]->id;
        p->first_use[t] = p->first_use[r];
        p->last_use[t] = p->last_use[r];
    }
}

/* ---------------------------------------------------------------- build */

static void trace_kernel(part_ctx *c, const mcir_kernel_plan *k) {
    if (!c->trace) return;
    json_t *r = json_object();
    json_object_set_new(r, "stage", json_string("plan"));
    json_object_set_new(r, "rule", json_string("partition"));
    json_object_set_new(r, "property", json_null());
    json_object_set_new(r, "anchor", json_string(k->anchor->name));
    json_object_set_new(r, "matched", names_of(k->nodes, k->n_nodes));
    json_object_set_new(r, "legality", json_array());
    json_object_set_new(r, "decision", json_string("applied"));
    json_object_set_new(r, "result", json_pack("[s]", k->name));
    json_object_set_new(r, "template", json_string(mcir_template_name(k->tpl)));
    json_object_set_new(r, "reason", json_string(k->tiling.reason ? k->tiling.reason : ""));
    mcir_trace_append(c->trace, r);
}

/* A tensor the rewrites marked streaming or recomputable that still
 * crosses a kernel boundary is stored; say so, so a missing fusion shows. */
static void trace_stored_states(part_ctx *c, const mcir_kernel_plan *k) {
    if (!c->trace) return;
    for (int i = 0; i < k->n_writes; i++) {
        const mcir_tensor *t = k->write_access[i].logical;
        if (t->memory_state == MCIR_MEM_MATERIALIZED || !t->producer) continue;
        json_t *ck = json_array();
        json_array_append_new(ck, legality("consumed_inside_region", false,
            mcir_arena_printf(c->p->arena, "'%s' is marked %s but is read outside kernel %s "
                              "(or is a graph output), so it is stored in memory", t->name,
                              mcir_memory_state_name(t->memory_state), k->name)));
        json_t *r = json_object();
        json_object_set_new(r, "stage", json_string("plan"));
        json_object_set_new(r, "rule", json_string("memory_state"));
        json_object_set_new(r, "property", json_null());
        json_object_set_new(r, "anchor", json_string(t->producer->name));
        json_object_set_new(r, "matched", json_pack("[s]", t->producer->name));
        json_object_set_new(r, "legality", ck);
        json_object_set_new(r, "decision", json_string("rejected"));
        mcir_trace_append(c->trace, r);
    }
}

mcir_plan *mcir_plan_build(const mcir_graph *g, const mcir_target *target, mcir_trace *trace,
                           mcir_diag *d) {
    MCIR_ASSERT(g && target);
    mcir_arena *a = mcir_arena_new();
    mcir_plan *p = mcir_arena_alloc(a, sizeof *p);
    p->arena = a;
    p->graph = g;
    p->target = target;
    size_t nt = (size_t)g->n_tensors + 1, nn = (size_t)g->n_nodes + 1;
    p->first_use = mcir_arena_alloc(a, nt * sizeof *p->first_use);
    p->last_use = mcir_arena_alloc(a, nt * sizeof *p->last_use);
    p->alias_root = mcir_arena_alloc(a, nt * sizeof *p->alias_root);
    p->alias_nodes = mcir_arena_alloc(a, nn * sizeof *p->alias_nodes);
    for (int t = 0; t < g->n_tensors; t++) {
        MCIR_ASSERT(g->tensors[t]->id == t);
        p->alias_root[t] = g->tensors[t];
    }

    part_ctx c = {.g = g, .p = p, .trace = trace, .d = d};
    c.role = mcir_arena_alloc(a, nn * sizeof *c.role);
    c.unit_of = mcir_arena_alloc(a, nn * sizeof *c.unit_of);
    for (int i = 0; i < g->n_nodes; i++) {
        MCIR_ASSERT(g->nodes[i]->id == i);
        c.unit_of[i] = -1;
    }
    if (!topo_order(&c)) goto fail;
    index_consumers(&c);
    classify(&c);

    /* regions: groups, single nodes; folded-out transposes join their producer */
    int n_regions = 0, cap_regions = 0;
    region *regions = NULL;
    for (int i = 0; i < c.n_order; i++) {
        mcir_node *v = c.order[i];
        if (c.role[v->id] != ROLE_KERNEL) continue;
        int u = -1;
        if (v->group >= 0)
            for (int q = 0; q < n_regions; q++)
                if (regions[q].group == v->group) { u = q; break; }
        if (u < 0) {
            regions = mcir_arena_grow(a, regions, &cap_regions, n_regions + 1, sizeof *regions);
            u = n_regions++;
            regions[u] = (region){.group = v->group, .min_pos = c.n_order};
        }
        region_add(a, &regions[u], v, i);
        c.unit_of[v->id] = u;
    }
    for (int i = 0; i < c.n_order; i++) {
        mcir_node *v = c.order[i];
        if (c.role[v->id] != ROLE_FOLD_OUT) continue;
        int u = c.unit_of[v->inputs[0]->producer->id];
        region_add(a, &regions[u], v, i);
        c.unit_of[v->id] = u;
    }

    state_pieces_join(&c, regions, &n_regions);
    batch_pointwise_groups(&c, regions, &n_regions);

    /* order regions: a region runs once every region it reads from ran;
     * among the ready ones, the earliest in the graph order (regions are
     * made in order of their first node, so the first ready one from the
     * first unplaced on — usually that one itself) */
    p->kernels = mcir_arena_alloc(a, ((size_t)n_regions + 1) * sizeof *p->kernels);
    int first_unplaced = 0;
    /* Graphs with ranks: a collective runs on a second stream beside the
     * kernels after it that do not need it (runtime.c), so it is placed as
     * soon as it is ready, and the kernels that wait for it after the ready
     * ones that do not — what there is to overlap. Not with states (a
     * kernel writing over an input other kernels read: only the graph
     * order keeps that). */
    bool overlap = g->ranks > 1;
    for (int i = 0; i < g->n_outputs && overlap; i++) overlap = !g->outputs[i]->state_input;
    uint64_t in_flight = 0;
    int n_colls = 0;
    int *coll_bit = mcir_arena_alloc(a, ((size_t)n_regions + 1) * sizeof *coll_bit);
    char *feeds = mcir_arena_alloc(a, (size_t)n_regions + 1);   /* ancestors of collective feeds_of */
    int *stack = mcir_arena_alloc(a, ((size_t)n_regions + 1) * sizeof *stack);
    int feeds_of = -2;
    for (int u = 0; u < n_regions; u++) coll_bit[u] = -1;
    for (int placed = 0; placed < n_regions; placed++) {
        /* the first ready region in graph order; with overlap, the first
         * ready collective, else the first ready region that waits for no
         * collective in flight, else the first ready one */
        int pick = -1, free_pick = -1, coll_pick = -1, feed_pick = -1;
        uint64_t colls_of[4] = {0, 0, 0, 0};
        while (regions[first_unplaced].placed) first_unplaced++;
        if (overlap && !in_flight) {
            /* nothing to overlap yet: the regions the next collective (in
             * graph order) needs first, the others kept for its flight */
            int next = -1;
            for (int u = first_unplaced; u < n_regions && next < 0; u++)
                if (!regions[u].placed && is_collective_op(regions[u].nodes[0]->op)) next = u;
            if (next != feeds_of) {
                feeds_of = next;
                memset(feeds, 0, (size_t)n_regions);
                int top = 0;
                if (next >= 0) stack[top++] = next;
                while (top > 0) {
                    int u = stack[--top];
                    for (int i = 0; i < regions[u].n; i++)
                        for (int j = 0; j < regions[u].nodes[i]->n_inputs; j++) {
                            int w = producing_region(&c, regions[u].nodes[i]->inputs[j]);
                            if (w >= 0 && w != u && !regions[w].placed && !feeds[w]) {
                                feeds[w] = 1;
                                stack[top++] = w;
                            }
                        }
                }
            }
        }
        for (int u = first_unplaced; u < n_regions && coll_pick < 0; u++) {
            if (regions[u].placed) continue;
            bool ready = true;
            uint64_t colls = 0;
            for (int i = 0; i < regions[u].n && ready; i++) {
                mcir_node *v = regions[u].nodes[i];
                for (int j = 0; j < v->n_inputs && ready; j++) {
                    int w = producing_region(&c, v->inputs[j]);
                    if (w >= 0 && w != u && !regions[w].placed) ready = false;
                    else if (w >= 0 && w != u)
                        colls |= regions[w].colls | (coll_bit[w] >= 0 ? 1ull << coll_bit[w] : 0);
                }
            }
            if (!ready) continue;
            if (pick < 0) {
                pick = u;
                colls_of[0] = colls;
                if (!overlap) break;
            }
            if (free_pick < 0 && !(colls & in_flight)) {
                free_pick = u;
                colls_of[1] = colls;
            }
            if (is_collective_op(regions[u].nodes[0]->op)) {
                coll_pick = u;
                colls_of[2] = colls;
            }
            if (feed_pick < 0 && feeds_of >= 0 && feeds[u]) {
                feed_pick = u;
                colls_of[3] = colls;
            }
        }
        if (overlap && pick >= 0) {
            int which = coll_pick >= 0 ? 2 : in_flight && free_pick >= 0 ? 1 : !in_flight && feed_pick >= 0 ? 3 : 0;
            pick = which == 2 ? coll_pick : which == 1 ? free_pick : which == 3 ? feed_pick : pick;
            regions[pick].colls = colls_of[which];
            in_flight &= ~colls_of[which];   /* joined */
            if (which == 2) {
                coll_bit[pick] = n_colls++ % 64;
                in_flight |= 1ull << coll_bit[pick];
            }
        }
        if (pick < 0) {
            for (int u = 0; u < n_regions; u++)
                if (!regions[u].placed && regions[u].group >= 0) {
                    mcir_error(d, node_loc(regions[u].nodes[0]),
                               "fusion group %d (node '%s' and %d more) cannot be one kernel: "
                               "a node outside the group lies between its members",
                               regions[u].group, regions[u].nodes[0]->name, regions[u].n - 1);
                    break;
                }
            goto fail;
        }
        regions[pick].placed = true;
        sort_pos = c.pos;
        qsort(regions[pick].nodes, (size_t)regions[pick].n, sizeof *regions[pick].nodes,
              cmp_by_pos);
        mcir_kernel_plan *k = &p->kernels[p->n_kernels];
        k->id = p->n_kernels;
        build_kernel(&c, k, &regions[pick], pick);
        p->n_kernels++;
    }
    plan_states(&c);

    for (int k = 0; k < p->n_kernels; k++) {
        if (!mcir_plan_choose_tiling(p, &p->kernels[k], d)) goto fail;
        trace_kernel(&c, &p->kernels[k]);
        trace_stored_states(&c, &p->kernels[k]);
    }
    liveness(p);
    return p;
fail:
    mcir_arena_free(a);
    return NULL;
}

void mcir_plan_free(mcir_plan *p) {
    if (p) mcir_arena_free(p->arena);
}

/* ------------------------------------------------------------- verifier */

/* Checks the plan against the graph without trusting the partition code:
 * every live node is in a kernel, an alias, or folded into a kernel that
 * lists it; every tensor is written by one kernel at most; every read is
 * an input, a weight, or written by an earlier kernel (through aliases);
 * every graph output is written; tiles fit the target. */
bool mcir_plan_verify(const mcir_plan *p, mcir_diag *d) {
    const mcir_graph *g = p->graph;
    mcir_loc loc = {g->path, 0, 0};
    int errors = 0;
    int *written_by = malloc(((size_t)g->n_tensors + 1) * sizeof *written_by);
    int *covered = calloc((size_t)g->n_nodes + 1, sizeof *covered);
    MCIR_ASSERT(written_by && covered);
    for (int t = 0; t < g->n_tensors; t++) written_by[t] = -1;
    for (int i = 0; i < p->n_alias_nodes; i++) covered[p->alias_nodes[i]->id]++;
    for (int k = 0; k < p->n_kernels; k++) {
        const mcir_kernel_plan *kp = &p->kernels[k];
        if (kp->id != k) {
            mcir_error(d, loc, "kernel %s: id %d at position %d", kp->name, kp->id, k);
            errors++;
        }
        for (int i = 0; i < kp->n_nodes; i++) covered[kp->nodes[i]->id] = 1;
        for (int i = 0; i < kp->n_reads; i++) {
            const mcir_tensor *r = p->alias_root[kp->reads[i]->id];
            bool external = r->kind == MCIR_TENSOR_INPUT || r->kind == MCIR_TENSOR_WEIGHT;
            if (!external && (written_by[r->id] < 0 || written_by[r->id] >= k)) {
                mcir_error(d, loc, "kernel %s reads '%s' before any kernel writes it", kp->name,
                           kp->reads[i]->name);
                errors++;
            }
        }
        for (int i = 0; i < kp->n_writes; i++) {
            int t = kp->writes[i]->id;
            if (written_by[t] >= 0) {
                mcir_error(d, loc, "'%s' is written by kernels %d and %d", kp->writes[i]->name,
                           written_by[t], k);
                errors++;
            }
            written_by[t] = k;
            int r = p->alias_root[t]->id;
            if (written_by[r] < 0) written_by[r] = k;
        }
        if (kp->smem_bytes > p->target->smem_per_block_optin ||
            (int64_t)kp->block[0] * kp->block[1] * kp->block[2] > p->target->max_threads_per_block) {
            mcir_error(d, loc, "kernel %s: block or shared memory exceeds %s", kp->name,
                       p->target->name);
            errors++;
        }
    }
    /* aliases of written tensors count as written */
    for (int t = 0; t < g->n_tensors; t++)
        if (written_by[t] < 0 && written_by[p->alias_root[t]->id] >= 0)
            written_by[t] = written_by[p->alias_root[t]->id];
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead && !covered[i]) {
            mcir_error(d, g->nodes[i]->loc, "node '%s' is in no kernel and no alias",
                       g->nodes[i]->name);
            errors++;
        }
    for (int i = 0; i < g->n_outputs; i++) {
        const mcir_tensor *o = g->outputs[i];
        if (o->producer && written_by[o->id] < 0) {
            mcir_error(d, loc, "graph output '%s' is never written", o->name);
            errors++;
        }
    }
    free(written_by);
    free(covered);
    return errors == 0;
}
