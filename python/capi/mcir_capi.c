/*
 * mcir_capi.c — the C entry points of the Python package (python/mcir,
 * docs/python.md), built as libmcir_capi.so. Python adds no second
 * pipeline: it builds graph.json text and weight buffers, and these
 * functions hand them to mcir_compile (mcirc/pipeline.c) as mcirc would,
 * then return the artifacts as text and run the compiled graph.
 *
 * Every function reports problems as text (the same PATH:LINE:COL: error:
 * lines mcirc prints) through mcir_capi_errors; none exits or aborts on bad
 * input. Strings returned are owned by the handle.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "mcirc/pipeline.h"
#include "python/capi/mcir_capi.h"
#include "rewrites/rewrites.h"

struct mcir_capi {
    mcir_compilation c;
    int status;
    char *errors;          /* diagnostics of the last call */
    char *artifact;        /* the last artifact asked for */
    mcir_gpu_session *session;   /* the device runs': open from the first to the handle's end */
    bool session_emulated;       /* on the emulated device */
    /* a graph with dims, bound by mcir_capi_bind (at the largest sizes
     * until then): the sizes the kernels' launches were last taken at
     * (mcir_codegen_rebind), when known */
    int64_t launch_values[MCIR_MAX_DIMS];
    bool launch_known;
    /* mcir_capi_set_group: this process is one rank of an outside group */
    mcir_capi_collective_fn group_fn;
    void *group_ctx;
    int group_rank;
    int graphs;   /* device runs as CUDA graphs: 1 / 0, -1 (MCIR_GPU_GRAPHS); mcir_capi_set_graphs */
};

#define CAPI_VERSION 8
int mcir_capi_version(void) { return CAPI_VERSION; }

/* Runs fn with a diagnostics sink whose text lands in h->errors. */
typedef struct sink {
    char *buf;
    size_t len;
    FILE *f;
    mcir_diag d;
} sink;

static void sink_open(sink *s) {
    s->buf = NULL;
    s->len = 0;
    s->f = open_memstream(&s->buf, &s->len);
    s->d = mcir_diag_to(s->f);
}

static void sink_close(sink *s, mcir_capi *h) {
    if (s->f) fclose(s->f);
    free(h->errors);
    h->errors = s->buf ? s->buf : strdup("");
}

const char *mcir_capi_errors(const mcir_capi *h) { return h && h->errors ? h->errors : ""; }
int mcir_capi_status(const mcir_capi *h) { return h ? h->status : MCIR_EXIT_USAGE; }

/* Compiles graph.json text. Weights named in weight_names take their
 * values from the matching buffers (storage dtype, C order, weight_bytes
 * long) instead of "data"/"value"/seeding. arch: "sm_90" etc. or NULL;
 * flags: MCIR_CAPI_NO_REWRITE, _CODE (generate CUDA C), _PTX (NVRTC).
 * Returns a handle even on failure: mcir_capi_status is then non-zero and
 * mcir_capi_errors says why. */
mcir_capi *mcir_capi_compile(const char *graph_json, const char *name, int n_weights,
                             const char *const *weight_names, const void *const *weight_data,
                             const long long *weight_bytes, const char *arch, int flags,
                             const char *const *catalogs, int n_catalogs) {
    mcir_capi *h = calloc(1, sizeof *h);
    if (h) h->graphs = -1;
    if (!h) return NULL;
    sink s;
    sink_open(&s);
    mcir_diag *d = &s.d;
    h->status = MCIR_EXIT_INVALID;
    mcir_graph *g = mcir_graph_read_json_string(graph_json, name ? name : "<python>", d);
    bool ok = g != NULL;
    for (int i = 0; ok && i < n_weights; i++) {
        mcir_tensor *t = mcir_graph_find_tensor(g, weight_names[i]);
        if (!t || t->kind != MCIR_TENSOR_WEIGHT) {
            mcir_error(d, (mcir_loc){name, 0, 0}, "weight '%s': the graph has no such weight",
                       weight_names[i]);
            ok = false;
        } else if ((long long)mcir_tensor_bytes(t) != weight_bytes[i]) {
            mcir_error(d, (mcir_loc){name, 0, 0},
                       "weight '%s': %lld bytes given, the graph declares %lld", t->name,
                       weight_bytes[i], (long long)mcir_tensor_bytes(t));
            ok = false;
        } else {
            t->data = mcir_arena_memdup(g->arena, weight_data[i], (size_t)weight_bytes[i]);
            t->data_path = NULL;
        }
    }
    if (!ok) {
        mcir_graph_free(g);
        sink_close(&s, h);
        return h;
    }
    mcir_options o = mcir_options_default();
    o.graph = g;
    o.graph_path = name ? name : "<python>";
    o.arch = arch;
    o.no_rewrite = flags & MCIR_CAPI_NO_REWRITE;
    o.exact_math = (flags & MCIR_CAPI_EXACT_MATH) != 0;
    o.want_plan = true;
    o.keep_original = true;
    o.want_cuda = (flags & (MCIR_CAPI_CODE | MCIR_CAPI_PTX)) != 0;
    o.want_ptx = (flags & MCIR_CAPI_PTX) != 0;
    o.catalogs = (const char **)catalogs;
    o.n_catalogs = n_catalogs;
    h->status = mcir_compile(&o, &h->c, d);
    if (!h->status && h->c.codegen) {   /* the launches are at the binding it compiled at */
        for (int k = 0; k < h->c.graph->n_dims; k++) h->launch_values[k] = h->c.graph->dims[k].value;
        h->launch_known = true;
    }
    sink_close(&s, h);
    return h;
}

void mcir_capi_free(mcir_capi *h) {
    if (!h) return;
    mcir_gpu_session_close(h->session);   /* before the kernels it runs */
    mcir_compilation_free(&h->c);
    free(h->errors);
    free(h->artifact);
    free(h);
}

/* The generated code of a handle compiled without it (the emulated
 * device's runs), made at the largest sizes as mcir_compile makes it; the
 * graph's binding is kept. */
static mcir_codegen *codegen_at_largest(mcir_capi *h, mcir_diag *d) {
    mcir_graph *g = h->c.graph;
    int64_t values[MCIR_MAX_DIMS], top[MCIR_MAX_DIMS];
    for (int k = 0; k < g->n_dims; k++) {
        values[k] = g->dims[k].value;
        top[k] = g->dims[k].max;
    }
    if (g->n_dims && !mcir_graph_bind_dims(g, top, d)) return NULL;
    mcir_codegen *cg = mcir_codegen_new(h->c.plan, h->c.memory, d);
    memcpy(h->launch_values, top, sizeof top);
    h->launch_known = cg != NULL;
    if (g->n_dims && !mcir_graph_bind_dims(g, values, d)) {
        mcir_codegen_free(cg);
        return NULL;
    }
    return cg;
}

/* A graph with dims: the kernels' launches taken at the graph's current
 * binding (mcir_capi_bind) where they were taken at other sizes; the
 * compiled code is kept (a kernel that is not size-generic is an error
 * naming it). A session with CUDA graphs keeps one per size (runtime.h):
 * the next step at these sizes replays or captures theirs. */
static bool rebind_launches(mcir_capi *h, mcir_diag *d) {
    const mcir_graph *g = h->c.graph;
    if (!g->n_dims || !h->c.codegen) return true;
    int64_t values[MCIR_MAX_DIMS];
    bool same = h->launch_known;
    for (int k = 0; k < g->n_dims; k++) {
        values[k] = g->dims[k].value;
        same = same && h->launch_values[k] == values[k];
    }
    if (same) return true;
    h->launch_known = false;
    if (!mcir_codegen_rebind(h->c.codegen, values, d)) return false;
    memcpy(h->launch_values, values, sizeof values);
    h->launch_known = true;
    return true;
}

/* The graph and the kernels' launches at the largest sizes (a graph
 * with dims). */
static bool at_largest(mcir_capi *h, mcir_diag *d) {
    mcir_graph *g = h->c.graph;
    if (!g->n_dims) return true;
    int64_t top[MCIR_MAX_DIMS];
    for (int k = 0; k < g->n_dims; k++) top[k] = g->dims[k].max;
    if (!mcir_graph_bind_dims(g, top, d)) return false;
    return rebind_launches(h, d);
}

/* One step of the handle's session on the GPU or the emulated device
 * (runtime/runtime.h): opened at the first device run and kept, so the
 * modules, cuBLAS handles, arena and weights stay on the device between
 * calls (and, with MCIR_GPU_GRAPHS=1, later calls replay a CUDA graph); a
 * session of the other device, or one whose step failed, is closed and
 * the next run opens a new one. */
static bool device_step(mcir_capi *h, bool emulated, mcir_env *env, const uint64_t *bound, mcir_diag *d) {
    if (!rebind_launches(h, d)) return false;
    if (h->session && h->session_emulated != emulated) {
        mcir_gpu_session_close(h->session);
        h->session = NULL;
    }
    if (!h->session) {
        /* opened at the largest sizes, so that what it sizes once (the
         * library workspace and staging, the scratch) serves every size */
        const mcir_graph *g = h->c.graph;
        int64_t values[MCIR_MAX_DIMS];
        for (int k = 0; k < g->n_dims; k++) values[k] = g->dims[k].value;
        if (!at_largest(h, d)) return false;
        const mcir_gpu_session_options o = {.mode = MCIR_ALLOC_POOL, .graphs = h->graphs};
        h->session = emulated ? mcir_emu_session_open(h->c.codegen, env, &o, d)
                              : mcir_gpu_session_open(h->c.codegen, env, &o, d);
        h->session_emulated = emulated;
        if (g->n_dims && !mcir_graph_bind_dims(h->c.graph, values, d)) return false;
        if (!h->session || !rebind_launches(h, d)) return false;
    }
    if (mcir_gpu_session_step(h->session, env, bound, &h->c.gpu_stats, d)) return true;
    mcir_gpu_session_close(h->session);
    h->session = NULL;
    return false;
}

/* Whether later device runs go as CUDA graphs (on: 1, off: 0, -1: as
 * MCIR_GPU_GRAPHS says): the session opened with another setting is
 * closed, the next run opens one with this. 0 on success. */
int mcir_capi_set_graphs(mcir_capi *h, int on) {
    if (!h || h->status) return MCIR_EXIT_USAGE;
    int v = on < 0 ? -1 : on ? 1 : 0;
    if (v != h->graphs && h->session) {
        mcir_gpu_session_close(h->session);
        h->session = NULL;
    }
    h->graphs = v;
    return 0;
}

/* The last device run: whether it ran as a CUDA graph (captured at the
 * session's first step at its sizes, replayed after), and how many graphs
 * the session holds. */
void mcir_capi_last_step(const mcir_capi *h, int *graph, int *graph_sizes) {
    *graph = h && h->c.gpu_stats.graph;
    *graph_sizes = h ? h->c.gpu_stats.graph_sizes : 0;
}

/* Counts of the summary: nodes before, after, kernels, applied rewrites. */
void mcir_capi_counts(const mcir_capi *h, int *nodes_before, int *nodes_after, int *kernels,
                      int *rewrites) {
    *nodes_before = h->c.nodes_before;
    *nodes_after = h->c.nodes_after;
    *kernels = h->c.plan ? h->c.plan->n_kernels : 0;
    *rewrites = h->c.rewrites_applied;
}

/* Runs the compiled graph on the GPU with inputs and outputs in device
 * memory the caller owns (torch CUDA tensors on device 0): inputs by name,
 * at device addresses in_ptrs (in_bytes long, storage dtype, C order),
 * outputs in graph output order at out_ptrs (out_bytes long); nothing is
 * copied through the host (a step of the handle's session, bound as
 * mcir_gpu_run_bound's). Needs MCIR_CAPI_PTX at
 * compile time. 0 on success. */
int mcir_capi_run_device(mcir_capi *h, int n_inputs, const char *const *names,
                         const unsigned long long *in_ptrs, const long long *in_bytes,
                         const unsigned long long *out_ptrs, const long long *out_bytes) {
    if (!h || h->status) return MCIR_EXIT_USAGE;
    sink s;
    sink_open(&s);
    mcir_diag *d = &s.d;
    mcir_compilation *c = &h->c;
    const mcir_graph *g = c->graph;
    int st = MCIR_EXIT_OK;
    char why[256];
    uint64_t *bound = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *bound);
    if (!bound) {
        sink_close(&s, h);
        return MCIR_EXIT_INVALID;
    }
    if (h->group_fn && g->ranks > 1) {
        mcir_error(d, (mcir_loc){g->path, 0, 0},
                   "device 'gpu': a graph run as rank %d of an outside group (%d ranks) takes its values "
                   "through the host (mcir_capi_run), not bound device memory", h->group_rank, g->ranks);
        st = MCIR_EXIT_USAGE;
    } else if (!c->codegen || !mcir_gpu_available(why, sizeof why)) {
        mcir_error(d, (mcir_loc){"mcir", 0, 0}, "device 'gpu': %s",
                   c->codegen ? why : "compile with ptx=True first");
        st = MCIR_EXIT_TOOLCHAIN;
    }
    for (int i = 0; !st && i < n_inputs; i++) {
        const mcir_tensor *t = mcir_graph_find_tensor((mcir_graph *)g, names[i]);
        if (!t || t->kind != MCIR_TENSOR_INPUT) {
            mcir_error(d, (mcir_loc){g->path, 0, 0}, "input '%s': the graph has no such input",
                       names[i]);
            st = MCIR_EXIT_USAGE;
        } else if ((long long)mcir_tensor_bytes(t) != in_bytes[i] || !in_ptrs[i]) {
            mcir_error(d, (mcir_loc){g->path, 0, 0},
                       "input '%s': %lld bytes at 0x%llx given, the graph declares %lld",
                       t->name, in_bytes[i], in_ptrs[i], (long long)mcir_tensor_bytes(t));
            st = MCIR_EXIT_INVALID;
        } else {
            bound[t->id] = in_ptrs[i];
        }
    }
    for (int i = 0; !st && i < g->n_outputs; i++) {
        const mcir_tensor *t = g->outputs[i];
        if ((long long)mcir_tensor_bytes(t) != out_bytes[i] || !out_ptrs[i]) {
            mcir_error(d, (mcir_loc){g->path, 0, 0},
                       "output '%s': a buffer of %lld bytes at 0x%llx, the graph makes %lld",
                       t->name, out_bytes[i], out_ptrs[i], (long long)mcir_tensor_bytes(t));
            st = MCIR_EXIT_INVALID;
        } else {
            bound[t->id] = out_ptrs[i];
        }
    }
    if (!st) {
        mcir_env *env = mcir_env_new(g, 0);
        if (!device_step(h, false, env, bound, d)) st = MCIR_EXIT_TOOLCHAIN;
        mcir_env_free(env);
    }
    free(bound);
    sink_close(&s, h);
    return st;
}

/* A graph with dims (docs/graph-format.md "Symbolic dimensions"): binds
 * every dimension to the size the inputs give it — input i (names[i]) of
 * rank ranks[i] with extents shapes[offset..], the shapes of all inputs
 * one after the other — before mcir_capi_run / _run_device and
 * mcir_capi_output at those sizes. A dimension no input names keeps its
 * binding. Inputs that disagree, or a size outside the dimension's range,
 * are an error naming the dimension and the inputs. Nothing is compiled:
 * the kernels take the sizes at launch. 0 on success (a graph without
 * dims: nothing to do). */
int mcir_capi_bind(mcir_capi *h, int n_inputs, const char *const *names, const int *ranks,
                   const long long *shapes) {
    if (!h || h->status) return MCIR_EXIT_USAGE;
    mcir_graph *g = h->c.graph;
    if (!g->n_dims) return MCIR_EXIT_OK;
    sink s;
    sink_open(&s);
    mcir_diag *d = &s.d;
    int st = MCIR_EXIT_OK;
    int64_t values[MCIR_MAX_DIMS];
    const char *from[MCIR_MAX_DIMS] = {NULL};
    for (int k = 0; k < g->n_dims; k++) values[k] = g->dims[k].value;
    const long long *shape = shapes;
    for (int i = 0; !st && i < n_inputs; shape += ranks[i], i++) {
        const mcir_tensor *t = mcir_graph_find_tensor(g, names[i]);
        if (!t || t->kind != MCIR_TENSOR_INPUT) {
            mcir_error(d, (mcir_loc){g->path, 0, 0}, "input '%s': the graph has no such input",
                       names[i]);
            st = MCIR_EXIT_USAGE;
        } else if (ranks[i] != t->rank) {
            mcir_error(d, (mcir_loc){g->path, 0, 0},
                       "input '%s': rank %d given, the graph declares rank %d", t->name,
                       ranks[i], t->rank);
            st = MCIR_EXIT_INVALID;
        }
        for (int j = 0; !st && t->sym && j < t->rank; j++) {
            int k = mcir_extent_first_dim(&t->sym[j]);
            if (k < 0) continue;
            const mcir_dim *dim = &g->dims[k];
            if (shape[j] < dim->min || shape[j] > dim->max) {
                mcir_error(d, (mcir_loc){g->path, 0, 0},
                           "input '%s' has %lld in dim %d, which is dimension '%s': outside "
                           "its range [%lld, %lld] (the graph was compiled for that range)",
                           t->name, shape[j], j, dim->name, (long long)dim->min,
                           (long long)dim->max);
                st = MCIR_EXIT_INVALID;
            } else if (from[k] && values[k] != shape[j]) {
                mcir_error(d, (mcir_loc){g->path, 0, 0},
                           "inputs disagree on dimension '%s': input '%s' has %lld in dim %d, "
                           "input '%s' has %lld", dim->name, t->name, shape[j], j, from[k],
                           (long long)values[k]);
                st = MCIR_EXIT_INVALID;
            } else {
                values[k] = shape[j];
                from[k] = t->name;
            }
        }
    }
    bool same = true;
    for (int k = 0; k < g->n_dims; k++) same = same && g->dims[k].value == values[k];
    if (!st && !same && !mcir_graph_bind_dims(g, values, d)) st = MCIR_EXIT_INVALID;
    sink_close(&s, h);
    return st;
}

/* The graph's dimensions: how many, and dimension i's name, range and
 * current binding (NULL name past the last). */
int mcir_capi_dim(const mcir_capi *h, int i, const char **name, long long *min, long long *max,
                  long long *value) {
    if (!h || h->status || !h->c.graph) return 0;
    const mcir_graph *g = h->c.graph;
    if (i < 0 || i >= g->n_dims) return g->n_dims;
    *name = g->dims[i].name;
    *min = g->dims[i].min;
    *max = g->dims[i].max;
    *value = g->dims[i].value;
    return g->n_dims;
}

/* Output i of the compiled graph (graph output order): its dtype name
 * ("f32", "i64", ...) and shape at the current binding (mcir_capi_bind),
 * for the caller to size its buffers.
 * Returns the rank, or -1 if there is no output i. */
int mcir_capi_output(const mcir_capi *h, int i, const char **dtype, long long *shape) {
    if (!h || h->status || !h->c.graph || i < 0 || i >= h->c.graph->n_outputs) return -1;
    const mcir_tensor *t = h->c.graph->outputs[i];
    *dtype = mcir_dtype_name(t->dtype);
    for (int k = 0; k < t->rank; k++) shape[k] = (long long)t->shape[k];
    return t->rank;
}

/* An artifact as mcirc --emit writes it: "mcir", "trace", "plan",
 * "memory", "cuda", "dot". NULL if it does not exist. */
const char *mcir_capi_artifact(mcir_capi *h, const char *what) {
    if (!h || h->status) return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    const mcir_compilation *c = &h->c;
    bool ok = false;
    if (!strcmp(what, "mcir")) ok = mcir_graph_write_json(c->graph, f);
    else if (!strcmp(what, "trace")) ok = mcir_trace_write_jsonl(c->trace, f);
    else if (!strcmp(what, "plan") && c->plan) ok = mcir_plan_write_json(c->plan, f);
    else if (!strcmp(what, "memory") && c->memory)
        ok = mcir_memplan_write_json(c->memory, c->plan, f);
    else if (!strcmp(what, "cuda") && c->codegen) ok = mcir_codegen_write_cuda(c->codegen, f);
    else if (!strcmp(what, "dot")) ok = mcir_graph_write_dot(c->graph, f);
    fclose(f);
    free(h->artifact);
    h->artifact = ok ? buf : NULL;
    if (!ok) free(buf);
    return h->artifact;
}

/* Runs the compiled (rewritten) graph: inputs by name from buffers in
 * their storage dtype (unset inputs are seeded with seed), outputs written
 * into the buffers given in graph output order (storage dtype, C order).
 * device: "cpu" (the reference interpreter) or "gpu" (the generated
 * kernels; needs MCIR_CAPI_PTX at compile time and a GPU). 0 on success. */
/* The outside group's collective, as mcir_group_fn: the node's kind and
 * attributes handed to the caller's function. */
static bool capi_group_run(void *ctx, const mcir_node *n, const void *in, void *out,
                           mcir_diag *d) {
    const mcir_capi *h = ctx;
    const mcir_tensor *x = n->inputs[0];
    long long shape[MCIR_MAX_RANK];
    for (int j = 0; j < x->rank; j++) shape[j] = (long long)x->shape[j];
    const char *op = mcir_op_name(n->op);
    const char *reduce = n->op == MCIR_OP_ALL_GATHER ? "" : mcir_node_string(n, "op");
    int axis = n->op == MCIR_OP_ALL_REDUCE ? -1 : (int)mcir_node_int(n, "axis");
    int integer = mcir_value_type_of(x->dtype) == MCIR_VALUE_I64;
    int rc = h->group_fn(h->group_ctx, op, reduce, axis, h->c.graph->ranks, integer, x->rank,
                         shape, in, out);
    if (rc != 0)
        mcir_error(d, n->loc, "node '%s' (%s): the group's collective failed (%d)", n->name, op,
                   rc);
    return rc == 0;
}

/* This process runs rank `rank` of the graph's ranks (a graph with ranks
 * > 1, each rank in its own process: torch.distributed): mcir_capi_run on
 * the CPU then holds this rank's values only — its inputs and weights,
 * its outputs — and hands each collective to fn, which must perform it
 * with the other ranks (docs/python.md "Tensor parallelism"). fn == NULL
 * forgets the group. */
int mcir_capi_set_group(mcir_capi *h, int rank, mcir_capi_collective_fn fn, void *ctx) {
    if (!h || h->status) return MCIR_EXIT_USAGE;
    if (fn && (h->c.graph->ranks < 2 || rank < 0 || rank >= h->c.graph->ranks)) {
        free(h->errors);
        char buf[160];
        snprintf(buf, sizeof buf, "mcir_capi_set_group: rank %d of a graph with %d ranks\n", rank,
                 h->c.graph->ranks);
        h->errors = strdup(buf);
        return MCIR_EXIT_USAGE;
    }
    h->group_fn = fn;
    h->group_ctx = ctx;
    h->group_rank = rank;
    return MCIR_EXIT_OK;
}

int mcir_capi_run(mcir_capi *h, const char *device, int n_inputs, const char *const *names,
                  const void *const *data, const long long *bytes, void *const *outputs,
                  const long long *output_bytes, unsigned long long seed) {
    if (!h || h->status) return MCIR_EXIT_USAGE;
    sink s;
    sink_open(&s);
    mcir_diag *d = &s.d;
    mcir_compilation *c = &h->c;
    const mcir_graph *g = c->graph;
    int st = MCIR_EXIT_OK;
    mcir_group group = {h->group_rank, capi_group_run, h};
    bool member = h->group_fn && g->ranks > 1;
    mcir_env *env = member ? mcir_env_new_member(g, seed, &group) : mcir_env_new(g, seed);
    bool gpu = device && !strcmp(device, "gpu"), emu = device && !strcmp(device, "emu");
    for (int i = 0; !st && i < n_inputs; i++) {
        const mcir_tensor *t = mcir_graph_find_tensor((mcir_graph *)g, names[i]);
        if (!t || t->kind != MCIR_TENSOR_INPUT) {
            mcir_error(d, (mcir_loc){g->path, 0, 0}, "input '%s': the graph has no such input",
                       names[i]);
            st = MCIR_EXIT_USAGE;
        } else if ((long long)mcir_tensor_bytes(t) != bytes[i]) {
            mcir_error(d, (mcir_loc){g->path, 0, 0},
                       "input '%s': %lld bytes given, the graph declares %lld", t->name,
                       bytes[i], (long long)mcir_tensor_bytes(t));
            st = MCIR_EXIT_INVALID;
        } else {
            mcir_env_set_raw(env, t, data[i]);
        }
    }
    if (!st && emu) {
        /* the emulated device builds its own modules: the generated code
         * is enough (made here when compiled without code=True) */
        if (!c->codegen && c->plan) c->codegen = codegen_at_largest(h, d);
        if (!c->codegen) {
            if (!c->plan) mcir_error(d, (mcir_loc){"mcir", 0, 0}, "device 'emu': the graph has no kernel plan");
            st = MCIR_EXIT_TOOLCHAIN;
        } else if (member) {   /* one rank of the group: a run (sessions hold one rank of their own) */
            if (!rebind_launches(h, d) || !mcir_emu_run(c->codegen, env, MCIR_ALLOC_POOL, &c->gpu_stats, d))
                st = MCIR_EXIT_TOOLCHAIN;
        } else if (!device_step(h, true, env, NULL, d)) {
            st = MCIR_EXIT_TOOLCHAIN;
        }
    } else if (!st && gpu) {
        char why[256];
        if (!c->codegen || !mcir_gpu_available(why, sizeof why)) {
            mcir_error(d, (mcir_loc){"mcir", 0, 0}, "device 'gpu': %s",
                       c->codegen ? why : "compile with ptx=True first");
            st = MCIR_EXIT_TOOLCHAIN;
        } else if (member) {   /* one rank of the group, its collectives staged through the host */
            if (!rebind_launches(h, d) || !mcir_gpu_run(c->codegen, env, MCIR_ALLOC_POOL, &c->gpu_stats, d))
                st = MCIR_EXIT_TOOLCHAIN;
        } else if (!device_step(h, false, env, NULL, d)) {
            st = MCIR_EXIT_TOOLCHAIN;
        }
    } else if (!st && !mcir_interp_run(g, env, d)) {
        st = MCIR_EXIT_INVALID;
    }
    for (int i = 0; !st && i < g->n_outputs; i++) {
        const mcir_tensor *t = g->outputs[i];
        if ((long long)mcir_tensor_bytes(t) != output_bytes[i]) {
            mcir_error(d, (mcir_loc){g->path, 0, 0},
                       "output '%s': a buffer of %lld bytes, the graph makes %lld", t->name,
                       output_bytes[i], (long long)mcir_tensor_bytes(t));
            st = MCIR_EXIT_INVALID;
            break;
        }
        MCIR_ASSERT(mcir_env_get_raw(env, t, outputs[i]));   /* exact, integers too */
    }
    mcir_env_free(env);
    sink_close(&s, h);
    return st;
}
