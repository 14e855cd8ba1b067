"""torch.compile(model, backend="mcir") — torch >= 2.0.

TorchDynamo hands the backend FX graphs of torch-level ops; each goes
through mcir.capture_fx (to ATen, then the capture's lowering) and
mcir.compile, and runs on the CPU reference path, or the GPU for CUDA
tensors (device="gpu").

- Parameters and buffers Dynamo passes as graph inputs are bound as weights
  of the graph (their values at compile time, no copy per call); a call
  whose parameter is another tensor, or was changed in place (its version
  counter moved), recompiles with the new values ("rebinds").
- Shapes: a graph Dynamo gives with concrete sizes is compiled for them.
  One with symbolic sizes (torch.compile(..., dynamic=True), or Dynamo's
  recompile after a call at another sequence length) is compiled once, on
  its first call, for a range of sizes (mcir symbolic dims, one per size
  symbol of its inputs): [the symbol's lower bound in Dynamo (2: Dynamo
  specialises 0 and 1), 2 x the first call's size], or up to
  options={"dynamic_max": N} (also MCIR_DYNAMIC_MAX=N). Every call in the
  range runs that compilation; a call past it compiles once more for
  [min, 2 x its size]. A graph whose sizes mcir cannot make symbolic (an
  input extent that is an expression of the symbols, a constant computed
  from a size) is compiled per shape as before, after one line on stderr
  (mcir.stats()["per_shape"] keeps it); that is not a fallback to
  PyTorch, so strict mode allows it.
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
                   "calls_fallback": 0, "compiles": 0, "rebinds": 0, "dynamic": 0, "fallbacks": [],
                   "per_shape": [], "collectives": 0, "merged_dims": 0, "graph_replays": 0})


reset_stats()


def stats():
    """What the torch.compile backend did since the start (or reset_stats):
    graphs Dynamo handed it, how many ran through mcir and how many fell
    back to PyTorch (with the reason of each in "fallbacks"), calls each
    way, compiles (one per graph and input shape, or per graph and range
    of sizes for symbolic ones), rebinds (recompiles for changed
    parameters), dynamic (compilations for a range of sizes) and per_shape
    (why a graph with symbolic sizes is compiled per shape instead)."""
    out = dict(_STATS)
    out["fallbacks"] = list(_STATS["fallbacks"])
    out["per_shape"] = list(_STATS["per_shape"])
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


def _dynamic_max(options):
    v = options.get("dynamic_max") if options and "dynamic_max" in options else \
        os.environ.get("MCIR_DYNAMIC_MAX", "")
    return int(v) if v not in ("", None) else None


def _symbolic_sizes(gm, example_inputs, weights):
    """Dynamo's size symbols of a graph: ({input: {axis: symbol}}, {input:
    symbol} for SymInt inputs, {symbol: lower bound}), or a string saying
    why they cannot be mcir dims."""
    import torch
    axes, ints, lower = {}, {}, {}

    def symbol(d):
        node = d.node
        expr = getattr(node, "expr", None)
        if expr is None or not getattr(expr, "is_Symbol", False):
            return None
        lo = 1
        try:
            r = node.shape_env.var_to_range.get(expr)
            lo = max(1, int(r.lower))
        except Exception:   # noqa: BLE001 — older or newer ShapeEnv: the default
            pass
        lower[str(expr)] = lo
        return str(expr)

    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, (n, x) in enumerate(zip(phs, example_inputs)):
        if i in weights:
            continue
        if isinstance(x, torch.SymInt):
            nm = symbol(x)
            if nm is None:
                return "input %s is the size expression %s" % (n.name, x)
            ints[i] = nm
        elif isinstance(x, torch.Tensor):
            fake = n.meta.get("example_value", n.meta.get("val"))
            shape = fake.shape if fake is not None else x.shape
            for a, d in enumerate(shape):
                if isinstance(d, torch.SymInt) and not getattr(d.node.expr, "is_number", False):
                    nm = symbol(d)
                    if nm is None:
                        return "input %s has the size expression %s in dim %d" % (n.name, d, a)
                    axes.setdefault(i, {})[a] = nm
    return axes, ints, lower


def _merge_equal(axes, ints, lower, sizes):
    """The symbols of equal size now made one (the first by name stands
    for the others), or None when no two are equal."""
    rep, by_size = {}, {}
    for k in sorted(sizes, key=lambda k: (len(k), k)):
        rep[k] = by_size.setdefault(sizes[k], k)
    if all(rep[k] == k for k in rep):
        return None
    axes = {i: {a: rep[k] for a, k in ax.items()} for i, ax in axes.items()}
    ints = {i: rep[k] for i, k in ints.items()}
    low = {}
    for k, v in lower.items():
        low[rep.get(k, k)] = max(low.get(rep.get(k, k), 1), v)
    return axes, ints, low


class _Runner:
    """Runs one Dynamo graph through mcir: a compiled graph per input
    signature, weights bound to the parameters they came from."""

    def __init__(self, gm, weights, strict, gpu, device=None, symbolic=None, dynamic_max=None,
                 desugared=None, graphs=None, exact_math=False):
        self.gm, self.weights, self.strict, self.gpu = gm, weights, strict, gpu
        self.exact_math = exact_math   # mcir.compile's exact_math (options={"exact_math": True})
        self.dt = desugared               # mcir.distributed.Desugared: DTensor inputs, or None
        if desugared is not None:
            self.weights = desugared.weights
        self.device = device   # "emu", or None: by where the tensors are
        self.graphs = graphs   # device runs as CUDA graphs: True / False, None: MCIR_GPU_GRAPHS
        self.cache = {}   # signature -> (Compiled, bound weights)
        self.fallback = None
        self.symbolic = symbolic          # _symbolic_sizes', or None: concrete shapes
        self.symbolic0 = symbolic         # the same before compile_dynamic merged any
        self.dynamic_max = dynamic_max
        self.ranges = None                # symbol -> (min, max) of the compilation in cache

    def signature(self, args):
        import torch
        if self.ranges is not None:   # one compilation for every size in range
            axes, ints, _ = self.symbolic
            return tuple((tuple("s" if k in axes.get(i, {}) else d for k, d in enumerate(a.shape)),
                          a.dtype, a.device.type) if isinstance(a, torch.Tensor)
                         else ("v", "s" if i in ints else a)
                         for i, a in enumerate(args) if i not in self.weights)
        return tuple((tuple(a.shape), a.dtype, a.device.type) if isinstance(a, torch.Tensor)
                     else ("v", a) for i, a in enumerate(args) if i not in self.weights)

    def in_range(self, args):
        from .dynamic import _sizes_of
        axes, ints, _ = self.symbolic
        try:
            sizes = _sizes_of(args, axes, ints)
        except ValueError:   # dims merged by compile_dynamic that differ now
            return False
        return all(self.ranges[k][0] <= v <= self.ranges[k][1] for k, v in sizes.items())

    def compile_dynamic(self, args):
        """One compilation for a range of each size symbol (symbols become
        mcir dims of the same names)."""
        from .capture import capture_fx
        from .dynamic import _sizes_of, capture_dynamic
        from .graph import compile as mcir_compile
        for merge in (False, True):
            axes, ints, lower = self.symbolic0
            if merge:
                merged = _merge_equal(axes, ints, lower, _sizes_of(args, axes, ints))
                if merged is None:
                    raise first_error
                axes, ints, lower = merged
            sizes = _sizes_of(args, axes, ints)
            old = self.ranges or {}
            ranges = {}
            for k, v in sizes.items():
                lo = min(lower.get(k, 1), v)
                hi = max(self.dynamic_max or 2 * v, v, old.get(k, (0, 0))[1])
                ranges[k] = (lo, hi)
            try:
                g = capture_dynamic(lambda a: capture_fx(self.gm, a, name="dynamo_graph",
                                                         weights=self.weights, dynamic=True),
                                    args, axes, ints, ranges)
                c = mcir_compile(g, ptx=self.gpu, exact_math=self.exact_math)
                break
            except TrainingError:
                raise
            except Exception as e:   # noqa: BLE001 — retried with symbols merged, else raised
                # Dynamo relates no two symbols its fake kernels do not
                # compare (a KV cache's key and value lengths; T5's query
                # and key lengths in its position bias): where mcir needs
                # them equal (a compile error: "agree only for some
                # values"), or the model does (a trace that changes one
                # alone fails), and they are equal now: one dim
                if merge or (isinstance(e, McirError) and "agree only for some values" not in str(e)):
                    raise
                first_error = e
        self.symbolic = (axes, ints, lower)
        if merge:
            _STATS["merged_dims"] += 1
        self.ranges = ranges
        _STATS["compiles"] += 1
        _STATS["dynamic"] += 1
        return c

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
        if self.symbolic is not None:
            return self.compile_dynamic(args)
        from .capture import capture_desugared, capture_fx
        from .graph import compile as mcir_compile
        if self.dt is not None:
            g = capture_desugared(self.dt, args, name="dynamo_graph")
        else:
            g = capture_fx(self.gm, args, name="dynamo_graph", weights=self.weights)
        c = mcir_compile(g, ptx=self.gpu, exact_math=self.exact_math)
        _STATS["compiles"] += 1
        _STATS["collectives"] += sum(k.get("template") == "collective"
                                     for k in c.plan.get("kernels", []))
        return c

    def first(self, args):
        """Compiles for args; False (after the fallback's bookkeeping, or a
        StrictError) when mcir cannot take the graph."""
        from .capture import UnsupportedError
        try:
            if self.symbolic is not None:
                try:
                    c = self.compile(args)
                except TrainingError:
                    raise
                except (UnsupportedError, RuntimeError, ValueError, IndexError) as e:
                    # not for a range (a capture refused, or a trace that
                    # fails at another size): per shape
                    why = str(e).strip().splitlines()[0]
                    _STATS["per_shape"].append(why)
                    print("mcir: compiling this graph once per shape: %s" % why, file=sys.stderr)
                    self.symbolic = self.ranges = None
                    c = self.compile(args)
            else:
                c = self.compile(args)
            self.cache[self.signature(args)] = (c, self.bound(args))
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
        given = args
        if self.dt is not None:
            args = self.dt.local(args)
        if not self.cache and not self.first(args):   # symbolic sizes: the first shape
            return self.fallback(*given)
        key = self.signature(args)
        entry = self.cache.get(key)
        now = self.bound(args)
        if entry is not None and self.ranges is not None and not self.in_range(args):
            self.cache.clear()                  # past the range: a wider one
            entry = None
            key = self.signature(args)
        if entry is None or entry[1] != now:
            if entry is not None:
                _STATS["rebinds"] += 1
            entry = (self.compile(args), now)
            self.cache[key] = entry
        c = entry[0]
        gpu = any(getattr(a, "is_cuda", False) for a in args)
        inputs = [args[i] for i in c.graph.input_args]
        home = None
        if c.graph.group is not None:
            # one rank of a torch.distributed group (docs/python.md): the CPU
            # reference, the emulated device, or with CUDA tensors the GPU —
            # the rank's kernels there, its values through the host, each
            # collective handed to the group (NCCL's on CUDA tensors)
            home = next((a.device for a in inputs if getattr(a, "is_cuda", False)), None)
        dev = self.device or ("gpu" if gpu else "cpu")
        if self.graphs is not None and dev != "cpu" and home is None:
            c.set_graphs(self.graphs)
        out = c(*inputs, device=dev)
        if home is not None:
            out = _to_device(out, home)
        _STATS["calls_mcir"] += 1
        if dev != "cpu" and c.last_step()["graph"]:
            _STATS["graph_replays"] += 1
        if self.dt is not None:
            out = self.dt.wrap(out)
        return out


def _to_device(out, device):
    """The tensors of a run's outputs (a tensor, or lists / tuples / dicts
    of them) moved to device."""
    if hasattr(out, "to") and hasattr(out, "detach"):
        return out.to(device)
    if isinstance(out, (list, tuple)):
        return type(out)(_to_device(o, device) for o in out)
    if isinstance(out, dict):
        return {k: _to_device(v, device) for k, v in out.items()}
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
    "emu"} runs on the emulated device (also MCIR_DEVICE=emu); {"cuda_graphs":
    True} runs each graph's device calls as CUDA graphs (also MCIR_GPU_GRAPHS=1;
    stats()["graph_replays"] counts the calls that ran as one); {"exact_math":
    True} computes the fused chains' exponentials and divisions in exact
    forms (mcirc --exact-math)."""
    import torch
    strict = _strict(options)
    exact_math = bool(options["exact_math"]) if options and "exact_math" in options else False
    device = _device(options)
    graphs = bool(options["cuda_graphs"]) if options and "cuda_graphs" in options else None
    _STATS["graphs"] += 1
    example_inputs = list(example_inputs)
    _refuse_grad(gm, example_inputs)
    weights = _weight_positions(gm, example_inputs)
    gpu = any(getattr(x, "is_cuda", False) for x in example_inputs)
    if gpu and not torch.cuda.is_available():
        gpu = False
    if device == "emu":
        gpu = False   # the kernels run on the emulated device; tensors go through the host
    desugared = None
    from .distributed import has_dtensors
    if has_dtensors(example_inputs):
        # a DTensor-sharded model: this process's rank (mcir.distributed)
        from .distributed import Desugared
        desugared = Desugared(gm, example_inputs, weights)
        if not all(_concrete(x) for x in example_inputs):
            why = "DTensor inputs with symbolic sizes"
            _STATS["per_shape"].append(why)
            print("mcir: compiling this graph once per shape: %s" % why, file=sys.stderr)
            return _Runner(gm, weights, strict, gpu, device, desugared=desugared, graphs=graphs, exact_math=exact_math)
    if all(_concrete(x) for x in example_inputs):
        # compile now: a graph mcir cannot take falls back at once
        runner = _Runner(gm, weights, strict, gpu, device, desugared=desugared, graphs=graphs,
                         exact_math=exact_math)
        if not runner.first(desugared.local(example_inputs) if desugared else example_inputs):
            return runner.fallback
        return runner
    # symbolic sizes: compiled at the first call, for a range of each size
    symbolic = _symbolic_sizes(gm, example_inputs, weights)
    if isinstance(symbolic, str):
        _STATS["per_shape"].append(symbolic)
        print("mcir: compiling this graph once per shape: %s" % symbolic, file=sys.stderr)
        symbolic = None
    return _Runner(gm, weights, strict, gpu, device, symbolic, _dynamic_max(options), graphs=graphs,
                   exact_math=exact_math)


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
