// WebGpuBackend: device, memory, weight upload, reads/writes and synchronization. The op encoders
// are in webgpu_ops.cpp.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"
#include "core/log.h"
#include "quant/ternary_formats.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace tern {

bool WebGpuOptions::webgpu_allow_cpu_from_env() {
    const char * env = std::getenv("TERN_WEBGPU_ALLOW_CPU");
    return env && std::string_view(env) == "1";
}

std::string WebGpuOptions::webgpu_tune_from_env() {
    const char * env = std::getenv("TERN_WEBGPU_TUNE");
    return env ? env : "";
}

namespace {

constexpr WGPUFlags k_storage_usage =
    WGPU_BUFFER_USAGE_STORAGE | WGPU_BUFFER_USAGE_COPY_SRC | WGPU_BUFFER_USAGE_COPY_DST;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

WgpuDeviceOptions device_options(const WebGpuOptions & o) {
    WgpuDeviceOptions d;
    d.allow_cpu_adapter = o.allow_cpu_adapter;
    d.timeout_ms        = o.timeout_ms;
    return d;
}

}  // namespace

GpuBuffer::~GpuBuffer() {
    if (auto step = step_.lock(); step && buffer_) step->forget(buffer_.get());
}

WGPUBuffer gpu_buffer(const Tensor & t) {
    const auto * b = dynamic_cast<const GpuBuffer *>(t.buffer);
    TERN_ASSERT(b != nullptr, "tensor is not in a WebGPU buffer");
    TERN_ASSERT(t.offset + t.n_bytes() <= b->size_bytes(), "tensor view past the end of its buffer");
    return b->get();
}

const GpuLinear & as_linear(const Weight & w) {
    const auto * l = dynamic_cast<const GpuLinear *>(&w);
    TERN_ASSERT(l != nullptr, "weight was not loaded by the WebGPU backend as a linear");
    return *l;
}

const GpuNorm & as_norm(const Weight & w) {
    const auto * n = dynamic_cast<const GpuNorm *>(&w);
    TERN_ASSERT(n != nullptr, "norm was not loaded by the WebGPU backend");
    return *n;
}

const GpuTable & as_table(const Weight & w) {
    const auto * t = dynamic_cast<const GpuTable *>(&w);
    TERN_ASSERT(t != nullptr, "table was not loaded by the WebGPU backend as an embedding / LM head");
    return *t;
}

uint32_t u32(int64_t v) {
    TERN_ASSERT(v >= 0 && v <= static_cast<int64_t>(UINT32_MAX), "value %lld does not fit a u32",
                static_cast<long long>(v));
    return static_cast<uint32_t>(v);
}

uint32_t ceil_div(int64_t a, int64_t b) { return u32((a + b - 1) / b); }

uint32_t floor_pow2(uint64_t v) {
    uint32_t p = 1;
    while (static_cast<uint64_t>(p) * 2 <= v) p *= 2;
    return p;
}

uint32_t gpu_offset(const Tensor & t, size_t unit) {
    TERN_ASSERT(t.offset % unit == 0, "tensor offset %zu is not a multiple of %zu bytes", t.offset, unit);
    return static_cast<uint32_t>(t.offset / unit);
}

WebGpuBackend::WebGpuBackend(const WebGpuOptions & options)
    : ctx_(device_options(options)), pipelines_(ctx_), step_(std::make_shared<StepEncoder>(ctx_, pipelines_)) {
    tune_ = WebGpuTuning::for_adapter(ctx_.adapter());
    tune_.apply(options.tune);
    check_tuned_tilings();
    ctx_.set_spin_us(tune_.spin_us);
    TERN_LOG_DEBUG("webgpu: tuning %s", tune_.describe().c_str());
    dot4_native_ = ctx_.features().dot4_i8_packed && !options.emulate_dot4;
    probe_numerics();
    if (!options.subgroup_reductions) {
        subgroup_note_ = "off";
    } else if (!ctx_.features().subgroups) {
        subgroup_note_ = "no subgroups";
    } else {
        subgroup_note_ = probe_subgroups();
    }
    // The 32-invocation teams of lib/sum_squares.wgsl shuffle where subgroups are that wide.
    if (subgroup_note_.empty() && ctx_.adapter().subgroup_min >= 32) pipelines_.set_constant("SG32", 1.0);
    // lib/attention_core.wgsl's score rows gathered by shuffles need them at least that wide.
    if (subgroup_note_.empty()) pipelines_.set_constant("SG_MIN", static_cast<double>(ctx_.adapter().subgroup_min));
    // The decode matmuls' teams of 32 lanes or more sum in registers: one subgroupAdd per 32 lanes
    // where every subgroup is exactly 32 wide, else shuffles (lib/ternary_decode.wgsl).
    lane_sums_sg_ = subgroup_note_.empty();
    if (lane_sums_sg_) {
        pipelines_.set_constant("LANE_GROUP", std::min(32.0, static_cast<double>(ctx_.adapter().subgroup_min)));
        if (ctx_.adapter().subgroup_min == 32 && ctx_.adapter().subgroup_max == 32) {
            pipelines_.set_constant("SG_EXACT32", 1.0);
            attention_short_ok_ = options.short_attention;
        }
    }
    mma_unit();
}

std::vector<int32_t> WebGpuBackend::subgroup_matrix_probe_product(const std::vector<int8_t> & a,
                                                                 const std::vector<int8_t> & b_cols) {
    std::vector<int32_t> c(16 * 32, 0);  // columns 0..15 stay as the probe wrote them (0)
    for (int i = 0; i < 16; ++i) {
        for (int j = 0; j < 16; ++j) {
            int32_t s = 0;
            for (int k = 32; k < 64; ++k) s += int32_t{a[i * 64 + k]} * int32_t{b_cols[j * 64 + k]};
            c[static_cast<size_t>(i * 32 + 16 + j)] = s;
        }
    }
    return c;
}

WebGpuBackend::MatrixProbe WebGpuBackend::subgroup_matrix_probe(const std::vector<int8_t> & a,
                                                               const std::vector<int8_t> & b_cols, uint32_t unit) {
    TERN_ASSERT(a.size() == 16 * 64 && b_cols.size() == 16 * 64 && (unit == 1 || unit == 4),
                "subgroup_matrix_probe sizes");
    MatrixProbe out;
    if (!ctx_.features().subgroup_matrix) {
        out.error = "the adapter has no subgroup matrices";
        return out;
    }
    auto ta = alloc_tensor(*this, DType::i32, {256, 1, 1, 1}, "matrix probe a");
    auto tb = alloc_tensor(*this, DType::i32, {256, 1, 1, 1}, "matrix probe b");
    auto tc = alloc_tensor(*this, DType::i32, {512, 1, 1, 1}, "matrix probe c");
    write(ta.tensor, a.data(), a.size());
    write(tb.tensor, b_cols.data(), b_cols.size());
    const std::vector<int32_t> zeros(512, 0);
    write(tc.tensor, zeros.data(), zeros.size() * 4);
    const uint32_t    params[2] = {32 / unit, 64 / unit};
    const PipelineKey key{"subgroup_matrix_probe", "rrwu", {}};
    const WGPUBuffer  bufs[] = {gpu_buffer(ta.tensor), gpu_buffer(tb.tensor), gpu_buffer(tc.tensor)};
    out.c.resize(512);
    try {
        step_->dispatch(key, bufs, params, sizeof params, 1);
        step_->take_dispatch_count();
        read(tc.tensor, out.c.data(), out.c.size() * 4);
    } catch (const Error & e) {
        out.c.clear();
        out.error = e.what();
    }
    return out;
}

std::string WebGpuBackend::probe_subgroups() {
    for (uint32_t wg : {64u, 256u}) {
        auto           to        = alloc_tensor(*this, DType::i32, {4 * static_cast<int64_t>(wg), 1, 1, 1}, "subgroup probe");
        const uint32_t params[1] = {0};
        const PipelineKey key{"subgroup_probe", "wu", {{{"WG", static_cast<double>(wg)}}}};
        const WGPUBuffer  bufs[] = {gpu_buffer(to.tensor)};
        std::vector<uint32_t> out(4 * wg);
        try {
            step_->dispatch(key, bufs, params, sizeof params, 1);
            step_->take_dispatch_count();
            read(to.tensor, out.data(), out.size() * 4);
        } catch (const Error & e) {
            TERN_LOG_WARN("webgpu: the subgroup probe failed (%s); using barrier-tree reductions", e.what());
            return "probe failed";
        }
        for (uint32_t lid = 0; lid < wg; ++lid) {
            const uint32_t sid = out[4 * lid], size = out[4 * lid + 1], active = out[4 * lid + 2], first = out[4 * lid + 3];
            const bool pow2 = size != 0 && (size & (size - 1)) == 0;
            if (!pow2 || size > wg || active != size || sid != lid % size || first != lid - sid) {
                TERN_LOG_INFO("webgpu: subgroups are not aligned contiguous ranges of invocations (workgroup %u, "
                              "invocation %u: lane %u, size %u, active %u, first %u); using barrier-tree reductions",
                              wg, lid, sid, size, active, first);
                return format("not contiguous (size %u)", size);
            }
        }
    }
    pipelines_.set_subgroup_variants(true);
    return "";
}

void WebGpuBackend::probe_numerics() {
    // Inputs where an unfused fma(a, b, -(a * b)) is 0 but the exact residual is not, where a
    // division or square root approximated to 1-2 ulp would show, and where a contracted
    // a * b + c (c = -(a * b) rounded) gives the product's rounding error instead of 0.
    constexpr int      n = 256;
    std::vector<float> a(n), bc(2 * n);
    uint32_t           state = 12345;
    auto               next  = [&] {
        state = state * 1664525u + 1013904223u;
        return 1.0f + static_cast<float>(state >> 8) / 16777216.0f;
    };
    int inexact = 0;  // products that are not exact in f32 (where fused and unfused results differ)
    for (int i = 0; i < n; ++i) {
        a[i]  = next() * 37.0f;
        bc[i] = next() * 3.0f;
        // The double product of two floats is exact; rounding it to float is the f32 product.
        const double exact = static_cast<double>(a[i]) * static_cast<double>(bc[i]);
        const float  prod  = static_cast<float>(exact);
        bc[n + i]          = -prod;
        inexact += exact != static_cast<double>(prod);
    }
    auto ta = alloc_tensor(*this, DType::f32, {n, 1, 1, 1}, "probe a");
    auto tb = alloc_tensor(*this, DType::f32, {2 * n, 1, 1, 1}, "probe b");
    auto to = alloc_tensor(*this, DType::f32, {5 * n, 1, 1, 1}, "probe out");
    write(ta.tensor, a.data(), a.size() * 4);
    write(tb.tensor, bc.data(), bc.size() * 4);
    const uint32_t    params[1] = {n};  // then rn_zero = 0 (the encoder zero-fills the slot)
    const PipelineKey key{"numerics_probe", "rrwu", {}};
    const WGPUBuffer  bufs[] = {gpu_buffer(ta.tensor), gpu_buffer(tb.tensor), gpu_buffer(to.tensor)};
    step_->dispatch(key, bufs, params, sizeof params, n / 64);
    step_->take_dispatch_count();
    std::vector<float> out(5 * n);
    read(to.tensor, out.data(), out.size() * 4);
    numerics_.fma_fused      = false;
    numerics_.contracts      = false;
    numerics_.mul_rn_rounds  = true;
    numerics_.probe_inexact  = inexact;
    for (int i = 0; i < n; ++i) {
        numerics_.fma_fused     = numerics_.fma_fused || out[5 * i] != 0.0f;
        numerics_.div_ieee      = numerics_.div_ieee && out[5 * i + 1] == a[i] / bc[i];
        numerics_.sqrt_ieee     = numerics_.sqrt_ieee && out[5 * i + 2] == std::sqrt(a[i]);
        numerics_.contracts     = numerics_.contracts || out[5 * i + 3] != 0.0f;
        numerics_.mul_rn_rounds = numerics_.mul_rn_rounds && out[5 * i + 4] == 0.0f;
    }
    pipelines_.set_constant("FMA_FUSED", numerics_.fma_fused ? 1.0 : 0.0);
    if (!numerics_.fma_fused && (!numerics_.div_ieee || !numerics_.sqrt_ieee)) {
        TERN_LOG_WARN("webgpu: '%s' has neither a fused fma nor IEEE division/sqrt; results will differ from the "
                      "CPU backend in the last bits",
                      ctx_.adapter().name.c_str());
    }
    if (!numerics_.mul_rn_rounds) {
        TERN_LOG_WARN("webgpu: '%s' fuses products into additions even through mul_rn; results will differ from "
                      "the CPU backend in the last bits",
                      ctx_.adapter().name.c_str());
    }
    TERN_LOG_INFO("webgpu: numerics: fma %s, division %s, sqrt %s, a*b+c %s, mul_rn %s (%d of %d probe products "
                  "inexact)",
                  numerics_.fma_fused ? "fused" : "not fused", numerics_.div_ieee ? "IEEE" : "approximate",
                  numerics_.sqrt_ieee ? "IEEE" : "approximate", numerics_.contracts ? "contracted" : "not contracted",
                  numerics_.mul_rn_rounds ? "rounds" : "CONTRACTED", inexact, n);
}

std::vector<uint32_t> WebGpuBackend::scalar_values(ScalarFn fn, uint32_t start, uint32_t stride, uint32_t count) {
    TERN_ASSERT(count > 0 && count <= 65535u * 256u, "scalar_values: 1 .. 65535 x 256 patterns per call");
    auto        to = alloc_tensor(*this, DType::i32, {count, 1, 1, 1}, "scalar values");
    PipelineKey key{"scalar_values", "wu", {}};
    key.add("FN", static_cast<double>(fn));
    const WGPUBuffer bufs[]    = {gpu_buffer(to.tensor)};
    const uint32_t   params[3] = {start, stride, count};
    step_->dispatch(key, bufs, params, sizeof params, (count + 255) / 256);
    step_->take_dispatch_count();
    std::vector<uint32_t> out(count);
    read(to.tensor, out.data(), out.size() * 4);
    return out;
}

std::vector<float> WebGpuBackend::numerics_check(std::span<const float> a, std::span<const float> b,
                                                 std::span<const float> v) {
    const int64_t n = static_cast<int64_t>(a.size());
    TERN_ASSERT(b.size() == a.size() && v.size() == a.size() * 32, "numerics_check sizes");
    auto ta = alloc_tensor(*this, DType::f32, {n, 1, 1, 1}, "check a");
    auto tb = alloc_tensor(*this, DType::f32, {n, 1, 1, 1}, "check b");
    auto tv = alloc_tensor(*this, DType::f32, {32 * n, 1, 1, 1}, "check v");
    auto to = alloc_tensor(*this, DType::f32, {11 * n, 1, 1, 1}, "check out");
    write(ta.tensor, a.data(), a.size() * 4);
    write(tb.tensor, b.data(), b.size() * 4);
    write(tv.tensor, v.data(), v.size() * 4);
    const uint32_t    params[1] = {static_cast<uint32_t>(n)};
    const PipelineKey key{"numerics_check", "rrrwu", {}};
    const WGPUBuffer  bufs[] = {gpu_buffer(ta.tensor), gpu_buffer(tb.tensor), gpu_buffer(tv.tensor),
                                gpu_buffer(to.tensor)};
    step_->dispatch(key, bufs, params, sizeof params, static_cast<uint32_t>((n + 63) / 64));
    step_->take_dispatch_count();
    std::vector<float> out(static_cast<size_t>(11 * n));
    read(to.tensor, out.data(), out.size() * 4);
    return out;
}

void WebGpuBackend::set_steps_per_submit(int64_t n) { steps_per_submit_ = std::max<int64_t>(1, n); }

// The first step after the device idled goes out in pieces of 8, 16, 32 and 64 dispatches (then
// the rest with the step): the device starts after the first few dispatches are recorded instead
// of after the whole step (the host records a dispatch in about half the time the device runs it,
// so each piece is recorded while the device runs the one before). H100 tg128 (three alternating
// rounds): 910.7-912.8 tokens/s against 905.7-909.6 on a machine whose host took 0.87-1.05 ms per
// step; within noise (907.0-909.7 either way) on one whose host took 0.6-0.9 ms; pieces from 4
// or 16 no better (WebGpuTuning::first_submit).
void WebGpuBackend::start_from_idle() {
    if (tune_.first_submit > 0) step_->ramp_submits(tune_.first_submit, 8 * size_t{tune_.first_submit});
}

WebGpuBackend::~WebGpuBackend() {
    try {
        step_->flush();
        // A map request still pending points at read_ahead_: let it finish first.
        if (read_ahead_.in_flight) ctx_.wait(read_ahead_.done, "a read left in flight");
    } catch (...) {  // destructors do not throw; a lost device has nothing left to flush
    }
    ropes_.clear();
}

DeviceInfo WebGpuBackend::device_info() const {
    return {ctx_.adapter().name, "webgpu: " + ctx_.description() + (dot4_native_ ? "" : ", dot4 emulated") +
                                     (numerics_.fma_fused ? "" : ", fma not fused") +
                                     (numerics_.contracts ? ", contracts a*b+c" : "") +
                                     (numerics_.mul_rn_rounds ? "" : ", mul_rn contracted") +
                                     ", reductions: " +
                                     (subgroup_note_.empty() ? "subgroups" : "barrier tree (" + subgroup_note_ + ")") +
                                     (attention_short_ok_ ? ", short attention" : "")};
}

bool WebGpuBackend::supports_linear(DType type) const { return dtype_is_lowbit(type); }

bool WebGpuBackend::supports_embedding(DType type) const {
    return type != DType::i2_s && type != DType::i8 && type != DType::i32;
}

WGPUBuffer WebGpuBackend::grown(std::unique_ptr<GpuBuffer> & b, size_t n_bytes, const char * label) {
    if (!b || b->size_bytes() < n_bytes) {
        step_->run_deferred();  // (a deferred dispatch may bind the buffer replaced here)
        b = make_buffer(n_bytes, nullptr, label);
    }
    return b->get();
}

std::unique_ptr<GpuBuffer> WebGpuBackend::make_buffer(size_t n_bytes, const void * data, const char * label) {
    const size_t size = round_up(std::max<size_t>(n_bytes, 16), 16);
    const auto & lim  = ctx_.limits();
    if (size > lim.maxBufferSize || size > lim.maxStorageBufferBindingSize) {
        fail(ErrorKind::device,
             format("webgpu: '%s' needs a %.1f MiB buffer; adapter '%s' allows %.1f MiB per buffer and %.1f MiB per "
                    "binding",
                    label, static_cast<double>(size) / 1048576.0, ctx_.adapter().name.c_str(),
                    static_cast<double>(lim.maxBufferSize) / 1048576.0,
                    static_cast<double>(lim.maxStorageBufferBindingSize) / 1048576.0),
             "use a smaller model or context, or --backend cpu");
    }
    WGPUBufferDescriptor desc{};
    desc.label = wgpu_string(label ? label : "tern");
    desc.usage = k_storage_usage;
    desc.size  = size;
    ctx_.push_error_scope();
    WgpuHandle<WGPUBuffer> buffer(wgpu().wgpuDeviceCreateBuffer(ctx_.device(), &desc));
    if (std::string err = ctx_.pop_error_scope("creating a buffer"); !err.empty()) {
        fail(ErrorKind::device, format("webgpu: cannot allocate '%s' (%.1f MiB) on '%s': %s", label,
                                       static_cast<double>(size) / 1048576.0, ctx_.adapter().name.c_str(), err.c_str()),
             "the model or context may not fit in GPU memory; try a smaller -c, or --backend cpu");
    }
    auto out = std::make_unique<GpuBuffer>(step_, std::move(buffer), size);
    if (data && n_bytes > 0) {
        // queueWriteBuffer needs a multiple of 4 bytes: copy through a padded staging vector if needed.
        if (n_bytes % 4 == 0) {
            wgpu().wgpuQueueWriteBuffer(ctx_.queue(), out->get(), 0, data, n_bytes);
        } else {
            std::vector<uint8_t> padded(round_up(n_bytes, 4), 0);
            std::memcpy(padded.data(), data, n_bytes);
            wgpu().wgpuQueueWriteBuffer(ctx_.queue(), out->get(), 0, padded.data(), padded.size());
        }
    }
    return out;
}

std::unique_ptr<Buffer> WebGpuBackend::alloc(size_t n_bytes, const char * label) {
    return make_buffer(n_bytes, nullptr, label ? label : "tensor");
}

void WebGpuBackend::write(const Tensor & dst, const void * src, size_t n_bytes) {
    TERN_ASSERT(n_bytes <= dst.n_bytes(), "write of %zu bytes into a %zu-byte tensor", n_bytes, dst.n_bytes());
    if (n_bytes == 0) return;
    WGPUBuffer buffer = gpu_buffer(dst);
    step_->flush();  // recorded ops run before this write, in queue order
    step_->bump();   // a write between the LM head and argmax invalidates the head's partials
    const size_t first = dst.offset & ~size_t{3};
    const size_t end   = round_up(dst.offset + n_bytes, 4);
    if (first == dst.offset && end == dst.offset + n_bytes) {
        wgpu().wgpuQueueWriteBuffer(ctx_.queue(), buffer, dst.offset, src, n_bytes);
        return;
    }
    // Unaligned: read the enclosing words, patch them, write them back.
    std::vector<uint8_t> words(end - first);
    Tensor               span = dst;
    span.offset               = first;
    span.type                 = DType::i8;
    span.ne                   = {static_cast<int64_t>(end - first), 1, 1, 1};
    read(span, words.data(), words.size());
    std::memcpy(words.data() + (dst.offset - first), src, n_bytes);
    wgpu().wgpuQueueWriteBuffer(ctx_.queue(), buffer, first, words.data(), words.size());
}

void WebGpuBackend::start_readback(Readback & r, const Tensor & src, size_t n_bytes) {
    TERN_ASSERT(!r.in_flight, "a read is already in flight there (read_begin twice without read_end)");
    WGPUBuffer   buffer = gpu_buffer(src);
    const size_t first  = src.offset & ~size_t{3};
    const size_t size   = round_up(src.offset + n_bytes, 4) - first;
    if (r.capacity < size) {
        r.buffer.reset();
        WGPUBufferDescriptor desc{};
        desc.label  = wgpu_string("tern readback");
        desc.usage  = WGPU_BUFFER_USAGE_MAP_READ | WGPU_BUFFER_USAGE_COPY_DST;
        desc.size   = round_up(size, 4096);
        r.buffer    = WgpuHandle<WGPUBuffer>(wgpu().wgpuDeviceCreateBuffer(ctx_.device(), &desc));
        r.capacity  = desc.size;
    }
    step_->copy(buffer, first, r.buffer.get(), 0, size);
    step_->flush();
    r.size    = size;
    r.skip    = src.offset - first;
    r.n_bytes = n_bytes;
    r.done    = false;
    r.status  = 0;
    r.message.clear();
    WGPUCallbackInfo<WGPUBufferMapCallback> cb{};
    cb.mode      = WGPU_CALLBACK_MODE_ALLOW_PROCESS_EVENTS;
    cb.userdata1 = &r;
    cb.callback  = [](uint32_t status, WGPUStringView message, void * u1, void *) {
        auto * m    = static_cast<Readback *>(u1);
        m->status   = status;
        m->message  = to_string(message);
        m->done     = true;
    };
    wgpu().wgpuBufferMapAsync(r.buffer.get(), WGPU_MAP_MODE_READ, 0, size, cb);
    r.in_flight = true;
}

void WebGpuBackend::finish_readback(Readback & r, void * dst) {
    TERN_ASSERT(r.in_flight, "finish_readback without start_readback");
    try {
        ctx_.wait(r.done, "reading a buffer back");
    } catch (...) {
        r.buffer.reset();  // it may still become mapped: never submit with it again
        r.capacity  = 0;
        r.in_flight = false;
        throw;
    }
    r.in_flight = false;
    if (r.status == WGPU_STATUS_SUCCESS) {
        const void * mapped = wgpu().wgpuBufferGetConstMappedRange(r.buffer.get(), 0, r.size);
        if (mapped) std::memcpy(dst, static_cast<const uint8_t *>(mapped) + r.skip, r.n_bytes);
        wgpu().wgpuBufferUnmap(r.buffer.get());
        TERN_ASSERT(mapped != nullptr, "mapped range is null");
    }
    ctx_.check_errors();
    if (r.status != WGPU_STATUS_SUCCESS) {
        fail(ErrorKind::device, format("webgpu: mapping the readback buffer failed: %s", r.message.c_str()));
    }
}

void WebGpuBackend::read(const Tensor & src, void * dst, size_t n_bytes) {
    TERN_ASSERT(n_bytes <= src.n_bytes(), "read of %zu bytes from a %zu-byte tensor", n_bytes, src.n_bytes());
    if (n_bytes == 0) return;
    start_readback(read_back_, src, n_bytes);
    finish_readback(read_back_, dst);
}

void WebGpuBackend::read_begin(const Tensor & src, size_t n_bytes) {
    TERN_ASSERT(n_bytes <= src.n_bytes(), "read of %zu bytes from a %zu-byte tensor", n_bytes, src.n_bytes());
    TERN_ASSERT(n_bytes > 0, "read_begin of 0 bytes");
    start_readback(read_ahead_, src, n_bytes);
}

void WebGpuBackend::read_end(void * dst) {
    finish_readback(read_ahead_, dst);
}

void WebGpuBackend::synchronize() {
    step_->flush();
    ctx_.wait_queue_idle("waiting for submitted work");
    ctx_.check_errors();
}

std::unique_ptr<Weight> WebGpuBackend::load_norm(const WeightSource & src) {
    const std::vector<float> w = gpu_pack_norm(src);
    auto                     n = std::make_unique<GpuNorm>();
    n->n_rows                  = 1;
    n->n_cols                  = src.ne[0];
    n->buffer                  = make_buffer(w.size() * 4, w.data(), src.name.c_str());
    n->n_bytes                 = w.size() * 4;
    return n;
}

std::unique_ptr<Weight> WebGpuBackend::load_linear(std::span<const WeightSource> parts) {
    const GpuLinearLayout layout = gpu_pack_linear(parts);
    auto                  w      = std::make_unique<GpuLinear>();
    w->n_rows                    = layout.n_rows;
    w->n_cols                    = layout.n_cols;
    w->group                     = layout.group;
    w->n_groups                  = layout.n_groups;
    w->scales_offset             = static_cast<uint32_t>(layout.scales_offset);
    w->oscales_offset            = static_cast<uint32_t>(layout.oscales_offset);
    w->buffer = make_buffer(layout.words.size() * 4, layout.words.data(), parts[0].name.c_str());
    w->n_bytes = layout.words.size() * 4;
    return w;
}

std::unique_ptr<Weight> WebGpuBackend::load_embedding(const WeightSource & src) {
    const GpuTableLayout t = gpu_pack_table(src);
    auto                 e = std::make_unique<GpuTable>();
    e->n_cols              = src.ne[0];
    e->n_rows              = src.ne[1];
    e->f16                 = t.f16;
    e->buffer              = make_buffer(t.words.size() * 4, t.words.data(), src.name.c_str());
    e->n_bytes             = t.words.size() * 4;
    // Greedy decoding streams the int8 copy of a large F16 head: int8 rows + (s, c, sq, 0) each.
    if (greedy_head_i8_applies(*e)) e->n_bytes_ids = static_cast<size_t>(e->n_rows) * static_cast<size_t>(e->n_cols + 16);
    return e;
}

double WebGpuBackend::measure_copy_bandwidth(size_t n_bytes) {
    synchronize();
    const uint64_t max_size = std::min<uint64_t>(ctx_.limits().maxBufferSize, ctx_.limits().maxStorageBufferBindingSize);
    const uint64_t size     = round_up(std::max<uint64_t>(std::min<uint64_t>(n_bytes, max_size / 2), 4096), 256);
    WgpuHandle<WGPUBuffer> bufs[2];
    for (auto & b : bufs) {
        WGPUBufferDescriptor desc{};
        desc.label = wgpu_string("tern copy bandwidth");
        desc.usage = k_storage_usage;
        desc.size  = size;
        ctx_.push_error_scope();
        b = WgpuHandle<WGPUBuffer>(wgpu().wgpuDeviceCreateBuffer(ctx_.device(), &desc));
        if (std::string err = ctx_.pop_error_scope("creating a buffer"); !err.empty()) {
            fail(ErrorKind::device, format("webgpu: cannot allocate %.1f MiB for the copy bandwidth test: %s",
                                           static_cast<double>(size) / 1048576.0, err.c_str()));
        }
    }
    // Copies by a compute kernel (copy_bandwidth.wgsl): 16-byte loads and stores over every SM.
    // (The warm-up submit also lets the device clear the buffers.)
    constexpr uint32_t k_groups = 4096;
    const uint32_t     params[2] = {static_cast<uint32_t>(size / 16), k_groups * 256};
    const double best = best_rate(5, 16, 2.0 * static_cast<double>(size), [&](int i) {
        const WGPUBuffer b[] = {bufs[i % 2].get(), bufs[1 - i % 2].get()};
        step_->dispatch(PipelineKey{"copy_bandwidth", "rwu", {}}, b, params, sizeof params, k_groups);
    }, "timing buffer copies");
    for (auto & b : bufs) step_->forget(b.get());
    ctx_.check_errors();
    return best;
}

double WebGpuBackend::best_rate(int reps, int per_submit, double bytes, const std::function<void(int)> & record,
                                const char * what) {
    double best = 0;
    for (int rep = 0; rep <= reps; ++rep) {  // rep 0 warms up
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < per_submit; ++i) record(i);
        step_->flush();
        ctx_.wait_queue_idle(what);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (rep > 0 && s > 0) best = std::max(best, bytes * per_submit / s);
    }
    step_->take_dispatch_count();
    return best;
}

double WebGpuBackend::measure_read_bandwidth(size_t n_bytes) {
    synchronize();
    const uint64_t max_size = std::min<uint64_t>(ctx_.limits().maxBufferSize, ctx_.limits().maxStorageBufferBindingSize);
    const uint64_t size     = std::max<uint64_t>(std::min<uint64_t>(n_bytes, max_size), 4096) / 256 * 256;
    // Layouts tried (read_bandwidth.wgsl): workgroups of 256 and 16-byte loads in flight per thread,
    // or the greedy head's rows (two workgroups per compute unit); each one's figure is logged (-v).
    const uint32_t          units   = tune_.compute_units;
    std::vector<ReadLayout> layouts = read_layouts_;
    if (layouts.empty()) {
        layouts = {{2 * units, 1, true}, {2 * units, 4, false}, {2 * units, 8, false}, {8 * units, 4, false},
                   {4096, 2, false},     {4096, 4, false},      {4096, 8, false}};
    }
    for (const ReadLayout & l : layouts) {
        TERN_ASSERT(l.groups > 0 && l.groups <= ctx_.limits().maxComputeWorkgroupsPerDimension && l.loads >= 1 &&
                        l.loads <= 16,
                    "read bandwidth layout of %u workgroups, %u loads", l.groups, l.loads);
    }
    uint32_t most_groups = 1;
    for (const ReadLayout & l : layouts) most_groups = std::max(most_groups, l.groups);
    auto src = make_buffer(size, nullptr, "tern read bandwidth");
    auto dst = make_buffer(static_cast<size_t>(most_groups) * 256 * 4, nullptr, "tern read bandwidth sink");
    const WGPUBuffer b[] = {src->get(), dst->get()};
    double           best = 0;
    for (const ReadLayout & l : layouts) {
        const uint32_t params[4] = {static_cast<uint32_t>(size / 16), l.groups * 256, 0x9e3779b9u, 0};
        PipelineKey    key{"read_bandwidth", "rwu", {{{"LOADS", static_cast<double>(l.loads)}, {"ROWS", l.rows ? 1.0 : 0.0}}}};
        const double   layout_best = best_rate(3, 8, static_cast<double>(size), [&](int) {
            step_->dispatch(key, b, params, sizeof params, l.groups);
        }, "timing buffer reads");
        TERN_LOG_INFO("webgpu: read bandwidth, %u workgroups, %s: %.1f GB/s", l.groups,
                      l.rows ? "head rows" : format("%u loads per thread", l.loads).c_str(), layout_best / 1e9);
        best = std::max(best, layout_best);
    }
    step_->forget(src->get());
    step_->forget(dst->get());
    ctx_.check_errors();
    return best;
}

Backend::DispatchCost WebGpuBackend::measure_dispatch_cost() {
    synchronize();
    // copy_bandwidth.wgsl over a small buffer: every thread copies one vec4, every dispatch writes
    // `dst`, so each waits for the one before (Dawn puts a barrier between them). The GPU starts when
    // the submit returns (Dawn records the Vulkan commands inside it), so the time from there to idle
    // is the chain's GPU time. The median of five runs: a run whose submit returned late (the thread
    // descheduled after the work reached the GPU) reads too short (seen once: 0.04 us on an H100).
    constexpr int      k_chain = 400;
    constexpr uint32_t k_wide  = 128;  // about one workgroup per SM on an H100 / H200
    auto               src     = make_buffer(k_wide * 256 * 16, nullptr, "dispatch cost src");
    auto               dst     = make_buffer(k_wide * 256 * 16, nullptr, "dispatch cost dst");
    DispatchCost       cost;
    cost.wide_groups = k_wide;
    using clock      = std::chrono::steady_clock;
    double best_host = 1e30;  // over both chains
    for (uint32_t groups : {1u, k_wide}) {
        const uint32_t      params[2] = {groups * 256, groups * 256};
        std::vector<double> gpu_s;
        for (int rep = 0; rep < 6; ++rep) {  // rep 0 warms up (pipeline, bind group)
            const auto t0 = clock::now();
            for (int i = 0; i < k_chain; ++i) {
                const WGPUBuffer b[] = {src->get(), dst->get()};
                step_->dispatch(PipelineKey{"copy_bandwidth", "rwu", {}}, b, params, sizeof params, groups);
            }
            step_->flush();
            const auto t1 = clock::now();
            ctx_.wait_queue_idle("timing dependent dispatches");
            const auto t2 = clock::now();
            if (rep == 0) continue;
            gpu_s.push_back(std::chrono::duration<double>(t2 - t1).count() / k_chain);
            best_host = std::min(best_host, std::chrono::duration<double>(t1 - t0).count() / k_chain);
        }
        std::nth_element(gpu_s.begin(), gpu_s.begin() + gpu_s.size() / 2, gpu_s.end());
        (groups == 1 ? cost.gpu_s_one : cost.gpu_s_wide) = gpu_s[gpu_s.size() / 2];
    }
    cost.host_s = best_host;
    step_->take_dispatch_count();
    ctx_.check_errors();
    return cost;
}

const RopeTable & WebGpuBackend::rope_table(int64_t n_rot, float freq_base, int64_t n_pos) {
    RopeTable & r = ropes_[{n_rot, freq_base}];
    if (r.buffer && r.n_pos >= n_pos) return r;
    int64_t cap = std::max<int64_t>(r.n_pos * 2, 256);
    while (cap < n_pos) cap *= 2;
    const int64_t      half = n_rot / 2;
    std::vector<float> table(static_cast<size_t>(cap * half * 2));
    // The same expressions as cpu::rope_neox_head (f32 pow, recurrence, cosf / sinf).
    const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
    for (int64_t pos = 0; pos < cap; ++pos) {
        float theta = static_cast<float>(pos);
        for (int64_t i = 0; i < half; ++i) {
            table[static_cast<size_t>((pos * half + i) * 2)]     = std::cos(theta);
            table[static_cast<size_t>((pos * half + i) * 2 + 1)] = std::sin(theta);
            theta *= theta_scale;
        }
    }
    step_->flush();  // work recorded against the old table keeps its buffer alive until it ran
    r.n_rot     = n_rot;
    r.freq_base = freq_base;
    r.n_pos     = cap;
    r.buffer    = make_buffer(table.size() * 4, table.data(), "rope table");
    return r;
}

std::unique_ptr<Backend> make_webgpu_backend(const WebGpuOptions & options) {
    return std::make_unique<WebGpuBackend>(options);
}

}  // namespace tern
