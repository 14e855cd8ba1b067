/*
 * tune.c (mcirc) — the tuning stage of the pipeline. The tuning cache is
 * DIR/tuning.tsv in the kernel cache directory (mcir_cache_dir:
 * $MCIR_CACHE_DIR, ...), keyed by (kernel shape key, arch, driver).
 *
 * The timer: on a GPU, the plan's stream time (mcir_gpu_run, best of 3,
 * generated kernels only: MCIR_NO_CUBLAS is set while timing) with the
 * candidate in place and every other kernel unchanged, so candidates of
 * one kernel compare by their own difference. MCIR_TUNE_TIMER injects a
 * deterministic timer instead (tests, machines without a GPU):
 *   model      the cost model's time of the candidate;
 *   perturbed  the model's time scaled by 0.8 .. 1.2, a fixed function of
 *              the tile (so a candidate other than the model's pick wins);
 * its driver key is "injected-<name>", never a real driver's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcirc/tune.h"

#include "runtime/cuda_driver.h"

enum { TUNE_TOP_DEFAULT = 4 };

typedef struct tune_ctx {
    mcir_compilation *c;
    mcir_diag *d;
    int mode;            /* 0 GPU, 1 model, 2 perturbed */
} tune_ctx;

static double injected_timer(void *vctx, mcir_plan *p, int kernel) {
    tune_ctx *x = vctx;
    const mcir_kernel_plan *k = &p->kernels[kernel];
    mcir_cost_options o = {.generated_only = true};
    mcir_kernel_cost c;
    mcir_cost_kernel(k, p->target, &o, &c);
    if (x->mode == 1) return c.modelled_us;
    const mcir_tiling *t = &k->tiling;
    long h = (long)(t->block_tile[0] * 7 + t->block_tile[1] * 3 + t->block_tile[2] + t->warps * 5 +
                    t->stages * 11);
    return c.modelled_us * (0.8 + 0.05 * (double)(h % 9));
}

static double gpu_timer(void *vctx, mcir_plan *p, int kernel) {
    (void)kernel;
    tune_ctx *x = vctx;
    mcir_codegen *cg = mcir_codegen_new(p, x->c->memory, x->d);
    if (!cg) return -1;
    double best = -1;
    if (mcir_codegen_compile(cg, p->target->name, x->d)) {
        mcir_env *env = mcir_env_new(x->c->graph, 0);
        for (int r = 0; r < 3; r++) {
            mcir_gpu_stats st;
            if (!mcir_gpu_run(cg, env, MCIR_ALLOC_POOL, &st, x->d)) {
                best = -1;
                break;
            }
            double us = st.elapsed_ms * 1e3;
            if (best < 0 || us < best) best = us;
        }
        mcir_env_free(env);
    }
    mcir_codegen_free(cg);
    return best;
}

/* The driver the measurements belong to: "injected-NAME", or
 * "cuda-VERSION" from cuDriverGetVersion (no device needed); false when
 * no driver loads. */
static bool driver_key(char *buf, size_t n, int *mode) {
    const char *e = getenv("MCIR_TUNE_TIMER");
    if (e && *e) {
        *mode = !strcmp(e, "model") ? 1 : !strcmp(e, "perturbed") ? 2 : -1;
        snprintf(buf, n, "injected-%s", e);
        return true;
    }
    *mode = 0;
    int v;
    if (!mcir_cu_driver_version(&v)) return false;
    snprintf(buf, n, "cuda-%d", v);
    return true;
}

static bool has_tunable(const mcir_plan *p) {
    char key[256];
    for (int i = 0; i < p->n_kernels; i++)
        if (mcir_tuning_key(&p->kernels[i], key, sizeof key)) return true;
    return false;
}

int mcirc_tune_stage(const mcir_options *o, mcir_compilation *c, mcir_diag *d) {
    mcir_plan *p = c->plan;
    if (!p || (!o->tune && !has_tunable(p))) return MCIR_EXIT_OK;
    char dir[1024], path[1100], driver[64];
    mcir_loc here = {"mcirc", 0, 0};
    if (!mcir_cache_dir(dir, sizeof dir)) {
        if (!o->tune) return MCIR_EXIT_OK;
        mcir_error(d, here, "--tune: no cache directory for the tuning cache (set MCIR_CACHE_DIR)");
        return MCIR_EXIT_TOOLCHAIN;
    }
    snprintf(path, sizeof path, "%s/tuning.tsv", dir);
    if (!o->tune) {
        /* later compiles: apply what an earlier --tune measured here */
        FILE *f = fopen(path, "r");
        if (!f) return MCIR_EXIT_OK;
        fclose(f);
        int mode;
        if (!driver_key(driver, sizeof driver, &mode)) return MCIR_EXIT_OK;
        mcir_tuning *t = mcir_tuning_load(path, d);
        if (!t) return MCIR_EXIT_INVALID;
        mcir_tuning_apply(p, t, driver);
        mcir_tuning_free(t);
        return MCIR_EXIT_OK;
    }
    tune_ctx x = {.c = c, .d = d};
    char why[256] = "";
    if (!driver_key(driver, sizeof driver, &x.mode) || x.mode < 0 ||
        (x.mode == 0 && !mcir_gpu_available(why, sizeof why))) {
        if (x.mode < 0)
            mcir_error(d, here, "MCIR_TUNE_TIMER=%s: unknown timer (model, perturbed)", getenv("MCIR_TUNE_TIMER"));
        else
            mcir_error(d, here, "--tune needs a GPU to time kernels on: %s",
                       why[0] ? why : "the CUDA driver (libcuda.so.1) does not load");
        return MCIR_EXIT_TOOLCHAIN;
    }
    mcir_tuning *t = mcir_tuning_load(path, d);
    if (!t) return MCIR_EXIT_INVALID;
    const char *no_blas = getenv("MCIR_NO_CUBLAS");
    if (x.mode == 0 && !no_blas) setenv("MCIR_NO_CUBLAS", "1", 1);   /* time the generated kernels */
    int n = mcir_plan_tune(p, o->tune_top > 0 ? o->tune_top : TUNE_TOP_DEFAULT,
                           x.mode ? injected_timer : gpu_timer, &x, t, driver, stderr);
    if (x.mode == 0 && !no_blas) unsetenv("MCIR_NO_CUBLAS");
    bool saved = n >= 0 && mcir_tuning_save(t, d);
    if (n >= 0)
        fprintf(stderr, "tune: %d kernel%s tuned on %s (%s), cache %s\n", n, n == 1 ? "" : "s",
                p->target->name, driver, path);
    mcir_tuning_free(t);
    if (n < 0) {
        mcir_error(d, here, "--tune: timing a candidate failed");
        return MCIR_EXIT_TOOLCHAIN;
    }
    return saved ? MCIR_EXIT_OK : MCIR_EXIT_TOOLCHAIN;
}
