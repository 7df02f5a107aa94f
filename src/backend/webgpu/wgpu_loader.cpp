// dlopen + dlsym of the webgpu.h implementation; see wgpu_loader.h for the search order.
#include "backend/webgpu/wgpu_loader.h"

#include "backend/webgpu/napi_stubs.h"

#include "core/error.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>

#ifndef TERN_SOURCE_DIR
#define TERN_SOURCE_DIR "."
#endif

namespace tern {
namespace {

constexpr const char * k_library_name = "libwebgpu_wrapper.so";
// Installed by scripts/setup.sh, in the order tried: npm webgpu's dawn.node (a newer Dawn, with int8
// subgroup matrices), then npm bun-webgpu-linux-x64's library (an older one).
constexpr const char * k_deps_subpaths[] = {".deps/webgpu/node_modules/webgpu/dist/linux-x64/dawn.node",
                                            ".deps/webgpu/node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so"};

WgpuProcs   g_procs;
WgpuLibrary g_library;

}  // namespace

std::unordered_map<std::string, void *> elf_function_symbols(const std::string & path, void * handle,
                                                             const std::vector<std::string> & prefixes) {
    std::unordered_map<std::string, void *> out;
    link_map * map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr) return out;
    // Only the header, the section table and the symbol and string tables are read (dawn.node is
    // 21 MB; those tables 0.7 and 3.3 MB, by readelf -S), each checked against the file's size.
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) return out;
    const uint64_t size    = static_cast<uint64_t>(f.tellg());
    auto           read_at = [&](uint64_t offset, uint64_t n, void * dst) {
        if (offset > size || n > size - offset) return false;
        f.seekg(static_cast<std::streamoff>(offset));
        return static_cast<bool>(f.read(static_cast<char *>(dst), static_cast<std::streamsize>(n)));
    };
    Elf64_Ehdr eh;
    if (!read_at(0, sizeof eh, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr)) {
        return out;
    }
    std::vector<Elf64_Shdr> sh(eh.e_shnum);
    if (!read_at(eh.e_shoff, sh.size() * sizeof(Elf64_Shdr), sh.data())) return out;
    for (const Elf64_Shdr & s : sh) {
        if (s.sh_type != SHT_SYMTAB || s.sh_link >= sh.size()) continue;
        if (s.sh_size > size || sh[s.sh_link].sh_size > size) return out;  // (before allocating for them)
        std::vector<Elf64_Sym> syms(s.sh_size / sizeof(Elf64_Sym));
        std::string            names(sh[s.sh_link].sh_size, '\0');
        if (!read_at(s.sh_offset, syms.size() * sizeof(Elf64_Sym), syms.data()) ||
            !read_at(sh[s.sh_link].sh_offset, names.size(), names.data())) {
            return out;
        }
        for (const Elf64_Sym & sym : syms) {
            if (sym.st_value == 0 || ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_name >= names.size()) continue;
            const std::string_view name(names.c_str() + sym.st_name);  // names.c_str() ends in '\0'
            for (const std::string & pre : prefixes) {
                if (name.substr(0, pre.size()) == pre) {
                    out.emplace(std::string(name), reinterpret_cast<void *>(map->l_addr + sym.st_value));
                    break;
                }
            }
        }
    }
    return out;
}

namespace {

WgpuLibrary open_library() {
    napi_stubs_linked();
    std::string tried;
    for (const std::string & path : wgpu_library_candidates()) {
        const bool is_file = path.find('/') != std::string::npos;
        if (is_file && !std::filesystem::exists(path)) {
            tried += "\n  " + path + " (not found)";
            continue;
        }
        void * handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
        if (!handle) {
            const char * why = dlerror();
            tried += "\n  " + path + " (" + (why ? why : "dlopen failed") + ")";
            continue;
        }
        // dawn.node (npm `webgpu`) keeps its webgpu.h entry points local: they are dawn_proc's
        // trampolines, armed by dawnProcSetProcs(dawn::native::GetProcs()).
        std::unordered_map<std::string, void *> local;
        if (!dlsym(handle, "wgpuCreateInstance")) {
            local = elf_function_symbols(path, handle, {"wgpu", "dawnProcSetProcs", "_ZN4dawn6native8GetProcsEv"});
            auto set_procs = reinterpret_cast<void (*)(const void *)>(local["dawnProcSetProcs"]);
            auto get_procs = reinterpret_cast<const void * (*)()>(local["_ZN4dawn6native8GetProcsEv"]);
            if (set_procs && get_procs) set_procs(get_procs());
        }
        // Every entry point, or the first one missing (then the next candidate is tried).
        std::string missing;
#define TERN_WGPU_RESOLVE(name, ret, params)                                                                   \
    if (missing.empty()) {                                                                                    \
        g_procs.name = reinterpret_cast<ret(*) params>(dlsym(handle, #name));                                \
        if (!g_procs.name && local.count(#name)) g_procs.name = reinterpret_cast<ret(*) params>(local[#name]); \
        if (!g_procs.name) missing = #name;                                                                   \
    }
        TERN_WGPU_PROCS(TERN_WGPU_RESOLVE)
#undef TERN_WGPU_RESOLVE
        if (!missing.empty()) {  // (left loaded: libraries are never unloaded)
            tried += "\n  " + path + " (has no " + missing + ": not a webgpu.h v1.0 implementation)";
            continue;
        }
        // Optional entry points (webgpu_api.h: WgpuProcs' last members).
        {
            void * f = dlsym(handle, "wgpuDeviceCreateComputePipelineAsync");
            if (!f && local.count("wgpuDeviceCreateComputePipelineAsync")) f = local["wgpuDeviceCreateComputePipelineAsync"];
            g_procs.wgpuDeviceCreateComputePipelineAsync =
                reinterpret_cast<decltype(g_procs.wgpuDeviceCreateComputePipelineAsync)>(f);
        }
        // dawn.node is a Dawn of the v1.0 numbering; the exported-symbol builds tern has met predate it.
        // $TERN_WEBGPU_FEATURE_IDS=v1 or pre_v1 says which, for another library.
        WgpuFeatureIds ids = local.empty() ? k_feature_ids_pre_v1 : k_feature_ids_v1;
        if (const char * env = std::getenv("TERN_WEBGPU_FEATURE_IDS"); env && *env) {
            ids = std::string_view(env) == "v1" ? k_feature_ids_v1 : k_feature_ids_pre_v1;
        }
        return {path, &g_procs, ids};
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
            for (const char * sub : k_deps_subpaths) {
                const auto p = dir / sub;
                if (std::filesystem::exists(p, ec)) out.push_back(p.string());
            }
        }
    }
    for (const char * sub : k_deps_subpaths) out.push_back(std::string(TERN_SOURCE_DIR) + "/" + sub);
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
