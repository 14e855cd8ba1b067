/*
 * test_output_paths.c — where output files go (docs/cli.md "Output
 * files"): mcir_outfile, the one helper every writer uses, and mcirc by
 * its contract. '-' is stdout and stdout then carries only that file;
 * /dev/stdout stays a link; a FIFO is written into, not replaced; a link
 * is written through to its target (a dangling one creates it); a
 * read-only directory is exit 1 with a PATH: error: line; nothing partial
 * or temporary is left behind by a failure.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_util.h"
#include "mcir/mcir.h"
#include "test_util.h"

#define RUN(...) cli_run((const char *const[]){__VA_ARGS__, NULL})

static const char *mlp(void) { return cli_src("examples/mlp_tiny/graph.json"); }

static char tmp[256];   /* /tmp/mcir-outpaths-XXXXXX */

static const char *at(const char *rel) {
    static char bufs[8][PATH_MAX];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, PATH_MAX, "%s/%s", tmp, rel);
    return b;
}

static void setup(void) {
    ck_assert(test_tempdir("outpaths", tmp, sizeof tmp));
    chmod(tmp, 0755);   /* for the unprivileged runs */
}
static void teardown(void) {
    chmod(at("ro"), 0755);
    test_remove_dir(tmp);
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static bool is_link(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

static bool is_report(const char *text) {
    size_t n = text ? strlen(text) : 0;
    return n > 20 && !strncmp(text, "<!DOCTYPE html>", 15) && !strcmp(text + n - 8, "</html>\n");
}

/* ------------------------------------------------------ the helper itself */

START_TEST(outfile_commit_replaces_and_keeps_mode) {
    put(at("f.txt"), "old");
    chmod(at("f.txt"), 0640);
    mcir_diag d = mcir_diag_to(NULL);
    ck_assert(mcir_outfile_write(at("f.txt"), "new", 3, &d));
    char *got = test_slurp(at("f.txt"), NULL);
    ck_assert_str_eq(got, "new");
    free(got);
    struct stat st;
    ck_assert_int_eq(stat(at("f.txt"), &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0640);
    ck_assert_int_eq(cli_dir_entries(tmp), 1);   /* no temporary left */
}
END_TEST

START_TEST(outfile_discard_leaves_the_old_file) {
    put(at("f.txt"), "old");
    mcir_diag d = mcir_diag_to(NULL);
    mcir_outfile o;
    ck_assert(mcir_outfile_open(&o, at("f.txt"), &d));
    fputs("half of it", o.f);
    mcir_outfile_discard(&o);
    char *got = test_slurp(at("f.txt"), NULL);
    ck_assert_str_eq(got, "old");
    free(got);
    ck_assert_int_eq(cli_dir_entries(tmp), 1);
}
END_TEST

/* Writes one byte to path; the diagnostics it printed (malloc'd). */
static char *write_one(const char *path, bool *ok) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mcir_diag d = mcir_diag_to(f);
    *ok = mcir_outfile_write(path, "x", 1, &d);
    fclose(f);
    return buf;
}

START_TEST(outfile_failures_say_why) {
    bool ok;
    /* a device that fails the write: the commit reports it */
    char *msg = write_one("/dev/full", &ok);
    ck_assert(!ok);
    ck_assert_msg(strstr(msg, "/dev/full: error: cannot write: No space left on device"), "%s", msg);
    free(msg);
    /* a directory is never replaced */
    mkdir(at("dir"), 0755);
    msg = write_one(at("dir"), &ok);
    ck_assert(!ok);
    ck_assert_msg(strstr(msg, "dir: error: cannot write: Is a directory"), "%s", msg);
    free(msg);
    /* a loop of links */
    ck_assert_int_eq(symlink("b", at("a")), 0);
    ck_assert_int_eq(symlink("a", at("b")), 0);
    msg = write_one(at("a"), &ok);
    ck_assert(!ok);
    ck_assert_msg(strstr(msg, "a: error: cannot write: Too many levels of symbolic links"), "%s",
                  msg);
    free(msg);
    ck_assert_int_eq(cli_dir_entries(tmp), 3);
}
END_TEST

START_TEST(outfile_publish_writes_through_a_link) {
    mkdir(at("other"), 0755);
    put(at("done.tmp"), "finished");
    ck_assert_int_eq(symlink("other/real.txt", at("link.txt")), 0);
    mcir_diag d = mcir_diag_to(NULL);
    ck_assert(mcir_outfile_publish(at("done.tmp"), at("link.txt"), &d));
    ck_assert(is_link(at("link.txt")));
    ck_assert(!cli_file_exists(at("done.tmp")));
    char *got = test_slurp(at("other/real.txt"), NULL);
    ck_assert_str_eq(got, "finished");
    free(got);
    ck_assert(mcir_path_is_stdout("-"));
    ck_assert(!mcir_path_is_stdout(at("other/real.txt")));
}
END_TEST

/* ------------------------------------------------------- mcirc's contract */

START_TEST(dash_is_stdout_and_only_the_report) {
    cli_result r = RUN("--report", "-", mlp());
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(is_report(r.out), "stdout is not the report alone: %.200s", r.out);
    ck_assert(!strstr(r.out, "\n  kernels  "));   /* no summary */
    ck_assert_msg(!cli_file_exists("-"), "a file named '-' was written");
    cli_result_free(&r);
    /* two things cannot share stdout; -o writes many files */
    r = RUN("--emit", "plan", "--report", "-", mlp());
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "mcirc: error: --emit and --report - both want stdout"));
    ck_assert_str_eq(r.out, "");
    cli_result_free(&r);
    r = RUN("-o", "-", mlp());
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "mcirc: error: -o writes a directory"));
    cli_result_free(&r);
    ck_assert(!cli_file_exists("-"));
}
END_TEST

START_TEST(dev_stdout_stays_a_link) {
    /* the test's stdout is a regular (unlinked) file here: the case in
     * which a rename used to replace /dev/stdout itself */
    bool was_link = is_link("/dev/stdout");
    cli_result r = RUN("--report", "/dev/stdout", mlp());
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(is_report(r.out), "stdout is not the report alone: %.200s", r.out);
    ck_assert_int_eq(is_link("/dev/stdout"), was_link);
    cli_result_free(&r);
}
END_TEST

START_TEST(fifo_is_written_into) {
    ck_assert_int_eq(mkfifo(at("pipe"), 0644), 0);
    pid_t reader = fork();
    if (reader == 0) {   /* copies what comes through the FIFO into got.html */
        int in = open(at("pipe"), O_RDONLY), out = open(at("got.html"), O_WRONLY | O_CREAT, 0644);
        char buf[4096];
        ssize_t n;
        while (in >= 0 && (n = read(in, buf, sizeof buf)) > 0)
            if (write(out, buf, (size_t)n) != n) _exit(1);
        _exit(0);
    }
    cli_result r = RUN("--report", at("pipe"), mlp());
    /* should mcirc never have opened it, this lets the reader finish */
    int unblock = open(at("pipe"), O_WRONLY | O_NONBLOCK);
    if (unblock >= 0) close(unblock);
    int ws;
    waitpid(reader, &ws, 0);
    ck_assert_msg(r.status == 0, "%s", r.err);
    struct stat st;
    ck_assert_int_eq(lstat(at("pipe"), &st), 0);
    ck_assert_msg(S_ISFIFO(st.st_mode), "the FIFO was replaced");
    char *got = test_slurp(at("got.html"), NULL);
    ck_assert_msg(is_report(got), "the reader got: %.200s", got ? got : "(nothing)");
    free(got);
    ck_assert_int_eq(cli_dir_entries(tmp), 2);
    cli_result_free(&r);
}
END_TEST

START_TEST(links_are_written_through) {
    put(at("target.html"), "old");
    chmod(at("target.html"), 0600);
    ck_assert_int_eq(symlink("target.html", at("link.html")), 0);
    cli_result r = RUN("--report", at("link.html"), mlp());
    ck_assert_msg(r.status == 0, "%s", r.err);
    cli_result_free(&r);
    ck_assert(is_link(at("link.html")));
    char *got = test_slurp(at("target.html"), NULL);
    ck_assert(is_report(got));
    free(got);
    struct stat st;
    ck_assert_int_eq(stat(at("target.html"), &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0600);   /* the same file to its readers */

    /* dangling: its target is created, the link stays */
    ck_assert_int_eq(symlink("new.html", at("dangling.html")), 0);
    r = RUN("--report", at("dangling.html"), mlp());
    ck_assert_msg(r.status == 0, "%s", r.err);
    cli_result_free(&r);
    ck_assert(is_link(at("dangling.html")));
    got = test_slurp(at("new.html"), NULL);
    ck_assert(is_report(got));
    free(got);

    /* dangling into a directory that is not there: exit 1, nothing made */
    ck_assert_int_eq(symlink("nowhere/x.html", at("broken.html")), 0);
    r = RUN("--report", at("broken.html"), mlp());
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "broken.html: error: cannot create a file in ") &&
                      strstr(r.err, "nowhere/x.html"),
                  "%s", r.err);
    ck_assert_str_eq(r.out, "");
    cli_result_free(&r);
    ck_assert_int_eq(cli_dir_entries(tmp), 5);
}
END_TEST

START_TEST(out_dir_writes_through_links) {
    mkdir(at("out"), 0755);
    mkdir(at("keep"), 0755);
    ck_assert_int_eq(symlink("../keep/plan.json", at("out/plan.json")), 0);
    cli_result r = RUN("-o", at("out"), "--run", "--device", "cpu", mlp());
    ck_assert_msg(r.status == 0, "%s", r.err);
    cli_result_free(&r);
    ck_assert(is_link(at("out/plan.json")));
    char *plan = test_slurp(at("keep/plan.json"), NULL);
    ck_assert_msg(plan && strstr(plan, "\"kernels\""), "%s", plan ? plan : "(none)");
    free(plan);
    ck_assert(cli_file_exists(at("out/report.html")));
    ck_assert(cli_file_exists(at("out/y.npy")));
}
END_TEST

START_TEST(read_only_directory_is_exit_1) {
    mkdir(at("ro"), 0755);
    chmod(at("ro"), 0555);
    cli_result r = cli_run_unprivileged((const char *const[]){"--report", at("ro/r.html"), mlp(),
                                                              NULL});
    ck_assert_int_eq(r.status, 1);
    char want[2 * PATH_MAX];
    snprintf(want, sizeof want, "%s: error: cannot create a file in %s: Permission denied\n",
             at("ro/r.html"), at("ro"));
    ck_assert_str_eq(r.err, want);
    ck_assert_str_eq(r.out, "");
    cli_result_free(&r);
    r = cli_run_unprivileged((const char *const[]){"-o", at("ro/out"), mlp(), NULL});
    ck_assert_int_eq(r.status, 1);
    ck_assert_msg(strstr(r.err, "ro/out: error: cannot create the output directory: Permission "
                                "denied"),
                  "%s", r.err);
    cli_result_free(&r);
    ck_assert_int_eq(cli_dir_entries(at("ro")), 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("output_paths");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, outfile_commit_replaces_and_keeps_mode);
    tcase_add_test(tc, outfile_discard_leaves_the_old_file);
    tcase_add_test(tc, outfile_failures_say_why);
    tcase_add_test(tc, outfile_publish_writes_through_a_link);
    tcase_add_test(tc, dash_is_stdout_and_only_the_report);
    tcase_add_test(tc, dev_stdout_stays_a_link);
    tcase_add_test(tc, fifo_is_written_into);
    tcase_add_test(tc, links_are_written_through);
    tcase_add_test(tc, out_dir_writes_through_links);
    tcase_add_test(tc, read_only_directory_is_exit_1);
    suite_add_tcase(s, tc);
    return test_main(s);
}
