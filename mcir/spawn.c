/*
 * spawn.c — how the library runs a toolkit program (the emulated device's
 * C++ compiler, emu/compile.c; nvdisasm for the SASS audit, codegen/sass.c):
 * posix_spawn, never system(), its output into files.
 *
 * Invariant: safe from several threads at once (each run names its own
 * files); the child's stdin is /dev/null.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include "mcir/mcir.h"

extern char **environ;

int mcir_run_program(char *const *argv, const char *out, const char *err) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (err) posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    else posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
