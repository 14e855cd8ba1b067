/*
 * pipeline_test.h — a graph.json text through the whole pipeline, as mcirc
 * compiles it, for the tests that link mcir_pipeline and
 * mcir_codegen_testutil (the sm_90a GEMM's and the convs').
 */
#ifndef MCIR_TESTS_PIPELINE_TEST_H
#define MCIR_TESTS_PIPELINE_TEST_H

#include <check.h>
#include <stdbool.h>
#include <string.h>

#include "codegen_util.h"
#include "kernelplan/kernelplan.h"
#include "mcirc/pipeline.h"

/* The graph through rewrites and the planner, as mcirc compiles it for
 * `arch`; ptx: NVRTC and the audit too. Fails the test on an error. */
static inline void cgt_compile_js(const char *js, const char *arch, bool ptx, mcir_compilation *c) {
    mcir_options o = mcir_options_default();
    o.graph = cgt_graph(js);
    o.arch = arch;
    o.want_plan = true;
    o.want_ptx = ptx;
    mcir_diag d = mcir_diag_stderr();
    memset(c, 0, sizeof *c);
    ck_assert_int_eq(mcir_compile(&o, c, &d), 0);
}

/* The index of the plan's first kernel on template `tpl` (what names it in
 * the failure); fails the test where there is none. */
static inline int cgt_kernel_index(const mcir_plan *p, mcir_template tpl, const char *what) {
    for (int i = 0; i < p->n_kernels; i++)
        if (p->kernels[i].tpl == tpl) return i;
    ck_abort_msg("no %s kernel in the plan", what);
    return -1;
}

#endif
