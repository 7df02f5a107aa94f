// Loads a webgpu.h implementation (Dawn by default) with dlopen and resolves the entry points the
// backend uses (webgpu_api.h). The library is loaded once per process and never unloaded: handles
// and callbacks may outlive any one backend.
//
// Search order: $TERN_WEBGPU_LIB; then .deps/webgpu/.../libwebgpu_wrapper.so (installed by
// scripts/setup.sh) next to the executable's tree or the source tree; then the plain name through
// the dynamic linker's path.
#pragma once

#include "backend/webgpu/webgpu_api.h"

#include <string>
#include <vector>

namespace tern {

struct WgpuLibrary {
    std::string     path;   // the file that was loaded
    const WgpuProcs * procs = nullptr;
};

// The loaded library; throws Error(device) naming the paths tried, or the first missing symbol.
const WgpuLibrary & load_wgpu_library();

// The procs of the loaded library (load_wgpu_library() must have succeeded).
const WgpuProcs & wgpu();

// Candidate paths in search order (exposed for messages and tests).
std::vector<std::string> wgpu_library_candidates();

}  // namespace tern
