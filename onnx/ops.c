/*
 * ops.c — the ONNX op table and ox_import_node, which runs it (the ops are
 * listed in docs/onnx.md). ox_import_node looks the current node up, checks
 * its input count and that its inputs are defined, runs its handler and
 * then rejects every attribute the handler did not read.
 *
 * The handlers live with their op family: ops_const.c (values known at
 * import time), ops_elementwise.c, ops_shape.c (layout and data movement),
 * ops_reduce.c, ops_nn.c (matrix products, softmax, norms) and
 * ops_spatial.c (conv, pools, resize), all written with the steps of
 * ops_steps.c. A handler folds the node at import time when its inputs are
 * constants (eval.c), or emits MCIR nodes for it (values.c); the ops MCIR
 * has no op for are written out as ops it has.
 *
 * Invariant: every ONNX op the importer knows is one row of ox_ops (each
 * name once), and a handler runs only with an input count its row allows
 * and every non-empty input defined.
 */
#include <string.h>

#include "onnx-impl.h"

/* The op table: every ONNX op the importer knows, its input arity and
 * handler. Ops marked import-time fold constants only. */
static const struct {
    const char *op;
    int min_in, max_in; /* max -1: variadic */
    ox_handler fn;
} ox_ops[] = {
    {"Constant", 0, 0, ox_import_constant},
    {"Identity", 1, 1, ox_import_identity},
    {"Dropout", 1, 3, ox_import_identity},
    {"Cast", 1, 1, ox_import_cast},
    {"Shape", 1, 1, ox_import_shape},
    {"Size", 1, 1, ox_import_size},
    {"ConstantOfShape", 1, 1, ox_import_constant_of_shape},
    {"Range", 3, 3, ox_import_range},
    {"Add", 2, 2, ox_import_elementwise}, {"Sub", 2, 2, ox_import_elementwise},
    {"Mul", 2, 2, ox_import_elementwise}, {"Div", 2, 2, ox_import_elementwise},
    {"Pow", 2, 2, ox_import_elementwise}, {"Mod", 2, 2, ox_import_elementwise},
    {"Max", 1, -1, ox_import_elementwise}, {"Min", 1, -1, ox_import_elementwise},
    {"Sum", 1, -1, ox_import_elementwise},
    {"Relu", 1, 1, ox_import_elementwise}, {"Sigmoid", 1, 1, ox_import_elementwise},
    {"Tanh", 1, 1, ox_import_elementwise}, {"Exp", 1, 1, ox_import_elementwise},
    {"Log", 1, 1, ox_import_elementwise}, {"Erf", 1, 1, ox_import_elementwise},
    {"Cos", 1, 1, ox_import_elementwise}, {"Sin", 1, 1, ox_import_elementwise},
    {"IsNaN", 1, 1, ox_import_is_nan_inf}, {"IsInf", 1, 1, ox_import_is_nan_inf},
    {"Sqrt", 1, 1, ox_import_elementwise}, {"Reciprocal", 1, 1, ox_import_elementwise},
    {"Neg", 1, 1, ox_import_elementwise}, {"Abs", 1, 1, ox_import_elementwise},
    {"Floor", 1, 1, ox_import_elementwise}, {"Ceil", 1, 1, ox_import_elementwise},
    {"Sign", 1, 1, ox_import_elementwise}, {"Not", 1, 1, ox_import_elementwise},
    {"BitwiseNot", 1, 1, ox_import_elementwise}, {"BitwiseAnd", 2, 2, ox_import_elementwise},
    {"BitwiseOr", 2, 2, ox_import_elementwise}, {"BitwiseXor", 2, 2, ox_import_elementwise},
    {"BitShift", 2, 2, ox_import_elementwise},
    {"Equal", 2, 2, ox_import_elementwise}, {"Less", 2, 2, ox_import_elementwise},
    {"Greater", 2, 2, ox_import_elementwise}, {"LessOrEqual", 2, 2, ox_import_elementwise},
    {"GreaterOrEqual", 2, 2, ox_import_elementwise}, {"And", 2, 2, ox_import_elementwise},
    {"Or", 2, 2, ox_import_elementwise}, {"Xor", 2, 2, ox_import_elementwise},
    {"Where", 3, 3, ox_import_where},
    {"MatMul", 2, 2, ox_import_matmul},
    {"Gemm", 2, 3, ox_import_gemm},
    {"Softmax", 1, 1, ox_import_softmax},
    {"LayerNormalization", 2, 3, ox_import_layernorm},
    {"ReduceMean", 1, 2, ox_import_reduce}, {"ReduceSum", 1, 2, ox_import_reduce},
    {"ReduceMax", 1, 2, ox_import_reduce},
    {"Transpose", 1, 1, ox_import_transpose},
    {"Reshape", 2, 2, ox_import_reshape},
    {"Flatten", 1, 1, ox_import_flatten},
    {"Unsqueeze", 1, 2, ox_import_unsqueeze},
    {"Squeeze", 1, 2, ox_import_squeeze},
    {"Concat", 1, -1, ox_import_concat},
    {"Split", 1, 2, ox_import_split},
    {"Slice", 1, 5, ox_import_slice},
    {"Gather", 2, 2, ox_import_gather}, {"GatherElements", 2, 2, ox_import_gather_elements},
    {"GatherND", 2, 2, ox_import_gather_nd},
    {"Expand", 2, 2, ox_import_expand},
    {"Conv", 2, 3, ox_import_conv},
    {"MaxPool", 1, 1, ox_import_pool},
    {"AveragePool", 1, 1, ox_import_pool},
    {"GlobalAveragePool", 1, 1, ox_import_global_avg_pool},
    {"Clip", 1, 3, ox_import_clip},
    {"HardSigmoid", 1, 1, ox_import_hard_sigmoid}, {"HardSwish", 1, 1, ox_import_hard_sigmoid},
    {"LogSoftmax", 1, 1, ox_import_log_softmax},
    {"BatchNormalization", 5, 5, ox_import_batchnorm},
    {"ReduceMin", 1, 2, ox_import_reduce}, {"ReduceL2", 1, 2, ox_import_reduce},
    {"ReduceSumSquare", 1, 2, ox_import_reduce}, {"ReduceLogSum", 1, 2, ox_import_reduce},
    {"ReduceLogSumExp", 1, 2, ox_import_reduce},
    {"Pad", 1, 4, ox_import_pad},
    {"Resize", 1, 4, ox_import_resize}, {"Upsample", 2, 2, ox_import_resize},
    {"ConvTranspose", 2, 3, ox_import_conv_transpose},
    {"ScatterND", 3, 3, ox_import_scatter_nd},
    {"ArgMax", 1, 1, ox_import_argmax}, {"ArgMin", 1, 1, ox_import_argmax},
    {"ReduceL1", 1, 2, ox_import_reduce}, {"ReduceProd", 1, 2, ox_import_reduce},
    {"LeakyRelu", 1, 1, ox_import_activation}, {"PRelu", 2, 2, ox_import_activation},
    {"Elu", 1, 1, ox_import_activation}, {"Selu", 1, 1, ox_import_activation},
    {"ThresholdedRelu", 1, 1, ox_import_activation}, {"Softplus", 1, 1, ox_import_activation},
    {"Softsign", 1, 1, ox_import_activation}, {"Mish", 1, 1, ox_import_activation},
    {"Shrink", 1, 1, ox_import_activation},
    {"CastLike", 2, 2, ox_import_cast_like}, {"Trilu", 1, 2, ox_import_trilu}, {"Hardmax", 1, 1, ox_import_hardmax},
    {"OneHot", 3, 3, ox_import_one_hot}, {"CumSum", 2, 2, ox_import_cumsum}, {"EyeLike", 1, 1, ox_import_eye_like},
};

bool ox_import_node(ox *x) {
    const Onnx__NodeProto *np = x->node;
    if (!np->op_type) return ox_error(x, "node has no op_type");
    if (np->domain && *np->domain && strcmp(np->domain, "ai.onnx") != 0)
        return ox_error(x, "op domain '%s' is not supported (only the default ONNX domain)",
                        np->domain);
    int k = 0, n = (int)(sizeof ox_ops / sizeof ox_ops[0]);
    while (k < n && strcmp(ox_ops[k].op, np->op_type) != 0) k++;
    if (k == n) return ox_error(x, "unsupported op %s", np->op_type);
    int n_in = (int)np->n_input;
    if (n_in < ox_ops[k].min_in || (ox_ops[k].max_in >= 0 && n_in > ox_ops[k].max_in))
        return ox_error(x, "has %d inputs; %s takes %d to %d here", n_in, np->op_type,
                        ox_ops[k].min_in, ox_ops[k].max_in);
    if (np->n_output < 1 || !np->output[0] || !*np->output[0])
        return ox_error(x, "has no output");
    ox_value *in[256];
    if (n_in > 256) return ox_error(x, "more than 256 inputs");
    for (int i = 0; i < n_in; i++) {
        const char *s = np->input[i];
        in[i] = NULL;
        if (!s || !*s) {
            if (i < ox_ops[k].min_in || ox_ops[k].max_in < 0)
                return ox_error(x, "required input %d is empty", i);
            continue;
        }
        ox_entry *e = ox_lookup(x, s, false);
        if (!e || !e->v)
            return ox_error(x, "input '%s' is not defined before this node (the graph must "
                               "be topologically sorted)",
                            s);
        in[i] = e->v;
    }
    x->used_attrs = 0;
    if (np->n_attribute > 64) return ox_error(x, "more than 64 attributes");
    if (!ox_ops[k].fn(x, in, n_in)) {
        if (!x->failed) ox_error(x, "cannot be imported");
        return false;
    }
    for (size_t i = 0; i < np->n_attribute; i++)
        if (!(x->used_attrs & (1ull << i)))
            return ox_error(x, "attribute '%s' is not supported",
                            np->attribute[i] && np->attribute[i]->name ? np->attribute[i]->name : "?");
    return !x->failed;
}
