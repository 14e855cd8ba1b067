# The traffic and cost model (tests/test_cost.c); with the pipeline built,
# the examples are compiled as mcirc compiles them (unfused baseline included).
if(TARGET mcir_kernelplan)
  mcir_check_test(test_cost SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cost.c LIBS mcir_kernelplan)
  if(TARGET mcir_pipeline)
    target_link_libraries(test_cost PRIVATE mcir_pipeline)
    target_compile_definitions(test_cost PRIVATE MCIR_HAVE_PIPELINE=1)
  endif()
endif()
