#!/usr/bin/env python3
"""Writes the symbolic-dimension test graphs of tests/test_dims.c from the
examples (run from the source root; the outputs are committed):

  gpt2_block_seq.json  examples/gpt2_block with x [1, "seq", 768], seq in
                       [1, 128]: the head reshapes name "seq", and the
                       causal mask is built for any length (arange to
                       "seq", greater, where) instead of a 128x128 constant.
  gpt2_block_batch_seq.json  the same with x ["batch", "seq", 768], batch
                       in [1, 3]: head reshapes to ["batch", "seq", 12, 64].
  cnn_batch.json       examples/resnet_small with x ["batch", 3, 32, 32],
                       batch in [1, 4]; the flatten reshapes to ["batch", 64].
  llama_block_seq.json examples/llama_block with x [1, "seq", 1024], seq in
                       [1, 128]: the rotary tables sliced to their first seq
                       rows, the causal mask built as in gpt2_block_seq.
"""
import json

def causal_mask(g):
    """The causal mask for any length (arange, greater, where) in place of
    the example's constant one: its nodes (c.causal_mask the output) and
    the two constants they select from, added to g's weights."""
    g["weights"] = [w for w in g["weights"] if w["name"] != "c.causal_mask"]
    g["weights"] += [{"name": "c.mask_zero", "dtype": "f32", "shape": [], "value": 0.0},
                     {"name": "c.mask_neg", "dtype": "f32", "shape": [], "value": -10000.0}]
    return [
    {"name": "c.pos_i", "op": "arange", "inputs": [], "outputs": ["c.pos_i"],
     "attrs": {"end": "seq"}},
    {"name": "c.rows", "op": "reshape", "inputs": ["c.pos_i"], "outputs": ["c.rows"],
     "attrs": {"shape": ["seq", 1]}},
    {"name": "c.later", "op": "greater", "inputs": ["c.pos_i", "c.rows"],
     "outputs": ["c.later"]},
    {"name": "c.causal", "op": "where", "inputs": ["c.later", "c.mask_neg", "c.mask_zero"],
     "outputs": ["c.causal_mask"]},
]


def gpt2(batch=False):
    g = json.load(open("examples/gpt2_block/graph.json"))
    g["name"] = "gpt2_block_batch_seq" if batch else "gpt2_block_seq"
    dims = {"seq": {"min": 1, "max": 128}}
    if batch:
        dims = {"batch": {"min": 1, "max": 3}, **dims}
    out = {"mcir": 1, "name": g["name"], "dims": dims}
    g["inputs"][0]["shape"] = ["batch" if batch else 1, "seq", 768]
    mask_nodes = causal_mask(g)
    for n in g["nodes"]:
        if n["op"] == "reshape":
            n["attrs"]["shape"] = ["seq" if d == 128 else d for d in n["attrs"]["shape"]]
            if batch:
                n["attrs"]["shape"][0] = "batch"
    g["nodes"] = mask_nodes + g["nodes"]
    for k in ("inputs", "weights", "nodes", "outputs"):
        out[k] = g[k]
    return out

def cnn():
    g = json.load(open("examples/resnet_small/graph.json"))
    out = {"mcir": 1, "name": "cnn_batch", "dims": {"batch": {"min": 1, "max": 4}}}
    g["inputs"][0]["shape"][0] = "batch"
    for n in g["nodes"]:
        if n["op"] == "reshape":
            n["attrs"]["shape"][0] = "batch"
    for k in ("inputs", "weights", "nodes", "outputs"):
        out[k] = g[k]
    return out

def llama():
    g = json.load(open("examples/llama_block/graph.json"))
    out = {"mcir": 1, "name": "llama_block_seq", "dims": {"seq": {"min": 1, "max": 128}}}
    g["inputs"][0]["shape"] = [1, "seq", 1024]
    for w in g["weights"]:   # data files stay the example's
        if "data" in w:
            w["data"] = "../../../examples/llama_block/" + w["data"]
    pre = causal_mask(g)
    # the rotary tables hold 128 positions: the first seq of them
    for t in ("rope.cos", "rope.sin"):
        pre.append({"name": t + ".first", "op": "slice", "inputs": [t], "outputs": [t + ".seq"],
                    "attrs": {"axis": 0, "start": 0, "end": "seq"}})
    for n in g["nodes"]:
        n["inputs"] = [i + ".seq" if i in ("rope.cos", "rope.sin") else i for i in n["inputs"]]
        if n["op"] == "reshape":
            n["attrs"]["shape"] = ["seq" if d == 128 else d for d in n["attrs"]["shape"]]
    g["nodes"] = pre + g["nodes"]
    for k in ("inputs", "weights", "nodes", "outputs"):
        out[k] = g[k]
    return out

for name, g in (("gpt2_block_seq", gpt2()), ("gpt2_block_batch_seq", gpt2(True)),
                ("cnn_batch", cnn()), ("llama_block_seq", llama())):
    with open(f"tests/data/dims/{name}.json", "w") as f:
        json.dump(g, f, indent=1)
        f.write("\n")
