# Kernel partition, tiling, memory plan and its checker (tests/test_kernelplan.c).
# With the rewrite engine built, the examples are also planned after the
# default catalog's rewrites, as the pipeline does.
if(TARGET mcir_kernelplan)
  if(TARGET mcir_rewrites)
    mcir_check_test(test_kernelplan SOURCES test_kernelplan.c LIBS mcir_kernelplan mcir_rewrites)
    target_compile_definitions(test_kernelplan PRIVATE MCIR_KP_REWRITES=1)
  else()
    mcir_check_test(test_kernelplan SOURCES test_kernelplan.c LIBS mcir_kernelplan)
  endif()
endif()
