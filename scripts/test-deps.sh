#!/usr/bin/env bash
# Installs what only the test suite uses, when missing: Graphviz (the
# report's drawings), Chromium (the report is opened in a headless
# browser), Debian's PyTorch with torchvision and NumPy (the Python API is
# tested against them), python3-venv (the PyTorch 2 tests make a venv
# with PyPI's torch: tests/python_torch2_test.sh), python3-pip and, with
# it, PyPI's nvidia-cuda-nvdisasm (nvdisasm, which the SASS audit runs:
# docs/codegen.md "Kernel audit"; the CUDA toolkit here lacks it). A
# failure here is not fatal: those tests then skip (exit 77), check the
# page without drawings, or the audit says "SASS: not available".
set -uo pipefail
pkgs=(graphviz chromium python3-torch python3-torchvision python3-numpy python3-venv python3-pip)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing (tests): ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
    echo "could not install ${missing[*]}: the tests that need them skip" >&2
fi

# nvdisasm: where codegen/sass.c looks first (PATH, the toolkit), or the
# wheel already installed for python3; else the wheel for this user
# (~/.local: no root needed). Debian's python3 is "externally managed"
# (PEP 668): --user then needs --break-system-packages, which touches only
# ~/.local; inside a virtual environment --user is refused and the plain
# install goes into the environment. Offline, pip gives up after one retry.
have_nvdisasm() {
  command -v nvdisasm >/dev/null 2>&1 && return 0
  for d in "${CUDA_HOME:-}" /usr/local/cuda; do [ -n "$d" ] && [ -x "$d/bin/nvdisasm" ] && return 0; done
  python3 - 2>/dev/null <<'EOF'
import os, site, sysconfig, sys
dirs = [sysconfig.get_paths().get("purelib", ""), sysconfig.get_paths().get("platlib", "")]
dirs += [site.getusersitepackages()] + list(site.getsitepackages())
for d in dirs:
    for rel in ("nvidia/cu13/bin/nvdisasm", "nvidia/cuda_nvdisasm/bin/nvdisasm"):
        if os.access(os.path.join(d, rel), os.X_OK):
            sys.exit(0)
sys.exit(1)
EOF
}
if [ -z "${MCIR_NVDISASM:-}" ] && ! have_nvdisasm; then
  echo "installing (tests): nvidia-cuda-nvdisasm (PyPI, for the SASS audit)" >&2
  pip=(python3 -m pip install --quiet --disable-pip-version-check --retries 1 --timeout 30)
  { "${pip[@]}" --user nvidia-cuda-nvdisasm ||
    "${pip[@]}" --user --break-system-packages nvidia-cuda-nvdisasm ||
    "${pip[@]}" nvidia-cuda-nvdisasm; } >&2 2>/dev/null && have_nvdisasm ||
    echo "could not install nvidia-cuda-nvdisasm: the SASS audit says 'not available', test_sass_nvdisasm skips" >&2
fi
exit 0
