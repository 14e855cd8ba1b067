/*
 * test_kernelplan.c — the kernel partition (fused groups, reshape aliases,
 * folded and unfoldable transposes), tile choice against the targets'
 * shared memory, the graph-side memory plan (liveness, in place, pools),
 * the independent checker on every planner over the example graphs, and
 * the acceptance: the default planner reaches the lower bound on the
 * example transformer and CNN graphs.
 */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "kernelplan/kernelplan.h"
#include "test_util.h"
#ifdef MCIR_KP_REWRITES
#include "rewrites/rewrites.h"
#endif

/* ------------------------------------------------------------- helpers */

static mcir_diag quiet(void) {
    static FILE *sink;
    if (!sink) sink = fopen("/dev/null", "w");
    return mcir_diag_to(sink);
}

static mcir_tensor *input(mcir_graph *g, const char *name, mcir_dtype dt, int rank,
                          const int64_t *shape) {
    return mcir_graph_add_tensor(g, name, dt, rank, shape, MCIR_TENSOR_INPUT);
}

static mcir_tensor *weight(mcir_graph *g, const char *name, mcir_dtype dt, int rank,
                           const int64_t *shape) {
    return mcir_graph_add_tensor(g, name, dt, rank, shape, MCIR_TENSOR_WEIGHT);
}

/* Adds a one-output node; the output's shape comes from inference. */
static mcir_node *node(mcir_graph *g, mcir_op op, const char *name, int n_in,
                       mcir_tensor *const *in, const char *out) {
    mcir_tensor *o = mcir_graph_add_tensor(g, out, in[0]->dtype, -1, NULL,
                                           MCIR_TENSOR_INTERMEDIATE);
    ck_assert_ptr_nonnull(o);
    return mcir_graph_add_node(g, op, name, n_in, in, 1, &o);
}

static mcir_tensor *out_of(mcir_node *n) { return n->outputs[0]; }

static void finish(mcir_graph *g, mcir_tensor *y) {
    mcir_diag d = mcir_diag_stderr();
    mcir_graph_mark_output(g, y);
    ck_assert(mcir_graph_sort(g, &d));
    ck_assert(mcir_graph_infer(g, &d));
    ck_assert(mcir_graph_verify(g, &d));
}

static mcir_plan *plan_of(mcir_graph *g, const char *arch) {
    mcir_diag d = mcir_diag_stderr();
    mcir_plan *p = mcir_plan_build(g, mcir_target_find(arch), NULL, &d);
    ck_assert_ptr_nonnull(p);
    ck_assert(mcir_plan_verify(p, &d));
    return p;
}

static bool kernel_has_node(const mcir_kernel_plan *k, const char *name) {
    for (int i = 0; i < k->n_nodes; i++)
        if (!strcmp(k->nodes[i]->name, name)) return true;
    return false;
}

static bool has_tensor(mcir_tensor *const *ts, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(ts[i]->name, name)) return true;
    return false;
}

static mcir_memplan *memory_of(const mcir_plan *p, const char *planner) {
    mcir_diag d = mcir_diag_stderr();
    mcir_memplan_build_options o = {.planner = planner, .time_limit_s = 2};
    mcir_memplan *m = mcir_memplan_build(p, &o, NULL, &d);
    ck_assert_ptr_nonnull(m);
    ck_assert(mcir_memplan_verify(m, &d));
    return m;
}

/* ----------------------------------------------------------- partition */

START_TEST(fused_group_is_one_kernel) {
    mcir_graph *g = mcir_graph_new("fuse");
    int64_t s[] = {4, 256};
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F32, 2, s);
    mcir_tensor *b = weight(g, "b", MCIR_DTYPE_F32, 1, &s[1]);
    mcir_node *add = node(g, MCIR_OP_ADD, "add", 2, (mcir_tensor *[]){x, b}, "a");
    mcir_node *relu = node(g, MCIR_OP_RELU, "relu", 1, (mcir_tensor *[]){out_of(add)}, "r");
    mcir_node *mul = node(g, MCIR_OP_MUL, "mul", 2, (mcir_tensor *[]){out_of(relu), x}, "y");
    add->group = relu->group = mul->group = 7;
    finish(g, out_of(mul));
    mcir_trace *tr = mcir_trace_new();
    mcir_diag d = mcir_diag_stderr();
    mcir_plan *p = mcir_plan_build(g, mcir_target_find("sm_90"), tr, &d);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(p->n_kernels, 1);
    const mcir_kernel_plan *k = &p->kernels[0];
    ck_assert_int_eq(k->tpl, MCIR_TEMPLATE_ELEMENTWISE);
    ck_assert_int_eq(k->n_nodes, 3);
    ck_assert_int_eq(k->n_internal, 2);
    ck_assert_int_eq(k->n_reads, 2);
    ck_assert_int_eq(k->n_writes, 1);
    ck_assert_str_eq(k->writes[0]->name, "y");
    ck_assert_str_eq(k->recompute_policy, "recompute_in_consumer");
    ck_assert_int_eq(k->block[0], 256);
    ck_assert_int_eq(k->tiling.vector_width, 4);   /* f32: 16 bytes a lane */
    ck_assert_int_eq(k->grid[0], 1);                /* 1024 elements = 256 vectors */
    /* one partition record naming the kernel */
    int records = 0;
    for (int i = 0; i < mcir_trace_count(tr); i++) {
        json_t *r = mcir_trace_get(tr, i);
        if (!strcmp(json_string_value(json_object_get(r, "rule")), "partition")) {
            records++;
            ck_assert_str_eq(json_string_value(json_array_get(json_object_get(r, "result"), 0)),
                             k->name);
            ck_assert_int_eq(json_array_size(json_object_get(r, "matched")), 3);
        }
    }
    ck_assert_int_eq(records, 1);
    /* nothing in the arena: internals are never stored */
    mcir_memplan *m = memory_of(p, NULL);
    ck_assert_int_eq(m->n_buffers, 0);
    ck_assert_int_eq(m->arena_bytes, 0);
    mcir_memplan_free(m);
    mcir_plan_free(p);
    mcir_trace_free(tr);
    mcir_graph_free(g);
}
END_TEST

START_TEST(ungrouped_nodes_are_kernels_each) {
    mcir_graph *g = mcir_graph_new("chain");
    int64_t s[] = {1000};
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F32, 1, s);
    mcir_node *a = node(g, MCIR_OP_EXP, "e", 1, &x, "a");
    mcir_node *b = node(g, MCIR_OP_NEG, "n", 1, (mcir_tensor *[]){out_of(a)}, "y");
    finish(g, out_of(b));
    mcir_plan *p = plan_of(g, "sm_80");
    ck_assert_int_eq(p->n_kernels, 2);
    ck_assert_int_eq(p->first_use[out_of(a)->id], 0);
    ck_assert_int_eq(p->last_use[out_of(a)->id], 1);
    ck_assert_str_eq(p->kernels[0].recompute_policy, "none");
    ck_assert_int_eq(p->kernels[0].tiling.vector_width, 4);   /* the elementwise template: 16 bytes a lane */
    mcir_memplan *m = memory_of(p, NULL);
    ck_assert_int_eq(m->n_buffers, 1);
    ck_assert_int_eq(m->buffers[0].size, 4000);
    ck_assert_int_eq(m->lower_bound_bytes, 4096);   /* aligned to 256 */
    ck_assert_int_eq(m->arena_bytes, 4096);
    mcir_memplan_free(m);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

START_TEST(reshape_is_an_alias) {
    mcir_graph *g = mcir_graph_new("alias");
    int64_t s[] = {8, 64};
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F32, 2, s);
    mcir_node *r1 = node(g, MCIR_OP_RELU, "r1", 1, &x, "a");
    mcir_node *rs = node(g, MCIR_OP_RESHAPE, "rs", 1, (mcir_tensor *[]){out_of(r1)}, "b");
    mcir_node_set_ints(g, rs, "shape", 3, (int64_t[]){8, 8, 8});
    mcir_node *r2 = node(g, MCIR_OP_EXP, "r2", 1, (mcir_tensor *[]){out_of(rs)}, "c");
    mcir_node *r3 = node(g, MCIR_OP_NEG, "r3", 1, (mcir_tensor *[]){out_of(rs)}, "d");
    mcir_node *r4 = node(g, MCIR_OP_ADD, "r4", 2, (mcir_tensor *[]){out_of(r2), out_of(r3)}, "y");
    finish(g, out_of(r4));
    mcir_plan *p = plan_of(g, "sm_90");
    ck_assert_int_eq(p->n_kernels, 4);              /* r1, r2, r3, r4: no kernel for rs */
    for (int k = 0; k < p->n_kernels; k++) ck_assert(!kernel_has_node(&p->kernels[k], "rs"));
    ck_assert_int_eq(p->n_alias_nodes, 1);
    ck_assert_ptr_eq(p->alias_root[out_of(rs)->id], out_of(r1));
    /* the alias's readers extend the root's life */
    ck_assert_int_eq(p->last_use[out_of(r1)->id], 2);
    mcir_memplan *m = memory_of(p, NULL);
    int pa, pb;
    int64_t oa, ob;
    ck_assert(mcir_memplan_locate(m, p, out_of(r1), &pa, &oa));
    ck_assert(mcir_memplan_locate(m, p, out_of(rs), &pb, &ob));
    ck_assert_int_eq(oa, ob);
    ck_assert_int_eq(pa, pb);
    ck_assert(!mcir_memplan_locate(m, p, x, NULL, NULL));
    for (int i = 0; i < m->n_buffers; i++) ck_assert_str_ne(m->buffers[i].name, "b");
    ck_assert_int_eq(m->n_buffers, 3);   /* a, c, d */
    mcir_memplan_free(m);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

START_TEST(reshape_to_output_writes_into_the_output) {
    mcir_graph *g = mcir_graph_new("alias_out");
    int64_t s[] = {8, 64};
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F32, 2, s);
    mcir_node *r1 = node(g, MCIR_OP_RELU, "r1", 1, &x, "a");
    mcir_node *rs = node(g, MCIR_OP_RESHAPE, "rs", 1, (mcir_tensor *[]){out_of(r1)}, "y");
    mcir_node_set_ints(g, rs, "shape", 1, (int64_t[]){512});
    finish(g, out_of(rs));
    mcir_plan *p = plan_of(g, "sm_90");
    ck_assert_int_eq(p->n_kernels, 1);
    ck_assert_ptr_eq(p->alias_root[out_of(r1)->id], out_of(rs));
    mcir_memplan *m = memory_of(p, NULL);
    ck_assert_int_eq(m->n_buffers, 0);
    mcir_memplan_free(m);
    mcir_plan_free(p);
    mcir_graph_free(g);
    /* input reshaped straight to an output: two storages, a copy */
    g = mcir_graph_new("copy_out");
    x = input(g, "x", MCIR_DTYPE_F32, 2, s);
    rs = node(g, MCIR_OP_RESHAPE, "rs", 1, &x, "y");
    mcir_node_set_ints(g, rs, "shape", 1, (int64_t[]){512});
    finish(g, out_of(rs));
    p = plan_of(g, "sm_90");
    ck_assert_int_eq(p->n_kernels, 1);
    ck_assert_int_eq(p->kernels[0].tpl, MCIR_TEMPLATE_COPY);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

START_TEST(transpose_folds_into_matmul) {
    mcir_graph *g = mcir_graph_new("mm");
    mcir_tensor *a = input(g, "a", MCIR_DTYPE_F16, 3, (int64_t[]){2, 64, 32});
    mcir_tensor *b = input(g, "b", MCIR_DTYPE_F16, 3, (int64_t[]){2, 48, 32});
    mcir_node *t = node(g, MCIR_OP_TRANSPOSE, "bt", 1, &b, "bT");
    mcir_node_set_ints(g, t, "perm", 3, (int64_t[]){0, 2, 1});
    mcir_node *mm = node(g, MCIR_OP_MATMUL, "mm", 2, (mcir_tensor *[]){a, out_of(t)}, "y");
    finish(g, out_of(mm));
    mcir_trace *tr = mcir_trace_new();
    mcir_diag d = mcir_diag_stderr();
    mcir_plan *p = mcir_plan_build(g, mcir_target_find("sm_80"), tr, &d);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(p->n_kernels, 1);
    const mcir_kernel_plan *k = &p->kernels[0];
    ck_assert_int_eq(k->tpl, MCIR_TEMPLATE_MATMUL);
    ck_assert(kernel_has_node(k, "bt"));
    ck_assert(!k->trans_a);
    ck_assert(k->trans_b);
    ck_assert(has_tensor(k->reads, k->n_reads, "b"));
    ck_assert(!has_tensor(k->reads, k->n_reads, "bT"));
    const mcir_kernel_access *x = mcir_kernel_access_of(k, out_of(t));
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_eq(x->tensor, b);
    ck_assert_ptr_eq(x->folded, t);
    /* bT [2, 32, 48] viewed in b [2, 48, 32]: strides 1536, 1, 32 */
    ck_assert_int_eq(x->strides[0], 1536);
    ck_assert_int_eq(x->strides[1], 1);
    ck_assert_int_eq(x->strides[2], 32);
    /* one block per (batch, M tile, N tile) work item of the plan's tile */
    int64_t bm = k->tiling.block_tile[0], bn = k->tiling.block_tile[1];
    ck_assert_int_eq(k->grid[0], 2 * ((64 + bm - 1) / bm) * ((48 + bn - 1) / bn));
    ck_assert_int_eq(k->block[0], 32 * k->tiling.warps);
    /* the fold is in the trace, applied */
    bool seen = false;
    for (int i = 0; i < mcir_trace_count(tr); i++) {
        json_t *r = mcir_trace_get(tr, i);
        if (!strcmp(json_string_value(json_object_get(r, "rule")), "fold_transpose")) {
            seen = true;
            ck_assert_str_eq(json_string_value(json_object_get(r, "decision")), "applied");
        }
    }
    ck_assert(seen);
    mcir_plan_free(p);
    mcir_trace_free(tr);
    mcir_graph_free(g);
}
END_TEST

/* q/k/v [1, N, H, d] -> transpose [0,2,1,3] -> attention -> transpose back
 * -> reshape [1, N, H*d] as the graph output. */
static mcir_graph *heads_graph(int64_t n, int64_t h, int64_t dh, mcir_dtype dt) {
    mcir_graph *g = mcir_graph_new("heads");
    int64_t s[] = {1, n, h, dh};
    mcir_tensor *in[3];
    const char *nm[] = {"q", "k", "v"};
    mcir_tensor *hd[3];
    for (int i = 0; i < 3; i++) {
        in[i] = input(g, nm[i], dt, 4, s);
        mcir_node *t = node(g, MCIR_OP_TRANSPOSE, mcir_arena_printf(g->arena, "%s_t", nm[i]), 1,
                            &in[i], mcir_arena_printf(g->arena, "%s_h", nm[i]));
        mcir_node_set_ints(g, t, "perm", 4, (int64_t[]){0, 2, 1, 3});
        hd[i] = out_of(t);
    }
    mcir_node *att = node(g, MCIR_OP_ATTENTION, "att", 3, hd, "o");
    mcir_node *back = node(g, MCIR_OP_TRANSPOSE, "o_t", 1, (mcir_tensor *[]){out_of(att)}, "o_m");
    mcir_node_set_ints(g, back, "perm", 4, (int64_t[]){0, 2, 1, 3});
    mcir_node *rs = node(g, MCIR_OP_RESHAPE, "merge", 1, (mcir_tensor *[]){out_of(back)}, "y");
    mcir_node_set_ints(g, rs, "shape", 3, (int64_t[]){1, n, h * dh});
    finish(g, out_of(rs));
    return g;
}

START_TEST(transposes_fold_into_attention) {
    mcir_graph *g = heads_graph(128, 12, 64, MCIR_DTYPE_F16);
    mcir_plan *p = plan_of(g, "sm_90");
    ck_assert_int_eq(p->n_kernels, 1);
    const mcir_kernel_plan *k = &p->kernels[0];
    ck_assert_int_eq(k->tpl, MCIR_TEMPLATE_STREAMING_ATTENTION);
    ck_assert_int_eq(k->streaming_state, MCIR_STREAM_SOFTMAX);
    ck_assert_str_eq(k->recompute_policy, "stream_tiles");
    ck_assert_int_eq(k->n_nodes, 5);   /* 3 transposes in, attention, 1 out */
    ck_assert_int_eq(k->n_reads, 3);
    ck_assert_str_eq(k->reads[0]->name, "q");
    const mcir_kernel_access *q = mcir_kernel_access_of(k, g->tensors[mcir_graph_find_tensor(g, "q_h")->id]);
    ck_assert_ptr_nonnull(q);
    /* q_h [1, 12, 128, 64] read from q [1, 128, 12, 64] */
    ck_assert_int_eq(q->strides[0], 98304);
    ck_assert_int_eq(q->strides[1], 64);
    ck_assert_int_eq(q->strides[2], 768);
    ck_assert_int_eq(q->strides[3], 1);
    /* written straight in the merged layout */
    ck_assert_int_eq(k->n_writes, 1);
    ck_assert_str_eq(k->writes[0]->name, "o_m");
    const mcir_kernel_access *o = mcir_kernel_access_of(k, mcir_graph_find_tensor(g, "o"));
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(o->strides[1], 64);
    ck_assert_int_eq(o->strides[2], 768);
    ck_assert(has_tensor(k->internal, k->n_internal, "o"));
    /* one block per (batch*head, Q tile): ceil(Nq/BLOCK_M) x 12 */
    ck_assert_int_eq(k->grid[0], 12 * (128 / k->tiling.block_tile[0]));
    ck_assert_int_eq(k->grid[1], 1);
    /* the output reshape aliases the written tensor onto the graph output */
    mcir_memplan *m = memory_of(p, NULL);
    ck_assert_int_eq(m->n_buffers, 0);
    mcir_memplan_free(m);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

START_TEST(head_split_folds_into_elementwise_and_slices) {
    mcir_graph *g = mcir_graph_new("rope_in");
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F32, 4, (int64_t[]){1, 16, 4, 8});
    mcir_tensor *cs = weight(g, "cos", MCIR_DTYPE_F32, 2, (int64_t[]){16, 8});
    mcir_node *e = node(g, MCIR_OP_EXP, "e", 1, &x, "ex");
    mcir_node *t = node(g, MCIR_OP_TRANSPOSE, "heads", 1, (mcir_tensor *[]){out_of(e)}, "h");
    mcir_node_set_ints(g, t, "perm", 4, (int64_t[]){0, 2, 1, 3});
    mcir_node *m = node(g, MCIR_OP_MUL, "mc", 2, (mcir_tensor *[]){out_of(t), cs}, "hc");
    mcir_node *sl = node(g, MCIR_OP_SLICE, "lo", 1, (mcir_tensor *[]){out_of(t)}, "hl");
    mcir_node_set_int(g, sl, "axis", -1);
    mcir_node_set_int(g, sl, "start", 0);
    mcir_node_set_int(g, sl, "end", 8);
    mcir_node *ad = node(g, MCIR_OP_ADD, "ad", 2, (mcir_tensor *[]){out_of(m), out_of(sl)}, "y");
    finish(g, out_of(ad));
    mcir_plan *p = plan_of(g, "sm_90");
    ck_assert_int_eq(p->n_kernels, 4);   /* e, mc, lo, ad: no copy for the transpose */
    const mcir_kernel_plan *k = &p->kernels[1];
    ck_assert(kernel_has_node(k, "heads"));
    ck_assert_ptr_eq(k->reads[0], out_of(e));
    /* a vector at a time: cos loaded 16 bytes a lane, the transposed read
     * (the folded head split) a lane at a time */
    ck_assert_int_eq(k->tiling.vector_width, 4);
    const mcir_kernel_access *h = mcir_kernel_access_of(k, out_of(t));
    ck_assert_int_eq(h->strides[1], 8);
    ck_assert_int_eq(h->strides[2], 32);
    ck_assert(kernel_has_node(&p->kernels[2], "heads"));
    ck_assert_int_eq(p->last_use[out_of(e)->id], 2);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

/* x -> exp -> split in three along the last axis -> per part reshape to
 * heads and transpose -> attention (GPT-2's fused QKV), and a fourth part
 * read by `reader` (an op name) so the split's fate can be steered. */
static mcir_graph *split_qkv_graph(mcir_op reader) {
    mcir_graph *g = mcir_graph_new("split");
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F32, 3, (int64_t[]){1, 16, 128});
    mcir_node *e = node(g, MCIR_OP_EXP, "e", 1, &x, "ex");
    mcir_tensor *parts[4];
    const char *names[] = {"q", "k", "v", "r"};
    for (int i = 0; i < 4; i++)
        parts[i] = mcir_graph_add_tensor(g, names[i], MCIR_DTYPE_F32, -1, NULL,
                                         MCIR_TENSOR_INTERMEDIATE);
    mcir_node *sp = mcir_graph_add_node(g, MCIR_OP_SPLIT, "sp", 1, (mcir_tensor *[]){out_of(e)},
                                        4, parts);
    mcir_node_set_int(g, sp, "axis", -1);
    mcir_node_set_ints(g, sp, "sizes", 4, (int64_t[]){32, 32, 32, 32});
    mcir_tensor *h[3];
    for (int i = 0; i < 3; i++) {
        mcir_node *rs = node(g, MCIR_OP_RESHAPE, mcir_arena_printf(g->arena, "rs%d", i), 1,
                             &parts[i], mcir_arena_printf(g->arena, "%s_s", names[i]));
        mcir_node_set_ints(g, rs, "shape", 4, (int64_t[]){1, 16, 2, 16});
        mcir_node *t = node(g, MCIR_OP_TRANSPOSE, mcir_arena_printf(g->arena, "t%d", i), 1,
                            (mcir_tensor *[]){out_of(rs)},
                            mcir_arena_printf(g->arena, "%s_h", names[i]));
        mcir_node_set_ints(g, t, "perm", 4, (int64_t[]){0, 2, 1, 3});
        h[i] = out_of(t);
    }
    mcir_node *at = node(g, MCIR_OP_ATTENTION, "att", 3, h, "o");
    mcir_tensor *w = weight(g, "w", MCIR_DTYPE_F32, 2, (int64_t[]){32, 8});
    mcir_node *rd = reader == MCIR_OP_MATMUL
                        ? node(g, MCIR_OP_MATMUL, "rd", 2, (mcir_tensor *[]){parts[3], w}, "z")
                        : node(g, reader, "rd", 1, &parts[3], "z");
    mcir_graph_mark_output(g, out_of(rd));
    finish(g, out_of(at));
    return g;
}

START_TEST(split_folds_into_strided_views) {
    mcir_graph *g = split_qkv_graph(MCIR_OP_RELU);
    mcir_trace *tr = mcir_trace_new();
    mcir_diag d = mcir_diag_stderr();
    mcir_plan *p = mcir_plan_build(g, mcir_target_find("sm_90"), tr, &d);
    ck_assert_ptr_nonnull(p);
    ck_assert(mcir_plan_verify(p, &d));
    ck_assert_int_eq(p->n_kernels, 3);   /* exp, attention, relu: no copy for the split */
    const mcir_kernel_plan *k = &p->kernels[1];
    ck_assert_int_eq(k->tpl, MCIR_TEMPLATE_STREAMING_ATTENTION);
    ck_assert(kernel_has_node(k, "sp"));
    ck_assert(kernel_has_node(k, "rs1"));
    ck_assert_int_eq(k->n_reads, 3);
    const mcir_kernel_access *kv = mcir_kernel_access_of(k, mcir_graph_find_tensor(g, "k_h"));
    ck_assert_ptr_nonnull(kv);
    ck_assert_str_eq(kv->tensor->name, "ex");   /* the bytes: the split's input */
    /* k_h [1, 2, 16, 16] inside ex [1, 16, 128]: heads 16 apart, rows 128 */
    ck_assert_int_eq(kv->strides[1], 16);
    ck_assert_int_eq(kv->strides[2], 128);
    ck_assert_int_eq(kv->strides[3], 1);
    ck_assert(kernel_has_node(&p->kernels[2], "sp"));
    ck_assert_str_eq(p->kernels[2].reads[0]->name, "ex");
    ck_assert_int_eq(p->last_use[mcir_graph_find_tensor(g, "ex")->id], 2);
    bool applied = false;
    for (int i = 0; i < mcir_trace_count(tr); i++) {
        json_t *r = mcir_trace_get(tr, i);
        if (!strcmp(json_string_value(json_object_get(r, "rule")), "split_view"))
            applied = !strcmp(json_string_value(json_object_get(r, "decision")), "applied");
    }
    ck_assert(applied);
    mcir_memplan *m = memory_of(p, NULL);
    ck_assert_int_eq(m->n_buffers, 1);   /* ex only */
    mcir_memplan_free(m);
    mcir_plan_free(p);
    mcir_trace_free(tr);
    mcir_graph_free(g);

    /* a part read whole by a matmul: the split stays a copy */
    g = split_qkv_graph(MCIR_OP_MATMUL);
    p = plan_of(g, "sm_90");
    ck_assert_int_eq(p->n_kernels, 4);
    ck_assert_int_eq(p->kernels[1].tpl, MCIR_TEMPLATE_COPY);
    ck_assert(kernel_has_node(&p->kernels[1], "sp"));
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

/* nn.MultiheadAttention's sequence-first split (torch 1.13): ex [16, 2, 96]
 * split in three along the last axis, each part viewed [16, 2*2, 16] —
 * batch and heads merged, which no strides of ex express — and transposed
 * to [4, 16, 16] for attention. The split must stay a copy: attention
 * loads its tiles through one set of strides. */
START_TEST(split_merging_dims_is_not_an_attention_view) {
    mcir_graph *g = mcir_graph_new("mha");
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F32, 3, (int64_t[]){16, 2, 96});
    mcir_node *e = node(g, MCIR_OP_EXP, "e", 1, &x, "ex");
    mcir_tensor *parts[3];
    const char *names[] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++)
        parts[i] = mcir_graph_add_tensor(g, names[i], MCIR_DTYPE_F32, -1, NULL,
                                         MCIR_TENSOR_INTERMEDIATE);
    mcir_node *sp = mcir_graph_add_node(g, MCIR_OP_SPLIT, "sp", 1, (mcir_tensor *[]){out_of(e)},
                                        3, parts);
    mcir_node_set_int(g, sp, "axis", -1);
    mcir_node_set_ints(g, sp, "sizes", 3, (int64_t[]){32, 32, 32});
    mcir_tensor *h[3];
    for (int i = 0; i < 3; i++) {
        mcir_node *rs = node(g, MCIR_OP_RESHAPE, mcir_arena_printf(g->arena, "rs%d", i), 1,
                             &parts[i], mcir_arena_printf(g->arena, "%s_s", names[i]));
        mcir_node_set_ints(g, rs, "shape", 3, (int64_t[]){16, 4, 16});
        mcir_node *t = node(g, MCIR_OP_TRANSPOSE, mcir_arena_printf(g->arena, "t%d", i), 1,
                            (mcir_tensor *[]){out_of(rs)},
                            mcir_arena_printf(g->arena, "%s_h", names[i]));
        mcir_node_set_ints(g, t, "perm", 3, (int64_t[]){1, 0, 2});
        h[i] = out_of(t);
    }
    mcir_node *at = node(g, MCIR_OP_ATTENTION, "att", 3, h, "o");
    finish(g, out_of(at));
    mcir_trace *tr = mcir_trace_new();
    mcir_diag d = mcir_diag_stderr();
    mcir_plan *p = mcir_plan_build(g, mcir_target_find("sm_90"), tr, &d);
    ck_assert_ptr_nonnull(p);
    ck_assert(mcir_plan_verify(p, &d));
    bool applied = true;
    for (int i = 0; i < mcir_trace_count(tr); i++) {
        json_t *r = mcir_trace_get(tr, i);
        if (!strcmp(json_string_value(json_object_get(r, "rule")), "split_view"))
            applied = !strcmp(json_string_value(json_object_get(r, "decision")), "applied");
    }
    ck_assert(!applied);
    const mcir_kernel_plan *k = NULL;
    for (int i = 0; i < p->n_kernels; i++)
        if (p->kernels[i].tpl == MCIR_TEMPLATE_STREAMING_ATTENTION) k = &p->kernels[i];
    ck_assert_ptr_nonnull(k);
    ck_assert(!kernel_has_node(k, "sp"));
    mcir_plan_free(p);
    mcir_trace_free(tr);
    mcir_graph_free(g);
}
END_TEST

/* x [64, 32] . w [32, 48] + b, then `act` (an op, or -1), then + r (if
 * residual), all one fusion group. */
static mcir_graph *gemm_epilogue_graph(int act, const char *approx, bool residual, bool act_last) {
    mcir_graph *g = mcir_graph_new("epi");
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F16, 2, (int64_t[]){64, 32});
    mcir_tensor *r = input(g, "r", MCIR_DTYPE_F16, 2, (int64_t[]){64, 48});
    mcir_tensor *w = weight(g, "w", MCIR_DTYPE_F16, 2, (int64_t[]){32, 48});
    mcir_tensor *b = weight(g, "b", MCIR_DTYPE_F16, 1, (int64_t[]){48});
    mcir_node *mm = node(g, MCIR_OP_MATMUL, "mm", 2, (mcir_tensor *[]){x, w}, "c");
    mcir_node *ad = node(g, MCIR_OP_ADD, "bias", 2, (mcir_tensor *[]){b, out_of(mm)}, "cb");
    mm->group = ad->group = 0;
    mcir_tensor *y = out_of(ad);
    if (residual && !act_last) {
        mcir_node *rs = node(g, MCIR_OP_ADD, "res", 2, (mcir_tensor *[]){y, r}, "cr");
        rs->group = 0;
        y = out_of(rs);
    }
    if (act >= 0) {
        mcir_node *a = node(g, (mcir_op)act, "act", 1, &y, "ca");
        if (approx) mcir_node_set_string(g, a, "approximate", approx);
        a->group = 0;
        y = out_of(a);
    }
    if (residual && act_last) {
        mcir_node *rs = node(g, MCIR_OP_ADD, "res", 2, (mcir_tensor *[]){y, r}, "cr");
        rs->group = 0;
        y = out_of(rs);
    }
    finish(g, y);
    return g;
}

START_TEST(gemm_epilogues_take_the_library_form) {
    static const struct {
        int act;
        const char *approx;
        bool residual, act_first, ok;
        int code;
    } cases[] = {
        {-1, NULL, false, false, true, 4},                  /* bias */
        {MCIR_OP_GELU, "tanh", false, false, true, 36},     /* GELU(x + b), tanh form */
        {MCIR_OP_RELU, NULL, false, false, true, 6},        /* ReLU(x + b) */
        {-1, NULL, true, false, true, 4},                   /* x + b + r: r through beta·C */
        {MCIR_OP_GELU, "none", false, false, false, 0},     /* erf GELU: generated kernel */
        {MCIR_OP_RELU, NULL, true, true, false, 0},         /* r after the activation */
        {MCIR_OP_SIGMOID, NULL, false, false, false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mcir_graph *g = gemm_epilogue_graph(cases[i].act, cases[i].approx, cases[i].residual,
                                            cases[i].act_first);
        mcir_plan *p = plan_of(g, "sm_90");
        ck_assert_int_eq(p->n_kernels, 1);
        mcir_gemm_epilogue e;
        bool ok = mcir_kernel_gemm_epilogue(&p->kernels[0], &e);
        ck_assert_msg(ok == cases[i].ok, "case %zu: %s", i, ok ? "fused" : e.why);
        if (ok) {
            ck_assert_int_eq(e.code, cases[i].code);
            ck_assert_str_eq(e.bias->name, "b");
            ck_assert(cases[i].residual ? e.residual && !strcmp(e.residual->name, "r") : !e.residual);
            ck_assert_ptr_eq(e.out, p->kernels[0].writes[0]);
        }
        mcir_plan_free(p);
        mcir_graph_free(g);
    }
}
END_TEST

/* Two pointwise groups reading the same input run as one launch; a third
 * that depends on the first through a reduction does not join it. */
START_TEST(independent_pointwise_groups_share_a_launch) {
    mcir_graph *g = mcir_graph_new("batch");
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F32, 2, (int64_t[]){8, 32});
    mcir_node *e = node(g, MCIR_OP_EXP, "e", 1, &x, "ex");
    mcir_node *n = node(g, MCIR_OP_NEG, "n", 1, (mcir_tensor *[]){out_of(e)}, "y1");
    mcir_node *r = node(g, MCIR_OP_RELU, "r", 1, &x, "rx");
    mcir_node *q = node(g, MCIR_OP_SQRT, "q", 1, (mcir_tensor *[]){out_of(r)}, "y2");
    mcir_node *s = node(g, MCIR_OP_REDUCE_SUM, "s", 1, (mcir_tensor *[]){out_of(n)}, "sum");
    mcir_node_set_ints(g, s, "axes", 1, (int64_t[]){-1});
    mcir_node *a = node(g, MCIR_OP_ADD, "a", 2, (mcir_tensor *[]){x, out_of(s)}, "ax");
    mcir_node *b = node(g, MCIR_OP_TANH, "b", 1, (mcir_tensor *[]){out_of(a)}, "y3");
    e->group = n->group = 0;
    r->group = q->group = 1;
    a->group = b->group = 2;
    mcir_graph_mark_output(g, out_of(q));
    mcir_graph_mark_output(g, out_of(n));
    finish(g, out_of(b));
    mcir_trace *tr = mcir_trace_new();
    mcir_diag d = mcir_diag_stderr();
    mcir_plan *p = mcir_plan_build(g, mcir_target_find("sm_90"), tr, &d);
    ck_assert_ptr_nonnull(p);
    ck_assert(mcir_plan_verify(p, &d));
    ck_assert_int_eq(p->n_kernels, 3);   /* {e, n, r, q}, s, {a, b} */
    ck_assert(kernel_has_node(&p->kernels[0], "q"));
    ck_assert_int_eq(p->kernels[0].n_writes, 2);
    ck_assert(kernel_has_node(&p->kernels[2], "b"));
    int applied = 0, rejected = 0;
    for (int i = 0; i < mcir_trace_count(tr); i++) {
        json_t *rec = mcir_trace_get(tr, i);
        if (strcmp(json_string_value(json_object_get(rec, "rule")), "batch_pointwise")) continue;
        if (!strcmp(json_string_value(json_object_get(rec, "decision")), "applied")) applied++;
        else rejected++;
    }
    ck_assert_int_eq(applied, 1);
    ck_assert_int_eq(rejected, 1);
    mcir_plan_free(p);
    mcir_trace_free(tr);
    mcir_graph_free(g);
}
END_TEST

START_TEST(unfoldable_transpose_is_a_copy) {
    mcir_graph *g = mcir_graph_new("tcopy");
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F32, 2, (int64_t[]){64, 96});
    mcir_node *t = node(g, MCIR_OP_TRANSPOSE, "t", 1, &x, "xt");
    mcir_node_set_ints(g, t, "perm", 2, (int64_t[]){1, 0});
    mcir_node *r = node(g, MCIR_OP_RELU, "r", 1, (mcir_tensor *[]){out_of(t)}, "y");
    finish(g, out_of(r));
    mcir_trace *tr = mcir_trace_new();
    mcir_diag d = mcir_diag_stderr();
    mcir_plan *p = mcir_plan_build(g, mcir_target_find("sm_90"), tr, &d);
    ck_assert_int_eq(p->n_kernels, 2);
    ck_assert_int_eq(p->kernels[0].tpl, MCIR_TEMPLATE_COPY);
    ck_assert_int_eq(p->kernels[0].smem_bytes, 0);
    ck_assert_int_eq(p->kernels[0].smem_static_bytes, 32 * 32 * 4);   /* the f32 tile, 16-byte vectors (64 | 4, 96 | 4) */
    ck_assert_int_eq(p->kernels[0].tiling.vector_width, 4);
    ck_assert_int_eq(p->kernels[1].tpl, MCIR_TEMPLATE_ELEMENTWISE);
    bool rejected = false;
    for (int i = 0; i < mcir_trace_count(tr); i++) {
        json_t *rec = mcir_trace_get(tr, i);
        if (!strcmp(json_string_value(json_object_get(rec, "rule")), "fold_transpose"))
            rejected = !strcmp(json_string_value(json_object_get(rec, "decision")), "rejected");
    }
    ck_assert(rejected);
    mcir_plan_free(p);
    mcir_trace_free(tr);
    mcir_graph_free(g);

    /* a transpose that moves only size-1 dims is an alias */
    g = mcir_graph_new("tview");
    x = input(g, "x", MCIR_DTYPE_F32, 3, (int64_t[]){1, 64, 96});
    mcir_node *e = node(g, MCIR_OP_EXP, "e", 1, &x, "ex");
    t = node(g, MCIR_OP_TRANSPOSE, "t", 1, (mcir_tensor *[]){out_of(e)}, "xt");
    mcir_node_set_ints(g, t, "perm", 3, (int64_t[]){1, 0, 2});
    r = node(g, MCIR_OP_RELU, "r", 1, (mcir_tensor *[]){out_of(t)}, "y");
    finish(g, out_of(r));
    p = plan_of(g, "sm_90");
    ck_assert_int_eq(p->n_kernels, 2);
    ck_assert_ptr_eq(p->alias_root[out_of(t)->id], out_of(e));
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

START_TEST(group_with_outsider_between_is_an_error) {
    mcir_graph *g = mcir_graph_new("bad");
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F32, 1, (int64_t[]){16});
    mcir_node *a = node(g, MCIR_OP_EXP, "a", 1, &x, "ta");
    mcir_node *b = node(g, MCIR_OP_REDUCE_SUM, "b", 1, (mcir_tensor *[]){out_of(a)}, "tb");
    mcir_node_set_ints(g, b, "axes", 1, (int64_t[]){0});
    mcir_node *c = node(g, MCIR_OP_ADD, "c", 2, (mcir_tensor *[]){out_of(a), out_of(b)}, "y");
    a->group = c->group = 3;
    finish(g, out_of(c));
    mcir_diag d = quiet();
    ck_assert_ptr_null(mcir_plan_build(g, mcir_target_find("sm_90"), NULL, &d));
    ck_assert_int_ge(d.n_errors, 1);
    mcir_graph_free(g);
}
END_TEST

START_TEST(templates_follow_the_anchor) {
    mcir_graph *g = mcir_graph_new("tpl");
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_BF16, 2, (int64_t[]){64, 4096});
    mcir_tensor *gm = weight(g, "g", MCIR_DTYPE_BF16, 1, (int64_t[]){4096});
    mcir_node *ln = node(g, MCIR_OP_LAYERNORM, "ln", 2, (mcir_tensor *[]){x, gm}, "a");
    mcir_node *rn = node(g, MCIR_OP_RMSNORM, "rn", 2, (mcir_tensor *[]){out_of(ln), gm}, "b");
    mcir_node *sm = node(g, MCIR_OP_SOFTMAX, "sm", 1, (mcir_tensor *[]){out_of(rn)}, "c");
    mcir_node *rd = node(g, MCIR_OP_REDUCE_MAX, "rd", 1, (mcir_tensor *[]){out_of(sm)}, "y");
    mcir_node_set_ints(g, rd, "axes", 1, (int64_t[]){-1});
    finish(g, out_of(rd));
    mcir_plan *p = plan_of(g, "sm_80");
    ck_assert_int_eq(p->n_kernels, 4);
    ck_assert_int_eq(p->kernels[0].tpl, MCIR_TEMPLATE_STREAMING_NORM);
    ck_assert_int_eq(p->kernels[0].streaming_state, MCIR_STREAM_WELFORD);
    ck_assert_int_eq(p->kernels[1].streaming_state, MCIR_STREAM_SUM_SQUARES);
    ck_assert_int_eq(p->kernels[2].streaming_state, MCIR_STREAM_SOFTMAX);
    ck_assert_int_eq(p->kernels[3].tpl, MCIR_TEMPLATE_REDUCE);
    /* 4096 bf16 > 1024: one block per row, 16 bytes per lane (8 bf16) */
    ck_assert_int_eq(p->kernels[0].grid[0], 64);
    ck_assert_int_eq(p->kernels[0].tiling.vector_width, 8);
    ck_assert_str_eq(mcir_streaming_state_name(MCIR_STREAM_WELFORD), "welford");
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST


START_TEST(fused_chain_with_slices_is_elementwise) {
    mcir_graph *g = mcir_graph_new("rope");
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F32, 2, (int64_t[]){16, 64});
    mcir_node *lo = node(g, MCIR_OP_SLICE, "lo", 1, &x, "xl");
    mcir_node_set_int(g, lo, "axis", -1);
    mcir_node_set_int(g, lo, "start", 0);
    mcir_node_set_int(g, lo, "end", 32);
    mcir_node *hi = node(g, MCIR_OP_SLICE, "hi", 1, &x, "xh");
    mcir_node_set_int(g, hi, "axis", -1);
    mcir_node_set_int(g, hi, "start", 32);
    mcir_node_set_int(g, hi, "end", 64);
    mcir_node *ng = node(g, MCIR_OP_NEG, "ng", 1, (mcir_tensor *[]){out_of(hi)}, "nh");
    mcir_node *cc = node(g, MCIR_OP_CONCAT, "cc", 2, (mcir_tensor *[]){out_of(ng), out_of(lo)}, "rot");
    mcir_node_set_int(g, cc, "axis", -1);
    mcir_node *ad = node(g, MCIR_OP_ADD, "ad", 2, (mcir_tensor *[]){x, out_of(cc)}, "y");
    lo->group = hi->group = ng->group = cc->group = ad->group = 0;
    finish(g, out_of(ad));
    mcir_plan *p = plan_of(g, "sm_90");
    ck_assert_int_eq(p->n_kernels, 1);
    ck_assert_int_eq(p->kernels[0].tpl, MCIR_TEMPLATE_ELEMENTWISE);
    ck_assert_int_eq(p->kernels[0].n_reads, 1);
    ck_assert_int_eq(p->kernels[0].n_internal, 4);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

/* ------------------------------------------------------------- tiling */

static mcir_graph *attention_graph(int64_t dh, mcir_dtype dt) {
    mcir_graph *g = mcir_graph_new("att");
    int64_t s[] = {2, 8, 1024, dh};
    mcir_tensor *q = input(g, "q", dt, 4, s), *k = input(g, "k", dt, 4, s),
                *v = input(g, "v", dt, 4, s);
    mcir_node *a = node(g, MCIR_OP_ATTENTION, "att", 3, (mcir_tensor *[]){q, k, v}, "y");
    finish(g, out_of(a));
    return g;
}

START_TEST(attention_tiles_fit_every_target) {
    static const int64_t dims[] = {32, 64, 80, 96, 128, 160, 192, 256};
    static const mcir_dtype dts[] = {MCIR_DTYPE_F32, MCIR_DTYPE_F16, MCIR_DTYPE_BF16};
    static const char *archs[] = {"sm_80", "sm_90"};
    for (int a = 0; a < 2; a++)
        for (int t = 0; t < 3; t++)
            for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
                const mcir_target *tg = mcir_target_find(archs[a]);
                mcir_graph *g = attention_graph(dims[i], dts[t]);
                mcir_plan *p = plan_of(g, archs[a]);
                const mcir_kernel_plan *k = &p->kernels[0];
                ck_assert_int_le(k->smem_bytes, tg->smem_per_block_optin);
                bool sm90 = false;   /* launch_sm90.c's template (tile "wg") */
                for (int j = 0; j < k->tiling.n_dims; j++) sm90 |= !strcmp(k->tiling.dim_names[j], "wg");
                if (!sm90) ck_assert_int_eq(k->smem_bytes + k->smem_static_bytes, k->tiling.working_set_bytes);
                ck_assert_int_ge(k->tiling.blocks_per_sm, 1);
                ck_assert_int_le(k->tiling.registers_estimate, tg->regs_per_thread);
                ck_assert_int_le(k->block[0], tg->max_threads_per_block);
                ck_assert_int_eq(k->block[0], k->tiling.warps * 32);
                if (!sm90) ck_assert_int_eq(k->grid[0], 16 * (1024 / k->tiling.block_tile[0]));
                ck_assert_int_eq(k->grid[1], 1);
                ck_assert_ptr_nonnull(strstr(k->tiling.reason, "BLOCK_M="));
                /* the tensor-core table */
                if (dts[t] != MCIR_DTYPE_F32 && !sm90) {
                    int64_t bm = k->tiling.block_tile[0], bn = k->tiling.block_tile[1];
                    if (dims[i] <= 64 && a == 1) { ck_assert_int_eq(bm, 128); ck_assert_int_eq(bn, 128); }
                    else if (dims[i] <= 128) { ck_assert_int_eq(bm, 128); ck_assert_int_eq(bn, 64); }
                    else { ck_assert_int_eq(bm, 64); ck_assert_int_eq(bn, 64); }
                }
                mcir_plan_free(p);
                mcir_graph_free(g);
            }
}
END_TEST

START_TEST(matmul_and_conv_tiles_fit) {
    static const char *archs[] = {"sm_80", "sm_90"};
    for (int a = 0; a < 2; a++) {
        const mcir_target *tg = mcir_target_find(archs[a]);
        mcir_graph *g = mcir_graph_new("mmc");
        mcir_tensor *x = input(g, "x", MCIR_DTYPE_F16, 2, (int64_t[]){4096, 4096});
        mcir_tensor *w = weight(g, "w", MCIR_DTYPE_F16, 2, (int64_t[]){4096, 4096});
        mcir_node *mm = node(g, MCIR_OP_MATMUL, "mm", 2, (mcir_tensor *[]){x, w}, "h");
        mcir_node *rs = node(g, MCIR_OP_RESHAPE, "rs", 1, (mcir_tensor *[]){out_of(mm)}, "img");
        mcir_node_set_ints(g, rs, "shape", 4, (int64_t[]){16, 256, 64, 64});
        mcir_tensor *cw = weight(g, "cw", MCIR_DTYPE_F16, 4, (int64_t[]){128, 256, 3, 3});
        mcir_node *cv = node(g, MCIR_OP_CONV2D, "conv", 2, (mcir_tensor *[]){out_of(rs), cw}, "c");
        mcir_node_set_ints(g, cv, "pads", 4, (int64_t[]){1, 1, 1, 1});
        mcir_node *re = node(g, MCIR_OP_RELU, "relu", 1, (mcir_tensor *[]){out_of(cv)}, "y");
        cv->group = re->group = 1;
        finish(g, out_of(re));
        mcir_plan *p = plan_of(g, archs[a]);
        ck_assert_int_eq(p->n_kernels, 2);
        const mcir_kernel_plan *k0 = &p->kernels[0], *k1 = &p->kernels[1];
        ck_assert_int_eq(k0->tpl, MCIR_TEMPLATE_MATMUL);
        int64_t bn = k0->tiling.block_tile[1];
        ck_assert_int_eq(k0->tiling.block_tile[0], 128);
        if (a == 0) {   /* the mma.sync cp.async ring: 128 x 64 (more resident blocks than 128 x 128) */
            ck_assert_int_eq(bn, 64);
            ck_assert_int_eq(k0->grid[0], 32 * (4096 / bn));   /* (M, N) work items, one block each */
        } else {        /* the sm_90a GEMM: 128 x 256 items, a persistent grid of one block per SM */
            ck_assert_str_eq(k0->tiling.dim_names[3], "wg");
            ck_assert_int_eq(bn, 256);
            ck_assert_int_eq(k0->grid[0], tg->sm_count);
            ck_assert_int_eq(k0->block[0], 384);
        }
        ck_assert_int_eq(k0->grid[1], 1);
        ck_assert_int_eq(k0->block[0], 32 * k0->tiling.warps);
        ck_assert_int_eq(k1->tpl, MCIR_TEMPLATE_CONV2D);
        ck_assert_int_eq(k1->n_internal, 1);
        for (int k = 0; k < 2; k++) {
            ck_assert_int_le(p->kernels[k].smem_bytes, tg->smem_per_block_optin);
            ck_assert_int_ge(p->kernels[k].tiling.blocks_per_sm, 1);
        }
        mcir_plan_free(p);
        mcir_graph_free(g);
    }
}
END_TEST

/* -------------------------------------------------------- memory plan */

START_TEST(inplace_takes_over_the_input) {
    mcir_graph *g = mcir_graph_new("inplace");
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F32, 1, (int64_t[]){4096});
    mcir_node *a = node(g, MCIR_OP_EXP, "a", 1, &x, "ta");
    mcir_node *b = node(g, MCIR_OP_RELU, "b", 1, (mcir_tensor *[]){out_of(a)}, "tb");
    mcir_node *c = node(g, MCIR_OP_NEG, "c", 1, (mcir_tensor *[]){out_of(b)}, "y");
    b->inplace_input = 0;
    finish(g, out_of(c));
    mcir_plan *p = plan_of(g, "sm_90");
    mcir_trace *tr = mcir_trace_new();
    mcir_diag d = mcir_diag_stderr();
    mcir_memplan *m = mcir_memplan_build(p, NULL, tr, &d);
    ck_assert_ptr_nonnull(m);
    ck_assert(mcir_memplan_verify(m, &d));
    ck_assert_int_eq(m->n_buffers, 2);
    ck_assert_int_eq(m->buffers[1].share_with, 0);
    ck_assert_int_eq(m->buffers[0].offset, m->buffers[1].offset);
    ck_assert_int_eq(m->arena_bytes, 16384);
    ck_assert_int_eq(m->lower_bound_bytes, 16384);
    ck_assert_str_eq(m->planner, "best");
    bool applied = false;
    for (int i = 0; i < mcir_trace_count(tr); i++) {
        json_t *r = mcir_trace_get(tr, i);
        if (!strcmp(json_string_value(json_object_get(r, "rule")), "inplace"))
            applied = !strcmp(json_string_value(json_object_get(r, "decision")), "applied");
    }
    ck_assert(applied);
    mcir_memplan_free(m);
    mcir_trace_free(tr);
    mcir_plan_free(p);
    mcir_graph_free(g);

    /* not when the input is read again later */
    g = mcir_graph_new("inplace2");
    x = input(g, "x", MCIR_DTYPE_F32, 1, (int64_t[]){4096});
    a = node(g, MCIR_OP_EXP, "a", 1, &x, "ta");
    b = node(g, MCIR_OP_RELU, "b", 1, (mcir_tensor *[]){out_of(a)}, "tb");
    c = node(g, MCIR_OP_ADD, "c", 2, (mcir_tensor *[]){out_of(b), out_of(a)}, "y");
    b->inplace_input = 0;
    finish(g, out_of(c));
    p = plan_of(g, "sm_90");
    m = memory_of(p, NULL);
    ck_assert_int_eq(m->buffers[1].share_with, -1);
    ck_assert_int_eq(m->arena_bytes, 32768);
    mcir_memplan_free(m);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

START_TEST(inplace_never_races_with_a_matmul_operand) {
    mcir_graph *g = mcir_graph_new("mmres");
    mcir_tensor *x0 = input(g, "x0", MCIR_DTYPE_F32, 2, (int64_t[]){64, 64});
    mcir_tensor *w = weight(g, "w", MCIR_DTYPE_F32, 2, (int64_t[]){64, 64});
    mcir_node *e = node(g, MCIR_OP_EXP, "e", 1, &x0, "x");
    mcir_node *mm = node(g, MCIR_OP_MATMUL, "mm", 2, (mcir_tensor *[]){out_of(e), w}, "h");
    mcir_node *ad = node(g, MCIR_OP_ADD, "res", 2, (mcir_tensor *[]){out_of(mm), out_of(e)}, "r");
    mcir_node *ng = node(g, MCIR_OP_NEG, "ng", 1, (mcir_tensor *[]){out_of(ad)}, "y");
    mm->group = ad->group = 0;
    ad->inplace_input = 1;   /* would overwrite the matmul's A operand */
    finish(g, out_of(ng));
    mcir_plan *p = plan_of(g, "sm_90");
    ck_assert_int_eq(p->n_kernels, 3);
    mcir_memplan *m = memory_of(p, NULL);
    for (int i = 0; i < m->n_buffers; i++) ck_assert_int_eq(m->buffers[i].share_with, -1);
    mcir_memplan_free(m);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

START_TEST(unknown_planner_is_an_error) {
    mcir_graph *g = mcir_graph_new("u");
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F32, 1, (int64_t[]){16});
    mcir_node *a = node(g, MCIR_OP_EXP, "a", 1, &x, "y");
    finish(g, out_of(a));
    mcir_plan *p = plan_of(g, "sm_90");
    mcir_diag d = quiet();
    mcir_memplan_build_options o = {.planner = "no-such-planner"};
    ck_assert_ptr_null(mcir_memplan_build(p, &o, NULL, &d));
    ck_assert_int_eq(d.n_errors, 1);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

/* A ladder of n buffers of 64 KiB each, live two kernels each. */
static mcir_graph *ladder(int n) {
    mcir_graph *g = mcir_graph_new("ladder");
    mcir_tensor *x = input(g, "x", MCIR_DTYPE_F32, 1, (int64_t[]){16384});
    mcir_tensor *prev = x;
    for (int i = 0; i < n; i++) {
        mcir_node *e = node(g, i % 2 ? MCIR_OP_EXP : MCIR_OP_NEG,
                            mcir_arena_printf(g->arena, "n%d", i), 1, &prev,
                            i == n - 1 ? "y" : mcir_arena_printf(g->arena, "t%d", i));
        prev = out_of(e);
    }
    finish(g, prev);
    return g;
}

/* A ladder of 4000 nodes: 4000 kernels, in an arena of two of its buffers. */
START_TEST(large_graphs_plan) {
    mcir_graph *g = ladder(4000);
    mcir_plan *p = plan_of(g, "sm_90");
    mcir_memplan *m = memory_of(p, "greedy-size");
    ck_assert_int_eq(p->n_kernels, 4000);
    ck_assert_int_eq(m->arena_bytes, 2 * 65536);
    mcir_memplan_free(m);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

START_TEST(pools_fall_back_in_order) {
    mcir_graph *g = ladder(6);
    mcir_plan *p = plan_of(g, "sm_90");
    mcir_memplan_pool pools[] = {{"smem_pool", 65536}, {"hbm", 0}};
    mcir_memplan_build_options o = {.pools = pools, .n_pools = 2, .time_limit_s = 2};
    mcir_diag d = mcir_diag_stderr();
    mcir_memplan *m = mcir_memplan_build(p, &o, NULL, &d);
    ck_assert_ptr_nonnull(m);
    ck_assert(mcir_memplan_verify(m, &d));
    ck_assert_int_eq(m->n_pools, 2);
    int in0 = 0, in1 = 0;
    for (int i = 0; i < m->n_buffers; i++) {
        if (m->buffers[i].pool == 0) in0++;
        else in1++;
    }
    ck_assert_int_ge(in0, 1);
    ck_assert_int_ge(in1, 1);
    ck_assert_int_le(m->pool_bytes[0], 65536);
    /* the JSON names the pool per buffer */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert(mcir_memplan_write_json(m, p, f));
    fclose(f);
    json_error_t err;
    json_t *j = json_loads(buf, 0, &err);
    ck_assert_ptr_nonnull(j);
    json_t *b0 = json_array_get(json_object_get(j, "buffers"), 0);
    const char *pool = json_string_value(json_object_get(b0, "pool"));
    ck_assert(!strcmp(pool, "smem_pool") || !strcmp(pool, "hbm"));
    ck_assert_int_eq(json_integer_value(json_object_get(j, "alignment")), 256);
    json_decref(j);
    free(buf);
    mcir_memplan_free(m);
    /* a last pool too small: an error, no plan */
    mcir_memplan_pool tiny[] = {{"tiny", 1024}};
    o = (mcir_memplan_build_options){.pools = tiny, .n_pools = 1, .time_limit_s = 1};
    d = quiet();
    ck_assert_ptr_null(mcir_memplan_build(p, &o, NULL, &d));
    ck_assert_int_ge(d.n_errors, 1);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

START_TEST(verifier_catches_broken_plans) {
    mcir_graph *g = ladder(4);
    mcir_plan *p = plan_of(g, "sm_90");
    mcir_diag d = quiet();
    /* swap two kernels: a read before its write */
    mcir_kernel_plan tmp = p->kernels[1];
    p->kernels[1] = p->kernels[2];
    p->kernels[2] = tmp;
    p->kernels[1].id = 1;
    p->kernels[2].id = 2;
    ck_assert(!mcir_plan_verify(p, &d));
    ck_assert_int_ge(d.n_errors, 1);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

START_TEST(checker_catches_broken_plans) {
    mcir_graph *g = ladder(6);
    mcir_plan *p = plan_of(g, "sm_90");
    mcir_memplan *m = memory_of(p, "greedy-size");
    ck_assert_int_ge(m->n_buffers, 3);
    mcir_diag d = quiet();
    /* two buffers live at the same kernel moved onto each other */
    int i = -1, j = -1;
    for (int a = 0; a < m->n_buffers && i < 0; a++)
        for (int b = 0; b < m->n_buffers; b++)
            if (a != b && m->buffers[a].first <= m->buffers[b].last &&
                m->buffers[b].first <= m->buffers[a].last) { i = a; j = b; break; }
    ck_assert_int_ge(i, 0);
    int64_t saved = m->buffers[j].offset;
    m->buffers[j].offset = m->buffers[i].offset;
    ck_assert(!mcir_memplan_verify(m, &d));
    m->buffers[j].offset = saved;
    d = quiet();
    ck_assert(mcir_memplan_verify(m, &d));
    /* misaligned */
    m->buffers[0].offset += 8;
    ck_assert(!mcir_memplan_verify(m, &d));
    m->buffers[0].offset -= 8;
    /* outside its pool */
    d = quiet();
    m->buffers[0].offset = m->pool_bytes[0];
    ck_assert(!mcir_memplan_verify(m, &d));
    mcir_memplan_free(m);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

START_TEST(writers_produce_the_contract_fields) {
    mcir_graph *g = heads_graph(64, 4, 32, MCIR_DTYPE_F32);
    mcir_plan *p = plan_of(g, "sm_80");
    mcir_memplan *m = memory_of(p, NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert(mcir_plan_write_json(p, f));
    fclose(f);
    json_error_t err;
    json_t *j = json_loads(buf, 0, &err);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(json_object_get(j, "arch")), "sm_80");
    json_t *k = json_array_get(json_object_get(j, "kernels"), 0);
    static const char *fields[] = {"name", "nodes", "template", "tiling_strategy",
                                   "recompute_policy", "streaming_state", "reads", "writes",
                                   "grid", "block", "smem_bytes"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        ck_assert_msg(json_object_get(k, fields[i]), "missing %s", fields[i]);
    ck_assert_str_eq(json_string_value(json_object_get(k, "template")), "streaming_attention");
    json_t *ss = json_object_get(k, "streaming_state");
    ck_assert_str_eq(json_string_value(json_object_get(ss, "kind")), "softmax_state");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(ss, "per_row"), 0)),
                     "running_max");
    ck_assert(json_is_string(json_object_get(json_object_get(k, "tiling_strategy"), "reason")));
    ck_assert_int_eq(json_array_size(json_object_get(k, "grid")), 3);
    json_decref(j);
    free(buf);

    buf = NULL;
    f = open_memstream(&buf, &len);
    ck_assert(mcir_memplan_write_svg(m, p, f));
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "<svg"));
    ck_assert_ptr_nonnull(strstr(buf, "</svg>"));
    free(buf);
    mcir_memplan_free(m);
    mcir_plan_free(p);
    mcir_graph_free(g);
}
END_TEST

/* ------------------------------------------------------ example graphs */

static char example_paths[64][1024];
static char example_names[64][128];
static int n_examples;

static void find_examples(void) {
    char dir[900];
    snprintf(dir, sizeof dir, "%s/examples", test_source_dir());
    DIR *dp = opendir(dir);
    if (!dp) return;
    struct dirent *e;
    while ((e = readdir(dp)) && n_examples < 64) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%.100s/graph.json", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        fclose(f);
        snprintf(example_paths[n_examples], sizeof example_paths[0], "%s", path);
        snprintf(example_names[n_examples], sizeof example_names[0], "%.100s", e->d_name);
        n_examples++;
    }
    closedir(dp);
}

/* Every planner on every example gives a plan the checker accepts; the
 * default reaches the lower bound on the transformer and CNN graphs. */
START_TEST(examples_pass_the_checker_with_every_planner) {
    ck_assert_int_ge(n_examples, 1);
    size_t np;
    const mcir_memplan_planner *planners = mcir_memplan_planners(&np);
    for (int e = 0; e < n_examples; e++) {
        mcir_diag d = mcir_diag_stderr();
        mcir_graph *g = mcir_graph_read_json(example_paths[e], &d);
        ck_assert_msg(g, "%s does not read", example_paths[e]);
        for (int a = 0; a < 2; a++) {
            mcir_plan *p = plan_of(g, a ? "sm_80" : "sm_90");
            for (int k = 0; k < p->n_kernels; k++)
                ck_assert_int_le(p->kernels[k].smem_bytes, p->target->smem_per_block_optin);
            for (size_t i = 0; i < np && a == 0; i++) {
                mcir_memplan_build_options o = {.planner = planners[i].name, .time_limit_s = 2};
                mcir_memplan *m = mcir_memplan_build(p, &o, NULL, &d);
                ck_assert_msg(m, "%s: planner %s failed", example_names[e], planners[i].name);
                ck_assert_msg(mcir_memplan_verify(m, &d), "%s: planner %s: checker failed",
                              example_names[e], planners[i].name);
                ck_assert_int_ge(m->arena_bytes, m->lower_bound_bytes);
                if (!strcmp(planners[i].name, "best")) {
                    fprintf(stderr, "%-16s %3d kernels %3d buffers arena %9lld lower bound %9lld\n",
                            example_names[e], p->n_kernels, m->n_buffers,
                            (long long)m->arena_bytes, (long long)m->lower_bound_bytes);
                    ck_assert_msg(m->arena_bytes == m->lower_bound_bytes,
                                  "%s: best arena %lld > lower bound %lld", example_names[e],
                                  (long long)m->arena_bytes, (long long)m->lower_bound_bytes);
                }
                mcir_memplan_free(m);
            }
            mcir_plan_free(p);
        }
        mcir_graph_free(g);
    }
}
END_TEST

#ifdef MCIR_KP_REWRITES
/* What the pipeline plans: the examples after the default catalog's
 * rewrites (fused attention and norms, groups, in place). */
START_TEST(rewritten_examples_reach_the_lower_bound) {
    mcir_diag d = mcir_diag_stderr();
    mcir_catalog *cat = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(cat, &d));
    for (int e = 0; e < n_examples; e++) {
        mcir_graph *g = mcir_graph_read_json(example_paths[e], &d);
        ck_assert_ptr_nonnull(g);
        mcir_trace *tr = mcir_trace_new();
        ck_assert(mcir_rewrite_run(g, cat, mcir_target_find("sm_90"), tr, &d));
        for (int a = 0; a < 2; a++) {
            mcir_plan *p = mcir_plan_build(g, mcir_target_find(a ? "sm_80" : "sm_90"), tr, &d);
            ck_assert_msg(p, "%s: no plan after rewrites", example_names[e]);
            ck_assert(mcir_plan_verify(p, &d));
            for (int k = 0; k < p->n_kernels; k++)
                ck_assert_int_le(p->kernels[k].smem_bytes, p->target->smem_per_block_optin);
            mcir_memplan_build_options o = {.time_limit_s = 2};
            mcir_memplan *m = mcir_memplan_build(p, &o, tr, &d);
            ck_assert_ptr_nonnull(m);
            ck_assert(mcir_memplan_verify(m, &d));
            if (a == 0)
                fprintf(stderr, "%-16s rewritten: %3d kernels %3d buffers arena %9lld lower bound %9lld\n",
                        example_names[e], p->n_kernels, m->n_buffers, (long long)m->arena_bytes,
                        (long long)m->lower_bound_bytes);
            ck_assert_msg(m->arena_bytes == m->lower_bound_bytes,
                          "%s (rewritten): best arena %lld > lower bound %lld", example_names[e],
                          (long long)m->arena_bytes, (long long)m->lower_bound_bytes);
            mcir_memplan_free(m);
            mcir_plan_free(p);
        }
        mcir_trace_free(tr);
        mcir_graph_free(g);
    }
    mcir_catalog_free(cat);
}
END_TEST
#endif

static Suite *kernelplan_suite(void) {
    Suite *s = suite_create("kernelplan");
    TCase *t = tcase_create("partition");
    tcase_add_test(t, fused_group_is_one_kernel);
    tcase_add_test(t, ungrouped_nodes_are_kernels_each);
    tcase_add_test(t, reshape_is_an_alias);
    tcase_add_test(t, reshape_to_output_writes_into_the_output);
    tcase_add_test(t, transpose_folds_into_matmul);
    tcase_add_test(t, transposes_fold_into_attention);
    tcase_add_test(t, unfoldable_transpose_is_a_copy);
    tcase_add_test(t, split_folds_into_strided_views);
    tcase_add_test(t, split_merging_dims_is_not_an_attention_view);
    tcase_add_test(t, gemm_epilogues_take_the_library_form);
    tcase_add_test(t, independent_pointwise_groups_share_a_launch);
    tcase_add_test(t, head_split_folds_into_elementwise_and_slices);
    tcase_add_test(t, group_with_outsider_between_is_an_error);
    tcase_add_test(t, templates_follow_the_anchor);
    tcase_add_test(t, fused_chain_with_slices_is_elementwise);
    suite_add_tcase(s, t);
    t = tcase_create("tiling");
    tcase_add_test(t, attention_tiles_fit_every_target);
    tcase_add_test(t, matmul_and_conv_tiles_fit);
    suite_add_tcase(s, t);
    t = tcase_create("memory");
    tcase_add_test(t, inplace_takes_over_the_input);
    tcase_add_test(t, inplace_never_races_with_a_matmul_operand);
    tcase_add_test(t, unknown_planner_is_an_error);
    tcase_add_test(t, pools_fall_back_in_order);
    tcase_add_test(t, large_graphs_plan);
    tcase_add_test(t, checker_catches_broken_plans);
    tcase_add_test(t, verifier_catches_broken_plans);
    tcase_add_test(t, writers_produce_the_contract_fields);
    suite_add_tcase(s, t);
    t = tcase_create("examples");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, examples_pass_the_checker_with_every_planner);
#ifdef MCIR_KP_REWRITES
    tcase_add_test(t, rewritten_examples_reach_the_lower_bound);
#endif
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    find_examples();
    return test_main(kernelplan_suite());
}
