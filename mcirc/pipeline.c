/*
 * pipeline.c — the compilation written out in order (see pipeline.h).
 * Each stage says what it needs and what it provides; a stage that fails
 * returns the exit status its failure means, with its diagnostics already
 * reported, and leaves what was built in the compilation for the caller
 * to free.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcirc/pipeline.h"
#include "mcirc/tune.h"

mcir_options mcir_options_default(void) {
    return (mcir_options){.arch = MCIR_DEFAULT_ARCH, .device = MCIR_DEVICE_AUTO,
                          .alloc = MCIR_ALLOC_POOL};
}

double mcir_verify_tolerance(mcir_dtype t) { return mcir_compare_tolerance(t); }

/* The one comparison of mcir/value.c, in the two numbers callers print. */
void mcir_compare(const float *got, const float *ref, int64_t n, double *max_abs,
                  double *max_rel) {
    mcir_compare_result r;
    mcir_values_compare(got, ref, n, &r);
    *max_abs = r.max_abs;
    *max_rel = r.max_rel;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------- inputs */

/* Sets the values of --input files on env (graph g). Names must be graph
 * inputs; files must match the declared dtype and shape. */
static int set_input_files(const mcir_options *o, const mcir_graph *g, mcir_env *env,
                           mcir_diag *d) {
    for (int i = 0; i < o->n_inputs; i++) {
        const mcir_input_file *f = &o->inputs[i];
        mcir_tensor *t = mcir_graph_find_tensor(g, f->name);
        if (!t || t->kind != MCIR_TENSOR_INPUT) {
            mcir_error(d, (mcir_loc){f->path, 0, 0},
                       "--input %s=%s: the graph has no input named '%s'", f->name, f->path,
                       f->name);
            return MCIR_EXIT_USAGE;
        }
        mcir_npy npy;
        if (!mcir_npy_read(f->path, &npy, d)) return MCIR_EXIT_INVALID;
        bool same = npy.rank == t->rank && npy.dtype == t->dtype;
        for (int k = 0; same && k < t->rank; k++) same = npy.shape[k] == t->shape[k];
        if (!same) {
            char want[128], got[128];
            mcir_tensor tmp = {.rank = npy.rank};
            memcpy(tmp.shape, npy.shape, sizeof tmp.shape);
            mcir_error(d, (mcir_loc){f->path, 0, 0},
                       "input '%s' is %s %s, but the file holds %s %s", t->name,
                       mcir_dtype_name(t->dtype), mcir_shape_str(t, want, sizeof want),
                       mcir_dtype_name(npy.dtype), mcir_shape_str(&tmp, got, sizeof got));
            mcir_npy_free(&npy);
            return MCIR_EXIT_INVALID;
        }
        mcir_env_set_raw(env, t, npy.data);
        mcir_npy_free(&npy);
    }
    return MCIR_EXIT_OK;
}

/* ---------------------------------------------------------------- stages */

static int stage_catalog(const mcir_options *o, mcir_compilation *c, mcir_diag *d) {
    c->catalog = mcir_catalog_new();
    if (!o->no_default_catalog && !mcir_catalog_load_default(c->catalog, d))
        return MCIR_EXIT_INVALID;
    for (int i = 0; i < o->n_catalogs; i++)
        if (!mcir_catalog_load_file(c->catalog, o->catalogs[i], d)) return MCIR_EXIT_INVALID;
    return MCIR_EXIT_OK;
}

static int stage_run(const mcir_options *o, mcir_compilation *c, mcir_diag *d) {
    if (o->device == MCIR_DEVICE_EMU) {
        c->env = mcir_env_new(c->graph, o->seed);
        int st = set_input_files(o, c->graph, c->env, d);
        if (st) return st;
        double t0 = now_seconds();
        if (!c->codegen || !mcir_emu_run(c->codegen, c->env, o->alloc, &c->gpu_stats, d))
            return MCIR_EXIT_TOOLCHAIN;
        c->ran_on_gpu = c->ran_on_emu = true;
        c->run_seconds = now_seconds() - t0;
        return MCIR_EXIT_OK;
    }
    bool gpu = o->device == MCIR_DEVICE_GPU;
    char why[256] = "";
    if (o->device == MCIR_DEVICE_AUTO) gpu = mcir_gpu_available(why, sizeof why);
    else if (gpu && !mcir_gpu_available(why, sizeof why)) {
        mcir_error(d, (mcir_loc){"mcirc", 0, 0}, "--device gpu: no usable GPU: %s", why);
        return MCIR_EXIT_TOOLCHAIN;
    }
    c->env = mcir_env_new(c->graph, o->seed);
    int st = set_input_files(o, c->graph, c->env, d);
    if (st) return st;
    double t0 = now_seconds();
    if (gpu) {
        if (!c->codegen || !mcir_gpu_run(c->codegen, c->env, o->alloc, &c->gpu_stats, d))
            return MCIR_EXIT_TOOLCHAIN;
        c->ran_on_gpu = true;
    } else if (!mcir_interp_run(c->graph, c->env, d)) {
        return MCIR_EXIT_INVALID;
    }
    c->run_seconds = now_seconds() - t0;
    return MCIR_EXIT_OK;
}

/* Runs the original and the rewritten graph through the reference
 * interpreter on the same inputs and compares every output by name. */
static int stage_verify(const mcir_options *o, mcir_compilation *c, mcir_diag *d) {
    mcir_env *before = mcir_env_new(c->original, o->seed);
    int st = set_input_files(o, c->original, before, d);
    if (st || !mcir_interp_run(c->original, before, d)) {
        mcir_env_free(before);
        return st ? st : MCIR_EXIT_INVALID;
    }
    mcir_env *after = c->env && !c->ran_on_gpu ? c->env : mcir_env_new(c->graph, o->seed);
    if (after != c->env) {
        st = set_input_files(o, c->graph, after, d);
        if (st || !mcir_interp_run(c->graph, after, d)) {
            mcir_env_free(before);
            mcir_env_free(after);
            return st ? st : MCIR_EXIT_INVALID;
        }
    }
    /* a device run: its outputs against the original graph's too */
    c->n_verify = c->original->n_outputs * (c->ran_on_gpu ? 2 : 1);
    c->verify = calloc((size_t)c->n_verify + 1, sizeof *c->verify);
    MCIR_ASSERT(c->verify);
    c->verify_ok = true;
    for (int i = 0; i < c->original->n_outputs; i++) {
        const mcir_tensor *ref = c->original->outputs[i];
        const mcir_tensor *got = mcir_graph_find_tensor(c->graph, ref->name);
        mcir_verify_result *v = &c->verify[i];
        v->output = ref->name;
        v->tolerance = mcir_verify_tolerance(ref->dtype);
        mcir_compare_result r;
        if (!got || got->rank != ref->rank || got->dtype != ref->dtype ||
            mcir_tensor_numel(got) != mcir_tensor_numel(ref) ||
            !mcir_env_compare(after, got, before, ref, &r)) {
            mcir_error(d, (mcir_loc){c->graph->path, 0, 0},
                       "--verify: the rewritten graph lost output '%s' or changed its shape",
                       ref->name);
            v->max_abs = v->max_rel = INFINITY;
            v->ok = c->verify_ok = false;
            if (c->ran_on_gpu) c->verify[c->original->n_outputs + i] = *v;
            continue;
        }
        v->max_abs = r.max_abs;
        v->max_rel = r.max_rel;
        v->ok = mcir_compare_within(&r, v->tolerance);
        if (!v->ok) c->verify_ok = false;
        if (!c->ran_on_gpu) continue;
        mcir_verify_result *w = &c->verify[c->original->n_outputs + i];
        *w = (mcir_verify_result){.output = ref->name, .device = c->ran_on_emu ? "emu" : "gpu",
                                  .tolerance = v->tolerance};
        if (!mcir_env_compare(c->env, got, before, ref, &r)) {
            w->max_abs = w->max_rel = INFINITY;
            w->ok = c->verify_ok = false;
            continue;
        }
        w->max_abs = r.max_abs;
        w->max_rel = r.max_rel;
        w->ok = mcir_compare_within(&r, w->tolerance);
        if (!w->ok) c->verify_ok = false;
    }
    mcir_env_free(before);
    if (after != c->env) mcir_env_free(after);
    return c->verify_ok ? MCIR_EXIT_OK : MCIR_EXIT_INVALID;
}

/* The cost model's DRAM bytes of graph g (not yet rewritten) planned as
 * `--no-rewrite` plans it: the baseline of the summary's "unfused" ratio.
 * 0 where that plan fails (its diagnostics are dropped: the compilation
 * asked for is not at fault). Planning only, no code: cheap. */
static int64_t unfused_hbm_bytes(const mcir_graph *g, const mcir_target *t) {
    char *buf = NULL;
    size_t len = 0;
    FILE *sink = open_memstream(&buf, &len);
    if (!sink) return 0;
    mcir_diag quiet = mcir_diag_to(sink);
    mcir_plan *p = mcir_plan_build(g, t, NULL, &quiet);
    mcir_plan_cost cost = {0};
    if (p) mcir_cost_plan(p, &cost);
    mcir_plan_free(p);
    fclose(sink);
    free(buf);
    return cost.hbm_bytes;
}

/* The GPU plan where only the summary of a CPU run wants it: built with its
 * messages held back; if it cannot be built, they are reported as warnings
 * (the CPU reference is not bound by the target's shared memory) and NULL
 * is returned. */
static mcir_plan *plan_or_warn(mcir_compilation *c, mcir_diag *d) {
    char *buf = NULL;
    size_t len = 0;
    FILE *sink = open_memstream(&buf, &len);
    if (!sink) return mcir_plan_build(c->graph, c->target, c->trace, d);
    mcir_diag held = mcir_diag_to(sink);
    mcir_plan *p = mcir_plan_build(c->graph, c->target, c->trace, &held);
    fclose(sink);
    if (!p && d && d->out) {
        /* each held line "WHERE: error: WHAT" comes out as a warning */
        for (char *line = buf, *next; line && *line; line = next) {
            next = strchr(line, '\n');
            if (next) *next++ = 0;
            char *kind = strstr(line, ": error: ");
            if (kind) {
                *kind = 0;
                fprintf(d->out, "%s: warning: %s; no plan for %s, the CPU reference runs "
                        "without one\n", line, kind + 9, c->target->name);
                d->n_warnings++;
            } else {
                fprintf(d->out, "%s\n", line);
            }
        }
    } else if (p && len && d && d->out) {
        fputs(buf, d->out); /* warnings of a plan that was built */
        d->n_warnings += held.n_warnings;
    }
    free(buf);
    return p;
}

/* ------------------------------------------------------------ the driver */

int mcir_compile(const mcir_options *o, mcir_compilation *c, mcir_diag *d) {
    memset(c, 0, sizeof *c);
    int st;

    /* target: the architecture kernels are planned and compiled for */
    c->target = mcir_target_find(o->arch ? o->arch : MCIR_DEFAULT_ARCH);
    if (!c->target) {
        mcir_error(d, (mcir_loc){"mcirc", 0, 0}, "--arch %s: unknown architecture", o->arch);
        return MCIR_EXIT_USAGE;
    }
    c->trace = mcir_trace_new();

    /* parse + verify + infer: graph.json or ONNX → a sorted, shape-inferred graph */
#ifdef MCIR_HAVE_ONNX
    if (o->graph)
        c->graph = o->graph;
    else if (mcir_onnx_is_model_path(o->graph_path))
        c->graph = mcir_onnx_read(o->graph_path, o->shapes, o->n_shapes, d);
    else
        c->graph = mcir_graph_read_json(o->graph_path, d);
#else   /* -DMCIR_ONNX=OFF */
    size_t path_len = o->graph ? 0 : strlen(o->graph_path);
    if (o->graph) {
        c->graph = o->graph;
    } else if (path_len >= 5 && !strcmp(o->graph_path + path_len - 5, ".onnx")) {
        mcir_error(d, (mcir_loc){o->graph_path, 0, 0},
                   "this mcirc was built without ONNX import (configure with -DMCIR_ONNX=ON)");
        return MCIR_EXIT_TOOLCHAIN;
    } else {
        c->graph = mcir_graph_read_json(o->graph_path, d);
    }
#endif
    if (!c->graph) return MCIR_EXIT_INVALID;
    c->nodes_before = c->nodes_after = mcir_graph_live_nodes(c->graph);
    if (o->verify || o->keep_original) c->original = mcir_graph_clone(c->graph);
    /* the cost model's baseline: the graph as read, planned as --no-rewrite plans it */
    int64_t unfused = 0;
    if ((o->want_plan || o->want_cuda || o->want_ptx || o->run) && !o->no_rewrite)
        unfused = unfused_hbm_bytes(c->graph, c->target);

    /* catalog: the built-in rules, then the user's files */
    if ((st = stage_catalog(o, c, d))) return st;

    /* detect properties, check legality, annotate, rewrite to a fixpoint */
    if (!o->no_rewrite) {
        mcir_rewrite_options ro = {.all_near_misses = o->trace_all};
        if (!mcir_rewrite_run_ex(c->graph, c->catalog, c->target, c->trace, &ro,
                                 &c->rewrite_stats, d))
            return MCIR_EXIT_INVALID;
        c->rewrites_applied = c->rewrite_stats.applied;
        c->nodes_after = mcir_graph_live_nodes(c->graph);
    }
    MCIR_ASSERT(mcir_graph_verify(c->graph, d));

    /* plan kernels, then memory: partition, tiles, liveness, arena offsets */
    bool gpu_run = o->run && o->device != MCIR_DEVICE_CPU &&
                   (o->device == MCIR_DEVICE_GPU || o->device == MCIR_DEVICE_EMU || mcir_gpu_available(NULL, 0));
    bool plan_optional = o->plan_optional && !o->want_cuda && !o->want_ptx && !gpu_run;
    if (plan_optional) {
        c->plan = plan_or_warn(c, d);
    } else if (o->want_plan || o->want_cuda || o->want_ptx || gpu_run) {
        c->plan = mcir_plan_build(c->graph, c->target, c->trace, d);
        if (!c->plan) return MCIR_EXIT_INVALID;
    }
    if (c->plan) {
        if (o->no_rewrite) {
            mcir_plan_cost own;
            mcir_cost_plan(c->plan, &own);
            unfused = own.hbm_bytes;
        }
        c->plan->unfused_hbm_bytes = unfused;
        mcir_memplan_build_options mo = {.planner = o->planner,
                                         .time_limit_s = o->planner_time_limit_s,
                                         .pools = o->pools,
                                         .n_pools = o->n_pools};
        c->memory = mcir_memplan_build(c->plan, &mo, c->trace, d);
        if (!c->memory) return MCIR_EXIT_INVALID;
        /* tiles by measurement: the tuning cache, or --tune (mcirc/tune.c) */
        if ((st = mcirc_tune_stage(o, c, d))) return st;
    }

    /* generate CUDA C per kernel plan (each template realises the plan's
     * launch; codegen checks it); compile with NVRTC (cached) where PTX or
     * a GPU run is wanted */
    if (c->plan) {
        c->codegen = mcir_codegen_new(c->plan, c->memory, d);
        if (!c->codegen) return MCIR_EXIT_TOOLCHAIN;
    }
    if (o->want_ptx || (gpu_run && o->device != MCIR_DEVICE_EMU)) {   /* the emulator builds its own */
        if (!mcir_codegen_compile(c->codegen, c->target->name, d)) return MCIR_EXIT_TOOLCHAIN;
    }

    /* run: the GPU where asked (or present), else the CPU reference */
    if (o->run && (st = stage_run(o, c, d))) return st;

    /* verify: original vs rewritten through the reference interpreter */
    if (o->verify && (st = stage_verify(o, c, d))) {
        /* which rewrite broke it: bisect over the applied ones */
        if (st == MCIR_EXIT_INVALID && c->original && !o->no_rewrite && o->n_inputs == 0 &&
            c->verify)
            mcir_rewrite_bisect(c->original, c->catalog, c->target, c->rewrites_applied,
                                o->seed, d && d->out ? d->out : stderr);
        return st;
    }
    return MCIR_EXIT_OK;
}

void mcir_compilation_free(mcir_compilation *c) {
    mcir_env_free(c->env);
    mcir_codegen_free(c->codegen);
    mcir_memplan_free(c->memory);
    mcir_plan_free(c->plan);
    mcir_catalog_free(c->catalog);
    mcir_trace_free(c->trace);
    mcir_graph_free(c->graph);
    mcir_graph_free(c->original);
    free(c->verify);
    memset(c, 0, sizeof *c);
}
