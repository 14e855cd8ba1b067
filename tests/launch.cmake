# kernelplan/launch.c: plan == launch codegen performs for every example and
# golden graph, ptxas shared memory == the plan's, and every tile candidate
# of the examples' attention and norms on the CPU emulator.
if(TARGET mcir_pipeline)
  mcir_check_test(test_launch SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_launch.c
                  LIBS mcir_codegen_testutil mcir_pipeline ${CMAKE_DL_LIBS})
  set_tests_properties(test_launch PROPERTIES TIMEOUT 900)
  if(MCIR_SANITIZE)
    set_property(TEST test_launch APPEND PROPERTY ENVIRONMENT
      "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/lsan-codegen.supp:print_suppressions=0")
  endif()
endif()
