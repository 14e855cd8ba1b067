/*
 * catalog.h — the rule catalog: memory properties and the patterns that
 * establish them, loaded from YAML (docs/catalog.md). The built-in
 * catalog/default.yaml is embedded in the library; users add files.
 *
 * Invariant: a catalog that loaded is fully resolved — every op regex was
 * compiled (once) and matched at least one op, every check, action,
 * property, variable and pattern node a rule names exists — so the rewrite
 * engine never meets an unknown name.
 *
 *     mcir_diag d = mcir_diag_stderr();
 *     mcir_catalog *c = mcir_catalog_new();
 *     if (!mcir_catalog_load_default(c, &d) ||
 *         !mcir_catalog_load_file(c, "my_rules.yaml", &d))
 *         ...;                      // "my_rules.yaml:12:9: error: ..."
 *     mcir_rewrite_run(g, c, mcir_target_find("sm_90"), trace, &d);
 *     mcir_catalog_free(c);
 */
#ifndef MCIR_CATALOG_H
#define MCIR_CATALOG_H

#include "mcir/mcir.h"
#include "properties/properties.h"

typedef struct mcir_catalog mcir_catalog;

/* A memory property: the MCIR property schema. */
typedef struct mcir_property_decl {
    const char *name;
    const char *description;
    /* checks every pattern establishing the property must run */
    int n_conditions;
    const mcir_check_desc **legality_conditions;
    /* the rewrite actions that may establish it */
    int n_rewrite_rules;
    mcir_action *rewrite_rules;
    const char *lowering_strategy;   /* how kernelplan lowers a node with it */
    mcir_loc loc;
} mcir_property_decl;

/* A value a pattern variable must hold: a weight whose elements all equal
 * `value` within relative tolerance `tol`. */
typedef struct mcir_value_constraint {
    int var;
    double value, tol;
} mcir_value_constraint;

/* One alternative shape of a pattern node. */
typedef struct mcir_pattern_form {
    const char *op_regex;
    bool ops[MCIR_OP_COUNT];         /* ops the regex matches (full match) */
    const char *name_regex;          /* graph node name constraint, or NULL */
    void *name_code;                 /* compiled name regex (pcre2_code *) */
    void *name_match_ctx;            /* its match limits (pcre2_match_context *) */
    /* Names on which the regex hit PCRE2's match or depth limit (counted
     * as not matching) since the count was last reset, and the last one:
     * the rewrite engine resets them per run and traces them. */
    int *name_limit_hits;
    const char **name_limit_last;
    int n_inputs;
    int *input_vars;                 /* variable index, -1 for "_" */
    bool *input_optional;            /* "X?": may be absent (trailing) */
    bool commutative;                /* may swap two inputs if the op commutes */
    bool unordered;                  /* may swap two inputs whatever the op */
    int n_attrs;
    mcir_attr *attrs;                /* attribute constraints (value or default) */
    int n_values;
    mcir_value_constraint *values;
    int n_constants;
    int *constant_vars;              /* must be bound to weights */
    mcir_loc loc;
} mcir_pattern_form;

typedef struct mcir_pattern_node {
    const char *id;
    int out_var;
    bool optional;
    int passthrough_var;             /* optional: the input standing in for out */
    int n_forms;
    mcir_pattern_form *forms;
    mcir_loc loc;
} mcir_pattern_node;

typedef struct mcir_check_use {
    const mcir_check_desc *check;
    mcir_param_value *params;        /* indexed like check->params */
    mcir_loc loc;
} mcir_check_use;

typedef struct mcir_state_decl {
    int var;
    mcir_memory_state state;
} mcir_state_decl;

/* A rule: a small DAG of ops (node 0 is the anchor, the last op; every
 * other node produces an input of an earlier one), the legality checks,
 * the property it establishes, the rewrite and the memory states it gives
 * the intermediates. */
typedef struct mcir_pattern {
    const char *name;
    const char *description;
    /* the properties it establishes ("property: name" or a list); the
     * first is the one the trace names */
    const mcir_property_decl *property;
    int n_properties;
    const mcir_property_decl **properties;
    int n_nodes;
    mcir_pattern_node *nodes;
    int n_vars;
    const char **var_names;
    int n_checks;
    mcir_check_use *checks;
    mcir_action action;
    mcir_param_value *action_params; /* indexed like the action's params */
    int n_states;
    mcir_state_decl *states;
    bool trace_rejections;           /* "trace: all" (default) vs "applied" */
    int priority;                    /* higher runs first; ties keep file order */
    mcir_loc loc;
} mcir_pattern;

mcir_catalog *mcir_catalog_new(void);
void mcir_catalog_free(mcir_catalog *c);
/* The embedded catalog/default.yaml. */
bool mcir_catalog_load_default(mcir_catalog *c, mcir_diag *d);
bool mcir_catalog_load_file(mcir_catalog *c, const char *path, mcir_diag *d);
/* YAML text; `path` names it in diagnostics. */
bool mcir_catalog_load_string(mcir_catalog *c, const char *text, size_t len,
                              const char *path, mcir_diag *d);

int mcir_catalog_n_patterns(const mcir_catalog *c);
const mcir_pattern *mcir_catalog_pattern(const mcir_catalog *c, int i);
int mcir_catalog_n_properties(const mcir_catalog *c);
const mcir_property_decl *mcir_catalog_property(const mcir_catalog *c, int i);
const mcir_property_decl *mcir_catalog_find_property(const mcir_catalog *c,
                                                     const char *name);
/* Whether a graph node's name matches a form's name regex (true if the
 * form has none). Bounded by PCRE2 match and depth limits. */
bool mcir_pattern_form_name_ok(const mcir_pattern_form *f, const char *name);

/* A rule test (`tests:` in a catalog file, docs/catalog.md): a small graph
 * and what the named rule must do to it when the whole catalog runs. */
typedef enum mcir_rule_expect {
    MCIR_EXPECT_APPLIED,      /* the rule rewrites (at the `at` nodes) */
    MCIR_EXPECT_REJECTED,     /* it matches and a legality check (`check`) refuses */
    MCIR_EXPECT_NOT_MATCHED,  /* it never matches */
} mcir_rule_expect;

typedef struct mcir_rule_test {
    const char *rule;          /* the pattern's name */
    const char *graph_path;    /* graph.json, relative paths resolved; or NULL */
    const char *graph_text;    /* an inline graph.json; or NULL */
    const char *graph_label;   /* names the inline graph in messages */
    mcir_rule_expect expect;
    int n_at;
    const char **at;           /* graph nodes the match must include */
    const char *check;         /* REJECTED: the check that refuses, or NULL */
    bool verify;               /* the rewritten graph must pass --verify */
    mcir_loc loc;              /* of the test's entry; loc.path is its file */
} mcir_rule_test;

int mcir_catalog_n_tests(const mcir_catalog *c);
const mcir_rule_test *mcir_catalog_test(const mcir_catalog *c, int i);

/* The embedded default catalog text. */
extern const char mcir_catalog_default_yaml[];
extern const size_t mcir_catalog_default_yaml_size;

#endif /* MCIR_CATALOG_H */
