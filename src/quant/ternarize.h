// Float weights -> ternary types (I2_S, TQ2_0, TQ1_0): BitNet's absmean rule over the whole tensor
// (FORMATS.md §4.15, the rule `tern convert` applies to bf16 masters) and the packers that write a
// ternary matrix with one multiplier. Used by `tern convert` and `tern quantize`.
//   s_w = 1 / max(mean|W|, 1e-5)      t = clamp(round_half_even(W * s_w), -1, 1)      W' = t / s_w
// A tensor that is already ternary (every block holds only {-a, 0, +a}, e.g. a ternary model stored
// as F16) keeps its values and scales: absmean would shrink its scale to a·(fraction non-zero).
#pragma once

#include "core/dtype.h"

#include <cstdint>
#include <span>

namespace tern {

struct AbsmeanScale {
    float s_w   = 1.0f;  // 1 / max(mean|W|, 1e-5), f32
    float scale = 1.0f;  // 1 / s_w: the multiplier that goes into the GGUF (≈ mean|W|)
};

// From sum |W| (accumulated in double) over n elements.
AbsmeanScale absmean_scale_from_sum(double sum_abs, int64_t n);

// t = clamp(round_half_even(w * s_w), -1, 1) with w * s_w in f32; on [-1, 1] that is exactly:
// +1 above 0.5, -1 below -0.5, 0 otherwise (the ties ±0.5 round to the even 0).
inline int8_t absmean_ternary(float w, float s_w) {
    const float x = w * s_w;
    return static_cast<int8_t>(x > 0.5f ? 1 : (x < -0.5f ? -1 : 0));
}

// Packs a ternary [out, in] matrix with one multiplier into type (i2_s: one i2s_pack call for the
// whole tensor, so it carries exactly one scale; tq2_0 / tq1_0: every 256-block gets d = scale).
// dst: dtype_tensor_bytes(type, in, out * in) bytes.
void pack_ternary_tensor(DType type, const int8_t * values, int64_t out, int64_t in, float scale,
                         std::span<uint8_t> dst);

// If every value of x is 0 or ±a for one a > 0, returns a (the tensor is already ternary with one
// scale); else 0.
float uniform_ternary_scale(const float * x, int64_t n);

// Float matrix [out, in] (row-major, GGUF order) -> type (i2_s, tq2_0 or tq1_0) into dst
// (dtype_tensor_bytes bytes). Already-ternary input is kept: one scale for the tensor (any type), or
// one per 256-block for tq2_0 / tq1_0 (d = the block's amax, as ggml's reference quantizer); other
// input is ternarised by absmean over the whole tensor. x must be finite. Returns the absmean scale
// used, or 0 when the input was kept.
float quantize_ternary_tensor(DType type, const float * x, int64_t out, int64_t in, std::span<uint8_t> dst);

}  // namespace tern
