# The GPU benchmark's dry run (bench/dry_run_test.cmake): every attention
# shape through the pipeline, two through NVRTC, CSV checked; ~1 s with the cache warm.
if(TARGET bench_attention)
  add_test(NAME bench_attention_dry_run
    COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:bench_attention>
            -P ${PROJECT_SOURCE_DIR}/bench/dry_run_test.cmake)
  set_tests_properties(bench_attention_dry_run PROPERTIES
    ENVIRONMENT "MCIR_CACHE_DIR=${CMAKE_BINARY_DIR}/kernel-cache-bench-test")
endif()
# The GEMM benchmark's dry run (bench/gemm_dry_run_test.cmake): every GEMM
# and conv shape planned, seven through NVRTC, the CSV checked (each conv's
# path printed), torch_gemm.py's shapes compared with bench_gemm's, bad
# command lines refused; ~30 s on the 2-core VM, most of it the mlp suite's
# Llama weights (up to 2 x 14336 x 4096) concatenated or interleaved at
# compile time, as a real compile does.
if(TARGET bench_gemm)
  find_program(MCIR_BENCH_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
  set(_python "")
  if(MCIR_BENCH_PYTHON)
    set(_python -DPYTHON=${MCIR_BENCH_PYTHON} -DSCRIPT=${PROJECT_SOURCE_DIR}/bench/torch_gemm.py)
  endif()
  add_test(NAME bench_gemm_dry_run
    COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:bench_gemm> ${_python}
            -P ${PROJECT_SOURCE_DIR}/bench/gemm_dry_run_test.cmake)
  set_tests_properties(bench_gemm_dry_run PROPERTIES TIMEOUT 400
    ENVIRONMENT "MCIR_CACHE_DIR=${CMAKE_BINARY_DIR}/kernel-cache-bench-test")
endif()
# The norms benchmark's dry run (bench/norms_dry_run_test.cmake): the 81
# norms and the 12 elementwise chains planned (swiglu and bias_gelu one
# elementwise kernel each, every row's path named), two through NVRTC,
# --suite, torch_norms.py's shape names compared, bad command lines
# refused; ~1 s with the cache warm.
if(TARGET bench_norms)
  find_program(MCIR_BENCH_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
  set(_python "")
  if(MCIR_BENCH_PYTHON)
    set(_python -DPYTHON=${MCIR_BENCH_PYTHON} -DSCRIPT=${PROJECT_SOURCE_DIR}/bench/torch_norms.py)
  endif()
  add_test(NAME bench_norms_dry_run
    COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:bench_norms> ${_python}
            -P ${PROJECT_SOURCE_DIR}/bench/norms_dry_run_test.cmake)
  set_tests_properties(bench_norms_dry_run PROPERTIES TIMEOUT 120
    ENVIRONMENT "MCIR_CACHE_DIR=${CMAKE_BINARY_DIR}/kernel-cache-bench-test")
endif()
# The first GPU run's command (scripts/gpu-run.sh, mcir-gpu-run) up to where
# a GPU is needed: exit 77 with its record; every step reports with a fake
# nvidia-smi and no driver; the figures' summary from known CSVs. ~10 s.
add_test(NAME gpu_run_without_gpu
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu_run_test.sh ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/gpu-run)
set_tests_properties(gpu_run_without_gpu PROPERTIES TIMEOUT 300)
# bench_steps' dry run (bench/steps_dry_run_test.cmake): sessions with and
# without CUDA graphs on the emulated device; a replayed step is one
# cuGraphLaunch.
# (not in the sanitizer build: 224 s of its CI time there, and the runtime
# paths it steps — CUDA graphs captured and replayed on the emulated device
# — run under ASan in test_graphs)
if(TARGET bench_steps AND NOT MCIR_SANITIZE)
  add_test(NAME bench_steps_dry_run
    COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:bench_steps>
            -P ${PROJECT_SOURCE_DIR}/bench/steps_dry_run_test.cmake)
  set_tests_properties(bench_steps_dry_run PROPERTIES TIMEOUT 600
    ENVIRONMENT "MCIR_CACHE_DIR=${CMAKE_BINARY_DIR}/kernel-cache-bench-test")
endif()
# Tensor parallelism's modelled scaling (bench/bench_tp.c): its quick run
# (Llama-2-7B at 128 tokens, 1 and 2 ranks) compiles and prints its table,
# the 2-rank row with its two all_reduces.
if(TARGET bench_tp)
  add_test(NAME bench_tp_quick COMMAND bench_tp --quick)
  set_tests_properties(bench_tp_quick PROPERTIES
    PASS_REGULAR_EXPRESSION "llama2_7b +128 +2 +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +2 ")
endif()
