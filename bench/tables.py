#!/usr/bin/python3
"""tables.py — the Markdown tables of docs/performance.md from the CSVs of
scripts/bench.sh, so the document's figures come from one run.

    /usr/bin/python3 bench/tables.py [bench/results] > /tmp/tables.md
"""
import csv
import os
import statistics
import sys


def rows(d, name):
    p = os.path.join(d, name)
    return list(csv.DictReader(open(p))) if os.path.exists(p) else []


def f(x, fmt="%.3f"):
    try:
        return fmt % float(x)
    except (TypeError, ValueError):
        return "–"


def mib(x):
    return f(float(x) / (1 << 20), "%.1f") if x not in (None, "") else "–"


def table(head, body):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " if i == 0 else " ---: " for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in body]
    return "\n".join(out) + "\n"


def main(argv):
    d = argv[1] if len(argv) > 1 else "bench/results"
    m = {r[0]: r[1] for r in csv.reader(open(os.path.join(d, "machine.csv")))} if os.path.exists(
        os.path.join(d, "machine.csv")) else {}
    print("machine:", m, "\n")

    r = rows(d, "compile_pipeline.csv")
    if r:
        print("### compile_pipeline\n")
        print(table(["example", "kernels", "NVRTC calls", "before NVRTC, s", "whole pipeline cold, s",
                     "whole pipeline cached, s", "Σ per-kernel NVRTC cold, s"],
                    [[x["example"], x["kernels"], x["nvrtc_calls"], f(x["front_s"]), f(x["pipeline_cold_s"], "%.2f"),
                      f(x["pipeline_cached_s"]), f(x["kernel_nvrtc_sum_s"], "%.2f")] for x in r]))
    k = rows(d, "compile_kernels.csv")
    if k:
        print("### compile_kernels by template\n")
        body = []
        for t in sorted({x["template"] for x in k}):
            c = [float(x["nvrtc_cold_s"]) for x in k if x["template"] == t and x["status"] == "ok"]
            h = [float(x["cached_s"]) * 1e3 for x in k if x["template"] == t and x["status"] == "ok"]
            body.append([t, len(c), f(statistics.median(c), "%.2f"), f(min(c), "%.2f"), f(max(c), "%.2f"),
                         f(statistics.median(h), "%.2f")])
        print(table(["template", "kernels", "cold median, s", "cold min, s", "cold max, s", "cached median, ms"], body))
    a = [x for x in rows(d, "attention_dry.csv") if x["compile_s"]]
    if a:
        print("### attention sweep compile\n")
        body = []
        for suite in ("fa3", "decode", "cross"):
            for dd in sorted({int(x["head_dim"]) for x in a if x["suite"] == suite}):
                c = [float(x["compile_s"]) for x in a if x["suite"] == suite and int(x["head_dim"]) == dd]
                p = [float(x["pipeline_s"]) * 1e3 for x in a if x["suite"] == suite and int(x["head_dim"]) == dd]
                body.append([suite, dd, len(c), f(statistics.median(p), "%.1f"), f(statistics.median(c), "%.2f"),
                             f(min(c), "%.2f"), f(max(c), "%.2f")])
        print(table(["suite", "head dim", "shapes", "pipeline median, ms", "NVRTC cold median, s", "min, s", "max, s"],
                    body))
    mc = {x["example"]: x for x in rows(d, "cpu_mcir.csv")}
    tc = rows(d, "cpu_torch.csv")
    if mc and tc:
        print("### cpu\n")
        tv = {(x["example"], x["impl"]): x for x in tc}
        body = []
        for n in sorted(mc):
            x = mc[n]
            te, tm = tv.get((n, "torch_eager_graph"), {}), tv.get((n, "torch_eager_module"), {})
            best_t = min([float(v["cpu_s"]) for v in (te, tm) if v.get("cpu_s")] or [0])
            ratio = float(x["mcir_fused_cpu_s"]) / best_t if best_t > 0 and float(x["mcir_fused_cpu_s"]) > 0 else None
            body.append([n, f(x["mcir_fused_s"], "%.4f"), f(x["mcir_fused_cpu_s"], "%.4f"), f(x["mcir_unfused_cpu_s"], "%.4f"),
                         f(te.get("median_s"), "%.4f"), f(te.get("cpu_s"), "%.4f"), f(tm.get("cpu_s"), "%.4f"),
                         f(ratio, "%.3f"), f(te.get("max_rel_err"), "%.1e"), mib(te.get("peak_bytes"))])
        print(table(["example", "mcir wall, s", "mcir CPU s", "mcir no-rewrite CPU s", "torch graph wall, s",
                     "torch graph CPU s", "torch module CPU s", "mcir / best torch (CPU s)", "torch vs expected",
                     "torch CPU peak, MiB"], body))
    for name in ("peak_examples.csv", "peak_blocks.csv"):
        p = rows(d, name)
        if p:
            print("### %s (simulated)\n" % name)
            print(table(["graph", "kernels", "weights+inputs+outputs, MiB", "arena, MiB", "pool", "lazy exact",
                         "lazy caching (allocated)", "lazy caching (reserved)", "eager", "unfused caching (allocated)",
                         "pool / lazy caching", "pool / unfused", "arena / unfused activations"],
                        [[x["example"], x["kernels"], mib(x["graph_tensor_bytes"]), mib(x["arena_bytes"]),
                          mib(x["pool_peak"]), mib(x["lazy_exact_peak"]), mib(x["lazy_caching_allocated"]),
                          mib(x["lazy_caching_reserved"]), mib(x["eager_peak"]), mib(x["torchlike_caching_allocated"]),
                          f(x["pool_over_lazy_caching"]), f(x["pool_over_torchlike"]),
                          f(x["arena_over_act_torchlike"])] for x in p]))
    g = rows(d, "modelled_graphs.csv")
    if g:
        print("### modelled\n")
        print(table(["graph", "kernels", "launches", "HBM MiB", "compulsory MiB", "modelled µs", "unfused kernels",
                     "unfused HBM MiB", "unfused modelled µs", "speed-up (modelled)"],
                    [[x["graph"], x["kernels"], x["launches"], mib(x["hbm_bytes"]), mib(x["compulsory_bytes"]),
                      f(x["modelled_us"], "%.1f"), x["unfused_kernels"], mib(x["unfused_hbm_bytes"]),
                      f(x["unfused_modelled_us"], "%.1f"), f(x["modelled_speedup"], "%.2f")] for x in g]))
    mk = [x for x in rows(d, "modelled_kernels.csv") if x["graph"] == "gpt2_b8_s1024_f16"]
    if mk:
        print("### modelled kernels gpt2_b8_s1024_f16\n")
        print(table(["kernel", "template", "HBM MiB", "GFLOP", "memory µs", "compute µs", "issue µs", "launch µs",
                     "modelled µs"],
                    [[x["kernel"], x["template"], mib(x["hbm_bytes"]), f(float(x["flops"]) / 1e9, "%.2f"),
                      f(x["memory_us"], "%.1f"), f(x["compute_us"], "%.1f"), f(x.get("issue_us", 0), "%.1f"),
                      f(x["launch_us"], "%.1f"), f(x["modelled_us"], "%.1f")] for x in mk]))
    mp = rows(d, "memplan.csv")
    if mp:
        print("### memplan\n")
        body = []
        for inst in sorted({x["instance"] for x in mp}):
            by = {x["planner"]: x for x in mp if x["instance"] == inst}
            fit = by.get("exact (fit)", {})
            body.append([inst.split(".")[0], fit.get("buffers", "–"), fit.get("lower_bound", "–")] +
                        [f(by.get(pl, {}).get("height_over_capacity")) for pl in
                         ("greedy-size", "greedy-conflict", "greedy-breadth", "exact (fit)")] +
                        [fit.get("nodes", "–"), f(fit.get("seconds"), "%.2f"), f(by.get("best", {}).get("height_over_capacity"))
                         + (" optimal" if by.get("best", {}).get("optimal") == "1" else "")])
        print(table(["instance", "buffers", "lower bound", "greedy-size", "greedy-conflict", "greedy-breadth",
                     "exact (fit)", "nodes", "exact (fit), s", "best, 10 s"], body))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
