# Shape inference, reference kernels and the interpreter (mcir/infer.c,
# mcir/ref*.c, mcir/interp.c).
mcir_check_test(test_infer SOURCES test_infer.c LIBS mcir_core)
mcir_check_test(test_ref SOURCES test_ref.c LIBS mcir_core)
mcir_check_test(test_interp SOURCES test_interp.c LIBS mcir_core)
mcir_check_test(test_ints SOURCES test_ints.c LIBS mcir_core)
