/*
 * ranks.c — the collectives of graphs with ranks (graph.json "ranks",
 * docs/graph-format.md "Ranks and collectives"): their reference kernels.
 *
 * With one rank a collective is the identity (mcir_ref_* below). With
 * several, the interpreter runs every rank's node in lockstep and hands
 * the collective all ranks' buffers at once (mcir_collective_run).
 */
#include <stdlib.h>
#include <string.h>

#include "mcir-impl.h"

static size_t value_size(const mcir_tensor *t) {
    return mcir_value_type_size(mcir_value_type_of(t->dtype));
}

static void identity_f32(const mcir_node *n, const float *const *in, float *const *out) {
    memcpy(out[0], in[0], sizeof(float) * (size_t)mcir_tensor_numel(n->inputs[0]));
}

static void identity_typed(const mcir_node *n, const void *const *in, void *const *out) {
    memcpy(out[0], in[0], value_size(n->inputs[0]) * (size_t)mcir_tensor_numel(n->inputs[0]));
}

void mcir_ref_ALL_REDUCE(const mcir_node *n, const float *const *in, float *const *out) {
    identity_f32(n, in, out);
}
void mcir_typed_ALL_REDUCE(const mcir_node *n, const void *const *in, void *const *out) {
    identity_typed(n, in, out);
}
void mcir_ref_ALL_GATHER(const mcir_node *n, const float *const *in, float *const *out) {
    identity_f32(n, in, out);
}
void mcir_typed_ALL_GATHER(const mcir_node *n, const void *const *in, void *const *out) {
    identity_typed(n, in, out);
}
void mcir_ref_REDUCE_SCATTER(const mcir_node *n, const float *const *in, float *const *out) {
    identity_f32(n, in, out);
}
void mcir_typed_REDUCE_SCATTER(const mcir_node *n, const void *const *in, void *const *out) {
    identity_typed(n, in, out);
}

typedef enum { RED_SUM, RED_MAX, RED_MIN } red_op;

static red_op reduction_of(const mcir_node *n) {
    const char *op = mcir_node_string(n, "op");
    return !strcmp(op, "max") ? RED_MAX : !strcmp(op, "min") ? RED_MIN : RED_SUM;
}

/* The reduction over the ranks of element i: in the ranks' order, f32
 * values summed in double (then rounded once by the interpreter). */
static void reduce_into(const mcir_tensor *x, red_op op, int ranks, const void *const *in,
                        void *out) {
    int64_t count = mcir_tensor_numel(x);
    if (mcir_value_type_of(x->dtype) == MCIR_VALUE_I64) {
        int64_t *o = out;
        for (int64_t i = 0; i < count; i++) {
            int64_t acc = ((const int64_t *)in[0])[i];
            for (int r = 1; r < ranks; r++) {
                int64_t v = ((const int64_t *)in[r])[i];
                acc = op == RED_SUM ? (int64_t)((uint64_t)acc + (uint64_t)v)
                    : op == RED_MAX ? (v > acc ? v : acc) : (v < acc ? v : acc);
            }
            o[i] = acc;
        }
        return;
    }
    float *o = out;
    for (int64_t i = 0; i < count; i++) {
        double acc = ((const float *)in[0])[i];
        for (int r = 1; r < ranks; r++) {
            double v = ((const float *)in[r])[i];
            acc = op == RED_SUM ? acc + v : op == RED_MAX ? (v > acc ? v : acc) : (v < acc ? v : acc);
        }
        o[i] = (float)acc;
    }
}

void mcir_collective_run(const mcir_node *n, int ranks, const void *const *in, void *const *out) {
    const mcir_tensor *x = n->inputs[0];
    size_t es = value_size(x);
    if (ranks <= 1) {
        identity_typed(n, in, out);
        return;
    }
    if (n->op == MCIR_OP_ALL_GATHER) {
        /* out = the ranks' x concatenated along axis: outer runs of
         * (axis extent x inner) from each rank in turn. */
        int axis;
        MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis));
        int64_t outer = 1, run = 1;
        for (int i = 0; i < axis; i++) outer *= x->shape[i];
        for (int i = axis; i < x->rank; i++) run *= x->shape[i];
        size_t bytes = (size_t)run * es;
        for (int r = 0; r < ranks; r++)   /* every rank gets the same */
            for (int64_t o = 0; o < outer; o++)
                for (int q = 0; q < ranks; q++)
                    memcpy((char *)out[r] + ((size_t)o * (size_t)ranks + (size_t)q) * bytes,
                           (const char *)in[q] + (size_t)o * bytes, bytes);
        return;
    }
    red_op op = reduction_of(n);
    if (n->op == MCIR_OP_ALL_REDUCE) {
        reduce_into(x, op, ranks, in, out[0]);
        for (int r = 1; r < ranks; r++) memcpy(out[r], out[0], es * (size_t)mcir_tensor_numel(x));
        return;
    }
    /* reduce_scatter: the whole reduction, then rank r's part along axis */
    MCIR_ASSERT(n->op == MCIR_OP_REDUCE_SCATTER);
    void *whole = malloc(es * (size_t)mcir_tensor_numel(x) + 1);
    MCIR_ASSERT(whole);
    reduce_into(x, op, ranks, in, whole);
    mcir_tensor part = *n->outputs[0];
    MCIR_ASSERT(mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &part.shard_axis));
    part.shard_parts = ranks;
    part.shard_blocks = 1;
    for (int r = 0; r < ranks; r++) mcir_tensor_take_part(&part, whole, es, r, out[r]);
    free(whole);
}
