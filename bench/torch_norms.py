#!/usr/bin/python3
"""torch_norms.py — bench_norms' sweep through PyTorch's own kernels
(F.layer_norm, F.rms_norm where this torch has it else the eager
x * rsqrt(mean(x^2) + eps) * w, torch.softmax), timed like bench_norms
(CUDA events, L2 flushed, median); GB/s counts bytes read + written, next
to a device-to-device copy of x measured in the same run. Same CSV.

    /usr/bin/python3 bench/torch_norms.py [--op layernorm|rmsnorm|softmax] [--match TEXT] [--reps 30] [--csv FILE]

Exits 77 with one line when torch sees no GPU.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_timing as tt  # noqa: E402


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--op", default=None, choices=["layernorm", "rmsnorm", "softmax"])
    ap.add_argument("--match", default=None, help="only shapes whose name OP/DTYPE/rROWS/wWIDTH holds this")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--csv", default=None)
    a = ap.parse_args(argv)
    import torch
    F = torch.nn.functional
    tt.need_cuda(torch, "torch_norms")
    timer = tt.CudaTimer(torch, a.warmup, a.reps)
    out = tt.open_csv(a.csv)
    print(tt.NORM_HEADER, file=out)
    copy_gbps = {}
    for op, dt, rows, w in tt.norm_shapes():
        if a.op and op != a.op:
            continue
        if a.match and a.match not in "%s/%s/r%d/w%d" % (op, dt, rows, w):   # as bench_norms names them
            continue
        dtype = tt.torch_dtype(torch, dt)
        es = torch.tensor([], dtype=dtype).element_size()
        x = torch.rand(rows, w, device="cuda", dtype=torch.float32).mul_(2).sub_(1).to(dtype)
        gamma = torch.rand(w, device="cuda", dtype=torch.float32).to(dtype)
        beta = torch.rand(w, device="cuda", dtype=torch.float32).to(dtype)
        if dt not in copy_gbps:
            y = torch.empty_like(x)
            med, _ = timer.time(lambda: y.copy_(x))
            copy_gbps[dt] = 2.0 * x.numel() * es / (med * 1e-3) / 1e9
            del y
        if op == "layernorm":
            impl, fn, wb = "torch_layer_norm", lambda: F.layer_norm(x, (w,), gamma, beta, 1e-5), 2 * w * es
        elif op == "rmsnorm" and hasattr(F, "rms_norm"):
            impl, fn, wb = "torch_rms_norm", lambda: F.rms_norm(x, (w,), gamma, 1e-5), w * es
        elif op == "rmsnorm":
            impl, wb = "torch_rmsnorm_eager", w * es
            fn = lambda: x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(dtype) * gamma  # noqa: E731
        else:
            impl, fn, wb = "torch_softmax", lambda: torch.softmax(x, dim=-1), 0
        status, cells = "ok", ["", "", "", "", ""]
        try:
            med, mn = timer.time(fn)
            gbps = (2.0 * x.numel() * es + wb) / (med * 1e-3) / 1e9
            cells = ["%.4f" % med, "%.4f" % mn, "%.1f" % gbps, "%.1f" % copy_gbps[dt],
                     "%.3f" % (gbps / copy_gbps[dt])]
        except RuntimeError as e:
            status = "failed: " + str(e).split("\n")[0][:120].replace(",", ";")
        print(",".join([op, impl, dt, str(rows), str(w)] + cells + [timer.device, status]), file=out, flush=True)
        del x, gamma, beta
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
