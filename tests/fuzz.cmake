# Fuzzing (tests/fuzz/, docs/fuzzing.md). Each harness is built two ways:
#  - fuzz_replay_<name>: the harness with driver.c, in every build; the CTest
#    test fuzz_regress_<name> replays its seed corpus and regression inputs
#    (under ASan/UBSan in the sanitizer build). No clang needed.
#  - fuzz_<name>: the libFuzzer binary, only with -DMCIR_FUZZ=ON (clang;
#    scripts/fuzz.sh).
set(_fz ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
set(MCIR_FUZZ_HARNESSES graph_json npy)
set(_fz_libs_graph_json mcir_core)
set(_fz_libs_npy mcir_core)
if(TARGET mcir_catalog)
  list(APPEND MCIR_FUZZ_HARNESSES catalog)
  set(_fz_libs_catalog mcir_catalog)
endif()
if(TARGET mcir_onnx)
  list(APPEND MCIR_FUZZ_HARNESSES onnx)
  set(_fz_libs_onnx mcir_onnx)
endif()
if(TARGET mcir_memplan)
  list(APPEND MCIR_FUZZ_HARNESSES memplan_csv)
  set(_fz_libs_memplan_csv mcir_memplan)
endif()
if(TARGET mcir_pipeline)
  list(APPEND MCIR_FUZZ_HARNESSES pipeline)
  set(_fz_libs_pipeline mcir_pipeline)
endif()

foreach(h ${MCIR_FUZZ_HARNESSES})
  add_executable(fuzz_replay_${h} ${_fz}/fuzz_${h}.c ${_fz}/driver.c)
  target_link_libraries(fuzz_replay_${h} PRIVATE ${_fz_libs_${h}})
  # the seed corpus and the inputs that once failed (every harness has both)
  add_test(NAME fuzz_regress_${h} COMMAND fuzz_replay_${h} ${_fz}/corpus/${h} ${_fz}/regress/${h})
  set_tests_properties(fuzz_regress_${h} PROPERTIES
    ENVIRONMENT "MCIR_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  if(MCIR_FUZZ)
    add_executable(fuzz_${h} ${_fz}/fuzz_${h}.c)
    target_link_libraries(fuzz_${h} PRIVATE ${_fz_libs_${h}})
    target_link_options(fuzz_${h} PRIVATE -fsanitize=fuzzer)
  endif()
endforeach()
if(MCIR_FUZZ)
  add_custom_target(fuzzers)
  foreach(h ${MCIR_FUZZ_HARNESSES})
    add_dependencies(fuzzers fuzz_${h})
  endforeach()
endif()
