#!/usr/bin/env python3
"""Writes exact.json (a graph of every integer op on values beyond 2^24,
2^31 and 2^53, with wrap-around) and expected/NAME.npy: each output as
NumPy computes it. Run once; the tests (test_ints, test_codegen_emu) need
no Python.  Usage: /usr/bin/python3 tests/data/ints/gen_exact.py

NumPy's rules are mcir's (docs/ops.md "Integer semantics") except where
NumPy has no such op: `div` truncates toward zero (ONNX Div, C), written
here as floor division corrected by one where the signs differ and the
remainder is not zero; x / 0 and x mod 0 are 0 (NumPy's result, without its
warning)."""
import json
import os
import warnings

import numpy as np

warnings.simplefilter("ignore")   # NumPy warns on the overflows we test
HERE = os.path.dirname(os.path.abspath(__file__))

P53, P31 = 2 ** 53, 2 ** 31
I64 = {
    "a": [2 ** 40 + 1, -P53 - 3, 2 ** 62 + 12345, -2 ** 63 + 5, 2 ** 63 - 3, 16777217, -P31 - 1, 3],
    "b": [3, 7, -5, -1, 2, 16777217, -P31, 0],
    "big": [P53 + 1, P53 + 1, P53, 2 ** 60 + 1, 2 ** 60, 2 ** 60, -P53 - 1, -P53 - 1],
    "sh": [0, 1, 31, 32, 63, 64, -1, 70],
}
I32 = {
    "c": [P31 - 1, -P31, 65536, -46341, 12345, 7, -7, 0],
    "d": [1, -1, 65536, 46341, -3, 2, 2, 5],
    "sh32": [0, 1, 31, 32, 5, 40, -1, 3],
}
U8 = {"e": [255, 0, 128, 7, 200, 1, 3, 250], "f": [1, 255, 128, 3, 100, 7, 8, 9]}
BOOL = {"p": [1, 1, 0, 0, 1, 0, 1, 0], "q": [1, 0, 1, 0, 0, 0, 1, 1]}
F32 = {"x": [2.0 ** 60, -2.0 ** 40 - 2 ** 20, 16777216.0, -3.75, 3.99, 2.0 ** 31 - 128, -2.0 ** 31, 0.5]}
TABLE = [[P53 + 1 + 7 * r + k for k in range(3)] for r in range(5)]   # i64 [5, 3]
IDX = [4, -1, 0, 2, -5, 3]                                            # i64 [6]
ROWS = [[2 ** 60, 2 ** 60 + 1, 2 ** 60 - 1, 5], [2 ** 60 + 1, -P53 - 1, -P53 - 2, 6]]

arr = {}
arr.update({k: np.array(v, np.int64) for k, v in I64.items()})
arr.update({k: np.array(v, np.int32) for k, v in I32.items()})
arr.update({k: np.array(v, np.uint8) for k, v in U8.items()})
arr.update({k: np.array(v, bool) for k, v in BOOL.items()})
arr.update({k: np.array(v, np.float32) for k, v in F32.items()})
arr["table"] = np.array(TABLE, np.int64)
arr["idx"] = np.array(IDX, np.int64)
arr["rows"] = np.array(ROWS, np.int64)

weights = []
for name, a in arr.items():
    dt = {np.int64: "i64", np.int32: "i32", np.uint8: "u8", np.bool_: "bool", np.float32: "f32"}[a.dtype.type]
    v = a.astype(int).tolist() if dt != "f32" else a.tolist()
    weights.append({"name": name, "dtype": dt, "shape": list(a.shape), "value": v})

nodes, expect = [], {}


def node(op, ins, out, want, **attrs):
    n = {"name": out, "op": op, "inputs": ins, "outputs": [out]}
    if attrs:
        n["attrs"] = attrs
    nodes.append(n)
    expect[out] = want
    return want


def div_trunc(a, b):
    z = b == 0
    bs = np.where(z, 1, b).astype(a.dtype)
    q = a // bs
    fix = (a % bs != 0) & ((a < 0) != (bs < 0))
    return np.where(z, 0, q + fix.astype(a.dtype)).astype(a.dtype)


def mod(a, b, fmod):
    z = b == 0
    bs = np.where(z, 1, b).astype(a.dtype)
    r = np.fmod(a, bs) if fmod else np.mod(a, bs)
    return np.where(z, 0, r).astype(a.dtype)


def shift(a, s, left):   # NumPy's: counts outside [0, bits) shift every bit out
    bits = a.dtype.itemsize * 8
    out = []
    for x, k in zip(a.tolist(), s.tolist()):
        if 0 <= k < bits:
            out.append(np.left_shift(a.dtype.type(x), a.dtype.type(k)) if left
                       else np.right_shift(a.dtype.type(x), a.dtype.type(k)))
        else:
            out.append(0 if left or x >= 0 else -1)
    return np.array(out, a.dtype)


A, B = arr["a"], arr["b"]
for T, (x, y) in {"i64": ("a", "b"), "i32": ("c", "d"), "u8": ("e", "f")}.items():
    X, Y = arr[x], arr[y]
    node("add", [x, y], f"add_{T}", X + Y)
    node("sub", [x, y], f"sub_{T}", X - Y)
    node("mul", [x, y], f"mul_{T}", X * Y)
    node("div", [x, y], f"div_{T}", div_trunc(X, Y))
    node("mod", [x, y], f"mod_{T}", mod(X, Y, False))
    node("mod", [x, y], f"fmod_{T}", mod(X, Y, True), fmod=True)
    node("max", [x, y], f"max_{T}", np.maximum(X, Y))
    node("min", [x, y], f"min_{T}", np.minimum(X, Y))
    node("neg", [x], f"neg_{T}", -X)
    node("bitwise_and", [x, y], f"and_{T}", X & Y)
    node("bitwise_or", [x, y], f"or_{T}", X | Y)
    node("bitwise_xor", [x, y], f"xor_{T}", X ^ Y)
    node("bitwise_not", [x], f"not_{T}", ~X)
    node("less", [x, y], f"lt_{T}", X < Y)
    node("equal", [x, y], f"eq_{T}", X == Y)
node("left_shift", ["a", "sh"], "shl_i64", shift(A, arr["sh"], True))
node("right_shift", ["a", "sh"], "shr_i64", shift(A, arr["sh"], False))
node("left_shift", ["c", "sh32"], "shl_i32", shift(arr["c"], arr["sh32"], True))
node("right_shift", ["c", "sh32"], "shr_i32", shift(arr["c"], arr["sh32"], False))
node("left_shift", ["e", "f"], "shl_u8", shift(arr["e"], arr["f"], True))
node("right_shift", ["e", "f"], "shr_u8", shift(arr["e"], arr["f"], False))
P, Q = arr["p"], arr["q"]
node("bitwise_and", ["p", "q"], "and_bool", P & Q)
node("bitwise_or", ["p", "q"], "or_bool", P | Q)
node("bitwise_xor", ["p", "q"], "xor_bool", P ^ Q)
node("bitwise_not", ["p"], "not_bool", ~P)
# beyond 2^53: neighbours an f32 (or f64) would merge
BIG = arr["big"]
bigr = np.roll(BIG, 1)
nodes.append({"name": "roll", "op": "concat", "inputs": ["big_last", "big_head"], "outputs": ["big_r"],
              "attrs": {"axis": 0}})
nodes.append({"name": "big_last", "op": "slice", "inputs": ["big"], "outputs": ["big_last"],
              "attrs": {"axis": 0, "start": -1, "end": 8}})
nodes.append({"name": "big_head", "op": "slice", "inputs": ["big"], "outputs": ["big_head"],
              "attrs": {"axis": 0, "start": 0, "end": 7}})
node("equal", ["big", "big_r"], "eq_big", BIG == bigr)
node("not_equal", ["big", "big_r"], "ne_big", BIG != bigr)
node("less_equal", ["big", "big_r"], "le_big", BIG <= bigr)
node("greater", ["big", "big_r"], "gt_big", BIG > bigr)
node("greater_equal", ["big", "big_r"], "ge_big", BIG >= bigr)
node("where", ["p", "big", "a"], "where_big", np.where(P, BIG, A))
node("sub", ["big", "big_r"], "sub_big", BIG - bigr)
# casts between every pair of integer dtypes, integers to floats, floats to integers
for src in ("a", "c", "e", "p"):
    for to, npt in (("i64", np.int64), ("i32", np.int32), ("u8", np.uint8), ("bool", bool), ("f32", np.float32)):
        node("cast", [src], f"cast_{src}_{to}", arr[src].astype(npt), to=to)
X = arr["x"]
node("cast", ["x"], "cast_x_i64", X.astype(np.int64), to="i64")
node("cast", ["x"], "cast_x_bool", X.astype(bool), to="bool")
XS = [-3.75, 3.99, 16777216.0, 2147483520.0, -2147483648.0]   # within i32: NumPy defines these
node("cast", ["x_small"], "cast_x_i32", np.array(XS, np.float32).astype(np.int32), to="i32")
weights.append({"name": "x_small", "dtype": "f32", "shape": [5], "value": XS})
# arange past 2^62 (i64) and across 2^31 (wrapping into i32)
node("arange", [], "arange_i64", np.arange(2 ** 62 - 3, 2 ** 62 + 3, 2, dtype=np.int64),
     start=2 ** 62 - 3, end=2 ** 62 + 3, step=2)
node("arange", [], "arange_i32", np.arange(P31 - 2, P31 + 2, dtype=np.int64).astype(np.int32),
     start=P31 - 2, end=P31 + 2, dtype="i32")
# gather of values beyond 2^53 with negative indices; argmax / argmin of neighbours
node("gather", ["table", "idx"], "gather_big", np.take(arr["table"], arr["idx"], axis=0))
node("gather", ["table", "idx3"], "gather_cols", np.take(arr["table"], [2, -3, 1], axis=1), axis=1)
weights.append({"name": "idx3", "dtype": "i32", "shape": [3], "value": [2, -3, 1]})
node("argmax", ["rows"], "argmax_big", np.argmax(arr["rows"], axis=-1))
node("argmin", ["rows"], "argmin_big", np.argmin(arr["rows"], axis=-1))
node("argmax", ["rows"], "argmax_axis0", np.argmax(arr["rows"], axis=0, keepdims=True), axis=0, keepdims=True)
# long rows (a block per row in the reduce template): made in the graph
k = np.arange(6000, dtype=np.int64)
long_rows = ((k * 7919) % 10007 + 2 ** 60).reshape(2, 3000)
node("arange", [], "long_k", k, end=6000)
node("mul", ["long_k", "p7919"], "long_m", k * 7919)
node("mod", ["long_m", "p10007"], "long_r", (k * 7919) % 10007)
node("add", ["long_r", "two60"], "long_v", (k * 7919) % 10007 + 2 ** 60)
node("reshape", ["long_v"], "long_rows", long_rows, shape=[2, 3000])
node("argmax", ["long_rows"], "argmax_long", np.argmax(long_rows, axis=-1))
node("argmin", ["long_rows"], "argmin_long", np.argmin(long_rows, axis=-1))
weights += [{"name": "p7919", "dtype": "i64", "shape": [], "value": 7919},
            {"name": "p10007", "dtype": "i64", "shape": [], "value": 10007},
            {"name": "two60", "dtype": "i64", "shape": [], "value": 2 ** 60}]
# cumulative sums past 2^63 (wrapping) and in i32, exclusive and reverse
node("cumsum", ["a"], "cumsum_i64", np.cumsum(A), axis=0)
node("cumsum", ["c"], "cumsum_i32", np.cumsum(arr["c"], dtype=np.int32), axis=0)
node("cumsum", ["rows"], "cumsum_excl_rev", np.flip(np.cumsum(np.flip(arr["rows"], 1), 1) - np.flip(arr["rows"], 1), 1),
     axis=1, exclusive=True, reverse=True)
node("cumsum", ["rows"], "cumsum_axis0", np.cumsum(arr["rows"], axis=0), axis=0)
node("transpose", ["table"], "transpose_big", arr["table"].T, perm=[1, 0])
nodes.append({"name": "split_big", "op": "split", "inputs": ["table"], "outputs": ["split_a", "split_b"],
              "attrs": {"axis": 1, "sizes": [1, 2]}})
expect["split_a"], expect["split_b"] = arr["table"][:, :1], arr["table"][:, 1:]
# a chain the kernels fuse: ((a * 3) + big) mod 1000003, cast to i32, shifted
c1 = A * np.int64(3)
c2 = c1 + BIG
c3 = mod(c2, np.full(8, 1000003, np.int64), False)
c4 = c3.astype(np.int32)
node("mul", ["a", "three"], "chain_mul", c1)
node("add", ["chain_mul", "big"], "chain_add", c2)
node("mod", ["chain_add", "prime"], "chain_mod", c3)
node("cast", ["chain_mod"], "chain_i32", c4, to="i32")
node("left_shift", ["chain_i32", "sh32"], "chain_out", shift(c4, arr["sh32"], True))
weights.append({"name": "three", "dtype": "i64", "shape": [], "value": 3})
weights.append({"name": "prime", "dtype": "i64", "shape": [], "value": 1000003})

outputs = [o for o in expect if o not in ("chain_mul", "chain_add", "chain_mod", "chain_i32", "long_k",
                                         "long_m", "long_r", "long_v", "long_rows")]
graph = {"mcir": 1, "name": "exact_ints", "inputs": [], "weights": weights, "nodes": nodes,
         "outputs": outputs}
with open(os.path.join(HERE, "exact.json"), "w") as f:
    json.dump(graph, f, indent=1)
    f.write("\n")
exp = os.path.join(HERE, "expected")
os.makedirs(exp, exist_ok=True)
for name in outputs:
    np.save(os.path.join(exp, f"{name}.npy"), np.ascontiguousarray(expect[name]))
print(f"{len(nodes)} nodes, {len(outputs)} outputs")
