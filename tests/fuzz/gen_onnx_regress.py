#!/usr/bin/env python3
"""Writes the ONNX regression inputs of tests/fuzz/regress/onnx/ (and their
copies in tests/data/onnx/bad/) byte by byte, with a minimal protobuf
encoder, because the `onnx` package refuses to build these malformed
models: an attribute typed TENSOR that holds no tensor, on Constant and on
ConstantOfShape (both crashed the importer, issue 13)."""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, wire, payload):
    key = varint((num << 3) | wire)
    if wire == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


def s(num, text):
    return field(num, 2, text.encode() if isinstance(text, str) else text)


def value_info(name, dims):
    shape = b"".join(s(1, field(1, 0, d)) for d in dims)
    tensor_type = field(1, 0, 1) + s(2, shape)          # elem_type FLOAT, shape
    return s(1, name) + s(2, s(1, tensor_type))


def node(op, inputs, outputs, name, attrs=b""):
    return (b"".join(s(1, i) for i in inputs) + b"".join(s(2, o) for o in outputs) +
            s(3, name) + s(4, op) + attrs)


def empty_tensor_attr(name):
    return s(5, s(1, name) + field(20, 0, 4))           # type TENSOR, no t


def int64_initializer(name, values):
    return (field(1, 0, len(values)) + field(2, 0, 7) +
            s(7, b"".join(varint(v) for v in values)) + s(8, name))


def model(nodes, inits=()):
    graph = (b"".join(s(1, n) for n in nodes) + s(2, "g") +
             b"".join(s(5, i) for i in inits) +
             s(11, value_info("x", [2])) + s(12, value_info("y", [2])))
    return field(1, 0, 8) + s(7, graph) + s(8, s(1, "") + field(2, 0, 17))


cases = {
    "constant_tensor_attr_empty.onnx": model([
        node("Constant", [], ["c"], "const0", empty_tensor_attr("value")),
        node("Add", ["x", "c"], ["y"], "add0")]),
    "constant_of_shape_tensor_attr_empty.onnx": model([
        node("ConstantOfShape", ["shape"], ["c"], "fill0", empty_tensor_attr("value")),
        node("Add", ["x", "c"], ["y"], "add0")], [int64_initializer("shape", [2])]),
}
for sub in ("tests/fuzz/regress/onnx", "tests/data/onnx/bad"):
    os.makedirs(os.path.join(ROOT, sub), exist_ok=True)
    for name, data in cases.items():
        with open(os.path.join(ROOT, sub, name), "wb") as f:
            f.write(data)
print("written:", ", ".join(cases))
