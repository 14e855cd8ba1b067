# Rule tests: the built-in catalog's (catalog/default.tests.yaml) and the
# tutorial's, through the library and through mcirc --test-catalog.
mcir_check_test(test_ruletest SOURCES test_ruletest.c LIBS mcir_rewrites)
add_test(NAME mcirc_test_catalog
         COMMAND mcirc --test-catalog ${PROJECT_SOURCE_DIR}/catalog/default.tests.yaml)
# --test-catalog given the built-in catalog itself runs the tests beside it
# (catalog/default.tests.yaml); a copy without them, or an edited copy
# loaded over the built-in one, is one error that names what to run.
add_test(NAME mcirc_test_catalog_builtin_file COMMAND sh -c "
  m=$<TARGET_FILE:mcirc> d=$(mktemp -d) || exit 1; trap 'rm -rf $d' EXIT
  $m --test-catalog catalog/default.yaml >$d/out 2>$d/err || { cat $d/out $d/err; exit 1; }
  grep -q '^[1-9][0-9]* passed, 0 failed$' $d/out || { cat $d/out; exit 1; }
  grep -qx 'catalog/default.yaml: its rule tests are in catalog/default.tests.yaml' $d/err || { cat $d/err; exit 1; }
  cp catalog/default.yaml $d/default.yaml
  $m --test-catalog $d/default.yaml >$d/out 2>$d/err; [ $? = 1 ] || { echo 'copy: exit status'; exit 1; }
  [ $(wc -l <$d/err) = 1 ] && grep -q '^'$d'/default.yaml: error: this is the built-in catalog.*catalog/default.tests.yaml' $d/err || { cat $d/err; exit 1; }
  echo '# edited' >>$d/default.yaml
  $m --test-catalog $d/default.yaml >$d/out 2>$d/err; [ $? = 1 ] || { echo 'edited copy: exit status'; exit 1; }
  [ $(wc -l <$d/err) = 1 ] && grep -q 'error: declares the built-in catalog.*--no-default-catalog' $d/err || { cat $d/err; exit 1; }
  echo ok
"
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
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
