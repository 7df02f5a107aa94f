// Instance / adapter / device creation, feature detection, error callbacks and waits
// (wgpu_device.h).
#include "backend/webgpu/wgpu_device.h"

#include "core/error.h"
#include "core/log.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace tern {
namespace {

int64_t default_timeout_ms() {
    if (const char * env = std::getenv("TERN_WEBGPU_TIMEOUT_MS"); env && *env) {
        const long long v = std::atoll(env);
        if (v > 0) return v;
    }
    return 120000;
}

// Runs `instance`'s event loop until *done or the deadline: yields for the first spin_us
// microseconds (at least 64 times), then backs off to short sleeps so that a software adapter's
// worker threads keep the CPU. (A 20 us sleep lasts ~60-80 us on Linux: with a hardware GPU that
// is the latency between a step's end and the host noticing it.) In the browser build the wait is
// all in wgpuInstanceProcessEvents, which suspends the WebAssembly stack (JSPI) until a callback is
// queued (web/webgpu-library.js): there a yield does nothing and a sleep spins on the clock, keeping
// the JavaScript event loop, which completes the operation, from running.
bool wait_until(WGPUInstance instance, const bool & done, int64_t timeout_ms, int64_t spin_us = 0) {
    using clock     = std::chrono::steady_clock;
    const auto t0   = clock::now();
    int        spin = 0;
    while (true) {
        wgpu().wgpuInstanceProcessEvents(instance);
        if (done) return true;
        const auto waited = clock::now() - t0;
        if (waited > std::chrono::milliseconds(timeout_ms)) return false;
#ifdef __EMSCRIPTEN__
        continue;
#endif
        if (++spin < 64 || waited < std::chrono::microseconds(spin_us)) {
            std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(std::chrono::microseconds(spin < 256 ? 20 : 200));
        }
    }
}

// Diverts file descriptor 2 into a temporary file while adapters are enumerated: Dawn and the
// Vulkan loader print warnings there about every driver they reject (e.g. lavapipe), which is noise
// when tern only wants to know whether a GPU exists. text() returns what was caught, for errors.
class StderrCapture {
public:
    StderrCapture() {
        std::fflush(stderr);
        file_  = std::tmpfile();
        saved_ = file_ ? ::dup(2) : -1;
        if (saved_ >= 0) ::dup2(::fileno(file_), 2);
    }
    ~StderrCapture() { restore(); }
    std::string text() {
        restore();
        std::string out;
        if (!file_) return out;
        std::rewind(file_);
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0 && out.size() < 16384) out.append(buf, n);
        return out;
    }

private:
    void restore() {
        if (saved_ >= 0) {
            std::fflush(stderr);
            ::dup2(saved_, 2);
            ::close(saved_);
            saved_ = -1;
        }
    }
    std::FILE * file_  = nullptr;
    int         saved_ = -1;
};

// The first lines of what the driver stack printed, indented for an error message.
std::string driver_notes(const std::string & text) {
    std::string out;
    size_t      start = 0;
    int         lines = 0;
    while (start < text.size() && lines < 6) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(start, end - start);
        if (!line.empty() && line.find("XDG_RUNTIME_DIR") == std::string::npos) {
            out += "\n  driver: " + line;
            ++lines;
        }
        start = end + 1;
    }
    return out;
}

struct AdapterRequest {
    bool        done = false;
    uint32_t    status = 0;
    WGPUAdapter adapter = nullptr;
    std::string message;
};

WgpuHandle<WGPUInstance> create_instance() {
    WGPUInstance instance = wgpu().wgpuCreateInstance(nullptr);
    if (!instance) fail(ErrorKind::device, "webgpu: wgpuCreateInstance returned null");
    return WgpuHandle<WGPUInstance>(instance);
}

// Requests the high-performance adapter. Returns null with `why` filled when there is none.
// `toggles` (may be null) is chained to the request: Dawn lists experimental features such as
// ChromiumExperimentalSubgroupMatrix only on an adapter created with allow_unsafe_apis.
WgpuHandle<WGPUAdapter> request_adapter(WGPUInstance instance, int64_t timeout_ms, std::string & why,
                                        const WGPUDawnTogglesDescriptor * toggles = nullptr) {
    WGPURequestAdapterOptions options{};
    options.nextInChain     = toggles ? &toggles->chain : nullptr;
    options.featureLevel    = WGPU_FEATURE_LEVEL_CORE;
    options.powerPreference = WGPU_POWER_PREFERENCE_HIGH_PERFORMANCE;
    AdapterRequest req;
    WGPUCallbackInfo<WGPURequestAdapterCallback> cb{};
    cb.mode      = WGPU_CALLBACK_MODE_ALLOW_PROCESS_EVENTS;
    cb.userdata1 = &req;
    cb.callback  = [](uint32_t status, WGPUAdapter adapter, WGPUStringView message, void * u1, void *) {
        auto * r    = static_cast<AdapterRequest *>(u1);
        r->status   = status;
        r->adapter  = adapter;
        r->message  = to_string(message);
        r->done     = true;
    };
    wgpu().wgpuInstanceRequestAdapter(instance, &options, cb);
    if (!wait_until(instance, req.done, timeout_ms)) {
        fail(ErrorKind::device, format("webgpu: requesting an adapter timed out after %lld ms",
                                       static_cast<long long>(timeout_ms)));
    }
    if (req.status != WGPU_STATUS_SUCCESS || !req.adapter) {
        why = req.message.empty() ? "no WebGPU adapter was found" : "no WebGPU adapter: " + req.message;
        if (req.adapter) wgpu().wgpuAdapterRelease(req.adapter);
        return {};
    }
    return WgpuHandle<WGPUAdapter>(req.adapter);
}

WgpuAdapterSummary summarize(WGPUAdapter adapter) {
    WGPUAdapterInfo info{};
    WgpuAdapterSummary s;
    if (wgpu().wgpuAdapterGetInfo(adapter, &info) != WGPU_STATUS_SUCCESS) {
        s.name = "(unknown adapter)";
        return s;
    }
    s.name         = to_string(info.device);
    if (s.name.empty()) s.name = to_string(info.description);
    s.backend_type = info.backendType;
    s.type         = info.adapterType;
    s.backend      = wgpu_backend_name(info.backendType);
    s.adapter_type = wgpu_adapter_type_name(info.adapterType);
    s.vendor_id    = info.vendorID;
    s.device_id    = info.deviceID;
    s.subgroup_min = info.subgroupMinSize;
    s.subgroup_max = info.subgroupMaxSize;
    s.is_null      = info.backendType == WGPU_BACKEND_NULL;
    s.is_cpu       = info.adapterType == WGPU_ADAPTER_TYPE_CPU;
    wgpu().wgpuAdapterInfoFreeMembers(info);
    return s;
}

bool has_feature(const WGPUSupportedFeatures & f, uint32_t id) {
    for (size_t i = 0; i < f.featureCount; ++i) {
        if (f.features[i] == id) return true;
    }
    return false;
}

// Dawn toggles to enable / disable. By default `disable_robustness`: Tint then drops the clamp it
// puts on every array index (tern's kernels index inside shapes the host has validated; the clamps
// cost 11% of 2B4T decode on an H200); and `disable_workgroup_init`: no zeroing of workgroup memory
// at the start of every workgroup (tern's kernels write what they read; 2.5x faster on SwiftShader,
// no change on an H200). $TERN_WEBGPU_TOGGLES ("name,name,-name": a leading '-' disables) adds to or
// overrides that, a tuning and debugging aid ("-disable_robustness" turns the clamps back on;
// "allow_unsafe_apis" also goes to the adapter request, where it makes Dawn list its experimental
// features).
struct ToggleLists {
    std::vector<std::string> on = {"disable_robustness", "disable_workgroup_init"}, off;
};

ToggleLists toggle_lists() {
    ToggleLists t;
    // A Dawn of the v1.0 numbering (dawn.node) lists its subgroup matrices only with
    // allow_unsafe_apis (they are experimental; nothing else changes for what tern uses).
    if (load_wgpu_library().feature_ids.subgroup_matrix == k_feature_ids_v1.subgroup_matrix) {
        t.on.push_back("allow_unsafe_apis");
    }
    // GPU timestamps unquantized when profiling with them (Dawn rounds them to 100 us otherwise).
    if (const char * p = std::getenv("TERN_WEBGPU_PROFILE"); p && std::string_view(p) == "gpu") {
        t.off.push_back("timestamp_quantization");
    }
    if (const char * env = std::getenv("TERN_WEBGPU_TOGGLES"); env && *env) {
        const std::string list = env;
        for (size_t at = 0; at <= list.size();) {
            size_t end = list.find(',', at);
            if (end == std::string::npos) end = list.size();
            std::string name = list.substr(at, end - at);
            at               = end + 1;
            if (name.empty() || name == "-") continue;
            const bool off = name[0] == '-';
            if (off) name.erase(0, 1);
            std::erase(t.on, name);
            std::erase(t.off, name);
            (off ? t.off : t.on).push_back(name);
        }
    }
    return t;
}

}  // namespace

const char * wgpu_backend_name(uint32_t t) {
    switch (t) {
        case WGPU_BACKEND_NULL: return "null";
        case WGPU_BACKEND_WEBGPU: return "webgpu";
        case WGPU_BACKEND_D3D11: return "d3d11";
        case WGPU_BACKEND_D3D12: return "d3d12";
        case WGPU_BACKEND_METAL: return "metal";
        case WGPU_BACKEND_VULKAN: return "vulkan";
        case WGPU_BACKEND_OPENGL: return "opengl";
        case WGPU_BACKEND_OPENGLES: return "opengles";
        default: return "unknown";
    }
}

const char * wgpu_adapter_type_name(uint32_t t) {
    switch (t) {
        case WGPU_ADAPTER_TYPE_DISCRETE_GPU: return "discrete GPU";
        case WGPU_ADAPTER_TYPE_INTEGRATED_GPU: return "integrated GPU";
        case WGPU_ADAPTER_TYPE_CPU: return "CPU";
        default: return "unknown";
    }
}

WgpuProbe probe_webgpu_adapter() {
    WgpuProbe probe;
    try {
        load_wgpu_library();
        StderrCapture quiet;
        auto          instance = create_instance();
        std::string   why;
        auto          adapter = request_adapter(instance.get(), 30000, why);
        quiet.text();
        if (!adapter) {
            probe.reason = why;
            return probe;
        }
        WgpuAdapterSummary s = summarize(adapter.get());
        if (s.is_null) {
            probe.reason = "only Dawn's null backend is available (no Vulkan/Metal/D3D12 device)";
            return probe;
        }
        probe.adapter = s;
    } catch (const Error & e) {
        // One line: the first line of the message, without the "webgpu: " prefix and a dangling list.
        std::string r = e.what();
        r             = r.substr(0, r.find('\n'));
        if (r.rfind("webgpu: ", 0) == 0) r = r.substr(8);
        if (const size_t cut = r.rfind("; tried:"); cut != std::string::npos) r = r.substr(0, cut);
        probe.reason = r;
    }
    return probe;
}

WgpuContext::WgpuContext(const WgpuDeviceOptions & options) {
    load_wgpu_library();
    timeout_ms_ = options.timeout_ms > 0 ? options.timeout_ms : default_timeout_ms();
    ToggleLists toggle_names = toggle_lists();
    // The adapter gets the adapter-stage toggles of the list (allow_unsafe_apis, which exposes
    // experimental features, and use_vulkan_memory_model when named); the device the whole list.
    const auto listed = [](const std::vector<std::string> & list, std::string_view t) {
        return std::find(list.begin(), list.end(), t) != list.end();
    };
    std::vector<const char *> adapter_on;
    for (const char * t : {"allow_unsafe_apis", "use_vulkan_memory_model"}) {
        if (listed(toggle_names.on, t)) adapter_on.push_back(t);
    }
    const bool                adapter_stage = !adapter_on.empty();
    WGPUDawnTogglesDescriptor adapter_toggles{};
    adapter_toggles.chain.sType        = WGPU_STYPE_DAWN_TOGGLES_DESCRIPTOR;
    adapter_toggles.enabledToggleCount = adapter_on.size();
    adapter_toggles.enabledToggles     = adapter_on.data();
    std::string why, notes;
    {
        StderrCapture quiet;
        instance_       = create_instance();
        adapter_handle_ = request_adapter(instance_.get(), timeout_ms_, why, adapter_stage ? &adapter_toggles : nullptr);
        notes           = driver_notes(quiet.text());
    }
    if (!adapter_handle_) {
        fail(ErrorKind::device, "webgpu: " + why + notes,
             "install a GPU driver with Vulkan support, or run with --backend cpu");
    }
    adapter_ = summarize(adapter_handle_.get());
    if (adapter_.is_null) {
        fail(ErrorKind::device, "webgpu: only Dawn's null backend is available (no GPU device)" + notes,
             "install a GPU driver with Vulkan support, or run with --backend cpu");
    }
    if (adapter_.is_cpu && !options.allow_cpu_adapter) {
        fail(ErrorKind::device,
             format("webgpu: the only adapter is '%s', a CPU implementation (%s), which is far slower than "
                    "tern's CPU backend",
                    adapter_.name.c_str(), adapter_.backend.c_str()),
             "use --backend cpu (or auto); set TERN_WEBGPU_ALLOW_CPU=1 to run WebGPU on it anyway (tests do)");
    }

    // Dawn's validation of every recorded command is host time on every decode step: on a hardware
    // adapter it is skipped (`skip_validation`), unless $TERN_WEBGPU_TOGGLES names it (on or off).
    // H200 tg128 (medians of ten, three alternating rounds): 960.8-965.7 tokens/s against 952.3-957.0,
    // the host's time per token 0.84-0.86 ms against 0.88-1.00: the host was holding the device
    // back. Software adapters (SwiftShader, where CI runs every test) keep it, so the tests run
    // validated; `TERN_WEBGPU_TOGGLES=-skip_validation` turns it back on on a GPU.
    const bool validation_named =
        listed(toggle_names.on, "skip_validation") || listed(toggle_names.off, "skip_validation");
    if (!adapter_.is_cpu && !validation_named) toggle_names.on.push_back("skip_validation");
    std::vector<const char *> toggles_on, toggles_off;
    for (const std::string & t : toggle_names.on) toggles_on.push_back(t.c_str());
    for (const std::string & t : toggle_names.off) toggles_off.push_back(t.c_str());
    WGPUDawnTogglesDescriptor toggles{};
    toggles.chain.sType         = WGPU_STYPE_DAWN_TOGGLES_DESCRIPTOR;
    toggles.enabledToggleCount  = toggles_on.size();
    toggles.enabledToggles      = toggles_on.data();
    toggles.disabledToggleCount = toggles_off.size();
    toggles.disabledToggles     = toggles_off.data();

    // How long a wait yields before it naps (set_spin_us): none until the backend's tuning says.
    spin_us_ = 0;

    // Features: take what helps and is there.
    WGPUSupportedFeatures supported{};
    wgpu().wgpuAdapterGetFeatures(adapter_handle_.get(), &supported);
    std::vector<uint32_t> required;
    const WgpuFeatureIds & ids = load_wgpu_library().feature_ids;
    for (uint32_t id : {ids.shader_f16, ids.subgroups, ids.timestamp_query, ids.subgroup_matrix}) {
        if (has_feature(supported, id)) required.push_back(id);
    }
    features_.shader_f16      = has_feature(supported, ids.shader_f16);
    features_.subgroups       = has_feature(supported, ids.subgroups);
    features_.timestamp_query = has_feature(supported, ids.timestamp_query);
    features_.subgroup_matrix = has_feature(supported, ids.subgroup_matrix);
    wgpu().wgpuSupportedFeaturesFreeMembers(supported);
    WGPUSupportedWGSLLanguageFeatures wgsl{};
    wgpu().wgpuInstanceGetWGSLLanguageFeatures(instance_.get(), &wgsl);
    for (size_t i = 0; i < wgsl.featureCount; ++i) {
        if (wgsl.features[i] == WGPU_WGSL_FEATURE_PACKED_4X8_INTEGER_DOT_PRODUCT) features_.dot4_i8_packed = true;
    }
    wgpu().wgpuSupportedWGSLLanguageFeaturesFreeMembers(wgsl);

    // Limits: everything the adapter allows (the defaults cap bindings at 128 MiB, too small for a
    // 2B4T embedding). Filled by the library, so fields it appends keep valid values.
    WGPULimits wanted{};
    if (wgpu().wgpuAdapterGetLimits(adapter_handle_.get(), &wanted) != WGPU_STATUS_SUCCESS) {
        fail(ErrorKind::device, format("webgpu: cannot read the limits of adapter '%s'", adapter_.name.c_str()));
    }
    wanted.nextInChain = nullptr;

    struct DeviceRequest {
        bool        done = false;
        uint32_t    status = 0;
        WGPUDevice  device = nullptr;
        std::string message;
    } req;
    // Dawn's blob cache, after the toggles in the chain (dawn.node only: the layout of its Dawn).
#ifndef __EMSCRIPTEN__
    WGPUDawnCacheDeviceDescriptor cache{};
    if (!options.blob_cache_dir.empty() && load_wgpu_library().feature_ids.subgroup_matrix == k_feature_ids_v1.subgroup_matrix) {
        blob_cache_                = std::make_unique<DawnBlobCache>(options.blob_cache_dir);
        cache.chain.sType          = WGPU_STYPE_DAWN_CACHE_DEVICE_DESCRIPTOR;
        cache.isolationKey         = wgpu_string("tern");
        cache.load.callback        = [](size_t ks, const uint8_t * key, size_t vs, uint8_t * value, void * u1, void *) {
            return static_cast<DawnBlobCache *>(u1)->load(key, ks, value, vs);
        };
        cache.load.userdata1       = blob_cache_.get();
        cache.store.callback       = [](size_t ks, const uint8_t * key, size_t vs, const uint8_t * value, void * u1, void *) {
            static_cast<DawnBlobCache *>(u1)->store(key, ks, value, vs);
        };
        cache.store.userdata1      = blob_cache_.get();
        toggles.chain.next         = &cache.chain;
    }
#endif
    WGPUDeviceDescriptor desc{};
    desc.nextInChain                        = &toggles.chain;
    desc.label                              = wgpu_string("tern");
    desc.requiredFeatureCount               = required.size();
    desc.requiredFeatures                   = required.data();
    desc.requiredLimits                     = &wanted;
    desc.defaultQueue.label                 = wgpu_string("tern queue");
    desc.deviceLostCallbackInfo.mode        = WGPU_CALLBACK_MODE_ALLOW_SPONTANEOUS;
    desc.deviceLostCallbackInfo.userdata1   = errors_.get();
    desc.deviceLostCallbackInfo.callback    = [](const WGPUDevice *, uint32_t reason, WGPUStringView message, void * u1,
                                              void *) {
        if (reason == WGPU_DEVICE_LOST_REASON_DESTROYED || reason == WGPU_DEVICE_LOST_REASON_CALLBACK_CANCELLED) return;
        auto *                      st = static_cast<ErrorState *>(u1);
        std::lock_guard<std::mutex> lock(st->mutex);
        st->lost = true;
        if (st->first_error.empty()) st->first_error = "the device was lost: " + to_string(message);
    };
    desc.uncapturedErrorCallbackInfo.userdata1 = errors_.get();
    desc.uncapturedErrorCallbackInfo.callback  = [](const WGPUDevice *, uint32_t type, WGPUStringView message,
                                                   void * u1, void *) {
        auto *                      st = static_cast<ErrorState *>(u1);
        std::lock_guard<std::mutex> lock(st->mutex);
        if (st->first_error.empty()) {
            const char * kind = type == WGPU_ERROR_TYPE_OUT_OF_MEMORY ? "out of memory"
                                : type == WGPU_ERROR_TYPE_VALIDATION  ? "validation error"
                                                                      : "internal error";
            st->first_error = std::string(kind) + ": " + to_string(message);
        }
    };
    WGPUCallbackInfo<WGPURequestDeviceCallback> cb{};
    cb.mode      = WGPU_CALLBACK_MODE_ALLOW_PROCESS_EVENTS;
    cb.userdata1 = &req;
    cb.callback  = [](uint32_t status, WGPUDevice device, WGPUStringView message, void * u1, void *) {
        auto * r   = static_cast<DeviceRequest *>(u1);
        r->status  = status;
        r->device  = device;
        r->message = to_string(message);
        r->done    = true;
    };
    wgpu().wgpuAdapterRequestDevice(adapter_handle_.get(), &desc, cb);
    wait(req.done, "requesting the device");
    if (req.status != WGPU_STATUS_SUCCESS || !req.device) {
        fail(ErrorKind::device, format("webgpu: cannot create a device on '%s': %s", adapter_.name.c_str(),
                                       req.message.c_str()));
    }
    device_ = WgpuHandle<WGPUDevice>(req.device);
    queue_  = WgpuHandle<WGPUQueue>(wgpu().wgpuDeviceGetQueue(device_.get()));
    if (wgpu().wgpuDeviceGetLimits(device_.get(), &limits_) != WGPU_STATUS_SUCCESS) {
        fail(ErrorKind::device, "webgpu: cannot read the device limits");
    }
    limits_.nextInChain = nullptr;
    TERN_LOG_INFO("webgpu: %s", description().c_str());
}

WgpuContext::~WgpuContext() {
    if (device_) {
        queue_.reset();
        wgpu().wgpuDeviceDestroy(device_.get());
        device_.reset();
        wgpu().wgpuInstanceProcessEvents(instance_.get());
    }
    if (blob_cache_) {
        TERN_LOG_DEBUG("webgpu: Dawn's blob cache in %s: %llu hits, %llu misses, %llu stored", blob_cache_->dir().c_str(),
                       static_cast<unsigned long long>(blob_cache_->hits()),
                       static_cast<unsigned long long>(blob_cache_->misses()),
                       static_cast<unsigned long long>(blob_cache_->stores()));
    }
}

void WgpuContext::wait(const bool & done, const char * what) const {
    if (!wait_until(instance_.get(), done, timeout_ms_, spin_us_)) {
        fail(ErrorKind::device,
             format("webgpu: %s timed out after %lld ms on '%s'", what, static_cast<long long>(timeout_ms_),
                    adapter_.name.c_str()),
             "the GPU may be hung or very slow; TERN_WEBGPU_TIMEOUT_MS raises the limit");
    }
}

void WgpuContext::check_errors() {
    std::string message;
    {
        std::lock_guard<std::mutex> lock(errors_->mutex);
        message = errors_->first_error;
        if (!errors_->lost) errors_->first_error.clear();  // a lost device stays lost
    }
    if (!message.empty()) {
        fail(ErrorKind::device, format("webgpu: device '%s': %s", adapter_.name.c_str(), message.c_str()));
    }
}

void WgpuContext::push_error_scope() const {
    wgpu().wgpuDevicePushErrorScope(device_.get(), WGPU_ERROR_FILTER_VALIDATION);
    wgpu().wgpuDevicePushErrorScope(device_.get(), WGPU_ERROR_FILTER_OUT_OF_MEMORY);
}

std::string WgpuContext::pop_error_scope(const char * what) const {
    struct Pop {
        bool        done = false;
        uint32_t    type = WGPU_ERROR_TYPE_NO_ERROR;
        std::string message;
    } pops[2];
    std::string out;
    for (Pop & p : pops) {  // out-of-memory scope first (pushed last)
        WGPUCallbackInfo<WGPUPopErrorScopeCallback> cb{};
        cb.mode      = WGPU_CALLBACK_MODE_ALLOW_PROCESS_EVENTS;
        cb.userdata1 = &p;
        cb.callback  = [](uint32_t status, uint32_t type, WGPUStringView message, void * u1, void *) {
            auto * q = static_cast<Pop *>(u1);
            q->type  = status == WGPU_STATUS_SUCCESS ? type : WGPU_ERROR_TYPE_UNKNOWN;
            q->message = to_string(message);
            q->done  = true;
        };
        wgpu().wgpuDevicePopErrorScope(device_.get(), cb);
        wait(p.done, what);
        if (p.type != WGPU_ERROR_TYPE_NO_ERROR && out.empty()) {
            out = (p.type == WGPU_ERROR_TYPE_OUT_OF_MEMORY ? "out of GPU memory: " : "") +
                  (p.message.empty() ? std::string("unknown error") : p.message);
        }
    }
    return out;
}

std::string WgpuContext::description() const {
    return format("%s (%s, %s), f16: %s, subgroups: %s (%u-%u), subgroup matrices: %s, dot4I8Packed: %s, max binding "
                  "%.0f MiB",
                  adapter_.name.c_str(), adapter_.backend.c_str(), adapter_.adapter_type.c_str(),
                  features_.shader_f16 ? "yes" : "no", features_.subgroups ? "yes" : "no", adapter_.subgroup_min,
                  adapter_.subgroup_max, features_.subgroup_matrix ? "yes" : "no", features_.dot4_i8_packed ? "yes" : "no",
                  static_cast<double>(limits_.maxStorageBufferBindingSize) / (1024.0 * 1024.0));
}

void WgpuContext::wait_queue_idle(const char * what) const {
    bool done = false;
    WGPUCallbackInfo<WGPUQueueWorkDoneCallback> cb{};
    cb.mode      = WGPU_CALLBACK_MODE_ALLOW_PROCESS_EVENTS;
    cb.userdata1 = &done;
    cb.callback  = [](uint32_t, WGPUStringView, void * u1, void *) { *static_cast<bool *>(u1) = true; };
    wgpu().wgpuQueueOnSubmittedWorkDone(queue(), cb);
    wait(done, what);
}

}  // namespace tern
