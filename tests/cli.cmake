# mcirc by its command-line contract, and every example through it.
foreach(t cli examples)
  mcir_check_test(test_${t} SOURCES test_${t}.c cli_util.c LIBS mcir_core)
  target_compile_definitions(test_${t} PRIVATE MCIRC_BINARY="$<TARGET_FILE:mcirc>")
  add_dependencies(test_${t} mcirc)
endforeach()
set_tests_properties(test_examples PROPERTIES TIMEOUT 1500)
