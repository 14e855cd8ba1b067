/*
 * fuzz_catalog.c — the YAML catalog loader (catalog/catalog.c): a rule
 * file with its properties, patterns, checks and actions.
 */
#include "catalog/catalog.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mcir_diag d = fuzz_diag();
    mcir_catalog *c = mcir_catalog_new();
    bool ok = mcir_catalog_load_string(c, (const char *)data, size, "fuzz.yaml", &d);
    FUZZ_CHECK(ok ? d.n_errors == 0 : d.n_errors > 0);
    mcir_catalog_free(c);
    return 0;
}
