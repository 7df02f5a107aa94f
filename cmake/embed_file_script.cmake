# Run with `cmake -DIN=file -DOUT=file.cpp -DSYMBOL=name -DNAMESPACE=ns -P embed_file_script.cmake`.
# Writes OUT: `const unsigned char SYMBOL[]` (the bytes of IN, null-terminated) and `const size_t SYMBOL_size`
# in namespace NAMESPACE. Byte arrays, not a raw string: no delimiter or length limits.
cmake_minimum_required(VERSION 3.18)
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(LENGTH "${hex}" n_hex)
math(EXPR n "${n_hex} / 2")
file(WRITE "${OUT}.tmp"
    "// Generated from ${IN} by cmake/embed_file_script.cmake; do not edit.\n"
    "#include <cstddef>\n"
    "namespace ${NAMESPACE} {\n"
    "extern const unsigned char ${SYMBOL}[];\nextern const size_t ${SYMBOL}_size;\n"
    "const unsigned char ${SYMBOL}[] = {${bytes}0x00};\n"
    "const size_t ${SYMBOL}_size = ${n};\n"
    "}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
