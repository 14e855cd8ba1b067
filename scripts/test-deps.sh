#!/usr/bin/env bash
# Installs what only the test suite uses, when missing: Graphviz (the
# report's drawings), Chromium (the report is opened in a headless
# browser), Debian's PyTorch with torchvision and NumPy (the Python API is
# tested against them), and python3-venv (the PyTorch 2 tests make a venv
# with PyPI's torch: tests/python_torch2_test.sh). A failure here is not
# fatal: those tests then skip (exit 77) or check the page without drawings.
set -uo pipefail
pkgs=(graphviz chromium python3-torch python3-torchvision python3-numpy python3-venv)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0
echo "installing (tests): ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq || true
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
  echo "could not install ${missing[*]}: the report tests skip what needs them" >&2
exit 0
