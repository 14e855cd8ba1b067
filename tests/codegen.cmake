# codegen/: template compile sweep (NVRTC, no GPU needed) and GPU-vs-CPU
# runs (skip with 77 where no GPU/driver is present).
add_library(mcir_codegen_testutil STATIC ${CMAKE_CURRENT_SOURCE_DIR}/codegen_util.c)
target_link_libraries(mcir_codegen_testutil PUBLIC mcir_runtime mcir_codegen ${CMAKE_DL_LIBS})
mcir_check_test(test_codegen SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_codegen.c
                LIBS mcir_codegen_testutil)
set_tests_properties(test_codegen PROPERTIES TIMEOUT 900)
# The generated kernels executed on the CPU (emu/cuda_emu.h).
mcir_check_test(test_codegen_emu SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_codegen_emu.c
                LIBS mcir_codegen_testutil ${CMAKE_DL_LIBS})
set_tests_properties(test_codegen_emu PROPERTIES TIMEOUT 1500)
if(MCIR_SANITIZE)   # the examples' library-call variant runs in the normal build only
  target_compile_definitions(test_codegen_emu PRIVATE MCIR_EMU_SANITIZED=1)
else()
  # the "detectors" and "emu" cases run in the sanitizer build, unchanged
  # there: the normal build's entry leaves them out; of the norm and
  # pointwise vector sweeps it runs the share the sanitizer build leaves
  # out (MCIR_EMU_SPLIT). Each case runs in one build or both (CI time,
  # docs/testing.md); the binary run by hand runs every case.
  set_property(TEST test_codegen_emu APPEND PROPERTY ENVIRONMENT "CK_EXCLUDE_TAGS=asan_pass"
               "MCIR_EMU_SPLIT=normal")
endif()
if(TARGET mcir_pipeline)   # the examples through rewrites + planner (as mcirc does)
  foreach(t test_codegen test_codegen_emu)
    target_link_libraries(${t} PRIVATE mcir_pipeline)
    target_compile_definitions(${t} PRIVATE MCIR_HAVE_PIPELINE=1)
  endforeach()
endif()
mcir_check_test(test_gpu SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu.c
                LIBS mcir_codegen_testutil)
set_tests_properties(test_gpu PROPERTIES TIMEOUT 900)
# With the kernel planner built, the examples are planned by it (else one
# kernel per node, cgt_plan_naive).
if(TARGET mcir_kernelplan)
  foreach(t test_codegen test_gpu)
    target_link_libraries(${t} PRIVATE mcir_kernelplan)
    target_compile_definitions(${t} PRIVATE MCIR_HAVE_KERNELPLAN=1)
  endforeach()
endif()
if(MCIR_SANITIZE)
  # NVRTC's own allocations are reported by LeakSanitizer; suppressed by
  # library name only (tests/lsan-codegen.supp).
  set_property(TEST test_codegen test_gpu APPEND PROPERTY ENVIRONMENT
    "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/lsan-codegen.supp:print_suppressions=0")
endif()
# The emulated device under the real runtime, with its mutants (emu/emu.h).
if(TARGET mcir_pipeline)
  mcir_check_test(test_emu_device SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_emu_device.c
                  LIBS mcir_pipeline mcir_codegen_testutil)
  set_tests_properties(test_emu_device PROPERTIES TIMEOUT 900)
  # Sessions and CUDA graphs (capture once, replay) on the emulated device.
  mcir_check_test(test_graphs SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_graphs.c
                  LIBS mcir_pipeline mcir_codegen_testutil)
  set_tests_properties(test_graphs PROPERTIES TIMEOUT 600)
endif()
# Every example and golden graph through mcirc --run --device emu --verify
# (tests/emu_examples.sh: the three allocation modes; a subset in pool mode
# in the sanitizer build).
if(TARGET mcirc)
  if(MCIR_SANITIZE)
    set(MCIR_EMU_EXAMPLES sanitizer)
  else()
    set(MCIR_EMU_EXAMPLES full)
  endif()
  add_test(NAME emu_examples COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/emu_examples.sh $<TARGET_FILE:mcirc>
           ${PROJECT_SOURCE_DIR} ${MCIR_EMU_EXAMPLES})
  set_tests_properties(emu_examples PROPERTIES TIMEOUT 1500 SKIP_RETURN_CODE 77)
  # Chains with a cast from f32 fused whole into their sm_90a GEMMs, run on
  # the emulated device and verified (tests/gemm_cast_chain.sh).
  add_test(NAME gemm_cast_chain_emu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gemm_cast_chain.sh $<TARGET_FILE:mcirc>
           ${PROJECT_SOURCE_DIR})
  set_tests_properties(gemm_cast_chain_emu PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
# scripts/gpu-check.sh's own logic on the emulated device (the script the
# first GPU will run), and its failure path.
if(TARGET mcirc AND NOT MCIR_SANITIZE)
  add_test(NAME gpu_check_emu COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu_check_emu_test.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(gpu_check_emu PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77)
endif()
