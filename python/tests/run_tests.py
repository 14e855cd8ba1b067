"""Runs the Python API's tests; exit 77 (skip) where torch is missing.

    run_tests.py               the package in python/ (a source checkout)
    run_tests.py --installed   the installed package (pip install ./python),
                               which must load the library inside itself
"""
import os
import sys
import unittest

try:
    import torch
except ImportError:
    print("torch is not installed (Debian: python3-torch): Python API tests skipped")
    sys.exit(77)
here = os.path.dirname(os.path.abspath(__file__))
installed = "--installed" in sys.argv[1:]
if not installed:
    sys.path.insert(0, os.path.dirname(here))
import mcir  # noqa: E402
import mcir._lib  # noqa: E402

pkg = os.path.dirname(os.path.abspath(mcir.__file__))
lib = mcir._lib.library_path()
print("torch %s, mcir from %s, library %s" % (torch.__version__, pkg, lib))
if installed and (pkg.startswith(os.path.dirname(here)) or os.path.dirname(lib) != pkg):
    print("--installed: the package or its library is not the installed one", file=sys.stderr)
    sys.exit(1)
suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py")
result = unittest.TextTestRunner(verbosity=2).run(suite)
run, bad = result.testsRun, len(result.failures) + len(result.errors)
print("%d passed, %d failed, %d skipped" % (run - bad - len(result.skipped), bad,
                                            len(result.skipped)))
sys.exit(0 if result.wasSuccessful() and run > 0 else 1)
