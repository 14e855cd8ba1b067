"""Graphs of ranks that run in separate processes: torch.distributed.

A model sharded with DTensor (torch.distributed.tensor.parallel's
parallelize_module, transformers' tp_plan="auto") reaches the
torch.compile backend as a Dynamo graph whose parameters are DTensors and
whose module hooks call from_local / redistribute / to_local. mcir takes
each process's part of it: `Desugared` traces the graph on the local
shards (DTensor's own dispatch turns its redistributions into the
functional collectives `_c10d_functional.all_reduce`,
`all_gather_into_tensor`, `reduce_scatter_tensor` and `wait_tensor`), the
capture lowers those to mcir's `all_reduce` / `all_gather` /
`reduce_scatter` in a graph of `ranks` = the group's size, and the run
hands each collective back to torch.distributed, on the graph's own
process group (gloo on the CPU): `group_collective`. Each process runs
its own rank of the graph (mcir_capi_set_group); docs/python.md, "Tensor
parallelism".
"""


def _dtensor_type():
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:   # torch without distributed, or older than 2.4
        return None
    return DTensor


def has_dtensors(example_inputs):
    """Whether a Dynamo graph's inputs hold DTensors (or a device mesh)."""
    dt = _dtensor_type()
    if dt is None:
        return False
    return any(isinstance(x, dt) or type(x).__name__ == "DeviceMesh" for x in example_inputs)


def resolve_group(name):
    """The process group a functional collective names."""
    from torch.distributed import distributed_c10d as c10d
    if hasattr(c10d, "_resolve_process_group"):
        return c10d._resolve_process_group(name)
    import torch
    return torch._C._distributed_c10d._resolve_process_group(name)


class Desugared:
    """A Dynamo graph with DTensor inputs, as a function of plain tensors:
    each DTensor by its local shard, device meshes (and other objects)
    held, not passed."""

    def __init__(self, gm, example_inputs, weights):
        import torch
        dt = _dtensor_type()
        self.gm = gm
        self.specs = []      # per Dynamo input: ("dtensor", mesh, placements, shape, stride),
        self.held = []       # ("tensor",), ("held", object)
        for x in example_inputs:
            if dt is not None and isinstance(x, dt):
                self.specs.append(("dtensor", x.device_mesh, tuple(x.placements),
                                   tuple(x.shape), tuple(x.stride())))
            elif isinstance(x, torch.Tensor) or isinstance(x, (int, float, bool)) or \
                    type(x).__name__ == "SymInt":
                self.specs.append(("tensor",))
            else:
                self.specs.append(("held", x))
        new = {}
        for i, s in enumerate(self.specs):
            if s[0] != "held":
                new[i] = len(new)
        self.weights = {new[i] for i in weights if i in new}
        self.outputs = None  # per output leaf: (mesh, placements, shape, stride) or None

    def local(self, args):
        """The plain arguments of a call: DTensors' local shards (the
        same tensor objects every call, so rebinding sees them)."""
        out = []
        for x, s in zip(args, self.specs):
            if s[0] == "dtensor":
                out.append(x._local_tensor)
            elif s[0] == "tensor":
                out.append(x)
        return out

    def __call__(self, *plain):
        """The Dynamo graph on DTensors made from the local shards (what
        make_fx traces); DTensor outputs as their local shards."""
        dt = _dtensor_type()
        it = iter(plain)
        args = []
        for s in self.specs:
            if s[0] == "dtensor":
                args.append(dt.from_local(next(it), s[1], s[2], run_check=False, shape=s[3],
                                          stride=s[4]))
            elif s[0] == "tensor":
                args.append(next(it))
            else:
                args.append(s[1])
        from .capture import _ItemInterpreter
        out = _ItemInterpreter(self.gm, args).run(*args)   # node by node: the model's lines kept
        leaves = list(out) if isinstance(out, (list, tuple)) else [out]
        specs, local = [], []
        for y in leaves:
            if dt is not None and isinstance(y, dt):
                specs.append((y.device_mesh, tuple(y.placements), tuple(y.shape),
                              tuple(y.stride())))
                local.append(y.to_local())
            else:
                specs.append(None)
                local.append(y)
        self.outputs = specs
        return type(out)(local) if isinstance(out, (list, tuple)) else local[0]

    def wrap(self, out):
        """A run's outputs as the Dynamo graph returns them: DTensors where
        it returned DTensors."""
        if not self.outputs or not any(self.outputs):
            return out
        dt = _dtensor_type()
        leaves = list(out) if isinstance(out, (list, tuple)) else [out]
        res = [dt.from_local(y, s[0], s[1], run_check=False, shape=s[2], stride=s[3])
               if s is not None else y for y, s in zip(leaves, self.outputs)]
        return type(out)(res) if isinstance(out, (list, tuple)) else res[0]


def group_collective(pg):
    """mcir's collective of one rank (Compiled.set_group) on process group
    pg: torch.distributed's all_reduce, all_gather_into_tensor and
    reduce_scatter_tensor on this rank's buffer, along the node's axis."""
    import torch
    import torch.distributed as dist
    ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}

    # NCCL takes CUDA tensors: the rank's buffer goes to its GPU for the
    # collective and back (the run stages its values through the host)
    cuda = str(dist.get_backend(pg)).lower() == "nccl"
    home = torch.device("cuda", torch.cuda.current_device()) if cuda else None

    def run(op, reduce, axis, ranks, x):
        t = torch.from_numpy(x)
        if home is not None:
            t = t.to(home)
        if op == "all_reduce":
            dist.all_reduce(t, op=ops[reduce], group=pg)
            return t.cpu()
        front = t.movedim(axis, 0).contiguous()
        if op == "all_gather":
            out = torch.empty((front.shape[0] * ranks,) + tuple(front.shape[1:]), dtype=t.dtype, device=t.device)
            dist.all_gather_into_tensor(out, front, group=pg)
            return out.movedim(0, axis).cpu()
        if op == "reduce_scatter":
            part = front.shape[0] // ranks
            out = torch.empty((part,) + tuple(front.shape[1:]), dtype=t.dtype, device=t.device)
            try:
                dist.reduce_scatter_tensor(out, front, op=ops[reduce], group=pg)
            except (RuntimeError, NotImplementedError, ValueError):
                # a backend without reduce_scatter (older gloo): the
                # reduction, then this rank's part of it
                dist.all_reduce(front, op=ops[reduce], group=pg)
                r = dist.get_rank(pg)
                out = front[r * part:(r + 1) * part]
            return out.movedim(0, axis).cpu()
        raise ValueError("collective %r" % op)
    return run
