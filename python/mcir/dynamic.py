"""Symbolic dimensions from Python: one compilation for a range of sizes
(docs/graph-format.md "Symbolic dimensions", docs/python.md).

    seq = mcir.Dim("seq", min=1, max=128)
    g = mcir.capture(model, (x,), dynamic_shapes=({1: seq},))
    c = mcir.compile(g)            # once
    c(x[:, :37]); c(x[:, :100])    # any size in range, nothing compiled

How: the capture runs at the example size and again at another size of
each dim (one dim changed at a time; every input axis that names it
changes with it). The captures must be the same graph but for integers;
an integer that moves is the dim where it equals the dim's size at both,
else, in a reshape's shape, -1 (mcir infers it). Anything else that moves —
a constant (weight) whose shape or values depend on the size, a float
attribute, a slice bound that is not the size, a change of structure
(control flow on sizes) — is an UnsupportedError naming the op and the
model's line: nothing is compiled that would be wrong at other sizes.
Positions (arange from 0) and causal masks built from a mask buffer are
captured as nodes (arange, greater, where) so
that they follow the dim, and so is what is computed from positions (T5's
relative position buckets and their embedding). An arange end or slice
bound that is the size plus a constant is written "seq+1"; a one-element
constant that is the size plus a constant (a count of past tokens the
trace saw as a number) becomes nodes computing it, argmax(arange(seq)) +
c + 1. A constant whose extent is the dim's (a rotary
table, a slice of a buffer) and that is, at both sizes, the first rows of
its value at the largest size (a third capture, there) becomes that value
and a slice [0:dim] of it.
"""
from .capture import UnsupportedError, _where

# the attributes a dim's name may stand in (docs/graph-format.md)
_NAMED = {("reshape", "shape"), ("arange", "end"), ("slice", "start"), ("slice", "end")}


class Dim:
    """A symbolic dimension: its name in graph.json and its range. max
    None: twice the example's size. The arena is planned for max."""

    def __init__(self, name, min=1, max=None):
        if not isinstance(name, str) or not name:
            raise ValueError("Dim: a name (str) is needed")
        if min < 1 or (max is not None and max < min):
            raise ValueError("Dim %r: 1 <= min <= max (min %r, max %r)" % (name, min, max))
        self.name, self.min, self.max = name, int(min), None if max is None else int(max)

    def __repr__(self):
        return "Dim(%r, min=%d, max=%s)" % (self.name, self.min, self.max)


def parse_dynamic_shapes(spec, example_inputs):
    """capture's dynamic_shapes (one entry per input: None or {axis:
    Dim}; or a dict input index -> {axis: Dim}) as ({input index: {axis:
    name}}, {name: (min, max)})."""
    import torch
    if isinstance(spec, dict):
        items = list(spec.items())
    else:
        spec = list(spec)
        if len(spec) != len(example_inputs):
            raise ValueError("dynamic_shapes has %d entries, there are %d inputs" %
                             (len(spec), len(example_inputs)))
        items = list(enumerate(spec))
    axes, dims = {}, {}
    for i, entry in items:
        if entry is None:
            continue
        x = example_inputs[i]
        if not isinstance(x, torch.Tensor):
            raise ValueError("dynamic_shapes[%d]: input %d is not a tensor" % (i, i))
        for axis, d in dict(entry).items():
            if not isinstance(d, Dim):
                raise ValueError("dynamic_shapes[%d][%r]: an mcir.Dim is needed, not %r" %
                                 (i, axis, d))
            axis %= x.dim()
            size = int(x.shape[axis])
            hi = d.max if d.max is not None else max(2 * size, d.min)
            if not d.min <= size <= hi:
                raise ValueError("input %d has %d in dim %d, outside %r's range [%d, %d]" %
                                 (i, size, axis, d.name, d.min, hi))
            if d.name in dims and dims[d.name] != (d.min, hi):
                raise ValueError("two ranges for dim %r" % d.name)
            dims[d.name] = (d.min, hi)
            axes.setdefault(i, {})[axis] = d.name
    return axes, dims


def resized(x, axis, size):
    """x with its extent along axis made size: cut, or continued with its
    own values from the start (token ids stay token ids)."""
    import torch
    n = x.shape[axis]
    if size <= n:
        return x.narrow(axis, 0, size).contiguous()
    reps = -(-size // n)
    return torch.cat([x] * reps, dim=axis).narrow(axis, 0, size).contiguous()


def _sizes_of(args, axes, int_args):
    """Each dim's size in args (inputs that disagree are an error)."""
    out = {}
    for i, ax in axes.items():
        for a, nm in ax.items():
            v = int(args[i].shape[a])
            if out.setdefault(nm, v) != v:
                raise ValueError("inputs disagree on dim %r: %d and %d" % (nm, out[nm], v))
    for i, nm in int_args.items():
        out.setdefault(nm, int(args[i]))
    return out


def _at(args, axes, int_args, name, size):
    """args with dim name at size."""
    out = list(args)
    for i, ax in axes.items():
        for a, nm in ax.items():
            if nm == name:
                out[i] = resized(out[i], a, size)
    for i, nm in int_args.items():
        if nm == name:
            out[i] = size
    return tuple(out)


def _at_all(args, axes, int_args, sizes):
    for name, v in sizes.items():
        args = _at(args, axes, int_args, name, v)
    return args


def _constants_at_largest(g, top, moved, dims):
    """Constants computed from a size (positions' embeddings, rotary
    tables, a slice of a buffer): where each is, at every size, the first
    `dim` rows of its value at the largest size, it becomes that value and
    a slice [0:dim] of it; else it is refused."""
    import numpy as np
    vt = top.values
    pre = []
    for w, ax in moved.items():
        spec = next(x for x in g.weights if x["name"] == w)
        big = vt.get(w)
        if big is None or big.ndim != len(spec["shape"]):
            raise UnsupportedError("constant %s, computed from sizes at capture, changes with dim "
                                   "'%s' and is not in the capture at its largest size: the graph "
                                   "is not compiled for a range" %
                                   (_origin(g, w), next(iter(ax.values()))))
        want = [dims[ax[k]][1] if k in ax else e for k, e in enumerate(spec["shape"])]
        prefix = tuple(slice(0, e) for e in spec["shape"])
        if list(big.shape) != want or not np.array_equal(big[prefix], g.values[w], equal_nan=True):
            nm = next(iter(ax.values()))
            raise UnsupportedError(
                "constant %s, computed from sizes at capture, changes with dim '%s' and is not "
                "the first rows of its value at %s=%d: the graph is not compiled for a range" %
                (_origin(g, w), nm, nm, dims[nm][1]))
        cur = w
        spec["shape"] = list(want)
        g.values[w] = np.ascontiguousarray(big)
        for k in sorted(ax):
            out = "%s.%s%d" % (w, ax[k], k)
            pre.append({"name": out, "op": "slice", "inputs": [cur], "outputs": [out],
                        "attrs": {"axis": k, "start": 0, "end": ax[k], "step": 1}})
            cur = out
        for n in g.nodes:
            n["inputs"] = [cur if i == w else i for i in n["inputs"]]
        g.outputs = [cur if o == w else o for o in g.outputs]
    g.nodes[:0] = pre


def _probes(a, lo, hi):
    """Other sizes to capture at, nearest first, 1 last (size-1 axes
    squeeze and broadcast differently)."""
    c = []
    for k in (1, 2, 3, 5, 8):
        for b in (a + k, a - k):
            if lo <= b <= hi and b != a and b > 1 and b not in c:
                c.append(b)
    if lo <= 1 < a and 1 not in c:
        c.append(1)
    return c


def capture_dynamic(trace, args, axes, int_args, dims):
    """The Graph trace(args) with dims declared and named.

    trace: example inputs -> Graph (one concrete capture); axes: {input
    index: {axis: dim name}}; int_args: {input index: dim name} for inputs
    that are the size itself (Dynamo's SymInt arguments); dims: {name:
    (min, max)}."""
    sizes = _sizes_of(args, axes, int_args)
    base = trace(tuple(args))
    marks = {}     # location -> set of (dim, kind), kind "name" or "moves"
    moved = {}     # weight -> {axis: dim} (constants whose extent is the dim)
    scalars = {}   # weight -> (dim, c): one-element constants that are the dim's size + c
    for name in dims:
        a = sizes[name]
        other, err = None, None
        for b in _probes(a, *dims[name]):
            try:
                other = trace(_at(args, axes, int_args, name, b))
                break
            except Exception as e:   # noqa: BLE001 — another size may trace
                err = e
        if other is None:
            if err is not None:
                raise err
            raise UnsupportedError("dim %r ranges over [%d, %d]: no other size to capture at" %
                                   ((name,) + dims[name]))
        _diff(base, other, name, a, b, marks, moved, scalars)
    _apply(base, marks, dims, sizes)
    if moved or scalars:
        top_sizes = {k: hi for k, (lo, hi) in dims.items()}
        top = trace(_at_all(args, axes, int_args, top_sizes))
        for w, (nm, c) in scalars.items():   # the same c at the largest size
            t = top.values.get(w)
            if t is None or _scalar_follows(base.values[w], t, sizes[nm], top_sizes[nm]) != c:
                _refuse("constant %s, computed from sizes at capture," % _origin(base, w), nm,
                        sizes[nm], top_sizes[nm])
        if moved:
            _constants_at_largest(base, top, moved, dims)
        _scalars_as_nodes(base, scalars, dims)
    base.dims = dict(dims)
    return base


def _origin(g, tensor):
    n = g.origin.get(tensor) if hasattr(g, "origin") else None
    if n is None:
        return "'%s'" % tensor
    op = getattr(n.target, "_schema", None)
    op = "aten::" + op.name.split("::")[-1] if op is not None else str(n.target)
    return "'%s' (%s%s)" % (tensor, op, _where(n))


def _refuse(what, name, a, b):
    raise UnsupportedError("%s changes with dim '%s' (at %s=%d and %s=%d) in a way mcir cannot "
                           "name: the graph is not compiled for a range" %
                           (what, name, name, a, name, b))


def _scalar_follows(v, u, a, b):
    """c where one-element constants v (at size a) and u (at size b) are
    size + c at both (an integer c), else None."""
    import numpy as np
    if v.size != 1 or u.size != 1 or v.dtype.kind not in "iuf":
        return None
    x, y = float(v.reshape(-1)[0]), float(u.reshape(-1)[0])
    if x != np.round(x) or x - a != y - b or abs(x) > 2 ** 40:
        return None
    return int(x - a)


def _scalars_as_nodes(g, scalars, dims):
    """One-element constants that are a dim's size + c (T5's count of past
    tokens added to its positions) as nodes computing it at run time:
    argmax(arange(dim)) + c + 1, whose arange end names the dim."""
    import numpy as np
    pre = []
    for w, (nm, c) in scalars.items():
        spec = next(x for x in g.weights if x["name"] == w)
        if dims[nm][0] < 1:
            raise UnsupportedError("constant %s is dim '%s' plus %d, and the dim can be 0" %
                                   (_origin(g, w), nm, c))
        pos, last, one, val = (g.fresh(w + ".pos"), g.fresh(w + ".last"), g.fresh(w + ".plus"),
                               g.fresh(w + ".size"))
        g.weights.append({"name": one, "dtype": "i64", "shape": []})
        g.values[one] = np.array(c + 1, np.int64)
        pre += [{"name": pos, "op": "arange", "inputs": [], "outputs": [pos],
                 "attrs": {"end": nm, "dtype": "i64"}},
                {"name": last, "op": "argmax", "inputs": [pos], "outputs": [last],
                 "attrs": {"axis": 0, "keepdims": False}},
                {"name": val, "op": "add", "inputs": [last, one], "outputs": [val]}]
        cur = val
        if spec["dtype"] != "i64":
            cast = g.fresh(w + ".cast")
            pre.append({"name": cast, "op": "cast", "inputs": [cur], "outputs": [cast],
                        "attrs": {"to": spec["dtype"]}})
            cur = cast
        if list(spec["shape"]) != []:
            rs = g.fresh(w + ".shaped")
            pre.append({"name": rs, "op": "reshape", "inputs": [cur], "outputs": [rs],
                        "attrs": {"shape": list(spec["shape"])}})
            cur = rs
        for n in g.nodes:
            n["inputs"] = [cur if i == w else i for i in n["inputs"]]
        g.outputs = [cur if o == w else o for o in g.outputs]
        g.weights = [x for x in g.weights if x["name"] != w]
        g.values.pop(w, None)
    g.nodes[:0] = pre


def _diff(A, B, name, a, b, marks, moved, scalars=None):
    """Marks every integer of A that differs in B (graphs captured at
    name = a and name = b); anything else that differs is refused."""
    import numpy as np
    if [n["op"] for n in A.nodes] != [n["op"] for n in B.nodes] or \
            [n["outputs"] for n in A.nodes] != [n["outputs"] for n in B.nodes] or \
            len(A.inputs) != len(B.inputs) or len(A.outputs) != len(B.outputs):
        first = next((i for i, (x, y) in enumerate(zip(A.nodes, B.nodes))
                      if (x["op"], x["outputs"]) != (y["op"], y["outputs"])),
                     min(len(A.nodes), len(B.nodes)))
        where = _origin(A, A.nodes[first]["outputs"][0]) if first < len(A.nodes) else "the end"
        _refuse("the captured graph's structure (%d nodes against %d; first difference at %s: "
                "control flow on a size?)" % (len(A.nodes), len(B.nodes), where), name, a, b)

    def ints(loc, x, y, what):
        if isinstance(x, bool) or isinstance(y, bool) or not isinstance(x, int) or \
                not isinstance(y, int):
            if x != y:
                _refuse(what, name, a, b)
            return
        if x != y:
            kind = "name" if (x, y) == (a, b) else ("plus", x - a) if x - a == y - b else "moves"
            marks.setdefault(loc, set()).add((name, kind))

    for i, (x, y) in enumerate(zip(A.inputs, B.inputs)):
        if x["dtype"] != y["dtype"] or len(x["shape"]) != len(y["shape"]):
            _refuse("input '%s'" % x["name"], name, a, b)
        for j, (p, q) in enumerate(zip(x["shape"], y["shape"])):
            ints(("input", i, j), p, q, "input '%s'" % x["name"])
    wa = {w["name"]: w for w in A.weights}
    wb = {w["name"]: w for w in B.weights}
    if set(wa) != set(wb):
        odd = sorted(set(wa) ^ set(wb))[0]
        _refuse("the constants (%s)" % _origin(A if odd in wa else B, odd), name, a, b)
    for w in A.weights:
        v, u = A.values[w["name"]], B.values[w["name"]]
        sa, sb = w["shape"], wb[w["name"]]["shape"]
        if sa != sb and len(sa) == len(sb) and \
                all(p == q or (p, q) == (a, b) for p, q in zip(sa, sb)):
            # its extent is the dim's: the first rows of a larger constant?
            ax = moved.setdefault(w["name"], {})
            for k, (p, q) in enumerate(zip(sa, sb)):
                if p != q:
                    ax[k] = name
            cut = tuple(slice(0, min(p, q)) for p, q in zip(sa, sb))
            if np.array_equal(v[cut], u[cut], equal_nan=True):
                continue
        if sa != sb or v.shape != u.shape or not np.array_equal(v, u, equal_nan=True):
            c = _scalar_follows(v, u, a, b) if sa == sb and scalars is not None else None
            if c is not None and scalars.get(w["name"], (name, c)) == (name, c):
                scalars[w["name"]] = (name, c)
                continue
            _refuse("constant %s, computed from sizes at capture," % _origin(A, w["name"]),
                    name, a, b)
    for k, (x, y) in enumerate(zip(A.nodes, B.nodes)):
        if x["inputs"] != y["inputs"] or set(x.get("attrs", {})) != set(y.get("attrs", {})):
            _refuse("node %s" % _origin(A, x["outputs"][0]), name, a, b)
        for at, p in x.get("attrs", {}).items():
            q = y["attrs"][at]
            what = "attribute '%s' of %s" % (at, _origin(A, x["outputs"][0]))
            if isinstance(p, list) and isinstance(q, list) and len(p) == len(q):
                for j, (pp, qq) in enumerate(zip(p, q)):
                    ints(("node", k, at, j), pp, qq, what)
            else:
                ints(("node", k, at, None), p, q, what)
    if A.outputs != B.outputs:
        _refuse("the outputs", name, a, b)


def _apply(g, marks, dims, sizes):
    """The marked integers of g as dim names or -1 (reshape), or refused."""
    minus = {}
    for loc, ms in sorted(marks.items(), key=lambda kv: str(kv[0])):
        names = {nm for nm, kind in ms if kind == "name"}
        named = len(ms) == 1 and len(names) == 1
        if loc[0] == "input":
            _, i, j = loc
            if not named:
                raise UnsupportedError("input '%s' dim %d follows %s but is not one of them: an "
                                       "input's extent is a dim or an integer" %
                                       (g.inputs[i]["name"], j, " and ".join(sorted(
                                           nm for nm, _ in ms))))
            g.inputs[i]["shape"][j] = names.pop()
            continue
        _, k, at, j = loc
        node = g.nodes[k]
        what = "attribute '%s' of %s" % (at, _origin(g, node["outputs"][0]))
        plus = [(nm, kind[1]) for nm, kind in ms if isinstance(kind, tuple)]
        if len(ms) == 1 and plus and j is None and (node["op"], at) in _NAMED:
            # the dim's size + c (T5's key length, past + 1): "dim+c" (an
            # arange's end, a slice bound; a reshape's entries take -1)
            nm, c = plus[0]
            names = {"%s%+d" % (nm, c)}
            named = True
        if named and (node["op"], at) in _NAMED:
            nm = names.pop()
            if j is None:
                node["attrs"][at] = nm
            else:
                node["attrs"][at][j] = nm
            continue
        if node["op"] == "reshape" and at == "shape":
            if k in minus:
                raise UnsupportedError("%s: two extents (%d and %d) are functions of %s other "
                                       "than the dim itself; mcir's reshape infers one (-1)" %
                                       (what, minus[k], j, " and ".join(sorted(dims))))
            minus[k] = j
            node["attrs"][at][j] = -1
            continue
        dn = " and ".join(sorted(nm for nm, _ in ms))
        raise UnsupportedError(
            "%s changes with dim %s%s: mcir names a dim only in input shapes, reshape shapes, "
            "arange's end and slice bounds, and only where it is the size itself; the graph is "
            "not compiled for a range" %
            (what, dn, " (it is the size, but this attribute takes integers)" if named else ""))
