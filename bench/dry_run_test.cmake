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
string(REGEX MATCHALL "\n(fa3|decode|gqa|mask|cross),mcir,[^\n]*not run \\(no GPU\\)" rows "${out}")
list(LENGTH rows n)
string(REGEX MATCHALL "\nfa3,mcir,[^\n]*" fa3 "${out}")
list(LENGTH fa3 n_fa3)
if(n LESS 120 OR NOT n_fa3 EQUAL 72)
  message(FATAL_ERROR "expected 72 FA3 rows and >= 120 rows in all, got ${n_fa3} and ${n}:\n${out}")
endif()
# on sm_90 every f16/bf16 shape of the sweep takes the sm_90a template:
# GQA and MQA, masks and decode included (decode with its split-KV)
string(REGEX MATCHALL "\n(gqa|mask|decode),mcir,[^\n]*" special "${out}")
string(REGEX MATCHALL "\n(gqa|mask|decode),mcir,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,sm90a[^\n]*"
       special_sm90 "${out}")
list(LENGTH special n_special)
list(LENGTH special_sm90 n_special_sm90)
if(n_special LESS 30 OR NOT n_special EQUAL n_special_sm90)
  message(FATAL_ERROR "${n_special_sm90} of ${n_special} GQA / mask / decode shapes take the sm_90a path:\n${out}")
endif()
string(REGEX MATCHALL ",[0-9]+\\.[0-9]+,(cold|cached),,,,," compiled "${out}")
list(LENGTH compiled n_compiled)
if(NOT n_compiled EQUAL 2)
  message(FATAL_ERROR "expected NVRTC times for 2 shapes, got ${n_compiled}:\n${out}")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/no_gpu_check.cmake)
bench_check_timed_run(bench_attention ${BENCH} --suite cross --match q77/)
message(STATUS "dry run: ${n} shapes planned, ${n_compiled} compiled; timed run exit ${timed_rc}")
