#!/usr/bin/python3
"""plot_scale.py — the log-log chart of docs/performance.md, "Compile-time
scaling", from outputs of bench/bench_scale, oldest first (each labelled
by its file name without "scale_"):

    /usr/bin/python3 bench/plot_scale.py RUN.txt... docs/performance/compile_scaling.png

Left: CPU seconds of mcirc's default pipeline against live nodes (GPT-2
stacks and elementwise chains); right: the planner's peak RSS against the
number of buffers. Needs Debian's python3-matplotlib (installed here with
apt-get when missing); the build and the tests do not.
"""
import subprocess
import sys


def need_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        subprocess.check_call(["apt-get", "install", "-y", "python3-matplotlib"])


def parse(path):
    """{family: [(size, nodes, cpu_seconds, rss_mib)]}; timeouts as None."""
    rows = {}
    section = None
    for line in open(path):
        f = line.split()
        if not f:
            continue
        if f[0] in ("graph", "buffers"):
            section = f[0]
            continue
        if "timeout:" in line or "failed" in line or "stopped" in line:
            rows.setdefault(f[0], []).append((int(f[1]), None, None, None))
            continue
        if section == "graph":
            rows.setdefault(f[0], []).append((int(f[1]), int(f[2]), float(f[9]), float(f[11])))
        elif section == "buffers":
            rows.setdefault(f[0], []).append((int(f[1]), int(f[1]), float(f[5]), float(f[6])))
    return rows


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: plot_scale.py RUN.txt... OUT.png")
    need_matplotlib()
    import os
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = sys.argv[1:-1]
    styles = ["--", "-.", ":", "-"][-len(files):] if len(files) <= 4 else ["-"] * len(files)
    runs = [(os.path.basename(f).removesuffix(".txt").removeprefix("scale_"), parse(f), st)
            for f, st in zip(files, styles)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4))
    colours = {"gpt2": "tab:blue", "chain": "tab:orange", "alllive": "tab:green",
               "random": "tab:red"}
    for name, rows, style in runs:
        for fam in ("gpt2", "chain"):
            pts = [(n, s) for _, n, s, _ in rows.get(fam, []) if s is not None]
            if pts:
                left.loglog(*zip(*pts), style, marker="o", color=colours[fam],
                            label=f"{fam} {name}")
        for fam in ("alllive", "random"):
            pts = [(n, r) for n, _, _, r in rows.get(fam, []) if r is not None]
            if pts:
                right.loglog(*zip(*pts), style, marker="o", color=colours[fam],
                             label=f"{fam} {name}")
    n = [500, 50000]
    left.loglog(n, [x * 1e-4 for x in n], color="grey", linewidth=0.8,
                label="linear (reference)")
    left.set_xlabel("live nodes in the graph")
    left.set_ylabel("CPU seconds (read to CUDA source)")
    left.set_title("mcirc default pipeline")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)
    right.axhline(512, color="grey", linestyle=":", label="512 MiB target")
    right.set_xlabel("buffers")
    right.set_ylabel("peak RSS (MiB)")
    right.set_title("memory planner")
    right.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[-1], dpi=110)


if __name__ == "__main__":
    main()
