"""model.generate() of Hugging Face decoder models with the forward
compiled by mcir (torch >= 2 with transformers; tiny random configs, CPU,
strict mode): the tokens are eager's, greedy and sampled with a fixed seed.

The default (dynamic) KV cache: Dynamo gives the past keys and the past
values of a layer two unrelated length symbols (its fake kernels never
compare them); mcir needs them equal in attention, so the backend makes
symbols that are equal at the first call one dim (mcir.stats()
"merged_dims"), and decoding compiles for a range of lengths, not per
token.

The static cache (cache_implementation="static"): its buffers are updated
in place by index_copy_, which the capture takes as mcir's index_copy and
an extra output written back over the caller's tensor; prefill and decode
compile once each over 32 new tokens.

Also Mistral (a sliding window shorter than the sequence), Gemma, Phi and
T5 (encoder-decoder), sampled, with each cache."""
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcir  # noqa: E402

try:
    import transformers  # noqa: F401
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    dynamo = hasattr(torch, "compile")
except ImportError:
    transformers = None
    dynamo = False

PROMPT = torch.tensor([[3, 17, 99, 5, 64, 2, 31]])


def tiny(name):
    torch.manual_seed(0)
    if name == "gpt2":
        return GPT2LMHeadModel(GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                                          bos_token_id=0, eos_token_id=None)).eval()
    if name == "llama":
        return LlamaForCausalLM(LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                            num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4,
                                            max_position_embeddings=64, eos_token_id=None)).eval()
    if name == "t5":
        return transformers.T5ForConditionalGeneration(transformers.T5Config(
            vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
            decoder_start_token_id=0, eos_token_id=None, pad_token_id=0)).eval()
    common = dict(num_hidden_layers=2, num_attention_heads=4, hidden_size=64, intermediate_size=128,
                  vocab_size=128, max_position_embeddings=64, eos_token_id=None)
    if name == "mistral":   # a sliding window shorter than the sequence: the cache rolls
        return transformers.MistralForCausalLM(transformers.MistralConfig(
            sliding_window=6, num_key_value_heads=2, **common)).eval()
    if name == "gemma":
        return transformers.GemmaForCausalLM(transformers.GemmaConfig(
            head_dim=16, num_key_value_heads=2, **common)).eval()
    return transformers.PhiForCausalLM(transformers.PhiConfig(**common)).eval()


@unittest.skipUnless(transformers is not None and dynamo, "needs transformers and torch.compile")
class Generate(unittest.TestCase):
    def generate(self, name, sample, new=12, **kw):
        m = tiny(name)
        args = dict(max_new_tokens=new, min_new_tokens=new, pad_token_id=0, do_sample=sample, **kw)
        with torch.no_grad():
            torch.manual_seed(1)
            want = m.generate(PROMPT, **args)
            torch._dynamo.reset()
            mcir.reset_stats()
            m.forward = torch.compile(m.forward, backend="mcir", options={"strict": True})
            torch.manual_seed(1)
            got = m.generate(PROMPT, **args)
        start = 1 if m.config.is_encoder_decoder else PROMPT.shape[1]   # T5: the decoder's start token
        self.assertEqual(want.shape, (1, start + new))
        self.assertEqual(got.tolist(), want.tolist())
        s = mcir.stats()
        self.assertEqual(s["graphs_fallback"], 0)
        self.assertEqual(s["calls_mcir"], new)           # every step through mcir
        return want, s

    def check_dynamic(self, name, greedy):
        toks, s = self.generate(name, sample=True)
        self.assertGreater(len(set(toks[0, PROMPT.shape[1]:].tolist())), 3)   # varied tokens
        # the prefill, the first decode step, the decode for a range of
        # lengths (and once more past twice its first length)
        self.assertGreaterEqual(s["merged_dims"], 1)
        self.assertLessEqual(s["compiles"], 4)
        if greedy:   # (GPT-2's only: the sampled run is the stronger check, CI time)
            self.generate(name, sample=False)

    def test_gpt2_dynamic_cache(self):
        self.check_dynamic("gpt2", True)

    def test_llama_dynamic_cache(self):
        self.check_dynamic("llama", False)

    def check_static(self, name, greedy):
        # the cache's buffers are updated in place (index_copy_) and written
        # back to the caller's tensors: one compile for the prefill, one for
        # every decode step
        toks, s = self.generate(name, sample=True, new=32, cache_implementation="static")
        self.assertGreater(len(set(toks[0, PROMPT.shape[1]:].tolist())), 3)
        self.assertEqual(s["compiles"], 2)
        self.assertEqual(s["graphs"], 2)
        if greedy:
            self.generate(name, sample=False, cache_implementation="static")

    def test_gpt2_static_cache(self):
        self.check_static("gpt2", True)

    def test_llama_static_cache(self):
        self.check_static("llama", False)

    def test_static_cache_decode_replays_a_cuda_graph(self):
        # on the emulated device (the GPU runtime's path, on the CPU):
        # the decode step's launches captured once, every later step one
        # replay; the tokens eager's
        m = tiny("gpt2")
        args = dict(max_new_tokens=4, min_new_tokens=4, pad_token_id=0, do_sample=False,
                    cache_implementation="static")
        with torch.no_grad():
            want = m.generate(PROMPT, **args)
            torch._dynamo.reset()
            mcir.reset_stats()
            m.forward = torch.compile(m.forward, backend="mcir",
                                      options={"strict": True, "device": "emu", "cuda_graphs": True})
            got = m.generate(PROMPT, **args)
        self.assertEqual(got.tolist(), want.tolist())
        s = mcir.stats()
        self.assertEqual((s["compiles"], s["calls_mcir"]), (2, 4))
        self.assertEqual(s["graph_replays"], 4)   # the prefill's and each decode step's

    def check_family(self, name, dynamic_compiles):
        # sampled, 12 tokens, each cache: eager's tokens
        _, s = self.generate(name, sample=True)
        self.assertLessEqual(s["compiles"], dynamic_compiles)
        _, s = self.generate(name, sample=True, cache_implementation="static")
        self.assertEqual(s["compiles"], 2)

    def test_mistral_sliding_window(self):
        self.check_family("mistral", 4)

    def test_gemma(self):
        self.check_family("gemma", 4)

    def test_phi(self):
        self.check_family("phi", 4)

    def test_t5_encoder_decoder(self):
        # T5's decoder builds its relative position bias from the lengths:
        # ops of the graph over a range too (test_dynamic's relative
        # positions), three widenings of the range over 12 tokens
        self.check_family("t5", 5)


if __name__ == "__main__":
    unittest.main()
