# The sm_80-class GEMM mainloop (cp.async ring, ldmatrix): the emulator's
# cp.async / ldmatrix model, the planner's stages, NVRTC sm_80 compiles
# with the audit (cp.async, ldmatrix, no spills) and the kernels on the CPU
# emulator against the interpreter, and the mutants it must catch.
if(TARGET mcir_kernelplan)
  mcir_check_test(test_gemm_sm80 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_gemm_sm80.c
                  LIBS mcir_codegen_testutil mcir_kernelplan ${CMAKE_DL_LIBS})
  set_tests_properties(test_gemm_sm80 PROPERTIES TIMEOUT 900)
endif()
