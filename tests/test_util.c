/*
 * test_util.c — the helpers every Check suite shares (test_util.h).
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>

int test_main(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

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
