/* mcir-memplan — plans a memory-allocation problem given on its own, in the
 * public CSV format `id,lower,upper,size` (half-open lifetimes), and writes
 * `id,lower,upper,size,offset`.
 *
 * Invariant: output is written only for a placement that passed the
 * independent checker and fits the capacity; it goes through mcir_outfile
 * (a temporary renamed into place; '-' is stdout; a link or a device is
 * written through), so a failed run leaves no partial file behind.
 * Exit status: 0 success, 1 bad input or no fit, 2 usage error.
 */
#include "memplan/memplan.h"
#include "mcir/mcir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void memplan_tool_usage(FILE *out)
{
    fprintf(out,
            "usage: mcir-memplan [options] INPUT.csv\n"
            "  --capacity N       bytes available (0 = unbounded, default)\n"
            "  --planner NAME     planner to use (default best); "
            "'--planner help' lists them\n"
            "  --time-limit SEC   budget of the exact search (default 10)\n"
            "  --fit-only         stop as soon as a placement fits "
            "--capacity\n"
            "  -o FILE            write the placement to FILE (default "
            "stdout, also '-')\n"
            "INPUT.csv has the header id,lower,upper,size; '-' reads stdin.\n");
}

static int memplan_tool_usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "mcir-memplan: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    memplan_tool_usage(stderr);
    return 2;
}

static void search_progress(void *ctx, double seconds, double budget_s,
                            int64_t nodes, int64_t best_height)
{
    mcir_progress_set(ctx, nodes, " (%.0f of %.0f s budget, best height %lld)",
                      seconds, budget_s, (long long)best_height);
}

int main(int argc, char **argv)
{
    const char *input = NULL, *output = NULL, *planner = "best";
    int64_t capacity = 0;
    double time_limit = 10.0;
    bool fit_only = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            memplan_tool_usage(stdout);
            return 0;
        } else if (strcmp(a, "--capacity") == 0) {
            if (!has_value)
                return memplan_tool_usage_error("%s needs a value", a);
            char *end;
            errno = 0;
            long long v = strtoll(argv[++i], &end, 10);
            if (errno || *end || end == argv[i] || v < 0)
                return memplan_tool_usage_error(
                    "--capacity '%s' is not a non-negative integer", argv[i]);
            capacity = v;
        } else if (strcmp(a, "--planner") == 0) {
            if (!has_value)
                return memplan_tool_usage_error("%s needs a value", a);
            planner = argv[++i];
            if (strcmp(planner, "help") == 0) {
                printf("planners:\n");
                mcir_memplan_planners_print(stdout);
                return 0;
            }
            if (!mcir_memplan_planner_find(planner))
                return memplan_tool_usage_error(
                    "unknown planner '%s' (try --planner help)", planner);
        } else if (strcmp(a, "--time-limit") == 0) {
            if (!has_value)
                return memplan_tool_usage_error("%s needs a value", a);
            char *end;
            errno = 0;
            time_limit = strtod(argv[++i], &end);
            if (errno || *end || end == argv[i] || !(time_limit > 0) ||
                time_limit > 1e6)
                return memplan_tool_usage_error(
                    "--time-limit '%s' is not a positive number of seconds",
                    argv[i]);
        } else if (strcmp(a, "--fit-only") == 0) {
            fit_only = true;
        } else if (strcmp(a, "-o") == 0) {
            if (!has_value)
                return memplan_tool_usage_error("%s needs a value", a);
            output = argv[++i];
        } else if (a[0] == '-' && a[1] != '\0') {
            return memplan_tool_usage_error("unknown option '%s'", a);
        } else if (input) {
            return memplan_tool_usage_error("more than one input ('%s')", a);
        } else {
            input = a;
        }
    }
    if (!input)
        return memplan_tool_usage_error("%s", "no input file");

    const char *path = strcmp(input, "-") == 0 ? "<stdin>" : input;
    char why[512];
    mcir_memplan_csv csv;
    if (!mcir_memplan_csv_read(path, strcmp(input, "-") == 0 ? stdin : NULL,
                               &csv, why, sizeof why)) {
        fprintf(stderr, "%s\n", why);
        return 1;
    }
    mcir_memplan_pool pool = {"capacity", capacity};
    mcir_memplan_problem problem = {.buffers = csv.buffers,
                                    .n_buffers = csv.n,
                                    .pools = &pool,
                                    .n_pools = 1,
                                    .alignment = 1};
    mcir_memplan_options options = {.planner = planner,
                                    .time_limit_s = time_limit,
                                    .stop_when_fits = fit_only};
    /* on a terminal, the exact search shows how far it got */
    mcir_progress *progress = mcir_progress_begin("memplan", "search nodes", 0);
    if (progress) {
        options.progress = search_progress;
        options.progress_ctx = progress;
    }
    mcir_memplan_result res;
    mcir_memplan_status st = mcir_memplan_run(&problem, &options, &res);
    mcir_progress_end(progress);
    int rc = 0;
    if (st == MCIR_MEMPLAN_NO_FIT) {
        fprintf(stderr, "%s: error: no placement found within capacity %lld "
                "(best height %lld misses by %lld bytes; lower bound %lld)\n",
                path, (long long)capacity, (long long)res.arena_bytes,
                (long long)(res.arena_bytes - capacity),
                (long long)res.lower_bound_bytes);
        rc = 1;
    } else if (st != MCIR_MEMPLAN_OK) {
        fprintf(stderr, "%s: error: %s\n", path, res.message);
        rc = 1;
    } else if (!mcir_memplan_check(&problem, &res, why, sizeof why)) {
        fprintf(stderr, "%s: error: internal: the placement fails the "
                "checker: %s\n", path, why);
        rc = 1;
    }
    if (rc == 0) {
        /* mcir_outfile: "-" or no -o is stdout; a link or a device is
         * written through; nothing is left behind on failure */
        mcir_diag d = mcir_diag_stderr();
        mcir_outfile out;
        if (!mcir_outfile_open(&out, output ? output : "-", &d)) {
            rc = 1;
        } else if (!mcir_memplan_csv_write(out.f, &csv, res.offsets)) {
            fprintf(stderr, "%s: error: cannot write: %s\n", output ? output : "<stdout>",
                    strerror(errno));
            mcir_outfile_discard(&out);
            rc = 1;
        } else if (!mcir_outfile_commit(&out, &d)) {
            rc = 1;
        }
    }
    if (st == MCIR_MEMPLAN_OK || st == MCIR_MEMPLAN_NO_FIT)
        fprintf(stderr, "mcir-memplan: %zu buffers, height %lld, lower bound "
                "%lld, capacity %lld, planner %s (%s), %s, %lld nodes, %.3f s\n",
                csv.n, (long long)res.arena_bytes,
                (long long)res.lower_bound_bytes, (long long)capacity,
                planner, res.planner, res.optimal ? "optimal" : "not proven",
                (long long)res.nodes, res.seconds);
    mcir_memplan_result_free(&res);
    mcir_memplan_csv_free(&csv);
    return rc;
}
