/*
 * fuzz_memplan_csv.c — the memory-planner CSV reader
 * (kernelplan/memplan_csv.c). A small accepted instance is also planned
 * by the greedy planner and its placement checked by the independent
 * checker; instances above 64 buffers are only parsed (the exact search
 * would dominate the run time).
 */
#include "fuzz.h"
#include "memplan/memplan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char empty[1];
    FILE *in = fmemopen(size ? (void *)data : empty, size ? size : 1, "r");
    if (!in) return 0;
    if (!size) fgetc(in); /* fmemopen wants a non-empty buffer: start at its end */
    mcir_memplan_csv csv;
    char why[512] = "";
    bool ok = mcir_memplan_csv_read("fuzz.csv", in, &csv, why, sizeof why);
    fclose(in);
    FUZZ_CHECK(ok || why[0]);
    if (!ok) return 0;
    if (csv.n <= 64) {
        mcir_memplan_problem prob = {.buffers = csv.buffers, .n_buffers = csv.n,
                                     .alignment = 1};
        mcir_memplan_options opt = {.planner = "greedy-size", .time_limit_s = 0.01};
        mcir_memplan_result res;
        mcir_memplan_status st = mcir_memplan_run(&prob, &opt, &res);
        if (st == MCIR_MEMPLAN_OK || st == MCIR_MEMPLAN_NO_FIT) {
            char msg[256];
            bool placed = mcir_memplan_check(&prob, &res, msg, sizeof msg);
            if (!placed) fprintf(stderr, "checker: %s\n", msg);
            FUZZ_CHECK(placed);
        }
        mcir_memplan_result_free(&res);
    }
    mcir_memplan_csv_free(&csv);
    return 0;
}
