#!/usr/bin/python3
"""torch_norms.py — bench_norms' sweep through PyTorch's own kernels, timed
like bench_norms (CUDA events, L2 flushed, median). Same CSV, same shape
names (OP/DTYPE/rROWS/wWIDTH). Two suites:

  norms: F.layer_norm, F.rms_norm where this torch has it else the eager
    x * rsqrt(mean(x^2) + eps) * w, torch.softmax; next to a
    device-to-device copy of x measured in the same run;
  elementwise: eager PyTorch, one kernel per op as a model runs them:
    swiglu F.silu(g) * u (impl torch_silu_mul), bias_gelu
    F.gelu(x + b, approximate='tanh') (torch_add_gelu), add_cast
    (x + r).to(torch.bfloat16 / torch.float16) from f32 (torch_add_cast);
    next to a copy moving the same bytes, in the same run.

GB/s counts the bytes the op must read and write (every input and the
output), as bench_norms does.

    /usr/bin/python3 bench/torch_norms.py [--suite norms|elementwise|all] [--op OP]
        [--match TEXT[,TEXT...]] [--reps 30] [--warmup 5] [--csv FILE] [--list]

--list prints the selected shapes' names (as bench_norms names them) and
exits, without torch. Exits 77 with one line when torch sees no GPU.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_timing as tt  # noqa: E402

NORM_OPS = ["layernorm", "rmsnorm", "softmax"]
ELEMENTWISE_OPS = ["swiglu", "bias_gelu", "add_cast"]


def elementwise(torch, F, op, dt, rows, w):
    """(impl, fn, bytes, tensors) of one elementwise shape."""
    dtype = tt.torch_dtype(torch, dt.split("-")[-1])
    es = torch.tensor([], dtype=dtype).element_size()
    n = rows * w

    def rand(*shape, dtype=dtype):
        return torch.rand(*shape, device="cuda", dtype=torch.float32).mul_(2).sub_(1).to(dtype)

    if op == "swiglu":
        g, u = rand(rows, w), rand(rows, w)
        return "torch_silu_mul", lambda: F.silu(g) * u, 3 * n * es, [g, u]
    if op == "bias_gelu":
        x, b = rand(rows, w), rand(w)
        return "torch_add_gelu", lambda: F.gelu(x + b, approximate="tanh"), 2 * n * es + w * es, [x, b]
    x, r = rand(rows, w, dtype=torch.float32), rand(rows, w, dtype=torch.float32)   # add_cast, from f32
    return "torch_add_cast", lambda: (x + r).to(dtype), 2 * n * 4 + n * es, [x, r]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="all", choices=["norms", "elementwise", "all"])
    ap.add_argument("--op", default=None, choices=NORM_OPS + ELEMENTWISE_OPS)
    ap.add_argument("--match", default=None,
                    help="only shapes whose name OP/DTYPE/rROWS/wWIDTH holds one of these comma-separated texts")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--csv", default=None)
    ap.add_argument("--list", action="store_true", help="print the selected shapes' names and exit")
    a = ap.parse_args(argv)
    sel = [s for s in tt.norms_suite_shapes(a.suite)
           if (not a.op or s[0] == a.op) and tt.matches(tt.norm_name(*s), a.match)]
    if not sel:
        print("torch_norms: nothing selected", file=sys.stderr)
        return 2
    if a.list:
        for s in sel:
            print(tt.norm_name(*s))
        return 0
    import torch
    F = torch.nn.functional
    tt.need_cuda(torch, "torch_norms")
    timer = tt.CudaTimer(torch, a.warmup, a.reps)
    out = tt.open_csv(a.csv)
    print(tt.NORM_HEADER, file=out)
    copy_gbps = {}   # norms: by dtype (a copy of x); elementwise: by bytes moved
    for op, dt, rows, w in sel:
        status, cells = "ok", ["", "", "", "", ""]
        if op in ELEMENTWISE_OPS:
            impl, fn, nbytes, keep = elementwise(torch, F, op, dt, rows, w)
            key = nbytes
            if key not in copy_gbps:   # a copy moving the same bytes: half read, half written
                src = torch.empty((nbytes // 2 + 15) // 16 * 16, dtype=torch.uint8, device="cuda")
                dst = torch.empty_like(src)
                med, _ = timer.time(lambda: dst.copy_(src))
                copy_gbps[key] = 2.0 * src.numel() / (med * 1e-3) / 1e9
                del src, dst
        else:
            dtype = tt.torch_dtype(torch, dt)
            es = torch.tensor([], dtype=dtype).element_size()
            x = torch.rand(rows, w, device="cuda", dtype=torch.float32).mul_(2).sub_(1).to(dtype)
            gamma = torch.rand(w, device="cuda", dtype=torch.float32).to(dtype)
            beta = torch.rand(w, device="cuda", dtype=torch.float32).to(dtype)
            keep, key = [x, gamma, beta], dt
            if key not in copy_gbps:
                y = torch.empty_like(x)
                med, _ = timer.time(lambda: y.copy_(x))
                copy_gbps[key] = 2.0 * x.numel() * es / (med * 1e-3) / 1e9
                del y
            if op == "layernorm":
                impl, fn, wb = "torch_layer_norm", lambda: F.layer_norm(x, (w,), gamma, beta, 1e-5), 2 * w * es
            elif op == "rmsnorm" and hasattr(F, "rms_norm"):
                impl, fn, wb = "torch_rms_norm", lambda: F.rms_norm(x, (w,), gamma, 1e-5), w * es
            elif op == "rmsnorm":
                impl, wb = "torch_rmsnorm_eager", w * es
                def fn():
                    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(dtype) * gamma
            else:
                impl, fn, wb = "torch_softmax", lambda: torch.softmax(x, dim=-1), 0
            nbytes = 2 * x.numel() * es + wb
        try:
            med, mn = timer.time(fn)
            gbps = nbytes / (med * 1e-3) / 1e9
            cells = ["%.4f" % med, "%.4f" % mn, "%.1f" % gbps, "%.1f" % copy_gbps[key],
                     "%.3f" % (gbps / copy_gbps[key])]
        except RuntimeError as e:
            status = "failed: " + str(e).split("\n")[0][:120].replace(",", ";")
        print(",".join([op, impl, dt, str(rows), str(w)] + cells + [timer.device, status]), file=out, flush=True)
        del keep, fn
        if op not in ELEMENTWISE_OPS:
            del x, gamma, beta
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
