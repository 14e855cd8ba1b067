# The sm_90a GEMM: the planner's choice, NVRTC sm_90a compiles with the
# audit (wgmma, cp.async.bulk.tensor, no spills, no advisories, no
# per-thread loads of A or B), and the kernels on the CPU emulator (wgmma,
# TMA, mbarriers) against the interpreter on 108 shapes (prologues included),
# 2x1 clusters with B multicast (tcase "cluster"), ping-pong consumer groups
# (tcase "pingpong").
if(TARGET mcir_pipeline)
  mcir_check_test(test_gemm_sm90 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_gemm_sm90.c
                  LIBS mcir_codegen_testutil mcir_kernelplan mcir_pipeline ${CMAKE_DL_LIBS})
  set_tests_properties(test_gemm_sm90 PROPERTIES TIMEOUT 1500)
  if(NOT MCIR_SANITIZE)
    # the emulated sweep's half the sanitizer build leaves out (it runs the
    # other): each shape emulated once between the two builds (CI time,
    # docs/testing.md); the binary run by hand emulates every shape
    set_property(TEST test_gemm_sm90 APPEND PROPERTY ENVIRONMENT "MCIR_EMU_SPLIT=normal")
  endif()
endif()
