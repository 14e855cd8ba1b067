#!/usr/bin/python3
"""gen_decode.py — writes the greedy-generation test data of tests/test_dims.c
(run from the source root; the outputs are committed, the tests never run it):

  generate/prefill.json  examples/gpt2_lm's model (2 blocks, d 64, 4 heads,
                         vocab 256, seeded weights) over a prompt of "seq"
                         tokens, seq in [1, 64]: logits and each layer's K
                         and V heads (present_k0 .. present_v1, [1, 4, seq,
                         16]) as outputs; the causal mask built for any
                         length (arange, greater, where).
  generate/decode.json   one decode step of the same model: the token
                         (input_ids [1, 1]) at position_ids [1, 1], each
                         layer's cache of "past" tokens (past_k0 .. [1, 4,
                         past, 16], past in [1, 63]) as inputs; logits and
                         the caches grown by the new token (present_k0 ..
                         [1, 4, past + 1, 16]) as outputs. One compilation
                         serves every length: the caches grow from step to
                         step without recompiling.
  generate/decode_state.json
                         the same step with each layer's cache at a fixed
                         capacity of CAP (64) rows, updated in place: the
                         inputs cache_k0 .. cache_v1 [1, 4, 64, 16] hold
                         "past" valid rows (past in [1, 62]: nothing
                         binds it, a run gives it); the step's cache
                         concat(cache[:past], new row, cache[past+1:]) is
                         the output cache_k0_out .. written over the input
                         ("state"), and attention reads its first past+1
                         rows. The caller's loop never copies a cache.
  generate/prompt.npy    5 prompt tokens (i64).
  generate/tokens.npy    the 8 tokens greedy decoding gives after the
                         prompt, computed with PyTorch in float64 from the
                         whole sequence at each step (no cache), each argmax
                         checked to be no near tie.

Needs numpy and Debian's python3-torch.
"""
import importlib.util
import json
import os

import numpy as np
import torch

ROOT = os.getcwd()
spec = importlib.util.spec_from_file_location("lm", os.path.join(ROOT, "examples/gpt2_lm/gen.py"))
lm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lm)

OUT = os.path.join(ROOT, "tests/data/dims/generate")
MARK_SEQ, MARK_PAST = 37, 41   # sizes the builder writes, named afterwards
PROMPT, NEW = 5, 8
lm.NPOS = 64                   # positions: the prompt and what it generates fit
# The seeded embeddings are small and alike: greedy decoding then repeats
# one token whatever the prompt. Embeddings drawn N(0, 1) (tokens) and
# N(0, 1/4) (positions), as data files, make the next token depend on the
# context; the rest of the weights stay seeded.
EMB = {"wte": np.random.RandomState(7).standard_normal((lm.V, lm.D)).astype("<f4"),
       "wpe": (0.5 * np.random.RandomState(8).standard_normal((lm.NPOS, lm.D))).astype("<f4")}


def causal_mask_nodes():
    return [
        {"name": "c.pos_i", "op": "arange", "inputs": [], "outputs": ["c.pos_i"], "attrs": {"end": "seq"}},
        {"name": "c.rows", "op": "reshape", "inputs": ["c.pos_i"], "outputs": ["c.rows"],
         "attrs": {"shape": ["seq", 1]}},
        {"name": "c.later", "op": "greater", "inputs": ["c.pos_i", "c.rows"], "outputs": ["c.later"]},
        {"name": "c.causal", "op": "where", "inputs": ["c.later", "c.mask_neg", "c.mask_zero"],
         "outputs": ["c.causal_mask"]},
    ]


def named(v, mark, name):
    return name if v == mark else v


def embeddings_from_files(j):
    for w in j["weights"]:
        if w["name"] in EMB:
            w.pop("value", None)
            w["data"] = "w/%s.npy" % w["name"]


def prefill():
    g = lm.Graph("gpt2_prefill")
    h = lm.embed(g, MARK_SEQ, 0)
    mask = g.weight("c.causal_mask", [MARK_SEQ, MARK_SEQ], value=[[0] * MARK_SEQ] * MARK_SEQ)
    for i in range(lm.LAYERS):
        h = lm.block(g, h, "h%d" % i, MARK_SEQ, mask=mask)
    lm.head(g, h)
    g.output("logits")
    d = os.path.join(OUT, "tmp_prefill")
    g.write(d)
    j = json.load(open(os.path.join(d, "graph.json")))
    j = {"mcir": 1, "name": "gpt2_prefill", "dims": {"seq": {"min": 1, "max": 64}}, **{
        k: j[k] for k in ("inputs", "weights", "nodes", "outputs")}}
    j["inputs"][0]["shape"] = [1, "seq"]
    j["weights"] = [w for w in j["weights"] if w["name"] != "c.causal_mask"]
    j["weights"] += [{"name": "c.mask_zero", "dtype": "f32", "shape": [], "value": 0.0},
                     {"name": "c.mask_neg", "dtype": "f32", "shape": [], "value": -10000.0}]
    for n in j["nodes"]:
        a = n.get("attrs", {})
        if n["op"] == "reshape":
            a["shape"] = [named(v, MARK_SEQ, "seq") for v in a["shape"]]
        if n["op"] == "arange":
            a["end"] = named(a["end"], MARK_SEQ, "seq")
    j["nodes"] = causal_mask_nodes() + j["nodes"]
    embeddings_from_files(j)
    for i in range(lm.LAYERS):
        j["outputs"] += ["h%d.attn.k.to_heads.y" % i, "h%d.attn.v.to_heads.y" % i]
    return g, j


def decode():
    g = lm.Graph("gpt2_decode_step")
    ids = g.input("input_ids", [1, 1], "i64")
    pos = g.input("position_ids", [1, 1], "i64")
    tok = g.op("gather", [g.weight("wte", [lm.V, lm.D]), ids], "embed.tokens")
    pe = g.op("gather", [g.weight("wpe", [lm.NPOS, lm.D]), pos], "embed.positions")
    h = g.op("add", [tok, pe], "embed.sum")
    pasts = []
    for i in range(lm.LAYERS):
        pasts.append((g.input("past_k%d" % i, [1, lm.NH, MARK_PAST, lm.HD]),
                      g.input("past_v%d" % i, [1, lm.NH, MARK_PAST, lm.HD])))
    for i in range(lm.LAYERS):
        h = lm.block(g, h, "h%d" % i, 1, past=pasts[i])
    lm.head(g, h)
    g.output("logits")
    d = os.path.join(OUT, "tmp_decode")
    g.write(d)
    j = json.load(open(os.path.join(d, "graph.json")))
    j = {"mcir": 1, "name": "gpt2_decode_step", "dims": {"past": {"min": 1, "max": 63}}, **{
        k: j[k] for k in ("inputs", "weights", "nodes", "outputs")}}
    for t in j["inputs"]:
        t["shape"] = [named(v, MARK_PAST, "past") for v in t["shape"]]
    for n in j["nodes"]:
        if n["op"] == "concat":
            j["outputs"].append(n["outputs"][0])
    embeddings_from_files(j)
    return g, j


CAP = 64   # the state caches' capacity: a position table's worth (lm.NPOS)


def decode_state(jd):
    """decode.json with fixed-capacity caches updated in place."""
    j = json.loads(json.dumps(jd))
    j["name"] = "gpt2_decode_step_state"
    j["dims"] = {"past": {"min": 1, "max": CAP - 2}}
    cache = {}
    for t in j["inputs"]:
        if t["name"].startswith("past_"):
            cache[t["name"]] = t["name"].replace("past_", "cache_")
            t["name"] = cache[t["name"]]
            t["shape"] = [1, lm.NH, CAP, lm.HD]
    nodes, outputs, state = [], ["logits"], []
    for n in j["nodes"]:
        if n["op"] != "concat":
            nodes.append(n)
            continue
        c, new = cache[n["inputs"][0]], n["inputs"][1]
        p = n["name"]              # h0.attn.k_all
        nodes += [
            {"name": p + ".head", "op": "slice", "inputs": [c], "outputs": [p + ".head.y"],
             "attrs": {"axis": 2, "start": 0, "end": "past"}},
            {"name": p + ".tail", "op": "slice", "inputs": [c], "outputs": [p + ".tail.y"],
             "attrs": {"axis": 2, "start": "past+1", "end": CAP}},
            {"name": p + ".update", "op": "concat", "inputs": [p + ".head.y", new, p + ".tail.y"],
             "outputs": [c + "_out"], "attrs": {"axis": 2}},
            {"name": p, "op": "slice", "inputs": [c + "_out"], "outputs": n["outputs"],
             "attrs": {"axis": 2, "start": 0, "end": "past+1"}},
        ]
        outputs.append(c + "_out")
        state.append({"input": c, "output": c + "_out"})
    j["nodes"], j["outputs"], j["state"] = nodes, outputs, state
    return j


def main():
    torch.set_num_threads(2)
    os.makedirs(OUT, exist_ok=True)
    gp, jp = prefill()
    gd, jd = decode()
    for name, j in (("prefill", jp), ("decode", jd), ("decode_state", decode_state(jd))):
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(j, f, indent=1)
            f.write("\n")
    for t in ("tmp_prefill", "tmp_decode"):
        import shutil
        shutil.rmtree(os.path.join(OUT, t))
    # both graphs seed the same weights the same way (mcir_seed, seed 0)
    W = dict(gp.values)
    for k, v in gd.values.items():
        if k in W:
            assert np.array_equal(np.asarray(W[k]), np.asarray(v)), k
    os.makedirs(os.path.join(OUT, "w"), exist_ok=True)
    for k, v in EMB.items():
        np.save(os.path.join(OUT, "w", k + ".npy"), v)
        W[k] = v
    # the first prompt (by seed) whose continuation has no near tie and
    # at least 4 distinct tokens: a test of the context, not of one token
    for seed in range(100):
        ids = np.random.RandomState(seed).randint(0, lm.V, size=(1, PROMPT)).astype("<i8")
        seq, out = ids, []
        try:
            with torch.no_grad():
                for _ in range(NEW):
                    nxt = lm.greedy(lm.ref_lm(W, seq, 0))
                    out.append(int(nxt[0]))
                    seq = np.concatenate([seq, nxt.reshape(1, 1)], axis=1)
        except AssertionError:   # a near tie
            continue
        if len(set(out)) >= 4:
            break
    assert len(set(out)) >= 4, out
    np.save(os.path.join(OUT, "prompt.npy"), ids)
    np.save(os.path.join(OUT, "tokens.npy"), np.array(out, dtype="<i8"))
    print("prompt", ids.tolist(), "tokens", out)


if __name__ == "__main__":
    main()
