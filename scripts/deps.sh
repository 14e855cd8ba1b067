#!/usr/bin/env bash
# Installs the Debian packages mcir builds with, when they are missing.
# The CUDA toolkit is expected in /usr/local/cuda (NVRTC; optional: without
# it mcir builds and runs on the CPU, and --emit ptx says why it can't).
set -euo pipefail
pkgs=(cmake make gcc g++ pkg-config libyaml-dev libpcre2-dev check libsubunit-dev libjansson-dev
      libonnx-dev protobuf-c-compiler libprotobuf-c-dev
      clang libclang-rt-14-dev)   # libFuzzer (scripts/fuzz.sh)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
