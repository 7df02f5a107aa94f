// Split attention ("flash-decoding" within the CPU's summation orders) for rows of at most one
// superblock (512 positions: their softmax is cpu::attention_row's single pass; longer rows are in
// issue 52's block order, which super_attention computes, webgpu_attention_paged.cpp): one query per
// column, each column's positions spread over many workgroups, in three dispatches
// (shaders/attention_split_*.wgsl):
//   1. attention_split_scores: scale q·k, a workgroup per 32 positions (head_dim 128), KV head and
//      column, each thread one block of 16 dimensions of one position for the G query heads; and
//      each workgroup's largest score per query head (super_attention dispatches it too);
//   2. attention_split_softmax: the row's max m (from those maxima: max is exact in any order),
//      e = exp(s - m) in place, and the sum of each block of 32 positions, a workgroup per 64
//      positions (one long query: WebGpuTuning::attn_split_chunk; a paged batch 1024 / G, at most
//      512), KV head and column;
//   3. attention_split_pv: the row's sum l from the block sums in order, its probabilities and P·V,
//      a workgroup per 8 output dimensions, KV head (or query head, where that is needed to fill
//      the GPU) and column: no partial sums leave a workgroup, so nothing is combined afterwards;
//   or, for one query over a contiguous f16 cache (WebGpuTuning::attn_split_tiles) and a paged
//      batch whose longest context reaches WebGpuTuning::attn_paged_tiles positions, 3'.
//      attention_split_pvt: the same normalizer and products by tiles of the row x 16 dimensions of
//      a KV head, V and the probabilities staged in workgroup memory and summed from there for all
//      G query heads (each V row read once; every loop of a fixed trip count, so that a thread's
//      loads are in flight at once), then attention_split_combine: those sums copied to the output
//      (or, deferred, read by the o-projection's prologue instead, attn_combine_fused).
// The same numerics as attention.wgsl and the CPU, bit for bit: the max is an exact reduction, and
// every sum is taken by one thread or in a fixed tree inside one workgroup in the reference's order
// (cpu::dot_blocked16, cpu::sum_positions), never across workgroups in another order. The three
// kernels split along positions where the reductions allow it (scores, exps, block sums) and along
// output dimensions where they do not (the normalizer and P·V need every position).
//
// Two callers: one query of one sequence over a contiguous cache (attention() from
// WebGpuTuning::attn_long_positions on, up to 512 positions), and a paged batch whose columns all
// have at most 512 positions where super_attention does not take it (attention_paged(): many
// sequences, one or several columns each, positions read through the page tables: lib/kv_pages.wgsl).
#include "backend/webgpu/webgpu_backend_impl.h"

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

#include <algorithm>
#include <bit>
#include <numeric>

namespace tern {
namespace {

// Sizes of the three kernels for one shape (wg threads per workgroup).
struct SplitTiling {
    uint32_t wg = 256;
    uint32_t ts = 8;     // scores: threads per position (blocks of 16 dimensions, rounded up to a power of two)
    uint32_t tp = 32;    // scores: positions per workgroup
    uint32_t ch = 256;   // softmax: positions per workgroup
    uint32_t dg = 8;     // P·V: output dimensions per workgroup
    uint32_t rb = 64;    // P·V: threads per query head (one per block of 32 positions, at least 16)
    uint32_t pv_wg = 256;  // P·V: threads per workgroup
    uint32_t jg = 4;     // P·V: query heads per workgroup (dividing G)
};

}  // namespace

bool WebGpuBackend::split_attention(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & s,
                                    const KvBatch * batch, int64_t pos0) {
    const int64_t hd    = s.head_dim;
    const int64_t n_kv  = s.n_head_kv;
    const int64_t group = s.n_head / n_kv;
    const int64_t n_tok = q.ne[1];
    const bool    k_f16 = kv.k.type == DType::f16;
    const bool    v_f16 = kv.v.type == DType::f16;
    const auto &  lim   = ctx_.limits();
    if (group > 16 || hd % 4 != 0 || hd > 256 || n_tok < 1) return false;
    // One query (columns of a contiguous cache) past one superblock: issue 52's block order by
    // super_attention (webgpu_attention_paged.cpp: attention_block_pv + _combine, or
    // attention_split_scores + attention_paged_super + attention_split_combine).
    if (batch == nullptr && pos0 + n_tok > cpu::k_pos_super && super_attention(out, q, kv, s, nullptr, pos0)) {
        return true;
    }

    SplitTiling st;
    st.ts = floor_pow2(static_cast<uint64_t>(2 * ((hd + 15) / 16) - 1));
    st.tp = st.wg / st.ts;
    // Softmax positions per workgroup: up to 4 scores per thread (1024 / G); one long query
    // takes attn_split_chunk (64: 5 x 64 = 320 workgroups for 2B4T at 4,096 positions instead of
    // 80; H100 tg64 @ d4096 445.3-446.4 tokens/s against 439.6-441.1 with 256, 444.2-444.9 with 128).
    // (a power of two from 32 to 512)
    const uint32_t ch_max = static_cast<uint32_t>(std::bit_floor(static_cast<uint64_t>(
        std::clamp<int64_t>(1024 / group, 32, cpu::k_pos_super))));
    st.ch = batch == nullptr && tune_.attn_split_chunk != 0 ? std::min(tune_.attn_split_chunk, ch_max) : ch_max;
    TERN_ASSERT(group * st.ch <= 4 * st.wg, "attention_split_softmax holds 4 scores per thread");
    st.dg = std::clamp<uint32_t>(tune_.attn_split_dims, 2, 16);
    while (st.dg > 2 && (hd % st.dg != 0 || st.dg % 2 != 0)) st.dg /= 2;
    // The largest position of the columns [c0, c0 + n).
    auto max_position = [&](int64_t c0, int64_t n) {
        if (batch == nullptr) return pos0 + c0 + n - 1;
        int64_t m = 0;
        for (const KvSeq & sq : batch->seqs) {
            const int64_t a = std::max(sq.first, c0), b = std::min(sq.first + sq.n, c0 + n);
            if (a < b) m = std::max(m, sq.pos0 + (b - 1 - sq.first));
        }
        return m;
    };
    // These kernels take rows of at most one superblock (their softmax is one pass: rows past 512
    // positions are in issue 52's block order): a longer row that super_attention did not take (head_dim
    // not a multiple of 8, buffer limits) goes to the prompt kernels (one query: webgpu_ops.cpp) or
    // fails (a paged batch). Every kernel below relies on it: one superblock, 16 blocks of 32 at most.
    const int64_t n_longest = max_position(0, n_tok) + 1;
    if (n_longest > cpu::k_pos_super) return false;
    // P·V's query heads per workgroup: all G of a KV head (each V row read once), or where that
    // leaves the GPU short of workgroups (one column: 80 for 2B4T) the largest divisor of G that
    // gives 2 per compute unit (1 for 2B4T: 320 workgroups instead of 80).
    const int64_t pv_groups = n_tok * n_kv * (hd / st.dg);
    if (tune_.attn_split_heads != 0) {
        st.jg = static_cast<uint32_t>(std::gcd<int64_t>(group, tune_.attn_split_heads));
    } else {
        st.jg = 1;
        for (int64_t jg = group; jg >= 1; --jg) {
            if (group % jg == 0 && pv_groups * (group / jg) >= 2 * int64_t{tune_.compute_units}) {
                st.jg = static_cast<uint32_t>(jg);
                break;
            }
        }
    }
    // P·V's threads: 256, or for a paged batch (a decode step of many sequences: thousands of
    // workgroups, each over at most 16 blocks) the fewest, down to 64, that keep 16 per query head
    // (64 with G = 4), so that more workgroups are resident at once: the same sums in the same order.
    st.pv_wg = tune_.attn_split_pv_wg != 0 ? tune_.attn_split_pv_wg : st.wg;
    if (tune_.attn_split_pv_wg == 0 && batch != nullptr) {
        while (st.pv_wg > 64 && (st.pv_wg / 2) / st.jg >= 16) st.pv_wg /= 2;
    }
    st.rb = st.pv_wg / st.jg / 16 * 16;
    const uint64_t g       = static_cast<uint64_t>(group);
    const uint64_t jg      = st.jg;
    const uint64_t sc_mem  = g * hd * 4 + g * st.wg * 4 + g * st.tp * 4 + 16;
    const uint64_t sm_mem  = g * st.ch * 4 + 64 + uint64_t{st.wg} * 8 + 16;
    const uint64_t pv_mem  = 64 + jg * st.rb * st.dg * 4 + 16;
    const uint64_t max_bind = std::min<uint64_t>(lim.maxBufferSize, lim.maxStorageBufferBindingSize);
    if (std::max({sc_mem, sm_mem, pv_mem}) > lim.maxComputeWorkgroupStorageSize || st.ts > st.wg || st.rb < 16 ||
        hd % st.dg != 0 || st.pv_wg > lim.maxComputeInvocationsPerWorkgroup) {
        return false;
    }

    // Columns per pass: the scores of a pass ([T][n_kv][G][ld] f32) within the budget.
    const int64_t n_all    = n_longest;
    const int64_t ld_all   = (n_all + 3) / 4 * 4;
    const int64_t col_bytes = n_kv * group * ld_all * 4;
    const int64_t budget   = static_cast<int64_t>(std::min<uint64_t>(tune_.attn_scratch_bytes, max_bind));
    const int64_t chunk    = std::clamp<int64_t>(budget / col_bytes, 1,
                                                 std::min<int64_t>(n_tok, lim.maxComputeWorkgroupsPerDimension));
    if (col_bytes > static_cast<int64_t>(max_bind) ||
        ceil_div(n_all, st.tp) > lim.maxComputeWorkgroupsPerDimension) {
        return false;
    }
    const int64_t tc_max = std::min(chunk, n_tok);
    grown(attn_scores_, static_cast<size_t>(tc_max * col_bytes), "attention scores");
    grown(attn_wmax_, static_cast<size_t>(tc_max * n_kv * group * ceil_div(n_all, st.tp)) * 4, "attention maxima");
    grown(attn_bsum_, static_cast<size_t>(tc_max * n_kv * group * ceil_div(n_all, cpu::k_pos_block)) * 4,
          "attention block sums");
    // P·V by tiles (attention_split_pvt.wgsl + attention_split_combine.wgsl) where its workgroup
    // memory fits: [T][n_head][hd] f32 sums.
    constexpr uint32_t k_tile_dims = 16;
    const uint64_t     jv          = (static_cast<uint64_t>(group) + 3) / 4;
    const uint64_t     pvt_mem     = 512 * (k_tile_dims / 2 + 1) * 4 + 512 * jv * 16 + 256 * 4 + 16 * 4 + 16;
    // (a paged batch too, from attn_paged_tiles positions: its combine is dispatched, never fused)
    const bool         by_tiles    = (batch == nullptr ? tune_.attn_split_tiles != 0 : tune_.attn_paged_tiles != 0) &&
                              v_f16 &&
                              hd % k_tile_dims == 0 && pvt_mem <= lim.maxComputeWorkgroupStorageSize &&
                              cpu::k_pos_super == 512 && cpu::k_pos_block == 32 &&
                              uint64_t(hd / k_tile_dims) <= lim.maxComputeWorkgroupsPerDimension &&
                              gpu_offset(kv.v, 2) % 8 == 0 && kv.v.ne[0] % 8 == 0;  // (vec4 V loads)
    if (by_tiles) {
        grown(attn_super_, static_cast<size_t>(tc_max * n_kv * group * hd) * 4, "attention P·V sums");
    }

    const size_t k_el = k_f16 ? 2 : 4, v_el = v_f16 ? 2 : 4;
    // The scores kernel's K blocks by vec4 loads: every block 16-byte aligned (buffers are sized in 16s).
    const int64_t k_per_vec = 16 / static_cast<int64_t>(k_el);
    const bool    k_vec     = gpu_offset(kv.k, k_el) % k_per_vec == 0 && kv.k.ne[0] % k_per_vec == 0 && hd % k_per_vec == 0;
    const bool   paged = batch != nullptr;
    // Without pages, `cols` and `pages` bind a buffer the kernel reads anyway (nothing reads them).
    const uint32_t cols_at  = paged ? gpu_offset(batch->columns, 4) : 0;
    const uint32_t pages_at = paged ? gpu_offset(batch->page_table, 4) : 0;
    const uint32_t max_pages = paged ? u32(batch->max_pages) : 0;
    auto add_paging = [&](PipelineKey & key) {
        if (!paged) return;
        key.add("PAGED", 1.0);
        key.add("PAGE", static_cast<double>(batch->page_size));
    };
    // (the P·V kernels: one page look-up per block of 32 positions, or one per position)
    auto add_block_rows = [&](PipelineKey & key) {
        if (paged && tune_.attn_paged_block_rows == 0) key.add("BLOCK_ROWS", 0.0);
    };

    for (int64_t c0 = 0; c0 < n_tok; c0 += chunk) {
        const int64_t tc      = std::min(chunk, n_tok - c0);
        const int64_t n_max   = max_position(c0, tc) + 1;
        const int64_t ld      = (n_max + 3) / 4 * 4;
        const uint32_t n_w    = ceil_div(n_max, st.tp);
        const uint32_t n_b    = ceil_div(n_max, cpu::k_pos_block);
        const WGPUBuffer cols_k  = paged ? gpu_buffer(batch->columns) : gpu_buffer(kv.k);
        const WGPUBuffer pages_k = paged ? gpu_buffer(batch->page_table) : gpu_buffer(kv.k);

        struct {
            uint32_t n_embd_kv, q_offset, q_stride, k_offset, ld, wmax_ld, n_head_kv, pos0, max_pages, cols_offset,
                pages_offset;
            float scale;
        } sp{u32(kv.k.ne[0]), gpu_offset(q, 4) + u32(c0 * q.ne[0]), u32(q.ne[0]), gpu_offset(kv.k, k_el), u32(ld), n_w,
             u32(n_kv), u32(pos0 + c0), max_pages, cols_at + u32(4 * c0), pages_at, s.scale};
        PipelineKey sk{"attention_split_scores",
                       "rrrrwwu",
                       {{{"WG", static_cast<double>(st.wg)},
                         {"S", static_cast<double>(st.ts)},
                         {"HD", static_cast<double>(hd)},
                         {"GROUP", static_cast<double>(group)},
                         {"K_F16", k_f16 ? 1.0 : 0.0},
                         {"K_VEC", k_vec ? 1.0 : 0.0}}}};
        add_paging(sk);
        const WGPUBuffer sb[] = {gpu_buffer(q), gpu_buffer(kv.k), cols_k, pages_k, attn_scores_->get(),
                                 attn_wmax_->get()};
        step_->dispatch(sk, sb, &sp, sizeof sp, n_w, u32(n_kv), u32(tc));

        struct {
            uint32_t ld, wmax_ld, bsum_ld, n_head_kv, tp, pos0, max_pages, cols_offset, pages_offset;
        } mp{u32(ld), n_w, n_b, u32(n_kv), st.tp, u32(pos0 + c0), max_pages, cols_at + u32(4 * c0), pages_at};
        PipelineKey mk{"attention_split_softmax",
                       "rrrwwu",
                       {{{"WG", static_cast<double>(st.wg)},
                         {"CH", static_cast<double>(st.ch)},
                         {"GROUP", static_cast<double>(group)},
                         {"GP2", static_cast<double>(std::bit_ceil(static_cast<uint64_t>(group)))}}}};
        add_paging(mk);
        const WGPUBuffer cols_m  = paged ? gpu_buffer(batch->columns) : attn_wmax_->get();
        const WGPUBuffer pages_m = paged ? gpu_buffer(batch->page_table) : attn_wmax_->get();
        const WGPUBuffer mb[]    = {cols_m, pages_m, attn_wmax_->get(), attn_scores_->get(), attn_bsum_->get()};
        step_->dispatch(mk, mb, &mp, sizeof mp, ceil_div(n_max, st.ch), u32(n_kv), u32(tc));

        struct {
            uint32_t n_embd_kv, v_offset, ld, bsum_ld, n_head_kv, pos0, max_pages, cols_offset, pages_offset,
                out_offset, out_stride;
        } pp{u32(kv.v.ne[0]), gpu_offset(kv.v, v_el), u32(ld), n_b, u32(n_kv), u32(pos0 + c0), max_pages,
             cols_at + u32(4 * c0), pages_at, gpu_offset(out, 4) + u32(c0 * out.ne[0]), u32(out.ne[0])};
        PipelineKey pk{"attention_split_pv",
                       "rrrrrwu",
                       {{{"WG", static_cast<double>(st.pv_wg)},
                         {"HD", static_cast<double>(hd)},
                         {"GROUP", static_cast<double>(group)},
                         {"DG", static_cast<double>(st.dg)},
                         {"V_F16", v_f16 ? 1.0 : 0.0},
                         {"RB", static_cast<double>(st.rb)},
                         {"JG", static_cast<double>(st.jg)},
                         {"PU", static_cast<double>(tune_.attn_split_unroll)}}}};
        // (a position's V words by vec4 loads: every row's slice of DG halves 16-byte aligned)
        // (H200, 64 streams d256: 9,849.5 vs 8,905.7 tok/s with 4 word loads per 8 dimensions)
        if (v_f16 && st.dg % 8 == 0 && gpu_offset(kv.v, 2) % 8 == 0 && kv.v.ne[0] % 8 == 0) {
            pk.add("V_VEC", 1.0);
        }
        add_paging(pk);
        add_block_rows(pk);
        const WGPUBuffer cols_v  = paged ? gpu_buffer(batch->columns) : gpu_buffer(kv.v);
        const WGPUBuffer pages_v = paged ? gpu_buffer(batch->page_table) : gpu_buffer(kv.v);
        const WGPUBuffer pb[] = {attn_scores_->get(), attn_bsum_->get(), gpu_buffer(kv.v), cols_v, pages_v,
                                 gpu_buffer(out)};
        // A paged batch's P·V by tiles from attn_paged_tiles positions (H200, 64 streams, tiles at
        // every length vs attention_split_pv below 512 and attention_paged_pv, since removed, from
        // there: depth 512 6,007 vs 5,128 tokens/s, depth 256 7,629 vs 7,892, depth 0 9,200 vs 10,177).
        const bool tiles = by_tiles && (!paged || n_max >= static_cast<int64_t>(tune_.attn_paged_tiles));
        PipelineKey vk{"attention_split_pvt",
                       "rrrrrwu",
                       {{{"HD", static_cast<double>(hd)},
                         {"GROUP", static_cast<double>(group)},
                         {"DS", static_cast<double>(k_tile_dims)}}}};
        add_paging(vk);
        PipelineKey ck{"attention_split_combine", "rrrrwu", {{{"WG", 256.0}, {"HD", static_cast<double>(hd)}}}};
        add_paging(ck);
        if (paged && !tiles && by_tiles && !split_tiles_warmed_.contains(pk)) {
            // The tiles this batch takes from attn_paged_tiles positions, built now: compiled when a
            // column first reaches them instead, a cold driver's compile (~0.6 s) stalled every
            // stream mid-request.
            pipelines_.pipeline(vk);
            pipelines_.pipeline(ck);
            split_tiles_warmed_.insert(pk);
        }
        if (tiles) {  // P·V by tiles, then the sums copied to `out`
            struct {
                uint32_t n_embd_kv, v_offset, ld, bsum_ld, n_head_kv, pos0, max_pages, cols_offset, pages_offset;
            } vp{u32(kv.v.ne[0]), gpu_offset(kv.v, v_el), u32(ld), n_b, u32(n_kv), u32(pos0 + c0), max_pages,
                 cols_at + u32(4 * c0), pages_at};
            const WGPUBuffer vb[] = {attn_scores_->get(), attn_bsum_->get(), gpu_buffer(kv.v), cols_v, pages_v,
                                     attn_super_->get()};
            step_->dispatch(vk, vb, &vp, sizeof vp, u32(hd / k_tile_dims), u32(n_kv), u32(tc));

            // attention_split_combine with one superblock per row (nsb_ld 1): it copies the sums and reads
            // no superblock maxima, so `sml` binds the sums again.
            struct {
                uint32_t n_head, nsb_ld, pos0, max_pages, cols_offset, pages_offset, out_offset, out_stride;
            } cp{u32(n_kv * group), 1u, u32(pos0 + c0), max_pages, cols_at + u32(4 * c0), pages_at,
                 gpu_offset(out, 4) + u32(c0 * out.ne[0]), u32(out.ne[0])};
            const WGPUBuffer cb[] = {attn_super_->get(), attn_super_->get(), paged ? cols_v : attn_super_->get(),
                                     paged ? pages_v : attn_super_->get(), gpu_buffer(out)};
            const uint32_t   groups = ceil_div(n_kv * group * hd, 256);
            if (tune_.attn_combine_fused != 0 && !paged && n_tok == 1) {
                // Deferred: an o-projection that reads `out` next takes the sums ([n_head hd], out's
                // layout) as its input instead (try_decode_bitlinear); anything else records the combine
                // first, as before.
                deferred_combine_ = {gpu_buffer(out), attn_super_->get(), uint64_t{gpu_offset(out, 4)} * 4,
                                     u32(n_kv * group * hd)};
                const std::vector<WGPUBuffer> bufs(std::begin(cb), std::end(cb));
                step_->defer(gpu_buffer(out), deferred_combine_.out_offset, [this, ck, bufs, cp, groups] {
                    step_->dispatch(ck, bufs, &cp, sizeof cp, groups, 1);
                });
                continue;
            }
            step_->dispatch(ck, cb, &cp, sizeof cp, groups, u32(tc));
            continue;
        }
        step_->dispatch(pk, pb, &pp, sizeof pp, u32(hd / st.dg), u32(n_kv * (group / st.jg)), u32(tc));
    }
    return true;
}

void WebGpuBackend::attention_paged(const Tensor & out, const Tensor & q, const KvLayer & kv, const AttentionShape & s,
                                    const KvBatch & batch) {
    const int64_t hd = s.head_dim;
    TERN_ASSERT(batch.n_tokens() == q.ne[1] && s.n_head % s.n_head_kv == 0 && out.ne[0] == s.n_head * hd &&
                    q.ne[0] == s.n_head * hd && batch.page_size > 0,
                "attention_paged shapes");
    // (every batch with a column past one superblock: the split kernels below have only the
    // superblock softmax, not issue 52's block order)
    bool long_col = false;
    for (const KvSeq & sq : batch.seqs) long_col = long_col || sq.pos0 + sq.n > cpu::k_pos_super;
    const bool deep = tune_.attn_paged_deep != 0 || long_col;
    if (deep && super_attention(out, q, kv, s, &batch, 0)) return;  // where its shape fits
    if (!split_attention(out, q, kv, s, &batch, 0)) {
        fail(ErrorKind::unsupported,
             format("webgpu: batched attention needs head_dim a multiple of 4 up to 256 (got %lld; past 512 positions "
                    "a multiple of 8), at most 16 query heads per KV head (got %lld) and scratch buffers this device "
                    "allows",
                    static_cast<long long>(hd), static_cast<long long>(s.n_head / s.n_head_kv)),
             "use --backend cpu for this model");
    }
}

}  // namespace tern
