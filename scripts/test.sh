#!/usr/bin/env bash
# The README's second command: install what is missing, then build and run
# the whole test suite twice: a normal build, and one under AddressSanitizer
# and UndefinedBehaviorSanitizer. GPU tests are skipped (exit 77) without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/test-deps.sh
jobs=$(nproc)
# One kernel cache for both builds: NVRTC output does not depend on them.
export MCIR_CACHE_DIR=${MCIR_CACHE_DIR:-$PWD/build/kernel-cache}
echo "== build (RelWithDebInfo)"
scripts/build.sh build -DCMAKE_BUILD_TYPE=RelWithDebInfo
(cd build && ctest --output-on-failure -j"$jobs")
echo "== gpu-check (exits 77 without a GPU)"
rc=0
scripts/gpu-check.sh build || rc=$?
if ((rc != 0 && rc != 77)); then
  echo "gpu-check failed (exit $rc)" >&2
  exit 1
fi
echo "== build-noonnx (-DMCIR_ONNX=OFF: mcirc and test_cli)"
cuda=()
[ -d /usr/local/cuda ] && cuda=(-DCUDAToolkit_ROOT=/usr/local/cuda)
mkdir -p build-noonnx
if ! { cmake -S . -B build-noonnx "${cuda[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCIR_ONNX=OFF &&
       cmake --build build-noonnx -j"$jobs" --target mcirc test_cli; } >build-noonnx/build.log 2>&1; then
  cat build-noonnx/build.log >&2
  echo "build-noonnx failed (log: build-noonnx/build.log)" >&2
  exit 1
fi
(cd build-noonnx && ctest -R '^test_cli$' --output-on-failure)
echo "== build-asan (ASan + UBSan)"
scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCIR_SANITIZE=ON
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-asan && ctest --output-on-failure -j"$jobs")
echo "== fuzz (libFuzzer + ASan/UBSan, ${MCIR_FUZZ_SECONDS:-20} s per harness; docs/fuzzing.md)"
rc=0
FUZZ_BUILD=build-fuzzer scripts/fuzz.sh "${MCIR_FUZZ_SECONDS:-20}" || rc=$?
if ((rc == 77)); then
  echo "fuzz: skipped: clang with libFuzzer is not installed" >&2
elif ((rc != 0)); then
  echo "fuzz: findings (see above)" >&2
  exit 1
fi
