#!/usr/bin/env python3
"""Generates the ONNX test data under tests/data/onnx/ (run once; the
build and the tests need no Python).

  node/<test>/   ONNX's own backend node tests (onnx.backend.test data) for
                 the mapped ops: model.onnx plus inputs/outputs as .npy;
                 index.json lists them, skipped.json the ones left out and why.
  models/<name>/ PyTorch exports (opsets 14 and 17): model.onnx, input_*.npy,
                 output_*.npy (eval mode, fixed seeds), index.json.

Usage: /usr/bin/python3 scripts/gen_onnx_tests.py [--node] [--models] [--ops] [--int-ops]
Needs: torch (Debian python3-torch), torchvision, onnx (pip onnx==1.14.1);
onnxruntime, when installed, is used as a side check of the exports.
"""
import argparse
import json
import math
import os
import re
import shutil
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
OUT = os.path.join(ROOT, "tests", "data", "onnx")

# ---------------------------------------------------------------- models

def torch_models():
    import torch
    import torch.nn as nn
    import torchvision

    class CausalBlock(nn.Module):
        """nanoGPT-style block: pre-LN, causal self-attention with a
        masked_fill mask from a registered buffer, GELU MLP."""

        def __init__(self, d=64, h=4, t=16):
            super().__init__()
            self.h = h
            self.ln1 = nn.LayerNorm(d)
            self.attn = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d)
            self.fc2 = nn.Linear(4 * d, d)
            self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.attn(self.ln1(x)).split(C, dim=2)
            k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
            q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
            v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = torch.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.proj(y)
            x = x + self.fc2(torch.nn.functional.gelu(self.fc(self.ln2(x))))
            return x

    def encoder():
        return nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                          dropout=0.1, batch_first=True)

    def vit():
        m = torchvision.models.VisionTransformer(
            image_size=32, patch_size=8, num_layers=2, num_heads=4,
            hidden_dim=64, mlp_dim=128, num_classes=10)
        # torchvision zero-initialises the head and the class token: give
        # them values so the output says something.
        nn.init.normal_(m.heads.head.weight, std=0.2)
        nn.init.normal_(m.heads.head.bias, std=0.2)
        nn.init.normal_(m.class_token, std=0.2)
        return m

    def cnn():
        # resnet18's 11M parameters would be 44 MB of test data; squeezenet1_1
        # (0.7M with 10 classes) has the same op mix plus ceil-mode pooling.
        return torchvision.models.squeezenet1_1(num_classes=10)

    def random_norms(m):
        # default running statistics make every batch norm an identity
        g = torch.Generator().manual_seed(2)
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                c = mod.num_features
                with torch.no_grad():
                    mod.running_mean.copy_(0.1 * torch.randn(c, generator=g))
                    mod.running_var.copy_(0.5 + torch.rand(c, generator=g))
                    mod.weight.copy_(1 + 0.1 * torch.randn(c, generator=g))
                    mod.bias.copy_(0.1 * torch.randn(c, generator=g))
        return m

    def mobilenet():
        # mobilenet_v3_small at width 1/4 (0.12M parameters): HardSwish,
        # HardSigmoid squeeze-excitation, depthwise convs
        return random_norms(torchvision.models.mobilenet_v3_small(width_mult=0.25, num_classes=10))

    def densenet():
        # a two-block DenseNet: batch norms after concats stay standalone
        # (mul + add), those after convs fold (conv_affine_fold)
        return random_norms(torchvision.models.DenseNet(growth_rate=8, block_config=(2, 2),
                                                        num_init_features=16, bn_size=2,
                                                        num_classes=10))

    class Gpt2Tiny(nn.Module):
        """GPT-2-style language model from int64 token ids to logits: token
        + position embeddings (a Gather with runtime indices, and one of an
        arange folded at export), two causal blocks, a final layer norm and
        an LM head tied to the token embedding."""

        def __init__(self, vocab=128, d=64, t=16):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(t, d)
            self.blocks = nn.ModuleList([CausalBlock(d, 4, t) for _ in range(2)])
            self.ln_f = nn.LayerNorm(d)
            with torch.no_grad():
                self.wpe.weight.mul_(0.1)

        def forward(self, ids):
            pos = torch.arange(ids.size(1), dtype=torch.long)
            x = self.wte(ids) + self.wpe(pos)
            for b in self.blocks:
                x = b(x)
            return self.ln_f(x) @ self.wte.weight.t()

    return [
        ("gpt2_tiny", Gpt2Tiny, ("ids", (1, 16), 128)),
        ("mobilenet_v3_tiny", mobilenet, (1, 3, 64, 64)),
        ("densenet_tiny", densenet, (1, 3, 32, 32)),
        ("encoder_layer", encoder, (2, 16, 64)),
        ("causal_block", CausalBlock, (2, 16, 64)),
        ("vit", vit, (1, 3, 32, 32)),
        ("squeezenet", cnn, (1, 3, 64, 64)),
    ]


def gen_models(opsets, only=None):
    import torch
    index = {}
    for name, make, shape in torch_models():
        if only and name not in only:
            continue
        for opset in opsets:
            if name in ("squeezenet", "mobilenet_v3_tiny", "densenet_tiny", "gpt2_tiny") and opset != 17:
                continue  # its opset-14 export differs only in the opset number
            torch.manual_seed(0)
            m = make().eval()
            if shape[0] == "ids":  # int64 token ids below the vocabulary size
                x = torch.randint(0, shape[2], shape[1], generator=torch.Generator().manual_seed(1))
            else:
                x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
            with torch.no_grad():
                y = m(x)
            key = f"{name}_op{opset}"
            d = os.path.join(OUT, "models", key)
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, "model.onnx")
            torch.onnx.export(m, (x,), path, opset_version=opset,
                              input_names=["input_ids" if shape[0] == "ids" else "x"],
                              output_names=["y"],
                              do_constant_folding=True)
            np.save(os.path.join(d, "input_0.npy"),
                    x.numpy().astype("<i8" if x.dtype == torch.long else "<f4"))
            np.save(os.path.join(d, "output_0.npy"), y.numpy().astype("<f4"))
            ops = []
            try:
                import onnx
                mp = onnx.load(path)
                ops = sorted({n.op_type for n in mp.graph.node})
            except ImportError:
                pass
            err = None
            try:
                import onnxruntime as ort
                s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                (r,) = s.run(None, {s.get_inputs()[0].name: x.numpy()})
                err = float(np.abs(r - y.numpy()).max() / np.abs(y.numpy()).max())
            except ImportError:
                pass
            print(f"{key}: {os.path.getsize(path)} bytes, ort rel err {err}, ops {ops}")
            index[key] = {"model": f"models/{key}/model.onnx", "opset": opset,
                          "inputs": [f"models/{key}/input_0.npy"],
                          "outputs": [f"models/{key}/output_0.npy"]}
    return index


# ONNX ops the importer maps; backend node tests made only of these are
# candidates.
MAPPED = {
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Where",
    "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Erf", "Cos", "Sin", "IsNaN", "IsInf", "GatherElements", "GatherND", "Sqrt", "Reciprocal", "Neg",
    "Softmax", "LayerNormalization", "ReduceMean", "ReduceSum", "ReduceMax",
    "Transpose", "Reshape", "Flatten", "Split", "Slice", "Concat", "Conv",
    "MaxPool", "AveragePool", "GlobalAveragePool", "Identity", "Dropout",
    "Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "ConstantOfShape",
    "Expand", "Equal", "Cast", "Range",
    "Clip", "HardSigmoid", "HardSwish", "LogSoftmax", "BatchNormalization", "ReduceMin",
    "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "Pad", "Resize",
    "Upsample", "ConvTranspose", "ScatterND",
    "ArgMax", "ArgMin", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor",
    "Abs", "ReduceL1", "ReduceProd", "LeakyRelu", "PRelu", "Elu", "Selu", "ThresholdedRelu",
    "Softplus", "Softsign", "Mish", "Shrink", "CastLike", "Trilu", "Hardmax", "OneHot", "CumSum",
    "EyeLike", "Mod", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot",
}

# Ops that take an integer or bool tensor at run time, and the input slots
# of each that are read at import time (shapes, axes, pads) whatever the
# element type. An integer or bool test input stays a graph input (a
# runtime tensor) when every node reading it is one of these ops, through
# a runtime slot; otherwise it becomes an initializer, as exporters write
# such values.
RUNTIME_INT_OPS = {
    "Gather": set(), "Where": set(), "Equal": set(), "Less": set(), "Greater": set(),
    "LessOrEqual": set(), "GreaterOrEqual": set(), "Not": set(), "And": set(), "Or": set(),
    "Xor": set(), "Cast": set(), "ArgMax": set(), "ArgMin": set(), "Add": set(), "Sub": set(),
    "Mul": set(), "Max": set(), "Min": set(), "Concat": set(), "Transpose": set(), "Abs": set(),
    "CastLike": set(), "OneHot": {1, 2}, "Trilu": {1}, "CumSum": {1}, "EyeLike": set(),
    "Identity": set(), "Flatten": set(), "Reshape": {1}, "Unsqueeze": {1}, "Squeeze": {1},
    "Expand": {1}, "Slice": {1, 2, 3, 4}, "Split": {1},
    "Div": set(), "Mod": set(), "Neg": set(), "BitShift": set(), "BitwiseAnd": set(),
    "BitwiseOr": set(), "BitwiseXor": set(), "BitwiseNot": set(), "GatherElements": set(), "GatherND": set(),
}

# The element types a runtime tensor may have (test inputs and outputs).
RUNTIME_DTYPES = {np.dtype(t) for t in ("float32", "float16", "int32", "int64", "uint8", "bool")}

# Candidates the importer rejects on purpose, with the reason (docs/onnx.md
# lists these).
SKIP = [
    (r"test_cast(like)?_.*FLOAT8", "float8 element types are not supported"),
    (r"test_cast(like)?_STRING_to_FLOAT", "string tensors are not supported"),
    (r"test_(max|average)pool_2d_dilations", "dilated pooling is not supported (MCIR's pools have no dilations)"),
    (r"test_(max|average)pool_3d_default", "3-D pooling is not supported (MCIR has 2-D windows; 1-D runs as 2-D)"),
    (r"test_arg(max|min)_.*select_last_index", "ArgMax/ArgMin with select_last_index=1 is not supported (MCIR's argmax/argmin return the first index of the extreme)"),
    (r"test_equal_string", "string tensors are not supported"),
    (r"test_maxpool_2d_uint8", "pooling u8 tensors is not supported (MCIR's pools take floating-point tensors)"),
    (r"test_maxpool_with_argmax", "MaxPool's second output (the indices) is not supported"),
    (r"test_pow_types_int(32|64)_float32", "Pow of an integer base by a float exponent is not supported (the operands of an MCIR op share one dtype)"),
    (r"test_training_dropout(_default)?(_mask)?$", "Dropout with training_mode=true and a ratio other than 0 is not supported (inference only)"),
    (r"test_batchnorm_.*training_mode", "BatchNormalization in training mode is not supported (inference only)"),
    (r"test_convtranspose_3d", "3-D ConvTranspose is not supported (MCIR has 2-D windows; 1-D runs as 2-D)"),
    (r"test_resize_tf_crop_and_resize", "Resize with tf_crop_and_resize is not supported"),
    (r"test_scatternd_(add|multiply|max|min)", "ScatterND with a reduction on a runtime tensor is not supported (constants only)"),
]

# Tests whose float inputs are consumed at import time (Range's bounds):
# they become initializers too.
ALL_IMPORT_TIME = {"test_range_float_type_positive_delta"}


def gen_node():
    import onnx
    from onnx import numpy_helper
    src = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    dst = os.path.join(OUT, "node")
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    index, skipped = {}, {}
    for test in sorted(os.listdir(src)):
        mpath = os.path.join(src, test, "model.onnx")
        if not os.path.exists(mpath) or "_expanded" in test:
            continue
        m = onnx.load(mpath)
        ops = {n.op_type for n in m.graph.node}
        if not ops & MAPPED:
            continue
        if not ops <= MAPPED:
            skipped[test] = "uses ops that are not mapped: " + ", ".join(sorted(ops - MAPPED))
            continue
        io = list(m.graph.input) + list(m.graph.output)
        if any(not vi.type.HasField("tensor_type") for vi in io):
            skipped[test] = "inputs or outputs are sequences or optionals, not tensors"
            continue
        ds = os.path.join(src, test, "test_data_set_0")
        def load(kind):
            out = []
            for i in range(64):
                p = os.path.join(ds, f"{kind}_{i}.pb")
                if not os.path.exists(p):
                    break
                t = onnx.TensorProto()
                t.ParseFromString(open(p, "rb").read())
                out.append(numpy_helper.to_array(t))
            return out
        ins, outs = load("input"), load("output")
        bad = [o.dtype for o in outs if o.dtype not in RUNTIME_DTYPES]
        if bad:
            skipped[test] = (f"output is {bad[0]}: MCIR's runtime tensors are f32, f16, bf16, "
                             "i32, i64, u8 and bool")
            continue
        if any(0 in o.shape for o in outs):
            skipped[test] = "empty output (MCIR shapes are positive)"
            continue
        why = [r for pat, r in SKIP if re.match(pat, test)]
        if why:
            skipped[test] = why[0]
            continue
        # Non-float inputs (shapes, axes, indices, conditions) are consumed at
        # import time: they become initializers of the model.
        graph_inputs = [i for i in m.graph.input
                        if i.name not in {t.name for t in m.graph.initializer}]
        keep, files = [], []
        d = os.path.join(dst, test)
        os.makedirs(d)
        for k, (vi, arr) in enumerate(zip(graph_inputs, ins)):
            # Resize's roi/scales and Upsample's scales are read at import time
            # (and Pad's constant_value, ConvTranspose's weight, Dropout's ratio, as in exports)
            import_time = test in ALL_IMPORT_TIME or (
                k > 0 and re.match(r"test_(resize|upsample|constant_pad|convtranspose|training_dropout|onehot|castlike)", test))
            readers = [(n.op_type, j) for n in m.graph.node for j, nm in enumerate(n.input)
                       if nm == vi.name]
            runtime_int = arr.dtype in RUNTIME_DTYPES and arr.dtype != np.float32 and all(
                op in RUNTIME_INT_OPS and j not in RUNTIME_INT_OPS[op] for op, j in readers)
            if (arr.dtype == np.float32 or runtime_int) and not import_time:
                keep.append(vi)
                f = f"input_{len(files)}.npy"
                np.save(os.path.join(d, f), arr.astype("<f4") if arr.dtype == np.float32 else arr)
                files.append(f"node/{test}/{f}")
            else:
                t = onnx.TensorProto()  # the original bytes (bfloat16 stays bfloat16)
                t.ParseFromString(open(os.path.join(ds, f"input_{k}.pb"), "rb").read())
                t.name = vi.name
                if (vi.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16
                        and t.data_type == onnx.TensorProto.UINT16):
                    t.data_type = onnx.TensorProto.BFLOAT16  # onnx stores bf16 test data as uint16 bits
                m.graph.initializer.append(t)
        del m.graph.input[:]
        m.graph.input.extend(keep)
        onnx.save(m, os.path.join(d, "model.onnx"))
        ofiles = []
        for i, arr in enumerate(outs):
            np.save(os.path.join(d, f"output_{i}.npy"), arr.astype("<f4") if arr.dtype == np.float32 else arr)
            ofiles.append(f"node/{test}/output_{i}.npy")
        opset = [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")][0]
        index[test] = {"model": f"node/{test}/model.onnx", "opset": opset,
                       "ops": sorted(ops), "inputs": files, "outputs": ofiles}
    with open(os.path.join(dst, "index.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")
    with open(os.path.join(dst, "skipped.json"), "w") as f:
        json.dump(skipped, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(index)} node tests, {len(skipped)} skipped")


def gen_bad():
    """Malformed files (bad/: must fail cleanly, never crash), models the
    importer must reject with a precise message (errors/ + errors.json),
    a dynamic-shape model and a model with external data (misc/)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)

    def model(nodes, inputs, outputs, inits=(), opset=17):
        g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                                 ir_version=8)

    X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    good = model([helper.make_node("Relu", ["x"], ["h"], name="relu0"),
                  helper.make_node("Add", ["h", "w"], ["y"], name="add0")], [X], [Y],
                 [numpy_helper.from_array(rng.standard_normal((2, 4)).astype(np.float32), "w")])
    good_bytes = good.SerializeToString()

    bad = os.path.join(OUT, "bad")
    shutil.rmtree(bad, ignore_errors=True)
    os.makedirs(bad)
    def put(name, data):
        with open(os.path.join(bad, name), "wb") as f:
            f.write(data)
    put("empty.onnx", b"")
    put("garbage.onnx", rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
    put("text.onnx", b"{\"mcir\": 1, \"this is\": \"not a model\"}\n")
    for k in (1, 7, len(good_bytes) // 2, len(good_bytes) - 3):
        put(f"truncated_{k}.onnx", good_bytes[:k])
    put("tensor_not_model.onnx", numpy_helper.from_array(np.ones(3, np.float32), "t").SerializeToString())
    # valid protobuf, broken content
    m = onnx.ModelProto(); m.CopyFrom(good)
    m.graph.initializer[0].raw_data = m.graph.initializer[0].raw_data[:-4]
    put("raw_data_short.onnx", m.SerializeToString())
    m = onnx.ModelProto(); m.CopyFrom(good)
    m.graph.initializer[0].dims[:] = [1 << 40, 1 << 40]
    put("huge_dims.onnx", m.SerializeToString())
    m = onnx.ModelProto(); m.CopyFrom(good)
    m.graph.initializer[0].dims[:] = [1 << 31]  # found by scripts/fuzz_onnx.py
    put("dims_without_data.onnx", m.SerializeToString())
    m = onnx.ModelProto(); m.CopyFrom(good)
    m.graph.initializer[0].ClearField("raw_data")
    m.graph.initializer[0].dims[:] = [1 << 14, 1 << 13]
    m.graph.initializer[0].float_data[:] = [1.0, 2.0]
    put("typed_data_short.onnx", m.SerializeToString())
    m = onnx.ModelProto(); m.CopyFrom(good)
    m.graph.node[1].op_type = "Max"  # variadic op with an empty input (fuzzer)
    m.graph.node[1].input[1] = ""
    put("variadic_empty_input.onnx", m.SerializeToString())
    m = onnx.ModelProto(); m.CopyFrom(good)
    m.graph.node[1].op_type = "Slice"
    m.graph.node[1].input.extend(["", ""])
    put("slice_empty_starts.onnx", m.SerializeToString())
    # messages nested 1000 deep (a TypeProto of sequences of sequences ...):
    # protobuf-c recurses per level, so 100k levels (a 1.6 MB file) would
    # overflow the stack; the importer bounds the depth first
    def varint(n):
        out = b""
        while True:
            c, n = n & 0x7F, n >> 7
            if not n:
                return out + bytes([c])
            out += bytes([c | 0x80])
    t = onnx.TypeProto()
    t.tensor_type.elem_type = TensorProto.FLOAT
    b = t.SerializeToString()
    for _ in range(1000):
        seq = b"\x0a" + varint(len(b)) + b        # TypeProto.Sequence.elem_type
        b = b"\x22" + varint(len(seq)) + seq      # TypeProto.sequence_type
    vi = b"\x0a\x01z\x12" + varint(len(b)) + b   # ValueInfoProto name, type
    gb = good.graph.SerializeToString() + b"\x6a" + varint(len(vi)) + vi  # value_info
    m = onnx.ModelProto(); m.CopyFrom(good); m.ClearField("graph")
    put("deep_nesting.onnx", m.SerializeToString() + b"\x3a" + varint(len(gb)) + gb)
    m = onnx.ModelProto(); m.CopyFrom(good)  # a bool value beside a runtime one (fuzzer)
    m.graph.initializer.append(numpy_helper.from_array(np.ones((2, 4), bool), "c"))
    m.graph.node[1].op_type = "Where"
    m.graph.node[1].input[:] = ["c", "c", "h"]
    put("where_bool_value.onnx", m.SerializeToString())
    # 20 ConstantOfShape of 2^24 elements: import-time values are bounded
    m = onnx.ModelProto(); m.CopyFrom(good)
    m.graph.initializer.append(numpy_helper.from_array(np.array([1 << 12, 1 << 12], np.int64), "big"))
    for i in range(20):
        m.graph.node.insert(0, helper.make_node("ConstantOfShape", ["big"], [f"c{i}"]))
    put("constant_bomb.onnx", m.SerializeToString())
    m = onnx.ModelProto(); m.CopyFrom(good)
    m.graph.initializer[0].dims[:] = [-2, -4]
    put("negative_dims.onnx", m.SerializeToString())
    m = onnx.ModelProto(); m.CopyFrom(good)
    m.graph.initializer[0].data_type = 99
    put("bad_dtype.onnx", m.SerializeToString())
    m = onnx.ModelProto(); m.CopyFrom(good)
    del m.graph.node[0]
    put("undefined_input.onnx", m.SerializeToString())
    m = onnx.ModelProto(); m.CopyFrom(good)
    m.graph.node[0].input[0] = "y"
    put("cycle.onnx", m.SerializeToString())
    m = onnx.ModelProto(); m.CopyFrom(good)
    del m.opset_import[:]
    put("no_opset.onnx", m.SerializeToString())
    m = onnx.ModelProto(); m.CopyFrom(good)
    m.graph.node[0].attribute.append(helper.make_attribute("axis", 1.5))
    m.graph.node[0].op_type = "Softmax"
    put("attr_wrong_type.onnx", m.SerializeToString())
    m = onnx.ModelProto(); m.CopyFrom(good)
    del m.graph.input[0].type.tensor_type.shape.dim[:]
    m.graph.input[0].type.tensor_type.elem_type = TensorProto.DOUBLE
    put("double_input.onnx", m.SerializeToString())
    # a TENSOR attribute that holds no tensor
    for fname, op in [("constant_tensor_attr_empty.onnx", "Constant"),
                      ("constant_of_shape_tensor_attr_empty.onnx", "ConstantOfShape")]:
        n = helper.make_node(op, [] if op == "Constant" else ["s"], ["y"])
        a = n.attribute.add()
        a.name, a.type = "value", onnx.AttributeProto.TENSOR
        put(fname, model([n], [], [Y], [numpy_helper.from_array(np.array([2, 4], np.int64), "s")]
                         if op != "Constant" else []).SerializeToString())
    m = onnx.ModelProto(); m.CopyFrom(good)
    m.graph.initializer[0].ClearField("raw_data")
    m.graph.initializer[0].data_location = TensorProto.EXTERNAL
    e = m.graph.initializer[0].external_data.add(); e.key, e.value = "location", "../../../etc/passwd"
    put("external_escape.onnx", m.SerializeToString())
    # bytes flipped at random positions of a real model (fixed seed)
    src = bytearray(open(os.path.join(OUT, "models", "causal_block_op17", "model.onnx"), "rb").read()[:6000])
    for k in range(4):
        b = bytearray(src)
        for pos in rng.integers(0, len(b), 24):
            b[pos] = int(rng.integers(0, 256))
        put(f"flipped_{k}.onnx", bytes(b))

    errs = os.path.join(OUT, "errors")
    shutil.rmtree(errs, ignore_errors=True)
    os.makedirs(errs)
    expect = {}
    def err(name, m, *frags):
        onnx.save(m, os.path.join(errs, name))
        expect[name] = list(frags)
    err("unsupported_op.onnx",
        model([helper.make_node("Celu", ["x"], ["y"], name="celu0")], [X], [Y]),
        "errors/unsupported_op.onnx: error:", "node 'celu0'", "Celu", "opset 17", "unsupported op")
    err("unsupported_attr.onnx",
        model([helper.make_node("Relu", ["x"], ["y"], name="relu0", alpha=0.5)], [X], [Y]),
        "node 'relu0'", "Relu", "opset 17", "attribute 'alpha' is not supported")
    P = helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 1, 2, 2])
    X4 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
    err("nondefault_attr.onnx",
        model([helper.make_node("MaxPool", ["x"], ["p"], name="pool0", kernel_shape=[2, 2],
                                strides=[2, 2], storage_order=1)], [X4], [P], opset=13),
        "node 'pool0'", "MaxPool", "opset 13", "storage_order")
    err("int64_runtime.onnx",
        model([helper.make_node("Add", ["x", "k"], ["y"], name="add0")], [X], [Y],
              [numpy_helper.from_array(np.ones((2, 4), np.int64), "k")]),
        "node 'add0'", "int64 tensor 'k'", "f32 computation")
    C = helper.make_tensor_value_info("c", TensorProto.DOUBLE, [2, 4])
    err("double_input.onnx",
        model([helper.make_node("Where", ["c", "x", "x"], ["y"], name="where0")], [C, X], [Y]),
        "graph input 'c'", "double", "int64, uint8 or bool")
    IDS = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 4])
    err("argmax_select_last.onnx",
        model([helper.make_node("ArgMax", ["x"], ["y"], name="am0", select_last_index=1)], [X],
              [helper.make_tensor_value_info("y", TensorProto.INT64, None)]),
        "node 'am0'", "select_last_index=1")
    err("gather_float_indices.onnx",
        model([helper.make_node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT),
               helper.make_node("Gather", ["x", "f"], ["y"], name="g0")], [X, IDS], [Y]),
        "node 'g0'", "must be int32 or int64")
    err("wrong_domain.onnx",
        model([helper.make_node("Relu", ["x"], ["y"], name="r", domain="com.microsoft")], [X], [Y]),
        "node 'r'", "domain 'com.microsoft'")
    XD = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    YD = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    err("dynamic_input.onnx",
        model([helper.make_node("Relu", ["x"], ["y"], name="relu0")], [XD], [YD]),
        "graph input 'x' has a dynamic dimension 0 ('batch')", "--shape x=")
    with open(os.path.join(errs, "errors.json"), "w") as f:
        json.dump(expect, f, indent=1, sort_keys=True)
        f.write("\n")

    misc = os.path.join(OUT, "misc")
    shutil.rmtree(misc, ignore_errors=True)
    os.makedirs(misc)
    # external data: W lives in weights.bin next to the model
    w = rng.standard_normal((2, 4)).astype(np.float32)
    m = model([helper.make_node("Mul", ["x", "w"], ["y"], name="mul0")], [X], [Y],
              [numpy_helper.from_array(w, "w")])
    onnx.save(m, os.path.join(misc, "external.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="external.bin", size_threshold=0)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    np.save(os.path.join(misc, "external_x.npy"), x)
    np.save(os.path.join(misc, "external_y.npy"), (x * w).astype(np.float32))
    # Where with a -inf fill on a runtime tensor, a constant condition
    S = helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 2, 4, 4])
    O = helper.make_tensor_value_info("o", TensorProto.FLOAT, [1, 2, 4, 4])
    cond = np.tril(np.ones((4, 4), bool))
    m = model([helper.make_node("Not", ["cond"], ["ncond"]),
               helper.make_node("Where", ["ncond", "fill", "s"], ["m"], name="masked_fill"),
               helper.make_node("Softmax", ["m"], ["o"], axis=-1)], [S], [O],
              [numpy_helper.from_array(cond, "cond"),
               numpy_helper.from_array(np.array(-np.inf, np.float32), "fill")])
    onnx.save(m, os.path.join(misc, "where_mask.onnx"))
    s_in = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    sm = np.where(cond, s_in, -np.inf)
    sm = np.exp(sm - sm.max(-1, keepdims=True)); sm /= sm.sum(-1, keepdims=True)
    np.save(os.path.join(misc, "where_mask_s.npy"), s_in)
    np.save(os.path.join(misc, "where_mask_o.npy"), sm.astype(np.float32))
    # import-time evaluation and the runtime forms of the shape ops, checked
    # against onnxruntime
    import onnxruntime as ort
    XI = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])
    I64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)
    F32 = lambda name, v: numpy_helper.from_array(np.array(v, np.float32), name)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i2"], ["d"], axis=0),
        helper.make_node("Range", ["i0", "d", "i1"], ["r"]),
        helper.make_node("Mod", ["r", "i2"], ["rm"]),
        helper.make_node("Equal", ["rm", "i0"], ["even"]),
        helper.make_node("Where", ["even", "x", "neg"], ["w_mask"]),
        helper.make_node("Softmax", ["w_mask"], ["o_mask"], axis=-1),
        helper.make_node("Where", ["even", "two", "x"], ["o_select"]),
        helper.make_node("Unsqueeze", ["x", "ax1"], ["u"]),
        helper.make_node("Concat", ["s01", "four", "s12"], ["eshape"], axis=0),
        helper.make_node("Expand", ["u", "eshape"], ["ex"]),
        helper.make_node("Add", ["ex", "bias4"], ["o_expand_add"]),
        helper.make_node("ReduceSum", ["ex", "ax1"], ["o_expand_sum"], keepdims=0),
        helper.make_node("Gather", ["x", "idx"], ["o_gather"], axis=2),
        helper.make_node("Slice", ["x", "st", "en", "ax2", "stp"], ["o_slice_neg"]),
        helper.make_node("Slice", ["x", "i0v", "i1v", "ax1"], ["sl1"]),
        helper.make_node("Squeeze", ["sl1", "ax1"], ["o_squeeze"]),
        helper.make_node("ConstantOfShape", ["s"], ["ones"],
                         value=numpy_helper.from_array(np.array([1.5], np.float32))),
        helper.make_node("Mul", ["x", "ones"], ["o_const_of_shape"]),
        helper.make_node("Cast", ["d"], ["df"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["x", "df"], ["o_cast"]),
    ]
    outs = ["o_mask", "o_select", "o_expand_add", "o_expand_sum", "o_gather", "o_slice_neg",
            "o_squeeze", "o_const_of_shape", "o_cast"]
    inits = [I64("i0", 0), I64("i1", 1), I64("i2", 2), F32("neg", -1e9), F32("two", 2.0),
             I64("ax1", [1]), I64("ax2", [2]), I64("s01", [2]), I64("four", [4]),
             I64("s12", [3, 8]), F32("bias4", np.arange(4).reshape(4, 1, 1)),
             I64("idx", [7, 0, 1, 2, 5]), I64("st", [-1]), I64("en", [-100]),
             I64("stp", [-2]), I64("i0v", [0]), I64("i1v", [1])]
    m = model(nodes, [XI], [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
              inits)

    path = os.path.join(misc, "import_time.onnx")
    onnx.save(m, path)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.save(os.path.join(misc, "import_time_x.npy"), x)
    entry = {"model": "misc/import_time.onnx", "inputs": ["misc/import_time_x.npy"], "outputs": []}
    for o, v in zip(outs, got):
        np.save(os.path.join(misc, f"import_time_{o}.npy"), v.astype(np.float32))
        entry["outputs"].append(f"misc/import_time_{o}.npy")
    with open(os.path.join(misc, "index.json"), "w") as f:
        json.dump({"import_time": entry}, f, indent=1)
        f.write("\n")
    print("bad, errors, misc written")


def gen_ops(only=None):
    """ops/: one small model per case of the decomposed ops (Clip,
    HardSigmoid, HardSwish, LogSoftmax, BatchNormalization, the composite
    reductions, Pad, Resize, Upsample, ConvTranspose, Dropout with ratio 0),
    outputs from onnxruntime; and their refusals in errors/."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(15)
    V = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
    I64 = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)
    F32 = lambda n, v: numpy_helper.from_array(np.array(v, np.float32), n)
    cases = {}
    X4 = [2, 3, 5, 6]

    # an input is (name, shape) for float32, or (name, shape, type, high):
    # integer inputs in [0, high) (indices), bool ones at random
    ELEM = {"int64": TensorProto.INT64, "int32": TensorProto.INT32, "bool": TensorProto.BOOL,
            "uint8": TensorProto.UINT8, "float": TensorProto.FLOAT}
    def add(name, nodes, ins, inits=(), opset=17, out="float"):
        vis = [helper.make_tensor_value_info(i[0], ELEM[i[2]] if len(i) > 2 else TensorProto.FLOAT, i[1])
               for i in ins]
        g = helper.make_graph(nodes, "g", vis, [helper.make_tensor_value_info("y", ELEM[out], None)],
                              list(inits))
        cases[name] = (helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), ins)
    add("clip", [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], [("x", X4)],
        [F32("lo", -0.5), F32("hi", 0.7)])
    add("clip_min_only", [helper.make_node("Clip", ["x", "lo"], ["y"])], [("x", X4)], [F32("lo", 0.1)])
    add("clip_opset6", [helper.make_node("Clip", ["x"], ["y"], min=0.0, max=6.0)], [("x", X4)], opset=6)
    add("hardsigmoid", [helper.make_node("HardSigmoid", ["x"], ["y"], alpha=0.3, beta=0.4)], [("x", X4)])
    add("hardswish", [helper.make_node("HardSwish", ["x"], ["y"])], [("x", X4)])
    add("logsoftmax_axis1", [helper.make_node("LogSoftmax", ["x"], ["y"], axis=1)], [("x", X4)])
    add("logsoftmax_opset11", [helper.make_node("LogSoftmax", ["x"], ["y"], axis=2)], [("x", X4)], opset=11)
    bn = lambda c: [F32("s", rng.standard_normal(c)), F32("b", rng.standard_normal(c)),
                    F32("m", rng.standard_normal(c)), F32("v", rng.random(c) + 0.5)]
    add("batchnorm", [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                                       epsilon=1e-3)], [("x", X4)], bn(3))
    add("batchnorm_runtime_params", [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
        [("x", X4), ("s", [3]), ("b", [3]), ("m", [3]), ("v", [3])])
    add("conv_batchnorm", [helper.make_node("Conv", ["x", "w", "cb"], ["c"], pads=[1, 1, 1, 1]),
                           helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"])],
        [("x", X4)], [F32("w", rng.standard_normal((4, 3, 3, 3))), F32("cb", rng.standard_normal(4))] + bn(4))
    for r in ["ReduceMin", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp", "ReduceLogSum"]:
        pre = [helper.make_node("Exp", ["x"], ["e"])] if r == "ReduceLogSum" else []
        src = "e" if pre else "x"
        add(r.lower(), pre + [helper.make_node(r, [src, "ax"], ["y"], keepdims=0)], [("x", X4)],
            [I64("ax", [1, 3])], opset=18)
        add(r.lower() + "_opset13", pre + [helper.make_node(r, [src], ["y"], axes=[2])], [("x", X4)], opset=13)
    for mode in ["constant", "reflect", "edge", "wrap"]:
        add("pad_" + mode, [helper.make_node("Pad", ["x", "p", "cv"], ["y"], mode=mode)], [("x", X4)],
            [I64("p", [0, 1, 2, 3, 0, 0, 3, -1]), F32("cv", 1.5)], opset=19)
    add("pad_axes", [helper.make_node("Pad", ["x", "p", "", "ax"], ["y"], mode="reflect")], [("x", X4)],
        [I64("p", [1, 2, 2, 1]), I64("ax", [2, 3])], opset=18)
    add("pad_opset2", [helper.make_node("Pad", ["x"], ["y"], pads=[0, 0, 1, 2, 0, 0, 2, 1], value=-1.0)],
        [("x", X4)], opset=2)
    for mode, ct, nm in [("nearest", "asymmetric", "floor"), ("nearest", "half_pixel", "round_prefer_floor"),
                         ("nearest", "align_corners", "round_prefer_ceil"), ("nearest", "pytorch_half_pixel", "ceil"),
                         ("linear", "half_pixel", None), ("linear", "align_corners", None),
                         ("linear", "pytorch_half_pixel", None), ("linear", "asymmetric", None),
                         ("cubic", "half_pixel", None)]:
        kw = dict(mode=mode, coordinate_transformation_mode=ct)
        if nm:
            kw["nearest_mode"] = nm
        add(f"resize_{mode}_{ct}_scales", [helper.make_node("Resize", ["x", "", "sc"], ["y"], **kw)],
            [("x", X4)], [F32("sc", [1, 1, 2.0, 1.5])], opset=13)
        add(f"resize_{mode}_{ct}_sizes", [helper.make_node("Resize", ["x", "", "", "sz"], ["y"], **kw)],
            [("x", X4)], [I64("sz", [2, 3, 3, 13])], opset=13)
    add("resize_cubic_exclude_outside", [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="cubic",
                                                          exclude_outside=1, cubic_coeff_a=-0.5)],
        [("x", X4)], [F32("sc", [1, 1, 0.6, 2.0])], opset=13)
    for mode in ["linear", "cubic"]:
        add(f"resize_{mode}_antialias", [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode=mode,
                                                          antialias=1)],
            [("x", [1, 2, 12, 9])], [F32("sc", [1, 1, 0.4, 0.75])], opset=18)
    add("resize_opset10", [helper.make_node("Resize", ["x", "sc"], ["y"], mode="nearest")], [("x", X4)],
        [F32("sc", [1, 1, 2, 3])], opset=10)
    add("upsample_opset9", [helper.make_node("Upsample", ["x", "sc"], ["y"], mode="nearest")], [("x", X4)],
        [F32("sc", [1, 1, 2, 3])], opset=9)
    for nm, kw, wshape in [("convtranspose", dict(), (3, 2, 3, 3)),
                           ("convtranspose_stride_pads", dict(strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 1]), (3, 2, 3, 2)),
                           ("convtranspose_group_dilation", dict(strides=[2, 1], group=3, dilations=[1, 2]), (3, 2, 2, 3)),
                           ("convtranspose_output_shape", dict(strides=[2, 2], output_shape=[10, 12], auto_pad="SAME_UPPER"), (3, 4, 3, 3))]:
        add(nm, [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **kw)], [("x", X4)],
            [F32("w", rng.standard_normal(wshape)), F32("b", rng.standard_normal(wshape[1] * kw.get("group", 1)))])
    add("convtranspose_1d", [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[3], pads=[1, 2])],
        [("x", [2, 3, 7])], [F32("w", rng.standard_normal((3, 4, 4)))])
    idx = numpy_helper.from_array(np.array([[1, 0], [0, 2], [1, 1]], np.int64), "i")
    add("scatternd_constant_updates", [helper.make_node("ScatterND", ["x", "i", "u"], ["y"])],
        [("x", X4)], [idx, F32("u", rng.standard_normal((3, 5, 6)))], opset=16)
    add("scatternd_runtime_updates", [helper.make_node("ScatterND", ["x", "i", "u"], ["y"])],
        [("x", X4), ("u", [3, 5, 6])], [idx], opset=16)
    add("scatternd_folded_mask", [helper.make_node("ConstantOfShape", ["shp"], ["z"],
                                                   value=numpy_helper.from_array(np.array([0.0], np.float32))),
                                  helper.make_node("ScatterND", ["z", "i1", "u1"], ["m"], reduction="add"),
                                  helper.make_node("ScatterND", ["m", "i1", "u1"], ["m2"], reduction="max"),
                                  helper.make_node("Add", ["x", "m2"], ["y"])],
        [("x", [5, 6])], [I64("shp", [5, 6]), I64("i1", [[1], [3], [1]]), F32("u1", rng.standard_normal((3, 6)))], opset=18)
    add("dropout_training_ratio0", [helper.make_node("Dropout", ["x", "r", "t"], ["y"])], [("x", X4)],
        [F32("r", 0.0), numpy_helper.from_array(np.array(True), "t")])
    # integer and bool tensors at run time (constants from their own
    # generator, so the cases above keep their data)
    crng = np.random.default_rng(16)
    # (tables of 16 rows: mcir's seeded integer inputs, used by the emulator
    # test, lie in [0, 16))
    E = [16, 8]
    add("gather_runtime_ids", [helper.make_node("Gather", ["emb", "ids"], ["y"])],
        [("ids", [2, 5], "int64", 16)], [F32("emb", crng.standard_normal(E))])
    add("gather_runtime_ids_negative", [helper.make_node("Gather", ["emb", "ids"], ["g"], axis=1),
                                        helper.make_node("Mul", ["g", "g"], ["y"])],
        [("emb", [3, 16]), ("ids", [4], "int32", 16)], [])
    add("cast_runtime", [helper.make_node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT),
                         helper.make_node("Cast", ["x"], ["xi"], to=TensorProto.INT32),
                         helper.make_node("Cast", ["xi"], ["xf"], to=TensorProto.FLOAT),
                         helper.make_node("Add", ["f", "xf"], ["y"])],
        [("ids", [2, 6], "int64", 50), ("x", [2, 6])])
    add("compare_where_runtime", [helper.make_node("Less", ["x", "z"], ["c"]),
                                  helper.make_node("GreaterOrEqual", ["x", "h"], ["c2"]),
                                  helper.make_node("Or", ["c", "c2"], ["c3"]),
                                  helper.make_node("Not", ["c3"], ["c4"]),
                                  helper.make_node("Where", ["c4", "x", "k"], ["y"])],
        [("x", X4)], [F32("z", -0.3), F32("h", 0.8), F32("k", 2.5)])
    add("where_runtime_condition", [helper.make_node("Where", ["c", "x", "w"], ["y"])],
        [("c", [5, 6], "bool"), ("x", [2, 3, 5, 6])], [F32("w", crng.standard_normal((1, 6)))])
    add("int64_arith_equal", [helper.make_node("Add", ["ids", "one"], ["p"]),
                              helper.make_node("Mul", ["p", "two"], ["q"]),
                              helper.make_node("Equal", ["q", "eight"], ["e"]),
                              helper.make_node("Xor", ["e", "m"], ["x2"]),
                              helper.make_node("And", ["x2", "m"], ["a"]),
                              helper.make_node("Cast", ["a"], ["y"], to=TensorProto.FLOAT)],
        [("ids", [3, 8], "int64", 6), ("m", [3, 8], "bool")],
        [I64("one", 1), I64("two", [2]), I64("eight", 8)])
    add("argmax_keepdims", [helper.make_node("ArgMax", ["x"], ["y"], axis=1)], [("x", X4)], out="int64")
    add("argmin_last_axis", [helper.make_node("ArgMin", ["x"], ["y"], axis=-1, keepdims=0)], [("x", X4)],
        opset=13, out="int64")
    add("greater_bool_output", [helper.make_node("Greater", ["x", "t"], ["y"])], [("x", X4), ("t", [6])],
        out="bool")
    # activations and ops written with where / comparisons / argmax / matmul
    add("activations", [helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.2),
                        helper.make_node("Elu", ["a"], ["b"], alpha=0.7),
                        helper.make_node("Selu", ["b"], ["c"]),
                        helper.make_node("Softplus", ["c"], ["d"]),
                        helper.make_node("PRelu", ["x", "slope"], ["e"]),
                        helper.make_node("Mish", ["e"], ["f"]),
                        helper.make_node("Shrink", ["f"], ["g"], lambd=0.3, bias=0.1),
                        helper.make_node("Softsign", ["g"], ["h"]),
                        helper.make_node("ThresholdedRelu", ["x"], ["i"], alpha=0.4),
                        helper.make_node("Abs", ["i"], ["j"]),
                        helper.make_node("Sum", ["d", "h", "j"], ["y"])],
        [("x", X4)], [F32("slope", crng.standard_normal((3, 1, 1)))], opset=18)
    add("reduce_prod_l1", [helper.make_node("ReduceProd", ["x", "ax"], ["p"], keepdims=1),
                           helper.make_node("ReduceL1", ["x", "ax"], ["l"], keepdims=1),
                           helper.make_node("Add", ["p", "l"], ["y"])],
        [("x", X4)], [I64("ax", [1, 2])], opset=18)
    add("trilu_hardmax_cumsum", [helper.make_node("Trilu", ["x", "k"], ["t"], upper=0),
                                 helper.make_node("Hardmax", ["t"], ["h"], axis=2),
                                 helper.make_node("CumSum", ["t", "ax"], ["c"], reverse=1),
                                 helper.make_node("Add", ["h", "c"], ["y"])],
        [("x", X4)], [I64("k", 1), I64("ax", 2)])
    add("onehot_runtime", [helper.make_node("OneHot", ["ids", "depth", "vals"], ["y"], axis=1)],
        [("ids", [3, 4], "int64", 16)], [I64("depth", 12), F32("vals", [-0.5, 2.0])])
    # an Expand of a runtime bool mask read by Where (BERT's attention mask
    # in torch's dynamo export), and of runtime int ids read by Gather
    add("expand_bool_mask", [helper.make_node("Expand", ["m", "shp"], ["me"]),
                             helper.make_node("Where", ["me", "x", "z"], ["y"])],
        [("m", [1, 1, 6], "bool"), ("x", [5, 6])], [I64("shp", [2, 5, 6]), F32("z", -1.0)])
    add("expand_int_ids", [helper.make_node("Expand", ["ids", "shp"], ["e"]),
                           helper.make_node("Gather", ["emb", "e"], ["y"])],
        [("ids", [1, 4], "int64", 16)], [I64("shp", [3, 4]), F32("emb", crng.standard_normal((16, 5)))])
    # ScatterND by runtime row indices (a KV cache's update at positions
    # known at run time; distinct rows, one negative), read by an Add
    add("scatternd_runtime_rows", [helper.make_node("ScatterND", ["x", "i", "u"], ["s"]),
                                   helper.make_node("Add", ["s", "x"], ["y"])],
        [("x", [6, 2, 3]), ("i", [3, 1], "int64", 6), ("u", [3, 2, 3])], [], opset=16)
    dst = os.path.join(OUT, "ops")
    index = {}
    if only:   # these cases only, the others (and gen_int_ops') kept
        cases = {k: v for k, v in cases.items() if k in only}
        with open(os.path.join(dst, "index.json")) as f:
            index = json.load(f)
    else:
        shutil.rmtree(dst, ignore_errors=True)
        os.makedirs(dst)
    for name, (m, ins) in cases.items():
        d = os.path.join(dst, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        p = os.path.join(d, "model.onnx")
        onnx.save(m, p)
        irng = np.random.default_rng(len(name))
        feeds = {}
        for i in ins:
            if len(i) == 2:
                feeds[i[0]] = rng.standard_normal(i[1]).astype(np.float32)
            elif i[2] == "bool":
                feeds[i[0]] = irng.random(i[1]) < 0.5
            else:
                feeds[i[0]] = irng.integers(0, i[3], i[1]).astype(i[2])
        if name in ("gather_runtime_ids_negative", "onehot_runtime"):
            feeds["ids"] -= 8  # negative indices count from the end
        if name == "batchnorm_runtime_params":
            feeds["v"] = np.abs(feeds["v"]) + 0.5
        if name == "scatternd_runtime_rows":
            feeds["i"] = np.array([[4], [-6], [2]], np.int64)
        (y,) = ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, feeds)
        files = []
        for i, inp in enumerate(ins):
            np.save(os.path.join(d, f"input_{i}.npy"), feeds[inp[0]])
            files.append(f"ops/{name}/input_{i}.npy")
        np.save(os.path.join(d, "output_0.npy"), y if y.dtype != np.float32 else y.astype("<f4"))
        index[name] = {"model": f"ops/{name}/model.onnx", "opset": m.opset_import[0].version,
                       "ops": sorted({n.op_type for n in m.graph.node}), "inputs": files,
                       "outputs": [f"ops/{name}/output_0.npy"]}
    with open(os.path.join(dst, "index.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")
    # refusals of the new ops, added to errors/
    errs = os.path.join(OUT, "errors")
    ep = os.path.join(errs, "errors.json")
    expect = json.load(open(ep))
    def err(name, nodes, ins, inits, opset, *frags):
        g = helper.make_graph(nodes, "g", [V(n, s) for n, s in ins], [V("y", None)], list(inits))
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]),
                  os.path.join(errs, name))
        expect[name] = list(frags)
    err("zero_size_input.onnx", [helper.make_node("Relu", ["x"], ["y"], name="relu0")],
        [("x", [2, 0, 4])], [], 17, "graph input 'x' has a zero-size dimension 1")
    err("dropout_training.onnx", [helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="drop0")],
        [("x", [2, 4])], [F32("r", 0.5), numpy_helper.from_array(np.array(True), "t")], 13,
        "node 'drop0'", "training_mode is true with ratio 0.5")
    err("resize_antialias_nearest.onnx", [helper.make_node("Resize", ["x", "", "sc"], ["y"], name="rs0",
                                                           mode="nearest", antialias=1)],
        [("x", [1, 1, 4, 4])], [F32("sc", [1, 1, 0.5, 0.5])], 18, "node 'rs0'", "antialias 1")
    err("pad_reflect_too_wide.onnx", [helper.make_node("Pad", ["x", "p"], ["y"], name="pad0", mode="reflect")],
        [("x", [1, 4])], [I64("p", [0, 4, 0, 0])], 13, "node 'pad0'", "reflect pads", "larger than axis 1")
    err("scatternd_repeated_index.onnx", [helper.make_node("ScatterND", ["x", "i", "u"], ["y"], name="sc0")],
        [("x", [4, 3]), ("u", [2, 3])], [I64("i", [[1], [1]])], 16, "node 'sc0'", "indices repeat a position")
    err("convtranspose_runtime_weight.onnx", [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="ct0")],
        [("x", [1, 2, 4, 4]), ("w", [2, 2, 3, 3])], [], 17, "node 'ct0'", "weight 'w' must be a constant")
    with open(ep, "w") as f:
        json.dump(expect, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(index)} op cases")


def gen_int_ops():
    """ops/ cases of the exact integer ops, outputs from NumPy (no
    onnxruntime needed): an int64 CumSum (forward, and exclusive + reverse
    over values past 2^53, wrapping past 2^63) and an int32 chain of Div
    (truncating), Mod (fmod 0 and 1), BitwiseAnd and BitShift-free ops;
    merged into ops/index.json."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(32)
    index_path = os.path.join(OUT, "ops", "index.json")
    index = json.load(open(index_path))

    def case(name, nodes, inputs, inits, outputs, opset=17):
        d = os.path.join(OUT, "ops", name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        vi = lambda n, a: helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
        g = helper.make_graph(nodes, name, [vi(n, a) for n, a in inputs],
                              [vi(n, a) for n, a in outputs],
                              [numpy_helper.from_array(a, n) for n, a in inits])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(d, "model.onnx"))
        entry = {"model": f"ops/{name}/model.onnx", "opset": opset,
                 "ops": sorted({n.op_type for n in nodes}), "inputs": [], "outputs": []}
        for k, (n, a) in enumerate(inputs):
            np.save(os.path.join(d, f"input_{k}.npy"), a)
            entry["inputs"].append(f"ops/{name}/input_{k}.npy")
        for k, (n, a) in enumerate(outputs):
            np.save(os.path.join(d, f"output_{k}.npy"), a)
            entry["outputs"].append(f"ops/{name}/output_{k}.npy")
        index[name] = entry

    with np.errstate(over="ignore"):
        x = np.concatenate([rng.integers(-2 ** 62, 2 ** 62, (2, 5)),
                            np.array([[2 ** 63 - 7, 2 ** 53 + 1, 3, -1, 2 ** 62]])]).astype(np.int64)
        fwd = np.cumsum(x, axis=1)
        rev_excl = np.flip(np.cumsum(np.flip(x, 1), 1) - np.flip(x, 1), 1)
    case("cumsum_int64", [helper.make_node("CumSum", ["x", "ax"], ["y"]),
                          helper.make_node("CumSum", ["x", "ax"], ["z"], exclusive=1, reverse=1)],
         [("x", x)], [("ax", np.array(1, np.int64))], [("y", fwd), ("z", rev_excl)])
    a = rng.integers(-2 ** 31, 2 ** 31, (3, 4)).astype(np.int32)
    b = np.array([7, -3, 65537, -1], np.int32)
    with np.errstate(over="ignore"):
        q = (np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64)) *
             np.sign(a.astype(np.int64)) * np.sign(b.astype(np.int64))).astype(np.int32)   # truncating
    case("int32_div_mod_bitwise", [helper.make_node("Div", ["a", "b"], ["q"]),
                                   helper.make_node("Mod", ["a", "b"], ["m"]),
                                   helper.make_node("Mod", ["a", "b"], ["f"], fmod=1),
                                   helper.make_node("BitwiseAnd", ["a", "b"], ["n"])],
         [("a", a), ("b", b)], [], [("q", q), ("m", np.mod(a, b)), ("f", np.fmod(a, b)), ("n", a & b)],
         opset=18)
    with open(index_path, "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")
    print("integer op cases written")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--node", action="store_true")
    ap.add_argument("--models", action="store_true")
    ap.add_argument("--bad", action="store_true")
    ap.add_argument("--ops", action="store_true")
    ap.add_argument("--int-ops", action="store_true")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    if a.int_ops:
        gen_int_ops()
        return
    if not a.node and not a.models and not a.bad and not a.ops:
        a.node = a.models = a.bad = a.ops = True
    if a.models:
        idx = gen_models([14, 17], a.only)
        p = os.path.join(OUT, "models", "index.json")
        old = {}
        if a.only and os.path.exists(p):
            old = json.load(open(p))
        old.update(idx)
        with open(p, "w") as f:
            json.dump(old, f, indent=1, sort_keys=True)
            f.write("\n")
    if a.node:
        gen_node()
    if a.bad:
        gen_bad()
    if a.ops:
        gen_ops(a.only)


if __name__ == "__main__":
    main()
