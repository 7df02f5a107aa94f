// Worked examples for the non-ternary block formats, derived by hand from FORMATS.md §3.8-§3.11
// (the derivation is in the comments; the expected values are not taken from the code).
#include "quant/block_formats.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace tern {
namespace {

// ------------------------------------------------------------------------------------ §3.8 Q4_0
// d = 0.5 (fp16 00 38). qs[j]: low nibble -> e(j), high nibble -> e(j+16); value = (nibble - 8) d.
//   qs[0]  = 0x86: e0  = (6-8)·0.5 = -1.0,  e16 = (8-8)·0.5 = 0
//   qs[5]  = 0x9C: e5  = (12-8)·0.5 = 2.0,  e21 = (9-8)·0.5 = 0.5
//   qs[15] = 0xF0: e15 = (0-8)·0.5 = -4.0,  e31 = (15-8)·0.5 = 3.5
//   other bytes 0x88: zeros.
TEST(Q4_0Example, Decode) {
    std::vector<uint8_t> b(18, 0x88);
    b[0]      = 0x00;
    b[1]      = 0x38;
    b[2 + 0]  = 0x86;
    b[2 + 5]  = 0x9C;
    b[2 + 15] = 0xF0;
    std::vector<float> want(32, 0.0f);
    want[0] = -1.0f, want[5] = 2.0f, want[21] = 0.5f, want[15] = -4.0f, want[31] = 3.5f;
    std::vector<float> out(32);
    q4_0_dequantize_block(b.data(), out.data());
    EXPECT_EQ(out, want);
    dequantize_row(DType::q4_0, b.data(), out.data(), 32);
    EXPECT_EQ(out, want);
}

// Reference quantizer: d = max / -8 with max the signed value of largest magnitude, so the
// extreme maps to nibble 0 exactly and the opposite end saturates at 15.
TEST(Q4_0Example, QuantizeKnownBlock) {
    std::vector<float> x(32, 0.0f);
    x[3]  = -4.0f;  // max = -4 -> d = 0.5, id = 2
    x[4]  = 1.0f;   // 1·2 + 8.5 = 10.5 -> 10
    x[20] = 3.5f;   // 7 + 8.5 = 15.5 -> 15
    x[9]  = -0.2f;  // -0.4 + 8.5 = 8.1 -> 8 (0)
    std::vector<uint8_t> b(18);
    q4_0_quantize_block_ref(x.data(), b.data());
    EXPECT_EQ(b[0], 0x00);
    EXPECT_EQ(b[1], 0x38);
    EXPECT_EQ(b[2 + 3], 0x80);   // e3 -> 0, e19 -> 8
    EXPECT_EQ(b[2 + 4], 0xFA);   // e4 -> 10, e20 -> 15
    EXPECT_EQ(b[2 + 9], 0x88);
    EXPECT_EQ(b[2 + 0], 0x88);
}

// ------------------------------------------------------------------------------------ §3.9 Q8_0
// d = 0.25 (fp16 00 34); value = int8(qs[e]) · d.
TEST(Q8_0Example, Decode) {
    std::vector<uint8_t> b(34, 0x00);
    b[1]      = 0x34;
    b[2 + 0]  = 0x81;  // -127 -> -31.75
    b[2 + 5]  = 0x7F;  // 127  -> 31.75
    b[2 + 6]  = 0x80;  // -128 -> -32
    b[2 + 31] = 0xFF;  // -1   -> -0.25
    std::vector<float> want(32, 0.0f);
    want[0] = -31.75f, want[5] = 31.75f, want[6] = -32.0f, want[31] = -0.25f;
    std::vector<float> out(32);
    q8_0_dequantize_block(b.data(), out.data());
    EXPECT_EQ(out, want);
}

TEST(Q8_0Example, QuantizeKnownBlock) {
    std::vector<float> x(32, 0.0f);
    x[0] = 127.0f;   // amax 127 -> d = 1 (fp16 00 3C)
    x[1] = -2.5f;    // round half away from zero: -3
    x[2] = 0.5f;     // 1
    x[3] = -127.0f;
    std::vector<uint8_t> b(34);
    q8_0_quantize_block_ref(x.data(), b.data());
    EXPECT_EQ(b[0], 0x00);
    EXPECT_EQ(b[1], 0x3C);
    EXPECT_EQ(static_cast<int8_t>(b[2]), 127);
    EXPECT_EQ(static_cast<int8_t>(b[3]), -3);
    EXPECT_EQ(static_cast<int8_t>(b[4]), 1);
    EXPECT_EQ(static_cast<int8_t>(b[5]), -127);
}

// ------------------------------------------------------------------------------------ §3.10 Q4_K
// d = 1 (00 3C), dmin = 0.5 (00 38). Chosen six-bit scales and mins, with sub-blocks 4..7 using
// their top two bits so that the split across bytes is exercised:
//   sc = 1, 2, 3, 4, 17 (01 0001), 33 (10 0001), 50 (11 0010), 63 (11 1111)
//   m  = 0, 1, 5, 10, 20 (01 0100), 40 (10 1000), 60 (11 1100), 35 (10 0011)
// scales[12], from the ownership map:
//   bytes 0..3  = sc(j) | hi2(sc(4+j)) << 6 : 0x41 0x82 0xC3 0xC4
//   bytes 4..7  = m(j)  | hi2(m(4+j))  << 6 : 0x40 0x81 0xC5 0x8A
//   bytes 8..11 = lo4(sc(4+j)) | lo4(m(4+j)) << 4 : 0x41 0x81 0xC2 0x3F
// qs (chunk c = 64 elements; low nibble -> sub-block 2c, high -> 2c+1), all zero except
//   qs[0]       = 0x21: e0   (s0) q=1,  e32  (s1) q=2
//   qs[64 + 5]  = 0xF3: e133 (s4) q=3,  e165 (s5) q=15
//   qs[96 + 31] = 0x7E: e223 (s6) q=14, e255 (s7) q=7
// value = d·sc·q − dmin·m:
//   e0 = 1·1·1 − 0 = 1;  e32 = 2·2 − 0.5 = 3.5;  e133 = 17·3 − 10 = 41;  e165 = 33·15 − 20 = 475
//   e223 = 50·14 − 30 = 670;  e255 = 63·7 − 17.5 = 423.5
//   every other element of sub-block s is −dmin·m(s): 0, −0.5, −2.5, −5, −10, −20, −30, −17.5
TEST(Q4_KExample, Decode) {
    std::vector<uint8_t> b(144, 0x00);
    b[1] = 0x3C;
    b[3] = 0x38;
    const uint8_t scales[12] = {0x41, 0x82, 0xC3, 0xC4, 0x40, 0x81, 0xC5, 0x8A, 0x41, 0x81, 0xC2, 0x3F};
    std::copy(scales, scales + 12, b.begin() + 4);
    b[16 + 0]       = 0x21;
    b[16 + 64 + 5]  = 0xF3;
    b[16 + 96 + 31] = 0x7E;
    const float        base[8] = {0, -0.5f, -2.5f, -5, -10, -20, -30, -17.5f};
    std::vector<float> want(256);
    for (int e = 0; e < 256; ++e) want[static_cast<size_t>(e)] = base[e / 32];
    want[0] = 1, want[32] = 3.5f, want[133] = 41, want[165] = 475, want[223] = 670, want[255] = 423.5f;
    std::vector<float> out(256);
    q4_k_dequantize_block(b.data(), out.data());
    EXPECT_EQ(out, want);
    dequantize_row(DType::q4_k, b.data(), out.data(), 256);
    EXPECT_EQ(out, want);
}

// ------------------------------------------------------------------------------------ §3.11 Q6_K
// d = 0.5 (00 38 at bytes 208..209), scales[e/16] = 1..16 except scales[9] = −3.
// Neutral bytes: ql = 0x00 and qh = 0xAA (every pair 2), so q = 0 | 2<<4 = 32 -> value 0.
// Half 0, l = 3:  ql[3] = 0xA5, ql[35] = 0x3C, qh[3] = 0xE4 (pairs, bit 0 up: 0, 1, 2, 3)
//   e3  = 5   | 0<<4 = 5  -> (5−32)  · 0.5 · sc0(1)  = −13.5
//   e35 = 0xC | 1<<4 = 28 -> (−4)    · 0.5 · sc2(3)  = −6
//   e67 = 0xA | 2<<4 = 42 -> 10      · 0.5 · sc4(5)  = 25
//   e99 = 3   | 3<<4 = 51 -> 19      · 0.5 · sc6(7)  = 66.5
// Half 1, l = 30: ql[94] = 0x0F, ql[126] = 0xF1, qh[62] = 0x1B (pairs: 3, 2, 1, 0)
//   e158 = 0xF | 3<<4 = 63 -> 31     · 0.5 · sc9(−3)  = −46.5
//   e190 = 1   | 2<<4 = 33 -> 1      · 0.5 · sc11(12) = 6
//   e222 = 0   | 1<<4 = 16 -> (−16)  · 0.5 · sc13(14) = −112
//   e254 = 0xF | 0<<4 = 15 -> (−17)  · 0.5 · sc15(16) = −136
TEST(Q6_KExample, Decode) {
    std::vector<uint8_t> b(210, 0x00);
    std::fill(b.begin() + 128, b.begin() + 192, 0xAA);
    b[3]        = 0xA5;
    b[35]       = 0x3C;
    b[128 + 3]  = 0xE4;
    b[94]       = 0x0F;
    b[126]      = 0xF1;
    b[128 + 62] = 0x1B;
    for (int j = 0; j < 16; ++j) b[static_cast<size_t>(192 + j)] = static_cast<uint8_t>(j + 1);
    b[192 + 9] = static_cast<uint8_t>(int8_t{-3});
    b[208]     = 0x00;
    b[209]     = 0x38;
    std::vector<float> want(256, 0.0f);
    const std::map<int, float> nz = {{3, -13.5f}, {35, -6},   {67, 25},    {99, 66.5f},
                                     {158, -46.5f}, {190, 6}, {222, -112}, {254, -136}};
    for (const auto & [e, v] : nz) want[static_cast<size_t>(e)] = v;
    std::vector<float> out(256);
    q6_k_dequantize_block(b.data(), out.data());
    EXPECT_EQ(out, want);
    dequantize_row(DType::q6_k, b.data(), out.data(), 256);
    EXPECT_EQ(out, want);
}

// ------------------------------------------------------------------------------------ §3.1

TEST(PlainTypes, F16AndBf16RowsAreLittleEndian) {
    const uint8_t      f16[6]  = {0x00, 0x3C, 0x00, 0x38, 0x00, 0xC0};  // 1.0, 0.5, -2.0 (§3.0)
    const uint8_t      bf16[4] = {0x80, 0x3F, 0x40, 0xC0};              // 1.0, -3.0
    std::vector<float> out(3);
    dequantize_row(DType::f16, f16, out.data(), 3);
    EXPECT_EQ(out, (std::vector<float>{1.0f, 0.5f, -2.0f}));
    out.resize(2);
    dequantize_row(DType::bf16, bf16, out.data(), 2);
    EXPECT_EQ(out, (std::vector<float>{1.0f, -3.0f}));
    std::vector<uint8_t> back(6);
    const float          x[3] = {1.0f, 0.5f, -2.0f};
    quantize_row(DType::f16, x, back.data(), 3);
    EXPECT_EQ(back, std::vector<uint8_t>(f16, f16 + 6));
}

}  // namespace
}  // namespace tern
