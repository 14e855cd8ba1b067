#!/usr/bin/python3
"""torch_cpu.py — PyTorch on the CPU, on the same graphs and inputs as
bench_cpu (mcirc --run --device cpu): each examples/NAME/graph.json run op
by op in PyTorch eager (torch functions, f32, each intermediate dropped
after its last use, as eager Python does), the GPT-2 and Llama blocks also
written as modules are written (F.layer_norm, F.linear, F.gelu, softmax
attention), and torch.compile of those where this torch has it. Inputs and
weights are mcir's seeded values (scripts/mcir_seed.py), so outputs are
checked against examples/NAME/expected. Median wall and CPU seconds of
--reps runs after one warm-up, torch.set_num_threads(--threads); PyTorch's
own CPU peak from the profiler's memory events (bytes live at once,
counted from the first op; weights and inputs included).

    /usr/bin/python3 bench/torch_cpu.py [--threads 2] [--reps 5] [--csv FILE] [NAME ...]
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import mcir_graph  # noqa: E402
import mcir_seed  # noqa: E402

HEADER = ("example,impl,median_s,cpu_s,peak_bytes,max_rel_err,threads,reps,torch,status")


def op_fn(torch, op, xs, a):
    F = torch.nn.functional
    x = xs[0]
    if op == "matmul":
        A, B = xs
        if a.get("transpose_a"):
            A = A.transpose(-1, -2)
        if a.get("transpose_b"):
            B = B.transpose(-1, -2)
        return [torch.matmul(A, B)]
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
              "max": torch.maximum, "min": torch.minimum}
    if op in binary:
        return [binary[op](xs[0], xs[1])]
    unary = {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "exp": torch.exp,
             "log": torch.log, "erf": torch.erf, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "neg": torch.neg,
             "reciprocal": torch.reciprocal, "silu": F.silu}
    if op in unary:
        return [unary[op](x)]
    if op == "scale":
        return [x * float(np.float32(a["value"]))]
    if op == "gelu":
        return [F.gelu(x, approximate=a.get("approximate", "none"))]
    if op == "softmax":
        return [torch.softmax(x, dim=a.get("axis", -1))]
    if op in ("layernorm", "rmsnorm"):
        ax = a.get("axis", -1) % x.dim()
        shape = tuple(x.shape[ax:])
        if op == "layernorm":
            return [F.layer_norm(x, shape, xs[1].expand(shape), xs[2].expand(shape) if len(xs) > 2 else None,
                                 float(a.get("eps", 1e-5)))]
        dims = tuple(range(ax, x.dim()))
        return [x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + float(a.get("eps", 1e-6))) * xs[1]]
    if op in ("reduce_sum", "reduce_mean", "reduce_max"):
        dims, keep = tuple(a["axes"]), a.get("keepdims", True)
        if op == "reduce_max":
            return [torch.amax(x, dim=dims, keepdim=keep)]
        return [(torch.sum if op == "reduce_sum" else torch.mean)(x, dim=dims, keepdim=keep)]
    if op == "transpose":
        return [x.permute(*a["perm"])]
    if op == "reshape":
        return [x.reshape(a["shape"])]
    if op == "split":
        return list(torch.split(x, a["sizes"], dim=a["axis"]))
    if op == "concat":
        return [torch.cat(xs, dim=a["axis"])]
    if op == "slice":
        n = x.shape[a["axis"]]
        s, e, st = a["start"], a["end"], a.get("step", 1)
        s, e = max(0, min(n, s if s >= 0 else s + n)), max(0, min(n, e if e >= 0 else e + n))
        return [x.narrow(a["axis"], s, max(0, e - s))[(slice(None),) * (a["axis"] % x.dim()) + (slice(None, None, st),)]]
    if op == "conv2d":
        p = a.get("pads", [0, 0, 0, 0])
        if p[0] != p[2] or p[1] != p[3]:
            x = F.pad(x, (p[1], p[3], p[0], p[2]))
            p = [0, 0]
        return [F.conv2d(x, xs[1], xs[2] if len(xs) > 2 else None, a.get("strides", [1, 1]), p[:2],
                         a.get("dilations", [1, 1]), a.get("groups", 1))]
    if op in ("max_pool2d", "avg_pool2d"):
        k = a["kernel"]
        st = a.get("strides", k)
        p = a.get("pads", [0, 0, 0, 0])   # top, left, bottom, right
        if op == "max_pool2d":
            x = F.pad(x, (p[1], p[3], p[0], p[2]), value=float("-inf"))
            return [F.max_pool2d(x, k, st)]
        # average over the window's elements inside the input (padding not counted)
        ones = F.pad(torch.ones_like(x[:1, :1]), (p[1], p[3], p[0], p[2]))
        x = F.pad(x, (p[1], p[3], p[0], p[2]))
        return [F.avg_pool2d(x, k, st) / F.avg_pool2d(ones, k, st)]
    if op == "global_avg_pool":
        return [x.mean(dim=(2, 3), keepdim=True)]
    if op == "attention":
        q, k, v = xs[:3]
        s = torch.matmul(q, k.transpose(-1, -2)) * (float(np.float32(a["scale"])) if "scale" in a
                                                     else 1 / math.sqrt(q.shape[-1]))
        if len(xs) > 3:
            s = s + xs[3]
        if a.get("causal"):
            nq, nk = q.shape[-2], k.shape[-2]
            m = torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq)
            s = s.masked_fill(~m, float("-inf"))
        return [torch.matmul(torch.softmax(s, -1), v)]
    raise ValueError("op %s not mapped to torch" % op)


def load(torch, path, given):
    g, shapes, dtypes = mcir_graph.check(path)
    base = os.path.dirname(os.path.abspath(path))
    leaves = {}
    for t in g["inputs"]:
        v = given[t["name"]] if t["name"] in given else mcir_seed.fill(t["name"], t["shape"], t["dtype"], "input", 0)
        leaves[t["name"]] = torch.from_numpy(np.ascontiguousarray(mcir_seed.round_to_dtype(
            np.asarray(v, np.float32), t["dtype"])))
    for t in g.get("weights", []):
        leaves[t["name"]] = torch.from_numpy(np.ascontiguousarray(mcir_graph.load_weight(t, base)))
    return g, leaves


def graph_runner(torch, g):
    """A function running g op by op, dropping each value after its last use."""
    order = [g["nodes"][i] for i in g["_order"]]
    last = {}
    for k, n in enumerate(order):
        for t in n["inputs"]:
            last[t] = k
    outs = set(g["outputs"])

    def run(leaves):
        env = dict(leaves)
        for k, n in enumerate(order):
            ys = op_fn(torch, n["op"], [env[t] for t in n["inputs"]], n.get("attrs", {}))
            for o, y in zip(n["outputs"], ys):
                env[o] = y
            for t in n["inputs"]:
                if last.get(t) == k and t not in outs and t not in leaves:
                    env.pop(t, None)
        return {o: env[o] for o in g["outputs"]}
    return run


def gpt2_module(torch, W, mask):
    F = torch.nn.functional
    H, NH = 768, 12

    def block(x):
        p = "h0"
        b, s, _ = x.shape
        h = F.layer_norm(x, (H,), W[p + ".ln_1.weight"], W[p + ".ln_1.bias"], 1e-5)
        qkv = F.linear(h, W[p + ".attn.c_attn.weight"].t(), W[p + ".attn.c_attn.bias"])
        q, k, v = (t.view(b, s, NH, H // NH).transpose(1, 2) for t in qkv.split(H, dim=-1))
        a = torch.softmax(q @ k.transpose(-1, -2) / 8.0 + mask, dim=-1) @ v
        a = a.transpose(1, 2).reshape(b, s, H)
        x = x + F.linear(a, W[p + ".attn.c_proj.weight"].t(), W[p + ".attn.c_proj.bias"])
        h = F.layer_norm(x, (H,), W[p + ".ln_2.weight"], W[p + ".ln_2.bias"], 1e-5)
        h = F.gelu(F.linear(h, W[p + ".mlp.c_fc.weight"].t(), W[p + ".mlp.c_fc.bias"]), approximate="tanh")
        return {"y": x + F.linear(h, W[p + ".mlp.c_proj.weight"].t(), W[p + ".mlp.c_proj.bias"])}
    return block


def llama_module(torch, W):
    F = torch.nn.functional
    H, NH, HD = 1024, 16, 64
    cos, sin, mask = W["rope.cos"], W["rope.sin"], W["c.causal_mask"]

    def rope(t):
        return t * cos + torch.cat([-t[..., HD // 2:], t[..., :HD // 2]], dim=-1) * sin

    def rms(t, w):
        return w * (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6))

    def block(x):
        p = "l0"
        b, s, _ = x.shape
        h = rms(x, W[p + ".input_norm.weight"])
        q, k, v = (F.linear(h, W[p + ".attn.%s_proj.weight" % n]).view(b, s, NH, HD).transpose(1, 2)
                   for n in ("q", "k", "v"))
        q, k = rope(q) * 0.125, rope(k)
        a = torch.softmax(q @ k.transpose(-1, -2) + mask, dim=-1) @ v
        x = x + F.linear(a.transpose(1, 2).reshape(b, s, H), W[p + ".attn.o_proj.weight"])
        h = rms(x, W[p + ".post_attn_norm.weight"])
        m = F.silu(F.linear(h, W[p + ".mlp.gate_proj.weight"])) * F.linear(h, W[p + ".mlp.up_proj.weight"])
        return {"y": x + F.linear(m, W[p + ".mlp.down_proj.weight"])}
    return block


def timed(fn, arg, reps):
    fn(arg)   # warm-up
    wall, cpu = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        fn(arg)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return float(np.median(wall)), float(np.median(cpu))


def peak_bytes(torch, fn, arg, leaves):
    """Largest total of bytes PyTorch's CPU allocator holds at once while fn
    runs, at op granularity: the running sum, in time order, of every
    profiler event's self memory (allocations and frees, temporaries freed
    inside one op net out), plus the leaves (weights, inputs) held before."""
    base = sum(t.numel() * t.element_size() for t in leaves.values())
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        fn(arg)
    cur = peak = 0
    for e in sorted(prof.events(), key=lambda e: e.time_range.start):
        cur += e.self_cpu_memory_usage
        peak = max(peak, cur)
    return base + peak


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--csv", default=None)
    ap.add_argument("names", nargs="*")
    a = ap.parse_args(argv)
    import torch
    torch.set_num_threads(a.threads)
    index = json.load(open(os.path.join(ROOT, "examples", "index.json")))
    out = sys.stdout if a.csv in (None, "-") else open(a.csv, "w")
    print(HEADER, file=out)
    for name in a.names or sorted(index):
        e = index[name]
        path = os.path.join(ROOT, "examples", e["graph"])
        given = {n: np.load(os.path.join(ROOT, "examples", p)) for n, p in e["inputs"].items()}
        g, leaves = load(torch, path, given)
        expected = {o: np.load(os.path.join(ROOT, "examples", p)) for o, p in e["outputs"].items()}
        inputs = {t["name"]: leaves[t["name"]] for t in g["inputs"]}
        W = {k: v for k, v in leaves.items() if k not in inputs}
        impls = [("torch_eager_graph", lambda inp, run=graph_runner(torch, g): run({**W, **inp}))]
        if name == "gpt2_block":
            impls.append(("torch_eager_module", lambda inp, m=gpt2_module(torch, W, W["c.causal_mask"]): m(inp["x"])))
        if name == "llama_block":
            impls.append(("torch_eager_module", lambda inp, m=llama_module(torch, W): m(inp["x"])))
        if hasattr(torch, "compile"):
            impls += [(i.replace("eager", "compile"), torch.compile(f)) for i, f in list(impls) if "module" in i]
        for impl, fn in impls:
            status, med = "ok", None
            try:
                with torch.no_grad():
                    got = fn(inputs)
                    err = max(float(np.abs(got[o].float().numpy() - expected[o]).max() /
                                    max(np.abs(expected[o]).max(), 1e-30)) for o in expected)
                    med, cpu = timed(fn, inputs, a.reps)
                    peak = peak_bytes(torch, fn, inputs, leaves)
            except (RuntimeError, ValueError) as ex:
                status = "failed: " + str(ex).split("\n")[0][:100].replace(",", ";")
            row = [name, impl] + (["%.5f" % med, "%.5f" % cpu, str(peak), "%.2e" % err] if med is not None
                                  else ["", "", "", ""]) + [str(a.threads), str(a.reps), torch.__version__, status]
            print(",".join(row), file=out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
