/*
 * codegen_util.h — helpers for the codegen tests: graphs from JSON text and
 * hand-made kernel plans (one region per kernel, reads and writes derived
 * from the region boundary), so templates can be compiled and run without
 * the kernel planner. The plan lives in the graph's arena.
 */
#ifndef MCIR_TESTS_CODEGEN_UTIL_H
#define MCIR_TESTS_CODEGEN_UTIL_H

#include "codegen/codegen.h"

typedef struct cgt_kspec {
    mcir_template tpl;
    const char *anchor;     /* node name, may be NULL (elementwise / copy) */
    const char *nodes;      /* comma-separated node names of the region */
} cgt_kspec;

mcir_graph *cgt_graph(const char *json);
/* A plan of the given kernels (in order) for target arch. */
mcir_plan *cgt_plan(mcir_graph *g, const char *arch, int n, const cgt_kspec *ks);
/* The naive plan: every node its own kernel, template from its op; reshape
 * is an alias of its input. */
mcir_plan *cgt_plan_naive(mcir_graph *g, const char *arch);
/* Makes a fresh temporary cache directory and points MCIR_CACHE_DIR at it. */
void cgt_temp_cache(char *dir, size_t n);
/* The suite's kernel cache: MCIR_CACHE_DIR where it is set (dir ""; what
 * scripts/test.sh does, one cache for the normal and sanitizer builds'
 * suites: entries are keyed by source, arch and compiler, so sharing one
 * changes no result and compiles each kernel once per CI run), else a
 * fresh temporary one as cgt_temp_cache (dir its path, to remove). For
 * suites that do not count the cache's hits. */
void cgt_kernel_cache(char *dir, size_t n);

/* The CPU emulator (emu/cuda_emu.h) for a generated kernel: compiles
 * source plus its launcher (the body of `extern "C" void emu_kernel(void **a)`)
 * as C++ into a shared object under work_dir, with src_dir/tests on the
 * include path, and returns the dlopen handle (NULL, with the reason on
 * stderr, on failure). One object per distinct source and launcher: a
 * repeat dlopens the one built before (*compiled, when given, says whether
 * this call ran the compiler). In the sanitizer build the kernels are
 * instrumented too. */
void *cgt_emu_compile(const char *work_dir, const char *src_dir, const char *name,
                      const char *source, const char *launcher, bool *compiled);
/* Plan p (its kernels generated from g; mp its memory plan, or NULL: each
 * tensor its own allocation) run on the emulated device through the real
 * runtime (runtime/runtime.c, emu/emu.h) with at most max_blocks blocks a
 * launch (0: all; every template is a grid-stride loop), its outputs
 * against the interpreter's on the same inputs: fill sets them in both
 * environments (NULL: seeded with seed, as the runtime seeds). mutate, when
 * given, edits the codegen (a unit, a cuBLAS argument) before the run.
 * Returns the worst max |emu - ref| / max |ref| over the outputs (INFINITY
 * when the run fails; its diagnostics in *diag when diag is given, else on
 * stderr); *records / *n_records the launches (mcir_emu_launches). */
typedef struct cgt_emu_result {
    bool ran;
    double rel;
    bool finite;
    int findings[4];   /* summed over the launches: out-of-bounds, race, uninitialised, hang */
    unsigned long long wgmma, tma_loads, tma_stores;
    int launches;
} cgt_emu_result;
cgt_emu_result cgt_emu_device(mcir_graph *g, mcir_plan *p, mcir_memplan *mp, unsigned max_blocks, uint64_t seed,
                              void (*fill)(mcir_graph *g, mcir_env *env), void (*mutate)(mcir_codegen *cg),
                              char **diag);

/* Bytes a buffer takes in an emulated arena (the runtime's 256-byte alignment). */
size_t cgt_arena_round(int64_t bytes);

#endif
