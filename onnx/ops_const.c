/*
 * ops_const.c — the ONNX ops whose output the importer knows at import
 * time: Constant, ConstantOfShape and EyeLike (from attributes and input
 * shapes), Shape and Size (from the input's shape, whatever its values),
 * Range (from constant bounds).
 *
 * Invariant: none of them reads a runtime tensor's values, and each defines
 * its output as a constant; the one exception is an integer Range while
 * probing a symbolic dimension (symbolic.c), which stays a runtime arange
 * so that its end may follow the dimension.
 */
#include <math.h>
#include <string.h>

#include "onnx-impl.h"

bool ox_import_constant(ox *x, ox_value **in, int n_in) {
    (void)in, (void)n_in;
    const Onnx__AttributeProto *a;
    ox_value *v = NULL;
    int64_t ints[1 << 12];
    if ((a = ox_attr_get(x, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR))) {
        v = ox_tensor_value(x, a->t, "attribute 'value'");
    } else if ((a = ox_attr_get(x, "value_float", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT))) {
        v = ox_const_new(x, OX_FLOAT, 0, NULL);
        if (v) v->fv[0] = a->f;
    } else if ((a = ox_attr_get(x, "value_int", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT))) {
        v = ox_const_new(x, OX_INT64, 0, NULL);
        if (v) v->iv[0] = a->i;
    } else if ((a = ox_attr_get(x, "value_floats", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS))) {
        int64_t n = (int64_t)a->n_floats;
        v = ox_const_new(x, OX_FLOAT, 1, &n);
        for (int64_t i = 0; v && i < n; i++) v->fv[i] = a->floats[i];
    } else {
        int n = ox_attr_ints(x, "value_ints", ints, 1 << 12);
        if (n >= 0) {
            int64_t nn = n;
            v = ox_const_new(x, OX_INT64, 1, &nn);
            for (int i = 0; v && i < n; i++) v->iv[i] = ints[i];
        } else if (!x->failed) {
            return ox_error(x, "Constant needs one of value, value_float(s), value_int(s) "
                               "(sparse and string constants are not supported)");
        }
    }
    return v && ox_define_out(x, 0, v);
}

bool ox_import_shape(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    int64_t r = in[0]->rank;
    int64_t start = ox_attr_int(x, "start", 0), end = ox_attr_int(x, "end", r);
    if (x->failed) return false;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t n = end > start ? end - start : 0;
    ox_value *o = ox_const_new(x, OX_INT64, 1, &n);
    if (!o) return false;
    for (int64_t i = 0; i < n; i++) o->iv[i] = in[0]->shape[start + i];
    return ox_define_out(x, 0, o);
}

bool ox_import_size(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_value *o = ox_const_new(x, OX_INT64, 0, NULL);
    if (!o) return false;
    o->iv[0] = in[0]->numel;
    return ox_define_out(x, 0, o);
}

bool ox_import_constant_of_shape(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    int64_t shape[MCIR_MAX_RANK];
    int r;
    const Onnx__AttributeProto *a =
        ox_attr_get(x, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    if (x->failed || !ox_ints_of(x, in[0], "shape", shape, &r, MCIR_MAX_RANK)) return false;
    ox_value *fill = NULL;
    if (a) {
        fill = ox_tensor_value(x, a->t, "attribute 'value'");
        if (!fill) return false;
        if (fill->numel != 1) return ox_error(x, "attribute 'value' must have one element");
    }
    ox_value *o = ox_const_new(x, fill ? fill->elem : OX_FLOAT, r, shape);
    if (!o) return false;
    for (int64_t i = 0; i < o->numel; i++) {
        if (fill) ox_copy_elem(o, i, fill, 0);
        else o->fv[i] = 0;
    }
    return ox_define_out(x, 0, o);
}

bool ox_import_range(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    for (int i = 0; i < 3; i++)
        if (!in[i]->is_const || in[i]->numel != 1)
            return ox_error(x, "start, limit and delta must be scalar constants");
    int64_t n;
    if (ox_is_float(in[0]->elem)) {
        double s = ox_get(in[0], 0), l = ox_get(in[1], 0), dl = ox_get(in[2], 0);
        double c = ceil((l - s) / dl);
        if (!(c == c) || dl == 0 || c > 1e9) return ox_error(x, "bad range");
        n = c > 0 ? (int64_t)c : 0;
        ox_value *o = ox_const_new(x, in[0]->elem, 1, &n);
        if (!o) return false;
        for (int64_t i = 0; i < n; i++) ox_set(o, i, s + (double)i * dl);
        return ox_define_out(x, 0, o);
    }
    int64_t s = ox_geti(in[0], 0), l = ox_geti(in[1], 0), dl = ox_geti(in[2], 0);
    if (dl == 0) return ox_error(x, "delta is 0");
    mcir_dtype dt;
    if (x->probing && dl == 1 && l > s && ox_elem_dtype(in[0]->elem, &dt)) {
        /* probing a symbolic dimension (symbolic.c): positions arange(0, T)
         * stay a runtime arange, whose end may then follow the dimension */
        mcir_node *ar = ox_emit1(x, MCIR_OP_ARANGE, 0, NULL, 0);
        mcir_node_set_int(x->g, ar, "start", s);
        mcir_node_set_int(x->g, ar, "end", l);
        mcir_node_set_string(x->g, ar, "dtype", mcir_dtype_name(dt));
        return ox_define_rt(x, 0, ox_done(x, ar));
    }
    double c = ceil(((double)l - (double)s) / (double)dl);
    if (c > 1e9) return ox_error(x, "range of %g elements is too large", c);
    n = c > 0 ? (int64_t)c : 0;
    ox_value *o = ox_const_new(x, in[0]->elem, 1, &n);
    if (!o) return false;
    for (int64_t i = 0; i < n; i++) o->iv[i] = (int64_t)((uint64_t)s + (uint64_t)i * (uint64_t)dl);
    return ox_define_out(x, 0, o);
}

/* EyeLike: a constant (only the input's shape is read). */
bool ox_import_eye_like(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    ox_value *X = in[0];
    int64_t k = ox_attr_int(x, "k", 0);
    int elem = (int)ox_attr_int(x, "dtype", X->elem);
    if (x->failed) return false;
    if (X->rank != 2) return ox_error(x, "EyeLike needs a rank-2 input, '%s' has rank %d", X->name, X->rank);
    if (!ox_elem_supported(elem)) return ox_error(x, "dtype %s is not supported", ox_elem_name(elem));
    ox_value *o = ox_const_new(x, elem, 2, X->shape);
    if (!o) return false;
    for (int64_t i = 0; i < X->shape[0]; i++)
        for (int64_t j = 0; j < X->shape[1]; j++) {
            if (ox_is_float(elem)) ox_set(o, i * X->shape[1] + j, j - i == k);
            else ox_seti(o, i * X->shape[1] + j, j - i == k);
        }
    return ox_define_out(x, 0, o);
}
