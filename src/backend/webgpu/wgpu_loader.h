// Loads a webgpu.h implementation (Dawn by default) with dlopen and resolves the entry points the
// backend uses (webgpu_api.h). The library is loaded once per process and never unloaded: handles
// and callbacks may outlive any one backend.
//
// Search order: $TERN_WEBGPU_LIB; then, installed by scripts/setup.sh next to the executable's tree
// or the source tree, .deps/webgpu/.../dawn.node (npm webgpu: a newer Dawn whose webgpu.h functions
// are local symbols, found in its ELF symbol table; loadable outside Node thanks to napi_stubs.cpp)
// and .deps/webgpu/.../libwebgpu_wrapper.so (npm bun-webgpu-linux-x64: exports them); then the plain
// name through the dynamic linker's path. A candidate that does not load or lacks an entry point
// gives way to the next.
#pragma once

#include "backend/webgpu/webgpu_api.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace tern {

struct WgpuLibrary {
    std::string     path;   // the file that was loaded
    const WgpuProcs * procs = nullptr;
    WgpuFeatureIds    feature_ids = k_feature_ids_pre_v1;  // the library's numbering
};

// The loaded library; throws Error(device) naming the paths tried, or the first missing symbol.
const WgpuLibrary & load_wgpu_library();

// The procs of the loaded library (load_wgpu_library() must have succeeded).
const WgpuProcs & wgpu();

// The functions in the ELF symbol table (.symtab, local ones included) of the file `path`, loaded as
// `handle` (dlopen), whose names start with one of `prefixes`: name -> address in the loaded image.
// Empty when the file is not a 64-bit ELF or has no symbol table (stripped).
std::unordered_map<std::string, void *> elf_function_symbols(const std::string & path, void * handle,
                                                             const std::vector<std::string> & prefixes);

// Candidate paths in search order (exposed for messages and tests).
std::vector<std::string> wgpu_library_candidates();

}  // namespace tern
