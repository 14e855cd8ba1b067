# mcirc by its command-line contract, and every example through it.
foreach(t cli examples output_paths ranks)
  mcir_check_test(test_${t} SOURCES test_${t}.c cli_util.c LIBS mcir_core)
  target_compile_definitions(test_${t} PRIVATE MCIRC_BINARY="$<TARGET_FILE:mcirc>")
  add_dependencies(test_${t} mcirc)
endforeach()
set_tests_properties(test_examples PROPERTIES TIMEOUT 1500)
if(MCIR_SANITIZE)   # test_ranks.c TP_EMU_RUNS
  target_compile_definitions(test_ranks PRIVATE MCIR_SANITIZED_BUILD=1)
endif()
if(TARGET mcir_onnx)   # its ONNX cases; without: a model is refused (-DMCIR_ONNX=OFF)
  target_compile_definitions(test_cli PRIVATE MCIR_HAVE_ONNX=1)
  target_compile_definitions(test_ranks PRIVATE MCIR_HAVE_ONNX=1)
endif()
# Graphs with ranks run by mcirc, each rank's outputs against NumPy
# (tests/ranks_numpy.py; Debian's python3-numpy, exit 77 without it).
find_program(MCIR_NUMPY_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(MCIR_NUMPY_PYTHON)
  add_test(NAME ranks_numpy COMMAND ${MCIR_NUMPY_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/ranks_numpy.py
           $<TARGET_FILE:mcirc>)
  set_tests_properties(ranks_numpy PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
# One process a rank under a launcher's environment (tests/launch_ranks.sh):
# 2 and 4 mcirc processes on the loopback address, cpu and emu, against the
# one-process run; the rendezvous's failures.
add_test(NAME launch_ranks COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/launch_ranks.sh $<TARGET_FILE:mcirc>
         ${PROJECT_SOURCE_DIR})
set_tests_properties(launch_ranks PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
