# The rewrite engine: rules on hand-built graphs and on the examples,
# golden cases (tests/golden/<case>/: input.json, expected.mcir.json,
# expected.trace.jsonl; MCIR_UPDATE_GOLDEN=1 rewrites the expected files).
mcir_check_test(test_rewrites SOURCES test_rewrites.c LIBS mcir_rewrites)
set_tests_properties(test_rewrites PROPERTIES TIMEOUT 900)
