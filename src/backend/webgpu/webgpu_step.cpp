// One command encoder + compute pass per step, uniform arena, bind group cache (webgpu_step.h).
#include "backend/webgpu/webgpu_step.h"

#include "core/error.h"
#include "core/log.h"

#include <algorithm>
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
    gpu_profile_     = env && std::string_view(env) == "gpu";
    if (env && *env && !profile_ && !gpu_profile_ && std::string_view(env) != "0") {
        TERN_LOG_WARN("TERN_WEBGPU_PROFILE='%s' is not 1 (wall time per kernel) or gpu (GPU timestamps); not profiling",
                      env);
    }
    if (gpu_profile_ && !ctx_.features().timestamp_query) {
        TERN_LOG_WARN("TERN_WEBGPU_PROFILE=gpu: this device has no timestamp queries; not profiling");
        gpu_profile_ = false;
    }
    if (gpu_profile_) {
        // The query type: v1.0's Timestamp (2), else the older numbering's (1).
        for (uint32_t type : {2u, 1u}) {
            WGPUQuerySetDescriptor qd{};
            qd.label = wgpu_string("tern timestamps");
            qd.type  = type;
            qd.count = static_cast<uint32_t>(2 * k_slots);
            ctx_.push_error_scope();
            WgpuHandle<WGPUQuerySet> q(wgpu().wgpuDeviceCreateQuerySet(ctx_.device(), &qd));
            if (ctx_.pop_error_scope("creating a timestamp query set").empty()) {
                queries_ = std::move(q);
                break;
            }
        }
        if (!queries_) fail(ErrorKind::device, "webgpu: TERN_WEBGPU_PROFILE=gpu: no timestamp query set could be made");
        WGPUBufferDescriptor bd{};
        bd.label  = wgpu_string("tern timestamps resolved");
        bd.usage  = WGPU_BUFFER_USAGE_QUERY_RESOLVE | WGPU_BUFFER_USAGE_COPY_SRC;
        bd.size   = 2 * k_slots * 8;
        resolved_ = WgpuHandle<WGPUBuffer>(wgpu().wgpuDeviceCreateBuffer(ctx_.device(), &bd));
        bd.label  = wgpu_string("tern timestamps readback");
        bd.usage  = WGPU_BUFFER_USAGE_MAP_READ | WGPU_BUFFER_USAGE_COPY_DST;
        readback_ = WgpuHandle<WGPUBuffer>(wgpu().wgpuDeviceCreateBuffer(ctx_.device(), &bd));
    }
}

StepEncoder::~StepEncoder() {
    for (HeldPiece & h : held_) wgpu().wgpuCommandBufferRelease(h.commands);
    if (submits_ > 0) {
        TERN_LOG_INFO("webgpu: %llu submits; host ms per submit: finish %.3f, uniform write %.3f, submit %.3f",
                      static_cast<unsigned long long>(submits_), 1e3 * finish_s_ / static_cast<double>(submits_),
                      1e3 * uniforms_s_ / static_cast<double>(submits_), 1e3 * submit_s_ / static_cast<double>(submits_));
    }
    if (profile_ && !profile_ms_.empty()) {
        std::fprintf(stderr, "webgpu profile (wall time per dispatch, submitted one by one):\n");
        for (const auto & [label, v] : profile_ms_) {
            std::fprintf(stderr, "  %-60s %8lld x %9.3f ms = %9.1f ms\n", label.c_str(), static_cast<long long>(v.first),
                         v.second / static_cast<double>(v.first), v.second);
        }
    }
    if (!gpu_ms_.empty()) {
        std::fprintf(stderr, "webgpu GPU profile (timestamps at the start and end of each dispatch):\n");
        for (const auto & [label, v] : gpu_ms_) {
            std::fprintf(stderr, "  %-60s %8lld x %9.2f us = %9.2f ms\n", label.c_str(),
                         static_cast<long long>(v.first), 1e3 * v.second / static_cast<double>(v.first), v.second);
        }
        std::fprintf(stderr, "  kernels ran %.2f ms of the %.2f ms that the submits spanned on the GPU (%.0f%%; the rest "
                     "is between dispatches)\n", gpu_busy_ms_, gpu_span_ms_,
                     gpu_span_ms_ > 0 ? 100.0 * gpu_busy_ms_ / gpu_span_ms_ : 0.0);
    }
    if (pass_) {
        wgpu().wgpuComputePassEncoderEnd(pass_);
        wgpu().wgpuComputePassEncoderRelease(pass_);
    }
    if (encoder_) wgpu().wgpuCommandEncoderRelease(encoder_);
}

void StepEncoder::restart_profile() {
    flush();  // (the timestamps of anything recorded are read back before they are forgotten)
    profile_ms_.clear();
    gpu_ms_.clear();
    gpu_busy_ms_ = 0;
    gpu_span_ms_ = 0;
}

void StepEncoder::begin_pass(const WGPUPassTimestampWrites * timestamps) {
    if (!encoder_) {
        WGPUCommandEncoderDescriptor desc{};
        desc.label = wgpu_string("tern step");
        encoder_   = wgpu().wgpuDeviceCreateCommandEncoder(ctx_.device(), &desc);
    }
    if (!pass_) {
        WGPUComputePassDescriptor desc{};
        desc.label           = wgpu_string("tern step");
        desc.timestampWrites = timestamps;
        pass_                = wgpu().wgpuCommandEncoderBeginComputePass(encoder_, &desc);
    }
}

void StepEncoder::begin_timed_pass(const std::string & label) {
    end_pass();
    // At most k_slots timed dispatches per submit: dispatch() flushes when the arena is full.
    const auto              i = static_cast<uint32_t>(timed_labels_.size());
    WGPUPassTimestampWrites ts{nullptr, queries_.get(), 2 * i, 2 * i + 1};
    begin_pass(&ts);
    timed_labels_.push_back(label);
}

void StepEncoder::read_timestamps(size_t n_dispatches) {
    struct Map {
        bool     done   = false;
        uint32_t status = 0;
    } map;
    WGPUCallbackInfo<WGPUBufferMapCallback> cb{};
    cb.mode      = WGPU_CALLBACK_MODE_ALLOW_PROCESS_EVENTS;
    cb.userdata1 = &map;
    cb.callback  = [](uint32_t status, WGPUStringView, void * u1, void *) {
        static_cast<Map *>(u1)->status = status;
        static_cast<Map *>(u1)->done   = true;
    };
    const size_t bytes = n_dispatches * 16;
    wgpu().wgpuBufferMapAsync(readback_.get(), WGPU_MAP_MODE_READ, 0, bytes, cb);
    ctx_.wait(map.done, "reading GPU timestamps");
    if (map.status != WGPU_STATUS_SUCCESS) fail(ErrorKind::device, "webgpu: mapping the GPU timestamps failed");
    std::vector<uint64_t> ts(2 * n_dispatches);
    const void *          mapped = wgpu().wgpuBufferGetConstMappedRange(readback_.get(), 0, bytes);
    if (mapped) std::memcpy(ts.data(), mapped, bytes);
    wgpu().wgpuBufferUnmap(readback_.get());
    TERN_ASSERT(mapped != nullptr, "mapped range is null");
    for (size_t i = 0; i < n_dispatches; ++i) {
        if (ts[2 * i + 1] < ts[2 * i]) continue;  // not written (or the device's clock wrapped)
        const double ms = static_cast<double>(ts[2 * i + 1] - ts[2 * i]) * 1e-6;  // nanoseconds
        auto &       e  = gpu_ms_[timed_labels_[i]];
        e.first += 1;
        e.second += ms;
        gpu_busy_ms_ += ms;
    }
    if (ts[2 * n_dispatches - 1] > ts[0]) gpu_span_ms_ += static_cast<double>(ts[2 * n_dispatches - 1] - ts[0]) * 1e-6;
    timed_labels_.clear();
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
    run_deferred();
    if (n_slots_ == k_slots) {
        if (hold_pieces_) {
            keep_piece();
        } else {
            flush();
        }
    }
    if (ramp_at_ > 0 && n_slots_ >= ramp_at_) {
        if (hold_pieces_) {
            keep_piece();
        } else {
            flush_keeping_deferred();
        }
        ramp_at_ = 2 * ramp_at_ <= ramp_last_ ? 2 * ramp_at_ : 0;
    }

    WGPUComputePipeline pipeline = pipelines_.pipeline(key);
    WGPUBindGroup       group    = bind_group(key, buffers);

    if (gpu_profile_) {
        begin_timed_pass(key.label());
    } else {
        begin_pass();
    }
    const size_t slot = n_slots_++;
    // The rest of the slot is zeroed: a kernel's Params may end with `rn_zero: u32` after the host's
    // fields, the zero that lib/numerics.wgsl's mul_rn needs from a place the compiler cannot see.
    std::memcpy(arena_.data() + slot * k_slot_bytes, params, params_bytes);
    std::memset(arena_.data() + slot * k_slot_bytes + params_bytes, 0, k_slot_bytes - params_bytes);
    const uint32_t offset = static_cast<uint32_t>(slot * k_slot_bytes);
    wgpu().wgpuComputePassEncoderSetPipeline(pass_, pipeline);
    wgpu().wgpuComputePassEncoderSetBindGroup(pass_, 0, group, 1, &offset);
    wgpu().wgpuComputePassEncoderDispatchWorkgroups(pass_, x, y, z);
    if (gpu_profile_) end_pass();  // the pass's end timestamp follows this dispatch
    ++dispatches_;
    ++serial_;
    if (profile_) profile_wait(key.label());
}

size_t StepEncoder::BindKeyHash::operator()(const BindKey & key) const {
    size_t h = std::hash<std::string_view>{}(key.first);
    for (WGPUBuffer b : key.second) h = h * 1000003 ^ std::hash<const void *>{}(b);
    return h;
}

WGPUBindGroup StepEncoder::bind_group(const PipelineKey & key, std::span<const WGPUBuffer> buffers) {
    bind_probe_.first = key.signature;
    bind_probe_.second.assign(buffers.begin(), buffers.end());
    if (auto it = bind_groups_.find(bind_probe_); it != bind_groups_.end()) return it->second.get();
    BindKey bk = bind_probe_;
    std::vector<WGPUBindGroupEntry> entries(buffers.size() + 1);  // the buffers, then the uniform slot
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
    return bind_groups_.emplace(std::move(bk), std::move(group)).first->second.get();
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
    run_deferred();
    begin_pass();  // makes sure the encoder exists
    end_pass();
    ++serial_;
    wgpu().wgpuCommandEncoderCopyBufferToBuffer(encoder_, src, src_offset, dst, dst_offset, n_bytes);
}

WGPUCommandBuffer StepEncoder::finish(const char * label) {
    end_pass();
    const auto                  t0 = std::chrono::steady_clock::now();
    WGPUCommandBufferDescriptor desc{};
    desc.label                 = wgpu_string(label);
    WGPUCommandBuffer commands = wgpu().wgpuCommandEncoderFinish(encoder_, &desc);
    wgpu().wgpuCommandEncoderRelease(encoder_);
    encoder_ = nullptr;
    finish_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return commands;
}

void StepEncoder::submit(WGPUCommandBuffer commands, const uint8_t * uniforms, size_t uniform_bytes) {
    using clock   = std::chrono::steady_clock;
    const auto t0 = clock::now();
    if (uniform_bytes > 0) wgpu().wgpuQueueWriteBuffer(ctx_.queue(), uniforms_.get(), 0, uniforms, uniform_bytes);
    const auto t1 = clock::now();
    wgpu().wgpuQueueSubmit(ctx_.queue(), 1, &commands);
    wgpu().wgpuCommandBufferRelease(commands);
    uniforms_s_ += std::chrono::duration<double>(t1 - t0).count();
    submit_s_ += std::chrono::duration<double>(clock::now() - t1).count();
    ++submits_;
}

void StepEncoder::defer(WGPUBuffer target, uint64_t offset, std::function<void()> record) {
    run_deferred();
    deferred_        = std::move(record);
    deferred_target_ = target;
    deferred_offset_ = offset;
}

bool StepEncoder::take_deferred(WGPUBuffer target, uint64_t offset) {
    if (!deferred_ || deferred_target_ != target || deferred_offset_ != offset) return false;
    deferred_ = nullptr;
    return true;
}

void StepEncoder::run_deferred() {
    if (!deferred_) return;
    const std::function<void()> record = std::exchange(deferred_, nullptr);  // (it records a dispatch)
    record();
}

void StepEncoder::flush() {
    run_deferred();
    flush_keeping_deferred();
}

void StepEncoder::flush_keeping_deferred() {
    if (hold_pieces_) {  // (a step recorded to be held goes out now: its pieces first)
        hold_pieces_ = false;
        submit_held();
    }
    if (!encoder_) return;
    end_pass();
    const size_t n_timed = timed_labels_.size();
    if (n_timed > 0) {
        wgpu().wgpuCommandEncoderResolveQuerySet(encoder_, queries_.get(), 0, static_cast<uint32_t>(2 * n_timed),
                                                 resolved_.get(), 0);
        wgpu().wgpuCommandEncoderCopyBufferToBuffer(encoder_, resolved_.get(), 0, readback_.get(), 0, 16 * n_timed);
    }
    submit(finish("tern step"), arena_.data(), n_slots_ * k_slot_bytes);
    n_slots_ = 0;
    if (n_timed > 0) read_timestamps(n_timed);
}

void StepEncoder::keep_piece() {
    end_pass();
    HeldPiece h;
    h.commands = finish("tern step (held)");
    h.uniforms.assign(arena_.begin(), arena_.begin() + static_cast<std::ptrdiff_t>(n_slots_ * k_slot_bytes));
    held_.push_back(std::move(h));
    n_slots_ = 0;
}

void StepEncoder::submit_held() {
    for (HeldPiece & h : held_) submit(h.commands, h.uniforms.data(), h.uniforms.size());
    held_.clear();
    held_done_ = false;
}

void StepEncoder::hold() {
    TERN_ASSERT(!held_done_ && !profile_ && !gpu_profile_, "StepEncoder::hold: a step is already held, or profiling");
    run_deferred();
    if (encoder_) keep_piece();
    hold_pieces_ = false;
    ramp_at_     = 0;
    held_done_   = !held_.empty();
}

void StepEncoder::release_held() {
    if (!held_done_) return;
    flush();  // anything recorded meanwhile goes first (it was meant to)
    submit_held();
}

void StepEncoder::drop_held() {
    if (!held_done_) return;
    for (HeldPiece & h : held_) wgpu().wgpuCommandBufferRelease(h.commands);
    held_.clear();
    held_done_ = false;
    bump();  // whatever the held step would have left (norm statistics, head partials) is not there
}

void StepEncoder::forget(WGPUBuffer buffer) {
    ++releases_;
    for (auto it = bind_groups_.begin(); it != bind_groups_.end();) {
        bool uses = false;
        for (WGPUBuffer b : it->first.second) uses = uses || b == buffer;
        it = uses ? bind_groups_.erase(it) : std::next(it);
    }
}

}  // namespace tern
