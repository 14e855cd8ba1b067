/*
 * interp.c — the CPU reference interpreter: per-tensor values (the
 * mcir_env: f32 for float tensors, int64 for integer and bool ones, chosen
 * by the tensor's dtype), graph execution in node order (a node whose
 * tensors are all float runs its f32 kernel, any other its typed kernel),
 * and the small thread pool the reference kernels share.
 *
 * Invariants: every value in an env is already rounded (float) or wrapped
 * (integer) to its tensor's storage dtype; after mcir_interp_run, inputs, weights and graph outputs
 * hold values, while an intermediate is freed after its last consumer ran
 * (unless keep_all is set). User problems (a shape never inferred, an
 * allocation too large) are reported through the diag, never aborted on.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interp-impl.h"

/* ------------------------------------------------------------- threads */

static int n_threads; /* 0: not chosen yet */

void mcir_set_threads(int n) { __atomic_store_n(&n_threads, n > 0 ? n : 0, __ATOMIC_RELAXED); }

/* Default: $MCIR_THREADS if set, else the number of online CPUs. */
int mcir_get_threads(void) {
    int n = __atomic_load_n(&n_threads, __ATOMIC_RELAXED);
    if (n > 0) return n;
    const char *env = getenv("MCIR_THREADS");
    long v = env ? strtol(env, NULL, 10) : 0;
    if (v <= 0) v = sysconf(_SC_NPROCESSORS_ONLN);
    if (v <= 0) v = 1;
    if (v > 256) v = 256;
    n = (int)v;
    __atomic_store_n(&n_threads, n, __ATOMIC_RELAXED);
    return n;
}

/* Set inside workers so that nested parallel_for calls run serially. */
static _Thread_local bool in_worker;

/* Work is handed out in chunks from a shared counter, so a thread that
 * the OS runs less (a shared machine) simply takes fewer chunks. */
typedef struct parallel_job {
    mcir_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    int64_t next; /* next chunk index, atomic */
} parallel_job;

static void run_chunks(parallel_job *job) {
    for (;;) {
        int64_t c = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
        int64_t lo = c * job->chunk;
        if (lo >= job->n) return;
        int64_t hi = lo + job->chunk < job->n ? lo + job->chunk : job->n;
        job->fn(job->ctx, lo, hi);
    }
}

static void *worker_main(void *p) {
    in_worker = true;
    run_chunks(p);
    return NULL;
}

/* Work below this many flops (or bytes) is not worth a thread. */
#define MIN_COST_PER_THREAD 2.0e5

void mcir_parallel_for(int64_t n, double cost, mcir_range_fn fn, void *ctx) {
    if (n <= 0) return;
    int64_t t = in_worker ? 1 : mcir_get_threads();
    if (t > n) t = n;
    if (cost / MIN_COST_PER_THREAD < (double)t) t = (int64_t)(cost / MIN_COST_PER_THREAD);
    if (t <= 1) {
        fn(ctx, 0, n);
        return;
    }
    /* About 8 chunks per thread. */
    parallel_job job = {fn, ctx, n, (n + 8 * t - 1) / (8 * t), 0};
    pthread_t tids[256];
    bool started[256];
    for (int64_t i = 1; i < t; i++)
        started[i] = pthread_create(&tids[i], NULL, worker_main, &job) == 0;
    in_worker = true;
    run_chunks(&job); /* also covers workers that could not start */
    in_worker = false;
    for (int64_t i = 1; i < t; i++)
        if (started[i]) pthread_join(tids[i], NULL);
}

/* ------------------------------------------------------------------ env */

/* A freed buffer kept for reuse: a transformer allocates the same few
 * sizes again and again, and fresh memory from the OS costs a page fault
 * and a page clear per 4 KiB (a third of the run time otherwise). */
typedef struct spare_buffer {
    void *p;
    int64_t cap; /* bytes */
} spare_buffer;

/* At most this many bytes (1 GiB) sit in the spare pool. */
#define SPARE_MAX_BYTES ((int64_t)1 << 30)

struct mcir_env {
    const mcir_graph *g;
    uint64_t seed;
    int n;            /* tensors covered (g->n_tensors at creation) */
    void **values;    /* by tensor id, of its value type; NULL: not set / computed / freed */
    int64_t *caps;    /* capacity of values[id], bytes */
    float **as_f32;   /* integer tensors: the f32 copy mcir_env_get handed out, or NULL */
    bool keep_all;
    spare_buffer *spare;
    int n_spare, cap_spare;
    int64_t spare_bytes;
};

mcir_env *mcir_env_new(const mcir_graph *g, uint64_t seed) {
    mcir_env *e = calloc(1, sizeof *e);
    MCIR_ASSERT(e);
    e->g = g;
    e->seed = seed;
    e->n = g->n_tensors;
    size_t slots = (size_t)(e->n > 0 ? e->n : 1);
    e->values = calloc(slots, sizeof(void *));
    e->caps = calloc(slots, sizeof(int64_t));
    e->as_f32 = calloc(slots, sizeof(float *));
    MCIR_ASSERT(e->values && e->caps && e->as_f32);
    return e;
}

uint64_t mcir_env_seed(const mcir_env *e) { return e->seed; }

void mcir_env_free(mcir_env *e) {
    if (!e) return;
    for (int i = 0; i < e->n; i++) {
        free(e->values[i]);
        free(e->as_f32[i]);
    }
    for (int i = 0; i < e->n_spare; i++) free(e->spare[i].p);
    free(e->spare);
    free(e->values);
    free(e->caps);
    free(e->as_f32);
    free(e);
}

void mcir_env_keep_all(mcir_env *e, bool keep) { e->keep_all = keep; }

const mcir_graph *mcir_env_graph(const mcir_env *e) { return e->g; }

static bool in_env(const mcir_env *e, const mcir_tensor *t) {
    return t && t->id >= 0 && t->id < e->n && e->g->tensors[t->id] == t;
}

static bool is_int(const mcir_tensor *t) {
    return mcir_value_type_of(t->dtype) == MCIR_VALUE_I64;
}

/* Drops the f32 copy of tensor id's values (they are about to change). */
static void drop_f32_copy(mcir_env *e, int id) {
    free(e->as_f32[id]);
    e->as_f32[id] = NULL;
}

float *mcir_env_get(mcir_env *e, const mcir_tensor *t) {
    if (!in_env(e, t) || !e->values[t->id]) return NULL;
    if (!is_int(t)) return e->values[t->id];
    int64_t n = mcir_tensor_numel(t);
    if (!e->as_f32[t->id]) {
        float *f = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
        MCIR_ASSERT(f);
        const int64_t *v = e->values[t->id];
        for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
        e->as_f32[t->id] = f;
    }
    return e->as_f32[t->id];
}

int64_t *mcir_env_get_int(mcir_env *e, const mcir_tensor *t) {
    return in_env(e, t) && is_int(t) ? e->values[t->id] : NULL;
}

bool mcir_env_get_raw(mcir_env *e, const mcir_tensor *t, void *out) {
    if (!in_env(e, t) || !e->values[t->id]) return false;
    int64_t n = mcir_tensor_numel(t);
    if (is_int(t)) mcir_values_from_int(t->dtype, e->values[t->id], out, n);
    else mcir_values_from_f32(t->dtype, e->values[t->id], out, n);
    return true;
}

bool mcir_env_compare(mcir_env *eg, const mcir_tensor *got, mcir_env *ew,
                      const mcir_tensor *want, mcir_compare_result *r) {
    MCIR_ASSERT(got->dtype == want->dtype && mcir_tensor_numel(got) == mcir_tensor_numel(want));
    if (!in_env(eg, got) || !in_env(ew, want) || !eg->values[got->id] || !ew->values[want->id])
        return false;
    if (is_int(got))
        mcir_values_compare_int(eg->values[got->id], ew->values[want->id], mcir_tensor_numel(got), r);
    else
        mcir_values_compare(eg->values[got->id], ew->values[want->id], mcir_tensor_numel(got), r);
    return true;
}

/* Moves tensor id's buffer to the spare pool (oldest spares are freed to
 * keep the pool under SPARE_MAX_BYTES). */
static void env_release(mcir_env *e, int id) {
    void *p = e->values[id];
    int64_t cap = e->caps[id];
    e->values[id] = NULL;
    e->caps[id] = 0;
    drop_f32_copy(e, id);
    if (!p) return;
    if (cap > SPARE_MAX_BYTES) {
        free(p);
        return;
    }
    while (e->n_spare > 0 && e->spare_bytes + cap > SPARE_MAX_BYTES) {
        free(e->spare[0].p);
        e->spare_bytes -= e->spare[0].cap;
        memmove(e->spare, e->spare + 1, sizeof *e->spare * (size_t)--e->n_spare);
    }
    if (e->n_spare == e->cap_spare) {
        int cap_new = e->cap_spare ? 2 * e->cap_spare : 16;
        spare_buffer *sp = realloc(e->spare, sizeof *sp * (size_t)cap_new);
        if (!sp) {
            free(p);
            return;
        }
        e->spare = sp;
        e->cap_spare = cap_new;
    }
    e->spare[e->n_spare++] = (spare_buffer){p, cap};
    e->spare_bytes += cap;
}

/* A buffer of at least `bytes`: the smallest spare that is not more than
 * 25% too large, or fresh memory. */
static void *env_acquire(mcir_env *e, int64_t bytes, int64_t *cap) {
    int best = -1;
    for (int i = 0; i < e->n_spare; i++) {
        int64_t c = e->spare[i].cap;
        if (c >= bytes && c - bytes <= bytes / 4 && (best < 0 || c < e->spare[best].cap))
            best = i;
    }
    if (best >= 0) {
        void *p = e->spare[best].p;
        *cap = e->spare[best].cap;
        e->spare_bytes -= *cap;
        memmove(e->spare + best, e->spare + best + 1,
                sizeof *e->spare * (size_t)(e->n_spare - best - 1));
        e->n_spare--;
        return p;
    }
    *cap = bytes;
    return malloc((size_t)bytes);
}

/* Element count of t, or -1 when its shape is unknown or it is too large
 * to allocate. Beyond 1 TiB is a mistake in the graph, not something to
 * try (and sanitizer allocators abort rather than fail on such requests). */
static int64_t value_count(const mcir_tensor *t) {
    int64_t numel = 1, bytes;
    if (t->rank < 0) return -1;
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] < 1 || mcir_mul_overflows(numel, t->shape[i], &numel)) return -1;
    int64_t es = (int64_t)mcir_value_type_size(mcir_value_type_of(t->dtype));
    if (mcir_mul_overflows(numel, es, &bytes) ||
        bytes > ((int64_t)1 << 40) || (uint64_t)bytes > (uint64_t)SIZE_MAX / 2)
        return -1;
    return numel;
}

/* A buffer for t's values (its old one if that fits); NULL on failure. */
static void *env_slot(mcir_env *e, const mcir_tensor *t, int64_t *count) {
    MCIR_ASSERT(in_env(e, t));
    *count = value_count(t);
    int id = t->id;
    drop_f32_copy(e, id);
    int64_t bytes = *count * (int64_t)mcir_value_type_size(mcir_value_type_of(t->dtype));
    if (*count >= 0 && e->values[id] && e->caps[id] >= bytes && e->caps[id] - bytes <= bytes / 4)
        return e->values[id];
    env_release(e, id);
    if (*count < 0) return NULL;
    e->values[id] = env_acquire(e, bytes > 0 ? bytes : 1, &e->caps[id]);
    if (!e->values[id]) e->caps[id] = 0;
    return e->values[id];
}

/* Rounds a node's output values to what its dtype holds: float values to
 * f16 / bf16 (f32 needs nothing); integer values are wrapped by the typed
 * kernels themselves. */
static void round_values(mcir_dtype dt, void *values, int64_t count) {
    if (dt == MCIR_DTYPE_F32 || mcir_dtype_is_integer(dt)) return;
    float *v = values;
    for (int64_t i = 0; i < count; i++) v[i] = mcir_dtype_round(dt, v[i]);
}

void mcir_env_set(mcir_env *e, const mcir_tensor *t, const float *values) {
    int64_t count;
    void *v = env_slot(e, t, &count);
    MCIR_ASSERT(v); /* the caller sized `values` from the same shape */
    if (is_int(t)) {
        int64_t *iv = v;
        for (int64_t i = 0; i < count; i++) iv[i] = mcir_value_to_int(t->dtype, values[i]);
        return;
    }
    memcpy(v, values, sizeof(float) * (size_t)count);
    round_values(t->dtype, v, count);
}

void mcir_env_set_int(mcir_env *e, const mcir_tensor *t, const int64_t *values) {
    int64_t count;
    void *v = env_slot(e, t, &count);
    MCIR_ASSERT(v);
    for (int64_t i = 0; i < count; i++) {
        if (is_int(t)) ((int64_t *)v)[i] = mcir_int_wrap(t->dtype, values[i]);
        else ((float *)v)[i] = mcir_int_to_float(t->dtype, values[i]);
    }
}

void mcir_env_set_raw(mcir_env *e, const mcir_tensor *t, const void *data) {
    int64_t count;
    void *v = env_slot(e, t, &count);
    MCIR_ASSERT(v);
    if (is_int(t)) mcir_values_to_int(t->dtype, data, v, count);
    else mcir_values_to_f32(t->dtype, data, v, count);
}

/* ---------------------------------------------------------------- run */

static bool too_large(const mcir_tensor *t, mcir_diag *d) {
    char buf[256];
    mcir_error(d, t->loc, "tensor '%s' %s (%s): %s", t->name, mcir_shape_str(t, buf, sizeof buf),
               mcir_dtype_name(t->dtype),
               t->rank < 0 ? "shape not inferred" : "cannot allocate its values");
    return false;
}

typedef struct leaves_ctx {
    const mcir_env *e;
    const mcir_tensor **pending;
} leaves_ctx;

static void fill_leaves(void *ctx, int64_t lo, int64_t hi) {
    const leaves_ctx *c = ctx;
    for (int64_t i = lo; i < hi; i++) {
        const mcir_tensor *t = c->pending[i];
        void *v = c->e->values[t->id];
        int64_t n = mcir_tensor_numel(t);
        uint64_t seed = t->kind == MCIR_TENSOR_INPUT ? c->e->seed : 0;
        if (t->kind == MCIR_TENSOR_WEIGHT && t->data) {
            if (is_int(t)) mcir_values_to_int(t->dtype, t->data, v, n);
            else mcir_values_to_f32(t->dtype, t->data, v, n);
        } else if (is_int(t)) {   /* seeded integers are small: exact in f32 */
            float *f = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
            MCIR_ASSERT(f);
            mcir_fill_seeded(t, seed, f);
            for (int64_t k = 0; k < n; k++) ((int64_t *)v)[k] = (int64_t)f[k];
            free(f);
        } else {
            mcir_fill_seeded(t, seed, v);
        }
    }
}

/* Inputs the caller did not set get seeded values; weights get their data
 * or the documented weight seed 0. Tensors are filled in parallel (each
 * fill is sequential, so values do not depend on the thread count). */
static bool load_leaves(const mcir_graph *g, mcir_env *e, mcir_diag *d) {
    const mcir_tensor **pending = malloc(sizeof *pending * (size_t)(g->n_tensors + 1));
    MCIR_ASSERT(pending);
    int n = 0;
    double bytes = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const mcir_tensor *t = g->tensors[i];
        if (!t || t->producer || e->values[t->id]) continue;
        if (t->kind != MCIR_TENSOR_INPUT && t->kind != MCIR_TENSOR_WEIGHT) continue;
        int64_t count;
        if (!env_slot(e, t, &count)) {
            free(pending);
            return too_large(t, d);
        }
        pending[n++] = t;
        bytes += (double)count * (double)mcir_value_type_size(mcir_value_type_of(t->dtype));
    }
    leaves_ctx c = {e, pending};
    mcir_parallel_for(n, bytes, fill_leaves, &c);
    free(pending);
    return true;
}

bool mcir_interp_run(const mcir_graph *g, mcir_env *e, mcir_diag *d) {
    MCIR_ASSERT(e->g == g && e->n == g->n_tensors);
    if (!load_leaves(g, e, d)) return false;

    /* Index of the last live node reading each tensor (-1: none). */
    int *last_use = malloc(sizeof(int) * (size_t)(g->n_tensors > 0 ? g->n_tensors : 1));
    MCIR_ASSERT(last_use);
    for (int i = 0; i < g->n_tensors; i++) last_use[i] = -1;
    for (int k = 0; k < g->n_nodes; k++) {
        const mcir_node *n = g->nodes[k];
        if (n->dead) continue;
        for (int i = 0; i < n->n_inputs; i++) last_use[n->inputs[i]->id] = k;
    }

    /* Pointer arrays sized for the widest node. */
    int max_in = 1, max_out = 1;
    for (int k = 0; k < g->n_nodes; k++) {
        if (g->nodes[k]->n_inputs > max_in) max_in = g->nodes[k]->n_inputs;
        if (g->nodes[k]->n_outputs > max_out) max_out = g->nodes[k]->n_outputs;
    }
    const void **inp = malloc(sizeof *inp * (size_t)max_in);
    void **outp = malloc(sizeof *outp * (size_t)max_out);
    MCIR_ASSERT(inp && outp);
    bool ok = true;
    for (int k = 0; ok && k < g->n_nodes; k++) {
        const mcir_node *n = g->nodes[k];
        if (n->dead) continue;
        for (int i = 0; i < n->n_inputs; i++) {
            inp[i] = e->values[n->inputs[i]->id];
            if (!inp[i]) {
                mcir_error(d, n->loc,
                           "node '%s' (%s): input '%s' has no value (graph not sorted, "
                           "or its producer is dead)",
                           n->name, mcir_op_name(n->op), n->inputs[i]->name);
                ok = false;
                break;
            }
        }
        for (int i = 0; ok && i < n->n_outputs; i++) {
            int64_t count;
            outp[i] = env_slot(e, n->outputs[i], &count);
            if (!outp[i]) ok = too_large(n->outputs[i], d);
        }
        if (!ok) break;
        mcir_value_check_fn check = mcir_op_desc_of(n->op)->check;
        if (check && !check(n, (const void *const *)inp, d)) {
            ok = false;
            break;
        }
        mcir_ref_run_node_typed(n, (const void *const *)inp, (void *const *)outp);
        for (int i = 0; i < n->n_outputs; i++)
            round_values(n->outputs[i]->dtype, outp[i], mcir_tensor_numel(n->outputs[i]));
        if (e->keep_all) continue;
        /* Free intermediates whose last reader was this node, and outputs
         * nobody reads. Inputs, weights and graph outputs stay. */
        for (int i = 0; i < n->n_inputs + n->n_outputs; i++) {
            const mcir_tensor *t = i < n->n_inputs ? n->inputs[i] : n->outputs[i - n->n_inputs];
            if (!t->producer || t->is_output || t->kind == MCIR_TENSOR_OUTPUT) continue;
            if (last_use[t->id] == k || (i >= n->n_inputs && last_use[t->id] < 0)) {
                env_release(e, t->id);
            }
        }
    }
    free(inp);
    free(outp);
    free(last_use);
    return ok;
}

/* Whether every tensor of n is floating-point: then its f32 kernel runs. */
static bool all_float(const mcir_node *n) {
    for (int i = 0; i < n->n_inputs; i++)
        if (is_int(n->inputs[i])) return false;
    for (int i = 0; i < n->n_outputs; i++)
        if (is_int(n->outputs[i])) return false;
    return true;
}

void mcir_ref_run_node(const mcir_node *n, const float *const *in, float *const *out) {
    const mcir_op_desc *desc = mcir_op_desc_of(n->op);
    MCIR_ASSERT(desc->reference && all_float(n));
    desc->reference(n, in, out);
}

void mcir_ref_run_node_typed(const mcir_node *n, const void *const *in, void *const *out) {
    const mcir_op_desc *desc = mcir_op_desc_of(n->op);
    if (all_float(n)) {
        MCIR_ASSERT(desc->reference);
        desc->reference(n, (const float *const *)in, (float *const *)out);
    } else {
        MCIR_ASSERT(desc->typed);   /* inference admits integers only where there is one */
        desc->typed(n, in, out);
    }
}
