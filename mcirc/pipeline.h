/*
 * pipeline.h — the whole compilation, in order, in one function that
 * mcirc, the tests and the benchmarks all call:
 *
 *   parse → verify → (keep the original for --verify) → load catalog →
 *   rewrite to a fixpoint → plan kernels → plan memory → generate CUDA →
 *   compile with NVRTC → run (CPU reference or GPU) → compare (--verify).
 *
 * Each stage runs only when something asked for what it provides (an
 * artifact, --run, --verify), so `mcirc --emit mcir` never needs NVRTC.
 *
 *     mcir_options o = mcir_options_default();
 *     o.graph_path = "examples/gpt2_block/graph.json";
 *     o.want_plan = true;
 *     mcir_compilation c;
 *     int status = mcir_compile(&o, &c, &diag);   // 0, 1, 2 or 3 (exit codes)
 *     ... c.graph, c.plan, c.memory ...
 *     mcir_compilation_free(&c);
 */
#ifndef MCIR_PIPELINE_H
#define MCIR_PIPELINE_H

#include "catalog/catalog.h"
#include "codegen/codegen.h"
#include "runtime/runtime.h"
#include "kernelplan/kernelplan.h"
#include "mcir/mcir.h"
#include "onnx/onnx.h"
#include "properties/target.h"
#include "rewrites/rewrites.h"

/* Exit statuses of mcirc (docs/cli.md). */
enum {
    MCIR_EXIT_OK = 0,
    MCIR_EXIT_INVALID = 1,   /* bad graph, catalog, .npy; --verify beyond tolerance */
    MCIR_EXIT_USAGE = 2,
    MCIR_EXIT_TOOLCHAIN = 3, /* NVRTC, CUDA, out of device memory */
};

/* --device: CPU the reference interpreter; GPU the generated kernels on
 * the GPU; EMU the generated kernels through the same runtime on the
 * emulated device (emu/emu.h); AUTO the GPU where there is one. */
typedef enum { MCIR_DEVICE_AUTO, MCIR_DEVICE_CPU, MCIR_DEVICE_GPU, MCIR_DEVICE_EMU } mcir_device;

typedef struct mcir_input_file {
    const char *name, *path;
} mcir_input_file;

/* --dim NAME=N (has_value) or NAME=MIN..MAX (has_range): the size seeded
 * inputs of a run get, or the range a symbolic dimension is compiled for
 * (docs/cli.md "Symbolic dimensions"). */
typedef struct mcir_dim_option {
    const char *name;
    bool has_value, has_range;
    int64_t value, min, max;
} mcir_dim_option;

/* Parses "NAME=N" or "NAME=MIN..MAX" into *out (name malloc'd); false if
 * it is neither (N, MIN, MAX positive integers, MIN <= MAX). */
bool mcir_dim_option_parse(const char *text, mcir_dim_option *out);

typedef struct mcir_options {
    const char *graph_path;      /* graph.json, or an ONNX model (*.onnx) */
    mcir_graph *graph;           /* or a graph built in memory (the Python API): the
                                    compilation takes it over and frees it */
    const mcir_onnx_shape *shapes; /* --shape: pinned ONNX input shapes */
    int n_shapes;
    const char **catalogs;       /* --catalog, in order */
    int n_catalogs;
    bool no_default_catalog;
    bool no_rewrite;
    const char *arch;            /* default MCIR_DEFAULT_ARCH */
    const char *planner;         /* NULL: "best" */
    double planner_time_limit_s; /* exact search budget; <= 0: library default */
    mcir_memplan_pool *pools;    /* --pool NAME=BYTES; NULL: one unbounded arena */
    int n_pools;

    bool want_plan;              /* kernel partition + memory plan */
    bool plan_optional;          /* the plan only feeds the summary of a CPU run or
                                    --verify: a graph the GPU target cannot hold (a
                                    working set over its shared memory) is a warning,
                                    and the CPU reference still runs */
    bool want_cuda;              /* generated sources */
    bool want_ptx;               /* NVRTC compile (PTX + cubin) */
    bool want_sass;              /* with want_ptx: the SASS audit (nvdisasm on every cubin,
                                    mcir_codegen_audit_sass) */
    bool verify;
    bool keep_original;          /* keep the graph as read (the report draws it) */
    bool trace_all;              /* --trace=all: every near miss in the trace */
    uint64_t seed;
    bool run;
    mcir_device device;
    mcir_alloc_mode alloc;
    const mcir_input_file *inputs;
    int n_inputs;
    const mcir_dim_option *dims; /* --dim, in order */
    int n_dims;
    /* --tune: time the top tune_top candidates of every tunable kernel
     * (GPU, or the timer MCIR_TUNE_TIMER injects) and store the winners
     * in the tuning cache next to the kernel cache (mcirc/tune.c) */
    bool tune;
    int tune_top;
    /* --tp N: the graph (of one rank) rewritten into the program of each
     * of N ranks (rewrites/tp.c) before the catalog's rules; 0: not asked */
    int tp;
    /* --tp-sp: with --tp, sequence parallelism (reduce_scatter by rows and
     * all_gather in place of the all_reduce before a residual and norm) */
    bool tp_sp;
    bool exact_math;             /* --exact-math: mcir_plan.exact_math */
} mcir_options;

typedef struct mcir_verify_result {
    const char *output;
    const char *device;          /* NULL: the rewritten graph's interpreter; else the device that ran it */
    int rank;                    /* graphs with ranks > 1: the rank compared; else -1 */
    double max_abs, max_rel, tolerance;
    bool ok;
} mcir_verify_result;

typedef struct mcir_compilation {
    mcir_graph *original;        /* the graph as read (kept for --verify) */
    mcir_graph *graph;           /* rewritten */
    mcir_catalog *catalog;
    mcir_trace *trace;
    mcir_plan *plan;
    mcir_memplan *memory;
    mcir_codegen *codegen;
    const mcir_target *target;

    int nodes_before, nodes_after, rewrites_applied;
    int tp_collectives;          /* --tp: collectives the rewrite inserted */
    mcir_rewrite_stats rewrite_stats;   /* fusions vs bookkeeping */

    /* A graph with symbolic dims is compiled at its largest sizes; a run
     * or --verify at other sizes executes these copies of graph and
     * original bound to the run's sizes (NULL: the run is at the
     * compiled sizes). mcir_compilation_run_graph says which ran. */
    mcir_graph *run_graph, *run_original;
    /* The cost model at the run's sizes (a graph whose dims range over
     * sizes, a run or --dim NAME=N at other than the largest): the plan's
     * kernels, their traffic and modelled time there. */
    bool has_cost_at_run;
    mcir_plan_cost cost_at_run;
    char run_binding[160];
    mcir_env *env;               /* --run: values of the executed graph */
    bool ran_on_gpu;             /* on a device: the GPU, or the emulated device (ran_on_emu) */
    bool ran_on_emu;
    mcir_gpu_stats gpu_stats;
    double run_seconds;

    int n_verify;
    mcir_verify_result *verify;  /* per graph output */
    bool verify_ok;

    /* One process a rank (a launcher's RANK / WORLD_SIZE, docs/parallel.md
     * "One process per rank"): this process's rank (-1: every rank here),
     * the rendezvous and the interpreter's group over it. */
    int launch_rank;
    struct mcir_rdv *rdv;
    mcir_group group;
    char launch_where[300];
} mcir_compilation;

mcir_options mcir_options_default(void);
/* Runs the pipeline; returns an exit status. On failure the diagnostics
 * are already reported and `c` holds what was built (free it). */
int mcir_compile(const mcir_options *o, mcir_compilation *c, mcir_diag *d);
void mcir_compilation_free(mcir_compilation *c);
/* The graph --run executed (its outputs' shapes are those of c->env). */
const mcir_graph *mcir_compilation_run_graph(const mcir_compilation *c);

/* Tolerance of --verify for a dtype: 1e-4 (f32), 2e-2 (f16, bf16),
 * relative to the largest magnitude of the reference output. */
double mcir_verify_tolerance(mcir_dtype t);
/* Compares two arrays: max |a-b| and max |a-b| / max(max|ref|, tiny). */
void mcir_compare(const float *got, const float *ref, int64_t n, double *max_abs,
                  double *max_rel);

#endif /* MCIR_PIPELINE_H */
