/*
 * import.c — ONNX model → MCIR graph (onnx.h, docs/onnx.md).
 *
 * The model is unpacked by protobuf-c; nodes are walked in their (ONNX
 * mandated) topological order and each is looked up in one table of
 * handlers. A handler either folds the node at import time (all inputs
 * constant: eval.c) or emits MCIR nodes for it, running each new node's
 * shape inference at once so that later Shape/Reshape nodes see static
 * shapes. Nothing is dropped silently: an op, attribute, input or output
 * the importer does not handle is an error naming the op, the node, the
 * opset and the model path.
 *
 * This file holds that walk (opsets, initializers, graph inputs, nodes,
 * graph outputs) and the entry points of onnx.h; protobuf.c reads
 * attributes and tensors out of the messages, values.c keeps the name
 * table and emits the MCIR nodes, ops.c holds the op table and ops_*.c
 * the handlers, by op family.
 *
 * Invariants: every ONNX name resolves to at most one ox_value; an MCIR
 * tensor that carries a user-visible ONNX output keeps its ONNX name
 * (identity-like nodes alias instead of emitting, except for graph
 * outputs, which keep their name through a copy); the graph handed back is
 * sorted, inferred and verified, or NULL with the errors reported.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "onnx-impl.h"

#define OX_MIN_OPSET 1
#define OX_MAX_OPSET 21

/* -------------------------------------------------------- diagnostics */

bool ox_error(ox *x, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mcir_loc loc = {x->path, 0, 0};
    if (x->node) {
        const char *nm = x->node->name && *x->node->name ? x->node->name : NULL;
        if (nm)
            mcir_error(x->d, loc, "node '%s' (%s, opset %lld): %s", nm,
                       x->node->op_type ? x->node->op_type : "?", (long long)x->opset, msg);
        else
            mcir_error(x->d, loc, "node #%d (%s, opset %lld): %s", x->node_index,
                       x->node->op_type ? x->node->op_type : "?", (long long)x->opset, msg);
    } else {
        mcir_error(x->d, loc, "%s", msg);
    }
    x->failed = true;
    return false;
}

/* ------------------------------------------------------------ the model */

static const char *dir_of(mcir_arena *a, const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return ".";
    if (slash == path) return "/";
    return mcir_arena_printf(a, "%.*s", (int)(slash - path), path);
}

static const char *stem_of(mcir_arena *a, const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    return mcir_arena_printf(a, "%.*s", (int)n, base);
}

/* Name of a pin as given to mcir_onnx_parse_shape: up to the last '='. */
static int pin_name_len(const char *s) {
    const char *eq = strrchr(s, '=');
    return (int)(eq ? (size_t)(eq - s) : strlen(s));
}

static bool pin_matches(const mcir_onnx_shape *p, const char *name) {
    int n = pin_name_len(p->name);
    return (int)strlen(name) == n && strncmp(p->name, name, (size_t)n) == 0;
}

static bool import_input(ox *x, const Onnx__ValueInfoProto *vi, const mcir_onnx_shape *shapes,
                         int n_shapes, bool *pin_used) {
    const char *name = vi->name;
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return ox_error(x, "graph input '%s' is not a tensor", name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    int elem = tt->has_elem_type ? tt->elem_type : 0;
    mcir_dtype dt;
    if (!ox_elem_dtype(elem, &dt))
        return ox_error(x, "graph input '%s' has element type %s; runtime inputs must be "
                           "float, float16, bfloat16, int32, int64, uint8 or bool",
                        name, ox_elem_name(elem));
    const mcir_onnx_shape *pin = NULL;
    for (int i = 0; i < n_shapes; i++)
        if (pin_matches(&shapes[i], name)) {
            pin = &shapes[i];
            pin_used[i] = true;
        }
    int64_t shape[MCIR_MAX_RANK];
    int rank = -1;
    const Onnx__TensorShapeProto *sp = tt->shape;
    if (sp) {
        if (sp->n_dim > MCIR_MAX_RANK)
            return ox_error(x, "graph input '%s' has %zu dims, more than %d", name, sp->n_dim,
                            MCIR_MAX_RANK);
        rank = (int)sp->n_dim;
        for (int i = 0; i < rank; i++) {
            const Onnx__TensorShapeProto__Dimension *dm = sp->dim[i];
            bool fixed = dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                         dm->dim_value > 0;
            shape[i] = fixed ? dm->dim_value : -1;
            bool named = !fixed && !pin && dm &&
                         dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                         dm->dim_param;
            for (int k = 0; named && k < x->n_dims; k++)
                if (!strcmp(x->dims[k].name, dm->dim_param)) {   /* --dim NAME=N */
                    shape[i] = x->dims[k].value;
                    x->dim_used[k] = true;
                }
            if (shape[i] > 0) fixed = true;
            if (pin && pin->rank == rank && fixed && dm && pin->dims[i] != dm->dim_value)
                return ox_error(x, "--shape %s pins dim %d of graph input '%s' to %lld, but the "
                                   "model fixes it to %lld",
                                pin->name, i, name, (long long)pin->dims[i],
                                (long long)dm->dim_value);
            if (dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                dm->dim_value == 0)
                return ox_error(x, "graph input '%s' has a zero-size dimension %d (static, "
                                   "0); MCIR tensors need at least one element along every "
                                   "dimension",
                                name, i);
            if (!fixed && !pin)
                return ox_error(x, "graph input '%s' has a dynamic dimension %d%s%s%s; pin it "
                                   "with --shape %s=D1xD2x...%s%s%s",
                                name, i, dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? " ('" : "",
                                dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dm->dim_param ? dm->dim_param : "",
                                dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? "')" : "",
                                name,
                                dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dm->dim_param && *dm->dim_param ? " or --dim " : "",
                                dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dm->dim_param && *dm->dim_param ? dm->dim_param : "",
                                dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dm->dim_param && *dm->dim_param ? "=N" : "");
        }
    }
    if (pin) {
        if (rank >= 0 && pin->rank != rank)
            return ox_error(x, "--shape %s gives %d dims, graph input '%s' has %d", pin->name,
                            pin->rank, name, rank);
        rank = pin->rank;
        for (int i = 0; i < rank; i++) shape[i] = pin->dims[i];
    }
    if (rank < 0)
        return ox_error(x, "graph input '%s' has no shape; give one with --shape %s=D1xD2x...",
                        name, name);
    int64_t numel = 1;
    for (int i = 0; i < rank; i++)
        if (shape[i] < 1 || mcir_mul_overflows(numel, shape[i], &numel) ||
            numel > MCIR_MAX_ELEMS)
            return ox_error(x, "graph input '%s' has too many elements (more than %s, the "
                               "limit of one tensor)", name, MCIR_MAX_ELEMS_TEXT);
    mcir_tensor *t = mcir_graph_add_tensor(x->g, name, dt, rank, shape, MCIR_TENSOR_INPUT);
    if (!t) return ox_error(x, "graph input '%s' is declared twice", name);
    return ox_define(x, name, ox_runtime_value(x, t));
}

/* A graph output keeps its ONNX name: where the value's tensor is named
 * otherwise (an alias of an input, a weight or another output), a reshape
 * copy carries the name. */
static bool import_output(ox *x, const char *name) {
    ox_entry *e = ox_lookup(x, name, false);
    if (!e || !e->v) return ox_error(x, "graph output '%s' is not computed by any node", name);
    ox_value *v = e->v;
    mcir_dtype dt = MCIR_DTYPE_F32;
    if (v->is_const) ox_elem_dtype(v->elem, &dt);
    else dt = v->t->dtype;
    mcir_tensor *t = ox_runtime(x, v, dt);
    if (!t) return false;
    if (strcmp(t->name, name) == 0 && !t->is_output) {
        mcir_graph_mark_output(x->g, t);
        return true;
    }
    mcir_tensor *copy = mcir_graph_find_tensor(x->g, name)
                            ? mcir_graph_add_tensor(x->g, ox_fresh(x, name), dt, -1, NULL, MCIR_TENSOR_INTERMEDIATE)
                            : mcir_graph_add_tensor(x->g, name, dt, -1, NULL, MCIR_TENSOR_INTERMEDIATE);
    mcir_node *n = mcir_graph_add_node(x->g, MCIR_OP_RESHAPE,
                                       ox_fresh_node_name(x, mcir_arena_printf(x->a, "%s_copy", name)),
                                       1, &t, 1, &copy);
    n->loc = (mcir_loc){x->path, 0, 0};
    mcir_node_set_ints(x->g, n, "shape", t->rank, t->shape);
    if (!ox_infer_now(x, n)) return false;
    mcir_graph_mark_output(x->g, copy);
    return true;
}

/* Nodes nothing returned depends on (shape branches whose results were
 * folded, unused outputs) are dropped. */
static void drop_dead(mcir_graph *g) {
    bool *live = calloc((size_t)g->n_tensors + 1, 1);
    MCIR_ASSERT(live);
    for (int i = 0; i < g->n_outputs; i++) live[g->outputs[i]->id] = true;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        mcir_node *n = g->nodes[i];
        bool used = false;
        for (int j = 0; j < n->n_outputs; j++) used |= live[n->outputs[j]->id];
        if (!used) {
            n->dead = true;
            continue;
        }
        for (int j = 0; j < n->n_inputs; j++) live[n->inputs[j]->id] = true;
    }
    free(live);
    mcir_graph_compact(g);
}

static bool import_model(ox *x, const Onnx__ModelProto *m, const mcir_onnx_shape *shapes,
                         int n_shapes) {
    const Onnx__GraphProto *gp = m->graph;
    if (!gp) return ox_error(x, "the model has no graph");
    x->opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (o && (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")))
            x->opset = o->has_version ? o->version : -1;
    }
    if (x->opset < 0) return ox_error(x, "the model imports no opset of the default ONNX domain");
    if (x->opset < OX_MIN_OPSET || x->opset > OX_MAX_OPSET)
        return ox_error(x, "opset %lld is not supported (opsets %d to %d are)",
                        (long long)x->opset, OX_MIN_OPSET, OX_MAX_OPSET);
    if (gp->n_sparse_initializer)
        return ox_error(x, "sparse initializers are not supported");
    /* reserve every name and count uses */
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        if (!np) return ox_error(x, "node %zu is empty", i);
        for (size_t j = 0; j < np->n_input; j++)
            if (np->input[j] && *np->input[j]) ox_lookup(x, np->input[j], true)->uses++;
        for (size_t j = 0; j < np->n_output; j++)
            if (np->output[j] && *np->output[j]) ox_lookup(x, np->output[j], true);
    }
    for (size_t i = 0; i < gp->n_output; i++) {
        if (!gp->output[i] || !gp->output[i]->name || !*gp->output[i]->name)
            return ox_error(x, "graph output %zu has no name", i);
        ox_lookup(x, gp->output[i]->name, true)->uses++;
    }
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp || !tp->name || !*tp->name) return ox_error(x, "initializer %zu has no name", i);
        ox_value *v = ox_tensor_value(x, tp, mcir_arena_printf(x->a, "initializer '%s'", tp->name));
        if (!v || !ox_define(x, tp->name, v)) return false;
    }
    bool pin_used[256] = {0}; /* informational: every pin names an input */
    if (n_shapes > 256) return ox_error(x, "more than 256 --shape pins");
    for (int k = 0; k < n_shapes; k++) {
        bool found = false;
        for (size_t i = 0; i < gp->n_input && !found; i++)
            found = gp->input[i] && gp->input[i]->name && pin_matches(&shapes[k], gp->input[i]->name);
        if (!found)
            return ox_error(x, "--shape %s: the model has no graph input '%.*s'", shapes[k].name,
                            pin_name_len(shapes[k].name), shapes[k].name);
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi || !vi->name || !*vi->name) return ox_error(x, "graph input %zu has no name", i);
        ox_entry *e = ox_lookup(x, vi->name, false);
        if (e && e->v && e->v->is_const) {
            for (int k = 0; k < n_shapes; k++)
                if (pin_matches(&shapes[k], vi->name))
                    return ox_error(x, "--shape %s: '%.*s' is an initializer (a weight), not a "
                                       "runtime input",
                                    shapes[k].name, pin_name_len(shapes[k].name), vi->name);
            continue; /* an input that is also an initializer is a weight */
        }
        if (!import_input(x, vi, shapes, n_shapes, pin_used)) return false;
    }
    for (int k = 0; k < x->n_dims; k++)
        if (!x->dim_used[k])
            return ox_error(x, "--dim %s: no input dimension of the model is named '%s' "
                               "(dim_param) and left to it", x->dims[k].name, x->dims[k].name);
    for (size_t i = 0; i < gp->n_node; i++) {
        x->node = gp->node[i];
        x->node_index = (int)i;
        if (!ox_import_node(x)) return false;
    }
    x->node = NULL;
    if (!gp->n_output) return ox_error(x, "the graph has no outputs");
    for (size_t i = 0; i < gp->n_output; i++)
        if (!import_output(x, gp->output[i]->name)) return false;
    return true;
}

mcir_graph *mcir_onnx_read_bytes(const void *bytes, size_t len, const char *path,
                                 const mcir_onnx_shape *shapes, int n_shapes,
                                 mcir_diag *d) {
    return mcir_onnx_read_bytes_ex(bytes, len, path, shapes, n_shapes, NULL, 0, d);
}

mcir_graph *mcir_onnx_read_bytes_ex(const void *bytes, size_t len, const char *path,
                                    const mcir_onnx_shape *shapes, int n_shapes,
                                    const mcir_onnx_dim *dims, int n_dims, mcir_diag *d) {
    for (int i = 0; i < n_dims; i++)
        if (dims[i].max > dims[i].value)   /* a range: symbolic.c */
            return ox_read_symbolic(bytes, len, path, shapes, n_shapes, dims, n_dims, d);
    return ox_read_fixed(bytes, len, path, shapes, n_shapes, dims, n_dims, NULL, d);
}

mcir_graph *ox_read_fixed(const void *bytes, size_t len, const char *path,
                          const mcir_onnx_shape *shapes, int n_shapes, const mcir_onnx_dim *dims,
                          int n_dims, ox_limits *limits, mcir_diag *d) {
    bool dim_used[MCIR_MAX_RANK * 8] = {false};
    ox x = {.d = d, .path = path ? path : "<onnx>", .dims = dims, .dim_used = dim_used,
            .n_dims = n_dims, .probing = limits != NULL, .limits = limits};
    if (n_dims > (int)(sizeof dim_used / sizeof dim_used[0])) {
        mcir_error(d, (mcir_loc){x.path, 0, 0}, "more than %d --dim sizes",
                   (int)(sizeof dim_used / sizeof dim_used[0]));
        return NULL;
    }
    /* initializers widen to at most 8 bytes an element (int8 → int64);
     * folded values get 256 MiB besides */
    x.const_budget = (int64_t)(len < ((size_t)1 << 40) ? len : (size_t)1 << 40) * 8 + ((int64_t)1 << 28);
    x.a = mcir_arena_new();
    x.dir = dir_of(x.a, x.path);
    if (!ox_nesting_ok(&onnx__model_proto__descriptor, bytes, (const uint8_t *)bytes + len, 0)) {
        ox_error(&x, "not a valid ONNX model (messages nested more than %d deep)",
                 OX_MAX_NESTING);
        mcir_arena_free(x.a);
        return NULL;
    }
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, bytes);
    if (!m) {
        ox_error(&x, "not a valid ONNX model (the protobuf does not parse: truncated or not "
                     "an .onnx file)");
        mcir_arena_free(x.a);
        return NULL;
    }
    x.g = mcir_graph_new(stem_of(x.a, x.path));
    x.g->path = mcir_arena_strdup(x.g->arena, x.path);
    x.g->dir = mcir_arena_strdup(x.g->arena, x.dir);
    bool ok = import_model(&x, m, shapes, n_shapes);
    onnx__model_proto__free_unpacked(m, NULL);
    mcir_arena_free(x.a);
    if (ok) {
        drop_dead(x.g);
        ok = mcir_graph_sort(x.g, d) && mcir_graph_infer(x.g, d) && mcir_graph_verify(x.g, d);
    }
    if (!ok) {
        mcir_graph_free(x.g);
        return NULL;
    }
    return x.g;
}

mcir_graph *mcir_onnx_read(const char *path, const mcir_onnx_shape *shapes, int n_shapes,
                           mcir_diag *d) {
    return mcir_onnx_read_ex(path, shapes, n_shapes, NULL, 0, d);
}

mcir_graph *mcir_onnx_read_ex(const char *path, const mcir_onnx_shape *shapes, int n_shapes,
                              const mcir_onnx_dim *dims, int n_dims, mcir_diag *d) {
    mcir_loc loc = {path, 0, 0};
    FILE *f = fopen(path, "rb");
    if (!f) {
        mcir_error(d, loc, "cannot open: %s", strerror(errno));
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                mcir_error(d, loc, "out of memory reading the model");
                return NULL;
            }
            buf = nb;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0) break;
    }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        mcir_error(d, loc, "read error");
        return NULL;
    }
    mcir_graph *g = mcir_onnx_read_bytes_ex(buf, len, path, shapes, n_shapes, dims, n_dims, d);
    free(buf);
    return g;
}

bool mcir_onnx_parse_shape(const char *spec, mcir_onnx_shape *out) {
    const char *eq = spec ? strrchr(spec, '=') : NULL;
    if (!eq || eq == spec) return false;
    memset(out, 0, sizeof *out);
    out->name = spec;
    const char *p = eq + 1;
    if (!*p) return true; /* a scalar */
    for (;;) {
        if (out->rank == MCIR_MAX_RANK || *p < '0' || *p > '9') return false;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || v < 1) return false;
        out->dims[out->rank++] = v;
        if (!*end) return true;
        if (*end != 'x' && *end != 'X' && *end != ',') return false;
        p = end + 1;
    }
}

bool mcir_onnx_is_model_path(const char *path) {
    size_t n = path ? strlen(path) : 0;
    return n >= 5 && strcmp(path + n - 5, ".onnx") == 0;
}
