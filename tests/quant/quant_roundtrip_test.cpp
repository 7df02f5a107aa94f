// Random-data round trips for every low-bit layout, with awkward row counts, checked against
// reference encoders written here from the decode formulas of FORMATS.md §3.2-§3.6 (so that a
// packer and decoder that are wrong in the same way still fail), and quantize_row ->
// dequantize_row error bounds for the block formats (§3.8-§3.11) derived from each quantizer.
#include "core/fp16.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace tern {
namespace {

// ------------------------------------------------------------------- spec reference encoders
// Each writes element values v (with per-block d) into the bytes the §3 formula reads them from.

uint8_t code(int v) { return static_cast<uint8_t>(v + 1); }

void put_f16(uint8_t * p, float d) {
    const uint16_t h = fp32_to_fp16(d);
    p[0]             = static_cast<uint8_t>(h & 0xFF);
    p[1]             = static_cast<uint8_t>(h >> 8);
}

// I2_S §3.2.3: byte 32·(f div 128) + (f mod 128) mod 32, shift 6 − 2·((f mod 128) div 32).
std::vector<uint8_t> ref_i2s(const std::vector<int8_t> & v, float scale) {
    const size_t         n = v.size();
    std::vector<uint8_t> t(n / 4 + 32, 0);
    for (size_t f = 0; f < n; ++f) {
        const size_t j = f % 128;
        t[32 * (f / 128) + j % 32] |= static_cast<uint8_t>(code(v[f]) << (6 - 2 * (j / 32)));
    }
    std::memcpy(&t[n / 4], &scale, 4);
    return t;
}

// TQ2_0 §3.3: code of e at qs[32·(e div 128) + e mod 32] >> 2·((e mod 128) div 32); d at 64.
void ref_tq2_0(const int8_t * v, float d, uint8_t * b) {
    std::memset(b, 0, 66);
    for (int e = 0; e < 256; ++e) b[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(code(v[e]) << (2 * ((e % 128) / 32)));
    put_f16(b + 64, d);
}

// TQ1_0 §3.4 trit map; enc(v) = (v·256 + 242) div 243.
void ref_tq1_0(const int8_t * v, float d, uint8_t * b) {
    auto t   = [&](int e) { return static_cast<unsigned>(code(v[e])); };
    auto enc = [](unsigned x) { return static_cast<uint8_t>((x * 256 + 242) / 243); };
    for (int m = 0; m < 32; ++m) b[m] = enc(t(m) * 81 + t(m + 32) * 27 + t(m + 64) * 9 + t(m + 96) * 3 + t(m + 128));
    for (int m = 0; m < 16; ++m) {
        b[32 + m] = enc(t(160 + m) * 81 + t(176 + m) * 27 + t(192 + m) * 9 + t(208 + m) * 3 + t(224 + m));
    }
    for (int j = 0; j < 4; ++j) b[48 + j] = enc(3 * (t(240 + j) * 27 + t(244 + j) * 9 + t(248 + j) * 3 + t(252 + j)));
    put_f16(b + 52, d);
}

// Q2_0 / PQ2_0 §3.5: d first; code of e at qs[e div 4] >> 2·(e mod 4).
void ref_q2_0(const int8_t * v, int qk, float d, uint8_t * b) {
    put_f16(b, d);
    std::memset(b + 2, 0, static_cast<size_t>(qk / 4));
    for (int e = 0; e < qk; ++e) b[2 + e / 4] |= static_cast<uint8_t>(code(v[e]) << (2 * (e % 4)));
}

// Q1_0 §3.6: bit e mod 8 of qs[e div 8] set for +d.
void ref_q1_0(const int8_t * v, float d, uint8_t * b) {
    put_f16(b, d);
    std::memset(b + 2, 0, 16);
    for (int e = 0; e < 128; ++e) b[2 + e / 8] |= static_cast<uint8_t>((v[e] > 0 ? 1 : 0) << (e % 8));
}

struct LowBit {
    DType type;
    int   qk;
    int   bytes;
    int   lo, hi;  // value range the layout stores
};
const LowBit k_lowbit[] = {
    {DType::tq1_0, 256, 54, -1, 1}, {DType::tq2_0, 256, 66, -1, 1}, {DType::q2_0, 64, 18, -1, 2},
    {DType::pq2_0, 128, 34, -1, 2}, {DType::q1_0, 128, 18, -1, 1},
};

void pack_ref(const LowBit & lb, const int8_t * v, float d, uint8_t * b) {
    switch (lb.type) {
        case DType::tq1_0: ref_tq1_0(v, d, b); break;
        case DType::tq2_0: ref_tq2_0(v, d, b); break;
        case DType::q2_0: ref_q2_0(v, 64, d, b); break;
        case DType::pq2_0: ref_q2_0(v, 128, d, b); break;
        default: ref_q1_0(v, d, b); break;
    }
}

void pack_code(const LowBit & lb, const int8_t * v, float d, uint8_t * b) {
    switch (lb.type) {
        case DType::tq1_0: tq1_0_pack_block(v, d, b); break;
        case DType::tq2_0: tq2_0_pack_block(v, d, b); break;
        case DType::q2_0: q2_0_pack_block(v, 64, d, b); break;
        case DType::pq2_0: q2_0_pack_block(v, 128, d, b); break;
        default: q1_0_pack_block(v, d, b); break;
    }
}

TEST(LowBitRoundTrip, RandomTernaryRowsOfAwkwardShapes) {
    std::mt19937 rng(1234);
    for (const auto & lb : k_lowbit) {
        SCOPED_TRACE(std::string(dtype_name(lb.type)));
        EXPECT_TRUE(dtype_is_lowbit(lb.type));
        for (int rows : {1, 3, 7, 13}) {
            for (int blocks : {1, 3}) {
                const int64_t        k = static_cast<int64_t>(lb.qk) * blocks;
                const size_t         n = static_cast<size_t>(k) * static_cast<size_t>(rows);
                std::vector<int8_t>  v(n);
                std::vector<float>   d(n / static_cast<size_t>(lb.qk));
                std::vector<uint8_t> mine(d.size() * static_cast<size_t>(lb.bytes)), ref(mine.size());
                for (auto & x : v) {
                    x = static_cast<int8_t>(lb.lo + static_cast<int>(rng() % static_cast<unsigned>(lb.hi - lb.lo + 1)));
                    if (lb.type == DType::q1_0 && x == 0) x = 1;
                }
                for (size_t b = 0; b < d.size(); ++b) {
                    d[b] = round_to_fp16(std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f,
                                                    -static_cast<int>(rng() % 12)));
                    pack_code(lb, &v[b * static_cast<size_t>(lb.qk)], d[b], &mine[b * static_cast<size_t>(lb.bytes)]);
                    pack_ref(lb, &v[b * static_cast<size_t>(lb.qk)], d[b], &ref[b * static_cast<size_t>(lb.bytes)]);
                }
                ASSERT_EQ(mine, ref) << rows << "x" << k;
                // Decode every row back through both generic entry points.
                const int64_t       group = lowbit_scale_group(lb.type, k);
                std::vector<int8_t> row(static_cast<size_t>(k));
                std::vector<float>  scales(static_cast<size_t>(k / group)), deq(static_cast<size_t>(k));
                for (int r = 0; r < rows; ++r) {
                    lowbit_decode_row(lb.type, mine, static_cast<int64_t>(n), r, k, row.data(), scales.data());
                    dequantize_tensor_row(lb.type, mine, static_cast<int64_t>(n), k, r, deq.data());
                    for (int64_t e = 0; e < k; ++e) {
                        const size_t f = static_cast<size_t>(r * k + e);
                        ASSERT_EQ(row[static_cast<size_t>(e)], v[f]) << r << " " << e;
                        ASSERT_EQ(scales[static_cast<size_t>(e / group)], d[f / static_cast<size_t>(lb.qk)]);
                        ASSERT_EQ(deq[static_cast<size_t>(e)], static_cast<float>(v[f]) * d[f / static_cast<size_t>(lb.qk)]);
                    }
                }
            }
        }
    }
}

TEST(LowBitRoundTrip, I2sRandomTensors) {
    std::mt19937 rng(99);
    for (int rows : {1, 3, 7, 13}) {
        for (int64_t k : {128, 384, 640}) {
            const size_t        n = static_cast<size_t>(k) * static_cast<size_t>(rows);
            std::vector<int8_t> v(n);
            for (auto & x : v) x = static_cast<int8_t>(static_cast<int>(rng() % 3) - 1);
            const float          scale = 0.75f + static_cast<float>(rng() % 100) / 64.0f;
            std::vector<uint8_t> t(n / 4 + 32, 0xCC);
            i2s_pack(v.data(), static_cast<int64_t>(n), scale, t.data());
            ASSERT_EQ(t, ref_i2s(v, scale)) << rows << "x" << k;  // the tail is zero in tern's files
            EXPECT_EQ(lowbit_scale_group(DType::i2_s, k), k);
            std::vector<int8_t> row(static_cast<size_t>(k));
            std::vector<float>  deq(static_cast<size_t>(k));
            float               s = 0;
            for (int r = 0; r < rows; ++r) {
                lowbit_decode_row(DType::i2_s, t, static_cast<int64_t>(n), r, k, row.data(), &s);
                dequantize_tensor_row(DType::i2_s, t, static_cast<int64_t>(n), k, r, deq.data());
                ASSERT_EQ(s, scale);
                for (int64_t e = 0; e < k; ++e) {
                    const size_t f = static_cast<size_t>(r * k + e);
                    ASSERT_EQ(row[static_cast<size_t>(e)], v[f]);
                    ASSERT_EQ(deq[static_cast<size_t>(e)], static_cast<float>(v[f]) * scale);
                }
            }
        }
    }
}

// quantize_row on already-ternary input (x = t·d, d exact in fp16) reproduces it exactly.
TEST(LowBitRoundTrip, QuantizeRowIsExactOnTernaryInput) {
    std::mt19937 rng(5);
    for (const auto & lb : k_lowbit) {
        SCOPED_TRACE(std::string(dtype_name(lb.type)));
        const int64_t      n = lb.qk * 5;
        std::vector<float> x(static_cast<size_t>(n));
        for (int64_t b = 0; b < n / lb.qk; ++b) {
            const float d = std::ldexp(1.0f, -static_cast<int>(b));
            for (int e = 0; e < lb.qk; ++e) {
                int t = static_cast<int>(rng() % 3) - 1;
                if (lb.type == DType::q1_0 && t == 0) t = -1;
                x[static_cast<size_t>(b * lb.qk + e)] = static_cast<float>(t) * d;
            }
            x[static_cast<size_t>(b * lb.qk)] = d;  // make sure amax (and, for Q1_0, mean|x|) is d
        }
        std::vector<uint8_t> q(static_cast<size_t>(n / lb.qk * lb.bytes));
        quantize_row(lb.type, x.data(), q.data(), n);
        std::vector<float> back(static_cast<size_t>(n));
        dequantize_row(lb.type, q.data(), back.data(), n);
        EXPECT_EQ(back, x);
    }
}

// The reference quantizers round half away from zero (lroundf in ggml's quantize_row_tq*_ref,
// FORMATS.md §3.3/§3.4/§3.5): with d = amax = 1, x = ±0.5 must become ±1, not 0.
TEST(LowBitRoundTrip, QuantizerRoundsHalfAwayFromZero) {
    for (const auto & lb : k_lowbit) {
        if (lb.type == DType::q1_0) continue;  // sign bits only
        SCOPED_TRACE(std::string(dtype_name(lb.type)));
        std::vector<float> x(static_cast<size_t>(lb.qk), 0.0f);
        x[0] = 1.0f;
        x[1] = 0.5f;
        x[2] = -0.5f;
        x[3] = 0.49f;
        std::vector<uint8_t> q(static_cast<size_t>(lb.bytes));
        quantize_row(lb.type, x.data(), q.data(), lb.qk);
        std::vector<float> back(static_cast<size_t>(lb.qk));
        dequantize_row(lb.type, q.data(), back.data(), lb.qk);
        EXPECT_EQ(back[1], 1.0f);
        EXPECT_EQ(back[2], -1.0f);
        EXPECT_EQ(back[3], 0.0f);
    }
    // Q1_0: d = mean|x|, bit = x >= 0 (zero counts as positive).
    std::vector<float> x(128, -2.0f);
    x[5] = 0.0f;
    x[6] = 2.0f;
    std::vector<uint8_t> q(18);
    quantize_row(DType::q1_0, x.data(), q.data(), 128);
    std::vector<float> back(128);
    dequantize_row(DType::q1_0, q.data(), back.data(), 128);
    const float d = round_to_fp16(254.0f / 128.0f);
    EXPECT_EQ(back[0], -d);
    EXPECT_EQ(back[5], d);
    EXPECT_EQ(back[6], d);
}

// -------------------------------------------------------------------- block-format error bounds

std::vector<float> random_row(std::mt19937 & rng, size_t n, int block) {
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float>              x(n);
    for (size_t i = 0; i < n; ++i) {
        // Vary the magnitude per block, and sprinkle outliers, like real weights.
        const float scale = std::ldexp(1.0f, static_cast<int>((i / static_cast<size_t>(block)) % 7) - 3);
        x[i]              = g(rng) * scale * ((rng() % 97 == 0) ? 6.0f : 1.0f);
    }
    return x;
}

float amax_of(const float * x, int n) {
    float a = 0;
    for (int i = 0; i < n; ++i) a = std::max(a, std::fabs(x[i]));
    return a;
}

// Per block of ggml's reference quantizer: |x - y| <= bound(block). Also returns the RMS error
// relative to the RMS input. (The searched weight quantizers trade a larger worst element for a
// smaller RMS; their figures are checked in quant_rmse_test.cpp.)
template <typename Bound>
double check_bounds(DType type, void (*quantize_block)(const float *, uint8_t *), int block, int block_bytes, Bound bound) {
    std::mt19937   rng(static_cast<unsigned>(block * 31 + block_bytes));
    const size_t   n = static_cast<size_t>(block) * 37;
    const auto     x = random_row(rng, n, block);
    std::vector<uint8_t> q(n / static_cast<size_t>(block) * static_cast<size_t>(block_bytes));
    for (size_t b = 0; b < n / static_cast<size_t>(block); ++b) {
        quantize_block(&x[b * static_cast<size_t>(block)], &q[b * static_cast<size_t>(block_bytes)]);
    }
    std::vector<float> y(n);
    dequantize_row(type, q.data(), y.data(), static_cast<int64_t>(n));
    double err2 = 0, x2 = 0;
    for (size_t b = 0; b < n / static_cast<size_t>(block); ++b) {
        const float * xb = &x[b * static_cast<size_t>(block)];
        const float   lim = bound(xb);
        for (int i = 0; i < block; ++i) {
            const float e = std::fabs(xb[i] - y[b * static_cast<size_t>(block) + static_cast<size_t>(i)]);
            EXPECT_LE(e, lim) << "block " << b << " element " << i << " x " << xb[i];
            err2 += static_cast<double>(e) * e;
            x2 += static_cast<double>(xb[i]) * xb[i];
        }
    }
    return std::sqrt(err2 / x2);
}

// Q8_0: d = amax/127 stored in fp16 (relative error <= 2^-11); |x/d| <= 127 so the rounding error
// is d/2 plus up to 127·|d − fp16(d)| from the stored scale.
TEST(BlockQuantBounds, Q8_0) {
    const double rel = check_bounds(DType::q8_0, q8_0_quantize_block_ref, 32, 34, [](const float * x) {
        const float d = amax_of(x, 32) / 127.0f;
        return d * (0.5f + 127.0f / 2048.0f) + 1e-30f;
    });
    EXPECT_LT(rel, 0.01);
}

// Q4_0: d = max/−8; one end of the range saturates at nibble 15 = 7·d, so the worst error is |d|
// (= amax/8), the rest within |d|/2, plus the fp16 scale error on up to 8 steps.
TEST(BlockQuantBounds, Q4_0) {
    const double rel = check_bounds(DType::q4_0, q4_0_quantize_block_ref, 32, 18, [](const float * x) {
        const float d = amax_of(x, 32) / 8.0f;
        return d * (1.0f + 8.0f / 2048.0f) + 1e-30f;
    });
    EXPECT_LT(rel, 0.12);
}

TEST(BlockQuantBounds, F16AndBf16AreCorrectlyRounded) {
    std::mt19937 rng(3);
    const auto   x = random_row(rng, 1000, 50);
    std::vector<uint8_t> q(2000);
    std::vector<float>   y(1000);
    quantize_row(DType::f16, x.data(), q.data(), 1000);
    dequantize_row(DType::f16, q.data(), y.data(), 1000);
    for (size_t i = 0; i < 1000; ++i) EXPECT_EQ(y[i], round_to_fp16(x[i]));
    quantize_row(DType::bf16, x.data(), q.data(), 1000);
    dequantize_row(DType::bf16, q.data(), y.data(), 1000);
    for (size_t i = 0; i < 1000; ++i) EXPECT_LE(std::fabs(y[i] - x[i]), std::fabs(x[i]) / 256.0f);  // 2^-9 relative, RNE
    std::vector<uint8_t> f(4000);
    quantize_row(DType::f32, x.data(), f.data(), 1000);
    dequantize_row(DType::f32, f.data(), y.data(), 1000);
    EXPECT_EQ(y, x);
}

// All-zero blocks quantize to zeros (no division by zero, no NaN).
TEST(BlockQuantBounds, ZeroBlocks) {
    for (DType t : {DType::q4_0, DType::q8_0, DType::q4_k, DType::q6_k, DType::tq1_0, DType::tq2_0, DType::q2_0,
                    DType::pq2_0, DType::q1_0}) {
        SCOPED_TRACE(std::string(dtype_name(t)));
        const std::vector<float> x(256, 0.0f);
        std::vector<uint8_t>     q(dtype_row_bytes(t, 256), 0xAB);
        quantize_row(t, x.data(), q.data(), 256);
        std::vector<float> y(256, 1.0f);
        dequantize_row(t, q.data(), y.data(), 256);
        for (float v : y) EXPECT_EQ(std::fabs(v), 0.0f);
    }
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// Row decoders trust the reader's sizes, but a caller passing mismatched shapes must hit an
// assertion rather than read past the tensor.
TEST(LowBitRoundTripDeathTest, RowOutsideTheTensorAborts) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const std::vector<uint8_t> tq2(66 * 2, 0x55);
    std::vector<int8_t>        v(512);
    std::vector<float>         s(2), out(512);
    EXPECT_DEATH(lowbit_decode_row(DType::tq2_0, tq2, 512, 1, 512, v.data(), s.data()), "outside");
    EXPECT_DEATH(dequantize_tensor_row(DType::tq2_0, tq2, 512, 256, 2, out.data()), "outside");
    const std::vector<uint8_t> i2s(64, 0x55);  // 128 elements
    EXPECT_DEATH(lowbit_decode_row(DType::i2_s, i2s, 256, 1, 128, v.data(), s.data()), "i2_s");
    EXPECT_DEATH(dequantize_row(DType::q4_0, i2s.data(), out.data(), 33), "dequantize_row");
}

}  // namespace
}  // namespace tern
