#!/usr/bin/env python3
"""Generates tests/data/onnx/models/hf_*_dynamo/: tiny random Hugging Face
models (python/tests/test_transformers.py's configs: GPT-2, Llama with
grouped-query attention, BERT) exported by PyTorch's own exporter
(torch.onnx.export(..., dynamo=True), opset 18, static shapes), with the
token ids and onnxruntime's output, listed in models/index.json; and the
same three exported with a dynamic `seq` (torch.export.Dim, 2..32) into
tests/data/onnx/dims/hf_*_dynamo/ (output renamed `y`), and BERT by the
TorchScript exporter (opset 17, dynamic axis `seq`) into
dims/hf_bert_torchscript/, with ids and
onnxruntime's outputs at seq 2, 5 and 11, listed in dims/index.json. Run
once (the tests need no Python):

  venv/bin/python scripts/gen_onnx_hf.py [--dynamic]
Needs torch >= 2.5, transformers, onnx, onnxscript, onnxruntime.
"""
import json
import os
import sys
import warnings

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
OUT = os.path.join(ROOT, "tests", "data", "onnx", "models")
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))


class Logits(torch.nn.Module):
    """The model's first output (logits, or BERT's hidden states), no cache."""

    def __init__(self, m, name):
        super().__init__()
        self.m, self.bert = m, name == "bert"

    def forward(self, ids):
        return (self.m(ids) if self.bert else self.m(ids, use_cache=False))[0]


def dynamic():
    """The exports with a dynamic seq (tests/test_onnx_dims.c)."""
    import onnx
    import onnxruntime as ort
    from test_transformers import IDS, tiny
    warnings.filterwarnings("ignore")
    dims = os.path.join(ROOT, "tests", "data", "onnx", "dims")
    index_path = os.path.join(dims, "index.json")
    index = json.load(open(index_path))
    long_ids = torch.tensor([[3, 17, 99, 5, 64, 2, 31, 8, 120, 77, 45]])
    # the TorchScript exporter (dynamo=False) takes BERT; GPT-2 and Llama
    # stop there at aten::diff (transformers 5's masks), in PyTorch itself
    for name, exporter in (("gpt2", "dynamo"), ("llama", "dynamo"), ("bert", "dynamo"),
                           ("bert", "torchscript")):
        m = tiny(name)

        key = "hf_%s_%s" % (name, exporter)
        d = os.path.join(dims, key)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        if exporter == "dynamo":
            seq = torch.export.Dim("seq", min=2, max=32)
            torch.onnx.export(Logits(m, name).eval(), (IDS,), path, dynamo=True, opset_version=18,
                              external_data=False, dynamic_shapes=({1: seq},))
        else:
            torch.onnx.export(Logits(m, name).eval(), (IDS,), path, dynamo=False, opset_version=17,
                              input_names=["ids"], output_names=["y"],
                              dynamic_axes={"ids": {1: "seq"}})
        mo = onnx.load(path)
        old = mo.graph.output[0].name
        for n in mo.graph.node:
            n.output[:] = ["y" if o == old else o for o in n.output]
            n.input[:] = ["y" if i == old else i for i in n.input]
        mo.graph.output[0].name = "y"
        onnx.save(mo, path)
        s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        runs = []
        for L in (2, 5, 11):
            ids = long_ids[:, :L]
            (y,) = s.run(None, {"ids": ids.numpy().astype(np.int64)})
            with torch.no_grad():
                ref = Logits(m, name).eval()(ids).numpy()
            err = float(np.abs(y - ref).max() / np.abs(ref).max())
            assert err < 1e-4, (name, L, err)
            np.save(os.path.join(d, "ids_s%d.npy" % L), ids.numpy().astype(np.int64))
            np.save(os.path.join(d, "y_s%d.npy" % L), y.astype("<f4"))
            runs.append({"seq": L, "input": "ids_s%d.npy" % L, "output": "y_s%d.npy" % L})
        index[key] = {"model": "model.onnx", "input": "ids", "runs": runs}
        print("%s: %d bytes" % (key, os.path.getsize(path)))
    with open(index_path, "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")


def main():
    if "--dynamic" in sys.argv:
        return dynamic()
    import onnxruntime as ort
    from test_transformers import IDS, tiny
    warnings.filterwarnings("ignore")
    index_path = os.path.join(OUT, "index.json")
    index = json.load(open(index_path))
    for name in ("gpt2", "llama", "bert"):
        m = tiny(name)

        key = "hf_%s_dynamo" % name
        d = os.path.join(OUT, key)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        torch.onnx.export(Logits(m, name).eval(), (IDS,), path, dynamo=True, opset_version=18,
                          external_data=False)
        ids = IDS.numpy().astype(np.int64)
        s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        (y,) = s.run(None, {s.get_inputs()[0].name: ids})
        with torch.no_grad():
            ref = Logits(m, name).eval()(IDS).numpy()
        err = float(np.abs(y - ref).max() / np.abs(ref).max())
        assert err < 1e-4, (name, err)
        np.save(os.path.join(d, "input_0.npy"), ids)
        np.save(os.path.join(d, "output_0.npy"), y.astype("<f4"))
        index[key] = {"model": "models/%s/model.onnx" % key, "opset": 18,
                      "inputs": ["models/%s/input_0.npy" % key],
                      "outputs": ["models/%s/output_0.npy" % key]}
        print("%s: %d bytes, onnxruntime vs PyTorch %.2g" % (key, os.path.getsize(path), err))
    with open(index_path, "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
