# The Python API (python/, docs/python.md) with Debian's python3-torch:
# capture, compile and run against PyTorch. Skips (77) without torch. Not in
# the sanitizer build: Python would have to preload the ASan runtime.
if(NOT MCIR_SANITIZE AND TARGET mcir_capi)
  find_program(MCIR_SYSTEM_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(MCIR_SYSTEM_PYTHON)
    add_test(NAME python_api
             COMMAND ${MCIR_SYSTEM_PYTHON} ${PROJECT_SOURCE_DIR}/python/tests/run_tests.py)
    set_tests_properties(python_api PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
      ENVIRONMENT "MCIR_CAPI_LIB=$<TARGET_FILE:mcir_capi>")
  endif()
endif()
