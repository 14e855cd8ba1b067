/*
 * test_util.c — the helpers every Check suite shares (test_util.h).
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>

/* Runs s; fork is CK_NOFORK, or CK_FORK_GETENV (Check's default: fork
 * unless the environment says CK_FORK=no). */
static int run_suite(Suite *s, enum fork_status fork) {
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, fork);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

int test_main(Suite *s) { return run_suite(s, CK_FORK_GETENV); }

int test_main_nofork(Suite *s) { return run_suite(s, CK_NOFORK); }

const char *test_source_dir(void) {
    const char *s = getenv("MCIR_SOURCE_DIR");
    return s ? s : "..";
}

const char *test_path(const char *rel) {
    static char buf[8][1024];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", test_source_dir(), rel);
    return b;
}

char *test_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    size_t got = s ? fread(s, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!s) return NULL;
    s[got] = 0;
    if (len) *len = got;
    return s;
}

bool test_tempdir(const char *name, char *dir, size_t n) {
    char tmpl[256];
    snprintf(tmpl, sizeof tmpl, "/tmp/mcir-%s-XXXXXX", name);
    if (!mkdtemp(tmpl)) return false;
    snprintf(dir, n, "%s", tmpl);
    return true;
}

void test_remove_dir(const char *dir) {
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

bool test_have_cxx(void) { return system("c++ --version > /dev/null 2>&1") == 0; }

int test_skip(const char *why) {
    printf("skip: %s\n", why);
    return 77;
}
