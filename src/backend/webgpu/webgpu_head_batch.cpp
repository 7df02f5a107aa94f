// The greedy LM head of a batched decoding step (issue 53): output_head with ids over T > 1 columns.
// The multi-column exact head (lm_head.wgsl) reads the F16 table once per 4 columns and sums every
// logit in double-float: at 64 columns that is 16 passes over 2B4T's 657 MB head. Here the int8
// copy (half the bytes) is streamed once for all columns with integer dot4s, and only each
// column's candidates (the rows whose bound reaches the best lower bound seen) are recomputed
// exactly, as the single-column greedy head does (lm_head_i8_argmax.wgsl's exact tail). Dispatches:
//   rms_norm          (T x ...)           x -> h, the exact head's input (its bits)
//   head_grid_batch   (T x 256)           each column's 16-bit grid and norms; zeroes its threshold
//   lm_head_i8_batch  (n_vocab / RW x T / CW, 256 each)   values, bounds, thresholds, exact rows,
//                                         each workgroup's winner per column
//   argmax_final      (T x 256)           the columns' ids, ties to the lowest index
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"

#include <algorithm>

namespace tern {
namespace {

constexpr uint32_t k_cap = 32;  // lm_head_i8_batch.wgsl CAP: listed rows per column and workgroup

// lm_head_i8_batch.wgsl's TC (invocations along the columns; 4 columns each): the fewest that
// cover the columns, 4 to 16 (64 columns per workgroup at most; more go to further workgroups).
uint32_t batch_head_tc(int64_t n_cols) {
    uint32_t tc = 4;
    while (tc < 16 && 4 * static_cast<int64_t>(tc) < n_cols) tc *= 2;
    return tc;
}

// The kernel's workgroup memory in bytes (its SMEM and fixed arrays, the reductions' and best_index's).
uint64_t batch_head_smem(int64_t k, uint32_t tc) {
    const uint64_t tr = 256 / tc, cw = 4ull * tc, kw = 16;
    const uint64_t vec4s = std::max(kw * (tr + 2 * tc), static_cast<uint64_t>(k) / 4 + (cw * k_cap + 3) / 4);
    return vec4s * 16 + 4 * 64 * 4 + 256 * (8 + 4 + 4) + 256 * 8;
}

}  // namespace

bool WebGpuBackend::head_ids_batch(const Tensor & ids, const GpuTable & e, const LinearInput & in,
                                   bool round_input_f16) {
    const int64_t n_cols = in.x.ne[1];
    const int64_t k      = e.n_cols;
    const uint32_t tc    = batch_head_tc(n_cols);
    if (n_cols < 2 || in.norm == nullptr || in.h.buffer == nullptr || in.h.ne[1] != n_cols || k % 16 != 0 ||
        k > 4096 || batch_head_smem(k, tc) > ctx_.limits().maxComputeWorkgroupStorageSize ||
        !ensure_head_q8(e)) {
        return false;
    }
    TERN_ASSERT(ids.ne[0] == n_cols && in.h.ne[0] == k, "head_ids_batch shapes");
    rms_norm(in.h, in.x, *in.norm, in.eps);

    const uint32_t n_vocab = u32(e.n_rows);
    const uint32_t t       = u32(n_cols);
    const uint32_t rw = 4 * (256 / tc), cw = 4 * tc;
    const uint32_t n_row_groups = ceil_div(n_vocab, rw);
    const WGPUBuffer grid = grown(batch_head_grid_, (static_cast<size_t>(t) * (k / 2) + 4 * size_t{t}) * 4,
                                  "batch head grid");
    const WGPUBuffer thr     = grown(batch_head_thr_, size_t{t} * 4, "batch head thresholds");
    const WGPUBuffer partial = grown(batch_head_partial_, size_t{t} * n_row_groups * 8, "batch head winners");

    struct {
        uint32_t n_cols, h_offset, h_stride, round_input;
    } pg{t, gpu_offset(in.h, 4), u32(k), round_input_f16 ? 1u : 0u};
    const PipelineKey key_grid{"head_grid_batch", "rwwu", {{{"K", static_cast<double>(k)}, {"WG", 256}}}};
    const WGPUBuffer  bufs_grid[] = {gpu_buffer(in.h), grid, thr};
    step_->dispatch(key_grid, bufs_grid, &pg, sizeof pg, t);

    struct {
        uint32_t n_vocab, n_cols, h_offset, h_stride, round_input, n_row_groups;
    } ph{n_vocab, t, gpu_offset(in.h, 4), u32(k), round_input_f16 ? 1u : 0u, n_row_groups};
    const PipelineKey key_head{dot4_native_ ? "lm_head_i8_batch" : "lm_head_i8_batch_nodp4",
                               "rrrrrwwu",
                               {{{"K", static_cast<double>(k)}, {"TC", static_cast<double>(tc)}}}};
    const WGPUBuffer  bufs_head[] = {e.q8->get(),    e.q8_info->get(), grid, gpu_buffer(in.h), e.buffer->get(),
                                     thr,            partial};
    step_->dispatch(key_head, bufs_head, &ph, sizeof ph, n_row_groups, ceil_div(t, cw));

    struct {
        uint32_t n_chunks, ids_offset;
    } pf{n_row_groups, gpu_offset(ids, 4)};
    const PipelineKey key_final{"argmax_final", "rwu", {{{"WG", 256}}}};
    const WGPUBuffer  bufs_final[] = {partial, gpu_buffer(ids)};
    step_->dispatch(key_final, bufs_final, &pf, sizeof pf, t);
    head_partials_ = {};
    ++batch_heads_recorded_;
    return true;
}

}  // namespace tern
