# The emulator's model of the sm_80 primitives (cp.async with its commit
# and wait groups, ldmatrix) the GEMM mainloop uses.
if(TARGET mcir_kernelplan)
  mcir_check_test(test_gemm_sm80 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_gemm_sm80.c
                  LIBS mcir_codegen_testutil mcir_kernelplan ${CMAKE_DL_LIBS})
  set_tests_properties(test_gemm_sm80 PROPERTIES TIMEOUT 900)
endif()
