// One decoder layer for one token: the five decode kernels of webgpu_decode.cpp and attention, with
// the weights of later kernels pulled into L2 ahead of them.
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

}  // namespace tern
