/*
 * graph.c — building, querying and transforming MCIR graphs: tensors and
 * nodes, attributes with schema defaults, topological order, the verifier,
 * clone and compaction.
 *
 * Invariant: t->producer is the only live node listing t among its
 * outputs; a dead node is never anyone's producer after compaction.
 */
#include <stdlib.h>
#include <string.h>

#include "mcir-impl.h"

/* ------------------------------------------------------------ name hash */

static uint64_t hash_name(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static void hash_insert(mcir_graph *g, mcir_tensor *t) {
    if ((g->n_tensors + 1) * 2 > g->hash_cap) {
        int cap = g->hash_cap ? g->hash_cap * 2 : 64;
        mcir_tensor **h = mcir_arena_alloc(g->arena, (size_t)cap * sizeof *h);
        for (int i = 0; i < g->hash_cap; i++) {
            mcir_tensor *u = g->hash[i];
            if (!u) continue;
            size_t j = hash_name(u->name) & (size_t)(cap - 1);
            while (h[j]) j = (j + 1) & (size_t)(cap - 1);
            h[j] = u;
        }
        g->hash = h;
        g->hash_cap = cap;
    }
    size_t j = hash_name(t->name) & (size_t)(g->hash_cap - 1);
    while (g->hash[j]) j = (j + 1) & (size_t)(g->hash_cap - 1);
    g->hash[j] = t;
}

/* Deletion from linear probing without tombstones: the entries after the
 * hole move back if their home slot allows (Knuth's algorithm R). */
static void hash_remove(mcir_graph *g, const mcir_tensor *t) {
    size_t mask = (size_t)g->hash_cap - 1;
    size_t i = hash_name(t->name) & mask;
    while (g->hash[i] && g->hash[i] != t) i = (i + 1) & mask;
    if (!g->hash[i]) return;
    for (size_t k = (i + 1) & mask; g->hash[k]; k = (k + 1) & mask) {
        size_t home = hash_name(g->hash[k]->name) & mask;
        /* k may move to i unless home lies cyclically in (i, k] */
        bool stays = i <= k ? (home > i && home <= k) : (home > i || home <= k);
        if (stays) continue;
        g->hash[i] = g->hash[k];
        i = k;
    }
    g->hash[i] = NULL;
}

static void hash_rebuild(mcir_graph *g) {
    memset(g->hash, 0, (size_t)g->hash_cap * sizeof *g->hash);
    for (int i = 0; i < g->n_tensors; i++) {
        mcir_tensor *t = g->tensors[i];
        size_t j = hash_name(t->name) & (size_t)(g->hash_cap - 1);
        while (g->hash[j]) j = (j + 1) & (size_t)(g->hash_cap - 1);
        g->hash[j] = t;
    }
}

mcir_tensor *mcir_graph_find_tensor(const mcir_graph *g, const char *name) {
    if (!g->hash_cap || !name) return NULL;
    size_t j = hash_name(name) & (size_t)(g->hash_cap - 1);
    for (; g->hash[j]; j = (j + 1) & (size_t)(g->hash_cap - 1))
        if (strcmp(g->hash[j]->name, name) == 0) return g->hash[j];
    return NULL;
}

/* ---------------------------------------------------------------- graphs */

mcir_graph *mcir_graph_new(const char *name) {
    mcir_arena *a = mcir_arena_new();
    mcir_graph *g = mcir_arena_alloc(a, sizeof *g);
    g->arena = a;
    g->name = mcir_arena_strdup(a, name ? name : "graph");
    g->path = "<graph>";
    g->dir = ".";
    g->ranks = 1;
    return g;
}

void mcir_graph_free(mcir_graph *g) {
    if (!g) return;
    mcir_graph_index_uses(g, false);
    mcir_graph_index_groups(g, false);
    mcir_arena_free(g->arena);
}

static void push_tensor(mcir_graph *g, mcir_tensor ***list, int *n, mcir_tensor *t) {
    /* lists other than g->tensors are small; grow by copying */
    mcir_tensor **l = mcir_arena_alloc(g->arena, (size_t)(*n + 1) * sizeof *l);
    if (*n) memcpy(l, *list, (size_t)*n * sizeof *l);
    l[(*n)++] = t;
    *list = l;
}

mcir_tensor *mcir_graph_add_tensor(mcir_graph *g, const char *name, mcir_dtype dtype,
                                   int rank, const int64_t *shape,
                                   mcir_tensor_kind kind) {
    if (!name || mcir_graph_find_tensor(g, name)) return NULL;
    MCIR_ASSERT(rank <= MCIR_MAX_RANK);
    mcir_tensor *t = mcir_arena_alloc(g->arena, sizeof *t);
    t->id = g->n_tensors;
    t->name = mcir_arena_strdup(g->arena, name);
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->shape[i] = shape[i];
    t->kind = kind;
    t->memory_state = MCIR_MEM_MATERIALIZED;
    t->shard_axis = -1;
    t->shard_parts = 1;
    t->shard_blocks = 1;
    t->loc = (mcir_loc){g->path, 0, 0};
    g->tensors = mcir_arena_grow(g->arena, g->tensors, &g->cap_tensors,
                                 g->n_tensors + 1, sizeof *g->tensors);
    g->tensors[g->n_tensors++] = t;
    hash_insert(g, t);
    if (kind == MCIR_TENSOR_INPUT) push_tensor(g, &g->inputs, &g->n_inputs, t);
    if (kind == MCIR_TENSOR_WEIGHT) push_tensor(g, &g->weights, &g->n_weights, t);
    return t;
}

const char *mcir_graph_fresh_name(mcir_graph *g, const char *stem) {
    if (!mcir_graph_find_tensor(g, stem) && !mcir_graph_find_node(g, stem))
        return mcir_arena_strdup(g->arena, stem);
    for (;;) {
        const char *s = mcir_arena_printf(g->arena, "%s_%d", stem, g->next_auto_name++);
        if (!mcir_graph_find_tensor(g, s) && !mcir_graph_find_node(g, s)) return s;
    }
}

mcir_node *mcir_graph_find_node(const mcir_graph *g, const char *name) {
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead && strcmp(g->nodes[i]->name, name) == 0)
            return g->nodes[i];
    return NULL;
}

mcir_node *mcir_graph_add_node(mcir_graph *g, mcir_op op, const char *name,
                               int n_inputs, mcir_tensor *const *inputs,
                               int n_outputs, mcir_tensor *const *outputs) {
    MCIR_ASSERT(op >= 0 && op < MCIR_OP_COUNT);
    mcir_graph_index_uses(g, false);
    mcir_node *n = mcir_arena_alloc(g->arena, sizeof *n);
    n->id = g->n_nodes;
    n->op = op;
    n->name = name ? mcir_arena_strdup(g->arena, name)
                   : mcir_graph_fresh_name(g, mcir_op_name(op));
    n->n_inputs = n_inputs;
    n->inputs = mcir_arena_memdup(g->arena, inputs, (size_t)n_inputs * sizeof *inputs);
    n->n_outputs = n_outputs;
    n->outputs = mcir_arena_memdup(g->arena, outputs, (size_t)n_outputs * sizeof *outputs);
    n->group = -1;
    n->inplace_input = -1;
    n->loc = (mcir_loc){g->path, 0, 0};
    for (int i = 0; i < n_outputs; i++) {
        mcir_tensor *t = outputs[i];
        t->producer = n;
        if (t->kind != MCIR_TENSOR_OUTPUT)
            t->kind = t->is_output ? MCIR_TENSOR_OUTPUT : MCIR_TENSOR_INTERMEDIATE;
    }
    g->nodes = mcir_arena_grow(g->arena, g->nodes, &g->cap_nodes, g->n_nodes + 1,
                               sizeof *g->nodes);
    g->nodes[g->n_nodes++] = n;
    return n;
}

void mcir_graph_mark_output(mcir_graph *g, mcir_tensor *t) {
    if (t->is_output) return;
    t->is_output = true;
    if (t->kind == MCIR_TENSOR_INTERMEDIATE) t->kind = MCIR_TENSOR_OUTPUT;
    push_tensor(g, &g->outputs, &g->n_outputs, t);
}

int mcir_graph_live_nodes(const mcir_graph *g) {
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) k += !g->nodes[i]->dead;
    return k;
}

/* ------------------------------------------------------------ attributes */

const mcir_attr *mcir_node_attr(const mcir_node *n, const char *name) {
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

static const mcir_attr_spec *default_of(const mcir_node *n, const char *name,
                                        mcir_attr_type type) {
    const mcir_attr_spec *s = mcir_op_attr_spec(n->op, name);
    MCIR_ASSERT(s && s->type == type && s->has_default);
    return s;
}

int64_t mcir_node_int(const mcir_node *n, const char *name) {
    const mcir_attr *a = mcir_node_attr(n, name);
    if (a) {
        MCIR_ASSERT(a->type == MCIR_ATTR_INT);
        return a->i;
    }
    return default_of(n, name, MCIR_ATTR_INT)->def_i;
}

double mcir_node_float(const mcir_node *n, const char *name) {
    const mcir_attr *a = mcir_node_attr(n, name);
    if (a) {
        MCIR_ASSERT(a->type == MCIR_ATTR_FLOAT);
        return a->f;
    }
    return default_of(n, name, MCIR_ATTR_FLOAT)->def_f;
}

bool mcir_node_bool(const mcir_node *n, const char *name) {
    const mcir_attr *a = mcir_node_attr(n, name);
    if (a) {
        MCIR_ASSERT(a->type == MCIR_ATTR_BOOL);
        return a->b;
    }
    return default_of(n, name, MCIR_ATTR_BOOL)->def_b;
}

const char *mcir_node_string(const mcir_node *n, const char *name) {
    const mcir_attr *a = mcir_node_attr(n, name);
    if (a) {
        MCIR_ASSERT(a->type == MCIR_ATTR_STRING);
        return a->s;
    }
    return default_of(n, name, MCIR_ATTR_STRING)->def_s;
}

int mcir_node_ints(const mcir_node *n, const char *name, const int64_t **out) {
    const mcir_attr *a = mcir_node_attr(n, name);
    if (a) {
        MCIR_ASSERT(a->type == MCIR_ATTR_INTS);
        *out = a->ints;
        return a->n;
    }
    const mcir_attr_spec *s = default_of(n, name, MCIR_ATTR_INTS);
    *out = s->def_ints;
    return s->def_n;
}

static mcir_attr *attr_slot(mcir_graph *g, mcir_node *n, const char *name,
                            mcir_attr_type type) {
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) {
            mcir_attr *a = &n->attrs[i];
            mcir_loc loc = a->loc;
            memset(a, 0, sizeof *a);
            a->name = mcir_arena_strdup(g->arena, name);
            a->type = type;
            a->loc = loc;
            return a;
        }
    mcir_attr *attrs = mcir_arena_alloc(g->arena, (size_t)(n->n_attrs + 1) * sizeof *attrs);
    if (n->n_attrs) memcpy(attrs, n->attrs, (size_t)n->n_attrs * sizeof *attrs);
    n->attrs = attrs;
    mcir_attr *a = &attrs[n->n_attrs++];
    a->name = mcir_arena_strdup(g->arena, name);
    a->type = type;
    a->loc = n->loc;
    return a;
}

mcir_attr *mcir_node_set_int(mcir_graph *g, mcir_node *n, const char *name, int64_t v) {
    mcir_attr *a = attr_slot(g, n, name, MCIR_ATTR_INT);
    a->i = v;
    return a;
}

mcir_attr *mcir_node_set_float(mcir_graph *g, mcir_node *n, const char *name, double v) {
    mcir_attr *a = attr_slot(g, n, name, MCIR_ATTR_FLOAT);
    a->f = v;
    return a;
}

mcir_attr *mcir_node_set_bool(mcir_graph *g, mcir_node *n, const char *name, bool v) {
    mcir_attr *a = attr_slot(g, n, name, MCIR_ATTR_BOOL);
    a->b = v;
    return a;
}

mcir_attr *mcir_node_set_string(mcir_graph *g, mcir_node *n, const char *name,
                                const char *v) {
    mcir_attr *a = attr_slot(g, n, name, MCIR_ATTR_STRING);
    a->s = mcir_arena_strdup(g->arena, v);
    return a;
}

mcir_attr *mcir_node_set_ints(mcir_graph *g, mcir_node *n, const char *name, int count,
                              const int64_t *v) {
    mcir_attr *a = attr_slot(g, n, name, MCIR_ATTR_INTS);
    a->n = count;
    a->ints = mcir_arena_memdup(g->arena, v, (size_t)count * sizeof *v);
    return a;
}

bool mcir_node_has_property(const mcir_node *n, const char *property) {
    for (int i = 0; i < n->n_properties; i++)
        if (strcmp(n->properties[i], property) == 0) return true;
    return false;
}

void mcir_node_add_property(mcir_graph *g, mcir_node *n, const char *property) {
    if (mcir_node_has_property(n, property)) return;
    const char **p = mcir_arena_alloc(g->arena, (size_t)(n->n_properties + 1) * sizeof *p);
    if (n->n_properties) memcpy(p, n->properties, (size_t)n->n_properties * sizeof *p);
    p[n->n_properties++] = mcir_arena_strdup(g->arena, property);
    n->properties = p;
}

/* ---------------------------------------------------------------- order */

/* Ready nodes by position: a binary min-heap of indices. */
static void heap_push(int *h, int *n, int v) {
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static int heap_pop(int *h, int *n) {
    int top = h[0], v = h[--*n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = v;
    return top;
}

/* Stable Kahn: always the earliest ready node in the current order, found
 * with a heap; consumers from a CSR built once. O((n + edges) log n). */
bool mcir_graph_sort(mcir_graph *g, mcir_diag *d) {
    int n = g->n_nodes;
    if (n == 0) return true;
    mcir_graph_index_groups(g, false);
    for (int i = 0; i < n; i++) g->nodes[i]->id = i;
    int *indeg = calloc((size_t)n, sizeof *indeg);
    int *start = calloc((size_t)n + 1, sizeof *start);
    int *ready = malloc((size_t)n * sizeof *ready);
    mcir_node **order = malloc((size_t)n * sizeof *order);
    MCIR_ASSERT(indeg && start && ready && order);
    /* an edge per (producer, consumer input): a node reading a tensor twice
     * waits for it twice, as it counts it twice */
    int edges = 0;
    for (int i = 0; i < n; i++) {
        mcir_node *nd = g->nodes[i];
        if (nd->dead) continue;
        for (int k = 0; k < nd->n_inputs; k++) {
            mcir_node *p = nd->inputs[k]->producer;
            if (p && !p->dead) {
                indeg[i]++;
                start[p->id + 1]++;
                edges++;
            }
        }
    }
    for (int i = 0; i < n; i++) start[i + 1] += start[i];
    int *cons = malloc((size_t)(edges ? edges : 1) * sizeof *cons);
    int *fill = calloc((size_t)n, sizeof *fill);
    MCIR_ASSERT(cons && fill);
    for (int i = 0; i < n; i++) {
        mcir_node *nd = g->nodes[i];
        if (nd->dead) continue;
        for (int k = 0; k < nd->n_inputs; k++) {
            mcir_node *p = nd->inputs[k]->producer;
            if (p && !p->dead) cons[start[p->id] + fill[p->id]++] = i;
        }
    }
    int n_ready = 0, k = 0, live = 0;
    for (int i = 0; i < n; i++)
        if (!g->nodes[i]->dead) {
            live++;
            if (indeg[i] == 0) heap_push(ready, &n_ready, i);
        }
    while (n_ready > 0) {
        int pick = heap_pop(ready, &n_ready);
        order[k++] = g->nodes[pick];
        for (int e = start[pick]; e < start[pick + 1]; e++)
            if (--indeg[cons[e]] == 0) heap_push(ready, &n_ready, cons[e]);
    }
    bool ok = k == live;
    if (!ok) {
        mcir_node *bad = NULL;
        for (int i = 0; i < n && !bad; i++)
            if (!g->nodes[i]->dead && indeg[i] > 0) bad = g->nodes[i];
        mcir_error(d, bad->loc, "node '%s' (%s) is part of a cycle: the graph must be acyclic",
                   bad->name, mcir_op_name(bad->op));
    } else {
        int j = k;
        for (int i = 0; i < n; i++)
            if (g->nodes[i]->dead) order[j++] = g->nodes[i];
        memcpy(g->nodes, order, (size_t)n * sizeof *order);
        for (int i = 0; i < n; i++) g->nodes[i]->id = i;
    }
    free(indeg);
    free(start);
    free(ready);
    free(order);
    free(cons);
    free(fill);
    return ok;
}

bool mcir_graph_infer(mcir_graph *g, mcir_diag *d) {
    bool ok = true;
    for (int i = 0; i < g->n_nodes; i++) {
        mcir_node *n = g->nodes[i];
        if (n->dead) continue;
        bool inputs_known = true;
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k]->rank < 0) inputs_known = false;
        if (!inputs_known) { /* an earlier error; don't cascade */
            ok = false;
            continue;
        }
        if (!mcir_node_infer(g, n, d)) {
            ok = false;
            for (int k = 0; k < n->n_outputs; k++) n->outputs[k]->rank = -1;
        }
    }
    return ok;
}

/* -------------------------------------------------------------- verifier */

static bool verify_attr(const mcir_node *n, const mcir_attr *a, mcir_diag *d) {
    const mcir_attr_spec *s = mcir_op_attr_spec(n->op, a->name);
    if (!s) {
        mcir_error(d, a->loc, "node '%s' (%s): unknown attribute '%s'", n->name,
                   mcir_op_name(n->op), a->name);
        return false;
    }
    if (s->type != a->type) {
        mcir_error(d, a->loc, "node '%s' (%s): attribute '%s' has the wrong type", n->name,
                   mcir_op_name(n->op), a->name);
        return false;
    }
    return true;
}

bool mcir_graph_verify(const mcir_graph *g, mcir_diag *d) {
    int before = d ? d->n_errors : 0;
    mcir_diag local = mcir_diag_stderr();
    if (!d) d = &local;
    for (int i = 0; i < g->n_nodes; i++) {
        const mcir_node *n = g->nodes[i];
        if (n->dead) continue;
        const mcir_op_desc *desc = mcir_op_desc_of(n->op);
        if (desc->max_inputs < 0 && n->n_inputs < desc->min_inputs)
            mcir_error(d, n->loc, "node '%s' (%s): takes at least %d inputs, has %d", n->name,
                       desc->name, desc->min_inputs, n->n_inputs);
        else if (n->n_inputs < desc->min_inputs ||
                 (desc->max_inputs >= 0 && n->n_inputs > desc->max_inputs))
            mcir_error(d, n->loc, "node '%s' (%s): takes %d to %d inputs, has %d", n->name,
                       desc->name, desc->min_inputs, desc->max_inputs, n->n_inputs);
        if (desc->n_outputs >= 0 && n->n_outputs != desc->n_outputs)
            mcir_error(d, n->loc, "node '%s' (%s): has %d outputs, the op makes %d", n->name,
                       desc->name, n->n_outputs, desc->n_outputs);
        for (int k = 0; k < n->n_attrs; k++) verify_attr(n, &n->attrs[k], d);
        for (int k = 0; k < desc->n_attrs; k++)
            if (desc->attrs[k].required && !mcir_node_attr(n, desc->attrs[k].name))
                mcir_error(d, n->loc, "node '%s' (%s): missing required attribute '%s'",
                           n->name, desc->name, desc->attrs[k].name);
        for (int k = 0; k < n->n_inputs; k++) {
            const mcir_tensor *t = n->inputs[k];
            if (t->kind == MCIR_TENSOR_INPUT || t->kind == MCIR_TENSOR_WEIGHT) continue;
            if (!t->producer || t->producer->dead)
                mcir_error(d, n->loc, "node '%s': input '%s' has no live producer", n->name,
                           t->name);
            else if (t->producer->id >= n->id)
                mcir_error(d, n->loc, "node '%s': input '%s' is produced later, by '%s'",
                           n->name, t->name, t->producer->name);
            if (t->rank < 0)
                mcir_error(d, n->loc, "node '%s': input '%s' has no inferred shape", n->name,
                           t->name);
        }
        for (int k = 0; k < n->n_outputs; k++) {
            const mcir_tensor *t = n->outputs[k];
            if (t->producer != n)
                mcir_error(d, n->loc, "node '%s': output '%s' is produced by '%s'", n->name,
                           t->name, t->producer ? t->producer->name : "nothing");
            if (t->kind == MCIR_TENSOR_INPUT || t->kind == MCIR_TENSOR_WEIGHT)
                mcir_error(d, n->loc, "node '%s': writes %s '%s'", n->name,
                           mcir_tensor_kind_name(t->kind), t->name);
            if (t->rank < 0)
                mcir_error(d, n->loc, "node '%s': output '%s' has no inferred shape", n->name,
                           t->name);
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        const mcir_tensor *t = g->outputs[i];
        if (t->kind != MCIR_TENSOR_INPUT && t->kind != MCIR_TENSOR_WEIGHT &&
            (!t->producer || t->producer->dead))
            mcir_error(d, t->loc, "graph output '%s' has no live producer", t->name);
    }
    return d->n_errors == before;
}

/* ------------------------------------------------------- clone, compact */

mcir_graph *mcir_graph_clone(const mcir_graph *g) {
    mcir_graph *c = mcir_graph_new(g->name);
    mcir_arena *a = c->arena;
    c->path = mcir_arena_strdup(a, g->path);
    c->dir = mcir_arena_strdup(a, g->dir);
    c->next_auto_name = g->next_auto_name;
    c->n_dims = g->n_dims;
    c->ranks = g->ranks;
    for (int i = 0; i < g->n_dims; i++) {
        c->dims[i] = g->dims[i];
        c->dims[i].name = mcir_arena_strdup(a, g->dims[i].name);
        c->dims[i].loc.path = c->path;
    }
    for (int i = 0; i < g->n_tensors; i++) {
        const mcir_tensor *t = g->tensors[i];
        mcir_tensor *u = mcir_graph_add_tensor(c, t->name, t->dtype, t->rank, t->shape,
                                               t->kind);
        MCIR_ASSERT(u);
        u->memory_state = t->memory_state;
        u->loc = t->loc;
        u->loc.path = c->path;
        u->shard_axis = t->shard_axis;
        u->shard_parts = t->shard_parts;
        u->shard_blocks = t->shard_blocks;
        if (t->data)
            u->data = mcir_arena_memdup(a, t->data, (size_t)mcir_tensor_whole_bytes(t));
        u->data_path = mcir_arena_strdup(a, t->data_path);
        if (t->sym && t->rank > 0)
            u->sym = mcir_arena_memdup(a, t->sym, sizeof *t->sym * (size_t)t->rank);
    }
    for (int i = 0; i < g->n_tensors; i++)
        if (g->tensors[i]->state_input) c->tensors[i]->state_input = c->tensors[g->tensors[i]->state_input->id];
    for (int i = 0; i < g->n_nodes; i++) {
        const mcir_node *n = g->nodes[i];
        mcir_tensor **ins = mcir_arena_alloc(a, (size_t)(n->n_inputs + 1) * sizeof *ins);
        mcir_tensor **outs = mcir_arena_alloc(a, (size_t)(n->n_outputs + 1) * sizeof *outs);
        for (int k = 0; k < n->n_inputs; k++) ins[k] = c->tensors[n->inputs[k]->id];
        for (int k = 0; k < n->n_outputs; k++) outs[k] = c->tensors[n->outputs[k]->id];
        mcir_node *m = mcir_graph_add_node(c, n->op, n->name, n->n_inputs, ins,
                                           n->n_outputs, outs);
        m->dead = n->dead;
        m->group = n->group;
        m->inplace_input = n->inplace_input;
        m->loc = n->loc;
        m->loc.path = c->path;
        m->origin_rule = mcir_arena_strdup(a, n->origin_rule);
        m->origin_nodes = mcir_arena_strdup(a, n->origin_nodes);
        m->n_attrs = n->n_attrs;
        m->attrs = mcir_arena_memdup(a, n->attrs, (size_t)n->n_attrs * sizeof *n->attrs);
        for (int k = 0; k < n->n_attrs; k++) {
            mcir_attr *at = &m->attrs[k];
            at->name = mcir_arena_strdup(a, at->name);
            at->s = mcir_arena_strdup(a, at->s);
            if (at->ints)
                at->ints = mcir_arena_memdup(a, at->ints, (size_t)at->n * sizeof *at->ints);
            if (at->dim_of)
                at->dim_of = mcir_arena_memdup(a, at->dim_of,
                                               (size_t)(at->type == MCIR_ATTR_INTS ? at->n : 1));
            at->loc.path = c->path;
        }
        for (int k = 0; k < n->n_properties; k++)
            mcir_node_add_property(c, m, n->properties[k]);
    }
    /* restore producers of dead/live nodes exactly as in g */
    for (int i = 0; i < g->n_tensors; i++) {
        const mcir_tensor *t = g->tensors[i];
        c->tensors[i]->producer = t->producer ? c->nodes[t->producer->id] : NULL;
        c->tensors[i]->kind = t->kind;
    }
    for (int i = 0; i < g->n_outputs; i++) mcir_graph_mark_output(c, c->tensors[g->outputs[i]->id]);
    for (int i = 0; i < g->n_tensors; i++) c->tensors[i]->kind = g->tensors[i]->kind;
    return c;
}

struct mcir_use_index {
    int n_tensors;
    int *start;          /* consumers of tensor id t: cons[start[t]..start[t+1]) */
    mcir_node **cons;    /* live nodes, in node order, each once per tensor */
};

void mcir_graph_index_uses(mcir_graph *g, bool on) {
    if (g->uses) {
        free(g->uses->start);
        free(g->uses->cons);
        free(g->uses);
        g->uses = NULL;
    }
    if (!on) return;
    struct mcir_use_index *u = calloc(1, sizeof *u);
    MCIR_ASSERT(u);
    u->n_tensors = g->n_tensors;
    u->start = calloc((size_t)g->n_tensors + 1, sizeof *u->start);
    int edges = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead) edges += g->nodes[i]->n_inputs;
    u->cons = malloc((size_t)(edges ? edges : 1) * sizeof *u->cons);
    int *fill = calloc((size_t)g->n_tensors + 1, sizeof *fill);
    MCIR_ASSERT(u->start && u->cons && fill);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < g->n_nodes; i++) {
            mcir_node *n = g->nodes[i];
            if (n->dead) continue;
            for (int j = 0; j < n->n_inputs; j++) {
                int t = n->inputs[j]->id;
                bool again = false;   /* a node reading t twice counts once */
                for (int k = 0; k < j && !again; k++) again = n->inputs[k] == n->inputs[j];
                if (again || t < 0 || t >= g->n_tensors || g->tensors[t] != n->inputs[j])
                    continue;
                if (pass == 0) u->start[t + 1]++;
                else u->cons[u->start[t] + fill[t]++] = n;
            }
        }
        if (pass == 0)
            for (int t = 0; t < g->n_tensors; t++) u->start[t + 1] += u->start[t];
    }
    free(fill);
    g->uses = u;
}

int mcir_graph_consumers(const mcir_graph *g, const mcir_tensor *t, mcir_node **out,
                         int max) {
    const struct mcir_use_index *u = g->uses;
    if (u && t->id >= 0 && t->id < u->n_tensors && g->tensors[t->id] == t) {
        int k = 0;
        for (int e = u->start[t->id]; e < u->start[t->id + 1]; e++) {
            if (u->cons[e]->dead) continue;
            if (out && k < max) out[k] = u->cons[e];
            k++;
        }
        return k;
    }
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        mcir_node *n = g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] == t) {
                if (out && k < max) out[k] = n;
                k++;
                break;
            }
    }
    return k;
}

/* ------------------------------------------------------ fusion groups */

/* Each group's members as a list linked by node id, in id (= node) order,
 * with its live size; the largest group with a member. Nodes appended
 * later are in no group, so the per-node arrays grow on demand. */
struct mcir_group_index {
    int cap_nodes;
    int *prev, *next;    /* by node id; -1: none */
    int cap_groups;
    int *head, *tail, *size;   /* by group id */
    int max_group;
};

static void group_reserve(struct mcir_group_index *x, int nodes, int groups) {
    if (nodes > x->cap_nodes) {
        int cap = x->cap_nodes ? x->cap_nodes : 64;
        while (cap < nodes) cap *= 2;
        x->prev = realloc(x->prev, (size_t)cap * sizeof *x->prev);
        x->next = realloc(x->next, (size_t)cap * sizeof *x->next);
        MCIR_ASSERT(x->prev && x->next);
        for (int i = x->cap_nodes; i < cap; i++) x->prev[i] = x->next[i] = -1;
        x->cap_nodes = cap;
    }
    if (groups > x->cap_groups) {
        int cap = x->cap_groups ? x->cap_groups : 64;
        while (cap < groups) cap *= 2;
        x->head = realloc(x->head, (size_t)cap * sizeof *x->head);
        x->tail = realloc(x->tail, (size_t)cap * sizeof *x->tail);
        x->size = realloc(x->size, (size_t)cap * sizeof *x->size);
        MCIR_ASSERT(x->head && x->tail && x->size);
        for (int i = x->cap_groups; i < cap; i++) {
            x->head[i] = x->tail[i] = -1;
            x->size[i] = 0;
        }
        x->cap_groups = cap;
    }
}

/* Links node id into group gid's list at its place in id order: from the
 * tail back (a group grows at its ends: new members are next to old). */
static void group_link(struct mcir_group_index *x, int id, int gid) {
    group_reserve(x, id + 1, gid + 1);
    int after = x->tail[gid];
    if (x->head[gid] >= 0 && id < x->head[gid]) after = -1;
    while (after >= 0 && after > id) after = x->prev[after];
    int before = after >= 0 ? x->next[after] : x->head[gid];
    x->prev[id] = after;
    x->next[id] = before;
    if (after >= 0) x->next[after] = id;
    else x->head[gid] = id;
    if (before >= 0) x->prev[before] = id;
    else x->tail[gid] = id;
    x->size[gid]++;
    if (gid > x->max_group) x->max_group = gid;
}

static void group_unlink(struct mcir_group_index *x, int id, int gid) {
    int p = x->prev[id], n = x->next[id];
    if (p >= 0) x->next[p] = n;
    else x->head[gid] = n;
    if (n >= 0) x->prev[n] = p;
    else x->tail[gid] = p;
    x->prev[id] = x->next[id] = -1;
    x->size[gid]--;
    while (x->max_group >= 0 && x->size[x->max_group] == 0) x->max_group--;
}

void mcir_graph_index_groups(mcir_graph *g, bool on) {
    struct mcir_group_index *x = g->groups;
    if (x) {
        free(x->prev);
        free(x->next);
        free(x->head);
        free(x->tail);
        free(x->size);
        free(x);
        g->groups = NULL;
    }
    if (!on) return;
    x = calloc(1, sizeof *x);
    MCIR_ASSERT(x);
    x->max_group = -1;
    group_reserve(x, g->n_nodes, 1);
    for (int i = 0; i < g->n_nodes; i++) {
        const mcir_node *n = g->nodes[i];
        MCIR_ASSERT(n->id == i);
        if (!n->dead && n->group >= 0) group_link(x, i, n->group);
    }
    g->groups = x;
}

void mcir_graph_set_group(mcir_graph *g, mcir_node *n, int gid) {
    struct mcir_group_index *x = g->groups;
    if (x && !n->dead && n->group != gid) {
        MCIR_ASSERT(n->id >= 0 && n->id < g->n_nodes && g->nodes[n->id] == n);
        if (n->group >= 0) group_unlink(x, n->id, n->group);
        if (gid >= 0) group_link(x, n->id, gid);
    }
    n->group = gid;
}

int mcir_graph_group_members(const mcir_graph *g, const int *gids, int n_gids,
                             const mcir_node **out, int max) {
    const struct mcir_group_index *x = g->groups;
    int k = 0;
    if (!x) {
        for (int i = 0; i < g->n_nodes && k < max; i++) {
            const mcir_node *n = g->nodes[i];
            if (n->dead || n->group < 0) continue;
            for (int j = 0; j < n_gids; j++)
                if (n->group == gids[j]) {
                    out[k++] = n;
                    break;
                }
        }
        return k;
    }
    /* merge the lists: the smallest id at the front of any of them */
    int at[64], n_at = 0;
    for (int j = 0; j < n_gids && n_at < 64; j++) {
        int gid = gids[j];
        bool dup = gid < 0 || gid >= x->cap_groups;
        for (int i = 0; i < j && !dup; i++) dup = gids[i] == gid;
        if (!dup && x->head[gid] >= 0) at[n_at++] = x->head[gid];
    }
    while (k < max && n_at > 0) {
        int best = 0;
        for (int j = 1; j < n_at; j++)
            if (at[j] < at[best]) best = j;
        const mcir_node *n = g->nodes[at[best]];
        if (!n->dead) out[k++] = n;
        at[best] = x->next[at[best]];
        if (at[best] < 0) at[best] = at[--n_at];
    }
    return k;
}

int mcir_graph_group_size(const mcir_graph *g, int gid) {
    const struct mcir_group_index *x = g->groups;
    if (x) return gid >= 0 && gid < x->cap_groups ? x->size[gid] : 0;
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) k += !g->nodes[i]->dead && g->nodes[i]->group == gid;
    return k;
}

int mcir_graph_max_group(const mcir_graph *g) {
    if (g->groups) return g->groups->max_group;
    int max = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead && g->nodes[i]->group > max) max = g->nodes[i]->group;
    return max;
}

void mcir_graph_replace_uses(mcir_graph *g, mcir_tensor *from, mcir_tensor *to) {
    mcir_graph_index_uses(g, false);
    for (int i = 0; i < g->n_nodes; i++) {
        mcir_node *n = g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] == from) n->inputs[j] = to;
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == from) {
            /* `to` takes over from's place (and name stays with `from`'s
             * role as the returned tensor: callers that need the original
             * output name keep it on the new producer's tensor). */
            g->outputs[i] = to;
            to->is_output = true;
            if (to->kind == MCIR_TENSOR_INTERMEDIATE) to->kind = MCIR_TENSOR_OUTPUT;
            from->is_output = false;
            if (from->kind == MCIR_TENSOR_OUTPUT) from->kind = MCIR_TENSOR_INTERMEDIATE;
        }
}

void mcir_graph_compact(mcir_graph *g) {
    mcir_graph_index_uses(g, false);
    mcir_graph_index_groups(g, false);
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead) g->nodes[k++] = g->nodes[i];
    g->n_nodes = k;
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i]->id = i;
    for (int i = 0; i < g->n_tensors; i++) {
        mcir_tensor *t = g->tensors[i];
        if (t->producer && t->producer->dead) t->producer = NULL;
    }
    /* keep inputs, outputs, weights that something uses, produced tensors */
    bool *used = calloc((size_t)g->n_tensors + 1, sizeof *used);
    MCIR_ASSERT(used);
    for (int i = 0; i < g->n_nodes; i++) {
        mcir_node *n = g->nodes[i];
        for (int j = 0; j < n->n_inputs; j++) used[n->inputs[j]->id] = true;
        for (int j = 0; j < n->n_outputs; j++) used[n->outputs[j]->id] = true;
    }
    for (int i = 0; i < g->n_outputs; i++) used[g->outputs[i]->id] = true;
    for (int i = 0; i < g->n_inputs; i++) used[g->inputs[i]->id] = true;
    int w = 0;
    for (int i = 0; i < g->n_weights; i++)
        if (used[g->weights[i]->id]) g->weights[w++] = g->weights[i];
    g->n_weights = w;
    /* a few names leave the hash one by one; many, a rebuild */
    int dropped = 0;
    for (int i = 0; i < g->n_tensors; i++) dropped += !used[i];
    bool rebuild = dropped > g->n_tensors / 8;
    for (int i = 0; i < g->n_tensors && !rebuild; i++)
        if (!used[i]) hash_remove(g, g->tensors[i]);
    int t = 0;
    for (int i = 0; i < g->n_tensors; i++)
        if (used[i]) g->tensors[t++] = g->tensors[i];
    g->n_tensors = t;
    for (int i = 0; i < g->n_tensors; i++) g->tensors[i]->id = i;
    free(used);
    if (rebuild) hash_rebuild(g);
}

/* ------------------------------------------------ gated linear units */

const mcir_tensor *mcir_glu_half(const mcir_tensor *t, int *half) {
    const mcir_node *r2 = t ? t->producer : NULL;
    if (!r2 || r2->dead || r2->op != MCIR_OP_RESHAPE || r2->n_inputs != 1) return NULL;
    const mcir_tensor *s = r2->inputs[0];
    const mcir_node *sl = s->producer;
    if (!sl || sl->dead || sl->op != MCIR_OP_SLICE || sl->n_inputs != 1) return NULL;
    const mcir_tensor *q = sl->inputs[0];
    const mcir_node *r1 = q->producer;
    if (!r1 || r1->dead || r1->op != MCIR_OP_RESHAPE || r1->n_inputs != 1) return NULL;
    const mcir_tensor *p = r1->inputs[0];
    const int r = p->rank;
    if (r < 1 || q->rank != r + 2 || s->rank != r + 2 || t->rank != r || p->sym || q->sym || s->sym || t->sym)
        return NULL;
    const int64_t f = t->shape[r - 1];
    if (f < 8 || f % 8 != 0 || p->shape[r - 1] != 2 * f) return NULL;
    for (int i = 0; i < r - 1; i++)
        if (p->shape[i] != t->shape[i] || q->shape[i] != p->shape[i] || s->shape[i] != p->shape[i]) return NULL;
    if (q->shape[r - 1] != f / 8 || q->shape[r] != 2 || q->shape[r + 1] != 8 || s->shape[r - 1] != f / 8 ||
        s->shape[r] != 1 || s->shape[r + 1] != 8)
        return NULL;
    int64_t axis = mcir_node_int(sl, "axis");
    if (axis < 0) axis += q->rank;
    const int64_t start = mcir_node_int(sl, "start");
    const mcir_attr *st = mcir_node_attr(sl, "step");
    if (axis != r || (start != 0 && start != 1) || (st && st->i != 1)) return NULL;
    if (half) *half = (int)start;
    return p;
}
