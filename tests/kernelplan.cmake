# Kernel partition, tiling, memory plan and its checker (tests/test_kernelplan.c).
if(TARGET mcir_kernelplan)
  mcir_check_test(test_kernelplan SOURCES test_kernelplan.c LIBS mcir_kernelplan)
endif()
