// Prefill forms of the ternary ops of WebGpuBackend: with many tokens (a.q.ne[1] >= k_gemm_min_tokens)
// bitlinear, gate_up and qkv_rope_kv_append go through the tiled GEMM (shaders/ternary_gemm.wgsl),
// which reads each weight word once per 64 tokens and keeps its sums in registers, instead of the
// per-token kernels (bitlinear.wgsl & co.: at most 8 tokens per workgroup, activations re-read
// from global memory for every dot4, workgroup atomics). qkv becomes two dispatches: the GEMM into a
// scratch buffer, then rope_kv.wgsl (RoPE, q out, K/V cache append). Results are bit-identical to
// the per-token kernels (and so to the CPU backend).
//
// webgpu_ops.cpp calls prefill_<op>() first and falls back to its own kernels when it returns false.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"
#include "core/log.h"

#include <algorithm>
#include <optional>

namespace tern {
namespace {

// Tokens from which the GEMM is used (WebGpuTuning::gemm_min_tokens: 8 with the tensor-core GEMM,
// which at 8 tokens beat the per-token kernels by 42% on an H100, 2B4T at 8 streams, 1,838 against
// 1,297 tokens/s; 16 with the dot4 GEMM, whose crossover was not measured again). Below it the per-token
// kernels are at least as good: at T <= 8 they read the weights once, like the GEMM, and with 8..15
// tokens they read them twice while the GEMM would leave most of its 32-token tile idle. From 16
// tokens on the per-token kernels read the weights T / 8 times and pay a global activation load per
// dot4; the GEMM does neither. (A reasoned choice, not a measured one; both paths give identical
// results, so it only moves time.)

// ternary_gemm.wgsl's chunk: 4 code words (64 elements) per row. Multi-group weights need groups
// that are whole chunks (all supported types: 64, 128, 256 elements).
constexpr int64_t k_gemm_chunk_words = 4;

bool gemm_fits(const GpuLinear & w, int64_t n_tokens, int64_t min_tokens) {
    if (n_tokens < min_tokens) return false;
    return w.n_groups == 1 || (w.group / 16) % k_gemm_chunk_words == 0;
}

// Whether ternary_gemm.wgsl can run tiling t: TM 2, 4 or 8 (even, for gate/up pairs), TN 1..8, at
// most 8 code words and 8 activation vec4s staged per thread, within the device's workgroup limits.
bool gemm_tiling_ok(const GemmTiling & t, const WGPULimits & lim) {
    const uint64_t threads = uint64_t{t.tr} * t.tc;
    const uint64_t bm = uint64_t{t.tr} * t.tm, bn = uint64_t{t.tc} * t.tn;
    const uint64_t smem = (bm * (k_gemm_chunk_words + 1) + bn * k_gemm_chunk_words) * 16;
    return (t.tm == 2 || t.tm == 4 || t.tm == 8) && t.tn >= 1 && t.tn <= 8 && t.tr >= 1 && t.tc >= 1 &&
           threads <= lim.maxComputeInvocationsPerWorkgroup && threads <= lim.maxComputeWorkgroupSizeX &&
           bm * k_gemm_chunk_words <= 8 * threads && bn * k_gemm_chunk_words <= 8 * threads &&
           smem <= lim.maxComputeWorkgroupStorageSize;
}

// Whether ternary_gemm_mma.wgsl can run tiling t: SGM 1, 2, 4 or 8 (its activation staging splits
// a token's 4 vec4s among the subgroups along the rows), at most 1024 invocations.
bool mma_tiling_ok(const MmaTiling & t, const WGPULimits & lim) {
    const uint64_t threads = 32ull * t.sgm * t.sgn;
    const uint64_t bm = 32ull * t.sgm, bn = 32ull * t.sgn;
    const uint64_t smem = std::max(bm * bn, (bm + bn) * 20) * 4;
    return (t.sgm == 1 || t.sgm == 2 || t.sgm == 4 || t.sgm == 8) && t.sgn >= 1 && threads <= 1024 &&
           threads <= lim.maxComputeInvocationsPerWorkgroup && threads <= lim.maxComputeWorkgroupSizeX &&
           smem <= lim.maxComputeWorkgroupStorageSize;
}

}  // namespace

void WebGpuBackend::check_tuned_tilings() {
    const auto refuse = [&](const std::string & what) {
        fail(ErrorKind::invalid_argument,
             format("TERN_WEBGPU_TUNE: %s cannot run on '%s'", what.c_str(), ctx_.adapter().name.c_str()),
             "gemm_tile: TM 2, 4 or 8, TN 1..8, within the device's workgroup limits; mma_tile: SGM 1, 2, 4 or 8, at "
             "most 1024 threads");
    };
    const GemmTiling & g = tune_.gemm_tile;
    if (g.tm != 0 && !gemm_tiling_ok(g, ctx_.limits())) refuse(format("gemm_tile=%ux%ux%ux%u", g.tm, g.tn, g.tr, g.tc));
    for (const auto & [name, m] : {std::pair{"mma_tile", tune_.mma_tile}, std::pair{"mma_tile_long", tune_.mma_tile_long}}) {
        if (!mma_tiling_ok(m, ctx_.limits())) refuse(format("%s=%ux%u", name, m.sgm, m.sgn));
    }
}

int64_t WebGpuBackend::gemm_min_tokens() {
    if (tune_.gemm_min_tokens > 0) return tune_.gemm_min_tokens;
    return mma_unit() != 0 && !gemm_tiling_ ? 8 : 16;  // (the tensor-core GEMM: see the comment above)
}

bool WebGpuBackend::set_mma_tiling(std::optional<MmaTiling> t) {
    if (t && (mma_unit() == 0 || !mma_tiling_ok(*t, ctx_.limits()))) return false;
    mma_tiling_ = t;
    return true;
}

// 4 x 1 subgroups (128 rows x 32 tokens per workgroup), 2 x 1 for rows longer than 4096 (2B4T's
// down projection). H100 pp512 of 2B4T, alternating rounds of one call: one subgroup (32 x 32)
// ~18,200 tokens/s; 2 x 1 24,600-25,300, 4 x 1 24,800-26,300, 2 x 2 23,900-25,000, 1 x 2 and 1 x 4
// 22,700-23,800 (when not slowed by a bad repetition), 4 x 2 19,900-20,600, 8 x 1 18,100-18,900,
// 2 x 4 19,300-19,500; with 4 x 1, the down projection at 2 x 1 26,600-26,700 (2 x 2 25,100-26,000)
// and gate_up at 2 x 1, 4 x 2 or 8 x 1 no faster. RS (the operand rows' stride) stays 20 words:
// 24 gave 21,800-22,900 and 16 17,000.
// (WebGpuTuning::mma_tile, mma_tile_long)
WebGpuBackend::MmaTiling WebGpuBackend::mma_tiling(int64_t k) const {
    if (mma_tiling_) return *mma_tiling_;
    return k > 4096 ? tune_.mma_tile_long : tune_.mma_tile;
}

bool WebGpuBackend::set_gemm_tiling(std::optional<GemmTiling> t) {
    if (t && !gemm_tiling_ok(*t, ctx_.limits())) return false;
    gemm_tiling_ = t;
    return true;
}

WebGpuBackend::GemmTiling WebGpuBackend::gemm_tiling(int64_t n_tok) const {
    if (gemm_tiling_) return *gemm_tiling_;
    if (tune_.gemm_tile.tm != 0) return tune_.gemm_tile;
    // Threads: TR = 16 along rows (x TM = 4 rows: 64-row tiles) and TC along tokens (x TN = 8):
    // 64-token tiles, 32 when the prompt is short (less idle work in the one partial tile).
    GemmTiling t;
    if (n_tok <= 32) t.tc = 4;
    return t;
}

uint32_t WebGpuBackend::mma_unit() {
    // (Found by the constructor: the probe reads back, which must not happen inside a step.)
    if (mma_unit_) return *mma_unit_;
    mma_unit_ = 0;
    if (!ctx_.features().subgroup_matrix) return 0;
    // ternary_gemm_mma.wgsl's workgroups must split into subgroups of exactly 32.
    if (ctx_.adapter().subgroup_min != 32 || ctx_.adapter().subgroup_max != 32) {
        TERN_LOG_INFO("webgpu: subgroup matrices unused: subgroups of %u-%u invocations, not 32",
                      ctx_.adapter().subgroup_min, ctx_.adapter().subgroup_max);
        return 0;
    }
    // A 16 x 16 x 32 product of random bytes (the extremes included) against the CPU's.
    std::vector<int8_t> a(16 * 64), b(16 * 64);
    uint32_t            state = 12345;
    for (auto * v : {&a, &b}) {
        for (auto & x : *v) {
            state = state * 1664525u + 1013904223u;
            x     = static_cast<int8_t>(state >> 24);
        }
    }
    a[32] = b[32] = -128;
    const std::vector<int32_t> want = subgroup_matrix_probe_product(a, b);
    for (uint32_t unit : {4u, 1u}) {
        const MatrixProbe r = subgroup_matrix_probe(a, b, unit);
        if (!r.error.empty()) {
            TERN_LOG_INFO("webgpu: subgroup matrices unused: %s", r.error.c_str());
            return 0;
        }
        const bool exact = r.c == want;
        if (exact) {
            try {  // the kernel itself must compile here too (its shapes are the probe's)
                for (const int64_t k : {int64_t{4096}, int64_t{4160}}) {  // the tilings mma_tiling picks
                    const MmaTiling t = mma_tiling(k);
                    pipelines_.pipeline(PipelineKey{"ternary_gemm_mma",
                                                    "rrrwu",
                                                    {{{"MU", static_cast<double>(unit)},
                                                      {"SGM", static_cast<double>(t.sgm)},
                                                      {"SGN", static_cast<double>(t.sgn)}}}});
                }
            } catch (const Error & e) {
                TERN_LOG_WARN("webgpu: the tensor-core GEMM does not build here (%s); prompts use dot4", e.what());
                return 0;
            }
            mma_unit_ = unit;
            TERN_LOG_INFO("webgpu: prompt matmuls on the subgroup matrices (int8, offsets in units of %u bytes)", unit);
            return unit;
        }
    }
    TERN_LOG_WARN("webgpu: the subgroup matrices did not give the exact int8 product; prompts use dot4");
    return 0;
}

// A decode-shaped GEMM (a batch of 16-64 sequences' tokens) has few workgroups (2B4T's qkv at 64
// tokens: 60 on 132 compute units), each walking all of K: 40-108 chunks one after another, each a
// load, a barrier and the products, so the step waits on one workgroup's chain of memory latencies
// (H200, 64 streams: 37-73 us per GEMM, 5.7 ms per step; split by gemm_split_groups = 264, ~3 ms
// with the sums: 5,431 tokens/s against 4,738 unsplit). Split along K, the workgroups sum shares
// of the chunks into [S][T][N] i32 and gemm_split_sum.wgsl adds them (integers: exact) and applies
// the epilogue, so the result is the unsplit GEMM's bits. Only for one scale group per row (I2_S):
// with several, the groups' f32 partial sums must be added in group order.
uint32_t WebGpuBackend::gemm_split(const GpuLinear & w, uint32_t groups, uint32_t n_chunks) const {
    if (w.n_groups != 1) return 1;
    uint32_t s = 1;
    if (gemm_split_) {
        s = *gemm_split_;
    } else if (tune_.gemm_split_groups != 0 && groups > 0) {
        s = std::min(tune_.gemm_split_groups / groups, n_chunks / 4);
    }
    return std::clamp<uint32_t>(s, 1, std::max<uint32_t>(1, std::min<uint32_t>(n_chunks, 65535)));
}

void WebGpuBackend::encode_gemm(WGPUBuffer y, uint32_t y_offset, uint32_t y_stride, const GpuLinear & w,
                                const QuantizedActs & a, uint32_t n_out, bool gate_up, uint32_t last_param) {
    const int64_t    n_tok = a.q.ne[1];
    const uint32_t   unit  = mma_unit();
    const GemmTiling t     = gemm_tiling(n_tok);
    const uint32_t   bm = t.tr * t.tm, bn = t.tc * t.tn;
    const uint32_t   outs = gate_up ? bm / 2 : bm;
    const bool       mma  = unit != 0 && !gemm_tiling_ && w.n_cols % 64 == 0 && gpu_offset(a.q, 4) % 4 == 0 &&
                     (w.n_cols / 4) % 4 == 0;
    const MmaTiling  m    = mma_tiling(w.n_cols);
    const uint32_t   gx   = mma ? ceil_div(n_out, gate_up ? 16 * m.sgm : 32 * m.sgm) : ceil_div(n_out, outs);
    const uint32_t   gy   = mma ? ceil_div(n_tok, 32 * m.sgn) : ceil_div(n_tok, bn);
    const uint32_t   split = gemm_split(w, gx * gy, ceil_div(w.n_cols / 16, k_gemm_chunk_words));
    // Split: the shares go to the part buffer ([S][T][N] i32), gemm_split_sum.wgsl then writes y.
    const WGPUBuffer y_gemm = split > 1 ? grown(gemm_split_part_, size_t{split} * static_cast<size_t>(n_tok) *
                                                                      static_cast<size_t>(w.n_rows) * 4,
                                                "split GEMM shares")
                                        : y;
    struct {
        uint32_t n_out, k_words, group_words, n_tokens, scales_offset, oscales_offset, act_offset, act_stride,
            ascale_offset, y_offset, y_stride, last;
    } p{n_out,
        u32(w.n_cols / 16),
        u32(w.group / 16),
        u32(n_tok),
        w.scales_offset,
        w.oscales_offset,
        gpu_offset(a.q, 4),
        u32(w.n_cols / 4),
        gpu_offset(a.scale, 4),
        split > 1 ? 0u : y_offset,
        split > 1 ? u32(w.n_rows) : y_stride,
        last_param};
    // ternary_gemm_mma.wgsl: where the device has exact int8 subgroup matrices, no dot4 tiling is
    // forced, and its vec4 loads fit (K a multiple of 64, act_q at a 16-byte offset).
    if (mma) {
        PipelineKey key{"ternary_gemm_mma",
                        "rrrwu",
                        {{{"N_GROUPS", static_cast<double>(w.n_groups)},
                          {"GATE_UP", gate_up ? 1.0 : 0.0},
                          {"MU", static_cast<double>(unit)},
                          {"SGM", static_cast<double>(m.sgm)},
                          {"SGN", static_cast<double>(m.sgn)}}}};
        if (split > 1) key.add("SPLIT", static_cast<double>(split));
        const WGPUBuffer bufs[] = {w.buffer->get(), gpu_buffer(a.q), gpu_buffer(a.scale), y_gemm};
        step_->dispatch(key, bufs, &p, sizeof p, gx, gy, split);
    } else {
        PipelineKey key{dot4_native_ ? "ternary_gemm" : "ternary_gemm_nodp4",
                        "rrrwu",
                        {{{"TM", static_cast<double>(t.tm)},
                          {"TN", static_cast<double>(t.tn)},
                          {"TR", static_cast<double>(t.tr)},
                          {"TC", static_cast<double>(t.tc)},
                          {"N_GROUPS", static_cast<double>(w.n_groups)},
                          {"GATE_UP", gate_up ? 1.0 : 0.0}}}};
        if (split > 1) key.add("SPLIT", static_cast<double>(split));
        const WGPUBuffer bufs[] = {w.buffer->get(), gpu_buffer(a.q), gpu_buffer(a.scale), y_gemm};
        step_->dispatch(key, bufs, &p, sizeof p, gx, gy, split);
    }
    if (split == 1) return;
    struct {
        uint32_t n_out, n_tokens, n_rows, n_split, scales_offset, oscales_offset, ascale_offset, y_offset, y_stride,
            last;
    } ps{n_out,           u32(n_tok),       u32(w.n_rows),          split,    w.scales_offset,
         w.oscales_offset, gpu_offset(a.scale, 4), y_offset, y_stride, last_param};
    const WGPUBuffer weights = w.buffer->get(), scale = gpu_buffer(a.scale);
    auto             record  = [this, ps, weights, y_gemm, scale, y, gate_up] {
        split_sum_.pending = false;
        const PipelineKey key_sum{"gemm_split_sum", "rrrwu", {{{"WG", 64}, {"GATE_UP", gate_up ? 1.0 : 0.0}}}};
        const WGPUBuffer  bufs_sum[] = {weights, y_gemm, scale, y};
        step_->dispatch(key_sum, bufs_sum, &ps, sizeof ps, ceil_div(ps.n_out, 64), ps.n_tokens);
    };
    if (gate_up || last_param > 1 || n_out != w.n_rows) {
        record();
        return;
    }
    // y += W a: the next norm of y may take the sum in (rms_norm_quant_after_sum); y = W a (qkv):
    // the next rope_kv (encode_rope_kv).
    step_->defer(y, uint64_t{y_offset} * 4, record);
    split_sum_ = {weights,         y_gemm,     scale,    y,          n_out,      u32(n_tok), split,
                  w.scales_offset, w.oscales_offset, ps.ascale_offset, y_offset, y_stride, last_param, true};
}

bool WebGpuBackend::prefill_bitlinear(const Tensor & y, const Weight & w, const QuantizedActs & a, bool accumulate) {
    const GpuLinear & lw = as_linear(w);
    if (!gemm_fits(lw, a.q.ne[1], gemm_min_tokens())) return false;
    TERN_ASSERT(y.ne[0] == lw.n_rows && a.q.ne[0] == lw.n_cols && y.ne[1] == a.q.ne[1], "bitlinear shapes");
    encode_gemm(gpu_buffer(y), gpu_offset(y, 4), u32(y.ne[0]), lw, a, u32(lw.n_rows), false, accumulate ? 1 : 0);
    return true;
}

bool WebGpuBackend::prefill_gate_up(const Tensor & f, const Weight & w_gate_up, const QuantizedActs & a,
                                    FfnActivation act) {
    const GpuLinear & lw = as_linear(w_gate_up);
    if (!gemm_fits(lw, a.q.ne[1], gemm_min_tokens())) return false;
    const int64_t n_ff = lw.n_rows / 2;
    TERN_ASSERT(f.ne[0] == n_ff && f.ne[1] == a.q.ne[1] && a.q.ne[0] == lw.n_cols, "gate_up shapes");
    encode_gemm(gpu_buffer(f), gpu_offset(f, 4), u32(f.ne[0]), lw, a, u32(n_ff), true,
                act == FfnActivation::relu2 ? 0 : 1);
    return true;
}

bool WebGpuBackend::prefill_qkv_rope_kv_append(const Tensor & q, const KvLayer & kv, const Weight & wqkv,
                                               const QuantizedActs & a, const AttentionShape & s, int64_t pos0) {
    const GpuLinear & lw    = as_linear(wqkv);
    const int64_t     n_tok = a.q.ne[1];
    const int64_t     hd    = s.head_dim;
    // Unsupported head shapes: the per-token path reports them.
    if (!gemm_fits(lw, n_tok, gemm_min_tokens()) || hd % 4 != 0 || s.n_rot % 4 != 0 || s.n_rot > hd) return false;
    const int64_t n_q  = s.n_head * hd;
    const int64_t n_kv = s.n_head_kv * hd;
    TERN_ASSERT(lw.n_rows == n_q + 2 * n_kv && q.ne[0] == n_q && kv.k.ne[0] == n_kv && a.q.ne[0] == lw.n_cols,
                "qkv shapes");
    TERN_ASSERT(pos0 >= 0 && pos0 + n_tok <= kv.k.ne[1], "positions past the KV cache");
    TERN_ASSERT(kv.k.offset % 4 == 0 && kv.v.offset % 4 == 0, "KV cache views must be 4-byte aligned");

    // [q; k; v] products, [N, T] f32, into the scratch buffer (made once, grown when needed).
    const size_t bytes = static_cast<size_t>(lw.n_rows * n_tok) * 4;
    encode_gemm(grown(qkv_scratch_, bytes, "qkv scratch"), 0, u32(lw.n_rows), lw, a, u32(lw.n_rows), false, 0);

    encode_rope_kv(q, kv, lw, s, n_tok, pos0, nullptr);
    return true;
}

void WebGpuBackend::encode_rope_kv(const Tensor & q, const KvLayer & kv, const GpuLinear & lw, const AttentionShape & s,
                                   int64_t n_tok, int64_t pos0, const KvBatch * batch) {
    const int64_t     hd      = s.head_dim;
    const int64_t     max_pos = batch != nullptr ? batch->max_position() : pos0 + n_tok - 1;
    const RopeTable & rope    = rope_table(s.n_rot, s.rope_freq_base, max_pos + 1);
    const size_t      k_el    = kv.k.type == DType::f16 ? 2 : 4;
    const size_t      v_el    = kv.v.type == DType::f16 ? 2 : 4;
    struct {
        uint32_t n_units, head_dim, n_rot, n_head, n_head_kv, pos0, x_offset, x_stride, q_offset, q_stride, k_offset,
            v_offset, n_embd_kv, cols_offset;
    } p{u32(lw.n_rows / 4), u32(hd),        u32(s.n_rot),          u32(s.n_head),         u32(s.n_head_kv),
        u32(pos0),          0,              u32(lw.n_rows),        gpu_offset(q, 4),      u32(s.n_head * hd),
        gpu_offset(kv.k, k_el), gpu_offset(kv.v, v_el), u32(kv.k.ne[0]),
        batch != nullptr ? gpu_offset(batch->columns, 4) : 0};
    constexpr uint32_t wg = 64;
    const WGPUBuffer   cols = batch != nullptr ? gpu_buffer(batch->columns) : qkv_scratch_->get();
    const SplitSum &   ss   = split_sum_;
    if (ss.pending && ss.last == 0 && ss.y == qkv_scratch_->get() && ss.y_offset == 0 && ss.y_stride == lw.n_rows &&
        ss.n_out == lw.n_rows && ss.n_tokens == n_tok && step_->take_deferred(ss.y, 0)) {
        // The GEMM's split sum in this dispatch (rope_kv_split.wgsl): its shares instead of products.
        split_sum_.pending = false;
        struct {
            uint32_t n_units, head_dim, n_rot, n_head, n_head_kv, pos0, n_tokens, n_split, q_offset, q_stride, k_offset,
                v_offset, n_embd_kv, cols_offset, scales_offset, oscales_offset, ascale_offset;
        } ps{p.n_units,   p.head_dim,  p.n_rot,     p.n_head,    p.n_head_kv,    p.pos0,
             ss.n_tokens, ss.n_split,  p.q_offset,  p.q_stride,  p.k_offset,     p.v_offset,
             p.n_embd_kv, p.cols_offset, ss.scales_offset, ss.oscales_offset, ss.ascale_offset};
        const PipelineKey key{"rope_kv_split",
                              "rrwwwrrru",
                              {{{"WG", static_cast<double>(wg)},
                                {"K_F16", kv.k.type == DType::f16 ? 1.0 : 0.0},
                                {"V_F16", kv.v.type == DType::f16 ? 1.0 : 0.0},
                                {"PAGED", batch != nullptr ? 1.0 : 0.0}}}};
        // (Without pages `cols` binds the part buffer, which nothing writes here.)
        const WGPUBuffer bufs[] = {ss.part,          rope.buffer->get(),   gpu_buffer(q), gpu_buffer(kv.k),
                                   gpu_buffer(kv.v), batch != nullptr ? cols : ss.part, ss.weights, ss.scale};
        step_->dispatch(key, bufs, &ps, sizeof ps, ceil_div(lw.n_rows / 4, wg), u32(n_tok));
        ++split_sums_fused_;
        return;
    }
    const PipelineKey  key{"rope_kv",
                          "rrwwwru",
                          {{{"WG", static_cast<double>(wg)},
                            {"K_F16", kv.k.type == DType::f16 ? 1.0 : 0.0},
                            {"V_F16", kv.v.type == DType::f16 ? 1.0 : 0.0},
                            {"PAGED", batch != nullptr ? 1.0 : 0.0}}}};
    const WGPUBuffer bufs[] = {qkv_scratch_->get(), rope.buffer->get(), gpu_buffer(q), gpu_buffer(kv.k),
                               gpu_buffer(kv.v), cols};
    step_->dispatch(key, bufs, &p, sizeof p, ceil_div(lw.n_rows / 4, wg), u32(n_tok));
}

}  // namespace tern
