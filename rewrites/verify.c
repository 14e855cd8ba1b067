/*
 * verify.c — a rewrite checked numerically: the graph before and after run
 * through the reference interpreter on the same seeded inputs (inputs are
 * seeded by name, and rewrites keep input and output names), outputs
 * compared by name within a tolerance per dtype.
 */
#include <math.h>
#include <string.h>

#include "rewrites/rewrites.h"

double mcir_rewrite_tolerance(mcir_dtype dtype) {
    return dtype == MCIR_DTYPE_F32 ? 1e-4 : 2e-2;
}

bool mcir_rewrite_verify(const mcir_graph *before, const mcir_graph *after, uint64_t seed,
                         FILE *report, mcir_diag *d) {
    mcir_env *eb = mcir_env_new(before, seed);
    mcir_env *ea = mcir_env_new(after, seed);
    bool ok = mcir_interp_run(before, eb, d) && mcir_interp_run(after, ea, d);
    for (int i = 0; ok && i < before->n_outputs; i++) {
        const mcir_tensor *tb = before->outputs[i];
        const mcir_tensor *ta = mcir_graph_find_tensor(after, tb->name);
        if (!ta || mcir_tensor_numel(ta) != mcir_tensor_numel(tb)) {
            mcir_error(d, (mcir_loc){after->path, 0, 0},
                       "output '%s' is missing from the rewritten graph or changed size",
                       tb->name);
            ok = false;
            break;
        }
        const float *vb = mcir_env_get(eb, tb), *va = mcir_env_get(ea, ta);
        if (!vb || !va) {
            mcir_error(d, (mcir_loc){after->path, 0, 0}, "output '%s' was not computed",
                       tb->name);
            ok = false;
            break;
        }
        int64_t n = mcir_tensor_numel(tb);
        double max_abs = 0, max_ref = 0;
        bool nan_mismatch = false;
        for (int64_t k = 0; k < n; k++) {
            double a = va[k], b = vb[k];
            if (isnan(a) != isnan(b)) nan_mismatch = true;
            if (isnan(a) || isnan(b)) continue;
            if (isinf(a) || isinf(b)) {
                if (a != b) nan_mismatch = true;
                continue;
            }
            double e = fabs(a - b);
            if (e > max_abs) max_abs = e;
            if (fabs(b) > max_ref) max_ref = fabs(b);
        }
        double rel = max_ref > 0 ? max_abs / max_ref : max_abs;
        double tol = mcir_rewrite_tolerance(tb->dtype);
        bool pass = !nan_mismatch && rel <= tol;
        if (report)
            fprintf(report, "output %s: max abs err %.3g, max rel err %.3g%s\n", tb->name,
                    max_abs, rel,
                    pass ? "" : nan_mismatch ? " (NaN/Inf mismatch)" : " (beyond tolerance)");
        if (!pass) ok = false;
    }
    mcir_env_free(eb);
    mcir_env_free(ea);
    return ok;
}
