# Symbolic dimensions (mcir/dims.c, graph.json "dims", mcirc --dim): the
# extent algebra, format errors, range rules, and runs at several sizes
# through mcirc on the CPU path against the interpreter.
mcir_check_test(test_dims SOURCES test_dims.c cli_util.c LIBS mcir_core)
target_compile_definitions(test_dims PRIVATE MCIRC_BINARY="$<TARGET_FILE:mcirc>")
add_dependencies(test_dims mcirc)
if(MCIR_SANITIZE)   # the emulated runs at two sizes, not three (test_dims.c EMU_SIZES)
  target_compile_definitions(test_dims PRIVATE MCIR_SANITIZED_BUILD=1)
endif()
if(TARGET mcir_onnx)   # --dim on an ONNX model's dim_param
  target_compile_definitions(test_dims PRIVATE MCIR_HAVE_ONNX=1)
endif()
# States carried from step to step (graph.json "state": a KV cache updated
# in place): format errors, the plan's in-place write, resident sessions on
# the emulated device, greedy generation through the C session API.
if(TARGET mcir_pipeline)
  mcir_check_test(test_state SOURCES test_state.c cli_util.c LIBS mcir_pipeline mcir_codegen_testutil)
  target_compile_definitions(test_state PRIVATE MCIRC_BINARY="$<TARGET_FILE:mcirc>")
  add_dependencies(test_state mcirc)
  set_tests_properties(test_state PROPERTIES TIMEOUT 900)
endif()
