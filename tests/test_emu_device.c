/*
 * test_emu_device.c — the emulated device (emu/emu.h) under the real
 * runtime (runtime/runtime.c), through the pipeline mcirc runs:
 *  - a compiled graph runs in every allocation mode and matches the
 *    interpreter; the launches are recorded; the peaks order as on a GPU
 *    (pool <= lazy <= eager);
 *  - mutants of what the runtime and the kernels do, each put into the
 *    compilation between codegen and the run, each found and named:
 *      a removed __syncthreads (a block-per-row norm's reduction of its
 *      warps' partials: race on shared memory), a dropped mbarrier wait (the sm_90a attention's
 *      consumers reading a K/V stage the TMA has not completed: race), an
 *      off-by-one tile bound (the matmul template storing row M: out of
 *      bounds of the output), a wrong leading dimension in a cuBLAS call
 *      (B's span past its tensor: out of bounds), a split-KV scratch placed
 *      over a tensor the kernel still reads (race, or a wrong result);
 *  - a launch asking for more dynamic shared memory than the function
 *    allows fails with a message, like the driver's.
 * Skips (77) without a C++ compiler for the emulator's modules.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/codegen-impl.h"
#include "runtime/cuda_driver.h"
#include "runtime/coll_api.h"
#include "runtime/runtime-impl.h"
#include "runtime/runtime.h"
#include "emu/emu.h"
#include "pipeline_test.h"
#include "test_util.h"

static char work_dir[256];

/* The graphs' compilation for sm_90, planned and generated (not compiled,
 * not run): what mcirc has before --run. */
static const cgt_pipe SM90 = {.arch = "sm_90", .cuda = true};

/* The run on the emulated device: ok, and its diagnostics in *diag (malloc'd). */
static bool emu_run(mcir_compilation *c, mcir_alloc_mode mode, mcir_env **env, mcir_gpu_stats *st, char **diag) {
    size_t len = 0;
    FILE *mem = open_memstream(diag, &len);
    ck_assert_ptr_nonnull(mem);
    mcir_diag d = mcir_diag_to(mem);
    *env = mcir_env_new(c->graph, 7);
    bool ok = mcir_emu_run(c->codegen, *env, mode, st, &d);
    fclose(mem);
    if (*diag && **diag) fprintf(stderr, "%s", *diag);
    return ok;
}

/* max |emu - interpreter| / max |interpreter| over every output (of
 * every rank, for a graph with ranks) */
static double rel_error(mcir_compilation *c, mcir_env *emu) {
    mcir_env *ref = mcir_env_new(c->graph, 7);
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_interp_run(c->graph, ref, &d));
    double worst = 0;
    for (int r = 0; r < mcir_env_ranks(ref); r++) {
        mcir_env_select_rank(emu, r);
        mcir_env_select_rank(ref, r);
        for (int i = 0; i < c->graph->n_outputs; i++) {
            const mcir_tensor *t = c->graph->outputs[i];
            mcir_compare_result cr;
            ck_assert(mcir_env_compare(emu, t, ref, t, &cr));
            double den = 0;
            const float *v = mcir_env_get(ref, t);
            for (int64_t k = 0; k < mcir_tensor_numel(t); k++) den = fmax(den, fabs(v[k]));
            ck_assert_msg(den > 0 && isfinite(den), "an all-zero or non-finite reference output asserts nothing");
            worst = fmax(worst, cr.max_abs / den);
        }
    }
    mcir_env_select_rank(emu, -1);
    mcir_env_free(ref);
    return worst;
}

static int kernel_of(const mcir_compilation *c, mcir_template t) {
    for (int i = 0; i < c->plan->n_kernels; i++)
        if (c->plan->kernels[i].tpl == t && c->codegen->k[i].source) return i;
    ck_abort_msg("no %s kernel in the plan", mcir_template_name(t));
    return -1;
}

/* Replaces the first `from` in kernel i's compile unit with `to` (the
 * unit the emulator's module is built from). */
static void mutate_unit(mcir_compilation *c, int i, const char *from, const char *to, int occurrence) {
    cg_kernel *k = &c->codegen->k[i];
    char *at = k->unit;
    for (int n = 0; n <= occurrence; n++) {
        at = strstr(n ? at + 1 : at, from);
        ck_assert_msg(at != NULL, "kernel %s: '%s' (occurrence %d) not in its unit: update the mutant",
                      k->kp->name, from, occurrence);
    }
    size_t lu = strlen(k->unit), lf = strlen(from), lt = strlen(to), off = (size_t)(at - k->unit);
    char *u = malloc(lu - lf + lt + 1);
    ck_assert_ptr_nonnull(u);
    memcpy(u, k->unit, off);
    memcpy(u + off, to, lt);
    memcpy(u + off + lt, at + lf, lu - off - lf + 1);
    free(k->unit);
    k->unit = u;
}

static void expect_finding(const char *diag, const char *kernel, const char *kind, const char *names) {
    char want[300];
    snprintf(want, sizeof want, "%s: error: %s: ", kernel, kind);
    ck_assert_msg(diag && strstr(diag, want), "no '%s' in:\n%s", want, diag ? diag : "");
    ck_assert_msg(strstr(diag, names), "the finding does not name '%s':\n%s", names, diag);
}

/* The run on the emulated device, which must fail: its diagnostics. */
static char *run_expecting_failure(mcir_compilation *c) {
    mcir_env *env;
    mcir_gpu_stats st;
    char *diag = NULL;
    ck_assert(!emu_run(c, MCIR_ALLOC_POOL, &env, &st, &diag));
    mcir_env_free(env);
    ck_assert_ptr_nonnull(diag);
    return diag;
}

/* The run fails with a finding of kind in kernel i naming `names`. */
static void expect_run_finding(mcir_compilation *c, int i, const char *kind, const char *names) {
    char *diag = run_expecting_failure(c);
    expect_finding(diag, c->plan->kernels[i].name, kind, names);
    free(diag);
}

/* -------------------------------------------------------------- runs */

static const char MLP[] =
    "{\"mcir\":1,\"name\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[40,64]}],"
    "\"weights\":[{\"name\":\"w1\",\"dtype\":\"f32\",\"shape\":[64,96]},{\"name\":\"w2\",\"dtype\":\"f32\","
    "\"shape\":[96,24]},{\"name\":\"g\",\"dtype\":\"f32\",\"shape\":[96]}],"
    "\"nodes\":[{\"name\":\"mm1\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w1\"],\"outputs\":[\"h\"]},"
    "{\"name\":\"act\",\"op\":\"gelu\",\"inputs\":[\"h\"],\"outputs\":[\"a\"]},"
    "{\"name\":\"ln\",\"op\":\"rmsnorm\",\"inputs\":[\"a\",\"g\"],\"outputs\":[\"n\"],\"attrs\":{\"axis\":-1}},"
    "{\"name\":\"mm2\",\"op\":\"matmul\",\"inputs\":[\"n\",\"w2\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}";

START_TEST(test_runs_in_every_mode) {
    mcir_compilation c;
    cgt_compile_text(work_dir, "mlp", MLP, SM90, &c);
    static const mcir_alloc_mode modes[] = {MCIR_ALLOC_POOL, MCIR_ALLOC_LAZY, MCIR_ALLOC_EAGER};
    int64_t peak[3];
    for (int m = 0; m < 3; m++) {
        mcir_emu_reset_launches();
        mcir_env *env;
        mcir_gpu_stats st;
        char *diag = NULL;
        ck_assert_msg(emu_run(&c, modes[m], &env, &st, &diag), "%s", diag);
        double rel = rel_error(&c, env);
        const mcir_emu_launch_record *rec;
        int n = mcir_emu_launches(&rec);
        fprintf(stderr, "  %s: %d launches, peak %lld bytes, rel err %.3g (%s)\n", mcir_alloc_mode_name(modes[m]), n,
                (long long)st.peak_device_bytes, rel, st.device_name);
        ck_assert_double_le(rel, 1e-4);
        ck_assert_int_ge(n, 2);
        ck_assert_ptr_nonnull(strstr(st.device_name, "emulator"));
        peak[m] = st.peak_device_bytes;
        mcir_env_free(env);
        free(diag);
    }
    ck_assert_int_le(peak[1], peak[2]);   /* lazy <= eager */
    mcir_compilation_free(&c);
}
END_TEST

/* ------------------------------------------------ graphs with ranks */

/* Every rank of a graph with ranks on the emulated device in one process:
 * each rank its own arena and its parts of the sharded leaves, the
 * collectives in memory between the ranks' kernels (all_reduce after a
 * row-parallel product, reduce_scatter of f16, all_gather of bf16 over 4
 * ranks), in every allocation mode, against the interpreter's ranks. A
 * runtime whose collective reads rank 0's input for every rank is caught. */
START_TEST(test_ranks_run_in_lockstep) {
    static const char *const graphs[] = {"tests/data/ranks/mlp.json", "tests/data/ranks/scatter.json",
                                         "tests/data/ranks/gather.json"};
    static const mcir_alloc_mode modes[] = {MCIR_ALLOC_POOL, MCIR_ALLOC_LAZY, MCIR_ALLOC_EAGER};
    for (int gi = 0; gi < 3; gi++) {
        mcir_compilation c;
        cgt_compile_path(test_path(graphs[gi]), SM90, &c);
        ck_assert_int_gt(c.graph->ranks, 1);
        int collectives = 0;
        for (int i = 0; i < c.plan->n_kernels; i++) collectives += c.plan->kernels[i].tpl == MCIR_TEMPLATE_COLLECTIVE;
        ck_assert_int_eq(collectives, 1);
        double tol = gi == 0 ? 1e-4 : 2e-2;
        for (int m = 0; m < 3; m++) {
            mcir_env *env;
            mcir_gpu_stats st;
            char *diag = NULL;
            ck_assert_msg(emu_run(&c, modes[m], &env, &st, &diag), "%s: %s", graphs[gi], diag);
            ck_assert_int_eq(mcir_env_ranks(env), c.graph->ranks);
            double rel = rel_error(&c, env);
            fprintf(stderr, "  %s, %s: %d ranks, rel err %.3g\n", graphs[gi], mcir_alloc_mode_name(modes[m]),
                    c.graph->ranks, rel);
            ck_assert_double_le(rel, tol);
            mcir_env_free(env);
            free(diag);
        }
        cg_runtime_mutant = CG_MUTANT_COLLECTIVE_READS_RANK0;
        mcir_env *env;
        mcir_gpu_stats st;
        char *diag = NULL;
        bool ran = emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag);
        cg_runtime_mutant = CG_MUTANT_NONE;
        /* caught by the order check (rank 1's collective reads rank 0's
         * buffer, which nothing orders after rank 0's kernels), or else by
         * its values */
        double rel = ran ? rel_error(&c, env) : 1;
        ck_assert_msg(ran ? rel > 0.05 : strstr(diag, "race: ncclAll") || strstr(diag, "race: ncclReduce"),
                      "%s: the mutant collective went unnoticed (rel err %g): %s", graphs[gi], rel, diag);
        mcir_env_free(env);
        free(diag);
        mcir_compilation_free(&c);
    }
}
END_TEST

/* Collectives on a second stream: an encoder-decoder layer at --tp 2 (the
 * cross-attention's K / V projection of the encoder states needs no
 * collective), planned so that the projection runs while the
 * self-attention's all_reduce does — placed between the all_reduce and its
 * first reader, the all_reduce's input kept live across it — and run
 * beside it on the emulated device, whose order check sees every launch,
 * library call and collective with its stream and the events between
 * them: the outputs are the interpreter's with no finding. A runtime whose
 * kernels do not wait for the collective they read is a race finding
 * naming the kernel, the all_reduce and the tensor; with MCIR_OVERLAP=0
 * the collectives run on the kernels' stream. */
START_TEST(test_collectives_overlap_on_a_second_stream) {
    mcir_options o = mcir_options_default();
    o.graph_path = test_path("tests/data/ranks/decoder_cross.json");
    o.tp = 2;
    mcir_compilation c;
    ck_assert_int_eq(cgt_compile_options(&o, SM90, &c), 0);
    const mcir_plan *p = c.plan;
    int ar = -1, join = -1, beside = 0;
    for (int i = 0; i < p->n_kernels && ar < 0; i++)
        if (p->kernels[i].tpl == MCIR_TEMPLATE_COLLECTIVE) ar = i;
    ck_assert_int_ge(ar, 0);
    const mcir_tensor *out = p->alias_root[p->kernels[ar].anchor->outputs[0]->id];
    const mcir_tensor *in = p->alias_root[p->kernels[ar].anchor->inputs[0]->id];
    for (int j = ar + 1; j < p->n_kernels && join < 0; j++) {
        for (int i = 0; i < p->kernels[j].n_reads; i++)
            if (p->alias_root[p->kernels[j].reads[i]->id] == out) join = j;
        if (join < 0) beside++;
    }
    ck_assert_msg(beside >= 1 && strstr(p->kernels[ar + 1].name, "matmul"), "%d kernels between the all_reduce and "
                  "its reader; after it: %s", beside, p->kernels[ar + 1].name);
    ck_assert_int_ge(p->last_use[in->id], join - 1);
    mcir_env *env;
    mcir_gpu_stats st;
    char *diag = NULL;
    ck_assert_msg(emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag), "%s", diag);
    ck_assert_int_eq(st.overlapped, 1);
    ck_assert_double_le(rel_error(&c, env), 1e-4);
    mcir_env_free(env);
    free(diag);
    diag = NULL;
    cg_runtime_mutant = CG_MUTANT_COLLECTIVE_NO_JOIN;
    bool ran = emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag);
    cg_runtime_mutant = CG_MUTANT_NONE;
    ck_assert_msg(!ran && strstr(diag, "race") && strstr(diag, "ncclAllReduce of rank") &&
                      strstr(diag, "no event orders the two"), "the kernel that did not wait went unnoticed: %s", diag);
    mcir_env_free(env);
    free(diag);
    diag = NULL;
    setenv("MCIR_OVERLAP", "0", 1);
    ck_assert_msg(emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag), "%s", diag);
    unsetenv("MCIR_OVERLAP");
    ck_assert_int_eq(st.overlapped, -1);
    ck_assert_double_le(rel_error(&c, env), 1e-4);
    mcir_env_free(env);
    free(diag);
    mcir_compilation_free(&c);
}
END_TEST

/* One rank of an outside group on the emulated device (the Python
 * package's DTensor path, docs/python.md): the runtime runs this rank's
 * kernels and stages each collective through the host to the group's
 * function. A fake group of 2 (the other rank's partial sums from the
 * interpreter's lockstep run) adds this rank's device partials to them:
 * each rank's y is the interpreter's within 1e-4; a group that fails is
 * a failed run naming the collective. */
typedef struct emu_fake_group {
    const float *other;   /* the other rank's all_reduce input */
    int64_t count;
    int calls;
    bool fail;
} emu_fake_group;

static bool emu_fake_collective(void *ctx, const mcir_node *n, const void *in, void *out, mcir_diag *d) {
    (void)d;
    emu_fake_group *fg = ctx;
    fg->calls++;
    if (fg->fail || n->op != MCIR_OP_ALL_REDUCE || mcir_tensor_numel(n->inputs[0]) != fg->count) return false;
    const float *x = in;
    float *y = out;
    for (int64_t i = 0; i < fg->count; i++) y[i] = x[i] + fg->other[i];
    return true;
}

START_TEST(test_member_of_an_outside_group_on_the_device) {
    mcir_compilation c;
    cgt_compile_path(test_path("tests/data/ranks/mlp.json"), SM90, &c);
    const mcir_graph *g = c.graph;
    mcir_env *ref = mcir_env_new(g, 7);
    mcir_env_keep_all(ref, true);
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_interp_run(g, ref, &d));
    const mcir_tensor *p = NULL, *y = g->outputs[0];
    for (int k = 0; k < c.plan->n_kernels && !p; k++)
        if (c.plan->kernels[k].tpl == MCIR_TEMPLATE_COLLECTIVE) p = c.plan->kernels[k].anchor->inputs[0];
    ck_assert_ptr_nonnull(p);
    for (int r = 0; r < 2; r++) {
        mcir_env_select_rank(ref, 1 - r);
        emu_fake_group fg = {.other = mcir_env_get(ref, p), .count = mcir_tensor_numel(p)};
        mcir_group group = {r, emu_fake_collective, &fg};
        mcir_env *e = mcir_env_new_member(g, 7, &group);
        mcir_gpu_stats st;
        ck_assert(mcir_emu_run(c.codegen, e, MCIR_ALLOC_POOL, &st, &d));
        ck_assert_int_eq(fg.calls, 1);
        mcir_env_select_rank(ref, r);
        mcir_compare_result cr;
        ck_assert(mcir_env_compare(e, y, ref, y, &cr));
        ck_assert_msg(cr.max_rel <= 1e-4 && !cr.nonfinite_mismatch, "rank %d: max rel err %g", r, cr.max_rel);
        mcir_env_free(e);
    }
    emu_fake_group bad = {.other = NULL, .count = mcir_tensor_numel(p), .fail = true};
    mcir_group group = {1, emu_fake_collective, &bad};
    mcir_env *e = mcir_env_new_member(g, 7, &group);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mcir_diag df = mcir_diag_to(f);
    mcir_gpu_stats st;
    ck_assert(!mcir_emu_run(c.codegen, e, MCIR_ALLOC_POOL, &st, &df));
    fclose(f);
    ck_assert_msg(strstr(buf, "rank 1 of 2 failed") && strstr(buf, "all_reduce: the group's collective failed (rank 1)"),
                  "%s", buf);
    free(buf);
    mcir_env_free(e);
    mcir_env_free(ref);
    mcir_compilation_free(&c);
}
END_TEST

/* A graph of one rank with collectives: on the emulated device they go
 * through its NCCL with a communicator of one rank (as a machine with one
 * GPU runs them through NCCL's), not as copies: the emulated NCCL counts
 * one call each, and the outputs are the interpreter's. */
START_TEST(test_one_rank_communicator) {
    mcir_compilation c;
    cgt_compile_path(test_path("tests/data/ranks/one_rank.json"), SM90, &c);
    ck_assert_int_eq(c.graph->ranks, 1);
    int collectives = 0;
    for (int i = 0; i < c.plan->n_kernels; i++) collectives += c.plan->kernels[i].tpl == MCIR_TEMPLATE_COLLECTIVE;
    ck_assert_int_eq(collectives, 2);
    long before = mcir_emu_collective_calls();
    mcir_env *env;
    mcir_gpu_stats st;
    char *diag = NULL;
    ck_assert_msg(emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag), "%s", diag);
    ck_assert_int_eq(mcir_emu_collective_calls() - before, 2);
    double rel = rel_error(&c, env);
    ck_assert_double_le(rel, 2e-2);
    mcir_env_free(env);
    free(diag);
    mcir_compilation_free(&c);
}
END_TEST

/* The emulated device's collectives (emu/coll.c) as NCCL's calls: a sum
 * over 3 ranks in f16 and an all_gather right; a rank that never calls
 * the collective is a hang naming it, calls that disagree are a finding,
 * a read of bytes nothing wrote is uninitialised. NCCL itself: loaded or
 * named with what to install. */
START_TEST(test_emulated_collectives_are_checked) {
    char why[256];
    const mcir_cu_driver *drv = mcir_emu_driver("sm_90", why, sizeof why);
    ck_assert_msg(drv != NULL, "%s", why);
    const mcir_coll_api *coll = drv->coll;
    ck_assert_ptr_nonnull(coll);
    enum { R = 3, N = 40 };
    CUdeviceptr send[R], recv[R], big[R];
    uint16_t h[N];
    for (int r = 0; r < R; r++) {
        ck_assert_int_eq(drv->cuMemAlloc_v2(&send[r], 2 * N), 0);
        ck_assert_int_eq(drv->cuMemAlloc_v2(&recv[r], 2 * N), 0);
        ck_assert_int_eq(drv->cuMemAlloc_v2(&big[r], 2 * N * R), 0);
        for (int i = 0; i < N; i++) h[i] = mcir_f32_to_f16(0.25f * (float)((i * 7 + r * 3) % 11) - 1.0f);
        ck_assert_int_eq(drv->cuMemcpyHtoD_v2(send[r], h, sizeof h), 0);
    }
    void *comms[R];
    ck_assert_int_eq(coll->comm_init_all(comms, R, (int[]){0, 0, 0}), 0);
    /* the sum and the gather */
    ck_assert_int_eq(coll->group_start(), 0);
    for (int r = 0; r < R; r++)
        ck_assert_int_eq(coll->all_reduce((void *)(uintptr_t)send[r], (void *)(uintptr_t)recv[r], N, MCIR_NCCL_FLOAT16,
                                          MCIR_NCCL_SUM, comms[r], NULL), 0);
    for (int r = 0; r < R; r++)
        ck_assert_int_eq(coll->all_gather((void *)(uintptr_t)send[r], (void *)(uintptr_t)big[r], N, MCIR_NCCL_FLOAT16,
                                          comms[r], NULL), 0);
    ck_assert_int_eq(coll->group_end(), 0);
    for (int r = 0; r < R; r++) {
        uint16_t out[N], all[N * R];
        ck_assert_int_eq(drv->cuMemcpyDtoH_v2(out, recv[r], sizeof out), 0);
        ck_assert_int_eq(drv->cuMemcpyDtoH_v2(all, big[r], sizeof all), 0);
        for (int i = 0; i < N; i++) {
            float want = 0;
            for (int q = 0; q < R; q++) want += 0.25f * (float)((i * 7 + q * 3) % 11) - 1.0f;
            ck_assert_float_eq(mcir_f16_to_f32(out[i]), want);
            for (int q = 0; q < R; q++)
                ck_assert_float_eq(mcir_f16_to_f32(all[q * N + i]), 0.25f * (float)((i * 7 + q * 3) % 11) - 1.0f);
        }
    }
    /* rank 2 never calls */
    ck_assert_int_eq(coll->group_start(), 0);
    for (int r = 0; r < 2; r++)
        coll->all_reduce((void *)(uintptr_t)send[r], (void *)(uintptr_t)recv[r], N, MCIR_NCCL_FLOAT16, MCIR_NCCL_SUM,
                         comms[r], NULL);
    ck_assert_int_ne(coll->group_end(), 0);
    const char *f = drv->emu_findings();
    ck_assert_msg(strstr(f, "hang: ncclAllReduce: rank 2 of 3 never calls it (ranks 0, 1 do"), "%s", f);
    /* counts that disagree */
    ck_assert_int_eq(coll->group_start(), 0);
    for (int r = 0; r < R; r++)
        coll->all_reduce((void *)(uintptr_t)send[r], (void *)(uintptr_t)recv[r], r == 1 ? N - 1 : N, MCIR_NCCL_FLOAT16,
                         MCIR_NCCL_SUM, comms[r], NULL);
    ck_assert_int_ne(coll->group_end(), 0);
    f = drv->emu_findings();
    ck_assert_msg(strstr(f, "rank 1 ncclAllReduce (39 elements") && strstr(f, "must agree"), "%s", f);
    /* a read of what nothing wrote */
    CUdeviceptr fresh;
    ck_assert_int_eq(drv->cuMemAlloc_v2(&fresh, 2 * N), 0);
    ck_assert_int_eq(coll->group_start(), 0);
    for (int r = 0; r < R; r++)
        coll->all_reduce((void *)(uintptr_t)(r == 2 ? fresh : send[r]), (void *)(uintptr_t)recv[r], N,
                         MCIR_NCCL_FLOAT16, MCIR_NCCL_MAX, comms[r], NULL);
    ck_assert_int_ne(coll->group_end(), 0);
    f = drv->emu_findings();
    ck_assert_msg(strstr(f, "uninitialised: ncclAllReduce (rank 2 of 3) reads byte 0"), "%s", f);
    for (int r = 0; r < R; r++) ck_assert_int_eq(coll->comm_destroy(comms[r]), 0);
    /* NCCL: loaded, or what to install */
    const mcir_coll_api *nccl = mcir_nccl_load(why, sizeof why);
    ck_assert_msg((nccl && !strncmp(nccl->name, "NCCL ", 5)) || strstr(why, "nvidia-nccl-cu13"), "%s", why);
}
END_TEST

START_TEST(test_nccl_library_that_does_not_load_is_named) {
    setenv("MCIR_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    char why[512];
    ck_assert_ptr_null(mcir_nccl_load(why, sizeof why));
    ck_assert_msg(strstr(why, "MCIR_NCCL_LIBRARY=/nonexistent/libnccl.so.2 cannot be loaded"), "%s", why);
    unsetenv("MCIR_NCCL_LIBRARY");
}
END_TEST

/* ----------------------------------------------------------- mutants */

/* a block-per-row norm (rows of 3000): its reduction's __syncthreads */
/* Bound inputs and outputs off the 16-byte grid (a torch view with a
 * storage offset): the norm reads X and writes Y with 16-byte vectors, so
 * the runtime moves them through buffers of its own; the output lands at
 * the caller's address and matches the interpreter. */
START_TEST(test_misaligned_bound_tensors_go_through_our_buffers) {
    static const char LN[] =
        "{\"mcir\":1,\"name\":\"lnb\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f16\",\"shape\":[64,1024]}],"
        "\"weights\":[{\"name\":\"g\",\"dtype\":\"f16\",\"shape\":[1024]},{\"name\":\"b\",\"dtype\":\"f16\",\"shape\":[1024]}],"
        "\"nodes\":[{\"name\":\"ln\",\"op\":\"layernorm\",\"inputs\":[\"x\",\"g\",\"b\"],\"outputs\":[\"y\"]}],"
        "\"outputs\":[\"y\"]}";
    mcir_compilation c;
    cgt_compile_text(work_dir, "lnb", LN, SM90, &c);
    ck_assert_ptr_nonnull(strstr(c.codegen->k[kernel_of(&c, MCIR_TEMPLATE_STREAMING_NORM)].unit, "uint4"));
    char why[256];
    const mcir_cu_driver *drv = mcir_emu_driver("sm_90", why, sizeof why);
    ck_assert_msg(drv != NULL, "%s", why);
    const mcir_tensor *x = c.graph->inputs[0], *y = c.graph->outputs[0];
    int64_t n = mcir_tensor_numel(x), bytes = mcir_tensor_bytes(x);
    float *v = malloc(sizeof *v * (size_t)n);
    uint16_t *h = malloc((size_t)bytes), *out = malloc((size_t)bytes);
    ck_assert(v && h && out);
    mcir_fill_seeded(x, 3, v);
    mcir_values_from_f32(x->dtype, v, h, n);
    CUdeviceptr px = 0, py = 0;
    ck_assert_int_eq(drv->cuMemAlloc_v2(&px, (size_t)bytes + 16), 0);
    ck_assert_int_eq(drv->cuMemAlloc_v2(&py, (size_t)bytes + 16), 0);
    ck_assert_int_eq(drv->cuMemcpyHtoD_v2(px + 2, h, (size_t)bytes), 0);   /* 2 bytes off the grid */
    uint64_t *bound = calloc((size_t)c.graph->n_tensors + 1, sizeof *bound);
    ck_assert_ptr_nonnull(bound);
    bound[x->id] = px + 2;
    bound[y->id] = py + 6;
    mcir_env *env = mcir_env_new(c.graph, 7);
    mcir_gpu_stats st;
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_emu_run_bound(c.codegen, env, bound, MCIR_ALLOC_POOL, &st, &d));
    ck_assert_int_eq(drv->cuMemcpyDtoH_v2(out, py + 6, (size_t)bytes), 0);
    mcir_env *ref = mcir_env_new(c.graph, 7);
    mcir_env_set(ref, x, v);
    ck_assert(mcir_interp_run(c.graph, ref, &d));
    const float *want = mcir_env_get(ref, y);
    double worst = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs(mcir_f16_to_f32(out[i]) - want[i]));
        den = fmax(den, fabs(want[i]));
    }
    ck_assert(den > 0);
    fprintf(stderr, "  misaligned bound x and y: rel err %.3g\n", worst / den);
    ck_assert(worst / den < 2e-2);
    mcir_env_free(ref);
    mcir_env_free(env);
    drv->cuMemFree_v2(px);
    drv->cuMemFree_v2(py);
    free(bound);
    free(v);
    free(h);
    free(out);
    mcir_compilation_free(&c);
}
END_TEST

START_TEST(test_removed_syncthreads_is_a_race) {
    static const char g[] =
        "{\"mcir\":1,\"name\":\"norm\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[3,3000]}],"
        "\"weights\":[{\"name\":\"g\",\"dtype\":\"f32\",\"shape\":[3000]}],\"nodes\":[{\"name\":\"n\",\"op\":"
        "\"rmsnorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"y\"],\"attrs\":{\"axis\":-1}}],\"outputs\":[\"y\"]}";
    mcir_compilation c;
    cgt_compile_text(work_dir, "norm", g, SM90, &c);
    int i = kernel_of(&c, MCIR_TEMPLATE_STREAMING_NORM);
    /* the barrier between the warps' partial sums written and read back
     * (prelude.cuh's mc_block_sum, over the norm's part[]) */
    mutate_unit(&c, i, "if (lane == 0) MC_SST(scratch[warp], v);\n    __syncthreads();\n",
                "if (lane == 0) MC_SST(scratch[warp], v);\n", 0);
    expect_run_finding(&c, i, "race", "shared 'part'");   /* the array, by its name */
    mcir_compilation_free(&c);
}
END_TEST

/* the sm_90a attention: a consumer's wait for a K/V stage dropped */
START_TEST(test_dropped_mbarrier_wait_is_a_race) {
    static const char g[] =
        "{\"mcir\":1,\"name\":\"att\",\"inputs\":[{\"name\":\"q\",\"dtype\":\"f16\",\"shape\":[1,1,70,64]},"
        "{\"name\":\"k\",\"dtype\":\"f16\",\"shape\":[1,1,300,64]},{\"name\":\"v\",\"dtype\":\"f16\",\"shape\":[1,1,"
        "300,64]}],\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":["
        "\"y\"]}],\"outputs\":[\"y\"]}";
    mcir_compilation c;
    cgt_compile_text(work_dir, "att", g, SM90, &c);
    int i = kernel_of(&c, MCIR_TEMPLATE_STREAMING_ATTENTION);
    ck_assert(c.codegen->k[i].sm90a);
    /* the mainloop's wait for K (att_step) */
    mutate_unit(&c, i, "    mc_ring_wait(kring, ks);\n    const u32 k_at", "    const u32 k_at", 0);
    expect_run_finding(&c, i, "race", "dynamic shared memory");
    mcir_compilation_free(&c);
}
END_TEST

/* the generated matmul (no cuBLAS): its store bound one row too far */
START_TEST(test_off_by_one_tile_bound_is_out_of_bounds) {
    setenv("MCIR_NO_CUBLAS", "1", 1);
    static const char g[] =
        "{\"mcir\":1,\"name\":\"mm\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[100,64]}],"
        "\"weights\":[{\"name\":\"w\",\"dtype\":\"f32\",\"shape\":[64,40]}],\"nodes\":[{\"name\":\"p\",\"op\":"
        "\"matmul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}";
    mcir_compilation c;
    cgt_compile_text(work_dir, "mm", g, SM90, &c);
    int i = kernel_of(&c, MCIR_TEMPLATE_MATMUL);
    /* the bound both stores test (the tensor-core and the FMA tile's: MM_IN;
     * M = 100 is not a multiple of the tile, so MM_CHECK_M is 1) */
    mutate_unit(&c, i, "(!MM_CHECK_M || (m) < MM_M)", "(!MM_CHECK_M || (m) <= MM_M)", 0);
    expect_run_finding(&c, i, "out-of-bounds", "'y'");
    mcir_compilation_free(&c);
    unsetenv("MCIR_NO_CUBLAS");
}
END_TEST

/* a bare matmul through cuBLAS: B's leading dimension off by a row of 8 */
START_TEST(test_wrong_cublas_leading_dim_is_out_of_bounds) {
    unsetenv("MCIR_NO_CUBLAS");
    setenv("MCIR_NO_CUBLASLT", "1", 1);   /* cublasGemmStridedBatchedEx itself */
    static const char g[] =
        "{\"mcir\":1,\"name\":\"bl\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[64,32]}],"
        "\"weights\":[{\"name\":\"w\",\"dtype\":\"f32\",\"shape\":[32,48]}],\"nodes\":[{\"name\":\"p\",\"op\":"
        "\"matmul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}";
    mcir_compilation c;
    cgt_compile_text(work_dir, "bl", g, SM90, &c);
    int i = kernel_of(&c, MCIR_TEMPLATE_MATMUL);
    cg_gemm_desc *gd = &c.codegen->k[i].gemm;
    ck_assert_msg(gd->ok, "the matmul does not take cuBLAS");
    /* first the unmutated call is right */
    mcir_env *env;
    mcir_gpu_stats st;
    char *diag = NULL;
    ck_assert_msg(emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag), "%s", diag);
    ck_assert_double_le(rel_error(&c, env), 1e-5);
    mcir_env_free(env);
    free(diag);
    gd->ldb += 8;
    expect_run_finding(&c, i, "out-of-bounds", "'w'");
    mcir_compilation_free(&c);
    unsetenv("MCIR_NO_CUBLASLT");
}
END_TEST

/* split-KV decode whose Q is an arena tensor (a kernel computes it) */
static const char DECODE[] =
        "{\"mcir\":1,\"name\":\"dec\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[1,4,1,64]},"
        "{\"name\":\"k\",\"dtype\":\"f32\",\"shape\":[1,4,2048,64]},{\"name\":\"v\",\"dtype\":\"f32\",\"shape\":[1,4,"
        "2048,64]}],\"weights\":[{\"name\":\"g\",\"dtype\":\"f32\",\"shape\":[64]}],\"nodes\":[{\"name\":\"qn\",\"op\":\"rmsnorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"q\"],\"attrs\":{"
        "\"axis\":-1}},{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":[\"y\"]}],"
        "\"outputs\":[\"y\"]}";

/* the partials' scratch placed over Q */
START_TEST(test_scratch_over_a_live_tensor_is_found) {
    mcir_compilation c;
    cgt_compile_text(work_dir, "dec", DECODE, SM90, &c);
    int i = kernel_of(&c, MCIR_TEMPLATE_STREAMING_ATTENTION);
    ck_assert_msg(c.codegen->k[i].merge_grid > 0, "the decode attention does not split");
    mcir_memplan *m = c.memory;
    int scratch = -1, q = -1;
    for (int b = 0; b < m->n_buffers; b++) {
        if (!m->buffers[b].tensor && m->buffers[b].first == i) scratch = b;
        if (m->buffers[b].tensor && strcmp(m->buffers[b].tensor->name, "q") == 0) q = b;
    }
    ck_assert_msg(scratch >= 0 && q >= 0, "no scratch or no q in the arena");
    ck_assert_int_eq(m->buffers[scratch].pool, m->buffers[q].pool);
    m->buffers[scratch].offset = m->buffers[q].offset;
    mcir_env *env;
    mcir_gpu_stats st;
    char *diag = NULL;
    bool ok = emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag);
    double rel = ok ? rel_error(&c, env) : INFINITY;
    fprintf(stderr, "  scratch over q: %s, rel err %.3g\n", ok ? "ran" : "failed", rel);
    if (ok) ck_assert_double_gt(rel, 1e-3);   /* a wrong result (--verify: exit 1) */
    else expect_finding(diag, c.plan->kernels[i].name, "race", "split-KV scratch");
    mcir_env_free(env);
    free(diag);
    mcir_compilation_free(&c);
}
END_TEST

/* dynamic shared memory beyond what the function was allowed */
START_TEST(test_shared_memory_beyond_the_attribute_fails) {
    static const char g[] =
        "{\"mcir\":1,\"name\":\"att2\",\"inputs\":[{\"name\":\"q\",\"dtype\":\"f16\",\"shape\":[1,1,70,64]},"
        "{\"name\":\"k\",\"dtype\":\"f16\",\"shape\":[1,1,300,64]},{\"name\":\"v\",\"dtype\":\"f16\",\"shape\":[1,1,"
        "300,64]}],\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":["
        "\"y\"]}],\"outputs\":[\"y\"]}";
    mcir_compilation c;
    cgt_compile_text(work_dir, "att2", g, SM90, &c);
    int i = kernel_of(&c, MCIR_TEMPLATE_STREAMING_ATTENTION);
    ck_assert_int_gt(c.codegen->k[i].smem, 48 * 1024);
    c.codegen->k[i].unit_smem = 0;   /* the runtime would not raise the function's limit */
    char *diag = run_expecting_failure(&c);
    ck_assert_ptr_nonnull(strstr(diag, "dynamic shared memory"));
    free(diag);
    mcir_compilation_free(&c);
}
END_TEST


/* -------------------------------------------- GPU run diagnostics (#30)
 * The runtime's handling of what only a GPU does — a fault reported
 * asynchronously, a kernel that never finishes, a device of another
 * compute capability — driven through the emulated device's injected
 * failures (MCIR_EMU_FAULT / MCIR_EMU_HANG / MCIR_EMU_ARCH), the same
 * code path as on a GPU. */

/* A norm, then an attention, then a matmul: three kernels in order. */
static const char CHAIN[] =
    "{\"mcir\":1,\"name\":\"chain\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f16\",\"shape\":[1,2,64,64]}],"
    "\"weights\":[{\"name\":\"g\",\"dtype\":\"f16\",\"shape\":[64]},{\"name\":\"w\",\"dtype\":\"f16\",\"shape\":[64,64]}],"
    "\"nodes\":[{\"name\":\"n\",\"op\":\"rmsnorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"h\"],\"attrs\":{\"axis\":-1}},"
    "{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"h\",\"h\",\"h\"],\"outputs\":[\"a\"],\"attrs\":{\"causal\":true}},"
    "{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"w\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}";


START_TEST(test_asynchronous_fault_is_bounded_then_named_with_sync) {
    mcir_compilation c;
    cgt_compile_text(work_dir, "chain", CHAIN, SM90, &c);
    int at = kernel_of(&c, MCIR_TEMPLATE_STREAMING_ATTENTION);
    setenv("MCIR_EMU_FAULT", "mc_streaming_attention", 1);
    /* asynchronous (the default): the kernels it may be in, and how to name it */
    char *diag = run_expecting_failure(&c);
    ck_assert_msg(strstr(diag, "GPU fault: CUDA_ERROR_ILLEGAL_ADDRESS, reported asynchronously") &&
                  strstr(diag, c.plan->kernels[at].name) && strstr(diag, "--sync"), "%s", diag);
    free(diag);
    /* synchronous: the kernel, its grid, block and shared memory */
    mcir_gpu_set_sync(true);
    diag = run_expecting_failure(&c);
    char want[300];
    snprintf(want, sizeof want, "%s: error: GPU fault: CUDA_ERROR_ILLEGAL_ADDRESS (grid ", c.plan->kernels[at].name);
    ck_assert_msg(strstr(diag, want) && strstr(diag, "synchronous mode"), "no '%s' in:\n%s", want, diag);
    free(diag);
    mcir_gpu_set_sync(false);
    /* a kernel of two launches (split-KV decode: the kernel, its merge):
     * the merge refused after the kernel faulted is that fault */
    mcir_compilation dc;
    cgt_compile_text(work_dir, "dec", DECODE, SM90, &dc);
    int dk = kernel_of(&dc, MCIR_TEMPLATE_STREAMING_ATTENTION);
    ck_assert(dc.codegen->k[dk].merge_grid > 0);
    diag = run_expecting_failure(&dc);
    ck_assert_msg(strstr(diag, "GPU fault: CUDA_ERROR_ILLEGAL_ADDRESS, reported asynchronously") &&
                  strstr(diag, dc.plan->kernels[dk].name) && !strstr(diag, "launch failed"), "%s", diag);
    free(diag);
    mcir_compilation_free(&dc);
    unsetenv("MCIR_EMU_FAULT");
    /* the next run is clean: the error belonged to the last context */
    mcir_env *env;
    mcir_gpu_stats st;
    diag = NULL;
    ck_assert_msg(emu_run(&c, MCIR_ALLOC_POOL, &env, &st, &diag), "%s", diag);
    mcir_env_free(env);
    free(diag);
    mcir_compilation_free(&c);
}
END_TEST

/* The seconds a hang diagnostic says the kernel ran ("still running
 * after S s"), or -1. */
static double hang_seconds(const char *diag) {
    const char *p = strstr(diag, "still running after ");
    return p ? strtod(p + strlen("still running after "), NULL) : -1;
}

/* The watchdog reads the device's clock: the emulated device's advances by
 * the runtime's naps, so a hang past a 10 s deadline is found at once,
 * with no wall-clock wait in the test (docs/testing.md: no test sleeps). */
START_TEST(test_hang_is_exit_3_naming_the_kernel) {
    mcir_compilation c;
    cgt_compile_text(work_dir, "chain", CHAIN, SM90, &c);
    int at = kernel_of(&c, MCIR_TEMPLATE_STREAMING_ATTENTION);
    setenv("MCIR_EMU_HANG", "mc_streaming_attention", 1);
    static const mcir_alloc_mode modes[] = {MCIR_ALLOC_POOL, MCIR_ALLOC_LAZY};
    for (int m = 0; m < 2; m++) {   /* lazy mode waits inside the launches too */
        mcir_gpu_set_watchdog(0.5);
        mcir_env *env;
        mcir_gpu_stats st;
        char *diag = NULL;
        ck_assert(!emu_run(&c, modes[m], &env, &st, &diag));
        char want[300];
        snprintf(want, sizeof want, "%s: error: hang: still running after", c.plan->kernels[at].name);
        ck_assert_msg(strstr(diag, want) && strstr(diag, "the run is abandoned"), "no '%s' in:\n%s", want, diag);
        /* the runtime waited with a deadline, never blindly (the emulated
         * device reports a wait that would block forever) */
        ck_assert_msg(!strstr(diag, "blocks forever"), "%s", diag);
        double spent = hang_seconds(diag);
        ck_assert_msg(spent >= 0.5 && spent < 5.0, "%s", diag);
        mcir_env_free(env);
        free(diag);
    }
    /* the default deadline: 10 s + 100 x the modelled time */
    mcir_gpu_set_watchdog(-1);
    unsetenv("MCIR_GPU_WATCHDOG");
    char *diag = run_expecting_failure(&c);
    ck_assert_msg(strstr(diag, "hang: still running after") && strstr(diag, "10 s + 100 x its modelled time"), "%s",
                  diag);
    double spent = hang_seconds(diag);
    ck_assert_msg(spent >= 10.0 && spent < 30.0, "%s", diag);
    free(diag);
    unsetenv("MCIR_EMU_HANG");
    mcir_compilation_free(&c);
}
END_TEST

START_TEST(test_device_of_another_compute_capability_is_named) {
    mcir_compilation c;
    cgt_compile_text(work_dir, "chain", CHAIN, SM90, &c);   /* f16 attention: sm_90a on sm_90 */
    bool sm90a = false;
    for (int i = 0; i < c.codegen->n; i++) sm90a |= c.codegen->k[i].sm90a;
    ck_assert(sm90a);
    setenv("MCIR_EMU_ARCH", "sm_80", 1);
    char *diag = run_expecting_failure(&c);
    ck_assert_msg(strstr(diag, "sm_90a") && strstr(diag, "compute capability 8.0") && strstr(diag, "--arch sm_80"),
                  "%s", diag);
    ck_assert_msg(!strchr(strchr(diag, '\n') + 1, '\n'), "one line:\n%s", diag);
    free(diag);
    unsetenv("MCIR_EMU_ARCH");
    mcir_compilation_free(&c);
}
END_TEST

START_TEST(test_version_and_arch_checks) {
    char why[400];
    ck_assert(!mcir_gpu_check_versions(11080, "12.4", why, sizeof why));   /* a CUDA 11.8 driver, NVRTC 12.4 */
    ck_assert_msg(strstr(why, "driver is too old") && strstr(why, "CUDA 11.8") && strstr(why, "NVRTC 12.4"), "%s", why);
    ck_assert(mcir_gpu_check_versions(12040, "12.8", why, sizeof why));     /* minor version compatibility */
    ck_assert(mcir_gpu_check_versions(13000, "12.8", why, sizeof why));
    ck_assert(mcir_gpu_check_versions(12040, "none", why, sizeof why));     /* built without NVRTC */
    ck_assert(!mcir_gpu_check_arch("sm_90", 8, 0, false, "A100", why, sizeof why));
    ck_assert_msg(strstr(why, "made for sm_90") && strstr(why, "A100") && strstr(why, "--arch sm_80"), "%s", why);
    ck_assert(!mcir_gpu_check_arch("sm_89", 8, 6, false, "RTX 3090", why, sizeof why));
    ck_assert_msg(strstr(why, "--arch sm_86"), "%s", why);
    ck_assert(mcir_gpu_check_arch("sm_80", 9, 0, false, "H100", why, sizeof why));   /* recompiled for 9.0 */
    ck_assert(mcir_gpu_check_arch("sm_90", 9, 0, true, "H100", why, sizeof why));
    ck_assert(!mcir_gpu_check_arch("sm_90", 10, 0, true, "B200", why, sizeof why));  /* sm_90a is 9.0 only */
    ck_assert_msg(strstr(why, "sm_90a") && strstr(why, "10.0"), "%s", why);
}
END_TEST

/* ------------------------------------------------ cuBLASLt used well (#29)
 * A linear layer over a batch ([B, T, K] x [K, N] + bias, GELU): one
 * cuBLASLt call of B*T rows with its epilogue, prepared once (descriptors,
 * the heuristic's algorithm) and given the workspace that algorithm needs
 * (the emulated cuBLASLt refuses a call without the algorithm chosen for
 * its problem, or with less workspace, and overwrites the workspace). */
static void linear_json(char *buf, size_t n, int batch, int rows, int k, int cols) {
    snprintf(buf, n,
             "{\"mcir\":1,\"name\":\"lin\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f16\",\"shape\":[%d,%d,%d]}],"
             "\"weights\":[{\"name\":\"w\",\"dtype\":\"f16\",\"shape\":[%d,%d]},{\"name\":\"b\",\"dtype\":\"f16\","
             "\"shape\":[%d]}],\"nodes\":[{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"h\"]},"
             "{\"name\":\"ad\",\"op\":\"add\",\"inputs\":[\"h\",\"b\"],\"outputs\":[\"z\"]},{\"name\":\"ge\",\"op\":"
             "\"gelu\",\"inputs\":[\"z\"],\"outputs\":[\"y\"],\"attrs\":{\"approximate\":\"tanh\"}}],\"outputs\":[\"y\"]}",
             batch, rows, k, k, cols, cols);
}

/* A run that must succeed: its stats, the relative error, the diagnostics. */
static double run_ok(mcir_compilation *c, mcir_gpu_stats *st, char **diag) {
    mcir_env *env;
    *diag = NULL;
    ck_assert_msg(emu_run(c, MCIR_ALLOC_POOL, &env, st, diag), "%s", *diag);
    double rel = rel_error(c, env);
    mcir_env_free(env);
    return rel;
}

START_TEST(test_cublaslt_prepared_once_with_its_workspace) {
    char g[1200];
    linear_json(g, sizeof g, 3, 40, 64, 96);
    mcir_compilation c;
    cgt_compile_text(work_dir, "lin", g, SM90, &c);
    int i = kernel_of(&c, MCIR_TEMPLATE_MATMUL);
    const cg_gemm_desc *gd = &c.codegen->k[i].gemm;
    ck_assert_msg(gd->ok && gd->lt, "a batched linear layer with bias and GELU is one cuBLASLt call");
    ck_assert_int_eq(gd->m, 3 * 40);   /* the batch flattened into rows */
    ck_assert_int_eq(gd->batch, 1);
    long h0, l0, h1, l1, h2, l2;
    mcir_emu_blas_counts(&h0, &l0);
    mcir_gpu_stats st;
    char *diag;
    ck_assert_double_le(run_ok(&c, &st, &diag), 2e-2);
    free(diag);
    mcir_emu_blas_counts(&h1, &l1);
    ck_assert_int_eq(h1 - h0, 1);   /* chosen once */
    ck_assert_int_eq(l1 - l0, 1);
    ck_assert_int_eq(st.workspace_bytes, 4 * 120 * 96);   /* what the algorithm asked for */
    ck_assert_int_eq(st.lt_fallbacks, 0);
    ck_assert_double_le(run_ok(&c, &st, &diag), 2e-2);   /* the next run: the algorithm kept */
    free(diag);
    mcir_emu_blas_counts(&h2, &l2);
    ck_assert_int_eq(h2 - h1, 0);
    ck_assert_int_eq(l2 - l1, 1);
    mcir_compilation_free(&c);
}
END_TEST

/* No algorithm (at open, or refused at run time): the generated kernel
 * runs the GEMM and its epilogue, and the run says so once. */
START_TEST(test_cublaslt_not_supported_runs_the_generated_kernel) {
    static const char *const modes[] = {"1", "run"};
    for (int m = 0; m < 2; m++) {
        char g[1200];
        linear_json(g, sizeof g, 2, 24 + 8 * m, 32, 48);   /* shapes of their own: no algorithm kept */
        mcir_compilation c;
        cgt_compile_text(work_dir, "lin", g, SM90, &c);
        int i = kernel_of(&c, MCIR_TEMPLATE_MATMUL);
        ck_assert(c.codegen->k[i].gemm.lt);
        setenv("MCIR_EMU_LT_UNSUPPORTED", modes[m], 1);
        mcir_emu_reset_launches();
        mcir_gpu_stats st;
        char *diag;
        ck_assert_double_le(run_ok(&c, &st, &diag), 2e-2);
        unsetenv("MCIR_EMU_LT_UNSUPPORTED");
        ck_assert_int_eq(st.lt_fallbacks, 1);
        ck_assert_msg(diag && strstr(diag, "warning: lin_mm") && strstr(diag, "CUBLAS_STATUS_NOT_SUPPORTED") &&
                      strstr(diag, "the generated kernel runs it"), "%s: %s", modes[m], diag);
        const mcir_emu_launch_record *rec;
        int n = mcir_emu_launches(&rec);
        bool generated = false;
        for (int r = 0; r < n; r++) generated |= !strcmp(rec[r].kernel, mcir_codegen_kernel_entry(c.codegen, i));
        ck_assert_msg(generated, "the generated GEMM did not run");
        free(diag);
        mcir_compilation_free(&c);
    }
}
END_TEST

/* The runtime's CUresult names (cuda_driver.c) against a second source,
 * the toolkit's cuda.h: every code the runtime names (0..1000) has that
 * name there. */
START_TEST(test_cu_error_names_match_cuda_h) {
    FILE *f = fopen("/usr/local/cuda/include/cuda.h", "r");
    if (!f) {
        fprintf(stderr, "  skipped: no /usr/local/cuda/include/cuda.h\n");
        return;
    }
    static char names[1001][128];
    char line[512], name[128];
    int code;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, " %127[A-Z_0-9] = %d", name, &code) == 2 && strncmp(name, "CUDA_ERROR_", 11) == 0 &&
            code >= 0 && code <= 1000)
            snprintf(names[code], sizeof names[code], "%s", name);
    fclose(f);
    int named = 0;
    for (int c = 1; c <= 1000; c++) {
        const char *ours = mcir_cu_error(c);
        if (strncmp(ours, "CUDA_ERROR_", 11) != 0) continue;   /* a code the table leaves generic */
        size_t n = strlen(names[c]);
        ck_assert_msg(n > 0 && strncmp(ours, names[c], n) == 0 && (ours[n] == '\0' || ours[n] == ':'),
                      "code %d: cuda.h says '%s', the runtime '%s'", c, names[c], ours);
        named++;
    }
    ck_assert_int_ge(named, 25);
}
END_TEST

int main(void) {
    char why[256];
    if (!mcir_emu_available(why, sizeof why)) return test_skip(why);
    if (!test_tempdir("emudev", work_dir, sizeof work_dir)) return 1;
    Suite *s = suite_create("emu_device");
    TCase *tc = tcase_create("device");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_cu_error_names_match_cuda_h);
    tcase_add_test(tc, test_runs_in_every_mode);
    tcase_add_test(tc, test_ranks_run_in_lockstep);
    tcase_add_test(tc, test_one_rank_communicator);
    tcase_add_test(tc, test_collectives_overlap_on_a_second_stream);
    tcase_add_test(tc, test_member_of_an_outside_group_on_the_device);
    tcase_add_test(tc, test_emulated_collectives_are_checked);
    tcase_add_test(tc, test_nccl_library_that_does_not_load_is_named);
    tcase_add_test(tc, test_removed_syncthreads_is_a_race);
    tcase_add_test(tc, test_dropped_mbarrier_wait_is_a_race);
    tcase_add_test(tc, test_off_by_one_tile_bound_is_out_of_bounds);
    tcase_add_test(tc, test_wrong_cublas_leading_dim_is_out_of_bounds);
    tcase_add_test(tc, test_scratch_over_a_live_tensor_is_found);
    tcase_add_test(tc, test_shared_memory_beyond_the_attribute_fails);
    tcase_add_test(tc, test_asynchronous_fault_is_bounded_then_named_with_sync);
    tcase_add_test(tc, test_hang_is_exit_3_naming_the_kernel);
    tcase_add_test(tc, test_device_of_another_compute_capability_is_named);
    tcase_add_test(tc, test_version_and_arch_checks);
    tcase_add_test(tc, test_cublaslt_prepared_once_with_its_workspace);
    tcase_add_test(tc, test_cublaslt_not_supported_runs_the_generated_kernel);
    tcase_add_test(tc, test_misaligned_bound_tensors_go_through_our_buffers);
    suite_add_tcase(s, tc);
    int failed = test_main_nofork(s);
    test_remove_dir(work_dir);
    return failed;
}
