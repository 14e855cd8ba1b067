/*
 * tpl_attention_sm90.c — instantiates templates/attention_sm90.cuh (TMA,
 * mbarriers, wgmma, warp specialisation) for an attention KernelPlan the
 * planner gave the sm_90a path (tiling dim "wg"; kernelplan/launch_sm90.c).
 *
 * Q, K and V are read by the Tensor Memory Accelerator through three 5-D
 * tensor maps — (head dim, row, leading dims innermost first), boxes of 64
 * columns x BLOCK rows, 128-byte swizzle — that the runtime encodes with
 * cuTensorMapEncodeTiled from the kernel's tensor-map descriptions
 * (mcir_codegen_kernel_tensor_maps) and passes as __grid_constant__
 * CUtensorMap parameters after the pointers. O is stored by the TMA
 * through a fourth map where its view has one (else through its view).
 * The wgmma wrappers are generated here: their asm names one register per
 * accumulator (N/2 per thread).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"

static int64_t tile_of(const mcir_tiling *t, const char *dim) {
    for (int i = 0; i < t->n_dims && i < MCIR_MAX_TILE_DIMS; i++)
        if (t->dim_names[i] && strcmp(t->dim_names[i], dim) == 0) return t->block_tile[i];
    return 0;
}

bool cg_attention_sm90_planned(const mcir_kernel_plan *kp) { return tile_of(&kp->tiling, "wg") > 0; }

/* void NAME(float* d, [const u32* a,] u64 [da,] u64 db[, int scale_d]):
 * wgmma.mma_async m64n<n>k16, f32 += {f16,bf16}; rs: A from registers and
 * B transposed (MN-major), else A and B from shared memory, K-major. */
static void emit_wgmma(cg_sb *b, const char *name, int n, bool rs, bool bf16) {
    const char *ab = bf16 ? "bf16" : "f16";
    int nd = n / 2;
    if (rs)
        cg_sb_printf(b, "__device__ __forceinline__ void %s(float* d, const u32* a, u64 db) {\n"
                        "#ifdef MC_EMULATE\n    emu_wgmma(d, %d, a, 0, db, 0, 1, 1, ATT_BF16);\n#else\n",
                     name, n);
    else
        cg_sb_printf(b, "__device__ __forceinline__ void %s(float* d, u64 da, u64 db, int scale_d) {\n"
                        "#ifdef MC_EMULATE\n    emu_wgmma(d, %d, 0, da, db, 0, 0, scale_d, ATT_BF16);\n#else\n",
                     name, n);
    cg_sb_puts(b, "    asm volatile(\"{\\n.reg .pred p;\\n");
    int arg = nd;   /* operands after the accumulators */
    if (rs)
        cg_sb_printf(b, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", n, ab, ab);
    else
        cg_sb_printf(b, "setp.ne.b32 p, %%%d, 0;\\n"
                        "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", nd + 2, n, ab, ab);
    for (int i = 0; i < nd; i++) cg_sb_printf(b, "%s%%%d", i ? ", " : "", i);
    if (rs)
        cg_sb_printf(b, "}, {%%%d, %%%d, %%%d, %%%d}, %%%d, 1, 1, 1, 1;\\n}\\n\"\n", arg, arg + 1, arg + 2, arg + 3,
                     arg + 4);
    else
        cg_sb_printf(b, "}, %%%d, %%%d, p, 1, 1, 0, 0;\\n}\\n\"\n", arg, arg + 1);
    cg_sb_puts(b, "        : ");
    for (int i = 0; i < nd; i++) cg_sb_printf(b, "%s\"+f\"(d[%d])%s", i ? ", " : "", i, i % 8 == 7 && i + 1 < nd ? "\n          " : "");
    if (rs) cg_sb_puts(b, "\n        : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db)\n        : \"memory\");\n");
    else cg_sb_puts(b, "\n        : \"l\"(da), \"l\"(db), \"r\"(scale_d)\n        : \"memory\");\n");
    cg_sb_puts(b, "#endif\n}\n");
}

/* The tensor map of operand view v (rank r, lead dims = O's), read `param`. */
static bool tensor_map_of(const cg_view *v, int param, mcir_dtype dt, int64_t rows_box, mcir_tensor_map_desc *m) {
    int r = v->rank, rl = r - 2;
    if (rl > 3 || v->stride[r - 1] != 1 || (v->offset * 2) % 16 != 0) return false;
    memset(m, 0, sizeof *m);
    m->read = param;
    m->offset = v->offset;
    m->dtype = dt == MCIR_DTYPE_BF16 ? 9 : 6;
    m->rank = 5;
    m->swizzle = 3;
    m->dims[0] = (uint64_t)v->shape[r - 1];
    m->dims[1] = (uint64_t)v->shape[r - 2];
    m->box[0] = 64;
    m->box[1] = (unsigned)rows_box;
    int64_t st[4] = {v->stride[r - 2], 0, 0, 0}, span = v->stride[r - 2] * v->shape[r - 2];
    for (int k = 0; k < 3; k++) {
        int vk = rl - 1 - k;   /* lead dims innermost first */
        m->dims[2 + k] = vk >= 0 ? (uint64_t)v->shape[vk] : 1;
        st[1 + k] = vk >= 0 ? v->stride[vk] : 0;
        m->box[2 + k] = 1;
        if (vk >= 0 && v->stride[vk] * v->shape[vk] > span) span = v->stride[vk] * v->shape[vk];
    }
    for (int k = 0; k < 4; k++) {
        if (m->dims[1 + k] == 1) st[k] = span;   /* never stepped: any legal stride */
        if (st[k] <= 0 || (st[k] * 2) % 16 != 0) return false;
        m->strides[k] = (uint64_t)st[k] * 2;
    }
    return true;
}

bool cg_gen_attention_sm90(cg_kernel *k, const mcir_target *target, mcir_diag *d) {
    mcir_kernel_plan *kp = k->kp;
    const mcir_node *n = kp->anchor;
    const mcir_tensor *Q = n->inputs[0], *K = n->inputs[1], *V = n->inputs[2], *O = n->outputs[0];
    (void)target;
    cg_view qv, kv, vv, ov;
    int qp, kpar, vp, op;
    if (n->n_inputs > 3 || !cg_view_of_input(kp, Q, &qv) || !cg_view_of_input(kp, K, &kv) ||
        !cg_view_of_input(kp, V, &vv) || (qp = cg_read_index(kp, qv.root)) < 0 ||
        (kpar = cg_read_index(kp, kv.root)) < 0 || (vp = cg_read_index(kp, vv.root)) < 0) {
        cg_error(d, kp, "the sm_90a attention template reads Q, K and V as kernel reads or views of them, no mask");
        return false;
    }
    if (!cg_view_of_output(kp, O, &ov) || (op = cg_write_index(kp, ov.root)) < 0 || kp->n_writes != 1) {
        cg_error(d, kp, "attention output '%s' must be the kernel's one write, directly or through a view",
                 O->name);
        return false;
    }
    const int rl = O->rank - 2;
    const int64_t NQ = Q->shape[Q->rank - 2], D = Q->shape[Q->rank - 1], NK = K->shape[K->rank - 2];
    int64_t NB = 1;
    for (int i = 0; i < rl; i++) NB *= O->shape[i];
    const int cwg = (int)tile_of(&kp->tiling, "wg"), bn = (int)tile_of(&kp->tiling, "kv");
    const int bm = 64 * cwg, stages = kp->tiling.stages > 0 ? kp->tiling.stages : 2;
    if (cwg < 1 || cwg > 2 || (bn != 64 && bn != 128) || (D != 64 && D != 128 && D != 256) ||
        V->shape[V->rank - 1] != D) {
        cg_error(d, kp, "sm_90a attention: tiles wg=%d kv=%d for d=%lld are not the template's", cwg, bn,
                 (long long)D);
        return false;
    }
    mcir_tensor_map_desc maps[3];
    if (!tensor_map_of(&qv, qp, Q->dtype, 64, &maps[0]) || !tensor_map_of(&kv, kpar, K->dtype, bn, &maps[1]) ||
        !tensor_map_of(&vv, vp, V->dtype, bn, &maps[2])) {
        cg_error(d, kp, "sm_90a attention: an operand view has no tensor map (innermost stride 1, 16-byte "
                        "aligned offset and strides, at most 3 leading dims)");
        return false;
    }
    for (int i = 0; i < 3; i++) {
        for (int j = 2; j < 5; j++)   /* the lead dims agree with O's (no broadcast) */
            if (maps[i].dims[j] != (uint64_t)(rl - 1 - (j - 2) >= 0 ? O->shape[rl - 1 - (j - 2)] : 1)) {
                cg_error(d, kp, "sm_90a attention: Q, K or V broadcast over a leading dim");
                return false;
            }
        k->tmaps[i] = maps[i];
    }
    k->n_tmaps = 3;
    /* O through a TMA store where its view has a tensor map with O's lead
     * dims (boxes of 64 columns x 64 rows); else the per-thread stores */
    const char *o_store = "per-thread stores";
    mcir_tensor_map_desc om;
    if (ov.root->dtype != Q->dtype) o_store = "per-thread stores (O's buffer is not Q's dtype)";
    else if (!tensor_map_of(&ov, kp->n_reads + op, ov.root->dtype, 64, &om))
        o_store = "per-thread stores (O's view has no tensor map)";
    else {
        bool same = true;
        for (int j = 2; j < 5; j++)
            same = same && om.dims[j] == (uint64_t)(rl - 1 - (j - 2) >= 0 ? O->shape[rl - 1 - (j - 2)] : 1);
        if (!same) o_store = "per-thread stores (O's view does not keep O's leading dims)";
        else {
            k->tmaps[k->n_tmaps++] = om;
            o_store = "TMA store";
        }
    }
    k->sm90a = true;
    float scale = mcir_node_attr(n, "scale") ? (float)mcir_node_float(n, "scale") : (float)(1.0 / sqrt((double)D));
    bool causal = mcir_node_bool(n, "causal"), bf16 = Q->dtype == MCIR_DTYPE_BF16;
    int64_t qtiles = (NQ + bm - 1) / bm;
    k->smem = (int64_t)cwg * 64 * D * 2 + (int64_t)stages * 2 * bn * D * 2 + 1024;

    cg_sb b = {0};
    cg_emitter e;
    cg_begin_source(&b, kp);
    cg_emitter_init(&e, kp, &b, NULL, d);
    cg_sb_printf(&b,
                 "#define ATT_NQ %lldLL\n#define ATT_NK %lldLL\n#define ATT_D %lld\n#define ATT_BN %d\n"
                 "#define ATT_CWG %d\n#define ATT_STAGES %d\n#define ATT_NB %lldLL\n#define ATT_QTILES %lldLL\n"
                 "#define ATT_CAUSAL %d\n#define ATT_BF16 %d\n",
                 (long long)NQ, (long long)NK, (long long)D, bn, cwg, stages, (long long)NB, (long long)qtiles,
                 causal, bf16);
    cg_sb_printf(&b, "#define ATT_TMA_STORE %d   // O: %s\n#define ATT_SCALE ", k->n_tmaps > 3, o_store);
    cg_sb_float(&b, scale);
    cg_sb_printf(&b, "\n#define ATT_O_T %s\n#define ATT_ST_O mc_st_%s\n#define O_SR %lldLL\n#define O_SD %lldLL\n",
                 cg_ctype(ov.root->dtype), cg_dsuffix(ov.root->dtype), (long long)ov.stride[ov.rank - 2],
                 (long long)ov.stride[ov.rank - 1]);
    /* o_off(b): O's element offset of (batch, head) b; att_lead: b as map coordinates 2..4 */
    cg_sb_printf(&b, "__device__ __forceinline__ i64 o_off(i64 b) {\n    i64 o = %lldLL; (void)b;\n",
                 (long long)ov.offset);
    for (int kk = rl - 1; kk >= 0; kk--) {
        int vk = kk - (rl - (ov.rank - 2));
        int64_t st = (vk >= 0 && ov.shape[vk] != 1) ? ov.stride[vk] : 0;
        if (st) cg_sb_printf(&b, "    o += (b %% %lldLL) * %lldLL;\n", (long long)O->shape[kk], (long long)st);
        cg_sb_printf(&b, "    b /= %lldLL;\n", (long long)O->shape[kk]);
    }
    cg_sb_puts(&b, "    return o;\n}\n__device__ __forceinline__ void att_lead(i64 b, int* c) {\n"
                   "    c[0] = c[1] = c[2] = 0; (void)b;\n");
    for (int kk = rl - 1, j = 0; kk >= 0 && j < 3; kk--, j++)
        cg_sb_printf(&b, "    c[%d] = (int)(b %% %lldLL);\n    b /= %lldLL;\n", j, (long long)O->shape[kk],
                     (long long)O->shape[kk]);
    cg_sb_puts(&b, "}\ntypedef unsigned long long u64;\n");
    emit_wgmma(&b, "att_wgmma_s", bn, false, bf16);
    emit_wgmma(&b, "att_wgmma_o", (int)D, true, bf16);
    cg_sb_puts(&b, mcir_tpl_attention_sm90);
    int threads = 128 * (1 + cwg);
    cg_emit_signature(&b, kp, threads);
    size_t len = b.len;
    MCIR_ASSERT(len >= 1 && b.s[len - 1] == ')');
    b.s[len - 1] = '\0';
    b.len = len - 1;
    cg_sb_puts(&b, ", const __grid_constant__ CUtensorMap mc_tmap_q, const __grid_constant__ CUtensorMap mc_tmap_k, "
                   "const __grid_constant__ CUtensorMap mc_tmap_v");
    cg_sb_puts(&b, k->n_tmaps > 3 ? ", const __grid_constant__ CUtensorMap mc_tmap_o)" : ")");
    cg_sb_printf(&b, " {\n    (void)r%d; (void)r%d; (void)r%d;\n"
                     "    mc_attention_sm90(&mc_tmap_q, &mc_tmap_k, &mc_tmap_v, %s, w%d);\n}\n",
                 qp, kpar, vp, k->n_tmaps > 3 ? "&mc_tmap_o" : "(const CUtensorMap*)0", op);
    bool ok = e.ok;
    cg_emitter_free(&e);
    if (!ok) {
        cg_sb_free(&b);
        return false;
    }
    k->source = cg_sb_take(&b);
    k->grid[0] = NB * qtiles;
    k->grid[1] = k->grid[2] = 1;
    k->block[0] = threads;
    k->block[1] = k->block[2] = 1;
    return true;
}
