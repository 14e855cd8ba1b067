/*
 * report.c — the HTML report of a compilation (report.h, docs/report.md).
 *
 * The page is written in one pass: a header with the summary, the two
 * graph drawings (SVG made by running Graphviz's `dot` on a description
 * written here, in which every node carries the id "node:NAME" so the page
 * can find it), the arena timeline (kernelplan's SVG), and one JSON object
 * with the trace, plan and memory plan that the inline script turns into
 * the trace and kernel tables. Everything the page needs is inside it.
 *
 * Invariant: text from the graph (names, op names, details) reaches the
 * page only through html_escape or as JSON inside a script element whose
 * "</" sequences are broken, so no graph can inject markup.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "mcirc/report.h"
#include "rewrites/rewrites.h"

/* ------------------------------------------------------------- helpers */

static void html_escape(FILE *out, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        default: fputc(*s, out);
        }
    }
}

/* A string inside a dot "..." literal. */
static void dot_escape(FILE *out, const char *s) {
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', out);
        if (*s == '\n') {
            fputs("\\n", out);
            continue;
        }
        fputc(*s, out);
    }
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    MCIR_ASSERT(buf);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            MCIR_ASSERT(buf);
        }
    }
    fclose(f);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

/* --------------------------------------------------------------- drawings */

static const char *const palette[] = {"#cfe2ff", "#d1f2d9", "#ffe5b4", "#f8d7da", "#e2d9f3",
                                      "#d2f4f4", "#fff3bf", "#e9ecef", "#fcd5ce", "#dbe7c9",
                                      "#f1e0ff", "#c9e4de"};
#define N_COLORS ((int)(sizeof palette / sizeof palette[0]))

static const char *state_style(mcir_memory_state s) {
    switch (s) {
    case MCIR_MEM_STREAMING: return "style=dashed, color=\"#1c64c8\"";
    case MCIR_MEM_RECOMPUTABLE: return "style=dotted, color=\"#2b8a3e\"";
    default: return "style=solid, color=\"#444444\"";
    }
}

/* Graph g as dot: a box per live node (id "node:NAME"), graph inputs and
 * outputs as ellipses, weights left out (they would double the drawing),
 * an edge per use styled by the tensor's memory state. With a plan, the
 * nodes of a kernel share a cluster and a colour. */
static void write_dot(const mcir_graph *g, const mcir_plan *plan, FILE *out) {
    fputs("digraph g {\n  rankdir=TB; nodesep=0.25; ranksep=0.35;\n"
          "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", "
          "fontname=\"Helvetica\", fontsize=10, height=0.3];\n"
          "  edge [arrowsize=0.6, fontname=\"Helvetica\", fontsize=8];\n",
          out);
    int *kernel_of = calloc((size_t)g->n_nodes + 1, sizeof *kernel_of);
    MCIR_ASSERT(kernel_of);
    for (int i = 0; i < g->n_nodes; i++) kernel_of[i] = -1;
    if (plan)
        for (int k = 0; k < plan->n_kernels; k++)
            for (int j = 0; j < plan->kernels[k].n_nodes; j++) {
                const mcir_node *n = plan->kernels[k].nodes[j];
                if (n->id >= 0 && n->id < g->n_nodes) kernel_of[n->id] = k;
            }
    for (int i = 0; i < g->n_tensors; i++) {
        const mcir_tensor *t = g->tensors[i];
        if (t->kind != MCIR_TENSOR_INPUT) continue;
        fprintf(out, "  t%d [shape=ellipse, style=filled, fillcolor=\"#f1f3f5\", id=\"tensor:",
                t->id);
        dot_escape(out, t->name);
        fputs("\", label=\"", out);
        dot_escape(out, t->name);
        fputs("\"];\n", out);
    }
    /* nodes of one kernel in one cluster */
    int n_k = plan ? plan->n_kernels : 0;
    for (int k = -1; k < n_k; k++) {
        if (k >= 0) {
            fprintf(out, "  subgraph cluster_k%d {\n    label=\"", k);
            dot_escape(out, plan->kernels[k].name);
            fprintf(out, "\"; fontsize=9; style=\"rounded\"; color=\"#9aa5b1\";\n");
        }
        for (int i = 0; i < g->n_nodes; i++) {
            const mcir_node *n = g->nodes[i];
            if (n->dead || kernel_of[i] != k) continue;
            fprintf(out, "    n%d [id=\"node:", n->id);
            dot_escape(out, n->name);
            fputs("\", label=\"", out);
            dot_escape(out, n->name);
            fputs("\\n", out);
            dot_escape(out, mcir_op_name(n->op));
            fputs("\", tooltip=\"", out);
            dot_escape(out, n->name);
            fprintf(out, " (%s)\"", mcir_op_name(n->op));
            if (k >= 0) fprintf(out, ", fillcolor=\"%s\"", palette[k % N_COLORS]);
            fputs("];\n", out);
        }
        if (k >= 0) fputs("  }\n", out);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const mcir_node *n = g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->n_inputs; j++) {
            const mcir_tensor *t = n->inputs[j];
            if (t->producer && !t->producer->dead)
                fprintf(out, "  n%d -> n%d", t->producer->id, n->id);
            else if (t->kind == MCIR_TENSOR_INPUT)
                fprintf(out, "  t%d -> n%d", t->id, n->id);
            else
                continue;
            fprintf(out, " [%s, tooltip=\"", state_style(t->memory_state));
            dot_escape(out, t->name);
            fprintf(out, ": %s\"];\n", mcir_memory_state_name(t->memory_state));
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        const mcir_tensor *t = g->outputs[i];
        fprintf(out, "  out%d [shape=ellipse, style=filled, fillcolor=\"#fff3bf\", label=\"", i);
        dot_escape(out, t->name);
        fputs("\"];\n", out);
        if (t->producer && !t->producer->dead)
            fprintf(out, "  n%d -> out%d;\n", t->producer->id, i);
        else if (t->kind == MCIR_TENSOR_INPUT)
            fprintf(out, "  t%d -> out%d;\n", t->id, i);
    }
    fputs("}\n", out);
    free(kernel_of);
}

/* The kernel that computes t, through the views in no kernel (a reshape
 * between two kernels) back to one that is; -1 for a graph input or a
 * weight. */
static int kernel_producing(const mcir_graph *g, const int *kernel_of, const mcir_tensor *t) {
    for (int hops = 0; hops < 64 && t; hops++) {
        const mcir_node *n = t->producer;
        if (!n || n->dead || n->id < 0 || n->id >= g->n_nodes) return -1;
        if (kernel_of[n->id] >= 0) return kernel_of[n->id];
        t = n->n_inputs > 0 ? n->inputs[0] : NULL;
    }
    return -1;
}

/* The kernel-level graph: one box per kernel (id "kernel:NAME", its
 * template and node count), graph inputs and outputs as ellipses, one edge
 * per pair of kernels that a tensor connects (styled by the first such
 * tensor's memory state). Its size is the number of kernels, whatever
 * the number of nodes. */
static void write_kernel_dot(const mcir_graph *g, const mcir_plan *plan, FILE *out) {
    fputs("digraph k {\n  rankdir=TB; nodesep=0.25; ranksep=0.35;\n"
          "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", "
          "fontname=\"Helvetica\", fontsize=10, height=0.3];\n"
          "  edge [arrowsize=0.6];\n",
          out);
    int *kernel_of = malloc(((size_t)g->n_nodes + 1) * sizeof *kernel_of);
    int *seen = malloc(((size_t)plan->n_kernels + (size_t)g->n_tensors + 1) * sizeof *seen);
    MCIR_ASSERT(kernel_of && seen);
    for (int i = 0; i < g->n_nodes; i++) kernel_of[i] = -1;
    for (int k = 0; k < plan->n_kernels; k++)
        for (int j = 0; j < plan->kernels[k].n_nodes; j++) {
            const mcir_node *n = plan->kernels[k].nodes[j];
            if (n->id >= 0 && n->id < g->n_nodes) kernel_of[n->id] = k;
        }
    for (int i = 0; i < g->n_tensors; i++) {
        const mcir_tensor *t = g->tensors[i];
        if (t->kind != MCIR_TENSOR_INPUT) continue;
        fprintf(out, "  t%d [shape=ellipse, style=filled, fillcolor=\"#f1f3f5\", label=\"", t->id);
        dot_escape(out, t->name);
        fputs("\"];\n", out);
    }
    for (int k = 0; k < plan->n_kernels; k++) {
        const mcir_kernel_plan *kp = &plan->kernels[k];
        fprintf(out, "  k%d [id=\"kernel:", k);
        dot_escape(out, kp->name);
        fputs("\", label=\"", out);
        dot_escape(out, kp->name);
        fprintf(out, "\\n%s · %d node%s\", tooltip=\"", mcir_template_name(kp->tpl), kp->n_nodes,
                kp->n_nodes == 1 ? "" : "s");
        for (int j = 0; j < kp->n_nodes && j < 12; j++) {
            if (j) fputs(", ", out);
            dot_escape(out, kp->nodes[j]->name);
        }
        if (kp->n_nodes > 12) fprintf(out, " and %d more", kp->n_nodes - 12);
        fprintf(out, "\", fillcolor=\"%s\"];\n", palette[k % N_COLORS]);
    }
    /* seen[x] == k: the edge x -> k is written (x: a kernel, or
     * n_kernels + a graph input's tensor id) */
    for (int i = 0; i < plan->n_kernels + g->n_tensors; i++) seen[i] = -1;
    for (int k = 0; k < plan->n_kernels; k++) {
        const mcir_kernel_plan *kp = &plan->kernels[k];
        for (int r = 0; r < kp->n_reads; r++) {
            const mcir_tensor *t = kp->reads[r];
            int from = kernel_producing(g, kernel_of, t);
            if (from == k) continue;
            if (from < 0 && t->kind == MCIR_TENSOR_INPUT && t->id >= 0 && t->id < g->n_tensors)
                from = plan->n_kernels + t->id;
            if (from < 0 || seen[from] == k) continue;
            seen[from] = k;
            if (from < plan->n_kernels) fprintf(out, "  k%d -> k%d", from, k);
            else fprintf(out, "  t%d -> k%d", t->id, k);
            fprintf(out, " [%s, tooltip=\"", state_style(t->memory_state));
            dot_escape(out, t->name);
            fprintf(out, ": %s\"];\n", mcir_memory_state_name(t->memory_state));
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        const mcir_tensor *t = g->outputs[i];
        fprintf(out, "  out%d [shape=ellipse, style=filled, fillcolor=\"#fff3bf\", label=\"", i);
        dot_escape(out, t->name);
        fputs("\"];\n", out);
        int p = kernel_producing(g, kernel_of, t);
        if (p >= 0) fprintf(out, "  k%d -> out%d;\n", p, i);
        else if (t->kind == MCIR_TENSOR_INPUT) fprintf(out, "  t%d -> out%d;\n", t->id, i);
    }
    fputs("}\n", out);
    free(seen);
    free(kernel_of);
}

/* ---------------------------------------------------- drawing, in time */

/* A graph of more nodes than this is not laid out node by node: dot's
 * layout grows much faster than linearly (an 8 000-node chain takes about
 * a minute) and such a drawing cannot be read. */
#define MAX_DRAWN_NODES 2000

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One run of Graphviz's dot, in its own process group so that a run out
 * of time is killed whole. */
typedef struct dot_run {
    pid_t pid;                 /* > 0 while it runs */
    char dot_path[PATH_MAX], svg_path[PATH_MAX + 8];
    char *svg;                 /* the <svg> element, when it succeeded */
    char why[256];             /* else why not */
} dot_run;

static bool dot_start(dot_run *r, const mcir_graph *g, const mcir_plan *plan, bool kernels) {
    memset(r, 0, sizeof *r);
    const char *tmp = getenv("TMPDIR");
    int k = snprintf(r->dot_path, sizeof r->dot_path, "%s/mcir-report-XXXXXX",
                     tmp && *tmp ? tmp : "/tmp");
    if (k < 0 || (size_t)k >= sizeof r->dot_path)
        snprintf(r->dot_path, sizeof r->dot_path, "/tmp/mcir-report-XXXXXX");
    int fd = mkstemp(r->dot_path);
    if (fd < 0) {
        snprintf(r->why, sizeof r->why, "cannot create a temporary file: %s", strerror(errno));
        return false;
    }
    FILE *f = fdopen(fd, "w");
    MCIR_ASSERT(f);
    if (kernels) write_kernel_dot(g, plan, f);
    else write_dot(g, plan, f);
    fclose(f);
    snprintf(r->svg_path, sizeof r->svg_path, "%s.svg", r->dot_path);
    r->pid = fork();
    if (r->pid == 0) {
        setpgid(0, 0);
        /* dot's own warnings are of no use on the page */
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
        }
        execlp("dot", "dot", "-Tsvg", "-o", r->svg_path, r->dot_path, (char *)NULL);
        _exit(127);
    }
    if (r->pid < 0) {
        snprintf(r->why, sizeof r->why, "cannot start dot: %s", strerror(errno));
        r->pid = 0;
        unlink(r->dot_path);
        return false;
    }
    setpgid(r->pid, r->pid);   /* also here: whichever runs first */
    return true;
}

/* Collects a finished run (or, with kill_it, ends it); false while it
 * still runs. */
static bool dot_collect(dot_run *r, bool kill_it) {
    if (r->pid <= 0) return true;
    int status = 0;
    pid_t got = waitpid(r->pid, &status, WNOHANG);
    if (got == 0 && !kill_it) return false;
    if (got == 0) {
        kill(-r->pid, SIGKILL);
        kill(r->pid, SIGKILL);
        waitpid(r->pid, &status, 0);
        snprintf(r->why, sizeof r->why, "timeout");
    } else if (got < 0) {
        snprintf(r->why, sizeof r->why, "dot vanished: %s", strerror(errno));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        snprintf(r->why, sizeof r->why, "Graphviz's dot is not installed (Debian: apt-get install "
                 "graphviz); the drawings are left out");
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(r->why, sizeof r->why, "dot failed (status %d); the drawing is left out", status);
    } else {
        char *svg = slurp(r->svg_path, NULL);
        char *start = svg ? strstr(svg, "<svg") : NULL;
        if (!start) {   /* the <svg> element only: no XML prolog or DOCTYPE inside HTML */
            snprintf(r->why, sizeof r->why, "dot wrote no SVG; the drawing is left out");
            free(svg);
        } else {
            memmove(svg, start, strlen(start) + 1);
            r->svg = svg;
        }
    }
    r->pid = 0;
    unlink(r->dot_path);
    unlink(r->svg_path);
    return true;
}

/* One drawing of the page and how it came to be. */
typedef struct drawing {
    const char *id, *what;     /* "g-after", "after rewriting" */
    const mcir_graph *g;
    const mcir_plan *plan;     /* kernels: boxes, and the kernel-level fallback */
    int live;
    dot_run run;
    bool kernels;              /* run draws the kernel-level graph */
    bool done;
    char note[768];            /* said above the drawing, or instead of it */
} drawing;

static bool is_timeout(const dot_run *r) { return !strcmp(r->why, "timeout"); }

static void start_kernel_form(drawing *dr) {
    dr->kernels = true;
    if (!dot_start(&dr->run, dr->g, dr->plan, true)) {
        snprintf(dr->note + strlen(dr->note), sizeof dr->note - strlen(dr->note), " %s",
                 dr->run.why);
        dr->done = true;
    }
}

/* Lays out every drawing within budget_s seconds in all, the runs side by
 * side. A node-level drawing of the graph after rewriting that is not done
 * by half the budget (or has more than MAX_DRAWN_NODES nodes) is replaced
 * by the kernel-level graph; whatever is not done by the end is killed and
 * left out. Each drawing's note says what was left out and why. */
static void draw_all(drawing *dr, int n, double budget_s) {
    double t0 = now_s(), half = t0 + budget_s / 2, end = t0 + budget_s;
    mcir_progress *progress = NULL;
    for (int i = 0; i < n; i++) {
        drawing *x = &dr[i];
        if (!x->g) {
            snprintf(x->note, sizeof x->note, "The graph %s was not kept.", x->what);
            x->done = true;
            continue;
        }
        for (int j = 0; j < x->g->n_nodes; j++) x->live += !x->g->nodes[j]->dead;
        if (x->live > MAX_DRAWN_NODES) {
            snprintf(x->note, sizeof x->note, "The graph %s has %d nodes, more than the %d drawn "
                     "node by node (Graphviz's layout would take minutes and could not be read).",
                     x->what, x->live, MAX_DRAWN_NODES);
            if (x->plan) {
                start_kernel_form(x);
            } else {
                strcat(x->note, " The drawing is left out.");
                x->done = true;
            }
            continue;
        }
        if (!dot_start(&x->run, x->g, x->plan, false)) {
            snprintf(x->note, sizeof x->note, "%s", x->run.why);
            x->done = true;
        }
    }
    for (;;) {
        bool running = false;
        double now = now_s();
        for (int i = 0; i < n; i++) {
            drawing *x = &dr[i];
            if (x->done) continue;
            bool late = now >= end || (!x->kernels && x->plan && now >= half);
            if (!dot_collect(&x->run, late)) {
                running = true;
                continue;
            }
            size_t used = strlen(x->note);
            char *tail = x->note + used;
            size_t room = sizeof x->note - used;
            if (x->run.svg) {
                if (x->kernels)
                    snprintf(tail, room, "%sThis is the kernel-level graph: one box per kernel "
                             "(%d), the tensors between kernels as edges; the nodes of each "
                             "kernel are in the Kernels table and the trace, whose rows "
                             "highlight their kernel here.", used ? " " : "",
                             x->plan->n_kernels);
                x->done = true;
            } else if (!x->kernels && is_timeout(&x->run) && x->plan && now < end) {
                snprintf(tail, room, "The graph %s (%d nodes) did not lay out within %.3g s, half "
                         "of the report's drawing time (--report-time %.3g).", x->what, x->live,
                         budget_s / 2, budget_s);
                start_kernel_form(x);
                running = running || !x->done;
            } else if (is_timeout(&x->run)) {
                if (x->kernels)
                    snprintf(tail, room, "%sIts kernel-level graph (%d kernels) did not lay out "
                             "in the rest of the %.3g s either (--report-time): the drawing is "
                             "left out.", used ? " " : "", x->plan->n_kernels, budget_s);
                else if (x->plan)
                    snprintf(tail, room, "The graph %s (%d nodes) did not lay out within the "
                             "report's drawing time, %.3g s (--report-time), with no time left "
                             "for its kernel-level graph: the drawing is left out.", x->what,
                             x->live, budget_s);
                else
                    snprintf(tail, room, "The graph %s (%d nodes) did not lay out within the "
                             "report's drawing time, %.3g s (--report-time): the drawing is left "
                             "out; the graph after rewriting shows its structure kernel by "
                             "kernel.", x->what, x->live, budget_s);
                x->done = true;
            } else {
                snprintf(tail, room, "%s%s", used ? " " : "", x->run.why);
                x->done = true;
            }
        }
        if (!running) break;
        if (!progress) progress = mcir_progress_begin("report", "drawing the graphs with Graphviz", 0);
        if (progress) mcir_progress_set(progress, 0, " (at most %.3g s)", budget_s);
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    mcir_progress_end(progress);
}

/* ------------------------------------------------------------------ data */

/* An artifact writer's JSON, parsed back (NULL if it fails). */
static json_t *capture_json(bool (*write)(const void *, const void *, FILE *), const void *a,
                            const void *b) {
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) return NULL;
    bool ok = write(a, b, mem);
    fclose(mem);
    json_t *j = ok ? json_loadb(buf, len, 0, NULL) : NULL;
    free(buf);
    return j;
}

static bool plan_writer(const void *p, const void *unused, FILE *out) {
    (void)unused;
    return mcir_plan_write_json(p, out);
}
static bool memory_writer(const void *m, const void *p, FILE *out) {
    return mcir_memplan_write_json(m, p, out);
}

/* The JSON the script reads, with "</" broken so it cannot end the
 * script element. */
static void write_data(const mcir_compilation *c, FILE *out) {
    json_t *data = json_object();
    json_t *trace = json_array();
    for (int i = 0; c->trace && i < mcir_trace_count(c->trace); i++)
        json_array_append(trace, mcir_trace_get(c->trace, i));
    json_object_set_new(data, "trace", trace);
    if (c->plan) {
        json_t *p = capture_json(plan_writer, c->plan, NULL);
        if (p) json_object_set_new(data, "plan", p);
    }
    if (c->memory && c->plan) {
        json_t *m = capture_json(memory_writer, c->memory, c->plan);
        if (m) json_object_set_new(data, "memory", m);
    }
    char *text = json_dumps(data, JSON_COMPACT);
    json_decref(data);
    for (const char *s = text; s && *s; s++) {
        if (s[0] == '<' && s[1] == '/') {
            fputs("<\\/", out);
            s++;
            continue;
        }
        fputc(*s, out);
    }
    free(text);
}

/* ------------------------------------------------------------------ page */

static const char page_css[] =
    "body{font:14px/1.45 system-ui,Helvetica,Arial,sans-serif;margin:0;color:#1d2125;"
    "background:#fafbfc}\n"
    "header{background:#1f2d3d;color:#fff;padding:14px 24px}\n"
    "header h1{font-size:20px;margin:0 0 6px}\n"
    "header .facts span{display:inline-block;margin-right:22px;opacity:.92}\n"
    "nav{position:sticky;top:0;background:#fff;border-bottom:1px solid #dde1e6;"
    "padding:6px 24px;z-index:5}\n"
    "nav a{margin-right:18px;color:#1c64c8;text-decoration:none}\n"
    "section{padding:10px 24px 18px}\n"
    "h2{font-size:17px;border-bottom:1px solid #dde1e6;padding-bottom:4px}\n"
    ".tabs button{border:1px solid #c4cad1;background:#fff;padding:4px 12px;cursor:pointer}\n"
    ".tabs button.on{background:#1c64c8;color:#fff;border-color:#1c64c8}\n"
    ".drawing{overflow:auto;max-height:720px;border:1px solid #dde1e6;background:#fff;"
    "margin-top:6px}\n"
    ".drawing svg{display:block}\n"
    ".note{background:#fff3bf;border:1px solid #f0d264;padding:6px 10px;margin:6px 0}\n"
    "table{border-collapse:collapse;width:100%;background:#fff;font-size:12.5px}\n"
    "th,td{border:1px solid #e1e4e8;padding:3px 6px;text-align:left;vertical-align:top}\n"
    "th{background:#f1f3f5;position:sticky;top:37px}\n"
    "tr.applied td.dec{color:#2b8a3e;font-weight:600}\n"
    "tr.rejected td.dec{color:#c92a2a;font-weight:600}\n"
    "tbody tr{cursor:pointer}tbody tr:hover{background:#f1f7ff}\n"
    "tr.sel{background:#dbe9ff!important}\n"
    ".controls input,.controls select{margin-right:10px;padding:3px 6px}\n"
    "g.hl>polygon,g.hl>path,g.hl>ellipse{stroke:#e8590c!important;stroke-width:3px!important}\n"
    "g.hl text{font-weight:bold}\n"
    ".legend span{margin-right:16px;font-size:12px}\n"
    ".small{color:#5c6670;font-size:12px}\n";

/* The script: tables from the JSON, filtering, highlighting. It marks the
 * body data-rendered="ok" when done, or data-error with the message, so
 * a headless browser test can tell. */
static const char page_js[] =
    "'use strict';\n"
    "window.onerror=function(m){document.body.dataset.error=String(m);};\n"
    "const D=JSON.parse(document.getElementById('data').textContent);\n"
    "function el(t,a,txt){const e=document.createElement(t);"
    "if(a)for(const k in a)e.setAttribute(k,a[k]);if(txt!==undefined)e.textContent=txt;return e;}\n"
    "const K={};if(D.plan)for(const k of D.plan.kernels)for(const n of (k.nodes||[]))K[n]=k.name;\n"
    "function highlight(names){document.querySelectorAll('g.hl').forEach(g=>g.classList.remove('hl'));"
    "let first=null;for(const n of names){const ids=['node:'+n];if(K[n])ids.push('kernel:'+K[n]);"
    "for(const id of ids)document.querySelectorAll('#'+CSS.escape(id)).forEach(g=>{g.classList.add('hl');"
    "if(!first&&g.closest('.drawing').offsetParent)first=g;});}"
    "if(first)first.scrollIntoView({block:'center',inline:'center'});return first!==null;}\n"
    "function failed(r){return (r.legality||[]).filter(c=>!c.ok)"
    ".map(c=>c.check+': '+(c.detail||'')).join('; ');}\n"
    "function traceTable(){const tb=document.querySelector('#trace tbody');tb.textContent='';"
    "const q=document.getElementById('tq').value.toLowerCase(),"
    "dec=document.getElementById('td').value,st=document.getElementById('ts').value;let shown=0;"
    "for(const r of D.trace){const stage=r.stage||'rewrite';"
    "if(dec&&r.decision!==dec)continue;if(st&&stage!==st)continue;"
    "const m=(r.matched||[]).join(', '),f=failed(r);"
    "const hay=[r.rule,r.anchor,m,f,r.property].join(' ').toLowerCase();"
    "if(q&&hay.indexOf(q)<0)continue;"
    "const tr=el('tr',{'class':r.decision||''});"
    "[r.seq,stage,r.rule,r.property||'',r.decision,r.anchor||'',m,f,(r.result||[]).join(', ')]"
    ".forEach((v,i)=>{const td=el('td',i===4?{'class':'dec'}:null,String(v===undefined?'':v));tr.appendChild(td);});"
    "tr.onclick=()=>{document.querySelectorAll('tr.sel').forEach(x=>x.classList.remove('sel'));"
    "tr.classList.add('sel');highlight((r.matched||[]).concat(r.result||[]));};"
    "tb.appendChild(tr);shown++;}"
    "document.getElementById('tcount').textContent=shown+' of '+D.trace.length+' records';}\n"
    "function fmtBytes(b){if(b===undefined)return '';if(b>=1048576)return (b/1048576).toFixed(2)+' MiB';"
    "if(b>=1024)return (b/1024).toFixed(1)+' KiB';return b+' B';}\n"
    "function sassCell(s){if(!s)return '';if(!s.available)return 'not available ('+s.why+')';"
    "const m=s.mainloop||{};let t=s.instructions+' instructions';"
    "if(m.loops)t+=', main loop '+m.instructions+'/iter, '+m.per_16b.toFixed(1)+' per 16 B (weighted '+"
    "m.weighted_per_16b.toFixed(1)+'), in flight '+fmtBytes(m.inflight_sm_bytes)+'/SM';"
    "if(s.slow_paths)t+=', '+s.slow_paths+' IEEE slow paths';"
    "if(s.issue_us!==null&&s.issue_us!==undefined)t+=', issue '+s.issue_us.toFixed(1)+' µs vs memory '+"
    "s.memory_us.toFixed(1)+' µs';return t;}\n"
    "function issueBound(c){return c&&c.issue_us>c.memory_us&&c.issue_us>c.compute_us;}\n"
    "function kernelTable(){if(!D.plan)return;const tb=document.querySelector('#kernels tbody');"
    "for(const k of D.plan.kernels){const t=k.tiling_strategy||{},a=k.audit||{};"
    "const tiles=t.block_tile?Object.entries(t.block_tile).map(e=>e[0]+'='+e[1]).join(' '):'';"
    "const tr=el('tr');"
    "[k.name,k.template,(k.nodes||[]).length,tiles+(t.warps?' · '+t.warps+' warps':''),"
    "(k.grid||[]).join('×')+' / '+(k.block||[]).join('×'),fmtBytes(k.smem_bytes),"
    "fmtBytes(t.working_set_bytes),a.registers!==undefined?a.registers+' regs, '+"
    "((a.spill_store_bytes||0)+(a.spill_load_bytes||0))+' B spills'+(a.advisories?', '+a.advisories+"
    "' ptxas advisories ('+a.advisory+')':''):'not compiled',sassCell(a.sass),"
    "fmtBytes(k.hbm_bytes),k.modelled_us!==undefined?k.modelled_us.toFixed(1)+' µs'+(issueBound(k.cost_model)?"
    "' (issue-bound: '+k.cost_model.issue_us.toFixed(1)+' µs to issue)':''):'',t.reason||'']"
    ".forEach(v=>tr.appendChild(el('td',null,String(v))));"
    "tr.onclick=()=>{document.querySelectorAll('tr.sel').forEach(x=>x.classList.remove('sel'));"
    "tr.classList.add('sel');showGraph('after');highlight(k.nodes||[]);};tb.appendChild(tr);}}\n"
    "function showGraph(which){for(const w of ['after','before']){"
    "document.getElementById('g-'+w).style.display=w===which?'':'none';"
    "document.getElementById('b-'+w).classList.toggle('on',w===which);}}\n"
    "function search(){const q=document.getElementById('gq').value;if(!q)return;"
    "const names=new Set();document.querySelectorAll('g[id^=\"node:\"]').forEach(g=>{"
    "const n=g.id.slice(5);if(n.indexOf(q)>=0)names.add(n);});"
    "for(const n in K)if(n.indexOf(q)>=0||K[n].indexOf(q)>=0)names.add(n);"
    "document.getElementById('gcount').textContent=names.size+' nodes';highlight([...names]);}\n"
    "document.getElementById('tq').oninput=traceTable;"
    "document.getElementById('td').onchange=traceTable;"
    "document.getElementById('ts').onchange=traceTable;"
    "document.getElementById('gq').onchange=search;\n"
    "document.getElementById('b-after').onclick=()=>showGraph('after');"
    "document.getElementById('b-before').onclick=()=>showGraph('before');\n"
    "traceTable();kernelTable();showGraph('after');document.body.dataset.rendered='ok';\n";

static const char *bytes(int64_t b, char *buf, size_t n) {
    if (b >= 1024 * 1024) snprintf(buf, n, "%.2f MiB", (double)b / (1024.0 * 1024.0));
    else if (b >= 1024) snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
    else snprintf(buf, n, "%" PRId64 " B", b);
    return buf;
}

static void fact(FILE *out, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fact(FILE *out, const char *label, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fputs("<span><b>", out);
    html_escape(out, label);
    fputs("</b> ", out);
    html_escape(out, buf);
    fputs("</span>", out);
}

static void put_drawing(FILE *out, const drawing *dr) {
    fprintf(out, "<div id=\"%s\">", dr->id);
    if (dr->note[0]) {
        fputs("<p class=\"note\">", out);
        html_escape(out, dr->note);
        fputs("</p>", out);
    }
    if (dr->run.svg) {
        fputs("<div class=\"drawing\">", out);
        fputs(dr->run.svg, out);
        fputs("</div>", out);
    }
    fputs("</div>\n", out);
}

bool mcir_report_write(const mcir_compilation *c, const mcir_report_options *opts, FILE *out,
                       mcir_diag *d) {
    const mcir_graph *g = c->graph;
    double budget = opts && opts->draw_seconds > 0 ? opts->draw_seconds : MCIR_REPORT_DRAW_SECONDS;
    drawing dr[2] = {{.id = "g-after", .what = "after rewriting", .g = c->graph, .plan = c->plan},
                     {.id = "g-before", .what = "as read", .g = c->original}};
    draw_all(dr, 2, budget);
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>mcir: ",
          out);
    html_escape(out, g->name);
    fprintf(out, "</title>\n<style>\n%s</style></head>\n<body>\n<header><h1>", page_css);
    html_escape(out, g->name);
    fputs(" <span class=\"small\" style=\"color:#c9d2dc\">", out);
    html_escape(out, g->path ? g->path : "");
    fputs("</span></h1><div class=\"facts\">", out);
    fact(out, "nodes", "%d before, %d after rewriting", c->nodes_before, c->nodes_after);
    if (c->plan) {
        mcir_plan_cost total;
        mcir_cost_plan(c->plan, &total);
        double comp = total.compulsory_bytes ? (double)total.compulsory_bytes : 1.0;
        char hb[32];
        fact(out, "kernels", "%d for %s (%s)", c->plan->n_kernels, c->target->name,
             c->target->example_gpu);
        if (total.unfused_hbm_bytes)
            fact(out, "traffic (modelled)",
                 "%d launches, %s HBM = %.2fx compulsory (unfused %.2fx)", total.launches,
                 bytes(total.hbm_bytes, hb, sizeof hb), (double)total.hbm_bytes / comp,
                 (double)total.unfused_hbm_bytes / comp);
        else
            fact(out, "traffic (modelled)", "%d launches, %s HBM = %.2fx compulsory",
                 total.launches, bytes(total.hbm_bytes, hb, sizeof hb),
                 (double)total.hbm_bytes / comp);
        fact(out, "time (modelled)", "%.1f us", total.modelled_us);
    }
    if (c->memory) {
        char ab[32], lb[32];
        fact(out, "arena", "%s, lower bound %s (%s)", bytes(c->memory->arena_bytes, ab, sizeof ab),
             bytes(c->memory->lower_bound_bytes, lb, sizeof lb), c->memory->planner);
    }
    if (c->env)
        fact(out, "run", "%s, %.3f s", c->ran_on_emu ? "emulated device" : c->ran_on_gpu ? "GPU" : "CPU reference", c->run_seconds);
    fputs("</div></header>\n<nav><a href=\"#graph\">graph</a><a href=\"#trace-s\">trace</a>"
          "<a href=\"#kernels-s\">kernels</a><a href=\"#arena\">arena</a></nav>\n",
          out);

    /* graphs */
    fputs("<section id=\"graph\"><h2>Graph</h2><div class=\"tabs controls\">"
          "<button id=\"b-after\">after rewriting</button><button id=\"b-before\">as read"
          "</button> <input id=\"gq\" placeholder=\"find nodes by name, Enter\" size=\"28\">"
          "<span id=\"gcount\" class=\"small\"></span></div>\n"
          "<p class=\"legend small\">Boxes of one colour are one kernel (after rewriting); "
          "edges: <span>── materialized</span><span style=\"color:#1c64c8\">- - streaming"
          "</span><span style=\"color:#2b8a3e\">··· recomputable</span>; weights are left "
          "out; hover for names. Click a trace or kernel row to highlight its nodes.</p>\n",
          out);
    put_drawing(out, &dr[0]);
    put_drawing(out, &dr[1]);
    free(dr[0].run.svg);
    free(dr[1].run.svg);
    fputs("</section>\n", out);

    /* trace */
    fputs("<section id=\"trace-s\"><h2>Trace</h2><div class=\"controls\">"
          "<input id=\"tq\" placeholder=\"filter: rule, node, check\" size=\"30\">"
          "<select id=\"td\"><option value=\"\">all decisions</option>"
          "<option>applied</option><option>rejected</option></select>"
          "<select id=\"ts\"><option value=\"\">all stages</option><option>rewrite</option>"
          "<option>plan</option><option>memory</option></select>"
          "<span id=\"tcount\" class=\"small\"></span></div>\n"
          "<table id=\"trace\"><thead><tr><th>#</th><th>stage</th><th>rule</th>"
          "<th>property</th><th>decision</th><th>anchor</th><th>matched</th>"
          "<th>failed checks (measured)</th><th>result</th></tr></thead><tbody></tbody>"
          "</table></section>\n",
          out);

    /* kernels */
    fputs("<section id=\"kernels-s\"><h2>Kernels</h2>", out);
    if (!c->plan)
        fputs("<p class=\"note\">No plan was made.</p>", out);
    fputs("<p class=\"small\">Launch: grid / block. Registers and spills come from ptxas "
          "where NVRTC compiled the kernel. HBM bytes and time are the cost model's "
          "(docs/kernelplan.md), not measurements",
          out);
    if (c->env && c->ran_on_gpu)
        fprintf(out, "; the whole graph ran on the GPU in %.3f s", c->run_seconds);
    fputs(".</p>\n<table id=\"kernels\"><thead><tr><th>kernel</th><th>template</th>"
          "<th>nodes</th><th>tiles</th><th>launch</th><th>dyn. smem</th><th>working set</th>"
          "<th>registers</th><th>SASS</th><th>HBM (model)</th><th>time (model)</th><th>why these tiles</th>"
          "</tr></thead><tbody></tbody></table></section>\n",
          out);

    /* arena */
    fputs("<section id=\"arena\"><h2>Arena</h2>", out);
    if (c->memory && c->plan) {
        char ab[32], lb[32];
        fprintf(out, "<p class=\"small\">Each bar is a buffer: its kernels (x) and its bytes "
                     "(y). %d buffers, %s for a lower bound of %s.</p><div class=\"drawing\">",
                c->memory->n_buffers, bytes(c->memory->arena_bytes, ab, sizeof ab),
                bytes(c->memory->lower_bound_bytes, lb, sizeof lb));
        char *buf = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&buf, &len);
        if (mem && mcir_memplan_write_svg(c->memory, c->plan, mem)) {
            fclose(mem);
            const char *svg = buf ? strstr(buf, "<svg") : NULL;
            if (svg) fputs(svg, out);
        } else if (mem) {
            fclose(mem);
        }
        free(buf);
        fputs("</div>", out);
    } else {
        fputs("<p class=\"note\">No memory plan was made.</p>", out);
    }
    fputs("</section>\n<script type=\"application/json\" id=\"data\">", out);
    write_data(c, out);
    fprintf(out, "</script>\n<script>\n%s</script>\n</body></html>\n", page_js);
    if (ferror(out)) {
        mcir_error(d, (mcir_loc){"mcirc", 0, 0}, "could not write the report");
        return false;
    }
    return true;
}
