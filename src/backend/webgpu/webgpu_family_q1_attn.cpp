// matvec_q1_attn.wgsl: one token's Q1_0 / Q2_0 / PQ2_0 [q; k; v] matvec (with the QK-norm, RoPE and
// cache stores) and its attention in one dispatch, a workgroup per KV group (or per
// family_q1_attn_heads query heads), for positions below
// WebGpuTuning::family_q1_attn (at most one superblock: attention.wgsl's one-pass softmax).
// encode_q1_qkv_rope (webgpu_family.cpp) defers matvec_q1_qkv.wgsl where the position allows;
// attention() right after it takes it here, or leaves it to run as recorded.
#include "backend/cpu/cpu_ops.h"
#include "backend/webgpu/webgpu_backend_impl.h"

#include <algorithm>

namespace tern {

bool WebGpuBackend::encode_q1_attention(const Tensor & out, const Tensor & q, const KvLayer & kv,
                                        const AttentionShape & s, int64_t pos0) {
    const FamilyQ1Attn a = std::exchange(q1_attn_, FamilyQ1Attn{});
    const FamilyQ1Qkv & c = a.qkv;
    if (a.q != gpu_buffer(q) || a.q_offset != gpu_offset(q, 4) || a.pos0 != pos0 || a.k_cache != gpu_buffer(kv.k) ||
        q.ne[1] != 1 || out.ne[0] != q.ne[0] || s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0)
        return false;
    const int64_t      hd  = s.head_dim, n = pos0 + 1, n_kv = s.n_head_kv * hd;
    const int64_t      nb  = c.k / 32;
    const uint32_t     grp = u32(s.n_head / s.n_head_kv);
    // Query heads per workgroup: a KV group's (one workgroup computes its k and v), or fewer (each of
    // the group's workgroups computes them; more workgroups, each shorter).
    const uint32_t     qpw = tune_.family_q1_attn_heads != 0 && grp % tune_.family_q1_attn_heads == 0
                                 ? tune_.family_q1_attn_heads
                                 : grp;
    const WGPULimits & lim = ctx_.limits();
    const uint32_t     wg  = std::min({tune_.family_q1_attn_wg, lim.maxComputeInvocationsPerWorkgroup,
                                       lim.maxComputeWorkgroupSizeX});
    if (n > cpu::k_pos_super || hd % 4 != 0 || hd > 256 || wg < hd / 2 || (c.norm && nb > wg) || c.group > 2048 ||
        ceil_div(4 * nb, wg) > 8)
        return false;
    // Workgroup memory: the attention's (attention.wgsl's arrays, SC_MAX scores) and the matvec's (the
    // staged blocks and the prologue's exchanges as encode_q1_qkv_rope, the G + 2 heads' sums and
    // rotated values, their norms). Where they do not fit, K tiles of fewer positions (kc; the
    // subgroup form keeps its tiles in registers, not in the tile), then fewer score slots.
    const bool     k_f16  = kv.k.type == DType::f16;
    const uint32_t hw     = static_cast<uint32_t>(k_f16 ? hd / 2 : hd);  // u32 words per K row
    const uint32_t ts     = score_threads(hw, k_f16);
    const uint64_t heads  = qpw + 2;
    const uint64_t matvec = static_cast<uint64_t>(nb) * 60 + uint64_t{wg} * 8 + heads * hd * 8 + heads * 36 + hd * 8;
    uint32_t       sc_max = 0, tile = 0;
    for (const uint32_t slots : {512u, 256u, 128u}) {
        for (uint32_t kc = wg / std::max<uint32_t>(ts, 1); sc_max == 0 && kc >= 8; kc /= 2) {
            const uint64_t bytes = attention_fixed_bytes(wg, wg, kc * (hw + 1), u32(hd)) + matvec + uint64_t{slots} * 4;
            if (bytes <= lim.maxComputeWorkgroupStorageSize) sc_max = slots, tile = kc * (hw + 1);
        }
    }
    if (n > int64_t{sc_max} || ts > wg) return false;
    if (!step_->take_deferred(a.q, a.q_offset)) return false;
    // attention.wgsl's short form where it would take it (attention_prefetching).
    int64_t short_max = 0;
    if (attention_short_ok_ && ts <= 32 && (hd / 2) % 32 == 0 && wg <= 256) {
        const uint32_t kc     = std::min(wg / ts, tile / (hw + 1));
        const uint32_t groups = wg / static_cast<uint32_t>(hd / 2);
        short_max             = std::min<int64_t>({4 * kc, 32 * groups, k_attention_chunk, sc_max});
        if (n > short_max) short_max = 0;
    }
    const size_t k_el = k_f16 ? 2 : 4;
    const size_t v_el = kv.v.type == DType::f16 ? 2 : 4;
    struct {
        uint32_t k;
        float    eps;
        uint32_t x_offset, nw_offset, scales_offset, n_rot, n_head, n_head_kv, pos0, q_offset, k_offset, v_offset,
            n_embd_kv;
        float    qk_eps;
        uint32_t out_offset, head_dim;
        float    scale;
    } p{c.k,           c.eps,         c.x_offset,        0,          c.scales_offset,        u32(s.n_rot),
        u32(s.n_head), u32(s.n_head_kv), u32(pos0),      a.q_offset, gpu_offset(kv.k, k_el), gpu_offset(kv.v, v_el),
        u32(n_kv),     s.qk_norm_eps, gpu_offset(out, 4), u32(hd),   s.scale};
    PipelineKey key{dot4_native_ ? "matvec_q1_attn" : "matvec_q1_attn_nodp4",
                    "rrrrrwwwwru",
                    {{{"WG", static_cast<double>(wg)},
                      {"HD", static_cast<double>(hd)},
                      {"QPW", static_cast<double>(qpw)},
                      {"NB", static_cast<double>(nb)},
                      {"GROUP", static_cast<double>(c.group)},
                      {"NORM", c.norm ? 1.0 : 0.0},
                      {"Q_NORM", s.q_norm ? 1.0 : 0.0},
                      {"K_NORM", s.k_norm ? 1.0 : 0.0},
                      {"NORM_MODE", s.rope_mode == RopeMode::norm ? 1.0 : 0.0},
                      {"K_F16", k_f16 ? 1.0 : 0.0},
                      {"V_F16", kv.v.type == DType::f16 ? 1.0 : 0.0},
                      {"Q8_TOTAL_SG", tune_.family_q1_sg != 0 ? 1.0 : 0.0},
                      {"SC_MAX", static_cast<double>(sc_max)},
                      {"S", static_cast<double>(ts)},
                      {"TILE", static_cast<double>(tile)},
                      // (QPT, NT, WPT, KPART: the shader's defaults from the values above)
                      {"ATT_GROUP", static_cast<double>(grp)}}}};
    key.add("ATT_SHORT", short_max > 0 ? 1.0 : 0.0);
    key.add("AHEAD", tune_.family_q1_attn_ahead != 0 ? 1.0 : 0.0);
    // The weight two matmuls ahead, pulled by workgroups after the heads' (as attention's).
    const uint32_t          groups    = u32(s.n_head) / qpw;
    WGPUBuffer              pf        = c.words;  // (read by nothing when none is pulled)
    uint32_t                pf_groups = 0;
    const GpuLinear * const w         = weight_order_.attention(step_->releases());
    if (w != nullptr) {
        const uint32_t words    = static_cast<uint32_t>(w->buffer->size_bytes() / 4);
        const uint32_t pf_loads = tune_.attn_prefetch_loads != 0 ? tune_.attn_prefetch_loads
                                  : wg <= 256 ? prefetch_loads_on_free_units(words, wg, groups, tune_.compute_units)
                                              : 8u;
        key.add("PF_FROM", static_cast<double>(groups));
        key.add("PF_LOADS", static_cast<double>(pf_loads));
        key.add("PF_WORDS0", static_cast<double>(words));
        pf        = w->buffer->get();
        pf_groups = ceil_div(words, wg * pf_loads * k_prefetch_stride_words);
    } else {  // (the same entries, so that every device fills the key's slots alike: tests see its size)
        key.add("PF_FROM", 4294967295.0);
        key.add("PF_LOADS", 1.0);
        key.add("PF_WORDS0", 0.0);
    }
    const WGPUBuffer bufs[] = {c.words,         c.x,              c.nw,           a.rope,           a.qkn, a.q,
                               gpu_buffer(kv.k), gpu_buffer(kv.v), gpu_buffer(out), pf};
    step_->dispatch(key, bufs, &p, sizeof p, groups + pf_groups, 1);
    attn_out_ = {gpu_buffer(out), gpu_offset(out, 4), out.ne[0], 1, step_->serial(), nullptr};
    return true;
}

}  // namespace tern
