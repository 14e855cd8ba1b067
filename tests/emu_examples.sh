#!/usr/bin/env bash
# emu_examples.sh MCIRC SOURCE_DIR [full|sanitizer]
# Every example and golden graph through `mcirc --run --device emu --verify`
# (the generated kernels through the real runtime on the emulated device,
# every check on; the outputs against the original graph's interpreter):
#   full: every example in the default (pool) mode, the lazy and eager
#         modes on every example but the three largest (gpt2_stack,
#         llama_block, bert_layer: their kernels and allocation paths are
#         the smaller blocks'), every golden graph in all three modes;
#         gpt2_stack with the emulator's bounds checks only
#         (MCIR_EMU_CHECKS=1: 12 x gpt2_block's kernels, which run with
#         every check in gpt2_block; the stack checks its arena and its
#         outputs: 107 s against 167 s with every check on this VM);
#   sanitizer: (an ASan + UBSan build: ~3x slower) the examples but the
#         three largest, and the golden graphs, in pool mode.
# One line per run with its time; exit 1 if any run fails or a verify
# line says FAIL.
set -uo pipefail
mcirc=$1 src=$2 what=${3:-full}
command -v "${CXX:-c++}" >/dev/null 2>&1 || { echo "skip: no host C++ compiler for the emulated device"; exit 77; }
fail=0 t0=$SECONDS
run() {   # MODE GRAPH
  local mode=$1 g=$2 n s out rc ok
  n=$(basename "$(dirname "$g")")
  s=$SECONDS
  if [ "$n" = gpt2_stack ] && [ "$what" = full ]; then
    out=$(MCIR_EMU_CHECKS=1 "$mcirc" --run --device emu --alloc "$mode" --verify "$g" 2>&1)
  else
    out=$("$mcirc" --run --device emu --alloc "$mode" --verify "$g" 2>&1)
  fi
  rc=$?
  ok=$(grep -c '^verify .* ok$' <<<"$out")
  if ((rc != 0)) || grep -q '^verify .*FAIL$' <<<"$out" || ((ok < 2)); then
    echo "FAIL $n ($mode): exit $rc, $ok verify lines ok"
    grep -v '^  ' <<<"$out" | head -8
    fail=1
  else
    echo "ok   $n ($mode): $ok verify lines, $((SECONDS - s)) s"
  fi
}
big="gpt2_stack llama_block bert_layer"
for g in "$src"/examples/*/graph.json; do
  n=$(basename "$(dirname "$g")")
  if [ "$what" = sanitizer ]; then
    [[ " $big " == *" $n "* ]] || run pool "$g"
    continue
  fi
  run pool "$g"
  [[ " $big " == *" $n "* ]] || { run lazy "$g"; run eager "$g"; }
done
for g in "$src"/tests/golden/*/input.json; do
  if [ "$what" = sanitizer ]; then run pool "$g"; else for m in pool lazy eager; do run "$m" "$g"; done; fi
done
echo "emu_examples ($what): $((SECONDS - t0)) s"
exit $fail
