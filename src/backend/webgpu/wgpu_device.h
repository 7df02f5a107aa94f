// The WebGPU instance, adapter and device of one backend: adapter selection and description,
// feature detection, limits raised to what the adapter allows, error capture, and waiting.
//
// Device rules (STYLE.md §2.3): every wait has a timeout and names its operation in the error;
// uncaptured errors and device loss are recorded by callbacks and thrown as Error(device) from
// check_errors() (called by the backend's synchronize() and read()); creation that can fail
// (shaders, pipelines, big buffers) runs inside an error scope.
#pragma once

#include "backend/webgpu/dawn_blob_cache.h"
#include "backend/webgpu/wgpu_handle.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace tern {

struct WgpuAdapterSummary {
    std::string name;          // "NVIDIA H200", "SwiftShader Device (Subzero)"
    std::string backend;       // "vulkan", "metal", ...
    std::string adapter_type;  // "discrete GPU", "integrated GPU", "CPU", "unknown"
    uint32_t    backend_type = 0;
    uint32_t    type         = 0;
    uint32_t    vendor_id = 0, device_id = 0;
    uint32_t    subgroup_min = 0, subgroup_max = 0;
    bool        is_cpu  = false;  // a software adapter (SwiftShader): correct, but slow
    bool        is_null = false;  // Dawn's null backend: no device at all
};

struct WgpuFeatures {
    bool shader_f16      = false;
    bool subgroups       = false;
    bool timestamp_query = false;
    bool dot4_i8_packed  = false;  // WGSL language feature packed_4x8_integer_dot_product
    // Dawn's ChromiumExperimentalSubgroupMatrix (tensor cores): only listed on an adapter requested
    // with the toggle allow_unsafe_apis, and this Dawn lists it on none of the adapters measured
    // (README "Prefill: the ternary GEMM").
    bool subgroup_matrix = false;
};

struct WgpuDeviceOptions {
    bool    allow_cpu_adapter = false;  // accept SwiftShader (tests set TERN_WEBGPU_ALLOW_CPU=1)
    int64_t timeout_ms        = 0;      // per wait; <= 0: $TERN_WEBGPU_TIMEOUT_MS or 120000
    // A folder for Dawn's blob cache (dawn_blob_cache.h): compiled shaders and pipeline caches kept for
    // the next run. Empty: none. Used with dawn.node only (the Dawn whose descriptor layout tern knows).
    std::string blob_cache_dir;
};

// What is there without creating a device: the adapter, or why there is none. Never throws.
struct WgpuProbe {
    std::optional<WgpuAdapterSummary> adapter;  // empty: no usable adapter
    std::string                       reason;   // why not (library missing, null backend, ...)
};
WgpuProbe probe_webgpu_adapter();

class WgpuContext {
public:
    // Throws Error(device): no library, no adapter, a CPU adapter without allow_cpu_adapter, or
    // device creation failed.
    explicit WgpuContext(const WgpuDeviceOptions & options);
    ~WgpuContext();
    WgpuContext(const WgpuContext &)             = delete;
    WgpuContext & operator=(const WgpuContext &) = delete;

    WGPUInstance instance() const { return instance_.get(); }
    WGPUDevice   device() const { return device_.get(); }
    WGPUQueue    queue() const { return queue_.get(); }

    const WgpuAdapterSummary & adapter() const { return adapter_; }
    const WgpuFeatures &       features() const { return features_; }
    const WGPULimits &         limits() const { return limits_; }  // the device's limits

    // Runs the instance's event loop until *done, or throws Error(device) "<what> timed out".
    void wait(const bool & done, const char * what) const;
    // Waits (with wait()'s timeout) until the queue has finished everything submitted so far.
    void wait_queue_idle(const char * what) const;
    // How long a wait yields the thread before it naps in short sleeps (WebGpuTuning::spin_us: 20 ms
    // on a GPU, where a sampled decode step is read back every ~2-3 ms, a served 64-stream step every
    // ~5-8 ms, and a 20 us nap lasts ~70 us, after which the host submits the next step slower; none
    // on a software adapter, whose worker threads need the CPU).
    void set_spin_us(int64_t us) { spin_us_ = us; }

    // Throws the first recorded device error (uncaptured error or device loss), if any.
    void check_errors();

    // Error scopes around a creation call: returns "" or the error message.
    void        push_error_scope() const;
    std::string pop_error_scope(const char * what) const;

    // One line for logs and `device_info()`: name, backend, type, features.
    std::string description() const;

    // Dawn's blob cache when WgpuDeviceOptions::blob_cache_dir gave one, else null.
    const DawnBlobCache * blob_cache() const { return blob_cache_.get(); }

private:
    struct ErrorState {
        std::mutex  mutex;
        std::string first_error;  // empty: none
        bool        lost = false;
    };

    std::unique_ptr<DawnBlobCache> blob_cache_;  // (first: outlives the device, whose threads call it)
    WgpuHandle<WGPUInstance>    instance_;
    WgpuHandle<WGPUAdapter>     adapter_handle_;
    WgpuHandle<WGPUDevice>      device_;
    WgpuHandle<WGPUQueue>       queue_;
    WgpuAdapterSummary          adapter_;
    WgpuFeatures                features_;
    WGPULimits                  limits_{};
    int64_t                     timeout_ms_ = 120000;
    int64_t                     spin_us_    = 0;  // wait(): microseconds of yielding before napping (set_spin_us)
    std::unique_ptr<ErrorState> errors_ = std::make_unique<ErrorState>();
};

// "vulkan", "CPU", ...
const char * wgpu_backend_name(uint32_t backend_type);
const char * wgpu_adapter_type_name(uint32_t adapter_type);

// A WGPUStringView of a std::string / literal (not null-terminated in general).
inline WGPUStringView wgpu_string(std::string_view s) { return {s.data(), s.size()}; }
inline std::string    to_string(WGPUStringView s) {
    if (!s.data) return {};
    return s.length == WGPU_STRLEN ? std::string(s.data) : std::string(s.data, s.length);
}

}  // namespace tern
