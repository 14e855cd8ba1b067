/*
 * codegen.c — the codegen pass. Requires: a kernel plan (kernelplan/) whose
 * tensors have inferred shapes; provides: one CUDA C source per kernel
 * (from the template table below) realising the plan's launch exactly
 * (checked: a template that would launch differently is an internal
 * error), compiled by NVRTC through the cache,
 * with registers / spills / the audit written back into the plan, and
 * writers for the cuda / ptx artifacts.
 *
 * Compile units: kernels whose sources differ only in names (the kernel's
 * own, node and tensor names in comments, tensor ids in value functions
 * v<ID>, their vector forms vv<ID> and packed-index forms p<ID>) — the
 * layers of a stack — compile once. The unit is the source with comments
 * blanked (newlines kept, so NVRTC's line numbers are the generated
 * source's), v<ID> / vv<ID> / p<ID> renumbered in order of first use (one
 * number per id), and the
 * entry renamed mc_<template>_<hash of the rest>; the first kernel with a
 * unit owns its compiled object, the others share it. Units missing from
 * the cache compile in parallel, one NVRTC program per thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "codegen/codegen-impl.h"
#include "emu/compile.h"

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
    {MCIR_TEMPLATE_COLLECTIVE, "collective", NULL},   /* NCCL / in memory (runtime/); no kernel */
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

/* ------------------------------------------------------ compile units */

static bool ident_start(char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

/* "v123" → 1, "vv123" → 2 (its vector form), "p123" → 1 (its form at a
 * packed epilogue index): the length of the prefix of a value function of
 * the emitter (codegen/emit.c); 0 for other names. */
static size_t value_fn(const char *s, size_t n) {
    size_t p = n > 2 && s[0] == 'v' && s[1] == 'v' ? 2 : 1;
    if (n < p + 1 || (s[0] != 'v' && s[0] != 'p')) return 0;
    for (size_t i = p; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return p;
}

/* Stands for the entry name while a unit is hashed (the name comes from the
 * hash); a byte that cannot occur in C source. */
#define ENTRY_MARK "\x01"

/* Appends n bytes (the hot path: a unit is built token by token). */
static void put(cg_sb *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1) cap *= 2;
        b->s = realloc(b->s, cap);
        MCIR_ASSERT(b->s != NULL);
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

char *cg_compile_unit(const char *src, const char *name, const char *prefix, char entry[64]) {
    size_t name_len = strlen(name);
    cg_sb b = {0};
    /* v<ID> renumbering: ids in order of first use */
    int n_ids = 0, cap_ids = 0;
    long *ids = NULL;
    const char *p = src;
    while (*p) {
        const char *q = p;
        if (p[0] == '/' && p[1] == '/') {   /* line comment: dropped, newline kept */
            while (*q && *q != '\n') q++;
        } else if (p[0] == '/' && p[1] == '*') {   /* block comment: its newlines kept */
            for (q += 2; *q && !(q[0] == '*' && q[1] == '/'); q++)
                if (*q == '\n') put(&b, "\n", 1);
            if (*q) q += 2;
        } else if (*p == '"' || *p == '\'') {   /* literal, verbatim */
            for (q++; *q && *q != *p && *q != '\n'; q += (q[0] == '\\' && q[1]) ? 2 : 1) {}
            if (*q == *p) q++;
            put(&b, p, (size_t)(q - p));
        } else if (*p >= '0' && *p <= '9') {   /* pp-number: 1e-5f, 0x1fu, 42LL */
            while (ident_char(*q) || *q == '.' || ((*q == '+' || *q == '-') && strchr("eEpP", q[-1])))
                q++;
            put(&b, p, (size_t)(q - p));
        } else if (ident_start(*p)) {
            while (ident_char(*q)) q++;
            size_t n = (size_t)(q - p);
            if (n == name_len && !memcmp(p, name, n)) {
                put(&b, ENTRY_MARK, 1);
            } else if (value_fn(p, n)) {
                size_t pre = value_fn(p, n);
                long id = strtol(p + pre, NULL, 10);
                int k = 0;
                while (k < n_ids && ids[k] != id) k++;
                if (k == n_ids) {
                    if (n_ids == cap_ids) {
                        cap_ids = cap_ids ? 2 * cap_ids : 16;
                        ids = realloc(ids, sizeof *ids * (size_t)cap_ids);
                        MCIR_ASSERT(ids != NULL);
                    }
                    ids[n_ids++] = id;
                }
                char v[16];
                put(&b, v, (size_t)snprintf(v, sizeof v, "%.*s%d", (int)pre, p, k));
            } else {
                put(&b, p, n);
            }
        } else {   /* punctuation and spaces, up to the next token that matters */
            for (q++; *q && *q != '/' && *q != '"' && *q != '\'' && !ident_char(*q); q++) {}
            put(&b, p, (size_t)(q - p));
        }
        p = q;
    }
    free(ids);
    char key[33];
    cg_hash_key(key, b.s ? b.s : "", prefix, "unit");
    snprintf(entry, 64, "mc_%s_%.16s", prefix, key);
    cg_sb u = {0};
    size_t entry_len = strlen(entry);
    for (const char *r = b.s ? b.s : ""; *r;) {
        const char *m = strchr(r, ENTRY_MARK[0]);
        size_t n = m ? (size_t)(m - r) : strlen(r);
        put(&u, r, n);
        if (!m) break;
        put(&u, entry, entry_len);
        r = m + 1;
    }
    cg_sb_free(&b);
    return cg_sb_take(&u);
}

/* Links every kernel to the first one with the same unit (an O(n·units)
 * scan on the 16-digit content hash in the entry, confirmed by the text). */
static void share_units(mcir_codegen *cg) {
    for (int i = 0; i < cg->n; i++) {
        cg_kernel *k = &cg->k[i];
        k->owner = k->epi_owner = -1;
        k->unit_smem = k->smem;
        for (int j = 0; j < i && k->unit && k->owner < 0; j++) {
            cg_kernel *o = &cg->k[j];
            if (o->unit && o->owner < 0 && !strcmp(o->entry, k->entry) && !strcmp(o->unit, k->unit)) {
                k->owner = j;
                if (k->smem > o->unit_smem) o->unit_smem = k->smem;
            }
        }
        for (int j = 0; j < i && k->epi_unit && k->epi_owner < 0; j++) {
            cg_kernel *o = &cg->k[j];
            if (o->epi_unit && o->epi_owner < 0 && !strcmp(o->epi_entry, k->epi_entry) &&
                !strcmp(o->epi_unit, k->epi_unit))
                k->epi_owner = j;
        }
    }
}

const mcir_compiled *cg_kernel_bin(const mcir_codegen *cg, int i) {
    int o = cg->k[i].owner;
    return o >= 0 ? &cg->k[o].bin : &cg->k[i].bin;
}

const mcir_compiled *cg_kernel_epi_bin(const mcir_codegen *cg, int i) {
    int o = cg->k[i].epi_owner;
    return o >= 0 ? &cg->k[o].epi_bin : &cg->k[i].epi_bin;
}

/* The graph the plan's kernels are generated for where its dims range
 * over more than one size (cg_dyn), else NULL. */
static const mcir_graph *dynamic_graph(const mcir_codegen *cg) {
    const mcir_graph *g = cg->plan->graph;
    return g && mcir_graph_is_dynamic(g) ? g : NULL;
}

/* The template writes kernel k's source (size-generic where the graph's
 * dims range over more than one size). */
static bool generate(const mcir_codegen *cg, const cg_template_desc *t, cg_kernel *k, const mcir_target *target,
                     mcir_diag *d) {
    cg_dyn = dynamic_graph(cg);
    cg_exact_math = cg->plan->exact_math;
    bool ok = t->generate(k, target, d);
    cg_dyn = NULL;
    cg_exact_math = false;
    return ok;
}

/* The template's launch equals the plan's: grid, block, dynamic and
 * static shared memory. */
static bool launch_matches(const cg_kernel *k, mcir_diag *d) {
    const mcir_kernel_plan *kp = k->kp;
    /* The GEMM-shaped templates check the plan's launch against their
     * layout themselves (cg_gemm_launch, tpl_matmul.c / tpl_conv.c). */
    if (kp->tpl == MCIR_TEMPLATE_MATMUL || kp->tpl == MCIR_TEMPLATE_CONV2D) return true;
    bool same = k->smem == kp->smem_bytes && k->smem_static == kp->smem_static_bytes;
    for (int j = 0; j < 3; j++)   /* rebinding: the grid is this size's (mcir_codegen_rebind) */
        same = same && (cg_rebinding || k->grid[j] == kp->grid[j]) && k->block[j] == kp->block[j];
    if (same) return true;
    cg_error(d, kp,
             "internal error: the template launches grid [%lld, %lld, %lld] x block [%d, %d, %d] with "
             "%lld + %lld B of shared memory, the plan says grid [%lld, %lld, %lld] x block "
             "[%d, %d, %d] with %lld + %lld B",
             (long long)k->grid[0], (long long)k->grid[1], (long long)k->grid[2], k->block[0],
             k->block[1], k->block[2], (long long)k->smem, (long long)k->smem_static,
             (long long)kp->grid[0], (long long)kp->grid[1], (long long)kp->grid[2], kp->block[0],
             kp->block[1], kp->block[2], (long long)kp->smem_bytes, (long long)kp->smem_static_bytes);
    return false;
}

/* ------------------------------------------------ size-generic kernels */

/* Kernel i of cg generated again at the graph's current binding into t
 * (t->source NULL where the kernel has none); the template's messages go
 * to d. */
static bool regenerate(const mcir_codegen *cg, int i, cg_kernel *t, mcir_diag *d) {
    memset(t, 0, sizeof *t);
    t->kp = cg->k[i].kp;
    const cg_template_desc *td = cg_template_find(t->kp->tpl);
    if (!td || !td->generate || !cg->k[i].source) return true;
    const mcir_target *target = cg->plan->target ? cg->plan->target : mcir_target_find(MCIR_DEFAULT_ARCH);
    cg_rebinding = true;
    bool ok = generate(cg, td, t, target, d) && launch_matches(t, d);
    cg_rebinding = false;
    return ok;
}

static void regenerated_free(cg_kernel *t) {
    free(t->source);
    free(t->epi_source);
    t->source = t->epi_source = NULL;
}

/* The first line where a and b differ, quoted from b, into buf. */
static void first_difference(const char *a, const char *b, char *buf, size_t n) {
    int line = 1;
    const char *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') {
            line++;
            lb = b + 1;
        }
        a++;
        b++;
    }
    size_t len = strcspn(lb, "\n");
    if (len > 120) len = 120;
    snprintf(buf, n, "line %d reads '%.*s'", line, (int)len, lb);
}

/* Takes what a kernel's launch needs at this binding from t (its grid,
 * the library call's sizes, the tensor maps, the split-KV merge). */
static void take_launch(cg_kernel *k, const cg_kernel *t) {
    memcpy(k->grid, t->grid, sizeof k->grid);
    k->gemm = t->gemm;
    k->epi_grid = t->epi_grid;
    k->merge_grid = t->merge_grid;
    k->merge_block = t->merge_block;
    k->n_tmaps = t->n_tmaps;
    memcpy(k->tmaps, t->tmaps, sizeof k->tmaps);
}

/* Whether kernel k's code at this binding (t) is the code generated at
 * the largest sizes; else why not, into k->generic_why. errors: what the
 * template reported at this binding. */
static bool same_code(cg_kernel *k, const cg_kernel *t, const char *binding, const char *errors) {
    char diff[200];
    if (!t->source) {
        size_t len = errors ? strcspn(errors, "\n") : 0;
        snprintf(k->generic_why, sizeof k->generic_why, "at %s its template fails%s%.*s", binding,
                 len ? ": " : "", (int)(len > 200 ? 200 : len), errors ? errors : "");
        return false;
    }
    if (strcmp(t->source, k->source)) {
        first_difference(k->source, t->source, diff, sizeof diff);
        snprintf(k->generic_why, sizeof k->generic_why,
                 "its code at %s differs from the code at the largest sizes (%s)", binding, diff);
        return false;
    }
    if ((t->epi_source || k->epi_source) &&
        (!t->epi_source || !k->epi_source || strcmp(t->epi_source, k->epi_source))) {
        snprintf(k->generic_why, sizeof k->generic_why, "its cuBLAS epilogue's code at %s differs", binding);
        return false;
    }
    if (t->block[0] != k->block[0] || t->smem != k->smem) {
        snprintf(k->generic_why, sizeof k->generic_why, "its block or shared memory at %s differs", binding);
        return false;
    }
    return true;
}

/* Generates every kernel again at other bindings of the dims — each at
 * its min, each at an odd size between, each at one below its max — and
 * marks a kernel size-generic where its code is the same at all of them
 * (the templates write every extent that depends on a dimension as an
 * expression of the launch's dims). The graph is left at the binding it
 * had; false only when that binding cannot be restored. */
static bool check_generic(mcir_codegen *cg, mcir_diag *d) {
    mcir_graph *g = (mcir_graph *)cg->plan->graph;
    int64_t keep[MCIR_MAX_DIMS], probe[3][MCIR_MAX_DIMS];
    for (int k = 0; k < g->n_dims; k++) {
        const mcir_dim *dim = &g->dims[k];
        keep[k] = dim->value;
        probe[0][k] = dim->min;
        probe[1][k] = dim->min + (dim->max - dim->min) / 2;
        if (probe[1][k] % 2 == 0 && probe[1][k] + 1 < dim->max) probe[1][k]++;   /* odd: no lucky divisor */
        probe[2][k] = dim->max > dim->min ? dim->max - 1 : dim->max;
    }
    for (int i = 0; i < cg->n; i++) cg->k[i].generic = true;
    for (int p = 0; p < 3; p++) {
        char *errors = NULL;
        size_t errors_len = 0;
        FILE *mem = open_memstream(&errors, &errors_len);
        MCIR_ASSERT(mem != NULL);
        mcir_diag quiet = {.out = mem};
        char binding[160];
        bool bound = mcir_graph_bind_dims(g, probe[p], &quiet);
        mcir_dims_binding_str(g, binding, sizeof binding);
        for (int i = 0; i < cg->n; i++) {
            cg_kernel *k = &cg->k[i], t;
            if (!k->source || !k->generic) continue;
            if (!bound) {   /* the graph's rules hold for every size in range: not reached */
                k->generic = false;
                snprintf(k->generic_why, sizeof k->generic_why, "the graph does not bind at %s", binding);
                continue;
            }
            fflush(mem);
            size_t mark = errors_len;
            regenerate(cg, i, &t, &quiet);
            fflush(mem);
            k->generic = same_code(k, &t, binding, errors ? errors + mark : NULL);
            regenerated_free(&t);
        }
        fclose(mem);
        free(errors);
    }
    for (int i = 0; i < cg->n; i++) {   /* plan.json says which */
        cg_kernel *k = &cg->k[i];
        if (!k->source) continue;
        k->kp->size_generic = k->generic ? 1 : -1;
        k->kp->not_size_generic = k->generic ? NULL : mcir_arena_strdup(cg->plan->arena, k->generic_why);
    }
    return mcir_graph_bind_dims(g, keep, d);
}

bool mcir_codegen_rebind(mcir_codegen *cg, const int64_t *values, mcir_diag *d) {
    mcir_graph *g = (mcir_graph *)cg->plan->graph;
    if (!g || !g->n_dims) return true;
    for (int i = 0; i < cg->n; i++)
        if (cg->k[i].source && dynamic_graph(cg) && !cg->k[i].generic) {
            cg_error(d, cg->k[i].kp, "is not size-generic: %s", cg->k[i].generic_why);
            return false;
        }
    if (!mcir_graph_bind_dims(g, values, d)) return false;
    char binding[160];
    mcir_dims_binding_str(g, binding, sizeof binding);
    for (int i = 0; i < cg->n; i++) {
        cg_kernel *k = &cg->k[i], t;
        if (!k->source) continue;
        bool ok = regenerate(cg, i, &t, d) && same_code(k, &t, binding, NULL);
        if (!ok && t.source) cg_error(d, k->kp, "is not size-generic: %s", k->generic_why);
        if (ok) take_launch(k, &t);
        regenerated_free(&t);
        if (!ok) return false;
    }
    return true;
}

bool mcir_codegen_kernel_generic(const mcir_codegen *cg, int i, const char **why) {
    bool generic = !cg->k[i].source || !dynamic_graph(cg) || cg->k[i].generic;
    if (why) *why = generic ? NULL : cg->k[i].generic_why;
    return generic;
}

mcir_codegen *mcir_codegen_new(mcir_plan *p, const mcir_memplan *m, mcir_diag *d) {
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
        k->kp->launch_min_blocks = 0;
        memset(&k->kp->audit, 0, sizeof k->kp->audit);
        memset(&k->kp->epilogue_audit, 0, sizeof k->kp->epilogue_audit);
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
        if (!generate(cg, t, k, target, d)) {
            ok = false;
            continue;
        }
        /* The plan decided the launch (kernelplan/launch.c, launch_gemm.c);
         * the template realised it. A difference is a bug in one of them. */
        if (!launch_matches(k, d)) {
            ok = false;
            continue;
        }
        k->unit = cg_compile_unit(k->source, k->kp->name, t->name, k->entry);
        if (k->epi_source) k->epi_unit = cg_compile_unit(k->epi_source, k->epi_name, "epilogue", k->epi_entry);
    }
    if (!ok) {
        mcir_codegen_free(cg);
        return NULL;
    }
    share_units(cg);
    cg->n_dims = dynamic_graph(cg) ? p->graph->n_dims : 0;
    if (dynamic_graph(cg) && !check_generic(cg, d)) {
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
        free(cg->k[i].unit);
        free(cg->k[i].epi_unit);
        mcir_compiled_free(&cg->k[i].bin);
        mcir_compiled_free(&cg->k[i].epi_bin);
        mcir_compiled_free(&cg->k[i].emu_bin);
        mcir_compiled_free(&cg->k[i].epi_emu_bin);
    }
    free(cg->k);
    free(cg);
}

int mcir_codegen_kernel_count(const mcir_codegen *cg) { return cg->n; }
const char *mcir_codegen_kernel_source(const mcir_codegen *cg, int i) { return cg->k[i].source; }
const char *mcir_codegen_kernel_ptx(const mcir_codegen *cg, int i) {
    return cg->k[i].compiled ? cg_kernel_bin(cg, i)->ptx : NULL;
}
const char *mcir_codegen_kernel_entry(const mcir_codegen *cg, int i) {
    return cg->k[i].unit ? cg->k[i].entry : NULL;
}
void mcir_codegen_compile_stats(const mcir_codegen *cg, mcir_compile_stats *out) { *out = cg->stats; }
void mcir_codegen_emu_compile_stats(const mcir_codegen *cg, mcir_compile_stats *out) { *out = cg->emu_stats; }
int64_t mcir_codegen_kernel_smem(const mcir_codegen *cg, int i) { return cg->k[i].smem; }

const char *mcir_codegen_kernel_epilogue(const mcir_codegen *cg, int i, const char **name,
                                         int64_t *grid) {
    if (name) *name = cg->k[i].epi_name;
    if (grid) *grid = cg->k[i].epi_grid;
    return cg->k[i].epi_source;
}

const char *mcir_codegen_kernel_epilogue_entry(const mcir_codegen *cg, int i) {
    return cg->k[i].epi_source ? cg->k[i].epi_entry : NULL;
}

void mcir_codegen_kernel_launch(const mcir_codegen *cg, int i, int64_t grid[3], int block[3],
                                int64_t *smem) {
    for (int j = 0; j < 3; j++) {
        grid[j] = cg->k[i].grid[j];
        block[j] = cg->k[i].block[j];
    }
    *smem = cg->k[i].smem;
}

int mcir_codegen_kernel_tensor_maps(const mcir_codegen *cg, int i, mcir_tensor_map_desc *out, int max) {
    for (int j = 0; j < cg->k[i].n_tmaps && j < max; j++) out[j] = cg->k[i].tmaps[j];
    return cg->k[i].n_tmaps;
}

bool mcir_codegen_kernel_merge(const mcir_codegen *cg, int i, int64_t *grid, int *block) {
    if (grid) *grid = cg->k[i].merge_grid;
    if (block) *block = cg->k[i].merge_block;
    return cg->k[i].merge_grid > 0;
}

/* ------------------------------------------------- the emulated device */

/* Kernel parameter p of a launcher: "(const float* const*)p[i]" etc. */
static void launcher_param(cg_sb *b, int i, const char *ctype, bool write) {
    cg_sb_printf(b, "%s*(%s%s* const*)p[%d]", i ? ", " : "", write ? "" : "const ", ctype, i);
}

/* One launcher: extern "C" void ENTRY__emu(void **p) calls the entry with
 * cuLaunchKernel's parameters (pointers to each argument's value), and
 * ENTRY__emu_params says what they are: r / w a pointer read / written,
 * m a tensor map, each with its element bytes (emu/device.c). extra:
 * after the reads and writes, 'w' the split-KV scratch, 'r' a read f32
 * buffer (the merge's partials, an epilogue's staged product); sched: a
 * dynamic scheduler's u32 counters after that; maps: tensor maps after
 * those. */
static void emit_launcher(cg_sb *b, const mcir_kernel_plan *kp, const char *entry, int n_dims, char extra,
                          bool sched, int maps) {
    int np = kp->n_reads + kp->n_writes, i = 0;
    cg_sb_printf(b, "extern \"C\" void %s__emu(void **p) {\n    (void)p;\n    %s(", entry, entry);
    for (int j = 0; j < kp->n_reads; j++, i++) launcher_param(b, i, cg_ctype(kp->reads[j]->dtype), false);
    for (int j = 0; j < kp->n_writes; j++, i++) launcher_param(b, i, cg_ctype(kp->writes[j]->dtype), true);
    if (np == 0) cg_sb_puts(b, "0");
    for (int j = 0; j < n_dims; j++) cg_sb_printf(b, ", *(const long long*)p[%d]", i++);
    if (extra) launcher_param(b, i++, "float", extra == 'w');
    if (sched) launcher_param(b, i++, "u32", true);
    for (int m = 0; m < maps; m++) cg_sb_printf(b, ", *(const CUtensorMap*)p[%d]", i++);
    cg_sb_printf(b, ");\n}\nextern \"C\" const char %s__emu_params[] = \"", entry);
    for (int j = 0; j < kp->n_reads; j++) cg_sb_printf(b, "r%d", (int)mcir_dtype_size(kp->reads[j]->dtype) % 10);
    for (int j = 0; j < kp->n_writes; j++) cg_sb_printf(b, "w%d", (int)mcir_dtype_size(kp->writes[j]->dtype) % 10);
    for (int j = 0; j < n_dims; j++) cg_sb_puts(b, "d8");
    if (extra) cg_sb_printf(b, "%c4", extra);
    if (sched) cg_sb_puts(b, "w4");
    for (int m = 0; m < maps; m++) cg_sb_puts(b, "m0");
    cg_sb_puts(b, "\";\n");
}

/* The unit kernel k (or its cuBLAS epilogue) compiles for the emulated
 * device: the unit and, under MC_EMULATE, the launchers of its entries. */
static char *emu_unit(const cg_kernel *k, int n_dims, bool epi) {
    cg_sb b = {0};
    cg_sb_puts(&b, epi ? k->epi_unit : k->unit);
    cg_sb_puts(&b, "\n#ifdef MC_EMULATE\n");
    if (epi) {
        emit_launcher(&b, k->kp, k->epi_entry, n_dims, 'r', false, 0);
    } else {
        emit_launcher(&b, k->kp, k->entry, n_dims, k->merge_grid > 0 ? 'w' : 0, k->sched, k->n_tmaps);
        if (k->cluster > 1)   /* the emulated device runs the blocks of a cluster together */
            cg_sb_printf(&b, "extern \"C\" const unsigned %s__emu_cluster = %d;\n", k->entry, k->cluster);
        if (k->merge_grid > 0) {
            char merge[96];
            snprintf(merge, sizeof merge, "%s_merge", k->entry);
            emit_launcher(&b, k->kp, merge, n_dims, 'r', false, 0);
        }
    }
    cg_sb_puts(&b, "#endif\n");
    return cg_sb_take(&b);
}

/* One compile unit missing from the cache, compiled by a worker. */
typedef struct unit_job {
    const char *name, *unit;   /* name: the owning kernel's, for NVRTC's log */
    const char *arch;          /* sm_90a for the kernels that need wgmma / TMA */
    mcir_compiled *out;
    char key[33];
    bool ok;
    char why[1024];
    char *log;
    char *emu_source;          /* the emulated device: the unit with its launchers */
    bool sass;                 /* the SASS audit: disassemble out's cubin */
} unit_job;

typedef struct unit_pool {
    unit_job *jobs;
    int n;
    const char *arch;
    pthread_mutex_t mu;
    int next;
    mcir_progress *progress;   /* on a terminal: units done of n */
} unit_pool;

static void *unit_worker(void *arg) {
    unit_pool *pool = arg;
    for (;;) {
        pthread_mutex_lock(&pool->mu);
        int i = pool->next++;
        pthread_mutex_unlock(&pool->mu);
        if (i >= pool->n) return NULL;
        unit_job *j = &pool->jobs[i];
        if (j->sass) {
            j->ok = cg_sass_disassemble(j->out, j->why, sizeof j->why);
            mcir_progress_add(pool->progress, 1);
            continue;
        }
        if (j->emu_source) {
            memset(j->out, 0, sizeof *j->out);
            j->ok = mcir_emu_compile_unit(j->name, j->emu_source, &j->out->cubin, &j->out->cubin_size, j->why,
                                          sizeof j->why);
            if (j->ok) {
                j->out->ptx = calloc(1, 1);   /* no PTX: the module is a host shared object */
                MCIR_ASSERT(j->out->ptx != NULL);
                j->out->registers = -1;
            }
        } else {
            j->ok = cg_nvrtc_compile(j->name, j->unit, j->arch, j->out, &j->log, j->why, sizeof j->why);
        }
        if (j->ok) cg_cache_store(j->key, j->out);
        mcir_progress_add(pool->progress, 1);
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* NVRTC worker threads: the machine's cores, at most 16 and at most one per
 * unit; MCIR_NVRTC_THREADS overrides. */
static int worker_count(int jobs) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    const char *e = getenv("MCIR_NVRTC_THREADS");
    if (e && atoi(e) > 0) n = atoi(e);
    if (n > 16) n = 16;
    if (n > jobs) n = jobs;
    return n < 1 ? 1 : (int)n;
}

/* Kernel i (a unit owner) spilled with the thread count as its only launch
 * bound: generated again with the plan's occupancy as the minimum blocks
 * per SM, compiled, and kept where ptxas no longer spills (the kernels
 * sharing its unit follow); otherwise the first version stays. ptxas,
 * told only the thread count, picks its own register limit: 128 for the
 * 256-thread f16 attention tile of examples/attention_f16 on sm_80, 8
 * bytes spilled; told 2 blocks per SM it fits the same 128 without. */
static void recompile_for_occupancy(mcir_codegen *cg, int i, const char *arch, const char *version,
                                    mcir_diag *d) {
    cg_kernel *k = &cg->k[i];
    const cg_template_desc *t = cg_template_find(k->kp->tpl);
    const mcir_target *target = cg->plan->target ? cg->plan->target : mcir_target_find(MCIR_DEFAULT_ARCH);
    cg_kernel keep = *k;
    k->kp->launch_min_blocks = k->kp->tiling.blocks_per_sm;
    k->source = NULL;
    bool ok = generate(cg, t, k, target, d);
    if (ok) {
        k->unit = cg_compile_unit(k->source, k->kp->name, t->name, k->entry);
        memset(&k->bin, 0, sizeof k->bin);
        char key[33], why[512];
        char *log = NULL;
        cg_hash_key(key, k->unit, arch, version);
        if (!cg_cache_load(key, &k->bin)) {
            cg->stats.nvrtc_compiles++;
            ok = cg_nvrtc_compile(k->kp->name, k->unit, arch, &k->bin, &log, why, sizeof why);
            if (ok) {
                cg_cache_store(key, &k->bin);
                k->bin.log = log;
            } else {
                free(log);
            }
        }
        ok = ok && k->bin.ptx && k->bin.spill_bytes == 0;
    }
    if (!ok) {   /* the first version stays */
        if (k->source != keep.source) free(k->source);
        if (k->unit != keep.unit) free(k->unit);
        if (k->bin.ptx != keep.bin.ptx) mcir_compiled_free(&k->bin);
        *k = keep;
        k->kp->launch_min_blocks = 0;
        return;
    }
    free(keep.source);
    free(keep.unit);
    mcir_compiled_free(&keep.bin);
    for (int j = 0; j < cg->n; j++) {   /* the kernels sharing the unit: the same change */
        cg_kernel *s = &cg->k[j];
        if (s->owner != i) continue;
        s->kp->launch_min_blocks = k->kp->launch_min_blocks;
        free(s->source);
        free(s->unit);
        s->source = NULL;
        bool same = generate(cg, t, s, target, d);
        s->unit = same ? cg_compile_unit(s->source, s->kp->name, t->name, s->entry) : NULL;
        MCIR_ASSERT(same && strcmp(s->unit, k->unit) == 0);
    }
}

/* Runs the jobs on worker threads (the compile units missing from the
 * cache), a progress line on a terminal. */
static void run_jobs(unit_job *jobs, int n_jobs, int threads, const char *stage) {
    unit_pool pool = {.jobs = jobs, .n = n_jobs, .mu = PTHREAD_MUTEX_INITIALIZER};
    if (n_jobs > 0) pool.progress = mcir_progress_begin(stage, "compile units", n_jobs);
    pthread_t th[16];
    int started = 0;
    for (int t = 1; t < threads; t++)
        if (pthread_create(&th[started], NULL, unit_worker, &pool) == 0) started++;
    unit_worker(&pool);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    mcir_progress_end(pool.progress);
    pthread_mutex_destroy(&pool.mu);
}

/* The emulated device's modules (emu/compile.c): every unit with its
 * launchers built by the host C++ compiler into emu_bin / epi_emu_bin,
 * through the kernel cache (key: the unit with its launchers, "emu" and
 * the emulator build); the NVRTC binaries and the audit are untouched. */
static bool compile_emu(mcir_codegen *cg, mcir_diag *d) {
    char why[256];
    if (!mcir_emu_available(why, sizeof why)) {
        mcir_error(d, (mcir_loc){0}, "cannot build the kernels for the emulated device: %s", why);
        return false;
    }
    double t0 = now_s();
    memset(&cg->emu_stats, 0, sizeof cg->emu_stats);
    unit_job *jobs = calloc((size_t)(2 * cg->n + 1), sizeof *jobs);
    MCIR_ASSERT(jobs != NULL);
    int n_jobs = 0;
    const char *version = mcir_emu_version();
    for (int i = 0; i < cg->n; i++) {
        cg_kernel *k = &cg->k[i];
        mcir_compiled_free(&k->emu_bin);
        mcir_compiled_free(&k->epi_emu_bin);
        for (int e = 0; e < 2; e++) {
            const char *unit = e ? k->epi_unit : k->unit;
            if (!unit) continue;
            cg->emu_stats.kernels++;
            if ((e ? k->epi_owner : k->owner) >= 0) continue;
            cg->emu_stats.units++;
            unit_job *j = &jobs[n_jobs];
            j->name = e ? k->epi_name : k->kp->name;
            j->unit = unit;
            j->out = e ? &k->epi_emu_bin : &k->emu_bin;
            j->arch = "emu";
            j->emu_source = emu_unit(k, cg->n_dims, e);
            cg_hash_key(j->key, j->emu_source, j->arch, version);
            if (cg_cache_load(j->key, j->out)) {
                cg->emu_stats.cache_hits++;
                free(j->emu_source);
                j->emu_source = NULL;
            } else {
                n_jobs++;
            }
        }
    }
    cg->emu_stats.nvrtc_compiles = n_jobs;
    cg->emu_stats.threads = n_jobs ? worker_count(n_jobs) : 0;
    run_jobs(jobs, n_jobs, cg->emu_stats.threads, "emu");
    bool ok = true;
    for (int i = 0; i < n_jobs; i++) {
        if (!jobs[i].ok) {
            mcir_error(d, (mcir_loc){.path = jobs[i].name}, "%s", jobs[i].why);
            ok = false;
        }
        free(jobs[i].emu_source);
    }
    free(jobs);
    cg->emu_ready = ok;
    cg->emu_stats.seconds = now_s() - t0;
    return ok;
}

bool mcir_codegen_compile(mcir_codegen *cg, const char *arch, mcir_diag *d) {
    char why[256];
    if (arch && strcmp(arch, "emu") == 0) return compile_emu(cg, d);
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
    const mcir_target *target = mcir_target_find(arch);
    double t0 = now_s();
    memset(&cg->stats, 0, sizeof cg->stats);

    /* the units this plan owns: from the cache, or a job */
    unit_job *jobs = calloc((size_t)(2 * cg->n + 1), sizeof *jobs);
    MCIR_ASSERT(jobs != NULL);
    int n_jobs = 0;
    const char *version = mcir_nvrtc_version();
    for (int i = 0; i < cg->n; i++) {
        cg_kernel *k = &cg->k[i];
        mcir_compiled_free(&k->bin);
        mcir_compiled_free(&k->epi_bin);
        k->compiled = k->epi_compiled = false;
        memset(&k->kp->audit, 0, sizeof k->kp->audit);
        memset(&k->kp->epilogue_audit, 0, sizeof k->kp->epilogue_audit);
        for (int e = 0; e < 2; e++) {
            const char *unit = e ? k->epi_unit : k->unit;
            if (!unit) continue;
            cg->stats.kernels++;
            if ((e ? k->epi_owner : k->owner) >= 0) continue;
            cg->stats.units++;
            unit_job *j = &jobs[n_jobs];
            j->name = e ? k->epi_name : k->kp->name;
            j->unit = unit;
            j->out = e ? &k->epi_bin : &k->bin;
            j->arch = !e && k->sm90a && strcmp(arch, "sm_90") == 0 ? "sm_90a" : arch;
            cg_hash_key(j->key, unit, j->arch, version);
            if (cg_cache_load(j->key, j->out)) cg->stats.cache_hits++;
            else n_jobs++;
        }
    }
    cg->stats.nvrtc_compiles = n_jobs;
    cg->stats.threads = n_jobs ? worker_count(n_jobs) : 0;
    run_jobs(jobs, n_jobs, cg->stats.threads, "nvrtc");

    bool ok = true;
    for (int i = 0; i < n_jobs; i++) {
        unit_job *j = &jobs[i];
        if (!j->ok) {
            cg_nvrtc_report(d, j->name, j->unit, j->why, j->log);
            free(j->log);
            ok = false;
        } else {
            j->out->log = j->log;
        }
    }
    free(jobs);

    /* spills without a minimum-blocks bound: once more with the plan's
     * occupancy (not the GEMMs, which set their own budget, nor sm_90a) */
    for (int i = 0; ok && i < cg->n; i++) {
        cg_kernel *k = &cg->k[i];
        if (k->unit && k->owner < 0 && k->bin.ptx && k->bin.spill_bytes > 0 && !k->sm90a &&
            k->kp->launch_min_blocks == 0 && k->kp->tiling.blocks_per_sm > 0 &&
            k->kp->tpl != MCIR_TEMPLATE_MATMUL && k->kp->tpl != MCIR_TEMPLATE_CONV2D)
            recompile_for_occupancy(cg, i, arch, version, d);
    }

    /* every kernel whose unit compiled: plan fields and the audit */
    for (int i = 0; i < cg->n; i++) {
        cg_kernel *k = &cg->k[i];
        if (k->unit) {
            const mcir_compiled *bin = cg_kernel_bin(cg, i);
            if (bin->ptx) {
                k->compiled = true;
                k->kp->registers = bin->registers;
                k->kp->spill_bytes = bin->spill_bytes;
                cg_audit_fill(&k->kp->audit, bin, k->entry, k->block[0] * k->block[1] * k->block[2],
                              k->smem, target);
            }
        }
        if (k->epi_unit) {
            const mcir_compiled *bin = cg_kernel_epi_bin(cg, i);
            if (bin->ptx) {
                k->epi_compiled = true;
                cg_audit_fill(&k->kp->epilogue_audit, bin, k->epi_entry, 256, 0, target);
            }
        }
    }
    for (int i = 0; i < cg->n; i++) {   /* shared_by: kernels per unit */
        cg_kernel *k = &cg->k[i];
        if (k->compiled && k->owner >= 0) cg->k[k->owner].kp->audit.shared_by++;
        if (k->epi_compiled && k->epi_owner >= 0) cg->k[k->epi_owner].kp->epilogue_audit.shared_by++;
    }
    for (int i = 0; i < cg->n; i++) {
        cg_kernel *k = &cg->k[i];
        if (k->compiled && k->owner >= 0) k->kp->audit.shared_by = cg->k[k->owner].kp->audit.shared_by;
        if (k->epi_compiled && k->epi_owner >= 0)
            k->kp->epilogue_audit.shared_by = cg->k[k->epi_owner].kp->epilogue_audit.shared_by;
    }
    cg->stats.seconds = now_s() - t0;
    return ok;
}

void mcir_codegen_audit_sass(mcir_codegen *cg) {
    const mcir_target *target = mcir_target_find(cg->arch);
    unit_job *jobs = calloc((size_t)(2 * cg->n + 1), sizeof *jobs);
    MCIR_ASSERT(jobs != NULL);
    int n_jobs = 0;
    for (int i = 0; i < cg->n; i++) {   /* each owner's cubin once */
        cg_kernel *k = &cg->k[i];
        for (int e = 0; e < 2; e++) {
            bool compiled = e ? k->epi_compiled && k->epi_owner < 0 : k->compiled && k->owner < 0;
            if (!compiled) continue;
            unit_job *j = &jobs[n_jobs++];
            j->sass = true;
            j->name = e ? k->epi_name : k->kp->name;
            j->out = e ? &k->epi_bin : &k->bin;
        }
    }
    char why[200] = "";
    if (n_jobs && mcir_nvdisasm_path(why, sizeof why)) run_jobs(jobs, n_jobs, worker_count(n_jobs), "nvdisasm");
    for (int i = 0; i < cg->n; i++) {
        cg_kernel *k = &cg->k[i];
        for (int e = 0; e < 2; e++) {
            if (!(e ? k->epi_compiled : k->compiled)) continue;
            const mcir_compiled *bin = e ? cg_kernel_epi_bin(cg, i) : cg_kernel_bin(cg, i);
            const char *w = why;
            for (int q = 0; q < n_jobs; q++)
                if (jobs[q].out == bin && jobs[q].why[0]) w = jobs[q].why;
            cg_audit_sass(e ? &k->kp->epilogue_audit : &k->kp->audit, bin->sass, w, e ? NULL : k->kp, target);
        }
    }
    free(jobs);
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
        fprintf(out, "// kernel %s (entry %s)\n", k->kp->name, k->entry);
        fputs(cg_kernel_bin(cg, i)->ptx, out);
        fputs("\n", out);
        if (k->epi_source && k->epi_compiled) {
            fprintf(out, "// kernel %s (entry %s)\n", k->epi_name, k->epi_entry);
            fputs(cg_kernel_epi_bin(cg, i)->ptx, out);
            fputs("\n", out);
        }
    }
    return !ferror(out);
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
        if (!mcir_outfile_write(path, k->source, strlen(k->source), d)) return false;
        if (k->epi_source) {
            snprintf(path, sizeof path, "%s/kernels/%s.cu", dir, k->epi_name);
            if (!mcir_outfile_write(path, k->epi_source, strlen(k->epi_source), d)) return false;
        }
        if (k->compiled) {
            const mcir_compiled *bin = cg_kernel_bin(cg, i);
            snprintf(path, sizeof path, "%s/kernels/%s.ptx", dir, k->kp->name);
            if (!mcir_outfile_write(path, bin->ptx, bin->ptx_size, d)) return false;
        }
        if (k->epi_compiled) {
            const mcir_compiled *bin = cg_kernel_epi_bin(cg, i);
            snprintf(path, sizeof path, "%s/kernels/%s.ptx", dir, k->epi_name);
            if (!mcir_outfile_write(path, bin->ptx, bin->ptx_size, d)) return false;
        }
    }
    return true;
}
