// The browser build's compute-pass command list (wgpu_loader_web.cpp): a pass's setPipeline, setBindGroup and dispatchWorkgroups are appended here as
// u32 words instead of each crossing from WebAssembly into JavaScript, and handed to JavaScript in one
// call (web/webgpu-library.js's tern_wgpuComputePassEncoderReplay) when the pass ends, when another
// pass is recorded, or before an object the words name is released (the glue gives a released id to
// the next object). A setPipeline or setBindGroup that repeats what the pass already has is left out.
// Plain C++ (handles are the glue's integer ids), so the native tests check it. H200, dawn.node,
// 2026-11-28: the host records a 2B4T step (~154 dispatches) in 0.91 ms instead of 1.03-1.09 with one
// import per call.
//
// Words, per command:
//   setPipeline:         1, pipeline
//   setBindGroup:        2 | index << 8 | n << 16, group, n dynamic offsets
//   dispatchWorkgroups:  3, x, y, z
//                        4, x          (y = z = 1)
//                        5, x, y       (z = 1)
// Ops 4 and 5 let the replay call dispatchWorkgroups(x) / (x, y): trailing sizes of 1 are not passed
// for dawn.node (or the browser) to convert. H200, dawn.node, 2026-11-28 (docs/perf-log.md): with
// them, a slow-mode process's dispatchWorkgroups took 0.81-0.84x its setBindGroup time per step
// instead of 0.89-0.92x.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace tern {

class PassCommandList {
public:
    enum Op : uint32_t { op_set_pipeline = 1, op_set_bind_group = 2, op_dispatch = 3, op_dispatch_x = 4, op_dispatch_xy = 5 };
    // Issues `count` words on pass `pass` (count > 0).
    using Replay = std::function<void(uint32_t pass, const uint32_t * words, size_t count)>;

    explicit PassCommandList(Replay replay) : replay_(std::move(replay)) {}

    void set_pipeline(uint32_t pass, uint32_t pipeline);
    void set_bind_group(uint32_t pass, uint32_t index, uint32_t group, size_t n, const uint32_t * offsets);
    void dispatch(uint32_t pass, uint32_t x, uint32_t y, uint32_t z);
    // Before the pass's end or release: its words go out, and its id may name another pass next.
    void closing(uint32_t pass);
    // Before a pipeline or bind group is released: pending words go out, and no pass assumes it is set.
    void releasing_pipeline(uint32_t pipeline);
    void releasing_bind_group(uint32_t group);
    // Pending words go out (before a new pass begins, and whenever ordering calls for it).
    void flush();

    size_t pending_words() const { return words_.size(); }

private:
    static constexpr uint32_t k_groups = 4, k_offsets = 4;  // state kept for groups 0..3, up to 4 offsets
    struct Bound {
        uint32_t group = 0, n = 0;  // group 0: not known
        uint32_t offsets[k_offsets] = {};
    };
    void use(uint32_t pass);
    void forget_state();

    Replay                replay_;
    uint32_t              pass_     = 0;  // the pass the words and the state belong to (0: none)
    uint32_t              pipeline_ = 0;  // that pass's pipeline once the words run (0: not known)
    Bound                 bound_[k_groups];
    std::vector<uint32_t> words_;
};

}  // namespace tern
