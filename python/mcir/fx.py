"""Capture of a torch.nn.Module into an mcir Graph with torch.fx.

The module is traced symbolically (torch.fx, torch >= 1.13), its shapes are
propagated on the example inputs, and every FX node becomes mcir ops of the
op table (docs/ops.md): modules (Linear, LayerNorm, Conv2d, BatchNorm2d in
eval, activations, pools, Dropout in eval, Flatten), functions and tensor
methods of the same coverage as the ONNX importer. Shapes come from the
propagation, so reshapes driven by x.size() need no shape arithmetic here.
Parameters and buffers become weights whose values stay in memory.

An op mcir has no lowering for raises UnsupportedError naming the op and
the line of the model's source that called it.
"""
import math
import operator

from .graph import Graph
from ._lib import McirError


class UnsupportedError(McirError):
    """The model uses an op mcir cannot take (the message names it and its
    source line)."""


def _dtype(t):
    import torch
    m = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
    if t not in m:
        raise UnsupportedError("dtype %s: mcir runs f32, f16 and bf16 tensors (integer "
                               "inputs such as token ids are not supported yet)" % t)
    return m[t]


class _Capture:
    def __init__(self, gm, name):
        self.gm = gm
        self.g = Graph(name)
        self.env = {}          # fx node -> mcir tensor name, or a Python value
        # aten's batched matmul flattens leading dims (view to 3-D, bmm, view
        # back): a 3-D name -> (the N-D tensor it flattens, its shape), so the
        # capture can write one N-D matmul, the form the attention rules know
        self.merged = {}
        self.modules = dict(gm.named_modules())

    # --------------------------------------------------------------- helpers
    def where(self, n):
        # innermost frame first: the model's own line, not torch's
        for line in (n.stack_trace or "").splitlines():
            line = line.strip()
            if line.startswith("File ") and "/torch/" not in line:
                return " (%s)" % line
        return ""

    def unsupported(self, n, what):
        raise UnsupportedError("%s: %s is not supported by mcir%s" %
                               (n.name, what, self.where(n)))

    def meta(self, n):
        tm = n.meta.get("tensor_meta")
        if tm is None or not hasattr(tm, "shape"):
            self.unsupported(n, "a node without one tensor result (%s)" % n.target)
        return list(tm.shape), _dtype(tm.dtype)

    def arg(self, a):
        import torch.fx
        if isinstance(a, torch.fx.Node):
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self.arg(x) for x in a)
        return a

    def const(self, value, dtype, like=None):
        return self.g.weight("const", dtype, [], [float(value)])

    def tensor(self, v, n, dtype):
        """An operand as a tensor name: scalars become scalar weights."""
        if isinstance(v, str):
            return v
        if isinstance(v, (int, float)):
            return self.const(v, dtype)
        self.unsupported(n, "an operand of type %s" % type(v).__name__)

    def param(self, n, name, value):
        return self.g.weight(name, _dtype(value.dtype), list(value.shape), value)

    # ------------------------------------------------------------- lowering
    def run(self, example_inputs):
        import torch
        from torch.fx.passes.shape_prop import ShapeProp
        ShapeProp(self.gm).propagate(*example_inputs)
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                shape, dt = self.meta(n)
                self.env[n] = self.g.input(n.name, dt, shape)
            elif n.op == "get_attr":
                v = self.gm
                for part in n.target.split("."):
                    v = getattr(v, part)
                if isinstance(v, torch.Tensor):
                    self.env[n] = self.param(n, n.target, v)
                else:
                    self.env[n] = v
            elif n.op == "output":
                outs = n.args[0]
                outs = outs if isinstance(outs, (list, tuple)) else [outs]
                for o in outs:
                    name = self.env[o]
                    if name in self.g.outputs or name in self.g.values or \
                            any(i["name"] == name for i in self.g.inputs):
                        name = self.g.node("scale", [name], attrs={"value": 1.0})
                    self.g.outputs.append(name)
            elif n.op == "call_module":
                self.env[n] = self.module(n, self.modules[n.target])
            elif n.op == "call_function":
                self.env[n] = self.function(n, n.target)
            elif n.op == "call_method":
                self.env[n] = self.method(n, n.target)
            else:
                self.unsupported(n, "FX op %s" % n.op)
        self.g.prune()
        return self.g

    def linear(self, n, x, weight, bias, name):
        w = self.param(n, name + ".weight", weight)
        y = self.g.node("matmul", [x, w], name, attrs={"transpose_b": True})
        if bias is not None:
            y = self.g.node("add", [y, self.param(n, name + ".bias", bias)], name + ".bias")
        return y

    def module(self, n, m):
        import torch.nn as nn
        x = self.arg(n.args[0]) if n.args else None
        name = n.target
        if isinstance(m, nn.Linear):
            return self.linear(n, x, m.weight, m.bias, name)
        if isinstance(m, nn.LayerNorm):
            axis = -len(m.normalized_shape)
            ins = [x, self.param(n, name + ".weight", m.weight)] if m.weight is not None else None
            if ins is None:
                self.unsupported(n, "LayerNorm without elementwise_affine")
            if m.bias is not None:
                ins.append(self.param(n, name + ".bias", m.bias))
            return self.g.node("layernorm", ins, name, attrs={"axis": axis, "eps": m.eps})
        if isinstance(m, nn.Conv2d):
            if m.padding_mode != "zeros" or isinstance(m.padding, str):
                self.unsupported(n, "Conv2d padding '%s'" % (m.padding,))
            ph, pw = m.padding
            ins = [x, self.param(n, name + ".weight", m.weight)]
            if m.bias is not None:
                ins.append(self.param(n, name + ".bias", m.bias))
            return self.g.node("conv2d", ins, name, attrs={
                "strides": list(m.stride), "pads": [ph, pw, ph, pw],
                "dilations": list(m.dilation), "groups": m.groups})
        if isinstance(m, nn.BatchNorm2d):
            if m.training or m.running_mean is None:
                self.unsupported(n, "BatchNorm2d in training mode")
            import torch
            scale = m.weight / torch.sqrt(m.running_var + m.eps) if m.weight is not None \
                else 1.0 / torch.sqrt(m.running_var + m.eps)
            shift = (m.bias if m.bias is not None else 0) - m.running_mean * scale
            c = scale.shape[0]
            s = self.g.weight(name + ".scale", "f32", [c, 1, 1], scale.reshape(c, 1, 1))
            b = self.g.weight(name + ".shift", "f32", [c, 1, 1], shift.reshape(c, 1, 1))
            y = self.g.node("mul", [x, s], name + ".mul")
            return self.g.node("add", [y, b], name)
        simple = {nn.ReLU: "relu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.SiLU: "silu"}
        for cls, op in simple.items():
            if isinstance(m, cls):
                return self.g.node(op, [x], name)
        if isinstance(m, nn.GELU):
            return self.g.node("gelu", [x], name,
                               attrs={"approximate": getattr(m, "approximate", "none")})
        if isinstance(m, (nn.Dropout, nn.Identity)):
            if isinstance(m, nn.Dropout) and m.training and m.p > 0:
                self.unsupported(n, "Dropout in training mode")
            return x
        if isinstance(m, nn.Softmax):
            return self.g.node("softmax", [x], name, attrs={"axis": m.dim if m.dim is not None
                                                           else -1})
        if isinstance(m, (nn.MaxPool2d, nn.AvgPool2d)):
            k = _pair(m.kernel_size)
            s = _pair(m.stride if m.stride is not None else m.kernel_size)
            p = _pair(m.padding)
            if getattr(m, "ceil_mode", False) or (isinstance(m, nn.MaxPool2d) and
                                                   _pair(m.dilation) != [1, 1]):
                self.unsupported(n, type(m).__name__ + " with ceil_mode or dilation")
            op = "max_pool2d" if isinstance(m, nn.MaxPool2d) else "avg_pool2d"
            return self.g.node(op, [x], name, attrs={"kernel": k, "strides": s,
                                                     "pads": [p[0], p[1], p[0], p[1]]})
        if isinstance(m, nn.AdaptiveAvgPool2d):
            if _pair(m.output_size) != [1, 1]:
                self.unsupported(n, "AdaptiveAvgPool2d to %s" % (m.output_size,))
            return self.g.node("global_avg_pool", [x], name)
        if isinstance(m, nn.Flatten):
            return self.reshape(n, x)
        self.unsupported(n, "module %s" % type(m).__name__)

    def reshape(self, n, x):
        shape, _ = self.meta(n)
        return self.g.node("reshape", [x], n.name, attrs={"shape": shape})

    def binary(self, n, op, a, b):
        _, dt = self.meta(n)
        return self.g.node(op, [self.tensor(a, n, dt), self.tensor(b, n, dt)], n.name)

    def function(self, n, f):
        import torch
        import torch.nn.functional as F
        args = [self.arg(a) for a in n.args]
        kw = {k: self.arg(v) for k, v in n.kwargs.items()}
        if hasattr(f, "_schema"):
            return self.aten(n, f._schema.name.split("::")[-1], args, kw)
        bins = {operator.add: "add", torch.add: "add", operator.sub: "sub", torch.sub: "sub",
                operator.mul: "mul", torch.mul: "mul", operator.truediv: "div",
                torch.div: "div", torch.pow: "pow", operator.pow: "pow",
                torch.maximum: "max", torch.minimum: "min"}
        if f in bins:
            a, b = args[0], args[1]
            if isinstance(a, (int, float)) and not isinstance(b, (int, float)) and \
                    bins[f] in ("add", "mul"):
                a, b = b, a
            return self.binary(n, bins[f], a, b)
        unary = {torch.relu: "relu", F.relu: "relu", torch.sigmoid: "sigmoid",
                 torch.tanh: "tanh", torch.exp: "exp", torch.log: "log", torch.erf: "erf",
                 torch.sqrt: "sqrt", torch.rsqrt: "rsqrt", torch.neg: "neg",
                 operator.neg: "neg", F.silu: "silu", torch.reciprocal: "reciprocal"}
        if f in unary:
            return self.g.node(unary[f], [args[0]], n.name)
        if f is F.gelu:
            return self.g.node("gelu", [args[0]], n.name,
                               attrs={"approximate": kw.get("approximate", "none")})
        if f in (torch.matmul, operator.matmul, torch.bmm):
            return self.g.node("matmul", [args[0], args[1]], n.name)
        if f is F.linear:
            w = args[1] if len(args) > 1 else kw["weight"]
            b = args[2] if len(args) > 2 else kw.get("bias")
            y = self.g.node("matmul", [args[0], w], n.name, attrs={"transpose_b": True})
            return self.g.node("add", [y, b], n.name + ".bias") if b is not None else y
        if f in (F.softmax, torch.softmax):
            dim = args[1] if len(args) > 1 else kw.get("dim", -1)
            return self.g.node("softmax", [args[0]], n.name, attrs={"axis": dim})
        if f is F.layer_norm:
            x, ns = args[0], args[1]
            w = args[2] if len(args) > 2 else kw.get("weight")
            b = args[3] if len(args) > 3 else kw.get("bias")
            eps = args[4] if len(args) > 4 else kw.get("eps", 1e-5)
            if w is None:
                self.unsupported(n, "layer_norm without weight")
            ins = [x, w] + ([b] if b is not None else [])
            return self.g.node("layernorm", ins, n.name, attrs={"axis": -len(ns), "eps": eps})
        if f is torch.cat:
            dim = args[1] if len(args) > 1 else kw.get("dim", 0)
            return self.g.node("concat", list(args[0]), n.name, attrs={"axis": dim})
        if f is torch.transpose:
            return self.transpose(n, args[0], args[1], args[2])
        if f in (torch.flatten, torch.reshape):
            return self.reshape(n, args[0])
        if f is getattr(F, "scaled_dot_product_attention", None):
            q, k, v = args[:3]
            attrs = {"causal": bool(kw.get("is_causal", False))}
            if kw.get("scale") is not None:
                attrs["scale"] = kw["scale"]
            ins = [q, k, v] + ([kw["attn_mask"]] if kw.get("attn_mask") is not None else [])
            return self.g.node("attention", ins, n.name, attrs=attrs)
        if f in (torch.mean, torch.sum, torch.amax):
            return self.reduce(n, {torch.mean: "reduce_mean", torch.sum: "reduce_sum",
                                   torch.amax: "reduce_max"}[f], args, kw)
        if f is operator.getitem:
            seq, idx = args
            if isinstance(seq, (list, tuple)):
                return seq[idx]
            return self.getitem(n, seq, idx)
        if f is getattr:
            return None   # x.shape and the like: shapes come from propagation
        self.unsupported(n, "function %s" % getattr(f, "__name__", f))

    def aten(self, n, op, args, kw):
        """ATen ops, as make_fx (and torch.export) record them."""
        x = args[0] if args else None
        if op.endswith("_") and not op.startswith("_"):
            # in place (relu_, add_): the functional op, and later readers of
            # the mutated tensor see its result
            y = self.aten(n, op[:-1], args, kw)
            import torch.fx
            if isinstance(n.args[0], torch.fx.Node):
                self.env[n.args[0]] = y
            return y
        same = ("clone", "detach", "alias", "contiguous", "lift_fresh_copy", "dropout")
        if op in same:
            return x
        if op == "_to_copy":
            shape, dt = self.meta(n)
            return x
        if op in ("view", "_unsafe_view", "_reshape_alias", "reshape", "unsqueeze", "squeeze",
                  "flatten"):
            shape, _ = self.meta(n)
            if x in self.merged and self.merged[x][1] == shape:
                return self.merged[x][0]          # back to the N-D tensor it came from
            src = self.merged[x][1] if x in self.merged else \
                list(n.args[0].meta["tensor_meta"].shape)
            y = self.reshape(n, x)
            base = self.merged[x][0] if x in self.merged else x
            if len(shape) == 3 and len(src) > 3 and src[-2:] == shape[-2:] and \
                    _numel(src[:-2]) == shape[0]:
                self.merged[y] = (base, src)      # leading dims merged for a bmm
            return y
        if op == "expand":
            shape, _ = self.meta(n)
            src = list(n.args[0].meta["tensor_meta"].shape)
            if src == shape:
                return x
            if [d for d in src if d != 1] == [d for d in shape if d != 1] and \
                    _numel(src) == _numel(shape):
                return self.reshape(n, x)
            self.unsupported(n, "aten::expand that broadcasts %s to %s" % (src, shape))
        if op == "t":
            return self.g.node("transpose", [x], n.name, attrs={"perm": [1, 0]})
        if op == "transpose":
            return self.transpose(n, x, args[1], args[2])
        if op == "permute":
            rank = len(self.meta(n)[0])
            return self.g.node("transpose", [x], n.name,
                               attrs={"perm": [p % rank for p in args[1]]})
        if op == "bmm" and x in self.merged and args[1] in self.merged:
            (a, sa), (b, sb) = self.merged[x], self.merged[args[1]]
            if sa[:-2] == sb[:-2]:
                y = self.g.node("matmul", [a, b], n.name)
                shape, _ = self.meta(n)
                flat = self.g.node("reshape", [y], n.name + ".flat", attrs={"shape": shape})
                self.merged[flat] = (y, sa[:-2] + [sa[-2], sb[-1]])
                return flat
        if op in ("mm", "bmm", "matmul"):
            return self.g.node("matmul", [x, args[1]], n.name)
        if op == "addmm":
            y = self.g.node("matmul", [args[1], args[2]], n.name)
            return self.g.node("add", [y, x], n.name + ".bias")
        bins = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "pow": "pow",
                "maximum": "max", "minimum": "min"}
        if op in bins:
            if kw.get("alpha", 1) != 1 or (len(args) > 2 and args[2] != 1):
                self.unsupported(n, "aten::%s with alpha" % op)
            a, b = args[0], args[1]
            if isinstance(a, (int, float)) and bins[op] in ("add", "mul"):
                a, b = b, a
            return self.binary(n, bins[op], a, b)
        if op == "rsub":
            return self.binary(n, "sub", args[1], args[0])
        unary = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp",
                 "log": "log", "erf": "erf", "sqrt": "sqrt", "rsqrt": "rsqrt", "neg": "neg",
                 "silu": "silu", "reciprocal": "reciprocal"}
        if op in unary:
            return self.g.node(unary[op], [x], n.name)
        if op == "gelu":
            return self.g.node("gelu", [x], n.name,
                               attrs={"approximate": kw.get("approximate", "none")})
        if op in ("_softmax", "softmax"):
            return self.g.node("softmax", [x], n.name, attrs={"axis": args[1]})
        if op == "native_layer_norm":
            ns, w, b, eps = args[1], args[2], args[3], args[4]
            if w is None:
                self.unsupported(n, "layer_norm without weight")
            y = self.g.node("layernorm", [x, w] + ([b] if b is not None else []), n.name,
                            attrs={"axis": -len(ns), "eps": eps})
            return [y, None, None]
        if op in ("native_batch_norm", "_native_batch_norm_legit_no_training"):
            training = args[5] if op == "native_batch_norm" else False
            if training:
                self.unsupported(n, "batch norm in training mode")
            w, b, mean, var = args[1], args[2], args[3], args[4]
            eps = args[7] if op == "native_batch_norm" else args[6]
            vals = [self.values_of(n, t) for t in (w, b, mean, var)]
            import torch
            scale = (vals[0] if vals[0] is not None else 1.0) / torch.sqrt(vals[3] + eps)
            shift = (vals[1] if vals[1] is not None else 0.0) - vals[2] * scale
            c = scale.shape[0]
            sw = self.g.weight(n.name + ".scale", "f32", [c, 1, 1], scale.reshape(c, 1, 1))
            bw = self.g.weight(n.name + ".shift", "f32", [c, 1, 1], shift.reshape(c, 1, 1))
            y = self.g.node("mul", [x, sw], n.name + ".mul")
            return [self.g.node("add", [y, bw], n.name), None, None]
        if op == "convolution":
            w, b, stride, pad, dil, transposed, _, groups = args[1:9]
            if transposed:
                self.unsupported(n, "transposed convolution")
            ins = [x, w] + ([b] if b is not None else [])
            return self.g.node("conv2d", ins, n.name, attrs={
                "strides": list(stride), "pads": [pad[0], pad[1], pad[0], pad[1]],
                "dilations": list(dil), "groups": groups})
        if op in ("max_pool2d_with_indices", "max_pool2d", "avg_pool2d"):
            k = _pair(args[1])
            st = _pair(args[2]) if len(args) > 2 and args[2] else k
            p = _pair(args[3]) if len(args) > 3 else [0, 0]
            if (len(args) > 4 and op != "avg_pool2d" and _pair(args[4]) != [1, 1]) or \
                    (len(args) > 5 and args[5] and op != "avg_pool2d"):
                self.unsupported(n, "%s with dilation or ceil_mode" % op)
            y = self.g.node("avg_pool2d" if op == "avg_pool2d" else "max_pool2d", [x], n.name,
                            attrs={"kernel": k, "strides": st,
                                   "pads": [p[0], p[1], p[0], p[1]]})
            return [y, None] if op == "max_pool2d_with_indices" else y
        if op in ("_adaptive_avg_pool2d", "adaptive_avg_pool2d"):
            if _pair(args[1]) != [1, 1]:
                self.unsupported(n, "adaptive average pool to %s" % (args[1],))
            return self.g.node("global_avg_pool", [x], n.name)
        if op in ("mean", "sum", "amax"):
            src_rank = len(n.args[0].meta["tensor_meta"].shape)
            if op == "mean" and len(args) > 1 and sorted(d % src_rank for d in args[1]) == \
                    [src_rank - 2, src_rank - 1] and src_rank == 4 and \
                    (args[2] if len(args) > 2 else kw.get("keepdim", False)):
                return self.g.node("global_avg_pool", [x], n.name)
            return self.reduce(n, {"mean": "reduce_mean", "sum": "reduce_sum",
                                   "amax": "reduce_max"}[op], args, kw)
        if op in ("split", "split_with_sizes"):
            dim = args[2] if len(args) > 2 else kw.get("dim", 0)
            return self.split(n, x, [x, args[1], dim], {}, "split")
        if op == "cat":
            return self.g.node("concat", list(args[0]), n.name,
                               attrs={"axis": args[1] if len(args) > 1 else 0})
        if op == "slice":
            dim, start, end = args[1], args[2], args[3]
            step = args[4] if len(args) > 4 else 1
            size = n.args[0].meta["tensor_meta"].shape[dim]
            start, end, step = slice(start, end, step).indices(size)
            if (start, end, step) == (0, size, 1):
                return x
            return self.g.node("slice", [x], n.name, attrs={"axis": dim, "start": start,
                                                            "end": end, "step": step})
        if op in ("empty", "zeros", "ones", "full", "empty_like"):
            return None   # buffers aten makes for results mcir does not keep
        self.unsupported(n, "aten::%s" % op)

    def values_of(self, n, name):
        if name is None:
            return None
        if name not in self.g.values:
            self.unsupported(n, "batch norm statistics that are not constants")
        import numpy as np
        import torch
        return torch.from_numpy(np.asarray(self.g.values[name], dtype=np.float32))

    def method(self, n, name):
        args = [self.arg(a) for a in n.args]
        kw = {k: self.arg(v) for k, v in n.kwargs.items()}
        x = args[0]
        if name in ("view", "reshape", "flatten", "unsqueeze", "squeeze", "expand_as"):
            if name == "expand_as":
                self.unsupported(n, "method expand_as")
            return self.reshape(n, x)
        if name in ("contiguous", "float") and name == "contiguous":
            return x
        if name == "size" or name == "dim":
            return None
        if name == "permute":
            perm = list(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) \
                else list(args[1:])
            rank = len(self.meta(n)[0])
            return self.g.node("transpose", [x], n.name,
                               attrs={"perm": [p % rank for p in perm]})
        if name == "transpose":
            return self.transpose(n, x, args[1], args[2])
        if name == "softmax":
            dim = args[1] if len(args) > 1 else kw.get("dim", -1)
            return self.g.node("softmax", [x], n.name, attrs={"axis": dim})
        if name in ("mean", "sum", "amax"):
            return self.reduce(n, {"mean": "reduce_mean", "sum": "reduce_sum",
                                   "amax": "reduce_max"}[name], args, kw)
        if name in ("split", "chunk"):
            return self.split(n, x, args, kw, name)
        if name in ("add", "sub", "mul", "div", "pow"):
            return self.binary(n, name, x, args[1])
        if name in ("relu", "sigmoid", "tanh", "exp", "sqrt", "rsqrt", "neg", "reciprocal"):
            return self.g.node(name, [x], n.name)
        self.unsupported(n, "tensor method %s" % name)

    def transpose(self, n, x, d0, d1):
        rank = len(self.meta(n)[0])
        perm = list(range(rank))
        perm[d0 % rank], perm[d1 % rank] = perm[d1 % rank], perm[d0 % rank]
        return self.g.node("transpose", [x], n.name, attrs={"perm": perm})

    def reduce(self, n, op, args, kw):
        dim = args[1] if len(args) > 1 else kw.get("dim")
        keep = args[2] if len(args) > 2 else kw.get("keepdim", False)
        if dim is None:
            self.unsupported(n, "%s over every axis" % op)
        axes = list(dim) if isinstance(dim, (list, tuple)) else [dim]
        return self.g.node(op, [args[0]], n.name, attrs={"axes": axes, "keepdims": bool(keep)})

    def split(self, n, x, args, kw, how):
        import torch.fx
        users = list(n.users)
        if not all(u.op == "call_function" and u.target is operator.getitem for u in users):
            self.unsupported(n, "%s whose pieces are not indexed" % how)
        dim = args[2] if len(args) > 2 else kw.get("dim", 0)
        src_shape = list(n.args[0].meta["tensor_meta"].shape)
        size = src_shape[dim]
        amount = args[1]
        if how == "chunk":
            step = -(-size // amount)
            sizes = [min(step, size - i) for i in range(0, size, step)]
        elif isinstance(amount, int):
            sizes = [min(amount, size - i) for i in range(0, size, amount)]
        else:
            sizes = list(amount)
        outs = self.g.node("split", [x], n.name, attrs={"axis": dim, "sizes": sizes},
                           n_outputs=len(sizes))
        return outs if isinstance(outs, list) else [outs]

    def getitem(self, n, x, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        shape = list(n.args[0].meta["tensor_meta"].shape)
        y, axis = x, 0
        for it in idx:
            if it is Ellipsis:
                axis = len(shape) - (len(idx) - 1 - idx.index(Ellipsis))
                continue
            if isinstance(it, slice):
                start, stop, step = it.indices(shape[axis])
                if (start, stop, step) != (0, shape[axis], 1):
                    y = self.g.node("slice", [y], n.name, attrs={
                        "axis": axis, "start": start, "end": stop, "step": step})
                axis += 1
            else:
                self.unsupported(n, "indexing with %r" % (it,))
        return y


def _numel(shape):
    k = 1
    for d in shape:
        k *= d
    return k


def _pair(v):
    return list(v) if isinstance(v, (list, tuple)) else [v, v]


def capture(module, example_inputs, name=None, mode="aten"):
    """Captures module (eval mode is the caller's choice) on example inputs
    and returns an mcir Graph whose weights hold the module's parameters.

    mode "aten" (default) traces with make_fx: the ATen ops the module
    runs, shapes concrete, so code like `b, t, c = x.shape` traces (what
    torch.export records on torch >= 2.1 is the same op set). mode "fx"
    traces torch.fx symbolically at the module level (nn.Linear, F.gelu...),
    which keeps the model's source lines for messages but cannot trace
    Python control flow on shapes."""
    import torch
    import torch.fx
    if not isinstance(example_inputs, (list, tuple)):
        example_inputs = (example_inputs,)
    name = name or type(module).__name__
    if mode == "aten":
        from torch.fx.experimental.proxy_tensor import make_fx
        with torch.no_grad():
            gm = make_fx(module)(*example_inputs)
        return _Capture(gm, name).run(example_inputs)
    if mode != "fx":
        raise ValueError("mode must be 'aten' or 'fx'")
    tracer = torch.fx.Tracer()
    tracer.record_stack_traces = True
    graph = tracer.trace(module)
    gm = torch.fx.GraphModule(module, graph)
    return _Capture(gm, name).run(example_inputs)


def capture_fx(gm, example_inputs, name="fx_graph"):
    """An FX GraphModule (what torch.compile hands a backend) as an mcir
    Graph."""
    return _Capture(gm, name).run(example_inputs)
