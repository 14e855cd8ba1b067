/*
 * launch_gemm_sm90.h — the launch model of the sm_90a GEMM template
 * (codegen/templates/gemm_sm90.cuh): whether a matmul kernel takes it, and
 * its tiles. A matmul of f16 or bf16 operands that the TMA can read as
 * they are stored (kernel reads, B also through a folded last-two-dims
 * transpose, or A computed by an elementwise prologue from stored tensors of
 * its shape, possibly times a scale per row applied at the epilogue) takes it on a wgmma target whatever its epilogue: A's tiles
 * and B's arrive through a multi-stage mbarrier ring fed by a producer
 * warp group, one or two consumer warp groups multiply them with
 * wgmma.mma_async and apply the fused epilogue from the accumulators.
 * Called by mcir_launch_gemm after the generic tile choice; on a yes it
 * replaces the tiling and launch (the tiling dimension "wg" marks it), on
 * a no for a Hopper target the reason says why. A conv2d kernel whose
 * weight is read tap-major (rule conv_kxk_tap_major) takes it as an
 * implicit GEMM (mcir_gemm_sm90.conv) where the cost model prices it
 * lower than the mma.sync implicit GEMM (mcir_launch_gemm). Codegen
 * (codegen/tpl_gemm_sm90.c) and the cost model read the same layout.
 *
 *     mcir_gemm_sm90 l;
 *     const char *why;
 *     if (mcir_gemm_sm90_layout(target, kp, &l, &why)) ... l.bn, l.stages
 */
#ifndef MCIR_LAUNCH_GEMM_SM90_H
#define MCIR_LAUNCH_GEMM_SM90_H

#include "kernelplan/kernelplan.h"

typedef struct mcir_gemm_sm90 {
    int64_t m, n, k, batch;  /* C[batch, m, n] = epilogue(A[batch, m, k] B[batch, k, n]) */
    const mcir_tensor *a, *b;   /* the operands as the TMA reads them (a: the first of a_leaf) */
    /* A as the TMA reads it: A itself (n_a 1, no prologue), or the stored
     * inputs of an elementwise prologue computing A from tensors of A's
     * shape and dtype (SwiGLU's silu(g) * u: g, u), each loaded like A and
     * combined in shared memory by the consumers before the wgmmas */
    const mcir_tensor *a_in[2];    /* the stored tensor each A box is read from */
    const mcir_tensor *a_leaf[2];  /* the value a box holds: a_in itself, or a split of it along the last dim */
    int64_t a_col0[2], a_width[2]; /* the leaf's first column in a_in, a_in's last dim */
    int n_a;
    /* a leaf stored as f32 (a cast from f32 on the way): its 64 columns of
     * a K step are 256 bytes, past the 128-byte swizzle span, so it comes
     * as two boxes of 32 columns (128-byte rows, swizzled), a_wide 2 (else
     * 1: one box of 64 16-bit columns); a_at: its first group's box in a
     * stage. a_out: A's tile is computed into a region of its own at the
     * stage's start (leaf 0 is f32: the 16-bit tile cannot be written in
     * place over it); else in place over leaf 0's box. a_bytes: A's part of
     * a stage (the out region and every leaf's boxes, all groups) */
    int a_wide[2];
    int64_t a_at[2];
    bool a_out;
    int64_t a_bytes;
    /* a leaf of the prologue broadcast along A's rows (and batches): a
     * vector of A's K elements ([K], [1, K]: a norm's weight, a scale per
     * column), f16 / bf16, a plain read; its 64 elements of a K step come
     * through the ring as one 128-byte TMA box (v_bytes per stage, after
     * the ring and the output boxes); at most one (a kernel has at most 5
     * tensor maps) */
    const mcir_tensor *v_leaf;
    int n_v;
    int64_t v_bytes;
    int v_esize;   /* its element bytes: 2, or 4 (f32: a box of 256 bytes, unswizzled) */
    /* A = P * s with s a scale per row of A ([.., M, 1]: a dequantisation
     * scale, a row norm), a plain read of any float dtype: the kernel reads
     * P as A (as stored, or by a prologue) and multiplies the accumulators'
     * rows by s[m] at the epilogue (sum_k s[m] P[m, k] B[k, n] = s[m] (P B)[m, n]);
     * row_scale NULL otherwise. a_value: the tensor the A boxes hold (P, or
     * A itself) */
    const mcir_tensor *row_scale;
    bool row_scale_batched;  /* one column of scales per batch (else one for all) */
    /* s multiplies A itself (A = P * s: P read as A); else s is a factor
     * deeper in a chain of muls ((x * s) * gamma) and A's prologue reads it
     * as 1. row_scale_other: the mul's other operand */
    bool row_scale_top;
    const mcir_tensor *row_scale_other;
    const mcir_tensor *a_value;
    bool prologue;
    /* the prologue computes 8 elements a step from one 16-byte load of
     * each box (every leaf 16-bit at the box's own element: no f32 leaf,
     * row vector or per-row scale); codegen keeps the element-wise form
     * where the chain has no vector form (tpl_gemm_sm90.c box_vec_chain) */
    bool a_vec;
    /* The prologue in registers (GM_PROLOGUE_RS; a_vec with A stored [M,
     * K]): each consumer thread loads its wgmma A fragments of the leaves
     * by ldmatrix, applies the chain there and issues wgmma with A from
     * registers — no A box written, fenced and barriered per K step.
     * MCIR_GEMM_PROLOGUE_RS=0 keeps A in shared memory (comparisons). */
    bool prologue_rs;
    int prologue_ops;        /* the region's nodes computing A */
    const mcir_node *prologue_node[16];
    bool trans_a;            /* A stored [k, m] (MN-major for wgmma: tnspA), else [m, k] (K-major) */
    bool trans_b;            /* B stored [n, k] (K-major for wgmma), else [k, n] (MN-major) */
    bool a_batched, b_batched;  /* an operand per batch (else one shared by every batch) */
    int64_t bm, bn, bk;      /* bm = 64 x consumers, bn in 64, 128, 256, bk = 64 */
    int consumers;           /* consumer warp groups (1, 2); + 1 producer group */
    int stages;              /* depth of the A/B ring */
    int threads;
    int64_t tiles_m, tiles_n, items;   /* work items: batch x tiles_m x tiles_n (cluster 2: tiles_m rounded
                                        * up to pairs, the tiles the blocks run) */
    /* A thread-block cluster of `cluster` blocks along M (1 or 2; the tiling
     * dim "cluster"): the blocks of a cluster run the two M tiles of a
     * super-tile (2 bm rows) of one N tile and batch, each loading its A and
     * half of the stage's B tile, multicast into both (B's L2 -> SM traffic
     * halved). Where the template takes it and it pays (cluster_of);
     * MCIR_GEMM_CLUSTER=1 / 2 forces it where legal. cluster_why: the
     * choice's reason (static text or the plan's arena). */
    int cluster;
    const char *cluster_why;
    /* Ping-pong consumer groups (the tiling dim "pingpong" 1; CUTLASS's
     * KernelTmaWarpSpecializedPingpong): each of the two groups takes every
     * other work item of its block whole (bm rows, bn accumulators a
     * thread) and their mainloops take turns, so one group's epilogue runs
     * under the other's mainloop; else (0) the cooperative kernel, the
     * groups splitting every item's rows. Where the template takes it (two
     * groups, no prologue, not a conv, bn <= 128) and the modelled
     * epilogue's exposed time is shorter (pingpong_of);
     * MCIR_GEMM_PINGPONG=0 / 1 forces it where legal. pingpong_why: the
     * choice's reason (static text). */
    bool pingpong;
    const char *pingpong_why;
    /* the work items' order (gm_item_of): bands of group_m M tiles (the
     * last band of a batch possibly shorter), walked down a band's M tiles
     * before the next N tile (1: N tiles of one M tile next to each other) */
    int64_t group_m;
    double wave_bytes;       /* the A and B panels a wave of the grid touches in that order */
    int64_t grid;            /* blocks: min(items, SMs); a grid-stride loop beyond */
    /* the output through shared memory and TMA stores (the region's one
     * write f16 / bf16 with 16-byte rows): two 64 x 64 boxes per consumer
     * group after the ring (o_bytes); else per-thread stores from the
     * accumulators. store: which, and why not the TMA (static text) */
    bool tma_store;
    const char *store;
    int64_t o_bytes;
    /* The paired epilogue (a gated linear unit, mcir_glu_half): the product
     * [.., M, n] is read by the region only as its two halves glu_half[0]
     * (the gate's) and glu_half[1] (the up's), [.., M, n / 2]; the epilogue
     * runs once per (gate, up) accumulator pair at the output's column, and
     * the output is n / 2 wide (TMA stores: one 64 x 64 box per 128
     * columns of a tile, so BLOCK_N >= 128) */
    bool glu;
    const mcir_tensor *glu_half[2];
    int64_t smem_bytes;      /* the ring + the output boxes + the vector boxes + 1 KiB to align the swizzled tiles */
    int producer_regs, consumer_regs;  /* setmaxnreg (two consumer groups) */
    int registers;           /* the model's registers per thread */
    /* the epilogue's issue slots an output element takes a consumer thread
     * beyond a plain product's store (mcir_gemm_sm90_epilogue_us) */
    double epi_issue;
    /* A KxK conv2d as an implicit GEMM (NCHW, stride 1): M = O, N = the
     * output pixels as cv_oh x cv_segw row segments of 64 (pixels past
     * cv_ow computed and masked at the store), K = the taps x cv_cb blocks
     * of 64 channels (channels past C zero-filled by the TMA in both
     * operands), batch = the images. A is the weight stored tap-major
     * [KH, KW, O, C] (rule conv_kxk_tap_major), read per tap as an [O, C]
     * matrix; B the input, read as 4-D boxes {64 w, 1 h, 64 c, 1 n} at
     * (ow0 + kw - pad_l, oh + kh - pad_t, c0, n): the TMA's zero fill of
     * coordinates outside the image is the padding. */
    bool conv;
    int64_t cv_c, cv_h, cv_w, cv_kh, cv_kw, cv_pt, cv_pl, cv_oh, cv_ow, cv_segw, cv_cb;
} mcir_gemm_sm90;

/* Whether k's matmul fits the sm_90a template on t, and its layout; why:
 * what rules it out (static text). */
bool mcir_gemm_sm90_layout(const mcir_target *t, const mcir_kernel_plan *k, mcir_gemm_sm90 *l, const char **why);

/* Applies the choice to k (tiling, launch, smem, reason). */
void mcir_gemm_sm90_choose(const mcir_target *t, mcir_kernel_plan *k, mcir_arena *a);

/* The modelled time of the layout's mainloop in us: waves of work items
 * at a fraction of the tensor cores' dense peak (kernelplan/cost.c). */
double mcir_gemm_sm90_compute_us(const mcir_target *t, const mcir_gemm_sm90 *l);

/* The modelled time in us of the layout's epilogues beyond a plain
 * product's store: waves of work items, each consumer warp issuing
 * epi_issue a thread's output element (its f32 math, the operands'
 * loads), the groups' warps sharing a scheduler, nothing overlapping the
 * next item's mainloop (kernelplan/cost.c adds it to the mainloop's). */
double mcir_gemm_sm90_epilogue_us(const mcir_target *t, const mcir_gemm_sm90 *l);

/* The modelled time in us the SMs take to receive the layout's A and B
 * tiles from L2 (every K step of every tile a block runs, B's share
 * divided by the cluster: its multicast), at an SM's share of the
 * target's L2 bandwidth; 0 where that is not modelled (l2_gbps 0). */
double mcir_gemm_sm90_feed_us(const mcir_target *t, const mcir_gemm_sm90 *l);

/* The rate of a tile of bn columns against the 256-column tile's: its
 * wgmmas read (1/64 + 1/bn) bytes of shared memory per flop. */
double mcir_gemm_sm90_tile_rate(int64_t bn);

/* The fraction of the dense tensor-core peak cuBLAS / cuBLASLt sustain on
 * a large GEMM of this target (measured on an H200 for Hopper; see
 * docs/kernelplan.md "Measured on an H200"). */
double mcir_gemm_library_fraction(const mcir_target *t);

/* Whether fusing an elementwise prologue into a GEMM of batch x m x n x k
 * (f16 / bf16) is modelled faster than materialising it: the prologue
 * reading in_bytes and writing t_bytes (A) in a kernel of its own, then the
 * library GEMM; bc_bytes: B and the output, moved either way (each side
 * is the larger of its compute and its memory time, plus its launches).
 * Fused runs on the generated template at its measured prologue rate
 * where one was measured (sm_90a); elsewhere nothing says otherwise and
 * fusing (which saves the traffic) is kept. row_scale: the prologue is a
 * scale per row of A alone, which the template applies to the product's
 * rows at the epilogue (mcir_gemm_sm90.row_scale): the fused product runs
 * at the plain template's rate. Writes the two modelled times into d. */
bool mcir_gemm_prologue_pays(const mcir_target *t, mcir_dtype dt, int64_t batch, int64_t m, int64_t n,
                             int64_t k, int64_t in_bytes, int64_t t_bytes, int64_t bc_bytes, bool row_scale,
                             char *d, size_t dn);

/* The gated MLP's gate and up projections as one generated GEMM of N = n2
 * with act(gate) * up in its epilogue (the rule glu_matmul), against the
 * library's [.., M, n2] product stored and an elementwise kernel reading it
 * back: on sm_90a the generated GEMM at its measured rate
 * (mcir_gemm_sm90_compute_us at the tiles the layout picks) moving x, the
 * weights and the half-width output; apart the library at its fraction of
 * peak, then the product written and read, the output written, two
 * launches. Without a measured rate of the generated GEMM (other targets)
 * fused: it only saves traffic. MCIR_GLU=always / never (tests) decides
 * without the model. Writes the modelled times into d. */
bool mcir_gemm_glu_pays(const mcir_target *t, mcir_dtype dt, int64_t batch, int64_t m, int64_t n2, int64_t k,
                        int64_t x_bytes, int64_t w_bytes, int64_t h_bytes, char *d, size_t dn);

/* The paired epilogue (a gated linear unit, mcir_glu_half): whether kernel
 * k reads the product C only through its two halves, each a reshape, a
 * slice and a reshape in the region, every step read by the next alone
 * and none written; half[0] (the gate's) and half[1] (the up's) set. */
bool mcir_kernel_glu(const mcir_kernel_plan *k, const mcir_tensor *C, const mcir_tensor **half);

#endif
