/*
 * outfile.c — how every mcir program writes an output file (docs/cli.md,
 * "Output files"): the report, .npy outputs and weights, generated
 * sources and PTX, the artifacts of -o, the tuning cache, mcir-memplan's
 * placement and the benchmarks' CSV all go through mcir_outfile.
 *
 * Invariant: nothing is visible at the path until the whole file is
 * written, and a rename only ever replaces a regular file. The path is
 * looked at once, when the file is opened:
 *   "-", or the file that is stdout itself (/dev/stdout)
 *                        → the bytes go to stdout, at commit;
 *   a symbolic link      → followed, link by link, to the file it names
 *                          (which a dangling link's target becomes);
 *   absent or regular    → a temporary beside it, renamed over it at
 *                          commit (an existing file keeps its mode);
 *   any other file (a device, a FIFO, a socket), or a link of /proc whose
 *   target is no path (/proc/self/fd/N)
 *                        → opened and written directly, at commit.
 * Direct and stdout targets are buffered in memory until the commit, so a
 * failure before it leaves them untouched too.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "mcir/mcir.h"

#define PROC_SUPER_MAGIC_ 0x9fa0   /* <linux/magic.h>'s PROC_SUPER_MAGIC */
#define MAX_LINKS 40               /* as the kernel's ELOOP limit */

enum { OUT_RENAME = 1, OUT_DIRECT, OUT_STDOUT };

static char *xstrdup(const char *s) {
    char *r = strdup(s);
    MCIR_ASSERT(r != NULL);
    return r;
}

/* The directory part of path ("." for a bare name), malloc'd. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return xstrdup(".");
    if (slash == path) return xstrdup("/");
    return strndup(path, (size_t)(slash - path));
}

static bool same_file_as_stdout(const char *path) {
    struct stat a, b;
    return stat(path, &a) == 0 && fstat(STDOUT_FILENO, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

bool mcir_path_is_stdout(const char *path) {
    return path && (!strcmp(path, "-") || same_file_as_stdout(path));
}

/* Where the bytes for path go: o->kind, o->target, and for a rename the
 * existing file's stat (o->existed). false with errno set. */
static bool resolve(mcir_outfile *o, const char *path) {
    if (mcir_path_is_stdout(path)) {
        o->kind = OUT_STDOUT;
        return true;
    }
    char *cur = xstrdup(path);
    for (int hops = 0; hops <= MAX_LINKS; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0) {
            if (errno != ENOENT) break;
            o->kind = OUT_RENAME;   /* a new file (the end of a dangling link) */
            o->target = cur;
            return true;
        }
        if (!S_ISLNK(st.st_mode)) {
            if (S_ISDIR(st.st_mode)) {
                errno = EISDIR;
                break;
            }
            o->kind = S_ISREG(st.st_mode) ? OUT_RENAME : OUT_DIRECT;
            o->target = cur;
            o->existed = S_ISREG(st.st_mode);
            o->mode = st.st_mode & 07777;
            o->uid = st.st_uid;
            o->gid = st.st_gid;
            return true;
        }
        char *dir = dir_of(cur);
        struct statfs fs;
        bool magic = statfs(dir, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC_;
        if (magic) {
            /* /proc/self/fd/N and the like: what they open is right, what
             * they read as ("pipe:[7]", "/x (deleted)") is no path */
            free(dir);
            if (stat(cur, &st) != 0) break;
            if (S_ISDIR(st.st_mode)) {
                errno = EISDIR;
                break;
            }
            o->kind = OUT_DIRECT;
            o->target = cur;
            return true;
        }
        char link[PATH_MAX];
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0) {
            free(dir);
            break;
        }
        link[n] = 0;
        char *next;
        if (link[0] == '/' || !strcmp(dir, ".")) {
            next = xstrdup(link);
        } else {
            size_t len = strlen(dir) + 1 + (size_t)n + 1;
            next = malloc(len);
            MCIR_ASSERT(next != NULL);
            snprintf(next, len, "%s/%s", strcmp(dir, "/") ? dir : "", link);
        }
        free(dir);
        free(cur);
        cur = next;
        if (hops == MAX_LINKS) errno = ELOOP;
    }
    int saved = errno;
    free(cur);
    errno = saved;
    return false;
}

/* "PATH: error: WHAT: strerror(err)", naming the file a link led to. */
static void fail(const mcir_outfile *o, mcir_diag *d, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void fail(const mcir_outfile *o, mcir_diag *d, int err, const char *fmt, ...) {
    char what[PATH_MAX + 128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (o->target && strcmp(o->target, o->path))
        mcir_error(d, (mcir_loc){o->path, 0, 0}, "%s (writing %s, which the link names): %s",
                   what, o->target, strerror(err));
    else
        mcir_error(d, (mcir_loc){o->path, 0, 0}, "%s: %s", what, strerror(err));
}

static void release(mcir_outfile *o) {
    free(o->path);
    free(o->target);
    free(o->tmp);
    free(o->buf);
    memset(o, 0, sizeof *o);
}

bool mcir_outfile_open(mcir_outfile *o, const char *path, mcir_diag *d) {
    memset(o, 0, sizeof *o);
    o->path = xstrdup(path);
    if (!resolve(o, path)) {
        mcir_error(d, (mcir_loc){path, 0, 0}, "cannot write: %s", strerror(errno));
        release(o);
        return false;
    }
    if (o->kind != OUT_RENAME) {
        o->f = open_memstream(&o->buf, &o->len);
        MCIR_ASSERT(o->f != NULL);
        return true;
    }
    /* a temporary in the target's directory, so that rename replaces it */
    char *dir = dir_of(o->target);
    const char *base = strrchr(o->target, '/') ? strrchr(o->target, '/') + 1 : o->target;
    size_t len = strlen(dir) + strlen(base) + 16;
    o->tmp = malloc(len);
    MCIR_ASSERT(o->tmp != NULL);
    snprintf(o->tmp, len, "%s/.%s.XXXXXX", dir, base);
    free(dir);
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        int err = errno;
        char *dir_name = dir_of(o->target);
        fail(o, d, err, "cannot create a file in %s", dir_name);
        free(dir_name);
        free(o->tmp);
        o->tmp = NULL;
        release(o);
        return false;
    }
    if (o->existed) {
        /* the replacement is the same file to everyone else: same mode
         * (and owner, where we may set it) */
        if (fchown(fd, o->uid, o->gid) != 0) { /* not ours to give: keep ours */ }
        fchmod(fd, o->mode);
    } else {   /* mkstemp made it private; an output is an ordinary file */
        mode_t mask = umask(0);
        umask(mask);
        fchmod(fd, 0666 & ~mask);
    }
    o->f = fdopen(fd, "wb");
    MCIR_ASSERT(o->f != NULL);
    return true;
}

void mcir_outfile_discard(mcir_outfile *o) {
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    release(o);
}

static bool write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

bool mcir_outfile_commit(mcir_outfile *o, mcir_diag *d) {
    MCIR_ASSERT(o->f != NULL);
    bool ok = !ferror(o->f);
    int err = errno;
    if (fclose(o->f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    o->f = NULL;
    if (!ok) {
        fail(o, d, err ? err : EIO, "cannot write");
        mcir_outfile_discard(o);
        return false;
    }
    switch (o->kind) {
    case OUT_RENAME:
        if (rename(o->tmp, o->target) != 0) {
            fail(o, d, errno, "cannot rename the written file into place");
            mcir_outfile_discard(o);
            return false;
        }
        free(o->tmp);
        o->tmp = NULL;
        break;
    case OUT_STDOUT:
        fflush(stdout);
        if (!write_all(STDOUT_FILENO, o->buf, o->len)) {
            fail(o, d, errno, "cannot write to stdout");
            mcir_outfile_discard(o);
            return false;
        }
        break;
    case OUT_DIRECT: {
        int fd = open(o->target, O_WRONLY | O_TRUNC | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 || !write_all(fd, o->buf, o->len)) {
            err = errno;
            if (fd >= 0) close(fd);
            fail(o, d, err, "cannot write");
            mcir_outfile_discard(o);
            return false;
        }
        if (close(fd) != 0) {
            fail(o, d, errno, "cannot write");
            mcir_outfile_discard(o);
            return false;
        }
        break;
    }
    }
    release(o);
    return true;
}

bool mcir_outfile_write(const char *path, const void *data, size_t n, mcir_diag *d) {
    mcir_outfile o;
    if (!mcir_outfile_open(&o, path, d)) return false;
    if (n > 0 && fwrite(data, 1, n, o.f) != n) {
        fail(&o, d, errno, "cannot write");
        mcir_outfile_discard(&o);
        return false;
    }
    return mcir_outfile_commit(&o, d);
}

bool mcir_outfile_publish(const char *from, const char *path, mcir_diag *d) {
    mcir_outfile o = {0};
    o.path = xstrdup(path);
    if (!resolve(&o, path)) {
        mcir_error(d, (mcir_loc){path, 0, 0}, "cannot write: %s", strerror(errno));
        release(&o);
        return false;
    }
    if (o.kind == OUT_RENAME) {
        if (o.existed) {
            if (chown(from, o.uid, o.gid) != 0) { /* not ours to give: keep ours */ }
            chmod(from, o.mode);
        }
        if (rename(from, o.target) == 0) {
            release(&o);
            return true;
        }
        if (errno != EXDEV) {   /* across file systems: copied below */
            fail(&o, d, errno, "cannot rename the written file into place");
            release(&o);
            return false;
        }
    }
    release(&o);
    /* a device, a FIFO, stdout, or another file system: copy the bytes */
    FILE *in = fopen(from, "rb");
    if (!in) {
        mcir_error(d, (mcir_loc){from, 0, 0}, "cannot read: %s", strerror(errno));
        return false;
    }
    if (!mcir_outfile_open(&o, path, d)) {
        fclose(in);
        return false;
    }
    char buf[1 << 16];
    size_t k;
    bool ok = true;
    while (ok && (k = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, k, o.f) == k;
    ok = ok && !ferror(in);
    fclose(in);
    if (!ok) {
        fail(&o, d, errno, "cannot copy %s", from);
        mcir_outfile_discard(&o);
        return false;
    }
    if (!mcir_outfile_commit(&o, d)) return false;
    unlink(from);
    return true;
}
