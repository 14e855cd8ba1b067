#!/usr/bin/python3
"""check_graph.py — validate graph.json files against the spec (Python side).

    /usr/bin/python3 scripts/check_graph.py examples/*/graph.json
    /usr/bin/python3 scripts/check_graph.py --run examples/index.json

Without --run: mcir_graph.check on each file (fields, names, arity, attrs,
.npy files, shape inference); prints the output shapes. With --run and
examples/index.json: also runs every example through the numpy reference
interpreter and compares with expected/ (elementwise atol + rtol|ref|).
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcir_graph  # noqa: E402


def main(argv):
    run = "--run" in argv
    files = [a for a in argv[1:] if a != "--run"]
    bad = 0
    for f in files:
        if run and f.endswith("index.json"):
            base = os.path.dirname(os.path.abspath(f))
            for name, e in json.load(open(f)).items():
                given = {n: np.load(os.path.join(base, p)) for n, p in e["inputs"].items()}
                if any(t.dtype == np.uint16 for t in given.values()):
                    raise SystemExit("bf16 given inputs not supported here")
                got = mcir_graph.interpret(os.path.join(base, e["graph"]), given)
                for o, p in e["outputs"].items():
                    ref = np.load(os.path.join(base, p)).astype(np.float64)
                    err = np.abs(got[o] - ref)
                    ok = bool((err <= e["atol"] + e["rtol"] * np.abs(ref)).all())
                    bad += not ok
                    print("%s %s.%s: max|d| %.2e, max|d|/max|ref| %.2e" % (
                        "ok  " if ok else "FAIL", name, o, err.max(), err.max() / np.abs(ref).max()))
            continue
        try:
            g, shapes, dtypes = mcir_graph.check(f)
            print("ok   %s: %d nodes, outputs %s" % (f, len(g["nodes"]), ", ".join(
                "%s %s%s" % (o, dtypes[o], shapes[o]) for o in g["outputs"])))
        except mcir_graph.CheckError as e:
            bad += 1
            print("FAIL %s:\n  %s" % (f, str(e).replace("\n", "\n  ")))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
