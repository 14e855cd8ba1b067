/*
 * test_util.h — what every Check suite of tests/ shares: the main that
 * runs a suite, paths under the source tree (MCIR_SOURCE_DIR, which
 * tests/CMakeLists.txt sets; ".." otherwise) and reading a whole file.
 *
 * Usage:
 *     int main(void) { return test_main(catalog_suite()); }
 *     char *text = test_slurp(test_path("examples/mlp_tiny.json"), NULL);
 */
#ifndef MCIR_TESTS_TEST_UTIL_H
#define MCIR_TESTS_TEST_UTIL_H

#include <check.h>
#include <stddef.h>

/* Runs every test of s (CK_NORMAL); 0 when all passed, else 1. */
int test_main(Suite *s);
/* The source tree: $MCIR_SOURCE_DIR, else "..". */
const char *test_source_dir(void);
/* SOURCE_DIR/rel in one of 8 rotating static buffers (so a call may use
 * a few at once). */
const char *test_path(const char *rel);
/* The whole file, NUL-terminated (malloc'd; *len its size when len is
 * not NULL), or NULL when it cannot be read. */
char *test_slurp(const char *path, size_t *len);

#endif /* MCIR_TESTS_TEST_UTIL_H */
