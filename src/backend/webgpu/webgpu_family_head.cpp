// The LM head of a Q8_0 / Q4_0 / Q6_K table on WebGPU (a llama / qwen3 / phi3 file's own blocks,
// GpuTable::blocks, instead of the f32 copy, which serves the embedding rows), bit-identical to the
// CPU reference's lm_head: lm_head_q.wgsl, exact logits (double-float sums) and the argmax's first
// stage: every logit (top-p, logits wanted), and greedy / top-k decoding with family_head_i8 = 0.
// Greedy and top-k decoding otherwise stream the int8 copy of the table's f32 rows (webgpu_head.cpp,
// head_i8_pack.wgsl TABLE_F32) and recompute the rows that can win from those f32 rows: the
// reference's head multiplies dequantize_row's f32 values by h (no activation quantization), so the
// F16 head's bound holds for every Q type. (An f32 bound pass over the blocks themselves did not win
// on an H100 or before: docs/perf-log.md.)
#include "backend/webgpu/webgpu_backend_impl.h"

#include "core/error.h"

#include <algorithm>

namespace tern {
namespace {

// lm_head_q.wgsl's WTYPE (matmul.wgsl's numbering).
uint32_t head_wtype(DType t) { return t == DType::q8_0 ? 3u : t == DType::q4_0 ? 4u : 6u; }

// lm_head_q.wgsl's lanes per row: ~ chunks / 8 (each lane a few 32-value chunks), 4..32.
uint32_t head_lanes(int64_t n_cols) {
    return std::clamp<uint32_t>(floor_pow2(static_cast<uint64_t>(std::max<int64_t>(1, n_cols / 32 / 8))), 4, 32);
}

constexpr uint32_t k_head_wg = 256;

}  // namespace

std::unique_ptr<Weight> WebGpuBackend::load_head_blocks(const WeightSource & src) {
    const bool fits = src.type == DType::q6_k ? src.ne[0] % 256 == 0 : src.ne[0] % 32 == 0;
    if (!(src.type == DType::q8_0 || src.type == DType::q4_0 || src.type == DType::q6_k) || !fits) return nullptr;
    return load_matrix({&src, 1});
}

// h staged in workgroup memory where it fits next to the reductions (wg vec2 + wg (f32, u32)).
bool WebGpuBackend::head_q_stages(int64_t n_cols) const {
    return static_cast<uint64_t>(n_cols) * 4 + uint64_t{k_head_wg} * 16 <= ctx_.limits().maxComputeWorkgroupStorageSize;
}

void WebGpuBackend::family_lm_head(const Tensor & logits, const GpuTable & head, const Tensor & h, bool round_input_f16) {
    const auto &  m = static_cast<const GpuMatrix &>(*head.blocks);
    const int64_t T = h.ne[1];
    TERN_ASSERT(m.parts.size() == 1 && m.n_cols == head.n_cols && m.n_rows == head.n_rows, "head blocks");
    const uint32_t lanes = head_lanes(head.n_cols);
    struct {
        uint32_t n_vocab, h_offset, h_stride, out_offset, out_stride;
    } p{u32(head.n_rows), gpu_offset(h, 4), u32(h.ne[0]), gpu_offset(logits, 4), u32(logits.ne[0])};
    const uint32_t   groups   = ceil_div(head.n_rows, k_head_wg / lanes);
    const WGPUBuffer partials = argmax_partials(static_cast<size_t>(groups) * static_cast<size_t>(T) * 8);
    const PipelineKey key{"lm_head_q",
                          "rrrwwu",
                          {{{"WG", static_cast<double>(k_head_wg)},
                            {"LANES", static_cast<double>(lanes)},
                            {"CPR", static_cast<double>(head.n_cols / 32)},
                            {"WTYPE", static_cast<double>(head_wtype(m.parts[0].type))},
                            {"STAGE", head_q_stages(head.n_cols) ? 1.0 : 0.0},
                            {"ROUND_IN", round_input_f16 ? 1.0 : 0.0}}}};
    const WGPUBuffer bufs[] = {m.parts[0].words->get(), m.parts[0].scales->get(), gpu_buffer(h), gpu_buffer(logits),
                               partials};
    step_->dispatch(key, bufs, &p, sizeof p, groups, u32(T));
    // The argmax's first stage is written: argmax() right after this runs only argmax_final.
    head_partials_ = {};
    if (T == 1) head_partials_ = {gpu_buffer(logits), gpu_offset(logits, 4), groups, step_->serial()};
}

}  // namespace tern
