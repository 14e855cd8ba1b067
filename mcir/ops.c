/*
 * ops.c — the op descriptor table: one entry per op of docs/ops.md (the
 * ops graph.json names, docs/graph-format.md) with its arity, attribute
 * schema (types, defaults, allowed values), flags, shape-inference function
 * and reference kernel. Everything that asks "what kind of op is this"
 * reads this table.
 */
#include <string.h>

#include "mcir-impl.h"

#define NO_ATTRS NULL, 0
#define ATTRS(a) a, (int)(sizeof(a) / sizeof(a[0]))

/* Attribute-spec shorthands. */
#define REQ(nm, ty) {.name = nm, .type = ty, .required = true}
#define OPT(nm, ty) {.name = nm, .type = ty}
#define DEF_I(nm, v) {.name = nm, .type = MCIR_ATTR_INT, .has_default = true, .def_i = v}
#define DEF_F(nm, v) {.name = nm, .type = MCIR_ATTR_FLOAT, .has_default = true, .def_f = v}
#define DEF_B(nm, v) {.name = nm, .type = MCIR_ATTR_BOOL, .has_default = true, .def_b = v}
#define DEF_INTS(nm, arr) \
    {.name = nm, .type = MCIR_ATTR_INTS, .has_default = true, \
     .def_n = (int)(sizeof(arr) / sizeof(arr[0])), .def_ints = arr}

static const int64_t ones2[] = {1, 1};
static const int64_t zeros4[] = {0, 0, 0, 0};
static const char *const gelu_forms[] = {"none", "tanh", NULL};

static const mcir_attr_spec matmul_attrs[] = {
    DEF_B("transpose_a", false), DEF_B("transpose_b", false)};
static const mcir_attr_spec scale_attrs[] = {REQ("value", MCIR_ATTR_FLOAT)};
static const mcir_attr_spec gelu_attrs[] = {
    {.name = "approximate", .type = MCIR_ATTR_STRING, .has_default = true,
     .def_s = "none", .choices = gelu_forms}};
static const mcir_attr_spec softmax_attrs[] = {DEF_I("axis", -1)};
static const mcir_attr_spec layernorm_attrs[] = {
    DEF_I("axis", -1), DEF_F("eps", 1e-5)};
static const mcir_attr_spec rmsnorm_attrs[] = {
    DEF_I("axis", -1), DEF_F("eps", 1e-6)};
static const mcir_attr_spec reduce_attrs[] = {
    REQ("axes", MCIR_ATTR_INTS), DEF_B("keepdims", true)};
static const mcir_attr_spec transpose_attrs[] = {REQ("perm", MCIR_ATTR_INTS)};
static const mcir_attr_spec reshape_attrs[] = {REQ("shape", MCIR_ATTR_INTS)};
static const mcir_attr_spec split_attrs[] = {
    REQ("axis", MCIR_ATTR_INT), REQ("sizes", MCIR_ATTR_INTS)};
static const mcir_attr_spec concat_attrs[] = {REQ("axis", MCIR_ATTR_INT)};
static const mcir_attr_spec slice_attrs[] = {
    REQ("axis", MCIR_ATTR_INT), REQ("start", MCIR_ATTR_INT),
    REQ("end", MCIR_ATTR_INT), DEF_I("step", 1)};
static const mcir_attr_spec conv2d_attrs[] = {
    DEF_INTS("strides", ones2), DEF_INTS("pads", zeros4),
    DEF_INTS("dilations", ones2), DEF_I("groups", 1)};
static const mcir_attr_spec pool2d_attrs[] = {
    REQ("kernel", MCIR_ATTR_INTS), OPT("strides", MCIR_ATTR_INTS),
    DEF_INTS("pads", zeros4)};
static const char *const reduce_ops[] = {"sum", "max", "min", NULL};
static const mcir_attr_spec all_reduce_attrs[] = {
    {.name = "op", .type = MCIR_ATTR_STRING, .has_default = true, .def_s = "sum",
     .choices = reduce_ops}};
static const mcir_attr_spec all_gather_attrs[] = {REQ("axis", MCIR_ATTR_INT)};
static const mcir_attr_spec reduce_scatter_attrs[] = {
    REQ("axis", MCIR_ATTR_INT),
    {.name = "op", .type = MCIR_ATTR_STRING, .has_default = true, .def_s = "sum",
     .choices = reduce_ops}};
static const mcir_attr_spec attention_attrs[] = {
    OPT("scale", MCIR_ATTR_FLOAT), DEF_B("causal", false)};

/* integer and bool ops */
static const char *const dtype_names[] = {
#define X(id, name, size) name,
    MCIR_DTYPES(X)
#undef X
    NULL};
static const mcir_attr_spec cast_attrs[] = {
    {.name = "to", .type = MCIR_ATTR_STRING, .required = true, .choices = dtype_names}};
static const mcir_attr_spec gather_attrs[] = {DEF_I("axis", 0)};
static const mcir_attr_spec index_copy_attrs[] = {DEF_I("axis", 0)};
static const mcir_attr_spec argreduce_attrs[] = {DEF_I("axis", -1), DEF_B("keepdims", false)};
static const mcir_attr_spec mod_attrs[] = {DEF_B("fmod", false)};
static const mcir_attr_spec cumsum_attrs[] = {
    REQ("axis", MCIR_ATTR_INT), DEF_B("exclusive", false), DEF_B("reverse", false)};
static const mcir_attr_spec arange_attrs[] = {
    DEF_I("start", 0), REQ("end", MCIR_ATTR_INT), DEF_I("step", 1),
    {.name = "dtype", .type = MCIR_ATTR_STRING, .has_default = true, .def_s = "i64",
     .choices = dtype_names}};

enum {
    PURE = MCIR_OPF_PURE,
    EW_UNARY = MCIR_OPF_PURE | MCIR_OPF_ELEMENTWISE | MCIR_OPF_UNARY | MCIR_OPF_INPLACE,
    EW_BINARY = MCIR_OPF_PURE | MCIR_OPF_ELEMENTWISE | MCIR_OPF_BINARY | MCIR_OPF_INPLACE,
    EW_COMM = EW_BINARY | MCIR_OPF_COMMUTATIVE,
    REDUCE = MCIR_OPF_PURE | MCIR_OPF_REDUCTION,
    NORM = MCIR_OPF_PURE | MCIR_OPF_NORM,
    INTS = MCIR_OPF_INTS,
};

#define UNARY(ID, nm) \
    [MCIR_OP_##ID] = {nm, 1, 1, 1, EW_UNARY, NO_ATTRS, mcir_infer_unary, mcir_ref_##ID}
#define BINARY(ID, nm, fl) \
    [MCIR_OP_##ID] = {nm, 2, 2, 1, fl, NO_ATTRS, mcir_infer_binary, mcir_ref_##ID}
/* Binary ops on floats and integers: an f32 and a typed kernel. */
#define BINARY_INTS(ID, nm, fl)                                                       \
    [MCIR_OP_##ID] = {nm, 2, 2, 1, (fl) | INTS, NO_ATTRS, mcir_infer_binary, mcir_ref_##ID, \
                      NULL, mcir_typed_##ID}
/* Comparisons: elementwise, broadcasting, bool out (never in place: the
 * output's dtype differs), so always the typed kernel. */
#define COMPARE(ID, nm, fl)                                                           \
    [MCIR_OP_##ID] = {nm, 2, 2, 1,                                                     \
                      MCIR_OPF_PURE | MCIR_OPF_ELEMENTWISE | MCIR_OPF_BINARY | INTS | (fl), \
                      NO_ATTRS, mcir_infer_compare, NULL, NULL, mcir_typed_##ID}
/* Bitwise ops and shifts: integer (and bool) tensors only. */
#define BITWISE(ID, nm, fl)                                                           \
    [MCIR_OP_##ID] = {nm, 2, 2, 1, (fl) | INTS, NO_ATTRS, mcir_infer_bitwise, NULL, NULL, \
                      mcir_typed_##ID}
#define REDUCTION(ID, nm) \
    [MCIR_OP_##ID] = {nm, 1, 1, 1, REDUCE, ATTRS(reduce_attrs), mcir_infer_reduce, mcir_ref_##ID}

const mcir_op_desc mcir_op_descs[MCIR_OP_COUNT] = {
    [MCIR_OP_MATMUL] = {"matmul", 2, 2, 1, PURE, ATTRS(matmul_attrs),
                        mcir_infer_matmul, mcir_ref_MATMUL},
    BINARY_INTS(ADD, "add", EW_COMM),
    BINARY_INTS(SUB, "sub", EW_BINARY),
    BINARY_INTS(MUL, "mul", EW_COMM),
    BINARY_INTS(DIV, "div", EW_BINARY),
    BINARY(POW, "pow", EW_BINARY),
    BINARY_INTS(MAX, "max", EW_COMM),
    BINARY_INTS(MIN, "min", EW_COMM),
    [MCIR_OP_SCALE] = {"scale", 1, 1, 1, EW_UNARY, ATTRS(scale_attrs),
                       mcir_infer_unary, mcir_ref_SCALE},
    UNARY(RELU, "relu"),
    UNARY(SIGMOID, "sigmoid"),
    UNARY(TANH, "tanh"),
    UNARY(EXP, "exp"),
    UNARY(LOG, "log"),
    UNARY(ERF, "erf"),
    UNARY(COS, "cos"),
    UNARY(SIN, "sin"),
    UNARY(SQRT, "sqrt"),
    UNARY(RSQRT, "rsqrt"),
    [MCIR_OP_NEG] = {"neg", 1, 1, 1, EW_UNARY | INTS, NO_ATTRS, mcir_infer_unary, mcir_ref_NEG,
                     NULL, mcir_typed_NEG},
    UNARY(RECIPROCAL, "reciprocal"),
    UNARY(SILU, "silu"),
    [MCIR_OP_GELU] = {"gelu", 1, 1, 1, EW_UNARY, ATTRS(gelu_attrs),
                      mcir_infer_unary, mcir_ref_GELU},
    [MCIR_OP_SOFTMAX] = {"softmax", 1, 1, 1, NORM, ATTRS(softmax_attrs),
                         mcir_infer_softmax, mcir_ref_SOFTMAX},
    [MCIR_OP_LAYERNORM] = {"layernorm", 2, 3, 1, NORM, ATTRS(layernorm_attrs),
                           mcir_infer_norm, mcir_ref_LAYERNORM},
    [MCIR_OP_RMSNORM] = {"rmsnorm", 2, 2, 1, NORM, ATTRS(rmsnorm_attrs),
                         mcir_infer_norm, mcir_ref_RMSNORM},
    REDUCTION(REDUCE_SUM, "reduce_sum"),
    REDUCTION(REDUCE_MEAN, "reduce_mean"),
    REDUCTION(REDUCE_MAX, "reduce_max"),
    [MCIR_OP_TRANSPOSE] = {"transpose", 1, 1, 1, PURE | INTS, ATTRS(transpose_attrs),
                           mcir_infer_transpose, mcir_ref_TRANSPOSE, NULL,
                           mcir_typed_TRANSPOSE},
    [MCIR_OP_RESHAPE] = {"reshape", 1, 1, 1, PURE | MCIR_OPF_VIEW | INTS,
                         ATTRS(reshape_attrs), mcir_infer_reshape, mcir_ref_RESHAPE, NULL,
                           mcir_typed_RESHAPE},
    [MCIR_OP_SPLIT] = {"split", 1, 1, -1, PURE | INTS, ATTRS(split_attrs),
                       mcir_infer_split, mcir_ref_SPLIT, NULL,
                           mcir_typed_SPLIT},
    [MCIR_OP_CONCAT] = {"concat", 1, -1, 1, PURE | INTS, ATTRS(concat_attrs),
                        mcir_infer_concat, mcir_ref_CONCAT, NULL,
                           mcir_typed_CONCAT},
    [MCIR_OP_SLICE] = {"slice", 1, 1, 1, PURE | INTS, ATTRS(slice_attrs),
                       mcir_infer_slice, mcir_ref_SLICE, NULL,
                           mcir_typed_SLICE},
    [MCIR_OP_CONV2D] = {"conv2d", 2, 3, 1, PURE, ATTRS(conv2d_attrs),
                        mcir_infer_conv2d, mcir_ref_CONV2D},
    [MCIR_OP_MAX_POOL2D] = {"max_pool2d", 1, 1, 1, PURE, ATTRS(pool2d_attrs),
                            mcir_infer_pool2d, mcir_ref_MAX_POOL2D},
    [MCIR_OP_AVG_POOL2D] = {"avg_pool2d", 1, 1, 1, PURE, ATTRS(pool2d_attrs),
                            mcir_infer_pool2d, mcir_ref_AVG_POOL2D},
    [MCIR_OP_GLOBAL_AVG_POOL] = {"global_avg_pool", 1, 1, 1, PURE, NO_ATTRS,
                                 mcir_infer_global_avg_pool, mcir_ref_GLOBAL_AVG_POOL},
    [MCIR_OP_ATTENTION] = {"attention", 3, 4, 1, PURE, ATTRS(attention_attrs),
                           mcir_infer_attention, mcir_ref_ATTENTION},
    /* Collectives (ranks.c): not PURE — a rewrite may neither recompute nor
     * drop one. With one rank they are the identity. */
#define COLLECTIVE(id, nm, attrs)                                                      \
    [MCIR_OP_##id] = {nm, 1, 1, 1, MCIR_OPF_COLLECTIVE | INTS, ATTRS(attrs),          \
                      mcir_infer_collective, mcir_ref_##id, NULL, mcir_typed_##id}
    COLLECTIVE(ALL_REDUCE, "all_reduce", all_reduce_attrs),
    COLLECTIVE(ALL_GATHER, "all_gather", all_gather_attrs),
    COLLECTIVE(REDUCE_SCATTER, "reduce_scatter", reduce_scatter_attrs),
#undef COLLECTIVE

    /* ---- integer and bool ops (ops_int.c; docs/ops.md) ---- */
    [MCIR_OP_CAST] = {"cast", 1, 1, 1, MCIR_OPF_PURE | MCIR_OPF_ELEMENTWISE | MCIR_OPF_UNARY | INTS,
                      ATTRS(cast_attrs), mcir_infer_cast, mcir_ref_CAST, NULL, mcir_typed_CAST},
    COMPARE(EQUAL, "equal", MCIR_OPF_COMMUTATIVE),
    COMPARE(NOT_EQUAL, "not_equal", MCIR_OPF_COMMUTATIVE),
    COMPARE(LESS, "less", 0),
    COMPARE(LESS_EQUAL, "less_equal", 0),
    COMPARE(GREATER, "greater", 0),
    COMPARE(GREATER_EQUAL, "greater_equal", 0),
    [MCIR_OP_WHERE] = {"where", 3, 3, 1, MCIR_OPF_PURE | MCIR_OPF_ELEMENTWISE | INTS, NO_ATTRS,
                       mcir_infer_where, NULL, NULL, mcir_typed_WHERE},
    [MCIR_OP_GATHER] = {"gather", 2, 2, 1, PURE | INTS, ATTRS(gather_attrs), mcir_infer_gather,
                        NULL, mcir_check_gather, mcir_typed_GATHER},
    [MCIR_OP_ARGMAX] = {"argmax", 1, 1, 1, PURE | INTS, ATTRS(argreduce_attrs),
                        mcir_infer_argreduce, NULL, NULL, mcir_typed_ARGMAX},
    [MCIR_OP_ARGMIN] = {"argmin", 1, 1, 1, PURE | INTS, ATTRS(argreduce_attrs),
                        mcir_infer_argreduce, NULL, NULL, mcir_typed_ARGMIN},
    [MCIR_OP_ARANGE] = {"arange", 0, 0, 1, PURE | INTS, ATTRS(arange_attrs), mcir_infer_arange,
                        mcir_ref_ARANGE, NULL, mcir_typed_ARANGE},
    [MCIR_OP_MOD] = {"mod", 2, 2, 1, EW_BINARY | INTS, ATTRS(mod_attrs), mcir_infer_binary,
                     mcir_ref_MOD, NULL, mcir_typed_MOD},
    BITWISE(BITWISE_AND, "bitwise_and", EW_COMM),
    BITWISE(BITWISE_OR, "bitwise_or", EW_COMM),
    BITWISE(BITWISE_XOR, "bitwise_xor", EW_COMM),
    [MCIR_OP_BITWISE_NOT] = {"bitwise_not", 1, 1, 1, EW_UNARY | INTS, NO_ATTRS, mcir_infer_bitwise,
                             NULL, NULL, mcir_typed_BITWISE_NOT},
    BITWISE(LEFT_SHIFT, "left_shift", EW_BINARY),
    BITWISE(RIGHT_SHIFT, "right_shift", EW_BINARY),
    [MCIR_OP_CUMSUM] = {"cumsum", 1, 1, 1, PURE | INTS, ATTRS(cumsum_attrs), mcir_infer_cumsum,
                        mcir_ref_CUMSUM, NULL, mcir_typed_CUMSUM},
    [MCIR_OP_INDEX_COPY] = {"index_copy", 3, 3, 1, PURE | INTS, ATTRS(index_copy_attrs),
                            mcir_infer_index_copy, NULL, mcir_check_gather,
                            mcir_typed_INDEX_COPY},
};

const char *mcir_op_name(mcir_op op) {
    MCIR_ASSERT(op >= 0 && op < MCIR_OP_COUNT);
    return mcir_op_descs[op].name;
}

bool mcir_op_parse(const char *name, mcir_op *out) {
    for (int i = 0; i < MCIR_OP_COUNT; i++)
        if (strcmp(mcir_op_descs[i].name, name) == 0) {
            *out = (mcir_op)i;
            return true;
        }
    return false;
}

const mcir_attr_spec *mcir_op_attr_spec(mcir_op op, const char *attr) {
    const mcir_op_desc *desc = mcir_op_desc_of(op);
    for (int i = 0; i < desc->n_attrs; i++)
        if (strcmp(desc->attrs[i].name, attr) == 0)
            return &desc->attrs[i];
    return NULL;
}
