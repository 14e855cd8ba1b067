/*
 * test_launch.c — the launch model (kernelplan/launch.c) is what runs: for
 * every example graph and golden graph, the plan written before code
 * generation equals the launch codegen performs (grid, block, dynamic and
 * static shared memory, tiles), threads per block == 32 x warps, and the
 * model recomputed from the plan's tiling gives the same launch; where
 * NVRTC compiles (a few graphs; the run's cache, cgt_kernel_cache), ptxas's shared memory
 * equals the plan's. The emulator (emu/cuda_emu.h) runs every tile
 * candidate the model can pick on sm_80 and sm_90 for the examples'
 * attention and norm problems, against the reference interpreter. A tiling
 * the template cannot realise is refused by the model and by codegen.
 */
#include <check.h>
#include <dlfcn.h>
#include <glob.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen_util.h"
#include "emu/cuda_emu.h"
#include "kernelplan/launch.h"
#include "pipeline_test.h"
#include "test_util.h"

static char work_dir[256];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The example and golden graphs, sorted. */
static int graph_paths(glob_t *gl) {
    char pat[2][600];
    snprintf(pat[0], sizeof pat[0], "%s/examples/*/graph.json", test_source_dir());
    snprintf(pat[1], sizeof pat[1], "%s/tests/golden/*/input.json", test_source_dir());
    ck_assert_int_eq(glob(pat[0], 0, NULL, gl), 0);
    ck_assert_int_eq(glob(pat[1], GLOB_APPEND, NULL, gl), 0);
    return (int)gl->gl_pathc;
}

static int64_t tile_dim(const mcir_tiling *ti, const char *name) {
    for (int i = 0; i < ti->n_dims; i++)
        if (strcmp(ti->dim_names[i], name) == 0) return ti->block_tile[i];
    return 0;
}

/* Kernels another launch model owns: the GEMM-shaped ones
 * (launch_gemm.c) and the sm_90a attention (launch_sm90.c, tile "wg"). */
static bool other_model(const mcir_kernel_plan *k) {
    return k->tpl == MCIR_TEMPLATE_MATMUL || k->tpl == MCIR_TEMPLATE_CONV2D ||
           tile_dim(&k->tiling, "wg") > 0;
}

/* Plan == codegen's launch == the model's, for every kernel of the graph;
 * a plan built afresh (codegen never ran on it) has the same launch. */
static int check_graph_launches(const char *path) {
    mcir_compilation c;
    cgt_compile_path(path, (cgt_pipe){0}, &c);
    const mcir_plan *p = c.plan;
    mcir_diag d = mcir_diag_stderr();
    mcir_plan *fresh = mcir_plan_build(c.graph, c.target, NULL, &d);
    ck_assert_ptr_nonnull(fresh);
    ck_assert_int_eq(fresh->n_kernels, p->n_kernels);
    int checked = 0;
    for (int i = 0; i < p->n_kernels; i++) {
        const mcir_kernel_plan *k = &p->kernels[i], *f = &fresh->kernels[i];
        const char *n = k->name;
        /* before codegen == after codegen: codegen does not touch the plan */
        for (int j = 0; j < 3; j++) {
            ck_assert_msg(f->grid[j] == k->grid[j] && f->block[j] == k->block[j], "%s grid/block", n);
        }
        ck_assert_msg(f->smem_bytes == k->smem_bytes && f->smem_static_bytes == k->smem_static_bytes,
                      "%s smem", n);
        ck_assert_int_eq(f->tiling.n_dims, k->tiling.n_dims);
        for (int j = 0; j < k->tiling.n_dims; j++) {
            ck_assert_str_eq(f->tiling.dim_names[j], k->tiling.dim_names[j]);
            ck_assert_int_eq(f->tiling.block_tile[j], k->tiling.block_tile[j]);
        }
        ck_assert_int_eq(f->tiling.warps, k->tiling.warps);
        ck_assert_int_eq(f->tiling.stages, k->tiling.stages);
        if (!c.codegen || k->tpl == MCIR_TEMPLATE_ALIAS) continue;
        /* threads per block == 32 x warps */
        ck_assert_msg(k->block[0] * k->block[1] * k->block[2] == 32 * k->tiling.warps,
                      "%s: block %d, %d warps", n, k->block[0], k->tiling.warps);
        ck_assert_msg(k->smem_bytes + k->smem_static_bytes <= p->target->smem_per_block_optin, "%s", n);
        /* the GEMM-shaped templates assert the plan's launch themselves
         * (cg_gemm_launch) and the sm_90a attention its own (launch_sm90.c) */
        if (other_model(k)) continue;
        /* the launch codegen performs */
        int64_t grid[3], smem;
        int block[3];
        mcir_codegen_kernel_launch(c.codegen, i, grid, block, &smem);
        for (int j = 0; j < 3; j++)
            ck_assert_msg(grid[j] == k->grid[j] && block[j] == k->block[j],
                          "%s: codegen grid %lld x block %d, plan %lld x %d", n, (long long)grid[j],
                          block[j], (long long)k->grid[j], k->block[j]);
        ck_assert_msg(smem == k->smem_bytes, "%s: codegen smem %lld, plan %lld", n, (long long)smem,
                      (long long)k->smem_bytes);
        checked++;
        /* the model recomputed from the plan's tiling */
        mcir_launch la;
        const char *why = "";
        ck_assert_msg(mcir_launch_of(p->target, p->graph, k, &la, &why), "%s: %s", n, why);
        for (int j = 0; j < 3; j++) ck_assert(la.grid[j] == k->grid[j] && la.block[j] == k->block[j]);
        ck_assert_int_eq(la.smem_bytes, k->smem_bytes);
        ck_assert_int_eq(la.smem_static_bytes, k->smem_static_bytes);
        ck_assert_int_eq(la.scratch_bytes, k->scratch_bytes);
        ck_assert_int_eq(la.registers, k->tiling.registers_estimate);
        ck_assert_int_eq(k->tiling.working_set_bytes, k->smem_bytes + k->smem_static_bytes);
        int64_t mg = 0;
        int mb = 0;
        bool merge = mcir_codegen_kernel_merge(c.codegen, i, &mg, &mb);
        ck_assert_int_eq(merge, la.merge_grid > 0);
        if (merge) ck_assert(mg == la.merge_grid && mb == la.merge_block);
    }
    mcir_plan_free(fresh);
    mcir_compilation_free(&c);
    return checked;
}

START_TEST(test_plan_equals_codegen_launch_everywhere) {
    glob_t gl;
    int n = graph_paths(&gl), kernels = 0;
    ck_assert_int_ge(n, 20);
    for (int i = 0; i < n; i++) kernels += check_graph_launches(gl.gl_pathv[i]);
    fprintf(stderr, "  %d graphs, %d generated kernels: plan == codegen launch\n", n, kernels);
    ck_assert_int_ge(kernels, 50);
    globfree(&gl);
}
END_TEST

/* ptxas's shared memory (audit) == the plan's, static and dynamic. */
START_TEST(test_plan_smem_equals_ptxas) {
    char why[256];
    if (!mcir_nvrtc_available(why, sizeof why)) {
        fprintf(stderr, "  skipped: %s\n", why);
        return;
    }
    /* block-per-row norms (static + dynamic), tensor-core attention,
     * reductions, pools, copies, elementwise; and a transpose tile */
    static const char *const graphs[] = {"examples/layernorm_bf16/graph.json",
                                         "examples/attention_f16/graph.json",
                                         "examples/ops_misc/graph.json",
                                         "tests/data/launch/transpose_last2.json"};
    double t0 = now_s();
    int audited = 0, statics = 0;
    for (size_t g = 0; g < sizeof graphs / sizeof *graphs; g++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", test_source_dir(), graphs[g]);
        mcir_compilation c;
        cgt_compile_path(path, (cgt_pipe){.ptx = true}, &c);
        for (int i = 0; i < c.plan->n_kernels; i++) {
            const mcir_kernel_plan *k = &c.plan->kernels[i];
            if (!k->audit.valid || other_model(k)) continue;
            ck_assert_msg(k->audit.smem_dynamic_bytes == k->smem_bytes &&
                              k->audit.smem_static_bytes == k->smem_static_bytes,
                          "%s: ptxas %lld + %d B, plan %lld + %lld B", k->name,
                          (long long)k->audit.smem_dynamic_bytes, k->audit.smem_static_bytes,
                          (long long)k->smem_bytes, (long long)k->smem_static_bytes);
            ck_assert_int_eq(k->audit.threads, k->block[0]);
            audited++;
            statics += k->smem_static_bytes > 0;
        }
        mcir_compilation_free(&c);
    }
    fprintf(stderr, "  %d kernels audited (%d with static shared memory), %.1f s\n", audited, statics,
            now_s() - t0);
    ck_assert_int_ge(audited, 15);
    ck_assert_int_ge(statics, 2);
}
END_TEST

/* The streaming norms read X and write Y 16 bytes per lane (docs/codegen.md
 * "Streaming norms"): for layernorm and rmsnorm f16 [32768, 1024] on sm_90
 * the plan's vector width is 8, ptxas shows only .v4 global loads (X, and
 * gamma/beta by column: 4 per lane each) and .v4 stores, no scalar or .v2
 * access (no run-time alignment fallback, no per-element parameter or
 * output access), and no spill. */
START_TEST(test_norm_accesses_are_16_bytes) {
    char why[256];
    if (!mcir_nvrtc_available(why, sizeof why)) {
        fprintf(stderr, "  skipped: %s\n", why);
        return;
    }
    static const char *const graphs[] = {"tests/data/launch/layernorm_f16_32768x1024.json",
                                         "tests/data/launch/rmsnorm_f16_32768x1024.json"};
    for (int g = 0; g < 2; g++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", test_source_dir(), graphs[g]);
        mcir_compilation c;
        cgt_compile_path(path, (cgt_pipe){.arch = "sm_90", .ptx = true}, &c);
        ck_assert_int_eq(c.plan->n_kernels, 1);
        const mcir_kernel_plan *k = &c.plan->kernels[0];
        const mcir_kernel_audit *a = &k->audit;
        ck_assert(k->tpl == MCIR_TEMPLATE_STREAMING_NORM && a->valid);
        ck_assert_int_eq(k->tiling.vector_width, 8);
        int params = g == 0 ? 2 : 1, chunks = 1024 / (32 * 8);
        fprintf(stderr, "  %s: ld.global %d/%d/%d, st.global %d/%d/%d, %d registers, spills %d/%d\n", k->name,
                a->ld_global[0], a->ld_global[1], a->ld_global[2], a->st_global[0], a->st_global[1],
                a->st_global[2], a->registers, a->spill_store_bytes, a->spill_load_bytes);
        ck_assert_int_eq(a->ld_global[0], 0);
        ck_assert_int_eq(a->ld_global[1], 0);
        ck_assert_int_eq(a->ld_global[2], chunks * (1 + params));
        ck_assert_int_eq(a->st_global[0], 0);
        ck_assert_int_eq(a->st_global[1], 0);
        ck_assert_int_eq(a->st_global[2], chunks);
        ck_assert_int_eq(a->spill_store_bytes + a->spill_load_bytes, 0);
        mcir_compilation_free(&c);
    }
}
END_TEST

/* How far the plan's register estimate may be from ptxas's figure
 * (docs/kernelplan.md "Registers"): 10 %, or 2 registers under 24 (ptxas's
 * granularity there). */
static double regs_tolerance(int ptxas) {
    double tol = 0.10 * ptxas;
    return ptxas < 24 && tol < 2 ? 2 : tol;
}

/* ptxas's registers (audit) vs the plan's estimate, every generated
 * kernel of the example and golden graphs on sm_80 and sm_90; and no
 * kernel spills or draws a ptxas advisory or warning (C7514 wgmma
 * serialised, C7517 wait injected, ...), nor does a cuBLAS epilogue
 * kernel. */
START_TEST(test_plan_registers_near_ptxas) {
    char why[256];
    if (!mcir_nvrtc_available(why, sizeof why)) {
        fprintf(stderr, "  skipped: %s\n", why);
        return;
    }
    static const char *const archs[] = {"sm_80", "sm_90"};
    double t0 = now_s();
    glob_t gl;
    int n = graph_paths(&gl), audited = 0, templates = 0, recompiled = 0, advised = 0;
    bool seen[MCIR_TEMPLATE_COUNT] = {false};
    for (int a = 0; a < 2; a++) {
        for (int gi = 0; gi < n; gi++) {
            mcir_compilation c;
            cgt_compile_path(gl.gl_pathv[gi], (cgt_pipe){.arch = archs[a], .ptx = true}, &c);
            for (int i = 0; i < c.plan->n_kernels; i++) {
                const mcir_kernel_plan *k = &c.plan->kernels[i];
                if (!k->audit.valid) continue;
                int est = k->tiling.registers_estimate, got = k->audit.registers;
                if (getenv("MCIR_TEST_ALL_REGS") && abs(est - got) > regs_tolerance(got)) {
                    fprintf(stderr, "  OFF %s %s (%s): plan %d, ptxas %d\n", archs[a], k->name, mcir_template_name(k->tpl), est, got);
                    continue;
                }
                ck_assert_msg(abs(est - got) <= regs_tolerance(got),
                              "%s %s (%s): plan estimates %d registers, ptxas %d", archs[a], k->name,
                              mcir_template_name(k->tpl), est, got);
                const mcir_kernel_audit *au[2] = {&k->audit, &k->epilogue_audit};
                for (int e = 0; e < 2; e++) {
                    ck_assert_msg(!au[e]->valid || au[e]->spill_store_bytes + au[e]->spill_load_bytes == 0,
                                  "%s %s%s spills %d/%d bytes", archs[a], k->name, e ? " (epilogue)" : "",
                                  au[e]->spill_store_bytes, au[e]->spill_load_bytes);
                    ck_assert_msg(!au[e]->valid || au[e]->advisories == 0, "%s %s%s: %d ptxas advisories: %s",
                                  archs[a], k->name, e ? " (epilogue)" : "", au[e]->advisories, au[e]->advisory);
                    advised += au[e]->valid ? au[e]->advisories : 0;
                }
                if (k->launch_min_blocks > 0) {   /* recompiled for the plan's occupancy */
                    char bound[64];
                    snprintf(bound, sizeof bound, "__launch_bounds__(%d, %d)", k->block[0],
                             k->launch_min_blocks);
                    ck_assert_int_eq(k->launch_min_blocks, k->tiling.blocks_per_sm);
                    ck_assert_ptr_nonnull(strstr(mcir_codegen_kernel_source(c.codegen, i), bound));
                    recompiled++;
                }
                audited++;
                if (!seen[k->tpl]) templates++;
                seen[k->tpl] = true;
            }
            mcir_compilation_free(&c);
        }
    }
    globfree(&gl);
    fprintf(stderr, "  %d kernels of %d templates on sm_80 + sm_90: all within 10 %% of ptxas, none "
            "spills, %d ptxas advisories (%d compiled again for the plan's occupancy), %.1f s\n", audited,
            templates, advised, recompiled, now_s() - t0);
    ck_assert_int_ge(audited, 300);
    ck_assert_int_ge(templates, 8);
}
END_TEST

/* ---------------------------------------------------- model properties */

START_TEST(test_model_refuses_unrealisable_tiles) {
    const mcir_target *t = mcir_target_find("sm_90");
    mcir_attention_problem g;
    mcir_attention_layout l;
    const char *why = NULL;
    mcir_attention_problem_dims(64, 64, MCIR_DTYPE_F16, &g);
    ck_assert(!mcir_attention_layout_of(t, &g, 24, 64, 0, &l, &why));   /* not a multiple of 16 */
    ck_assert_ptr_nonnull(why);
    ck_assert(mcir_attention_layout_of(t, &g, 64, 64, 0, &l, NULL));
    ck_assert_int_eq(l.warps, 4);
    ck_assert_int_eq(l.smem_bytes, 2 * (64 * 72 * 3));
    ck_assert(!mcir_attention_layout_of(t, &g, 64, 64, 96, &l, &why));   /* chunk % bn */
    mcir_attention_problem_dims(64, 64, MCIR_DTYPE_F32, &g);
    ck_assert(!mcir_attention_layout_of(t, &g, 32, 64, 0, &l, &why));    /* FMA: K/V tiles of 32 */
    ck_assert(!mcir_attention_layout_of(t, &g, 64, 32, 0, &l, &why));    /* 16 rows per warp */
    ck_assert(mcir_attention_layout_of(t, &g, 32, 32, 0, &l, NULL));
    ck_assert_int_eq(l.smem_bytes, 4 * (32 * 64 + 32 * 65 + 32 * 64));
    /* head dim 1024 f16 fits shared memory at 16x16 but not the registers */
    mcir_attention_problem_dims(1024, 1024, MCIR_DTYPE_F16, &g);
    ck_assert_int_eq(mcir_attention_candidates(t, &g, &l, 1), 0);
    mcir_working_set ws;
    int64_t dims[2] = {1024, 1024};
    mcir_working_set_compute(t, MCIR_WS_ATTENTION, dims, MCIR_DTYPE_F16, &ws);
    ck_assert(!ws.fits);
    /* norms: a warp per row only up to 1024 elements; a block keeps the
     * row in registers up to MCIR_ROWS_REG_VALUES a thread, then in the
     * shared-memory cache (X's dtype, up to the opt-in limit), then reads
     * it twice */
    mcir_rows_problem r = {.kind = MCIR_ROWS_NORM, .rows = 10, .width = 2048, .inner = 1,
                           .direct_read = true, .dtype = MCIR_DTYPE_F32};
    mcir_rows_layout rl;
    ck_assert(!mcir_rows_layout_of(t, &r, true, 8, &rl, &why));
    ck_assert(mcir_rows_layout_of(t, &r, false, 8, &rl, NULL));
    ck_assert_int_eq(rl.mode, MCIR_ROWS_BLOCK_REGS);
    ck_assert_int_eq(rl.chunks, 2);   /* 2048 / (256 threads x 4) */
    ck_assert_int_eq(rl.smem_bytes, 0);
    ck_assert_int_eq(rl.smem_static_bytes, 128);
    r.width = 20000;
    ck_assert(mcir_rows_layout_of(t, &r, false, 16, &rl, NULL));
    ck_assert_int_eq(rl.mode, MCIR_ROWS_BLOCK_SMEM);
    ck_assert(rl.cache);
    ck_assert_int_eq(rl.smem_bytes, 20000 * 4);
    r.dtype = MCIR_DTYPE_F16;   /* the cache holds X's dtype */
    ck_assert(mcir_rows_layout_of(t, &r, false, 16, &rl, NULL));
    ck_assert_int_eq(rl.smem_bytes, 20000 * 2);
    r.width = 150000;
    ck_assert(mcir_rows_layout_of(t, &r, false, 16, &rl, NULL));
    ck_assert_int_eq(rl.mode, MCIR_ROWS_BLOCK_STREAM);
    ck_assert_int_eq(rl.smem_bytes, 0);
    /* sm_90 plans that row over a cluster: the smallest whose slices fit
     * (300 000 B of f16 over 2 blocks: 75 000 columns each), a grid of
     * whole clusters; sm_80 has none and reads it twice */
    ck_assert_int_eq(mcir_rows_candidates(t, &r, &rl, 1), 1);
    ck_assert_int_eq(rl.mode, MCIR_ROWS_CLUSTER_SMEM);
    ck_assert_int_eq(rl.cluster, 2);
    ck_assert_int_eq(rl.slice, 75000);
    ck_assert_int_eq(rl.smem_bytes, 75000 * 2);
    ck_assert_int_eq(rl.grid, 10 * 2);
    ck_assert(mcir_rows_layout_of_cluster(t, &r, 16, 4, &rl, NULL));    /* 4 fit too: slices of 37 504 */
    ck_assert_int_eq(rl.slice, 37504);
    ck_assert(!mcir_rows_layout_of_cluster(t, &r, 16, 3, &rl, NULL));   /* not a power of two */
    ck_assert(!mcir_rows_layout_of_cluster(t, &r, 16, 16, &rl, NULL));  /* more than 8 */
    ck_assert_int_eq(mcir_rows_candidates(mcir_target_find("sm_80"), &r, &rl, 1), 1);
    ck_assert_int_eq(rl.mode, MCIR_ROWS_BLOCK_STREAM);
    ck_assert_int_eq(rl.cluster, 1);
    /* a persistent grid: at most a wave of resident blocks */
    r.rows = 100000;
    r.width = 4096;
    ck_assert(mcir_rows_layout_of(t, &r, false, 4, &rl, NULL));
    ck_assert_int_eq(rl.grid, (int64_t)t->sm_count * rl.blocks_per_sm);
}
END_TEST

/* The legality check and the planner agree: fits_on_chip's attention
 * working set is the planner's first candidate's shared memory. */
START_TEST(test_fits_on_chip_is_the_planners_model) {
    static const char *const arch[] = {"sm_80", "sm_90"};
    static const int64_t ds[] = {32, 64, 80, 128, 256, 512, 736};
    static const mcir_dtype dts[] = {MCIR_DTYPE_F32, MCIR_DTYPE_F16};
    for (int a = 0; a < 2; a++)
        for (size_t i = 0; i < sizeof ds / sizeof *ds; i++)
            for (int j = 0; j < 2; j++) {
                const mcir_target *t = mcir_target_find(arch[a]);
                int64_t dims[2] = {ds[i], ds[i]};
                mcir_working_set ws;
                mcir_working_set_compute(t, MCIR_WS_ATTENTION, dims, dts[j], &ws);
                mcir_attention_problem g;
                mcir_attention_problem_dims(ds[i], ds[i], dts[j], &g);
                mcir_attention_layout l;
                int n = mcir_attention_candidates(t, &g, &l, 1);
                ck_assert_int_eq(ws.fits, n == 1);
                if (n == 1) {
                    ck_assert_int_eq(ws.bytes, l.smem_bytes + l.smem_static_bytes);
                    ck_assert_int_eq(ws.tile[0], l.bm);
                }
            }
}
END_TEST

/* codegen refuses a plan whose tiling its template cannot realise. */
START_TEST(test_codegen_refuses_a_changed_plan) {
    char path[600];
    snprintf(path, sizeof path, "%s/examples/gpt2_block/graph.json", test_source_dir());
    mcir_compilation c;
    cgt_compile_path(path, (cgt_pipe){0}, &c);
    mcir_diag d = mcir_diag_stderr();
    mcir_plan *p = mcir_plan_build(c.graph, c.target, NULL, &d);
    ck_assert_ptr_nonnull(p);
    int changed = 0;
    for (int i = 0; i < p->n_kernels; i++) {
        mcir_kernel_plan *k = &p->kernels[i];
        if (k->tpl == MCIR_TEMPLATE_STREAMING_ATTENTION) {
            k->tiling.block_tile[1] = 64;   /* the FMA template streams 32 keys */
            changed++;
        } else if (k->tpl == MCIR_TEMPLATE_STREAMING_NORM && changed == 1) {
            k->grid[0] += 1;   /* a launch the template does not perform */
            changed++;
        }
    }
    ck_assert_int_eq(changed, 2);
    char buf[4096] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");
    mcir_diag cd = {.out = f};
    ck_assert_ptr_null(mcir_codegen_new(p, NULL, &cd));
    fclose(f);
    ck_assert_msg(strstr(buf, "internal error: the plan's attention tiling cannot be realised"), "%s", buf);
    ck_assert_msg(strstr(buf, "internal error: the template launches grid"), "%s", buf);
    mcir_plan_free(p);
    mcir_compilation_free(&c);
}
END_TEST

/* ------------------------------------------------------------ emulated */


/* Runs the single kernel of p (its plan as given) on the emulated device
 * through the real runtime, 4 blocks at most (grid-stride loops cover the
 * rest), and compares every output with the interpreter; returns the
 * relative error (INFINITY on a finding). */
static double run_emulated(mcir_graph *g, mcir_plan *p, const char *tag) {
    (void)tag;
    ck_assert_int_eq(p->n_kernels, 1);
    cgt_emu_result r = cgt_emu_device(g, p, NULL, 4, 5, NULL, NULL, NULL);
    return r.ran ? r.rel : INFINITY;
}

/* A one-node graph with the problem's shape: rows x width rows (softmax
 * over a middle axis where inner > 1), at most 24 rows; attention over
 * 2 heads of the problem's query / key counts (at most 40 / 160). */
static char *problem_graph(const mcir_kernel_plan *k, const mcir_rows_problem *r,
                           const mcir_attention_problem *a) {
    char *s = malloc(2048);
    ck_assert_ptr_nonnull(s);
    if (a) {
        const char *dt = mcir_dtype_name(a->dtype);
        long long nq = a->nq < 40 ? a->nq : 40, nk = a->nk < 160 ? a->nk : 160;
        snprintf(s, 2048,
                 "{\"mcir\":1,\"name\":\"att\",\"inputs\":["
                 "{\"name\":\"q\",\"dtype\":\"%s\",\"shape\":[2,%lld,%lld]},"
                 "{\"name\":\"k\",\"dtype\":\"%s\",\"shape\":[2,%lld,%lld]},"
                 "{\"name\":\"v\",\"dtype\":\"%s\",\"shape\":[2,%lld,%lld]}],"
                 "\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],"
                 "\"outputs\":[\"y\"],\"attrs\":{\"causal\":%s}}],\"outputs\":[\"y\"]}",
                 dt, nq, (long long)a->d, dt, nk, (long long)a->d, dt, nk, (long long)a->dv,
                 mcir_node_bool(k->anchor, "causal") ? "true" : "false");
        return s;
    }
    const char *dt = mcir_dtype_name(r->dtype);
    const mcir_node *n = k->anchor;
    long long rows = r->rows / r->inner < 24 ? r->rows / r->inner : 24, w = r->width;
    char shape[96], weights[512] = "", ins[64] = "\"x\"", attrs[96];
    if (r->inner > 1) {
        snprintf(shape, sizeof shape, "[%lld,%lld,%lld]", rows, w, (long long)r->inner);
        snprintf(attrs, sizeof attrs, "{\"axis\":1}");
    } else {
        snprintf(shape, sizeof shape, "[%lld,%lld]", rows, w);
        snprintf(attrs, sizeof attrs, "{}");
    }
    if (n->op == MCIR_OP_LAYERNORM) {
        snprintf(weights, sizeof weights,
                 ",\"weights\":[{\"name\":\"gamma\",\"dtype\":\"%s\",\"shape\":[%lld]},"
                 "{\"name\":\"beta\",\"dtype\":\"%s\",\"shape\":[%lld]}]", dt, w, dt, w);
        snprintf(ins, sizeof ins, "\"x\",\"gamma\",\"beta\"");
    } else if (n->op == MCIR_OP_RMSNORM) {
        snprintf(weights, sizeof weights,
                 ",\"weights\":[{\"name\":\"gamma\",\"dtype\":\"%s\",\"shape\":[%lld]}]", dt, w);
        snprintf(ins, sizeof ins, "\"x\",\"gamma\"");
    }
    snprintf(s, 2048,
             "{\"mcir\":1,\"name\":\"norm\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"%s\",\"shape\":%s}]%s,"
             "\"nodes\":[{\"name\":\"nm\",\"op\":\"%s\",\"inputs\":[%s],\"outputs\":[\"y\"],\"attrs\":%s}],"
             "\"outputs\":[\"y\"]}",
             dt, shape, weights, mcir_op_name(n->op), ins, attrs);
    return s;
}

/* The examples' distinct attention and norm problems. */
typedef struct problem {
    bool attention;
    mcir_attention_problem a;
    mcir_rows_problem r;
    char *graph;
} problem;

static bool same_problem(const problem *x, const problem *y) {
    if (x->attention != y->attention) return false;
    if (x->attention)
        return x->a.d == y->a.d && x->a.dv == y->a.dv && x->a.dtype == y->a.dtype && x->a.mma == y->a.mma &&
               (x->a.nq < 40 ? x->a.nq : 40) == (y->a.nq < 40 ? y->a.nq : 40);
    return strcmp(x->graph, y->graph) == 0;
}

START_TEST(test_every_candidate_runs_emulated) {
    if (!test_have_cxx()) {
        fprintf(stderr, "  skipped: no C++ compiler for the kernel emulator\n");
        return;
    }
    double t0 = now_s();
    problem probs[32];
    int np = 0;
    glob_t gl;
    char pat[600];
    snprintf(pat, sizeof pat, "%s/examples/*/graph.json", test_source_dir());
    ck_assert_int_eq(glob(pat, 0, NULL, &gl), 0);
    for (size_t gi = 0; gi < gl.gl_pathc; gi++) {
        mcir_compilation c;
        cgt_compile_path(gl.gl_pathv[gi], (cgt_pipe){0}, &c);
        for (int i = 0; i < c.plan->n_kernels && np < 32; i++) {
            const mcir_kernel_plan *k = &c.plan->kernels[i];
            problem pr = {0};
            if (mcir_attention_problem_of(k, &pr.a)) {
                pr.attention = true;
                pr.graph = problem_graph(k, NULL, &pr.a);
            } else if (k->tpl == MCIR_TEMPLATE_STREAMING_NORM && mcir_rows_problem_of(c.plan->graph, k, &pr.r) &&
                       k->n_nodes == 1) {
                pr.graph = problem_graph(k, &pr.r, NULL);
            } else {
                continue;
            }
            bool dup = false;
            for (int j = 0; j < np && !dup; j++) dup = same_problem(&probs[j], &pr);
            if (dup) free(pr.graph);
            else probs[np++] = pr;
        }
        mcir_compilation_free(&c);
    }
    globfree(&gl);
    ck_assert_int_ge(np, 6);
    int runs = 0, failed = 0;
    for (int i = 0; i < np; i++) {
        /* the model picks its first candidate that fits: one per target of
         * the table (sm_80, sm_86, sm_89, sm_90), each layout once */
        const mcir_target *const *targets = mcir_target_list();
        int64_t seen[8][2];
        int n_seen = 0;
        for (int a = 0; targets[a]; a++) {
            mcir_graph *g = cgt_graph(probs[i].graph);
            mcir_diag d = mcir_diag_stderr();
            mcir_plan *p = mcir_plan_build(g, targets[a], NULL, &d);
            ck_assert_ptr_nonnull(p);
            ck_assert_int_eq(p->n_kernels, 1);
            mcir_kernel_plan *k = &p->kernels[0];
            mcir_attention_layout al;
            mcir_rows_layout rl;
            mcir_attention_problem ag;
            mcir_rows_problem rg;
            bool att = probs[i].attention;
            ck_assert(att ? mcir_attention_problem_of(k, &ag) : mcir_rows_problem_of(p->graph, k, &rg));
            int nc = att ? mcir_attention_candidates(p->target, &ag, &al, 1)
                         : mcir_rows_candidates(p->target, &rg, &rl, 1);
            ck_assert_int_eq(nc, 1);
            int64_t key[2] = {att ? al.bm : rl.warp_row, att ? al.bn : rl.warps};
            bool dup = false;
            for (int q = 0; q < n_seen && !dup; q++) dup = seen[q][0] == key[0] && seen[q][1] == key[1];
            if (!dup && n_seen < 8) {
                memcpy(seen[n_seen++], key, sizeof key);
                /* the plan holds that candidate, unless the sm_90a template
                 * (launch_sm90.c, tile "wg") took the kernel: then the
                 * candidate is applied to test the generic template */
                if (tile_dim(&k->tiling, "wg") > 0 && att) mcir_attention_apply(k, &ag, &al);
                ck_assert_int_eq(k->tiling.block_tile[0], att ? al.bm : rl.rows_per_block);
                char tag[64];
                snprintf(tag, sizeof tag, "p%d_c%d", i, n_seen);
                double rel = run_emulated(g, p, tag);
                double tol = k->anchor->outputs[0]->dtype == MCIR_DTYPE_F32 ? 1e-3 : 2e-2;
                fprintf(stderr, "  %s %s %s: %s %lld x %lld, %d warps: rel err %.2g %s\n",
                        targets[a]->name, att ? "attention" : mcir_op_name(k->anchor->op),
                        mcir_dtype_name(k->anchor->inputs[0]->dtype),
                        att ? "tile" : (key[0] ? "warp per row" : "block per row"),
                        (long long)k->tiling.block_tile[0], (long long)k->tiling.block_tile[1],
                        k->tiling.warps, rel, rel <= tol ? "ok" : "FAIL");
                failed += !(rel <= tol);
                runs++;
            }
            mcir_plan_free(p);
            mcir_graph_free(g);
        }
        free(probs[i].graph);
    }
    fprintf(stderr, "  %d problems, %d candidate layouts emulated, %.1f s\n", np, runs, now_s() - t0);
    ck_assert_int_eq(failed, 0);
}
END_TEST

int main(void) {
    if (!test_tempdir("launch", work_dir, sizeof work_dir)) return 1;
    char cache[256];
    cgt_kernel_cache(cache, sizeof cache);
    Suite *s = suite_create("launch");
    TCase *tc = tcase_create("launch");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_model_refuses_unrealisable_tiles);
    tcase_add_test(tc, test_fits_on_chip_is_the_planners_model);
    tcase_add_test(tc, test_plan_equals_codegen_launch_everywhere);
    tcase_add_test(tc, test_codegen_refuses_a_changed_plan);
    tcase_add_test(tc, test_plan_smem_equals_ptxas);
    tcase_add_test(tc, test_plan_registers_near_ptxas);
    tcase_add_test(tc, test_norm_accesses_are_16_bytes);
    tcase_add_test(tc, test_every_candidate_runs_emulated);
    suite_add_tcase(s, tc);
    int failed = test_main_nofork(s);
    test_remove_dir(work_dir);
    if (cache[0]) test_remove_dir(cache);
    return failed;
}
