/*
 * test_npy.c — .npy files: write → read round trips for the three dtypes
 * and scalar / vector / higher-rank shapes, the v1.0 header layout we
 * write, reading v2.0 and v3.0 headers, atomic writes, and the corpus of
 * malformed files tests/data/bad/npy/NAME.npy, each rejected with the
 * message of NAME.expected (regenerate with MCIR_UPDATE_GOLDEN=1; the
 * files themselves come from tests/data/bad/npy/make_npy.py).
 */
#include <check.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_test.h"
#include "mcir/mcir.h"
#include "test_util.h"

static char tmpdir[256];

static void make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mcir_npy_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void) {
    DIR *d = opendir(tmpdir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(tmpdir);
}

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void round_trip(mcir_dtype dt, int rank, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    size_t es = mcir_dtype_size(dt);
    unsigned char *data = malloc((size_t)n * es + 1);
    for (int64_t i = 0; i < n * (int64_t)es; i++) data[i] = (unsigned char)(i * 37 + 11);
    char path[512];
    snprintf(path, sizeof path, "%s/a_%s_%d.npy", tmpdir, mcir_dtype_name(dt), rank);
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_npy_write(path, dt, rank, shape, data, &d));

    size_t len;
    char *raw = slurp(path, &len);
    ck_assert_ptr_nonnull(raw);
    ck_assert(memcmp(raw, "\x93NUMPY\x01\x00", 8) == 0);
    size_t hlen = (unsigned char)raw[8] | (size_t)(unsigned char)raw[9] << 8;
    ck_assert_int_eq((10 + hlen) % 64, 0);
    ck_assert_int_eq(raw[10 + hlen - 1], '\n');
    ck_assert_uint_eq(len, 10 + hlen + (size_t)n * es);
    free(raw);

    mcir_npy npy;
    ck_assert(mcir_npy_read(path, &npy, &d));
    ck_assert_int_eq(npy.dtype, dt);
    ck_assert_int_eq(npy.rank, rank);
    for (int i = 0; i < rank; i++) ck_assert_int_eq(npy.shape[i], shape[i]);
    ck_assert(memcmp(npy.data, data, (size_t)n * es) == 0);
    mcir_npy_free(&npy);
    free(data);
}

START_TEST(test_round_trip_dtypes_and_shapes) {
    make_tmpdir();
    static const int64_t s1[] = {5}, s3[] = {2, 3, 4}, s8[] = {1, 2, 1, 2, 1, 2, 1, 3};
    for (int dt = 0; dt < MCIR_DTYPE_COUNT; dt++) {
        round_trip((mcir_dtype)dt, 0, NULL);
        round_trip((mcir_dtype)dt, 1, s1);
        round_trip((mcir_dtype)dt, 3, s3);
        round_trip((mcir_dtype)dt, 8, s8);
    }
    remove_tmpdir();
}
END_TEST

START_TEST(test_header_text) {
    make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/h.npy", tmpdir);
    float v[5] = {1, 2, 3, 4, 5};
    ck_assert(mcir_npy_write(path, MCIR_DTYPE_F32, 1, (int64_t[]){5}, v, NULL));
    char *raw = slurp(path, NULL);
    ck_assert(strncmp(raw + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", 57) == 0);
    free(raw);
    ck_assert(mcir_npy_write(path, MCIR_DTYPE_BF16, 0, NULL, (uint16_t[]){0x3f80}, NULL));
    raw = slurp(path, NULL);
    ck_assert(strncmp(raw + 10, "{'descr': '<u2', 'fortran_order': False, 'shape': (), }", 55) == 0);
    free(raw);
    remove_tmpdir();
}
END_TEST

START_TEST(test_read_versions_2_and_3) {
    mcir_npy npy;
    mcir_diag d = mcir_diag_stderr();
    ck_assert(mcir_npy_read("data/good/w/b_f16_v2.npy", &npy, &d));
    ck_assert_int_eq(npy.dtype, MCIR_DTYPE_F16);
    ck_assert_int_eq(npy.rank, 1);
    ck_assert_int_eq(npy.shape[0], 4);
    ck_assert(mcir_f16_to_f32(((uint16_t *)npy.data)[1]) == 2.0f);
    mcir_npy_free(&npy);
    ck_assert(mcir_npy_read("data/good/w/g_bf16_v3.npy", &npy, &d));
    ck_assert_int_eq(npy.dtype, MCIR_DTYPE_BF16);
    ck_assert(mcir_bf16_to_f32(((uint16_t *)npy.data)[3]) == 4.0f);
    mcir_npy_free(&npy);
    ck_assert(mcir_npy_read("data/good/w/scalar.npy", &npy, &d));
    ck_assert_int_eq(npy.rank, 0);
    ck_assert(*(float *)npy.data == 0.5f);
    mcir_npy_free(&npy);
    mcir_npy_free(&npy); /* twice is harmless */
}
END_TEST

/* -------------------------------------------------------------- writes */

START_TEST(test_write_is_atomic) {
    make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/w.npy", tmpdir);
    float a[2] = {1, 2}, b[3] = {3, 4, 5};
    ck_assert(mcir_npy_write(path, MCIR_DTYPE_F32, 1, (int64_t[]){2}, a, NULL));
    ck_assert(mcir_npy_write(path, MCIR_DTYPE_F32, 1, (int64_t[]){3}, b, NULL));
    ck_assert_int_eq(count_files(tmpdir), 1); /* replaced, no temp file left */
    mcir_npy npy;
    ck_assert(mcir_npy_read(path, &npy, NULL));
    ck_assert_int_eq(npy.shape[0], 3);
    mcir_npy_free(&npy);

    capture c;
    cap_open(&c);
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.npy", tmpdir);
    ck_assert(!mcir_npy_write(bad, MCIR_DTYPE_F32, 1, (int64_t[]){2}, a, &c.d));
    char *msgs = cap_close(&c);
    ck_assert_msg(strstr(msgs, "x.npy: error: cannot create a file in ") &&
                      strstr(msgs, "/no/such/dir: No such file or directory"),
                  "%s", msgs);
    ck_assert_int_eq(c.d.n_errors, 1);
    free(msgs);
    ck_assert_int_eq(count_files(tmpdir), 1);
    remove_tmpdir();
}
END_TEST

/* ------------------------------------------------------ malformed corpus */

START_TEST(test_bad_corpus) {
    const char *dir = "data/bad/npy";
    char **names;
    int n = list_dir(dir, ".npy", &names);
    ck_assert_int_ge(n, 12);
    bool update = getenv("MCIR_UPDATE_GOLDEN") && *getenv("MCIR_UPDATE_GOLDEN") == '1';
    int failures = 0;
    for (int i = 0; i < n; i++) {
        char path[512], gold[512];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(gold, sizeof gold, "%s/%.*s.expected", dir, (int)(strlen(names[i]) - 4), names[i]);
        capture c;
        cap_open(&c);
        mcir_npy npy;
        bool ok = mcir_npy_read(path, &npy, &c.d);
        char *msgs = cap_close(&c);
        if (ok) {
            fprintf(stderr, "%s: accepted\n", path);
            mcir_npy_free(&npy);
            failures++;
        }
        ck_assert_ptr_null(npy.data);
        if (update) {
            FILE *f = fopen(gold, "w");
            fputs(msgs, f);
            fclose(f);
        } else {
            char *want = slurp(gold, NULL);
            if (!want || strcmp(want, msgs) != 0) {
                fprintf(stderr, "%s: expected\n%sgot\n%s", path, want ? want : "(no golden)\n",
                        msgs);
                failures++;
            }
            free(want);
        }
        free(msgs);
        free(names[i]);
    }
    free(names);
    ck_assert_msg(failures == 0, "%d corpus failure(s)", failures);
}
END_TEST

START_TEST(test_missing_and_directory) {
    capture c;
    cap_open(&c);
    mcir_npy npy;
    ck_assert(!mcir_npy_read("data/bad/npy/nope.npy", &npy, &c.d));
    ck_assert(!mcir_npy_read("data/bad/npy", &npy, &c.d));
    char *msgs = cap_close(&c);
    ck_assert_str_eq(msgs, "data/bad/npy/nope.npy: error: cannot open: No such file or directory\n"
                           "data/bad/npy: error: not a regular file\n");
    free(msgs);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_round_trip_dtypes_and_shapes);
    tcase_add_test(tc, test_header_text);
    tcase_add_test(tc, test_read_versions_2_and_3);
    tcase_add_test(tc, test_write_is_atomic);
    tcase_add_test(tc, test_bad_corpus);
    tcase_add_test(tc, test_missing_and_directory);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_main(suite()); }
