// norm_qkv_rope_kv_append + attention of one decoded token as one dispatch
// (shaders/qkv_attention_decode.wgsl): one workgroup per query head computes its q and its KV
// head's k and v from x, appends k and v to the cache and attends. Results are those of
// qkv_rope_decode.wgsl followed by attention.wgsl, bit for bit.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"
#include "core/log.h"

#include <algorithm>
#include <cstdlib>

namespace tern {
namespace {

uint32_t env_or(const char * name, uint32_t fallback) {
    const char * env = std::getenv(name);
    return env && *env ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10)) : fallback;
}

}  // namespace

bool WebGpuBackend::try_qkv_attention(const LayerWeights & w, const LayerTensors & t, const KvLayer & kv, float eps,
                                      const AttentionShape & s, int64_t pos0) {
    if (!qkv_attention_ || !fuse_norms_ || t.x.ne[1] != 1) return false;
    const GpuLinear & qkv  = as_linear(*w.attn_qkv);
    const int64_t     hd   = s.head_dim;
    const int64_t     k    = qkv.n_cols;
    const int64_t     n_q  = s.n_head * hd;
    const int64_t     n_kv = s.n_head_kv * hd;
    if (qkv.n_groups != 1 || k % 64 != 0 || hd % 8 != 0 || hd > 256 || s.n_rot % 4 != 0 || s.n_rot > hd ||
        s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0 || qkv.n_rows != n_q + 2 * n_kv || t.x.ne[0] != k ||
        t.attn.ne[0] != n_q || kv.k.ne[0] != n_kv || kv.v.ne[0] != n_kv) {
        return false;
    }
    TERN_ASSERT(pos0 >= 0 && pos0 + 1 <= kv.k.ne[1], "positions past the KV cache");
    const WGPULimits & lim = ctx_.limits();
    // 512 threads (attention.wgsl's one-query choice), at least K / 32 (the prologue's words) and
    // head_dim / 2 (P·V's pairs). $TERN_WEBGPU_QKV_ATTN_WG overrides (a tuning aid).
    // (Fewer where the device allows fewer: SwiftShader's limit is 256.)
    static const uint32_t wg_env = env_or("TERN_WEBGPU_QKV_ATTN_WG", 512);
    const uint32_t wg_limit = floor_pow2(std::min<uint32_t>({lim.maxComputeInvocationsPerWorkgroup, lim.maxComputeWorkgroupSizeX, 1024}));
    uint32_t       wg       = std::max<uint32_t>({std::min(floor_pow2(wg_env), wg_limit), u32(k / 32), u32(hd / 2)});
    if ((wg & (wg - 1)) != 0) wg = floor_pow2(wg) * 2;
    if (wg > wg_limit) return false;
    // Attention's tiled scores (as WebGpuBackend::attention for one query) and what is left of the
    // workgroup memory for the scores: acts, lane_sums, slot_dots and cur_q / k / v, the reductions
    // (wg_reduce's two, sum_squares'), probs and blk_sum, qh, pv_sum, the K tile and kpart. Where
    // 256 scores do not fit, half the threads (half the tile), as attention() does.
    const bool     k_f16 = kv.k.type == DType::f16, v_f16 = kv.v.type == DType::f16;
    const uint32_t hw    = u32(k_f16 ? hd / 2 : hd);  // u32 words per head of a K row
    const uint32_t ts    = score_threads(hw, k_f16);
    const uint64_t storage = lim.maxComputeWorkgroupStorageSize;
    const auto     fixed_bytes = [&](uint32_t g, uint32_t tile_words) {
        return uint64_t(k) + (uint64_t{g} + 64) * 4 + 6ull * hd * 4 + uint64_t{g} * (4 + 8 + 4) + 256 * 4 + 8 * 4 +
               uint64_t(hd) * 4 + 8ull * (hd / 2) * 8 + uint64_t{tile_words} * 4 + uint64_t{g} * 4;
    };
    while (wg > 256 && wg / 2 >= std::max<uint32_t>(u32(k / 32), u32(hd / 2)) &&
           storage < fixed_bytes(wg, wg / ts * (hw + 1)) + 256 * 4) {
        wg /= 2;
    }
    if (ts > wg) return false;
    const uint32_t tile  = wg / ts * (hw + 1);
    const uint64_t fixed = fixed_bytes(wg, tile);
    if (storage < fixed + 256 * 4) return false;
    const uint32_t sc_max = static_cast<uint32_t>(std::min<uint64_t>((storage - fixed) / 4 / 256 * 256, 2048));
    // Lanes per weight row: at least 8 ($TERN_WEBGPU_QKV_ATTN_LANES), more while a lane would hold
    // more than 10 vec4s of a row or a pass's rows (wg / lanes) would not divide head_dim.
    static const uint32_t lanes_env = env_or("TERN_WEBGPU_QKV_ATTN_LANES", 8);
    uint32_t              lanes     = std::clamp<uint32_t>(floor_pow2(lanes_env), 1, 64);
    while (lanes < 64 && (k / 64 > int64_t{10} * lanes || hd % (wg / lanes) != 0)) lanes *= 2;
    const uint32_t rows = wg / lanes;
    if (k / 64 > int64_t{10} * lanes || rows < 4 || rows % 4 != 0 || hd % rows != 0) return false;

    // Positions this kernel keeps scores for, and not past where attention() would take the
    // long-context kernels (there the attention runs on its own).
    if (pos0 + 1 > int64_t{sc_max} || pos0 + 1 >= long_query_positions(sc_max)) return false;
    // att_k reads a row nothing writes (row 0, or 1 at position 0) in place of the current one.
    if (kv.k.ne[1] < 2 || kv.v.ne[1] < 2) return false;

    const uint32_t k_el = k_f16 ? 2 : 4, v_el = v_f16 ? 2 : 4;
    const uint32_t k_off = gpu_offset(kv.k, k_el), v_off = gpu_offset(kv.v, v_el);
    const uint64_t k_row_el = uint64_t{k_off} + static_cast<uint64_t>(pos0) * n_kv;
    const uint64_t v_row_el = uint64_t{v_off} + static_cast<uint64_t>(pos0) * n_kv;
    if ((k_f16 && k_row_el % 2) || (v_f16 && v_row_el % 2)) return false;  // rows of whole u32 words
    const uint64_t safe      = pos0 == 0 ? 1 : 0;
    const uint64_t k_safe_el = uint64_t{k_off} + safe * n_kv, v_safe_el = uint64_t{v_off} + safe * n_kv;

    const RopeTable &   rope = rope_table(s.n_rot, s.rope_freq_base, pos0 + 1);
    const DecodeSource  src  = decode_source(t.a_embd, &t.x, w.attn_norm);
    const std::optional<uint32_t> in = stats_for(t.x);
    const bool     stats_out = stats_fit(n_q) && hd % 32 == 0;  // 16 invocations per block, as attention.wgsl
    const uint32_t out_slot  = stats_out_slot();
    struct {
        float    eps;
        uint32_t src_offset, scale_offset, scales_offset, oscales_offset, head_dim, n_rot, n_head, n_head_kv, pos0,
            n_embd_kv, k_offset, v_offset;
        float    scale;
        uint32_t k_row, v_row, k_safe_row, v_safe_row, out_offset, stats_in, stats_out;
    } p{eps,
        src.offset,
        src.scale_offset,
        qkv.scales_offset,
        qkv.oscales_offset,
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
        static_cast<uint32_t>(k_f16 ? k_safe_el / 2 : k_safe_el),
        static_cast<uint32_t>(v_f16 ? v_safe_el / 2 : v_safe_el),
        gpu_offset(t.attn, 4),
        in.value_or(0),
        out_slot};
    const DecodeTiling tiling{lanes, rows, wg};
    PipelineKey key = decode_key("qkv_attention_decode", "rrrrwwwwu", tiling, k, /*norm=*/true, src, in, stats_out);
    key.add("K_F16", k_f16 ? 1.0 : 0.0);
    key.add("V_F16", v_f16 ? 1.0 : 0.0);
    key.add("HD", static_cast<double>(hd));
    key.add("HD_MAX", static_cast<double>(hd));
    key.add("N_HEAD", static_cast<double>(s.n_head));
    key.add("N_HEAD_KV", static_cast<double>(s.n_head_kv));
    key.add("S", static_cast<double>(ts));
    key.add("WPT", static_cast<double>(score_block_words(k_f16)));
    key.add("TILE", static_cast<double>(tile));
    key.add("KPART", static_cast<double>(wg));
    key.add("SC_MAX", static_cast<double>(sc_max));
    if (const_uniforms_ & 2) key.add("QKV_N_ROT", static_cast<double>(s.n_rot));
    if (const_uniforms_ & 4) {  // attention's first loads without the uniform (lib/attention_core.wgsl)
        if (k_off == 0) key.add("ATT_K_AT", 0.0);
        if (v_off == 0) key.add("ATT_V_AT", 0.0);
        key.add("ATT_ROW", static_cast<double>(n_kv));
        key.add("ATT_GROUP", static_cast<double>(s.n_head / s.n_head_kv));
        key.add("ATT_CTX", static_cast<double>(std::min(kv.k.ne[1], kv.v.ne[1])));
    }
    // A device that cannot build the kernel (workgroup memory, registers) keeps the two kernels.
    try {
        pipelines_.pipeline(key);
    } catch (const Error & e) {
        TERN_LOG_WARN("webgpu: qkv + attention as one kernel does not build here (%s); using two kernels", e.what());
        qkv_attention_ = false;
        return false;
    }
    const WGPUBuffer bufs[] = {qkv.buffer->get(), src.src,          src.scale,         rope.buffer->get(),
                               gpu_buffer(kv.k),  gpu_buffer(kv.v), gpu_buffer(t.attn), stats_buffer()};
    step_->dispatch(key, bufs, &p, sizeof p, u32(s.n_head));
    ++qkv_attention_dispatches_;
    if (stats_out) stats_written(t.attn, out_slot);
    return true;
}

}  // namespace tern
