"""More Hugging Face transformers families through mcir (tiny random configs,
2 layers, hidden 64, vocab 128; CPU; skipped without transformers): Mistral
(sliding window shorter than the sequence), Gemma, Phi, RoBERTa, T5 (the
encoder, and the whole encoder-decoder forward with decoder ids), Whisper's
encoder, ViT, CLIP's text and vision towers. Each is captured
(mcir.capture + mcir.compile, its output the model's own ModelOutput class)
and, on torch >= 2.0, run by torch.compile(backend="mcir") in strict mode,
both within 1e-4 of eager. RoBERTa brings torch.gather (its token types),
Whisper a 1-D convolution, CLIP's text tower indexing by two index
tensors (the pooled token)."""
import os
import sys
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcir  # noqa: E402

try:
    import transformers
    from transformers import (CLIPTextConfig, CLIPTextModel, CLIPVisionConfig, CLIPVisionModel,
                              GemmaConfig, GemmaForCausalLM, MistralConfig, MistralForCausalLM,
                              PhiConfig, PhiForCausalLM, RobertaConfig, RobertaModel, T5Config,
                              T5EncoderModel, T5ForConditionalGeneration, ViTConfig, ViTModel,
                              WhisperConfig)
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
except ImportError:
    transformers = None


def err(got, ref):
    """max |got - ref|, relative where ref's values are larger than 1"""
    got, ref = np.asarray(got, dtype=np.float64), ref.detach().double().numpy()
    assert np.isfinite(ref).all() and np.abs(ref).max() > 0 and ref.std() > 0
    return float(np.abs(got - ref).max() / max(1.0, np.abs(ref).max()))


IDS = torch.tensor([[3, 17, 99, 5, 64, 2, 31, 8]])
DEC = torch.tensor([[0, 7, 42, 9, 11]])
DECODER = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
               bos_token_id=0, eos_token_id=2, pad_token_id=1)
ENCODER = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
T5 = dict(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2,
          num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
          decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)


class T5Seq2Seq(torch.nn.Module):
    """T5ForConditionalGeneration's forward with the decoder ids an input of
    the graph (capture's kwargs are constants)."""
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, decoder_input_ids):
        return self.model(input_ids, decoder_input_ids=decoder_input_ids, use_cache=False)


def tiny(name):
    """(model in eval mode, inputs, keyword constants, fields to compare)"""
    torch.manual_seed(0)
    lm, seq = ("logits",), ("last_hidden_state",)
    pooled = ("last_hidden_state", "pooler_output")
    if name == "mistral":
        m = MistralForCausalLM(MistralConfig(sliding_window=4, **DECODER))
        return m.eval(), (IDS,), {"use_cache": False}, lm
    if name == "gemma":
        m = GemmaForCausalLM(GemmaConfig(head_dim=16, **DECODER))
        return m.eval(), (IDS,), {"use_cache": False}, lm
    if name == "phi":
        m = PhiForCausalLM(PhiConfig(**DECODER))
        return m.eval(), (IDS,), {"use_cache": False}, lm
    if name == "roberta":
        m = RobertaModel(RobertaConfig(vocab_size=128, max_position_embeddings=64, **ENCODER))
        return m.eval(), (IDS,), {}, pooled
    if name == "t5_encoder":
        return T5EncoderModel(T5Config(**T5)).eval(), (IDS,), {}, seq
    if name == "t5":
        m = T5Seq2Seq(T5ForConditionalGeneration(T5Config(**T5)))
        return m.eval(), (IDS, DEC), {}, lm
    if name == "whisper_encoder":
        cfg = WhisperConfig(vocab_size=128, num_mel_bins=16, d_model=64, encoder_layers=2,
                            encoder_attention_heads=4, encoder_ffn_dim=128, decoder_layers=2,
                            decoder_attention_heads=4, decoder_ffn_dim=128,
                            max_source_positions=16, max_target_positions=32, pad_token_id=1,
                            bos_token_id=0, eos_token_id=2, decoder_start_token_id=0)
        # input_features: [batch, mel bins, 2 * max_source_positions]
        return WhisperEncoder(cfg).eval(), (torch.randn(1, 16, 32),), {}, seq
    if name == "vit":
        m = ViTModel(ViTConfig(image_size=32, patch_size=8, **ENCODER))
        return m.eval(), (torch.randn(1, 3, 32, 32),), {}, pooled
    if name == "clip_text":
        # eos_token_id 2: the pooled token is the one with the largest id
        # (as in the original CLIP checkpoints' configs)
        m = CLIPTextModel(CLIPTextConfig(vocab_size=128, max_position_embeddings=64, bos_token_id=0,
                                         eos_token_id=2, pad_token_id=1, **ENCODER))
        return m.eval(), (IDS,), {}, pooled
    assert name == "clip_vision"
    m = CLIPVisionModel(CLIPVisionConfig(image_size=32, patch_size=8, **ENCODER))
    return m.eval(), (torch.randn(1, 3, 32, 32),), {}, pooled


@unittest.skipUnless(transformers is not None, "needs transformers")
class HFFamilies(unittest.TestCase):
    def check(self, name):
        m, args, kwargs, fields = tiny(name)
        with torch.no_grad():
            want = m(*args, **kwargs)
        c = mcir.compile(mcir.capture(m, args, kwargs=kwargs))
        got = c(*args)
        self.assertIs(type(got), type(want))   # the model's own ModelOutput class
        for f in fields:
            self.assertLess(err(got[f], want[f]), 1e-4, "capture: %s %s" % (name, f))
        if not hasattr(torch, "compile"):
            return c
        torch._dynamo.reset()
        mcir.reset_stats()
        opt = torch.compile(m, backend="mcir", options={"strict": True})
        with torch.no_grad():
            got = opt(*args, **kwargs)
        for f in fields:
            self.assertLess(err(got[f], want[f]), 1e-4, "torch.compile: %s %s" % (name, f))
        s = mcir.stats()
        self.assertGreaterEqual(s["graphs_mcir"], 1)
        self.assertEqual(s["graphs_fallback"], 0, s["fallbacks"])
        return c

    def test_mistral_sliding_window(self):
        self.check("mistral")

    def test_gemma(self):
        self.check("gemma")

    def test_phi(self):
        self.check("phi")

    def test_roberta(self):
        self.check("roberta")

    def test_t5_encoder(self):
        self.check("t5_encoder")

    def test_t5_encoder_decoder(self):
        c = self.check("t5")
        m, _, _, _ = tiny("t5")
        dec = torch.tensor([[0, 99, 3, 120, 64]])   # the decoder ids are an input of the graph
        with torch.no_grad():
            want = m(IDS, dec)
        self.assertLess(err(c(IDS, dec)["logits"], want["logits"]), 1e-4)

    def test_whisper_encoder(self):
        self.check("whisper_encoder")

    def test_vit(self):
        self.check("vit")

    def test_clip_text(self):
        self.check("clip_text")

    def test_clip_vision(self):
        self.check("clip_vision")


if __name__ == "__main__":
    unittest.main()
