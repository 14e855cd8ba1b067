/*
 * tensor_map.c — the TMA tensor maps an sm_90a kernel takes
 * (cg_kernel.tmaps, written by tpl_attention_sm90.c), encoded by the
 * driver's cuTensorMapEncodeTiled for the device pointers of its reads.
 * The entry point is looked up in the libcuda.so.1 the runtime already
 * opened (dlopen is reference counted), so older drivers without it only
 * fail the kernels that need it, with a message.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "codegen/codegen-impl.h"

typedef int (*encode_tiled_fn)(void *map, int dtype, unsigned rank, void *base, const unsigned long long *dims,
                               const unsigned long long *strides, const unsigned *box, const unsigned *estrides,
                               int interleave, int swizzle, int l2promotion, int oobfill);

bool cg_tensor_maps_encode(const cg_kernel *k, const unsigned long long *ptrs, unsigned char (*maps)[128],
                           char *why, size_t n) {
    static encode_tiled_fn encode;
    if (!encode) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (lib) encode = (encode_tiled_fn)dlsym(lib, "cuTensorMapEncodeTiled");
        if (!encode) {
            snprintf(why, n, "kernel %s needs TMA tensor maps, and the driver has no cuTensorMapEncodeTiled",
                     k->kp->name);
            return false;
        }
    }
    for (int i = 0; i < k->n_tmaps; i++) {
        const mcir_tensor_map_desc *m = &k->tmaps[i];
        unsigned es[5] = {1, 1, 1, 1, 1};
        void *base = (void *)(uintptr_t)(ptrs[m->read] + (unsigned long long)m->offset * 2);
        int rc = encode(maps[i], m->dtype, (unsigned)m->rank, base, (const unsigned long long *)m->dims,
                        (const unsigned long long *)m->strides, m->box, es, 0, m->swizzle,
                        2 /* L2 promotion 128B */, 0 /* out of bounds: zeros */);
        if (rc != 0) {
            snprintf(why, n, "kernel %s: cuTensorMapEncodeTiled failed (CUresult %d) for tensor map %d", k->kp->name,
                     rc, i);
            return false;
        }
    }
    return true;
}
