# The GPU benchmark's dry run (bench/dry_run_test.cmake): every attention
# shape through the pipeline, two through NVRTC, CSV checked; ~1 s with the cache warm.
if(TARGET bench_attention)
  add_test(NAME bench_attention_dry_run
    COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:bench_attention>
            -P ${PROJECT_SOURCE_DIR}/bench/dry_run_test.cmake)
  set_tests_properties(bench_attention_dry_run PROPERTIES
    ENVIRONMENT "MCIR_CACHE_DIR=${CMAKE_BINARY_DIR}/kernel-cache-bench-test")
endif()
