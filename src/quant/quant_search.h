// Error-minimising scale searches for the block quantizers of block_formats.cpp (Q8_0, Q4_0, Q4_K,
// Q6_K). The idea is the one behind llama.cpp's make_qx_quants / make_qkx2_quants, written here from
// the description, not from its code: a block's values x are stored as integers q in a fixed range
// times a scale (and, for the asymmetric K-quant sub-blocks, minus an offset). Taking the scale from
// the largest |x| alone (the "reference" quantizers) wastes levels; instead try a grid of candidate
// scales, round x to each, solve the least-squares scale (and offset) for the rounded integers, and
// keep the candidate with the smallest squared error. Everything is deterministic and single-threaded.
//
// Errors are plain squared errors (every element weighs the same), which is what the RMS figures in
// docs/quantization.md measure.
#pragma once

#include <cstdint>

namespace tern::quant {

// Symmetric: x[i] ~= scale * q[i] with q[i] in [-nmax_neg, nmax_pos]. The element of largest |x| is
// placed on the side with nmax_neg levels (the scale's sign is chosen for that), as ggml's Q4_0 does
// with its -8 level. Returns the scale (0 for an all-zero block) and writes q. n <= 256.
float search_symmetric(const float * x, int n, int nmax_neg, int nmax_pos, int8_t * q);

// Asymmetric, for Q4_K sub-blocks: x[i] ~= scale * q[i] - min with q[i] in [0, nmax], scale >= 0 and
// min >= 0 (the K-quant layout stores min as a non-negative 6-bit code that is subtracted, so the
// lowest level can never be above zero). Returns scale and min, writes q. n <= 256.
struct ScaleMin {
    float scale = 0.0f;
    float min   = 0.0f;
};
ScaleMin search_asymmetric(const float * x, int n, int nmax, uint8_t * q);

// Squared error of x against scale * q (symmetric) or scale * q - min (asymmetric), in double.
double squared_error(const float * x, int n, float scale, const int8_t * q);
double squared_error(const float * x, int n, float scale, float min, const uint8_t * q);

// Nearest integer of v clamped to [lo, hi]; half away from zero (as lroundf).
int round_clamp(float v, int lo, int hi);

}  // namespace tern::quant
