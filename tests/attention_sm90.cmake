# The sm_90a attention path: the planner's choice, NVRTC sm_90a compiles
# with the audit (wgmma, cp.async.bulk, no spills), and the kernels run on
# the CPU emulator (wgmma, TMA, mbarriers) against the interpreter.
if(TARGET mcir_kernelplan)
  mcir_check_test(test_attention_sm90 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_attention_sm90.c
                  LIBS mcir_codegen_testutil mcir_kernelplan ${CMAKE_DL_LIBS})
  set_tests_properties(test_attention_sm90 PROPERTIES TIMEOUT 900)
endif()
