# Writes OUT, a C file defining mcir_catalog_default_yaml (the bytes of IN,
# NUL-terminated) and mcir_catalog_default_yaml_size, so mcirc needs no
# install path to find the built-in catalog.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" hexlen)
math(EXPR size "${hexlen} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT}.tmp
"/* Generated from catalog/default.yaml by catalog/embed.cmake. */\n"
"#include <stddef.h>\n"
"extern const char mcir_catalog_default_yaml[];\n"
"extern const size_t mcir_catalog_default_yaml_size;\n"
"const char mcir_catalog_default_yaml[] = {\n${bytes}0x00};\n"
"const size_t mcir_catalog_default_yaml_size = ${size};\n")
file(RENAME ${OUT}.tmp ${OUT})
