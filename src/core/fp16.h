// IEEE binary16 and bfloat16 <-> binary32 conversions in portable C++.
// f16 -> f32 is exact (subnormals, infinities, NaN). f32 -> f16 rounds to nearest, ties to even,
// which is what F16C (vcvtps2ph imm 0) and ggml's software path do (FORMATS.md §3.0).
#pragma once

#include <bit>
#include <cstdint>

namespace tern {

inline float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t       exp  = (h >> 10) & 0x1fu;
    uint32_t       mant = h & 0x3ffu;
    uint32_t       bits;
    if (exp == 0x1f) {                  // inf / NaN: keep the payload
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {              // normal
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    } else if (mant == 0) {             // signed zero
        bits = sign;
    } else {                            // subnormal: normalise
        exp = 113;
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            --exp;
        }
        mant &= 0x3ffu;
        bits = sign | (exp << 23) | (mant << 13);
    }
    return std::bit_cast<float>(bits);
}

inline uint16_t fp32_to_fp16(float f) {
    const uint32_t x    = std::bit_cast<uint32_t>(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((absx >> 13) & 0x3ffu));  // NaN
    if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
    if (absx < 0x38800000u) {                                               // result is subnormal or zero
        if (absx < 0x33000000u) return static_cast<uint16_t>(sign);         // < 2^-25: rounds to zero
        const uint32_t exp   = absx >> 23;
        const uint32_t mant  = (absx & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126u - exp;  // 14..24
        uint32_t       half  = mant >> shift;
        const uint32_t rem   = mant & ((1u << shift) - 1u);
        const uint32_t mid   = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (half & 1u))) ++half;
        return static_cast<uint16_t>(sign | half);
    }
    // normal: rebias exponent, round mantissa from 23 to 10 bits (carry may bump the exponent)
    uint32_t       h   = ((absx >> 13) - (112u << 10));
    const uint32_t rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
}

// Rounds an f32 to the nearest f16 value and back (the rounding bitnet.cpp applies to operands of
// F16 matrix products).
inline float round_to_fp16(float f) { return fp16_to_fp32(fp32_to_fp16(f)); }

inline float bf16_to_fp32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// Round to nearest even; NaN stays NaN (quiet bit forced).
inline uint16_t fp32_to_bf16(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace tern
