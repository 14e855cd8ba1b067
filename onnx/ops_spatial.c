/*
 * ops_spatial.c — the ONNX ops over the spatial axes of images: Conv,
 * MaxPool, AveragePool and GlobalAveragePool (MCIR's conv2d and pools),
 * ConvTranspose (zero insertion as constant matmuls, then a conv2d with
 * the flipped kernel) and Resize / Upsample (one matmul per resized axis
 * by its interpolation matrix, as ONNX's reference computes it).
 *
 * Invariant: Conv, ConvTranspose and the pools take N, C and one or two
 * spatial axes (GlobalAveragePool: two); a 1-D one runs as 2-D with a unit
 * height and its output comes back to rank 3, and auto_pad and ceil_mode
 * are resolved into explicit pads before a node is emitted.
 */
#include <math.h>
#include <string.h>

#include "onnx-impl.h"

/* Window attributes shared by Conv and the pools: kernel, strides, pads
 * (top, left, bottom, right), dilations, with auto_pad and ceil_mode
 * resolved into explicit pads. */
typedef struct window {
    int64_t kernel[2], strides[2], pads[4], dil[2];
} window;

static bool window_attrs(ox *x, int nsp, const int64_t *in_hw, const int64_t *kernel_hw,
                         window *w, bool pool) {
    int64_t buf[8];
    char ap[32];
    int n, off = 2 - nsp; /* a 1-D window is the second dim of a 2-D one */
    const char *auto_pad = ox_attr_str(x, "auto_pad", "NOTSET", ap, sizeof ap);
    w->kernel[0] = w->kernel[1] = 1;
    w->strides[0] = w->strides[1] = 1;
    w->dil[0] = w->dil[1] = 1;
    memset(w->pads, 0, sizeof w->pads);
    if ((n = ox_attr_ints(x, "kernel_shape", buf, 8)) >= 0) {
        if (n != nsp) return ox_error(x, "kernel_shape has %d dims for %d-D data", n, nsp);
        for (int k = 0; k < nsp; k++) {
            if (kernel_hw && buf[k] != kernel_hw[off + k])
                return ox_error(x, "kernel_shape does not match the weight");
            w->kernel[off + k] = buf[k];
        }
    } else if (kernel_hw) {
        w->kernel[0] = kernel_hw[0], w->kernel[1] = kernel_hw[1];
    } else if (!x->failed) {
        return ox_error(x, "missing attribute 'kernel_shape'");
    }
    if ((n = ox_attr_ints(x, "strides", buf, 8)) >= 0) {
        if (n != nsp) return ox_error(x, "strides must have %d values", nsp);
        for (int k = 0; k < nsp; k++) w->strides[off + k] = buf[k];
    }
    if ((n = ox_attr_ints(x, "dilations", buf, 8)) >= 0) {
        if (n != nsp) return ox_error(x, "dilations must have %d values", nsp);
        for (int k = 0; k < nsp; k++) {
            w->dil[off + k] = buf[k];
            if (pool && buf[k] != 1) return ox_error(x, "dilated pooling is not supported");
        }
    }
    if ((n = ox_attr_ints(x, "pads", buf, 8)) >= 0) {
        if (n != 2 * nsp) return ox_error(x, "pads must have %d values", 2 * nsp);
        for (int k = 0; k < nsp; k++) {
            w->pads[off + k] = buf[k];
            w->pads[off + k + 2] = buf[nsp + k];
        }
    }
    if (x->failed) return false;
    for (int k = 0; k < 4; k++)
        if (w->pads[k] < 0 || w->pads[k] > (1 << 30) || (k < 2 && (w->strides[k] > (1 << 30) ||
                                                                  w->dil[k] > (1 << 30) ||
                                                                  w->kernel[k] > (1 << 30))))
            return ox_error(x, "pads, kernel, strides or dilations are negative or too large");
    for (int k = 0; k < 2; k++)
        if (w->strides[k] < 1 || w->dil[k] < 1 || w->kernel[k] < 1)
            return ox_error(x, "kernel, strides and dilations must be >= 1");
    if (strcmp(auto_pad, "NOTSET") != 0) {
        bool valid = !strcmp(auto_pad, "VALID"), upper = !strcmp(auto_pad, "SAME_UPPER");
        if (!valid && !upper && strcmp(auto_pad, "SAME_LOWER") != 0)
            return ox_error(x, "auto_pad \"%s\" is not supported", auto_pad);
        for (int k = 0; k < 2; k++) {
            int64_t total = 0;
            if (!valid) {
                int64_t out = (in_hw[k] + w->strides[k] - 1) / w->strides[k];
                total = (out - 1) * w->strides[k] + (w->kernel[k] - 1) * w->dil[k] + 1 - in_hw[k];
                if (total < 0) total = 0;
            }
            int64_t small = total / 2;
            w->pads[k] = upper ? small : total - small;
            w->pads[k + 2] = total - w->pads[k];
        }
    }
    return true;
}

/* ceil_mode: grow the end pads so that floor division gives the ceil
 * output size (a last window must start inside the input or the begin
 * padding, as ONNX and PyTorch define it). */
static void ceil_pads(window *w, const int64_t *in_hw) {
    for (int k = 0; k < 2; k++) {
        int64_t span = in_hw[k] + w->pads[k] + w->pads[k + 2] - w->kernel[k];
        if (span < 0) continue;
        int64_t out = (span + w->strides[k] - 1) / w->strides[k] + 1;
        if ((out - 1) * w->strides[k] >= in_hw[k] + w->pads[k]) out--;
        int64_t need = (out - 1) * w->strides[k] + w->kernel[k] - (in_hw[k] + w->pads[k] + w->pads[k + 2]);
        if (need > 0) w->pads[k + 2] += need;
    }
}

/* Spatial dims of a window op's input: 2 (NCHW) or 1 (NCL, run as NC1L). */
static bool spatial_dims(ox *x, const ox_value *X, int *nsp, int64_t *in_hw) {
    if (X->rank != 4 && X->rank != 3)
        return ox_error(x, "input '%s' has rank %d; only 1-D (NCL) and 2-D (NCHW) windows "
                           "are supported",
                        X->name, X->rank);
    *nsp = X->rank - 2;
    in_hw[0] = X->rank == 4 ? X->shape[2] : 1;
    in_hw[1] = X->shape[X->rank - 1];
    return true;
}

/* v as rank 4 with a unit dim inserted at 2 (1-D windows). */
static mcir_tensor *as_4d(ox *x, ox_value *v, mcir_dtype dt) {
    mcir_tensor *t = ox_runtime(x, v, dt);
    if (!t || t->rank == 4) return t;
    int64_t shape[4] = {t->shape[0], t->shape[1], 1, t->shape[2]};
    mcir_node *n = ox_emit1(x, MCIR_OP_RESHAPE, 1, &t, -1);
    mcir_node_set_ints(x->g, n, "shape", 4, shape);
    return ox_done(x, n);
}

/* The output of a window op run in 4-D, back to 1-D where the input was. */
static bool define_window_out(ox *x, mcir_tensor *t, int nsp) {
    if (!t) return false;
    if (nsp == 2) return ox_define_rt(x, 0, t);
    int64_t shape[3] = {t->shape[0], t->shape[1], t->shape[3]};
    return ox_reshape_to(x, ox_runtime_value(x, t), 3, shape, 0);
}

bool ox_import_conv(ox *x, ox_value **in, int n_in) {
    ox_value *X = in[0], *W = in[1];
    int64_t group = ox_attr_int(x, "group", 1), in_hw[2], k_hw[2];
    int nsp = 2;
    if (x->failed || !spatial_dims(x, X, &nsp, in_hw)) return false;
    if (W->rank != X->rank) return ox_error(x, "weight '%s' must have rank %d", W->name, X->rank);
    k_hw[0] = nsp == 2 ? W->shape[2] : 1;
    k_hw[1] = W->shape[W->rank - 1];
    window w;
    if (!window_attrs(x, nsp, in_hw, k_hw, &w, false)) return false;
    mcir_dtype dt = ox_node_dtype(in, n_in);
    mcir_tensor *ins[3] = {as_4d(x, X, dt), as_4d(x, W, dt), NULL};
    if (!ins[0] || !ins[1]) return false;
    int k = 2;
    if (n_in > 2 && in[2] && !(ins[k++] = ox_runtime(x, in[2], dt))) return false;
    mcir_node *n = ox_emit1(x, MCIR_OP_CONV2D, k, ins, nsp == 2 ? 0 : -1);
    mcir_node_set_ints(x->g, n, "strides", 2, w.strides);
    mcir_node_set_ints(x->g, n, "pads", 4, w.pads);
    mcir_node_set_ints(x->g, n, "dilations", 2, w.dil);
    mcir_node_set_int(x->g, n, "groups", group);
    return define_window_out(x, ox_done(x, n), nsp);
}

/* count_include_pad=1: MCIR's avg_pool2d divides by the cells inside the
 * input; the ONNX divisor also counts the explicit padding. The ratio is a
 * constant per output position, applied by a mul. */
static ox_value *include_pad_ratio(ox *x, const window *w, const window *orig,
                                   const int64_t *in_hw, const int64_t *out_hw,
                                   mcir_dtype dt) {
    int64_t shape[4] = {1, 1, out_hw[0], out_hw[1]};
    ox_value *r = ox_new_float_const(x, "avg_pool_include_pad", dt, 4, shape);
    if (!r) return NULL;
    for (int64_t i = 0; i < out_hw[0]; i++)
        for (int64_t j = 0; j < out_hw[1]; j++) {
            double ratio = 1;
            for (int k = 0; k < 2; k++) {
                int64_t o = k ? j : i, lo = o * w->strides[k] - w->pads[k];
                int64_t valid = 0, counted = 0;
                for (int64_t p = lo; p < lo + w->kernel[k]; p++) {
                    valid += p >= 0 && p < in_hw[k];
                    counted += p >= -orig->pads[k] && p < in_hw[k] + orig->pads[k + 2];
                }
                ratio *= (double)valid / (double)(counted ? counted : 1);
            }
            r->fv[i * out_hw[1] + j] = (float)ratio;
        }
    return r;
}

bool ox_import_pool(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    bool is_max = !strcmp(x->node->op_type, "MaxPool");
    ox_value *X = in[0];
    int64_t ceil_mode = ox_attr_int(x, "ceil_mode", 0), in_hw[2];
    int64_t storage = is_max ? ox_attr_int(x, "storage_order", 0) : 0;
    int64_t include_pad = is_max ? 0 : ox_attr_int(x, "count_include_pad", 0);
    int nsp = 2;
    if (x->failed || !spatial_dims(x, X, &nsp, in_hw) || !ox_only_first_output(x)) return false;
    window w;
    if (!window_attrs(x, nsp, in_hw, NULL, &w, true)) return false;
    if (storage) return ox_error(x, "storage_order 1 is not supported");
    window orig = w;
    if (ceil_mode) ceil_pads(&w, in_hw);
    mcir_dtype dt = ox_node_dtype(in, 1);
    mcir_tensor *t = as_4d(x, X, dt);
    if (!t) return false;
    bool scale = include_pad && memcmp(orig.pads, (int64_t[4]){0, 0, 0, 0}, sizeof orig.pads);
    mcir_node *n = ox_emit1(x, is_max ? MCIR_OP_MAX_POOL2D : MCIR_OP_AVG_POOL2D, 1, &t,
                            nsp == 2 && !scale ? 0 : -1);
    mcir_node_set_ints(x->g, n, "kernel", 2, w.kernel);
    mcir_node_set_ints(x->g, n, "strides", 2, w.strides);
    mcir_node_set_ints(x->g, n, "pads", 4, w.pads);
    mcir_tensor *y = ox_done(x, n);
    if (y && scale) {
        ox_value *r = include_pad_ratio(x, &w, &orig, in_hw, y->shape + 2, dt);
        if (!r) return false;
        mcir_tensor *ins[2] = {y, ox_runtime(x, r, dt)};
        y = ox_done(x, ox_emit1(x, MCIR_OP_MUL, 2, ins, nsp == 2 ? 0 : -1));
    }
    return define_window_out(x, y, nsp);
}

bool ox_import_global_avg_pool(ox *x, ox_value **in, int n_in) {
    (void)n_in;
    if (in[0]->rank != 4)
        return ox_error(x, "input '%s' has rank %d; only NCHW (rank 4) is supported",
                        in[0]->name, in[0]->rank);
    mcir_tensor *t = ox_runtime(x, in[0], ox_node_dtype(in, 1));
    if (!t) return false;
    return ox_define_rt(x, 0, ox_done(x, ox_emit1(x, MCIR_OP_GLOBAL_AVG_POOL, 1, &t, 0)));
}

static bool is_identity_matrix(const double *A, int64_t out, int64_t in_len) {
    if (out != in_len) return false;
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in_len; i++)
            if (A[o * in_len + i] != (o == i)) return false;
    return true;
}

enum { RS_NEAREST, RS_LINEAR, RS_CUBIC };
enum { CT_HALF_PIXEL, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC,
       CT_HALF_PIXEL_SYMMETRIC };
enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL };

typedef struct resize_mode {
    int mode, ct, nearest;
    double cubic_a;
    bool exclude_outside, antialias;
} resize_mode;

#define RS_MAX_TAPS 64

/* The interpolation matrix [out, in] of one axis, as ONNX's reference
 * computes it (onnx/reference/ops/op_resize.py: the source coordinate, the
 * n taps nearest to it in the edge-padded input, their coefficients). */
static bool resize_matrix(const resize_mode *rm, double scale, int64_t in_len, int64_t out,
                          double *A) {
    /* antialias (downsampling): a kernel stretched by 1/scale, normalised */
    double s_aa = scale > 1 ? 1 : scale;
    int64_t start = rm->mode == RS_CUBIC ? -1 : 0;
    if (rm->antialias) start = (int64_t)floor((rm->mode == RS_CUBIC ? -2 : -1) / s_aa) + 1;
    if (2 - 2 * start > RS_MAX_TAPS) return false;
    int n = (int)(2 - 2 * start), pad = (n + 1) / 2;
    int64_t padded = in_len + 2 * pad;
    double out_w = scale * (double)in_len;
    memset(A, 0, sizeof(double) * (size_t)(out * in_len));
    for (int64_t o = 0; o < out; o++) {
        double xr = (double)o, xo;
        switch (rm->ct) {
        case CT_ALIGN_CORNERS: xo = out_w == 1 ? 0 : xr * (double)(in_len - 1) / (out_w - 1); break;
        case CT_ASYMMETRIC: xo = xr / scale; break;
        case CT_HALF_PIXEL_SYMMETRIC: {
            double center = (double)in_len / 2, adjust = (double)out / out_w;
            xo = center * (1 - adjust) + (xr + 0.5) / scale - 0.5;
            break;
        }
        case CT_PYTORCH_HALF_PIXEL: xo = out_w == 1 ? -0.5 : (xr + 0.5) / scale - 0.5; break;
        default: xo = (xr + 0.5) / scale - 0.5; break;
        }
        double ratio = xo == floor(xo) ? 1.0 : xo - floor(xo), c[RS_MAX_TAPS];
        if (rm->antialias) {
            double a = rm->cubic_a, sum = 0;
            for (int i = 0; i < n; i++) {
                double t = fabs(s_aa * ((double)(start + i) - ratio));
                if (rm->mode == RS_LINEAR) c[i] = t < 1 ? 1 - t : 0;
                else c[i] = t <= 1 ? ((a + 2) * t - (a + 3)) * t * t + 1
                          : t < 2 ? ((a * t - 5 * a) * t + 8 * a) * t - 4 * a : 0;
                sum += c[i];
            }
            for (int i = 0; i < n; i++) c[i] /= sum;
        } else if (rm->mode == RS_NEAREST) {
            bool right = ratio == 1.0;
            if (!right) switch (rm->nearest) {
                case NM_ROUND_PREFER_CEIL: right = ratio >= 0.5; break;
                case NM_FLOOR: right = false; break;
                case NM_CEIL: right = true; break;
                default: right = ratio > 0.5; break;
                }
            c[0] = !right, c[1] = right;
        } else if (rm->mode == RS_LINEAR) {
            c[0] = 1 - ratio, c[1] = ratio;
        } else {
            double a = rm->cubic_a, r = ratio, s = 1 - ratio;
            c[0] = ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a;
            c[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
            c[2] = ((a + 2) * s - (a + 3)) * s * s + 1;
            c[3] = ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a;
        }
        /* the n padded positions nearest to xo + pad (ties: the lower) */
        double xp = xo + pad;
        int64_t idx[RS_MAX_TAPS];
        int k = 0;
        for (int64_t p = 0; p < padded; p++) {
            double dp = fabs(xp - (double)p);
            int j = k < n ? k++ : n;
            if (j == n) {
                if (dp >= fabs(xp - (double)idx[n - 1])) continue;
                j = n - 1;
            }
            while (j > 0 && fabs(xp - (double)idx[j - 1]) > dp) idx[j] = idx[j - 1], j--;
            idx[j] = p;
        }
        for (int i = 1; i < n; i++) /* ascending positions */
            for (int j = i; j > 0 && idx[j - 1] > idx[j]; j--) {
                int64_t tmp = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = tmp;
            }
        double sum = 0;
        for (int i = 0; i < n; i++) {
            int64_t src = idx[i] - pad;
            if (rm->exclude_outside && (src < 0 || src >= in_len)) c[i] = 0;
            sum += c[i];
        }
        for (int i = 0; i < n; i++) {
            int64_t src = idx[i] - pad;
            src = src < 0 ? 0 : src >= in_len ? in_len - 1 : src;
            A[o * in_len + src] += rm->exclude_outside && sum != 0 ? c[i] / sum : c[i];
        }
    }
    return true;
}

static int pick(const char *s, const char *const *names) {
    for (int i = 0; names[i]; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

/* Resize (opset >= 10) and Upsample: separable; each axis whose matrix is
 * not the identity is one matmul by its interpolation matrix. */
bool ox_import_resize(ox *x, ox_value **in, int n_in) {
    static const char *const modes[] = {"nearest", "linear", "cubic", NULL};
    static const char *const cts[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                      "asymmetric", "half_pixel_symmetric", NULL};
    static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                      "ceil", NULL};
    bool old = x->opset < 11 || !strcmp(x->node->op_type, "Upsample");
    char b1[32], b2[32], b3[32], b4[32];
    resize_mode rm = {0};
    rm.mode = pick(ox_attr_str(x, "mode", "nearest", b1, sizeof b1), modes);
    const char *ct = old ? "asymmetric" : ox_attr_str(x, "coordinate_transformation_mode",
                                                      "half_pixel", b2, sizeof b2);
    rm.ct = pick(ct, cts);
    rm.nearest = old ? NM_FLOOR : pick(ox_attr_str(x, "nearest_mode", "round_prefer_floor", b3,
                                                   sizeof b3), nms);
    rm.cubic_a = old ? -0.75 : ox_attr_float(x, "cubic_coeff_a", -0.75f);
    rm.exclude_outside = old ? false : ox_attr_int(x, "exclude_outside", 0) != 0;
    if (!old) ox_attr_float(x, "extrapolation_value", 0.0f); /* tf_crop_and_resize only */
    rm.antialias = x->opset >= 18 && ox_attr_int(x, "antialias", 0) != 0;
    const char *policy = x->opset >= 18 ? ox_attr_str(x, "keep_aspect_ratio_policy", "stretch",
                                                    b4, sizeof b4) : "stretch";
    int64_t axes[MCIR_MAX_RANK];
    int na = x->opset >= 18 ? ox_attr_ints(x, "axes", axes, MCIR_MAX_RANK) : -1;
    if (x->failed) return false;
    if (rm.mode < 0) return ox_error(x, "mode \"%s\" is not supported", b1);
    if (rm.ct < 0) return ox_error(x, "coordinate_transformation_mode \"%s\" is not supported", ct);
    if (rm.nearest < 0) return ox_error(x, "nearest_mode \"%s\" is not supported", b3);
    if (rm.antialias && rm.mode == RS_NEAREST)
        return ox_error(x, "antialias 1 is not supported with mode \"nearest\"");
    int keep_ratio = !strcmp(policy, "not_larger") ? 1 : !strcmp(policy, "not_smaller") ? 2 : 0;
    if (!keep_ratio && strcmp(policy, "stretch") != 0)
        return ox_error(x, "keep_aspect_ratio_policy \"%s\" is not supported", policy);
    ox_value *X = in[0], *scales = NULL, *sizes = NULL;
    if (old) scales = n_in > 1 ? in[1] : NULL;
    else scales = n_in > 2 ? in[2] : NULL, sizes = n_in > 3 ? in[3] : NULL;
    if (scales && scales->numel == 0) scales = NULL;
    if (sizes && sizes->numel == 0) sizes = NULL;
    if (!scales == !sizes) return ox_error(x, "exactly one of scales and sizes must be given");
    ox_value *given = scales ? scales : sizes;
    if (!given->is_const) return ox_error(x, "scales and sizes must be constants");
    int n_ax = na >= 0 ? na : X->rank;
    if (given->numel != n_ax)
        return ox_error(x, "%s has %lld values for %d axes", scales ? "scales" : "sizes",
                        (long long)given->numel, n_ax);
    double sc[MCIR_MAX_RANK];
    int64_t out[MCIR_MAX_RANK];
    for (int k = 0; k < X->rank; k++) sc[k] = 1, out[k] = X->shape[k];
    for (int i = 0; i < n_ax; i++) {
        int a;
        if (!ox_norm_axis(x, na >= 0 ? axes[i] : i, X->rank, "axis", &a)) return false;
        if (scales) {
            sc[a] = ox_get(scales, i);
            if (!(sc[a] > 0) || sc[a] > 1e6) return ox_error(x, "scale %g is not supported", sc[a]);
            out[a] = (int64_t)(sc[a] * (double)X->shape[a]);
        } else {
            out[a] = ox_geti(sizes, i);
            if (out[a] < 1 || out[a] > (1 << 24))
                return ox_error(x, "size %lld is not supported", (long long)out[a]);
            sc[a] = (double)out[a] / (double)X->shape[a];
        }
        if (out[a] < 1) return ox_error(x, "axis %d would have size 0", a);
    }
    if (sizes && keep_ratio) { /* one scale for the given axes: the smallest or largest */
        double keep = keep_ratio == 1 ? INFINITY : 0;
        int ax_of[MCIR_MAX_RANK];
        for (int i = 0; i < n_ax; i++) {
            ox_norm_axis(x, na >= 0 ? axes[i] : i, X->rank, "axis", &ax_of[i]);
            double s = sc[ax_of[i]];
            keep = keep_ratio == 1 ? (s < keep ? s : keep) : (s > keep ? s : keep);
        }
        for (int i = 0; i < n_ax; i++) {
            sc[ax_of[i]] = keep;
            out[ax_of[i]] = (int64_t)(keep * (double)X->shape[ax_of[i]] + 0.5);
            if (out[ax_of[i]] < 1) return ox_error(x, "axis %d would have size 0", ax_of[i]);
        }
    }
    ox_value *v = X;
    int lastax = -1;
    double *mats[MCIR_MAX_RANK] = {0};
    for (int a = 0; a < X->rank; a++) {
        if (out[a] * X->shape[a] > ((int64_t)1 << 24))
            return ox_error(x, "axis %d is too large for an interpolation matrix", a);
        mats[a] = mcir_arena_alloc(x->a, sizeof(double) * (size_t)(out[a] * X->shape[a]));
        if (!resize_matrix(&rm, sc[a], X->shape[a], out[a], mats[a]))
            return ox_error(x, "antialias over axis %d (scale %g) needs more than %d taps", a,
                            sc[a], RS_MAX_TAPS);
        if (!is_identity_matrix(mats[a], out[a], X->shape[a])) lastax = a;
    }
    if (lastax < 0) return ox_define_out(x, 0, X);
    for (int a = 0; a <= lastax; a++)
        if (!is_identity_matrix(mats[a], out[a], X->shape[a]) &&
            !(v = ox_axis_matrix(x, v, a, mats[a], out[a], X->shape[a], "resize_weights",
                              a == lastax ? 0 : -1)))
            return false;
    return ox_define_out(x, 0, v);
}

/* ConvTranspose (2-D, and 1-D as 2-D): the input, with stride-1 zeros
 * inserted and padded by d·(k-1) - pads (negative: cropped) plus
 * output_padding, is one matmul per spatial axis by a constant 0/1
 * matrix; a stride-1 conv2d with the flipped, transposed kernel follows. */
bool ox_import_conv_transpose(ox *x, ox_value **in, int n_in) {
    ox_value *X = in[0], *W = in[1];
    char apb[32];
    const char *auto_pad = ox_attr_str(x, "auto_pad", "NOTSET", apb, sizeof apb);
    int64_t group = ox_attr_int(x, "group", 1), buf[8], in_hw[2];
    int64_t kernel[2], strides[2] = {1, 1}, dil[2] = {1, 1}, pads[4] = {0}, opad[2] = {0},
            oshape[2];
    int nsp = 2, n;
    bool has_oshape = false;
    if (x->failed || !spatial_dims(x, X, &nsp, in_hw)) return false;
    int off = 2 - nsp;
    if (W->rank != X->rank) return ox_error(x, "weight '%s' must have rank %d", W->name, X->rank);
    if (!W->is_const) return ox_error(x, "weight '%s' must be a constant", W->name);
    kernel[0] = nsp == 2 ? W->shape[2] : 1, kernel[1] = W->shape[W->rank - 1];
#define CT_ATTR(nm, dst, cnt)                                                              \
    if ((n = ox_attr_ints(x, nm, buf, 8)) >= 0) {                                        \
        if (n != (cnt) * nsp) return ox_error(x, nm " must have %d values", (cnt) * nsp); \
        for (int k = 0; k < n; k++) dst[(k / nsp) * 2 + off + k % nsp] = buf[k];         \
    }
    CT_ATTR("kernel_shape", kernel, 1)
    CT_ATTR("strides", strides, 1)
    CT_ATTR("dilations", dil, 1)
    CT_ATTR("pads", pads, 2)
    CT_ATTR("output_padding", opad, 1)
    if ((n = ox_attr_ints(x, "output_shape", buf, 8)) >= 0) {
        if (n != nsp) return ox_error(x, "output_shape must have %d values", nsp);
        oshape[0] = 1;
        for (int k = 0; k < n; k++) oshape[off + k] = buf[k];
        has_oshape = true;
    }
#undef CT_ATTR
    if (x->failed) return false;
    int64_t Cin = X->shape[1], Cout_g = W->shape[1];
    if (group < 1 || Cin % group || W->shape[0] != Cin)
        return ox_error(x, "group %lld does not divide the %lld input channels of weight '%s'",
                        (long long)group, (long long)Cin, W->name);
    if (kernel[0] != (nsp == 2 ? W->shape[2] : 1) || kernel[1] != W->shape[W->rank - 1])
        return ox_error(x, "kernel_shape does not match the weight");
    bool same = !strcmp(auto_pad, "SAME_UPPER") || !strcmp(auto_pad, "SAME_LOWER");
    if (!same && strcmp(auto_pad, "NOTSET") && strcmp(auto_pad, "VALID"))
        return ox_error(x, "auto_pad \"%s\" is not supported", auto_pad);
    for (int k = 0; k < 2; k++) {
        if (strides[k] < 1 || dil[k] < 1 || strides[k] > 4096 || dil[k] > 4096 ||
            opad[k] < 0 || opad[k] >= (strides[k] > dil[k] ? strides[k] : dil[k]) ||
            pads[k] < 0 || pads[k + 2] < 0 || pads[k] > 4096 || pads[k + 2] > 4096)
            return ox_error(x, "strides, dilations, pads or output_padding are out of range");
        if (has_oshape || same) {
            int64_t want = has_oshape ? oshape[k] : in_hw[k] * strides[k];
            int64_t total = strides[k] * (in_hw[k] - 1) + opad[k] +
                            (kernel[k] - 1) * dil[k] + 1 - want;
            bool upper = !strcmp(auto_pad, "SAME_UPPER");
            int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2); /* floor */
            pads[k] = upper ? half : total - half;
            pads[k + 2] = total - pads[k];
        }
    }
    if (!strcmp(auto_pad, "VALID")) memset(pads, 0, sizeof pads);
    mcir_dtype dt = ox_node_dtype(in, n_in);
    ox_value *v = X;
    if (nsp == 1) {
        int64_t s4[4] = {X->shape[0], X->shape[1], 1, X->shape[2]};
        if (!(v = ox_reshape_step(x, X, 4, s4))) return false;
    }
    for (int k = 0; k < 2; k++) {
        int64_t lo = dil[k] * (kernel[k] - 1) - pads[k];
        int64_t hi = dil[k] * (kernel[k] - 1) - pads[k + 2] + opad[k];
        int64_t len = (in_hw[k] - 1) * strides[k] + 1 + lo + hi;
        if (len - dil[k] * (kernel[k] - 1) < 1)
            return ox_error(x, "the output would be empty on spatial axis %d", k);
        if (len * in_hw[k] > ((int64_t)1 << 24))
            return ox_error(x, "spatial axis %d is too large", k);
        double *A = mcir_arena_alloc(x->a, sizeof(double) * (size_t)(len * in_hw[k]));
        memset(A, 0, sizeof(double) * (size_t)(len * in_hw[k]));
        for (int64_t i = 0; i < in_hw[k]; i++) {
            int64_t r = i * strides[k] + lo;
            if (r >= 0 && r < len) A[r * in_hw[k] + i] = 1;
        }
        if (!is_identity_matrix(A, len, in_hw[k]) &&
            !(v = ox_axis_matrix(x, v, 2 + k, A, len, in_hw[k], "conv_transpose_scatter", -1)))
            return false;
    }
    /* W [Cin, Cout/g, kh, kw] -> W' [g·Cout/g, Cin/g, kh, kw], flipped */
    int64_t Cin_g = Cin / group, kh = kernel[0], kw = kernel[1];
    int64_t wshape[4] = {Cout_g * group, Cin_g, kh, kw};
    ox_value *w2 = ox_const_new(x, ox_dtype_elem(dt), 4, wshape);
    if (!w2) return false;
    for (int64_t g = 0; g < group; g++)
        for (int64_t o = 0; o < Cout_g; o++)
            for (int64_t i = 0; i < Cin_g; i++)
                for (int64_t a = 0; a < kh; a++)
                    for (int64_t b = 0; b < kw; b++)
                        ox_set(w2, (((g * Cout_g + o) * Cin_g + i) * kh + a) * kw + b,
                               ox_get(W, (((g * Cin_g + i) * Cout_g + o) * kh + (kh - 1 - a)) * kw +
                                             (kw - 1 - b)));
    w2->name = ox_fresh(x, mcir_arena_printf(x->a, "%s_transposed", W->name));
    mcir_tensor *ins[3] = {ox_runtime(x, v, dt), ox_runtime(x, w2, dt), NULL};
    if (!ins[0] || !ins[1]) return false;
    int k = 2;
    if (n_in > 2 && in[2] && !(ins[k++] = ox_runtime(x, in[2], dt))) return false;
    mcir_node *nd = ox_emit1(x, MCIR_OP_CONV2D, k, ins, nsp == 2 ? 0 : -1);
    mcir_node_set_ints(x->g, nd, "dilations", 2, dil);
    if (group != 1) mcir_node_set_int(x->g, nd, "groups", group);
    return define_window_out(x, ox_done(x, nd), nsp);
}
