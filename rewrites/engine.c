/*
 * engine.c — the fixpoint driver: pattern detection → legality → property
 * annotation → rewrite, repeated until no rule applies, and the trace of
 * every decision.
 *
 * Order is deterministic: patterns in catalog order; for each, candidate
 * anchors from the last node to the first (so the largest match of a
 * pattern with optional trailing ops, a norm with its γ and β, is found
 * before its prefix); among the structural matches at one anchor, the
 * first whose checks all pass is applied. After every structural rewrite
 * the graph is sorted, compacted, re-inferred and verified (annotations,
 * groups and in-place marks change no structure); after any applied
 * rewrite the scan restarts at the first pattern, so earlier rules keep
 * their priority.
 *
 * The restart does not redo the work: a (pattern, node) pair tried since
 * the last change near that node would give the same answer (a rejection
 * already traced, a near miss already noted), so the engine keeps a dirty
 * mark per pair and tries only the marked ones, in the same order. A
 * rewrite marks the nodes it matched or made, their producers and
 * consumers, everything downstream of those within the depth of the
 * largest pattern (a match reaches that far up from its anchor), and every
 * member of a fusion group that holds a non-elementwise op (groupable looks
 * at whole groups). Each pass is then proportional to what changed.
 *
 * Requires: g sorted and inferred. Provides: g rewritten, sorted, inferred,
 * verified; properties and memory states set; trace records appended.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "rewrites/rewrites-impl.h"

#define MAX_APPLIED 100000
#define DETAIL_SIZE 512

typedef struct engine {
    mcir_graph *g;
    const mcir_catalog *c;
    const mcir_target *target;
    mcir_trace *trace;
    mcir_diag *d;
    /* keys of rejections already traced: a hash set (cap_seen a power of 2) */
    int n_seen, cap_seen;
    char **seen;
    /* near misses, traced at the end if their nodes were not rewritten */
    int n_misses, cap_misses;
    struct near_miss *misses;
    bool failed;
    /* the worklist: dirty[id * n_patterns + pattern] */
    int n_patterns, depth;
    int cap_nodes;
    unsigned char *dirty;
    int *n_dirty;        /* per pattern */
    int *top;            /* per pattern: nothing dirty above this position */
    /* consumers of each tensor (by tensor id), valid between changes of
     * structure */
    int *cons_start;
    mcir_node **cons;
    int n_indexed;       /* tensors the index covers */
    int *stamp, stamp_now;   /* per node id, for the closure walk */
    /* nodes the last applied rewrite matched or made */
    int n_touched;
    mcir_node *touched[2 * MCIR_ACTION_MAX_RESULTS + 64];
    bool garbage;        /* the graph may hold dead nodes or unused tensors */
    /* fusion groups known to hold a non-elementwise op, by group id, and
     * the groups a fuse_group rewrite merged (read before it ran) */
    unsigned char *group_compute;
    int cap_groups;
    int n_merged;
    int merged[2 * MCIR_ACTION_MAX_RESULTS + 64];
    mcir_action last_action;
    const mcir_rewrite_options *opt;
    mcir_rewrite_stats stats;
    /* the states structural rewrites left behind: a signature of each
     * rewritten region before and after (open addressing, cap a power of 2)
     * and the rule and anchor that made it, to find rules that undo each
     * other; and (pattern, region) pairs refused for reproducing their
     * match, so they are not tried again */
    int n_states, cap_states;
    struct region_state *states;
} engine;

typedef struct region_state {
    uint64_t sig;            /* 0: empty slot */
    int pattern;             /* refused pairs: the pattern; states: -1 */
    const char *rule, *anchor;
    int seq;                 /* the applied rewrite that made it (1-based) */
} region_state;

/* A near miss is kept as the matcher's facts and becomes a record only at
 * the end, if its nodes survived and a trace wants it. */
typedef struct near_miss {
    const mcir_pattern *p;
    const mcir_node *candidate;
    mcir_match_miss miss;
} near_miss;

/* The state of one anchor's enumeration. */
typedef struct attempt {
    engine *e;
    const mcir_pattern *p;
    mcir_node *candidate;
    bool applied;
    bool done;          /* some match here is already in the rule's state */
    /* the best rejected match: fewest failed checks, earliest on ties */
    json_t *best;
    int best_failed;
} attempt;

static uint64_t key_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Whether a rejection with this key was traced already; remembers it. An
 * open-addressing set: every candidate of every pass asks. */
static bool seen_before(engine *e, const char *key) {
    if (2 * (e->n_seen + 1) > e->cap_seen) {
        int cap = e->cap_seen ? 2 * e->cap_seen : 256;
        char **table = calloc((size_t)cap, sizeof *table);
        MCIR_ASSERT(table);
        for (int i = 0; i < e->cap_seen; i++) {
            if (!e->seen[i]) continue;
            size_t h = (size_t)(key_hash(e->seen[i]) & (uint64_t)(cap - 1));
            while (table[h]) h = (h + 1) & (size_t)(cap - 1);
            table[h] = e->seen[i];
        }
        free(e->seen);
        e->seen = table;
        e->cap_seen = cap;
    }
    size_t h = (size_t)(key_hash(key) & (uint64_t)(e->cap_seen - 1));
    for (; e->seen[h]; h = (h + 1) & (size_t)(e->cap_seen - 1))
        if (strcmp(e->seen[h], key) == 0) return true;
    e->seen[h] = strdup(key);
    MCIR_ASSERT(e->seen[h]);
    e->n_seen++;
    return false;
}

/* ------------------------------------------------------ region states */

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0x100000001b3ull;
}

static uint64_t attr_hash(const mcir_attr *a) {
    uint64_t h = key_hash(a->name);
    switch (a->type) {
    case MCIR_ATTR_INT: return mix(h, (uint64_t)a->i);
    case MCIR_ATTR_BOOL: return mix(h, (uint64_t)a->b);
    case MCIR_ATTR_STRING: return mix(h, key_hash(a->s ? a->s : ""));
    case MCIR_ATTR_FLOAT: {
        uint64_t bits;
        memcpy(&bits, &a->f, sizeof bits);
        return mix(h, bits);
    }
    case MCIR_ATTR_INTS:
        for (int i = 0; i < a->n; i++) h = mix(h, (uint64_t)a->ints[i]);
        return h;
    }
    return h;
}

/* The hash of node k of a region: its op and attributes, its inputs (a
 * tensor the region makes by the hash of its maker, any other by name) and
 * the names of the outputs no node of the region reads. Names made inside
 * the region do not count, so "tanh(x) → y" hashes alike however often it
 * is remade. */
static uint64_t node_sig(mcir_node *const *nodes, int n, int k, int depth) {
    const mcir_node *nd = nodes[k];
    uint64_t h = mix(0x84222325cbf29ce4ull, (uint64_t)nd->op + 1);
    for (int i = 0; i < nd->n_attrs; i++) h ^= attr_hash(&nd->attrs[i]);   /* any order */
    for (int i = 0; i < nd->n_inputs; i++) {
        const mcir_tensor *t = nd->inputs[i];
        int from = -1;
        for (int j = 0; j < n && from < 0; j++)
            if (nodes[j] && t->producer == nodes[j]) from = j;
        h = mix(h, from >= 0 && depth < 32 ? node_sig(nodes, n, from, depth + 1)
                                           : key_hash(t->name));
    }
    for (int o = 0; o < nd->n_outputs; o++) {
        const mcir_tensor *t = nd->outputs[o];
        bool inner = false;
        for (int j = 0; j < n && !inner; j++)
            for (int i = 0; nodes[j] && i < nodes[j]->n_inputs && !inner; i++)
                inner = nodes[j]->inputs[i] == t;
        h = mix(h, inner && !t->is_output ? 1 : key_hash(t->name));
    }
    return h;
}

/* A region's signature: its nodes' hashes, in any order. */
static uint64_t region_sig(mcir_node *const *nodes, int n) {
    uint64_t sum = 0, x = 0;
    for (int k = 0; k < n; k++)
        if (nodes[k] && !nodes[k]->dead) {
            uint64_t h = node_sig(nodes, n, k, 0);
            sum += h;
            x ^= h * 0x2545f4914f6cdd1dull;
        }
    uint64_t s = mix(sum, x);
    return s ? s : 1;
}

static region_state *state_find(engine *e, uint64_t sig, int pattern) {
    if (!e->cap_states) return NULL;
    size_t mask = (size_t)e->cap_states - 1;
    for (size_t h = (size_t)(sig ^ (uint64_t)(pattern + 1)) & mask; e->states[h].sig;
         h = (h + 1) & mask)
        if (e->states[h].sig == sig && e->states[h].pattern == pattern) return &e->states[h];
    return NULL;
}

static void state_add(engine *e, uint64_t sig, int pattern, const char *rule,
                      const char *anchor, int seq) {
    if (state_find(e, sig, pattern)) return;
    if (2 * (e->n_states + 1) > e->cap_states) {
        int cap = e->cap_states ? 2 * e->cap_states : 256;
        region_state *t = calloc((size_t)cap, sizeof *t);
        MCIR_ASSERT(t);
        for (int i = 0; i < e->cap_states; i++) {
            region_state *r = &e->states[i];
            if (!r->sig) continue;
            size_t h = (size_t)(r->sig ^ (uint64_t)(r->pattern + 1)) & (size_t)(cap - 1);
            while (t[h].sig) h = (h + 1) & (size_t)(cap - 1);
            t[h] = *r;
        }
        free(e->states);
        e->states = t;
        e->cap_states = cap;
    }
    size_t mask = (size_t)e->cap_states - 1;
    size_t h = (size_t)(sig ^ (uint64_t)(pattern + 1)) & mask;
    while (e->states[h].sig) h = (h + 1) & mask;
    e->states[h] = (region_state){sig, pattern, rule, anchor, seq};
    e->n_states++;
}

static int pattern_index(const engine *e, const mcir_pattern *p) {
    for (int i = 0; i < e->n_patterns; i++)
        if (mcir_catalog_pattern(e->c, i) == p) return i;
    return -1;
}

static const char *origin_of(mcir_graph *g, const mcir_match *m) {
    size_t len = 1;
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i]) len += strlen(m->nodes[i]->name) + 1;
    char *s = mcir_arena_alloc(g->arena, len);
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i]) {
            if (*s) strcat(s, ",");
            strcat(s, m->nodes[i]->name);
        }
    return s;
}

/* Actions that compute new constants from the values of the weights
 * they match and build one constant for every rank (the conv folds and
 * reorders). A sharded weight's values differ between ranks, so they do
 * not apply to it (yet): true with why. (The horizontal GEMM, the paired
 * epilogue and the gamma fold build each rank's constant from its own
 * parts: rewrites/actions.c, "constants of sharded weights".) */
static bool reads_sharded_constant(mcir_action a, const mcir_match *m, char *why, size_t n) {
    switch (a) {
    case MCIR_ACTION_FOLD_CONV_AFFINE: case MCIR_ACTION_CONV_AS_MATMUL: case MCIR_ACTION_CONV_TAP_MAJOR: break;
    default: return false;
    }
    for (int i = 0; i < m->n_nodes; i++)
        for (int j = 0; m->nodes[i] && j < m->nodes[i]->n_inputs; j++) {
            const mcir_tensor *t = m->nodes[i]->inputs[j];
            if (t->kind == MCIR_TENSOR_WEIGHT && t->shard_axis >= 0) {
                snprintf(why, n, "'%s' is sharded across %d ranks (axis %d): %s builds one constant from "
                         "its values, and each rank holds other values; not done for sharded weights yet",
                         t->name, t->shard_parts, t->shard_axis, mcir_action_descs[a].name);
                return true;
            }
        }
    return false;
}

static json_t *record_new(const attempt *at, const mcir_match *m) {
    const mcir_pattern *p = at->p;
    json_t *r = json_object();
    json_object_set_new(r, "stage", json_string("rewrite"));
    json_object_set_new(r, "rule", json_string(p->name));
    json_object_set_new(r, "property", json_string(p->property->name));
    if (p->n_properties > 1) {
        json_t *all = json_array();
        for (int i = 0; i < p->n_properties; i++)
            json_array_append_new(all, json_string(p->properties[i]->name));
        json_object_set_new(r, "properties", all);
    }
    json_object_set_new(r, "action", json_string(mcir_action_descs[p->action].name));
    const mcir_node *anchor = at->candidate;
    if (m && m->nodes[0]) anchor = m->nodes[0];
    json_object_set_new(r, "anchor", json_string(anchor->name));
    json_t *matched = json_array();
    for (int i = 0; m && i < m->n_nodes; i++)
        if (m->nodes[i]) json_array_append_new(matched, json_string(m->nodes[i]->name));
    json_object_set_new(r, "matched", matched);
    return r;
}

static void legality_add(json_t *list, const char *check, bool ok, const char *detail) {
    json_t *c = json_object();
    json_object_set_new(c, "check", json_string(check));
    json_object_set_new(c, "ok", json_boolean(ok));
    json_object_set_new(c, "detail", json_string(detail));
    json_array_append_new(list, c);
}

/* The key that makes a rejection worth one trace record: the rule, the
 * nodes and the failed checks (passing details, like a group's size, may
 * change without changing the decision). */
static char *rejection_key(const attempt *at, const json_t *rec) {
    char *m = json_dumps(json_object_get(rec, "matched"), JSON_COMPACT);
    json_t *failed = json_array();
    const json_t *legality = json_object_get(rec, "legality");
    for (size_t i = 0; i < json_array_size(legality); i++) {
        json_t *c = json_array_get(legality, i);
        if (!json_is_true(json_object_get(c, "ok"))) json_array_append(failed, c);
    }
    char *l = json_dumps(failed, JSON_COMPACT);
    json_decref(failed);
    size_t n = strlen(at->p->name) + strlen(m) + strlen(l) + 4;
    char *key = malloc(n);
    MCIR_ASSERT(key);
    snprintf(key, n, "%s|%s|%s", at->p->name, m, l);
    free(m);
    free(l);
    return key;
}

static void trace_rejection(engine *e, const attempt *at, json_t *rec) {
    if (!at->p->trace_rejections) {
        json_decref(rec);
        return;
    }
    char *key = rejection_key(at, rec);
    bool dup = seen_before(e, key);
    free(key);
    if (dup || !e->trace) {
        json_decref(rec);
        return;
    }
    json_object_set_new(rec, "decision", json_string("rejected"));
    mcir_trace_append(e->trace, rec);
}

/* ------------------------------------------------------------ worklist */

static void index_consumers(engine *e) {
    mcir_graph *g = e->g;
    free(e->cons_start);
    free(e->cons);
    e->cons_start = calloc((size_t)g->n_tensors + 1, sizeof *e->cons_start);
    int edges = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead) edges += g->nodes[i]->n_inputs;
    e->cons = malloc((size_t)(edges ? edges : 1) * sizeof *e->cons);
    int *fill = calloc((size_t)g->n_tensors + 1, sizeof *fill);
    MCIR_ASSERT(e->cons_start && e->cons && fill);
    for (int i = 0; i < g->n_nodes; i++) {
        const mcir_node *nd = g->nodes[i];
        if (nd->dead) continue;
        for (int k = 0; k < nd->n_inputs; k++) e->cons_start[nd->inputs[k]->id + 1]++;
    }
    for (int t = 0; t < g->n_tensors; t++) e->cons_start[t + 1] += e->cons_start[t];
    for (int i = 0; i < g->n_nodes; i++) {
        mcir_node *nd = g->nodes[i];
        if (nd->dead) continue;
        for (int k = 0; k < nd->n_inputs; k++) {
            int t = nd->inputs[k]->id;
            e->cons[e->cons_start[t] + fill[t]++] = nd;
        }
    }
    free(fill);
    e->n_indexed = g->n_tensors;
    mcir_graph_index_uses(g, true);   /* for the checks' consumer queries */
    if (!g->groups) mcir_graph_index_groups(g, true);   /* for groupable and fuse_group */
}

/* Sizes the per-node arrays for g->n_nodes; new positions start dirty. */
static void worklist_reserve(engine *e) {
    int n = e->g->n_nodes;
    if (n <= e->cap_nodes) return;
    int cap = e->cap_nodes ? e->cap_nodes : 64;
    while (cap < n) cap *= 2;
    size_t P = (size_t)e->n_patterns;
    e->dirty = realloc(e->dirty, (size_t)cap * P + 1);
    e->stamp = realloc(e->stamp, (size_t)cap * sizeof *e->stamp);
    MCIR_ASSERT(e->dirty && e->stamp);
    memset(&e->dirty[(size_t)e->cap_nodes * P], 0, (size_t)(cap - e->cap_nodes) * P);
    for (int i = e->cap_nodes; i < cap; i++) e->stamp[i] = 0;
    e->cap_nodes = cap;
}

static void mark_dirty(engine *e, const mcir_node *nd) {
    if (nd->dead) return;
    unsigned char *d = &e->dirty[(size_t)nd->id * (size_t)e->n_patterns];
    for (int p = 0; p < e->n_patterns; p++)
        if (!d[p]) {
            d[p] = 1;
            e->n_dirty[p]++;
            if (e->top[p] < nd->id) e->top[p] = nd->id;
        }
}

static void group_note(engine *e, int gid, bool compute) {
    if (gid >= e->cap_groups) {
        int cap = e->cap_groups ? e->cap_groups : 64;
        while (cap <= gid) cap *= 2;
        e->group_compute = realloc(e->group_compute, (size_t)cap);
        MCIR_ASSERT(e->group_compute);
        memset(e->group_compute + e->cap_groups, 0, (size_t)(cap - e->cap_groups));
        e->cap_groups = cap;
    }
    e->group_compute[gid] = compute;
}

static void worklist_init(engine *e) {
    e->n_patterns = mcir_catalog_n_patterns(e->c);
    e->depth = 1;
    for (int p = 0; p < e->n_patterns; p++)
        if (mcir_catalog_pattern(e->c, p)->n_nodes > e->depth)
            e->depth = mcir_catalog_pattern(e->c, p)->n_nodes;
    e->n_dirty = calloc((size_t)e->n_patterns + 1, sizeof *e->n_dirty);
    e->top = malloc(((size_t)e->n_patterns + 1) * sizeof *e->top);
    MCIR_ASSERT(e->n_dirty && e->top);
    for (int p = 0; p < e->n_patterns; p++) e->top[p] = -1;
    worklist_reserve(e);
    if (e->cap_nodes) memset(e->dirty, 0, (size_t)e->cap_nodes * (size_t)e->n_patterns);
    for (int i = 0; i < e->g->n_nodes; i++) {
        e->g->nodes[i]->id = i;
        mark_dirty(e, e->g->nodes[i]);
    }
    for (int i = 0; i < e->g->n_nodes; i++) {
        const mcir_node *nd = e->g->nodes[i];
        if (nd->dead || nd->group < 0) continue;
        bool was = nd->group < e->cap_groups && e->group_compute[nd->group];
        group_note(e, nd->group, was || !(mcir_op_desc_of(nd->op)->flags & MCIR_OPF_ELEMENTWISE));
    }
    index_consumers(e);
}

static void worklist_free(engine *e) {
    free(e->dirty);
    free(e->n_dirty);
    free(e->top);
    free(e->cons_start);
    free(e->cons);
    free(e->stamp);
    free(e->group_compute);
}

/* After nodes moved (sort, compaction): the marks follow their nodes;
 * prev[0..n_prev) is the order before, new nodes are all dirty. */
static void worklist_remap(engine *e, mcir_node **prev, int n_prev) {
    size_t P = (size_t)e->n_patterns;
    unsigned char *old = malloc((size_t)n_prev * P + 1);
    MCIR_ASSERT(old);
    if (n_prev) memcpy(old, e->dirty, (size_t)n_prev * P);
    worklist_reserve(e);
    memset(e->dirty, 1, (size_t)e->g->n_nodes * P);
    for (int j = 0; j < n_prev; j++)
        if (!prev[j]->dead && prev[j]->id < e->g->n_nodes && e->g->nodes[prev[j]->id] == prev[j])
            memcpy(&e->dirty[(size_t)prev[j]->id * P], &old[(size_t)j * P], P);
    free(old);
    for (int p = 0; p < e->n_patterns; p++) {
        e->n_dirty[p] = 0;
        e->top[p] = -1;
    }
    for (int i = 0; i < e->g->n_nodes; i++)
        for (int p = 0; p < e->n_patterns; p++)
            if (e->dirty[(size_t)i * P + (size_t)p]) {
                e->n_dirty[p]++;
                e->top[p] = i;
            }
    index_consumers(e);
}

static mcir_node **order_copy(const mcir_graph *g) {
    mcir_node **prev = malloc(((size_t)g->n_nodes + 1) * sizeof *prev);
    MCIR_ASSERT(prev);
    if (g->n_nodes) memcpy(prev, g->nodes, (size_t)g->n_nodes * sizeof *prev);
    return prev;
}

/* Compaction that keeps the worklist in step. */
static void compact_tracked(engine *e) {
    mcir_graph *g = e->g;
    int n_prev = g->n_nodes;
    mcir_node **prev = order_copy(g);
    for (int i = 0; i < n_prev; i++) g->nodes[i]->id = i;
    mcir_graph_compact(g);
    worklist_remap(e, prev, n_prev);
    free(prev);
    e->garbage = false;
}

static void walk_mark(engine *e, mcir_node *nd, int depth) {
    if (!nd || nd->dead || nd->id >= e->g->n_nodes || e->g->nodes[nd->id] != nd) return;
    if (e->stamp[nd->id] == e->stamp_now) return;
    e->stamp[nd->id] = e->stamp_now;
    mark_dirty(e, nd);
    if (depth <= 0) return;
    for (int k = 0; k < nd->n_outputs; k++) {
        const mcir_tensor *t = nd->outputs[k];
        if (t->id >= e->n_indexed || e->g->tensors[t->id] != t) continue;
        for (int c = e->cons_start[t->id]; c < e->cons_start[t->id + 1]; c++)
            walk_mark(e, e->cons[c], depth - 1);
    }
}

/* Marks what the last rewrite may have changed the answer for. */
static void mark_touched(engine *e) {
    mcir_graph *g = e->g;
    int n_seed = 0, cap_seed = 4 * e->n_touched + 16;
    mcir_node **seed = malloc((size_t)cap_seed * sizeof *seed);
    MCIR_ASSERT(seed);
#define SEED(x)                                                             \
    do {                                                                    \
        if (n_seed == cap_seed) {                                           \
            cap_seed *= 2;                                                  \
            seed = realloc(seed, (size_t)cap_seed * sizeof *seed);          \
            MCIR_ASSERT(seed);                                              \
        }                                                                   \
        seed[n_seed++] = (x);                                               \
    } while (0)
    bool whole_groups = false;
    for (int i = 0; i < e->n_touched; i++) {
        mcir_node *nd = e->touched[i];
        SEED(nd);
        for (int k = 0; k < nd->n_inputs; k++)
            if (nd->inputs[k]->producer) SEED(nd->inputs[k]->producer);
        if (!nd->dead && nd->group >= 0) whole_groups = true;
    }
    /* Annotations and in-place marks leave groups as they were. A
     * fuse_group merge holds a non-elementwise op if a merged group or a
     * matched node did: known without walking the graph (an elementwise
     * chain fuses one node at a time). Other actions: look. */
    if (e->last_action == MCIR_ACTION_ANNOTATE_ONLY || e->last_action == MCIR_ACTION_INPLACE)
        whole_groups = false;
    if (whole_groups && e->last_action == MCIR_ACTION_FUSE_GROUP) {
        bool compute = false;
        int gid = -1;
        for (int i = 0; i < e->n_merged; i++)
            compute |= e->merged[i] < e->cap_groups && e->group_compute[e->merged[i]];
        for (int i = 0; i < e->n_touched; i++) {
            const mcir_node *nd = e->touched[i];
            if (nd->dead) continue;
            if (nd->group >= 0) gid = nd->group;
            compute |= !(mcir_op_desc_of(nd->op)->flags & MCIR_OPF_ELEMENTWISE);
        }
        if (gid >= 0) group_note(e, gid, compute);
        whole_groups = compute;
    }
    if (whole_groups) {
        /* groupable looks at every member of the groups in a match: if a
         * touched group holds an op that is not elementwise, all of it */
        for (int i = 0; i < e->n_touched; i++) {
            mcir_node *nd = e->touched[i];
            if (nd->dead || nd->group < 0) continue;
            int gid = nd->group;
            int n_members = mcir_graph_group_size(g, gid);
            const mcir_node **members = malloc((size_t)(n_members + 1) * sizeof *members);
            MCIR_ASSERT(members);
            n_members = mcir_graph_group_members(g, &gid, 1, members, n_members);
            bool compute = false;
            for (int j = 0; j < n_members && !compute; j++)
                compute = !(mcir_op_desc_of(members[j]->op)->flags & MCIR_OPF_ELEMENTWISE);
            group_note(e, gid, compute);
            for (int j = 0; j < n_members && compute; j++) {
                mcir_node *m = (mcir_node *)members[j];
                SEED(m);
                for (int k = 0; k < m->n_inputs; k++)
                    if (m->inputs[k]->producer) SEED(m->inputs[k]->producer);
            }
            free(members);
        }
    }
#undef SEED
    e->stamp_now++;
    for (int i = 0; i < n_seed; i++) walk_mark(e, seed[i], e->depth + 1);
    free(seed);
    e->n_touched = 0;
}

/* Sort, compact, infer and verify after a change; false on a broken
 * invariant (reported). */
static bool settle(engine *e, const char *rule) {
    mcir_graph *g = e->g;
    int before = e->d->n_errors;
    int n_prev = g->n_nodes;
    mcir_node **prev = order_copy(g);
    for (int i = 0; i < n_prev; i++) g->nodes[i]->id = i;
    bool sorted = mcir_graph_sort(g, e->d);
    if (sorted) {
        mcir_graph_compact(g);
        e->garbage = false;
    }
    if (e->dirty) worklist_remap(e, prev, n_prev);
    free(prev);
    if (!sorted) goto broken;
    if (!mcir_graph_infer(g, e->d) || !mcir_graph_verify(g, e->d)) goto broken;
    return true;
broken:
    mcir_error(e->d, (mcir_loc){g->path, 0, 0},
               "internal: rewrite rule '%s' left an invalid graph (%d problems above)", rule,
               e->d->n_errors - before);
    e->failed = true;
    return false;
}

/* Whether a live node reads t, after an action that appended nodes from
 * position `built` on: actions never rewire the inputs of nodes they did
 * not build, so the readers are t's indexed consumers and new nodes. */
static bool has_reader(const engine *e, const mcir_tensor *t, int built) {
    const mcir_graph *g = e->g;
    if (t->id < 0 || t->id >= e->n_indexed || g->tensors[t->id] != t)
        return mcir_graph_consumers(g, t, NULL, 0) > 0;
    for (int c = e->cons_start[t->id]; c < e->cons_start[t->id + 1]; c++)
        if (!e->cons[c]->dead) return true;
    for (int i = built; i < g->n_nodes; i++) {
        const mcir_node *n = g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] == t) return true;
    }
    return false;
}

/* Whether a live node still needs one of n's outputs (or it is a graph's). */
static bool outputs_needed(const engine *e, const mcir_node *n, int built) {
    for (int k = 0; k < n->n_outputs; k++) {
        const mcir_tensor *t = n->outputs[k];
        if (t->producer != n) continue;
        if (t->is_output || has_reader(e, t, built)) return true;
    }
    return false;
}

/* Removes matched nodes whose outputs were taken over or are no longer
 * used, until none is left to remove; then the nodes that computed only
 * their inputs (every op is pure: a causal mask the graph built for the
 * attention that now takes `causal` instead). */
static void remove_unused(const engine *e, const mcir_match *m, int built) {
    bool changed = true;
    while (changed) {
        changed = false;
        for (int i = 0; i < m->n_nodes; i++) {
            mcir_node *n = m->nodes[i];
            if (!n || n->dead || outputs_needed(e, n, built)) continue;
            n->dead = true;
            changed = true;
        }
    }
    mcir_node *work[64];
    int nw = 0;
    for (int i = 0; i < m->n_nodes; i++)
        if (m->nodes[i] && m->nodes[i]->dead && nw < 64) work[nw++] = m->nodes[i];
    while (nw > 0) {
        const mcir_node *n = work[--nw];
        for (int k = 0; k < n->n_inputs; k++) {
            mcir_node *p = n->inputs[k]->producer;
            if (!p || p->dead || outputs_needed(e, p, built)) continue;
            p->dead = true;
            if (nw < 64) work[nw++] = p;
        }
    }
}

static bool tensor_removed(const mcir_tensor *t) {
    return !t->producer || t->producer->dead;
}

/* Memory states the pattern declares: set on tensors that stay (fusion
 * groups), listed in the record for every tensor the rule affects. */
static void apply_states(const mcir_pattern *p, const mcir_match *m, bool structural,
                         json_t *rec) {
    static const char *const keys[] = {"materialized", "streaming", "recomputable"};
    json_t *lists[3] = {json_array(), json_array(), json_array()};
    for (int i = 0; i < p->n_states; i++) {
        mcir_tensor *t = m->vars[p->states[i].var];
        if (!t || t->kind == MCIR_TENSOR_INPUT || t->kind == MCIR_TENSOR_WEIGHT || t->is_output)
            continue;
        bool removed = structural && tensor_removed(t);
        if (structural && !removed) continue;   /* still needed in full elsewhere */
        json_t *list = lists[p->states[i].state];
        bool dup = false;
        for (size_t k = 0; k < json_array_size(list); k++)
            if (strcmp(json_string_value(json_array_get(list, k)), t->name) == 0) dup = true;
        if (dup) continue;
        json_array_append_new(list, json_string(t->name));
        if (!removed) t->memory_state = p->states[i].state;
    }
    for (int s = 0; s < 3; s++) {
        if (json_array_size(lists[s])) json_object_set_new(rec, keys[s], lists[s]);
        else json_decref(lists[s]);
    }
}

static bool on_match(const mcir_match *m, void *ctx) {
    attempt *at = ctx;
    engine *e = at->e;
    const mcir_pattern *p = at->p;
    const mcir_action_impl *impl = &mcir_action_impls[p->action];
    mcir_action_ctx ac;
    memset(&ac, 0, sizeof ac);
    ac.g = e->g;
    ac.p = p;
    ac.m = m;
    ac.params = p->action_params;
    if (impl->done && impl->done(&ac)) {
        at->done = true;   /* nothing left to do here, nothing to explain */
        return true;
    }

    json_t *rec = record_new(at, m);
    json_t *legality = json_array();
    int failed = 0;
    char sharded[DETAIL_SIZE] = "";
    if (reads_sharded_constant(p->action, m, sharded, sizeof sharded)) {
        legality_add(legality, "unsharded_constants", false, sharded);
        failed++;
    }
    mcir_check_ctx cc = {m, e->target};
    for (int i = 0; i < p->n_checks; i++) {
        char detail[DETAIL_SIZE] = "";
        bool ok = p->checks[i].check->fn(&cc, p->checks[i].params, detail, sizeof detail);
        legality_add(legality, p->checks[i].check->name, ok, detail);
        failed += !ok;
    }
    json_object_set_new(rec, "legality", legality);
    uint64_t before = 0;
    int pi = -1;
    if (failed == 0 && impl->structural) {
        before = region_sig(m->nodes, m->n_nodes);
        pi = pattern_index(e, p);
        if (state_find(e, before, pi)) {   /* refused before: it would remake itself */
            json_decref(rec);
            at->done = true;
            return true;
        }
    }
    if (failed == 0) {
        ac.origin_nodes = origin_of(e->g, m);
        /* a structural action rewires inputs: the use index goes */
        if (impl->structural) mcir_graph_index_uses(e->g, false);
        e->n_merged = 0;
        for (int i = 0; i < m->n_nodes; i++)
            if (m->nodes[i] && m->nodes[i]->group >= 0) e->merged[e->n_merged++] = m->nodes[i]->group;
        e->last_action = p->action;
        int n_built = e->g->n_nodes;
        bool ok = impl->apply(&ac);
        if (!ok && impl->structural) mcir_graph_index_uses(e->g, true);
        bool refused = false;
        if (ok && impl->structural) {
            uint64_t after = region_sig(ac.results, ac.n_results);
            const char *anchor = m->nodes[0] ? m->nodes[0]->name : at->candidate->name;
            if (after == before) {
                /* the same ops on the same tensors: the graph stays as good
                 * as it was; say so once, and never try this pair again */
                refused = true;
                state_add(e, before, pi, p->name, anchor, 0);
                e->stats.refused++;
            } else {
                const region_state *back = state_find(e, after, -1);
                if (back) {
                    mcir_error(e->d, (mcir_loc){e->g->path, 0, 0},
                               "rules do not reach a fixpoint: '%s' at '%s' (rewrite %d) brings "
                               "back the subgraph that '%s' rewrote at '%s' (rewrite %d); the "
                               "rules undo each other (give one a condition, or remove it)",
                               p->name, anchor, e->stats.applied + 1, back->rule, back->anchor,
                               back->seq);
                    e->failed = true;
                }
                state_add(e, before, -1, p->name, anchor, e->stats.applied + 1);
                state_add(e, after, -1, p->name, anchor, e->stats.applied + 1);
            }
        }
        if (ok) {
            at->applied = true;
            if (!refused) {
                e->stats.applied++;
                switch (p->action) {
                case MCIR_ACTION_FUSE_GROUP: e->stats.groups++; break;
                case MCIR_ACTION_ANNOTATE_ONLY: e->stats.annotations++; break;
                case MCIR_ACTION_INPLACE: e->stats.in_place++; break;
                default: e->stats.structural += impl->structural; break;
                }
            }
            e->n_touched = 0;
            for (int i = 0; i < m->n_nodes; i++)
                if (m->nodes[i]) e->touched[e->n_touched++] = m->nodes[i];
            for (int i = 0; i < ac.n_results; i++) e->touched[e->n_touched++] = ac.results[i];
            for (int i = 0; i < ac.n_results && !refused; i++)
                for (int k = 0; k < p->n_properties; k++)
                    mcir_node_add_property(e->g, ac.results[i], p->properties[k]->name);
            if (impl->structural) remove_unused(e, m, n_built);
            if (refused) {
                char check[96];
                snprintf(check, sizeof check, "rewrite:%s", mcir_action_descs[p->action].name);
                legality_add(legality, check, false,
                             "the result is the subgraph it matched: the rule changes nothing "
                             "and would apply forever");
                json_object_set_new(rec, "decision", json_string("rejected"));
                if (e->trace && p->trace_rejections) mcir_trace_append(e->trace, rec);
                else json_decref(rec);
                return true;
            }
            json_object_set_new(rec, "decision", json_string("applied"));
            json_t *result = json_array();
            for (int i = 0; i < ac.n_results; i++)
                json_array_append_new(result, json_string(ac.results[i]->name));
            json_object_set_new(rec, "result", result);
            apply_states(p, m, impl->structural, rec);
            if (p->property->lowering_strategy)
                json_object_set_new(rec, "lowering", json_string(p->property->lowering_strategy));
            if (e->trace) mcir_trace_append(e->trace, rec);
            else json_decref(rec);
            return true;
        }
        char check[96];
        snprintf(check, sizeof check, "rewrite:%s", mcir_action_descs[p->action].name);
        legality_add(legality, check, false, ac.fail);
        failed = 1;
    }
    if (!at->best || failed < at->best_failed) {
        json_decref(at->best);
        at->best = rec;
        at->best_failed = failed;
    } else {
        json_decref(rec);
    }
    return false;
}

static int required_nodes(const mcir_pattern *p) {
    int k = 0;
    for (int i = 0; i < p->n_nodes; i++) k += !p->nodes[i].optional;
    return k;
}

/* A structure that got most of the way: worth a "why not" record. */
static void note_near_miss(engine *e, attempt *at, const mcir_match_miss *miss) {
    int req = required_nodes(at->p);
    int need = req / 2 + 1;
    if (need < 2) need = 2;
    if (e->opt && e->opt->all_near_misses) {
        /* every match that got past its anchor, optional nodes counted */
        if (miss->node < 0 || miss->matched < 2) return;
    } else if (miss->node < 0 || miss->required_matched < need) {
        return;
    }
    if (!at->p->trace_rejections || !e->trace) return;   /* nobody would read it */
    if (e->n_misses == e->cap_misses) {
        e->cap_misses = e->cap_misses ? 2 * e->cap_misses : 16;
        e->misses = realloc(e->misses, (size_t)e->cap_misses * sizeof *e->misses);
        MCIR_ASSERT(e->misses);
    }
    near_miss *nm = &e->misses[e->n_misses++];
    nm->p = at->p;
    nm->candidate = at->candidate;
    nm->miss = *miss;
}

static json_t *near_miss_record(engine *e, const near_miss *nm) {
    attempt at = {.e = e, .p = nm->p, .candidate = (mcir_node *)nm->candidate};
    const mcir_match_miss *miss = &nm->miss;
    json_t *rec = record_new(&at, NULL);
    json_t *matched = json_object_get(rec, "matched");
    for (int i = 0; i < 32 && miss->names[i]; i++)
        json_array_append_new(matched, json_string(miss->names[i]));
    if (json_array_size(matched))
        json_object_set_new(rec, "anchor", json_string(miss->names[0]));
    char detail[DETAIL_SIZE];
    mcir_match_miss_detail(nm->p, miss, detail, sizeof detail);
    json_t *legality = json_array();
    legality_add(legality, "structure", false, detail);
    json_object_set_new(rec, "legality", legality);
    return rec;
}

/* A near miss matters only if its nodes survived: a structure another rule
 * rewrote (the tanh GELU the erf rule almost matched) was no miss. */
/* Name regexes: reset their limit counters (start of a run), or trace
 * every one that hit PCRE2's limits (end): a node whose name could not be
 * decided counted as not matching, which would otherwise pass silently. */
static void name_limits(engine *e, bool trace) {
    for (int pi = 0; pi < mcir_catalog_n_patterns(e->c); pi++) {
        const mcir_pattern *p = mcir_catalog_pattern(e->c, pi);
        for (int k = 0; k < p->n_nodes; k++)
            for (int f = 0; f < p->nodes[k].n_forms; f++) {
                const mcir_pattern_form *form = &p->nodes[k].forms[f];
                if (!form->name_limit_hits) continue;
                if (trace && *form->name_limit_hits && e->trace) {
                    json_t *rec = json_object();
                    json_object_set_new(rec, "stage", json_string("rewrite"));
                    json_object_set_new(rec, "rule", json_string(p->name));
                    json_object_set_new(rec, "property", json_string(p->property->name));
                    json_object_set_new(rec, "action",
                                        json_string(mcir_action_descs[p->action].name));
                    json_object_set_new(rec, "anchor", json_string(*form->name_limit_last));
                    json_object_set_new(rec, "matched", json_array());
                    char detail[DETAIL_SIZE];
                    snprintf(detail, sizeof detail,
                             "pattern node '%s': its name regex hit PCRE2's match or depth "
                             "limit on %d node name%s (the last '%s'); they counted as not "
                             "matching — simplify the regex", p->nodes[k].id,
                             *form->name_limit_hits, *form->name_limit_hits == 1 ? "" : "s",
                             *form->name_limit_last);
                    json_t *legality = json_array();
                    legality_add(legality, "name", false, detail);
                    json_object_set_new(rec, "legality", legality);
                    json_object_set_new(rec, "decision", json_string("rejected"));
                    mcir_trace_append(e->trace, rec);
                }
                *form->name_limit_hits = 0;
            }
    }
}

static void flush_near_misses(engine *e) {
    for (int i = 0; i < e->n_misses; i++) {
        near_miss *nm = &e->misses[i];
        bool alive = true;
        for (int k = 0; k < 32 && nm->miss.nodes[k]; k++)
            if (nm->miss.nodes[k]->dead) alive = false;
        if (!alive) continue;
        attempt at = {.e = e, .p = nm->p};
        trace_rejection(e, &at, near_miss_record(e, nm));
    }
    free(e->misses);
    e->misses = NULL;
    e->n_misses = e->cap_misses = 0;
}

/* Fusion groups numbered 0, 1, ... in node order. */
static void renumber_groups(mcir_graph *g) {
    int n = g->n_nodes;
    int max = -1;
    for (int i = 0; i < n; i++)
        if (g->nodes[i]->group > max) max = g->nodes[i]->group;
    int *remap = malloc((size_t)(max + 2) * sizeof *remap);
    MCIR_ASSERT(remap);
    for (int i = 0; i <= max; i++) remap[i] = -1;
    int next = 0;
    for (int i = 0; i < n; i++) {
        int gid = g->nodes[i]->group;
        if (gid < 0) continue;
        if (remap[gid] < 0) remap[gid] = next++;
        g->nodes[i]->group = remap[gid];
    }
    free(remap);
}

/* One pass over the dirty candidates of one pattern, last to first; true
 * if it applied one. */
static bool run_pattern(engine *e, int pi) {
    mcir_graph *g = e->g;
    const mcir_pattern *p = mcir_catalog_pattern(e->c, pi);
    bool structural = mcir_action_impls[p->action].structural;
    size_t P = (size_t)e->n_patterns;
    if (e->top[pi] >= g->n_nodes) e->top[pi] = g->n_nodes - 1;
    for (int i = e->top[pi]; i >= 0 && e->n_dirty[pi] > 0; i = e->top[pi]) {
        e->top[pi] = i - 1;
        unsigned char *dirty = &e->dirty[(size_t)i * P + (size_t)pi];
        if (!*dirty) continue;
        *dirty = 0;
        e->n_dirty[pi]--;
        mcir_node *cand = g->nodes[i];
        if (cand->dead) continue;
        int n_nodes = g->n_nodes, n_tensors = g->n_tensors;
        attempt at = {.e = e, .p = p, .candidate = cand};
        mcir_match_miss miss;
        int found = mcir_pattern_match(p, g, cand, on_match, &at, &miss);
        if (g->n_nodes != n_nodes || g->n_tensors != n_tensors) {
            /* nodes or tensors appended by an action: new work */
            e->garbage = true;
            worklist_reserve(e);
            for (int k = n_nodes; k < g->n_nodes; k++) {
                g->nodes[k]->id = k;
                mark_dirty(e, g->nodes[k]);
            }
            if (!at.applied) index_consumers(e);
        }
        if (at.applied) {
            json_decref(at.best);
            /* annotations, groups and in-place marks leave the structure
             * as it was: only structural rewrites need the graph settled */
            if (structural) {
                if (!settle(e, p->name)) return true;
            }
            mark_touched(e);
            return true;
        } else if (at.best && at.done) {
            json_decref(at.best);
        } else if (at.best) {
            trace_rejection(e, &at, at.best);
            if (structural && e->garbage) compact_tracked(e);
        } else if (found == 0) {
            note_near_miss(e, &at, &miss);
        }
    }
    return false;
}

bool mcir_rewrite_run(mcir_graph *g, const mcir_catalog *c, const mcir_target *target,
                      mcir_trace *trace, mcir_diag *d) {
    return mcir_rewrite_run_ex(g, c, target, trace, NULL, NULL, d);
}

bool mcir_rewrite_run_ex(mcir_graph *g, const mcir_catalog *c, const mcir_target *target,
                         mcir_trace *trace, const mcir_rewrite_options *options,
                         mcir_rewrite_stats *stats, mcir_diag *d) {
    engine e = {.g = g, .c = c, .trace = trace, .d = d, .opt = options};
    int limit = options && options->max_applied > 0 ? options->max_applied : MAX_APPLIED;
    e.target = target ? target : mcir_target_find(MCIR_DEFAULT_ARCH);
    MCIR_ASSERT(e.target);
    int applied = 0;
    bool again = true;
    e.garbage = true;   /* as read: unused weights, say, until compacted */
    worklist_init(&e);
    name_limits(&e, false);
    bool stopped = false;
    while (again && !e.failed) {
        again = false;
        for (int i = 0; i < e.n_patterns && !again && !e.failed && !stopped; i++)
            if (run_pattern(&e, i)) {
                again = true;
                ++applied;
                if (e.stats.applied >= limit && limit < MAX_APPLIED) {
                    stopped = true;   /* on request: the graph as it stands */
                    again = false;
                } else if (applied >= MAX_APPLIED) {
                    mcir_error(d, (mcir_loc){g->path, 0, 0},
                               "rewriting did not reach a fixpoint after %d rewrites", applied);
                    e.failed = true;
                }
            }
    }
    mcir_graph_index_groups(g, false);
    if (!e.failed) {
        renumber_groups(g);
        settle(&e, "(final)");
    }
    worklist_free(&e);
    mcir_graph_index_uses(g, false);
    flush_near_misses(&e);
    name_limits(&e, true);
    for (int i = 0; i < e.cap_seen; i++) free(e.seen[i]);
    free(e.seen);
    free(e.states);
    if (stats) *stats = e.stats;
    return !e.failed;
}

/* ------------------------------------------------------------- human */

static void print_list(FILE *out, const json_t *list) {
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *v = json_array_get(list, i);
        if (json_is_string(v)) {
            fprintf(out, "%s%s", i ? ", " : "", json_string_value(v));
        } else {
            char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            fprintf(out, "%s%s", i ? ", " : "", s ? s : "?");
            free(s);
        }
    }
}

/* Records of every stage share the rewrite fields (rule, anchor, matched,
 * legality, decision, result); a record without them is printed as JSON. */
void mcir_trace_print_human(const mcir_trace *t, FILE *out) {
    for (int i = 0; i < mcir_trace_count(t); i++) {
        const json_t *r = mcir_trace_get(t, i);
        const char *stage = json_string_value(json_object_get(r, "stage"));
        const char *decision = json_string_value(json_object_get(r, "decision"));
        const char *rule = json_string_value(json_object_get(r, "rule"));
        const char *anchor = json_string_value(json_object_get(r, "anchor"));
        long long seq = json_integer_value(json_object_get(r, "seq"));
        if (!rule || !decision) {
            char *s = json_dumps(r, JSON_COMPACT | JSON_PRESERVE_ORDER);
            fprintf(out, "[%lld] %s\n", seq, s ? s : "");
            free(s);
            continue;
        }
        bool rewrite = stage && strcmp(stage, "rewrite") == 0;
        fprintf(out, "[%lld] %s%s%s %s", seq, rewrite || !stage ? "" : stage,
                rewrite || !stage ? "" : " ", decision, rule);
        if (anchor) fprintf(out, " at '%s'", anchor);
        const char *property = json_string_value(json_object_get(r, "property"));
        const char *action = json_string_value(json_object_get(r, "action"));
        const json_t *all = json_object_get(r, "properties");
        if (property) {
            fprintf(out, " (%s", property);
            for (size_t k = 1; k < json_array_size(all); k++)
                fprintf(out, " + %s", json_string_value(json_array_get(all, k)));
            fprintf(out, "%s%s)", action ? " -> " : "", action ? action : "");
        }
        fputc('\n', out);
        const json_t *matched = json_object_get(r, "matched");
        if (json_array_size(matched)) {
            fputs("      matched: ", out);
            print_list(out, matched);
            fputc('\n', out);
        }
        const json_t *legality = json_object_get(r, "legality");
        for (size_t k = 0; k < json_array_size(legality); k++) {
            const json_t *c = json_array_get(legality, k);
            const char *detail = json_string_value(json_object_get(c, "detail"));
            fprintf(out, "      %-4s %-22s %s\n",
                    json_is_true(json_object_get(c, "ok")) ? "ok" : "FAIL",
                    json_string_value(json_object_get(c, "check")), detail ? detail : "");
        }
        static const char *const states[] = {"streaming", "recomputable", "materialized"};
        if (strcmp(decision, "applied") == 0) {
            const json_t *result = json_object_get(r, "result");
            if (json_array_size(result)) {
                fputs("      result: ", out);
                print_list(out, result);
                fputc('\n', out);
            }
            for (int s = 0; s < 3; s++) {
                const json_t *l = json_object_get(r, states[s]);
                if (!json_array_size(l)) continue;
                fprintf(out, "      %s: ", states[s]);
                print_list(out, l);
                fputc('\n', out);
            }
            const json_t *low = json_object_get(r, "lowering");
            if (json_is_string(low)) fprintf(out, "      lowering: %s\n", json_string_value(low));
        }
    }
}
