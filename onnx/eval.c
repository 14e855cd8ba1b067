/*
 * eval.c — the import-time evaluator: ONNX ops over constant tensors
 * (int64/int32/bool and float element types), so that the shape-computing
 * subgraphs exporters emit (Shape → Gather → Unsqueeze → Concat → Reshape,
 * ConstantOfShape, Expand, Equal, Where, Range, Cast) fold into constants
 * and a static graph comes out.
 *
 * Invariant: a constant's values are stored in its element type's class —
 * integers and bools exactly in int64, floats in f32 already rounded to
 * their type (f16, bf16; doubles are carried in f32) — and every result
 * is rounded the same way.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx-impl.h"

const char *ox_elem_name(int elem) {
    switch (elem) {
    case OX_FLOAT: return "float";
    case OX_UINT8: return "uint8";
    case OX_INT8: return "int8";
    case OX_UINT16: return "uint16";
    case OX_INT16: return "int16";
    case OX_INT32: return "int32";
    case OX_INT64: return "int64";
    case OX_STRING: return "string";
    case OX_BOOL: return "bool";
    case OX_FLOAT16: return "float16";
    case OX_DOUBLE: return "double";
    case OX_UINT32: return "uint32";
    case OX_UINT64: return "uint64";
    case OX_BFLOAT16: return "bfloat16";
    default: return "unknown";
    }
}

bool ox_elem_supported(int elem) {
    switch (elem) {
    case OX_FLOAT: case OX_UINT8: case OX_INT8: case OX_UINT16: case OX_INT16:
    case OX_INT32: case OX_INT64: case OX_BOOL: case OX_FLOAT16: case OX_DOUBLE:
    case OX_UINT32: case OX_UINT64: case OX_BFLOAT16:
        return true;
    default:
        return false;
    }
}

ox_value *ox_const_new(ox *x, int elem, int rank, const int64_t *shape) {
    ox_value *v = mcir_arena_alloc(x->a, sizeof *v);
    v->is_const = true;
    v->elem = elem;
    v->rank = rank;
    v->numel = 1;
    for (int i = 0; i < rank; i++) {
        v->shape[i] = shape[i];
        if (shape[i] < 0 || mcir_mul_overflows(v->numel, shape[i], &v->numel) ||
            v->numel > OX_MAX_CONST_ELEMS) {
            ox_error(x, "a constant of more than 2^28 elements is not supported");
            return NULL;
        }
    }
    size_t n = (size_t)(v->numel ? v->numel : 1);
    x->const_bytes += (int64_t)n * (ox_is_float(elem) ? 4 : 8);
    if (x->const_budget && x->const_bytes > x->const_budget) {
        ox_error(x, "import-time constants would take more than %lld bytes",
                 (long long)x->const_budget);
        return NULL;
    }
    if (ox_is_float(elem)) v->fv = mcir_arena_alloc(x->a, n * sizeof(float));
    else v->iv = mcir_arena_alloc(x->a, n * sizeof(int64_t));
    return v;
}

double ox_get(const ox_value *v, int64_t i) {
    return v->fv ? (double)v->fv[i] : (double)v->iv[i];
}

int64_t ox_geti(const ox_value *v, int64_t i) {
    if (v->iv) return v->iv[i];
    double f = v->fv[i];
    if (!(f == f)) return 0;
    if (f >= 9.2e18) return INT64_MAX;
    if (f <= -9.2e18) return INT64_MIN;
    return (int64_t)f;
}

static float round_to(int elem, double f) {
    switch (elem) {
    case OX_FLOAT16: return mcir_dtype_round(MCIR_DTYPE_F16, (float)f);
    case OX_BFLOAT16: return mcir_dtype_round(MCIR_DTYPE_BF16, (float)f);
    default: return (float)f;
    }
}

/* Wraps k to the width of an integer type, as a cast in C would. */
static int64_t wrap_int(int elem, int64_t k) {
    switch (elem) {
    case OX_BOOL: return k != 0;
    case OX_INT8: return (int8_t)k;
    case OX_UINT8: return (uint8_t)k;
    case OX_INT16: return (int16_t)k;
    case OX_UINT16: return (uint16_t)k;
    case OX_INT32: return (int32_t)k;
    case OX_UINT32: return (uint32_t)k;
    default: return k;
    }
}

void ox_set(ox_value *v, int64_t i, double f) {
    if (v->fv) {
        v->fv[i] = round_to(v->elem, f);
    } else if (v->elem == OX_BOOL) {
        v->iv[i] = f != 0;
    } else {
        int64_t k = !(f == f) ? 0 : f >= 9.2e18 ? INT64_MAX : f <= -9.2e18 ? INT64_MIN
                                                                             : (int64_t)f;
        v->iv[i] = wrap_int(v->elem, k);
    }
}

void ox_seti(ox_value *v, int64_t i, int64_t k) {
    if (v->fv) v->fv[i] = round_to(v->elem, (double)k);
    else v->iv[i] = wrap_int(v->elem, k);
}

void ox_copy_elem(ox_value *out, int64_t j, const ox_value *v, int64_t i) {
    if (out->fv) out->fv[j] = v->fv ? v->fv[i] : (float)v->iv[i];
    else out->iv[j] = v->iv ? v->iv[i] : ox_geti(v, i);
}

bool ox_ints_of(ox *x, const ox_value *v, const char *what, int64_t *out, int *count,
                int max) {
    if (!v->is_const)
        return ox_error(x, "%s '%s' must be known at import time (a constant or computed "
                           "from shapes), but it is a runtime tensor",
                        what, v->name);
    if (ox_is_float(v->elem) || v->rank > 1)
        return ox_error(x, "%s '%s' must be a 1-D integer tensor, got %s of rank %d",
                        what, v->name, ox_elem_name(v->elem), v->rank);
    if (v->numel > max)
        return ox_error(x, "%s '%s' has %lld values, at most %d supported", what, v->name,
                        (long long)v->numel, max);
    for (int64_t i = 0; i < v->numel; i++) out[i] = v->iv[i];
    *count = (int)v->numel;
    return true;
}

/* Index into v (broadcast to out shape [r, shape]) of the flat output
 * index j. */
static int64_t bcast_index(const ox_value *v, int r, const int64_t *shape, int64_t j) {
    int64_t idx = 0, stride = 1;
    for (int k = r - 1; k >= 0; k--) {
        int64_t c = j % shape[k];
        j /= shape[k];
        int kv = k - (r - v->rank);
        if (kv >= 0) {
            if (v->shape[kv] != 1) idx += c * stride;
            stride *= v->shape[kv];
        }
    }
    return idx;
}

/* ------------------------------------------------------- elementwise */

typedef enum { K_UNARY, K_BINARY, K_COMPARE, K_LOGIC, K_WHERE, K_VARIADIC } fold_kind;

static const struct {
    const char *op;
    fold_kind kind;
} fold_ops[] = {
    {"Neg", K_UNARY}, {"Abs", K_UNARY}, {"Sqrt", K_UNARY}, {"Reciprocal", K_UNARY},
    {"Exp", K_UNARY}, {"Log", K_UNARY}, {"Relu", K_UNARY}, {"Sigmoid", K_UNARY},
    {"Tanh", K_UNARY}, {"Erf", K_UNARY}, {"Floor", K_UNARY}, {"Ceil", K_UNARY},
    {"Cos", K_UNARY}, {"Sin", K_UNARY},
    {"Not", K_UNARY}, {"Sign", K_UNARY}, {"BitwiseNot", K_UNARY},
    {"Add", K_BINARY}, {"Sub", K_BINARY}, {"Mul", K_BINARY}, {"Div", K_BINARY},
    {"Pow", K_BINARY}, {"Mod", K_BINARY}, {"FMod", K_BINARY},
    {"BitwiseAnd", K_BINARY}, {"BitwiseOr", K_BINARY}, {"BitwiseXor", K_BINARY},
    {"BitShiftLeft", K_BINARY}, {"BitShiftRight", K_BINARY},
    {"Max", K_VARIADIC}, {"Min", K_VARIADIC}, {"Sum", K_VARIADIC},
    {"Equal", K_COMPARE}, {"Less", K_COMPARE}, {"Greater", K_COMPARE},
    {"LessOrEqual", K_COMPARE}, {"GreaterOrEqual", K_COMPARE},
    {"And", K_LOGIC}, {"Or", K_LOGIC}, {"Xor", K_LOGIC},
    {"Where", K_WHERE},
};

static double f_neg(double a) { return -a; }
static double f_not(double a) { return a == 0; }
static double f_sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }
static double f_sign(double a) { return (double)((a > 0) - (a < 0)); }
static double f_recip(double a) { return 1.0 / a; }
static double f_relu(double a) { return a > 0 ? a : 0; }

static const struct {
    const char *op;
    double (*fn)(double);
} unary_fns[] = {
    {"Neg", f_neg}, {"Not", f_not}, {"Abs", fabs}, {"Sqrt", sqrt}, {"Sigmoid", f_sigmoid},
    {"Sign", f_sign}, {"Reciprocal", f_recip}, {"Relu", f_relu}, {"Exp", exp},
    {"Erf", erf}, {"Log", log}, {"Tanh", tanh}, {"Floor", floor}, {"Ceil", ceil},
    {"Cos", cos}, {"Sin", sin},
};

static double unary_f(const char *op, double a) {
    for (size_t i = 0; i < sizeof unary_fns / sizeof unary_fns[0]; i++)
        if (!strcmp(unary_fns[i].op, op)) return unary_fns[i].fn(a);
    return NAN;
}

static int64_t unary_i(const char *op, int64_t a) {
    if (!strcmp(op, "Neg")) return (int64_t)(0 - (uint64_t)a);
    if (!strcmp(op, "Abs")) return a < 0 ? (int64_t)(0 - (uint64_t)a) : a;
    if (!strcmp(op, "Not")) return a == 0;
    if (!strcmp(op, "Relu")) return a > 0 ? a : 0;
    if (!strcmp(op, "Sign")) return (a > 0) - (a < 0);
    if (!strcmp(op, "BitwiseNot")) return ~a;   /* wrapped to the type by ox_seti */
    return a; /* Floor, Ceil: integers already */
}

static double binary_f(const char *op, double a, double b) {
    if (!strcmp(op, "Add") || !strcmp(op, "Sum")) return a + b;
    if (!strcmp(op, "Sub")) return a - b;
    if (!strcmp(op, "Mul")) return a * b;
    if (!strcmp(op, "Div")) return a / b;
    if (!strcmp(op, "Pow")) return pow(a, b);
    if (!strcmp(op, "Mod") || !strcmp(op, "FMod")) return fmod(a, b);
    if (!strcmp(op, "Max")) return a != a || b != b ? NAN : a > b ? a : b;
    if (!strcmp(op, "Min")) return a != a || b != b ? NAN : a < b ? a : b;
    if (!strcmp(op, "Equal")) return a == b;
    if (!strcmp(op, "Less")) return a < b;
    if (!strcmp(op, "Greater")) return a > b;
    if (!strcmp(op, "LessOrEqual")) return a <= b;
    if (!strcmp(op, "GreaterOrEqual")) return a >= b;
    if (!strcmp(op, "And")) return (a != 0) && (b != 0);
    if (!strcmp(op, "Or")) return (a != 0) || (b != 0);
    if (!strcmp(op, "Xor")) return (a != 0) != (b != 0);
    return NAN;
}

/* Integer arithmetic as ONNX's reference does it (C semantics: division
 * truncates; wrap-around instead of overflow), of values of type `elem`
 * (unsigned ones shift right logically). false: division by zero. */
static bool binary_i(const char *op, int elem, int64_t a, int64_t b, int64_t *r) {
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    int bits = elem == OX_UINT8 || elem == OX_INT8 ? 8 : elem == OX_UINT16 || elem == OX_INT16 ? 16
               : elem == OX_UINT32 || elem == OX_INT32 ? 32 : 64;
    bool is_unsigned = elem == OX_UINT8 || elem == OX_UINT16 || elem == OX_UINT32 || elem == OX_UINT64;
    if (!strcmp(op, "Add") || !strcmp(op, "Sum")) *r = (int64_t)(ua + ub);
    else if (!strcmp(op, "Sub")) *r = (int64_t)(ua - ub);
    else if (!strcmp(op, "Mul")) *r = (int64_t)(ua * ub);
    else if (!strcmp(op, "BitwiseAnd")) *r = a & b;
    else if (!strcmp(op, "BitwiseOr")) *r = a | b;
    else if (!strcmp(op, "BitwiseXor")) *r = a ^ b;
    else if (!strcmp(op, "BitShiftLeft")) *r = ub < (uint64_t)bits ? (int64_t)(ua << ub) : 0;
    else if (!strcmp(op, "BitShiftRight")) {
        if (ub >= (uint64_t)bits) *r = !is_unsigned && a < 0 ? -1 : 0;
        else if (is_unsigned) *r = (int64_t)(ua >> ub);
        else *r = a < 0 ? ~(~a >> ub) : a >> ub;
    } else if (!strcmp(op, "Div") || !strcmp(op, "Mod") || !strcmp(op, "FMod")) {
        if (b == 0) return false;
        if (a == INT64_MIN && b == -1) *r = op[0] == 'D' ? INT64_MIN : 0;
        else if (op[0] == 'D') *r = a / b;
        else {
            int64_t m = a % b; /* Mod (fmod=0) takes the sign of the divisor, FMod the dividend's */
            if (op[0] == 'M' && m != 0 && ((m < 0) != (b < 0))) m += b;
            *r = m;
        }
    } else if (!strcmp(op, "Pow")) {
        int64_t p = 1;
        for (int64_t k = 0; k < b && k < 64; k++) p = (int64_t)((uint64_t)p * ua);
        *r = b < 0 ? 0 : p;
    } else if (!strcmp(op, "Max")) *r = a > b ? a : b;
    else if (!strcmp(op, "Min")) *r = a < b ? a : b;
    else *r = (int64_t)binary_f(op, (double)a, (double)b);
    return true;
}

static bool compare_i(const char *op, int64_t a, int64_t b) {
    if (!strcmp(op, "Equal")) return a == b;
    if (!strcmp(op, "Less")) return a < b;
    if (!strcmp(op, "Greater")) return a > b;
    if (!strcmp(op, "LessOrEqual")) return a <= b;
    return a >= b;
}

static ox_value *fold_binary(ox *x, const char *op, fold_kind kind, const ox_value *A,
                             const ox_value *B) {
    int r;
    int64_t shape[MCIR_MAX_RANK];
    if (!mcir_broadcast_shape(A->rank, A->shape, B->rank, B->shape, &r, shape)) {
        ox_error(x, "operands '%s' and '%s' do not broadcast", A->name, B->name);
        return NULL;
    }
    bool fl = ox_is_float(A->elem) || ox_is_float(B->elem);
    int elem = kind == K_COMPARE || kind == K_LOGIC ? OX_BOOL : A->elem;
    if (!strcmp(op, "Pow")) elem = A->elem; /* Pow(T, T1) has T's type */
    ox_value *o = ox_const_new(x, elem, r, shape);
    if (!o) return NULL;
    for (int64_t j = 0; j < o->numel; j++) {
        int64_t ia = bcast_index(A, r, shape, j), ib = bcast_index(B, r, shape, j);
        if (fl) {
            ox_set(o, j, binary_f(op, ox_get(A, ia), ox_get(B, ib)));
        } else if (kind == K_COMPARE) {
            ox_seti(o, j, compare_i(op, A->iv[ia], B->iv[ib]));
        } else {
            int64_t v;
            if (!binary_i(op, A->elem, A->iv[ia], B->iv[ib], &v)) {
                ox_error(x, "integer division by zero in '%s'", B->name);
                return NULL;
            }
            ox_seti(o, j, v);
        }
    }
    return o;
}

ox_fold ox_fold_elementwise(ox *x, const char *op, ox_value *const *in, int n_in,
                            ox_value **out) {
    int k = 0, n = (int)(sizeof fold_ops / sizeof fold_ops[0]);
    while (k < n && strcmp(fold_ops[k].op, op) != 0) k++;
    if (k == n) return OX_FOLD_NONE;
    fold_kind kind = fold_ops[k].kind;
    if (kind == K_UNARY) {
        const ox_value *A = in[0];
        ox_value *o = ox_const_new(x, !strcmp(op, "Not") ? OX_BOOL : A->elem, A->rank,
                                   A->shape);
        if (!o) return OX_FOLD_ERROR;
        for (int64_t j = 0; j < o->numel; j++) {
            if (A->fv) ox_set(o, j, unary_f(op, A->fv[j]));
            else if (!strcmp(op, "Sqrt") || !strcmp(op, "Exp") || !strcmp(op, "Log") ||
                     !strcmp(op, "Reciprocal") || !strcmp(op, "Sigmoid") ||
                     !strcmp(op, "Tanh") || !strcmp(op, "Erf") || !strcmp(op, "Cos") ||
                     !strcmp(op, "Sin"))
                ox_set(o, j, unary_f(op, (double)A->iv[j]));
            else ox_seti(o, j, unary_i(op, A->iv[j]));
        }
        *out = o;
        return OX_FOLD_OK;
    }
    if (kind == K_WHERE) {
        const ox_value *C = in[0], *X = in[1], *Y = in[2];
        int r, r2;
        int64_t s[MCIR_MAX_RANK], s2[MCIR_MAX_RANK];
        if (!mcir_broadcast_shape(C->rank, C->shape, X->rank, X->shape, &r, s) ||
            !mcir_broadcast_shape(r, s, Y->rank, Y->shape, &r2, s2)) {
            ox_error(x, "condition and values do not broadcast");
            return OX_FOLD_ERROR;
        }
        ox_value *o = ox_const_new(x, X->elem, r2, s2);
        if (!o) return OX_FOLD_ERROR;
        for (int64_t j = 0; j < o->numel; j++) {
            bool c = ox_geti(C, bcast_index(C, r2, s2, j)) != 0;
            const ox_value *src = c ? X : Y;
            ox_copy_elem(o, j, src, bcast_index(src, r2, s2, j));
        }
        *out = o;
        return OX_FOLD_OK;
    }
    ox_value *acc = in[0];
    if (n_in < 2 && kind != K_VARIADIC) {
        ox_error(x, "%s needs two inputs", op);
        return OX_FOLD_ERROR;
    }
    if (n_in == 1) { /* variadic with one operand: a copy */
        *out = acc;
        return OX_FOLD_OK;
    }
    for (int i = 1; i < n_in; i++) {
        acc = fold_binary(x, op, kind, acc, in[i]);
        if (!acc) return OX_FOLD_ERROR;
    }
    *out = acc;
    return OX_FOLD_OK;
}

/* ------------------------------------------------------ data movement */

ox_value *ox_fold_cast(ox *x, const ox_value *v, int to) {
    ox_value *o = ox_const_new(x, to, v->rank, v->shape);
    if (!o) return NULL;
    for (int64_t j = 0; j < v->numel; j++) {
        if (v->fv) ox_set(o, j, v->fv[j]);
        else ox_seti(o, j, v->iv[j]);
    }
    return o;
}

ox_value *ox_fold_reshape(ox *x, const ox_value *v, int rank, const int64_t *shape) {
    ox_value *o = ox_const_new(x, v->elem, 0, NULL);
    if (!o) return NULL;
    o->rank = rank;
    if (rank > 0) memcpy(o->shape, shape, sizeof(int64_t) * (size_t)rank);
    o->numel = v->numel;
    o->iv = v->iv;
    o->fv = v->fv;
    return o;
}

ox_value *ox_fold_transpose(ox *x, const ox_value *v, const int64_t *perm) {
    int64_t shape[MCIR_MAX_RANK], in_stride[MCIR_MAX_RANK];
    int r = v->rank;
    for (int i = 0; i < r; i++) shape[i] = v->shape[perm[i]];
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) {
        in_stride[i] = s;
        s *= v->shape[i];
    }
    ox_value *o = ox_const_new(x, v->elem, r, shape);
    if (!o) return NULL;
    for (int64_t j = 0; j < o->numel; j++) {
        int64_t rem = j, idx = 0;
        for (int k = r - 1; k >= 0; k--) {
            idx += (rem % shape[k]) * in_stride[perm[k]];
            rem /= shape[k];
        }
        ox_copy_elem(o, j, v, idx);
    }
    return o;
}

ox_value *ox_fold_concat(ox *x, ox_value *const *in, int n_in, int axis) {
    int64_t shape[MCIR_MAX_RANK];
    const ox_value *A = in[0];
    memcpy(shape, A->shape, sizeof shape);
    shape[axis] = 0;
    for (int i = 0; i < n_in; i++) {
        if (in[i]->rank != A->rank) {
            ox_error(x, "inputs '%s' and '%s' differ in rank", A->name, in[i]->name);
            return NULL;
        }
        for (int k = 0; k < A->rank; k++)
            if (k != axis && in[i]->shape[k] != A->shape[k]) {
                ox_error(x, "inputs '%s' and '%s' differ in dim %d", A->name, in[i]->name,
                         k);
                return NULL;
            }
        shape[axis] += in[i]->shape[axis];
    }
    int elem = A->elem;
    for (int i = 0; i < n_in; i++)
        if (ox_is_float(in[i]->elem)) elem = in[i]->elem;
    ox_value *o = ox_const_new(x, elem, A->rank, shape);
    if (!o) return NULL;
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < axis; k++) outer *= shape[k];
    for (int k = axis + 1; k < A->rank; k++) inner *= shape[k];
    int64_t j = 0;
    for (int64_t p = 0; p < outer; p++)
        for (int i = 0; i < n_in; i++) {
            int64_t chunk = in[i]->shape[axis] * inner;
            for (int64_t q = 0; q < chunk; q++) ox_copy_elem(o, j++, in[i], p * chunk + q);
        }
    return o;
}

void ox_slice_bounds(int64_t dim, int64_t start, int64_t end, int64_t step,
                     int64_t *first, int64_t *len) {
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (step > 0) {
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        *first = start;
        *len = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
        start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
        end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
        *first = start;
        uint64_t s = (uint64_t)0 - (uint64_t)step;
        *len = start > end ? (int64_t)((uint64_t)(start - end - 1) / s) + 1 : 0;
    }
}

ox_value *ox_fold_slice(ox *x, const ox_value *v, int axis, int64_t first, int64_t step,
                        int64_t len) {
    int64_t shape[MCIR_MAX_RANK];
    memcpy(shape, v->shape, sizeof shape);
    shape[axis] = len;
    ox_value *o = ox_const_new(x, v->elem, v->rank, shape);
    if (!o) return NULL;
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < axis; k++) outer *= shape[k];
    for (int k = axis + 1; k < v->rank; k++) inner *= shape[k];
    int64_t j = 0, dim = v->shape[axis];
    for (int64_t p = 0; p < outer; p++)
        for (int64_t i = 0; i < len; i++)
            for (int64_t q = 0; q < inner; q++)
                ox_copy_elem(o, j++, v, (p * dim + first + i * step) * inner + q);
    return o;
}

ox_value *ox_fold_gather(ox *x, const ox_value *data, const ox_value *idx, int axis) {
    int64_t shape[MCIR_MAX_RANK];
    int r = 0;
    if (data->rank - 1 + idx->rank > MCIR_MAX_RANK) {
        ox_error(x, "result rank exceeds %d", MCIR_MAX_RANK);
        return NULL;
    }
    for (int k = 0; k < axis; k++) shape[r++] = data->shape[k];
    for (int k = 0; k < idx->rank; k++) shape[r++] = idx->shape[k];
    for (int k = axis + 1; k < data->rank; k++) shape[r++] = data->shape[k];
    ox_value *o = ox_const_new(x, data->elem, r, shape);
    if (!o) return NULL;
    int64_t outer = 1, inner = 1, dim = data->shape[axis];
    for (int k = 0; k < axis; k++) outer *= data->shape[k];
    for (int k = axis + 1; k < data->rank; k++) inner *= data->shape[k];
    int64_t j = 0;
    for (int64_t p = 0; p < outer; p++)
        for (int64_t i = 0; i < idx->numel; i++) {
            int64_t t = idx->iv[i];
            if (t < 0) t += dim;
            if (t < 0 || t >= dim) {
                ox_error(x, "index %lld is out of range for axis %d of size %lld",
                         (long long)idx->iv[i], axis, (long long)dim);
                return NULL;
            }
            for (int64_t q = 0; q < inner; q++)
                ox_copy_elem(o, j++, data, (p * dim + t) * inner + q);
        }
    return o;
}

ox_value *ox_fold_expand(ox *x, const ox_value *v, int rank, const int64_t *shape) {
    ox_value *o = ox_const_new(x, v->elem, rank, shape);
    if (!o) return NULL;
    for (int64_t j = 0; j < o->numel; j++) ox_copy_elem(o, j, v, bcast_index(v, rank, shape, j));
    return o;
}
