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
#include <stdarg.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

#define MAX_DRAWN_NODES 2000

/* Runs dot on graph g; returns the SVG element (malloc'd) or NULL with a
 * reason in why. */
static char *draw(const mcir_graph *g, const mcir_plan *plan, char *why, size_t why_size) {
    /* dot's layout grows much faster than linearly: 8 000 nodes take about
     * a minute, 50 000 several; a drawing that large is unreadable anyway */
    int live = 0;
    for (int i = 0; i < g->n_nodes; i++) live += !g->nodes[i]->dead;
    if (live > MAX_DRAWN_NODES) {
        snprintf(why, why_size, "the graph has %d nodes, more than the %d drawn (Graphviz's "
                 "layout would take minutes); the drawings are left out", live, MAX_DRAWN_NODES);
        return NULL;
    }
    char dot_path[] = "/tmp/mcir-report-XXXXXX";
    int fd = mkstemp(dot_path);
    if (fd < 0) {
        snprintf(why, why_size, "cannot create a temporary file: %s", strerror(errno));
        return NULL;
    }
    FILE *f = fdopen(fd, "w");
    MCIR_ASSERT(f);
    write_dot(g, plan, f);
    fclose(f);
    char svg_path[sizeof dot_path + 8];
    snprintf(svg_path, sizeof svg_path, "%s.svg", dot_path);
    pid_t pid = fork();
    if (pid == 0) {
        /* dot's own warnings are of no use on the page */
        FILE *null = freopen("/dev/null", "w", stderr);
        (void)null;
        execlp("dot", "dot", "-Tsvg", "-o", svg_path, dot_path, (char *)NULL);
        _exit(127);
    }
    int status = -1;
    if (pid > 0) waitpid(pid, &status, 0);
    unlink(dot_path);
    char *svg = NULL;
    if (pid < 0)
        snprintf(why, why_size, "cannot start dot: %s", strerror(errno));
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        snprintf(why, why_size, "Graphviz's dot is not installed (Debian: apt-get install "
                 "graphviz); the drawings are left out");
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        snprintf(why, why_size, "dot failed (status %d)", status);
    else {
        svg = slurp(svg_path, NULL);
        if (!svg) snprintf(why, why_size, "dot wrote no SVG");
    }
    unlink(svg_path);
    if (!svg) return NULL;
    /* the <svg> element only: no XML prolog or DOCTYPE inside HTML */
    char *start = strstr(svg, "<svg");
    if (!start) {
        free(svg);
        snprintf(why, why_size, "dot's output holds no <svg>");
        return NULL;
    }
    memmove(svg, start, strlen(start) + 1);
    return svg;
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
    "function highlight(names){document.querySelectorAll('g.hl').forEach(g=>g.classList.remove('hl'));"
    "let first=null;for(const n of names){const esc=CSS.escape('node:'+n);"
    "document.querySelectorAll('#'+esc).forEach(g=>{g.classList.add('hl');"
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
    "function kernelTable(){if(!D.plan)return;const tb=document.querySelector('#kernels tbody');"
    "for(const k of D.plan.kernels){const t=k.tiling_strategy||{},a=k.audit||{};"
    "const tiles=t.block_tile?Object.entries(t.block_tile).map(e=>e[0]+'='+e[1]).join(' '):'';"
    "const tr=el('tr');"
    "[k.name,k.template,(k.nodes||[]).length,tiles+(t.warps?' · '+t.warps+' warps':''),"
    "(k.grid||[]).join('×')+' / '+(k.block||[]).join('×'),fmtBytes(k.smem_bytes),"
    "fmtBytes(t.working_set_bytes),a.registers!==undefined?a.registers+' regs, '+"
    "((a.spill_store_bytes||0)+(a.spill_load_bytes||0))+' B spills':'not compiled',"
    "fmtBytes(k.hbm_bytes),k.modelled_us!==undefined?k.modelled_us.toFixed(1)+' µs':'',t.reason||'']"
    ".forEach(v=>tr.appendChild(el('td',null,String(v))));"
    "tr.onclick=()=>{document.querySelectorAll('tr.sel').forEach(x=>x.classList.remove('sel'));"
    "tr.classList.add('sel');showGraph('after');highlight(k.nodes||[]);};tb.appendChild(tr);}}\n"
    "function showGraph(which){for(const w of ['after','before']){"
    "document.getElementById('g-'+w).style.display=w===which?'':'none';"
    "document.getElementById('b-'+w).classList.toggle('on',w===which);}}\n"
    "function search(){const q=document.getElementById('gq').value;if(!q)return;"
    "const names=[];document.querySelectorAll('g[id^=\"node:\"]').forEach(g=>{"
    "const n=g.id.slice(5);if(n.indexOf(q)>=0)names.push(n);});"
    "document.getElementById('gcount').textContent=names.length+' nodes';highlight(names);}\n"
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

static void drawing(FILE *out, const char *id, const mcir_graph *g, const mcir_plan *plan,
                    const char *what) {
    fprintf(out, "<div id=\"%s\">", id);
    if (!g) {
        fprintf(out, "<p class=\"note\">The %s graph was not kept.</p></div>\n", what);
        return;
    }
    char why[256] = "";
    char *svg = draw(g, plan, why, sizeof why);
    if (svg) {
        fputs("<div class=\"drawing\">", out);
        fputs(svg, out);
        fputs("</div>", out);
        free(svg);
    } else {
        fputs("<p class=\"note\">", out);
        html_escape(out, why);
        fputs("</p>", out);
    }
    fputs("</div>\n", out);
}

bool mcir_report_write(const mcir_compilation *c, FILE *out, mcir_diag *d) {
    const mcir_graph *g = c->graph;
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
        fact(out, "run", "%s, %.3f s", c->ran_on_gpu ? "GPU" : "CPU reference", c->run_seconds);
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
    drawing(out, "g-after", c->graph, c->plan, "rewritten");
    drawing(out, "g-before", c->original, NULL, "original");
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
          "<th>registers</th><th>HBM (model)</th><th>time (model)</th><th>why these tiles</th>"
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
