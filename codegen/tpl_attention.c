/*
 * tpl_attention.c — instantiates the streaming-attention templates
 * (templates/attention_mma.cuh for f16/bf16, attention_fma.cuh for f32 or
 * mixed dtypes) from an attention KernelPlan.
 *
 * Q, K, V and the mask are read in place through strided views, so head
 * split / merge transposes and reshapes the planner folded into the region
 * cost no copy; O is written through the inverse view. Tiles come from the
 * plan's tiling ("q" / "kv") when the template can honour them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "kernelplan/launch.h"

typedef struct operand {
    cg_view v;
    int param;        /* index of the kernel read / write */
    char pname[16];   /* "r3" / "w0" */
} operand;

static int64_t tile_of(const mcir_tiling *t, const char *dim) {
    for (int i = 0; i < t->n_dims && i < MCIR_MAX_TILE_DIMS; i++)
        if (t->dim_names[i] && strcmp(t->dim_names[i], dim) == 0) return t->block_tile[i];
    return 0;
}

static bool resolve_in(const mcir_kernel_plan *kp, const mcir_tensor *t, operand *op) {
    if (!cg_view_of_input(kp, t, &op->v)) return false;
    op->param = cg_read_index(kp, op->v.root);
    snprintf(op->pname, sizeof op->pname, "r%d", op->param);
    return op->param >= 0;
}

/* i64 NAME(i64 b): offset of (batch, head) b over the leading dims `lead`
 * (rank rl) of the output, for a view whose last two dims are rows/cols
 * (broadcast: stride 0 where the view lacks the dim or has it as 1). */
static void emit_offset_fn(cg_sb *b, const char *name, const cg_view *v, int rl, const mcir_tensor *out,
                           int vlead) {
    cg_sb_printf(b, "__device__ __forceinline__ i64 %s(i64 b MC_DIMS_PARAMS) {\n    i64 o = ", name);
    cg_sb_view_offset(b, v);
    cg_sb_puts(b, "; (void)b;\n");
    for (int k = rl - 1; k >= 0; k--) {
        int vk = k - (rl - vlead);
        if (vk >= 0 && !cg_view_dim_is_one(v, vk) && (v->stride[vk] || cg_dyn)) {
            cg_sb_puts(b, "    o += (b % ");
            cg_sb_extent(b, out, k);
            cg_sb_puts(b, ") * ");
            cg_sb_view_stride(b, v, vk);
            cg_sb_puts(b, ";\n");
        }
        cg_sb_puts(b, "    b /= ");
        cg_sb_extent(b, out, k);
        cg_sb_puts(b, ";\n");
    }
    cg_sb_puts(b, "    return o;\n}\n");
}

static bool vec_ok(const cg_view *v, int rl_view, int64_t cols) {
    if (v->stride[v->rank - 1] != 1 || cols % 8 != 0 || v->offset % 8 != 0) return false;
    for (int k = 0; k < rl_view + 1; k++)
        if (v->shape[k] != 1 && v->stride[k] % 8 != 0) return false;
    return true;
}


void cg_emit_attention_partials(cg_sb *b, const char *items, const char *rows, const char *splits, int64_t dv,
                                bool dims) {
    const char *dp = dims ? " MC_DIMS_PARAMS" : "";
    cg_sb_printf(b,
        "// partials in the scratch P: O [items][rows][splits][dv], then (max, sum) [items][rows][splits][2]\n"
        "__device__ __forceinline__ i64 att_partial_o(i64 b, i64 r, i64 s%s) {\n"
        "    return ((b * %s + r) * %s + s) * %lldLL;\n}\n"
        "__device__ __forceinline__ i64 att_partial_ml(i64 b, i64 r, i64 s%s) {\n"
        "    return %s * %s * %s * %lldLL + ((b * %s + r) * %s + s) * 2;\n}\n",
        dp, rows, splits, (long long)dv, dp, items, rows, splits, (long long)dv, rows, splits);
}

/* The merge: per query row, m = max_s m_s, l = sum_s l_s e^(m_s - m),
 * O = sum_s O_s e^(m_s - m) / l (weighted_streaming_reduction's
 * online-softmax merge); the entry is the kernel's name + "_merge" and
 * takes the kernel's pointers and the scratch. */
void cg_emit_attention_merge(cg_sb *b, const char *kernel, const char *out, int block, const char *items,
                             const char *rows, const char *splits, int64_t dv, bool dims, const char *prologue) {
    const char *da = dims ? " MC_DIMS_ARGS" : "";
    cg_sb_printf(b,
        "#define MC_MERGE_ENTRY_(n) n##_merge\n#define MC_MERGE_ENTRY(n) MC_MERGE_ENTRY_(n)\n"
        "extern \"C\" __global__ void __launch_bounds__(%d) MC_MERGE_ENTRY(%s)(MC_PARAMS, const float* P) {\n"
        "%s"
        "    for (i64 row = blockIdx.x; row < %s * %s; row += gridDim.x) {\n"
        "        const i64 b = row / %s, qi = row %% %s;\n"
        "        float m = MC_NINF, l = 0.0f;\n"
        "        for (int s = 0; s < (int)%s; s++) m = fmaxf(m, mc_ld_f32(P, att_partial_ml(b, qi, s%s)));\n"
        "        for (int s = 0; s < (int)%s; s++) {\n"
        "            const float ms = mc_ld_f32(P, att_partial_ml(b, qi, s%s));\n"
        "            if (ms != MC_NINF) l += mc_ld_f32(P, att_partial_ml(b, qi, s%s) + 1) * expf(ms - m);\n"
        "        }\n"
        "        for (int dv = threadIdx.x; dv < %lld; dv += blockDim.x) {\n"
        "            float acc = 0.0f;\n"
        "            for (int s = 0; s < (int)%s; s++) {\n"
        "                const float ms = mc_ld_f32(P, att_partial_ml(b, qi, s%s));\n"
        "                if (ms != MC_NINF) acc += mc_ld_f32(P, att_partial_o(b, qi, s%s) + dv) * expf(ms - m);\n"
        "            }\n"
        "            ATT_ST_O(%s, att_o_at(b, qi%s) + (i64)dv * O_SD, l > 0.0f ? acc / l : 0.0f);\n"
        "        }\n"
        "    }\n}\n",
        block, kernel, prologue ? prologue : "", items, rows, rows, rows, splits, da, splits, da, da, (long long)dv, splits, da, da, out,
        da);
}

bool cg_gen_attention(cg_kernel *k, const mcir_target *target, mcir_diag *d) {
    mcir_kernel_plan *kp = k->kp;
    const mcir_node *n = kp->anchor;
    if (n->op != MCIR_OP_ATTENTION) {
        cg_error(d, kp, "the streaming-attention template needs an attention anchor, got '%s'",
                 mcir_op_name(n->op));
        return false;
    }
    if (cg_sm90a_planned(kp)) {
        /* the sm_90a template realises launch_sm90.c's plan, its static
         * shared memory (barriers) included */
        if (!cg_gen_attention_sm90(k, target, d)) return false;
        k->smem_static = kp->smem_static_bytes;
        return true;
    }
    const mcir_tensor *Q = n->inputs[0], *K = n->inputs[1], *V = n->inputs[2];
    const mcir_tensor *M = n->n_inputs > 3 ? n->inputs[3] : NULL, *O = n->outputs[0];
    operand q, kk, v, m, o;
    const char *bad = NULL;
    if (!resolve_in(kp, Q, &q)) bad = Q->name;
    else if (!resolve_in(kp, K, &kk)) bad = K->name;
    else if (!resolve_in(kp, V, &v)) bad = V->name;
    else if (M && !resolve_in(kp, M, &m)) bad = M->name;
    if (bad) {
        cg_error(d, kp, "attention operand '%s' is neither a kernel read nor a transpose/reshape/slice "
                        "view of one", bad);
        return false;
    }
    if (!cg_view_of_output(kp, O, &o.v) || (o.param = cg_write_index(kp, o.v.root)) < 0) {
        cg_error(d, kp, "attention output '%s' must be written directly or through transposes/reshapes",
                 O->name);
        return false;
    }
    snprintf(o.pname, sizeof o.pname, "w%d", o.param);
    for (int w = 0; w < kp->n_writes; w++)
        if (w != o.param) {
            cg_error(d, kp, "writes '%s' besides the attention output; epilogues after attention are "
                            "not fused", kp->writes[w]->name);
            return false;
        }

    const int rl = O->rank - 2;
    const int64_t D = Q->shape[Q->rank - 1], DV = V->shape[V->rank - 1];
    int64_t NB = 1;
    for (int i = 0; i < rl; i++) NB *= O->shape[i];
    float scale = mcir_node_attr(n, "scale") ? (float)mcir_node_float(n, "scale")
                                              : (float)(1.0 / sqrt((double)D));
    bool causal = mcir_node_bool(n, "causal");
    bool mma = Q->dtype != MCIR_DTYPE_F32 && Q->dtype == K->dtype && Q->dtype == V->dtype;
    if (D % 8 != 0 || DV % 8 != 0) mma = false;   /* the FMA path takes any head dim */

    /* the plan's tiles (kernelplan/launch.c), realised as planned */
    mcir_attention_problem g;
    mcir_attention_layout l;
    const char *why = "";
    if (!mcir_attention_problem_of(kp, &g) ||
        !mcir_attention_layout_of_tiling(target, &g, &kp->tiling, &l, &why)) {
        cg_error(d, kp, "internal error: the plan's attention tiling cannot be realised: %s", why);
        return false;
    }
    if (g.mma != mma) {
        cg_error(d, kp, "internal error: the launch model and the template disagree on the %s path",
                 mma ? "tensor-core" : "FMA");
        return false;
    }
    int warps = l.warps, bm = (int)l.bm, bn = (int)l.bn, rpw = l.rows_per_warp;
    int64_t qtiles = l.qtiles, chunk = l.chunk, splits = l.splits;
    /* split-KV as the plan decided at the largest sizes (its scratch): at
     * another size the kernel keeps the split path, its split count
     * ceil(Nk / chunk) taken at launch (1 where Nk fits one chunk) */
    bool split = kp->scratch_bytes > 0 && tile_of(&kp->tiling, "kv_split") > 0;
    if (split && splits <= 1) {
        chunk = tile_of(&kp->tiling, "kv_split");
        splits = (g.nk + chunk - 1) / chunk;
        mcir_attention_merge_launch(g.batch_heads * g.nq, g.dv, &l.merge_grid, &l.merge_block);
        l.scratch_bytes = g.batch_heads * g.nq * splits * (g.dv + 2) * 4;
    }
    k->smem = l.smem_bytes;
    k->smem_static = l.smem_static_bytes;
    if (split && kp->scratch_bytes < l.scratch_bytes) {
        cg_error(d, kp, "split-KV attention needs %lld bytes of scratch, the plan gives %lld",
                 (long long)l.scratch_bytes, (long long)kp->scratch_bytes);
        return false;
    }

    cg_sb b = {0};
    cg_emitter e;
    cg_begin_source(&b, kp);
    cg_emitter_init(&e, kp, &b, NULL, d);
    /* the problem's extents: expressions of the dims where they depend on one */
    cg_sb nq = {0}, nb = {0};
    bool lead_mask[MCIR_MAX_RANK] = {0};
    for (int i = 0; i < rl; i++) lead_mask[i] = true;
    cg_sb_extent(&nq, Q, Q->rank - 2);
    cg_sb_prod(&nb, O, lead_mask);
    cg_sb_printf(&b, "#define ATT_NQ %s\n#define ATT_NK ", nq.s);
    cg_sb_extent(&b, K, K->rank - 2);
    cg_sb_printf(&b, "\n#define ATT_D %lld\n#define ATT_DV %lld\n#define ATT_DP %lld\n#define ATT_DVP %lld\n"
                     "#define ATT_NB %s\n#define ATT_QTILES ",
                 (long long)D, (long long)DV, (long long)l.dp, (long long)l.dvp, nb.s);
    if (cg_tensor_dynamic(Q)) cg_sb_printf(&b, "((ATT_NQ + %dLL) / %dLL)", bm - 1, bm);
    else cg_sb_printf(&b, "%lldLL", (long long)qtiles);
    cg_sb_printf(&b, "\n#define ATT_BM %d\n#define ATT_WARPS %d\n#define ATT_CAUSAL %d\n#define ATT_HAS_MASK %d\n",
                 bm, warps, causal, M != NULL);
    if (mma)
        cg_sb_printf(&b, "#define ATT_BN %d\n#define ATT_BF16 %d\n#define ATT_VEC_Q %s\n"
                         "#define ATT_VEC_K %s\n#define ATT_VEC_V %s\n",
                     bn, Q->dtype == MCIR_DTYPE_BF16, vec_ok(&q.v, q.v.rank - 2, D) ? "true" : "false",
                     vec_ok(&kk.v, kk.v.rank - 2, D) ? "true" : "false",
                     vec_ok(&v.v, v.v.rank - 2, DV) ? "true" : "false");
    else
        cg_sb_printf(&b, "#define ATT_RPW %d\n", rpw);
    if (split) {
        cg_sb_printf(&b, "#define ATT_CHUNK %lldLL\n#define ATT_SPLITS ", (long long)chunk);
        if (cg_tensor_dynamic(K)) cg_sb_puts(&b, "((ATT_NK + ATT_CHUNK - 1) / ATT_CHUNK)");
        else cg_sb_printf(&b, "%lldLL", (long long)splits);
        cg_sb_puts(&b, "\n");
        cg_emit_attention_partials(&b, nb.s, nq.s, "ATT_SPLITS", DV, true);
    }
    cg_sb_puts(&b, "#define ATT_SCALE ");
    cg_sb_float(&b, scale);
    cg_sb_puts(&b, "\n");
    const struct { const char *p; const operand *op; const mcir_tensor *t; } ops[] = {
        {"Q", &q, Q}, {"K", &kk, K}, {"V", &v, V}, {"O", &o, O}, {"M", M ? &m : NULL, M}};
    for (int i = 0; i < 5; i++) {
        const operand *op = ops[i].op;
        if (!op) {
            cg_sb_puts(&b, "#define ATT_M_T float\n#define ATT_LD_M mc_ld_f32\n#define M_SR 0LL\n#define M_SC 0LL\n"
                           "__device__ __forceinline__ i64 m_off(i64 b MC_DIMS_PARAMS) { (void)b; return 0; }\n");
            continue;
        }
        const mcir_tensor *root = op->v.root;
        cg_sb_printf(&b, "#define ATT_%s_T %s\n", ops[i].p, cg_ctype(root->dtype));
        cg_sb_printf(&b, i == 3 ? "#define ATT_ST_O mc_st_%s\n" : "#define ATT_LD_%s mc_ld_%s\n",
                     i == 3 ? cg_dsuffix(root->dtype) : ops[i].p, cg_dsuffix(root->dtype));
        int r = op->v.rank;
        int64_t sr = 0, sc = 0;
        if (i == 4) {
            /* mask broadcast to [lead.., NQ, NK]: rows / cols may be missing or 1 */
            if (r >= 2 && !cg_view_dim_is_one(&op->v, r - 2)) sr = 1;
            if (r >= 1 && !cg_view_dim_is_one(&op->v, r - 1)) sc = 1;
            cg_sb_puts(&b, "#define M_SR ");
            if (sr) cg_sb_view_stride(&b, &op->v, r - 2);
            else cg_sb_puts(&b, "0LL");
            cg_sb_puts(&b, "\n#define M_SC ");
            if (sc) cg_sb_view_stride(&b, &op->v, r - 1);
            else cg_sb_puts(&b, "0LL");
            cg_sb_puts(&b, "\n");
        } else {
            cg_sb_printf(&b, "#define %s_SR ", ops[i].p);
            cg_sb_view_stride(&b, &op->v, r - 2);
            cg_sb_printf(&b, "\n#define %s_SD ", ops[i].p);
            cg_sb_view_stride(&b, &op->v, r - 1);
            cg_sb_puts(&b, "\n");
        }
        char fn[8];
        snprintf(fn, sizeof fn, "%c_off", ops[i].p[0] + ('a' - 'A'));
        emit_offset_fn(&b, fn, &op->v, rl, O, r - 2 > 0 ? r - 2 : 0);
    }
    if (mma) {
        /* the mma path is all-16-bit for Q/K/V; the ATT_*_T above must agree */
        cg_sb_puts(&b, mcir_tpl_attention_mma);
    } else {
        cg_sb_puts(&b, mcir_tpl_attention_fma);
    }
    int threads = warps * 32;
    cg_emit_signature(&b, kp, threads);
    if (split) {
        /* the split kernel takes the scratch after its reads and writes */
        size_t len = b.len;
        MCIR_ASSERT(len >= 1 && b.s[len - 1] == ')');
        b.s[len - 1] = '\0';
        b.len = len - 1;
        cg_sb_puts(&b, ", float* mc_scratch)");
    }
    cg_sb_printf(&b, " {\n    mc_attention(%s, %s, %s, %s, %s%s MC_DIMS_ARGS);\n}\n", q.pname, kk.pname, v.pname,
                 M ? m.pname : "(const float*)0", o.pname, split ? ", mc_scratch" : "");
    if (split) {
        cg_sb_puts(&b, "__device__ __forceinline__ i64 att_o_at(i64 b, i64 qi MC_DIMS_PARAMS) {\n"
                       "    return o_off(b MC_DIMS_ARGS) + qi * O_SR;\n}\n");
        cg_emit_attention_merge(&b, kp->name, o.pname, l.merge_block, nb.s, nq.s, "ATT_SPLITS", DV, true, NULL);
        k->merge_block = l.merge_block;
        k->merge_grid = l.merge_grid;
    }
    bool ok = e.ok;
    cg_sb_free(&nq);
    cg_sb_free(&nb);
    cg_emitter_free(&e);
    if (!ok) {
        cg_sb_free(&b);
        return false;
    }
    k->source = cg_sb_take(&b);
    k->grid[0] = l.grid;
    k->grid[1] = k->grid[2] = 1;
    k->block[0] = threads;
    k->block[1] = k->block[2] = 1;
    return true;
}
