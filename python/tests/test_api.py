"""The Python API on real model shapes: capture with PyTorch, compile
through mcir's C library, compare with PyTorch on the CPU, and read the
trace for the fusions that must happen. Run by tests/python.cmake through
run_tests.py (skips, exit 77, where torch is not installed)."""
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


def rel_err(got, ref):
    got, ref = np.asarray(got, dtype=np.float64), ref.detach().double().numpy()
    assert np.isfinite(ref).all() and np.abs(ref).max() > 0, "reference must be finite, nonzero"
    return float(np.abs(got - ref).max() / np.abs(ref).max())


class Blocks(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def check(self, model, x, rules, tol=1e-4):
        model.eval()
        g = mcir.capture(model, (x,))
        c = mcir.compile(g)
        applied = {r["rule"] for r in c.applied()}
        for rule in rules:
            self.assertIn(rule, applied, "%s not applied: %s" % (rule, sorted(applied)))
        with torch.no_grad():
            ref = model(x)
        y = c(x)
        self.assertIsInstance(y, torch.Tensor)
        self.assertEqual(tuple(y.shape), tuple(ref.shape))
        self.assertLess(rel_err(y, ref), tol)
        self.assertLess(c.nodes_after, c.nodes_before + 1)
        return c

    def test_gpt2_block(self):
        c = self.check(models.GPT2Block(), torch.randn(2, 32, 64),
                       ["attention_decomposed", "norm_native"])
        att = [k for k in c.plan["kernels"] if k["template"] == "streaming_attention"]
        self.assertEqual(len(att), 1)

    def test_llama_block(self):
        self.check(models.LlamaBlock(), torch.randn(2, 16, 64),
                   ["attention_decomposed", "rmsnorm_decomposed"])

    def test_small_cnn(self):
        m = models.SmallCNN()
        m.bn1.running_mean.uniform_(-0.5, 0.5)
        m.bn1.running_var.uniform_(0.5, 1.5)
        self.check(m, torch.randn(2, 3, 16, 16), ["conv_bias_relu"])

    @unittest.skipUnless(__import__("importlib").util.find_spec("torchvision"),
                         "torchvision not installed")
    def test_torchvision_resnet18(self):
        import torchvision
        m = torchvision.models.resnet18()
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.8, 1.2)
        c = self.check(m, torch.randn(1, 3, 32, 32), ["elementwise_epilogue"])
        # batch norm (a per-channel mul and add), ReLU and the residual add
        # run in the epilogue of their convolution: no elementwise kernel
        tpl = [k["template"] for k in c.plan["kernels"]]
        self.assertEqual(tpl.count("conv2d"), 20)
        self.assertEqual(tpl.count("elementwise"), 0, tpl)


class Api(unittest.TestCase):
    def test_weights_stay_in_memory(self):
        g = mcir.capture(models.GPT2Block().eval(), (torch.randn(1, 32, 64),))
        doc = json.loads(g.to_json())
        self.assertTrue(doc["weights"])
        self.assertFalse(any("data" in w or "value" in w for w in doc["weights"]))
        self.assertEqual(set(g.values), {w["name"] for w in doc["weights"]})

    def test_fx_mode_and_artifacts(self):
        m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                                torch.nn.Linear(32, 8)).eval()
        x = torch.randn(4, 16)
        c = mcir.compile(mcir.capture(m, (x,), mode="fx"))
        self.assertLess(rel_err(c(x), m(x)), 1e-4)
        self.assertIn("kernels", json.loads(c.artifact("plan")))
        self.assertIn("digraph", c.artifact("dot"))
        self.assertIn("nodes", c.summary())

    def test_exact_math(self):
        # mcirc --exact-math: the fused chains' exponentials and divisions in
        # the interpreter's forms, not the SFU's approximations
        m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.SiLU(), torch.nn.Linear(32, 8)).eval()
        x = torch.randn(4, 16)
        g = mcir.capture(m, (x,))
        for exact in (False, True):
            c = mcir.compile(g, code=True, exact_math=exact)
            self.assertEqual(json.loads(c.artifact("plan"))["exact_math"], exact)
            cuda = c.artifact("cuda")
            self.assertEqual("x_ / (1.0f + expf(-x_))" in cuda, exact)
            self.assertEqual("x_ * mc_rcp(1.0f + mc_exp2(-x_ * MC_L2E))" in cuda, not exact)
            self.assertLess(rel_err(c(x), m(x)), 1e-4)

    def test_no_rewrite_is_the_baseline(self):
        m, x = models.LlamaBlock().eval(), torch.randn(1, 16, 64)
        g = mcir.capture(m, (x,))
        base = mcir.compile(g, rewrite=False)
        self.assertEqual(base.applied(), [])
        self.assertEqual(base.nodes_before, base.nodes_after)
        self.assertLess(rel_err(base(x), m(x)), 1e-4)

    def test_unsupported_op_is_named_with_its_line(self):
        class Cum(torch.nn.Module):
            def forward(self, x):
                return torch.sort(x, -1)[0]
        with self.assertRaises(mcir.UnsupportedError) as e:
            mcir.capture(Cum().eval(), (torch.randn(2, 3),), mode="fx")
        self.assertIn("sort", str(e.exception))
        self.assertIn("test_api.py", str(e.exception))
        with self.assertRaises(mcir.UnsupportedError) as e:
            mcir.capture(Cum().eval(), (torch.randn(2, 3),))
        self.assertIn("aten::sort", str(e.exception))

    def test_as_strided_views(self):
        """as_strided of a contiguous tensor: a transpose written with it
        (a gather by the positions), and timm's restride of a pooled
        [B, C, 1, 1] to channels-last in place (the same values: a reshape)."""
        class Strided(torch.nn.Module):
            def forward(self, x):
                t = torch.as_strided(x * 2, (4, 3), (1, 4))
                p = x.mean((0,), keepdim=True).reshape(1, 4, 1, 1) + 1
                p.as_strided_((1, 4, 1, 1), (4, 1, 4, 4))
                return t, p
        m = Strided().eval()
        x = torch.randn(3, 4)
        g = mcir.capture(m, (x,))
        ops = [n["op"] for n in g.nodes]
        self.assertIn("gather", ops)
        got, want = mcir.compile(g)(x), m(x)
        self.assertLess(rel_err(got[0], want[0]), 1e-6)
        self.assertLess(rel_err(got[1], want[1]), 1e-6)
        class OfAView(torch.nn.Module):
            def forward(self, x):
                return torch.as_strided((x + 1).t(), (2, 2), (1, 2))
        with self.assertRaises(mcir.UnsupportedError) as e:
            mcir.capture(OfAView().eval(), (torch.randn(3, 4),))
        self.assertIn("as_strided of a tensor whose layout is not known to be contiguous",
                      str(e.exception))

    def test_model_zoo_data_movement(self):
        """The ops timm's and transformers' models bring: constant padding
        (positive, negative, a value), roll (on dims and flattened),
        torch.gather along a middle dim, indexing by two index tensors
        (broadcast, negative), a 1-D convolution (stride, padding,
        dilation, groups), index_copy_ and index_put_ on an input (written
        back), average pooling with ceil_mode where the windows divide."""
        class Zoo(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = torch.nn.Conv1d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2)
                self.pool = torch.nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False)

            def forward(self, x, ids, cache, pos):
                a = torch.nn.functional.pad(x, (1, -1, 2, 0), value=0.5)
                b = torch.roll(x, shifts=(1, -2), dims=(1, 2)) + torch.roll(x, 3)
                c = torch.gather(x, 1, ids)
                d = x[torch.tensor([[1], [-1]]), torch.tensor([0, 2, -1])]
                e = self.conv(x.reshape(2, 4, 6))
                f = self.pool(x.reshape(1, 2, 4, 6))
                cache.index_copy_(1, pos, x[:, :2])
                cache[:, pos + 2] = x[:, 2:] * 2
                return a, b, c, d, e, f, cache * 1
        m = Zoo().eval()
        torch.manual_seed(3)
        x = torch.randn(2, 4, 6)
        ids = torch.tensor([[[3, 0, 1, 2, 3, 0]], [[1, 1, 2, 0, 3, 2]]])
        cache = torch.randn(2, 7, 6)
        pos = torch.tensor([4, 0])
        mine = cache.clone()
        g = mcir.capture(m, (x, ids, mine, pos))
        self.assertTrue(torch.equal(mine, cache))        # the trace ran on copies
        want = m(x, ids, cache, pos)
        got = mcir.compile(g)(x, ids, mine, pos)
        for k, (u, v) in enumerate(zip(got, want)):
            self.assertEqual(tuple(u.shape), tuple(v.shape), k)
            self.assertLess(rel_err(u, v), 1e-5, k)
        self.assertTrue(torch.allclose(mine, cache))     # the updates written back
        self.assertEqual(sum(n["op"] == "index_copy" for n in g.nodes), 2)

        class ViewUpdate(torch.nn.Module):
            def forward(self, x):
                x[:, 1].mul_(2)
                return x + 1
        with self.assertRaises(mcir.UnsupportedError) as e:
            mcir.capture(ViewUpdate().eval(), (torch.randn(3, 4),))
        self.assertIn("an in-place mul_ of a view (select) of input", str(e.exception))

        class Partial(torch.nn.Module):
            def forward(self, x):
                return torch.nn.functional.avg_pool2d(x, 2, 2, ceil_mode=True)
        with self.assertRaises(mcir.UnsupportedError) as e:
            mcir.capture(Partial().eval(), (torch.randn(1, 2, 5, 4),))
        self.assertIn("avg_pool2d with ceil_mode (its last window is partial here)", str(e.exception))

    def test_cos_sin_of_runtime_values(self):
        """A rotary table computed at run time (positions an input): cos and
        sin as ops, on the CPU and the emulated device."""
        class Rot(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.freq = torch.nn.Parameter(torch.linspace(0.1, 3.0, 16))

            def forward(self, x, pos):
                ang = pos[:, None] * self.freq
                return x * torch.cos(ang) - torch.cat([x[:, 8:], x[:, :8]], -1) * torch.sin(ang)
        m = Rot().eval()
        x, pos = torch.randn(10, 16), torch.arange(10, dtype=torch.float32) * 0.7
        c = mcir.compile(mcir.capture(m, (x, pos)))
        ops = [n["op"] for n in c.graph.nodes]
        self.assertIn("cos", ops)
        self.assertIn("sin", ops)
        self.assertLess(rel_err(c(x, pos), m(x, pos)), 1e-5)
        self.assertLess(rel_err(c(x, pos, device="emu"), m(x, pos)), 1e-5)

    def test_mcir_errors_come_back_as_text(self):
        g = mcir.Graph("bad")
        x = g.input("x", "f32", [2, 3])
        w = g.weight("w", "f32", [4, 5], np.ones((4, 5), np.float32))
        g.outputs.append(g.node("matmul", [x, w]))
        with self.assertRaises(mcir.McirError) as e:
            mcir.compile(g)
        self.assertIn("error:", str(e.exception))
        self.assertIn("matmul", str(e.exception))

    def test_wrong_input_shape_is_an_error(self):
        m = torch.nn.Linear(8, 4).eval()
        c = mcir.compile(mcir.capture(m, (torch.randn(2, 8),)))
        with self.assertRaises(mcir.McirError):
            c(torch.randn(3, 8))

    def test_devices_without_a_gpu_say_why(self):
        m = torch.nn.Linear(8, 4).eval()
        x = torch.randn(2, 8)
        c = mcir.compile(mcir.capture(m, (x,)))
        with self.assertRaises(mcir.McirError) as e:
            c(x, device="tpu")
        self.assertIn("'cpu', 'gpu' or 'emu'", str(e.exception))
        if not torch.cuda.is_available():
            # kernels compiled (NVRTC needs no GPU), no device to run them
            c = mcir.compile(mcir.capture(m, (x,)), ptx=True)
            with self.assertRaises(mcir.McirError) as e:
                c(x, device="gpu")
            self.assertIn("device 'gpu'", str(e.exception))

    @unittest.skipUnless(shutil.which(os.environ.get("CXX", "c++")), "no host C++ compiler")
    def test_emu_runs_the_generated_kernels(self):
        # the GPU's runtime and kernels on the emulated device, checked
        m, x = models.GPT2Block(d=32, heads=2, seq=16).eval(), torch.randn(2, 16, 32)
        c = mcir.compile(mcir.capture(m, (x,)))   # no NVRTC needed
        with torch.no_grad():
            ref = m(x)
        y = c(x, device="emu")
        self.assertIsInstance(y, torch.Tensor)
        self.assertTrue(torch.isfinite(y).all())
        self.assertLess(rel_err(y, ref), 1e-3)
        self.assertLess(rel_err(c(x.numpy(), device="emu"), ref), 1e-3)   # numpy in, numpy out

    @unittest.skipUnless(shutil.which(os.environ.get("CXX", "c++")), "no host C++ compiler")
    def test_emu_session_sees_each_calls_inputs(self):
        # the compiled object keeps one session: calls after the first only
        # launch, with MCIR_GPU_GRAPHS=1 they replay one CUDA graph; each
        # call's output is its own inputs'
        m = models.GPT2Block(d=32, heads=2, seq=16).eval()
        os.environ["MCIR_GPU_GRAPHS"] = "1"
        try:
            c = mcir.compile(mcir.capture(m, (torch.randn(2, 16, 32),)))
            outs = []
            for _ in range(3):
                x = torch.randn(2, 16, 32)
                with torch.no_grad():
                    ref = m(x)
                outs.append(c(x, device="emu"))
                self.assertLess(rel_err(outs[-1], ref), 1e-3)
            self.assertGreater(rel_err(outs[1], outs[2]), 1e-2)   # not the last call's output again
        finally:
            del os.environ["MCIR_GPU_GRAPHS"]

    @unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA GPU and torch with CUDA")
    def test_gpu_takes_cuda_tensors(self):
        # device pointers straight to mcir's runtime: outputs are CUDA tensors
        m, x = models.GPT2Block().eval(), torch.randn(2, 32, 64)
        c = mcir.compile(mcir.capture(m, (x,)), ptx=True)
        y = c(x.cuda(), device="gpu")
        self.assertTrue(y.is_cuda)
        with torch.no_grad():
            self.assertLess(rel_err(y.cpu(), m(x)), 1e-3)

    @unittest.skipUnless(hasattr(torch, "compile"), "torch.compile needs torch >= 2.0")
    def test_torch_compile_backend(self):
        m, x = models.GPT2Block().eval(), torch.randn(1, 32, 64)
        opt = torch.compile(m, backend=mcir.backend)
        with torch.no_grad():
            self.assertLess(rel_err(opt(x), m(x)), 1e-4)


if __name__ == "__main__":
    unittest.main()
