#!/usr/bin/python3
"""modelled.py — modelled GPU time from the traffic and cost model
(kernelplan/cost.c; "modelled_us" in plan.json), per graph and per kernel,
next to the unfused baseline (the same graph compiled with --no-rewrite).
Labelled modelled: a roofline of HBM bytes, flops, instruction issue and
launch overhead for the target, not a measurement.

    /usr/bin/python3 bench/modelled.py --mcirc build-bench/mcirc/mcirc --arch sm_90 \
        --graphs-csv OUT.csv --kernels-csv OUT2.csv graph.json...
"""
import argparse
import json
import os
import subprocess
import sys


def plan(mcirc, path, arch, rewrite):
    cmd = [mcirc, "--emit", "plan", "--arch", arch, path] + ([] if rewrite else ["--no-rewrite"])
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit("%s failed:\n%s" % (" ".join(cmd), r.stderr))
    return json.loads(r.stdout)


def name_of(path):
    d, f = os.path.split(path)
    return os.path.basename(d) if f == "graph.json" else f


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mcirc", required=True)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--graphs-csv", required=True)
    ap.add_argument("--kernels-csv", required=True)
    ap.add_argument("graphs", nargs="+")
    a = ap.parse_args(argv)
    with open(a.graphs_csv, "w") as g, open(a.kernels_csv, "w") as k:
        print("graph,arch,kernels,launches,hbm_bytes,compulsory_bytes,modelled_us,unfused_kernels,"
              "unfused_launches,unfused_hbm_bytes,unfused_modelled_us,modelled_speedup,label", file=g)
        print("graph,kernel,template,hbm_bytes,flops,launches,memory_us,compute_us,issue_us,launch_us,modelled_us,"
              "label", file=k)
        for path in a.graphs:
            f, u = plan(a.mcirc, path, a.arch, True), plan(a.mcirc, path, a.arch, False)
            ft, ut = f["totals"], u["totals"]
            n = name_of(path)
            print("%s,%s,%d,%d,%d,%d,%.3f,%d,%d,%d,%.3f,%.3f,modelled" % (
                n, a.arch, len(f["kernels"]), ft["launches"], ft["hbm_bytes"], ft.get("compulsory_bytes", 0),
                ft["modelled_us"], len(u["kernels"]), ut["launches"], ut["hbm_bytes"], ut["modelled_us"],
                ut["modelled_us"] / ft["modelled_us"] if ft["modelled_us"] else 0), file=g)
            for kp in f["kernels"]:
                cm = kp.get("cost_model") or {}
                print("%s,%s,%s,%d,%.0f,%d,%.3f,%.3f,%.3f,%.3f,%.3f,modelled" % (
                    n, kp["name"], kp["template"], kp["hbm_bytes"], kp["flops"], kp["launches"],
                    cm.get("memory_us", 0), cm.get("compute_us", 0), cm.get("issue_us", 0), cm.get("launch_us", 0),
                    kp["modelled_us"]), file=k)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
