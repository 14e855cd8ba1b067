/*
 * fuzz_npy.c — the .npy reader (mcir/npy.c). An accepted array written
 * back with mcir_npy_write reads back with the same dtype, shape and
 * bytes.
 */
#include <string.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mcir_diag d = fuzz_diag();
    const char *path = fuzz_write_file(data, size, ".npy");
    mcir_npy a = {0};
    bool ok = mcir_npy_read(path, &a, &d);
    FUZZ_CHECK(ok ? d.n_errors == 0 : d.n_errors > 0);
    if (!ok) return 0;
    int64_t n = 1;
    for (int i = 0; i < a.rank; i++) n *= a.shape[i];
    size_t bytes = (size_t)n * mcir_dtype_size(a.dtype);
    FUZZ_CHECK(mcir_npy_write(path, a.dtype, a.rank, a.shape, a.data, &d));
    mcir_npy b = {0};
    FUZZ_CHECK(mcir_npy_read(path, &b, &d));
    FUZZ_CHECK(b.dtype == a.dtype && b.rank == a.rank &&
               !memcmp(b.shape, a.shape, sizeof(int64_t) * (size_t)a.rank) &&
               (bytes == 0 || !memcmp(a.data, b.data, bytes)));
    mcir_npy_free(&a);
    mcir_npy_free(&b);
    return 0;
}
