#!/usr/bin/env python3
"""Generates tests/data/onnx/dims/: ONNX models whose inputs have dim_params
(PyTorch exports with dynamic_axes), for importing with a dimension kept
symbolic over a range (mcirc --dim seq=1..16; docs/onnx.md), and
onnxruntime's outputs at several sizes as .npy.

  dims/<name>/model.onnx, dims/<name>/x_<sizes>.npy, dims/<name>/y_<sizes>.npy
  dims/errors/*.onnx     models a range cannot keep symbolic

Usage: /usr/bin/python3 scripts/gen_onnx_dims.py
The export runs under the Python that has torch (Debian python3-torch); the
reference outputs under ORT_PYTHON (default /work/venv-onnx/bin/python, a
venv with pip's onnx==1.14.1 and onnxruntime), which this script calls with
--ort. The build and the tests need no Python.
"""
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
OUT = os.path.join(ROOT, "tests", "data", "onnx", "dims")

# name, model from gen_onnx_tests.torch_models, input name, dynamic axes,
# and the sizes the reference outputs are taken at: (batch, seq)
MODELS = [
    ("causal_block", "causal_block", "x", {0: "batch", 1: "seq"}, [(1, 3), (2, 8), (3, 16)]),
    ("gpt2_tiny", "gpt2_tiny", "input_ids", {1: "seq"}, [(1, 1), (1, 6), (1, 13)]),
    # nn.TransformerEncoderLayer: reshapes to [seq, batch*heads, 16]
    ("encoder_layer", "encoder_layer", "x", {0: "batch", 1: "seq"}, [(1, 1), (2, 7), (4, 32)]),
    # Hugging Face GPT-2's mask: where(bool_buffer[.., past:past+T, :T], scores, min)
    ("hf_attention", "hf_attention", "x", {0: "batch", 1: "seq"}, [(1, 2), (3, 11), (2, 24)]),
    # torchvision's VisionTransformer over the batch: the class token expanded to it
    ("vit", "vit", "x", {0: "batch"}, [(1, None), (3, None), (4, None)]),
]


def hf_attention():
    import math
    import torch
    import torch.nn as nn

    class HfAttention(nn.Module):
        """Causal self-attention masked as Hugging Face's GPT-2 does: a bool
        tril buffer sliced [k - q : k, :k], torch.where(mask, scores, min)."""

        def __init__(self, d=32, h=2, t=24):
            super().__init__()
            self.h = h
            self.qkv = nn.Linear(d, 3 * d)
            self.register_buffer("bias", torch.tril(torch.ones(t, t, dtype=torch.bool)).view(1, 1, t, t))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.qkv(x).split(C, dim=2)
            q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
            k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
            v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
            w = q @ k.transpose(-1, -2) / math.sqrt(C // self.h)
            n = k.size(-2)
            mask = self.bias[:, :, n - q.size(-2):n, :n]
            w = torch.where(mask, w, torch.tensor(torch.finfo(w.dtype).min))
            return (w.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)

    return HfAttention()


def export():
    import torch
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import gen_onnx_tests
    makers = {name: (make, shape) for name, make, shape in gen_onnx_tests.torch_models()}
    makers["hf_attention"] = (hf_attention, (2, 5, 32))
    index = {}
    for key, src, in_name, axes, sizes in MODELS:
        make, shape = makers[src]
        torch.manual_seed(0)
        m = make().eval()
        d = os.path.join(OUT, key)
        os.makedirs(d, exist_ok=True)
        gen = torch.Generator().manual_seed(1)
        if shape[0] == "ids":
            x = torch.randint(0, shape[2], shape[1], generator=gen)
        else:
            x = torch.randn(*shape, generator=gen)
        path = os.path.join(d, "model.onnx")
        y_axes = {0: "batch"} if list(axes.values()) == ["batch"] else axes
        torch.onnx.export(m, (x,), path, opset_version=17, input_names=[in_name],
                          output_names=["y"], dynamic_axes={in_name: axes, "y": y_axes},
                          do_constant_folding=True)
        runs = []
        for b, t in sizes:
            if shape[0] == "ids":
                xs = torch.randint(0, shape[2], (b, t), generator=gen)
                arr = xs.numpy().astype("<i8")
            elif t is None:   # batch only
                xs = torch.randn(b, *shape[1:], generator=gen)
                arr = xs.numpy().astype("<f4")
            else:
                xs = torch.randn(b, t, shape[2], generator=gen)
                arr = xs.numpy().astype("<f4")
            tag = f"b{b}" if t is None else f"b{b}_s{t}"
            np.save(os.path.join(d, f"x_{tag}.npy"), arr)
            with torch.no_grad():
                np.save(os.path.join(d, f"torch_{tag}.npy"), m(xs).numpy().astype("<f4"))
            runs.append({"batch": b, "input": f"x_{tag}.npy", "output": f"y_{tag}.npy"}
                        | ({} if t is None else {"seq": t}))
        index[key] = {"model": "model.onnx", "input": in_name, "runs": runs}
    errors(torch)
    with open(os.path.join(OUT, "index.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")


def errors(torch):
    """Models a range cannot keep symbolic, each with a dim_param 'seq'."""
    import torch.nn as nn
    d = os.path.join(OUT, "errors")
    os.makedirs(d, exist_ok=True)

    class EveryOther(nn.Module):      # x[:, ::2]: ceil(seq / 2) rows, no polynomial
        def forward(self, x):
            return x[:, ::2] * 2.0

    class OnesOfLength(nn.Module):    # a constant [seq] the importer folds
        def forward(self, x):
            return x + torch.ones(x.size(1))

    for name, m in (("every_other", EveryOther()), ("ones_of_length", OnesOfLength())):
        x = torch.randn(5, 8)
        torch.onnx.export(m, (x,), os.path.join(d, name + ".onnx"), opset_version=17,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {1: "seq"}}, do_constant_folding=False)


def ort():
    """Under ORT_PYTHON: onnxruntime's outputs for every run of index.json."""
    import onnxruntime as rt
    with open(os.path.join(OUT, "index.json")) as f:
        index = json.load(f)
    for key, e in sorted(index.items()):
        d = os.path.join(OUT, key)
        s = rt.InferenceSession(os.path.join(d, e["model"]), providers=["CPUExecutionProvider"])
        for r in e["runs"]:
            x = np.load(os.path.join(d, r["input"]))
            (y,) = s.run(None, {e["input"]: x})
            ref = np.load(os.path.join(d, r["input"].replace("x_", "torch_")))
            err = float(np.abs(y - ref).max())
            print(f"{key} {r['input']}: y {y.shape}, |ort - torch| {err:.2e}")
            assert np.isfinite(y).all() and err < 1e-3
            np.save(os.path.join(d, r["output"]), y.astype("<f4"))
            os.remove(os.path.join(d, r["input"].replace("x_", "torch_")))


if __name__ == "__main__":
    if "--ort" in sys.argv:
        ort()
    else:
        export()
        py = os.environ.get("ORT_PYTHON", "/work/venv-onnx/bin/python")
        subprocess.run([py, os.path.abspath(__file__), "--ort"], check=True)
