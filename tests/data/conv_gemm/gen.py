#!/usr/bin/env python3
"""Writes the graphs of tests/test_conv_gemm.c: pointwise convs that the
conv1x1_as_matmul rule turns into GEMMs (and two it refuses). Weights are
seeded (no data): the interpreter and every run use the same values.
Run from anywhere: python3 tests/data/conv_gemm/gen.py"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def node(name, op, inputs, outputs, **attrs):
    n = {"name": name, "op": op, "inputs": inputs, "outputs": outputs}
    if attrs:
        n["attrs"] = attrs
    return n


def write(name, g):
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        json.dump(g, f, indent=1)
        f.write("\n")


def w(name, dt, shape):
    return {"name": name, "dtype": dt, "shape": shape}


# A ResNet bottleneck over a symbolic batch: 1x1 (+bias, relu), 3x3 (+bias,
# relu), 1x1 (+bias), + the block's input, relu. 16x16 images: 256 pixels.
for dt in ("f16", "f32"):
    write("bottleneck_" + dt, {
        "mcir": 1, "name": "bottleneck_" + dt,
        "dims": {"batch": {"min": 1, "max": 4}},
        "inputs": [w("x", dt, ["batch", 64, 16, 16])],
        "weights": [w("c1.w", dt, [32, 64, 1, 1]), w("c1.b", dt, [32]),
                    w("c2.w", dt, [32, 32, 3, 3]), w("c2.b", dt, [32]),
                    w("c3.w", dt, [64, 32, 1, 1]), w("c3.b", dt, [64])],
        "nodes": [node("c1", "conv2d", ["x", "c1.w", "c1.b"], ["h1"]),
                  node("r1", "relu", ["h1"], ["a1"]),
                  node("c2", "conv2d", ["a1", "c2.w", "c2.b"], ["h2"], pads=[1, 1, 1, 1]),
                  node("r2", "relu", ["h2"], ["a2"]),
                  node("c3", "conv2d", ["a2", "c3.w", "c3.b"], ["h3"]),
                  node("res", "add", ["h3", "x"], ["s"]),
                  node("r3", "relu", ["s"], ["y"])],
        "outputs": ["y"]})

# Inference batch norm after a bias-free pointwise conv: folded into the
# conv first (conv_affine_fold), then the GEMM; a sigmoid epilogue.
write("bn_fold_f32", {
    "mcir": 1, "name": "bn_fold_f32",
    "inputs": [w("x", "f32", [2, 16, 10, 10])],
    "weights": [w("cw", "f32", [24, 16, 1, 1]), w("s", "f32", [24, 1, 1]), w("t", "f32", [24, 1, 1])],
    "nodes": [node("conv", "conv2d", ["x", "cw"], ["c"]),
              node("bn_scale", "mul", ["c", "s"], ["cs"]),
              node("bn_shift", "add", ["cs", "t"], ["ct"]),
              node("act", "sigmoid", ["ct"], ["y"])],
    "outputs": ["y"]})

# 81 pixels (rows of 162 bytes: no TMA box), a runtime per-channel scale
# and a residual input broadcast through the reshape back to NCHW, bf16.
write("scaled_bf16", {
    "mcir": 1, "name": "scaled_bf16",
    "inputs": [w("x", "bf16", [2, 24, 9, 9]), w("s", "bf16", [1, 40, 1, 1]), w("r", "bf16", [2, 40, 9, 9])],
    "weights": [w("cw", "bf16", [40, 24, 1, 1]), w("cb", "bf16", [40])],
    "nodes": [node("conv", "conv2d", ["x", "cw", "cb"], ["c"]),
              node("scale", "mul", ["c", "s"], ["cs"]),
              node("resid", "add", ["cs", "r"], ["cr"]),
              node("act", "tanh", ["cr"], ["y"])],
    "outputs": ["y"]})

# Refused: 49 pixels per image, and a strided pointwise conv (ResNet's
# downsample); both stay conv2d.
write("refused_f16", {
    "mcir": 1, "name": "refused_f16",
    "inputs": [w("x", "f16", [2, 32, 7, 7]), w("z", "f16", [1, 16, 16, 16])],
    "weights": [w("a.w", "f16", [32, 32, 1, 1]), w("d.w", "f16", [32, 16, 1, 1])],
    "nodes": [node("small", "conv2d", ["x", "a.w"], ["ys"]),
              node("down", "conv2d", ["z", "d.w"], ["yd"], strides=[2, 2])],
    "outputs": ["ys", "yd"]})

# A 3x3 conv large enough for the cost model to take the sm_90a implicit
# GEMM on sm_90 (rule conv_kxk_tap_major: the weight repacked tap-major at
# compile time), + bias, a residual add of its input, ReLU, all fused.
write("kxk_f16", {
    "mcir": 1, "name": "kxk_f16",
    "inputs": [w("x", "f16", [4, 64, 32, 64])],
    "weights": [w("k.w", "f16", [64, 64, 3, 3]), w("k.b", "f16", [64])],
    "nodes": [node("k", "conv2d", ["x", "k.w", "k.b"], ["h"], pads=[1, 1, 1, 1]),
              node("res", "add", ["h", "x"], ["s"]),
              node("act", "relu", ["s"], ["y"])],
    "outputs": ["y"]})
