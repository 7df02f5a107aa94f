// The greedy LM head of a batched decoding step (issue 53): output_head with ids over T > 1 columns.
// The multi-column exact head (lm_head.wgsl) reads the F16 table once per 4 columns and sums every
// logit in double-float: at 64 columns that is 16 passes over 2B4T's 657 MB head (60 ms of a 70 ms
// step on an H200). Here the int8 copy (half the bytes) is streamed once for all columns with
// integer dot4s, and only each column's candidates (the rows whose bound reaches the column's best
// lower bound) are recomputed exactly, as the single-column greedy head does
// (lm_head_i8_argmax.wgsl + argmax_exact.wgsl), so each id is that head's. Dispatches:
//   rms_norm           x -> h, the exact head's input (its bits)
//   head_grid_batch    (T x 256)  each column's 16-bit grid and norms; zeroes its threshold slot
//   lm_head_i8_batch   (n_vocab / RW x T / CW, 256 each)  (f, B) of every row and column, and
//                      each column's largest lower bound f - B; on the tensor cores where the
//                      device has them lm_head_i8_mma (n_vocab / 64 x 1, 256 each at 64 columns),
//                      the same bits
//   head_exact_batch   (n_vocab / 4096 x T, 256 each)  the rows with f + B >= that bound, exactly;
//                      each workgroup's winner
//   argmax_final       (T x 256)  the columns' ids, ties to the lowest index
// A top-k head (HeadOutput::top_k, a sampler whose chain starts with top-k) is the same with the
// k-th largest of the workgroups' lower bounds as each column's threshold (head_topk_batch, T x
// 256) instead of the largest, and head_exact_batch writing the listed rows' exact logits and -inf
// for the rest, which cannot be among the k largest (the single-column top-k head's contract);
// head_exact_batch also lists those rows per column (HeadOutput::top_rows, the counts zeroed by
// head_topk_batch), so that a sampler reads a few rows per column instead of n_vocab logits.
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"
#include "core/log.h"

#include <algorithm>

namespace tern {
namespace {

constexpr uint32_t k_exact_chunk = 4096;  // head_exact_batch.wgsl CHUNK: rows per workgroup
// Columns per head_batch call (head_batches): 64 is lm_head_i8_batch's widest workgroup, and 2B4T's
// (f, B) scratch at 64 columns is 66 MB.
constexpr int64_t k_head_batch_columns = 64;

// lm_head_i8_batch.wgsl's TC (invocations along the columns; 4 columns each): the fewest that
// cover the columns, 4 to 16 (64 columns per workgroup at most; more go to further workgroups).
uint32_t batch_head_tc(int64_t n_cols) {
    uint32_t tc = 4;
    while (tc < 16 && 4 * static_cast<int64_t>(tc) < n_cols) tc *= 2;
    return tc;
}

}  // namespace

// lm_head_i8_mma.wgsl's SGM x SGN for n_cols columns of K elements, or none (lm_head_i8_batch.wgsl):
// the tensor cores where the device has exact int8 subgroup matrices (mma_unit), head_mma_rows is
// not 0, K is a multiple of 64, the workgroup fits and the kernel builds (once it has not, never
// again: a warning, then dot4); SGN the fewest subgroups of 32 virtual columns (two per column: a
// and b) that cover the columns.
std::optional<WebGpuBackend::MmaTiling> WebGpuBackend::head_mma_tiling(int64_t n_cols, int64_t k) {
    const bool     forced = head_mma_override_.sgm != 0;
    const uint32_t sgm    = forced ? head_mma_override_.sgm : tune_.head_mma_rows;
    if (sgm == 0 || k % 64 != 0 || (!forced && (head_mma_broken_ || mma_unit() == 0))) return std::nullopt;
    const uint32_t sgn  = static_cast<uint32_t>(std::clamp<int64_t>((2 * n_cols + 31) / 32, 1, 4));
    const uint32_t bm   = 32 * sgm, bn = 32 * sgn, wg = 32 * sgm * sgn;
    const uint64_t smem = uint64_t{std::max(20 * (bm + bn), 512 * sgm * sgn)} * 4 + 64 * 4;
    const auto &   lim  = ctx_.limits();
    if (smem > lim.maxComputeWorkgroupStorageSize || wg > lim.maxComputeInvocationsPerWorkgroup ||
        wg > lim.maxComputeWorkgroupSizeX || ceil_div(4 * (bm + bn), wg) > 8) {
        return std::nullopt;
    }
    const MmaTiling t{sgm, sgn};
    if (!forced) {
        try {
            pipelines_.pipeline(head_mma_key(k, t));
        } catch (const Error & e) {
            TERN_LOG_WARN("webgpu: the tensor-core LM head does not build here (%s); batched heads use dot4", e.what());
            head_mma_broken_ = true;
            return std::nullopt;
        }
    }
    return t;
}

PipelineKey WebGpuBackend::head_mma_key(int64_t k, const MmaTiling & t) {
    const bool forced = head_mma_override_.sgm != 0;
    return PipelineKey{forced ? head_mma_override_.shader : "lm_head_i8_mma",
                       "rrrwwwu",
                       {{{"K", static_cast<double>(k)},
                         {"SGM", static_cast<double>(t.sgm)},
                         {"SGN", static_cast<double>(t.sgn)},
                         {"MU", static_cast<double>(forced ? head_mma_override_.unit : mma_unit())}}}};
}

bool WebGpuBackend::head_batch(const HeadOutput & out, const GpuTable & e, const LinearInput & in,
                               bool round_input_f16) {
    const int64_t n_cols = in.x.ne[1];
    const int64_t k      = e.n_cols;
    const bool    top_k  = out.ids.buffer == nullptr;
    // (head_exact_batch.wgsl stages h: K f32, its list and reductions beside it.)
    // (TEAMS: the teams' pairs, 256 x 8 bytes, more.)
    const uint64_t exact_smem = static_cast<uint64_t>(k) * 4 + 4096 + 256 * 16 + 256 * 8;
    // (An F16 table only: head_exact_batch.wgsl reads F16 rows; a Q-block head takes the exact head.)
    if (!e.f16 || n_cols < 2 || in.norm == nullptr || in.h.buffer == nullptr || in.h.ne[1] != n_cols || k % 16 != 0 ||
        k > 4096 || (top_k && (out.top_k <= 0 || out.top_k >= e.n_rows)) ||
        exact_smem > ctx_.limits().maxComputeWorkgroupStorageSize || !ensure_head_q8(e)) {
        return false;
    }
    TERN_ASSERT((top_k || out.ids.ne[0] == n_cols) && in.h.ne[0] == k && out.logits.ne[1] == n_cols,
                "head_batch shapes");
    rms_norm(in.h, in.x, *in.norm, in.eps);

    const uint32_t   n_vocab  = u32(e.n_rows);
    const uint32_t   t        = u32(n_cols);
    const uint32_t   tc       = batch_head_tc(n_cols);
    const uint32_t   cw       = 4 * tc;
    const auto       mma      = head_mma_tiling(n_cols, k);
    const uint32_t   rw       = mma ? 32 * mma->sgm : 4 * (256 / tc);  // rows per workgroup of the int8 head
    const uint32_t   n_groups = ceil_div(n_vocab, rw);
    const uint32_t   n_chunks = ceil_div(n_vocab, k_exact_chunk);
    const WGPUBuffer grid     = grown(batch_head_grid_, (size_t{t} * static_cast<size_t>(k / 2) + 4 * size_t{t}) * 4,
                                      "batch head grid");
    const WGPUBuffer thr      = grown(batch_head_thr_, size_t{t} * 4, "batch head thresholds");
    const WGPUBuffer fb       = grown(batch_head_fb_, size_t{t} * n_vocab * 8, "batch head values and bounds");
    const WGPUBuffer wmax     = grown(batch_head_wmax_, size_t{t} * n_groups * 4, "batch head block bounds");
    const WGPUBuffer partial  = grown(batch_head_partial_, size_t{t} * n_chunks * 8, "batch head winners");
    const uint32_t   h_offset = gpu_offset(in.h, 4);
    const double     round_in = round_input_f16 ? 1.0 : 0.0;  // ROUND_IN: h rounded to f16 first

    struct {
        uint32_t n_cols, h_offset, h_stride;
    } pg{t, h_offset, u32(k)};
    const PipelineKey key_grid{"head_grid_batch",
                               "rwwu",
                               {{{"K", static_cast<double>(k)}, {"WG", 256}, {"ROUND_IN", round_in}}}};
    const WGPUBuffer  bufs_grid[] = {gpu_buffer(in.h), grid, thr};
    step_->dispatch(key_grid, bufs_grid, &pg, sizeof pg, t);

    struct {
        uint32_t n_vocab, n_cols, n_row_groups;
    } ph{n_vocab, t, n_groups};
    const WGPUBuffer bufs_head[] = {e.q8->get(), e.q8_info->get(), grid, fb, thr, wmax};
    if (mma) {
        const PipelineKey key_mma = head_mma_key(k, *mma);
        step_->dispatch(key_mma, bufs_head, &ph, sizeof ph, n_groups, ceil_div(2 * t, 32 * mma->sgn));
    } else {
        const PipelineKey key_head{dot4_native_ ? "lm_head_i8_batch" : "lm_head_i8_batch_nodp4",
                                   "rrrwwwu",
                                   {{{"K", static_cast<double>(k)}, {"TC", static_cast<double>(tc)}}}};
        step_->dispatch(key_head, bufs_head, &ph, sizeof ph, n_groups, ceil_div(t, cw));
    }

    // The top-k lists (HeadOutput::top_rows): the caller's, or counts alone in a stand-in.
    const bool       listed      = top_k && out.top_rows.buffer != nullptr;
    const uint32_t   list_stride = listed ? u32(out.top_rows_stride) : 2u;
    const WGPUBuffer list        = listed ? gpu_buffer(out.top_rows)
                                          : grown(batch_head_list_, size_t{t} * 2 * 4, "batch head list counts");
    const uint32_t   list_offset = listed ? gpu_offset(out.top_rows, 4) : 0u;
    TERN_ASSERT(!listed || (out.top_rows_stride >= 2 && out.top_rows.type == DType::i32 &&
                            out.top_rows.ne[0] == out.top_rows_stride && out.top_rows.ne[1] == n_cols),
                "head_batch top_rows shapes");
    if (top_k) {  // the threshold slots become the k-th largest block bound of each column
        struct {
            uint32_t n_row_groups, k, list_offset, list_stride;
        } pt{n_groups, u32(out.top_k), list_offset, list_stride};
        const PipelineKey key_topk{"head_topk_batch", "rwwu", {{{"WG", 256}}}};
        const WGPUBuffer  bufs_topk[] = {wmax, thr, list};
        step_->dispatch(key_topk, bufs_topk, &pt, sizeof pt, t);
    }

    struct {
        uint32_t n_vocab, h_offset, h_stride, n_chunks, out_offset, out_stride, list_offset, list_stride;
    } px{n_vocab, h_offset, u32(k), n_chunks, gpu_offset(out.logits, 4), u32(out.logits.ne[0]), list_offset,
         list_stride};
    const auto &      a       = ctx_.adapter();
    const bool        team_sg = pipelines_.subgroup_variants() && a.subgroup_min == 32 && a.subgroup_max == 32;
    const PipelineKey key_exact{"head_exact_batch",
                                "rrrrwwwu",
                                {{{"K", static_cast<double>(k)},
                                  {"CHUNK", static_cast<double>(k_exact_chunk)},
                                  {"TOP_K", top_k ? 1.0 : 0.0},
                                  {"TEAMS", tune_.head_batch_teams == 2 || (tune_.head_batch_teams == 1 && top_k) ? 1.0 : 0.0},
                                  {"TEAM_SG", team_sg ? 1.0 : 0.0},
                                  {"ROUND_IN", round_in}}}};
    const WGPUBuffer  bufs_exact[] = {fb, thr, gpu_buffer(in.h), e.buffer->get(), partial, gpu_buffer(out.logits), list};
    step_->dispatch(key_exact, bufs_exact, &px, sizeof px, n_chunks, t);
    head_partials_ = {};
    ++batch_heads_recorded_;
    if (top_k) {
        if (listed && out.rows_listed != nullptr) *out.rows_listed = true;
        return true;
    }

    struct {
        uint32_t n_chunks, ids_offset;
    } pf{n_chunks, gpu_offset(out.ids, 4)};
    const PipelineKey key_final{"argmax_final", "rwu", {{{"WG", 256}}}};
    const WGPUBuffer  bufs_final[] = {partial, gpu_buffer(out.ids)};
    step_->dispatch(key_final, bufs_final, &pf, sizeof pf, t);
    return true;
}

bool WebGpuBackend::head_batches(const HeadOutput & out, const GpuTable & e, const LinearInput & in,
                                 bool round_input_f16) {
    const int64_t n_cols = in.x.ne[1];
    if (n_cols <= k_head_batch_columns) return head_batch(out, e, in, round_input_f16);
    // Groups of k_head_batch_columns (the last one at least 2 columns: head_batch's minimum).
    for (int64_t c0 = 0; c0 < n_cols;) {
        int64_t n = std::min(k_head_batch_columns, n_cols - c0);
        if (n_cols - c0 - n == 1) --n;
        HeadOutput  o = out;
        LinearInput i = in;
        o.logits      = out.logits.columns(c0, n);
        if (out.ids.buffer != nullptr) {
            o.ids.offset = out.ids.offset + static_cast<size_t>(c0) * 4;
            o.ids.ne[0]  = n;
        }
        if (out.top_rows.buffer != nullptr) o.top_rows = out.top_rows.columns(c0, n);
        i.x = in.x.columns(c0, n);
        i.h = in.h.columns(c0, n);
        if (!head_batch(o, e, i, round_input_f16)) {
            TERN_ASSERT(c0 == 0, "head_batch applies to some column groups of a head and not to others");
            return false;
        }
        c0 += n;
    }
    return true;
}

}  // namespace tern
