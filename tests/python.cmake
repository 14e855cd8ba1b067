# The Python API (python/, docs/python.md). Not in the sanitizer build:
# Python would have to preload the ASan runtime.
#  python_api:    Debian's python3-torch 1.13, the package used in place
#                 with this build's library; skips (77) without torch.
#  python_torch2: PyTorch 2 from PyPI in a venv under the build directory,
#                 the package installed with `pip install ./python`
#                 (tests/python_torch2_test.sh; MCIR_TORCH2=0 skips it).
if(NOT MCIR_SANITIZE AND TARGET mcir_capi)
  find_program(MCIR_SYSTEM_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(MCIR_SYSTEM_PYTHON)
    add_test(NAME python_api
             COMMAND ${MCIR_SYSTEM_PYTHON} ${PROJECT_SOURCE_DIR}/python/tests/run_tests.py)
    set_tests_properties(python_api PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
      ENVIRONMENT "MCIR_CAPI_LIB=$<TARGET_FILE:mcir_capi>")
    add_test(NAME python_torch2
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/python_torch2_test.sh ${PROJECT_SOURCE_DIR}
                     ${CMAKE_BINARY_DIR})
    set_tests_properties(python_torch2 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800)
  endif()
endif()
