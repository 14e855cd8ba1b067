#!/usr/bin/python3
"""gen_blocks.py — the GPT-2 and Llama blocks of examples/ (same ops, same
decomposed form, same weight names) at benchmark scale: batch B, sequence
S, dtype f32/f16/bf16, written to OUT/{gpt2,llama}_b{B}_s{S}_{dtype}/graph.json
(weights seeded by name; the causal mask and rotary tables as .npy). Not
committed: at seq 2048 the mask alone is 8 MB; scripts/bench.sh makes them.

    /usr/bin/python3 bench/gen_blocks.py --out build-bench/blocks --batch 8 --seq 1024 2048 --dtype f16
"""
import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import mcir_graph  # noqa: E402
import mcir_seed  # noqa: E402
from mcir_graph import Graph  # noqa: E402

GPT2 = dict(H=768, NH=12, HD=64, FF=3072)
LLAMA = dict(H=1024, NH=16, HD=64, FF=2816)
MASK_NEG = -10000.0   # finite in f16 and bf16


def layernorm(g, x, p, hidden):
    mean = g.op("reduce_mean", [x], p + ".mean", axes=[-1], keepdims=True)
    d = g.op("sub", [x, mean], p + ".center")
    d2 = g.op("mul", [d, d], p + ".square")
    var = g.op("reduce_mean", [d2], p + ".var", axes=[-1], keepdims=True)
    ve = g.op("add", [var, g.const("c.ln_eps", 1e-5)], p + ".var_eps")
    n = g.op("div", [d, g.op("sqrt", [ve], p + ".std")], p + ".normed")
    gm = g.op("mul", [n, g.weight(p + ".weight", [hidden])], p + ".gamma")
    return g.op("add", [gm, g.weight(p + ".bias", [hidden])], p + ".beta")


def rmsnorm(g, x, p, hidden):
    sq = g.op("mul", [x, x], p + ".square")
    ms = g.op("reduce_mean", [sq], p + ".mean", axes=[-1], keepdims=True)
    me = g.op("add", [ms, g.const("c.rms_eps", 1e-6)], p + ".mean_eps")
    n = g.op("mul", [x, g.op("rsqrt", [me], p + ".rsqrt")], p + ".normed")
    return g.op("mul", [g.weight(p + ".weight", [hidden]), n], p + ".gamma")


def linear(g, x, p, din, dout, bias=True, transpose_b=False):
    w = g.weight(p + ".weight", [dout, din] if transpose_b else [din, dout])
    y = g.op("matmul", [x, w], p + ".matmul", transpose_b=transpose_b)
    return g.op("add", [y, g.weight(p + ".bias", [dout])], p + ".bias_add") if bias else y


def heads(g, x, p, b, s, nh, hd):
    r = g.op("reshape", [x], p + ".split_heads", shape=[b, s, nh, hd])
    return g.op("transpose", [r], p + ".to_heads", perm=[0, 2, 1, 3])


def merge(g, x, p, b, s, h):
    t = g.op("transpose", [x], p + ".from_heads", perm=[0, 2, 1, 3])
    return g.op("reshape", [t], p + ".merge_heads", shape=[b, s, h])


def causal_mask(s):
    m = np.zeros((s, s), dtype=np.float32)
    m[np.triu_indices(s, 1)] = MASK_NEG
    return m


def gpt2(b, s):
    H, NH, HD, FF = GPT2["H"], GPT2["NH"], GPT2["HD"], GPT2["FF"]
    g = Graph("gpt2_b%d_s%d" % (b, s))
    x = g.input("x", [b, s, H])
    mask = g.weight("c.causal_mask", [s, s], data=causal_mask(s))
    p = "h0"
    h = layernorm(g, x, p + ".ln_1", H)
    qkv = linear(g, h, p + ".attn.c_attn", H, 3 * H)
    q, k, v = g.op("split", [qkv], p + ".attn.split_qkv", nout=3, axis=-1, sizes=[H, H, H],
                   out=[p + ".attn.q", p + ".attn.k", p + ".attn.v"])
    q, k, v = (heads(g, t, p + ".attn." + n, b, s, NH, HD) for t, n in ((q, "q"), (k, "k"), (v, "v")))
    kt = g.op("transpose", [k], p + ".attn.k_t", perm=[0, 1, 3, 2])
    sc = g.op("div", [g.op("matmul", [q, kt], p + ".attn.qk"), g.const("c.attn_div", 8.0)], p + ".attn.scale")
    a = g.op("softmax", [g.op("add", [sc, mask], p + ".attn.mask")], p + ".attn.softmax", axis=-1)
    o = merge(g, g.op("matmul", [a, v], p + ".attn.pv"), p + ".attn", b, s, H)
    x = g.op("add", [x, linear(g, o, p + ".attn.c_proj", H, H)], p + ".attn.residual")
    h = linear(g, layernorm(g, x, p + ".ln_2", H), p + ".mlp.c_fc", H, FF)
    x3 = g.op("pow", [h, g.const("c.three", 3.0)], p + ".mlp.act.cube")
    inner = g.op("add", [h, g.op("mul", [x3, g.const("c.gelu_coeff", 0.044715)], p + ".mlp.act.cube_coeff")],
                 p + ".mlp.act.inner")
    t = g.op("tanh", [g.op("mul", [inner, g.const("c.sqrt_2_over_pi", 0.7978845608028654)],
                           p + ".mlp.act.inner_scale")], p + ".mlp.act.tanh")
    gl = g.op("mul", [g.op("mul", [g.const("c.half", 0.5), h], p + ".mlp.act.half_x"),
                      g.op("add", [t, g.const("c.one", 1.0)], p + ".mlp.act.one_plus")], p + ".mlp.act.gelu")
    g.op("add", [x, linear(g, gl, p + ".mlp.c_proj", FF, H)], p + ".mlp.residual", out="y")
    g.output("y")
    return g


def llama(b, s):
    H, NH, HD, FF = LLAMA["H"], LLAMA["NH"], LLAMA["HD"], LLAMA["FF"]
    g = Graph("llama_b%d_s%d" % (b, s))
    x = g.input("x", [b, s, H])
    inv = 1.0 / 10000.0 ** (np.arange(0, HD, 2, dtype=np.float64) / HD)
    f = np.outer(np.arange(s, dtype=np.float64), inv)
    emb = np.concatenate([f, f], axis=-1)
    cos = g.weight("rope.cos", [s, HD], data=np.cos(emb).astype(np.float32))
    sin = g.weight("rope.sin", [s, HD], data=np.sin(emb).astype(np.float32))
    mask = g.weight("c.causal_mask", [1, 1, s, s], data=causal_mask(s).reshape(1, 1, s, s))
    p = "l0"
    h = rmsnorm(g, x, p + ".input_norm", H)
    q, k, v = (heads(g, linear(g, h, p + ".attn.%s_proj" % n, H, H, bias=False, transpose_b=True),
                     p + ".attn." + n, b, s, NH, HD) for n in ("q", "k", "v"))

    def rope(t, pp):
        t1 = g.op("slice", [t], pp + ".lo", axis=-1, start=0, end=HD // 2)
        t2 = g.op("slice", [t], pp + ".hi", axis=-1, start=HD // 2, end=HD)
        rot = g.op("concat", [g.op("neg", [t2], pp + ".neg_hi"), t1], pp + ".rotate_half", axis=-1)
        return g.op("add", [g.op("mul", [t, cos], pp + ".mul_cos"), g.op("mul", [rot, sin], pp + ".mul_sin")],
                    pp + ".rotated")
    q = g.op("scale", [rope(q, p + ".attn.rope_q")], p + ".attn.q_scale", value=0.125)
    k = rope(k, p + ".attn.rope_k")
    sc = g.op("add", [g.op("matmul", [q, k], p + ".attn.qk", transpose_b=True), mask], p + ".attn.mask")
    a = g.op("softmax", [sc], p + ".attn.softmax", axis=-1)
    o = merge(g, g.op("matmul", [a, v], p + ".attn.pv"), p + ".attn", b, s, H)
    x = g.op("add", [x, linear(g, o, p + ".attn.o_proj", H, H, bias=False, transpose_b=True)], p + ".attn.residual")
    h = rmsnorm(g, x, p + ".post_attn_norm", H)
    gt = linear(g, h, p + ".mlp.gate_proj", H, FF, bias=False, transpose_b=True)
    up = linear(g, h, p + ".mlp.up_proj", H, FF, bias=False, transpose_b=True)
    si = g.op("mul", [gt, g.op("sigmoid", [gt], p + ".mlp.sigmoid")], p + ".mlp.silu")
    m = g.op("mul", [si, up], p + ".mlp.gate_up")
    g.op("add", [x, linear(g, m, p + ".mlp.down_proj", FF, H, bias=False, transpose_b=True)], p + ".mlp.residual",
         out="y")
    g.output("y")
    return g


def write(g, out, dtype):
    """Every input and weight (scalar constants too) in dtype."""
    for t in g.inputs + g.weights:
        t["dtype"] = dtype
    for rel in list(g.data_files):
        name = os.path.splitext(os.path.basename(rel))[0]
        g.data_files[rel] = mcir_seed.to_storage(g.values[name], dtype)
    d = os.path.join(out, "%s_%s" % (g.name, dtype))
    path = g.write(d)
    mcir_graph.check(path)
    return path


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--dtype", default="f16", choices=["f32", "f16", "bf16"])
    a = ap.parse_args(argv)
    for s in a.seq:
        for fn in (gpt2, llama):
            print(write(fn(a.batch, s), a.out, a.dtype))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
