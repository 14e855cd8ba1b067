/*
 * fuzz_onnx.c — ONNX import (onnx/import.c, onnx/eval.c): protobuf
 * decoding, attribute access, import-time constant folding, lowering to
 * mcir nodes, then the graph's own sort, inference and verifier.
 */
#include "fuzz.h"
#include "onnx/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mcir_diag d = fuzz_diag();
    mcir_graph *g = mcir_onnx_read_bytes(data, size, "fuzz.onnx", NULL, 0, &d);
    FUZZ_CHECK(g ? d.n_errors == 0 : d.n_errors > 0);
    mcir_graph_free(g);
    return 0;
}
