# The SASS audit (codegen/sass.c, tests/test_sass.c): the parser on the
# committed nvdisasm texts of tests/data/sass/ (no toolkit needed), and,
# where nvdisasm and NVRTC are there, real kernels and the pipeline's
# (test_sass_nvdisasm; skipped with 77 otherwise).
if(TARGET mcir_pipeline)
  mcir_check_test(test_sass SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_sass.c
                  LIBS mcir_codegen_testutil mcir_pipeline)
  add_test(NAME test_sass_nvdisasm COMMAND test_sass nvdisasm)
  set_tests_properties(test_sass_nvdisasm PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "MCIR_SOURCE_DIR=${PROJECT_SOURCE_DIR};CK_DEFAULT_TIMEOUT=600"
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  if(MCIR_SANITIZE)
    set_property(TEST test_sass_nvdisasm APPEND PROPERTY ENVIRONMENT
      "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/lsan-codegen.supp:print_suppressions=0")
  endif()
endif()
