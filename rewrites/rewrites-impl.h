/*
 * rewrites-impl.h — internals shared by the files of rewrites/: the
 * context a rewrite action runs in and the action table.
 */
#ifndef MCIR_REWRITES_IMPL_H
#define MCIR_REWRITES_IMPL_H

#include "rewrites/rewrites.h"

#define MCIR_ACTION_MAX_RESULTS 64

/* One application of an action to one match. */
typedef struct mcir_action_ctx {
    mcir_graph *g;
    const mcir_pattern *p;
    const mcir_match *m;
    const mcir_param_value *params;  /* the pattern's action parameters */
    const char *origin_nodes;        /* "a,b,c": the matched node names */
    /* out: nodes made or changed, and why the action declined */
    int n_results;
    mcir_node *results[MCIR_ACTION_MAX_RESULTS];
    char fail[512];
} mcir_action_ctx;

typedef struct mcir_action_impl {
    /* Rewrites the match; false (with ctx->fail) leaves the graph as it
     * was. */
    bool (*apply)(mcir_action_ctx *ctx);
    /* Whether the match is already in the state the action would make
     * (an annotation present, a group formed): then nothing is tried or
     * traced. NULL: never. */
    bool (*done)(const mcir_action_ctx *ctx);
    /* Replaces matched nodes: the engine removes the ones left unused. */
    bool structural;
} mcir_action_impl;

extern const mcir_action_impl mcir_action_impls[MCIR_ACTION_COUNT];

#endif /* MCIR_REWRITES_IMPL_H */
