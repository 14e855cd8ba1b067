/*
 * rewrites.h — the rewrite engine: matches the catalog's patterns on a
 * graph, runs their legality checks, annotates the memory properties and
 * applies the rewrite actions, to a fixpoint, recording every decision in
 * the trace. Also: the human form of the trace (--trace) and the numerical
 * check of a rewrite against the reference interpreter (--verify).
 *
 * Invariants: after every structural rewrite the graph is sorted, inferred
 * and verified; graph inputs and the names of graph outputs never change;
 * every node a rewrite creates records its rule and the nodes it replaced
 * (origin_rule, origin_nodes).
 *
 *     mcir_trace *trace = mcir_trace_new();
 *     mcir_graph *before = mcir_graph_clone(g);
 *     if (!mcir_rewrite_run(g, catalog, mcir_target_find("sm_90"), trace, &d)) ...;
 *     mcir_trace_print_human(trace, stderr);
 *     bool same = mcir_rewrite_verify(before, g, 0, stdout, &d);
 */
#ifndef MCIR_REWRITES_H
#define MCIR_REWRITES_H

#include "catalog/catalog.h"
#include "mcir/mcir.h"
#include "properties/properties.h"
#include "properties/target.h"

/* Rewrites g to a fixpoint with the catalog's patterns, in catalog order
 * (after each applied rewrite the scan restarts at the first pattern;
 * candidates are tried from the last node to the first). target NULL:
 * MCIR_DEFAULT_ARCH. trace may be NULL. Returns false only on an internal
 * failure (a rewrite that broke the graph), reported through d. */
bool mcir_rewrite_run(mcir_graph *g, const mcir_catalog *c, const mcir_target *target,
                      mcir_trace *trace, mcir_diag *d);

/* What a run did, by kind of rewrite. "Fusions" are what a user counts:
 * structural rewrites (decomposed ops → one op) and fusion groups; the
 * annotations and in-place marks are bookkeeping. */
typedef struct mcir_rewrite_stats {
    int applied;          /* every applied record */
    int structural;       /* ops replaced (fuse_attention, replace_op, ...) */
    int groups;           /* fuse_group */
    int annotations;      /* annotate_only */
    int in_place;         /* inplace */
    int refused;          /* rewrites that would have reproduced what they matched */
} mcir_rewrite_stats;

typedef struct mcir_rewrite_options {
    /* Stop after this many applied rewrites (0: run to the fixpoint), for
     * finding the first rewrite after which outputs diverge. */
    int max_applied;
    /* Near misses: record every pattern that matched its anchor and at
     * least one more node before it stopped (--trace=all), not only those
     * that got most of the way. */
    bool all_near_misses;
} mcir_rewrite_options;

/* mcir_rewrite_run with options (may be NULL) and statistics (may be NULL).
 * A rewrite whose result is the subgraph it matched is refused (traced as
 * rejected, "rewrite:ACTION"); rules that undo each other's rewrites are an
 * error naming them and the node they keep rewriting, found when the
 * graph first returns to a state it was in. */
bool mcir_rewrite_run_ex(mcir_graph *g, const mcir_catalog *c, const mcir_target *target,
                         mcir_trace *trace, const mcir_rewrite_options *options,
                         mcir_rewrite_stats *stats, mcir_diag *d);

/* The --trace form: for every record, the rule, the matched nodes, each
 * legality check with what it measured, the decision and the result. */
void mcir_trace_print_human(const mcir_trace *t, FILE *out);

/* Runs `before` and `after` through the reference interpreter on the same
 * seeded inputs and compares every output of `before` with the output of
 * the same name in `after`, printing "output NAME: max abs err X, max rel
 * err Y" per output to report (may be NULL). rel err is max|a-b| /
 * max|before|. Returns true if every output is within the tolerance of
 * its dtype (mcir_rewrite_tolerance). */
bool mcir_rewrite_verify(const mcir_graph *before, const mcir_graph *after, uint64_t seed,
                         FILE *report, mcir_diag *d);
/* Relative tolerance for a dtype: f32 1e-4, f16/bf16 2e-2. */
double mcir_rewrite_tolerance(mcir_dtype dtype);

/* When the rewritten graph does not verify: reruns the rewrites on copies
 * of original (the graph as read), stopping after k of the `applied` ones,
 * and bisects for the first k after which outputs diverge (seeded inputs).
 * Prints that rewrite (rule, anchor, matched and made nodes) and the
 * errors after it to report; returns k, or 0 if every prefix agrees (a
 * divergence that needs the whole sequence, or inputs from files). */
int mcir_rewrite_bisect(const mcir_graph *original, const mcir_catalog *c,
                        const mcir_target *target, int applied, uint64_t seed, FILE *report);

/* --------------------------------------------------- pattern matching */

/* Called for every structural match of a pattern at an anchor, in a fixed
 * order (forms in catalog order, inputs as written before swapped,
 * present optional nodes before absent ones). Return true to stop. */
typedef bool (*mcir_match_fn)(const mcir_match *m, void *ctx);

/* Where the deepest partial match stopped, for "why not" traces. What went
 * wrong is kept as facts; mcir_match_miss_detail turns them into text, so
 * matching formats nothing unless a trace asks. */
typedef enum mcir_miss_kind {
    MCIR_MISS_INPUTS,     /* the node's inputs are not the tensors the pattern shares */
    MCIR_MISS_OP,         /* the tensor's producer is another op */
    MCIR_MISS_NO_NODE,    /* the tensor has no producer to match (or it is in the match) */
    MCIR_MISS_CONSTANTS,  /* constant operands have other values */
} mcir_miss_kind;

typedef struct mcir_match_miss {
    int matched;            /* pattern nodes matched by the deepest attempt */
    int required_matched;   /* of which not optional */
    int node;               /* pattern node that failed next, -1 if none */
    mcir_miss_kind kind;
    const char *node_name;  /* the graph node tried (INPUTS, OP) */
    mcir_op node_op;
    const char *tensor_name;   /* the tensor whose producer was wanted (OP, NO_NODE) */
    mcir_tensor_kind tensor_kind;
    const char *names[32];  /* the graph nodes matched by that attempt */
    mcir_node *nodes[32];
} mcir_match_miss;

/* The human text of a miss of pattern p (as the trace shows it). */
void mcir_match_miss_detail(const mcir_pattern *p, const mcir_match_miss *miss, char *buf,
                            size_t size);

/* Enumerates matches of p whose anchor (pattern node 0, or the node the
 * anchor's out variable leads to if the anchor is optional and absent)
 * produces one of anchor's outputs. Returns the number delivered. miss may
 * be NULL. */
int mcir_pattern_match(const mcir_pattern *p, mcir_graph *g, mcir_node *anchor,
                       mcir_match_fn fn, void *ctx, mcir_match_miss *miss);

/* ---------------------------------------------------------- rule tests */

/* Runs the catalog's rule tests loaded from file `path` (all if NULL) with
 * the whole catalog, one report line per test ("PASS  file:line:col  rule:
 * applied, verified" / "FAIL ... why"). Returns the number that failed;
 * *n_run (may be NULL) gets the number run. */
int mcir_rule_tests_run(const mcir_catalog *c, const char *path, const mcir_target *target,
                        FILE *report, int *n_run, mcir_diag *d);

/* Tensor parallelism (rewrites/tp.c, `mcirc --tp N`): a copy of g (one
 * rank) rewritten into the program each of `ranks` ranks runs — sharded
 * weights, the collectives between — every decision a trace record (stage
 * "tp"). *collectives (may be NULL): how many it inserted. NULL with an
 * error where g already has ranks or the result does not check. */
/* Every all_gather and reduce_scatter of g along an axis with elements
 * before it becomes that collective along axis 0 between two transposes
 * (NCCL moves flat buffers rank by rank); the count, or -1 with an error. */
int mcir_lower_collectives(mcir_graph *g, mcir_trace *trace, mcir_diag *d);
/* A graph of several ranks: a collective that repeats an earlier one (same
 * kind, input and attributes) is dropped for the first's result, and the
 * pure nodes that then repeat earlier ones with it (rule
 * "tp_shared_collective"); how many collectives, or -1 with an error. */
int mcir_merge_collectives(mcir_graph *g, mcir_trace *trace, mcir_diag *d);
mcir_graph *mcir_tp_rewrite(const mcir_graph *g, int ranks, mcir_trace *trace, int *collectives, mcir_diag *d);
/* The same; sequence_parallel (--tp-sp): partial sums that meet a
 * nonlinear elementwise op are reduce_scattered by rows (the tokens), the
 * residual and norms after them run on each rank's rows, and the next
 * product all_gathers them (rule "tp_sequence_parallel"). */
mcir_graph *mcir_tp_rewrite_ex(const mcir_graph *g, int ranks, bool sequence_parallel, mcir_trace *trace,
                               int *collectives, mcir_diag *d);
/* A graph of several ranks: an all_reduce of a row-parallel product (its
 * only use) whose rows split into two halves of 64 or more becomes each
 * half's product and all_reduce, joined by a concat — the first half's
 * all_reduce beside the second half's product — where the target's model
 * says the overlap pays (rule "tp_overlap_chunks"; $MCIR_TP_CHUNKS=always
 * / never). How many, or -1 with an error. */
int mcir_tp_overlap_chunks(mcir_graph *g, const mcir_target *target, mcir_trace *trace, mcir_diag *d);

#endif /* MCIR_REWRITES_H */
