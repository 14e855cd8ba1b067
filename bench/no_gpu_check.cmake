# What the GPU benchmarks' CI dry runs share (dry_run_test.cmake,
# gemm_dry_run_test.cmake): a timed run on this machine must exit 77 saying
# why (no GPU), or 0 on a GPU machine.
#   bench_check_timed_run(bench_gemm ${BENCH} --match plain/f16/m1024/)  # sets timed_rc
function(bench_check_timed_run prog)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 77)
    if(NOT out MATCHES "${prog}: skipped, no GPU: ")
      message(FATAL_ERROR "exit 77 without saying why: ${out}")
    endif()
  elseif(NOT rc EQUAL 0)
    message(FATAL_ERROR "${prog} on this machine exited ${rc}:\n${err}\n${out}")
  endif()
  set(timed_rc ${rc} PARENT_SCOPE)
endfunction()
