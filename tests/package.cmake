# The release package (cmake/install.cmake, scripts/package.sh): packed,
# unpacked elsewhere, its programs run with the libraries it bundles.
# Not in the sanitizer build (a release package is not instrumented).
if(NOT MCIR_SANITIZE)
  add_test(NAME package_relocatable
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/package_check.sh ${PROJECT_SOURCE_DIR}
            ${PROJECT_BINARY_DIR} ${PROJECT_BINARY_DIR}/package-test)
  set_tests_properties(package_relocatable PROPERTIES TIMEOUT 300)
endif()
