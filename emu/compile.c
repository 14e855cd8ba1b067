/*
 * compile.c — a generated compile unit built for the emulated device: the
 * CUDA source (with the launchers codegen appends under MC_EMULATE) as C++
 * after the emulator header, by the host C++ compiler ($CXX, else c++),
 * into a shared object; the module image cuModuleLoadData takes is
 * "MCIREMU1", the object's size (u64) and its bytes. The emulator headers
 * are the ones embedded in the library (emu/cuda_emu.h and the
 * architecture parts it includes, emu/cuda_emu_sm80.h and
 * emu/cuda_emu_sm90.h), written once per process into a private
 * directory, so an installed mcirc needs nothing but a compiler.
 *
 * Invariants: compiles may run in parallel (codegen's workers): each job
 * has its own file names; the private directory and its files are gone
 * when the process exits.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emu/emu-impl.h"
#include "mcir/mcir.h"

extern char **environ;

/* The emulator's headers as embedded (emu/CMakeLists.txt), written side by
 * side into the private directory: the generated unit includes the first,
 * which includes the others by their sibling names. */
static const struct {
    const char *name, *text;
    const size_t *size;
} headers[] = {
    {"cuda_emu.h", mcir_emu_header_cuda_emu, &mcir_emu_header_cuda_emu_size},
    {"cuda_emu_sm80.h", mcir_emu_header_cuda_emu_sm80, &mcir_emu_header_cuda_emu_sm80_size},
    {"cuda_emu_sm90.h", mcir_emu_header_cuda_emu_sm90, &mcir_emu_header_cuda_emu_sm90_size},
};
enum { N_HEADERS = sizeof headers / sizeof headers[0] };

static struct {
    pthread_once_t once;
    bool ok;
    char why[600];
    char cxx[256];
    char version[640];
    char dir[512];
    atomic_long seq;
} cc = {.once = PTHREAD_ONCE_INIT};

static const char *cxx_name(void) {
    const char *e = getenv("CXX");
    return e && *e ? e : "c++";
}

/* Runs argv (argv[0] looked up on PATH) with stdout and stderr into log;
 * its exit status, or -1 where it could not start. */
static int run(char *const *argv, const char *log) { return mcir_run_program(argv, log, NULL); }

/* The first lines of file path into buf (n bytes). */
static void head_of(const char *path, char *buf, size_t n) {
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = 0;
    fclose(f);
    int lines = 0;
    for (char *p = buf; *p; p++)
        if (*p == '\n' && ++lines == 8) {
            *p = 0;
            break;
        }
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

#if defined(__SANITIZE_ADDRESS__)
#define SAN_FLAGS "-fsanitize=address -fno-omit-frame-pointer"
#else
#define SAN_FLAGS ""
#endif

static void cleanup(void) {
    if (!cc.dir[0]) return;
    char path[600];
    for (int i = 0; i < N_HEADERS; i++) {
        snprintf(path, sizeof path, "%s/%s", cc.dir, headers[i].name);
        unlink(path);
    }
    rmdir(cc.dir);
}

static void setup(void) {
    snprintf(cc.cxx, sizeof cc.cxx, "%s", cxx_name());
    const char *tmp = getenv("TMPDIR");
    snprintf(cc.dir, sizeof cc.dir, "%s/mcir-emu-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(cc.dir)) {
        snprintf(cc.why, sizeof cc.why, "cannot make a directory for the emulator's modules in %s: %s",
                 tmp && *tmp ? tmp : "/tmp", strerror(errno));
        cc.dir[0] = 0;
        return;
    }
    atexit(cleanup);
    char log[600], first[400];
    snprintf(log, sizeof log, "%s/version.log", cc.dir);
    char *argv[] = {cc.cxx, "--version", NULL};
    int rc = run(argv, log);
    head_of(log, first, sizeof first);
    unlink(log);
    if (rc != 0) {
        snprintf(cc.why, sizeof cc.why,
                 "the emulated device needs a host C++ compiler to build the kernels: '%s --version' %s (set CXX, "
                 "or install g++)",
                 cc.cxx, rc < 0 ? "could not run" : "failed");
        return;
    }
    char *nl = strchr(first, '\n');
    if (nl) *nl = 0;
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < N_HEADERS; i++) {
        char header[600];
        snprintf(header, sizeof header, "%s/%s", cc.dir, headers[i].name);
        FILE *f = fopen(header, "w");
        bool wrote = f && fwrite(headers[i].text, 1, *headers[i].size, f) == *headers[i].size;
        if (f) wrote = fclose(f) == 0 && wrote;
        if (!wrote) {
            snprintf(cc.why, sizeof cc.why, "cannot write the emulator header %s into %s", headers[i].name, cc.dir);
            return;
        }
        h = fnv(h, headers[i].name, strlen(headers[i].name) + 1);
        h = fnv(h, headers[i].text, *headers[i].size);
    }
    snprintf(cc.version, sizeof cc.version, "emu %016llx %s -std=c++17 -O1 %s", (unsigned long long)h, first,
             SAN_FLAGS);
    cc.ok = true;
}

bool mcir_emu_available(char *why, size_t n) {
    pthread_once(&cc.once, setup);
    if (why && n) snprintf(why, n, "%s", cc.ok ? "" : cc.why);
    return cc.ok;
}

const char *mcir_emu_version(void) {
    pthread_once(&cc.once, setup);
    return cc.ok ? cc.version : "emu unavailable";
}

bool mcir_emu_compile_unit(const char *name, const char *source, unsigned char **image, size_t *size, char *why,
                           size_t n) {
    *image = NULL;
    *size = 0;
    if (!mcir_emu_available(why, n)) return false;
    long id = atomic_fetch_add(&cc.seq, 1);
    char cpp[700], so[700], log[700];
    snprintf(cpp, sizeof cpp, "%s/unit%ld.cpp", cc.dir, id);
    snprintf(so, sizeof so, "%s/unit%ld.so", cc.dir, id);
    snprintf(log, sizeof log, "%s/unit%ld.log", cc.dir, id);
    FILE *f = fopen(cpp, "w");
    if (!f) {
        snprintf(why, n, "cannot write %s", cpp);
        return false;
    }
    fprintf(f, "#include \"cuda_emu.h\"\n%s\n", source);
    bool wrote = !ferror(f);
    wrote = fclose(f) == 0 && wrote;
    char inc[600];
    snprintf(inc, sizeof inc, "-I%s", cc.dir);
    char *argv[16];
    int a = 0;
    argv[a++] = cc.cxx;
    argv[a++] = "-std=c++17";
    argv[a++] = "-O1";
    argv[a++] = "-w";
    argv[a++] = "-shared";
    argv[a++] = "-fPIC";
    argv[a++] = "-fno-gnu-unique";   /* each module's __shared__ statics its own */
#if defined(__SANITIZE_ADDRESS__)
    argv[a++] = "-fsanitize=address";   /* a kernel-local array overrun is reported too */
    argv[a++] = "-fno-omit-frame-pointer";
#endif
    argv[a++] = inc;
    argv[a++] = "-o";
    argv[a++] = so;
    argv[a++] = cpp;
    argv[a] = NULL;
    int rc = wrote ? run(argv, log) : -1;
    bool ok = rc == 0;
    if (!ok) {
        char first[400];
        head_of(log, first, sizeof first);
        snprintf(why, n, "%s: the host C++ compiler (%s) failed on the kernel for the emulator%s%s", name, cc.cxx,
                 first[0] ? ":\n" : "", first);
    } else {
        FILE *in = fopen(so, "rb");
        long len = -1;
        if (in && fseek(in, 0, SEEK_END) == 0) len = ftell(in);
        if (in && len > 0 && fseek(in, 0, SEEK_SET) == 0) {
            *image = malloc((size_t)len + 16);
            MCIR_ASSERT(*image != NULL);
            uint64_t sz = (uint64_t)len;
            memcpy(*image, "MCIREMU1", 8);
            memcpy(*image + 8, &sz, 8);
            ok = fread(*image + 16, 1, (size_t)len, in) == (size_t)len;
            *size = (size_t)len + 16;
        } else {
            ok = false;
        }
        if (in) fclose(in);
        if (!ok) {
            free(*image);
            *image = NULL;
            *size = 0;
            snprintf(why, n, "%s: cannot read the module the host compiler built", name);
        }
    }
    unlink(cpp);
    unlink(so);
    unlink(log);
    return ok;
}
