/*
 * tune.c — choice by measurement: the tuning cache and the tuner loop.
 * The cache is a tab-separated text file (one line per shape key, arch
 * and driver: the winning tile, its time and the time of the cost
 * model's pick); the tuner times the top candidates of each tunable
 * kernel (GEMM-shaped: matmul, conv2d) with a timer the caller supplies —
 * the GPU runtime in mcirc, a deterministic function in the tests.
 *
 * Invariant: a tile taken from the cache is applied only through
 * mcir_gemm_apply (legal for the target, the launch recomputed), and the
 * kernel's reason then starts with "tuned: measured X us vs model's pick
 * Y us".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelplan/plan-impl.h"

struct mcir_tuning {
    char *path;
    int n, cap;
    mcir_tuning_entry *e;
};

static void put_field(char *dst, size_t n, const char *src) {
    snprintf(dst, n, "%s", src);
    for (char *p = dst; *p; p++)
        if (*p == '\t' || *p == '\n' || *p == '\r') *p = ' ';
}

mcir_tuning *mcir_tuning_load(const char *path, mcir_diag *d) {
    mcir_tuning *t = calloc(1, sizeof *t);
    MCIR_ASSERT(t != NULL);
    t->path = strdup(path);
    MCIR_ASSERT(t->path != NULL);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return t;
        mcir_error(d, (mcir_loc){.path = path}, "cannot read the tuning cache: %s", strerror(errno));
        mcir_tuning_free(t);
        return NULL;
    }
    char line[1024];
    int ln = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (line[0] == '#' || line[0] == '\n') continue;
        mcir_tuning_entry e;
        memset(&e, 0, sizeof e);
        char *fields[10];
        int nf = 0;
        char *save = NULL;
        line[strcspn(line, "\n")] = 0;
        for (char *s = strtok_r(line, "\t", &save); s && nf < 10; s = strtok_r(NULL, "\t", &save))
            fields[nf++] = s;
        long long bm, bn, bk;
        if (nf != 10 || sscanf(fields[3], "%lld", &bm) != 1 || sscanf(fields[4], "%lld", &bn) != 1 ||
            sscanf(fields[5], "%lld", &bk) != 1 || sscanf(fields[6], "%d", &e.warps) != 1 ||
            sscanf(fields[7], "%d", &e.stages) != 1 || sscanf(fields[8], "%lf", &e.measured_us) != 1 ||
            sscanf(fields[9], "%lf", &e.model_pick_us) != 1) {
            mcir_error(d, (mcir_loc){.path = path, .line = ln, .col = 1},
                       "malformed tuning cache line (want key, arch, driver, BLOCK_M, BLOCK_N, "
                       "BLOCK_K, warps, stages, measured us, model's pick us, tab-separated)");
            fclose(f);
            mcir_tuning_free(t);
            return NULL;
        }
        put_field(e.key, sizeof e.key, fields[0]);
        put_field(e.arch, sizeof e.arch, fields[1]);
        put_field(e.driver, sizeof e.driver, fields[2]);
        e.bm = bm;
        e.bn = bn;
        e.bk = bk;
        mcir_tuning_put(t, &e);
    }
    fclose(f);
    return t;
}

bool mcir_tuning_save(const mcir_tuning *t, mcir_diag *d) {
    mcir_outfile o;
    if (!mcir_outfile_open(&o, t->path, d)) return false;
    fprintf(o.f, "# mcir tuning cache: key, arch, driver, BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, "
                 "measured us, model's pick us\n");
    for (int i = 0; i < t->n; i++) {
        const mcir_tuning_entry *e = &t->e[i];
        fprintf(o.f, "%s\t%s\t%s\t%lld\t%lld\t%lld\t%d\t%d\t%.4f\t%.4f\n", e->key, e->arch,
                e->driver, (long long)e->bm, (long long)e->bn, (long long)e->bk, e->warps,
                e->stages, e->measured_us, e->model_pick_us);
    }
    return mcir_outfile_commit(&o, d);
}

void mcir_tuning_free(mcir_tuning *t) {
    if (!t) return;
    free(t->path);
    free(t->e);
    free(t);
}

int mcir_tuning_count(const mcir_tuning *t) { return t ? t->n : 0; }

bool mcir_tuning_key(const mcir_kernel_plan *k, char *buf, size_t n) {
    mcir_gemm_problem g;
    if (!mcir_gemm_problem_of(k, &g)) return false;
    /* the sm_90a GEMM (tiling dim "wg"): its tiles are its launch model's
     * (launch_gemm_sm90.c), not among the candidates timed here */
    for (int i = 0; i < k->tiling.n_dims && i < MCIR_MAX_TILE_DIMS; i++)
        if (k->tiling.dim_names[i] && strcmp(k->tiling.dim_names[i], "wg") == 0 && k->tiling.block_tile[i] > 0)
            return false;
    int w = snprintf(buf, n, "%s %s M=%lld N=%lld K=%lld batch=%lld %c%c ops=",
                     mcir_template_name(k->tpl), mcir_dtype_name(g.dtype), (long long)g.m,
                     (long long)g.n, (long long)g.k, (long long)g.batch, k->trans_a ? 'T' : 'N',
                     k->trans_b ? 'T' : 'N');
    for (int i = 0; i < k->n_nodes && w > 0 && (size_t)w < n; i++)
        w += snprintf(buf + w, n - (size_t)w, "%s%s", i ? "," : "", mcir_op_name(k->nodes[i]->op));
    if (n) buf[n - 1] = 0;
    return true;
}

const mcir_tuning_entry *mcir_tuning_find(const mcir_tuning *t, const char *key, const char *arch,
                                          const char *driver) {
    for (int i = 0; t && i < t->n; i++)
        if (!strcmp(t->e[i].key, key) && !strcmp(t->e[i].arch, arch) && !strcmp(t->e[i].driver, driver))
            return &t->e[i];
    return NULL;
}

void mcir_tuning_put(mcir_tuning *t, const mcir_tuning_entry *e) {
    mcir_tuning_entry *old = (mcir_tuning_entry *)mcir_tuning_find(t, e->key, e->arch, e->driver);
    if (old) {
        *old = *e;
        return;
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        t->e = realloc(t->e, sizeof *t->e * (size_t)t->cap);
        MCIR_ASSERT(t->e != NULL);
    }
    t->e[t->n++] = *e;
}

static void tile_of(mcir_tiling *ti, const mcir_tuning_entry *e) {
    memset(ti, 0, sizeof *ti);
    ti->n_dims = 3;
    ti->dim_names[0] = "M";
    ti->dim_names[1] = "N";
    ti->dim_names[2] = "K";
    ti->block_tile[0] = e->bm;
    ti->block_tile[1] = e->bn;
    ti->block_tile[2] = e->bk;
    ti->warps = e->warps;
    ti->stages = e->stages;
}

static const char *tuned_reason(mcir_plan *p, const mcir_kernel_plan *k, const mcir_tuning_entry *e,
                                const char *model_reason) {
    return mcir_arena_printf(p->arena,
                             "tuned: measured %.2f us vs model's pick %.2f us (BLOCK_M=%lld BLOCK_N=%lld "
                             "BLOCK_K=%lld, %d warps, %d stage%s; tuning cache, %s, driver %s); model: %s",
                             e->measured_us, e->model_pick_us, (long long)e->bm, (long long)e->bn,
                             (long long)e->bk, e->warps, e->stages, e->stages > 1 ? "s" : "", e->arch,
                             e->driver, model_reason ? model_reason : k->tiling.reason);
}

int mcir_tuning_apply(mcir_plan *p, const mcir_tuning *t, const char *driver) {
    int applied = 0;
    char key[256];
    for (int i = 0; i < p->n_kernels && t; i++) {
        mcir_kernel_plan *k = &p->kernels[i];
        if (!mcir_tuning_key(k, key, sizeof key)) continue;
        const mcir_tuning_entry *e = mcir_tuning_find(t, key, p->target->name, driver);
        if (!e) continue;
        mcir_tiling ti;
        tile_of(&ti, e);
        const char *why = tuned_reason(p, k, e, NULL);
        applied += mcir_gemm_apply(p, k, &ti, why);   /* an illegal entry is ignored */
    }
    return applied;
}

int mcir_plan_tune(mcir_plan *p, int top_n, mcir_kernel_timer timer, void *ctx, mcir_tuning *t,
                   const char *driver, FILE *log) {
    if (top_n < 1) top_n = 1;
    mcir_gemm_candidate *cand = calloc((size_t)top_n, sizeof *cand);
    MCIR_ASSERT(cand != NULL);
    int tuned = 0;
    char key[256];
    for (int i = 0; i < p->n_kernels; i++) {
        mcir_kernel_plan *k = &p->kernels[i];
        if (!mcir_tuning_key(k, key, sizeof key)) continue;
        int n = mcir_gemm_candidates(p, k, cand, top_n);
        if (n > top_n) n = top_n;
        const char *model_reason = k->tiling.reason;
        mcir_tiling model_pick = k->tiling;
        int best = -1;
        double best_us = 0, pick_us = -1;
        for (int c = 0; c < n; c++) {
            bool ok = mcir_gemm_apply(p, k, &cand[c].tiling, NULL);
            MCIR_ASSERT(ok);
            double us = timer(ctx, p, i);
            if (us < 0) {
                free(cand);
                return -1;
            }
            bool is_pick = memcmp(cand[c].tiling.block_tile, model_pick.block_tile, sizeof model_pick.block_tile) == 0 &&
                           cand[c].tiling.warps == model_pick.warps && cand[c].tiling.stages == model_pick.stages;
            if (is_pick) pick_us = us;
            if (log)
                fprintf(log, "tune %s: %lldx%lldx%lld %d warps %d stage%s: model %.2f us, measured %.2f us%s\n",
                        k->name, (long long)cand[c].tiling.block_tile[0], (long long)cand[c].tiling.block_tile[1],
                        (long long)cand[c].tiling.block_tile[2], cand[c].tiling.warps, cand[c].tiling.stages,
                        cand[c].tiling.stages > 1 ? "s" : "", cand[c].modelled_us, us,
                        is_pick ? " (model's pick)" : "");
            if (best < 0 || us < best_us) {
                best = c;
                best_us = us;
            }
        }
        if (best < 0) continue;
        mcir_tuning_entry e;
        memset(&e, 0, sizeof e);
        put_field(e.key, sizeof e.key, key);
        put_field(e.arch, sizeof e.arch, p->target->name);
        put_field(e.driver, sizeof e.driver, driver);
        e.bm = cand[best].tiling.block_tile[0];
        e.bn = cand[best].tiling.block_tile[1];
        e.bk = cand[best].tiling.block_tile[2];
        e.warps = cand[best].tiling.warps;
        e.stages = cand[best].tiling.stages;
        e.measured_us = best_us;
        e.model_pick_us = pick_us >= 0 ? pick_us : best_us;
        mcir_tuning_put(t, &e);
        bool ok = mcir_gemm_apply(p, k, &cand[best].tiling, tuned_reason(p, k, &e, model_reason));
        MCIR_ASSERT(ok);
        tuned++;
    }
    free(cand);
    return tuned;
}
