/*
 * fuzz_graph_json.c — the graph.json reader (mcir/json_read.c): parse,
 * sort, infer, verify. An accepted graph must also survive the artifact
 * round trip: written with mcir_graph_write_json and read back, it is
 * accepted again with the same number of nodes and tensors.
 */
#include <string.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    mcir_diag d = fuzz_diag();
    mcir_graph *g = mcir_graph_read_json_string(text, "fuzz.json", &d);
    free(text);
    FUZZ_CHECK(g ? d.n_errors == 0 : d.n_errors > 0);
    if (!g) return 0;
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    FUZZ_CHECK(f && mcir_graph_write_json(g, f));
    fclose(f);
    mcir_graph *back = mcir_graph_read_json_string(out, "fuzz.mcir.json", &d);
    if (!back) fprintf(stderr, "artifact does not read back:\n%s\n", out);
    FUZZ_CHECK(back != NULL);
    FUZZ_CHECK(back->n_nodes == g->n_nodes && back->n_tensors == g->n_tensors);
    free(out);
    mcir_graph_free(back);
    mcir_graph_free(g);
    return 0;
}
