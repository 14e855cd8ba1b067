# ONNX import: backend node tests, PyTorch exports (and the rewrites on
# them), malformed files. Data: tests/data/onnx/ (scripts/gen_onnx_tests.py).
if(TARGET mcir_onnx)
  mcir_check_test(test_onnx SOURCES test_onnx.c LIBS mcir_onnx mcir_rewrites)
  set_tests_properties(test_onnx PROPERTIES TIMEOUT 900)
endif()
