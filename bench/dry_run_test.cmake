# Runs bench_attention --dry-run (every shape through the pipeline, NVRTC
# for two of them) and checks what a GPU-less machine must see: exit 0, the
# CSV header, one "not run (no GPU)" row per shape of the sweep, compile
# times for exactly the two compiled shapes; then that a timed run without
# a GPU skips with 77 and says why (or, on a GPU machine, is not asked for).
execute_process(COMMAND ${BENCH} --dry-run --compile 2
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench_attention --dry-run exited ${rc}:\n${err}\n${out}")
endif()
string(REGEX MATCH "^suite,impl,dtype,batch,heads,seq_q,seq_k,head_dim,causal,[^\n]*tflops" hdr "${out}")
if(NOT hdr)
  message(FATAL_ERROR "no CSV header in:\n${out}")
endif()
string(REGEX MATCHALL "\n(fa3|decode|cross),mcir,[^\n]*not run \\(no GPU\\)" rows "${out}")
list(LENGTH rows n)
string(REGEX MATCHALL "\nfa3,mcir,[^\n]*" fa3 "${out}")
list(LENGTH fa3 n_fa3)
if(n LESS 90 OR NOT n_fa3 EQUAL 72)
  message(FATAL_ERROR "expected 72 FA3 rows and >= 90 rows in all, got ${n_fa3} and ${n}:\n${out}")
endif()
string(REGEX MATCHALL ",[0-9]+\\.[0-9]+,(cold|cached),,,," compiled "${out}")
list(LENGTH compiled n_compiled)
if(NOT n_compiled EQUAL 2)
  message(FATAL_ERROR "expected NVRTC times for 2 shapes, got ${n_compiled}:\n${out}")
endif()
execute_process(COMMAND ${BENCH} --suite cross --match q77/
                RESULT_VARIABLE rc2 OUTPUT_VARIABLE out2 ERROR_VARIABLE err2)
if(rc2 EQUAL 77)
  if(NOT out2 MATCHES "skipped, no GPU: ")
    message(FATAL_ERROR "exit 77 without saying why: ${out2}")
  endif()
elseif(NOT rc2 EQUAL 0)
  message(FATAL_ERROR "bench_attention on this machine exited ${rc2}:\n${err2}\n${out2}")
endif()
message(STATUS "dry run: ${n} shapes planned, ${n_compiled} compiled; timed run exit ${rc2}")
