/*
 * nvrtc.c — CUDA C → PTX + cubin with NVRTC, linked normally (found by
 * CMake's FindCUDAToolkit). Without the toolkit every compile fails cleanly
 * and mcir_nvrtc_available says why, so the project still builds.
 *
 * Invariant: every kernel is compiled with the same options (below), which
 * are part of the cache key through the version string, and ptxas reports
 * its resource usage (-v), parsed into registers / spill bytes.
 */
#include <ctype.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen-impl.h"

#ifdef MCIR_HAVE_NVRTC
#include <nvrtc.h>
#endif

static atomic_long nvrtc_calls;

long mcir_nvrtc_invocations(void) { return atomic_load(&nvrtc_calls); }

bool mcir_nvrtc_available(char *why, size_t n) {
#ifdef MCIR_HAVE_NVRTC
    int major, minor;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) {
        if (why) snprintf(why, n, "nvrtcVersion failed");
        return false;
    }
    if (why && n) why[0] = 0;
    return true;
#else
    if (why) snprintf(why, n, "mcir was built without the CUDA toolkit (NVRTC not found by CMake)");
    return false;
#endif
}

const char *mcir_nvrtc_version(void) {
#ifdef MCIR_HAVE_NVRTC
    static char buf[32];
    int major = 0, minor = 0;
    if (!buf[0]) {
        nvrtcVersion(&major, &minor);
        snprintf(buf, sizeof buf, "%d.%d", major, minor);
    }
    return buf;
#else
    return "none";
#endif
}

void mcir_compiled_free(mcir_compiled *c) {
    if (!c) return;
    free(c->ptx);
    free(c->cubin);
    free(c->log);
    memset(c, 0, sizeof *c);
}

void mcir_ptxas_parse(const char *log, int *registers, int *spill_bytes, int *stack) {
    *registers = -1;
    *spill_bytes = 0;
    *stack = 0;
    if (!log) return;
    const char *p = strstr(log, "Used ");
    if (p) *registers = atoi(p + 5);
    p = strstr(log, "bytes stack frame");
    if (p) {
        const char *q = p;
        while (q > log && (isdigit((unsigned char)q[-1]) || q[-1] == ' ')) q--;
        *stack = atoi(q);
        const char *s = strstr(p, "bytes spill stores");
        const char *l = strstr(p, "bytes spill loads");
        if (s && l) {
            const char *a = strchr(p, ',');
            const char *b2 = a ? strchr(a + 1, ',') : NULL;
            if (a && b2) *spill_bytes = atoi(a + 1) + atoi(b2 + 1);
        }
    }
}

#ifdef MCIR_HAVE_NVRTC
static const char *nvrtc_err(int rc) { return nvrtcGetErrorString((nvrtcResult)rc); }
#endif

bool cg_nvrtc_compile(const char *name, const char *source, const char *arch,
                      mcir_compiled *out, char **log, char *why, size_t n) {
    memset(out, 0, sizeof *out);
    *log = NULL;
#ifdef MCIR_HAVE_NVRTC
    nvrtcProgram prog = NULL;
    char archopt[64], fname[256];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
    snprintf(fname, sizeof fname, "%s.cu", name);
    const char *opts[] = {archopt, "--std=c++17", "--ptxas-options=-v"};
    CG_CHECK("NVRTC", nvrtcCreateProgram(&prog, source, fname, 0, NULL, NULL), NVRTC_SUCCESS,
             nvrtc_err, why, n);
    atomic_fetch_add(&nvrtc_calls, 1);
    nvrtcResult rc = nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof *opts), opts);
    size_t lsz = 0;
    if (nvrtcGetProgramLogSize(prog, &lsz) == NVRTC_SUCCESS && lsz > 1) {
        *log = malloc(lsz);
        if (*log && nvrtcGetProgramLog(prog, *log) != NVRTC_SUCCESS) (*log)[0] = 0;
    }
    if (rc != NVRTC_SUCCESS) {
        snprintf(why, n, "NVRTC error %d (%s) in nvrtcCompileProgram", (int)rc, nvrtc_err(rc));
        goto fail;
    }
    CG_CHECK("NVRTC", nvrtcGetPTXSize(prog, &out->ptx_size), NVRTC_SUCCESS, nvrtc_err, why, n);
    out->ptx = malloc(out->ptx_size + 1);
    MCIR_ASSERT(out->ptx != NULL);
    CG_CHECK("NVRTC", nvrtcGetPTX(prog, out->ptx), NVRTC_SUCCESS, nvrtc_err, why, n);
    out->ptx[out->ptx_size] = 0;
    out->ptx_size = strlen(out->ptx);
    CG_CHECK("NVRTC", nvrtcGetCUBINSize(prog, &out->cubin_size), NVRTC_SUCCESS, nvrtc_err, why, n);
    out->cubin = malloc(out->cubin_size ? out->cubin_size : 1);
    MCIR_ASSERT(out->cubin != NULL);
    CG_CHECK("NVRTC", nvrtcGetCUBIN(prog, (char *)out->cubin), NVRTC_SUCCESS, nvrtc_err, why, n);
    mcir_ptxas_parse(*log, &out->registers, &out->spill_bytes, &out->stack_bytes);
    nvrtcDestroyProgram(&prog);
    return true;
fail:
    if (prog) nvrtcDestroyProgram(&prog);
    mcir_compiled_free(out);
    return false;
#else
    (void)name; (void)source; (void)arch;
    mcir_nvrtc_available(why, n);
    return false;
#endif
}

/* Quotes the source lines NVRTC's log points at ("NAME.cu(LINE): error"). */
static void quote_lines(mcir_diag *d, const char *name, const char *source, const char *log) {
    char pat[300];
    snprintf(pat, sizeof pat, "%s.cu(", name);
    int shown = 0;
    for (const char *p = strstr(log, pat); p && shown < 8; p = strstr(p + 1, pat)) {
        long line = strtol(p + strlen(pat), NULL, 10);
        if (line <= 0) continue;
        const char *s = source;
        for (long l = 1; l < line && s; l++) {
            s = strchr(s, '\n');
            if (s) s++;
        }
        if (!s) continue;
        const char *e = strchr(s, '\n');
        int len = e ? (int)(e - s) : (int)strlen(s);
        if (d && d->out) fprintf(d->out, "%s.cu:%ld: | %.*s\n", name, line, len, s);
        shown++;
    }
}

bool mcir_nvrtc_compile_source(const char *name, const char *source, const char *arch,
                               mcir_compiled *out, mcir_diag *d) {
    char key[33];
    cg_hash_key(key, source, arch, mcir_nvrtc_version());
    if (cg_cache_load(key, out)) return true;
    char why[512], *log = NULL;
    if (!cg_nvrtc_compile(name, source, arch, out, &log, why, sizeof why)) {
        mcir_error(d, (mcir_loc){.path = name}, "%s: %s%s%s", name, why, log ? "\n" : "",
                   log ? log : "");
        if (log) quote_lines(d, name, source, log);
        free(log);
        return false;
    }
    out->log = log;
    cg_cache_store(key, out);
    return true;
}
