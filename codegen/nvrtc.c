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
    free(c->sass);
    memset(c, 0, sizeof *c);
}

/* The number in front of `what` on the same line ("24 bytes stack frame"
 * → 24), or 0. */
static int number_before(const char *line_start, const char *what) {
    const char *q = what;
    while (q > line_start && q[-1] == ' ') q--;
    while (q > line_start && isdigit((unsigned char)q[-1])) q--;
    return atoi(q);
}

/* A ptxas advisory or warning line: "ptxas info    : (C7514) TEXT" or
 * "ptxas warning : TEXT"; *code: "C7514" or "" */
static bool advisory_line(const char *buf, char *code, size_t n, const char **text) {
    const char *p = strstr(buf, "ptxas");
    if (!p) return false;
    const char *colon = strchr(p, ':');
    if (!colon) return false;
    const char *t = colon + 1;
    while (*t == ' ') t++;
    code[0] = 0;
    if (t[0] == '(' && t[1] == 'C' && strspn(t + 2, "0123456789") == 4 && t[6] == ')') {
        snprintf(code, n, "%.5s", t + 1);
        t += 7;
        while (*t == ' ') t++;
        *text = t;
        return true;
    }
    if (strncmp(p, "ptxas warning", 13) == 0) {
        *text = t;
        return true;
    }
    return false;
}

void mcir_ptxas_report(const char *log, mcir_compiled *c) {
    c->registers = -1;
    c->spill_bytes = c->spill_store_bytes = c->spill_load_bytes = 0;
    c->stack_bytes = c->smem_static_bytes = 0;
    c->advisories = 0;
    c->advisory[0] = 0;
    if (!log) return;
    /* ptxas -v, one block per function:
     *   ptxas info    : Compiling entry function 'E' for 'sm_90'
     *   ptxas info    : Function properties for E
     *   ptxas         .     24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
     *   ptxas info    : Used 168 registers, used 1 barriers, 8704 bytes smem, 400 bytes cmem[0]
     * Non-inlined callees get a "Function properties" block of their own.
     * A unit's split-KV merge (ENTRY_merge) is a helper launch of ENTRY:
     * the registers, stack and static smem are ENTRY's, whatever order
     * ptxas compiles them in (spills and advisories count for both). */
    char entry[256] = "";
    bool in_entry = false, merge = false;
    int props = 0;   /* the block a stack line belongs to: 0 the entry's (unnamed), 1 the entry, 2 a callee */
    for (const char *line = log; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        const char *p;
        char code[8];
        if (advisory_line(buf, code, sizeof code, &p)) {
            if (c->advisories++ == 0)
                snprintf(c->advisory, sizeof c->advisory, "%s%s%s", code, code[0] ? ": " : "warning: ", p);
        } else if ((p = strstr(buf, "Compiling entry function '"))) {
            in_entry = true;
            props = 0;
            p += strlen("Compiling entry function '");
            const char *q = strchr(p, '\'');
            snprintf(entry, sizeof entry, "%.*s", q ? (int)(q - p) : 0, p);
            size_t el = strlen(entry);
            merge = el > 6 && strcmp(entry + el - 6, "_merge") == 0;
        } else if ((p = strstr(buf, "Function properties for "))) {
            props = strcmp(p + strlen("Function properties for "), entry) == 0 ? 1 : 2;
        } else if ((p = strstr(buf, "bytes stack frame"))) {
            if (in_entry && !merge && props != 2 && c->registers < 0) c->stack_bytes = number_before(buf, p);
            const char *s = strstr(buf, "bytes spill stores");
            const char *l = strstr(buf, "bytes spill loads");
            if (s) c->spill_store_bytes += number_before(buf, s);
            if (l) c->spill_load_bytes += number_before(buf, l);
        } else if ((p = strstr(buf, "Used ")) && strstr(buf, "registers")) {
            if (in_entry && !merge && c->registers < 0) {
                c->registers = atoi(p + 5);
                const char *sm = strstr(buf, "bytes smem");
                if (sm) c->smem_static_bytes = number_before(buf, sm);
            }
        }
        line += len + (end ? 1 : 0);
    }
    /* a log without "Compiling entry function" (an older ptxas): first Used line */
    if (c->registers < 0 && (log = strstr(log, "Used "))) c->registers = atoi(log + 5);
    c->spill_bytes = c->spill_store_bytes + c->spill_load_bytes;
}

void mcir_ptxas_parse(const char *log, int *registers, int *spill_bytes, int *stack) {
    mcir_compiled c;
    memset(&c, 0, sizeof c);
    mcir_ptxas_report(log, &c);
    *registers = c.registers;
    *spill_bytes = c.spill_bytes;
    *stack = c.stack_bytes;
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
    mcir_ptxas_report(*log, out);
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

void cg_nvrtc_report(mcir_diag *d, const char *name, const char *source, const char *why,
                     const char *log) {
    mcir_error(d, (mcir_loc){.path = name}, "%s: %s%s%s", name, why, log ? "\n" : "", log ? log : "");
    if (log) quote_lines(d, name, source, log);
}

bool mcir_nvrtc_compile_source(const char *name, const char *source, const char *arch,
                               mcir_compiled *out, mcir_diag *d) {
    char key[33];
    cg_hash_key(key, source, arch, mcir_nvrtc_version());
    if (cg_cache_load(key, out)) return true;
    char why[512], *log = NULL;
    if (!cg_nvrtc_compile(name, source, arch, out, &log, why, sizeof why)) {
        cg_nvrtc_report(d, name, source, why, log);
        free(log);
        return false;
    }
    out->log = log;
    cg_cache_store(key, out);
    return true;
}
