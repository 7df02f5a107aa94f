// The decode qkv projection and attention of one token as one dispatch (qkv_attention_decode.wgsl):
// the last qkv workgroup to finish a query head's inputs attends it, so a layer costs one dispatch
// boundary less. Same numerics as qkv_rope_decode.wgsl + attention.wgsl, bit for bit.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace tern {

// $TERN_WEBGPU_QKV_ATTN=0 keeps qkv and attention as two dispatches (a tuning aid).
static bool qkv_attention_env() {
    static const bool on = [] {
        const char * env = std::getenv("TERN_WEBGPU_QKV_ATTN");
        return !(env && std::string_view(env) == "0");
    }();
    return on;
}

bool WebGpuBackend::try_decode_qkv_attention(const Tensor & out, const KvLayer & kv, const GpuLinear & w,
                                             const QuantizedActs & a, const Tensor & x, const Weight & norm,
                                             float eps, const AttentionShape & s, int64_t pos0,
                                             const GpuLinear * prefetch) {
    const int64_t hd = s.head_dim;
    const int64_t n  = pos0 + 1;  // positions attended
    if (!qkv_attention_ || !qkv_attention_env() || !fuse_norms_ || x.ne[1] != 1 || n > k_attention_wide_positions) return false;
    if (std::getenv("TERN_WEBGPU_ATTN_WG") != nullptr || (long_attention_ > 0 && n >= long_attention_)) return false;
    if (const char * env = std::getenv("TERN_WEBGPU_ATTN_LONG"); env && *env && n >= std::atoll(env)) return false;
    if (hd % 4 != 0 || hd > 256 || s.n_rot % 4 != 0 || s.n_rot > hd || s.n_head % s.n_head_kv != 0) return false;
    const auto t = qkv_decode_tiling(w, hd);
    if (!t) return false;
    const uint32_t wg = t->wg;
    if (wg < hd / 2 || (wg & (wg - 1)) != 0 || (s.n_head / s.n_head_kv) > 32) return false;
    const int64_t n_q = s.n_head * hd, n_kv = s.n_head_kv * hd;
    TERN_ASSERT(w.n_rows == n_q + 2 * n_kv && out.ne[0] == n_q && kv.k.ne[0] == n_kv && x.ne[0] == w.n_cols,
                "qkv_attention shapes");
    TERN_ASSERT(pos0 >= 0 && pos0 + 1 <= kv.k.ne[1] && pos0 + 1 <= kv.v.ne[1], "positions past the KV cache");

    // attention.wgsl's tiling for one query on wg threads, and the workgroup memory of both parts;
    // where it does not fit, the K tile holds fewer positions (it is used only without K_REGS).
    const bool     k_f16  = kv.k.type == DType::f16, v_f16 = kv.v.type == DType::f16;
    const uint32_t hw     = static_cast<uint32_t>(k_f16 ? hd / 2 : hd);  // u32 words per K row
    const uint32_t ts     = score_threads(hw, k_f16);
    const uint32_t sc_max = static_cast<uint32_t>(k_attention_wide_positions);
    const uint64_t qkv_bytes = static_cast<uint64_t>(w.n_cols) + uint64_t{wg} * 4 + (uint64_t{wg} + 64) * 12 + 256 * 4 + 16;
    uint32_t       tile_rows = wg / ts;
    const auto     bytes     = [&] {
        return attention_fixed_bytes(wg, wg, tile_rows * (hw + 1), static_cast<uint32_t>(hd)) + sc_max * 4 + qkv_bytes;
    };
    while (tile_rows > 8 && bytes() > ctx_.limits().maxComputeWorkgroupStorageSize) tile_rows /= 2;
    if (bytes() > ctx_.limits().maxComputeWorkgroupStorageSize) return false;

    // The flow words: lib/dataflow.wgsl's header (16 words), a counter per query head in a region of
    // its own (words 16 .. 16 + k_counters: always 0 between dispatches, whatever the shape or cache
    // type of the model that ran before), then the values: q, the K and V row words (u32 values).
    constexpr uint32_t k_counters = 256;
    if (s.n_head > k_counters) return false;
    const uint32_t kw = hw, vw = static_cast<uint32_t>(v_f16 ? hd / 2 : hd);
    const uint32_t f_cnt = 16, f_q = k_counters / 2;  // (value slot i is words 16 + 2i, 16 + 2i + 1)
    const uint32_t f_k = f_q + static_cast<uint32_t>(n_q), f_v = f_k + static_cast<uint32_t>(s.n_head_kv) * kw;
    const uint32_t f_end = f_v + static_cast<uint32_t>(s.n_head_kv) * vw;
    const size_t   flow_bytes = (16 + 2 * static_cast<size_t>(f_end)) * 4;
    if (!qa_flow_ || qa_flow_->size_bytes() < flow_bytes) {
        step_->run_deferred();
        qa_flow_ = make_buffer(flow_bytes, nullptr, "qkv attention dataflow");
        const std::vector<uint32_t> zeros(flow_bytes / 4, 0);  // tags 0 (never current), counters 0
        wgpu().wgpuQueueWriteBuffer(ctx_.queue(), qa_flow_->get(), 0, zeros.data(), flow_bytes);
    }
    qa_tag_ = qa_tag_ % 65535 + 1;  // 1..65535: a word of the previous dispatch never carries it

    const RopeTable &  rope = rope_table(s.n_rot, s.rope_freq_base, pos0 + 1);
    const size_t       k_el = k_f16 ? 2 : 4, v_el = v_f16 ? 2 : 4;
    const DecodeSource src  = decode_source(a, &x, &norm);
    const std::optional<uint32_t> in = stats_for(x);
    const bool     stats_out = stats_fit(out.ne[0]) && hd % 32 == 0;
    const uint32_t out_slot  = stats_out_slot();
    const uint32_t k_offset = gpu_offset(kv.k, k_el), v_offset = gpu_offset(kv.v, v_el);
    const uint32_t n_embd_kv = static_cast<uint32_t>(kv.k.ne[0]);
    const uint32_t k_row = (k_offset + static_cast<uint32_t>(pos0) * n_embd_kv) / (k_f16 ? 2 : 1);
    const uint32_t v_row = (v_offset + static_cast<uint32_t>(pos0) * n_embd_kv) / (v_f16 ? 2 : 1);
    struct {
        float    eps;
        uint32_t src_offset, scale_offset, scales_offset, oscales_offset, head_dim, n_rot, n_head, n_head_kv, pos0,
            k_offset, v_offset, n_embd_kv, stats_in, stats_out, out_offset;
        float    scale;
        uint32_t tag, n_tickets, k_row, v_row, f_q, f_k, f_v, f_cnt;
    } p{eps,           src.offset,      src.scale_offset,   w.scales_offset,       w.oscales_offset,
        u32(hd),       u32(s.n_rot),    u32(s.n_head),      u32(s.n_head_kv),      u32(pos0),
        k_offset,      v_offset,        n_embd_kv,          in.value_or(0),        out_slot,
        gpu_offset(out, 4), s.scale,    qa_tag_,            0,                     k_row,
        v_row,         f_q,             f_k,                f_v,                   f_cnt};
    const uint32_t groups   = static_cast<uint32_t>(w.n_rows / t->rows);
    const uint32_t q_groups = static_cast<uint32_t>(n_q / t->rows);
    PipelineKey key = decode_key("qkv_attention_decode", "rrrrwwwwwru", *t, w.n_cols, true, src, in);
    key.add("K_F16", k_f16 ? 1.0 : 0.0);
    key.add("V_F16", v_f16 ? 1.0 : 0.0);
    key.add("HD", static_cast<double>(hd));
    key.add("HD_MAX", static_cast<double>(hd));
    if (const_uniforms_ & 2) key.add("QKV_N_ROT", static_cast<double>(s.n_rot));
    key.add("S", static_cast<double>(ts));
    key.add("WPT", static_cast<double>(score_block_words(k_f16)));
    key.add("TILE", static_cast<double>(tile_rows * (hw + 1)));
    key.add("KPART", static_cast<double>(wg));
    key.add("SC_MAX", static_cast<double>(sc_max));
    if (stats_out) key.add("STATS_OUT", 1.0);
    key.add("QKV_GROUPS", static_cast<double>(groups));
    key.add("Q_GROUPS", static_cast<double>(q_groups));
    if (const_uniforms_ & 4) {  // as attention(): the cache's place and shape as constants
        if (k_offset == 0) key.add("ATT_K_AT", 0.0);
        if (v_offset == 0) key.add("ATT_V_AT", 0.0);
        key.add("ATT_ROW", static_cast<double>(n_embd_kv));
        key.add("ATT_GROUP", static_cast<double>(s.n_head / s.n_head_kv));
        key.add("ATT_CTX", static_cast<double>(std::min(kv.k.ne[1], kv.v.ne[1])));
    }
    const WGPUBuffer pf     = add_kernel_prefetch(key, prefetch, groups, wg, src.src);
    const WGPUBuffer bufs[] = {w.buffer->get(), src.src,          src.scale,        rope.buffer->get(),
                               gpu_buffer(out), gpu_buffer(kv.k), gpu_buffer(kv.v), stats_buffer(),
                               qa_flow_->get(), pf};
    step_->dispatch(key, bufs, &p, sizeof p, groups);
    if (stats_out) stats_written(out, out_slot);
    ++qkv_attention_dispatches_;
    return true;
}

uint32_t WebGpuBackend::qkv_attention_flow_error() {
    if (!qa_flow_) return 0;
    uint32_t words[2] = {0, 0};
    Tensor   t;
    t.type   = DType::i32;
    t.ne     = {2, 1, 1, 1};
    t.buffer = qa_flow_.get();
    read(t, words, sizeof words);
    return words[1];
}

}  // namespace tern
