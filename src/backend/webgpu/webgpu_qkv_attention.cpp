// The first two ops of a decoded layer (norm + qkv + RoPE + KV append, then attention) as one
// dispatch, qkv_attention_decode.wgsl: one workgroup per query head computes its q and its KV head's
// new K / V rows itself, so attention needs nothing from other workgroups. Same bits as
// qkv_rope_decode.wgsl followed by attention.wgsl; one dispatch per layer less.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"

#include <algorithm>
#include <cstdlib>

namespace tern {

bool WebGpuBackend::try_decode_qkv_attention(const Tensor & out, const KvLayer & kv, const GpuLinear & w,
                                             const Tensor & x, const Weight & norm, float eps, const AttentionShape & s,
                                             int64_t pos0) {
    if (!qkv_attention_ || !fuse_norms_ || x.ne[1] != 1) return false;
    const int64_t hd = s.head_dim;
    if (hd % 4 != 0 || hd > 256 || s.n_rot % 4 != 0 || s.n_rot > hd || s.n_head % s.n_head_kv != 0) return false;
    if (w.n_rows != (s.n_head + 2 * s.n_head_kv) * hd || w.n_cols != x.ne[0] || kv.k.ne[0] != s.n_head_kv * hd ||
        out.ne[0] != s.n_head * hd) {
        return false;
    }
    // The qkv rows as the decode kernels cut them (one scale group per row, K a multiple of 64).
    const auto base = decode_tiling(w, 1, 256);
    if (!base) return false;
    const AttentionTiling at = attention_tiling(hd, kv.k.type, /*tiled=*/true);
    const uint32_t        wg = at.wg;
    const int64_t         k  = w.n_cols;
    if (k > 32 * int64_t{wg}) return false;  // lib/act_stage.wgsl: at most 8 words per thread
    // Rows per pass: a power of two (>= 4) dividing head_dim, with at most 10 loads per lane.
    uint32_t rows = 4;
    while (rows * 2 <= wg / base->lanes && hd % (rows * 2) == 0) rows *= 2;
    if (wg % rows != 0 || wg / rows < base->lanes) return false;
    const uint32_t lanes = wg / rows;

    // Workgroup memory: attention's arrays, the staged activations (K bytes), cur_q / cur_k / cur_v,
    // two arrays of lane partials; the scores get what is left (at most 2048 slots).
    const uint64_t fixed   = attention_fixed_bytes(wg, wg, at.tile) + uint64_t(k) + 3 * uint64_t(hd) * 4 + 2 * uint64_t{wg} * 4;
    const uint64_t storage = ctx_.limits().maxComputeWorkgroupStorageSize;
    if (storage < fixed + 256 * 4) return false;
    const uint32_t sc_max = static_cast<uint32_t>(std::min<uint64_t>((storage - fixed) / 4 / 256 * 256, 2048));
    const int64_t  n      = pos0 + 1;  // positions attended to: attention.wgsl's tiled, cached path
    if (n > sc_max || n >= wg) return false;

    TERN_ASSERT(pos0 >= 0 && pos0 + 1 <= kv.k.ne[1], "positions past the KV cache");
    const bool     k_f16 = kv.k.type == DType::f16, v_f16 = kv.v.type == DType::f16;
    const uint32_t k_off = gpu_offset(kv.k, k_f16 ? 2 : 4), v_off = gpu_offset(kv.v, v_f16 ? 2 : 4);
    if ((k_f16 && k_off % 2) || (v_f16 && v_off % 2)) return false;  // rows of whole u32 words
    const uint32_t hw = static_cast<uint32_t>(k_f16 ? hd / 2 : hd);

    const DecodeSource src  = decode_source(QuantizedActs{}, &x, &norm);
    const RopeTable &  rope = rope_table(s.n_rot, s.rope_freq_base, pos0 + 1);
    struct {
        float    eps;
        uint32_t src_offset, scale_offset, scales_offset, oscales_offset, head_dim, n_rot, n_head, n_head_kv, pos0,
            n_embd_kv, k_offset, v_offset, out_offset;
        float scale;
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
        u32(kv.k.ne[0]),
        k_off,
        v_off,
        gpu_offset(out, 4),
        s.scale};
    // $TERN_WEBGPU_QKV_ATTN_AHEAD: passes whose weight rows are in flight (1 or 2, default 2; tuning).
    static const uint32_t ahead = std::clamp<uint32_t>(env_u32("TERN_WEBGPU_QKV_ATTN_AHEAD", 2), 1, 2);
    const PipelineKey key{ternary_shader("qkv_attention_decode"),
                          "rrrrwwwu",
                          {{{"WG", static_cast<double>(wg)},
                            {"LANES", static_cast<double>(lanes)},
                            {"K", static_cast<double>(k)},
                            {"K_F16", k_f16 ? 1.0 : 0.0},
                            {"V_F16", v_f16 ? 1.0 : 0.0},
                            {"HD", static_cast<double>(hd)},
                            {"S", static_cast<double>(at.ts)},
                            {"WPT", static_cast<double>(hw / at.ts)},
                            {"TILE", static_cast<double>(at.tile)},
                            {"KPART", static_cast<double>(wg)},
                            {"SC_MAX", static_cast<double>(sc_max)},
                            {"AHEAD", static_cast<double>(ahead)}}}};
    const WGPUBuffer bufs[] = {w.buffer->get(),  src.src,          src.scale,       rope.buffer->get(),
                               gpu_buffer(kv.k), gpu_buffer(kv.v), gpu_buffer(out)};
    step_->dispatch(key, bufs, &p, sizeof p, u32(s.n_head));
    ++qkv_attention_dispatches_;
    return true;
}

}  // namespace tern
