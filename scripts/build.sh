#!/usr/bin/env bash
# Configures and builds mcir into DIR (default build/); extra arguments go
# to CMake, e.g. scripts/build.sh build-asan -DMCIR_SANITIZE=ON
# The build's own output goes to DIR/build.log and is shown on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cuda=()
[ -d /usr/local/cuda ] && cuda=(-DCUDAToolkit_ROOT=/usr/local/cuda)
mkdir -p "$dir"
echo "building $dir ..." >&2
if ! { cmake -S . -B "$dir" "${cuda[@]}" "$@" && cmake --build "$dir" -j"$(nproc)"; } >"$dir/build.log" 2>&1; then
  cat "$dir/build.log" >&2
  echo "build failed (log: $dir/build.log)" >&2
  exit 1
fi
