# The HTML report: every example, and one page rendered in headless
# Chromium (skips with 77 where Chromium is missing).
add_test(NAME report_html
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/report_test.sh $<TARGET_FILE:mcirc>
                 ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/report)
set_tests_properties(report_html PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
