/*
 * runtime.c — runs a compiled plan on the GPU as a session over one
 * gpu_run: open (context, compile for the device's arch, stream, modules,
 * cuBLAS, staging and scratch; place: the arena and every tensor a kernel
 * touches, weights uploaded), then steps (step_place: graph inputs and
 * outputs, inputs filled; launch: the plan's kernels in order, or the
 * replay of their CUDA graph captured at the first step at their sizes;
 * copy back: outputs into env), then close (everything released). mcir_gpu_run is
 * open, one step, close. The driver is cuda_driver.h's dlopen'd table;
 * every call goes through CU_CHECK, which records call, file and line.
 *
 * Invariants: device memory is one allocation per arena pool (offsets from
 * the memory plan) plus one per graph input, weight and output (POOL, the
 * default), or one per tensor up front (EAGER), or one per intermediate
 * between the kernels that first and last touch it (LAZY, the plan's
 * liveness) — the Occamy comparison; peak bytes count every live
 * allocation of ours. Kernels launch in plan order on one stream (a
 * graph of several ranks: its collectives on a second, each kernel
 * waiting for the collectives whose buffers it touches); outputs
 * are copied back into env. Everything allocated is released on every
 * path. With graphs, no address a captured launch reads moves after the
 * capture: the arena, the weights and the session's own input and output
 * buffers stay until close, and bound tensors are copied through them.
 *
 * Two devices run this same code: the GPU (the CUDA driver, cuBLAS) and the
 * emulator (emu/emu.h: the driver table over host memory, the kernels
 * built for the CPU emulator, host cuBLAS). For the emulator the runtime
 * also names every range it places (the findings name the tensor), builds
 * the modules with the host compiler instead of NVRTC, and reports a
 * launch's findings as "KERNEL: error: KIND: WHAT".
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/coll_api.h"
#include "runtime/launch.h"
#include "runtime/runtime-impl.h"
#include "runtime/runtime.h"
#include "emu/emu.h"

#define CU_CHECK(call, why, n) CG_CHECK("CUDA", call, CUDA_SUCCESS, mcir_cu_error, why, n)

static const mcir_cu_driver *cu;   /* set by run_open once the driver loaded */

bool mcir_gpu_available(char *why, size_t n) { return mcir_cu_load(why, n) != NULL; }

const char *mcir_alloc_mode_name(mcir_alloc_mode m) {
    return m == MCIR_ALLOC_LAZY ? "lazy" : m == MCIR_ALLOC_EAGER ? "eager" : "pool";
}

bool mcir_alloc_mode_parse(const char *s, mcir_alloc_mode *out) {
    if (strcmp(s, "pool") == 0) *out = MCIR_ALLOC_POOL;
    else if (strcmp(s, "lazy") == 0) *out = MCIR_ALLOC_LAZY;
    else if (strcmp(s, "eager") == 0) *out = MCIR_ALLOC_EAGER;
    else return false;
    return true;
}

/* ------------------------------------------------------------ the run */

/* The CUDA graphs a session keeps, one per size it has stepped at (a
 * graph with dims; one graph otherwise). */
#define GRAPH_SIZES 8

typedef struct gpu_run {
    mcir_codegen *cg;
    const mcir_plan *p;
    const mcir_graph *g;
    const mcir_memplan *m;   /* NULL: no arena plan */
    mcir_alloc_mode mode;
    const uint64_t *bound;   /* by tensor id: the caller's device bytes, 0 = ours (NULL: none) */
    int ordinal;             /* the CUDA device ordinal (ranks on GPUs: one each) */
    int rank;                /* graphs with ranks: the rank this run is (its parts of sharded leaves) */
    /* open */
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    CUevent ev0, ev1;
    char device[128];
    CUmodule *mods, *epi_mods;                   /* by kernel; owners only */
    CUfunction *funcs, *epi_funcs, *merge_funcs; /* by kernel */
    void *blas, *blas_lt;                        /* NULL: not loaded */
    CUdeviceptr staging;     /* f32 product of cuBLAS matmuls with an epilogue */
    CUdeviceptr scratch;     /* split-KV partials outside a pool plan */
    CUdeviceptr sched;       /* dynamic schedulers' counters: MCIR_SCHED_BYTES at kernel i's slot i
                              * (zeroed here once; each kernel leaves its own zero) */
    cg_lt_plan *lt;          /* by kernel: its cuBLASLt call, prepared at open */
    cg_gemm_desc *lt_at;     /* by kernel: the GEMM its call was prepared for (a graph with
                              * dims prepares it again at a step at other sizes) */
    CUdeviceptr workspace;   /* cuBLASLt's, the most any prepared call needs */
    size_t workspace_bytes;
    int lt_fallbacks;
    char lt_note[512];       /* the first fallback, for the warning */
    char blas_note[512];     /* cuBLAS / cuBLASLt that did not load (not disabled): the warning */
    /* place */
    CUdeviceptr *ptr;        /* by root tensor id */
    CUdeviceptr *owned;      /* by root tensor id: our own allocation (0: none); ptr may be the caller's */
    int64_t *bytes;          /* by root tensor id: size of that allocation */
    CUdeviceptr *pools;
    int n_pools;
    int64_t cur, peak;
    /* launch */
    float ms;
    int failed;              /* the kernel whose launch failed, or -1 */
    CUevent *done;           /* by kernel: recorded after its launches */
    /* runs of several ranks: the collectives on a second stream (NULL: on
     * `stream`), each waiting for the kernels before it; a kernel waits for
     * a pending collective (its `done`) where it touches its buffers */
    CUstream comm;
    int *pending, n_pending; /* collectives on comm no kernel waited for yet */
    int last_compute;        /* the latest kernel on `stream` (-1: none) */
    int overlapped;          /* kernels launched while a collective was pending */
    double *deadline;        /* by kernel: seconds it may run (0: no limit) */
    int completed;           /* kernels 0..completed are known to have finished */
    int launched;            /* kernels 0..launched are on the stream */
    bool sync;               /* wait for every kernel (--sync) */
    bool hung;               /* the watchdog gave up: leave the context alone */
    int fault;               /* an asynchronous error seen while waiting (CUresult), or 0 */
    char why[768];
    /* graphs (sessions): the launches captured once, replayed each step */
    bool graphs;             /* capture at the first step at each size, replay after */
    /* States (graph.json "state"): their inputs were filled at an earlier
     * step and the device holds the state since (the next step reads it
     * there); keep_state: their outputs are not copied back into env. */
    bool state_loaded, keep_state;
    int recaptures;          /* graphs captured after the session's first (new sizes, or evicted) */
    bool capturing;          /* a failure now is a capture's */
    CUgraphExec exec;        /* the graph of this step's sizes (NULL: not captured yet) */
    /* a graph with dims: one capture per size, the least recently used
     * given up beyond GRAPH_SIZES (sized_evicted counts them) */
    struct sized_graph {
        int64_t dims[MCIR_MAX_DIMS];
        CUgraphExec exec;
        uint64_t used;       /* the step that last replayed it */
    } sized[GRAPH_SIZES];
    int n_sized, sized_evicted;
    uint64_t tick;
    double host_us;          /* host time to issue the last step's launches */
    double capture_us;       /* host time of the first graph step's warm-up and capture */
} gpu_run;

/* ------------------------------------------------------ diagnostics */

static int opt_sync = -1;           /* -1: MCIR_GPU_SYNC decides */
static double opt_watchdog = -1;    /* < 0: MCIR_GPU_WATCHDOG, else from the model */

void mcir_gpu_set_sync(bool on) { opt_sync = on; }
void mcir_gpu_set_watchdog(double seconds) { opt_watchdog = seconds; }

static bool sync_mode(void) {
    if (opt_sync >= 0) return opt_sync;
    const char *e = getenv("MCIR_GPU_SYNC");
    return e && *e && strcmp(e, "0") != 0;
}

/* The watchdog's fixed deadline in seconds (0: none), or -1: from the model. */
static double watchdog_seconds(void) {
    if (opt_watchdog >= 0) return opt_watchdog;
    const char *e = getenv("MCIR_GPU_WATCHDOG");
    if (e && *e) {
        char *end;
        double v = strtod(e, &end);
        if (end != e && !*end && v >= 0) return v;
    }
    return -1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The device's time for the watchdog's deadlines, and a nap between two
 * polls: the host's, or the emulated device's (cuda_driver.h: its naps
 * advance its clock instead of sleeping). */
static double device_now_s(void) { return cu->emu_clock ? cu->emu_clock() : now_s(); }
static void device_nap(useconds_t us) {
    if (cu->emu_nap)
        cu->emu_nap(us);
    else
        usleep(us);
}

bool mcir_gpu_check_versions(int driver, const char *nvrtc, char *why, size_t n) {
    int nmaj = 0, nmin = 0;
    if (!nvrtc || sscanf(nvrtc, "%d.%d", &nmaj, &nmin) != 2 || driver <= 0) return true;   /* nothing to compare */
    int dmaj = driver / 1000, dmin = driver % 1000 / 10;
    if (dmaj < nmaj) {
        snprintf(why, n, "the CUDA driver is too old for the toolkit: it supports CUDA %d.%d, and the kernels are "
                 "built by NVRTC %d.%d, which needs a driver for CUDA %d.0 or later (update the driver, or build "
                 "mcir with a CUDA %d.x toolkit)", dmaj, dmin, nmaj, nmin, nmaj, dmaj);
        return false;
    }
    return true;
}

bool mcir_gpu_check_arch(const char *target, int major, int minor, bool sm90a, const char *device, char *why,
                         size_t n) {
    int want = target && !strncmp(target, "sm_", 3) ? atoi(target + 3) : 0, have = major * 10 + minor;
    char fit[16];
    snprintf(fit, sizeof fit, "sm_%d", have >= 90 ? 90 : have >= 89 ? 89 : have >= 86 ? 86 : 80);
    if (sm90a && have != 90) {
        snprintf(why, n, "the kernels were made for sm_90a (wgmma and TMA: compute capability 9.0 only) and this "
                 "device, %s, is compute capability %d.%d: compile with --arch %s", device, major, minor, fit);
        return false;
    }
    if (want > 0 && have < want) {
        snprintf(why, n, "the kernels were made for %s and this device, %s, is compute capability %d.%d, older: "
                 "compile with --arch %s", target, device, major, minor, fit);
        return false;
    }
    return true;
}

/* The emulated device: what the range holds from now on (its findings
 * name it); nothing on a GPU. */
static void name_range(CUdeviceptr p, int64_t bytes, const char *name) {
    if (cu->emu_name && p) cu->emu_name(p, (size_t)bytes, name);
}

/* Waits until kernels up to `last` have finished, kernel by kernel
 * (cuEventQuery on each one's event, sleeping between polls), so that an
 * asynchronous error is seen with the kernels known complete before it,
 * and a kernel that runs past its deadline is a hang, not a process
 * blocked forever. */
static bool wait_for(gpu_run *r, int last) {
    for (int j = r->completed + 1; j <= last; j++) {
        double t0 = device_now_s();
        useconds_t nap = 20;
        for (;;) {
            int rc = cu->cuEventQuery(r->done[j]);
            if (rc == CUDA_SUCCESS) break;
            if (rc != CUDA_ERROR_NOT_READY) {
                r->fault = rc;
                return false;
            }
            double spent = device_now_s() - t0;
            if (r->deadline[j] > 0 && spent > r->deadline[j]) {
                r->hung = true;
                r->failed = j;
                snprintf(r->why, sizeof r->why, "still running after %.1f s", spent);
                return false;
            }
            device_nap(nap);
            if (nap < 2000) nap *= 2;
        }
        r->completed = j;
    }
    return true;
}

static const mcir_tensor *root_of(const gpu_run *r, const mcir_tensor *t) {
    return r->p->alias_root[t->id];
}

static bool is_graph_tensor(const mcir_tensor *t) {
    return t->kind == MCIR_TENSOR_INPUT || t->kind == MCIR_TENSOR_WEIGHT ||
           t->kind == MCIR_TENSOR_OUTPUT || t->is_output;
}

/* The output carried over input t's bytes (graph.json "state"), or NULL. */
static const mcir_tensor *state_output(const gpu_run *r, const mcir_tensor *t) {
    for (int j = 0; t->kind == MCIR_TENSOR_INPUT && j < r->g->n_outputs; j++)
        if (r->g->outputs[j]->state_input == t) return r->g->outputs[j];
    return NULL;
}

/* A graph input or output: placed (and an input filled) at every step. */
static bool is_step_tensor(const mcir_tensor *t) {
    return t->kind != MCIR_TENSOR_WEIGHT &&
           (t->kind == MCIR_TENSOR_INPUT || t->kind == MCIR_TENSOR_OUTPUT || t->is_output);
}

int cg_runtime_mutant;

/* Whether root tensor t gets device bytes: a kernel touches it (the plan's
 * liveness) or it holds a graph output, which stays until copied back. */
static bool needs_bytes(const gpu_run *r, const mcir_tensor *t) {
    if (root_of(r, t) != t) return false;
    if (r->p->last_use[t->id] >= 0) return true;
    for (int j = 0; j < r->g->n_outputs; j++)
        if (root_of(r, r->g->outputs[j]) == t) return true;
    return false;
}

/* cuMemAlloc of bytes into *out, counted towards the peak; what names the
 * buffer in the message when the device is out of memory. */
static bool dev_alloc(gpu_run *r, const char *what, int64_t bytes, CUdeviceptr *out) {
    int rc = cu->cuMemAlloc_v2(out, (size_t)bytes);
    if (rc != CUDA_SUCCESS) {
        size_t free_b = 0, total_b = 0;
        cu->cuMemGetInfo_v2(&free_b, &total_b);
        snprintf(r->why, sizeof r->why,
                 "%s: cuMemAlloc of %lld bytes for %s failed (%s, rc %d); device has %zu bytes free of %zu",
                 rc == CUDA_ERROR_OUT_OF_MEMORY ? "out of device memory" : "device allocation failed",
                 (long long)bytes, what, mcir_cu_error(rc), rc, free_b, total_b);
        *out = 0;
        return false;
    }
    r->cur += bytes;
    if (r->cur > r->peak) r->peak = r->cur;
    return true;
}

/* t's bytes at the largest sizes of the graph's range (at the current
 * sizes without dims). */
static int64_t tensor_bytes_max(const mcir_graph *g, const mcir_tensor *t) {
    int64_t n = (int64_t)mcir_dtype_size(t->dtype);
    for (int i = 0; i < t->rank; i++) {
        mcir_extent e = mcir_tensor_extent(t, i);
        int64_t lo, hi;
        mcir_extent_bounds(g, &e, &lo, &hi);
        n *= hi;
    }
    return n > mcir_tensor_bytes(t) ? n : mcir_tensor_bytes(t);
}

/* An allocation of `bytes` (at least t's) for t. */
static bool tensor_alloc(gpu_run *r, const mcir_tensor *t, int64_t bytes) {
    char what[300];
    snprintf(what, sizeof what, "'%s'", t->name);
    if (!dev_alloc(r, what, bytes, &r->ptr[t->id])) return false;
    r->owned[t->id] = r->ptr[t->id];
    r->bytes[t->id] = bytes;
    name_range(r->ptr[t->id], bytes, t->name);
    return true;
}

static void tensor_free(gpu_run *r, const mcir_tensor *t) {
    if (!r->owned[t->id]) return;
    cu->cuMemFree_v2(r->owned[t->id]);
    r->cur -= r->bytes[t->id];
    if (r->ptr[t->id] == r->owned[t->id]) r->ptr[t->id] = 0;
    r->owned[t->id] = 0;
}

/* The session's graphs given up: an address they captured changed
 * (and at close). */
static void graphs_drop(gpu_run *r) {
    for (int k = 0; k < r->n_sized; k++) cu->cuGraphExecDestroy(r->sized[k].exec);
    r->n_sized = 0;
    r->exec = NULL;
}

/* The bytes a leaf (input or weight) starts with: env's values if set,
 * else the weight's data, else seeded like the interpreter (inputs with
 * env's seed, weights with seed 0). */
static void *leaf_bytes(const mcir_tensor *t, mcir_env *env, int rank) {
    void *out = malloc((size_t)mcir_tensor_bytes(t) + 1);
    MCIR_ASSERT(out != NULL);
    if (mcir_env_get_raw(env, t, out)) return out;   /* exact, integers too */
    if (t->kind == MCIR_TENSOR_WEIGHT && t->data) {   /* a sharded weight's data is the whole: its part */
        mcir_tensor_take_part(t, t->data, mcir_dtype_size(t->dtype), rank, out);
        return out;
    }
    float *tmp = malloc((size_t)mcir_tensor_numel(t) * sizeof(float) + 1);
    MCIR_ASSERT(tmp != NULL);
    mcir_fill_seeded_part(t, t->kind == MCIR_TENSOR_INPUT ? mcir_env_seed(env) : 0, rank, tmp);
    mcir_values_from_f32(t->dtype, tmp, out, mcir_tensor_numel(t));
    free(tmp);
    return out;
}

/* Where the memory plan put t (by its buffer; aliases share their root's). */
static bool arena_locate(const mcir_memplan *m, const mcir_tensor *t, int *pool, int64_t *off) {
    if (!m || !m->buffer_of) return false;
    int b = m->buffer_of[t->id];
    if (b < 0 || b >= m->n_buffers || m->buffers[b].pool < 0 || m->buffers[b].pool >= m->n_pools) return false;
    *pool = m->buffers[b].pool;
    *off = m->buffers[b].offset;
    return true;
}

/* The arena bytes the memory plan gave kernel i's scratch (split-KV partials). */
static bool scratch_locate(const mcir_memplan *m, int i, int *pool, int64_t *off) {
    for (int b = 0; m && b < m->n_buffers; b++)
        if (!m->buffers[b].tensor && m->buffers[b].first == i && m->buffers[b].pool >= 0 &&
            m->buffers[b].pool < m->n_pools) {
            *pool = m->buffers[b].pool;
            *off = m->buffers[b].offset;
            return true;
        }
    return false;
}

/* cuBLASLt has no algorithm for kernel i's GEMM: the generated kernel
 * runs it (said once, after the run). */
static void lt_fallback(gpu_run *r, int i, const char *why) {
    cg_cublaslt_release(&r->lt[i]);
    r->lt[i].status = MCIR_CUBLAS_STATUS_NOT_SUPPORTED;
    if (!r->lt_fallbacks++)
        snprintf(r->lt_note, sizeof r->lt_note, "%s: %s: the generated kernel runs it", r->cg->k[i].kp->name, why);
}

/* ----------------------------------------------------------------- open */

/* Kernel i's functions: one module per compile unit (identical layers
 * share it), the split-KV merge, the cuBLAS epilogue; cuBLAS and cuBLASLt
 * where a kernel can use them (the generated kernel where they do not load). */
static bool load_kernel(gpu_run *r, int i) {
    cg_kernel *k = &r->cg->k[i];
    size_t W = sizeof r->why;
    if (k->owner >= 0) {
        r->funcs[i] = r->funcs[k->owner];
    } else {
        CU_CHECK(cu->cuModuleLoadData(&r->mods[i], cu->emulated ? k->emu_bin.cubin : k->bin.cubin), r->why, W);
        CU_CHECK(cu->cuModuleGetFunction(&r->funcs[i], r->mods[i], k->entry), r->why, W);
    }
    if (k->merge_grid > 0 && k->owner >= 0) {
        r->merge_funcs[i] = r->merge_funcs[k->owner];
    } else if (k->merge_grid > 0) {
        char me[80];
        snprintf(me, sizeof me, "%s_merge", k->entry);
        CU_CHECK(cu->cuModuleGetFunction(&r->merge_funcs[i], r->mods[i], me), r->why, W);
    }
    if (k->owner < 0 && k->unit_smem > 0)   /* dynamic + static may pass the default 48 KB */
        CU_CHECK(cu->cuFuncSetAttribute(r->funcs[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        (int)k->unit_smem),
                 r->why, W);
    if (k->gemm.ok && !r->blas) {
        char bw[256];
        if (!cg_cublas_open(&r->blas, r->stream, bw, sizeof bw)) {
            r->blas = NULL;
            if (!getenv("MCIR_NO_CUBLAS") && !r->blas_note[0])
                snprintf(r->blas_note, sizeof r->blas_note,
                         "cuBLAS did not load (%s): the generated kernels run the GEMMs the plan gave it", bw);
        }
    }
    if (k->gemm.ok && k->gemm.lt && !r->blas_lt) {
        char bw[256];
        if (!cg_cublaslt_open(&r->blas_lt, bw, sizeof bw)) {   /* cuBLAS + epilogue */
            r->blas_lt = NULL;
            if (!getenv("MCIR_NO_CUBLAS") && !getenv("MCIR_NO_CUBLASLT") && !r->blas_note[0])
                snprintf(r->blas_note, sizeof r->blas_note,
                         "cuBLASLt did not load (%s): the GEMMs the plan gave it run %s", bw,
                         r->blas ? "on cuBLAS with a generated epilogue kernel" : "in the generated kernels");
        }
    }
    bool epi = k->epi_source && (cu->emulated ? k->epi_owner >= 0 || k->epi_emu_bin.cubin : k->epi_compiled);
    if (epi && k->epi_owner >= 0) {
        r->epi_funcs[i] = r->epi_funcs[k->epi_owner];
    } else if (epi) {
        CU_CHECK(cu->cuModuleLoadData(&r->epi_mods[i], cu->emulated ? k->epi_emu_bin.cubin : k->epi_bin.cubin),
                 r->why, W);
        CU_CHECK(cu->cuModuleGetFunction(&r->epi_funcs[i], r->epi_mods[i], k->epi_entry), r->why, W);
    }
    return true;
fail:
    return false;
}

/* The device's context and arch (the plan compiled for it), a stream and
 * its two timing events, every kernel loaded, and the staging and scratch
 * buffers sized for the largest kernel needing them. */
static bool run_open(gpu_run *r, mcir_diag *d) {
    mcir_codegen *cg = r->cg;
    size_t W = sizeof r->why;
    int nk = cg->n ? cg->n : 1;
    r->mods = calloc((size_t)nk, sizeof *r->mods);
    r->epi_mods = calloc((size_t)nk, sizeof *r->epi_mods);
    r->funcs = calloc((size_t)nk, sizeof *r->funcs);
    r->epi_funcs = calloc((size_t)nk, sizeof *r->epi_funcs);
    r->merge_funcs = calloc((size_t)nk, sizeof *r->merge_funcs);
    MCIR_ASSERT(r->mods && r->epi_mods && r->funcs && r->epi_funcs && r->merge_funcs);

    CU_CHECK(cu->cuDeviceGet(&r->dev, r->ordinal), r->why, W);
    CU_CHECK(cu->cuDevicePrimaryCtxRetain(&r->ctx, r->dev), r->why, W);
    CU_CHECK(cu->cuCtxSetCurrent(r->ctx), r->why, W);
    CU_CHECK(cu->cuDeviceGetName(r->device, sizeof r->device, r->dev), r->why, W);
    int major = 0, minor = 0;
    CU_CHECK(cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, r->dev), r->why, W);
    CU_CHECK(cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, r->dev), r->why, W);
    bool sm90a = false;
    for (int i = 0; i < cg->n; i++) sm90a |= cg->k[i].sm90a;
    const char *target = cg->plan->target ? cg->plan->target->name : NULL;
    if (!mcir_gpu_check_arch(target, major, minor, sm90a, r->device, r->why, W)) return false;
    int driver = 0;
    if (!cu->emulated && cu->cuDriverGetVersion(&driver) == CUDA_SUCCESS &&
        !mcir_gpu_check_versions(driver, mcir_nvrtc_version(), r->why, W))
        return false;
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d%d", major, minor);
    if (cu->emulated) snprintf(arch, sizeof arch, "%s", cu->emulated);   /* host modules for the emulator */
    bool compiled = cu->emulated ? cg->emu_ready : cg->arch[0] && strcmp(cg->arch, arch) == 0;
    for (int i = 0; i < cg->n && compiled && !cu->emulated; i++)
        if ((cg->k[i].source && !cg->k[i].compiled) || (cg->k[i].epi_source && !cg->k[i].epi_compiled))
            compiled = false;
    if (!compiled && !mcir_codegen_compile(cg, arch, d)) {
        snprintf(r->why, W, "kernels did not compile for the device (%s, %s)", r->device, arch);
        return false;
    }
    CU_CHECK(cu->cuStreamCreate(&r->stream, 0), r->why, W);
    CU_CHECK(cu->cuEventCreate(&r->ev0, 0), r->why, W);
    CU_CHECK(cu->cuEventCreate(&r->ev1, 0), r->why, W);
    /* an event per kernel and its watchdog deadline: a fixed one
     * (--watchdog, MCIR_GPU_WATCHDOG; 0: none), else 10 s + 100 times the
     * modelled time (a first launch loads its module; a slow GPU, a cold
     * cache, a busy device stay far below) */
    r->done = calloc((size_t)nk, sizeof *r->done);
    r->deadline = calloc((size_t)nk, sizeof *r->deadline);
    MCIR_ASSERT(r->done && r->deadline);
    double fixed = watchdog_seconds();
    for (int i = 0; i < cg->n; i++) {
        CU_CHECK(cu->cuEventCreate(&r->done[i], 0), r->why, W);
        mcir_kernel_cost c;
        if (fixed < 0 && cg->plan->target) mcir_cost_kernel(cg->k[i].kp, cg->plan->target, NULL, &c);
        r->deadline[i] = fixed >= 0 ? fixed : 10.0 + 100.0 * (cg->plan->target ? c.modelled_us : 0) * 1e-6;
    }

    int64_t scratch_bytes = 0, staging_bytes = 0;
    for (int i = 0; i < cg->n; i++) {
        const cg_kernel *k = &cg->k[i];
        if (!k->source) continue;
        if (!load_kernel(r, i)) return false;
        int sp;
        int64_t so;
        if (k->merge_grid > 0 && k->kp->scratch_bytes > scratch_bytes &&
            !(r->mode == MCIR_ALLOC_POOL && scratch_locate(r->m, i, &sp, &so)))
            scratch_bytes = k->kp->scratch_bytes;   /* one buffer for all: kernels run in order */
    }
    /* cuBLASLt: each call prepared once (descriptors, the algorithm for at
     * most the workspace offered: 32 MiB on Hopper, 4 MiB before, as
     * NVIDIA's cuBLAS guide advises); one workspace, the most any chosen
     * algorithm needs, counted with the run's device bytes */
    r->lt = calloc((size_t)nk, sizeof *r->lt);
    r->lt_at = calloc((size_t)nk, sizeof *r->lt_at);
    MCIR_ASSERT(r->lt && r->lt_at);
    size_t offer = (major >= 9 ? 32u : 4u) << 20;
    for (int i = 0; i < cg->n && r->blas_lt; i++) {
        const cg_gemm_desc *gd = &cg->k[i].gemm;
        if (!gd->ok || !gd->lt) continue;
        char lw[256];
        if (cg_cublaslt_prepare(r->blas_lt, gd, offer, r->device, &r->lt[i], lw, sizeof lw)) {
            r->lt_at[i] = *gd;
            if (r->lt[i].algo.workspace > r->workspace_bytes) r->workspace_bytes = r->lt[i].algo.workspace;
        } else if (r->lt[i].status == MCIR_CUBLAS_STATUS_NOT_SUPPORTED) {
            lt_fallback(r, i, lw);
        } else {
            snprintf(r->why, W, "kernel %s: %s", cg->k[i].kp->name, lw);
            return false;
        }
    }
    if (r->workspace_bytes > 0 &&
        !dev_alloc(r, "the cuBLASLt workspace", (int64_t)r->workspace_bytes, &r->workspace))
        return false;
    name_range(r->workspace, (int64_t)r->workspace_bytes, "cuBLASLt workspace");
    for (int i = 0; i < cg->n && r->blas; i++) {
        const cg_gemm_desc *gd = &cg->k[i].gemm;
        int64_t bytes = gd->batch * gd->m * gd->n * 4;
        if (gd->ok && gd->epilogue && !(gd->lt && r->blas_lt) && r->epi_funcs[i] && bytes > staging_bytes)
            staging_bytes = bytes;   /* cuBLASLt stages nothing */
    }
    if (scratch_bytes > 0 && !dev_alloc(r, "the split-KV scratch", scratch_bytes, &r->scratch))
        return false;
    if (staging_bytes > 0 && !dev_alloc(r, "the matmul staging buffer", staging_bytes, &r->staging))
        return false;
    name_range(r->scratch, scratch_bytes, "split-KV scratch");
    name_range(r->staging, staging_bytes, "matmul staging product");
    bool sched = false;
    for (int i = 0; i < cg->n; i++) sched |= cg->k[i].source && cg->k[i].sched;
    if (sched) {   /* the counters start at zero; the kernels keep them so */
        int64_t bytes = (int64_t)cg->n * MCIR_SCHED_BYTES;
        if (!dev_alloc(r, "the dynamic schedulers' counters", bytes, &r->sched)) return false;
        CU_CHECK(cu->cuMemsetD32Async(r->sched, 0, (size_t)bytes / 4, r->stream), r->why, W);
        name_range(r->sched, bytes, "scheduler counters");
    }
    return true;
fail:
    return false;
}

/* ---------------------------------------------------------------- place */

/* Tensor t's bytes (an input's from env or seeded, a weight's data)
 * copied into its device buffer. */
static bool upload(gpu_run *r, int t, mcir_env *env) {
    const mcir_tensor *tt = r->g->tensors[t];
    void *h = leaf_bytes(tt, env, r->rank);
    int rc = cu->cuMemcpyHtoD_v2(r->ptr[t], h, (size_t)mcir_tensor_bytes(tt));
    free(h);
    CU_CHECK(rc, r->why, sizeof r->why);
    return true;
fail:
    return false;
}

/* Device bytes for every tensor a kernel touches: the arena pools
 * (POOL: intermediates at the memory plan's offsets), one allocation per
 * weight (and per intermediate, EAGER); LAZY leaves intermediates to
 * launch. Weights are uploaded; graph inputs and outputs are placed by
 * each step (step_place). */
static bool run_place(gpu_run *r, mcir_env *env) {
    int nt = r->g->n_tensors;
    r->ptr = calloc((size_t)(nt ? nt : 1), sizeof *r->ptr);
    r->owned = calloc((size_t)(nt ? nt : 1), sizeof *r->owned);
    r->bytes = calloc((size_t)(nt ? nt : 1), sizeof *r->bytes);
    r->pools = calloc((size_t)(r->m && r->m->n_pools ? r->m->n_pools : 1), sizeof *r->pools);
    MCIR_ASSERT(r->ptr && r->owned && r->bytes && r->pools);
    if (r->mode == MCIR_ALLOC_POOL)
        for (int pl = 0; pl < r->m->n_pools; pl++) {
            if (!dev_alloc(r, "'arena'", r->m->pool_bytes[pl] > 0 ? r->m->pool_bytes[pl] : 1,
                           &r->pools[r->n_pools]))
                return false;
            r->n_pools++;
        }
    for (int t = 0; t < nt; t++) {
        const mcir_tensor *tt = r->g->tensors[t];
        if (!needs_bytes(r, tt)) continue;
        int pool;
        int64_t off;
        if (r->mode == MCIR_ALLOC_POOL && !is_graph_tensor(tt) && arena_locate(r->m, tt, &pool, &off)) {
            r->ptr[t] = r->pools[pool] + (CUdeviceptr)off;
            name_range(r->ptr[t], mcir_tensor_bytes(tt), tt->name);
            continue;
        }
        if (r->mode == MCIR_ALLOC_LAZY && !is_graph_tensor(tt)) continue;   /* at first use */
        if (is_step_tensor(tt)) continue;                                   /* each step's */
        if (!tensor_alloc(r, tt, tensor_bytes_max(r->g, tt))) return false;
        if ((tt->kind == MCIR_TENSOR_INPUT || tt->kind == MCIR_TENSOR_WEIGHT) && !upload(r, t, env)) return false;
    }
    return true;
}

/* A step's graph inputs and outputs: the caller's bound bytes in place,
 * or ours (allocated at the first step that needs them, kept for the
 * next); inputs uploaded from env, or copied on the device from a bound
 * address that is not used in place. With graphs every one is ours: the
 * captured launches read and write the same addresses at every replay,
 * whatever the caller binds. */
static bool step_place(gpu_run *r, mcir_env *env, const uint64_t *bound) {
    r->bound = bound;
    for (int t = 0; t < r->g->n_tensors; t++) {
        const mcir_tensor *tt = r->g->tensors[t];
        if (!is_step_tensor(tt) || !needs_bytes(r, tt)) continue;
        uint64_t b = bound ? bound[t] : 0;
        /* the caller's bytes off the 16-byte grid (a torch view with an
         * offset): the kernels read and write their arguments with 16-byte
         * vectors the plan proved aligned for buffers of ours
         * (kernelplan/launch.c, norms), so the bytes go through one of
         * ours: an input copied in here, an output copied back by
         * run_copy_back (ptr != bound) */
        if (b && b % 16 == 0 && !r->graphs) {
            r->ptr[t] = (CUdeviceptr)b;   /* the caller's: read or written in place */
            continue;
        }
        /* a graph with dims: a step at larger sizes than the buffer's
         * (with graphs, buffers are sized for the largest sizes at once,
         * so that every size's graph reads and writes the same bytes) */
        if (r->owned[t] && r->bytes[t] < mcir_tensor_bytes(tt)) {
            tensor_free(r, tt);
            graphs_drop(r);
        }
        if (!r->owned[t] && !tensor_alloc(r, tt, r->graphs ? tensor_bytes_max(r->g, tt) : mcir_tensor_bytes(tt)))
            return false;
        r->ptr[t] = r->owned[t];
        if (tt->kind != MCIR_TENSOR_INPUT) continue;
        if (b) {
            CU_CHECK(cu->cuMemcpyDtoDAsync_v2(r->ptr[t], (CUdeviceptr)b, (size_t)mcir_tensor_bytes(tt), r->stream),
                     r->why, sizeof r->why);
            continue;
        }
        if (cg_runtime_mutant == CG_MUTANT_REPLAY_SKIPS_INPUTS && r->exec) continue;
        /* a state after its first step: the plan wrote the output over the
         * input's bytes (its alias), or the output has bytes of its own
         * that become the input's here, on the device */
        const mcir_tensor *so = r->state_loaded ? state_output(r, tt) : NULL;
        if (so && root_of(r, so) == tt) continue;
        if (so && r->ptr[root_of(r, so)->id]) {
            CU_CHECK(cu->cuMemcpyDtoDAsync_v2(r->ptr[t], r->ptr[root_of(r, so)->id], (size_t)mcir_tensor_bytes(tt),
                                              r->stream),
                     r->why, sizeof r->why);
            continue;
        }
        if (!upload(r, t, env)) return false;
    }
    return true;
fail:
    return false;
}

/* --------------------------------------------------------------- launch */

static bool launch_grid(gpu_run *r, CUfunction f, const cg_kernel *k, void **params) {
    CU_CHECK(cu->cuLaunchKernel(f, (unsigned)k->grid[0], (unsigned)k->grid[1], (unsigned)k->grid[2],
                                (unsigned)k->block[0], (unsigned)k->block[1], (unsigned)k->block[2],
                                (unsigned)k->smem, r->stream, params, NULL),
             r->why, sizeof r->why);
    return true;
fail:
    return false;
}

/* Whether a prepared cuBLASLt call (for a) serves GEMM b: the same sizes
 * and strides. */
static bool same_gemm(const cg_gemm_desc *a, const cg_gemm_desc *b) {
    return a->m == b->m && a->n == b->n && a->k == b->k && a->batch == b->batch && a->lda == b->lda &&
           a->ldb == b->ldb && a->ldc == b->ldc && a->stride_a == b->stride_a && a->stride_b == b->stride_b &&
           a->stride_c == b->stride_c;
}

/* Kernel i with its reads then its writes as arguments: cuBLASLt (matmul
 * and epilogue in one call), cuBLAS (+ the epilogue kernel over the f32
 * staging product), split-KV attention (+ its scratch, then the merge),
 * or the generated kernel. */
static bool launch_kernel(gpu_run *r, int i) {
    const cg_kernel *k = &r->cg->k[i];
    const mcir_kernel_plan *kp = k->kp;
    const cg_gemm_desc *gd = &k->gemm;
    size_t W = sizeof r->why;
    int np = kp->n_reads + kp->n_writes, nd = r->cg->n_dims;
    CUdeviceptr args[np + 1];   /* + the staging product or the scratch */
    /* the parameters: pointers, the dims' values (size-generic kernels),
     * + the staging product or the scratch (+ tensor maps) */
    void *params[np + nd + 2], *kparams[np + nd + 2 + 5];
    long long dims[MCIR_MAX_DIMS + 1];
    _Alignas(64) unsigned char maps[5][128];
    for (int j = 0; j < kp->n_reads; j++) args[j] = r->ptr[root_of(r, kp->reads[j])->id];
    for (int j = 0; j < kp->n_writes; j++) args[kp->n_reads + j] = r->ptr[root_of(r, kp->writes[j])->id];
    for (int j = 0; j < np && cu->emu_name; j++) {   /* where arena bytes are shared, this kernel's tensors */
        const mcir_tensor *t = root_of(r, j < kp->n_reads ? kp->reads[j] : kp->writes[j - kp->n_reads]);
        name_range(args[j], mcir_tensor_bytes(t), t->name);
    }
    for (int j = 0; j < np; j++) params[j] = &args[j];
    for (int j = 0; j < nd; j++) {
        dims[j] = (long long)r->cg->plan->graph->dims[j].value;
        params[np + j] = &dims[j];
    }
    params[np + nd] = &args[np];
    bool lt = r->blas_lt && gd->ok && gd->lt;   /* cuBLASLt's, or (no algorithm) the generated kernel's */
    if (lt && r->lt[i].ready && !same_gemm(&r->lt_at[i], gd)) {
        /* a graph with dims at other sizes (mcir_codegen_rebind): the call
         * prepared again, within the workspace the session has */
        char lw[256];
        cg_cublaslt_release(&r->lt[i]);
        if (cg_cublaslt_prepare(r->blas_lt, gd, r->workspace_bytes, r->device, &r->lt[i], lw, sizeof lw)) {
            r->lt_at[i] = *gd;
        } else if (r->lt[i].status == MCIR_CUBLAS_STATUS_NOT_SUPPORTED) {
            lt_fallback(r, i, lw);
        } else {
            snprintf(r->why, W, "kernel %s: %s", kp->name, lw);
            return false;
        }
    }
    if (lt && r->lt[i].ready) {
        char lw[256];
        if (cg_cublaslt_run(r->blas_lt, r->stream, &r->lt[i], gd, args[gd->read_a], args[gd->read_b],
                            gd->read_bias >= 0 ? args[gd->read_bias] : 0,
                            gd->read_residual >= 0 ? args[gd->read_residual] : 0, args[kp->n_reads + gd->write_d],
                            r->workspace, r->workspace_bytes, lw, sizeof lw))
            return true;
        if (r->lt[i].status != MCIR_CUBLAS_STATUS_NOT_SUPPORTED) {
            snprintf(r->why, W, "%s", lw);
            return false;
        }
        lt_fallback(r, i, lw);
    }
    if (!lt && r->blas && gd->ok && (!gd->epilogue || (r->epi_funcs[i] && r->staging))) {
        CUdeviceptr c = gd->epilogue ? r->staging : args[kp->n_reads + gd->write_c];
        if (!cg_cublas_gemm(r->blas, gd, args[gd->read_a], args[gd->read_b], c, r->why, W)) return false;
        if (!gd->epilogue) return true;
        args[np] = r->staging;
        CU_CHECK(cu->cuLaunchKernel(r->epi_funcs[i], (unsigned)k->epi_grid, 1, 1, 256, 1, 1, 0,
                                    r->stream, params, NULL),
                 r->why, W);
        return true;
    }
    int nk = np;   /* the kernel's parameters: pointers (+ the scratch) (+ tensor maps) */
    if (k->merge_grid > 0) {
        int sp;
        int64_t so;
        args[np] = r->scratch;
        if (r->mode == MCIR_ALLOC_POOL && scratch_locate(r->m, i, &sp, &so) && sp < r->n_pools)
            args[np] = r->pools[sp] + (CUdeviceptr)so;
        if (!args[np]) {
            snprintf(r->why, W, "kernel %s: split-KV attention has no scratch buffer", kp->name);
            return false;
        }
        name_range(args[np], kp->scratch_bytes, "split-KV scratch");
        nk = np + 1;
    }
    CUdeviceptr sched = r->sched + (CUdeviceptr)i * MCIR_SCHED_BYTES;
    if (k->sched) {   /* a dynamic scheduler: its counters */
        if (!r->sched) {
            snprintf(r->why, W, "kernel %s: a dynamic scheduler has no counters", kp->name);
            return false;
        }
        params[nd + nk] = &sched;   /* after the dims and the scratch */
        nk++;
    }
    kparams[0] = &args[0];
    for (int j = 0; j < nk + nd; j++) kparams[j] = params[j];
    if (k->n_tmaps > 0) {   /* sm_90a attention: + its TMA tensor maps, by value */
        if (k->n_tmaps > 5 || !cg_tensor_maps_encode(cu, k, args, maps, r->why, W)) return false;
        for (int j = 0; j < k->n_tmaps; j++) kparams[nk + nd + j] = maps[j];
    }
    if (!launch_grid(r, r->funcs[i], k, kparams)) return false;   /* no parameters: kparams[0] is unread */
    if (k->merge_grid > 0)   /* the merge takes the pointers and the scratch */
        CU_CHECK(cu->cuLaunchKernel(r->merge_funcs[i], (unsigned)k->merge_grid, 1, 1,
                                    (unsigned)k->merge_block, 1, 1, 0, r->stream, params, NULL),
                 r->why, W);
    return true;
fail:
    return false;
}

/* LAZY: kernel i's intermediates that start here get their bytes first. */
static bool lazy_alloc(gpu_run *r, int i) {
    const mcir_kernel_plan *kp = r->cg->k[i].kp;
    for (int j = 0; j < kp->n_reads + kp->n_writes; j++) {
        const mcir_tensor *t = root_of(r, j < kp->n_reads ? kp->reads[j] : kp->writes[j - kp->n_reads]);
        if (!is_graph_tensor(t) && !r->ptr[t->id] && !tensor_alloc(r, t, mcir_tensor_bytes(t))) return false;
    }
    return true;
}

/* LAZY: kernel i's intermediates that die here (the plan's last use) are
 * freed once the stream has finished with them. */
static bool lazy_free(gpu_run *r, int i) {
    const mcir_kernel_plan *kp = r->cg->k[i].kp;
    bool synced = false;
    for (int j = 0; j < kp->n_reads + kp->n_writes; j++) {
        const mcir_tensor *t = root_of(r, j < kp->n_reads ? kp->reads[j] : kp->writes[j - kp->n_reads]);
        if (is_graph_tensor(t) || !r->owned[t->id] || r->p->last_use[t->id] != i) continue;
        if (!synced && !wait_for(r, i)) return false;
        synced = true;
        tensor_free(r, t);
    }
    return true;
}

/* The plan's kernels in order on the stream, timed by two events (on the
 * emulator, a progress line per kernel where stderr is a terminal). */
/* A collective of a graph with one rank: the identity, a copy on the
 * stream (its input and output have one shape). */
static bool collective_one_rank(gpu_run *r, int i) {
    const mcir_kernel_plan *kp = r->cg->k[i].kp;
    MCIR_ASSERT(kp->n_reads >= 1 && kp->n_writes == 1);
    const mcir_tensor *in = root_of(r, kp->anchor->inputs[0]), *out = root_of(r, kp->writes[0]);
    CU_CHECK(cu->cuMemcpyDtoDAsync_v2(r->ptr[out->id], r->ptr[in->id], (size_t)mcir_tensor_bytes(kp->writes[0]),
                                      r->stream), r->why, sizeof r->why);
    return true;
fail:
    return false;
}

/* Kernel i on the stream (a one-rank collective: its copy), its event
 * recorded; LAZY's allocations before and frees after. */
/* [p, p + n) and root tensor t's bytes share one. */
static bool touches(const gpu_run *r, const mcir_tensor *t, CUdeviceptr p, int64_t n) {
    const mcir_tensor *x = root_of(r, t);
    CUdeviceptr q = r->ptr[x->id];
    int64_t m = tensor_bytes_max(r->g, x);
    return q && p && n > 0 && m > 0 && q < p + (CUdeviceptr)n && p < q + (CUdeviceptr)m;
}

/* Kernel i (on `stream`) after the pending collectives whose buffers it
 * touches: it reads what they write, or writes what they read or write
 * (cuStreamWaitEvent on their event). all: every pending one (the end of
 * the step). */
static bool join_pending(gpu_run *r, int i, bool all) {
    int k = 0;
    for (int q = 0; q < r->n_pending; q++) {
        int c = r->pending[q];
        const mcir_node *n = r->cg->k[c].kp->anchor;
        const mcir_tensor *x = root_of(r, n->inputs[0]), *y = root_of(r, n->outputs[0]);
        CUdeviceptr xs = r->ptr[x->id], ys = r->ptr[y->id];
        int64_t xb = tensor_bytes_max(r->g, x), yb = tensor_bytes_max(r->g, y);
        bool meet = all;
        const mcir_kernel_plan *kp = all ? NULL : r->cg->k[i].kp;
        for (int j = 0; kp && !meet && j < kp->n_reads; j++) meet = touches(r, kp->reads[j], ys, yb);
        for (int j = 0; kp && !meet && j < kp->n_writes; j++)
            meet = touches(r, kp->writes[j], ys, yb) || touches(r, kp->writes[j], xs, xb);
        if (meet && !all && cg_runtime_mutant == CG_MUTANT_COLLECTIVE_NO_JOIN) meet = false;
        if (!meet) {
            r->pending[k++] = c;
            continue;
        }
        int rc = cu->cuStreamWaitEvent(r->stream, r->done[c], 0);
        if (rc != CUDA_SUCCESS) {
            snprintf(r->why, sizeof r->why, "cuStreamWaitEvent for %s: %s", r->cg->k[c].kp->name, mcir_cu_error(rc));
            r->failed = i;
            return false;
        }
    }
    r->n_pending = k;
    if (k && !all) r->overlapped++;
    return true;
}

static bool launch_one(gpu_run *r, int i) {
    if (r->n_pending && !join_pending(r, i, false)) return false;
    r->last_compute = i;
    bool ok = !(r->mode == MCIR_ALLOC_LAZY && !lazy_alloc(r, i));
    if (ok && r->cg->k[i].kp->tpl == MCIR_TEMPLATE_COLLECTIVE && !collective_one_rank(r, i)) {
        r->failed = i;
        ok = false;
    }
    if (ok && r->cg->k[i].source && !launch_kernel(r, i)) {
        r->failed = i;
        ok = false;
        /* refused because an earlier launch faulted (the context's
         * sticky error; or this kernel's own first launch, the merge
         * or epilogue refused): a fault among those on the stream */
        int rc = cu->cuEventQuery(r->ev0);
        if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_NOT_READY) {
            r->fault = rc;
            r->failed = -1;
            r->launched = i;
        }
    }
    if (ok) {
        r->launched = i;
        int rc = cu->cuEventRecord(r->done[i], r->stream);
        if (rc != CUDA_SUCCESS) r->fault = rc;   /* an asynchronous error of a kernel on the stream */
        ok = rc == CUDA_SUCCESS && !(r->sync && !wait_for(r, i));
    }
    return ok && !(r->mode == MCIR_ALLOC_LAZY && !lazy_free(r, i));
}

static bool run_launch(gpu_run *r) {
    size_t W = sizeof r->why;
    CU_CHECK(cu->cuEventRecord(r->ev0, r->stream), r->why, W);
    double t0 = now_s();
    mcir_progress *pr = cu->emulated ? mcir_progress_begin("emu", "kernels", r->cg->n) : NULL;
    for (int i = 0; i < r->cg->n; i++) {
        if (pr) mcir_progress_set(pr, i, " (%s)", r->cg->k[i].kp->name);
        if (!launch_one(r, i)) {
            mcir_progress_end(pr);
            return false;
        }
    }
    mcir_progress_end(pr);
    r->host_us = (now_s() - t0) * 1e6;
    CU_CHECK(cu->cuEventRecord(r->ev1, r->stream), r->why, W);
    if (!wait_for(r, r->cg->n - 1)) return false;
    CU_CHECK(cu->cuEventSynchronize(r->ev1), r->why, W);
    CU_CHECK(cu->cuEventElapsedTime(&r->ms, r->ev0, r->ev1), r->why, W);
    return true;
fail:
    return false;
}

/* Graphs: the plan's launches (launch_kernel, as run_launch issues them,
 * without the per-kernel events and waits, which a capture cannot hold)
 * issued on the capturing stream; false with the kernel that failed. */
static bool capture_launches(gpu_run *r) {
    for (int i = 0; i < r->cg->n; i++) {
        if ((r->cg->k[i].kp->tpl == MCIR_TEMPLATE_COLLECTIVE && !collective_one_rank(r, i)) ||
            (r->cg->k[i].source && !launch_kernel(r, i))) {
            r->failed = i;
            return false;
        }
        if (i == 0 && cg_runtime_mutant == CG_MUTANT_WAIT_WHILE_CAPTURING)   /* as LAZY's free or --sync would */
            CU_CHECK(cu->cuStreamSynchronize(r->stream), r->why, sizeof r->why);
    }
    return true;
fail:
    return false;
}

/* The launches captured from the stream into a CUDA graph and
 * instantiated, once. The capture is ended on every path, so the stream
 * is usable (and the session closable); r->capturing stays set on a
 * failure, for its message. */
static bool graph_capture(gpu_run *r) {
    size_t W = sizeof r->why;
    CU_CHECK(cu->cuStreamBeginCapture_v2(r->stream, CU_STREAM_CAPTURE_MODE_GLOBAL), r->why, W);
    r->capturing = true;
    bool ok = capture_launches(r);
    CUgraph graph = NULL;
    int rc = cu->cuStreamEndCapture(r->stream, &graph);
    if (ok && rc != CUDA_SUCCESS) {
        snprintf(r->why, W, "cuStreamEndCapture: %s (a call in the launch sequence cannot be captured)",
                 mcir_cu_error(rc));
        ok = false;
    }
    if (ok) {
        rc = cu->cuGraphInstantiateWithFlags(&r->exec, graph, 0);
        if (rc != CUDA_SUCCESS) {
            snprintf(r->why, W, "cuGraphInstantiate: %s", mcir_cu_error(rc));
            r->exec = NULL;
            ok = false;
        }
    }
    if (graph) cu->cuGraphDestroy(graph);   /* the instantiated copy is what replays */
    if (ok) r->capturing = false;
    return ok;
fail:
    return false;
}

/* Whether graph k was captured at the graph's current sizes. */
static bool graph_at_sizes(const gpu_run *r, int k) {
    for (int j = 0; j < r->g->n_dims; j++)
        if (r->sized[k].dims[j] != r->g->dims[j].value) return false;
    return true;
}

/* r->exec: the graph captured at this step's sizes, now the most recently
 * used, or NULL where there is none yet. */
static void graph_select(gpu_run *r) {
    r->tick++;
    r->exec = NULL;
    for (int k = 0; k < r->n_sized && !r->exec; k++)
        if (graph_at_sizes(r, k)) {
            r->sized[k].used = r->tick;
            r->exec = r->sized[k].exec;
        }
}

/* r->exec, just captured, kept for this step's sizes: in a free slot, or
 * in the place of the least recently replayed graph, which is destroyed
 * (a later step at its sizes captures again). */
static void graph_keep(gpu_run *r) {
    int slot = r->n_sized;
    if (slot == GRAPH_SIZES) {
        slot = 0;
        for (int k = 1; k < GRAPH_SIZES; k++)
            if (r->sized[k].used < r->sized[slot].used) slot = k;
        cu->cuGraphExecDestroy(r->sized[slot].exec);
        r->sized_evicted++;
    } else {
        r->n_sized++;
    }
    for (int j = 0; j < r->g->n_dims; j++) r->sized[slot].dims[j] = r->g->dims[j].value;
    r->sized[slot].exec = r->exec;
    r->sized[slot].used = r->tick;
}

/* One replay of the captured graph, timed like run_launch (two events,
 * the host time to issue it), then waited for within the sum of the
 * kernels' watchdog deadlines. The first step warms up before it
 * captures: the launches run once as without graphs (what a library
 * allocates on its first call is allocated outside the capture, and a
 * fault there names its kernel), then are captured, then replayed. */
static bool graph_launch(gpu_run *r) {
    size_t W = sizeof r->why;
    graph_select(r);
    if (!r->exec) {   /* sizes without a graph: warm-up, capture */
        if (r->n_sized > 0 || r->sized_evicted > 0) r->recaptures++;
        double t0 = now_s();
        if (!run_launch(r) || !graph_capture(r)) return false;
        graph_keep(r);
        r->capture_us = (now_s() - t0) * 1e6;
        r->failed = r->completed = r->launched = -1;
    }
    CU_CHECK(cu->cuEventRecord(r->ev0, r->stream), r->why, W);
    double t0 = now_s();
    int rc = cu->cuGraphLaunch(r->exec, r->stream);
    r->host_us = (now_s() - t0) * 1e6;
    r->launched = r->cg->n - 1;
    if (rc != CUDA_SUCCESS) {
        r->fault = rc;
        return false;
    }
    CU_CHECK(cu->cuEventRecord(r->ev1, r->stream), r->why, W);
    double limit = 0, start = device_now_s();   /* the sum of its kernels' deadlines; 0: one has none */
    for (int i = 0; i < r->cg->n; i++) {
        if (!r->cg->k[i].source) continue;
        if (r->deadline[i] <= 0) {
            limit = 0;
            break;
        }
        limit += r->deadline[i];
    }
    useconds_t nap = 20;
    for (;;) {
        rc = cu->cuEventQuery(r->ev1);
        if (rc == CUDA_SUCCESS) break;
        if (rc != CUDA_ERROR_NOT_READY) {
            r->fault = rc;
            return false;
        }
        if (limit > 0 && device_now_s() - start > limit) {
            r->hung = true;
            snprintf(r->why, W, "still running after %.1f s (the watchdog's deadline: %.1f s, the sum of its kernels')",
                     device_now_s() - start, limit);
            return false;
        }
        device_nap(nap);
        if (nap < 2000) nap *= 2;
    }
    r->completed = r->cg->n - 1;
    CU_CHECK(cu->cuEventElapsedTime(&r->ms, r->ev0, r->ev1), r->why, W);
    return true;
fail:
    return false;
}

/* ------------------------------------------------------------ copy back */

static bool run_copy_back(gpu_run *r, mcir_env *env) {
    for (int j = 0; j < r->g->n_outputs; j++) {
        const mcir_tensor *t = r->g->outputs[j];
        CUdeviceptr src = r->ptr[root_of(r, t)->id];
        if (!src) {
            snprintf(r->why, sizeof r->why, "output '%s' was never placed on the device", t->name);
            return false;
        }
        if (r->keep_state && t->state_input && !(r->bound && r->bound[t->id])) continue;   /* stays on the device */
        if (r->bound && r->bound[t->id]) {
            /* the caller's buffer: written in place, or (a view of another
             * tensor) copied into it on the device */
            if (src != (CUdeviceptr)r->bound[t->id]) {
                CU_CHECK(cu->cuMemcpyDtoDAsync_v2((CUdeviceptr)r->bound[t->id], src,
                                                  (size_t)mcir_tensor_bytes(t), r->stream),
                         r->why, sizeof r->why);
                CU_CHECK(cu->cuStreamSynchronize(r->stream), r->why, sizeof r->why);
            }
            continue;
        }
        void *h = malloc((size_t)mcir_tensor_bytes(t));
        MCIR_ASSERT(h != NULL);
        int rc = cu->cuMemcpyDtoH_v2(h, src, (size_t)mcir_tensor_bytes(t));
        if (rc == CUDA_SUCCESS) mcir_env_set_raw(env, t, h);
        free(h);
        CU_CHECK(rc, r->why, sizeof r->why);
    }
    return true;
fail:
    return false;
}

/* ---------------------------------------------------------------- close */

/* The run's driver resources: waits for the stream (wait), frees, unloads. */
static void release_device(gpu_run *r, bool wait) {
    if (r->stream && wait) cu->cuStreamSynchronize(r->stream);
    graphs_drop(r);   /* before what their calls name (handles, plans) */
    cg_cublas_close(r->blas);
    cg_cublaslt_close(r->blas_lt);
    for (int t = 0; r->owned && t < r->g->n_tensors; t++)
        if (r->owned[t]) tensor_free(r, r->g->tensors[t]);
    for (int pl = 0; pl < r->n_pools; pl++) cu->cuMemFree_v2(r->pools[pl]);
    for (int i = 0; r->mods && i < r->cg->n; i++) {
        if (r->mods[i]) cu->cuModuleUnload(r->mods[i]);
        if (r->epi_mods[i]) cu->cuModuleUnload(r->epi_mods[i]);
    }
    if (r->staging) cu->cuMemFree_v2(r->staging);
    if (r->scratch) cu->cuMemFree_v2(r->scratch);
    if (r->sched) cu->cuMemFree_v2(r->sched);
    if (r->workspace) cu->cuMemFree_v2(r->workspace);
    for (int i = 0; r->lt && i < r->cg->n; i++) cg_cublaslt_release(&r->lt[i]);
    if (r->ev0) cu->cuEventDestroy_v2(r->ev0);
    if (r->ev1) cu->cuEventDestroy_v2(r->ev1);
    for (int i = 0; r->done && i < r->cg->n; i++)
        if (r->done[i]) cu->cuEventDestroy_v2(r->done[i]);
    if (r->comm && wait) cu->cuStreamSynchronize(r->comm);
    if (r->comm) cu->cuStreamDestroy_v2(r->comm);
    free(r->pending);
    if (r->stream) cu->cuStreamDestroy_v2(r->stream);
    if (r->ctx) cu->cuDevicePrimaryCtxRelease_v2(r->dev);
}

/* Releases whatever open and place got, in reverse, on every path. */
static void run_close(gpu_run *r) {
    /* after a hang, any driver call may wait for the kernel forever: the
     * device's resources are left to the process's exit (the emulated
     * device never blocks: it releases them, without the wait) */
    if (!r->hung || cu->emulated) release_device(r, !r->hung);
    free(r->done);
    free(r->deadline);
    free(r->lt);
    free(r->lt_at);
    free(r->mods);
    free(r->epi_mods);
    free(r->funcs);
    free(r->epi_funcs);
    free(r->merge_funcs);
    free(r->ptr);
    free(r->owned);
    free(r->bytes);
    free(r->pools);
}

/* A failed launch on the emulator: its findings, each one diagnostic
 * "KERNEL: error: KIND: WHAT"; false where there are none to report. */
static bool report_findings(const gpu_run *r, mcir_diag *d) {
    const char *f = cu->emu_findings ? cu->emu_findings() : NULL;
    if ((r->failed < 0 && !r->exec) || !f || !*f) return false;
    /* a replay's failure: the kernel is in the graph (rerun without graphs to name it) */
    const char *kernel = r->failed >= 0 ? r->cg->k[r->failed].kp->name : "graph replay";
    for (const char *line = f; *line;) {
        const char *end = strchr(line, '\n');
        int len = end ? (int)(end - line) : (int)strlen(line);
        if (len > 0)
            mcir_error(d, (mcir_loc){.path = kernel}, "%.*s%s", len, line,
                       r->capturing ? " (while capturing the CUDA graph)" : "");
        line += len + (end ? 1 : 0);
    }
    return true;
}

/* Kernel i's launch, for messages: "grid 128, block 256, 49152 bytes of
 * dynamic shared memory". */
static const char *launch_text(const gpu_run *r, int i, char *buf, size_t n) {
    const cg_kernel *k = &r->cg->k[i];
    snprintf(buf, n, "grid %lld, block %d, %lld bytes of dynamic shared memory", (long long)k->grid[0],
             k->block[0], (long long)k->smem);
    return buf;
}

/* Why the run failed, naming the kernel where it is known: the
 * emulator's findings; a hang (the watchdog); an asynchronous fault (in
 * synchronous mode the kernel it came from, else the kernels it may have
 * come from); a launch that failed; anything else. */
static void report_failure(const gpu_run *r, mcir_diag *d) {
    if (report_findings(r, d)) return;
    const mcir_loc graph = {.path = r->g->path};
    char lt[160];
    if (r->hung && r->failed < 0) {
        mcir_error(d, graph, "hang: the CUDA graph's replay is %s; the run is abandoned: rerun without graphs "
                   "(no --graphs, MCIR_GPU_GRAPHS=0) to name the kernel", r->why);
        return;
    }
    if (r->hung) {
        const mcir_loc at = {.path = r->cg->k[r->failed].kp->name};
        double fixed = watchdog_seconds();
        mcir_error(d, at, "hang: %s (the watchdog's deadline: %.1f s, %s; %s); the run is abandoned", r->why,
                   r->deadline[r->failed],
                   fixed >= 0 ? "set by --watchdog or MCIR_GPU_WATCHDOG"
                              : "10 s + 100 x its modelled time; --watchdog S or MCIR_GPU_WATCHDOG=S sets it, 0 waits "
                                "forever",
                   launch_text(r, r->failed, lt, sizeof lt));
        return;
    }
    if (r->fault && r->exec) {
        mcir_error(d, graph, "GPU fault in the CUDA graph's replay: %s; rerun without graphs (no --graphs, "
                   "MCIR_GPU_GRAPHS=0) and with --sync (MCIR_GPU_SYNC=1) to name the kernel", mcir_cu_error(r->fault));
        return;
    }
    if (r->fault) {
        int first = r->completed + 1, last = r->launched >= first ? r->launched : first;
        if (first >= r->cg->n) first = last = r->cg->n - 1;
        if (r->sync) {
            mcir_error(d, (mcir_loc){.path = r->cg->k[first].kp->name}, "GPU fault: %s (%s; synchronous mode)",
                       mcir_cu_error(r->fault), launch_text(r, first, lt, sizeof lt));
            return;
        }
        char from[300];
        if (first == last) snprintf(from, sizeof from, "kernel %s", r->cg->k[first].kp->name);
        else snprintf(from, sizeof from, "one of the %d kernels from %s to %s", last - first + 1,
                      r->cg->k[first].kp->name, r->cg->k[last].kp->name);
        char done[200] = "no kernel had completed";
        if (r->completed >= 0) snprintf(done, sizeof done, "kernels up to %s completed", r->cg->k[r->completed].kp->name);
        mcir_error(d, graph, "GPU fault: %s, reported asynchronously: %s, so it is in %s; rerun with --sync "
                   "(or MCIR_GPU_SYNC=1) to name the kernel", mcir_cu_error(r->fault), done, from);
        return;
    }
    if (r->failed >= 0) {
        mcir_error(d, (mcir_loc){.path = r->cg->k[r->failed].kp->name}, "launch failed%s: %s (%s)",
                   r->capturing ? " while capturing the CUDA graph" : "", r->why,
                   launch_text(r, r->failed, lt, sizeof lt));
        return;
    }
    mcir_error(d, graph, "%s run failed%s: %s", cu->emulated ? "emulated" : "GPU",
               r->capturing ? " while capturing the CUDA graph" : "", r->why);
}

/* ------------------------------------------------------------ sessions */

struct mcir_gpu_session {
    gpu_run r;
    const mcir_cu_driver *drv;
    bool broken;   /* a step failed: the device state is unknown, only close */
    bool warned;   /* the library notes said (once, at the first good step) */
    int steps;
};

static int opt_graphs = -1;   /* -1: MCIR_GPU_GRAPHS decides */

void mcir_gpu_set_graphs(bool on) { opt_graphs = on; }

/* Whether graphs were asked for: the session's option, else
 * mcir_gpu_set_graphs, else MCIR_GPU_GRAPHS. */
static bool graphs_wanted(int opt) {
    if (opt >= 0) return opt;
    if (opt_graphs >= 0) return opt_graphs;
    const char *e = getenv("MCIR_GPU_GRAPHS");
    return e && *e && strcmp(e, "0") != 0;
}

static mcir_gpu_session *session_open(const mcir_cu_driver *drv, mcir_codegen *cg, mcir_env *env,
                                      const mcir_gpu_session_options *o, mcir_diag *d) {
    if (cg->plan->graph->ranks > 1) {
        mcir_error(d, (mcir_loc){.path = cg->plan->graph->path},
                   "the graph has %d ranks: %s", cg->plan->graph->ranks,
                   "a session of several ranks (several steps, CUDA graphs) is not built yet; a run "
                   "(mcir_gpu_run, mcir_emu_run) runs every rank once");
        return NULL;
    }
    cu = drv;
    cg_blas_select(drv->blas);
    mcir_gpu_session *s = calloc(1, sizeof *s);
    MCIR_ASSERT(s != NULL);
    s->drv = drv;
    gpu_run *r = &s->r;
    *r = (gpu_run){.cg = cg, .p = cg->plan, .g = cg->plan->graph, .m = cg->mem, .mode = o ? o->mode : MCIR_ALLOC_POOL,
                   .failed = -1, .completed = -1, .launched = -1, .sync = sync_mode(),
                   .graphs = graphs_wanted(o ? o->graphs : -1), .keep_state = o && o->keep_state};
    if (r->mode == MCIR_ALLOC_POOL && !cg->mem) r->mode = MCIR_ALLOC_EAGER;   /* no arena plan: one per tensor */
    const mcir_loc graph = {.path = cg->plan->graph->path};
    if (r->graphs && (r->mode == MCIR_ALLOC_LAZY || r->sync)) {
        /* LAZY frees between kernels and --sync waits after each: neither
         * can be captured (a capture holds no allocation, free or wait) */
        mcir_error(d, graph, "CUDA graphs need %s: %s cannot be captured (run without --graphs and MCIR_GPU_GRAPHS)",
                   r->mode == MCIR_ALLOC_LAZY ? "the pool or eager allocation mode" : "asynchronous launches",
                   r->mode == MCIR_ALLOC_LAZY ? "--alloc lazy's allocations and frees between the kernels"
                                              : "--sync's wait after each kernel (MCIR_GPU_SYNC)");
        free(s);
        cg_blas_select(NULL);
        return NULL;
    }
    if (!run_open(r, d) || !run_place(r, env)) {
        report_failure(r, d);
        run_close(r);
        free(s);
        cg_blas_select(NULL);
        return NULL;
    }
    return s;
}

mcir_gpu_session *mcir_gpu_session_open(mcir_codegen *cg, mcir_env *env, const mcir_gpu_session_options *o,
                                        mcir_diag *d) {
    char why[256];
    const mcir_cu_driver *drv = mcir_cu_load(why, sizeof why);
    if (!drv) {
        mcir_error(d, (mcir_loc){.path = cg->plan->graph->path}, "cannot run on the GPU: %s", why);
        return NULL;
    }
    return session_open(drv, cg, env, o, d);
}

mcir_gpu_session *mcir_emu_session_open(mcir_codegen *cg, mcir_env *env, const mcir_gpu_session_options *o,
                                        mcir_diag *d) {
    char why[256];
    const char *arch = cg->plan->target ? cg->plan->target->name : MCIR_DEFAULT_ARCH;
    const mcir_cu_driver *drv = mcir_emu_driver(arch, why, sizeof why);
    if (!drv) {
        mcir_error(d, (mcir_loc){.path = cg->plan->graph->path}, "cannot run on the emulated device: %s", why);
        return NULL;
    }
    return session_open(drv, cg, env, o, d);
}

bool mcir_gpu_session_step(mcir_gpu_session *s, mcir_env *env, const uint64_t *bound, mcir_gpu_stats *stats,
                           mcir_diag *d) {
    gpu_run *r = &s->r;
    if (stats) memset(stats, 0, sizeof *stats);
    const mcir_loc graph = {.path = r->g->path};
    if (s->broken) {
        mcir_error(d, graph, "the session's device failed at an earlier step: close it");
        return false;
    }
    cu = s->drv;
    cg_blas_select(s->drv->blas);
    r->failed = r->completed = r->launched = -1;
    r->fault = 0;
    r->why[0] = 0;
    r->ms = 0;
    r->host_us = r->capture_us = 0;
    bool ok = step_place(r, env, bound) && (r->graphs ? graph_launch(r) : run_launch(r)) && run_copy_back(r, env);
    s->steps++;
    r->state_loaded = ok;
    if (ok && stats) {
        stats->elapsed_ms = r->ms;
        stats->peak_device_bytes = r->peak;
        stats->workspace_bytes = (int64_t)r->workspace_bytes;
        stats->lt_fallbacks = r->lt_fallbacks;
        stats->host_us = r->host_us;
        stats->capture_us = r->capture_us;
        stats->recaptures = r->recaptures;
        stats->graph = r->graphs;
        stats->graph_sizes = r->n_sized;
    }
    if (ok && !s->warned && r->blas_note[0]) mcir_warning(d, graph, "%s", r->blas_note);
    if (ok && !s->warned && r->lt_fallbacks)
        mcir_warning(d, graph, "%s%s", r->lt_note, r->lt_fallbacks > 1 ? " (the first of several such GEMMs)" : "");
    s->warned |= ok;
    if (stats) snprintf(stats->device_name, sizeof stats->device_name, "%s", r->device);
    if (!ok) {
        report_failure(r, d);
        s->broken = true;
    }
    cg_blas_select(NULL);
    return ok;
}

bool mcir_gpu_session_graphs(const mcir_gpu_session *s) { return s->r.graphs; }

void mcir_gpu_session_reset_state(mcir_gpu_session *s) { s->r.state_loaded = false; }

bool mcir_gpu_session_read(mcir_gpu_session *s, mcir_env *env, const mcir_tensor *t, mcir_diag *d) {
    gpu_run *r = &s->r;
    const mcir_loc graph = {.path = r->g->path};
    if (!t->is_output || s->broken || !r->ptr || !r->ptr[root_of(r, t)->id]) {
        mcir_error(d, graph, "'%s' %s", t->name, !t->is_output ? "is not a graph output" : "is not on the device "
                   "(no step ran, or one failed)");
        return false;
    }
    cu = s->drv;
    void *h = malloc((size_t)mcir_tensor_bytes(t) + 1);
    MCIR_ASSERT(h != NULL);
    int rc = cu->cuStreamSynchronize(r->stream);
    if (rc == CUDA_SUCCESS) rc = cu->cuMemcpyDtoH_v2(h, r->ptr[root_of(r, t)->id], (size_t)mcir_tensor_bytes(t));
    if (rc == CUDA_SUCCESS) mcir_env_set_raw(env, t, h);
    else mcir_error(d, graph, "reading '%s' back: %s (rc %d)", t->name, mcir_cu_error(rc), rc);
    free(h);
    return rc == CUDA_SUCCESS;
}

void mcir_gpu_session_close(mcir_gpu_session *s) {
    if (!s) return;
    cu = s->drv;
    cg_blas_select(s->drv->blas);
    run_close(&s->r);
    cg_blas_select(NULL);
    free(s);
}

/* ------------------------------------------------------ several ranks */

static int nccl_dtype(mcir_dtype t) {
    switch (t) {
    case MCIR_DTYPE_F32: return MCIR_NCCL_FLOAT32;
    case MCIR_DTYPE_F16: return MCIR_NCCL_FLOAT16;
    case MCIR_DTYPE_BF16: return MCIR_NCCL_BFLOAT16;
    case MCIR_DTYPE_I32: return MCIR_NCCL_INT32;
    case MCIR_DTYPE_I64: return MCIR_NCCL_INT64;
    default: return MCIR_NCCL_UINT8;   /* u8, bool */
    }
}

/* Collective kernel i across the ranks' runs: one call per rank on its
 * stream, in one group (the collectives' table: NCCL, or the emulated
 * device's in memory); its event recorded on every stream. The planner
 * put a gather's or a scatter's axis first (mcir_lower_collectives), so
 * its buffers are flat rank by rank. */
static bool collective_ranks(gpu_run *rr, int R, int i, const mcir_coll_api *coll, void **comms) {
    const mcir_node *n = rr[0].cg->k[i].kp->anchor;
    const mcir_tensor *x = n->inputs[0], *y = n->outputs[0];
    const char *red = n->op == MCIR_OP_ALL_GATHER ? "sum" : mcir_node_string(n, "op");
    int op = !strcmp(red, "max") ? MCIR_NCCL_MAX : !strcmp(red, "min") ? MCIR_NCCL_MIN : MCIR_NCCL_SUM;
    int dt = nccl_dtype(x->dtype);
    for (int r = 0; r < R; r++)
        if (rr[r].mode == MCIR_ALLOC_LAZY && !lazy_alloc(&rr[r], i)) return false;
    /* on the second stream: after every kernel before it */
    for (int r = 0; r < R; r++) {
        gpu_run *g = &rr[r];
        if (!g->comm) continue;
        int e = cu->cuStreamWaitEvent(g->comm, g->last_compute >= 0 ? g->done[g->last_compute] : g->ev0, 0);
        if (e != CUDA_SUCCESS) {
            snprintf(g->why, sizeof g->why, "cuStreamWaitEvent: %s", mcir_cu_error(e));
            g->failed = i;
            return false;
        }
    }
    int rc = coll->group_start();
    for (int r = 0, started = rc; r < R && started == 0; r++) {   /* every rank's call, even after one failed */
        gpu_run *g = &rr[r];
        const gpu_run *from = cg_runtime_mutant == CG_MUTANT_COLLECTIVE_READS_RANK0 ? &rr[0] : g;
        const void *send = (const void *)(uintptr_t)from->ptr[root_of(from, x)->id];
        void *recv = (void *)(uintptr_t)g->ptr[root_of(g, y)->id];
        CUstream s = g->comm ? g->comm : g->stream;
        name_range((CUdeviceptr)(uintptr_t)send, mcir_tensor_bytes(x), x->name);   /* the emulated device's findings */
        name_range((CUdeviceptr)(uintptr_t)recv, mcir_tensor_bytes(y), y->name);
        int rc1;
        if (n->op == MCIR_OP_ALL_REDUCE)
            rc1 = coll->all_reduce(send, recv, (size_t)mcir_tensor_numel(x), dt, op, comms[r], s);
        else if (n->op == MCIR_OP_ALL_GATHER)
            rc1 = coll->all_gather(send, recv, (size_t)mcir_tensor_numel(x), dt, comms[r], s);
        else
            rc1 = coll->reduce_scatter(send, recv, (size_t)mcir_tensor_numel(y), dt, op, comms[r], s);
        if (rc == 0) rc = rc1;
    }
    int end = coll->group_end();
    if (rc == 0) rc = end;
    if (rc != 0) {
        snprintf(rr[0].why, sizeof rr[0].why, "%s (%s): %s", mcir_op_name(n->op), coll->name, coll->error_string(rc));
        rr[0].failed = i;
        return false;
    }
    for (int r = 0; r < R; r++) {
        gpu_run *g = &rr[r];
        int e = cu->cuEventRecord(g->done[i], g->comm ? g->comm : g->stream);
        if (e != CUDA_SUCCESS) {
            snprintf(g->why, sizeof g->why, "%s", mcir_cu_error(e));
            g->failed = i;
            return false;
        }
        if (g->comm) g->pending[g->n_pending++] = i;
        g->launched = i;
        if (g->mode == MCIR_ALLOC_LAZY && !lazy_free(g, i)) return false;
    }
    return true;
}

/* Collective kernel i of a run that is one rank of an outside group
 * (mcir_env_new_member: torch.distributed's process group, say): after the
 * kernels before it, its input comes to the host, the group's function
 * runs the collective over the group on this rank's values (mcir_group_fn:
 * f32, or i64 for integers), and the result goes back to the device. */
static bool collective_member(gpu_run *r, int i, const mcir_group *G, mcir_env *env, mcir_diag *d) {
    const mcir_node *n = r->cg->k[i].kp->anchor;
    const mcir_tensor *x = n->inputs[0], *y = n->outputs[0];
    if (r->mode == MCIR_ALLOC_LAZY && !lazy_alloc(r, i)) return false;
    if (i > 0 && !wait_for(r, i - 1)) return false;
    r->failed = i;
    size_t xb = (size_t)mcir_tensor_bytes(x), yb = (size_t)mcir_tensor_bytes(y);
    void *hx = malloc(xb + 1), *hy = malloc(yb + 1);
    MCIR_ASSERT(hx && hy);
    bool integer = !mcir_dtype_is_float(x->dtype);
    void *out = malloc((size_t)mcir_tensor_numel(y) * (integer ? sizeof(int64_t) : sizeof(float)) + 1);
    MCIR_ASSERT(out);
    int rc = cu->cuMemcpyDtoH_v2(hx, r->ptr[root_of(r, x)->id], xb);
    bool ok = rc == CUDA_SUCCESS;
    if (!ok) snprintf(r->why, sizeof r->why, "%s: copying its input to the host: %s", mcir_op_name(n->op),
                      mcir_cu_error(rc));
    if (ok) {
        mcir_env_set_raw(env, x, hx);
        const void *in = integer ? (const void *)mcir_env_get_int(env, x) : (const void *)mcir_env_get(env, x);
        ok = in && G->run(G->ctx, n, in, out, d);
        if (!ok) snprintf(r->why, sizeof r->why, "%s: the group's collective failed (rank %d)", mcir_op_name(n->op),
                          G->rank);
    }
    if (ok) {
        if (integer) mcir_env_set_int(env, y, out);
        else mcir_env_set(env, y, out);
        ok = mcir_env_get_raw(env, y, hy);
        rc = ok ? cu->cuMemcpyHtoD_v2(r->ptr[root_of(r, y)->id], hy, yb) : CUDA_SUCCESS;
        if (rc != CUDA_SUCCESS) {
            snprintf(r->why, sizeof r->why, "%s: copying its result to the device: %s", mcir_op_name(n->op),
                     mcir_cu_error(rc));
            ok = false;
        }
    }
    free(hx);
    free(hy);
    free(out);
    if (!ok) return false;
    r->failed = -1;
    rc = cu->cuEventRecord(r->done[i], r->stream);
    if (rc != CUDA_SUCCESS) {
        snprintf(r->why, sizeof r->why, "%s", mcir_cu_error(rc));
        r->failed = i;
        return false;
    }
    r->launched = r->last_compute = i;
    return !(r->mode == MCIR_ALLOC_LAZY && !lazy_free(r, i));
}

/* One process a rank (runtime.h mcir_runtime_set_launch): the rendezvous
 * its collectives and NCCL id go through; NULL: every rank here. */
static mcir_rdv *launch_rdv;

void mcir_runtime_set_launch(mcir_rdv *r) { launch_rdv = r; }

typedef struct {
    mcir_coll_combine_fn combine;
} exchange_ctx;

static bool combine_ranks(void *ctx, const mcir_rdv_call *c, int ranks, const void *const *ins, void *const *outs,
                          char *why, size_t n) {
    const exchange_ctx *x = ctx;
    if (!x->combine((int)c->kind, (int)c->dtype, (int)c->op, (size_t)c->count, ranks, ins, outs)) {
        snprintf(why, n, "type %u cannot be combined", c->dtype);
        return false;
    }
    return true;
}

static const char *describe_nccl(uint32_t kind) {
    return kind == MCIR_COLL_ALL_REDUCE ? "ncclAllReduce" : kind == MCIR_COLL_ALL_GATHER ? "ncclAllGather"
         : kind == MCIR_COLL_REDUCE_SCATTER ? "ncclReduceScatter" : "a collective";
}

/* The emulated device's collective with the ranks in other processes. */
static bool rdv_exchange(void *ctx, int kind, int dtype, int op, size_t count, const void *send, size_t send_bytes,
                         void *recv, size_t recv_bytes, mcir_coll_combine_fn combine, char *why, size_t n) {
    mcir_rdv_call c = {.kind = (uint32_t)kind, .dtype = (uint32_t)dtype, .op = (uint32_t)op, .count = count,
                       .send_bytes = send_bytes, .recv_bytes = recv_bytes};
    exchange_ctx x = {combine};
    return mcir_rdv_star(ctx, &c, send, recv, combine_ranks, &x, describe_nccl, why, n);
}

/* Collectives on a second stream (overlapping the kernels that do not
 * touch their buffers): not with LAZY allocation (its frees wait for the
 * device), nor where MCIR_OVERLAP=0. */
static bool overlap_wanted(mcir_alloc_mode mode) {
    const char *e = getenv("MCIR_OVERLAP");
    return mode != MCIR_ALLOC_LAZY && !(e && !strcmp(e, "0"));
}

/* A graph with ranks: one run per rank (its own device on GPUs, its own
 * arena, stream and leaves: its parts of the sharded ones), stepped in
 * lockstep — every rank's kernels up to a collective, the collective, on
 * to the next. The outputs go to each rank's env. */
static bool ranks_run(const mcir_cu_driver *drv, mcir_codegen *cg, mcir_env *env, mcir_alloc_mode mode,
                      mcir_gpu_stats *stats, mcir_diag *d) {
    const mcir_graph *g = cg->plan->graph;
    const mcir_loc graph = {.path = g->path};
    int R = g->ranks;
    /* one process a rank (mcir_runtime_set_launch): this process runs its
     * own rank, env holds its values */
    const mcir_launch *L = launch_rdv ? mcir_rdv_launch(launch_rdv) : NULL;
    /* one rank of an outside group (mcir_env_new_member): this process's
     * rank, the collectives through the group's function */
    const mcir_group *G = mcir_env_member(env);
    if (G) L = NULL;
    int NL = L || G ? 1 : R;
    if (L && L->world != R) {
        mcir_error(d, graph, "the graph has %d ranks and the launcher started %d (WORLD_SIZE)", R, L->world);
        return false;
    }
    if (mcir_env_ranks(env) != (L || G ? 1 : R)) {
        mcir_error(d, graph, "the graph has %d ranks but the values hold %d", R, mcir_env_ranks(env));
        return false;
    }
    if (graphs_wanted(-1) || sync_mode()) {
        mcir_error(d, graph, "the graph has %d ranks: CUDA graphs and --sync are not built for runs of several "
                   "ranks yet (run without --graphs, MCIR_GPU_GRAPHS and MCIR_GPU_SYNC)", R);
        return false;
    }
    char why[512];
    const mcir_coll_api *coll = G ? NULL : drv->coll ? drv->coll : mcir_nccl_load(why, sizeof why);
    if (!coll && !G) {
        mcir_error(d, graph, "the graph has %d ranks, and a run of several ranks on GPUs needs NCCL: %s", R, why);
        return false;
    }
    int gpus = 0;
    if (!drv->emulated && L && (drv->cuDeviceGetCount(&gpus) != CUDA_SUCCESS || gpus <= L->local_rank)) {
        mcir_error(d, graph, "rank %d: LOCAL_RANK %d and this machine has %d GPU%s", L->rank, L->local_rank, gpus,
                   gpus == 1 ? "" : "s");
        return false;
    }
    if (!drv->emulated && !L && !G && (drv->cuDeviceGetCount(&gpus) != CUDA_SUCCESS || gpus < R)) {
        mcir_error(d, graph, "the graph has %d ranks and this machine has %d GPU%s: one process drives one GPU a "
                   "rank (--device cpu and --device emu run every rank in one process)", R, gpus, gpus == 1 ? "" : "s");
        return false;
    }
    if (L && !coll->comm_init_rank) {
        mcir_error(d, graph, "%s cannot run one rank a process (no ncclCommInitRank)", coll->name);
        return false;
    }
    cu = drv;
    cg_blas_select(drv->blas);
    gpu_run *rr = calloc((size_t)NL, sizeof *rr);
    void **comms = calloc((size_t)NL, sizeof *comms);
    int *devs = calloc((size_t)NL, sizeof *devs);
    MCIR_ASSERT(rr && comms && devs);
    int opened = 0, bad = -1;
    bool ok = true, have_comms = false;
    for (int r = 0; ok && r < NL; r++) {
        /* the emulated device is one; every rank gets its own arena on it */
        devs[r] = drv->emulated || G ? 0 : L ? L->local_rank : r;
        rr[r] = (gpu_run){.cg = cg, .p = cg->plan, .g = g, .m = cg->mem, .mode = mode,
                          .rank = L ? L->rank : G ? G->rank : r,
                          .ordinal = devs[r], .failed = -1, .completed = -1, .launched = -1, .last_compute = -1};
        if (rr[r].mode == MCIR_ALLOC_POOL && !cg->mem) rr[r].mode = MCIR_ALLOC_EAGER;
        opened++;
        mcir_env *mine = L || G ? env : mcir_env_rank_env(env, r);
        ok = run_open(&rr[r], d) && run_place(&rr[r], mine) && step_place(&rr[r], mine, NULL);
        if (ok && !G && overlap_wanted(rr[r].mode)) {   /* the collectives' stream */
            int rc = cu->cuStreamCreate(&rr[r].comm, 0);
            rr[r].pending = calloc((size_t)cg->n + 1, sizeof *rr[r].pending);
            MCIR_ASSERT(rr[r].pending);
            if (rc != CUDA_SUCCESS) {
                rr[r].comm = NULL;
                snprintf(rr[r].why, sizeof rr[r].why, "cuStreamCreate: %s", mcir_cu_error(rc));
                ok = false;
            }
        }
        if (ok) {
            int rc = cu->cuEventRecord(rr[r].ev0, rr[r].stream);
            if (rc != CUDA_SUCCESS) {
                snprintf(rr[r].why, sizeof rr[r].why, "%s", mcir_cu_error(rc));
                ok = false;
            }
        }
        if (!ok) bad = r;
    }
    if (ok && L) {
        /* the communicator of this process's rank: NCCL's id from rank 0
         * through the rendezvous; the emulated device's names the
         * rendezvous itself */
        char id[MCIR_NCCL_ID_BYTES] = {0};
        static mcir_coll_remote remote = {rdv_exchange, NULL};
        remote.ctx = launch_rdv;
        const mcir_coll_remote *rp = &remote;
        int rc = 0;
        if (drv->emulated) memcpy(id, &rp, sizeof rp);
        else if (L->rank == 0) rc = coll->get_unique_id(id);
        char why2[600] = "";
        if (rc == 0 && !drv->emulated && !mcir_rdv_broadcast(launch_rdv, id, sizeof id, why2, sizeof why2)) rc = -1;
        if (rc == 0 && !drv->emulated && cu->cuCtxSetCurrent(rr[0].ctx) != CUDA_SUCCESS) rc = -1;
        if (rc == 0) rc = coll->comm_init_rank(&comms[0], R, id, L->rank);
        have_comms = rc == 0;
        if (!have_comms) {
            snprintf(rr[0].why, sizeof rr[0].why, "%s: ncclCommInitRank, rank %d of %d: %s", coll->name, L->rank, R,
                     why2[0] ? why2 : coll->error_string(rc));
            ok = false;
            bad = 0;
        }
    } else if (ok && !G) {
        int rc = coll->comm_init_all(comms, R, devs);
        have_comms = rc == 0;
        if (!have_comms) {
            snprintf(rr[0].why, sizeof rr[0].why, "%s: ncclCommInitAll over %d ranks: %s", coll->name, R,
                     coll->error_string(rc));
            ok = false;
            bad = 0;
        }
    }
    double t0 = now_s();
    for (int from = 0; ok && from < cg->n;) {
        int c = from;
        while (c < cg->n && cg->k[c].kp->tpl != MCIR_TEMPLATE_COLLECTIVE) c++;
        for (int r = 0; ok && r < NL; r++) {
            if (!drv->emulated && cu->cuCtxSetCurrent(rr[r].ctx) != CUDA_SUCCESS) ok = false;
            for (int i = from; ok && i < c; i++) ok = launch_one(&rr[r], i);
            if (!ok) bad = r;
        }
        if (ok && c < cg->n &&
            !(G ? collective_member(&rr[0], c, G, env, d) : collective_ranks(rr, NL, c, coll, comms))) {
            ok = false;
            for (int r = 0; r < NL && bad < 0; r++)
                if (rr[r].why[0]) bad = r;
        }
        from = c + 1;
    }
    double host_us = (now_s() - t0) * 1e6;
    for (int r = 0; ok && r < NL; r++) {
        gpu_run *x = &rr[r];
        ok = (drv->emulated || cu->cuCtxSetCurrent(x->ctx) == CUDA_SUCCESS) && join_pending(x, cg->n - 1, true) &&
             cu->cuEventRecord(x->ev1, x->stream) == CUDA_SUCCESS && wait_for(x, cg->n - 1) &&
             cu->cuEventSynchronize(x->ev1) == CUDA_SUCCESS &&
             cu->cuEventElapsedTime(&x->ms, x->ev0, x->ev1) == CUDA_SUCCESS &&
             run_copy_back(x, L || G ? env : mcir_env_rank_env(env, r));
        if (!ok) bad = r;
    }
    if (ok && stats) {
        memset(stats, 0, sizeof *stats);
        for (int r = 0; r < NL; r++) {
            if (rr[r].ms > stats->elapsed_ms) stats->elapsed_ms = rr[r].ms;
            if (rr[r].peak > stats->peak_device_bytes) stats->peak_device_bytes = rr[r].peak;
        }
        stats->host_us = host_us;
        stats->overlapped = rr[0].comm ? rr[0].overlapped : -1;
        snprintf(stats->device_name, sizeof stats->device_name, "%s", rr[0].device);
    }
    if (!ok) {
        if (bad < 0) bad = 0;
        mcir_error(d, graph, "rank %d of %d failed:", rr[bad].rank, R);
        report_failure(&rr[bad], d);
    }
    for (int r = 0; have_comms && r < NL; r++) coll->comm_destroy(comms[r]);
    for (int r = opened; r-- > 0;) {
        if (!drv->emulated) cu->cuCtxSetCurrent(rr[r].ctx);
        run_close(&rr[r]);
    }
    free(rr);
    free(comms);
    free(devs);
    cg_blas_select(NULL);
    return ok;
}

/* A graph of one rank whose plan has collectives: they go through the
 * collectives' table with a communicator of one rank (NCCL where it loads,
 * so a machine with one GPU checks those calls; the emulated device's
 * always) instead of copies — except under CUDA graphs and --sync, which
 * runs of ranks do not build. */
static bool one_rank_communicator(const mcir_cu_driver *drv, const mcir_codegen *cg) {
    if (cg->plan->graph->ranks != 1 || launch_rdv || graphs_wanted(-1) || sync_mode()) return false;
    bool any = false;
    for (int i = 0; i < cg->n && !any; i++) any = cg->k[i].kp->tpl == MCIR_TEMPLATE_COLLECTIVE;
    if (!any) return false;
    char why[512];
    return drv->coll || mcir_nccl_load(why, sizeof why);
}

/* One step of a session of its own (open, step, close) on driver table
 * drv; bound as mcir_gpu_run_bound's. */
static bool device_run(const mcir_cu_driver *drv, mcir_codegen *cg, mcir_env *env, const uint64_t *bound,
                       mcir_alloc_mode mode, mcir_gpu_stats *stats, mcir_diag *d) {
    if (stats) memset(stats, 0, sizeof *stats);
    const mcir_gpu_session_options o = {.mode = mode, .graphs = -1};
    mcir_gpu_session *s = session_open(drv, cg, env, &o, d);
    if (!s) return false;
    bool ok = mcir_gpu_session_step(s, env, bound, stats, d);
    mcir_gpu_session_close(s);
    return ok;
}

bool mcir_gpu_run(mcir_codegen *cg, mcir_env *env, mcir_alloc_mode mode, mcir_gpu_stats *stats,
                  mcir_diag *d) {
    return mcir_gpu_run_bound(cg, env, NULL, mode, stats, d);
}

bool mcir_gpu_run_bound(mcir_codegen *cg, mcir_env *env, const uint64_t *bound,
                        mcir_alloc_mode mode, mcir_gpu_stats *stats, mcir_diag *d) {
    if (stats) memset(stats, 0, sizeof *stats);
    char why[256];
    const mcir_cu_driver *drv = mcir_cu_load(why, sizeof why);
    if (!drv) {
        mcir_error(d, (mcir_loc){.path = cg->plan->graph->path}, "cannot run on the GPU: %s", why);
        return false;
    }
    if ((cg->plan->graph->ranks > 1 || one_rank_communicator(drv, cg)) && !bound)
        return ranks_run(drv, cg, env, mode, stats, d);
    return device_run(drv, cg, env, bound, mode, stats, d);
}

bool mcir_emu_run(mcir_codegen *cg, mcir_env *env, mcir_alloc_mode mode, mcir_gpu_stats *stats, mcir_diag *d) {
    return mcir_emu_run_bound(cg, env, NULL, mode, stats, d);
}

bool mcir_emu_run_bound(mcir_codegen *cg, mcir_env *env, const uint64_t *bound, mcir_alloc_mode mode,
                        mcir_gpu_stats *stats, mcir_diag *d) {
    if (stats) memset(stats, 0, sizeof *stats);
    char why[256];
    const char *arch = cg->plan->target ? cg->plan->target->name : MCIR_DEFAULT_ARCH;
    const mcir_cu_driver *drv = mcir_emu_driver(arch, why, sizeof why);
    if (!drv) {
        mcir_error(d, (mcir_loc){.path = cg->plan->graph->path}, "cannot run on the emulated device: %s", why);
        return false;
    }
    if ((cg->plan->graph->ranks > 1 || one_rank_communicator(drv, cg)) && !bound)
        return ranks_run(drv, cg, env, mode, stats, d);
    return device_run(drv, cg, env, bound, mode, stats, d);
}
