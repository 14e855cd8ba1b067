/*
 * bench_peak.c — peak device memory of mcir's three allocation modes,
 * simulated exactly from the plan (no GPU): the same first/last use per
 * buffer, in kernel order, that runtime/runtime.c allocates by.
 *
 *   pool   one allocation per arena pool (the memory plan's bytes) plus
 *          one per graph input, weight and output;
 *   eager  one allocation per tensor, all up front;
 *   lazy   graph tensors up front, each intermediate allocated before the
 *          first kernel that touches it and freed after the last, counted
 *          twice: exact bytes (what runtime.c's cuMemAlloc/cuMemFree hold)
 *          and through a model of PyTorch's CUDA caching allocator
 *          (allocated and reserved peaks, below);
 *   torch-like: the graph as read, without rewrites (one kernel per op,
 *          every intermediate materialized, as PyTorch eager runs it),
 *          lazy through the caching-allocator model.
 *
 * The caching-allocator model follows c10/cuda/CUDACachingAllocator.cpp
 * with default settings: sizes rounded up to 512 bytes; requests of at
 * most 1 MiB come from the small pool, larger ones from the large pool;
 * a new segment is 2 MiB (small), 20 MiB (large, request < 10 MiB) or the
 * request rounded up to 2 MiB; the smallest free block that fits is used
 * (best fit) and split when the rest is ≥ 512 B (small) or > 1 MiB
 * (large); freed blocks merge with free neighbours; segments are never
 * returned (no empty_cache). Allocated = bytes of blocks in use (whole
 * blocks when not split, as max_memory_allocated counts them); reserved =
 * bytes of segments (max_memory_reserved). Not modelled: the staging
 * buffer for cuBLAS matmuls with an epilogue (same in every mode), stream
 * ordering, expandable segments, cudaMalloc's own granularity.
 *
 * usage: bench_peak [--csv FILE] [--examples DIR] [graph.json ...]
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench_util.h"

/* ------------------------------------------------ caching allocator */

enum { KB = 1024, MB = 1024 * 1024 };

typedef struct block {
    int seg;
    int64_t off, size;
    bool free, small, live;   /* live: slot in use */
} block;

typedef struct caching {
    block *b;
    int n, cap;
    int64_t allocated, reserved, peak_allocated, peak_reserved;
    int segments;
} caching;

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

static int new_block(caching *c, block x) {
    for (int i = 0; i < c->n; i++)
        if (!c->b[i].live) {
            c->b[i] = x;
            return i;
        }
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        c->b = realloc(c->b, sizeof *c->b * (size_t)c->cap);
        MCIR_ASSERT(c->b != NULL);
    }
    c->b[c->n] = x;
    return c->n++;
}

/* Returns a block handle for `bytes`. */
static int caching_alloc(caching *c, int64_t bytes) {
    int64_t size = bytes < 512 ? 512 : round_up(bytes, 512);
    bool small = size <= MB;
    int best = -1;
    for (int i = 0; i < c->n; i++) {
        const block *x = &c->b[i];
        if (!x->live || !x->free || x->small != small || x->size < size) continue;
        if (best < 0 || x->size < c->b[best].size ||
            (x->size == c->b[best].size && (x->seg < c->b[best].seg ||
                                            (x->seg == c->b[best].seg && x->off < c->b[best].off))))
            best = i;
    }
    if (best < 0) {   /* a new segment */
        int64_t seg = small ? 2 * MB : size < 10 * MB ? 20 * MB : round_up(size, 2 * MB);
        c->reserved += seg;
        if (c->reserved > c->peak_reserved) c->peak_reserved = c->reserved;
        best = new_block(c, (block){c->segments++, 0, seg, true, small, true});
    }
    block *x = &c->b[best];
    int64_t rest = x->size - size;
    if (small ? rest >= 512 : rest > MB) {
        block r = {x->seg, x->off + size, rest, true, small, true};
        x->size = size;
        new_block(c, r);
        x = &c->b[best];   /* new_block may have moved the array */
    }
    x->free = false;
    c->allocated += x->size;
    if (c->allocated > c->peak_allocated) c->peak_allocated = c->allocated;
    return best;
}

static void caching_free(caching *c, int h) {
    block *x = &c->b[h];
    MCIR_ASSERT(x->live && !x->free);
    c->allocated -= x->size;
    x->free = true;
    for (bool merged = true; merged;) {   /* merge with free neighbours */
        merged = false;
        for (int i = 0; i < c->n; i++) {
            block *y = &c->b[i];
            if (i == h || !y->live || !y->free || y->seg != x->seg) continue;
            if (y->off + y->size == x->off) {
                y->size += x->size;
                x->live = false;
                h = i;
                x = y;
                merged = true;
                break;
            }
            if (x->off + x->size == y->off) {
                x->size += y->size;
                y->live = false;
                merged = true;
                break;
            }
        }
    }
}

/* ----------------------------------------------------- the plan side */

typedef struct peaks {
    int kernels;
    int64_t graph_bytes, arena_bytes, pool, eager, lazy_exact, lazy_alloc, lazy_reserved;
    int64_t act_exact, act_alloc;   /* intermediates only: exact live bytes, caching allocated */
} peaks;

static bool is_graph_tensor(const mcir_tensor *t) {
    return t->kind == MCIR_TENSOR_INPUT || t->kind == MCIR_TENSOR_WEIGHT || t->kind == MCIR_TENSOR_OUTPUT ||
           t->is_output;
}

static const mcir_tensor *root_of(const mcir_plan *p, const mcir_tensor *t) {
    return p->alias_root ? p->alias_root[t->id] : t;
}

static void simulate(const mcir_plan *p, const mcir_memplan *m, peaks *out) {
    const mcir_graph *g = p->graph;
    int nt = g->n_tensors, nk = p->n_kernels;
    int *first = malloc(sizeof *first * (size_t)nt), *last = malloc(sizeof *last * (size_t)nt);
    int *handle = malloc(sizeof *handle * (size_t)nt), *act = malloc(sizeof *act * (size_t)nt);
    MCIR_ASSERT(first && last && handle && act);
    for (int i = 0; i < nt; i++) first[i] = last[i] = handle[i] = act[i] = -1;
    for (int k = 0; k < nk; k++) {
        const mcir_kernel_plan *kp = &p->kernels[k];
        for (int j = 0; j < kp->n_reads + kp->n_writes; j++) {
            const mcir_tensor *r = root_of(p, j < kp->n_reads ? kp->reads[j] : kp->writes[j - kp->n_reads]);
            if (first[r->id] < 0) first[r->id] = k;
            last[r->id] = k;
        }
    }
    for (int j = 0; j < g->n_outputs; j++) {   /* outputs stay until copied back */
        const mcir_tensor *r = root_of(p, g->outputs[j]);
        if (first[r->id] < 0) first[r->id] = nk;
        last[r->id] = nk;
    }
    memset(out, 0, sizeof *out);
    out->kernels = nk;
    caching c = {0}, ca = {0};   /* everything; intermediates only */
    int64_t live = 0, act_live = 0;
    for (int t = 0; t < nt; t++) {
        if (first[t] < 0) continue;
        const mcir_tensor *r = g->tensors[t];
        int64_t bytes = mcir_tensor_bytes(r);
        int pool;
        int64_t off;
        out->eager += bytes;
        if (is_graph_tensor(r)) {
            out->graph_bytes += bytes;
            handle[t] = caching_alloc(&c, bytes);
        } else if (!(m && mcir_memplan_locate(m, p, r, &pool, &off))) {
            out->pool += bytes;   /* placed on its own by the runtime */
        }
    }
    if (m) out->arena_bytes = m->arena_bytes;
    out->pool += out->graph_bytes + out->arena_bytes;
    live = out->graph_bytes;
    out->lazy_exact = live;
    for (int k = 0; k < nk; k++) {
        for (int t = 0; t < nt; t++)
            if (first[t] == k && !is_graph_tensor(g->tensors[t])) {
                live += mcir_tensor_bytes(g->tensors[t]);
                act_live += mcir_tensor_bytes(g->tensors[t]);
                handle[t] = caching_alloc(&c, mcir_tensor_bytes(g->tensors[t]));
                act[t] = caching_alloc(&ca, mcir_tensor_bytes(g->tensors[t]));
            }
        if (live > out->lazy_exact) out->lazy_exact = live;
        if (act_live > out->act_exact) out->act_exact = act_live;
        for (int t = 0; t < nt; t++)
            if (last[t] == k && !is_graph_tensor(g->tensors[t]) && handle[t] >= 0) {
                live -= mcir_tensor_bytes(g->tensors[t]);
                act_live -= mcir_tensor_bytes(g->tensors[t]);
                caching_free(&c, handle[t]);
                caching_free(&ca, act[t]);
                handle[t] = act[t] = -1;
            }
    }
    out->lazy_alloc = c.peak_allocated;
    out->lazy_reserved = c.peak_reserved;
    out->act_alloc = ca.peak_allocated;
    free(c.b);
    free(ca.b);
    free(act);
    free(first);
    free(last);
    free(handle);
}

static bool plan_peaks(const char *path, bool rewrite, peaks *out) {
    mcir_options o = mcir_options_default();
    o.graph_path = path;
    o.want_plan = true;
    o.no_rewrite = !rewrite;
    mcir_diag d = mcir_diag_stderr();
    mcir_compilation c;
    bool ok = mcir_compile(&o, &c, &d) == MCIR_EXIT_OK && c.plan;
    if (ok) simulate(c.plan, c.memory, out);
    mcir_compilation_free(&c);
    return ok;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    const char *csv_path = NULL, *exdir = MCIR_BENCH_EXAMPLES_DIR;
    char *paths[256];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        bool more = i + 1 < argc;
        if (strcmp(argv[i], "--csv") == 0 && more) csv_path = argv[++i];
        else if (strcmp(argv[i], "--examples") == 0 && more) exdir = argv[++i];
        else if (argv[i][0] == '-' || n == 256) {
            fprintf(stderr, "usage: bench_peak [--csv FILE] [--examples DIR] [graph.json ...]\n");
            return 2;
        } else paths[n++] = strdup(argv[i]);
    }
    if (n == 0) {
        DIR *dir = opendir(exdir);
        struct dirent *e;
        while (dir && (e = readdir(dir)) && n < 256) {
            char p[1024];
            struct stat st;
            snprintf(p, sizeof p, "%s/%s/graph.json", exdir, e->d_name);
            if (e->d_name[0] != '.' && stat(p, &st) == 0) paths[n++] = strdup(p);
        }
        if (dir) closedir(dir);
        qsort(paths, (size_t)n, sizeof *paths, cmp_str);
    }
    bench_csv csv_file;
    FILE *csv = bench_csv_open(&csv_file, csv_path);
    if (!csv) return 2;
    fprintf(csv, "example,kernels,graph_tensor_bytes,arena_bytes,pool_peak,lazy_exact_peak,lazy_caching_allocated,"
                 "lazy_caching_reserved,eager_peak,torchlike_kernels,torchlike_caching_allocated,"
                 "torchlike_caching_reserved,pool_over_lazy_caching,pool_over_torchlike,act_lazy_exact,act_lazy_caching,"
                 "act_torchlike_caching,arena_over_act_torchlike,method\n");
    int failures = 0;
    for (int i = 0; i < n; i++) {
        char ex[256];
        snprintf(ex, sizeof ex, "%s", paths[i]);
        char *s = strrchr(ex, '/');
        if (s && strcmp(s, "/graph.json") == 0) {
            *s = 0;
            s = strrchr(ex, '/');
        }
        const char *name = s ? s + 1 : ex;
        peaks f, u;
        if (!plan_peaks(paths[i], true, &f) || !plan_peaks(paths[i], false, &u)) {
            failures++;
            continue;
        }
        fprintf(csv, "%s,%d,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%d,%lld,%lld,%.3f,%.3f,%lld,%lld,%lld,%.3f,simulated\n", name, f.kernels,
                (long long)f.graph_bytes, (long long)f.arena_bytes, (long long)f.pool, (long long)f.lazy_exact,
                (long long)f.lazy_alloc, (long long)f.lazy_reserved, (long long)f.eager, u.kernels,
                (long long)u.lazy_alloc, (long long)u.lazy_reserved, (double)f.pool / (double)f.lazy_alloc,
                (double)f.pool / (double)u.lazy_alloc, (long long)f.act_exact, (long long)f.act_alloc,
                (long long)u.act_alloc, u.act_alloc ? (double)f.arena_bytes / (double)u.act_alloc : 0.0);
    }
    if (!bench_csv_close(&csv_file)) failures++;
    for (int i = 0; i < n; i++) free(paths[i]);
    return failures ? 1 : 0;
}
