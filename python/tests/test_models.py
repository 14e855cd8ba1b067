"""The model styles people write (issue #31), captured with mcir.capture,
compiled, run on the CPU and compared with PyTorch: nanoGPT (SDPA with
is_causal on torch 2, its written-out fallback on 1.13), a token-id model
with a tied head, a Hugging Face-style Llama (RMSNorm, rotary, SwiGLU, GQA
by repeat_kv, by repeat_interleave and by SDPA's enable_gqa), a Hugging
Face-style BERT with an integer attention mask (eager and SDPA),
nn.MultiheadAttention, torchvision's ResNet-18 and MobileNetV3-small.

Each output is within 1e-4 of PyTorch's (relative to its largest
magnitude, on finite, varied, nonzero values), every attention of the model
is one fused attention kernel, and grouped K/V heads reach attention as
broadcast heads ([B, Hkv, 1, N, d]), never as a repeated copy."""
import json
import os
import sys
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcir  # noqa: E402
import models  # noqa: E402

HAS_SDPA = hasattr(torch.nn.functional, "scaled_dot_product_attention")
HAS_GQA = HAS_SDPA and "enable_gqa" in (torch.nn.functional.scaled_dot_product_attention.__doc__
                                        or "")
try:
    import torchvision
except ImportError:
    torchvision = None


def rel_err(got, ref):
    got = np.asarray(got, dtype=np.float64)
    ref = ref.detach().double().numpy()
    assert np.isfinite(ref).all() and np.abs(ref).max() > 0, "reference must be finite, nonzero"
    assert ref.std() > 0, "reference must vary"
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def attention_nodes(c):
    g = json.loads(c.artifact("mcir"))
    shapes = {k: v["shape"] for k, v in g["tensors"].items()}
    return [[shapes[i] for i in n["inputs"]] for n in g["nodes"] if n["op"] == "attention"], g


class Models(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def run_model(self, model, inputs, attention=0, tol=1e-4, mode="aten"):
        model.eval()
        g = mcir.capture(model, inputs, mode=mode)
        c = mcir.compile(g)
        with torch.no_grad():
            ref = model(*inputs)
        got = c(*inputs)
        refs = ref if isinstance(ref, tuple) else (ref,)
        gots = got if isinstance(got, tuple) else (got,)
        self.assertEqual(len(refs), len(gots))
        for r, y in zip(refs, gots):
            if r is None:
                self.assertIsNone(y)
                continue
            self.assertEqual(tuple(y.shape), tuple(r.shape))
            self.assertLess(rel_err(y, r), tol)
        att = [k for k in c.plan["kernels"] if k["template"] == "streaming_attention"]
        self.assertEqual(len(att), attention, [k["template"] for k in c.plan["kernels"]])
        if not attention:
            return c, []
        # (the graph's text holds every weight's values: small models only)
        nodes, graph = attention_nodes(c)
        self.assertEqual(len(nodes), attention)
        self.assertFalse(any(n["op"] == "softmax" for n in graph["nodes"]))
        return c, nodes

    def ids(self, vocab, b=2, t=16):
        return torch.randint(0, vocab, (b, t))

    # ------------------------------------------------------------ nanoGPT
    def test_nanogpt_block(self):
        self.run_model(models.NanoBlock(), (torch.randn(2, 32, 64),), attention=1)

    def test_nanogpt_lm(self):
        # token ids -> wte + wpe(arange) -> blocks -> ln_f -> tied head on
        # the last position; returns (logits, None) like nanoGPT
        m = models.NanoGPT()
        c, _ = self.run_model(m, (self.ids(96),), attention=2)
        self.assertEqual(sum(1 for w in c.graph.weights if w["shape"] == [96, 64]), 1,
                         "the tied embedding is one weight")

    def test_nanogpt_fx_mode(self):
        # fx mode: `B, T, C = x.size()` and C // n_head are resolved
        self.run_model(models.NanoBlock(), (torch.randn(2, 32, 64),), attention=1, mode="fx")

    def test_gpt2_block_fx_mode(self):
        self.run_model(models.GPT2Block(), (torch.randn(2, 32, 64),), attention=1, mode="fx")

    def test_token_lm(self):
        c, _ = self.run_model(models.TokenLM(), (self.ids(128, t=32),), attention=2)
        self.assertEqual(c.graph.inputs[0]["dtype"], "i64")

    # -------------------------------------------------------------- Llama
    def llama(self, **kw):
        m = models.LlamaForCausalLM(**kw)
        c, nodes = self.run_model(m, (self.ids(128),), attention=2)
        for q, k, v in nodes:
            # Q [B, Hkv, G, N, d] against K/V [B, Hkv, 1, N, d]
            self.assertEqual(len(q), 5, nodes)
            self.assertEqual(q[1:3], [2, 2], nodes)
            self.assertEqual(k[1:3], [2, 1], nodes)
            self.assertEqual(v[1:3], [2, 1], nodes)
        return c

    def test_llama_repeat_kv(self):
        self.llama(gqa="repeat_kv")

    def test_llama_repeat_interleave(self):
        self.llama(gqa="repeat_interleave")

    def test_llama_tied_head(self):
        self.llama(gqa="repeat_kv", tie_word_embeddings=True)

    @unittest.skipUnless(HAS_SDPA, "scaled_dot_product_attention needs torch >= 2.0")
    def test_llama_sdpa_repeat_kv(self):
        self.llama(attn="sdpa", gqa="repeat_kv")

    @unittest.skipUnless(HAS_GQA, "SDPA's enable_gqa needs torch >= 2.5")
    def test_llama_sdpa_enable_gqa(self):
        self.llama(attn="sdpa", gqa="enable_gqa")

    def test_llama_mqa(self):
        # one K/V head: MQA
        m = models.LlamaForCausalLM(heads=4, kv_heads=1, gqa="repeat_kv")
        _, nodes = self.run_model(m, (self.ids(128),), attention=2)
        for q, k, v in nodes:
            self.assertEqual((q[1:3], k[1:3]), ([1, 4], [1, 1]), nodes)

    # --------------------------------------------------------------- BERT
    def bert(self, sdpa):
        m = models.BertModel(sdpa=sdpa)
        ids = self.ids(128)
        mask = torch.ones(2, 16, dtype=torch.long)
        mask[1, 11:] = 0            # padding at the end of the second sequence
        self.run_model(m, (ids, mask), attention=2)

    def test_bert_eager(self):
        self.bert(False)

    @unittest.skipUnless(HAS_SDPA, "scaled_dot_product_attention needs torch >= 2.0")
    def test_bert_sdpa(self):
        self.bert(True)

    # ------------------------------------------------- MultiheadAttention
    def test_multihead_attention(self):
        self.run_model(models.MHABlock(), (torch.randn(2, 16, 64),), attention=1)

    def test_multihead_attention_need_weights(self):
        self.run_model(models.MHABlock(need_weights=True), (torch.randn(2, 16, 64),),
                       attention=1)

    # --------------------------------------------------------- torchvision
    def randomise_bn(self, m):
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.8, 1.2)
        return m

    @unittest.skipUnless(torchvision, "torchvision not installed")
    def test_resnet18(self):
        m = self.randomise_bn(torchvision.models.resnet18())
        c, _ = self.run_model(m, (torch.randn(1, 3, 32, 32),))
        tpl = [k["template"] for k in c.plan["kernels"]]
        self.assertEqual(tpl.count("conv2d"), 20)
        self.assertEqual(tpl.count("elementwise"), 0, tpl)

    @unittest.skipUnless(torchvision, "torchvision not installed")
    def test_mobilenet_v3_small(self):
        m = self.randomise_bn(torchvision.models.mobilenet_v3_small())
        self.run_model(m, (torch.randn(1, 3, 64, 64),))


class Capture(unittest.TestCase):
    def test_integer_inputs_and_outputs(self):
        class M(torch.nn.Module):
            def forward(self, ids):
                return ids * 3 + 1, torch.argmax(ids.float(), -1)
        ids = torch.randint(-2 ** 40, 2 ** 40, (3, 5))
        c = mcir.compile(mcir.capture(M().eval(), (ids,)))
        a, b = c(ids)
        self.assertEqual(a.dtype, torch.int64)
        self.assertTrue(torch.equal(a, ids * 3 + 1))
        self.assertTrue(torch.equal(b, torch.argmax(ids.float(), -1)))

    def test_constants_fold(self):
        # a mask built from torch.full / triu / arange is a constant weight
        m = models.LlamaForCausalLM(layers=1).eval()
        g = mcir.capture(m, (torch.randint(0, 128, (1, 8)),))
        ops = {n["op"] for n in g.nodes}
        self.assertNotIn("arange", ops)
        self.assertFalse({"sin", "cos"} & ops)

    def test_select_fill_full_baddbmm(self):
        class M(torch.nn.Module):
            def forward(self, x, b):
                y = torch.full((2, 3, 3), 0.5) + x[0, :, :3]
                z = torch.baddbmm(y, x, x.transpose(1, 2))
                w = torch.zeros_like(z).fill_(2.0)
                return z * w + b.select(1, 2).unsqueeze(-1)
        x, b = torch.randn(2, 3, 4), torch.randn(2, 5, 3)
        m = M().eval()
        c = mcir.compile(mcir.capture(m, (x, b)))
        self.assertLess(rel_err(c(x, b), m(x, b)), 1e-5)

    def test_expand_is_a_broadcast(self):
        class M(torch.nn.Module):
            def forward(self, x, y):
                return x + y.expand(4, 3, 5), y.expand(4, 3, 5).exp()
        x, y = torch.randn(4, 3, 5), torch.randn(3, 1)
        m = M().eval()
        g = mcir.capture(m, (x, y))
        # the add broadcasts y itself; exp reads it materialised once
        self.assertEqual(sum(1 for w in g.weights if w["name"].startswith("ones")), 1)
        a, b = mcir.compile(g)(x, y)
        ra, rb = m(x, y)
        self.assertLess(rel_err(a, ra), 1e-6)
        self.assertLess(rel_err(b, rb), 1e-6)

    def test_training_mode_is_refused(self):
        m = models.NanoBlock()
        with self.assertRaises(mcir.TrainingError) as e:
            mcir.capture(m, (torch.randn(1, 8, 64),))
        self.assertIn("eval()", str(e.exception))

    def test_unsupported_names_op_and_line(self):
        class M(torch.nn.Module):
            def forward(self, x):
                return torch.sort(x, -1)[0]
        for mode in ("aten", "fx"):
            with self.assertRaises(mcir.UnsupportedError) as e:
                mcir.capture(M().eval(), (torch.randn(2, 3),), mode=mode)
            self.assertIn("aten::sort", str(e.exception))
            self.assertIn("test_models.py", str(e.exception))
            self.assertIn("torch.sort(x, -1)", str(e.exception))


if __name__ == "__main__":
    unittest.main()
