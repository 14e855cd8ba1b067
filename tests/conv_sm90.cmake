# KxK convs on the sm_90a GEMM (rule conv_kxk_tap_major, the conv view of
# kernelplan/launch_gemm_sm90.c and templates/gemm_sm90.cuh): the plans
# and refusals, NVRTC sm_90a compiles with the audit, the kernels on the
# CPU emulator against the interpreter on 12 convs, and two mutants.
if(TARGET mcir_pipeline)
  mcir_check_test(test_conv_sm90 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_conv_sm90.c
                  LIBS mcir_codegen_testutil mcir_kernelplan mcir_pipeline ${CMAKE_DL_LIBS})
  set_tests_properties(test_conv_sm90 PROPERTIES TIMEOUT 1200)
endif()
