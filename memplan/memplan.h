/* memplan.h — static memory-arena planner: public API.
 *
 * Given buffers with a size, an alignment and a lifetime (the steps at which
 * they are live), the planner assigns each buffer a pool and an offset inside
 * that pool such that two buffers live at the same step (or named in an
 * explicit conflict) never share a byte.  Several algorithms sit behind one
 * interface (a table: name, description, function); `best` runs them and
 * keeps the smallest arena.  An independent checker validates any answer.
 *
 * Lifetimes are INCLUSIVE: a buffer is live at steps first..last (first <=
 * last), which is what the graph side produces (kernel indices).  The CSV
 * format of mcir-memplan uses half-open [lower, upper); the reader converts.
 *
 * Usage:
 *
 *     mcir_memplan_buffer bufs[3] = {
 *         { .name = "a", .size = 1024, .first = 0, .last = 1, .share_with = -1 },
 *         { .name = "b", .size = 512,  .first = 1, .last = 2, .share_with = -1 },
 *         { .name = "c", .size = 1024, .first = 2, .last = 3, .share_with = -1 },
 *     };
 *     mcir_memplan_problem prob = { .buffers = bufs, .n_buffers = 3,
 *                                   .alignment = 256 };
 *     mcir_memplan_options opt = { .planner = "best", .time_limit_s = 10 };
 *     mcir_memplan_result res;
 *     if (mcir_memplan_run(&prob, &opt, &res) != MCIR_MEMPLAN_OK)
 *         fprintf(stderr, "%s\n", res.message);
 *     char why[256];
 *     assert(mcir_memplan_check(&prob, &res, why, sizeof why));
 *     ... res.offsets[i], res.pools[i], res.arena_bytes ...
 *     mcir_memplan_result_free(&res);
 */
#ifndef MCIR_MEMPLAN_H
#define MCIR_MEMPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One buffer to place. */
typedef struct mcir_memplan_buffer {
    const char *name;    /* for diagnostics; may be NULL */
    int64_t size;        /* bytes, >= 0 */
    int64_t alignment;   /* bytes, > 0; 0 = the problem's default alignment */
    int64_t first, last; /* inclusive lifetime, first <= last */
    /* In-place reuse (tensor coalescing): index of a buffer A whose offset
     * this buffer B takes over, or -1.  Requires A.last == B.first (A dies
     * at the step B is born) and B.size <= A.size.  The planner merges the
     * chain into one block with the union lifetime before planning. */
    int64_t share_with;
} mcir_memplan_buffer;

/* An explicit conflict: buffers a and b must not overlap in address range
 * even where their lifetimes do not overlap. */
typedef struct mcir_memplan_conflict {
    size_t a, b;
} mcir_memplan_conflict;

/* A memory pool.  Pools are listed in order of preference; capacity 0 means
 * unbounded.  A problem with no pools gets one unbounded pool "arena". */
typedef struct mcir_memplan_pool {
    const char *name;
    int64_t capacity;
} mcir_memplan_pool;

typedef struct mcir_memplan_problem {
    const mcir_memplan_buffer *buffers;
    size_t n_buffers;
    const mcir_memplan_conflict *conflicts;
    size_t n_conflicts;
    const mcir_memplan_pool *pools;
    size_t n_pools;
    int64_t alignment; /* default alignment; 0 means 1 */
} mcir_memplan_problem;

typedef struct mcir_memplan_options {
    const char *planner; /* a name from the table; NULL = "best" */
    double time_limit_s; /* budget of the exact search; <= 0 = 10 s */
    bool stop_when_fits; /* with bounded pools: stop improving a plan once
                            it fits (a decision, not an optimisation) */
    /* Called about four times a second while the exact search runs, on
     * its thread: seconds spent and the budget, search nodes so far, the
     * best height found; NULL: never. */
    void (*progress)(void *ctx, double seconds, double budget_s, int64_t nodes,
                     int64_t best_height);
    void *progress_ctx;
} mcir_memplan_options;

typedef enum mcir_memplan_status {
    MCIR_MEMPLAN_OK = 0,
    MCIR_MEMPLAN_INVALID, /* malformed problem: message says which buffer */
    MCIR_MEMPLAN_NO_FIT,  /* the last pool overflows: message says by how much;
                             the result still holds the (overflowing) plan */
    MCIR_MEMPLAN_NOMEM,
    MCIR_MEMPLAN_UNKNOWN_PLANNER,
} mcir_memplan_status;

typedef struct mcir_memplan_result {
    size_t n_buffers, n_pools;
    int64_t *offsets;    /* per buffer: byte offset inside its pool */
    size_t *pools;       /* per buffer: index of its pool */
    int64_t *pool_bytes; /* per pool: bytes used (highest end of a buffer) */
    int64_t arena_bytes; /* sum of pool_bytes; the height with one pool */
    int64_t lower_bound_bytes; /* largest total of aligned sizes live at one
                                  step (after in-place merging) */
    bool optimal;        /* every pool's height is proven minimal */
    char planner[32];    /* the algorithm that produced pool 0's plan */
    double seconds;      /* wall time of mcir_memplan_run */
    int64_t nodes;       /* search nodes visited by the exact planner */
    char message[256];   /* diagnostic when the status is not OK */
} mcir_memplan_result;

/* Plans `problem`.  On any status but NOMEM/INVALID/UNKNOWN_PLANNER the
 * result holds a placement; always call mcir_memplan_result_free. */
mcir_memplan_status mcir_memplan_run(const mcir_memplan_problem *problem,
                                     const mcir_memplan_options *options,
                                     mcir_memplan_result *result);
void mcir_memplan_result_free(mcir_memplan_result *result);

/* Independent checker (shares no code with the planners): buffers whose
 * lifetimes overlap, or that are named in a conflict, never overlap in
 * address range within one pool; every buffer lies inside its pool's
 * capacity; offsets respect alignment; in-place pairs share their offset.
 * Returns false and writes a message naming the buffer(s) into `why`. */
bool mcir_memplan_check(const mcir_memplan_problem *problem,
                        const mcir_memplan_result *result, char *why,
                        size_t why_size);

/* Largest total of aligned sizes live at one step (in-place chains count
 * once).  Returns -1 if the problem is invalid or the total overflows. */
int64_t mcir_memplan_lower_bound(const mcir_memplan_problem *problem);

/* ---- The planner table (the algorithms and the instance they see:
 * memplan-impl.h). */
typedef struct mcir_memplan_instance mcir_memplan_instance;
typedef struct mcir_memplan_stats mcir_memplan_stats;

/* Writes offsets[i] for every buffer and returns the height (highest end),
 * or -1 when out of memory. */
typedef int64_t (*mcir_memplan_plan_fn)(const mcir_memplan_instance *inst,
                                        int64_t *offsets,
                                        mcir_memplan_stats *stats);

typedef struct mcir_memplan_planner {
    const char *name;
    const char *description; /* one line, for --planner help */
    mcir_memplan_plan_fn plan;
} mcir_memplan_planner;

/* The table of planners, `best` first. */
const mcir_memplan_planner *mcir_memplan_planners(size_t *count);
const mcir_memplan_planner *mcir_memplan_planner_find(const char *name);
/* Prints "NAME  DESCRIPTION" lines for --planner help. */
void mcir_memplan_planners_print(FILE *out);

/* ---- The CSV problem format of mcir-memplan. ----------------------------
 * Header `id,lower,upper,size`, then one row per buffer, half-open
 * [lower, upper).  Blank lines are skipped.  Row i becomes buffer i with
 * first = lower, last = upper - 1, alignment 1. */
typedef struct mcir_memplan_csv {
    size_t n;
    int64_t *id, *lower, *upper, *size;
    mcir_memplan_buffer *buffers; /* n entries, names point into `names` */
    char *names;
} mcir_memplan_csv;

/* Reads `path` (or `in` when non-NULL; `path` is then only used in
 * diagnostics).  On error returns false and writes
 * "path:line:col: error: ..." into `why`. */
bool mcir_memplan_csv_read(const char *path, FILE *in, mcir_memplan_csv *csv,
                           char *why, size_t why_size);
/* Writes `id,lower,upper,size,offset`. */
bool mcir_memplan_csv_write(FILE *out, const mcir_memplan_csv *csv,
                            const int64_t *offsets);
void mcir_memplan_csv_free(mcir_memplan_csv *csv);

#endif
