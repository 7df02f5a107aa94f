// Decoders and packers for the ternary / low-bit weight layouts (FORMATS.md §3.2-§3.6).
#include "quant/ternary_formats.h"

#include "core/error.h"
#include "core/fp16.h"

#include <cmath>
#include <cstring>

namespace tern {
namespace {

uint16_t load_u16(const uint8_t * p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
void     store_u16(uint8_t * p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v & 0xff);
    p[1] = static_cast<uint8_t>(v >> 8);
}
uint8_t code_of(int8_t v) { return static_cast<uint8_t>(v + 1); }  // -1 -> 0, 0 -> 1, +1 -> 2, +2 -> 3

}  // namespace

// ----------------------------------------------------------------------------------------- I2_S

float i2s_tensor_scale(std::span<const uint8_t> tensor, int64_t n) {
    TERN_ASSERT(n >= 0 && tensor.size() >= static_cast<size_t>(n) / 4 + 4, "i2_s tensor of %lld elements in %zu bytes",
                static_cast<long long>(n), tensor.size());
    float s;
    std::memcpy(&s, tensor.data() + n / 4, 4);
    return s;
}

void i2s_decode(const uint8_t * tensor, int64_t first, int64_t count, int8_t * values) {
    static constexpr int8_t k_value[4] = {-1, 0, 1, 0};  // code 3 decodes to 0 (dequantize_row_i2_s)
    for (int64_t b = first / 128; b < (first + count) / 128; ++b) {
        const uint8_t * block = tensor + 32 * b;
        int8_t *        out   = values + (128 * b - first);
        for (int p = 0; p < 32; ++p) {
            const uint8_t byte = block[p];
            out[p]      = k_value[(byte >> 6) & 3];
            out[p + 32] = k_value[(byte >> 4) & 3];
            out[p + 64] = k_value[(byte >> 2) & 3];
            out[p + 96] = k_value[byte & 3];
        }
    }
}

void i2s_pack(const int8_t * values, int64_t n, float scale, uint8_t * out) {
    TERN_ASSERT(n % 128 == 0, "i2_s tensor of %lld elements", static_cast<long long>(n));
    for (int64_t b = 0; b < n / 128; ++b) {
        const int8_t * v = values + 128 * b;
        for (int p = 0; p < 32; ++p) {
            out[32 * b + p] = static_cast<uint8_t>((code_of(v[p]) << 6) | (code_of(v[p + 32]) << 4) |
                                                   (code_of(v[p + 64]) << 2) | code_of(v[p + 96]));
        }
    }
    std::memcpy(out + n / 4, &scale, 4);
    std::memset(out + n / 4 + 4, 0, 28);
}

int64_t i2s_count_code3(const uint8_t * tensor, int64_t n) {
    int64_t count = 0;
    for (int64_t i = 0; i < n / 4; ++i) {
        for (int s = 0; s < 8; s += 2) count += ((tensor[i] >> s) & 3) == 3;
    }
    return count;
}

// ---------------------------------------------------------------------------------------- TQ2_0

void tq2_0_decode_block(const uint8_t * block, int8_t * values, float & d) {
    for (int g = 0; g < 2; ++g) {
        for (int m = 0; m < 32; ++m) {
            const uint8_t byte = block[32 * g + m];
            for (int l = 0; l < 4; ++l) values[128 * g + 32 * l + m] = static_cast<int8_t>(((byte >> (2 * l)) & 3) - 1);
        }
    }
    d = fp16_to_fp32(load_u16(block + 64));
}

void tq2_0_pack_block(const int8_t * values, float d, uint8_t * block) {
    for (int g = 0; g < 2; ++g) {
        for (int m = 0; m < 32; ++m) {
            uint8_t byte = 0;
            for (int l = 0; l < 4; ++l) byte |= static_cast<uint8_t>(code_of(values[128 * g + 32 * l + m]) << (2 * l));
            block[32 * g + m] = byte;
        }
    }
    store_u16(block + 64, fp32_to_fp16(d));
}

// ---------------------------------------------------------------------------------------- TQ1_0
//  qs[m]      (m = 0..31) = enc( t(m)·81     + t(m+32)·27  + t(m+64)·9  + t(m+96)·3  + t(m+128) )
//  qs[32 + m] (m = 0..15) = enc( t(160+m)·81 + t(176+m)·27 + t(192+m)·9 + t(208+m)·3 + t(224+m) )
//  qh[j]      (j = 0..3)  = enc( 3·( t(240+j)·27 + t(244+j)·9 + t(248+j)·3 + t(252+j) ) )

uint8_t tq1_0_encode_trits(const uint8_t * trits, int n_trits) {
    unsigned v = 0;
    for (int i = 0; i < n_trits; ++i) v = v * 3 + trits[i];
    if (n_trits == 4) v *= 3;  // a fifth, zero trit
    return static_cast<uint8_t>((v * 256 + 242) / 243);
}

uint8_t tq1_0_trit(uint8_t byte, int n) {
    static constexpr uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const auto               x       = static_cast<uint8_t>(byte * pow3[n]);  // wraps in 8 bits, on purpose
    return static_cast<uint8_t>((static_cast<uint16_t>(x) * 3) >> 8);
}

void tq1_0_decode_block(const uint8_t * block, int8_t * values, float & d) {
    const uint8_t * qs = block;
    const uint8_t * qh = block + 48;
    for (int n = 0; n < 5; ++n) {
        for (int m = 0; m < 32; ++m) values[32 * n + m] = static_cast<int8_t>(tq1_0_trit(qs[m], n) - 1);
        for (int m = 0; m < 16; ++m) values[160 + 16 * n + m] = static_cast<int8_t>(tq1_0_trit(qs[32 + m], n) - 1);
    }
    for (int n = 0; n < 4; ++n) {
        for (int j = 0; j < 4; ++j) values[240 + 4 * n + j] = static_cast<int8_t>(tq1_0_trit(qh[j], n) - 1);
    }
    d = fp16_to_fp32(load_u16(block + 52));
}

void tq1_0_pack_block(const int8_t * values, float d, uint8_t * block) {
    uint8_t t[5];
    for (int m = 0; m < 32; ++m) {
        for (int n = 0; n < 5; ++n) t[n] = code_of(values[32 * n + m]);
        block[m] = tq1_0_encode_trits(t, 5);
    }
    for (int m = 0; m < 16; ++m) {
        for (int n = 0; n < 5; ++n) t[n] = code_of(values[160 + 16 * n + m]);
        block[32 + m] = tq1_0_encode_trits(t, 5);
    }
    for (int j = 0; j < 4; ++j) {
        for (int n = 0; n < 4; ++n) t[n] = code_of(values[240 + 4 * n + j]);
        block[48 + j] = tq1_0_encode_trits(t, 4);
    }
    store_u16(block + 52, fp32_to_fp16(d));
}

// ------------------------------------------------------------------------------- Q2_0 / PQ2_0

void q2_0_decode_block(const uint8_t * block, int qk, int8_t * values, float & d) {
    d = fp16_to_fp32(load_u16(block));
    const uint8_t * qs = block + 2;
    for (int e = 0; e < qk; ++e) values[e] = static_cast<int8_t>(((qs[e / 4] >> (2 * (e % 4))) & 3) - 1);
}

void q2_0_pack_block(const int8_t * values, int qk, float d, uint8_t * block) {
    store_u16(block, fp32_to_fp16(d));
    uint8_t * qs = block + 2;
    for (int k = 0; k < qk / 4; ++k) {
        uint8_t byte = 0;
        for (int i = 0; i < 4; ++i) byte |= static_cast<uint8_t>(code_of(values[4 * k + i]) << (2 * i));
        qs[k] = byte;
    }
}

// ----------------------------------------------------------------------------------------- Q1_0

void q1_0_decode_block(const uint8_t * block, int8_t * values, float & d) {
    d = fp16_to_fp32(load_u16(block));
    const uint8_t * qs = block + 2;
    for (int e = 0; e < 128; ++e) values[e] = ((qs[e / 8] >> (e % 8)) & 1) ? 1 : -1;
}

void q1_0_pack_block(const int8_t * values, float d, uint8_t * block) {
    store_u16(block, fp32_to_fp16(d));
    uint8_t * qs = block + 2;
    for (int k = 0; k < 16; ++k) {
        uint8_t byte = 0;
        for (int i = 0; i < 8; ++i) byte |= static_cast<uint8_t>((values[8 * k + i] > 0 ? 1 : 0) << i);
        qs[k] = byte;
    }
}

// -------------------------------------------------------------------------------- generic rows

bool dtype_is_lowbit(DType type) {
    switch (type) {
        case DType::i2_s: case DType::tq1_0: case DType::tq2_0: case DType::q2_0: case DType::pq2_0: case DType::q1_0:
            return true;
        default: return false;
    }
}

int64_t lowbit_scale_group(DType type, int64_t k) {
    switch (type) {
        case DType::i2_s: return k;
        case DType::tq1_0: case DType::tq2_0: return 256;
        case DType::q2_0: return 64;
        case DType::pq2_0: case DType::q1_0: return 128;
        default: TERN_ASSERT(false, "dtype %s is not low-bit", std::string(dtype_name(type)).c_str());
    }
}

void lowbit_decode_row(DType type, std::span<const uint8_t> tensor, int64_t n_elements, int64_t row, int64_t k,
                       int8_t * values, float * block_scales) {
    if (type == DType::i2_s) {
        TERN_ASSERT(k % 128 == 0 && row >= 0 && (row + 1) * k <= n_elements, "i2_s row %lld of %lld elements (n = %lld)",
                    static_cast<long long>(row), static_cast<long long>(k), static_cast<long long>(n_elements));
        block_scales[0] = i2s_tensor_scale(tensor, n_elements);  // also checks the span holds n/4 + 4 bytes
        i2s_decode(tensor.data(), row * k, k, values);
        return;
    }
    const auto &    tr  = dtype_traits(type);
    const int64_t   nb  = k / tr.block_size;
    TERN_ASSERT(k % tr.block_size == 0 && row >= 0 &&
                    (static_cast<size_t>(row) + 1) * static_cast<size_t>(nb) * tr.block_bytes <= tensor.size(),
                "%s row %lld of %lld elements outside a tensor of %zu bytes", std::string(tr.name).c_str(),
                static_cast<long long>(row), static_cast<long long>(k), tensor.size());
    const uint8_t * src = tensor.data() + static_cast<size_t>(row) * static_cast<size_t>(nb) * tr.block_bytes;
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t * block = src + b * tr.block_bytes;
        int8_t *        v     = values + b * tr.block_size;
        switch (type) {
            case DType::tq1_0: tq1_0_decode_block(block, v, block_scales[b]); break;
            case DType::tq2_0: tq2_0_decode_block(block, v, block_scales[b]); break;
            case DType::q2_0: q2_0_decode_block(block, 64, v, block_scales[b]); break;
            case DType::pq2_0: q2_0_decode_block(block, 128, v, block_scales[b]); break;
            case DType::q1_0: q1_0_decode_block(block, v, block_scales[b]); break;
            default: TERN_ASSERT(false, "unreachable");
        }
    }
}

}  // namespace tern
