/* check.c — the independent checker of a memory plan.
 *
 * Deliberately naive and separate from the planners: it reads only the
 * caller's problem (inclusive lifetimes, raw sizes, explicit conflicts,
 * in-place chains) and the result, and compares every pair of buffers.  It
 * never trusts the planner's compressed instance, merged groups or
 * adjacency lists, so a bug there cannot hide itself.
 */
#include "memplan/memplan-impl.h"

#include <stdarg.h>

static bool check_fail(char *why, size_t n, const char *fmt, ...)
{
    if (why && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
    }
    return false;
}

static const char *check_name(const mcir_memplan_problem *pb, size_t i,
                              char *buf, size_t n)
{
    if (pb->buffers[i].name)
        return pb->buffers[i].name;
    snprintf(buf, n, "#%zu", i);
    return buf;
}

/* The first buffer of i's in-place chain (i itself when it takes over
 * nobody); SIZE_MAX on a malformed chain. */
static size_t check_chain_root(const mcir_memplan_problem *pb, size_t i)
{
    for (size_t steps = 0; steps <= pb->n_buffers; steps++) {
        int64_t s = pb->buffers[i].share_with;
        if (s < 0)
            return i;
        if ((uint64_t)s >= pb->n_buffers)
            return SIZE_MAX;
        i = (size_t)s;
    }
    return SIZE_MAX;
}

/* Do [o1, o1+s1) and [o2, o2+s2) share a byte?  Sizes are non-negative and
 * offsets inside pool capacities, checked before. */
static bool check_bytes_overlap(int64_t o1, int64_t s1, int64_t o2, int64_t s2)
{
    if (s1 == 0 || s2 == 0)
        return false;
    return o1 < o2 + s2 && o2 < o1 + s1;
}

bool mcir_memplan_check(const mcir_memplan_problem *pb,
                        const mcir_memplan_result *r, char *why,
                        size_t why_size)
{
    char a[32], b[32];
    size_t n = pb->n_buffers;
    size_t n_pools = pb->n_pools ? pb->n_pools : 1;
    if (r->n_buffers != n)
        return check_fail(why, why_size, "result has %zu buffers, problem %zu",
                          r->n_buffers, n);
    if (n > 0 && (!r->offsets || !r->pools))
        return check_fail(why, why_size, "result holds no placement");
    for (size_t i = 0; i < n; i++) {
        const mcir_memplan_buffer *bi = &pb->buffers[i];
        const char *ni = check_name(pb, i, a, sizeof a);
        int64_t off = r->offsets[i];
        int64_t align = bi->alignment ? bi->alignment
                        : pb->alignment ? pb->alignment : 1;
        if (r->pools[i] >= n_pools)
            return check_fail(why, why_size, "buffer '%s' is in pool %zu, "
                              "there are %zu", ni, r->pools[i], n_pools);
        int64_t cap = pb->n_pools ? pb->pools[r->pools[i]].capacity : 0;
        if (off < 0)
            return check_fail(why, why_size, "buffer '%s' has negative offset "
                              "%lld", ni, (long long)off);
        if (off % align != 0)
            return check_fail(why, why_size, "buffer '%s' at offset %lld is "
                              "not aligned to %lld", ni, (long long)off,
                              (long long)align);
        if (cap > 0 && (bi->size > cap || off > cap - bi->size))
            return check_fail(why, why_size, "buffer '%s' at [%lld, +%lld) "
                              "lies outside pool %zu of capacity %lld", ni,
                              (long long)off, (long long)bi->size,
                              r->pools[i], (long long)cap);
        if (r->pool_bytes && (off > r->pool_bytes[r->pools[i]] ||
                              bi->size > r->pool_bytes[r->pools[i]] - off))
            return check_fail(why, why_size, "buffer '%s' ends past the "
                              "%lld bytes reported for pool %zu", ni,
                              (long long)r->pool_bytes[r->pools[i]],
                              r->pools[i]);
        if (bi->share_with >= 0) {
            if ((uint64_t)bi->share_with >= n)
                return check_fail(why, why_size, "buffer '%s' takes over a "
                                  "buffer that does not exist", ni);
            size_t j = (size_t)bi->share_with;
            if (r->offsets[j] != off || r->pools[j] != r->pools[i])
                return check_fail(why, why_size, "buffer '%s' should take over "
                                  "the memory of '%s' but does not", ni,
                                  check_name(pb, j, b, sizeof b));
        }
    }
    for (size_t i = 0; i < n; i++) {
        const mcir_memplan_buffer *bi = &pb->buffers[i];
        size_t ri = check_chain_root(pb, i);
        for (size_t j = i + 1; j < n; j++) {
            const mcir_memplan_buffer *bj = &pb->buffers[j];
            if (r->pools[i] != r->pools[j])
                continue;
            if (bi->first > bj->last || bj->first > bi->last)
                continue;
            if (ri != SIZE_MAX && ri == check_chain_root(pb, j))
                continue; /* one in-place chain: same memory by design */
            if (check_bytes_overlap(r->offsets[i], bi->size, r->offsets[j],
                                    bj->size)) {
                int64_t step = bi->first > bj->first ? bi->first : bj->first;
                return check_fail(why, why_size, "buffers '%s' and '%s' are "
                                  "both live at step %lld and overlap in pool "
                                  "%zu ([%lld, +%lld) and [%lld, +%lld))",
                                  check_name(pb, i, a, sizeof a),
                                  check_name(pb, j, b, sizeof b),
                                  (long long)step, r->pools[i],
                                  (long long)r->offsets[i],
                                  (long long)bi->size,
                                  (long long)r->offsets[j],
                                  (long long)bj->size);
            }
        }
    }
    for (size_t c = 0; c < pb->n_conflicts; c++) {
        size_t i = pb->conflicts[c].a, j = pb->conflicts[c].b;
        if (i >= n || j >= n)
            return check_fail(why, why_size, "conflict %zu names a buffer "
                              "that does not exist", c);
        if (r->pools[i] == r->pools[j] &&
            check_bytes_overlap(r->offsets[i], pb->buffers[i].size,
                                r->offsets[j], pb->buffers[j].size))
            return check_fail(why, why_size, "buffers '%s' and '%s' conflict "
                              "but overlap in pool %zu",
                              check_name(pb, i, a, sizeof a),
                              check_name(pb, j, b, sizeof b), r->pools[i]);
    }
    return true;
}
