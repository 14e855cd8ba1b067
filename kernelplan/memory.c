/*
 * memory.c — the graph side of memory planning: which tensors live in the
 * arena and when (liveness over the kernel order), in-place hand-overs
 * (tensor coalescing), one call of the mcir_memplan library, and an
 * independent checker of the result.
 *
 * Invariants: the arena holds exactly the materialized intermediates (not
 * internal to a kernel, not an alias — an alias's readers extend its
 * root's lifetime) and the kernels' scratch; graph inputs, weights and
 * outputs are outside it. Offsets are multiples of MCIR_ARENA_ALIGNMENT.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kernelplan/plan-impl.h"

static mcir_loc plan_loc(void) { return (mcir_loc){"memory plan", 0, 0}; }

static bool in_arena(const mcir_plan *p, const mcir_tensor *t) {
    return t->kind == MCIR_TENSOR_INTERMEDIATE && !t->is_output && p->alias_root[t->id] == t &&
           p->first_use[t->id] >= 0;
}

static bool is_internal(const mcir_kernel_plan *k, const mcir_tensor *t) {
    for (int i = 0; i < k->n_internal; i++)
        if (k->internal[i] == t) return true;
    return false;
}

static bool read_folded(const mcir_kernel_plan *k, const mcir_tensor *t) {
    for (int i = 0; i < k->n_reads; i++)
        if (k->read_access[i].folded && (k->read_access[i].logical == t)) return true;
    return false;
}

static void trace_inplace(mcir_trace *trace, const mcir_node *n, const char *out, const char *in,
                          json_t *checks, bool ok) {
    if (!trace) { json_decref(checks); return; }
    json_t *r = json_object();
    json_object_set_new(r, "stage", json_string("memory"));
    json_object_set_new(r, "rule", json_string("inplace"));
    json_object_set_new(r, "property", json_null());
    json_object_set_new(r, "anchor", json_string(n->name));
    json_object_set_new(r, "matched", json_pack("[s]", n->name));
    json_object_set_new(r, "legality", checks);
    json_object_set_new(r, "decision", json_string(ok ? "applied" : "rejected"));
    if (ok) json_object_set_new(r, "result", json_pack("[s, s]", in, out));
    mcir_trace_append(trace, r);
}

static json_t *check_rec(const char *check, bool ok, const char *detail) {
    return json_pack("{s:s, s:b, s:s}", "check", check, "ok", ok, "detail", detail);
}

/* In place: kernel kid's write buffer bw takes over the bytes of the
 * input its producer names in node->inplace_input, when that input dies
 * here. */
static void plan_inplace(const mcir_plan *p, mcir_memplan *m, int kid, int bw,
                         mcir_trace *trace) {
    const mcir_kernel_plan *k = &p->kernels[kid];
    mcir_buffer_plan *w = &m->buffers[bw];
    const mcir_node *n = w->tensor->producer;
    if (!n || n->inplace_input < 0 || n->inplace_input >= n->n_inputs) return;
    mcir_arena *a = m->arena;
    const mcir_tensor *x = n->inputs[n->inplace_input];
    /* through a fused chain: the chain's in-place inputs, back to the boundary */
    int guard = 0;
    while (is_internal(k, x) && x->producer && x->producer->inplace_input >= 0 && guard++ < 64)
        x = x->producer->inputs[x->producer->inplace_input];
    json_t *ck = json_array();
    bool ok = true;
    if (is_internal(k, x)) {
        json_array_append_new(ck, check_rec("input_in_memory", false,
            mcir_arena_printf(a, "'%s' lives only inside kernel %s", x->name, k->name)));
        ok = false;
    } else if (read_folded(k, x)) {
        json_array_append_new(ck, check_rec("same_layout", false,
            mcir_arena_printf(a, "'%s' is read through a folded transpose", x->name)));
        ok = false;
    } else {
        const mcir_tensor *r = p->alias_root[x->id];
        int br = m->buffer_of[r->id];
        if (br < 0) {
            json_array_append_new(ck, check_rec("input_in_arena", false,
                mcir_arena_printf(a, "'%s' is a graph input, weight or output, not in the arena",
                                  r->name)));
            ok = false;
        } else {
            json_array_append_new(ck, check_rec("input_in_arena", true,
                mcir_arena_printf(a, "'%s' is in the arena", r->name)));
            const mcir_buffer_plan *in = &m->buffers[br];
            bool dies = in->last == kid;
            json_array_append_new(ck, check_rec("input_dies_here", dies,
                dies ? mcir_arena_printf(a, "'%s' is last read by kernel %s", r->name, k->name)
                     : mcir_arena_printf(a, "'%s' is read again by kernel %d (%s)", r->name,
                                         in->last, p->kernels[in->last].name)));
            bool fits = w->size <= in->size;
            json_array_append_new(ck, check_rec("fits", fits,
                mcir_arena_printf(a, "%lld bytes into %lld", (long long)w->size,
                                  (long long)in->size)));
            bool free_ = true;
            for (int b = 0; b < m->n_buffers; b++)
                if (m->buffers[b].share_with == br) free_ = false;
            json_array_append_new(ck, check_rec("not_taken", free_,
                free_ ? "no other buffer takes it over" : "another buffer already took it over"));
            /* elementwise readers see each element before it is overwritten;
             * a matmul, conv, norm or copy in the same kernel reads other
             * blocks' elements and would race with the stores */
            const mcir_node *other = NULL;
            for (int i = 0; i < k->n_nodes && !other; i++) {
                const mcir_node *u = k->nodes[i];
                if (mcir_op_desc_of(u->op)->flags & MCIR_OPF_ELEMENTWISE) continue;
                for (int j = 0; j < u->n_inputs; j++) {
                    const mcir_kernel_access *acc = mcir_kernel_access_of(k, u->inputs[j]);
                    const mcir_tensor *held = acc ? acc->tensor : u->inputs[j];
                    if (p->alias_root[held->id] == r) other = u;
                }
            }
            json_array_append_new(ck, check_rec("read_elementwise_only", !other,
                other ? mcir_arena_printf(a, "'%s' is also read by %s '%s' in kernel %s",
                                          r->name, mcir_op_name(other->op), other->name, k->name)
                      : "only elementwise nodes of the kernel read it"));
            ok = dies && fits && free_ && !other;
            if (ok) w->share_with = br;
        }
    }
    trace_inplace(trace, n, w->name, x->name, ck, ok);
}

static int cmp_buffers(const void *x, const void *y) {
    const mcir_buffer_plan *a = x, *b = y;
    if (a->first != b->first) return a->first - b->first;
    if (a->tensor && b->tensor) return a->tensor->id - b->tensor->id;
    return (a->tensor == NULL) - (b->tensor == NULL);
}

/* The exact planner's progress, onto the terminal line. */
static void search_progress(void *ctx, double seconds, double budget_s, int64_t nodes,
                            int64_t best_height) {
    mcir_progress_set(ctx, nodes, " (exact planner, %.0f of %.0f s budget, best %.2f MiB)",
                      seconds, budget_s, (double)best_height / (1024.0 * 1024.0));
}

mcir_memplan *mcir_memplan_build(const mcir_plan *p, const mcir_memplan_build_options *options,
                                mcir_trace *trace, mcir_diag *d) {
    mcir_memplan_build_options o = options ? *options : (mcir_memplan_build_options){0};
    const char *planner = o.planner ? o.planner : "best";
    if (!mcir_memplan_planner_find(planner)) {
        mcir_error(d, (mcir_loc){"--planner", 0, 0},
                   "unknown planner '%s' (try --planner help)", planner);
        return NULL;
    }
    const mcir_graph *g = p->graph;
    mcir_arena *a = mcir_arena_new();
    mcir_memplan *m = mcir_arena_alloc(a, sizeof *m);
    m->arena = a;
    m->planner = mcir_arena_strdup(a, planner);
    m->alignment = MCIR_ARENA_ALIGNMENT;
    m->n_kernels = p->n_kernels;

    /* buffers: materialized intermediates, then scratch */
    int cap = g->n_tensors + p->n_kernels + 1;
    m->buffers = mcir_arena_alloc(a, (size_t)cap * sizeof *m->buffers);
    for (int t = 0; t < g->n_tensors; t++) {
        const mcir_tensor *x = g->tensors[t];
        if (!in_arena(p, x)) continue;
        int first = p->first_use[t], last = p->last_use[t];
        m->buffers[m->n_buffers++] = (mcir_buffer_plan){
            .tensor = x, .name = x->name, .size = mcir_tensor_bytes(x), .first = first,
            .last = last < first ? first : last, .share_with = -1};
    }
    for (int k = 0; k < p->n_kernels; k++) {
        if (p->kernels[k].scratch_bytes <= 0) continue;
        m->buffers[m->n_buffers++] = (mcir_buffer_plan){
            .name = mcir_arena_printf(a, "%s.scratch", p->kernels[k].name),
            .size = p->kernels[k].scratch_bytes, .first = k, .last = k, .share_with = -1};
    }
    qsort(m->buffers, (size_t)m->n_buffers, sizeof *m->buffers, cmp_buffers);
    m->buffer_of = mcir_arena_alloc(a, ((size_t)g->n_tensors + 1) * sizeof *m->buffer_of);
    for (int t = 0; t < g->n_tensors; t++) m->buffer_of[t] = -1;
    for (int b = 0; b < m->n_buffers; b++)
        if (m->buffers[b].tensor) m->buffer_of[m->buffers[b].tensor->id] = b;
    for (int t = 0; t < g->n_tensors; t++)
        m->buffer_of[t] = m->buffer_of[p->alias_root[t]->id];

    /* in place, kernel by kernel */
    for (int b = 0; b < m->n_buffers; b++) {
        mcir_buffer_plan *w = &m->buffers[b];
        if (w->tensor && w->tensor->producer) plan_inplace(p, m, w->first, b, trace);
    }

    /* pools */
    static const mcir_memplan_pool default_pool = {"arena", 0};
    const mcir_memplan_pool *pools = o.n_pools > 0 ? o.pools : &default_pool;
    m->n_pools = o.n_pools > 0 ? o.n_pools : 1;
    m->pool_names = mcir_arena_alloc(a, (size_t)m->n_pools * sizeof *m->pool_names);
    m->pool_capacity = mcir_arena_alloc(a, (size_t)m->n_pools * sizeof *m->pool_capacity);
    m->pool_bytes = mcir_arena_alloc(a, (size_t)m->n_pools * sizeof *m->pool_bytes);
    for (int i = 0; i < m->n_pools; i++) {
        m->pool_names[i] = mcir_arena_strdup(a, pools[i].name ? pools[i].name : "arena");
        m->pool_capacity[i] = pools[i].capacity;
    }

    /* the planner library */
    mcir_memplan_buffer *mb = calloc((size_t)m->n_buffers + 1, sizeof *mb);
    MCIR_ASSERT(mb);
    for (int b = 0; b < m->n_buffers; b++)
        mb[b] = (mcir_memplan_buffer){.name = m->buffers[b].name, .size = m->buffers[b].size,
                                      .first = m->buffers[b].first, .last = m->buffers[b].last,
                                      .share_with = m->buffers[b].share_with};
    mcir_memplan_problem prob = {.buffers = mb, .n_buffers = (size_t)m->n_buffers,
                                 .pools = pools, .n_pools = (size_t)m->n_pools,
                                 .alignment = MCIR_ARENA_ALIGNMENT};
    mcir_memplan_options mo = {.planner = planner, .time_limit_s = o.time_limit_s};
    mcir_progress *progress = NULL;   /* the exact search, on a terminal */
    if (mcir_progress_wanted()) {
        progress = mcir_progress_begin("memory", "search nodes", 0);
        mo.progress = search_progress;
        mo.progress_ctx = progress;
    }
    mcir_memplan_result res;
    mcir_memplan_status st = mcir_memplan_run(&prob, &mo, &res);
    mcir_progress_end(progress);
    free(mb);
    if (st != MCIR_MEMPLAN_OK) {
        mcir_error(d, (mcir_loc){g->path, 0, 0}, "memory plan of '%s': %s", g->name,
                   res.message[0] ? res.message : "planner failed");
        mcir_memplan_result_free(&res);
        mcir_arena_free(a);
        return NULL;
    }
    for (int b = 0; b < m->n_buffers; b++) {
        m->buffers[b].offset = res.offsets[b];
        m->buffers[b].pool = (int)res.pools[b];
    }
    for (int i = 0; i < m->n_pools; i++) m->pool_bytes[i] = res.pool_bytes[i];
    m->arena_bytes = res.arena_bytes;
    m->lower_bound_bytes = res.lower_bound_bytes;
    m->algorithm = mcir_arena_strdup(a, res.planner[0] ? res.planner : planner);
    m->optimal = res.optimal;
    mcir_memplan_result_free(&res);

    if (trace) {
        json_t *r = json_object();
        json_object_set_new(r, "stage", json_string("memory"));
        json_object_set_new(r, "rule", json_string("planner"));
        json_object_set_new(r, "property", json_null());
        json_object_set_new(r, "anchor", json_string(g->name));
        json_object_set_new(r, "matched", json_array());
        json_object_set_new(r, "legality", json_array());
        json_object_set_new(r, "decision", json_string("applied"));
        json_object_set_new(r, "result", json_pack("[s]", m->algorithm));
        json_object_set_new(r, "planner", json_string(m->planner));
        json_object_set_new(r, "buffers", json_integer(m->n_buffers));
        json_object_set_new(r, "arena_bytes", json_integer(m->arena_bytes));
        json_object_set_new(r, "lower_bound_bytes", json_integer(m->lower_bound_bytes));
        json_object_set_new(r, "optimal", json_boolean(m->optimal));
        mcir_trace_append(trace, r);
    }
    return m;
}

void mcir_memplan_free(mcir_memplan *m) {
    if (m) mcir_arena_free(m->arena);
}

bool mcir_memplan_locate(const mcir_memplan *m, const mcir_plan *p, const mcir_tensor *t,
                         int *pool, int64_t *offset) {
    (void)p;
    int b = m->buffer_of[t->id];
    if (b < 0) return false;
    if (pool) *pool = m->buffers[b].pool;
    if (offset) *offset = m->buffers[b].offset;
    return true;
}

/* ------------------------------------------------------------ the checker */

/* Written apart from the planner: plain O(n^2) over pairs of buffers. */

static int chain_root(const mcir_memplan *m, int b) {
    for (int steps = 0; m->buffers[b].share_with >= 0 && steps <= m->n_buffers; steps++)
        b = m->buffers[b].share_with;
    return b;
}

bool mcir_memplan_verify(const mcir_memplan *m, mcir_diag *d) {
    int errors = 0;
    int64_t al = m->alignment > 0 ? m->alignment : 1;
    int64_t total = 0;
    for (int i = 0; i < m->n_pools; i++) total += m->pool_bytes[i];
    if (total != m->arena_bytes) {
        mcir_error(d, plan_loc(), "arena_bytes %lld is not the sum of the pools (%lld)",
                   (long long)m->arena_bytes, (long long)total);
        errors++;
    }
    for (int i = 0; i < m->n_buffers; i++) {
        const mcir_buffer_plan *b = &m->buffers[i];
        if (b->pool < 0 || b->pool >= m->n_pools) {
            mcir_error(d, plan_loc(), "buffer '%s': pool %d does not exist", b->name, b->pool);
            errors++;
            continue;
        }
        if (b->size < 0 || b->offset < 0) {
            mcir_error(d, plan_loc(), "buffer '%s': negative size or offset", b->name);
            errors++;
        }
        if (b->offset % al != 0) {
            mcir_error(d, plan_loc(), "buffer '%s': offset %lld is not a multiple of %lld",
                       b->name, (long long)b->offset, (long long)al);
            errors++;
        }
        if (b->first > b->last || b->first < 0 || (m->n_kernels > 0 && b->last >= m->n_kernels)) {
            mcir_error(d, plan_loc(), "buffer '%s': lifetime %d..%d outside kernels 0..%d",
                       b->name, b->first, b->last, m->n_kernels - 1);
            errors++;
        }
        int64_t end = b->offset + b->size;
        int64_t cap = m->pool_capacity[b->pool];
        if ((cap > 0 && end > cap) || end > m->pool_bytes[b->pool]) {
            mcir_error(d, plan_loc(),
                       "buffer '%s' [%lld, %lld) lies outside pool '%s' (%lld bytes used, "
                       "capacity %lld)", b->name, (long long)b->offset, (long long)end,
                       m->pool_names[b->pool], (long long)m->pool_bytes[b->pool],
                       (long long)cap);
            errors++;
        }
        if (b->share_with >= 0) {
            const mcir_buffer_plan *s = b->share_with < m->n_buffers ? &m->buffers[b->share_with]
                                                                    : NULL;
            if (!s || s->offset != b->offset || s->pool != b->pool || s->last != b->first ||
                b->size > s->size) {
                mcir_error(d, plan_loc(), "buffer '%s': in-place hand-over is not consistent",
                           b->name);
                errors++;
            }
        }
    }
    for (int i = 0; i < m->n_buffers; i++) {
        const mcir_buffer_plan *x = &m->buffers[i];
        for (int j = i + 1; j < m->n_buffers; j++) {
            const mcir_buffer_plan *y = &m->buffers[j];
            if (x->pool != y->pool) continue;
            if (x->last < y->first || y->last < x->first) continue;       /* not live together */
            if (x->offset + x->size <= y->offset || y->offset + y->size <= x->offset) continue;
            if (x->size == 0 || y->size == 0) continue;
            /* an in-place hand-over shares bytes at exactly one kernel */
            bool handover = chain_root(m, i) == chain_root(m, j) &&
                            (x->last == y->first || y->last == x->first) &&
                            !(x->first == y->first && x->last == y->last);
            if (handover) continue;
            mcir_error(d, plan_loc(),
                       "buffers '%s' [%lld, %lld) and '%s' [%lld, %lld) overlap in pool '%s' "
                       "while both live (kernels %d..%d and %d..%d)",
                       x->name, (long long)x->offset, (long long)(x->offset + x->size), y->name,
                       (long long)y->offset, (long long)(y->offset + y->size),
                       m->pool_names[x->pool], x->first, x->last, y->first, y->last);
            errors++;
        }
    }
    return errors == 0;
}
