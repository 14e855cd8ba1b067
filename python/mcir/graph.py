"""Graphs in Python: the graph.json form (docs/graph-format.md) plus weight
values held in memory, and what mcir.compile returns."""
import ctypes
import json

import numpy as np

from . import _lib

_NP_DTYPE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i64": np.int64,
             "i32": np.int32, "u8": np.uint8, "bool": np.bool_}
_INT = ("i64", "i32", "u8", "bool")


def _contiguous(a, dtype=None):
    """a as a C-order array (0-d stays 0-d: np.ascontiguousarray makes it 1-d)."""
    a = np.asarray(a, dtype=dtype)
    return a if a.flags.c_contiguous else a.copy(order="C")


def storage(values, dtype):
    """values (anything numpy takes, or a torch tensor) as a C-order numpy
    array in mcir's storage dtype (bf16: the upper 16 bits of f32, rounded
    to nearest even, as mcir stores it)."""
    if hasattr(values, "detach"):  # a torch tensor
        t = values.detach().cpu()
        if dtype in _INT:
            import torch
            tt = {"i64": torch.int64, "i32": torch.int32, "u8": torch.uint8,
                  "bool": torch.bool}[dtype]
            return _contiguous(t.to(tt).numpy())
        if dtype == "bf16":
            import torch
            return _contiguous(t.to(torch.bfloat16).view(torch.int16).numpy()
                                        .view(np.uint16))
        values = t.float().numpy() if dtype != "f16" else t.half().numpy()
    a = np.asarray(values)
    if dtype == "bf16":
        if a.dtype == np.uint16:
            return _contiguous(a)
        u = _contiguous(a, dtype=np.float32).view(np.uint32)
        rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        return rounded.astype(np.uint16)
    return _contiguous(a, dtype=_NP_DTYPE[dtype])


def from_storage(a, dtype):
    """A storage array back to numpy: float32 for the float dtypes, the
    integer or bool dtype itself otherwise."""
    if dtype == "bf16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    if dtype in _INT:
        return a
    return a.astype(np.float32)


def _rebuild(tree, results):
    """The output structure the model returned, tensors put back."""
    if isinstance(tree, (list, tuple)):
        return type(tree)(_rebuild(x, results) for x in tree)
    if isinstance(tree, dict):
        return {k: _rebuild(v, results) for k, v in tree.items()}
    if type(tree).__name__ == "_Typed":   # a dict's subclass: ModelOutput
        items = {k: _rebuild(v, results) for k, v in tree.items.items()}
        try:
            return tree.cls(**items)
        except Exception:   # noqa: BLE001 — a class that takes no keywords: its items
            return items
    if type(tree).__name__ == "_Out":
        return results[tree.i]
    return tree


def _write_back(g, inputs, results):
    """The model's in-place updates of its inputs (a static KV cache's
    index_copy_), computed as outputs, written over the caller's tensors."""
    for i, k in g.mutations:
        x = inputs[i]
        if hasattr(x, "copy_"):
            import torch
            x.copy_(torch.as_tensor(results[k]).to(x.device))
        elif isinstance(x, np.ndarray) and x.flags.writeable:
            np.copyto(x, np.asarray(results[k]).astype(x.dtype, copy=False))


class Graph:
    """A graph being built: inputs, weights (with in-memory values), nodes,
    outputs. `to_json()` is graph.json text; weights' values travel apart."""

    def __init__(self, name="graph"):
        self.name = name
        self.dims = {}          # symbolic dimension name -> (min, max)
        self.inputs = []        # {"name", "dtype", "shape"}: an entry may be a dim's name
        self.weights = []       # {"name", "dtype", "shape"}
        self.values = {}        # weight name -> storage array
        self.nodes = []
        self.outputs = []
        self.output_tree = None   # the structure the model returns (capture sets it)
        self.input_args = None    # example-input position of each input (capture)
        self.keep = []            # torch tensors the weights' values view
        self.ranks = 1            # graph.json "ranks"
        self.group = None         # capture of torch.distributed collectives: (rank, process group)
        self.mutations = []       # (input index, output index): an input the model updates in place
        self._names = set()

    def fresh(self, base):
        base = base.replace("/", ".") or "t"
        name, k = base, 1
        while name in self._names:
            name = "%s_%d" % (base, k)
            k += 1
        self._names.add(name)
        return name

    def input(self, name, dtype, shape):
        name = self.fresh(name)
        self.inputs.append({"name": name, "dtype": dtype, "shape": list(shape)})
        return name

    def weight(self, name, dtype, shape, values):
        name = self.fresh(name)
        self.weights.append({"name": name, "dtype": dtype, "shape": list(shape)})
        self.values[name] = storage(values, dtype).reshape(tuple(shape))
        return name

    def node(self, op, inputs, name=None, attrs=None, n_outputs=1):
        name = self.fresh(name or op)
        outs = [self.fresh(name + (".y" if n_outputs == 1 else ".y%d" % i))
                for i in range(n_outputs)]
        n = {"name": name, "op": op, "inputs": list(inputs), "outputs": outs}
        if attrs:
            n["attrs"] = attrs
        self.nodes.append(n)
        return outs[0] if n_outputs == 1 else outs

    def prune(self):
        """Drops nodes whose outputs nothing uses (views a capture made on
        the way), and weights no node reads."""
        used = set(self.outputs)
        keep = []
        for n in reversed(self.nodes):
            if any(o in used for o in n["outputs"]):
                keep.append(n)
                used.update(n["inputs"])
        self.nodes = keep[::-1]
        self.weights = [w for w in self.weights if w["name"] in used]
        self.values = {k: v for k, v in self.values.items() if k in used}

    def to_json(self):
        doc = {"mcir": 1, "name": self.name}
        if self.ranks > 1:
            doc["ranks"] = self.ranks
        if self.dims:
            doc["dims"] = {k: {"min": lo, "max": hi} for k, (lo, hi) in self.dims.items()}
        doc.update({"inputs": self.inputs, "weights": self.weights, "nodes": self.nodes,
                    "outputs": self.outputs})
        return json.dumps(doc, indent=1)


class Compiled:
    """A compiled graph: its artifacts as Python objects, and __call__ to
    run it (the CPU reference interpreter, or the GPU)."""

    def __init__(self, graph, handle):
        self.graph = graph
        self._h = handle
        self._group = None          # set_group's callback
        self._group_error = None
        L = _lib.lib()
        self.trace = [json.loads(line) for line in
                      self._artifact("trace").splitlines() if line.strip()]
        self.plan = json.loads(self._artifact("plan"))
        self.memory = json.loads(self._artifact("memory"))
        counts = [ctypes.c_int() for _ in range(4)]
        L.mcir_capi_counts(self._h, *[ctypes.byref(c) for c in counts])
        self.nodes_before, self.nodes_after, self.kernels, self.rewrites = \
            [c.value for c in counts]

    def set_group(self, rank, collective):
        """Runs this graph (ranks > 1) as rank `rank` of a group whose other
        ranks run it in other processes: a run on the CPU takes and returns
        this rank's values only, and each collective node calls
        collective(op, reduce, axis, ranks, x) — op "all_reduce",
        "all_gather" or "reduce_scatter", reduce "sum" / "max" / "min" (""
        for a gather), x this rank's input as a numpy array (float32, or
        int64 for integer tensors) — which must return this rank's result
        (mcir.distributed.group_collective does it with torch.distributed).
        collective None: the graph runs all its ranks itself again."""
        L = _lib.lib()
        if collective is None:
            self._group = None
            st = L.mcir_capi_set_group(self._h, 0, _lib.COLLECTIVE_FN(), None)
        else:
            def call(ctx, op, reduce, axis, ranks, integer, ndim, shape, pin, pout):
                try:
                    dt = np.int64 if integer else np.float32
                    shp = tuple(shape[i] for i in range(ndim))
                    n = int(np.prod(shp, dtype=np.int64))
                    x = np.frombuffer((ctypes.c_char * (n * 8 if integer else n * 4))
                                      .from_address(pin), dtype=dt).reshape(shp).copy()
                    y = np.ascontiguousarray(np.asarray(collective(op.decode(), reduce.decode(),
                                                                   axis, ranks, x)), dtype=dt)
                    want = list(shp)
                    if op == b"all_gather":
                        want[axis] *= ranks
                    elif op == b"reduce_scatter":
                        want[axis] //= ranks
                    if list(y.shape) != want:
                        raise _lib.McirError("collective %s returned shape %s, not %s" %
                                             (op.decode(), list(y.shape), want))
                    ctypes.memmove(pout, y.ctypes.data, y.nbytes)
                    return 0
                except BaseException as e:   # noqa: BLE001 — raised again after the run
                    self._group_error = e
                    return 1
            self._group = _lib.COLLECTIVE_FN(call)   # kept alive while the library holds it
            st = L.mcir_capi_set_group(self._h, rank, self._group, None)
        if st != 0:
            raise _lib.McirError(L.mcir_capi_errors(self._h).decode().strip())

    def set_graphs(self, on):
        """Device runs (device "gpu" or "emu") as CUDA graphs: the first
        run at a size captures the launches, later runs at that size replay
        them with one launch (docs/codegen.md "Sessions and CUDA graphs").
        True / False, or None: as MCIR_GPU_GRAPHS says (the default)."""
        L = _lib.lib()
        if L.mcir_capi_set_graphs(self._h, -1 if on is None else int(bool(on))) != 0:
            raise _lib.McirError(L.mcir_capi_errors(self._h).decode().strip())

    def last_step(self):
        """What the last device run did: {"graph": it ran as a CUDA graph,
        "graph_sizes": the graphs the session holds}."""
        g, n = ctypes.c_int(), ctypes.c_int()
        _lib.lib().mcir_capi_last_step(self._h, ctypes.byref(g), ctypes.byref(n))
        return {"graph": bool(g.value), "graph_sizes": n.value}

    def _artifact(self, what):
        text = _lib.lib().mcir_capi_artifact(self._h, what.encode())
        return text.decode() if text else ""

    def artifact(self, what):
        """Text of an artifact as `mcirc --emit WHAT` prints it: mcir,
        trace, plan, memory, cuda, dot."""
        return self._artifact(what)

    def applied(self, rule=None):
        """Applied rewrite records (of one rule)."""
        return [r for r in self.trace if r.get("decision") == "applied" and
                r.get("stage", "rewrite") == "rewrite" and (rule is None or r["rule"] == rule)]

    def summary(self):
        return ("%s: %d nodes before, %d after rewriting (%d rewrites applied), %d kernels, "
                "arena %d bytes (lower bound %d)" %
                (self.graph.name, self.nodes_before, self.nodes_after, self.rewrites,
                 self.kernels, self.memory.get("arena_bytes", 0),
                 self.memory.get("lower_bound_bytes", 0)))

    def __call__(self, *inputs, device="cpu", seed=0):
        """Runs on the inputs (torch tensors or numpy arrays, in the graph's
        input order); returns the outputs in the structure the model
        returned, as torch tensors when torch tensors came in, else numpy
        arrays (float32 values for float dtypes, integers as they are).

        device "cpu": the reference interpreter. "gpu": the generated
        kernels (compile(..., ptx=True)); torch CUDA tensors are read and
        the outputs written in device memory, by their device pointers,
        without a pass through the host; other inputs are copied through
        it. "emu": the same generated kernels through the same runtime on
        the emulated device (mcirc --run --device emu): on the CPU, every
        launch checked for races, out-of-bounds and uninitialised reads and
        hangs; a finding raises McirError with "KERNEL: error: KIND: WHAT".
        Needs a host C++ compiler; inputs go through the host."""
        g = self.graph
        if len(inputs) != len(g.inputs):
            raise _lib.McirError("%s takes %d inputs, %d given" %
                                 (g.name, len(g.inputs), len(inputs)))
        if device not in ("cpu", "gpu", "emu"):
            raise _lib.McirError("device must be 'cpu', 'gpu' or 'emu', not %r" % (device,))
        if device == "gpu" and any(getattr(x, "is_cuda", False) for x in inputs) and self._group is None:
            return self._run_cuda(inputs)
        # (one rank of a group: its values through the host on every device,
        # each collective handed to the group; outputs on the CPU)
        want_torch = any(hasattr(x, "detach") for x in inputs)
        arrays = []
        for x, spec in zip(inputs, g.inputs):
            a = storage(x, spec["dtype"])
            _check_shape(spec, a.shape)
            arrays.append(a)
        self._bind([a.shape for a in arrays])
        outs = []
        for name in g.outputs:
            spec = self._output_spec(name)
            outs.append(np.empty(spec[1], dtype=_NP_DTYPE[spec[0]]))
        L = _lib.lib()
        self._group_error = None
        st = L.mcir_capi_run(self._h, device.encode(), len(arrays),
                             _lib.strings([s["name"] for s in g.inputs]), _lib.pointers(arrays),
                             _lib.sizes(arrays), _lib.pointers(outs), _lib.sizes(outs), seed)
        if st != 0:
            err = self._group_error
            self._group_error = None
            msg = L.mcir_capi_errors(self._h).decode()
            if err is not None:
                raise _lib.McirError("%s%s: %s" % (msg, type(err).__name__, err)) from err
            raise _lib.McirError(msg)
        results = [from_storage(o, self._output_spec(n)[0]) for o, n in zip(outs, g.outputs)]
        if want_torch:
            import torch
            results = [torch.from_numpy(r) for r in results]
        _write_back(g, inputs, results)
        if g.output_tree is not None:
            return _rebuild(g.output_tree, results)
        return results[0] if len(results) == 1 else tuple(results)

    def _run_cuda(self, inputs):
        """device="gpu" on torch CUDA tensors: their device pointers go to
        mcir's runtime (mcir_capi_run_device), outputs are torch CUDA tensors
        allocated here and written in place. mcir's runtime runs on CUDA
        device 0, in its primary context (the one torch uses)."""
        import torch
        g = self.graph
        if not torch.cuda.is_available():
            raise _lib.McirError("device='gpu' with CUDA tensors: torch.cuda.is_available() is "
                                 "False here")
        tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
               "i64": torch.int64, "i32": torch.int32, "u8": torch.uint8, "bool": torch.bool}
        dev = torch.device("cuda", 0)
        ins = []
        for x, spec in zip(inputs, g.inputs):
            if getattr(x, "is_cuda", False) and x.device.index not in (None, 0):
                raise _lib.McirError("input '%s' is on %s: mcir's runtime runs on cuda:0" %
                                     (spec["name"], x.device))
            t = torch.as_tensor(x).to(device=dev, dtype=tdt[spec["dtype"]]).contiguous()
            _check_shape(spec, t.shape)
            ins.append(t)
        self._bind([t.shape for t in ins])
        outs = [torch.empty(self._output_spec(n)[1], dtype=tdt[self._output_spec(n)[0]],
                            device=dev) for n in g.outputs]
        # the producers of the inputs (on torch's stream) must be done
        torch.cuda.current_stream(dev).synchronize()
        n_in, n_out = max(1, len(ins)), max(1, len(outs))
        in_ptrs = (ctypes.c_ulonglong * n_in)(*[t.data_ptr() for t in ins])
        in_bytes = (ctypes.c_longlong * n_in)(*[t.numel() * t.element_size() for t in ins])
        out_ptrs = (ctypes.c_ulonglong * n_out)(*[t.data_ptr() for t in outs])
        out_bytes = (ctypes.c_longlong * n_out)(*[t.numel() * t.element_size() for t in outs])
        L = _lib.lib()
        st = L.mcir_capi_run_device(self._h, len(ins),
                                    _lib.strings([s["name"] for s in g.inputs]),
                                    in_ptrs, in_bytes, out_ptrs, out_bytes)
        if st != 0:
            raise _lib.McirError(L.mcir_capi_errors(self._h).decode())
        _write_back(g, inputs, outs)
        if g.output_tree is not None:
            return _rebuild(g.output_tree, outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _bind(self, shapes):
        """A graph with dims: binds them to the sizes of these inputs
        (mcir_capi_bind) — nothing is compiled — and forgets the output
        shapes of the previous binding."""
        if not self.graph.dims:
            return
        L = _lib.lib()
        flat = [int(d) for s in shapes for d in s]
        ranks = (ctypes.c_int * max(1, len(shapes)))(*[len(s) for s in shapes])
        ext = (ctypes.c_longlong * max(1, len(flat)))(*flat)
        st = L.mcir_capi_bind(self._h, len(shapes),
                              _lib.strings([s["name"] for s in self.graph.inputs]), ranks, ext)
        if st != 0:
            raise _lib.McirError(L.mcir_capi_errors(self._h).decode().strip())
        self.__dict__.pop("_specs", None)

    def dims(self):
        """The graph's symbolic dimensions: name -> (min, max, the size it is
        bound at now: the last call's, the max before any)."""
        L = _lib.lib()
        out = {}
        name = ctypes.c_char_p()
        lo, hi, v = ctypes.c_longlong(), ctypes.c_longlong(), ctypes.c_longlong()
        i = 0
        while i < L.mcir_capi_dim(self._h, i, ctypes.byref(name), ctypes.byref(lo),
                                  ctypes.byref(hi), ctypes.byref(v)):
            out[name.value.decode()] = (lo.value, hi.value, v.value)
            i += 1
        return out

    def _output_spec(self, name):
        if not hasattr(self, "_specs"):
            L = _lib.lib()
            self._specs = {}
            dt = ctypes.c_char_p()
            shape = (ctypes.c_longlong * 8)()
            for i, n in enumerate(self.graph.outputs):
                r = L.mcir_capi_output(self._h, i, ctypes.byref(dt), shape)
                self._specs[n] = (dt.value.decode(), tuple(shape[k] for k in range(r)))
        return self._specs[name]

    def __del__(self):
        if getattr(self, "_h", None):
            _lib.lib().mcir_capi_free(self._h)
            self._h = None


def _check_shape(spec, shape):
    """An input's shape against its declaration (a dim's name matches any
    size: mcir_capi_bind checks its range)."""
    want = spec["shape"]
    if len(shape) != len(want) or any(not isinstance(w, str) and int(s) != w
                                       for s, w in zip(shape, want)):
        raise _lib.McirError("input '%s' is %s, the graph declares %s" %
                             (spec["name"], [int(s) for s in shape], want))


def compile(graph, arch=None, rewrite=True, code=False, ptx=False, catalogs=(), exact_math=False):
    """Compiles a Graph (mcir.capture makes one) through the whole pipeline
    as mcirc does; raises McirError with mcir's diagnostics on failure.
    exact_math: the fused chains' exponentials and divisions in exact forms
    (mcirc --exact-math)."""
    L = _lib.lib()
    names = list(graph.values)
    arrays = [graph.values[n] for n in names]
    flags = (0 if rewrite else _lib.NO_REWRITE) | (_lib.CODE if code else 0) | \
        (_lib.PTX if ptx else 0) | (_lib.EXACT_MATH if exact_math else 0)
    h = L.mcir_capi_compile(graph.to_json().encode(), graph.name.encode(), len(names),
                            _lib.strings(names), _lib.pointers(arrays), _lib.sizes(arrays),
                            arch.encode() if arch else None, flags,
                            _lib.strings(list(catalogs)), len(catalogs))
    if not h:
        raise _lib.McirError("out of memory")
    if L.mcir_capi_status(h) != 0:
        msg = L.mcir_capi_errors(h).decode()
        L.mcir_capi_free(h)
        raise _lib.McirError(msg.strip() or "compilation failed")
    c = Compiled(graph, h)
    if graph.group is not None:   # a capture of torch.distributed collectives
        from .distributed import group_collective
        rank, pg = graph.group
        c.set_group(rank, group_collective(pg))
    return c
