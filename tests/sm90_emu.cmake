# The emulator's sm_90a semantics (wgmma descriptors and swizzle, TMA boxes,
# mbarrier / named-barrier ordering) against the CuTe-derived vectors in
# tests/data/layouts/gmma_smem_desc.txt and tma_box.txt.
mcir_check_test(test_sm90_emu SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_sm90_emu.c
                LIBS mcir_core ${CMAKE_DL_LIBS})
