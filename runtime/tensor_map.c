/*
 * tensor_map.c — the TMA tensor maps an sm_90a kernel takes
 * (cg_kernel.tmaps, written by tpl_attention_sm90.c: Q, K, V, the mask, O;
 * by tpl_gemm_sm90.c: A or its prologue's inputs, B, the output), encoded by the
 * driver's cuTensorMapEncodeTiled for the device pointers of its reads.
 * The entry point is the run's driver table's optional
 * cuTensorMapEncodeTiled (cuda_driver.h: the CUDA driver's, or the
 * emulated device's), so older drivers without it only fail the kernels
 * that need it, with a message.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/runtime-impl.h"
#include "runtime/cuda_driver.h"

bool cg_tensor_maps_encode(const mcir_cu_driver *cu, const cg_kernel *k, const unsigned long long *ptrs,
                           unsigned char (*maps)[128], char *why, size_t n) {
    if (!cu || !cu->cuTensorMapEncodeTiled) {
        snprintf(why, n, "kernel %s needs TMA tensor maps, and the driver has no cuTensorMapEncodeTiled",
                 k->kp->name);
        return false;
    }
    for (int i = 0; i < k->n_tmaps; i++) {
        const mcir_tensor_map_desc *m = &k->tmaps[i];
        unsigned es[5] = {1, 1, 1, 1, 1};
        void *base = (void *)(uintptr_t)(ptrs[m->read] + (unsigned long long)m->offset * (unsigned long long)m->esize);
        int rc = cu->cuTensorMapEncodeTiled(maps[i], m->dtype, (unsigned)m->rank, base, (const unsigned long long *)m->dims,
                        (const unsigned long long *)m->strides, m->box, es, 0, m->swizzle,
                        3 /* L2 promotion 256B, as CUTLASS's and FA3's maps */, 0 /* out of bounds: zeros */);
        if (rc != 0) {
            snprintf(why, n, "kernel %s: cuTensorMapEncodeTiled failed (CUresult %d) for tensor map %d", k->kp->name,
                     rc, i);
            return false;
        }
    }
    return true;
}
