// RAII over webgpu.h handles: WgpuHandle<WGPUBuffer> releases its buffer through the loaded
// library's wgpuBufferRelease when it goes out of scope. Move-only.
#pragma once

#include "backend/webgpu/wgpu_loader.h"

#include <utility>

namespace tern {

inline void wgpu_release(WGPUInstance h) { wgpu().wgpuInstanceRelease(h); }
inline void wgpu_release(WGPUAdapter h) { wgpu().wgpuAdapterRelease(h); }
inline void wgpu_release(WGPUDevice h) { wgpu().wgpuDeviceRelease(h); }
inline void wgpu_release(WGPUQueue h) { wgpu().wgpuQueueRelease(h); }
inline void wgpu_release(WGPUBuffer h) { wgpu().wgpuBufferRelease(h); }
inline void wgpu_release(WGPUShaderModule h) { wgpu().wgpuShaderModuleRelease(h); }
inline void wgpu_release(WGPUBindGroupLayout h) { wgpu().wgpuBindGroupLayoutRelease(h); }
inline void wgpu_release(WGPUPipelineLayout h) { wgpu().wgpuPipelineLayoutRelease(h); }
inline void wgpu_release(WGPUComputePipeline h) { wgpu().wgpuComputePipelineRelease(h); }
inline void wgpu_release(WGPUBindGroup h) { wgpu().wgpuBindGroupRelease(h); }
inline void wgpu_release(WGPUCommandEncoder h) { wgpu().wgpuCommandEncoderRelease(h); }
inline void wgpu_release(WGPUCommandBuffer h) { wgpu().wgpuCommandBufferRelease(h); }
inline void wgpu_release(WGPUComputePassEncoder h) { wgpu().wgpuComputePassEncoderRelease(h); }
inline void wgpu_release(WGPUQuerySet h) { wgpu().wgpuQuerySetRelease(h); }

template <typename T>
class WgpuHandle {
public:
    WgpuHandle() = default;
    explicit WgpuHandle(T h) : h_(h) {}
    WgpuHandle(WgpuHandle && o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    WgpuHandle & operator=(WgpuHandle && o) noexcept {
        reset(std::exchange(o.h_, nullptr));
        return *this;
    }
    WgpuHandle(const WgpuHandle &)             = delete;
    WgpuHandle & operator=(const WgpuHandle &) = delete;
    ~WgpuHandle() { reset(); }

    T    get() const { return h_; }
    explicit operator bool() const { return h_ != nullptr; }
    T    release() { return std::exchange(h_, nullptr); }
    void reset(T h = nullptr) {
        if (h_) wgpu_release(h_);
        h_ = h;
    }

private:
    T h_ = nullptr;
};

}  // namespace tern
