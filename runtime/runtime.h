/*
 * runtime.h — runs a compiled plan on a device: device memory laid out by
 * the memory plan, kernels launched in plan order on one stream, outputs
 * copied back into the environment. One runtime over one driver table
 * (runtime/cuda_driver.h) with two devices: the CUDA driver and cuBLAS,
 * loaded with dlopen (nothing links to them, so every program starts and
 * its CPU path works where there is no driver), or the emulator (emu/emu.h),
 * which runs the same launches on the CPU with its checks.
 *
 * Layering (docs/architecture.md): codegen/ makes the modules
 * (codegen/module.h) and never calls a driver; runtime/ executes them; emu/
 * is a device of runtime/ and depends on nothing above it.
 *
 * Usage:
 *     mcir_codegen *cg = mcir_codegen_new(plan, mem, &d);   // codegen.h
 *     if (mcir_gpu_available(why, sizeof why)) {
 *         mcir_env *env = mcir_env_new(g, seed);
 *         mcir_gpu_stats st;
 *         if (!mcir_gpu_run(cg, env, MCIR_ALLOC_POOL, &st, &d)) return 3;
 *         float *y = mcir_env_get(env, g->outputs[0]);
 *     }
 *
 * Repeated steps (a decode loop, a training step) open a session once and
 * step it; with graphs on, the first step also captures the launches into
 * a CUDA graph and every step replays it with one cuGraphLaunch:
 *     mcir_gpu_session_options o = {.mode = MCIR_ALLOC_POOL, .graphs = 1};
 *     mcir_gpu_session *s = mcir_gpu_session_open(cg, env, &o, &d);
 *     for (int step = 0; s && step < n; step++) {
 *         mcir_env_set(env, x, next_input(step));       // new inputs each step
 *         if (!mcir_gpu_session_step(s, env, NULL, &st, &d)) break;
 *         use(mcir_env_get(env, g->outputs[0]));
 *     }
 *     mcir_gpu_session_close(s);
 *
 * Invariants: a session is open (context, modules, cuBLAS handles,
 * workspace, arena, weights uploaded) → steps (inputs in, launch, outputs
 * copied back) → close (runtime.c); mcir_gpu_run is one session of one
 * step. Everything it allocates on the device or the host is released on
 * every path, and a failure is one diagnostic naming the driver call, file
 * and line.
 */
#ifndef MCIR_RUNTIME_H
#define MCIR_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/codegen.h"
#include "mcir/mcir.h"

/* Where intermediates live on the device: POOL, the memory plan's arena
 * pools (the default); LAZY, one allocation each between the kernels that
 * first and last touch it; EAGER, one each for the whole run. */
typedef enum { MCIR_ALLOC_POOL, MCIR_ALLOC_LAZY, MCIR_ALLOC_EAGER } mcir_alloc_mode;
const char *mcir_alloc_mode_name(mcir_alloc_mode m);
/* "pool", "lazy", "eager"; false for anything else. */
bool mcir_alloc_mode_parse(const char *s, mcir_alloc_mode *out);

typedef struct {
    int64_t peak_device_bytes;  /* arena/tensors + weights + inputs/outputs + library workspace */
    double elapsed_ms;          /* launches of the plan, stream-timed */
    char device_name[128];
    int64_t workspace_bytes;    /* cuBLASLt's workspace (part of the peak) */
    int lt_fallbacks;           /* GEMMs cuBLASLt had no algorithm for: the generated kernel ran them */
    double host_us;             /* host time to issue the step's launches (per-step CPU overhead; on the
                                 * emulator it includes the kernels, which run as they are issued) */
    bool graph;                 /* the step ran as a CUDA graph (captured at the first step, replayed) */
    double capture_us;          /* a graph step at new sizes: host time of its warm-up launches and the capture */
    int graph_sizes;            /* the graphs the session holds, one per size stepped at (at most 8) */
    int recaptures;             /* graphs captured after the session's first: at new sizes, or again after
                                 * one was given up (the session's total) */
    int overlapped;             /* ranks: kernels launched while a collective ran on the second stream
                                 * (rank 0's; -1: the collectives ran on the kernels' stream) */
} mcir_gpu_stats;

/* The driver loads (dlopen libcuda.so.1), cuInit succeeds, a device exists.
 * Otherwise false and why. */
bool mcir_gpu_available(char *why, size_t n);
/* True when cuBLAS loads (dlopen libcublas.so.13 / .12). */
bool mcir_cublas_available(char *why, size_t n);

/* Runs the compiled plan on device 0 (compiling it for the device's arch
 * first where it was compiled for another): inputs from env, or seeded
 * with env's seed as the interpreter seeds them; weights from their data,
 * or seeded with seed 0; outputs written back into env. A graph with
 * ranks: every rank from this process (its collectives through NCCL or
 * the emulated device's), this process's rank under a launcher
 * (mcir_runtime_set_launch), or — env made by mcir_env_new_member — this
 * process's rank of an outside group, each collective staged through the
 * host to the group's function. */
bool mcir_gpu_run(mcir_codegen *cg, mcir_env *env, mcir_alloc_mode mode,
                  mcir_gpu_stats *stats, mcir_diag *d);

/* As mcir_gpu_run, with graph inputs and outputs in the caller's device
 * memory (device 0, its primary context: a framework's CUDA tensors):
 * bound[t->id], for t an input or output of the graph, is the device
 * address of its bytes (storage dtype, C order), or 0 for "as mcir_gpu_run
 * does". Bound inputs are read where they are and bound outputs written
 * there (an output that is a view of another tensor is copied on the
 * device); nothing of them passes through env or the host. The caller's
 * work on those buffers must be complete before the call (synchronise
 * your stream); the run's own is when it returns. */
bool mcir_gpu_run_bound(mcir_codegen *cg, mcir_env *env, const uint64_t *bound,
                        mcir_alloc_mode mode, mcir_gpu_stats *stats, mcir_diag *d);

/* The same run on the emulated device (emu/emu.h), modelled on the plan's
 * target: the runtime's every step — arena, allocation modes, tensor maps,
 * cuBLAS / cuBLASLt calls, launches — with the kernels built for the CPU
 * emulator by the host C++ compiler (cached like cubins) and run with its
 * race, bounds, uninitialised-read and hang checks. A finding fails the run
 * with one diagnostic per finding, "KERNEL: error: KIND: WHAT"
 * (KIND race | out-of-bounds | uninitialised | hang). */
/* One process a rank (runtime/launch.h: torchrun's environment): runs of
 * a graph with ranks from now on run this process's rank only — env holds
 * its values (mcir_env_new_member), the collectives go through NCCL's
 * ncclCommInitRank with rank 0's id sent over r (GPUs), or through r
 * itself (the emulated device). NULL: every rank in this process again. */
struct mcir_rdv;
void mcir_runtime_set_launch(struct mcir_rdv *r);

bool mcir_emu_run(mcir_codegen *cg, mcir_env *env, mcir_alloc_mode mode,
                  mcir_gpu_stats *stats, mcir_diag *d);

/* As mcir_gpu_run_bound, on the emulated device: bound addresses are the
 * emulated device's (mcir_emu_driver's cuMemAlloc_v2, which are host
 * addresses). */
bool mcir_emu_run_bound(mcir_codegen *cg, mcir_env *env, const uint64_t *bound, mcir_alloc_mode mode,
                        mcir_gpu_stats *stats, mcir_diag *d);

/* A session: the plan opened once on a device and run step by step.
 *
 * Open loads the modules, makes the cuBLAS / cuBLASLt handles and their
 * workspace, places the arena and uploads the weights (from env where it
 * holds them, else their data, else seeded as mcir_gpu_run does). Each
 * step places the graph inputs and outputs, fills the inputs (env's
 * values, or env's seed), launches the plan and copies the outputs back
 * into env — or, where bound[t->id] is nonzero, reads and writes the
 * caller's device bytes as mcir_gpu_run_bound does (bound may change from
 * step to step; NULL: none). A step that fails leaves the session able to
 * close only.
 *
 * graphs (1 on, 0 off, -1: MCIR_GPU_GRAPHS=1 turns them on): the first
 * step runs the launch sequence once as without graphs (a warm-up: the
 * libraries allocate outside any capture, a fault names its kernel), then
 * captures it (kernels, cuBLAS / cuBLASLt calls, split-KV merges,
 * epilogues, tensor maps by value) into a CUDA graph
 * (cuStreamBeginCapture / cuStreamEndCapture / cuGraphInstantiate), and
 * every step, the first included, replays it with one cuGraphLaunch: the
 * outputs are the replay's. The arena, the weights and the session's own
 * input and output buffers never move, so nothing is re-bound between
 * replays: each step copies its inputs into the same buffers first. A
 * graph replays the grids and extents it captured, so a graph with dims
 * (rebound between steps: mcir_graph_bind_dims, mcir_codegen_rebind) has
 * one graph per size: a step at sizes not seen before warms up and
 * captures as the first step does, a step at sizes seen before replays
 * their graph; the 8 most recently used are kept (a decode loop whose
 * length grows every step captures every step, and gains nothing). The
 * session's input and output buffers are then sized for the largest
 * sizes at once, so that every size's graph names the same bytes. With graphs, bound tensors always go through the
 * session's buffers (a device copy in before the replay, out after), so
 * a caller may bind other addresses at every step with no re-capture.
 * Graphs need the POOL or EAGER mode and no --sync (LAZY's frees and
 * --sync's waits cannot be captured): open fails with one diagnostic
 * saying so otherwise. A fault in a replay cannot name its kernel: rerun
 * without graphs. mcir_gpu_run & co. are open + one step + close, graphs
 * as mcir_gpu_set_graphs / MCIR_GPU_GRAPHS say. A session is used from one
 * thread at a time. */
typedef struct mcir_gpu_session mcir_gpu_session;
typedef struct mcir_gpu_session_options {
    mcir_alloc_mode mode;
    int graphs;   /* 1 / 0 / -1: mcir_gpu_set_graphs, else MCIR_GPU_GRAPHS */
    bool keep_state;   /* state outputs stay on the device (see below) */
} mcir_gpu_session_options;
/* NULL with a diagnostic where the device or the plan cannot be opened. */
mcir_gpu_session *mcir_gpu_session_open(mcir_codegen *cg, mcir_env *env, const mcir_gpu_session_options *o,
                                        mcir_diag *d);
/* The same session on the emulated device (mcir_emu_run's). */
mcir_gpu_session *mcir_emu_session_open(mcir_codegen *cg, mcir_env *env, const mcir_gpu_session_options *o,
                                        mcir_diag *d);
bool mcir_gpu_session_step(mcir_gpu_session *s, mcir_env *env, const uint64_t *bound, mcir_gpu_stats *stats,
                           mcir_diag *d);
/* Whether the session's steps run as a CUDA graph. */
bool mcir_gpu_session_graphs(const mcir_gpu_session *s);

/* States (graph.json "state": an output written over an input's bytes, a
 * KV cache): the session keeps each pair in one device buffer for its
 * whole life. The first step fills the input as any other (env's value,
 * or seeded); every later step reads the state the step before left there
 * — env's value of the input is not uploaded again, nothing is copied or
 * re-bound (with graphs the replay writes the same bytes). Where the plan
 * could not write the output over the input (the trace's state_in_place
 * says why) the output has a buffer of its own, copied over the input's on
 * the device before the next step. With keep_state the outputs are not
 * copied back into env after a step: read one with mcir_gpu_session_read.
 * reset_state: the next step fills the state inputs from env again (a new
 * sequence).
 *     mcir_gpu_session_options o = {.mode = MCIR_ALLOC_POOL, .keep_state = true};
 *     mcir_gpu_session *s = mcir_emu_session_open(cg, env, &o, &d);
 *     mcir_env_set(env, cache, prefilled);              // read by step 1 only
 *     for (int n = prompt; n < len; n++) {
 *         int64_t past = n;
 *         mcir_codegen_rebind(cg, &past, &d);           // the valid length
 *         mcir_env_set(env, ids, next_token);
 *         mcir_gpu_session_step(s, env, NULL, &st, &d); // writes row n in place
 *     } */
void mcir_gpu_session_reset_state(mcir_gpu_session *s);
/* Copies graph output t as the last step left it into env. */
bool mcir_gpu_session_read(mcir_gpu_session *s, mcir_env *env, const mcir_tensor *t, mcir_diag *d);
void mcir_gpu_session_close(mcir_gpu_session *s);

/* Diagnostics of device runs (docs/cli.md, "When a GPU run fails"):
 * - sync: wait for each kernel before the next, so an asynchronous fault
 *   names the kernel it came from (mcirc --sync; MCIR_GPU_SYNC=1);
 * - watchdog: seconds a kernel may run before the run is abandoned as a
 *   hang naming it (0: wait forever; mcirc --watchdog S;
 *   MCIR_GPU_WATCHDOG=S); by default 10 s + 100 times the kernel's
 *   modelled time.
 * Without a call, the environment variables decide. */
void mcir_gpu_set_sync(bool on);
void mcir_gpu_set_watchdog(double seconds);
/* CUDA graphs for the runs that do not say (mcir_gpu_run & co., sessions
 * opened with graphs -1): mcirc --graphs; without a call,
 * MCIR_GPU_GRAPHS=1 turns them on. */
void mcir_gpu_set_graphs(bool on);

/* The checks run_open makes, for tests: whether a driver of version
 * `driver` (cuDriverGetVersion: 12040) can load what NVRTC `nvrtc`
 * ("12.8") builds; whether a device of compute capability major.minor
 * (named `device`) can run kernels made for `target` ("sm_90"), sm90a
 * when some use sm_90a's wgmma / TMA. False with the one-line reason. */
bool mcir_gpu_check_versions(int driver, const char *nvrtc, char *why, size_t n);
bool mcir_gpu_check_arch(const char *target, int major, int minor, bool sm90a, const char *device, char *why,
                         size_t n);

#endif /* MCIR_RUNTIME_H */
