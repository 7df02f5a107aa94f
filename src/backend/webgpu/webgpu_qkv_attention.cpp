// One token's qkv projection and attention in one dispatch (shaders/qkv_attention_decode.wgsl):
// the qkv rows spread over k / v workgroups and two workgroups per query head, the second of which
// attends, with the values that cross workgroups in lib/dataflow.wgsl's tagged words.
#include "backend/webgpu/webgpu_backend_impl.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace tern {

bool WebGpuBackend::try_decode_qkv_attention(const Tensor & out, const KvLayer & kv,
                                             const GpuLinear & w, const QuantizedActs & a, const Tensor & x,
                                             const Weight & norm, float eps, const AttentionShape & s, int64_t pos0,
                                             const GpuLinear * prefetch) {
    if (!qkv_attention_ || !fuse_norms_ || x.ne[1] != 1) return false;
    const int64_t hd = s.head_dim;
    if (hd % 64 != 0 || hd > 256 || s.n_rot % 4 != 0 || s.n_rot > hd || s.n_head % s.n_head_kv != 0) return false;
    const bool     k_f16 = kv.k.type == DType::f16, v_f16 = kv.v.type == DType::f16;
    const uint32_t hw    = static_cast<uint32_t>(k_f16 ? hd / 2 : hd);  // u32 words per head of a K row
    // q: two workgroups per head of hd / 2 rows; k / v: 16 rows per workgroup, with as many lanes
    // as the q workgroups' size gives them. $TERN_WEBGPU_QKV_ATTN_WG (a tuning aid) asks for a size.
    static const uint32_t wg_env = env_u32("TERN_WEBGPU_QKV_ATTN_WG", 256);
    const auto tq = decode_tiling(w, 1, static_cast<uint32_t>(hd / 2), 1, std::max<uint32_t>(4, wg_env / u32(hd / 2)), wg_env);
    if (!tq || tq->rows != hd / 2) return false;
    const uint32_t wg = tq->wg;
    const auto     tk = decode_tiling(w, 1, 16, 1, std::max<uint32_t>(4, wg / 16), wg);
    if (!tk || tk->wg != wg || tk->rows != 16) return false;
    const int64_t n_kv = kv.k.ne[0];
    if (n_kv != s.n_head_kv * hd || w.n_rows != s.n_head * hd + 2 * n_kv || (2 * n_kv) % tk->rows != 0 ||
        (s.n_head * hd) % tk->rows != 0) {
        return false;
    }
    // attention.wgsl on 256 threads: its short form where WebGpuBackend::attention_prefetching takes
    // it, else its general form with the scores kept (up to 256 positions; longer contexts take the
    // two kernels).
    const uint32_t ts = score_threads(hw, k_f16);
    const uint32_t tile   = wg / ts * (hw + 1);
    const uint32_t kc     = wg / ts;
    const uint32_t groups = wg / static_cast<uint32_t>(hd / 2);
    const uint32_t sc_max = std::min<uint32_t>(attention_score_slots(wg, wg, tile, u32(hd)), 256);
    const bool     short_form = attention_short_ok_ && ts <= 32 && (hd / 2) % 32 == 0;
    const int64_t  max_positions = short_form ? std::min<int64_t>({4 * kc, 32 * groups, 256, sc_max}) : sc_max;
    if (pos0 + 1 > max_positions || pos0 + 1 > kv.k.ne[1]) return false;
    // The attention prefetch: one weight at most (one binding).
    const uint32_t k_el = k_f16 ? 2 : 4, v_el = v_f16 ? 2 : 4;
    const uint32_t k_off = gpu_offset(kv.k, k_el), v_off = gpu_offset(kv.v, v_el);
    const uint64_t k_row_el = uint64_t{k_off} + static_cast<uint64_t>(pos0) * n_kv;
    const uint64_t v_row_el = uint64_t{v_off} + static_cast<uint64_t>(pos0) * n_kv;
    const uint64_t k_row = k_f16 ? k_row_el / 2 : k_row_el, v_row = v_f16 ? v_row_el / 2 : v_row_el;
    // Rows of whole u32 words; K rows on whole vec4s (the K tiles are read as vec4s).
    if ((k_f16 && k_row_el % 2) || (v_f16 && v_row_el % 2) || k_row % 4 != 0 || hw % 4 != 0) return false;

    // Flow value slots: q (all heads' dimensions; the publishing halves use theirs), then the new K
    // and V rows' words.
    const uint32_t kw_all = static_cast<uint32_t>(k_f16 ? n_kv / 2 : n_kv);
    const uint32_t vw_all = static_cast<uint32_t>(v_f16 ? n_kv / 2 : n_kv);
    const uint32_t f_q = 0, f_k = u32(s.n_head * hd), f_v = f_k + kw_all, f_end = f_v + vw_all;
    const size_t   flow_bytes = (16 + 2 * size_t{f_end}) * 4;
    if (!flow_ || flow_->size_bytes() < flow_bytes) {
        flow_ = make_buffer(flow_bytes, nullptr, "layer dataflow");
        const std::vector<uint32_t> zeros(flow_bytes / 4, 0);
        wgpu().wgpuQueueWriteBuffer(ctx_.queue(), flow_->get(), 0, zeros.data(), flow_bytes);
        flow_done_ = {};
    }
    flow_tag_ = flow_tag_ % 65535 + 1;  // 1..65535: a word of an earlier dispatch never carries it

    const RopeTable &             rope = rope_table(s.n_rot, s.rope_freq_base, pos0 + 1);
    const DecodeSource            src  = decode_source(a, &x, &norm);
    const std::optional<uint32_t> in   = stats_for(x);
    const bool                    stats_out = stats_fit(out.ne[0]) && hd % 32 == 0;
    const uint32_t                out_slot  = stats_out_slot();
    const uint32_t kv_groups = u32(2 * n_kv) / tk->rows;
    struct {
        float    eps;
        uint32_t src_offset, scale_offset, scales_offset, oscales_offset, head_dim, n_rot, n_head, n_head_kv, pos0,
            k_offset, v_offset, n_embd_kv, stats_in, stats_out, out_offset;
        float    scale;
        uint32_t tag, n_tickets, k_row, v_row, f_q, f_k, f_v;
    } p{eps,
        src.offset,
        src.scale_offset,
        w.scales_offset,
        w.oscales_offset,
        u32(hd),
        u32(s.n_rot),
        u32(s.n_head),
        u32(s.n_head_kv),
        u32(pos0),
        k_off,
        v_off,
        u32(n_kv),
        in.value_or(0),
        out_slot,
        gpu_offset(out, 4),
        s.scale,
        flow_tag_,
        0,  // (n_tickets, below)
        static_cast<uint32_t>(k_row),
        static_cast<uint32_t>(v_row),
        f_q,
        f_k,
        f_v};
    PipelineKey key = decode_key("qkv_attention_decode", "rrrrwwwwwru", *tq, w.n_cols, true, src, in);
    key.add("KV_LANES", static_cast<double>(tk->lanes));
    key.add("KV_GROUPS", static_cast<double>(kv_groups));
    key.add("N_HEAD", static_cast<double>(s.n_head));
    key.add("K_F16", k_f16 ? 1.0 : 0.0);
    key.add("V_F16", v_f16 ? 1.0 : 0.0);
    key.add("HD", static_cast<double>(hd));
    if (const_uniforms_ & 2) key.add("QKV_N_ROT", static_cast<double>(s.n_rot));
    key.add("SC_MAX", static_cast<double>(sc_max));
    key.add("S", static_cast<double>(ts));
    key.add("WPT", static_cast<double>(score_block_words(k_f16)));
    key.add("TILE", static_cast<double>(tile));
    key.add("TILED", 1.0);
    key.add("KPART", static_cast<double>(wg));
    key.add("STATS_OUT", stats_out ? 1.0 : 0.0);
    if (short_form) key.add("ATT_SHORT", 1.0);
    if (const_uniforms_ & 4) {
        if (k_off == 0) key.add("ATT_K_AT", 0.0);
        if (v_off == 0) key.add("ATT_V_AT", 0.0);
        key.add("ATT_ROW", static_cast<double>(n_kv));
        key.add("ATT_GROUP", static_cast<double>(s.n_head / s.n_head_kv));
        key.add("ATT_CTX", static_cast<double>(std::min(kv.k.ne[1], kv.v.ne[1])));
    }
    // The prefetch workgroups: as attention.wgsl's, on the compute units the others leave free.
    uint32_t   pf_groups = 0;
    WGPUBuffer pf        = w.buffer->get();  // (read-only: any buffer when nothing is pulled)
    if (prefetch) {
        const uint32_t words = static_cast<uint32_t>(prefetch->buffer->size_bytes() / 4);
        static const uint32_t loads_env = std::min<uint32_t>(env_u32("TERN_WEBGPU_WPF_LOADS", 0), k_prefetch_loads_max);
        const uint32_t busy  = u32(s.n_head);  // (the attending workgroups; the others end early)
        const uint32_t loads = loads_env != 0 ? loads_env : prefetch_loads_on_free_units(words, wg, busy, compute_units());
        key.add("PF_WORDS", static_cast<double>(words));
        key.add("PF_LOADS", static_cast<double>(loads));
        pf_groups = ceil_div(words, wg * loads * k_prefetch_stride_words);
        pf        = prefetch->buffer->get();
    }
    const WGPUBuffer bufs[] = {w.buffer->get(),  src.src,          src.scale,      rope.buffer->get(),
                               gpu_buffer(kv.k), gpu_buffer(kv.v), stats_buffer(), gpu_buffer(out),
                               flow_->get(),     pf};
    // Ranks by ticket on software adapters (their thread pools may start a later workgroup first and
    // then wait for it; the shader's header), by workgroup id elsewhere. $TERN_WEBGPU_QKV_ATTN_TICKETS
    // (0 or 1) chooses (a tuning aid).
    static const uint32_t tickets_env = env_u32("TERN_WEBGPU_QKV_ATTN_TICKETS", 2);
    const bool            tickets     = tickets_env == 2 ? ctx_.adapter().is_cpu : tickets_env == 1;
    if (tickets) key.add("TICKETS", 1.0);
    p.n_tickets = kv_groups + 2 * u32(s.n_head) + pf_groups;
    step_->dispatch(key, bufs, &p, sizeof p, p.n_tickets);
    ++fused_attention_dispatches_;
    if (stats_out) stats_written(out, out_slot);
    return true;
}

}  // namespace tern
