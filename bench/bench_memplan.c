/* bench_memplan — runs every memory planner on a directory of planning
 * problems (the MiniMalloc CSV format; the capacity is the number in the
 * file name, e.g. A.1048576.csv) and prints height against capacity, the
 * lower bound, the time and the exact-search nodes (a measure that does not
 * depend on the machine's load), as a table on stdout and optionally CSV.
 *
 * Invariant: every plan it reports has passed the independent checker; a
 * plan that fails it makes the run exit 1.
 */
#include "memplan/memplan.h"
#include "mcir/mcir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A planner under test: a table name, and whether it only has to fit. */
typedef struct bench_config {
    const char *label;
    const char *planner;
    bool fit_only;
} bench_config;

static const bench_config bench_configs[] = {
    {"none", "none", false},
    {"greedy-size", "greedy-size", false},
    {"greedy-conflict", "greedy-conflict", false},
    {"greedy-breadth", "greedy-breadth", false},
    {"exact (fit)", "exact", true},
    {"exact", "exact", false},
    {"best", "best", false},
};

static int bench_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Capacity from a name like "A.1048576.csv"; 0 when there is none. */
static int64_t bench_capacity(const char *name)
{
    const char *dot = strchr(name, '.');
    if (!dot)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(dot + 1, &end, 10);
    if (errno || end == dot + 1 || strcmp(end, ".csv") != 0 || v < 0)
        return 0;
    return v;
}

static void bench_usage(FILE *out)
{
    fprintf(out, "usage: bench_memplan [--csv FILE] [--time-limit SEC] "
                 "[--planner NAME] [DIR]\n"
                 "DIR defaults to %s\n", MCIR_BENCH_DEFAULT_DIR);
}

int main(int argc, char **argv)
{
    const char *dir = MCIR_BENCH_DEFAULT_DIR, *csv_path = NULL, *only = NULL;
    double time_limit = 10.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc) {
            csv_path = argv[++i];
        } else if (strcmp(argv[i], "--time-limit") == 0 && i + 1 < argc) {
            time_limit = strtod(argv[++i], NULL);
            if (!(time_limit > 0)) {
                bench_usage(stderr);
                return 2;
            }
        } else if (strcmp(argv[i], "--planner") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0) {
            bench_usage(stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            bench_usage(stderr);
            return 2;
        } else {
            dir = argv[i];
        }
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "%s: error: cannot open: %s\n", dir, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n_names = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".csv") != 0)
            continue;
        char **grown = realloc(names, (n_names + 1) * sizeof *names);
        if (!grown)
            break;
        names = grown;
        names[n_names++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n_names, sizeof *names, bench_cmp_str);
    FILE *csv_out = NULL;
    mcir_outfile csv_file;
    if (csv_path) {
        mcir_diag diag = mcir_diag_stderr();
        if (!mcir_outfile_open(&csv_file, csv_path, &diag))
            return 1;
        csv_out = csv_file.f;
        fprintf(csv_out, "instance,buffers,capacity,lower_bound,planner,"
                         "winner,height,height_over_capacity,fits,optimal,"
                         "seconds,nodes\n");
    }
    printf("%-16s %7s %9s %9s  %-16s %9s %7s %4s %4s %8s %9s\n", "instance",
           "buffers", "capacity", "lower", "planner", "height", "h/cap",
           "fits", "opt", "seconds", "nodes");
    int rc = 0;
    for (size_t k = 0; k < n_names; k++) {
        char path[4096], why[512];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        mcir_memplan_csv csv;
        if (!mcir_memplan_csv_read(path, NULL, &csv, why, sizeof why)) {
            fprintf(stderr, "%s\n", why);
            rc = 1;
            continue;
        }
        int64_t cap = bench_capacity(names[k]);
        mcir_memplan_pool pool = {"arena", cap};
        mcir_memplan_problem pb = {.buffers = csv.buffers,
                                   .n_buffers = csv.n,
                                   .pools = &pool,
                                   .n_pools = 1,
                                   .alignment = 1};
        for (size_t c = 0; c < sizeof bench_configs / sizeof bench_configs[0];
             c++) {
            const bench_config *cf = &bench_configs[c];
            if (only && strcmp(only, cf->planner) != 0)
                continue;
            mcir_memplan_options opt = {.planner = cf->planner,
                                        .time_limit_s = time_limit,
                                        .stop_when_fits = cf->fit_only};
            mcir_memplan_result res;
            mcir_memplan_status st = mcir_memplan_run(&pb, &opt, &res);
            if (st != MCIR_MEMPLAN_OK && st != MCIR_MEMPLAN_NO_FIT) {
                fprintf(stderr, "%s: error: %s\n", path, res.message);
                rc = 1;
                continue;
            }
            /* An overflowing plan is reported as is, and checked as if the
             * pool were unbounded: only its capacity may be exceeded. */
            bool fits = cap == 0 || res.arena_bytes <= cap;
            mcir_memplan_pool unbounded = {"arena", 0};
            mcir_memplan_problem checked = pb;
            if (!fits)
                checked.pools = &unbounded;
            if (!mcir_memplan_check(&checked, &res, why, sizeof why)) {
                fprintf(stderr, "%s: %s: plan fails the checker: %s\n", path,
                        cf->label, why);
                rc = 1;
            }
            double ratio = (double)res.arena_bytes /
                           (double)(cap ? cap : res.lower_bound_bytes
                                              ? res.lower_bound_bytes : 1);
            printf("%-16s %7zu %9lld %9lld  %-16s %9lld %7.3f %4s %4s %8.3f "
                   "%9lld\n",
                   names[k], csv.n, (long long)cap,
                   (long long)res.lower_bound_bytes, cf->label,
                   (long long)res.arena_bytes, ratio, fits ? "yes" : "NO",
                   res.optimal ? "yes" : "-", res.seconds,
                   (long long)res.nodes);
            fflush(stdout);
            if (csv_out)
                fprintf(csv_out,
                        "%s,%zu,%lld,%lld,%s,%s,%lld,%.4f,%d,%d,%.4f,%lld\n",
                        names[k], csv.n, (long long)cap,
                        (long long)res.lower_bound_bytes, cf->label,
                        res.planner, (long long)res.arena_bytes, ratio, fits,
                        res.optimal, res.seconds, (long long)res.nodes);
            mcir_memplan_result_free(&res);
        }
        mcir_memplan_csv_free(&csv);
    }
    if (csv_out) {
        mcir_diag diag = mcir_diag_stderr();
        if (!mcir_outfile_commit(&csv_file, &diag))
            rc = 1;
    }
    for (size_t k = 0; k < n_names; k++)
        free(names[k]);
    free(names);
    return rc;
}
