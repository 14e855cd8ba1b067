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
    /* Graphs with ranks > 1: this env is a group of one env per rank
     * (rank_env[r], whose `rank` is r); sel is the rank the accessors
     * read (and write; -1: read rank 0, write the whole tensor). */
    int rank;
    int n_ranks;
    mcir_env **rank_env;
    int sel;
    /* One rank of an outside group (mcir_env_new_member): its collectives
     * go to group.run; NULL otherwise. */
    const mcir_group *member;
};

static mcir_env *env_new_rank(const mcir_graph *g, uint64_t seed, int rank) {
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
    e->rank = rank;
    e->n_ranks = 1;
    e->sel = -1;
    return e;
}

mcir_env *mcir_env_new(const mcir_graph *g, uint64_t seed) {
    mcir_env *e = env_new_rank(g, seed, 0);
    if (g->ranks > 1) {
        e->n_ranks = g->ranks;
        e->rank_env = calloc((size_t)g->ranks, sizeof *e->rank_env);
        MCIR_ASSERT(e->rank_env);
        for (int r = 0; r < g->ranks; r++) e->rank_env[r] = env_new_rank(g, seed, r);
    }
    return e;
}

mcir_env *mcir_env_new_member(const mcir_graph *g, uint64_t seed, const mcir_group *group) {
    MCIR_ASSERT(group && group->run && group->rank >= 0 && group->rank < g->ranks);
    mcir_env *e = env_new_rank(g, seed, group->rank);
    e->member = group;
    return e;
}

const mcir_group *mcir_env_member(const mcir_env *e) { return e->member; }

int mcir_env_ranks(const mcir_env *e) { return e->n_ranks; }

mcir_env *mcir_env_rank_env(mcir_env *e, int r) {
    MCIR_ASSERT(r >= 0 && r < e->n_ranks);
    return e->rank_env ? e->rank_env[r] : e;
}

void mcir_env_select_rank(mcir_env *e, int r) {
    MCIR_ASSERT(r >= -1 && r < e->n_ranks);
    e->sel = r;
}

/* The env the accessors use: a group's selected rank (rank 0 for reads
 * when none is). */
static mcir_env *cur(mcir_env *e) {
    return e->rank_env ? e->rank_env[e->sel > 0 ? e->sel : 0] : e;
}

uint64_t mcir_env_seed(const mcir_env *e) { return e->seed; }

void mcir_env_free(mcir_env *e) {
    if (!e) return;
    for (int r = 0; e->rank_env && r < e->n_ranks; r++) mcir_env_free(e->rank_env[r]);
    free(e->rank_env);
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

void mcir_env_keep_all(mcir_env *e, bool keep) {
    e->keep_all = keep;
    for (int r = 0; e->rank_env && r < e->n_ranks; r++) e->rank_env[r]->keep_all = keep;
}

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
    e = cur(e);
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
    e = cur(e);
    return in_env(e, t) && is_int(t) ? e->values[t->id] : NULL;
}

bool mcir_env_get_raw(mcir_env *e, const mcir_tensor *t, void *out) {
    e = cur(e);
    if (!in_env(e, t) || !e->values[t->id]) return false;
    int64_t n = mcir_tensor_numel(t);
    if (is_int(t)) mcir_values_from_int(t->dtype, e->values[t->id], out, n);
    else mcir_values_from_f32(t->dtype, e->values[t->id], out, n);
    return true;
}

bool mcir_env_compare(mcir_env *eg, const mcir_tensor *got, mcir_env *ew,
                      const mcir_tensor *want, mcir_compare_result *r) {
    eg = cur(eg);
    ew = cur(ew);
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

static void mcir_env_set_one(mcir_env *e, const mcir_tensor *t, const float *values);
static void mcir_env_set_int_one(mcir_env *e, const mcir_tensor *t, const int64_t *values);
static void mcir_env_set_raw_one(mcir_env *e, const mcir_tensor *t, const void *data);
typedef enum { SET_F32, SET_INT, SET_RAW } set_kind;

static void set_one(mcir_env *e, const mcir_tensor *t, const void *values, set_kind k) {
    if (k == SET_F32) mcir_env_set_one(e, t, values);
    else if (k == SET_INT) mcir_env_set_int_one(e, t, values);
    else mcir_env_set_raw_one(e, t, values);
}

/* Sets the whole tensor's values on a group: each rank its part of a
 * sharded tensor, every rank all of an unsharded one. */
static void group_set(mcir_env *e, const mcir_tensor *t, const void *values, size_t size,
                      set_kind k) {
    if (t->shard_axis < 0) {
        for (int r = 0; r < e->n_ranks; r++) set_one(e->rank_env[r], t, values, k);
        return;
    }
    void *part = malloc((size_t)mcir_tensor_numel(t) * size + 1);
    MCIR_ASSERT(part);
    for (int r = 0; r < e->n_ranks; r++) {
        mcir_tensor_take_part(t, values, size, r, part);
        set_one(e->rank_env[r], t, part, k);
    }
    free(part);
}

/* One rank of an outside group: a sharded tensor's whole values, of which
 * it keeps its part. */
static bool member_set(mcir_env *e, const mcir_tensor *t, const void *values, size_t size, set_kind k) {
    if (!e->member || t->shard_axis < 0) return false;
    void *part = malloc((size_t)mcir_tensor_numel(t) * size + 1);
    MCIR_ASSERT(part);
    mcir_tensor_take_part(t, values, size, e->rank, part);
    set_one(e, t, part, k);
    free(part);
    return true;
}

void mcir_env_set(mcir_env *e, const mcir_tensor *t, const float *values) {
    if (member_set(e, t, values, sizeof(float), SET_F32)) return;
    if (e->rank_env) {   /* a group: one rank's, or the whole tensor's parts */
        if (e->sel >= 0) {
            mcir_env_set(e->rank_env[e->sel], t, values);
            return;
        }
        group_set(e, t, values, sizeof(float), SET_F32);
        return;
    }
    mcir_env_set_one(e, t, values);
}

static void mcir_env_set_one(mcir_env *e, const mcir_tensor *t, const float *values) {
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
    if (member_set(e, t, values, sizeof(int64_t), SET_INT)) return;
    if (e->rank_env) {   /* a group: one rank's, or the whole tensor's parts */
        if (e->sel >= 0) {
            mcir_env_set_int(e->rank_env[e->sel], t, values);
            return;
        }
        group_set(e, t, values, sizeof(int64_t), SET_INT);
        return;
    }
    mcir_env_set_int_one(e, t, values);
}

static void mcir_env_set_int_one(mcir_env *e, const mcir_tensor *t, const int64_t *values) {
    int64_t count;
    void *v = env_slot(e, t, &count);
    MCIR_ASSERT(v);
    for (int64_t i = 0; i < count; i++) {
        if (is_int(t)) ((int64_t *)v)[i] = mcir_int_wrap(t->dtype, values[i]);
        else ((float *)v)[i] = mcir_int_to_float(t->dtype, values[i]);
    }
}

void mcir_env_set_raw(mcir_env *e, const mcir_tensor *t, const void *data) {
    if (member_set(e, t, data, mcir_dtype_size(t->dtype), SET_RAW)) return;
    if (e->rank_env) {   /* a group: one rank's, or the whole tensor's parts */
        if (e->sel >= 0) {
            mcir_env_set_raw(e->rank_env[e->sel], t, data);
            return;
        }
        group_set(e, t, data, mcir_dtype_size(t->dtype), SET_RAW);
        return;
    }
    mcir_env_set_raw_one(e, t, data);
}

static void mcir_env_set_raw_one(mcir_env *e, const mcir_tensor *t, const void *data) {
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
    int rank = c->e->rank;
    for (int64_t i = lo; i < hi; i++) {
        const mcir_tensor *t = c->pending[i];
        void *v = c->e->values[t->id];
        int64_t n = mcir_tensor_numel(t);
        uint64_t seed = t->kind == MCIR_TENSOR_INPUT ? c->e->seed : 0;
        if (t->kind == MCIR_TENSOR_WEIGHT && t->data) {
            const void *bytes = t->data;
            void *part = NULL;
            if (t->shard_axis >= 0) {   /* the data is the whole tensor: this rank's part */
                part = malloc((size_t)mcir_tensor_bytes(t) + 1);
                MCIR_ASSERT(part);
                mcir_tensor_take_part(t, t->data, mcir_dtype_size(t->dtype), rank, part);
                bytes = part;
            }
            if (is_int(t)) mcir_values_to_int(t->dtype, bytes, v, n);
            else mcir_values_to_f32(t->dtype, bytes, v, n);
            free(part);
        } else if (is_int(t)) {   /* seeded integers are small: exact in f32 */
            float *f = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
            MCIR_ASSERT(f);
            mcir_fill_seeded_part(t, seed, rank, f);
            for (int64_t k = 0; k < n; k++) ((int64_t *)v)[k] = (int64_t)f[k];
            free(f);
        } else {
            mcir_fill_seeded_part(t, seed, rank, v);
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

/* What a run keeps while it steps through the nodes. */
typedef struct run_state {
    int *last_use;     /* index of the last live node reading each tensor (-1: none) */
    const void **inp;  /* pointer arrays sized for the widest node */
    void **outp;
} run_state;

static void run_state_init(const mcir_graph *g, run_state *st) {
    st->last_use = malloc(sizeof(int) * (size_t)(g->n_tensors > 0 ? g->n_tensors : 1));
    MCIR_ASSERT(st->last_use);
    for (int i = 0; i < g->n_tensors; i++) st->last_use[i] = -1;
    int max_in = 1, max_out = 1;
    for (int k = 0; k < g->n_nodes; k++) {
        const mcir_node *n = g->nodes[k];
        if (n->dead) continue;
        for (int i = 0; i < n->n_inputs; i++) st->last_use[n->inputs[i]->id] = k;
        if (n->n_inputs > max_in) max_in = n->n_inputs;
        if (n->n_outputs > max_out) max_out = n->n_outputs;
    }
    st->inp = malloc(sizeof *st->inp * (size_t)max_in);
    st->outp = malloc(sizeof *st->outp * (size_t)max_out);
    MCIR_ASSERT(st->inp && st->outp);
}

static void run_state_free(run_state *st) {
    free(st->inp);
    free(st->outp);
    free(st->last_use);
}

/* Points st->inp / st->outp at node k's buffers in e (outputs allocated). */
static bool node_buffers(mcir_env *e, const mcir_node *n, run_state *st, mcir_diag *d) {
    for (int i = 0; i < n->n_inputs; i++) {
        st->inp[i] = e->values[n->inputs[i]->id];
        if (!st->inp[i]) {
            mcir_error(d, n->loc,
                       "node '%s' (%s): input '%s' has no value (graph not sorted, "
                       "or its producer is dead)",
                       n->name, mcir_op_name(n->op), n->inputs[i]->name);
            return false;
        }
    }
    for (int i = 0; i < n->n_outputs; i++) {
        int64_t count;
        st->outp[i] = env_slot(e, n->outputs[i], &count);
        if (!st->outp[i]) return too_large(n->outputs[i], d);
    }
    return true;
}

/* After node k ran in e: free intermediates whose last reader was this
 * node, and outputs nobody reads. Inputs, weights and graph outputs stay. */
static void node_done(mcir_env *e, const mcir_node *n, int k, const run_state *st) {
    for (int i = 0; i < n->n_outputs; i++)
        round_values(n->outputs[i]->dtype, e->values[n->outputs[i]->id],
                     mcir_tensor_numel(n->outputs[i]));
    if (e->keep_all) return;
    for (int i = 0; i < n->n_inputs + n->n_outputs; i++) {
        const mcir_tensor *t = i < n->n_inputs ? n->inputs[i] : n->outputs[i - n->n_inputs];
        if (!t->producer || t->is_output || t->kind == MCIR_TENSOR_OUTPUT) continue;
        if (st->last_use[t->id] == k || (i >= n->n_inputs && st->last_use[t->id] < 0))
            env_release(e, t->id);
    }
}

/* Runs node k in e (one rank). */
static bool run_node(mcir_env *e, const mcir_node *n, int k, run_state *st, mcir_diag *d) {
    if (!node_buffers(e, n, st, d)) return false;
    mcir_value_check_fn check = mcir_op_desc_of(n->op)->check;
    if (check && !check(n, (const void *const *)st->inp, d)) return false;
    mcir_ref_run_node_typed(n, (const void *const *)st->inp, (void *const *)st->outp);
    node_done(e, n, k, st);
    return true;
}

/* A collective node k across a group's ranks, in lockstep: every rank's
 * input is there before any rank's output is written. */
static bool run_collective(mcir_env *grp, const mcir_node *n, int k, run_state *st,
                           mcir_diag *d) {
    int R = grp->n_ranks;
    const void **in = malloc(sizeof *in * (size_t)R);
    void **out = malloc(sizeof *out * (size_t)R);
    MCIR_ASSERT(in && out);
    bool ok = true;
    for (int r = 0; ok && r < R; r++) {
        ok = node_buffers(grp->rank_env[r], n, st, d);
        if (ok) {
            in[r] = st->inp[0];
            out[r] = st->outp[0];
        }
    }
    if (ok) {
        mcir_collective_run(n, R, in, out);
        for (int r = 0; r < R; r++) node_done(grp->rank_env[r], n, k, st);
    }
    free(in);
    free(out);
    return ok;
}

/* A collective node k of one rank of an outside group: the group runs it
 * on this rank's buffers (every other rank calls it with theirs). */
static bool run_member_collective(mcir_env *e, const mcir_node *n, int k, run_state *st,
                                  mcir_diag *d) {
    if (!node_buffers(e, n, st, d)) return false;
    int before = d->n_errors;
    if (!e->member->run(e->member->ctx, n, st->inp[0], st->outp[0], d)) {
        if (d->n_errors == before)
            mcir_error(d, n->loc, "node '%s' (%s): the group's collective failed", n->name,
                       mcir_op_name(n->op));
        return false;
    }
    node_done(e, n, k, st);
    return true;
}

bool mcir_interp_run(const mcir_graph *g, mcir_env *e, mcir_diag *d) {
    MCIR_ASSERT(e->g == g && e->n == g->n_tensors);
    if (g->ranks > 1 && !e->rank_env && !e->member) {
        mcir_error(d, (mcir_loc){g->path, 0, 0},
                   "the graph has %d ranks but the values are one rank's (an env made for "
                   "another graph)", g->ranks);
        return false;
    }
    int R = e->rank_env ? e->n_ranks : 1;
    mcir_env **envs = e->rank_env ? e->rank_env : &e;
    for (int r = 0; r < R; r++)
        if (!load_leaves(g, envs[r], d)) return false;
    run_state st;
    run_state_init(g, &st);
    bool ok = true;
    for (int k = 0; ok && k < g->n_nodes; k++) {
        const mcir_node *n = g->nodes[k];
        if (n->dead) continue;
        if (R > 1 && (mcir_op_desc_of(n->op)->flags & MCIR_OPF_COLLECTIVE)) {
            ok = run_collective(e, n, k, &st, d);
            continue;
        }
        if (e->member && g->ranks > 1 && (mcir_op_desc_of(n->op)->flags & MCIR_OPF_COLLECTIVE)) {
            ok = run_member_collective(e, n, k, &st, d);
            continue;
        }
        for (int r = 0; ok && r < R; r++) ok = run_node(envs[r], n, k, &st, d);
    }
    run_state_free(&st);
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
