// The scalar reference of the general linear op (Backend::matmul) for non-ternary weights, with the
// activation semantics of docs/architecture.md ("Activation semantics follow the weight type"):
//   Q1_0 / Q2_0   x as Q8_0 blocks, ggml's q1_0_q8_0 / q2_0_q8_0 (dot_lowbit_q8_0);
//   I2_S, TQ*     x as per-token int8 (cpu::quantize_act_row), BitNet's BitLinear (cpu_ops.h);
//   Q4_0 / Q8_0   x as Q8_0 blocks (ggml's quantize_row_q8_0_ref), then per block
//                 sumf += (float)sumi * d_w * d_a (Q4_0) or (float)sumi * (d_w * d_a) (Q8_0), in
//                 block order: ggml_vec_dot_q4_0_q8_0 / _q8_0_q8_0 (generic);
//   Q4_K / Q6_K   x as Q8_K blocks (quantize_row_q8_K_ref), then ggml's generic vec_dot_q4_K_q8_K /
//                 q6_K_q8_K: integer sums in 8 lanes (element index mod 8) per 256-value block,
//                 lane l's f32 sum += (d_w * d_a) * lane, Q4_K's mins subtracted from the total as
//                 blocks go, the lanes added in order at the end;
//   F32/F16/BF16  x in f32, the weight row decoded exactly to f32, products rounded to f32 and summed
//                 in tern's blocked-halving order (dot_f32_blocks).
// Weights stay in the file's layout (mmap'd): CpuMatrix.
#pragma once

#include "backend/backend.h"

#include <cstdint>
#include <vector>

namespace tern {

// A linear weight of non-ternary types, its parts' rows stacked (q/k/v, gate/up), read in place.
// Parts may differ in type (llama-quantize's Q4_K_M stores some attn_v as Q6_K): Weight::type is
// the first part's; each row is multiplied as its own part's type says.
class CpuMatrix : public Weight {
public:
    std::vector<WeightSource> parts;
    std::vector<int64_t>      first_row;  // row of the stack where each part starts
    const uint8_t * row(int64_t r, DType & type) const;  // the file bytes of stacked row r, and its type
};

bool cpu_matrix_type(DType type);  // f32 f16 bf16 q8_0 q4_0 q4_k q6_k
// Throws Error(unsupported) naming the tensor for a part of a type it cannot multiply.
std::unique_ptr<CpuMatrix> cpu_pack_matrix(std::span<const WeightSource> parts);

namespace cpu {

// The form an input row takes for a weight type.
enum class ActForm { f32, q8_0, q8_k };
ActForm act_form(DType weight_type);

// ggml's block_q8_K: d is f32, bsums the sums of each 16 codes.
struct BlockQ8K {
    float   d = 0;
    int8_t  qs[256];
    int16_t bsums[16];
};

inline constexpr size_t k_q8_0_block_bytes = 34;  // fp16 d | int8 qs[32]

// x[k] -> k/32 Q8_0 blocks (k a multiple of 32); x[k] -> k/256 Q8_K blocks (k a multiple of 256).
void quantize_row_q8_0_acts(const float * x, uint8_t * blocks, int64_t k);
void quantize_row_q8_k_acts(const float * x, BlockQ8K * blocks, int64_t k);

float dot_q4_0_q8_0(const uint8_t * w, const uint8_t * a, int64_t k);
float dot_q8_0_q8_0(const uint8_t * w, const uint8_t * a, int64_t k);
// Q1_0 / Q2_0 / PQ2_0 (decoded to signed values, `group` values per scale d_w) with Q8_0 blocks, as
// ggml_vec_dot_q1_0_q8_0 / q2_0_q8_0 (generic): per weight group s = sum over its activation blocks
// of d_a * (float)sumi, in order, then sumf += d_w * s.
float dot_lowbit_q8_0(const int8_t * values, const float * scales, int64_t group, const uint8_t * a, int64_t k);
float dot_q4_k_q8_k(const uint8_t * w, const BlockQ8K * a, int64_t k);
float dot_q6_k_q8_k(const uint8_t * w, const BlockQ8K * a, int64_t k);

// sum w[i] * x[i] in the blocked-halving order: each block of 32 products (rounded to f32) summed in
// order from 0, then the block sums in the halving order (cpu::halving_sum). A GPU gives each block
// to one invocation and reduces the block sums across the workgroup.
float dot_f32_blocks(const float * w, const float * x, int64_t k);

// RoPE of one head in place, as ggml's rope with freq_factors and ext_factor 0: angle i of position
// p is (p * base^(-2i/n_rot), by the f32 recurrence) / factors[i] * freq_scale; mode norm rotates
// pairs (2i, 2i+1), neox pairs (i, i + n_rot/2). Dimensions >= n_rot pass through. factors may be null.
void rope_head(float * x, int64_t n_rot, int64_t pos, float freq_base, float freq_scale, const float * factors,
               RopeMode mode);

}  // namespace cpu
}  // namespace tern
