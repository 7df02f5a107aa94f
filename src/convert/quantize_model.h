// `tern quantize IN OUT TYPE`, like llama-quantize: rewrites a GGUF model with its weight matrices in
// another type. Metadata is copied (general.file_type updated), tensors keep their order and names.
//
// Which type each tensor gets:
//   - vectors (norm weights, rope factors) and tensors not named *.weight: unchanged;
//   - token_embd.weight: --token-embedding-type, else (tied head, no output.weight) --output-tensor-type,
//     else the default below;
//   - output.weight (or token_embd.weight when it is the tied head): --output-tensor-type, else Q6_K when
//     TYPE is Q4_0 / Q4_K / Q6_K (llama-quantize's default for the head), TYPE when it is Q8_0 or a float
//     type, unchanged when TYPE is ternary (the official 2B4T layout keeps its F16 head);
//   - an untied token_embd.weight: TYPE, unchanged when TYPE is ternary;
//   - every other matrix: TYPE. COPY keeps every tensor's type and applies only the two overrides.
// A default whose block size does not divide a tensor's rows falls back (Q4_K -> Q4_0, Q6_K -> Q8_0,
// Q4_0 / Q8_0 -> F16) with a warning; an explicit override that does not fit is an error.
//
// Conversions: same type -> bytes copied; float source -> the weight quantizers of block_formats.h
// (searched scales) or, for I2_S / TQ2_0 / TQ1_0, quantize_ternary_tensor (absmean, or lossless for
// already-ternary values); a quantized source -> dequantized first, which needs --allow-requantize
// unless both types are ternary (then the ternary values are kept exactly).
#pragma once

#include "core/dtype.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

struct QuantizeOptions {
    std::string          input_path;
    std::string          output_path;
    std::optional<DType> type;  // nullopt = COPY
    std::optional<DType> output_tensor_type;
    std::optional<DType> token_embedding_type;
    bool                 allow_requantize = false;
    int                  threads          = 0;     // 0 = all hardware threads
    bool                 progress         = true;  // progress bar on stderr (only on a terminal)
};

// What happened to one tensor.
struct QuantizedTensor {
    std::string name;
    DType       from, to;
    size_t      bytes_in = 0, bytes_out = 0;
};

// Parses a llama-quantize type name, case-insensitively: F32, F16, BF16, Q8_0, Q4_0, Q4_K (also
// Q4_K_S / Q4_K_M, written as pure Q4_K), Q6_K, TQ2_0, TQ1_0, I2_S, or COPY (nullopt). Throws
// Error(invalid_argument) listing the names for anything else. `what` names the flag in errors.
std::optional<DType> parse_quantize_type(std::string_view name, std::string_view what);
// The types a tensor may be written as (for --help and errors).
std::string quantize_type_names();

// Validates everything (types, shapes, input != output, output not a non-regular file) before the
// first byte is written; writes via a temp file + rename. Throws Error naming the tensor.
std::vector<QuantizedTensor> quantize_model(const QuantizeOptions & options);

}  // namespace tern
