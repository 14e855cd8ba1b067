/*
 * test_util.h — what every Check suite of tests/ shares: the main that
 * runs a suite, paths under the source tree (MCIR_SOURCE_DIR, which
 * tests/CMakeLists.txt sets; ".." otherwise), reading a whole file, and
 * for the suites that compile kernels: a scratch directory, whether a
 * C++ compiler is there, and skipping the suite.
 *
 * Usage:
 *     int main(void) { return test_main(catalog_suite()); }
 *     char *text = test_slurp(test_path("examples/mlp_tiny.json"), NULL);
 */
#ifndef MCIR_TESTS_TEST_UTIL_H
#define MCIR_TESTS_TEST_UTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>

/* Runs every test of s (CK_NORMAL); 0 when all passed, else 1. */
int test_main(Suite *s);
/* The same in this process (CK_NOFORK), for suites whose tests share what
 * they built (compiled kernels, a cache directory, dlopen'd objects). */
int test_main_nofork(Suite *s);
/* The source tree: $MCIR_SOURCE_DIR, else "..". */
const char *test_source_dir(void);
/* SOURCE_DIR/rel in one of 8 rotating static buffers (so a call may use
 * a few at once). */
const char *test_path(const char *rel);
/* The whole file, NUL-terminated (malloc'd; *len its size when len is
 * not NULL), or NULL when it cannot be read. */
char *test_slurp(const char *path, size_t *len);
/* Makes a fresh directory /tmp/mcir-<name>-XXXXXX, its path in dir (n
 * bytes); false when it cannot be made. */
bool test_tempdir(const char *name, char *dir, size_t n);
/* Removes dir and all below it (rm -rf); says so on stderr when it cannot. */
void test_remove_dir(const char *dir);
/* Whether a C++ compiler (c++) runs, which the CPU kernel emulator needs. */
bool test_have_cxx(void);
/* Says "skip: why" on stdout and returns 77, the exit status CTest counts
 * as skipped: return test_skip("no GPU") from main. */
int test_skip(const char *why);

#endif /* MCIR_TESTS_TEST_UTIL_H */
