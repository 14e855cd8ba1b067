#!/usr/bin/env python3
"""Writes the input.json of every golden case (tests/golden/<case>/).

The expected.mcir.json and expected.trace.jsonl beside each input are
written by the test itself: MCIR_UPDATE_GOLDEN=1 ctest -R test_rewrites.
Run from anywhere: python3 tests/golden/make_inputs.py
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def causal(nq, nk, neg=-10000.0):
    return [[0.0 if j <= i + (nk - nq) else neg for j in range(nk)] for i in range(nq)]


def graph(name, inputs, weights, nodes, outputs):
    return {"mcir": 1, "name": name, "inputs": inputs, "weights": weights,
            "nodes": nodes, "outputs": outputs}


def inp(n, shape, dt="f32"):
    return {"name": n, "dtype": dt, "shape": shape}


def w(n, shape, value=None, dt="f32"):
    d = {"name": n, "dtype": dt, "shape": shape}
    if value is not None:
        d["value"] = value
    return d


def node(name, op, ins, outs, **attrs):
    d = {"name": name, "op": op, "inputs": ins, "outputs": outs}
    if attrs:
        d["attrs"] = attrs
    return d


def attention_chain(prefix, q, kt, v, scale_node, mask, out, softmax_axis=-1, extra=()):
    """qk -> scale -> (mask add) -> softmax -> pv"""
    nodes = [node(prefix + "qk", "matmul", [q, kt], [prefix + "qk.y"])]
    s = prefix + "qk.y"
    if scale_node:
        op, const = scale_node
        nodes.append(node(prefix + "scale", op, [s, const], [prefix + "scale.y"]))
        s = prefix + "scale.y"
    if mask:
        nodes.append(node(prefix + "mask", "add", [s, mask], [prefix + "mask.y"]))
        s = prefix + "mask.y"
    nodes.append(node(prefix + "softmax", "softmax", [s], [prefix + "softmax.y"],
                      axis=softmax_axis))
    nodes.append(node(prefix + "pv", "matmul", [prefix + "softmax.y", v], [out]))
    return nodes


CASES = {}

# GPT-2 style: K pre-transposed, scores / 2, constant causal mask.
CASES["attention_causal_div"] = graph(
    "attention_causal_div",
    [inp("q", [1, 2, 8, 4]), inp("k", [1, 2, 8, 4]), inp("v", [1, 2, 8, 4])],
    [w("c.div", [], 2.0), w("c.causal", [8, 8], causal(8, 8))],
    [node("k_t", "transpose", ["k"], ["k_t.y"], perm=[0, 1, 3, 2])]
    + attention_chain("attn.", "q", "k_t.y", "v", ("div", "c.div"), "c.causal", "y"),
    ["y"])

# Llama/BERT style: scale (mul) on Q, K through transpose_b, a padding mask
# given as a graph input, Nq != Nk, rank-3 batch dims, dv != d.
nodes = [node("q_scale", "mul", ["c.half", "q"], ["q_scale.y"]),
         node("attn.qk", "matmul", ["q_scale.y", "k"], ["attn.qk.y"], transpose_b=True),
         node("attn.mask", "add", ["mask", "attn.qk.y"], ["attn.mask.y"]),
         node("attn.softmax", "softmax", ["attn.mask.y"], ["attn.softmax.y"]),
         node("attn.pv", "matmul", ["attn.softmax.y", "v"], ["y"])]
CASES["attention_qscale_mask_input"] = graph(
    "attention_qscale_mask_input",
    [inp("q", [2, 6, 5]), inp("k", [2, 8, 5]), inp("v", [2, 8, 3]), inp("mask", [2, 1, 8])],
    [w("c.half", [], 0.5)], nodes, ["y"])

# Negative: the probabilities are also returned.
CASES["attention_probs_returned"] = graph(
    "attention_probs_returned",
    [inp("q", [1, 2, 8, 4]), inp("k", [1, 2, 8, 4]), inp("v", [1, 2, 8, 4])],
    [],
    [node("k_t", "transpose", ["k"], ["k_t.y"], perm=[0, 1, 3, 2])]
    + attention_chain("attn.", "q", "k_t.y", "v", None, None, "y"),
    ["y", "attn.softmax.y"])

# Negative: softmax over the query axis, not the keys.
CASES["attention_softmax_axis"] = graph(
    "attention_softmax_axis",
    [inp("q", [1, 2, 8, 4]), inp("k", [1, 2, 8, 4]), inp("v", [1, 2, 8, 4])],
    [w("c.scale", [], 0.5)],
    [node("k_t", "transpose", ["k"], ["k_t.y"], perm=[0, 1, 3, 2])]
    + attention_chain("attn.", "q", "k_t.y", "v", ("mul", "c.scale"), None, "y",
                      softmax_axis=-2),
    ["y"])

# Negative: head dim 1024 in f32 needs more shared memory than sm_90 has.
CASES["attention_too_big"] = graph(
    "attention_too_big",
    [inp("q", [1, 1, 4, 1024]), inp("k", [1, 1, 4, 1024]), inp("v", [1, 1, 4, 1024])],
    [],
    [node("attn.qk", "matmul", ["q", "k"], ["attn.qk.y"], transpose_b=True),
     node("attn.softmax", "softmax", ["attn.qk.y"], ["attn.softmax.y"]),
     node("attn.pv", "matmul", ["attn.softmax.y", "v"], ["y"])],
    ["y"])

# Layer norm with pow 2 and rsqrt·mul, no gamma/beta (ones synthesised).
CASES["layernorm_pow_rsqrt"] = graph(
    "layernorm_pow_rsqrt",
    [inp("x", [2, 3, 16])],
    [w("c.two", [], 2.0), w("c.eps", [], 1e-5)],
    [node("ln.mean", "reduce_mean", ["x"], ["ln.mean.y"], axes=[-1]),
     node("ln.center", "sub", ["x", "ln.mean.y"], ["ln.center.y"]),
     node("ln.square", "pow", ["ln.center.y", "c.two"], ["ln.square.y"]),
     node("ln.var", "reduce_mean", ["ln.square.y"], ["ln.var.y"], axes=[2], keepdims=True),
     node("ln.var_eps", "add", ["c.eps", "ln.var.y"], ["ln.var_eps.y"]),
     node("ln.rstd", "rsqrt", ["ln.var_eps.y"], ["ln.rstd.y"]),
     node("ln.normed", "mul", ["ln.rstd.y", "ln.center.y"], ["y"])],
    ["y"])

# RMS norm as x / sqrt(mean(x·x) + eps) · gamma, then a residual add.
CASES["rmsnorm_div_sqrt"] = graph(
    "rmsnorm_div_sqrt",
    [inp("x", [4, 32]), inp("r", [4, 32])],
    [w("c.eps", [], 1e-6), w("g", [32])],
    [node("rms.square", "mul", ["x", "x"], ["rms.square.y"]),
     node("rms.mean", "reduce_mean", ["rms.square.y"], ["rms.mean.y"], axes=[-1]),
     node("rms.eps", "add", ["rms.mean.y", "c.eps"], ["rms.eps.y"]),
     node("rms.sqrt", "sqrt", ["rms.eps.y"], ["rms.sqrt.y"]),
     node("rms.normed", "div", ["x", "rms.sqrt.y"], ["rms.normed.y"]),
     node("rms.gamma", "mul", ["rms.normed.y", "g"], ["rms.gamma.y"]),
     node("residual", "add", ["r", "rms.gamma.y"], ["y"])],
    ["y"])

# Softmax written out with the max subtraction.
CASES["softmax_decomposed"] = graph(
    "softmax_decomposed",
    [inp("x", [3, 10])],
    [],
    [node("sm.max", "reduce_max", ["x"], ["sm.max.y"], axes=[-1]),
     node("sm.center", "sub", ["x", "sm.max.y"], ["sm.center.y"]),
     node("sm.exp", "exp", ["sm.center.y"], ["sm.exp.y"]),
     node("sm.sum", "reduce_sum", ["sm.exp.y"], ["sm.sum.y"], axes=[1]),
     node("sm.div", "div", ["sm.exp.y", "sm.sum.y"], ["y"])],
    ["y"])

# MLP: matmul + bias, erf GELU as ONNX exports it, matmul.
CASES["mlp_gelu_onnx"] = graph(
    "mlp_gelu_onnx",
    [inp("x", [8, 16])],
    [w("fc1.w", [16, 32]), w("fc1.b", [32]), w("fc2.w", [32, 16]),
     w("c.sqrt2", [], 1.4142135623730951), w("c.one", [], 1.0), w("c.half", [], 0.5)],
    [node("fc1", "matmul", ["x", "fc1.w"], ["fc1.y"]),
     node("fc1.bias", "add", ["fc1.y", "fc1.b"], ["h"]),
     node("act.div", "div", ["h", "c.sqrt2"], ["act.div.y"]),
     node("act.erf", "erf", ["act.div.y"], ["act.erf.y"]),
     node("act.add", "add", ["act.erf.y", "c.one"], ["act.add.y"]),
     node("act.mul", "mul", ["h", "act.add.y"], ["act.mul.y"]),
     node("act.half", "mul", ["act.mul.y", "c.half"], ["act.y"]),
     node("fc2", "matmul", ["act.y", "fc2.w"], ["y"])],
    ["y"])

# Other association orders of written-out GELU: x·(0.5·(1+erf(x/√2))) with
# the scale as a scale op, and (x·(1+tanh(√(2/π)(x+0.044715·x·x·x))))·0.5.
CASES["gelu_forms"] = graph(
    "gelu_forms",
    [inp("x", [4, 8])],
    [w("c.one", [], 1.0), w("c.half", [], 0.5), w("c.k", [], 0.7978845608028654),
     w("c.a", [], 0.044715)],
    [node("e.div", "scale", ["x"], ["e.div.y"], value=0.7071067811865476),
     node("e.erf", "erf", ["e.div.y"], ["e.erf.y"]),
     node("e.add", "add", ["c.one", "e.erf.y"], ["e.add.y"]),
     node("e.half", "scale", ["e.add.y"], ["e.half.y"], value=0.5),
     node("e.mul", "mul", ["e.half.y", "x"], ["y_erf"]),
     node("t.sq", "mul", ["x", "x"], ["t.sq.y"]),
     node("t.cube", "mul", ["t.sq.y", "x"], ["t.cube.y"]),
     node("t.coeff", "mul", ["c.a", "t.cube.y"], ["t.coeff.y"]),
     node("t.inner", "add", ["x", "t.coeff.y"], ["t.inner.y"]),
     node("t.scale", "mul", ["t.inner.y", "c.k"], ["t.scale.y"]),
     node("t.tanh", "tanh", ["t.scale.y"], ["t.tanh.y"]),
     node("t.add", "add", ["t.tanh.y", "c.one"], ["t.add.y"]),
     node("t.mul", "mul", ["x", "t.add.y"], ["t.mul.y"]),
     node("t.half", "mul", ["t.mul.y", "c.half"], ["y_tanh"])],
    ["y_erf", "y_tanh"])

# Conv + bias add + ReLU, then an add writing over a dying intermediate.
CASES["conv_bias_relu"] = graph(
    "conv_bias_relu",
    [inp("x", [1, 3, 8, 8])],
    [w("conv.w", [4, 3, 3, 3]), w("conv.b", [1, 4, 1, 1]), w("conv2.w", [4, 4, 1, 1])],
    [node("conv", "conv2d", ["x", "conv.w"], ["conv.y"], pads=[1, 1, 1, 1]),
     node("conv.bias", "add", ["conv.y", "conv.b"], ["conv.bias.y"]),
     node("conv.relu", "relu", ["conv.bias.y"], ["h"]),
     node("conv2", "conv2d", ["h", "conv2.w"], ["h2"]),
     node("pool", "max_pool2d", ["h"], ["p"], kernel=[1, 1]),
     node("sum", "add", ["p", "h2"], ["y"])],
    ["y"])

# Partial rotary embedding (GPT-NeoX style, not the llama example's
# shapes or names): rotate-half on the first 8 of 16 channels, the rest
# passed through, cos/sin broadcast over heads. Every slice, neg, concat,
# mul and add joins one pointwise group; a slice of a matmul's epilogue
# does not (its kernel stores the tile as computed).
CASES["rotary_partial"] = graph(
    "rotary_partial",
    [inp("h", [2, 6, 4, 16]), inp("a", [6, 8])],
    [w("cos", [6, 1, 8]), w("sin", [6, 1, 8]), w("proj", [8, 12]), w("proj_b", [12])],
    [node("rot", "slice", ["h"], ["rot.y"], axis=-1, start=0, end=8),
     node("pass", "slice", ["h"], ["pass.y"], axis=-1, start=8, end=16),
     node("x1", "slice", ["rot.y"], ["x1.y"], axis=3, start=0, end=4),
     node("x2", "slice", ["rot.y"], ["x2.y"], axis=3, start=4, end=8),
     node("nx2", "neg", ["x2.y"], ["nx2.y"]),
     node("rh", "concat", ["nx2.y", "x1.y"], ["rh.y"], axis=-1),
     node("c", "mul", ["rot.y", "cos"], ["c.y"]),
     node("s", "mul", ["sin", "rh.y"], ["s.y"]),
     node("ro", "add", ["c.y", "s.y"], ["ro.y"]),
     node("out", "concat", ["ro.y", "pass.y"], ["y"], axis=-1),
     node("mm", "matmul", ["a", "proj"], ["mm.y"]),
     node("mm.bias", "add", ["mm.y", "proj_b"], ["mm.bias.y"]),
     node("mm.head", "slice", ["mm.bias.y"], ["z"], axis=-1, start=0, end=6)],
    ["y", "z"])

# Horizontal fusion on shapes and layouts unlike the examples: f16 Q, K
# and V projections with [K, N] weights (transpose_b false) and biases,
# 2 heads of 8, become one matmul over the weights and biases concatenated
# at compile time and a split the attention reads as views; a projection
# through a transposed weight, and one with a ReLU epilogue of its own,
# keep their matmuls.
def heads(prefix, src, perm=(0, 2, 1, 3)):
    return [node(prefix + ".heads", "reshape", [src], [prefix + ".heads.y"], shape=[2, 6, 2, 8]),
            node(prefix + ".t", "transpose", [prefix + ".heads.y"], [prefix + ".t.y"],
                 perm=list(perm))]


CASES["horizontal_f16"] = graph(
    "horizontal_f16",
    [inp("x", [2, 6, 24], "f16")],
    [w("wq", [24, 16], dt="f16"), w("bq", [16], dt="f16"),
     w("wk", [24, 16], dt="f16"), w("bk", [16], dt="f16"),
     w("wv", [24, 16], dt="f16"), w("bv", [16], dt="f16"),
     w("wt", [16, 24], dt="f16"), w("wr", [24, 16], dt="f16"), w("c.scale", [], 0.35, dt="f16")]
    ,
    [node("pq", "matmul", ["x", "wq"], ["pq.y"]), node("pq.b", "add", ["pq.y", "bq"], ["q"]),
     node("pk", "matmul", ["x", "wk"], ["pk.y"]), node("pk.b", "add", ["bk", "pk.y"], ["k"]),
     node("pv_proj", "matmul", ["x", "wv"], ["pv.y"]), node("pv.b", "add", ["pv.y", "bv"], ["v"])]
    + heads("q", "q") + heads("k", "k", (0, 2, 3, 1)) + heads("v", "v")
    + attention_chain("att.", "q.t.y", "k.t.y", "v.t.y", ("mul", "c.scale"), None, "o")
    + [node("pt", "matmul", ["x", "wt"], ["t.y"], transpose_b=True),
       node("pr", "matmul", ["x", "wr"], ["r.y"]),
       node("pr.relu", "relu", ["r.y"], ["r"])],
    ["o", "t.y", "r"])

# A SwiGLU MLP unlike llama's (bf16, [K, N] weights, names of its own):
# gate and up become one matmul over concatenated weights; silu(gate)·up
# reads the parts as views and is computed as the down projection loads A.
CASES["swiglu_bf16"] = graph(
    "swiglu_bf16",
    [inp("h", [3, 5, 16], "bf16")],
    [w("ffn.wg", [16, 40], dt="bf16"), w("ffn.wu", [16, 40], dt="bf16"),
     w("ffn.wd", [40, 16], dt="bf16")],
    [node("ffn.g", "matmul", ["h", "ffn.wg"], ["ffn.g.y"]),
     node("ffn.u", "matmul", ["h", "ffn.wu"], ["ffn.u.y"]),
     node("ffn.sig", "sigmoid", ["ffn.g.y"], ["ffn.sig.y"]),
     node("ffn.act", "mul", ["ffn.sig.y", "ffn.g.y"], ["ffn.act.y"]),
     node("ffn.gate", "mul", ["ffn.u.y", "ffn.act.y"], ["ffn.gate.y"]),
     node("ffn.d", "matmul", ["ffn.gate.y", "ffn.wd"], ["ffn.d.y"]),
     node("ffn.res", "add", ["h", "ffn.d.y"], ["y"])],
    ["y"])

# The same structures in half precision: the fused ops are checked against
# the decomposed ones within the f16/bf16 tolerance.
def retyped(g, name, dtype):
    g = json.loads(json.dumps(g))
    g["name"] = name
    for t in g["inputs"] + g["weights"]:
        t["dtype"] = dtype
    return g


CASES["attention_causal_div_f16"] = retyped(CASES["attention_causal_div"],
                                            "attention_causal_div_f16", "f16")
CASES["layernorm_pow_rsqrt_bf16"] = retyped(CASES["layernorm_pow_rsqrt"],
                                            "layernorm_pow_rsqrt_bf16", "bf16")

for name, g in CASES.items():
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "input.json"), "w") as f:
        json.dump(g, f, indent=1)
        f.write("\n")
print("wrote", len(CASES), "cases")
