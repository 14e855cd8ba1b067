/*
 * tpl_attention_sm90.c — instantiates templates/attention_sm90.cuh (TMA,
 * mbarriers, wgmma, warp specialisation) for an attention KernelPlan the
 * planner gave the sm_90a path (tiling dim "wg"), exactly as
 * kernelplan/launch_sm90.c laid it out (mcir_attention_sm90_layout: tiles,
 * GQA packing, the mask's form, split-KV).
 *
 * Q, K, V and the mask are read by the Tensor Memory Accelerator through
 * 5-D tensor maps — (columns, rows, leading dims innermost first) — that
 * the runtime encodes with cuTensorMapEncodeTiled from the kernel's
 * tensor-map descriptions (mcir_codegen_kernel_tensor_maps) and passes as
 * __grid_constant__ CUtensorMap parameters after the pointers (and the
 * split-KV scratch). Where K and V broadcast over a leading dim (GQA, MQA)
 * their map has extent 1 there and the kernel's coordinate is 0: a K/V
 * head is read in place for every query head that shares it. A packed
 * GQA group's heads are rows of Q's and O's maps. O is stored by the TMA
 * through one more map where its view has one (else per thread). The
 * wgmma wrappers are generated here: their asm names one register per
 * accumulator (N/2 per thread).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "kernelplan/launch_sm90.h"

static int64_t tile_of(const mcir_tiling *t, const char *dim) {
    for (int i = 0; i < t->n_dims && i < MCIR_MAX_TILE_DIMS; i++)
        if (t->dim_names[i] && strcmp(t->dim_names[i], dim) == 0) return t->block_tile[i];
    return 0;
}

bool cg_sm90a_planned(const mcir_kernel_plan *kp) { return tile_of(&kp->tiling, "wg") > 0; }

/* void NAME(float* d, [const u32* a,] u64 [da,] u64 db[, int scale_d]):
 * wgmma.mma_async m64n<n>k16, f32 += {f16,bf16}; rs: A from registers
 * (D accumulated onto: scale-d 1), else A from shared memory, K-major or
 * (tnsp_a) MN-major; B from shared memory K-major or (tnsp_b) MN-major.
 * Shared by the sm_90a GEMM. */
void cg_emit_wgmma(cg_sb *b, const char *name, int n, bool rs, bool bf16, bool tnsp_a, bool tnsp_b) {
    const char *ab = bf16 ? "bf16" : "f16";
    int nd = n / 2;
    if (rs)
        cg_sb_printf(b, "__device__ __forceinline__ void %s(float* d, const u32* a, u64 db) {\n"
                        "#ifdef MC_EMULATE\n    emu_wgmma(d, %d, a, 0, db, 0, %d, 1, %d);\n#else\n",
                     name, n, tnsp_b, bf16);
    else
        cg_sb_printf(b, "__device__ __forceinline__ void %s(float* d, u64 da, u64 db, int scale_d) {\n"
                        "#ifdef MC_EMULATE\n    emu_wgmma(d, %d, 0, da, db, %d, %d, scale_d, %d);\n#else\n",
                     name, n, tnsp_a, tnsp_b, bf16);
    cg_sb_puts(b, "    asm volatile(\"{\\n.reg .pred p;\\n");
    int arg = nd;   /* operands after the accumulators */
    if (rs)
        cg_sb_printf(b, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", n, ab, ab);
    else
        cg_sb_printf(b, "setp.ne.b32 p, %%%d, 0;\\n"
                        "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", nd + 2, n, ab, ab);
    for (int i = 0; i < nd; i++) cg_sb_printf(b, "%s%%%d", i ? ", " : "", i);
    if (rs)
        cg_sb_printf(b, "}, {%%%d, %%%d, %%%d, %%%d}, %%%d, 1, 1, 1, %d;\\n}\\n\"\n", arg, arg + 1, arg + 2, arg + 3,
                     arg + 4, tnsp_b);
    else
        cg_sb_printf(b, "}, %%%d, %%%d, p, 1, 1, %d, %d;\\n}\\n\"\n", arg, arg + 1, tnsp_a, tnsp_b);
    cg_sb_puts(b, "        : ");
    for (int i = 0; i < nd; i++) cg_sb_printf(b, "%s\"+f\"(d[%d])%s", i ? ", " : "", i, i % 8 == 7 && i + 1 < nd ? "\n          " : "");
    if (rs) cg_sb_puts(b, "\n        : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db)\n        : \"memory\");\n");
    else cg_sb_puts(b, "\n        : \"l\"(da), \"l\"(db), \"r\"(scale_d)\n        : \"memory\");\n");
    cg_sb_puts(b, "#endif\n}\n");
}

/* The leading dims of an item: O's leading dims but the packed one,
 * innermost first (at most 3: a map has 5 dims). */
typedef struct item_dims {
    int n;
    int dim[3];        /* O's dim index */
    int64_t size[3];
} item_dims;

static void item_dims_of(const mcir_tensor *O, int pack_dim, item_dims *it) {
    memset(it, 0, sizeof *it);
    for (int i = O->rank - 3; i >= 0 && it->n < 3; i--)
        if (i != pack_dim) {
            it->dim[it->n] = i;
            it->size[it->n++] = O->shape[i];
        }
}

/* View v's dim for O's dim i (right-aligned over O's rank); -1: absent. */
static int vdim(const cg_view *v, const mcir_tensor *O, int i) {
    int k = i - (O->rank - v->rank);
    return k >= 0 ? k : -1;
}

static int map_dtype(mcir_dtype t) { return t == MCIR_DTYPE_F32 ? 7 : t == MCIR_DTYPE_BF16 ? 9 : 6; }

/* A tensor map of view v (parameter `param`): columns (unit stride), rows
 * (`rows` of stride `row_stride` elements; 1: never stepped), the item
 * dims (extent 1 where v broadcasts or lacks them); boxes of box_cols x
 * box_rows, `swizzle` (CUtensorMapSwizzle). False when a stride is not a
 * positive multiple of 16 bytes or the base is not 16-byte aligned. */
static bool map_of(const cg_view *v, const mcir_tensor *O, const item_dims *it, int param, int64_t rows,
                   int64_t row_stride, unsigned box_cols, unsigned box_rows, int swizzle, mcir_tensor_map_desc *m) {
    const int es = mcir_dtype_size(v->root->dtype), r = v->rank;
    if (v->stride[r - 1] != 1 || (v->offset * es) % 16 != 0) return false;
    memset(m, 0, sizeof *m);
    m->read = param;
    m->offset = v->offset;
    m->esize = es;
    m->dtype = map_dtype(v->root->dtype);
    m->rank = 5;
    m->swizzle = swizzle;
    m->dims[0] = (uint64_t)v->shape[r - 1];
    m->dims[1] = (uint64_t)rows;
    m->box[0] = box_cols;
    m->box[1] = box_rows;
    int64_t st[4] = {row_stride, 0, 0, 0}, span = 16;
    for (int k = 0; k < r; k++)
        if (v->stride[k] * v->shape[k] > span) span = v->stride[k] * v->shape[k];
    for (int k = 0; k < 3; k++) {
        int vk = k < it->n ? vdim(v, O, it->dim[k]) : -1;
        bool real = vk >= 0 && v->shape[vk] != 1;
        m->dims[2 + k] = real ? (uint64_t)v->shape[vk] : 1;
        st[1 + k] = real ? v->stride[vk] : 0;
        m->box[2 + k] = 1;
    }
    for (int k = 0; k < 4; k++) {
        if (m->dims[1 + k] == 1) st[k] = span;   /* never stepped: any legal stride */
        if (st[k] <= 0 || (st[k] * es) % 16 != 0) return false;
        m->strides[k] = (uint64_t)st[k] * (uint64_t)es;
    }
    return true;
}

/* void att_coords_X(i64 b, int* c): item b's coordinates 2..4 in map m */
static void emit_coords(cg_sb *b, const char *x, const item_dims *it, const mcir_tensor_map_desc *m,
                        const cg_view *v, const mcir_tensor *O) {
    cg_sb_printf(b, "__device__ __forceinline__ void att_coords_%s(i64 b, int* c) {\n    (void)b;\n", x);
    for (int k = 0; k < 3; k++) {
        int vk = k < it->n ? vdim(v, O, it->dim[k]) : -1;
        /* the operand has the dim (not 1 for every size; with integer
         * extents, the map's extent) */
        bool real = k < it->n && (cg_dyn ? vk >= 0 && !cg_view_dim_is_one(v, vk) : m->dims[2 + k] > 1);
        if (real) {
            cg_sb_printf(b, "    c[%d] = (int)(b %% ", k);
            cg_sb_extent(b, O, it->dim[k]);
            cg_sb_puts(b, ");\n");
        } else {
            cg_sb_printf(b, "    c[%d] = 0;\n", k);
        }
        if (k < it->n && k + 1 < it->n) {
            cg_sb_puts(b, "    b /= ");
            cg_sb_extent(b, O, it->dim[k]);
            cg_sb_puts(b, ";\n");
        }
    }
    cg_sb_puts(b, "}\n");
}

/* The rows of view v (Q, O, a mask that varies over the queries) as the
 * kernel indexes them: row r of an item is query r % nq of packed head
 * r / nq; uniform when the packed dim steps by whole heads. Returns the
 * row stride, or 0 when the rows are not uniform. */
static int64_t packed_row_stride(const cg_view *v, const mcir_tensor *O, const mcir_attention_sm90 *l) {
    int64_t sr = v->rank >= 2 && v->shape[v->rank - 2] != 1 ? v->stride[v->rank - 2] : 0;
    if (l->pack <= 1) return l->nq == 1 ? 1 : sr;   /* one row: never stepped */
    int j = vdim(v, O, l->pack_dim);
    int64_t sg = j >= 0 && v->shape[j] != 1 ? v->stride[j] : 0;
    if (l->nq == 1) return sg;
    return sg == l->nq * sr ? sr : 0;
}

bool cg_gen_attention_sm90(cg_kernel *k, const mcir_target *target, mcir_diag *d) {
    mcir_kernel_plan *kp = k->kp;
    const mcir_node *n = kp->anchor;
    const mcir_tensor *Q = n->inputs[0], *K = n->inputs[1], *V = n->inputs[2], *O = n->outputs[0];
    const mcir_tensor *M = n->n_inputs > 3 ? n->inputs[3] : NULL;
    mcir_attention_sm90 l;
    const char *why = NULL;
    if (!mcir_attention_sm90_layout(target, kp, &l, &why) || tile_of(&kp->tiling, "q") != l.bm ||
        tile_of(&kp->tiling, "kv") != l.bn || tile_of(&kp->tiling, "wg") != l.consumers) {
        cg_error(d, kp, "internal error: the plan's sm_90a attention tiling is not the launch model's: %s",
                 why ? why : "tiles differ");
        return false;
    }
    cg_view qv, kv, vv, mv, ov;
    int qp, kpar, vp, mp = -1, op;
    if (!cg_view_of_input(kp, Q, &qv) || !cg_view_of_input(kp, K, &kv) || !cg_view_of_input(kp, V, &vv) ||
        (qp = cg_read_index(kp, qv.root)) < 0 || (kpar = cg_read_index(kp, kv.root)) < 0 ||
        (vp = cg_read_index(kp, vv.root)) < 0 ||
        (M && (!cg_view_of_input(kp, M, &mv) || (mp = cg_read_index(kp, mv.root)) < 0))) {
        cg_error(d, kp, "the sm_90a attention template reads Q, K, V and the mask as kernel reads or views of them");
        return false;
    }
    if (!cg_view_of_output(kp, O, &ov) || (op = cg_write_index(kp, ov.root)) < 0 || kp->n_writes != 1) {
        cg_error(d, kp, "attention output '%s' must be the kernel's one write, directly or through a view",
                 O->name);
        return false;
    }
    const int64_t D = l.d, NR = l.rows;
    item_dims it;
    item_dims_of(O, l.pack_dim, &it);
    int64_t q_sr = packed_row_stride(&qv, O, &l);
    mcir_tensor_map_desc maps[5];
    bool ok = q_sr > 0 && map_of(&qv, O, &it, qp, NR, q_sr, 64, 64, 3, &maps[0]) &&
              map_of(&kv, O, &it, kpar, l.nk, kv.stride[kv.rank - 2], 64, (unsigned)l.bn, 3, &maps[1]) &&
              map_of(&vv, O, &it, vp, l.nk, vv.stride[vv.rank - 2], 64, (unsigned)l.bn, 3, &maps[2]);
    int nm = 3;
    if (ok && l.mask == MCIR_SM90_MASK_ROWS) {
        int64_t m_sr = packed_row_stride(&mv, O, &l);
        int mb = l.bn * l.mask_esize < 128 ? (int)(l.bn * l.mask_esize) : 128;   /* box row bytes */
        ok = m_sr > 0 && map_of(&mv, O, &it, mp, NR, m_sr, (unsigned)(mb / l.mask_esize), 64,
                                mb == 128 ? 3 : mb == 64 ? 2 : 1, &maps[nm++]);
    } else if (ok && l.mask == MCIR_SM90_MASK_ONE_ROW) {
        ok = map_of(&mv, O, &it, mp, 1, 0, (unsigned)l.bn, 1, 0, &maps[nm++]);
    }
    if (!ok) {
        cg_error(d, kp, "internal error: an operand view of the sm_90a attention has no tensor map (innermost "
                        "stride 1, 16-byte aligned offset and strides, whole packed heads)");
        return false;
    }
    /* O through a TMA store where its view has a tensor map with O's item
     * dims (boxes of 64 columns x 64 rows); else the per-thread stores */
    const char *o_store = "per-thread stores";
    mcir_tensor_map_desc om;
    int64_t o_sr = packed_row_stride(&ov, O, &l);
    if (l.split_kv) o_store = "split-KV partials, merged by NAME_merge";
    else if (ov.root->dtype != Q->dtype) o_store = "per-thread stores (O's buffer is not Q's dtype)";
    else if (o_sr <= 0 || !map_of(&ov, O, &it, kp->n_reads + op, NR, o_sr, 64, 64, 3, &om))
        o_store = "per-thread stores (O's view has no tensor map)";
    else {
        bool same = true;
        for (int j = 0; j < it.n; j++) same = same && om.dims[2 + j] == (uint64_t)it.size[j];
        if (!same) o_store = "per-thread stores (O's view does not keep O's leading dims)";
        else o_store = "TMA store";
    }
    bool tma_store = strcmp(o_store, "TMA store") == 0;
    k->n_tmaps = 0;
    for (int i = 0; i < nm; i++) k->tmaps[k->n_tmaps++] = maps[i];
    if (tma_store) k->tmaps[k->n_tmaps++] = om;
    k->sm90a = true;
    float scale = mcir_node_attr(n, "scale") ? (float)mcir_node_float(n, "scale") : (float)(1.0 / sqrt((double)D));
    bool causal = mcir_node_bool(n, "causal"), bf16 = Q->dtype == MCIR_DTYPE_BF16;
    k->smem = l.smem_bytes;

    cg_sb b = {0};
    cg_emitter e;
    cg_begin_source(&b, kp);
    cg_emitter_init(&e, kp, &b, NULL, d);
    /* the problem's extents: expressions of the dims where they depend on
     * one, read from shared memory (the template's functions take no
     * parameters; the entry fills mc_sdims) */
    bool dyn = cg_dyn && (cg_tensor_dynamic(Q) || cg_tensor_dynamic(K) || cg_tensor_dynamic(O));
    cg_emit_sdims_decl(&b);
    cg_dims_smem = true;
    bool lead_mask[MCIR_MAX_RANK] = {0};
    for (int i = 0; i < O->rank - 2; i++) lead_mask[i] = i != l.pack_dim;
    cg_sb nq_s = {0}, items_b = {0};
    cg_sb_extent(&nq_s, Q, Q->rank - 2);
    cg_sb_prod(&items_b, O, lead_mask);
    if (dyn) {
        cg_sb_printf(&b, "#define ATT_NR (%s * %lldLL)\n#define ATT_NQ %s\n#define ATT_PACK %lld\n#define ATT_NK ",
                     nq_s.s, (long long)l.pack, nq_s.s, (long long)l.pack);
        cg_sb_extent(&b, K, K->rank - 2);
        cg_sb_printf(&b, "\n#define ATT_NB %s\n#define ATT_QTILES ((ATT_NR + %lldLL) / %lldLL)\n", items_b.s,
                     (long long)(l.bm - 1), (long long)l.bm);
        if (l.split_kv) cg_sb_puts(&b, "#define ATT_SPLITS ((ATT_NK + ATT_CHUNK - 1) / ATT_CHUNK)\n");
        else cg_sb_puts(&b, "#define ATT_SPLITS 1\n");
    } else {
        cg_sb_printf(&b, "#define ATT_NR %lldLL\n#define ATT_NQ %lldLL\n#define ATT_PACK %lld\n#define ATT_NK %lldLL\n"
                         "#define ATT_NB %lldLL\n#define ATT_QTILES %lldLL\n#define ATT_SPLITS %lld\n",
                     (long long)NR, (long long)l.nq, (long long)l.pack, (long long)l.nk, (long long)l.items,
                     (long long)l.qtiles, (long long)l.splits);
    }
    cg_sb_printf(&b,
                 "#define ATT_SPLIT_KV %d\n#define ATT_D %lld\n#define ATT_BN %lld\n#define ATT_CWG %d\n"
                 "#define ATT_STAGES %d\n#define ATT_CAUSAL %d\n#define ATT_BF16 %d\n"
                 "#define ATT_MASK %d\n#define ATT_PRODUCER_REGS %d\n#define ATT_CONSUMER_REGS %d\n#define ATT_CHUNK ",
                 l.split_kv, (long long)D, (long long)l.bn, l.consumers, l.stages, causal, bf16, (int)l.mask,
                 l.producer_regs, l.consumer_regs);
    if (dyn && !l.split_kv) cg_sb_puts(&b, "ATT_NK\n");   /* one chunk: every key */
    else cg_sb_printf(&b, "%lldLL\n", (long long)l.chunk);
    cg_sb_printf(&b, "#define ATT_TMA_STORE %d   // O: %s\n#define ATT_O_STAGE %d\n", tma_store, o_store,
                 tma_store && l.o_stage);
    /* causal: the longest items first, in sections of as many K/V heads as
     * half the L2 holds (at the run's key count) */
    cg_sb_printf(&b, "#define ATT_ORDER %d\n#define ATT_SEC ((i64)%lldLL / ((i64)ATT_NK * %lldLL))\n"
                     "#define ATT_DYNAMIC %d\n#define ATT_CLUSTER %d\n#define ATT_SCALE ",
                 causal ? 1 : 0, (long long)(target->l2_bytes / 2), (long long)(2 * D * 2), kp->sched_bytes > 0,
                 l.cluster);
    cg_sb_float(&b, scale);
    cg_sb_printf(&b, "\n#define ATT_O_T %s\n#define ATT_ST_O mc_st_%s\n#define O_SD ", cg_ctype(ov.root->dtype),
                 cg_dsuffix(ov.root->dtype));
    cg_sb_view_stride(&b, &ov, ov.rank - 1);
    cg_sb_puts(&b, "\n");
    if (M) {
        const char *cv = M->dtype == MCIR_DTYPE_F32    ? "__uint_as_float(mc_lds_u32(a))"
                         : M->dtype == MCIR_DTYPE_BF16 ? "mc_bf16_to_f32(mc_lds_u16(a))"
                                                       : "mc_f16_to_f32(mc_lds_u16(a))";
        cg_sb_printf(&b, "#define ATT_M_ES %d\n#define ATT_MASK_VAL(a) (%s)\n", l.mask_esize, cv);
        /* a column pair (even column: 4 or 8 bytes aligned) in one load */
        const char *pair = M->dtype == MCIR_DTYPE_F32
                               ? "do { const u64 mp_ = mc_lds_u64(a); m0 = __uint_as_float((u32)mp_); "
                                 "m1 = __uint_as_float((u32)(mp_ >> 32)); } while (0)"
                           : M->dtype == MCIR_DTYPE_BF16
                               ? "do { const u32 mp_ = mc_lds_u32(a); m0 = __uint_as_float(mp_ << 16); "
                                 "m1 = __uint_as_float(mp_ & 0xffff0000u); } while (0)"
                               : "do { const u32 mp_ = mc_lds_u32(a); m0 = mc_f16_to_f32((unsigned short)(mp_ & 0xffffu)); "
                                 "m1 = mc_f16_to_f32((unsigned short)(mp_ >> 16)); } while (0)";
        cg_sb_printf(&b, "#define ATT_MASK_PAIR(a, m0, m1) %s\n", pair);
    }
    /* o_off(b): O's element offset of item b; att_o_row(r): of row r of an
     * item (query r % NQ of packed head r / NQ) */
    cg_sb_puts(&b, "__device__ __forceinline__ i64 o_off(i64 b) {\n    i64 o = ");
    cg_sb_view_offset(&b, &ov);
    cg_sb_puts(&b, "; (void)b;\n");
    for (int j = 0; j < it.n; j++) {
        int vk = vdim(&ov, O, it.dim[j]);
        if (vk >= 0 && !cg_view_dim_is_one(&ov, vk) && (ov.stride[vk] || dyn)) {
            cg_sb_puts(&b, "    o += (b % ");
            cg_sb_extent(&b, O, it.dim[j]);
            cg_sb_puts(&b, ") * ");
            cg_sb_view_stride(&b, &ov, vk);
            cg_sb_puts(&b, ";\n");
        }
        cg_sb_puts(&b, "    b /= ");
        cg_sb_extent(&b, O, it.dim[j]);
        cg_sb_puts(&b, ";\n");
    }
    cg_sb_puts(&b, "    return o;\n}\n__device__ __forceinline__ i64 att_o_row(i64 r) {\n    return (r / ATT_NQ) * ");
    int gk = l.pack > 1 ? vdim(&ov, O, l.pack_dim) : -1;
    if (gk >= 0) cg_sb_view_stride(&b, &ov, gk);
    else cg_sb_puts(&b, "0LL");
    cg_sb_puts(&b, " + (r % ATT_NQ) * ");
    if (!cg_view_dim_is_one(&ov, ov.rank - 2) && (ov.stride[ov.rank - 2] || dyn))
        cg_sb_view_stride(&b, &ov, ov.rank - 2);
    else
        cg_sb_puts(&b, "0LL");
    cg_sb_puts(&b, ";\n}\n");
    cg_sb_puts(&b, "__device__ __forceinline__ i64 att_o_at(i64 b, i64 r) { return o_off(b) + att_o_row(r); }\n");
    static const char *const names[] = {"q", "k", "v"};
    const cg_view *views[3] = {&qv, &kv, &vv};
    for (int i = 0; i < 3; i++) emit_coords(&b, names[i], &it, &maps[i], views[i], O);
    if (nm > 3) emit_coords(&b, "m", &it, &maps[3], &mv, O);
    if (tma_store) emit_coords(&b, "o", &it, &om, &ov, O);
    if (l.split_kv) cg_emit_attention_partials(&b, "ATT_NB", "ATT_NR", "ATT_SPLITS", D, false);
    cg_dims_smem = false;
    cg_sb_puts(&b, mcir_tpl_hopper);
    cg_emit_wgmma(&b, "att_wgmma_s", (int)l.bn, false, bf16, false, false);
    cg_emit_wgmma(&b, "att_wgmma_o", (int)D, true, bf16, false, true);
    cg_sb_puts(&b, mcir_tpl_attention_sm90);
    if (l.max_registers > 0)   /* one consumer group: the planned budget (CUDA 12.4 on) */
        cg_sb_printf(&b, "#if defined(MC_EMULATE)\n#define ATT_LAUNCH_BOUNDS\n"
                         "#elif __CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && "
                         "__CUDACC_VER_MINOR__ >= 4)\n#define ATT_LAUNCH_BOUNDS __maxnreg__(%d)\n"
                         "#else\n#define ATT_LAUNCH_BOUNDS __launch_bounds__(%d, 1)\n#endif\n"
                         "extern \"C\" __global__ void %sATT_LAUNCH_BOUNDS %s(MC_PARAMS)",
                     l.max_registers, l.threads, l.cluster > 1 ? "__cluster_dims__(2, 1, 1) " : "", kp->name);
    else
        cg_emit_signature_cluster(&b, kp, l.threads, l.cluster);
    size_t len = b.len;
    MCIR_ASSERT(len >= 1 && b.s[len - 1] == ')');
    b.s[len - 1] = '\0';
    b.len = len - 1;
    if (l.split_kv) cg_sb_puts(&b, ", float* mc_scratch");
    if (kp->sched_bytes > 0) cg_sb_puts(&b, ", u32* mc_sched");
    static const char *const tnames[] = {"q", "k", "v", "m", "o"};
    const char *tname[5];
    for (int i = 0; i < k->n_tmaps; i++) {
        tname[i] = tnames[i < 3 ? i : (i == 3 && nm > 3) ? 3 : 4];
        cg_sb_printf(&b, ", const __grid_constant__ CUtensorMap mc_tmap_%s", tname[i]);
    }
    cg_sb_printf(&b, ") {\n    (void)r%d; (void)r%d; (void)r%d;\n", qp, kpar, vp);
    cg_emit_sdims_fill(&b);
    if (M) cg_sb_printf(&b, "    (void)r%d;\n", mp);
    cg_sb_printf(&b, "    mc_attention_sm90(&mc_tmap_q, &mc_tmap_k, &mc_tmap_v, %s, %s, w%d, %s, %s);\n}\n",
                 nm > 3 ? "&mc_tmap_m" : "(const CUtensorMap*)0", tma_store ? "&mc_tmap_o" : "(const CUtensorMap*)0",
                 op, l.split_kv ? "mc_scratch" : "(float*)0", kp->sched_bytes > 0 ? "mc_sched" : "(u32*)0");
    k->sched = kp->sched_bytes > 0;
    if (l.split_kv) {
        char out[16];
        snprintf(out, sizeof out, "w%d", op);
        cg_sb fill = {0};
        cg_emit_sdims_fill(&fill);
        cg_emit_attention_merge(&b, kp->name, out, l.merge_block, "ATT_NB", "ATT_NR", "ATT_SPLITS", D, false, fill.s);
        cg_sb_free(&fill);
        k->merge_block = l.merge_block;
        k->merge_grid = l.merge_grid;
    }
    ok = e.ok;
    cg_emitter_free(&e);
    cg_sb_free(&nq_s);
    cg_sb_free(&items_b);
    if (!ok) {
        cg_sb_free(&b);
        return false;
    }
    k->source = cg_sb_take(&b);
    k->cluster = l.cluster;   /* __cluster_dims__: the emulated device runs the pair together */
    k->grid[0] = l.grid;
    k->grid[1] = k->grid[2] = 1;
    k->block[0] = l.threads;
    k->block[1] = k->block[2] = 1;
    return true;
}
