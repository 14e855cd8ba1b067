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
#include "runtime/launch.h"
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
        /* a sharded input's file is the whole tensor (each rank takes its part) */
        mcir_tensor whole = *t;
        mcir_tensor_whole_shape(t, whole.shape);
        bool same = npy.rank == t->rank && npy.dtype == t->dtype;
        for (int k = 0; same && k < t->rank; k++) same = npy.shape[k] == whole.shape[k];
        if (!same) {
            char want[128], got[128];
            mcir_tensor tmp = {.rank = npy.rank};
            memcpy(tmp.shape, npy.shape, sizeof tmp.shape);
            mcir_error(d, (mcir_loc){f->path, 0, 0},
                       "input '%s' is %s %s, but the file holds %s %s", t->name,
                       mcir_dtype_name(t->dtype), mcir_shape_str(&whole, want, sizeof want),
                       mcir_dtype_name(npy.dtype), mcir_shape_str(&tmp, got, sizeof got));
            mcir_npy_free(&npy);
            return MCIR_EXIT_INVALID;
        }
        mcir_env_set_raw(env, t, npy.data);
        mcir_npy_free(&npy);
    }
    return MCIR_EXIT_OK;
}

/* ---------------------------------------------------- symbolic dimensions */

static bool parse_positive(const char *s, size_t n, int64_t *out) {
    if (n == 0 || n > 18) return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return v >= 1;
}

bool mcir_dim_option_parse(const char *text, mcir_dim_option *out) {
    const char *eq = strchr(text, '=');
    if (!eq || eq == text) return false;
    const char *v = eq + 1, *dots = strstr(v, "..");
    mcir_dim_option o = {0};
    if (dots) {
        if (!parse_positive(v, (size_t)(dots - v), &o.min) ||
            !parse_positive(dots + 2, strlen(dots + 2), &o.max) || o.min > o.max)
            return false;
        o.has_range = true;
    } else {
        if (!parse_positive(v, strlen(v), &o.value)) return false;
        o.has_value = true;
    }
    o.name = strndup(text, (size_t)(eq - text));
    MCIR_ASSERT(o.name);
    *out = o;
    return true;
}

/* --dim NAME=MIN..MAX: the ranges the graph is compiled for, then every
 * --dim NAME=N checked against them. The graph is left bound at its
 * largest sizes, where the pipeline plans it. */
static int stage_dims(const mcir_options *o, mcir_graph *g, bool onnx, mcir_diag *d) {
    bool changed = false;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < o->n_dims; i++) {
            const mcir_dim_option *x = &o->dims[i];
            int k = mcir_graph_find_dim(g, x->name);
            if (k < 0 && onnx) continue;   /* a dim_param the import fixed */
            if (k < 0) {
                if (pass == 0)
                    mcir_error(d, (mcir_loc){"mcirc", 0, 0},
                               "--dim %s: the graph has no dimension '%s'%s", x->name, x->name,
                               g->n_dims ? "" : " (it declares no 'dims')");
                if (pass == 0) return MCIR_EXIT_USAGE;
                continue;
            }
            mcir_dim *dim = &g->dims[k];
            if (pass == 0 && x->has_range) {
                if (x->min > MCIR_MAX_ELEMS || x->max > MCIR_MAX_ELEMS) {
                    mcir_error(d, (mcir_loc){"mcirc", 0, 0},
                               "--dim %s=%lld..%lld: a dimension is at most %s", x->name,
                               (long long)x->min, (long long)x->max, MCIR_MAX_ELEMS_TEXT);
                    return MCIR_EXIT_USAGE;
                }
                dim->min = x->min;
                dim->max = x->max;
                changed = true;
            }
            if (pass == 1 && x->has_value && (x->value < dim->min || x->value > dim->max)) {
                mcir_error(d, (mcir_loc){"mcirc", 0, 0},
                           "--dim %s=%lld: dimension '%s' ranges over [%lld, %lld]", x->name,
                           (long long)x->value, x->name, (long long)dim->min,
                           (long long)dim->max);
                return MCIR_EXIT_USAGE;
            }
        }
    if (!changed) return MCIR_EXIT_OK;
    int64_t maxes[MCIR_MAX_DIMS];
    for (int k = 0; k < g->n_dims; k++) maxes[k] = g->dims[k].max;
    /* every rule again, for the new range */
    return mcir_graph_bind_dims(g, maxes, d) ? MCIR_EXIT_OK : MCIR_EXIT_INVALID;
}

/* The sizes a run executes at (docs/graph-format.md "Symbolic dimensions"): each
 * dimension's value from the --input files whose shapes name it, else
 * --dim NAME=N, else its max. Inputs that disagree, or a value out of
 * range, are an error naming the dimension and the inputs. */
static int run_binding(const mcir_options *o, const mcir_graph *g, int64_t *values, mcir_diag *d) {
    const char *from[MCIR_MAX_DIMS] = {NULL}, *from_path[MCIR_MAX_DIMS] = {NULL};
    for (int k = 0; k < g->n_dims; k++) values[k] = g->dims[k].max;
    for (int i = 0; i < o->n_dims; i++) {
        int k = mcir_graph_find_dim(g, o->dims[i].name);
        if (k >= 0 && o->dims[i].has_value) values[k] = o->dims[i].value;
    }
    for (int i = 0; i < o->n_inputs; i++) {
        const mcir_input_file *f = &o->inputs[i];
        const mcir_tensor *t = mcir_graph_find_tensor(g, f->name);
        if (!t || t->kind != MCIR_TENSOR_INPUT || !t->sym) continue;   /* set_input_files says */
        mcir_npy npy;
        if (!mcir_npy_read(f->path, &npy, d)) return MCIR_EXIT_INVALID;
        int rank = npy.rank;
        int64_t shape[MCIR_MAX_RANK];
        memcpy(shape, npy.shape, sizeof shape);
        mcir_npy_free(&npy);
        if (rank != t->rank) continue;                                  /* set_input_files says */
        for (int j = 0; j < t->rank; j++) {
            int k = mcir_extent_first_dim(&t->sym[j]);
            if (k < 0) continue;
            const mcir_dim *dim = &g->dims[k];
            if (shape[j] < dim->min || shape[j] > dim->max) {
                mcir_error(d, (mcir_loc){f->path, 0, 0},
                           "input '%s' has %lld in dim %d, which is dimension '%s': outside "
                           "its range [%lld, %lld]", t->name, (long long)shape[j], j, dim->name,
                           (long long)dim->min, (long long)dim->max);
                return MCIR_EXIT_INVALID;
            }
            if (from[k] && values[k] != shape[j]) {
                mcir_error(d, (mcir_loc){f->path, 0, 0},
                           "inputs disagree on dimension '%s': input '%s' has %lld in dim %d, "
                           "input '%s' (%s) has %lld", dim->name, t->name, (long long)shape[j],
                           j, from[k], from_path[k], (long long)values[k]);
                return MCIR_EXIT_INVALID;
            }
            for (int x = 0; !from[k] && x < o->n_dims; x++)
                if (o->dims[x].has_value && !strcmp(o->dims[x].name, dim->name) &&
                    o->dims[x].value != shape[j]) {
                    mcir_error(d, (mcir_loc){f->path, 0, 0},
                               "input '%s' has %lld in dim %d, which is dimension '%s', but "
                               "--dim %s=%lld", t->name, (long long)shape[j], j, dim->name,
                               dim->name, (long long)o->dims[x].value);
                    return MCIR_EXIT_INVALID;
                }
            values[k] = shape[j];
            from[k] = t->name;
            from_path[k] = f->path;
        }
    }
    return MCIR_EXIT_OK;
}

#ifdef MCIR_HAVE_ONNX
/* --dim for an ONNX model: each names a dim_param. A range (MIN..MAX,
 * MIN < MAX) keeps it symbolic over the range (onnx/symbolic.c), and an N
 * given besides is then the size of a run (stage_dims checks it); N alone,
 * or N..N, fixes it on import. */
static int onnx_dims(const mcir_options *o, mcir_onnx_dim *out, int *n_out, mcir_diag *d) {
    *n_out = 0;
    for (int pass = 0; pass < 2; pass++)   /* ranges first: they decide what an N means */
        for (int i = 0; i < o->n_dims; i++) {
            const mcir_dim_option *x = &o->dims[i];
            bool range = x->has_range && x->min < x->max;
            if (range != (pass == 0)) continue;
            int64_t v = x->has_range ? x->min : x->value;
            int k = 0;
            while (k < *n_out && strcmp(out[k].name, x->name)) k++;
            if (k < *n_out && out[k].max > out[k].value) {
                if (!range) continue;              /* the size of a run, in the range */
            } else if (k < *n_out && out[k].value != v) {
                mcir_error(d, (mcir_loc){"mcirc", 0, 0}, "--dim %s: given as %lld and as %lld",
                           x->name, (long long)out[k].value, (long long)v);
                return MCIR_EXIT_USAGE;
            }
            out[k] = (mcir_onnx_dim){x->name, v, range ? x->max : 0};
            if (x->has_range && (x->min > MCIR_MAX_ELEMS || x->max > MCIR_MAX_ELEMS)) {
                mcir_error(d, (mcir_loc){"mcirc", 0, 0},
                           "--dim %s=%lld..%lld: a dimension is at most %s", x->name,
                           (long long)x->min, (long long)x->max, MCIR_MAX_ELEMS_TEXT);
                return MCIR_EXIT_USAGE;
            }
            if (k == *n_out) (*n_out)++;
        }
    return MCIR_EXIT_OK;
}
#endif

/* A copy of g bound to values, or NULL where g is at those sizes already
 * (*st: MCIR_EXIT_INVALID if binding failed, after its errors). */
static mcir_graph *bound_copy(const mcir_graph *g, const int64_t *values, int *st, mcir_diag *d) {
    bool same = true;
    for (int k = 0; k < g->n_dims; k++) same &= g->dims[k].value == values[k];
    if (same) return NULL;
    mcir_graph *copy = mcir_graph_clone(g);
    if (!mcir_graph_bind_dims(copy, values, d)) *st = MCIR_EXIT_INVALID;
    return copy;
}

const mcir_graph *mcir_compilation_run_graph(const mcir_compilation *c) {
    return c->run_graph ? c->run_graph : c->graph;
}

/* ---------------------------------------------------------------- stages */

/* The values of a run of g: this process's rank where a launcher started
 * one process a rank, else every rank's. */
static mcir_env *env_for(mcir_compilation *c, const mcir_graph *g, uint64_t seed) {
    if (c->rdv && g->ranks > 1) return mcir_env_new_member(g, seed, &c->group);
    return mcir_env_new(g, seed);
}

/* A graph with ranks run under a launcher (RANK, WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT): this process runs its rank, after the rendezvous with the
 * others (runtime/launch.h). Nothing where no launcher set WORLD_SIZE. */
static int stage_launch(mcir_compilation *c, mcir_diag *d) {
    c->launch_rank = -1;
    mcir_launch l;
    char why[600];
    int k = mcir_launch_from_env(&l, why, sizeof why);
    if (k == 0) return MCIR_EXIT_OK;
    if (k < 0) {
        mcir_error(d, (mcir_loc){"mcirc", 0, 0}, "the launcher's environment: %s", why);
        return MCIR_EXIT_USAGE;
    }
    if (l.world != c->graph->ranks) {
        mcir_error(d, (mcir_loc){c->graph->path, 0, 0},
                   "the graph has %d ranks and the launcher started %d processes (WORLD_SIZE=%d): one process "
                   "a rank", c->graph->ranks, l.world, l.world);
        return MCIR_EXIT_USAGE;
    }
    c->rdv = mcir_rdv_open(&l, why, sizeof why);
    if (!c->rdv) {
        mcir_error(d, (mcir_loc){"mcirc", 0, 0}, "rank %d of %d: %s", l.rank, l.world, why);
        return MCIR_EXIT_TOOLCHAIN;
    }
    mcir_rdv_group(c->rdv, &c->group);
    mcir_runtime_set_launch(c->rdv);
    c->launch_rank = l.rank;
    snprintf(c->launch_where, sizeof c->launch_where, "%s:%d", l.addr, l.port);
    return MCIR_EXIT_OK;
}

static int stage_catalog(const mcir_options *o, mcir_compilation *c, mcir_diag *d) {
    c->catalog = mcir_catalog_new();
    if (!o->no_default_catalog && !mcir_catalog_load_default(c->catalog, d))
        return MCIR_EXIT_INVALID;
    for (int i = 0; i < o->n_catalogs; i++)
        if (!mcir_catalog_load_file(c->catalog, o->catalogs[i], d)) return MCIR_EXIT_INVALID;
    return MCIR_EXIT_OK;
}

static int stage_run(const mcir_options *o, mcir_compilation *c, mcir_diag *d) {
    mcir_graph *run = c->run_graph ? c->run_graph : c->graph;
    if (o->device == MCIR_DEVICE_EMU) {
        c->env = env_for(c, c->graph, o->seed);
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
    if (o->device == MCIR_DEVICE_AUTO) gpu = !mcir_graph_is_dynamic(c->graph) && mcir_gpu_available(why, sizeof why);
    else if (gpu && !mcir_gpu_available(why, sizeof why)) {
        mcir_error(d, (mcir_loc){"mcirc", 0, 0}, "--device gpu: no usable GPU: %s", why);
        return MCIR_EXIT_TOOLCHAIN;
    }
    c->env = env_for(c, run, o->seed);
    int st = set_input_files(o, run, c->env, d);
    if (st) return st;
    double t0 = now_seconds();
    if (gpu) {
        if (!c->codegen || !mcir_gpu_run(c->codegen, c->env, o->alloc, &c->gpu_stats, d))
            return MCIR_EXIT_TOOLCHAIN;
        c->ran_on_gpu = true;
    } else if (!mcir_interp_run(run, c->env, d)) {
        return MCIR_EXIT_INVALID;
    }
    c->run_seconds = now_seconds() - t0;
    return MCIR_EXIT_OK;
}

/* A device run of a graph whose dims range over more than one size: every
 * kernel must be size-generic, else exit 2 naming the first that is not. */
static int require_generic(const mcir_options *o, const mcir_compilation *c, mcir_diag *d) {
    for (int i = 0; i < mcir_codegen_kernel_count(c->codegen); i++) {
        const char *why;
        if (mcir_codegen_kernel_generic(c->codegen, i, &why)) continue;
        const mcir_dim *dim = &c->graph->dims[0];
        for (int k = 0; k < c->graph->n_dims; k++)
            if (c->graph->dims[k].min < c->graph->dims[k].max) {
                dim = &c->graph->dims[k];
                break;
            }
        mcir_error(d, (mcir_loc){c->graph->path, 0, 0},
                   "--device %s: dimension '%s' ranges over [%lld, %lld], and kernel %s is not "
                   "size-generic yet (%s); run on --device cpu, or fix the size with --dim %s=N..N",
                   o->device == MCIR_DEVICE_EMU ? "emu" : "gpu", dim->name, (long long)dim->min,
                   (long long)dim->max, c->plan->kernels[i].name, why, dim->name);
        return MCIR_EXIT_USAGE;
    }
    return MCIR_EXIT_OK;
}

/* Runs the original and the rewritten graph through the reference
 * interpreter on the same inputs and compares every output by name. */
static int stage_verify(const mcir_options *o, mcir_compilation *c, mcir_diag *d) {
    mcir_graph *original = c->run_original ? c->run_original : c->original;
    mcir_graph *graph = c->run_graph ? c->run_graph : c->graph;
    mcir_env *before = env_for(c, original, o->seed);
    int st = set_input_files(o, original, before, d);
    if (st || !mcir_interp_run(original, before, d)) {
        mcir_env_free(before);
        return st ? st : MCIR_EXIT_INVALID;
    }
    mcir_env *after = c->env && !c->ran_on_gpu ? c->env : env_for(c, graph, o->seed);
    if (after != c->env) {
        st = set_input_files(o, graph, after, d);
        if (st || !mcir_interp_run(graph, after, d)) {
            mcir_env_free(before);
            mcir_env_free(after);
            return st ? st : MCIR_EXIT_INVALID;
        }
    }
    /* a device run: its outputs against the original graph's too; graphs
     * with ranks: every rank's outputs */
    int R = mcir_env_ranks(before) > mcir_env_ranks(after) ? mcir_env_ranks(before) : mcir_env_ranks(after);
    int per = original->n_outputs * (c->ran_on_gpu ? 2 : 1);
    c->n_verify = per * R;
    c->verify = calloc((size_t)c->n_verify + 1, sizeof *c->verify);
    MCIR_ASSERT(c->verify);
    c->verify_ok = true;
    for (int rk = 0; rk < R; rk++) {
        if (mcir_env_ranks(before) > 1) mcir_env_select_rank(before, rk);
        if (mcir_env_ranks(after) > 1) mcir_env_select_rank(after, rk);
        mcir_verify_result *vr = c->verify + per * rk;
        for (int i = 0; i < original->n_outputs; i++) {
            const mcir_tensor *ref = original->outputs[i];
            const mcir_tensor *got = mcir_graph_find_tensor(graph, ref->name);
            mcir_verify_result *v = &vr[i];
            v->output = ref->name;
            v->rank = c->launch_rank >= 0 ? c->launch_rank : R > 1 ? rk : -1;
            v->tolerance = mcir_verify_tolerance(ref->dtype);
            mcir_compare_result r;
            if (!got || got->rank != ref->rank || got->dtype != ref->dtype ||
                mcir_tensor_numel(got) != mcir_tensor_numel(ref) ||
                !mcir_env_compare(after, got, before, ref, &r)) {
                mcir_error(d, (mcir_loc){graph->path, 0, 0},
                           "--verify: the rewritten graph lost output '%s' or changed its shape",
                           ref->name);
                v->max_abs = v->max_rel = INFINITY;
                v->ok = c->verify_ok = false;
                if (c->ran_on_gpu) vr[original->n_outputs + i] = *v;
                continue;
            }
            v->max_abs = r.max_abs;
            v->max_rel = r.max_rel;
            v->ok = mcir_compare_within(&r, v->tolerance);
            if (!v->ok) c->verify_ok = false;
            if (!c->ran_on_gpu) continue;
            mcir_verify_result *w = &vr[original->n_outputs + i];
            *w = (mcir_verify_result){.output = ref->name, .device = c->ran_on_emu ? "emu" : "gpu",
                                      .rank = v->rank, .tolerance = v->tolerance};
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
    }
    if (mcir_env_ranks(before) > 1) mcir_env_select_rank(before, -1);
    if (mcir_env_ranks(after) > 1) mcir_env_select_rank(after, -1);
    mcir_env_free(before);
    if (after != c->env) mcir_env_free(after);
    return c->verify_ok ? MCIR_EXIT_OK : MCIR_EXIT_INVALID;
}

/* After a device run of a graph with dims: the outputs, computed in an env
 * of the compiled graph (bound to the run's sizes for the run), move to an
 * env of the run's bound copy, which the summary, -o and --verify read. */
static void move_outputs(mcir_compilation *c) {
    if (mcir_env_graph(c->env) == c->run_graph) return;
    mcir_env *e = env_for(c, c->run_graph, mcir_env_seed(c->env));
    for (int i = 0; i < c->run_graph->n_outputs; i++) {
        const mcir_tensor *t = c->run_graph->outputs[i];
        const mcir_tensor *from = mcir_graph_find_tensor(c->graph, t->name);
        size_t bytes = (size_t)mcir_tensor_bytes(t);
        void *raw = malloc(bytes + 1);
        MCIR_ASSERT(raw && from && mcir_tensor_bytes(from) == (int64_t)bytes);
        if (mcir_env_get_raw(c->env, from, raw)) mcir_env_set_raw(e, t, raw);
        free(raw);
    }
    mcir_env_free(c->env);
    c->env = e;
}

/* verify: original vs rewritten through the reference interpreter (and
 * the device's outputs where it ran); where it fails, which rewrite broke
 * it, bisected over the applied ones. */
static int finish_verify(const mcir_options *o, mcir_compilation *c, mcir_diag *d) {
    if (!o->verify) return MCIR_EXIT_OK;
    int st = stage_verify(o, c, d);
    if (st == MCIR_EXIT_INVALID && c->original && !o->no_rewrite && o->n_inputs == 0 && c->verify)
        mcir_rewrite_bisect(c->original, c->catalog, c->target, c->rewrites_applied, o->seed,
                            d && d->out ? d->out : stderr);
    return st;
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
    c->launch_rank = -1;
    int st;

    /* target: the architecture kernels are planned and compiled for */
    c->target = mcir_target_find(o->arch ? o->arch : MCIR_DEFAULT_ARCH);
    if (!c->target) {
        mcir_error(d, (mcir_loc){"mcirc", 0, 0}, "--arch %s: unknown architecture", o->arch);
        return MCIR_EXIT_USAGE;
    }
    c->trace = mcir_trace_new();
    bool onnx = false;

    /* parse + verify + infer: graph.json or ONNX → a sorted, shape-inferred graph */
#ifdef MCIR_HAVE_ONNX
    if (o->graph)
        c->graph = o->graph;
    else if (mcir_onnx_is_model_path(o->graph_path)) {
        mcir_onnx_dim *dims = calloc((size_t)o->n_dims + 1, sizeof *dims);
        int n_dims;
        MCIR_ASSERT(dims);
        if ((st = onnx_dims(o, dims, &n_dims, d))) {
            free(dims);
            return st;
        }
        c->graph = mcir_onnx_read_ex(o->graph_path, o->shapes, o->n_shapes, dims, n_dims, d);
        free(dims);
        if (!c->graph) return MCIR_EXIT_INVALID;
        onnx = true;
    } else
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
    /* symbolic dims: --dim ranges; the pipeline plans the largest sizes
     * (an ONNX model's --dim fixed its dim_params on import) */
    if ((!onnx || c->graph->n_dims) && (st = stage_dims(o, c->graph, onnx, d))) return st;
    c->nodes_before = c->nodes_after = mcir_graph_live_nodes(c->graph);
    if (o->verify || o->keep_original) c->original = mcir_graph_clone(c->graph);
    /* --tp N: the program of each of N ranks, Megatron-style (rewrites/tp.c) */
    if (o->tp > 0) {
        if (c->graph->ranks != 1) {
            mcir_error(d, (mcir_loc){c->graph->path, 0, 0}, "--tp %d: the graph already has %d ranks; --tp "
                       "takes a graph of one rank", o->tp, c->graph->ranks);
            return MCIR_EXIT_USAGE;
        }
        mcir_graph *rp = mcir_tp_rewrite_ex(c->graph, o->tp, o->tp_sp, c->trace, &c->tp_collectives, d);
        if (!rp) return MCIR_EXIT_INVALID;
        mcir_graph_free(c->graph);
        c->graph = rp;
    }
    /* the cost model's baseline: the graph as read, planned as --no-rewrite plans it */
    int64_t unfused = 0;
    if ((o->want_plan || o->want_cuda || o->want_ptx || o->run) && !o->no_rewrite)
        unfused = unfused_hbm_bytes(c->graph, c->target);

    /* catalog: the built-in rules, then the user's files */
    if ((st = stage_catalog(o, c, d))) return st;

    /* several ranks: a collective repeated on one tensor runs once */
    if (!o->no_rewrite && c->graph->ranks > 1 && mcir_merge_collectives(c->graph, c->trace, d) < 0)
        return MCIR_EXIT_INVALID;
    /* several ranks: a row-parallel product's all_reduce in two chunks of rows, beside each other's product */
    if (!o->no_rewrite && c->graph->ranks > 1 && mcir_tp_overlap_chunks(c->graph, c->target, c->trace, d) < 0)
        return MCIR_EXIT_INVALID;
    /* detect properties, check legality, annotate, rewrite to a fixpoint */
    if (!o->no_rewrite) {
        mcir_rewrite_options ro = {.all_near_misses = o->trace_all};
        if (!mcir_rewrite_run_ex(c->graph, c->catalog, c->target, c->trace, &ro,
                                 &c->rewrite_stats, d))
            return MCIR_EXIT_INVALID;
        c->rewrites_applied = c->rewrite_stats.applied;
        c->nodes_after = mcir_graph_live_nodes(c->graph);
    }
    /* collectives as NCCL runs them: gathers and scatters along axis 0 */
    if (c->graph->ranks > 1 && mcir_lower_collectives(c->graph, c->trace, d) < 0) return MCIR_EXIT_INVALID;
    MCIR_ASSERT(mcir_graph_verify(c->graph, d));

    /* plan kernels, then memory: partition, tiles, liveness, arena offsets */
    bool dynamic = mcir_graph_is_dynamic(c->graph);
    bool gpu_run = o->run && o->device != MCIR_DEVICE_CPU &&
                   (o->device == MCIR_DEVICE_GPU || o->device == MCIR_DEVICE_EMU ||
                    (!dynamic && mcir_gpu_available(NULL, 0)));
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
        c->plan->exact_math = o->exact_math;
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
    /* symbolic dims: a device run of a range needs every kernel
     * size-generic (codegen checked each at other sizes) */
    if (gpu_run && dynamic && (st = require_generic(o, c, d))) return st;
    if (o->want_ptx || (gpu_run && o->device != MCIR_DEVICE_EMU)) {   /* the emulator builds its own */
        if (!mcir_codegen_compile(c->codegen, c->target->name, d)) return MCIR_EXIT_TOOLCHAIN;
        if (o->want_sass) mcir_codegen_audit_sass(c->codegen);
    }

    /* symbolic dims: a run and --verify execute copies bound to the run's
     * sizes (the inputs', --dim N, else the largest); the cost model says
     * what the plan's kernels move and take there */
    if ((o->run || o->verify || o->n_dims) && c->graph->n_dims) {
        int64_t values[MCIR_MAX_DIMS], top[MCIR_MAX_DIMS];
        if ((st = run_binding(o, c->graph, values, d))) return st;
        bool other = false;
        for (int k = 0; k < c->graph->n_dims; k++) {
            top[k] = c->graph->dims[k].value;
            other = other || values[k] != top[k];
        }
        if (other && c->plan && mcir_graph_bind_dims(c->graph, values, d)) {
            mcir_cost_plan(c->plan, &c->cost_at_run);
            mcir_dims_binding_str(c->graph, c->run_binding, sizeof c->run_binding);
            c->has_cost_at_run = true;
            if (!mcir_graph_bind_dims(c->graph, top, d)) return MCIR_EXIT_INVALID;
        }
    }
    if ((o->run || o->verify) && c->graph->n_dims) {
        int64_t values[MCIR_MAX_DIMS];
        if ((st = run_binding(o, c->graph, values, d))) return st;
        st = MCIR_EXIT_OK;
        c->run_graph = bound_copy(c->graph, values, &st, d);
        if (!st && c->original) c->run_original = bound_copy(c->original, values, &st, d);
        if (st) return st;
    }

    /* one process a rank, under a launcher */
    if ((o->run || o->verify) && c->graph->ranks > 1 && (st = stage_launch(c, d))) return st;
    /* run: the GPU where asked (or present), else the CPU reference; a
     * device run of a graph with dims takes the kernels' launches at the
     * run's sizes, then goes back to the largest for the artifacts */
    if (o->run && gpu_run && c->graph->n_dims) {
        int64_t values[MCIR_MAX_DIMS], top[MCIR_MAX_DIMS];
        for (int k = 0; k < c->graph->n_dims; k++) {
            values[k] = c->graph->dims[k].value;
            top[k] = c->graph->dims[k].value;
        }
        if ((st = run_binding(o, c->graph, values, d))) return st;
        if (!mcir_codegen_rebind(c->codegen, values, d)) return MCIR_EXIT_INVALID;
        st = stage_run(o, c, d);
        if (!st && c->run_graph) move_outputs(c);
        if (!mcir_codegen_rebind(c->codegen, top, d)) return MCIR_EXIT_INVALID;
        if (st) return st;
        return finish_verify(o, c, d);
    }
    if (o->run && (st = stage_run(o, c, d))) return st;
    return finish_verify(o, c, d);
}

void mcir_compilation_free(mcir_compilation *c) {
    mcir_env_free(c->env);
    if (c->rdv) {
        mcir_runtime_set_launch(NULL);
        mcir_rdv_close(c->rdv);
    }
    mcir_codegen_free(c->codegen);
    mcir_memplan_free(c->memory);
    mcir_plan_free(c->plan);
    mcir_catalog_free(c->catalog);
    mcir_trace_free(c->trace);
    mcir_graph_free(c->graph);
    mcir_graph_free(c->original);
    mcir_graph_free(c->run_graph);
    mcir_graph_free(c->run_original);
    free(c->verify);
    memset(c, 0, sizeof *c);
}
