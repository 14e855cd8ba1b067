/* csv.c — reader and writer of the public planning-problem CSV
 * (`id,lower,upper,size`, half-open lifetimes), as used by MiniMalloc's
 * benchmarks and by mcir-memplan.
 *
 * Invariant: the reader either returns a fully valid problem (integers in
 * range, size >= 0, lower < upper, ids unique) or a single diagnostic
 * "path:line:col: error: ..." pointing at the offending field; it never
 * reads past a line and never trusts a field's length.
 */
#include "memplan/memplan-impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char csv_header[] = "id,lower,upper,size";

static bool csv_fail(char *why, size_t n, const char *path, size_t line,
                     size_t col, const char *fmt, ...)
{
    int k = snprintf(why, n, "%s:%zu:%zu: error: ", path, line, col);
    if (k >= 0 && (size_t)k < n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why + k, n - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* Parses a decimal integer from s[0..len), surrounding blanks allowed. */
typedef enum { CSV_INT_OK, CSV_INT_BAD, CSV_INT_RANGE } csv_int_status;

static csv_int_status csv_parse_int(const char *s, size_t len, int64_t *out)
{
    size_t i = 0;
    while (i < len && (s[i] == ' ' || s[i] == '\t'))
        i++;
    while (len > i && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    bool neg = false;
    if (i < len && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    if (i >= len)
        return CSV_INT_BAD;
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    bool range = false;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return CSV_INT_BAD;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (lim - d) / 10)
            range = true;
        else
            v = v * 10 + d;
    }
    if (range)
        return CSV_INT_RANGE;
    *out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v)
               : (int64_t)v;
    return CSV_INT_OK;
}

typedef struct csv_row_ref {
    int64_t id;
    size_t line, row;
} csv_row_ref;

static int csv_cmp_ref(const void *a, const void *b)
{
    const csv_row_ref *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return (x->line > y->line) - (x->line < y->line);
}

void mcir_memplan_csv_free(mcir_memplan_csv *csv)
{
    free(csv->id);
    free(csv->lower);
    free(csv->upper);
    free(csv->size);
    free(csv->buffers);
    free(csv->names);
    memset(csv, 0, sizeof *csv);
}

static bool csv_push(mcir_memplan_csv *csv, size_t *cap, size_t **lines,
                     const int64_t v[4], size_t line)
{
    if (csv->n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        int64_t *a = realloc(csv->id, c * sizeof *a);
        if (a)
            csv->id = a;
        int64_t *b = realloc(csv->lower, c * sizeof *b);
        if (b)
            csv->lower = b;
        int64_t *u = realloc(csv->upper, c * sizeof *u);
        if (u)
            csv->upper = u;
        int64_t *s = realloc(csv->size, c * sizeof *s);
        if (s)
            csv->size = s;
        size_t *l = realloc(*lines, c * sizeof *l);
        if (l)
            *lines = l;
        if (!a || !b || !u || !s || !l)
            return false;
        *cap = c;
    }
    csv->id[csv->n] = v[0];
    csv->lower[csv->n] = v[1];
    csv->upper[csv->n] = v[2];
    csv->size[csv->n] = v[3];
    (*lines)[csv->n] = line;
    csv->n++;
    return true;
}

bool mcir_memplan_csv_read(const char *path, FILE *in, mcir_memplan_csv *csv,
                           char *why, size_t why_size)
{
    memset(csv, 0, sizeof *csv);
    FILE *f = in ? in : fopen(path, "rb");
    if (!f) {
        snprintf(why, why_size, "%s: error: cannot open: %s", path,
                 strerror(errno));
        return false;
    }
    char *text = NULL;
    size_t text_cap = 0, cap = 0, *lines = NULL, lineno = 0;
    ssize_t got;
    bool ok = false, header = false;
    static const char *const field_names[4] = {"id", "lower", "upper", "size"};
    while ((got = getline(&text, &text_cap, f)) >= 0) {
        size_t len = (size_t)got;
        lineno++;
        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
            len--;
        if (memchr(text, '\0', len)) {
            csv_fail(why, why_size, path, lineno,
                     (size_t)((char *)memchr(text, '\0', len) - text) + 1,
                     "NUL byte in the file");
            goto out;
        }
        if (!header) {
            if (len != sizeof csv_header - 1 ||
                memcmp(text, csv_header, len) != 0) {
                csv_fail(why, why_size, path, lineno, 1,
                         "expected the header '%s'", csv_header);
                goto out;
            }
            header = true;
            continue;
        }
        size_t blank = 0;
        while (blank < len && (text[blank] == ' ' || text[blank] == '\t'))
            blank++;
        if (blank == len)
            continue;
        int64_t v[4];
        size_t start = 0, field = 0, cols[4] = {0};
        for (;;) {
            size_t end = start;
            while (end < len && text[end] != ',')
                end++;
            if (field == 4) {
                csv_fail(why, why_size, path, lineno, start + 1,
                         "expected 4 fields (%s), found more", csv_header);
                goto out;
            }
            cols[field] = start + 1;
            csv_int_status st = csv_parse_int(text + start, end - start,
                                              &v[field]);
            if (st != CSV_INT_OK) {
                int w = (int)(end - start > 40 ? 40 : end - start);
                csv_fail(why, why_size, path, lineno, start + 1,
                         st == CSV_INT_BAD ? "%s '%.*s' is not an integer"
                                           : "%s '%.*s' is out of range",
                         field_names[field], w, text + start);
                goto out;
            }
            field++;
            if (end == len)
                break;
            start = end + 1;
        }
        if (field != 4) {
            csv_fail(why, why_size, path, lineno, len + 1,
                     "expected 4 fields (%s), found %zu", csv_header, field);
            goto out;
        }
        if (v[3] < 0) {
            csv_fail(why, why_size, path, lineno, cols[3],
                     "negative size %lld", (long long)v[3]);
            goto out;
        }
        if (v[1] >= v[2]) {
            csv_fail(why, why_size, path, lineno, cols[2],
                     "empty lifetime: lower %lld is not below upper %lld",
                     (long long)v[1], (long long)v[2]);
            goto out;
        }
        if (!csv_push(csv, &cap, &lines, v, lineno)) {
            snprintf(why, why_size, "%s: error: out of memory", path);
            goto out;
        }
    }
    if (ferror(f)) {
        snprintf(why, why_size, "%s: error: read failed", path);
        goto out;
    }
    if (!header) {
        csv_fail(why, why_size, path, 1, 1, "empty file, expected the header "
                 "'%s'", csv_header);
        goto out;
    }
    size_t n = csv->n, n1 = n ? n : 1;
    csv_row_ref *refs = malloc(n1 * sizeof *refs);
    csv->buffers = calloc(n1, sizeof *csv->buffers);
    csv->names = malloc(n1 * 24);
    if (!refs || !csv->buffers || !csv->names) {
        free(refs);
        snprintf(why, why_size, "%s: error: out of memory", path);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        refs[i] = (csv_row_ref){csv->id[i], lines[i], i};
    qsort(refs, n, sizeof *refs, csv_cmp_ref);
    for (size_t i = 1; i < n; i++)
        if (refs[i].id == refs[i - 1].id) {
            csv_fail(why, why_size, path, refs[i].line, 1,
                     "duplicate id %lld (first on line %zu)",
                     (long long)refs[i].id, refs[i - 1].line);
            free(refs);
            goto out;
        }
    free(refs);
    for (size_t i = 0; i < n; i++) {
        char *name = csv->names + 24 * i;
        snprintf(name, 24, "%lld", (long long)csv->id[i]);
        csv->buffers[i] = (mcir_memplan_buffer){
            .name = name, .size = csv->size[i], .alignment = 1,
            .first = csv->lower[i], .last = csv->upper[i] - 1,
            .share_with = -1};
    }
    ok = true;
out:
    free(text);
    free(lines);
    if (!in)
        fclose(f);
    if (!ok)
        mcir_memplan_csv_free(csv);
    return ok;
}

bool mcir_memplan_csv_write(FILE *out, const mcir_memplan_csv *csv,
                            const int64_t *offsets)
{
    if (fprintf(out, "%s,offset\n", csv_header) < 0)
        return false;
    for (size_t i = 0; i < csv->n; i++)
        if (fprintf(out, "%lld,%lld,%lld,%lld,%lld\n", (long long)csv->id[i],
                    (long long)csv->lower[i], (long long)csv->upper[i],
                    (long long)csv->size[i], (long long)offsets[i]) < 0)
            return false;
    return true;
}
