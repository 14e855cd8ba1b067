/*
 * device.c — the emulated device: a second implementation of the CUDA
 * driver table (runtime/cuda_driver.h) whose memory is host memory and
 * whose modules are the generated kernels built for the CPU emulator
 * (emu/compile.c), so runtime/runtime.c runs unchanged over it; see
 * emu/emu.h.
 *
 * Invariants: a CUdeviceptr is a host address inside one of dev.allocs;
 * every allocation has a per-byte shadow of what was written since it was
 * made (host copies, memsets, kernel and library writes) that the
 * emulator's uninitialised-read check reads; a launch runs every block
 * before it returns (or the capped grid, mcir_emu_set_max_blocks) and a
 * finding fails it with CUDA_ERROR_LAUNCH_FAILED, the findings kept for
 * emu_findings until the next failure.
 */
#include <dlfcn.h>
#include <elf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "emu/cuda_emu.h"
#include "emu/emu-impl.h"
#include "mcir/mcir.h"
#include "properties/target.h"

enum {
    ERR_INVALID_VALUE = 1,
    ERR_OUT_OF_MEMORY = 2,
    ERR_INVALID_IMAGE = 200,
    ERR_NOT_FOUND = 500,
    ERR_ILLEGAL_ADDRESS = 700,
    ERR_LAUNCH_OUT_OF_RESOURCES = 701,
    ERR_LAUNCH_TIMEOUT = 702,
    ERR_LAUNCH_FAILED = 719,
};

typedef struct emu_range {   /* what the runtime said a range holds */
    uintptr_t p;
    size_t bytes;
    unsigned long seq;
    char name[120];
} emu_range;

typedef struct emu_module emu_module;

typedef struct emu_function {
    emu_module *module;
    void (*body)(void **);
    const char *params;   /* the launcher's parameter string: r4 w2 m0 ... */
    char name[128];
    int max_dynamic_smem;
    unsigned cluster;     /* blocks per cluster (ENTRY__emu_cluster; 1: none) */
    struct emu_function *next;   /* the module's functions: freed with it */
} emu_function;

struct emu_module {
    void *lib;
    int (*run)(emu_launch *);
    emu_function *functions;
    emu_smem_symbol *smem;   /* its static __shared__ arrays, for findings */
    int n_smem;
    char *smem_names;
};

static struct {
    bool made;
    char arch[16], name[128];
    int major, minor, l2_bytes;
    int64_t smem_optin;
    emu_mem *allocs;
    int n_allocs, cap_allocs;
    size_t allocated;
    emu_range *ranges;
    int n_ranges, cap_ranges;
    unsigned long seq;
    char findings[16384];
    mcir_emu_launch_record *log;
    int n_log, cap_log;
    unsigned max_blocks;
    int checks;   /* EMU_CHECK_* of every launch */
    /* injected GPU failures (MCIR_EMU_FAULT / MCIR_EMU_HANG, for the
     * runtime's diagnostics): the context's sticky error, a launch that
     * never completes */
    int sticky;
    bool hung;
    struct emu_stream *capturing;   /* the stream in an active capture (global mode), or NULL */
    mcir_emu_calls calls;
} dev;

/* ------------------------------------------------------ graph capture
 *
 * A stream in capture records what is issued on it — launches (with a
 * copy of their parameter values), device copies and memsets, the library
 * calls of emu/blas.c, and the runtime's namings of ranges (host state
 * the findings and bounds read, re-applied at replay in order) — instead
 * of running it. cuGraphInstantiate copies the record; cuGraphLaunch runs
 * it on a stream with every check on. What a GPU refuses during a
 * global-mode capture fails here too and invalidates the capture
 * (cuStreamEndCapture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED): a wait on
 * the capturing stream or an event, an allocation or free, a synchronous
 * copy. */
typedef enum { NODE_LAUNCH, NODE_NAME, NODE_COPY, NODE_MEMSET, NODE_CALL } emu_node_kind;

typedef struct emu_node {
    emu_node_kind kind;
    struct emu_function *fn;   /* LAUNCH */
    unsigned grid, block, smem;
    unsigned char *values;     /* LAUNCH: the parameters' values, packed; CALL: the call's arguments */
    size_t n_values;
    CUdeviceptr dst, src;      /* COPY, MEMSET (src: the value), NAME (dst) */
    size_t bytes;              /* COPY bytes, MEMSET words, NAME bytes */
    char name[120];            /* NAME */
    int (*call)(const void *args);   /* CALL */
} emu_node;

typedef struct emu_graph {
    emu_node *nodes;
    int n, cap;
} emu_graph;

enum { EMU_MAX_STREAMS = 32 };
typedef struct emu_stream {
    int capture;   /* CU_STREAM_CAPTURE_STATUS_*: 0 none, 1 active, 2 invalidated */
    emu_graph *graph;
    int sid;                            /* slot in order.streams; -1: beyond EMU_MAX_STREAMS, unchecked */
    unsigned vc[EMU_MAX_STREAMS];       /* vector clock: what of each stream this one is ordered after */
} emu_stream;

enum { CAPTURE_NONE, CAPTURE_ACTIVE, CAPTURE_INVALIDATED, ERR_ILLEGAL_STATE = 401 };

static emu_node *graph_add(emu_graph *g, emu_node_kind kind) {
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 32;
        g->nodes = realloc(g->nodes, sizeof *g->nodes * (size_t)g->cap);
        MCIR_ASSERT(g->nodes != NULL);
    }
    emu_node *n = &g->nodes[g->n++];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    return n;
}

/* A captured copy (src an address) or 32-bit memset (src the value) of
 * `bytes` (the memset's count of words), replayed in stream order. */
static CUresult record_move(emu_graph *g, emu_node_kind kind, CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    emu_node *x = graph_add(g, kind);
    x->dst = dst;
    x->src = src;
    x->bytes = bytes;
    dev.calls.captured++;
    return CUDA_SUCCESS;
}

static void graph_free(emu_graph *g) {
    for (int i = 0; g && i < g->n; i++) free(g->nodes[i].values);
    if (g) free(g->nodes);
    free(g);
}

/* A call that may not happen during a global-mode capture: the capture is
 * invalidated and the call fails with rc (as on a GPU). 0 where no
 * capture is active. */
static CUresult capture_forbids(CUresult rc) {
    if (!dev.capturing) return CUDA_SUCCESS;
    dev.capturing->capture = CAPTURE_INVALIDATED;
    return rc;
}

/* The stream's record where it is capturing (NULL otherwise; an
 * invalidated capture records nothing more). */
static emu_graph *recording(CUstream s) {
    emu_stream *x = s;
    return x && x->capture == CAPTURE_ACTIVE ? x->graph : NULL;
}

/* ------------------------------------------------ order between streams
 *
 * Launches, copies, library calls and collectives run when they are
 * issued, so here two streams never overlap; on a GPU they do, unless an
 * event orders them (cuEventRecord on one, cuStreamWaitEvent on the other)
 * or the host waited between them. Each stream keeps a vector clock (what
 * of every stream it is ordered after: its own issues, the events it
 * waited for, what the host had waited for when it issued), an event a
 * copy of its stream's clock, the host the join of everything it waited
 * for. Every issue records the byte ranges it reads and writes; one that
 * meets a range another stream's issue wrote (or reads a range this one
 * writes) that its clock does not cover is a race finding, and the issue
 * fails — what compute-sanitizer's racecheck cannot see across streams
 * and the hardware would show as wrong values once in a while. */
typedef struct order_rec {
    uintptr_t lo, hi;
    bool write;
    int sid;
    unsigned stamp;
    char who[96], what[96];
} order_rec;

static struct {
    emu_stream *streams[EMU_MAX_STREAMS];
    unsigned host[EMU_MAX_STREAMS];
    order_rec *log;
    int n, cap;
} order;

static void vc_join(unsigned *to, const unsigned *from) {
    for (int i = 0; i < EMU_MAX_STREAMS; i++)
        if (from[i] > to[i]) to[i] = from[i];
}

/* The host waited for everything issued so far (a synchronous copy, a
 * free: the device is idle after them). */
static void order_host_waits_all(void) {
    for (int i = 0; i < EMU_MAX_STREAMS; i++)
        if (order.streams[i]) vc_join(order.host, order.streams[i]->vc);
}

/* Drops records every live stream (and the host) is ordered after. */
static void order_prune(void) {
    int k = 0;
    for (int i = 0; i < order.n; i++) {
        const order_rec *e = &order.log[i];
        bool seen = true;
        for (int t = 0; t < EMU_MAX_STREAMS && seen; t++)
            if (order.streams[t] && t != e->sid && order.streams[t]->vc[e->sid] < e->stamp) seen = false;
        if (!seen && order.host[e->sid] < e->stamp) order.log[k++] = *e;
    }
    order.n = k;
    if (order.n > 3 * 4096 / 4) {   /* still full: forget the oldest half (fewer checks, never a false finding) */
        memmove(order.log, order.log + order.n / 2, sizeof *order.log * (size_t)(order.n - order.n / 2));
        order.n -= order.n / 2;
    }
}

bool emu_dev_stream_touch(void *stream, const char *who, int n, const emu_touch *t) {
    emu_stream *s = stream;
    if (!s || s->sid < 0 || recording(stream)) return true;   /* the legacy stream, unchecked ones, captures */
    vc_join(s->vc, order.host);
    unsigned stamp = ++s->vc[s->sid];
    bool ok = true;
    for (int i = 0; i < n; i++) {
        uintptr_t lo = t[i].p, hi = t[i].p + t[i].bytes;
        const char *what = "device memory";
        if (!t[i].bytes) {   /* the named range holding p */
            uintptr_t start;
            size_t bytes;
            what = emu_dev_name_of(t[i].p, &start, &bytes);
            if (!strcmp(what, "device memory")) continue;   /* no tensor there: the whole allocation would be too much */
            lo = start;
            hi = start + bytes;
        } else {
            what = emu_dev_name_of(t[i].p, NULL, NULL);
        }
        for (int k = 0; k < order.n && ok; k++) {
            const order_rec *e = &order.log[k];
            if (e->sid == s->sid || e->hi <= lo || hi <= e->lo || !(e->write || t[i].write) ||
                s->vc[e->sid] >= e->stamp)
                continue;
            emu_dev_finding("race", "%s on stream %d %s '%s' while %s on stream %d %s '%s' (the same bytes): no event "
                            "orders the two (cuEventRecord + cuStreamWaitEvent) and the host did not wait between "
                            "them, so on a GPU they may run at once", who, s->sid, t[i].write ? "writes" : "reads",
                            what, e->who, e->sid, e->write ? "writes" : "reads", e->what);
            ok = false;
        }
        if (order.n == order.cap) {
            if (order.cap >= 4096) order_prune();
            if (order.n == order.cap) {
                order.cap = order.cap ? 2 * order.cap : 256;
                order.log = realloc(order.log, sizeof *order.log * (size_t)order.cap);
                MCIR_ASSERT(order.log != NULL);
            }
        }
        order_rec *r = &order.log[order.n++];
        *r = (order_rec){.lo = lo, .hi = hi, .write = t[i].write, .sid = s->sid, .stamp = stamp};
        snprintf(r->who, sizeof r->who, "%s", who);
        snprintf(r->what, sizeof r->what, "%s", what);
    }
    return ok;
}

static CUresult e_stream_wait_event(CUstream st, CUevent ev, unsigned flags);

bool emu_dev_capture_call(void *stream, int (*call)(const void *args), const void *args, size_t size) {
    dev.calls.library++;
    emu_graph *g = recording(stream);
    if (!g) return false;
    emu_node *n = graph_add(g, NODE_CALL);
    n->call = call;
    n->values = malloc(size ? size : 1);
    MCIR_ASSERT(n->values != NULL);
    memcpy(n->values, args, size);
    n->n_values = size;
    dev.calls.captured++;
    return true;
}

/* ------------------------------------------------------------- memory */

const emu_mem *emu_dev_find(uintptr_t p, size_t bytes, size_t *offset) {
    for (int i = 0; i < dev.n_allocs; i++) {
        uintptr_t b = (uintptr_t)dev.allocs[i].base;
        if (p >= b && p - b <= dev.allocs[i].bytes && bytes <= dev.allocs[i].bytes - (p - b)) {
            if (offset) *offset = (size_t)(p - b);
            return &dev.allocs[i];
        }
    }
    return NULL;
}

/* The latest naming of a range holding p (a start beats a middle). */
static const emu_range *range_at(uintptr_t p, bool start) {
    const emu_range *best = NULL;
    for (int i = 0; i < dev.n_ranges; i++) {
        const emu_range *r = &dev.ranges[i];
        bool in = start ? r->p == p : p >= r->p && p - r->p < r->bytes;
        if (in && (!best || r->seq > best->seq)) best = r;
    }
    return best;
}

const char *emu_dev_name_of(uintptr_t p, uintptr_t *range_start, size_t *range_bytes) {
    const emu_range *r = range_at(p, true);
    if (!r) r = range_at(p, false);
    if (r) {
        if (range_start) *range_start = r->p;
        if (range_bytes) *range_bytes = r->bytes;
        return r->name;
    }
    size_t off;
    const emu_mem *m = emu_dev_find(p, 0, &off);
    if (range_start) *range_start = m ? (uintptr_t)m->base : p;
    if (range_bytes) *range_bytes = m ? m->bytes : 0;
    return "device memory";
}

static void emu_name(CUdeviceptr p, size_t bytes, const char *name) {
    if (dev.capturing && dev.capturing->capture == CAPTURE_ACTIVE) {   /* again at every replay, in order */
        emu_node *n = graph_add(dev.capturing->graph, NODE_NAME);
        n->dst = p;
        n->bytes = bytes;
        snprintf(n->name, sizeof n->name, "%s", name);
    }
    for (int i = 0; i < dev.n_ranges; i++)   /* the same range named again: renamed, newest */
        if (dev.ranges[i].p == p && dev.ranges[i].bytes == bytes) {
            snprintf(dev.ranges[i].name, sizeof dev.ranges[i].name, "%s", name);
            dev.ranges[i].seq = ++dev.seq;
            return;
        }
    if (dev.n_ranges == dev.cap_ranges) {
        dev.cap_ranges = dev.cap_ranges ? 2 * dev.cap_ranges : 64;
        dev.ranges = realloc(dev.ranges, sizeof *dev.ranges * (size_t)dev.cap_ranges);
        MCIR_ASSERT(dev.ranges != NULL);
    }
    emu_range *r = &dev.ranges[dev.n_ranges++];
    r->p = p;
    r->bytes = bytes;
    r->seq = ++dev.seq;
    snprintf(r->name, sizeof r->name, "%s", name);
}

void emu_dev_finding(const char *kind, const char *fmt, ...) {
    size_t used = strlen(dev.findings);
    if (used + 2 >= sizeof dev.findings) return;
    int n = snprintf(dev.findings + used, sizeof dev.findings - used, "%s: ", kind);
    if (n < 0 || used + (size_t)n >= sizeof dev.findings) return;
    used += (size_t)n;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dev.findings + used, sizeof dev.findings - used, fmt, ap);
    va_end(ap);
    used = strlen(dev.findings);
    if (used + 1 < sizeof dev.findings) strcat(dev.findings, "\n");
}

void emu_dev_clear_findings(void) { dev.findings[0] = 0; }

int emu_dev_sticky(void) { return dev.sticky; }
bool emu_dev_hung(void) { return dev.hung; }

static const char *emu_findings(void) { return dev.findings; }

/* ---------------------------------------------------- the driver entries */

static CUresult e_init(unsigned flags) {
    (void)flags;
    return CUDA_SUCCESS;
}
static CUresult e_driver_version(int *v) {
    *v = 13000;   /* the driver API the runtime is written against */
    return CUDA_SUCCESS;
}
static CUresult e_device_count(int *n) {
    *n = 1;
    return CUDA_SUCCESS;
}
static CUresult e_device_get(CUdevice *d, int ordinal) {
    if (ordinal != 0) return ERR_INVALID_VALUE;
    *d = 0;
    return CUDA_SUCCESS;
}
static CUresult e_device_name(char *name, int len, CUdevice d) {
    (void)d;
    snprintf(name, (size_t)len, "%s", dev.name);
    return CUDA_SUCCESS;
}
static CUresult e_device_attribute(int *v, int attr, CUdevice d) {
    (void)d;
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = dev.major; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = dev.minor; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = dev.l2_bytes; return CUDA_SUCCESS;
    default: return ERR_INVALID_VALUE;
    }
}
static size_t host_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && size > 0 ? (size_t)pages * (size_t)size : (size_t)1 << 34;
}
static CUresult e_total_mem(size_t *bytes, CUdevice d) {
    (void)d;
    *bytes = host_bytes();
    return CUDA_SUCCESS;
}
static CUresult e_ctx_retain(CUcontext *c, CUdevice d) {
    (void)d;
    *c = &dev;
    dev.sticky = 0;   /* a new run: the injected failures of the last one are gone */
    dev.hung = false;
    return CUDA_SUCCESS;
}
static CUresult e_ctx_release(CUdevice d) {
    (void)d;
    return CUDA_SUCCESS;
}
static CUresult e_ctx_set(CUcontext c) {
    (void)c;
    return CUDA_SUCCESS;
}

static CUresult blocked(const char *call);

static CUresult e_mem_alloc(CUdeviceptr *p, size_t bytes) {
    if (capture_forbids(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    size_t rounded = (bytes + 255) / 256 * 256;
    if (rounded == 0) rounded = 256;
    if (dev.allocated + rounded > host_bytes() / 2) return ERR_OUT_OF_MEMORY;
    unsigned char *base = aligned_alloc(256, rounded), *init = calloc(rounded, 1);
    if (!base || !init) {
        free(base);
        free(init);
        return ERR_OUT_OF_MEMORY;
    }
    memset(base, 0xff, rounded);   /* garbage, like a GPU's fresh memory (NaN for floats) */
    if (dev.n_allocs == dev.cap_allocs) {
        dev.cap_allocs = dev.cap_allocs ? 2 * dev.cap_allocs : 64;
        dev.allocs = realloc(dev.allocs, sizeof *dev.allocs * (size_t)dev.cap_allocs);
        MCIR_ASSERT(dev.allocs != NULL);
    }
    dev.allocs[dev.n_allocs++] = (emu_mem){base, bytes, init};
    dev.allocated += rounded;
    *p = (CUdeviceptr)(uintptr_t)base;
    return CUDA_SUCCESS;
}

static CUresult e_mem_free(CUdeviceptr p) {
    if (capture_forbids(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    for (int i = 0; i < dev.n_allocs; i++)
        if ((uintptr_t)dev.allocs[i].base == p) {
            emu_mem m = dev.allocs[i];
            size_t rounded = (m.bytes + 255) / 256 * 256;
            dev.allocated -= rounded ? rounded : 256;
            for (int r = 0; r < dev.n_ranges;)   /* the names inside go too */
                if (dev.ranges[r].p >= p && dev.ranges[r].p - p <= m.bytes)
                    dev.ranges[r] = dev.ranges[--dev.n_ranges];
                else
                    r++;
            free(m.base);
            free(m.init);
            dev.allocs[i] = dev.allocs[--dev.n_allocs];
            return CUDA_SUCCESS;
        }
    return ERR_INVALID_VALUE;
}

static CUresult e_mem_info(size_t *free_b, size_t *total_b) {
    *total_b = host_bytes();
    *free_b = *total_b > dev.allocated ? *total_b - dev.allocated : 0;
    return CUDA_SUCCESS;
}

static CUresult e_htod(CUdeviceptr dst, const void *src, size_t n) {
    if (capture_forbids(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    if (dev.sticky) return dev.sticky;
    order_host_waits_all();   /* synchronous: after every blocking stream's work */
    if (dev.hung) return blocked("cuMemcpyHtoD");
    size_t off;
    const emu_mem *m = emu_dev_find(dst, n, &off);
    if (!m) return ERR_INVALID_VALUE;
    memcpy(m->base + off, src, n);
    memset(m->init + off, 1, n);
    return CUDA_SUCCESS;
}

static CUresult e_dtoh(void *dst, CUdeviceptr src, size_t n) {
    if (capture_forbids(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    if (dev.sticky) return dev.sticky;
    order_host_waits_all();
    if (dev.hung) return blocked("cuMemcpyDtoH");
    size_t off;
    const emu_mem *m = emu_dev_find(src, n, &off);
    if (!m) return ERR_INVALID_VALUE;
    memcpy(dst, m->base + off, n);
    return CUDA_SUCCESS;
}

static CUresult e_dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    if (dev.sticky) return dev.sticky;
    size_t od, os;
    const emu_mem *md = emu_dev_find(dst, n, &od), *ms = emu_dev_find(src, n, &os);
    if (!md || !ms) return ERR_INVALID_VALUE;
    emu_graph *g = recording(s);
    if (g) return record_move(g, NODE_COPY, dst, src, n);
    emu_dev_clear_findings();
    emu_touch tt[2] = {{src, n, false}, {dst, n, true}};
    if (!emu_dev_stream_touch(s, "a device copy (cuMemcpyDtoDAsync)", 2, tt)) return ERR_LAUNCH_FAILED;
    memmove(md->base + od, ms->base + os, n);
    memmove(md->init + od, ms->init + os, n);
    return CUDA_SUCCESS;
}

static CUresult e_memset32(CUdeviceptr dst, unsigned v, size_t n, CUstream s) {
    size_t off;
    const emu_mem *m = emu_dev_find(dst, 4 * n, &off);
    if (!m || dst % 4) return ERR_INVALID_VALUE;
    emu_graph *g = recording(s);
    if (g) return record_move(g, NODE_MEMSET, dst, v, n);
    emu_dev_clear_findings();
    emu_touch tt[1] = {{dst, 4 * n, true}};
    if (!emu_dev_stream_touch(s, "a memset (cuMemsetD32Async)", 1, tt)) return ERR_LAUNCH_FAILED;
    for (size_t i = 0; i < n; i++) memcpy(m->base + off + 4 * i, &v, 4);
    memset(m->init + off, 1, 4 * n);
    return CUDA_SUCCESS;
}

/* Streams and events: launches run to completion before they return, so a
 * stream orders nothing more; an event records when it was reached. */
static CUresult e_stream_create(CUstream *s, unsigned flags) {
    (void)flags;
    emu_stream *x = calloc(1, sizeof(emu_stream));
    *s = x;
    if (!x) return ERR_OUT_OF_MEMORY;
    x->sid = -1;
    for (int i = 0; i < EMU_MAX_STREAMS && x->sid < 0; i++)
        if (!order.streams[i]) {
            x->sid = i;
            order.streams[i] = x;
            memcpy(x->vc, order.host, sizeof x->vc);   /* after what the host has waited for */
        }
    return CUDA_SUCCESS;
}
/* A wait that would block forever on a GPU: the injected hang's launch
 * never completes. Reported (the runtime's watchdog should have stopped
 * waiting) instead of blocking the process. */
static CUresult blocked(const char *call) {
    emu_dev_finding("hang", "%s waits for a launch that never completes (MCIR_EMU_HANG): on a GPU this "
                    "blocks forever", call);
    return ERR_LAUNCH_TIMEOUT;
}
static CUresult e_stream_sync(CUstream s) {
    if (capture_forbids(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    CUresult rc = dev.sticky ? dev.sticky : dev.hung ? blocked("cuStreamSynchronize") : CUDA_SUCCESS;
    emu_stream *x = s;
    if (rc == CUDA_SUCCESS && x && x->sid >= 0) vc_join(order.host, x->vc);
    return rc;
}
static CUresult e_stream_destroy(CUstream s) {
    emu_stream *x = s;
    if (x && x->sid >= 0) {   /* its slot free again: its records and every clock's column of it go */
        int k = 0, sid = x->sid;
        for (int i = 0; i < order.n; i++)
            if (order.log[i].sid != sid) order.log[k++] = order.log[i];
        order.n = k;
        order.streams[sid] = NULL;
        order.host[sid] = 0;
        for (int i = 0; i < EMU_MAX_STREAMS; i++)
            if (order.streams[i]) order.streams[i]->vc[sid] = 0;
    }
    if (x && x->capture) {   /* a capture never ended: its record goes with the stream */
        if (dev.capturing == x) dev.capturing = NULL;
        graph_free(x->graph);
    }
    free(s);
    return CUDA_SUCCESS;
}
static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}
/* The runtime's clock for its waits (cuda_driver.h emu_clock / emu_nap):
 * the monotonic clock plus every nap the runtime took, each returning at
 * once. Nothing here runs in the background, so waiting cannot make a
 * launch progress: the only thing a nap may change is how late it is. */
static _Atomic long long napped_us;
static double emu_clock(void) { return 1e-3 * now_ms() + 1e-6 * (double)napped_us; }
static void emu_nap(unsigned us) { napped_us += us; }
typedef struct emu_event {
    double ms;
    bool pending;   /* recorded after a launch that never completes */
    unsigned vc[EMU_MAX_STREAMS];   /* its stream's clock when recorded */
} emu_event;
static CUresult e_event_create(CUevent *e, unsigned flags) {
    (void)flags;
    *e = calloc(1, sizeof(emu_event));
    return *e ? CUDA_SUCCESS : ERR_OUT_OF_MEMORY;
}
static CUresult e_event_record(CUevent e, CUstream s) {
    emu_event *x = e;
    emu_stream *st = s;
    x->ms = now_ms();
    x->pending = dev.hung;
    memset(x->vc, 0, sizeof x->vc);
    if (st && st->sid >= 0) {
        vc_join(st->vc, order.host);
        memcpy(x->vc, st->vc, sizeof x->vc);
    } else if (!st) {   /* the legacy stream: after every blocking stream's work */
        for (int i = 0; i < EMU_MAX_STREAMS; i++)
            if (order.streams[i]) vc_join(x->vc, order.streams[i]->vc);
    }
    return dev.sticky;
}
static CUresult e_event_query(CUevent e) {
    const emu_event *x = e;
    if (capture_forbids(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    CUresult rc = dev.sticky ? dev.sticky : x->pending ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS) vc_join(order.host, x->vc);   /* the host saw it complete */
    return rc;
}
static CUresult e_event_sync(CUevent e) {
    const emu_event *x = e;
    if (capture_forbids(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    CUresult rc = dev.sticky ? dev.sticky : x->pending ? blocked("cuEventSynchronize") : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS) vc_join(order.host, x->vc);
    return rc;
}
/* cuStreamWaitEvent: what the stream issues from now on is ordered after
 * the event's work (a capture orders nothing: its replay is one stream). */
static CUresult e_stream_wait_event(CUstream st, CUevent ev, unsigned flags) {
    emu_stream *s = st;
    const emu_event *x = ev;
    if (flags || !x) return ERR_INVALID_VALUE;
    if (recording(st)) return CUDA_SUCCESS;
    if (s && s->sid >= 0) vc_join(s->vc, x->vc);
    return dev.sticky;
}
static CUresult e_event_destroy(CUevent e) {
    free(e);
    return CUDA_SUCCESS;
}
static CUresult e_event_elapsed(float *ms, CUevent a, CUevent b) {
    const emu_event *x = a, *y = b;
    if (dev.sticky) return dev.sticky;
    if (x->pending || y->pending) return CUDA_ERROR_NOT_READY;
    *ms = (float)(y->ms - x->ms);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ modules */

static const char IMAGE_MAGIC[8] = "MCIREMU1";

/* The declared name of a static __shared__ array from its symbol: a
 * function's static local is mangled _ZZ<function>E<length><name>[_<n>]
 * (Itanium ABI), a namespace-scope one is its name. */
static void smem_symbol_name(const char *sym, char *out, size_t n) {
    snprintf(out, n, "%s", sym);
    if (strncmp(sym, "_ZZ", 3) != 0) return;
    size_t len = strlen(sym);
    for (size_t i = len; i-- > 3;) {   /* the last E<digits><name> that ends the symbol or a discriminator */
        if (sym[i] != 'E') continue;
        char *end;
        unsigned long l = strtoul(sym + i + 1, &end, 10);
        if (end == sym + i + 1 || l == 0 || (size_t)(end - sym) + l > len) continue;
        const char *rest = end + l;
        if (*rest && *rest != '_') continue;
        snprintf(out, n, "%.*s", (int)l, end);
        return;
    }
}

/* The static __shared__ arrays of a module image (an ELF shared object):
 * the symbols of its emu_smem section, by offset in the section. */
static void module_smem_symbols(emu_module *m, const unsigned char *img, size_t size) {
    if (size < sizeof(Elf64_Ehdr)) return;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > size ||
        (size - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum || eh->e_shstrndx >= eh->e_shnum)
        return;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    const Elf64_Shdr *names = &sh[eh->e_shstrndx];
    if (names->sh_offset > size || names->sh_size > size - names->sh_offset) return;
    int smem = -1, symtab = -1;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_name >= names->sh_size) continue;
        const char *nm = (const char *)img + names->sh_offset + sh[i].sh_name;
        if (strnlen(nm, names->sh_size - sh[i].sh_name) == names->sh_size - sh[i].sh_name) continue;
        if (!strcmp(nm, "emu_smem")) smem = i;
        if (sh[i].sh_type == SHT_SYMTAB) symtab = i;
    }
    if (smem < 0 || symtab < 0 || sh[symtab].sh_link >= eh->e_shnum) return;
    const Elf64_Shdr *st = &sh[symtab], *str = &sh[st->sh_link];
    if (st->sh_offset > size || st->sh_size > size - st->sh_offset || str->sh_offset > size ||
        str->sh_size > size - str->sh_offset)
        return;
    const Elf64_Sym *sym = (const Elf64_Sym *)(img + st->sh_offset);
    size_t nsym = st->sh_size / sizeof *sym, text = 0, cap = 0;
    for (size_t i = 0; i < nsym; i++)
        if (sym[i].st_shndx == smem && sym[i].st_size) cap++;
    if (!cap) return;
    m->smem = calloc(cap, sizeof *m->smem);
    m->smem_names = malloc(cap * 64);
    MCIR_ASSERT(m->smem && m->smem_names);
    for (size_t i = 0; i < nsym && (size_t)m->n_smem < cap; i++) {
        if (sym[i].st_shndx != smem || !sym[i].st_size || sym[i].st_name >= str->sh_size) continue;
        const char *nm = (const char *)img + str->sh_offset + sym[i].st_name;
        if (strnlen(nm, str->sh_size - sym[i].st_name) == str->sh_size - sym[i].st_name) continue;
        char *out = m->smem_names + text;
        smem_symbol_name(nm, out, 64);
        text += 64;
        m->smem[m->n_smem++] = (emu_smem_symbol){.offset = (size_t)(sym[i].st_value - sh[smem].sh_addr),
                                                 .bytes = (size_t)sym[i].st_size, .name = out};
    }
}

static CUresult e_module_load(CUmodule *mod, const void *image) {
    *mod = NULL;
    const unsigned char *img = image;
    if (!img || memcmp(img, IMAGE_MAGIC, 8) != 0) {
        emu_dev_clear_findings();
        emu_dev_finding("hang", "cuModuleLoadData: not an emulator module (a cubin for a GPU?)");
        return ERR_INVALID_IMAGE;
    }
    uint64_t size;
    memcpy(&size, img + 8, 8);
    const char *tmp = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/mcir-emu-module-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) return ERR_INVALID_IMAGE;
    bool ok = write(fd, img + 16, (size_t)size) == (ssize_t)size;
    ok = close(fd) == 0 && ok;
    void *lib = ok ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    unlink(path);
    if (!lib) return ERR_INVALID_IMAGE;
    emu_module *m = calloc(1, sizeof *m);
    MCIR_ASSERT(m != NULL);
    m->lib = lib;
    *(void **)&m->run = dlsym(lib, "emu_run");
    if (!m->run) {
        dlclose(lib);
        free(m);
        return ERR_INVALID_IMAGE;
    }
    module_smem_symbols(m, img + 16, (size_t)size);
    *mod = m;
    return CUDA_SUCCESS;
}

static CUresult e_module_unload(CUmodule mod) {
    emu_module *m = mod;
    if (!m) return ERR_INVALID_VALUE;
    while (m->functions) {
        emu_function *f = m->functions;
        m->functions = f->next;
        free(f);
    }
    dlclose(m->lib);
    free(m->smem);
    free(m->smem_names);
    free(m);
    return CUDA_SUCCESS;
}

static CUresult e_module_function(CUfunction *f, CUmodule mod, const char *name) {
    emu_module *m = mod;
    char sym[200];
    snprintf(sym, sizeof sym, "%s__emu", name);
    void *body = dlsym(m->lib, sym);
    snprintf(sym, sizeof sym, "%s__emu_params", name);
    const char *params = dlsym(m->lib, sym);
    snprintf(sym, sizeof sym, "%s__emu_cluster", name);   /* __cluster_dims__: blocks per cluster */
    const unsigned *cluster = dlsym(m->lib, sym);
    if (!body || !params) return ERR_NOT_FOUND;
    emu_function *fn = calloc(1, sizeof *fn);
    MCIR_ASSERT(fn != NULL);
    fn->module = m;
    *(void **)&fn->body = body;
    fn->params = params;
    fn->cluster = cluster && *cluster > 1 ? *cluster : 1;
    snprintf(fn->name, sizeof fn->name, "%s", name);
    fn->max_dynamic_smem = 48 * 1024;
    fn->next = m->functions;
    m->functions = fn;
    *f = fn;
    return CUDA_SUCCESS;
}

static CUresult e_func_attribute(CUfunction f, int attr, int value) {
    emu_function *fn = f;
    if (attr != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return ERR_INVALID_VALUE;
    if (value < 0 || value > dev.smem_optin) return ERR_INVALID_VALUE;
    fn->max_dynamic_smem = value;
    return CUDA_SUCCESS;
}

/* cuLaunchKernel: the launcher's parameter string says what each kernel
 * parameter is — r (a pointer read), w (written), m (a tensor map by
 * value), d (a dimension's value, an i64), each followed by the element bytes — so the emulator knows the
 * buffers (named as the runtime named their ranges), which it writes, and
 * where 1-byte elements need the race shadow per byte. */
/* The bytes of each parameter's value as the launcher's string says:
 * r / w a pointer, m a tensor map (128 bytes), any other letter a value of
 * as many bytes as its digit; 0 where the string is not understood. */
static size_t param_bytes(const char *p) {
    if (*p == 'r' || *p == 'w') return sizeof(CUdeviceptr);
    if (*p == 'm') return 128;
    return p[1] >= '1' && p[1] <= '9' ? (size_t)(p[1] - '0') : 0;
}

static CUresult launch_run(emu_function *fn, unsigned gx, unsigned bx, unsigned smem, void **params);

/* A launch captured: the function, its configuration and a copy of its
 * parameters' values (cuLaunchKernel copies them; a replay passes the
 * copies). */
static CUresult capture_launch(emu_graph *g, emu_function *fn, unsigned gx, unsigned bx, unsigned smem,
                               void **params) {
    size_t total = 0;
    int n = 0;
    for (const char *p = fn->params; *p; p += 2, n++) {
        size_t b = param_bytes(p);
        if (!b) {
            emu_dev_finding("hang", "%s: cannot capture parameter %d ('%c%c' in its launcher's string)", fn->name, n,
                            p[0], p[1]);
            return ERR_INVALID_VALUE;
        }
        total += (b + 63) / 64 * 64;   /* each value 64-byte aligned, as a tensor map must be */
    }
    emu_node *x = graph_add(g, NODE_LAUNCH);
    x->fn = fn;
    x->grid = gx;
    x->block = bx;
    x->smem = smem;
    x->values = aligned_alloc(64, total ? total : 64);
    MCIR_ASSERT(x->values != NULL);
    x->n_values = total;
    size_t at = 0;
    n = 0;
    for (const char *p = fn->params; *p; p += 2, n++) {
        memcpy(x->values + at, params[n], param_bytes(p));
        at += (param_bytes(p) + 63) / 64 * 64;
    }
    dev.calls.captured++;
    return CUDA_SUCCESS;
}

static CUresult e_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned smem, CUstream s, void **params, void **extra) {
    emu_function *fn = f;
    dev.calls.launch_kernel++;
    emu_dev_clear_findings();
    if (dev.sticky) return dev.sticky;   /* a context with an error runs nothing more */
    if (extra || gy != 1 || gz != 1 || by != 1 || bz != 1 || gx == 0 || bx == 0 || bx > 1024) {
        emu_dev_finding("hang", "%s: a launch of %ux%ux%u blocks of %ux%ux%u threads (the emulator runs 1-D grids "
                        "and blocks of at most 1024 threads)", fn->name, gx, gy, gz, bx, by, bz);
        return ERR_INVALID_VALUE;
    }
    if ((int64_t)smem > fn->max_dynamic_smem) {
        emu_dev_finding("out-of-bounds", "%s: %u bytes of dynamic shared memory, the function allows %d "
                        "(cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES)", fn->name, smem, fn->max_dynamic_smem);
        return ERR_LAUNCH_OUT_OF_RESOURCES;
    }
    emu_graph *g = recording(s);
    if (g) return capture_launch(g, fn, gx, bx, smem, params);
    /* the buffers its pointer parameters name, for the order between streams */
    emu_touch touch[64];
    int nt = 0, k = 0;
    for (const char *p = fn->params; *p && nt < 64; p += 2, k++)
        if (*p == 'r' || *p == 'w') touch[nt++] = (emu_touch){(uintptr_t) * (void **)params[k], 0, *p == 'w'};
    char who[160];
    snprintf(who, sizeof who, "kernel %s", fn->name);
    if (!emu_dev_stream_touch(s, who, nt, touch)) return ERR_LAUNCH_FAILED;
    return launch_run(fn, gx, bx, smem, params);
}

/* A launch's run: every block (or the capped grid) with the device's
 * checks, its record in the log. */
static CUresult launch_run(emu_function *fn, unsigned gx, unsigned bx, unsigned smem, void **params) {
    if (dev.sticky) return dev.sticky;
    if (dev.hung) return CUDA_SUCCESS;   /* queued behind the launch that never completes */
    /* injected failures, as a GPU shows them: the launch returns at once;
     * a fault is seen by the next call that waits (the sticky error), a
     * hang by nothing ever completing */
    const char *inject = getenv("MCIR_EMU_HANG");
    if (inject && *inject && strstr(fn->name, inject)) {
        dev.hung = true;
        return CUDA_SUCCESS;
    }
    inject = getenv("MCIR_EMU_FAULT");
    bool fault = inject && *inject && strstr(fn->name, inject);
    if (fault) {
        dev.sticky = ERR_ILLEGAL_ADDRESS;
        return CUDA_SUCCESS;
    }
    enum { MAX_ARGS = 64 };
    void *args[MAX_ARGS];
    int arg_buffer[MAX_ARGS], n_args = 0;
    unsigned long long write_args = 0;
    emu_buffer *bufs = calloc((size_t)(MAX_ARGS + dev.n_allocs + 1), sizeof *bufs);
    MCIR_ASSERT(bufs != NULL);
    int nb = 0, checks = dev.checks;
    char names[MAX_ARGS][160];
    for (const char *p = fn->params; *p && n_args < MAX_ARGS; p += 2) {
        int k = n_args++;
        if (*p == 'm' || *p == 'd') {   /* a tensor map (the emulator reads the struct), a dim's value */
            args[k] = params[k];
            arg_buffer[k] = -1;
            continue;
        }
        uintptr_t ptr = (uintptr_t) * (void **)params[k];
        args[k] = (void *)ptr;
        if (*p == 'w') write_args |= 1ull << k;
        if (p[1] == '1' && (checks & EMU_CHECK_RACES)) checks |= EMU_CHECK_BYTES;   /* 1-byte elements: per-byte race shadow */
        uintptr_t start;
        size_t bytes;
        const char *name = emu_dev_name_of(ptr, &start, &bytes);
        size_t off;
        const emu_mem *m = emu_dev_find(start, 0, &off);
        if (m && start == ptr && off + bytes > m->bytes) bytes = m->bytes - off;   /* a name past its allocation */
        if (!m || start != ptr) {   /* no named range starts here: the allocation holding it */
            m = emu_dev_find(ptr, 0, &off);
            off = 0;
            start = m ? (uintptr_t)m->base : ptr;
            bytes = m ? m->bytes : 0;
            snprintf(names[k], sizeof names[k], "%s", m ? "device memory" : "no device memory");
        } else {
            snprintf(names[k], sizeof names[k], "%s", name);
        }
        arg_buffer[k] = nb;
        bufs[nb++] = (emu_buffer){.name = names[k], .base = (unsigned char *)start, .bytes = bytes,
                                  .init = m ? m->init + off : NULL};
    }
    for (int i = 0; i < dev.n_allocs; i++)   /* tensor-map bases and the rest: by address */
        bufs[nb++] = (emu_buffer){.name = "device memory", .base = dev.allocs[i].base, .bytes = dev.allocs[i].bytes,
                                  .init = dev.allocs[i].init};
    char messages[4096] = "";
    /* the capped grid: whole clusters */
    unsigned grid = dev.max_blocks && gx > dev.max_blocks ? dev.max_blocks : gx;
    if (grid < gx && fn->cluster > 1) grid = grid > fn->cluster ? grid / fn->cluster * fn->cluster : fn->cluster;
    emu_launch L = {.kernel = fn->name, .body = fn->body, .args = args, .body_args = params, .n_args = n_args,
                    .grid = grid, .block = bx, .smem = smem, .cluster = fn->cluster, .write_args = write_args, .buffers = bufs,
                    .n_buffers = nb, .arg_buffer = arg_buffer, .checks = checks, .quiet = 1,
                    .messages = messages, .messages_size = sizeof messages,
                    .smem_symbols = fn->module->smem, .n_smem_symbols = fn->module->n_smem};
    double t0 = now_ms();
    int rc = fn->module->run(&L);
    free(bufs);
    if (dev.n_log == dev.cap_log) {
        dev.cap_log = dev.cap_log ? 2 * dev.cap_log : 64;
        dev.log = realloc(dev.log, sizeof *dev.log * (size_t)dev.cap_log);
        MCIR_ASSERT(dev.log != NULL);
    }
    mcir_emu_launch_record *rec = &dev.log[dev.n_log++];
    memset(rec, 0, sizeof *rec);
    snprintf(rec->kernel, sizeof rec->kernel, "%s", fn->name);
    rec->grid = grid;
    rec->block = bx;
    rec->smem = smem;
    rec->seconds = (now_ms() - t0) * 1e-3;
    rec->bytes_read = L.stats.bytes_read;
    rec->bytes_written = L.stats.bytes_written;
    rec->wgmma = L.stats.wgmma;
    rec->tma_loads = L.stats.tma_loads;
    rec->tma_stores = L.stats.tma_stores;
    memcpy(rec->findings, L.findings, sizeof rec->findings);
    if (rc != 0) {
        snprintf(dev.findings, sizeof dev.findings, "%s", messages[0] ? messages : "hang: the launch failed\n");
        return ERR_LAUNCH_FAILED;
    }
    return CUDA_SUCCESS;
}

/* cuStreamBeginCapture_v2 ... cuGraphDestroy: see "graph capture" above. */
static CUresult e_begin_capture(CUstream s, int mode) {
    emu_stream *x = s;
    if (!x || x->capture || dev.capturing || mode != CU_STREAM_CAPTURE_MODE_GLOBAL) return ERR_ILLEGAL_STATE;
    x->graph = calloc(1, sizeof *x->graph);
    MCIR_ASSERT(x->graph != NULL);
    x->capture = CAPTURE_ACTIVE;
    dev.capturing = x;
    dev.calls.begin_capture++;
    return CUDA_SUCCESS;
}

static CUresult e_end_capture(CUstream s, CUgraph *graph) {
    emu_stream *x = s;
    *graph = NULL;
    if (!x || !x->capture) return ERR_ILLEGAL_STATE;
    bool valid = x->capture == CAPTURE_ACTIVE;
    x->capture = CAPTURE_NONE;
    if (dev.capturing == x) dev.capturing = NULL;
    if (!valid) {
        graph_free(x->graph);
        x->graph = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *graph = x->graph;
    x->graph = NULL;
    return CUDA_SUCCESS;
}

static CUresult e_graph_instantiate(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
    const emu_graph *g = graph;
    *exec = NULL;
    if (!g || flags) return ERR_INVALID_VALUE;
    emu_graph *copy = calloc(1, sizeof *copy);
    MCIR_ASSERT(copy != NULL);
    for (int i = 0; i < g->n; i++) {
        emu_node *n = graph_add(copy, g->nodes[i].kind);
        *n = g->nodes[i];
        if (n->values) {
            n->values = aligned_alloc(64, (n->n_values + 63) / 64 * 64 + 64);
            MCIR_ASSERT(n->values != NULL);
            memcpy(n->values, g->nodes[i].values, g->nodes[i].n_values);
        }
    }
    dev.calls.instantiate++;
    *exec = copy;
    return CUDA_SUCCESS;
}

/* The record in order on the stream; the first node that fails ends the
 * replay with its error (and its findings). */
static CUresult e_graph_launch(CUgraphExec exec, CUstream s) {
    const emu_graph *g = exec;
    if (!g) return ERR_INVALID_VALUE;
    if (recording(s)) return ERR_ILLEGAL_STATE;   /* child graphs: not modelled */
    dev.calls.graph_launch++;
    emu_dev_clear_findings();
    if (dev.sticky) return dev.sticky;
    for (int i = 0; i < g->n; i++) {
        const emu_node *n = &g->nodes[i];
        CUresult rc = CUDA_SUCCESS;
        switch (n->kind) {
        case NODE_NAME: emu_name(n->dst, n->bytes, n->name); break;
        case NODE_COPY: rc = e_dtod(n->dst, n->src, n->bytes, NULL); break;
        case NODE_MEMSET: rc = e_memset32(n->dst, (unsigned)n->src, n->bytes, NULL); break;
        case NODE_CALL: rc = dev.hung ? 0 : n->call(n->values) ? ERR_LAUNCH_FAILED : CUDA_SUCCESS; break;
        case NODE_LAUNCH: {
            enum { MAX_PARAMS = 64 };
            void *params[MAX_PARAMS];
            size_t at = 0;
            int k = 0;
            for (const char *p = n->fn->params; *p && k < MAX_PARAMS; p += 2, k++) {
                params[k] = n->values + at;
                at += (param_bytes(p) + 63) / 64 * 64;
            }
            rc = launch_run(n->fn, n->grid, n->block, n->smem, params);
            break;
        }
        }
        if (rc != CUDA_SUCCESS) return rc;
    }
    return dev.sticky;
}

static CUresult e_graph_exec_destroy(CUgraphExec exec) {
    graph_free(exec);
    return CUDA_SUCCESS;
}

static CUresult e_graph_destroy(CUgraph graph) {
    graph_free(graph);
    return CUDA_SUCCESS;
}

static CUresult e_tensor_map(void *map, int dtype, unsigned rank, void *base, const unsigned long long *dims,
                             const unsigned long long *strides, const unsigned *box, const unsigned *elem_strides,
                             int interleave, int swizzle, int l2promotion, int oobfill) {
    return emu_tensor_map_encode_tiled(map, dtype, rank, base, dims, strides, box, elem_strides, interleave, swizzle,
                                       l2promotion, oobfill) == 0
               ? CUDA_SUCCESS
               : ERR_INVALID_VALUE;
}

static CUresult e_error_string(CUresult rc, const char **s) {
    switch (rc) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case ERR_INVALID_VALUE: *s = "invalid argument"; break;
    case ERR_OUT_OF_MEMORY: *s = "out of memory"; break;
    case ERR_INVALID_IMAGE: *s = "device kernel image is invalid"; break;
    case ERR_NOT_FOUND: *s = "named symbol not found"; break;
    case ERR_LAUNCH_OUT_OF_RESOURCES: *s = "too many resources requested for launch"; break;
    case ERR_LAUNCH_FAILED: *s = "unspecified launch failure (the emulator found what follows)"; break;
    default: *s = "CUDA error"; break;
    }
    return CUDA_SUCCESS;
}

static mcir_cu_driver table = {
    .cuInit = e_init,
    .cuDriverGetVersion = e_driver_version,
    .cuDeviceGetCount = e_device_count,
    .cuDeviceGet = e_device_get,
    .cuDeviceGetName = e_device_name,
    .cuDeviceGetAttribute = e_device_attribute,
    .cuDeviceTotalMem_v2 = e_total_mem,
    .cuDevicePrimaryCtxRetain = e_ctx_retain,
    .cuDevicePrimaryCtxRelease_v2 = e_ctx_release,
    .cuCtxSetCurrent = e_ctx_set,
    .cuModuleLoadData = e_module_load,
    .cuModuleUnload = e_module_unload,
    .cuModuleGetFunction = e_module_function,
    .cuFuncSetAttribute = e_func_attribute,
    .cuLaunchKernel = e_launch,
    .cuMemAlloc_v2 = e_mem_alloc,
    .cuMemFree_v2 = e_mem_free,
    .cuMemGetInfo_v2 = e_mem_info,
    .cuMemcpyHtoD_v2 = e_htod,
    .cuMemcpyDtoH_v2 = e_dtoh,
    .cuMemcpyDtoDAsync_v2 = e_dtod,
    .cuMemsetD32Async = e_memset32,
    .cuStreamCreate = e_stream_create,
    .cuStreamSynchronize = e_stream_sync,
    .cuStreamDestroy_v2 = e_stream_destroy,
    .cuStreamWaitEvent = e_stream_wait_event,
    .cuEventCreate = e_event_create,
    .cuEventRecord = e_event_record,
    .cuEventSynchronize = e_event_sync,
    .cuEventQuery = e_event_query,
    .cuEventDestroy_v2 = e_event_destroy,
    .cuEventElapsedTime = e_event_elapsed,
    .cuStreamBeginCapture_v2 = e_begin_capture,
    .cuStreamEndCapture = e_end_capture,
    .cuGraphInstantiateWithFlags = e_graph_instantiate,
    .cuGraphLaunch = e_graph_launch,
    .cuGraphExecDestroy = e_graph_exec_destroy,
    .cuGraphDestroy = e_graph_destroy,
    .cuGetErrorString = e_error_string,
    .cuTensorMapEncodeTiled = e_tensor_map,
    .emulated = "emu",
    .emu_name = emu_name,
    .emu_findings = emu_findings,
    .emu_clock = emu_clock,
    .emu_nap = emu_nap,
    .blas = &emu_blas_api,
    .coll = &emu_coll_api,
};

/* MCIR_EMU_PROFILE: the functions that took the most time, at exit. */
static void profile_report(void) {
    typedef struct { const char *name; double s; int n; } agg;
    agg *a = calloc((size_t)dev.n_log + 1, sizeof *a);
    int na = 0;
    double total = 0;
    for (int i = 0; a && i < dev.n_log; i++) {
        int j = 0;
        while (j < na && strcmp(a[j].name, dev.log[i].kernel) != 0) j++;
        if (j == na) a[na++] = (agg){dev.log[i].kernel, 0, 0};
        a[j].s += dev.log[i].seconds;
        a[j].n++;
        total += dev.log[i].seconds;
    }
    for (int i = 0; i < na; i++)   /* by time, descending */
        for (int j = i + 1; j < na; j++)
            if (a[j].s > a[i].s) {
                agg t = a[i];
                a[i] = a[j];
                a[j] = t;
            }
    fprintf(stderr, "emu profile: %d launches, %.2f s in kernels\n", dev.n_log, total);
    for (int i = 0; i < na && i < 15; i++)
        fprintf(stderr, "  %8.3f s %5d x %s\n", a[i].s, a[i].n, a[i].name);
    free(a);
}

const mcir_cu_driver *mcir_emu_driver(const char *arch, char *why, size_t n) {
    if (!mcir_emu_available(why, n)) return NULL;
    const char *as = getenv("MCIR_EMU_ARCH");   /* a device of another compute capability */
    if (as && *as) arch = as;
    const mcir_target *t = mcir_target_find(arch ? arch : MCIR_DEFAULT_ARCH);
    if (!t) {
        if (why) snprintf(why, n, "no target %s to model", arch);
        return NULL;
    }
    if (!dev.made || strcmp(dev.arch, t->name) != 0) {
        dev.made = true;
        snprintf(dev.arch, sizeof dev.arch, "%s", t->name);
        dev.major = atoi(t->name + 3) / 10;
        dev.minor = atoi(t->name + 3) % 10;
        dev.l2_bytes = (int)t->l2_bytes;
        dev.smem_optin = t->smem_per_block_optin;
        snprintf(dev.name, sizeof dev.name, "mcir emulator (%s model, CPU)", t->name);
        const char *e = getenv("MCIR_EMU_MAX_BLOCKS");
        if (e && atoi(e) > 0) dev.max_blocks = (unsigned)atoi(e);
        static bool profiling;
        if (getenv("MCIR_EMU_PROFILE") && !profiling) profiling = !atexit(profile_report);
        e = getenv("MCIR_EMU_CHECKS");   /* 0: the checks off (to time them) */
        dev.checks = e && *e ? atoi(e) & EMU_CHECK_ALL : EMU_CHECK_ALL;
    }
    if (why && n) why[0] = 0;
    return &table;
}

bool emu_dev_init_checked(void) { return (dev.checks & EMU_CHECK_INIT) != 0; }

int mcir_emu_launches(const mcir_emu_launch_record **records) {
    *records = dev.log;
    return dev.n_log;
}

void mcir_emu_reset_launches(void) {
    dev.n_log = 0;
    memset(&dev.calls, 0, sizeof dev.calls);
}

void mcir_emu_call_counts(mcir_emu_calls *out) { *out = dev.calls; }

void mcir_emu_set_max_blocks(unsigned max_blocks) { dev.max_blocks = max_blocks; }
