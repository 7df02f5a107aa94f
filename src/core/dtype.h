// DType: the ggml tensor type ids tern knows (FORMATS.md §2), with their block geometry.
// Ids are the on-disk ggml ids, so a DType converts to and from the GGUF u32 directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tern {

enum class DType : uint32_t {
    f32   = 0,
    f16   = 1,
    q4_0  = 2,
    q8_0  = 8,
    q4_k  = 12,
    q6_k  = 14,
    bf16  = 30,
    tq1_0 = 34,
    tq2_0 = 35,
    i2_s  = 36,   // bitnet.cpp: tensor-level 2-bit packing + one f32 scale (FORMATS.md §3.2)
    q1_0  = 41,
    q2_0  = 42,   // mainline g64 (tern resolves legacy g128 files to pq2_0 at load, §2.3)
    pq2_0 = 142,  // PrismML Q2_0 with 128-element groups
    // Types that never appear in files, used for activations and caches inside tern.
    i8    = 1000,
    i32   = 1001,
};

struct DTypeTraits {
    std::string_view name;       // ggml spelling, lower case ("tq2_0")
    uint32_t         block_size; // elements per block (1 for plain types and for i2_s)
    uint32_t         block_bytes;// bytes per block (i2_s: see dtype_row_bytes / dtype_tensor_bytes)
    bool             is_quantized;
    bool             is_ternary;  // weights take only values {-1, 0, +1} (times a scale)
};

// Traits of a known type; nullopt for ids tern cannot read.
std::optional<DTypeTraits> dtype_traits(uint32_t id);
const DTypeTraits &        dtype_traits(DType type);
std::string_view           dtype_name(DType type);
// Parses a name such as "i2_s" or "tq2_0"; nullopt if unknown.
std::optional<DType>       dtype_from_name(std::string_view name);

// Bytes of one row of ne0 elements (ne0 must be a multiple of block_size). For i2_s this is ne0/4:
// the packed codes only, the per-tensor scale lives at the end of the whole tensor.
size_t dtype_row_bytes(DType type, int64_t ne0);
// Bytes of a whole tensor of n elements with rows of ne0 elements. i2_s: n/4 + 32 (FORMATS.md §1.7).
size_t dtype_tensor_bytes(DType type, int64_t ne0, int64_t n);

// What a known-but-unsupported or foreign id means, for error messages (e.g. 38 -> "TL1 (bitnet.cpp)").
std::string_view dtype_unsupported_name(uint32_t id, bool bitnet_cpp_arch);

}  // namespace tern
