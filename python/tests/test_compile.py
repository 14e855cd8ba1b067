"""torch.compile(model, backend="mcir") on torch >= 2.0 (skipped on 1.13):
models run through mcir in strict mode (any fallback is an exception)
within 1e-4 of eager PyTorch; parameters bound as weights and rebound when
changed; Dynamo's symbolic sizes compiled once for a range (mcir dims);
training and gradients refused; fallbacks counted, or raised in strict
mode with the op and the model's line."""
import io
import os
import shutil
import sys
import unittest
from contextlib import redirect_stderr

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcir  # noqa: E402
import models  # noqa: E402

try:
    import torchvision
except ImportError:
    torchvision = None


def rel_err(got, ref):
    got, ref = np.asarray(got, dtype=np.float64), ref.detach().double().numpy()
    assert np.isfinite(ref).all() and np.abs(ref).max() > 0 and ref.std() > 0
    return float(np.abs(got - ref).max() / np.abs(ref).max())


STRICT = {"strict": True}


@unittest.skipUnless(hasattr(torch, "compile"), "torch.compile needs torch >= 2.0")
class Compile(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        torch._dynamo.reset()
        mcir.reset_stats()

    def compiled(self, model, *inputs, options=STRICT):
        model.eval()
        opt = torch.compile(model, backend="mcir", options=options)
        with torch.no_grad():
            got, ref = opt(*inputs), model(*inputs)
        return opt, got, ref

    def check(self, model, *inputs):
        _, got, ref = self.compiled(model, *inputs)
        self.assertLess(rel_err(got, ref), 1e-4)
        s = mcir.stats()
        self.assertGreaterEqual(s["graphs_mcir"], 1)
        self.assertEqual(s["graphs_fallback"], 0, s["fallbacks"])
        self.assertGreaterEqual(s["calls_mcir"], 1)
        return s

    def test_nanogpt_block(self):
        self.check(models.NanoBlock(), torch.randn(2, 32, 64))

    def test_llama_gqa(self):
        self.check(models.LlamaForCausalLM(gqa="repeat_kv"), torch.randint(0, 128, (2, 16)))

    def test_bert_with_mask(self):
        mask = torch.ones(2, 16, dtype=torch.long)
        mask[0, 12:] = 0
        self.check(models.BertModel(), torch.randint(0, 128, (2, 16)), mask)

    def test_functional_conv_batch_norm_linear(self):
        m = models.SmallCNN()
        m.bn1.running_mean.uniform_(-0.5, 0.5)
        m.bn1.running_var.uniform_(0.5, 1.5)
        self.check(m, torch.randn(2, 3, 16, 16))

    @unittest.skipUnless(torchvision, "torchvision not installed")
    def test_resnet18(self):
        self.check(torchvision.models.resnet18(), torch.randn(1, 3, 32, 32))

    def test_parameters_are_weights_and_rebound(self):
        m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                                torch.nn.Linear(32, 8)).eval()
        x = torch.randn(4, 16)
        opt, got, ref = self.compiled(m, x)
        self.assertLess(rel_err(got, ref), 1e-4)
        with torch.no_grad():
            opt(x)
            self.assertEqual(mcir.stats()["compiles"], 1)     # no copy, no recompile
            m[0].weight.mul_(-2.0)                            # changed in place
            self.assertLess(rel_err(opt(x), m(x)), 1e-4)
        self.assertEqual(mcir.stats()["rebinds"], 1)

    @unittest.skipUnless(shutil.which(os.environ.get("CXX", "c++")), "no host C++ compiler")
    def test_emulated_device(self):
        # options={"device": "emu"}: every graph's kernels on the emulated device
        m, x = models.NanoBlock(n_embd=32, n_head=2, block_size=16), torch.randn(1, 16, 32)
        _, got, ref = self.compiled(m, x, options={"strict": True, "device": "emu"})
        self.assertTrue(torch.isfinite(got).all())
        self.assertLess(rel_err(got, ref), 1e-3)
        self.assertGreaterEqual(mcir.stats()["calls_mcir"], 1)
        with self.assertRaisesRegex(Exception, "device 'tpu'"):   # Dynamo wraps the McirError
            self.compiled(torch.nn.Linear(4, 4), torch.randn(2, 4), options={"device": "tpu"})

    def test_symbolic_sizes_compile_once_for_a_range(self):
        # dynamic=True: Dynamo's size symbols become mcir dims; one
        # compilation, for [2, 2 x 16], runs at 16, 24 and 8
        m = models.NanoBlock().eval()
        opt = torch.compile(m, backend="mcir", options=STRICT, dynamic=True)
        with torch.no_grad():
            for t in (16, 24, 8):
                x = torch.randn(2, t, 64)
                self.assertLess(rel_err(opt(x), m(x)), 1e-4)
        s = mcir.stats()
        self.assertEqual(s["graphs_fallback"], 0, s["fallbacks"])
        self.assertEqual(s["per_shape"], [])
        self.assertEqual((s["compiles"], s["dynamic"], s["calls_mcir"]), (1, 1, 3))
        with torch.no_grad():                     # past 32: once more, for [2, 80]
            x = torch.randn(2, 40, 64)
            self.assertLess(rel_err(opt(x), m(x)), 1e-4)
        self.assertEqual(mcir.stats()["compiles"], 2)

    def test_llama_and_bert_dynamic_one_compile_each(self):
        for name, m in (("llama", models.LlamaForCausalLM(gqa="repeat_kv")),
                        ("bert", models.BertModel())):
            torch._dynamo.reset()
            mcir.reset_stats()
            m.eval()
            opt = torch.compile(m, backend="mcir", options=STRICT, dynamic=True)
            with torch.no_grad():
                for t in (16, 24, 8):
                    args = (torch.randint(0, 128, (2, t)),)
                    if name == "bert":
                        args += (torch.ones(2, t, dtype=torch.long),)
                    got, ref = opt(*args), m(*args)
                    got, ref = (list(v.values())[0] if isinstance(v, dict) else
                                v[0] if isinstance(v, (tuple, list)) else v for v in (got, ref))
                    self.assertLess(rel_err(got, ref), 1e-4, "%s at %d" % (name, t))
            s = mcir.stats()
            self.assertEqual((s["compiles"], s["dynamic"], s["per_shape"]), (1, 1, []), name)

    def test_automatic_dynamic_compiles_twice(self):
        # without dynamic=True Dynamo compiles 16 as it is, then, at 24, a
        # graph with a size symbol: one mcir compilation serves 24, 8, 24
        m = models.NanoBlock().eval()
        opt = torch.compile(m, backend="mcir", options=STRICT)
        with torch.no_grad():
            for t in (16, 24, 8, 24):
                x = torch.randn(2, t, 64)
                self.assertLess(rel_err(opt(x), m(x)), 1e-4)
        s = mcir.stats()
        self.assertEqual(s["graphs_fallback"], 0, s["fallbacks"])
        self.assertEqual((s["compiles"], s["dynamic"]), (2, 1))

    def test_dynamic_max_option(self):
        m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()).eval()
        opt = torch.compile(m, backend="mcir", dynamic=True,
                            options={"strict": True, "dynamic_max": 100})
        with torch.no_grad():
            for b in (4, 90, 7):
                x = torch.randn(b, 16)
                self.assertLess(rel_err(opt(x), m(x)), 1e-4)
        self.assertEqual(mcir.stats()["compiles"], 1)

    def test_gradients_are_refused(self):
        m = models.NanoBlock().eval()
        opt = torch.compile(m, backend="mcir")
        with self.assertRaises(Exception) as e:
            opt(torch.randn(1, 8, 64))
        self.assertIn("torch.no_grad()", str(e.exception))

    def test_training_mode_is_refused(self):
        m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5)).train()
        opt = torch.compile(m, backend="mcir")
        with torch.no_grad(), self.assertRaises(Exception) as e:
            opt(torch.randn(2, 8))
        self.assertIn("training", str(e.exception))
        self.assertIn("eval()", str(e.exception))

    def sorting(self):
        class Sorting(torch.nn.Module):
            def forward(self, x):
                return torch.sort(x * 2, -1)[0] + 1
        return Sorting().eval(), torch.randn(3, 5)

    def test_strict_mode_names_op_and_line(self):
        m, x = self.sorting()
        for options, env in ((STRICT, None), (None, "1")):
            torch._dynamo.reset()
            if env:
                os.environ["MCIR_STRICT"] = env
            try:
                opt = torch.compile(m, backend="mcir", options=options)
                with torch.no_grad(), self.assertRaises(Exception) as e:
                    opt(x)
            finally:
                os.environ.pop("MCIR_STRICT", None)
            msg = str(e.exception)
            self.assertIn("strict", msg)
            self.assertIn("aten::sort", msg)
            self.assertIn("test_compile.py", msg)
            self.assertIn("torch.sort(x * 2, -1)", msg)

    def test_fallback_is_counted(self):
        m, x = self.sorting()
        err = io.StringIO()
        with redirect_stderr(err):
            _, got, ref = self.compiled(m, x, options=None)
        self.assertTrue(torch.equal(got, ref))
        s = mcir.stats()
        self.assertEqual((s["graphs_mcir"], s["graphs_fallback"]), (0, 1))
        self.assertEqual(s["calls_fallback"], 1)
        self.assertIn("aten::sort", s["fallbacks"][0])
        self.assertIn("falling back", err.getvalue())


if __name__ == "__main__":
    unittest.main()
