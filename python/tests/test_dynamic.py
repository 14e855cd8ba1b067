"""Symbolic dimensions from Python (mcir.Dim, capture's dynamic_shapes):
one capture and one compilation run at every size in range, on the CPU
reference and the emulated device, within 1e-4 of PyTorch; the graph
declares the dim and names it; sizes out of range and models whose sizes
cannot be dims are errors naming the dim, or the op and the model's line.
Run by run_tests.py with torch 1.13 (make_fx) and torch 2."""
import json
import os
import shutil
import sys
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcir  # noqa: E402
import models  # noqa: E402
from mcir.dynamic import resized  # noqa: E402


def rel_err(got, ref):
    got, ref = np.asarray(got, dtype=np.float64), ref.detach().double().numpy()
    assert np.isfinite(ref).all() and np.abs(ref).max() > 0 and ref.std() > 0
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def first(y):
    if isinstance(y, dict):
        return next(iter(y.values()))
    return y[0] if isinstance(y, (tuple, list)) else y


class Dynamic(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def at_sizes(self, model, inputs, sizes, hi=32, device="cpu", tol=1e-4):
        """Captures model with dim seq (axis 1 of every input) in [1, hi],
        compiles once, runs at each size; returns the Compiled."""
        model.eval()
        seq = mcir.Dim("seq", min=1, max=hi)
        g = mcir.capture(model, inputs, dynamic_shapes=tuple({1: seq} for _ in inputs))
        c = mcir.compile(g)
        for t in sizes:
            x = tuple(resized(i, 1, t) for i in inputs)
            with torch.no_grad():
                ref = first(model(*x))
            got = first(c(*x, device=device))
            self.assertEqual(tuple(got.shape), tuple(ref.shape))
            self.assertLess(rel_err(got, ref), tol, "at seq=%d on %s" % (t, device))
            self.assertEqual(c.dims()["seq"], (1, hi, t))      # bound there, not recompiled
        return c

    def test_nanogpt_block_graph_names_the_dim(self):
        m = models.NanoBlock().eval()
        g = mcir.capture(m, (torch.randn(2, 16, 64),),
                         dynamic_shapes=({1: mcir.Dim("seq", max=64)},))
        doc = json.loads(g.to_json())
        self.assertEqual(doc["dims"], {"seq": {"min": 1, "max": 64}})
        self.assertEqual(doc["inputs"][0]["shape"], [2, "seq", 64])
        ops = {n["op"]: n.get("attrs", {}) for n in doc["nodes"]}
        if "arange" in ops:   # the causal mask buffer (torch 1.13), as nodes
            self.assertEqual(ops["arange"], {"end": "seq"})
        else:                 # SDPA with is_causal (torch 2)
            self.assertTrue(ops["attention"]["causal"])
        shapes = [n["attrs"]["shape"] for n in doc["nodes"] if n["op"] == "reshape"]
        self.assertIn([2, "seq", 4, 16], shapes)                 # heads split
        self.assertIn([-1, 64], shapes)                          # 2*seq rows: inferred
        self.assertEqual([w for w in doc["weights"] if len(w["shape"]) == 4], [])  # no T x T mask

    def test_nanogpt_block_three_lengths_one_compile(self):
        self.at_sizes(models.NanoBlock(), (torch.randn(2, 16, 64),), (16, 24, 8, 1, 32))

    def test_nanogpt_positions(self):
        # pos = arange(T), wpe(pos): the embedding at the max, sliced to seq
        self.at_sizes(models.NanoGPT(), (torch.randint(0, 96, (2, 16)),), (16, 9, 32))

    def test_llama_rotary_gqa(self):
        self.at_sizes(models.LlamaForCausalLM(gqa="repeat_kv"),
                      (torch.randint(0, 128, (2, 16)),), (16, 9, 32))

    def test_bert_with_mask(self):
        ids, mask = torch.randint(0, 128, (2, 16)), torch.ones(2, 16, dtype=torch.long)
        mask[0, 12:] = 0
        self.at_sizes(models.BertModel(), (ids, mask), (16, 5, 32))

    @unittest.skipUnless(shutil.which(os.environ.get("CXX", "c++")), "no host C++ compiler")
    def test_emulated_device_one_session_three_lengths(self):
        # the generated kernels, rebound at each size on one session
        m = models.NanoBlock(n_embd=32, n_head=2, block_size=16)
        self.at_sizes(m, (torch.randn(1, 8, 32),), (8, 16, 3), hi=16, device="emu", tol=1e-3)

    @unittest.skipUnless(shutil.which(os.environ.get("CXX", "c++")), "no host C++ compiler")
    def test_emulated_device_graphs_per_size(self):
        # MCIR_GPU_GRAPHS=1: the session keeps one CUDA graph per size; a
        # size seen before replays its graph (the mean over seq would be
        # wrong at another size's grids), a new one captures
        m = models.NanoBlock(n_embd=32, n_head=2, block_size=16)
        os.environ["MCIR_GPU_GRAPHS"] = "1"
        try:
            self.at_sizes(m, (torch.randn(1, 8, 32),), (8, 3, 8, 3, 16), hi=16, device="emu", tol=1e-3)
        finally:
            del os.environ["MCIR_GPU_GRAPHS"]

    def test_relative_positions_follow_the_dim(self):
        """T5's relative position bias in its decoder: positions shifted by a
        size + c (a number the trace sees as a constant), keys arange(T + 1),
        zeros_like and min over them — ops of the graph (the positions'
        consumers), the shift a node computing the size, the arange's end
        "seq+1": one compilation for every length."""
        class Rel(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.bias = torch.nn.Embedding(8, 4)

            def forward(self, x):
                T = x.shape[1]
                ctx = torch.arange(T)[:, None] + (T + 3)
                mem = torch.arange(T + 1)[None, :]
                rel = mem - ctx
                rel = -torch.min(rel, torch.zeros_like(rel))
                b = self.bias(torch.clamp(rel, max=7)).permute(2, 0, 1)   # [4, T, T + 1]
                return x.sum(-1)[:, None, :, None] + b[None, :, :, :T]
        c = self.at_sizes(Rel().eval(), (torch.randn(2, 6, 5),), [3, 6, 11])
        ops = [n["op"] for n in c.graph.nodes]
        for op in ("arange", "argmax", "where", "min", "gather"):
            self.assertIn(op, ops)
        self.assertIn("seq+1", [n.get("attrs", {}).get("end") for n in c.graph.nodes])

    def test_out_of_range_names_the_dim(self):
        m = models.NanoBlock().eval()
        g = mcir.capture(m, (torch.randn(2, 16, 64),),
                         dynamic_shapes=({1: mcir.Dim("seq", min=4, max=32)},))
        c = mcir.compile(g)
        with self.assertRaises(mcir.McirError) as e:
            c(torch.randn(2, 33, 64))
        self.assertIn("dimension 'seq'", str(e.exception))
        self.assertIn("[4, 32]", str(e.exception))
        with self.assertRaises(mcir.McirError):
            c(torch.randn(2, 16, 63))                      # a fixed extent is fixed

    def test_size_in_a_constant_is_refused_with_the_line(self):
        class Scaled(torch.nn.Module):   # a mean written by hand: the size, computed
            def forward(self, x):
                return x / x.shape[1]
        self.at_sizes(Scaled(), (torch.randn(2, 8),), [3, 8, 13])

        class Inverse(torch.nn.Module):   # 1 / size: not the size plus a constant
            def forward(self, x):
                return x * (1.0 / x.shape[1])
        with self.assertRaises(mcir.UnsupportedError) as e:
            mcir.capture(Inverse().eval(), (torch.randn(2, 8),),
                         dynamic_shapes=({1: mcir.Dim("n", max=16)},))
        msg = str(e.exception)
        self.assertIn("dim 'n'", msg)
        self.assertIn("test_dynamic.py", msg)
        self.assertIn("x * (1.0 / x.shape[1])", msg)

    def test_bad_specs(self):
        x = torch.randn(2, 8)
        with self.assertRaises(ValueError):
            mcir.capture(torch.nn.Identity().eval(), (x,), dynamic_shapes=({1: 5},))
        with self.assertRaises(ValueError):
            mcir.capture(torch.nn.Identity().eval(), (x,),
                         dynamic_shapes=({1: mcir.Dim("n", min=9, max=16)},))


if __name__ == "__main__":
    unittest.main()
