# I/O tests: graph.json reader (and its malformed-input corpus), .npy, and
# the mcir / dot writers.
mcir_check_test(test_json_read SOURCES test_json_read.c LIBS mcir_core)
mcir_check_test(test_npy SOURCES test_npy.c LIBS mcir_core)
mcir_check_test(test_writers SOURCES test_writers.c LIBS mcir_core)
