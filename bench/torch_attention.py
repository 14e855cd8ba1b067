#!/usr/bin/python3
"""torch_attention.py — the bench_attention sweep through PyTorch: every
scaled_dot_product_attention backend the installed torch offers (flash,
efficient, cuDNN, math), each forced alone, plus softmax(QK^T)V written out
(materialized scores), timed like bench_attention (CUDA events, warm-up,
median of --reps, L2 flushed before every run, inputs resident). Same CSV
columns; impl names the backend; compile columns stay empty.

    /usr/bin/python3 bench/torch_attention.py [--suite fa3|decode|cross|all]
        [--match TEXT] [--reps 30] [--warmup 5] [--csv FILE]

Exits 77 with one line when torch sees no GPU. A backend that rejects a
shape, or runs out of memory, gets a row saying so.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_timing as tt  # noqa: E402


def backends(torch):
    """[(impl name, context factory)] for the SDPA backends this torch has."""
    out = []
    F = torch.nn.functional
    if not hasattr(F, "scaled_dot_product_attention"):
        return out
    try:   # torch >= 2.3
        from torch.nn.attention import SDPBackend, sdpa_kernel
        for impl, member in (("sdpa_flash", "FLASH_ATTENTION"), ("sdpa_efficient", "EFFICIENT_ATTENTION"),
                             ("sdpa_cudnn", "CUDNN_ATTENTION"), ("sdpa_math", "MATH")):
            if hasattr(SDPBackend, member):
                out.append((impl, lambda m=getattr(SDPBackend, member): sdpa_kernel(m)))
        return out
    except ImportError:
        pass
    sdp = torch.backends.cuda.sdp_kernel   # torch 2.0 - 2.2
    out.append(("sdpa_flash", lambda: sdp(enable_flash=True, enable_math=False, enable_mem_efficient=False)))
    out.append(("sdpa_efficient", lambda: sdp(enable_flash=False, enable_math=False, enable_mem_efficient=True)))
    out.append(("sdpa_math", lambda: sdp(enable_flash=False, enable_math=True, enable_mem_efficient=False)))
    return out


def materialized(torch, q, k, v, causal):
    s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        nq, nk = q.shape[-2], k.shape[-2]
        mask = torch.ones(nq, nk, dtype=torch.bool, device=q.device).tril(nk - nq)
        s = s.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="all", choices=["all", "fa3", "decode", "cross"])
    ap.add_argument("--match", default=None)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--csv", default=None)
    a = ap.parse_args(argv)
    import torch
    tt.need_cuda(torch, "torch_attention")
    timer = tt.CudaTimer(torch, a.warmup, a.reps)
    F = torch.nn.functional
    impls = backends(torch) + [("torch_materialized", None)]
    out = tt.open_csv(a.csv)
    print(tt.ATTN_HEADER, file=out)
    for suite, dt, b, h, nq, nk, d, causal in tt.attention_shapes(a.suite):
        name = "%s/%s/d%d/b%d/h%d/q%d/k%d/%s" % (suite, dt, d, b, h, nq, nk, "causal" if causal else "full")
        if a.match and a.match not in name:
            continue
        g = torch.Generator(device="cuda").manual_seed(1)
        dtype = tt.torch_dtype(torch, dt)
        q = torch.rand(b, h, nq, d, device="cuda", generator=g, dtype=torch.float32).mul_(2).sub_(1).to(dtype)
        k = torch.rand(b, h, nk, d, device="cuda", generator=g, dtype=torch.float32).mul_(2).sub_(1).to(dtype)
        v = torch.rand(b, h, nk, d, device="cuda", generator=g, dtype=torch.float32).mul_(2).sub_(1).to(dtype)
        flops = 4.0 * b * h * nq * nk * d / (2 if causal else 1)
        # SDPA's is_causal aligns the mask top-left; mcir's (and FA's) bottom-right:
        # the same when nq == nk, which is the only causal case of the sweep.
        for impl, ctx in impls:
            med = mn = None
            status = "ok"
            try:
                if ctx is None:
                    fn = lambda: materialized(torch, q, k, v, causal)  # noqa: E731
                    med, mn = timer.time(fn)
                else:
                    with ctx():
                        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                        med, mn = timer.time(fn)
            except torch.cuda.OutOfMemoryError if hasattr(torch.cuda, "OutOfMemoryError") else MemoryError:
                status = "out of memory"
            except RuntimeError as e:
                status = "not supported: " + str(e).split("\n")[0][:120]
            torch.cuda.empty_cache()
            status = status.replace(",", ";")
            row = [suite, impl, dt, b, h, nq, nk, d, int(causal), "", "", "",
                   "%.4f" % med if med else "", "%.4f" % mn if mn else "",
                   "%.2f" % (flops / (med * 1e-3) / 1e12) if med else "", timer.device, status]
            print(",".join(str(x) for x in row), file=out, flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
