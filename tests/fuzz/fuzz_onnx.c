/*
 * fuzz_onnx.c — ONNX import (onnx/import.c, onnx/eval.c): protobuf
 * decoding, attribute access, import-time constant folding, lowering to
 * mcir nodes, then the graph's own sort, inference and verifier; and the
 * same with dim_params 'batch', 'seq' or both kept symbolic over ranges
 * (onnx/symbolic.c: probe imports, the fit, the symbolic rules).
 */
#include "fuzz.h"
#include "onnx/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mcir_diag d = fuzz_diag();
    mcir_graph *g = mcir_onnx_read_bytes(data, size, "fuzz.onnx", NULL, 0, &d);
    FUZZ_CHECK(g ? d.n_errors == 0 : d.n_errors > 0);
    mcir_graph_free(g);
    /* batch, seq, then both */
    static const mcir_onnx_dim ranges[3] = {{"batch", 1, 4}, {"seq", 2, 24}, {"batch", 1, 4}};
    static const int first[3] = {0, 1, 1}, count[3] = {1, 1, 2};
    for (int i = 0; i < 3; i++) {
        d = fuzz_diag();
        g = mcir_onnx_read_bytes_ex(data, size, "fuzz.onnx", NULL, 0, ranges + first[i],
                                    count[i], &d);
        FUZZ_CHECK(g ? d.n_errors == 0 : d.n_errors > 0);
        FUZZ_CHECK(!g || g->n_dims == count[i]);
        mcir_graph_free(g);
    }
    return 0;
}
