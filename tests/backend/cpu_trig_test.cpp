// cpu::cos_sin_fixed, the RoPE angles' cos and sin on every backend and platform: worked values
// (correctly rounded, from a 200-bit evaluation), two where glibc's cosf / sinf are an ulp off (the
// values that made the WebAssembly build, which links musl's, generate other tokens than native),
// the edges, and whole RoPE tables against long double cos / sin rounded to f32.
#include "backend/cpu/cpu_ops.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>

using namespace tern;

namespace {

struct Worked {
    uint32_t x, cos, sin;
};

// The correctly rounded f32 of v, or nothing where v (accurate to ~2^-60 relative) lies too close
// to a midpoint between two floats to tell.
bool rounds_clearly(long double v) {
    const float       f    = static_cast<float>(v);
    const long double ulp  = std::ldexp(1.0L, std::ilogb(f == 0.0f ? 1e-30f : f) - 23);
    const long double frac = std::fabs(v - static_cast<long double>(f)) / ulp;  // 0 .. 0.5
    return std::fabs(frac - 0.5L) > 1e-6L;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// Every angle of a RoPE table (ggml's f32 recurrence) against long double cos / sin: the number of
// results that are not the correctly rounded f32 (those too close to a midpoint are not counted).
int64_t table_misses(float base, int64_t n_rot, int64_t n_pos, int64_t * checked) {
    const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
    int64_t     misses      = 0;
    for (int64_t pos = 0; pos < n_pos; ++pos) {
        float theta = static_cast<float>(pos);
        for (int64_t i = 0; i < n_rot / 2; ++i) {
            float c = 0.0f, s = 0.0f;
            cpu::cos_sin_fixed(theta, &c, &s);
            const long double lc = std::cos(static_cast<long double>(theta));
            const long double ls = std::sin(static_cast<long double>(theta));
            for (const auto & [got, want] : {std::pair{c, lc}, std::pair{s, ls}}) {
                if (!rounds_clearly(want)) continue;
                misses += bits(got) != bits(static_cast<float>(want));
                ++*checked;
            }
            theta *= theta_scale;
        }
    }
    return misses;
}

}  // namespace

TEST(CpuReference, CosSinFixedWorkedValues) {
    const Worked worked[] = {
        {0x3f0a6384u, 0x3f5b7f36u, 0x3f03bf12u},  // 0.54058099 (2B4T, position 1, pair 3): glibc's sinf gives ...11
        {0x3f6177bau, 0x3f22f74bu, 0x3f456dbeu},  // 0.88073313 (position 2, pair 4): glibc's cosf gives ...4c
        {0x3f800000u, 0x3f0a5140u, 0x3f576aa4u},  // 1
        {0x3fc90fdbu, 0xb33bbd2eu, 0x3f800000u},  // pi/2 as an f32
        {0x40490fdbu, 0xbf800000u, 0xb3bbbd2eu},  // pi as an f32
        {0x49742400u, 0x3f6fcefdu, 0xbeb33259u},  // 1e6
        {0x4b7fffffu, 0xbea29962u, 0xbf72bf60u},  // 2^24 - 1, the largest position
        {0xc0400000u, 0xbf7d7026u, 0xbe1081c3u},  // -3
        {0x457ff000u, 0xbd871e6cu, 0xbf7f7136u},  // 4095
        {0x00000001u, 0x3f800000u, 0x00000001u},  // the smallest subnormal
        {0x00000000u, 0x3f800000u, 0x00000000u},  // 0
        {0x80000000u, 0x3f800000u, 0x80000000u},  // -0
    };
    for (const Worked & w : worked) {
        float c = 0.0f, s = 0.0f;
        cpu::cos_sin_fixed(std::bit_cast<float>(w.x), &c, &s);
        EXPECT_EQ(bits(c), w.cos) << std::hex << "cos of 0x" << w.x;
        EXPECT_EQ(bits(s), w.sin) << std::hex << "sin of 0x" << w.x;
    }
    for (float x : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
        float c = 0.0f, s = 0.0f;
        cpu::cos_sin_fixed(x, &c, &s);
        EXPECT_TRUE(std::isnan(c) && std::isnan(s)) << x;
    }
}

TEST(CpuReference, CosSinFixedIsCorrectlyRoundedOnRopeTables) {
    int64_t checked = 0;
    EXPECT_EQ(table_misses(500000.0f, 128, 4096, &checked), 0) << "BitNet b1.58 2B4T, Llama 3";
    EXPECT_EQ(table_misses(10000.0f, 64, 2048, &checked), 0) << "base 10000, head 64";
    EXPECT_EQ(table_misses(1000000.0f, 128, 512, &checked), 0) << "Qwen3";
    EXPECT_GT(checked, 720000);  // of 720896 values
}

TEST(CpuReference, CosSinFixedOnRandomAnglesAndSymmetries) {
    std::mt19937                          rng(55);
    std::uniform_real_distribution<float> angle(-16777216.0f, 16777216.0f);
    int64_t                               misses = 0;
    for (int i = 0; i < 200000; ++i) {
        // Uniform over the range, and small angles (exponents spread evenly).
        const float x = i % 2 ? angle(rng) : std::ldexp(angle(rng) / 16777216.0f, -static_cast<int>(rng() % 40));
        float       c = 0.0f, s = 0.0f, cn = 0.0f, sn = 0.0f;
        cpu::cos_sin_fixed(x, &c, &s);
        cpu::cos_sin_fixed(-x, &cn, &sn);
        ASSERT_EQ(bits(cn), bits(c)) << x;
        ASSERT_EQ(bits(sn), bits(-s)) << x;
        const long double lc = std::cos(static_cast<long double>(x)), ls = std::sin(static_cast<long double>(x));
        if (rounds_clearly(lc)) misses += bits(c) != bits(static_cast<float>(lc));
        if (rounds_clearly(ls)) misses += bits(s) != bits(static_cast<float>(ls));
    }
    EXPECT_EQ(misses, 0);
}
