/*
 * value.c — the value toolkit: storage bytes of every dtype to and from
 * f32 (and f64, and int64 for integer dtypes), rounding an f32 value to
 * what a dtype holds, and the one comparison of two value arrays within a
 * tolerance that --verify, the rewrite verifier, mcir-compare and the
 * tests all use (so they give one answer).
 *
 * Invariant: a float-to-integer conversion truncates toward zero and
 * saturates at the dtype's range (NaN becomes 0); an integer-to-integer
 * one wraps (two's complement: i32 modulo 2^32, u8 modulo 2^8); bool is
 * v != 0. Integer values are computed as int64, never through a float
 * (docs/ir.md, mcir_value_type_of).
 */
#include <math.h>
#include <string.h>

#include "mcir-impl.h"

bool mcir_dtype_is_float(mcir_dtype t) {
    return t == MCIR_DTYPE_F32 || t == MCIR_DTYPE_F16 || t == MCIR_DTYPE_BF16;
}

bool mcir_dtype_is_integer(mcir_dtype t) {
    return t == MCIR_DTYPE_I32 || t == MCIR_DTYPE_I64 || t == MCIR_DTYPE_U8 ||
           t == MCIR_DTYPE_BOOL;
}

mcir_value_type mcir_value_type_of(mcir_dtype t) {
    return mcir_dtype_is_integer(t) ? MCIR_VALUE_I64 : MCIR_VALUE_F32;
}

size_t mcir_value_type_size(mcir_value_type v) { return v == MCIR_VALUE_I64 ? 8 : 4; }

int64_t mcir_int_wrap(mcir_dtype t, int64_t v) {
    switch (t) {
    case MCIR_DTYPE_I32: return (int32_t)(uint32_t)(uint64_t)v;
    case MCIR_DTYPE_U8: return (int64_t)((uint64_t)v & 0xff);
    case MCIR_DTYPE_BOOL: return v != 0;
    case MCIR_DTYPE_I64: return v;
    default: MCIR_ASSERT(!"not an integer dtype");
    }
    return v;
}

float mcir_int_to_float(mcir_dtype t, int64_t v) {
    if (mcir_dtype_is_integer(t)) return (float)mcir_int_wrap(t, v);
    return mcir_dtype_round(t, (float)v);
}

/* The range an integer dtype holds, as doubles (exact for the bounds that
 * matter: 2^63 rounds up, so the saturation compares with >=). */
static void int_range(mcir_dtype t, double *lo, double *hi) {
    switch (t) {
    case MCIR_DTYPE_I32: *lo = -2147483648.0, *hi = 2147483647.0; break;
    case MCIR_DTYPE_I64: *lo = -9223372036854775808.0, *hi = 9223372036854775807.0; break;
    case MCIR_DTYPE_U8: *lo = 0, *hi = 255; break;
    default: *lo = 0, *hi = 1; break;
    }
}

int64_t mcir_value_to_int(mcir_dtype t, double v) {
    if (t == MCIR_DTYPE_BOOL) return v != 0;
    if (isnan(v)) return 0;
    double lo, hi;
    int_range(t, &lo, &hi);
    v = trunc(v);
    if (v <= lo) return t == MCIR_DTYPE_I64 ? INT64_MIN : (int64_t)lo;
    if (v >= hi) return t == MCIR_DTYPE_I64 ? INT64_MAX : (int64_t)hi;
    return (int64_t)v;
}

float mcir_dtype_round(mcir_dtype t, float f) {
    switch (t) {
    case MCIR_DTYPE_F32: return f;
    case MCIR_DTYPE_F16: return mcir_f16_to_f32(mcir_f32_to_f16(f));
    case MCIR_DTYPE_BF16: return mcir_bf16_to_f32(mcir_f32_to_bf16(f));
    case MCIR_DTYPE_I32:
    case MCIR_DTYPE_I64:
    case MCIR_DTYPE_U8:
    case MCIR_DTYPE_BOOL: return (float)mcir_value_to_int(t, f);
    default: MCIR_ASSERT(!"bad dtype");
    }
    return f;
}

/* Element i of storage bytes p as a double (exact for every dtype but
 * i64 beyond 2^53). */
double mcir_value_get(mcir_dtype t, const void *p, int64_t i) {
    const unsigned char *b = p;
    switch (t) {
    case MCIR_DTYPE_F32: {
        float f;
        memcpy(&f, b + 4 * i, 4);
        return f;
    }
    case MCIR_DTYPE_F16:
    case MCIR_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, b + 2 * i, 2);
        return t == MCIR_DTYPE_F16 ? mcir_f16_to_f32(h) : mcir_bf16_to_f32(h);
    }
    case MCIR_DTYPE_I32: {
        int32_t v;
        memcpy(&v, b + 4 * i, 4);
        return v;
    }
    case MCIR_DTYPE_I64: return (double)mcir_value_get_int(t, p, i);
    case MCIR_DTYPE_U8: return b[i];
    case MCIR_DTYPE_BOOL: return b[i] != 0;
    default: MCIR_ASSERT(!"bad dtype");
    }
    return 0;
}

int64_t mcir_value_get_int(mcir_dtype t, const void *p, int64_t i) {
    if (t == MCIR_DTYPE_I64) {
        int64_t v;
        memcpy(&v, (const unsigned char *)p + 8 * i, 8);
        return v;
    }
    if (mcir_dtype_is_integer(t)) return (int64_t)mcir_value_get(t, p, i);
    return mcir_value_to_int(MCIR_DTYPE_I64, mcir_value_get(t, p, i));
}

void mcir_value_set(mcir_dtype t, void *p, int64_t i, double v) {
    unsigned char *b = p;
    switch (t) {
    case MCIR_DTYPE_F32: {
        float f = (float)v;
        memcpy(b + 4 * i, &f, 4);
        break;
    }
    case MCIR_DTYPE_F16:
    case MCIR_DTYPE_BF16: {
        uint16_t h = t == MCIR_DTYPE_F16 ? mcir_f32_to_f16((float)v) : mcir_f32_to_bf16((float)v);
        memcpy(b + 2 * i, &h, 2);
        break;
    }
    case MCIR_DTYPE_I32: {
        int32_t x = (int32_t)mcir_value_to_int(t, v);
        memcpy(b + 4 * i, &x, 4);
        break;
    }
    case MCIR_DTYPE_I64: {
        int64_t x = mcir_value_to_int(t, v);
        memcpy(b + 8 * i, &x, 8);
        break;
    }
    case MCIR_DTYPE_U8:
    case MCIR_DTYPE_BOOL: b[i] = (unsigned char)mcir_value_to_int(t, v); break;
    default: MCIR_ASSERT(!"bad dtype");
    }
}

void mcir_values_to_f32(mcir_dtype t, const void *src, float *dst, int64_t n) {
    if (t == MCIR_DTYPE_F32) {
        memcpy(dst, src, sizeof(float) * (size_t)n);
        return;
    }
    for (int64_t i = 0; i < n; i++) dst[i] = (float)mcir_value_get(t, src, i);
}

void mcir_values_to_f64(mcir_dtype t, const void *src, double *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = mcir_value_get(t, src, i);
}

void mcir_values_to_int(mcir_dtype t, const void *src, int64_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = mcir_value_get_int(t, src, i);
}

void mcir_values_from_f32(mcir_dtype t, const float *src, void *dst, int64_t n) {
    if (t == MCIR_DTYPE_F32) {
        memcpy(dst, src, sizeof(float) * (size_t)n);
        return;
    }
    for (int64_t i = 0; i < n; i++) mcir_value_set(t, dst, i, src[i]);
}

void mcir_values_from_f64(mcir_dtype t, const double *src, void *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) mcir_value_set(t, dst, i, src[i]);
}

void mcir_values_from_int(mcir_dtype t, const int64_t *src, void *dst, int64_t n) {
    unsigned char *b = dst;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = mcir_dtype_is_integer(t) ? mcir_int_wrap(t, src[i]) : 0;
        switch (t) {
        case MCIR_DTYPE_I64: memcpy(b + 8 * i, &v, 8); break;
        case MCIR_DTYPE_I32: {
            int32_t x = (int32_t)v;
            memcpy(b + 4 * i, &x, 4);
            break;
        }
        case MCIR_DTYPE_U8:
        case MCIR_DTYPE_BOOL: b[i] = (unsigned char)v; break;
        default: mcir_value_set(t, dst, i, mcir_int_to_float(t, src[i])); break;
        }
    }
}

/* ------------------------------------------------------------- compare */

double mcir_compare_tolerance(mcir_dtype t) {
    if (mcir_dtype_is_integer(t)) return 0;   /* integers and bools: exact */
    return t == MCIR_DTYPE_F32 ? 1e-4 : 2e-2;
}

void mcir_values_compare(const float *got, const float *want, int64_t n,
                         mcir_compare_result *r) {
    double worst = 0, scale = 0;
    *r = (mcir_compare_result){.worst = -1};
    for (int64_t i = 0; i < n; i++) {
        double a = got[i], b = want[i];
        if (isnan(a) || isnan(b) || isinf(a) || isinf(b)) {
            /* the same non-finite value on both sides agrees */
            bool same = (isnan(a) && isnan(b)) || a == b;
            if (!same && !r->nonfinite_mismatch) {
                r->nonfinite_mismatch = true;
                r->worst = i;
            }
            continue;
        }
        double e = fabs(a - b);
        if (e > worst) {
            worst = e;
            if (!r->nonfinite_mismatch) r->worst = i;
        }
        if (fabs(b) > scale) scale = fabs(b);
    }
    r->max_abs = r->nonfinite_mismatch ? INFINITY : worst;
    /* relative to the largest expected magnitude; an all-zero expectation
     * makes the error absolute */
    r->max_rel = r->nonfinite_mismatch ? INFINITY : scale > 0 ? worst / scale : worst;
}

void mcir_values_compare_int(const int64_t *got, const int64_t *want, int64_t n,
                             mcir_compare_result *r) {
    double worst = 0, scale = 0;
    *r = (mcir_compare_result){.worst = -1};
    for (int64_t i = 0; i < n; i++) {
        /* the exact difference, as an unsigned magnitude, then in f64 */
        uint64_t d = got[i] >= want[i] ? (uint64_t)got[i] - (uint64_t)want[i]
                                       : (uint64_t)want[i] - (uint64_t)got[i];
        if (d != 0 && ((double)d > worst || r->worst < 0)) {
            worst = (double)d;
            r->worst = i;
        }
        double m = want[i] < 0 ? -(double)want[i] : (double)want[i];
        if (m > scale) scale = m;
    }
    r->max_abs = worst;
    r->max_rel = scale > 0 ? worst / scale : worst;
}

bool mcir_compare_within(const mcir_compare_result *r, double tolerance) {
    return !r->nonfinite_mismatch && r->max_rel <= tolerance;
}
