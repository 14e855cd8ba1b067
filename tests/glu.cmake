# The paired epilogue (#44): a gated MLP's gate and up projections as one
# GEMM over interleaved weights, act(gate) * up from the accumulator pairs;
# plans, NVRTC compiles with the audit, and the kernels on the CPU emulator
# against the interpreter on sm_90 (the sm_90a template) and sm_80 (the
# mma.sync ring), mutants.
if(TARGET mcir_pipeline)
  mcir_check_test(test_glu SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_glu.c
                  LIBS mcir_codegen_testutil mcir_kernelplan mcir_pipeline ${CMAKE_DL_LIBS})
  set_tests_properties(test_glu PROPERTIES TIMEOUT 1200)
endif()
