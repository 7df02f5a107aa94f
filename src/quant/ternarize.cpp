// Absmean ternarisation and ternary packing; see ternarize.h.
#include "quant/ternarize.h"

#include "core/error.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tern {

AbsmeanScale absmean_scale_from_sum(double sum_abs, int64_t n) {
    AbsmeanScale s;
    const float  mean = n > 0 ? static_cast<float>(sum_abs / static_cast<double>(n)) : 0.0f;
    s.s_w             = 1.0f / std::max(mean, 1e-5f);
    s.scale           = 1.0f / s.s_w;
    return s;
}

void pack_ternary_tensor(DType type, const int8_t * values, int64_t out, int64_t in, float scale,
                         std::span<uint8_t> dst) {
    const int64_t n = out * in;
    TERN_ASSERT(dst.size() == dtype_tensor_bytes(type, in, n), "pack_ternary_tensor: %zu bytes for %s [%lld, %lld]",
                dst.size(), std::string(dtype_name(type)).c_str(), (long long) in, (long long) out);
    switch (type) {
        case DType::i2_s: i2s_pack(values, n, scale, dst.data()); return;  // one chunk: one scale at byte n/4
        case DType::tq2_0:
        case DType::tq1_0: {
            const uint32_t block_bytes = dtype_traits(type).block_bytes;
            for (int64_t b = 0; b < n / 256; ++b) {
                uint8_t * block = dst.data() + b * block_bytes;
                if (type == DType::tq2_0) {
                    tq2_0_pack_block(values + 256 * b, scale, block);
                } else {
                    tq1_0_pack_block(values + 256 * b, scale, block);
                }
            }
            return;
        }
        default: TERN_ASSERT(false, "pack_ternary_tensor: %s is not a ternary output type", std::string(dtype_name(type)).c_str());
    }
}

float uniform_ternary_scale(const float * x, int64_t n) {
    float a = 0;
    for (int64_t i = 0; i < n; ++i) {
        const float v = std::fabs(x[i]);
        if (v == 0) continue;
        if (a == 0) a = v;
        if (v != a) return 0.0f;
    }
    return a;
}

namespace {

// Every 256-block holds only {-a_b, 0, +a_b}.
bool blockwise_ternary(const float * x, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        if (uniform_ternary_scale(x + 256 * b, 256) == 0.0f) {
            for (int i = 0; i < 256; ++i) {
                if (x[256 * b + i] != 0.0f) return false;  // mixed magnitudes (an all-zero block is fine)
            }
        }
    }
    return true;
}

}  // namespace

float quantize_ternary_tensor(DType type, const float * x, int64_t out, int64_t in, std::span<uint8_t> dst) {
    TERN_ASSERT(type == DType::i2_s || type == DType::tq2_0 || type == DType::tq1_0,
                "quantize_ternary_tensor: %s is not ternary", std::string(dtype_name(type)).c_str());
    const int64_t       n = out * in;
    std::vector<int8_t> values(static_cast<size_t>(n));
    if (const float a = uniform_ternary_scale(x, n); a > 0) {
        for (int64_t i = 0; i < n; ++i) values[i] = static_cast<int8_t>(x[i] > 0 ? 1 : (x[i] < 0 ? -1 : 0));
        pack_ternary_tensor(type, values.data(), out, in, a, dst);
        return 0.0f;
    }
    if (type != DType::i2_s && blockwise_ternary(x, n)) {  // ggml's reference quantizer keeps these exactly
        const size_t row_bytes = dtype_row_bytes(type, in);
        for (int64_t r = 0; r < out; ++r) quantize_row(type, x + r * in, dst.data() + r * row_bytes, in);
        return 0.0f;
    }
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::fabs(x[i]);
    const AbsmeanScale s = absmean_scale_from_sum(sum, n);
    for (int64_t i = 0; i < n; ++i) values[i] = absmean_ternary(x[i], s.s_w);
    pack_ternary_tensor(type, values.data(), out, in, s.scale, dst);
    return s.scale;
}

}  // namespace tern
