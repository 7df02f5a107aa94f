// Exact dequantization of head rows (Q8_0, Q4_0, Q4_K, Q6_K, BF16) for the fast backend's exact LM
// head: the same f32 operations per element as quant/block_formats.cpp, written as fixed-length
// loops over independent elements that `#pragma omp simd` (the kernel files build with
// -fopenmp-simd) vectorizes with each kernel file's flags: per element, the same operations in
// the same order (nothing is summed, -ffp-contract=off). Included only by the kernel files;
// internal linkage.
#pragma once

#include <cstdint>

namespace tern::cpu {
namespace {

// ggml type ids (core/dtype.h), kept here so the kernel files include nothing else.
enum : uint32_t { k_type_f32 = 0, k_type_f16 = 1, k_type_q4_0 = 2, k_type_q8_0 = 8, k_type_q4_k = 12, k_type_q6_k = 14, k_type_bf16 = 30 };

inline float half_to_float(const uint8_t * p) {
    const uint16_t h    = static_cast<uint16_t>(p[0] | (p[1] << 8));
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t       exp  = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else {
        exp = 113;
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            --exp;
        }
        bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

inline void dq_q8_0(const uint8_t * b, float * out) {
    const float d = half_to_float(b);
#pragma omp simd
    for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

inline void dq_q4_0(const uint8_t * b, float * out) {
    const float d = half_to_float(b);
#pragma omp simd
    for (int j = 0; j < 16; ++j) out[j] = static_cast<float>((b[2 + j] & 0x0f) - 8) * d;
#pragma omp simd
    for (int j = 0; j < 16; ++j) out[j + 16] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
}

inline void dq_q4_k(const uint8_t * b, float * out) {
    const float     d = half_to_float(b), dmin = half_to_float(b + 2);
    const uint8_t * sc = b + 4;
    const uint8_t * qs = b + 16;
    for (int c = 0; c < 4; ++c) {
        int s[2], m[2];
        for (int h = 0; h < 2; ++h) {
            const int i = 2 * c + h;
            if (i < 4) {
                s[h] = sc[i] & 63;
                m[h] = sc[i + 4] & 63;
            } else {
                s[h] = (sc[i + 4] & 0x0f) | ((sc[i - 4] >> 6) << 4);
                m[h] = (sc[i + 4] >> 4) | ((sc[i] >> 6) << 4);
            }
        }
        const float d0 = d * static_cast<float>(s[0]), mm0 = dmin * static_cast<float>(m[0]);
        const float d1 = d * static_cast<float>(s[1]), mm1 = dmin * static_cast<float>(m[1]);
#pragma omp simd
        for (int l = 0; l < 32; ++l) out[64 * c + l] = d0 * static_cast<float>(qs[32 * c + l] & 0x0f) - mm0;
#pragma omp simd
        for (int l = 0; l < 32; ++l) out[64 * c + 32 + l] = d1 * static_cast<float>(qs[32 * c + l] >> 4) - mm1;
    }
}

// Q6_K: element 128 h + 32 k + l; ql[64 h + l] (k = 0 low nibble, 2 high), ql[64 h + 32 + l] (k = 1,
// 3), qh[32 h + l] bits 2k + 1 .. 2k; value (d * scale[e / 16]) * (q - 32).
inline void dq_q6_k(const uint8_t * b, float * out) {
    const uint8_t * ql = b;
    const uint8_t * qh = b + 128;
    const auto *    sc = reinterpret_cast<const int8_t *>(b + 192);
    const float     d  = half_to_float(b + 208);
    for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < 4; ++k) {
            for (int half = 0; half < 2; ++half) {
                const float     ds  = d * static_cast<float>(sc[8 * h + 2 * k + half]);
                const uint8_t * lo  = ql + 64 * h + 32 * (k & 1) + 16 * half;
                const uint8_t * hi  = qh + 32 * h + 16 * half;
                const int       sh  = 4 * (k >> 1);
                float *         dst = out + 128 * h + 32 * k + 16 * half;
#pragma omp simd
                for (int l = 0; l < 16; ++l) {
                    const int q = ((lo[l] >> sh) & 0x0f) | (((hi[l] >> (2 * k)) & 3) << 4);
                    dst[l]      = ds * static_cast<float>(q - 32);
                }
            }
        }
    }
}

// Rows [0, n_rows) of row_bytes each into out[r * k + i]; false for types handled elsewhere.
inline bool dequant_rows_impl(uint32_t type, const uint8_t * src, int64_t row_bytes, int64_t n_rows, int64_t k, float * out) {
    if (type != k_type_q8_0 && type != k_type_q4_0 && type != k_type_q4_k && type != k_type_q6_k && type != k_type_bf16) {
        return false;
    }
    for (int64_t r = 0; r < n_rows; ++r) {
        const uint8_t * row = src + r * row_bytes;
        float *         o   = out + r * k;
        switch (type) {
            case k_type_q8_0: for (int64_t b = 0; b < k / 32; ++b) dq_q8_0(row + 34 * b, o + 32 * b); break;
            case k_type_q4_0: for (int64_t b = 0; b < k / 32; ++b) dq_q4_0(row + 18 * b, o + 32 * b); break;
            case k_type_q4_k: for (int64_t b = 0; b < k / 256; ++b) dq_q4_k(row + 144 * b, o + 256 * b); break;
            case k_type_q6_k: for (int64_t b = 0; b < k / 256; ++b) dq_q6_k(row + 210 * b, o + 256 * b); break;
            case k_type_bf16:
#pragma omp simd
                for (int64_t i = 0; i < k; ++i) {
                    const uint32_t bits = static_cast<uint32_t>(row[2 * i] | (row[2 * i + 1] << 8)) << 16;
                    __builtin_memcpy(o + i, &bits, 4);
                }
                break;
            default: break;
        }
    }
    return true;
}

inline void row_sumsq_impl(const float * rows, int64_t n_rows, int64_t k, double * sumsq) {
    for (int64_t r = 0; r < n_rows; ++r) {
        const float * x = rows + r * k;
        double        s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < k; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
        sumsq[r] = s;
    }
}

}  // namespace
}  // namespace tern::cpu
