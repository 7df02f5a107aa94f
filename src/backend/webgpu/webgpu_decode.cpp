// The decode (one token) paths of WebGpuBackend: the ternary matmuls with the activation norm fused
// into their prologue (shaders/*_decode.wgsl, lib/act_stage.wgsl) and the LM head with the final
// norm and the first argmax stage fused in (lm_head_f16_decode.wgsl). With them a decoded token
// costs 5 dispatches per layer (qkv+rope+kv, attention, o-proj, gate+up, down) + 3 (embed, head,
// argmax) instead of 9 per layer + 5. Prompts (T > 1) take the general kernels of webgpu_ops.cpp.
#include "backend/webgpu/webgpu_backend_impl.h"

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

namespace {

// The uniform of the decode heads (shaders/lib/head_params.wgsl, for lm_head_f16_decode.wgsl and
// lm_head_i8_argmax.wgsl).
struct HeadParams {
    uint32_t n_vocab, x_offset, out_offset, round_input, k;
    float    eps;
    uint32_t partial_offset;
    uint32_t thr_slot;  // lm_head_i8_argmax.wgsl EXACT_TAIL
};

HeadParams head_params(const Weight & head, const Tensor & x, const Tensor & logits, bool round_input_f16, float eps) {
    return {static_cast<uint32_t>(head.n_rows), gpu_offset(x, 4), gpu_offset(logits, 4), round_input_f16 ? 1u : 0u,
            static_cast<uint32_t>(head.n_cols), eps, 0, 0};
}

// argmax_exact.wgsl's MAX_BOUNDS: the most lower bounds its TOP_K mode ranks.
constexpr uint32_t k_top_k_max_bounds = 1024;
// Rows the TOP_K list holds (32 KiB to read back); with more candidates the host reads the logits.
constexpr uint32_t k_top_k_list_rows = 4096;

}  // namespace

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
    const DecodeSource s = decode_source(a, x, norm);
    // Norm statistics: x's block sums if the last command left them; y's when the workgroups' rows
    // are whole blocks.
    const std::optional<uint32_t> in  = x ? stats_for(*x) : std::nullopt;
    const bool                    out = stats_fit(w.n_rows) && t->rows % 32 == 0;
    const uint32_t                out_slot = stats_out_slot();
    struct {
        uint32_t n_rows;
        float    eps;
        uint32_t src_offset, scale_offset, scales_offset, oscales_offset, y_offset, accumulate, stats_in, stats_out;
    } p{static_cast<uint32_t>(w.n_rows), eps, s.offset, s.scale_offset, w.scales_offset, w.oscales_offset,
        gpu_offset(y, 4), accumulate ? 1u : 0u, in.value_or(0), out_slot};
    PipelineKey key = decode_key("bitlinear_decode", "rrrwwru", *t, w.n_cols, x != nullptr, s, in, out);
    key.add("N_ROWS", static_cast<double>(w.n_rows));
    const uint32_t   groups = static_cast<uint32_t>((w.n_rows + t->rows - 1) / t->rows);
    const WGPUBuffer pf     = add_kernel_prefetch(key, prefetch, groups, t->wg, s.src);
    const WGPUBuffer bufs[] = {w.buffer->get(), s.src, s.scale, gpu_buffer(y), stats_buffer(), pf};
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
    const uint32_t                out_slot = stats_out_slot();
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

}  // namespace

void WebGpuBackend::linear(const Tensor & y, const Weight & w, const LinearInput & in, bool accumulate) {
    const GpuLinear & lw = as_linear(w);
    if (in.x.buffer != nullptr) check_linear_shapes(y, lw, in.x);
    if (fused_input(in)) {
        const GpuLinear * pull = weight_order_.linear(lw, step_->releases());
        if (try_decode_bitlinear(y, lw, in.q, &in.x, in.norm, in.eps, accumulate, pull)) return;
    }
    Backend::linear(y, w, in, accumulate);
}

void WebGpuBackend::linear_glu(const Tensor & f, const Weight & w, const LinearInput & in, FfnActivation act) {
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

bool WebGpuBackend::try_decode_head(const Tensor & logits, const GpuTable & head, const Tensor & h_or_x,
                                    const GpuNorm * norm, float eps, bool round_input_f16, bool argmax_only) {
    // One token and an F16 table whose row fits, with the reduction space, in workgroup memory.
    const uint64_t wg_storage = ctx_.limits().maxComputeWorkgroupStorageSize;
    if (!head.f16 || h_or_x.ne[1] != 1 || head.n_cols % 8 != 0 || head.n_cols > 4096 ||
        static_cast<uint64_t>(head.n_cols) * 4 + 16384 + 4096 > wg_storage) {
        return false;
    }
    const uint32_t n_chunks = static_cast<uint32_t>((head.n_rows + 63) / 64);
    // argmax_only: per-row bounds, then the blocks' lower bounds (lm_head_f16_decode.wgsl).
    const WGPUBuffer partials =
        argmax_partials((static_cast<size_t>(n_chunks) + (argmax_only ? static_cast<size_t>(head.n_rows) : 0)) * 8);
    const HeadParams p = head_params(head, h_or_x, logits, round_input_f16, eps);
    const PipelineKey key{"lm_head_f16_decode",
                          "rrrwwu",
                          {{{"K", static_cast<double>(head.n_cols)},
                            {"NORM", norm ? 1.0 : 0.0},
                            {"ARGMAX_ONLY", argmax_only ? 1.0 : 0.0}}}};
    const WGPUBuffer  bufs[] = {head.buffer->get(), gpu_buffer(h_or_x),
                                norm ? norm->buffer->get() : gpu_buffer(h_or_x), gpu_buffer(logits), partials};
    step_->dispatch(key, bufs, &p, sizeof p, n_chunks);
    head_partials_ = {};
    if (!argmax_only) head_partials_ = {gpu_buffer(logits), gpu_offset(logits, 4), n_chunks, step_->serial()};
    return true;
}

bool WebGpuBackend::greedy_head_i8_applies(const GpuTable & head) const {
    const uint64_t wg_storage = ctx_.limits().maxComputeWorkgroupStorageSize;
    return head.f16 && !head.q8_failed && head.n_bytes >= tune_.head_i8_min_bytes && head.n_cols % 16 == 0 &&
           head.n_cols <= 4096 && static_cast<uint64_t>(head.n_cols) * 9 / 2 + 16384 <= wg_storage;
}

bool WebGpuBackend::ensure_head_q8(const GpuTable & head) {
    if (!greedy_head_i8_applies(head)) return false;
    if (head.q8) return true;
    // Made once, on the device: 0.5 bytes of GPU memory per byte of the F16 table. If that is not
    // there, greedy decoding streams the F16 table (slower, same ids).
    try {
        head.q8 = make_buffer(static_cast<size_t>(head.n_rows) * static_cast<size_t>(head.n_cols), nullptr,
                              "LM head int8 copy");
        head.q8_info = make_buffer(static_cast<size_t>(head.n_rows) * 16, nullptr, "LM head int8 scales");
    } catch (const Error & e) {
        TERN_LOG_WARN("webgpu: no room for the LM head's int8 copy (%s); greedy decoding streams the F16 table",
                      e.what());
        head.q8.reset();
        head.q8_failed = true;
        return false;
    }
    const uint32_t n_vocab = static_cast<uint32_t>(head.n_rows);
    const uint32_t groups  = std::min<uint32_t>((n_vocab + 7) / 8, 65535);
    struct {
        uint32_t n_vocab, n_groups;
    } p{n_vocab, groups};
    const PipelineKey key{"head_i8_pack", "rwwu", {{{"K", static_cast<double>(head.n_cols)}}}};
    const WGPUBuffer  bufs[] = {head.buffer->get(), head.q8->get(), head.q8_info->get()};
    step_->dispatch(key, bufs, &p, sizeof p, groups);
    return true;
}

WebGpuBackend::HeadInt8Copy WebGpuBackend::read_head_int8_copy(const Weight & head) {
    const GpuTable & e = as_table(head);
    HeadInt8Copy     out;
    if (!ensure_head_q8(e)) return out;
    out.codes.resize(static_cast<size_t>(e.n_rows * e.n_cols));
    out.info.resize(static_cast<size_t>(e.n_rows) * 4);
    Tensor t;
    t.type   = DType::i32;
    t.ne     = {static_cast<int64_t>(out.codes.size() / 4), 1, 1, 1};
    t.buffer = e.q8.get();
    read(t, out.codes.data(), out.codes.size());
    t.ne     = {static_cast<int64_t>(out.info.size()), 1, 1, 1};
    t.buffer = e.q8_info.get();
    read(t, out.info.data(), out.info.size() * 4);
    return out;
}

std::vector<float> WebGpuBackend::read_greedy_head_bounds(int64_t n_rows) {
    std::vector<uint32_t> pairs(static_cast<size_t>(2 * n_rows));  // (bits(B), 0) per row
    if (!argmax_partial_ || argmax_partial_->size_bytes() < pairs.size() * 4) return {};
    Tensor t;
    t.type   = DType::i32;
    t.ne     = {static_cast<int64_t>(pairs.size()), 1, 1, 1};
    t.buffer = argmax_partial_.get();
    read(t, pairs.data(), pairs.size() * 4);
    std::vector<float> out(static_cast<size_t>(n_rows));
    for (size_t i = 0; i < out.size(); ++i) std::memcpy(&out[i], &pairs[2 * i], 4);
    return out;
}

uint32_t WebGpuBackend::try_decode_head_i8(const Tensor & logits, const GpuTable & head, const Tensor & x,
                                           const GpuNorm & norm, float eps, bool round_input_f16, bool exact_tail) {
    if (x.ne[1] != 1 || !ensure_head_q8(head)) return 0;
    const uint32_t n_vocab = static_cast<uint32_t>(head.n_rows);
    const auto     k       = static_cast<double>(head.n_cols);
    // The team rows (8 rows each) are dealt to two workgroups per compute unit in turn (ITERS), so
    // every workgroup that can run at once has a share and the shares differ by at most one team
    // row; in blocks of 64 rows the 2B4T head took 251 workgroups of 8 blocks, two on most units and
    // one on 13. H100 tg128 (three alternating rounds each, one machine per call): 909.2-912.0
    // tokens/s against 905.7-909.6 on one machine, within noise on two others (907.0-911.0 either way);
    // three per unit (396) 899.3-901.0 and one (132) 894.1-896.0 against 907.6-911.0.
    // (WebGpuTuning::head_groups)
    const uint32_t groups_wanted = tune_.head_groups != 0 ? tune_.head_groups : 2 * tune_.compute_units;
    // A team of 32 lanes per row is a subgroup when subgroups are exactly 32 wide: rows are summed by
    // subgroupAdd and the stream has no barriers (TEAM_SG); else the teams sum in workgroup memory.
    const auto & a       = ctx_.adapter();
    const bool   team_sg = pipelines_.subgroup_variants() && a.subgroup_min == 32 && a.subgroup_max == 32;
    PipelineKey  key{ternary_shader("lm_head_i8_argmax"),
                    "rrrrwwrwu",
                    {{{"K", k},
                      {"NORM", 1.0},
                      {"TEAM_SG", team_sg ? 1.0 : 0.0},
                      {"EXACT_TAIL", exact_tail ? 1.0 : 0.0}}}};
    const uint32_t team_rows = (n_vocab + 7) / 8;
    const uint32_t groups    = std::min(groups_wanted, team_rows);
    const uint32_t iters     = (team_rows + groups - 1) / groups;
    key.add("ITERS", static_cast<double>(team_sg ? iters : (iters + 7) / 8 * 8));  // (whole blocks)
    // Per-row bounds, then each workgroup's lower bound.
    const WGPUBuffer partials = argmax_partials((static_cast<size_t>(groups) + n_vocab) * 8);
    HeadParams       p        = head_params(head, x, logits, round_input_f16, eps);
    // The exact tail's pairs and threshold slots (zeroed when the buffer is made: key 0, no bound).
    const WGPUBuffer exact = grown(head_exact_, (2 + 2 * static_cast<size_t>(groups)) * 4, "head exact argmax");
    if (exact_tail) {
        p.thr_slot     = head_thr_slot_;
        head_thr_slot_ = 1 - head_thr_slot_;
    }
    const WGPUBuffer  bufs[] = {head.q8->get(),     head.q8_info->get(), gpu_buffer(x), norm.buffer->get(),
                                gpu_buffer(logits), partials,            head.buffer->get(), exact};
    step_->dispatch(key, bufs, &p, sizeof p, groups);
    head_partials_ = {};
    return groups;
}

// argmax_exact.wgsl's workgroup memory: h (K f32), the candidate list and reductions, the bounds.
bool WebGpuBackend::exact_rows_fit(const GpuTable & head) const {
    return static_cast<uint64_t>(head.n_cols) * 4 + 8192 + 4 * k_top_k_max_bounds <=
           ctx_.limits().maxComputeWorkgroupStorageSize;
}

uint32_t WebGpuBackend::encode_exact_rows(const Tensor & logits, const GpuTable & head, const Tensor & x,
                                          const GpuNorm & norm, float eps, bool round_input_f16, uint32_t n_bounds,
                                          bool int8, uint32_t top_k) {
    // Workgroups of argmax_exact.wgsl: each recomputes its own candidates one after another, so with
    // the int8 head's wider bounds (tens of candidates) many small groups finish sooner than a few
    // big ones. (The F16 path's tight bounds leave one or two candidates: 64 groups, as measured
    // before.) (WebGpuTuning::exact_groups)
    const uint32_t        n_blocks   = static_cast<uint32_t>((head.n_rows + 63) / 64);
    const uint32_t        k_groups   = tune_.exact_groups > 0 ? tune_.exact_groups : (int8 ? 512u : 64u);
    const uint32_t        groups     = std::min<uint32_t>(k_groups, n_blocks);
    struct {
        uint32_t n_vocab, x_offset, logits_offset, round_input, k;
        float    eps;
        uint32_t n_chunks, rows_per_group;
    } p{static_cast<uint32_t>(head.n_rows),
        gpu_offset(x, 4),
        gpu_offset(logits, 4),
        round_input_f16 ? 1u : 0u,
        static_cast<uint32_t>(head.n_cols),
        eps,
        n_bounds,
        static_cast<uint32_t>((head.n_rows + groups - 1) / groups)};
    const PipelineKey key{"argmax_exact",
                          "rrrwrwu",
                          {{{"K", static_cast<double>(head.n_cols)},
                            {"NORM", 1.0},
                            {"TOP_K", static_cast<double>(top_k)}}}};
    WGPUBuffer out  = nullptr;
    const int  list = top_k_next_;
    if (top_k == 0) {
        out = grown(exact_partial_, groups * 8, "exact argmax partials");
    } else {
        const size_t list_bytes = (2 + 2 * size_t{k_top_k_list_rows}) * 4;
        if (!top_k_lists_[list]) top_k_lists_[list] = make_buffer(list_bytes, nullptr, "top-k rows");
        // The count starts at 0: a queue write runs after the steps already submitted and before
        // this one (whose list is not the one a submitted, unread step fills).
        const uint32_t zero = 0;
        wgpu().wgpuQueueWriteBuffer(ctx_.queue(), top_k_lists_[list]->get(), 0, &zero, 4);
        out         = top_k_lists_[list]->get();
        top_k_next_ = 1 - list;
    }
    const WGPUBuffer bufs[] = {head.buffer->get(), gpu_buffer(x), norm.buffer->get(), gpu_buffer(logits),
                               argmax_partial_->get(), out};
    step_->dispatch(key, bufs, &p, sizeof p, groups);
    if (top_k > 0) {
        top_k_pending_.push_back({gpu_buffer(logits), gpu_offset(logits, 4), list, step_->serial()});
        if (top_k_pending_.size() > 2) top_k_pending_.pop_front();
    }
    return groups;
}

// The sampler's top-k, when it comes first: the int8 head's values and bounds for every row, then
// argmax_exact.wgsl with TOP_K recomputes exactly the rows whose upper bound reaches the k-th
// largest of the workgroups' lower bounds (each is some row's lower bound, so at least k rows lie
// above it) and writes -inf to the others. Anything else: the exact head.
void WebGpuBackend::head_top_k(const Tensor & logits, const GpuTable & e, const LinearInput & in, bool round_input_f16,
                               int64_t k) {
    const Tensor &  x   = in.x;
    const GpuNorm & nw  = as_norm(*in.norm);
    const float     eps = in.eps;
    if (x.ne[1] == 1 && k >= 1 && exact_rows_fit(e)) {
        const uint32_t n_bounds = try_decode_head_i8(logits, e, x, nw, eps, round_input_f16);
        if (n_bounds > 0 && static_cast<int64_t>(n_bounds) >= k && n_bounds <= k_top_k_max_bounds) {
            encode_exact_rows(logits, e, x, nw, eps, round_input_f16, n_bounds, true, static_cast<uint32_t>(k));
            return;
        }
        // (The int8 head ran into `logits`; the exact head below overwrites every row.)
    }
    head_logits(logits, e, in, round_input_f16, Tensor{});
}

bool WebGpuBackend::read_top_k_rows(const Tensor & logits, std::vector<LogitRow> & rows) {
    rows.clear();
    if (top_k_pending_.empty()) return false;
    const TopKList e = top_k_pending_.front();
    top_k_pending_.pop_front();
    // Nothing recorded since the head, or since then only a held step (whose head is the next entry).
    const bool untouched = top_k_pending_.empty() ? e.serial == step_->serial() : step_->holding();
    if (e.logits != gpu_buffer(logits) || e.offset != gpu_offset(logits, 4) || !untouched) {
        top_k_pending_.clear();
        return false;
    }
    std::vector<uint32_t> words(2 + 2 * size_t{k_top_k_list_rows});
    Tensor                t;
    t.type   = DType::i32;
    t.ne     = {static_cast<int64_t>(words.size()), 1, 1, 1};
    t.buffer = top_k_lists_[e.list].get();
    read(t, words.data(), words.size() * 4);
    const uint32_t n = words[0];
    if (n > k_top_k_list_rows) return false;  // more candidates than the list holds
    rows.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
        rows[i] = {static_cast<int32_t>(words[2 + 2 * i]), std::bit_cast<float>(words[3 + 2 * i])};
    }
    return true;
}

bool WebGpuBackend::hold_step() {
    step_->ramp_submits(0, 0);  // (start_from_idle's pieces end with the step, held or not)
    if (step_->submits() != step_submits_at_begin_) {
        // Part of the step was submitted while it was recorded: it cannot wait for its input.
        step_->flush();
        top_k_pending_.clear();
        return false;
    }
    step_->hold();
    return true;
}

void WebGpuBackend::drop_held_step() {
    if (!step_->holding()) return;
    step_->drop_held();
    // The held step's head (recorded last) will not run.
    if (!top_k_pending_.empty()) top_k_pending_.pop_back();
}

void WebGpuBackend::output_head(const HeadOutput & out, const Weight & head, const LinearInput & in,
                                bool round_input_f16) {
    const GpuTable & e = as_table(head);
    const Tensor &   x = in.x;
    TERN_ASSERT(x.ne[0] == e.n_cols && out.logits.ne[0] == e.n_rows && out.logits.ne[1] == x.ne[1] &&
                    (in.norm == nullptr || in.norm->n_cols == x.ne[0]),
                "output_head shapes");
    if (in.norm == nullptr) {
        Backend::output_head(out, head, in, round_input_f16);  // (no norm to fuse)
    } else if (out.ids.buffer != nullptr && x.ne[1] == 1) {
        head_ids(out.ids, out.logits, e, in, round_input_f16);
    } else if (out.ids.buffer == nullptr && out.top_k > 0) {
        head_top_k(out.logits, e, in, round_input_f16, out.top_k);
    } else {
        head_logits(out.logits, e, in, round_input_f16, out.ids);
    }
}

void WebGpuBackend::head_logits(const Tensor & logits, const GpuTable & e, const LinearInput & in, bool round_input_f16,
                                const Tensor & ids) {
    if (try_decode_head(logits, e, in.x, &as_norm(*in.norm), in.eps, round_input_f16, false)) {
        if (ids.buffer != nullptr) argmax(ids, logits);
        return;
    }
    HeadOutput out;
    out.logits = logits;
    out.ids    = ids;
    Backend::output_head(out, e, in, round_input_f16);
}

void WebGpuBackend::head_ids(const Tensor & ids, const Tensor & logits, const GpuTable & table, const LinearInput & in,
                             bool round_input_f16) {
    const GpuTable * e   = &table;
    const GpuNorm *  nw  = &as_norm(*in.norm);
    const Tensor &   x   = in.x;
    const float      eps = in.eps;
    TERN_ASSERT(ids.ne[0] == 1, "head_ids shapes");
    // The fast head: the int8 copy, which recomputes its own candidates (EXACT_TAIL), or the F16
    // table's f32 sums with one lower bound per 64-row block for argmax_exact; neither: the exact head.
    uint32_t groups = 0;
    bool     tail   = false;
    if (exact_rows_fit(*e)) {
        groups = try_decode_head_i8(logits, *e, x, *nw, eps, round_input_f16, /*exact_tail=*/true);
        tail   = groups > 0;
        if (!tail && try_decode_head(logits, *e, x, nw, eps, round_input_f16, true)) {
            const uint32_t n_blocks = static_cast<uint32_t>((e->n_rows + 63) / 64);
            groups = encode_exact_rows(logits, *e, x, *nw, eps, round_input_f16, n_blocks, false, 0);
        }
    }
    if (groups == 0) {
        head_logits(logits, table, in, round_input_f16, ids);
        return;
    }
    const WGPUBuffer pairs = tail ? head_exact_->get() : exact_partial_->get();
    const uint32_t   first = tail ? 1 : 0;  // (vec2 index: the tail's pair 0 holds its slots)
    // argmax_final reduces the groups' winners into ids. It waits (StepEncoder::defer) until the next
    // command: when that is the next step's embed of this id, embed_argmax.wgsl does both in one
    // dispatch (WebGpuBackend::embed); anything else records it first.
    const WGPUBuffer  ids_buffer = gpu_buffer(ids);
    const uint32_t    ids_offset = gpu_offset(ids, 4);
    auto              record     = [this, groups, pairs, first, ids_buffer, ids_offset] {
        struct {
            uint32_t n_chunks, ids_offset, chunks_offset;
        } pf{groups, ids_offset, first};
        const PipelineKey key_final{"argmax_final", "rwu", {{{"WG", 256}}}};
        const WGPUBuffer  bufs_final[] = {pairs, ids_buffer};
        step_->dispatch(key_final, bufs_final, &pf, sizeof pf, 1);
    };
    folded_pairs_        = pairs;
    folded_pairs_offset_ = first;
    folded_chunks_       = groups;
    step_->defer(ids_buffer, ids.offset, std::move(record));
}

}  // namespace tern
