"""mcir.capture on Hugging Face transformers models (tiny random configs,
CPU; skipped without transformers): GPT-2, Llama with grouped-query
attention and BERT captured, compiled and run within 1e-4 of eager, their
outputs given back as the model's own ModelOutput class; a model that
returns its KV cache (the default, use_cache=True) is refused by name with
what to pass."""
import os
import sys
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcir  # noqa: E402

try:
    import transformers
    from transformers import (BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                              LlamaForCausalLM)
except ImportError:
    transformers = None


def rel_err(got, ref):
    got, ref = np.asarray(got, dtype=np.float64), ref.detach().double().numpy()
    assert np.isfinite(ref).all() and np.abs(ref).max() > 0 and ref.std() > 0
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def tiny(name):
    torch.manual_seed(0)
    if name == "gpt2":
        return GPT2LMHeadModel(GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                                          bos_token_id=0, eos_token_id=0)).eval()
    if name == "llama":
        return LlamaForCausalLM(LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                            num_hidden_layers=2, num_attention_heads=8,
                                            num_key_value_heads=4, max_position_embeddings=64)).eval()
    return BertModel(BertConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=128, max_position_embeddings=64)).eval()


IDS = torch.tensor([[3, 17, 99, 5, 64, 2, 31, 8]])


@unittest.skipUnless(transformers is not None, "needs transformers")
class Transformers(unittest.TestCase):
    def check(self, name, field, kwargs):
        m = tiny(name)
        with torch.no_grad():
            want = m(IDS, **kwargs)
        g = mcir.capture(m, (IDS,), kwargs=kwargs)
        c = mcir.compile(g)
        got = c(IDS)
        self.assertIs(type(got), type(want))   # the model's own ModelOutput class
        self.assertLess(rel_err(got[field], want[field]), 1e-4)
        return c

    def test_gpt2(self):
        c = self.check("gpt2", "logits", {"use_cache": False})
        self.assertEqual(len([k for k in c.plan["kernels"] if k["template"] == "streaming_attention"]), 2)

    def test_llama_gqa(self):
        self.check("llama", "logits", {"use_cache": False})

    def test_bert(self):
        self.check("bert", "last_hidden_state", {})

    def test_cache_is_refused_by_name(self):
        with self.assertRaises(mcir.UnsupportedError) as cm:
            mcir.capture(tiny("gpt2"), (IDS,))
        msg = str(cm.exception)
        self.assertIn("GPT2LMHeadModel returns transformers.cache_utils.DynamicCache", msg)
        self.assertIn("kwargs={'use_cache': False}", msg)


if __name__ == "__main__":
    unittest.main()
