/*
 * test_graphs.c — sessions and CUDA graphs (runtime/runtime.h) on the
 * emulated device (emu/emu.h), the runtime's code path on a GPU:
 *  - a session steps a compiled graph (cuBLASLt matmuls; a split-KV
 *    decode; the sm_90a attention with its tensor maps) several times with new inputs at
 *    every step; with graphs on, the outputs equal those of the same
 *    session without graphs (bit for bit: the same kernels) and the
 *    interpreter's, and the outputs of successive steps differ (so a
 *    replay that misses the new inputs is caught);
 *  - the emulated driver really replays: the first step runs the launches
 *    (a warm-up), captures them (every launch and library call recorded,
 *    not run) and replays; every later step is one cuGraphLaunch and no
 *    cuLaunchKernel or GEMM call, its kernels (and cuBLAS / cuBLASLt calls,
 *    the split-KV merge) run from the record;
 *  - sessions step in every allocation mode (graphs in pool and eager);
 *  - a mutant of the runtime whose replay skips the input upload is found;
 *  - bound inputs at other addresses each step go through the session's
 *    buffers (no re-capture);
 *  - a graph with dims keeps one graph per size: a size seen before
 *    replays, a new one captures, the least recently used of 8 goes;
 *  - a fault or a hang in a replay is one diagnostic saying how to name
 *    the kernel (without graphs); the session then only closes;
 *  - what cannot be captured is one diagnostic: graphs with --alloc lazy
 *    or --sync, a wait in the launch sequence while capturing (a mutant
 *    runtime); and the
 *    emulated driver's capture rules (a wait, an allocation or a
 *    synchronous copy while capturing invalidates the capture).
 * Skips (77) without a C++ compiler for the emulator's modules.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "runtime/cuda_driver.h"
#include "runtime/runtime-impl.h"
#include "runtime/runtime.h"
#include "emu/emu.h"
#include "pipeline_test.h"
#include "test_util.h"

static char work_dir[256];

/* The graphs compiled for sm_90 with their CUDA, as mcirc has them before --run. */
static const cgt_pipe SM90 = {.arch = "sm_90", .cuda = true};

/* x, two matmuls (cuBLAS / cuBLASLt), a GELU and an RMSnorm: f32. */
static const char MLP[] =
    "{\"mcir\":1,\"name\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[40,64]}],"
    "\"weights\":[{\"name\":\"w1\",\"dtype\":\"f32\",\"shape\":[64,96]},{\"name\":\"w2\",\"dtype\":\"f32\","
    "\"shape\":[96,24]},{\"name\":\"g\",\"dtype\":\"f32\",\"shape\":[96]}],"
    "\"nodes\":[{\"name\":\"mm1\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w1\"],\"outputs\":[\"h\"]},"
    "{\"name\":\"act\",\"op\":\"gelu\",\"inputs\":[\"h\"],\"outputs\":[\"a\"]},"
    "{\"name\":\"ln\",\"op\":\"rmsnorm\",\"inputs\":[\"a\",\"g\"],\"outputs\":[\"n\"],\"attrs\":{\"axis\":-1}},"
    "{\"name\":\"mm2\",\"op\":\"matmul\",\"inputs\":[\"n\",\"w2\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}";

/* split-KV decode (the attention's scratch and merge) after a norm: f32. */
static const char DECODE[] =
    "{\"mcir\":1,\"name\":\"dec\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[1,2,1,64]},"
    "{\"name\":\"k\",\"dtype\":\"f32\",\"shape\":[1,2,1024,64]},{\"name\":\"v\",\"dtype\":\"f32\",\"shape\":[1,2,"
    "1024,64]}],\"weights\":[{\"name\":\"g\",\"dtype\":\"f32\",\"shape\":[64]}],\"nodes\":[{\"name\":\"qn\",\"op\":"
    "\"rmsnorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"q\"],\"attrs\":{\"axis\":-1}},{\"name\":\"at\",\"op\":"
    "\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}";

/* the sm_90a attention (TMA tensor maps passed by value), causal, Nk > Nq: f16. */
static const char ATT90[] =
    "{\"mcir\":1,\"name\":\"att90\",\"inputs\":[{\"name\":\"q\",\"dtype\":\"f16\",\"shape\":[1,2,130,64]},"
    "{\"name\":\"k\",\"dtype\":\"f16\",\"shape\":[1,2,190,64]},"
    "{\"name\":\"v\",\"dtype\":\"f16\",\"shape\":[1,2,190,64]}],"
    "\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":[\"y\"],"
    "\"attrs\":{\"causal\":true}}],\"outputs\":[\"y\"]}";

/* Step s's inputs: seeded per step and input (finite, varied, never all
 * zeros), into env. */
static void set_step_inputs(const mcir_graph *g, mcir_env *env, int step) {
    for (int i = 0; i < g->n_inputs; i++) {
        const mcir_tensor *t = g->inputs[i];
        float *v = malloc(sizeof *v * (size_t)mcir_tensor_numel(t));
        ck_assert_ptr_nonnull(v);
        mcir_fill_seeded(t, (uint64_t)(100 + 17 * step + i), v);
        mcir_env_set(env, t, v);
        free(v);
    }
}

/* max |a - b| / max |b| over output t */
static double rel_diff(const mcir_tensor *t, mcir_env *a, mcir_env *b) {
    const float *x = mcir_env_get(a, t), *y = mcir_env_get(b, t);
    double worst = 0, den = 0;
    for (int64_t k = 0; k < mcir_tensor_numel(t); k++) {
        worst = fmax(worst, fabs((double)x[k] - y[k]));
        den = fmax(den, fabs(y[k]));
    }
    ck_assert_msg(den > 0, "an all-zero output asserts nothing");
    return worst / den;
}

/* What n steps of a graph session did, against a session without graphs
 * and the interpreter: the worst relative error of any step's output
 * against the interpreter, and whether the two sessions agreed bit for
 * bit. Checks the call counts of the replaying steps. */
typedef struct steps_result {
    double worst_vs_interp;
    bool identical;
    double min_step_change;   /* smallest change of the output from one step to the next */
} steps_result;

static steps_result run_steps(mcir_compilation *c, int n) {
    const mcir_graph *g = c->graph;
    mcir_diag d = mcir_diag_stderr();
    mcir_env *env_g = mcir_env_new(g, 7), *env_p = mcir_env_new(g, 7), *prev = mcir_env_new(g, 7);
    mcir_gpu_session_options on = {.mode = MCIR_ALLOC_POOL, .graphs = 1}, off = {.mode = MCIR_ALLOC_POOL, .graphs = 0};
    mcir_gpu_session *sg = mcir_emu_session_open(c->codegen, env_g, &on, &d);
    mcir_gpu_session *sp = mcir_emu_session_open(c->codegen, env_p, &off, &d);
    ck_assert(sg && sp);
    ck_assert(mcir_gpu_session_graphs(sg) && !mcir_gpu_session_graphs(sp));
    steps_result res = {0, true, INFINITY};
    for (int step = 0; step < n; step++) {
        set_step_inputs(g, env_g, step);
        set_step_inputs(g, env_p, step);
        mcir_gpu_stats st;
        mcir_emu_calls calls, plain;
        const mcir_emu_launch_record *rec;
        /* without graphs: the launches (kernels, merges, epilogues) of a step */
        mcir_emu_reset_launches();
        ck_assert(mcir_gpu_session_step(sp, env_p, NULL, &st, &d));
        ck_assert(!st.graph);
        mcir_emu_call_counts(&plain);
        int plain_ran = mcir_emu_launches(&rec);
        ck_assert_int_ge(plain.launch_kernel, 1);
        ck_assert_int_eq(plain.graph_launch, 0);
        /* with graphs: the same kernels run, from one cuGraphLaunch */
        mcir_emu_reset_launches();
        ck_assert(mcir_gpu_session_step(sg, env_g, NULL, &st, &d));
        ck_assert(st.graph);
        mcir_emu_call_counts(&calls);
        int ran = mcir_emu_launches(&rec);
        fprintf(stderr, "  %s step %d: %ld cuLaunchKernel, %ld captured, %ld cuGraphLaunch, %d kernels ran (%ld "
                "cuLaunchKernel without graphs), host %.0f us\n", g->name, step, calls.launch_kernel, calls.captured,
                calls.graph_launch, ran, plain.launch_kernel, st.host_us);
        ck_assert_int_eq(calls.graph_launch, 1);
        if (step == 0) {   /* the warm-up (run), the capture (every launch and library call recorded), a replay */
            ck_assert_int_eq(calls.begin_capture, 1);
            ck_assert_int_eq(calls.instantiate, 1);
            ck_assert_int_eq(calls.launch_kernel, 2 * plain.launch_kernel);
            ck_assert_int_eq(calls.library, 2 * plain.library);
            ck_assert_int_eq(calls.captured, plain.launch_kernel + plain.library);
            ck_assert_int_eq(ran, 2 * plain_ran);
            ck_assert_double_gt(st.capture_us, 0);
        } else {           /* a replay: one call, which runs them all */
            ck_assert_int_eq(ran, plain_ran);
            ck_assert_int_eq(calls.launch_kernel, 0);
            ck_assert_int_eq(calls.library, 0);
            ck_assert_int_eq(calls.captured, 0);
            ck_assert_int_eq(calls.begin_capture, 0);
        }

        mcir_env *ref = mcir_env_new(g, 7);
        set_step_inputs(g, ref, step);
        ck_assert(mcir_interp_run(g, ref, &d));
        for (int o = 0; o < g->n_outputs; o++) {
            const mcir_tensor *t = g->outputs[o];
            res.worst_vs_interp = fmax(res.worst_vs_interp, rel_diff(t, env_g, ref));
            res.identical &= !memcmp(mcir_env_get(env_g, t), mcir_env_get(env_p, t),
                                     sizeof(float) * (size_t)mcir_tensor_numel(t));
            if (step > 0) res.min_step_change = fmin(res.min_step_change, rel_diff(t, ref, prev));
        }
        mcir_env_free(prev);
        prev = ref;
    }
    mcir_gpu_session_close(sg);
    mcir_gpu_session_close(sp);
    mcir_env_free(prev);
    mcir_env_free(env_g);
    mcir_env_free(env_p);
    return res;
}

START_TEST(test_graph_steps_match_steps_without_graphs) {
    static const struct { const char *name, *json; double tol; } graphs[] = {
        {"mlp", MLP, 1e-4}, {"dec", DECODE, 1e-4}, {"att90", ATT90, 2e-2}};
    for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
        mcir_compilation c;
        cgt_compile_text(work_dir, graphs[i].name, graphs[i].json, SM90, &c);
        int maps = 0;
        for (int k = 0; k < c.codegen->n; k++) maps += c.codegen->k[k].n_tmaps;
        if (!strcmp(graphs[i].name, "att90")) ck_assert_int_gt(maps, 0);   /* tensor maps captured by value */
        steps_result r = run_steps(&c, 3);
        fprintf(stderr, "  %s: rel err %.3g, identical %d, step change >= %.3g\n", graphs[i].name,
                r.worst_vs_interp, r.identical, r.min_step_change);
        ck_assert_double_le(r.worst_vs_interp, graphs[i].tol);
        ck_assert(r.identical);
        ck_assert_double_gt(r.min_step_change, 1e-2);   /* new inputs change the output */
        mcir_compilation_free(&c);
    }
}
END_TEST

/* Sessions in every allocation mode (LAZY without graphs: its frees are
 * not capturable): each of three steps matches the interpreter on its own
 * inputs; the peak is that of one step (LAZY frees what it allocates). */
START_TEST(test_sessions_in_every_mode) {
    mcir_compilation c;
    cgt_compile_text(work_dir, "mlp", MLP, SM90, &c);
    const mcir_graph *g = c.graph;
    mcir_diag d = mcir_diag_stderr();
    static const struct { mcir_alloc_mode mode; int graphs; } runs[] = {
        {MCIR_ALLOC_POOL, 0}, {MCIR_ALLOC_LAZY, 0}, {MCIR_ALLOC_EAGER, 0}, {MCIR_ALLOC_EAGER, 1}};
    for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
        mcir_env *env = mcir_env_new(g, 7);
        mcir_gpu_session_options o = {.mode = runs[k].mode, .graphs = runs[k].graphs};
        mcir_gpu_session *s = mcir_emu_session_open(c.codegen, env, &o, &d);
        ck_assert_ptr_nonnull(s);
        int64_t first_peak = 0;
        for (int step = 0; step < 3; step++) {
            set_step_inputs(g, env, step);
            mcir_gpu_stats st;
            ck_assert(mcir_gpu_session_step(s, env, NULL, &st, &d));
            ck_assert(st.graph == (runs[k].graphs == 1));
            if (step == 0) first_peak = st.peak_device_bytes;
            ck_assert_int_eq(st.peak_device_bytes, first_peak);   /* nothing grows from step to step */
            mcir_env *ref = mcir_env_new(g, 7);
            set_step_inputs(g, ref, step);
            ck_assert(mcir_interp_run(g, ref, &d));
            double rel = rel_diff(g->outputs[0], env, ref);
            fprintf(stderr, "  %s%s step %d: rel err %.3g, peak %lld\n", mcir_alloc_mode_name(runs[k].mode),
                    runs[k].graphs ? " + graphs" : "", step, rel, (long long)st.peak_device_bytes);
            ck_assert_double_le(rel, 1e-4);
            mcir_env_free(ref);
        }
        mcir_gpu_session_close(s);
        mcir_env_free(env);
    }
    mcir_compilation_free(&c);
}
END_TEST

/* The MLP over a sequence of 1..64 rows (a graph with dims), and its
 * mean over the rows (a graph replayed at other sizes gets it wrong). */
static const char MLP_SEQ[] =
    "{\"mcir\":1,\"name\":\"mlps\",\"dims\":{\"seq\":{\"min\":1,\"max\":64}},\"inputs\":[{\"name\":\"x\",\"dtype\":"
    "\"f32\",\"shape\":[\"seq\",64]}],"
    "\"weights\":[{\"name\":\"w1\",\"dtype\":\"f32\",\"shape\":[64,96]},{\"name\":\"w2\",\"dtype\":\"f32\","
    "\"shape\":[96,24]},{\"name\":\"g\",\"dtype\":\"f32\",\"shape\":[96]}],"
    "\"nodes\":[{\"name\":\"mm1\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w1\"],\"outputs\":[\"h\"]},"
    "{\"name\":\"act\",\"op\":\"gelu\",\"inputs\":[\"h\"],\"outputs\":[\"a\"]},"
    "{\"name\":\"ln\",\"op\":\"rmsnorm\",\"inputs\":[\"a\",\"g\"],\"outputs\":[\"n\"],\"attrs\":{\"axis\":-1}},"
    "{\"name\":\"mm2\",\"op\":\"matmul\",\"inputs\":[\"n\",\"w2\"],\"outputs\":[\"y\"]},"
    "{\"name\":\"avg\",\"op\":\"reduce_mean\",\"inputs\":[\"y\"],\"outputs\":[\"m\"],\"attrs\":{\"axes\":[0]}}],"
    "\"outputs\":[\"y\",\"m\"]}";

/* Rebinds seq: the graph's shapes and the kernels' launches. */
static void bind_seq(mcir_compilation *c, int64_t seq) {
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_graph_bind_dims(c->graph, &seq, &d));
    ck_assert(mcir_codegen_rebind(c->codegen, &seq, &d));
}

/* One session with graphs steps a graph with dims at sizes it has seen
 * and new ones: a new size warms up and captures (one cuStreamBeginCapture),
 * a size seen before is one cuGraphLaunch and nothing else; each step's
 * output is bit for bit the session without graphs' and the interpreter's.
 * Beyond 8 sizes the least recently replayed graph is given up and
 * captured again when its size comes back. */
START_TEST(test_one_graph_per_size) {
    mcir_compilation c;
    cgt_compile_text(work_dir, "mlps", MLP_SEQ, SM90, &c);
    const mcir_graph *g = c.graph;
    mcir_diag d = mcir_diag_stderr();
    bind_seq(&c, 64);   /* opened at the largest sizes */
    mcir_env *env_g = mcir_env_new(g, 7), *env_p = mcir_env_new(g, 7);
    mcir_gpu_session_options on = {.mode = MCIR_ALLOC_POOL, .graphs = 1}, off = {.mode = MCIR_ALLOC_POOL, .graphs = 0};
    mcir_gpu_session *sg = mcir_emu_session_open(c.codegen, env_g, &on, &d);
    mcir_gpu_session *sp = mcir_emu_session_open(c.codegen, env_p, &off, &d);
    ck_assert(sg && sp);
    static const struct { int seq, captures, held; } steps[] = {
        {40, 1, 1}, {17, 1, 2}, {40, 0, 2}, {17, 0, 2}, {1, 1, 3}, {64, 1, 4}, {40, 0, 4},
        /* five more sizes: 9 in all, so the least recently replayed (17) is given up */
        {2, 1, 5}, {3, 1, 6}, {5, 1, 7}, {7, 1, 8}, {9, 1, 8}, {1, 0, 8}, {17, 1, 8}, {9, 0, 8}};
    for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
        bind_seq(&c, steps[k].seq);
        set_step_inputs(g, env_g, (int)k);
        set_step_inputs(g, env_p, (int)k);
        mcir_gpu_stats st;
        ck_assert(mcir_gpu_session_step(sp, env_p, NULL, &st, &d));
        mcir_emu_calls calls;
        mcir_emu_reset_launches();
        ck_assert(mcir_gpu_session_step(sg, env_g, NULL, &st, &d));
        mcir_emu_call_counts(&calls);
        fprintf(stderr, "  seq=%d: %ld captures, %ld cuLaunchKernel, %ld cuGraphLaunch, %d graphs held\n",
                steps[k].seq, calls.begin_capture, calls.launch_kernel, calls.graph_launch, st.graph_sizes);
        ck_assert(st.graph);
        ck_assert_int_eq(calls.begin_capture, steps[k].captures);
        ck_assert_int_eq(calls.graph_launch, 1);
        if (!steps[k].captures) ck_assert_int_eq(calls.launch_kernel + calls.library, 0);
        ck_assert_int_eq(st.graph_sizes, steps[k].held);
        ck_assert_int_eq(g->outputs[0]->shape[0], steps[k].seq);
        mcir_env *ref = mcir_env_new(g, 7);
        set_step_inputs(g, ref, (int)k);
        ck_assert(mcir_interp_run(g, ref, &d));
        for (int o = 0; o < 2; o++) {
            const mcir_tensor *y = g->outputs[o];
            ck_assert(!memcmp(mcir_env_get(env_g, y), mcir_env_get(env_p, y),
                              sizeof(float) * (size_t)mcir_tensor_numel(y)));
            ck_assert_double_le(rel_diff(y, env_g, ref), 1e-4);
        }
        mcir_env_free(ref);
    }
    mcir_gpu_session_close(sg);
    mcir_gpu_session_close(sp);
    mcir_env_free(env_g);
    mcir_env_free(env_p);
    mcir_compilation_free(&c);
}
END_TEST

/* The mutant: after the capture, a step leaves the last inputs in place.
 * The replay then recomputes step 0's output, not the interpreter's. */
START_TEST(test_replay_that_skips_the_input_copy_is_caught) {
    mcir_compilation c;
    cgt_compile_text(work_dir, "mlp", MLP, SM90, &c);
    const mcir_graph *g = c.graph;
    mcir_diag d = mcir_diag_stderr();
    mcir_env *env = mcir_env_new(g, 7);
    mcir_gpu_session_options on = {.mode = MCIR_ALLOC_POOL, .graphs = 1};
    mcir_gpu_session *s = mcir_emu_session_open(c.codegen, env, &on, &d);
    ck_assert_ptr_nonnull(s);
    cg_runtime_mutant = CG_MUTANT_REPLAY_SKIPS_INPUTS;
    double worst = 0;
    for (int step = 0; step < 2; step++) {
        set_step_inputs(g, env, step);
        mcir_gpu_stats st;
        ck_assert(mcir_gpu_session_step(s, env, NULL, &st, &d));
        mcir_env *ref = mcir_env_new(g, 7);
        set_step_inputs(g, ref, step);
        ck_assert(mcir_interp_run(g, ref, &d));
        worst = fmax(worst, rel_diff(g->outputs[0], env, ref));
        mcir_env_free(ref);
    }
    cg_runtime_mutant = CG_MUTANT_NONE;
    fprintf(stderr, "  mutant (replay skips the inputs): rel err %.3g\n", worst);
    ck_assert_double_gt(worst, 1e-2);
    mcir_gpu_session_close(s);
    mcir_env_free(env);
    mcir_compilation_free(&c);
}
END_TEST

/* Bound inputs at a new address every step: copied into the session's
 * buffers before each replay; the bound output written at its address. */
START_TEST(test_bound_addresses_may_change_between_replays) {
    mcir_compilation c;
    cgt_compile_text(work_dir, "mlp", MLP, SM90, &c);
    const mcir_graph *g = c.graph;
    const mcir_tensor *x = g->inputs[0], *y = g->outputs[0];
    char why[256];
    const mcir_cu_driver *drv = mcir_emu_driver("sm_90", why, sizeof why);
    ck_assert_msg(drv != NULL, "%s", why);
    mcir_diag d = mcir_diag_stderr();
    mcir_env *env = mcir_env_new(g, 7);
    mcir_gpu_session_options on = {.mode = MCIR_ALLOC_POOL, .graphs = 1};
    mcir_gpu_session *s = mcir_emu_session_open(c.codegen, env, &on, &d);
    ck_assert_ptr_nonnull(s);
    uint64_t *bound = calloc((size_t)g->n_tensors, sizeof *bound);
    ck_assert_ptr_nonnull(bound);
    size_t xb = (size_t)mcir_tensor_bytes(x), yb = (size_t)mcir_tensor_bytes(y);
    float *xv = malloc(xb), *yv = malloc(yb);
    ck_assert(xv && yv);
    CUdeviceptr px[3], py[3];
    for (int step = 0; step < 3; step++) {
        ck_assert_int_eq(drv->cuMemAlloc_v2(&px[step], xb), 0);
        ck_assert_int_eq(drv->cuMemAlloc_v2(&py[step], yb), 0);
        mcir_fill_seeded(x, (uint64_t)(300 + step), xv);
        ck_assert_int_eq(drv->cuMemcpyHtoD_v2(px[step], xv, xb), 0);
        bound[x->id] = px[step];
        bound[y->id] = py[step];
        mcir_emu_reset_launches();
        mcir_gpu_stats st;
        ck_assert(mcir_gpu_session_step(s, env, bound, &st, &d));
        mcir_emu_calls calls;
        mcir_emu_call_counts(&calls);
        ck_assert_int_eq(calls.begin_capture, step == 0);   /* captured once */
        ck_assert_int_eq(drv->cuMemcpyDtoH_v2(yv, py[step], yb), 0);
        mcir_env *ref = mcir_env_new(g, 7);
        mcir_env_set(ref, x, xv);
        ck_assert(mcir_interp_run(g, ref, &d));
        const float *want = mcir_env_get(ref, y);
        double worst = 0, den = 0;
        for (int64_t k = 0; k < mcir_tensor_numel(y); k++) {
            worst = fmax(worst, fabs((double)yv[k] - want[k]));
            den = fmax(den, fabs(want[k]));
        }
        ck_assert(den > 0);
        fprintf(stderr, "  bound step %d: rel err %.3g\n", step, worst / den);
        ck_assert_double_le(worst / den, 1e-4);
        mcir_env_free(ref);
    }
    mcir_gpu_session_close(s);
    for (int step = 0; step < 3; step++) {
        drv->cuMemFree_v2(px[step]);
        drv->cuMemFree_v2(py[step]);
    }
    free(bound);
    free(xv);
    free(yv);
    mcir_env_free(env);
    mcir_compilation_free(&c);
}
END_TEST

/* Opens (or steps) expecting failure: the diagnostics, exactly one error. */
static char *one_diagnostic(mcir_compilation *c, mcir_gpu_session_options o, bool fail_at_open) {
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(mem);
    mcir_diag d = mcir_diag_to(mem);
    mcir_env *env = mcir_env_new(c->graph, 7);
    mcir_gpu_session *s = mcir_emu_session_open(c->codegen, env, &o, &d);
    if (fail_at_open) {
        ck_assert_ptr_null(s);
    } else {
        ck_assert_ptr_nonnull(s);
        mcir_gpu_stats st;
        ck_assert(!mcir_gpu_session_step(s, env, NULL, &st, &d));
        mcir_gpu_session_close(s);
    }
    fclose(mem);
    fprintf(stderr, "%s", text);
    ck_assert_int_eq(d.n_errors, 1);
    mcir_env_free(env);
    return text;
}

START_TEST(test_graphs_need_pool_mode_without_sync) {
    mcir_compilation c;
    cgt_compile_text(work_dir, "mlp", MLP, SM90, &c);
    char *t = one_diagnostic(&c, (mcir_gpu_session_options){.mode = MCIR_ALLOC_LAZY, .graphs = 1}, true);
    ck_assert_ptr_nonnull(strstr(t, "CUDA graphs need the pool or eager allocation mode"));
    free(t);
    mcir_gpu_set_sync(true);
    t = one_diagnostic(&c, (mcir_gpu_session_options){.mode = MCIR_ALLOC_POOL, .graphs = 1}, true);
    mcir_gpu_set_sync(false);
    ck_assert_ptr_nonnull(strstr(t, "CUDA graphs need asynchronous launches"));
    free(t);
    /* MCIR_GPU_GRAPHS decides where the option does not */
    setenv("MCIR_GPU_GRAPHS", "1", 1);
    t = one_diagnostic(&c, (mcir_gpu_session_options){.mode = MCIR_ALLOC_LAZY, .graphs = -1}, true);
    unsetenv("MCIR_GPU_GRAPHS");
    free(t);
    mcir_compilation_free(&c);
}
END_TEST

/* A call that cannot be captured in the launch sequence (a mutant runtime
 * that waits for the stream while capturing, as LAZY's frees or --sync's
 * waits would): the emulated driver refuses it and invalidates the
 * capture, as a GPU does; one error saying so, the capture ended, the
 * session closes cleanly. */
START_TEST(test_call_refused_while_capturing_is_one_diagnostic) {
    mcir_compilation c;
    cgt_compile_text(work_dir, "mlp", MLP, SM90, &c);
    cg_runtime_mutant = CG_MUTANT_WAIT_WHILE_CAPTURING;
    char *t = one_diagnostic(&c, (mcir_gpu_session_options){.mode = MCIR_ALLOC_POOL, .graphs = 1}, false);
    cg_runtime_mutant = CG_MUTANT_NONE;
    ck_assert_ptr_nonnull(strstr(t, "while capturing the CUDA graph"));
    ck_assert_ptr_nonnull(strstr(t, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"));
    ck_assert_ptr_nonnull(strstr(t, "cuStreamSynchronize"));
    free(t);
    mcir_compilation_free(&c);
}
END_TEST

/* A fault and a hang inside a replay (the emulated device's injected
 * failures, MCIR_EMU_FAULT / MCIR_EMU_HANG): one error each, saying the
 * kernel is in the graph and how to name it; the session refuses further
 * steps and closes. */
START_TEST(test_fault_and_hang_in_a_replay_are_one_diagnostic) {
    mcir_compilation c;
    cgt_compile_text(work_dir, "dec", DECODE, SM90, &c);
    static const struct { const char *env, *want; } cases[] = {
        {"MCIR_EMU_FAULT", "GPU fault in the CUDA graph's replay: CUDA_ERROR_ILLEGAL_ADDRESS"},
        {"MCIR_EMU_HANG", "hang: the CUDA graph's replay is still running after"},
    };
    setenv("MCIR_GPU_WATCHDOG", "0.2", 1);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        ck_assert_ptr_nonnull(mem);
        mcir_diag d = mcir_diag_to(mem);
        mcir_env *env = mcir_env_new(c.graph, 7);
        mcir_gpu_session_options on = {.mode = MCIR_ALLOC_POOL, .graphs = 1};
        mcir_gpu_session *s = mcir_emu_session_open(c.codegen, env, &on, &d);
        ck_assert_ptr_nonnull(s);
        mcir_gpu_stats st;
        ck_assert(mcir_gpu_session_step(s, env, NULL, &st, &d));   /* capture and a first replay */
        setenv(cases[i].env, "mc_streaming_attention", 1);
        ck_assert(!mcir_gpu_session_step(s, env, NULL, &st, &d));
        unsetenv(cases[i].env);
        ck_assert_int_eq(d.n_errors, 1);
        ck_assert(!mcir_gpu_session_step(s, env, NULL, &st, &d));   /* broken: only close */
        mcir_gpu_session_close(s);
        fclose(mem);
        fprintf(stderr, "%s", text);
        ck_assert_msg(strstr(text, cases[i].want), "no '%s' in:\n%s", cases[i].want, text);
        ck_assert_ptr_nonnull(strstr(text, "rerun without graphs"));
        ck_assert_ptr_nonnull(strstr(text, "failed at an earlier step"));
        free(text);
        mcir_env_free(env);
    }
    unsetenv("MCIR_GPU_WATCHDOG");
    mcir_compilation_free(&c);
}
END_TEST

/* The emulated driver's capture, as a GPU's: work on the capturing stream
 * is recorded, not run; the graph runs it at each launch; a wait, an
 * allocation or a synchronous copy while capturing fails and invalidates
 * the capture. */
START_TEST(test_emulated_capture_records_and_refuses_waits) {
    char why[256];
    const mcir_cu_driver *cu = mcir_emu_driver("sm_90", why, sizeof why);
    ck_assert_msg(cu != NULL, "%s", why);
    CUstream s;
    CUdeviceptr p, q;
    ck_assert_int_eq(cu->cuStreamCreate(&s, 0), 0);
    ck_assert_int_eq(cu->cuMemAlloc_v2(&p, 64), 0);
    ck_assert_int_eq(cu->cuMemAlloc_v2(&q, 64), 0);
    unsigned v[16] = {0};
    ck_assert_int_eq(cu->cuMemcpyHtoD_v2(p, v, sizeof v), 0);
    ck_assert_int_eq(cu->cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
    ck_assert_int_eq(cu->cuMemsetD32Async(p, 7u, 16, s), 0);
    ck_assert_int_eq(cu->cuMemcpyDtoDAsync_v2(q, p, 64, s), 0);
    CUgraph graph;
    ck_assert_int_eq(cu->cuStreamEndCapture(s, &graph), 0);
    ck_assert_int_eq(cu->cuMemcpyDtoH_v2(v, p, sizeof v), 0);
    ck_assert_uint_eq(v[3], 0);   /* recorded, not run */
    CUgraphExec exec;
    ck_assert_int_eq(cu->cuGraphInstantiateWithFlags(&exec, graph, 0), 0);
    ck_assert_int_eq(cu->cuGraphDestroy(graph), 0);
    ck_assert_int_eq(cu->cuGraphLaunch(exec, s), 0);
    ck_assert_int_eq(cu->cuMemcpyDtoH_v2(v, q, sizeof v), 0);
    ck_assert_uint_eq(v[3], 7);   /* the replay ran both, in order */
    ck_assert_int_eq(cu->cuGraphExecDestroy(exec), 0);
    /* what a global-mode capture refuses */
    for (int what = 0; what < 3; what++) {
        ck_assert_int_eq(cu->cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
        CUdeviceptr r;
        int rc = what == 0 ? cu->cuStreamSynchronize(s)
                 : what == 1 ? cu->cuMemAlloc_v2(&r, 64)
                             : cu->cuMemcpyHtoD_v2(p, v, sizeof v);
        ck_assert_int_eq(rc, what == 2 ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        ck_assert_int_eq(cu->cuStreamEndCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        ck_assert_ptr_null(graph);
    }
    ck_assert_int_eq(cu->cuStreamSynchronize(s), 0);   /* no capture: waits again */
    cu->cuMemFree_v2(p);
    cu->cuMemFree_v2(q);
    cu->cuStreamDestroy_v2(s);
}
END_TEST

int main(void) {
    char why[256];
    if (!mcir_emu_available(why, sizeof why)) return test_skip(why);
    if (!test_tempdir("graphs", work_dir, sizeof work_dir)) return 1;
    unsetenv("MCIR_GPU_GRAPHS");
    Suite *s = suite_create("graphs");
    TCase *tc = tcase_create("graphs");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_emulated_capture_records_and_refuses_waits);
    tcase_add_test(tc, test_graph_steps_match_steps_without_graphs);
    tcase_add_test(tc, test_sessions_in_every_mode);
    tcase_add_test(tc, test_one_graph_per_size);
    tcase_add_test(tc, test_replay_that_skips_the_input_copy_is_caught);
    tcase_add_test(tc, test_bound_addresses_may_change_between_replays);
    tcase_add_test(tc, test_graphs_need_pool_mode_without_sync);
    tcase_add_test(tc, test_call_refused_while_capturing_is_one_diagnostic);
    tcase_add_test(tc, test_fault_and_hang_in_a_replay_are_one_diagnostic);
    suite_add_tcase(s, tc);
    int failed = test_main_nofork(s);
    test_remove_dir(work_dir);
    return failed;
}
