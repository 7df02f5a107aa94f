// Shader modules, layouts and pipelines, created once inside error scopes (pipeline_cache.h).
#include "backend/webgpu/pipeline_cache.h"

#include "core/error.h"
#include "core/log.h"

#include <chrono>
#include <vector>

namespace tern {

namespace {
std::vector<std::span<const WgslShader>> & added_tables() {
    static std::vector<std::span<const WgslShader>> tables;
    return tables;
}
}  // namespace

void add_wgsl_shaders(std::span<const WgslShader> table) { added_tables().push_back(table); }

const WgslShader * find_wgsl_shader(std::string_view name) {
    for (const WgslShader & s : wgsl_shaders()) {
        if (s.name == name) return &s;
    }
    for (const auto & table : added_tables()) {
        for (const WgslShader & s : table) {
            if (s.name == name) return &s;
        }
    }
    return nullptr;
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

size_t PipelineKeyHash::operator()(const PipelineKey & key) const {
    const std::hash<std::string_view> text;
    size_t                            h = text(key.shader) * 31 + text(key.signature);
    for (const auto & o : key.overrides) {
        if (o.name.empty()) continue;
        h = h * 1000003 ^ text(o.name);
        h = h * 1000003 ^ std::hash<double>{}(o.value);
    }
    return h;
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
    const auto                   t0     = std::chrono::steady_clock::now();
    WgpuHandle<WGPUShaderModule> module = compile_wgsl(ctx_, shader);
    WGPUShaderModule             raw    = module.get();
    TERN_LOG_DEBUG("webgpu: shader %.*s compiled in %.1f ms", static_cast<int>(name.size()), name.data(),
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
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

namespace {
double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

PipelineCache::~PipelineCache() {
    for (auto & [key, p] : pending_) {
        try {
            if (!p->done) ctx_.wait(p->done, "a pipeline built ahead");
        } catch (...) {  // (a lost or hung device) its callback may still come: leave the record to it
            p.release();
            continue;
        }
        if (p->pipeline) wgpu().wgpuComputePipelineRelease(p->pipeline);
    }
}

std::vector<WGPUConstantEntry> PipelineCache::constants(const PipelineKey & key) const {
    std::vector<WGPUConstantEntry> out;
    for (const auto & o : key.overrides) {
        if (o.name.empty()) continue;
        out.push_back({nullptr, wgpu_string(o.name), o.value});
    }
    const std::string_view source = variant(key.shader).source;
    for (const auto & [name, value] : constants_) {
        bool in_key = false;
        for (const auto & o : key.overrides) in_key = in_key || o.name == name;
        if (!in_key && source.find("override " + name + ":") != std::string_view::npos) {
            out.push_back({nullptr, wgpu_string(name), value});
        }
    }
    return out;
}

void PipelineCache::describe(const PipelineKey & key, WGPUShaderModule shader, Described & d) const {
    d.label                      = key.label();
    d.consts                     = constants(key);
    d.desc                       = {};
    d.desc.label                 = wgpu_string(d.label);
    d.desc.layout                = layouts_.find(key.signature)->second.pipeline.get();
    d.desc.compute.module        = shader;
    d.desc.compute.entryPoint    = wgpu_string("main");
    d.desc.compute.constantCount = d.consts.size();
    d.desc.compute.constants     = d.consts.data();
}

WGPUComputePipeline PipelineCache::keep(const PipelineKey & key, WgpuHandle<WGPUComputePipeline> p) {
    WGPUComputePipeline raw = p.get();
    pipelines_.emplace(key, std::move(p));
    used_.push_back(key);
    return raw;
}

size_t PipelineCache::prebuild(const std::vector<PipelineKey> & keys) {
    const auto create_async = wgpu().wgpuDeviceCreateComputePipelineAsync;
    if (!create_async) return 0;
    size_t started = 0;
    for (const PipelineKey & key : keys) {
        if (pipelines_.count(key) || pending_.count(key)) continue;
        // Every override the key sets must be one its shader declares: with skip_validation Dawn does
        // not check, and an unknown name aborts the process.
        const std::string_view source   = variant(key.shader).source;
        bool                   declared = true;
        for (const auto & o : key.overrides) {
            if (!o.name.empty() && source.find("override " + std::string(o.name) + ":") == std::string_view::npos) {
                declared = false;
            }
        }
        if (!declared) continue;
        WGPUShaderModule shader = nullptr;
        try {
            shader = module(key.shader);
            layout(key.signature);
        } catch (const Error &) {
            continue;  // pipeline() will say why, if the key is ever asked for
        }
        Described d;
        describe(key, shader, d);
        Pending * p = pending_.emplace(key, std::make_unique<Pending>()).first->second.get();
        WGPUCallbackInfo<WGPUCreateComputePipelineAsyncCallback> cb{};
        p->t0_ms     = now_ms();
        cb.mode      = WGPU_CALLBACK_MODE_ALLOW_PROCESS_EVENTS;
        cb.userdata1 = p;
        cb.callback  = [](uint32_t status, WGPUComputePipeline pipeline, WGPUStringView, void * u1, void *) {
            auto * q = static_cast<Pending *>(u1);
            q->ok    = status == WGPU_STATUS_SUCCESS && pipeline != nullptr;
            if (q->ok) {
                q->pipeline = pipeline;
            } else if (pipeline) {
                wgpu().wgpuComputePipelineRelease(pipeline);
            }
            q->ms   = now_ms() - q->t0_ms;
            q->done = true;
        };
        create_async(ctx_.device(), &d.desc, cb);
        ++started;
    }
    return started;
}

WGPUComputePipeline PipelineCache::pipeline(const PipelineKey & key) {
    if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second.get();
    if (auto it = pending_.find(key); it != pending_.end()) {
        const double t0 = now_ms();
        std::unique_ptr<Pending> p = std::move(it->second);
        pending_.erase(it);
        try {
            ctx_.wait(p->done, "a compute pipeline built ahead");
        } catch (...) {
            p.release();  // its callback may still come: the record stays for it
            throw;
        }
        if (p->ok) {
            ++n_prebuilt_;
            TERN_LOG_DEBUG("webgpu: pipeline %s built ahead (its callback %.1f ms after the start), waited %.1f ms "
                           "(%zu pipelines)",
                           key.label().c_str(), p->ms, now_ms() - t0, pipelines_.size() + 1);
            return keep(key, WgpuHandle<WGPUComputePipeline>(p->pipeline));
        }
        // Failed: built again below, inside an error scope that names what is wrong.
    }
    WGPUShaderModule shader = module(key.shader);
    layout(key.signature);
    Described d;
    describe(key, shader, d);
    const std::string & label = d.label;
    const auto          t0    = std::chrono::steady_clock::now();
    ctx_.push_error_scope();
    WgpuHandle<WGPUComputePipeline> p(wgpu().wgpuDeviceCreateComputePipeline(ctx_.device(), &d.desc));
    if (std::string err = ctx_.pop_error_scope("creating a compute pipeline"); !err.empty()) {
        fail(ErrorKind::device, format("webgpu: pipeline '%s' (bindings '%.*s'): %s", label.c_str(),
                                       static_cast<int>(key.signature.size()), key.signature.data(), err.c_str()));
    }
    WGPUComputePipeline raw = keep(key, std::move(p));
    TERN_LOG_DEBUG("webgpu: pipeline %s compiled in %.1f ms (%zu pipelines)", label.c_str(),
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                   pipelines_.size());
    return raw;
}

}  // namespace tern
