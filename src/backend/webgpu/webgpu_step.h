// StepEncoder: records the dispatches of a step into one command encoder and one compute pass,
// and submits them together (DESIGN.md decision 2: one command buffer per step).
//
// Every dispatch gets its uniform Params in a 256-byte slot of a host-side arena that is uploaded
// with one queue write right before the submit (a write is ordered before the submit that follows
// it). Bind groups bind whole buffers and are cached by (signature, buffers), so a steady-state step
// creates no WebGPU objects at all. A full arena flushes the step early and starts over.
#pragma once

#include "backend/webgpu/pipeline_cache.h"

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <unordered_map>
#include <vector>

namespace tern {

class StepEncoder {
public:
    static constexpr size_t k_slot_bytes = 256;   // minUniformBufferOffsetAlignment is at most 256
    static constexpr size_t k_slots      = 2048;  // dispatches per submit before an early flush

    StepEncoder(WgpuContext & ctx, PipelineCache & pipelines);
    ~StepEncoder();

    // Records one dispatch of `key` with `buffers` bound to bindings 0.. (in the order of the key's
    // signature, the uniform last) and `params` (a multiple of 4 bytes, at most 252) as the uniform;
    // the rest of the 256-byte slot reads as zeros (the `rn_zero` of lib/numerics.wgsl).
    void dispatch(const PipelineKey & key, std::span<const WGPUBuffer> buffers, const void * params,
                  size_t params_bytes, uint32_t x, uint32_t y = 1, uint32_t z = 1);
    // Records a buffer-to-buffer copy (closes the current compute pass).
    void copy(WGPUBuffer src, uint64_t src_offset, WGPUBuffer dst, uint64_t dst_offset, uint64_t n_bytes);
    // Submits whatever was recorded (no-op when nothing was), the deferred dispatch first.
    void flush();
    // The same, but a deferred dispatch stays deferred: the next command or flush records it, or
    // the next step's first command claims it (end of a step: WebGpuBackend::end_step).
    void flush_keeping_deferred();
    // Submits after the next `first` dispatches, then after twice as many, and so on while a piece
    // is at most `last` dispatches (the start of a run of steps on an idle device).
    void ramp_submits(size_t first, size_t last) {
        ramp_at_   = first;
        ramp_last_ = last;
    }
    // A dispatch recorded late (the greedy head's last argmax stage): `record` runs right before the
    // next command is recorded or before the commands are finished (flush(), hold()), unless the
    // command that reads what it would write does that work itself and claims it first with
    // take_deferred(). `target` and `offset` name what it writes. One at a time.
    void defer(WGPUBuffer target, uint64_t offset, std::function<void()> record);
    // Claims the deferred dispatch (it will not run) if it writes `target` at `offset`.
    bool take_deferred(WGPUBuffer target, uint64_t offset);
    // Records the deferred dispatch now, if there is one (before a buffer it binds is replaced).
    void run_deferred();
    bool pending() const { return encoder_ != nullptr; }
    // Finishes what was recorded into a command buffer that is kept, with its uniforms, instead of
    // submitted: release_held() submits it (after whatever is submitted in between, e.g. a queue
    // write of its input), drop_held() throws it away. One at a time; not while profiling.
    void hold();
    void release_held();
    void drop_held();
    bool holding() const { return held_done_; }
    // ramp_submits for a step that will be held: its pieces are kept instead of submitted, and
    // release_held() submits them one after the other, so that the device starts on the first while
    // the next ones are handed to the driver (Dawn translates a command buffer at its submit). A
    // flush before hold() submits the pieces kept so far first (the step is then not held).
    void hold_in_pieces(size_t first, size_t last) {
        ramp_submits(first, last);
        hold_pieces_ = first > 0;
    }
    // Command buffers submitted so far (a step whose recording saw this move was split).
    uint64_t submits() const { return submits_; }

    // Drops cached bind groups that use `buffer` (called before a buffer is released).
    void forget(WGPUBuffer buffer);
    // forget() calls so far: equal counts mean no buffer was released in between.
    uint64_t releases() const { return releases_; }

    int64_t take_dispatch_count() { return std::exchange(dispatches_, 0); }
    // Counts recorded commands (dispatches, copies) and bump() calls: equal serials mean nothing
    // was recorded in between.
    uint64_t serial() const { return serial_; }
    void     bump() { ++serial_; }

    // $TERN_WEBGPU_PROFILE=1: submit and wait after every dispatch, and print the wall time per
    // kernel variant when the encoder is destroyed. A debugging aid (it serializes everything).
    // $TERN_WEBGPU_PROFILE=gpu (where the device has timestamp queries): every dispatch gets its own
    // compute pass with GPU timestamps at its start and end, read back after each submit; the GPU
    // time per kernel variant, and how much of each submit's span the kernels cover, are printed
    // when the encoder is destroyed. The stream keeps its order and barriers (a pass boundary
    // costs what a dependent dispatch does), so the figures are the kernels' own durations.
    bool profiling() const { return profile_; }
    bool any_profiling() const { return profile_ || gpu_profile_; }
    // The GPU profile so far: kernel variant -> (dispatches, GPU ms); empty unless profiling=gpu.
    const std::map<std::string, std::pair<int64_t, double>> & gpu_times() const { return gpu_ms_; }
    // Forgets both profiles' figures so far (what was submitted and read back; call when idle).
    void restart_profile();

private:
    void profile_wait(const std::string & label);
    // The bind group of `buffers` (bindings 0..n-1) and the uniform slot (binding n), made once per
    // (key's signature, buffers) and cached; the key names the kernel in an error.
    WGPUBindGroup bind_group(const PipelineKey & key, std::span<const WGPUBuffer> buffers);
    // Timestamp pass for the next dispatch (gpu profile): its pass, the queries, the label.
    void begin_timed_pass(const std::string & label);
    void read_timestamps(size_t n_dispatches);

    void begin_pass(const WGPUPassTimestampWrites * timestamps = nullptr);
    void end_pass();
    // Ends the pass and the encoder into a command buffer.
    WGPUCommandBuffer finish(const char * label);
    // Writes the step's uniform slots (uniform_bytes of them), then submits and releases `commands`.
    void submit(WGPUCommandBuffer commands, const uint8_t * uniforms, size_t uniform_bytes);
    // What was recorded so far into a held piece (hold_in_pieces, hold).
    void keep_piece();
    void submit_held();

    // A bind group's signature and buffers (the uniform slot is the same for all), hashed: every
    // dispatch looks its group up.
    using BindKey = std::pair<std::string_view, std::vector<WGPUBuffer>>;
    struct BindKeyHash {
        size_t operator()(const BindKey & key) const;
    };

    WgpuContext &                               ctx_;
    PipelineCache &                             pipelines_;
    WgpuHandle<WGPUBuffer>                      uniforms_;  // k_slots x 256 bytes
    std::vector<uint8_t>                        arena_;     // host copy of the slots in use
    size_t                                      n_slots_ = 0;
    WGPUCommandEncoder                          encoder_ = nullptr;
    struct HeldPiece {
        WGPUCommandBuffer    commands = nullptr;
        std::vector<uint8_t> uniforms;  // its slots of the arena
    };
    std::vector<HeldPiece>                      held_;               // hold(), hold_in_pieces()
    bool                                        held_done_   = false;  // hold() kept them
    bool                                        hold_pieces_ = false;  // hold_in_pieces() until hold()
    std::function<void()>                       deferred_;           // defer()
    WGPUBuffer                                  deferred_target_ = nullptr;
    uint64_t                                    deferred_offset_ = 0;
    uint64_t                                    submits_ = 0;
    // Host seconds in wgpuCommandEncoderFinish, the uniforms' queue write and wgpuQueueSubmit (Dawn
    // turns the commands into the native API's at submit), logged with -v at the end.
    double finish_s_ = 0, uniforms_s_ = 0, submit_s_ = 0;
    WGPUComputePassEncoder                      pass_    = nullptr;
    std::unordered_map<BindKey, WgpuHandle<WGPUBindGroup>, BindKeyHash> bind_groups_;
    BindKey                                     bind_probe_;  // the key looked up (its vector reused)
    int64_t                                     dispatches_ = 0;
    uint64_t                                    serial_     = 0;
    uint64_t                                    releases_   = 0;
    bool                                        profile_    = false;
    std::map<std::string, std::pair<int64_t, double>> profile_ms_;  // label -> (count, ms)
    bool                                        gpu_profile_ = false;
    WgpuHandle<WGPUQuerySet>                    queries_;           // 2 per dispatch of a submit
    WgpuHandle<WGPUBuffer>                      resolved_, readback_;
    std::vector<std::string>                    timed_labels_;      // this submit's timed dispatches
    std::map<std::string, std::pair<int64_t, double>> gpu_ms_;      // label -> (count, GPU ms)
    double                                      gpu_span_ms_ = 0, gpu_busy_ms_ = 0;
    size_t                                      ramp_at_ = 0, ramp_last_ = 0;  // ramp_submits
};

}  // namespace tern
