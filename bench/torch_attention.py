#!/usr/bin/python3
"""torch_attention.py — the bench_attention sweep through PyTorch: every
scaled_dot_product_attention backend the installed torch offers (flash,
efficient, cuDNN, math), each forced alone, plus softmax(QK^T)V written out
(materialized scores), timed like bench_attention (CUDA events, warm-up,
median of --reps, L2 flushed before every run, inputs resident). Same CSV
columns; impl names the backend; compile columns stay empty.

    /usr/bin/python3 bench/torch_attention.py [--suite fa3|decode|gqa|mask|cross|all]
        [--match TEXT[,TEXT...]] [--reps 30] [--warmup 5] [--csv FILE]

Grouped-query shapes give SDPA K and V with their own heads and
enable_gqa=True (torch >= 2.5; before it, K and V repeated to the query
heads first, as users of those versions write it); masks go in as
attn_mask (float, -inf on the padded tail).

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


def sdpa_takes_gqa(torch):
    """Whether this torch's SDPA takes K/V with fewer heads (enable_gqa, torch >= 2.5)."""
    F = torch.nn.functional
    if not hasattr(F, "scaled_dot_product_attention"):
        return False
    try:
        q, k = torch.zeros(1, 4, 2, 8), torch.zeros(1, 2, 2, 8)
        F.scaled_dot_product_attention(q, k, k, enable_gqa=True)
        return True
    except (TypeError, RuntimeError):
        return False


def materialized(torch, q, k, v, causal, mask=None):
    if k.shape[1] != q.shape[1]:   # GQA / MQA: the K/V heads repeated to the query heads
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = s + mask
    if causal:
        nq, nk = q.shape[-2], k.shape[-2]
        mask = torch.ones(nq, nk, dtype=torch.bool, device=q.device).tril(nk - nq)
        s = s.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="all", choices=["all", "fa3", "decode", "gqa", "mask", "cross"])
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
    gqa_native = sdpa_takes_gqa(torch)
    for suite, dt, b, h, kvh, nq, nk, d, causal, mask in tt.attention_shapes(a.suite):
        name = tt.attention_name(suite, dt, b, h, kvh, nq, nk, d, causal, mask)
        if not tt.matches(name, a.match):
            continue
        g = torch.Generator(device="cuda").manual_seed(1)
        dtype = tt.torch_dtype(torch, dt)
        q = torch.rand(b, h, nq, d, device="cuda", generator=g, dtype=torch.float32).mul_(2).sub_(1).to(dtype)
        k = torch.rand(b, kvh, nk, d, device="cuda", generator=g, dtype=torch.float32).mul_(2).sub_(1).to(dtype)
        v = torch.rand(b, kvh, nk, d, device="cuda", generator=g, dtype=torch.float32).mul_(2).sub_(1).to(dtype)
        m = None
        if mask != "none":   # the padded tail (a fifth of the keys) at -inf
            m = torch.rand(b, 1, nq if mask == "rows" else 1, nk, device="cuda", generator=g,
                           dtype=torch.float32).to(dtype)
            m[..., nk - nk // 5:] = float("-inf")
        flops = 4.0 * b * h * nq * nk * d / (2 if causal else 1)
        nbytes = tt.attention_bytes(dt, b, h, kvh, nq, nk, d, mask)
        kw = {}
        kk, vv = k, v
        if kvh != h:
            if gqa_native:
                kw["enable_gqa"] = True
            else:
                kk, vv = k.repeat_interleave(h // kvh, dim=1), v.repeat_interleave(h // kvh, dim=1)
        # SDPA's is_causal aligns the mask top-left; mcir's (and FA's) bottom-right:
        # the same when nq == nk, which is the only causal case of the sweep.
        for impl, ctx in impls:
            med = mn = None
            status = "ok"
            try:
                if ctx is None:
                    fn = lambda: materialized(torch, q, k, v, causal, m)  # noqa: E731
                    med, mn = timer.time(fn)
                else:
                    with ctx():
                        fn = lambda: F.scaled_dot_product_attention(  # noqa: E731
                            q, kk, vv, attn_mask=m, is_causal=causal and m is None, **kw)
                        if m is not None and causal:   # SDPA takes one of the two: the causal part in the mask
                            cm = torch.ones(nq, nk, dtype=torch.bool, device="cuda").tril(nk - nq)
                            mm = m.masked_fill(~cm, float("-inf"))
                            fn = lambda: F.scaled_dot_product_attention(q, kk, vv, attn_mask=mm, **kw)  # noqa: E731
                        med, mn = timer.time(fn)
            except torch.cuda.OutOfMemoryError if hasattr(torch.cuda, "OutOfMemoryError") else MemoryError:
                status = "out of memory"
            except RuntimeError as e:
                status = "not supported: " + str(e).split("\n")[0][:120]
            torch.cuda.empty_cache()
            status = status.replace(",", ";")
            row = [suite, impl, dt, b, h, nq, nk, d, int(causal), kvh, mask, "", "", "", "",
                   "%.4f" % med if med else "", "%.4f" % mn if mn else "",
                   "%.2f" % (flops / (med * 1e-3) / 1e12) if med else "",
                   "%.1f" % (nbytes / (med * 1e-3) / 1e9) if med else "", "", timer.device, status]
            print(",".join(str(x) for x in row), file=out, flush=True)
        del q, k, v, kk, vv, m
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
