// The worked examples of FORMATS.md §3.2.5 (I2_S), §3.3 (TQ2_0), §3.4 (TQ1_0), §3.5 (Q2_0 g64 /
// g128), §3.6 (Q1_0) and the cross-format table of §3.13 (byte 0x86), as literal bytes in and
// literal values out. Each decoder is also run through the generic row entry points, and each
// packer must reproduce the example bytes from the decoded values.
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

namespace tern {
namespace {

// n values, all zero except the listed ones.
std::vector<float> sparse(size_t n, const std::map<int, float> & nonzero) {
    std::vector<float> v(n, 0.0f);
    for (const auto & [i, x] : nonzero) v[static_cast<size_t>(i)] = x;
    return v;
}

std::vector<float> scaled(const std::vector<int8_t> & v, float d) {
    std::vector<float> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]) * d;
    return out;
}

// ------------------------------------------------------------------------------------ §3.2.5

// 64-byte I2_S tensor of 128 elements: codes, f32 scale 0.5, 28 unspecified bytes.
std::vector<uint8_t> i2s_example(uint8_t tail_fill) {
    std::vector<uint8_t> t(64, 0x55);
    t[0]  = 0x86;
    t[31] = 0x24;
    const uint8_t scale[4] = {0x00, 0x00, 0x00, 0x3F};
    std::memcpy(&t[32], scale, 4);
    for (size_t i = 36; i < 64; ++i) t[i] = static_cast<uint8_t>(tail_fill + 37 * i);
    return t;
}

const std::map<int, float> k_i2s_expected = {{0, 0.5f}, {31, -0.5f}, {32, -0.5f}, {63, 0.5f}, {96, 0.5f}, {127, -0.5f}};

TEST(I2sExample, Decode128) {
    const auto expected = sparse(128, k_i2s_expected);
    for (uint8_t tail : {uint8_t{0}, uint8_t{0xA5}, uint8_t{0xFF}}) {  // the 28 bytes after the scale do not matter
        SCOPED_TRACE(int(tail));
        const auto t = i2s_example(tail);
        EXPECT_EQ(i2s_tensor_scale(t, 128), 0.5f);
        std::vector<int8_t> v(128);
        i2s_decode(t.data(), 0, 128, v.data());
        EXPECT_EQ(scaled(v, 0.5f), expected);

        std::vector<float> row(128);
        dequantize_tensor_row(DType::i2_s, t, 128, 128, 0, row.data());
        EXPECT_EQ(row, expected);

        float scale = 0;
        std::fill(v.begin(), v.end(), int8_t{9});
        lowbit_decode_row(DType::i2_s, t, 128, 0, 128, v.data(), &scale);
        EXPECT_EQ(scale, 0.5f);
        EXPECT_EQ(scaled(v, scale), expected);
        EXPECT_EQ(i2s_count_code3(t.data(), 128), 0);
    }
    // Packing the decoded values gives the example back, with a zero tail (tern's writer).
    std::vector<int8_t> v(128);
    i2s_decode(i2s_example(0).data(), 0, 128, v.data());
    std::vector<uint8_t> packed(64, 0xEE);
    i2s_pack(v.data(), 128, 0.5f, packed.data());
    auto want = i2s_example(0);
    std::fill(want.begin() + 36, want.end(), 0);
    EXPECT_EQ(packed, want);
}

TEST(I2sExample, TwoRows) {
    // ne0 = 128, ne1 = 2: row 1 is bytes 32..63 and the scale sits at offset 64 (n/4).
    std::vector<uint8_t> t(96, 0x55);
    t[32]                  = 0x86;
    t[63]                  = 0x24;
    const uint8_t scale[4] = {0x00, 0x00, 0x00, 0x3F};
    std::memcpy(&t[64], scale, 4);
    for (size_t i = 68; i < 96; ++i) t[i] = static_cast<uint8_t>(i * 91);
    EXPECT_EQ(i2s_tensor_scale(t, 256), 0.5f);
    std::vector<float> row(128);
    dequantize_tensor_row(DType::i2_s, t, 256, 128, 1, row.data());
    EXPECT_EQ(row, sparse(128, k_i2s_expected));
    dequantize_tensor_row(DType::i2_s, t, 256, 128, 0, row.data());
    EXPECT_EQ(row, sparse(128, {}));
    std::vector<int8_t> v(256);
    i2s_decode(t.data(), 0, 256, v.data());
    for (const auto & [i, x] : k_i2s_expected) EXPECT_EQ(v[static_cast<size_t>(128 + i)], x > 0 ? 1 : -1) << i;
    std::vector<int8_t> second(128);
    i2s_decode(t.data(), 128, 128, second.data());  // decoding from an offset
    EXPECT_TRUE(std::equal(second.begin(), second.end(), v.begin() + 128));
}

// The rejected ARM layout (§3.2.4): 64-element blocks of 16 bytes, byte p holding 64b+p, +16, +32,
// +48 in bits 7..6 .. 1..0. Written here from the spec only to show that tern does not read it.
std::vector<float> decode_arm_64_16(const std::vector<uint8_t> & t, int64_t n, float scale) {
    static constexpr int k_value[4] = {-1, 0, 1, 0};
    std::vector<float>   out(static_cast<size_t>(n));
    for (int64_t b = 0; b < n / 64; ++b) {
        for (int p = 0; p < 16; ++p) {
            const uint8_t byte = t[static_cast<size_t>(16 * b + p)];
            for (int g = 0; g < 4; ++g) {
                out[static_cast<size_t>(64 * b + p + 16 * g)] = scale * static_cast<float>(k_value[(byte >> (6 - 2 * g)) & 3]);
            }
        }
    }
    return out;
}

TEST(I2sExample, ArmLayoutReadsDifferently) {
    const auto t   = i2s_example(0);
    const auto arm = decode_arm_64_16(t, 128, 0.5f);
    EXPECT_EQ(arm, sparse(128, {{0, 0.5f}, {16, -0.5f}, {48, 0.5f}, {79, -0.5f}, {95, 0.5f}, {127, -0.5f}}));
    std::vector<float> row(128);
    dequantize_tensor_row(DType::i2_s, t, 128, 128, 0, row.data());
    EXPECT_NE(row, arm);
}

TEST(I2sExample, Code3DecodesAsZeroAndIsCounted) {
    std::vector<uint8_t> t(64, 0x55);
    t[5] = 0xFF;  // four code-3 fields: elements 5, 37, 69, 101
    t[6] = 0x7D;  // 01 11 11 01: elements 38, 70
    std::vector<int8_t> v(128);
    i2s_decode(t.data(), 0, 128, v.data());
    for (int8_t x : v) EXPECT_EQ(x, 0);
    EXPECT_EQ(i2s_count_code3(t.data(), 128), 6);
}

// ------------------------------------------------------------------------------------ §3.3

TEST(Tq2_0Example, Decode) {
    std::vector<uint8_t> b(66, 0x55);
    b[0]  = 0x86;
    b[64] = 0x00;
    b[65] = 0x38;  // d = 0.5, last
    const auto          expected = sparse(256, {{0, 0.5f}, {64, -0.5f}, {96, 0.5f}});
    std::vector<int8_t> v(256);
    float               d = 0;
    tq2_0_decode_block(b.data(), v.data(), d);
    EXPECT_EQ(d, 0.5f);
    EXPECT_EQ(scaled(v, d), expected);
    std::vector<float> row(256);
    dequantize_row(DType::tq2_0, b.data(), row.data(), 256);
    EXPECT_EQ(row, expected);
    std::vector<uint8_t> packed(66);
    tq2_0_pack_block(v.data(), d, packed.data());
    EXPECT_EQ(packed, b);
}

TEST(Tq2_0Example, SecondHalfUsesBytes32To63) {
    std::vector<uint8_t> b(66, 0x55);
    b[32 + 7] = 0x86;  // g = 1, m = 7: elements 128+7, +32, +64, +96
    b[64]     = 0x00;
    b[65]     = 0x3C;  // d = 1
    std::vector<int8_t> v(256);
    float               d = 0;
    tq2_0_decode_block(b.data(), v.data(), d);
    std::vector<float> want = sparse(256, {{135, 1.f}, {199, -1.f}, {231, 1.f}});
    EXPECT_EQ(scaled(v, d), want);
}

// ------------------------------------------------------------------------------------ §3.4

TEST(Tq1_0Codec, FourConstants) {
    const uint8_t ones5[5] = {1, 1, 1, 1, 1}, ones4[4] = {1, 1, 1, 1};
    const uint8_t t5[5] = {2, 0, 1, 1, 0}, t4[4] = {2, 1, 0, 2};
    EXPECT_EQ(tq1_0_encode_trits(ones5, 5), 0x80);
    EXPECT_EQ(tq1_0_encode_trits(ones4, 4), 0x7F);
    EXPECT_EQ(tq1_0_encode_trits(t5, 5), 0xB8);
    EXPECT_EQ(tq1_0_encode_trits(t4, 4), 0xCE);
    for (int n = 0; n < 5; ++n) {
        EXPECT_EQ(tq1_0_trit(0xB8, n), t5[n]) << n;
        EXPECT_EQ(tq1_0_trit(0x80, n), 1) << n;
    }
    for (int n = 0; n < 4; ++n) {
        EXPECT_EQ(tq1_0_trit(0xCE, n), t4[n]) << n;
        EXPECT_EQ(tq1_0_trit(0x7F, n), 1) << n;
    }
}

TEST(Tq1_0Codec, All243FiveTritAnd81FourTritPatterns) {
    std::vector<bool> seen(256, false);
    for (int v = 0; v < 243; ++v) {
        const uint8_t t[5] = {uint8_t(v / 81), uint8_t(v / 27 % 3), uint8_t(v / 9 % 3), uint8_t(v / 3 % 3), uint8_t(v % 3)};
        const uint8_t b    = tq1_0_encode_trits(t, 5);
        EXPECT_EQ(b, (v * 256 + 242) / 243) << v;  // ceil(v·256/243)
        EXPECT_FALSE(seen[b]) << v;
        seen[b] = true;
        for (int n = 0; n < 5; ++n) ASSERT_EQ(tq1_0_trit(b, n), t[n]) << v << " trit " << n;
    }
    for (int v = 0; v < 81; ++v) {
        const uint8_t t[4] = {uint8_t(v / 27), uint8_t(v / 9 % 3), uint8_t(v / 3 % 3), uint8_t(v % 3)};
        const uint8_t b    = tq1_0_encode_trits(t, 4);
        EXPECT_EQ(b, (3 * v * 256 + 242) / 243) << v;
        for (int n = 0; n < 4; ++n) ASSERT_EQ(tq1_0_trit(b, n), t[n]) << v << " trit " << n;
        EXPECT_EQ(tq1_0_trit(b, 4), 0) << v;  // the implicit fifth trit
    }
}

std::vector<uint8_t> tq1_0_example() {
    std::vector<uint8_t> b(54, 0x80);
    b[0]  = 0xB8;
    b[32] = 0xB8;
    b[48] = 0xCE;
    b[49] = b[50] = b[51] = 0x7F;
    b[52] = 0x00;
    b[53] = 0x38;
    return b;
}

TEST(Tq1_0Example, Decode) {
    const auto b        = tq1_0_example();
    const auto expected = sparse(256, {{0, 0.5f}, {32, -0.5f}, {128, -0.5f}, {160, 0.5f}, {176, -0.5f}, {224, -0.5f},
                                       {240, 0.5f}, {248, -0.5f}, {252, 0.5f}});
    std::vector<int8_t> v(256);
    float               d = 0;
    tq1_0_decode_block(b.data(), v.data(), d);
    EXPECT_EQ(d, 0.5f);
    EXPECT_EQ(scaled(v, d), expected);
    std::vector<float> row(256);
    dequantize_row(DType::tq1_0, b.data(), row.data(), 256);
    EXPECT_EQ(row, expected);
    std::vector<uint8_t> packed(54);
    tq1_0_pack_block(v.data(), d, packed.data());
    EXPECT_EQ(packed, b);
}

// ------------------------------------------------------------------------------------ §3.5

TEST(Q2_0Example, G64) {
    std::vector<uint8_t> b = {0x00, 0x38, 0x86};
    b.insert(b.end(), 14, 0x55);
    b.push_back(0x19);
    ASSERT_EQ(b.size(), 18u);
    const auto          expected = sparse(64, {{0, 0.5f}, {2, -0.5f}, {3, 0.5f}, {61, 0.5f}, {63, -0.5f}});
    std::vector<int8_t> v(64);
    float               d = 0;
    q2_0_decode_block(b.data(), 64, v.data(), d);
    EXPECT_EQ(d, 0.5f);
    EXPECT_EQ(scaled(v, d), expected);
    std::vector<float> row(64);
    dequantize_row(DType::q2_0, b.data(), row.data(), 64);
    EXPECT_EQ(row, expected);
    std::vector<uint8_t> packed(18);
    q2_0_pack_block(v.data(), 64, d, packed.data());
    EXPECT_EQ(packed, b);
}

TEST(Q2_0Example, G128) {
    std::vector<uint8_t> b = {0x00, 0x38, 0x86};
    b.insert(b.end(), 30, 0x55);
    b.push_back(0x19);
    ASSERT_EQ(b.size(), 34u);
    const auto          expected = sparse(128, {{0, 0.5f}, {2, -0.5f}, {3, 0.5f}, {125, 0.5f}, {127, -0.5f}});
    std::vector<int8_t> v(128);
    float               d = 0;
    q2_0_decode_block(b.data(), 128, v.data(), d);
    EXPECT_EQ(scaled(v, d), expected);
    std::vector<float> row(128);
    dequantize_row(DType::pq2_0, b.data(), row.data(), 128);
    EXPECT_EQ(row, expected);
    std::vector<uint8_t> packed(34);
    q2_0_pack_block(v.data(), 128, d, packed.data());
    EXPECT_EQ(packed, b);
}

TEST(Q2_0Example, Code3IsPlusTwo) {
    std::vector<uint8_t> b(18, 0x55);
    b[0] = 0x00;
    b[1] = 0x3C;  // d = 1
    b[2] = 0xC7;  // 11 00 01 11: e0 = +2, e1 = 0, e2 = -1, e3 = +2
    std::vector<float> row(64);
    dequantize_row(DType::q2_0, b.data(), row.data(), 64);
    EXPECT_EQ(row, sparse(64, {{0, 2.f}, {2, -1.f}, {3, 2.f}}));
}

// ------------------------------------------------------------------------------------ §3.6

TEST(Q1_0Example, Decode) {
    std::vector<uint8_t> b = {0x00, 0x38, 0x86};
    b.insert(b.end(), 15, 0x00);
    std::vector<float> expected(128, -0.5f);
    expected[1] = expected[2] = expected[7] = 0.5f;
    std::vector<int8_t> v(128);
    float               d = 0;
    q1_0_decode_block(b.data(), v.data(), d);
    EXPECT_EQ(d, 0.5f);
    EXPECT_EQ(scaled(v, d), expected);
    std::vector<float> row(128);
    dequantize_row(DType::q1_0, b.data(), row.data(), 128);
    EXPECT_EQ(row, expected);
    std::vector<uint8_t> packed(18);
    q1_0_pack_block(v.data(), d, packed.data());
    EXPECT_EQ(packed, b);
}

// ------------------------------------------------------------------------------------ §3.13

// The byte 0x86 (1000 0110) in each format, with every other byte neutral and the scale 1.
TEST(CrossFormat, Byte0x86) {
    {  // I2_S 128/32: e0 = +1, e32 = -1, e64 = 0, e96 = +1 (MSB pair first)
        std::vector<uint8_t> t(64, 0x55);
        t[0]                   = 0x86;
        const float one        = 1.0f;
        std::memcpy(&t[32], &one, 4);
        std::vector<float> row(128);
        dequantize_tensor_row(DType::i2_s, t, 128, 128, 0, row.data());
        EXPECT_EQ(row, sparse(128, {{0, 1.f}, {32, -1.f}, {96, 1.f}}));
        // the ARM 64/16 reading of the same byte: e0 = +1, e16 = -1, e32 = 0, e48 = +1
        EXPECT_EQ(decode_arm_64_16(t, 128, 1.0f), sparse(128, {{0, 1.f}, {16, -1.f}, {48, 1.f}}));
    }
    {  // TQ2_0 qs[0]: e0 = +1, e32 = 0, e64 = -1, e96 = +1 (LSB pair first)
        std::vector<uint8_t> b(66, 0x55);
        b[0]  = 0x86;
        b[64] = 0x00;
        b[65] = 0x3C;
        std::vector<float> row(256);
        dequantize_row(DType::tq2_0, b.data(), row.data(), 256);
        EXPECT_EQ(row, sparse(256, {{0, 1.f}, {64, -1.f}, {96, 1.f}}));
    }
    for (DType t : {DType::q2_0, DType::pq2_0}) {  // qs[0]: e0 = +1, e1 = 0, e2 = -1, e3 = +1
        const size_t         qk = t == DType::q2_0 ? 64 : 128;
        std::vector<uint8_t> b(2 + qk / 4, 0x55);
        b[0] = 0x00;
        b[1] = 0x3C;
        b[2] = 0x86;
        std::vector<float> row(qk);
        dequantize_row(t, b.data(), row.data(), static_cast<int64_t>(qk));
        EXPECT_EQ(row, sparse(qk, {{0, 1.f}, {2, -1.f}, {3, 1.f}}));
    }
    {  // Q1_0 qs[0]: e0 = -1, e1 = +1, e2 = +1, e3..e6 = -1, e7 = +1 (then the other bytes: all +1)
        std::vector<uint8_t> b(18, 0xFF);
        b[0] = 0x00;
        b[1] = 0x3C;
        b[2] = 0x86;
        std::vector<float> row(128);
        dequantize_row(DType::q1_0, b.data(), row.data(), 128);
        const float want[8] = {-1, 1, 1, -1, -1, -1, -1, 1};
        for (int e = 0; e < 8; ++e) EXPECT_EQ(row[static_cast<size_t>(e)], want[e]) << e;
        for (int e = 8; e < 128; ++e) EXPECT_EQ(row[static_cast<size_t>(e)], 1.f) << e;
    }
    {  // TQ1_0 qs[0] = 134: trits (1,1,2,0,1), so e0 = 0, e32 = 0, e64 = +1, e96 = -1, e128 = 0
        std::vector<uint8_t> b(54, 0x80);
        b[0]  = 0x86;
        b[48] = b[49] = b[50] = b[51] = 0x7F;
        b[52] = 0x00;
        b[53] = 0x3C;
        std::vector<float> row(256);
        dequantize_row(DType::tq1_0, b.data(), row.data(), 256);
        EXPECT_EQ(row, sparse(256, {{64, 1.f}, {96, -1.f}}));
    }
}

}  // namespace
}  // namespace tern
