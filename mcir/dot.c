/*
 * dot.c — the `dot` artifact: Graphviz of a (rewritten) graph.
 *
 * Nodes are boxes labelled op, name and their memory properties; graph
 * inputs, weights and outputs are small ellipses / notes. Every use of a
 * tensor is an edge labelled with its name and shape, drawn by memory
 * state: materialized solid, streaming dashed, recomputable dotted (a
 * legend says so). Nodes sharing a fusion group sit in one cluster.
 * Graphviz ids are generated ("n3", "t7"), never taken from user names, so
 * only labels need escaping.
 */
#include <string.h>

#include "json_pos.h"

static void put_escaped(FILE *out, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', out);
        if (*s == '\n') {
            fputs("\\n", out);
            continue;
        }
        fputc(*s, out);
    }
}

static const char *edge_style(mcir_memory_state s) {
    switch (s) {
    case MCIR_MEM_STREAMING: return "dashed";
    case MCIR_MEM_RECOMPUTABLE: return "dotted";
    default: return "solid";
    }
}

static void put_node(FILE *out, const mcir_node *n, const char *indent) {
    fprintf(out, "%sn%d [shape=box, style=\"rounded,filled\", fillcolor=\"%s\", label=\"", indent,
            n->id, n->n_properties ? "#fde9c9" : "#e8eef7");
    put_escaped(out, mcir_op_name(n->op));
    fputs("\\n", out);
    put_escaped(out, n->name);
    for (int i = 0; i < n->n_properties; i++) {
        fputs("\\n[", out);
        put_escaped(out, n->properties[i]);
        fputc(']', out);
    }
    if (n->inplace_input >= 0) fprintf(out, "\\nin place of input %d", n->inplace_input);
    fputs("\"];\n", out);
}

static void tensor_label(FILE *out, const mcir_tensor *t) {
    char shape[256];
    put_escaped(out, t->name);
    if (t->rank >= 0) {
        mcir_shape_str(t, shape, sizeof shape);
        fprintf(out, "\\n%s %s", shape, mcir_dtype_name(t->dtype));
    }
}

bool mcir_graph_write_dot(const mcir_graph *g, FILE *out) {
    fputs("digraph \"", out);
    put_escaped(out, g->name ? g->name : "graph");
    fputs("\" {\n"
          "  rankdir=TB;\n"
          "  node [fontname=\"Helvetica\", fontsize=10];\n"
          "  edge [fontname=\"Helvetica\", fontsize=9];\n",
          out);

    /* Sources: graph inputs and weights. */
    for (int i = 0; i < g->n_tensors; i++) {
        const mcir_tensor *t = g->tensors[i];
        if (t->kind != MCIR_TENSOR_INPUT && t->kind != MCIR_TENSOR_WEIGHT) continue;
        fprintf(out, "  t%d [shape=%s, label=\"", t->id,
                t->kind == MCIR_TENSOR_INPUT ? "ellipse" : "note");
        tensor_label(out, t);
        fputs("\"];\n", out);
    }

    /* Nodes: fusion groups as clusters, in order of first appearance. */
    for (int i = 0; i < g->n_nodes; i++) {
        const mcir_node *n = g->nodes[i];
        if (n->dead) continue;
        if (n->group < 0) {
            put_node(out, n, "  ");
            continue;
        }
        bool first = true;
        for (int j = 0; j < i && first; j++)
            if (!g->nodes[j]->dead && g->nodes[j]->group == n->group) first = false;
        if (!first) continue;
        fprintf(out, "  subgraph cluster_group_%d {\n    label=\"fusion group %d\";\n"
                     "    style=\"rounded,dashed\";\n    color=\"#7a7a7a\";\n",
                n->group, n->group);
        for (int j = i; j < g->n_nodes; j++)
            if (!g->nodes[j]->dead && g->nodes[j]->group == n->group) put_node(out, g->nodes[j], "    ");
        fputs("  }\n", out);
    }

    /* Edges: one per use of a tensor. */
    for (int i = 0; i < g->n_nodes; i++) {
        const mcir_node *n = g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_inputs; k++) {
            const mcir_tensor *t = n->inputs[k];
            if (t->producer && !t->producer->dead)
                fprintf(out, "  n%d -> n%d", t->producer->id, n->id);
            else
                fprintf(out, "  t%d -> n%d", t->id, n->id);
            fprintf(out, " [style=%s, label=\"", edge_style(t->memory_state));
            tensor_label(out, t);
            fputs("\"];\n", out);
        }
    }

    /* Graph outputs: a sink per output. */
    for (int i = 0; i < g->n_outputs; i++) {
        const mcir_tensor *t = g->outputs[i];
        fprintf(out, "  out%d [shape=doublecircle, label=\"", i);
        put_escaped(out, t->name);
        fputs("\"];\n", out);
        if (t->producer && !t->producer->dead)
            fprintf(out, "  n%d -> out%d", t->producer->id, i);
        else
            fprintf(out, "  t%d -> out%d", t->id, i);
        fprintf(out, " [style=%s, label=\"", edge_style(t->memory_state));
        tensor_label(out, t);
        fputs("\"];\n", out);
    }

    fputs("  subgraph cluster_legend {\n"
          "    label=\"memory state\";\n"
          "    style=rounded;\n"
          "    node [shape=plaintext, fontsize=9];\n"
          "    legend_a0 [label=\"\"]; legend_a1 [label=\"materialized\"];\n"
          "    legend_b0 [label=\"\"]; legend_b1 [label=\"streaming\"];\n"
          "    legend_c0 [label=\"\"]; legend_c1 [label=\"recomputable\"];\n"
          "    legend_a0 -> legend_a1 [style=solid];\n"
          "    legend_b0 -> legend_b1 [style=dashed];\n"
          "    legend_c0 -> legend_c1 [style=dotted];\n"
          "  }\n"
          "}\n",
          out);
    return fflush(out) == 0 && !ferror(out);
}
