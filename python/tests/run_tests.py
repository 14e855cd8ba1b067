"""Runs the Python API's tests; exit 77 (skip) where torch is missing."""
import os
import sys
import unittest

try:
    import torch  # noqa: F401
except ImportError:
    print("torch is not installed (Debian: python3-torch): Python API tests skipped")
    sys.exit(77)
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(here))
suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py")
result = unittest.TextTestRunner(verbosity=2).run(suite)
run, bad = result.testsRun, len(result.failures) + len(result.errors)
print("%d passed, %d failed, %d skipped" % (run - bad - len(result.skipped), bad,
                                            len(result.skipped)))
sys.exit(0 if result.wasSuccessful() and run > 0 else 1)
