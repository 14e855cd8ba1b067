#!/usr/bin/env bash
# Runs the benchmark suite (docs/performance.md) and writes its CSVs into
# bench/results/ (or --out DIR) and its charts into docs/performance/.
#
#   scripts/bench.sh            # what a CPU-only machine can measure
#   scripts/bench.sh --gpu      # the GPU suite (attention, norms, GEMMs, blocks vs PyTorch)
#   scripts/bench.sh --quick    # CPU part with fewer repetitions, no full NVRTC sweep
#
# Needs python3-torch, python3-matplotlib and libopenblas0-pthread (PyTorch's
# BLAS; Debian's default netlib BLAS would make PyTorch's CPU matmuls slow):
# installed with apt-get when missing. Builds into build-bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
gpu=0 quick=0 out=bench/results charts=docs/performance build=build-bench
while (($#)); do
  case $1 in
    --gpu) gpu=1 ;;
    --quick) quick=1 ;;
    --out) out=$2; shift ;;
    --charts) charts=$2; shift ;;
    --build) build=$2; shift ;;
    *) echo "usage: scripts/bench.sh [--gpu] [--quick] [--out DIR] [--charts DIR] [--build DIR]" >&2; exit 2 ;;
  esac
  shift
done
py=/usr/bin/python3
need=()
for p in python3-torch python3-matplotlib libopenblas0-pthread; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  echo "installing: ${need[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
scripts/deps.sh
scripts/build.sh "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
mkdir -p "$out" "$charts"
b=$build/bench
reps=5; [ $quick = 1 ] && reps=2
export MCIR_CACHE_DIR=$PWD/$build/kernel-cache-bench
say() { echo "== $*" >&2; }

# machine and date, for the record
{ echo "date,$(date -u +%Y-%m-%dT%H:%MZ)"; echo "cpu,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //;s/,//g')";
  echo "cores,$(nproc)"; echo "load_before,$(cut -d' ' -f1 /proc/loadavg)";
  echo "torch,$($py -c 'import torch; print(torch.__version__)')"; } > "$out/machine.csv"

say "blocks at batch 8, seq 1024/2048, f16 (bench/gen_blocks.py)"
$py bench/gen_blocks.py --out "$build/blocks" --batch 8 --seq 1024 2048 --dtype f16 >/dev/null
blocks=("$build"/blocks/*/graph.json)

if [ $gpu = 1 ]; then
  say "GPU: attention (mcir, then PyTorch SDPA)"
  $b/bench_attention --csv "$out/attention_gpu.csv"
  $py bench/torch_attention.py --csv "$out/attention_torch.csv"
  say "GPU: norms"
  $b/bench_norms --csv "$out/norms_gpu.csv"
  $py bench/torch_norms.py --csv "$out/norms_torch.csv"
  say "GPU: GEMMs (plain, with epilogues, SwiGLU, batched)"
  $b/bench_gemm --csv "$out/gemm_gpu.csv"
  $py bench/torch_gemm.py --csv "$out/gemm_torch.csv"
  say "GPU: blocks"
  $b/bench_blocks --csv "$out/blocks_gpu.csv" "${blocks[@]}"
  $py bench/torch_blocks.py --csv "$out/blocks_torch.csv" "${blocks[@]}"
else
  say "compile time: pipeline and NVRTC per kernel, cold and cached (bench_compile)"
  $b/bench_compile --reps 3 --pipeline-csv "$out/compile_pipeline.csv" --kernels-csv "$out/compile_kernels.csv"
  if [ $quick = 0 ]; then
    say "compile time: every attention shape of the GPU sweep, cold (bench_attention --dry-run)"
    rm -rf "$build/kernel-cache-attn"
    MCIR_CACHE_DIR=$PWD/$build/kernel-cache-attn $b/bench_attention --dry-run --csv "$out/attention_dry.csv"
    MCIR_CACHE_DIR=$PWD/$build/kernel-cache-attn $b/bench_norms --dry-run --csv "$out/norms_dry.csv"
    MCIR_CACHE_DIR=$PWD/$build/kernel-cache-attn $b/bench_gemm --dry-run --csv "$out/gemm_dry.csv"
  fi
  say "CPU path: mcir interpreter vs PyTorch CPU, 2 threads"
  $b/bench_cpu --threads 2 --reps $reps --csv "$out/cpu_mcir.csv"
  $py bench/torch_cpu.py --threads 2 --reps $reps --csv "$out/cpu_torch.csv"
  say "peak memory, simulated: pool / lazy / eager (bench_peak)"
  $b/bench_peak --csv "$out/peak_examples.csv"
  $b/bench_peak --csv "$out/peak_blocks.csv" "${blocks[@]}"
  say "memory planner on MiniMalloc's instances (bench_memplan)"
  $b/bench_memplan --csv "$out/memplan.csv" >/dev/null
  say "modelled GPU time (kernelplan cost model) vs unfused"
  $py bench/modelled.py --mcirc "$build/mcirc/mcirc" --graphs-csv "$out/modelled_graphs.csv" \
      --kernels-csv "$out/modelled_kernels.csv" examples/*/graph.json "${blocks[@]}"
  echo "load_after,$(cut -d' ' -f1 /proc/loadavg)" >> "$out/machine.csv"
fi
say "charts"
$py bench/plot.py --results "$out" --charts "$charts"
rm -rf bench/__pycache__ scripts/__pycache__
say "done: CSVs in $out, charts in $charts"
