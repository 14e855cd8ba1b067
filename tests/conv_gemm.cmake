# Pointwise convs as GEMMs (catalog rule conv1x1_as_matmul,
# rewrites/actions.c apply_conv_as_matmul): the plans, the refusals, and
# runs on the emulated device against the interpreter; a 3x3 conv on the
# sm_90a implicit GEMM (rule conv_kxk_tap_major).
mcir_check_test(test_conv_gemm SOURCES test_conv_gemm.c cli_util.c LIBS mcir_core)
target_compile_definitions(test_conv_gemm PRIVATE MCIRC_BINARY="$<TARGET_FILE:mcirc>")
add_dependencies(test_conv_gemm mcirc)
