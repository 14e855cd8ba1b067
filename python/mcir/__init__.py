"""mcir — the memory-centric compiler for deep-learning graphs, from Python.

    import torch, mcir
    g = mcir.capture(model.eval(), (x,))     # torch.fx → an mcir Graph
    c = mcir.compile(g)                      # rewrites, plans, memory plan
    print(c.summary()); c.applied("attention_decomposed")
    y = c(x)                                 # CPU reference (device="gpu" on a GPU)

    seq = mcir.Dim("seq", min=1, max=128)    # one compilation for every length
    c = mcir.compile(mcir.capture(model.eval(), (x,), dynamic_shapes=({1: seq},)))

    opt = torch.compile(model, backend=mcir.backend)   # torch >= 2.0

Everything runs through mcir's C library (libmcir_capi.so): the same
pipeline, catalog and diagnostics as `mcirc`. docs/python.md has the rest.
"""
from ._lib import McirError
from .graph import Compiled, Graph, compile
from .capture import TrainingError, UnsupportedError, capture, capture_fx
from .backend import StrictError, backend, reset_stats, stats
from .dynamic import Dim

__all__ = ["Dim", "capture", "capture_fx", "compile", "backend", "Graph", "Compiled", "McirError",
           "UnsupportedError", "TrainingError", "StrictError", "stats", "reset_stats"]
