// The op encoders of WebGpuBackend: each op of backend.h becomes one dispatch of a WGSL kernel
// (shaders/<op>.wgsl) with a Params struct that mirrors the kernel's, field for field. Tensors are
// passed as whole buffers plus element offsets, so views need no alignment beyond their element.
//
// A decoded token takes the fused one-token kernels of webgpu_decode.cpp: 1 embed + 5 L (qkv+rope+kv,
// attention, o-proj + residual, gate+up+act, down + residual, each matmul with its norm in the
// prologue) + the LM head = 5 L + 2 (152 for 30 layers). Prompts use the ops below one by one
// (norms as their own dispatches).
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace tern {
namespace {

// How a ternary kernel's workgroup is cut: `teams` weight rows (2 per output for gate_up) of `lanes`
// threads each, times `toks` tokens. Lanes ~ K/64 words' worth (4..64, a power of two) so that every
// lane has a few words to read; as many teams as make up 256 threads; then tokens and teams shrink
// until the per-group integer sums fit in 16 KiB of workgroup memory.
struct TernaryTiling {
    uint32_t lanes = 64, teams = 4, toks = 1;
    uint32_t wg() const { return lanes * teams; }
};

TernaryTiling ternary_tiling(int64_t k_words, int64_t n_groups, int64_t n_tokens, uint32_t team_multiple,
                             uint32_t max_teams) {
    TernaryTiling t;
    t.lanes = std::clamp<uint32_t>(floor_pow2(static_cast<uint64_t>(std::max<int64_t>(1, k_words / 4))), 4, 64);
    t.teams = std::min<uint32_t>(256 / t.lanes, max_teams);
    t.teams = std::max(team_multiple, t.teams / team_multiple * team_multiple);
    t.toks  = static_cast<uint32_t>(std::min<int64_t>(8, n_tokens));
    auto bytes = [&] { return static_cast<int64_t>(t.teams) * t.toks * n_groups * 4; };
    while (bytes() > 16384 && t.toks > 1) --t.toks;
    while (bytes() > 16384 && t.teams > team_multiple) t.teams /= 2;
    return t;
}

}  // namespace

std::string_view WebGpuBackend::ternary_shader(std::string_view base) const {
    if (base == "bitlinear") return dot4_native_ ? "bitlinear" : "bitlinear_nodp4";
    if (base == "gate_up") return dot4_native_ ? "gate_up" : "gate_up_nodp4";
    if (base == "qkv_rope") return dot4_native_ ? "qkv_rope" : "qkv_rope_nodp4";
    if (base == "bitlinear_decode") return dot4_native_ ? "bitlinear_decode" : "bitlinear_decode_nodp4";
    if (base == "gate_up_decode") return dot4_native_ ? "gate_up_decode" : "gate_up_decode_nodp4";
    if (base == "qkv_rope_decode") return dot4_native_ ? "qkv_rope_decode" : "qkv_rope_decode_nodp4";
    if (base == "lm_head_i8_argmax") return dot4_native_ ? "lm_head_i8_argmax" : "lm_head_i8_argmax_nodp4";
    TERN_ASSERT(false, "no ternary shader '%.*s'", static_cast<int>(base.size()), base.data());
    return {};
}

void WebGpuBackend::embed(const Tensor & x, const Weight & token_embd, const Tensor & tokens) {
    const GpuTable * e = &as_table(token_embd);
    const int64_t n_tok = tokens.ne[0];
    TERN_ASSERT(x.ne[0] == e->n_cols && x.ne[1] == n_tok, "embed shapes");
    // One token: x's block sums of squares for the first layer's norm (norm statistics).
    const bool     stats_out = stats_fit(e->n_cols) && n_tok == 1;
    const uint32_t out_slot  = stats_out_slot(std::nullopt);
    struct {
        uint32_t n_embd, n_vocab, table_offset, ids_offset, x_offset, x_stride, stats_out;
    } p{u32(e->n_cols), u32(e->n_rows), 0, gpu_offset(tokens, 4), gpu_offset(x, 4), u32(x.ne[0]), out_slot};
    if (n_tok == 1 && step_->take_deferred(gpu_buffer(tokens), tokens.offset)) {
        // The previous step's greedy argmax left its last stage for this embed (output_head with ids):
        // both in one dispatch, which also writes the id.
        struct {
            uint32_t n_embd, n_vocab, table_offset, ids_offset, x_offset, x_stride, stats_out, n_chunks, chunks_offset;
        } pa{p.n_embd, p.n_vocab, 0, p.ids_offset, p.x_offset, p.x_stride, p.stats_out, folded_chunks_,
             folded_pairs_offset_};
        const PipelineKey key{"embed_argmax",
                              "rrwwwu",
                              {{{"WG", 256}, {"TABLE_F16", e->f16 ? 1.0 : 0.0}, {"STATS_OUT", stats_out ? 1.0 : 0.0}}}};
        const WGPUBuffer bufs[] = {e->buffer->get(), folded_pairs_, gpu_buffer(tokens), gpu_buffer(x),
                                   stats_buffer()};
        step_->dispatch(key, bufs, &pa, sizeof pa, ceil_div(e->n_cols, 256));
    } else {
        const PipelineKey key{
            "embed", "rrwwu", {{{"WG", 256}, {"TABLE_F16", e->f16 ? 1.0 : 0.0}, {"STATS_OUT", stats_out ? 1.0 : 0.0}}}};
        const WGPUBuffer bufs[] = {e->buffer->get(), gpu_buffer(tokens), gpu_buffer(x), stats_buffer()};
        step_->dispatch(key, bufs, &p, sizeof p, ceil_div(e->n_cols, 256), u32(n_tok));
    }
    if (stats_out) stats_written(x, out_slot);
}

// Workgroup size of rms_norm.wgsl / rms_norm_quant.wgsl for rows of k elements: lib/inv_rms.wgsl
// holds 32 elements per invocation (its halving tree in registers), so k <= 32 WG; 256 up to 8192.
// (The smallest such workgroups, together with a subgroup form of the halving sum, were 0.7% slower
// at pp512 on an H200; the two were not measured apart.)
uint32_t WebGpuBackend::norm_workgroup(int64_t k) const {
    uint32_t wg = 256;
    while (static_cast<int64_t>(wg) * 32 < k) wg *= 2;
    const uint32_t max_wg = ctx_.limits().maxComputeInvocationsPerWorkgroup;
    if (wg > max_wg) {
        fail(ErrorKind::unsupported,
             format("a norm over %lld elements needs %u threads per workgroup (32 elements each); this adapter "
                    "allows %u: rows of at most %lld elements can be normalized on it (use --backend cpu)",
                    static_cast<long long>(k), wg, max_wg, static_cast<long long>(max_wg) * 32));
    }
    return wg;
}

void WebGpuBackend::rms_norm_quant(const QuantizedActs & a, const Tensor & x, const Weight & w, float eps) {
    const GpuNorm * nw = &as_norm(w);
    const int64_t k = x.ne[0];
    TERN_ASSERT(nw->n_cols == k && a.q.ne[0] == k && k % 4 == 0 && a.q.ne[1] == x.ne[1], "rms_norm_quant shapes");
    if (rms_norm_quant_after_sum(a, x, *nw, eps)) return;
    if (norm_quant_words(a, x, *nw, eps, nullptr)) return;
    struct {
        uint32_t k;
        float    eps;
        uint32_t x_offset, x_stride, w_offset, q_offset, q_stride, scale_offset;
    } p{u32(k), eps, gpu_offset(x, 4), u32(k), 0, gpu_offset(a.q, 4), u32(k / 4), gpu_offset(a.scale, 4)};
    const PipelineKey key{"rms_norm_quant", "rrwwu", {{{"WG", static_cast<double>(norm_workgroup(k))}}}};
    const WGPUBuffer  bufs[] = {gpu_buffer(x), nw->buffer->get(), gpu_buffer(a.q), gpu_buffer(a.scale)};
    step_->dispatch(key, bufs, &p, sizeof p, u32(x.ne[1]));
}

bool WebGpuBackend::rms_norm_quant_after_sum(const QuantizedActs & a, const Tensor & x, const GpuNorm & nw, float eps) {
    const SplitSum & ss = split_sum_;
    const int64_t    k  = x.ne[0];
    // The sum is x's (all of it, tokens at stride k) and reads the activation scales a gets.
    // norm_quant_words.wgsl takes o's and down's sum (y += W a) in, where it runs (otherwise
    // gemm_split_sum.wgsl, then rms_norm_quant.wgsl).
    if (!ss.pending || norm_words_wg(k) == 0 || x.offset % 16 != 0 || ss.last != 1 ||
        ss.y != gpu_buffer(x) || ss.y_offset != gpu_offset(x, 4) || ss.y_stride != k ||
        ss.n_out != k || ss.n_tokens != x.ne[1] || ss.scale != gpu_buffer(a.scale) ||
        ss.ascale_offset != gpu_offset(a.scale, 4) || !step_->take_deferred(ss.y, uint64_t{ss.y_offset} * 4)) {
        return false;
    }
    split_sum_.pending = false;
    const bool fused = norm_quant_words(a, x, nw, eps, &ss);
    TERN_ASSERT(fused, "norm_quant_words runs where checked above");
    ++split_sums_fused_;
    return true;
}

uint32_t WebGpuBackend::norm_words_wg(int64_t k) const {
    const uint32_t limit = std::min(ctx_.limits().maxComputeInvocationsPerWorkgroup, ctx_.limits().maxComputeWorkgroupSizeX);
    // At most 8 words per thread (wg >= k / 32) and 256 blocks of 32 (lib/sum_squares.wgsl).
    uint32_t wg = norm_words_wg_.value_or(tune_.norm_words_wg);
    if (k > 8192 || k % 4 != 0) return 0;
    while (static_cast<int64_t>(wg) * 32 < k) wg *= 2;
    wg = std::min(wg, floor_pow2(limit));
    return static_cast<int64_t>(wg) * 32 >= k ? wg : 0;
}

bool WebGpuBackend::norm_quant_words(const QuantizedActs & a, const Tensor & x, const GpuNorm & nw, float eps,
                                     const SplitSum * ss) {
    const int64_t  k  = x.ne[0];
    const uint32_t wg = norm_words_wg(k);
    if (wg == 0 || x.offset % 16 != 0) return false;
    const uint32_t n_words = u32(k / 4), u = ceil_div(n_words, wg);
    struct {
        uint32_t k;
        float    eps;
        uint32_t x_offset, x_stride, w_offset, q_offset, q_stride, scale_offset, n_tokens, scales_offset,
            oscales_offset;
    } p{u32(k),
        eps,
        ss ? ss->y_offset / 4 : gpu_offset(x, 16),
        n_words,
        0,
        gpu_offset(a.q, 4),
        n_words,
        ss ? ss->ascale_offset : gpu_offset(a.scale, 4),
        ss ? ss->n_tokens : u32(x.ne[1]),
        ss ? ss->scales_offset : 0,
        ss ? ss->oscales_offset : 0};
    PipelineKey key{"norm_quant_words", "wrwwrru", {{{"WG", static_cast<double>(wg)}, {"U", static_cast<double>(u)}}}};
    if (ss) key.add("SPLIT", static_cast<double>(ss->n_split));
    // Without the sum the weights and shares are not read: the norm weights stand in for them.
    const WGPUBuffer w_buf   = nw.buffer->get();
    const WGPUBuffer bufs[] = {gpu_buffer(x), w_buf, gpu_buffer(a.q), gpu_buffer(a.scale), ss ? ss->weights : w_buf,
                               ss ? ss->part : w_buf};
    step_->dispatch(key, bufs, &p, sizeof p, u32(x.ne[1]));
    return true;
}

void WebGpuBackend::rms_norm(const Tensor & y, const Tensor & x, const Weight & w, float eps) {
    const GpuNorm * nw = &as_norm(w);
    const int64_t k = x.ne[0];
    TERN_ASSERT(nw->n_cols == k && y.ne[0] == k && y.ne[1] == x.ne[1], "rms_norm shapes");
    struct {
        uint32_t k;
        float    eps;
        uint32_t x_offset, x_stride, w_offset, y_offset, y_stride;
    } p{u32(k), eps, gpu_offset(x, 4), u32(k), 0, gpu_offset(y, 4), u32(k)};
    WGPUBuffer x_buffer = gpu_buffer(x);
    if (x_buffer == gpu_buffer(y)) {
        // In place: WebGPU forbids binding one buffer as both input and output, so norm a copy.
        const size_t bytes = x.n_bytes();
        const WGPUBuffer copy = grown(scratch_, bytes, "norm scratch");
        step_->copy(x_buffer, x.offset, copy, 0, (bytes + 3) / 4 * 4);
        x_buffer   = copy;
        p.x_offset = 0;
    }
    const PipelineKey key{"rms_norm", "rrwu", {{{"WG", static_cast<double>(norm_workgroup(k))}}}};
    const WGPUBuffer  bufs[] = {x_buffer, nw->buffer->get(), gpu_buffer(y)};
    step_->dispatch(key, bufs, &p, sizeof p, u32(x.ne[1]));
}

void WebGpuBackend::encode_ternary(std::string_view shader, const Tensor & y, const GpuLinear & w,
                                   const QuantizedActs & a, uint32_t n_out, uint32_t max_outputs, uint32_t last_param) {
    const int64_t       k     = w.n_cols;
    const int64_t       n_tok = a.q.ne[1];
    const bool          gate  = shader.starts_with("gate_up");
    // gate_up: teams = 2 x outputs (gate row and up row of each output).
    const TernaryTiling tl    = ternary_tiling(k / 16, w.n_groups, n_tok, gate ? 2 : 1, gate ? 2 * max_outputs : max_outputs);
    const uint32_t      outs  = gate ? tl.teams / 2 : tl.teams;
    struct {
        uint32_t n_out, k_words, group_words, n_tokens, scales_offset, oscales_offset, act_offset, act_stride,
            ascale_offset, y_offset, y_stride, last;
    } p{n_out,          u32(k / 16),         u32(w.group / 16),  u32(n_tok),     w.scales_offset,
        w.oscales_offset, gpu_offset(a.q, 4), u32(k / 4),         gpu_offset(a.scale, 4), gpu_offset(y, 4),
        u32(y.ne[0]),    last_param};
    const PipelineKey key{shader,
                          "rrrwu",
                          {{{"WG", static_cast<double>(tl.wg())},
                            {"ROWS", static_cast<double>(outs)},
                            {"TOKS", static_cast<double>(tl.toks)},
                            {"N_GROUPS", static_cast<double>(w.n_groups)}}}};
    const WGPUBuffer  bufs[] = {w.buffer->get(), gpu_buffer(a.q), gpu_buffer(a.scale), gpu_buffer(y)};
    step_->dispatch(key, bufs, &p, sizeof p, ceil_div(n_out, outs), ceil_div(n_tok, tl.toks));
}

void WebGpuBackend::bitlinear(const Tensor & y, const Weight & w, const QuantizedActs & a, bool accumulate) {
    if (prefill_bitlinear(y, w, a, accumulate)) return;  // many tokens: the tiled GEMM (webgpu_prefill.cpp)
    const GpuLinear & lw = as_linear(w);
    TERN_ASSERT(y.ne[0] == lw.n_rows && a.q.ne[0] == lw.n_cols && y.ne[1] == a.q.ne[1], "bitlinear shapes");
    if (try_decode_bitlinear(y, lw, a, nullptr, nullptr, 0.0f, accumulate)) return;
    encode_ternary(ternary_shader("bitlinear"), y, lw, a, u32(lw.n_rows), 64, accumulate ? 1 : 0);
}

void WebGpuBackend::gate_up(const Tensor & f, const Weight & w_gate_up, const QuantizedActs & a, FfnActivation act) {
    if (prefill_gate_up(f, w_gate_up, a, act)) return;  // many tokens: the tiled GEMM (webgpu_prefill.cpp)
    const GpuLinear & lw   = as_linear(w_gate_up);
    const int64_t     n_ff = lw.n_rows / 2;
    TERN_ASSERT(f.ne[0] == n_ff && f.ne[1] == a.q.ne[1] && a.q.ne[0] == lw.n_cols, "gate_up shapes");
    if (try_decode_gate_up(f, lw, a, nullptr, nullptr, 0.0f, act)) return;
    encode_ternary(ternary_shader("gate_up"), f, lw, a, u32(n_ff), 32, act == FfnActivation::relu2 ? 0 : 1);
}

void WebGpuBackend::qkv_rope_kv_append(const Tensor & q, const KvLayer & kv, const Weight & wqkv,
                                       const QuantizedActs & a, const AttentionShape & s, int64_t pos0) {
    if (prefill_qkv_rope_kv_append(q, kv, wqkv, a, s, pos0)) return;  // many tokens: GEMM + rope_kv.wgsl
    const GpuLinear & lw    = as_linear(wqkv);
    const int64_t     hd    = s.head_dim;
    const int64_t     n_q   = s.n_head * hd;
    const int64_t     n_kv  = s.n_head_kv * hd;
    const int64_t     n_tok = a.q.ne[1];
    TERN_ASSERT(lw.n_rows == n_q + 2 * n_kv && q.ne[0] == n_q && kv.k.ne[0] == n_kv && a.q.ne[0] == lw.n_cols,
                "qkv shapes");
    TERN_ASSERT(pos0 >= 0 && pos0 + n_tok <= kv.k.ne[1], "positions past the KV cache");
    if (hd % 4 != 0 || s.n_rot % 4 != 0 || s.n_rot > hd) {
        fail(ErrorKind::unsupported,
             format("webgpu: head_dim %lld with %lld rotated dimensions; the WebGPU kernels need both to be "
                    "multiples of 4",
                    static_cast<long long>(hd), static_cast<long long>(s.n_rot)),
             "use --backend cpu for this model");
    }
    if (try_decode_qkv(q, kv, lw, a, nullptr, nullptr, 0.0f, s, pos0)) return;
    const RopeTable & rope = rope_table(s.n_rot, s.rope_freq_base, pos0 + n_tok);
    // Slots per workgroup: a power of two >= 4 dividing head_dim (so RoPE pairs stay together).
    uint32_t max_rows = 4;
    while (max_rows < 64 && hd % (max_rows * 2) == 0) max_rows *= 2;
    const TernaryTiling tl = ternary_tiling(lw.n_cols / 16, lw.n_groups, n_tok, 4, max_rows);
    const uint32_t      rows = tl.teams;
    const size_t      k_el = kv.k.type == DType::f16 ? 2 : 4;
    const size_t      v_el = kv.v.type == DType::f16 ? 2 : 4;
    TERN_ASSERT(kv.k.offset % 4 == 0 && kv.v.offset % 4 == 0, "KV cache views must be 4-byte aligned");
    struct {
        uint32_t k_words, group_words, n_tokens, scales_offset, oscales_offset, act_offset, act_stride, ascale_offset,
            head_dim, n_rot, n_head, n_head_kv, pos0, q_offset, q_stride, k_offset, v_offset, n_embd_kv;
    } p{u32(lw.n_cols / 16), u32(lw.group / 16), u32(n_tok),       lw.scales_offset,     lw.oscales_offset,
        gpu_offset(a.q, 4),  u32(lw.n_cols / 4), gpu_offset(a.scale, 4), u32(hd),          u32(s.n_rot),
        u32(s.n_head),       u32(s.n_head_kv),   u32(pos0),          gpu_offset(q, 4),     u32(n_q),
        gpu_offset(kv.k, k_el), gpu_offset(kv.v, v_el), u32(n_kv)};
    const PipelineKey key{ternary_shader("qkv_rope"),
                          "rrrrwwwu",
                          {{{"WG", static_cast<double>(tl.wg())},
                            {"ROWS", static_cast<double>(rows)},
                            {"TOKS", static_cast<double>(tl.toks)},
                            {"N_GROUPS", static_cast<double>(lw.n_groups)},
                            {"K_F16", kv.k.type == DType::f16 ? 1.0 : 0.0},
                            {"V_F16", kv.v.type == DType::f16 ? 1.0 : 0.0}}}};
    const WGPUBuffer bufs[] = {lw.buffer->get(), gpu_buffer(a.q), gpu_buffer(a.scale), rope.buffer->get(),
                               gpu_buffer(q),    gpu_buffer(kv.k), gpu_buffer(kv.v)};
    step_->dispatch(key, bufs, &p, sizeof p, ceil_div(lw.n_rows, rows), ceil_div(n_tok, tl.toks));
}

uint32_t score_block_words(bool k_f16) { return k_f16 ? 8 : 16; }

uint32_t score_threads(uint32_t row_words, bool k_f16) {
    const uint32_t blocks = (row_words + score_block_words(k_f16) - 1) / score_block_words(k_f16);
    uint32_t       ts     = 1;
    while (ts < blocks) ts *= 2;
    return ts;
}

// attention.wgsl's CHUNK (probabilities staged at a time; the host keeps the shader's default).
constexpr uint32_t k_attention_chunk = 256;

// attention.wgsl's workgroup memory besides the scores: qh (HD_MAX = 256), probs (CHUNK), the
// reductions (wg_reduce's two and lib/sum_squares.wgsl's), pv_sum (CHUNK / 32 blocks x hd / 2 pairs
// of f32) and blk_sum, kpart, the K tile.
static uint64_t attention_fixed_bytes(uint32_t wg, uint32_t kpart, uint32_t tile_words, uint32_t hd) {
    constexpr uint64_t blocks = k_attention_chunk / 32;
    return 256 * 4 + k_attention_chunk * 4 + uint64_t{wg} * (4 + 8 + 4) + blocks * (hd / 2) * 8 + blocks * 4 +
           uint64_t{kpart} * 4 + uint64_t{tile_words} * 4;
}

// Scores kept in attention.wgsl's workgroup memory: what is left of the device's workgroup storage
// after the kernel's other arrays, at most 2048.
uint32_t WebGpuBackend::attention_score_slots(uint32_t wg, uint32_t kpart, uint32_t tile_words, uint32_t hd) const {
    const uint64_t storage = ctx_.limits().maxComputeWorkgroupStorageSize;
    const uint64_t other   = attention_fixed_bytes(wg, kpart, tile_words, hd);
    const uint64_t slots   = storage > other ? (storage - other) / 4 / 256 * 256 : 0;
    return static_cast<uint32_t>(std::clamp<uint64_t>(slots, 256, 2048));
}

std::vector<int64_t> WebGpuBackend::warm_up_positions(int64_t n_ctx) const {
    // One query's attention changes form with its position (attention_prefetching below): the short
    // form ends at 128 positions (256 for head_dim 64), 512 threads from attn_wide_positions, the
    // split kernels from attn_long_positions (800 or fewer); and the RoPE table grows with the
    // positions (its last size from a step at n_ctx - 1). Each new pipeline compiles at its first
    // step: on an H200 ~35 ms with the driver's cache warm, ~600 ms cold, inside the tokens a user
    // waits for unless the warm-up ran them.
    const int64_t long_min = long_positions();
    std::vector<int64_t> p = {128, 256, int64_t{tune_.attn_wide_positions}, long_min - 1, n_ctx - 1};
    std::erase_if(p, [&](int64_t x) { return x <= 0 || x >= n_ctx; });
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    return p;
}

void WebGpuBackend::attention(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & s,
                              int64_t pos0) {
    // One query: the weight two matmuls ahead comes with it (WeightOrder).
    attention_prefetching(out, q, kv, s, pos0, q.ne[1] == 1 ? weight_order_.attention(step_->releases()) : nullptr);
}

void WebGpuBackend::attention_prefetching(const Tensor & out, const Tensor & q, const KvLayer & kv,
                                          const AttentionShape & s, int64_t pos0,
                                          const GpuLinear * prefetch) {
    const int64_t n_tok = q.ne[1];
    const int64_t hd    = s.head_dim;
    TERN_ASSERT(pos0 + n_tok <= kv.k.ne[1], "attention past the KV cache");
    TERN_ASSERT(s.n_head % s.n_head_kv == 0 && out.ne[0] == s.n_head * hd && q.ne[0] == s.n_head * hd,
                "attention shapes");
    if (hd > 256 || hd % 4 != 0) {
        fail(ErrorKind::unsupported, format("webgpu: head_dim %lld; the attention kernel needs a multiple of 4 up to 256",
                                            static_cast<long long>(hd)),
             "use --backend cpu for this model");
    }
    const size_t k_el = kv.k.type == DType::f16 ? 2 : 4;
    const size_t v_el = kv.v.type == DType::f16 ? 2 : 4;
    // One query: the output's block sums of squares for the o-projection's norm (norm statistics,
    // webgpu_backend_impl.h), 16 invocations per block of 32 elements.
    // Or, for a family's o-projection of Q8_0 blocks (seen once: try_family_decode), its blocks
    // (attention.wgsl Q8_OUT) instead of act_q8_0.wgsl after it.
    const bool     q8_out    = attn_q8_out_ && n_tok == 1 && hd % 32 == 0;
    const bool     stats_out = !q8_out && stats_fit(out.ne[0]) && n_tok == 1 && hd % 32 == 0;
    const uint32_t out_slot  = q8_out ? 0u : stats_out_slot(std::nullopt);
    struct {
        uint32_t head_dim, n_head, n_head_kv, n_tokens, pos0, n_embd_kv, q_offset, q_stride, out_offset, out_stride,
            k_offset, v_offset;
        float    scale;
        uint32_t stats_out;
    } p{u32(hd),          u32(s.n_head),   u32(s.n_head_kv),      u32(n_tok),
        u32(pos0),        u32(kv.k.ne[0]), gpu_offset(q, 4),      u32(q.ne[0]),
        gpu_offset(out, 4), u32(out.ne[0]), gpu_offset(kv.k, k_el), gpu_offset(kv.v, v_el),
        s.scale,          out_slot};
    // One query over more than attn_wide_positions positions: 512 threads where the device
    // allows them and their workgroup memory (tiles of 64 positions instead of 32), else 256 (its
    // tiled scores use them all): with the cache rows in L2 (the qkv kernel's KV_PREFETCH) a short
    // context is faster on fewer threads (H100 tg128 764.6-767.9 tokens/s against 754.3-756.3 with
    // 512; with V_FIRST 0 in another call 771.0-772.7 against 761.4-763.0; 128 threads 756.7-760.0
    // against 763.1-767.4 for 256 in a third; before the prefetch 512 won, 511-512 against 497).
    // At 257-320 positions 256 threads ran at 659.4-659.7 tokens/s against 656.8-657.6 with 512, at
    // 513-576 at 584.2-585.1 against 586.9-588.4 (H100). 128 for prompts (measured faster on an H100:
    // more workgroups per SM). (WebGpuTuning::attn_wg, attn_wide_positions)
    const double attn_wg_env = tune_.attn_wg;
    const WGPULimits & lim   = ctx_.limits();
    const bool         tiled = n_tok == 1;  // tiles for one query; prompts keep workgroup memory small
    const uint32_t     hw    = static_cast<uint32_t>(kv.k.type == DType::f16 ? hd / 2 : hd);  // words per K row
    struct Tiling {
        uint32_t wg = 0, ts = 1, tile = 1;
    };
    // Tiled scores: S = ts threads per position, one block of 16 dimensions each (cpu::dot_blocked16),
    // rounded up to a power of two.
    const auto tiling_for = [&](double wanted) {
        Tiling t;
        t.wg = static_cast<uint32_t>(std::max(std::min(wanted, static_cast<double>(lim.maxComputeInvocationsPerWorkgroup)),
                                              static_cast<double>(hd / 2)));
        t.ts = score_threads(hw, kv.k.type == DType::f16);
        t.tile = tiled ? t.wg / t.ts * (hw + 1) : 1;
        return t;
    };
    Tiling tl = tiling_for(attn_wg_env > 0 ? attn_wg_env : (tiled ? 256.0 : 128.0));
    if (attn_wg_env == 0 && tiled && pos0 + n_tok > int64_t{tune_.attn_wide_positions}) {
        const Tiling   wide  = tiling_for(512.0);
        const uint64_t bytes = attention_fixed_bytes(wide.wg, wide.wg, wide.tile, u32(hd)) + 256 * 4;  // + 256 score slots
        if (wide.wg == 512 && lim.maxComputeWorkgroupSizeX >= 512 && bytes <= lim.maxComputeWorkgroupStorageSize) {
            tl = wide;
        }
    }
    const uint32_t wg = tl.wg, ts = tl.ts, tile = tl.tile;
    const uint32_t sc_max = attention_score_slots(wg, tiled ? wg : 1, tile, u32(hd));
    // One query over many positions: attention.wgsl walks them all in one workgroup per head (and
    // past its score slots computes every score three times: max, exp sum, P·V), so from
    // attn_long_positions on the positions spread over many workgroups instead
    // (webgpu_attention_split.cpp; with the kernels before them, attention_long_*, on an H200 2B4T, tg128 at a depth of 1024: 2.23 ms per token against
    // 2.45, at 512: 2.02 against 1.86; the two cross near 800 positions), or from fewer where
    // attention.wgsl keeps fewer scores.
    const int64_t long_min = tune_.attn_long_positions != 0 ? long_positions()
                                                            : std::min<int64_t>(long_positions(), int64_t{sc_max} + 1);
    // (and every row past one superblock: issue 52's block order, webgpu_attention_paged.cpp)
    const bool    long_one = n_tok == 1 && (pos0 + 1 >= long_min || pos0 + 1 > 512);
    if (long_one && split_attention(out, q, kv, s, nullptr, pos0)) return;  // webgpu_attention_split.cpp
    // (rows over one superblock of 512 positions never reach attention.wgsl: its softmax is one pass)
    if (prefill_attention(out, q, kv, s, pos0, long_one || pos0 + n_tok > 512)) return;  // many tokens (or fallback)
    TERN_ASSERT(pos0 + n_tok <= 512, "attention.wgsl over more than one superblock");
    // One query over few positions: the short form (lib/attention_core.wgsl ATT_SHORT: every K and
    // V word loaded before q, the probabilities passed by shuffles), where subgroups are exactly 32
    // invocations and a P·V group is whole subgroups; positions up to 4 K tiles, one 32-position
    // block per group (128 for 2B4T on 256 threads). Its own pipeline, without the general form's
    // code. WebGpuOptions::short_attention turns it off (tests).
    int64_t short_max = 0;
    if (tiled && attention_short_ok_ && ts <= 32 && (hd / 2) % 32 == 0 && wg <= 256) {
        const uint32_t kc     = std::min(wg / ts, tile / (hw + 1));
        const uint32_t groups = wg / static_cast<uint32_t>(hd / 2);
        short_max             = std::min({4 * kc, 32 * groups, k_attention_chunk, sc_max});
        if (pos0 + 1 > short_max) short_max = 0;
    }
    PipelineKey key{"attention",
                    "rrrwwrrrru",
                    {{{"WG", static_cast<double>(wg)},
                      {"K_F16", kv.k.type == DType::f16 ? 1.0 : 0.0},
                      {"V_F16", kv.v.type == DType::f16 ? 1.0 : 0.0},
                      {"SC_MAX", static_cast<double>(sc_max)},
                      {"HD", static_cast<double>(hd)},
                      {"S", static_cast<double>(ts)},
                      {"WPT", static_cast<double>(score_block_words(kv.k.type == DType::f16))},
                      {"TILE", static_cast<double>(tile)},
                      {"TILED", tiled ? 1.0 : 0.0},
                      {"KPART", tiled ? static_cast<double>(wg) : 1.0},
                      {"STATS_OUT", stats_out ? 1.0 : 0.0}}}};
    // One query: the values its first loads need as pipeline constants (lib/attention_core.wgsl), so
    // they do not wait for the uniform; offsets only where 0 (each layer's cache is its own tensor).
    if (tiled) {
        if (p.q_offset == 0) key.add("Q_AT", 0.0);
        if (p.k_offset == 0) key.add("ATT_K_AT", 0.0);
        if (p.v_offset == 0) key.add("ATT_V_AT", 0.0);
        key.add("ATT_ROW", static_cast<double>(p.n_embd_kv));
        key.add("ATT_GROUP", static_cast<double>(s.n_head / s.n_head_kv));
        key.add("ATT_CTX", static_cast<double>(std::min(kv.k.ne[1], kv.v.ne[1])));
    }
    if (short_max > 0) key.add("ATT_SHORT", 1.0);
    if (q8_out) {
        key.add("Q8_OUT", 1.0);
        key.add("ACT_NB", static_cast<double>(out.ne[0] / 32));
    }
    // One query: the weights to prefetch, by workgroups after the heads' (PF_FROM; attention.wgsl).
    // Unused slots bind q and prefetch nothing.
    WGPUBuffer     pf_bufs[4] = {gpu_buffer(q), gpu_buffer(q), gpu_buffer(q), gpu_buffer(q)};
    uint32_t       pf_groups  = 0;
    if (tiled && prefetch != nullptr) {
        // Loads per invocation. Where attention is short (its 256-thread form, up to 384 positions)
        // the prefetch is what its dispatch waits for, and a compute unit's misses in flight are
        // limited: so as few loads as keep the prefetching workgroups on the units the heads leave
        // free (the more units pull, the sooner the weights are in; one that shares a unit with a
        // head slows that head). WebGPU does not tell how many units a GPU has: the tuning's
        // compute_units assumes an H100 / H200 (132). H200 tg128 (2B4T: 20 heads, 8.8 MB): 5 loads (110
        // workgroups) 927.3-927.5 tokens/s, 6 (92) 925.7-925.9, 8 (69) 913.4-914.5, 4 (137)
        // 880.0-882.0. Longer attention hides the prefetch, and there 8 loads (fewer workgroups
        // beside it) measured best: after 512 tokens (512 threads) tg64 703.6-704.6 against
        // 693.1-696.0 spread over the free units. (WebGpuTuning::attn_prefetch_loads)
        const uint32_t     words               = static_cast<uint32_t>(prefetch->buffer->size_bytes() / 4);
        constexpr uint32_t k_loads_beside_long = 8;  // (the 512-thread form)
        const uint32_t     pf_loads            = tune_.attn_prefetch_loads != 0 ? tune_.attn_prefetch_loads
                                                 : wg <= 256 ? prefetch_loads_on_free_units(words, wg, u32(s.n_head),
                                                                                            tune_.compute_units)
                                                             : k_loads_beside_long;
        key.add("PF_FROM", static_cast<double>(s.n_head));
        key.add("PF_LOADS", static_cast<double>(pf_loads));
        pf_bufs[0] = prefetch->buffer->get();
        pf_groups  = ceil_div(words, wg * pf_loads * k_prefetch_stride_words);
        key.add("PF_WORDS0", static_cast<double>(words));
    }
    const WGPUBuffer acts = q8_out ? grown(fa_acts_[2], family_act_bytes(out.ne[0] / 32, 1), "attention q8_0 outputs")
                                   : stats_buffer();
    const WGPUBuffer bufs[] = {gpu_buffer(q),  gpu_buffer(kv.k), gpu_buffer(kv.v), gpu_buffer(out), acts,
                               pf_bufs[0],     pf_bufs[1],       pf_bufs[2],       pf_bufs[3]};
    step_->dispatch(key, bufs, &p, sizeof p, u32(s.n_head) + pf_groups, u32(n_tok));
    if (stats_out) stats_written(out, out_slot);
    if (n_tok == 1) {
        const FamilyActs a{gpu_buffer(out), gpu_offset(out, 4), out.ne[0], 1, step_->serial(), q8_out ? acts : nullptr};
        (q8_out ? fa_ready_ : attn_out_) = a;
    }
}

WGPUBuffer WebGpuBackend::argmax_partials(size_t n_bytes) {
    return grown(argmax_partial_, n_bytes, "argmax partials");
}

void WebGpuBackend::lm_head(const Tensor & logits, const Weight & head, const Tensor & h, bool round_input_f16) {
    const GpuTable * e = &as_table(head);
    const int64_t n_tok = h.ne[1];
    TERN_ASSERT(h.ne[0] == e->n_cols && logits.ne[0] == e->n_rows && logits.ne[1] == n_tok, "lm_head shapes");
    if (try_decode_head(logits, *e, h, nullptr, 0.0f, round_input_f16, false)) return;
    if (e->blocks) return family_lm_head(logits, *e, h, round_input_f16);  // lm_head_q.wgsl
    const int64_t  words = e->f16 ? e->n_cols / 2 : e->n_cols;
    const uint32_t lanes = std::clamp<uint32_t>(floor_pow2(static_cast<uint64_t>(std::max<int64_t>(1, words / 8))), 4, 64);
    const uint32_t rows  = 256 / lanes;
    const uint32_t toks  = static_cast<uint32_t>(std::min<int64_t>(4, n_tok));
    struct {
        uint32_t n_vocab, k, n_tokens, head_offset, h_offset, h_stride, out_offset, out_stride;
    } p{u32(e->n_rows), u32(e->n_cols), u32(n_tok), 0, gpu_offset(h, 4), u32(h.ne[0]), gpu_offset(logits, 4),
        u32(logits.ne[0])};
    const PipelineKey key{"lm_head",
                          "rrwu",
                          {{{"WG", 256},
                            {"ROWS", static_cast<double>(rows)},
                            {"TOKS", static_cast<double>(toks)},
                            {"TABLE_F16", e->f16 ? 1.0 : 0.0},
                            {"ROUND_IN", round_input_f16 ? 1.0 : 0.0}}}};
    const WGPUBuffer bufs[] = {e->buffer->get(), gpu_buffer(h), gpu_buffer(logits)};
    step_->dispatch(key, bufs, &p, sizeof p, ceil_div(e->n_rows, rows), ceil_div(n_tok, toks));
}

void WebGpuBackend::argmax(const Tensor & ids, const Tensor & logits) {
    // Two stages: chunks of 4096 logits per workgroup (all SMs busy), then one workgroup per token
    // over the chunk winners. Ties go to the lower index in both, as on the CPU.
    const uint32_t n_tok = u32(logits.ne[1]);
    if (n_tok == 1 && head_partials_.serial == step_->serial() && head_partials_.logits == gpu_buffer(logits) &&
        head_partials_.offset == gpu_offset(logits, 4)) {
        // The decode LM head has just written the first stage (its 64-row winners).
        struct {
            uint32_t n_chunks, ids_offset;
        } p{head_partials_.n_chunks, gpu_offset(ids, 4)};
        const PipelineKey key{"argmax_final", "rwu", {{{"WG", 256}}}};
        const WGPUBuffer  bufs[] = {argmax_partial_->get(), gpu_buffer(ids)};
        step_->dispatch(key, bufs, &p, sizeof p, 1);
        return;
    }
    constexpr uint32_t k_chunk  = 4096;
    const uint32_t     n_chunks = ceil_div(logits.ne[0], k_chunk);
    const WGPUBuffer   partials = argmax_partials(static_cast<size_t>(n_chunks) * n_tok * 8);
    struct {
        uint32_t n_vocab, logits_offset, logits_stride, n_chunks;
    } p1{u32(logits.ne[0]), gpu_offset(logits, 4), u32(logits.ne[0]), n_chunks};
    const PipelineKey key1{"argmax_partial", "rwu", {{{"WG", 256}, {"CHUNK", static_cast<double>(k_chunk)}}}};
    const WGPUBuffer  bufs1[] = {gpu_buffer(logits), partials};
    step_->dispatch(key1, bufs1, &p1, sizeof p1, n_chunks, n_tok);

    struct {
        uint32_t n_chunks, ids_offset;
    } p2{n_chunks, gpu_offset(ids, 4)};
    const PipelineKey key2{"argmax_final", "rwu", {{{"WG", 256}}}};
    const WGPUBuffer  bufs2[] = {partials, gpu_buffer(ids)};
    step_->dispatch(key2, bufs2, &p2, sizeof p2, n_tok);
}

}  // namespace tern
