#!/usr/bin/python3
"""gen_examples.py — regenerate examples/<name>/ (graph.json, w/*.npy,
inputs/*.npy, expected/*.npy, README) and examples/index.json.

    /usr/bin/python3 scripts/gen_examples.py            # everything
    /usr/bin/python3 scripts/gen_examples.py gpt2_block  # some examples

Needs numpy and PyTorch (Debian's python3-torch); the C build never runs it.
Graphs are written in the decomposed form exporters produce; the expected
outputs are computed independently with PyTorch (torch.nn.functional ops,
float64) from the same weights / inputs (mcir_seed.fill, seed 0), then cast
to float32. Every graph is then checked against the spec (mcir_graph.check)
and run through the numpy reference interpreter (mcir_graph.interpret) as a
cross-check of graph vs. PyTorch; the script fails if they disagree.
"""
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcir_graph  # noqa: E402
import mcir_seed  # noqa: E402
from mcir_graph import Graph  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")
torch.set_num_threads(2)


def T(a):
    """float32 array -> float64 torch tensor (the reference computes in f64)."""
    return torch.from_numpy(np.asarray(a, dtype=np.float32).astype(np.float64))


def seeded_inputs(g, given):
    vals = {}
    for t in g.inputs:
        if t["name"] in given:
            vals[t["name"]] = mcir_seed.round_to_dtype(np.asarray(given[t["name"]], np.float32), t["dtype"])
        else:
            vals[t["name"]] = mcir_seed.fill(t["name"], t["shape"], t["dtype"], "input", 0)
    return vals


# ------------------------------------------------------------ decomposed pieces

def layernorm_decomposed(g, x, p, hidden, eps, square="mul"):
    """Two-pass layer norm as exporters write it (mean, centre, square, mean,
    + eps, sqrt, div, * gamma, + beta)."""
    mean = g.op("reduce_mean", [x], p + ".mean", axes=[-1], keepdims=True)
    d = g.op("sub", [x, mean], p + ".center")
    if square == "mul":
        d2 = g.op("mul", [d, d], p + ".square")
    else:
        d2 = g.op("pow", [d, g.const("c.two", 2.0)], p + ".square")
    var = g.op("reduce_mean", [d2], p + ".var", axes=[-1], keepdims=True)
    ve = g.op("add", [var, eps], p + ".var_eps")
    std = g.op("sqrt", [ve], p + ".std")
    n = g.op("div", [d, std], p + ".normed")
    gm = g.op("mul", [n, g.weight(p + ".weight", [hidden])], p + ".gamma")
    return g.op("add", [gm, g.weight(p + ".bias", [hidden])], p + ".beta")


def rmsnorm_decomposed(g, x, p, hidden, eps):
    sq = g.op("mul", [x, x], p + ".square")
    ms = g.op("reduce_mean", [sq], p + ".mean", axes=[-1], keepdims=True)
    me = g.op("add", [ms, eps], p + ".mean_eps")
    r = g.op("rsqrt", [me], p + ".rsqrt")
    n = g.op("mul", [x, r], p + ".normed")
    return g.op("mul", [g.weight(p + ".weight", [hidden]), n], p + ".gamma")


def linear(g, x, p, din, dout, bias=True, transpose_b=False):
    """x @ W (+ b); W is [din, dout], or [dout, din] with transpose_b."""
    if transpose_b:
        w = g.weight(p + ".weight", [dout, din])
        y = g.op("matmul", [x, w], p + ".matmul", transpose_b=True)
    else:
        w = g.weight(p + ".weight", [din, dout])
        y = g.op("matmul", [x, w], p + ".matmul")
    if bias:
        y = g.op("add", [y, g.weight(p + ".bias", [dout])], p + ".bias_add")
    return y


def heads(g, x, p, seq, nh, hd, perm=(0, 2, 1, 3)):
    r = g.op("reshape", [x], p + ".split_heads", shape=[1, seq, nh, hd])
    return g.op("transpose", [r], p + ".to_heads", perm=list(perm))


def merge_heads(g, x, p, seq, hidden):
    t = g.op("transpose", [x], p + ".from_heads", perm=[0, 2, 1, 3])
    return g.op("reshape", [t], p + ".merge_heads", shape=[1, seq, hidden])


def causal_mask(n, neg):
    m = np.zeros((n, n), dtype=np.float32)
    m[np.triu_indices(n, 1)] = neg
    return m


def gelu_tanh_decomposed(g, x, p):
    """HF gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    x3 = g.op("pow", [x, g.const("c.three", 3.0)], p + ".cube")
    a = g.op("mul", [x3, g.const("c.gelu_coeff", 0.044715)], p + ".cube_coeff")
    b = g.op("add", [x, a], p + ".inner")
    c = g.op("mul", [b, g.const("c.sqrt_2_over_pi", math.sqrt(2.0 / math.pi))], p + ".inner_scale")
    t = g.op("tanh", [c], p + ".tanh")
    t1 = g.op("add", [t, g.const("c.one", 1.0)], p + ".one_plus")
    hx = g.op("mul", [g.const("c.half", 0.5), x], p + ".half_x")
    return g.op("mul", [hx, t1], p + ".gelu")


def gelu_erf_decomposed(g, x, p):
    """HF gelu: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    d = g.op("div", [x, g.const("c.sqrt2", math.sqrt(2.0))], p + ".div_sqrt2")
    e = g.op("erf", [d], p + ".erf")
    e1 = g.op("add", [e, g.const("c.one", 1.0)], p + ".one_plus")
    hx = g.op("mul", [x, g.const("c.half", 0.5)], p + ".half_x")
    return g.op("mul", [hx, e1], p + ".gelu")


# ------------------------------------------------------------------ GPT-2

GPT2_H, GPT2_NH, GPT2_HD, GPT2_FF = 768, 12, 64, 3072


def gpt2_block(g, x, p, seq, mask):
    H = GPT2_H
    h = layernorm_decomposed(g, x, p + ".ln_1", H, g.const("c.ln_eps", 1e-5), square="mul")
    qkv = linear(g, h, p + ".attn.c_attn", H, 3 * H)
    q, k, v = g.op("split", [qkv], p + ".attn.split_qkv", nout=3, axis=-1, sizes=[H, H, H],
                   out=[p + ".attn.q", p + ".attn.k", p + ".attn.v"])
    q = heads(g, q, p + ".attn.q", seq, GPT2_NH, GPT2_HD)
    k = heads(g, k, p + ".attn.k", seq, GPT2_NH, GPT2_HD)
    v = heads(g, v, p + ".attn.v", seq, GPT2_NH, GPT2_HD)
    kt = g.op("transpose", [k], p + ".attn.k_t", perm=[0, 1, 3, 2])
    s = g.op("matmul", [q, kt], p + ".attn.qk")
    s = g.op("div", [s, g.const("c.attn_div", 8.0)], p + ".attn.scale")
    s = g.op("add", [s, mask], p + ".attn.mask")
    a = g.op("softmax", [s], p + ".attn.softmax", axis=-1)
    o = g.op("matmul", [a, v], p + ".attn.pv")
    o = merge_heads(g, o, p + ".attn", seq, H)
    o = linear(g, o, p + ".attn.c_proj", H, H)
    x = g.op("add", [x, o], p + ".attn.residual")
    h = layernorm_decomposed(g, x, p + ".ln_2", H, g.const("c.ln_eps", 1e-5), square="mul")
    h = linear(g, h, p + ".mlp.c_fc", H, GPT2_FF)
    h = gelu_tanh_decomposed(g, h, p + ".mlp.act")
    h = linear(g, h, p + ".mlp.c_proj", GPT2_FF, H)
    return g.op("add", [x, h], p + ".mlp.residual")


def gpt2_block_ref(W, x, p, mask):
    """PyTorch reference for one GPT-2 block: F.layer_norm, F.multi_head_
    attention_forward (float additive mask), F.gelu(approximate='tanh')."""
    H = GPT2_H
    h = F.layer_norm(x, (H,), T(W[p + ".ln_1.weight"]), T(W[p + ".ln_1.bias"]), 1e-5)
    hq = h.transpose(0, 1)  # (L, N, E)
    a, _ = F.multi_head_attention_forward(
        hq, hq, hq, H, GPT2_NH,
        T(W[p + ".attn.c_attn.weight"]).t().contiguous(), T(W[p + ".attn.c_attn.bias"]),
        None, None, False, 0.0,
        T(W[p + ".attn.c_proj.weight"]).t().contiguous(), T(W[p + ".attn.c_proj.bias"]),
        training=False, need_weights=False, attn_mask=mask)
    x = x + a.transpose(0, 1)
    h = F.layer_norm(x, (H,), T(W[p + ".ln_2.weight"]), T(W[p + ".ln_2.bias"]), 1e-5)
    h = F.linear(h, T(W[p + ".mlp.c_fc.weight"]).t(), T(W[p + ".mlp.c_fc.bias"]))
    h = F.gelu(h, approximate="tanh")
    h = F.linear(h, T(W[p + ".mlp.c_proj.weight"]).t(), T(W[p + ".mlp.c_proj.bias"]))
    return x + h


def ex_gpt2_block():
    S = 128
    g = Graph("gpt2_block")
    x = g.input("x", [1, S, GPT2_H])
    mask = g.weight("c.causal_mask", [S, S],
                    value=[[0 if j <= i else -10000 for j in range(S)] for i in range(S)])
    y = gpt2_block(g, x, "h0", S, mask)
    g.nodes[-1]["outputs"] = ["y"]
    g.output("y")

    def ref(W, I):
        return {"y": gpt2_block_ref(W, T(I["x"]), "h0", T(W["c.causal_mask"]))}
    return g, {}, ref, "GPT-2 small transformer block (pre-LN, decomposed attention, tanh-GELU), seq 128, f32"


def ex_gpt2_stack():
    S, L, KEEP = 512, 12, 64
    g = Graph("gpt2_stack")
    x = g.input("x", [1, S, GPT2_H])
    mask = g.weight("c.causal_mask", [S, S], data=causal_mask(S, -10000.0))
    h = x
    for i in range(L):
        h = gpt2_block(g, h, "h%d" % i, S, mask)
    h = layernorm_decomposed(g, h, "ln_f", GPT2_H, g.const("c.ln_eps", 1e-5), square="mul")
    g.op("slice", [h], "last_positions", out="y", axis=1, start=S - KEEP, end=S)
    g.output("y")

    def ref(W, I):
        h = T(I["x"])
        m = T(W["c.causal_mask"])
        for i in range(L):
            h = gpt2_block_ref(W, h, "h%d" % i, m)
        h = F.layer_norm(h, (GPT2_H,), T(W["ln_f.weight"]), T(W["ln_f.bias"]), 1e-5)
        return {"y": h[:, S - KEEP:S]}
    return g, {}, ref, ("GPT-2 small, 12 blocks at seq 512 + ln_f; output = last 64 positions "
                        "(interpreter/compiler speed benchmark), f32")


# ------------------------------------------------------------------ Llama

LL_H, LL_NH, LL_HD, LL_FF, LL_S = 1024, 16, 64, 2816, 128


def rope_tables(seq, hd, theta=10000.0):
    inv = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    f = np.outer(np.arange(seq, dtype=np.float64), inv)
    emb = np.concatenate([f, f], axis=-1)
    return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)


def ex_llama_block():
    S, H, NH, HD = LL_S, LL_H, LL_NH, LL_HD
    g = Graph("llama_block")
    x = g.input("x", [1, S, H])
    cos_t, sin_t = rope_tables(S, HD)
    cos = g.weight("rope.cos", [S, HD], data=cos_t)
    sin = g.weight("rope.sin", [S, HD], data=sin_t)
    mask = g.weight("c.causal_mask", [1, 1, S, S], data=causal_mask(S, -1e9).reshape(1, 1, S, S))
    p = "l0"
    h = rmsnorm_decomposed(g, x, p + ".input_norm", H, g.const("c.rms_eps", 1e-6))
    q = heads(g, linear(g, h, p + ".attn.q_proj", H, H, bias=False, transpose_b=True), p + ".attn.q", S, NH, HD)
    k = heads(g, linear(g, h, p + ".attn.k_proj", H, H, bias=False, transpose_b=True), p + ".attn.k", S, NH, HD)
    v = heads(g, linear(g, h, p + ".attn.v_proj", H, H, bias=False, transpose_b=True), p + ".attn.v", S, NH, HD)

    def rope(t, pp):
        t1 = g.op("slice", [t], pp + ".lo", axis=-1, start=0, end=HD // 2)
        t2 = g.op("slice", [t], pp + ".hi", axis=-1, start=HD // 2, end=HD)
        n2 = g.op("neg", [t2], pp + ".neg_hi")
        rot = g.op("concat", [n2, t1], pp + ".rotate_half", axis=-1)
        a = g.op("mul", [t, cos], pp + ".mul_cos")
        b = g.op("mul", [rot, sin], pp + ".mul_sin")
        return g.op("add", [a, b], pp + ".rotated")
    q = rope(q, p + ".attn.rope_q")
    k = rope(k, p + ".attn.rope_k")
    q = g.op("scale", [q], p + ".attn.q_scale", value=0.125)
    s = g.op("matmul", [q, k], p + ".attn.qk", transpose_b=True)
    s = g.op("add", [s, mask], p + ".attn.mask")
    a = g.op("softmax", [s], p + ".attn.softmax", axis=-1)
    o = g.op("matmul", [a, v], p + ".attn.pv")
    o = merge_heads(g, o, p + ".attn", S, H)
    o = linear(g, o, p + ".attn.o_proj", H, H, bias=False, transpose_b=True)
    x = g.op("add", [x, o], p + ".attn.residual")
    h = rmsnorm_decomposed(g, x, p + ".post_attn_norm", H, g.const("c.rms_eps", 1e-6))
    gt = linear(g, h, p + ".mlp.gate_proj", H, LL_FF, bias=False, transpose_b=True)
    up = linear(g, h, p + ".mlp.up_proj", H, LL_FF, bias=False, transpose_b=True)
    sg = g.op("sigmoid", [gt], p + ".mlp.sigmoid")
    si = g.op("mul", [gt, sg], p + ".mlp.silu")
    m = g.op("mul", [si, up], p + ".mlp.gate_up")
    d = linear(g, m, p + ".mlp.down_proj", LL_FF, H, bias=False, transpose_b=True)
    g.op("add", [x, d], p + ".mlp.residual", out="y")
    g.output("y")

    def ref(W, I):
        x = T(I["x"])

        def rms(t, w):
            return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * T(w)

        def lin(t, name):
            return F.linear(t, T(W[name + ".weight"]))
        h = rms(x, W[p + ".input_norm.weight"])
        q = lin(h, p + ".attn.q_proj").view(1, S, NH, HD).transpose(1, 2)
        k = lin(h, p + ".attn.k_proj").view(1, S, NH, HD).transpose(1, 2)
        v = lin(h, p + ".attn.v_proj").view(1, S, NH, HD).transpose(1, 2)
        # rotary as a complex rotation of the pairs (x[i], x[i + d/2])
        c = T(W["rope.cos"])[:, : HD // 2]
        s_ = T(W["rope.sin"])[:, : HD // 2]
        rot = torch.complex(c, s_)

        def rope(t):
            z = torch.complex(t[..., : HD // 2], t[..., HD // 2:]) * rot
            return torch.cat([z.real, z.imag], dim=-1)
        q, k = rope(q), rope(k)
        sc = (q @ k.transpose(-1, -2)) * 0.125 + T(W["c.causal_mask"])
        o = F.softmax(sc, dim=-1) @ v
        o = lin(o.transpose(1, 2).reshape(1, S, H), p + ".attn.o_proj")
        x = x + o
        h = rms(x, W[p + ".post_attn_norm.weight"])
        m = F.silu(lin(h, p + ".mlp.gate_proj")) * lin(h, p + ".mlp.up_proj")
        return {"y": x + lin(m, p + ".mlp.down_proj")}
    return g, {}, ref, ("Llama-style decoder block: RMSNorm, rotary (slice/neg/concat), causal mask, "
                        "SwiGLU 2816; hidden 1024, 16 heads, seq 128, f32")


# ------------------------------------------------------------------ BERT

def ex_bert_layer():
    S, H, NH, HD, FF = 128, 768, 12, 64, 3072
    g = Graph("bert_layer")
    x = g.input("x", [1, S, H])
    mask = g.input("mask", [1, 1, 1, S])
    p = "layer0"
    q = heads(g, linear(g, x, p + ".attn.query", H, H), p + ".attn.q", S, NH, HD)
    k = heads(g, linear(g, x, p + ".attn.key", H, H), p + ".attn.k", S, NH, HD, perm=(0, 2, 3, 1))
    v = heads(g, linear(g, x, p + ".attn.value", H, H), p + ".attn.v", S, NH, HD)
    s = g.op("matmul", [q, k], p + ".attn.qk")
    s = g.op("div", [s, g.const("c.attn_div", 8.0)], p + ".attn.scale")
    s = g.op("add", [s, mask], p + ".attn.mask")
    a = g.op("softmax", [s], p + ".attn.softmax", axis=-1)
    o = g.op("matmul", [a, v], p + ".attn.pv")
    o = merge_heads(g, o, p + ".attn", S, H)
    o = linear(g, o, p + ".attn.output.dense", H, H)
    o = g.op("add", [o, x], p + ".attn.output.residual")
    eps = g.const("c.ln_eps", 1e-12)
    x1 = layernorm_decomposed(g, o, p + ".attn.output.LayerNorm", H, eps, square="pow")
    h = linear(g, x1, p + ".intermediate.dense", H, FF)
    h = gelu_erf_decomposed(g, h, p + ".intermediate.act")
    h = linear(g, h, p + ".output.dense", FF, H)
    h = g.op("add", [h, x1], p + ".output.residual")
    y = layernorm_decomposed(g, h, p + ".output.LayerNorm", H, eps, square="pow")
    g.nodes[-1]["outputs"] = ["y"]
    g.output("y")
    m = np.zeros((1, 1, 1, S), dtype=np.float32)
    m[..., 100:] = -10000.0

    def ref(W, I):
        x = T(I["x"])
        xq = x.transpose(0, 1)
        am = T(I["mask"])[0, 0].expand(S, S)
        a, _ = F.multi_head_attention_forward(
            xq, xq, xq, H, NH, None,
            torch.cat([T(W[p + ".attn.%s.bias" % n]) for n in ("query", "key", "value")]),
            None, None, False, 0.0,
            T(W[p + ".attn.output.dense.weight"]).t().contiguous(), T(W[p + ".attn.output.dense.bias"]),
            training=False, need_weights=False, attn_mask=am, use_separate_proj_weight=True,
            q_proj_weight=T(W[p + ".attn.query.weight"]).t(),
            k_proj_weight=T(W[p + ".attn.key.weight"]).t(),
            v_proj_weight=T(W[p + ".attn.value.weight"]).t())
        pp = p + ".attn.output.LayerNorm"
        x1 = F.layer_norm(a.transpose(0, 1) + x, (H,), T(W[pp + ".weight"]), T(W[pp + ".bias"]), 1e-12)
        h = F.gelu(F.linear(x1, T(W[p + ".intermediate.dense.weight"]).t(), T(W[p + ".intermediate.dense.bias"])))
        h = F.linear(h, T(W[p + ".output.dense.weight"]).t(), T(W[p + ".output.dense.bias"]))
        pp = p + ".output.LayerNorm"
        return {"y": F.layer_norm(h + x1, (H,), T(W[pp + ".weight"]), T(W[pp + ".bias"]), 1e-12)}
    return g, {"mask": m}, ref, ("BERT-base encoder layer (post-LN, erf-GELU, padding mask input "
                                 "[1,1,1,128]: 0 for 100 tokens, -10000 after), f32")


# ------------------------------------------------------------------ cross-attention

def ex_cross_attention():
    NQ, NK, NH, HD, H, HC = 77, 196, 8, 80, 640, 768
    g = Graph("cross_attention")
    x = g.input("x", [1, NQ, H])
    ctx = g.input("context", [1, NK, HC])
    p = "xattn"
    q = heads(g, linear(g, x, p + ".to_q", H, H, bias=False), p + ".q", NQ, NH, HD)
    k = heads(g, linear(g, ctx, p + ".to_k", HC, H, bias=False), p + ".k", NK, NH, HD)
    v = heads(g, linear(g, ctx, p + ".to_v", HC, H, bias=False), p + ".v", NK, NH, HD)
    kt = g.op("transpose", [k], p + ".k_t", perm=[0, 1, 3, 2])
    s = g.op("matmul", [q, kt], p + ".qk")
    s = g.op("mul", [s, g.const("c.attn_scale", 1.0 / math.sqrt(HD))], p + ".scale")
    a = g.op("softmax", [s], p + ".softmax", axis=-1)
    o = g.op("matmul", [a, v], p + ".pv")
    o = merge_heads(g, o, p, NQ, H)
    o = linear(g, o, p + ".to_out", H, H)
    g.nodes[-1]["outputs"] = ["y"]
    g.output("y")

    def ref(W, I):
        xq = T(I["x"]).transpose(0, 1)
        kv = T(I["context"]).transpose(0, 1)
        a, _ = F.multi_head_attention_forward(
            xq, kv, kv, H, NH, None, None, None, None, False, 0.0,
            T(W[p + ".to_out.weight"]).t().contiguous(), T(W[p + ".to_out.bias"]),
            training=False, need_weights=False, use_separate_proj_weight=True,
            q_proj_weight=T(W[p + ".to_q.weight"]).t(),
            k_proj_weight=T(W[p + ".to_k.weight"]).t(),
            v_proj_weight=T(W[p + ".to_v.weight"]).t())
        return {"y": a.transpose(0, 1)}
    return g, {}, ref, ("decoder cross-attention: 77 queries (hidden 640) over 196 context tokens "
                        "(dim 768), 8 heads x 80, scale by mul, no mask, output projection, f32")


# ------------------------------------------------------------------ ResNet

def ex_resnet_small():
    g = Graph("resnet_small")
    x = g.input("x", [1, 3, 32, 32])

    def conv(t, p, cin, cout, k, relu=True, groups=1, **attrs):
        w = g.weight(p + ".weight", [cout, cin // groups, k, k])
        b = g.weight(p + ".bias", [cout])
        if groups != 1:
            attrs["groups"] = groups
        y = g.op("conv2d", [t, w, b], p, **attrs)
        return g.op("relu", [y], p + ".relu") if relu else y

    h = conv(x, "stem.conv", 3, 16, 3, pads=[1, 1, 1, 1])
    h = g.op("max_pool2d", [h], "stem.maxpool", out="stem_out", kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    # stage 1: 16 ch, 16x16
    t = conv(h, "layer1.0.conv1", 16, 16, 3, pads=[1, 1, 1, 1])
    t = conv(t, "layer1.0.conv2", 16, 16, 3, relu=False, pads=[1, 1, 1, 1])
    h = g.op("relu", [g.op("add", [t, h], "layer1.0.add")], "layer1.0.relu")
    t = conv(h, "layer1.1.conv1", 16, 16, 3, pads=[2, 2, 2, 2], dilations=[2, 2])  # dilated
    t = conv(t, "layer1.1.conv2", 16, 16, 3, relu=False, pads=[1, 1, 1, 1])
    h = g.op("relu", [g.op("add", [t, h], "layer1.1.add")], "layer1.1.relu")
    # stage 2: 32 ch, 8x8; TF-"SAME" stride-2 padding (bottom/right only)
    t = conv(h, "layer2.0.conv1", 16, 32, 3, strides=[2, 2], pads=[0, 0, 1, 1])
    t = conv(t, "layer2.0.conv2", 32, 32, 3, relu=False, pads=[1, 1, 1, 1])
    sc = conv(h, "layer2.0.downsample", 16, 32, 1, relu=False, strides=[2, 2])
    h = g.op("relu", [g.op("add", [t, sc], "layer2.0.add")], "layer2.0.relu")
    t = conv(h, "layer2.1.conv1", 32, 32, 3, groups=4, pads=[1, 1, 1, 1])  # grouped
    t = conv(t, "layer2.1.conv2", 32, 32, 3, relu=False, pads=[1, 1, 1, 1])
    h = g.op("relu", [g.op("add", [t, h], "layer2.1.add")], "layer2.1.relu")
    # stage 3: 64 ch, 4x4; ResNet-D shortcut: avg_pool2d 2x2/2 then 1x1 conv
    t = conv(h, "layer3.0.conv1", 32, 64, 3, strides=[2, 2], pads=[1, 1, 1, 1])
    t = conv(t, "layer3.0.conv2", 64, 64, 3, relu=False, pads=[1, 1, 1, 1])
    sc = g.op("avg_pool2d", [h], "layer3.0.downsample.pool", kernel=[2, 2], strides=[2, 2])
    sc = conv(sc, "layer3.0.downsample.conv", 32, 64, 1, relu=False)
    h = g.op("relu", [g.op("add", [t, sc], "layer3.0.add")], "layer3.0.relu")
    h = g.op("global_avg_pool", [h], "gap")
    h = g.op("reshape", [h], "flatten", shape=[1, 64])
    h = g.op("matmul", [h, g.weight("fc.weight", [64, 10])], "fc.matmul")
    g.op("add", [h, g.weight("fc.bias", [10])], "fc.bias_add", out="logits")
    g.output("logits", "stem_out")

    def ref(W, I):
        def c(t, p, stride=1, padding=0, dilation=1, groups=1):
            return F.conv2d(t, T(W[p + ".weight"]), T(W[p + ".bias"]), stride, padding, dilation, groups)
        x = T(I["x"])
        h = F.max_pool2d(F.relu(c(x, "stem.conv", padding=1)), 3, 2, 1)
        stem = h
        t = c(F.relu(c(h, "layer1.0.conv1", padding=1)), "layer1.0.conv2", padding=1)
        h = F.relu(t + h)
        t = c(F.relu(c(h, "layer1.1.conv1", padding=2, dilation=2)), "layer1.1.conv2", padding=1)
        h = F.relu(t + h)
        t = F.relu(c(F.pad(h, (0, 1, 0, 1)), "layer2.0.conv1", stride=2))
        t = c(t, "layer2.0.conv2", padding=1)
        h = F.relu(t + c(h, "layer2.0.downsample", stride=2))
        t = c(F.relu(c(h, "layer2.1.conv1", padding=1, groups=4)), "layer2.1.conv2", padding=1)
        h = F.relu(t + h)
        t = c(F.relu(c(h, "layer3.0.conv1", stride=2, padding=1)), "layer3.0.conv2", padding=1)
        h = F.relu(t + c(F.avg_pool2d(h, 2, 2), "layer3.0.downsample.conv"))
        h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        return {"logits": F.linear(h, T(W["fc.weight"]).t(), T(W["fc.bias"])), "stem_out": stem}
    return g, {}, ref, ("CIFAR-style ResNet on 1x3x32x32 (BN folded into conv bias): maxpool stem, "
                        "3 stages, dilated + grouped + asymmetric-pad convs, avg_pool shortcut, FC 10")


# ------------------------------------------------------------------ f16 / bf16

def ex_attention_f16():
    g = Graph("attention_f16")
    q = g.input("q", [2, 4, 100, 64], "f16")
    k = g.input("k", [2, 4, 128, 64], "f16")
    v = g.input("v", [2, 4, 128, 64], "f16")
    m = g.input("mask", [2, 1, 100, 128], "f16")
    g.op("attention", [q, k, v, m], "attn_causal", out="out_causal", causal=True)
    g.op("attention", [q, k, v], "attn_plain", out="out_plain", scale=0.1)
    g.output("out_causal", "out_plain")

    def ref(W, I):
        q, k, v, m = (T(I[n]) for n in ("q", "k", "v", "mask"))
        s = q @ k.transpose(-1, -2)
        nq, nk = 100, 128
        causal = torch.ones(nq, nk, dtype=torch.bool).triu(1 + nk - nq)
        s1 = (s / math.sqrt(64) + m).masked_fill(causal, float("-inf"))
        s2 = s * float(np.float32(0.1))
        return {"out_causal": F.softmax(s1, -1) @ v, "out_plain": F.softmax(s2, -1) @ v}
    return g, {}, ref, ("native attention in f16: Nq 100 / Nk 128, causal (bottom-right aligned) + "
                        "additive mask [2,1,100,128], and an unmasked one with scale 0.1")


def ex_layernorm_bf16():
    g = Graph("layernorm_bf16")
    x = g.input("x", [2, 4, 100, 64], "bf16")
    y1 = g.op("layernorm", [x, g.weight("ln.weight", [64], "bf16"), g.weight("ln.bias", [64], "bf16")],
              "ln", out="y_ln", eps=1e-5)
    y2 = g.op("layernorm", [x, g.weight("ln2.weight", [100, 64], "bf16"), g.weight("ln2.bias", [100, 64], "bf16")],
              "ln_last2", out="y_ln2", axis=-2, eps=1e-5)
    y3 = g.op("rmsnorm", [x, g.weight("rms.weight", [64], "bf16")], "rms", out="y_rms", eps=1e-6)
    g.output(y1, y2, y3)

    def ref(W, I):
        x = T(I["x"])
        return {"y_ln": F.layer_norm(x, (64,), T(W["ln.weight"]), T(W["ln.bias"]), 1e-5),
                "y_ln2": F.layer_norm(x, (100, 64), T(W["ln2.weight"]), T(W["ln2.bias"]), 1e-5),
                "y_rms": x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * T(W["rms.weight"])}
    return g, {}, ref, ("native layernorm (axis -1 and axis -2) and rmsnorm in bf16 on [2,4,100,64]")


# ------------------------------------------------------------------ small ones

def ex_mlp_tiny():
    g = Graph("mlp_tiny")
    x = g.input("x", [2, 4])
    w1 = ((np.arange(32).reshape(4, 8) % 5) - 2) * 0.5
    b1 = np.array([0, 0.5, -0.5, 1, -1, 0, 0.25, -0.25])
    w2 = ((np.arange(24).reshape(8, 3) % 5) - 2) * 0.5
    b2 = np.array([0.5, -0.5, 0.0])
    h = g.op("matmul", [x, g.weight("fc1.weight", [4, 8], data=w1)], "fc1.matmul")
    h = g.op("add", [h, g.weight("fc1.bias", [8], data=b1)], "fc1.bias_add")
    h = g.op("relu", [h], "fc1.relu")
    h = g.op("matmul", [h, g.weight("fc2.weight", [8, 3], data=w2)], "fc2.matmul")
    g.op("add", [h, g.weight("fc2.bias", [3], data=b2)], "fc2.bias_add", out="y")
    g.output("y")
    xin = np.array([[1, 2, 3, 4], [-1, 0.5, 0, 2]], dtype=np.float32)

    def ref(W, I):
        h = F.relu(F.linear(T(I["x"]), T(W["fc1.weight"]).t(), T(W["fc1.bias"])))
        return {"y": F.linear(h, T(W["fc2.weight"]).t(), T(W["fc2.bias"]))}
    return g, {"x": xin}, ref, "tiny 2-layer MLP 4-8-3 with relu; weights from committed .npy data files; x given in inputs/"


def ex_ops_misc():
    g = Graph("ops_misc")
    x = g.input("x", [2, 6, 8, 8])
    outs = []

    def out(name, node_out):
        outs.append(name)
        return node_out
    t = g.op("transpose", [x], "nhwc", perm=[0, 2, 3, 1])
    out("o_transpose_reshape", g.op("reshape", [t], "flatten_rows", out="o_transpose_reshape", shape=[-1, 6]))
    a, b = g.op("split", [x], "split_c", nout=2, axis=1, sizes=[2, 4])
    a2 = g.op("scale", [a], "scale_a", value=2.0)
    out("o_split_concat", g.op("concat", [b, a2], "concat_c", out="o_split_concat", axis=1))
    s1 = g.op("slice", [x], "slice_h", axis=2, start=1, end=8, step=2)
    out("o_slice_step", g.op("slice", [s1], "slice_w", out="o_slice_step", axis=-1, start=0, end=8, step=3))
    out("o_reduce_max", g.op("reduce_max", [x], "rmax", out="o_reduce_max", axes=[3], keepdims=False))
    out("o_reduce_sum", g.op("reduce_sum", [x], "rsum", out="o_reduce_sum", axes=[1, -1], keepdims=False))
    out("o_reduce_mean", g.op("reduce_mean", [x], "rmean", out="o_reduce_mean", axes=[2, 3]))
    # positive-domain math on pos = x*x + 1
    pos = g.op("add", [g.op("mul", [x, x], "sq"), g.const("c.one", 1.0)], "pos")
    lg = g.op("log", [pos], "log")
    pw = g.op("pow", [pos, g.const("c.p", 1.5)], "pow")
    rc = g.op("reciprocal", [pos], "recip")
    rs = g.op("rsqrt", [pos], "rsqrt")
    sq = g.op("sqrt", [pos], "sqrt")
    e1 = g.op("add", [lg, pw], "lg_plus_pw")
    e2 = g.op("mul", [rc, rs], "rc_times_rs")
    e3 = g.op("sub", [e1, e2], "e1_minus_e2")
    e4 = g.op("div", [e3, sq], "div_sqrt")
    out("o_pos_math", g.op("neg", [e4], "neg", out="o_pos_math"))
    lo = g.weight("w.lo", [8])
    mx = g.op("max", [x, lo], "max_lo")
    out("o_minmax", g.op("min", [mx, g.const("c.thr", 0.25)], "min_thr", out="o_minmax"))
    u = g.op("add", [g.op("tanh", [x], "tanh"), g.op("sigmoid", [x], "sigmoid")], "u1")
    u = g.op("add", [u, g.op("relu", [x], "relu")], "u2")
    u = g.op("add", [u, g.op("erf", [x], "erf")], "u3")
    u = g.op("add", [u, g.op("silu", [x], "silu")], "u4")
    out("o_unary", g.op("add", [u, g.op("exp", [x], "exp")], "u5", out="o_unary"))
    x3 = g.op("scale", [x], "scale3", value=3.0)
    out("o_gelu_erf", g.op("gelu", [x3], "gelu_erf", out="o_gelu_erf", approximate="none"))
    out("o_gelu_tanh", g.op("gelu", [x3], "gelu_tanh", out="o_gelu_tanh", approximate="tanh"))
    out("o_gelu_default", g.op("gelu", [x], "gelu_default", out="o_gelu_default"))
    out("o_softmax_c", g.op("softmax", [x], "softmax_c", out="o_softmax_c", axis=1))
    out("o_avgpool_sym", g.op("avg_pool2d", [x], "avgpool_sym", out="o_avgpool_sym",
                              kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    out("o_avgpool_asym", g.op("avg_pool2d", [x], "avgpool_asym", out="o_avgpool_asym",
                               kernel=[2, 3], strides=[1, 2], pads=[0, 1, 1, 0]))
    out("o_avgpool_default_stride", g.op("avg_pool2d", [x], "avgpool_k2", out="o_avgpool_default_stride",
                                         kernel=[2, 2]))
    out("o_maxpool_asym", g.op("max_pool2d", [x], "maxpool_asym", out="o_maxpool_asym",
                               kernel=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1]))
    out("o_matmul_ta", g.op("matmul", [x, g.weight("w.b", [8, 5])], "matmul_ta", out="o_matmul_ta",
                            transpose_a=True))
    out("o_matmul_bcast", g.op("matmul", [x, g.weight("w.c", [6, 4, 8])], "matmul_bcast", out="o_matmul_bcast",
                               transpose_b=True))
    ln = g.op("layernorm", [x, g.weight("ln.weight", [8])], "ln_nobeta")
    rn = g.op("rmsnorm", [x, g.weight("rms.weight", [8])], "rms_default")
    out("o_norms", g.op("add", [ln, rn], "norms_sum", out="o_norms"))
    out("o_gap", g.op("global_avg_pool", [x], "gap", out="o_gap"))
    out("o_conv_rect", g.op("conv2d", [x, g.weight("conv.weight", [4, 6, 3, 3])], "conv_rect", out="o_conv_rect",
                            strides=[1, 2], pads=[1, 2, 1, 0], dilations=[2, 1]))
    g.output(*outs)

    def ref(W, I):
        x = T(I["x"])
        r = {}
        r["o_transpose_reshape"] = x.permute(0, 2, 3, 1).reshape(-1, 6)
        r["o_split_concat"] = torch.cat([x[:, 2:], 2 * x[:, :2]], dim=1)
        r["o_slice_step"] = x[:, :, 1:8:2, 0:8:3]
        r["o_reduce_max"] = x.amax(dim=3)
        r["o_reduce_sum"] = x.sum(dim=(1, 3))
        r["o_reduce_mean"] = x.mean(dim=(2, 3), keepdim=True)
        p = x * x + 1
        r["o_pos_math"] = -((torch.log(p) + p ** 1.5 - torch.reciprocal(p) * torch.rsqrt(p)) / torch.sqrt(p))
        r["o_minmax"] = torch.clamp(torch.maximum(x, T(W["w.lo"])), max=0.25)
        r["o_unary"] = torch.tanh(x) + torch.sigmoid(x) + F.relu(x) + torch.erf(x) + F.silu(x) + torch.exp(x)
        r["o_gelu_erf"] = F.gelu(3 * x)
        r["o_gelu_tanh"] = F.gelu(3 * x, approximate="tanh")
        r["o_gelu_default"] = F.gelu(x)
        r["o_softmax_c"] = F.softmax(x, dim=1)
        r["o_avgpool_sym"] = F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)
        # asymmetric padding, padding excluded from the count: sum / count
        xp = F.pad(x, (1, 0, 0, 1))
        ones = F.pad(torch.ones_like(x), (1, 0, 0, 1))
        r["o_avgpool_asym"] = (F.avg_pool2d(xp, (2, 3), (1, 2)) / F.avg_pool2d(ones, (2, 3), (1, 2)))
        r["o_avgpool_default_stride"] = F.avg_pool2d(x, 2)
        r["o_maxpool_asym"] = F.max_pool2d(F.pad(x, (0, 1, 0, 1), value=float("-inf")), 3, 2)
        r["o_matmul_ta"] = x.transpose(-1, -2) @ T(W["w.b"])
        r["o_matmul_bcast"] = x @ T(W["w.c"]).transpose(-1, -2)
        r["o_norms"] = (F.layer_norm(x, (8,), T(W["ln.weight"]), None, 1e-5)
                        + x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * T(W["rms.weight"]))
        r["o_gap"] = F.adaptive_avg_pool2d(x, 1)
        r["o_conv_rect"] = F.conv2d(F.pad(x, (2, 0, 1, 1)), T(W["conv.weight"]), None, (1, 2), 0, (2, 1))
        return r
    return g, {}, ref, ("one small graph per op family: split/concat, strided slice, reductions "
                        "(keepdims false), pow/log/rsqrt/..., pools with (asymmetric) padding, 4-d "
                        "transpose, reshape -1, matmul transpose_a / broadcast, rectangular conv2d")


EXAMPLES = [
    ("gpt2_block", ex_gpt2_block, "f32"),
    ("gpt2_stack", ex_gpt2_stack, "f32"),
    ("llama_block", ex_llama_block, "f32"),
    ("bert_layer", ex_bert_layer, "f32"),
    ("cross_attention", ex_cross_attention, "f32"),
    ("resnet_small", ex_resnet_small, "f32"),
    ("attention_f16", ex_attention_f16, "f16"),
    ("layernorm_bf16", ex_layernorm_bf16, "bf16"),
    ("mlp_tiny", ex_mlp_tiny, "f32"),
    ("ops_misc", ex_ops_misc, "f32"),
]

# Suggested comparison tolerance per storage dtype (see docs/examples.md):
# |got - expected| <= atol + rtol * |expected| elementwise.
TOL = {"f32": {"rtol": 1e-3, "atol": 1e-4}, "f16": {"rtol": 2e-2, "atol": 2e-3},
       "bf16": {"rtol": 2e-2, "atol": 2e-2}}


def generate(name, fn, dtype):
    t0 = time.time()
    g, given, ref, readme = fn()
    d = os.path.join(EX, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    path = g.write(d)
    inputs = seeded_inputs(g, given)
    for n, arr in given.items():
        dt = next(t["dtype"] for t in g.inputs if t["name"] == n)
        os.makedirs(os.path.join(d, "inputs"), exist_ok=True)
        np.save(os.path.join(d, "inputs", n + ".npy"), mcir_seed.to_storage(arr, dt))
    with torch.no_grad():
        exp = ref(g.values, inputs)
    assert sorted(exp) == sorted(g.outputs), (sorted(exp), g.outputs)
    os.makedirs(os.path.join(d, "expected"), exist_ok=True)
    for o in g.outputs:
        arr = np.ascontiguousarray(exp[o].numpy().astype("<f4"))
        np.save(os.path.join(d, "expected", o + ".npy"), arr)
    with open(os.path.join(d, "README"), "w") as f:
        f.write(readme + "\n")
    # cross-check: spec checker + numpy interpreter of the graph itself
    _, shapes, _ = mcir_graph.check(path)
    got = mcir_graph.interpret(path, given)
    worst = 0.0
    tol = TOL[dtype]
    for o in g.outputs:
        e = np.load(os.path.join(d, "expected", o + ".npy"))
        assert list(e.shape) == shapes[o], (o, e.shape, shapes[o])
        err = np.abs(got[o].astype(np.float64) - e)
        bad = err > tol["atol"] + tol["rtol"] * np.abs(e)
        rel = float((err / (np.abs(e) + tol["atol"])).max())
        worst = max(worst, rel)
        if bad.any() or not np.isfinite(e).all():
            raise SystemExit("%s: numpy interpreter disagrees with PyTorch on %s: max abs err %g"
                             % (name, o, err.max()))
    print("%-16s %5d nodes  outputs %s  numpy interp vs torch: max |d|/(|ref|+atol) %.2e  %.1fs" % (
        name, len(g.nodes), ", ".join("%s%s" % (o, shapes[o]) for o in g.outputs), worst, time.time() - t0))
    entry = {"graph": "%s/graph.json" % name, "dtype": dtype,
             "inputs": {n: "%s/inputs/%s.npy" % (name, n) for n in given},
             "outputs": {o: "%s/expected/%s.npy" % (name, o) for o in g.outputs}}
    entry.update(tol)
    return entry


def main(argv):
    want = argv[1:] or [n for n, _, _ in EXAMPLES]
    idx_path = os.path.join(EX, "index.json")
    index = {}
    if os.path.exists(idx_path):
        with open(idx_path) as f:
            index = json.load(f)
    for name, fn, dtype in EXAMPLES:
        if name in want:
            index[name] = generate(name, fn, dtype)
    index = {n: index[n] for n, _, _ in EXAMPLES if n in index}
    with open(idx_path, "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv)
