/*
 * codegen.c — the codegen pass. Requires: a kernel plan (kernelplan/) whose
 * tensors have inferred shapes; provides: one CUDA C source per kernel
 * (from the template table below), compiled by NVRTC through the cache,
 * with registers / spills written back into the plan, and writers for the
 * cuda / ptx artifacts.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/codegen-impl.h"

/* The template table: a new lowering strategy is one entry here. */
static const cg_template_desc templates[] = {
    {MCIR_TEMPLATE_ALIAS, "alias", NULL},
    {MCIR_TEMPLATE_MATMUL, "matmul", cg_gen_matmul},
    {MCIR_TEMPLATE_STREAMING_ATTENTION, "streaming_attention", cg_gen_attention},
    {MCIR_TEMPLATE_STREAMING_NORM, "streaming_norm", cg_gen_norm},
    {MCIR_TEMPLATE_ELEMENTWISE, "elementwise", cg_gen_elementwise},
    {MCIR_TEMPLATE_REDUCE, "reduce", cg_gen_reduce},
    {MCIR_TEMPLATE_COPY, "copy", cg_gen_copy},
    {MCIR_TEMPLATE_POOL, "pool", cg_gen_pool},
    {MCIR_TEMPLATE_CONV2D, "conv2d", cg_gen_conv2d},
};

const cg_template_desc *cg_template_find(mcir_template t) {
    for (size_t i = 0; i < sizeof templates / sizeof *templates; i++)
        if (templates[i].tpl == t) return &templates[i];
    return NULL;
}

const char *cg_template_name(mcir_template t) {
    const cg_template_desc *d = cg_template_find(t);
    return d ? d->name : "?";
}

mcir_codegen *mcir_codegen_new(mcir_plan *p, const mcir_memory_plan *m, mcir_diag *d) {
    mcir_codegen *cg = calloc(1, sizeof *cg);
    MCIR_ASSERT(cg != NULL);
    cg->plan = p;
    cg->mem = m;
    cg->n = p->n_kernels;
    cg->k = calloc((size_t)(cg->n ? cg->n : 1), sizeof *cg->k);
    MCIR_ASSERT(cg->k != NULL);
    const mcir_target *target = p->target ? p->target : mcir_target_find(MCIR_DEFAULT_ARCH);
    bool ok = true;
    for (int i = 0; i < cg->n; i++) {
        cg_kernel *k = &cg->k[i];
        k->kp = &p->kernels[i];
        k->kp->registers = -1;
        k->kp->spill_bytes = -1;
        const cg_template_desc *t = cg_template_find(k->kp->tpl);
        if (!t) {
            cg_error(d, k->kp, "no template for '%s'", cg_template_name(k->kp->tpl));
            ok = false;
            continue;
        }
        if (!t->generate) continue;
        if (!k->kp->anchor && k->kp->tpl != MCIR_TEMPLATE_ELEMENTWISE &&
            k->kp->tpl != MCIR_TEMPLATE_COPY) {
            cg_error(d, k->kp, "has no anchor node");
            ok = false;
            continue;
        }
        if (!t->generate(k, target, d)) {
            ok = false;
            continue;
        }
        /* The plan reports what is launched: the template has the last
         * word on grid, block and dynamic shared memory. */
        if (k->block[0] > 0) {
            for (int j = 0; j < 3; j++) {
                k->kp->grid[j] = k->grid[j];
                k->kp->block[j] = k->block[j];
            }
            k->kp->smem_bytes = k->smem;
        }
    }
    if (!ok) {
        mcir_codegen_free(cg);
        return NULL;
    }
    return cg;
}

void mcir_codegen_free(mcir_codegen *cg) {
    if (!cg) return;
    for (int i = 0; i < cg->n; i++) {
        free(cg->k[i].source);
        free(cg->k[i].epi_source);
        mcir_compiled_free(&cg->k[i].bin);
        mcir_compiled_free(&cg->k[i].epi_bin);
    }
    free(cg->k);
    free(cg);
}

int mcir_codegen_kernel_count(const mcir_codegen *cg) { return cg->n; }
const char *mcir_codegen_kernel_source(const mcir_codegen *cg, int i) { return cg->k[i].source; }
const char *mcir_codegen_kernel_ptx(const mcir_codegen *cg, int i) {
    return cg->k[i].compiled ? cg->k[i].bin.ptx : NULL;
}
int64_t mcir_codegen_kernel_smem(const mcir_codegen *cg, int i) { return cg->k[i].smem; }

const char *mcir_codegen_kernel_epilogue(const mcir_codegen *cg, int i, const char **name,
                                         int64_t *grid) {
    if (name) *name = cg->k[i].epi_name;
    if (grid) *grid = cg->k[i].epi_grid;
    return cg->k[i].epi_source;
}

void mcir_codegen_kernel_launch(const mcir_codegen *cg, int i, int64_t grid[3], int block[3],
                                int64_t *smem) {
    for (int j = 0; j < 3; j++) {
        grid[j] = cg->k[i].grid[j];
        block[j] = cg->k[i].block[j];
    }
    *smem = cg->k[i].smem;
}

bool mcir_codegen_compile(mcir_codegen *cg, const char *arch, mcir_diag *d) {
    char why[256];
    if (!mcir_nvrtc_available(why, sizeof why)) {
        mcir_error(d, (mcir_loc){0}, "cannot compile kernels: %s", why);
        return false;
    }
    if (!arch) arch = MCIR_DEFAULT_ARCH;
    if (!mcir_target_find(arch) && strncmp(arch, "sm_", 3) != 0) {
        mcir_error(d, (mcir_loc){0}, "unknown architecture '%s'", arch);
        return false;
    }
    snprintf(cg->arch, sizeof cg->arch, "%s", arch);
    bool ok = true;
    for (int i = 0; i < cg->n; i++) {
        cg_kernel *k = &cg->k[i];
        if (!k->source) continue;
        mcir_compiled_free(&k->bin);
        k->compiled = false;
        if (!mcir_nvrtc_compile_source(k->kp->name, k->source, arch, &k->bin, d)) {
            ok = false;
            continue;
        }
        k->compiled = true;
        k->kp->registers = k->bin.registers;
        k->kp->spill_bytes = k->bin.spill_bytes;
        mcir_compiled_free(&k->epi_bin);
        k->epi_compiled = false;
        if (k->epi_source) {
            if (!mcir_nvrtc_compile_source(k->epi_name, k->epi_source, arch, &k->epi_bin, d)) {
                ok = false;
                continue;
            }
            k->epi_compiled = true;
        }
    }
    return ok;
}

bool mcir_codegen_write_cuda(const mcir_codegen *cg, FILE *out) {
    for (int i = 0; i < cg->n; i++) {
        const cg_kernel *k = &cg->k[i];
        if (!k->source) continue;
        fprintf(out, "// kernel %s (%s)\n", k->kp->name, cg_template_name(k->kp->tpl));
        fputs(k->source, out);
        fputs("\n", out);
        if (k->epi_source) {
            fprintf(out, "// kernel %s (epilogue of %s after cuBLAS)\n", k->epi_name, k->kp->name);
            fputs(k->epi_source, out);
            fputs("\n", out);
        }
    }
    return !ferror(out);
}

bool mcir_codegen_write_ptx(const mcir_codegen *cg, FILE *out) {
    for (int i = 0; i < cg->n; i++) {
        const cg_kernel *k = &cg->k[i];
        if (!k->source) continue;
        if (!k->compiled) return false;
        fprintf(out, "// kernel %s\n", k->kp->name);
        fputs(k->bin.ptx, out);
        fputs("\n", out);
        if (k->epi_source && k->epi_compiled) {
            fprintf(out, "// kernel %s\n", k->epi_name);
            fputs(k->epi_bin.ptx, out);
            fputs("\n", out);
        }
    }
    return !ferror(out);
}

/* Writes `data` to path through path.tmp + rename. */
static bool write_atomic(const char *path, const char *data, size_t n, mcir_diag *d) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        mcir_error(d, (mcir_loc){.path = path}, "cannot write: %s", strerror(errno));
        return false;
    }
    bool ok = fwrite(data, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        mcir_error(d, (mcir_loc){.path = path}, "cannot write: %s", strerror(errno));
        remove(tmp);
        return false;
    }
    return true;
}

bool mcir_codegen_write_dir(const mcir_codegen *cg, const char *dir, mcir_diag *d) {
    char path[4096];
    snprintf(path, sizeof path, "%s/kernels", dir);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        mcir_error(d, (mcir_loc){.path = dir}, "cannot create directory: %s", strerror(errno));
        return false;
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        mcir_error(d, (mcir_loc){.path = path}, "cannot create directory: %s", strerror(errno));
        return false;
    }
    for (int i = 0; i < cg->n; i++) {
        const cg_kernel *k = &cg->k[i];
        if (!k->source) continue;
        snprintf(path, sizeof path, "%s/kernels/%s.cu", dir, k->kp->name);
        if (!write_atomic(path, k->source, strlen(k->source), d)) return false;
        if (k->epi_source) {
            snprintf(path, sizeof path, "%s/kernels/%s.cu", dir, k->epi_name);
            if (!write_atomic(path, k->epi_source, strlen(k->epi_source), d)) return false;
        }
        if (k->compiled) {
            snprintf(path, sizeof path, "%s/kernels/%s.ptx", dir, k->kp->name);
            if (!write_atomic(path, k->bin.ptx, k->bin.ptx_size, d)) return false;
        }
        if (k->epi_compiled) {
            snprintf(path, sizeof path, "%s/kernels/%s.ptx", dir, k->epi_name);
            if (!write_atomic(path, k->epi_bin.ptx, k->epi_bin.ptx_size, d)) return false;
        }
    }
    return true;
}
