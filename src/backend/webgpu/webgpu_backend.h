// The WebGPU backend: every op of backend.h as hand-written WGSL (shaders/*.wgsl) on a webgpu.h
// implementation loaded at run time (Dawn from npm by default, see wgpu_loader.h). Ops between
// begin_step() and end_step() are recorded into one command buffer and submitted by end_step()
// (every n-th end_step() with set_steps_per_submit(n)); ops outside a step are submitted by the next
// read(), write(), submit_steps() or synchronize().
//
//   auto backend = make_webgpu_backend({});   // throws Error(device) when there is no GPU adapter
#pragma once

#include "backend/backend.h"
#include "backend/webgpu/wgpu_device.h"

#include <memory>

namespace tern {

struct WebGpuOptions {
    // Accept a CPU adapter (SwiftShader): correct but slow. Default: $TERN_WEBGPU_ALLOW_CPU == "1".
    bool    allow_cpu_adapter = webgpu_allow_cpu_from_env();
    int64_t timeout_ms        = 0;      // per wait; 0: $TERN_WEBGPU_TIMEOUT_MS or 120 s
    // Use the emulated dot4 kernels even when dot4I8Packed is there ($TERN_WEBGPU_NO_DP4=1 too).
    bool    emulate_dot4      = false;
    // Workgroup reductions through subgroup operations where the device has them and lays them out
    // as lib/wg_reduce_sg.wgsl assumes (checked at start); false ($TERN_WEBGPU_SUBGROUPS=0 too):
    // the barrier trees of lib/wg_reduce.wgsl.
    bool    subgroup_reductions = true;
    // Most bytes of the prompt-attention score buffer (longer prompts x caches run in token chunks);
    // 0: 128 MiB (or the adapter's binding limit).
    int64_t attention_scratch_bytes = 0;
    // Greedy decoding streams an int8 copy of an F16 LM head from this size on (half the bytes, wider
    // bounds: tens of candidates to recompute exactly, which costs more than it saves on small heads);
    // below it, the F16 table. 0: always the copy (tests).
    int64_t greedy_head_i8_min_bytes = int64_t{64} << 20;
    // One query's attention over this many positions or more takes the long-context kernels
    // (scores, softmax and P·V spread over many workgroups: webgpu_attention_long.cpp) instead of
    // attention.wgsl (one workgroup per head, which slows down steeply on long contexts). 0:
    // $TERN_WEBGPU_ATTN_LONG, else 800 (where the two cross on an H200), or fewer where attention.wgsl's
    // workgroup memory keeps fewer scores.
    int64_t long_attention_positions = 0;
    // One query over few positions (128 for 2B4T) takes attention.wgsl's short form, every K and V
    // word loaded before q and the probabilities passed by shuffles, where every subgroup is exactly
    // 32 invocations (the device line then says "short attention"). false ($TERN_WEBGPU_ATTN_SHORT=0
    // too): the general form. The same results either way.
    bool    short_attention = true;

    static bool webgpu_allow_cpu_from_env();
};

// Throws Error(device) with the reason and a hint when no usable adapter exists.
std::unique_ptr<Backend> make_webgpu_backend(const WebGpuOptions & options = {});

}  // namespace tern
