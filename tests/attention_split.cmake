# Split-KV decoding attention: the planner's split choice, NVRTC compiles of
# the split + merge kernels, and both executed on the CPU emulator.
if(TARGET mcir_kernelplan)
  mcir_check_test(test_attention_split SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_attention_split.c
                  LIBS mcir_codegen_testutil mcir_kernelplan ${CMAKE_DL_LIBS})
  set_tests_properties(test_attention_split PROPERTIES TIMEOUT 900)
endif()
