#!/usr/bin/python3
"""plot.py — the benchmark CSVs of scripts/bench.sh (bench/results/) as PNG
charts (docs/performance/). A chart is drawn only when its CSV exists and
has measured rows, so a CPU-only run draws the CPU charts and a GPU run
adds TFLOP/s against sequence length per backend and GB/s against row
width. Needs matplotlib (Debian's python3-matplotlib).

    /usr/bin/python3 bench/plot.py --results bench/results --charts docs/performance
"""
import argparse
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(results, name):
    p = os.path.join(results, name)
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return list(csv.DictReader(f))


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def save(fig, charts, name):
    path = os.path.join(charts, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(path)


def bars(ax, labels, series, ylabel, log=False):
    """series: [(legend, [values])]; grouped bars."""
    n = len(series)
    w = 0.8 / max(n, 1)
    for i, (leg, vals) in enumerate(series):
        xs = [j + (i - (n - 1) / 2) * w for j in range(len(labels))]
        ax.bar(xs, [v if v is not None else 0 for v in vals], w, label=leg)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)


def compile_chart(results, charts):
    r = rows(results, "compile_pipeline.csv")
    if not r:
        return
    fig, ax = plt.subplots(figsize=(8, 4))
    bars(ax, [x["example"] for x in r],
         [("pipeline before NVRTC", [num(x["front_s"]) for x in r]),
          ("whole pipeline, cold cache", [num(x["pipeline_cold_s"]) for x in r]),
          ("whole pipeline, cached", [num(x["pipeline_cached_s"]) for x in r])], "seconds (log)", log=True)
    ax.set_title("mcirc compile time per example (measured, no GPU, sm_90 target)")
    save(fig, charts, "compile_time.png")


def attention_compile_chart(results, charts):
    r = [x for x in rows(results, "attention_dry.csv") if num(x["compile_s"]) is not None]
    if not r:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for d in sorted({int(x["head_dim"]) for x in r}):
        pts = [(int(x["seq_q"]), num(x["compile_s"])) for x in r if int(x["head_dim"]) == d and x["suite"] == "fa3"]
        if pts:
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o", label="head dim %d" % d, alpha=0.7)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length (FA3 sweep: f16, bf16, causal and not)")
    ax.set_ylabel("NVRTC seconds, cold")
    ax.set_title("NVRTC compile time of each streaming-attention kernel (measured)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    save(fig, charts, "attention_compile.png")


def cpu_chart(results, charts):
    m = {x["example"]: x for x in rows(results, "cpu_mcir.csv")}
    t = rows(results, "cpu_torch.csv")
    if not m or not t:
        return
    names = [n for n in sorted(m) if num(m[n]["mcir_fused_s"]) and num(m[n]["mcir_fused_s"]) > 1e-4]
    tv = {(x["example"], x["impl"]): x for x in t}
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for ax, col, tcol, title in ((axes[0], "mcir_fused_s", "median_s", "wall seconds (median)"),
                                 (axes[1], "mcir_fused_cpu_s", "cpu_s", "CPU seconds, both threads (median)")):
        bars(ax, names, [
            ("mcir CPU path, rewritten", [num(m[n][col]) for n in names]),
            ("mcir CPU path, no rewrite", [num(m[n][col.replace("fused", "unfused")]) for n in names]),
            ("PyTorch eager, graph op by op", [num(tv.get((n, "torch_eager_graph"), {}).get(tcol)) for n in names]),
            ("PyTorch eager, module", [num(tv.get((n, "torch_eager_module"), {}).get(tcol)) for n in names]),
        ], title + ", log", log=True)
    fig.suptitle("CPU: mcirc --run --device cpu vs PyTorch CPU, 2 threads (measured)")
    save(fig, charts, "cpu_vs_torch.png")


def peak_chart(results, charts):
    r = rows(results, "peak_examples.csv") + rows(results, "peak_blocks.csv")
    r = [x for x in r if num(x["lazy_caching_allocated"]) and num(x["lazy_caching_allocated"]) > 1 << 20]
    if not r:
        return
    fig, ax = plt.subplots(figsize=(10, 4.2))
    mib = 1 << 20
    bars(ax, [x["example"] for x in r], [
        ("pool (arena)", [num(x["pool_peak"]) / mib for x in r]),
        ("lazy, exact", [num(x["lazy_exact_peak"]) / mib for x in r]),
        ("lazy, caching allocator", [num(x["lazy_caching_allocated"]) / mib for x in r]),
        ("eager", [num(x["eager_peak"]) / mib for x in r]),
        ("unfused, caching allocator", [num(x["torchlike_caching_allocated"]) / mib for x in r]),
    ], "peak MiB (log)", log=True)
    ax.set_title("Peak device memory, SIMULATED from the plan (weights and inputs included)")
    save(fig, charts, "peak_memory.png")


def modelled_chart(results, charts):
    r = rows(results, "modelled_graphs.csv")
    if not r:
        return
    fig, ax = plt.subplots(figsize=(10, 4.2))
    bars(ax, [x["graph"] for x in r], [("rewritten", [num(x["modelled_us"]) for x in r]),
                                       ("unfused (--no-rewrite)", [num(x["unfused_modelled_us"]) for x in r])],
         "microseconds (log)", log=True)
    ax.set_title("MODELLED GPU time per graph (kernelplan cost model, %s)" % r[0]["arch"])
    save(fig, charts, "modelled_time.png")


def attention_gpu_charts(results, charts):
    r = [x for x in rows(results, "attention_gpu.csv") + rows(results, "attention_torch.csv")
         if x["suite"] == "fa3" and num(x["tflops"])]
    if not r:
        return
    for dt in ("f16", "bf16"):
        for causal in ("0", "1"):
            sel = [x for x in r if x["dtype"] == dt and x["causal"] == causal]
            if not sel:
                continue
            dims = sorted({int(x["head_dim"]) for x in sel})
            fig, axes = plt.subplots(1, len(dims), figsize=(max(5 * len(dims), 8), 4), squeeze=False)
            for ax, d in zip(axes[0], dims):
                for impl in sorted({x["impl"] for x in sel}):
                    pts = sorted((int(x["seq_q"]), num(x["tflops"])) for x in sel
                                 if x["impl"] == impl and int(x["head_dim"]) == d)
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=impl)
                ax.set_xscale("log", base=2)
                ax.set_title("head dim %d" % d)
                ax.set_xlabel("sequence length")
                ax.set_ylabel("TFLOP/s")
                ax.grid(alpha=0.3)
                ax.legend(fontsize=7)
            fig.suptitle("Attention forward, %s, %s (measured on %s)" % (
                dt, "causal" if causal == "1" else "not causal", sel[0]["device"]), fontsize=10)
            save(fig, charts, "attention_%s_%s.png" % (dt, "causal" if causal == "1" else "full"))


def norm_gpu_chart(results, charts):
    r = [x for x in rows(results, "norms_gpu.csv") + rows(results, "norms_torch.csv")
         if num(x["gbps"]) and x["op"] in ("layernorm", "rmsnorm", "softmax")]   # not the elementwise suite
    if not r:
        return
    ops = sorted({x["op"] for x in r})
    fig, axes = plt.subplots(1, len(ops), figsize=(5 * len(ops), 4), squeeze=False)
    for ax, op in zip(axes[0], ops):
        for impl in sorted({x["impl"] for x in r if x["op"] == op}):
            for dt in ("f32", "f16", "bf16"):
                pts = sorted((int(x["width"]), num(x["gbps"])) for x in r
                             if x["op"] == op and x["impl"] == impl and x["dtype"] == dt)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label="%s %s" % (impl, dt))
        cp = [num(x["copy_gbps"]) for x in r if x["op"] == op and num(x["copy_gbps"])]
        if cp:
            ax.axhline(max(cp), color="k", ls="--", label="device copy")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("row width")
        ax.set_ylabel("GB/s")
        ax.set_title(op)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    save(fig, charts, "norms_gbps.png")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default="bench/results")
    ap.add_argument("--charts", default="docs/performance")
    a = ap.parse_args(argv)
    os.makedirs(a.charts, exist_ok=True)
    for f in (compile_chart, attention_compile_chart, cpu_chart, peak_chart, modelled_chart,
              attention_gpu_charts, norm_gpu_chart):
        f(a.results, a.charts)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
