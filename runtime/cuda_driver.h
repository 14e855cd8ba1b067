/*
 * cuda_driver.h — the CUDA driver API as mcir uses it: loaded once with
 * dlopen (libcuda.so.1) and declared here with its own minimal types, so
 * nothing links to libcuda and every program starts where there is no
 * driver. The runtime (runtime.c) and the benchmarks' timer
 * (bench/gpu_timer.c) share this one table, and the emulated device
 * (emu/emu.h) implements it: the device interface of runtime/, which
 * includes nothing of the project so that emu/ depends on nothing above it.
 *
 * Usage:
 *     char why[256];
 *     const mcir_cu_driver *cu = mcir_cu_load(why, sizeof why);
 *     if (!cu) return fail(why);           // no driver, cuInit failed, no device
 *     CUdeviceptr p; int rc = cu->cuMemAlloc_v2(&p, bytes);
 *     if (rc != CUDA_SUCCESS) report(mcir_cu_error(rc));
 *
 * Invariants: the table is loaded and cuInit'd once per process; a
 * non-NULL table has every function of MCIR_CU_FUNCS, and cuInit succeeded
 * on a machine with at least one device.
 */
#ifndef MCIR_CUDA_DRIVER_H
#define MCIR_CUDA_DRIVER_H

#include <stdbool.h>
#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent, *CUgraph, *CUgraphExec;
typedef unsigned long long CUdeviceptr;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
    CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};

/* Every entry point mcir calls: X(name, (parameter types)), each under
 * the name libcuda exports (cuda.h's macros map cuStreamBeginCapture to
 * cuStreamBeginCapture_v2 and cuGraphInstantiate to
 * cuGraphInstantiateWithFlags; CUDA 11.4 has them all). The graph entries
 * capture a stream's launches once and replay them (runtime.c, sessions
 * with graphs). */
#define MCIR_CU_FUNCS(X)                                                                  \
    X(cuInit, (unsigned))                                                                 \
    X(cuDriverGetVersion, (int *))                                                        \
    X(cuDeviceGetCount, (int *))                                                          \
    X(cuDeviceGet, (CUdevice *, int))                                                     \
    X(cuDeviceGetName, (char *, int, CUdevice))                                           \
    X(cuDeviceGetAttribute, (int *, int, CUdevice))                                       \
    X(cuDeviceTotalMem_v2, (size_t *, CUdevice))                                          \
    X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                                  \
    X(cuDevicePrimaryCtxRelease_v2, (CUdevice))                                           \
    X(cuCtxSetCurrent, (CUcontext))                                                       \
    X(cuModuleLoadData, (CUmodule *, const void *))                                       \
    X(cuModuleUnload, (CUmodule))                                                         \
    X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *))                        \
    X(cuFuncSetAttribute, (CUfunction, int, int))                                         \
    X(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,      \
                       unsigned, unsigned, CUstream, void **, void **))                   \
    X(cuMemAlloc_v2, (CUdeviceptr *, size_t))                                             \
    X(cuMemFree_v2, (CUdeviceptr))                                                        \
    X(cuMemGetInfo_v2, (size_t *, size_t *))                                              \
    X(cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t))                               \
    X(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t))                                     \
    X(cuMemcpyDtoDAsync_v2, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                 \
    X(cuMemsetD32Async, (CUdeviceptr, unsigned, size_t, CUstream))                        \
    X(cuStreamCreate, (CUstream *, unsigned))                                             \
    X(cuStreamSynchronize, (CUstream))                                                    \
    X(cuStreamDestroy_v2, (CUstream))                                                     \
    X(cuStreamWaitEvent, (CUstream, CUevent, unsigned))                                   \
    X(cuEventCreate, (CUevent *, unsigned))                                               \
    X(cuEventRecord, (CUevent, CUstream))                                                 \
    X(cuEventSynchronize, (CUevent))                                                      \
    X(cuEventQuery, (CUevent))                                                            \
    X(cuEventDestroy_v2, (CUevent))                                                       \
    X(cuEventElapsedTime, (float *, CUevent, CUevent))                                    \
    X(cuStreamBeginCapture_v2, (CUstream, int))                                           \
    X(cuStreamEndCapture, (CUstream, CUgraph *))                                          \
    X(cuGraphInstantiateWithFlags, (CUgraphExec *, CUgraph, unsigned long long))          \
    X(cuGraphLaunch, (CUgraphExec, CUstream))                                             \
    X(cuGraphExecDestroy, (CUgraphExec))                                                  \
    X(cuGraphDestroy, (CUgraph))

typedef struct mcir_cu_driver {
#define MCIR_CU_FIELD(name, args) CUresult(*name) args;
    MCIR_CU_FUNCS(MCIR_CU_FIELD)
#undef MCIR_CU_FIELD
    CUresult (*cuGetErrorString)(CUresult, const char **);   /* may be NULL */
    /* TMA tensor maps (CUDA 12+; may be NULL: only sm_90a kernels need it) */
    CUresult (*cuTensorMapEncodeTiled)(void *map, int dtype, unsigned rank, void *base,
                                       const unsigned long long *dims, const unsigned long long *strides,
                                       const unsigned *box, const unsigned *elem_strides, int interleave,
                                       int swizzle, int l2promotion, int oobfill);
    /* The emulated device (emu/emu.h) only; NULL on the CUDA driver:
     * - emulated: the code its modules are built as ("emu": the host C++
     *   compiler over the CUDA source, not NVRTC);
     * - emu_name: the range [p, p + bytes) holds tensor `name` from now on
     *   (what its findings call the bytes);
     * - emu_findings: the findings of the last launch or library call that
     *   failed, one per line "race|out-of-bounds|uninitialised|hang: WHAT";
     * - blas: its cuBLAS / cuBLASLt (runtime/blas_api.h);
     * - coll: its collectives between ranks (runtime/coll_api.h; on the
     *   CUDA driver NCCL, loaded when a run of several ranks asks). */
    const char *emulated;
    void (*emu_name)(CUdeviceptr p, size_t bytes, const char *name);
    const char *(*emu_findings)(void);
    const struct mcir_blas_api *blas;
    const struct mcir_coll_api *coll;
    /* The clock the runtime's waits read (the watchdog), and its nap
     * between two polls; NULL on the CUDA driver (CLOCK_MONOTONIC and
     * usleep). The emulated device's clock is the monotonic clock plus every
     * nap taken, and a nap returns at once: a launch that never completes
     * reaches its deadline without the process waiting for it. */
    double (*emu_clock)(void);
    void (*emu_nap)(unsigned microseconds);
} mcir_cu_driver;

/* The driver table, loaded and cuInit'd on the first call; NULL and why
 * (no libcuda.so.1, a missing entry point, cuInit failed, no device). */
const mcir_cu_driver *mcir_cu_load(char *why, size_t n);
/* The driver's version (cuDriverGetVersion, e.g. 12040) where libcuda.so.1
 * loads, with or without a device; false where it does not. */
bool mcir_cu_driver_version(int *version);
/* The name of a CUresult: "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory
 * access was encountered)" with the driver's text where it has one. */
const char *mcir_cu_error(int rc);

#endif /* MCIR_CUDA_DRIVER_H */
