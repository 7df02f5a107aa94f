// Whether a weight tensor holds NaN or infinity: in a plain float value, or in a block's scale
// (the only floats a quantized type stores). The model loader refuses such tensors, naming them:
// one NaN in a norm weight would otherwise reach the int8 activation quantizer, where converting a
// NaN to an integer is undefined behaviour.
#pragma once

#include "core/dtype.h"

#include <cstdint>
#include <optional>
#include <span>

namespace tern {

struct NonFinite {
    int64_t element;  // the first element concerned (for a block scale: the block's first element)
    float   value;    // the NaN or infinity found
    bool    in_scale; // a block or tensor scale, not a plain value
};

// The first non-finite value or scale of a tensor of n_elements elements (the layouts of
// FORMATS.md §2-3), or nullopt. Scans the whole tensor: f16 tables are checked two
// bytes at a time, quantized ones only at their scales.
std::optional<NonFinite> find_non_finite(DType type, std::span<const uint8_t> data, int64_t n_elements);

}  // namespace tern
