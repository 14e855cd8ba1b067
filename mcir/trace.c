/*
 * trace.c — the compile trace: an append-only list of JSON decision
 * records, numbered in the order they were made.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mcir.h"

struct mcir_trace {
    int n, cap;
    json_t **records;
};

mcir_trace *mcir_trace_new(void) {
    mcir_trace *t = calloc(1, sizeof *t);
    MCIR_ASSERT(t);
    return t;
}

void mcir_trace_free(mcir_trace *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) json_decref(t->records[i]);
    free(t->records);
    free(t);
}

void mcir_trace_append(mcir_trace *t, json_t *record) {
    MCIR_ASSERT(json_is_object(record));
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->records = realloc(t->records, (size_t)t->cap * sizeof *t->records);
        MCIR_ASSERT(t->records);
    }
    /* "seq" first: rebuild the object with seq in front */
    json_t *r = json_object();
    json_object_set_new(r, "seq", json_integer(t->n));
    const char *key;
    json_t *value;
    json_object_foreach(record, key, value) {
        if (strcmp(key, "seq") != 0) json_object_set(r, key, value);
    }
    json_decref(record);
    t->records[t->n++] = r;
}

int mcir_trace_count(const mcir_trace *t) { return t ? t->n : 0; }

json_t *mcir_trace_get(const mcir_trace *t, int i) {
    MCIR_ASSERT(i >= 0 && i < t->n);
    return t->records[i];
}

bool mcir_trace_write_jsonl(const mcir_trace *t, FILE *out) {
    for (int i = 0; t && i < t->n; i++) {
        if (json_dumpf(t->records[i], out, JSON_PRESERVE_ORDER | JSON_COMPACT) != 0)
            return false;
        fputc('\n', out);
    }
    return !ferror(out);
}
