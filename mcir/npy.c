/*
 * npy.c — NumPy .npy files: read format versions 1.0, 2.0 and 3.0, write
 * 1.0. Only the storage dtypes of mcir are accepted: <f4 (f32), <f2
 * (f16), <u2 (bf16 bit patterns), <i4 (i32), <i8 (i64), |u1 (u8) and |b1
 * (bool); data must be little-endian and
 * C-ordered, and the file exactly as long as the header says. Writes go
 * through mcir_outfile (outfile.c), so a failed write never leaves a
 * partial file and a link or a device at the path is written through.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json_pos.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAX_HEADER (1u << 20)   /* numpy itself caps headers far lower */

static bool fail(char *why, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(char *why, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (why && n) vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return false;
}

/* ------------------------------------------------------- header parsing */

typedef struct npy_header {
    const char *s, *end;
    char descr[32];
    bool have_descr, have_order, have_shape;
    bool fortran;
    int rank;
    int64_t shape[MCIR_MAX_RANK];
} npy_header;

static void hdr_ws(npy_header *h) {
    while (h->s < h->end && (*h->s == ' ' || *h->s == '\t' || *h->s == '\n' || *h->s == '\r'))
        h->s++;
}

static bool hdr_eat(npy_header *h, char c) {
    hdr_ws(h);
    if (h->s < h->end && *h->s == c) {
        h->s++;
        return true;
    }
    return false;
}

/* A Python string literal in ' or " quotes, without escapes. */
static bool hdr_string(npy_header *h, char *out, size_t n) {
    hdr_ws(h);
    if (h->s >= h->end || (*h->s != '\'' && *h->s != '"')) return false;
    char q = *h->s++;
    size_t o = 0;
    while (h->s < h->end && *h->s != q) {
        if (*h->s == '\\' || o + 1 >= n) return false;
        out[o++] = *h->s++;
    }
    if (h->s >= h->end) return false;
    h->s++;
    out[o] = 0;
    return true;
}

static bool hdr_word(npy_header *h, const char *w) {
    hdr_ws(h);
    size_t n = strlen(w);
    if ((size_t)(h->end - h->s) >= n && memcmp(h->s, w, n) == 0) {
        h->s += n;
        return true;
    }
    return false;
}

static bool hdr_shape(npy_header *h, char *why, size_t wn) {
    if (!hdr_eat(h, '(')) return fail(why, wn, "malformed header: 'shape' is not a tuple");
    h->rank = 0;
    for (;;) {
        if (hdr_eat(h, ')')) break;
        hdr_ws(h);
        if (h->s >= h->end || *h->s < '0' || *h->s > '9')
            return fail(why, wn, "malformed header: bad 'shape' tuple");
        int64_t v = 0;
        while (h->s < h->end && *h->s >= '0' && *h->s <= '9') {
            if (mcir_mul_overflows(v, 10, &v) || __builtin_add_overflow(v, *h->s - '0', &v))
                return fail(why, wn, "shape dimension too large");
            h->s++;
        }
        hdr_ws(h);
        if (h->s < h->end && *h->s == 'L') h->s++; /* Python 2 longs */
        if (h->rank == MCIR_MAX_RANK)
            return fail(why, wn, "rank above %d is not supported", MCIR_MAX_RANK);
        h->shape[h->rank++] = v;
        if (hdr_eat(h, ',')) continue;
        if (hdr_eat(h, ')')) break;
        return fail(why, wn, "malformed header: bad 'shape' tuple");
    }
    return true;
}

static bool parse_header(npy_header *h, char *why, size_t wn) {
    if (!hdr_eat(h, '{')) return fail(why, wn, "malformed header: expected '{'");
    for (;;) {
        if (hdr_eat(h, '}')) break;
        char key[32];
        if (!hdr_string(h, key, sizeof key) || !hdr_eat(h, ':'))
            return fail(why, wn, "malformed header dictionary");
        if (strcmp(key, "descr") == 0) {
            if (!hdr_string(h, h->descr, sizeof h->descr))
                return fail(why, wn, "unsupported dtype (structured or malformed 'descr')");
            h->have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (hdr_word(h, "True")) h->fortran = true;
            else if (hdr_word(h, "False")) h->fortran = false;
            else return fail(why, wn, "malformed header: bad 'fortran_order'");
            h->have_order = true;
        } else if (strcmp(key, "shape") == 0) {
            if (!hdr_shape(h, why, wn)) return false;
            h->have_shape = true;
        } else {
            return fail(why, wn, "malformed header: unexpected key '%s'", key);
        }
        if (hdr_eat(h, ',')) continue;
        if (hdr_eat(h, '}')) break;
        return fail(why, wn, "malformed header dictionary");
    }
    if (!h->have_descr || !h->have_order || !h->have_shape)
        return fail(why, wn, "malformed header: missing '%s'",
                    !h->have_descr ? "descr" : !h->have_order ? "fortran_order" : "shape");
    return true;
}

/* NumPy's type code of each dtype, by mcir_dtype (bf16: its bit patterns;
 * one-byte types are written '|', read with '|' or '<'). */
static const char *const descr_of_dtype[MCIR_DTYPE_COUNT] = {
    [MCIR_DTYPE_F32] = "f4", [MCIR_DTYPE_F16] = "f2", [MCIR_DTYPE_BF16] = "u2",
    [MCIR_DTYPE_I32] = "i4", [MCIR_DTYPE_I64] = "i8", [MCIR_DTYPE_U8] = "u1",
    [MCIR_DTYPE_BOOL] = "b1",
};

const char *mcir_npy_descr(mcir_dtype t) {
    static const char *const full[MCIR_DTYPE_COUNT] = {
        [MCIR_DTYPE_F32] = "<f4", [MCIR_DTYPE_F16] = "<f2", [MCIR_DTYPE_BF16] = "<u2",
        [MCIR_DTYPE_I32] = "<i4", [MCIR_DTYPE_I64] = "<i8", [MCIR_DTYPE_U8] = "|u1",
        [MCIR_DTYPE_BOOL] = "|b1",
    };
    MCIR_ASSERT(t >= 0 && t < MCIR_DTYPE_COUNT);
    return full[t];
}

static bool dtype_of_descr(const char *descr, mcir_dtype *out, char *why, size_t wn) {
    for (int t = 0; t < MCIR_DTYPE_COUNT; t++) {
        const char *code = descr_of_dtype[t];
        bool one_byte = code[1] == '1';
        if (strcmp(descr + 1, code) != 0) continue;
        if (descr[0] == '<' || (one_byte && descr[0] == '|')) {
            *out = (mcir_dtype)t;
            return true;
        }
        if (descr[0] == '>')
            return fail(why, wn, "big-endian dtype '%s' is not supported (expected little-endian)",
                        descr);
    }
    return fail(why, wn,
                "unsupported dtype '%s' (expected <f4, <f2, <u2 (bf16), <i4, <i8, |u1 or |b1)",
                descr);
}

/* ---------------------------------------------------------------- read */

bool mcir_npy_load(const char *path, mcir_npy *out, char *why, size_t wn) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return fail(why, wn, "cannot open: %s", strerror(errno));
    char *header = NULL;
    bool ok = false;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fail(why, wn, "not a regular file");
        goto done;
    }
    unsigned char pre[12];
    size_t got = fread(pre, 1, 10, f);
    if (got < 10) {
        fail(why, wn, "not a .npy file (%s)", got ? "too short" : "empty");
        goto done;
    }
    if (memcmp(pre, NPY_MAGIC, 6) != 0) {
        fail(why, wn, "not a .npy file (bad magic)");
        goto done;
    }
    unsigned major = pre[6], minor = pre[7];
    uint64_t hlen, pre_len;
    if (major == 1) {
        hlen = pre[8] | (unsigned)pre[9] << 8;
        pre_len = 10;
    } else if (major == 2 || major == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            fail(why, wn, "truncated header");
            goto done;
        }
        hlen = pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 | (uint64_t)pre[11] << 24;
        pre_len = 12;
    } else {
        fail(why, wn, "unsupported format version %u.%u", major, minor);
        goto done;
    }
    if (hlen > NPY_MAX_HEADER || pre_len + hlen > (uint64_t)st.st_size) {
        fail(why, wn, "truncated header");
        goto done;
    }
    header = malloc(hlen + 1);
    MCIR_ASSERT(header);
    if (fread(header, 1, hlen, f) != hlen) {
        fail(why, wn, "truncated header");
        goto done;
    }
    header[hlen] = 0;
    npy_header h = {.s = header, .end = header + hlen};
    if (!parse_header(&h, why, wn)) goto done;
    if (!dtype_of_descr(h.descr, &out->dtype, why, wn)) goto done;
    if (h.fortran) {
        fail(why, wn, "fortran_order arrays are not supported (expected C order)");
        goto done;
    }
    int64_t numel, bytes;
    if (!mcir_numel_bounded(h.rank, h.shape, &numel)) {
        fail(why, wn, "shape has too many elements (more than %s, the limit of one tensor)",
             MCIR_MAX_ELEMS_TEXT);
        goto done;
    }
    bytes = numel * (int64_t)mcir_dtype_size(out->dtype);
    uint64_t want = pre_len + hlen + (uint64_t)bytes;
    if ((uint64_t)st.st_size != want) {
        fail(why, wn, "file size is %lld bytes, expected %llu for %lld element%s of %s",
             (long long)st.st_size, (unsigned long long)want, (long long)numel,
             numel == 1 ? "" : "s", h.descr);
        goto done;
    }
    out->rank = h.rank;
    memcpy(out->shape, h.shape, sizeof h.shape);
    out->data = malloc(bytes ? (size_t)bytes : 1);
    MCIR_ASSERT(out->data);
    if (fread(out->data, 1, (size_t)bytes, f) != (size_t)bytes) {
        fail(why, wn, "read error: %s", strerror(errno));
        free(out->data);
        out->data = NULL;
        goto done;
    }
    ok = true;
done:
    free(header);
    fclose(f);
    return ok;
}

bool mcir_npy_read(const char *path, mcir_npy *out, mcir_diag *d) {
    char why[256];
    if (mcir_npy_load(path, out, why, sizeof why)) return true;
    mcir_error(d, (mcir_loc){path, 0, 0}, "%s", why);
    return false;
}

void mcir_npy_free(mcir_npy *n) {
    if (!n) return;
    free(n->data);
    n->data = NULL;
}

/* --------------------------------------------------------------- write */

bool mcir_npy_write(const char *path, mcir_dtype dtype, int rank,
                    const int64_t *shape, const void *data, mcir_diag *d) {
    mcir_loc loc = {path, 0, 0};
    MCIR_ASSERT(rank >= 0 && rank <= MCIR_MAX_RANK);
    const char *code = descr_of_dtype[dtype];
    char dict[512];
    int k = snprintf(dict, sizeof dict, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                     code[1] == '1' ? '|' : '<', code);
    int64_t numel = 1, bytes;
    for (int i = 0; i < rank; i++) {
        k += snprintf(dict + k, sizeof dict - (size_t)k, "%s%lld", i ? ", " : "",
                      (long long)shape[i]);
        if (mcir_mul_overflows(numel, shape[i], &numel)) {
            mcir_error(d, loc, "shape has too many elements");
            return false;
        }
    }
    if (mcir_mul_overflows(numel, (int64_t)mcir_dtype_size(dtype), &bytes)) {
        mcir_error(d, loc, "shape has too many elements");
        return false;
    }
    k += snprintf(dict + k, sizeof dict - (size_t)k, "%s), }", rank == 1 ? "," : "");
    /* Pad with spaces so that magic + version + length + header is a
     * multiple of 64, the header ending in '\n'. */
    size_t total = 10 + (size_t)k + 1;
    size_t padded = (total + 63) / 64 * 64;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    size_t hlen = padded - 10;
    pre[8] = (unsigned char)(hlen & 0xff);
    pre[9] = (unsigned char)(hlen >> 8);

    mcir_outfile o;
    if (!mcir_outfile_open(&o, path, d)) return false;
    FILE *f = o.f;
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)k, f) == (size_t)k;
    for (size_t i = 10 + (size_t)k; ok && i < padded - 1; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    ok = ok && (bytes == 0 || fwrite(data, 1, (size_t)bytes, f) == (size_t)bytes);
    if (!ok) {
        mcir_error(d, loc, "cannot write: %s", strerror(errno));
        mcir_outfile_discard(&o);
        return false;
    }
    return mcir_outfile_commit(&o, d);
}
