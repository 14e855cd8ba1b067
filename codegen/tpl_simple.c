/*
 * tpl_simple.c — the generated (not .cuh-based) templates: fused
 * elementwise chains, copies (tiled transpose, general strided copy,
 * slice / concat / split), reductions, pooling and direct conv2d.
 *
 * Each builds the kernel source from the value emitter (emit.c): loads
 * of the anchor's inputs may go through a fused prologue of elementwise /
 * copy nodes, and writes go through the fused epilogue. Every thread
 * bounds-checks its element; grids are grid-stride loops so any size fits.
 * Elementwise chains and copies run a vector of 16 bytes per item where
 * the plan says so (kernelplan/launch.c mcir_pointwise_vector_width).
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "kernelplan/launch.h"

#define THREADS 256

static void set_launch(cg_kernel *k, int64_t gx, int64_t gy, int threads, int64_t smem) {
    k->grid[0] = gx;
    k->grid[1] = gy;
    k->grid[2] = 1;
    k->block[0] = threads;
    k->block[1] = k->block[2] = 1;
    k->smem = smem;
}

/* The plan's launch of an elementwise, copy or windowed-pool kernel
 * (kernelplan/launch.c), realised by a template of `threads` threads. */
static bool plan_flat(cg_kernel *k, mcir_flat_kind kind, const mcir_target *t, mcir_diag *d) {
    mcir_flat_layout l;
    if (!mcir_flat_layout_of(t, k->kp, &l) || l.kind != kind || l.threads != THREADS) {
        cg_error(d, k->kp, "internal error: the launch model has no %d-thread layout for this kernel",
                 THREADS);
        return false;
    }
    set_launch(k, l.grid, 1, l.threads, 0);
    k->smem_static = l.smem_static_bytes;
    return true;
}

/* The plan's row layout of a reduction or global-average pool. */
static bool plan_rows(cg_kernel *k, const mcir_target *t, mcir_rows_layout *l, mcir_diag *d) {
    mcir_rows_problem g;
    const char *why = "not a row kernel";
    if (!mcir_rows_problem_of(cg_dyn, k->kp, &g) ||
        !mcir_rows_layout_of_tiling(t, &g, &k->kp->tiling, l, &why) || l->threads != THREADS) {
        cg_error(d, k->kp, "internal error: the plan's row tiling cannot be realised: %s", why);
        return false;
    }
    set_launch(k, l->grid, 1, l->threads, l->smem_bytes);
    k->smem_static = l->smem_static_bytes;
    return true;
}

static bool finish(cg_kernel *k, cg_sb *b, cg_emitter *e) {
    bool ok = e->ok;
    cg_emitter_free(e);
    if (!ok) {
        cg_sb_free(b);
        return false;
    }
    k->source = cg_sb_take(b);
    return true;
}

/* ---------------------------------------------------------- elementwise */

/* A write's window (a state written over its input, kernelplan.h
 * mcir_write_window): its first row and row count along the axis. */
static const mcir_write_window *window_of(const mcir_kernel_plan *kp, int w, mcir_extent *start, mcir_extent *len,
                                          int64_t *s0, int64_t *l0) {
    if (!kp->windows || kp->windows[w].axis < 0) return NULL;
    const mcir_write_window *x = &kp->windows[w];
    MCIR_ASSERT(mcir_write_window_extents(x, start, len));
    *s0 = *l0 = 0;
    for (int q = 0; q <= x->last; q++) {
        int64_t e = x->concat->inputs[q]->shape[x->axis];
        if (q < x->first) *s0 += e;
        else *l0 += e;
    }
    return x;
}

/* The elements of writes[0..n): each whole, or its window's rows. */
static void items_sum(cg_sb *b, const mcir_kernel_plan *kp, int n) {
    if (!kp->windows) {
        cg_sb_numel_sum(b, (const mcir_tensor *const *)kp->writes, n);
        return;
    }
    cg_sb_puts(b, "(0LL");
    for (int w = 0; w < n; w++) {
        mcir_extent st, len;
        int64_t s0, l0;
        const mcir_write_window *x = window_of(kp, w, &st, &len, &s0, &l0);
        cg_sb_puts(b, " + ");
        if (!x) {
            cg_sb_numel(b, kp->writes[w]);
            continue;
        }
        bool mask[MCIR_MAX_RANK];
        for (int k = 0; k < kp->writes[w]->rank; k++) mask[k] = k != x->axis;
        cg_sb_puts(b, "(");
        cg_sb_prod(b, kp->writes[w], mask);
        cg_sb_puts(b, ") * ");
        cg_sb_ext(b, &len, l0);
    }
    cg_sb_puts(b, ")");
}

/* Test-only (a mutant): MCIR_POINTWISE_SCALAR=1 makes gen_pointwise
 * emit the element-at-a-time loop where the plan runs a kernel a vector at
 * a time (the launch stays the plan's: the grid-stride loop covers the
 * rest). test_codegen_emu's check that vectorised kernels issue no scalar
 * global access must catch it. */
static bool force_scalar(void) {
    const char *v = getenv("MCIR_POINTWISE_SCALAR");
    return v && *v && strcmp(v, "0") != 0;
}

/* The kernel a vector at a time (mcir_pointwise_vector_width: vec > 1):
 * a write that runs vectorised has N / vec items of vec elements —
 * write_v<w>: its vector form, or vec values of its chain, stored packed,
 * 16 bytes (8) at a time — then an item per element of its tail; the
 * others an item per element. Every vector starts at a multiple of vec
 * of a 256-byte aligned buffer, so every access is aligned. */
static void gen_pointwise_vec(cg_sb *b, cg_emitter *e, const mcir_kernel_plan *kp, int vec) {
    for (int w = 0; w < kp->n_writes && e->ok; w++) {
        const mcir_tensor *t = kp->writes[w];
        if (!mcir_pointwise_vector_write(kp, w, vec)) continue;
        if (mcir_vector_form(kp, t, vec) && !cg_emit_value_vec(e, t, vec)) return;
        cg_sb_printf(b, "__device__ __forceinline__ void write_v%d(i64 i, MC_PARAMS) {\n    float vo_[%d];\n", w, vec);
        if (mcir_vector_form(kp, t, vec))   /* (a 16-bit op's result unrounded: the store rounds it) */
            cg_sb_printf(b, "    vv%s%d(i, vo_, MC_ARGS);\n", cg_vec_raw_write(kp, t) ? "r" : "", t->id);
        else
            cg_sb_printf(b, "#pragma unroll\n    for (int u = 0; u < %d; u++) vo_[u] = v%d(i + u, 0.0f, MC_ARGS);\n",
                         vec, t->id);
        cg_emit_store_vec(b, t, w, vec, "vo_");
        cg_sb_puts(b, "}\n");
    }
    if (!e->ok) return;
    cg_emit_signature(b, kp, THREADS);
    cg_sb_puts(b, " {\n");
    for (int w = 0; w < kp->n_writes; w++) {   /* elements n, vectors v, first item s of each write */
        char prev[32] = "";
        if (w) snprintf(prev, sizeof prev, "s%d_ + ", w);
        cg_sb_printf(b, "    const i64 n%d_ = ", w);
        cg_sb_numel(b, kp->writes[w]);
        if (mcir_pointwise_vector_write(kp, w, vec))
            cg_sb_printf(b, ", v%d_ = n%d_ / %d, s%d_ = %sv%d_ + n%d_ %% %d;\n", w, w, vec, w + 1, prev, w, w, vec);
        else
            cg_sb_printf(b, ", s%d_ = %sn%d_;\n", w + 1, prev, w);
    }
    if (mcir_pointwise_rolled(kp, vec)) cg_sb_puts(b, "#pragma unroll 1\n");
    cg_sb_printf(b, "    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < s%d_;\n"
                    "         t += (i64)gridDim.x * blockDim.x) {\n", kp->n_writes);
    for (int w = 0; w < kp->n_writes; w++) {
        const mcir_tensor *t = kp->writes[w];
        cg_sb_printf(b, "        %sif (t < s%d_) {\n            i64 i = t", w ? "else " : "", w + 1);
        if (w) cg_sb_printf(b, " - s%d_", w);
        cg_sb_puts(b, ";\n");
        if (mcir_pointwise_vector_write(kp, w, vec))
            cg_sb_printf(b, "            if (i < v%d_) { write_v%d(i * %d, MC_ARGS); continue; }\n"
                            "            i += v%d_ * %d;   /* the tail, an element an item */\n",
                         w, w, vec, w, vec - 1);
        cg_sb_printf(b, "            mc_st_%s(w%d, i, v%d(i, 0.0f, MC_ARGS));\n        }\n", cg_dsuffix(t->dtype), w,
                     t->id);
    }
    cg_sb_puts(b, "    }\n}\n");
}

/* Every write of the region, one element per thread iteration, from the
 * emitted value functions (the whole chain recomputed per element); a
 * write with a window, only its window's elements (i: their index in the
 * whole tensor). Where the plan says so (mcir_pointwise_vector_width),
 * a vector per item instead: gen_pointwise_vec. */
static bool gen_pointwise(cg_kernel *k, const mcir_target *target, mcir_diag *d) {
    mcir_kernel_plan *kp = k->kp;
    if (!plan_flat(k, MCIR_FLAT_POINTWISE, target, d)) return false;
    cg_sb b = {0};
    cg_emitter e;
    cg_begin_source(&b, kp);
    cg_emitter_init(&e, kp, &b, NULL, d);
    if (kp->n_writes < 1) {
        cg_error(d, kp, "writes nothing");
        e.ok = false;
    }
    for (int w = 0; w < kp->n_writes && e.ok; w++) cg_emit_value(&e, kp->writes[w]);
    if (!e.ok) return finish(k, &b, &e);
    int vec = mcir_pointwise_vector_width(kp);
    if (vec > 1 && !force_scalar()) {
        gen_pointwise_vec(&b, &e, kp, vec);
        return finish(k, &b, &e);
    }
    cg_emit_signature(&b, kp, THREADS);
    cg_sb_puts(&b, " {\n"
                   "    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < ");
    items_sum(&b, kp, kp->n_writes);
    cg_sb_puts(&b, ";\n         t += (i64)gridDim.x * blockDim.x) {\n");
    for (int w = 0; w < kp->n_writes; w++) {
        const mcir_tensor *t = kp->writes[w];
        cg_sb_printf(&b, "        %sif (t < ", w ? "else " : "");
        items_sum(&b, kp, w + 1);
        cg_sb_puts(&b, ") { i64 i = t - ");
        items_sum(&b, kp, w);
        cg_sb_puts(&b, ";");
        mcir_extent st, len;
        int64_t s0, l0;
        const mcir_write_window *x = window_of(kp, w, &st, &len, &s0, &l0);
        if (x) {   /* window index -> the tensor's: rows [start, start + len) of the axis */
            bool inner[MCIR_MAX_RANK];
            for (int j = 0; j < t->rank; j++) inner[j] = j > x->axis;
            cg_sb_puts(&b, "\n            { const i64 in_ = ");
            cg_sb_prod(&b, t, inner);
            cg_sb_puts(&b, ", wl_ = ");
            cg_sb_ext(&b, &len, l0);
            cg_sb_puts(&b, " * in_, r_ = i % wl_;\n              i = ((i / wl_) * ");
            cg_sb_extent(&b, t, x->axis);
            cg_sb_puts(&b, " + ");
            cg_sb_ext(&b, &st, s0);
            cg_sb_puts(&b, " + r_ / in_) * in_ + r_ % in_; }\n           ");
        }
        cg_sb_printf(&b, " mc_st_%s(w%d, i, v%d(i, 0.0f, MC_ARGS)); }\n", cg_dsuffix(t->dtype), w, t->id);
    }
    cg_sb_puts(&b, "    }\n}\n");
    return finish(k, &b, &e);
}

bool cg_gen_elementwise(cg_kernel *k, const mcir_target *t, mcir_diag *d) {
    return gen_pointwise(k, t, d);
}

/* ----------------------------------------------------------------- copy */

/* A single transpose swapping the last two dims, read to write: tiles
 * through shared memory, so both the loads and the stores are coalesced —
 * 16-byte vectors each way through a swizzled T x T tile where both
 * extents allow (mcir_transpose_vector_width), else 32x32 tiles (+1
 * column against bank conflicts) an element a lane. */
bool cg_gen_copy(cg_kernel *k, const mcir_target *t, mcir_diag *d) {
    mcir_kernel_plan *kp = k->kp;
    if (!mcir_kernel_is_last2_transpose(kp)) return gen_pointwise(k, t, d);
    if (!plan_flat(k, MCIR_FLAT_TRANSPOSE, t, d)) return false;
    const mcir_tensor *x = kp->reads[0], *y = kp->writes[0];
    bool lead[MCIR_MAX_RANK] = {0};
    for (int i = 0; i < x->rank - 2; i++) lead[i] = true;
    cg_sb b = {0};
    cg_emitter e;
    cg_begin_source(&b, kp);
    cg_emitter_init(&e, kp, &b, NULL, d);
    if (mcir_transpose_vector_width(kp) > 1)   /* prelude.cuh mc_stv: NVVM scalarises the packed store */
        cg_sb_puts(&b, "#ifndef MC_EMULATE\n#undef MC_GSTV\n#define MC_GSTV(T, p, i, v) mc_stv((T*)((p) + (i)), (v))\n"
                       "#endif\n");
    cg_sb_puts(&b, "#define TR_R ");
    cg_sb_extent(&b, x, x->rank - 2);
    cg_sb_puts(&b, "\n#define TR_C ");
    cg_sb_extent(&b, x, x->rank - 1);
    cg_sb_puts(&b, "\n#define TR_B ");
    cg_sb_prod(&b, x, lead);
    cg_sb_puts(&b, "\n");
    cg_emit_signature(&b, kp, THREADS);
    int vec = mcir_transpose_vector_width(kp);
    if (vec > 1) {
        /* 16-byte vectors (V = 8 16-bit or 4 f32 elements): T x T tiles,
         * T = 8V, of the storage type; 256 threads move T*T/V/256 vectors
         * each way. In: tile row r (input row row0 + r) takes 8 chunks of
         * V; out: output row c (input column col0 + c) gathers V elements
         * of column c from rows r0..r0+V-1 of the tile and stores them
         * packed. Chunk q of row r lives at chunk q ^ ((r / V) & 7): the
         * gather's lanes (8 per output row, rows V apart) then hit 8
         * different 16-byte chunks, no bank conflict; the chunk stores of a
         * row stay one 128-byte line. R and C are multiples of V, so every
         * vector is whole and aligned. */
        bool half = mcir_dtype_size(x->dtype) == 2;
        const char *st = half ? "unsigned short" : "float", *vt = half ? "uint4" : "float4";
        int T = 8 * vec, per = T * T / vec / THREADS;
        cg_sb_printf(&b,
            " {\n"
            "    __shared__ __align__(16) %s tile[%d][%d];\n"
            "    const i64 tiles_c = (TR_C + %d) / %d, tiles_r = (TR_R + %d) / %d;\n"
            "    for (i64 t = blockIdx.x; t < TR_B * tiles_r * tiles_c; t += gridDim.x) {\n"
            "        const i64 bt = t / (tiles_r * tiles_c), rc = t %% (tiles_r * tiles_c);\n"
            "        const i64 row0 = (rc / tiles_c) * %d, col0 = (rc %% tiles_c) * %d;\n"
            "        const i64 base = bt * TR_R * TR_C;\n"
            "        %s v[%d];\n"
            "        __syncthreads();   // the tile free from the last item's gathers\n"
            "#pragma unroll\n"
            "        for (int k = 0; k < %d; k++) {   // every load before the first store\n"
            "            const int q = (int)threadIdx.x + k * %d, r = q >> 3, ch = q & 7;\n"
            "            const i64 gr = row0 + r, gc = col0 + ch * %d;\n"
            "            if (gr < TR_R && gc < TR_C) v[k] = MC_GLDV(%s, r0, base + gr * TR_C + gc);\n"
            "        }\n"
            "#pragma unroll\n"
            "        for (int k = 0; k < %d; k++) {\n"
            "            const int q = (int)threadIdx.x + k * %d, r = q >> 3, ch = q & 7;\n"
            "            if (row0 + r < TR_R && col0 + ch * %d < TR_C)\n"
            "                MC_SST(*(%s*)&tile[r][((ch ^ ((r / %d) & 7)) * %d)], v[k]);\n"
            "        }\n"
            "        __syncthreads();\n"
            "#pragma unroll\n"
            "        for (int k = 0; k < %d; k++) {\n"
            "            const int q = (int)threadIdx.x + k * %d, c = q >> 3, r0_ = (q & 7) * %d;\n"
            "            const i64 oc = col0 + c, orow = row0 + r0_;   // output row oc, columns orow..\n"
            "            if (oc >= TR_C || orow >= TR_R) continue;\n"
            "            %s e[%d];\n"
            "#pragma unroll\n"
            "            for (int u = 0; u < %d; u++) {\n"
            "                const int r = r0_ + u;\n"
            "                e[u] = MC_SLD(tile[r][((c / %d) ^ ((r / %d) & 7)) * %d + c %% %d]);\n"
            "            }\n",
            st, T, T, T - 1, T, T - 1, T, T, T, vt, per, per, THREADS, vec, vt, per, THREADS, vec, vt, vec, vec,
            per, THREADS, vec, st, vec, vec, vec, vec, vec, vec);
        if (half)
            cg_sb_puts(&b,
                "            uint4 o;\n"
                "            o.x = (u32)e[0] | ((u32)e[1] << 16); o.y = (u32)e[2] | ((u32)e[3] << 16);\n"
                "            o.z = (u32)e[4] | ((u32)e[5] << 16); o.w = (u32)e[6] | ((u32)e[7] << 16);\n"
                "            MC_GSTV(uint4, w0, base + oc * TR_R + orow, o);\n");
        else
            cg_sb_puts(&b,
                "            float4 o;\n"
                "            o.x = e[0]; o.y = e[1]; o.z = e[2]; o.w = e[3];\n"
                "            MC_GSTV(float4, w0, base + oc * TR_R + orow, o);\n");
        cg_sb_puts(&b, "        }\n    }\n}\n");
        return finish(k, &b, &e);
    }
    /* block of 256 = (32, 8): each thread moves 4 elements of a 32x32 tile
     * of the tensor's value type (integers move as i64, exactly) */
    bool ints = mcir_value_type_of(x->dtype) == MCIR_VALUE_I64;
    cg_sb_printf(&b,
        " {\n"
        "    __shared__ %s tile[32][33];\n"
        "    const i64 tiles_c = (TR_C + 31) / 32, tiles_r = (TR_R + 31) / 32;\n"
        "    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;\n"
        "    for (i64 t = blockIdx.x; t < TR_B * tiles_r * tiles_c; t += gridDim.x) {\n"
        "        i64 bt = t / (tiles_r * tiles_c), rc = t %% (tiles_r * tiles_c);\n"
        "        i64 row0 = (rc / tiles_c) * 32, col0 = (rc %% tiles_c) * 32;\n"
        "        const i64 base = bt * TR_R * TR_C;\n"
        "        __syncthreads();\n"
        "        for (int j = ty; j < 32; j += 8) {\n"
        "            i64 r = row0 + j, c = col0 + tx;\n"
        "            if (r < TR_R && c < TR_C) MC_SST(tile[j][tx], mc_ld%s_%s(r0, base + r * TR_C + c));\n"
        "        }\n"
        "        __syncthreads();\n"
        "        for (int j = ty; j < 32; j += 8) {\n"
        "            i64 c = col0 + j, r = row0 + tx;   /* output row c, column r */\n"
        "            if (r < TR_R && c < TR_C) mc_st_%s(w0, base + c * TR_R + r, MC_SLD(tile[tx][j]));\n"
        "        }\n"
        "    }\n"
        "}\n",
        cg_vtype(x->dtype), ints ? "i" : "", cg_dsuffix(x->dtype), cg_dsuffix(y->dtype));
    return finish(k, &b, &e);
}

/* ------------------------------------------------------------ reduction */

/* argmax / argmin as a row reduction: each thread keeps (value, index) of
 * its strided share of the row, then the pairs combine across the warp
 * (and the block through shared memory) — as mcir/ops_int.c: the first
 * extreme wins ties, the first NaN wins over everything. The value has
 * x's value type (an integer one exact, crossing shuffles as two halves);
 * the index travels as a float (exact: rows are at most 2^24 long), -1
 * for none. */
static bool gen_arg_reduce(cg_kernel *k, cg_sb *b, cg_emitter *e, const mcir_tensor *x, bool is_max,
                           bool warp_per_row) {
    const char *op = is_max ? ">" : "<";
    bool ints = mcir_value_type_of(x->dtype) == MCIR_VALUE_I64;
    const char *vt = cg_vtype(x->dtype);
    cg_sb_printf(b,
        "__device__ __forceinline__ void red_take(%s& a, float& ai, %s v, float vi) {\n"
        "    if (vi < 0.0f) return;\n"
        "    bool take = ai < 0.0f || (v != v ? (a == a || vi < ai) : (a == a && (v %s a || (v == a && vi < ai))));\n"
        "    if (take) { a = v; ai = vi; }\n"
        "}\n"
        "__device__ __forceinline__ void red_warp(%s& a, float& ai) {\n"
        "#pragma unroll\n"
        "    for (int o = 16; o > 0; o >>= 1) {\n"
        "        %s v = %s, vi = __shfl_xor_sync(0xffffffffu, ai, o);\n"
        "        red_take(a, ai, v, vi);\n"
        "    }\n"
        "}\n", vt, vt, op, vt, vt, ints ? "mc_shfl_xor_i64(a, o)" : "__shfl_xor_sync(0xffffffffu, a, o)");
    cg_emit_signature(b, k->kp, THREADS);
    /* integer values: the pairs' values and indices both as i64 in scratch */
    cg_sb_printf(b, " {\n    __shared__ %s scratch[64];\n", vt);
    if (warp_per_row)
        cg_sb_puts(b,
            "    const int lane = threadIdx.x & 31;\n"
            "    const i64 warps = (i64)gridDim.x * (blockDim.x >> 5);\n"
            "    for (i64 o = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); o < RED_OUTER; o += warps) {\n"
            "        i64 start = lane, step = 32;\n");
    else
        cg_sb_puts(b,
            "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;\n"
            "    for (i64 o = blockIdx.x; o < RED_OUTER; o += gridDim.x) {\n"
            "        i64 start = threadIdx.x, step = blockDim.x;\n");
    cg_sb_printf(b,
        "        %s a = 0%s; float ai = -1.0f;\n"
        "        for (i64 r = start; r < RED_INNER; r += step)\n"
        "            red_take(a, ai, v%d(x_index(o, r, MC_ARGS), 0.0f, MC_ARGS), (float)r);\n"
        "        red_warp(a, ai);\n", vt, ints ? "" : ".0f", x->id);
    if (warp_per_row)
        cg_sb_puts(b, "        if (lane == 0) ");
    else
        cg_sb_puts(b,
            "        __syncthreads();\n"
            "        if (lane == 0) { MC_SST(scratch[warp], a); MC_SST(scratch[32 + warp], ai); }\n"
            "        __syncthreads();\n"
            "        a = lane < nw ? MC_SLD(scratch[lane]) : 0;\n"
            "        ai = lane < nw ? (float)MC_SLD(scratch[32 + lane]) : -1.0f;\n"
            "        red_warp(a, ai);\n"
            "        if (threadIdx.x == 0) ");
    cg_sb_puts(b, "epilogue(o, ai, MC_ARGS);\n    }\n    (void)scratch;\n}\n");
    return finish(k, b, e);
}

bool cg_gen_reduce(cg_kernel *k, const mcir_target *t, mcir_diag *d) {
    mcir_kernel_plan *kp = k->kp;
    mcir_rows_layout l;
    if (!plan_rows(k, t, &l, d)) return false;
    const mcir_node *n = kp->anchor;
    const mcir_tensor *x = n->inputs[0], *y = n->outputs[0];
    bool red[MCIR_MAX_RANK] = {0};
    const int64_t *axes;
    int64_t axis = 0;
    bool is_arg = n->op == MCIR_OP_ARGMAX || n->op == MCIR_OP_ARGMIN;
    int na = is_arg ? 1 : mcir_node_ints(n, "axes", &axes);
    if (is_arg) {   /* argmax / argmin: one axis */
        axis = mcir_node_int(n, "axis");
        axes = &axis;
    }
    for (int i = 0; i < na; i++) {
        int a;
        if (!mcir_norm_axis(axes[i], x->rank, &a)) {
            cg_error(d, kp, "bad reduction axis");
            return false;
        }
        red[a] = true;
    }
    int64_t inner = 1;
    bool kept[MCIR_MAX_RANK] = {0};
    for (int i = 0; i < x->rank; i++) {
        if (red[i]) inner *= x->shape[i];
        kept[i] = !red[i];
    }
    if (is_arg && inner > (1LL << 24)) {   /* the index travels as a float */
        cg_error(d, kp, "argmax/argmin over more than 2^24 elements");
        return false;
    }
    cg_sb b = {0};
    cg_emitter e;
    cg_begin_source(&b, kp);
    cg_emitter_init(&e, kp, &b, y, d);
    cg_emit_value(&e, x);
    cg_emit_epilogue(&e, 1);
    if (!e.ok) return finish(k, &b, &e);
    /* x's linear index from (o: kept coords, r: reduced coords) */
    cg_sb_puts(&b, "__device__ __forceinline__ i64 x_index(i64 o, i64 r, MC_PARAMS) {\n    i64 j = 0;\n");
    for (int i = x->rank - 1; i >= 0; i--) {
        const char *v = red[i] ? "r" : "o";
        bool after[MCIR_MAX_RANK] = {0};
        for (int j = i + 1; j < x->rank; j++) after[j] = true;
        cg_sb_printf(&b, "    j += (%s %% ", v);
        cg_sb_extent(&b, x, i);
        cg_sb_puts(&b, ") * ");
        cg_sb_prod(&b, x, after);
        cg_sb_printf(&b, "; %s /= ", v);
        cg_sb_extent(&b, x, i);
        cg_sb_puts(&b, ";\n");
    }
    cg_sb_puts(&b, "    return j;\n}\n");
    bool is_max = n->op == MCIR_OP_REDUCE_MAX, is_mean = n->op == MCIR_OP_REDUCE_MEAN;
    bool warp_per_row = l.warp_row;
    cg_sb_puts(&b, "#define RED_OUTER ");
    cg_sb_prod(&b, x, kept);
    cg_sb_puts(&b, "\n#define RED_INNER ");
    cg_sb_prod(&b, x, red);
    cg_sb_puts(&b, "\n");
    if (is_arg) return gen_arg_reduce(k, &b, &e, x, n->op == MCIR_OP_ARGMAX, warp_per_row);
    cg_emit_signature(&b, kp, THREADS);
    cg_sb_puts(&b, " {\n    __shared__ float scratch[32];\n");
    if (warp_per_row)
        cg_sb_puts(&b,
            "    const int lane = threadIdx.x & 31;\n"
            "    const i64 warps = (i64)gridDim.x * (blockDim.x >> 5);\n"
            "    for (i64 o = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); o < RED_OUTER; o += warps) {\n"
            "        i64 start = lane, step = 32;\n");
    else
        cg_sb_puts(&b,
            "    for (i64 o = blockIdx.x; o < RED_OUTER; o += gridDim.x) {\n"
            "        i64 start = threadIdx.x, step = blockDim.x;\n");
    cg_sb_printf(&b,
        "        float a = %s;\n"
        "        for (i64 r = start; r < RED_INNER; r += step) {\n"
        "            float v = v%d(x_index(o, r, MC_ARGS), 0.0f, MC_ARGS);\n"
        "            a = %s;\n"
        "        }\n",
        is_max ? "MC_NINF" : "0.0f", x->id, is_max ? "mc_max_nan(a, v)" : "a + v");
    if (warp_per_row)
        cg_sb_printf(&b, "        a = %s(a);\n        if (lane == 0) ", is_max ? "mc_warp_max" : "mc_warp_sum");
    else
        cg_sb_printf(&b, "        a = %s(a, scratch);\n        if (threadIdx.x == 0) ",
                     is_max ? "mc_block_max" : "mc_block_sum");
    cg_sb_printf(&b, "epilogue(o, %s, MC_ARGS);\n    }\n    (void)scratch;\n}\n",
                 is_mean ? "a / (float)RED_INNER" : "a");
    return finish(k, &b, &e);
}

/* -------------------------------------------------------------- pooling */

static void ints_or(const mcir_node *n, const char *name, int count, const int64_t *fallback,
                    int64_t *out) {
    const int64_t *v;
    if (!mcir_node_attr(n, name) && fallback) {
        memcpy(out, fallback, sizeof(int64_t) * (size_t)count);
        return;
    }
    MCIR_ASSERT(mcir_node_ints(n, name, &v) == count);
    memcpy(out, v, sizeof(int64_t) * (size_t)count);
}

bool cg_gen_pool(cg_kernel *k, const mcir_target *t, mcir_diag *d) {
    mcir_kernel_plan *kp = k->kp;
    const mcir_node *n = kp->anchor;
    const mcir_tensor *x = n->inputs[0], *y = n->outputs[0];
    if (x->rank != 4) {
        cg_error(d, kp, "pooling needs an NCHW input");
        return false;
    }
    cg_sb b = {0};
    cg_emitter e;
    cg_begin_source(&b, kp);
    cg_emitter_init(&e, kp, &b, y, d);
    cg_emit_value(&e, x);
    cg_emit_epilogue(&e, 1);
    if (!e.ok) return finish(k, &b, &e);
    int64_t H = x->shape[2], W = x->shape[3];
    static const bool nc[4] = {true, true, false, false};
    cg_sb_printf(&b, "#define P_H %lldLL\n#define P_W %lldLL\n#define P_NC ", (long long)H, (long long)W);
    cg_sb_prod(&b, x, nc);   /* the batch may be symbolic (docs/graph-format.md) */
    cg_sb_puts(&b, "\n");
    if (n->op == MCIR_OP_GLOBAL_AVG_POOL) {
        /* a warp per (n, c) plane */
        mcir_rows_layout l;
        if (!plan_rows(k, t, &l, d)) {
            cg_emitter_free(&e);
            cg_sb_free(&b);
            return false;
        }
        cg_emit_signature(&b, kp, THREADS);
        cg_sb_printf(&b,
            " {\n"
            "    const int lane = threadIdx.x & 31;\n"
            "    const i64 warps = (i64)gridDim.x * (blockDim.x >> 5);\n"
            "    for (i64 p = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); p < P_NC; p += warps) {\n"
            "        float a = 0.0f;\n"
            "        for (i64 q = lane; q < P_H * P_W; q += 32) a += v%d(p * P_H * P_W + q, 0.0f, MC_ARGS);\n"
            "        a = mc_warp_sum(a);\n"
            "        if (lane == 0) epilogue(p, a / (float)(P_H * P_W), MC_ARGS);\n"
            "    }\n"
            "}\n",
            x->id);
        return finish(k, &b, &e);
    }
    static const int64_t zeros[4] = {0, 0, 0, 0};
    int64_t kern[2], str[2], pads[4];
    ints_or(n, "kernel", 2, NULL, kern);
    ints_or(n, "strides", 2, kern, str);
    ints_or(n, "pads", 4, zeros, pads);
    int64_t OH = y->shape[2], OW = y->shape[3];
    bool avg = n->op == MCIR_OP_AVG_POOL2D;
    if (!plan_flat(k, MCIR_FLAT_POOL, t, d)) {
        cg_emitter_free(&e);
        cg_sb_free(&b);
        return false;
    }
    cg_emit_signature(&b, kp, THREADS);
    cg_sb_printf(&b,
        " {\n"
        "    const i64 total = P_NC * %lldLL;\n"
        "    for (i64 o = (i64)blockIdx.x * blockDim.x + threadIdx.x; o < total; o += (i64)gridDim.x * blockDim.x) {\n"
        "        i64 ow = o %% %lldLL, oh = (o / %lldLL) %% %lldLL, plane = o / (%lldLL * %lldLL);\n"
        "        i64 hs = oh * %lldLL - %lldLL, ws = ow * %lldLL - %lldLL;\n"
        "        i64 he = hs + %lldLL, we = ws + %lldLL;\n"
        "        hs = hs < 0 ? 0 : hs; ws = ws < 0 ? 0 : ws;\n"
        "        he = he > P_H ? P_H : he; we = we > P_W ? P_W : we;\n"
        "        float sum = 0.0f, mx = MC_NINF;\n"
        "        for (i64 h = hs; h < he; h++)\n"
        "            for (i64 w = ws; w < we; w++) {\n"
        "                float v = v%d((plane * P_H + h) * P_W + w, 0.0f, MC_ARGS);\n"
        "                sum += v; mx = mc_max_nan(v, mx);\n"
        "            }\n"
        "        i64 cnt = (he - hs) * (we - ws); (void)cnt;\n"
        "        float r = %s;\n"
        "        epilogue(o, r, MC_ARGS);\n"
        "    }\n"
        "}\n",
        (long long)(OH * OW), (long long)OW, (long long)OW, (long long)OH, (long long)OH,
        (long long)OW, (long long)str[0], (long long)pads[0], (long long)str[1], (long long)pads[1],
        (long long)kern[0], (long long)kern[1], x->id,
        avg ? "cnt > 0 ? sum / (float)cnt : 0.0f" : "mx");
    return finish(k, &b, &e);
}

/* conv2d: implicit GEMM, codegen/tpl_conv.c */
