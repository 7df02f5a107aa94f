// One decoder layer for one token as one dispatch (shaders/layer_decode.wgsl): the five decode
// kernels of webgpu_decode.cpp / attention as phases of one grid, passing values through
// lib/dataflow.wgsl. With it a decoded token costs one dispatch per layer + 3 instead of 5 per
// layer + 3; results are those of the five kernels, bit for bit.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"
#include "core/log.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

// Weights of a layer as the prefetch settings name them: o, gu, down, and qkv = the next layer's.
enum LayerWeightId : uint32_t { k_wo = 0, k_wgu = 1, k_wdown = 2, k_wqkv_next = 3, k_wqkv = 4, k_wnone = 5 };

static LayerWeightId layer_weight_id(std::string_view name) {
    if (name == "o") return k_wo;
    if (name == "gu") return k_wgu;
    if (name == "down") return k_wdown;
    if (name == "qkv") return k_wqkv_next;
    return k_wnone;
}

// Which weights one query's attention pulls into L2 for the kernels after it, a bit per
// LayerWeightId ($TERN_WEBGPU_WPF, a tuning aid: a comma list of o, gu, down, qkv, or none).
// Default gate+up's (8.8 MB for 2B4T, the largest): with the matmuls' links below, H100 tg128
// 813.5-815.3 tokens/s against 767.3-770.0 with no prefetch (medians of ten, three alternating
// rounds); attention taking gate+up and down itself 802.3-805.0 and adding the o-projection's
// 753.3-756.7, slower than none: the prefetching workgroups then outlast attention, and the
// o-projection waits for them (src/backend/webgpu/README.md, "Weights pulled into L2").
static uint32_t attention_prefetch_mask() {
    static const uint32_t mask = [] {
        const char * env = std::getenv("TERN_WEBGPU_WPF");
        uint32_t     m   = 0;
        for (std::string_view item : comma_list(env ? env : "gu")) {
            const LayerWeightId id = layer_weight_id(item);
            if (id != k_wnone) m |= 1u << id;
            else if (item != "none") TERN_LOG_WARN("TERN_WEBGPU_WPF: '%.*s' is not o, gu, down or qkv",
                                                   static_cast<int>(item.size()), item.data());
        }
        return m;
    }();
    return mask;
}

// Which weight each decode matmul pulls into L2 for a later one (lib/weight_prefetch.wgsl), indexed
// by the matmul (k_wo, k_wgu, k_wdown, k_wqkv): $TERN_WEBGPU_KPF, a tuning aid, a comma list of
// kernel:weight links, or none. Default: gate+up pulls the down projection's (its own came with
// attention, so its DRAM slot is free), the down projection the next layer's qkv, qkv the
// o-projection's. H100 tg128 (medians of ten, three alternating rounds, attention taking gate+up):
// 805.7-810.4 tokens/s with gu:down alone, 808.7-811.8 with down:qkv too, 813.5-815.3 with all three.
static const std::array<LayerWeightId, 5> & kernel_prefetch_links() {
    static const std::array<LayerWeightId, 5> links = [] {
        std::array<LayerWeightId, 5> l{k_wnone, k_wnone, k_wnone, k_wnone, k_wnone};
        const char * env = std::getenv("TERN_WEBGPU_KPF");
        for (std::string_view item : comma_list(env ? env : "gu:down,down:qkv,qkv:o")) {
            if (item == "none") continue;
            const size_t colon = item.find(':');
            const std::string_view kernel = item.substr(0, colon);
            const LayerWeightId    k = kernel == "qkv" ? k_wqkv : layer_weight_id(kernel);
            const LayerWeightId    w = colon == std::string_view::npos ? k_wnone : layer_weight_id(item.substr(colon + 1));
            if (k == k_wnone || k == k_wqkv_next || w == k_wnone) {
                TERN_LOG_WARN("TERN_WEBGPU_KPF: '%.*s' is not kernel:weight (kernels qkv, o, gu, down; weights o, gu, "
                              "down, qkv)", static_cast<int>(item.size()), item.data());
                continue;
            }
            l[k] = w;
        }
        return l;
    }();
    return links;
}

void WebGpuBackend::transformer_layer(const LayerWeights & w, const LayerTensors & t, const KvLayer & kv, float eps,
                                      FfnActivation act, const AttentionShape & shape, int64_t pos0) {
    if (try_decode_layer(w, t, kv, eps, act, shape, pos0)) return;
    if (t.x.ne[1] != 1 || !fuse_norms_) {
        Backend::transformer_layer(w, t, kv, eps, act, shape, pos0);
        return;
    }
    // One token: Backend::transformer_layer's five ops, with weights pulled into L2 ahead of the
    // kernels that read them (attention.wgsl's prefetch workgroups, the matmuls' KPF links). The
    // next layer's qkv weight is the one the last step decoded after this layer's.
    // $TERN_WEBGPU_ONE_LAYER=bits, a timing aid (results are wrong): every layer's matmuls read the
    // first decoded layer's weight (bits 1 o, 2 gate+up, 4 down, 8 qkv), which then stays in L2, so
    // what that saves is what streaming the weight from DRAM costs; with 16 the prefetches still
    // pull each layer's own weights, which tells the readers' share from the prefetchers'.
    static const uint32_t one_layer = env_u32("TERN_WEBGPU_ONE_LAYER", 0);
    auto pick = [&](int i, const GpuLinear * l) -> const GpuLinear * {
        if (!l || !(one_layer & (1u << i))) return l;
        if (!one_layer_weights_[i]) one_layer_weights_[i] = l;
        return one_layer_weights_[i];
    };
    const GpuLinear & own_qkv = as_linear(*w.attn_qkv);
    if (prev_layer_qkv_) prev_layer_qkv_->next_layer_qkv = &own_qkv;
    prev_layer_qkv_ = &own_qkv;
    const GpuLinear & qkv     = *pick(3, &own_qkv);
    const GpuLinear * own[4]  = {&as_linear(*w.attn_output), &as_linear(*w.ffn_gate_up), &as_linear(*w.ffn_down),
                                 own_qkv.next_layer_qkv};
    const GpuLinear * weights[4] = {pick(0, own[0]), pick(1, own[1]), pick(2, own[2]), pick(3, own[3])};
    const GpuLinear * const * pulled = (one_layer & 16) ? own : weights;  // what the prefetches pull
    // (The shapes the norm_* ops check before their kernels, which are called directly here.)
    check_norm_qkv_shapes(t.q, kv, qkv, t.x, shape);
    check_norm_bitlinear_shapes(t.x, *weights[k_wo], t.attn);
    check_norm_gate_up_shapes(t.ffn, *weights[k_wgu], t.x);
    check_norm_bitlinear_shapes(t.x, *weights[k_wdown], t.ffn);
    const uint32_t    mask = attention_prefetch_mask();
    const GpuLinear * prefetch[4];
    size_t            n = 0;
    for (uint32_t id = 0; id < 4; ++id) {
        if ((mask & (1u << id)) && pulled[id]) prefetch[n++] = pulled[id];
    }
    const auto & links  = kernel_prefetch_links();
    const auto   pf_for = [&](LayerWeightId kernel) { return links[kernel] == k_wnone ? nullptr : pulled[links[kernel]]; };
    if (!try_decode_qkv(t.q, kv, qkv, t.a_embd, &t.x, w.attn_norm, eps, shape, pos0, pf_for(k_wqkv))) {
        Backend::norm_qkv_rope_kv_append(t.q, kv, *w.attn_qkv, t.a_embd, t.x, *w.attn_norm, eps, shape, pos0);
    }
    attention_prefetching(t.attn, t.q, kv, shape, pos0, std::span<const GpuLinear * const>(prefetch, n));
    if (!try_decode_bitlinear(t.x, *weights[k_wo], t.a_q, &t.attn, w.attn_sub_norm, eps, true, pf_for(k_wo))) {
        Backend::norm_bitlinear(t.x, *w.attn_output, t.a_q, t.attn, *w.attn_sub_norm, eps, /*accumulate=*/true);
    }
    if (!try_decode_gate_up(t.ffn, *weights[k_wgu], t.a_embd, &t.x, w.ffn_norm, eps, act, pf_for(k_wgu))) {
        Backend::norm_gate_up(t.ffn, *w.ffn_gate_up, t.a_embd, t.x, *w.ffn_norm, eps, act);
    }
    if (!try_decode_bitlinear(t.x, *weights[k_wdown], t.a_ff, &t.ffn, w.ffn_sub_norm, eps, true, pf_for(k_wdown))) {
        Backend::norm_bitlinear(t.x, *w.ffn_down, t.a_ff, t.ffn, *w.ffn_sub_norm, eps, /*accumulate=*/true);
    }
}

// The four norms of a layer side by side ([attn_norm | attn_sub_norm | ffn_norm | ffn_sub_norm]),
// made by buffer copies the first time the layer is decoded and kept with the attn_norm weight.
const GpuBuffer & WebGpuBackend::layer_norms(const LayerWeights & w) {
    const GpuNorm & first = as_norm(*w.attn_norm);
    if (first.layer_norms) return *first.layer_norms;
    const GpuNorm * parts[4] = {&first, &as_norm(*w.attn_sub_norm), &as_norm(*w.ffn_norm), &as_norm(*w.ffn_sub_norm)};
    size_t n = 0;
    for (const GpuNorm * g : parts) n += static_cast<size_t>(g->n_cols);
    auto   buf = make_buffer(n * 4, nullptr, "layer norms");
    size_t at  = 0;
    for (const GpuNorm * g : parts) {
        step_->copy(g->buffer->get(), 0, buf->get(), at * 4, static_cast<uint64_t>(g->n_cols) * 4);
        at += static_cast<size_t>(g->n_cols);
    }
    first.layer_norms = std::move(buf);
    return *first.layer_norms;
}

uint32_t WebGpuBackend::layer_flow_error() {
    if (!flow_) return 0;
    uint32_t words[2] = {0, 0};
    Tensor   t;
    t.type   = DType::i32;
    t.ne     = {2, 1, 1, 1};
    t.buffer = flow_.get();
    read(t, words, sizeof words);
    return words[1];
}

bool WebGpuBackend::try_decode_layer(const LayerWeights & w, const LayerTensors & t, const KvLayer & kv, float eps,
                                     FfnActivation act, const AttentionShape & s, int64_t pos0) {
    if (!layer_kernel_ || !fuse_norms_ || t.x.ne[1] != 1) return false;
    const GpuLinear & qkv  = as_linear(*w.attn_qkv);
    const GpuLinear & wo   = as_linear(*w.attn_output);
    const GpuLinear & gu   = as_linear(*w.ffn_gate_up);
    const GpuLinear & down = as_linear(*w.ffn_down);
    const int64_t     hd   = s.head_dim;
    if (hd % 4 != 0 || hd > 256 || s.n_rot % 4 != 0 || s.n_rot > hd || s.n_head % s.n_head_kv != 0) return false;
    uint32_t qkv_rows = 4;  // qkv slots per workgroup: a power of two dividing head_dim (lib/qkv_store.wgsl)
    while (qkv_rows < 256 && hd % (qkv_rows * 2) == 0) qkv_rows *= 2;
    const auto tq = decode_tiling(qkv, 1, qkv_rows);
    const auto to = decode_tiling(wo, 1, 256);
    const auto tg = decode_tiling(gu, 1, 256);
    const auto td = decode_tiling(down, 1, 256);
    // One workgroup size for every phase.
    if (!tq || !to || !tg || !td || tq->wg != to->wg || tq->wg != tg->wg || tq->wg != td->wg) return false;
    if (tq->rows < 4 || hd % tq->rows != 0 || tg->rows < 2) return false;
    const uint32_t wg       = tq->wg;
    const int64_t  n_embd   = t.x.ne[0];
    const int64_t  n_embd_q = wo.n_cols;
    const int64_t  n_ff     = down.n_cols;
    const int64_t  n_kv     = kv.k.ne[0];
    if (qkv.n_cols != n_embd || wo.n_rows != n_embd || gu.n_cols != n_embd || gu.n_rows != 2 * n_ff ||
        down.n_rows != n_embd || n_embd_q != s.n_head * hd || n_kv != s.n_head_kv * hd) {
        return false;
    }
    TERN_ASSERT(pos0 >= 0 && pos0 + 1 <= kv.k.ne[1], "positions past the KV cache");
    const bool     k_f16 = kv.k.type == DType::f16, v_f16 = kv.v.type == DType::f16;
    const uint32_t hw    = static_cast<uint32_t>(k_f16 ? hd / 2 : hd);  // u32 words per head of a K row

    // Workgroup memory: acts, wg_reduce's three arrays, lane_sums (wg + 64), slot_dots, team_dots,
    // cur_q/k/v, attention's other arrays; the scores get what is left (at most 2048 slots).
    const uint32_t k_max = static_cast<uint32_t>(std::max({n_embd, n_embd_q, n_ff}));
    const uint32_t ts = score_threads(hw, k_f16);  // attention's tiled scores, as WebGpuBackend::attention
    const uint32_t hd_max = static_cast<uint32_t>(hd);
    const uint64_t storage = ctx_.limits().maxComputeWorkgroupStorageSize;
    uint32_t       tile    = 0;
    uint64_t       fixed   = 0;
    // Tiles of wg / ts positions, fewer where the workgroup memory runs short (f32 K: a thread per
    // 16 words, so twice the positions of an f16 row's tile).
    for (uint32_t kc = wg / ts; kc >= 8; kc /= 2) {
        tile  = kc * (hw + 1);
        fixed = uint64_t{k_max} + wg * (8 + 4 + 8 + 4 + 4 + 4) + 64 * 4 + 3ull * hd_max * 4 +  // act_stage .. cur_v
                hd_max * 4ull + 256 * 4 + wg * 4 + 8ull * (hd_max / 2) * 8 + 32 + tile * 4ull + 16;  // attention
        if (storage >= fixed + 256 * 4 + 512) break;
    }
    if (storage < fixed + 256 * 4 + 512) return false;
    const uint32_t sc_max = static_cast<uint32_t>(std::min<uint64_t>((storage - fixed - 512) / 4 / 64 * 64, 2048));

    // Flow slots (values): q, k row words, v row words, attention out, x after the o-proj, gate*up.
    const uint32_t kv_words_k = static_cast<uint32_t>(k_f16 ? n_kv / 2 : n_kv);
    const uint32_t kv_words_v = static_cast<uint32_t>(v_f16 ? n_kv / 2 : n_kv);
    const uint32_t f_q = 0, f_k = f_q + u32(n_embd_q), f_v = f_k + kv_words_k, f_att = f_v + kv_words_v;
    // Then the activations of N1..N3 (K / 4 words and the scale each).
    const uint32_t f_xm = f_att + u32(n_embd_q), f_gu = f_xm + u32(n_embd), f_a1 = f_gu + u32(n_ff);
    const uint32_t f_a2 = f_a1 + u32(n_embd_q / 4 + 1), f_a3 = f_a2 + u32(n_embd / 4 + 1);
    const uint32_t f_end = f_a3 + u32(n_ff / 4 + 1);
    const size_t   flow_bytes = (16 + 2 * size_t{f_end}) * 4;
    if (!flow_ || flow_->size_bytes() < flow_bytes) {
        flow_ = make_buffer(flow_bytes, nullptr, "layer dataflow");
        const std::vector<uint32_t> zeros(flow_bytes / 4, 0);
        wgpu().wgpuQueueWriteBuffer(ctx_.queue(), flow_->get(), 0, zeros.data(), flow_bytes);
        flow_done_ = {};
    }
    flow_tag_ = flow_tag_ % 65535 + 1;  // 1..65535: a word of an earlier dispatch never carries it

    const GpuBuffer & norms = layer_norms(w);
    const RopeTable & rope  = rope_table(s.n_rot, s.rope_freq_base, pos0 + 1);
    // Row blocks per workgroup of the phases that read N1..N3's activations (C, D, E): fewer, longer
    // workgroups read them fewer times. $TERN_WEBGPU_LAYER_BLOCKS="o,gu,down" overrides (tuning).
    static const std::array<uint32_t, 3> blocks = [] {
        std::array<uint32_t, 3> b{1, 2, 2};
        if (const char * env = std::getenv("TERN_WEBGPU_LAYER_BLOCKS"); env && *env) {
            unsigned o = 0, g = 0, d = 0;
            if (std::sscanf(env, "%u,%u,%u", &o, &g, &d) == 3 && o > 0 && g > 0 && d > 0) b = {o, g, d};
        }
        return b;
    }();
    // $TERN_WEBGPU_LAYER_LAST=i: phases after i (A = 0, B, N1, C, N2, D, N3, E = 7) do nothing, a
    // timing aid (results are wrong): the time a phase adds to the layer is the difference.
    static const uint32_t last_phase = [] {
        const char * env = std::getenv("TERN_WEBGPU_LAYER_LAST");
        return env && *env ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10)) : 7u;
    }();
    const uint32_t a_n = u32(qkv.n_rows) / tq->rows, b_n = u32(s.n_head);
    const uint32_t c_n = ceil_div(ceil_div(n_embd, to->rows), blocks[0]);
    const uint32_t d_n = ceil_div(ceil_div(n_ff, tg->rows / 2), blocks[1]);
    const uint32_t e_n = ceil_div(ceil_div(n_embd, td->rows), blocks[2]);
    const uint32_t k_el = k_f16 ? 2 : 4, v_el = v_f16 ? 2 : 4;
    const uint32_t k_off = gpu_offset(kv.k, k_el), v_off = gpu_offset(kv.v, v_el);
    const uint64_t k_row_el = uint64_t{k_off} + static_cast<uint64_t>(pos0) * n_kv;
    const uint64_t v_row_el = uint64_t{v_off} + static_cast<uint64_t>(pos0) * n_kv;
    if ((k_f16 && k_row_el % 2) || (v_f16 && v_row_el % 2)) return false;  // rows of whole u32 words
    // Completion counters after this dispatch (they only grow; u32 wrap-around is fine): A, B, N1,
    // C, N2, D, N3.
    const uint32_t counts[7] = {a_n, b_n, 1, c_n, 1, d_n, 1};
    for (int i = 0; i < 7; ++i) flow_done_[static_cast<size_t>(i)] += counts[i];
    const uint32_t a_end = a_n, b_end = a_end + b_n, c_end = b_end + 1 + c_n, d_end = c_end + 1 + d_n;
    struct {
        uint32_t tag, n_tickets, a_end, b_end, c_end, d_end;
        float    eps;
        uint32_t attn_norm, attn_sub_norm, ffn_norm, ffn_sub_norm, qkv_scales, qkv_oscales, o_scales, o_oscales,
            gu_scales, gu_oscales, down_scales, down_oscales, x_offset, activation, head_dim, n_rot, n_head,
            n_head_kv, pos0, n_embd_kv, k_offset, v_offset;
        float    scale;
        uint32_t k_row, v_row, f_q, f_k, f_v, f_att, f_xm, f_gu, f_a1, f_a2, f_a3;
        uint32_t done[7];
        uint32_t blocks_o, blocks_gu, blocks_down, last_phase;
    } p{flow_tag_,
        d_end + 1 + e_n,
        a_end,
        b_end,
        c_end,
        d_end,
        eps,
        0,
        u32(n_embd),
        u32(n_embd + n_embd_q),
        u32(2 * n_embd + n_embd_q),
        qkv.scales_offset,
        qkv.oscales_offset,
        wo.scales_offset,
        wo.oscales_offset,
        gu.scales_offset,
        gu.oscales_offset,
        down.scales_offset,
        down.oscales_offset,
        gpu_offset(t.x, 4),
        act == FfnActivation::relu2 ? 0u : 1u,
        u32(hd),
        u32(s.n_rot),
        u32(s.n_head),
        u32(s.n_head_kv),
        u32(pos0),
        u32(n_kv),
        k_off,
        v_off,
        s.scale,
        static_cast<uint32_t>(k_f16 ? k_row_el / 2 : k_row_el),
        static_cast<uint32_t>(v_f16 ? v_row_el / 2 : v_row_el),
        f_q,
        f_k,
        f_v,
        f_att,
        f_xm,
        f_gu,
        f_a1,
        f_a2,
        f_a3,
        {flow_done_[0], flow_done_[1], flow_done_[2], flow_done_[3], flow_done_[4], flow_done_[5], flow_done_[6]},
        blocks[0],
        blocks[1],
        blocks[2],
        last_phase};
    const PipelineKey key{ternary_shader("layer_decode"),
                          "rrrrrrwwwwu",
                          {{{"WG", static_cast<double>(wg)},
                            {"K", static_cast<double>(k_max)},
                            {"K_F16", k_f16 ? 1.0 : 0.0},
                            {"V_F16", v_f16 ? 1.0 : 0.0},
                            {"HD_MAX", static_cast<double>(hd_max)},
                            {"HD", static_cast<double>(hd)},
                            {"S", static_cast<double>(ts)},
                            {"WPT", static_cast<double>(score_block_words(k_f16))},
                            {"TILE", static_cast<double>(tile)},
                            {"TILED", 1.0},
                            {"KPART", static_cast<double>(wg)},
                            {"SC_MAX", static_cast<double>(sc_max)},
                            {"N_EMBD", static_cast<double>(n_embd)},
                            {"N_EMBD_Q", static_cast<double>(n_embd_q)},
                            {"N_FF", static_cast<double>(n_ff)},
                            {"LANES_QKV", static_cast<double>(tq->lanes)},
                            {"LANES_O", static_cast<double>(to->lanes)},
                            {"LANES_GU", static_cast<double>(tg->lanes)},
                            {"LANES_DOWN", static_cast<double>(td->lanes)},
                            // The matmul phases stage words the norm workgroups quantized, so no
                            // total of the codes is taken where they are staged (lib/act_stage.wgsl).
                            {"ASUM_ONCE", 0.0}}}};
    const WGPUBuffer bufs[] = {qkv.buffer->get(), wo.buffer->get(),  gu.buffer->get(),   down.buffer->get(),
                               norms.get(),       rope.buffer->get(), gpu_buffer(kv.k),   gpu_buffer(kv.v),
                               gpu_buffer(t.x),   flow_->get()};
    step_->dispatch(key, bufs, &p, sizeof p, p.n_tickets);
    ++layer_dispatches_;
    return true;
}

}  // namespace tern
