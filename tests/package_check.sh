#!/usr/bin/env bash
# The release package works where it is unpacked (CTest: package_relocatable).
#   tests/package_check.sh SOURCE_DIR BUILD_DIR WORK_DIR
# Packs BUILD_DIR with scripts/package.sh --no-build, unpacks the tarball
# into WORK_DIR, moves it (relocation), then: every program's shared
# libraries resolve inside the package (ldd), except the C library's and
# CUDA's; mcirc compiles an example and runs another on the CPU matching
# PyTorch's output (mcir-compare); a program built against the package
# with pkg-config links and runs; mcir-gpu-check and mcir-gpu-run find their
# programs and, without a GPU, exit 77 (the run recording the package's
# commit); the tarball stays under 48 MiB.
set -euo pipefail
src=$1 build=$2 work=$3
fail() { echo "package_check: FAIL: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work"
tarball=$("$src/scripts/package.sh" --no-build "$build" "$work/out")
size=$(du -h "$tarball" | cut -f1)
bytes=$(stat -c %s "$tarball")
tar xzf "$tarball" -C "$work"
top=$(basename "$tarball" .tar.gz)
[ -d "$work/$top" ] || fail "the tarball has no top directory $top"
mv "$work/$top" "$work/moved"
pkg=$work/moved
rm -rf "$work/out"

# 1. shared libraries: from the package, the C library, or CUDA only
checked=0
for exe in "$pkg"/bin/*; do
  head -c 4 "$exe" | grep -q ELF || continue
  checked=$((checked + 1))
  grep -q 'R.*PATH.*\$ORIGIN/../lib' <<<"$(readelf -d "$exe")" || fail "$exe: no \$ORIGIN/../lib in its RUNPATH"
  while read -r name _ path _; do
    case $name in
      linux-vdso*|/lib*/ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*) continue ;;
      libnvrtc*|libcuda.so*|libcublas*) continue ;;   # the machine's own CUDA
    esac
    [ "$path" != "not" ] || fail "$exe: $name not found"
    case $(readlink -f "$path") in
      "$pkg"/lib/*) ;;
      *) fail "$exe: $name resolves to $path, outside the package" ;;
    esac
  done < <(ldd "$exe")
done
((checked >= 4)) || fail "only $checked programs in bin/"
deps=$(ldd "$pkg/bin/mcirc" "$pkg/bin/test_gpu")
for lib in libyaml-0.so.2 libpcre2-8.so.0 libjansson.so.4 libsubunit.so.0; do
  grep -qF "$lib => $pkg/bin/../lib/$lib" <<<"$deps" ||
    fail "$lib is not resolved from the package"
done
if ls "$pkg"/lib/libnvrtc* "$pkg"/lib/libcuda* "$pkg"/lib/libcublas* >/dev/null 2>&1; then
  fail "CUDA libraries bundled in lib/"
fi

# 2. mcirc from the package, on the package's examples
ex=$pkg/share/mcir/examples
cd "$work"
grep -q 'kernels' <<<"$("$pkg/bin/mcirc" "$ex/gpt2_block/graph.json")" || fail "mcirc gpt2_block: no summary"
"$pkg/bin/mcirc" --run --device cpu -o "$work/run" --input "x=$ex/mlp_tiny/inputs/x.npy" \
  "$ex/mlp_tiny/graph.json" >/dev/null || fail "mcirc --run mlp_tiny failed"
"$pkg/bin/mcir-compare" --tol 1e-4 "$work/run/y.npy" "$ex/mlp_tiny/expected/y.npy" ||
  fail "mlp_tiny's output differs from PyTorch's"
if "$pkg/bin/mcir-compare" --tol 1e-4 "$work/run/y.npy" "$ex/gpt2_block/expected/y.npy" 2>/dev/null; then
  fail "mcir-compare accepted arrays of different shapes"
fi
# the emulated device from the package: its emulator header is embedded,
# the host C++ compiler builds the kernels (none here: a clear exit 3)
if command -v "${CXX:-c++}" >/dev/null 2>&1; then
  MCIR_CACHE_DIR=$work/emu-cache "$pkg/bin/mcirc" --run --device emu --verify -o "$work/emu" \
    --input "x=$ex/mlp_tiny/inputs/x.npy" "$ex/mlp_tiny/graph.json" >"$work/emu.log" 2>&1 ||
    fail "mcirc --run --device emu mlp_tiny failed: $(cat "$work/emu.log")"
  grep -q 'emu vs the original graph).*ok' "$work/emu.log" || fail "no emulated verify line: $(cat "$work/emu.log")"
  "$pkg/bin/mcir-compare" --tol 1e-4 "$work/emu/y.npy" "$ex/mlp_tiny/expected/y.npy" ||
    fail "the emulated mlp_tiny differs from PyTorch's"
fi

# 3. a program built against the package with pkg-config
cat >"$work/consumer.c" <<'C'
#include <stdio.h>
#include "mcirc/pipeline.h"
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    mcir_options o = mcir_options_default();
    o.graph_path = argv[1];
    mcir_diag d = mcir_diag_stderr();
    mcir_compilation c;
    int st = mcir_compile(&o, &c, &d);
    if (st == 0) printf("%d nodes, %d after rewriting\n", c.nodes_before, c.nodes_after);
    mcir_compilation_free(&c);
    return st;
}
C
export PKG_CONFIG_PATH=$pkg/lib/pkgconfig
# shellcheck disable=SC2046
${CC:-cc} -std=c11 -o "$work/consumer" "$work/consumer.c" $(pkg-config --cflags --libs mcir) ||
  fail "cannot build a program with pkg-config --cflags --libs mcir"
grep -q 'after rewriting' <<<"$("$work/consumer" "$ex/gpt2_block/graph.json")" || fail "the pkg-config program failed"

# 4. the GPU check and the first GPU run find their programs in the
# package (77: no GPU here); the run records the commit the package was
# built from (share/mcir/build-info.txt)
grep -Eq '^commit: ([0-9a-f]{40}|unknown)' "$pkg/share/mcir/build-info.txt" || fail "no commit in share/mcir/build-info.txt"
for f in torch_attention.py torch_norms.py torch_gemm.py torch_blocks.py gen_blocks.py gpu_run_summary.py; do
  [ -f "$pkg/share/mcir/bench/$f" ] || fail "share/mcir/bench/$f is not in the package"
done
if ! command -v nvidia-smi >/dev/null 2>&1; then
  set +e
  msg=$("$pkg/bin/mcir-gpu-check" 2>&1)
  rc=$?
  set -e
  [ $rc -eq 77 ] || fail "mcir-gpu-check without a GPU: exit $rc, wanted 77: $msg"
  set +e
  msg=$("$pkg/bin/mcir-gpu-run" --out "$work/gpu-run" 2>&1)
  rc=$?
  set -e
  [ $rc -eq 77 ] || fail "mcir-gpu-run without a GPU: exit $rc, wanted 77: $msg"
  grep -q "^mcir: .*, commit $(sed -n 's/^commit: //p' "$pkg/share/mcir/build-info.txt")" "$work/gpu-run/run-info.txt" ||
    fail "mcir-gpu-run does not record the package's commit"
fi
# 5. small enough to carry to a GPU machine along with the source tree
# (a lent machine takes 64 MiB in all, the tree is about 15 MiB;
# docs/performance.md "A first GPU run")
((bytes < 48 * 1024 * 1024)) || fail "the package is $bytes bytes, over 48 MiB"
echo "package_check: ok ($checked programs, $size tarball)"
rm -rf "$work"
