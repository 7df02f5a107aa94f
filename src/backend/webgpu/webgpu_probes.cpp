// WebGpuBackend's probes: what the adapter does (numerics, subgroup layout, subgroup-matrix
// product; run once by the constructor), a dispatch of a test's own kernel, and the bandwidth and
// dispatch-cost measurements behind `tern bench --roofline`.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"
#include "core/log.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

namespace tern {
namespace {

constexpr WGPUFlags k_storage_usage =
    WGPU_BUFFER_USAGE_STORAGE | WGPU_BUFFER_USAGE_COPY_SRC | WGPU_BUFFER_USAGE_COPY_DST;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

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

void WebGpuBackend::run_kernel(const PipelineKey & key, std::span<const WGPUBuffer> buffers, const void * params,
                               size_t params_bytes, uint32_t groups) {
    step_->dispatch(key, buffers, params, params_bytes, groups);
    step_->take_dispatch_count();
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

}  // namespace tern
