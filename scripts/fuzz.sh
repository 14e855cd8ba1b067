#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz/ (clang, ASan + UBSan) and
# runs each for SECONDS (default 60) on one core:
#
#   scripts/fuzz.sh [SECONDS] [HARNESS...]      # HARNESS: graph_json catalog onnx
#                                               #   npy memplan_csv pipeline
#
# Build dir: $FUZZ_BUILD (default build-libfuzzer). Each harness starts from
# its committed seed corpus and regression inputs, and grows a working
# corpus in $FUZZ_BUILD/corpus/NAME (kept between runs, never committed).
# A finding is written to $FUZZ_BUILD/findings/NAME/ and makes the script
# exit 1; minimise it (fuzz_NAME -minimize_crash=1 FILE), fix the bug, and
# commit the input under tests/fuzz/regress/NAME/ (docs/fuzzing.md).
# Without clang the script says so and exits 77 (skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
harnesses=("$@")
((${#harnesses[@]})) || harnesses=(graph_json catalog onnx npy memplan_csv pipeline)
build=${FUZZ_BUILD:-build-libfuzzer}
cc=${FUZZ_CC:-clang}
if ! command -v "$cc" >/dev/null ||
   ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
     "$cc" -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
  echo "fuzz.sh: skipped: $cc with libFuzzer is not installed (Debian: clang libclang-rt-14-dev; scripts/deps.sh)" >&2
  exit 77
fi
# only the harnesses and the libraries they link are built
cuda=()
[ -d /usr/local/cuda ] && cuda=(-DCUDAToolkit_ROOT=/usr/local/cuda)
targets=()
for h in "${harnesses[@]}"; do targets+=("fuzz_$h"); done
mkdir -p "$build"
echo "building ${targets[*]} in $build ..." >&2
{ CC=$cc cmake -S . -B "$build" "${cuda[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMCIR_FUZZ=ON -DMCIR_SANITIZE=OFF &&
  cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"; } >"$build/build.log" 2>&1 ||
  { tail -40 "$build/build.log" >&2; echo "build failed (log: $build/build.log)" >&2; exit 1; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export MCIR_CACHE_DIR=${MCIR_CACHE_DIR:-$PWD/$build/kernel-cache}
# the .npy and pipeline harnesses write each input to a file: keep it in memory
[ -d /dev/shm ] && export TMPDIR=${TMPDIR:-/dev/shm}
# FUZZ_KEEP_GOING=1: record a finding and go on (one child process, so still
# one core), for long unattended runs
keep=()
[ "${FUZZ_KEEP_GOING:-0}" = 1 ] && keep=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
status=0
for h in "${harnesses[@]}"; do
  work=$build/corpus/$h findings=$build/findings/$h
  mkdir -p "$work" "$findings"
  since=$build/findings/.start-$h   # findings of earlier runs do not count again
  touch "$since"
  log=$build/fuzz_$h.log
  echo "== fuzz_$h: ${seconds}s" >&2
  # -timeout: one input may take 10 s (an exponential path is a finding);
  # -rss_limit_mb: 2 GiB (a small input that asks for more is a finding)
  seeds=(tests/fuzz/corpus/"$h")
  [ -d tests/fuzz/regress/"$h" ] && seeds+=(tests/fuzz/regress/"$h")
  if ! "$build/tests/fuzz_$h" "$work" "${seeds[@]}" \
       -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix="$findings/" "${keep[@]}" >"$log" 2>&1; then
    echo "fuzz_$h: FINDING (log: $log, input: $findings/)" >&2
    grep -E "ERROR|runtime error|invariant|SUMMARY" "$log" | head -5 >&2 || true
    status=1
  fi
  # crash-, leak-, timeout-, oom-: findings; slow-unit- (an input that took over
  # 10 s, -report_slow_units) is listed but does not fail the run
  n_found=$(find "$findings" -type f -newer "$since" ! -name 'slow-unit-*' | wc -l)
  n_slow=$(find "$findings" -type f -newer "$since" -name 'slow-unit-*' | wc -l)
  if ((n_found)); then
    echo "fuzz_$h: $n_found finding(s) in $findings/" >&2
    status=1
  fi
  ((n_slow == 0)) || echo "fuzz_$h: $n_slow slow input(s) in $findings/ (not failures)" >&2
  # the last status line: "#EXECS ... cov: N ft: N" (with -fork: "#EXECS: cov: ...")
  echo "fuzz_$h: $(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE '^#[0-9]+|cov: [0-9]+ ft: [0-9]+' |
    tr '\n' ' ' | sed 's/^#/execs /')" >&2
done
exit $status
