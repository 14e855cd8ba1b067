#!/usr/bin/python3
"""torch_gemm.py — the bench_gemm shapes through PyTorch, written as the
models write them and run eagerly: torch.matmul for products of two
activations (batched ones too), F.linear for Linear layers (weight [N, K]),
torch.addmm for GPT-2's Conv1D (weight [K, N]) with its bias, then each
epilogue op as a separate kernel (F.gelu, F.relu, the residual add, the
scale and .float()), and the SwiGLU prologue F.silu(gate) * up before the
down projection; the conv suite's F.conv2d(x, w, bias) on channels-first
(NCHW) tensors, then + residual and F.relu; the cast suite's A given in
f32 and cast first, x.to(dtype) (or (F.silu(g) * u).to(dtype)), then
F.linear; the mlp suite's Llama gated MLP, F.linear(F.silu(F.linear(x, wg))
* F.linear(x, wu), wd), eagerly and through torch.compile (impl
torch_compile: compiled once before the warm-up, the default mode).
Timed like bench_gemm (CUDA events, warm-up, median of
--reps, L2 flushed before every run, inputs resident). Same CSV columns;
impl torch_eager is that composition, torch_gemm_only the product alone
(no bias, no epilogue, the prologue's output given; a conv's F.conv2d
without its bias) for the shapes that have more than a product; path
names the calls.

    /usr/bin/python3 bench/torch_gemm.py [--suite plain|epilogue|swiglu|batch|conv|cast|mlp|all]
        [--match TEXT[,TEXT...]] [--reps 30] [--warmup 5] [--csv FILE] [--list]

--list prints the selected shapes' names (as bench_gemm names them) and
needs no torch. Exits 77 with one line when torch sees no GPU. A shape
that fails or runs out of memory gets a row saying so.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_timing as tt  # noqa: E402

SCALE = 0.0625   # scale_cast_f32's logit scale, as bench_gemm.c


def rand(torch, shape, dtype, g):
    return torch.rand(*shape, device="cuda", generator=g, dtype=torch.float32).mul_(2).sub_(1).to(dtype)


def product_call(shape, with_bias):
    """How the model calls the product: F.linear for a Linear layer's
    weight [N, K], torch.addmm for GPT-2's Conv1D [K, N] with its bias,
    torch.matmul otherwise."""
    trans_b, weight_b = shape[7], shape[9]
    if weight_b and trans_b:
        return "linear(bias)" if with_bias else "linear"
    return "addmm" if weight_b and with_bias else "matmul"


# each epilogue after the product, as the path column names it
EPILOGUE_CALLS = {"none": "", "bias_gelu_tanh": " + gelu(tanh)", "bias_gelu_erf": " + gelu",
                  "bias_relu": " + relu", "bias_residual": " + add", "residual": " + add",
                  "scale_cast_f32": " + mul + float", "silu_mul_prologue": "", "cast_f32_prologue": "",
                  "silu_mul_cast_f32_prologue": "", "gated_mlp": "", "gated_mlp_glu": ""}
# what runs before the product, from the inputs to A
PROLOGUE_CALLS = {"silu_mul_prologue": "silu + mul + ", "cast_f32_prologue": "to(%s) + ",
                  "silu_mul_cast_f32_prologue": "silu + mul + to(%s) + "}


def conv_calls(torch, shape, x):
    """The conv suite's (eager fn, path, product-only fn): F.conv2d with
    its bias, the residual add, F.relu, as torchvision's BasicBlock."""
    F = torch.nn.functional
    stride, pad = shape[11][6], shape[11][7]
    w, bias, r = x["w"], x["bias"], x.get("r")

    def eager():
        y = F.conv2d(x["x"], w, bias, stride=stride, padding=pad)
        if r is not None:
            y = y + r
        return F.relu(y)

    path = "conv2d(bias)" + (" + add" if r is not None else "") + " + relu"
    return eager, path, lambda: F.conv2d(x["x"], w, None, stride=stride, padding=pad)


def mlp_calls(torch, x):
    """The mlp suite's (eager fn, path, None): Llama's MLP as transformers'
    LlamaMLP writes it."""
    F = torch.nn.functional

    def eager():
        return F.linear(F.silu(F.linear(x["x"], x["wg"])) * F.linear(x["x"], x["wu"]), x["wd"])

    return eager, "linear + linear + silu + mul + linear", None


def calls(torch, shape, x):
    """(eager fn, its path, product-only fn or None) for one shape on tensors x."""
    if shape[11]:
        return conv_calls(torch, shape, x)
    if shape[0] == "mlp":
        return mlp_calls(torch, x)
    F = torch.nn.functional
    n, k, trans_b, epi = shape[5], shape[6], shape[7], shape[10]
    b, bias, r = x["b"], x.get("bias"), x.get("r")
    dtype = tt.torch_dtype(torch, shape[2])

    def product(inp, with_bias):
        call = product_call(shape, with_bias)
        if call.startswith("linear"):
            return F.linear(inp, b, bias if with_bias else None)
        if call == "addmm":
            return torch.addmm(bias, inp.reshape(-1, k), b).view(*inp.shape[:-1], n)
        return torch.matmul(inp, b.transpose(-1, -2) if trans_b else b)

    def eager():
        inp = F.silu(x["gate"]) * x["up"] if "silu_mul" in epi else x["a"]
        if epi.endswith("cast_f32_prologue"):
            inp = inp.to(dtype)
        y = product(inp, bias is not None)
        if epi == "bias_gelu_tanh":
            y = F.gelu(y, approximate="tanh")
        elif epi == "bias_gelu_erf":
            y = F.gelu(y)
        elif epi == "bias_relu":
            y = F.relu(y)
        elif epi == "scale_cast_f32":
            y = (y * SCALE).float()
        if r is not None:
            y = r + y
        return y

    path = product_call(shape, bias is not None) + EPILOGUE_CALLS[epi]
    if epi in PROLOGUE_CALLS:
        path = PROLOGUE_CALLS[epi].replace("%s", shape[2]) + path
    if epi == "none":
        return eager, path, None
    only = x["h"] if epi in PROLOGUE_CALLS else x["a"]
    return eager, path, lambda: product(only, False)


def tensors(torch, shape):
    suite, label, dt, batch, m, n, k, trans_b, shared_b, weight_b, epi, conv = shape
    dtype = tt.torch_dtype(torch, dt)
    g = torch.Generator(device="cuda").manual_seed(1)
    if conv:   # NCHW image, [O, C, KH, KW] weight, [O] bias, the output's residual
        c, h, w, o, kh, kw, stride, pad = conv
        x = {"x": rand(torch, [batch, c, h, w], dtype, g), "w": rand(torch, [o, c, kh, kw], dtype, g),
             "bias": rand(torch, [o], dtype, g)}
        if "residual" in epi:
            oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
            x["r"] = rand(torch, [batch, o, oh, ow], dtype, g)
        return x
    if suite == "mlp":   # x [M, D], wg and wu [F, D], wd [D, F]
        return {"x": rand(torch, [m, k], dtype, g), "wg": rand(torch, [n, k], dtype, g),
                "wu": rand(torch, [n, k], dtype, g), "wd": rand(torch, [k, n], dtype, g)}
    lead = [batch] if batch > 1 else []
    x = {"a": None}
    at = torch.float32 if epi.endswith("cast_f32_prologue") else dtype   # A's (or gate's and up's) as given
    if epi in PROLOGUE_CALLS:
        if "silu_mul" in epi:
            x["gate"], x["up"] = rand(torch, lead + [m, k], at, g), rand(torch, lead + [m, k], at, g)
            x["h"] = torch.nn.functional.silu(x["gate"]) * x["up"]
        else:
            x["a"] = rand(torch, lead + [m, k], at, g)
            x["h"] = x["a"]
        x["h"] = x["h"].to(dtype)
    else:
        x["a"] = rand(torch, lead + [m, k], dtype, g)
    x["b"] = rand(torch, ([] if shared_b else lead) + ([n, k] if trans_b else [k, n]), dtype, g)
    if epi.startswith("bias_"):
        x["bias"] = rand(torch, [n], dtype, g)
    if epi in ("bias_residual", "residual"):
        x["r"] = rand(torch, lead + [m, n], dtype, g)
    return x


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="all",
                    choices=["all", "plain", "epilogue", "swiglu", "batch", "conv", "cast", "mlp"])
    ap.add_argument("--match", default=None, help="only shapes whose name holds one of these (comma-separated)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--csv", default=None)
    ap.add_argument("--list", action="store_true", help="print the selected shapes' names and exit")
    a = ap.parse_args(argv)
    if a.reps < 1 or a.warmup < 0:
        ap.error("--reps must be at least 1 and --warmup at least 0")
    shapes = []
    for s in tt.gemm_shapes(a.suite):
        name = tt.gemm_name(*s[:9], s[10], s[11])
        if tt.matches(name, a.match):
            shapes.append((name, s))
    if not shapes:
        print("torch_gemm: no shape of suite %s matches '%s'" % (a.suite, a.match or ""), file=sys.stderr)
        return 2
    if a.list:
        print("\n".join(name for name, _ in shapes))
        return 0
    import torch
    tt.need_cuda(torch, "torch_gemm")
    timer = tt.CudaTimer(torch, a.warmup, a.reps)
    out = tt.open_csv(a.csv)
    print(tt.GEMM_HEADER, file=out)
    for name, s in shapes:
        suite, label, dt, batch, m, n, k, trans_b, shared_b, weight_b, epi, conv = s
        flops = (3.0 if suite == "mlp" else 1.0) * 2.0 * batch * m * n * k   # a conv's: 2 N O OH OW C KH KW
        layout = "NCHW" if conv else ("NT" if trans_b else "NN") + ("/shared" if shared_b and batch > 1 else "")
        x, runs = None, []
        try:
            x = tensors(torch, s)
            eager, path, only = calls(torch, s, x)
            runs = [("torch_eager", path, eager)]
            if only:
                runs.append(("torch_gemm_only", "conv2d only" if conv else "gemm only", only))
            if suite == "mlp":   # compiled before its warm-up: the timing is the compiled code's
                compiled = torch.compile(eager)
                compiled()
                runs.append(("torch_compile", "torch.compile(" + path + ")", compiled))
        except RuntimeError as e:   # out of memory (torch.cuda.OutOfMemoryError is one) or refused
            runs = [("torch_eager", "", "failed: " + str(e).split("\n")[0][:120])]
        for impl, path, fn in runs:
            med = mn = None
            status = fn if isinstance(fn, str) else "ok"
            if not isinstance(fn, str):
                try:
                    med, mn = timer.time(fn)
                except RuntimeError as e:
                    status = "failed: " + str(e).split("\n")[0][:120]
            row = [suite, impl, name, dt, m, n, k, batch, layout, epi, path, "", "", "", "",
                   "%.2f" % (med * 1e3) if med else "", "%.2f" % (mn * 1e3) if mn else "",
                   "%.2f" % (flops / (med * 1e-3) / 1e12) if med else "", "", timer.device,
                   status.replace(",", ";")]
            print(",".join(str(v) for v in row), file=out, flush=True)
        del x
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
