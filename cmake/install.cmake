# Install rules and the release package (cmake --install, cpack -G TGZ,
# scripts/package.sh). Included last from the top CMakeLists.txt, when
# every target exists.
#
# The package is relocatable: programs find the shared libraries mcir
# links (libyaml, PCRE2, jansson, protobuf-c, libsubunit for test_gpu)
# in lib/ beside them (RUNPATH $ORIGIN/../lib; copied there at install time
# by cmake/bundle-runtime-deps.cmake). The CUDA libraries are never
# bundled: NVRTC (linked by soname) comes from /usr/local/cuda (also in the
# RUNPATH) or the loader path of the machine it runs on, and the driver
# and cuBLAS are dlopen'd from there at run time.
#
# Layout under the prefix:
#   bin/      mcirc, mcir-memplan, mcir-compare, test_gpu, the benchmarks,
#             mcir-gpu-check (scripts/gpu-check.sh), mcir-gpu-run
#             (scripts/gpu-run.sh)
#   lib/      the static libraries, the bundled shared libraries,
#             pkgconfig/mcir.pc
#   include/mcir/<folder>/*.h   the public headers (no *-impl.h)
#   share/mcir/  examples/, catalog/default.yaml, bench/data/, bench/*.py
#             (PyTorch counterparts, gen_blocks.py), scripts/mcir_graph.py,
#             build-info.txt (the commit)
#   share/doc/mcir/  README.md, docs/
include(GNUInstallDirs)
set(MCIR_INSTALL_LIBDIR lib)   # not lib64: the RUNPATH below names lib

# RUNPATH of installed programs: the package's own lib/, then the usual
# homes of the CUDA toolkit's libnvrtc (dlopen of cuBLAS from our code
# searches the same list). LD_LIBRARY_PATH and the loader cache still
# apply for CUDA installed elsewhere.
set(MCIR_INSTALL_RPATH "$ORIGIN/../${MCIR_INSTALL_LIBDIR}"
    /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib)

# Programs: mcirc, the tools, the benchmarks (every executable defined in
# those folders), and the GPU test.
set(MCIR_INSTALL_PROGRAMS)
foreach(dir mcirc tools bench)
  get_property(_targets DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t ${_targets})
    get_target_property(_type ${t} TYPE)
    if(_type STREQUAL "EXECUTABLE")
      list(APPEND MCIR_INSTALL_PROGRAMS ${t})
    endif()
  endforeach()
endforeach()
if(TARGET test_gpu)
  list(APPEND MCIR_INSTALL_PROGRAMS test_gpu)
endif()
set_target_properties(${MCIR_INSTALL_PROGRAMS} PROPERTIES INSTALL_RPATH "${MCIR_INSTALL_RPATH}")
install(TARGETS ${MCIR_INSTALL_PROGRAMS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/gpu-check.sh
        DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME mcir-gpu-check)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/gpu-run.sh
        DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME mcir-gpu-run)

# The libraries, in link order (a library before the ones it uses).
set(MCIR_INSTALL_LIBS)
foreach(l mcir_pipeline mcir_rewrites mcir_catalog mcir_properties mcir_kernelplan
          mcir_runtime mcir_codegen mcir_emu mcir_memplan mcir_onnx mcir_launch mcir_target mcir_core)
  if(TARGET ${l})
    list(APPEND MCIR_INSTALL_LIBS ${l})
  endif()
endforeach()
install(TARGETS ${MCIR_INSTALL_LIBS} ARCHIVE DESTINATION ${MCIR_INSTALL_LIBDIR})

# Public headers, by folder, as the sources include them ("mcir/mcir.h").
foreach(dir mcir catalog properties rewrites memplan kernelplan emu codegen runtime onnx mcirc)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mcir/${dir}
          FILES_MATCHING PATTERN "*.h" PATTERN "*-impl.h" EXCLUDE PATTERN "templates" EXCLUDE)
endforeach()

# pkg-config: the static libraries (as one link group: their order of
# use is not a line) and what they need.
set(MCIR_PC_LIBS "-Wl,--start-group")
foreach(l ${MCIR_INSTALL_LIBS})
  string(APPEND MCIR_PC_LIBS " -l${l}")
endforeach()
string(APPEND MCIR_PC_LIBS " -Wl,--end-group")
set(MCIR_PC_REQUIRES "jansson yaml-0.1 libpcre2-8")
if(TARGET mcir_onnx)
  string(APPEND MCIR_PC_REQUIRES " libprotobuf-c")
endif()
set(MCIR_PC_NVRTC "")
if(CUDA_nvrtc_LIBRARY)   # codegen/CMakeLists.txt links it by path
  get_filename_component(_nvrtc_dir ${CUDA_nvrtc_LIBRARY} DIRECTORY)
  set(MCIR_PC_NVRTC "-L/usr/local/cuda/lib64")
  if(NOT _nvrtc_dir STREQUAL "/usr/local/cuda/lib64")
    string(APPEND MCIR_PC_NVRTC " -L${_nvrtc_dir}")
  endif()
  string(APPEND MCIR_PC_NVRTC " -lnvrtc")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/mcir.pc.in ${PROJECT_BINARY_DIR}/mcir.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mcir.pc DESTINATION ${MCIR_INSTALL_LIBDIR}/pkgconfig)

# Data: the examples (graphs, inputs, PyTorch outputs), the built-in
# catalog to start a user's own from, the memory-planner instances.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DATADIR}/mcir/examples)
install(FILES ${PROJECT_SOURCE_DIR}/catalog/default.yaml DESTINATION ${CMAKE_INSTALL_DATADIR}/mcir/catalog)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/bench/data/ DESTINATION ${CMAKE_INSTALL_DATADIR}/mcir/bench/data)
# mcir-gpu-run's PyTorch side and its block generator (they import
# ../scripts/mcir_graph.py and mcir_seed.py, installed beside them)
foreach(f torch_attention.py torch_norms.py torch_gemm.py torch_blocks.py torch_cpu.py torch_timing.py
          gen_blocks.py gpu_run_summary.py)
  install(FILES ${PROJECT_SOURCE_DIR}/bench/${f} DESTINATION ${CMAKE_INSTALL_DATADIR}/mcir/bench)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/scripts/mcir_graph.py ${PROJECT_SOURCE_DIR}/scripts/mcir_seed.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/mcir/scripts)
# share/mcir/build-info.txt: the commit, for the record of every GPU run
install(CODE "set(MCIR_INFO_SOURCE \"${PROJECT_SOURCE_DIR}\")
set(MCIR_INFO_BUILD_TYPE \"${CMAKE_BUILD_TYPE}\")
set(MCIR_INFO_DATADIR \"${CMAKE_INSTALL_DATADIR}\")")
install(SCRIPT ${PROJECT_SOURCE_DIR}/cmake/build-info.cmake)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)

# The non-system shared libraries of the installed programs, into lib/.
install(CODE "set(MCIR_BUNDLE_PROGRAMS \"${MCIR_INSTALL_PROGRAMS}\")
set(MCIR_BUNDLE_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
set(MCIR_BUNDLE_LIBDIR \"${MCIR_INSTALL_LIBDIR}\")")
install(SCRIPT ${PROJECT_SOURCE_DIR}/cmake/bundle-runtime-deps.cmake)

# cpack -G TGZ (scripts/package.sh): mcir-VERSION-linux-ARCH.tar.gz with
# one top directory of that name.
set(CPACK_GENERATOR TGZ)
set(CPACK_PACKAGE_NAME mcir)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
string(TOLOWER "${CMAKE_SYSTEM_NAME}-${CMAKE_SYSTEM_PROCESSOR}" _sys)
set(CPACK_PACKAGE_FILE_NAME "mcir-${PROJECT_VERSION}-${_sys}")
set(CPACK_INCLUDE_TOPLEVEL_DIRECTORY ON)
set(CPACK_SOURCE_GENERATOR "")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "mcir: a memory-centric compiler for deep-learning graphs on NVIDIA GPUs")
include(CPack)
