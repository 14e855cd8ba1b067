"""torch.compile(backend="mcir") on models sharded with DTensor across
processes (torch.distributed with gloo on the loopback address, the CPU):
a Llama-style block (RMSNorm, grouped-query attention, SwiGLU) with
ColwiseParallel / RowwiseParallel by parallelize_module, run by 2 and by 4
processes in strict mode, each rank's output equal to the unsharded eager
model's within 1e-4, with the Megatron figure of collectives (2 per block)
in the graphs mcir compiled; and a rank whose collective fails is an error
naming it. Skipped on torch without DTensor (Debian's 1.13)."""
import os
import socket
import subprocess
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor  # noqa: F401
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
    HAVE = dist.is_available() and dist.is_gloo_available() and hasattr(torch, "compile")
except ImportError:
    HAVE = False
try:
    import accelerate  # noqa: F401 — transformers' tp_plan needs it
    import transformers  # noqa: F401
    HAVE_HF = True
except ImportError:
    HAVE_HF = False


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def block(world):
    """The unsharded block and its inputs (the same on every rank)."""
    import models
    torch.manual_seed(0)
    heads, kv_heads, hidden, inter, T = 8, 4, 64, 128, 8
    m = models.LlamaDecoderLayer(hidden, heads, kv_heads, inter, "sdpa", "repeat_kv").eval()
    x = torch.randn(2, T, hidden)
    rope = models.LlamaRotaryEmbedding(hidden // heads)
    pos = torch.arange(T)[None, :].expand(2, T)
    cos, sin = rope(x, pos)
    return m, (x, None, (cos, sin))


PLAN = {"self_attn.q_proj": "col", "self_attn.k_proj": "col", "self_attn.v_proj": "col",
        "self_attn.o_proj": "row", "mlp.gate_proj": "col", "mlp.up_proj": "col",
        "mlp.down_proj": "row"}


def sequence_plan():
    """Sequence parallelism around the norms (torch's tutorial): the
    block's input and residual stream sharded along the sequence, the
    products' inputs all-gathered, their outputs reduce-scattered; the
    block returns a DTensor."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import PrepareModuleInput, SequenceParallel
    plan = {"": PrepareModuleInput(input_layouts=(Replicate(), None, None),
                                   desired_input_layouts=(Shard(1), None, None),
                                   use_local_output=False)}
    for norm in ("input_layernorm", "post_attention_layernorm"):
        plan[norm] = SequenceParallel()
    for k, v in PLAN.items():
        plan[k] = ColwiseParallel(input_layouts=Shard(1)) if v == "col" else \
            RowwiseParallel(output_layouts=Shard(1), use_local_output=False)
    return plan


def hf_worker(rank, world, out_dir, model_dir):
    """transformers' own tensor parallelism (from_pretrained with
    tp_plan="auto": DTensor parameters, its hooks' collectives, a
    vocabulary-parallel embedding and a gathered LM head) under
    torch.compile(backend="mcir"), against the unsharded model."""
    import numpy as np
    import mcir
    from transformers import LlamaForCausalLM
    ref = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    tp = LlamaForCausalLM.from_pretrained(model_dir, tp_plan="auto", dtype=torch.float32).eval()
    assert isinstance(tp.model.layers[0].self_attn.q_proj.weight, DTensor)
    ids = torch.tensor([[3, 17, 99, 5, 64, 2, 31, 8]])
    mcir.reset_stats()
    torch._dynamo.reset()
    with torch.no_grad():
        want = ref(ids, use_cache=False).logits
        got = torch.compile(tp, backend="mcir", options={"strict": True})(ids, use_cache=False).logits
    st = mcir.stats()
    ref_np = want.double().numpy()
    assert np.isfinite(ref_np).all() and ref_np.std() > 0
    err = float(np.abs(got.double().numpy() - ref_np).max() / np.abs(ref_np).max())
    with open(os.path.join(out_dir, "rank.%d" % rank), "w") as f:
        f.write("%r %d %d %d %d %d\n" % (err, st["graphs_mcir"], st["graphs_fallback"], st["calls_mcir"],
                                         st["compiles"], st["collectives"]))


def worker(rank, world, port, out_dir, mode):
    import copy

    import numpy as np
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    import datetime
    # a rank that stops answering fails the others' collectives in seconds, not gloo's 30 min
    nccl = mode == "nccl"   # CUDA DTensors on an NCCL group (a machine with 2 GPUs)
    if nccl:
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if nccl else "gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    try:
        if mode and mode.startswith("hf:"):
            os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
            return hf_worker(rank, world, out_dir, mode[3:])
        import mcir
        from torch.distributed.tensor import DTensor, Shard
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cuda" if nccl else "cpu", (world,))
        m, args = block(world)
        if nccl:
            m = m.cuda()
            args = tuple(a.cuda() if hasattr(a, "cuda") else
                         tuple(t.cuda() for t in a) if isinstance(a, tuple) else a for a in args)
        with torch.no_grad():
            want = m(*args)
        tp = copy.deepcopy(m)
        if mode == "sequence":
            parallelize_module(tp, mesh, sequence_plan())
        else:
            parallelize_module(tp, mesh, {k: ColwiseParallel() if v == "col" else
                                          RowwiseParallel() for k, v in PLAN.items()})
        if mode == "fail":   # rank 1's collectives fail: the run is an error naming the collective
            import mcir.distributed as md
            real = md.group_collective

            def failing(pg):
                run = real(pg)

                def go(op, reduce, axis, ranks, x):
                    if dist.get_rank() == 1:
                        raise RuntimeError("rank 1 refuses %s" % op)
                    return run(op, reduce, axis, ranks, x)
                return go
            md.group_collective = failing
        mcir.reset_stats()
        torch._dynamo.reset()
        options = {"strict": True}
        if mode in ("emu", "emu_fault"):   # the generated kernels on the emulated device, the collectives through gloo
            options["device"] = "emu"
        if mode == "emu_fault":   # every kernel faults there: proof that they run there
            os.environ["MCIR_EMU_FAULT"] = "mc_"
        opt = torch.compile(tp, backend="mcir", options=options)
        with torch.no_grad():
            try:
                got = opt(*args)
            except Exception as e:   # noqa: BLE001
                with open(os.path.join(out_dir, "error.%d" % rank), "w") as f:
                    f.write("%s: %s" % (type(e).__name__, e))
                return
            got2 = opt(*args)   # again: no recompile
        st = mcir.stats()
        if mode == "sequence":   # this rank's part of the sequence, as a DTensor
            assert isinstance(got, DTensor) and got.placements == (Shard(1),), got
            part = want.shape[1] // world
            got, got2 = got.to_local(), got2.to_local()
            want = want[:, rank * part:(rank + 1) * part]
        if nccl:
            assert got.is_cuda, got.device
        ref = want.double().cpu().numpy()
        assert np.isfinite(ref).all() and ref.std() > 0
        err = float(np.abs(got.double().cpu().numpy() - ref).max() / np.abs(ref).max())
        assert torch.equal(got, got2)
        with open(os.path.join(out_dir, "rank.%d" % rank), "w") as f:
            f.write("%r %d %d %d %d %d\n" % (err, st["graphs_mcir"], st["graphs_fallback"],
                                             st["calls_mcir"], st["compiles"],
                                             st["collectives"]))
    finally:
        dist.destroy_process_group()


def run(world, mode=None):
    """Runs `world` worker processes (this file with --worker: no import of
    the caller's main module, as multiprocessing's spawn would do); their
    result files by name. A worker that fails fails the test with its
    output."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        procs = []
        for r in range(world):
            log = open(os.path.join(d, "log.%d" % r), "w+")
            procs.append((subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker",
                                            str(r), str(world), str(port), d, mode or ""],
                                           env=env, stdout=log, stderr=subprocess.STDOUT), log))
        bad = []
        for r, (p, log) in enumerate(procs):
            try:
                rc = p.wait(timeout=600)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "timeout"
            log.seek(0)
            if rc != 0:
                bad.append("rank %d: exit %s\n%s" % (r, rc, log.read()[-4000:]))
            log.close()
        if bad:
            raise AssertionError("\n".join(bad))
        out = {}
        for name in sorted(os.listdir(d)):
            if not name.startswith("log."):
                with open(os.path.join(d, name)) as f:
                    out[name] = f.read()
        return out


@unittest.skipUnless(HAVE, "needs torch >= 2.4 with torch.distributed (gloo) and DTensor")
class DTensorParallel(unittest.TestCase):
    def check(self, world, mode=None, collectives=2, graphs=1):
        out = run(world, mode)
        self.assertEqual(sorted(out), ["rank.%d" % r for r in range(world)], out)
        for r in range(world):
            err, mc, fb, calls, compiles, coll = out["rank.%d" % r].split()
            self.assertLess(float(err), 1e-4, (world, r))
            self.assertEqual((int(mc), int(fb), int(calls), int(compiles)),
                             (graphs, 0, 2 * graphs, graphs))
            self.assertEqual(int(coll), collectives)

    # Megatron: one all_reduce after the attention, one after the MLP
    def test_two_processes(self):
        self.check(2)

    def test_four_processes(self):
        self.check(4)

    # CUDA DTensors on an NCCL group: each rank's kernels on its GPU, its
    # values through the host, each collective through NCCL (2 GPUs)
    @unittest.skipUnless(HAVE and torch.cuda.is_available() and torch.cuda.device_count() >= 2 and
                         dist.is_nccl_available(), "needs 2 CUDA GPUs and NCCL")
    def test_cuda_nccl(self):
        self.check(2, "nccl")

    # the same 2 processes running mcir's generated kernels on the emulated
    # device (with its checks), each collective through the process group
    def test_emulated_device(self):
        self.check(2, "emu")
        out = run(2, "emu_fault")
        self.assertEqual(sorted(out), ["error.0", "error.1"], out)
        for r in range(2):
            self.assertIn("CUDA_ERROR_ILLEGAL_ADDRESS", out["error.%d" % r])

    # an all_gather before each of the two column-parallel groups (DTensor
    # gathers for each product: mcir runs each gather once), a
    # reduce_scatter after each row-parallel product; Dynamo compiles the
    # root module's input hook as a graph of its own
    def test_sequence_parallel(self):
        self.check(2, "sequence", 4, graphs=2)

    @unittest.skipUnless(HAVE_HF, "needs transformers and accelerate")
    def test_transformers_tp_plan_auto(self):
        """A tiny random Llama (GQA: 8 heads, 4 K/V heads) saved and loaded
        again with tp_plan="auto" by 2 processes: 6 collectives (the
        embedding's all_reduce, 2 per layer, the LM head's gather)."""
        from transformers import LlamaConfig, LlamaForCausalLM
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=64)
        with tempfile.TemporaryDirectory() as d:
            LlamaForCausalLM(cfg).save_pretrained(d)
            out = run(2, "hf:" + d)
        for r in range(2):
            err, mc, fb, calls, compiles, coll = out["rank.%d" % r].split()
            self.assertLess(float(err), 1e-4, r)
            self.assertEqual((int(mc), int(fb), int(calls), int(compiles), int(coll)), (1, 0, 1, 1, 6))

    def test_failing_collective_is_an_error(self):
        out = run(2, "fail")
        self.assertIn("error.1", out, out)
        self.assertIn("all_reduce", out["error.1"])
        self.assertIn("rank 1 refuses", out["error.1"])
        # rank 0's all_reduce fails too (the peer is gone), within the group's timeout
        self.assertIn("error.0", out, out)
        self.assertIn("the group's collective failed", out["error.0"])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        rank, world, port, out_dir, mode = sys.argv[2:7]
        worker(int(rank), int(world), int(port), out_dir, mode or None)
    else:
        unittest.main()
