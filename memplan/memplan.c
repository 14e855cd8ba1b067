/* memplan.c — driver of the memory planner: validates a problem, merges
 * in-place chains into single blocks, splits the work over pools, builds the
 * per-pool instance the algorithms see, and keeps the planner table.
 *
 * Invariant: an instance handed to a planner is self-consistent — every
 * size is aligned to its buffer's alignment, lifetimes are compressed to
 * non-empty half-open section ranges, the adjacency lists hold every pair
 * that must not overlap, and the sum of all sizes plus alignments fits in
 * an int64_t with room to spare, so planners never check for overflow.
 */
#include "memplan/memplan-impl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Keeps every offset a planner can produce (at most the sum of sizes plus
 * padding) far from INT64_MAX, so planners add without checks. */
#define MEMPLAN_TOTAL_MAX (INT64_MAX / 4)

double mcir_memplan_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const mcir_memplan_planner memplan_planners[] = {
    {"best",
     "run every planner below (exact within the time limit), keep the "
     "smallest arena",
     mcir_memplan_plan_best},
    {"none", "no reuse: buffers back to back in input order (baseline)",
     mcir_memplan_plan_none},
    {"greedy-size",
     "largest first, each at the lowest gap that fits among placed "
     "overlapping buffers (TFLite greedy by size)",
     mcir_memplan_plan_greedy_size},
    {"greedy-conflict",
     "most conflicting buffers first, lowest gap that fits (TVM greedy by "
     "conflicts)",
     mcir_memplan_plan_greedy_conflict},
    {"greedy-breadth",
     "largest live total over the lifetime first, lowest gap that fits "
     "(TFLite greedy by breadth)",
     mcir_memplan_plan_greedy_breadth},
    {"exact",
     "branch and bound over canonical placements (MiniMalloc-style); "
     "optimal when it finishes within the time limit",
     mcir_memplan_plan_exact},
};

const mcir_memplan_planner *mcir_memplan_planners(size_t *count)
{
    *count = sizeof memplan_planners / sizeof memplan_planners[0];
    return memplan_planners;
}

const mcir_memplan_planner *mcir_memplan_planner_find(const char *name)
{
    size_t n;
    const mcir_memplan_planner *t = mcir_memplan_planners(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0)
            return &t[i];
    return NULL;
}

void mcir_memplan_planners_print(FILE *out)
{
    size_t n;
    const mcir_memplan_planner *t = mcir_memplan_planners(&n);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "  %-16s %s\n", t[i].name, t[i].description);
}

/* `best`: XLA's heap simulator keeps the best of several heuristics; here
 * the best greedy plan then seeds the exact search, which proves
 * optimality when it can and only ever improves on it. */
int64_t mcir_memplan_plan_best(const mcir_memplan_instance *inst,
                               int64_t *offsets, mcir_memplan_stats *stats)
{
    static const char *const greedy[] = {"greedy-size", "greedy-conflict",
                                         "greedy-breadth"};
    int64_t *trial = malloc((inst->n ? inst->n : 1) * sizeof *trial);
    if (!trial)
        return -1;
    int64_t best = INT64_MAX;
    stats->winner = NULL;
    for (size_t k = 0; k < sizeof greedy / sizeof greedy[0]; k++) {
        const mcir_memplan_planner *p = mcir_memplan_planner_find(greedy[k]);
        mcir_memplan_stats st = {0};
        int64_t h = p->plan(inst, trial, &st);
        if (h < 0) {
            free(trial);
            return -1;
        }
        if (h < best) {
            best = h;
            memcpy(offsets, trial, inst->n * sizeof *offsets);
            stats->winner = p->name;
        }
    }
    free(trial);
    int64_t h = mcir_memplan_plan_exact_from(inst, offsets, best, stats);
    if (h < 0)
        return -1;
    if (h < best)
        stats->winner = "exact";
    return h;
}

/* ---- Problem validation and in-place merging. --------------------------- */

static void memplan_message(mcir_memplan_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
}

static const char *memplan_name(const mcir_memplan_buffer *b, size_t i,
                                char *buf, size_t n)
{
    if (b->name)
        return b->name;
    snprintf(buf, n, "#%zu", i);
    return buf;
}

static int64_t memplan_gcd(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Rounds x up to a multiple of a; false on overflow. */
static bool memplan_align_up(int64_t x, int64_t a, int64_t *out)
{
    int64_t r = x % a;
    if (r == 0) {
        *out = x;
        return true;
    }
    return !__builtin_add_overflow(x, a - r, out);
}

/* One block of memory to place: a buffer, or an in-place chain merged. */
typedef struct memplan_group {
    int64_t size, alignment, first, last;
} memplan_group;

typedef struct memplan_prep {
    size_t n_groups;
    size_t *group_of;     /* buffer -> group */
    memplan_group *groups;
} memplan_prep;

static void memplan_prep_free(memplan_prep *p)
{
    free(p->group_of);
    free(p->groups);
    memset(p, 0, sizeof *p);
}

/* Validates the buffers and merges in-place chains.  Returns OK, INVALID
 * (with a message) or NOMEM. */
static mcir_memplan_status memplan_prepare(const mcir_memplan_problem *pb,
                                           memplan_prep *prep,
                                           mcir_memplan_result *r)
{
    size_t n = pb->n_buffers;
    char n1[32], n2[32];
    memset(prep, 0, sizeof *prep);
    if (pb->alignment < 0) {
        memplan_message(r, "default alignment %lld is negative",
                        (long long)pb->alignment);
        return MCIR_MEMPLAN_INVALID;
    }
    int64_t def_align = pb->alignment > 0 ? pb->alignment : 1;
    prep->group_of = malloc((n ? n : 1) * sizeof *prep->group_of);
    prep->groups = calloc(n ? n : 1, sizeof *prep->groups);
    size_t *taken_by = malloc((n ? n : 1) * sizeof *taken_by);
    if (!prep->group_of || !prep->groups || !taken_by) {
        free(taken_by);
        memplan_prep_free(prep);
        return MCIR_MEMPLAN_NOMEM;
    }
    for (size_t i = 0; i < n; i++)
        taken_by[i] = SIZE_MAX;
    mcir_memplan_status st = MCIR_MEMPLAN_INVALID;
    for (size_t i = 0; i < n; i++) {
        const mcir_memplan_buffer *b = &pb->buffers[i];
        const char *nm = memplan_name(b, i, n1, sizeof n1);
        if (b->size < 0) {
            memplan_message(r, "buffer '%s': negative size %lld", nm,
                            (long long)b->size);
            goto out;
        }
        if (b->alignment < 0) {
            memplan_message(r, "buffer '%s': negative alignment %lld", nm,
                            (long long)b->alignment);
            goto out;
        }
        if (b->first > b->last || b->last == INT64_MAX) {
            memplan_message(r, "buffer '%s': lifetime %lld..%lld is empty",
                            nm, (long long)b->first, (long long)b->last);
            goto out;
        }
        if (b->share_with == -1)
            continue;
        if (b->share_with < 0 || (uint64_t)b->share_with >= n ||
            (size_t)b->share_with == i) {
            memplan_message(r, "buffer '%s': share_with %lld is not another "
                            "buffer", nm, (long long)b->share_with);
            goto out;
        }
        size_t a = (size_t)b->share_with;
        const mcir_memplan_buffer *ab = &pb->buffers[a];
        const char *an = memplan_name(ab, a, n2, sizeof n2);
        if (ab->last != b->first) {
            memplan_message(r, "buffer '%s' cannot take over '%s': '%s' dies "
                            "at step %lld, '%s' is born at step %lld", nm, an,
                            an, (long long)ab->last, nm, (long long)b->first);
            goto out;
        }
        if (b->size > ab->size) {
            memplan_message(r, "buffer '%s' (%lld bytes) cannot take over "
                            "smaller '%s' (%lld bytes)", nm,
                            (long long)b->size, an, (long long)ab->size);
            goto out;
        }
        if (taken_by[a] != SIZE_MAX) {
            /* Both would be born at A's last step at A's offset. */
            memplan_message(r, "buffers '%s' and '%s' both take over '%s'",
                            memplan_name(&pb->buffers[taken_by[a]],
                                         taken_by[a], n2, sizeof n2),
                            nm, an);
            goto out;
        }
        taken_by[a] = i;
    }
    /* Roots are buffers that take over nobody; follow chains to them. */
    size_t ng = 0;
    for (size_t i = 0; i < n; i++)
        prep->group_of[i] = SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        if (pb->buffers[i].share_with == -1)
            prep->group_of[i] = ng++;
    for (size_t i = 0; i < n; i++) {
        size_t j = i, steps = 0;
        while (prep->group_of[j] == SIZE_MAX) {
            j = (size_t)pb->buffers[j].share_with;
            if (++steps > n) {
                memplan_message(r, "buffer '%s': in-place chain is a cycle",
                                memplan_name(&pb->buffers[i], i, n1,
                                             sizeof n1));
                goto out;
            }
        }
        prep->group_of[i] = prep->group_of[j];
    }
    for (size_t g = 0; g < ng; g++) {
        prep->groups[g].alignment = 1;
        prep->groups[g].first = INT64_MAX;
        prep->groups[g].last = INT64_MIN;
    }
    for (size_t i = 0; i < n; i++) {
        const mcir_memplan_buffer *b = &pb->buffers[i];
        memplan_group *g = &prep->groups[prep->group_of[i]];
        int64_t al = b->alignment ? b->alignment : def_align;
        int64_t l = al / memplan_gcd(g->alignment, al);
        int64_t size;
        if (__builtin_mul_overflow(g->alignment, l, &g->alignment) ||
            g->alignment > MEMPLAN_TOTAL_MAX ||
            !memplan_align_up(b->size, al, &size)) {
            memplan_message(r, "buffer '%s': size or alignment overflows",
                            memplan_name(b, i, n1, sizeof n1));
            goto out;
        }
        if (size > g->size)
            g->size = size;
        if (b->first < g->first)
            g->first = b->first;
        if (b->last > g->last)
            g->last = b->last;
    }
    int64_t total = 0;
    for (size_t g = 0; g < ng; g++) {
        memplan_group *gr = &prep->groups[g];
        if (!memplan_align_up(gr->size, gr->alignment, &gr->size) ||
            __builtin_add_overflow(total, gr->size, &total) ||
            __builtin_add_overflow(total, gr->alignment, &total) ||
            total > MEMPLAN_TOTAL_MAX) {
            memplan_message(r, "the total size of the buffers overflows");
            goto out;
        }
    }
    for (size_t c = 0; c < pb->n_conflicts; c++) {
        const mcir_memplan_conflict *cf = &pb->conflicts[c];
        if (cf->a >= n || cf->b >= n) {
            memplan_message(r, "conflict %zu names buffer %zu, there are %zu",
                            c, cf->a >= n ? cf->a : cf->b, n);
            goto out;
        }
        if (prep->group_of[cf->a] == prep->group_of[cf->b]) {
            memplan_message(r, "buffers '%s' and '%s' conflict but share "
                            "memory in place",
                            memplan_name(&pb->buffers[cf->a], cf->a, n1,
                                         sizeof n1),
                            memplan_name(&pb->buffers[cf->b], cf->b, n2,
                                         sizeof n2));
            goto out;
        }
    }
    prep->n_groups = ng;
    st = MCIR_MEMPLAN_OK;
out:
    free(taken_by);
    if (st != MCIR_MEMPLAN_OK)
        memplan_prep_free(prep);
    return st;
}

/* ---- Per-pool instances. ------------------------------------------------ */

typedef struct memplan_inst_store {
    mcir_memplan_instance inst;
    int64_t *size, *alignment;
    int32_t *lower, *upper;
    int64_t *span;
    size_t stab_leaves;
    size_t *adj_start;
    uint32_t *adj;
    uint32_t *by_lower, *stab;
    int32_t *lower_sorted;
    size_t *stab_start, *degree;
} memplan_inst_store;

static void memplan_inst_free(memplan_inst_store *s)
{
    free(s->size);
    free(s->alignment);
    free(s->lower);
    free(s->upper);
    free(s->span);
    free(s->adj_start);
    free(s->adj);
    free(s->by_lower);
    free(s->stab);
    free(s->lower_sorted);
    free(s->stab_start);
    free(s->degree);
    memset(s, 0, sizeof *s);
}

static int memplan_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int memplan_cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* How many of the ascending v[0..n) are below x. */
static size_t memplan_count_below(const int32_t *v, size_t n, int32_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int32_t memplan_step_index(const int64_t *pts, size_t n, int64_t v)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pts[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (int32_t)lo;
}

/* qsort has no context argument; the sweep sorts (lower, index) pairs. */
typedef struct memplan_key {
    int64_t key;
    uint32_t idx;
} memplan_key;

static int memplan_cmp_key(const void *a, const void *b)
{
    const memplan_key *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* The interval index of an instance: buffers by birth, and a segment tree
 * over the sections in which every lifetime is stored at its O(log)
 * canonical nodes.  O(n log n) memory, whatever the number of overlaps.
 * Also each buffer's number of lifetime overlaps (explicit conflicts are
 * added by the caller). */
static bool memplan_index_build(memplan_inst_store *s, const memplan_key *keys, size_t m,
                                int32_t n_sec)
{
    size_t m1 = m ? m : 1, leaves = 1;
    while (leaves < (size_t)n_sec)
        leaves *= 2;
    s->stab_leaves = leaves;
    s->by_lower = malloc(m1 * sizeof *s->by_lower);
    s->lower_sorted = malloc(m1 * sizeof *s->lower_sorted);
    s->degree = calloc(m1, sizeof *s->degree);
    s->stab_start = calloc(2 * leaves + 2, sizeof *s->stab_start);
    int32_t *upper_sorted = malloc(m1 * sizeof *upper_sorted);
    bool ok = false;
    if (!s->by_lower || !s->lower_sorted || !s->degree || !s->stab_start || !upper_sorted)
        goto out;
    for (size_t k = 0; k < m; k++) {
        s->by_lower[k] = keys[k].idx;
        s->lower_sorted[k] = s->lower[keys[k].idx];
        upper_sorted[k] = s->upper[k];
    }
    qsort(upper_sorted, m, sizeof *upper_sorted, memplan_cmp_i32);
    /* overlaps of i: born before i dies, minus those dead when i is born */
    for (size_t i = 0; i < m; i++) {
        size_t born = memplan_count_below(s->lower_sorted, m, s->upper[i]);
        size_t dead = memplan_count_below(upper_sorted, m, s->lower[i] + 1);
        s->degree[i] = born - dead - 1;
    }
    size_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < m; i++)
            for (size_t a = leaves + (size_t)s->lower[i], b = leaves + (size_t)s->upper[i];
                 a < b; a >>= 1, b >>= 1) {
                if (a & 1) {
                    if (pass == 0)
                        s->stab_start[a + 1]++;
                    else
                        s->stab[s->stab_start[a] + upper_sorted[a]++] = (uint32_t)i;
                    a++;
                }
                if (b & 1) {
                    --b;
                    if (pass == 0)
                        s->stab_start[b + 1]++;
                    else
                        s->stab[s->stab_start[b] + upper_sorted[b]++] = (uint32_t)i;
                }
            }
        if (pass == 0) {
            for (size_t v = 0; v < 2 * leaves + 1; v++)
                s->stab_start[v + 1] += s->stab_start[v];
            total = s->stab_start[2 * leaves + 1];
            s->stab = malloc((total ? total : 1) * sizeof *s->stab);
            free(upper_sorted); /* reused as the fill counters, per node */
            upper_sorted = calloc(2 * leaves + 1, sizeof *upper_sorted);
            if (!s->stab || !upper_sorted)
                goto out;
        }
    }
    ok = true;
out:
    free(upper_sorted);
    return ok;
}

size_t mcir_memplan_neighbours(const mcir_memplan_instance *in, size_t i, uint32_t *out)
{
    size_t k = 0;
    if (!in->by_lower) {
        for (size_t j = 0; j < in->n; j++)
            if (j != i && in->lower[j] < in->upper[i] && in->lower[i] < in->upper[j])
                out[k++] = (uint32_t)j;
    } else {
        /* born while i lives: a run of the birth order */
        for (size_t r = memplan_count_below(in->lower_sorted, in->n, in->lower[i]);
             r < in->n && in->lower_sorted[r] < in->upper[i]; r++)
            if (in->by_lower[r] != i)
                out[k++] = in->by_lower[r];
        /* born before i and still live at its birth: the lifetimes stored
         * on the path from the leaf of that section to the root */
        for (size_t v = in->stab_leaves + (size_t)in->lower[i]; v >= 1; v >>= 1)
            for (size_t e = in->stab_start[v]; e < in->stab_start[v + 1]; e++)
                if (in->lower[in->stab[e]] < in->lower[i])
                    out[k++] = in->stab[e];
    }
    if (in->adj_start)
        for (size_t e = in->adj_start[i]; e < in->adj_start[i + 1]; e++)
            out[k++] = in->adj[e];
    return k;
}

/* Builds the instance of the groups `members[0..m)`; `local` maps a group
 * to its index in the instance (SIZE_MAX when absent). */
static bool memplan_inst_build(const mcir_memplan_problem *pb,
                               const memplan_prep *prep, const size_t *members,
                               size_t m, size_t *local, int64_t capacity,
                               memplan_inst_store *s)
{
    memset(s, 0, sizeof *s);
    size_t m1 = m ? m : 1;
    int64_t *pts = malloc(2 * m1 * sizeof *pts);
    memplan_key *keys = malloc(m1 * sizeof *keys);
    size_t *deg = calloc(m1 + 1, sizeof *deg);
    s->size = malloc(m1 * sizeof *s->size);
    s->alignment = malloc(m1 * sizeof *s->alignment);
    s->lower = malloc(m1 * sizeof *s->lower);
    s->upper = malloc(m1 * sizeof *s->upper);
    s->span = malloc(m1 * sizeof *s->span);
    s->adj_start = calloc(m1 + 1, sizeof *s->adj_start);
    uint32_t *pairs = NULL;
    size_t n_pairs = 0, cap_pairs = 0;
    bool ok = false;
    if (!pts || !keys || !deg || !s->size || !s->alignment || !s->lower ||
        !s->upper || !s->span || !s->adj_start)
        goto out;
    for (size_t k = 0; k < m; k++) {
        const memplan_group *g = &prep->groups[members[k]];
        pts[2 * k] = g->first;
        pts[2 * k + 1] = g->last + 1;
    }
    qsort(pts, 2 * m, sizeof *pts, memplan_cmp_i64);
    size_t np = 0;
    for (size_t k = 0; k < 2 * m; k++)
        if (np == 0 || pts[np - 1] != pts[k])
            pts[np++] = pts[k];
    for (size_t k = 0; k < m; k++) {
        const memplan_group *g = &prep->groups[members[k]];
        s->size[k] = g->size;
        s->alignment[k] = g->alignment;
        /* Saturates on absurd lifetimes; it only orders heuristics. */
        if (__builtin_sub_overflow(g->last, g->first, &s->span[k]) ||
            s->span[k] == INT64_MAX)
            s->span[k] = INT64_MAX - 1;
        s->span[k]++;
        s->lower[k] = memplan_step_index(pts, np, g->first);
        s->upper[k] = memplan_step_index(pts, np, g->last + 1);
        keys[k].key = s->lower[k];
        keys[k].idx = (uint32_t)k;
    }
    /* Lifetime overlaps are not listed: an index answers them (see
     * mcir_memplan_neighbours).  Buffers in order of birth: */
    qsort(keys, m, sizeof *keys, memplan_cmp_key);
    int32_t n_sec = np > 0 ? (int32_t)np - 1 : 0;
    if (!memplan_index_build(s, keys, m, n_sec))
        goto out;
    bool extra = false;
    for (size_t c = 0; c < pb->n_conflicts; c++) {
        size_t ga = local[prep->group_of[pb->conflicts[c].a]];
        size_t gb = local[prep->group_of[pb->conflicts[c].b]];
        if (ga == SIZE_MAX || gb == SIZE_MAX)
            continue;
        if (s->lower[ga] < s->upper[gb] && s->lower[gb] < s->upper[ga])
            continue; /* already a lifetime overlap */
        if (n_pairs + 2 > cap_pairs) {
            cap_pairs = cap_pairs ? 2 * cap_pairs : 1024;
            uint32_t *np2 = realloc(pairs, cap_pairs * sizeof *pairs);
            if (!np2)
                goto out;
            pairs = np2;
        }
        pairs[n_pairs++] = (uint32_t)ga;
        pairs[n_pairs++] = (uint32_t)gb;
        extra = true;
    }
    for (size_t k = 0; k < n_pairs; k++) {
        deg[pairs[k]]++;
        s->degree[pairs[k]]++;
    }
    for (size_t k = 0; k < m; k++)
        s->adj_start[k + 1] = s->adj_start[k] + deg[k];
    s->adj = malloc((n_pairs ? n_pairs : 1) * sizeof *s->adj);
    if (!s->adj)
        goto out;
    memset(deg, 0, m1 * sizeof *deg);
    for (size_t k = 0; k < n_pairs; k += 2) {
        uint32_t i = pairs[k], j = pairs[k + 1];
        s->adj[s->adj_start[i] + deg[i]++] = j;
        s->adj[s->adj_start[j] + deg[j]++] = i;
    }
    /* Lower bound: the largest live total over the sections. */
    int32_t n_steps = np > 0 ? (int32_t)np - 1 : 0;
    int64_t *live = calloc((size_t)n_steps + 1, sizeof *live);
    if (!live)
        goto out;
    for (size_t k = 0; k < m; k++) {
        live[s->lower[k]] += s->size[k];
        live[s->upper[k]] -= s->size[k];
    }
    int64_t run = 0, lb = 0;
    for (int32_t t = 0; t < n_steps; t++) {
        run += live[t];
        if (run > lb)
            lb = run;
    }
    free(live);
    size_t max_degree = 0;
    uint64_t sum_degree = 0;
    for (size_t k = 0; k < m; k++) {
        if (s->degree[k] > max_degree)
            max_degree = s->degree[k];
        sum_degree += s->degree[k];
    }
    s->inst = (mcir_memplan_instance){
        .n = m,
        .size = s->size,
        .alignment = s->alignment,
        .lower = s->lower,
        .upper = s->upper,
        .n_steps = n_steps,
        .span = s->span,
        .adj_start = s->adj_start,
        .adj = s->adj,
        .has_extra_conflicts = extra,
        .by_lower = s->by_lower,
        .lower_sorted = s->lower_sorted,
        .stab_leaves = s->stab_leaves,
        .stab_start = s->stab_start,
        .stab = s->stab,
        .degree = s->degree,
        .max_degree = max_degree,
        .n_pairs = sum_degree / 2,
        .capacity = capacity,
        .lower_bound = lb,
    };
    ok = true;
out:
    free(pts);
    free(keys);
    free(deg);
    free(pairs);
    if (!ok)
        memplan_inst_free(s);
    return ok;
}

int64_t mcir_memplan_lower_bound(const mcir_memplan_problem *problem)
{
    mcir_memplan_result scratch;
    memplan_prep prep;
    if (memplan_prepare(problem, &prep, &scratch) != MCIR_MEMPLAN_OK)
        return -1;
    size_t ng = prep.n_groups, *members = malloc((ng ? ng : 1) * sizeof *members);
    size_t *local = malloc((ng ? ng : 1) * sizeof *local);
    memplan_inst_store s;
    int64_t lb = -1;
    if (members && local) {
        for (size_t g = 0; g < ng; g++)
            members[g] = local[g] = g;
        if (memplan_inst_build(problem, &prep, members, ng, local, 0, &s)) {
            lb = s.inst.lower_bound;
            memplan_inst_free(&s);
        }
    }
    free(members);
    free(local);
    memplan_prep_free(&prep);
    return lb;
}

/* ---- The driver. -------------------------------------------------------- */

void mcir_memplan_result_free(mcir_memplan_result *r)
{
    free(r->offsets);
    free(r->pools);
    free(r->pool_bytes);
    r->offsets = NULL;
    r->pools = NULL;
    r->pool_bytes = NULL;
}

/* Pool rule: plan everything still unplaced in the next preferred pool with
 * that pool's capacity as the target; the buffers whose block ends within
 * the capacity stay there at the offsets found (they are consistent among
 * themselves), the rest fall through to the next pool.  The last pool takes
 * whatever is left; if it overflows, the status is NO_FIT. */
mcir_memplan_status mcir_memplan_run(const mcir_memplan_problem *problem,
                                     const mcir_memplan_options *options,
                                     mcir_memplan_result *r)
{
    double t0 = mcir_memplan_now();
    memset(r, 0, sizeof *r);
    const char *pname = options && options->planner ? options->planner : "best";
    double limit = options && options->time_limit_s > 0 ? options->time_limit_s
                                                        : 10.0;
    const mcir_memplan_planner *planner = mcir_memplan_planner_find(pname);
    if (!planner) {
        memplan_message(r, "unknown planner '%s' (try --planner help)", pname);
        return MCIR_MEMPLAN_UNKNOWN_PLANNER;
    }
    static const mcir_memplan_pool default_pool = {"arena", 0};
    const mcir_memplan_pool *pools = problem->n_pools ? problem->pools
                                                      : &default_pool;
    size_t n_pools = problem->n_pools ? problem->n_pools : 1;
    for (size_t p = 0; p < n_pools; p++)
        if (pools[p].capacity < 0) {
            memplan_message(r, "pool '%s': negative capacity",
                            pools[p].name ? pools[p].name : "?");
            return MCIR_MEMPLAN_INVALID;
        }
    memplan_prep prep;
    mcir_memplan_status st = memplan_prepare(problem, &prep, r);
    if (st != MCIR_MEMPLAN_OK)
        return st;
    size_t n = problem->n_buffers, ng = prep.n_groups;
    size_t ng1 = ng ? ng : 1;
    r->n_buffers = n;
    r->n_pools = n_pools;
    r->offsets = calloc(n ? n : 1, sizeof *r->offsets);
    r->pools = calloc(n ? n : 1, sizeof *r->pools);
    r->pool_bytes = calloc(n_pools, sizeof *r->pool_bytes);
    size_t *members = malloc(ng1 * sizeof *members);
    size_t *local = malloc(ng1 * sizeof *local);
    size_t *group_pool = malloc(ng1 * sizeof *group_pool);
    int64_t *group_off = malloc(ng1 * sizeof *group_off);
    int64_t *offs = malloc(ng1 * sizeof *offs);
    st = MCIR_MEMPLAN_NOMEM;
    if (!r->offsets || !r->pools || !r->pool_bytes || !members || !local ||
        !group_pool || !group_off || !offs)
        goto out;
    size_t m = ng;
    for (size_t g = 0; g < ng; g++)
        members[g] = g;
    bool optimal = true, spilled = false;
    st = MCIR_MEMPLAN_OK;
    for (size_t p = 0; p < n_pools && m > 0; p++) {
        for (size_t g = 0; g < ng; g++)
            local[g] = SIZE_MAX;
        for (size_t k = 0; k < m; k++)
            local[members[k]] = k;
        memplan_inst_store s;
        if (!memplan_inst_build(problem, &prep, members, m, local,
                                pools[p].capacity, &s)) {
            st = MCIR_MEMPLAN_NOMEM;
            goto out;
        }
        if (p == 0)
            r->lower_bound_bytes = s.inst.lower_bound;
        s.inst.started = mcir_memplan_now();
        s.inst.deadline = s.inst.started + limit;
        s.inst.budget_s = limit;
        s.inst.stop_when_fits = options && options->stop_when_fits;
        s.inst.progress = options ? options->progress : NULL;
        s.inst.progress_ctx = options ? options->progress_ctx : NULL;
        mcir_memplan_stats stats = {0};
        int64_t h = planner->plan(&s.inst, offs, &stats);
        memplan_inst_free(&s);
        if (h < 0) {
            st = MCIR_MEMPLAN_NOMEM;
            goto out;
        }
        r->nodes += stats.nodes;
        if (p == 0)
            snprintf(r->planner, sizeof r->planner, "%s",
                     stats.winner ? stats.winner : planner->name);
        optimal = optimal && stats.optimal;
        int64_t cap = pools[p].capacity;
        bool last = p + 1 == n_pools;
        size_t keep = 0;
        int64_t used = 0;
        for (size_t k = 0; k < m; k++) {
            size_t g = members[k];
            int64_t end = offs[k] + prep.groups[g].size;
            if (cap == 0 || end <= cap || last) {
                group_pool[g] = p;
                group_off[g] = offs[k];
                if (end > used)
                    used = end;
            } else {
                members[keep++] = g; /* falls through to the next pool */
            }
        }
        r->pool_bytes[p] = used;
        if (keep > 0)
            spilled = true;
        if (last && cap > 0 && used > cap) {
            memplan_message(r, "pool '%s' needs %lld bytes but holds %lld: "
                            "misses by %lld bytes",
                            pools[p].name ? pools[p].name : "?",
                            (long long)used, (long long)cap,
                            (long long)(used - cap));
            st = MCIR_MEMPLAN_NO_FIT;
        }
        m = keep;
    }
    for (size_t p = 0; p < n_pools; p++)
        r->arena_bytes += r->pool_bytes[p];
    for (size_t i = 0; i < n; i++) {
        r->offsets[i] = group_off[prep.group_of[i]];
        r->pools[i] = group_pool[prep.group_of[i]];
    }
    r->optimal = optimal && !spilled && st == MCIR_MEMPLAN_OK;
    if (!r->planner[0])
        snprintf(r->planner, sizeof r->planner, "%s", planner->name);
out:
    if (st == MCIR_MEMPLAN_NOMEM) {
        memplan_message(r, "out of memory");
        mcir_memplan_result_free(r);
    }
    free(members);
    free(local);
    free(group_pool);
    free(group_off);
    free(offs);
    memplan_prep_free(&prep);
    r->seconds = mcir_memplan_now() - t0;
    return st;
}
