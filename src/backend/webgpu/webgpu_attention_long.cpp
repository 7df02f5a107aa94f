// One query over a long context (decoding deep into a context): attention() sends it here from
// WebGpuTuning::attn_long_positions on, because attention.wgsl, one workgroup per query head,
// walks every position in that one workgroup. Here the positions spread over many workgroups:
//   1. attention_long_scores.wgsl: scale q·k, a workgroup per 32 positions (head_dim 128) and KV
//      head, each thread one block of 16 dimensions of one position for the G query heads;
//   2. attention_prefill_softmax.wgsl: max, exp, sum and probabilities of each of the G n_head_kv
//      rows, in place (as for a prompt of one token);
//   3. attention_long_pv.wgsl: probabilities x V, a workgroup per block of 32 positions and KV head;
//   4. attention_prefill_combine.wgsl: the blocks added into superblocks and those in order (only
//      when there is more than one block).
// Same numerics as attention.wgsl and the CPU, bit for bit (cpu::dot_blocked16's and
// cpu::sum_positions's orders). The prompt kernels took this job before, with tiles for 64 query
// rows of which one query uses G, and P·V segments of 512 positions walked by one workgroup each.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

#include <algorithm>

namespace tern {

bool WebGpuBackend::long_query_attention(const Tensor & out, const Tensor & q, const KvLayer & kv,
                                         const AttentionShape & s, int64_t pos0) {
    const int64_t  hd    = s.head_dim;
    const int64_t  n_kv  = s.n_head_kv;
    const int64_t  group = s.n_head / n_kv;
    const int64_t  n_pos = pos0 + 1;
    const bool     k_f16 = kv.k.type == DType::f16;
    const bool     v_f16 = kv.v.type == DType::f16;
    const auto &   lim   = ctx_.limits();
    constexpr uint32_t wg = 256;
    const uint32_t nb    = u32((hd + 15) / 16);                  // blocks of 16 dimensions
    const uint32_t ts    = u32(floor_pow2(2 * nb - 1));          // threads per position (nb rounded up)
    const uint32_t tp    = wg / ts;                              // positions per score workgroup
    const uint32_t wpr   = u32(v_f16 ? hd / 2 : hd);             // V words per row of a KV head
    const uint64_t sc_mem = uint64_t(group) * (hd + wg) * 4;
    const uint64_t pv_mem = uint64_t(group) * cpu::k_pos_block * 4 + uint64_t(cpu::k_pos_block) * wpr * 4;
    const int64_t  n_blk  = (n_pos + cpu::k_pos_block - 1) / cpu::k_pos_block;
    const int64_t  ld     = (n_pos + 3) / 4 * 4;
    const uint64_t scores_bytes = uint64_t(s.n_head) * ld * 4;
    const uint64_t part_bytes   = uint64_t(n_blk) * s.n_head * hd * 4;
    const uint64_t max_binding  = std::min<uint64_t>(lim.maxBufferSize, lim.maxStorageBufferBindingSize);
    if (std::max(sc_mem, pv_mem) > lim.maxComputeWorkgroupStorageSize || ts > wg || scores_bytes > max_binding ||
        part_bytes > max_binding || n_blk > lim.maxComputeWorkgroupsPerDimension) {
        return false;  // the prompt kernels
    }
    const WGPUBuffer scores = grown(attn_scores_, scores_bytes, "attention scores");
    const WGPUBuffer parts  = grown(attn_part_, part_bytes, "attention segment sums");
    const size_t k_el = k_f16 ? 2 : 4, v_el = v_f16 ? 2 : 4;

    struct {
        uint32_t n_pos, n_embd_kv, q_offset, k_offset, ld;
        float    scale;
    } sp{u32(n_pos), u32(kv.k.ne[0]), gpu_offset(q, 4), gpu_offset(kv.k, k_el), u32(ld), s.scale};
    const PipelineKey sk{"attention_long_scores",
                         "rrwu",
                         {{{"WG", wg},
                           {"S", static_cast<double>(ts)},
                           {"HD", static_cast<double>(hd)},
                           {"GROUP", static_cast<double>(group)},
                           {"K_F16", k_f16 ? 1.0 : 0.0}}}};
    const WGPUBuffer sb[] = {gpu_buffer(q), gpu_buffer(kv.k), scores};
    step_->dispatch(sk, sb, &sp, sizeof sp, ceil_div(n_pos, tp), u32(n_kv));

    encode_attention_softmax(group, n_kv, group, pos0, ld, v_f16, true);  // as for a one-token prompt

    struct {
        uint32_t n_pos, n_embd_kv, v_offset, ld, n_head_kv, out_offset;
    } pp{u32(n_pos), u32(kv.v.ne[0]), gpu_offset(kv.v, v_el), u32(ld), u32(n_kv), gpu_offset(out, 4)};
    const PipelineKey pk{"attention_long_pv",
                         "rrwwu",
                         {{{"WG", wg},
                           {"HD", static_cast<double>(hd)},
                           {"GROUP", static_cast<double>(group)},
                           {"V_F16", v_f16 ? 1.0 : 0.0},
                           {"WPR", static_cast<double>(wpr)}}}};
    const WGPUBuffer pb[] = {scores, gpu_buffer(kv.v), gpu_buffer(out), parts};
    step_->dispatch(pk, pb, &pp, sizeof pp, u32(n_blk), u32(n_kv));
    if (n_blk == 1) return true;

    encode_attention_combine(out, gpu_offset(out, 4), hd, group, group, u32(group), n_kv, pos0, cpu::k_pos_block);
    return true;
}

}  // namespace tern
