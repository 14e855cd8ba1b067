# Sources point at documents of the project: every page of docs/ they name
# exists, and none names a spec/ file from outside it.
add_test(NAME doc_refs COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/doc_refs_test.sh ${PROJECT_SOURCE_DIR})
# The layering of docs/architecture.md, read off every #include.
add_test(NAME layering COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/layering_test.sh ${PROJECT_SOURCE_DIR})
