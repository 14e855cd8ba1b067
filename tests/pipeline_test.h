/*
 * pipeline_test.h — a graph through the whole pipeline (mcir_compile,
 * mcirc/pipeline.h), as mcirc compiles it, for the tests that link
 * mcir_pipeline. Every form builds the kernel plan (and the memory plan
 * and the generated code with it); a cgt_pipe says what else:
 *
 *     mcir_compilation c;
 *     cgt_compile_path(path, (cgt_pipe){.arch = "sm_90", .ptx = true}, &c);
 *     cgt_compile_text(work_dir, "mlp", MLP, (cgt_pipe){.cuda = true}, &c);
 *     cgt_compile_js(js, "sm_90", false, &c);
 *     ...
 *     mcir_compilation_free(&c);
 *
 * The graph comes from a file (cgt_compile_path, cgt_compile_status), from
 * graph.json text written to a file first so that diagnostics name it
 * (cgt_compile_text), or from text parsed in memory (cgt_compile_js, which
 * needs mcir_codegen_testutil for cgt_graph). The diagnostics go to stderr.
 */
#ifndef MCIR_TESTS_PIPELINE_TEST_H
#define MCIR_TESTS_PIPELINE_TEST_H

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "codegen_util.h"
#include "kernelplan/kernelplan.h"
#include "mcirc/pipeline.h"

/* What a test asks of the pipeline besides the plan. */
typedef struct cgt_pipe {
    const char *arch;   /* NULL: the default (mcir_options_default's) */
    bool cuda;          /* want_cuda: the generated sources (c->codegen) */
    bool ptx;           /* want_ptx: NVRTC and ptxas's audit too */
} cgt_pipe;

/* o (its graph set) completed by p and compiled into *c: the status. */
static inline int cgt_compile_options(mcir_options *o, cgt_pipe p, mcir_compilation *c) {
    if (p.arch) o->arch = p.arch;
    o->want_plan = true;
    o->want_cuda = p.cuda;
    o->want_ptx = p.ptx;
    mcir_diag d = mcir_diag_stderr();
    memset(c, 0, sizeof *c);
    return mcir_compile(o, c, &d);
}

/* The graph at path (graph.json, or an ONNX model) compiled: the exit
 * status, for a test that expects a failure or handles one (*c holds what
 * was built either way: free it). */
static inline int cgt_compile_status(const char *path, cgt_pipe p, mcir_compilation *c) {
    mcir_options o = mcir_options_default();
    o.graph_path = path;
    return cgt_compile_options(&o, p, c);
}

/* The same, failing the test (naming path and the status) on an error, or
 * where p.cuda asked for the generated code and there is none. */
static inline void cgt_compile_path(const char *path, cgt_pipe p, mcir_compilation *c) {
    int st = cgt_compile_status(path, p, c);
    ck_assert_msg(st == 0, "%s: status %d", path, st);
    if (p.cuda) ck_assert_ptr_nonnull(c->codegen);
}

/* graph.json text written to dir/name.json (so that diagnostics name a
 * file, and its lines), then compiled as cgt_compile_path does. */
static inline void cgt_compile_text(const char *dir, const char *name, const char *js, cgt_pipe p,
                                    mcir_compilation *c) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(js, f);
    fclose(f);
    cgt_compile_path(path, p, c);
}

/* graph.json text parsed in memory (cgt_graph) and compiled for arch;
 * ptx: NVRTC and the audit too. Fails the test on an error. */
static inline void cgt_compile_js(const char *js, const char *arch, bool ptx, mcir_compilation *c) {
    mcir_options o = mcir_options_default();
    o.graph = cgt_graph(js);
    ck_assert_int_eq(cgt_compile_options(&o, (cgt_pipe){.arch = arch, .ptx = ptx}, c), 0);
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
