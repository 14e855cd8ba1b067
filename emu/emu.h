/*
 * emu.h — the kernel emulator as a device. Behind the same driver table
 * the GPU uses (runtime/cuda_driver.h), so the runtime (runtime/runtime.c)
 * places the arena, encodes tensor maps, calls cuBLAS / cuBLASLt and
 * launches the generated kernels exactly as on a GPU, and the kernels run
 * on the CPU in the emulator (emu/cuda_emu.h) with its race, bounds,
 * uninitialised-read and hang checks.
 *
 * Layering (docs/architecture.md): emu/ is a device of runtime/ and
 * depends on nothing above it — of runtime/ it includes only the device
 * interface it implements (cuda_driver.h, blas_api.h: headers with no
 * project includes); codegen/ builds its modules through emu/compile.h.
 *
 *     char why[256];
 *     const mcir_cu_driver *cu = mcir_emu_driver("sm_90", why, sizeof why);
 *     if (!cu) return fail(why);                   // no host C++ compiler
 *     ... runtime.c: cuMemAlloc → a host allocation with its shadow,
 *         cuModuleLoadData → a shared object built from the kernel's CUDA
 *         source by the host C++ compiler (mcir_emu_compile_unit, cached
 *         like a cubin), cuLaunchKernel → emu_run of every block, ...
 *
 * What it is: device memory is host memory (a CUdeviceptr is the host
 * address) with a per-byte initialised shadow; a launch runs synchronously
 * (streams and events order nothing; an event records wall time); a launch
 * with a finding fails with CUDA_ERROR_LAUNCH_FAILED and the findings are
 * kept (emu_findings) for the runtime to report as
 * "KERNEL: error: race|out-of-bounds|uninitialised|hang: WHAT". cuBLAS and
 * cuBLASLt are host reference GEMMs that honour exactly the arguments they
 * are given (emu/blas.c). What it does not model: timing, caches, the
 * asynchrony of a real GPU (a fault is reported at its launch, not later),
 * 2-D / 3-D grids and blocks (every mcir template launches 1-D). Stream
 * capture and CUDA graphs are modelled as one recorded sequence per stream
 * (launches, device copies, memsets, library calls), replayed in order.
 *
 * Invariants: one emulated device per process, created on the first call
 * with the target whose compute capability it reports; everything it
 * allocates is released by cuMemFree / cuModuleUnload.
 */
#ifndef MCIR_EMU_H
#define MCIR_EMU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "emu/compile.h"
#include "runtime/cuda_driver.h"

/* The emulated driver table, its device modelled on target arch (sm_80 ...
 * sm_90: its compute capability and L2 size); NULL and why where no host
 * C++ compiler works. */
const mcir_cu_driver *mcir_emu_driver(const char *arch, char *why, size_t n);

/* What every launch of the emulated device did, in order since the last
 * reset: for tests and the time per kernel. */
typedef struct mcir_emu_launch_record {
    char kernel[128];
    unsigned grid, block;
    size_t smem;
    double seconds;
    unsigned long long bytes_read, bytes_written, wgmma, tma_loads, tma_stores;
    int findings[4];   /* out-of-bounds, race, uninitialised, hang */
} mcir_emu_launch_record;
int mcir_emu_launches(const mcir_emu_launch_record **records);
/* Forgets the launches and the call counts below. */
void mcir_emu_reset_launches(void);

/* The driver calls since the last reset (tests of CUDA graphs): calls of
 * cuLaunchKernel and of the cuBLAS / cuBLASLt GEMMs (each recorded, not
 * run, while its stream captures), what captures recorded (launches,
 * copies, memsets, library calls), cuStreamBeginCapture,
 * cuGraphInstantiate and cuGraphLaunch. A replay's kernels are in the
 * launch log above, not in launch_kernel. */
typedef struct mcir_emu_calls {
    long launch_kernel, library, captured, begin_capture, instantiate, graph_launch;
} mcir_emu_calls;
void mcir_emu_call_counts(mcir_emu_calls *out);

/* Collectives the emulated NCCL ran (each rank's call counts once), since
 * the process started: for tests of how the runtime uses it. */
long mcir_emu_collective_calls(void);

/* How many times the emulated cuBLASLt chose an algorithm
 * (cublasLtMatmulAlgoGetHeuristic) and ran a matmul, since the process
 * started: for tests of how the runtime uses the library. */
void mcir_emu_blas_counts(long *heuristics, long *lt_calls);

/* Launches with every block the runtime asks for (default), or with at
 * most max_blocks blocks (> 0): every mcir template walks its work items
 * in a grid-stride loop, so a capped grid computes the same result in
 * less time — and finds fewer races between blocks. MCIR_EMU_MAX_BLOCKS
 * sets it from the environment. */
void mcir_emu_set_max_blocks(unsigned max_blocks);

#endif /* MCIR_EMU_H */
