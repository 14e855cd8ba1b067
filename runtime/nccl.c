/*
 * nccl.c — NCCL loaded with dlopen at run time (runtime/coll_api.h), so
 * mcir builds and runs one-rank graphs without it: a run of several ranks
 * on GPUs asks for it and, where it is missing, says what to install.
 *
 * Where it looks: $MCIR_NCCL_LIBRARY (a path), libnccl.so.2 on the
 * loader's path, the CUDA toolkit's lib64, then PyPI's wheels
 * (nvidia-nccl-cu13, nvidia-nccl-cu12: site-packages/nvidia/nccl/lib) in
 * the active virtual environment, the user's and the system's Python.
 */
#include <dlfcn.h>
#include <glob.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/coll_api.h"

static struct {
    bool tried;
    char env[512];   /* the MCIR_NCCL_LIBRARY it was loaded under */
    void *lib;
    mcir_coll_api api;
    char name[64];
    char why[512];
} nc;

/* ncclUniqueId is a struct of 128 bytes passed by value */
typedef struct { char internal[MCIR_NCCL_ID_BYTES]; } nccl_id;
static int (*real_get_unique_id)(nccl_id *id);
static int (*real_init_rank)(void **comm, int nranks, nccl_id id, int rank);

static int get_unique_id(void *id) { return real_get_unique_id((nccl_id *)id); }

static int comm_init_rank(void **comm, int nranks, const void *id, int rank) {
    nccl_id v;
    memcpy(&v, id, sizeof v);
    return real_init_rank(comm, nranks, v, rank);
}

static void *try_open(const char *path) { return path && *path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL; }

static void *open_from_wheels(void) {
    static const char *const patterns[] = {
        "%s/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",   /* $VIRTUAL_ENV */
        "%s/.local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",   /* $HOME */
        "/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
        "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2",
    };
    const char *bases[] = {getenv("VIRTUAL_ENV"), getenv("HOME"), "", ""};
    for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++) {
        if (i < 2 && (!bases[i] || !*bases[i])) continue;
        char pat[1024];
        snprintf(pat, sizeof pat, patterns[i], bases[i]);
        glob_t g;
        if (glob(pat, 0, NULL, &g) != 0) continue;
        void *lib = NULL;
        for (size_t k = g.gl_pathc; k-- > 0 && !lib;) lib = try_open(g.gl_pathv[k]);   /* the newest Python first */
        globfree(&g);
        if (lib) return lib;
    }
    return NULL;
}

#define SYM(field, sym)                                                        \
    do {                                                                       \
        *(void **)&nc.api.field = dlsym(nc.lib, sym);                          \
        if (!nc.api.field) {                                                   \
            snprintf(nc.why, sizeof nc.why, "NCCL has no %s (version 2.12 or later is needed)", sym); \
            return;                                                            \
        }                                                                      \
    } while (0)

static void load(void) {
    const char *env = getenv("MCIR_NCCL_LIBRARY");
    if (env && *env) {
        nc.lib = try_open(env);
        if (!nc.lib) {
            snprintf(nc.why, sizeof nc.why, "MCIR_NCCL_LIBRARY=%s cannot be loaded: %s", env, dlerror());
            return;
        }
    }
    if (!nc.lib) nc.lib = try_open("libnccl.so.2");
    if (!nc.lib) nc.lib = try_open("/usr/local/cuda/lib64/libnccl.so.2");
    if (!nc.lib) nc.lib = open_from_wheels();
    if (!nc.lib) {
        snprintf(nc.why, sizeof nc.why,
                 "NCCL (libnccl.so.2) is not installed: install PyPI's nvidia-nccl-cu13 (pip install "
                 "nvidia-nccl-cu13) or Debian's libnccl2, or set MCIR_NCCL_LIBRARY to its path");
        return;
    }
    SYM(comm_init_all, "ncclCommInitAll");
    SYM(comm_destroy, "ncclCommDestroy");
    SYM(group_start, "ncclGroupStart");
    SYM(group_end, "ncclGroupEnd");
    SYM(all_reduce, "ncclAllReduce");
    SYM(all_gather, "ncclAllGather");
    SYM(reduce_scatter, "ncclReduceScatter");
    SYM(error_string, "ncclGetErrorString");
    *(void **)&real_get_unique_id = dlsym(nc.lib, "ncclGetUniqueId");
    *(void **)&real_init_rank = dlsym(nc.lib, "ncclCommInitRank");
    if (!real_get_unique_id || !real_init_rank) {
        snprintf(nc.why, sizeof nc.why, "NCCL has no ncclGetUniqueId / ncclCommInitRank");
        return;
    }
    nc.api.get_unique_id = get_unique_id;
    nc.api.comm_init_rank = comm_init_rank;
    int (*version)(int *) = NULL;
    *(void **)&version = dlsym(nc.lib, "ncclGetVersion");
    int v = 0;
    if (version) version(&v);
    /* NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9 */
    snprintf(nc.name, sizeof nc.name, "NCCL %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    nc.api.name = nc.name;
    nc.why[0] = 0;
}

const mcir_coll_api *mcir_nccl_load(char *why, size_t n) {
    const char *env = getenv("MCIR_NCCL_LIBRARY");
    if (nc.tried && strcmp(nc.env, env ? env : "") != 0) {   /* asked for another library since */
        if (nc.lib) dlclose(nc.lib);
        memset(&nc, 0, sizeof nc);
    }
    if (!nc.tried) {
        nc.tried = true;
        snprintf(nc.env, sizeof nc.env, "%s", env ? env : "");
        load();
    }
    if (nc.why[0]) {
        if (why && n) snprintf(why, n, "%s", nc.why);
        return NULL;
    }
    return &nc.api;
}
