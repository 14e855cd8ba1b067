/*
 * cuda_driver.c — loads the CUDA driver table of cuda_driver.h once:
 * dlopen libcuda.so.1, dlsym every entry point, cuInit, count devices.
 * The symbols are looked up before cuInit, so the driver's version is
 * known on a machine with a driver and no device.
 * The reason of a failed load is kept and given to every later caller.
 */
#include "codegen/cuda_driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static struct {
    bool tried, ok;
    char why[256];
    void *lib;
    mcir_cu_driver fn;
} drv;

const char *mcir_cu_error(int rc) {
    const char *s = NULL;
    if (drv.fn.cuGetErrorString && drv.fn.cuGetErrorString(rc, &s) == CUDA_SUCCESS && s) return s;
    return "CUDA error";
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
