/* codegen_util.c — see codegen_util.h. */
#include "codegen_util.h"

#include "kernelplan/plan-impl.h"
#include "runtime/runtime.h"
#include "emu/emu.h"
#include <math.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

mcir_graph *cgt_graph(const char *json) {
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g = mcir_graph_read_json_string(json, "<test>", &d);
    MCIR_ASSERT(g != NULL);
    return g;
}

static bool in_region(mcir_node **nodes, int n, const mcir_node *x) {
    for (int i = 0; i < n; i++)
        if (nodes[i] == x) return true;
    return false;
}

static void add_unique(mcir_arena *a, mcir_tensor ***arr, int *n, int *cap, mcir_tensor *t) {
    for (int i = 0; i < *n; i++)
        if ((*arr)[i] == t) return;
    *arr = mcir_arena_grow(a, *arr, cap, *n + 1, sizeof **arr);
    (*arr)[(*n)++] = t;
}

static void fill_kernel(mcir_graph *g, mcir_kernel_plan *k, int id, mcir_template tpl,
                        mcir_node *anchor, mcir_node **nodes, int n) {
    mcir_arena *a = g->arena;
    k->id = id;
    k->tpl = tpl;
    k->anchor = anchor;
    k->n_nodes = n;
    k->nodes = mcir_arena_memdup(a, nodes, sizeof *nodes * (size_t)n);
    char name[256];
    snprintf(name, sizeof name, "%s_%s", g->name ? g->name : "g",
             anchor ? anchor->name : nodes[0]->name);
    for (char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            *p = '_';
    k->name = mcir_arena_strdup(a, name);
    int cr = 0, cw = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < nodes[i]->n_inputs; j++) {
            mcir_tensor *t = nodes[i]->inputs[j];
            if (!t->producer || !in_region(nodes, n, t->producer))
                add_unique(a, &k->reads, &k->n_reads, &cr, t);
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < nodes[i]->n_outputs; j++) {
            mcir_tensor *t = nodes[i]->outputs[j];
            bool outside = t->is_output;
            for (int q = 0; q < g->n_nodes && !outside; q++) {
                mcir_node *c = g->nodes[q];
                if (c->dead || in_region(nodes, n, c)) continue;
                for (int r = 0; r < c->n_inputs; r++)
                    if (c->inputs[r] == t) outside = true;
            }
            if (outside) add_unique(a, &k->writes, &k->n_writes, &cw, t);
        }
    /* nothing folded: every access is the tensor itself, C order */
    k->read_access = mcir_arena_alloc(a, sizeof *k->read_access * (size_t)(k->n_reads + 1));
    k->write_access = mcir_arena_alloc(a, sizeof *k->write_access * (size_t)(k->n_writes + 1));
    for (int i = 0; i < k->n_reads + k->n_writes; i++) {
        mcir_kernel_access *x = i < k->n_reads ? &k->read_access[i] : &k->write_access[i - k->n_reads];
        mcir_tensor *t = i < k->n_reads ? k->reads[i] : k->writes[i - k->n_reads];
        memset(x, 0, sizeof *x);
        x->tensor = x->logical = t;
        x->rank = t->rank;
        int64_t stride = 1;
        for (int r = t->rank - 1; r >= 0; r--) {
            x->perm[r] = r;
            x->strides[r] = stride;
            stride *= t->shape[r];
        }
    }
    k->tiling.n_dims = 0;
    k->recompute_policy = "recompute_in_consumer";
    k->registers = k->spill_bytes = -1;
}

static mcir_plan *plan_new(mcir_graph *g, const char *arch, int n) {
    mcir_plan *p = mcir_arena_alloc(g->arena, sizeof *p);
    p->graph = g;
    p->target = mcir_target_find(arch ? arch : "sm_90");
    p->n_kernels = n;
    p->kernels = mcir_arena_alloc(g->arena, sizeof *p->kernels * (size_t)(n ? n : 1));
    p->alias_root = mcir_arena_alloc(g->arena, sizeof *p->alias_root * (size_t)g->n_tensors);
    for (int i = 0; i < g->n_tensors; i++) p->alias_root[i] = g->tensors[i];
    p->arena = g->arena;
    return p;
}

/* Plain accesses (nothing folded: identity permutation, C-order strides). */
static mcir_kernel_access *plain_accesses(mcir_arena *a, mcir_tensor **ts, int n) {
    mcir_kernel_access *x = mcir_arena_alloc(a, sizeof *x * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        memset(&x[i], 0, sizeof x[i]);
        x[i].tensor = x[i].logical = ts[i];
        x[i].rank = ts[i]->rank;
        int64_t st = 1;
        for (int r = ts[i]->rank - 1; r >= 0; r--) {
            x[i].perm[r] = r;
            x[i].strides[r] = st;
            st *= ts[i]->shape[r];
        }
    }
    return x;
}

/* GEMM-shaped kernels get the launch model's tile and launch, as
 * mcir_plan_build gives them (their templates realise the plan's); the
 * model reads the kernel's accesses. */
static void plan_gemm_launches(mcir_plan *p) {
    mcir_diag d = mcir_diag_stderr();
    for (int i = 0; i < p->n_kernels; i++) {
        mcir_kernel_plan *k = &p->kernels[i];
        if (k->tpl == MCIR_TEMPLATE_MATMUL || k->tpl == MCIR_TEMPLATE_CONV2D) {
            if (!k->read_access) k->read_access = plain_accesses(p->arena, k->reads, k->n_reads);
            if (!k->write_access) k->write_access = plain_accesses(p->arena, k->writes, k->n_writes);
            bool ok = mcir_launch_gemm(p, k, &d);
            MCIR_ASSERT(ok);
        }
    }
}

/* The other generated templates get the launch model's tile and launch
 * (kernelplan/launch.c), as mcir_plan_build gives them: codegen realises
 * the plan's launch and checks it. */
static void plan_launches(mcir_plan *p) {
    mcir_diag d = mcir_diag_stderr();
    for (int i = 0; i < p->n_kernels; i++) {
        mcir_kernel_plan *k = &p->kernels[i];
        if (k->tpl != MCIR_TEMPLATE_MATMUL && k->tpl != MCIR_TEMPLATE_CONV2D &&
            k->tpl != MCIR_TEMPLATE_ALIAS) {
            bool ok = mcir_plan_choose_tiling(p, k, &d);
            MCIR_ASSERT(ok);
        }
    }
}

static void resolve_aliases(mcir_plan *p) {
    /* reshape outputs share their input's bytes */
    for (int i = 0; i < p->n_kernels; i++) {
        mcir_kernel_plan *k = &p->kernels[i];
        if (k->tpl != MCIR_TEMPLATE_ALIAS) continue;
        mcir_node *n = k->nodes[0];
        mcir_tensor *root = p->alias_root[n->inputs[0]->id];
        p->alias_root[n->outputs[0]->id] = root;
    }
}

/* Each root tensor's first and last kernel, as the kernel planner's
 * liveness gives them (the runtime allocates what a kernel touches). */
static void liveness(mcir_plan *p) {
    const mcir_graph *g = p->graph;
    p->first_use = mcir_arena_alloc(p->arena, sizeof *p->first_use * (size_t)g->n_tensors);
    p->last_use = mcir_arena_alloc(p->arena, sizeof *p->last_use * (size_t)g->n_tensors);
    for (int t = 0; t < g->n_tensors; t++) p->first_use[t] = p->last_use[t] = -1;
    for (int k = 0; k < p->n_kernels; k++) {
        const mcir_kernel_plan *kp = &p->kernels[k];
        for (int i = 0; i < kp->n_reads + kp->n_writes; i++) {
            const mcir_tensor *x = i < kp->n_reads ? kp->reads[i] : kp->writes[i - kp->n_reads];
            int r = p->alias_root[x->id]->id;
            if (p->first_use[r] < 0) p->first_use[r] = k;
            p->last_use[r] = k;
        }
    }
    for (int t = 0; t < g->n_tensors; t++) {
        int r = p->alias_root[t]->id;
        p->first_use[t] = p->first_use[r];
        p->last_use[t] = p->last_use[r];
    }
}

mcir_plan *cgt_plan(mcir_graph *g, const char *arch, int n, const cgt_kspec *ks) {
    mcir_plan *p = plan_new(g, arch, n);
    for (int i = 0; i < n; i++) {
        mcir_node *nodes[64];
        int nn = 0;
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", ks[i].nodes);
        for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
            mcir_node *x = mcir_graph_find_node(g, s);
            MCIR_ASSERT(x != NULL && nn < 64);
            nodes[nn++] = x;
        }
        mcir_node *anchor = ks[i].anchor ? mcir_graph_find_node(g, ks[i].anchor) : NULL;
        fill_kernel(g, &p->kernels[i], i, ks[i].tpl, anchor, nodes, nn);
    }
    resolve_aliases(p);
    liveness(p);
    plan_launches(p);
    plan_gemm_launches(p);
    return p;
}

static mcir_template template_of(mcir_op op) {
    switch (op) {
    case MCIR_OP_MATMUL: return MCIR_TEMPLATE_MATMUL;
    case MCIR_OP_ATTENTION: return MCIR_TEMPLATE_STREAMING_ATTENTION;
    case MCIR_OP_SOFTMAX: case MCIR_OP_LAYERNORM: case MCIR_OP_RMSNORM:
        return MCIR_TEMPLATE_STREAMING_NORM;
    case MCIR_OP_REDUCE_SUM: case MCIR_OP_REDUCE_MEAN: case MCIR_OP_REDUCE_MAX:
        return MCIR_TEMPLATE_REDUCE;
    case MCIR_OP_TRANSPOSE: case MCIR_OP_SLICE: case MCIR_OP_CONCAT: case MCIR_OP_SPLIT:
        return MCIR_TEMPLATE_COPY;
    case MCIR_OP_RESHAPE: return MCIR_TEMPLATE_ALIAS;
    case MCIR_OP_MAX_POOL2D: case MCIR_OP_AVG_POOL2D: case MCIR_OP_GLOBAL_AVG_POOL:
        return MCIR_TEMPLATE_POOL;
    case MCIR_OP_CONV2D: return MCIR_TEMPLATE_CONV2D;
    default: return MCIR_TEMPLATE_ELEMENTWISE;
    }
}

mcir_plan *cgt_plan_naive(mcir_graph *g, const char *arch) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += !g->nodes[i]->dead;
    mcir_plan *p = plan_new(g, arch, n);
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        mcir_node *x = g->nodes[i];
        if (x->dead) continue;
        mcir_template t = template_of(x->op);
        fill_kernel(g, &p->kernels[k], k, t, t == MCIR_TEMPLATE_ELEMENTWISE ? NULL : x, &x, 1);
        if (t == MCIR_TEMPLATE_ELEMENTWISE) p->kernels[k].anchor = x;
        k++;
    }
    resolve_aliases(p);
    liveness(p);
    plan_launches(p);
    plan_gemm_launches(p);
    return p;
}

void cgt_temp_cache(char *dir, size_t n) {
    char tmpl[] = "/tmp/mcir-cache-XXXXXX";
    char *d = mkdtemp(tmpl);
    MCIR_ASSERT(d != NULL);
    snprintf(dir, n, "%s", d);
    setenv("MCIR_CACHE_DIR", dir, 1);
}

void cgt_kernel_cache(char *dir, size_t n) {
    const char *e = getenv("MCIR_CACHE_DIR");
    if (e && *e) {
        dir[0] = 0;
        return;
    }
    cgt_temp_cache(dir, n);
}

void *cgt_emu_compile(const char *work_dir, const char *src_dir, const char *name,
                      const char *source, const char *launcher, bool *compiled) {
    char cpp[600], so[600], cmd[2400];
    if (compiled) *compiled = false;
    uint64_t h = 1469598103934665603ull;
    for (const char *c = source; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    for (const char *c = launcher; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    snprintf(cpp, sizeof cpp, "%s/%s_%016llx.cpp", work_dir, name, (unsigned long long)h);
    snprintf(so, sizeof so, "%s/%s_%016llx.so", work_dir, name, (unsigned long long)h);
    if (access(so, R_OK) == 0) {
        void *again = dlopen(so, RTLD_NOW | RTLD_LOCAL);
        if (again) return again;
    }
    FILE *f = fopen(cpp, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", cpp);
        return NULL;
    }
    fprintf(f, "#include \"cuda_emu.h\"\n%s\nextern \"C\" void emu_kernel(void **a) {\n    (void)a;\n    %s\n}\n",
            source, launcher);
    fclose(f);
    /* -fno-gnu-unique: each kernel's __shared__ statics stay in its own
     * object (its emu_smem section), not bound process-wide.
     * In the sanitizer build the kernels are instrumented too: an access
     * the emulator's checks miss (a kernel-local array) is reported */
#if defined(__SANITIZE_ADDRESS__)
    const char *san = "-fsanitize=address -fno-omit-frame-pointer";
#else
    const char *san = "";
#endif
    snprintf(cmd, sizeof cmd,
             "c++ -std=c++17 -O1 -w -Wno-psabi -shared -fPIC -fno-gnu-unique %s -I%s/emu -o %s %s",
             san, src_dir, so, cpp);
    if (system(cmd) != 0) {
        fprintf(stderr, "emulated compile failed: %s\n", cmd);
        return NULL;
    }
    if (compiled) *compiled = true;
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!lib) fprintf(stderr, "dlopen: %s\n", dlerror());
    return lib;
}

size_t cgt_arena_round(int64_t bytes) { return (size_t)((bytes + 255) / 256 * 256); }

cgt_emu_result cgt_emu_device(mcir_graph *g, mcir_plan *p, mcir_memplan *mp, unsigned max_blocks, uint64_t seed,
                              void (*fill)(mcir_graph *g, mcir_env *env), void (*mutate)(mcir_codegen *cg),
                              char **diag) {
    cgt_emu_result res = {.rel = INFINITY};
    mcir_diag d = mcir_diag_stderr();
    mcir_codegen *cg = mcir_codegen_new(p, mp, &d);
    if (!cg) return res;
    if (mutate) mutate(cg);
    mcir_env *ref = mcir_env_new(g, seed), *dev = mcir_env_new(g, seed);
    if (fill) {
        fill(g, ref);
        fill(g, dev);
    }
    if (!mcir_interp_run(g, ref, &d)) abort();
    size_t len = 0;
    char *text = NULL;
    FILE *mem = open_memstream(&text, &len);
    mcir_diag dd = mem ? mcir_diag_to(mem) : mcir_diag_stderr();
    mcir_emu_set_max_blocks(max_blocks);
    mcir_emu_reset_launches();
    mcir_gpu_stats st;
    res.ran = mcir_emu_run(cg, dev, mp ? MCIR_ALLOC_POOL : MCIR_ALLOC_EAGER, &st, &dd);
    mcir_emu_set_max_blocks(0);
    if (mem) fclose(mem);
    if (text && *text && !diag) fputs(text, stderr);
    if (diag) *diag = text;
    else free(text);
    const mcir_emu_launch_record *r;
    res.launches = mcir_emu_launches(&r);
    for (int i = 0; i < res.launches; i++) {
        for (int k = 0; k < 4; k++) res.findings[k] += r[i].findings[k];
        res.wgmma += r[i].wgmma;
        res.tma_loads += r[i].tma_loads;
        res.tma_stores += r[i].tma_stores;
    }
    if (res.ran) {
        res.finite = true;
        double worst = 0;
        for (int o = 0; o < g->n_outputs; o++) {
            const mcir_tensor *t = g->outputs[o];
            const float *a = mcir_env_get(dev, t), *b = mcir_env_get(ref, t);
            double maxref = 0, maxerr = 0;
            for (int64_t k = 0; k < mcir_tensor_numel(t); k++) {
                if (!isfinite(a[k])) res.finite = false;
                maxref = fmax(maxref, fabs(b[k]));
                double e = isfinite(a[k]) ? fabs((double)a[k] - (double)b[k]) : INFINITY;
                maxerr = fmax(maxerr, e);
            }
            double rel = maxref > 0 ? maxerr / maxref : INFINITY;
            worst = fmax(worst, rel);
        }
        res.rel = worst;
    }
    mcir_env_free(ref);
    mcir_env_free(dev);
    mcir_codegen_free(cg);
    return res;
}
