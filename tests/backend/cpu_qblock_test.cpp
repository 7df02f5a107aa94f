// The families' Q8_0-block kernels (cpu_kernels.h: qblock_gemm on Q4_0 / Q8_0 Q-block tiles,
// lowbit_q8_gemm on Q1_0 / Q2_0 / PQ2_0 2-bit tiles, binary_q8_gemm on Q1_0 binary tiles) of every instruction set this machine runs,
// against the scalar reference's dot products (cpu_matmul.h) on random data with awkward shapes,
// bit for bit; and the AVX-512 activation quantizer against the reference quantizer.
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_matmul.h"
#include "backend/cpu/cpu_tiles.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace tern {
namespace {

const cpu::Kernels * kernels_of(CpuIsa isa) {
    return isa == CpuIsa::avx512 ? cpu::kernels_avx512() : isa == CpuIsa::avx2 ? cpu::kernels_avx2() : cpu::kernels_neon();
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

class CpuQBlock : public ::testing::TestWithParam<CpuIsa> {
protected:
    void SetUp() override {
        if (!cpu_isa_available(GetParam())) {
            GTEST_SKIP() << "no " << cpu_isa_name(GetParam()) << " kernels here (" << cpu_feature_list() << ")";
        }
        for (const cpu::Kernels * k : GetParam() == CpuIsa::avx512 ? std::vector{cpu::kernels_avx512_multiply(), cpu::kernels_avx512_vbmi()}
                                      : GetParam() == CpuIsa::avx2 ? std::vector{cpu::kernels_avx2_plain(), cpu::kernels_avx2_vnni()}
                                                                   : std::vector{kernels_of(GetParam())}) {
            if (k != nullptr && k->qblock_gemm != nullptr) sets_.push_back(k);
        }
        if (sets_.empty()) GTEST_SKIP() << cpu_isa_name(GetParam()) << " has no Q8_0-block kernels (the reference runs them)";
    }
    float normal(float sd = 1.0f) { return std::normal_distribution<float>(0.0f, sd)(rng_); }

    // T tokens of k columns as Q8_0 blocks (the reference quantizer): one all-zero block, one with
    // an outlier, the rest Gaussian; and their split form.
    struct Acts {
        std::vector<uint8_t> blocks;  // [T][k / 32][34]
        std::vector<int8_t>  q;
        std::vector<float>   d;
        std::vector<int32_t> bsum;
        cpu::Q8BlockActs view(int64_t k, int64_t T) const { return {q.data(), k, d.data(), bsum.data(), T}; }
    };
    Acts acts(int64_t k, int64_t T) {
        Acts               a;
        const int64_t      nb = k / 32;
        std::vector<float> x(static_cast<size_t>(k));
        a.blocks.resize(static_cast<size_t>(T * nb) * cpu::k_q8_0_block_bytes);
        a.q.resize(static_cast<size_t>(T * k));
        for (int64_t t = 0; t < T; ++t) {
            // odd tokens all positive (codes near 127): with the biased rows below the integer sums
            // reach ~2^15, so (sumi * d_w) * d_a rounds differently from sumi * (d_w * d_a)
            for (auto & v : x) v = t % 2 ? 0.9f + 0.1f * static_cast<float>(rng_() % 1000) / 1000.0f : normal();
            if (nb > 1) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
            x[static_cast<size_t>(rng_() % k)] = 40.0f;
            uint8_t * blk = a.blocks.data() + static_cast<size_t>(t * nb) * cpu::k_q8_0_block_bytes;
            cpu::quantize_row_q8_0_acts(x.data(), blk, k);
            for (int64_t b = 0; b < nb; ++b) {
                const uint8_t * p = blk + b * static_cast<int64_t>(cpu::k_q8_0_block_bytes);
                uint16_t        dh;
                std::memcpy(&dh, p, 2);
                std::memcpy(a.q.data() + t * k + b * 32, p + 2, 32);
                int32_t s = 0;
                for (int j = 0; j < 32; ++j) s += static_cast<int8_t>(p[2 + j]);
                a.d.push_back(fp16_to_fp32(dh));
                a.bsum.push_back(s);
            }
        }
        return a;
    }
    // Runs `gemm` over tiles [tile0, n_tiles) into a strided output (rows from row0 = 16 tile0),
    // with and without accumulation, against ref(r, t) for those rows.
    template <class Gemm, class Ref>
    void check(int64_t n, int64_t T, int64_t tile0, Gemm && gemm, Ref && ref) {
        for (const bool acc : {false, true}) {
            const int64_t      row0 = 16 * tile0, ldy = n - row0 + 5;
            std::vector<float> y(static_cast<size_t>(ldy * T)), want(y.size());
            for (size_t i = 0; i < y.size(); ++i) y[i] = want[i] = normal();
            gemm(y.data(), ldy, row0, acc);
            for (int64_t r = row0; r < n; ++r) {
                for (int64_t t = 0; t < T; ++t) {
                    const float v = ref(r, t);
                    float &     d = want[static_cast<size_t>(t * ldy + r - row0)];
                    d             = acc ? d + v : v;
                }
            }
            for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(bits(y[i]), bits(want[i])) << "T " << T << " acc " << acc << " at " << i;
        }
    }
    std::vector<const cpu::Kernels *> sets_;
    std::mt19937                      rng_{4321};
};

bool emulated() { return std::getenv("TERN_TEST_EMULATED") != nullptr; }
std::vector<int64_t> token_counts() {
    return emulated() ? std::vector<int64_t>{1, 3, 9} : std::vector<int64_t>{1, 2, 3, 4, 5, 8, 9, 17, 70};
}

// Q4_0 / Q8_0 rows of random bytes (finite fp16 scales of both signs, Q8_0 codes including -128),
// every third row of extreme codes.
TEST_P(CpuQBlock, QBlockGemmMatchesGgmlsBlockDot) {
    ThreadPool pool(2);
    for (const cpu::Kernels * ks : sets_) {
        for (DType type : {DType::q4_0, DType::q8_0}) {
            const int64_t blk = type == DType::q4_0 ? 18 : 34;
            for (const int64_t k : {32, 160, 1024}) {
                for (const int64_t n : {1, 16, 17, 40}) {
                    SCOPED_TRACE(std::string(dtype_name(type)) + " k " + std::to_string(k) + " n " + std::to_string(n) + " " + ks->name);
                    std::vector<uint8_t> bytes(static_cast<size_t>(n * (k / 32) * blk));
                    for (auto & b : bytes) b = static_cast<uint8_t>(rng_());
                    for (int64_t r = 0; r < n; r += 3) {  // every third row: extreme codes, mostly the largest
                        for (int64_t i = 0; i < (k / 32) * blk; ++i) {
                            const bool hi = rng_() % 5 != 0;
                            bytes[static_cast<size_t>(r * (k / 32) * blk + i)] =
                                type == DType::q4_0 ? (hi ? 0xFF : 0x00) : static_cast<uint8_t>(hi ? 127 : -127);
                        }
                    }
                    for (size_t b = 0; b < bytes.size(); b += static_cast<size_t>(blk)) {
                        const uint16_t d = fp32_to_fp16(normal(0.02f));
                        std::memcpy(&bytes[b], &d, 2);
                    }
                    // two parts, split at an odd row, as a stacked gate/up or qkv weight
                    const int64_t n0 = n > 1 ? n / 2 + 1 : 1;
                    std::vector<WeightSource> parts{{"a", type, {k, n0, 1, 1}, std::span(bytes).first(static_cast<size_t>(n0 * (k / 32) * blk))}};
                    if (n > n0) parts.push_back({"b", type, {k, n - n0, 1, 1}, std::span(bytes).subspan(static_cast<size_t>(n0 * (k / 32) * blk))});
                    ASSERT_TRUE(cpu_qtiles_fit(parts));
                    const auto w     = cpu_pack_qtiles(parts, pool);
                    const auto tiles = w->view();
                    for (const int64_t T : token_counts()) {
                        const Acts a = acts(k, T);
                        for (const int64_t tile0 : {int64_t{0}, tiles.n_tiles() - 1}) {
                            check(n, T, tile0,
                                  [&](float * y, int64_t ldy, int64_t row0, bool acc) {
                                      ks->qblock_gemm(tiles, tile0, tiles.n_tiles(), a.view(k, T), y, ldy, row0, acc);
                                  },
                                  [&](int64_t r, int64_t t) {
                                      const uint8_t * wr = bytes.data() + r * (k / 32) * blk;
                                      const uint8_t * ab = a.blocks.data() + static_cast<size_t>(t * (k / 32)) * cpu::k_q8_0_block_bytes;
                                      return type == DType::q4_0 ? cpu::dot_q4_0_q8_0(wr, ab, k) : cpu::dot_q8_0_q8_0(wr, ab, k);
                                  });
                        }
                    }
                }
            }
        }
    }
}

TEST_P(CpuQBlock, QTilesTakeOnlyOneQ4OrQ8Type) {
    std::vector<uint8_t>      b(18 * 4);
    std::vector<WeightSource> mixed{{"a", DType::q4_0, {32, 2, 1, 1}, b}, {"b", DType::q8_0, {32, 1, 1, 1}, b}};
    EXPECT_FALSE(cpu_qtiles_fit(mixed));
    std::vector<WeightSource> f16{{"a", DType::f16, {32, 2, 1, 1}, b}};
    EXPECT_FALSE(cpu_qtiles_fit(f16));
    std::vector<WeightSource> scaled{{"a", DType::q4_0, {32, 2, 1, 1}, b}};
    scaled[0].output_scale = 2.0f;
    EXPECT_FALSE(cpu_qtiles_fit(scaled));
}

// The activation quantizer (q8_0_blocks) against the reference's blocks: Gaussian blocks at scales
// from subnormal to large, an all-zero block, blocks built so that x / d lands on halves (roundf
// rounds them away from zero, other modes do not) and just below them; a block with an infinity and
// one with a NaN must come back with d not finite (the caller then runs the reference).
TEST_P(CpuQBlock, Q8BlocksMatchTheReference) {
    for (const cpu::Kernels * ks : sets_) {
        if (ks->q8_0_blocks == nullptr) continue;
        SCOPED_TRACE(ks->name);
        const int64_t      nb = 64;
        std::vector<float> x(static_cast<size_t>(32 * nb));
        for (int64_t b = 0; b < nb; ++b) {
            float * xb = x.data() + 32 * b;
            const float scale = b % 8 == 0 ? 1e-40f : b % 8 == 1 ? 1e-3f : b % 8 == 2 ? 3e4f : 1.0f;
            for (int j = 0; j < 32; ++j) xb[j] = normal(scale);
            if (b == 3) std::fill(xb, xb + 32, 0.0f);
            if (b == 4 || b == 5) {  // amax 127: d = 1, id = 1: x itself is rounded
                for (int j = 0; j < 32; ++j) xb[j] = static_cast<float>(j - 16) + (j % 2 ? 0.5f : -0.5f);
                xb[0] = b == 4 ? 127.0f : -127.0f;
                xb[1] = std::nextafter(2.5f, 0.0f);
                xb[2] = -std::nextafter(0.5f, 0.0f);
            }
        }
        std::vector<int8_t>  q(x.size());
        std::vector<float>   d(static_cast<size_t>(nb));
        std::vector<int32_t> bsum(d.size());
        ks->q8_0_blocks(x.data(), nb, q.data(), d.data(), bsum.data());
        std::vector<uint8_t> ref(static_cast<size_t>(nb) * cpu::k_q8_0_block_bytes);
        cpu::quantize_row_q8_0_acts(x.data(), ref.data(), 32 * nb);
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t * rb = ref.data() + b * static_cast<int64_t>(cpu::k_q8_0_block_bytes);
            uint16_t        dh;
            std::memcpy(&dh, rb, 2);
            ASSERT_EQ(fp32_to_fp16(d[static_cast<size_t>(b)]), dh) << "block " << b;
            int32_t sum = 0;
            for (int j = 0; j < 32; ++j) {
                ASSERT_EQ(q[static_cast<size_t>(32 * b + j)], static_cast<int8_t>(rb[2 + j])) << "block " << b << " value " << j;
                sum += q[static_cast<size_t>(32 * b + j)];
            }
            ASSERT_EQ(bsum[static_cast<size_t>(b)], sum) << "block " << b;
        }
        for (const float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
            x[7] = bad;
            ks->q8_0_blocks(x.data(), 1, q.data(), d.data(), bsum.data());
            EXPECT_FALSE(std::isfinite(d[0])) << bad;
        }
    }
}

// Q1_0 / Q2_0 / PQ2_0 rows (random values and fp16 group scales) in 2-bit tiles against Q8_0 blocks.
TEST_P(CpuQBlock, LowbitQ8GemmMatchesGgmlsBlockDot) {
    ThreadPool pool(2);
    for (const cpu::Kernels * ks : sets_) {
        if (ks->lowbit_q8_gemm == nullptr) continue;
        for (DType type : {DType::q1_0, DType::q2_0, DType::pq2_0}) {
            for (const int64_t k : {128, 384, 1024}) {
                for (const int64_t n : {1, 17, 40}) {
                    SCOPED_TRACE(std::string(dtype_name(type)) + " k " + std::to_string(k) + " n " + std::to_string(n) + " " + ks->name);
                    const int64_t      group = lowbit_scale_group(type, k);
                    std::vector<float> rows(static_cast<size_t>(k * n));
                    for (int64_t r = 0; r < n; ++r) {
                        for (int64_t g = 0; g < k / group; ++g) {
                            const float d = round_to_fp16(normal(0.3f));
                            for (int64_t e = 0; e < group; ++e) {
                                int v = static_cast<int>(rng_() % 3) - 1;
                                if (type == DType::q1_0 && v == 0) v = 1;
                                if (e == 0 && type != DType::q1_0) v = 1;
                                if (type == DType::q2_0 && e == 1) v = 2;
                                rows[static_cast<size_t>(r * k + g * group + e)] = static_cast<float>(v) * d;
                            }
                        }
                    }
                    std::vector<uint8_t> bytes(dtype_tensor_bytes(type, k, k * n));
                    for (int64_t r = 0; r < n; ++r) quantize_row(type, rows.data() + r * k, bytes.data() + r * dtype_row_bytes(type, k), k);
                    WeightSource src{"w", type, {k, n, 1, 1}, bytes};
                    src.output_scale = n == 17 ? 1.5f : 1.0f;
                    src.q8_0_acts    = true;
                    const auto    w     = cpu_pack_tiles({&src, 1}, pool);
                    const auto    tiles = w->view();
                    // Q1_0 also in binary tiles (1 bit per weight)
                    const bool binary = type == DType::q1_0 && ks->binary_q8_gemm != nullptr;
                    ASSERT_EQ(cpu_binary_tiles_fit({&src, 1}), type == DType::q1_0);
                    const auto bw = binary ? cpu_pack_binary_tiles({&src, 1}, pool) : nullptr;
                    std::vector<int8_t> vals(static_cast<size_t>(k));
                    std::vector<float>  scales(static_cast<size_t>(k / group));
                    for (const int64_t T : token_counts()) {
                        const Acts a = acts(k, T);
                        for (const int64_t tile0 : {int64_t{0}, tiles.n_tiles() - 1}) {
                            check(n, T, tile0,
                                  [&](float * y, int64_t ldy, int64_t row0, bool acc) {
                                      ks->lowbit_q8_gemm(tiles, tile0, tiles.n_tiles(), a.view(k, T), y, ldy, row0, acc);
                                  },
                                  [&](int64_t r, int64_t t) {
                                      lowbit_decode_row(type, bytes, k * n, r, k, vals.data(), scales.data());
                                      const uint8_t * ab = a.blocks.data() + static_cast<size_t>(t * (k / 32)) * cpu::k_q8_0_block_bytes;
                                      return cpu::dot_lowbit_q8_0(vals.data(), scales.data(), group, ab, k) * src.output_scale;
                                  });
                            if (!binary) continue;
                            SCOPED_TRACE("binary tiles");
                            check(n, T, tile0,
                                  [&](float * y, int64_t ldy, int64_t row0, bool acc) {
                                      ks->binary_q8_gemm(bw->view(), tile0, bw->view().n_tiles(), a.view(k, T), y, ldy, row0, acc);
                                  },
                                  [&](int64_t r, int64_t t) {
                                      lowbit_decode_row(type, bytes, k * n, r, k, vals.data(), scales.data());
                                      const uint8_t * ab = a.blocks.data() + static_cast<size_t>(t * (k / 32)) * cpu::k_q8_0_block_bytes;
                                      return cpu::dot_lowbit_q8_0(vals.data(), scales.data(), group, ab, k) * src.output_scale;
                                  });
                        }
                    }
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuQBlock, ::testing::Values(CpuIsa::avx512, CpuIsa::avx2, CpuIsa::neon),
                         [](const auto & param_info) { return std::string(cpu_isa_name(param_info.param)); });

}  // namespace
}  // namespace tern
