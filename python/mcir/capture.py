"""Capture of PyTorch into an mcir Graph: every front end ends in one ATen
graph, lowered by one table (_Lowering.TABLE) into the ops of docs/ops.md.

    capture(module, inputs)            make_fx on the module (mode "aten")
    capture(module, inputs, mode="fx") torch.fx symbolic trace, then ATen
    capture_fx(gm, inputs)             any FX graph (TorchDynamo's), then ATen

The ATen graph runs once on the example inputs (_Values): every node's
shape and dtype, the Python values of size arithmetic (`B, T, C =
x.size()`), and the values of constant nodes (computed from parameters,
buffers and literals only: causal masks, positions, rotary tables) come
from that run. A constant that is not a view of a parameter becomes a weight
with its value, so a mask built with torch.full/triu/masked_fill is a
constant the rewrites can read.

Some ATen results are kept lazily rather than written as nodes (_Lazy):
a broadcast (`expand`), K/V heads repeated for grouped-query attention
(repeat_kv's expand + reshape, repeat_interleave) and the 3-D flattening
that ATen's batched matmul does. Attention over repeated heads becomes
attention over broadcast heads — Q [B, Hkv, G, N, d] against K/V [B, Hkv, 1,
N, d] — and never a copy; anything else that reads a lazy value gets it
materialised once.

An op mcir cannot take raises UnsupportedError naming the ATen op and the
line of the model's source that called it.
"""
import math
import operator

import numpy as np

from .graph import Graph
from ._lib import McirError


class UnsupportedError(McirError):
    """The model uses an op mcir cannot take (the message names it and its
    source line)."""


class TrainingError(McirError):
    """The model or its inputs are set up for training (a module in
    training mode, dropout or batch-norm updates, inputs that require
    grad): mcir compiles inference graphs."""


_DTYPES = None


def _dtype_table():
    global _DTYPES
    if _DTYPES is None:
        import torch
        _DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
                   torch.int64: "i64", torch.int32: "i32", torch.uint8: "u8",
                   torch.bool: "bool"}
    return _DTYPES


def mcir_dtype(t, where=""):
    m = _dtype_table()
    if t not in m:
        raise UnsupportedError("dtype %s%s: mcir takes float32, float16, bfloat16, int64, int32, "
                               "uint8 and bool tensors" % (t, where))
    return m[t]


def _numel(shape):
    k = 1
    for d in shape:
        k *= d
    return k


def _pair(v):
    return list(v) if isinstance(v, (list, tuple)) else [v, v]


def _is_int_dtype(dt):
    return dt in ("i64", "i32", "u8", "bool")


# ------------------------------------------------------------------ values

class _Values:
    """Runs an ATen GraphModule on concrete inputs and keeps, per node, what
    the lowering needs: shape and dtype of tensor results, Python values of
    non-tensor results, and the value of every constant node."""

    # results that do not depend on their tensor inputs' values
    VALUE_FREE = {"zeros_like", "ones_like", "full_like", "empty_like", "new_zeros",
                  "new_ones", "new_full", "new_empty", "fill", "scalar_tensor", "sym_size",
                  "sym_numel", "sym_stride", "size", "stride", "dim", "numel"}

    def __init__(self, gm, weights):
        self.gm = gm
        self.weights = weights      # placeholder index -> bound as a weight
        self.meta = {}              # node -> (shape, torch dtype) or list of them
        self.const = set()          # nodes whose value is known at capture time
        self.leaf = set()           # parameters/buffers (get_attr, bound placeholders)
        self.value = {}             # node -> value (constants, Python values)

    def run(self, args):
        import torch
        import torch.fx
        env = {}
        ph = 0
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                v = args[ph]
                if ph in self.weights or not isinstance(v, torch.Tensor):
                    self.const.add(n)
                    if isinstance(v, torch.Tensor):
                        self.leaf.add(n)
                ph += 1
            elif n.op == "get_attr":
                v = self.gm
                for part in n.target.split("."):
                    v = getattr(v, part)
                self.const.add(n)
                if isinstance(v, torch.Tensor):
                    self.leaf.add(n)
            elif n.op == "call_function":
                a = torch.fx.node.map_arg(n.args, lambda x: env[x])
                kw = torch.fx.node.map_arg(n.kwargs, lambda x: env[x])
                v = n.target(*a, **kw)
                ins = n.all_input_nodes
                op = _op_name(n)
                if op.rstrip("_") in RANDOM_OPS:
                    pass                    # never a constant
                elif all(i in self.const for i in ins) or op in self.VALUE_FREE:
                    self.const.add(n)
            elif n.op == "output":
                continue
            else:
                raise UnsupportedError("%s: FX op %s in an ATen graph" % (n.name, n.op))
            env[n] = v
            self.meta[n] = _meta_of(v)
            if not _has_tensor(v):
                self.value[n] = v
            elif n in self.leaf:
                self.value[n] = v           # the parameter itself: tied ones stay one
            elif n in self.const:
                self.value[n] = _keep(v)
        return self


_VIEWS = {"slice", "view", "_unsafe_view", "alias", "reshape", "expand", "select", "unsqueeze",
          "squeeze", "transpose", "t", "permute", "as_strided", "narrow", "diagonal", "unfold"}


def _copies(args, weights=()):
    """args with fresh copies of the tensors that are not weights: each
    trace runs the graph, and the in-place updates it makes (a cache, a
    counter) must change neither the caller's tensors nor the next
    trace's inputs."""
    import torch
    return tuple(x.clone() if isinstance(x, torch.Tensor) and i not in weights and
                 type(x).__name__ not in ("FakeTensor", "FunctionalTensor") else x
                 for i, x in enumerate(args))


class _Fixed:
    """A value to make an output of, given directly (not by its FX node)."""

    def __init__(self, v):
        self.v = v


def _has_tensor(v):
    import torch
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, (list, tuple)):
        return any(_has_tensor(x) for x in v)
    return False


def _meta_of(v):
    import torch
    if isinstance(v, torch.Tensor):
        return (list(v.shape), v.dtype)
    if isinstance(v, (list, tuple)):
        return [_meta_of(x) for x in v]
    return None


def _keep(v):
    """A constant's value as it is now: views stay views (of parameters,
    which eval does not change), other results are copied, so a later
    in-place op on the same tensor does not change what this node was."""
    import torch
    if isinstance(v, torch.Tensor):
        return v.detach() if v._is_view() else v.detach().clone()
    if isinstance(v, (list, tuple)):
        return type(v)(_keep(x) for x in v)
    return v


def _op_name(n):
    t = n.target
    if hasattr(t, "_schema"):
        return t._schema.name.split("::")[-1]
    if hasattr(t, "__name__"):
        return t.__name__
    return str(t)


# ops that draw random numbers: never constants, refused (dropout in
# training mode is what brings them into a model's graph)
RANDOM_OPS = {"bernoulli", "rand", "rand_like", "randn", "randn_like", "randint",
              "randint_like", "normal", "uniform", "exponential", "geometric", "cauchy",
              "log_normal", "multinomial", "randperm", "random", "poisson", "rrelu",
              "rrelu_with_noise"}


# ----------------------------------------------------------- lazy values

class _Lazy:
    """A tensor the capture has not written as a node yet."""
    materialised = None


class _Expanded(_Lazy):
    """base (shape bshape, same rank) broadcast to shape."""

    def __init__(self, base, bshape, shape, dtype):
        self.base, self.bshape, self.shape, self.dtype = base, list(bshape), list(shape), dtype


class _Grouped(_Lazy):
    """A tensor of logical shape L whose axis h (size A*G) is held split:
    base has shape L[:h] + [A, g] + L[h+1:], g = G (the real values, a view)
    or g = 1 (the same values for all G members: heads repeated for GQA)."""

    def __init__(self, base, shape, axis, a, G, g, dtype):
        self.base, self.shape, self.axis = base, list(shape), axis
        self.a, self.G, self.g, self.dtype = a, G, g, dtype

    @property
    def bshape(self):
        h = self.axis
        return self.shape[:h] + [self.a, self.g] + self.shape[h + 1:]


class _Flat(_Lazy):
    """src (a name or a _Grouped, shape src_shape) with its leading dims
    flattened to 3-D, as ATen's batched matmul views it."""

    def __init__(self, src, src_shape, shape, dtype):
        self.src, self.src_shape, self.shape, self.dtype = src, list(src_shape), list(shape), dtype


# --------------------------------------------------------------- lowering

_HERE = None


def _where(n):
    """The model's own line that made node n: the frame of its stack trace
    that called into torch (torch 1.13 writes the innermost frame first,
    torch 2 the outermost), outside torch and this package."""
    import os
    import torch
    global _HERE
    if _HERE is None:
        _HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
    lines = (getattr(n, "stack_trace", None) or n.meta.get("stack_trace") or "").splitlines()
    frames = []
    for i, line in enumerate(lines):
        line = line.strip()
        if line.startswith("File "):
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            frames.append((line, "" if code.startswith("File ") else code))
    if not torch.__version__.startswith("1."):
        frames.reverse()
    for line, code in frames:
        path = line.split('"')[1] if '"' in line else line
        if "/torch/" not in path and not os.path.abspath(path).startswith(_HERE):
            return " (%s%s)" % (line, ": " + code if code else "")
    return ""


_LOWER = {}


def _is_meta(v):
    return getattr(v, "device", None) is not None and getattr(v.device, "type", "") == "meta"


def lowers(*names):
    def deco(f):
        for nm in names:
            _LOWER[nm] = f
        return f
    return deco


VIEW_OPS = {"view", "_unsafe_view", "_reshape_alias", "reshape", "unsqueeze", "squeeze",
            "flatten", "expand", "t", "transpose", "permute", "slice", "select", "alias",
            "detach", "clone", "contiguous", "lift_fresh_copy", "_to_copy", "to", "narrow",
            "unflatten", "numpy_T", "split", "split_with_sizes", "chunk", "unbind"}
MOVE_OPS = {"t", "transpose", "permute", "numpy_T"}


class _Lowering:
    def __init__(self, gm, name, weights=(), dynamic=False):
        self.gm = gm
        self.g = Graph(name)
        self.g.origin = {}         # tensor name -> the fx node that made it (messages)
        self.dynamic = dynamic     # a capture of a dynamic one (dynamic.py): sizes as nodes
        self.g.input_args = []     # example-input index of each graph input
        self.weights = set(weights)
        self.env = {}              # fx node -> name, lazy value, Python value, list
        self.info = {}             # tensor name -> (shape, mcir dtype)
        self.by_tensor = {}        # (data_ptr, shape, stride, dtype) -> weight name
        self.keep = []             # tensors whose data_ptr keys by_tensor
        self.consts = {}           # (value, dtype) -> scalar weight name
        self.input_of = {}         # placeholder -> index in g.inputs
        self.mutated = {}          # placeholder -> its value after the in-place ops on it
        self.updated = {}          # in-place op node -> the node of the tensor it updated
        self.from_positions = set()   # dynamic: constant nodes computed from positions, kept as ops
        self.n = None

    # ------------------------------------------------------------ helpers
    def unsupported(self, what, n=None):
        n = n or self.n
        raise UnsupportedError("%s: %s is not supported by mcir%s" %
                               (n.name if n is not None else "graph", what,
                                _where(n) if n is not None else ""))

    def refuse_training(self, what):
        n = self.n
        raise TrainingError("%s: %s%s: mcir compiles inference graphs — call model.eval() and "
                            "run under torch.no_grad() or torch.inference_mode()" %
                            (n.name, what, _where(n)))

    def out_meta(self, i=None):
        m = self.vals.meta[self.n]
        if i is not None:
            m = m[i]
        if m is None or isinstance(m, list):
            self.unsupported("a node without one tensor result (%s)" % self.n.target)
        return list(m[0]), mcir_dtype(m[1], " (node %s)" % self.n.name)

    def shape(self, v):
        if isinstance(v, _Lazy):
            return v.shape
        return self.info[v][0]

    def dtype(self, v):
        if isinstance(v, _Lazy):
            return v.dtype
        return self.info[v][1]

    def emit(self, op, ins, shape, dtype, attrs=None, name=None):
        y = self.g.node(op, [self.m(i) for i in ins], name or self.n.name, attrs=attrs)
        self.info[y] = (list(shape), dtype)
        self.g.origin[y] = self.n
        return y

    def weight(self, base, dtype, shape, values):
        w = self.g.weight(base, dtype, shape, values)
        self.info[w] = (list(shape), dtype)
        self.g.origin[w] = self.n
        return w

    def tensor_weight(self, base, t):
        """A torch tensor as a weight; the same storage gives the same
        weight (tied parameters stay one)."""
        key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if t.data_ptr() and key in self.by_tensor:
            return self.by_tensor[key]
        w = self.weight(base, mcir_dtype(t.dtype, " (%s)" % base), list(t.shape), t)
        self.by_tensor[key] = w
        self.keep.append(t)
        return w

    def const(self, value, dtype):
        key = (type(value).__name__, value, dtype)
        if key not in self.consts:
            self.consts[key] = self.weight("const", dtype, [], [value])
        return self.consts[key]

    def is_weight(self, v):
        return isinstance(v, str) and v in self.g.values

    def operand(self, v, dtype):
        """A binary op's operand as a tensor of dtype: scalars become scalar
        weights, other dtypes are cast."""
        if isinstance(v, bool) or isinstance(v, (int, float)):
            return self.const(v, dtype)
        if isinstance(v, _Grouped):
            return v if v.dtype == dtype else self.cast_lazy(v, dtype)
        if not isinstance(v, (str, _Lazy)):
            self.unsupported("an operand of type %s" % type(v).__name__)
        v = self.m(v)
        if self.dtype(v) != dtype:
            v = self.emit("cast", [v], self.shape(v), dtype, {"to": dtype},
                          name=self.n.name + ".cast")
        return v

    def cast_lazy(self, v, dtype):
        b = self.emit("cast", [v.base], v.bshape, dtype, {"to": dtype}, name=self.n.name + ".cast")
        return _Grouped(b, v.shape, v.axis, v.a, v.G, v.g, dtype)

    def reshape(self, x, shape, name=None):
        x = self.m(x)
        if self.shape(x) == list(shape):
            return x
        if self.is_weight(x) and _numel(shape) <= 1 << 16:
            # a small constant reshaped stays a constant (masks: the rewrites
            # read their values)
            return self.weight(x, self.dtype(x), shape, self.g.values[x].reshape(shape))
        return self.emit("reshape", [x], shape, self.dtype(x), {"shape": list(shape)}, name=name)

    # ---------------------------------------------------- materialising
    def m(self, v):
        """A value as a tensor name (lazy values written out once)."""
        if not isinstance(v, _Lazy):
            return v
        if v.materialised is None:
            if isinstance(v, _Expanded):
                ones = [s if b == 1 and s != 1 else 1 for b, s in zip(v.bshape, v.shape)]
                w = self.weight("ones", v.dtype, ones, np.ones(ones))
                v.materialised = self.emit("mul", [v.base, w], v.shape, v.dtype,
                                           name=str(v.base) + ".expanded")
            elif isinstance(v, _Grouped):
                b = v.base
                if v.g != v.G:
                    full = v.shape[:v.axis] + [v.a, v.G] + v.shape[v.axis + 1:]
                    ones = [1] * len(full)
                    ones[v.axis + 1] = v.G
                    w = self.weight("ones", v.dtype, ones, np.ones(ones))
                    b = self.emit("mul", [b, w], full, v.dtype, name=str(v.base) + ".repeated")
                v.materialised = self.reshape(b, v.shape, name=str(v.base) + ".heads")
            else:
                v.materialised = self.reshape(self.m(v.src), v.shape, name=str(self.m(v.src)) + ".flat")
        return v.materialised

    def group_like(self, v, ref):
        """v (a name, a scalar or a _Grouped), broadcastable to ref's
        logical shape, in ref's split form: (operand, its g)."""
        if isinstance(v, _Grouped):
            if (v.axis, v.a, v.G) == (ref.axis, ref.a, ref.G) and len(v.shape) == len(ref.shape):
                return v.base, v.g
            v = self.m(v)
        if not isinstance(v, (str, _Lazy)):
            return v, 1
        v = self.m(v)
        s = self.shape(v)
        hv = ref.axis - (len(ref.shape) - len(s))
        if hv < 0:
            return v, 1                  # right-aligned below the head axis
        if s[hv] == 1:
            return self.reshape(v, s[:hv] + [1, 1] + s[hv + 1:], name=v + ".group"), 1
        if s[hv] == ref.a * ref.G:
            return self.reshape(v, s[:hv] + [ref.a, ref.G] + s[hv + 1:], name=v + ".group"), ref.G
        self.unsupported("an operand of shape %s against grouped heads %s" % (s, ref.shape))

    # ------------------------------------------------------------- run
    def run(self, example_inputs):
        import torch
        self.vals = _Values(self.gm, self.weights).run(list(example_inputs))
        ph = 0
        for n in self.gm.graph.nodes:
            self.n = n
            if n.op == "placeholder":
                x = example_inputs[ph]
                if isinstance(x, torch.Tensor) and x.dim() == 0 and not n.users:
                    self.env[n] = x       # a scalar read only as .item() (_ItemInterpreter)
                elif isinstance(x, torch.Tensor):
                    if ph in self.weights:
                        self.env[n] = self.tensor_weight(n.name, x)
                    else:
                        shape, dt = self.out_meta()
                        self.env[n] = self.g.input(n.name, dt, shape)
                        self.info[self.env[n]] = (shape, dt)
                        self.input_of[n] = len(self.g.inputs) - 1
                        self.g.input_args.append(ph)
                else:
                    self.env[n] = x
                ph += 1
            elif n.op == "get_attr":
                v = self.vals.value[n]
                self.env[n] = self.tensor_weight(n.target, v) if isinstance(v, torch.Tensor) else v
            elif n.op == "output":
                self.g.output_tree = self.outputs(n.args[0])
                for ph, y in self.mutated.items():
                    # an input updated in place (a static KV cache): its new
                    # value is one more output, which Compiled.__call__
                    # writes over the caller's tensor
                    self.n = ph
                    k = self.outputs(_Fixed(y)).i
                    self.g.mutations.append((self.input_of[ph], k))
            elif n in self.vals.value and not _has_tensor(self.vals.value[n]):
                self.env[n] = self.vals.value[n]        # sizes, shape arithmetic
            elif n in self.vals.const and self.dynamic and self.positions(n):
                v = self.vals.value[n]
                self.env[n] = self.emit("arange", [], [v.numel()], "i64", {"end": v.numel()})
                self.from_positions.add(n)
            elif n in self.vals.const and self.dynamic and _has_tensor(self.vals.value[n]) and \
                    any(i in self.from_positions for i in n.all_input_nodes):
                # computed from positions (T5's relative position bias): ops
                # of the graph, so that their sizes follow the dim too —
                # where mcir has the op; else folded as any constant
                # (transformers' vmapped mask functions: new_ones)
                try:
                    self.env[n] = self.call(n)
                    self.from_positions.add(n)
                except UnsupportedError:
                    self.n = n
                    self.env[n] = self.folded(n, self.vals.value[n])

            elif n in self.vals.const and not n.users and _is_meta(self.vals.value[n]):
                self.env[n] = _UNUSED          # an unused buffer on the meta device (transformers' TP)
            elif n in self.vals.const and self.fold(n):
                self.env[n] = self.folded(n, self.vals.value[n])
            else:
                self.env[n] = self.call(n)
        self.g.prune()
        self.g.keep = self.keep
        return self.g

    def positions(self, n):
        """Whether constant node n is arange(0, N) of int64 (positions):
        in a dynamic capture an arange node, whose end can name a dim."""
        import torch
        v = self.vals.value[n]
        if _op_name(n) != "arange" or not isinstance(v, torch.Tensor) or v.dim() != 1 or \
                v.dtype != torch.int64 or v.numel() < 1:
            return False
        return bool(torch.equal(v, torch.arange(v.numel())))

    def causal_mask(self, shape):
        """The additive causal mask of an [N, N] score as nodes (0 where
        key j <= query i, -inf above): arange(N) against itself as a column,
        so a dynamic capture's N can be a dim (a weight could not)."""
        nq = shape[-1]
        nm = self.n.name
        pos = self.emit("arange", [], [nq], "i64", {"end": nq}, name=nm + ".pos")
        rows = self.emit("reshape", [pos], [nq, 1], "i64", {"shape": [nq, 1]}, name=nm + ".rows")
        later = self.emit("greater", [pos, rows], [nq, nq], "bool", name=nm + ".later")
        return self.emit("where", [later, self.const(float("-inf"), "f32"), self.const(0.0, "f32")],
                         [nq, nq], "f32", name=nm + ".causal")

    def fold(self, n):
        """Whether constant node n becomes a weight of its value: yes,
        unless it only moves a parameter's data (t, transpose, a large
        view), which stays an op of the graph."""
        op = _op_name(n)
        if op not in VIEW_OPS:
            return True
        if not all(i in self.vals.leaf for i in n.all_input_nodes):
            return True
        if op in MOVE_OPS:
            return False
        m = self.vals.meta[n]
        return isinstance(m, tuple) and _numel(m[0]) <= 1 << 16

    def folded(self, n, v):
        import torch
        if isinstance(v, torch.Tensor):
            return self.tensor_weight(n.name, v.contiguous())
        if isinstance(v, (list, tuple)):
            return [self.folded(n, x) for x in v]
        return v

    def outputs(self, tree):
        import torch.fx
        if isinstance(tree, (list, tuple)):
            return type(tree)(self.outputs(x) for x in tree)
        if isinstance(tree, dict):
            return {k: self.outputs(v) for k, v in tree.items()}
        if isinstance(tree, _Fixed):
            v = tree.v
        elif not isinstance(tree, torch.fx.Node):
            return tree
        else:
            v = self.env[tree]
        if not isinstance(v, (str, _Lazy)):
            return v
        if not isinstance(tree, _Fixed):
            self.n = tree
        name = self.m(v)
        if name in self.g.outputs or name in self.g.values or \
                any(i["name"] == name for i in self.g.inputs):
            shape, dt = self.shape(name), self.dtype(name)
            name = self.emit("scale", [name], shape, dt, {"value": 1.0}, name=name + ".out") \
                if not _is_int_dtype(dt) else \
                self.emit("reshape", [name], shape, dt, {"shape": shape}, name=name + ".out")
        self.g.outputs.append(name)
        return _Out(len(self.g.outputs) - 1)

    def viewed(self, node):
        """The node whose tensor node is (through views that change nothing:
        torch 1.13 writes x[:, i] = v as index_put_ on slice(x, 0, 0, max)).
        An in-place update through another view of a graph input cannot be
        written back: refused."""
        import torch.fx
        v = node
        while isinstance(v, torch.fx.Node) and v.op == "call_function" and v.args and \
                isinstance(v.args[0], torch.fx.Node) and _op_name(v) in _VIEWS:
            base = v.args[0]
            if self.env.get(v) != self.env.get(base) or not isinstance(self.env.get(v), str):
                root = base
                while root in self.updated or (root.op == "call_function" and root.args and
                                               isinstance(root.args[0], torch.fx.Node)
                                               and _op_name(root) in _VIEWS):
                    root = self.updated.get(root, root.args[0])
                if root in self.input_of:
                    self.unsupported("an in-place %s of a view (%s) of input %s" %
                                     (_op_name(self.n), _op_name(v), root.name))
                return node
            v = base
        return v

    def args_of(self, n):
        import torch.fx
        conv = lambda x: self.env[x]  # noqa: E731
        return (list(torch.fx.node.map_arg(n.args, conv)),
                dict(torch.fx.node.map_arg(n.kwargs, conv)))

    def call(self, n):
        import torch.fx
        if n.target is operator.getitem:
            seq, idx = self.args_of(n)[0]
            if isinstance(seq, (list, tuple)):
                return seq[idx]
            self.unsupported("indexing of %s" % type(seq).__name__)
        op = _op_name(n)
        args, kw = self.args_of(n)
        for a in n.all_input_nodes:
            if self.env.get(a) is _UNUSED:
                self.unsupported("%s reading %s, an output of %s mcir does not compute" %
                                 (op, a.name, a.args[0].target if a.args else a.target))
        self.op = op
        if op.endswith("_") and not op.startswith("_") and op[:-1] in _LOWER:
            self.op = op = op[:-1]
            # in place (relu_, add_, mul_): the functional op; later readers
            # of the mutated tensor read the result
            y = _LOWER[op](self, args, kw)
            if isinstance(n.args[0], torch.fx.Node):
                # the tensor updated: the node named, or the tensor an earlier
                # in-place op (whose result names it here) updated
                v = self.viewed(n.args[0])
                root = self.updated.get(v, v)
                self.updated[n] = root
                # every node that names the tensor reads the new value
                for a in [n.args[0], v, root] + [k for k, r in self.updated.items() if r is root]:
                    self.env[a] = y
                if root in self.input_of:   # the caller's tensor: written back
                    self.mutated[root] = y
            return y
        f = _LOWER.get(op)
        if f is None:
            self.unsupported("aten::%s" % op)
        return f(self, args, kw)

    # ---------------------------------------------------------- schema
    def arg_node(self, name):
        """The FX node passed as the schema argument called name (None if
        it is not a node)."""
        import torch.fx
        for i, a in enumerate(self.n.target._schema.arguments):
            if a.name == name:
                v = self.n.args[i] if i < len(self.n.args) and not a.kwarg_only \
                    else self.n.kwargs.get(name)
                return v if isinstance(v, torch.fx.Node) else None
        return None

    def bind(self, args, kw):
        """Arguments by schema name."""
        sch = self.n.target._schema
        out = {}
        for i, a in enumerate(sch.arguments):
            if i < len(args) and not a.kwarg_only:
                out[a.name] = args[i]
            elif a.name in kw:
                out[a.name] = kw[a.name]
            elif a.has_default_value():
                out[a.name] = a.default_value
            else:
                out[a.name] = None
        return out


class _Typed:
    """A dict subclass in the output structure (transformers' ModelOutput):
    its class, and its items as a plain dict."""

    def __init__(self, cls, items):
        self.cls, self.items = cls, items

    def __repr__(self):
        return "%s(%r)" % (self.cls.__name__, self.items)


class _Out:
    """Position of a tensor in Graph.outputs, inside the output structure."""

    def __init__(self, i):
        self.i = i

    def __repr__(self):
        return "_Out(%d)" % self.i


_UNUSED = object()   # an output of a multi-output op mcir does not compute


# ------------------------------------------------------ the lowering table

@lowers("clone", "contiguous", "alias", "detach", "lift_fresh_copy", "lift_fresh",
        "alias_copy", "detach_copy", "_assert_tensor_metadata")
def _same(L, args, kw):
    return args[0]


def _process_group(L, name, size=None):
    """The process group of a functional collective, as the graph's: one
    group per graph (its size the graph's ranks, this process's rank in it
    the rank the graph runs)."""
    import torch.distributed as dist
    from .distributed import resolve_group
    try:
        pg = resolve_group(str(name))
    except Exception as e:   # noqa: BLE001 — the group's name is not known here
        L.unsupported("a collective over process group %r (%s)" % (name, e))
    ranks = dist.get_world_size(pg)
    if L.g.group is not None and L.g.group[1] is not pg:
        L.unsupported("collectives over two process groups (%r and another): mcir runs one "
                      "group per graph" % (name,))
    if size is not None and int(size) != ranks:
        L.unsupported("a collective of group size %s over a group of %d ranks" % (size, ranks))
    L.g.group = (dist.get_rank(pg), pg)
    L.g.ranks = ranks
    return ranks


_REDUCE = {"sum": "sum", "max": "max", "min": "min", "avg": "avg"}


def _reduction(L, op):
    red = _REDUCE.get(str(op).lower())
    if red is None:
        L.unsupported("a collective with reduction %r (mcir has sum, avg, max, min)" % (op,))
    return red


def _averaged(L, y, red, ranks):
    if red != "avg":
        return y
    dt = L.dtype(y)
    return L.emit("mul", [y, L.const(1.0 / ranks, dt)], L.shape(y), dt, name=L.n.name + ".avg")


@lowers("all_reduce")
def _all_reduce(L, args, kw):
    x, op, group = args[0], args[1], args[2]
    ranks = _process_group(L, group)
    red = _reduction(L, op)
    y = L.emit("all_reduce", [x], L.shape(x), L.dtype(x), {"op": "sum" if red == "avg" else red})
    return _averaged(L, y, red, ranks)


@lowers("all_gather_into_tensor")
def _all_gather(L, args, kw):
    x, size, group = args[0], args[1], args[2]
    ranks = _process_group(L, group, size)
    shape = list(L.shape(x))
    if not shape:
        L.unsupported("all_gather of a 0-d tensor")
    shape[0] *= ranks
    return L.emit("all_gather", [x], shape, L.dtype(x), {"axis": 0})


@lowers("reduce_scatter_tensor")
def _reduce_scatter(L, args, kw):
    x, op, size, group = args[0], args[1], args[2], args[3]
    ranks = _process_group(L, group, size)
    red = _reduction(L, op)
    if red not in ("sum", "avg"):
        L.unsupported("reduce_scatter with reduction %r (mcir's is a sum)" % (op,))
    shape = list(L.shape(x))
    if not shape or shape[0] % ranks:
        L.unsupported("reduce_scatter of %s over %d ranks (dim 0 does not divide)" %
                      (shape, ranks))
    shape[0] //= ranks
    y = L.emit("reduce_scatter", [x], shape, L.dtype(x), {"axis": 0, "op": "sum"})
    return _averaged(L, y, red, ranks)


@lowers("wait_tensor")
def _wait(L, args, kw):
    return args[0]   # mcir's collectives are complete when their node is


@lowers(*RANDOM_OPS)
def _random(L, args, kw):
    L.refuse_training("aten::%s draws random numbers (dropout in training mode?)" % L.op)


@lowers("dropout", "feature_dropout", "alpha_dropout")
def _dropout(L, args, kw):
    p, train = args[1], args[2]
    if train and p > 0:
        L.refuse_training("dropout in training mode")
    return args[0]


@lowers("native_dropout")
def _native_dropout(L, args, kw):
    p, train = args[1], args[2]
    if train and p > 0:
        L.refuse_training("dropout in training mode")
    return [args[0], _UNUSED]


@lowers("_to_copy", "to", "_to_dtype")
def _to_copy(L, args, kw):
    x = args[0]
    _, dt = L.out_meta()
    if L.dtype(x) == dt:
        return x
    if isinstance(x, _Grouped):
        return L.cast_lazy(x, dt)
    return L.emit("cast", [x], L.shape(x), dt, {"to": dt})


@lowers("view", "_unsafe_view", "_reshape_alias", "reshape", "unsqueeze", "squeeze",
        "flatten", "unflatten", "view_copy", "squeeze_copy", "unsqueeze_copy")
def _view(L, args, kw):
    x = args[0]
    shape, dt = L.out_meta()
    if isinstance(x, _Expanded):
        E, B = x.shape, x.bshape
        for h in range(len(E) - 1):
            if (E[:h] == shape[:h] and E[h + 2:] == shape[h + 1:] and
                    len(shape) == len(E) - 1 and shape[h] == E[h] * E[h + 1] and
                    B[h + 1] == 1 and E[h + 1] > 1 and
                    all(B[i] == E[i] for i in range(len(E)) if i != h + 1)):
                # repeat_kv / repeat_interleave: [.., A, G(broadcast), ..] -> [.., A*G, ..]
                return _Grouped(x.base, shape, h, E[h], E[h + 1], 1, dt)
    if isinstance(x, _Grouped):
        if shape == x.shape:
            return x
        if len(shape) == 3 and shape[1:] == x.shape[-2:] and shape[0] == _numel(x.shape[:-2]) \
                and x.axis < len(x.shape) - 2:
            return _Flat(x, x.shape, shape, dt)
    if isinstance(x, _Flat) and shape == x.src_shape:
        return x.src
    if isinstance(x, str):
        s = L.shape(x)
        if len(shape) == 3 and len(s) > 3 and s[-2:] == shape[-2:] and _numel(s[:-2]) == shape[0]:
            return _Flat(x, s, shape, dt)          # a batched matmul's view
    return L.reshape(x, shape)


@lowers("as_strided", "as_strided_copy")
def _as_strided(L, args, kw):
    """as_strided of a contiguous tensor (and as_strided_, in place): each
    output element's position in the input, computed now; the identity
    order is a reshape (timm's pooling head restrides [B, C, 1, 1] to
    channels-last: the same values), any other one a gather of the
    flattened input by those positions (a constant)."""
    import numpy as np
    x, size, stride = args[0], [int(v) for v in args[1]], [int(v) for v in args[2]]
    offset = args[3] if len(args) > 3 else kw.get("storage_offset")
    src = L.n.args[0]
    meta = getattr(src, "meta", {})
    val, tm = meta.get("val"), meta.get("tensor_meta")   # torch 2 / torch 1.13's make_fx
    if val is not None and hasattr(val, "is_contiguous"):
        contiguous, base = val.is_contiguous(), int(val.storage_offset())
    elif tm is not None:   # no storage offset recorded: an offset given is read from 0
        shp, want, acc = list(tm.shape), [], 1
        for e in reversed(shp):
            want.insert(0, acc)
            acc *= e
        contiguous = all(e == 1 or int(a) == b for e, a, b in zip(shp, tm.stride, want))
        base = 0
    else:
        contiguous = False
    if not contiguous:
        L.unsupported("as_strided of a tensor whose layout is not known to be contiguous")
    if len(size) != len(stride):
        L.unsupported("as_strided with %d sizes and %d strides" % (len(size), len(stride)))
    start = (base if offset is None else int(offset)) - base
    shape, dt = L.out_meta()
    n = _numel(L.shape(x))
    pos = np.full(size, start, dtype=np.int64) if size else np.array(start, dtype=np.int64)
    for k, (e, st) in enumerate(zip(size, stride)):
        ax = [1] * len(size)
        ax[k] = e
        pos = pos + (np.arange(e, dtype=np.int64) * st).reshape(ax)
    if pos.size and (pos.min() < 0 or pos.max() >= n):
        L.unsupported("as_strided reaching outside its input (positions %d..%d of %d)" %
                      (int(pos.min()), int(pos.max()), n))
    flat = pos.reshape(-1)
    if np.array_equal(flat, np.arange(flat.size)) and flat.size == n:
        return L.reshape(x, shape)
    xs = L.reshape(x, [n], name=L.n.name + ".flat")
    idx = L.weight(L.n.name + ".positions", "i64", [int(flat.size)], flat)
    g = L.emit("gather", [xs, idx], [int(flat.size)], dt, {"axis": 0}, name=L.n.name + ".gather")
    return L.reshape(g, shape)


@lowers("expand", "expand_copy", "broadcast_to")
def _expand(L, args, kw):
    x = args[0]
    shape, dt = L.out_meta()
    if L.shape(x) == shape:
        return x
    if isinstance(x, _Expanded):
        base, bshape = x.base, x.bshape
    else:
        base = L.m(x)
        bshape = L.shape(base)
    if len(bshape) < len(shape):
        bshape = [1] * (len(shape) - len(bshape)) + bshape
        base = L.reshape(base, bshape, name=L.n.name + ".rank")
    if bshape == shape:
        return base
    return _Expanded(base, bshape, shape, dt)


@lowers("t", "transpose", "permute", "numpy_T")
def _transpose(L, args, kw):
    x = args[0]
    shape, _ = L.out_meta()
    r = len(shape)
    op = L.op
    if op in ("t", "numpy_T"):
        perm = list(range(r))[::-1]
    elif op == "transpose":
        perm = list(range(r))
        d0, d1 = args[1] % r if r else 0, args[2] % r if r else 0
        perm[d0], perm[d1] = perm[d1], perm[d0]
    else:
        perm = [p % r for p in args[1]]
    if perm == list(range(r)):
        return x
    if isinstance(x, _Grouped):
        h = x.axis
        bperm = []
        for p in perm:
            bperm += [p] if p < h else ([h, h + 1] if p == h else [p + 1])
        b = L.emit("transpose", [x.base], [x.bshape[p] for p in bperm], x.dtype,
                   {"perm": bperm})
        return _Grouped(b, shape, perm.index(h), x.a, x.G, x.g, x.dtype)
    if isinstance(x, _Expanded):
        b = L.emit("transpose", [x.base], [x.bshape[p] for p in perm], x.dtype, {"perm": perm})
        return _Expanded(b, [x.bshape[p] for p in perm], shape, x.dtype)
    return L.emit("transpose", [x], shape, L.dtype(L.m(x)), {"perm": perm})


@lowers("slice", "slice_copy", "narrow")
def _slice(L, args, kw):
    x = L.m(args[0])
    s = L.shape(x)
    if L.op == "narrow":
        dim, start, length = args[1], args[2], args[3]
        end, step = start + length, 1
    else:
        dim = args[1] if len(args) > 1 else kw.get("dim", 0)
        start = args[2] if len(args) > 2 else kw.get("start")
        end = args[3] if len(args) > 3 else kw.get("end")
        step = args[4] if len(args) > 4 else kw.get("step", 1)
    dim %= len(s)
    start, end, step = slice(start, end, step).indices(s[dim])
    if (start, end, step) == (0, s[dim], 1):
        return x
    shape, dt = L.out_meta()
    return L.emit("slice", [x], shape, dt, {"axis": dim, "start": start, "end": end,
                                            "step": step})


@lowers("select", "select_copy")
def _select(L, args, kw):
    x = L.m(args[0])
    s = L.shape(x)
    dim = args[1] % len(s)
    i = args[2] % s[dim]
    part = s[:dim] + [1] + s[dim + 1:]
    y = L.emit("slice", [x], part, L.dtype(x), {"axis": dim, "start": i, "end": i + 1,
                                                "step": 1}, name=L.n.name + ".slice")
    shape, _ = L.out_meta()
    return L.reshape(y, shape)


@lowers("unbind")
def _unbind(L, args, kw):
    x = L.m(args[0])
    s = L.shape(x)
    dim = (args[1] if len(args) > 1 else kw.get("dim", 0)) % len(s)
    outs = []
    for i in range(s[dim]):
        y = L.emit("slice", [x], s[:dim] + [1] + s[dim + 1:], L.dtype(x),
                   {"axis": dim, "start": i, "end": i + 1, "step": 1},
                   name="%s.%d" % (L.n.name, i))
        outs.append(L.reshape(y, s[:dim] + s[dim + 1:]))
    return outs


@lowers("split", "split_with_sizes", "chunk")
def _split(L, args, kw):
    x = L.m(args[0])
    s = L.shape(x)
    dim = (args[2] if len(args) > 2 else kw.get("dim", 0)) % len(s)
    size, amount = s[dim], args[1]
    if L.op == "chunk":
        step = -(-size // amount)
        sizes = [min(step, size - i) for i in range(0, size, step)]
    elif isinstance(amount, int):
        sizes = [min(amount, size - i) for i in range(0, size, amount)]
    else:
        sizes = list(amount)
    if len(sizes) == 1:
        return [x]
    outs = L.g.node("split", [x], L.n.name, attrs={"axis": dim, "sizes": sizes},
                    n_outputs=len(sizes))
    for o, k in zip(outs, sizes):
        L.info[o] = (s[:dim] + [k] + s[dim + 1:], L.dtype(x))
    return outs


@lowers("cat", "concat")
def _cat(L, args, kw):
    shape, dt = L.out_meta()
    dim = args[1] if len(args) > 1 else kw.get("dim", 0)
    ins = [L.operand(t, dt) for t in args[0] if _numel(L.shape(L.m(t))) > 0]
    if len(ins) == 1:
        return ins[0]
    return L.emit("concat", ins, shape, dt, {"axis": dim % len(shape)})


@lowers("zeros_like", "ones_like", "full_like")
def _full_like(L, args, kw):
    """A constant of x's shape (T5's relative position buckets, computed
    from positions in a dynamic capture): where(x == x, v, v), whose shape
    follows x's (a weight's could not)."""
    shape, dt = L.out_meta()
    v = {"zeros_like": 0, "ones_like": 1}.get(L.op)
    if v is None:
        v = args[1] if len(args) > 1 else kw.get("fill_value")
    if not isinstance(v, (int, float, bool)):
        L.unsupported("%s with a fill value of type %s" % (L.op, type(v).__name__))
    x = L.m(args[0])
    same = L.emit("equal", [x, x], L.shape(x), "bool", name=L.n.name + ".all")
    c = L.const(v if dt in ("f32", "f16", "bf16") else int(v), dt)
    return L.emit("where", [same, c, c], shape, dt)


@lowers("roll")
def _roll(L, args, kw):
    """torch.roll (Swin's shifted windows): per dim, the last `shift`
    elements moved to the front: a concat of two slices."""
    shape, dt = L.out_meta()
    shifts = args[1] if len(args) > 1 else kw.get("shifts")
    dims = args[2] if len(args) > 2 else kw.get("dims", [])
    shifts = list(shifts) if isinstance(shifts, (list, tuple)) else [shifts]
    dims = list(dims) if isinstance(dims, (list, tuple)) else [dims]
    x = L.m(args[0])
    if not dims:   # over the flattened tensor
        flat = L.reshape(x, [_numel(shape)], name=L.n.name + ".flat")
        return L.reshape(_roll_axis(L, flat, [_numel(shape)], 0, shifts[0], dt), shape)
    if len(shifts) != len(dims):
        L.unsupported("roll with %d shifts for %d dims" % (len(shifts), len(dims)))
    for sh, d in zip(shifts, dims):
        x = _roll_axis(L, x, shape, d % len(shape), sh, dt)
    return x


def _roll_axis(L, x, shape, d, shift, dt):
    n = shape[d]
    s = shift % n if n else 0
    if s == 0:
        return x
    head = L.emit("slice", [x], shape[:d] + [s] + shape[d + 1:], dt,
                  {"axis": d, "start": n - s, "end": n, "step": 1}, name=L.n.name + ".tail")
    tail = L.emit("slice", [x], shape[:d] + [n - s] + shape[d + 1:], dt,
                  {"axis": d, "start": 0, "end": n - s, "step": 1}, name=L.n.name + ".head")
    return L.emit("concat", [head, tail], shape, dt, {"axis": d})


@lowers("constant_pad_nd")
def _constant_pad(L, args, kw):
    """F.pad with a constant: per dim (from the last), a slice for a
    negative pad and a concat with a constant block for a positive one."""
    shape, dt = L.out_meta()
    pad = list(args[1] if len(args) > 1 else kw.get("pad"))
    value = args[2] if len(args) > 2 else kw.get("value", 0)
    value = 0 if value is None else value
    x = L.m(args[0])
    s = list(L.shape(x))
    for j in range(len(pad) // 2):
        d = len(s) - 1 - j
        lo, hi = pad[2 * j], pad[2 * j + 1]
        if lo < 0 or hi < 0:
            start, end = max(0, -lo), s[d] - max(0, -hi)
            s2 = s[:d] + [end - start] + s[d + 1:]
            x = L.emit("slice", [x], s2, dt, {"axis": d, "start": start, "end": end, "step": 1},
                       name=L.n.name + ".crop")
            s = s2
        parts = []
        for w in (max(0, lo), None, max(0, hi)):
            if w is None:
                parts.append(x)
            elif w > 0:
                bs = s[:d] + [w] + s[d + 1:]
                if _numel(bs) > 1 << 20:
                    L.unsupported("constant_pad_nd adding %d elements" % _numel(bs))
                parts.append(L.weight(L.n.name + ".fill", dt, bs, np.full(bs, value)))
        if len(parts) > 1:
            s = s[:d] + [s[d] + max(0, lo) + max(0, hi)] + s[d + 1:]
            x = L.emit("concat", parts, s, dt, {"axis": d}, name=L.n.name + ".pad%d" % d)
    if s != shape:
        L.unsupported("constant_pad_nd to %s (computed %s)" % (shape, s))
    return x


@lowers("stack")
def _stack(L, args, kw):
    shape, dt = L.out_meta()
    dim = (args[1] if len(args) > 1 else kw.get("dim", 0)) % len(shape)
    ins = []
    for t in args[0]:
        t = L.operand(t, dt)
        s = L.shape(t)
        ins.append(L.reshape(t, s[:dim] + [1] + s[dim:]))
    return L.emit("concat", ins, shape, dt, {"axis": dim})


# ------------------------------------------------------------ elementwise

_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "pow": "pow",
           "maximum": "max", "minimum": "min", "max": "max", "min": "min",
           "remainder": "mod", "fmod": "mod", "bitwise_and": "bitwise_and",
           "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
           "logical_and": "bitwise_and", "logical_or": "bitwise_or",
           "logical_xor": "bitwise_xor", "__and__": "bitwise_and", "__or__": "bitwise_or",
           "__xor__": "bitwise_xor", "bitwise_left_shift": "left_shift",
           "bitwise_right_shift": "right_shift", "__lshift__": "left_shift",
           "__rshift__": "right_shift"}
_COMPARE = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
            "gt": "greater", "ge": "greater_equal"}


def _binary(L, op, a, b, dt, attrs=None):
    """op on a and b in dtype dt (the result's, or the comparison's common
    dtype); a _Grouped operand keeps its split heads."""
    shape, out_dt = L.out_meta()
    # a broadcast operand whose base broadcasts to the same result needs no
    # copy: the op broadcasts it
    for which in (0, 1):
        v, other = (a, b) if which == 0 else (b, a)
        if isinstance(v, _Expanded):
            os_ = L.shape(other) if isinstance(other, (str, _Lazy)) else []
            try:
                fits = list(np.broadcast_shapes(tuple(v.bshape), tuple(os_))) == shape
            except ValueError:
                fits = False
            if fits:
                a, b = (v.base, b) if which == 0 else (a, v.base)
    ga = a if isinstance(a, _Grouped) else (b if isinstance(b, _Grouped) else None)
    if ga is not None and len(shape) == len(ga.shape):
        xa, g1 = L.group_like(a, ga)
        xb, g2 = L.group_like(b, ga)
        g = max(g1, g2)
        out = shape[:ga.axis] + [ga.a, g] + shape[ga.axis + 1:]
        y = L.emit(op, [L.operand(xa, dt), L.operand(xb, dt)], out, out_dt, attrs)
        return _Grouped(y, shape, ga.axis, ga.a, ga.G, g, out_dt)
    return L.emit(op, [L.operand(a, dt), L.operand(b, dt)], shape, out_dt, attrs)


def _common_dtype(L, a, b):
    import torch
    rev = {v: k for k, v in _dtype_table().items()}

    def tdt(v):
        if isinstance(v, bool):
            return torch.bool
        if isinstance(v, int):
            return torch.int64
        if isinstance(v, float):
            return torch.float32
        return rev[L.dtype(v)]
    ta, tb = tdt(a), tdt(b)
    if isinstance(a, (int, float)) and not isinstance(b, (int, float)):
        ta = tb if (ta.is_floating_point == tb.is_floating_point) else ta
    if isinstance(b, (int, float)) and not isinstance(a, (int, float)):
        tb = ta if (ta.is_floating_point == tb.is_floating_point) else tb
    return mcir_dtype(torch.promote_types(ta, tb))


@lowers(*_BINARY)
def _lower_binary(L, args, kw):
    op = L.op
    a, b = args[0], args[1]
    alpha = kw.get("alpha", args[2] if len(args) > 2 and op in ("add", "sub") else 1)
    if alpha != 1:
        if not isinstance(b, (int, float)):
            _, dt = L.out_meta()
            b = L.emit("mul", [L.operand(b, dt), L.const(alpha, dt)], L.shape(L.m(b)), dt,
                       name=L.n.name + ".alpha")
        else:
            b = b * alpha
    _, dt = L.out_meta()
    mop = _BINARY[op]
    attrs = None
    if op == "fmod":
        attrs = {"fmod": True}
    if op == "div":
        mode = kw.get("rounding_mode", args[2] if len(args) > 2 else None)
        if mode == "floor" or (mode is None and _is_int_dtype(dt)):
            self_dt = _common_dtype(L, a, b)
            if mode == "floor" or _is_int_dtype(self_dt):
                L.unsupported("aten::div with rounding_mode %r" % mode)
        elif mode == "trunc" and not _is_int_dtype(dt):
            L.unsupported("aten::div with rounding_mode 'trunc' on floats")
    if mop in ("add", "mul", "max", "min") and isinstance(a, (int, float)):
        a, b = b, a
    return _binary(L, mop, a, b, dt, attrs)


@lowers("rsub")
def _rsub(L, args, kw):
    alpha = kw.get("alpha", args[2] if len(args) > 2 else 1)
    if alpha != 1:
        L.unsupported("aten::rsub with alpha")
    _, dt = L.out_meta()
    return _binary(L, "sub", args[1], args[0], dt)


@lowers(*_COMPARE)
def _compare(L, args, kw):
    a, b = args[0], args[1]
    return _binary(L, _COMPARE[L.op], a, b, _common_dtype(L, a, b))


_UNARY = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "log": "log",
          "erf": "erf", "sqrt": "sqrt", "rsqrt": "rsqrt", "neg": "neg", "silu": "silu",
          "cos": "cos", "sin": "sin",
          "reciprocal": "reciprocal", "bitwise_not": "bitwise_not",
          "logical_not": "bitwise_not"}


@lowers(*_UNARY)
def _unary(L, args, kw):
    x = args[0]
    shape, dt = L.out_meta()
    op = _UNARY[L.op]
    if op == "bitwise_not" and L.op == "logical_not" and L.dtype(x) != "bool":
        x = L.emit("not_equal", [L.m(x), L.const(0, L.dtype(x))], shape, "bool",
                   name=L.n.name + ".bool")
    if isinstance(x, _Grouped):
        y = L.emit(op, [x.base], x.bshape, dt)
        return _Grouped(y, shape, x.axis, x.a, x.G, x.g, dt)
    return L.emit(op, [L.operand(x, dt)], shape, dt)


@lowers("gelu")
def _gelu(L, args, kw):
    shape, dt = L.out_meta()
    return L.emit("gelu", [args[0]], shape, dt,
                  {"approximate": kw.get("approximate", args[1] if len(args) > 1 else "none")})


@lowers("abs")
def _abs(L, args, kw):
    shape, dt = L.out_meta()
    x = L.m(args[0])
    n = L.emit("neg", [x], shape, dt, name=L.n.name + ".neg")
    return L.emit("max", [x, n], shape, dt)


def _clamp(L, x, lo, hi):
    shape, dt = L.out_meta()
    y = L.m(x)
    if lo is not None:
        y = L.emit("max", [y, L.operand(lo, dt)], shape, dt, name=L.n.name + ".lo")
    if hi is not None:
        y = L.emit("min", [y, L.operand(hi, dt)], shape, dt, name=L.n.name + ".hi")
    return y


@lowers("clamp", "clip")
def _lower_clamp(L, args, kw):
    lo = args[1] if len(args) > 1 else kw.get("min")
    hi = args[2] if len(args) > 2 else kw.get("max")
    return _clamp(L, args[0], lo, hi)


@lowers("clamp_min")
def _clamp_min(L, args, kw):
    return _clamp(L, args[0], args[1], None)


@lowers("clamp_max")
def _clamp_max(L, args, kw):
    return _clamp(L, args[0], None, args[1])


@lowers("hardtanh")
def _hardtanh(L, args, kw):
    return _clamp(L, args[0], args[1] if len(args) > 1 else -1.0,
                  args[2] if len(args) > 2 else 1.0)


@lowers("relu6")
def _relu6(L, args, kw):
    return _clamp(L, args[0], 0.0, 6.0)


def _relu6_of_x_plus_3(L, x, dt, shape):
    # PyTorch's CPU kernels: min(max(x + 3, 0), 6), then / 6
    y = L.emit("add", [x, L.const(3.0, dt)], shape, dt, name=L.n.name + ".add3")
    y = L.emit("max", [y, L.const(0.0, dt)], shape, dt, name=L.n.name + ".max0")
    return L.emit("min", [y, L.const(6.0, dt)], shape, dt, name=L.n.name + ".min6")


@lowers("hardsigmoid")
def _hardsigmoid(L, args, kw):
    shape, dt = L.out_meta()
    y = _relu6_of_x_plus_3(L, L.m(args[0]), dt, shape)
    return L.emit("div", [y, L.const(6.0, dt)], shape, dt)


@lowers("hardswish")
def _hardswish(L, args, kw):
    shape, dt = L.out_meta()
    x = L.m(args[0])
    y = _relu6_of_x_plus_3(L, x, dt, shape)
    y = L.emit("mul", [x, y], shape, dt, name=L.n.name + ".mul")
    return L.emit("div", [y, L.const(6.0, dt)], shape, dt)


@lowers("where")
def _where_op(L, args, kw):
    shape, dt = L.out_meta()
    c = L.operand(args[0], "bool")
    return L.emit("where", [c, L.operand(args[1], dt), L.operand(args[2], dt)], shape, dt)


@lowers("masked_fill")
def _masked_fill(L, args, kw):
    x, mask, value = args[0], args[1], args[2]
    shape, dt = L.out_meta()
    if isinstance(value, str):
        value = L.operand(value, dt)
    mnode = L.n.args[1]
    if value == float("-inf") and not isinstance(value, str) and mnode in L.vals.const:
        # a constant mask filled with -inf is an additive mask: x + (0 / -inf),
        # the form the attention rules read (a causal one becomes causal)
        import torch
        mv = L.vals.value[mnode]
        add = torch.zeros(mv.shape, dtype=torch.float32).masked_fill(mv, float("-inf"))
        if L.dynamic and mv.dim() >= 2 and mv.shape[-1] == mv.shape[-2] and \
                all(d == 1 for d in mv.shape[:-2]) and \
                _causal_values(add.reshape(mv.shape[-2:]), mv.shape[-1], mv.shape[-1]):
            w = L.causal_mask(list(mv.shape))     # its size can be a dim
        else:
            w = L.tensor_weight(L.n.name + ".mask", add)
        if dt != "f32":
            w = L.operand(w, dt)
        return _binary(L, "add", x, w, dt)
    v = value if isinstance(value, str) else L.const(value, dt)
    return L.emit("where", [L.operand(mask, "bool"), v, L.operand(x, dt)], shape, dt)


@lowers("copy")
def _copy(L, args, kw):
    shape, dt = L.out_meta()
    src = L.operand(args[1], dt)
    if L.shape(src) != shape:
        return L.m(_expand_to(L, src, shape, dt))
    return src


def _expand_to(L, x, shape, dt):
    s = L.shape(x)
    if len(s) < len(shape):
        s = [1] * (len(shape) - len(s)) + s
        x = L.reshape(x, s)
    return _Expanded(x, s, shape, dt)


# -------------------------------------------------- integers, embeddings

@lowers("embedding")
def _embedding(L, args, kw):
    shape, dt = L.out_meta()
    return L.emit("gather", [L.m(args[0]), L.m(args[1])], shape, dt, {"axis": 0})


def _repeat_pattern(idx, size):
    """G where idx is [0]*G + [1]*G + ... + [size-1]*G (repeat_interleave)."""
    if idx.dim() != 1 or idx.numel() % size:
        return None
    G = idx.numel() // size
    import torch
    want = torch.arange(size, dtype=idx.dtype).repeat_interleave(G)
    return G if G > 1 and torch.equal(idx, want) else None


@lowers("index_select")
def _index_select(L, args, kw):
    x, dim = args[0], args[1]
    shape, dt = L.out_meta()
    inode = L.n.args[2]
    xs = L.shape(L.m(x)) if not isinstance(x, _Lazy) else x.shape
    dim %= len(xs)
    if inode in L.vals.const:
        G = _repeat_pattern(L.vals.value[inode], xs[dim])
        if G is not None:
            # repeat_interleave of heads (torch 1.13): grouped, not copied
            base = L.reshape(L.m(x), xs[:dim + 1] + [1] + xs[dim + 1:], name=L.n.name + ".heads")
            return _Grouped(base, shape, dim, xs[dim], G, 1, dt)
    return L.emit("gather", [L.m(x), L.m(args[2])], shape, dt, {"axis": dim})


@lowers("index")
def _index(L, args, kw):
    x, idx = args[0], args[1]
    pos = [i for i, t in enumerate(idx) if t is not None]
    if len(pos) > 1:
        return _index_several(L, x, idx, pos)
    if len(pos) != 1:
        L.unsupported("indexing with %d index tensors" % len(pos))
    i = idx[pos[0]]
    if L.dtype(L.m(i)) == "bool":
        L.unsupported("indexing with a boolean mask")
    shape, dt = L.out_meta()
    return L.emit("gather", [L.m(x), L.m(i)], shape, dt, {"axis": pos[0]})


@lowers("gather")
def _gather_elements(L, args, kw):
    """torch.gather(x, dim, index): out[i] = x[i with index[i] on dim] — a
    gather from x flattened at index * stride(dim) + the rest of i's
    offset (a constant of index's shape; RoBERTa's token types)."""
    x, dim, idx = L.m(args[0]), args[1], L.m(args[2])
    xs, ishape = L.shape(x), L.shape(idx)
    shape, dt = L.out_meta()
    dim %= max(1, len(xs))
    if len(ishape) != len(xs):
        L.unsupported("gather with an index of rank %d for rank %d" % (len(ishape), len(xs)))
    if _numel(ishape) > 1 << 22:
        L.unsupported("gather with %d indices" % _numel(ishape))
    strides = [int(np.prod(xs[k + 1:], dtype=np.int64)) for k in range(len(xs))]
    base = np.zeros(ishape, np.int64)
    for k in range(len(xs)):
        if k != dim:
            r = [1] * len(xs)
            r[k] = ishape[k]
            base = base + (np.arange(ishape[k], dtype=np.int64) * strides[k]).reshape(r)
    i64 = L.operand(idx, "i64")
    if strides[dim] != 1:
        i64 = L.emit("mul", [i64, L.const(strides[dim], "i64")], ishape, "i64", name=L.n.name + ".row")
    if base.any():
        i64 = L.emit("add", [i64, L.weight(L.n.name + ".offsets", "i64", ishape, base)], ishape,
                     "i64", name=L.n.name + ".flat_index")
    flat = L.reshape(x, [_numel(xs)], name=L.n.name + ".flat")
    return L.emit("gather", [flat, i64], shape, dt, {"axis": 0})


def _rows_index(L, i):
    """An index tensor of index_copy / index_put as mcir's 1-D one."""
    i = L.m(i)
    if L.dtype(i) == "bool":
        L.unsupported("an in-place update by a boolean mask")
    s = L.shape(i)
    if len(s) == 0:
        return L.reshape(i, [1], name=L.n.name + ".index")
    if len(s) != 1:
        L.unsupported("an in-place update by a %d-D index tensor" % len(s))
    return i


def _index_several(L, x, idx, pos):
    """x[i0, i1] with index tensors on adjacent dims (CLIP's pooled token:
    h[arange(B), ids.argmax(-1)]): one gather over those dims merged, at
    the flat index sum(i_k mod size_k * stride_k) (broadcast)."""
    x = L.m(x)
    xs = L.shape(x)
    if pos != list(range(pos[0], pos[-1] + 1)):
        L.unsupported("indexing with index tensors on dims %s that are not adjacent" % pos)
    shape, dt = L.out_meta()
    ins = [L.m(idx[p]) for p in pos]
    if any(L.dtype(i) == "bool" for i in ins):
        L.unsupported("indexing with a boolean mask")
    bshape = list(np.broadcast_shapes(*[tuple(L.shape(i)) for i in ins]))
    flat = None
    stride = 1
    for p, i in reversed(list(zip(pos, ins))):
        i = L.operand(i, "i64")
        s = L.shape(i)
        i = L.emit("mod", [i, L.const(xs[p], "i64")], s, "i64", name=L.n.name + ".wrap")
        if stride != 1:
            i = L.emit("mul", [i, L.const(stride, "i64")], s, "i64", name=L.n.name + ".stride")
        flat = i if flat is None else L.emit("add", [flat, i], list(np.broadcast_shapes(
            tuple(L.shape(flat)), tuple(s))), "i64", name=L.n.name + ".flat_index")
        stride *= xs[p]
    if L.shape(flat) != bshape:
        L.unsupported("indexing whose index tensors broadcast to %s" % bshape)
    merged = L.reshape(x, xs[:pos[0]] + [stride] + xs[pos[-1] + 1:], name=L.n.name + ".merged")
    return L.emit("gather", [merged, flat], shape, dt, {"axis": pos[0]})


@lowers("index_copy")
def _index_copy(L, args, kw):
    """x.index_copy(dim, index, source) (in place: a KV cache's update,
    transformers' StaticCache): mcir's index_copy."""
    x, dim, idx, src = args[0], args[1], args[2], args[3]
    shape, dt = L.out_meta()
    dim %= max(1, len(shape))
    i = _rows_index(L, idx)
    s = L.m(src)
    want = shape[:dim] + [L.shape(i)[0]] + shape[dim + 1:]
    if L.shape(s) != want:
        s = L.reshape(s, want, name=L.n.name + ".rows")
    return L.emit("index_copy", [L.m(x), i, L.operand(s, dt)], shape, dt, {"axis": dim})


@lowers("index_put")
def _index_put(L, args, kw):
    """x[..., idx, ...] = values with one 1-D index tensor (the others
    whole axes): index_copy along its axis. Accumulating, several index
    tensors or a boolean mask: refused."""
    x, idx, vals = args[0], args[1], args[2]
    acc = args[3] if len(args) > 3 else kw.get("accumulate", False)
    if acc:
        L.unsupported("index_put with accumulate=True")
    pos = [k for k, t in enumerate(idx) if t is not None]
    if len(pos) != 1:
        L.unsupported("index_put with %d index tensors" % len(pos))
    shape, dt = L.out_meta()
    dim = pos[0]
    i = _rows_index(L, idx[dim])
    want = shape[:dim] + [L.shape(i)[0]] + shape[dim + 1:]
    v = L.operand(vals, dt) if not isinstance(vals, (int, float)) else None
    if v is not None and L.shape(v) != want and _numel(L.shape(v)) == _numel(want) and \
            [d for d in L.shape(v) if d != 1] == [d for d in want if d != 1]:
        v = L.reshape(v, want, name=L.n.name + ".rows")   # values missing leading 1s
    if v is None or L.shape(v) != want:
        L.unsupported("index_put whose values (%s) are not the indexed rows' shape %s" %
                      ("a number" if v is None else L.shape(v), want))
    return L.emit("index_copy", [L.m(x), i, v], shape, dt, {"axis": dim})


@lowers("cumsum")
def _cumsum(L, args, kw):
    shape, dt = L.out_meta()
    x = L.operand(args[0], dt)
    return L.emit("cumsum", [x], shape, dt, {"axis": args[1] % len(shape)})


@lowers("argmax", "argmin")
def _argmax(L, args, kw):
    shape, dt = L.out_meta()
    dim = args[1] if len(args) > 1 else kw.get("dim")
    keep = args[2] if len(args) > 2 else kw.get("keepdim", False)
    x = L.m(args[0])
    if dim is None:
        x = L.reshape(x, [_numel(L.shape(x))])
        dim = 0
    return L.emit(L.op, [x], shape, dt, {"axis": dim, "keepdims": bool(keep)})


# ------------------------------------------------------------ reductions

def _axes(L, x, dim):
    r = len(L.shape(L.m(x)))
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(r))
    return [d % r for d in (dim if isinstance(dim, (list, tuple)) else [dim])]


@lowers("mean", "sum", "amax")
def _reduce(L, args, kw):
    op = L.op
    x = L.m(args[0])
    dim = args[1] if len(args) > 1 else kw.get("dim")
    keep = args[2] if len(args) > 2 else kw.get("keepdim", False)
    shape, dt = L.out_meta()
    axes = _axes(L, x, dim)
    s = L.shape(x)
    if op == "mean" and len(s) == 4 and sorted(axes) == [2, 3] and keep:
        return L.emit("global_avg_pool", [x], shape, dt)
    x = L.operand(x, dt)
    return L.emit({"mean": "reduce_mean", "sum": "reduce_sum", "amax": "reduce_max"}[op], [x],
                  shape, dt, {"axes": axes, "keepdims": bool(keep)})


@lowers("_softmax", "softmax", "_safe_softmax")
def _softmax(L, args, kw):
    x = args[0]
    shape, dt = L.out_meta()
    axis = args[1] if len(args) > 1 else kw.get("dim", -1)
    if isinstance(x, _Grouped) and axis % len(shape) != x.axis:
        if x.dtype != dt:
            x = L.cast_lazy(x, dt)
        axis %= len(shape)
        y = L.emit("softmax", [x.base], x.bshape, dt, {"axis": axis + (axis > x.axis)})
        return _Grouped(y, shape, x.axis, x.a, x.G, x.g, dt)
    return L.emit("softmax", [L.operand(x, dt)], shape, dt, {"axis": axis})


@lowers("_log_softmax", "log_softmax")
def _log_softmax(L, args, kw):
    shape, dt = L.out_meta()
    x = L.operand(args[0], dt)
    axis = args[1] % len(shape)
    red = shape[:axis] + [1] + shape[axis + 1:]
    nm = L.n.name
    mx = L.emit("reduce_max", [x], red, dt, {"axes": [axis], "keepdims": True}, name=nm + ".max")
    d = L.emit("sub", [x, mx], shape, dt, name=nm + ".sub")
    e = L.emit("exp", [d], shape, dt, name=nm + ".exp")
    s = L.emit("reduce_sum", [e], red, dt, {"axes": [axis], "keepdims": True}, name=nm + ".sum")
    ls = L.emit("log", [s], red, dt, name=nm + ".log")
    return L.emit("sub", [d, ls], shape, dt)


# ----------------------------------------------------------------- norms

@lowers("native_layer_norm", "layer_norm")
def _layer_norm(L, args, kw):
    x, ns = args[0], args[1]
    w = args[2] if len(args) > 2 else kw.get("weight")
    b = args[3] if len(args) > 3 else kw.get("bias")
    eps = args[4] if len(args) > 4 else kw.get("eps", 1e-5)
    shape, dt = L.out_meta(0 if L.op == "native_layer_norm" else None)
    if w is None:
        w = L.weight(L.n.name + ".ones", dt, list(ns), np.ones(list(ns)))
    ins = [L.m(x), L.m(w)] + ([L.m(b)] if b is not None else [])
    y = L.emit("layernorm", ins, shape, dt, {"axis": -len(ns), "eps": float(eps)})
    return [y, _UNUSED, _UNUSED] if L.op == "native_layer_norm" else y


@lowers("native_batch_norm", "_native_batch_norm_legit_no_training", "_native_batch_norm_legit",
        "batch_norm", "_native_batch_norm_legit_functional")
def _batch_norm(L, args, kw):
    import torch
    op = L.op
    b = L.bind(args, kw)
    if op == "_native_batch_norm_legit_no_training":
        training = False
    else:
        training = b.get("training", False)
    if training:
        L.refuse_training("batch norm in training mode (it updates its statistics)")
    names = {"weight": "weight", "bias": "bias", "running_mean": "running_mean",
             "running_var": "running_var"}
    vals = {}
    for k in names:
        node = L.arg_node(k)
        if node is None:
            vals[k] = None
        elif node not in L.vals.const:
            L.unsupported("batch norm whose %s is not a constant" % k)
        else:
            vals[k] = L.vals.value[node].float()
    eps = b["eps"]
    x = L.m(b["input"])
    s = L.shape(x)
    scale = (vals["weight"] if vals["weight"] is not None else 1.0) / \
        torch.sqrt(vals["running_var"] + eps)
    shift = (vals["bias"] if vals["bias"] is not None else 0.0) - vals["running_mean"] * scale
    c = scale.shape[0]
    per = [c] + [1] * (len(s) - 2)
    dt = L.dtype(x)
    sw = L.weight(L.n.name + ".scale", dt, per, scale.reshape(per))
    bw = L.weight(L.n.name + ".shift", dt, per, shift.reshape(per))
    y = L.emit("mul", [x, sw], s, dt, name=L.n.name + ".mul")
    y = L.emit("add", [y, bw], s, dt)
    return y if op == "batch_norm" else [y, _UNUSED, _UNUSED] + \
        ([_UNUSED, _UNUSED] if op == "_native_batch_norm_legit_functional" else [])


# -------------------------------------------------- convolution, pooling

@lowers("convolution", "_convolution")
def _convolution(L, args, kw):
    x, w, b, stride, pad, dil, transposed, _, groups = args[:9]
    if transposed:
        L.unsupported("transposed convolution")
    shape, dt = L.out_meta()
    if len(L.shape(L.m(x))) == 3:
        # 1-D (Whisper's stem): a conv2d of height 1
        one = lambda v: list(v)[0] if isinstance(v, (list, tuple)) else v  # noqa: E731
        xs, ws = L.shape(L.m(x)), L.shape(L.m(w))
        x2 = L.reshape(L.m(x), xs[:2] + [1, xs[2]], name=L.n.name + ".x2d")
        w2 = L.reshape(L.m(w), ws[:2] + [1, ws[2]], name=L.n.name + ".w2d")
        ins = [x2, w2] + ([L.m(b)] if b is not None else [])
        p = one(pad)
        y = L.emit("conv2d", ins, shape[:2] + [1, shape[2]], dt, {
            "strides": [1, one(stride)], "pads": [0, p, 0, p], "dilations": [1, one(dil)],
            "groups": groups}, name=L.n.name + ".2d")
        return L.reshape(y, shape)
    if len(L.shape(L.m(x))) != 4:
        L.unsupported("a %d-D convolution (mcir has conv1d and conv2d)" % (len(L.shape(L.m(x))) - 2))
    ins = [L.m(x), L.m(w)] + ([L.m(b)] if b is not None else [])
    pad = _pair(pad)
    return L.emit("conv2d", ins, shape, dt, {
        "strides": _pair(stride), "pads": [pad[0], pad[1], pad[0], pad[1]],
        "dilations": _pair(dil), "groups": groups})


@lowers("max_pool2d_with_indices", "max_pool2d", "avg_pool2d")
def _pool(L, args, kw):
    op = L.op
    b = L.bind(args, kw)
    k = _pair(b["kernel_size"])
    st = _pair(b["stride"]) if b.get("stride") else k
    p = _pair(b.get("padding") or 0)
    shape, dt = L.out_meta(0 if op == "max_pool2d_with_indices" else None)
    if b.get("ceil_mode"):
        # the same windows where the sizes divide (timm's ResNet-D shortcut)
        d = _pair(b.get("dilation") or 1) if op != "avg_pool2d" else [1, 1]
        xs = L.shape(L.m(b["self"]))
        floor = [(xs[2 + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // st[i] + 1 for i in range(2)]
        if floor != shape[2:]:
            L.unsupported("%s with ceil_mode (its last window is partial here)" % op)
    if op != "avg_pool2d" and _pair(b.get("dilation") or 1) != [1, 1]:
        L.unsupported("%s with dilation" % op)
    if op == "avg_pool2d" and (not b.get("count_include_pad", True) is False) and p != [0, 0]:
        L.unsupported("avg_pool2d counting padding (count_include_pad=True with padding)")
    if op == "avg_pool2d" and b.get("divisor_override"):
        L.unsupported("avg_pool2d with divisor_override")
    y = L.emit("avg_pool2d" if op == "avg_pool2d" else "max_pool2d", [L.m(b["self"])], shape,
               dt, {"kernel": k, "strides": st, "pads": [p[0], p[1], p[0], p[1]]})
    return [y, _UNUSED] if op == "max_pool2d_with_indices" else y


@lowers("_adaptive_avg_pool2d", "adaptive_avg_pool2d")
def _adaptive_pool(L, args, kw):
    x = L.m(args[0])
    s = L.shape(x)
    out = _pair(args[1])
    shape, dt = L.out_meta()
    if out == [1, 1]:
        return L.emit("global_avg_pool", [x], shape, dt)
    if s[2] % out[0] or s[3] % out[1]:
        L.unsupported("adaptive average pool from %s to %s" % (s[2:], out))
    k = [s[2] // out[0], s[3] // out[1]]
    return L.emit("avg_pool2d", [x], shape, dt, {"kernel": k, "strides": k, "pads": [0, 0, 0, 0]})


# ----------------------------------------------------------- matmuls

def _matmul(L, a, b, shape, dt):
    """a @ b for names and lazy values; batched matmuls on flattened views
    run N-D on what was flattened (the form the attention rules read), and
    grouped heads stay grouped."""
    if isinstance(a, _Flat) and isinstance(b, _Flat) and a.src_shape[:-2] == b.src_shape[:-2]:
        sa, sb = a.src, b.src
        lead = a.src_shape[:-2]
        full = lead + [a.src_shape[-2], b.src_shape[-1]]
        if isinstance(sa, _Grouped) or isinstance(sb, _Grouped):
            ref = sa if isinstance(sa, _Grouped) else sb
            xa, ga = L.group_like(sa, ref)
            xb, gb = L.group_like(sb, ref)
            g = max(ga, gb)
            out = full[:ref.axis] + [ref.a, g] + full[ref.axis + 1:]
            y = L.emit("matmul", [xa, xb], out, dt)
            res = _Grouped(y, full, ref.axis, ref.a, ref.G, g, dt)
        else:
            res = L.emit("matmul", [sa, sb], full, dt)
        return _Flat(res, full, shape, dt)
    if isinstance(a, _Grouped) or isinstance(b, _Grouped):
        ref = a if isinstance(a, _Grouped) else b
        if len(L.shape(a)) == len(L.shape(b)) == len(shape) and ref.axis < len(shape) - 2:
            xa, ga = L.group_like(a, ref)
            xb, gb = L.group_like(b, ref)
            g = max(ga, gb)
            out = shape[:ref.axis] + [ref.a, g] + shape[ref.axis + 1:]
            y = L.emit("matmul", [xa, xb], out, dt)
            return _Grouped(y, shape, ref.axis, ref.a, ref.G, g, dt)
    return L.emit("matmul", [L.m(a), L.m(b)], shape, dt)


@lowers("mm", "bmm", "matmul")
def _mm(L, args, kw):
    shape, dt = L.out_meta()
    return _matmul(L, args[0], args[1], shape, dt)


@lowers("addmm", "baddbmm")
def _addmm(L, args, kw):
    b = L.bind(args, kw)
    if b.get("beta", 1) != 1 or b.get("alpha", 1) != 1:
        L.unsupported("aten::%s with beta or alpha" % L.op)
    shape, dt = L.out_meta()
    names = ("mat1", "mat2") if "mat1" in b else ("batch1", "batch2")
    y = _matmul(L, b[names[0]], b[names[1]], shape, dt)
    if isinstance(y, _Flat):
        y = L.m(y)
    return L.emit("add", [y, L.m(b["self"])], shape, dt, name=L.n.name + ".add")


@lowers("linear")
def _linear(L, args, kw):
    shape, dt = L.out_meta()
    w = L.m(args[1])
    y = L.emit("matmul", [L.m(args[0]), w], shape, dt, {"transpose_b": True})
    b = args[2] if len(args) > 2 else kw.get("bias")
    return L.emit("add", [y, L.m(b)], shape, dt, name=L.n.name + ".bias") if b is not None else y


# ------------------------------------------------------------ attention

_SDPA = {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
         "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
         "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_attention_math",
         "_scaled_dot_product_fused_attention_overrideable",
         "_scaled_dot_product_attention_math_for_mps"}


def _causal_values(m, nq, nk):
    """Whether a constant additive (or boolean keep) mask is the causal one:
    keys j <= i + (nk - nq) kept, the others masked (-inf or <= -1e4, the
    rewrites' rule for a causal mask)."""
    import torch
    if m.dim() < 2 or list(m.shape[-2:]) != [nq, nk] or nk < nq:
        return False
    keep = torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq)
    if m.dtype == torch.bool:
        return bool((m == keep).all())
    m = m.float()
    return bool(((m == 0) == keep).all() and (m[..., ~keep] <= -1e4).all())


@lowers(*_SDPA)
def _sdpa(L, args, kw):
    op = L.op
    b = L.bind(args, kw)
    q, k, v = b["query"], b["key"], b["value"]
    mask_key = "attn_mask" if "attn_mask" in b else "attn_bias"
    mask = b.get(mask_key)
    if b.get("dropout_p", 0.0):
        L.refuse_training("attention dropout p=%g" % b["dropout_p"])
    if b.get("dropout_mask") is not None:
        L.unsupported("aten::%s with a dropout mask" % op)
    causal = bool(b.get("is_causal", False))
    m_out = L.vals.meta[L.n]
    shape, dt = (list(m_out[0][0]), mcir_dtype(m_out[0][1])) if isinstance(m_out, list) \
        else L.out_meta()
    qs, ks = L.shape(q), L.shape(k)
    nq, nk = qs[-2], ks[-2]
    attrs = {}
    if b.get("scale") is not None:
        attrs["scale"] = float(b["scale"])
    # a constant mask: causal ones become causal: true; booleans (True =
    # attend) become additive 0 / -inf
    if mask is not None:
        mnode = L.arg_node(mask_key)
        if mnode is not None and mnode in L.vals.const and not causal and \
                _causal_values(L.vals.value[mnode], nq, nk):
            causal, mask = True, None
        elif L.dtype(L.m(mask)) == "bool":
            shape_m = L.shape(L.m(mask))
            mask = L.emit("where", [L.m(mask), L.const(0.0, dt), L.const(float("-inf"), dt)],
                          shape_m, dt, name=L.n.name + ".mask")
    attrs["causal"] = causal
    # grouped-query attention: K/V with fewer heads than Q (enable_gqa, or
    # repeated heads the capture kept grouped) run as broadcast heads
    grouped = None
    if isinstance(k, _Grouped) and k.g == 1:
        grouped = k
    elif isinstance(v, _Grouped) and v.g == 1:
        grouped = v
    elif not isinstance(k, _Lazy) and len(qs) >= 3 and len(ks) == len(qs) and \
            ks[-3] != qs[-3] and qs[-3] % ks[-3] == 0:
        h = len(qs) - 3
        A, G = ks[-3], qs[-3] // ks[-3]
        kk = L.reshape(k, ks[:h + 1] + [1] + ks[h + 1:], name=L.n.name + ".k")
        vs = L.shape(L.m(v))
        vv = L.reshape(v, vs[:h + 1] + [1] + vs[h + 1:], name=L.n.name + ".v")
        k = _Grouped(kk, ks[:h] + [A * G] + ks[h + 1:], h, A, G, 1, L.dtype(kk))
        v = _Grouped(vv, vs[:h] + [A * G] + vs[h + 1:], h, A, G, 1, L.dtype(vv))
        grouped = k
    if grouped is not None:
        xq, _ = L.group_like(q, grouped)
        xk, _ = L.group_like(k, grouped)
        xv, _ = L.group_like(v, grouped)
        ins = [xq, xk, xv]
        if mask is not None:
            ins.append(L.group_like(mask, grouped)[0])
        G = grouped.G
        out = shape[:grouped.axis] + [grouped.a, G] + shape[grouped.axis + 1:]
        y = L.emit("attention", ins, out, dt, attrs)
        res = _Grouped(y, shape, grouped.axis, grouped.a, G, G, dt)
    else:
        ins = [L.m(q), L.m(k), L.m(v)] + ([L.m(mask)] if mask is not None else [])
        res = L.emit("attention", ins, shape, dt, attrs)
    if isinstance(m_out, list):
        return [res] + [_UNUSED] * (len(m_out) - 1)
    return res


# ------------------------------------------------------------- front ends

def _no_grad():
    import torch
    return torch.no_grad()


def _make_fx(f, args, stack_traces=True):
    """make_fx with the source lines of the traced code kept on every node
    (torch >= 2.x: record_stack_traces; 1.13: its tracer's attribute)."""
    import inspect
    from torch.fx.experimental import proxy_tensor
    from torch.fx.experimental.proxy_tensor import make_fx
    params = inspect.signature(make_fx).parameters
    if "record_stack_traces" in params:
        return make_fx(f, record_stack_traces=stack_traces)(*args)
    tracer = getattr(proxy_tensor, "PythonKeyTracer", None)
    old = getattr(tracer, "record_stack_traces", False)
    try:
        if tracer is not None:
            tracer.record_stack_traces = stack_traces
        return make_fx(f)(*args)
    finally:
        if tracer is not None:
            tracer.record_stack_traces = old


def _ItemInterpreter(gm, args):
    """An Interpreter of gm whose `.item()` of an input is the value of
    the example input: Dynamo with dynamic=True passes a module's float
    attributes (a dropout's p) as 0-d tensors it reads with .item(), which
    make_fx cannot trace; the value is the one at capture."""
    import torch.fx
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    # read now: under make_fx, .item() of even a real tensor is traced
    items = {n: a.item() for n, a in zip(phs, args) if hasattr(a, "item") and
             getattr(a, "dim", lambda: 1)() == 0 and
             any(u.op == "call_method" and u.target == "item" for u in n.users)}

    class Interp(torch.fx.Interpreter):
        def run_node(self, n):
            if n.op == "call_method" and n.target == "item" and n.args and n.args[0] in items:
                return items[n.args[0]]
            return super().run_node(n)
    return Interp(gm)


def to_aten(gm, args):
    """An FX graph of torch-level ops (torch.fx's, TorchDynamo's) as an
    ATen graph, each node keeping the stack trace of the node it came from."""
    import torch.fx
    import torch.fx.traceback as fx_traceback
    interp = _ItemInterpreter(gm, args)
    if hasattr(fx_traceback, "preserve_node_meta"):
        with fx_traceback.preserve_node_meta(), _no_grad():
            return _make_fx(interp.run, args, stack_traces=False)
    with fx_traceback.override_stack_trace(), _no_grad():
        return _make_fx(interp.run, args, stack_traces=False)


class _unpacking_proxies:
    """`B, T, C = x.size()` under torch.fx on torch 1.13 with Python >= 3.11:
    1.13's Proxy.__iter__ reads the caller's bytecode at f_lasti // 2,
    which 3.11 changed, and refuses to unpack; this is torch 2's reading
    (the instruction at f_lasti's offset), put in place while tracing."""

    def __enter__(self):
        import sys
        import torch.fx
        self.old = torch.fx.proxy.Proxy.__iter__
        if sys.version_info >= (3, 11) and torch.__version__.startswith("1."):
            torch.fx.proxy.Proxy.__iter__ = _proxy_iter
        return self

    def __exit__(self, *exc):
        import torch.fx
        torch.fx.proxy.Proxy.__iter__ = self.old
        return False


def _proxy_iter(self):
    import dis
    import inspect
    calling = inspect.currentframe().f_back
    for inst in dis.get_instructions(calling.f_code):
        if inst.offset == calling.f_lasti:
            break
    else:
        inst = None
    nxt = None
    found = False
    for i in dis.get_instructions(calling.f_code):
        if found and i.opname not in ("CACHE", "PRECALL", "CALL"):
            nxt = i
            break
        if i.offset == calling.f_lasti:
            found = True
    for cand in (inst, nxt):
        if cand is not None and cand.opname == "UNPACK_SEQUENCE":
            return (self[i] for i in range(cand.argval))
    return self.tracer.iter(self)


def _check_inference(module, example_inputs):
    import torch
    if module is not None and module.training:
        raise TrainingError("%s is in training mode: mcir compiles inference graphs — call "
                            "model.eval() first" % type(module).__name__)


def capture(module, example_inputs, name=None, mode="aten", dynamic_shapes=None, kwargs=None):
    """Captures module (in eval mode) on example inputs and returns an mcir
    Graph whose weights hold the module's parameters and buffers.

    mode "aten" (default) traces the ATen ops the module runs with make_fx,
    shapes concrete, so Python on shapes (`b, t, c = x.shape`) and control
    flow on them trace; "fx" traces torch.fx symbolically at the module
    level first (no control flow on shapes; size()/shape unpacking and the
    arithmetic on them are resolved on the example inputs), then lowers the
    same way. Both keep the model's source line for messages.

    dynamic_shapes: symbolic dimensions (mcir.Dim), as torch.export takes
    them — one entry per example input, None or {axis: Dim}:

        seq = mcir.Dim("seq", min=1, max=128)
        g = mcir.capture(model, (x,), dynamic_shapes=({1: seq},))

    The graph declares the dims and names them where the model's sizes
    follow them; one compilation then runs at every size in range
    (mcir/dynamic.py says how, docs/python.md what is supported).

    kwargs: keyword arguments the module is called with, constants of the
    capture ("aten" mode): kwargs={"use_cache": False} for a transformers
    model, whose cache object mcir does not take."""
    if kwargs and mode != "aten":
        raise ValueError("kwargs: mode 'aten' only")
    if kwargs:
        import functools
        call = functools.partial(module, **kwargs)
        module_for = (module, call)
    else:
        module_for = (module, module)
    if not isinstance(example_inputs, (list, tuple)):
        example_inputs = (example_inputs,)
    _check_inference(module, example_inputs)
    name = name or type(module).__name__
    if dynamic_shapes is not None:
        from .dynamic import capture_dynamic, parse_dynamic_shapes
        axes, dims = parse_dynamic_shapes(dynamic_shapes, example_inputs)
        return capture_dynamic(lambda args: _capture(module_for, args, name, mode, True),
                               example_inputs, axes, {}, dims)
    return _capture(module_for, example_inputs, name, mode, False)


class _compiling:
    """torch.compiler.is_compiling() true while make_fx traces: a model
    then takes the paths it takes under torch.compile — no checks of tensor
    values in Python, which a trace cannot follow (transformers' masks test
    `(mask == 0).all()` otherwise)."""

    def __enter__(self):
        import torch
        comp = getattr(torch, "compiler", None)
        self.old = getattr(comp, "is_compiling", None) if comp is not None else None
        if self.old is not None:
            comp.is_compiling = lambda: True
        return self

    def __exit__(self, *exc):
        import torch
        if self.old is not None:
            torch.compiler.is_compiling = self.old
        return False


def _not_tensors(out, where="output"):
    """The first leaf of a module's outputs that is not a tensor (nor None,
    a number or a string), as (where, type name), or None."""
    import torch
    if isinstance(out, torch.Tensor) or out is None or isinstance(out, (int, float, bool, str)):
        return None
    if isinstance(out, dict):   # transformers' ModelOutput is one
        for k, v in out.items():
            r = _not_tensors(v, "%s[%r]" % (where, k))
            if r:
                return r
        return None
    if isinstance(out, (list, tuple)):
        for i, v in enumerate(out):
            r = _not_tensors(v, "%s[%d]" % (where, i))
            if r:
                return r
        return None
    return where, "%s.%s" % (type(out).__module__, type(out).__name__)


def _refuse_outputs(module, call, example_inputs, err):
    """After a failed trace: a module that returns an object mcir cannot
    take (a transformers cache) is refused by name, with what to pass."""
    try:
        with _no_grad():
            bad = _not_tensors(call(*example_inputs))
    except Exception:   # noqa: BLE001 — the trace's own error says more
        bad = None
    if not bad:
        raise err
    where, what = bad
    hint = " (a transformers cache: pass use_cache=False, mcir.capture(model, inputs, " \
        "kwargs={'use_cache': False}))" if "cache" in what.lower() else ""
    raise UnsupportedError("%s returns %s in %s%s: mcir.capture takes modules whose outputs are "
                           "tensors, and lists, tuples and dicts of them" %
                           (type(module).__name__, what, where, hint)) from err


def _capture(module_for, example_inputs, name, mode, dynamic):
    import torch
    import torch.fx
    module, call = module_for
    returned = []   # the class of what the module returned (a ModelOutput is a dict's)

    def traced(*args):
        out = call(*args)
        returned.append(type(out))
        return out
    if mode == "aten":
        try:
            with _no_grad(), _compiling():
                gm = _make_fx(traced, _copies(example_inputs))
        except (NotImplementedError, TypeError, RuntimeError) as e:
            _refuse_outputs(module, call, example_inputs, e)
    elif mode == "fx":
        tracer = torch.fx.Tracer()
        tracer.record_stack_traces = True
        tracer.proxy_buffer_attributes = True   # self.mask[:, :, :T, :T] with T traced
        with _unpacking_proxies():
            graph = tracer.trace(module)
        gm = to_aten(torch.fx.GraphModule(module, graph), _copies(example_inputs))
    else:
        raise ValueError("mode must be 'aten' or 'fx'")
    with _no_grad():
        g = _Lowering(gm, name, dynamic=dynamic).run(_copies(example_inputs))
    cls = returned[0] if returned else None
    if cls is not None and cls is not dict and issubclass(cls, dict) and isinstance(g.output_tree, dict):
        g.output_tree = _Typed(cls, g.output_tree)   # given back as the model's own class
    return g


def capture_desugared(d, example_inputs, name="fx_graph"):
    """A Dynamo graph with DTensor inputs (mcir.distributed.Desugared d) as
    this process's rank of an mcir graph: traced on the local shards, its
    functional collectives as mcir's over the graph's process group.
    example_inputs: d.local() of the Dynamo inputs."""
    import torch.fx.traceback as fx_traceback
    example_inputs = tuple(example_inputs)
    with fx_traceback.preserve_node_meta(), _no_grad():
        aten = _make_fx(d, example_inputs, stack_traces=False)
    with _no_grad():
        return _Lowering(aten, name, d.weights).run(example_inputs)


def capture_fx(gm, example_inputs, name="fx_graph", weights=(), dynamic=False):
    """An FX GraphModule (what torch.compile hands a backend: torch-level
    ops) as an mcir Graph. weights: positions of example_inputs that are
    parameters or buffers, bound as weights of the graph (their values at
    capture) instead of inputs. dynamic: a capture that dynamic.py compares
    with others (positions and causal masks as nodes, not constants)."""
    example_inputs = tuple(example_inputs)
    aten = to_aten(gm, _copies(example_inputs, weights))
    with _no_grad():
        return _Lowering(aten, name, weights, dynamic).run(_copies(example_inputs, weights))
