// Attention by superblocks in three dispatches: a paged batch (issue 53: many sequences, one query
// column each or several, positions read through the page tables, lib/kv_pages.wgsl) from
// WebGpuTuning::attn_paged_deep or with any column past 512 positions (H200, 64 streams: 9,285.7 vs
// 7,455.7 tok/s with the split kernels at positions 20-1060, 7,221.9 vs 5,132.7 at depth 1024; 98.1 us
// per layer vs pvt 206.8 + softmax 16.3), and one query over more than 512 positions of a contiguous
// cache where the block kernels (below) do not take it:
//   1. attention_split_scores.wgsl: the scaled scores (as split_attention dispatches it);
//   2. attention_paged_super.wgsl: a workgroup per (superblock of 512 positions, slice of at most
//      128 dimensions (the whole head up to 128), KV head (x SUB past G = 4), column)
//      takes its superblock's max, exps and sums from the scores itself (no softmax dispatch) and
//      its P·V for all its query heads from whole V head rows (coalesced vec4 loads straight into
//      registers, 4 positions ahead): a column of at most 512 positions its normalised sums, a
//      longer one its superblock's partial (M, L, O) in issue 52's block order;
//   3. attention_split_combine.wgsl: a column's sums as they are (one superblock), or the row join of
//      its superblock partials and O x 1 / L.
// Bit for bit the CPU reference's orders (cpu::attention_row; attention_paged_super.wgsl says which).
// False where the shape does not fit (head_dim not a multiple of 8, G > 16, buffers): split_attention
// then takes columns of at most 512 positions.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

#include <algorithm>

namespace tern {

bool WebGpuBackend::super_attention(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & s,
                                    const KvBatch * batch, int64_t pos0) {
    const int64_t hd    = s.head_dim;
    const int64_t n_kv  = s.n_head_kv;
    const int64_t group = s.n_head / n_kv;
    const int64_t n_tok = q.ne[1];
    const auto &  lim   = ctx_.limits();
    const bool    k_f16 = kv.k.type == DType::f16;
    const bool    paged = batch != nullptr;
    // Issue 52: one query in the block order (cpu::attention_row's for rows of more than 512 positions;
    // tests/backend/webgpu_block_order_test.cpp): attention_block_pv (a workgroup per chunk of 2 blocks of
    // 32 positions x KV head x column: scores, block maxima, exps and P·V, the chunk's blocks joined) +
    // attention_block_combine (the chunks joined into superblocks of 8, those into the row, one
    // normalisation): 2 dispatches per layer instead of 3. Every column past 512 positions (rows of at
    // most 512 keep the single-pass softmax: the other kernels below).
    if (!paged && pos0 + 1 > cpu::k_pos_super) {
        // attention_block_combine: 16 dimensions per workgroup of 256 threads (H200 tg64 @ d4096: 599.89 /
        // 598.35 tok/s with 8, 601.05 / 599.08 with 16), at most nsb_max superblocks of 512 positions per
        // column (its workgroup memory: 64, 32,768 positions)
        constexpr uint32_t k_block_np = 64, k_block_wg = 256, ds = 16;
        const uint32_t     nsb_max    = static_cast<uint32_t>(
            std::min<uint64_t>(64, lim.maxComputeWorkgroupStorageSize / (4 * (uint64_t{ds} + 2))));
        const uint64_t     g           = static_cast<uint64_t>(group);
        const uint64_t     ra          = 2 * g * k_block_np;
        const uint64_t     mem = ra * 4 + g * static_cast<uint64_t>(hd) * 4 + g * k_block_np * 4 +
                             uint64_t{k_block_np} * 16 + 3 * 16 * 2 + 64;
        const int64_t  nch_ld = ceil_div(pos0 + n_tok, k_block_np);
        const bool     fits = (hd == 64 || hd == 96 || hd == 128) && g <= 4 && k_f16 && kv.v.type == DType::f16 &&
                          gpu_offset(kv.k, 2) % 8 == 0 && kv.k.ne[0] % 8 == 0 && gpu_offset(kv.v, 2) % 2 == 0 && kv.v.ne[0] % 2 == 0 &&
                          mem <= lim.maxComputeWorkgroupStorageSize && 128 <= lim.maxComputeInvocationsPerWorkgroup &&
                          ceil_div(nch_ld, 8) <= nsb_max && n_tok <= lim.maxComputeWorkgroupsPerDimension;
        if (fits) {
            grown(attn_super_, static_cast<size_t>(n_tok * n_kv * group * nch_ld * hd) * 4, "attention chunk sums");
            grown(attn_sml_, static_cast<size_t>(n_tok * n_kv * group * nch_ld) * 8, "attention chunk maxima");
            PipelineKey bk{"attention_block_pv", "rrrwwu", {{{"GROUP", static_cast<double>(g)}, {"RA", static_cast<double>(ra)}}}};
            if (hd != 128) bk.add("HD", static_cast<double>(hd));
            struct {
                uint32_t n_embd_kv, q_offset, q_stride, k_offset, v_offset, n_head_kv, pos0, nch_ld;
                float    scale;
            } bp{u32(kv.k.ne[0]), gpu_offset(q, 4), u32(q.ne[0]), gpu_offset(kv.k, 2), gpu_offset(kv.v, 2), u32(n_kv),
                 u32(pos0), u32(nch_ld), s.scale};
            TERN_ASSERT(kv.k.ne[0] == kv.v.ne[0], "attention_block_pv: K and V rows of one width");
            const WGPUBuffer bb[] = {gpu_buffer(q), gpu_buffer(kv.k), gpu_buffer(kv.v), attn_super_->get(),
                                     attn_sml_->get()};
            step_->dispatch(bk, bb, &bp, sizeof bp, u32(nch_ld), u32(n_kv), u32(n_tok));
            PipelineKey ck{"attention_block_combine",
                           "rrwu",
                           {{{"HD", static_cast<double>(hd)},
                             {"DS", static_cast<double>(ds)},
                             {"WG", static_cast<double>(k_block_wg)},
                             {"NSB", static_cast<double>(nsb_max)}}}};
            struct {
                uint32_t n_head, nch_ld, pos0, out_offset, out_stride;
            } cp{u32(n_kv * group), u32(nch_ld), u32(pos0), gpu_offset(out, 4), u32(out.ne[0])};
            const WGPUBuffer cb[] = {attn_super_->get(), attn_sml_->get(), gpu_buffer(out)};
            step_->dispatch(ck, cb, &cp, sizeof cp, u32(n_kv * group * (hd / ds)), u32(n_tok));
            return true;
        }
    }
    // Dimensions per workgroup: the head, or the largest multiple of 8 up to 128 dividing it (H200 64
    // streams, half a head per workgroup: d1024 6,970.7 vs 7,194.8 tok/s).
    uint32_t dw = static_cast<uint32_t>(std::clamp<int64_t>(hd / 8 * 8, 8, 128));
    while (dw > 8 && hd % dw != 0) dw -= 8;
    // (f32 V in the block order only: issue 52's rows past 512 positions have no other kernel)
    const bool   v_f16  = kv.v.type == DType::f16;
    const size_t v_el   = v_f16 ? 2 : 4;
    const bool   v_fits = v_f16 ? gpu_offset(kv.v, 2) % 8 == 0 && kv.v.ne[0] % 8 == 0
                                : kv.v.type == DType::f32 && gpu_offset(kv.v, 4) % 4 == 0 && kv.v.ne[0] % 4 == 0;
    // Query heads per attention_paged_super workgroup: G, or past 4 (the block order only) the largest
    // divisor of G up to 4, SUB = G / that workgroups per KV head.
    int64_t gw = group;
    if (group > 4 && group <= 16) {
        gw = 4;
        while (group % gw != 0) --gw;
    }
    const int64_t sub = group / gw;
    if (!v_fits || gw > 4 || hd % 8 != 0 || hd % dw != 0 || n_tok < 1 || cpu::k_pos_super != 512 ||
        cpu::k_pos_block != 32) {
        return false;
    }
    // The scores kernel's shape (split_attention's): threads per position, positions per workgroup.
    constexpr uint32_t wg = 256;
    const uint32_t     ts = floor_pow2(static_cast<uint64_t>(2 * ((hd + 15) / 16) - 1));
    const uint32_t     tp = wg / ts;
    const uint32_t     pv_wg = 16 * (dw / 8);
    const uint64_t wsn = std::max<uint64_t>(512, 8 * uint64_t{dw});
    const uint64_t g   = static_cast<uint64_t>(group);
    const uint64_t sc_mem = g * hd * 4 + g * wg * 4 + g * tp * 4 + 16;
    const uint64_t pv_mem = 4 * 16 * 33 * 4 + 64 * 4 + 32 + wsn * 16 + 16;
    const uint64_t max_bind = std::min<uint64_t>(lim.maxBufferSize, lim.maxStorageBufferBindingSize);
    if (std::max(sc_mem, pv_mem) > lim.maxComputeWorkgroupStorageSize ||
        pv_wg > lim.maxComputeInvocationsPerWorkgroup || ts > wg) {
        return false;
    }
    // The largest position of the columns [c0, c0 + n).
    auto max_position = [&](int64_t c0, int64_t n) {
        if (!paged) return pos0 + c0 + n - 1;
        int64_t m = 0;
        for (const KvSeq & sq : batch->seqs) {
            const int64_t a = std::max(sq.first, c0), b = std::min(sq.first + sq.n, c0 + n);
            if (a < b) m = std::max(m, sq.pos0 + (b - 1 - sq.first));
        }
        return m;
    };
    // Columns per pass: the scores of a pass ([T][n_kv][G][ld] f32) within the budget.
    const int64_t n_all     = max_position(0, n_tok) + 1;
    const int64_t ld_all    = (n_all + 3) / 4 * 4;
    const int64_t col_bytes = n_kv * group * ld_all * 4;
    const int64_t nsb_ld    = ceil_div(n_all, cpu::k_pos_super);
    if (col_bytes > static_cast<int64_t>(max_bind) || ceil_div(n_all, tp) > lim.maxComputeWorkgroupsPerDimension ||
        nsb_ld * (hd / dw) > lim.maxComputeWorkgroupsPerDimension) {
        return false;
    }
    const int64_t budget = static_cast<int64_t>(std::min<uint64_t>(tune_.attn_scratch_bytes, max_bind));
    const int64_t chunk  = std::clamp<int64_t>(budget / col_bytes, 1,
                                              std::min<int64_t>(n_tok, lim.maxComputeWorkgroupsPerDimension));
    const int64_t tc_max = std::min(chunk, n_tok);
    grown(attn_scores_, static_cast<size_t>(tc_max * col_bytes), "attention scores");
    grown(attn_wmax_, static_cast<size_t>(tc_max * n_kv * group * ceil_div(n_all, tp)) * 4, "attention maxima");
    grown(attn_sml_, static_cast<size_t>(tc_max * n_kv * group * nsb_ld) * 8, "attention superblock maxima");
    grown(attn_super_, static_cast<size_t>(tc_max * n_kv * group * nsb_ld * hd) * 4, "attention superblock sums");

    const size_t   k_el      = k_f16 ? 2 : 4;
    const int64_t  k_per_vec = 16 / static_cast<int64_t>(k_el);
    const bool     k_vec     = gpu_offset(kv.k, k_el) % k_per_vec == 0 && kv.k.ne[0] % k_per_vec == 0 && hd % k_per_vec == 0;
    const uint32_t cols_at   = paged ? gpu_offset(batch->columns, 4) : 0;
    const uint32_t pages_at  = paged ? gpu_offset(batch->page_table, 4) : 0;
    const uint32_t max_pages = paged ? u32(batch->max_pages) : 0;
    // Without pages, `cols` and `pages` bind a buffer nothing reads.
    const WGPUBuffer cols  = paged ? gpu_buffer(batch->columns) : gpu_buffer(kv.v);
    const WGPUBuffer pages = paged ? gpu_buffer(batch->page_table) : gpu_buffer(kv.v);
    auto add_paging = [&](PipelineKey & key) {
        if (!paged) return;
        key.add("PAGED", 1.0);
        key.add("PAGE", static_cast<double>(batch->page_size));
    };
    PipelineKey sk{"attention_split_scores",
                   "rrrrwwu",
                   {{{"WG", static_cast<double>(wg)},
                     {"S", static_cast<double>(ts)},
                     {"HD", static_cast<double>(hd)},
                     {"GROUP", static_cast<double>(group)},
                     {"K_F16", k_f16 ? 1.0 : 0.0},
                     {"K_VEC", k_vec ? 1.0 : 0.0}}}};
    add_paging(sk);
    PipelineKey vk{"attention_paged_super",
                   "rrrrwwu",
                   {{{"HD", static_cast<double>(hd)},
                     {"GROUP", static_cast<double>(gw)},
                     {"DW", static_cast<double>(dw)},
                     {"OCT", static_cast<double>(dw / 8)},
                     {"WG", static_cast<double>(pv_wg)},
                     {"WSN", static_cast<double>(wsn)}}}};
    add_paging(vk);
    if (paged && tune_.attn_paged_block_rows == 0) vk.add("BLOCK_ROWS", 0.0);
    if (!v_f16) vk.add("V_F16", 0.0);
    if (sub > 1) vk.add("SUB", static_cast<double>(sub));
    PipelineKey ck{"attention_split_combine", "rrrrwu", {{{"WG", 256.0}, {"HD", static_cast<double>(hd)}}}};
    add_paging(ck);

    for (int64_t c0 = 0; c0 < n_tok; c0 += chunk) {
        const int64_t  tc    = std::min(chunk, n_tok - c0);
        const int64_t  n_max = max_position(c0, tc) + 1;
        const int64_t  ld    = (n_max + 3) / 4 * 4;
        const uint32_t n_w   = ceil_div(n_max, tp);
        const uint32_t col_pos0 = paged ? 0 : u32(pos0 + c0);
        struct {
            uint32_t n_embd_kv, q_offset, q_stride, k_offset, ld, wmax_ld, n_head_kv, pos0, max_pages, cols_offset,
                pages_offset;
            float scale;
        } sp{u32(kv.k.ne[0]), gpu_offset(q, 4) + u32(c0 * q.ne[0]), u32(q.ne[0]), gpu_offset(kv.k, k_el), u32(ld), n_w,
             u32(n_kv), col_pos0, max_pages, cols_at + u32(4 * c0), pages_at, s.scale};
        const WGPUBuffer sb[] = {gpu_buffer(q), gpu_buffer(kv.k), paged ? cols : gpu_buffer(kv.k),
                                 paged ? pages : gpu_buffer(kv.k), attn_scores_->get(), attn_wmax_->get()};
        step_->dispatch(sk, sb, &sp, sizeof sp, n_w, u32(n_kv), u32(tc));

        struct {
            uint32_t n_embd_kv, v_offset, ld, n_head_kv, pos0, max_pages, cols_offset, pages_offset, nsb_ld;
        } vp{u32(kv.v.ne[0]), gpu_offset(kv.v, v_el), u32(ld), u32(n_kv * sub), col_pos0, max_pages, cols_at + u32(4 * c0),
             pages_at, u32(nsb_ld)};
        const WGPUBuffer vb[] = {attn_scores_->get(), gpu_buffer(kv.v), cols, pages, attn_super_->get(),
                                 attn_sml_->get()};
        step_->dispatch(vk, vb, &vp, sizeof vp, u32(hd / dw) * ceil_div(n_max, cpu::k_pos_super),
                        u32(n_kv * sub), u32(tc));

        struct {
            uint32_t n_head, nsb_ld, pos0, max_pages, cols_offset, pages_offset, out_offset, out_stride;
        } cp{u32(n_kv * group), u32(nsb_ld), col_pos0, max_pages, cols_at + u32(4 * c0), pages_at,
             gpu_offset(out, 4) + u32(c0 * out.ne[0]), u32(out.ne[0])};
        const WGPUBuffer cb[] = {attn_super_->get(), attn_sml_->get(), paged ? cols : attn_super_->get(),
                                 paged ? pages : attn_super_->get(), gpu_buffer(out)};
        step_->dispatch(ck, cb, &cp, sizeof cp, ceil_div(n_kv * group * hd, 256), u32(tc));
    }
    return true;
}

}  // namespace tern
