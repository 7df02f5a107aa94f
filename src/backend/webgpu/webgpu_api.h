// tern's own declarations of the subset of the standard `webgpu.h` C API (webgpu-native v1.0: string
// views, callback-info structs, futures) that the WebGPU backend uses. No header ships with the
// library: these follow the public standard, and the layouts were checked against Dawn (npm
// bun-webgpu-linux-x64 0.1.7) by running kernels end to end (docs: ../shared/docs/WEBGPU.md).
//
// Functions are not linked: wgpu_loader.cpp resolves every entry of TERN_WGPU_PROCS with dlsym into
// a WgpuProcs table (the browser build's wgpu_loader_web.cpp fills it with web/webgpu-library.js's
// functions instead). Structs the library writes into (adapter info, limits) are followed by spare
// bytes, so a newer library that appends fields cannot write past them.
#pragma once

#include <cstddef>
#include <cstdint>

// Plain structs and function-pointer types only (no C++ linkage matters: nothing here is linked).

// ---------------------------------------------------------------- handles
typedef struct WGPUAdapterImpl *            WGPUAdapter;
typedef struct WGPUBindGroupImpl *          WGPUBindGroup;
typedef struct WGPUBindGroupLayoutImpl *    WGPUBindGroupLayout;
typedef struct WGPUBufferImpl *             WGPUBuffer;
typedef struct WGPUCommandBufferImpl *      WGPUCommandBuffer;
typedef struct WGPUCommandEncoderImpl *     WGPUCommandEncoder;
typedef struct WGPUComputePassEncoderImpl * WGPUComputePassEncoder;
typedef struct WGPUComputePipelineImpl *    WGPUComputePipeline;
typedef struct WGPUDeviceImpl *             WGPUDevice;
typedef struct WGPUInstanceImpl *           WGPUInstance;
typedef struct WGPUPipelineLayoutImpl *     WGPUPipelineLayout;
typedef struct WGPUQuerySetImpl *           WGPUQuerySet;
typedef struct WGPUQueueImpl *              WGPUQueue;
typedef struct WGPUShaderModuleImpl *       WGPUShaderModule;
typedef struct WGPUSurfaceImpl *            WGPUSurface;

typedef uint32_t WGPUBool;
typedef uint64_t WGPUFlags;

// ---------------------------------------------------------------- enums (v1.0 values)
enum : uint32_t {
    WGPU_STYPE_SHADER_SOURCE_WGSL = 0x2,
    WGPU_STYPE_DAWN_TOGGLES_DESCRIPTOR = 0x5000A,  // Dawn only; other implementations ignore or reject it
    WGPU_STYPE_DAWN_CACHE_DEVICE_DESCRIPTOR = 0x50007,  // Dawn only (dawn.json "s type", unchanged 2026-02..08)

    WGPU_CALLBACK_MODE_WAIT_ANY_ONLY        = 0x1,
    WGPU_CALLBACK_MODE_ALLOW_PROCESS_EVENTS = 0x2,
    WGPU_CALLBACK_MODE_ALLOW_SPONTANEOUS    = 0x3,

    WGPU_STATUS_SUCCESS = 0x1,  // RequestAdapter / RequestDevice / MapAsync / PopErrorScope / GetLimits

    WGPU_FEATURE_LEVEL_CORE              = 0x2,
    WGPU_POWER_PREFERENCE_HIGH_PERFORMANCE = 0x2,

    WGPU_BACKEND_UNDEFINED = 0x0,
    WGPU_BACKEND_NULL      = 0x1,
    WGPU_BACKEND_WEBGPU    = 0x2,
    WGPU_BACKEND_D3D11     = 0x3,
    WGPU_BACKEND_D3D12     = 0x4,
    WGPU_BACKEND_METAL     = 0x5,
    WGPU_BACKEND_VULKAN    = 0x6,
    WGPU_BACKEND_OPENGL    = 0x7,
    WGPU_BACKEND_OPENGLES  = 0x8,

    WGPU_ADAPTER_TYPE_DISCRETE_GPU   = 0x1,
    WGPU_ADAPTER_TYPE_INTEGRATED_GPU = 0x2,
    WGPU_ADAPTER_TYPE_CPU            = 0x3,
    WGPU_ADAPTER_TYPE_UNKNOWN        = 0x4,

    // (Feature ids: WgpuFeatureIds below; they differ between Dawn generations.)

    WGPU_WGSL_FEATURE_PACKED_4X8_INTEGER_DOT_PRODUCT = 0x2,

    WGPU_ERROR_FILTER_VALIDATION    = 0x1,
    WGPU_ERROR_FILTER_OUT_OF_MEMORY = 0x2,
    WGPU_ERROR_FILTER_INTERNAL      = 0x3,

    WGPU_ERROR_TYPE_NO_ERROR      = 0x1,
    WGPU_ERROR_TYPE_VALIDATION    = 0x2,
    WGPU_ERROR_TYPE_OUT_OF_MEMORY = 0x3,
    WGPU_ERROR_TYPE_INTERNAL      = 0x4,
    WGPU_ERROR_TYPE_UNKNOWN       = 0x5,

    WGPU_DEVICE_LOST_REASON_DESTROYED          = 0x2,
    WGPU_DEVICE_LOST_REASON_CALLBACK_CANCELLED = 0x3,

    WGPU_COMPILATION_MESSAGE_ERROR = 0x1,

    WGPU_BUFFER_BINDING_UNIFORM           = 0x2,
    WGPU_BUFFER_BINDING_STORAGE           = 0x3,
    WGPU_BUFFER_BINDING_READ_ONLY_STORAGE = 0x4,
};

// Buffer usage, map mode and shader stage flags (64-bit).
constexpr WGPUFlags WGPU_BUFFER_USAGE_MAP_READ  = 0x1;
constexpr WGPUFlags WGPU_BUFFER_USAGE_MAP_WRITE = 0x2;
constexpr WGPUFlags WGPU_BUFFER_USAGE_COPY_SRC  = 0x4;
constexpr WGPUFlags WGPU_BUFFER_USAGE_COPY_DST  = 0x8;
constexpr WGPUFlags WGPU_BUFFER_USAGE_UNIFORM   = 0x40;
constexpr WGPUFlags WGPU_BUFFER_USAGE_STORAGE   = 0x80;
constexpr WGPUFlags WGPU_BUFFER_USAGE_QUERY_RESOLVE = 0x200;
constexpr WGPUFlags WGPU_MAP_MODE_READ          = 0x1;
constexpr WGPUFlags WGPU_SHADER_STAGE_COMPUTE   = 0x4;
constexpr uint64_t  WGPU_WHOLE_SIZE             = UINT64_MAX;
constexpr size_t    WGPU_STRLEN                 = SIZE_MAX;

// ---------------------------------------------------------------- plain structs
struct WGPUStringView {
    const char * data;
    size_t       length;  // WGPU_STRLEN: null-terminated
};

struct WGPUChainedStruct {
    const WGPUChainedStruct * next;
    uint32_t                  sType;
};

struct WGPUFuture {
    uint64_t id;
};

// ---------------------------------------------------------------- callbacks
typedef void (*WGPURequestAdapterCallback)(uint32_t status, WGPUAdapter adapter, WGPUStringView message, void * userdata1,
                                           void * userdata2);
typedef void (*WGPURequestDeviceCallback)(uint32_t status, WGPUDevice device, WGPUStringView message, void * userdata1,
                                          void * userdata2);
typedef void (*WGPUBufferMapCallback)(uint32_t status, WGPUStringView message, void * userdata1, void * userdata2);
typedef void (*WGPUPopErrorScopeCallback)(uint32_t status, uint32_t error_type, WGPUStringView message, void * userdata1,
                                          void * userdata2);
typedef void (*WGPUQueueWorkDoneCallback)(uint32_t status, WGPUStringView message, void * userdata1, void * userdata2);
typedef void (*WGPUDeviceLostCallback)(const WGPUDevice * device, uint32_t reason, WGPUStringView message,
                                       void * userdata1, void * userdata2);
typedef void (*WGPUUncapturedErrorCallback)(const WGPUDevice * device, uint32_t error_type, WGPUStringView message,
                                            void * userdata1, void * userdata2);
typedef void (*WGPUCreateComputePipelineAsyncCallback)(uint32_t status, WGPUComputePipeline pipeline,
                                                       WGPUStringView message, void * userdata1, void * userdata2);
struct WGPUCompilationInfo;
typedef void (*WGPUCompilationInfoCallback)(uint32_t status, const WGPUCompilationInfo * info, void * userdata1,
                                            void * userdata2);

// { nextInChain; mode; callback; userdata1; userdata2 }: the shape of every future-returning call's info.
template <typename Callback>
struct WGPUCallbackInfo {
    const WGPUChainedStruct * nextInChain;
    uint32_t                  mode;
    Callback                  callback;
    void *                    userdata1;
    void *                    userdata2;
};

struct WGPUUncapturedErrorCallbackInfo {  // no mode: it may be called at any time
    const WGPUChainedStruct *   nextInChain;
    WGPUUncapturedErrorCallback callback;
    void *                      userdata1;
    void *                      userdata2;
};

// ---------------------------------------------------------------- descriptors
struct WGPURequestAdapterOptions {
    const WGPUChainedStruct * nextInChain;
    uint32_t                  featureLevel;
    uint32_t                  powerPreference;
    WGPUBool                  forceFallbackAdapter;
    uint32_t                  backendType;
    WGPUSurface               compatibleSurface;
};

struct WGPUAdapterInfo {
    const WGPUChainedStruct * nextInChain;
    WGPUStringView            vendor;
    WGPUStringView            architecture;
    WGPUStringView            device;
    WGPUStringView            description;
    uint32_t                  backendType;
    uint32_t                  adapterType;
    uint32_t                  vendorID;
    uint32_t                  deviceID;
    uint32_t                  subgroupMinSize;
    uint32_t                  subgroupMaxSize;
    uint8_t                   spare[64];  // room for fields a newer library appends
};

// v1.0 field order. A library may append fields (e.g. maxImmediateSize): the device code fills this
// struct from wgpuAdapterGetLimits and edits it, so appended fields keep the adapter's values.
struct WGPULimits {
    const WGPUChainedStruct * nextInChain;
    uint32_t maxTextureDimension1D;
    uint32_t maxTextureDimension2D;
    uint32_t maxTextureDimension3D;
    uint32_t maxTextureArrayLayers;
    uint32_t maxBindGroups;
    uint32_t maxBindGroupsPlusVertexBuffers;
    uint32_t maxBindingsPerBindGroup;
    uint32_t maxDynamicUniformBuffersPerPipelineLayout;
    uint32_t maxDynamicStorageBuffersPerPipelineLayout;
    uint32_t maxSampledTexturesPerShaderStage;
    uint32_t maxSamplersPerShaderStage;
    uint32_t maxStorageBuffersPerShaderStage;
    uint32_t maxStorageTexturesPerShaderStage;
    uint32_t maxUniformBuffersPerShaderStage;
    uint64_t maxUniformBufferBindingSize;
    uint64_t maxStorageBufferBindingSize;
    uint32_t minUniformBufferOffsetAlignment;
    uint32_t minStorageBufferOffsetAlignment;
    uint32_t maxVertexBuffers;
    uint64_t maxBufferSize;
    uint32_t maxVertexAttributes;
    uint32_t maxVertexBufferArrayStride;
    uint32_t maxInterStageShaderVariables;
    uint32_t maxColorAttachments;
    uint32_t maxColorAttachmentBytesPerSample;
    uint32_t maxComputeWorkgroupStorageSize;
    uint32_t maxComputeInvocationsPerWorkgroup;
    uint32_t maxComputeWorkgroupSizeX;
    uint32_t maxComputeWorkgroupSizeY;
    uint32_t maxComputeWorkgroupSizeZ;
    uint32_t maxComputeWorkgroupsPerDimension;
    uint32_t spare[16];  // room for fields a newer library appends
};

struct WGPUSupportedFeatures {
    size_t           featureCount;
    const uint32_t * features;
};

struct WGPUSupportedWGSLLanguageFeatures {
    size_t           featureCount;
    const uint32_t * features;
};

struct WGPUQueueDescriptor {
    const WGPUChainedStruct * nextInChain;
    WGPUStringView            label;
};

struct WGPUDeviceDescriptor {
    const WGPUChainedStruct *                        nextInChain;
    WGPUStringView                                   label;
    size_t                                           requiredFeatureCount;
    const uint32_t *                                 requiredFeatures;
    const WGPULimits *                               requiredLimits;
    WGPUQueueDescriptor                              defaultQueue;
    WGPUCallbackInfo<WGPUDeviceLostCallback>         deviceLostCallbackInfo;
    WGPUUncapturedErrorCallbackInfo                  uncapturedErrorCallbackInfo;
};

// Dawn's toggles, chained to a WGPUDeviceDescriptor: names as plain C strings.
struct WGPUDawnTogglesDescriptor {
    WGPUChainedStruct     chain;  // sType = WGPU_STYPE_DAWN_TOGGLES_DESCRIPTOR
    size_t                enabledToggleCount;
    const char * const *  enabledToggles;
    size_t                disabledToggleCount;
    const char * const *  disabledToggles;
};

// Dawn's blob cache, chained to a WGPUDeviceDescriptor (dawn.json "dawn cache device descriptor", the
// callback-info form of 2026-06, which dawn.node of npm webgpu 0.6.2 has: its symbols name
// WGPUDawnLoadCacheDataCallbackInfo). Dawn asks load() first with value_size 0 for the size (0: a
// miss), then with a buffer of that size; it may call both from its worker threads.
typedef size_t (*WGPUDawnLoadCacheDataCallback)(size_t key_size, const uint8_t * key, size_t value_size, uint8_t * value,
                                               void * userdata1, void * userdata2);
typedef void (*WGPUDawnStoreCacheDataCallback)(size_t key_size, const uint8_t * key, size_t value_size,
                                              const uint8_t * value, void * userdata1, void * userdata2);
struct WGPUDawnLoadCacheDataCallbackInfo {
    const WGPUChainedStruct *     nextInChain;
    WGPUDawnLoadCacheDataCallback callback;
    void *                        userdata1;
    void *                        userdata2;
};
struct WGPUDawnStoreCacheDataCallbackInfo {
    const WGPUChainedStruct *      nextInChain;
    WGPUDawnStoreCacheDataCallback callback;
    void *                         userdata1;
    void *                         userdata2;
};
struct WGPUDawnCacheDeviceDescriptor {
    WGPUChainedStruct                  chain;  // sType = WGPU_STYPE_DAWN_CACHE_DEVICE_DESCRIPTOR
    WGPUStringView                     isolationKey;
    WGPUDawnLoadCacheDataCallbackInfo  load;
    WGPUDawnStoreCacheDataCallbackInfo store;
};

struct WGPUBufferDescriptor {
    const WGPUChainedStruct * nextInChain;
    WGPUStringView            label;
    WGPUFlags                 usage;
    uint64_t                  size;
    WGPUBool                  mappedAtCreation;
};

struct WGPUShaderSourceWGSL {
    WGPUChainedStruct chain;  // sType = WGPU_STYPE_SHADER_SOURCE_WGSL
    WGPUStringView    code;
};

struct WGPUShaderModuleDescriptor {
    const WGPUChainedStruct * nextInChain;
    WGPUStringView            label;
};

struct WGPUCompilationMessage {
    const WGPUChainedStruct * nextInChain;
    WGPUStringView            message;
    uint32_t                  type;
    uint64_t                  lineNum;  // 1-based
    uint64_t                  linePos;  // 1-based, in UTF-8 code units
    uint64_t                  offset;
    uint64_t                  length;
};

struct WGPUCompilationInfo {
    const WGPUChainedStruct *      nextInChain;
    size_t                         messageCount;
    const WGPUCompilationMessage * messages;
};

struct WGPUConstantEntry {
    const WGPUChainedStruct * nextInChain;
    WGPUStringView            key;
    double                    value;
};

struct WGPUComputeState {
    const WGPUChainedStruct * nextInChain;
    WGPUShaderModule          module;
    WGPUStringView            entryPoint;
    size_t                    constantCount;
    const WGPUConstantEntry * constants;
};

struct WGPUComputePipelineDescriptor {
    const WGPUChainedStruct * nextInChain;
    WGPUStringView            label;
    WGPUPipelineLayout        layout;
    WGPUComputeState          compute;
};

struct WGPUBufferBindingLayout {
    const WGPUChainedStruct * nextInChain;
    uint32_t                  type;
    WGPUBool                  hasDynamicOffset;
    uint64_t                  minBindingSize;
};

struct WGPUSamplerBindingLayout {
    const WGPUChainedStruct * nextInChain;
    uint32_t                  type;
};

struct WGPUTextureBindingLayout {
    const WGPUChainedStruct * nextInChain;
    uint32_t                  sampleType;
    uint32_t                  viewDimension;
    WGPUBool                  multisampled;
};

struct WGPUStorageTextureBindingLayout {
    const WGPUChainedStruct * nextInChain;
    uint32_t                  access;
    uint32_t                  format;
    uint32_t                  viewDimension;
};

struct WGPUBindGroupLayoutEntry {
    const WGPUChainedStruct *       nextInChain;
    uint32_t                        binding;
    WGPUFlags                       visibility;
    uint32_t                        bindingArraySize;
    WGPUBufferBindingLayout         buffer;
    WGPUSamplerBindingLayout        sampler;
    WGPUTextureBindingLayout        texture;
    WGPUStorageTextureBindingLayout storageTexture;
};

struct WGPUBindGroupLayoutDescriptor {
    const WGPUChainedStruct *        nextInChain;
    WGPUStringView                   label;
    size_t                           entryCount;
    const WGPUBindGroupLayoutEntry * entries;
};

struct WGPUPipelineLayoutDescriptor {
    const WGPUChainedStruct *   nextInChain;
    WGPUStringView              label;
    size_t                      bindGroupLayoutCount;
    const WGPUBindGroupLayout * bindGroupLayouts;
    uint32_t                    immediateSize;
};

struct WGPUBindGroupEntry {
    const WGPUChainedStruct * nextInChain;
    uint32_t                  binding;
    WGPUBuffer                buffer;
    uint64_t                  offset;
    uint64_t                  size;
    void *                    sampler;
    void *                    textureView;
};

struct WGPUBindGroupDescriptor {
    const WGPUChainedStruct *  nextInChain;
    WGPUStringView             label;
    WGPUBindGroupLayout        layout;
    size_t                     entryCount;
    const WGPUBindGroupEntry * entries;
};

struct WGPUCommandEncoderDescriptor {
    const WGPUChainedStruct * nextInChain;
    WGPUStringView            label;
};

struct WGPUCommandBufferDescriptor {
    const WGPUChainedStruct * nextInChain;
    WGPUStringView            label;
};

// Timestamp queries (feature TimestampQuery). This build's pass timestamp struct is Dawn's
// PassTimestampWrites, which carries a chain (its validation unpacks one); the query type is tried as
// v1.0's Timestamp (2) and, if the device rejects it, as the older 1 (StepEncoder, TERN_WEBGPU_PROFILE=gpu).
struct WGPUQuerySetDescriptor {
    const WGPUChainedStruct * nextInChain;
    WGPUStringView            label;
    uint32_t                  type;
    uint32_t                  count;
};

struct WGPUPassTimestampWrites {
    const WGPUChainedStruct * nextInChain;
    WGPUQuerySet              querySet;
    uint32_t                  beginningOfPassWriteIndex;
    uint32_t                  endOfPassWriteIndex;
};

struct WGPUComputePassDescriptor {
    const WGPUChainedStruct *       nextInChain;
    WGPUStringView                  label;
    const WGPUPassTimestampWrites * timestampWrites;
};

// X-macro list of every function the backend resolves: X(name, return type, (parameters)).
#define TERN_WGPU_PROCS(X)                                                                                           \
    X(wgpuCreateInstance, WGPUInstance, (const void * descriptor))                                                  \
    X(wgpuInstanceRequestAdapter, WGPUFuture,                                                                        \
      (WGPUInstance, const WGPURequestAdapterOptions *, WGPUCallbackInfo<WGPURequestAdapterCallback>))               \
    X(wgpuInstanceProcessEvents, void, (WGPUInstance))                                                               \
    X(wgpuInstanceGetWGSLLanguageFeatures, void, (WGPUInstance, WGPUSupportedWGSLLanguageFeatures *))                \
    X(wgpuInstanceRelease, void, (WGPUInstance))                                                                     \
    X(wgpuAdapterGetInfo, uint32_t, (WGPUAdapter, WGPUAdapterInfo *))                                                \
    X(wgpuAdapterInfoFreeMembers, void, (WGPUAdapterInfo))                                                           \
    X(wgpuAdapterGetLimits, uint32_t, (WGPUAdapter, WGPULimits *))                                                   \
    X(wgpuAdapterGetFeatures, void, (WGPUAdapter, WGPUSupportedFeatures *))                                          \
    X(wgpuSupportedFeaturesFreeMembers, void, (WGPUSupportedFeatures))                                               \
    X(wgpuSupportedWGSLLanguageFeaturesFreeMembers, void, (WGPUSupportedWGSLLanguageFeatures))                       \
    X(wgpuAdapterRequestDevice, WGPUFuture,                                                                          \
      (WGPUAdapter, const WGPUDeviceDescriptor *, WGPUCallbackInfo<WGPURequestDeviceCallback>))                      \
    X(wgpuAdapterRelease, void, (WGPUAdapter))                                                                       \
    X(wgpuDeviceGetLimits, uint32_t, (WGPUDevice, WGPULimits *))                                                     \
    X(wgpuDeviceGetQueue, WGPUQueue, (WGPUDevice))                                                                   \
    X(wgpuDevicePushErrorScope, void, (WGPUDevice, uint32_t filter))                                                 \
    X(wgpuDevicePopErrorScope, WGPUFuture, (WGPUDevice, WGPUCallbackInfo<WGPUPopErrorScopeCallback>))                \
    X(wgpuDeviceCreateBuffer, WGPUBuffer, (WGPUDevice, const WGPUBufferDescriptor *))                                \
    X(wgpuDeviceCreateShaderModule, WGPUShaderModule, (WGPUDevice, const WGPUShaderModuleDescriptor *))              \
    X(wgpuDeviceCreateBindGroupLayout, WGPUBindGroupLayout, (WGPUDevice, const WGPUBindGroupLayoutDescriptor *))     \
    X(wgpuDeviceCreatePipelineLayout, WGPUPipelineLayout, (WGPUDevice, const WGPUPipelineLayoutDescriptor *))        \
    X(wgpuDeviceCreateComputePipeline, WGPUComputePipeline, (WGPUDevice, const WGPUComputePipelineDescriptor *))     \
    X(wgpuDeviceCreateBindGroup, WGPUBindGroup, (WGPUDevice, const WGPUBindGroupDescriptor *))                       \
    X(wgpuDeviceCreateCommandEncoder, WGPUCommandEncoder, (WGPUDevice, const WGPUCommandEncoderDescriptor *))        \
    X(wgpuDeviceDestroy, void, (WGPUDevice))                                                                         \
    X(wgpuDeviceRelease, void, (WGPUDevice))                                                                         \
    X(wgpuQueueSubmit, void, (WGPUQueue, size_t, const WGPUCommandBuffer *))                                         \
    X(wgpuQueueWriteBuffer, void, (WGPUQueue, WGPUBuffer, uint64_t offset, const void * data, size_t size))          \
    X(wgpuQueueOnSubmittedWorkDone, WGPUFuture, (WGPUQueue, WGPUCallbackInfo<WGPUQueueWorkDoneCallback>))            \
    X(wgpuQueueRelease, void, (WGPUQueue))                                                                           \
    X(wgpuShaderModuleGetCompilationInfo, WGPUFuture,                                                                \
      (WGPUShaderModule, WGPUCallbackInfo<WGPUCompilationInfoCallback>))                                             \
    X(wgpuShaderModuleRelease, void, (WGPUShaderModule))                                                             \
    X(wgpuBindGroupLayoutRelease, void, (WGPUBindGroupLayout))                                                       \
    X(wgpuPipelineLayoutRelease, void, (WGPUPipelineLayout))                                                         \
    X(wgpuComputePipelineRelease, void, (WGPUComputePipeline))                                                       \
    X(wgpuBindGroupRelease, void, (WGPUBindGroup))                                                                   \
    X(wgpuBufferMapAsync, WGPUFuture,                                                                                \
      (WGPUBuffer, WGPUFlags mode, size_t offset, size_t size, WGPUCallbackInfo<WGPUBufferMapCallback>))             \
    X(wgpuBufferGetConstMappedRange, const void *, (WGPUBuffer, size_t offset, size_t size))                         \
    X(wgpuBufferUnmap, void, (WGPUBuffer))                                                                           \
    X(wgpuBufferDestroy, void, (WGPUBuffer))                                                                         \
    X(wgpuBufferRelease, void, (WGPUBuffer))                                                                         \
    X(wgpuCommandEncoderBeginComputePass, WGPUComputePassEncoder,                                                    \
      (WGPUCommandEncoder, const WGPUComputePassDescriptor *))                                                       \
    X(wgpuCommandEncoderCopyBufferToBuffer, void,                                                                    \
      (WGPUCommandEncoder, WGPUBuffer, uint64_t, WGPUBuffer, uint64_t, uint64_t))                                    \
    X(wgpuCommandEncoderFinish, WGPUCommandBuffer, (WGPUCommandEncoder, const WGPUCommandBufferDescriptor *))        \
    X(wgpuCommandEncoderResolveQuerySet, void, (WGPUCommandEncoder, WGPUQuerySet, uint32_t, uint32_t, WGPUBuffer, uint64_t)) \
    X(wgpuDeviceCreateQuerySet, WGPUQuerySet, (WGPUDevice, const WGPUQuerySetDescriptor *))                          \
    X(wgpuQuerySetRelease, void, (WGPUQuerySet))                                                                     \
    X(wgpuCommandEncoderRelease, void, (WGPUCommandEncoder))                                                         \
    X(wgpuCommandBufferRelease, void, (WGPUCommandBuffer))                                                           \
    X(wgpuComputePassEncoderSetPipeline, void, (WGPUComputePassEncoder, WGPUComputePipeline))                        \
    X(wgpuComputePassEncoderSetBindGroup, void,                                                                      \
      (WGPUComputePassEncoder, uint32_t, WGPUBindGroup, size_t, const uint32_t *))                                   \
    X(wgpuComputePassEncoderDispatchWorkgroups, void, (WGPUComputePassEncoder, uint32_t, uint32_t, uint32_t))        \
    X(wgpuComputePassEncoderEnd, void, (WGPUComputePassEncoder))                                                     \
    X(wgpuComputePassEncoderRelease, void, (WGPUComputePassEncoder))

namespace tern {

// Resolved entry points of the loaded library, one member per TERN_WGPU_PROCS entry.
// Feature ids, which Dawn renumbered when webgpu.h reached v1.0. The npm bun-webgpu-linux-x64 0.1.7
// build predates it; npm webgpu 0.6.2 (dawn.node) follows it. Read from each library by requesting ids
// an adapter lacks: the error names the feature ("Requested feature FeatureName::<name> is not
// supported"). In the old numbering 0x0B and 0x12 are RG11B10UfloatRenderable and
// CoreFeaturesAndLimits; in the new one 0x03 is Depth32FloatStencil8 and 0x50037 AdapterPropertiesWGPU.
struct WgpuFeatureIds {
    uint32_t timestamp_query, shader_f16, subgroups, subgroup_matrix;
};
inline constexpr WgpuFeatureIds k_feature_ids_pre_v1{0x03, 0x0A, 0x11, 0x50037};
inline constexpr WgpuFeatureIds k_feature_ids_v1{0x09, 0x0B, 0x12, 0x50034};

struct WgpuProcs {
#define TERN_WGPU_DECLARE_MEMBER(name, ret, params) ret(*name) params = nullptr;
    TERN_WGPU_PROCS(TERN_WGPU_DECLARE_MEMBER)
#undef TERN_WGPU_DECLARE_MEMBER
    // Optional: null where the library lacks it and in the browser build (PipelineCache::prebuild then
    // builds nothing ahead). Dawn creates such pipelines on its worker threads; status 1 is success.
    WGPUFuture (*wgpuDeviceCreateComputePipelineAsync)(WGPUDevice, const WGPUComputePipelineDescriptor *,
                                                       WGPUCallbackInfo<WGPUCreateComputePipelineAsyncCallback>) = nullptr;
};

}  // namespace tern
