# ONNX import: backend node tests, PyTorch exports (and the rewrites on
# them), malformed files. Data: tests/data/onnx/ (scripts/gen_onnx_tests.py).
if(TARGET mcir_onnx)
  mcir_check_test(test_onnx SOURCES test_onnx.c LIBS mcir_onnx mcir_rewrites)
  set_tests_properties(test_onnx PROPERTIES TIMEOUT 900)
endif()
# ONNX dim_params kept symbolic over a range (onnx/symbolic.c): PyTorch
# exports with dynamic axes compiled once by mcirc and run on the emulator at
# three sizes against onnxruntime (tests/data/onnx/dims, scripts/gen_onnx_dims.py).
if(TARGET mcir_onnx)
  mcir_check_test(test_onnx_dims SOURCES test_onnx_dims.c cli_util.c LIBS mcir_onnx)
  target_compile_definitions(test_onnx_dims PRIVATE MCIRC_BINARY="$<TARGET_FILE:mcirc>")
  add_dependencies(test_onnx_dims mcirc)
  set_tests_properties(test_onnx_dims PROPERTIES TIMEOUT 900)
endif()
