# Runs bench_gemm --dry-run and checks what a GPU-less machine must see:
# every shape of the seven suites planned (exit 0, the CSV header, one
# "not run (no GPU)" row per shape, each with its path named and a finite,
# positive modelled time; a conv's path names a conv2d kernel, and which
# one each conv takes is printed), NVRTC for one shape of each kind of path;
# torch_gemm.py names the same shapes (where PYTHON is given); a timed run
# without a GPU skips with 77 and says why (on a GPU machine it runs and
# must pass); bad command lines exit 2 with a message.
#   cmake -DBENCH=bench_gemm [-DPYTHON=python3 -DSCRIPT=bench/torch_gemm.py] -P gemm_dry_run_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/no_gpu_check.cmake)
cmake_policy(SET CMP0007 NEW)   # a CSV row's empty cells stay list elements
execute_process(COMMAND ${BENCH} --dry-run --compile 0
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench_gemm --dry-run exited ${rc}:\n${err}\n${out}")
endif()
if(NOT out MATCHES "^suite,impl,name,dtype,M,N,K,batch,layout,epilogue,path,launches,[^\n]*,median_us,min_us,tflops,modelled_us,device,status\n")
  message(FATAL_ERROR "no CSV header in:\n${out}")
endif()
string(REGEX MATCHALL "\n[a-z]+,mcir,[^\n]*" rows "${out}")
set(names "")
set(counts "")
foreach(row ${rows})
  string(SUBSTRING "${row}" 1 -1 row)
  string(REPLACE "," ";" f "${row}")
  list(LENGTH f nf)
  if(NOT nf EQUAL 21)
    message(FATAL_ERROR "${nf} cells, not 21: ${row}")
  endif()
  list(GET f 0 suite)
  list(GET f 2 name)
  list(GET f 10 path)
  list(GET f 18 modelled)
  list(GET f 20 status)
  if(path STREQUAL "" OR NOT status STREQUAL "not run (no GPU)")
    message(FATAL_ERROR "no path, or not 'not run (no GPU)': ${row}")
  endif()
  if(NOT modelled MATCHES "^[0-9]+\\.[0-9]+$" OR modelled MATCHES "^0\\.0*$")
    message(FATAL_ERROR "modelled time not finite and positive: ${row}")
  endif()
  if(suite STREQUAL "conv")
    if(NOT path MATCHES "conv2d\\.")
      message(FATAL_ERROR "a conv's path names no conv2d kernel: ${row}")
    endif()
    message(STATUS "${name}: ${path}, modelled ${modelled} us")
  endif()
  list(APPEND names "${name}")
  list(APPEND counts "${suite}")
endforeach()
foreach(want "plain;14" "epilogue;11" "swiglu;4" "batch;6" "conv;14" "cast;16" "mlp;12")
  list(GET want 0 suite)
  list(GET want 1 n)
  set(have ${counts})
  list(FILTER have INCLUDE REGEX "^${suite}$")
  list(LENGTH have got)
  if(NOT got EQUAL n)
    message(FATAL_ERROR "${got} ${suite} rows, expected ${n}:\n${out}")
  endif()
endforeach()
list(LENGTH rows n_rows)

# NVRTC for one shape of each path: cuBLAS, cuBLASLt, the generated
# template with an epilogue and with the SwiGLU prologue, two kernels, a
# conv with bias, residual and ReLU on the sm_90a implicit GEMM (where the
# plan takes it), a cast chain from f32 fused into the sm_90a GEMM's prologue
set(match plain/f16/m1024/,gpt2_c_fc/m8192,gpt2_c_fc/b8,swiglu/bf16/llama_down_proj/m2048,lm_head)
string(APPEND match ,conv/bf16/resnet_layer1/n32/c64/h56/w56/o64/k3x3/s1/p1/bias_residual_relu)
string(APPEND match ,cast/bf16/llama_down_proj/m16/n4096/k11008/NT/silu_mul)
execute_process(COMMAND ${BENCH} --dry-run --match ${match}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL ",[0-9]+\\.[0-9]+,(cold|cached),,,,[0-9]" compiled "${out}")
list(LENGTH compiled n_compiled)
if(NOT rc EQUAL 0 OR NOT n_compiled EQUAL 7)
  message(FATAL_ERROR "expected NVRTC times for 7 shapes (exit 0), got ${n_compiled} (exit ${rc}):\n${err}\n${out}")
endif()

# the PyTorch side sweeps the same shapes under the same names
if(PYTHON)
  execute_process(COMMAND ${PYTHON} ${SCRIPT} --list RESULT_VARIABLE rc OUTPUT_VARIABLE tnames ERROR_VARIABLE err)
  string(STRIP "${tnames}" tnames)
  string(REPLACE "\n" ";" tnames "${tnames}")
  if(NOT rc EQUAL 0 OR NOT tnames STREQUAL names)
    message(FATAL_ERROR "torch_gemm.py --list (exit ${rc}) differs from bench_gemm's shapes:\n${tnames}\nvs\n${names}\n${err}")
  endif()
endif()

bench_check_timed_run(bench_gemm ${BENCH} --match plain/f16/m1024/)

foreach(bad "--reps;x" "--reps;5" "--compile;-1" "--suite;gemv" "--match;no-such-shape" "--arch;sm_10" "--bogus")
  execute_process(COMMAND ${BENCH} ${bad} RESULT_VARIABLE rc3 OUTPUT_VARIABLE out3 ERROR_VARIABLE err3)
  if(NOT rc3 EQUAL 2 OR NOT err3 MATCHES "bench_gemm: ")
    message(FATAL_ERROR "bench_gemm ${bad}: exit ${rc3}, wanted 2 with a message:\n${err3}${out3}")
  endif()
endforeach()
message(STATUS "dry run: ${n_rows} shapes planned, ${n_compiled} compiled; timed run exit ${timed_rc}")
