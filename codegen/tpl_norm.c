/*
 * tpl_norm.c — instantiates templates/norm.cuh (softmax, layernorm,
 * rmsnorm) from a streaming-norm KernelPlan, realising the plan's row
 * layout (kernelplan/launch.c): a warp per row with the row in its lanes'
 * registers, or a block per row with the row in its threads' registers,
 * cached in dynamic shared memory in X's storage dtype (up to the opt-in
 * limit), split over a thread-block cluster (sm_90+: each block caches a
 * slice; the statistics meet through distributed shared memory), or read
 * twice. Where the plan's vector width is > 1 (X the
 * kernel's own read, rows contiguous, the width a multiple of it: every
 * access aligned by construction) X is read 16 bytes per lane (8 bytes
 * where only 4 | W), gamma/beta that are plain vectors over the normalised
 * axes alongside it by column, and the outputs stored packed, 16 bytes per
 * lane. A fused prologue (elementwise ops producing X) and epilogue
 * (elementwise ops after the norm) come from the value emitter.
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "kernelplan/launch.h"

/* Statements loading vec values of tensor t (kernel read ri) at element
 * IDX into out[]: 16-byte (8-byte) vector loads where the dtype and vec
 * allow (cg_emit_vec_load, the pointwise kernels' too; the caller proves
 * IDX a multiple of vec and t's buffer aligned), else the value function
 * element by element. */
static void emit_vec_load(cg_sb *b, const mcir_tensor *t, int ri, const char *idx, int vec) {
    int size = (int)mcir_dtype_size(t->dtype);
    bool floating = t->dtype == MCIR_DTYPE_F32 || t->dtype == MCIR_DTYPE_F16 || t->dtype == MCIR_DTYPE_BF16;
    if (ri >= 0 && vec % 4 == 0 && floating && (size == 4 || size == 2)) {
        cg_emit_vec_load(b, t, ri, idx, vec);
        return;
    }
    cg_sb_printf(b, "#pragma unroll\n    for (int u = 0; u < %d; u++) out[u] = v%d(%s + u, 0.0f, MC_ARGS);\n", vec,
                 t->id, idx);
}

/* x_load: NORM_V values of X at element xi. The plan's vector width > 1
 * only where X is the kernel's read with contiguous rows and vec | W
 * (kernelplan/launch.c), so no run-time alignment test. */
static void emit_x_load(cg_sb *b, const mcir_kernel_plan *kp, const mcir_tensor *x, int vec) {
    cg_sb_puts(b, "__device__ __forceinline__ void x_load(i64 xi, float* out, MC_PARAMS) {\n");
    emit_vec_load(b, x, cg_read_index(kp, x), "xi", vec);
    cg_sb_printf(b, "}\n__device__ __forceinline__ float x_first(i64 xi, MC_PARAMS) { return v%d(xi, 0.0f, MC_ARGS); }\n",
                 x->id);
}

/* Softmax's cache layouts with 16-bit X read 16 bytes a lane (V = 8): the
 * first pass puts the loaded bits in the cache as they are (no f32 ->
 * 16-bit repacking: 4 instructions a vector, in the pass that also
 * computes the exponentials) and unpacks them once for its statistics:
 * x_load_raw, raw_unpack, cache_put_raw (templates/norm.cuh NORM_RAW).
 * The other norms keep the repacking: the raw vectors would cost them
 * 10-20 registers for nothing they need. */
static void emit_raw(cg_sb *b, const mcir_kernel_plan *kp, const mcir_tensor *x) {
    const char *ds = cg_dsuffix(x->dtype);
    cg_sb_printf(b,
        "#define NORM_RAW 1\n"
        "__device__ __forceinline__ void x_load_raw(i64 xi, uint4* raw, MC_PARAMS) {\n"
        "    *raw = MC_GLDV(uint4, r%d, xi);\n}\n"
        "__device__ __forceinline__ void raw_unpack(const uint4 w, float* v) {\n"
        "    const u32 p[4] = {w.x, w.y, w.z, w.w};\n"
        "#pragma unroll\n    for (int k = 0; k < 4; k++) {\n"
        "        v[2 * k] = mc_%s_to_f32((unsigned short)(p[k] & 0xffffu));\n"
        "        v[2 * k + 1] = mc_%s_to_f32((unsigned short)(p[k] >> 16));\n    }\n}\n"
        "__device__ __forceinline__ void cache_put_raw(unsigned short* c, i64 j, const uint4 w) {\n"
        "    MC_SST(*(uint4*)(c + j), w);\n}\n",
        cg_read_index(kp, x), ds, ds);
}

/* Layout 2's cache of the row in X's storage dtype: cache_put / cache_get
 * move NORM_V values at column j, one 16-byte (8-byte) shared access where
 * the vector is that wide. X's values are rounded to its dtype already, so
 * the round trip is exact. */
static void emit_cache(cg_sb *b, const mcir_tensor *x, int vec) {
    bool half = x->dtype == MCIR_DTYPE_F16 || x->dtype == MCIR_DTYPE_BF16;
    const char *ds = cg_dsuffix(x->dtype);
    if (!half) {   /* f32 (a norm's X is f32, f16 or bf16) */
        cg_sb_puts(b, "#define NORM_CACHE_T float\n");
        if (vec % 4 == 0)
            cg_sb_printf(b,
                "__device__ __forceinline__ void cache_put(float* c, i64 j, const float* v) {\n"
                "#pragma unroll\n    for (int q = 0; q < %d; q += 4) {\n"
                "        float4 w; w.x = v[q]; w.y = v[q + 1]; w.z = v[q + 2]; w.w = v[q + 3];\n"
                "        MC_SST(*(float4*)(c + j + q), w);\n    }\n}\n"
                "__device__ __forceinline__ void cache_get(const float* c, i64 j, float* v) {\n"
                "#pragma unroll\n    for (int q = 0; q < %d; q += 4) {\n"
                "        const float4 w = MC_SLD(*(const float4*)(c + j + q));\n"
                "        v[q] = w.x; v[q + 1] = w.y; v[q + 2] = w.z; v[q + 3] = w.w;\n    }\n}\n", vec, vec);
        else
            cg_sb_printf(b,
                "__device__ __forceinline__ void cache_put(float* c, i64 j, const float* v) {\n"
                "#pragma unroll\n    for (int u = 0; u < %d; u++) MC_SST(c[j + u], v[u]);\n}\n"
                "__device__ __forceinline__ void cache_get(const float* c, i64 j, float* v) {\n"
                "#pragma unroll\n    for (int u = 0; u < %d; u++) v[u] = MC_SLD(c[j + u]);\n}\n", vec, vec);
        return;
    }
    cg_sb_puts(b, "#define NORM_CACHE_T unsigned short\n");
    if (vec % 4 == 0) {   /* u32 words of two values; a uint4 (8 values) or uint2 (4) a shared access */
        bool wide = vec % 8 == 0;
        const char *vt = wide ? "uint4" : "uint2";
        int per = wide ? 8 : 4;
        cg_sb_printf(b,
            "__device__ __forceinline__ void cache_put(unsigned short* c, i64 j, const float* v) {\n"
            "#pragma unroll\n    for (int q = 0; q < %d; q += %d) {\n        u32 p[%d];\n"
            "#pragma unroll\n        for (int k = 0; k < %d; k++) p[k] = mc_pack_%s(v[q + 2 * k], v[q + 2 * k + 1]);\n"
            "        %s w; w.x = p[0]; w.y = p[1];%s\n"
            "        MC_SST(*(%s*)(c + j + q), w);\n    }\n}\n"
            "__device__ __forceinline__ void cache_get(const unsigned short* c, i64 j, float* v) {\n"
            "#pragma unroll\n    for (int q = 0; q < %d; q += %d) {\n"
            "        const %s w = MC_SLD(*(const %s*)(c + j + q));\n"
            "        const u32 p[%d] = {w.x, w.y%s};\n"
            "#pragma unroll\n        for (int k = 0; k < %d; k++) {\n"
            "            v[q + 2 * k] = mc_%s_to_f32((unsigned short)(p[k] & 0xffffu));\n"
            "            v[q + 2 * k + 1] = mc_%s_to_f32((unsigned short)(p[k] >> 16));\n        }\n    }\n}\n",
            vec, per, per / 2, per / 2, ds, vt, wide ? " w.z = p[2]; w.w = p[3];" : "", vt, vec, per, vt, vt,
            per / 2, wide ? ", w.z, w.w" : "", per / 2, ds, ds);
        return;
    }
    cg_sb_printf(b,
        "__device__ __forceinline__ void cache_put(unsigned short* c, i64 j, const float* v) {\n"
        "#pragma unroll\n    for (int u = 0; u < %d; u++) MC_SST(c[j + u], mc_f32_to_%s(v[u]));\n}\n"
        "__device__ __forceinline__ void cache_get(const unsigned short* c, i64 j, float* v) {\n"
        "#pragma unroll\n    for (int u = 0; u < %d; u++) v[u] = mc_%s_to_f32(MC_SLD(c[j + u]));\n}\n",
        vec, ds, vec, ds);
}

/* Whether parameter p, broadcast against X, is a plain vector over the
 * normalised axes [axis, rank): its linear index is the column j. Decided
 * on the extents' polynomials where the dims range (cg_extents_equal):
 * gamma [8] against X [n, seq, 8] normalised over its last two axes is a
 * column only at seq = 1, so never. */
static bool param_is_column(const mcir_tensor *x, const mcir_tensor *p, int axis) {
    if (p->rank > x->rank) return false;
    int lead = x->rank - p->rank;
    for (int k = axis; k < lead; k++)   /* normalised axes p lacks: 1 */
        if (!cg_extent_is_one(x, k)) return false;
    for (int pk = 0; pk < p->rank; pk++) {
        int k = pk + lead;
        if (k < axis ? !cg_extent_is_one(p, pk) : !cg_extents_equal(p, pk, x, k)) return false;
    }
    return true;
}

/* void NAME_v(i64 j, i64 xi, float* out): vec values of parameter p
 * (gamma/beta) at column j (element xi of X): by the column, vectorised
 * with X, where p is a plain vector over the normalised axes; else through
 * the broadcast of the flat index, element by element. */
static void emit_param_v(cg_sb *b, const mcir_kernel_plan *kp, const char *name, const mcir_tensor *x,
                         const mcir_tensor *p, int axis, int vec) {
    if (param_is_column(x, p, axis)) {
        cg_sb_printf(b, "__device__ __forceinline__ void %s_v(i64 j, i64 xi, float* out, MC_PARAMS) {\n"
                        "    (void)xi;\n", name);
        emit_vec_load(b, p, cg_read_index(kp, p), "j", vec);
        cg_sb_puts(b, "}\n");
        return;
    }
    cg_sb_printf(b, "__device__ __forceinline__ float %s_at(i64 xi, MC_PARAMS) {\n    i64 j = 0; {\n"
                    "    i64 q_ = xi; i64 s_ = 1;\n", name);
    for (int k = x->rank - 1; k >= 0; k--) {
        cg_sb_puts(b, "   ");
        cg_emit_bcast_step(b, "j", "q_", "s_", x, k, p, k - (x->rank - p->rank), k > 0);
    }
    cg_sb_printf(b, "    (void)s_; }\n    return v%d(j, 0.0f, MC_ARGS);\n}\n", p->id);
    cg_sb_printf(b, "__device__ __forceinline__ void %s_v(i64 j, i64 xi, float* out, MC_PARAMS) {\n"
                    "    (void)j;\n#pragma unroll\n    for (int u = 0; u < %d; u++) out[u] = %s_at(xi + u, MC_ARGS);\n}\n",
                 name, vec, name);
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
    if (!mcir_rows_problem_of(cg_dyn, kp, &g) ||
        !mcir_rows_layout_of_tiling(target, &g, &kp->tiling, &l, &why)) {
        cg_error(d, kp, "internal error: the plan's norm tiling cannot be realised: %s", why);
        return false;
    }
    int64_t W = g.width, inner = g.inner, rows = g.rows;
    int vec = l.vector_width;
    bool warp_row = l.warp_row;
    int threads = l.threads;
    int lanes = warp_row ? 32 : threads;

    cg_sb b = {0};
    cg_emitter e;
    cg_begin_source(&b, kp);
    if (l.cluster > 1)   /* prelude.cuh mc_stv: NVVM scalarises the first vector store of a step */
        cg_sb_puts(&b, "#ifndef MC_EMULATE\n#undef MC_GSTV\n#define MC_GSTV(T, p, i, v) mc_stv((T*)((p) + (i)), (v))\n"
                       "#endif\n");
    cg_emitter_init(&e, kp, &b, y, d);
    cg_emit_value(&e, x);
    if (gamma) cg_emit_value(&e, gamma);
    if (beta) cg_emit_value(&e, beta);
    cg_emit_epilogue(&e, 1);
    if (e.ok) cg_emit_epilogue_vec(&e, vec);
    if (!e.ok) {
        cg_emitter_free(&e);
        cg_sb_free(&b);
        return false;
    }
    double eps = kind == 0 ? 0.0 : mcir_node_float(n, "eps");
    /* the row's width, the stride between its elements and the rows, as
     * products of x's extents (expressions of the dims where they depend
     * on one: the same source for every size) */
    bool wm[MCIR_MAX_RANK] = {0}, im[MCIR_MAX_RANK] = {0}, rm[MCIR_MAX_RANK] = {0};
    for (int i = 0; i < x->rank; i++) {
        wm[i] = kind == 0 ? i == axis : i >= axis;
        im[i] = kind == 0 && i > axis;
        rm[i] = !wm[i];
    }
    cg_sb_printf(&b, "#define NORM_KIND %d\n#define NORM_W ", kind);
    if (mcir_tensor_numel(x) == W * rows && (kind == 0 || inner == 1)) {
        cg_sb_prod(&b, x, wm);
        cg_sb_puts(&b, "\n#define NORM_INNER ");
        cg_sb_prod(&b, x, im);
        cg_sb_puts(&b, "\n#define NORM_ROWS ");
        cg_sb_prod(&b, x, rm);
    } else {   /* not the layout above: the integers (the rebinding check finds a difference) */
        cg_sb_printf(&b, "%lldLL\n#define NORM_INNER %lldLL\n#define NORM_ROWS %lldLL", (long long)W,
                     (long long)inner, (long long)rows);
    }
    /* 1 / W: a literal, or (a width that depends on a dimension) computed
     * once per thread from the dims */
    cg_sb_puts(&b, "\n#define NORM_INV_W ");
    if (cg_dyn && cg_tensor_dynamic(x))
        cg_sb_puts(&b, "(1.0f / (float)(NORM_W))");
    else
        cg_sb_float(&b, (float)(1.0 / (double)W));
    /* the registers layouts keep NORM_NCHUNK vectors a thread: for the
     * largest width in range where it depends on a dimension (the lanes
     * past the row's end idle) */
    if (l.mode == MCIR_ROWS_WARP_REGS || l.mode == MCIR_ROWS_BLOCK_REGS)
        cg_sb_printf(&b, "\n#define NORM_NCHUNK %d", l.chunks);
    cg_sb_printf(&b,
        "\n#define NORM_V %d\n#define NORM_LAYOUT %d\n#define NORM_LANES %d\n"
        "#define NORM_HAS_BETA %d\n#define NORM_EPS ",
        vec, (int)l.mode, lanes, beta != NULL);
    cg_sb_float(&b, (float)eps);
    cg_sb_puts(&b, "\n");
    if (l.mode == MCIR_ROWS_CLUSTER_SMEM) cg_sb_printf(&b, "#define NORM_CLUSTER %d\n", l.cluster);
    if (l.cache) emit_cache(&b, x, vec);
    if (kind == 0 && l.cache && vec == 8 && (x->dtype == MCIR_DTYPE_F16 || x->dtype == MCIR_DTYPE_BF16) &&
        cg_read_index(kp, x) >= 0)   /* softmax: its first pass is the costliest (online exponentials) */
        emit_raw(&b, kp, x);
    emit_x_load(&b, kp, x, vec);
    if (gamma) emit_param_v(&b, kp, "gamma", x, gamma, axis, vec);
    if (beta) emit_param_v(&b, kp, "beta", x, beta, axis, vec);
    cg_sb_puts(&b, mcir_tpl_norm);
    if (l.cluster > 1) {   /* a cluster per row: compile-time cluster dims, consecutive blocks */
        cg_sb_printf(&b, "extern \"C\" __global__ void __cluster_dims__(%d, 1, 1) __launch_bounds__(%d, %d) %s(MC_PARAMS)",
                     l.cluster, threads, kp->launch_min_blocks > 0 ? kp->launch_min_blocks : 1, kp->name);
    } else {
        cg_emit_signature(&b, kp, threads);
    }
    cg_sb_puts(&b, " {\n    mc_norm(MC_ARGS);\n}\n");
    cg_emitter_free(&e);
    k->source = cg_sb_take(&b);
    k->grid[0] = l.grid;
    k->grid[1] = k->grid[2] = 1;
    k->block[0] = threads;
    k->block[1] = k->block[2] = 1;
    k->smem = l.smem_bytes;
    k->smem_static = l.smem_static_bytes;
    k->cluster = l.cluster;
    return true;
}
