// The WebGPU backend: every op of backend.h as hand-written WGSL (shaders/*.wgsl) on a webgpu.h
// implementation loaded at run time (Dawn from npm by default, see wgpu_loader.h). Ops between
// begin_step() and end_step() are recorded into one command buffer and submitted by end_step()
// (every n-th end_step() with set_steps_per_submit(n)); ops outside a step are submitted by the next
// read(), write() or synchronize(). Decoding runs through decode() (webgpu_decode_stream.cpp).
//
//   auto backend = make_webgpu_backend({});   // throws Error(device) when there is no GPU adapter
#pragma once

#include "backend/backend.h"
#include "backend/webgpu/wgpu_device.h"

#include <memory>
#include <string>

namespace tern {

struct WebGpuOptions {
    // Accept a CPU adapter (SwiftShader): correct but slow. Default: $TERN_WEBGPU_ALLOW_CPU == "1".
    bool    allow_cpu_adapter = webgpu_allow_cpu_from_env();
    int64_t timeout_ms        = 0;  // per wait; 0: $TERN_WEBGPU_TIMEOUT_MS or 120 s
    // "key=value,..." over the device class's tuning defaults (webgpu_tuning.h). Default:
    // $TERN_WEBGPU_TUNE. Throws Error(invalid_argument) at construction for an unknown key or value.
    std::string tune = webgpu_tune_from_env();
    // Test switches that take the path another device class takes, on this one (the same results):
    bool emulate_dot4        = false;  // the emulated dot4 kernels (adapters without packed dot4)
    bool subgroup_reductions = true;   // false: the barrier trees of lib/wg_reduce.wgsl (no subgroups)
    bool short_attention     = true;   // false: one query's attention keeps its general form
    // A file naming the pipelines a run used (pipeline_list.h): those it names are built on the
    // library's worker threads while the weights load, and it is rewritten at the end when this run
    // used others. Empty: none (the CLI passes one per model file under tern's cache folder).
    std::string pipeline_list;
    // A folder for Dawn's blob cache (WgpuDeviceOptions::blob_cache_dir). Empty: none.
    std::string blob_cache_dir;

    static bool        webgpu_allow_cpu_from_env();
    static std::string webgpu_tune_from_env();
};

// Throws Error(device) with the reason and a hint when no usable adapter exists.
std::unique_ptr<Backend> make_webgpu_backend(const WebGpuOptions & options = {});

}  // namespace tern
