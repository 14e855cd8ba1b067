/*
 * io_test.h — helpers shared by the I/O test suites: capturing an
 * mcir_diag's messages in memory, reading a whole file, and listing a
 * corpus directory in a stable (sorted) order.
 */
#ifndef MCIR_TESTS_IO_TEST_H
#define MCIR_TESTS_IO_TEST_H

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcir/mcir.h"
#include "test_util.h"

typedef struct capture {
    char *buf;
    size_t len;
    FILE *f;
    mcir_diag d;
} capture;

static inline void cap_open(capture *c) {
    c->buf = NULL;
    c->len = 0;
    c->f = open_memstream(&c->buf, &c->len);
    ck_assert_ptr_nonnull(c->f);
    c->d = mcir_diag_to(c->f);
}

/* The messages written since cap_open (malloc'd). */
static inline char *cap_close(capture *c) {
    fclose(c->f);
    return c->buf;
}

/* The whole file, NUL-terminated (malloc'd), or NULL. */
static inline char *slurp(const char *path, size_t *len) { return test_slurp(path, len); }

static inline int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names in dir ending in suffix (malloc'd); returns the count. */
static inline int list_dir(const char *dir, const char *suffix, char ***out) {
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s", dir);
    int n = 0, cap = 0;
    char **names = NULL;
    struct dirent *e;
    size_t sl = strlen(suffix);
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l <= sl || strcmp(e->d_name + l - sl, suffix) != 0) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = realloc(names, (size_t)cap * sizeof *names);
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    *out = names;
    return n;
}

#endif
