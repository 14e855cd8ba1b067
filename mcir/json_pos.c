/*
 * json_pos.c — source positions of JSON values (see json_pos.h).
 *
 * One iterative pass over the text builds a flat table of values in
 * document order; each container keeps the handles of its children, so a
 * path is walked in O(depth) for arrays and O(members) for objects. The
 * scanner trusts that jansson has already accepted the text, but never
 * reads past `len` and stops quietly at anything it does not expect, so a
 * malformed text yields a partial table, never a crash.
 */
#include <stdlib.h>
#include <string.h>

#include "json_pos.h"

typedef struct jp_value {
    int line, col;           /* where the value starts */
    int key_line, key_col;   /* where its key starts (object members) */
    char *key;               /* decoded key, or NULL */
    int n;                   /* children (containers) */
    int *kids;
} jp_value;

struct mcir_json_pos {
    jp_value *v;
    int n, cap;
};

typedef struct jp_frame {
    int value;               /* the container */
    int kid_base;            /* height of the kid stack when it opened */
    bool is_object;
} jp_frame;

typedef struct jp_scan {
    const unsigned char *s;
    size_t len, i;
    int line, col;           /* of s[i] */
} jp_scan;

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    MCIR_ASSERT(q);
    return q;
}

static void scan_advance(jp_scan *sc) {
    unsigned char c = sc->s[sc->i++];
    if (c == '\n') {
        sc->line++;
        sc->col = 1;
    } else if ((c & 0xC0) != 0x80) {
        sc->col++;           /* count characters, not UTF-8 continuation bytes */
    }
}

static void skip_ws(jp_scan *sc) {
    while (sc->i < sc->len) {
        unsigned char c = sc->s[sc->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        scan_advance(sc);
    }
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool read_hex4(jp_scan *sc, unsigned *out) {
    if (sc->len - sc->i < 4) return false;
    unsigned u = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(sc->s[sc->i]);
        if (h < 0) return false;
        u = u * 16 + (unsigned)h;
        scan_advance(sc);
    }
    *out = u;
    return true;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Scans a string starting at its opening quote. With `decoded`, returns the
 * malloc'd decoded text (escapes resolved, as jansson does). */
static bool scan_string(jp_scan *sc, char **decoded) {
    scan_advance(sc); /* opening quote */
    size_t start = sc->i;
    char *out = NULL;
    size_t o = 0;
    if (decoded) out = xrealloc(NULL, 1);
    size_t cap = 1;
    while (sc->i < sc->len) {
        unsigned char c = sc->s[sc->i];
        if (c == '"') {
            scan_advance(sc);
            if (decoded) {
                out[o] = 0;
                *decoded = out;
            }
            return true;
        }
        if (decoded && cap < o + 8) {
            cap = (o + 8) * 2;
            out = xrealloc(out, cap);
        }
        if (c != '\\') {
            if (decoded) out[o++] = (char)c;
            scan_advance(sc);
            continue;
        }
        scan_advance(sc);
        if (sc->i >= sc->len) break;
        unsigned char e = sc->s[sc->i];
        scan_advance(sc);
        unsigned cp;
        switch (e) {
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (!read_hex4(sc, &cp)) goto fail;
            if (cp >= 0xD800 && cp < 0xDC00 && sc->len - sc->i >= 6 &&
                sc->s[sc->i] == '\\' && sc->s[sc->i + 1] == 'u') {
                unsigned lo;
                scan_advance(sc);
                scan_advance(sc);
                if (!read_hex4(sc, &lo)) goto fail;
                if (lo >= 0xDC00 && lo < 0xE000)
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            break;
        default: cp = e; break;
        }
        if (decoded) o += put_utf8(out + o, cp);
    }
fail:
    (void)start;
    free(out);
    return false;
}

static int add_value(mcir_json_pos *p, int line, int col) {
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 64;
        p->v = xrealloc(p->v, (size_t)p->cap * sizeof *p->v);
    }
    jp_value *v = &p->v[p->n];
    memset(v, 0, sizeof *v);
    v->line = line;
    v->col = col;
    return p->n++;
}

mcir_json_pos *mcir_json_pos_scan(const char *text, size_t len) {
    mcir_json_pos *p = calloc(1, sizeof *p);
    MCIR_ASSERT(p);
    jp_scan sc = {(const unsigned char *)text, len, 0, 1, 1};
    jp_frame *frames = NULL;
    int n_frames = 0, cap_frames = 0;
    int *kids = NULL;
    int n_kids = 0, cap_kids = 0;
    bool expect_key = false;
    char *key = NULL;
    int key_line = 0, key_col = 0;
    bool have_root = false;

    for (;;) {
        skip_ws(&sc);
        if (sc.i >= sc.len) break;
        unsigned char c = sc.s[sc.i];
        int line = sc.line, col = sc.col;
        bool in_object = n_frames && frames[n_frames - 1].is_object;

        if (c == ',') {
            scan_advance(&sc);
            expect_key = in_object;
            continue;
        }
        if (c == ':') {
            scan_advance(&sc);
            continue;
        }
        if (c == '}' || c == ']') {
            scan_advance(&sc);
            if (!n_frames) break;
            jp_frame *f = &frames[--n_frames];
            jp_value *v = &p->v[f->value];
            v->n = n_kids - f->kid_base;
            v->kids = xrealloc(NULL, (size_t)v->n * sizeof(int));
            if (v->n) memcpy(v->kids, kids + f->kid_base, (size_t)v->n * sizeof(int));
            n_kids = f->kid_base;
            expect_key = false;
            if (!n_frames) break; /* the root closed */
            continue;
        }
        if (in_object && expect_key) {
            if (c != '"') break;
            free(key);
            key = NULL;
            key_line = line;
            key_col = col;
            if (!scan_string(&sc, &key)) break;
            expect_key = false;
            continue;
        }
        if (!n_frames && have_root) break; /* trailing text */

        /* A value starts here. */
        int idx = add_value(p, line, col);
        if (in_object) {
            p->v[idx].key = key ? key : calloc(1, 1);
            p->v[idx].key_line = key_line;
            p->v[idx].key_col = key_col;
            key = NULL;
        }
        if (n_frames) {
            if (n_kids == cap_kids) {
                cap_kids = cap_kids ? cap_kids * 2 : 64;
                kids = xrealloc(kids, (size_t)cap_kids * sizeof *kids);
            }
            kids[n_kids++] = idx;
        }
        have_root = true;
        if (c == '{' || c == '[') {
            scan_advance(&sc);
            if (n_frames == cap_frames) {
                cap_frames = cap_frames ? cap_frames * 2 : 16;
                frames = xrealloc(frames, (size_t)cap_frames * sizeof *frames);
            }
            frames[n_frames++] = (jp_frame){idx, n_kids, c == '{'};
            expect_key = c == '{';
            continue;
        }
        if (c == '"') {
            if (!scan_string(&sc, NULL)) break;
        } else {
            /* number or literal: up to the next delimiter */
            size_t start = sc.i;
            while (sc.i < sc.len && !strchr(",]}: \t\r\n", sc.s[sc.i]))
                scan_advance(&sc);
            if (sc.i == start) break; /* unexpected character */
        }
        if (!n_frames) break; /* a scalar root */
    }
    /* Containers left open by a truncated text keep what they saw. */
    while (n_frames > 0) {
        jp_frame *f = &frames[--n_frames];
        jp_value *v = &p->v[f->value];
        v->n = n_kids - f->kid_base;
        v->kids = xrealloc(NULL, (size_t)v->n * sizeof(int));
        if (v->n) memcpy(v->kids, kids + f->kid_base, (size_t)v->n * sizeof(int));
        n_kids = f->kid_base;
    }
    free(key);
    free(frames);
    free(kids);
    return p;
}

void mcir_json_pos_free(mcir_json_pos *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) {
        free(p->v[i].key);
        free(p->v[i].kids);
    }
    free(p->v);
    free(p);
}

int mcir_json_pos_root(const mcir_json_pos *p) { return p && p->n > 0 ? 0 : -1; }

static bool valid(const mcir_json_pos *p, int v) { return p && v >= 0 && v < p->n; }

int mcir_json_pos_key(const mcir_json_pos *p, int v, const char *key) {
    if (!valid(p, v) || !key) return -1;
    const jp_value *o = &p->v[v];
    for (int i = o->n - 1; i >= 0; i--) {
        const char *k = p->v[o->kids[i]].key;
        if (k && strcmp(k, key) == 0) return o->kids[i];
    }
    return -1;
}

int mcir_json_pos_index(const mcir_json_pos *p, int v, size_t i) {
    if (!valid(p, v) || i >= (size_t)p->v[v].n) return -1;
    return p->v[v].kids[i];
}

int mcir_json_pos_count(const mcir_json_pos *p, int v) {
    return valid(p, v) ? p->v[v].n : 0;
}

const char *mcir_json_pos_member(const mcir_json_pos *p, int v, int i, int *value) {
    if (!valid(p, v) || i < 0 || i >= p->v[v].n) return NULL;
    int k = p->v[v].kids[i];
    if (value) *value = k;
    return p->v[k].key;
}

int mcir_json_pos_find(const mcir_json_pos *p, const char *pointer) {
    int v = mcir_json_pos_root(p);
    if (!pointer) return -1;
    const char *s = pointer;
    while (*s && v >= 0) {
        if (*s != '/') return -1;
        s++;
        size_t n = strcspn(s, "/");
        char *tok = malloc(n + 1);
        MCIR_ASSERT(tok);
        size_t o = 0;
        for (size_t k = 0; k < n; k++) {
            if (s[k] == '~' && k + 1 < n && (s[k + 1] == '0' || s[k + 1] == '1')) {
                tok[o++] = s[k + 1] == '0' ? '~' : '/';
                k++;
            } else {
                tok[o++] = s[k];
            }
        }
        tok[o] = 0;
        if (p->v[v].n > 0 && p->v[p->v[v].kids[0]].key) {
            v = mcir_json_pos_key(p, v, tok);
        } else {
            char *end;
            unsigned long idx = strtoul(tok, &end, 10);
            v = (o && *end == 0 && tok[0] != '-') ? mcir_json_pos_index(p, v, idx) : -1;
        }
        free(tok);
        s += n;
    }
    return v;
}

mcir_loc mcir_json_pos_loc(const mcir_json_pos *p, int v, const char *path) {
    if (!valid(p, v)) return (mcir_loc){path, 0, 0};
    return (mcir_loc){path, p->v[v].line, p->v[v].col};
}

mcir_loc mcir_json_pos_key_loc(const mcir_json_pos *p, int v, const char *path) {
    if (!valid(p, v)) return (mcir_loc){path, 0, 0};
    if (p->v[v].key_line > 0) return (mcir_loc){path, p->v[v].key_line, p->v[v].key_col};
    return mcir_json_pos_loc(p, v, path);
}
