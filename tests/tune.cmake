# GEMM tile candidates and the tuning cache with an injected timer (tests/test_tune.c).
if(TARGET mcir_kernelplan)
  mcir_check_test(test_tune SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tune.c LIBS mcir_kernelplan)
endif()
