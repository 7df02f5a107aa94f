// The decode (one token) matmuls of WebGpuBackend: the composite ops linear, linear_glu and
// linear_qkv with the activation norm and int8 quantization fused into the matmul's prologue
// (shaders/*_decode.wgsl, lib/act_stage.wgsl), the norm statistics, and the weight prefetches.
// With them and the heads (webgpu_head.cpp) a decoded token costs 5 dispatches per layer (qkv+rope+kv,
// attention, o-proj, gate+up, down) + 2 instead of 9 per layer + 5. Prompts (T > 1) take the general
// kernels of webgpu_ops.cpp and webgpu_prefill.cpp.
#include "backend/webgpu/webgpu_backend_impl.h"
#include "quant/ternary_formats.h"

#include "core/error.h"
#include "core/log.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <cstdlib>
#include <string>
#include <string_view>

namespace tern {

uint32_t prefetch_loads_on_free_units(uint64_t words, uint32_t wg, uint32_t busy_groups, uint32_t units) {
    const int64_t free = std::max<int64_t>(int64_t{units} - busy_groups, 8);
    const int64_t per  = int64_t{wg} * k_prefetch_stride_words * free;  // words that one load each covers
    return std::clamp<uint32_t>(ceil_div(static_cast<int64_t>(words), per), 1, k_prefetch_loads_max);
}


// Lanes per row: the fewest (a power of two, at least decode_lanes) that leave each lane at most
// decode_lane_loads (10: lib/ternary_decode.wgsl's ROW_VEC4_MAX) vec4 loads over its team's rpt
// rows (the bitlinear and gate+up kernels read pairs of rows: rows = teams x 2). Workgroup:
// decode_wg threads (decode_wg_long for rows longer than 4096, below), and at least K / 32 so that
// the prologue's threads hold at most 8 activation words each.
std::optional<WebGpuBackend::DecodeTiling> WebGpuBackend::decode_tiling(const GpuLinear & w, int64_t n_tok,
                                                                        uint32_t max_rows, uint32_t rpt,
                                                                        uint32_t min_lanes, uint32_t wg_pref) const {
    const int64_t k = w.n_cols;
    if (n_tok != 1 || w.n_groups != 1 || k % 64 != 0 || k > 8192) return std::nullopt;
    DecodeTiling t;
    t.lanes = std::clamp<uint32_t>(floor_pow2(std::max(tune_.decode_lanes, min_lanes)), 4, 64);
    const uint32_t lane_loads = tune_.decode_lane_loads;
    // Each lane holds the same vec4s of rpt rows (2: lib/ternary_decode.wgsl's pairs): at most
    // lane_loads / rpt per row.
    while (k / 64 > static_cast<int64_t>(std::max<uint32_t>(1, lane_loads / rpt)) * t.lanes) t.lanes *= 2;
    // Rows longer than 4096 (2B4T's down projection, K = 6912) get 512 threads: the prologue's norm
    // chains are half as long (3-4 words per thread instead of 7) and the 80 workgroups still spread
    // the weights over many SMs. H200 tg128 560-564 tokens/s against 546-549 with 256 (alternating
    // runs); 128: 547-549; 1024: 524-525.
    uint32_t wg = std::clamp<uint32_t>(wg_pref != 0 ? wg_pref : k > 4096 ? tune_.decode_wg_long : tune_.decode_wg, 32, 1024);
    wg          = std::max<uint32_t>(wg, static_cast<uint32_t>(k / 32));
    uint32_t p2 = 32;
    while (p2 < wg) p2 *= 2;
    const uint32_t max_wg = ctx_.limits().maxComputeInvocationsPerWorkgroup;
    t.wg   = std::min(p2, max_wg);
    const uint32_t teams = std::min(t.wg / t.lanes, max_rows / rpt);
    if (teams == 0 || t.wg < k / 32) return std::nullopt;
    t.rows = teams * rpt;
    t.wg   = teams * t.lanes;
    if (t.wg < k / 32 || (t.wg & (t.wg - 1)) != 0) return std::nullopt;
    return t;
}

WebGpuBackend::DecodeSource WebGpuBackend::decode_source(const QuantizedActs & a, const Tensor * x,
                                                         const Weight * norm) const {
    if (x == nullptr) return {gpu_buffer(a.q), gpu_buffer(a.scale), gpu_offset(a.q, 4), gpu_offset(a.scale, 4)};
    const GpuNorm * nw = &as_norm(*norm);
    TERN_ASSERT(nw->n_cols == x->ne[0] && x->ne[1] == 1, "fused norm shapes");
    return {gpu_buffer(*x), nw->buffer->get(), gpu_offset(*x, 4), 0};
}

PipelineKey WebGpuBackend::decode_key(std::string_view shader, std::string_view signature, const DecodeTiling & t,
                                       int64_t k, bool norm, const DecodeSource & s, std::optional<uint32_t> stats_in,
                                       bool stats_out) const {
    PipelineKey key{ternary_shader(shader),
                    signature,
                    {{{"WG", static_cast<double>(t.wg)},
                      {"LANES", static_cast<double>(t.lanes)},
                      {"K", static_cast<double>(k)},
                      {"NORM", norm ? 1.0 : 0.0}}}};
    // (Both default to off, so a kernel that declares only one of them is keyed without the other.)
    if (stats_in) key.add("STATS_IN", 1.0);
    if (stats_out) key.add("STATS_OUT", 1.0);
    // Offsets 0 (tensors at the start of their buffers, as the model's are) and the two statistics
    // slots as constants; any other offset stays a uniform read, so the pipelines stay few.
    if (norm) {
        if (s.offset == 0) key.add("SRC_AT", 0.0);
        if (s.scale_offset == 0) key.add("NW_AT", 0.0);
        if (stats_in) key.add("STATS_AT", static_cast<double>(*stats_in));
    }
    return key;
}

std::optional<uint32_t> WebGpuBackend::stats_for(const Tensor & x) const {
    if (stats_.serial != step_->serial() || x.ne[1] != 1 || stats_.buffer != gpu_buffer(x) ||
        stats_.offset != gpu_offset(x, 4) || stats_.n != static_cast<uint64_t>(x.ne[0])) {
        return std::nullopt;
    }
    ++norm_stats_reads_;
    return stats_.slot;
}

void WebGpuBackend::stats_written(const Tensor & y, uint32_t slot) {
    stats_ = {gpu_buffer(y), gpu_offset(y, 4), u32(y.ne[0]), slot, step_->serial()};
}

WGPUBuffer WebGpuBackend::stats_buffer() {
    if (!norm_stats_) norm_stats_ = make_buffer(2 * k_stats_slot * 4, nullptr, "norm statistics");
    return norm_stats_->get();
}

WGPUBuffer WebGpuBackend::no_x_out_buffer() {
    if (!no_x_out_) no_x_out_ = make_buffer(16, nullptr, "unused x_out binding");
    return no_x_out_->get();
}

// lib/weight_prefetch.wgsl's constants for a kernel of `groups` workgroups of `wg` threads that
// pulls `pf` into L2 (nothing when pf is null), and the buffer to bind (pf's, else `filler`).
WGPUBuffer WebGpuBackend::add_kernel_prefetch(PipelineKey & key, const GpuLinear * pf, uint32_t groups, uint32_t wg,
                                              WGPUBuffer filler) const {
    if (!pf) return filler;
    const uint32_t words = static_cast<uint32_t>(pf->buffer->size_bytes() / 4);
    key.add("KPF_WORDS", static_cast<double>(words));
    key.add("KPF_GROUPS", static_cast<double>(groups));
    key.add("KPF_LOADS", static_cast<double>(ceil_div(words, int64_t{k_prefetch_stride_words} * groups * wg)));
    return pf->buffer->get();
}

bool WebGpuBackend::try_decode_bitlinear(const Tensor & y, const GpuLinear & w, const QuantizedActs & a,
                                         const Tensor * x, const Weight * norm, float eps, bool accumulate,
                                         const GpuLinear * prefetch) {
    // Rows up to 4096 long (the o-projection of 2B4T) take at least 16 lanes: 80 workgroups of 32 rows
    // instead of 40 of 64. H200 tg128 757.2-757.6 tokens/s against 751.2-752.5 with 8 (the fewest the
    // loads allow); 32 lanes with 512 threads 754.5-764.2 (noisy), 16 with 512 754.6-758.3. Where
    // teams of 32 lanes sum in registers (lib/ternary_decode.wgsl, subgroups), 32 lanes with 512
    // threads, still 80 workgroups of 32 rows: 788.3-789.9 against 779.3-779.8 (medians of three
    // alternating processes each; with the workgroup-memory sums 781.4-782.1). (WebGpuTuning::o_lanes, o_wg)
    const bool     wide     = lane_sums_sg_ && w.n_cols >= 32 * 64;  // a vec4 for every lane
    const uint32_t bl_lanes = tune_.o_lanes != 0 ? tune_.o_lanes : wide ? 32 : 16;
    const uint32_t bl_wg    = tune_.o_wg != 0 ? tune_.o_wg : wide ? 512 : 0;
    const bool            short_k  = w.n_cols <= 4096;
    const auto t = decode_tiling(w, a.q.ne[1], 256, 2, short_k ? bl_lanes : 4, short_k ? bl_wg : 0);  // pairs of rows per lane team
    if (!t) return false;
    DecodeSource s = decode_source(a, x, norm);
    // x still in the split attention's sums, its combine (a copy) deferred: the prologue reads them.
    const DeferredCombine & dc    = deferred_combine_;
    const bool              parts = x != nullptr && dc.out == gpu_buffer(*x) && dc.out_offset == uint64_t{s.offset} * 4 &&
                       dc.n == static_cast<uint32_t>(x->ne[0]) && step_->take_deferred(dc.out, dc.out_offset);
    if (parts) {
        s.src    = dc.part;
        s.offset = 0;
        ++combines_fused_;
    }
    // Norm statistics: x's block sums if the last command left them; y's when the workgroups' rows
    // are whole blocks.
    const std::optional<uint32_t> in  = x && !parts ? stats_for(*x) : std::nullopt;
    const bool                    out = stats_fit(w.n_rows) && t->rows % 32 == 0;
    const uint32_t                out_slot = stats_out_slot(in);
    struct {
        uint32_t n_rows;
        float    eps;
        uint32_t src_offset, scale_offset, scales_offset, oscales_offset, y_offset, accumulate, stats_in, stats_out,
            x_out_offset;
    } p{static_cast<uint32_t>(w.n_rows), eps, s.offset, s.scale_offset, w.scales_offset, w.oscales_offset,
        gpu_offset(y, 4), accumulate ? 1u : 0u,
        in.value_or(0), out_slot,
        parts ? static_cast<uint32_t>(dc.out_offset / 4) : 0u};
    PipelineKey key = decode_key("bitlinear_decode", "rrrwwrwu", *t, w.n_cols, x != nullptr, s, in, out);
    if (parts) key.add("PARTS", 1.0);  // (x_out: lib/decode_io.wgsl)
    key.add("N_ROWS", static_cast<double>(w.n_rows));
    const uint32_t   groups = static_cast<uint32_t>((w.n_rows + t->rows - 1) / t->rows);
    const WGPUBuffer pf     = add_kernel_prefetch(key, prefetch, groups, t->wg, s.src);
    const WGPUBuffer bufs[] = {w.buffer->get(), s.src, s.scale, gpu_buffer(y), stats_buffer(), pf,
                               parts ? dc.out : no_x_out_buffer()};
    step_->dispatch(key, bufs, &p, sizeof p, groups);
    if (out) stats_written(y, out_slot);
    return true;
}

bool WebGpuBackend::try_decode_gate_up(const Tensor & f, const GpuLinear & w, const QuantizedActs & a,
                                       const Tensor * x, const Weight * norm, float eps, FfnActivation act,
                                       const GpuLinear * prefetch) {
    // Lanes per row: the fewest the loads allow (8 for 2B4T; 16 lanes with 512 threads 748.4-753.0
    // tokens/s against 751.2-752.5, 8 with 512 743.5-749.8, 16 with 1024 742.5-746.9).
    const auto t = decode_tiling(w, a.q.ne[1], 256, 2, tune_.gate_up_lanes);  // a gate row and its up row per lane team
    if (!t) return false;
    const int64_t  n_ff = w.n_rows / 2;
    const uint32_t outs = t->rows / 2;
    const DecodeSource s = decode_source(a, x, norm);
    const std::optional<uint32_t> in  = x ? stats_for(*x) : std::nullopt;  // as try_decode_bitlinear
    const bool                    out = stats_fit(n_ff) && outs % 32 == 0;
    const uint32_t                out_slot = stats_out_slot(in);
    struct {
        uint32_t n_ff;
        float    eps;
        uint32_t src_offset, scale_offset, scales_offset, oscales_offset, f_offset, activation, stats_in, stats_out;
    } p{static_cast<uint32_t>(n_ff), eps, s.offset, s.scale_offset, w.scales_offset, w.oscales_offset,
        gpu_offset(f, 4), act == FfnActivation::relu2 ? 0u : 1u, in.value_or(0), out_slot};
    PipelineKey key = decode_key("gate_up_decode", "rrrwwru", *t, w.n_cols, x != nullptr, s, in, out);
    key.add("N_FF", static_cast<double>(n_ff));
    const uint32_t   groups = static_cast<uint32_t>((n_ff + outs - 1) / outs);
    const WGPUBuffer pf     = add_kernel_prefetch(key, prefetch, groups, t->wg, s.src);
    const WGPUBuffer bufs[] = {w.buffer->get(), s.src, s.scale, gpu_buffer(f), stats_buffer(), pf};
    step_->dispatch(key, bufs, &p, sizeof p, groups);
    if (out) stats_written(f, out_slot);
    return true;
}

bool WebGpuBackend::try_decode_qkv(const Tensor & q, const KvLayer & kv, const GpuLinear & w, const QuantizedActs & a,
                                   const Tensor * x, const Weight * norm, float eps, const AttentionShape & s,
                                   int64_t pos0, const GpuLinear * prefetch) {
    const int64_t hd = s.head_dim;
    if (hd % 4 != 0 || s.n_rot % 4 != 0 || s.n_rot > hd) return false;
    // Slots per workgroup: a power of two >= 4 dividing head_dim (RoPE pairs stay together).
    uint32_t max_rows = 4;
    while (max_rows < 256 && hd % (max_rows * 2) == 0) max_rows *= 2;
    // At least 16 lanes per row (16 rows per workgroup, 240 workgroups for 2B4T, each with a quarter
    // of the rows to dot and finish): H200 tg128 749.1-754.6 tokens/s against 742.3-742.9 with 8
    // and 716.4-728.2 with 4 (the fewest the loads allow; before the weight loads stopped waiting
    // for the uniform, 8 was slower than 4). (WebGpuTuning::qkv_lanes)
    const auto t = decode_tiling(w, a.q.ne[1], max_rows, 1, tune_.qkv_lanes);
    if (!t || t->rows < 4 || hd % t->rows != 0) return false;
    TERN_ASSERT(pos0 >= 0 && pos0 + 1 <= kv.k.ne[1], "positions past the KV cache");
    const RopeTable & rope = rope_table(s.n_rot, s.rope_freq_base, pos0 + 1);
    const size_t      k_el = kv.k.type == DType::f16 ? 2 : 4;
    const size_t      v_el = kv.v.type == DType::f16 ? 2 : 4;
    const DecodeSource src = decode_source(a, x, norm);
    const std::optional<uint32_t> in = x ? stats_for(*x) : std::nullopt;
    struct {
        float    eps;
        uint32_t src_offset, scale_offset, scales_offset, oscales_offset, head_dim, n_rot, n_head, n_head_kv, pos0,
            q_offset, q_stride, k_offset, v_offset, n_embd_kv, stats_in, stats_out;
    } p{eps,
        src.offset,
        src.scale_offset,
        w.scales_offset,
        w.oscales_offset,
        static_cast<uint32_t>(hd),
        static_cast<uint32_t>(s.n_rot),
        static_cast<uint32_t>(s.n_head),
        static_cast<uint32_t>(s.n_head_kv),
        static_cast<uint32_t>(pos0),
        gpu_offset(q, 4),
        static_cast<uint32_t>(q.ne[0]),
        gpu_offset(kv.k, k_el),
        gpu_offset(kv.v, v_el),
        static_cast<uint32_t>(kv.k.ne[0]),
        in.value_or(0),
        0};
    PipelineKey key = decode_key("qkv_rope_decode", "rrrrwwwwru", *t, w.n_cols, x != nullptr, src, in);
    key.add("K_F16", kv.k.type == DType::f16 ? 1.0 : 0.0);
    key.add("V_F16", kv.v.type == DType::f16 ? 1.0 : 0.0);
    key.add("HD", static_cast<double>(hd));
    key.add("QKV_N_ROT", static_cast<double>(s.n_rot));
    // The cache rows attention reads next are pulled into L2 (qkv_rope_decode.wgsl kv_prefetch) only where
    // one query's attention is attention.wgsl: the split kernels that take over from long_positions() gain
    // nothing from them, and the kernel's end waits for every load (up to 7.9 MB for 2B4T at 4,096
    // positions). H200 tg64 @ d4096: 485.5 / 486.1 tok/s without against 482.8 / 483.7 with them.
    if (pos0 + 1 >= long_positions()) key.add("KV_PF", 0.0);
    const uint32_t   groups = static_cast<uint32_t>(w.n_rows / t->rows);
    const WGPUBuffer pf     = add_kernel_prefetch(key, prefetch, groups, t->wg, src.src);
    const WGPUBuffer bufs[] = {w.buffer->get(), src.src,          src.scale,        rope.buffer->get(), gpu_buffer(q),
                               gpu_buffer(kv.k), gpu_buffer(kv.v), stats_buffer(), pf};
    step_->dispatch(key, bufs, &p, sizeof p, groups);
    return true;
}

namespace {

// The shapes of the composite ops (asserts): y = W norm(x), f from x, q and cache rows from x.
void check_linear_shapes(const Tensor & y, const GpuLinear & w, const Tensor & x) {
    TERN_ASSERT(y.ne[0] == w.n_rows && x.ne[0] == w.n_cols && y.ne[1] == x.ne[1], "linear shapes");
}

void check_glu_shapes(const Tensor & f, const GpuLinear & w, const Tensor & x) {
    TERN_ASSERT(f.ne[0] * 2 == w.n_rows && x.ne[0] == w.n_cols && f.ne[1] == x.ne[1], "linear_glu shapes");
}

void check_qkv_shapes(const Tensor & q, const KvLayer & kv, const GpuLinear & w, const Tensor & x,
                      const AttentionShape & shape) {
    const int64_t n_q  = shape.n_head * shape.head_dim;
    const int64_t n_kv = shape.n_head_kv * shape.head_dim;
    TERN_ASSERT(w.n_rows == n_q + 2 * n_kv && q.ne[0] == n_q && kv.k.ne[0] == n_kv && x.ne[0] == w.n_cols,
                "linear_qkv shapes");
}

// Whether a composite op's input takes the fused one-token kernels: x and its norm given, one token.
bool fused_input(const LinearInput & in) {
    TERN_ASSERT(in.x.buffer == nullptr || in.norm != nullptr,
                "a linear input without a norm is not supported yet (issue 54)");
    return in.x.buffer != nullptr && in.x.ne[1] == 1;
}

// A low-bit weight whose input is not BitNet's (a norm in front, int8 scratch): a llama / qwen3 /
// phi3 model with ternary or Q1_0 / Q2_0 projections, whose activation forms have no WebGPU kernels yet.
// A float input without the int8 scratch: the families' linear ops (BitNet's always bring it).
bool family_input(const LinearInput & in) {
    return in.x.buffer != nullptr && in.q.q.buffer == nullptr;
}

void check_bitnet_input(const Weight & w, const LinearInput & in) {
    if (in.x.buffer != nullptr && (in.norm == nullptr || in.q.q.buffer == nullptr)) {
        fail(ErrorKind::unsupported,
             format("webgpu: %s projections outside a BitNet model (Falcon3-1.58bit, TriLM, Bonsai) are not "
                    "supported yet",
                    std::string(dtype_name(w.type)).c_str()),
             "use --backend cpu for this model");
    }
}

}  // namespace

void WebGpuBackend::linear(const Tensor & y, const Weight & w, const LinearInput & in, bool accumulate) {
    // Not ternary, or a low-bit weight without the int8 form (the families: Q1_0 / Q2_0 take Q8_0 blocks).
    if (!dtype_is_lowbit(w.type) || family_input(in)) return family_linear(y, w, in, accumulate);  // webgpu_family.cpp
    check_bitnet_input(w, in);
    const GpuLinear & lw = as_linear(w);
    if (in.x.buffer != nullptr) check_linear_shapes(y, lw, in.x);
    if (fused_input(in)) {
        const GpuLinear * pull = weight_order_.linear(lw, step_->releases());
        if (try_decode_bitlinear(y, lw, in.q, &in.x, in.norm, in.eps, accumulate, pull)) return;
    }
    Backend::linear(y, w, in, accumulate);
}

void WebGpuBackend::linear_glu(const Tensor & f, const Weight & w, const LinearInput & in, FfnActivation act) {
    if (!dtype_is_lowbit(w.type) || family_input(in)) return family_linear_glu(f, w, in, act);  // webgpu_family.cpp
    check_bitnet_input(w, in);
    const GpuLinear & lw = as_linear(w);
    if (in.x.buffer != nullptr) check_glu_shapes(f, lw, in.x);
    if (fused_input(in)) {
        const GpuLinear * pull = weight_order_.linear(lw, step_->releases());
        if (try_decode_gate_up(f, lw, in.q, &in.x, in.norm, in.eps, act, pull)) return;
    }
    Backend::linear_glu(f, w, in, act);
}

void WebGpuBackend::linear_qkv(const Tensor & q, const KvLayer & kv, const Weight & wqkv, const LinearInput & in,
                               const AttentionShape & shape, int64_t pos0) {
    const GpuLinear & lw = as_linear(wqkv);
    if (in.x.buffer != nullptr) check_qkv_shapes(q, kv, lw, in.x, shape);
    if (fused_input(in)) {
        const GpuLinear * pull = weight_order_.linear(lw, step_->releases());
        if (try_decode_qkv(q, kv, lw, in.q, &in.x, in.norm, in.eps, shape, pos0, pull)) return;
    }
    Backend::linear_qkv(q, kv, wqkv, in, shape, pos0);
}

}  // namespace tern
