"""mcir_graph.py — build, check and interpret graph.json files (Python side).

Three things, all following docs/graph-format.md and docs/ops.md:

* ``Graph``: a small builder used by gen_examples.py; ``Graph.write`` writes
  graph.json (one input / weight / node per line) and the ``data`` .npy files.
* ``check(path)``: a spec checker independent of the C reader: required
  fields, unique names, dtypes, op arity, known / required attributes,
  acyclicity, ``.npy`` files (dtype, shape, order), ``value`` shapes, and full
  shape inference. Returns (graph_dict, shapes, dtypes) or raises CheckError
  with every problem found.
* ``interpret(path, inputs, seed=0)``: a numpy reference interpreter (f64
  math, every node result rounded to its storage dtype) used to cross-check
  the graphs against the PyTorch-computed expected outputs.

Only gen_examples.py and check_examples.py use this; the C build never does.
"""
import json
import math
import os
from collections import OrderedDict

import numpy as np

import mcir_seed

DTYPES = ("f32", "f16", "bf16")

UNARY = ("relu", "sigmoid", "tanh", "exp", "log", "erf", "cos", "sin", "sqrt", "rsqrt", "neg",
         "reciprocal", "silu")
BINARY = ("add", "sub", "mul", "div", "pow", "max", "min")
REDUCE = ("reduce_sum", "reduce_mean", "reduce_max")

# op -> (min inputs, max inputs (None = unbounded), {attr: (kind, required, default)})
_POOL_ATTRS = {"kernel": ("ints", True, None), "strides": ("ints", False, None),
               "pads": ("ints", False, [0, 0, 0, 0])}
OPS = {}
OPS["matmul"] = (2, 2, {"transpose_a": ("bool", False, False), "transpose_b": ("bool", False, False)})
for _o in BINARY:
    OPS[_o] = (2, 2, {})
OPS["scale"] = (1, 1, {"value": ("num", True, None)})
for _o in UNARY:
    OPS[_o] = (1, 1, {})
OPS["gelu"] = (1, 1, {"approximate": ("str", False, "none")})
OPS["softmax"] = (1, 1, {"axis": ("int", False, -1)})
OPS["layernorm"] = (2, 3, {"axis": ("int", False, -1), "eps": ("num", False, 1e-5)})
OPS["rmsnorm"] = (2, 2, {"axis": ("int", False, -1), "eps": ("num", False, 1e-6)})
for _o in REDUCE:
    OPS[_o] = (1, 1, {"axes": ("ints", True, None), "keepdims": ("bool", False, True)})
OPS["transpose"] = (1, 1, {"perm": ("ints", True, None)})
OPS["reshape"] = (1, 1, {"shape": ("ints", True, None)})
OPS["split"] = (1, 1, {"axis": ("int", True, None), "sizes": ("ints", True, None)})
OPS["concat"] = (1, None, {"axis": ("int", True, None)})
OPS["slice"] = (1, 1, {"axis": ("int", True, None), "start": ("int", True, None),
                       "end": ("int", True, None), "step": ("int", False, 1)})
OPS["conv2d"] = (2, 3, {"strides": ("ints", False, [1, 1]), "pads": ("ints", False, [0, 0, 0, 0]),
                        "dilations": ("ints", False, [1, 1]), "groups": ("int", False, 1)})
OPS["max_pool2d"] = (1, 1, dict(_POOL_ATTRS))
OPS["avg_pool2d"] = (1, 1, dict(_POOL_ATTRS))
OPS["global_avg_pool"] = (1, 1, {})
OPS["attention"] = (3, 4, {"scale": ("num", False, None), "causal": ("bool", False, False)})


# ---------------------------------------------------------------- builder

class Graph:
    """Builds a graph.json. Tensor values for the PyTorch reference are kept
    in ``self.values`` (weights: seeded / value / data; see ``weight``)."""

    def __init__(self, name):
        self.name = name
        self.inputs = []
        self.weights = []
        self.nodes = []
        self.outputs = []
        self.values = {}        # weight name -> float32 array (as the compiler sees it)
        self.data_files = {}    # relative path -> array to save
        self._names = set()
        self._node_names = set()

    def _new(self, name):
        assert name not in self._names, "duplicate tensor name " + name
        self._names.add(name)
        return name

    def input(self, name, shape, dtype="f32"):
        self.inputs.append(OrderedDict(name=self._new(name), dtype=dtype, shape=list(shape)))
        return name

    def weight(self, name, shape, dtype="f32", value=None, data=None):
        """Seeded (neither value nor data), `value` (number or nested list),
        or `data` (an array saved to w/<name>.npy)."""
        shape = list(shape)
        w = OrderedDict(name=self._new(name), dtype=dtype, shape=shape)
        if value is not None:
            arr = np.asarray(value, dtype=np.float64)
            assert list(arr.shape) == shape, (name, arr.shape, shape)
            w["value"] = value if not isinstance(value, np.ndarray) else value.tolist()
            self.values[name] = mcir_seed.round_to_dtype(arr.astype(np.float32), dtype)
        elif data is not None:
            arr = np.asarray(data, dtype=np.float32)
            assert list(arr.shape) == shape, (name, arr.shape, shape)
            rel = "w/%s.npy" % name
            w["data"] = rel
            self.data_files[rel] = mcir_seed.to_storage(arr, dtype)
            self.values[name] = mcir_seed.round_to_dtype(arr, dtype)
        else:
            self.values[name] = mcir_seed.fill(name, shape, dtype, "weight", 0)
        self.weights.append(w)
        return name

    def const(self, name, value, dtype="f32"):
        """A structural scalar constant, given by `value`."""
        if name in self._names:
            return name
        return self.weight(name, [], dtype, value=float(value))

    def op(self, op, inputs, name, out=None, nout=1, **attrs):
        assert op in OPS, op
        assert name not in self._node_names, "duplicate node name " + name
        self._node_names.add(name)
        if nout == 1:
            outs = [self._new(out or name + ".y")]
        else:
            outs = [self._new(o) for o in (out or ["%s.y%d" % (name, i) for i in range(nout)])]
        node = OrderedDict(name=name, op=op, inputs=list(inputs), outputs=outs)
        if attrs:
            node["attrs"] = OrderedDict(attrs)
        self.nodes.append(node)
        return outs[0] if nout == 1 else outs

    def output(self, *names):
        self.outputs.extend(names)

    def to_json(self):
        def d(x):
            return json.dumps(x, separators=(", ", ": "))
        lines = ['{', '  "mcir": 1,', '  "name": %s,' % d(self.name)]
        for key, items in (("inputs", self.inputs), ("weights", self.weights), ("nodes", self.nodes)):
            if not items:
                lines.append('  "%s": [],' % key)
                continue
            lines.append('  "%s": [' % key)
            for i, it in enumerate(items):
                text = d(it)
                v = it.get("value") if key == "weights" else None
                if isinstance(v, list) and v and isinstance(v[0], list):
                    # a matrix-like constant: one row per line
                    rest = OrderedDict((k, x) for k, x in it.items() if k != "value")
                    rows = _rows(v)
                    text = d(rest)[:-1] + ', "value": [\n' + ",\n".join(
                        "      " + r for r in rows) + "]}"
                lines.append("    " + text + ("," if i + 1 < len(items) else ""))
            lines.append("  ],")
        lines.append('  "outputs": %s' % d(self.outputs))
        lines.append("}")
        return "\n".join(lines) + "\n"

    def write(self, directory):
        os.makedirs(directory, exist_ok=True)
        for rel, arr in self.data_files.items():
            p = os.path.join(directory, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            np.save(p, np.ascontiguousarray(arr))
        path = os.path.join(directory, "graph.json")
        with open(path, "w") as f:
            f.write(self.to_json())
        return path


def _rows(v):
    """Nested list -> lines, one per innermost row."""
    if v and isinstance(v[0], list) and v[0] and isinstance(v[0][0], list):
        out = []
        for x in v:
            sub = _rows(x)
            sub[0] = "[" + sub[0]
            sub[-1] = sub[-1] + "]"
            out.extend(sub)
        return out
    return [json.dumps(r, separators=(", ", ": ")) for r in v]


# ---------------------------------------------------------------- checker

class CheckError(Exception):
    pass


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _bcast(a, b):
    r = max(len(a), len(b))
    a = [1] * (r - len(a)) + list(a)
    b = [1] * (r - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            return None
        out.append(max(x, y))
    return out


def _axis(ax, rank):
    a = ax + rank if ax < 0 else ax
    return a if 0 <= a < rank else None


def _slice_len(n, start, end, step):
    return len(range(*slice(start, end, step).indices(n)))


def _npy_dtype_ok(arr, dtype):
    want = {"f32": "<f4", "f16": "<f2", "bf16": "<u2"}[dtype]
    return arr.dtype.str == want or (arr.dtype.str[1:] == want[1:] and arr.dtype.byteorder in "=<|"
                                     and np.little_endian)


def _nested_shape(v):
    if isinstance(v, list):
        if not v:
            return [0]
        subs = [_nested_shape(x) for x in v]
        if any(s is None or s != subs[0] for s in subs):
            return None
        return [len(v)] + subs[0]
    return [] if _is_num(v) else None


def infer(op, ins, attrs, errs, where):
    """Output shapes of one node from input shapes (lists). Appends to errs."""
    def err(msg):
        errs.append("%s: %s" % (where, msg))
        return None

    a = ins[0]
    if op == "matmul":
        A, B = list(ins[0]), list(ins[1])
        if len(A) < 2 or len(B) < 2:
            return err("matmul operands need rank >= 2")
        if attrs.get("transpose_a"):
            A[-1], A[-2] = A[-2], A[-1]
        if attrs.get("transpose_b"):
            B[-1], B[-2] = B[-2], B[-1]
        if A[-1] != B[-2]:
            return err("matmul inner dims %d vs %d" % (A[-1], B[-2]))
        lead = _bcast(A[:-2], B[:-2])
        if lead is None:
            return err("matmul batch dims do not broadcast")
        return [lead + [A[-2], B[-1]]]
    if op in BINARY:
        s = _bcast(ins[0], ins[1])
        if s is None:
            return err("shapes %s and %s do not broadcast" % (ins[0], ins[1]))
        return [s]
    if op in UNARY or op in ("scale", "gelu"):
        if op == "gelu" and attrs.get("approximate", "none") not in ("none", "tanh"):
            return err("gelu approximate must be none or tanh")
        return [list(a)]
    if op == "softmax":
        if _axis(attrs.get("axis", -1), len(a)) is None:
            return err("softmax axis out of range")
        return [list(a)]
    if op in ("layernorm", "rmsnorm"):
        ax = _axis(attrs.get("axis", -1), len(a))
        if ax is None:
            return err("axis out of range")
        norm = a[ax:]
        for g in ins[1:]:
            if _bcast(norm, g) != list(norm):
                return err("gamma/beta shape %s does not fit normalised shape %s" % (g, norm))
        return [list(a)]
    if op in REDUCE:
        axes = [_axis(x, len(a)) for x in attrs["axes"]]
        if any(x is None for x in axes) or len(set(axes)) != len(axes):
            return err("bad axes %s" % attrs["axes"])
        if attrs.get("keepdims", True):
            return [[1 if i in axes else d for i, d in enumerate(a)]]
        return [[d for i, d in enumerate(a) if i not in axes]]
    if op == "transpose":
        p = attrs["perm"]
        if sorted(p) != list(range(len(a))):
            return err("perm %s is not a permutation of rank %d" % (p, len(a)))
        return [[a[i] for i in p]]
    if op == "reshape":
        s = list(attrs["shape"])
        n = int(np.prod(a))
        if 0 in s or s.count(-1) > 1 or any(x < -1 for x in s):
            return err("bad reshape shape %s" % s)
        if -1 in s:
            rest = int(np.prod([x for x in s if x != -1]))
            if rest == 0 or n % rest:
                return err("cannot reshape %s to %s" % (a, s))
            s[s.index(-1)] = n // rest
        if int(np.prod(s)) != n:
            return err("cannot reshape %s to %s" % (a, s))
        return [s]
    if op == "split":
        ax = _axis(attrs["axis"], len(a))
        if ax is None or sum(attrs["sizes"]) != a[ax] or any(x <= 0 for x in attrs["sizes"]):
            return err("split sizes %s do not cover dim" % attrs["sizes"])
        return [[(sz if i == ax else d) for i, d in enumerate(a)] for sz in attrs["sizes"]]
    if op == "concat":
        ax = _axis(attrs["axis"], len(a))
        if ax is None:
            return err("concat axis out of range")
        tot = 0
        for s in ins:
            if len(s) != len(a) or any(s[i] != a[i] for i in range(len(a)) if i != ax):
                return err("concat shapes %s mismatch" % ins)
            tot += s[ax]
        return [[(tot if i == ax else d) for i, d in enumerate(a)]]
    if op == "slice":
        ax = _axis(attrs["axis"], len(a))
        step = attrs.get("step", 1)
        if ax is None or step == 0:
            return err("bad slice")
        n = _slice_len(a[ax], attrs["start"], attrs["end"], step)
        if n <= 0:
            return err("empty slice")
        return [[(n if i == ax else d) for i, d in enumerate(a)]]
    if op == "conv2d":
        x, w = ins[0], ins[1]
        g = attrs.get("groups", 1)
        st = attrs.get("strides", [1, 1]); pd = attrs.get("pads", [0, 0, 0, 0])
        dl = attrs.get("dilations", [1, 1])
        if len(x) != 4 or len(w) != 4:
            return err("conv2d needs NCHW / OIHW")
        if x[1] != w[1] * g or w[0] % g:
            return err("conv2d channels: x %s, w %s, groups %d" % (x, w, g))
        if len(ins) == 3 and list(ins[2]) != [w[0]]:
            return err("conv2d bias shape %s" % ins[2])
        oh = (x[2] + pd[0] + pd[2] - dl[0] * (w[2] - 1) - 1) // st[0] + 1
        ow = (x[3] + pd[1] + pd[3] - dl[1] * (w[3] - 1) - 1) // st[1] + 1
        if oh <= 0 or ow <= 0:
            return err("conv2d output empty")
        return [[x[0], w[0], oh, ow]]
    if op in ("max_pool2d", "avg_pool2d"):
        k = attrs["kernel"]; st = attrs.get("strides", k); pd = attrs.get("pads", [0, 0, 0, 0])
        if len(a) != 4:
            return err("pool needs NCHW")
        if max(pd[0], pd[2]) >= k[0] or max(pd[1], pd[3]) >= k[1]:
            return err("pool padding >= kernel")
        oh = (a[2] + pd[0] + pd[2] - k[0]) // st[0] + 1
        ow = (a[3] + pd[1] + pd[3] - k[1]) // st[1] + 1
        return [[a[0], a[1], oh, ow]]
    if op == "global_avg_pool":
        if len(a) != 4:
            return err("global_avg_pool needs NCHW")
        return [[a[0], a[1], 1, 1]]
    if op == "attention":
        q, k, v = ins[0], ins[1], ins[2]
        if q[-1] != k[-1] or k[-2] != v[-2]:
            return err("attention shapes q %s k %s v %s" % (q, k, v))
        lead = _bcast(_bcast(q[:-2], k[:-2]) or [], v[:-2])
        if lead is None:
            return err("attention batch dims")
        out = lead + [q[-2], v[-1]]
        if len(ins) == 4:
            full = lead + [q[-2], k[-2]]
            if _bcast(full, ins[3]) != full:
                return err("mask %s does not broadcast to %s" % (ins[3], full))
        return [out]
    return err("unknown op " + op)


def check(path):
    """Validate a graph.json against the spec. Returns (g, shapes, dtypes)."""
    errs = []
    with open(path) as f:
        g = json.load(f)
    base = os.path.dirname(os.path.abspath(path))
    if g.get("mcir") != 1 or isinstance(g.get("mcir"), bool):
        errs.append("mcir must be the integer 1")
    for k in ("inputs", "nodes", "outputs"):
        if not isinstance(g.get(k), list):
            errs.append("missing list " + k)
    if errs:
        raise CheckError("\n".join(errs))
    known_top = {"mcir", "name", "inputs", "weights", "nodes", "outputs"}
    for k in g:
        if k not in known_top:
            errs.append("unknown top-level field %s" % k)
    shapes, dtypes, declared = {}, {}, set()

    def declare(nm, where):
        if not isinstance(nm, str) or not nm:
            errs.append("%s: bad tensor name %r" % (where, nm))
        elif nm in declared:
            errs.append("%s: duplicate tensor name %s" % (where, nm))
        declared.add(nm)

    for kind in ("inputs", "weights"):
        for t in g.get(kind, []):
            where = "%s %s" % (kind[:-1], t.get("name"))
            declare(t.get("name"), where)
            allowed = {"name", "dtype", "shape"} | ({"data", "value"} if kind == "weights" else set())
            for k in t:
                if k not in allowed:
                    errs.append("%s: unknown field %s" % (where, k))
            if t.get("dtype") not in DTYPES:
                errs.append("%s: bad dtype" % where)
            s = t.get("shape")
            if not isinstance(s, list) or not all(_is_int(x) and x > 0 for x in s):
                errs.append("%s: bad shape %r" % (where, s))
                continue
            shapes[t["name"]] = list(s)
            dtypes[t["name"]] = t.get("dtype")
            if "data" in t and "value" in t:
                errs.append("%s: both data and value" % where)
            if "value" in t:
                vs = _nested_shape(t["value"])
                if vs != s:
                    errs.append("%s: value shape %s != shape %s" % (where, vs, s))
            if "data" in t:
                p = os.path.join(base, t["data"])
                try:
                    arr = np.load(p, allow_pickle=False)
                except Exception as e:  # noqa
                    errs.append("%s: cannot load %s: %s" % (where, p, e))
                    continue
                if list(arr.shape) != s or not _npy_dtype_ok(arr, t["dtype"]) or not arr.flags.c_contiguous:
                    errs.append("%s: %s has %s %s (want %s %s, C order)" % (
                        where, t["data"], arr.dtype.str, list(arr.shape), t["dtype"], s))
    node_names = set()
    producers = {}
    for i, n in enumerate(g["nodes"]):
        where = "node %s" % n.get("name", "#%d" % i)
        for k in n:
            if k not in ("name", "op", "inputs", "outputs", "attrs"):
                errs.append("%s: unknown field %s" % (where, k))
        if "name" in n:
            if n["name"] in node_names:
                errs.append("%s: duplicate node name" % where)
            node_names.add(n["name"])
        op = n.get("op")
        if op not in OPS:
            errs.append("%s: unknown op %r" % (where, op))
            continue
        lo, hi, spec = OPS[op]
        nin = len(n.get("inputs", []))
        if nin < lo or (hi is not None and nin > hi):
            errs.append("%s: %s takes %s..%s inputs, got %d" % (where, op, lo, hi, nin))
        attrs = n.get("attrs", {})
        for k, v in attrs.items():
            if k not in spec:
                errs.append("%s: unknown attr %s" % (where, k))
                continue
            kind = spec[k][0]
            ok = {"bool": isinstance(v, bool), "int": _is_int(v), "num": _is_num(v),
                  "str": isinstance(v, str),
                  "ints": isinstance(v, list) and all(_is_int(x) for x in v)}[kind]
            if not ok:
                errs.append("%s: attr %s must be %s" % (where, k, kind))
        for k, (kind, req, _) in spec.items():
            if req and k not in attrs:
                errs.append("%s: missing required attr %s" % (where, k))
        nout = len(n.get("outputs", []))
        want_out = len(attrs.get("sizes", [])) if op == "split" else 1
        if nout != want_out:
            errs.append("%s: %d outputs, want %d" % (where, nout, want_out))
        for o in n.get("outputs", []):
            declare(o, where)
            producers[o] = i
    if errs:
        raise CheckError("\n".join(errs))
    # topological order + shape inference
    done, order, state = set(shapes), [], {}

    def visit(i, stack):
        if state.get(i) == 2:
            return
        if state.get(i) == 1:
            raise CheckError("cycle through node %s" % g["nodes"][i].get("name"))
        state[i] = 1
        for t in g["nodes"][i]["inputs"]:
            if t in producers:
                visit(producers[t], stack)
            elif t not in done:
                raise CheckError("node %s: unknown input tensor %s" % (g["nodes"][i].get("name"), t))
        state[i] = 2
        order.append(i)

    for i in range(len(g["nodes"])):
        visit(i, [])
    for i in order:
        n = g["nodes"][i]
        where = "node %s (%s)" % (n.get("name"), n["op"])
        ins = [shapes.get(t) for t in n["inputs"]]
        if any(s is None for s in ins):
            continue
        dts = {dtypes[t] for t in n["inputs"]}
        if len(dts) > 1:
            errs.append("%s: mixed input dtypes %s" % (where, sorted(dts)))
        outs = infer(n["op"], ins, n.get("attrs", {}), errs, where)
        if outs:
            for o, s in zip(n["outputs"], outs):
                shapes[o] = s
                dtypes[o] = dtypes[n["inputs"][0]]
    for o in g["outputs"]:
        if o not in shapes:
            errs.append("output %s is not a known tensor" % o)
    if len(set(g["outputs"])) != len(g["outputs"]):
        errs.append("duplicate graph output")
    if errs:
        raise CheckError("\n".join(errs))
    g["_order"] = order
    return g, shapes, dtypes


# ------------------------------------------------------------ interpreter

def _erf(x):
    try:
        from scipy.special import erf  # noqa
        return erf(x)
    except ImportError:
        import torch
        return torch.erf(torch.from_numpy(np.asarray(x, dtype=np.float64))).numpy()


def _conv2d(x, w, b, st, pd, dl, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pd[0], pd[2]), (pd[1], pd[3])))
    oh = (h + pd[0] + pd[2] - dl[0] * (kh - 1) - 1) // st[0] + 1
    ow = (wd + pd[1] + pd[3] - dl[1] * (kw - 1) - 1) // st[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for gi in range(groups):
        xs = xp[:, gi * cg:(gi + 1) * cg]
        ws = w[gi * og:(gi + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dl[0]: i * dl[0] + st[0] * (oh - 1) + 1: st[0],
                           j * dl[1]: j * dl[1] + st[1] * (ow - 1) + 1: st[1]]
                out[:, gi * og:(gi + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def _pool(x, k, st, pd, mode):
    n, c, h, w = x.shape
    oh = (h + pd[0] + pd[2] - k[0]) // st[0] + 1
    ow = (w + pd[1] + pd[3] - k[1]) // st[1] + 1
    fill = -np.inf if mode == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pd[0], pd[2]), (pd[1], pd[3])), constant_values=fill)
    ones = np.pad(np.ones((h, w)), ((pd[0], pd[2]), (pd[1], pd[3])))
    acc = np.full((n, c, oh, ow), fill)
    cnt = np.zeros((oh, ow))
    for i in range(k[0]):
        for j in range(k[1]):
            sl = (slice(i, i + st[0] * (oh - 1) + 1, st[0]), slice(j, j + st[1] * (ow - 1) + 1, st[1]))
            patch = xp[:, :, sl[0], sl[1]]
            if mode == "max":
                acc = np.maximum(acc, patch)
            else:
                acc = acc + patch
                cnt += ones[sl[0], sl[1]]
    return acc if mode == "max" else acc / cnt


def _softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def eval_node(op, xs, attrs):
    a = xs[0]
    if op == "matmul":
        A, B = xs
        if attrs.get("transpose_a"):
            A = np.swapaxes(A, -1, -2)
        if attrs.get("transpose_b"):
            B = np.swapaxes(B, -1, -2)
        return [np.matmul(A, B)]
    if op in BINARY:
        f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
             "pow": np.power, "max": np.maximum, "min": np.minimum}[op]
        return [f(xs[0], xs[1])]
    if op == "scale":
        return [a * float(np.float32(attrs["value"]))]
    if op in UNARY:
        f = {"relu": lambda x: np.maximum(x, 0), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
             "tanh": np.tanh, "exp": np.exp, "log": np.log, "erf": _erf, "cos": np.cos, "sin": np.sin, "sqrt": np.sqrt,
             "rsqrt": lambda x: 1 / np.sqrt(x), "neg": np.negative, "reciprocal": lambda x: 1 / x,
             "silu": lambda x: x / (1 + np.exp(-x))}[op]
        return [f(a)]
    if op == "gelu":
        if attrs.get("approximate", "none") == "tanh":
            return [0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))]
        return [0.5 * a * (1 + _erf(a / math.sqrt(2)))]
    if op == "softmax":
        return [_softmax(a, attrs.get("axis", -1))]
    if op in ("layernorm", "rmsnorm"):
        ax = _axis(attrs.get("axis", -1), a.ndim)
        axes = tuple(range(ax, a.ndim))
        eps = float(np.float32(attrs.get("eps", 1e-5 if op == "layernorm" else 1e-6)))
        if op == "layernorm":
            mu = a.mean(axis=axes, keepdims=True)
            var = ((a - mu) ** 2).mean(axis=axes, keepdims=True)
            y = (a - mu) / np.sqrt(var + eps) * xs[1]
            if len(xs) > 2:
                y = y + xs[2]
        else:
            y = a / np.sqrt((a * a).mean(axis=axes, keepdims=True) + eps) * xs[1]
        return [y]
    if op in REDUCE:
        f = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max}[op]
        return [f(a, axis=tuple(attrs["axes"]), keepdims=attrs.get("keepdims", True))]
    if op == "transpose":
        return [np.transpose(a, attrs["perm"])]
    if op == "reshape":
        return [a.reshape(attrs["shape"])]
    if op == "split":
        cuts = np.cumsum(attrs["sizes"])[:-1]
        return np.split(a, cuts, axis=attrs["axis"])
    if op == "concat":
        return [np.concatenate(xs, axis=attrs["axis"])]
    if op == "slice":
        idx = [slice(None)] * a.ndim
        idx[attrs["axis"]] = slice(attrs["start"], attrs["end"], attrs.get("step", 1))
        return [a[tuple(idx)]]
    if op == "conv2d":
        return [_conv2d(a, xs[1], xs[2] if len(xs) > 2 else None, attrs.get("strides", [1, 1]),
                        attrs.get("pads", [0, 0, 0, 0]), attrs.get("dilations", [1, 1]),
                        attrs.get("groups", 1))]
    if op in ("max_pool2d", "avg_pool2d"):
        k = attrs["kernel"]
        return [_pool(a, k, attrs.get("strides", k), attrs.get("pads", [0, 0, 0, 0]), op[:3])]
    if op == "global_avg_pool":
        return [a.mean(axis=(2, 3), keepdims=True)]
    if op == "attention":
        q, k, v = xs[:3]
        d = q.shape[-1]
        sc = float(np.float32(attrs["scale"])) if "scale" in attrs else 1 / math.sqrt(d)
        s = np.matmul(q, np.swapaxes(k, -1, -2)) * sc
        if len(xs) > 3:
            s = s + xs[3]
        if attrs.get("causal"):
            nq, nk = q.shape[-2], k.shape[-2]
            i = np.arange(nq)[:, None]
            j = np.arange(nk)[None, :]
            s = np.where(j > i + (nk - nq), -np.inf, s)
        return [np.matmul(_softmax(s, -1), v)]
    raise ValueError(op)


def load_weight(t, base):
    if "value" in t:
        v = np.asarray(t["value"], dtype=np.float64).astype(np.float32)
        return mcir_seed.round_to_dtype(v, t["dtype"]).reshape(t["shape"])
    if "data" in t:
        arr = np.load(os.path.join(base, t["data"]))
        if t["dtype"] == "bf16":
            return mcir_seed.bf16_bits_to_f32(arr)
        return arr.astype(np.float32)
    return mcir_seed.fill(t["name"], t["shape"], t["dtype"], "weight", 0)


def interpret(path, given=None, seed=0):
    """Run graph.json in numpy. `given`: {input name: array}; others seeded."""
    g, shapes, dtypes = check(path)
    base = os.path.dirname(os.path.abspath(path))
    env = {}
    for t in g["inputs"]:
        if given and t["name"] in given:
            env[t["name"]] = mcir_seed.round_to_dtype(np.asarray(given[t["name"]], np.float32), t["dtype"])
        else:
            env[t["name"]] = mcir_seed.fill(t["name"], t["shape"], t["dtype"], "input", seed)
    for t in g.get("weights", []):
        env[t["name"]] = load_weight(t, base)
    env = {k: v.astype(np.float64) for k, v in env.items()}
    for i in g["_order"]:
        n = g["nodes"][i]
        outs = eval_node(n["op"], [env[t] for t in n["inputs"]], n.get("attrs", {}))
        for o, v in zip(n["outputs"], outs):
            v = mcir_seed.round_to_dtype(np.asarray(v, dtype=np.float64).astype(np.float32), dtypes[o])
            env[o] = v.astype(np.float64)
    return {o: env[o].astype(np.float32) for o in g["outputs"]}
