"""torch.compile(model, backend=mcir.backend) — torch >= 2.0.

TorchDynamo hands the backend FX graphs of torch-level ops; each goes
through mcir.capture_fx and mcir.compile. A graph mcir cannot take runs as
PyTorch would, after one line on stderr that says which op stopped it.
The compiled graph runs on the CPU reference path, or on the GPU when the
inputs live there and mcir was built with NVRTC.
"""
import sys

from ._lib import McirError


def backend(gm, example_inputs):
    from .capture import capture_fx
    from .graph import compile as mcir_compile
    try:
        g = capture_fx(gm, example_inputs, name="dynamo_graph")
        gpu = any(getattr(x, "is_cuda", False) for x in example_inputs)
        c = mcir_compile(g, ptx=gpu)
    except McirError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else "unknown reason"
        print("mcir: falling back to PyTorch for this graph: %s" % first, file=sys.stderr)
        return gm.forward

    def run(*args):
        import torch
        device = "gpu" if any(getattr(a, "is_cuda", False) for a in args) else "cpu"
        out = c(*args, device=device)
        outs = out if isinstance(out, tuple) else (out,)
        if device == "gpu":
            outs = tuple(o.cuda() for o in outs)
        return outs if len(g.outputs) != 1 or isinstance(out, tuple) else (outs[0],)

    return run


def _register():
    try:
        from torch._dynamo import register_backend
    except Exception:  # torch < 2.0: torch.compile does not exist
        return
    try:
        register_backend(name="mcir")(backend)
    except Exception:
        pass


_register()
