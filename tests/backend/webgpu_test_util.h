// The WebGPU backend for tests: one shared instance per test process (creating a device and
// compiling pipelines is the slow part on SwiftShader), made with the CPU adapter allowed. When
// there is no adapter (or no library) it is null and `reason` says why, for GTEST_SKIP.
#pragma once

#include "backend/webgpu/webgpu_backend.h"
#include "backend/webgpu/wgpu_device.h"
#include "core/error.h"

#include <map>
#include <memory>
#include <string>

namespace tern::test {

struct SharedWebGpu {
    std::shared_ptr<Backend> backend;
    std::string              reason;  // why backend is null
};

inline const SharedWebGpu & shared_webgpu() {
    static const SharedWebGpu shared = [] {
        SharedWebGpu s;
        try {
            WebGpuOptions o;
            o.allow_cpu_adapter = true;
            o.tune              = "head_i8_min_bytes=0";  // the int8 greedy head on the tests' small tables too
            s.backend           = make_webgpu_backend(o);
        } catch (const Error & e) {
            s.reason = std::string("no WebGPU device: ") + e.what();
        }
        return s;
    }();
    return shared;
}

// A second WebGPU backend with WebGpuTuning keys `tune` (e.g. "family_acts=0"), made once per test
// process and tune string, with the CPU adapter allowed. Call it only where shared_webgpu() has one.
inline Backend * tuned_webgpu(const std::string & tune) {
    static std::map<std::string, std::unique_ptr<Backend>> made;
    std::unique_ptr<Backend> & b = made[tune];
    if (!b) {
        WebGpuOptions o;
        o.allow_cpu_adapter = true;
        o.tune              = tune;
        b                   = make_webgpu_backend(o);
    }
    return b.get();
}

// A bare device (no backend) for tests of the device layer (shader modules, pipeline caches), made once
// per test process with the CPU adapter allowed; null when there is none.
inline WgpuContext * shared_wgpu_context() {
    static const std::unique_ptr<WgpuContext> ctx = [] {
        std::unique_ptr<WgpuContext> c;
        try {
            WgpuDeviceOptions o;
            o.allow_cpu_adapter = true;
            c                   = std::make_unique<WgpuContext>(o);
        } catch (const Error &) {
        }
        return c;
    }();
    return ctx.get();
}

// Whether `b` runs on a CPU adapter (SwiftShader): bit-exact everywhere, and slow.
inline bool is_cpu_adapter(const Backend & b) {
    return b.device_info().description.find(", CPU)") != std::string::npos;
}

}  // namespace tern::test

// Skips the current test when no WebGPU device is available, with the reason.
#define TERN_REQUIRE_WEBGPU()                                                              \
    do {                                                                                    \
        if (!::tern::test::shared_webgpu().backend) GTEST_SKIP() << ::tern::test::shared_webgpu().reason; \
    } while (0)
