/*
 * protobuf.c — what the ONNX importer reads out of the protobuf messages
 * itself, past protobuf-c's unpacking: the nesting depth, bounded on the
 * wire format before anything is unpacked; node attributes by name and
 * type (AttributeProto); tensors (TensorProto: typed fields, raw_data or
 * external data next to the model) as constant ox_values.
 *
 * Invariants: every attribute read marks it used (x->used_attrs), so that
 * ox_import_node rejects the ones no handler reads; a tensor's declared
 * size is checked against its data, and bounded, before anything is
 * allocated for it.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "onnx-impl.h"

/* -------------------------------------------------------- wire format */


/* protobuf-c unpacks nested messages recursively, so a file of a few MB
 * that nests messages 100k deep would overflow the stack. This walk of the
 * wire format, driven by the generated descriptors (it decodes nothing,
 * only finds where messages nest), bounds the depth before unpacking; a
 * malformed encoding is left for protobuf-c to reject. */

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

bool ox_nesting_ok(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
                   const uint8_t *end, int depth) {
    while (p < end) {
        uint64_t key, len;
        if (!read_varint(&p, end, &key)) return true;
        switch (key & 7) {
        case 0: if (!read_varint(&p, end, &len)) return true; break;
        case 1: if (end - p < 8) return true; p += 8; break;
        case 5: if (end - p < 4) return true; p += 4; break;
        case 2: {
            if (!read_varint(&p, end, &len) || len > (uint64_t)(end - p)) return true;
            const ProtobufCFieldDescriptor *f =
                key >> 3 <= UINT_MAX ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3))
                                     : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (depth >= OX_MAX_NESTING ||
                    !ox_nesting_ok(f->descriptor, p, p + len, depth + 1))
                    return false;
            }
            p += len;
            break;
        }
        default: return true; /* groups and invalid wire types: protobuf-c rejects them */
        }
    }
    return true;
}

/* --------------------------------------------------------- attributes */

static const char *const attr_type_names[] = {
    [ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT] = "float",
    [ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT] = "int",
    [ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING] = "string",
    [ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR] = "tensor",
    [ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS] = "ints",
    [ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS] = "floats",
};

/* The attribute `name` if present (and marks it read); NULL if absent, of
 * the wrong type, or holding no value of that type (error). Every accessor
 * goes through here, so a caller may dereference the value field it asked
 * for. As in ONNX's checker, a scalar (int, float, string) with its type
 * but no value field is the field's proto default (proto3 writers omit
 * zeros); a tensor has no default, so a TENSOR attribute without one is an
 * error. */
const Onnx__AttributeProto *ox_attr_get(ox *x, const char *name, int type) {
    for (size_t i = 0; i < x->node->n_attribute; i++) {
        const Onnx__AttributeProto *a = x->node->attribute[i];
        if (!a || !a->name || strcmp(a->name, name) != 0) continue;
        if (i < 64) x->used_attrs |= 1ull << i;
        bool typed = a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
        bool ok;
        if (typed)
            ok = (int)a->type == type;
        else
            switch (type) {
            case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: ok = a->has_f; break;
            case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: ok = a->has_i; break;
            case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: ok = a->has_s; break;
            case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: ok = a->t != NULL; break;
            case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: ok = true; break;
            case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: ok = true; break;
            default: ok = false;
            }
        if (!ok) {
            ox_error(x, "attribute '%s' must be of type %s", name, attr_type_names[type]);
            return NULL;
        }
        if (type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR && !a->t) {
            ox_error(x, "attribute '%s' has type tensor but holds no tensor", name);
            return NULL;
        }
        if ((type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS && a->n_ints && !a->ints) ||
            (type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS && a->n_floats &&
             !a->floats) ||
            (type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING && a->s.len && !a->s.data)) {
            ox_error(x, "attribute '%s' holds no value", name);
            return NULL;
        }
        return a;
    }
    return NULL;
}

int64_t ox_attr_int(ox *x, const char *name, int64_t def) {
    const Onnx__AttributeProto *a = ox_attr_get(x, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    return a ? a->i : def;
}

float ox_attr_float(ox *x, const char *name, float def) {
    const Onnx__AttributeProto *a =
        ox_attr_get(x, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    return a ? a->f : def;
}

/* String attribute copied into buf (NUL-terminated, truncated). */
const char *ox_attr_str(ox *x, const char *name, const char *def, char *buf, size_t n) {
    const Onnx__AttributeProto *a =
        ox_attr_get(x, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    if (!a) return def;
    size_t len = a->s.len < n - 1 ? a->s.len : n - 1;
    if (len) memcpy(buf, a->s.data, len);
    buf[len] = 0;
    return buf;
}

/* Int list attribute: its count, or -1 if absent (or on error). */
int ox_attr_ints(ox *x, const char *name, int64_t *out, int max) {
    const Onnx__AttributeProto *a = ox_attr_get(x, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    if (!a) return -1;
    if (a->n_ints > (size_t)max) {
        ox_error(x, "attribute '%s' has %zu values, at most %d supported", name, a->n_ints,
                 max);
        return -1;
    }
    for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
    return (int)a->n_ints;
}

/* --------------------------------------------------------------- tensors */

static size_t elem_size(int elem) {
    switch (elem) {
    case OX_UINT8: case OX_INT8: case OX_BOOL: return 1;
    case OX_UINT16: case OX_INT16: case OX_FLOAT16: case OX_BFLOAT16: return 2;
    case OX_FLOAT: case OX_INT32: case OX_UINT32: return 4;
    default: return 8;
    }
}

/* Element i of little-endian storage bytes into v. */
static void store_raw(ox_value *v, int64_t i, const uint8_t *p) {
    switch (v->elem) {
    case OX_FLOAT: { float f; memcpy(&f, p, 4); v->fv[i] = f; break; }
    case OX_DOUBLE: { double f; memcpy(&f, p, 8); v->fv[i] = (float)f; break; }
    case OX_FLOAT16: { uint16_t h; memcpy(&h, p, 2); v->fv[i] = mcir_f16_to_f32(h); break; }
    case OX_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); v->fv[i] = mcir_bf16_to_f32(h); break; }
    case OX_BOOL: v->iv[i] = p[0] != 0; break;
    case OX_UINT8: v->iv[i] = p[0]; break;
    case OX_INT8: v->iv[i] = (int8_t)p[0]; break;
    case OX_UINT16: { uint16_t k; memcpy(&k, p, 2); v->iv[i] = k; break; }
    case OX_INT16: { int16_t k; memcpy(&k, p, 2); v->iv[i] = k; break; }
    case OX_INT32: { int32_t k; memcpy(&k, p, 4); v->iv[i] = k; break; }
    case OX_UINT32: { uint32_t k; memcpy(&k, p, 4); v->iv[i] = k; break; }
    default: { int64_t k; memcpy(&k, p, 8); v->iv[i] = k; break; } /* int64, uint64 */
    }
}

static bool safe_relative(const char *p) {
    if (!*p || p[0] == '/') return false;
    for (const char *s = p; *s;) {
        size_t len = strcspn(s, "/");
        if (len == 2 && s[0] == '.' && s[1] == '.') return false;
        s += len;
        while (*s == '/') s++;
    }
    return true;
}

/* Bytes of an external-data tensor (location/offset/length relative to the
 * model's directory), malloc'd. */
static uint8_t *read_external(ox *x, const Onnx__TensorProto *tp, const char *what,
                              size_t want) {
    const char *loc = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e || !e->key || !e->value) continue;
        char *end;
        if (!strcmp(e->key, "location")) loc = e->value;
        else if (!strcmp(e->key, "offset") || !strcmp(e->key, "length")) {
            errno = 0;
            long long k = strtoll(e->value, &end, 10);
            if (errno || *end || k < 0) {
                ox_error(x, "%s: external data %s \"%s\" is not a valid size", what, e->key,
                         e->value);
                return NULL;
            }
            if (e->key[0] == 'o') offset = k;
            else length = k;
        }
    }
    if (!loc) {
        ox_error(x, "%s: external data without a location", what);
        return NULL;
    }
    if (!safe_relative(loc)) {
        ox_error(x, "%s: external data location \"%s\" must be a relative path inside the "
                    "model's directory",
                 what, loc);
        return NULL;
    }
    if (length >= 0 && (uint64_t)length != want) {
        ox_error(x, "%s: external data length %lld does not match its shape and type "
                    "(%zu bytes)",
                 what, (long long)length, want);
        return NULL;
    }
    const char *file = mcir_arena_printf(x->a, "%s/%s", x->dir, loc);
    FILE *f = fopen(file, "rb");
    if (!f) {
        ox_error(x, "%s: cannot open external data file '%s': %s", what, file,
                 strerror(errno));
        return NULL;
    }
    off_t size = fseeko(f, 0, SEEK_END) == 0 ? ftello(f) : -1;
    uint8_t *buf = size >= 0 && (uint64_t)size >= (uint64_t)offset + want ? malloc(want ? want : 1)
                                                                         : NULL;
    bool ok = buf && fseeko(f, (off_t)offset, SEEK_SET) == 0 &&
              fread(buf, 1, want, f) == want;
    fclose(f);
    if (!ok) {
        free(buf);
        ox_error(x, "%s: external data file '%s' is shorter than offset %lld + %zu bytes",
                 what, file, (long long)offset, want);
        return NULL;
    }
    x->const_budget += (int64_t)want * 8; /* the data exists: room to widen it */
    return buf;
}

/* A TensorProto as a constant value. */
ox_value *ox_tensor_value(ox *x, const Onnx__TensorProto *tp, const char *what) {
    if (!tp) {
        ox_error(x, "%s holds no tensor", what);
        return NULL;
    }
    int elem = tp->has_data_type ? tp->data_type : 0;
    if (!ox_elem_supported(elem)) {
        ox_error(x, "%s has element type %s (%d), which is not supported", what,
                 ox_elem_name(elem), elem);
        return NULL;
    }
    if (tp->n_dims > MCIR_MAX_RANK) {
        ox_error(x, "%s has %zu dims, more than %d", what, tp->n_dims, MCIR_MAX_RANK);
        return NULL;
    }
    if (tp->segment) {
        ox_error(x, "%s is a segmented tensor, which is not supported", what);
        return NULL;
    }
    for (size_t i = 0; i < tp->n_dims; i++)
        if (tp->dims[i] < 0) {
            ox_error(x, "%s has a negative dimension %lld", what, (long long)tp->dims[i]);
            return NULL;
        }
    int64_t numel = 1;
    for (size_t i = 0; i < tp->n_dims; i++)
        if (mcir_mul_overflows(numel, tp->dims[i], &numel) || numel > OX_MAX_CONST_ELEMS) {
            ox_error(x, "%s is too large (more than 2^28 elements)", what);
            return NULL;
        }
    size_t es = elem_size(elem), want = (size_t)numel * es;
    bool external = tp->has_data_location &&
                    tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    /* sizes are checked before anything is allocated */
    if (!external && tp->has_raw_data && tp->raw_data.len != want) {
        ox_error(x, "%s: raw_data has %zu bytes, its shape and type need %zu", what,
                 tp->raw_data.len, want);
        return NULL;
    }
    size_t n = 0;
    const char *field = NULL;
    if (!external && !tp->has_raw_data) {
        switch (elem) {
        case OX_FLOAT: n = tp->n_float_data; field = "float_data"; break;
        case OX_INT64: n = tp->n_int64_data; field = "int64_data"; break;
        case OX_DOUBLE: n = tp->n_double_data; field = "double_data"; break;
        case OX_UINT32: case OX_UINT64: n = tp->n_uint64_data; field = "uint64_data"; break;
        default: n = tp->n_int32_data; field = "int32_data"; break;
        }
        if (n != (size_t)numel) {
            ox_error(x, "%s: %s has %zu values, its shape needs %lld", what, field, n,
                     (long long)numel);
            return NULL;
        }
    }
    uint8_t *ext = external ? read_external(x, tp, what, want) : NULL;
    if (external && !ext) return NULL;
    ox_value *v = ox_const_new(x, elem, (int)tp->n_dims, tp->dims);
    if (!v) {
        free(ext);
        return NULL;
    }
    if (external) {
        for (int64_t i = 0; i < v->numel; i++) store_raw(v, i, ext + (size_t)i * es);
        free(ext);
        return v;
    }
    if (tp->has_raw_data) {
        for (int64_t i = 0; i < v->numel; i++) store_raw(v, i, tp->raw_data.data + (size_t)i * es);
        return v;
    }
    for (int64_t i = 0; i < v->numel; i++) {
        switch (elem) {
        case OX_FLOAT: v->fv[i] = tp->float_data[i]; break;
        case OX_DOUBLE: v->fv[i] = (float)tp->double_data[i]; break;
        case OX_INT64: v->iv[i] = tp->int64_data[i]; break;
        case OX_UINT32: case OX_UINT64: v->iv[i] = (int64_t)tp->uint64_data[i]; break;
        case OX_FLOAT16: v->fv[i] = mcir_f16_to_f32((uint16_t)tp->int32_data[i]); break;
        case OX_BFLOAT16: v->fv[i] = mcir_bf16_to_f32((uint16_t)tp->int32_data[i]); break;
        default: ox_seti(v, i, tp->int32_data[i]); break;
        }
    }
    return v;
}
