#!/usr/bin/env bash
# Makes the relocatable release tarball: builds DIR (default build/; with
# --no-build, packs what is built), installs it into a staging directory
# and tars that (what `cpack -G TGZ` makes too, without its rebuild) into
# OUT (default DIR/package). Prints the tarball's path. Unpack it anywhere:
#   tar xzf mcir-VERSION-linux-x86_64.tar.gz
#   mcir-VERSION-linux-x86_64/bin/mcirc --run --device gpu \
#       mcir-VERSION-linux-x86_64/share/mcir/examples/gpt2_block/graph.json
#   mcir-VERSION-linux-x86_64/bin/mcir-gpu-check      (scripts/gpu-check.sh)
# Its programs find libyaml, PCRE2, jansson, protobuf-c and libsubunit in
# the package's lib/, and the CUDA libraries (NVRTC, driver, cuBLAS) on the
# machine they run on (README.md, "Install").
set -euo pipefail
cd "$(dirname "$0")/.."
build=1
if [ "${1:-}" = --no-build ]; then build=0; shift; fi
dir=${1:-build}
out=${2:-$dir/package}
if ((build)); then
  scripts/build.sh "$dir"
elif [ ! -f "$dir/CPackConfig.cmake" ]; then
  echo "package: $dir is not a configured build directory" >&2
  exit 2
fi
name=$(sed -n 's/^set(CPACK_PACKAGE_FILE_NAME "\(.*\)")$/\1/p' "$dir/CPackConfig.cmake")
[ -n "$name" ] || { echo "package: no CPACK_PACKAGE_FILE_NAME in $dir/CPackConfig.cmake" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$out/stage
rm -rf "$stage" "$out/$name.tar.gz"
if ! cmake --install "$dir" --prefix "$stage/$name" >"$out/install.log" 2>&1; then
  cat "$out/install.log" >&2
  echo "package: cmake --install failed (log: $out/install.log)" >&2
  exit 1
fi
tar czf "$out/$name.tar.gz" -C "$stage" "$name"
rm -rf "$stage"
echo "$out/$name.tar.gz"
