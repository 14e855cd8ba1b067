#!/usr/bin/python3
"""gpu_run_summary.py — the figures of one mcir-gpu-run (scripts/gpu-run.sh)
side by side, from the CSVs it wrote: attention TFLOP/s of mcir against the
best PyTorch SDPA backend per shape, norms GB/s against PyTorch and the
copy bandwidth, the elementwise chains' GB/s (mcir's path and PyTorch
eager, each as a fraction of its copy, and mcir / PyTorch), GEMM TFLOP/s
against PyTorch eager (the product and its epilogue as separate ops) and
the product alone, the block's latency and peak memory against PyTorch
eager and torch.compile. Standard library only; a CSV that is missing or
empty is said so, not an error.

    python3 bench/gpu_run_summary.py DIR
"""
import csv
import os
import sys


def rows(d, name):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return list(csv.DictReader(f))


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def fmt(x, spec="%.1f"):
    return spec % x if x is not None else "–"


def attention(d):
    m, t = rows(d, "attention_gpu.csv"), rows(d, "attention_torch.csv")
    if not m:
        return ["attention: no mcir figures (attention_gpu.csv missing or empty)"]
    key = ("dtype", "batch", "heads", "seq_q", "seq_k", "head_dim", "causal", "kv_heads", "mask")
    best = {}
    for r in t or []:
        v = num(r.get("tflops"))
        if v is None or not r["impl"].startswith("sdpa_"):
            continue
        k = tuple(r.get(c, "") for c in key)
        if k not in best or v > best[k][0]:
            best[k] = (v, r["impl"][5:])
    out = ["%-44s %6s   %-21s   %-11s   %s" % ("attention, TFLOP/s", "mcir", "best SDPA (backend)", "mcir / best",
                                               "measured / modelled time")]
    for r in m:
        k = tuple(r.get(c, "") for c in key)
        name = "%s %s d%s q%s k%s %s" % (r["suite"], r["dtype"], r["head_dim"], r["seq_q"], r["seq_k"],
                                      "causal" if r["causal"] == "1" else "full")
        if r.get("kv_heads") and r["kv_heads"] != r["heads"]:
            name += " kv%s/%s" % (r["kv_heads"], r["heads"])
        if r.get("mask", "none") != "none":
            name += " mask-" + r["mask"]
        if r["suite"] == "decode" and num(r.get("gbps")):
            name += " %s GB/s" % r["gbps"]
        mv = num(r["tflops"])
        b = best.get(k)
        ratio = "%.2fx" % (mv / b[0]) if mv and b and b[0] else "–"
        extra = "" if mv is not None else "  (%s)" % r["status"]
        med, model = num(r.get("median_ms")), num(r.get("modelled_us"))
        vs = "%.2fx" % (med * 1e3 / model) if med and model else "–"
        out.append("  %-42s %6s   %6s %-14s   %-11s   %s%s" % (name, fmt(mv), fmt(b[0]) if b else "–",
                                                           "(%s)" % b[1] if b else "", ratio, vs, extra))
    if t is None:
        out.append("  (no PyTorch figures: attention_torch.csv missing)")
    return out


NORM_OPS = ("layernorm", "rmsnorm", "softmax")


def norms(d):
    m, t = rows(d, "norms_gpu.csv"), rows(d, "norms_torch.csv")
    if not m:
        return ["norms: no mcir figures (norms_gpu.csv missing or empty)"]
    tv = {(r["op"], r["dtype"], r["width"]): num(r.get("gbps")) for r in t or [] if r["op"] in NORM_OPS}
    out = ["norms, GB/s              mcir  torch  copy   mcir / copy"]
    for r in m:
        if r["op"] not in NORM_OPS:
            continue
        mv, cp = num(r["gbps"]), num(r["copy_gbps"])
        out.append("  %-22s %6s %6s %6s   %s" % ("%s %s w%s" % (r["op"], r["dtype"], r["width"]), fmt(mv, "%.0f"),
                                               fmt(tv.get((r["op"], r["dtype"], r["width"])), "%.0f"),
                                               fmt(cp, "%.0f"), fmt(num(r["fraction_of_copy"]), "%.2f")))
    return out


def elementwise(d):
    """bench_norms' elementwise suite (the rows of norms_*.csv that are not
    norms): GB/s of mcir's path and of PyTorch eager, each against the copy
    of the same bytes in its own run, and mcir / PyTorch."""
    m = [r for r in rows(d, "norms_gpu.csv") or [] if r["op"] not in NORM_OPS]
    t = rows(d, "norms_torch.csv")
    if not m:
        return ["elementwise: no mcir figures (no elementwise rows in norms_gpu.csv)"]
    key = ("op", "dtype", "rows", "width")
    tv = {tuple(r[c] for c in key): r for r in t or [] if r["op"] not in NORM_OPS}
    out = ["%-32s %6s  %-26s %6s %6s  %10s %10s %10s" % ("elementwise, GB/s", "mcir", "(path)", "torch", "copy",
                                                       "mcir/copy", "torch/copy", "mcir/torch")]
    for r in m:
        x = tv.get(tuple(r[c] for c in key), {})
        mv, tw = num(r["gbps"]), num(x.get("gbps"))
        ratio = "%.2fx" % (mv / tw) if mv and tw else "–"
        extra = "" if mv is not None else "  (%s)" % r["status"]
        path = r["impl"][5:] if r["impl"].startswith("mcir_") else r["impl"]
        out.append("  %-30s %6s  %-26s %6s %6s  %10s %10s %10s%s" % (
            "%s %s T%s w%s" % (r["op"], r["dtype"], r["rows"], r["width"]), fmt(mv, "%.0f"), "(%s)" % path,
            fmt(tw, "%.0f"), fmt(num(r["copy_gbps"]), "%.0f"), fmt(num(r["fraction_of_copy"]), "%.2f"),
            fmt(num(x.get("fraction_of_copy")), "%.2f"), ratio, extra))
    out.append("  (path: the plan's kernels, one fused elementwise kernel or each launch timed together; torch: "
               "PyTorch eager, a kernel per op; copy: of the same bytes, in mcir's run; T: tokens)")
    if t is None:
        out.append("  (no PyTorch figures: norms_torch.csv missing)")
    return out


def gemm(d):
    m, t = rows(d, "gemm_gpu.csv"), rows(d, "gemm_torch.csv")
    g = rows(d, "gemm_generated.csv")   # the same shapes with MCIR_NO_CUBLAS=1
    if not m:
        return ["gemm: no mcir figures (gemm_gpu.csv missing or empty)"]
    tv = {(r["name"], r["impl"]): num(r.get("tflops")) for r in t or []}
    gen = {r["name"]: num(r.get("tflops")) for r in g or []}
    w = max(len(r["name"]) for r in m)
    out = ["%-*s %6s  %-24s %6s %6s %6s   %s" % (w + 2, "gemm, TFLOP/s", "mcir", "(path)", "own", "torch", "gemm",
                                              "mcir / torch")]
    for r in m:
        mv, ev, gv = num(r["tflops"]), tv.get((r["name"], "torch_eager")), tv.get((r["name"], "torch_gemm_only"))
        ratio = "%.2fx" % (mv / ev) if mv and ev else "–"
        extra = "" if mv is not None else "  (%s)" % r["status"]
        cv = tv.get((r["name"], "torch_compile"))   # the mlp suite's torch.compile
        if cv:
            extra += "  torch.compile %s (mcir %s)" % (fmt(cv), "%.2fx" % (mv / cv) if mv else "–")
        out.append("  %-*s %6s  %-24s %6s %6s %6s   %s%s" % (w, r["name"], fmt(mv), "(%s)" % r["path"],
                                                          fmt(gen.get(r["name"])), fmt(ev), fmt(gv), ratio, extra))
    out.append("  (own: mcir's generated kernel, MCIR_NO_CUBLAS=1; torch: PyTorch eager, the epilogue or prologue "
               "as separate ops; gemm: its product alone)")
    if t is None:
        out.append("  (no PyTorch figures: gemm_torch.csv missing)")
    return out


def blocks(d):
    m, t = rows(d, "blocks_gpu.csv"), rows(d, "blocks_torch.csv")
    if not m:
        return ["block: no mcir figures (blocks_gpu.csv missing or empty)"]
    out = ["block, ms (peak MiB)"]
    for r in m:
        pk = num(r["pool_peak_bytes"])
        out.append("  %-22s mcir %s ms (%s MiB)%s" % (r["graph"], fmt(num(r["pool_median_ms"]), "%.3f"),
                                                  fmt(pk / 2**20 if pk else None), "" if r["pool_median_ms"]
                                                  else "  (%s)" % r["status"]))
        for x in t or []:
            if x["graph"] == r["graph"]:
                al = num(x["max_memory_allocated"])
                out.append("  %-22s %s %s ms (%s MiB)%s" % ("", x["impl"], fmt(num(x["median_ms"]), "%.3f"),
                                                        fmt(al / 2**20 if al else None),
                                                        "" if x["median_ms"] else "  (%s)" % x["status"]))
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    d = argv[1]
    for part in (attention, norms, elementwise, gemm, blocks):
        print("\n".join(part(d)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
