/*
 * fuzz.h — what the libFuzzer harnesses of tests/fuzz/ share.
 *
 * Each harness defines LLVMFuzzerTestOneInput and nothing else; it is
 * linked either with libFuzzer (clang -fsanitize=fuzzer, scripts/fuzz.sh)
 * or with driver.c, a plain main that replays files (the regression test
 * of the normal gcc build). The invariant every harness checks besides
 * "no crash, no sanitizer report": a rejected input was reported with at
 * least one diagnostic, and an accepted one leaves no error behind.
 */
#ifndef MCIR_FUZZ_H
#define MCIR_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mcir/mcir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Diagnostics go nowhere: the fuzzer runs millions of inputs. */
static inline mcir_diag fuzz_diag(void) {
    static FILE *null;
    if (!null) null = fopen("/dev/null", "w");
    return mcir_diag_to(null);
}

/* A broken harness invariant: abort so that libFuzzer keeps the input. */
#define FUZZ_CHECK(cond)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__,    \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* A private file that holds the current input, for the readers that take a
 * path (.npy, graph.json with its relative paths). One per process. */
static char fuzz_file_path[256];

static inline void fuzz_remove_file(void) { unlink(fuzz_file_path); }

static inline const char *fuzz_write_file(const uint8_t *data, size_t size,
                                          const char *suffix) {
    char *path = fuzz_file_path;
    if (!path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof fuzz_file_path, "%s/mcir-fuzz-%ld%s",
                 dir && *dir ? dir : "/tmp", (long)getpid(), suffix);
        atexit(fuzz_remove_file);
    }
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f != NULL);
    FUZZ_CHECK(fwrite(data, 1, size, f) == size);
    FUZZ_CHECK(fclose(f) == 0);
    return path;
}

#endif
