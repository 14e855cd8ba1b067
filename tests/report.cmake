# The HTML report: every example, and one page rendered in headless
# Chromium (skips with 77 where Chromium is missing).
add_test(NAME report_html
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/report_test.sh $<TARGET_FILE:mcirc>
                 ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/report)
set_tests_properties(report_html PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
# Bounded and visible long work: the drawing budget's kernel-level
# fallback (a hanging fake dot), progress lines on a terminal only.
add_test(NAME report_budget
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/report_budget_test.sh $<TARGET_FILE:mcirc>
                 $<TARGET_FILE:mcir-memplan> ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/report-budget)
set_tests_properties(report_budget PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
