# The YAML rule catalog: built-in catalog, user files, bad-YAML corpus.
mcir_check_test(test_catalog SOURCES test_catalog.c LIBS mcir_catalog)
