#!/usr/bin/env python3
"""Graphs with ranks against NumPy (issue #46: "the N-rank interpreter
against NumPy"): each graph is written with its weights and inputs as .npy
files, run by `mcirc --run --device cpu` (every rank in one process, in
lockstep), and each rank's output file compared with what NumPy computes
from the whole tensors: all_reduce (sum, max, min; f32 and i64),
all_gather along an inner axis, reduce_scatter, a 4-rank sharded MLP, and a
weight split in blocks (a fused QKV) gathered back in rank order.

    ranks_numpy.py MCIRC        exit 77 (skip) without NumPy
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("NumPy is not installed (Debian: python3-numpy): skipped")
    sys.exit(77)

MCIRC = sys.argv[1]
rng = np.random.default_rng(46)
failures = []


def varied(shape, dtype=np.float32):
    """Finite, varied values (no zeros, no repeats to speak of)."""
    if dtype == np.int64:
        return rng.integers(-1000, 1000, size=shape, dtype=np.int64)
    return (rng.standard_normal(shape) + 0.1).astype(dtype)


def run(name, ranks, inputs, weights, nodes, outputs):
    """Writes and runs a graph: {output: [rank 0's, rank 1's, ...]}."""
    d = tempfile.mkdtemp(prefix="ranks_numpy.")
    spec_in, spec_w, args = [], [], []
    for nm, (arr, shard) in inputs.items():
        dt = "i64" if arr.dtype == np.int64 else "f32"
        e = {"name": nm, "dtype": dt, "shape": list(arr.shape)}
        if shard:
            e["shard"] = shard
        spec_in.append(e)
        np.save(os.path.join(d, nm + ".npy"), arr)
        args += ["--input", "%s=%s" % (nm, os.path.join(d, nm + ".npy"))]
    for nm, (arr, shard) in weights.items():
        e = {"name": nm, "dtype": "f32", "shape": list(arr.shape), "data": nm + ".npy"}
        if shard:
            e["shard"] = shard
        spec_w.append(e)
        np.save(os.path.join(d, nm + ".npy"), arr)
    g = {"mcir": 1, "name": name, "ranks": ranks, "inputs": spec_in, "weights": spec_w,
         "nodes": nodes, "outputs": outputs}
    path = os.path.join(d, "graph.json")
    with open(path, "w") as f:
        json.dump(g, f)
    out = os.path.join(d, "out")
    try:
        r = subprocess.run([MCIRC, path, "--run", "--device", "cpu", "-o", out] + args,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("%s: mcirc exit %d\n%s%s" % (name, r.returncode, r.stdout, r.stderr))
        res = {}
        for o in outputs:
            one = os.path.join(out, o + ".npy")
            if os.path.exists(one):   # the same on every rank
                res[o] = [np.load(one)] * ranks
            else:
                res[o] = [np.load(os.path.join(out, "%s.rank%d.npy" % (o, k)))
                          for k in range(ranks)]
        return res
    finally:
        shutil.rmtree(d, ignore_errors=True)


def check(name, got, want, tol):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        failures.append("%s: shape %s, NumPy %s" % (name, got.shape, want.shape))
        return
    assert np.isfinite(want.astype(np.float64)).all() and np.abs(want).max() > 0 and \
        want.astype(np.float64).std() > 0, name
    if tol == 0:
        ok = np.array_equal(got, want)
        err = 0.0 if ok else float(np.abs(got.astype(np.float64) - want).max())
    else:
        err = float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())
        ok = err <= tol
    print("  %-40s %s  rel err %.3g" % (name, "ok  " if ok else "FAIL", err))
    if not ok:
        failures.append("%s: rel err %g > %g" % (name, err, tol))


def parts(a, axis, n):
    return np.split(a, n, axis=axis)


# all_reduce of each rank's rows: sum, max, min; f32 and i64 (exact)
for dt, tol in ((np.float32, 1e-6), (np.int64, 0)):
    x = varied((6, 5), dt)
    for op in ("sum", "max", "min"):
        res = run("all_reduce_%s" % op, 3, {"x": (x, {"axis": 0})}, {},
                  [{"op": "all_reduce", "inputs": ["x"], "outputs": ["y"], "attrs": {"op": op}}],
                  ["y"])
        f = {"sum": np.sum, "max": np.max, "min": np.min}[op]
        want = f(np.stack(parts(x, 0, 3)), axis=0)
        for k in range(3):
            check("all_reduce %s %s (rank %d)" % (op, np.dtype(dt).name, k), res["y"][k], want, tol)

# all_gather along an inner axis of an elementwise op's result: the whole tensor
x = varied((3, 8, 4))
res = run("all_gather", 4, {"x": (x, {"axis": 1})}, {},
          [{"op": "relu", "inputs": ["x"], "outputs": ["r"]},
           {"op": "all_gather", "inputs": ["r"], "outputs": ["y"], "attrs": {"axis": 1}}], ["y"])
for k in range(4):
    check("all_gather axis 1 (rank %d)" % k, res["y"][k], np.maximum(x, 0), 0)

# reduce_scatter: rank r gets part r of the sum over the ranks' parts
x = varied((8, 6))
res = run("reduce_scatter", 2, {"x": (x, {"axis": 1})}, {},
          [{"op": "reduce_scatter", "inputs": ["x"], "outputs": ["y"], "attrs": {"axis": 0}}],
          ["y"])
total = sum(parts(x, 1, 2))
for k in range(2):
    check("reduce_scatter axis 0 (rank %d)" % k, res["y"][k], parts(total, 0, 2)[k], 1e-6)

# the Megatron MLP on 4 ranks: column-parallel, relu, row-parallel, all_reduce
x, w_up, w_down = varied((2, 8, 32)), varied((32, 64)) * 0.2, varied((64, 32)) * 0.2
res = run("mlp", 4, {"x": (x, None)},
          {"w_up": (w_up, {"axis": 1}), "w_down": (w_down, {"axis": 0})},
          [{"op": "matmul", "inputs": ["x", "w_up"], "outputs": ["h"]},
           {"op": "relu", "inputs": ["h"], "outputs": ["a"]},
           {"op": "matmul", "inputs": ["a", "w_down"], "outputs": ["p"]},
           {"op": "all_reduce", "inputs": ["p"], "outputs": ["y"]}], ["y", "p"])
want = np.maximum(x @ w_up, 0) @ w_down
for k in range(4):
    check("sharded MLP y (rank %d)" % k, res["y"][k], want, 1e-5)
    # each rank's partial sum: its columns of w_up, its rows of w_down
    cols = slice(16 * k, 16 * (k + 1))
    check("sharded MLP p (rank %d)" % k, res["p"][k],
          np.maximum(x @ w_up[:, cols], 0) @ w_down[cols, :], 1e-5)

# a weight split in 3 blocks (q | k | v): rank r holds its part of each
# block; the gather concatenates the ranks' results in rank order
x, w = varied((5, 8)), varied((8, 12))
res = run("blocks", 2, {"x": (x, None)}, {"w": (w, {"axis": 1, "blocks": 3})},
          [{"op": "matmul", "inputs": ["x", "w"], "outputs": ["h"]},
           {"op": "all_gather", "inputs": ["h"], "outputs": ["y"], "attrs": {"axis": 1}}],
          ["y", "h"])
full = x @ w
mine = [np.concatenate([full[:, 4 * b + 2 * k:4 * b + 2 * k + 2] for b in range(3)], axis=1)
        for k in range(2)]
for k in range(2):
    check("blocked shard h (rank %d)" % k, res["h"][k], mine[k], 1e-5)
    check("blocked shard gathered (rank %d)" % k, res["y"][k], np.concatenate(mine, axis=1), 1e-5)

if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)
print("all ranks agree with NumPy")
