# The kernel partition, tiling, memory plan, checker and writers
# (mcir_kernelplan); the planner algorithms are mcir_memplan
# (kernelplan/CMakeLists.txt).
# The launch model of the generated templates (launch.c): also linked by
# mcir_properties (fits_on_chip) and mcir_codegen, so it needs only the core
# and the target table.
add_library(mcir_launch STATIC ${PROJECT_SOURCE_DIR}/kernelplan/launch.c ${PROJECT_SOURCE_DIR}/kernelplan/launch_sm90.c
            ${PROJECT_SOURCE_DIR}/kernelplan/launch_gemm_sm90.c)
target_link_libraries(mcir_launch PUBLIC mcir_core mcir_target)
add_library(mcir_kernelplan STATIC
  ${PROJECT_SOURCE_DIR}/kernelplan/partition.c
  ${PROJECT_SOURCE_DIR}/kernelplan/tiling.c
  ${PROJECT_SOURCE_DIR}/kernelplan/launch_gemm.c
  ${PROJECT_SOURCE_DIR}/kernelplan/tune.c
  ${PROJECT_SOURCE_DIR}/kernelplan/cost.c
  ${PROJECT_SOURCE_DIR}/kernelplan/memory.c
  ${PROJECT_SOURCE_DIR}/kernelplan/plan_json.c
  ${PROJECT_SOURCE_DIR}/kernelplan/svg.c)
target_link_libraries(mcir_kernelplan PUBLIC mcir_core mcir_memplan mcir_target mcir_launch)
