#!/usr/bin/python3
"""gen.py — regenerate examples/gpt2_lm and examples/gpt2_decode (graph.json,
inputs/, expected/, README) and their entries in examples/index.json.

    /usr/bin/python3 examples/gpt2_lm/gen.py

A small GPT-2-style language model from token ids to logits: token and
position embeddings looked up with `gather` (input_ids i64, position ids from
`arange`), 2 pre-LN blocks in the decomposed form exporters write, a final
layer norm and the LM head tied to the token embedding (matmul with
transpose_b), plus the greedy next token (`argmax` of the last position).
gpt2_decode is one decode step of the same model: one new token at position
P, the K/V caches of the P earlier tokens as inputs, attention with Nq = 1
over P + 1 keys (the split-KV client). Weights are mcir's seeded fill
(scripts/mcir_seed.py, seed 0); the caches are seeded inputs. The expected
outputs are computed independently with PyTorch in float64 (F.layer_norm,
F.gelu, explicit softmax attention). Needs numpy and Debian's python3-torch;
the build and the tests never run it.
"""
import json
import math
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
EX = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(os.path.dirname(EX), "scripts"))
import mcir_graph  # noqa: E402
import mcir_seed  # noqa: E402
from mcir_graph import Graph  # noqa: E402

# the ops of mcir/ops_int.c, for the graph builder's op check
for _o, _n in (("gather", 2), ("argmax", 1), ("cast", 1)):
    mcir_graph.OPS.setdefault(_o, (_n, _n, {}))
mcir_graph.OPS.setdefault("arange", (0, 0, {}))

V, D, NH, HD, FF, NPOS, LAYERS = 256, 64, 4, 16, 256, 1024, 2
S = 32           # gpt2_lm: sequence length
P = 1023         # gpt2_decode: tokens in the cache (Nk = P + 1 = 1024)
EPS = 1e-5


def T(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float32).astype(np.float64))


# ------------------------------------------------------------------ graph

def layernorm(g, x, p):
    """Two-pass layer norm as exporters write it (the rewrite engine fuses it)."""
    mean = g.op("reduce_mean", [x], p + ".mean", axes=[-1], keepdims=True)
    d = g.op("sub", [x, mean], p + ".center")
    d2 = g.op("mul", [d, d], p + ".square")
    var = g.op("reduce_mean", [d2], p + ".var", axes=[-1], keepdims=True)
    ve = g.op("add", [var, g.const("c.ln_eps", EPS)], p + ".var_eps")
    std = g.op("sqrt", [ve], p + ".std")
    n = g.op("div", [d, std], p + ".normed")
    gm = g.op("mul", [n, g.weight(p + ".weight", [D])], p + ".gamma")
    return g.op("add", [gm, g.weight(p + ".bias", [D])], p + ".beta")


def linear(g, x, p, din, dout):
    y = g.op("matmul", [x, g.weight(p + ".weight", [din, dout])], p + ".matmul")
    return g.op("add", [y, g.weight(p + ".bias", [dout])], p + ".bias_add")


def gelu_tanh(g, x, p):
    x3 = g.op("pow", [x, g.const("c.three", 3.0)], p + ".cube")
    a = g.op("mul", [x3, g.const("c.gelu_coeff", 0.044715)], p + ".cube_coeff")
    b = g.op("add", [x, a], p + ".inner")
    c = g.op("mul", [b, g.const("c.sqrt_2_over_pi", math.sqrt(2.0 / math.pi))], p + ".inner_scale")
    t = g.op("tanh", [c], p + ".tanh")
    t1 = g.op("add", [t, g.const("c.one", 1.0)], p + ".one_plus")
    hx = g.op("mul", [g.const("c.half", 0.5), x], p + ".half_x")
    return g.op("mul", [hx, t1], p + ".gelu")


def heads(g, x, p, seq):
    r = g.op("reshape", [x], p + ".split_heads", shape=[1, seq, NH, HD])
    return g.op("transpose", [r], p + ".to_heads", perm=[0, 2, 1, 3])


def block(g, x, p, seq, mask=None, past=None):
    """One GPT-2 block; with past = (k_cache, v_cache) the new keys and
    values are appended to the caches (decode)."""
    h = layernorm(g, x, p + ".ln_1")
    qkv = linear(g, h, p + ".attn.c_attn", D, 3 * D)
    q, k, v = g.op("split", [qkv], p + ".attn.split_qkv", nout=3, axis=-1, sizes=[D, D, D],
                   out=[p + ".attn.q", p + ".attn.k", p + ".attn.v"])
    q = heads(g, q, p + ".attn.q", seq)
    k = heads(g, k, p + ".attn.k", seq)
    v = heads(g, v, p + ".attn.v", seq)
    if past:
        k = g.op("concat", [past[0], k], p + ".attn.k_all", axis=2)
        v = g.op("concat", [past[1], v], p + ".attn.v_all", axis=2)
    kt = g.op("transpose", [k], p + ".attn.k_t", perm=[0, 1, 3, 2])
    s = g.op("matmul", [q, kt], p + ".attn.qk")
    s = g.op("div", [s, g.const("c.attn_div", math.sqrt(HD))], p + ".attn.scale")
    if mask:
        s = g.op("add", [s, mask], p + ".attn.mask")
    a = g.op("softmax", [s], p + ".attn.softmax", axis=-1)
    o = g.op("matmul", [a, v], p + ".attn.pv")
    o = g.op("transpose", [o], p + ".attn.from_heads", perm=[0, 2, 1, 3])
    o = g.op("reshape", [o], p + ".attn.merge_heads", shape=[1, seq, D])
    o = linear(g, o, p + ".attn.c_proj", D, D)
    x = g.op("add", [x, o], p + ".attn.residual")
    h = layernorm(g, x, p + ".ln_2")
    h = linear(g, h, p + ".mlp.c_fc", D, FF)
    h = gelu_tanh(g, h, p + ".mlp.act")
    h = linear(g, h, p + ".mlp.c_proj", FF, D)
    return g.op("add", [x, h], p + ".mlp.residual")


def embed(g, seq, start):
    ids = g.input("input_ids", [1, seq], "i64")
    wte = g.weight("wte", [V, D])
    wpe = g.weight("wpe", [NPOS, D])
    tok = g.op("gather", [wte, ids], "embed.tokens")
    pos = g.op("arange", [], "embed.position_ids", start=start, end=start + seq)
    pe = g.op("gather", [wpe, pos], "embed.positions")
    return g.op("add", [tok, pe], "embed.sum")


def head(g, h):
    h = layernorm(g, h, "ln_f")
    return g.op("matmul", [h, "wte"], "lm_head", out="logits", transpose_b=True)


# -------------------------------------------------------------- reference

def ref_block(W, x, p, past=None):
    def lin(h, q):
        return h @ T(W[q + ".weight"]) + T(W[q + ".bias"])
    h = F.layer_norm(x, (D,), T(W[p + ".ln_1.weight"]), T(W[p + ".ln_1.bias"]), EPS)
    q, k, v = lin(h, p + ".attn.c_attn").split(D, dim=-1)
    seq = x.shape[1]
    q, k, v = (t.reshape(1, seq, NH, HD).transpose(1, 2) for t in (q, k, v))
    if past is not None:
        k = torch.cat([past[0], k], dim=2)
        v = torch.cat([past[1], v], dim=2)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(HD)
    else:
        att = (q @ k.transpose(-1, -2)) / math.sqrt(HD)
        att = att.masked_fill(torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1), float("-inf"))
    o = torch.softmax(att, dim=-1) @ v
    o = o.transpose(1, 2).reshape(1, seq, D)
    x = x + lin(o, p + ".attn.c_proj")
    h = F.layer_norm(x, (D,), T(W[p + ".ln_2.weight"]), T(W[p + ".ln_2.bias"]), EPS)
    h = F.gelu(lin(h, p + ".mlp.c_fc"), approximate="tanh")
    return x + lin(h, p + ".mlp.c_proj")


def ref_lm(W, ids, start, pasts=None):
    seq = ids.shape[1]
    x = T(W["wte"])[torch.from_numpy(ids)] + T(W["wpe"])[start:start + seq]
    for i in range(LAYERS):
        x = ref_block(W, x, "h%d" % i, None if pasts is None else pasts[i])
    x = F.layer_norm(x, (D,), T(W["ln_f.weight"]), T(W["ln_f.bias"]), EPS)
    return x @ T(W["wte"]).t()


# ------------------------------------------------------------- examples

def write(name, g, inputs, expected, readme):
    d = os.path.join(EX, name)
    for sub in ("inputs", "expected"):
        shutil.rmtree(os.path.join(d, sub), ignore_errors=True)
    g.write(d)
    os.makedirs(os.path.join(d, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(d, "expected"), exist_ok=True)
    for n, arr in inputs.items():
        np.save(os.path.join(d, "inputs", n + ".npy"), arr)
    for n, arr in expected.items():
        np.save(os.path.join(d, "expected", n + ".npy"), np.ascontiguousarray(arr))
    with open(os.path.join(d, "README"), "w") as f:
        f.write(readme + "\n")
    return {"graph": "%s/graph.json" % name, "dtype": "f32",
            "inputs": {n: "%s/inputs/%s.npy" % (name, n) for n in inputs},
            "outputs": {n: "%s/expected/%s.npy" % (name, n) for n in expected},
            "rtol": 1e-3, "atol": 1e-4}


def greedy(logits):
    """argmax of the last position, checked to be unambiguous."""
    last = logits[0, -1]
    top = torch.topk(last, 2).values
    assert float(top[0] - top[1]) > 1e-3 * float(last.abs().max()), "near tie in argmax"
    return np.array([int(torch.argmax(last))], dtype="<i8")


def gpt2_lm():
    g = Graph("gpt2_lm")
    h = embed(g, S, 0)
    mask = g.weight("c.causal_mask", [S, S],
                    value=[[0 if j <= i else -10000 for j in range(S)] for i in range(S)])
    for i in range(LAYERS):
        h = block(g, h, "h%d" % i, S, mask=mask)
    logits = head(g, h)
    last = g.op("slice", [logits], "last_position", axis=1, start=S - 1, end=S)
    g.op("argmax", [last], "next_token", out="next_token", axis=-1)
    g.output("logits", "next_token")
    ids = np.random.RandomState(2024).randint(0, V, size=(1, S)).astype("<i8")
    with torch.no_grad():
        lg = ref_lm(g.values, ids, 0)
    nxt = greedy(lg)
    exp = {"logits": lg.numpy().astype("<f4"), "next_token": nxt.reshape(1, 1)}
    return write("gpt2_lm", g, {"input_ids": ids}, exp,
                 "GPT-2-style language model from token ids (i64) to logits: gather token + position "
                 "embeddings (arange position ids), 2 pre-LN blocks (d 64, 4 heads, decomposed "
                 "attention, tanh-GELU), ln_f, LM head tied to wte; next_token = argmax of the last "
                 "position; vocab 256, seq 32, f32")


def gpt2_decode():
    g = Graph("gpt2_decode")
    # the token at position P: wpe's rows from P on, the first of them (a
    # slice whose start is the cache length, so that it can be symbolic)
    ids = g.input("input_ids", [1, 1], "i64")
    tok = g.op("gather", [g.weight("wte", [V, D]), ids], "embed.tokens")
    rows = g.op("slice", [g.weight("wpe", [NPOS, D])], "embed.positions_from", axis=0, start=P, end=NPOS)
    pe = g.op("slice", [rows], "embed.positions", axis=0, start=0, end=1)
    h = g.op("add", [tok, pe], "embed.sum")
    pasts, names = [], []
    for i in range(LAYERS):
        k = g.input("past_k%d" % i, [1, NH, P, HD])
        v = g.input("past_v%d" % i, [1, NH, P, HD])
        pasts.append((k, v))
        names += [k, v]
    for i in range(LAYERS):
        h = block(g, h, "h%d" % i, 1, past=pasts[i])
    head(g, h)
    g.output("logits")
    ids = np.array([[7]], dtype="<i8")
    cache = {n: mcir_seed.fill(n, [1, NH, P, HD], "f32", "input", 0) for n in names}
    with torch.no_grad():
        lg = ref_lm(g.values, ids, P, [(T(cache["past_k%d" % i]), T(cache["past_v%d" % i]))
                                       for i in range(LAYERS)])
    entry = write("gpt2_decode", g, {"input_ids": ids}, {"logits": lg.numpy().astype("<f4")},
                  "one decode step of gpt2_lm: token at position past, K/V caches of past tokens per "
                  "layer as (seeded) inputs, past a symbolic dimension in [1, 1023] (compiled once for "
                  "every cache length; run at 1023 by default, where the expected logits are), "
                  "attention with Nq = 1 over past + 1 keys (split-KV, its splits at launch), f32")
    # the cache length as a symbolic dimension: the caches' shapes and the
    # position slice's start name it
    path = os.path.join(EX, "gpt2_decode", "graph.json")
    text = open(path).read()
    text = text.replace('"mcir": 1,\n', '"mcir": 1,\n  "dims": {"past": {"min": 1, "max": %d}},\n' % P, 1)
    text = text.replace('"shape": [1, %d, %d, %d]' % (NH, P, HD), '"shape": [1, %d, "past", %d]' % (NH, HD))
    text = text.replace('"attrs": {"axis": 0, "start": %d, "end": %d}' % (P, NPOS), '"attrs": {"axis": 0, "start": "past", "end": %d}' % NPOS)
    assert text.count('"past"') == 4 * LAYERS // 2 + 1 + 1, text.count('"past"')
    with open(path, "w") as f:
        f.write(text)
    return entry


def main():
    torch.set_num_threads(2)
    idx_path = os.path.join(EX, "index.json")
    with open(idx_path) as f:
        index = json.load(f)
    index["gpt2_lm"] = gpt2_lm()
    index["gpt2_decode"] = gpt2_decode()
    with open(idx_path, "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
