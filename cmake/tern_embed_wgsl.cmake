# tern_embed_wgsl(<target> <shader_dir> [TABLE <function>] [LIB_DIR <dir>])
# Embeds every <shader_dir>/*.wgsl kernel (with the LIB_DIR/lib/*.wgsl helpers it includes; LIB_DIR
# defaults to <shader_dir>) into <target> as byte arrays: generates gen/<function>.cpp, which defines
# `std::span<const WgslShader> <function>()` (default wgsl_shaders, declared in wgsl_shaders.h), with
# cmake/embed_wgsl_script.cmake. Re-runs when any .wgsl file or the script changes. No Python needed.
function(tern_embed_wgsl target shader_dir)
    cmake_parse_arguments(ARG "" "TABLE;LIB_DIR" "" ${ARGN})
    if(NOT ARG_TABLE)
        set(ARG_TABLE wgsl_shaders)
    endif()
    if(NOT ARG_LIB_DIR)
        set(ARG_LIB_DIR "${shader_dir}")
    endif()
    file(GLOB kernels CONFIGURE_DEPENDS "${shader_dir}/*.wgsl")
    file(GLOB libs CONFIGURE_DEPENDS "${ARG_LIB_DIR}/lib/*.wgsl")
    set(gen_dir "${CMAKE_CURRENT_BINARY_DIR}/gen")
    set(script "${PROJECT_SOURCE_DIR}/cmake/embed_wgsl_script.cmake")
    add_custom_command(
        OUTPUT  "${gen_dir}/${ARG_TABLE}.cpp"
        COMMAND ${CMAKE_COMMAND} -DSHADER_DIR=${shader_dir} -DLIB_DIR=${ARG_LIB_DIR} -DTABLE=${ARG_TABLE}
                -DOUT_DIR=${gen_dir} -P "${script}"
        DEPENDS ${kernels} ${libs} "${script}"
        COMMENT "Embedding WGSL shaders (${ARG_TABLE})"
        VERBATIM)
    target_sources(${target} PRIVATE "${gen_dir}/${ARG_TABLE}.cpp")
endfunction()
