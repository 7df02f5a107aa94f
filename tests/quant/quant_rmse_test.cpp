// RMS error of tern's weight quantizers on Gaussian data, against bounds set from llama.cpp's own
// quantizers measured on the same data (docs/quantization.md has the table and the commands). A
// quantizer that gets worse than llama.cpp's by more than the margin fails here.
//   relative RMS = sqrt(sum (x - y)^2 / sum x^2),  x ~ N(0, 1) i.i.d., y = dequantize(quantize(x))
#include "quant/block_formats.h"
#include "quant/ternarize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace tern {
namespace {

// splitmix64 + Box-Muller in double: the same stream on every platform (the peer measurement in
// docs/quantization.md uses this generator too).
std::vector<float> gaussian(size_t n, uint64_t seed) {
    auto next = [&seed] {
        uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
        z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    };
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) {
        const double u1 = (static_cast<double>(next() >> 11) + 1.0) / 9007199254740992.0;  // (0, 1]
        const double u2 = static_cast<double>(next() >> 11) / 9007199254740992.0;
        x[i] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    }
    return x;
}

constexpr size_t k_n = 256 * 1024;  // 2^18 values: the figures are stable to about 0.1%

double relative_rms(const std::vector<float> & x, const std::vector<float> & y) {
    double e = 0, s = 0;
    for (size_t i = 0; i < x.size(); ++i) e += (static_cast<double>(x[i]) - y[i]) * (x[i] - y[i]), s += static_cast<double>(x[i]) * x[i];
    return std::sqrt(e / s);
}

double row_rms(DType type, const std::vector<float> & x) {
    std::vector<uint8_t> q(dtype_row_bytes(type, static_cast<int64_t>(x.size())));
    std::vector<float>   y(x.size());
    quantize_row(type, x.data(), q.data(), static_cast<int64_t>(x.size()));
    dequantize_row(type, q.data(), y.data(), static_cast<int64_t>(x.size()));
    return relative_rms(x, y);
}

// Bounds: llama.cpp's relative RMS on this very data (ggml_quantize_chunk without an importance
// matrix, as llama-quantize runs it; ggml commit d99724f2, measured with the program described in
// docs/quantization.md): tern must be at least as good.
struct Case {
    DType  type;
    double llama_cpp;
};

TEST(QuantRmse, GaussianAtLeastAsGoodAsLlamaCpp) {
    const auto x = gaussian(k_n, 1);
    for (const Case & c : {Case{DType::q8_0, 0.00535}, Case{DType::q4_0, 0.08606}, Case{DType::q4_k, 0.07122},
                           Case{DType::q6_k, 0.01775}}) {
        const double rms = row_rms(c.type, x);
        std::printf("[   INFO   ] %-5s relative RMS %.5f (llama.cpp %.5f)\n", std::string(dtype_name(c.type)).c_str(), rms,
                    c.llama_cpp);
        EXPECT_LE(rms, c.llama_cpp) << dtype_name(c.type);
    }
}

// Absmean ternarisation of N(0, 1) has a closed form: with m = E|x| = sqrt(2/pi) and threshold m/2,
//   MSE = 1 - 2 m * 2 phi(m/2) + m^2 * P(|x| > m/2) = 0.26340,   relative RMS = 0.51323.
// (llama.cpp's TQ1_0 / TQ2_0 reference, d = the block's amax, gives 0.80886 on the same data: it is
// meant for weights that are already ternary.) The three ternary layouts hold the same values.
TEST(QuantRmse, AbsmeanTernaryMatchesTheClosedForm) {
    const auto x = gaussian(k_n, 1);
    for (DType type : {DType::i2_s, DType::tq2_0, DType::tq1_0}) {
        const int64_t        k = 1024, rows = static_cast<int64_t>(k_n) / k;
        std::vector<uint8_t> q(dtype_tensor_bytes(type, k, rows * k));
        const float          scale = quantize_ternary_tensor(type, x.data(), rows, k, q);
        EXPECT_NEAR(scale, 0.79788f, 0.004f);  // mean |x|
        std::vector<float> y(x.size());
        for (int64_t r = 0; r < rows; ++r) dequantize_tensor_row(type, q, rows * k, k, r, y.data() + r * k);
        const double rms = relative_rms(x, y);
        std::printf("[   INFO   ] %-5s relative RMS %.5f (absmean; closed form 0.51323)\n", std::string(dtype_name(type)).c_str(), rms);
        EXPECT_NEAR(rms, 0.51323, 0.003) << dtype_name(type);
    }
}

// Already-ternary input keeps its values: one scale for the tensor (I2_S), or one per block.
TEST(QuantRmse, TernaryInputIsKeptExactly) {
    const int64_t      k = 256, rows = 6;
    std::vector<float> x(static_cast<size_t>(k * rows));
    uint64_t           st = 7;
    for (auto & v : x) v = 0.375f * static_cast<float>(static_cast<int>((st = st * 6364136223846793005ull + 1) >> 62) % 3 - 1);
    for (DType type : {DType::i2_s, DType::tq2_0, DType::tq1_0}) {
        std::vector<uint8_t> q(dtype_tensor_bytes(type, k, rows * k));
        EXPECT_EQ(quantize_ternary_tensor(type, x.data(), rows, k, q), 0.0f);
        std::vector<float> y(x.size());
        for (int64_t r = 0; r < rows; ++r) dequantize_tensor_row(type, q, rows * k, k, r, y.data() + r * k);
        EXPECT_EQ(y, x) << dtype_name(type);
    }
    // Per-block scales (as a TQ2_0 file dequantized to F16 holds them) survive TQ2_0 / TQ1_0.
    for (int64_t i = 0; i < k; ++i) x[static_cast<size_t>(i)] *= 2.0f;  // row 0 = block 0 gets another scale
    for (DType type : {DType::tq2_0, DType::tq1_0}) {
        std::vector<uint8_t> q(dtype_tensor_bytes(type, k, rows * k));
        EXPECT_EQ(quantize_ternary_tensor(type, x.data(), rows, k, q), 0.0f);
        std::vector<float> y(x.size());
        for (int64_t r = 0; r < rows; ++r) dequantize_tensor_row(type, q, rows * k, k, r, y.data() + r * k);
        EXPECT_EQ(y, x) << dtype_name(type);
    }
}

// The searched Q8_0 / Q4_0 quantizers keep the reference block when it is better, so no block is
// ever worse than ggml's reference; on varied data (magnitudes 2^-3..2^3 per block, outliers) most
// blocks are strictly better.
TEST(QuantRmse, SearchedBlocksNeverWorseThanReference) {
    struct Sym {
        DType type;
        int   bytes;
        void (*searched)(const float *, uint8_t *);
        void (*ref)(const float *, uint8_t *);
    };
    auto x = gaussian(32 * 4096, 5);
    for (size_t i = 0; i < x.size(); ++i) x[i] *= std::ldexp(1.0f, static_cast<int>((i / 32) % 7) - 3) * ((i % 97 == 0) ? 6.0f : 1.0f);
    for (const Sym & s : {Sym{DType::q8_0, 34, q8_0_quantize_block, q8_0_quantize_block_ref},
                          Sym{DType::q4_0, 18, q4_0_quantize_block, q4_0_quantize_block_ref}}) {
        int better = 0;
        for (size_t b = 0; b < x.size() / 32; ++b) {
            const float * xb = &x[32 * b];
            uint8_t       qs[34], qr[34];
            float         ys[32], yr[32];
            s.searched(xb, qs), s.ref(xb, qr);
            dequantize_row(s.type, qs, ys, 32), dequantize_row(s.type, qr, yr, 32);
            double es = 0, er = 0;
            for (int i = 0; i < 32; ++i) es += (xb[i] - ys[i]) * (xb[i] - ys[i]), er += (xb[i] - yr[i]) * (xb[i] - yr[i]);
            ASSERT_LE(es, er) << dtype_name(s.type) << " block " << b;
            better += es < er;
        }
        EXPECT_GT(better, 4096 / 2) << dtype_name(s.type);
    }
}

}  // namespace
}  // namespace tern
