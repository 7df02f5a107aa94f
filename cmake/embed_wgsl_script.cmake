# Run with `cmake -DSHADER_DIR=... -DOUT_DIR=... [-DLIB_DIR=...] [-DTABLE=...] -P embed_wgsl_script.cmake`.
# Writes OUT_DIR/TABLE.cpp: one null-terminated byte array per kernel and the function TABLE()
# (default wgsl_shaders, the table of src/backend/webgpu/wgsl_shaders.h) returning them. Helpers come
# from LIB_DIR (default SHADER_DIR) and are only embedded into kernels.
#
# A kernel may pull in helpers with lines `// #include "lib/<name>.wgsl"`: the helpers are appended
# after the kernel's own text (WGSL declarations are order-independent), so the kernel's line numbers
# stay those of its file and compile errors past its last line map into the helper.
# A kernel that includes lib/dot4_native.wgsl also gets a "<name>_nodp4" variant built with
# lib/dot4_emulated.wgsl instead, and its `requires packed_4x8_integer_dot_product;` line commented
# out, for adapters without that WGSL language feature. A kernel that includes lib/wg_reduce.wgsl
# also gets "<name>_sg" (and "<name>_nodp4_sg") variants with lib/wg_reduce_sg.wgsl (subgroups).
cmake_minimum_required(VERSION 3.18)
if(NOT DEFINED LIB_DIR)
    set(LIB_DIR "${SHADER_DIR}")
endif()
if(NOT DEFINED TABLE)
    set(TABLE wgsl_shaders)
endif()

file(GLOB kernels "${SHADER_DIR}/*.wgsl")
list(SORT kernels)

set(arrays "")
set(entries "")
set(index 0)

function(count_lines text out)
    string(REGEX MATCHALL "\n" nl "${text}")
    list(LENGTH nl n)
    set(${out} ${n} PARENT_SCOPE)
endfunction()

# Appends one table entry (and its byte array) to `arrays` / `entries` in the caller's scope.
function(add_entry name file source includes_text)
    string(HEX "${source}" hex)
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
    string(APPEND arrays "const unsigned char k_src_${index}[] = {${bytes}0x00};\n")
    string(APPEND arrays "const WgslInclude k_inc_${index}[] = {${includes_text}{nullptr, 0}};\n")
    string(APPEND entries "    {\"${name}\", \"${file}\", std::string_view(reinterpret_cast<const char *>(k_src_${index}), sizeof(k_src_${index}) - 1), k_inc_${index}},\n")
    math(EXPR next "${index} + 1")
    set(arrays "${arrays}" PARENT_SCOPE)
    set(entries "${entries}" PARENT_SCOPE)
    set(index ${next} PARENT_SCOPE)
endfunction()

# Kernel text + appended helpers; `includes_text` lists {"lib/x.wgsl", first_line} for error mapping.
function(expand kernel_text include_names out_source out_includes)
    set(src "${kernel_text}")
    count_lines("${src}" line)
    set(inc_text "")
    foreach(inc ${include_names})
        if(NOT EXISTS "${LIB_DIR}/${inc}")
            message(FATAL_ERROR "embed_wgsl: '${inc}' (included by a kernel) does not exist in ${LIB_DIR}")
        endif()
        file(READ "${LIB_DIR}/${inc}" lib_text)
        math(EXPR first "${line} + 1")
        string(APPEND inc_text "{\"${inc}\", ${first}}, ")
        string(APPEND src "${lib_text}")
        count_lines("${lib_text}" n)
        math(EXPR line "${line} + ${n}")
    endforeach()
    set(${out_source} "${src}" PARENT_SCOPE)
    set(${out_includes} "${inc_text}" PARENT_SCOPE)
endfunction()

# Adds `name` and, when it includes lib/wg_reduce.wgsl, `name`_sg: the include line becomes
# `enable subgroups;` (a directive, before any declaration, on the same line so line numbers hold)
# and the helper lib/wg_reduce_sg.wgsl.
function(add_variants name file text include_names)
    expand("${text}" "${include_names}" source includes)
    add_entry("${name}" "${file}" "${source}" "${includes}")
    list(FIND include_names "lib/wg_reduce.wgsl" uses_reduce)
    if(uses_reduce GREATER -1)
        string(REPLACE "lib/wg_reduce.wgsl" "lib/wg_reduce_sg.wgsl" sg_names "${include_names}")
        string(REPLACE "// #include \"lib/wg_reduce.wgsl\""
                       "enable subgroups;  // #include \"lib/wg_reduce_sg.wgsl\"" sg_text "${text}")
        expand("${sg_text}" "${sg_names}" source_sg includes_sg)
        add_entry("${name}_sg" "${file}" "${source_sg}" "${includes_sg}")
    endif()
    set(arrays "${arrays}" PARENT_SCOPE)
    set(entries "${entries}" PARENT_SCOPE)
    set(index ${index} PARENT_SCOPE)
endfunction()

foreach(path ${kernels})
    get_filename_component(name "${path}" NAME_WE)
    get_filename_component(file "${path}" NAME)
    if(NOT name MATCHES "^[a-z0-9_]+$")
        message(FATAL_ERROR "embed_wgsl: shader file names must be lower_snake_case: ${file}")
    endif()
    file(READ "${path}" text)
    string(REGEX MATCH "\n$" ends_nl "${text}")
    if(NOT ends_nl)
        string(APPEND text "\n")
    endif()
    string(REGEX MATCHALL "// #include \"[^\"]+\"" include_lines "${text}")
    set(include_names "")
    foreach(l ${include_lines})
        string(REGEX REPLACE "// #include \"([^\"]+)\"" "\\1" inc "${l}")
        list(APPEND include_names "${inc}")
    endforeach()
    add_variants("${name}" "${file}" "${text}" "${include_names}")
    list(FIND include_names "lib/dot4_native.wgsl" uses_dp4)
    if(uses_dp4 GREATER -1)
        string(REPLACE "lib/dot4_native.wgsl" "lib/dot4_emulated.wgsl" emulated_names "${include_names}")
        string(REPLACE "requires packed_4x8_integer_dot_product;"
                       "// (emulated dot4: requires packed_4x8_integer_dot_product; removed)" text2 "${text}")
        add_variants("${name}_nodp4" "${file}" "${text2}" "${emulated_names}")
    endif()
endforeach()


set(out "// Generated by cmake/embed_wgsl_script.cmake from src/backend/webgpu/shaders: do not edit.\n")
string(APPEND out "#include \"backend/webgpu/wgsl_shaders.h\"\n\nnamespace tern {\nnamespace {\n\n")
string(APPEND out "${arrays}")
string(APPEND out "\nconst WgslShader k_shaders[] = {\n${entries}};\n\n}  // namespace\n\n")
string(APPEND out "std::span<const WgslShader> ${TABLE}() { return k_shaders; }\n\n}  // namespace tern\n")

file(MAKE_DIRECTORY "${OUT_DIR}")
# Write only on change so that dependents do not rebuild needlessly.
set(target "${OUT_DIR}/${TABLE}.cpp")
if(EXISTS "${target}")
    file(READ "${target}" old)
    if(old STREQUAL out)
        return()
    endif()
endif()
file(WRITE "${target}" "${out}")
