/*
 * json_write.c — the `mcir` artifact: the graph in graph.json form plus per
 * node "properties" (and "group", "inplace_input", "origin" where set) and
 * a top-level "tensors" object with every tensor's dtype, shape, kind and
 * memory_state (docs/cli.md, docs/graph-format.md).
 *
 * Invariant: the output is a function of the graph alone — keys in a fixed
 * order, numbers in their shortest round-tripping form, indent 2 — and
 * mcir_graph_read_json accepts it, so read → write → read → write gives
 * the same text twice. The tree is built with jansson and printed by a
 * small printer of our own, which keeps short lists on one line and
 * formats each f32 value with the fewest digits that read back exactly.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "json_pos.h"

/* -------------------------------------------------------------- numbers */

/* Shortest %g form of x that strtod reads back as x ("0.1", "1e-05"). */
static void fmt_double(char *buf, size_t n, double x) {
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, x);
        if (strtod(buf, NULL) == x) break;
    }
    if (!strpbrk(buf, ".eEn")) strncat(buf, ".0", n - strlen(buf) - 1);
}

/* A double holding the shortest decimal that reads back as the float f,
 * so the printer writes "0.1", not "0.10000000149011612". */
static double float_as_short_double(float f) {
    char buf[40];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        if (strtof(buf, NULL) == f) return strtod(buf, NULL);
    }
    return (double)f;
}

/* ------------------------------------------------------------- printer */

static void put_string(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\t': fputs("\\t", out); break;
        case '\r': fputs("\\r", out); break;
        default:
            if (*p < 0x20) fprintf(out, "\\u%04x", *p);
            else fputc(*p, out);
        }
    }
    fputc('"', out);
}

static void put_scalar(FILE *out, const json_t *v) {
    char buf[48];
    switch (json_typeof(v)) {
    case JSON_STRING: put_string(out, json_string_value(v)); break;
    case JSON_INTEGER: fprintf(out, "%lld", (long long)json_integer_value(v)); break;
    case JSON_REAL:
        fmt_double(buf, sizeof buf, json_real_value(v));
        fputs(buf, out);
        break;
    case JSON_TRUE: fputs("true", out); break;
    case JSON_FALSE: fputs("false", out); break;
    default: fputs("null", out); break;
    }
}

static bool is_container(const json_t *v) { return json_is_object(v) || json_is_array(v); }

static void put_inline(FILE *out, const json_t *v);

/* Every list of scalars goes on one line (a row of weight values); so does
 * an object of scalars and scalar lists that fits in 100 columns. */
static bool inline_ok(const json_t *v, int indent) {
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            if (is_container(json_array_get(v, i))) return false;
        return true;
    }
    if (!json_is_object(v)) return true;
    const char *key;
    json_t *m;
    json_object_foreach((json_t *)v, key, m) {
        if (json_is_object(m) || (json_is_array(m) && !inline_ok(m, 0))) return false;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    MCIR_ASSERT(f);
    put_inline(f, v);
    fclose(f);
    free(buf);
    return (size_t)indent + len <= 100;
}

static void put_value(FILE *out, const json_t *v, int indent);

static void put_inline(FILE *out, const json_t *v) {
    if (json_is_array(v)) {
        fputc('[', out);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) fputs(", ", out);
            put_inline(out, json_array_get(v, i));
        }
        fputc(']', out);
    } else if (json_is_object(v)) {
        fputc('{', out);
        const char *key;
        json_t *m;
        bool first = true;
        json_object_foreach((json_t *)v, key, m) {
            if (!first) fputs(", ", out);
            first = false;
            put_string(out, key);
            fputs(": ", out);
            put_inline(out, m);
        }
        fputc('}', out);
    } else {
        put_scalar(out, v);
    }
}

static void put_value(FILE *out, const json_t *v, int indent) {
    if (!is_container(v) || inline_ok(v, indent) ||
        (json_is_array(v) ? json_array_size(v) == 0 : json_object_size(v) == 0)) {
        put_inline(out, v);
        return;
    }
    if (json_is_array(v)) {
        fputs("[\n", out);
        for (size_t i = 0; i < json_array_size(v); i++) {
            fprintf(out, "%*s", indent + 2, "");
            put_value(out, json_array_get(v, i), indent + 2);
            fputs(i + 1 < json_array_size(v) ? ",\n" : "\n", out);
        }
        fprintf(out, "%*s]", indent, "");
        return;
    }
    fputs("{\n", out);
    const char *key;
    json_t *m;
    size_t i = 0, n = json_object_size(v);
    json_object_foreach((json_t *)v, key, m) {
        fprintf(out, "%*s", indent + 2, "");
        put_string(out, key);
        fputs(": ", out);
        put_value(out, m, indent + 2);
        fputs(++i < n ? ",\n" : "\n", out);
    }
    fprintf(out, "%*s}", indent, "");
}

/* ---------------------------------------------------------- graph → tree */

/* A shape: integers, and where the graph has dims, each symbolic extent as
 * its text — a dimension's name for an input ("seq"), an expression for an
 * inferred extent ("batch*seq", in the "tensors" records). */
static json_t *shape_json(const mcir_graph *g, const mcir_tensor *t) {
    json_t *a = json_array();
    for (int i = 0; i < t->rank; i++) {
        mcir_extent e = mcir_tensor_extent(t, i);
        char buf[128];
        if (mcir_extent_is_const(&e, NULL)) json_array_append_new(a, json_integer(t->shape[i]));
        else json_array_append_new(a, json_string(mcir_extent_str(g, &e, buf, sizeof buf)));
    }
    return a;
}

static double element(const mcir_tensor *t, int64_t i) {
    if (mcir_dtype_is_integer(t->dtype)) return mcir_value_get(t->dtype, t->data, i);
    return float_as_short_double((float)mcir_value_get(t->dtype, t->data, i));
}

/* Nested lists in C order for dims [dim, rank); *k walks the elements. */
static json_t *value_json(const mcir_tensor *t, int dim, int64_t *k) {
    if (dim == t->rank) {
        double x = element(t, (*k)++);
        /* JSON has no infinities or NaN; the reader takes these strings */
        if (isnan(x)) return json_string("nan");
        if (isinf(x)) return json_string(x > 0 ? "inf" : "-inf");
        return json_real(x);
    }
    json_t *a = json_array();
    for (int64_t i = 0; i < t->shape[dim]; i++) json_array_append_new(a, value_json(t, dim + 1, k));
    return a;
}

/* A sharded input's or weight's declaration is the whole tensor's: its
 * shape and data, with the axis as "shard". */
static mcir_tensor whole_of(const mcir_tensor *t) {
    mcir_tensor w = *t;
    mcir_tensor_whole_shape(t, w.shape);
    w.shard_axis = -1;
    w.shard_parts = 1;
    w.shard_blocks = 1;
    return w;
}

static json_t *shard_json(const mcir_tensor *t) {
    if (t->shard_blocks > 1) return json_pack("{s:i, s:i}", "axis", t->shard_axis, "blocks", t->shard_blocks);
    return json_pack("{s:i}", "axis", t->shard_axis);
}

static json_t *tensor_decl_json(const mcir_graph *g, const mcir_tensor *t) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(t->name));
    json_object_set_new(o, "dtype", json_string(mcir_dtype_name(t->dtype)));
    json_object_set_new(o, "shape", shape_json(g, t));
    return o;
}

/* Value k of an attribute: the dimension it names, or the integer. */
static json_t *attr_int_json(const mcir_graph *g, const mcir_attr *a, int k, int64_t v) {
    if (a->dim_of && a->dim_of[k] >= 0 && a->type == MCIR_ATTR_INT && a->dim_plus) {   /* "past+1" */
        char buf[96];
        snprintf(buf, sizeof buf, "%s%+" PRId64, g->dims[a->dim_of[k]].name, a->dim_plus);
        return json_string(buf);
    }
    if (a->dim_of && a->dim_of[k] >= 0) return json_string(g->dims[a->dim_of[k]].name);
    return json_integer(v);
}

static json_t *attr_json(const mcir_graph *g, const mcir_attr *a) {
    switch (a->type) {
    case MCIR_ATTR_INT: return attr_int_json(g, a, 0, a->i);
    case MCIR_ATTR_FLOAT: return json_real(a->f);
    case MCIR_ATTR_BOOL: return json_boolean(a->b);
    case MCIR_ATTR_STRING: return json_string(a->s ? a->s : "");
    case MCIR_ATTR_INTS: {
        json_t *l = json_array();
        for (int i = 0; i < a->n; i++) json_array_append_new(l, attr_int_json(g, a, i, a->ints[i]));
        return l;
    }
    }
    return json_null();
}

static json_t *node_json(const mcir_graph *g, const mcir_node *n) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(n->name));
    json_object_set_new(o, "op", json_string(mcir_op_name(n->op)));
    json_t *ins = json_array(), *outs = json_array();
    for (int i = 0; i < n->n_inputs; i++) json_array_append_new(ins, json_string(n->inputs[i]->name));
    for (int i = 0; i < n->n_outputs; i++)
        json_array_append_new(outs, json_string(n->outputs[i]->name));
    json_object_set_new(o, "inputs", ins);
    json_object_set_new(o, "outputs", outs);
    if (n->n_attrs) {
        json_t *attrs = json_object();
        for (int i = 0; i < n->n_attrs; i++)
            json_object_set_new(attrs, n->attrs[i].name, attr_json(g, &n->attrs[i]));
        json_object_set_new(o, "attrs", attrs);
    }
    json_t *props = json_array();
    for (int i = 0; i < n->n_properties; i++)
        json_array_append_new(props, json_string(n->properties[i]));
    json_object_set_new(o, "properties", props);
    if (n->group >= 0) json_object_set_new(o, "group", json_integer(n->group));
    if (n->inplace_input >= 0) json_object_set_new(o, "inplace_input", json_integer(n->inplace_input));
    if (n->origin_rule) {
        json_t *origin = json_object(), *nodes = json_array();
        json_object_set_new(origin, "rule", json_string(n->origin_rule));
        for (const char *s = n->origin_nodes; s && *s;) {
            size_t len = strcspn(s, ",");
            json_array_append_new(nodes, json_stringn(s, len));
            s += len;
            if (*s == ',') s++;
        }
        json_object_set_new(origin, "nodes", nodes);
        json_object_set_new(o, "origin", origin);
    }
    return o;
}

static void add_tensor_record(const mcir_graph *g, json_t *tensors, const mcir_tensor *t) {
    json_t *rec = json_object();
    json_object_set_new(rec, "dtype", json_string(mcir_dtype_name(t->dtype)));
    if (t->rank >= 0) json_object_set_new(rec, "shape", shape_json(g, t));
    json_object_set_new(rec, "kind", json_string(mcir_tensor_kind_name(t->kind)));
    json_object_set_new(rec, "memory_state", json_string(mcir_memory_state_name(t->memory_state)));
    json_object_set_new(tensors, t->name, rec);
}

/* Writes weight t's in-memory data as dir/subdir/STEM.npy (STEM: the name
 * with '/' and a leading '.' replaced, made unique with the tensor id) and
 * returns the path relative to dir, or NULL after reporting an error. */
static char *write_weight_file(const mcir_tensor *t, const char *dir, const char *subdir,
                               mcir_diag *d) {
    char stem[200];
    snprintf(stem, sizeof stem, "%s", t->name);
    for (char *p = stem; *p; p++)
        if (*p == '/' || *p == '\\' || (p == stem && *p == '.')) *p = '_';
    size_t n = strlen(dir) + strlen(subdir) + strlen(stem) + 64;
    char *full = malloc(n), *rel = malloc(n);
    MCIR_ASSERT(full && rel);
    snprintf(full, n, "%s/%s", dir, subdir);
    mkdir(full, 0777);
    snprintf(rel, n, "%s/%s.npy", subdir, stem);
    snprintf(full, n, "%s/%s", dir, rel);
    if (access(full, F_OK) == 0) { /* two names sanitised alike */
        snprintf(rel, n, "%s/%s.%d.npy", subdir, stem, t->id);
        snprintf(full, n, "%s/%s", dir, rel);
    }
    bool ok = mcir_npy_write(full, t->dtype, t->rank, t->shape, t->data, d);
    free(full);
    if (!ok) {
        free(rel);
        return NULL;
    }
    return rel;
}

static bool write_json(const mcir_graph *g, FILE *out, const char *dir, const char *subdir,
                       int64_t inline_max, mcir_diag *d) {
    json_t *root = json_object();
    json_object_set_new(root, "mcir", json_integer(1));
    json_object_set_new(root, "name", json_string(g->name ? g->name : "graph"));
    if (g->ranks != 1) json_object_set_new(root, "ranks", json_integer(g->ranks));
    if (g->n_dims) {
        json_t *dims = json_object();
        for (int i = 0; i < g->n_dims; i++) {
            json_t *rec = json_object();
            json_object_set_new(rec, "min", json_integer(g->dims[i].min));
            json_object_set_new(rec, "max", json_integer(g->dims[i].max));
            json_object_set_new(dims, g->dims[i].name, rec);
        }
        json_object_set_new(root, "dims", dims);
    }

    json_t *inputs = json_array();
    for (int i = 0; i < g->n_inputs; i++) {
        mcir_tensor whole = whole_of(g->inputs[i]);
        json_t *o = tensor_decl_json(g, &whole);
        if (g->inputs[i]->shard_axis >= 0)
            json_object_set_new(o, "shard", shard_json(g->inputs[i]));
        json_array_append_new(inputs, o);
    }
    json_object_set_new(root, "inputs", inputs);

    json_t *weights = json_array();
    for (int i = 0; i < g->n_weights; i++) {
        mcir_tensor whole = whole_of(g->weights[i]);
        const mcir_tensor *t = &whole;
        json_t *w = tensor_decl_json(g, t);
        if (g->weights[i]->shard_axis >= 0)
            json_object_set_new(w, "shard", shard_json(g->weights[i]));
        if (t->data_path) {
            json_object_set_new(w, "data", json_string(t->data_path));
        } else if (t->data && t->rank >= 0 && dir && mcir_tensor_numel(t) > inline_max) {
            char *rel = write_weight_file(t, dir, subdir, d);
            if (!rel) {
                json_decref(w);
                json_decref(weights);
                json_decref(root);
                return false;
            }
            json_object_set_new(w, "data", json_string(rel));
            free(rel);
        } else if (t->data && t->rank >= 0) {
            /* In-memory data (small constants, or weights a rewrite made,
             * e.g. folded constants, or an imported model's initializers)
             * is written out so the artifact stands alone; only seeded
             * weights carry neither. */
            int64_t k = 0;
            json_object_set_new(w, "value", value_json(t, 0, &k));
        }
        json_array_append_new(weights, w);
    }
    json_object_set_new(root, "weights", weights);

    json_t *nodes = json_array();
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead) json_array_append_new(nodes, node_json(g, g->nodes[i]));
    json_object_set_new(root, "nodes", nodes);

    json_t *outputs = json_array();
    for (int i = 0; i < g->n_outputs; i++)
        json_array_append_new(outputs, json_string(g->outputs[i]->name));
    json_object_set_new(root, "outputs", outputs);
    json_t *state = json_array();
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i]->state_input)
            json_array_append_new(state, json_pack("{s:s, s:s}", "input", g->outputs[i]->state_input->name,
                                                   "output", g->outputs[i]->name));
    if (json_array_size(state)) json_object_set_new(root, "state", state);
    else json_decref(state);

    /* Inputs, weights, then node outputs in node order: the order a
     * reader's declarations reproduce, so round trips are stable. */
    json_t *tensors = json_object();
    for (int i = 0; i < g->n_inputs; i++) add_tensor_record(g, tensors, g->inputs[i]);
    for (int i = 0; i < g->n_weights; i++) add_tensor_record(g, tensors, g->weights[i]);
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead)
            for (int k = 0; k < g->nodes[i]->n_outputs; k++)
                add_tensor_record(g, tensors, g->nodes[i]->outputs[k]);
    json_object_set_new(root, "tensors", tensors);

    put_value(out, root, 0);
    fputc('\n', out);
    json_decref(root);
    return fflush(out) == 0 && !ferror(out);
}

bool mcir_graph_write_json(const mcir_graph *g, FILE *out) {
    return write_json(g, out, NULL, NULL, 0, NULL);
}

bool mcir_graph_write_json_split(const mcir_graph *g, FILE *out, const char *dir,
                                 const char *subdir, int64_t inline_max, mcir_diag *d) {
    return write_json(g, out, dir, subdir, inline_max, d);
}
