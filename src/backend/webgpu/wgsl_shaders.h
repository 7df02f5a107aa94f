// The embedded WGSL shaders: a table generated at build time from src/backend/webgpu/shaders/*.wgsl
// by cmake/embed_wgsl_script.cmake (byte arrays; helpers from shaders/lib appended to the kernels
// that `// #include` them, on the first call: each helper is embedded once). The table and its
// sources live as long as the program. Tests iterate the table and compile every entry.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace tern {

// A helper file appended to a kernel, starting at `first_line` (1-based) of the expanded source.
struct WgslInclude {
    const char * file;        // "lib/numerics.wgsl"; nullptr ends the list
    uint32_t     first_line;
};

struct WgslShader {
    std::string_view    name;      // "bitlinear", "bitlinear_nodp4"
    std::string_view    file;      // "bitlinear.wgsl": where line numbers point
    std::string_view    source;    // expanded WGSL (kernel + helpers), entry point `main`
    const WgslInclude * includes;  // helpers appended after the kernel's own lines
};

std::span<const WgslShader> wgsl_shaders();

}  // namespace tern
