// A paged batch's attention over short contexts in one dispatch (shaders/attention_paged_short.wgsl):
// a workgroup per KV head and column runs the three split kernels' work (scores, softmax, P·V) with
// the same operations in the same order, its scores in workgroup memory. A decode step of many
// sequences (`tern serve`: 64 streams at a few hundred positions each) otherwise pays for three
// dependent dispatches per layer, with the scores going through a scratch buffer and each kernel's
// workgroups mostly waiting on their first loads; 320 (column, KV head) pairs at 64 streams of
// 2B4T are enough workgroups to fill the GPU.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "backend/cpu/cpu_ops.h"

#include <algorithm>
#include <bit>

namespace tern {

bool WebGpuBackend::paged_short_attention(const Tensor & out, const Tensor & q, const KvLayer & kv,
                                          const AttentionShape & s, const KvBatch & batch) {
    const int64_t hd    = s.head_dim;
    const int64_t n_kv  = s.n_head_kv;
    const int64_t group = s.n_head / n_kv;
    const int64_t n_tok = q.ne[1];
    const bool    k_f16 = kv.k.type == DType::f16;
    const bool    v_f16 = kv.v.type == DType::f16;
    const auto &  lim   = ctx_.limits();
    if (tune_.attn_paged_short == 0 || n_tok < 1 || group > 16 || hd % 2 != 0 || hd > 256 || batch.page_size < 16 ||
        cpu::k_pos_block != 32 || cpu::k_pos_super != 512) {
        return false;
    }
    const int64_t n_max = batch.max_position() + 1;
    // Positions the workgroup holds: the tuning's, a multiple of 32, at least the longest column's.
    const uint32_t nmax = tune_.attn_paged_short / 32 * 32;
    if (n_max > int64_t{nmax}) return false;

    constexpr uint32_t wg = 256;
    const uint32_t     ts = floor_pow2(static_cast<uint64_t>(2 * ((hd + 15) / 16) - 1));  // threads per position
    const uint32_t     np = static_cast<uint32_t>(hd / 2);
    const uint32_t     ks = wg / np;  // P·V blocks per round
    const uint64_t     g  = static_cast<uint64_t>(group);
    const uint64_t     xs = std::max<uint64_t>(g * wg, uint64_t{ks} * g * static_cast<uint64_t>(hd));
    const uint64_t     mem = (g * hd + g * nmax + xs + g * (nmax / 32) + nmax / 16 + wg + 32) * 4;
    const size_t       k_el = k_f16 ? 2 : 4, v_el = v_f16 ? 2 : 4;
    if (ts > wg || ks < 1 || g * hd > 16 * wg || mem > lim.maxComputeWorkgroupStorageSize ||
        uint64_t(n_kv) > lim.maxComputeWorkgroupsPerDimension || uint64_t(n_tok) > lim.maxComputeWorkgroupsPerDimension ||
        // (f16 values are read as u32 pairs: every row's first element of a head at an even index)
        (k_f16 && (gpu_offset(kv.k, k_el) % 2 != 0 || kv.k.ne[0] % 2 != 0)) ||
        (v_f16 && (gpu_offset(kv.v, v_el) % 2 != 0 || kv.v.ne[0] % 2 != 0))) {
        return false;
    }

    struct {
        uint32_t n_embd_kv, q_offset, q_stride, k_offset, v_offset, n_head_kv, pos0, max_pages, cols_offset,
            pages_offset, out_offset, out_stride;
        float scale;
    } pp{u32(kv.k.ne[0]),
         gpu_offset(q, 4),
         u32(q.ne[0]),
         gpu_offset(kv.k, k_el),
         gpu_offset(kv.v, v_el),
         u32(n_kv),
         0,
         u32(batch.max_pages),
         gpu_offset(batch.columns, 4),
         gpu_offset(batch.page_table, 4),
         gpu_offset(out, 4),
         u32(out.ne[0]),
         s.scale};
    TERN_ASSERT(kv.k.ne[0] == kv.v.ne[0], "attention_paged_short: K and V rows of one width");
    PipelineKey key{"attention_paged_short",
                    "rrrrrwu",
                    {{{"WG", static_cast<double>(wg)},
                      {"S", static_cast<double>(ts)},
                      {"HD", static_cast<double>(hd)},
                      {"GROUP", static_cast<double>(group)},
                      {"GP2", static_cast<double>(std::bit_ceil(g))},
                      {"K_F16", k_f16 ? 1.0 : 0.0},
                      {"V_F16", v_f16 ? 1.0 : 0.0},
                      {"NMAX", static_cast<double>(nmax)},
                      {"XS", static_cast<double>(xs)},
                      {"PAGED", 1.0},
                      {"PAGE", static_cast<double>(batch.page_size)}}}};
    const WGPUBuffer b[] = {gpu_buffer(q),       gpu_buffer(kv.k),   gpu_buffer(kv.v), gpu_buffer(batch.columns),
                            gpu_buffer(batch.page_table), gpu_buffer(out)};
    step_->dispatch(key, b, &pp, sizeof pp, u32(n_kv), u32(n_tok));
    ++paged_short_attentions_;
    return true;
}

}  // namespace tern
