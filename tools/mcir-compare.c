/* mcir-compare — compares two .npy arrays of the same shape (f32, f16 or
 * bf16) within a tolerance, the way the GPU tests compare a GPU run with
 * the CPU reference: max |got - ref| relative to max |ref|, NaN or Inf
 * where the other side has none is a failure (mcir_compare). Used by
 * scripts/gpu-check.sh on the outputs `mcirc --run -o DIR` writes.
 *
 * Default tolerance by dtype: 1e-3 for f32 (GPU reduction order and fast
 * math against the CPU reference), 2e-2 for f16/bf16 (as tests/test_gpu.c).
 * Exit status: 0 within tolerance, 1 beyond it or unreadable / mismatched
 * arrays, 2 usage error.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcir/mcir.h"
#include "mcirc/pipeline.h"

/* GPU vs CPU: f32 1e-3 (reassociated sums), f16/bf16 2e-2, integers exact. */
static double gpu_tolerance(mcir_dtype t) {
    return mcir_dtype_is_integer(t) ? 0 : t == MCIR_DTYPE_F32 ? 1e-3 : 2e-2;
}

static float *as_f32(const mcir_npy *a, int64_t n) {
    float *v = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!v) return NULL;
    mcir_values_to_f32(a->dtype, a->data, v, n);
    return v;
}

static int usage(void) {
    fprintf(stderr, "usage: mcir-compare [--tol REL] GOT.npy REF.npy\n"
                    "  max |GOT-REF| / max |REF| within REL (default 1e-3 f32, 2e-2 f16/bf16, 0 integers)\n");
    return 2;
}

int main(int argc, char **argv) {
    double tol = -1;
    const char *paths[2];
    int n_paths = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tol") && i + 1 < argc) {
            char *end;
            tol = strtod(argv[++i], &end);
            if (*end || !(tol >= 0)) return usage();
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return usage();
        } else if (n_paths < 2) {
            paths[n_paths++] = argv[i];
        } else {
            return usage();
        }
    }
    if (n_paths != 2) return usage();
    mcir_diag d = mcir_diag_stderr();
    mcir_npy got, ref;
    if (!mcir_npy_read(paths[0], &got, &d)) return 1;
    if (!mcir_npy_read(paths[1], &ref, &d)) {
        mcir_npy_free(&got);
        return 1;
    }
    int status = 1;
    int64_t n = 1;
    bool same = got.rank == ref.rank;
    for (int i = 0; same && i < got.rank; i++) {
        same = got.shape[i] == ref.shape[i];
        n *= got.shape[i];
    }
    if (!same) {
        fprintf(stderr, "%s: error: shape differs from %s\n", paths[0], paths[1]);
    } else if (mcir_dtype_is_integer(got.dtype) && mcir_dtype_is_integer(ref.dtype)) {
        /* integers and bool: exactly, all 64 bits (not through f32) */
        int64_t *a = malloc(sizeof(int64_t) * (size_t)(n ? n : 1)), *b = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        if (a && b) {
            mcir_values_to_int(got.dtype, got.data, a, n);
            mcir_values_to_int(ref.dtype, ref.data, b, n);
            mcir_compare_result r;
            mcir_values_compare_int(a, b, n, &r);
            if (tol < 0) tol = 0;
            bool ok = mcir_compare_within(&r, tol);
            printf("%s: %s, max abs err %.3g, max rel err %.3g (tolerance %.0e) %s\n", paths[0],
                   mcir_dtype_name(got.dtype), r.max_abs, r.max_rel, tol, ok ? "ok" : "FAIL");
            status = ok ? 0 : 1;
        } else {
            fprintf(stderr, "mcir-compare: error: out of memory\n");
        }
        free(a);
        free(b);
    } else {
        float *a = as_f32(&got, n), *b = as_f32(&ref, n);
        if (a && b) {
            double max_abs, max_rel;
            mcir_compare(a, b, n, &max_abs, &max_rel);
            if (tol < 0) tol = fmax(gpu_tolerance(got.dtype), gpu_tolerance(ref.dtype));
            bool ok = max_rel <= tol;
            printf("%s: %s, max abs err %.3g, max rel err %.3g (tolerance %.0e) %s\n", paths[0],
                   mcir_dtype_name(got.dtype), max_abs, max_rel, tol, ok ? "ok" : "FAIL");
            status = ok ? 0 : 1;
        } else {
            fprintf(stderr, "mcir-compare: error: out of memory\n");
        }
        free(a);
        free(b);
    }
    mcir_npy_free(&got);
    mcir_npy_free(&ref);
    return status;
}
