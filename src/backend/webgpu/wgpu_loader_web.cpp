// The browser build's webgpu.h (replaces wgpu_loader.cpp there; src/backend/CMakeLists.txt picks
// it): every entry point of webgpu_api.h but a compute pass's setPipeline / setBindGroup /
// dispatchWorkgroups (a command list here, replayed by one import per pass) is a function of
// web/webgpu-library.js, tern's own small
// implementation of that subset on navigator.gpu, linked in as an import named tern_wgpu... (not
// wgpu..., which Emscripten's own, older WebGPU binding claims with other signatures). Nothing is loaded at run
// time. The feature ids are v1.0's. tern_wgpuInstanceProcessEvents is the one import that may suspend
// the WebAssembly stack (JSPI, set up by web/tern-engine.js) so that waits yield to the browser.
// tern_wgpu_layout() tells the library the offsets of the structs it reads and writes, so they
// come from this compiler rather than from hand-counted constants.
#include "backend/webgpu/wgpu_loader.h"

#include "backend/webgpu/wgpu_command_list.h"
#include "core/error.h"

#include <cstddef>
#include <cstdint>
#include <string>

// The imports take callback infos by value, which wasm32 passes by pointer. Clang gives an import its
// WebAssembly signature only if the parameter types are complete where it is declared; a
// WGPUCallbackInfo<...> specialization that nothing instantiated would leave the import without
// parameters (and every call through it a signature mismatch). These instantiate all of them.
static_assert(sizeof(WGPUCallbackInfo<WGPURequestAdapterCallback>) == sizeof(WGPUCallbackInfo<WGPUBufferMapCallback>));
static_assert(sizeof(WGPUCallbackInfo<WGPURequestDeviceCallback>) == sizeof(WGPUCallbackInfo<WGPUBufferMapCallback>));
static_assert(sizeof(WGPUCallbackInfo<WGPUPopErrorScopeCallback>) == sizeof(WGPUCallbackInfo<WGPUBufferMapCallback>));
static_assert(sizeof(WGPUCallbackInfo<WGPUQueueWorkDoneCallback>) == sizeof(WGPUCallbackInfo<WGPUBufferMapCallback>));
static_assert(sizeof(WGPUCallbackInfo<WGPUCompilationInfoCallback>) == sizeof(WGPUCallbackInfo<WGPUBufferMapCallback>));
static_assert(sizeof(WGPUCallbackInfo<WGPUDeviceLostCallback>) == sizeof(WGPUCallbackInfo<WGPUBufferMapCallback>));

extern "C" {
#define TERN_WGPU_DECLARE_IMPORT(name, ret, params) ret tern_##name params;
TERN_WGPU_PROCS(TERN_WGPU_DECLARE_IMPORT)
#undef TERN_WGPU_DECLARE_IMPORT
// Runs `count` words of a pass's command list (wgpu_command_list.h) on the pass: the one import a
// pass's commands cost.
void tern_wgpuComputePassEncoderReplay(WGPUComputePassEncoder pass, const uint32_t * words, size_t count);
}

namespace {

// A compute pass's setPipeline / setBindGroup / dispatchWorkgroups go into this command list, and
// into JavaScript in one call per pass (wgpu_command_list.h; H200, dawn.node, 2026-11-28: the host's
// 0.91 vs 1.03-1.09 ms per 2B4T step with one import per call).
tern::PassCommandList & command_list() {
    static tern::PassCommandList list([](uint32_t pass, const uint32_t * words, size_t count) {
        tern_wgpuComputePassEncoderReplay(reinterpret_cast<WGPUComputePassEncoder>(static_cast<uintptr_t>(pass)), words, count);
    });
    return list;
}

uint32_t id_of(const void * handle) { return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(handle)); }

// The calls that may change what pending words name (the glue reuses a released object's id) or
// end their pass: the words go out first, then the import.
void list_end(WGPUComputePassEncoder pass) {
    command_list().closing(id_of(pass));
    ::tern_wgpuComputePassEncoderEnd(pass);
}

void list_release_pass(WGPUComputePassEncoder pass) {
    command_list().closing(id_of(pass));  // (released without its end: the words still go out, and Dawn reports it)
    ::tern_wgpuComputePassEncoderRelease(pass);
}

void list_release_pipeline(WGPUComputePipeline pipeline) {
    command_list().releasing_pipeline(id_of(pipeline));
    ::tern_wgpuComputePipelineRelease(pipeline);
}

void list_release_bind_group(WGPUBindGroup group) {
    command_list().releasing_bind_group(id_of(group));
    ::tern_wgpuBindGroupRelease(group);
}

WGPUComputePassEncoder list_begin(WGPUCommandEncoder encoder, const WGPUComputePassDescriptor * desc) {
    command_list().flush();
    WGPUComputePassEncoder pass = ::tern_wgpuCommandEncoderBeginComputePass(encoder, desc);
    command_list().closing(id_of(pass));  // (the new pass may have a freed pass's id: no state carries over)
    return pass;
}

}  // namespace

// The pass commands are defined here, so they are no imports (web/webgpu-library.js has none of them).
extern "C" {
void tern_wgpuComputePassEncoderSetPipeline(WGPUComputePassEncoder pass, WGPUComputePipeline pipeline) {
    command_list().set_pipeline(id_of(pass), id_of(pipeline));
}

void tern_wgpuComputePassEncoderSetBindGroup(WGPUComputePassEncoder pass, uint32_t index, WGPUBindGroup group, size_t n,
                                             const uint32_t * offsets) {
    command_list().set_bind_group(id_of(pass), index, id_of(group), n, offsets);
}

void tern_wgpuComputePassEncoderDispatchWorkgroups(WGPUComputePassEncoder pass, uint32_t x, uint32_t y, uint32_t z) {
    command_list().dispatch(id_of(pass), x, y, z);
}
}

namespace tern {

const WgpuLibrary & load_wgpu_library() {
    static const WgpuLibrary library = [] {
        static WgpuProcs procs;
#define TERN_WGPU_ASSIGN(name, ret, params) procs.name = &::tern_##name;
        TERN_WGPU_PROCS(TERN_WGPU_ASSIGN)
#undef TERN_WGPU_ASSIGN
        procs.wgpuCommandEncoderBeginComputePass = &list_begin;
        procs.wgpuComputePassEncoderEnd          = &list_end;
        procs.wgpuComputePassEncoderRelease      = &list_release_pass;
        procs.wgpuComputePipelineRelease         = &list_release_pipeline;
        procs.wgpuBindGroupRelease               = &list_release_bind_group;
        WgpuLibrary l;
        l.path        = "navigator.gpu (web/webgpu-library.js)";
        l.procs       = &procs;
        l.feature_ids = k_feature_ids_v1;
        return l;
    }();
    return library;
}

const WgpuProcs & wgpu() { return *load_wgpu_library().procs; }

std::unordered_map<std::string, void *> elf_function_symbols(const std::string &, void *, const std::vector<std::string> &) {
    return {};
}

std::vector<std::string> wgpu_library_candidates() { return {load_wgpu_library().path}; }

}  // namespace tern

// "name=offset,..." for every struct field web/webgpu-library.js touches (wasm32 layouts).
extern "C" __attribute__((used, visibility("default"))) const char * tern_wgpu_layout() {
    static const std::string table = [] {
        std::string s;
        const auto add = [&s](const char * name, size_t offset) {
            s += name;
            s += '=';
            s += std::to_string(offset);
            s += ',';
        };
#define F(type, field) add(#type "." #field, offsetof(type, field))
        F(WGPUAdapterInfo, vendor); F(WGPUAdapterInfo, architecture); F(WGPUAdapterInfo, device);
        F(WGPUAdapterInfo, description); F(WGPUAdapterInfo, backendType); F(WGPUAdapterInfo, adapterType);
        F(WGPUAdapterInfo, vendorID); F(WGPUAdapterInfo, deviceID); F(WGPUAdapterInfo, subgroupMinSize);
        F(WGPUAdapterInfo, subgroupMaxSize);
        F(WGPULimits, maxTextureDimension1D); F(WGPULimits, maxTextureDimension2D); F(WGPULimits, maxTextureDimension3D);
        F(WGPULimits, maxTextureArrayLayers); F(WGPULimits, maxBindGroups); F(WGPULimits, maxBindGroupsPlusVertexBuffers);
        F(WGPULimits, maxBindingsPerBindGroup); F(WGPULimits, maxDynamicUniformBuffersPerPipelineLayout);
        F(WGPULimits, maxDynamicStorageBuffersPerPipelineLayout); F(WGPULimits, maxSampledTexturesPerShaderStage);
        F(WGPULimits, maxSamplersPerShaderStage); F(WGPULimits, maxStorageBuffersPerShaderStage);
        F(WGPULimits, maxStorageTexturesPerShaderStage); F(WGPULimits, maxUniformBuffersPerShaderStage);
        F(WGPULimits, maxUniformBufferBindingSize); F(WGPULimits, maxStorageBufferBindingSize);
        F(WGPULimits, minUniformBufferOffsetAlignment); F(WGPULimits, minStorageBufferOffsetAlignment);
        F(WGPULimits, maxVertexBuffers); F(WGPULimits, maxBufferSize); F(WGPULimits, maxVertexAttributes);
        F(WGPULimits, maxVertexBufferArrayStride); F(WGPULimits, maxInterStageShaderVariables);
        F(WGPULimits, maxColorAttachments); F(WGPULimits, maxColorAttachmentBytesPerSample);
        F(WGPULimits, maxComputeWorkgroupStorageSize); F(WGPULimits, maxComputeInvocationsPerWorkgroup);
        F(WGPULimits, maxComputeWorkgroupSizeX); F(WGPULimits, maxComputeWorkgroupSizeY);
        F(WGPULimits, maxComputeWorkgroupSizeZ); F(WGPULimits, maxComputeWorkgroupsPerDimension);
        F(WGPUSupportedFeatures, featureCount); F(WGPUSupportedFeatures, features);
        F(WGPUSupportedWGSLLanguageFeatures, featureCount); F(WGPUSupportedWGSLLanguageFeatures, features);
        F(WGPUDeviceDescriptor, requiredFeatureCount); F(WGPUDeviceDescriptor, requiredFeatures);
        F(WGPUDeviceDescriptor, requiredLimits); F(WGPUDeviceDescriptor, deviceLostCallbackInfo);
        F(WGPUDeviceDescriptor, uncapturedErrorCallbackInfo);
        F(WGPUUncapturedErrorCallbackInfo, callback); F(WGPUUncapturedErrorCallbackInfo, userdata1);
        F(WGPUUncapturedErrorCallbackInfo, userdata2);
        using CallbackInfo = WGPUCallbackInfo<WGPUBufferMapCallback>;  // every callback info has this layout
        F(CallbackInfo, callback); F(CallbackInfo, userdata1); F(CallbackInfo, userdata2);
        F(WGPUBufferDescriptor, label); F(WGPUBufferDescriptor, usage); F(WGPUBufferDescriptor, size);
        F(WGPUBufferDescriptor, mappedAtCreation);
        F(WGPUShaderModuleDescriptor, nextInChain); F(WGPUShaderModuleDescriptor, label);
        F(WGPUChainedStruct, next); F(WGPUChainedStruct, sType); F(WGPUShaderSourceWGSL, code);
        F(WGPUCompilationMessage, message); F(WGPUCompilationMessage, type); F(WGPUCompilationMessage, lineNum);
        F(WGPUCompilationMessage, linePos); F(WGPUCompilationMessage, offset); F(WGPUCompilationMessage, length);
        F(WGPUCompilationInfo, messageCount); F(WGPUCompilationInfo, messages);
        F(WGPUConstantEntry, key); F(WGPUConstantEntry, value);
        F(WGPUComputePipelineDescriptor, label); F(WGPUComputePipelineDescriptor, layout);
        F(WGPUComputePipelineDescriptor, compute); F(WGPUComputeState, module); F(WGPUComputeState, entryPoint);
        F(WGPUComputeState, constantCount); F(WGPUComputeState, constants);
        F(WGPUBindGroupLayoutEntry, binding); F(WGPUBindGroupLayoutEntry, visibility); F(WGPUBindGroupLayoutEntry, buffer);
        F(WGPUBufferBindingLayout, type); F(WGPUBufferBindingLayout, hasDynamicOffset);
        F(WGPUBufferBindingLayout, minBindingSize);
        F(WGPUBindGroupLayoutDescriptor, label); F(WGPUBindGroupLayoutDescriptor, entryCount);
        F(WGPUBindGroupLayoutDescriptor, entries);
        F(WGPUPipelineLayoutDescriptor, label); F(WGPUPipelineLayoutDescriptor, bindGroupLayoutCount);
        F(WGPUPipelineLayoutDescriptor, bindGroupLayouts);
        F(WGPUBindGroupEntry, binding); F(WGPUBindGroupEntry, buffer); F(WGPUBindGroupEntry, offset);
        F(WGPUBindGroupEntry, size);
        F(WGPUBindGroupDescriptor, label); F(WGPUBindGroupDescriptor, layout); F(WGPUBindGroupDescriptor, entryCount);
        F(WGPUBindGroupDescriptor, entries);
        F(WGPUQuerySetDescriptor, type); F(WGPUQuerySetDescriptor, count);
        F(WGPUPassTimestampWrites, querySet); F(WGPUPassTimestampWrites, beginningOfPassWriteIndex);
        F(WGPUPassTimestampWrites, endOfPassWriteIndex);
        F(WGPUComputePassDescriptor, label); F(WGPUComputePassDescriptor, timestampWrites);
#undef F
        add("sizeof.WGPUBindGroupLayoutEntry", sizeof(WGPUBindGroupLayoutEntry));
        add("sizeof.WGPUBindGroupEntry", sizeof(WGPUBindGroupEntry));
        add("sizeof.WGPUConstantEntry", sizeof(WGPUConstantEntry));
        add("sizeof.WGPUCompilationMessage", sizeof(WGPUCompilationMessage));
        add("sizeof.WGPUCompilationInfo", sizeof(WGPUCompilationInfo));
        return s;
    }();
    return table.c_str();
}
