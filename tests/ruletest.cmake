# Rule tests: the built-in catalog's (catalog/default.tests.yaml) and the
# tutorial's, through the library and through mcirc --test-catalog.
mcir_check_test(test_ruletest SOURCES test_ruletest.c LIBS mcir_rewrites)
add_test(NAME mcirc_test_catalog
         COMMAND mcirc --test-catalog ${PROJECT_SOURCE_DIR}/catalog/default.tests.yaml)
add_test(NAME mcirc_test_catalog_tutorial
         COMMAND mcirc --test-catalog examples/rules/rms_reciprocal.yaml
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
# --verify names the rewrite after which the outputs diverge.
add_test(NAME mcirc_verify_bisect
         COMMAND mcirc --catalog tests/data/catalog/good/wrong_tanh.yaml --verify
                 examples/gpt2_block/graph.json
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(mcirc_verify_bisect PROPERTIES
  PASS_REGULAR_EXPRESSION "first diverge after rewrite [0-9]+ of [0-9]+: rule 'tanh_is_not_sigmoid'")
