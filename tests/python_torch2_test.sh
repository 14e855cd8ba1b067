#!/usr/bin/env bash
# The Python API as a PyTorch 2 user gets it (issue #31): a venv with
# PyTorch and torchvision from PyPI (pinned below; kept in BUILD/venv-torch2
# and reused while the pins are the same), `pip install ./python` into it —
# which builds libmcir_capi.so and puts it in the package, nothing set, no
# separate build —, then every test of python/tests (models, capture,
# torch.compile in strict mode) run by that venv's Python from outside the
# source tree, against the installed package.
#   tests/python_torch2_test.sh SOURCE_DIR BUILD_DIR
# MCIR_TORCH2=0 skips it (exit 77), for a machine without PyPI.
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
if [ "${MCIR_TORCH2:-1}" = 0 ]; then
  echo "MCIR_TORCH2=0: the PyTorch 2 tests are skipped"
  exit 77
fi
# PyPI's Linux wheels of torch bring their CUDA libraries (about 5 GB
# installed); the venv is made once per build directory. transformers and
# accelerate: its tp_plan="auto" (python/tests/test_distributed.py); timm:
# python/tests/test_timm.py.
pins=(torch==2.15.0 torchvision==0.29.2 numpy==2.4.6 transformers==5.24.0 accelerate==1.15.0 timm==1.0.31)
venv=$build/venv-torch2
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
if [ "$(cat "$venv/pins" 2>/dev/null)" != "${pins[*]}" ]; then
  rm -rf "$venv"
  echo "creating $venv (${pins[*]}) ..."
  start=$SECONDS
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}"
  echo "${pins[*]}" >"$venv/pins"
  echo "venv ready in $((SECONDS - start)) s"
fi
start=$SECONDS
"$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps "$src/python"
echo "pip install ./python: $((SECONDS - start)) s"
# from elsewhere, with nothing pointing at the build: the installed package
# must find its own library
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
env -u MCIR_CAPI_LIB -u PYTHONPATH "$venv/bin/python" "$src/python/tests/run_tests.py" --installed
