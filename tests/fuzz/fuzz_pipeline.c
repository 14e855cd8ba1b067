/*
 * fuzz_pipeline.c — graph.json end to end, as `mcirc --verify --run
 * --device cpu -o` drives it (mcirc/pipeline.c): read, rewrite to a
 * fixpoint with the default catalog, plan kernels and memory, generate
 * CUDA C (no NVRTC), run the rewritten graph on the CPU reference
 * interpreter and compare it with the original. A graph whose tensors hold
 * more than 2^16 elements in all is planned but not run, so one input
 * stays well under a millisecond of interpreter time. A graph with
 * symbolic dims runs at each dimension's min (as `--dim NAME=MIN`): the
 * rewritten graph, planned at the maxima, bound again to other sizes.
 *
 * Invariants: a failed compilation reported an error; --verify does not
 * fail (the rewrites keep the numbers within tolerance) except where the
 * reference itself is not finite (NaN compares unequal).
 */
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "mcirc/pipeline.h"

#define RUN_MAX_ELEMS ((int64_t)1 << 16)

static int64_t total_elems(const mcir_graph *g) {
    int64_t sum = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        int64_t n = mcir_tensor_numel(g->tensors[i]);
        if (n < 0 || sum > RUN_MAX_ELEMS) return INT64_MAX;
        sum += n;
    }
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mcir_diag d = fuzz_diag();
    /* the pipeline reads a path (weights' .npy paths are relative to it) */
    const char *path = fuzz_write_file(data, size, ".json");
    mcir_graph *probe = mcir_graph_read_json(path, &d);
    if (!probe) return 0;
    bool small = total_elems(probe) <= RUN_MAX_ELEMS;
    mcir_dim_option dims[MCIR_MAX_DIMS];
    int n_dims = probe->n_dims;
    for (int i = 0; i < n_dims; i++)
        dims[i] = (mcir_dim_option){.name = probe->dims[i].name, .has_value = true,
                                    .value = probe->dims[i].min};

    mcir_options o = mcir_options_default();
    o.graph_path = path;
    o.want_plan = o.want_cuda = true;
    o.run = o.verify = small;
    o.device = MCIR_DEVICE_CPU;
    o.planner = "greedy-size";
    o.dims = dims;
    o.n_dims = n_dims;
    mcir_compilation c;
    d = fuzz_diag();
    int st = mcir_compile(&o, &c, &d);
    mcir_graph_free(probe);   /* after the compile: dims[].name point into it */
    if (st != MCIR_EXIT_OK) {
        bool reported = d.n_errors > 0;
        bool verify_failed = c.verify && !c.verify_ok;
        if (verify_failed) {
            /* a mismatch only counts where both sides are finite */
            for (int i = 0; i < c.n_verify; i++)
                if (!c.verify[i].ok && isfinite(c.verify[i].max_abs)) {
                    fprintf(stderr, "--verify: output '%s' differs: max rel err %g\n",
                            c.verify[i].output, c.verify[i].max_rel);
                    FUZZ_CHECK(!"the rewritten graph computes the same outputs");
                }
            reported = true;
        }
        FUZZ_CHECK(reported);
    }
    mcir_compilation_free(&c);
    return 0;
}
