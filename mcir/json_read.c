/*
 * json_read.c — the graph.json reader (docs/graph-format.md; its ops: docs/ops.md).
 *
 * jansson parses; json_pos.c supplies the line:col of every value, so each
 * message points at the offending value. The reader reports every problem
 * it can find (one message each) and returns NULL if there was any; it
 * never stops at the first. Checks run in layers, each only where the
 * layer below held: JSON syntax → field types and names → tensor and node
 * references → cycles (mcir_graph_sort) → shapes (mcir_graph_infer) →
 * mcir_graph_verify. What was given is stored as given: attribute defaults
 * stay in the op schema, never copied into node->attrs.
 *
 * Besides graph.json proper the reader accepts the fields the project's
 * own `mcir` artifact adds (top-level "tensors"; per node "properties",
 * "group", "inplace_input", "origin"), so a written artifact reads back.
 */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "json_pos.h"

/* ------------------------------------------------------------- context */

/* A "tensors" record of the artifact, checked once shapes are inferred. */
typedef struct tensor_decl {
    mcir_tensor *t;
    int pv;                      /* the record */
    bool has_dtype, has_shape;
    mcir_dtype dtype;
    int rank;
    int64_t shape[MCIR_MAX_RANK];
    json_t *shape_json;          /* a symbolic shape ("batch*seq"): compared as text */
    const char *kind;
    int kind_pv, dtype_pv, shape_pv;
} tensor_decl;

/* A message held back so that all of them come out in source order. */
typedef struct held_error {
    mcir_loc loc;
    int seq;
    char *text;
} held_error;

typedef struct reader {
    mcir_graph *g;
    mcir_diag *d;
    const char *path;
    mcir_json_pos *pos;
    int n_errors;
    held_error *held;
    int n_held, cap_held;
    /* Some tensor declaration could not be read (no usable name, or a list
     * that is not a list): "unknown tensor" would only echo that error. */
    bool names_incomplete;
    bool has_dims;               /* the graph has a "dims" field */
    /* Which declaration made each tensor, by tensor id ("input", "node 'a'"). */
    const char **made_by;
    int cap_made_by;
} reader;

static void err(reader *r, mcir_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void err(reader *r, mcir_loc loc, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = malloc((size_t)(n > 0 ? n : 0) + 1);
    MCIR_ASSERT(text);
    vsnprintf(text, (size_t)(n > 0 ? n : 0) + 1, fmt, ap2);
    va_end(ap2);
    if (r->n_held == r->cap_held) {
        r->cap_held = r->cap_held ? r->cap_held * 2 : 16;
        r->held = realloc(r->held, (size_t)r->cap_held * sizeof *r->held);
        MCIR_ASSERT(r->held);
    }
    r->held[r->n_held] = (held_error){loc, r->n_held, text};
    r->n_held++;
    r->n_errors++;
}

static int held_cmp(const void *a, const void *b) {
    const held_error *x = a, *y = b;
    if (x->loc.line != y->loc.line) return x->loc.line < y->loc.line ? -1 : 1;
    if (x->loc.col != y->loc.col) return x->loc.col < y->loc.col ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Prints the held messages in source order (those without a position
 * first). */
static void flush_errors(reader *r) {
    if (r->n_held) qsort(r->held, (size_t)r->n_held, sizeof *r->held, held_cmp);
    for (int i = 0; i < r->n_held; i++) {
        mcir_error(r->d, r->held[i].loc, "%s", r->held[i].text);
        free(r->held[i].text);
    }
    free(r->held);
    r->held = NULL;
    r->n_held = r->cap_held = 0;
}

static mcir_loc at(reader *r, int pv) { return mcir_json_pos_loc(r->pos, pv, r->path); }
static mcir_loc at_key(reader *r, int pv) { return mcir_json_pos_key_loc(r->pos, pv, r->path); }

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

/* ------------------------------------------------------- "did you mean" */

static int edit_distance(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    if (na > 64 || nb > 64) return INT_MAX;
    int row[65];
    for (size_t j = 0; j <= nb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

typedef struct suggest {
    const char *word;
    const char *best;
    int dist;
} suggest;

static void suggest_try(suggest *s, const char *cand) {
    int dist = edit_distance(s->word, cand);
    int limit = (int)strlen(s->word) / 3;
    if (limit < 2) limit = 2;
    size_t nw = strlen(s->word), nc = strlen(cand);
    if (nw >= 3 && nc >= 3 && strncmp(s->word, cand, nw < nc ? nw : nc) == 0 && dist > limit)
        dist = limit; /* "epsilon" for "eps" */
    if (dist <= limit && (!s->best || dist < s->dist)) {
        s->best = cand;
        s->dist = dist;
    }
}

/* " (did you mean 'x'?)" or "" — points into a static buffer per call site
 * via the caller's buf. */
static const char *suggest_text(const suggest *s, char *buf, size_t n) {
    if (!s->best) return "";
    snprintf(buf, n, " (did you mean '%s'?)", s->best);
    return buf;
}

/* ------------------------------------------------------- string sets */

/* Open-addressing set of strings (not owned), for duplicate checks. */
typedef struct strset {
    const char **slot;
    int *value;
    size_t cap, n;
} strset;

static uint64_t hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Inserts s with value v; returns -1 if new, else the value of the earlier one. */
static int strset_put(strset *set, const char *s, int v) {
    if ((set->n + 1) * 2 > set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 64;
        const char **slot = calloc(cap, sizeof *slot);
        int *value = calloc(cap, sizeof *value);
        MCIR_ASSERT(slot && value);
        for (size_t i = 0; i < set->cap; i++)
            if (set->slot[i]) {
                size_t j = hash_str(set->slot[i]) & (cap - 1);
                while (slot[j]) j = (j + 1) & (cap - 1);
                slot[j] = set->slot[i];
                value[j] = set->value[i];
            }
        free(set->slot);
        free(set->value);
        set->slot = slot;
        set->value = value;
        set->cap = cap;
    }
    size_t j = hash_str(s) & (set->cap - 1);
    while (set->slot[j]) {
        if (strcmp(set->slot[j], s) == 0) return set->value[j];
        j = (j + 1) & (set->cap - 1);
    }
    set->slot[j] = s;
    set->value[j] = v;
    set->n++;
    return -1;
}

static bool strset_has(const strset *set, const char *s) {
    if (!set->cap) return false;
    size_t j = hash_str(s) & (set->cap - 1);
    while (set->slot[j]) {
        if (strcmp(set->slot[j], s) == 0) return true;
        j = (j + 1) & (set->cap - 1);
    }
    return false;
}

static void strset_free(strset *set) {
    free(set->slot);
    free(set->value);
}

/* ------------------------------------------------------ field helpers */

/* Reports every member of object `obj` whose key is not in `allowed`. */
static void check_keys(reader *r, int opv, const char *const *allowed, const char *where) {
    int n = mcir_json_pos_count(r->pos, opv);
    for (int i = 0; i < n; i++) {
        int kv;
        const char *key = mcir_json_pos_member(r->pos, opv, i, &kv);
        if (!key) continue;
        bool known = false;
        suggest s = {.word = key};
        for (const char *const *a = allowed; *a; a++) {
            if (strcmp(*a, key) == 0) known = true;
            suggest_try(&s, *a);
        }
        if (!known) {
            char buf[96];
            err(r, at_key(r, kv), "unknown field '%s' in %s%s", key, where,
                suggest_text(&s, buf, sizeof buf));
        }
    }
}

/* The member `key` of obj with its position handle; NULL if absent. */
static json_t *member(reader *r, json_t *obj, int opv, const char *key, int *pv) {
    json_t *v = json_object_get(obj, key);
    *pv = v ? mcir_json_pos_key(r->pos, opv, key) : -1;
    return v;
}

static json_t *required(reader *r, json_t *obj, int opv, const char *key, int *pv,
                       const char *where) {
    json_t *v = member(r, obj, opv, key, pv);
    if (!v) err(r, at(r, opv), "%s: missing required field '%s'", where, key);
    return v;
}

static bool json_int_in(const json_t *v, int64_t lo, int64_t hi, int64_t *out) {
    if (!json_is_integer(v)) return false;
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) return false;
    *out = (int64_t)x;
    return true;
}

/* ------------------------------------------------- dtypes and shapes */

static bool parse_dtype(reader *r, json_t *v, int pv, const char *who, mcir_dtype *out) {
    if (!json_is_string(v)) {
        err(r, at(r, pv), "%s: 'dtype' must be a string (f32, f16, bf16, i32, i64, u8 or bool), got %s", who,
            json_kind(v));
        return false;
    }
    if (!mcir_dtype_parse(json_string_value(v), out)) {
        err(r, at(r, pv), "%s: unknown dtype '%s' (expected f32, f16, bf16, i32, i64, u8 or bool)", who,
            json_string_value(v));
        return false;
    }
    return true;
}

/* The dimension a string names (graph.json "dims"), reported at pv when
 * it names none; who/what say where ("input 'x': shape dimension 1"). */
static bool dim_ref(reader *r, json_t *v, int pv, const char *who, const char *what, int *dim) {
    const char *name = json_string_value(v);
    *dim = mcir_graph_find_dim(r->g, name);
    if (*dim >= 0) return true;
    if (!r->has_dims) {
        err(r, at(r, pv), "%s: %s names '%s', but the graph declares no 'dims'", who, what, name);
        return false;
    }
    suggest s = {.word = name};
    char buf[160], list[200];
    size_t k = 0;
    list[0] = 0;
    for (int i = 0; i < r->g->n_dims && k < sizeof list; i++) {
        suggest_try(&s, r->g->dims[i].name);
        k += (size_t)snprintf(list + k, sizeof list - k, "%s'%s'", i ? ", " : "", r->g->dims[i].name);
    }
    const char *sug = suggest_text(&s, buf, sizeof buf);
    if (r->g->n_dims == 0)
        err(r, at(r, pv), "%s: %s names '%s', which is not a declared dimension", who, what, name);
    else
        err(r, at(r, pv), "%s: %s names '%s', which is not a declared dimension (dims: %s)%s",
            who, what, name, list, sug);
    return false;
}

/* Symbolic entries a shape may hold: none (weights), dimension names
 * (inputs), or any extent as text (the artifact's "tensors" records). */
typedef enum { SHAPE_INTS, SHAPE_DIMS, SHAPE_TEXT } shape_syms;

static bool parse_shape_ex(reader *r, json_t *v, int pv, const char *who, shape_syms syms,
                           int *rank, int64_t *shape, mcir_extent *sym, bool *has_sym) {
    if (has_sym) *has_sym = false;
    if (!json_is_array(v)) {
        err(r, at(r, pv), "%s: 'shape' must be a list of positive integers, got %s", who,
            json_kind(v));
        return false;
    }
    size_t n = json_array_size(v);
    if (n > MCIR_MAX_RANK) {
        err(r, at(r, pv), "%s: rank %zu is above the maximum of %d", who, n, MCIR_MAX_RANK);
        return false;
    }
    bool ok = true;
    int64_t numel = 1;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        int epv = mcir_json_pos_index(r->pos, pv, i);
        int64_t dim;
        if (json_is_string(e) && syms == SHAPE_TEXT) {
            *has_sym = true;
            shape[i] = 1;
            continue;
        }
        if (json_is_string(e) && syms == SHAPE_DIMS) {
            char what[64];
            int k;
            snprintf(what, sizeof what, "shape dimension %zu", i);
            if (!dim_ref(r, e, epv, who, what, &k)) {
                ok = false;
                continue;
            }
            *has_sym = true;
            sym[i] = mcir_extent_dim(k);
            dim = r->g->dims[k].value;
        } else if (json_is_string(e) && syms == SHAPE_INTS && r->has_dims) {
            err(r, at(r, epv), "%s: shape dimension %zu is '%s'; weights have integer shapes "
                "(only an input's shape may name a dimension)", who, i, json_string_value(e));
            ok = false;
            continue;
        } else if (!json_int_in(e, 1, INT64_MAX, &dim)) {
            if (json_is_integer(e))
                err(r, at(r, epv), "%s: shape dimension %zu is %lld; dimensions must be positive",
                    who, i, (long long)json_integer_value(e));
            else
                err(r, at(r, epv), "%s: shape dimension %zu must be a positive integer, got %s",
                    who, i, json_kind(e));
            ok = false;
            continue;
        }
        shape[i] = dim;
        if (sym && !(has_sym && *has_sym && !json_is_integer(e))) sym[i] = mcir_extent_const(dim);
        if (ok && (mcir_mul_overflows(numel, dim, &numel) || numel > MCIR_MAX_ELEMS)) {
            err(r, at(r, pv), "%s: shape has too many elements (more than %s, the limit "
                              "of one tensor)", who, MCIR_MAX_ELEMS_TEXT);
            ok = false;
        }
    }
    *rank = (int)n;
    return ok;
}


static void shape_fmt(char *buf, size_t n, int rank, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* --------------------------------------------------------------- tensors */

static void set_made_by(reader *r, mcir_tensor *t, const char *by) {
    if (t->id >= r->cap_made_by) {
        int old = r->cap_made_by;
        r->made_by = mcir_arena_grow(r->g->arena, r->made_by, &r->cap_made_by, t->id + 1,
                                     sizeof *r->made_by);
        for (int i = old; i < r->cap_made_by; i++) r->made_by[i] = NULL;
    }
    r->made_by[t->id] = by;
}

static const char *made_by(reader *r, const mcir_tensor *t) {
    if (t->id < r->cap_made_by && r->made_by[t->id]) return r->made_by[t->id];
    return t->kind == MCIR_TENSOR_INPUT ? "the input" : t->kind == MCIR_TENSOR_WEIGHT ? "the weight"
                                                                                   : "a tensor";
}

/* Reports that a declaration (`what`, e.g. "output 'x'" or "the name")
 * takes the name of tensor t. */
static void report_taken(reader *r, int pv, const char *who, const char *what,
                         const mcir_tensor *t) {
    err(r, at(r, pv), "%s: %s clashes with %s declared at %d:%d", who, what,
        made_by(r, t), t->loc.line, t->loc.col);
}

static const char *tensor_name(reader *r, json_t *obj, int opv, const char *what, size_t idx,
                               int *name_pv) {
    json_t *name = member(r, obj, opv, "name", name_pv);
    if (!name) {
        err(r, at(r, opv), "%s #%zu: missing required field 'name'", what, idx);
        return NULL;
    }
    if (!json_is_string(name) || json_string_length(name) == 0) {
        err(r, at(r, *name_pv), "%s #%zu: 'name' must be a non-empty string, got %s", what,
            idx, json_is_string(name) ? "an empty string" : json_kind(name));
        return NULL;
    }
    if (strlen(json_string_value(name)) != json_string_length(name)) {
        err(r, at(r, *name_pv), "%s #%zu: 'name' contains a NUL character", what, idx);
        return NULL;
    }
    return json_string_value(name);
}

/* JSON has no infinities or NaN: a weight value may spell them as the
 * strings "inf", "-inf" and "nan" (an extension; docs/graph-format.md). */
static bool nonfinite_value(const json_t *v, float *out) {
    const char *s = json_string_value(v);
    if (!s) return false;
    float f;
    if (!strcmp(s, "inf")) f = INFINITY;
    else if (!strcmp(s, "-inf")) f = -INFINITY;
    else if (!strcmp(s, "nan")) f = NAN;
    else return false;
    if (out) *out = f;
    return true;
}

/* Nested lists matching shape[dim..] exactly; counts leaves into *count. */
static bool check_value_shape(reader *r, json_t *v, int pv, const char *who, const mcir_tensor *t,
                              int dim) {
    if (dim == t->rank) {
        if (!json_is_number(v) && !nonfinite_value(v, NULL)) {
            err(r, at(r, pv), "%s: 'value' element must be a number (or \"inf\", \"-inf\", "
                "\"nan\"), got %s", who, json_kind(v));
            return false;
        }
        return true;
    }
    if (!json_is_array(v)) {
        char sb[200];
        shape_fmt(sb, sizeof sb, t->rank, t->shape);
        err(r, at(r, pv), "%s: 'value' must be nested lists matching shape %s, got %s at depth %d",
            who, sb, json_kind(v), dim);
        return false;
    }
    if ((int64_t)json_array_size(v) != t->shape[dim]) {
        err(r, at(r, pv), "%s: 'value' has %zu element%s along dimension %d, shape says %lld",
            who, json_array_size(v), json_array_size(v) == 1 ? "" : "s", dim,
            (long long)t->shape[dim]);
        return false;
    }
    bool ok = true;
    for (size_t i = 0; i < json_array_size(v) && ok; i++)
        ok = check_value_shape(r, json_array_get(v, i), mcir_json_pos_index(r->pos, pv, i), who,
                               t, dim + 1);
    return ok;
}

/* Stores the leaves in C order as storage-dtype bytes. */
static bool store_value(reader *r, json_t *v, int pv, const char *who, const mcir_tensor *t,
                        unsigned char *data, int64_t *k) {
    if (!json_is_array(v) && mcir_dtype_is_integer(t->dtype)) {
        /* integers: an integral number the dtype holds exactly */
        double x = json_number_value(v);
        bool whole = json_is_integer(v) || (json_is_real(v) && x == trunc(x));
        int64_t iv = json_is_integer(v) ? (int64_t)json_integer_value(v) : (int64_t)0;
        if (whole && !json_is_integer(v)) iv = mcir_value_to_int(MCIR_DTYPE_I64, x);
        bool in_range = whole && (double)mcir_value_to_int(t->dtype, (double)iv) == (double)iv &&
                        (t->dtype != MCIR_DTYPE_BOOL || iv == 0 || iv == 1);
        if (!in_range) {
            err(r, at(r, pv), "%s: value %g is not %s for %s", who, x,
                whole ? "in range" : "an integer", mcir_dtype_name(t->dtype));
            return false;
        }
        if (t->dtype == MCIR_DTYPE_I64) memcpy(data + *k * 8, &iv, 8);
        else mcir_value_set(t->dtype, data, *k, (double)iv);
        (*k)++;
        return true;
    }
    if (!json_is_array(v)) {
        double x = json_number_value(v);
        float f = 0.0f;
        /* Values up to FLT_MAX + half an ulp round to FLT_MAX (that is how
         * the shortest decimal of FLT_MAX reads back); a wider cast would be
         * undefined, so clamp rather than cast there. */
        bool special = nonfinite_value(v, &f);
        bool ok = special || (isfinite(x) && fabs(x) < 0x1.ffffffp+127);
        if (ok && !special) f = fabs(x) > FLT_MAX ? copysignf(FLT_MAX, (float)(x > 0 ? 1 : -1))
                                                  : (float)x;
        if (special) ok = true;
        size_t es = mcir_dtype_size(t->dtype);
        if (t->dtype == MCIR_DTYPE_F32) {
            memcpy(data + *k * (int64_t)es, &f, 4);
        } else {
            uint16_t h = t->dtype == MCIR_DTYPE_F16 ? mcir_f32_to_f16(f) : mcir_f32_to_bf16(f);
            ok = ok && (special || (h & 0x7fff) < (t->dtype == MCIR_DTYPE_F16 ? 0x7c00 : 0x7f80));
            memcpy(data + *k * (int64_t)es, &h, 2);
        }
        if (!ok) {
            err(r, at(r, pv), "%s: value %g is out of range for %s", who, x,
                mcir_dtype_name(t->dtype));
            return false;
        }
        (*k)++;
        return true;
    }
    bool ok = true;
    for (size_t i = 0; i < json_array_size(v); i++)
        ok &= store_value(r, json_array_get(v, i), mcir_json_pos_index(r->pos, pv, i), who, t,
                          data, k);
    return ok;
}

static void read_weight_value(reader *r, mcir_tensor *t, json_t *v, int pv, const char *who) {
    if (!check_value_shape(r, v, pv, who, t, 0)) return;
    int64_t bytes = mcir_tensor_bytes(t), k = 0;
    unsigned char *data = mcir_arena_alloc(r->g->arena, (size_t)bytes);
    if (store_value(r, v, pv, who, t, data, &k)) t->data = data;
}

static void read_weight_data(reader *r, mcir_tensor *t, json_t *v, int pv, const char *who) {
    if (!json_is_string(v) || json_string_length(v) == 0) {
        err(r, at(r, pv), "%s: 'data' must be the path of a .npy file, got %s", who,
            json_is_string(v) ? "an empty string" : json_kind(v));
        return;
    }
    const char *rel = json_string_value(v);
    const char *file = rel[0] == '/' ? rel : mcir_arena_printf(r->g->arena, "%s/%s", r->g->dir, rel);
    mcir_npy npy;
    char why[256];
    if (!mcir_npy_load(file, &npy, why, sizeof why)) {
        err(r, at(r, pv), "%s: data file '%s': %s", who, file, why);
        return;
    }
    char want[200], got[200];
    shape_fmt(want, sizeof want, t->rank, t->shape);
    shape_fmt(got, sizeof got, npy.rank, npy.shape);
    if (npy.dtype != t->dtype) {
        err(r, at(r, pv), "%s: data file '%s' holds %s (%s), declared dtype is %s", who, file,
            mcir_dtype_name(npy.dtype),
            mcir_npy_descr(npy.dtype),
            mcir_dtype_name(t->dtype));
    } else if (npy.rank != t->rank || memcmp(npy.shape, t->shape, sizeof(int64_t) * (size_t)t->rank)) {
        err(r, at(r, pv), "%s: data file '%s' has shape %s, declared shape is %s", who, file, got,
            want);
    } else {
        t->data = mcir_arena_memdup(r->g->arena, npy.data, (size_t)mcir_tensor_bytes(t));
        char *real = realpath(file, NULL);
        t->data_path = mcir_arena_strdup(r->g->arena, real ? real : file);
        free(real);
    }
    mcir_npy_free(&npy);
}

/* "shard": {"axis": A} — rank r holds part r of the graph's ranks equal
 * parts along A; the declared shape (and any data) is the whole tensor's,
 * t->shape becomes one rank's part. */
static void read_shard(reader *r, mcir_tensor *t, json_t *v, int pv, const char *who) {
    static const char *const shard_keys[] = {"axis", "blocks", NULL};
    if (!json_is_object(v)) {
        err(r, at(r, pv), "%s: 'shard' must be an object {\"axis\": A}, got %s", who, json_kind(v));
        return;
    }
    check_keys(r, pv, shard_keys, mcir_arena_printf(r->g->arena, "%s's shard", who));
    int apv;
    json_t *a = required(r, v, pv, "axis", &apv, mcir_arena_printf(r->g->arena, "%s's shard", who));
    if (!a) return;
    int axis;
    if (!json_is_integer(a) || !mcir_norm_axis(json_integer_value(a), t->rank, &axis)) {
        char sh[200];
        shape_fmt(sh, sizeof sh, t->rank, t->shape);
        if (json_is_integer(a))
            err(r, at(r, apv), "%s: shard axis %lld is out of range for shape %s (rank %d)", who,
                (long long)json_integer_value(a), sh, t->rank);
        else
            err(r, at(r, apv), "%s: shard axis must be an integer, got %s", who, json_kind(a));
        return;
    }
    if (t->sym && !mcir_extent_is_const(&t->sym[axis], NULL)) {
        err(r, at(r, apv), "%s: shard axis %d has a symbolic extent; a sharded axis must have a "
            "fixed one", who, axis);
        return;
    }
    int ranks = r->g->ranks, bpv;
    int64_t blocks = 1;
    json_t *b = member(r, v, pv, "blocks", &bpv);
    int64_t max_blocks = t->shape[axis] < 65536 ? t->shape[axis] : 65536;
    if (b && (!json_is_integer(b) || json_integer_value(b) < 1 || json_integer_value(b) > max_blocks)) {
        err(r, at(r, bpv), "%s: shard blocks must be an integer from 1 to %lld (the axis' extent, at most "
            "65536)", who, (long long)max_blocks);
        return;
    }
    if (b) blocks = json_integer_value(b);
    if (t->shape[axis] % (blocks * ranks) != 0) {
        if (blocks > 1)
            err(r, at(r, apv), "%s: shard axis %d (extent %lld) does not divide into %lld blocks of %d "
                "equal parts, one per rank", who, axis, (long long)t->shape[axis], (long long)blocks, ranks);
        else
            err(r, at(r, apv), "%s: shard axis %d (extent %lld) does not divide into %d equal parts, "
                "one per rank", who, axis, (long long)t->shape[axis], ranks);
        return;
    }
    t->shard_blocks = (int)blocks;
    t->shape[axis] /= ranks;
    if (t->sym) t->sym[axis] = mcir_extent_const(t->shape[axis]);
    t->shard_axis = axis;
    t->shard_parts = ranks;
}

/* inputs[] and weights[] entries. */
static void read_tensor_list(reader *r, json_t *list, int lpv, bool weights) {
    static const char *const input_keys[] = {"name", "dtype", "shape", "shard", NULL};
    static const char *const weight_keys[] = {"name", "dtype", "shape", "data", "value", "shard",
                                              NULL};
    const char *what = weights ? "weight" : "input";
    if (!json_is_array(list)) {
        err(r, at(r, lpv), "'%s' must be a list, got %s", weights ? "weights" : "inputs",
            json_kind(list));
        r->names_incomplete = true;
        return;
    }
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *obj = json_array_get(list, i);
        int opv = mcir_json_pos_index(r->pos, lpv, i);
        if (!json_is_object(obj)) {
            err(r, at(r, opv), "%s #%zu must be an object, got %s", what, i, json_kind(obj));
            r->names_incomplete = true;
            continue;
        }
        int name_pv;
        const char *name = tensor_name(r, obj, opv, what, i, &name_pv);
        const char *who = name ? mcir_arena_printf(r->g->arena, "%s '%s'", what, name)
                               : mcir_arena_printf(r->g->arena, "%s #%zu", what, i);
        check_keys(r, opv, weights ? weight_keys : input_keys, who);

        int dpv, spv;
        json_t *dt = required(r, obj, opv, "dtype", &dpv, who);
        json_t *sh = required(r, obj, opv, "shape", &spv, who);
        mcir_dtype dtype = MCIR_DTYPE_F32;
        int rank = 0;
        int64_t shape[MCIR_MAX_RANK];
        mcir_extent sym[MCIR_MAX_RANK];
        bool ok = name != NULL, has_sym = false;
        if (dt) ok &= parse_dtype(r, dt, dpv, who, &dtype);
        if (sh) ok &= parse_shape_ex(r, sh, spv, who, weights ? SHAPE_INTS : SHAPE_DIMS, &rank,
                                     shape, sym, &has_sym);
        ok &= dt && sh;

        int data_pv = -1, value_pv = -1;
        json_t *data = weights ? member(r, obj, opv, "data", &data_pv) : NULL;
        json_t *value = weights ? member(r, obj, opv, "value", &value_pv) : NULL;
        if (data && value) {
            err(r, at_key(r, value_pv), "%s: give at most one of 'data' and 'value'", who);
            ok = false;
        }
        if (!name) {
            r->names_incomplete = true;
            continue;
        }
        mcir_tensor *old = mcir_graph_find_tensor(r->g, name);
        if (old) {
            report_taken(r, name_pv, who, "its name", old);
            continue;
        }
        if (!ok) {
            /* Declare it anyway (rank unknown) so uses do not cascade. */
            mcir_tensor *t = mcir_graph_add_tensor(r->g, name, dtype, -1, NULL,
                                                   weights ? MCIR_TENSOR_WEIGHT : MCIR_TENSOR_INPUT);
            if (t) t->loc = at(r, opv);
            continue;
        }
        mcir_tensor *t = mcir_graph_add_tensor(r->g, name, dtype, rank, shape,
                                               weights ? MCIR_TENSOR_WEIGHT : MCIR_TENSOR_INPUT);
        MCIR_ASSERT(t);
        t->loc = at(r, opv);
        if (has_sym) t->sym = mcir_arena_memdup(r->g->arena, sym, sizeof *sym * (size_t)rank);
        if (data) read_weight_data(r, t, data, data_pv, who);
        else if (value) read_weight_value(r, t, value, value_pv, who);
        /* after the data, which is the whole tensor's */
        int shard_pv;
        json_t *shard = member(r, obj, opv, "shard", &shard_pv);
        if (shard) read_shard(r, t, shard, shard_pv, who);
    }
}

/* ----------------------------------------------------------------- nodes */

/* What pass 1 learns about a node; pass 2 builds it. */
typedef struct node_rec {
    json_t *obj;
    int pv;
    const char *name;            /* given, or NULL */
    const char *who;             /* "node 'a' (matmul)" / "node #3 (matmul)" */
    bool op_ok;
    mcir_op op;
    int n_outputs;
    mcir_tensor **outputs;
    bool outputs_ok;
    mcir_node *node;             /* once built */
} node_rec;

/* A validated attribute, applied once the node exists. */
typedef struct attr_val {
    const mcir_attr_spec *spec;
    json_t *v;
    int pv;
} attr_val;

static const char *const node_keys[] = {"name", "op", "inputs", "outputs", "attrs",
                                        "properties", "group", "inplace_input", "origin", NULL};

static void read_node_pass1(reader *r, node_rec *nr, size_t i, strset *node_names) {
    json_t *obj = nr->obj;
    int pv;
    json_t *name = member(r, obj, nr->pv, "name", &pv);
    if (name) {
        if (!json_is_string(name) || json_string_length(name) == 0 ||
            strlen(json_string_value(name)) != json_string_length(name)) {
            err(r, at(r, pv), "node #%zu: 'name' must be a non-empty string, got %s", i,
                json_is_string(name) ? "an empty string" : json_kind(name));
        } else {
            nr->name = json_string_value(name);
            int first = strset_put(node_names, nr->name, (int)i);
            if (first >= 0) {
                mcir_loc l = at(r, mcir_json_pos_index(r->pos, mcir_json_pos_find(r->pos, "/nodes"),
                                                       (size_t)first));
                err(r, at(r, pv), "node #%zu: node name '%s' is already used by node #%d (at %d:%d)",
                    i, nr->name, first, l.line, l.col);
            }
        }
    }
    const char *base = nr->name ? mcir_arena_printf(r->g->arena, "node '%s'", nr->name)
                                : mcir_arena_printf(r->g->arena, "node #%zu", i);
    nr->who = base;
    check_keys(r, nr->pv, node_keys, base);

    json_t *op = required(r, obj, nr->pv, "op", &pv, base);
    if (op && !json_is_string(op)) {
        err(r, at(r, pv), "%s: 'op' must be a string, got %s", base, json_kind(op));
    } else if (op) {
        const char *opname = json_string_value(op);
        if (mcir_op_parse(opname, &nr->op)) {
            nr->op_ok = true;
            nr->who = mcir_arena_printf(r->g->arena, "%s (%s)", base, opname);
        } else {
            suggest s = {.word = opname};
            for (int k = 0; k < MCIR_OP_COUNT; k++) suggest_try(&s, mcir_op_name((mcir_op)k));
            char buf[96];
            err(r, at(r, pv), "%s: unknown op '%s'%s", base, opname,
                suggest_text(&s, buf, sizeof buf));
        }
    }

    json_t *outs = required(r, obj, nr->pv, "outputs", &pv, nr->who);
    if (!outs) {
        r->names_incomplete = true;
        return;
    }
    if (!json_is_array(outs) || json_array_size(outs) == 0) {
        err(r, at(r, pv), "%s: 'outputs' must be a non-empty list of tensor names, got %s",
            nr->who, json_is_array(outs) ? "an empty list" : json_kind(outs));
        r->names_incomplete = true;
        return;
    }
    nr->n_outputs = (int)json_array_size(outs);
    nr->outputs = mcir_arena_alloc(r->g->arena, sizeof(mcir_tensor *) * (size_t)nr->n_outputs);
    nr->outputs_ok = true;
    for (size_t k = 0; k < json_array_size(outs); k++) {
        json_t *o = json_array_get(outs, k);
        int opv = mcir_json_pos_index(r->pos, pv, k);
        if (!json_is_string(o) || json_string_length(o) == 0 ||
            strlen(json_string_value(o)) != json_string_length(o)) {
            err(r, at(r, opv), "%s: output %zu must be a non-empty tensor name, got %s", nr->who,
                k, json_is_string(o) ? "an empty string" : json_kind(o));
            nr->outputs_ok = false;
            r->names_incomplete = true;
            continue;
        }
        const char *tn = json_string_value(o);
        mcir_tensor *old = mcir_graph_find_tensor(r->g, tn);
        if (old) {
            if (old->kind == MCIR_TENSOR_INPUT || old->kind == MCIR_TENSOR_WEIGHT)
                report_taken(r, opv, nr->who,
                             mcir_arena_printf(r->g->arena, "output '%s'", tn), old);
            else
                err(r, at(r, opv), "%s: tensor '%s' is produced twice (already by %s at %d:%d)",
                    nr->who, tn, made_by(r, old), old->loc.line, old->loc.col);
            nr->outputs_ok = false;
            continue;
        }
        mcir_tensor *t = mcir_graph_add_tensor(r->g, tn, MCIR_DTYPE_F32, -1, NULL,
                                               MCIR_TENSOR_INTERMEDIATE);
        MCIR_ASSERT(t);
        t->loc = at(r, opv);
        set_made_by(r, t, base);
        nr->outputs[k] = t;
    }
}

/* Whether attribute `an` of op may name a dimension instead of an integer
 * (docs/graph-format.md "Symbolic dimensions"). */
static bool attr_takes_dims(mcir_op op, const char *an) {
    return (op == MCIR_OP_RESHAPE && !strcmp(an, "shape")) ||
           (op == MCIR_OP_ARANGE && !strcmp(an, "end")) ||
           (op == MCIR_OP_SLICE && (!strcmp(an, "start") || !strcmp(an, "end")));
}

/* An integer attribute that names a dimension may add a constant to it
 * ("past+1", "past-1"): the name into name, the constant into *plus;
 * false where what follows the name is not [+-]digits. */
static bool dim_expr(const char *s, char *name, size_t n, int64_t *plus) {
    const char *op = strpbrk(s, "+-");
    *plus = 0;
    if (!op) {
        snprintf(name, n, "%s", s);
        return true;
    }
    snprintf(name, n, "%.*s", (int)(op - s), s);
    if (!op[1] || strspn(op + 1, "0123456789") != strlen(op + 1) || strlen(op + 1) > 9) return false;
    *plus = strtoll(op + 1, NULL, 10) * (*op == '-' ? -1 : 1);
    return true;
}

static bool check_attr(reader *r, node_rec *nr, const mcir_attr_spec *spec, json_t *v, int pv) {
    const char *an = spec->name;
    if (json_is_string(v) && spec->type == MCIR_ATTR_INT && attr_takes_dims(nr->op, an)) {
        char what[96], name[80];
        int k;
        int64_t plus;
        snprintf(what, sizeof what, "attribute '%s'", an);
        if (!dim_expr(json_string_value(v), name, sizeof name, &plus)) {
            err(r, at(r, pv), "%s: attribute '%s' is '%s'; a dimension, or a dimension plus or minus an "
                "integer (\"past+1\"), was expected", nr->who, an, json_string_value(v));
            return false;
        }
        json_t *nv = json_string(name);
        bool ok = dim_ref(r, nv, pv, nr->who, what, &k);
        json_decref(nv);
        return ok;
    }
    if (json_is_string(v) && spec->type == MCIR_ATTR_INT && mcir_graph_find_dim(r->g, json_string_value(v)) >= 0) {
        err(r, at(r, pv), "%s: attribute '%s' names dimension '%s'; only reshape's 'shape', "
            "arange's 'end' and slice's 'start' and 'end' may", nr->who, an, json_string_value(v));
        return false;
    }
    switch (spec->type) {
    case MCIR_ATTR_INT:
        if (json_is_integer(v)) return true;
        err(r, at(r, pv), "%s: attribute '%s' must be an integer, got %s", nr->who, an,
            json_kind(v));
        return false;
    case MCIR_ATTR_FLOAT:
        if (json_is_number(v)) return true;
        err(r, at(r, pv), "%s: attribute '%s' must be a number, got %s", nr->who, an,
            json_kind(v));
        return false;
    case MCIR_ATTR_BOOL:
        if (json_is_boolean(v)) return true;
        err(r, at(r, pv), "%s: attribute '%s' must be true or false, got %s", nr->who, an,
            json_kind(v));
        return false;
    case MCIR_ATTR_STRING:
        if (!json_is_string(v)) {
            err(r, at(r, pv), "%s: attribute '%s' must be a string, got %s", nr->who, an,
                json_kind(v));
            return false;
        }
        if (spec->choices) {
            const char *s = json_string_value(v);
            char allowed[256] = "";
            size_t k = 0;
            for (const char *const *c = spec->choices; *c; c++) {
                if (strcmp(*c, s) == 0) return true;
                k += (size_t)snprintf(allowed + k, k < sizeof allowed ? sizeof allowed - k : 0,
                                      "%s'%s'", c == spec->choices ? "" : ", ", *c);
            }
            err(r, at(r, pv), "%s: attribute '%s' is '%s'; allowed values are %s", nr->who, an,
                s, allowed);
            return false;
        }
        return true;
    case MCIR_ATTR_INTS:
        if (!json_is_array(v)) {
            err(r, at(r, pv), "%s: attribute '%s' must be a list of integers, got %s", nr->who,
                an, json_kind(v));
            return false;
        }
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *e = json_array_get(v, i);
            int epv = mcir_json_pos_index(r->pos, pv, i);
            if (json_is_string(e) && attr_takes_dims(nr->op, an)) {
                char what[96];
                int k;
                snprintf(what, sizeof what, "attribute '%s' entry %zu", an, i);
                if (!dim_ref(r, e, epv, nr->who, what, &k)) return false;
                continue;
            }
            if (json_is_string(e) && mcir_graph_find_dim(r->g, json_string_value(e)) >= 0) {
                err(r, at(r, epv), "%s: attribute '%s' entry %zu names dimension '%s'; only "
                    "reshape's 'shape', arange's 'end' and slice's 'start' and 'end' may",
                    nr->who, an, i, json_string_value(e));
                return false;
            }
            if (!json_is_integer(json_array_get(v, i))) {
                err(r, at(r, mcir_json_pos_index(r->pos, pv, i)),
                    "%s: attribute '%s' must be a list of integers; element %zu is %s", nr->who,
                    an, i, json_kind(json_array_get(v, i)));
                return false;
            }
        }
        if (json_array_size(v) > INT_MAX / 2) {
            err(r, at(r, pv), "%s: attribute '%s' is too long", nr->who, an);
            return false;
        }
        return true;
    }
    return false;
}

/* Op-specific attribute rules the schema cannot express. */
static bool check_attr_semantics(reader *r, node_rec *nr, const mcir_attr_spec *spec, json_t *v,
                                 int pv) {
    if (nr->op == MCIR_OP_RESHAPE && strcmp(spec->name, "shape") == 0) {
        int minus = 0;
        bool ok = true;
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (json_is_string(json_array_get(v, i))) continue;   /* a dimension */
            json_int_t x = json_integer_value(json_array_get(v, i));
            int epv = mcir_json_pos_index(r->pos, pv, i);
            if (x == -1 && ++minus == 2) {
                err(r, at(r, epv), "%s: reshape 'shape' may contain -1 only once", nr->who);
                ok = false;
            } else if (x == 0 || x < -1) {
                err(r, at(r, epv),
                    "%s: reshape 'shape' entry %zu is %lld; entries must be positive or -1",
                    nr->who, i, (long long)x);
                ok = false;
            }
        }
        return ok;
    }
    if (nr->op == MCIR_OP_SPLIT && strcmp(spec->name, "sizes") == 0 && nr->outputs_ok &&
        (size_t)nr->n_outputs != json_array_size(v)) {
        err(r, at(r, pv), "%s: 'sizes' has %zu entries but the node has %d outputs", nr->who,
            json_array_size(v), nr->n_outputs);
        return false;
    }
    return true;
}

static void apply_attr(reader *r, mcir_node *n, const attr_val *a) {
    mcir_graph *g = r->g;
    const char *an = a->spec->name;
    mcir_attr *attr = NULL;
    int8_t *dim_of = NULL;
    if (json_is_string(a->v) && a->spec->type == MCIR_ATTR_INT) {   /* checked: a dimension (+ k) */
        char name[80];
        int64_t plus;
        MCIR_ASSERT(dim_expr(json_string_value(a->v), name, sizeof name, &plus));
        int k = mcir_graph_find_dim(g, name);
        MCIR_ASSERT(k >= 0);
        attr = mcir_node_set_int(g, n, an, g->dims[k].value + plus);
        dim_of = mcir_arena_alloc(g->arena, 1);
        dim_of[0] = (int8_t)k;
        attr->dim_of = dim_of;
        attr->dim_plus = plus;
        attr->loc = at(r, a->pv);
        return;
    }
    switch (a->spec->type) {
    case MCIR_ATTR_INT: attr = mcir_node_set_int(g, n, an, json_integer_value(a->v)); break;
    case MCIR_ATTR_FLOAT: attr = mcir_node_set_float(g, n, an, json_number_value(a->v)); break;
    case MCIR_ATTR_BOOL: attr = mcir_node_set_bool(g, n, an, json_is_true(a->v)); break;
    case MCIR_ATTR_STRING: attr = mcir_node_set_string(g, n, an, json_string_value(a->v)); break;
    case MCIR_ATTR_INTS: {
        int cnt = (int)json_array_size(a->v);
        int64_t *vals = mcir_arena_alloc(g->arena, sizeof(int64_t) * (size_t)(cnt ? cnt : 1));
        for (int i = 0; i < cnt; i++) {
            json_t *e = json_array_get(a->v, (size_t)i);
            vals[i] = json_integer_value(e);
            if (!json_is_string(e)) continue;   /* checked: a dimension */
            int k = mcir_graph_find_dim(g, json_string_value(e));
            MCIR_ASSERT(k >= 0);
            vals[i] = g->dims[k].value;
            if (!dim_of) {
                dim_of = mcir_arena_alloc(g->arena, (size_t)cnt);
                memset(dim_of, -1, (size_t)cnt);
            }
            dim_of[i] = (int8_t)k;
        }
        attr = mcir_node_set_ints(g, n, an, cnt, vals);
        attr->dim_of = dim_of;
        break;
    }
    }
    if (attr) attr->loc = at(r, a->pv);
}

/* The artifact's per-node fields, checked in pass 2 and applied to n (if any). */
typedef struct node_ext {
    json_t *properties, *group, *inplace, *origin;
    int props_pv, group_pv, inplace_pv, origin_pv;
    const char *origin_rule, *origin_nodes;
} node_ext;

static bool read_node_ext(reader *r, node_rec *nr, node_ext *x, int n_inputs) {
    bool ok = true;
    json_t *obj = nr->obj;
    x->properties = member(r, obj, nr->pv, "properties", &x->props_pv);
    if (x->properties) {
        bool good = json_is_array(x->properties);
        for (size_t i = 0; good && i < json_array_size(x->properties); i++)
            good = json_is_string(json_array_get(x->properties, i));
        if (!good) {
            err(r, at(r, x->props_pv), "%s: 'properties' must be a list of property names",
                nr->who);
            ok = false;
        }
    }
    x->group = member(r, obj, nr->pv, "group", &x->group_pv);
    int64_t tmp;
    if (x->group && !json_int_in(x->group, -1, INT_MAX, &tmp)) {
        err(r, at(r, x->group_pv), "%s: 'group' must be an integer from -1 to %d", nr->who,
            INT_MAX);
        ok = false;
    }
    x->inplace = member(r, obj, nr->pv, "inplace_input", &x->inplace_pv);
    if (x->inplace && !json_int_in(x->inplace, -1, n_inputs - 1, &tmp)) {
        err(r, at(r, x->inplace_pv),
            "%s: 'inplace_input' must be -1 or the index of one of its %d inputs", nr->who,
            n_inputs);
        ok = false;
    }
    x->origin = member(r, obj, nr->pv, "origin", &x->origin_pv);
    if (x->origin) {
        static const char *const origin_keys[] = {"rule", "nodes", NULL};
        bool good = json_is_object(x->origin);
        if (good) {
            check_keys(r, x->origin_pv, origin_keys,
                       mcir_arena_printf(r->g->arena, "the origin of %s", nr->who));
            json_t *rule = json_object_get(x->origin, "rule");
            json_t *nodes = json_object_get(x->origin, "nodes");
            good = json_is_string(rule) && (!nodes || json_is_array(nodes));
            size_t len = 1;
            for (size_t i = 0; good && nodes && i < json_array_size(nodes); i++) {
                good = json_is_string(json_array_get(nodes, i));
                if (good) len += json_string_length(json_array_get(nodes, i)) + 1;
            }
            if (good) {
                x->origin_rule = json_string_value(rule);
                char *joined = mcir_arena_alloc(r->g->arena, len);
                for (size_t i = 0; nodes && i < json_array_size(nodes); i++) {
                    if (i) strcat(joined, ",");
                    strcat(joined, json_string_value(json_array_get(nodes, i)));
                }
                x->origin_nodes = joined;
            }
        }
        if (!good) {
            err(r, at(r, x->origin_pv),
                "%s: 'origin' must be {\"rule\": NAME, \"nodes\": [NAMES]}", nr->who);
            ok = false;
        }
    }
    return ok;
}

/* Pass 2: inputs, arity, attributes; adds the node if all of it holds. */
static bool read_node_pass2(reader *r, node_rec *nr) {
    json_t *obj = nr->obj;
    int ipv;
    json_t *ins = required(r, obj, nr->pv, "inputs", &ipv, nr->who);
    bool ok = nr->op_ok && nr->outputs_ok;
    int n_in = 0;
    mcir_tensor **inputs = NULL;
    if (ins && !json_is_array(ins)) {
        err(r, at(r, ipv), "%s: 'inputs' must be a list of tensor names, got %s", nr->who,
            json_kind(ins));
        ok = false;
    } else if (ins) {
        n_in = (int)json_array_size(ins);
        inputs = mcir_arena_alloc(r->g->arena, sizeof(mcir_tensor *) * (size_t)(n_in ? n_in : 1));
        for (int k = 0; k < n_in; k++) {
            json_t *in = json_array_get(ins, (size_t)k);
            int epv = mcir_json_pos_index(r->pos, ipv, (size_t)k);
            if (!json_is_string(in)) {
                err(r, at(r, epv), "%s: input %d must be a tensor name, got %s", nr->who, k,
                    json_kind(in));
                ok = false;
                continue;
            }
            const char *tn = json_string_value(in);
            inputs[k] = mcir_graph_find_tensor(r->g, tn);
            if (!inputs[k] && r->names_incomplete) {
                ok = false;
            } else if (!inputs[k]) {
                suggest s = {.word = tn};
                for (int t = 0; t < r->g->n_tensors; t++)
                    if (r->g->tensors[t]) suggest_try(&s, r->g->tensors[t]->name);
                char buf[160];
                err(r, at(r, epv), "%s: input '%s' is not an input, weight or node output%s",
                    nr->who, tn, suggest_text(&s, buf, sizeof buf));
                ok = false;
            }
        }
    } else {
        ok = false;
    }
    if (!nr->op_ok) return false;

    const mcir_op_desc *desc = mcir_op_desc_of(nr->op);
    if (ins && json_is_array(ins) &&
        (n_in < desc->min_inputs || (desc->max_inputs >= 0 && n_in > desc->max_inputs))) {
        if (desc->max_inputs < 0)
            err(r, at(r, ipv), "%s: takes at least %d input%s, got %d", nr->who,
                desc->min_inputs, desc->min_inputs == 1 ? "" : "s", n_in);
        else if (desc->min_inputs == desc->max_inputs)
            err(r, at(r, ipv), "%s: takes %d input%s, got %d", nr->who, desc->min_inputs,
                desc->min_inputs == 1 ? "" : "s", n_in);
        else
            err(r, at(r, ipv), "%s: takes %d to %d inputs, got %d", nr->who, desc->min_inputs,
                desc->max_inputs, n_in);
        ok = false;
    }
    if (desc->n_outputs >= 0 && nr->outputs_ok && nr->n_outputs != desc->n_outputs) {
        int opv = mcir_json_pos_key(r->pos, nr->pv, "outputs");
        err(r, at(r, opv), "%s: has %d output%s, got %d", nr->who, desc->n_outputs,
            desc->n_outputs == 1 ? "" : "s", nr->n_outputs);
        ok = false;
    }

    /* Attributes. */
    int apv;
    json_t *attrs = member(r, obj, nr->pv, "attrs", &apv);
    attr_val *vals = NULL;
    int n_vals = 0;
    if (attrs && !json_is_object(attrs)) {
        err(r, at(r, apv), "%s: 'attrs' must be an object, got %s", nr->who, json_kind(attrs));
        ok = false;
        attrs = NULL;
    }
    int n_members = attrs ? mcir_json_pos_count(r->pos, apv) : 0;
    if (n_members)
        vals = mcir_arena_alloc(r->g->arena, sizeof *vals * (size_t)n_members);
    for (int k = 0; k < n_members; k++) {
        int vpv;
        const char *key = mcir_json_pos_member(r->pos, apv, k, &vpv);
        json_t *v = key ? json_object_get(attrs, key) : NULL;
        if (!v) continue;
        const mcir_attr_spec *spec = mcir_op_attr_spec(nr->op, key);
        if (!spec) {
            suggest s = {.word = key};
            for (int a = 0; a < desc->n_attrs; a++) suggest_try(&s, desc->attrs[a].name);
            char buf[96];
            if (desc->n_attrs == 0)
                err(r, at_key(r, vpv), "%s: unknown attribute '%s' (%s takes no attributes)",
                    nr->who, key, desc->name);
            else
                err(r, at_key(r, vpv), "%s: unknown attribute '%s'%s", nr->who, key,
                    suggest_text(&s, buf, sizeof buf));
            ok = false;
            continue;
        }
        if (!check_attr(r, nr, spec, v, vpv) || !check_attr_semantics(r, nr, spec, v, vpv)) {
            ok = false;
            continue;
        }
        vals[n_vals++] = (attr_val){spec, v, vpv};
    }
    for (int a = 0; a < desc->n_attrs; a++)
        if (desc->attrs[a].required && !(attrs && json_object_get(attrs, desc->attrs[a].name))) {
            err(r, at(r, attrs ? apv : nr->pv), "%s: missing required attribute '%s'", nr->who,
                desc->attrs[a].name);
            ok = false;
        }
    if (nr->op == MCIR_OP_SPLIT && nr->outputs_ok && !(attrs && json_object_get(attrs, "sizes")))
        ok = false; /* reported above as a missing attribute */

    node_ext x;
    memset(&x, 0, sizeof x);
    ok &= read_node_ext(r, nr, &x, n_in);
    if (!ok) return false;

    mcir_node *n = mcir_graph_add_node(r->g, nr->op, nr->name, n_in, inputs, nr->n_outputs,
                                       nr->outputs);
    MCIR_ASSERT(n);
    nr->node = n;
    n->loc = at(r, nr->pv);
    for (int k = 0; k < n_vals; k++) apply_attr(r, n, &vals[k]);
    for (size_t k = 0; x.properties && k < json_array_size(x.properties); k++)
        mcir_node_add_property(r->g, n, json_string_value(json_array_get(x.properties, k)));
    if (x.group) n->group = (int)json_integer_value(x.group);
    if (x.inplace) n->inplace_input = (int)json_integer_value(x.inplace);
    if (x.origin_rule) {
        n->origin_rule = mcir_arena_strdup(r->g->arena, x.origin_rule);
        n->origin_nodes = x.origin_nodes;
    }
    return true;
}

/* --------------------------------------------------- graph-level parts */

static void read_outputs(reader *r, json_t *outs, int pv) {
    if (!json_is_array(outs)) {
        err(r, at(r, pv), "'outputs' must be a list of tensor names, got %s", json_kind(outs));
        return;
    }
    if (json_array_size(outs) == 0) {
        err(r, at(r, pv), "'outputs' is empty; the graph must return at least one tensor");
        return;
    }
    strset seen = {0};
    for (size_t i = 0; i < json_array_size(outs); i++) {
        json_t *o = json_array_get(outs, i);
        int epv = mcir_json_pos_index(r->pos, pv, i);
        if (!json_is_string(o)) {
            err(r, at(r, epv), "graph output %zu must be a tensor name, got %s", i, json_kind(o));
            continue;
        }
        const char *tn = json_string_value(o);
        mcir_tensor *t = mcir_graph_find_tensor(r->g, tn);
        if (!t && r->names_incomplete) continue;
        if (!t) {
            suggest s = {.word = tn};
            for (int k = 0; k < r->g->n_tensors; k++)
                if (r->g->tensors[k]) suggest_try(&s, r->g->tensors[k]->name);
            char buf[160];
            err(r, at(r, epv), "graph output '%s' is not an input, weight or node output%s", tn,
                suggest_text(&s, buf, sizeof buf));
            continue;
        }
        int first = strset_put(&seen, tn, (int)i);
        if (first >= 0) {
            err(r, at(r, epv), "graph output '%s' is listed twice (also as output %d)", tn, first);
            continue;
        }
        mcir_graph_mark_output(r->g, t);
    }
    strset_free(&seen);
}

/* "state": [{"input": "cache_k", "output": "cache_k_out"}, ...] — each
 * output is written over its input's bytes (a state carried from step to
 * step: a KV cache). Read after shape inference: the pair must have one
 * dtype and the same shape for every size in range. */
static const char *const state_keys[] = {"input", "output", NULL};

static mcir_tensor *state_end(reader *r, json_t *e, int epv, const char *key, size_t i) {
    int pv;
    json_t *v = member(r, e, epv, key, &pv);
    if (!v) {
        err(r, at(r, epv), "state %zu: missing required field '%s'", i, key);
        return NULL;
    }
    if (!json_is_string(v)) {
        err(r, at(r, pv), "state %zu: '%s' must be a tensor name, got %s", i, key, json_kind(v));
        return NULL;
    }
    mcir_tensor *t = mcir_graph_find_tensor(r->g, json_string_value(v));
    bool in = !strcmp(key, "input");
    if (!t || (in && t->kind != MCIR_TENSOR_INPUT) || (!in && !t->is_output)) {
        err(r, at(r, pv), "state %zu: '%s' is not a graph %s", i, json_string_value(v), in ? "input" : "output");
        return NULL;
    }
    return t;
}

/* "[1, past+1]": t's extents as polynomials over the dims. */
static void sym_shape_text(const mcir_graph *g, const mcir_tensor *t, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->rank && k < n; i++) {
        char e[96];
        mcir_extent x = mcir_tensor_extent(t, i);
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", mcir_extent_str(g, &x, e, sizeof e));
    }
    if (k < n) snprintf(buf + k, n - k, "]");
}

static void read_state(reader *r, json_t *list, int pv) {
    if (!json_is_array(list)) {
        err(r, at(r, pv), "'state' must be a list of {\"input\", \"output\"} pairs, got %s", json_kind(list));
        return;
    }
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *e = json_array_get(list, i);
        int epv = mcir_json_pos_index(r->pos, pv, i);
        if (!json_is_object(e)) {
            err(r, at(r, epv), "state %zu must be an object {\"input\", \"output\"}, got %s", i, json_kind(e));
            continue;
        }
        check_keys(r, epv, state_keys, "a state pair");
        mcir_tensor *in = state_end(r, e, epv, "input", i), *out = state_end(r, e, epv, "output", i);
        if (!in || !out) continue;
        bool same = in->dtype == out->dtype && in->rank == out->rank;
        for (int k = 0; same && k < in->rank; k++) {
            mcir_extent a = mcir_tensor_extent(in, k), b = mcir_tensor_extent(out, k);
            same = mcir_extent_equal(&a, &b);
        }
        char si[160], so[160];
        sym_shape_text(r->g, in, si, sizeof si);
        sym_shape_text(r->g, out, so, sizeof so);
        if (!same) {
            err(r, at(r, epv), "state %zu: output '%s' (%s %s) is not the same dtype and shape as input '%s' "
                "(%s %s): a state is written over its input's bytes", i, out->name, mcir_dtype_name(out->dtype), so,
                in->name, mcir_dtype_name(in->dtype), si);
            continue;
        }
        if (out->state_input) {
            err(r, at(r, epv), "state %zu: output '%s' is already the state of input '%s'", i, out->name,
                out->state_input->name);
            continue;
        }
        for (int k = 0; k < r->g->n_outputs; k++)
            if (r->g->outputs[k]->state_input == in) {
                err(r, at(r, epv), "state %zu: input '%s' is already the state of output '%s'", i, in->name,
                    r->g->outputs[k]->name);
                in = NULL;
                break;
            }
        if (in) out->state_input = in;
    }
}

static const char *const tensor_rec_keys[] = {"dtype", "shape", "kind", "memory_state", NULL};

static tensor_decl *read_tensors(reader *r, json_t *obj, int pv, int *n_decls) {
    *n_decls = 0;
    if (!json_is_object(obj)) {
        err(r, at(r, pv), "'tensors' must be an object mapping tensor names to records, got %s",
            json_kind(obj));
        return NULL;
    }
    int n = mcir_json_pos_count(r->pos, pv);
    tensor_decl *decls = mcir_arena_alloc(r->g->arena, sizeof *decls * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        int rpv;
        const char *name = mcir_json_pos_member(r->pos, pv, i, &rpv);
        json_t *rec = name ? json_object_get(obj, name) : NULL;
        if (!rec) continue;
        mcir_tensor *t = mcir_graph_find_tensor(r->g, name);
        const char *who = mcir_arena_printf(r->g->arena, "tensors: '%s'", name);
        if (!t) {
            if (!r->names_incomplete)
                err(r, at_key(r, rpv), "%s is not an input, weight or node output", who);
            continue;
        }
        if (!json_is_object(rec)) {
            err(r, at(r, rpv), "%s must be an object, got %s", who, json_kind(rec));
            continue;
        }
        check_keys(r, rpv, tensor_rec_keys, who);
        tensor_decl *td = &decls[(*n_decls)++];
        td->t = t;
        td->pv = rpv;
        json_t *v;
        if ((v = member(r, rec, rpv, "dtype", &td->dtype_pv)))
            td->has_dtype = parse_dtype(r, v, td->dtype_pv, who, &td->dtype);
        if ((v = member(r, rec, rpv, "shape", &td->shape_pv)))
        {
            bool sym = false;
            td->has_shape = parse_shape_ex(r, v, td->shape_pv, who, SHAPE_TEXT, &td->rank,
                                           td->shape, NULL, &sym);
            if (sym) td->shape_json = v;
        }
        if ((v = member(r, rec, rpv, "kind", &td->kind_pv))) {
            bool good = false;
            for (int k = 0; json_is_string(v) && k <= MCIR_TENSOR_OUTPUT; k++)
                good |= strcmp(json_string_value(v), mcir_tensor_kind_name((mcir_tensor_kind)k)) == 0;
            if (good)
                td->kind = json_string_value(v);
            else
                err(r, at(r, td->kind_pv),
                    "%s: 'kind' must be one of 'input', 'weight', 'intermediate', 'output'", who);
        }
        int mpv;
        if ((v = member(r, rec, rpv, "memory_state", &mpv))) {
            mcir_memory_state ms;
            if (json_is_string(v) && mcir_memory_state_parse(json_string_value(v), &ms))
                t->memory_state = ms;
            else
                err(r, at(r, mpv),
                    "%s: 'memory_state' must be one of 'materialized', 'streaming', "
                    "'recomputable'", who);
        }
    }
    return decls;
}

/* After inference: what the artifact declared must be what was inferred. */
static void check_tensor_decls(reader *r, tensor_decl *decls, int n) {
    for (int i = 0; i < n; i++) {
        tensor_decl *td = &decls[i];
        mcir_tensor *t = td->t;
        if (td->has_dtype && td->dtype != t->dtype)
            err(r, at(r, td->dtype_pv), "tensors: '%s' is declared %s but is %s", t->name,
                mcir_dtype_name(td->dtype), mcir_dtype_name(t->dtype));
        if (td->has_shape && (t->sym || td->shape_json)) {   /* symbolic: as text */
            bool same = td->rank == t->rank;
            char got[400], want[400], e[96];
            size_t kg = 0, kw = 0;
            kg += (size_t)snprintf(got, sizeof got, "[");
            kw += (size_t)snprintf(want, sizeof want, "[");
            for (int k = 0; k < t->rank && kg < sizeof got; k++) {
                mcir_extent x = mcir_tensor_extent(t, k);
                kg += (size_t)snprintf(got + kg, sizeof got - kg, "%s%s", k ? ", " : "",
                                       mcir_extent_str(r->g, &x, e, sizeof e));
            }
            for (int k = 0; k < td->rank && kw < sizeof want; k++) {
                json_t *je = td->shape_json ? json_array_get(td->shape_json, (size_t)k) : NULL;
                if (je && json_is_string(je)) snprintf(e, sizeof e, "%s", json_string_value(je));
                else snprintf(e, sizeof e, "%lld", (long long)td->shape[k]);
                kw += (size_t)snprintf(want + kw, sizeof want - kw, "%s%s", k ? ", " : "", e);
            }
            if (kg < sizeof got) snprintf(got + kg, sizeof got - kg, "]");
            if (kw < sizeof want) snprintf(want + kw, sizeof want - kw, "]");
            if (!same || strcmp(got, want))
                err(r, at(r, td->shape_pv), "tensors: '%s' is declared with shape %s but has shape %s",
                    t->name, want, got);
        } else if (td->has_shape && (td->rank != t->rank ||
                              memcmp(td->shape, t->shape, sizeof(int64_t) * (size_t)t->rank))) {
            char want[200], got[200];
            shape_fmt(want, sizeof want, td->rank, td->shape);
            shape_fmt(got, sizeof got, t->rank, t->shape);
            err(r, at(r, td->shape_pv), "tensors: '%s' is declared with shape %s but has shape %s",
                t->name, want, got);
        }
        if (td->kind && strcmp(td->kind, mcir_tensor_kind_name(t->kind)) != 0)
            err(r, at(r, td->kind_pv), "tensors: '%s' is declared %s but is %s", t->name,
                td->kind, mcir_tensor_kind_name(t->kind));
    }
}

/* ----------------------------------------------------------------- dims */

/* "dims": {"seq": {"min": 1, "max": 4096}, ...}, before anything names one. */
static void read_dims(reader *r, json_t *obj, int pv) {
    static const char *const dim_keys[] = {"min", "max", NULL};
    if (!json_is_object(obj)) {
        err(r, at(r, pv), "'dims' must be an object mapping dimension names to {\"min\", "
            "\"max\"}, got %s", json_kind(obj));
        return;
    }
    int n = mcir_json_pos_count(r->pos, pv);
    for (int i = 0; i < n; i++) {
        int dpv;
        const char *name = mcir_json_pos_member(r->pos, pv, i, &dpv);
        json_t *rec = name ? json_object_get(obj, name) : NULL;
        if (!rec) continue;
        const char *who = mcir_arena_printf(r->g->arena, "dims: '%s'", name);
        if (!name[0] || strlen(name) > 64) {
            err(r, at_key(r, dpv), "dims: a dimension name must be 1 to 64 characters");
            continue;
        }
        if (!json_is_object(rec)) {
            err(r, at(r, dpv), "%s must be an object {\"min\": N, \"max\": N}, got %s", who,
                json_kind(rec));
            continue;
        }
        check_keys(r, dpv, dim_keys, who);
        int mpv[2];
        json_t *lim[2] = {required(r, rec, dpv, "min", &mpv[0], who),
                          required(r, rec, dpv, "max", &mpv[1], who)};
        int64_t v[2] = {0, 0};
        bool ok = lim[0] && lim[1];
        for (int k = 0; k < 2; k++) {
            if (!lim[k]) continue;
            if (!json_is_integer(lim[k])) {
                err(r, at(r, mpv[k]), "%s: '%s' must be an integer, got %s", who,
                    k ? "max" : "min", json_kind(lim[k]));
                ok = false;
            } else if (!json_int_in(lim[k], 1, MCIR_MAX_ELEMS, &v[k])) {
                err(r, at(r, mpv[k]), "%s: '%s' is %lld; a dimension is at least 1 and at most "
                    "%s", who, k ? "max" : "min", (long long)json_integer_value(lim[k]),
                    MCIR_MAX_ELEMS_TEXT);
                ok = false;
            }
        }
        if (ok && v[0] > v[1]) {
            err(r, at(r, mpv[0]), "%s: 'min' %lld is above 'max' %lld", who, (long long)v[0],
                (long long)v[1]);
            ok = false;
        }
        if (!ok) continue;
        if (r->g->n_dims == MCIR_MAX_DIMS) {
            err(r, at_key(r, dpv), "%s: more than %d dimensions", who, MCIR_MAX_DIMS);
            continue;
        }
        int k = mcir_graph_add_dim(r->g, name, v[0], v[1]);
        MCIR_ASSERT(k >= 0);   /* JSON_REJECT_DUPLICATES: names are unique */
        r->g->dims[k].loc = at_key(r, dpv);
    }
}

/* ------------------------------------------------------------ top level */

static const char *dir_of(mcir_arena *a, const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return ".";
    if (slash == path) return "/";
    char *d = mcir_arena_memdup(a, path, (size_t)(slash - path) + 1);
    d[slash - path] = 0;
    return d;
}

static const char *stem_of(mcir_arena *a, const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    if (n == 0) return "graph";
    char *s = mcir_arena_memdup(a, base, n + 1);
    s[n] = 0;
    return s;
}

static mcir_graph *read_text(const char *text, size_t len, const char *path, mcir_diag *d) {
    /* A UTF-8 byte-order mark is allowed (RFC 8259 lets parsers skip it);
     * positions count from after it, as editors show them. */
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
        text += 3;
        len -= 3;
    }
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        mcir_error(d, (mcir_loc){path, jerr.line > 0 ? jerr.line : 0, jerr.column},
                   "invalid JSON: %s", jerr.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        mcir_error(d, (mcir_loc){path, 1, 1}, "the top level must be an object, got %s",
                   json_kind(root));
        json_decref(root);
        return NULL;
    }

    mcir_graph *g = mcir_graph_new(NULL);
    g->path = mcir_arena_strdup(g->arena, path);
    g->dir = dir_of(g->arena, path);
    reader r = {.g = g, .d = d, .path = g->path, .pos = mcir_json_pos_scan(text, len)};
    int rpv = mcir_json_pos_root(r.pos);

    static const char *const top_keys[] = {"mcir", "name", "ranks", "dims", "inputs", "weights",
                                           "nodes", "outputs", "state", "tensors", NULL};
    int pv;
    json_t *v = member(&r, root, rpv, "mcir", &pv);
    if (!v)
        err(&r, at(&r, rpv), "missing required field 'mcir' (the format version, 1)");
    else if (!json_is_integer(v) || json_integer_value(v) != 1)
        err(&r, at(&r, pv), "'mcir' must be the integer 1 (the format version)");
    check_keys(&r, rpv, top_keys, "the graph");

    v = member(&r, root, rpv, "name", &pv);
    if (v && (!json_is_string(v) || json_string_length(v) == 0 ||
              strlen(json_string_value(v)) != json_string_length(v)))
        err(&r, at(&r, pv), "'name' must be a non-empty string, got %s",
            json_is_string(v) ? "an empty string" : json_kind(v));
    g->name = v && json_is_string(v) && json_string_length(v)
                  ? mcir_arena_strdup(g->arena, json_string_value(v))
                  : stem_of(g->arena, path);

    v = member(&r, root, rpv, "ranks", &pv);
    if (v) {
        if (!json_is_integer(v))
            err(&r, at(&r, pv), "'ranks' must be an integer (the number of ranks that run the graph), "
                "got %s", json_kind(v));
        else if (json_integer_value(v) < 1 || json_integer_value(v) > MCIR_MAX_RANKS)
            err(&r, at(&r, pv), "'ranks' must be from 1 to %d (the number of ranks that run the "
                "graph), got %lld", MCIR_MAX_RANKS, (long long)json_integer_value(v));
        else
            g->ranks = (int)json_integer_value(v);
    }

    json_t *dims = member(&r, root, rpv, "dims", &pv);
    if (dims) {
        r.has_dims = true;
        read_dims(&r, dims, pv);
    }

    json_t *inputs = member(&r, root, rpv, "inputs", &pv);
    if (!inputs) {
        err(&r, at(&r, rpv), "missing required field 'inputs'");
        r.names_incomplete = true;
    } else {
        read_tensor_list(&r, inputs, pv, false);
    }
    json_t *weights = member(&r, root, rpv, "weights", &pv);
    if (weights) read_tensor_list(&r, weights, pv, true);

    /* Nodes: pass 1 declares every output, pass 2 resolves inputs. */
    bool structure_ok = true;
    int npv;
    json_t *nodes = member(&r, root, rpv, "nodes", &npv);
    node_rec *recs = NULL;
    size_t n_nodes = 0;
    strset node_names = {0};
    if (!nodes) {
        err(&r, at(&r, rpv), "missing required field 'nodes'");
        structure_ok = false;
        r.names_incomplete = true;
    } else if (!json_is_array(nodes)) {
        err(&r, at(&r, npv), "'nodes' must be a list, got %s", json_kind(nodes));
        structure_ok = false;
        r.names_incomplete = true;
    } else {
        n_nodes = json_array_size(nodes);
        recs = calloc(n_nodes ? n_nodes : 1, sizeof *recs);
        MCIR_ASSERT(recs);
        for (size_t i = 0; i < n_nodes; i++) {
            recs[i].obj = json_array_get(nodes, i);
            recs[i].pv = mcir_json_pos_index(r.pos, npv, i);
            if (!json_is_object(recs[i].obj)) {
                err(&r, at(&r, recs[i].pv), "node #%zu must be an object, got %s", i,
                    json_kind(recs[i].obj));
                r.names_incomplete = true;
                recs[i].obj = NULL;
                structure_ok = false;
                continue;
            }
            read_node_pass1(&r, &recs[i], i, &node_names);
        }
        for (size_t i = 0; i < n_nodes; i++)
            if (recs[i].obj && !read_node_pass2(&r, &recs[i])) structure_ok = false;
    }
    /* A generated node name must not take a name a later node gives. */
    for (size_t i = 0; i < n_nodes; i++) {
        mcir_node *n = recs[i].node;
        if (!n || recs[i].name || !strset_has(&node_names, n->name)) continue;
        /* every given name is a node by now, so fresh_name avoids them all */
        n->name = mcir_graph_fresh_name(g, mcir_op_name(n->op));
    }

    json_t *outputs = member(&r, root, rpv, "outputs", &pv);
    if (!outputs) err(&r, at(&r, rpv), "missing required field 'outputs'");
    else read_outputs(&r, outputs, pv);

    tensor_decl *decls = NULL;
    int n_decls = 0, spv = 0;
    json_t *tensors = member(&r, root, rpv, "tensors", &pv);
    if (tensors) decls = read_tensors(&r, tensors, pv, &n_decls);

    json_t *state = member(&r, root, rpv, "state", &spv);

    flush_errors(&r);
    if (structure_ok && r.n_errors == 0 && mcir_graph_sort(g, d) && mcir_graph_infer(g, d) &&
        mcir_graph_verify(g, d)) {
        check_tensor_decls(&r, decls, n_decls);
        if (state) read_state(&r, state, spv);
    }
    else if (structure_ok && r.n_errors == 0)
        r.n_errors++; /* sort, infer or verify reported it */
    flush_errors(&r);

    free(recs);
    strset_free(&node_names);
    mcir_json_pos_free(r.pos);
    json_decref(root);
    if (r.n_errors) {
        mcir_graph_free(g);
        return NULL;
    }
    return g;
}

mcir_graph *mcir_graph_read_json_string(const char *text, const char *path, mcir_diag *d) {
    mcir_diag fallback = mcir_diag_stderr();
    if (!d) d = &fallback;
    if (!path) path = "<input>";
    return read_text(text ? text : "", text ? strlen(text) : 0, path, d);
}

/* A bound on what we read, so a path like /dev/zero cannot exhaust memory. */
#define MAX_GRAPH_BYTES (1 << 30)

mcir_graph *mcir_graph_read_json(const char *path, mcir_diag *d) {
    mcir_diag fallback = mcir_diag_stderr();
    if (!d) d = &fallback;
    FILE *f = fopen(path, "rb");
    if (!f) {
        mcir_error(d, (mcir_loc){path, 0, 0}, "cannot open: %s", strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    MCIR_ASSERT(buf);
    for (;;) {
        if (len == cap) {
            if (cap >= MAX_GRAPH_BYTES) {
                mcir_error(d, (mcir_loc){path, 0, 0}, "file is larger than %d MiB",
                           MAX_GRAPH_BYTES >> 20);
                fclose(f);
                free(buf);
                return NULL;
            }
            cap *= 2;
            buf = realloc(buf, cap);
            MCIR_ASSERT(buf);
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        mcir_error(d, (mcir_loc){path, 0, 0}, "cannot read: %s", strerror(errno));
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    mcir_graph *g = read_text(buf, len, path, d);
    free(buf);
    return g;
}
