/*
 * plan_json.c — the `plan` and `memory` artifacts (docs/cli.md):
 * field names are a contract; fields beyond the contract are additions
 * documented in docs/kernelplan.md.
 */
#include <jansson.h>

#include "kernelplan/launch.h"
#include "kernelplan/plan-impl.h"

static json_t *int_array(const int64_t *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

static json_t *tensor_names(mcir_tensor *const *t, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_string(t[i]->name));
    return a;
}

static json_t *access_json(const mcir_kernel_access *x) {
    json_t *o = json_object();
    json_object_set_new(o, "tensor", json_string(x->tensor->name));
    json_object_set_new(o, "logical", json_string(x->logical->name));
    json_object_set_new(o, "folded", json_string(x->folded->name));
    json_t *perm = json_array();
    for (int k = 0; k < x->rank; k++) json_array_append_new(perm, json_integer(x->perm[k]));
    json_object_set_new(o, "perm", perm);
    json_object_set_new(o, "strides", int_array(x->strides, x->rank));
    return o;
}

/* microseconds to 3 decimals: the model is not more precise than that */
static double round_us(double us) { return (double)(int64_t)(us * 1000.0 + 0.5) / 1000.0; }

/* The kernel as compiled (codegen/audit.c), docs/codegen.md "Kernel audit". */
/* A count of the SASS audit by width: b8_16, b32, b64, b128. */
static json_t *widths_json(const int *n) {
    return json_pack("{s:i, s:i, s:i, s:i}", "b8_16", n[MCIR_SASS_NARROW], "b32", n[MCIR_SASS_B32], "b64",
                     n[MCIR_SASS_B64], "b128", n[MCIR_SASS_B128]);
}

static void sass_counts_json(json_t *o, const mcir_sass_counts *c) {
    json_object_set_new(o, "instructions", json_integer(c->instructions));
    json_object_set_new(o, "ldg", widths_json(c->ldg));
    json_object_set_new(o, "stg", widths_json(c->stg));
    json_object_set_new(o, "lds", widths_json(c->lds));
    json_object_set_new(o, "sts", widths_json(c->sts));
    json_object_set_new(o, "ldsm", json_integer(c->ldsm));
    json_object_set_new(o, "stsm", json_integer(c->stsm));
    json_t *m = json_object();
#define MUFU_JSON(name, spelling) json_object_set_new(m, #name, json_integer(c->mufu[MCIR_MUFU_##name]));
    MCIR_SASS_MUFU(MUFU_JSON)
#undef MUFU_JSON
    json_object_set_new(o, "mufu", m);
    json_object_set_new(o, "fchk", json_integer(c->fchk));
    json_object_set_new(o, "slow_paths", json_integer(c->slow_paths));
    json_object_set_new(o, "int_div_calls", json_integer(c->int_div_calls));
    json_object_set_new(o, "calls", json_integer(c->calls));
}

/* audit.sass (codegen/sass.c; docs/codegen.md "Kernel audit"). */
static json_t *sass_json(const mcir_sass_audit *s) {
    json_t *o = json_object();
    json_object_set_new(o, "available", json_boolean(s->state > 0));
    if (s->state < 0) {
        json_object_set_new(o, "why", json_string(s->why));
        return o;
    }
    sass_counts_json(o, &s->kernel);
    json_object_set_new(o, "subroutine_instructions", json_integer(s->subroutine_instructions));
    json_object_set_new(o, "loops", json_integer(s->loops));
    json_t *ml = json_object();
    json_object_set_new(ml, "loops", json_integer(s->main_loops));
    sass_counts_json(ml, &s->loop);
    json_object_set_new(ml, "bytes", json_integer(s->loop_bytes));
    json_object_set_new(ml, "per_16b", json_real(round_us(s->per_16b)));
    json_object_set_new(ml, "weighted_per_16b", json_real(round_us(s->weighted_per_16b)));
    json_object_set_new(ml, "inflight_thread_bytes", json_integer(s->inflight_thread_bytes));
    json_object_set_new(ml, "inflight_sm_bytes", json_integer(s->inflight_sm_bytes));
    json_object_set_new(o, "mainloop", ml);
    json_object_set_new(o, "issue_us", s->issue_us >= 0 ? json_real(round_us(s->issue_us)) : json_null());
    json_object_set_new(o, "memory_us", s->memory_us >= 0 ? json_real(round_us(s->memory_us)) : json_null());
    json_t *wl = json_object();
    json_object_set_new(wl, "loops", json_integer(s->wgmma_loops));
    json_object_set_new(wl, "overlapped", json_integer(s->wgmma_loops_overlapped));
    json_object_set_new(wl, "instructions", json_integer(s->wgmma_loop_instructions));
    json_object_set_new(wl, "hgmma", json_integer(s->wgmma_loop_hgmma));
    json_object_set_new(wl, "ex2", json_integer(s->wgmma_loop_ex2));
    json_object_set_new(wl, "ex2_under_wgmma", json_integer(s->wgmma_loop_ex2_overlapped));
    json_object_set_new(o, "wgmma_loops", wl);
    if (s->item_loops) {
        json_t *il = json_object();
        json_object_set_new(il, "loops", json_integer(s->item_loops));
        json_object_set_new(il, "instructions", json_integer(s->item_instructions));
        json_object_set_new(il, "inner_loops", json_integer(s->item_inner_loops));
        if (s->item_tensor_clocks > 0) {
            json_object_set_new(il, "tensor_clocks", json_real(round_us(s->item_tensor_clocks)));
            json_object_set_new(il, "issue_ratio", json_real(round_us(s->item_issue_ratio)));
        }
        json_object_set_new(o, "item_loops", il);
    }
    if (s->setmaxnreg_regions) {
        json_t *r = json_array();
        for (int i = 0; i < s->setmaxnreg_regions && i < MCIR_SASS_MAXNREG_REGIONS; i++) {
            json_t *e = json_object();
            json_object_set_new(e, "count", json_integer(s->maxnreg_budget[i]));
            json_object_set_new(e, "registers", json_integer(s->maxnreg_used[i]));
            json_array_append_new(r, e);
        }
        json_object_set_new(o, "setmaxnreg", r);
        json_object_set_new(o, "setmaxnreg_over", json_integer(s->setmaxnreg_over));
    }
    if (s->tile_tensor_clocks > 0) {
        json_object_set_new(o, "tile_tensor_clocks", json_real(round_us(s->tile_tensor_clocks)));
        json_object_set_new(o, "tile_issue_ratio", json_real(round_us(s->tile_issue_ratio)));
    }
    return o;
}

static json_t *audit_json(const mcir_kernel_audit *a) {
    json_t *o = json_object();
    json_object_set_new(o, "entry", json_string(a->entry));
    json_object_set_new(o, "shared_by", json_integer(a->shared_by));
    json_object_set_new(o, "registers", json_integer(a->registers));
    json_object_set_new(o, "spill_store_bytes", json_integer(a->spill_store_bytes));
    json_object_set_new(o, "spill_load_bytes", json_integer(a->spill_load_bytes));
    json_object_set_new(o, "local_bytes", json_integer(a->local_bytes));
    json_object_set_new(o, "smem_static_bytes", json_integer(a->smem_static_bytes));
    json_object_set_new(o, "smem_dynamic_bytes", json_integer(a->smem_dynamic_bytes));
    json_t *occ = json_object();
    json_object_set_new(occ, "threads_per_block", json_integer(a->threads));
    json_object_set_new(occ, "blocks_per_sm", json_integer(a->blocks_per_sm));
    json_object_set_new(occ, "fraction", json_real(a->occupancy));
    json_object_set_new(occ, "limit", json_string(a->occupancy_limit ? a->occupancy_limit : ""));
    json_object_set_new(o, "occupancy", occ);
    json_t *ins = json_object();
    json_object_set_new(ins, "mma", json_integer(a->mma));
    json_object_set_new(ins, "wgmma", json_integer(a->wgmma));
    json_object_set_new(ins, "ldmatrix", json_integer(a->ldmatrix));
    json_object_set_new(ins, "cp_async", json_integer(a->cp_async));
    json_object_set_new(ins, "cp_async_bulk", json_integer(a->cp_async_bulk));
    static const char *const widths[] = {"scalar", "v2", "v4"};
    json_t *ld = json_object(), *st = json_object();
    for (int i = 0; i < 3; i++) {
        json_object_set_new(ld, widths[i], json_integer(a->ld_global[i]));
        json_object_set_new(st, widths[i], json_integer(a->st_global[i]));
    }
    json_object_set_new(ins, "ld_global", ld);
    json_object_set_new(ins, "st_global", st);
    json_t *ml = json_object();
    json_object_set_new(ml, "loops", json_integer(a->mainloop.loops));
    json_object_set_new(ml, "instructions", json_integer(a->mainloop.instructions));
#define MAINLOOP_JSON(name) json_object_set_new(ml, #name, json_integer(a->mainloop.name));
    MCIR_MAINLOOP_CLASSES(MAINLOOP_JSON)
#undef MAINLOOP_JSON
    json_object_set_new(ins, "mainloop", ml);
    json_object_set_new(o, "instructions", ins);
    json_object_set_new(o, "advisories", json_integer(a->advisories));
    if (a->advisories) json_object_set_new(o, "advisory", json_string(a->advisory));
    if (a->sass.state) json_object_set_new(o, "sass", sass_json(&a->sass));
    return o;
}

static json_t *kernel_json(const mcir_plan *p, const mcir_kernel_plan *k) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(k->name));
    json_t *nodes = json_array();
    for (int i = 0; i < k->n_nodes; i++) json_array_append_new(nodes, json_string(k->nodes[i]->name));
    json_object_set_new(o, "nodes", nodes);
    json_object_set_new(o, "anchor", json_string(k->anchor->name));
    json_object_set_new(o, "template", json_string(mcir_template_name(k->tpl)));

    const mcir_tiling *ti = &k->tiling;
    json_t *ts = json_object();
    json_t *tile = json_object();
    for (int i = 0; i < ti->n_dims; i++)
        json_object_set_new(tile, ti->dim_names[i], json_integer(ti->block_tile[i]));
    json_object_set_new(ts, "block_tile", tile);
    json_object_set_new(ts, "warps", json_integer(ti->warps));
    json_object_set_new(ts, "stages", json_integer(ti->stages));
    json_object_set_new(ts, "vector_width", json_integer(ti->vector_width));
    json_object_set_new(ts, "working_set_bytes", json_integer(ti->working_set_bytes));
    json_object_set_new(ts, "blocks_per_sm", json_integer(ti->blocks_per_sm));
    json_object_set_new(ts, "registers_estimate", json_integer(ti->registers_estimate));
    json_object_set_new(ts, "reason", json_string(ti->reason ? ti->reason : ""));
    json_object_set_new(o, "tiling_strategy", ts);

    json_object_set_new(o, "recompute_policy", json_string(k->recompute_policy));
    json_t *ss = json_object();
    json_object_set_new(ss, "kind", json_string(mcir_streaming_state_name(k->streaming_state)));
    json_t *per_row = json_array();
    for (const char *const *f = mcir_streaming_state_fields(k->streaming_state); *f; f++)
        json_array_append_new(per_row, json_string(*f));
    json_object_set_new(ss, "per_row", per_row);
    json_object_set_new(o, "streaming_state", ss);

    json_object_set_new(o, "reads", tensor_names(k->reads, k->n_reads));
    json_object_set_new(o, "writes", tensor_names(k->writes, k->n_writes));
    json_object_set_new(o, "internal", tensor_names(k->internal, k->n_internal));
    json_t *views = json_array();
    for (int i = 0; i < k->n_reads; i++)
        if (k->read_access[i].folded) json_array_append_new(views, access_json(&k->read_access[i]));
    for (int i = 0; i < k->n_writes; i++)
        if (k->write_access[i].folded)
            json_array_append_new(views, access_json(&k->write_access[i]));
    json_object_set_new(o, "strided_views", views);
    /* a state written over its input: the rows of each write it computes */
    for (int i = 0; k->windows && i < k->n_writes; i++) {
        mcir_extent st, len;
        if (k->windows[i].axis < 0 || !mcir_write_window_extents(&k->windows[i], &st, &len)) continue;
        json_t *ws = json_object_get(o, "write_windows");
        if (!ws) json_object_set_new(o, "write_windows", ws = json_array());
        char sb[96], lb[96];
        json_array_append_new(ws, json_pack("{s:s, s:i, s:s, s:s, s:I}", "tensor", k->writes[i]->name, "axis",
                                            k->windows[i].axis, "start", mcir_extent_str(p->graph, &st, sb, sizeof sb), "rows",
                                            mcir_extent_str(p->graph, &len, lb, sizeof lb), "elements",
                                            (json_int_t)mcir_kernel_write_items(k, i)));
    }
    if (k->tpl == MCIR_TEMPLATE_MATMUL) {
        json_object_set_new(o, "transpose_a", json_boolean(k->trans_a));
        json_object_set_new(o, "transpose_b", json_boolean(k->trans_b));
    }

    json_object_set_new(o, "grid", int_array(k->grid, 3));
    int64_t block[3] = {k->block[0], k->block[1], k->block[2]};
    json_object_set_new(o, "block", int_array(block, 3));
    json_object_set_new(o, "smem_bytes", json_integer(k->smem_bytes));
    json_object_set_new(o, "smem_static_bytes", json_integer(k->smem_static_bytes));
    json_object_set_new(o, "scratch_bytes", json_integer(k->scratch_bytes));
    if (k->sched_bytes > 0)   /* a dynamic persistent scheduler's counters (launch_sm90.c) */
        json_object_set_new(o, "sched_bytes", json_integer(k->sched_bytes));
    /* split-KV attention's second kernel, NAME_merge (launch.c) */
    mcir_launch la;
    if (k->tpl == MCIR_TEMPLATE_STREAMING_ATTENTION && mcir_launch_of(p->target, p->graph, k, &la, NULL) &&
        la.merge_grid > 0) {
        json_t *mg = json_object();
        json_object_set_new(mg, "name", json_string(mcir_arena_printf(p->arena, "%s_merge", k->name)));
        int64_t grid[3] = {la.merge_grid, 1, 1}, mblock[3] = {la.merge_block, 1, 1};
        json_object_set_new(mg, "grid", int_array(grid, 3));
        json_object_set_new(mg, "block", int_array(mblock, 3));
        json_object_set_new(mg, "smem_bytes", json_integer(0));
        json_object_set_new(o, "merge", mg);
    }
    json_object_set_new(o, "library", k->library ? json_string(k->library) : json_null());
    json_object_set_new(o, "library_op", k->library_op ? json_string(k->library_op) : json_null());
    if (k->registers >= 0) json_object_set_new(o, "registers", json_integer(k->registers));
    if (k->spill_bytes >= 0) json_object_set_new(o, "spill_bytes", json_integer(k->spill_bytes));
    if (k->size_generic) {   /* a graph with a range of sizes (codegen.c) */
        json_object_set_new(o, "size_generic", json_boolean(k->size_generic > 0));
        if (k->size_generic < 0 && k->not_size_generic)
            json_object_set_new(o, "not_size_generic", json_string(k->not_size_generic));
    }
    if (k->launch_min_blocks > 0)   /* recompiled for the plan's occupancy (codegen.c) */
        json_object_set_new(o, "launch_min_blocks", json_integer(k->launch_min_blocks));
    if (k->audit.valid) {
        json_t *a = audit_json(&k->audit);
        if (k->epilogue_audit.valid) json_object_set_new(a, "epilogue", audit_json(&k->epilogue_audit));
        json_object_set_new(o, "audit", a);
    }

    /* the cost model (cost.c): traffic, flops, launches, roofline time */
    mcir_kernel_cost c;
    mcir_cost_kernel(k, p->target, NULL, &c);
    json_object_set_new(o, "hbm_bytes", json_integer(c.hbm_bytes));
    json_object_set_new(o, "global_bytes", json_integer(c.global_bytes));
    json_object_set_new(o, "flops", json_real(c.flops));
    json_object_set_new(o, "launches", json_integer(c.launches));
    json_object_set_new(o, "modelled_us", json_real(round_us(c.modelled_us)));
    json_t *cm = json_object();
    json_object_set_new(cm, "library", c.library ? json_string(c.library) : json_null());
    json_object_set_new(cm, "unit", json_string(c.unit));
    json_object_set_new(cm, "staging_bytes", json_integer(c.staging_bytes));
    json_object_set_new(cm, "l2_spill_bytes", json_integer(c.l2_spill_bytes));
    json_object_set_new(cm, "memory_us", json_real(round_us(c.memory_us)));
    json_object_set_new(cm, "compute_us", json_real(round_us(c.compute_us)));
    json_object_set_new(cm, "issue_us", json_real(round_us(c.issue_us)));
    json_object_set_new(cm, "launch_us", json_real(round_us(c.launch_us)));
    if (c.tile_clk > 0) {   /* the sm_90a attention's pipeline, SM clocks per K/V tile of a block */
        json_object_set_new(cm, "tile_tensor_clocks", json_real(round_us(c.tile_tensor_clk)));
        json_object_set_new(cm, "tile_issue_clocks", json_real(round_us(c.tile_issue_clk)));
        json_object_set_new(cm, "tile_l2_clocks", json_real(round_us(c.tile_l2_clk)));
        json_object_set_new(cm, "tile_clocks", json_real(round_us(c.tile_clk)));
        json_object_set_new(cm, "tile_exposed_clocks", json_real(round_us(c.tile_exposed_clk)));
        json_object_set_new(cm, "items_per_block", json_real(round_us(c.items_per_block)));
    }
    json_object_set_new(o, "cost_model", cm);
    return o;
}

static json_t *totals_json(const mcir_plan *p) {
    mcir_plan_cost c;
    mcir_cost_plan(p, &c);
    json_t *o = json_object();
    json_object_set_new(o, "launches", json_integer(c.launches));
    json_object_set_new(o, "hbm_bytes", json_integer(c.hbm_bytes));
    json_object_set_new(o, "global_bytes", json_integer(c.global_bytes));
    json_object_set_new(o, "flops", json_real(c.flops));
    json_object_set_new(o, "modelled_us", json_real(round_us(c.modelled_us)));
    json_object_set_new(o, "compulsory_bytes", json_integer(c.compulsory_bytes));
    json_object_set_new(o, "unfused_hbm_bytes",
                        c.unfused_hbm_bytes > 0 ? json_integer(c.unfused_hbm_bytes) : json_null());
    return o;
}

static bool dump(json_t *root, FILE *out) {
    int rc = json_dumpf(root, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (rc != 0) return false;
    fputc('\n', out);
    return !ferror(out);
}

/* A graph with symbolic dims (docs/graph-format.md "Symbolic dimensions"): each
 * dimension's range and the size `at_key` says the plan is specialised
 * at, or the arena planned at: the graph's binding, its largest sizes. */
static json_t *dims_json(const mcir_graph *g, const char *at_key) {
    json_t *dims = json_object();
    for (int k = 0; k < g->n_dims; k++)
        json_object_set_new(dims, g->dims[k].name,
                            json_pack("{s:I, s:I, s:I}", "min", (json_int_t)g->dims[k].min, "max",
                                      (json_int_t)g->dims[k].max, at_key,
                                      (json_int_t)g->dims[k].value));
    return dims;
}

/* Whether the arena planned at the largest sizes holds every size in
 * range: each buffer's element count is largest there (an extent such as
 * 256-past is not; then it is not a bound, and memory.json says so). */
static bool arena_is_bound(const mcir_memplan *m, const mcir_graph *g) {
    for (int i = 0; i < m->n_buffers; i++) {
        const mcir_tensor *t = mcir_graph_find_tensor(g, m->buffers[i].name);
        if (!t || !t->sym) continue;
        mcir_extent numel = mcir_extent_const(1);
        int64_t lo, hi;
        for (int k = 0; k < t->rank; k++) {
            mcir_extent e = mcir_tensor_extent(t, k);
            if (!mcir_extent_mul(&numel, &e, &numel)) return false;
        }
        mcir_extent_bounds(g, &numel, &lo, &hi);
        if (hi > mcir_tensor_numel(t)) return false;
    }
    return true;
}

bool mcir_plan_write_json(const mcir_plan *p, FILE *out) {
    json_t *root = json_object();
    json_object_set_new(root, "arch", json_string(p->target->name));
    json_object_set_new(root, "graph", json_string(p->graph->name));
    json_object_set_new(root, "exact_math", json_boolean(p->exact_math));
    if (p->graph->n_dims)   /* kernels are generated for these sizes only */
        json_object_set_new(root, "dims", dims_json(p->graph, "specialised_at"));
    json_t *ks = json_array();
    for (int k = 0; k < p->n_kernels; k++)
        json_array_append_new(ks, kernel_json(p, &p->kernels[k]));
    json_object_set_new(root, "kernels", ks);
    json_t *aliases = json_array();
    for (int i = 0; i < p->n_alias_nodes; i++) {
        const mcir_node *n = p->alias_nodes[i];
        json_t *o = json_object();
        json_object_set_new(o, "node", json_string(n->name));
        json_object_set_new(o, "template", json_string(mcir_template_name(MCIR_TEMPLATE_ALIAS)));
        json_object_set_new(o, "tensor", json_string(n->outputs[0]->name));
        json_object_set_new(o, "root", json_string(p->alias_root[n->outputs[0]->id]->name));
        json_array_append_new(aliases, o);
    }
    json_object_set_new(root, "aliases", aliases);
    json_object_set_new(root, "totals", totals_json(p));
    return dump(root, out);
}

bool mcir_memplan_write_json(const mcir_memplan *m, const mcir_plan *p, FILE *out) {
    json_t *root = json_object();
    json_object_set_new(root, "planner", json_string(m->planner));
    if (p && p->graph->n_dims) {   /* the arena holds the largest sizes */
        json_object_set_new(root, "dims", dims_json(p->graph, "planned_at"));
        json_object_set_new(root, "bound_for_every_size", json_boolean(arena_is_bound(m, p->graph)));
    }
    json_object_set_new(root, "algorithm", json_string(m->algorithm));
    json_object_set_new(root, "optimal", json_boolean(m->optimal));
    json_object_set_new(root, "alignment", json_integer(m->alignment));
    json_object_set_new(root, "arena_bytes", json_integer(m->arena_bytes));
    json_object_set_new(root, "lower_bound_bytes", json_integer(m->lower_bound_bytes));
    json_t *pools = json_array();
    for (int i = 0; i < m->n_pools; i++)
        json_array_append_new(pools, json_pack("{s:s, s:I, s:I}", "name", m->pool_names[i],
                                               "capacity", (json_int_t)m->pool_capacity[i],
                                               "bytes", (json_int_t)m->pool_bytes[i]));
    json_object_set_new(root, "pools", pools);
    json_t *bufs = json_array();
    for (int i = 0; i < m->n_buffers; i++) {
        const mcir_buffer_plan *b = &m->buffers[i];
        json_t *o = json_object();
        json_object_set_new(o, "tensor", json_string(b->name));
        json_object_set_new(o, "size", json_integer(b->size));
        json_object_set_new(o, "offset", json_integer(b->offset));
        json_object_set_new(o, "first", json_integer(b->first));
        json_object_set_new(o, "last", json_integer(b->last));
        json_object_set_new(o, "pool", json_string(m->pool_names[b->pool]));
        json_object_set_new(o, "kind", json_string(b->tensor ? "tensor" : "scratch"));
        if (b->share_with >= 0)
            json_object_set_new(o, "inplace_of", json_string(m->buffers[b->share_with].name));
        json_array_append_new(bufs, o);
    }
    json_object_set_new(root, "buffers", bufs);
    /* states (graph.json "state"): outside the arena, like every graph
     * input and output; one device buffer per pair where the output is
     * written over the input ("buffer": the input's), else two */
    json_t *states = json_array();
    for (int i = 0; p && i < p->graph->n_outputs; i++) {
        const mcir_tensor *o = p->graph->outputs[i];
        if (!o->state_input) continue;
        bool shared = p->alias_root[o->id] == o->state_input;
        json_array_append_new(states, json_pack("{s:s, s:s, s:I, s:b, s:s}", "input", o->state_input->name, "output",
                                                o->name, "bytes", (json_int_t)mcir_tensor_bytes(o), "in_place", shared,
                                                "buffer", p->alias_root[o->id]->name));
    }
    if (json_array_size(states)) json_object_set_new(root, "states", states);
    else json_decref(states);
    return dump(root, out);
}
