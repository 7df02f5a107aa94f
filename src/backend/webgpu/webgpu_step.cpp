// One command encoder + compute pass per step, uniform arena, bind group cache (webgpu_step.h).
#include "backend/webgpu/webgpu_step.h"

#include "core/error.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace tern {

StepEncoder::StepEncoder(WgpuContext & ctx, PipelineCache & pipelines) : ctx_(ctx), pipelines_(pipelines) {
    WGPUBufferDescriptor desc{};
    desc.label = wgpu_string("tern uniforms");
    desc.usage = WGPU_BUFFER_USAGE_UNIFORM | WGPU_BUFFER_USAGE_COPY_DST;
    desc.size  = k_slots * k_slot_bytes;
    uniforms_  = WgpuHandle<WGPUBuffer>(wgpu().wgpuDeviceCreateBuffer(ctx_.device(), &desc));
    arena_.resize(k_slots * k_slot_bytes);
    const char * env = std::getenv("TERN_WEBGPU_PROFILE");
    profile_         = env && std::string_view(env) == "1";
}

StepEncoder::~StepEncoder() {
    if (profile_ && !profile_ms_.empty()) {
        std::fprintf(stderr, "webgpu profile (wall time per dispatch, submitted one by one):\n");
        for (const auto & [label, v] : profile_ms_) {
            std::fprintf(stderr, "  %-60s %8lld x %9.3f ms = %9.1f ms\n", label.c_str(), static_cast<long long>(v.first),
                         v.second / static_cast<double>(v.first), v.second);
        }
    }
    if (pass_) {
        wgpu().wgpuComputePassEncoderEnd(pass_);
        wgpu().wgpuComputePassEncoderRelease(pass_);
    }
    if (encoder_) wgpu().wgpuCommandEncoderRelease(encoder_);
}

void StepEncoder::begin_pass() {
    if (!encoder_) {
        WGPUCommandEncoderDescriptor desc{};
        desc.label = wgpu_string("tern step");
        encoder_   = wgpu().wgpuDeviceCreateCommandEncoder(ctx_.device(), &desc);
    }
    if (!pass_) {
        WGPUComputePassDescriptor desc{};
        desc.label = wgpu_string("tern step");
        pass_      = wgpu().wgpuCommandEncoderBeginComputePass(encoder_, &desc);
    }
}

void StepEncoder::end_pass() {
    if (!pass_) return;
    wgpu().wgpuComputePassEncoderEnd(pass_);
    wgpu().wgpuComputePassEncoderRelease(pass_);
    pass_ = nullptr;
}

void StepEncoder::dispatch(const PipelineKey & key, std::span<const WGPUBuffer> buffers, const void * params,
                           size_t params_bytes, uint32_t x, uint32_t y, uint32_t z) {
    TERN_ASSERT(params_bytes % 4 == 0 && params_bytes + 4 <= k_slot_bytes, "params of %zu bytes", params_bytes);
    TERN_ASSERT(buffers.size() + 1 == key.signature.size(), "%zu buffers for signature '%.*s'", buffers.size(),
                static_cast<int>(key.signature.size()), key.signature.data());
    const uint32_t max_groups = ctx_.limits().maxComputeWorkgroupsPerDimension;
    TERN_ASSERT(x <= max_groups && y <= max_groups && z <= max_groups, "dispatch (%u, %u, %u) of %s over the limit %u",
                x, y, z, key.label().c_str(), max_groups);
    for (size_t i = 0; i < buffers.size(); ++i) {  // WebGPU rejects a writable binding that aliases another
        for (size_t j = i + 1; j < buffers.size(); ++j) {
            TERN_ASSERT(buffers[i] != buffers[j] || (key.signature[i] == 'r' && key.signature[j] == 'r'),
                        "%s: bindings %zu and %zu are the same buffer and one of them is writable",
                        key.label().c_str(), i, j);
        }
    }
    if (x == 0 || y == 0 || z == 0) return;
    // $TERN_WEBGPU_SKIP=shader,shader,...: drop those kernels' dispatches. A timing aid only (the
    // results are wrong): the time a kernel costs inside the real stream is the difference.
    static const std::string skip = [] {
        const char * env = std::getenv("TERN_WEBGPU_SKIP");
        return env ? "," + std::string(env) + "," : std::string();
    }();
    if (!skip.empty() && skip.find("," + std::string(key.shader) + ",") != std::string::npos) return;
    // $TERN_WEBGPU_REPEAT=shader,...: record those kernels' dispatches 5 times (a timing aid; results
    // of accumulating kernels are wrong): a kernel's cost in the stream is the difference / 4.
    static const std::string repeat = [] {
        const char * env = std::getenv("TERN_WEBGPU_REPEAT");
        return env ? "," + std::string(env) + "," : std::string();
    }();
    const int copies = !repeat.empty() && repeat.find("," + std::string(key.shader) + ",") != std::string::npos ? 5 : 1;
    if (n_slots_ == k_slots) flush();

    WGPUComputePipeline pipeline = pipelines_.pipeline(key);
    BindKey             bk{key.signature, std::vector<WGPUBuffer>(buffers.begin(), buffers.end())};
    auto                it = bind_groups_.find(bk);
    if (it == bind_groups_.end()) {
        std::vector<WGPUBindGroupEntry> entries(buffers.size() + 1);
        for (size_t i = 0; i < entries.size(); ++i) {
            entries[i]         = {};
            entries[i].binding = static_cast<uint32_t>(i);
            entries[i].buffer  = i < buffers.size() ? buffers[i] : uniforms_.get();
            entries[i].offset  = 0;
            entries[i].size    = i < buffers.size() ? WGPU_WHOLE_SIZE : k_slot_bytes;
        }
        WGPUBindGroupDescriptor desc{};
        desc.layout     = pipelines_.layout(key.signature);
        desc.entryCount = entries.size();
        desc.entries    = entries.data();
        ctx_.push_error_scope();
        WgpuHandle<WGPUBindGroup> group(wgpu().wgpuDeviceCreateBindGroup(ctx_.device(), &desc));
        if (std::string err = ctx_.pop_error_scope("creating a bind group"); !err.empty()) {
            fail(ErrorKind::device, format("webgpu: bind group for %s: %s", key.label().c_str(), err.c_str()));
        }
        it = bind_groups_.emplace(std::move(bk), std::move(group)).first;
    }

    begin_pass();
    const size_t slot = n_slots_++;
    // The rest of the slot is zeroed: a kernel's Params may end with `rn_zero: u32` after the host's
    // fields, the zero that lib/numerics.wgsl's mul_rn needs from a place the compiler cannot see.
    std::memcpy(arena_.data() + slot * k_slot_bytes, params, params_bytes);
    std::memset(arena_.data() + slot * k_slot_bytes + params_bytes, 0, k_slot_bytes - params_bytes);
    const uint32_t offset = static_cast<uint32_t>(slot * k_slot_bytes);
    wgpu().wgpuComputePassEncoderSetPipeline(pass_, pipeline);
    wgpu().wgpuComputePassEncoderSetBindGroup(pass_, 0, it->second.get(), 1, &offset);
    for (int c = 0; c < copies; ++c) wgpu().wgpuComputePassEncoderDispatchWorkgroups(pass_, x, y, z);
    ++dispatches_;
    ++serial_;
    if (profile_) profile_wait(key.label());
}

void StepEncoder::profile_wait(const std::string & label) {
    const auto t0 = std::chrono::steady_clock::now();
    flush();
    ctx_.wait_queue_idle("profiling a dispatch");
    auto & e = profile_ms_[label];
    e.first += 1;
    e.second += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void StepEncoder::copy(WGPUBuffer src, uint64_t src_offset, WGPUBuffer dst, uint64_t dst_offset, uint64_t n_bytes) {
    begin_pass();  // makes sure the encoder exists
    end_pass();
    ++serial_;
    wgpu().wgpuCommandEncoderCopyBufferToBuffer(encoder_, src, src_offset, dst, dst_offset, n_bytes);
}

void StepEncoder::flush() {
    if (!encoder_) return;
    end_pass();
    WGPUCommandBufferDescriptor desc{};
    desc.label                = wgpu_string("tern step");
    WGPUCommandBuffer commands = wgpu().wgpuCommandEncoderFinish(encoder_, &desc);
    wgpu().wgpuCommandEncoderRelease(encoder_);
    encoder_ = nullptr;
    if (n_slots_ > 0) {
        wgpu().wgpuQueueWriteBuffer(ctx_.queue(), uniforms_.get(), 0, arena_.data(), n_slots_ * k_slot_bytes);
        n_slots_ = 0;
    }
    wgpu().wgpuQueueSubmit(ctx_.queue(), 1, &commands);
    wgpu().wgpuCommandBufferRelease(commands);
}

void StepEncoder::forget(WGPUBuffer buffer) {
    for (auto it = bind_groups_.begin(); it != bind_groups_.end();) {
        bool uses = false;
        for (WGPUBuffer b : it->first.second) uses = uses || b == buffer;
        it = uses ? bind_groups_.erase(it) : std::next(it);
    }
}

}  // namespace tern
