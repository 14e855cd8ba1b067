# Writes share/mcir/build-info.txt into the installed tree: the commit the
# programs were built from (and whether the tree had uncommitted changes),
# the build type and when it was installed. mcir-gpu-run records it with
# every GPU run (docs/performance.md "Recording a GPU run").
# Set by install(CODE) before this script: MCIR_INFO_SOURCE, MCIR_INFO_BUILD_TYPE, MCIR_INFO_DATADIR.
execute_process(COMMAND git -C "${MCIR_INFO_SOURCE}" rev-parse HEAD
                OUTPUT_VARIABLE _commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0 OR NOT _commit)
  set(_commit "unknown (not built from a git checkout)")
else()
  execute_process(COMMAND git -C "${MCIR_INFO_SOURCE}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE _dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_dirty)
    string(APPEND _commit " (with uncommitted changes)")
  endif()
endif()
string(TIMESTAMP _now "%Y-%m-%dT%H:%M:%SZ" UTC)
set(_dest "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${MCIR_INFO_DATADIR}/mcir/build-info.txt")
file(WRITE "${_dest}" "commit: ${_commit}\nbuild type: ${MCIR_INFO_BUILD_TYPE}\ninstalled: ${_now}\n")
message(STATUS "Installing: ${_dest}")
