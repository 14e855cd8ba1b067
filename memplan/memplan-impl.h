/*
 * memplan-impl.h — inside the memory planner: the instance a planner sees
 * (one pool, merged and aligned buffers, lifetimes as section indices, the
 * interval index), and the algorithms behind the table of memplan.h.
 * Tests reach the algorithms through it; nothing outside memplan/ and its
 * tests includes it.
 */
#ifndef MCIR_MEMPLAN_IMPL_H
#define MCIR_MEMPLAN_IMPL_H

#include "memplan/memplan.h"

/* A planner sees one pool's worth of buffers, already merged and aligned,
 * with lifetimes compressed to half-open section indices [lower, upper). */
struct mcir_memplan_instance {
    size_t n;
    const int64_t *size;      /* aligned sizes */
    const int64_t *alignment; /* per buffer, > 0 */
    const int32_t *lower, *upper; /* half-open, 0 <= lower < upper <= n_steps */
    int32_t n_steps;
    const int64_t *span; /* lifetime length in caller steps (ordering keys) */
    /* Explicit conflicts between buffers whose lifetimes do NOT overlap, as
     * CSR: adj[adj_start[i]..adj_start[i+1]); NULL: none.  Lifetime
     * overlaps are never listed (buffers all live at once would make n²
     * pairs): mcir_memplan_neighbours finds them from the interval index
     * below, in O(log n + answer). */
    const size_t *adj_start;
    const uint32_t *adj;
    bool has_extra_conflicts;
    /* Interval index; NULL (hand-built instances): neighbours by a scan. */
    const uint32_t *by_lower;    /* buffers in order of lower */
    const int32_t *lower_sorted; /* lower[by_lower[k]], ascending */
    size_t stab_leaves;          /* segment tree over sections: a power of two >= n_steps */
    const size_t *stab_start;    /* node v holds stab[stab_start[v]..stab_start[v+1]) */
    const uint32_t *stab;        /* buffers whose lifetime covers node v's range, canonically */
    const size_t *degree;        /* neighbours of each buffer (overlaps + explicit) */
    size_t max_degree;
    uint64_t n_pairs;            /* sum of degrees / 2 */
    int64_t capacity;    /* 0 = unbounded; a target the exact search aims at */
    int64_t lower_bound; /* largest live total at one step */
    double deadline;     /* mcir_memplan_now() value when search must stop */
    bool stop_when_fits; /* capacity > 0: any plan within it will do */
    /* mcir_memplan_options' progress report (NULL: none), and the search's
     * start and budget for it */
    void (*progress)(void *ctx, double seconds, double budget_s, int64_t nodes,
                     int64_t best_height);
    void *progress_ctx;
    double started, budget_s;
};

/* Writes every neighbour of buffer i (lifetime overlap or explicit
 * conflict) into out, which has room for degree[i] (or n) entries; returns
 * their number.  Order is unspecified. */
size_t mcir_memplan_neighbours(const mcir_memplan_instance *in, size_t i, uint32_t *out);

struct mcir_memplan_stats {
    bool optimal;        /* the returned height is proven minimal */
    int64_t nodes;       /* search nodes (exact) */
    const char *winner;  /* for `best`: the planner whose plan was kept */
};

/* The individual algorithms (also reachable through the table). */
int64_t mcir_memplan_plan_none(const mcir_memplan_instance *inst,
                               int64_t *offsets, mcir_memplan_stats *stats);
int64_t mcir_memplan_plan_greedy_size(const mcir_memplan_instance *inst,
                                      int64_t *offsets,
                                      mcir_memplan_stats *stats);
int64_t mcir_memplan_plan_greedy_conflict(const mcir_memplan_instance *inst,
                                          int64_t *offsets,
                                          mcir_memplan_stats *stats);
int64_t mcir_memplan_plan_greedy_breadth(const mcir_memplan_instance *inst,
                                         int64_t *offsets,
                                         mcir_memplan_stats *stats);
int64_t mcir_memplan_plan_exact(const mcir_memplan_instance *inst,
                                int64_t *offsets, mcir_memplan_stats *stats);
/* The exact search seeded with a valid plan `offsets` of height `height`
 * (the incumbent it must beat); returns the new height, never worse. */
int64_t mcir_memplan_plan_exact_from(const mcir_memplan_instance *inst,
                                     int64_t *offsets, int64_t height,
                                     mcir_memplan_stats *stats);
int64_t mcir_memplan_plan_best(const mcir_memplan_instance *inst,
                               int64_t *offsets, mcir_memplan_stats *stats);

/* Monotonic clock in seconds (deadlines). */
double mcir_memplan_now(void);

#endif /* MCIR_MEMPLAN_IMPL_H */
