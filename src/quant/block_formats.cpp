// Row (de)quantization for F32/F16/BF16/Q4_0/Q8_0/Q4_K/Q6_K and the low-bit types, and ggml's
// reference Q4_0 / Q8_0 quantizers. The searched weight quantizers are in quantize_blocks.cpp.
#include "quant/block_formats.h"

#include "core/error.h"
#include "core/fp16.h"
#include "quant/ternary_formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace tern {
namespace {

uint16_t load_u16(const uint8_t * p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
void     store_u16(uint8_t * p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v & 0xff);
    p[1] = static_cast<uint8_t>(v >> 8);
}

// Six-bit scale and min of Q4_K sub-block s (FORMATS.md §3.10).
void q4_k_scale_min(const uint8_t * scales, int s, int & sc, int & m) {
    if (s < 4) {
        sc = scales[s] & 63;
        m  = scales[s + 4] & 63;
    } else {
        sc = (scales[s + 4] & 0x0f) | ((scales[s - 4] >> 6) << 4);
        m  = (scales[s + 4] >> 4) | ((scales[s] >> 6) << 4);
    }
}

}  // namespace

// ----------------------------------------------------------------------------------------- Q4_0

void q4_0_dequantize_block(const uint8_t * block, float * out) {
    const float d = fp16_to_fp32(load_u16(block));
    for (int j = 0; j < 16; ++j) {
        out[j]      = static_cast<float>((block[2 + j] & 0x0f) - 8) * d;
        out[j + 16] = static_cast<float>((block[2 + j] >> 4) - 8) * d;
    }
}

void q4_0_quantize_block_ref(const float * x, uint8_t * block) {
    float amax = 0, max = 0;  // max = signed value of largest magnitude
    for (int j = 0; j < 32; ++j) {
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max  = x[j];
        }
    }
    const float d  = max / -8.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    store_u16(block, fp32_to_fp16(d));
    for (int j = 0; j < 16; ++j) {
        const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
        const int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
        block[2 + j] = static_cast<uint8_t>(std::max(0, q0) | (std::max(0, q1) << 4));
    }
}

// ----------------------------------------------------------------------------------------- Q8_0

void q8_0_dequantize_block(const uint8_t * block, float * out) {
    const float d = fp16_to_fp32(load_u16(block));
    for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(static_cast<int8_t>(block[2 + j])) * d;
}

void q8_0_quantize_block_ref(const float * x, uint8_t * block) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d  = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    store_u16(block, fp32_to_fp16(d));
    for (int j = 0; j < 32; ++j) block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(x[j] * id)));
}

// ----------------------------------------------------------------------------------------- Q4_K

void q4_k_dequantize_block(const uint8_t * block, float * out) {
    const float     d      = fp16_to_fp32(load_u16(block));
    const float     dmin   = fp16_to_fp32(load_u16(block + 2));
    const uint8_t * scales = block + 4;
    const uint8_t * qs     = block + 16;
    for (int c = 0; c < 4; ++c) {
        int sc0, m0, sc1, m1;
        q4_k_scale_min(scales, 2 * c, sc0, m0);
        q4_k_scale_min(scales, 2 * c + 1, sc1, m1);
        const float d0 = d * static_cast<float>(sc0), mm0 = dmin * static_cast<float>(m0);
        const float d1 = d * static_cast<float>(sc1), mm1 = dmin * static_cast<float>(m1);
        for (int l = 0; l < 32; ++l) {
            out[64 * c + l]      = d0 * static_cast<float>(qs[32 * c + l] & 0x0f) - mm0;
            out[64 * c + 32 + l] = d1 * static_cast<float>(qs[32 * c + l] >> 4) - mm1;
        }
    }
}

// ----------------------------------------------------------------------------------------- Q6_K

void q6_k_dequantize_block(const uint8_t * block, float * out) {
    const uint8_t * ql     = block;
    const uint8_t * qh     = block + 128;
    const auto *    scales = reinterpret_cast<const int8_t *>(block + 192);
    const float     d      = fp16_to_fp32(load_u16(block + 208));
    for (int h = 0; h < 2; ++h) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t lo0 = ql[64 * h + l], lo1 = ql[64 * h + 32 + l], hi = qh[32 * h + l];
            const int     q[4] = {
                (lo0 & 0xf) | (((hi >> 0) & 3) << 4),
                (lo1 & 0xf) | (((hi >> 2) & 3) << 4),
                (lo0 >> 4) | (((hi >> 4) & 3) << 4),
                (lo1 >> 4) | (((hi >> 6) & 3) << 4),
            };
            for (int k = 0; k < 4; ++k) {
                const int e = 128 * h + l + 32 * k;
                out[e]      = d * static_cast<float>(scales[e / 16]) * static_cast<float>(q[k] - 32);
            }
        }
    }
}

// -------------------------------------------------------------------------------- generic rows

void dequantize_row(DType type, const uint8_t * row, float * out, int64_t n) {
    TERN_ASSERT(type != DType::i2_s && n % dtype_traits(type).block_size == 0, "dequantize_row: %lld elements of %s",
                static_cast<long long>(n), std::string(dtype_name(type)).c_str());
    switch (type) {
        case DType::f32: std::memcpy(out, row, static_cast<size_t>(n) * 4); return;
        case DType::f16:
            for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_fp32(load_u16(row + 2 * i));
            return;
        case DType::bf16:
            for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_fp32(load_u16(row + 2 * i));
            return;
        case DType::q4_0:
            for (int64_t b = 0; b < n / 32; ++b) q4_0_dequantize_block(row + 18 * b, out + 32 * b);
            return;
        case DType::q8_0:
            for (int64_t b = 0; b < n / 32; ++b) q8_0_dequantize_block(row + 34 * b, out + 32 * b);
            return;
        case DType::q4_k:
            for (int64_t b = 0; b < n / 256; ++b) q4_k_dequantize_block(row + 144 * b, out + 256 * b);
            return;
        case DType::q6_k:
            for (int64_t b = 0; b < n / 256; ++b) q6_k_dequantize_block(row + 210 * b, out + 256 * b);
            return;
        case DType::tq1_0: case DType::tq2_0: case DType::q2_0: case DType::pq2_0: case DType::q1_0: {
            const auto & tr = dtype_traits(type);
            int8_t       v[256];
            for (int64_t b = 0; b < n / tr.block_size; ++b) {
                const uint8_t * block = row + b * tr.block_bytes;
                float           d     = 0;
                switch (type) {
                    case DType::tq1_0: tq1_0_decode_block(block, v, d); break;
                    case DType::tq2_0: tq2_0_decode_block(block, v, d); break;
                    case DType::q2_0: q2_0_decode_block(block, 64, v, d); break;
                    case DType::pq2_0: q2_0_decode_block(block, 128, v, d); break;
                    default: q1_0_decode_block(block, v, d); break;
                }
                for (uint32_t e = 0; e < tr.block_size; ++e) out[b * tr.block_size + e] = static_cast<float>(v[e]) * d;
            }
            return;
        }
        default: TERN_ASSERT(false, "dequantize_row: type %s has no row layout", std::string(dtype_name(type)).c_str());
    }
}

void dequantize_tensor_row(DType type, std::span<const uint8_t> tensor, int64_t n_elements, int64_t ne0, int64_t row,
                           float * out) {
    if (type == DType::i2_s) {
        TERN_ASSERT(ne0 % 128 == 0 && row >= 0 && (row + 1) * ne0 <= n_elements, "i2_s row %lld of %lld (n = %lld)",
                    static_cast<long long>(row), static_cast<long long>(ne0), static_cast<long long>(n_elements));
        const float         scale = i2s_tensor_scale(tensor, n_elements);  // also checks the span size
        std::vector<int8_t> v(static_cast<size_t>(ne0));
        i2s_decode(tensor.data(), row * ne0, ne0, v.data());
        for (int64_t i = 0; i < ne0; ++i) out[i] = static_cast<float>(v[i]) * scale;
        return;
    }
    const size_t row_bytes = dtype_row_bytes(type, ne0);
    TERN_ASSERT(row >= 0 && (static_cast<size_t>(row) + 1) * row_bytes <= tensor.size(),
                "%s row %lld outside a tensor of %zu bytes", std::string(dtype_name(type)).c_str(),
                static_cast<long long>(row), tensor.size());
    dequantize_row(type, tensor.data() + static_cast<size_t>(row) * row_bytes, out, ne0);
}

void quantize_row(DType type, const float * x, uint8_t * out, int64_t n) {
    TERN_ASSERT(type != DType::i2_s && n % dtype_traits(type).block_size == 0, "quantize_row: %lld elements of %s",
                static_cast<long long>(n), std::string(dtype_name(type)).c_str());
    switch (type) {
        case DType::f32: std::memcpy(out, x, static_cast<size_t>(n) * 4); return;
        case DType::f16:
            for (int64_t i = 0; i < n; ++i) store_u16(out + 2 * i, fp32_to_fp16(x[i]));
            return;
        case DType::bf16:
            for (int64_t i = 0; i < n; ++i) store_u16(out + 2 * i, fp32_to_bf16(x[i]));
            return;
        case DType::q4_0:
            for (int64_t b = 0; b < n / 32; ++b) q4_0_quantize_block(x + 32 * b, out + 18 * b);
            return;
        case DType::q8_0:
            for (int64_t b = 0; b < n / 32; ++b) q8_0_quantize_block(x + 32 * b, out + 34 * b);
            return;
        case DType::q4_k:
            for (int64_t b = 0; b < n / 256; ++b) q4_k_quantize_block(x + 256 * b, out + 144 * b);
            return;
        case DType::q6_k:
            for (int64_t b = 0; b < n / 256; ++b) q6_k_quantize_block(x + 256 * b, out + 210 * b);
            return;
        case DType::tq1_0: case DType::tq2_0: case DType::q2_0: case DType::pq2_0: case DType::q1_0: {
            const auto & tr = dtype_traits(type);
            int8_t       v[256];
            for (int64_t b = 0; b < n / tr.block_size; ++b) {
                const float * xb = x + b * tr.block_size;
                float         d  = 0;
                for (uint32_t e = 0; e < tr.block_size; ++e) d += std::fabs(xb[e]);
                if (type == DType::q1_0) {
                    d /= static_cast<float>(tr.block_size);  // Q1_0: d = mean|x|, sign bits
                } else {
                    d = 0;
                    for (uint32_t e = 0; e < tr.block_size; ++e) d = std::max(d, std::fabs(xb[e]));
                }
                const float id = d > 0 ? 1.0f / d : 0.0f;
                for (uint32_t e = 0; e < tr.block_size; ++e) {
                    // Half away from zero, like lroundf in ggml's quantize_row_tq{1,2}_0_ref (FORMATS.md §3.4).
                    const int q = static_cast<int>(std::lround(xb[e] * id));
                    v[e]        = static_cast<int8_t>(type == DType::q1_0 ? (xb[e] >= 0 ? 1 : -1)
                                                       : std::clamp(q, -1, (type == DType::q2_0 || type == DType::pq2_0) ? 2 : 1));
                }
                uint8_t * block = out + b * tr.block_bytes;
                switch (type) {
                    case DType::tq1_0: tq1_0_pack_block(v, d, block); break;
                    case DType::tq2_0: tq2_0_pack_block(v, d, block); break;
                    case DType::q2_0: q2_0_pack_block(v, 64, d, block); break;
                    case DType::pq2_0: q2_0_pack_block(v, 128, d, block); break;
                    default: q1_0_pack_block(v, d, block); break;
                }
            }
            return;
        }
        default: TERN_ASSERT(false, "quantize_row: cannot quantize to %s row by row", std::string(dtype_name(type)).c_str());
    }
}

}  // namespace tern
