/*
 * tpl_norm.c — instantiates templates/norm.cuh (softmax, layernorm,
 * rmsnorm) from a streaming-norm KernelPlan, realising the plan's row
 * layout (kernelplan/launch.c): a warp per row (row in registers, the
 * plan's warps = rows per block) or a block per row with the row cached in
 * dynamic shared memory up to 11776 elements (46 KB, no opt-in) and
 * re-read beyond; 4-wide vector loads where the row is contiguous in a
 * kernel read. A fused prologue (elementwise ops producing X) and epilogue
 * (elementwise ops after the norm) come from the value emitter.
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "kernelplan/launch.h"

/* Statements loading NORM_V values of X at xi into out[]. */
static void emit_x_load(cg_sb *b, const mcir_kernel_plan *kp, const mcir_tensor *x, int vec) {
    cg_sb_puts(b, "__device__ __forceinline__ void x_load(i64 xi, float* out, MC_PARAMS) {\n");
    int ri = cg_read_index(kp, x);
    if (vec == 4 && ri >= 0) {
        if (x->dtype == MCIR_DTYPE_F32)
            cg_sb_printf(b,
                "    const float* p = r%d + xi;\n"
                "    if ((((unsigned long long)p) & 15ull) == 0) {\n"
                "        float4 v = MC_GLDV(float4, r%d, xi);\n"
                "        out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;\n"
                "        return;\n"
                "    }\n", ri, ri);
        else
            cg_sb_printf(b,
                "    const unsigned short* p = r%d + xi;\n"
                "    if ((((unsigned long long)p) & 7ull) == 0) {\n"
                "        uint2 v = MC_GLDV(uint2, r%d, xi);\n"
                "        out[0] = mc_%s_to_f32((unsigned short)(v.x & 0xffffu)); out[1] = mc_%s_to_f32((unsigned short)(v.x >> 16));\n"
                "        out[2] = mc_%s_to_f32((unsigned short)(v.y & 0xffffu)); out[3] = mc_%s_to_f32((unsigned short)(v.y >> 16));\n"
                "        return;\n"
                "    }\n", ri, ri, cg_dsuffix(x->dtype), cg_dsuffix(x->dtype), cg_dsuffix(x->dtype),
                cg_dsuffix(x->dtype));
    }
    cg_sb_printf(b, "    for (int u = 0; u < %d; u++) out[u] = v%d(xi + u, 0.0f, MC_ARGS);\n}\n", vec, x->id);
}

/* float NAME(i64 xi): parameter p (gamma/beta) broadcast against X. */
static void emit_param_at(cg_sb *b, const char *name, const mcir_tensor *x, const mcir_tensor *p) {
    cg_sb_printf(b, "__device__ __forceinline__ float %s(i64 xi, MC_PARAMS) {\n    i64 j = 0; {\n"
                    "    i64 q_ = xi; i64 s_ = 1;\n", name);
    for (int k = x->rank - 1; k >= 0; k--) {
        int pk = k - (x->rank - p->rank);
        if (pk >= 0 && p->shape[pk] != 1)
            cg_sb_printf(b, "    j += (q_ %% %lldLL) * s_;", (long long)x->shape[k]);
        if (k > 0) cg_sb_printf(b, " q_ /= %lldLL;", (long long)x->shape[k]);
        if (pk >= 0) cg_sb_printf(b, " s_ *= %lldLL;", (long long)p->shape[pk]);
        cg_sb_puts(b, "\n");
    }
    cg_sb_printf(b, "    (void)s_; }\n    return v%d(j, 0.0f, MC_ARGS);\n}\n", p->id);
}

bool cg_gen_norm(cg_kernel *k, const mcir_target *target, mcir_diag *d) {
    mcir_kernel_plan *kp = k->kp;
    const mcir_node *n = kp->anchor;
    int kind = n->op == MCIR_OP_SOFTMAX ? 0 : n->op == MCIR_OP_LAYERNORM ? 1 : n->op == MCIR_OP_RMSNORM ? 2 : -1;
    if (kind < 0) {
        cg_error(d, kp, "the streaming-norm template needs softmax, layernorm or rmsnorm, got '%s'",
                 mcir_op_name(n->op));
        return false;
    }
    const mcir_tensor *x = n->inputs[0], *y = n->outputs[0];
    const mcir_tensor *gamma = kind > 0 ? n->inputs[1] : NULL;
    const mcir_tensor *beta = kind == 1 && n->n_inputs > 2 ? n->inputs[2] : NULL;
    int axis;
    if (!mcir_norm_axis(mcir_node_int(n, "axis"), x->rank, &axis)) {
        cg_error(d, kp, "axis out of range");
        return false;
    }
    /* the plan's launch (kernelplan/launch.c), realised as planned */
    mcir_rows_problem g;
    mcir_rows_layout l;
    const char *why = "";
    if (!mcir_rows_problem_of(kp, &g) || !mcir_rows_layout_of_tiling(target, &g, &kp->tiling, &l, &why)) {
        cg_error(d, kp, "internal error: the plan's norm tiling cannot be realised: %s", why);
        return false;
    }
    int64_t W = g.width, inner = g.inner, rows = g.rows;
    int vec = l.vector_width;
    bool warp_row = l.warp_row, cache = l.cache;
    int threads = l.threads;
    int lanes = warp_row ? 32 : threads;
    (void)axis;

    cg_sb b = {0};
    cg_emitter e;
    cg_begin_source(&b, kp);
    cg_emitter_init(&e, kp, &b, y, d);
    cg_emit_value(&e, x);
    if (gamma) cg_emit_value(&e, gamma);
    if (beta) cg_emit_value(&e, beta);
    cg_emit_epilogue(&e, 1);
    if (!e.ok) {
        cg_emitter_free(&e);
        cg_sb_free(&b);
        return false;
    }
    double eps = kind == 0 ? 0.0 : mcir_node_float(n, "eps");
    cg_sb_printf(&b,
        "#define NORM_KIND %d\n#define NORM_W %lldLL\n#define NORM_INNER %lldLL\n#define NORM_ROWS %lldLL\n"
        "#define NORM_V %d\n#define NORM_WARP_ROW %d\n#define NORM_CACHE %d\n#define NORM_LANES %d\n"
        "#define NORM_HAS_BETA %d\n#define NORM_EPS ",
        kind, (long long)W, (long long)inner, (long long)rows, vec, warp_row, cache, lanes, beta != NULL);
    cg_sb_float(&b, (float)eps);
    cg_sb_puts(&b, "\n");
    emit_x_load(&b, kp, x, vec);
    if (gamma) emit_param_at(&b, "gamma_at", x, gamma);
    if (beta) emit_param_at(&b, "beta_at", x, beta);
    cg_sb_puts(&b, mcir_tpl_norm);
    cg_emit_signature(&b, kp, threads);
    cg_sb_puts(&b, " {\n    mc_norm(MC_ARGS);\n}\n");
    cg_emitter_free(&e);
    k->source = cg_sb_take(&b);
    k->grid[0] = l.grid;
    k->grid[1] = k->grid[2] = 1;
    k->block[0] = threads;
    k->block[1] = k->block[2] = 1;
    k->smem = l.smem_bytes;
    k->smem_static = l.smem_static_bytes;
    return true;
}
