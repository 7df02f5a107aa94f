// core/fp16.h against IEEE 754 (FORMATS.md §3.0): fp16 -> f32 exact for all 65536 patterns,
// f32 -> fp16 round-to-nearest-even checked against an oracle built from the sorted table of all
// finite fp16 values (every tie, both neighbours of every tie, subnormals, overflow), and bf16.
#include "core/fp16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace tern {
namespace {

// Value of an fp16 bit pattern from the IEEE definition, in double (independent of fp16.h).
double f16_value(uint16_t h) {
    const int    sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    const double s    = sign ? -1.0 : 1.0;
    if (exp == 31) return mant ? std::numeric_limits<double>::quiet_NaN() : s * std::numeric_limits<double>::infinity();
    if (exp == 0) return s * std::ldexp(mant, -24);
    return s * std::ldexp(1024 + mant, exp - 25);
}

TEST(Fp16, ToF32IsExactForAllPatterns) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float  f = fp16_to_fp32(static_cast<uint16_t>(h));
        const double v = f16_value(static_cast<uint16_t>(h));
        if (std::isnan(v)) {
            ASSERT_TRUE(std::isnan(f)) << h;
            const uint32_t bits = std::bit_cast<uint32_t>(f);
            ASSERT_EQ(bits >> 31, h >> 15) << h;                // sign kept
            ASSERT_EQ((bits >> 13) & 1023, h & 1023) << h;      // payload kept
        } else {
            ASSERT_EQ(static_cast<double>(f), v) << h;
            ASSERT_EQ(std::signbit(f), (h >> 15) != 0) << h;  // -0 stays -0
        }
    }
    EXPECT_EQ(fp16_to_fp32(0x3C00), 1.0f);
    EXPECT_EQ(fp16_to_fp32(0x3800), 0.5f);
    EXPECT_EQ(fp16_to_fp32(0xC000), -2.0f);
    EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
    EXPECT_EQ(fp16_to_fp32(0x03FF), std::ldexp(1023.0f, -24));
    EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.0f);
}

TEST(Fp16, RoundTripOfAllPatterns) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const uint16_t back = fp32_to_fp16(fp16_to_fp32(static_cast<uint16_t>(h)));
        const bool     nan  = ((h >> 10) & 31) == 31 && (h & 1023) != 0;
        if (nan) {  // NaN stays NaN with its sign; a signalling NaN is quietened (payload | 0x200)
            ASSERT_EQ(back, h | 0x200) << h;
        } else {
            ASSERT_EQ(back, h) << h;
        }
    }
}

// Oracle: the nearest finite fp16 (ties to the even pattern), or infinity at and beyond 65520.
uint16_t f16_oracle(float x, const std::vector<std::pair<double, uint16_t>> & table) {
    const double   a    = std::fabs(static_cast<double>(x));
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    if (a >= 65520.0) return sign | 0x7C00;
    auto hi = std::lower_bound(table.begin(), table.end(), std::make_pair(a, uint16_t{0}));
    if (hi != table.end() && hi->first == a) return sign | hi->second;
    auto lo = hi - 1;
    const double dl = a - lo->first, dh = hi->first - a;
    if (dl < dh) return sign | lo->second;
    if (dh < dl) return sign | hi->second;
    return sign | ((lo->second & 1) == 0 ? lo->second : hi->second);
}

std::vector<std::pair<double, uint16_t>> positive_f16_table() {
    std::vector<std::pair<double, uint16_t>> t;
    for (uint16_t h = 0; h < 0x7C00; ++h) t.emplace_back(f16_value(h), h);
    return t;  // already increasing
}

TEST(Fp16, FromF32RoundsToNearestEvenAtEveryTie) {
    const auto table = positive_f16_table();
    int        ties  = 0;
    for (size_t i = 0; i + 1 < table.size(); ++i) {
        // The midpoint needs 12 significant bits: exact in f32.
        const float mid = static_cast<float>((table[i].first + table[i + 1].first) / 2);
        ASSERT_EQ(static_cast<double>(mid), (table[i].first + table[i + 1].first) / 2);
        const uint16_t even = (table[i].second & 1) == 0 ? table[i].second : table[i + 1].second;
        ASSERT_EQ(fp32_to_fp16(mid), even) << i;
        ASSERT_EQ(fp32_to_fp16(-mid), even | 0x8000) << i;
        ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 0.0f)), table[i].second) << i;
        ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 1e9f)), table[i + 1].second) << i;
        ++ties;
    }
    EXPECT_EQ(ties, 0x7C00 - 1);
    // Around the top: 65504 is the largest finite value; 65520 (the tie with 2^16) goes to inf.
    EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
    EXPECT_EQ(fp32_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
    EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);
    EXPECT_EQ(fp32_to_fp16(-65520.0f), 0xFC00);
    EXPECT_EQ(fp32_to_fp16(1e10f), 0x7C00);
    EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::max()), 0x7C00);
    EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7C00);
    EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xFC00);
    // Bottom: 2^-25 is the tie between 0 and the smallest subnormal and goes to 0 (even).
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);
    EXPECT_EQ(fp32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
    EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: tie between 1 and 2 -> 2
    EXPECT_EQ(fp32_to_fp16(-std::ldexp(1.0f, -26)), 0x8000);
    EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
    EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
    // Largest subnormal rounding up into the smallest normal.
    EXPECT_EQ(fp32_to_fp16(std::nextafter(std::ldexp(1.0f, -14), 0.0f)), 0x0400);
    EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
    EXPECT_EQ(fp32_to_fp16(std::nextafter(1.0f, 2.0f)), 0x3C00);
    const uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
    EXPECT_EQ(nan & 0x7C00, 0x7C00);
    EXPECT_NE(nan & 0x03FF, 0);
    EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(std::bit_cast<float>(0x7F800001u)))));  // sNaN with low payload
}

TEST(Fp16, FromF32MatchesOracleOnASweepOfAllExponents) {
    const auto      table = positive_f16_table();
    std::mt19937_64 rng(7);
    for (uint64_t i = 0; i < 400000; ++i) {
        // Stride through every exponent, plus random patterns.
        const uint32_t bits = (i & 1) ? static_cast<uint32_t>(rng()) : static_cast<uint32_t>(i * 10739);
        const float    x    = std::bit_cast<float>(bits);
        if (std::isnan(x)) continue;
        ASSERT_EQ(fp32_to_fp16(x), f16_oracle(x, table)) << std::hex << bits;
    }
    EXPECT_EQ(round_to_fp16(0.1f), static_cast<float>(f16_value(0x2E66)));
}

TEST(Bf16, RoundToNearestEven) {
    // bf16 is the top half of an f32: every pattern round-trips.
    for (uint32_t b = 0; b < 65536; ++b) {
        const float f = bf16_to_fp32(static_cast<uint16_t>(b));
        ASSERT_EQ(std::bit_cast<uint32_t>(f), b << 16);
        if (std::isnan(f)) {
            ASSERT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(f)))) << b;
            continue;
        }
        ASSERT_EQ(fp32_to_bf16(f), b) << b;
        // Exactly half way to the next pattern: ties to even (the next pattern when b is odd).
        if (((b >> 7) & 0xFF) == 0xFF) continue;  // inf and NaN have no "next"
        const float mid = std::bit_cast<float>((b << 16) | 0x8000u);
        ASSERT_EQ(fp32_to_bf16(mid), (b & 1) ? b + 1 : b) << b;
        ASSERT_EQ(fp32_to_bf16(std::bit_cast<float>((b << 16) | 0x7FFFu)), b) << b;
        ASSERT_EQ(fp32_to_bf16(std::bit_cast<float>((b << 16) | 0x8001u)), b + 1) << b;
    }
    EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
    EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie, even stays
    EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie, odd rounds up
    EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
    const uint16_t q = fp32_to_bf16(std::bit_cast<float>(0x7F800001u));  // NaN whose payload is all below bit 16
    EXPECT_TRUE(std::isnan(bf16_to_fp32(q))) << std::hex << q;
    EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
}

}  // namespace
}  // namespace tern
