/*
 * cuda_driver.c — loads the CUDA driver table of cuda_driver.h once:
 * dlopen libcuda.so.1, dlsym every entry point, cuInit, count devices.
 * The symbols are looked up before cuInit, so the driver's version is
 * known on a machine with a driver and no device.
 * The reason of a failed load is kept and given to every later caller.
 */
#include "runtime/cuda_driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static struct {
    bool tried, ok;
    char why[256];
    void *lib;
    mcir_cu_driver fn;
} drv;

/* The CUresult names of cuda.h (those a run can meet). */
static const char *error_name(int rc) {
    switch (rc) {
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 36: return "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 200: return "CUDA_ERROR_INVALID_IMAGE";
    case 201: return "CUDA_ERROR_INVALID_CONTEXT";
    case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 400: return "CUDA_ERROR_INVALID_HANDLE";
    case 401: return "CUDA_ERROR_ILLEGAL_STATE";
    case 500: return "CUDA_ERROR_NOT_FOUND";
    case 600: return "CUDA_ERROR_NOT_READY";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 701: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case 702: return "CUDA_ERROR_LAUNCH_TIMEOUT";
    case 710: return "CUDA_ERROR_ASSERT";
    case 714: return "CUDA_ERROR_HARDWARE_STACK_ERROR";
    case 715: return "CUDA_ERROR_ILLEGAL_INSTRUCTION";
    case 716: return "CUDA_ERROR_MISALIGNED_ADDRESS";
    case 719: return "CUDA_ERROR_LAUNCH_FAILED";
    case 900: return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    case 901: return "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    case 906: return "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT";
    case 803: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case 804: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    case 999: return "CUDA_ERROR_UNKNOWN";
    default: return "CUDA error";
    }
}

const char *mcir_cu_error(int rc) {
    static _Thread_local char buf[200];
    const char *s = NULL;
    if (drv.fn.cuGetErrorString && drv.fn.cuGetErrorString(rc, &s) == CUDA_SUCCESS && s)
        snprintf(buf, sizeof buf, "%s: %s", error_name(rc), s);
    else
        snprintf(buf, sizeof buf, "%s", error_name(rc));
    return buf;
}

/* cuEventElapsedTime_v2 where the driver has it (CUDA 12.8 renamed it). */
static void *symbol(const char *name) {
    void *f = strcmp(name, "cuEventElapsedTime") == 0 ? dlsym(drv.lib, "cuEventElapsedTime_v2") : NULL;
    return f ? f : dlsym(drv.lib, name);
}

static bool load(void) {
    drv.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv.lib) {
        snprintf(drv.why, sizeof drv.why, "no CUDA driver: cannot load libcuda.so.1 (%s)", dlerror());
        return false;
    }
#define MCIR_CU_SYM(name, args)                                                            \
    if (!(drv.fn.name = (CUresult(*) args)symbol(#name))) {                                \
        snprintf(drv.why, sizeof drv.why, "the CUDA driver lacks %s", #name);              \
        return false;                                                                      \
    }
    MCIR_CU_FUNCS(MCIR_CU_SYM)
#undef MCIR_CU_SYM
    drv.fn.cuGetErrorString = (CUresult(*)(CUresult, const char **))dlsym(drv.lib, "cuGetErrorString");
    *(void **)&drv.fn.cuTensorMapEncodeTiled = dlsym(drv.lib, "cuTensorMapEncodeTiled");
    int rc = drv.fn.cuInit(0), count = 0;
    if (rc != CUDA_SUCCESS) {
        snprintf(drv.why, sizeof drv.why, "cuInit failed: %s (%d)", mcir_cu_error(rc), rc);
        return false;
    }
    rc = drv.fn.cuDeviceGetCount(&count);
    if (rc != CUDA_SUCCESS || count < 1) {
        snprintf(drv.why, sizeof drv.why, "no CUDA device (cuDeviceGetCount: %d devices, rc %d)",
                 count, rc);
        return false;
    }
    return true;
}

const mcir_cu_driver *mcir_cu_load(char *why, size_t n) {
    if (!drv.tried) {
        drv.tried = true;
        drv.ok = load();
    }
    if (why && n) snprintf(why, n, "%s", drv.ok ? "" : drv.why);
    return drv.ok ? &drv.fn : NULL;
}

bool mcir_cu_driver_version(int *version) {
    mcir_cu_load(NULL, 0);
    *version = 0;
    return drv.fn.cuDriverGetVersion && drv.fn.cuDriverGetVersion(version) == CUDA_SUCCESS;
}
