// Small helpers the WebGPU backend's encoders share: buffer offsets of tensors, the loaded weight's
// kind, integer arithmetic for grid sizes, and the launch shapes of the prefetch and score kernels.
// Internal to src/backend/webgpu.
#pragma once

#include "backend/webgpu/webgpu_resources.h"

#include <cstddef>
#include <cstdint>

namespace tern {

// The GPU buffer behind a tensor (asserts it came from a WebGPU backend).
WGPUBuffer gpu_buffer(const Tensor & t);

// Element offset of a tensor view in units of `unit` bytes (asserts alignment).
uint32_t gpu_offset(const Tensor & t, size_t unit);

// Bytes of T tokens' Q8_0-block activations of `blocks` blocks each (lib/acts_q8_0.wgsl).
size_t family_act_bytes(int64_t blocks, int64_t T);

// The weight as this backend loaded it (asserts the kind).
const GpuLinear & as_linear(const Weight & w);
const GpuNorm &   as_norm(const Weight & w);
const GpuTable &  as_table(const Weight & w);

// v as a u32 (asserts it fits); ceil(a / b) as a u32; the largest power of two <= v (1 for v < 2).
uint32_t u32(int64_t v);
uint32_t ceil_div(int64_t a, int64_t b);
uint32_t floor_pow2(uint64_t v);
// The weight prefetches (attention.wgsl PF_STRIDE, lib/weight_prefetch.wgsl KPF_STRIDE) load one u32
// word per this many: one per 64 bytes, a load per cache sector pair.
constexpr uint32_t k_prefetch_stride_words = 16;
// Loads per invocation (at most k_prefetch_loads_max) for workgroups of `wg` invocations that pull
// `words` u32 words into L2, one per k_prefetch_stride_words, on the units that `busy_groups`
// other workgroups leave free of `units` (at least 8 taken as free): the fewest that keep the
// pulling workgroups within them (attention.wgsl's PF_LOADS; webgpu_ops.cpp says why).
constexpr uint32_t k_prefetch_loads_max = 64;
uint32_t prefetch_loads_on_free_units(uint64_t words, uint32_t wg, uint32_t busy_groups, uint32_t units);
// Decode attention's tiled scores: K words per block of 16 dimensions (cpu::dot_blocked16), and
// threads per position (one per block, rounded up to a power of two) for rows of row_words words.
uint32_t score_block_words(bool k_f16);
uint32_t score_threads(uint32_t row_words, bool k_f16);

}  // namespace tern
