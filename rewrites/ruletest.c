/*
 * ruletest.c — the rule tests of a catalog (`tests:` entries, run by
 * `mcirc --test-catalog FILE`): each test reads a small graph, runs the
 * whole loaded catalog over it as a compile would, and compares what the
 * trace says the named rule did with what the test expects — applied (at
 * given nodes, and the result still computes the same), rejected (by a
 * given check) or never matched.
 *
 * Invariant: a test passes only on what the trace records; the report line
 * of a failure quotes the records of the rule it found instead.
 */
#include <string.h>

#include <jansson.h>

#include "rewrites/rewrites.h"

static const char *expect_name(mcir_rule_expect e) {
    switch (e) {
    case MCIR_EXPECT_APPLIED: return "applied";
    case MCIR_EXPECT_REJECTED: return "rejected";
    case MCIR_EXPECT_NOT_MATCHED: return "not_matched";
    }
    return "?";
}

/* Whether the record's "matched" list holds every node of test->at. */
static bool matched_at(const json_t *rec, const mcir_rule_test *t) {
    const json_t *m = json_object_get(rec, "matched");
    for (int i = 0; i < t->n_at; i++) {
        bool found = false;
        for (size_t k = 0; k < json_array_size(m) && !found; k++) {
            const char *s = json_string_value(json_array_get(m, k));
            found = s && strcmp(s, t->at[i]) == 0;
        }
        if (!found) return false;
    }
    return true;
}

/* The first failing check of a rejected record ("structure" for a near
 * miss: the pattern matched only part of the way). */
static const char *failed_check(const json_t *rec) {
    const json_t *l = json_object_get(rec, "legality");
    for (size_t i = 0; i < json_array_size(l); i++) {
        const json_t *c = json_array_get(l, i);
        if (!json_is_true(json_object_get(c, "ok")))
            return json_string_value(json_object_get(c, "check"));
    }
    return NULL;
}

static bool failed(const json_t *rec, const char *check) {
    const json_t *l = json_object_get(rec, "legality");
    for (size_t i = 0; i < json_array_size(l); i++) {
        const json_t *c = json_array_get(l, i);
        const char *name = json_string_value(json_object_get(c, "check"));
        if (!json_is_true(json_object_get(c, "ok")) && name && strcmp(name, check) == 0)
            return true;
    }
    return false;
}

/* What the trace says the rule did, in a few words, for a failure. */
static void describe(const mcir_trace *trace, const char *rule, char *buf, size_t n) {
    int applied = 0, rejected = 0, near = 0;
    const char *why = NULL;
    for (int i = 0; i < mcir_trace_count(trace); i++) {
        const json_t *rec = mcir_trace_get(trace, i);
        const char *r = json_string_value(json_object_get(rec, "rule"));
        const char *dec = json_string_value(json_object_get(rec, "decision"));
        if (!r || strcmp(r, rule) != 0 || !dec) continue;
        if (strcmp(dec, "applied") == 0)
            applied++;
        else {
            const char *f = failed_check(rec);
            if (f && strcmp(f, "structure") == 0)
                near++;
            else {
                rejected++;
                if (!why) why = f;
            }
        }
    }
    snprintf(buf, n, "got %d applied, %d rejected%s%s%s, %d near misses", applied, rejected,
             why ? " (first by " : "", why ? why : "", why ? ")" : "", near);
}

/* Runs one test; true if it passed. Problems reading its graph are
 * reported through d and count as a failure. */
static bool run_test(const mcir_catalog *c, const mcir_rule_test *t, const mcir_target *target,
                     FILE *report, mcir_diag *d) {
    mcir_graph *g = t->graph_text ? mcir_graph_read_json_string(t->graph_text, t->graph_label, d)
                                  : mcir_graph_read_json(t->graph_path, d);
    if (!g) {
        fprintf(report, "FAIL  %s:%d:%d  %s: its graph does not read (above)\n", t->loc.path,
                t->loc.line, t->loc.col, t->rule);
        return false;
    }
    mcir_graph *before = mcir_graph_clone(g);
    mcir_trace *trace = mcir_trace_new();
    bool ok = mcir_rewrite_run(g, c, target, trace, d);
    char why[256] = "";
    if (!ok) snprintf(why, sizeof why, "the rewrite engine failed (above)");
    bool seen = false;
    for (int i = 0; ok && i < mcir_trace_count(trace) && !seen; i++) {
        const json_t *rec = mcir_trace_get(trace, i);
        const char *r = json_string_value(json_object_get(rec, "rule"));
        const char *dec = json_string_value(json_object_get(rec, "decision"));
        if (!r || strcmp(r, t->rule) != 0 || !dec) continue;
        bool applied = strcmp(dec, "applied") == 0;
        const char *f = applied ? NULL : failed_check(rec);
        bool near = f && strcmp(f, "structure") == 0;
        switch (t->expect) {
        case MCIR_EXPECT_APPLIED: seen = applied && matched_at(rec, t); break;
        case MCIR_EXPECT_REJECTED:
            seen = !applied && !near && matched_at(rec, t) && (!t->check || failed(rec, t->check));
            break;
        case MCIR_EXPECT_NOT_MATCHED:
            if (!near) {
                snprintf(why, sizeof why, "it matched and was %s", dec);
                ok = false;
            }
            break;
        }
    }
    if (ok && t->expect == MCIR_EXPECT_NOT_MATCHED) seen = true;
    if (ok && !seen) {
        char got[160];
        describe(trace, t->rule, got, sizeof got);
        snprintf(why, sizeof why, "expected %s%s%s%s; %s", expect_name(t->expect),
                 t->check ? " by " : "", t->check ? t->check : "",
                 t->n_at ? " at the given nodes" : "", got);
        ok = false;
    }
    if (ok && t->verify) {
        FILE *sink = tmpfile();
        ok = mcir_rewrite_verify(before, g, 0, sink, d);
        if (!ok) snprintf(why, sizeof why, "the rewritten graph does not verify");
        if (sink) fclose(sink);
    }
    fprintf(report, "%s  %s:%d:%d  %s: %s%s%s\n", ok ? "PASS" : "FAIL", t->loc.path, t->loc.line,
            t->loc.col, t->rule, ok ? expect_name(t->expect) : why,
            ok && t->verify ? ", verified" : "", "");
    mcir_trace_free(trace);
    mcir_graph_free(before);
    mcir_graph_free(g);
    return ok;
}

int mcir_rule_tests_run(const mcir_catalog *c, const char *path, const mcir_target *target,
                        FILE *report, int *n_run, mcir_diag *d) {
    int failures = 0, run = 0;
    for (int i = 0; i < mcir_catalog_n_tests(c); i++) {
        const mcir_rule_test *t = mcir_catalog_test(c, i);
        if (path && strcmp(t->loc.path, path) != 0) continue;
        run++;
        if (!run_test(c, t, target, report, d)) failures++;
    }
    if (n_run) *n_run = run;
    return failures;
}
