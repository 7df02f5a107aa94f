# Run with `cmake -DSHADER_DIR=... -DOUT_DIR=... [-DLIB_DIR=...] [-DTABLE=...] -P embed_wgsl_script.cmake`.
# Writes OUT_DIR/TABLE.cpp: one byte array per kernel variant and one per helper, and the function
# TABLE() (default wgsl_shaders, the table of src/backend/webgpu/wgsl_shaders.h), which joins each
# kernel with its helpers on its first call. Helpers come from LIB_DIR (default SHADER_DIR) and are
# embedded once, not once per kernel that includes them (issue 55: the browser's payload; a kernel's
# expanded text is what it was, ~2.7 MB of it at run time, 0.7 MB in the binary).
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
set(all_libs "")

function(count_lines text out)
    string(REGEX MATCHALL "\n" nl "${text}")
    list(LENGTH nl n)
    set(${out} ${n} PARENT_SCOPE)
endfunction()

# Appends one table entry (and its byte array) to `arrays` / `entries` in the caller's scope.
function(to_bytes text out)
    string(HEX "${text}" hex)
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
    set(${out} "${bytes}" PARENT_SCOPE)
endfunction()

# `source` is the kernel's own text; `lib_indices` the helpers appended to it (indices into all_libs).
function(add_entry name file source includes_text lib_indices)
    to_bytes("${source}" bytes)
    string(REPLACE ";" ", " libs_text "${lib_indices}")
    if(NOT libs_text STREQUAL "")
        string(APPEND libs_text ", ")
    endif()
    string(APPEND arrays "const unsigned char k_src_${index}[] = {${bytes}0x00};\n")
    string(APPEND arrays "const WgslInclude k_inc_${index}[] = {${includes_text}{nullptr, 0}};\n")
    string(APPEND arrays "const int k_libs_${index}[] = {${libs_text}-1};\n")
    string(APPEND entries "    {\"${name}\", \"${file}\", text(k_src_${index}, sizeof(k_src_${index})), k_libs_${index}, k_inc_${index}},\n")
    math(EXPR next "${index} + 1")
    set(arrays "${arrays}" PARENT_SCOPE)
    set(entries "${entries}" PARENT_SCOPE)
    set(index ${next} PARENT_SCOPE)
endfunction()

# Kernel text + appended helpers; `includes_text` lists {"lib/x.wgsl", first_line} for error mapping.
# `includes_text` lists {"lib/x.wgsl", first_line} for error mapping; `lib_indices` the helpers'
# indices in all_libs (a list every helper is added to once, its text emitted once as k_lib_<i>).
function(expand kernel_text include_names out_includes out_lib_indices)
    count_lines("${kernel_text}" line)
    set(inc_text "")
    set(indices "")
    foreach(inc ${include_names})
        if(NOT EXISTS "${LIB_DIR}/${inc}")
            message(FATAL_ERROR "embed_wgsl: '${inc}' (included by a kernel) does not exist in ${LIB_DIR}")
        endif()
        list(FIND all_libs "${inc}" lib_index)
        if(lib_index EQUAL -1)
            list(LENGTH all_libs lib_index)
            list(APPEND all_libs "${inc}")
        endif()
        list(APPEND indices ${lib_index})
        file(READ "${LIB_DIR}/${inc}" lib_text)
        math(EXPR first "${line} + 1")
        string(APPEND inc_text "{\"${inc}\", ${first}}, ")
        count_lines("${lib_text}" n)
        math(EXPR line "${line} + ${n}")
    endforeach()
    set(${out_includes} "${inc_text}" PARENT_SCOPE)
    set(${out_lib_indices} "${indices}" PARENT_SCOPE)
    set(all_libs "${all_libs}" PARENT_SCOPE)
endfunction()

# Adds `name` and, when it includes lib/wg_reduce.wgsl, `name`_sg: the include line becomes
# `enable subgroups;` (a directive, before any declaration, on the same line so line numbers hold)
# and the helper lib/wg_reduce_sg.wgsl.
function(add_variants name file text include_names)
    expand("${text}" "${include_names}" includes lib_indices)
    add_entry("${name}" "${file}" "${text}" "${includes}" "${lib_indices}")
    list(FIND include_names "lib/wg_reduce.wgsl" uses_reduce)
    if(uses_reduce GREATER -1)
        string(REPLACE "lib/wg_reduce.wgsl" "lib/wg_reduce_sg.wgsl" sg_names "${include_names}")
        string(REPLACE "// #include \"lib/wg_reduce.wgsl\""
                       "enable subgroups;  // #include \"lib/wg_reduce_sg.wgsl\"" sg_text "${text}")
        expand("${sg_text}" "${sg_names}" includes_sg lib_indices_sg)
        add_entry("${name}_sg" "${file}" "${sg_text}" "${includes_sg}" "${lib_indices_sg}")
    endif()
    set(all_libs "${all_libs}" PARENT_SCOPE)
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


set(lib_arrays "")
set(lib_list "")
set(i 0)
foreach(inc ${all_libs})
    file(READ "${LIB_DIR}/${inc}" lib_text)
    to_bytes("${lib_text}" bytes)
    string(APPEND lib_arrays "const unsigned char k_lib_${i}[] = {${bytes}0x00};  // ${inc}\n")
    string(APPEND lib_list "text(k_lib_${i}, sizeof(k_lib_${i})), ")
    math(EXPR i "${i} + 1")
endforeach()

set(out "// Generated by cmake/embed_wgsl_script.cmake from src/backend/webgpu/shaders: do not edit.\n")
string(APPEND out "#include <string>\n#include <vector>\n\n#include \"backend/webgpu/wgsl_shaders.h\"\n\n")
string(APPEND out "namespace tern {\nnamespace {\n\n")
string(APPEND out "std::string_view text(const unsigned char * bytes, size_t size_with_nul) {\n")
string(APPEND out "    return {reinterpret_cast<const char *>(bytes), size_with_nul - 1};\n}\n\n")
string(APPEND out "${lib_arrays}\nconst std::string_view k_libs[] = {${lib_list}{}};\n\n${arrays}")
string(APPEND out "\n// A kernel's own text and the helpers appended to it (indices into k_libs, -1 ends).\n")
string(APPEND out "struct Entry {\n    std::string_view name, file, text;\n    const int * libs;\n    const WgslInclude * includes;\n};\n\n")
string(APPEND out "const Entry k_entries[] = {\n${entries}};\n\n}  // namespace\n\n")
string(APPEND out "std::span<const WgslShader> ${TABLE}() {\n")
string(APPEND out "    // Joined once, on the first call (function-local statics: thread-safe), and kept.\n")
string(APPEND out "    static const std::vector<std::string> sources = [] {\n")
string(APPEND out "        std::vector<std::string> out;\n        out.reserve(std::size(k_entries));\n")
string(APPEND out "        for (const Entry & e : k_entries) {\n            std::string s(e.text);\n")
string(APPEND out "            for (const int * l = e.libs; *l >= 0; ++l) s += k_libs[*l];\n")
string(APPEND out "            out.push_back(std::move(s));\n        }\n        return out;\n    }();\n")
string(APPEND out "    static const std::vector<WgslShader> shaders = [] {\n")
string(APPEND out "        std::vector<WgslShader> out;\n        out.reserve(std::size(k_entries));\n")
string(APPEND out "        for (size_t i = 0; i < std::size(k_entries); ++i)\n")
string(APPEND out "            out.push_back({k_entries[i].name, k_entries[i].file, sources[i], k_entries[i].includes});\n")
string(APPEND out "        return out;\n    }();\n    return shaders;\n}\n\n}  // namespace tern\n")

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
