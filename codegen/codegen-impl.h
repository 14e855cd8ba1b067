/*
 * codegen-impl.h — internals of codegen/: the string builder, the value
 * emitter that turns a region's elementwise/copy nodes into CUDA device
 * functions, strided views (folded transposes), the template table, NVRTC
 * checking macro, and the per-kernel record. Not part of the public API.
 *
 * Invariant: every generated kernel takes (reads..., writes...) as typed
 * device pointers named r0.., w0.. in the order of the KernelPlan.
 */
#ifndef MCIR_CODEGEN_IMPL_H
#define MCIR_CODEGEN_IMPL_H

#include <stdarg.h>

#include "codegen/codegen.h"
#include "codegen/module.h"

/* ------------------------------------------------------------ strings */

typedef struct cg_sb {
    char *s;
    size_t len, cap;
} cg_sb;

void cg_sb_puts(cg_sb *b, const char *s);
void cg_sb_printf(cg_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *cg_sb_take(cg_sb *b);   /* malloc'd string; b is reset */
void cg_sb_free(cg_sb *b);

/* Embedded template sources (codegen/templates/NAME.cuh, generated at build time). */
extern const char mcir_tpl_prelude[];
extern const char mcir_tpl_prelude_int[];
extern const char mcir_tpl_attention_mma[];
extern const char mcir_tpl_attention_fma[];
extern const char mcir_tpl_norm[];
extern const char mcir_tpl_matmul[];
extern const char mcir_tpl_attention_sm90[];
extern const char mcir_tpl_hopper[];
extern const char mcir_tpl_gemm_sm90[];

/* ------------------------------------------------- symbolic dimensions */

/* Size-generic kernels (docs/kernelplan.md, "Symbolic dimensions"): while
 * codegen generates the kernels of a graph whose dims range over more
 * than one size, cg_dyn is that graph; MC_PARAMS then ends with one
 * `const i64 mc_d<K>` per dimension of the graph, passed at launch, and
 * templates write every extent that depends on a dimension as an
 * expression of them (cg_sb_extent), so one source serves every size.
 * NULL otherwise: extents are integer literals, as before. cg_rebinding:
 * the kernels are being generated again at another binding of the dims
 * (mcir_codegen_rebind) — the plan's grid was decided at the largest
 * sizes, so the templates take the grid they compute instead of checking
 * it against the plan's. */
extern _Thread_local const mcir_graph *cg_dyn;
/* The plan's exact_math while a kernel is generated: the value emitter
 * writes expf, IEEE division and 1 / sqrtf (the interpreter's forms) in
 * place of mc_exp2, mc_rcp and mc_rsqrt. */
extern _Thread_local bool cg_exact_math;
extern _Thread_local bool cg_rebinding;
/* Templates whose device functions take no parameters (the sm_90a
 * attention's) read the dims from shared memory instead: while set,
 * cg_sb_ext writes dimension k as `mc_sdims[k]`, which the kernel's entry
 * fills from its parameters (cg_emit_sdims_*). */
extern _Thread_local bool cg_dims_smem;
/* `i64* mc_sdims()`, a static __shared__ array of N, and the entry's statements
 * filling it (thread 0, then a barrier); nothing without cg_dyn. */
void cg_emit_sdims_decl(cg_sb *b);
void cg_emit_sdims_fill(cg_sb *b);
/* Prints extent e as C: "768LL", or where e depends on a dimension and
 * cg_dyn is set, "(2LL*mc_d0*mc_d1+1LL)". `bound` is e's value at the
 * current binding (printed when cg_dyn is NULL). */
void cg_sb_ext(cg_sb *b, const mcir_extent *e, int64_t bound);
/* Tensor t's extent i, or its element count, as C. */
void cg_sb_extent(cg_sb *b, const mcir_tensor *t, int i);
void cg_sb_numel(cg_sb *b, const mcir_tensor *t);
/* The product of t's extents k where mask[k] (NULL: all), as C. */
void cg_sb_prod(cg_sb *b, const mcir_tensor *t, const bool *mask);
/* The sum of the element counts of ts[0..n-1], as C. */
void cg_sb_numel_sum(cg_sb *b, const mcir_tensor *const *ts, int n);
/* Whether t's extent k is 1 for every size (with cg_dyn: its polynomial
 * is the constant 1; else the integer is 1). */
bool cg_extent_is_one(const mcir_tensor *t, int k);
/* Whether a's extent i and c's extent j are the same for every size (with
 * cg_dyn: the same polynomial; else the same integer). */
bool cg_extents_equal(const mcir_tensor *a, int i, const mcir_tensor *c, int j);
/* One dim k of a broadcast index walk, from the innermost out: `acc +=
 * (q % out[k]) * s;` where `in` has dim ik (and it is not 1), `q /=
 * out[k];` where divide, `s *= in[ik];` (ik < 0: in lacks the dim). */
void cg_emit_bcast_step(cg_sb *b, const char *acc, const char *q, const char *s, const mcir_tensor *out, int k,
                        const mcir_tensor *in, int ik, bool divide);
/* Whether t's extents depend on a dimension of cg_dyn. */
bool cg_tensor_dynamic(const mcir_tensor *t);

/* -------------------------------------------------------------- views */

/* A strided view of a tensor's logical shape inside the buffer of `root`
 * (a kernel read or write): element c lives at offset + sum c[i]*stride[i]. */
typedef struct cg_view {
    const mcir_tensor *root;
    int rank;
    int64_t shape[MCIR_MAX_RANK];
    int64_t stride[MCIR_MAX_RANK];
    int64_t offset;
    /* the same as polynomials over the graph's dims (symbolic dimensions);
     * sym false where one could not be kept (more terms than an extent
     * holds): the integers are printed, and the rebinding check finds it */
    bool sym;
    mcir_extent sshape[MCIR_MAX_RANK];
    mcir_extent sstride[MCIR_MAX_RANK];
    mcir_extent soffset;
} cg_view;
/* Whether v's dim k has extent 1 for every size (its polynomial is the
 * constant 1; without symbols, its integer). */
bool cg_view_dim_is_one(const cg_view *v, int k);
/* View v's stride k and offset as C (cg_sb_ext). */
void cg_sb_view_stride(cg_sb *b, const cg_view *v, int k);
void cg_sb_view_offset(cg_sb *b, const cg_view *v);

void cg_view_contiguous(cg_view *v, const mcir_tensor *t);
/* NumPy's no-copy reshape; false if the view cannot be reshaped in place. */
bool cg_view_reshape(cg_view *v, int rank, const int64_t *shape);
/* The same, from tensor `from`'s shape (the view's) to tensor t's: the
 * symbolic strides follow where every merged or split group of extents is
 * the same polynomial on both sides (else v->sym turns false). */
bool cg_view_reshape_to(cg_view *v, int rank, const int64_t *shape, const mcir_tensor *t,
                        const mcir_tensor *from);
/* Resolves an input-side tensor to a view of a kernel read through a chain
 * of transpose / reshape / slice nodes of the region. */
bool cg_view_of_input(const mcir_kernel_plan *kp, const mcir_tensor *t, cg_view *v);
/* Resolves where a tensor computed by the anchor lands: through a chain of
 * transpose / reshape nodes of the region to a kernel write. */
bool cg_view_of_output(const mcir_kernel_plan *kp, const mcir_tensor *t, cg_view *v);

/* ------------------------------------------------------------ regions */

int cg_read_index(const mcir_kernel_plan *kp, const mcir_tensor *t);
int cg_write_index(const mcir_kernel_plan *kp, const mcir_tensor *t);
bool cg_node_in_region(const mcir_kernel_plan *kp, const mcir_node *n);
/* The region node producing t, or NULL. */
mcir_node *cg_region_producer(const mcir_kernel_plan *kp, const mcir_tensor *t);

/* "float", "unsigned short" */
const char *cg_ctype(mcir_dtype t);
/* "f32", "f16", "bf16": suffix of the prelude's mc_ld_* / mc_st_* */
const char *cg_dsuffix(mcir_dtype t);
/* The type a value function of a tensor of dtype t returns: "float", or
 * "i64" for integer and bool tensors (exact; mcir_value_type_of). */
const char *cg_vtype(mcir_dtype t);
/* Whether a kernel reads, writes or computes an integer or bool tensor:
 * then its source carries the integer prelude (prelude_int.cuh). */
bool cg_kernel_has_ints(const mcir_kernel_plan *kp);
/* An exact float literal: __int_as_float(0x...) */
void cg_sb_float(cg_sb *b, float f);

/* The value emitter. For each tensor asked for it emits (once) a device
 * function `float v<ID>(i64 i, float acc)` giving element i (C-order
 * linear index of the tensor's own shape), computed from kernel reads
 * through the region's elementwise / copy nodes, rounded to the tensor's
 * dtype like the reference interpreter. `anchor_out` (may be NULL) is the
 * tensor the template computes itself: its value is `acc`. */
typedef struct cg_emitter {
    const mcir_kernel_plan *kp;
    cg_sb *sb;
    const mcir_tensor *anchor_out;
    unsigned char *done;         /* by tensor id */
    int n_tensors;
    mcir_diag *d;
    bool ok;
    /* by tensor id, optional: k + 1 where the tensor's value is element i
     * of box k of a staged tile, `mc_ld_<dt>(gm_box(acc, k), i)` (the
     * sm_90a GEMM's prologue: acc carries the stage and consumer group);
     * -1 where it is a row vector staged for the K step,
     * `mc_ld_<dt>(gm_vbox(acc), i)` (i: its element, the box's column);
     * -2 where it is a factor the template applies elsewhere (the GEMM's
     * per-row scale, at the epilogue): 1 */
    const int *box_leaf;
    /* with box_leaf: index i is row * K + column of the box element (so
     * that a row vector's broadcast index is its column), and a box leaf
     * reads element gm_box_elem(i) */
    bool box_rows;
    /* The paired epilogue (a gated linear unit's product, mcir_glu_half):
     * pair[h] is half h of the product (0 the gate's, 1 the up's; the
     * emitter's anchor is pair[0]), whose value at an epilogue element is
     * half h of acc's bits: the template passes the element's two
     * accumulators rounded to the product's 16-bit dtype, the gate's in the
     * low 16 bits (mm_pair). NULL: an epilogue of one accumulator. */
    const mcir_tensor *pair[2];
    /* optional: a 16-bit tensor whose value functions also get unrounded
     * twins, for a caller that converts the value to its storage itself
     * (that conversion rounds once; rounding first, then again, gives the
     * same bits for two more instructions an element): its vector form's
     * vvr<ID> (the sm_90a prologue's A) and its scalar v<ID> / p<ID>'s
     * vr<ID> / pr<ID> (the sm_90a epilogue's TMA-stored write, mm_value);
     * raw_scalar says one was emitted (an elementwise op computes t) */
    const mcir_tensor *raw;
    bool raw_scalar;
} cg_emitter;

void cg_emitter_init(cg_emitter *e, const mcir_kernel_plan *kp, cg_sb *sb,
                     const mcir_tensor *anchor_out, mcir_diag *d);
void cg_emitter_free(cg_emitter *e);
/* Emits v<ID> and returns true, or reports why not. */
bool cg_emit_value(cg_emitter *e, const mcir_tensor *t);
/* Emits t's vector form `void vv<ID>(i64 i, float* out, <params>)`:
 * elements i..i+vec-1 of t (i a multiple of vec) into out[], bit for bit
 * what v<ID> gives each (t must have one: mcir_vector_form, pointwise
 * kernels, no anchor): a kernel read by 16-byte (8-byte) loads, an
 * elementwise op lane by lane over its operands' vectors (each operand's
 * vector form, one broadcast value, or v<ID> per lane:
 * mcir_vector_operand_of), a reshape as its input. */
bool cg_emit_value_vec(cg_emitter *e, const mcir_tensor *t, int vec);
/* Whether cg_emit_value_vec also emits vvr<ID> for t, its vector form
 * unrounded (for t's own packed store, whose conversion rounds once): t
 * is a kernel write of f16 / bf16 computed by an elementwise op. */
bool cg_vec_raw_write(const mcir_kernel_plan *kp, const mcir_tensor *t);
/* Statements loading vec (a multiple of 4) values of f32 / f16 / bf16
 * kernel read ri at element IDX into float out[]: 16-byte loads (8-byte
 * for 16-bit elements at vec 4). The caller proves IDX a multiple of vec
 * (the buffer is 256-byte aligned). */
void cg_emit_vec_load(cg_sb *b, const mcir_tensor *t, int ri, const char *idx, int vec);
/* The same from pointer expression PTR (an element pointer of t's dtype:
 * a staged box in shared memory), 16-byte aligned at IDX. */
void cg_emit_vec_load_at(cg_sb *b, const mcir_tensor *t, const char *ptr, const char *idx, int vec);
/* Stores of vec consecutive values of write t (kernel write w) at element
 * i (a multiple of vec): packed 16-byte (8-byte) stores for f32 / f16 /
 * bf16, element by element otherwise; the values from array vals, or
 * (vals NULL) each through its chain from the anchor's acc[]. */
void cg_emit_store_vec(cg_sb *b, const mcir_tensor *t, int w, int vec, const char *vals);
/* True if t's value depends on the anchor output. */
bool cg_depends_on(const mcir_kernel_plan *kp, const mcir_tensor *t, const mcir_tensor *anchor_out);

/* Kernel signature "extern "C" __global__ void __launch_bounds__(nt) NAME(...)"
 * (__launch_bounds__(nt, kp->launch_min_blocks) where codegen set that). */
void cg_emit_signature(cg_sb *b, const mcir_kernel_plan *kp, int threads);
/* The same with __cluster_dims__(cluster, 1, 1) where cluster > 1 (the
 * launch's grid whole clusters; cg_kernel.cluster tells the emulator) */
void cg_emit_signature_cluster(cg_sb *b, const mcir_kernel_plan *kp, int threads, int cluster);
/* For writes depending on the anchor: a device function
 * `void epilogue(i64 i, float acc, <params>)` storing every such write at
 * element i of the anchor output, and EPI_ARGS listing the parameters. */
bool cg_emit_epilogue(cg_emitter *e, int min_writes);
/* The same with the index packed, (row << 32) | column (row: the flat
 * index over every dim of the anchor's output but the last; column: the
 * last dim's): the writes' value functions p<ID>(i, acc) take it, and
 * `epilogue(i, acc)` stores at its flat value. A broadcast operand's
 * column is the column or 0, its row decoded from the row in 32 bits:
 * a bias over the rows is read at the column, with no division, at the
 * same address in every row. Only where cg_epilogue_packable: static
 * sizes below 2^31 elements, the anchor's path elementwise with its
 * element count and last extent (no reshape). */
bool cg_epilogue_packable(const cg_emitter *e);
bool cg_emit_epilogue_packed(cg_emitter *e, int min_writes);
/* After cg_emit_epilogue_packed: h<ID>(i64 i, float a0, float a1, MC_PARAMS)
 * for write w and the 16-bit tensors of its path, w's values at packed
 * index i (an even column) and the next column as one 32-bit pair of its
 * dtype, a0 / a1 the anchor's accumulators there (adds, subtracts and
 * multiplies of pairs as f16x2 / bf16x2 instructions, the other ops per
 * half and rounded once by the pack). False where w is not f16 / bf16. */
bool cg_emit_pair_value(cg_emitter *e, const mcir_tensor *w);
/* After cg_emit_epilogue: `void epilogue_v(i64 i, const float* acc,
 * <params>)` storing vec consecutive anchor elements i.. (i a multiple of
 * vec, every write's buffer aligned to 16 bytes): each value through its
 * write's chain, then packed into 16-byte stores where the dtype allows. */
void cg_emit_epilogue_vec(cg_emitter *e, int vec);

/* ---------------------------------------------------------- templates */

/* The compile unit of a generated source (see cg_kernel.unit): malloc'd;
 * entry receives "mc_<prefix>_<16 hex digits>". */
char *cg_compile_unit(const char *source, const char *name, const char *prefix, char entry[64]);

typedef bool (*cg_generate_fn)(cg_kernel *k, const mcir_target *target, mcir_diag *d);

typedef struct cg_template_desc {
    mcir_template tpl;
    const char *name;
    cg_generate_fn generate;   /* NULL: no kernel */
} cg_template_desc;

const cg_template_desc *cg_template_find(mcir_template t);
const char *cg_template_name(mcir_template t);

bool cg_gen_elementwise(cg_kernel *k, const mcir_target *t, mcir_diag *d);
bool cg_gen_copy(cg_kernel *k, const mcir_target *t, mcir_diag *d);
bool cg_gen_reduce(cg_kernel *k, const mcir_target *t, mcir_diag *d);
bool cg_gen_pool(cg_kernel *k, const mcir_target *t, mcir_diag *d);
bool cg_gen_conv2d(cg_kernel *k, const mcir_target *t, mcir_diag *d);
bool cg_gen_norm(cg_kernel *k, const mcir_target *t, mcir_diag *d);
bool cg_gen_matmul(cg_kernel *k, const mcir_target *t, mcir_diag *d);
bool cg_gen_attention(cg_kernel *k, const mcir_target *t, mcir_diag *d);
bool cg_gen_attention_sm90(cg_kernel *k, const mcir_target *t, mcir_diag *d);
/* Split-KV attention (tpl_attention.c, shared by both templates): the
 * partials' index functions att_partial_o(b, r, s) / att_partial_ml(b, r,
 * s) over items x rows x splits of dv f32 columns (then max, sum), and the
 * merge kernel KERNEL_merge (block threads per row) that combines them
 * into O at att_o_at(b, r) + dv * O_SD through ATT_ST_O(out, ...). */
/* items, rows and splits are C expressions; dims: the functions take the
 * dims (MC_DIMS_PARAMS: size-generic kernels) and the merge passes them;
 * prologue (may be NULL): statements the merge kernel starts with. */
void cg_emit_attention_partials(cg_sb *b, const char *items, const char *rows, const char *splits, int64_t dv,
                                bool dims);
void cg_emit_attention_merge(cg_sb *b, const char *kernel, const char *out, int block, const char *items,
                             const char *rows, const char *splits, int64_t dv, bool dims, const char *prologue);
/* The planner gave kernel kp (an attention, a GEMM or a conv) the sm_90a
 * template: tiling dim "wg", its consumer warp groups. */
bool cg_sm90a_planned(const mcir_kernel_plan *kp);
/* The wgmma.mma_async wrapper NAME (tpl_attention_sm90.c; the sm_90a GEMM
 * uses it too): m64n<n>k16, A from registers (rs) or shared memory
 * (K-major or, tnsp_a, MN-major), B K-major or (tnsp_b) MN-major. */
void cg_emit_wgmma(cg_sb *b, const char *name, int n, bool rs, bool bf16, bool tnsp_a, bool tnsp_b);
/* The sm_90a GEMM (tpl_gemm_sm90.c) for a matmul the planner gave it
 * (tiling dim "wg", kernelplan/launch_gemm_sm90.c). */
bool cg_gen_gemm_sm90(cg_kernel *k, const mcir_target *t, mcir_diag *d);

/* GEMM-shaped kernels (tpl_matmul.c, tpl_conv.c): the MM_* tile macros of
 * templates/matmul.cuh, and the plan's launch checked against the layout
 * and copied to the kernel. */
void cg_emit_gemm_tile(cg_sb *b, const mcir_gemm_problem *g, const mcir_gemm_layout *l);
void cg_emit_gemm_signature(cg_sb *b, const mcir_kernel_plan *kp, const mcir_gemm_layout *l);
bool cg_gemm_launch(cg_kernel *k, const mcir_gemm_problem *g, const mcir_gemm_layout *l, mcir_diag *d);

/* Starts a kernel source: header comment, the prelude. */
void cg_begin_source(cg_sb *b, const mcir_kernel_plan *kp);
/* Reports "kernel NAME: ..." at the anchor's location. */
void cg_error(mcir_diag *d, const mcir_kernel_plan *kp, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---------------------------------------------------------- NVRTC, cache */

/* Reports a failed compile: why, NVRTC's log and the source lines it
 * points at ("NAME.cu(LINE)"). */
void cg_nvrtc_report(mcir_diag *d, const char *name, const char *source, const char *why,
                     const char *log);
/* Raw compile, no cache (counts invocations). log: malloc'd. */
bool cg_nvrtc_compile(const char *name, const char *source, const char *arch,
                      mcir_compiled *out, char **log, char *why, size_t n);

bool cg_cache_load(const char *key, mcir_compiled *out);
void cg_cache_store(const char *key, const mcir_compiled *c);
/* Text entries beside the kernels (DIR/<key>.<ext>): the text, malloc'd,
 * or NULL where there is none (or it does not match its key). */
char *cg_cache_load_text(const char *key, const char *ext);
void cg_cache_store_text(const char *key, const char *ext, const char *text);
/* Two 64-bit FNV-1a hashes (differently seeded) over several strings, as
 * 32 hex digits + 1 NUL. */
void cg_hash_key(char out[33], const char *source, const char *arch, const char *version);

/* ---------------------------------------------------------------- audit */

/* Static counts of instruction classes in PTX text into a. */
void cg_ptx_census(const char *ptx, mcir_kernel_audit *a);
/* The audit of one compiled entry launched with `threads` per block and
 * dynamic_smem bytes (occupancy needs t; NULL leaves it 0). */
void cg_audit_fill(mcir_kernel_audit *a, const mcir_compiled *bin, const char *entry,
                   int threads, int64_t dynamic_smem, const mcir_target *t);

/* ----------------------------------------------------------------- SASS */

/* c->sass: nvdisasm's text of c->cubin, through the kernel cache's text
 * entries (codegen/sass.c); false with why where it cannot be had. */
bool cg_sass_disassemble(mcir_compiled *c, char *why, size_t n);
/* The SASS census of function `entry` in nvdisasm's text (`nvdisasm -c`):
 * counts, loops, the main loops, instructions per 16 bytes, the loads in
 * flight per thread (s->state 1); false (state -1, why) where the entry is
 * not there. The fields that need the launch and the plan
 * (inflight_sm_bytes, issue_us, memory_us) are cg_audit_sass's. */
bool cg_sass_parse(const char *text, const char *entry, mcir_sass_audit *s);
/* a->sass from text (NULL: not available, why) for kernel kp (NULL: an
 * epilogue) on t: the census, the loads in flight per SM at a's occupancy,
 * and a memory-bound template's issue and memory times. */
void cg_audit_sass(mcir_kernel_audit *a, const char *text, const char *why, const mcir_kernel_plan *kp,
                   const mcir_target *t);


#endif /* MCIR_CODEGEN_IMPL_H */
