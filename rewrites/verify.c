/*
 * verify.c — a rewrite checked numerically: the graph before and after run
 * through the reference interpreter on the same seeded inputs (inputs are
 * seeded by name, and rewrites keep input and output names), outputs
 * compared by name within a tolerance per dtype.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "rewrites/rewrites.h"

double mcir_rewrite_tolerance(mcir_dtype dtype) { return mcir_compare_tolerance(dtype); }

bool mcir_rewrite_verify(const mcir_graph *before, const mcir_graph *after, uint64_t seed,
                         FILE *report, mcir_diag *d) {
    mcir_env *eb = mcir_env_new(before, seed);
    mcir_env *ea = mcir_env_new(after, seed);
    bool ok = mcir_interp_run(before, eb, d) && mcir_interp_run(after, ea, d);
    /* graphs with ranks: every rank's outputs (a one-rank side against each) */
    int R = mcir_env_ranks(eb) > mcir_env_ranks(ea) ? mcir_env_ranks(eb) : mcir_env_ranks(ea);
    for (int k = 0; ok && k < before->n_outputs * R; k++) {
        int i = k % before->n_outputs, rank = k / before->n_outputs;
        if (mcir_env_ranks(eb) > 1) mcir_env_select_rank(eb, rank);
        if (mcir_env_ranks(ea) > 1) mcir_env_select_rank(ea, rank);
        const mcir_tensor *tb = before->outputs[i];
        const mcir_tensor *ta = mcir_graph_find_tensor(after, tb->name);
        if (!ta || mcir_tensor_numel(ta) != mcir_tensor_numel(tb)) {
            mcir_error(d, (mcir_loc){after->path, 0, 0},
                       "output '%s' is missing from the rewritten graph or changed size",
                       tb->name);
            ok = false;
            break;
        }
        mcir_compare_result r;
        if (ta->dtype != tb->dtype || !mcir_env_compare(ea, ta, eb, tb, &r)) {
            mcir_error(d, (mcir_loc){after->path, 0, 0},
                       "output '%s' was not computed or changed dtype", tb->name);
            ok = false;
            break;
        }
        bool pass = mcir_compare_within(&r, mcir_rewrite_tolerance(tb->dtype));
        if (report)
            fprintf(report, "output %s%s: max abs err %.3g, max rel err %.3g%s\n", tb->name,
                    R > 1 ? mcir_arena_printf(after->arena, " (rank %d)", rank) : "", r.max_abs, r.max_rel,
                    pass ? "" : r.nonfinite_mismatch ? " (NaN/Inf mismatch)" : " (beyond tolerance)");
        if (!pass) ok = false;
    }
    mcir_env_free(eb);
    mcir_env_free(ea);
    return ok;
}

/* Outputs of `original` and of a copy rewritten by the first k rewrites,
 * compared; true if they agree. The copy's trace goes to trace. */
static bool agrees_after(const mcir_graph *original, const mcir_catalog *c,
                         const mcir_target *target, int k, uint64_t seed, mcir_trace *trace,
                         FILE *report) {
    mcir_graph *g = mcir_graph_clone(original);
    char *buf = NULL;
    size_t len = 0;
    FILE *sink = open_memstream(&buf, &len);
    mcir_diag quiet = mcir_diag_to(sink);
    mcir_rewrite_options o = {.max_applied = k};
    bool ok = mcir_rewrite_run_ex(g, c, target, trace, &o, NULL, &quiet) &&
              mcir_rewrite_verify(original, g, seed, report, &quiet);
    if (sink) fclose(sink);
    free(buf);
    mcir_graph_free(g);
    return ok;
}

int mcir_rewrite_bisect(const mcir_graph *original, const mcir_catalog *c,
                        const mcir_target *target, int applied, uint64_t seed, FILE *report) {
    /* the smallest k whose rewrites break the outputs: agreement after 0
     * rewrites is given; after `applied` (all) it failed */
    int lo = 0, hi = applied;
    if (hi < 1 || agrees_after(original, c, target, hi, seed, NULL, NULL)) return 0;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (agrees_after(original, c, target, mid, seed, NULL, NULL)) lo = mid;
        else hi = mid;
    }
    /* rewrite hi: the hi-th applied record of a run stopped there */
    mcir_trace *trace = mcir_trace_new();
    char *errs = NULL;
    size_t len = 0;
    FILE *err = open_memstream(&errs, &len);
    agrees_after(original, c, target, hi, seed, trace, err);
    if (err) fclose(err);
    int seen = 0;
    for (int i = 0; i < mcir_trace_count(trace) && report; i++) {
        json_t *r = mcir_trace_get(trace, i);
        const char *stage = json_string_value(json_object_get(r, "stage"));
        const char *dec = json_string_value(json_object_get(r, "decision"));
        if (!stage || strcmp(stage, "rewrite") || !dec || strcmp(dec, "applied")) continue;
        if (++seen != hi) continue;
        char *matched = json_dumps(json_object_get(r, "matched"), JSON_COMPACT);
        char *result = json_dumps(json_object_get(r, "result"), JSON_COMPACT);
        fprintf(report,
                "verify: the outputs first diverge after rewrite %d of %d: rule '%s' at '%s' "
                "(matched %s, made %s)\n",
                hi, applied, json_string_value(json_object_get(r, "rule")),
                json_string_value(json_object_get(r, "anchor")), matched ? matched : "[]",
                result ? result : "[]");
        free(matched);
        free(result);
    }
    for (char *line = errs, *next; report && line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        fprintf(report, "verify:   after it, %s\n", line);
    }
    free(errs);
    mcir_trace_free(trace);
    return hi;
}
