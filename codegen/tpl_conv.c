/*
 * tpl_conv.c — a CONV2D KernelPlan (NCHW input, OIHW weights, groups,
 * strides, pads, dilations, optional bias, fused epilogue) as an implicit
 * GEMM on templates/matmul.cuh: per group, C[m, n] = sum_k A[m, k] B[k, n]
 * with m = (image, oh, ow), n = the group's output channel and
 * k = (ci, kh, kw). A is the im2col view of x, gathered on the fly (taps
 * outside the image are 0 and never loaded), B the weights as stored.
 * f16/bf16 run on tensor cores, f32 on FMA; tile, warps, stages and the
 * launch are the plan's (kernelplan/launch_gemm.c).
 */
#include <string.h>

#include "codegen/codegen-impl.h"

static void ints_or(const mcir_node *n, const char *name, int count, const int64_t *fallback,
                    int64_t *out) {
    const int64_t *v;
    if (mcir_node_attr(n, name) && mcir_node_ints(n, name, &v) == count) {
        memcpy(out, v, sizeof(int64_t) * (size_t)count);
        return;
    }
    memcpy(out, fallback, sizeof(int64_t) * (size_t)count);
}

bool cg_gen_conv2d(cg_kernel *k, const mcir_target *target, mcir_diag *d) {
    mcir_kernel_plan *kp = k->kp;
    const mcir_node *n = kp->anchor;
    const mcir_tensor *x = n->inputs[0], *w = n->inputs[1], *y = n->outputs[0];
    const mcir_tensor *bias = n->n_inputs > 2 ? n->inputs[2] : NULL;
    if (x->rank != 4 || w->rank != 4 || y->rank != 4) {
        cg_error(d, kp, "conv2d needs NCHW input and OIHW weights");
        return false;
    }
    for (int i = 0; i < kp->tiling.n_dims && i < MCIR_MAX_TILE_DIMS; i++)   /* the sm_90a template */
        if (kp->tiling.dim_names[i] && strcmp(kp->tiling.dim_names[i], "wg") == 0 && kp->tiling.block_tile[i] > 0)
            return cg_gen_gemm_sm90(k, target, d);
    mcir_gemm_problem gp;
    mcir_gemm_layout l;
    const char *why = "not a GEMM";
    if (!mcir_gemm_problem_of(kp, &gp) || !mcir_gemm_layout_of(target, &gp, &kp->tiling, &l, &why)) {
        cg_error(d, kp, "the plan's implicit-GEMM tile cannot be realised: %s", why);
        return false;
    }
    static const int64_t ones[2] = {1, 1}, zeros[4] = {0, 0, 0, 0};
    int64_t str[2], pads[4], dil[2];
    ints_or(n, "strides", 2, ones, str);
    ints_or(n, "pads", 4, zeros, pads);
    ints_or(n, "dilations", 2, ones, dil);
    int64_t groups = gp.batch;
    int64_t C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t O = w->shape[0], KH = w->shape[2], KW = w->shape[3], OH = y->shape[2], OW = y->shape[3];
    int64_t cg = C / groups, og = O / groups;

    cg_sb b = {0};
    cg_emitter e;
    cg_begin_source(&b, kp);
    cg_emitter_init(&e, kp, &b, y, d);
    cg_emit_value(&e, x);
    cg_emit_value(&e, w);
    if (bias) cg_emit_value(&e, bias);
    cg_emit_epilogue(&e, 1);
    if (!e.ok) {
        cg_emitter_free(&e);
        cg_sb_free(&b);
        return false;
    }
    cg_sb_printf(&b,
        "#define CV_C %lldLL\n#define CV_H %lldLL\n#define CV_W %lldLL\n#define CV_O %lldLL\n"
        "#define CV_KH %lldLL\n#define CV_KW %lldLL\n#define CV_OH %lldLL\n#define CV_OW %lldLL\n"
        "#define CV_CG %lldLL\n#define CV_OG %lldLL\n#define CV_SH %lldLL\n#define CV_SW %lldLL\n"
        "#define CV_PT %lldLL\n#define CV_PL %lldLL\n#define CV_DH %lldLL\n#define CV_DW %lldLL\n",
        (long long)C, (long long)H, (long long)W, (long long)O, (long long)KH, (long long)KW,
        (long long)OH, (long long)OW, (long long)cg, (long long)og, (long long)str[0],
        (long long)str[1], (long long)pads[0], (long long)pads[1], (long long)dil[0],
        (long long)dil[1]);
    /* GEMM view: m runs over (image, oh, ow) with ow fastest (coalesced
     * along a row of the image), k over (ci, kh, kw) as the weights store it */
    cg_sb_puts(&b, "#define MM_M ");
    if (cg_tensor_dynamic(x)) {   /* the batch, symbolic (only it may be: docs/graph-format.md) */
        cg_sb_puts(&b, "(");
        cg_sb_extent(&b, x, 0);
        cg_sb_printf(&b, " * %lldLL)", (long long)(OH * OW));
    } else {
        cg_sb_printf(&b, "%lldLL", (long long)gp.m);
    }
    cg_sb_printf(&b, "\n#define MM_N %lldLL\n#define MM_K %lldLL\n#define MM_BATCH %lldLL\n"
                     "#define MM_TRANS_A 1\n#define MM_TRANS_B 1\n",
                 (long long)gp.n, (long long)gp.k, (long long)groups);
    if (cg_dyn && kp->tiling.registers_estimate > 0)   /* the budget planned at the largest sizes */
        mcir_gemm_layout_budget(target, gp.mma, kp->tiling.registers_estimate, &l);
    cg_emit_gemm_tile(&b, &gp, &l);
    cg_sb_printf(&b,
        "__device__ __forceinline__ float a_at(i64 g, i64 m, i64 kk, MC_PARAMS) {\n"
        "    const i64 ow = m %% CV_OW, oh = (m / CV_OW) %% CV_OH, img = m / (CV_OW * CV_OH);\n"
        "    const i64 kw = kk %% CV_KW, kh = (kk / CV_KW) %% CV_KH, ci = kk / (CV_KW * CV_KH);\n"
        "    const i64 ih = oh * CV_SH - CV_PT + kh * CV_DH, iw = ow * CV_SW - CV_PL + kw * CV_DW;\n"
        "    if (ih < 0 || ih >= CV_H || iw < 0 || iw >= CV_W) return 0.0f;\n"
        "    return v%d(((img * CV_C + g * CV_CG + ci) * CV_H + ih) * CV_W + iw, 0.0f, MC_ARGS);\n"
        "}\n"
        "__device__ __forceinline__ float b_at(i64 g, i64 kk, i64 nn, MC_PARAMS) {\n"
        "    return v%d((g * CV_OG + nn) * MM_K + kk, 0.0f, MC_ARGS);\n"
        "}\n"
        "__device__ __forceinline__ void mm_store(i64 g, i64 m, i64 nn, float acc, MC_PARAMS) {\n"
        "    const i64 ow = m %% CV_OW, oh = (m / CV_OW) %% CV_OH, img = m / (CV_OW * CV_OH);\n"
        "    const i64 oc = g * CV_OG + nn;\n",
        x->id, w->id);
    if (bias)   /* bias is [O] (or a scalar): element oc */
        cg_sb_printf(&b, "    acc += v%d(%s, 0.0f, MC_ARGS);\n", bias->id,
                     mcir_tensor_numel(bias) == 1 ? "0" : "oc");
    cg_sb_puts(&b, "    epilogue(((img * CV_O + oc) * CV_OH + oh) * CV_OW + ow, acc, MC_ARGS);\n}\n");
    cg_sb_puts(&b, mcir_tpl_matmul);
    cg_emit_gemm_signature(&b, kp, &l);
    cg_sb_puts(&b, " {\n    mc_matmul(MC_ARGS);\n}\n");
    cg_emitter_free(&e);
    k->source = cg_sb_take(&b);
    return cg_gemm_launch(k, &gp, &l, d);
}
