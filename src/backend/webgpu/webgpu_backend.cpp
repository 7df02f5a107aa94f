// WebGpuBackend: device, memory, weight upload, reads/writes and synchronization. The op encoders
// are in webgpu_ops.cpp.
#include "backend/cpu/cpu_ops.h"
#include "backend/webgpu/webgpu_backend_impl.h"
#include "backend/webgpu/pipeline_list.h"

#include "core/error.h"
#include "core/log.h"
#include "quant/ternary_formats.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_set>
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
    d.blob_cache_dir    = o.blob_cache_dir;
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
    pipeline_list_ = options.pipeline_list;
    prebuild_listed_pipelines();
}

void WebGpuBackend::prebuild_listed_pipelines() {
    if (pipeline_list_.empty()) return;
    const WgpuAdapterSummary & a = ctx_.adapter();
    pipeline_list_header_ = format("tern pipelines 2 | shaders %016llx | %s | %04x:%04x | %s | %s",
                                   static_cast<unsigned long long>(wgsl_shaders_hash()), a.name.c_str(), a.vendor_id,
                                   a.device_id, a.backend.c_str(), tune_.describe().c_str());
    listed_ = read_pipeline_list(pipeline_list_, pipeline_list_header_, listed_names_);
    const size_t n = pipelines_.prebuild(listed_);
    TERN_LOG_DEBUG("webgpu: %zu of the %zu pipelines listed in %s built ahead", n, listed_.size(), pipeline_list_.c_str());
}

void WebGpuBackend::write_pipeline_list_back() const {
    if (pipeline_list_.empty()) return;
    std::unordered_set<std::string> listed;
    for (const PipelineKey & k : listed_) listed.insert(pipeline_key_line(k));
    bool new_key = false;
    for (const PipelineKey & k : pipelines_.used()) new_key = new_key || !listed.count(pipeline_key_line(k));
    if (!new_key) return;
    // This run's keys first (in the order it asked for them), then those of runs before it.
    std::vector<PipelineKey> keys = pipelines_.used();
    std::unordered_set<std::string> used;
    for (const PipelineKey & k : keys) used.insert(pipeline_key_line(k));
    for (const PipelineKey & k : listed_) {
        if (!used.count(pipeline_key_line(k))) keys.push_back(k);
    }
    if (!write_pipeline_list(pipeline_list_, pipeline_list_header_, keys)) {
        TERN_LOG_DEBUG("webgpu: cannot write %s", pipeline_list_.c_str());
    }
}

WebGpuBackend::~WebGpuBackend() {
    try {
        write_pipeline_list_back();
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

bool WebGpuBackend::supports_linear(DType type) const {
    return dtype_is_lowbit(type) || type == DType::f32 || type == DType::f16 || type == DType::bf16 ||
           type == DType::q8_0 || type == DType::q4_0 || type == DType::q4_k || type == DType::q6_k;
}

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
    n->host                    = w;
    n->n_bytes                 = w.size() * 4;
    return n;
}

std::unique_ptr<Weight> WebGpuBackend::load_linear(std::span<const WeightSource> parts) {
    if (!parts.empty() && !dtype_is_lowbit(parts[0].type)) return load_matrix(parts);
    const GpuLinearLayout layout = gpu_pack_linear(parts);
    auto                  w      = std::make_unique<GpuLinear>();
    w->type                      = parts[0].type;
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
    auto e    = std::make_unique<GpuTable>();
    e->n_cols = src.ne[0];
    e->n_rows = src.ne[1];
    // An F16 or F32 table is uploaded as the file holds it, straight from the mapped file (2B4T's
    // 656 MB table: no copy to zero, fill and copy again); others as gpu_pack_table lays them out.
    const bool   as_is = src.type == DType::f16 || src.type == DType::f32;
    const size_t bytes = static_cast<size_t>(src.n_elements()) * (src.type == DType::f16 ? 2 : 4);
    if (as_is && bytes % 4 == 0 && src.data.size() >= bytes) {
        e->f16     = src.type == DType::f16;
        e->buffer  = make_buffer(bytes, src.data.data(), src.name.c_str());
        e->n_bytes = bytes;
    } else {
        const GpuTableLayout t = gpu_pack_table(src);
        e->f16                 = t.f16;
        e->buffer              = make_buffer(t.words.size() * 4, t.words.data(), src.name.c_str());
        e->n_bytes             = t.words.size() * 4;
    }
    e->blocks = load_head_blocks(src);  // (a head of Q-type blocks reads those: n_bytes counts them)
    if (e->blocks) e->n_bytes = e->blocks->n_bytes;
    // Greedy decoding streams the int8 copy of a large F16 (or Q-block) head: int8 rows + (s, c, sq, 0) each.
    if (greedy_head_i8_applies(*e)) e->n_bytes_ids = static_cast<size_t>(e->n_rows) * static_cast<size_t>(e->n_cols + 16);
    return e;
}

const RopeTable & WebGpuBackend::rope_table(int64_t n_rot, float freq_base, int64_t n_pos) {
    RopeTable & r = ropes_[{n_rot, freq_base}];
    if (r.buffer && r.n_pos >= n_pos) return r;
    int64_t cap = std::max<int64_t>(r.n_pos * 2, 256);
    while (cap < n_pos) cap *= 2;
    const int64_t      half = n_rot / 2;
    std::vector<float> table(static_cast<size_t>(cap * half * 2));
    // The same expressions as cpu::rope_neox_head (f32 pow, recurrence, cpu::cos_sin_fixed).
    const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
    for (int64_t pos = 0; pos < cap; ++pos) {
        float theta = static_cast<float>(pos);
        for (int64_t i = 0; i < half; ++i) {
            float * cs = &table[static_cast<size_t>((pos * half + i) * 2)];
            cpu::cos_sin_fixed(theta, cs, cs + 1);
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
