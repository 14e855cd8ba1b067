/*
 * sass.c — the SASS the SM executes, for the kernel audit: nvdisasm found
 * once per process, run on a compiled cubin (its text cached beside the
 * kernel cache's entry), and its text read for the launched entry —
 * instructions, global loads and stores by width, MUFU functions, the
 * IEEE division / square-root slow paths, the control-flow graph, its
 * natural loops, the main loop of a memory-bound kernel (the innermost
 * loops holding a global access) and the loads in flight before their first
 * use (docs/codegen.md "Kernel audit").
 *
 * nvdisasm is not part of /usr/local/cuda here; it is looked for in
 * $MCIR_NVDISASM ("off" turns the SASS audit off), on PATH, in
 * $CUDA_HOME/bin and /usr/local/cuda/bin, then in the site-packages of
 * python3, where PyPI's nvidia-cuda-nvdisasm puts it
 * (nvidia/cu13/bin/nvdisasm; nvidia/cuda_nvdisasm/bin/nvdisasm before
 * CUDA 13). scripts/test-deps.sh installs that package.
 *
 * Invariants: nothing here fails a compile — where nvdisasm is missing or
 * fails, the audit says why; counts are static (occurrences in the text,
 * not executions); disassembly may run in parallel (codegen's workers):
 * each run has its own temporary files.
 */
#include <errno.h>
#include <glob.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/codegen-impl.h"

/* ------------------------------------------------------------ finding */

static pthread_once_t nvd_once = PTHREAD_ONCE_INIT;
static char nvd_path[1024], nvd_why[200], nvd_id[64];

static bool executable(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* dir/rel into nvd_path where that is an executable file. */
static bool try_dir(const char *dir, const char *rel) {
    if (!dir || !*dir) return false;
    char p[sizeof nvd_path];
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, rel) >= sizeof p || !executable(p)) return false;
    memcpy(nvd_path, p, sizeof p);
    return true;
}

/* The wheel's layouts: CUDA 13 (nvidia/cu13/bin), CUDA 12 (nvidia/cuda_nvdisasm/bin). */
static const char *const wheel_bins[] = {"nvidia/cu13/bin/nvdisasm", "nvidia/cuda_nvdisasm/bin/nvdisasm"};

static bool try_site(const char *site) {
    for (size_t i = 0; i < sizeof wheel_bins / sizeof *wheel_bins; i++)
        if (try_dir(site, wheel_bins[i])) return true;
    return false;
}

/* The first match of a glob pattern that is an executable file. */
static bool try_glob(const char *pattern) {
    glob_t g;
    bool found = false;
    if (glob(pattern, 0, NULL, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc && !found; i++)
            if (executable(g.gl_pathv[i]) && strlen(g.gl_pathv[i]) < sizeof nvd_path) {
                snprintf(nvd_path, sizeof nvd_path, "%s", g.gl_pathv[i]);
                found = true;
            }
    globfree(&g);
    return found;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    MCIR_ASSERT(buf != NULL);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
            MCIR_ASSERT(buf != NULL);
        }
    }
    fclose(f);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

/* A private temporary file name: TMPDIR/mcir-<tag>-XXXXXX, created empty. */
static bool temp_file(const char *tag, char *path, size_t n) {
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    if ((size_t)snprintf(path, n, "%s/mcir-%s-XXXXXX", dir, tag) >= n) return false;
    int fd = mkstemp(path);
    if (fd < 0) return false;
    close(fd);
    return true;
}

/* python3's site directories (purelib, platlib, the user's), asked once:
 * a virtual environment or pyenv puts them where no fixed path guesses. */
static bool try_python(void) {
    char out[600];
    if (!temp_file("py", out, sizeof out)) return false;
    char *argv[] = {"python3", "-c",
                    "import site, sysconfig\n"
                    "p = sysconfig.get_paths()\n"
                    "print(p.get('purelib', '')); print(p.get('platlib', ''))\n"
                    "print(site.getusersitepackages() if hasattr(site, 'getusersitepackages') else '')\n"
                    "for s in (site.getsitepackages() if hasattr(site, 'getsitepackages') else []): print(s)\n",
                    NULL};
    bool found = false;
    if (mcir_run_program(argv, out, "/dev/null") == 0) {
        char *text = slurp(out, NULL);
        for (char *line = text; line && *line && !found;) {
            char *end = strchr(line, '\n');
            if (end) *end = 0;
            found = try_site(line);
            line = end ? end + 1 : NULL;
        }
        free(text);
    }
    unlink(out);
    return found;
}

/* Where nvdisasm is, into nvd_path; false with nvd_why. */
static bool look_for_nvdisasm(void) {
    const char *e = getenv("MCIR_NVDISASM");
    if (e && *e) {
        if (!strcmp(e, "off") || !strcmp(e, "0") || !strcmp(e, "none")) {
            snprintf(nvd_why, sizeof nvd_why, "MCIR_NVDISASM=%s", e);
            return false;
        }
        if (executable(e) && strlen(e) < sizeof nvd_path) {
            snprintf(nvd_path, sizeof nvd_path, "%s", e);
            return true;
        }
        snprintf(nvd_why, sizeof nvd_why, "MCIR_NVDISASM=%.120s is not an executable file", e);
        return false;
    }
    bool found = false;
    const char *path = getenv("PATH");
    if (path) {
        char *copy = strdup(path);
        MCIR_ASSERT(copy != NULL);
        for (char *save = NULL, *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save))
            found = try_dir(d, "nvdisasm");
        free(copy);
    }
    const char *home = getenv("HOME");
    char pat[600];
    found = found || try_dir(getenv("CUDA_HOME"), "bin/nvdisasm") || try_dir(getenv("CUDA_PATH"), "bin/nvdisasm") ||
            try_dir("/usr/local/cuda", "bin/nvdisasm");
    /* the wheel where pip --user, Debian's pip and a root pip put it,
     * before asking python3 itself */
    for (size_t i = 0; i < sizeof wheel_bins / sizeof *wheel_bins && !found; i++) {
        if (home && (size_t)snprintf(pat, sizeof pat, "%s/.local/lib/python3*/site-packages/%s", home,
                                     wheel_bins[i]) < sizeof pat)
            found = try_glob(pat);
        snprintf(pat, sizeof pat, "/usr/local/lib/python3*/dist-packages/%s", wheel_bins[i]);
        found = found || try_glob(pat);
        snprintf(pat, sizeof pat, "/usr/lib/python3/dist-packages/%s", wheel_bins[i]);
        found = found || try_glob(pat);
    }
    found = found || try_python();
    if (!found)
        snprintf(nvd_why, sizeof nvd_why,
                 "nvdisasm not found (MCIR_NVDISASM, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, python3's "
                 "nvidia-cuda-nvdisasm: scripts/test-deps.sh installs it)");
    return found;
}

static void find_nvdisasm(void) {
    if (!look_for_nvdisasm()) {
        nvd_path[0] = 0;
        return;
    }
    struct stat st;   /* its identity, in the disassembly cache's key */
    if (stat(nvd_path, &st) == 0)
        snprintf(nvd_id, sizeof nvd_id, "%lld-%lld", (long long)st.st_size, (long long)st.st_mtime);
}

const char *mcir_nvdisasm_path(char *why, size_t n) {
    pthread_once(&nvd_once, find_nvdisasm);
    if (!nvd_path[0] && why && n) snprintf(why, n, "%s", nvd_why);
    return nvd_path[0] ? nvd_path : NULL;
}

/* ------------------------------------------------------- disassembling */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

bool cg_sass_disassemble(mcir_compiled *c, char *why, size_t n) {
    if (c->sass) return true;
    const char *nvd = mcir_nvdisasm_path(why, n);
    if (!nvd) return false;
    if (!c->cubin || !c->cubin_size) {
        snprintf(why, n, "no cubin");
        return false;
    }
    char key[40];
    uint64_t h1 = fnv(1469598103934665603ull, c->cubin, c->cubin_size);
    uint64_t h2 = fnv(fnv(0x9e3779b97f4a7c15ull, nvd, strlen(nvd)), nvd_id, strlen(nvd_id));
    snprintf(key, sizeof key, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
    if ((c->sass = cg_cache_load_text(key, "sass"))) return true;

    char cubin[600], out[620], err[620];
    if (!temp_file("cubin", cubin, sizeof cubin)) {
        snprintf(why, n, "cannot make a temporary file for the cubin: %s", strerror(errno));
        return false;
    }
    snprintf(out, sizeof out, "%s.sass", cubin);
    snprintf(err, sizeof err, "%s.err", cubin);
    FILE *f = fopen(cubin, "wb");
    bool wrote = f && fwrite(c->cubin, 1, c->cubin_size, f) == c->cubin_size;
    if (f) wrote = fclose(f) == 0 && wrote;
    int rc = -1;
    if (wrote) {
        char *argv[] = {(char *)nvd, "-c", cubin, NULL};
        rc = mcir_run_program(argv, out, err);
    }
    if (rc == 0) {
        c->sass = slurp(out, NULL);
        if (c->sass) cg_cache_store_text(key, "sass", c->sass);
    }
    if (!c->sass) {
        char *msg = wrote && rc != -1 ? slurp(err, NULL) : NULL;
        char *nl = msg ? strchr(msg, '\n') : NULL;
        if (nl) *nl = 0;
        if (!wrote) snprintf(why, n, "cannot write the cubin to %s", cubin);
        else if (rc == -1) snprintf(why, n, "cannot run %s", nvd);
        else snprintf(why, n, "nvdisasm failed (exit %d: %.120s)", rc, msg && *msg ? msg : "no message");
        free(msg);
    }
    unlink(cubin);
    unlink(out);
    unlink(err);
    return c->sass != NULL;
}

/* -------------------------------------------------------------- parsing */

/* One instruction of the entry. */
typedef struct sass_ins {
    const char *op;      /* "LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;": opcode, then operands */
    size_t op_n;         /* the opcode with its modifiers */
    const char *args;    /* the operands, up to ';' */
    size_t args_n;
    bool guarded;        /* @P0 / @!P0 (not @PT) */
    const char *target;  /* a branch's label ".L_x_2" */
    size_t target_n;
    int block;
} sass_ins;

typedef struct sass_label {
    const char *name;
    size_t n;
    int at;              /* the instruction it labels */
} sass_label;

typedef struct sass_fn {
    sass_ins *ins;
    int n, cap;
    sass_label *labels;
    int n_labels, cap_labels;
} sass_fn;

static bool op_is(const sass_ins *x, const char *base) {
    size_t k = strlen(base);
    return x->op_n >= k && memcmp(x->op, base, k) == 0 && (x->op_n == k || x->op[k] == '.');
}

/* Whether the opcode carries modifier `mod` (".128" in "LDG.E.128.CONSTANT"). */
static bool has_mod(const sass_ins *x, const char *mod) {
    size_t k = strlen(mod);
    for (size_t i = 0; i + k <= x->op_n; i++)
        if (x->op[i] == '.' && memcmp(x->op + i + 1, mod, k) == 0 && (i + 1 + k == x->op_n || x->op[i + 1 + k] == '.'))
            return true;
    return false;
}

/* Bytes a global load or store moves per lane, and its width class. */
static int access_bytes(const sass_ins *x, int *cls) {
    if (has_mod(x, "256")) return *cls = MCIR_SASS_B128, 32;
    if (has_mod(x, "128")) return *cls = MCIR_SASS_B128, 16;
    if (has_mod(x, "64")) return *cls = MCIR_SASS_B64, 8;
    if (has_mod(x, "U16") || has_mod(x, "S16")) return *cls = MCIR_SASS_NARROW, 2;
    if (has_mod(x, "U8") || has_mod(x, "S8")) return *cls = MCIR_SASS_NARROW, 1;
    return *cls = MCIR_SASS_B32, 4;
}

static bool is_ldg(const sass_ins *x) { return op_is(x, "LDG"); }
static bool is_lds(const sass_ins *x) { return op_is(x, "LDS"); }   /* not LDSM: op_is takes the whole base */
static bool is_sts(const sass_ins *x) { return op_is(x, "STS"); }
static bool is_stg(const sass_ins *x) { return op_is(x, "STG"); }

/* The callee of a CALL: the text inside `( ... )`. */
static bool callee_has(const sass_ins *x, const char *what) {
    const char *end = x->args + x->args_n;
    size_t k = strlen(what);
    for (const char *p = x->args; p + k <= end; p++)
        if (memcmp(p, what, k) == 0) return true;
    return false;
}

/* CALL.REL to the toolkit's internal subroutines: the IEEE division,
 * reciprocal and square-root slow paths (f32 and f64), the 64-bit integer
 * division and remainder. */
static bool slow_path_call(const sass_ins *x) {
    return op_is(x, "CALL") && callee_has(x, "__cuda_") &&
           (callee_has(x, "_f32") || callee_has(x, "_f64")) &&
           (callee_has(x, "div") || callee_has(x, "rcp") || callee_has(x, "sqrt"));
}

static bool int_div_call(const sass_ins *x) {
    return op_is(x, "CALL") && callee_has(x, "__cuda_") &&
           (callee_has(x, "div_u") || callee_has(x, "div_s") || callee_has(x, "rem_u") || callee_has(x, "rem_s"));
}

static void count(mcir_sass_counts *c, const sass_ins *x) {
    c->instructions++;
    int cls;
    if (is_ldg(x)) {
        access_bytes(x, &cls);
        c->ldg[cls]++;
    } else if (is_stg(x)) {
        access_bytes(x, &cls);
        c->stg[cls]++;
    } else if (is_lds(x)) {
        access_bytes(x, &cls);
        c->lds[cls]++;
    } else if (is_sts(x)) {
        access_bytes(x, &cls);
        c->sts[cls]++;
    } else if (op_is(x, "LDSM")) {
        c->ldsm++;
    } else if (op_is(x, "STSM")) {
        c->stsm++;
    } else if (op_is(x, "MUFU")) {
        static const char *const names[] = {
#define MCIR_SASS_MUFU_NAME(name, spelling) spelling,
            MCIR_SASS_MUFU(MCIR_SASS_MUFU_NAME)
#undef MCIR_SASS_MUFU_NAME
        };
        int f = MCIR_MUFU_other;
        for (int i = 0; i < MCIR_MUFU_other; i++) {
            size_t k = strlen(names[i]);
            if (x->op_n >= 5 + k && memcmp(x->op + 5, names[i], k) == 0) {
                f = i;
                break;
            }
        }
        c->mufu[f]++;
    } else if (op_is(x, "FCHK")) {
        c->fchk++;
    } else if (op_is(x, "CALL")) {
        c->calls++;
        c->slow_paths += slow_path_call(x);
        c->int_div_calls += int_div_call(x);
    }
}

static void push_label(sass_fn *f, const char *name, size_t n) {
    if (f->n_labels == f->cap_labels) {
        f->cap_labels = f->cap_labels ? 2 * f->cap_labels : 64;
        f->labels = realloc(f->labels, sizeof *f->labels * (size_t)f->cap_labels);
        MCIR_ASSERT(f->labels != NULL);
    }
    f->labels[f->n_labels++] = (sass_label){name, n, f->n};
}

/* One instruction line (its address in a comment, an optional guard,
 * the opcode, the operands up to ';': "@!P0 BRA `(.L_x_2) ;") into x;
 * false where the line holds none. */
static bool parse_ins(const char *line, const char *end, sass_ins *x) {
    const char *p = line;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if (end - p < 4 || p[0] != '/' || p[1] != '*') return false;
    const char *c = p + 2;
    while (c + 1 < end && !(c[0] == '*' && c[1] == '/')) c++;
    if (c + 1 >= end) return false;
    p = c + 2;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '{')) p++;
    memset(x, 0, sizeof *x);
    if (p < end && *p == '@') {
        const char *g = p;
        while (p < end && *p != ' ' && *p != '\t') p++;
        x->guarded = !((p - g == 3 && memcmp(g, "@PT", 3) == 0) || (p - g == 4 && memcmp(g, "@UPT", 4) == 0));
        while (p < end && (*p == ' ' || *p == '\t')) p++;
    }
    x->op = p;
    while (p < end && *p != ' ' && *p != '\t' && *p != ';') p++;
    x->op_n = (size_t)(p - x->op);
    if (!x->op_n || !(x->op[0] >= 'A' && x->op[0] <= 'Z')) return false;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    x->args = p;
    const char *semi = p;
    while (semi < end && *semi != ';') semi++;
    x->args_n = (size_t)(semi - p);
    if (op_is(x, "BRA") || op_is(x, "JMP") || op_is(x, "BRX") || op_is(x, "JMX")) {
        for (const char *q = x->args; q + 1 < x->args + x->args_n; q++)
            if (q[0] == '`' && q[1] == '(') {
                const char *t = q + 2, *u = t;
                while (u < x->args + x->args_n && *u != ')') u++;
                x->target = t;
                x->target_n = (size_t)(u - t);
                break;
            }
    }
    return true;
}

static bool is_label_line(const char *line, const char *end, size_t *n) {
    if (line >= end || line[0] == ' ' || line[0] == '\t' || line[0] == '/') return false;
    const char *q = end;
    while (q > line && (q[-1] == ' ' || q[-1] == '\t' || q[-1] == '\r')) q--;
    if (q <= line || q[-1] != ':') return false;
    *n = (size_t)(q - 1 - line);
    return true;
}

/* The entry's instructions and labels; `sub`: instructions of the
 * subroutines after it in its section. False where entry is not there. */
static bool read_fn(const char *text, const char *entry, sass_fn *f, int *sub) {
    size_t en = strlen(entry);
    int state = 0;   /* 0 before the entry, 1 in it, 2 in a subroutine of its section */
    *sub = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        size_t n;
        if (line[0] == '/' && line[1] == '/' && state) break;   /* the next section */
        if (is_label_line(line, end, &n)) {
            bool local = n >= 2 && line[0] == '.' && line[1] == 'L';
            bool text_sym = n > 6 && memcmp(line, ".text.", 6) == 0;
            if (!local && !text_sym) {
                if (n == en && memcmp(line, entry, en) == 0) state = 1;
                else if (state) state = 2;
            } else if (local && state == 1) {
                push_label(f, line, n);
            }
        } else if (state) {
            sass_ins x;
            if (parse_ins(line, end, &x)) {
                if (state == 2) {
                    *sub += !op_is(&x, "NOP");
                } else {
                    if (f->n == f->cap) {
                        f->cap = f->cap ? 2 * f->cap : 256;
                        f->ins = realloc(f->ins, sizeof *f->ins * (size_t)f->cap);
                        MCIR_ASSERT(f->ins != NULL);
                    }
                    f->ins[f->n++] = x;
                }
            }
        }
        line = *end ? end + 1 : NULL;
    }
    return state != 0;
}

static int cmp_label(const void *a, const void *b) {
    const sass_label *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->name, y->name, n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static int label_at(const sass_fn *f, const char *name, size_t n) {
    sass_label key = {name, n, 0};
    const sass_label *l = bsearch(&key, f->labels, (size_t)f->n_labels, sizeof *f->labels, cmp_label);
    return l ? l->at : -1;
}

/* ------------------------------------------------- control-flow graph */

typedef struct sass_block {
    int first, last;     /* instruction indices, inclusive */
    int succ[2], n_succ;
    bool reachable, cold;
} sass_block;

typedef uint64_t word;
#define WORD_BITS 64
static bool bit(const word *s, int i) { return (s[i / WORD_BITS] >> (i % WORD_BITS)) & 1; }
static void set_bit(word *s, int i) { s[i / WORD_BITS] |= (word)1 << (i % WORD_BITS); }

/* Whether a branch's first operand is a predicate ("BRA !P2, `(...)",
 * "BRA.U !UP0, ..."): then it is conditional too. */
static bool predicate_operand(const sass_ins *x) {
    const char *p = x->args;
    if (*p == '!') p++;
    if (*p == 'U') p++;
    return *p == 'P' && p[1] >= '0' && p[1] <= '9';
}

/* Ends a block: control does not simply fall through after it. */
static bool ends_block(const sass_ins *x) {
    return op_is(x, "BRA") || op_is(x, "JMP") || op_is(x, "BRX") || op_is(x, "JMX") || op_is(x, "EXIT") ||
           op_is(x, "RET") || op_is(x, "BPT") || op_is(x, "KILL");
}

/* A loop: its header block and its blocks (a bitset over blocks). */
typedef struct sass_loop {
    int header;
    word *body;
    int size;
    bool main;
} sass_loop;

typedef struct sass_cfg {
    sass_block *b;
    int n;
    int words;
    sass_loop *loops;
    int n_loops;
} sass_cfg;

static void build_cfg(sass_fn *f, sass_cfg *g) {
    memset(g, 0, sizeof *g);
    if (!f->n) return;
    bool *leader = calloc((size_t)f->n + 1, sizeof *leader);
    MCIR_ASSERT(leader != NULL);
    leader[0] = true;
    for (int l = 0; l < f->n_labels; l++)
        if (f->labels[l].at < f->n) leader[f->labels[l].at] = true;
    for (int i = 0; i < f->n; i++)
        if (ends_block(&f->ins[i]) && i + 1 < f->n) leader[i + 1] = true;
    g->b = calloc((size_t)f->n, sizeof *g->b);
    MCIR_ASSERT(g->b != NULL);
    for (int i = 0; i < f->n; i++) {
        if (leader[i]) {
            if (g->n) g->b[g->n - 1].last = i - 1;
            g->b[g->n++].first = i;
        }
        f->ins[i].block = g->n - 1;
    }
    g->b[g->n - 1].last = f->n - 1;
    free(leader);
    for (int k = 0; k < g->n; k++) {
        sass_block *b = &g->b[k];
        const sass_ins *x = &f->ins[b->last];
        bool fall = k + 1 < g->n, jump = false;
        if (op_is(x, "BRA") && has_mod(x, "DIV")) {
            /* a divergent warp's fallback (out of line, after EXIT): the
             * converged warp falls through */
        } else if ((op_is(x, "BRA") || op_is(x, "JMP")) && x->target) {
            jump = true;
            fall = fall && (x->guarded || predicate_operand(x));
        } else if (op_is(x, "EXIT") || op_is(x, "RET") || op_is(x, "BPT") || op_is(x, "KILL") ||
                   op_is(x, "BRX") || op_is(x, "JMX") || op_is(x, "BRA")) {
            fall = fall && x->guarded;
        }
        if (fall) b->succ[b->n_succ++] = k + 1;
        if (jump) {
            int at = label_at(f, x->target, x->target_n);
            if (at >= 0 && at < f->n && (b->n_succ == 0 || b->succ[0] != f->ins[at].block))
                b->succ[b->n_succ++] = f->ins[at].block;
        }
        for (int i = b->first; i <= b->last; i++)
            if (slow_path_call(&f->ins[i]) || int_div_call(&f->ins[i])) b->cold = true;
    }
}

/* Reverse postorder of the reachable blocks (iterative DFS from block 0). */
static int rpo(sass_cfg *g, int *order) {
    int *stack = malloc(sizeof *stack * (size_t)g->n), *next = calloc((size_t)g->n, sizeof *next);
    int *post = malloc(sizeof *post * (size_t)g->n);
    MCIR_ASSERT(stack && next && post);
    int sp = 0, n_post = 0;
    stack[sp++] = 0;
    g->b[0].reachable = true;
    while (sp) {
        int v = stack[sp - 1];
        if (next[v] < g->b[v].n_succ) {
            int w = g->b[v].succ[next[v]++];
            if (!g->b[w].reachable) {
                g->b[w].reachable = true;
                stack[sp++] = w;
            }
        } else {
            post[n_post++] = v;
            sp--;
        }
    }
    for (int i = 0; i < n_post; i++) order[i] = post[n_post - 1 - i];
    free(stack);
    free(next);
    free(post);
    return n_post;
}

/* Dominators (the iterative data-flow over bitsets), back edges u -> h
 * where h dominates u, and each header's natural loop: h and every block
 * that reaches a back edge's source without passing h. */
static void find_loops(sass_cfg *g) {
    int n = g->n, W = (n + WORD_BITS - 1) / WORD_BITS;
    g->words = W;
    int *order = malloc(sizeof *order * (size_t)n);
    MCIR_ASSERT(order != NULL);
    int m = rpo(g, order);
    /* predecessors (reachable only) */
    int *n_pred = calloc((size_t)n, sizeof *n_pred), **pred = calloc((size_t)n, sizeof *pred);
    MCIR_ASSERT(n_pred && pred);
    for (int v = 0; v < n; v++)
        if (g->b[v].reachable)
            for (int s = 0; s < g->b[v].n_succ; s++) n_pred[g->b[v].succ[s]]++;
    for (int v = 0; v < n; v++) {
        pred[v] = malloc(sizeof **pred * (size_t)(n_pred[v] + 1));
        MCIR_ASSERT(pred[v] != NULL);
        n_pred[v] = 0;
    }
    for (int v = 0; v < n; v++)
        if (g->b[v].reachable)
            for (int s = 0; s < g->b[v].n_succ; s++) pred[g->b[v].succ[s]][n_pred[g->b[v].succ[s]]++] = v;
    word *dom = calloc((size_t)n * (size_t)W, sizeof *dom), *tmp = malloc(sizeof *tmp * (size_t)W);
    MCIR_ASSERT(dom && tmp);
    for (int v = 0; v < n; v++)
        for (int w = 0; w < W; w++) dom[(size_t)v * W + w] = v == 0 ? 0 : ~(word)0;
    set_bit(&dom[0], 0);
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 1; i < m; i++) {
            int v = order[i];
            for (int w = 0; w < W; w++) tmp[w] = ~(word)0;
            for (int p = 0; p < n_pred[v]; p++)
                for (int w = 0; w < W; w++) tmp[w] &= dom[(size_t)pred[v][p] * W + w];
            set_bit(tmp, v);
            if (memcmp(tmp, &dom[(size_t)v * W], sizeof *tmp * (size_t)W)) {
                memcpy(&dom[(size_t)v * W], tmp, sizeof *tmp * (size_t)W);
                changed = true;
            }
        }
    }
    int *work = malloc(sizeof *work * (size_t)n);
    MCIR_ASSERT(work != NULL);
    for (int u = 0; u < n; u++) {
        if (!g->b[u].reachable) continue;
        for (int s = 0; s < g->b[u].n_succ; s++) {
            int h = g->b[u].succ[s];
            if (!bit(&dom[(size_t)u * W], h)) continue;
            sass_loop *L = NULL;
            for (int l = 0; l < g->n_loops; l++)
                if (g->loops[l].header == h) L = &g->loops[l];
            if (!L) {
                g->loops = realloc(g->loops, sizeof *g->loops * (size_t)(g->n_loops + 1));
                MCIR_ASSERT(g->loops != NULL);
                L = &g->loops[g->n_loops++];
                L->header = h;
                L->body = calloc((size_t)W, sizeof *L->body);
                MCIR_ASSERT(L->body != NULL);
                L->main = false;
                set_bit(L->body, h);
            }
            int sp = 0;
            if (!bit(L->body, u)) {
                set_bit(L->body, u);
                work[sp++] = u;
            }
            while (sp) {
                int v = work[--sp];
                for (int p = 0; p < n_pred[v]; p++)
                    if (!bit(L->body, pred[v][p])) {
                        set_bit(L->body, pred[v][p]);
                        work[sp++] = pred[v][p];
                    }
            }
        }
    }
    for (int l = 0; l < g->n_loops; l++) {
        g->loops[l].size = 0;
        for (int v = 0; v < n; v++) g->loops[l].size += bit(g->loops[l].body, v);
    }
    free(work);
    free(dom);
    free(tmp);
    for (int v = 0; v < n; v++) free(pred[v]);
    free(pred);
    free(n_pred);
    free(order);
}

static void free_cfg(sass_cfg *g) {
    for (int l = 0; l < g->n_loops; l++) free(g->loops[l].body);
    free(g->loops);
    free(g->b);
}

/* Whether loop a lies inside loop b (its blocks a proper subset). */
static bool inside(const sass_cfg *g, const sass_loop *a, const sass_loop *b) {
    if (a == b || a->size >= b->size) return false;
    for (int w = 0; w < g->words; w++)
        if (a->body[w] & ~b->body[w]) return false;
    return true;
}

/* Whether loop L holds a global load or store. */
static bool loop_has_global(const sass_fn *f, const sass_cfg *g, const sass_loop *L) {
    for (int v = 0; v < g->n; v++)
        if (bit(L->body, v))
            for (int i = g->b[v].first; i <= g->b[v].last; i++)
                if (is_ldg(&f->ins[i]) || is_stg(&f->ins[i])) return true;
    return false;
}

/* Whether loop L holds an HGMMA. */
static bool loop_has_hgmma(const sass_fn *f, const sass_cfg *g, const sass_loop *L) {
    for (int v = 0; v < g->n; v++)
        if (bit(L->body, v))
            for (int i = g->b[v].first; i <= g->b[v].last; i++)
                if (op_is(&f->ins[i], "HGMMA")) return true;
    return false;
}

/* "WARPGROUP.DEPBAR.LE gsb0, 0xN": N, the wgmma groups it leaves in
 * flight; -1 for any other instruction. */
static int depbar_pending(const sass_ins *x) {
    if (!op_is(x, "WARPGROUP")) return -1;
    const char *p = x->op + 9, *end = x->op + x->op_n;
    if (end - p < 10 || memcmp(p, ".DEPBAR.LE", 10) != 0) return -1;
    const char *a = x->args, *ae = x->args + x->args_n;
    while (a < ae && *a != ',') a++;
    if (a >= ae) return -1;
    a++;
    while (a < ae && *a == ' ') a++;
    return (int)strtol(a, NULL, 0);
}

/* One iteration of wgmma loop L into s: its hot instructions in address
 * order, the EX2 between a wait that leaves groups in flight and the next
 * that leaves none. */
static void wgmma_loop(const sass_fn *f, const sass_cfg *g, const sass_loop *L, mcir_sass_audit *s) {
    int ex2 = 0, under = 0;
    bool pending = false;
    s->wgmma_loops++;
    for (int v = 0; v < g->n; v++) {
        if (!bit(L->body, v) || g->b[v].cold) continue;
        for (int i = g->b[v].first; i <= g->b[v].last; i++) {
            const sass_ins *x = &f->ins[i];
            if (op_is(x, "NOP")) continue;
            s->wgmma_loop_instructions++;
            int d = depbar_pending(x);
            if (d >= 0) pending = d > 0;
            if (op_is(x, "HGMMA")) s->wgmma_loop_hgmma++;
            if (op_is(x, "MUFU") && x->op_n >= 8 && memcmp(x->op + 5, "EX2", 3) == 0) {
                ex2++;
                under += pending;
            }
        }
    }
    s->wgmma_loop_ex2 += ex2;
    s->wgmma_loop_ex2_overlapped += under;
    s->wgmma_loops_overlapped += ex2 > 0 && under == ex2;
}

/* The loop around wgmma loop L (a persistent kernel's item loop): its hot
 * instructions outside L, once each — what a work item costs beside its
 * K loop (the first stage's wait, the epilogue, the stores; the barrier
 * waits' out-of-line retries, 4 instructions each, too). A loop inside
 * it other than L of more than 8 instructions, neither a barrier wait's
 * nor a TMA store's waterfall (an epilogue not unrolled), counts once,
 * and is flagged. */
static void item_overhead(const sass_fn *f, const sass_cfg *g, const sass_loop *L, mcir_sass_audit *s) {
    const sass_loop *P = NULL;
    for (int o = 0; o < g->n_loops; o++)
        if (inside(g, L, &g->loops[o]) && (!P || g->loops[o].size < P->size)) P = &g->loops[o];
    if (!P) return;
    s->item_loops++;
    for (int o = 0; o < g->n_loops; o++) {
        const sass_loop *Q = &g->loops[o];
        if (Q == L || !inside(g, Q, P) || inside(g, Q, L)) continue;
        /* a barrier's try-wait retry (YIELD, SYNCS.PHASECHK, a branch
         * back into the straight code) closes a loop through the code it
         * returns to, and ptxas issues a TMA store in a waterfall over the
         * warp's active threads (BRA.U.ANY back to its R2UR.OR): not
         * loops of the epilogue */
        int hot = 0;
        bool spin = false;
        for (int v = 0; v < g->n; v++)
            if (bit(Q->body, v) && !g->b[v].cold)
                for (int i = g->b[v].first; i <= g->b[v].last; i++) {
                    hot++;
                    spin = spin || op_is(&f->ins[i], "SYNCS") || (op_is(&f->ins[i], "BRA") && has_mod(&f->ins[i], "ANY"));
                }
        s->item_inner_loops += hot > 8 && !spin;
    }
    for (int v = 0; v < g->n; v++) {
        if (!bit(P->body, v) || bit(L->body, v) || g->b[v].cold) continue;
        for (int i = g->b[v].first; i <= g->b[v].last; i++)
            if (!op_is(&f->ins[i], "NOP")) s->item_instructions++;
    }
}

/* The highest register an instruction names (-1: none): R<n>, a pair where
 * written R<n>.64, the data of a 64- or 128-bit access (its first register
 * operand outside the [address]) 2 or 4 wide, IMAD.WIDE's destination a pair, an HGMMA's
 * accumulators N/2 from their base and its register A operand 4. */
static int max_reg(const sass_ins *x) {
    int width_first = has_mod(x, "128") ? 4 : has_mod(x, "64") || has_mod(x, "WIDE") ? 2 : 1, hgmma_n = 0;
    if (op_is(x, "HGMMA")) {
        const char *p = x->op + 6;   /* "64xNxK" */
        const char *xs = memchr(p, 'x', x->op_n > 6 ? x->op_n - 6 : 0);
        if (xs) hgmma_n = (int)strtol(xs + 1, NULL, 10);
        width_first = hgmma_n / 2;
    }
    const char *a = x->args, *e = x->args + x->args_n;
    int best = -1, k = 0, depth = 0;   /* k: register operands outside [addresses] so far */
    for (const char *q = a; q < e; q++) {
        if (*q == '[') depth++;
        if (*q == ']' && depth > 0) depth--;
        if (*q != 'R' || q + 1 >= e || q[1] < '0' || q[1] > '9') continue;
        if (q > a && ((q[-1] >= 'A' && q[-1] <= 'Z') || (q[-1] >= 'a' && q[-1] <= 'z') || q[-1] == '_')) continue;
        char *end;
        int n = (int)strtol(q + 1, &end, 10);
        int w = depth ? 1 : k == 0 ? width_first : hgmma_n && k == 1 ? 4 : 1;
        if (end + 3 <= e && memcmp(end, ".64", 3) == 0 && w < 2) w = 2;
        if (n + w - 1 > best) best = n + w - 1;
        if (!depth) k++;
        q = end - 1;
    }
    return best;
}

/* The setmaxnreg regions: from each USETMAXREG (DEALLOC: the producer
 * giving registers back; TRY_ALLOC: the consumers taking them) forward
 * through the control-flow graph, the highest register named there
 * against the count it sets. */
static void setmaxnreg_regions(const sass_fn *f, const sass_cfg *g, mcir_sass_audit *s) {
    for (int i = 0; i < f->n; i++) {
        const sass_ins *x = &f->ins[i];
        if (!op_is(x, "USETMAXREG")) continue;
        const char *c = x->args + x->args_n;
        while (c > x->args && c[-1] == ' ') c--;
        while (c > x->args && c[-1] != ',' && c[-1] != ' ') c--;
        int budget = (int)strtol(c, NULL, 0), top = -1;
        bool *seen = calloc((size_t)g->n, sizeof *seen);
        int *stack = malloc(sizeof *stack * (size_t)g->n), sp = 0;
        MCIR_ASSERT(seen && stack);
        int b0 = x->block;
        for (int j = i + 1; j <= g->b[b0].last; j++) {
            int r = max_reg(&f->ins[j]);
            if (r > top) top = r;
        }
        seen[b0] = true;
        for (int k = 0; k < g->b[b0].n_succ; k++) stack[sp++] = g->b[b0].succ[k];
        while (sp) {
            int v = stack[--sp];
            if (seen[v]) continue;
            seen[v] = true;
            for (int j = g->b[v].first; j <= g->b[v].last; j++) {
                int r = max_reg(&f->ins[j]);
                if (r > top) top = r;
            }
            for (int k = 0; k < g->b[v].n_succ; k++)
                if (!seen[g->b[v].succ[k]]) stack[sp++] = g->b[v].succ[k];
        }
        free(seen);
        free(stack);
        if (s->setmaxnreg_regions < MCIR_SASS_MAXNREG_REGIONS) {
            s->maxnreg_budget[s->setmaxnreg_regions] = budget;
            s->maxnreg_used[s->setmaxnreg_regions] = top + 1;
            s->setmaxnreg_regions++;
        }
        s->setmaxnreg_over += top + 1 > budget;
    }
}

/* ------------------------------------------------------------ dataflow */

/* Whether an operand list names a register of `pending`: R<n> (not
 * UR<n>, not RZ), R<n>.64 a pair; `wide` registers a name (a store's data:
 * its width / 4). */
static bool reads_any(const char *s, size_t n, int wide, const bool *pending, int n_regs) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] != 'R' || (i > 0 && ((s[i - 1] >= 'A' && s[i - 1] <= 'Z') || (s[i - 1] >= 'a' && s[i - 1] <= 'z') ||
                                      (s[i - 1] >= '0' && s[i - 1] <= '9') || s[i - 1] == '_')))
            continue;
        size_t j = i + 1;
        int r = 0;
        if (j >= n || s[j] < '0' || s[j] > '9') continue;
        while (j < n && s[j] >= '0' && s[j] <= '9') r = r * 10 + (s[j++] - '0');
        int k = wide;
        if (j + 2 < n && s[j] == '.' && s[j + 1] == '6' && s[j + 2] == '4') k = k > 2 ? k : 2;
        for (int q = 0; q < k; q++)
            if (r + q < n_regs && pending[r + q]) return true;
        i = j - 1;
    }
    return false;
}

/* Opcodes whose operands are all read (no destination first). */
static bool no_destination(const sass_ins *x) {
    static const char *const ops[] = {"ST",  "STG",  "STS",   "STL",  "RED",  "REDG", "RET",  "BRX", "JMX",
                                      "BRA", "EXIT", "CALL",  "BSSY", "BSYNC", "WARPSYNC", "BAR", "NOP",
                                      "MEMBAR", "CCTL", "DEPBAR", "FENCE", "YIELD", "BPT", "ERRBAR"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (op_is(x, ops[i])) return true;
    return false;
}

/* Whether x reads a register of `pending`. */
static bool reads_pending(const sass_ins *x, const bool *pending, int n_regs) {
    const char *s = x->args;
    size_t n = x->args_n;
    if (!no_destination(x)) {   /* skip the destination(s) */
        int skip = op_is(x, "SHFL") ? 2 : 1;
        for (size_t i = 0; i < n && skip; i++)
            if (s[i] == ',') {
                skip--;
                if (!skip) {
                    s += i + 1;
                    n -= i + 1;
                }
            }
        if (skip) return false;
    }
    int wide = 1;
    if (is_stg(x) || op_is(x, "STS") || op_is(x, "ST") || op_is(x, "STL")) {
        int cls, bytes = access_bytes(x, &cls);
        /* the data operand (after the address): all its registers */
        const char *comma = memchr(s, ',', n);
        if (comma && reads_any(s, (size_t)(comma - s), 1, pending, n_regs)) return true;
        if (comma) {
            n -= (size_t)(comma + 1 - s);
            s = comma + 1;
        }
        wide = bytes > 4 ? bytes / 4 : 1;
    } else if (x->op[0] == 'D' && (op_is(x, "DADD") || op_is(x, "DMUL") || op_is(x, "DFMA") || op_is(x, "DSETP"))) {
        wide = 2;
    }
    return reads_any(s, n, wide, pending, n_regs);
}

/* The first destination register of a load: "R4, desc[...]" → 4; -1. */
static int dest_reg(const sass_ins *x) {
    const char *s = x->args;
    if (s[0] != 'R' || s[1] < '0' || s[1] > '9') return -1;
    return atoi(s + 1);
}

/* Bytes one thread has loaded in loop L before it first reads a loaded
 * register: from the loop's first LDG on, in address order around the
 * loop (a software-pipelined loop's loads at its bottom are used at its
 * top), over its hot blocks. */
static int inflight(const sass_fn *f, const sass_cfg *g, const sass_loop *L) {
    enum { N_REGS = 256 };
    bool pending[N_REGS + 8];
    memset(pending, 0, sizeof pending);
    int *idx = malloc(sizeof *idx * (size_t)f->n), n = 0, start = -1;
    MCIR_ASSERT(idx != NULL);
    for (int v = 0; v < g->n; v++)
        if (bit(L->body, v) && !g->b[v].cold)
            for (int i = g->b[v].first; i <= g->b[v].last; i++) {
                if (start < 0 && is_ldg(&f->ins[i])) start = n;
                idx[n++] = i;
            }
    int bytes = 0;
    for (int k = 0; start >= 0 && k < n; k++) {
        const sass_ins *x = &f->ins[idx[(start + k) % n]];
        if (reads_pending(x, pending, N_REGS)) break;
        if (is_ldg(x)) {
            int cls, b = access_bytes(x, &cls), r = dest_reg(x);
            bytes += b;
            for (int q = 0; r >= 0 && q < (b + 3) / 4 && r + q < N_REGS; q++) pending[r + q] = true;
        }
    }
    free(idx);
    return bytes;
}

/* ------------------------------------------------------------- census */

bool cg_sass_parse(const char *text, const char *entry, mcir_sass_audit *s) {
    memset(s, 0, sizeof *s);
    sass_fn f = {0};
    if (!text || !read_fn(text, entry, &f, &s->subroutine_instructions)) {
        s->state = -1;
        snprintf(s->why, sizeof s->why, "entry %.80s not in the disassembly", entry);
        free(f.ins);
        free(f.labels);
        return false;
    }
    s->state = 1;
    qsort(f.labels, (size_t)f.n_labels, sizeof *f.labels, cmp_label);
    for (int i = 0; i < f.n; i++)
        if (!op_is(&f.ins[i], "NOP")) count(&s->kernel, &f.ins[i]);
    sass_cfg g;
    build_cfg(&f, &g);
    if (g.n) find_loops(&g);
    s->loops = g.n_loops;
    /* the main loops: holding a global access, with no loop inside holding
     * one (a norm's output pass from its cache stores only: a main loop) */
    for (int l = 0; l < g.n_loops; l++) {
        if (!loop_has_global(&f, &g, &g.loops[l])) continue;
        bool innermost = true;
        for (int o = 0; o < g.n_loops && innermost; o++)
            innermost = !inside(&g, &g.loops[o], &g.loops[l]) || !loop_has_global(&f, &g, &g.loops[o]);
        g.loops[l].main = innermost;
    }
    for (int l = 0; l < g.n_loops; l++) {
        const sass_loop *L = &g.loops[l];
        if (!L->main) continue;
        s->main_loops++;
        for (int v = 0; v < g.n; v++) {
            if (!bit(L->body, v)) continue;
            for (int i = g.b[v].first; i <= g.b[v].last; i++) {
                const sass_ins *x = &f.ins[i];
                if (op_is(x, "NOP")) continue;
                if (g.b[v].cold) {   /* only what marks the slow path */
                    if (op_is(x, "CALL")) {
                        s->loop.calls++;
                        s->loop.slow_paths += slow_path_call(x);
                        s->loop.int_div_calls += int_div_call(x);
                    }
                    continue;
                }
                count(&s->loop, x);
                if (is_ldg(x) || is_stg(x)) {
                    int cls;
                    s->loop_bytes += access_bytes(x, &cls);
                }
            }
        }
        int b = inflight(&f, &g, L);
        if (b > s->inflight_thread_bytes) s->inflight_thread_bytes = b;
    }
    if (s->loop_bytes > 0) {
        int mufu = 0;
        for (int i = 0; i < MCIR_MUFU_COUNT; i++) mufu += s->loop.mufu[i];
        double vectors = s->loop_bytes / 16.0;
        s->per_16b = s->loop.instructions / vectors;
        s->weighted_per_16b = (s->loop.instructions + (MCIR_SASS_MUFU_WEIGHT - 1) * mufu +
                               MCIR_SASS_SLOW_PATH_WEIGHT * s->loop.slow_paths) / vectors;
    }
    setmaxnreg_regions(&f, &g, s);
    /* the wgmma loops: holding an HGMMA, with no loop inside holding one */
    for (int l = 0; l < g.n_loops; l++) {
        if (!loop_has_hgmma(&f, &g, &g.loops[l])) continue;
        bool innermost = true;
        for (int o = 0; o < g.n_loops && innermost; o++)
            innermost = !inside(&g, &g.loops[o], &g.loops[l]) || !loop_has_hgmma(&f, &g, &g.loops[o]);
        if (!innermost) continue;
        wgmma_loop(&f, &g, &g.loops[l], s);
        item_overhead(&f, &g, &g.loops[l], s);
    }
    s->issue_us = s->memory_us = -1;
    free_cfg(&g);
    free(f.ins);
    free(f.labels);
    return true;
}
