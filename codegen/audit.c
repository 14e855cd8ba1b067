/*
 * audit.c — what every compiled kernel really uses, read at compile time
 * without a GPU: ptxas's resource report (NVRTC runs ptxas with -v; the
 * report is parsed in nvrtc.c and kept in the kernel cache), the
 * theoretical occupancy those resources allow on the target (the
 * allocation rules of CUDA's occupancy calculator, constants from
 * properties/target.c), the instruction classes found in the PTX, and
 * ptxas's performance advisories and warnings (C7514 wgmma serialised,
 * C7517 warpgroup.wait injected, ...), each a defect of the generated code.
 *
 * Invariant: an audit describes the function that is launched — the
 * compiled source's entry — and is filled only after a successful compile;
 * instruction counts are static (occurrences in the PTX, not executions).
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"
#include "kernelplan/launch_gemm_sm90.h"

static int64_t round_up(int64_t v, int64_t unit) { return unit > 0 ? (v + unit - 1) / unit * unit : v; }

/* Theoretical occupancy: resident blocks per SM and the resource that
 * bounds them (as cudaOccupancyMaxActiveBlocksPerMultiprocessor computes it). */
static void occupancy(const mcir_target *t, mcir_kernel_audit *a) {
    int warps = (int)round_up(a->threads > 0 ? a->threads : 1, t->warp_size) / t->warp_size;
    int max_warps = t->max_threads_per_sm / t->warp_size;
    int b = t->max_blocks_per_sm;
    const char *limit = "blocks";
    if (max_warps / warps < b) {
        b = max_warps / warps;
        limit = "warps";
    }
    if (a->registers > 0) {
        int64_t per_warp = round_up((int64_t)a->registers * t->warp_size, t->reg_alloc_unit);
        int64_t warps_per_part = (t->regs_per_sm / t->sm_partitions) / per_warp;
        int by_regs = (int)(warps_per_part * t->sm_partitions / warps);
        if (by_regs < b) {
            b = by_regs;
            limit = "registers";
        }
    }
    int64_t smem = round_up(a->smem_static_bytes + a->smem_dynamic_bytes + t->smem_reserved_per_block,
                            t->smem_alloc_unit);
    if (smem > 0 && t->smem_per_sm / smem < b) {
        b = (int)(t->smem_per_sm / smem);
        limit = "shared memory";
    }
    a->blocks_per_sm = b;
    a->occupancy = (double)(b * warps) / (double)max_warps;
    a->occupancy_limit = limit;
}

/* "ld.global.nc.v4.f32" → 2 (the index of .v4 among scalar, .v2, .v4). */
static int vector_slot(const char *op, size_t n) {
    for (size_t i = 0; i + 3 <= n; i++)
        if (op[i] == '.' && op[i + 1] == 'v' && (i + 3 == n || op[i + 3] == '.')) {
            if (op[i + 2] == '2') return 1;
            if (op[i + 2] == '4' || op[i + 2] == '8') return 2;
        }
    return 0;
}

static bool starts(const char *op, size_t n, const char *prefix) {
    size_t k = strlen(prefix);
    return n >= k && memcmp(op, prefix, k) == 0 && (n == k || op[k] == '.');
}

/* One PTX line: its opcode (after a predicate guard) or its label. */
typedef struct ptx_line {
    const char *op;      /* NULL: no instruction */
    size_t n;
    const char *label;   /* "$L__BB0_3" of a "$L__BB0_3:" line */
    size_t label_n;
    const char *target;  /* a bra's label */
    size_t target_n;
} ptx_line;

static ptx_line ptx_parse(const char *line) {
    ptx_line l = {0};
    const char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '@') {   /* predicate guard: @%p1 or @!%p1 */
        while (*p && *p != ' ' && *p != '\t' && *p != '\n') p++;
        while (*p == ' ' || *p == '\t') p++;
    }
    const char *op = p;
    while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != ';') p++;
    size_t n = (size_t)(p - op);
    if (!n || op[0] == '.' || op[0] == '/' || op[0] == '{' || op[0] == '}' || op[0] == ')' || op[0] == '(') return l;
    if (op[n - 1] == ':') {
        l.label = op;
        l.label_n = n - 1;
        return l;
    }
    l.op = op;
    l.n = n;
    if (starts(op, n, "bra")) {
        while (*p == ' ' || *p == '\t') p++;
        const char *t = p;
        while (*p && *p != ';' && *p != ' ' && *p != '\n') p++;
        l.target = t;
        l.target_n = (size_t)(p - t);
    }
    return l;
}

/* The kinds of instruction the census counts. */
enum { K_NONE, K_MMA, K_WGMMA, K_LDSM, K_CPA, K_BULK, K_LDG, K_STG, K_LDS, K_STS, K_CVT };

static int ptx_kind(const char *op, size_t n) {
    if (starts(op, n, "wgmma.mma_async")) return K_WGMMA;
    if (starts(op, n, "mma")) return K_MMA;
    if (starts(op, n, "ldmatrix")) return K_LDSM;
    if (starts(op, n, "cp.async.bulk"))
        return starts(op, n, "cp.async.bulk.commit_group") || starts(op, n, "cp.async.bulk.wait_group") ? K_NONE
                                                                                                          : K_BULK;
    if (starts(op, n, "cp.async.ca") || starts(op, n, "cp.async.cg")) return K_CPA;
    if (starts(op, n, "ld.global")) return K_LDG;
    if (starts(op, n, "st.global")) return K_STG;
    if (starts(op, n, "ld.shared")) return K_LDS;
    if (starts(op, n, "st.shared")) return K_STS;
    if (starts(op, n, "cvt")) return K_CVT;
    return K_NONE;
}

void cg_ptx_census(const char *ptx, mcir_kernel_audit *a) {
    a->mma = a->wgmma = a->ldmatrix = a->cp_async = a->cp_async_bulk = 0;
    for (int i = 0; i < 3; i++) a->ld_global[i] = a->st_global[i] = 0;
    memset(&a->mainloop, 0, sizeof a->mainloop);
    int n_lines = 0;
    for (const char *c = ptx; c && *c; c++) n_lines += *c == '\n';
    n_lines++;
    ptx_line *lines = calloc((size_t)n_lines, sizeof *lines);
    int *kind = calloc((size_t)n_lines, sizeof *kind);
    MCIR_ASSERT(lines && kind);
    int count = 0;
    for (const char *line = ptx; line && *line && count < n_lines;) {
        const char *end = strchr(line, '\n');
        ptx_line l = ptx_parse(line);
        lines[count] = l;
        kind[count] = l.op ? ptx_kind(l.op, l.n) : K_NONE;
        if (l.op) {
            switch (kind[count]) {
            case K_WGMMA: a->wgmma++; break;
            case K_MMA: a->mma++; break;
            case K_LDSM: a->ldmatrix++; break;
            case K_BULK: a->cp_async_bulk++; break;
            case K_CPA: a->cp_async++; break;
            case K_LDG: a->ld_global[vector_slot(l.op, l.n)]++; break;
            case K_STG: a->st_global[vector_slot(l.op, l.n)]++; break;
            default: break;
            }
        }
        count++;
        line = end ? end + 1 : NULL;
    }
    /* loops: a backward branch to a label above it. The main loops: for
     * each matrix instruction (mma, wgmma) or copy (ldmatrix, cp.async,
     * bulk), the innermost loop that holds it, less a loop around a loop
     * with matrix instructions (a persistent kernel's item loop around its
     * K loop, with a peeled step's wgmma or only the output's stores); a K
     * loop whose load loops sit inside it counts whole (mma in it, copies
     * in them) */
    int cap = 64, n_loops = 0;
    int(*loop)[2] = malloc(sizeof *loop * (size_t)cap);
    MCIR_ASSERT(loop != NULL);
    for (int i = 0; i < count; i++) {
        if (!lines[i].target) continue;
        for (int j = i - 1; j >= 0; j--)
            if (lines[j].label && lines[j].label_n == lines[i].target_n &&
                memcmp(lines[j].label, lines[i].target, lines[j].label_n) == 0) {
                if (n_loops == cap) {
                    cap *= 2;
                    loop = realloc(loop, sizeof *loop * (size_t)cap);
                    MCIR_ASSERT(loop != NULL);
                }
                loop[n_loops][0] = j;
                loop[n_loops][1] = i;
                n_loops++;
                break;
            }
    }
    int *cls = calloc((size_t)n_loops + 1, sizeof *cls);   /* 1: matrix, 2: copies, held directly */
    bool *in = calloc((size_t)count + 1, sizeof *in);
    MCIR_ASSERT(cls && in);
    for (int q = 0; q < count; q++) {
        int k = kind[q], c = k == K_MMA || k == K_WGMMA ? 1 : k == K_LDSM || k == K_CPA || k == K_BULK ? 2 : 0;
        if (!c) continue;
        int best = -1;
        for (int x = 0; x < n_loops; x++)
            if (loop[x][0] <= q && q <= loop[x][1] &&
                (best < 0 || loop[x][1] - loop[x][0] < loop[best][1] - loop[best][0]))
                best = x;
        if (best >= 0) cls[best] |= c;
    }
    for (int x = 0; x < n_loops; x++) {
        if (!cls[x]) continue;
        bool keep = true, outer = true;
        for (int y = 0; y < n_loops; y++) {
            if (y == x || !cls[y]) continue;
            bool y_in_x = loop[x][0] <= loop[y][0] && loop[y][1] <= loop[x][1] &&
                          (loop[x][0] != loop[y][0] || loop[x][1] != loop[y][1]);
            bool x_in_y = loop[y][0] <= loop[x][0] && loop[x][1] <= loop[y][1] &&
                          (loop[x][0] != loop[y][0] || loop[x][1] != loop[y][1]);
            /* a peeled matrix step, or a walk over items whose K loop
             * holds the matrix instructions (an item loop with only the
             * output's TMA stores: the register prologue's K loop, no step
             * peeled) */
            if (y_in_x && (cls[y] & 1)) keep = false;
            if (x_in_y) outer = false;
        }
        if (!keep) {
            cls[x] = 0;
            x = -1;   /* a dropped loop may have hidden others' nesting: again */
            continue;
        }
        (void)outer;
    }
    for (int x = 0; x < n_loops; x++) {
        if (!cls[x]) continue;
        bool outer = true;   /* not inside another main loop: counted once */
        for (int y = 0; y < n_loops && outer; y++)
            outer = y == x || !cls[y] ||
                    !(loop[y][0] <= loop[x][0] && loop[x][1] <= loop[y][1] &&
                      (loop[y][0] != loop[x][0] || loop[y][1] != loop[x][1]));
        if (outer) a->mainloop.loops++;
        for (int q = loop[x][0]; q <= loop[x][1]; q++) in[q] = true;
    }
    for (int q = 0; q < count; q++) {
        if (!in[q] || !lines[q].op) continue;
        a->mainloop.instructions++;
        switch (kind[q]) {
        case K_WGMMA: a->mainloop.wgmma++; break;
        case K_MMA: a->mainloop.mma++; break;
        case K_LDSM: a->mainloop.ldmatrix++; break;
        case K_BULK: a->mainloop.cp_async_bulk++; break;
        case K_CPA: a->mainloop.cp_async++; break;
        case K_LDG: a->mainloop.ld_global++; break;
        case K_STG: a->mainloop.st_global++; break;
        case K_LDS: a->mainloop.ld_shared++; break;
        case K_STS: a->mainloop.st_shared++; break;
        case K_CVT: a->mainloop.cvt++; break;
        default: break;
        }
    }
    free(in);
    free(cls);
    free(loop);
    free(kind);
    free(lines);
}

void cg_audit_fill(mcir_kernel_audit *a, const mcir_compiled *bin, const char *entry,
                   int threads, int64_t dynamic_smem, const mcir_target *t) {
    memset(a, 0, sizeof *a);
    a->valid = true;
    snprintf(a->entry, sizeof a->entry, "%s", entry);
    a->shared_by = 1;
    a->registers = bin->registers;
    a->spill_store_bytes = bin->spill_store_bytes;
    a->spill_load_bytes = bin->spill_load_bytes;
    a->local_bytes = bin->stack_bytes;
    a->smem_static_bytes = bin->smem_static_bytes;
    a->smem_dynamic_bytes = dynamic_smem;
    a->threads = threads;
    a->advisories = bin->advisories;
    snprintf(a->advisory, sizeof a->advisory, "%s", bin->advisory);
    if (t) occupancy(t, a);
    cg_ptx_census(bin->ptx, a);
}

/* The templates whose kernels stream memory: the SASS audit prices their
 * issue against their DRAM time. */
static bool memory_bound(const mcir_kernel_plan *kp) {
    return kp && (kp->tpl == MCIR_TEMPLATE_ELEMENTWISE || kp->tpl == MCIR_TEMPLATE_COPY ||
                  kp->tpl == MCIR_TEMPLATE_STREAMING_NORM || kp->tpl == MCIR_TEMPLATE_REDUCE ||
                  kp->tpl == MCIR_TEMPLATE_POOL);
}

void cg_audit_sass(mcir_kernel_audit *a, const char *text, const char *why, const mcir_kernel_plan *kp,
                   const mcir_target *t) {
    mcir_sass_audit *s = &a->sass;
    if (!text) {
        memset(s, 0, sizeof *s);
        s->state = -1;
        snprintf(s->why, sizeof s->why, "%s", why && *why ? why : "no disassembly");
        return;
    }
    if (!cg_sass_parse(text, a->entry, s)) return;
    s->inflight_sm_bytes = (int64_t)a->blocks_per_sm * a->threads * s->inflight_thread_bytes;
    if (t && kp && kp->tpl == MCIR_TEMPLATE_STREAMING_ATTENTION && cg_sm90a_planned(kp) &&
        s->wgmma_loops > 0 && t->clock_ghz > 0 && t->sm_count > 0) {
        /* a K/V tile of one consumer group: S = Q K^T and O += P V, each
         * 64 x BN x d multiply-adds, at the target's tensor peak per SM */
        int64_t bn = 0, d = 0;
        for (int i = 0; i < kp->tiling.n_dims && i < MCIR_MAX_TILE_DIMS; i++) {
            if (strcmp(kp->tiling.dim_names[i], "kv") == 0) bn = kp->tiling.block_tile[i];
            if (strcmp(kp->tiling.dim_names[i], "d") == 0) d = kp->tiling.block_tile[i];
        }
        bool bf16 = kp->anchor && kp->anchor->inputs[0]->dtype == MCIR_DTYPE_BF16;
        double peak = bf16 ? t->bf16_tc_tflops : t->f16_tc_tflops;
        double per_clock = peak * 1e12 / (t->sm_count * t->clock_ghz * 1e9);
        if (bn > 0 && d > 0 && per_clock > 0) {
            s->tile_tensor_clocks = 4.0 * 64 * (double)bn * (double)d / per_clock;
            s->tile_issue_ratio = (double)s->wgmma_loop_instructions / s->wgmma_loops / s->tile_tensor_clocks;
        }
    }
    mcir_gemm_sm90 gl;
    if (t && kp && (kp->tpl == MCIR_TEMPLATE_MATMUL || kp->tpl == MCIR_TEMPLATE_CONV2D) && s->item_loops > 0 &&
        cg_sm90a_planned(kp) &&
        t->clock_ghz > 0 && t->sm_count > 0 && mcir_gemm_sm90_layout(t, kp, &gl, NULL)) {
        /* one consumer group's 64 x BN slice of an item over K (a conv:
         * its taps' K), or with ping-pong the group's whole item (bm x BN:
         * its epilogue runs under the other group's item alike), at the
         * target's tensor peak per SM */
        double peak = gl.b->dtype == MCIR_DTYPE_BF16 ? t->bf16_tc_tflops : t->f16_tc_tflops;
        double per_clock = peak * 1e12 / (t->sm_count * t->clock_ghz * 1e9);
        double k = (double)gl.k;
        if (per_clock > 0 && k > 0) {
            s->item_tensor_clocks = 2.0 * (double)(gl.pingpong ? gl.bm : 64) * (double)gl.bn * k / per_clock;
            s->item_issue_ratio = s->item_instructions / s->item_tensor_clocks;
        }
    }
    if (!t || !memory_bound(kp) || s->loop_bytes <= 0) return;
    /* a warp moves 16 bytes a lane (512 bytes) per weighted_per_16b
     * instructions, over the bytes the cost model says the kernel's loads
     * and stores request (global_bytes: a norm's gamma and beta at every
     * row, as its main loop loads them); its DRAM time over hbm_bytes */
    mcir_kernel_cost c;
    mcir_cost_kernel(kp, t, NULL, &c);
    s->memory_us = (double)c.hbm_bytes / (t->dram_gbps * 1e3);
    s->issue_us = mcir_issue_us(t, s->weighted_per_16b * (double)c.global_bytes / (16.0 * t->warp_size));
}

/* ---------------------------------------------------------------- table */

static void print_widths(FILE *out, const char *what, const int *n) {
    fprintf(out, "%s %d/%d/%d/%d", what, n[MCIR_SASS_NARROW], n[MCIR_SASS_B32], n[MCIR_SASS_B64], n[MCIR_SASS_B128]);
}

static void print_mufu(FILE *out, const mcir_sass_counts *c) {
    static const char *const names[] = {
#define MCIR_SASS_MUFU_LOWER(name, spelling) #name,
        MCIR_SASS_MUFU(MCIR_SASS_MUFU_LOWER)
#undef MCIR_SASS_MUFU_LOWER
    };
    int any = 0;
    fputs(", MUFU", out);
    for (int i = 0; i < MCIR_MUFU_COUNT; i++)
        if (c->mufu[i]) fprintf(out, "%s %s %d", any++ ? "," : "", names[i], c->mufu[i]);
    if (!any) fputs(" 0", out);
}

/* The SASS lines of a kernel (mcir_codegen_audit_sass): the entry, then
 * its main loop; nothing where the SASS was not asked for. */
static void print_sass(FILE *out, int w, const mcir_sass_audit *s) {
    if (s->state == 0) return;
    if (s->state < 0) {
        fprintf(out, "%-*s   SASS: not available (%s)\n", w, "", s->why);
        return;
    }
    const mcir_sass_counts *k = &s->kernel, *l = &s->loop;
    fprintf(out, "%-*s   SASS: %d instructions (+%d in subroutines), ", w, "", k->instructions,
            s->subroutine_instructions);
    print_widths(out, "LDG", k->ldg);
    print_widths(out, ", STG", k->stg);
    print_widths(out, ", LDS", k->lds);
    print_widths(out, ", STS", k->sts);
    fputs(" (8-16/32/64/128-bit)", out);
    if (k->ldsm || k->stsm) fprintf(out, ", LDSM %d, STSM %d", k->ldsm, k->stsm);
    print_mufu(out, k);
    fprintf(out, ", FCHK %d, slow paths %d, integer divisions %d, %d loop%s\n", k->fchk, k->slow_paths,
            k->int_div_calls, s->loops, s->loops == 1 ? "" : "s");
    if (s->wgmma_loops) {
        fprintf(out, "%-*s   SASS wgmma loop%s (%d): %d/iter, HGMMA %d, MUFU.EX2 %d, %d of them while a wgmma group "
                     "is in flight (%d of %d loops all)",
                w, "", s->wgmma_loops > 1 ? "s" : "", s->wgmma_loops, s->wgmma_loop_instructions, s->wgmma_loop_hgmma,
                s->wgmma_loop_ex2, s->wgmma_loop_ex2_overlapped, s->wgmma_loops_overlapped, s->wgmma_loops);
        if (s->tile_tensor_clocks > 0)
            fprintf(out, "; a warp issues %.0f per K/V tile against %.0f tensor clocks of its group (%.2f)",
                    (double)s->wgmma_loop_instructions / s->wgmma_loops, s->tile_tensor_clocks, s->tile_issue_ratio);
        fputc('\n', out);
    }
    if (s->item_loops) {
        fprintf(out, "%-*s   SASS item loop%s (%d): %d instructions outside the wgmma loop%s", w, "",
                s->item_loops > 1 ? "s" : "", s->item_loops, s->item_instructions,
                s->item_inner_loops ? " (with a loop of its own, counted once)" : "");
        if (s->item_tensor_clocks > 0)
            fprintf(out, "; a warp issues them against %.0f tensor clocks of its group's item (%.2f)",
                    s->item_tensor_clocks, s->item_issue_ratio);
        fputc('\n', out);
    }
    if (s->setmaxnreg_regions) {
        fprintf(out, "%-*s   SASS setmaxnreg:", w, "");
        for (int i = 0; i < s->setmaxnreg_regions && i < MCIR_SASS_MAXNREG_REGIONS; i++)
            fprintf(out, "%s R0..R%d under %d", i ? "," : "", s->maxnreg_used[i] - 1, s->maxnreg_budget[i]);
        fprintf(out, "%s\n", s->setmaxnreg_over ? " -- OVER THE COUNT" : " (within)");
    }
    if (!s->main_loops) {
        if (!s->wgmma_loops) fprintf(out, "%-*s   SASS main loop: none (no loop holds a global load)\n", w, "");
        return;
    }
    fprintf(out, "%-*s   SASS main loop%s (%d): %d/iter moving %d B a lane, %.1f per 16 B (weighted %.1f), ", w, "",
            s->main_loops > 1 ? "s" : "", s->main_loops, l->instructions, s->loop_bytes, s->per_16b,
            s->weighted_per_16b);
    print_widths(out, "LDG", l->ldg);
    print_widths(out, ", STG", l->stg);
    print_mufu(out, l);
    fprintf(out, ", FCHK %d, slow paths %d, in flight %d B a thread = %.1f KiB/SM", l->fchk, l->slow_paths,
            s->inflight_thread_bytes, (double)s->inflight_sm_bytes / 1024.0);
    if (s->issue_us >= 0) fprintf(out, ", issue %.1f us vs memory %.1f us", s->issue_us, s->memory_us);
    fputc('\n', out);
}

static void print_row(FILE *out, int w, const char *name, const char *tpl, const mcir_kernel_audit *a,
                      int regs_estimate, int64_t smem_estimate) {
    char est[16] = "-", plan[24] = "-", occ[40], ld[24], st[24], smem[32], spill[24];
    if (regs_estimate > 0) snprintf(est, sizeof est, "%d", regs_estimate);
    if (smem_estimate >= 0) snprintf(plan, sizeof plan, "%lld", (long long)smem_estimate);
    snprintf(occ, sizeof occ, "%2d x %4d %3.0f%% %s", a->blocks_per_sm, a->threads, 100.0 * a->occupancy,
             a->occupancy_limit ? a->occupancy_limit : "?");
    snprintf(spill, sizeof spill, "%d/%d", a->spill_store_bytes, a->spill_load_bytes);
    snprintf(smem, sizeof smem, "%d+%lld", a->smem_static_bytes, (long long)a->smem_dynamic_bytes);
    snprintf(ld, sizeof ld, "%d/%d/%d", a->ld_global[0], a->ld_global[1], a->ld_global[2]);
    snprintf(st, sizeof st, "%d/%d/%d", a->st_global[0], a->st_global[1], a->st_global[2]);
    fprintf(out, "%-*s %-19s %4d %4s %7s %5d %12s %7s  %-26s %4d %5d %4d %5d %4d %10s %10s %3d  %s", w, name,
            tpl, a->registers, est, spill, a->local_bytes, smem, plan, occ, a->mma, a->wgmma,
            a->ldmatrix, a->cp_async, a->cp_async_bulk, ld, st, a->advisories, a->entry);
    if (a->shared_by > 1) fprintf(out, " (x%d)", a->shared_by);
    fputc('\n', out);
    if (a->mainloop.loops)
        fprintf(out, "%-*s   main loop%s (%d, %d instructions): mma %d, wgmma %d, ldmatrix %d, cp.async %d, bulk %d, "
                     "ld.global %d, st.global %d, ld.shared %d, st.shared %d, cvt %d\n",
                w, "", a->mainloop.loops > 1 ? "s" : "", a->mainloop.loops, a->mainloop.instructions, a->mainloop.mma,
                a->mainloop.wgmma, a->mainloop.ldmatrix, a->mainloop.cp_async, a->mainloop.cp_async_bulk,
                a->mainloop.ld_global, a->mainloop.st_global, a->mainloop.ld_shared, a->mainloop.st_shared,
                a->mainloop.cvt);
    if (a->advisories) fprintf(out, "%-*s   ptxas: %s\n", w, "", a->advisory);
    print_sass(out, w, &a->sass);
}

bool mcir_codegen_write_audit(const mcir_codegen *cg, FILE *out) {
    int w = 6;
    for (int i = 0; i < cg->n; i++) {
        const cg_kernel *k = &cg->k[i];
        if (!k->source) continue;
        if (!k->compiled || (k->epi_source && !k->epi_compiled)) return false;
        int n = (int)strlen(k->kp->name);
        if (k->epi_source && (int)strlen(k->epi_name) > n) n = (int)strlen(k->epi_name);
        if (n > w) w = n;
    }
    const mcir_target *t = mcir_target_find(cg->arch);
    bool sass = false;
    for (int i = 0; i < cg->n; i++) sass = sass || cg->k[i].kp->audit.sass.state;
    fprintf(out, "# kernel audit for %s (%s): ptxas resources, theoretical occupancy, PTX instruction classes%s\n",
            cg->arch, t ? t->example_gpu : "unknown target", sass ? "; SASS (nvdisasm) under each kernel" : "");
    fprintf(out, "%-*s %-19s %4s %4s %7s %5s %12s %7s  %-26s %4s %5s %4s %5s %4s %10s %10s %3s  %s\n", w,
            "kernel", "template", "regs", "est", "spill", "local", "smem", "plan", "occupancy", "mma",
            "wgmma", "ldsm", "cpasy", "bulk", "ld.global", "st.global", "adv", "entry");
    fprintf(out, "%-*s %-19s %4s %4s %7s %5s %12s %7s  %-26s %4s %5s %4s %5s %4s %10s %10s %3s  %s\n", w, "",
            "", "", "plan", "st/ld B", "B", "static+dyn B", "smem B", "blocks x thr, warps, limit", "",
            "", "", "", "", "s/v2/v4", "s/v2/v4", "", "(xN: kernels sharing it)");
    for (int i = 0; i < cg->n; i++) {
        const cg_kernel *k = &cg->k[i];
        if (!k->source) continue;
        const mcir_kernel_plan *kp = k->kp;
        print_row(out, w, kp->name, cg_template_name(kp->tpl), &kp->audit, kp->tiling.registers_estimate,
                  kp->tiling.working_set_bytes);
        if (k->epi_source)
            print_row(out, w, k->epi_name, "matmul_epilogue", &kp->epilogue_audit, 0, -1);
    }
    return !ferror(out);
}
