#!/usr/bin/env python3
"""Exports torchvision models to ONNX, runs each with `mcirc --run --device
cpu` and compares the logits with PyTorch's (docs/onnx.md, "torchvision
models"). The models are too big to commit (tens of MB); this regenerates
them under WORK (default /tmp/mcir-torchvision).

    /usr/bin/python3 tools/onnx_torchvision.py [--mcirc build/mcirc/mcirc]
        [--work DIR] [--opset 17] [MODEL ...]

Weights are random (no download): seed 0, and every BatchNorm's running
statistics and affine parameters are randomised too, so that the folded or
standalone batch norms are not identities. The check is the issue's:
max|mcir - torch| / max|torch| <= 1e-4. Needs Debian python3-torch,
python3-torchvision and PyPI onnx (onnxruntime, if installed, is compared
too). Exit status 1 if any model fails or is off."""
import argparse
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torchvision

MODELS = {
    "mobilenet_v2": lambda: torchvision.models.mobilenet_v2(),
    "mobilenet_v3_small": lambda: torchvision.models.mobilenet_v3_small(),
    "densenet121": lambda: torchvision.models.densenet121(),
    "swin_t": lambda: torchvision.models.swin_t(),
}


def randomise_norms(m, gen):
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            c = mod.num_features
            with torch.no_grad():
                mod.running_mean.copy_(0.1 * torch.randn(c, generator=gen))
                mod.running_var.copy_(0.5 + torch.rand(c, generator=gen))
                mod.weight.copy_(1 + 0.1 * torch.randn(c, generator=gen))
                mod.bias.copy_(0.1 * torch.randn(c, generator=gen))


def ops_of(path):
    try:
        import onnx
        return sorted({n.op_type for n in onnx.load(path).graph.node})
    except ImportError:
        return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcirc", default="build/mcirc/mcirc")
    ap.add_argument("--work", default="/tmp/mcir-torchvision")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    names = a.models or list(MODELS)
    bad = 0
    for name in names:
        d = os.path.join(a.work, f"{name}_op{a.opset}")
        os.makedirs(d, exist_ok=True)
        torch.manual_seed(0)
        gen = torch.Generator().manual_seed(0)
        m = MODELS[name]().eval()
        randomise_norms(m, gen)
        x = torch.randn(1, 3, a.size, a.size, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            y = m(x).numpy()
        path = os.path.join(d, "model.onnx")
        torch.onnx.export(m, (x,), path, opset_version=a.opset, input_names=["x"],
                          output_names=["y"], do_constant_folding=True)
        np.save(os.path.join(d, "x.npy"), x.numpy())
        np.save(os.path.join(d, "torch_y.npy"), y)
        ort_err = None
        try:
            import onnxruntime as ort
            s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            (r,) = s.run(None, {"x": x.numpy()})
            ort_err = float(np.abs(r - y).max() / np.abs(y).max())
        except ImportError:
            pass
        out = os.path.join(d, "out")
        # -o also writes report.html: its drawings have a time budget
        # (--report-time, docs/report.md), so a large model costs seconds
        t0 = time.time()
        p = subprocess.run([a.mcirc, "--run", "--device", "cpu", "-o", out,
                            "--input", f"x={os.path.join(d, 'x.npy')}", path],
                           capture_output=True, text=True)
        secs = time.time() - t0
        size = os.path.getsize(path) / 1e6
        if p.returncode != 0:
            msg = (p.stderr.strip().splitlines() or ["?"])[0]
            print(f"{name}: FAILED (exit {p.returncode}, {secs:.0f} s): {msg}")
            print(f"  ops: {' '.join(ops_of(path))}")
            bad += 1
            continue
        got = np.load(os.path.join(out, "y.npy"))
        err = float(np.abs(got - y).max() / np.abs(y).max())
        ok = got.shape == y.shape and err <= 1e-4
        bad += not ok
        summary = [l.strip() for l in p.stdout.splitlines() if l.strip().startswith(("nodes", "kernels"))]
        print(f"{name}: {'ok' if ok else 'OFF'}  rel err {err:.2e} (onnxruntime {ort_err if ort_err is None else f'{ort_err:.2e}'}), "
              f"{size:.1f} MB, mcirc {secs:.0f} s; {'; '.join(summary)}")
        print(f"  ops: {' '.join(ops_of(path))}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
