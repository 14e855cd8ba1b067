# The emulator's mma.sync m16n8k16 fragment layout against the CuTe-derived
# test vectors in tests/data/layouts/mma_m16n8k16.txt.
mcir_check_test(test_mma_layout SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_mma_layout.c
                LIBS mcir_core ${CMAKE_DL_LIBS})
