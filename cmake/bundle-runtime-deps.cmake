# Install-time step (cmake/install.cmake): copies the shared libraries the
# installed programs need, other than the C library's and CUDA's, into the
# package's lib/, so the programs run (RUNPATH $ORIGIN/../lib) on a machine
# that lacks them. CUDA (libnvrtc, libcuda, libcublas) always comes from the
# machine the package runs on. Expects MCIR_BUNDLE_PROGRAMS (target names =
# file names under MCIR_BUNDLE_BINDIR) and MCIR_BUNDLE_LIBDIR.
set(_root "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(_programs)
foreach(p ${MCIR_BUNDLE_PROGRAMS})
  list(APPEND _programs "${_root}/${MCIR_BUNDLE_BINDIR}/${p}")
endforeach()
file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES ${_programs}
  RESOLVED_DEPENDENCIES_VAR _resolved
  UNRESOLVED_DEPENDENCIES_VAR _unresolved
  # the C library and the loader: every Linux has its own
  PRE_EXCLUDE_REGEXES
    "^ld-linux" "^linux-vdso" "^libc\\.so" "^libm\\.so" "^libmvec\\.so" "^libpthread\\.so"
    "^libdl\\.so" "^librt\\.so" "^libresolv\\.so" "^libutil\\.so" "^libanl\\.so"
    # CUDA: from the machine the package runs on
    "^libnvrtc" "^libcuda\\.so" "^libcublas"
  POST_EXCLUDE_REGEXES "^/usr/local/cuda"
  DIRECTORIES /usr/local/cuda/lib64)
foreach(u ${_unresolved})
  if(NOT u MATCHES "^lib(nvrtc|cuda|cublas)")
    message(FATAL_ERROR "mcir package: cannot resolve ${u}, needed by the installed programs")
  endif()
endforeach()
foreach(lib ${_resolved})
  message(STATUS "Bundling: ${lib}")
  file(INSTALL DESTINATION "${_root}/${MCIR_BUNDLE_LIBDIR}" TYPE SHARED_LIBRARY
       FOLLOW_SYMLINK_CHAIN FILES "${lib}")
endforeach()
