/*
 * cli_util.c — see cli_util.h. The program under test is named by the
 * MCIRC_BINARY compile definition; it runs with stdout and stderr sent to
 * temporary files so arbitrarily long output is captured without pipes.
 */
#include "cli_util.h"

#include <dirent.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *slurp(FILE *f) {
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    return s;
}

static cli_result run(const char *const *args, bool unprivileged) {
    int argc = 0;
    while (args[argc]) argc++;
    const char **argv = calloc((size_t)argc + 2, sizeof *argv);
    argv[0] = MCIRC_BINARY;
    for (int i = 0; i < argc; i++) argv[i + 1] = args[i];
    FILE *out = tmpfile(), *err = tmpfile();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fileno(out), 1);
        dup2(fileno(err), 2);
        if (unprivileged && geteuid() == 0 &&
            (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) {
            perror("cli_run_unprivileged: cannot become uid 65534");
            _exit(126);
        }
        execv(MCIRC_BINARY, (char *const *)argv);
        _exit(127);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    cli_result r;
    r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    r.out = slurp(out);
    r.err = slurp(err);
    fclose(out);
    fclose(err);
    free(argv);
    return r;
}

cli_result cli_run(const char *const *args) { return run(args, false); }

cli_result cli_run_unprivileged(const char *const *args) { return run(args, true); }

void cli_result_free(cli_result *r) {
    free(r->out);
    free(r->err);
}

char *cli_tempdir(void) {
    char *p = strdup("/tmp/mcir-test-XXXXXX");
    if (!mkdtemp(p)) abort();
    return p;
}

void cli_remove_tree(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char sub[PATH_MAX];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        cli_remove_tree(sub);
    }
    closedir(d);
    rmdir(path);
}

bool cli_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int cli_dir_entries(const char *path) {
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

const char *cli_src(const char *rel) {
    static char bufs[8][PATH_MAX];
    static int k;
    const char *root = getenv("MCIR_SOURCE_DIR");
    char *b = bufs[k++ % 8];
    snprintf(b, PATH_MAX, "%s/%s", root ? root : "..", rel);
    return b;
}
