# tern_embed_wgsl(<target> <shader_dir>)
# Embeds every <shader_dir>/*.wgsl kernel (and <shader_dir>/lib/*.wgsl helper) into <target> as byte
# arrays: generates gen/wgsl_shaders.cpp (the table declared in wgsl_shaders.h) with
# cmake/embed_wgsl_script.cmake. Re-runs when any .wgsl file or the script changes. No Python needed.
function(tern_embed_wgsl target shader_dir)
    file(GLOB kernels CONFIGURE_DEPENDS "${shader_dir}/*.wgsl")
    file(GLOB libs CONFIGURE_DEPENDS "${shader_dir}/lib/*.wgsl")
    set(gen_dir "${CMAKE_CURRENT_BINARY_DIR}/gen")
    set(script "${PROJECT_SOURCE_DIR}/cmake/embed_wgsl_script.cmake")
    add_custom_command(
        OUTPUT  "${gen_dir}/wgsl_shaders.cpp"
        COMMAND ${CMAKE_COMMAND} -DSHADER_DIR=${shader_dir} -DOUT_DIR=${gen_dir} -P "${script}"
        DEPENDS ${kernels} ${libs} "${script}"
        COMMENT "Embedding WGSL shaders"
        VERBATIM)
    target_sources(${target} PRIVATE "${gen_dir}/wgsl_shaders.cpp")
endfunction()
