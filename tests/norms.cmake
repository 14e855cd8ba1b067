# The row norms at copy speed (#42): the benchmark's 81 shapes compiled for
# sm_90 and checked statically (no IEEE division, exp once per element,
# 16-byte global accesses, registers, bytes in flight), two mutants caught,
# and every row layout of each norm on the emulator against the interpreter.
if(TARGET mcir_pipeline)
  mcir_check_test(test_norms SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_norms.c
                  LIBS mcir_codegen_testutil mcir_kernelplan mcir_pipeline ${CMAKE_DL_LIBS})
  set_tests_properties(test_norms PROPERTIES TIMEOUT 1500)
endif()
