/*
 * main.c — the mcirc program: options → mcir_compile → artifacts.
 *
 * Everything mcirc prints or writes is produced in memory first and only
 * published when the whole compilation succeeded: artifacts of -o go to a
 * temporary directory inside DIR and are renamed into place at the end,
 * and --emit output is buffered, so a failure leaves nothing partial.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mcirc/pipeline.h"
#include "mcirc/report.h"

static const char usage_text[] =
    "usage: mcirc [OPTIONS] GRAPH.json|MODEL.onnx\n"
    "\n"
    "Compiles a deep-learning graph through the memory-centric IR: recognises\n"
    "memory properties, rewrites to fused forms, plans kernels and one memory\n"
    "arena, generates CUDA C and compiles it with NVRTC.\n"
    "\n"
    "options:\n"
    "  --emit WHAT          print one artifact on stdout: mcir, trace, plan, memory,\n"
    "                       cuda, ptx, dot, audit (without --emit and -o: a summary)\n"
    "  -o, --out DIR        write every artifact into DIR\n"
    "  --report FILE.html   write a self-contained HTML report of the compilation\n"
    "                       ('-': on stdout)\n"
    "  --report-time S      Graphviz's time for the report's drawings, in all\n"
    "                       (default 8); larger graphs are drawn kernel by kernel\n"
    "  --catalog FILE       load a YAML rule catalog after the built-in one (repeatable)\n"
    "  --no-default-catalog do not load the built-in catalog\n"
    "  --test-catalog FILE  load FILE after the other catalogs and run the rule tests\n"
    "                       it carries (no graph needed); exit 1 if any fails\n"
    "  --no-rewrite         compile without any rewrite (the baseline)\n"
    "  --trace              print the rewrite trace in human form on stderr\n"
    "  --trace=all          the same, with every near miss (a rule that matched part\n"
    "                       of its pattern): where and why the match stopped\n"
    "  --arch sm_XX         NVRTC target: sm_80, sm_86, sm_89, sm_90 (default sm_90)\n"
    "  --planner NAME       memory planner; --planner help lists them\n"
    "  --planner-time S     time budget of the exact planner in seconds (default 10)\n"
    "  --pool NAME=BYTES    a memory pool of that capacity (repeatable, in order of\n"
    "                       preference; BYTES may end in K, M or G; 0 = unbounded)\n"
    "  --verify             run the original and the rewritten graph through the\n"
    "                       reference interpreter and compare every output\n"
    "  --seed N             seed of the generated inputs (default 0)\n"
    "  --run                execute the compiled graph (GPU if present, else CPU)\n"
    "  --device cpu|gpu|emu force where --run executes (emu: the generated kernels\n"
    "                       through the GPU runtime on the CPU emulator, checked)\n"
    "  --alloc pool|lazy|eager  GPU allocation: the planned arena (default),\n"
    "                       allocate at first / free at last use, or all up front\n"
    "  --sync               wait for every kernel, so a GPU fault names its kernel\n"
    "  --graphs             run the kernels as a CUDA graph (captured, then replayed;\n"
    "                       pool or eager allocation, not with --sync)\n"
    "  --watchdog S         a kernel running longer than S seconds is a hang\n"
    "                       (exit 3; default 10 s + 100x its modelled time; 0: none)\n"
    "  --input NAME=FILE    a graph input from a .npy file (repeatable)\n"
    "  --dim NAME=N         size of symbolic dimension NAME for seeded inputs of a\n"
    "                       run (default: its max; --input files give their own)\n"
    "  --dim NAME=MIN..MAX  compile symbolic dimension NAME for this range (an\n"
    "                       ONNX model's dim_param NAME is kept symbolic over it)\n"
    "  --shape NAME=DIMS    pin a dynamic input dimension of an ONNX model,\n"
    "                       e.g. --shape input_ids=1x128 (repeatable)\n"
    "  --tp N               tensor parallelism: the program of each of N ranks (docs/cli.md)\n"
    "  --tp-sp              with --tp: sequence parallelism (reduce_scatter / all_gather\n"
    "                       by rows around residuals and norms, in place of all_reduce)\n"
    "  --exact-math         exponentials, divisions and reciprocal square roots of the\n"
    "                       fused chains in their exact forms (expf, IEEE division), not\n"
    "                       the SFU's approximations (docs/codegen.md)\n"
    "  --threads N          threads of the CPU reference (default: all cores)\n"
    "  --tune               time the top candidate tiles of every matmul and conv\n"
    "                       on the GPU and keep the fastest in the tuning cache\n"
    "                       (later compiles use it); --tune-top N candidates (4)\n"
    "  --version, --help    the usual\n"
    "\n"
    "exit status: 0 success, 1 invalid input or --verify beyond tolerance,\n"
    "2 usage error, 3 toolchain or device failure.\n";

#define EMITS(X) X(MCIR, "mcir") X(TRACE, "trace") X(PLAN, "plan") \
    X(MEMORY, "memory") X(CUDA, "cuda") X(PTX, "ptx") X(DOT, "dot") X(AUDIT, "audit")
typedef enum {
    EMIT_NONE,
#define X(id, name) EMIT_##id,
    EMITS(X)
#undef X
} emit_kind;
static const char *const emit_names[] = {
    NULL,
#define X(id, name) name,
    EMITS(X)
#undef X
};

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "mcirc: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see mcirc --help)\n");
    return MCIR_EXIT_USAGE;
}

static bool parse_bytes(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0) return false;
    int64_t mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1024, end++;
    else if (*end == 'M' || *end == 'm') mult = 1024 * 1024, end++;
    else if (*end == 'G' || *end == 'g') mult = 1024 * 1024 * 1024, end++;
    if (*end) return false;
    return !mcir_mul_overflows(v, mult, out);
}

/* ------------------------------------------------------------- artifacts */

typedef bool (*artifact_fn)(const mcir_compilation *c, FILE *out);

static bool art_mcir(const mcir_compilation *c, FILE *out) {
    return mcir_graph_write_json(c->graph, out);
}
static bool art_trace(const mcir_compilation *c, FILE *out) {
    return mcir_trace_write_jsonl(c->trace, out);
}
static bool art_plan(const mcir_compilation *c, FILE *out) {
    return mcir_plan_write_json(c->plan, out);
}
static bool art_memory(const mcir_compilation *c, FILE *out) {
    return mcir_memplan_write_json(c->memory, c->plan, out);
}
static bool art_svg(const mcir_compilation *c, FILE *out) {
    return mcir_memplan_write_svg(c->memory, c->plan, out);
}
/* The report, drawn once however many times it is written (-o DIR and
 * --report FILE): Graphviz is the slow part. */
static mcir_report_options report_options;
static char *report_text;
static size_t report_len;

static bool render_report(const mcir_compilation *c, mcir_diag *d) {
    if (report_text) return true;
    FILE *mem = open_memstream(&report_text, &report_len);
    MCIR_ASSERT(mem != NULL);
    bool ok = mcir_report_write(c, &report_options, mem, d);
    ok = fclose(mem) == 0 && ok;
    if (!ok) {
        free(report_text);
        report_text = NULL;
    }
    return ok;
}

static bool art_report(const mcir_compilation *c, FILE *out) {
    mcir_diag quiet = mcir_diag_to(NULL);
    return render_report(c, &quiet) && fwrite(report_text, 1, report_len, out) == report_len;
}
static bool art_cuda(const mcir_compilation *c, FILE *out) {
    return mcir_codegen_write_cuda(c->codegen, out);
}
static bool art_ptx(const mcir_compilation *c, FILE *out) {
    return mcir_codegen_write_ptx(c->codegen, out);
}
static bool art_dot(const mcir_compilation *c, FILE *out) {
    return mcir_graph_write_dot(c->graph, out);
}

static bool art_audit(const mcir_compilation *c, FILE *out) {
    return mcir_codegen_write_audit(c->codegen, out);
}

static const artifact_fn emit_fns[] = {NULL,     art_mcir, art_trace, art_plan, art_memory,
                                       art_cuda, art_ptx,  art_dot,   art_audit};

/* One artifact into path through mcir_outfile (docs/cli.md "Output files"). */
static bool write_file(const char *path, const mcir_compilation *c, artifact_fn fn, mcir_diag *d) {
    mcir_outfile o;
    if (!mcir_outfile_open(&o, path, d)) return false;
    if (!fn(c, o.f)) {
        mcir_outfile_discard(&o);
        return false;
    }
    return mcir_outfile_commit(&o, d);
}

/* --report FILE: nothing at FILE until the whole page is written. */
static int write_report(const char *path, const mcir_compilation *c, mcir_diag *d) {
    if (!render_report(c, d)) return MCIR_EXIT_INVALID;
    return mcir_outfile_write(path, report_text, report_len, d) ? MCIR_EXIT_OK : MCIR_EXIT_INVALID;
}

/* dir/name into buf; false if it does not fit. */
static bool join_path(char *buf, size_t n, const char *dir, const char *name,
                      const char *suffix) {
    int k = snprintf(buf, n, "%s/%s%s", dir, name, suffix);
    return k >= 0 && (size_t)k < n;
}

static void remove_tree(const char *path) {
    DIR *dir = opendir(path);
    if (dir) {
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char sub[PATH_MAX];
            if (join_path(sub, sizeof sub, path, e->d_name, "")) remove_tree(sub);
        }
        closedir(dir);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static bool mkdir_p(const char *path) {
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return false;
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0777) && errno != EEXIST) return false;
            *p = '/';
        }
    return !mkdir(buf, 0777) || errno == EEXIST;
}

/* Moves every file of src (one level of subdirectories) into dst, each by
 * mcir_outfile_publish: a link in dst is written through, not replaced. */
static bool publish_tree(const char *src, const char *dst, mcir_diag *d) {
    DIR *dir = opendir(src);
    if (!dir) return false;
    bool ok = true;
    struct dirent *e;
    while (ok && (e = readdir(dir))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char from[PATH_MAX], to[PATH_MAX];
        struct stat st;
        if (!join_path(from, sizeof from, src, e->d_name, "") ||
            !join_path(to, sizeof to, dst, e->d_name, "")) {
            mcir_error(d, (mcir_loc){dst, 0, 0}, "cannot move the artifacts into place: %s",
                       strerror(ENAMETOOLONG));
            ok = false;
        } else if (lstat(from, &st)) {
            mcir_error(d, (mcir_loc){from, 0, 0}, "cannot move into place: %s", strerror(errno));
            ok = false;
        } else if (S_ISDIR(st.st_mode)) {
            ok = mkdir_p(to) && publish_tree(from, to, d);
            if (!ok && d->n_errors == 0)
                mcir_error(d, (mcir_loc){to, 0, 0}, "cannot create the directory: %s",
                           strerror(errno));
        } else {
            ok = mcir_outfile_publish(from, to, d);
        }
    }
    closedir(dir);
    return ok;
}

/* The file name of an output: its tensor name, with characters that
 * cannot be in a file name ('/', and a leading '.') replaced by '_'. */
static const char *output_file_stem(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s", name);
    for (char *p = buf; *p; p++)
        if (*p == '/' || (p == buf && *p == '.')) *p = '_';
    return buf;
}

/* Writes every artifact (and --run outputs) into dir, atomically. */
/* Whether the ranks of a run hold different values of output t. */
static bool ranks_differ(mcir_env *e, const mcir_tensor *t) {
    int R = mcir_env_ranks(e);
    if (R <= 1) return false;
    size_t bytes = (size_t)mcir_tensor_bytes(t);
    unsigned char *a = malloc(bytes + 1), *b = malloc(bytes + 1);
    MCIR_ASSERT(a && b);
    mcir_env_select_rank(e, 0);
    bool differ = !mcir_env_get_raw(e, t, a);
    for (int r = 1; !differ && r < R; r++) {
        mcir_env_select_rank(e, r);
        differ = !mcir_env_get_raw(e, t, b) || memcmp(a, b, bytes) != 0;
    }
    mcir_env_select_rank(e, -1);
    free(a);
    free(b);
    return differ;
}

static int write_out_dir(const char *dir, const mcir_compilation *c, mcir_diag *d) {
    if (!mkdir_p(dir)) {
        mcir_error(d, (mcir_loc){dir, 0, 0}, "cannot create the output directory: %s",
                   strerror(errno));
        return MCIR_EXIT_INVALID;
    }
    char tmp[PATH_MAX];
    if (!join_path(tmp, sizeof tmp, dir, ".mcirc-XXXXXX", "") || !mkdtemp(tmp)) {
        mcir_error(d, (mcir_loc){dir, 0, 0}, "cannot write into the output directory: %s",
                   strerror(errno));
        return MCIR_EXIT_INVALID;
    }
    struct {
        const char *file;
        artifact_fn fn;
        bool present;
    } files[] = {
        {"trace.jsonl", art_trace, true},
        {"plan.json", art_plan, c->plan != NULL},
        {"memory.json", art_memory, c->memory != NULL},
        {"memory.svg", art_svg, c->memory != NULL},
        {"graph.dot", art_dot, true},
        {"report.html", art_report, true},
    };
    char path[PATH_MAX];
    /* the rewritten graph, its large in-memory weights as weights/NAME.npy */
    bool ok = join_path(path, sizeof path, tmp, "graph.mcir.json", "");
    mcir_outfile f;
    ok = ok && mcir_outfile_open(&f, path, d);
    if (ok && !mcir_graph_write_json_split(c->graph, f.f, tmp, "weights", 64, d)) {
        mcir_outfile_discard(&f);
        ok = false;
    } else if (ok) {
        ok = mcir_outfile_commit(&f, d);
    }
    for (size_t i = 0; ok && i < sizeof files / sizeof files[0]; i++) {
        if (!files[i].present) continue;
        ok = join_path(path, sizeof path, tmp, files[i].file, "") &&
             write_file(path, c, files[i].fn, d);
    }
    if (ok && c->codegen) ok = mcir_codegen_write_dir(c->codegen, tmp, d);
    if (ok && c->env) {
        const mcir_graph *run = mcir_compilation_run_graph(c);
        for (int i = 0; ok && i < run->n_outputs; i++) {
            const mcir_tensor *t = run->outputs[i];
            size_t n = (size_t)mcir_tensor_numel(t), es = mcir_dtype_size(t->dtype);
            char stem[256], suffix[32];
            unsigned char *raw = malloc(n * es + 1);
            MCIR_ASSERT(raw);
            /* ranks whose values differ: NAME.rankR.npy each; one process
             * a rank: its own, NAME.rankR.npy */
            int R = ranks_differ(c->env, t) ? mcir_env_ranks(c->env) : 1;
            for (int r = 0; ok && r < R; r++) {
                if (R > 1) mcir_env_select_rank(c->env, r);
                MCIR_ASSERT(mcir_env_get_raw(c->env, t, raw));   /* exact, integers too */
                if (c->launch_rank >= 0) snprintf(suffix, sizeof suffix, ".rank%d.npy", c->launch_rank);
                else snprintf(suffix, sizeof suffix, R > 1 ? ".rank%d.npy" : ".npy", r);
                ok = join_path(path, sizeof path, tmp, output_file_stem(t->name, stem, sizeof stem),
                               suffix) &&
                     mcir_npy_write(path, t->dtype, t->rank, t->shape, raw, d);
            }
            mcir_env_select_rank(c->env, -1);
            free(raw);
        }
    }
    if (!ok) {
        if (d->n_errors == 0)
            mcir_error(d, (mcir_loc){dir, 0, 0}, "cannot write the artifacts: %s",
                       strerror(errno));
        remove_tree(tmp);
        return MCIR_EXIT_INVALID;
    }
    ok = publish_tree(tmp, dir, d);
    remove_tree(tmp);
    if (!ok) return MCIR_EXIT_INVALID;
    return MCIR_EXIT_OK;
}

/* --------------------------------------------------------------- summary */

static void human_bytes(int64_t b, char *buf, size_t n) {
    if (b >= 1024 * 1024) snprintf(buf, n, "%.2f MiB", (double)b / (1024.0 * 1024.0));
    else if (b >= 1024) snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
    else snprintf(buf, n, "%" PRId64 " B", b);
}

static void print_summary(const mcir_compilation *c, FILE *out) {
    const mcir_graph *g = c->graph;
    fprintf(out, "%s (%s)\n", g->name, g->path);
    /* fusions first: annotations and in-place marks are bookkeeping */
    const mcir_rewrite_stats *rs = &c->rewrite_stats;
    int fusions = rs->structural + rs->groups;
    if (fusions)
        fprintf(out, "  nodes    %d before, %d after rewriting (%d fusions: %d ops fused, %d "
                "groups; %d rewrites applied)\n", c->nodes_before, c->nodes_after, fusions,
                rs->structural, rs->groups, c->rewrites_applied);
    else
        fprintf(out, "  nodes    %d before, %d after rewriting (0 fusions; %d rewrites applied)\n",
                c->nodes_before, c->nodes_after, c->rewrites_applied);
    if (c->plan) {
        int launches = 0;
        for (int i = 0; i < c->plan->n_kernels; i++)
            launches += c->plan->kernels[i].tpl != MCIR_TEMPLATE_ALIAS;
        fprintf(out, "  kernels  %d for %s (%s)\n", launches, c->target->name,
                c->target->example_gpu);
        /* the cost model (docs/kernelplan.md): modelled, not measured */
        mcir_plan_cost cost;
        mcir_cost_plan(c->plan, &cost);
        char hbm[32], unfused[64] = "";
        human_bytes(cost.hbm_bytes, hbm, sizeof hbm);
        double compulsory = cost.compulsory_bytes > 0 ? (double)cost.compulsory_bytes : 1.0;
        if (cost.unfused_hbm_bytes > 0)
            snprintf(unfused, sizeof unfused, " (unfused %.2fx)",
                     (double)cost.unfused_hbm_bytes / compulsory);
        char bound[48] = "";   /* kernels the issue rate bounds (cost.c, the SASS audit's figures) */
        if (cost.issue_bound)
            snprintf(bound, sizeof bound, " (%d issue-bound)", cost.issue_bound);
        fprintf(out, "  traffic  %d launches, %s HBM = %.2fx compulsory%s, modelled %.1f us on %s%s%s\n",
                cost.launches, hbm, (double)cost.hbm_bytes / compulsory, unfused,
                cost.modelled_us, c->target->name, bound,
                g->n_dims && mcir_graph_is_dynamic(g) ? " (at the largest sizes)" : "");
        if (c->has_cost_at_run) {   /* the same kernels at the run's sizes */
            const mcir_plan_cost *r = &c->cost_at_run;
            human_bytes(r->hbm_bytes, hbm, sizeof hbm);
            compulsory = r->compulsory_bytes > 0 ? (double)r->compulsory_bytes : 1.0;
            fprintf(out, "  traffic  at %s: %d launches, %s HBM = %.2fx compulsory, modelled %.1f us on %s\n",
                    c->run_binding, r->launches, hbm, (double)r->hbm_bytes / compulsory, r->modelled_us,
                    c->target->name);
        }
    }
    if (c->memory) {
        char a[32], lb[32];
        human_bytes(c->memory->arena_bytes, a, sizeof a);
        human_bytes(c->memory->lower_bound_bytes, lb, sizeof lb);
        double ratio = c->memory->lower_bound_bytes
                           ? (double)c->memory->arena_bytes / (double)c->memory->lower_bound_bytes
                           : 1.0;
        fprintf(out, "  arena    %s for %d buffers, lower bound %s (%.3fx, planner %s)\n", a,
                c->memory->n_buffers, lb, ratio, c->memory->planner);
    }
    if (g->ranks > 1) {   /* per rank (docs/cli.md "Graphs with ranks") */
        int64_t wbytes = 0;
        for (int i = 0; i < g->n_weights; i++) wbytes += mcir_tensor_bytes(g->weights[i]);
        char w[32];
        human_bytes(wbytes, w, sizeof w);
        fprintf(out, "  ranks    %d%s: per rank the kernels and arena above, weights %s", g->ranks,
                c->tp_collectives ? mcir_arena_printf(g->arena, " (--tp: %d collectives inserted)", c->tp_collectives)
                                  : "", w);
        int counts[3] = {0, 0, 0};
        double link = 0, us = 0;
        for (int i = 0; c->plan && i < c->plan->n_kernels; i++) {
            const mcir_kernel_plan *k = &c->plan->kernels[i];
            if (k->tpl != MCIR_TEMPLATE_COLLECTIVE) continue;
            double b, t;
            mcir_cost_collective(k, c->target, &b, &t);
            link += b;
            us += t;
            counts[k->anchor->op == MCIR_OP_ALL_REDUCE ? 0 : k->anchor->op == MCIR_OP_ALL_GATHER ? 1 : 2]++;
        }
        if (counts[0] + counts[1] + counts[2]) {
            char lb[32];
            human_bytes((int64_t)link, lb, sizeof lb);
            fprintf(out, "; collectives:");
            static const char *const names[] = {"all_reduce", "all_gather", "reduce_scatter"};
            for (int k = 0, first = 1; k < 3; k++)
                if (counts[k]) {
                    fprintf(out, "%s %d %s", first ? "" : ",", counts[k], names[k]);
                    first = 0;
                }
            fprintf(out, ", %s over the links per rank, modelled %.1f us on %s (%.0f GB/s)", lb, us,
                    c->target->link, c->target->link_gbps);
            mcir_plan_cost pc;
            mcir_cost_plan(c->plan, &pc);
            if (pc.overlap_us > 0) fprintf(out, ", %.1f us of it beside the kernels", pc.overlap_us);
        }
        fputc('\n', out);
    }
    if (g->n_dims) {   /* what a symbolic graph's compilation is (docs/cli.md) */
        fprintf(out, "  dims    ");
        for (int k = 0; k < g->n_dims; k++)
            fprintf(out, "%s %s in [%" PRId64 ", %" PRId64 "]", k ? "," : "", g->dims[k].name,
                    g->dims[k].min, g->dims[k].max);
        fprintf(out, "; shapes checked for every size, plan and arena at the largest");
        if (mcir_graph_is_dynamic(g) && c->codegen) {   /* kernels that take the dims at launch */
            int n = 0, generic = 0;
            const char *first = NULL;
            for (int i = 0; i < mcir_codegen_kernel_count(c->codegen); i++) {
                if (!mcir_codegen_kernel_source(c->codegen, i)) continue;
                n++;
                if (mcir_codegen_kernel_generic(c->codegen, i, NULL)) generic++;
                else if (!first) first = c->plan->kernels[i].name;
            }
            fprintf(out, "; %d of %d kernels size-generic", generic, n);
            if (first) fprintf(out, " (not: %s%s)", first, n - generic > 1 ? ", ..." : "");
        }
        fputc('\n', out);
    }
    mcir_compile_stats es = {0};
    if (c->codegen && c->ran_on_emu) mcir_codegen_emu_compile_stats(c->codegen, &es);
    if (es.kernels > 0)   /* the emulated device's modules (host C++), cached like cubins */
        fprintf(out, "  emu      %d compiles (%d kernels, %d distinct sources), %.2f s, %d cache hits\n",
                es.nvrtc_compiles, es.kernels, es.units, es.seconds, es.cache_hits);
    mcir_compile_stats cs = {0};
    if (c->codegen) mcir_codegen_compile_stats(c->codegen, &cs);
    if (cs.kernels > 0) {   /* compiled: -o with NVRTC, --run on a GPU */
        char threads[32] = "";
        if (cs.threads > 0)
            snprintf(threads, sizeof threads, " on %d thread%s", cs.threads, cs.threads == 1 ? "" : "s");
        fprintf(out, "  nvrtc    %d compiles (%d kernels, %d distinct sources), %.2f s%s, %d cache hits\n",
                cs.nvrtc_compiles, cs.kernels, cs.units, cs.seconds, threads, cs.cache_hits);
    }
}

static void print_run(const mcir_compilation *c, const char *out_dir, FILE *out) {
    fprintf(out, "  run      %s, %.3f s",
            c->ran_on_gpu ? c->gpu_stats.device_name : "cpu reference", c->run_seconds);
    if (c->ran_on_gpu)   /* scripts/gpu-check.sh compares the --alloc modes by this */
        fprintf(out, ", peak %" PRId64 " device bytes", c->gpu_stats.peak_device_bytes);
    const mcir_graph *run = mcir_compilation_run_graph(c);
    if (run->n_dims) {
        char b[256];
        fprintf(out, " at %s", mcir_dims_binding_str(run, b, sizeof b));
    }
    if (c->ran_on_gpu && c->gpu_stats.graph) fputs(", as a CUDA graph", out);
    fputc('\n', out);
    for (int i = 0; i < run->n_outputs; i++) {
        const mcir_tensor *t = run->outputs[i];
        int R = ranks_differ(c->env, t) ? mcir_env_ranks(c->env) : 1;
        for (int r = 0; r < R; r++) {
            if (R > 1) mcir_env_select_rank(c->env, r);
            const float *v = mcir_env_get(c->env, t);
            int64_t n = mcir_tensor_numel(t);
            double sum = 0, amax = 0;
            for (int64_t k = 0; k < n; k++) {
                sum += v[k];
                if (fabsf(v[k]) > amax) amax = fabsf(v[k]);
            }
            char shape[128], rank[32] = "";
            int which = c->launch_rank >= 0 ? c->launch_rank : R > 1 ? r : -1;
            if (which >= 0) snprintf(rank, sizeof rank, " (rank %d)", which);
            fprintf(out, "  output   %s%s %s %s: mean %.6g, max |x| %.6g", t->name, rank,
                    mcir_dtype_name(t->dtype), mcir_shape_str(t, shape, sizeof shape),
                    n ? sum / (double)n : 0.0, amax);
            char stem[256];
            if (out_dir)
                fprintf(out, " -> %s/%s%s", out_dir, output_file_stem(t->name, stem, sizeof stem),
                        which >= 0 ? mcir_arena_printf(c->graph->arena, ".rank%d.npy", which) : ".npy");
            fputc('\n', out);
        }
        mcir_env_select_rank(c->env, -1);
    }
    bool device = c->ran_on_gpu && c->graph->ranks > 1;
    char ovl[160] = "";
    if (device && c->gpu_stats.overlapped >= 0)
        snprintf(ovl, sizeof ovl, "; the collectives on a second stream, %d kernel%s ran beside one",
                 c->gpu_stats.overlapped, c->gpu_stats.overlapped == 1 ? "" : "s");
    if (mcir_env_ranks(c->env) > 1)
        fprintf(out, "  ranks    %d, run in lockstep in one process%s\n", mcir_env_ranks(c->env), ovl);
    else if (c->launch_rank >= 0)
        fprintf(out, "  ranks    %d, one process a rank: this is rank %d (rendezvous on %s)\n", c->graph->ranks,
                c->launch_rank, c->launch_where);
}

static void print_verify(const mcir_compilation *c, FILE *out) {
    for (int i = 0; i < c->n_verify; i++) {
        const mcir_verify_result *v = &c->verify[i];
        char rank[32] = "";
        if (v->rank >= 0) snprintf(rank, sizeof rank, " (rank %d)", v->rank);
        fprintf(out, "verify   %s%s%s%s%s: max abs err %.3g, max rel err %.3g (tolerance %.0e) %s\n", v->output,
                v->device ? " (" : "", v->device ? v->device : "", v->device ? " vs the original graph)" : "", rank,
                v->max_abs, v->max_rel, v->tolerance, v->ok ? "ok" : "FAIL");
    }
}

/* ------------------------------------------------------------------ main */

static const char *take_value(int argc, char **argv, int *i, const char *opt) {
    size_t n = strlen(opt);
    if (!strncmp(argv[*i], opt, n) && argv[*i][n] == '=') return argv[*i] + n + 1;
    if (*i + 1 >= argc) return NULL;
    return argv[++*i];
}

/* Whether file holds the built-in catalog's text (catalog/default.yaml, or
 * the package's share/mcir/catalog/default.yaml). */
static bool is_builtin_catalog(const char *file) {
    FILE *f = fopen(file, "rb");
    if (!f) return false;
    size_t n = mcir_catalog_default_yaml_size;
    char *text = malloc(n + 1);
    MCIR_ASSERT(text);
    bool same = fread(text, 1, n + 1, f) == n && !memcmp(text, mcir_catalog_default_yaml, n);
    free(text);
    fclose(f);
    return same;
}

/* STEM.tests.yaml beside the catalog STEM.yaml, where its rule tests live
 * (catalog/default.tests.yaml); malloc'd, NULL when there is none. */
static char *tests_beside(const char *file) {
    size_t n = strlen(file);
    if (n < 5 || strcmp(file + n - 5, ".yaml") || (n >= 11 && !strcmp(file + n - 11, ".tests.yaml")))
        return NULL;
    char *path = malloc(n + 7);
    MCIR_ASSERT(path);
    memcpy(path, file, n - 5);
    memcpy(path + n - 5, ".tests.yaml", sizeof ".tests.yaml");   /* n - 5 + 12 = n + 7 */
    if (access(path, R_OK) != 0) {
        free(path);
        return NULL;
    }
    return path;
}

/* How many of the built-in catalog's properties file declares again: all
 * of them for a copy of the built-in catalog (edited or not). */
static int builtin_redeclared(const mcir_catalog *builtin, const char *file) {
    mcir_catalog *alone = mcir_catalog_new();
    FILE *null = fopen("/dev/null", "w");
    mcir_diag quiet = mcir_diag_to(null);
    int n = 0;
    if (mcir_catalog_load_file(alone, file, &quiet))
        for (int i = 0; i < mcir_catalog_n_properties(alone); i++)
            n += mcir_catalog_find_property(builtin, mcir_catalog_property(alone, i)->name) != NULL;
    if (null) fclose(null);
    mcir_catalog_free(alone);
    return n;
}

/* --test-catalog: the catalogs as a compile loads them, then FILE, whose
 * rule tests run against all of them. FILE may be the built-in catalog
 * itself (not loaded twice), and a catalog whose tests are in
 * STEM.tests.yaml beside it runs those. */
static int test_catalog(const mcir_options *o, const char *file) {
    mcir_diag d = mcir_diag_stderr();
    mcir_catalog *cat = mcir_catalog_new();
    bool ok = o->no_default_catalog || mcir_catalog_load_default(cat, &d);
    int builtin_properties = o->no_default_catalog ? 0 : mcir_catalog_n_properties(cat);
    for (int i = 0; ok && i < o->n_catalogs; i++) ok = mcir_catalog_load_file(cat, o->catalogs[i], &d);
    bool builtin = ok && !o->no_default_catalog && is_builtin_catalog(file);
    char *beside = ok ? tests_beside(file) : NULL;
    int status = MCIR_EXIT_INVALID;
    if (builtin && !beside) {
        mcir_error(&d, (mcir_loc){file, 0, 0},
                   "this is the built-in catalog, which mcirc loads already; its rule tests are "
                   "catalog/default.tests.yaml in the source tree (mcirc --test-catalog "
                   "catalog/default.tests.yaml)");
        ok = false;
    } else if (ok && !builtin && !o->no_default_catalog) {
        int again = builtin_redeclared(cat, file);
        if (again > 0 && again == builtin_properties) {
            mcir_error(&d, (mcir_loc){file, 0, 0},
                       "declares the built-in catalog's %d properties again: a copy of the "
                       "built-in catalog is tested without it (mcirc --no-default-catalog "
                       "--test-catalog %s)%s%s", again, file, beside ? "; its tests: " : "",
                       beside ? beside : "");
            ok = false;
        }
    }
    if (ok && !builtin) ok = mcir_catalog_load_file(cat, file, &d);
    const char *tests = file;
    int run = 0, failed = 0;
    if (ok && !builtin)
        failed = mcir_rule_tests_run(cat, file, mcir_target_find(o->arch), stdout, &run, &d);
    if (ok && run == 0 && beside) {   /* the tests beside it */
        tests = beside;
        fprintf(stderr, "%s: its rule tests are in %s\n", file, beside);
        ok = mcir_catalog_load_file(cat, beside, &d);
        if (ok) failed = mcir_rule_tests_run(cat, beside, mcir_target_find(o->arch), stdout, &run, &d);
    }
    if (ok) {
        if (run == 0)
            mcir_error(&d, (mcir_loc){tests, 0, 0}, "no rule tests ('tests:') in this file");
        else
            printf("%d passed, %d failed\n", run - failed, failed);
        if (run > 0 && failed == 0) status = MCIR_EXIT_OK;
    }
    free(beside);
    mcir_catalog_free(cat);
    return status;
}

static bool is_opt(const char *arg, const char *opt) {
    size_t n = strlen(opt);
    return !strncmp(arg, opt, n) && (arg[n] == 0 || arg[n] == '=');
}

/* What the command line asks for beyond mcir_options. */
typedef struct cli_args {
    mcir_options o;              /* its arrays have room for argc entries */
    const char **catalogs;       /* o's arrays, writable */
    mcir_input_file *inputs;
    mcir_memplan_pool *pools;
    mcir_onnx_shape *shapes;
    mcir_dim_option *dims;
    emit_kind emit;
    const char *out_dir, *test_file, *report_path;
    bool trace_human;
    bool finished;               /* --help, --version, --planner help: printed */
} cli_args;

/* Parses the options and the graph into cl; MCIR_EXIT_OK, or the usage
 * error's status, reported on stderr. */
static int parse_args(int argc, char **argv, cli_args *cl) {
    mcir_options *o = &cl->o;
#define VALUE(opt)                                                  \
    const char *val = take_value(argc, argv, &i, opt);              \
    if (!val) {                                                     \
        return usage_error("option '%s' needs a value", opt);     \
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            cl->finished = true;
            return MCIR_EXIT_OK;
        } else if (!strcmp(a, "--version")) {
            printf("mcirc %s\n", MCIR_VERSION_STRING);
            cl->finished = true;
            return MCIR_EXIT_OK;
        } else if (is_opt(a, "--emit")) {
            VALUE("--emit");
            cl->emit = EMIT_NONE;
            for (int k = 1; k < (int)(sizeof emit_names / sizeof *emit_names); k++)
                if (!strcmp(val, emit_names[k])) cl->emit = (emit_kind)k;
            if (cl->emit == EMIT_NONE) {
                return usage_error("--emit: unknown artifact '%s' (mcir, trace, plan, "
                                     "memory, cuda, ptx, dot, audit)", val);
            }
        } else if (is_opt(a, "-o") || is_opt(a, "--out")) {
            VALUE(a[1] == 'o' ? "-o" : "--out");
            cl->out_dir = val;
        } else if (is_opt(a, "--catalog")) {
            VALUE("--catalog");
            o->catalogs[o->n_catalogs++] = val;
        } else if (is_opt(a, "--report")) {
            VALUE("--report");
            cl->report_path = val;
        } else if (is_opt(a, "--report-time")) {
            VALUE("--report-time");
            char *end;
            report_options.draw_seconds = strtod(val, &end);
            if (*end || !(report_options.draw_seconds > 0) || report_options.draw_seconds > 86400) {
                return usage_error("--report-time: '%s' is not a positive number of seconds", val);
            }
        } else if (is_opt(a, "--test-catalog")) {
            VALUE("--test-catalog");
            cl->test_file = val;
        } else if (!strcmp(a, "--no-default-catalog")) {
            o->no_default_catalog = true;
        } else if (!strcmp(a, "--no-rewrite")) {
            o->no_rewrite = true;
        } else if (!strcmp(a, "--trace") || !strcmp(a, "--trace=all")) {
            cl->trace_human = true;
            o->trace_all = a[7] == '=';
        } else if (is_opt(a, "--arch")) {
            VALUE("--arch");
            if (!mcir_target_find(val)) {
                return usage_error("--arch: unknown architecture '%s' (sm_80, sm_86, "
                                     "sm_89, sm_90)", val);
            }
            o->arch = val;
        } else if (is_opt(a, "--planner")) {
            VALUE("--planner");
            if (!strcmp(val, "help")) {
                mcir_memplan_planners_print(stdout);
                cl->finished = true;
                return MCIR_EXIT_OK;
            }
            if (!mcir_memplan_planner_find(val)) {
                return usage_error("--planner: unknown planner '%s'; --planner help "
                                     "lists them", val);
            }
            o->planner = val;
        } else if (is_opt(a, "--planner-time")) {
            VALUE("--planner-time");
            char *end;
            o->planner_time_limit_s = strtod(val, &end);
            if (*end || !(o->planner_time_limit_s > 0)) {
                return usage_error("--planner-time: '%s' is not a positive number", val);
            }
        } else if (is_opt(a, "--pool")) {
            VALUE("--pool");
            const char *eq = strchr(val, '=');
            int64_t cap;
            if (!eq || eq == val || !parse_bytes(eq + 1, &cap)) {
                return usage_error("--pool: '%s' is not NAME=BYTES", val);
            }
            o->pools[o->n_pools].name = strndup(val, (size_t)(eq - val));
            o->pools[o->n_pools++].capacity = cap;
        } else if (!strcmp(a, "--verify")) {
            o->verify = true;
        } else if (is_opt(a, "--seed")) {
            VALUE("--seed");
            char *end;
            errno = 0;
            o->seed = strtoull(val, &end, 10);
            if (errno || *end || !*val || *val == '-') {
                return usage_error("--seed: '%s' is not a non-negative integer", val);
            }
        } else if (!strcmp(a, "--run")) {
            o->run = true;
        } else if (is_opt(a, "--device")) {
            VALUE("--device");
            if (!strcmp(val, "cpu")) o->device = MCIR_DEVICE_CPU;
            else if (!strcmp(val, "gpu")) o->device = MCIR_DEVICE_GPU;
            else if (!strcmp(val, "emu")) o->device = MCIR_DEVICE_EMU;
            else {
                return usage_error("--device: '%s' is not cpu, gpu or emu", val);
            }
        } else if (!strcmp(a, "--sync")) {
            mcir_gpu_set_sync(true);
        } else if (!strcmp(a, "--graphs")) {
            mcir_gpu_set_graphs(true);
        } else if (is_opt(a, "--watchdog")) {
            VALUE("--watchdog");
            char *end;
            errno = 0;
            double sec = strtod(val, &end);
            if (errno || *end || !*val || !(sec >= 0) || sec > 1e7) {
                return usage_error("--watchdog: '%s' is not a number of seconds (0: wait forever)", val);
            }
            mcir_gpu_set_watchdog(sec);
        } else if (is_opt(a, "--alloc")) {
            VALUE("--alloc");
            if (!mcir_alloc_mode_parse(val, &o->alloc)) {
                return usage_error("--alloc: '%s' is not pool, lazy or eager", val);
            }
        } else if (is_opt(a, "--input")) {
            VALUE("--input");
            const char *eq = strchr(val, '=');
            if (!eq || eq == val || !eq[1]) {
                return usage_error("--input: '%s' is not NAME=FILE.npy", val);
            }
            (cl->inputs)[o->n_inputs].name = strndup(val, (size_t)(eq - val));
            (cl->inputs)[o->n_inputs++].path = eq + 1;
        } else if (is_opt(a, "--dim")) {
            VALUE("--dim");
            mcir_dim_option x;
            if (!mcir_dim_option_parse(val, &x)) {
                return usage_error("--dim: '%s' is not NAME=N or NAME=MIN..MAX (positive "
                                   "integers, MIN <= MAX)", val);
            }
            for (int k = 0; k < o->n_dims; k++)
                if (!strcmp(cl->dims[k].name, x.name) &&
                    ((x.has_value && cl->dims[k].has_value) || (x.has_range && cl->dims[k].has_range))) {
                    free((char *)x.name);
                    return usage_error("--dim: dimension '%s' given twice", cl->dims[k].name);
                }
            cl->dims[o->n_dims++] = x;
        } else if (is_opt(a, "--shape")) {
            VALUE("--shape");
#ifndef MCIR_HAVE_ONNX
            return usage_error("--shape %s: this mcirc was built without ONNX import", val);
#endif
            if (!mcir_onnx_parse_shape(val, &cl->shapes[o->n_shapes])) {
                return usage_error("--shape: '%s' is not NAME=D1xD2x...", val);
            }
            o->n_shapes++;
        } else if (!strcmp(a, "--tune")) {
            o->tune = true;
        } else if (is_opt(a, "--tune-top")) {
            VALUE("--tune-top");
            char *end;
            long n = strtol(val, &end, 10);
            if (*end || n < 1 || n > 64) {
                return usage_error("--tune-top: '%s' is not a count from 1 to 64", val);
            }
            o->tune_top = (int)n;
        } else if (is_opt(a, "--tp")) {
            VALUE("--tp");
            char *end;
            long n = strtol(val, &end, 10);
            if (*end || !*val || n < 1 || n > MCIR_MAX_RANKS)
                return usage_error("--tp: '%s' is not a number of ranks (1 to 1024)", val);
            o->tp = (int)n;
        } else if (!strcmp(a, "--tp-sp")) {
            o->tp_sp = true;
        } else if (!strcmp(a, "--exact-math")) {
            o->exact_math = true;
        } else if (is_opt(a, "--threads")) {
            VALUE("--threads");
            char *end;
            long n = strtol(val, &end, 10);
            if (*end || n < 1 || n > 1024) {
                return usage_error("--threads: '%s' is not a thread count", val);
            }
            mcir_set_threads((int)n);
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option '%s'", a);
        } else if (o->graph_path) {
            return usage_error("more than one graph given ('%s')", a);
        } else {
            o->graph_path = a;
        }
    }
#undef VALUE
    if (cl->test_file) {
        if (o->graph_path) return usage_error("--test-catalog takes no graph ('%s')", o->graph_path);
        return MCIR_EXIT_OK;
    }
    if (!o->graph_path) return usage_error("no graph given%s", "");
    /* '-' is stdout for an option that writes one file (docs/cli.md) */
    if (cl->out_dir && !strcmp(cl->out_dir, "-"))
        return usage_error("-o writes a directory of files; '-' (stdout) is for options that "
                           "write one file, such as --report -%s", "");
    if (cl->report_path && cl->emit != EMIT_NONE && mcir_path_is_stdout(cl->report_path))
        return usage_error("--emit and --report %s both want stdout", cl->report_path);
    if (o->device != MCIR_DEVICE_AUTO && !o->run) return usage_error("--device needs --run%s", "");
    if (o->tp_sp && o->tp < 2) return usage_error("--tp-sp needs --tp N with N of 2 or more%s", "");
    return MCIR_EXIT_OK;
}

int main(int argc, char **argv) {
    cli_args cl = {.o = mcir_options_default()};
    cl.catalogs = calloc((size_t)argc, sizeof *cl.catalogs);
    cl.inputs = calloc((size_t)argc, sizeof *cl.inputs);
    cl.pools = calloc((size_t)argc, sizeof *cl.pools);
    cl.shapes = calloc((size_t)argc, sizeof *cl.shapes);
    cl.dims = calloc((size_t)argc, sizeof *cl.dims);
    MCIR_ASSERT(cl.catalogs && cl.inputs && cl.pools && cl.shapes && cl.dims);
    cl.o.dims = cl.dims;
    cl.o.catalogs = cl.catalogs;
    cl.o.inputs = cl.inputs;
    cl.o.pools = cl.pools;
    cl.o.shapes = cl.shapes;
    int status = parse_args(argc, argv, &cl);
    mcir_options o = cl.o;
    emit_kind emit = cl.emit;
    const char *out_dir = cl.out_dir, *report_path = cl.report_path;
    if (status != MCIR_EXIT_OK || cl.finished) goto done;
    if (cl.test_file) {
        status = test_catalog(&o, cl.test_file);
        goto done;
    }

    /* What the artifacts asked for decides which stages run. */
    bool nvrtc = mcir_nvrtc_available(NULL, 0);
    o.want_plan = emit == EMIT_PLAN || emit == EMIT_MEMORY || out_dir ||
                  (emit == EMIT_NONE && !out_dir);
    o.want_cuda = emit == EMIT_CUDA || emit == EMIT_PTX || emit == EMIT_AUDIT || out_dir;
    o.want_ptx = emit == EMIT_PTX || emit == EMIT_AUDIT || (out_dir && nvrtc);
    /* the artifacts that show the audit read the SASS too (nvdisasm) */
    o.want_sass = emit == EMIT_AUDIT || out_dir || report_path;
    if (report_path || out_dir) {
        o.want_plan = true;
        o.keep_original = true;
    }
    if (o.want_ptx) o.want_plan = true;
    if (o.want_cuda) o.want_plan = true;
    if (o.tune) o.want_plan = true;
    /* a CPU run or --verify with only the summary: a graph the GPU cannot
     * hold still runs (the pipeline warns) */
    o.plan_optional = (o.run || o.verify) && emit == EMIT_NONE && !out_dir && !report_path;

    mcir_diag d = mcir_diag_stderr();
    mcir_compilation c;
    status = mcir_compile(&o, &c, &d);
    if (cl.trace_human && c.trace) mcir_trace_print_human(c.trace, stderr);
    /* --verify reports even when it fails; the report goes to stdout unless
     * stdout carries an artifact (--emit, or --report -). */
    bool stdout_taken = emit != EMIT_NONE || (report_path && mcir_path_is_stdout(report_path));
    FILE *report = stdout_taken ? stderr : stdout;
    bool summary = status == MCIR_EXIT_OK && !stdout_taken;
    if (c.verify && !summary) print_verify(&c, report);
    if (status == MCIR_EXIT_OK && out_dir) status = write_out_dir(out_dir, &c, &d);
    if (status == MCIR_EXIT_OK && report_path) status = write_report(report_path, &c, &d);
    if (status == MCIR_EXIT_OK && emit != EMIT_NONE) {
        char *buf = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&buf, &len);
        bool ok = mem && emit_fns[emit](&c, mem);
        if (mem) fclose(mem);
        if (ok) fwrite(buf, 1, len, stdout);
        else {
            mcir_error(&d, (mcir_loc){"mcirc", 0, 0}, "could not produce the %s artifact",
                       emit_names[emit]);
            status = MCIR_EXIT_TOOLCHAIN;
        }
        free(buf);
    } else if (status == MCIR_EXIT_OK && !stdout_taken) {
        print_summary(&c, stdout);
        if (c.env) print_run(&c, out_dir, stdout);
        if (out_dir) printf("  wrote    %s/\n", out_dir);
        if (c.verify) print_verify(&c, stdout);
    }
    mcir_compilation_free(&c);
    free(report_text);

done:
    for (int i = 0; i < cl.o.n_inputs; i++) free((char *)cl.inputs[i].name);
    for (int i = 0; i < cl.o.n_pools; i++) free((char *)cl.pools[i].name);
    for (int i = 0; i < cl.o.n_dims; i++) free((char *)cl.dims[i].name);
    free(cl.dims);
    free(cl.catalogs);
    free(cl.inputs);
    free(cl.pools);
    free(cl.shapes);
    if (fflush(stdout) != 0 && status == MCIR_EXIT_OK) status = MCIR_EXIT_TOOLCHAIN;
    return status;
}
