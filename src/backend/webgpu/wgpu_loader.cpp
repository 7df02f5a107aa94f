// dlopen + dlsym of the webgpu.h implementation; see wgpu_loader.h for the search order.
#include "backend/webgpu/wgpu_loader.h"

#include "core/error.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#ifndef TERN_SOURCE_DIR
#define TERN_SOURCE_DIR "."
#endif

namespace tern {
namespace {

constexpr const char * k_library_name = "libwebgpu_wrapper.so";
constexpr const char * k_deps_subpath = ".deps/webgpu/node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so";

WgpuProcs   g_procs;
WgpuLibrary g_library;

WgpuLibrary open_library() {
    std::string tried;
    for (const std::string & path : wgpu_library_candidates()) {
        const bool is_file = path.find('/') != std::string::npos;
        if (is_file && !std::filesystem::exists(path)) {
            tried += "\n  " + path + " (not found)";
            continue;
        }
        void * handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!handle) {
            const char * why = dlerror();
            tried += "\n  " + path + " (" + (why ? why : "dlopen failed") + ")";
            continue;
        }
#define TERN_WGPU_RESOLVE(name, ret, params)                                                                   \
    g_procs.name = reinterpret_cast<ret(*) params>(dlsym(handle, #name));                                    \
    if (!g_procs.name) {                                                                                      \
        fail(ErrorKind::device, format("webgpu: '%s' does not export %s", path.c_str(), #name),               \
             "the library is not a webgpu.h (v1.0) implementation; use Dawn from scripts/setup.sh or set "     \
             "TERN_WEBGPU_LIB");                                                                              \
    }
        TERN_WGPU_PROCS(TERN_WGPU_RESOLVE)
#undef TERN_WGPU_RESOLVE
        return {path, &g_procs};
    }
    fail(ErrorKind::device, std::string("webgpu: cannot load the WebGPU library (") + k_library_name + "); tried:" + tried,
         "run scripts/setup.sh (installs Dawn into .deps/webgpu), or set TERN_WEBGPU_LIB=/path/to/libwebgpu.so");
}

}  // namespace

std::vector<std::string> wgpu_library_candidates() {
    std::vector<std::string> out;
    if (const char * env = std::getenv("TERN_WEBGPU_LIB"); env && *env) {
        out.emplace_back(env);
        return out;  // an explicit choice is never silently replaced
    }
    std::error_code ec;
    const auto      exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        // <root>/build*/bin/tern and <root>/build*/tests/...: walk up to four levels for a .deps folder.
        auto dir = exe.parent_path();
        for (int up = 0; up < 4 && !dir.empty(); ++up, dir = dir.parent_path()) {
            const auto p = dir / k_deps_subpath;
            if (std::filesystem::exists(p, ec)) out.push_back(p.string());
        }
    }
    out.push_back(std::string(TERN_SOURCE_DIR) + "/" + k_deps_subpath);
    out.emplace_back(k_library_name);
    return out;
}

const WgpuLibrary & load_wgpu_library() {
    static std::once_flag once;
    static std::string    error_message, error_hint;
    static bool           failed = false;
    std::call_once(once, [] {
        try {
            g_library = open_library();
        } catch (const Error & e) {
            failed        = true;
            error_message = e.what();
            error_hint    = e.hint();
        }
    });
    if (failed) throw Error(ErrorKind::device, error_message, error_hint);
    return g_library;
}

const WgpuProcs & wgpu() {
    TERN_ASSERT(g_library.procs != nullptr, "wgpu() before load_wgpu_library()");
    return *g_library.procs;
}

}  // namespace tern
