#!/usr/bin/env python3
"""Structured fuzzing of the ONNX importer: perturbs valid models at the
protobuf level (attribute values, dims, initializer contents, op types,
inputs) and runs each through a runner built with -DMCIR_SANITIZE=ON; a
crash (signal, sanitizer report) is a bug, an error message is fine.

Usage: /usr/bin/python3 scripts/fuzz_onnx.py RUNNER N [SEED]
RUNNER is a program taking a model path (exit 0 or 1 expected), e.g. a
small driver around mcir_onnx_read + mcir_interp_run.
"""
import glob
import os
import random
import subprocess
import sys
import tempfile

import onnx

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
INTS = [-(1 << 62), -(1 << 31), -100, -5, -2, -1, 0, 1, 2, 3, 7, 64, 1 << 31, 1 << 62]
OPS = ["MatMul", "Gemm", "Add", "Where", "Softmax", "LayerNormalization", "ReduceMean",
       "ReduceSum", "Transpose", "Reshape", "Flatten", "Split", "Slice", "Concat", "Conv",
       "MaxPool", "AveragePool", "GlobalAveragePool", "Gather", "Unsqueeze", "Squeeze",
       "Expand", "ConstantOfShape", "Range", "Shape", "Cast", "Equal", "Pow", "Max",
       "Clip", "HardSwish", "LogSoftmax", "BatchNormalization", "ReduceL2", "Pad", "Resize",
       "ConvTranspose", "ScatterND"]


def mutate(m, rnd):
    g = m.graph
    for _ in range(rnd.randint(1, 4)):
        k = rnd.randrange(6)
        if k == 0 and g.node:
            n = rnd.choice(g.node)
            if n.attribute:
                a = rnd.choice(n.attribute)
                if a.ints:
                    a.ints[rnd.randrange(len(a.ints))] = rnd.choice(INTS)
                elif a.type == onnx.AttributeProto.INT:
                    a.i = rnd.choice(INTS)
                elif a.type == onnx.AttributeProto.FLOAT:
                    a.f = rnd.choice([0.0, -1.0, 1e30, float("nan"), float("inf")])
        elif k == 1 and g.initializer:
            t = rnd.choice(g.initializer)
            if t.dims:
                t.dims[rnd.randrange(len(t.dims))] = rnd.choice(INTS)
            elif t.data_type == onnx.TensorProto.INT64 and t.raw_data:
                t.raw_data = rnd.choice(INTS).to_bytes(8, "little", signed=True)
        elif k == 2 and g.initializer:
            t = rnd.choice(g.initializer)
            if t.data_type == onnx.TensorProto.INT64 and t.raw_data:
                b = bytearray(t.raw_data)
                i = rnd.randrange(0, max(1, len(b) // 8)) * 8
                b[i:i + 8] = rnd.choice(INTS).to_bytes(8, "little", signed=True)
                t.raw_data = bytes(b)
        elif k == 3 and g.node:
            rnd.choice(g.node).op_type = rnd.choice(OPS)
        elif k == 4 and g.node:
            n = rnd.choice(g.node)
            if n.input and rnd.random() < 0.5:
                del n.input[rnd.randrange(len(n.input))]
            elif n.input:
                n.input[rnd.randrange(len(n.input))] = rnd.choice(
                    [i.name for i in g.initializer] or [""])
        elif k == 5 and g.input:
            d = g.input[0].type.tensor_type.shape.dim
            if d:
                d[rnd.randrange(len(d))].dim_value = rnd.choice([1, 2, 3, 1 << 20])


def main():
    runner, n = sys.argv[1], int(sys.argv[2])
    rnd = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    models = sorted(glob.glob(os.path.join(ROOT, "tests/data/onnx/node/*/model.onnx")))
    models += glob.glob(os.path.join(ROOT, "tests/data/onnx/misc/*.onnx"))
    models += sorted(glob.glob(os.path.join(ROOT, "tests/data/onnx/ops/*/model.onnx")))
    models += [os.path.join(ROOT, "tests/data/onnx/models", k, "model.onnx")
               for k in ("causal_block_op14", "vit_op17", "encoder_layer_op17")]
    crashes = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(n):
            src = rnd.choice(models)
            m = onnx.load(src, load_external_data=False)
            mutate(m, rnd)
            path = os.path.join(tmp, f"f{i}.onnx")
            onnx.save(m, path)
            try:
                r = subprocess.run([runner, path], capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired:
                keep = os.path.join(tempfile.gettempdir(), f"onnx_slow_{i}.onnx")
                os.replace(path, keep)
                print(f"SLOW (> 60 s) from {src}: {keep}")
                continue
            sanitizer = "Sanitizer" in r.stderr or "runtime error:" in r.stderr
            if r.returncode not in (0, 1, 2) or sanitizer:
                crashes += 1
                keep = os.path.join(tempfile.gettempdir(), f"onnx_crash_{i}.onnx")
                os.replace(path, keep)
                print(f"CRASH rc={r.returncode} from {src}: {keep}\n{r.stderr[-2000:]}")
            else:
                os.remove(path)
    print(f"{n} mutated models, {crashes} crashes")
    sys.exit(1 if crashes else 0)


if __name__ == "__main__":
    main()
