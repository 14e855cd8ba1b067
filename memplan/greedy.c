/* greedy.c — the quick planners: `none` (no reuse) and the greedy
 * first-fit family (by size, by conflicts, by breadth).
 *
 * Invariant: a buffer is placed at the lowest aligned offset where it
 * overlaps no already placed neighbour (lifetime overlap or explicit
 * conflict, found by mcir_memplan_neighbours: no list of pairs is kept); the family members differ only in the order buffers are
 * visited, so each ordering is one comparison key.
 */
#include "memplan/memplan-impl.h"

#include <stdlib.h>
#include <string.h>

static int64_t greedy_align_up(int64_t x, int64_t a)
{
    int64_t r = x % a;
    return r ? x + (a - r) : x;
}

int64_t mcir_memplan_plan_none(const mcir_memplan_instance *inst,
                               int64_t *offsets, mcir_memplan_stats *stats)
{
    int64_t top = 0;
    for (size_t i = 0; i < inst->n; i++) {
        offsets[i] = greedy_align_up(top, inst->alignment[i]);
        top = offsets[i] + inst->size[i];
    }
    stats->optimal = top == inst->lower_bound;
    return top;
}

/* Visit order: descending (k1, k2, k3), then ascending index. */
typedef struct greedy_key {
    int64_t k1, k2, k3;
    size_t idx;
} greedy_key;

static int greedy_cmp_key(const void *a, const void *b)
{
    const greedy_key *x = a, *y = b;
    if (x->k1 != y->k1)
        return x->k1 > y->k1 ? -1 : 1;
    if (x->k2 != y->k2)
        return x->k2 > y->k2 ? -1 : 1;
    if (x->k3 != y->k3)
        return x->k3 > y->k3 ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

typedef struct greedy_span {
    int64_t begin, end;
} greedy_span;

static int greedy_cmp_span(const void *a, const void *b)
{
    const greedy_span *x = a, *y = b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

/* Places buffers in the order of `keys` (sorted here), each at the lowest
 * gap that fits.  Returns the height, or -1 when out of memory. */
static int64_t greedy_first_fit(const mcir_memplan_instance *inst,
                                greedy_key *keys, int64_t *offsets,
                                mcir_memplan_stats *stats)
{
    size_t n = inst->n, maxdeg = inst->degree ? inst->max_degree : n;
    qsort(keys, n, sizeof *keys, greedy_cmp_key);
    bool *placed = calloc(n ? n : 1, sizeof *placed);
    greedy_span *spans = malloc((maxdeg ? maxdeg : 1) * sizeof *spans);
    uint32_t *nb = malloc((maxdeg ? maxdeg : 1) * sizeof *nb);
    if (!placed || !spans || !nb) {
        free(placed);
        free(spans);
        free(nb);
        return -1;
    }
    int64_t height = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = keys[k].idx, ns = 0;
        size_t deg = mcir_memplan_neighbours(inst, i, nb);
        for (size_t e = 0; e < deg; e++) {
            uint32_t j = nb[e];
            if (placed[j])
                spans[ns++] = (greedy_span){offsets[j], offsets[j] + inst->size[j]};
        }
        qsort(spans, ns, sizeof *spans, greedy_cmp_span);
        int64_t at = 0;
        for (size_t s = 0; s < ns; s++) {
            int64_t x = greedy_align_up(at, inst->alignment[i]);
            if (x + inst->size[i] <= spans[s].begin)
                break;
            if (spans[s].end > at)
                at = spans[s].end;
        }
        offsets[i] = greedy_align_up(at, inst->alignment[i]);
        placed[i] = true;
        if (offsets[i] + inst->size[i] > height)
            height = offsets[i] + inst->size[i];
    }
    free(placed);
    free(spans);
    free(nb);
    stats->optimal = height == inst->lower_bound;
    return height;
}

int64_t mcir_memplan_plan_greedy_size(const mcir_memplan_instance *inst,
                                      int64_t *offsets,
                                      mcir_memplan_stats *stats)
{
    greedy_key *keys = malloc((inst->n ? inst->n : 1) * sizeof *keys);
    if (!keys)
        return -1;
    for (size_t i = 0; i < inst->n; i++)
        keys[i] = (greedy_key){inst->size[i], inst->span[i], 0, i};
    int64_t h = greedy_first_fit(inst, keys, offsets, stats);
    free(keys);
    return h;
}

int64_t mcir_memplan_plan_greedy_conflict(const mcir_memplan_instance *inst,
                                          int64_t *offsets,
                                          mcir_memplan_stats *stats)
{
    greedy_key *keys = malloc((inst->n ? inst->n : 1) * sizeof *keys);
    if (!keys)
        return -1;
    uint32_t *nb = inst->degree ? NULL : malloc((inst->n ? inst->n : 1) * sizeof *nb);
    if (!inst->degree && !nb) {
        free(keys);
        return -1;
    }
    for (size_t i = 0; i < inst->n; i++)
        keys[i] = (greedy_key){
            (int64_t)(inst->degree ? inst->degree[i] : mcir_memplan_neighbours(inst, i, nb)),
            inst->size[i], 0, i};
    free(nb);
    int64_t h = greedy_first_fit(inst, keys, offsets, stats);
    free(keys);
    return h;
}

/* Breadth of a buffer: the largest live total at a step of its lifetime —
 * buffers in the most crowded steps are the hardest to fit, so go first. */
int64_t mcir_memplan_plan_greedy_breadth(const mcir_memplan_instance *inst,
                                         int64_t *offsets,
                                         mcir_memplan_stats *stats)
{
    size_t n = inst->n, ns = (size_t)inst->n_steps;
    greedy_key *keys = malloc((n ? n : 1) * sizeof *keys);
    int64_t *live = calloc(ns + 1, sizeof *live);
    if (!keys || !live) {
        free(keys);
        free(live);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        live[inst->lower[i]] += inst->size[i];
        live[inst->upper[i]] -= inst->size[i];
    }
    for (size_t t = 1; t <= ns; t++)
        live[t] += live[t - 1];
    for (size_t i = 0; i < n; i++) {
        int64_t breadth = 0;
        for (int32_t t = inst->lower[i]; t < inst->upper[i]; t++)
            if (live[t] > breadth)
                breadth = live[t];
        keys[i] = (greedy_key){breadth, inst->size[i], inst->span[i], i};
    }
    int64_t h = greedy_first_fit(inst, keys, offsets, stats);
    free(keys);
    free(live);
    return h;
}
