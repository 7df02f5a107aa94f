// Prompt attention: from attn_prefill_min_tokens (16) query tokens on, attention() takes these kernels
// instead of attention.wgsl (one workgroup per query and head, which reads the whole K/V prefix
// from global memory for every query):
//   1. attention_prefill_scores.wgsl: scale q·k for every (query row, position) a row may see, as
//      64 x 64 GEMM tiles whose K rows are staged once per 64 query rows (16 tokens x the 4 query
//      heads of a KV head for BitNet 2B4T), into a scratch buffer [n_head_kv][T G][ld] f32;
//   2. attention_prefill_softmax.wgsl: the probabilities of each row, in place (a row of at most 512
//      positions in one pass; a longer one in the block order: each block of 32 positions' own max,
//      exps and sum, and the join weights of blocks, chunks and superblocks);
//   3. attention_prefill_pv.wgsl: probabilities x V as 32-row x 64-dimension tiles, V rows staged
//      once per 32 query rows; when that makes too few workgroups (a short prompt over a long
//      cache) the long rows are split into segments of positions and
//   4. attention_prefill_combine.wgsl joins the segments' (superblocks') sums.
// 3 or 4 dispatches per layer instead of 1; on an H200 they take ~15 ms of a pp512 of 2B4T where
// attention.wgsl took ~51 ms (README.md).
// The CPU's numerics, bit for bit (cpu::attention_row, issue 52): the same products, the scores'
// sums in cpu::dot_blocked16's order, mul_rn scaling, exp_fixed, f16 rounding of q; a row of at most
// 512 positions as attention.wgsl (one softmax pass, f16 probabilities, P·V sums in
// cpu::sum_positions's order); a longer row in the block order (attention_prefill_softmax.wgsl's
// header): the softmax kernel writes each block of 32 positions' f16(e) and the join weights of
// blocks, chunks and superblocks, the P·V kernel joins its sums with them as it goes, superblocks
// (segments) are joined by the P·V kernel or the combine, then out = O (1 / L).
// Long prompts over long caches run in token chunks so that the score buffer stays within a budget.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

#include <algorithm>

namespace tern {
namespace {

// The defaults (WebGpuTuning): from 16 query tokens on (below, attention.wgsl has enough
// workgroups, n_head per token, and the tiles would be mostly empty); a score budget of 128 MiB
// (20 heads x 512 tokens x 3200 positions fit in one chunk); 32 P·V rows per workgroup (8 tokens x
// 4 heads for 2B4T: 640 workgroups per layer at pp512, the longest first; H200 pp512 48.2 ms per
// prompt, 49-50 ms with 64 rows); a P·V split for short prompts over long caches aims at 256
// workgroups (a split costs a combine dispatch and 8 bytes per output per segment, written and
// read; at pp512 on an H200 splitting into 512 or 1024 workgroups measured no faster than none).

int64_t round_up64(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

}  // namespace

bool WebGpuBackend::prefill_attention(const Tensor & out, const Tensor & q, const KvLayer & kv,
                                      const AttentionShape & s, int64_t pos0, bool long_one) {
    const int64_t  min_tokens = tune_.attn_prefill_min_tokens;
    const uint32_t pv_rows    = tune_.attn_pv_rows;
    const int64_t  pv_target  = tune_.attn_pv_split_groups;  // (0: never split)
    const int64_t n_tok = q.ne[1];
    const int64_t hd    = s.head_dim;
    if ((n_tok < min_tokens && !long_one) || hd % 4 != 0 || hd > 256) return false;  // attention.wgsl (or its error)

    const int64_t n_kv  = s.n_head_kv;
    const int64_t group = s.n_head / n_kv;
    const bool    k_f16 = kv.k.type == DType::f16;
    const bool    v_f16 = kv.v.type == DType::f16;
    const auto &  lim   = ctx_.limits();

    // Tiles (attention_prefill_*.wgsl): scores 64 rows x 64 positions, DC dimensions staged at a
    // time; P·V pv_rows rows x bd dimensions, PC positions at a time. Halved chunks where the
    // device has less workgroup memory than they need (16 KiB is every device's minimum).
    const uint64_t     wg_mem  = lim.maxComputeWorkgroupStorageSize;
    constexpr uint32_t sc_rows = 64, sc_pos = 64;
    const uint32_t dc = (sc_rows + sc_pos) * (32 / 4 + 1) * 16 <= wg_mem ? 32 : 16;
    const uint32_t bd = hd <= 16 ? 16 : hd <= 32 ? 32 : 64;
    auto pv_bytes = [&](uint32_t pc) { return uint64_t{pc} * (pv_rows / 4 + 1) * 16 + uint64_t{pc} * (bd / 4) * 16; };
    const uint32_t pc = pv_bytes(32) <= wg_mem ? 32 : 16;
    TERN_ASSERT((sc_rows + sc_pos) * (dc / 4 + 1) * 16 <= wg_mem && pv_bytes(pc) <= wg_mem,
                "prompt attention tiles need more than %llu bytes of workgroup memory",
                static_cast<unsigned long long>(wg_mem));

    // Token chunks: the scores of a chunk, [n_head][tokens][ld] f32, within the budget (and the
    // softmax's one workgroup per row within the dispatch limit).
    const int64_t max_bytes = std::min<int64_t>(
        {int64_t{tune_.attn_scratch_bytes},
         static_cast<int64_t>(std::min<uint64_t>(lim.maxBufferSize, lim.maxStorageBufferBindingSize))});
    const int64_t ld        = round_up64(pos0 + n_tok, 4);
    const int64_t row_bytes = s.n_head * ld * 4;  // one token's scores
    const int64_t chunk     = std::clamp<int64_t>(max_bytes / row_bytes, 1,
                                                  std::min<int64_t>(n_tok, lim.maxComputeWorkgroupsPerDimension / group));
    const size_t  need      = static_cast<size_t>(chunk * row_bytes);
    grown(attn_scores_, need, "attention scores");
    // Each long row's weights: [n_head_kv][chunk G][w_ld] f32: 16 nsb_ld block weights, 8 nsb_ld
    // chunk weights, 3 nsb_ld superblock values and 1 / L.
    const int64_t nsb_ld = (ld + cpu::k_pos_super - 1) / cpu::k_pos_super;
    const int64_t w_ld   = 27 * nsb_ld + 1;
    grown(attn_wts_, static_cast<size_t>(n_kv * chunk * group * w_ld * 4), "attention weights");

    const size_t   k_el = k_f16 ? 2 : 4;
    const size_t   v_el = v_f16 ? 2 : 4;
    const uint32_t ndb  = ceil_div(hd, bd);
    for (int64_t t0 = 0; t0 < n_tok; t0 += chunk) {
        const int64_t  tc     = std::min(chunk, n_tok - t0);
        const int64_t  p0     = pos0 + t0;  // position of the chunk's first token
        const int64_t  n_rows = tc * group;
        const uint32_t q_off  = gpu_offset(q, 4) + u32(t0 * q.ne[0]);
        const uint32_t o_off  = gpu_offset(out, 4) + u32(t0 * out.ne[0]);

        struct {
            uint32_t head_dim, group, n_rows, pos0, n_pos, n_embd_kv, q_offset, q_stride, k_offset, ld;
            float    scale;
        } sp{u32(hd), u32(group), u32(n_rows), u32(p0), u32(p0 + tc), u32(kv.k.ne[0]), q_off, u32(q.ne[0]),
             gpu_offset(kv.k, k_el), u32(ld), s.scale};
        const PipelineKey sk{"attention_prefill_scores",
                             "rrwu",
                             {{{"K_F16", k_f16 ? 1.0 : 0.0},
                               {"BR", static_cast<double>(sc_rows)},
                               {"BP", static_cast<double>(sc_pos)},
                               {"DC", static_cast<double>(dc)},
                               {"GROUP", static_cast<double>(group)}}}};
        const WGPUBuffer sb[] = {gpu_buffer(q), gpu_buffer(kv.k), attn_scores_->get()};
        step_->dispatch(sk, sb, &sp, sizeof sp, ceil_div(p0 + tc, sc_pos), ceil_div(n_rows, sc_rows), u32(n_kv));

        encode_attention_softmax(n_rows, n_kv, group, p0, ld, nsb_ld, w_ld, v_f16, n_tok == 1);

        // Segments: positions per P·V workgroup such that the causal triangle makes about pv_target
        // workgroups of similar work (the longest row blocks split the most); none when one segment
        // holds every row block or pv_target is 0. Segments are 512 positions, one superblock of the
        // position order (cpu::sum_positions), so the combine adds what the CPU adds.
        const int64_t n_blocks = ceil_div(n_rows, pv_rows);
        const int64_t n_max    = p0 + tc;  // positions the chunk's last token sees
        int64_t       work     = 0;        // positions summed by all workgroups of one (kvh, dimension block)
        for (int64_t b = 0; b < n_blocks; ++b) work += p0 + (std::min((b + 1) * pv_rows, n_rows) - 1) / group + 1;
        const int64_t part_seg = n_kv * n_rows * hd * 4;                       // bytes of one segment's sums
        const int64_t max_segs = std::max<int64_t>(1, max_bytes / part_seg);  // within the budget
        int64_t seg_len = pv_target > 0 ? round_up64((work * n_kv * ndb + pv_target - 1) / pv_target, pc) : n_max;
        seg_len = std::max(seg_len, round_up64((n_max + max_segs - 1) / max_segs, pc));
        // A segment is one superblock of cpu::sum_positions's order (the combine adds superblocks).
        if (seg_len < n_max) seg_len = (n_max + cpu::k_pos_super - 1) / cpu::k_pos_super <= max_segs ? cpu::k_pos_super : n_max;
        const int64_t n_seg = (n_max + seg_len - 1) / seg_len;  // of the longest row block
        const size_t  part_bytes = n_seg > 1 ? static_cast<size_t>(n_seg * part_seg) : 16;
        grown(attn_part_, part_bytes, "attention segment sums");
        struct {
            uint32_t head_dim, group, n_rows, pos0, n_pos, n_embd_kv, v_offset, ld, seg_len, n_head_kv, out_offset,
                out_stride, nsb_ld, w_ld;
        } pp{u32(hd),    u32(group),   u32(n_rows),   u32(p0),  u32(p0 + tc),
             u32(kv.v.ne[0]), gpu_offset(kv.v, v_el), u32(ld), u32(seg_len), u32(n_kv), o_off, u32(out.ne[0]),
             u32(nsb_ld), u32(w_ld)};
        const PipelineKey pk{"attention_prefill_pv",
                             "rrwwru",
                             {{{"V_F16", v_f16 ? 1.0 : 0.0},
                               {"BR", static_cast<double>(pv_rows)},
                               {"BD", static_cast<double>(bd)},
                               {"PC", static_cast<double>(pc)},
                               {"GROUP", static_cast<double>(group)}}}};
        const WGPUBuffer pb[] = {attn_scores_->get(), gpu_buffer(kv.v), gpu_buffer(out), attn_part_->get(),
                                 attn_wts_->get()};
        step_->dispatch(pk, pb, &pp, sizeof pp, u32(n_kv * ndb), u32(n_blocks), u32(n_seg));
        if (n_seg == 1) continue;

        TERN_ASSERT(seg_len == cpu::k_pos_super, "prompt attention segments of %lld positions: the combine joins superblocks",
                    static_cast<long long>(seg_len));
        encode_attention_combine(out, o_off, hd, group, n_rows, pv_rows, n_kv, p0, nsb_ld, w_ld);
    }
    return true;
}

void WebGpuBackend::encode_attention_softmax(int64_t n_rows, int64_t n_kv, int64_t group, int64_t pos0, int64_t ld,
                                             int64_t nsb_ld, int64_t w_ld, bool v_f16, bool one_query) {
    // Threads per row: 64 for prompts; 256 for one query (G rows per KV head, so few workgroups, each
    // over thousands of positions: H100 tg128 at a depth of 3840, with the prompt kernels then, 5.04
    // ms per token against 5.45 with 128 and 6.14 with 64). (WebGpuTuning::attn_softmax_wg*)
    const double wg_prompt = tune_.attn_softmax_wg;
    const double wg_one    = tune_.attn_softmax_wg_one;
    struct {
        uint32_t group, n_rows, pos0, ld, nsb_ld, w_ld;
    } mp{u32(group), u32(n_rows), u32(pos0), u32(ld), u32(nsb_ld), u32(w_ld)};
    const PipelineKey mk{"attention_prefill_softmax",
                         "wwu",
                         {{{"WG", one_query ? wg_one : wg_prompt},
                           {"V_F16", v_f16 ? 1.0 : 0.0},
                           {"GROUP", static_cast<double>(group)}}}};
    const WGPUBuffer mb[] = {attn_scores_->get(), attn_wts_->get()};
    step_->dispatch(mk, mb, &mp, sizeof mp, u32(n_rows), u32(n_kv));
}

void WebGpuBackend::encode_attention_combine(const Tensor & out, uint32_t out_offset, int64_t hd, int64_t group,
                                             int64_t n_rows, uint32_t row_block, int64_t n_kv, int64_t pos0,
                                             int64_t nsb_ld, int64_t w_ld) {
    struct {
        uint32_t head_dim, group, n_rows, n_head_kv, pos0, out_offset, out_stride, nsb_ld, w_ld;
    } cp{u32(hd), u32(group), u32(n_rows), u32(n_kv), u32(pos0), out_offset, u32(out.ne[0]), u32(nsb_ld), u32(w_ld)};
    const PipelineKey ck{"attention_prefill_combine",
                         "rrwu",
                         {{{"WG", 256},
                           {"BR", static_cast<double>(row_block)},
                           {"GROUP", static_cast<double>(group)}}}};
    const WGPUBuffer  cb[] = {attn_part_->get(), attn_wts_->get(), gpu_buffer(out)};
    step_->dispatch(ck, cb, &cp, sizeof cp, ceil_div(n_rows * hd, 256), u32(n_kv));
}

}  // namespace tern
