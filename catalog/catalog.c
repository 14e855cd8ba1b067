/*
 * catalog.c — the YAML rule catalog loader (format: docs/catalog.md).
 *
 * The YAML text is loaded into a libyaml document, then walked by a schema
 * written out in code: every key is known, every name is resolved against
 * the op table, the check table, the action schemas and the properties
 * declared so far. Every problem is reported as "file:line:col: error:"
 * with the YAML position of the offending node; a file with any error adds
 * nothing to the catalog. Regexes are compiled once with PCRE2 match and
 * depth limits. Nothing here trusts the input: no recursion follows the
 * document's shape, so aliases and cycles cannot run away.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <math.h>
#include <pcre2.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "catalog/catalog.h"

#define MAX_CATALOG_BYTES (16 << 20)
#define MAX_PATTERN_NODES 32
#define MAX_PATTERN_VARS 64
#define REGEX_MATCH_LIMIT 100000
#define REGEX_DEPTH_LIMIT 1000

struct mcir_catalog {
    mcir_arena *arena;
    int n_properties, cap_properties;
    mcir_property_decl **properties;
    int n_patterns, cap_patterns;
    mcir_pattern **patterns;
    int n_codes, cap_codes;
    pcre2_code **codes;              /* owned, freed with the catalog */
    pcre2_match_context *match_ctx;
    int n_tests, cap_tests;
    mcir_rule_test **tests;
};

mcir_catalog *mcir_catalog_new(void) {
    mcir_catalog *c = calloc(1, sizeof *c);
    MCIR_ASSERT(c);
    c->arena = mcir_arena_new();
    c->match_ctx = pcre2_match_context_create(NULL);
    MCIR_ASSERT(c->match_ctx);
    pcre2_set_match_limit(c->match_ctx, REGEX_MATCH_LIMIT);
    pcre2_set_depth_limit(c->match_ctx, REGEX_DEPTH_LIMIT);
    return c;
}

void mcir_catalog_free(mcir_catalog *c) {
    if (!c) return;
    for (int i = 0; i < c->n_codes; i++) pcre2_code_free(c->codes[i]);
    free(c->codes);
    pcre2_match_context_free(c->match_ctx);
    mcir_arena_free(c->arena);
    free(c);
}

int mcir_catalog_n_patterns(const mcir_catalog *c) { return c->n_patterns; }
const mcir_pattern *mcir_catalog_pattern(const mcir_catalog *c, int i) {
    MCIR_ASSERT(i >= 0 && i < c->n_patterns);
    return c->patterns[i];
}
int mcir_catalog_n_tests(const mcir_catalog *c) { return c->n_tests; }
const mcir_rule_test *mcir_catalog_test(const mcir_catalog *c, int i) {
    MCIR_ASSERT(i >= 0 && i < c->n_tests);
    return c->tests[i];
}
int mcir_catalog_n_properties(const mcir_catalog *c) { return c->n_properties; }
const mcir_property_decl *mcir_catalog_property(const mcir_catalog *c, int i) {
    MCIR_ASSERT(i >= 0 && i < c->n_properties);
    return c->properties[i];
}

const mcir_property_decl *mcir_catalog_find_property(const mcir_catalog *c,
                                                     const char *name) {
    for (int i = 0; i < c->n_properties; i++)
        if (strcmp(c->properties[i]->name, name) == 0) return c->properties[i];
    return NULL;
}

bool mcir_pattern_form_name_ok(const mcir_pattern_form *f, const char *name) {
    if (!f->name_code) return true;
    pcre2_code *code = f->name_code;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(code, NULL);
    MCIR_ASSERT(md);
    int rc = pcre2_match(code, (PCRE2_SPTR)name, PCRE2_ZERO_TERMINATED, 0, 0, md,
                         (pcre2_match_context *)f->name_match_ctx);
    pcre2_match_data_free(md);
    if ((rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT) && f->name_limit_hits) {
        (*f->name_limit_hits)++;   /* not a match, but the trace will say why */
        *f->name_limit_last = name;
    }
    return rc >= 0;
}

/* --------------------------------------------------------------- loader */

typedef struct loader {
    mcir_catalog *c;
    yaml_document_t *doc;
    const char *path;
    mcir_diag *d;
    int errors;          /* all of them; the first MAX_REPORTED are printed */
    /* what this file adds; committed only if it loads without error */
    int n_props;
    mcir_property_decl *props[256];
    int n_pats;
    mcir_pattern *pats[1024];
    bool pat_replace[1024];
    int n_tests;
    mcir_rule_test *tests[1024];
} loader;

/* The pattern being built: variables and node ids by name. */
typedef struct builder {
    mcir_pattern *p;
    int n_vars;
    const char *vars[MAX_PATTERN_VARS];
    mcir_loc var_loc[MAX_PATTERN_VARS];
    int n_nodes;
    const char *node_ids[MAX_PATTERN_NODES];
    const char *outs[MAX_PATTERN_NODES];   /* the variable each node produces */
} builder;

static mcir_loc loc_of(loader *L, const yaml_node_t *n) {
    if (!n) return (mcir_loc){L->path, 0, 0};
    return (mcir_loc){L->path, (int)n->start_mark.line + 1, (int)n->start_mark.column + 1};
}

static bool err(loader *L, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A file with thousands of mistakes (a generated one, say) reports the
 * first few and counts the rest. */
#define MAX_REPORTED 20

static bool err(loader *L, const yaml_node_t *n, const char *fmt, ...) {
    if (L->errors < MAX_REPORTED) {
        va_list ap;
        va_start(ap, fmt);
        mcir_verror(L->d, loc_of(L, n), "error", fmt, ap);
        va_end(ap);
    }
    if (L->d) L->d->n_errors++;
    L->errors++;
    return false;
}

static void note(mcir_diag *d, mcir_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void note(mcir_diag *d, mcir_loc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mcir_verror(d, loc, "note", fmt, ap);
    va_end(ap);
}

/* A user's string as a message shows it: at most 60 bytes, then how long
 * it was (a 75 KB regex is not echoed whole). */
static const char *shorten(const char *s, char *buf, size_t n) {
    size_t len = strlen(s);
    if (len <= 60) return s;
    snprintf(buf, n, "%.48s... (%zu bytes)", s, len);
    return buf;
}

/* Edit distance of two short names, or a large number. */
static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 1 << 20;
    int row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int sub = diag + (a[i - 1] != b[j - 1]);
            int best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            diag = up;
        }
    }
    return row[lb];
}

/* Collects candidate names and picks the nearest to a misspelt one:
 * " (did you mean 'layernorm'?)" when one is close, else "". */
typedef struct suggester {
    const char *typo, *best;
    int best_d;
    char text[128];
} suggester;

static void suggest_begin(suggester *g, const char *typo) {
    g->typo = typo ? typo : "";
    g->best = NULL;
    g->best_d = 1 << 20;
    g->text[0] = 0;
}

static void suggest_try(suggester *g, const char *name) {
    if (!name || strcmp(name, g->typo) == 0) return;
    int d = edit_distance(g->typo, name);
    size_t len = strlen(g->typo), ln = strlen(name);
    /* "inputs" for "in": one name a prefix of the other */
    if (len >= 2 && ln >= 2 && strncmp(g->typo, name, len < ln ? len : ln) == 0 && d > 1) d = 1;
    int limit = len <= 2 ? 0 : len <= 4 ? 1 : len <= 8 ? 2 : 3;   /* "Y" is not a typo of "A" */
    if (d <= limit && d < g->best_d) {
        g->best = name;
        g->best_d = d;
    }
}

static const char *suggest_end(suggester *g) {
    if (g->best) snprintf(g->text, sizeof g->text, " (did you mean '%s'?)", g->best);
    return g->text;
}

static yaml_node_t *node_at(loader *L, int index) {
    return yaml_document_get_node(L->doc, index);
}

static const char *scalar(const yaml_node_t *n) {
    if (!n || n->type != YAML_SCALAR_NODE) return NULL;
    return (const char *)n->data.scalar.value;
}

static bool is_plain(const yaml_node_t *n) {
    return n && n->type == YAML_SCALAR_NODE &&
           n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static const char *node_kind(const yaml_node_t *n) {
    if (!n) return "nothing";
    switch (n->type) {
    case YAML_SCALAR_NODE: return "a scalar";
    case YAML_SEQUENCE_NODE: return "a list";
    case YAML_MAPPING_NODE: return "a mapping";
    default: return "nothing";
    }
}

static bool want_scalar(loader *L, const yaml_node_t *n, const char *what) {
    if (scalar(n)) return true;
    return err(L, n, "%s must be a scalar, not %s", what, node_kind(n));
}

static int seq_len(const yaml_node_t *n) {
    return (int)(n->data.sequence.items.top - n->data.sequence.items.start);
}

static yaml_node_t *seq_item(loader *L, const yaml_node_t *n, int i) {
    return node_at(L, n->data.sequence.items.start[i]);
}

static int map_len(const yaml_node_t *n) {
    return (int)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
}

static yaml_node_t *map_key(loader *L, const yaml_node_t *n, int i) {
    return node_at(L, n->data.mapping.pairs.start[i].key);
}

static yaml_node_t *map_value(loader *L, const yaml_node_t *n, int i) {
    return node_at(L, n->data.mapping.pairs.start[i].value);
}

static yaml_node_t *map_get(loader *L, const yaml_node_t *map, const char *key) {
    for (int i = 0; i < map_len(map); i++) {
        const char *k = scalar(map_key(L, map, i));
        if (k && strcmp(k, key) == 0) return map_value(L, map, i);
    }
    return NULL;
}

/* Lists and mappings inside a rule are short; a limit keeps a document
 * that repeats one long list through aliases from costing more than its
 * size suggests. */
#define MAX_ITEMS 64

static bool too_long(loader *L, const yaml_node_t *n, int max, const char *what);

/* Every key a scalar, known and given once. */
static bool check_keys(loader *L, const yaml_node_t *map, const char *const *allowed,
                       const char *what) {
    if (too_long(L, map, MAX_ITEMS, what)) return false;
    bool ok = true;
    for (int i = 0; i < map_len(map); i++) {
        yaml_node_t *kn = map_key(L, map, i);
        const char *k = scalar(kn);
        if (!k) {
            ok = err(L, kn, "%s: keys must be scalars", what);
            continue;
        }
        bool known = false;
        for (int j = 0; allowed[j]; j++)
            if (strcmp(allowed[j], k) == 0) known = true;
        if (!known) {
            char list[512] = "";
            for (int j = 0; allowed[j]; j++) {
                size_t len = strlen(list);
                snprintf(list + len, sizeof list - len, "%s%s", j ? ", " : "", allowed[j]);
            }
            suggester g;
            suggest_begin(&g, k);
            for (int j = 0; allowed[j]; j++) suggest_try(&g, allowed[j]);
            char sb[96];
            ok = err(L, kn, "%s: unknown key '%s'%s (expected one of: %s)", what,
                     shorten(k, sb, sizeof sb), suggest_end(&g), list);
            continue;
        }
        for (int j = 0; j < i; j++) {
            const char *k2 = scalar(map_key(L, map, j));
            if (k2 && strcmp(k, k2) == 0) {
                ok = err(L, kn, "%s: key '%s' given twice", what, k);
                break;
            }
        }
    }
    return ok;
}

static bool too_long(loader *L, const yaml_node_t *n, int max, const char *what) {
    int len = n->type == YAML_SEQUENCE_NODE  ? seq_len(n)
              : n->type == YAML_MAPPING_NODE ? map_len(n)
                                             : 0;
    if (len <= max) return false;
    err(L, n, "%s has %d entries; at most %d are allowed", what, len, max);
    return true;
}

static bool parse_int(loader *L, const yaml_node_t *n, const char *what, int64_t *out) {
    const char *s = scalar(n);
    if (!s || !is_plain(n) || !*s) return err(L, n, "%s must be an integer", what);
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno) return err(L, n, "%s must be an integer, not '%s'", what, s);
    *out = v;
    return true;
}

static bool parse_float(loader *L, const yaml_node_t *n, const char *what, double *out) {
    const char *s = scalar(n);
    if (!s || !is_plain(n) || !*s) return err(L, n, "%s must be a number", what);
    if (strcmp(s, ".inf") == 0 || strcmp(s, ".Inf") == 0 || strcmp(s, "+.inf") == 0) {
        *out = INFINITY;
        return true;
    }
    if (strcmp(s, "-.inf") == 0 || strcmp(s, "-.Inf") == 0) {
        *out = -INFINITY;
        return true;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno == ERANGE || isnan(v))
        return err(L, n, "%s must be a number, not '%s'", what, s);
    *out = v;
    return true;
}

static bool parse_bool(loader *L, const yaml_node_t *n, const char *what, bool *out) {
    const char *s = scalar(n);
    if (s && is_plain(n) && strcmp(s, "true") == 0) {
        *out = true;
        return true;
    }
    if (s && is_plain(n) && strcmp(s, "false") == 0) {
        *out = false;
        return true;
    }
    return err(L, n, "%s must be true or false", what);
}

static const char *parse_string(loader *L, const yaml_node_t *n, const char *what) {
    if (!want_scalar(L, n, what)) return NULL;
    return mcir_arena_strdup(L->c->arena, scalar(n));
}

static bool valid_identifier(const char *s) {
    if (!*s || !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
        return false;
    for (const char *p = s; *p; p++)
        if (!(*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
              (*p >= '0' && *p <= '9')))
            return false;
    return true;
}

/* A rule's name appears in traces and messages: printable, no spaces. */
static bool valid_rule_name(const char *s) {
    size_t len = strlen(s);
    if (len == 0 || len > 128) return false;
    if (!(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
        return false;
    for (const char *q = s; *q; q++)
        if (!(*q == '_' || *q == '-' || *q == '.' || (*q >= 'A' && *q <= 'Z') ||
              (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9')))
            return false;
    return true;
}

/* --------------------------------------------------------------- regex */

/* Compiles `re` anchored at both ends; NULL plus an error if it does not
 * compile. The code is owned by the catalog. */
static pcre2_code *compile_regex(loader *L, const yaml_node_t *n, const char *re) {
    char *wrapped = mcir_arena_printf(L->c->arena, "^(?:%s)$", re);
    int errcode;
    PCRE2_SIZE erroff;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)wrapped, PCRE2_ZERO_TERMINATED, 0, &errcode,
                                     &erroff, NULL);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        size_t off = erroff >= 4 ? erroff - 4 : 0;   /* offset in the user's regex */
        if (off > strlen(re)) off = strlen(re);
        char sb[96];
        err(L, n, "bad regex '%s': %s at offset %zu", shorten(re, sb, sizeof sb),
            (const char *)msg, off);
        return NULL;
    }
    mcir_catalog *c = L->c;
    if (c->n_codes == c->cap_codes) {
        c->cap_codes = c->cap_codes ? 2 * c->cap_codes : 32;
        c->codes = realloc(c->codes, (size_t)c->cap_codes * sizeof *c->codes);
        MCIR_ASSERT(c->codes);
    }
    c->codes[c->n_codes++] = code;
    return code;
}

/* Marks in ops[] every op whose name the regex matches in full. */
static bool regex_ops(loader *L, const yaml_node_t *n, const char *re, bool *ops) {
    pcre2_code *code = compile_regex(L, n, re);
    if (!code) return false;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(code, NULL);
    MCIR_ASSERT(md);
    int count = 0;
    for (int i = 0; i < MCIR_OP_COUNT; i++) {
        const char *name = mcir_op_name((mcir_op)i);
        int rc = pcre2_match(code, (PCRE2_SPTR)name, strlen(name), 0, 0, md, L->c->match_ctx);
        if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT) {
            pcre2_match_data_free(md);
            char sb[96];
            return err(L, n, "op regex '%s' exceeds the PCRE2 match limits",
                       shorten(re, sb, sizeof sb));
        }
        ops[i] = rc >= 0;
        count += ops[i];
    }
    pcre2_match_data_free(md);
    if (count == 0) {
        suggester g;
        suggest_begin(&g, re);
        for (int i = 0; i < MCIR_OP_COUNT; i++) suggest_try(&g, mcir_op_name((mcir_op)i));
        char sb[96];
        return err(L, n, "op regex '%s' matches no op%s", shorten(re, sb, sizeof sb),
                   g.best ? suggest_end(&g) : " (unknown op? docs/ops.md lists them)");
    }
    return true;
}

/* -------------------------------------------------------------- attrs */

static bool parse_attr_value(loader *L, const yaml_node_t *n, const mcir_attr_spec *spec,
                             const char *name, mcir_attr *out) {
    char what[160];
    snprintf(what, sizeof what, "attribute '%s'", name);
    out->name = mcir_arena_strdup(L->c->arena, name);
    out->type = spec->type;
    out->loc = loc_of(L, n);
    switch (spec->type) {
    case MCIR_ATTR_INT:
        if (!parse_int(L, n, what, &out->i)) return false;
        if (strcmp(name, "axis") == 0 && (out->i < -MCIR_MAX_RANK || out->i >= MCIR_MAX_RANK))
            return err(L, n, "%s: %lld is no axis (tensors have rank <= %d: -%d .. %d)", what,
                       (long long)out->i, MCIR_MAX_RANK, MCIR_MAX_RANK, MCIR_MAX_RANK - 1);
        return true;
    case MCIR_ATTR_FLOAT: return parse_float(L, n, what, &out->f);
    case MCIR_ATTR_BOOL: return parse_bool(L, n, what, &out->b);
    case MCIR_ATTR_STRING: {
        const char *s = parse_string(L, n, what);
        if (!s) return false;
        if (spec->choices) {
            bool found = false;
            for (int i = 0; spec->choices[i]; i++)
                if (strcmp(spec->choices[i], s) == 0) found = true;
            if (!found) return err(L, n, "%s: '%s' is not an allowed value", what, s);
        }
        out->s = s;
        return true;
    }
    case MCIR_ATTR_INTS: {
        if (n->type != YAML_SEQUENCE_NODE) return err(L, n, "%s must be a list of integers", what);
        if (too_long(L, n, MAX_ITEMS, what)) return false;
        int k = seq_len(n);
        out->n = k;
        out->ints = mcir_arena_alloc(L->c->arena, (size_t)(k + 1) * sizeof *out->ints);
        for (int i = 0; i < k; i++)
            if (!parse_int(L, seq_item(L, n, i), what, &out->ints[i])) return false;
        return true;
    }
    }
    return false;
}

/* ----------------------------------------------------------- builder */

static int find_var(const builder *b, const char *name) {
    for (int i = 0; i < b->n_vars; i++)
        if (strcmp(b->vars[i], name) == 0) return i;
    return -1;
}

static int add_var(loader *L, builder *b, const yaml_node_t *n, const char *name) {
    int v = find_var(b, name);
    if (v >= 0) return v;
    if (!valid_identifier(name)) {
        err(L, n, "variable name '%s' must be an identifier ([A-Za-z_][A-Za-z0-9_]*)", name);
        return -1;
    }
    if (b->n_vars == MAX_PATTERN_VARS) {
        err(L, n, "a pattern has at most %d variables", MAX_PATTERN_VARS);
        return -1;
    }
    b->vars[b->n_vars] = mcir_arena_strdup(L->c->arena, name);
    b->var_loc[b->n_vars] = loc_of(L, n);
    return b->n_vars++;
}

static int ref_var(loader *L, const builder *b, const yaml_node_t *n) {
    const char *s = scalar(n);
    if (!s) {
        err(L, n, "expected a pattern variable name, not %s", node_kind(n));
        return -1;
    }
    int v = find_var(b, s);
    if (v < 0) {
        char list[512] = "";
        for (int i = 0; i < b->n_vars; i++) {
            size_t len = strlen(list);
            snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", b->vars[i]);
        }
        suggester g;
        suggest_begin(&g, s);
        for (int i = 0; i < b->n_vars; i++) suggest_try(&g, b->vars[i]);
        char sb[96];
        err(L, n, "unknown variable '%s'%s in pattern '%s' (variables: %s)",
            shorten(s, sb, sizeof sb), suggest_end(&g), b->p->name, list);
    }
    return v;
}

static int ref_node(loader *L, const builder *b, const yaml_node_t *n) {
    const char *s = scalar(n);
    if (!s) {
        err(L, n, "expected a pattern node id, not %s", node_kind(n));
        return -1;
    }
    for (int i = 0; i < b->n_nodes; i++)
        if (strcmp(b->node_ids[i], s) == 0) return i;
    suggester g;
    suggest_begin(&g, s);
    for (int i = 0; i < b->n_nodes; i++) suggest_try(&g, b->node_ids[i]);
    char sb[96];
    err(L, n, "unknown pattern node '%s'%s in pattern '%s'", shorten(s, sb, sizeof sb),
        suggest_end(&g), b->p->name);
    return -1;
}

/* An INT or FLOAT parameter within the range its spec declares. */
static bool in_range(loader *L, const yaml_node_t *n, const mcir_param_spec *spec,
                     const char *what, double v) {
    switch (spec->range) {
    case MCIR_RANGE_ANY: return true;
    case MCIR_RANGE_POSITIVE:
        return v > 0 || err(L, n, "%s (%s) must be > 0, not %s", what, spec->doc, scalar(n));
    case MCIR_RANGE_NONNEGATIVE:
        return (v >= 0 && isfinite(v)) ||
               err(L, n, "%s (%s) must be >= 0 and finite, not %s", what, spec->doc, scalar(n));
    case MCIR_RANGE_AXIS:
        return (v >= -MCIR_MAX_RANK && v < MCIR_MAX_RANK) ||
               err(L, n, "%s: %s is no axis (tensors have rank <= %d: -%d .. %d)", what,
                   scalar(n), MCIR_MAX_RANK, MCIR_MAX_RANK, MCIR_MAX_RANK - 1);
    }
    return true;
}

/* A parameter value of a check or an action, by its spec. `params` holds
 * the values parsed so far (ATTRS reads the OP parameter). */
static bool parse_param(loader *L, const builder *b, const yaml_node_t *n,
                        const mcir_param_spec *spec, const mcir_param_spec *specs,
                        int n_specs, mcir_param_value *params, mcir_param_value *out) {
    mcir_arena *a = L->c->arena;
    char what[160];
    snprintf(what, sizeof what, "parameter '%s'", spec->name);
    out->set = true;
    if (too_long(L, n, MAX_ITEMS, what)) return false;
    switch (spec->kind) {
    case MCIR_PARAM_TENSOR:
    case MCIR_PARAM_NODE:
    case MCIR_PARAM_TENSORS:
    case MCIR_PARAM_NODES: {
        bool list = spec->kind == MCIR_PARAM_TENSORS || spec->kind == MCIR_PARAM_NODES;
        bool tensors = spec->kind == MCIR_PARAM_TENSOR || spec->kind == MCIR_PARAM_TENSORS;
        int k = 1;
        if (n->type == YAML_SEQUENCE_NODE) {
            if (!list) return err(L, n, "%s takes one name, not a list", what);
            k = seq_len(n);
        }
        out->n = k;
        out->refs = mcir_arena_alloc(a, (size_t)(k + 1) * sizeof *out->refs);
        for (int i = 0; i < k; i++) {
            const yaml_node_t *item = n->type == YAML_SEQUENCE_NODE ? seq_item(L, n, i) : n;
            int r = tensors ? ref_var(L, b, item) : ref_node(L, b, item);
            if (r < 0) return false;
            out->refs[i] = r;
        }
        return true;
    }
    case MCIR_PARAM_INT:
        if (!parse_int(L, n, what, &out->i)) return false;
        out->f = (double)out->i;
        return in_range(L, n, spec, what, out->f);
    case MCIR_PARAM_FLOAT:
        if (!parse_float(L, n, what, &out->f)) return false;
        return in_range(L, n, spec, what, out->f);
    case MCIR_PARAM_STRING: {
        out->s = parse_string(L, n, what);
        if (!out->s) return false;
        if (spec->choices) {
            for (int i = 0; spec->choices[i]; i++)
                if (strcmp(spec->choices[i], out->s) == 0) return true;
            return err(L, n, "%s: unknown value '%s'", what, out->s);
        }
        return true;
    }
    case MCIR_PARAM_DTYPES: {
        int k = n->type == YAML_SEQUENCE_NODE ? seq_len(n) : 1;
        for (int i = 0; i < k; i++) {
            const yaml_node_t *item = n->type == YAML_SEQUENCE_NODE ? seq_item(L, n, i) : n;
            const char *s = scalar(item);
            mcir_dtype dt;
            if (!s || !mcir_dtype_parse(s, &dt))
                return err(L, item, "%s: unknown dtype '%s' (f32, f16, bf16)", what,
                           s ? s : node_kind(item));
            out->dtypes |= 1u << dt;
        }
        return true;
    }
    case MCIR_PARAM_OP: {
        const char *s = scalar(n);
        if (!s || !mcir_op_parse(s, &out->op))
            return err(L, n, "%s: unknown op '%s'", what, s ? s : node_kind(n));
        return true;
    }
    case MCIR_PARAM_ATTRS: {
        int op_index = -1;
        for (int i = 0; i < n_specs; i++)
            if (specs[i].kind == MCIR_PARAM_OP) op_index = i;
        if (op_index < 0 || !params[op_index].set)
            return err(L, n, "%s needs the op parameter first", what);
        mcir_op op = params[op_index].op;
        if (n->type != YAML_MAPPING_NODE) return err(L, n, "%s must be a mapping", what);
        int k = map_len(n);
        out->n_attrs = 0;
        out->attrs = mcir_arena_alloc(a, (size_t)(k + 1) * sizeof *out->attrs);
        for (int i = 0; i < k; i++) {
            yaml_node_t *kn = map_key(L, n, i);
            const char *name = scalar(kn);
            const mcir_attr_spec *as = name ? mcir_op_attr_spec(op, name) : NULL;
            if (!as)
                return err(L, kn, "op '%s' has no attribute '%s'", mcir_op_name(op),
                           name ? name : "?");
            if (!parse_attr_value(L, map_value(L, n, i), as, name, &out->attrs[out->n_attrs]))
                return false;
            out->n_attrs++;
        }
        return true;
    }
    }
    return false;
}

/* A mapping of parameters for a check or an action; `skip` is a key that
 * belongs to the caller ("action"). */
static mcir_param_value *parse_params(loader *L, const builder *b, const yaml_node_t *map,
                                      const yaml_node_t *at, const mcir_param_spec *specs,
                                      int n_specs, const char *owner, const char *skip) {
    mcir_param_value *params =
        mcir_arena_alloc(L->c->arena, (size_t)(n_specs + 1) * sizeof *params);
    bool ok = true;
    if (map && map->type != YAML_MAPPING_NODE) {
        err(L, map, "parameters of '%s' must be a mapping, not %s", owner, node_kind(map));
        return NULL;
    }
    if (map && too_long(L, map, MAX_ITEMS, "a parameter mapping")) return NULL;
    /* OP before ATTRS: two passes over the spec order */
    for (int pass = 0; pass < 2 && map; pass++)
        for (int i = 0; i < map_len(map); i++) {
            yaml_node_t *kn = map_key(L, map, i);
            const char *k = scalar(kn);
            if (!k) {
                ok = err(L, kn, "'%s': parameter names must be scalars", owner);
                continue;
            }
            if (skip && strcmp(k, skip) == 0) continue;
            int idx = mcir_param_index(specs, n_specs, k);
            if (idx < 0) {
                if (pass == 0) {
                    char list[512] = "";
                    for (int j = 0; j < n_specs; j++) {
                        size_t len = strlen(list);
                        snprintf(list + len, sizeof list - len, "%s%s", j ? ", " : "",
                                 specs[j].name);
                    }
                    suggester g;
                    suggest_begin(&g, k);
                    for (int j = 0; j < n_specs; j++) suggest_try(&g, specs[j].name);
                    char sb[96];
                    ok = err(L, kn, "'%s' has no parameter '%s'%s (parameters: %s)", owner,
                             shorten(k, sb, sizeof sb), suggest_end(&g), list);
                }
                continue;
            }
            bool attrs = specs[idx].kind == MCIR_PARAM_ATTRS;
            if ((pass == 0) == attrs) continue;
            if (params[idx].set) {
                ok = err(L, kn, "'%s': parameter '%s' given twice", owner, k);
                continue;
            }
            if (!parse_param(L, b, map_value(L, map, i), &specs[idx], specs, n_specs, params,
                             &params[idx]))
                ok = false;
        }
    for (int i = 0; i < n_specs && ok; i++)
        if (specs[i].required && !params[i].set)
            ok = err(L, map ? map : at, "'%s' needs parameter '%s' (%s)", owner,
                     specs[i].name, specs[i].doc);
    return ok ? params : NULL;
}

/* ---------------------------------------------------------- properties */

static const char *const property_keys[] = {
    "name", "description", "legality_conditions", "rewrite_rule", "lowering_strategy", NULL};

static mcir_property_decl *find_property(loader *L, const char *name) {
    for (int i = 0; i < L->n_props; i++)
        if (strcmp(L->props[i]->name, name) == 0) return L->props[i];
    return (mcir_property_decl *)mcir_catalog_find_property(L->c, name);
}

static void parse_property(loader *L, const yaml_node_t *n) {
    mcir_arena *a = L->c->arena;
    if (n->type != YAML_MAPPING_NODE) {
        err(L, n, "a property must be a mapping, not %s", node_kind(n));
        return;
    }
    if (!check_keys(L, n, property_keys, "property")) return;
    yaml_node_t *name_n = map_get(L, n, "name");
    if (!name_n) {
        err(L, n, "a property needs a 'name'");
        return;
    }
    const char *name = parse_string(L, name_n, "property name");
    if (!name) return;
    if (!valid_identifier(name)) {
        err(L, name_n, "property name '%s' must be an identifier", name);
        return;
    }
    mcir_property_decl *prev = find_property(L, name);
    if (prev) {
        err(L, name_n, "property '%s' is already declared at %s:%d:%d", name, prev->loc.path,
            prev->loc.line, prev->loc.col);
        return;
    }
    if (L->n_props == (int)(sizeof L->props / sizeof L->props[0])) {
        err(L, n, "too many properties in one file");
        return;
    }
    mcir_property_decl *p = mcir_arena_alloc(a, sizeof *p);
    p->name = name;
    p->loc = loc_of(L, n);
    yaml_node_t *v;
    if ((v = map_get(L, n, "description"))) p->description = parse_string(L, v, "description");
    if ((v = map_get(L, n, "lowering_strategy"))) {
        p->lowering_strategy = parse_string(L, v, "lowering_strategy");
        if (!p->lowering_strategy) return;
        if (!mcir_lowering_find(p->lowering_strategy)) {
            char list[512] = "", sb[96];
            suggester g;
            suggest_begin(&g, p->lowering_strategy);
            for (int i = 0; i < mcir_n_lowerings; i++) {
                size_t len = strlen(list);
                snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "",
                         mcir_lowerings[i].name);
                suggest_try(&g, mcir_lowerings[i].name);
            }
            err(L, v, "unknown lowering_strategy '%s'%s (strategies: %s)",
                shorten(p->lowering_strategy, sb, sizeof sb), suggest_end(&g), list);
            return;
        }
    } else {
        err(L, n, "property '%s' needs a 'lowering_strategy'", name);
        return;
    }
    if ((v = map_get(L, n, "legality_conditions"))) {
        if (v->type != YAML_SEQUENCE_NODE) {
            err(L, v, "legality_conditions must be a list of check names");
            return;
        }
        if (too_long(L, v, MAX_ITEMS, "legality_conditions")) return;
        p->n_conditions = seq_len(v);
        p->legality_conditions =
            mcir_arena_alloc(a, (size_t)(p->n_conditions + 1) * sizeof *p->legality_conditions);
        for (int i = 0; i < p->n_conditions; i++) {
            yaml_node_t *item = seq_item(L, v, i);
            const char *s = scalar(item);
            const mcir_check_desc *cd = s ? mcir_check_find(s) : NULL;
            if (!cd) {
                suggester g;
                suggest_begin(&g, s);
                for (int j = 0; j < mcir_n_checks; j++) suggest_try(&g, mcir_checks[j].name);
                char sb[96];
                err(L, item, "unknown legality check '%s'%s",
                    s ? shorten(s, sb, sizeof sb) : node_kind(item), suggest_end(&g));
                return;
            }
            p->legality_conditions[i] = cd;
        }
    }
    if ((v = map_get(L, n, "rewrite_rule"))) {
        if (too_long(L, v, MAX_ITEMS, "rewrite_rule")) return;
        int k = v->type == YAML_SEQUENCE_NODE ? seq_len(v) : 1;
        p->n_rewrite_rules = k;
        p->rewrite_rules = mcir_arena_alloc(a, (size_t)(k + 1) * sizeof *p->rewrite_rules);
        for (int i = 0; i < k; i++) {
            yaml_node_t *item = v->type == YAML_SEQUENCE_NODE ? seq_item(L, v, i) : v;
            const char *s = scalar(item);
            if (!s || !mcir_action_parse(s, &p->rewrite_rules[i])) {
                suggester g;
                suggest_begin(&g, s);
                for (int j = 0; j < MCIR_ACTION_COUNT; j++)
                    suggest_try(&g, mcir_action_descs[j].name);
                char sb[96];
                err(L, item, "unknown rewrite action '%s'%s",
                    s ? shorten(s, sb, sizeof sb) : node_kind(item), suggest_end(&g));
                return;
            }
        }
    } else {
        err(L, n, "property '%s' needs a 'rewrite_rule'", name);
        return;
    }
    L->props[L->n_props++] = p;
}

/* ------------------------------------------------------------ patterns */

static const char *const pattern_keys[] = {
    "name", "description", "property", "match", "legality", "rewrite", "memory_states",
    "replace", "trace", "priority", NULL};
static const char *const node_keys[] = {
    "id", "op", "name", "in", "out", "attrs", "commutative", "unordered", "values",
    "constants", "optional", "passthrough", "one_of", NULL};
static const char *const form_keys[] = {
    "op", "name", "in", "attrs", "commutative", "unordered", "values", "constants", NULL};

/* A value or constant constraint names a weight: no pattern node may
 * produce it (a produced tensor is never a weight, so the rule could
 * never match). */
static bool not_produced(loader *L, const builder *b, const yaml_node_t *n, int var,
                         const char *what) {
    for (int i = 0; i < b->n_nodes; i++)
        if (b->outs[i] && strcmp(b->outs[i], b->vars[var]) == 0)
            return err(L, n, "%s: '%s' is produced by pattern node '%s'; %s constrain weights "
                       "(graph constants), which no node produces", what, b->vars[var],
                       b->node_ids[i], what);
    return true;
}

/* One form: from the node mapping itself or an entry of its one_of. */
static bool parse_form(loader *L, builder *b, const yaml_node_t *n, mcir_pattern_form *f) {
    mcir_arena *a = L->c->arena;
    f->loc = loc_of(L, n);
    yaml_node_t *op = map_get(L, n, "op");
    if (!op) return err(L, n, "a pattern node needs an 'op' (a regex over op names)");
    if (!want_scalar(L, op, "op")) return false;
    f->op_regex = mcir_arena_strdup(a, scalar(op));
    if (!regex_ops(L, op, f->op_regex, f->ops)) return false;
    yaml_node_t *v;
    if ((v = map_get(L, n, "name"))) {
        if (!want_scalar(L, v, "name")) return false;
        f->name_regex = mcir_arena_strdup(a, scalar(v));
        f->name_code = compile_regex(L, v, f->name_regex);
        if (!f->name_code) return false;
        f->name_limit_hits = mcir_arena_alloc(a, sizeof *f->name_limit_hits);
        f->name_limit_last = mcir_arena_alloc(a, sizeof *f->name_limit_last);
        f->name_match_ctx = L->c->match_ctx;
    }
    yaml_node_t *in = map_get(L, n, "in");
    if (!in || in->type != YAML_SEQUENCE_NODE)
        return err(L, in ? in : n, "a pattern node needs 'in': a list of input variables");
    f->n_inputs = seq_len(in);
    if (f->n_inputs > 16) return err(L, in, "at most 16 inputs per pattern node");
    f->input_vars = mcir_arena_alloc(a, (size_t)(f->n_inputs + 1) * sizeof *f->input_vars);
    f->input_optional =
        mcir_arena_alloc(a, (size_t)(f->n_inputs + 1) * sizeof *f->input_optional);
    for (int i = 0; i < f->n_inputs; i++) {
        yaml_node_t *item = seq_item(L, in, i);
        if (!want_scalar(L, item, "an input")) return false;
        char name[128];
        snprintf(name, sizeof name, "%s", scalar(item));
        size_t len = strlen(name);
        if (len && name[len - 1] == '?') {
            f->input_optional[i] = true;
            name[len - 1] = 0;
        } else if (i > 0 && f->input_optional[i - 1]) {
            return err(L, item, "optional inputs ('X?') must come last");
        }
        if (strcmp(name, "_") == 0) {
            f->input_vars[i] = -1;
            continue;
        }
        f->input_vars[i] = add_var(L, b, item, name);
        if (f->input_vars[i] < 0) return false;
    }
    int min_in = 0;
    for (int i = 0; i < f->n_inputs; i++)
        if (!f->input_optional[i]) min_in++;
    bool any_op = false;
    for (int i = 0; i < MCIR_OP_COUNT; i++) {
        if (!f->ops[i]) continue;
        const mcir_op_desc *desc = mcir_op_desc_of((mcir_op)i);
        if (f->n_inputs >= desc->min_inputs &&
            (desc->max_inputs < 0 || min_in <= desc->max_inputs))
            any_op = true;
    }
    if (!any_op)
        return err(L, in, "no op matched by '%s' takes %d inputs", f->op_regex, f->n_inputs);
    if ((v = map_get(L, n, "commutative")) && !parse_bool(L, v, "commutative", &f->commutative))
        return false;
    if (f->commutative) {
        bool any = false;
        for (int i = 0; i < MCIR_OP_COUNT && !any; i++)
            any = f->ops[i] && (mcir_op_desc_of((mcir_op)i)->flags & MCIR_OPF_COMMUTATIVE);
        if (!any) {
            char sb[96];
            return err(L, v, "commutative: no op matched by '%s' commutes (swapping its "
                       "inputs changes the result); 'unordered: true' tries both orders anyway",
                       shorten(f->op_regex, sb, sizeof sb));
        }
    }
    if ((v = map_get(L, n, "unordered")) && !parse_bool(L, v, "unordered", &f->unordered))
        return false;
    if ((v = map_get(L, n, "attrs"))) {
        if (v->type != YAML_MAPPING_NODE) return err(L, v, "attrs must be a mapping");
        if (too_long(L, v, MAX_ITEMS, "attrs")) return false;
        f->n_attrs = map_len(v);
        f->attrs = mcir_arena_alloc(a, (size_t)(f->n_attrs + 1) * sizeof *f->attrs);
        for (int i = 0; i < f->n_attrs; i++) {
            yaml_node_t *kn = map_key(L, v, i);
            const char *name = scalar(kn);
            if (!name) return err(L, kn, "attribute names must be scalars");
            const mcir_attr_spec *spec = NULL;
            for (int k = 0; k < MCIR_OP_COUNT; k++) {
                if (!f->ops[k]) continue;
                const mcir_attr_spec *s = mcir_op_attr_spec((mcir_op)k, name);
                if (!s)
                    return err(L, kn, "op '%s' (matched by '%s') has no attribute '%s'",
                               mcir_op_name((mcir_op)k), f->op_regex, name);
                if (spec && s->type != spec->type)
                    return err(L, kn, "attribute '%s' has different types across '%s'", name,
                               f->op_regex);
                spec = s;
            }
            if (!parse_attr_value(L, map_value(L, v, i), spec, name, &f->attrs[i])) return false;
        }
    }
    if ((v = map_get(L, n, "values"))) {
        if (v->type != YAML_MAPPING_NODE)
            return err(L, v, "values must map variables to numbers (or {value, tol})");
        if (too_long(L, v, MAX_ITEMS, "values")) return false;
        f->n_values = map_len(v);
        f->values = mcir_arena_alloc(a, (size_t)(f->n_values + 1) * sizeof *f->values);
        for (int i = 0; i < f->n_values; i++) {
            mcir_value_constraint *vc = &f->values[i];
            vc->var = ref_var(L, b, map_key(L, v, i));
            if (vc->var < 0 || !not_produced(L, b, map_key(L, v, i), vc->var, "values"))
                return false;
            vc->tol = 1e-3;
            yaml_node_t *val = map_value(L, v, i);
            if (val->type == YAML_MAPPING_NODE) {
                static const char *const vkeys[] = {"value", "tol", NULL};
                if (!check_keys(L, val, vkeys, "value constraint")) return false;
                yaml_node_t *x = map_get(L, val, "value"), *t = map_get(L, val, "tol");
                if (!x) return err(L, val, "a value constraint needs 'value'");
                if (!parse_float(L, x, "value", &vc->value)) return false;
                if (t && !parse_float(L, t, "tol", &vc->tol)) return false;
                if (t && !(vc->tol >= 0 && isfinite(vc->tol)))
                    return err(L, t, "tol is a relative tolerance: >= 0 and finite, not %s",
                               scalar(t));
            } else if (!parse_float(L, val, "value", &vc->value)) {
                return false;
            }
        }
    }
    if ((v = map_get(L, n, "constants"))) {
        if (too_long(L, v, MAX_ITEMS, "constants")) return false;
        int k = v->type == YAML_SEQUENCE_NODE ? seq_len(v) : 1;
        f->n_constants = k;
        f->constant_vars = mcir_arena_alloc(a, (size_t)(k + 1) * sizeof *f->constant_vars);
        for (int i = 0; i < k; i++) {
            yaml_node_t *item = v->type == YAML_SEQUENCE_NODE ? seq_item(L, v, i) : v;
            f->constant_vars[i] = ref_var(L, b, item);
            if (f->constant_vars[i] < 0 ||
                !not_produced(L, b, item, f->constant_vars[i], "constants"))
                return false;
        }
    }
    return true;
}

static bool form_has_input(const mcir_pattern_form *f, int var) {
    for (int i = 0; i < f->n_inputs; i++)
        if (f->input_vars[i] == var) return true;
    return false;
}

static bool parse_match(loader *L, builder *b, const yaml_node_t *m) {
    mcir_pattern *p = b->p;
    mcir_arena *a = L->c->arena;
    if (m->type != YAML_SEQUENCE_NODE || seq_len(m) == 0)
        return err(L, m, "'match' must be a non-empty list of pattern nodes");
    int k = seq_len(m);
    if (k > MAX_PATTERN_NODES) return err(L, m, "at most %d pattern nodes", MAX_PATTERN_NODES);
    p->n_nodes = k;
    p->nodes = mcir_arena_alloc(a, (size_t)k * sizeof *p->nodes);
    /* ids first, so forms may name any node */
    for (int i = 0; i < k; i++) {
        yaml_node_t *n = seq_item(L, m, i);
        if (n->type != YAML_MAPPING_NODE)
            return err(L, n, "a pattern node must be a mapping, not %s", node_kind(n));
        if (!check_keys(L, n, node_keys, "pattern node")) return false;
        yaml_node_t *id = map_get(L, n, "id");
        if (!id) return err(L, n, "a pattern node needs an 'id'");
        const char *s = parse_string(L, id, "id");
        if (!s) return false;
        if (!valid_identifier(s)) return err(L, id, "pattern node id '%s' must be an identifier", s);
        for (int j = 0; j < i; j++)
            if (strcmp(b->node_ids[j], s) == 0)
                return err(L, id, "pattern node id '%s' is used twice", s);
        b->node_ids[i] = s;
        yaml_node_t *out = map_get(L, n, "out");
        b->outs[i] = out ? scalar(out) : (i == 0 ? "out" : NULL);
        p->nodes[i].id = s;
        p->nodes[i].loc = loc_of(L, n);
    }
    b->n_nodes = k;
    for (int i = 0; i < k; i++) {
        yaml_node_t *n = seq_item(L, m, i);
        mcir_pattern_node *pn = &p->nodes[i];
        yaml_node_t *out = map_get(L, n, "out");
        const char *out_name = out ? scalar(out) : (i == 0 ? "out" : NULL);
        if (!out_name)
            return err(L, out ? out : n,
                       "pattern node '%s' needs 'out': the variable it produces", pn->id);
        for (int j = 0; j < i; j++)
            if (p->nodes[j].out_var >= 0 && strcmp(b->vars[p->nodes[j].out_var], out_name) == 0)
                return err(L, out ? out : n, "variable '%s' is produced by two pattern nodes",
                           out_name);
        pn->out_var = add_var(L, b, out ? out : n, out_name);
        if (pn->out_var < 0) return false;
        yaml_node_t *one_of = map_get(L, n, "one_of");
        if (one_of) {
            static const char *const form_only[] = {"op", "name", "in", "attrs", "commutative",
                                                    "unordered", "values", "constants", NULL};
            for (int j = 0; form_only[j]; j++)
                if (map_get(L, n, form_only[j]))
                    return err(L, map_get(L, n, form_only[j]),
                               "pattern node '%s': '%s' goes inside each one_of entry", pn->id,
                               form_only[j]);
            if (one_of->type != YAML_SEQUENCE_NODE || seq_len(one_of) == 0)
                return err(L, one_of, "one_of must be a non-empty list of forms");
            pn->n_forms = seq_len(one_of);
            if (pn->n_forms > 16) return err(L, one_of, "at most 16 forms");
            pn->forms = mcir_arena_alloc(a, (size_t)pn->n_forms * sizeof *pn->forms);
            for (int j = 0; j < pn->n_forms; j++) {
                yaml_node_t *fn = seq_item(L, one_of, j);
                if (fn->type != YAML_MAPPING_NODE)
                    return err(L, fn, "a one_of entry must be a mapping");
                if (!check_keys(L, fn, form_keys, "one_of entry")) return false;
                if (!parse_form(L, b, fn, &pn->forms[j])) return false;
            }
        } else {
            pn->n_forms = 1;
            pn->forms = mcir_arena_alloc(a, sizeof *pn->forms);
            if (!parse_form(L, b, n, &pn->forms[0])) return false;
        }
        pn->passthrough_var = -1;
        yaml_node_t *v;
        if ((v = map_get(L, n, "optional")) && !parse_bool(L, v, "optional", &pn->optional))
            return false;
        yaml_node_t *pt = map_get(L, n, "passthrough");
        if (pn->optional) {
            if (!pt)
                return err(L, n,
                           "optional pattern node '%s' needs 'passthrough': the input that "
                           "takes its output's place when it is absent",
                           pn->id);
            pn->passthrough_var = ref_var(L, b, pt);
            if (pn->passthrough_var < 0) return false;
            for (int j = 0; j < pn->n_forms; j++)
                if (!form_has_input(&pn->forms[j], pn->passthrough_var))
                    return err(L, pt, "passthrough '%s' is not an input of every form of '%s'",
                               b->vars[pn->passthrough_var], pn->id);
        } else if (pt) {
            return err(L, pt, "'passthrough' is only for optional nodes");
        }
    }
    /* no node depends on itself, directly or through others: follow each
     * node's inputs to their producers, depth first; the node where a path
     * comes back is the one the error names */
    int producer[MAX_PATTERN_VARS];
    for (int v = 0; v < MAX_PATTERN_VARS; v++) producer[v] = -1;
    for (int i = 0; i < k; i++) producer[p->nodes[i].out_var] = i;
    int state[MAX_PATTERN_NODES] = {0}, path[MAX_PATTERN_NODES + 1];
    for (int start = 0; start < k; start++) {
        if (state[start]) continue;
        /* iterative DFS: path[] holds the nodes being visited */
        int edge[MAX_PATTERN_NODES] = {0}, depth = 0;
        path[0] = start;
        state[start] = 1;
        while (depth >= 0) {
            int u = path[depth];
            const mcir_pattern_node *pn = &p->nodes[u];
            int next = -1;
            for (; next < 0 && edge[depth] < pn->n_forms * 16; edge[depth]++) {
                const mcir_pattern_form *f = &pn->forms[edge[depth] / 16];
                int j = edge[depth] % 16;
                if (j >= f->n_inputs || f->input_vars[j] < 0) continue;
                int w = producer[f->input_vars[j]];
                if (w < 0 || state[w] == 2) continue;
                if (state[w] == 1) {
                    char cyc[512] = "";
                    int from = depth;
                    while (from > 0 && path[from] != w) from--;
                    for (int q = from; q <= depth; q++) {
                        size_t len = strlen(cyc);
                        snprintf(cyc + len, sizeof cyc - len, "'%s' -> ", p->nodes[path[q]].id);
                    }
                    size_t len = strlen(cyc);
                    snprintf(cyc + len, sizeof cyc - len, "'%s'", p->nodes[w].id);
                    if (w == u)
                        return err(L, seq_item(L, m, u),
                                   "pattern node '%s' takes its own output '%s' as an input "
                                   "(a pattern is a DAG)", pn->id, b->vars[pn->out_var]);
                    return err(L, seq_item(L, m, u),
                               "pattern nodes form a cycle: %s (each arrow: takes as input "
                               "the output of; a pattern is a DAG)", cyc);
                }
                next = w;
            }
            if (next < 0) {
                state[u] = 2;
                depth--;
                continue;
            }
            state[next] = 1;
            path[++depth] = next;
            edge[depth] = 0;
        }
    }
    /* every node but the anchor feeds an earlier node */
    for (int i = 1; i < k; i++) {
        mcir_pattern_node *pn = &p->nodes[i];
        bool fed = false;
        for (int j = 0; j < i && !fed; j++) {
            for (int f = 0; f < p->nodes[j].n_forms; f++)
                if (form_has_input(&p->nodes[j].forms[f], pn->out_var)) fed = true;
            if (p->nodes[j].passthrough_var == pn->out_var) fed = true;
        }
        if (!fed)
            return err(L, seq_item(L, m, i),
                       "pattern node '%s' produces '%s', which no earlier node takes as input "
                       "(list nodes from the anchor, the last op, towards the inputs)",
                       pn->id, b->vars[pn->out_var]);
    }
    return true;
}

static bool parse_legality(loader *L, builder *b, const yaml_node_t *n) {
    mcir_pattern *p = b->p;
    if (n->type != YAML_SEQUENCE_NODE)
        return err(L, n, "'legality' must be a list of checks");
    if (too_long(L, n, MAX_ITEMS, "legality")) return false;
    int k = seq_len(n);
    p->n_checks = k;
    p->checks = mcir_arena_alloc(L->c->arena, (size_t)(k + 1) * sizeof *p->checks);
    for (int i = 0; i < k; i++) {
        yaml_node_t *item = seq_item(L, n, i);
        mcir_check_use *cu = &p->checks[i];
        cu->loc = loc_of(L, item);
        yaml_node_t *name_n = item, *params_n = NULL;
        if (item->type == YAML_MAPPING_NODE) {
            if (map_len(item) != 1)
                return err(L, item, "a check is 'name' or 'name: {parameters}'");
            name_n = map_key(L, item, 0);
            params_n = map_value(L, item, 0);
            const char *ps = scalar(params_n);
            if (ps && is_plain(params_n) &&
                (!ps[0] || strcmp(ps, "~") == 0 || strcmp(ps, "null") == 0))
                params_n = NULL;   /* "name:" with nothing after it */
        }
        const char *name = scalar(name_n);
        if (!name) return err(L, item, "a check is 'name' or 'name: {parameters}'");
        cu->check = mcir_check_find(name);
        if (!cu->check) {
            char list[1024] = "";
            for (int j = 0; j < mcir_n_checks; j++) {
                size_t len = strlen(list);
                snprintf(list + len, sizeof list - len, "%s%s", j ? ", " : "",
                         mcir_checks[j].name);
            }
            suggester g;
            suggest_begin(&g, name);
            for (int j = 0; j < mcir_n_checks; j++) suggest_try(&g, mcir_checks[j].name);
            char sb[96];
            return err(L, name_n, "unknown legality check '%s'%s (checks: %s)",
                       shorten(name, sb, sizeof sb), suggest_end(&g), list);
        }
        cu->params = parse_params(L, b, params_n, name_n, cu->check->params,
                                  cu->check->n_params, name, NULL);
        if (!cu->params) return false;
    }
    return true;
}

static bool parse_rewrite(loader *L, builder *b, const yaml_node_t *n) {
    mcir_pattern *p = b->p;
    if (n->type != YAML_MAPPING_NODE)
        return err(L, n, "'rewrite' must be a mapping with an 'action'");
    yaml_node_t *an = map_get(L, n, "action");
    if (!an) return err(L, n, "'rewrite' needs an 'action'");
    const char *s = scalar(an);
    if (!s || !mcir_action_parse(s, &p->action)) {
        char list[512] = "";
        for (int j = 0; j < MCIR_ACTION_COUNT; j++) {
            size_t len = strlen(list);
            snprintf(list + len, sizeof list - len, "%s%s", j ? ", " : "",
                     mcir_action_descs[j].name);
        }
        suggester g;
        suggest_begin(&g, s);
        for (int j = 0; j < MCIR_ACTION_COUNT; j++) suggest_try(&g, mcir_action_descs[j].name);
        char sb[96];
        return err(L, an, "unknown rewrite action '%s'%s (actions: %s)",
                   s ? shorten(s, sb, sizeof sb) : node_kind(an), suggest_end(&g), list);
    }
    const mcir_action_desc *ad = &mcir_action_descs[p->action];
    p->action_params =
        parse_params(L, b, n, an, ad->params, ad->n_params, ad->name, "action");
    if (!p->action_params) return false;
    /* an unset "output" is the anchor's output */
    int out = mcir_param_index(ad->params, ad->n_params, "output");
    if (out >= 0 && !p->action_params[out].set) {
        mcir_param_value *pv = &p->action_params[out];
        pv->set = true;
        pv->n = 1;
        pv->refs = mcir_arena_alloc(L->c->arena, sizeof *pv->refs);
        pv->refs[0] = p->nodes[0].out_var;
    }
    /* the first property is the one the rewrite establishes; the others
     * are annotations that come with it */
    const mcir_property_decl *prop = p->property;
    bool allowed = prop->n_rewrite_rules == 0;
    for (int i = 0; i < prop->n_rewrite_rules; i++)
        if (prop->rewrite_rules[i] == p->action) allowed = true;
    if (!allowed)
        return err(L, an, "property '%s' is not established by action '%s' (its rewrite_rule "
                   "lists the actions that may)", prop->name, ad->name);
    return true;
}

static void parse_pattern(loader *L, const yaml_node_t *n) {
    mcir_arena *a = L->c->arena;
    if (n->type != YAML_MAPPING_NODE) {
        err(L, n, "a pattern must be a mapping, not %s", node_kind(n));
        return;
    }
    if (!check_keys(L, n, pattern_keys, "pattern")) return;
    builder b;
    memset(&b, 0, sizeof b);
    mcir_pattern *p = mcir_arena_alloc(a, sizeof *p);
    b.p = p;
    p->loc = loc_of(L, n);
    yaml_node_t *v = map_get(L, n, "name");
    if (!v) {
        err(L, n, "a pattern needs a 'name'");
        return;
    }
    p->name = parse_string(L, v, "pattern name");
    if (!p->name) return;
    if (!valid_rule_name(p->name)) {
        char sb[96];
        err(L, v, "pattern name '%s' must be 1 to 128 letters, digits, '_', '-' or '.', "
            "starting with a letter or '_' (it names the rule in traces)",
            shorten(p->name, sb, sizeof sb));
        return;
    }
    bool replace = false;
    yaml_node_t *rn = map_get(L, n, "replace");
    if (rn && !parse_bool(L, rn, "replace", &replace)) return;
    for (int i = 0; i < L->n_pats; i++)
        if (strcmp(L->pats[i]->name, p->name) == 0) {
            err(L, v, "pattern '%s' is already defined at %s:%d:%d", p->name,
                L->pats[i]->loc.path, L->pats[i]->loc.line, L->pats[i]->loc.col);
            return;
        }
    bool exists = false;
    for (int i = 0; i < L->c->n_patterns; i++)
        if (strcmp(L->c->patterns[i]->name, p->name) == 0) {
            exists = true;
            if (!replace) {
                const mcir_loc *pl = &L->c->patterns[i]->loc;
                err(L, v, "pattern '%s' is already defined at %s:%d:%d (add 'replace: true' "
                    "to replace it)", p->name, pl->path, pl->line, pl->col);
                return;
            }
        }
    if (replace && !exists) {
        err(L, rn, "pattern '%s' replaces nothing: no earlier pattern has that name", p->name);
        return;
    }
    if ((v = map_get(L, n, "description"))) p->description = parse_string(L, v, "description");
    if ((v = map_get(L, n, "priority"))) {
        int64_t prio;
        if (!parse_int(L, v, "priority", &prio)) return;
        if (prio < -1000 || prio > 1000) {
            err(L, v, "priority %lld is outside -1000 .. 1000", (long long)prio);
            return;
        }
        p->priority = (int)prio;
    }
    p->trace_rejections = true;
    if ((v = map_get(L, n, "trace"))) {
        const char *t = scalar(v);
        if (t && strcmp(t, "applied") == 0)
            p->trace_rejections = false;
        else if (!t || strcmp(t, "all") != 0) {
            err(L, v, "trace must be 'all' or 'applied'");
            return;
        }
    }
    v = map_get(L, n, "property");
    if (!v) {
        err(L, n, "pattern '%s' needs a 'property'", p->name);
        return;
    }
    if (too_long(L, v, 8, "property")) return;
    p->n_properties = v->type == YAML_SEQUENCE_NODE ? seq_len(v) : 1;
    if (p->n_properties == 0) {
        err(L, v, "pattern '%s' needs at least one property", p->name);
        return;
    }
    p->properties = mcir_arena_alloc(a, (size_t)p->n_properties * sizeof *p->properties);
    for (int k = 0; k < p->n_properties; k++) {
        yaml_node_t *item = v->type == YAML_SEQUENCE_NODE ? seq_item(L, v, k) : v;
        const char *prop = scalar(item);
        p->properties[k] = prop ? find_property(L, prop) : NULL;
        if (!p->properties[k]) {
            suggester g;
            suggest_begin(&g, prop);
            for (int j = 0; j < L->n_props; j++) suggest_try(&g, L->props[j]->name);
            for (int j = 0; j < L->c->n_properties; j++)
                suggest_try(&g, L->c->properties[j]->name);
            char sb[96];
            err(L, item, "unknown property '%s'%s (declare it under 'properties:' first)",
                prop ? shorten(prop, sb, sizeof sb) : node_kind(item), suggest_end(&g));
            return;
        }
    }
    p->property = p->properties[0];
    v = map_get(L, n, "match");
    if (!v) {
        err(L, n, "pattern '%s' needs 'match'", p->name);
        return;
    }
    if (!parse_match(L, &b, v)) return;
    if ((v = map_get(L, n, "legality")) && !parse_legality(L, &b, v)) return;
    for (int k = 0; k < p->n_properties; k++) {
        const mcir_property_decl *prop = p->properties[k];
        for (int i = 0; i < prop->n_conditions; i++) {
            bool present = false;
            for (int j = 0; j < p->n_checks; j++)
                if (p->checks[j].check == prop->legality_conditions[i]) present = true;
            if (!present) {
                err(L, map_get(L, n, "legality") ? map_get(L, n, "legality") : n,
                    "pattern '%s' establishes '%s', whose legality_conditions include '%s': "
                    "add that check",
                    p->name, prop->name, prop->legality_conditions[i]->name);
                return;
            }
        }
    }
    v = map_get(L, n, "rewrite");
    if (!v) {
        err(L, n, "pattern '%s' needs 'rewrite'", p->name);
        return;
    }
    if (!parse_rewrite(L, &b, v)) return;
    if ((v = map_get(L, n, "memory_states"))) {
        if (v->type != YAML_MAPPING_NODE) {
            err(L, v, "memory_states must map variables to states");
            return;
        }
        if (too_long(L, v, MAX_ITEMS, "memory_states")) return;
        p->n_states = map_len(v);
        p->states = mcir_arena_alloc(a, (size_t)(p->n_states + 1) * sizeof *p->states);
        for (int i = 0; i < p->n_states; i++) {
            p->states[i].var = ref_var(L, &b, map_key(L, v, i));
            if (p->states[i].var < 0) return;
            yaml_node_t *sv = map_value(L, v, i);
            const char *s = scalar(sv);
            if (!s || !mcir_memory_state_parse(s, &p->states[i].state)) {
                suggester g;
                suggest_begin(&g, s);
                suggest_try(&g, "materialized");
                suggest_try(&g, "streaming");
                suggest_try(&g, "recomputable");
                char sb[96];
                err(L, sv, "unknown memory state '%s'%s (materialized, streaming, recomputable)",
                    s ? shorten(s, sb, sizeof sb) : node_kind(sv), suggest_end(&g));
                return;
            }
        }
    }
    p->n_vars = b.n_vars;
    p->var_names = mcir_arena_memdup(a, b.vars, (size_t)(b.n_vars + 1) * sizeof *b.vars);
    if (L->n_pats == (int)(sizeof L->pats / sizeof L->pats[0])) {
        err(L, n, "too many patterns in one file");
        return;
    }
    L->pat_replace[L->n_pats] = replace;
    L->pats[L->n_pats++] = p;
}

/* --------------------------------------------------------------- entry */

static const char *const top_keys[] = {"mcir_catalog", "properties", "patterns", "tests",
                                       NULL};

/* ---------------------------------------------------------- rule tests */

static const char *const test_keys[] = {"rule", "graph", "graph_file", "expect", "at",
                                        "check", "verify", NULL};

static const mcir_pattern *find_pattern(loader *L, const char *name) {
    for (int i = 0; i < L->n_pats; i++)
        if (strcmp(L->pats[i]->name, name) == 0) return L->pats[i];
    for (int i = 0; i < L->c->n_patterns; i++)
        if (strcmp(L->c->patterns[i]->name, name) == 0) return L->c->patterns[i];
    return NULL;
}

static void parse_test(loader *L, const yaml_node_t *n, int index) {
    mcir_arena *a = L->c->arena;
    if (n->type != YAML_MAPPING_NODE) {
        err(L, n, "a test must be a mapping, not %s", node_kind(n));
        return;
    }
    if (!check_keys(L, n, test_keys, "test")) return;
    mcir_rule_test *t = mcir_arena_alloc(a, sizeof *t);
    t->loc = loc_of(L, n);
    yaml_node_t *v = map_get(L, n, "rule");
    if (!v) {
        err(L, n, "a test needs 'rule': the name of the pattern it tests");
        return;
    }
    if (!(t->rule = parse_string(L, v, "rule"))) return;
    const mcir_pattern *p = find_pattern(L, t->rule);
    if (!p) {
        suggester g;
        suggest_begin(&g, t->rule);
        for (int i = 0; i < L->n_pats; i++) suggest_try(&g, L->pats[i]->name);
        for (int i = 0; i < L->c->n_patterns; i++) suggest_try(&g, L->c->patterns[i]->name);
        char sb[96];
        err(L, v, "test of unknown rule '%s'%s", shorten(t->rule, sb, sizeof sb),
            suggest_end(&g));
        return;
    }
    yaml_node_t *gt = map_get(L, n, "graph"), *gf = map_get(L, n, "graph_file");
    if (!gt == !gf) {
        err(L, n, "a test needs one of 'graph' (graph.json text, e.g. a '|' block) or "
            "'graph_file' (a path relative to this file)");
        return;
    }
    if (gt) {
        if (!(t->graph_text = parse_string(L, gt, "graph"))) return;
        t->graph_label = mcir_arena_printf(a, "%s:%d (test %d, inline graph)", L->path,
                                           (int)gt->start_mark.line + 1, index + 1);
    } else {
        const char *f = parse_string(L, gf, "graph_file");
        if (!f) return;
        const char *slash = strrchr(L->path, '/');
        t->graph_path = f[0] == '/' || !slash
                            ? f
                            : mcir_arena_printf(a, "%.*s/%s", (int)(slash - L->path), L->path, f);
    }
    v = map_get(L, n, "expect");
    const char *e = v ? scalar(v) : NULL;
    if (!e) {
        err(L, v ? v : n, "a test needs 'expect': applied, rejected or not_matched");
        return;
    }
    if (strcmp(e, "applied") == 0)
        t->expect = MCIR_EXPECT_APPLIED;
    else if (strcmp(e, "rejected") == 0)
        t->expect = MCIR_EXPECT_REJECTED;
    else if (strcmp(e, "not_matched") == 0)
        t->expect = MCIR_EXPECT_NOT_MATCHED;
    else {
        suggester g;
        suggest_begin(&g, e);
        suggest_try(&g, "applied");
        suggest_try(&g, "rejected");
        suggest_try(&g, "not_matched");
        char sb[96];
        err(L, v, "expect: unknown outcome '%s'%s (applied, rejected, not_matched)",
            shorten(e, sb, sizeof sb), suggest_end(&g));
        return;
    }
    if ((v = map_get(L, n, "at"))) {
        if (t->expect == MCIR_EXPECT_NOT_MATCHED) {
            err(L, v, "'at' names where the rule matches; not_matched has no place");
            return;
        }
        if (too_long(L, v, MAX_ITEMS, "at")) return;
        int k = v->type == YAML_SEQUENCE_NODE ? seq_len(v) : 1;
        t->n_at = k;
        t->at = mcir_arena_alloc(a, (size_t)(k + 1) * sizeof *t->at);
        for (int i = 0; i < k; i++)
            if (!(t->at[i] = parse_string(L, v->type == YAML_SEQUENCE_NODE ? seq_item(L, v, i) : v,
                                          "a node name in 'at'")))
                return;
    }
    if ((v = map_get(L, n, "check"))) {
        if (t->expect != MCIR_EXPECT_REJECTED) {
            err(L, v, "'check' names the check that rejects; it goes with 'expect: rejected'");
            return;
        }
        if (!(t->check = parse_string(L, v, "check"))) return;
        bool uses = false;
        suggester g;
        suggest_begin(&g, t->check);
        for (int i = 0; i < p->n_checks; i++) {
            uses |= strcmp(p->checks[i].check->name, t->check) == 0;
            suggest_try(&g, p->checks[i].check->name);
        }
        if (!uses) {
            char sb[96];
            err(L, v, "rule '%s' runs no check '%s'%s", p->name,
                shorten(t->check, sb, sizeof sb), suggest_end(&g));
            return;
        }
    }
    t->verify = t->expect == MCIR_EXPECT_APPLIED;
    if ((v = map_get(L, n, "verify")) && !parse_bool(L, v, "verify", &t->verify)) return;
    if (L->n_tests == (int)(sizeof L->tests / sizeof L->tests[0])) {
        err(L, n, "too many tests in one file");
        return;
    }
    L->tests[L->n_tests++] = t;
}

/* A "\0" escape in a quoted scalar puts a NUL inside a name, where C
 * strings would cut it short silently: no scalar may hold one. */
static bool reject_nul(loader *L) {
    bool ok = true;
    for (yaml_node_t *n = L->doc->nodes.start; n < L->doc->nodes.top; n++)
        if (n->type == YAML_SCALAR_NODE && strlen((const char *)n->data.scalar.value) !=
                                               n->data.scalar.length)
            ok = err(L, n, "a NUL character (\\0) inside a value");
    return ok;
}

/* Line and column (1-based) of a byte offset into the text. */
static mcir_loc loc_of_offset(const char *path, const char *text, size_t len, size_t off) {
    int line = 1, col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n') {
            line++;
            col = 1;
        } else if (((unsigned char)text[i] & 0xc0) != 0x80) {
            col++;   /* columns count characters, not UTF-8 continuation bytes */
        }
    }
    return (mcir_loc){path, line, col};
}

static void load_document(loader *L) {
    yaml_node_t *root = yaml_document_get_root_node(L->doc);
    if (!root) {
        err(L, NULL, "empty catalog (expected 'mcir_catalog: 1')");
        return;
    }
    if (root->type != YAML_MAPPING_NODE) {
        err(L, root, "a catalog must be a mapping with 'mcir_catalog: 1', not %s",
            node_kind(root));
        return;
    }
    if (!check_keys(L, root, top_keys, "catalog")) return;
    yaml_node_t *ver = map_get(L, root, "mcir_catalog");
    int64_t version;
    if (!ver) {
        err(L, root, "missing 'mcir_catalog: 1' (the format version)");
        return;
    }
    if (!parse_int(L, ver, "mcir_catalog", &version)) return;
    if (version != 1) {
        err(L, ver, "unsupported catalog version %lld (this mcirc reads 1)", (long long)version);
        return;
    }
    yaml_node_t *props = map_get(L, root, "properties");
    int max_props = (int)(sizeof L->props / sizeof L->props[0]);
    if (props && props->type != YAML_SEQUENCE_NODE)
        err(L, props, "'properties' must be a list");
    else if (props && !too_long(L, props, max_props, "properties"))
        for (int i = 0; i < seq_len(props); i++) parse_property(L, seq_item(L, props, i));
    yaml_node_t *pats = map_get(L, root, "patterns");
    int max_pats = (int)(sizeof L->pats / sizeof L->pats[0]);
    if (pats && pats->type != YAML_SEQUENCE_NODE)
        err(L, pats, "'patterns' must be a list");
    else if (pats && !too_long(L, pats, max_pats, "patterns"))
        for (int i = 0; i < seq_len(pats); i++) parse_pattern(L, seq_item(L, pats, i));
    yaml_node_t *tests = map_get(L, root, "tests");
    int max_tests = (int)(sizeof L->tests / sizeof L->tests[0]);
    if (tests && tests->type != YAML_SEQUENCE_NODE)
        err(L, tests, "'tests' must be a list");
    else if (tests && !L->errors && !too_long(L, tests, max_tests, "tests"))
        for (int i = 0; i < seq_len(tests); i++) parse_test(L, seq_item(L, tests, i), i);
}

static void commit(loader *L) {
    mcir_catalog *c = L->c;
    for (int i = 0; i < L->n_props; i++) {
        c->properties = mcir_arena_grow(c->arena, c->properties, &c->cap_properties,
                                        c->n_properties + 1, sizeof *c->properties);
        c->properties[c->n_properties++] = L->props[i];
    }
    for (int i = 0; i < L->n_pats; i++) {
        if (L->pat_replace[i]) {
            for (int j = 0; j < c->n_patterns; j++)
                if (strcmp(c->patterns[j]->name, L->pats[i]->name) == 0)
                    c->patterns[j] = L->pats[i];
            continue;
        }
        c->patterns = mcir_arena_grow(c->arena, c->patterns, &c->cap_patterns,
                                      c->n_patterns + 1, sizeof *c->patterns);
        c->patterns[c->n_patterns++] = L->pats[i];
    }
    /* rules run by priority, highest first; equal priorities in the order
     * loaded (insertion sort: stable, and catalogs are small) */
    for (int i = 1; i < c->n_patterns; i++) {
        mcir_pattern *p = c->patterns[i];
        int j = i;
        for (; j > 0 && c->patterns[j - 1]->priority < p->priority; j--)
            c->patterns[j] = c->patterns[j - 1];
        c->patterns[j] = p;
    }
    for (int i = 0; i < L->n_tests; i++) {
        c->tests = mcir_arena_grow(c->arena, c->tests, &c->cap_tests, c->n_tests + 1,
                                   sizeof *c->tests);
        c->tests[c->n_tests++] = L->tests[i];
    }
}

bool mcir_catalog_load_string(mcir_catalog *c, const char *text, size_t len,
                              const char *path, mcir_diag *d) {
    loader L;
    memset(&L, 0, sizeof L);
    L.c = c;
    L.path = mcir_arena_strdup(c->arena, path);
    L.d = d;
    if (len > MAX_CATALOG_BYTES) {
        err(&L, NULL, "catalog is larger than %d MiB", MAX_CATALOG_BYTES >> 20);
        return false;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        err(&L, NULL, "cannot initialise the YAML parser");
        return false;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        mcir_loc loc = {L.path, (int)parser.problem_mark.line + 1,
                        (int)parser.problem_mark.column + 1};
        if (parser.error == YAML_READER_ERROR) /* libyaml knows only the byte */
            mcir_error(d, loc_of_offset(L.path, text, len, parser.problem_offset),
                       "YAML: %s (byte %zu)", parser.problem ? parser.problem : "bad input",
                       parser.problem_offset);
        else
            mcir_error(d, loc, "YAML: %s%s%s", parser.problem ? parser.problem : "syntax error",
                       parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return false;
    }
    L.doc = &doc;
    if (reject_nul(&L)) load_document(&L);
    yaml_document_delete(&doc);
    /* a second document is a mistake (a stray "---") */
    if (!L.errors) {
        yaml_document_t extra;
        if (yaml_parser_load(&parser, &extra)) {
            yaml_node_t *r = yaml_document_get_root_node(&extra);
            if (r) {
                L.doc = &extra;
                err(&L, r, "a catalog file holds one YAML document");
            }
            yaml_document_delete(&extra);
        } else {
            mcir_loc loc = {L.path, (int)parser.problem_mark.line + 1,
                            (int)parser.problem_mark.column + 1};
            mcir_error(d, loc, "YAML: %s", parser.problem ? parser.problem : "syntax error");
            L.errors++;
        }
    }
    yaml_parser_delete(&parser);
    if (L.errors > MAX_REPORTED)
        note(d, (mcir_loc){L.path, 0, 0}, "%d more errors not shown", L.errors - MAX_REPORTED);
    if (L.errors) return false;
    commit(&L);
    return true;
}

bool mcir_catalog_load_file(mcir_catalog *c, const char *path, mcir_diag *d) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        mcir_error(d, (mcir_loc){path, 0, 0}, "cannot open catalog: %s", strerror(errno));
        return false;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    MCIR_ASSERT(buf);
    size_t got;
    while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len > MAX_CATALOG_BYTES) break;
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            MCIR_ASSERT(buf);
        }
    }
    bool read_error = ferror(f);
    fclose(f);
    if (read_error) {
        free(buf);
        mcir_error(d, (mcir_loc){path, 0, 0}, "cannot read catalog");
        return false;
    }
    bool ok = mcir_catalog_load_string(c, buf, len, path, d);
    free(buf);
    return ok;
}

bool mcir_catalog_load_default(mcir_catalog *c, mcir_diag *d) {
    return mcir_catalog_load_string(c, mcir_catalog_default_yaml,
                                    mcir_catalog_default_yaml_size, "catalog/default.yaml", d);
}
