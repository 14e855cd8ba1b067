# Runs bench_steps --dry-run: the sessions of every default example on the
# emulated device, with and without CUDA graphs, and checks what CI must
# see: exit 0, the CSV header, a "launches" and a "graph" row per graph,
# each ok; a replayed step is one driver launch call (cuGraphLaunch), a
# step without graphs more than one; then that a timed run without a GPU
# skips with 77 and says why (or, on a GPU machine, runs).
execute_process(COMMAND ${BENCH} --dry-run RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  if(rc EQUAL 77 AND out MATCHES "bench_steps: skipped, no emulated device: ")
    message(STATUS "skipped: ${out}")
    return()
  endif()
  message(FATAL_ERROR "bench_steps --dry-run exited ${rc}:\n${err}\n${out}")
endif()
if(NOT out MATCHES "^graph,kernels,mode,steps,host_us_median,gpu_ms_median,capture_us,launch_calls,device,status\n")
  message(FATAL_ERROR "no CSV header in:\n${out}")
endif()
string(REGEX MATCHALL "\n[^,\n]+,[0-9]+,graph,[^\n]*,1,[^,\n]*,ok" graph_rows "${out}")
string(REGEX MATCHALL "\n[^,\n]+,[0-9]+,launches,[^\n]*,([2-9]|[1-9][0-9]+),[^,\n]*,ok" plain_rows "${out}")
list(LENGTH graph_rows n_graph)
list(LENGTH plain_rows n_plain)
if(NOT n_graph EQUAL 3 OR NOT n_plain EQUAL 3)
  message(FATAL_ERROR "expected 3 graph rows of 1 launch call and 3 rows of several, got ${n_graph} and ${n_plain}:\n${out}")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/no_gpu_check.cmake)
bench_check_timed_run(bench_steps ${BENCH} --reps 20)
message(STATUS "dry run: ${n_graph} graphs replayed; timed run exit ${timed_rc}")
