#!/usr/bin/env bash
# gemm_cast_chain.sh MCIRC SOURCE_DIR
# tests/data/prologue/cast_chain.json (f32 activations cast to f16 through
# chains with the cast anywhere: cast(x * gamma), cast(silu(g) * u),
# cast(x) * s, each feeding a matmul) through mcirc on sm_90: every chain
# fused whole into its GEMM (3 kernels, each the sm_90a template with the
# f32 leaves read as two 32-column TMA boxes per K step), then run on the
# emulated device (every check on) and verified against the original
# graph's interpreter.
set -uo pipefail
mcirc=$1 src=$2
g="$src/tests/data/prologue/cast_chain.json"
command -v "${CXX:-c++}" >/dev/null 2>&1 || { echo "skip: no host C++ compiler for the emulated device"; exit 77; }
fail=0
plan=$("$mcirc" --arch sm_90 --emit plan "$g" 2>&1) || { echo "FAIL: mcirc --emit plan"; exit 1; }
n=$(grep -c '"template": *"matmul"' <<<"$plan")
boxes=$(grep -c 'two TMA boxes of 32 f32 columns' <<<"$plan")
echo "matmul kernels: $n, with f32 leaves: $boxes"
out=$("$mcirc" --arch sm_90 --trace --run --device emu --verify "$g" 2>&1)
rc=$?
grep -E '^\[|^  kernels|^verify' <<<"$out"
kernels=$(grep -oE '^  kernels +[0-9]+' <<<"$out" | grep -oE '[0-9]+$')
ok=$(grep -c '^verify .* ok$' <<<"$out")
((rc == 0)) || { echo "FAIL: exit $rc"; fail=1; }
[ "$kernels" = 3 ] || { echo "FAIL: $kernels kernels, want 3 (each chain fused into its GEMM)"; fail=1; }
[ "$n" = 3 ] && [ "$boxes" = 3 ] || { echo "FAIL: $n matmul kernels, $boxes with f32 boxes; want 3 and 3"; fail=1; }
((ok == 6)) || { echo "FAIL: $ok verify lines ok, want 6"; fail=1; }
grep -q '^verify .*FAIL$' <<<"$out" && fail=1
exit $fail
