// The two ways a Hugging Face BitNet checkpoint stores a projection, decoded to one ternary matrix
// ([out, in] row-major values in {-1, 0, +1}, which is GGUF's [in, out] flat order) and one f32
// per-tensor multiplier, and the packers into tern's ternary GGUF types.
//   packed (FORMATS.md §4.14): U8 [out/4, in] + weight_scale; row quarters in bit pairs:
//       bit:  7 6  | 5 4  | 3 2  | 1 0        W0 = W[p][c]          W1 = W[p + out/4][c]
//             W3+1 | W2+1 | W1+1 | W0+1       W2 = W[p + out/2][c]  W3 = W[p + 3·out/4][c]
//   master (FORMATS.md §4.15): bf16/f16/f32 [out, in], absmean-ternarised over the whole tensor.
#pragma once

#include "convert/hf_config.h"
#include "convert/safetensors.h"
#include "core/dtype.h"
#include "quant/ternarize.h"  // AbsmeanScale, absmean_ternary, pack_ternary_tensor

#include <cstdint>
#include <span>

namespace tern {

// ---- packed U8 -------------------------------------------------------------------------------

// Field value 3 (never produced by HF's pack_weights) anywhere in packed [out/4, in]: count and the
// dense position (row, column) of the first one.
struct PackedFieldCheck {
    int64_t n_invalid = 0;
    int64_t first_row = -1, first_col = -1;
};
PackedFieldCheck check_hf_packed(const StTensor & packed);

// packed: U8 [out/4, in]. values: [out * in], row r = dense output row.
void unpack_hf_packed(const StTensor & packed, int64_t out, int64_t in, int8_t * values);

// The per-tensor multiplier from a weight_scale tensor (one BF16/F16/F32 element):
// autobitlinear -> weight_scale, bitlinear -> 1 / weight_scale. Throws Error(invalid_model) naming
// the tensor if it is not a finite number > 0.
float hf_packed_scale(const StTensor & weight_scale, LinearClass linear_class);

// ---- bf16 / f16 / f32 master -----------------------------------------------------------------

// mean|W| over the whole tensor (accumulated in double, rounded to f32). Throws
// Error(invalid_model) naming the tensor and the element if any value is not finite.
AbsmeanScale absmean_scale(const StTensor & master);

// master: [out, in] float. values: [out * in].
void absmean_ternarize(const StTensor & master, float s_w, int8_t * values);

}  // namespace tern
