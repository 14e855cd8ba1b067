#!/usr/bin/env bash
# gpu_check_emu_test.sh BUILD_DIR: scripts/gpu-check.sh's own logic on the
# emulated device — every example it is given run by mcirc --run --device
# emu in the pool, lazy, eager, no-cuBLAS and CUDA-graph ways against --device cpu, the
# peak ordering pool <= lazy <= eager, the summary and exit status — and
# that its comparisons can fail (MCIR_GPU_CHECK_COMPARE=false: exit 1, a
# FAIL line per example).
set -uo pipefail
build=$1 src=$(cd "$(dirname "$0")/.." && pwd)
command -v "${CXX:-c++}" >/dev/null 2>&1 || { echo "skip: no host C++ compiler"; exit 77; }
work=$(mktemp -d /tmp/mcir-gpucheck-emu-XXXXXX)
trap 'rm -rf "$work"' EXIT
examples=mlp_tiny,gpt2_block,resnet_small,attention_f16
fail=0
bad() { echo "FAIL: $*"; fail=1; }
MCIR_CACHE_DIR=${MCIR_CACHE_DIR:-$work/cache} "$src/scripts/gpu-check.sh" --device emu --examples "$examples" --budget 600 \
  --log "$work/ok" "$build" >"$work/ok.out" 2>&1
rc=$?
cat "$work/ok.out"
((rc == 0)) || bad "gpu-check --device emu exited $rc"
for e in ${examples//,/ }; do
  grep -q "^PASS example $e: emu pool/lazy/eager/no-cuBLAS/graphs match cpu" "$work/ok.out" || bad "no PASS line for example $e"
  grep -q "^PASS peak $e: pool [0-9]* <= lazy [0-9]* .* <= eager [0-9]* bytes" "$work/ok.out" || bad "no peak line for $e"
done
grep -q '^0 failed\|, 0 failed' "$work/ok.out" || grep -q ' 0 failed' "$work/ok.out" || bad "the summary counts failures"
MCIR_GPU_CHECK_COMPARE=false MCIR_CACHE_DIR=${MCIR_CACHE_DIR:-$work/cache} "$src/scripts/gpu-check.sh" --device emu \
  --examples mlp_tiny --budget 300 --log "$work/bad" "$build" >"$work/bad.out" 2>&1
rc=$?
((rc == 1)) || bad "with every comparison failing gpu-check exited $rc, not 1: $(cat "$work/bad.out")"
grep -q '^FAIL example mlp_tiny: .*differs' "$work/bad.out" || bad "no FAIL line for a differing output"
[ $fail = 0 ] && echo ok
exit $fail
