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
#include <string.h>

#include "codegen/codegen-impl.h"

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

void cg_ptx_census(const char *ptx, mcir_kernel_audit *a) {
    a->mma = a->wgmma = a->ldmatrix = a->cp_async = a->cp_async_bulk = 0;
    for (int i = 0; i < 3; i++) a->ld_global[i] = a->st_global[i] = 0;
    for (const char *line = ptx; line && *line;) {
        const char *end = strchr(line, '\n');
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '@') {   /* predicate guard: @%p1 or @!%p1 */
            while (*p && *p != ' ' && *p != '\t' && *p != '\n') p++;
            while (*p == ' ' || *p == '\t') p++;
        }
        const char *op = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != ';') p++;
        size_t n = (size_t)(p - op);
        if (n && op[0] != '.' && op[0] != '/' && op[n - 1] != ':') {
            if (starts(op, n, "wgmma.mma_async")) a->wgmma++;
            else if (starts(op, n, "mma")) a->mma++;
            else if (starts(op, n, "ldmatrix")) a->ldmatrix++;
            else if (starts(op, n, "cp.async.bulk")) {
                if (!starts(op, n, "cp.async.bulk.commit_group") &&
                    !starts(op, n, "cp.async.bulk.wait_group"))
                    a->cp_async_bulk++;
            } else if (starts(op, n, "cp.async.ca") || starts(op, n, "cp.async.cg"))
                a->cp_async++;
            else if (starts(op, n, "ld.global")) a->ld_global[vector_slot(op, n)]++;
            else if (starts(op, n, "st.global")) a->st_global[vector_slot(op, n)]++;
        }
        line = end ? end + 1 : NULL;
    }
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

/* ---------------------------------------------------------------- table */

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
    if (a->advisories) fprintf(out, "%-*s   ptxas: %s\n", w, "", a->advisory);
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
    fprintf(out, "# kernel audit for %s (%s): ptxas resources, theoretical occupancy, PTX instruction classes\n",
            cg->arch, t ? t->example_gpu : "unknown target");
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
