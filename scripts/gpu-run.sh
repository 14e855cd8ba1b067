#!/usr/bin/env bash
# gpu-run.sh — the first run on a GPU, in one command that fits a short lease.
#
#   PREFIX/bin/mcir-gpu-run [--out DIR] [--budget S] [--cache DIR] [--tar FILE] [--prepare] [PREFIX]
#   scripts/gpu-run.sh      [same options]                                      [BUILD_DIR]
#
# On a machine with only the CUDA driver and toolkit, from the unpacked
# package (README.md "Install"), in at most S seconds (default 540, nine
# minutes) in all, everything into DIR (default ./mcir-gpu-run-DATE):
#   1. run-info.txt: UTC date, mcir version and commit, device (name,
#      driver, memory, compute capability), NVRTC, PyTorch, the budget;
#   2. mcir-gpu-check (every allocation mode, without cuBLAS, and
#      compute-sanitizer where it works) with half of the budget, its logs
#      in DIR/gpu-check/;
#   3. a short benchmark subset, each program with a share of what is left:
#      attention (20 shapes: FA3 f16 head dim 128, GQA 4:1 bf16, Llama-3 GQA
#      decode at batch 8, padding and full masks) by mcir and by
#      every PyTorch SDPA backend, the three norms in f16 (27 shapes) and
#      8 elementwise chains (Llama-7B's SwiGLU silu(g) * u in f16 and bf16,
#      GPT-2's bias + tanh-GELU in f16, a residual add in f32 cast to bf16;
#      at 512 and 4096 tokens) by mcir and PyTorch eager, GEMMs (7 shapes:
#      f16 and bf16 at 4096^3 and 8192^3, GPT-2's c_fc with bias + GELU
#      over tokens and over [8, 1024, 768], Llama-7B's SwiGLU down
#      projection at 8192 tokens) by mcir and PyTorch eager (and again
#      with MCIR_NO_CUBLAS=1: mcir's own GEMM kernels, gemm_generated.csv),
#      and one block (GPT-2, batch 8, seq 1024, f16) by mcir and PyTorch
#      eager / torch.compile; PyTorch's part only where python3 imports
#      torch. CSVs named as scripts/bench.sh --gpu
#      names them (attention_gpu.csv, attention_torch.csv, norms_gpu.csv,
#      gemm_gpu.csv, ...), a log per program;
#   4. Nsight Compute profiles (ncu-norm.txt, ncu-gemm.txt,
#      ncu-attention.txt) of three of mcir's kernels, where ncu works;
#   5. summary.txt: one PASS / FAIL / SKIP line per step and the figures
#      side by side (bench/gpu_run_summary.py); printed last.
# --cache DIR: the kernel cache (default DIR/kernel-cache). --prepare fills
# it without a GPU (every example, the benchmark subset; NVRTC only), so a
# cache made here and carried along saves the GPU machine the compiles
# (used where its NVRTC version is the same). --tar FILE: also packs DIR's
# logs, CSVs and summaries (no kernels, no .npy) into FILE, for machines
# that hand back only a few files.
#
# Exit status: 0 every step passed, 1 a step failed, 2 usage error or
# programs not found, 77 no GPU here (after run-info.txt, before any GPU
# work; with --prepare: 0 once the cache is filled).
set -uo pipefail

usage() {
  local st=${1:-2}
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&$((st ? 2 : 1))
  exit "$st"
}
out="" budget=540 cache="" tarball="" prepare=0 target=""
while (($#)); do
  case $1 in
    --out) (($# >= 2)) || usage; out=$2; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    --budget) (($# >= 2)) || usage; budget=$2; shift 2 ;;
    --budget=*) budget=${1#--budget=}; shift ;;
    --cache) (($# >= 2)) || usage; cache=$2; shift 2 ;;
    --cache=*) cache=${1#--cache=}; shift ;;
    --tar) (($# >= 2)) || usage; tarball=$2; shift 2 ;;
    --tar=*) tarball=${1#--tar=}; shift ;;
    --prepare) prepare=1; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "gpu-run: unknown option $1" >&2; usage ;;
    *) [ -z "$target" ] || usage; target=$1; shift ;;
  esac
done
[[ $budget =~ ^[0-9]+$ ]] && ((budget >= 60)) ||
  { echo "gpu-run: --budget $budget is not a number of seconds (60 at least)" >&2; exit 2; }
start=$(date +%s)
deadline=$((start + budget))

# ------------------------------------------------------------- the programs
self=$(readlink -f "$0")
here=$(dirname "$self")
layout_prefix() {   # an unpacked package: bin/, share/mcir/
  root=$1 data=$1/share/mcir gpu_check=$1/bin/mcir-gpu-check scripts=$1/share/mcir/bench
  mcirc=$1/bin/mcirc bench_dir=$1/bin
}
layout_build() {    # a build directory of a source tree
  data=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$1/CMakeCache.txt" 2>/dev/null)
  [ -n "$data" ] || data=$here/..
  root=$1 mcirc=$1/mcirc/mcirc bench_dir=$1/bench gpu_check=$data/scripts/gpu-check.sh scripts=$data/bench
}
if [ -n "$target" ]; then
  if [ -x "$target/bin/mcirc" ]; then layout_prefix "$(readlink -f "$target")"
  elif [ -x "$target/mcirc/mcirc" ]; then layout_build "$(readlink -f "$target")"
  else echo "gpu-run: $target is neither a build directory nor an mcir package (no mcirc in it)" >&2; exit 2
  fi
elif [ -x "$here/mcirc" ] && [ -d "$here/../share/mcir/examples" ]; then
  layout_prefix "$(readlink -f "$here/..")"
else
  layout_build "$(readlink -f "$here/../build")"
fi
for p in "$mcirc" "$gpu_check" "$bench_dir/bench_attention" "$bench_dir/bench_norms" "$bench_dir/bench_gemm" \
         "$bench_dir/bench_blocks" "$scripts/torch_attention.py" "$scripts/torch_gemm.py" "$scripts/gen_blocks.py" \
         "$scripts/gpu_run_summary.py"; do
  [ -e "$p" ] || { echo "gpu-run: $p not found (build it first, or name the package or build directory)" >&2; exit 2; }
done

# ------------------------------------------------------------------- setup
[ -n "$out" ] || out=$PWD/mcir-gpu-run-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out" || exit 2
out=$(readlink -f "$out")
[ -n "$cache" ] || cache=$out/kernel-cache
mkdir -p "$cache" || exit 2
if [ -n "$tarball" ]; then
  tarball=$(readlink -f "$tarball") && [ -d "$(dirname "$tarball")" ] ||
    { echo "gpu-run: --tar: no directory for $tarball" >&2; exit 2; }
fi
export MCIR_CACHE_DIR=$(readlink -f "$cache")
export MCIR_PROGRESS=0          # logs, not a terminal
py=${PYTHON:-python3}
rm -f "$out/steps.txt"

have_torch=0 torch_version="not importable (no PyTorch comparisons)"
if v=$("$py" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null); then
  have_torch=1 torch_version=$v
fi
commit=unknown
if [ -f "$data/build-info.txt" ]; then
  commit=$(sed -n 's/^commit: //p' "$data/build-info.txt")
elif git -C "$data" rev-parse HEAD >/dev/null 2>&1; then
  commit=$(git -C "$data" rev-parse HEAD)$(git -C "$data" diff --quiet HEAD 2>/dev/null || echo " (with uncommitted changes)")
fi
gpus=$(command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep '^GPU ' || true)
{
  echo "mcir-gpu-run $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "mcir:      $("$mcirc" --version 2>&1), commit $commit"
  [ -f "$data/build-info.txt" ] && sed 's/^/build:     /' "$data/build-info.txt" | grep -v '^build:     commit:'
  echo "programs:  $mcirc"
  if [ -n "$gpus" ]; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null |
      sed 's/^/device:    /'
  else
    echo "device:    none (nvidia-smi $(command -v nvidia-smi >/dev/null && echo 'lists no GPU' || echo 'not found'))"
  fi
  echo "nvrtc:     $(ldd "$mcirc" 2>/dev/null | awk '/libnvrtc/ {print $1, $2, $3}')"
  echo "toolkit:   $( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | sed -n 's/^Cuda compilation tools, //p')"
  echo "torch:     $torch_version"
  echo "cpus:      $(nproc)"
  echo "cache:     $MCIR_CACHE_DIR ($(find "$MCIR_CACHE_DIR" -name '*.kbin' 2>/dev/null | wc -l) entries at start)"
  echo "budget:    $budget s$( ((prepare)) && echo ' (--prepare: compiles only)')"
} >"$out/run-info.txt"
cat "$out/run-info.txt"

# step NAME STATUS TEXT: one line of the summary
step() { printf '%-5s %-22s %s\n' "$2" "$1" "$3" | tee -a "$out/steps.txt"; }
# seconds left before the end of the budget, less what the end needs
left() { echo $((deadline - 20 - $(date +%s))); }
# run_timed LOG SECONDS CMD...: CMD with a timeout, its output in LOG;
# sets rc (124: timed out) and secs
run_timed() {
  local lg=$1 t=$2 t0
  shift 2
  t0=$(date +%s)
  timeout -k 5 "$t" "$@" >"$lg" 2>&1
  rc=$? secs=$(($(date +%s) - t0))
}

blocks_dir=$out/blocks
block=$blocks_dir/gpt2_b8_s1024_f16/graph.json
attention=(--suite all --match fa3/f16/d128/,gqa/bf16/d128/b4/,decode/f16/d128/b8/h32/kv8/,mask/f16/d128/b4/)
# the norms in f16, and bench_norms' elementwise suite: /f16/ takes SwiGLU's
# and bias + GELU's f16 shapes, then SwiGLU in bf16 (Llama's dtype) and the
# f32 residual cast to bf16 (8 shapes, 2 tokens counts each)
norms=(--match /f16/,swiglu/bf16/,add_cast/f32-bf16/)
gemm_plain=plain/f16/m4096/,plain/bf16/m4096/,plain/f16/m8192/,plain/bf16/m8192/
# Llama-7B's whole gated MLP (mlp/f16/: 16, 512 and 8192 tokens, as planned and with the
# paired epilogue forced, against eager and torch.compile), and the implicit-GEMM convs (two on the sm_90a template, ResNet's 28x28 stage on
# mma.sync), a cast from f32 before q_proj (apart by the model; fused in the
# generated run below)
gemm=(--match "$gemm_plain,gpt2_c_fc/m8192/,gpt2_c_fc/b8/,swiglu/bf16/llama_down_proj/m8192/,conv/f16/resnet_layer1/,conv/f16/n8/c256/,conv/f16/resnet_layer2/,cast/bf16/llama_q_proj/m8192/,mlp/f16/")
make_block() {
  [ -f "$block" ] && return 0
  "$py" "$scripts/gen_blocks.py" --out "$blocks_dir" --batch 8 --seq 1024 --dtype f16 >"$out/gen_blocks.log" 2>&1
}

# ------------------------------------------------- --prepare: NVRTC only
if ((prepare)); then
  fail=0
  for g in "$data"/examples/*/graph.json; do
    e=$(basename "$(dirname "$g")")
    left_s=$(left)
    if ((left_s < 5)); then step "compile $e" SKIP "the budget is spent"; continue; fi
    run_timed "$out/prepare-$e.log" "$left_s" "$mcirc" --arch sm_90 --emit ptx "$g"
    if ((rc == 0)); then step "compile $e" PASS "$secs s"; else step "compile $e" FAIL "exit $rc ($out/prepare-$e.log)"; fail=1; fi
  done
  run_timed "$out/prepare-attention.log" "$(left)" "$bench_dir/bench_attention" --dry-run --arch sm_90 --compile 1000 "${attention[@]}"
  ((rc == 0)) && step "compile attention" PASS "$secs s" || { step "compile attention" FAIL "exit $rc"; fail=1; }
  run_timed "$out/prepare-norms.log" "$(left)" "$bench_dir/bench_norms" --dry-run --arch sm_90 --compile 1000 "${norms[@]}"
  ((rc == 0)) && step "compile norms" PASS "$secs s" || { step "compile norms" FAIL "exit $rc"; fail=1; }
  run_timed "$out/prepare-gemm.log" "$(left)" "$bench_dir/bench_gemm" --dry-run --arch sm_90 --compile 1000 "${gemm[@]}"
  ((rc == 0)) && step "compile gemm" PASS "$secs s" || { step "compile gemm" FAIL "exit $rc"; fail=1; }
  if make_block; then
    run_timed "$out/prepare-block.log" "$(left)" "$bench_dir/bench_blocks" --dry-run "$block"
    ((rc == 0)) && step "compile block" PASS "$secs s" || { step "compile block" FAIL "exit $rc"; fail=1; }
  else
    step "compile block" SKIP "bench/gen_blocks.py failed (numpy?): $(tail -1 "$out/gen_blocks.log")"
  fi
  n=$(find "$MCIR_CACHE_DIR" -name '*.kbin' | wc -l)
  echo "prepared: $n kernel cache entries, $(du -sh "$MCIR_CACHE_DIR" | cut -f1), in $(($(date +%s) - start)) s: $MCIR_CACHE_DIR"
  exit $fail
fi

# summary.txt (the steps, the figures), the --tar archive, the summary
# printed last: a caller that keeps only the end of the output sees it
finish() {
  {
    echo
    echo "== mcir-gpu-run on $(sed -n 's/^device: *//p' "$out/run-info.txt" | head -1), commit $commit"
    cat "$out/steps.txt"
    if ls "$out"/*_gpu.csv >/dev/null 2>&1; then
      "$py" "$scripts/gpu_run_summary.py" "$out" 2>&1 || echo "(no figures: bench/gpu_run_summary.py failed)"
    fi
    echo "$(grep -c '^PASS' "$out/steps.txt") passed, $(grep -c '^FAIL' "$out/steps.txt") failed," \
         "$(grep -c '^SKIP' "$out/steps.txt") skipped in $(($(date +%s) - start)) s of $budget; everything in $out"
  } >"$out/summary.txt"
  if [ -n "$tarball" ]; then
    (cd "$(dirname "$out")" && find "$(basename "$out")" -type f \( -name '*.log' -o -name '*.txt' -o -name '*.csv' \) \
       -not -path '*/kernel-cache/*' | tar czf "$tarball" -T -) ||
      echo "gpu-run: could not write $tarball" >>"$out/summary.txt"
  fi
  cat "$out/summary.txt"
}

# ------------------------------------------------------------ is there a GPU
if [ -z "$gpus" ]; then
  step "gpu" SKIP "no GPU here (nvidia-smi $(command -v nvidia-smi >/dev/null && echo 'lists no device' || echo 'not found')): nothing run"
  finish
  exit 77
fi

# ------------------------------------------------------------ 1. gpu-check
check_budget=$((budget / 2))
run_timed "$out/gpu-check.log" $((check_budget + 60)) "$gpu_check" --log "$out/gpu-check" --budget "$check_budget" "$root"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$out/gpu-check.log" | tail -1)
case $rc in
  0) step "gpu-check" PASS "${line:-exit 0} ($secs s)" ;;
  77) step "gpu-check" SKIP "no GPU usable: $(tail -1 "$out/gpu-check.log")" ;;
  124) step "gpu-check" FAIL "timed out after $((check_budget + 60)) s (log: $out/gpu-check.log)" ;;
  *) step "gpu-check" FAIL "${line:-exit $rc} ($secs s; $out/gpu-check/summary.txt)" ;;
esac

# ------------------------------------------------------ 2. benchmark subset
# each program gets its share of what is left (shares of 100)
bench() {   # NAME SHARE CSV CMD...
  local name=$1 share=$2 csv=$3 l t
  shift 3
  l=$(left)
  if ((l < 10)); then step "$name" SKIP "not started, the time budget ($budget s) was spent"; return; fi
  t=$((l * share / 100)); ((t < 10)) && t=10
  run_timed "$out/$name.log" "$t" "$@"
  local rows=0
  [ -f "$out/$csv" ] && rows=$(($(wc -l <"$out/$csv") - 1))
  if ((rc == 0)); then step "$name" PASS "$rows rows in $csv ($secs s)"
  elif ((rc == 77)); then step "$name" SKIP "$(grep -m1 -i 'skipped\|no gpu' "$out/$name.log" || tail -1 "$out/$name.log")"
  elif ((rc == 124)); then step "$name" FAIL "timed out after $t s, its share (log: $out/$name.log)"
  else step "$name" FAIL "exit $rc, $rows rows (log: $out/$name.log)"
  fi
}
torch_bench() {   # as bench, where torch is importable
  if ((have_torch)); then bench "$@"; else step "$1" SKIP "python3 does not import torch: no PyTorch figures"; fi
}
bench attention_mcir 30 attention_gpu.csv "$bench_dir/bench_attention" "${attention[@]}" --reps 20 --warmup 3 \
  --csv "$out/attention_gpu.csv"
torch_bench attention_torch 30 attention_torch.csv "$py" "$scripts/torch_attention.py" "${attention[@]}" --reps 20 \
  --warmup 3 --csv "$out/attention_torch.csv"
bench norms_mcir 30 norms_gpu.csv "$bench_dir/bench_norms" "${norms[@]}" --reps 20 --warmup 3 --csv "$out/norms_gpu.csv"
torch_bench norms_torch 30 norms_torch.csv "$py" "$scripts/torch_norms.py" "${norms[@]}" --reps 20 --warmup 3 \
  --csv "$out/norms_torch.csv"
bench gemm_mcir 30 gemm_gpu.csv "$bench_dir/bench_gemm" "${gemm[@]}" --reps 20 --warmup 3 --csv "$out/gemm_gpu.csv"
torch_bench gemm_torch 30 gemm_torch.csv "$py" "$scripts/torch_gemm.py" "${gemm[@]}" --reps 20 --warmup 3 \
  --csv "$out/gemm_torch.csv"
# the same GEMMs on mcir's own kernels (the sm_90a template on Hopper):
# what the generated lowering reaches beside the library's, every prologue
# fused (MCIR_SM90_PROLOGUE=always: the rate of a SwiGLU and an f32 cast
# prologue that the model's choice rests on)
MCIR_NO_CUBLAS=1 MCIR_SM90_PROLOGUE=always bench gemm_generated 30 gemm_generated.csv "$bench_dir/bench_gemm" "${gemm[@]}" --reps 20 \
  --warmup 3 --csv "$out/gemm_generated.csv"
if make_block; then
  bench block_mcir 50 blocks_gpu.csv "$bench_dir/bench_blocks" --csv "$out/blocks_gpu.csv" "$block"
  torch_bench block_torch 60 blocks_torch.csv "$py" "$scripts/torch_blocks.py" --csv "$out/blocks_torch.csv" "$block"
else
  step block SKIP "bench/gen_blocks.py failed (numpy?): $(tail -1 "$out/gen_blocks.log")"
fi

# ------------------------------------------- 3. profiles of three kernels
# Nsight Compute (ncu, left to the card's clocks) on the first launch of
# mcir's own kernel in three programs: the f16 layernorm at width 1024,
# the sm_90a GEMM at 8192^3 bf16 (MCIR_NO_CUBLAS=1) and the sm_90a
# attention at seq 4096 causal; speed of light, occupancy, memory, warp
# stalls, into ncu-NAME.txt. Where ncu is missing or cannot read the
# counters, a SKIP or FAIL line says so.
ncu_bin=$(command -v ncu || { [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/ncu" ] && echo "${CUDA_HOME:-/usr/local/cuda}/bin/ncu"; })
ncu_sections=(--section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis
              --section WarpStateStats --section SchedulerStats)
profile() {   # NAME ENV... -- PROGRAM ARGS...
  local name=$1 l
  shift
  local -a envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  l=$(left)
  if [ -z "$ncu_bin" ]; then step "profile_$name" SKIP "ncu not found: no profile"; return; fi
  if ((l < 20)); then step "profile_$name" SKIP "not started, the time budget ($budget s) was spent"; return; fi
  run_timed "$out/ncu-$name.txt" $((l < 60 ? l : 60)) env "${envs[@]}" "$ncu_bin" --clock-control none \
    "${ncu_sections[@]}" -k regex:'^mc_' --launch-count 1 "$@"
  if ((rc == 0)) && grep -q 'Section: GPU Speed Of Light' "$out/ncu-$name.txt"; then
    step "profile_$name" PASS "ncu-$name.txt ($secs s)"
  else
    step "profile_$name" FAIL "exit $rc, no profile (log: $out/ncu-$name.txt)"
  fi
}
profile norm -- "$bench_dir/bench_norms" --match layernorm/f16/r32768/w1024 --reps 20 --warmup 0
profile gemm MCIR_NO_CUBLAS=1 -- "$bench_dir/bench_gemm" --match plain/bf16/m8192/ --reps 20 --warmup 0
profile attention -- "$bench_dir/bench_attention" --suite fa3 --match fa3/f16/d128/b4/h16/q4096/k4096/causal \
  --reps 20 --warmup 0

finish
grep -q '^FAIL' "$out/steps.txt" && exit 1
exit 0
