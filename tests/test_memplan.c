/* test_memplan.c — Check suite of the memory planner (kernelplan/memplan.h).
 *
 * Every plan produced here goes through mcir_memplan_check, the independent
 * checker; the checker itself is tested first on hand-made bad placements.
 * Optimality of the exact planner is measured against a brute force over
 * all first-fit orders on tiny instances (some order reproduces an optimal
 * packing, so the minimum over orders is the optimum).
 */
#include "memplan/memplan-impl.h"
#include "test_util.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* ---- Helpers. ------------------------------------------------------------ */

static mcir_memplan_buffer buf(const char *name, int64_t size, int64_t first,
                               int64_t last)
{
    return (mcir_memplan_buffer){.name = name, .size = size, .first = first,
                                 .last = last, .share_with = -1};
}

/* A result over caller-chosen offsets and pools, for checker tests. */
static mcir_memplan_result fake_result(size_t n, int64_t *offsets,
                                       size_t *pools)
{
    return (mcir_memplan_result){.n_buffers = n, .n_pools = 1,
                                 .offsets = offsets, .pools = pools};
}

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    /* xorshift64*: fixed seeds give fixed instances on every machine. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static int64_t rng_range(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}

static void random_instance(uint64_t seed, size_t n, int64_t steps,
                            mcir_memplan_buffer *b, bool aligned)
{
    static const int64_t aligns[] = {1, 8, 64};
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t i = 0; i < n; i++) {
        int64_t first = rng_range(0, steps - 1);
        int64_t last = rng_range(first, first + rng_range(0, steps / 3));
        b[i] = buf(NULL, rng_range(0, 20) == 0 ? 0 : rng_range(1, 400), first,
                   last);
        if (aligned)
            b[i].alignment = aligns[rng_range(0, 2)];
    }
}

/* ---- The checker on hand-made bad placements. --------------------------- */

START_TEST(checker_catches_overlap)
{
    mcir_memplan_buffer b[2] = {buf("x", 64, 0, 2), buf("y", 64, 2, 4)};
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 2};
    int64_t off[2] = {0, 32};
    size_t pools[2] = {0, 0};
    mcir_memplan_result r = fake_result(2, off, pools);
    char why[256];
    ck_assert(!mcir_memplan_check(&pb, &r, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "'x'"));
    ck_assert_ptr_nonnull(strstr(why, "'y'"));
    ck_assert_ptr_nonnull(strstr(why, "step 2"));
    off[1] = 64; /* adjacent, not overlapping */
    ck_assert_msg(mcir_memplan_check(&pb, &r, why, sizeof why), "%s", why);
    b[1].first = 3; /* no longer live together: may share */
    off[1] = 0;
    ck_assert_msg(mcir_memplan_check(&pb, &r, why, sizeof why), "%s", why);
}
END_TEST

START_TEST(checker_catches_misalignment)
{
    mcir_memplan_buffer b[2] = {buf("x", 10, 0, 1), buf("y", 16, 0, 1)};
    b[1].alignment = 16;
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 2};
    int64_t off[2] = {0, 10};
    size_t pools[2] = {0, 0};
    mcir_memplan_result r = fake_result(2, off, pools);
    char why[256];
    ck_assert(!mcir_memplan_check(&pb, &r, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "'y'"));
    ck_assert_ptr_nonnull(strstr(why, "aligned"));
    /* The problem's default alignment applies to buffers without one. */
    off[1] = 16;
    pb.alignment = 4;
    off[0] = 2;
    ck_assert(!mcir_memplan_check(&pb, &r, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "'x'"));
    off[0] = 0;
    ck_assert_msg(mcir_memplan_check(&pb, &r, why, sizeof why), "%s", why);
}
END_TEST

START_TEST(checker_catches_pool_violations)
{
    mcir_memplan_buffer b[2] = {buf("x", 60, 0, 1), buf("y", 50, 0, 1)};
    mcir_memplan_pool pools[2] = {{"fast", 100}, {"slow", 0}};
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 2, .pools = pools,
                               .n_pools = 2};
    int64_t off[2] = {0, 60};
    size_t in_pool[2] = {0, 0};
    mcir_memplan_result r = fake_result(2, off, in_pool);
    r.n_pools = 2;
    char why[256];
    ck_assert(!mcir_memplan_check(&pb, &r, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "'y'"));
    ck_assert_ptr_nonnull(strstr(why, "capacity 100"));
    in_pool[1] = 1; /* in the unbounded pool, offset 60 is fine */
    ck_assert_msg(mcir_memplan_check(&pb, &r, why, sizeof why), "%s", why);
    off[1] = 0; /* different pools never collide */
    ck_assert_msg(mcir_memplan_check(&pb, &r, why, sizeof why), "%s", why);
    in_pool[1] = 2; /* no such pool */
    ck_assert(!mcir_memplan_check(&pb, &r, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "'y'"));
    /* A pool's reported size must cover its buffers. */
    in_pool[1] = 1;
    int64_t pool_bytes[2] = {50, 50};
    r.pool_bytes = pool_bytes;
    ck_assert(!mcir_memplan_check(&pb, &r, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "'x'"));
}
END_TEST

START_TEST(checker_catches_explicit_conflict)
{
    mcir_memplan_buffer b[2] = {buf("x", 8, 0, 0), buf("y", 8, 5, 5)};
    mcir_memplan_conflict cf = {0, 1};
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 2,
                               .conflicts = &cf, .n_conflicts = 1};
    int64_t off[2] = {0, 4};
    size_t pools[2] = {0, 0};
    mcir_memplan_result r = fake_result(2, off, pools);
    char why[256];
    ck_assert(!mcir_memplan_check(&pb, &r, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "conflict"));
    ck_assert_ptr_nonnull(strstr(why, "'x'"));
    ck_assert_ptr_nonnull(strstr(why, "'y'"));
}
END_TEST

START_TEST(checker_catches_broken_inplace)
{
    mcir_memplan_buffer b[2] = {buf("a", 64, 0, 2), buf("b", 64, 2, 4)};
    b[1].share_with = 0;
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 2};
    int64_t off[2] = {0, 64};
    size_t pools[2] = {0, 0};
    mcir_memplan_result r = fake_result(2, off, pools);
    char why[256];
    ck_assert(!mcir_memplan_check(&pb, &r, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "'b'"));
    off[1] = 0; /* live together at step 2, but in place by request */
    ck_assert_msg(mcir_memplan_check(&pb, &r, why, sizeof why), "%s", why);
}
END_TEST

/* ---- The planners. ------------------------------------------------------- */

START_TEST(planner_table_lists_every_algorithm)
{
    size_t n;
    const mcir_memplan_planner *t = mcir_memplan_planners(&n);
    static const char *const want[] = {"best", "none", "greedy-size",
                                       "greedy-conflict", "exact"};
    ck_assert_str_eq(t[0].name, "best");
    for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
        const mcir_memplan_planner *p = mcir_memplan_planner_find(want[w]);
        ck_assert_msg(p != NULL, "missing planner %s", want[w]);
        ck_assert(p->plan != NULL);
        ck_assert(strlen(p->description) > 10);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            ck_assert_str_ne(t[i].name, t[j].name);
    ck_assert_ptr_null(mcir_memplan_planner_find("no-such-planner"));
}
END_TEST

START_TEST(greedy_size_matches_hand_example)
{
    /* Worked by hand in the order 36, 32, 28, 16, 8 (largest first), each
     * at the lowest gap among placed buffers live at the same time. */
    mcir_memplan_buffer b[5] = {buf("b0", 32, 0, 1), buf("b1", 28, 1, 2),
                                buf("b2", 36, 2, 3), buf("b3", 16, 0, 3),
                                buf("b4", 8, 3, 3)};
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 5};
    mcir_memplan_options opt = {.planner = "greedy-size"};
    mcir_memplan_result r;
    ck_assert_int_eq(mcir_memplan_run(&pb, &opt, &r), MCIR_MEMPLAN_OK);
    int64_t want[5] = {0, 36, 0, 64, 36};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(r.offsets[i], want[i]);
    ck_assert_int_eq(r.arena_bytes, 80);
    ck_assert_int_eq(r.lower_bound_bytes, 80);
    ck_assert(r.optimal);
    ck_assert_str_eq(r.planner, "greedy-size");
    mcir_memplan_result_free(&r);
}
END_TEST

START_TEST(none_places_back_to_back)
{
    mcir_memplan_buffer b[3] = {buf("a", 10, 0, 0), buf("b", 20, 5, 5),
                                buf("c", 5, 9, 9)};
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 3, .alignment = 8};
    mcir_memplan_options opt = {.planner = "none"};
    mcir_memplan_result r;
    ck_assert_int_eq(mcir_memplan_run(&pb, &opt, &r), MCIR_MEMPLAN_OK);
    ck_assert_int_eq(r.offsets[0], 0);
    ck_assert_int_eq(r.offsets[1], 16);
    ck_assert_int_eq(r.offsets[2], 40);
    ck_assert_int_eq(r.lower_bound_bytes, 24); /* aligned sizes: 16, 24, 8 */
    mcir_memplan_result_free(&r);
}
END_TEST

START_TEST(lower_bound_is_largest_live_total)
{
    mcir_memplan_buffer b[4] = {buf("a", 100, 0, 3), buf("b", 30, 1, 1),
                                buf("c", 50, 2, 5), buf("d", 7, 6, 9)};
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 4, .alignment = 16};
    /* Step 2 or 3: a (112) + c (64). */
    ck_assert_int_eq(mcir_memplan_lower_bound(&pb), 176);
    b[0].size = -1;
    ck_assert_int_eq(mcir_memplan_lower_bound(&pb), -1);
}
END_TEST

static void run_and_check(const mcir_memplan_problem *pb, const char *planner,
                          double limit, mcir_memplan_result *r)
{
    mcir_memplan_options opt = {.planner = planner, .time_limit_s = limit};
    char why[512];
    ck_assert_int_eq(mcir_memplan_run(pb, &opt, r), MCIR_MEMPLAN_OK);
    ck_assert_msg(mcir_memplan_check(pb, r, why, sizeof why), "%s: %s",
                  planner, why);
    ck_assert_int_ge(r->arena_bytes, r->lower_bound_bytes);
}

START_TEST(every_planner_passes_checker_on_random)
{
    enum { N = 40 };
    mcir_memplan_buffer b[N];
    size_t n_planners;
    const mcir_memplan_planner *t = mcir_memplan_planners(&n_planners);
    for (uint64_t seed = 1; seed <= 25; seed++) {
        random_instance(seed, N, 30, b, seed % 2 == 0);
        mcir_memplan_conflict cf[8];
        for (size_t c = 0; c < 8; c++) {
            cf[c].a = (size_t)rng_range(0, N / 2 - 1);
            cf[c].b = (size_t)rng_range(N / 2, N - 1);
        }
        mcir_memplan_problem pb = {.buffers = b, .n_buffers = N,
                                   .conflicts = cf,
                                   .n_conflicts = seed % 3 == 0 ? 8 : 0};
        int64_t greedy_best = INT64_MAX, exact = -1;
        for (size_t p = 0; p < n_planners; p++) {
            mcir_memplan_result r;
            run_and_check(&pb, t[p].name, 0.2, &r);
            if (strncmp(t[p].name, "greedy", 6) == 0 &&
                r.arena_bytes < greedy_best)
                greedy_best = r.arena_bytes;
            if (strcmp(t[p].name, "exact") == 0)
                exact = r.arena_bytes;
            mcir_memplan_result_free(&r);
        }
        ck_assert_int_le(exact, greedy_best);
    }
}
END_TEST

/* Size as the planners count it: rounded up to the alignment. */
static int64_t brute_size(const mcir_memplan_buffer *b)
{
    int64_t a = b->alignment > 0 ? b->alignment : 1;
    return (b->size + a - 1) / a * a;
}

/* First fit in the given order, written independently of the planners. */
static int64_t brute_first_fit(const mcir_memplan_buffer *b, size_t n,
                               const size_t *order, int64_t *off)
{
    int64_t height = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];
        int64_t a = b[i].alignment > 0 ? b[i].alignment : 1, at = 0;
        for (bool moved = true; moved;) {
            moved = false;
            at = (at + a - 1) / a * a;
            for (size_t q = 0; q < k; q++) {
                size_t j = order[q];
                bool live = b[i].first <= b[j].last && b[j].first <= b[i].last;
                if (live && b[i].size > 0 && b[j].size > 0 &&
                    at < off[j] + brute_size(&b[j]) &&
                    off[j] < at + brute_size(&b[i])) {
                    at = off[j] + brute_size(&b[j]);
                    moved = true;
                }
            }
        }
        off[i] = at;
        if (at + brute_size(&b[i]) > height)
            height = at + brute_size(&b[i]);
    }
    return height;
}

static int64_t brute_optimum(const mcir_memplan_buffer *b, size_t n)
{
    size_t order[8], c[8] = {0};
    int64_t off[8], best;
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    best = brute_first_fit(b, n, order, off);
    /* Heap's algorithm over all orders. */
    for (size_t i = 1; i < n;) {
        if (c[i] < i) {
            size_t j = i % 2 ? c[i] : 0, t = order[j];
            order[j] = order[i];
            order[i] = t;
            int64_t h = brute_first_fit(b, n, order, off);
            if (h < best)
                best = h;
            c[i]++;
            i = 1;
        } else {
            c[i++] = 0;
        }
    }
    return best;
}

START_TEST(exact_is_optimal_on_tiny_random)
{
    enum { N = 7 };
    mcir_memplan_buffer b[N];
    for (uint64_t seed = 100; seed < 140; seed++) {
        random_instance(seed, N, 6, b, seed % 2 == 0);
        for (size_t i = 0; i < N; i++)
            if (b[i].alignment == 0)
                b[i].alignment = 1;
        mcir_memplan_problem pb = {.buffers = b, .n_buffers = N};
        mcir_memplan_result r;
        run_and_check(&pb, "exact", 5.0, &r);
        int64_t opt = brute_optimum(b, N);
        ck_assert_msg(r.arena_bytes == opt, "seed %d: exact %lld, optimum %lld",
                      (int)seed, (long long)r.arena_bytes, (long long)opt);
        ck_assert(r.optimal);
        mcir_memplan_result_free(&r);
    }
}
END_TEST

START_TEST(exact_reaches_bound_on_a_tight_puzzle)
{
    /* a/c and b/d share the two halves of time; e straddles the middle, so
     * every step needs 12 bytes and only the packing with e at one edge
     * and the pairs around it reaches the bound. */
    mcir_memplan_buffer b[5] = {buf("a", 5, 0, 1), buf("b", 3, 2, 3),
                                buf("c", 3, 0, 1), buf("d", 5, 2, 3),
                                buf("e", 4, 1, 2)};
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 5};
    mcir_memplan_result r;
    run_and_check(&pb, "exact", 5.0, &r);
    ck_assert_int_eq(r.lower_bound_bytes, 12);
    ck_assert_int_eq(r.arena_bytes, 12);
    ck_assert_int_eq(r.arena_bytes, brute_optimum(b, 5));
    ck_assert(r.optimal);
    mcir_memplan_result_free(&r);
}
END_TEST

START_TEST(exact_honours_conflicts_across_a_cut)
{
    /* No lifetime joins the two halves, so without the conflict the search
     * would solve them apart and put both at offset 0. */
    mcir_memplan_buffer b[4] = {buf("x", 8, 0, 1), buf("w", 8, 0, 1),
                                buf("y", 8, 5, 6), buf("z", 8, 5, 6)};
    mcir_memplan_conflict cf = {0, 2};
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 4,
                               .conflicts = &cf, .n_conflicts = 1};
    static const char *const planners[] = {"exact", "best", "greedy-size",
                                           "greedy-conflict"};
    for (size_t p = 0; p < 4; p++) {
        mcir_memplan_result r;
        run_and_check(&pb, planners[p], 1.0, &r);
        ck_assert_int_eq(r.arena_bytes, 16);
        mcir_memplan_result_free(&r);
    }
    /* The greedy plans above are already optimal, so drive the search
     * itself through the planner interface, from a poor incumbent. */
    int64_t size[2] = {8, 8}, align[2] = {1, 1}, span[2] = {1, 1};
    int32_t lower[2] = {0, 2}, upper[2] = {1, 3};
    size_t adj_start[3] = {0, 1, 2};
    uint32_t adj[2] = {1, 0};
    mcir_memplan_instance in = {
        .n = 2, .size = size, .alignment = align, .lower = lower,
        .upper = upper, .n_steps = 3, .span = span, .adj_start = adj_start,
        .adj = adj, .has_extra_conflicts = true, .lower_bound = 8,
        .deadline = mcir_memplan_now() + 5};
    int64_t off[2] = {0, 100};
    mcir_memplan_stats st = {0};
    ck_assert_int_eq(mcir_memplan_plan_exact_from(&in, off, 108, &st), 16);
    ck_assert(off[0] != off[1]);
    ck_assert(st.optimal);
}
END_TEST

START_TEST(inplace_chain_shares_offset)
{
    /* a -> b -> c computed in place: one block over steps 0..6. */
    mcir_memplan_buffer b[4] = {buf("a", 100, 0, 2), buf("b", 100, 2, 4),
                                buf("c", 60, 4, 6), buf("d", 40, 1, 5)};
    b[1].share_with = 0;
    b[2].share_with = 1;
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 4, .alignment = 4};
    mcir_memplan_result r;
    run_and_check(&pb, "best", 1.0, &r);
    ck_assert_int_eq(r.offsets[0], r.offsets[1]);
    ck_assert_int_eq(r.offsets[1], r.offsets[2]);
    ck_assert_int_eq(r.lower_bound_bytes, 140); /* the chain counts once */
    ck_assert_int_eq(r.arena_bytes, 140);
    mcir_memplan_result_free(&r);
}
END_TEST

START_TEST(inplace_rejects_bad_requests)
{
    mcir_memplan_buffer b[3] = {buf("a", 100, 0, 2), buf("b", 200, 2, 4),
                                buf("c", 50, 2, 3)};
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 3};
    mcir_memplan_options opt = {.planner = "greedy-size"};
    mcir_memplan_result r;
    b[1].share_with = 0; /* larger than what it takes over */
    ck_assert_int_eq(mcir_memplan_run(&pb, &opt, &r), MCIR_MEMPLAN_INVALID);
    ck_assert_ptr_nonnull(strstr(r.message, "'b'"));
    b[1].size = 100;
    b[1].first = 3; /* not born when a dies */
    ck_assert_int_eq(mcir_memplan_run(&pb, &opt, &r), MCIR_MEMPLAN_INVALID);
    b[1].first = 2;
    b[2].share_with = 0; /* two takers of one buffer */
    ck_assert_int_eq(mcir_memplan_run(&pb, &opt, &r), MCIR_MEMPLAN_INVALID);
    ck_assert_ptr_nonnull(strstr(r.message, "both"));
    b[2].share_with = 7;
    ck_assert_int_eq(mcir_memplan_run(&pb, &opt, &r), MCIR_MEMPLAN_INVALID);
}
END_TEST

START_TEST(invalid_problems_are_reported)
{
    mcir_memplan_buffer b[2] = {buf("a", 10, 0, 1), buf("b", 10, 3, 2)};
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 2};
    mcir_memplan_result r;
    mcir_memplan_options opt = {.planner = "best"};
    ck_assert_int_eq(mcir_memplan_run(&pb, &opt, &r), MCIR_MEMPLAN_INVALID);
    ck_assert_ptr_nonnull(strstr(r.message, "'b'"));
    b[1].first = 2;
    b[1].size = INT64_MAX;
    b[0].size = INT64_MAX;
    ck_assert_int_eq(mcir_memplan_run(&pb, &opt, &r), MCIR_MEMPLAN_INVALID);
    ck_assert_ptr_nonnull(strstr(r.message, "overflow"));
    b[0].size = b[1].size = 1;
    opt.planner = "magic";
    ck_assert_int_eq(mcir_memplan_run(&pb, &opt, &r),
                     MCIR_MEMPLAN_UNKNOWN_PLANNER);
    mcir_memplan_conflict cf = {0, 5};
    pb.conflicts = &cf;
    pb.n_conflicts = 1;
    opt.planner = "best";
    ck_assert_int_eq(mcir_memplan_run(&pb, &opt, &r), MCIR_MEMPLAN_INVALID);
}
END_TEST

START_TEST(empty_problem_plans_to_nothing)
{
    mcir_memplan_problem pb = {0};
    mcir_memplan_result r;
    ck_assert_int_eq(mcir_memplan_run(&pb, NULL, &r), MCIR_MEMPLAN_OK);
    ck_assert_int_eq(r.arena_bytes, 0);
    ck_assert_int_eq(r.lower_bound_bytes, 0);
    mcir_memplan_result_free(&r);
}
END_TEST

/* ---- Pools. -------------------------------------------------------------- */

START_TEST(pools_fall_back_in_order)
{
    /* All live together: greedy-size stacks 60, 50, 40; only the 60 ends
     * within the fast pool, the others fall through to "mid" (room for the
     * 50) and then "slow". */
    mcir_memplan_buffer b[3] = {buf("m", 50, 0, 3), buf("l", 60, 0, 3),
                                buf("s", 40, 1, 2)};
    mcir_memplan_pool pools[3] = {{"fast", 100}, {"mid", 70}, {"slow", 0}};
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 3, .pools = pools,
                               .n_pools = 3};
    mcir_memplan_result r;
    run_and_check(&pb, "greedy-size", 1.0, &r);
    ck_assert_uint_eq(r.pools[1], 0);
    ck_assert_uint_eq(r.pools[0], 1);
    ck_assert_uint_eq(r.pools[2], 2);
    ck_assert_int_eq(r.pool_bytes[0], 60);
    ck_assert_int_eq(r.pool_bytes[1], 50);
    ck_assert_int_eq(r.pool_bytes[2], 40);
    ck_assert_int_eq(r.arena_bytes, 150);
    mcir_memplan_result_free(&r);
    /* With room for everything in the first pool, nothing falls back. */
    pools[0].capacity = 150;
    run_and_check(&pb, "best", 1.0, &r);
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(r.pools[i], 0);
    ck_assert_int_eq(r.pool_bytes[1], 0);
    mcir_memplan_result_free(&r);
}
END_TEST

START_TEST(pools_report_no_fit_with_the_shortfall)
{
    mcir_memplan_buffer b[2] = {buf("x", 60, 0, 1), buf("y", 50, 1, 2)};
    mcir_memplan_pool pool = {"sram", 100};
    mcir_memplan_problem pb = {.buffers = b, .n_buffers = 2, .pools = &pool,
                               .n_pools = 1};
    mcir_memplan_options opt = {.planner = "best", .time_limit_s = 1};
    mcir_memplan_result r;
    ck_assert_int_eq(mcir_memplan_run(&pb, &opt, &r), MCIR_MEMPLAN_NO_FIT);
    ck_assert_ptr_nonnull(strstr(r.message, "'sram'"));
    ck_assert_ptr_nonnull(strstr(r.message, "misses by 10 bytes"));
    ck_assert_int_eq(r.arena_bytes, 110);
    mcir_memplan_result_free(&r);
}
END_TEST

/* ---- The MiniMalloc instances. ------------------------------------------- */

static void read_instance(const char *name, mcir_memplan_csv *csv)
{
    char path[4096], why[512];
    snprintf(path, sizeof path, "%s/bench/data/minimalloc/%s", test_source_dir(),
             name);
    ck_assert_msg(mcir_memplan_csv_read(path, NULL, csv, why, sizeof why),
                  "%s", why);
}

static const char *const minimalloc_names[6] = {
    "A.1048576.csv", "B.1048576.csv", "C.1048576.csv",
    "D.1048576.csv", "E.1048576.csv", "F.1048576.csv"};

START_TEST(greedy_planners_pass_checker_on_minimalloc)
{
    mcir_memplan_csv csv;
    read_instance(minimalloc_names[_i], &csv);
    mcir_memplan_problem pb = {.buffers = csv.buffers, .n_buffers = csv.n};
    static const char *const greedy[] = {"none", "greedy-size",
                                         "greedy-conflict", "greedy-breadth"};
    for (size_t g = 0; g < 4; g++) {
        mcir_memplan_result r;
        run_and_check(&pb, greedy[g], 1.0, &r);
        ck_assert_int_gt(r.arena_bytes, 1048576);
        mcir_memplan_result_free(&r);
    }
    mcir_memplan_csv_free(&csv);
}
END_TEST

START_TEST(best_fits_minimalloc_capacity)
{
    /* A, B, E, F are tight (capacity == lower bound): only an exact
     * packing fits, so this is the exact search reaching the bound. */
    mcir_memplan_csv csv;
    read_instance(minimalloc_names[_i], &csv);
    mcir_memplan_pool pool = {"arena", 1048576};
    mcir_memplan_problem pb = {.buffers = csv.buffers, .n_buffers = csv.n,
                               .pools = &pool, .n_pools = 1};
    mcir_memplan_options opt = {.planner = "best", .time_limit_s = 30,
                                .stop_when_fits = true};
    mcir_memplan_result r;
    char why[512];
    ck_assert_int_eq(mcir_memplan_run(&pb, &opt, &r), MCIR_MEMPLAN_OK);
    ck_assert_msg(mcir_memplan_check(&pb, &r, why, sizeof why), "%s", why);
    ck_assert_int_le(r.arena_bytes, 1048576);
    bool tight = strchr("ABEF", minimalloc_names[_i][0]) != NULL;
    if (tight) {
        ck_assert_int_eq(r.lower_bound_bytes, 1048576);
        ck_assert_int_eq(r.arena_bytes, r.lower_bound_bytes);
        ck_assert(r.optimal);
        ck_assert_str_eq(r.planner, "exact");
    }
    mcir_memplan_result_free(&r);
    mcir_memplan_csv_free(&csv);
}
END_TEST

START_TEST(exact_minimises_without_capacity)
{
    /* C: the lower bound 1039360 is reachable; with no capacity the exact
     * planner aims at the bound first and proves it. */
    mcir_memplan_csv csv;
    read_instance("C.1048576.csv", &csv);
    mcir_memplan_problem pb = {.buffers = csv.buffers, .n_buffers = csv.n};
    mcir_memplan_result r;
    run_and_check(&pb, "exact", 30, &r);
    ck_assert_int_eq(r.arena_bytes, 1039360);
    ck_assert(r.optimal);
    mcir_memplan_result_free(&r);
    mcir_memplan_csv_free(&csv);
}
END_TEST

/* ---- The CSV reader. ----------------------------------------------------- */

START_TEST(csv_reads_good_file)
{
    char path[4096], why[512];
    snprintf(path, sizeof path, "%s/tests/data/memplan/good.csv",
             test_source_dir());
    mcir_memplan_csv csv;
    ck_assert_msg(mcir_memplan_csv_read(path, NULL, &csv, why, sizeof why),
                  "%s", why);
    ck_assert_uint_eq(csv.n, 3);
    ck_assert_int_eq(csv.buffers[0].first, 0);
    ck_assert_int_eq(csv.buffers[0].last, 1); /* [0, 2) is steps 0..1 */
    ck_assert_int_eq(csv.buffers[2].size, 4);
    ck_assert_str_eq(csv.buffers[1].name, "1");
    mcir_memplan_problem pb = {.buffers = csv.buffers, .n_buffers = csv.n};
    mcir_memplan_result r;
    run_and_check(&pb, "best", 1.0, &r);
    ck_assert_int_eq(r.arena_bytes, 24);
    FILE *out = tmpfile();
    ck_assert_ptr_nonnull(out);
    ck_assert(mcir_memplan_csv_write(out, &csv, r.offsets));
    rewind(out);
    char line[128];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, out));
    ck_assert_str_eq(line, "id,lower,upper,size,offset\n");
    fclose(out);
    mcir_memplan_result_free(&r);
    mcir_memplan_csv_free(&csv);
}
END_TEST

static const struct {
    const char *file, *where, *what;
} bad_csvs[] = {
    {"bad_header.csv", ":1:1: error: ", "header"},
    {"not_integer.csv", ":3:7: error: ", "'abc' is not an integer"},
    {"negative_size.csv", ":2:7: error: ", "negative size"},
    {"empty_lifetime.csv", ":2:5: error: ", "empty lifetime"},
    {"duplicate_id.csv", ":4:1: error: ", "duplicate id 7"},
    {"overflow.csv", ":2:7: error: ", "out of range"},
    {"too_few_fields.csv", ":2:6: error: ", "expected 4 fields"},
    {"too_many_fields.csv", ":2:9: error: ", "expected 4 fields"},
    {"empty.csv", ":1:1: error: ", "empty file"},
    {"empty_field.csv", ":2:7: error: ", "not an integer"},
    {"no_such_file.csv", ": error: ", "cannot open"},
};

START_TEST(csv_rejects_malformed_files)
{
    char path[4096], why[512];
    snprintf(path, sizeof path, "%s/tests/data/memplan/%s", test_source_dir(),
             bad_csvs[_i].file);
    mcir_memplan_csv csv;
    ck_assert(!mcir_memplan_csv_read(path, NULL, &csv, why, sizeof why));
    ck_assert_msg(strstr(why, bad_csvs[_i].where) != NULL, "%s: %s",
                  bad_csvs[_i].file, why);
    ck_assert_msg(strstr(why, bad_csvs[_i].what) != NULL, "%s: %s",
                  bad_csvs[_i].file, why);
    ck_assert_ptr_nonnull(strstr(why, bad_csvs[_i].file));
}
END_TEST

START_TEST(csv_huge_sizes_are_rejected_by_the_planner)
{
    char path[4096], why[512];
    snprintf(path, sizeof path, "%s/tests/data/memplan/huge_sizes.csv",
             test_source_dir());
    mcir_memplan_csv csv;
    ck_assert(mcir_memplan_csv_read(path, NULL, &csv, why, sizeof why));
    mcir_memplan_problem pb = {.buffers = csv.buffers, .n_buffers = csv.n};
    mcir_memplan_result r;
    ck_assert_int_eq(mcir_memplan_run(&pb, NULL, &r), MCIR_MEMPLAN_INVALID);
    ck_assert_ptr_nonnull(strstr(r.message, "overflow"));
    mcir_memplan_csv_free(&csv);
}
END_TEST

static Suite *memplan_suite(void)
{
    Suite *s = suite_create("memplan");
    TCase *tc = tcase_create("checker");
    tcase_add_test(tc, checker_catches_overlap);
    tcase_add_test(tc, checker_catches_misalignment);
    tcase_add_test(tc, checker_catches_pool_violations);
    tcase_add_test(tc, checker_catches_explicit_conflict);
    tcase_add_test(tc, checker_catches_broken_inplace);
    suite_add_tcase(s, tc);

    tc = tcase_create("planners");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, planner_table_lists_every_algorithm);
    tcase_add_test(tc, greedy_size_matches_hand_example);
    tcase_add_test(tc, none_places_back_to_back);
    tcase_add_test(tc, lower_bound_is_largest_live_total);
    tcase_add_test(tc, every_planner_passes_checker_on_random);
    tcase_add_test(tc, exact_is_optimal_on_tiny_random);
    tcase_add_test(tc, exact_reaches_bound_on_a_tight_puzzle);
    tcase_add_test(tc, exact_honours_conflicts_across_a_cut);
    tcase_add_test(tc, inplace_chain_shares_offset);
    tcase_add_test(tc, inplace_rejects_bad_requests);
    tcase_add_test(tc, invalid_problems_are_reported);
    tcase_add_test(tc, empty_problem_plans_to_nothing);
    suite_add_tcase(s, tc);

    tc = tcase_create("pools");
    tcase_add_test(tc, pools_fall_back_in_order);
    tcase_add_test(tc, pools_report_no_fit_with_the_shortfall);
    suite_add_tcase(s, tc);

    tc = tcase_create("minimalloc");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, greedy_planners_pass_checker_on_minimalloc, 0, 6);
    tcase_add_loop_test(tc, best_fits_minimalloc_capacity, 0, 6);
    tcase_add_test(tc, exact_minimises_without_capacity);
    suite_add_tcase(s, tc);

    tc = tcase_create("csv");
    tcase_add_test(tc, csv_reads_good_file);
    tcase_add_loop_test(tc, csv_rejects_malformed_files, 0,
                        sizeof bad_csvs / sizeof bad_csvs[0]);
    tcase_add_test(tc, csv_huge_sizes_are_rejected_by_the_planner);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_main(memplan_suite()); }
