/*
 * coll.c — the emulated device's collectives (runtime/coll_api.h): NCCL's
 * calls, done in memory at group_end, with the checks a real run cannot
 * make: every rank of a clique calls every collective, in the same order,
 * with the same kind, count, type and reduction (a rank that does not is a
 * hang: NCCL would wait for it forever), on device memory that holds what
 * is read (out-of-bounds, uninitialised).
 *
 * Values: sums of f16 / bf16 / f32 in double, in rank order, rounded once
 * (the reference interpreter's mcir_collective_run); integer sums wrap.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/emu-impl.h"
#include "mcir/mcir.h"
#include "runtime/coll_api.h"

enum { KIND_ALL_REDUCE, KIND_ALL_GATHER, KIND_REDUCE_SCATTER };
static const char *const kind_names[] = {"ncclAllReduce", "ncclAllGather", "ncclReduceScatter"};

typedef struct clique clique;
typedef struct member {
    clique *c;
    int rank;
} member;
struct clique {
    int n;
    member *members;
    /* ranks in other processes (comm_init_rank): members holds this
     * process's one, and each collective goes through remote */
    const mcir_coll_remote *remote;
    int local_rank;
};

typedef struct call {
    int kind;
    const void *send;
    void *recv;
    size_t count;   /* all_reduce: elements; all_gather: sent per rank; reduce_scatter: received per rank */
    int dtype, op;
    member *m;
} call;

static struct {
    int depth;
    call *calls;
    int n, cap;
    int last_error;
    long ran;   /* calls done (mcir_emu_collective_calls) */
} st;

long mcir_emu_collective_calls(void) { return st.ran; }

enum { OK = 0, INVALID_ARGUMENT = 4, INVALID_USAGE = 5 };

static int e_comm_init_all(void **comms, int ndev, const int *devlist) {
    (void)devlist;
    if (ndev < 1) return INVALID_ARGUMENT;
    clique *c = calloc(1, sizeof *c);
    MCIR_ASSERT(c);
    c->n = ndev;
    c->members = calloc((size_t)ndev, sizeof *c->members);
    MCIR_ASSERT(c->members);
    for (int i = 0; i < ndev; i++) {
        c->members[i] = (member){c, i};
        comms[i] = &c->members[i];
    }
    return OK;
}

/* One rank of a clique whose other ranks run in other processes: the id
 * holds a pointer to the process's mcir_coll_remote (coll_api.h). */
static int e_comm_init_rank(void **comm, int nranks, const void *id, int rank) {
    const mcir_coll_remote *remote;
    memcpy(&remote, id, sizeof remote);
    if (nranks < 1 || rank < 0 || rank >= nranks || !remote || !remote->exchange) return INVALID_ARGUMENT;
    clique *c = calloc(1, sizeof *c);
    MCIR_ASSERT(c);
    c->n = nranks;
    c->remote = remote;
    c->local_rank = rank;
    c->members = calloc(1, sizeof *c->members);
    MCIR_ASSERT(c->members);
    c->members[0] = (member){c, rank};
    *comm = &c->members[0];
    return OK;
}

/* The clique goes with its last member. */
static int e_comm_destroy(void *comm) {
    member *m = comm;
    if (!m) return INVALID_ARGUMENT;
    clique *c = m->c;
    m->c = NULL;
    for (int i = 0; i < (c->remote ? 1 : c->n); i++)
        if (c->members[i].c) return OK;
    free(c->members);
    free(c);
    return OK;
}

static size_t type_size(int dtype) {
    switch (dtype) {
    case MCIR_NCCL_INT8: case MCIR_NCCL_UINT8: return 1;
    case MCIR_NCCL_FLOAT16: case MCIR_NCCL_BFLOAT16: return 2;
    case MCIR_NCCL_INT32: case MCIR_NCCL_FLOAT32: return 4;
    case MCIR_NCCL_INT64: return 8;
    default: return 0;
    }
}

static double get(int dtype, const unsigned char *p) {
    switch (dtype) {
    case MCIR_NCCL_INT8: return (int8_t)*p;
    case MCIR_NCCL_UINT8: return *p;
    case MCIR_NCCL_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case MCIR_NCCL_INT64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case MCIR_NCCL_FLOAT16: { uint16_t h; memcpy(&h, p, 2); return mcir_f16_to_f32(h); }
    case MCIR_NCCL_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); return mcir_bf16_to_f32(h); }
    default: { float f; memcpy(&f, p, 4); return f; }
    }
}

static void put(int dtype, unsigned char *p, double v) {
    switch (dtype) {
    case MCIR_NCCL_INT8: case MCIR_NCCL_UINT8: *p = (unsigned char)(int64_t)v; break;
    case MCIR_NCCL_INT32: { int32_t x = (int32_t)(int64_t)v; memcpy(p, &x, 4); break; }
    case MCIR_NCCL_INT64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case MCIR_NCCL_FLOAT16: { uint16_t h = mcir_f32_to_f16((float)v); memcpy(p, &h, 2); break; }
    case MCIR_NCCL_BFLOAT16: { uint16_t h = mcir_f32_to_bf16((float)v); memcpy(p, &h, 2); break; }
    default: { float f = (float)v; memcpy(p, &f, 4); }
    }
}

/* Device bytes [p, p + bytes): the allocation and offset, or a finding. */
static const emu_mem *bytes_at(const call *c, const void *p, size_t bytes, bool write, size_t *off) {
    const emu_mem *m = emu_dev_find((uintptr_t)p, bytes, off);
    if (!m) {
        emu_dev_finding("out-of-bounds", "%s (rank %d of %d) %s %zu bytes at %p, which no allocation holds",
                        kind_names[c->kind], c->m->rank, c->m->c->n, write ? "writes" : "reads", bytes, p);
        return NULL;
    }
    if (!write && emu_dev_init_checked())
        for (size_t i = 0; i < bytes; i++)
            if (!m->init[*off + i]) {
                emu_dev_finding("uninitialised", "%s (rank %d of %d) reads byte %zu of '%s', which nothing wrote",
                                kind_names[c->kind], c->m->rank, c->m->c->n, i,
                                emu_dev_name_of((uintptr_t)p, NULL, NULL));
                return NULL;
            }
    return m;
}

/* One collective: calls[0..n) of one clique, one per rank, in rank order. */
static int run_one(call *const *by_rank, int n) {
    st.ran += n;
    const call *c0 = by_rank[0];
    size_t es = type_size(c0->dtype);
    if (!es) return INVALID_ARGUMENT;
    size_t in_count = c0->kind == KIND_REDUCE_SCATTER ? c0->count * (size_t)n : c0->count;
    size_t out_count = c0->kind == KIND_ALL_GATHER ? c0->count * (size_t)n : c0->kind == KIND_REDUCE_SCATTER ? c0->count
                                                                                                             : c0->count;
    const emu_mem **in = calloc((size_t)n, sizeof *in);
    size_t *in_off = calloc((size_t)n, sizeof *in_off);
    MCIR_ASSERT(in && in_off);
    int rc = OK;
    for (int r = 0; r < n && rc == OK; r++)
        if (!(in[r] = bytes_at(by_rank[r], by_rank[r]->send, in_count * es, false, &in_off[r]))) rc = INVALID_USAGE;
    unsigned char *result = NULL;
    if (rc == OK && c0->kind != KIND_ALL_GATHER) {   /* the reduction, whole */
        result = malloc(in_count * es + 1);
        MCIR_ASSERT(result);
        for (size_t i = 0; i < in_count; i++) {
            double acc = get(c0->dtype, in[0]->base + in_off[0] + i * es);
            for (int r = 1; r < n; r++) {
                double v = get(c0->dtype, in[r]->base + in_off[r] + i * es);
                acc = c0->op == MCIR_NCCL_MAX ? (v > acc ? v : acc) : c0->op == MCIR_NCCL_MIN ? (v < acc ? v : acc)
                                                                                              : acc + v;
            }
            put(c0->dtype, result + i * es, acc);
        }
    } else if (rc == OK) {   /* the ranks' buffers, rank by rank */
        result = malloc(out_count * es + 1);
        MCIR_ASSERT(result);
        for (int r = 0; r < n; r++) memcpy(result + (size_t)r * c0->count * es, in[r]->base + in_off[r], c0->count * es);
    }
    for (int r = 0; r < n && rc == OK; r++) {
        size_t off;
        const emu_mem *m = bytes_at(by_rank[r], by_rank[r]->recv, out_count * es, true, &off);
        if (!m) {
            rc = INVALID_USAGE;
            break;
        }
        const unsigned char *src = c0->kind == KIND_REDUCE_SCATTER ? result + (size_t)r * out_count * es : result;
        memmove(m->base + off, src, out_count * es);
        memset(m->init + off, 1, out_count * es);
    }
    free(result);
    free(in);
    free(in_off);
    return rc;
}

/* At the root of a remote exchange: every rank's send buffer combined as
 * run_one does (sums in double in rank order, rounded once). */
static bool e_combine(int kind, int dtype, int op, size_t count, int n, const void *const *ins, void *const *outs) {
    size_t es = type_size(dtype);
    if (!es) return false;
    size_t in_count = kind == KIND_REDUCE_SCATTER ? count * (size_t)n : count;
    size_t out_count = kind == KIND_ALL_GATHER ? count * (size_t)n : count;
    if (kind == KIND_ALL_GATHER) {
        for (int q = 0; q < n; q++)
            for (int r = 0; r < n; r++) memcpy((unsigned char *)outs[q] + (size_t)r * count * es, ins[r], count * es);
        return true;
    }
    unsigned char *result = malloc(in_count * es + 1);
    MCIR_ASSERT(result);
    for (size_t i = 0; i < in_count; i++) {
        double acc = get(dtype, (const unsigned char *)ins[0] + i * es);
        for (int r = 1; r < n; r++) {
            double v = get(dtype, (const unsigned char *)ins[r] + i * es);
            acc = op == MCIR_NCCL_MAX ? (v > acc ? v : acc) : op == MCIR_NCCL_MIN ? (v < acc ? v : acc) : acc + v;
        }
        put(dtype, result + i * es, acc);
    }
    for (int q = 0; q < n; q++)
        memcpy(outs[q], kind == KIND_REDUCE_SCATTER ? result + (size_t)q * out_count * es : result, out_count * es);
    free(result);
    return true;
}

/* A collective of this process's rank of a remote clique: its buffers
 * checked here, the values through the runtime's exchange. */
static int run_remote(const call *c0) {
    st.ran++;
    const clique *cq = c0->m->c;
    int n = cq->n;
    size_t es = type_size(c0->dtype);
    if (!es) return INVALID_ARGUMENT;
    size_t in_count = c0->kind == KIND_REDUCE_SCATTER ? c0->count * (size_t)n : c0->count;
    size_t out_count = c0->kind == KIND_ALL_GATHER ? c0->count * (size_t)n : c0->count;
    size_t in_off, out_off;
    const emu_mem *in = bytes_at(c0, c0->send, in_count * es, false, &in_off);
    if (!in) return INVALID_USAGE;
    const emu_mem *out = bytes_at(c0, c0->recv, out_count * es, true, &out_off);
    if (!out) return INVALID_USAGE;
    unsigned char *result = malloc(out_count * es + 1);
    MCIR_ASSERT(result);
    char why[600];
    bool ok = cq->remote->exchange(cq->remote->ctx, c0->kind, c0->dtype, c0->op, c0->count, in->base + in_off,
                                   in_count * es, result, out_count * es, e_combine, why, sizeof why);
    if (ok) {
        memmove(out->base + out_off, result, out_count * es);
        memset(out->init + out_off, 1, out_count * es);
    } else {
        emu_dev_finding("hang", "%s (rank %d of %d, one process a rank): %s", kind_names[c0->kind], cq->local_rank,
                        n, why);
    }
    free(result);
    return ok ? OK : INVALID_USAGE;
}

static const char *op_name(int op) { return op == MCIR_NCCL_MAX ? "max" : op == MCIR_NCCL_MIN ? "min" : "sum"; }

/* Every call of the group, clique by clique: the k-th calls of a clique's
 * ranks are one collective; a rank with fewer calls, or a k-th call that
 * differs, is a finding. */
static int flush(void) {
    int rc = OK;   /* (the findings were cleared when the group began: its order findings stay) */
    bool *done = calloc((size_t)st.n + 1, sizeof *done);
    MCIR_ASSERT(done);
    for (int i = 0; i < st.n && rc == OK; i++) {
        if (done[i]) continue;
        clique *c = st.calls[i].m->c;
        if (c->remote) {   /* this process's rank: its calls in order */
            for (int j = i; j < st.n; j++)
                if (!done[j] && st.calls[j].m->c == c) {
                    done[j] = true;
                    if (rc == OK) rc = run_remote(&st.calls[j]);
                }
            continue;
        }
        int n = c->n;
        /* per rank, its calls in order */
        int *count = calloc((size_t)n, sizeof *count);
        MCIR_ASSERT(count);
        for (int j = i; j < st.n; j++)
            if (!done[j] && st.calls[j].m->c == c) count[st.calls[j].m->rank]++;
        int most = 0;
        for (int r = 0; r < n; r++) most = count[r] > most ? count[r] : most;
        for (int r = 0; r < n && rc == OK; r++)
            if (count[r] < most) {
                char callers[256] = "";
                size_t p = 0;
                for (int q = 0; q < n && p < sizeof callers; q++)
                    if (count[q] == most) p += (size_t)snprintf(callers + p, sizeof callers - p, "%s%d", p ? ", " : "", q);
                emu_dev_finding("hang", "%s: rank %d of %d never calls it (ranks %s do, and wait for it forever): "
                                "every rank must make every collective", kind_names[st.calls[i].kind], r, n, callers);
                rc = INVALID_USAGE;
            }
        call **by_rank = calloc((size_t)n, sizeof *by_rank);
        MCIR_ASSERT(by_rank);
        for (int k = 0; k < most && rc == OK; k++) {
            for (int r = 0; r < n; r++) {   /* rank r's k-th call */
                int seen = 0;
                for (int j = i; j < st.n; j++)
                    if (!done[j] && st.calls[j].m->c == c && st.calls[j].m->rank == r && seen++ == k) by_rank[r] = &st.calls[j];
            }
            const call *a = by_rank[0];
            for (int r = 1; r < n && rc == OK; r++) {
                const call *b = by_rank[r];
                if (b->kind != a->kind || b->count != a->count || b->dtype != a->dtype ||
                    (a->kind != KIND_ALL_GATHER && b->op != a->op)) {
                    emu_dev_finding("hang", "collective %d of the group: rank 0 calls %s (%zu elements, type %d, %s), "
                                    "rank %d %s (%zu elements, type %d, %s): the ranks' collectives must agree",
                                    k, kind_names[a->kind], a->count, a->dtype, op_name(a->op), r, kind_names[b->kind],
                                    b->count, b->dtype, op_name(b->op));
                    rc = INVALID_USAGE;
                }
            }
            if (rc == OK) rc = run_one(by_rank, n);
        }
        for (int j = i; j < st.n; j++)
            if (st.calls[j].m->c == c) done[j] = true;
        free(by_rank);
        free(count);
    }
    free(done);
    st.n = 0;
    return rc;
}

static int e_group_start(void) {
    if (st.depth == 0 && st.n == 0) emu_dev_clear_findings();   /* a group's findings are its own, as a launch's */
    st.depth++;
    return OK;
}

static int e_group_end(void) {
    if (st.depth <= 0) return INVALID_USAGE;
    if (--st.depth > 0) return OK;
    return st.last_error = flush();
}

static int enqueue(int kind, const void *send, void *recv, size_t count, int dtype, int op, void *comm, void *stream) {
    member *m = comm;
    if (!m || !m->c) return INVALID_ARGUMENT;
    if (emu_dev_sticky()) return INVALID_USAGE;
    if (st.depth == 0 && st.n == 0) emu_dev_clear_findings();   /* a call alone is its own group */
    /* the emulated device runs every launch when it is made, so the buffers
     * are ready; on a GPU this call runs when its stream reaches it: the
     * order against the other streams is checked */
    size_t es = type_size(dtype), n = (size_t)m->c->n;
    size_t sent = kind == KIND_REDUCE_SCATTER ? count * n : count, got = kind == KIND_ALL_GATHER ? count * n : count;
    emu_touch t[2] = {{(uintptr_t)send, sent * es, false}, {(uintptr_t)recv, got * es, true}};
    char who[96];
    snprintf(who, sizeof who, "%s of rank %d", kind_names[kind], m->rank);
    bool ordered = emu_dev_stream_touch(stream, who, 2, t);
    if (st.n == st.cap) {
        st.cap = st.cap ? 2 * st.cap : 16;
        st.calls = realloc(st.calls, sizeof *st.calls * (size_t)st.cap);
        MCIR_ASSERT(st.calls);
    }
    st.calls[st.n++] = (call){kind, send, recv, count, dtype, op, m};
    int rc = st.depth == 0 ? flush() : OK;   /* outside a group: alone (a hang unless the clique has one rank) */
    return ordered ? rc : INVALID_USAGE;     /* made (the other ranks' calls meet it), and failed */
}

static int e_all_reduce(const void *send, void *recv, size_t count, int dtype, int op, void *comm, void *stream) {
    return enqueue(KIND_ALL_REDUCE, send, recv, count, dtype, op, comm, stream);
}

static int e_all_gather(const void *send, void *recv, size_t count, int dtype, void *comm, void *stream) {
    return enqueue(KIND_ALL_GATHER, send, recv, count, dtype, MCIR_NCCL_SUM, comm, stream);
}

static int e_reduce_scatter(const void *send, void *recv, size_t count, int dtype, int op, void *comm, void *stream) {
    return enqueue(KIND_REDUCE_SCATTER, send, recv, count, dtype, op, comm, stream);
}

static const char *e_error_string(int rc) {
    return rc == OK ? "no error" : rc == INVALID_ARGUMENT ? "invalid argument"
                                                          : "invalid usage (the emulated device's findings say why)";
}

const mcir_coll_api emu_coll_api = {
    .name = "emulated (in memory)",
    .comm_init_all = e_comm_init_all,
    .comm_destroy = e_comm_destroy,
    .group_start = e_group_start,
    .group_end = e_group_end,
    .all_reduce = e_all_reduce,
    .all_gather = e_all_gather,
    .reduce_scatter = e_reduce_scatter,
    .error_string = e_error_string,
    .comm_init_rank = e_comm_init_rank,
};
