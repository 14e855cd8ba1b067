/* exact.c — the exact planner: branch and bound over canonical
 * placements, after MiniMalloc (Moffitt, 2023).
 *
 * A canonical solution places buffers one at a time, each at the lowest
 * aligned offset above every placed neighbour (its "min offset"), in
 * non-decreasing order of (offset, preorder rank).  Every feasible packing
 * can be pushed down into a canonical one, so searching canonical sequences
 * is complete.  The decision search ("fits within target?") prunes with:
 *   - dominance: a buffer is not placed at or above the lowest top any
 *     unplaced buffer could reach (that one would leave a gap under it);
 *   - section inference: in every time section, the floor (highest placed
 *     top, at least the last offset and the lowest unplaced min offset) plus
 *     the unplaced sizes live there must stay within the target;
 *   - decomposition: when no unplaced buffer crosses a section boundary, the
 *     two sides are independent sub-problems, solved one after the other.
 * The optimiser around it tries the capacity, then the lower bound, then
 * bisects, each attempt with part of the remaining time, and keeps the best
 * greedy answer as the fallback.
 *
 * Invariant: between calls of exact_search every piece of state (offsets,
 * min offsets, section floors and totals, cut counts) is exactly restored;
 * a found solution lives only in `solution`.
 */
#include "memplan/memplan-impl.h"

#include <stdlib.h>
#include <string.h>

enum { EXACT_FOUND, EXACT_NOTFOUND, EXACT_STOP };

typedef struct exact_cand {
    int64_t off;
    int32_t rank;
    uint32_t idx;
} exact_cand;

typedef struct exact_undo {
    uint32_t idx;
    int64_t old;
} exact_undo;

typedef struct exact {
    const mcir_memplan_instance *inst;
    size_t n;
    int32_t ns;
    int64_t target;
    size_t *sec_start; /* members of section s: sec_buf[sec_start[s]..) */
    uint32_t *sec_buf;
    int64_t *floor, *total; /* highest placed top; unplaced bytes live */
    int32_t *cuts; /* unplaced buffers crossing boundary s|s+1 */
    /* Sections whose live set is a maximal clique: some buffer starts there
     * and some ends there.  Any other section's live set is contained in a
     * neighbour's, so its bound is implied and is not checked. */
    int32_t *cliques; /* their indices, ascending */
    int32_t hot_section; /* where the floor test failed last */
    size_t n_cliques;
    int64_t *minoff, *off, *solution; /* off < 0: unplaced */
    int32_t *rank;
    exact_undo *mundo, *fundo; /* min-offset and floor undo stacks */
    size_t mundo_n, fundo_n;
    size_t *adj_start; /* neighbours (overlaps and conflicts), CSR */
    uint32_t *adj;
    exact_cand *cand;
    size_t cand_n, cand_cap;
    uint32_t *list; /* partitions' buffer lists, stacked */
    size_t list_n, list_cap;
    int heuristic; /* which preorder (see exact_rank) */
    int64_t nodes, node_limit;
    double deadline;
    bool oom, timed_out;
    int64_t best;         /* the best height known, for the progress report */
    double next_report;   /* when the progress report is due */
} exact;

static int64_t exact_align_up(int64_t x, int64_t a)
{
    if (a == 1)
        return x;
    int64_t r = x % a;
    return r ? x + (a - r) : x;
}

static bool exact_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

static int exact_solve_part(exact *ex, size_t list_at, size_t count,
                            int32_t s0, int32_t s1);

/* Section inference over the clique sections in [s0, s1) after a placement
 * at `last_off`: the floor (the highest placed top there, at least the last
 * offset, at least the lowest min offset of an unplaced buffer there) plus
 * the unplaced bytes live there must fit the target. */
static bool exact_sections_ok(exact *ex, int32_t s0, int32_t s1,
                              int64_t last_off)
{
    size_t lo = 0, hi = ex->n_cliques;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ex->cliques[mid] < s0)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* Two passes: the cheap floor test fails most nodes before any
     * section's member list is scanned.  The section that failed last is
     * tried first: neighbouring nodes tend to fail at the same place. */
    int32_t hot = ex->hot_section;
    if (hot >= s0 && hot < s1 && ex->total[hot] > 0 &&
        (ex->floor[hot] > last_off ? ex->floor[hot] : last_off) +
                ex->total[hot] > ex->target)
        return false;
    for (size_t c = lo; c < ex->n_cliques && ex->cliques[c] < s1; c++) {
        int32_t s = ex->cliques[c];
        int64_t f = ex->floor[s] > last_off ? ex->floor[s] : last_off;
        if (ex->total[s] > 0 && f + ex->total[s] > ex->target) {
            ex->hot_section = s;
            return false;
        }
    }
    for (size_t c = lo; c < ex->n_cliques && ex->cliques[c] < s1; c++) {
        int32_t s = ex->cliques[c];
        if (ex->total[s] == 0)
            continue;
        int64_t f = ex->floor[s] > last_off ? ex->floor[s] : last_off;
        for (size_t k = ex->sec_start[s]; k < ex->sec_start[s + 1]; k++) {
            uint32_t b = ex->sec_buf[k];
            if (ex->off[b] < 0 && ex->minoff[b] > f &&
                ex->minoff[b] + ex->total[s] > ex->target) {
                /* Only the lowest unplaced min offset counts. */
                int64_t lowest = ex->minoff[b];
                for (size_t q = ex->sec_start[s]; q < ex->sec_start[s + 1];
                     q++) {
                    uint32_t o = ex->sec_buf[q];
                    if (ex->off[o] < 0 && ex->minoff[o] < lowest)
                        lowest = ex->minoff[o];
                }
                if (lowest + ex->total[s] > ex->target)
                    return false;
                break;
            }
        }
    }
    return true;
}

static int exact_cmp_cand(const void *a, const void *b)
{
    const exact_cand *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Depth-first search of the partition list[list_at..+count) over sections
 * [s0, s1), continuing a canonical sequence whose last placement was
 * (last_off, last_rank). */
static int exact_search(exact *ex, size_t list_at, size_t count, int32_t s0,
                        int32_t s1, int64_t last_off, int32_t last_rank)
{
    const mcir_memplan_instance *in = ex->inst;
    if (++ex->nodes > ex->node_limit)
        return EXACT_STOP;
    if ((ex->nodes & 255) == 0) {
        double now = mcir_memplan_now();
        if (now > ex->deadline) {
            ex->timed_out = true;
            return EXACT_STOP;
        }
        if (in->progress && now >= ex->next_report) {
            ex->next_report = now + 0.25;
            in->progress(in->progress_ctx, now - in->started, in->budget_s, ex->nodes, ex->best);
        }
    }
    int64_t min_height = INT64_MAX;
    bool any = false;
    for (size_t k = 0; k < count; k++) {
        uint32_t b = ex->list[list_at + k];
        if (ex->off[b] >= 0)
            continue;
        any = true;
        if (ex->minoff[b] + in->size[b] < min_height)
            min_height = ex->minoff[b] + in->size[b];
    }
    if (!any) {
        for (size_t k = 0; k < count; k++) {
            uint32_t b = ex->list[list_at + k];
            ex->solution[b] = ex->off[b];
        }
        return EXACT_FOUND;
    }
    size_t cbase = ex->cand_n;
    for (size_t k = 0; k < count; k++) {
        uint32_t b = ex->list[list_at + k];
        int64_t o = ex->minoff[b];
        if (ex->off[b] >= 0 || o >= min_height)
            continue;
        if (o < last_off || (o == last_off && ex->rank[b] < last_rank))
            continue;
        if (!exact_grow((void **)&ex->cand, &ex->cand_cap, ex->cand_n + 1,
                        sizeof *ex->cand)) {
            ex->oom = true;
            return EXACT_STOP;
        }
        ex->cand[ex->cand_n++] = (exact_cand){o, ex->rank[b], b};
    }
    size_t cend = ex->cand_n;
    qsort(ex->cand + cbase, cend - cbase, sizeof *ex->cand, exact_cmp_cand);
    int result = EXACT_NOTFOUND;
    for (size_t c = cbase; c < cend && result == EXACT_NOTFOUND; c++) {
        exact_cand cd = ex->cand[c];
        uint32_t b = cd.idx;
        int64_t top = cd.off + in->size[b];
        bool ok = true, hatless = true;
        ex->off[b] = cd.off;
        size_t mmark = ex->mundo_n, fmark = ex->fundo_n;
        for (size_t e = ex->adj_start[b]; e < ex->adj_start[b + 1]; e++) {
            uint32_t j = ex->adj[e];
            if (ex->off[j] >= 0 || in->size[j] == 0)
                continue;
            hatless = false;
            if (ex->minoff[j] >= top)
                continue;
            ex->mundo[ex->mundo_n++] = (exact_undo){j, ex->minoff[j]};
            ex->minoff[j] = exact_align_up(top, in->alignment[j]);
            if (ex->minoff[j] + in->size[j] > ex->target)
                ok = false;
        }
        bool split = false;
        for (int32_t s = in->lower[b]; s < in->upper[b]; s++) {
            ex->fundo[ex->fundo_n++] = (exact_undo){(uint32_t)s, ex->floor[s]};
            ex->floor[s] = top;
            ex->total[s] -= in->size[b];
            if (s + 1 < in->upper[b] && --ex->cuts[s] == 0)
                split = true;
        }
        if (ok && exact_sections_ok(ex, s0, s1, cd.off)) {
            if (split && !in->has_extra_conflicts) {
                /* Record what is placed; the independent sides go on. */
                for (size_t k = 0; k < count; k++) {
                    uint32_t p = ex->list[list_at + k];
                    if (ex->off[p] >= 0)
                        ex->solution[p] = ex->off[p];
                }
                result = exact_solve_part(ex, list_at, count, s0, s1);
            } else {
                result = exact_search(ex, list_at, count, s0, s1, cd.off,
                                      cd.rank);
            }
        }
        for (int32_t s = in->lower[b]; s < in->upper[b]; s++) {
            ex->total[s] += in->size[b];
            if (s + 1 < in->upper[b])
                ex->cuts[s]++;
        }
        while (ex->fundo_n > fmark) {
            exact_undo u = ex->fundo[--ex->fundo_n];
            ex->floor[u.idx] = u.old;
        }
        while (ex->mundo_n > mmark) {
            exact_undo u = ex->mundo[--ex->mundo_n];
            ex->minoff[u.idx] = u.old;
        }
        ex->off[b] = -1;
        /* Nothing unplaced overlaps b: it lands at this offset in every
         * completion, and every later candidate would have to come before
         * it — so if this failed, all the rest fail too. */
        if (hatless)
            break;
    }
    ex->cand_n = cbase;
    return result;
}

/* Preorder heuristics (MiniMalloc's WAT, TAW, TWA): W = lifetime length,
 * A = area (size x length), T = the largest unplaced total live during the
 * lifetime.  Ranks are computed per partition, when it is created, since
 * T depends on what is already placed. */
typedef struct exact_key {
    int64_t k[3];
    uint32_t idx;
} exact_key;

static int exact_cmp_key(const void *a, const void *b)
{
    const exact_key *x = a, *y = b;
    for (int i = 0; i < 3; i++)
        if (x->k[i] != y->k[i])
            return x->k[i] > y->k[i] ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Ranks the buffers list[at..at+count) under the current heuristic. */
static bool exact_rank(exact *ex, size_t at, size_t count)
{
    const mcir_memplan_instance *in = ex->inst;
    exact_key *keys = malloc((count ? count : 1) * sizeof *keys);
    if (!keys)
        return false;
    for (size_t k = 0; k < count; k++) {
        uint32_t i = ex->list[at + k];
        int64_t w = in->span[i], a, t = 0;
        if (__builtin_mul_overflow(w, in->size[i], &a))
            a = INT64_MAX;
        for (int32_t s = in->lower[i]; s < in->upper[i]; s++)
            if (ex->total[s] > t)
                t = ex->total[s];
        int64_t wat[3] = {w, a, t}, taw[3] = {t, a, w}, twa[3] = {t, w, a};
        const int64_t *src = ex->heuristic == 0   ? wat
                             : ex->heuristic == 1 ? taw
                                                  : twa;
        keys[k] = (exact_key){{src[0], src[1], src[2]}, i};
    }
    qsort(keys, count, sizeof *keys, exact_cmp_key);
    for (size_t r = 0; r < count; r++)
        ex->rank[keys[r].idx] = (int32_t)r;
    free(keys);
    return true;
}

/* Ranks a fresh partition and searches it; the ranks its buffers had in
 * the enclosing partition are restored afterwards, as that search may go
 * on if this one fails. */
static int exact_search_fresh(exact *ex, size_t at, size_t count, int32_t s0,
                              int32_t s1)
{
    int32_t *saved = malloc((count ? count : 1) * sizeof *saved);
    if (!saved) {
        ex->oom = true;
        return EXACT_STOP;
    }
    for (size_t k = 0; k < count; k++)
        saved[k] = ex->rank[ex->list[at + k]];
    int result = EXACT_STOP;
    if (exact_rank(ex, at, count))
        result = exact_search(ex, at, count, s0, s1, 0, -1);
    else
        ex->oom = true;
    for (size_t k = 0; k < count; k++)
        ex->rank[ex->list[at + k]] = saved[k];
    free(saved);
    return result;
}

/* Splits the unplaced buffers of a partition at the section boundaries no
 * unplaced buffer crosses, and solves each side on its own. */
static int exact_solve_part(exact *ex, size_t list_at, size_t count,
                            int32_t s0, int32_t s1)
{
    const mcir_memplan_instance *in = ex->inst;
    /* An explicit conflict may join the two sides of a cut: no split. */
    bool cut = false;
    for (int32_t s = s0; s + 1 < s1 && !cut && !in->has_extra_conflicts; s++)
        cut = ex->cuts[s] == 0;
    if (!cut)
        return exact_search_fresh(ex, list_at, count, s0, s1);
    size_t base = ex->list_n;
    int result = EXACT_FOUND;
    int32_t a = s0;
    while (a < s1 && result == EXACT_FOUND) {
        int32_t z = a + 1;
        while (z < s1 && ex->cuts[z - 1] != 0)
            z++;
        /* Sub-partition [a, z): the unplaced buffers that start there. */
        ex->list_n = base;
        for (size_t k = 0; k < count; k++) {
            uint32_t b = ex->list[list_at + k];
            if (ex->off[b] >= 0 || in->lower[b] < a || in->lower[b] >= z)
                continue;
            if (!exact_grow((void **)&ex->list, &ex->list_cap,
                            ex->list_n + 1, sizeof *ex->list)) {
                ex->oom = true;
                result = EXACT_STOP;
                break;
            }
            ex->list[ex->list_n++] = b;
        }
        if (result == EXACT_FOUND && ex->list_n > base)
            result = exact_search_fresh(ex, base, ex->list_n - base, a, z);
        a = z;
    }
    ex->list_n = base;
    return result;
}

static void exact_free(exact *ex)
{
    free(ex->sec_start);
    free(ex->sec_buf);
    free(ex->floor);
    free(ex->total);
    free(ex->cuts);
    free(ex->cliques);
    free(ex->minoff);
    free(ex->off);
    free(ex->solution);
    free(ex->rank);
    free(ex->mundo);
    free(ex->adj_start);
    free(ex->adj);
    free(ex->fundo);
    free(ex->cand);
    free(ex->list);
}

/* Sections, totals and cut counts of the whole instance; zero-size buffers
 * sit at offset 0 outside the search (they occupy no byte). */
static bool exact_init(exact *ex, const mcir_memplan_instance *in)
{
    memset(ex, 0, sizeof *ex);
    ex->inst = in;
    ex->n = in->n;
    ex->ns = in->n_steps;
    size_t n1 = in->n ? in->n : 1, ns1 = (size_t)in->n_steps + 1;
    size_t spans = 0;
    for (size_t i = 0; i < in->n; i++)
        if (in->size[i] > 0)
            spans += (size_t)(in->upper[i] - in->lower[i]);
    ex->sec_start = calloc(ns1 + 1, sizeof *ex->sec_start);
    ex->sec_buf = malloc((spans ? spans : 1) * sizeof *ex->sec_buf);
    ex->floor = calloc(ns1, sizeof *ex->floor);
    ex->total = calloc(ns1, sizeof *ex->total);
    ex->cuts = calloc(ns1, sizeof *ex->cuts);
    ex->cliques = malloc(ns1 * sizeof *ex->cliques);
    bool *starts = calloc(ns1, sizeof *starts);
    bool *ends = calloc(ns1, sizeof *ends);
    ex->minoff = calloc(n1, sizeof *ex->minoff);
    ex->off = malloc(n1 * sizeof *ex->off);
    ex->solution = calloc(n1, sizeof *ex->solution);
    ex->rank = calloc(n1, sizeof *ex->rank);
    /* The search walks neighbour lists in its innermost loop: it keeps
     * its own, which the pair bound above keeps within 2 * 2^23 entries. */
    ex->adj_start = calloc(n1 + 1, sizeof *ex->adj_start);
    uint32_t *nb = malloc((in->degree ? in->max_degree + 1 : n1) * sizeof *nb);
    if (ex->adj_start && nb) {
        for (size_t i = 0; i < in->n; i++)
            ex->adj_start[i + 1] = ex->adj_start[i] + mcir_memplan_neighbours(in, i, nb);
        ex->adj = malloc((ex->adj_start[in->n] + 1) * sizeof *ex->adj);
        for (size_t i = 0; ex->adj && i < in->n; i++)
            mcir_memplan_neighbours(in, i, ex->adj + ex->adj_start[i]);
    }
    free(nb);
    ex->mundo = malloc(((ex->adj ? ex->adj_start[in->n] : 0) + 1) * sizeof *ex->mundo);
    ex->fundo = malloc((spans + 1) * sizeof *ex->fundo);
    if (!ex->sec_start || !ex->sec_buf || !ex->floor || !ex->total ||
        !ex->cuts || !ex->cliques || !starts || !ends || !ex->minoff || !ex->off ||
        !ex->solution || !ex->rank || !ex->mundo || !ex->fundo || !ex->adj) {
        free(starts);
        free(ends);
        return false;
    }
    for (size_t i = 0; i < in->n; i++)
        if (in->size[i] > 0)
            starts[in->lower[i]] = true;
    for (size_t i = 0; i < in->n; i++)
        if (in->size[i] > 0)
            ends[in->upper[i] - 1] = true;
    for (int32_t s = 0; s < in->n_steps; s++)
        if (starts[s] && ends[s])
            ex->cliques[ex->n_cliques++] = s;
    free(starts);
    free(ends);
    for (size_t i = 0; i < in->n; i++) {
        ex->off[i] = in->size[i] > 0 ? -1 : 0;
        if (in->size[i] == 0)
            continue;
        for (int32_t s = in->lower[i]; s < in->upper[i]; s++) {
            ex->sec_start[s + 1]++;
            ex->total[s] += in->size[i];
            if (s + 1 < in->upper[i])
                ex->cuts[s]++;
        }
    }
    for (int32_t s = 0; s < in->n_steps; s++)
        ex->sec_start[s + 1] += ex->sec_start[s];
    size_t *fill = calloc(ns1, sizeof *fill);
    if (!fill)
        return false;
    for (size_t i = 0; i < in->n; i++) {
        if (in->size[i] == 0)
            continue;
        for (int32_t s = in->lower[i]; s < in->upper[i]; s++)
            ex->sec_buf[ex->sec_start[s] + fill[s]++] = (uint32_t)i;
    }
    free(fill);
    return true;
}

/* Decides whether everything fits within `target`; round robin over the
 * preorders with a doubling node limit, as one ordering may be lucky where
 * another is stuck.  Any NOTFOUND is a proof, whatever the order. */
static int exact_decide(exact *ex, int64_t target, double deadline)
{
    const mcir_memplan_instance *in = ex->inst;
    ex->target = target;
    ex->deadline = deadline;
    ex->timed_out = false;
    ex->list_n = 0;
    for (size_t i = 0; i < ex->n; i++) {
        if (in->size[i] > target)
            return EXACT_NOTFOUND;
        if (in->size[i] == 0)
            ex->solution[i] = 0;
        else if (!exact_grow((void **)&ex->list, &ex->list_cap, ex->list_n + 1,
                             sizeof *ex->list))
            return EXACT_STOP;
        else
            ex->list[ex->list_n++] = (uint32_t)i;
    }
    for (int32_t s = 0; s < ex->ns; s++)
        if (ex->total[s] > target)
            return EXACT_NOTFOUND;
    size_t count = ex->list_n;
    int64_t limit = (int64_t)ex->n + 64;
    for (;;) {
        limit *= 2;
        for (int h = 0; h < 3; h++) {
            ex->heuristic = h;
            ex->node_limit = ex->nodes + limit;
            int r = exact_solve_part(ex, 0, count, 0, ex->ns);
            ex->list_n = count;
            if (r != EXACT_STOP)
                return r;
            if (ex->timed_out || ex->oom)
                return EXACT_STOP;
        }
    }
}

static int64_t exact_height(const mcir_memplan_instance *in,
                            const int64_t *offsets)
{
    int64_t h = 0;
    for (size_t i = 0; i < in->n; i++)
        if (offsets[i] + in->size[i] > h)
            h = offsets[i] + in->size[i];
    return h;
}

int64_t mcir_memplan_plan_exact(const mcir_memplan_instance *in,
                                int64_t *offsets, mcir_memplan_stats *stats)
{
    static const mcir_memplan_plan_fn greedy[] = {
        mcir_memplan_plan_greedy_size, mcir_memplan_plan_greedy_conflict,
        mcir_memplan_plan_greedy_breadth};
    size_t n = in->n;
    int64_t *trial = malloc((n ? n : 1) * sizeof *trial);
    if (!trial)
        return -1;
    /* The fallback: the best greedy answer. */
    int64_t best = INT64_MAX;
    for (size_t g = 0; g < sizeof greedy / sizeof greedy[0]; g++) {
        mcir_memplan_stats st = {0};
        int64_t h = greedy[g](in, trial, &st);
        if (h < 0) {
            free(trial);
            return -1;
        }
        if (h < best) {
            best = h;
            memcpy(offsets, trial, n * sizeof *offsets);
        }
    }
    free(trial);
    return mcir_memplan_plan_exact_from(in, offsets, best, stats);
}

/* The search state holds one entry per (buffer, section) pair; past this
 * many the instance is far beyond what the search can finish in a budget
 * anyway, and the incumbent plan is returned as is. */
#define EXACT_MAX_SPANS ((size_t)1 << 26)
/* Likewise for lifetime overlaps: the search keeps neighbour lists and an
 * undo stack as long as them.  Past this many pairs (some 4 000 buffers
 * all live at once) the greedy plan is returned, unproven unless it meets
 * the lower bound: the planner's memory stays bounded (64 MiB here) where
 * the pairs grow as n². */
#define EXACT_MAX_PAIRS ((uint64_t)1 << 23)

int64_t mcir_memplan_plan_exact_from(const mcir_memplan_instance *in,
                                     int64_t *offsets, int64_t best,
                                     mcir_memplan_stats *stats)
{
    size_t n = in->n, spans = 0;
    stats->optimal = best == in->lower_bound;
    stats->nodes = 0;
    if (stats->optimal ||
        (in->stop_when_fits && in->capacity > 0 && best <= in->capacity))
        return best;
    for (size_t i = 0; i < n; i++)
        spans += (size_t)(in->upper[i] - in->lower[i]);
    if (spans > EXACT_MAX_SPANS || in->n_pairs > EXACT_MAX_PAIRS)
        return best;
    exact ex;
    if (!exact_init(&ex, in)) {
        exact_free(&ex);
        return -1;
    }
    int64_t lo = in->lower_bound, proven = in->lower_bound;
    bool first = true;
    /* With a capacity, fitting it comes first: it is what the caller needs. */
    ex.best = best;
    if (in->capacity > 0 && best > in->capacity && in->capacity >= lo) {
        int r = exact_decide(&ex, in->capacity, in->deadline);
        if (r == EXACT_FOUND) {
            memcpy(offsets, ex.solution, n * sizeof *offsets);
            best = exact_height(in, offsets);
        } else if (r == EXACT_NOTFOUND) {
            lo = proven = in->capacity + 1;
        }
    }
    if (in->stop_when_fits && in->capacity > 0 && best <= in->capacity)
        lo = best; /* the caller asked only for a fit */
    while (lo < best && !ex.oom) {
        ex.best = best;
        double now = mcir_memplan_now(), left = in->deadline - now;
        if (left <= 1e-3)
            break;
        int64_t mid = first ? lo : lo + (best - lo) / 2;
        first = false;
        int r = exact_decide(&ex, mid, now + left / 2);
        if (r == EXACT_FOUND) {
            memcpy(offsets, ex.solution, n * sizeof *offsets);
            best = exact_height(in, offsets);
        } else {
            if (r == EXACT_NOTFOUND && proven == lo)
                proven = mid + 1;
            lo = mid + 1;
        }
    }
    stats->nodes = ex.nodes;
    stats->optimal = proven >= best;
    bool oom = ex.oom;
    exact_free(&ex);
    return oom ? -1 : best;
}
