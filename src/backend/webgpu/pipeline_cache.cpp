// Shader modules, layouts and pipelines, created once inside error scopes (pipeline_cache.h).
#include "backend/webgpu/pipeline_cache.h"

#include "core/error.h"

#include <cstdlib>
#include <string>
#include <vector>

namespace tern {

const WgslShader * find_wgsl_shader(std::string_view name) {
    for (const WgslShader & s : wgsl_shaders()) {
        if (s.name == name) return &s;
    }
    return nullptr;
}

// ONE-OFF EXPERIMENT (not for keeping): $TERN_WEBGPU_PF_RED = 1 add / 2 max / 3 or: the weight
// prefetches issue atomic reductions of a neutral value (no result: fire-and-forget REDs) instead of
// loads; $TERN_WEBGPU_PF_RED_SECTORS=2 two per 64 bytes.
int pf_red_mode() {
    static const int m = [] { const char * e = std::getenv("TERN_WEBGPU_PF_RED"); return e ? std::atoi(e) : 0; }();
    return m;
}
namespace {
void replace_all(std::string & s, const std::string & a, const std::string & b) {
    for (size_t at = s.find(a); at != std::string::npos; at = s.find(a, at + b.size())) s.replace(at, a.size(), b);
}
std::string red_fn(const std::string & name, const std::string & arr) {
    const int m = pf_red_mode();
    static const int sectors = [] { const char * e = std::getenv("TERN_WEBGPU_PF_RED_SECTORS"); return e ? std::atoi(e) : 1; }();
    const std::string op = m == 2 ? "atomicMax" : m == 3 ? "atomicOr" : "atomicAdd";
    std::string f = "fn " + name + "(i: u32, n: u32) {\n    " + op + "(&" + arr + "[i], 0u);\n";
    if (sectors == 2) f += "    if (i + 8u < n) { " + op + "(&" + arr + "[i + 8u], 0u); }\n";
    return f + "}\n";
}
}  // namespace

WgslShader red_variant(const WgslShader & in, std::string & keep) {
    keep = std::string(in.source);
    const std::string n(in.name);
    if (n.rfind("attention", 0) == 0 && n.find("prefill") == std::string::npos && n.find("long") == std::string::npos) {
        for (int k = 0; k < 4; ++k) {
            const std::string pf = "pf" + std::to_string(k);
            replace_all(keep, "var<storage, read> " + pf + ": array<u32>;", "var<storage, read_write> " + pf + ": array<atomic<u32>>;");
            replace_all(keep, "return " + pf + "[i];", "return atomicLoad(&" + pf + "[i]);");
        }
        replace_all(keep, "if (i < words[b]) { acc ^= pf_word(b, i); }", "if (i < words[b]) { pf_red(b, i, words[b]); }");
        keep += red_fn("pf_red0", "pf0") + red_fn("pf_red1", "pf1") + red_fn("pf_red2", "pf2") + red_fn("pf_red3", "pf3");
        keep += "fn pf_red(b: u32, i: u32, n: u32) {\n    switch (b) {\n        case 0u: { pf_red0(i, n); }\n        case 1u: { pf_red1(i, n); }\n        case 2u: { pf_red2(i, n); }\n        default: { pf_red3(i, n); }\n    }\n}\n";
    } else if (n.rfind("bitlinear_decode", 0) == 0 || n.rfind("gate_up_decode", 0) == 0 || n.rfind("qkv_rope_decode", 0) == 0) {
        replace_all(keep, "var<storage, read> pfw: array<u32>;", "var<storage, read_write> pfw: array<atomic<u32>>;");
        replace_all(keep, "if (i < KPF_WORDS) { acc ^= pfw[i]; }", "if (i < KPF_WORDS) { pfw_red(i, KPF_WORDS); }");
        keep += red_fn("pfw_red", "pfw");
    }
    WgslShader out = in;
    out.source     = keep;
    return out;
}

std::string wgsl_location(const WgslShader & shader, uint64_t line, uint64_t column) {
    std::string file  = std::string(shader.file);
    uint64_t    local = line;
    for (const WgslInclude * inc = shader.includes; inc && inc->file; ++inc) {
        if (line >= inc->first_line) {
            file  = inc->file;
            local = line - inc->first_line + 1;
        }
    }
    return format("%s:%llu:%llu", file.c_str(), static_cast<unsigned long long>(local),
                  static_cast<unsigned long long>(column));
}

std::string PipelineKey::label() const {
    std::string s(shader);
    bool        first = true;
    for (const auto & o : overrides) {
        if (o.name.empty()) continue;
        s += first ? "[" : ",";
        s += format("%.*s=%g", static_cast<int>(o.name.size()), o.name.data(), o.value);
        first = false;
    }
    if (!first) s += "]";
    return s;
}

void PipelineKey::add(std::string_view name, double value) {
    for (auto & o : overrides) {
        if (o.name.empty()) {
            o = {name, value};
            return;
        }
    }
    TERN_ASSERT(false, "pipeline key %s: no slot left for %.*s", label().c_str(), static_cast<int>(name.size()),
                name.data());
}

WgpuHandle<WGPUShaderModule> compile_wgsl(const WgpuContext & ctx, const WgslShader & shader) {
    WGPUShaderSourceWGSL wgsl{};
    wgsl.chain.sType = WGPU_STYPE_SHADER_SOURCE_WGSL;
    wgsl.code        = wgpu_string(shader.source);
    WGPUShaderModuleDescriptor desc{};
    desc.nextInChain = &wgsl.chain;
    desc.label       = wgpu_string(shader.name);
    ctx.push_error_scope();
    WgpuHandle<WGPUShaderModule> module(wgpu().wgpuDeviceCreateShaderModule(ctx.device(), &desc));

    // The compiler's messages carry line and column; the error scope only a summary.
    struct Info {
        bool               done = false;
        std::string        errors;
        const WgslShader * shader = nullptr;
    } info;
    info.shader = &shader;
    WGPUCallbackInfo<WGPUCompilationInfoCallback> cb{};
    cb.mode      = WGPU_CALLBACK_MODE_ALLOW_PROCESS_EVENTS;
    cb.userdata1 = &info;
    cb.callback  = [](uint32_t status, const WGPUCompilationInfo * ci, void * u1, void *) {
        auto * in = static_cast<Info *>(u1);
        if (status == WGPU_STATUS_SUCCESS && ci) {
            for (size_t i = 0; i < ci->messageCount; ++i) {
                const WGPUCompilationMessage & m = ci->messages[i];
                if (m.type != WGPU_COMPILATION_MESSAGE_ERROR) continue;
                if (!in->errors.empty()) in->errors += "\n";
                in->errors += wgsl_location(*in->shader, m.lineNum, m.linePos) + ": " + to_string(m.message);
            }
        }
        in->done = true;
    };
    wgpu().wgpuShaderModuleGetCompilationInfo(module.get(), cb);
    ctx.wait(info.done, "compiling a WGSL shader");
    const std::string scope_error = ctx.pop_error_scope("compiling a WGSL shader");
    if (!info.errors.empty() || !scope_error.empty()) {
        fail(ErrorKind::device,
             format("webgpu: shader '%.*s' does not compile:\n%s", static_cast<int>(shader.name.size()),
                    shader.name.data(), (info.errors.empty() ? scope_error : info.errors).c_str()),
             "the WGSL source is embedded at build time from src/backend/webgpu/shaders/");
    }
    return module;
}

const WgslShader & PipelineCache::variant(std::string_view name) const {
    if (subgroup_variants_) {
        if (const WgslShader * sg = find_wgsl_shader(std::string(name) + "_sg")) return *sg;
    }
    const WgslShader * shader = find_wgsl_shader(name);
    TERN_ASSERT(shader != nullptr, "no embedded shader '%.*s'", static_cast<int>(name.size()), name.data());
    return *shader;
}

WGPUShaderModule PipelineCache::module(std::string_view requested) {
    const WgslShader & shader = variant(requested);
    const std::string_view name = shader.name;
    if (auto it = modules_.find(name); it != modules_.end()) return it->second.get();
    std::string                  red_keep;
    WgpuHandle<WGPUShaderModule> module =
        compile_wgsl(ctx_, pf_red_mode() != 0 ? red_variant(shader, red_keep) : shader);
    WGPUShaderModule             raw    = module.get();
    modules_.emplace(std::string(name), std::move(module));
    return raw;
}

WGPUBindGroupLayout PipelineCache::layout(std::string_view signature) {
    if (auto it = layouts_.find(signature); it != layouts_.end()) return it->second.group.get();
    std::vector<WGPUBindGroupLayoutEntry> entries(signature.size());
    for (size_t i = 0; i < signature.size(); ++i) {
        WGPUBindGroupLayoutEntry & e = entries[i];
        e              = {};
        e.binding      = static_cast<uint32_t>(i);
        e.visibility   = WGPU_SHADER_STAGE_COMPUTE;
        switch (signature[i]) {
            case 'r': e.buffer.type = WGPU_BUFFER_BINDING_READ_ONLY_STORAGE; break;
            case 'w': e.buffer.type = WGPU_BUFFER_BINDING_STORAGE; break;
            case 'u':
                e.buffer.type             = WGPU_BUFFER_BINDING_UNIFORM;
                e.buffer.hasDynamicOffset = 1;
                break;
            default: TERN_ASSERT(false, "bad binding signature letter '%c'", signature[i]);
        }
    }
    WGPUBindGroupLayoutDescriptor desc{};
    desc.label      = wgpu_string(signature);
    desc.entryCount = entries.size();
    desc.entries    = entries.data();
    Layout l;
    ctx_.push_error_scope();
    l.group = WgpuHandle<WGPUBindGroupLayout>(wgpu().wgpuDeviceCreateBindGroupLayout(ctx_.device(), &desc));
    WGPUBindGroupLayout          groups[1] = {l.group.get()};
    WGPUPipelineLayoutDescriptor pdesc{};
    pdesc.label                = wgpu_string(signature);
    pdesc.bindGroupLayoutCount = 1;
    pdesc.bindGroupLayouts     = groups;
    l.pipeline = WgpuHandle<WGPUPipelineLayout>(wgpu().wgpuDeviceCreatePipelineLayout(ctx_.device(), &pdesc));
    if (std::string err = ctx_.pop_error_scope("creating a bind group layout"); !err.empty()) {
        fail(ErrorKind::device, format("webgpu: bind group layout '%.*s': %s", static_cast<int>(signature.size()),
                                       signature.data(), err.c_str()));
    }
    WGPUBindGroupLayout raw = l.group.get();
    layouts_.emplace(std::string(signature), std::move(l));
    return raw;
}

WGPUComputePipeline PipelineCache::pipeline(const PipelineKey & key) {
    if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second.get();
    WGPUShaderModule shader = module(key.shader);
    layout(key.signature);
    const Layout & l = layouts_.find(key.signature)->second;

    std::vector<WGPUConstantEntry> constants;
    for (const auto & o : key.overrides) {
        if (o.name.empty()) continue;
        constants.push_back({nullptr, wgpu_string(o.name), o.value});
    }
    const std::string_view source = variant(key.shader).source;
    for (const auto & [name, value] : constants_) {
        bool in_key = false;
        for (const auto & o : key.overrides) in_key = in_key || o.name == name;
        if (!in_key && source.find("override " + name + ":") != std::string_view::npos) {
            constants.push_back({nullptr, wgpu_string(name), value});
        }
    }
    const std::string             label = key.label();
    WGPUComputePipelineDescriptor desc{};
    desc.label                 = wgpu_string(label);
    desc.layout                = l.pipeline.get();
    desc.compute.module        = shader;
    desc.compute.entryPoint    = wgpu_string("main");
    desc.compute.constantCount = constants.size();
    desc.compute.constants     = constants.data();
    ctx_.push_error_scope();
    WgpuHandle<WGPUComputePipeline> p(wgpu().wgpuDeviceCreateComputePipeline(ctx_.device(), &desc));
    if (std::string err = ctx_.pop_error_scope("creating a compute pipeline"); !err.empty()) {
        fail(ErrorKind::device, format("webgpu: pipeline '%s' (bindings '%.*s'): %s", label.c_str(),
                                       static_cast<int>(key.signature.size()), key.signature.data(), err.c_str()));
    }
    WGPUComputePipeline raw = p.get();
    pipelines_.emplace(key, std::move(p));
    return raw;
}

}  // namespace tern
