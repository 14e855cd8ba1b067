#!/usr/bin/env python3
"""Writes tests/data/conv_gemm/kxk_torch: a 3x3 bf16 conv with asymmetric
padding (top 1, left 2, bottom 1, right 0), a bias, ReLU and a residual add,
over 56-pixel rows (OW 56: a partial 64-pixel segment) and 24 channels (a
partial 64-channel block), with its input, weight, bias and residual and
PyTorch's output (f32 products of the bf16 values, rounded to bf16) —
test_conv_gemm runs it on the emulated device (the sm_90a implicit GEMM
and the mma.sync one) against that output. Needs torch (1.13 was used);
the committed files are what CI reads: do not regenerate there.
Run from anywhere: python3 tests/data/conv_gemm/kxk_torch/gen.py"""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
N, C, H, W, O = 2, 24, 6, 56, 40
PT, PL, PB, PR = 1, 2, 1, 0
g = torch.Generator().manual_seed(90)
x = (torch.rand(N, C, H, W, generator=g) * 2 - 1).bfloat16()
w = ((torch.rand(O, C, 3, 3, generator=g) * 2 - 1) / 8).bfloat16()
b = (torch.rand(O, generator=g) - 0.5).bfloat16()
OH, OW = H + PT + PB - 2, W + PL + PR - 2
r = (torch.rand(N, O, OH, OW, generator=g) - 0.5).bfloat16()
y = F.conv2d(F.pad(x.float(), (PL, PR, PT, PB)), w.float(), b.float())
y = (torch.relu(y.bfloat16().float()).bfloat16().float() + r.float()).bfloat16()


def save(name, t):   # bf16 as <u2 (mcir's .npy convention)
    np.save(os.path.join(HERE, name + ".npy"), t.contiguous().view(torch.int16).numpy().view(np.uint16))


for name, t in (("x", x), ("w", w), ("b", b), ("r", r), ("expected_z", y)):
    save(name, t)
graph = {
    "mcir": 1, "name": "kxk_torch",
    "inputs": [{"name": "x", "dtype": "bf16", "shape": [N, C, H, W]},
               {"name": "r", "dtype": "bf16", "shape": [N, O, OH, OW]}],
    "weights": [{"name": "w", "dtype": "bf16", "shape": [O, C, 3, 3], "data": "w.npy"},
                {"name": "b", "dtype": "bf16", "shape": [O], "data": "b.npy"}],
    "nodes": [{"name": "conv", "op": "conv2d", "inputs": ["x", "w", "b"], "outputs": ["c"],
               "attrs": {"pads": [PT, PL, PB, PR]}},
              {"name": "act", "op": "relu", "inputs": ["c"], "outputs": ["a"]},
              {"name": "res", "op": "add", "inputs": ["a", "r"], "outputs": ["z"]}],
    "outputs": ["z"]}
with open(os.path.join(HERE, "graph.json"), "w") as f:
    json.dump(graph, f, indent=1)
    f.write("\n")
