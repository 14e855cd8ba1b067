/*
 * json_pos.h — private helpers of the I/O files of mcir/ (json_read.c,
 * json_write.c, npy.c); not part of the public API.
 *
 * jansson gives no source positions for values, so json_pos scans the raw
 * text a second time and records where every value (and every object key)
 * starts. Values are found by walking the same path as the jansson tree:
 *
 *     mcir_json_pos *p = mcir_json_pos_scan(text, len);
 *     int v = mcir_json_pos_find(p, "/nodes/3/attrs/axes");
 *     mcir_loc loc = mcir_json_pos_loc(p, v, path);   // line 0 if v < 0
 *     mcir_json_pos_free(p);
 *
 * Lines and columns are 1-based; columns count characters (UTF-8 code
 * points), as jansson's own error positions do.
 */
#ifndef MCIR_JSON_POS_H
#define MCIR_JSON_POS_H

#include "mcir.h"

typedef struct mcir_json_pos mcir_json_pos;

/* Scans text (assumed valid JSON; stops quietly where it is not). Never
 * returns NULL. The root value, if any, is value 0. */
mcir_json_pos *mcir_json_pos_scan(const char *text, size_t len);
void mcir_json_pos_free(mcir_json_pos *p);

/* Value handles are ints; -1 means "none" and is accepted everywhere. */
int mcir_json_pos_root(const mcir_json_pos *p);
/* The member `key` of object v (the last one if repeated), or -1. */
int mcir_json_pos_key(const mcir_json_pos *p, int v, const char *key);
/* Element i of array v, or -1. */
int mcir_json_pos_index(const mcir_json_pos *p, int v, size_t i);
/* A JSON Pointer (RFC 6901): "" is the root, "/nodes/3/attrs/axes". */
int mcir_json_pos_find(const mcir_json_pos *p, const char *pointer);

/* Number of members / elements of v (0 for scalars and -1). */
int mcir_json_pos_count(const mcir_json_pos *p, int v);
/* The i-th member of object v in document order: its key (decoded) and
 * value handle; NULL if out of range. */
const char *mcir_json_pos_member(const mcir_json_pos *p, int v, int i, int *value);

/* Where value v starts; a loc with line 0 if v is -1. */
mcir_loc mcir_json_pos_loc(const mcir_json_pos *p, int v, const char *path);
/* Where the key of value v (a member of an object) starts; falls back to
 * the value's own position. */
mcir_loc mcir_json_pos_key_loc(const mcir_json_pos *p, int v, const char *path);

/* .npy loading without a diagnostic sink: on failure writes a one-line
 * reason (no path) into why and returns false. npy.c implements it;
 * mcir_npy_read wraps it, json_read.c reports the reason at the weight. */
bool mcir_npy_load(const char *path, mcir_npy *out, char *why, size_t why_size);

#endif /* MCIR_JSON_POS_H */
