"""timm image models through mcir (random weights, num_classes=10, small
inputs; CPU; skipped without timm): ResNet-18, ConvNeXt-atto,
EfficientNet-B0, MobileNetV3-small, DeiT-tiny (2 blocks), a small Swin
(shifted windows) and ResNet-10t. Each is captured (mcir.capture +
mcir.compile) and, on torch >= 2.0, run by torch.compile(backend="mcir") in
strict mode, both within 1e-4 of eager. Swin brings roll and padding;
ResNet-10t an average pool with ceil_mode over even sizes."""
import os
import sys
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcir  # noqa: E402

try:
    import timm
except ImportError:
    timm = None


def err(got, ref):
    """max |got - ref|, relative where ref's values are larger than 1"""
    got, ref = np.asarray(got, dtype=np.float64), ref.detach().double().numpy()
    assert np.isfinite(ref).all() and np.abs(ref).max() > 0 and ref.std() > 0
    return float(np.abs(got - ref).max() / max(1.0, np.abs(ref).max()))


@unittest.skipUnless(timm is not None, "needs timm")
class Timm(unittest.TestCase):
    def check(self, name, size=64, **kw):
        torch.manual_seed(0)
        m = timm.create_model(name, pretrained=False, num_classes=10, **kw).eval()
        x = torch.randn(1, 3, size, size)
        with torch.no_grad():
            want = m(x)
        self.assertEqual(tuple(want.shape), (1, 10))
        got = mcir.compile(mcir.capture(m, (x,)))(x)
        self.assertLess(err(got, want), 1e-4, "capture: " + name)
        if not hasattr(torch, "compile"):
            return
        torch._dynamo.reset()
        mcir.reset_stats()
        opt = torch.compile(m, backend="mcir", options={"strict": True})
        with torch.no_grad():
            got = opt(x)
        self.assertLess(err(got, want), 1e-4, "torch.compile: " + name)
        s = mcir.stats()
        self.assertGreaterEqual(s["graphs_mcir"], 1)
        self.assertEqual(s["graphs_fallback"], 0, s["fallbacks"])

    def test_resnet18(self):
        self.check("resnet18")

    def test_resnet10t(self):
        self.check("resnet10t")

    def test_convnext_atto(self):
        self.check("convnext_atto")

    def test_efficientnet_b0(self):
        self.check("efficientnet_b0")

    def test_mobilenetv3_small(self):
        self.check("mobilenetv3_small_050")

    def test_deit_tiny(self):
        self.check("deit_tiny_patch16_224", img_size=64, depth=2)

    def test_swin(self):
        # 64 / patch 4 = 16, windows of 4: no padding; the second block of a
        # stage shifts its windows
        self.check("swin_tiny_patch4_window7_224", img_size=64, window_size=4, embed_dim=32,
                   depths=(2, 2), num_heads=(2, 4))


if __name__ == "__main__":
    unittest.main()
