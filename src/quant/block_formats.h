// Dequantization and reference quantization of rows for every weight type tern reads
// (F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q6_K, and the low-bit types of ternary_formats.h).
// Used for embedding rows, LM heads, `tern inspect`, conversion and tests. Layouts: FORMATS.md §3.
#pragma once

#include "core/dtype.h"

#include <cstdint>
#include <span>

namespace tern {

// Q4_0 (type 2): 32 elements in 18 bytes: fp16 d | qs[16]; qs[j] low nibble = e(j), high = e(j+16);
// value = (nibble - 8) * d.
void q4_0_dequantize_block(const uint8_t * block, float * out);
// ggml's quantize_row_q4_0_ref: d = max / -8 (max = the signed value of largest magnitude).
void q4_0_quantize_block_ref(const float * x, uint8_t * block);
// The weight quantizer (quantize_blocks.cpp): the scale that minimises the squared error after the
// fp16 rounding of d; never worse than the reference on the same block.
void q4_0_quantize_block(const float * x, uint8_t * block);

// Q8_0 (type 8): 32 elements in 34 bytes: fp16 d | int8 qs[32]; value = qs * d.
void q8_0_dequantize_block(const uint8_t * block, float * out);
// ggml's quantize_row_q8_0_ref: d = amax / 127, q = round half away from zero. This is also how
// ggml quantizes the Q8_0 *activations* that Q4_0 / Q8_0 / Q1_0 / Q2_0 weights are multiplied with.
void q8_0_quantize_block_ref(const float * x, uint8_t * block);
// The weight quantizer: searched scale, codes in [-127, 127]; never worse than the reference.
void q8_0_quantize_block(const float * x, uint8_t * block);

// Q4_K (type 12): 256 elements in 144 bytes: fp16 d | fp16 dmin | scales[12] (8 six-bit scales and
// mins) | qs[128]. Chunk c (64 elements) uses qs[32c..32c+31]: low nibbles -> sub-block 2c, high
// nibbles -> 2c+1; value = d * sc * q - dmin * m.
void q4_k_dequantize_block(const uint8_t * block, float * out);
// Weight quantizer: searched per-sub-block scale and min, six-bit codes re-chosen for the stored d.
void q4_k_quantize_block(const float * x, uint8_t * block);

// Q6_K (type 14): 256 elements in 210 bytes: ql[128] | qh[64] | int8 scales[16] | fp16 d (LAST).
// value = d * scales[e/16] * (q - 32), q a 6-bit code split over ql (low 4) and qh (high 2).
void q6_k_dequantize_block(const uint8_t * block, float * out);
// Weight quantizer: searched 16-element scales, int8 scales re-chosen for the stored d.
void q6_k_quantize_block(const float * x, uint8_t * block);

// Row of n elements of any readable type except i2_s (whose scale is per tensor: use
// dequantize_tensor_row). n must be a multiple of the block size.
void dequantize_row(DType type, const uint8_t * row, float * out, int64_t n);
// Row `row` (of ne0 elements) of a whole tensor of any readable type, including i2_s.
void dequantize_tensor_row(DType type, std::span<const uint8_t> tensor, int64_t n_elements, int64_t ne0, int64_t row,
                           float * out);
// Quantizer into any writable type (all readable types; i2_s only via i2s_pack, since it needs the
// whole tensor): the searched weight quantizers for Q4_0 / Q8_0 / Q4_K / Q6_K; low-bit types expect
// ternary-valued input and take d per block = amax (mean|x| for Q1_0), as ggml's reference does.
void quantize_row(DType type, const float * x, uint8_t * out, int64_t n);

}  // namespace tern
