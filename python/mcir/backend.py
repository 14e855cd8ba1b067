"""torch.compile(model, backend="mcir") — torch >= 2.0.

TorchDynamo hands the backend FX graphs of torch-level ops; each goes
through mcir.capture_fx (to ATen, then the capture's lowering) and
mcir.compile, and runs on the CPU reference path, or the GPU for CUDA
tensors (device="gpu").

- Parameters and buffers Dynamo passes as graph inputs are bound as weights
  of the graph (their values at compile time, no copy per call); a call
  whose parameter is another tensor, or was changed in place (its version
  counter moved), recompiles with the new values ("rebinds").
- Shapes: a graph is compiled for the shapes of its inputs; Dynamo's
  symbolic sizes (a second call with another sequence length) compile once
  per shape, on the first call with that shape.
- Training is refused (mcir.TrainingError): a module in training mode
  (dropout, batch-norm updates), or a call with grad enabled whose inputs or
  parameters require grad — run under torch.no_grad().
- A graph mcir cannot take runs as PyTorch would, after one line on stderr
  naming the op and the model's line; mcir.stats() counts graphs and calls
  each way. Strict mode — MCIR_STRICT=1, or
  torch.compile(..., options={"strict": True}) — makes that an exception
  (mcir.StrictError).
- Device: CUDA tensors run on the GPU; options={"device": "emu"} (or
  MCIR_DEVICE=emu) runs every graph's generated kernels on the emulated
  device instead (on the CPU, each launch checked for races, out-of-bounds
  and uninitialised reads; a finding raises McirError).
"""
import os
import sys

from ._lib import McirError
from .capture import TrainingError

_STATS = {}


def reset_stats():
    """Zeroes the counters of mcir.stats()."""
    _STATS.clear()
    _STATS.update({"graphs": 0, "graphs_mcir": 0, "graphs_fallback": 0, "calls_mcir": 0,
                   "calls_fallback": 0, "compiles": 0, "rebinds": 0, "fallbacks": []})


reset_stats()


def stats():
    """What the torch.compile backend did since the start (or reset_stats):
    graphs Dynamo handed it, how many ran through mcir and how many fell
    back to PyTorch (with the reason of each in "fallbacks"), calls each
    way, compiles (one per graph and input shape) and rebinds (recompiles
    for changed parameters)."""
    out = dict(_STATS)
    out["fallbacks"] = list(_STATS["fallbacks"])
    return out


class StrictError(McirError):
    """In strict mode, a graph that would fall back to PyTorch."""


def _strict(options):
    if options and "strict" in options:
        return bool(options["strict"])
    return os.environ.get("MCIR_STRICT", "") not in ("", "0")


def _device(options):
    d = options.get("device") if options and "device" in options else os.environ.get("MCIR_DEVICE", "")
    if d not in ("", "emu"):
        raise McirError("torch.compile(backend='mcir'): device %r: the backend takes 'emu' (the "
                        "emulated device), or nothing (CPU reference, or the GPU for CUDA tensors)" % (d,))
    return d or None


def _weight_positions(gm, example_inputs):
    """Placeholders that are the module's parameters or buffers."""
    import torch
    out = set()
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, (n, x) in enumerate(zip(phs, example_inputs)):
        if not isinstance(x, torch.Tensor):
            continue
        ga = n.meta.get("grapharg")
        src = ""
        if ga is not None and getattr(ga, "source", None) is not None:
            src = getattr(ga.source, "name", "")
            src = src() if callable(src) else str(src)   # a method on older torch
        if isinstance(x, torch.nn.Parameter) or "_parameters[" in src or "_buffers[" in src:
            out.add(i)
    return out


def _refuse_grad(gm, example_inputs):
    import torch
    if not torch.is_grad_enabled():
        return
    needs = [i for i, x in enumerate(example_inputs)
             if isinstance(x, torch.Tensor) and x.requires_grad]
    needs += [n for n, p in gm.named_parameters() if p.requires_grad]
    if needs:
        raise TrainingError("mcir compiles inference graphs, and this call computes gradients "
                            "(grad mode on, %d inputs or parameters require grad): run it under "
                            "torch.no_grad() or torch.inference_mode(), with model.eval()" %
                            len(needs))


def _concrete(x):
    import torch
    if isinstance(x, torch.SymInt) if hasattr(torch, "SymInt") else False:
        return False
    if isinstance(x, torch.Tensor):
        return all(isinstance(d, int) for d in x.shape) and \
            type(x).__name__ not in ("FakeTensor", "FunctionalTensor")
    return True


class _Runner:
    """Runs one Dynamo graph through mcir: a compiled graph per input
    signature, weights bound to the parameters they came from."""

    def __init__(self, gm, weights, strict, gpu, device=None):
        self.gm, self.weights, self.strict, self.gpu = gm, weights, strict, gpu
        self.device = device   # "emu", or None: by where the tensors are
        self.cache = {}   # signature -> (Compiled, bound weights)
        self.fallback = None

    def signature(self, args):
        import torch
        return tuple((tuple(a.shape), a.dtype, a.device.type) if isinstance(a, torch.Tensor)
                     else ("v", a) for i, a in enumerate(args) if i not in self.weights)

    def bound(self, args):
        """What the weights are now: each parameter's identity, storage and
        version counter, and the module's own attributes'."""
        import torch
        out = []
        for i in sorted(self.weights):
            t = args[i]
            out.append((id(t), t.data_ptr(), t._version))
        for _, t in list(self.gm.named_parameters()) + list(self.gm.named_buffers()):
            if isinstance(t, torch.Tensor):
                out.append((id(t), t.data_ptr(), t._version))
        return out

    def compile(self, args):
        from .capture import capture_fx
        from .graph import compile as mcir_compile
        g = capture_fx(self.gm, args, name="dynamo_graph", weights=self.weights)
        c = mcir_compile(g, ptx=self.gpu)
        _STATS["compiles"] += 1
        return c

    def first(self, args):
        """Compiles for args; False (after the fallback's bookkeeping, or a
        StrictError) when mcir cannot take the graph."""
        from .capture import UnsupportedError
        try:
            self.cache[self.signature(args)] = (self.compile(args), self.bound(args))
        except TrainingError:
            raise
        except (UnsupportedError, McirError) as e:
            self.fallback = _fallback(self.gm, e, self.strict)
            return False
        _STATS["graphs_mcir"] += 1
        return True

    def __call__(self, *args):
        if self.fallback is not None:
            return self.fallback(*args)
        if not self.cache and not self.first(args):   # symbolic sizes: the first shape
            return self.fallback(*args)
        key = self.signature(args)
        entry = self.cache.get(key)
        now = self.bound(args)
        if entry is None or entry[1] != now:
            if entry is not None:
                _STATS["rebinds"] += 1
            entry = (self.compile(args), now)
            self.cache[key] = entry
        c = entry[0]
        gpu = any(getattr(a, "is_cuda", False) for a in args)
        inputs = [args[i] for i in c.graph.input_args]
        out = c(*inputs, device=self.device or ("gpu" if gpu else "cpu"))
        _STATS["calls_mcir"] += 1
        return out


def _fallback(gm, why, strict):
    first = str(why).strip().splitlines()[0] if str(why).strip() else "unknown reason"
    if strict:
        raise StrictError("mcir (strict mode): this graph would fall back to PyTorch: %s" % first)
    _STATS["graphs_fallback"] += 1
    _STATS["fallbacks"].append(first)
    print("mcir: falling back to PyTorch for this graph: %s" % first, file=sys.stderr)
    forward = gm.forward

    def run(*args):
        _STATS["calls_fallback"] += 1
        return forward(*args)
    return run


def backend(gm, example_inputs, options=None):
    """The torch.compile backend (registered as "mcir"). options: {"strict":
    True} makes every fallback an exception (also MCIR_STRICT=1); {"device":
    "emu"} runs on the emulated device (also MCIR_DEVICE=emu)."""
    import torch
    strict = _strict(options)
    device = _device(options)
    _STATS["graphs"] += 1
    example_inputs = list(example_inputs)
    _refuse_grad(gm, example_inputs)
    weights = _weight_positions(gm, example_inputs)
    gpu = any(getattr(x, "is_cuda", False) for x in example_inputs)
    if gpu and not torch.cuda.is_available():
        gpu = False
    if device == "emu":
        gpu = False   # the kernels run on the emulated device; tensors go through the host
    runner = _Runner(gm, weights, strict, gpu, device)
    if all(_concrete(x) for x in example_inputs):
        # compile now: a graph mcir cannot take falls back at once
        if not runner.first(example_inputs):
            return runner.fallback
    # else symbolic sizes: compiled on each call's concrete shapes
    return runner


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
