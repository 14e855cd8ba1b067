/*
 * cli_util.h — helpers for tests that call the mcirc program by its
 * command-line contract: run it with arguments, capture its exit status,
 * stdout and stderr; make and remove temporary directories.
 */
#ifndef MCIR_TESTS_CLI_UTIL_H
#define MCIR_TESTS_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cli_result {
    int status;      /* exit status, or 128 + signal */
    char *out, *err; /* captured text, NUL-terminated, malloc'd */
} cli_result;

/* Runs MCIRC_BINARY with argv (NULL-terminated, without argv[0]) in the
 * tests directory. */
cli_result cli_run(const char *const *args);
/* The same as an ordinary user (nobody, uid 65534) when the tests run as
 * root, whose writes no file permission stops: a read-only directory is
 * read-only to it. */
cli_result cli_run_unprivileged(const char *const *args);
void cli_result_free(cli_result *r);
/* mkdtemp under /tmp; returns a malloc'd path. */
char *cli_tempdir(void);
void cli_remove_tree(const char *path);
bool cli_file_exists(const char *path);
/* Number of entries in a directory (-1 if it does not exist). */
int cli_dir_entries(const char *path);
/* "$MCIR_SOURCE_DIR/rel" in a static buffer rotation of 8. */
const char *cli_src(const char *rel);

#endif
