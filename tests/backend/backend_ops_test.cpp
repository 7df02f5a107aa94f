// Backend op tests. Part 1 pins the CPU reference kernels to worked examples (FORMATS.md §3.2.6)
// and to textbook float math on random data. Part 2 is the cross-backend harness: every op of
// backend.h on every backend in the list, compared against the single-threaded CPU reference on
// random data with awkward shapes. A new backend joins by adding a factory to backend_factories().
// Built twice: into tern_backend_tests with the CPU backends, and with TERN_HAS_WEBGPU into
// tern_webgpu_tests (label gpu) with the WebGPU backend, skipped when there is no adapter.
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_ops.h"
#include "core/fp16.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"
#include "head_cases.h"

#include <gtest/gtest.h>

#ifdef TERN_HAS_WEBGPU
#include "backend/webgpu/webgpu_backend_impl.h"
#include "webgpu_test_util.h"
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <utility>

namespace tern {
namespace {

using test::HeadCase;
using test::HeadTensors;
using test::Rand;
using test::load_head_case;
using test::make_head_case;

// ------------------------------------------------------------------ reference kernels, worked examples
#ifndef TERN_HAS_WEBGPU  // part 1 runs once, in tern_backend_tests

TEST(CpuReference, ActivationQuantRoundsHalfToEven) {
    // FORMATS.md §3.2.6: with max|x| = 127 the scale is 1 and ties go to even.
    const float  x[6] = {2.5f, -3.5f, 0.5f, 1.5f, -0.5f, 127.0f};
    int8_t       q[6];
    const float  s = cpu::quantize_act_row(x, q, 6);
    EXPECT_EQ(s, 1.0f);
    const int8_t want[6] = {2, -4, 0, 2, 0, 127};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(q[i], want[i]) << "element " << i;
}

TEST(CpuReference, I2sGemvMatchesBitnetCppNumerics) {
    // FORMATS.md §3.2.5 weight row and §3.2.6 activation: y = ((float)isum - act_sum) / 63.5 * 0.5.
    uint8_t tensor[64];
    std::memset(tensor, 0x55, 32);
    tensor[0]  = 0x86;
    tensor[31] = 0x24;
    const float scale = 0.5f;
    std::memcpy(tensor + 32, &scale, 4);
    std::memset(tensor + 36, 0xAB, 28);  // unspecified tail bytes must not matter
    std::vector<float> x(128, 0.0f);
    x[0] = 1.0f, x[32] = -0.5f, x[96] = 0.25f, x[127] = 2.0f;

    WeightSource src{"w", DType::i2_s, {128, 1, 1, 1}, {tensor, 64}};
    auto         be = make_cpu_reference_backend(1);
    auto         w  = be->load_linear({&src, 1});
    auto         xq = alloc_tensor(*be, DType::i8, {128, 1, 1, 1}, "q");
    auto         xs = alloc_tensor(*be, DType::f32, {1, 1, 1, 1}, "s");
    auto         y  = alloc_tensor(*be, DType::f32, {1, 1, 1, 1}, "y");
    int8_t       q[128];
    const float  act_scale = cpu::quantize_act_row(x.data(), q, 128);
    EXPECT_EQ(act_scale, 63.5f);
    EXPECT_EQ(q[0], 64);   // 63.5 ties to even
    EXPECT_EQ(q[96], 16);  // 15.875
    be->write(xq.tensor, q, 128);
    be->write(xs.tensor, &act_scale, 4);
    be->bitlinear(y.tensor, *w, {xq.tensor, xs.tensor}, false);
    float out = 0;
    be->read(y.tensor, &out, 4);
    EXPECT_EQ(std::bit_cast<uint32_t>(out), 0xBDF1E3C8u) << out;  // -0.11811024
}

// The halving order, worked: {2^24, 1, -2^24, 1} halves to {2^24 - 2^24, 1 + 1} = {0, 2}, then 2.
// In order, ((2^24 + 1) - 2^24) + 1 = 1 (2^24 + 1 rounds to 2^24), as adjacent pairs (2^24 + 1) +
// (-2^24 + 1) = 1: only the halving order gives 2. Shorter sums are zero-padded to a power of two.
TEST(CpuReference, HalvingSumAddsTheUpperHalfOntoTheLowerHalf) {
    float t[4] = {16777216.0f, 1.0f, -16777216.0f, 1.0f};
    EXPECT_EQ(cpu::halving_sum(t, 4), 2.0f);
    // 8 terms {2^24, 1, 1, 1, 1, 0, 0, 0}: {2^24, 1, 1, 1} (2^24 + 1 rounds to 2^24), {2^24, 2},
    // 2^24 + 2. Adjacent pairs would give 2^24 + 4 ((2^24 + 2) + 1 ties to even), in order 2^24.
    float u[8] = {16777216.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f, 0.0f, 0.0f};
    EXPECT_EQ(cpu::halving_sum(u, 8), 16777218.0f);
    // sum_squares pads 3 squares to a block of 32: {9, 16, 1, 0, ...} -> ... -> {10, 16} -> 26.
    const float x[3] = {3.0f, 4.0f, 1.0f};
    EXPECT_EQ(cpu::sum_squares(x, 3), 26.0f);
    EXPECT_EQ(cpu::sum_squares(x, 0), 0.0f);
}

// The block-halving order of the norm's squares, worked: x[0] = 4096 (square 2^24), x[1] = x[33] = 1.
// Block 0 sums 2^24 + 1 = 2^24 (ties to even), block 1 sums 1, and 2^24 + 1 = 2^24 again. The
// halving order over all 64 would pair x[1] with x[33] first and give 2^24 + 2.
TEST(CpuReference, SumSquaresHalvesWithinBlocksOf32ThenAcrossBlocks) {
    for (const int64_t n : {34, 64, 100}) {
        std::vector<float> x(static_cast<size_t>(n), 0.0f);
        x[0] = 4096.0f;
        x[1] = x[33] = 1.0f;
        EXPECT_EQ(cpu::sum_squares(x.data(), n), 16777216.0f) << n;
        std::vector<float> sq(128, 0.0f);
        for (int64_t i = 0; i < n; ++i) sq[static_cast<size_t>(i)] = x[static_cast<size_t>(i)] * x[static_cast<size_t>(i)];
        EXPECT_EQ(cpu::halving_sum(sq.data(), 128), 16777218.0f) << n;  // the plain halving order differs
    }
    // Three blocks pad to four block sums: {2^24, 1, 1, 0} -> {2^24 + 1, 1} -> 2^24 + 1 = 2^24.
    std::vector<float> y(96, 0.0f);
    y[0] = 4096.0f;
    y[32] = y[64] = 1.0f;
    EXPECT_EQ(cpu::sum_squares(y.data(), 96), 16777216.0f);
}

// The position order, worked: 1024 terms, t[0] = 2^24, t[1..511] = 1, and in 512..1023 a 1 at the
// start of each block of 32 (zeros elsewhere). Block 0 absorbs its 31 ones (2^24 + 1 rounds to 2^24),
// blocks 1..15 sum to 32 each: superblock 0 = 2^24 + 480; superblock 1 = 16 blocks of 1 = 16; total
// 2^24 + 496. In order everything is absorbed (2^24); block sums without superblocks add the last
// sixteen 1s one by one to 2^24 + 480 and each rounds back (ties to even): 2^24 + 480.
TEST(CpuReference, PositionSumAddsBlocksThenSuperblocks) {
    std::vector<float> t(1024, 0.0f);
    t[0] = 16777216.0f;
    for (int i = 1; i < 512; ++i) t[static_cast<size_t>(i)] = 1.0f;
    for (int b = 0; b < 16; ++b) t[static_cast<size_t>(512 + 32 * b)] = 1.0f;
    EXPECT_EQ(cpu::sum_positions(t.data(), 1024), 16777712.0f);
    // The streaming form gives the same bits, for one sum and for several side by side.
    cpu::PositionSum one(1), two(2);
    for (int64_t p = 0; p < 1024; ++p) {
        one.add(p, &t[static_cast<size_t>(p)]);
        const float pair[2] = {t[static_cast<size_t>(p)], 2.0f * t[static_cast<size_t>(p)]};
        two.add(p, pair);
    }
    float got = 0.0f, got2[2] = {};
    one.finish(1024, &got);
    two.finish(1024, got2);
    EXPECT_EQ(got, 16777712.0f);
    EXPECT_EQ(got2[0], 16777712.0f);
    EXPECT_EQ(got2[1], 2.0f * 16777712.0f);
    // A partial last block and superblock: the first 40 terms (2^24 + 31 ones | 8 ones) -> 2^24 + 8.
    EXPECT_EQ(cpu::sum_positions(t.data(), 40), 16777224.0f);
}

// The reference attention (CpuBackend::attention) is cpu::attention_row, bit for bit (the order
// written out and checked in cpu_attention_order_test.cpp): one head over 1300 positions whose
// largest score is in the last superblock (a huge one at 1100) or the first (at 3), so the
// superblocks' and blocks' rescaling decides the output.
TEST(CpuReference, AttentionIsTheRowOrder) {
    const int64_t hd = 16, n = 1300;
    for (const int64_t spike : {int64_t{1100}, int64_t{3}}) {
        SCOPED_TRACE("spike at " + std::to_string(spike));
        std::mt19937                    g(5);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float>              k(static_cast<size_t>(hd * n)), v(k.size()), q(static_cast<size_t>(hd));
        for (auto & x : k) x = nd(g);
        for (auto & x : v) x = nd(g);
        for (auto & x : q) x = nd(g);
        for (int64_t d = 0; d < hd; ++d) k[static_cast<size_t>(spike * hd + d)] = 3.0f * q[static_cast<size_t>(d)];
        const float        scale = 0.25f;
        std::vector<float> want(static_cast<size_t>(hd));
        cpu::attention_row(q.data(), k.data(), hd, v.data(), hd, n, hd, scale, false, false, want.data());
        auto be = make_cpu_reference_backend(1);
        auto kt = alloc_tensor(*be, DType::f32, {hd, n, 1, 1}, "k");
        auto vt = alloc_tensor(*be, DType::f32, {hd, n, 1, 1}, "v");
        auto qt = alloc_tensor(*be, DType::f32, {hd, 1, 1, 1}, "q");
        auto ot = alloc_tensor(*be, DType::f32, {hd, 1, 1, 1}, "out");
        be->write(kt.tensor, k.data(), k.size() * 4);
        be->write(vt.tensor, v.data(), v.size() * 4);
        be->write(qt.tensor, q.data(), q.size() * 4);
        be->attention(ot.tensor, qt.tensor, {kt.tensor, vt.tensor}, AttentionShape{1, 1, hd, hd, 10000.0f, scale}, n - 1);
        std::vector<float> got(static_cast<size_t>(hd));
        be->read(ot.tensor, got.data(), got.size() * 4);
        for (int64_t d = 0; d < hd; ++d) {
            EXPECT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(d)]), std::bit_cast<uint32_t>(want[static_cast<size_t>(d)]))
                << "dimension " << d << ": " << got[static_cast<size_t>(d)] << " vs " << want[static_cast<size_t>(d)];
        }
    }
}

// The blocked order, worked: {2^24, 1 x 15 | 1 x 16}: block 0 absorbs its ones (2^24), block 1 is 16,
// so the dot is 2^24 + 16 where a loop in order gives 2^24.
TEST(CpuReference, DotBlocked16SumsBlocksOf16) {
    std::vector<float> a(32, 1.0f), b(32, 1.0f);
    a[0] = 16777216.0f;
    EXPECT_EQ(cpu::dot_blocked16(a.data(), b.data(), 32), 16777232.0f);
    EXPECT_EQ(cpu::dot_blocked16(a.data(), b.data(), 20), 16777220.0f);  // a partial block of 4
}

// tern's order: y = (x * w) * scale, each product rounded (ggml scales first); within rounding of
// the exact norm, and max |y| = fl(max |x * w| * scale), which the GPU prologues rely on.
TEST(CpuReference, RmsNormWeightsFirstThenScales) {
    std::mt19937       rng(7);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    const int64_t      n = 300;
    std::vector<float> x(n), w(n), y(n);
    for (auto & v : x) v = nd(rng);
    for (auto & v : w) v = 1.0f + 0.1f * nd(rng);
    cpu::rms_norm_row(x.data(), w.data(), y.data(), n, 1e-5f);
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double inv   = 1.0 / std::sqrt(ss / n + 1e-5);
    const float  scale = 1.0f / std::sqrt(cpu::sum_squares(x.data(), n) / static_cast<float>(n) + 1e-5f);
    int   other_order_differs = 0;
    float max_g = 0.0f, max_y = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(y[i], x[i] * inv * w[i], 1e-5 * std::fabs(x[i] * inv * w[i]) + 1e-6);
        const float g = x[i] * w[i];
        EXPECT_EQ(y[i], g * scale) << i;
        other_order_differs += y[i] != (x[i] * scale) * w[i];
        max_g = std::max(max_g, std::fabs(g));
        max_y = std::max(max_y, std::fabs(y[i]));
    }
    EXPECT_GT(other_order_differs, 0);  // the order is visible in the bits of this data
    EXPECT_EQ(max_y, max_g * scale);
}

TEST(CpuReference, RopeNeoxRotatesSplitHalfPairs) {
    // A head whose only non-zero pair is (i, i + n_rot/2) must rotate by pos * base^(-2i/n_rot).
    const int64_t hd = 16, pos = 7;
    const float   base = 500000.0f;
    for (int64_t i = 0; i < hd / 2; ++i) {
        std::vector<float> x(hd, 0.0f);
        x[i]          = 1.0f;
        x[i + hd / 2] = 2.0f;
        cpu::rope_neox_head(x.data(), hd, pos, base);
        const double theta = pos * std::pow(static_cast<double>(base), -2.0 * i / hd);
        EXPECT_NEAR(x[i], std::cos(theta) - 2 * std::sin(theta), 2e-5) << i;
        EXPECT_NEAR(x[i + hd / 2], std::sin(theta) + 2 * std::cos(theta), 2e-5) << i;
        for (int64_t j = 0; j < hd; ++j) {
            if (j != i && j != i + hd / 2) {
                EXPECT_EQ(x[j], 0.0f);
            }
        }
    }
}

TEST(CpuReference, Relu2AndSilu) {
    EXPECT_EQ(cpu::relu2(-3.0f), 0.0f);
    EXPECT_EQ(cpu::relu2(3.0f), 9.0f);
    EXPECT_NEAR(cpu::silu(1.0f), 1.0 / (1.0 + std::exp(-1.0)), 1e-7);
}

// exp_fixed, the softmax's exp: worked values (these are correctly rounded), one it rounds the other
// way (so libm's expf in its place fails), the edges it defines, and its accuracy on a sample of
// every f32 in [-86.9, 88.7] (cpu_ops.h states the exhaustive figures).
TEST(CpuReference, ExpFixed) {
    const std::pair<uint32_t, uint32_t> worked[] = {
        {0x00000000u, 0x3f800000u},  // 0 -> 1
        {0x3f800000u, 0x402df854u},  // 1 -> e
        {0xbf800000u, 0x3ebc5ab2u},  // -1
        {0xc1a20000u, 0x30dc9ef1u},  // -20.25
        {0xc2ad0000u, 0x0113bc74u},  // -86.5 -> 2^-125 range, still normal
        {0x42b10000u, 0x7f4cdcc4u},  // 88.5 (n = 128)
        {0xbf7ffc2fu, 0x3ebc5d80u},  // -0.99990743: 1 ulp below the correctly rounded 0x3ebc5d81
    };
    for (const auto & [x, want] : worked) {
        EXPECT_EQ(std::bit_cast<uint32_t>(cpu::exp_fixed(std::bit_cast<float>(x))), want) << std::hex << "x = 0x" << x;
    }
    EXPECT_EQ(cpu::exp_fixed(-87.0f), 0.0f);  // below 2^-125: 0, never a subnormal
    EXPECT_EQ(cpu::exp_fixed(-std::numeric_limits<float>::infinity()), 0.0f);
    EXPECT_EQ(cpu::exp_fixed(89.0f), std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isnan(cpu::exp_fixed(std::numeric_limits<float>::quiet_NaN())));
    double   worst = 0;
    uint64_t exact = 0, n = 0;
    for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) {
        const float x = std::bit_cast<float>(static_cast<uint32_t>(u));
        if (!(x >= -86.9f && x <= 88.7f)) continue;
        const long double e   = std::exp(static_cast<long double>(x));
        const float       got = cpu::exp_fixed(x);
        const double      ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(e)) - 23);
        worst                 = std::max(worst, static_cast<double>(std::fabs(got - e)) / ulp);
        exact += got == static_cast<float>(e);
        ++n;
    }
    EXPECT_LT(worst, 1.01) << "ulps";
    EXPECT_GT(static_cast<double>(exact) / static_cast<double>(n), 0.99) << "correctly rounded fraction";
}

#endif  // TERN_HAS_WEBGPU

// ------------------------------------------------------------------ random fixtures

// A packed low-bit weight [k, n] of the given type with random ternary values; also returns the
// dense f32 matrix it decodes to (row-major [n][k]).
std::vector<uint8_t> make_lowbit(DType type, int64_t k, int64_t n, Rand & r, std::vector<float> & dense) {
    dense.assign(static_cast<size_t>(k * n), 0.0f);
    std::vector<uint8_t> bytes(dtype_tensor_bytes(type, k, k * n));
    if (type == DType::i2_s) {
        std::vector<int8_t> v(static_cast<size_t>(k * n));
        for (auto & x : v) x = r.ternary();
        const float s = 0.3f + 0.01f * static_cast<float>(r.gen() % 100);
        i2s_pack(v.data(), k * n, s, bytes.data());
        for (size_t i = 0; i < v.size(); ++i) dense[i] = v[i] * s;
        return bytes;
    }
    const int64_t      group = lowbit_scale_group(type, k);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t rr = 0; rr < n; ++rr) {
        for (int64_t g = 0; g < k / group; ++g) {
            const float d = round_to_fp16(0.2f + 0.01f * static_cast<float>(r.gen() % 100));
            for (int64_t e = 0; e < group; ++e) {
                int v = r.ternary();
                if (type == DType::q1_0 && v == 0) v = 1;
                // quantize_row uses d = amax (mean for q1_0): force one element to carry it.
                if (e == 0 && type != DType::q1_0) v = 1;
                row[static_cast<size_t>(g * group + e)] = static_cast<float>(v) * d;
            }
        }
        quantize_row(type, row.data(), bytes.data() + rr * dtype_row_bytes(type, k), k);
        dequantize_row(type, bytes.data() + rr * dtype_row_bytes(type, k), dense.data() + rr * k, k);
    }
    return bytes;
}

// ------------------------------------------------------------------ cross-backend harness

// Largest allowed |got - want| / (1 + |want|) per op family; 0 = bit-exact.
struct Tolerances {
    double bitlinear = 0;  // also qkv_rope_kv_append's integer dots + epilogue
    double gate_up   = 0;
    double attention = 0;
    double lm_head   = 0;
    double embed     = 0;
};

struct BackendCase {
    std::string name;
    // The backend, or null with `skip` set when it cannot run here (no GPU adapter).
    std::function<std::shared_ptr<Backend>(std::string & skip)> make;
    Tolerances                                                  tol;
};

void PrintTo(const BackendCase & c, std::ostream * os) { *os << c.name; }

std::vector<BackendCase> backend_factories() {
#ifdef TERN_HAS_WEBGPU
    // WGSL reproduces the reference's order of operations: integer dot products, the f32 summation
    // orders, double-float where the reference sums in double, correctly rounded division / sqrt,
    // exp_fixed (the softmax's and SiLU's exp) in the same f32 operations, products rounded with
    // mul_rn where the reference rounds them, f16 rounding in integer code, host-made RoPE cos/sin.
    // Norm, quantization, bitlinear, gate_up, attention, embed and the LM head are bit-exact.
    Tolerances webgpu;
    webgpu.bitlinear = 0;
    webgpu.gate_up   = 0;
    webgpu.attention = 0;
    webgpu.lm_head   = 0;
    webgpu.embed     = 0;
    return {
        {"webgpu",
         [](std::string & skip) -> std::shared_ptr<Backend> {
             skip = test::shared_webgpu().reason;
             return test::shared_webgpu().backend;
         },
         webgpu},
    };
#else
    // The reference on more threads, and the fast kernels of every instruction set this machine runs
    // (the others report themselves as skipped), all bit for bit.
    // Every F16 head takes the int8 copy (head_i8_min_bytes 0), so the greedy and top-k tests check it;
    // one thread runs 2-bit tiles (the default), three base-3 tiles where the set reads them.
    auto fast = [](CpuIsa isa, int threads) {
        return [isa, threads](std::string & skip) -> std::shared_ptr<Backend> {
            if (cpu_isa_available(isa)) return make_cpu_fast_backend({threads, isa, 0, threads == 1 ? 0 : 1});
            skip = std::string("no ") + std::string(cpu_isa_name(isa)) + " kernels on this CPU/build (" + cpu_feature_list() + ")";
            return nullptr;
        };
    };
    return {
        {"cpu_2_threads", [](std::string &) -> std::shared_ptr<Backend> { return make_cpu_reference_backend(2); }, {}},
        {"cpu_3_threads", [](std::string &) -> std::shared_ptr<Backend> { return make_cpu_reference_backend(3); }, {}},
        {"avx512_1_thread", fast(CpuIsa::avx512, 1), {}},
        {"avx512_3_threads", fast(CpuIsa::avx512, 3), {}},
        {"avx2_1_thread", fast(CpuIsa::avx2, 1), {}},
        {"avx2_3_threads", fast(CpuIsa::avx2, 3), {}},
        {"neon_1_thread", fast(CpuIsa::neon, 1), {}},
        {"neon_3_threads", fast(CpuIsa::neon, 3), {}},
    };
#endif
}

class BackendOps : public ::testing::TestWithParam<BackendCase> {
protected:
    void SetUp() override {
        std::string skip;
        be_ = GetParam().make(skip);
        if (!be_) GTEST_SKIP() << skip;
    }

    std::unique_ptr<Backend> ref_ = make_cpu_reference_backend(1);
    std::shared_ptr<Backend> be_;
    const Tolerances &       tol_ = GetParam().tol;

    static std::vector<float> read_f32(Backend & b, const Tensor & t) {
        std::vector<float> out(static_cast<size_t>(t.n_elements()));
        b.read(t, out.data(), out.size() * sizeof(float));
        return out;
    }

    // attention() of the T queries q ([n_head x head_dim, T]) at positions pos0 .. pos0 + T - 1 over the
    // cache kc / vc ([n_head_kv x head_dim, pos0 + T] values) as f16 and as f32 bytes, on the backend
    // against the reference (expect_close with the attention tolerance).
    void expect_attention_as_reference(const AttentionShape & shape, int64_t pos0, int64_t T, const std::vector<float> & kc,
                                       const std::vector<float> & vc, const std::vector<float> & q);
};

// Both backends must give identical results: the CPU backends bit for bit, the GPU backend within
// its per-op tolerances (backend_factories()).
void expect_close(const std::vector<float> & a, const std::vector<float> & b, double tol, const char * what) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(a[i], b[i], tol * (1.0 + std::fabs(b[i]))) << what << " element " << i;
    }
}

void BackendOps::expect_attention_as_reference(const AttentionShape & shape, int64_t pos0, int64_t T,
                                               const std::vector<float> & kc, const std::vector<float> & vc,
                                               const std::vector<float> & q) {
    const int64_t n_q = shape.n_head * shape.head_dim, n_kv = shape.n_head_kv * shape.head_dim, n_ctx = pos0 + T;
    for (DType cache : {DType::f16, DType::f32}) {
        std::vector<uint8_t> kb(dtype_tensor_bytes(cache, n_kv, static_cast<int64_t>(kc.size()))), vb(kb.size());
        quantize_row(cache, kc.data(), kb.data(), static_cast<int64_t>(kc.size()));
        quantize_row(cache, vc.data(), vb.data(), static_cast<int64_t>(vc.size()));
        std::vector<float> outs[2];
        Backend *          bs[2] = {ref_.get(), be_.get()};
        for (int i = 0; i < 2; ++i) {
            auto kt = alloc_tensor(*bs[i], cache, {n_kv, n_ctx, 1, 1}, "k");
            auto vt = alloc_tensor(*bs[i], cache, {n_kv, n_ctx, 1, 1}, "v");
            auto qt = alloc_tensor(*bs[i], DType::f32, {n_q, T, 1, 1}, "q");
            auto ot = alloc_tensor(*bs[i], DType::f32, {n_q, T, 1, 1}, "out");
            bs[i]->write(kt.tensor, kb.data(), kb.size());
            bs[i]->write(vt.tensor, vb.data(), vb.size());
            bs[i]->write(qt.tensor, q.data(), q.size() * 4);
            bs[i]->attention(ot.tensor, qt.tensor, {kt.tensor, vt.tensor}, shape, pos0);
            outs[i] = read_f32(*bs[i], ot.tensor);
        }
        expect_close(outs[1], outs[0], tol_.attention, cache == DType::f16 ? "f16 cache" : "f32 cache");
    }
}

TEST_P(BackendOps, BitlinearAllLowbitTypesMatchReferenceAndDenseMath) {
    Rand r(11);
    for (DType type : {DType::i2_s, DType::tq2_0, DType::tq1_0, DType::q2_0, DType::pq2_0, DType::q1_0}) {
        const int64_t      k = 768, n = 37, T = 3;  // K: multiple of 256 and 128, not a power of two; odd N
        std::vector<float> dense;
        const auto         bytes = make_lowbit(type, k, n, r, dense);
        const WeightSource src{"w", type, {k, n, 1, 1}, bytes};
        std::vector<float> x(static_cast<size_t>(k * T));
        for (auto & v : x) v = r.normal(2.0f);
        std::vector<int8_t> q(x.size());
        std::vector<float>  s(T);
        for (int64_t t = 0; t < T; ++t) s[t] = cpu::quantize_act_row(x.data() + t * k, q.data() + t * k, k);

        std::vector<float> outs[2];
        Backend *          bs[2] = {ref_.get(), be_.get()};
        for (int i = 0; i < 2; ++i) {
            auto w  = bs[i]->load_linear({&src, 1});
            auto xq = alloc_tensor(*bs[i], DType::i8, {k, T, 1, 1}, "q");
            auto xs = alloc_tensor(*bs[i], DType::f32, {T, 1, 1, 1}, "s");
            auto y  = alloc_tensor(*bs[i], DType::f32, {n, T, 1, 1}, "y");
            bs[i]->write(xq.tensor, q.data(), q.size());
            bs[i]->write(xs.tensor, s.data(), s.size() * 4);
            bs[i]->bitlinear(y.tensor, *w, {xq.tensor, xs.tensor}, false);
            outs[i] = read_f32(*bs[i], y.tensor);
        }
        expect_close(outs[1], outs[0], tol_.bitlinear, std::string(dtype_name(type)).c_str());
        // Against dense math on the dequantized activations: W (q / s).
        for (int64_t t = 0; t < T; ++t) {
            for (int64_t rr = 0; rr < n; ++rr) {
                double acc = 0;
                for (int64_t c = 0; c < k; ++c) acc += dense[rr * k + c] * (q[t * k + c] / static_cast<double>(s[t]));
                EXPECT_NEAR(outs[0][t * n + rr], acc, 1e-4 * (1 + std::fabs(acc))) << dtype_name(type);
            }
        }
    }
}

TEST_P(BackendOps, AttentionAndKvAppendMatchReference) {
    Rand                 r(5);
    const AttentionShape shape{6, 2, 32, 32, 10000.0f, 1.0f / std::sqrt(32.0f)};
    const int64_t        n_q = 6 * 32, n_kv = 2 * 32, k = 256, n_ctx = 19;
    std::vector<float>   dq, dk, dv;
    const auto bq = make_lowbit(DType::tq2_0, k, n_q, r, dq);
    const auto bk = make_lowbit(DType::tq2_0, k, n_kv, r, dk);
    const auto bv = make_lowbit(DType::tq2_0, k, n_kv, r, dv);
    const WeightSource parts[3] = {{"q", DType::tq2_0, {k, n_q, 1, 1}, bq},
                                   {"k", DType::tq2_0, {k, n_kv, 1, 1}, bk},
                                   {"v", DType::tq2_0, {k, n_kv, 1, 1}, bv}};
    for (DType cache : {DType::f32, DType::f16}) {
        std::vector<float> outs[2];
        Backend *          bs[2] = {ref_.get(), be_.get()};
        for (int i = 0; i < 2; ++i) {
            Rand    rr(9);
            auto    w  = bs[i]->load_linear(parts);
            KvLayer kv;
            auto    kt = alloc_tensor(*bs[i], cache, {n_kv, n_ctx, 1, 1}, "k");
            auto    vt = alloc_tensor(*bs[i], cache, {n_kv, n_ctx, 1, 1}, "v");
            kv         = {kt.tensor, vt.tensor};
            // Prefill 5 tokens, then decode 3 one at a time; outputs of the last step are compared.
            int64_t pos = 0;
            for (int64_t T : {5, 1, 1, 1}) {
                std::vector<int8_t> q(static_cast<size_t>(k * T));
                std::vector<float>  s(static_cast<size_t>(T));
                for (auto & v : q) v = static_cast<int8_t>(static_cast<int>(rr.gen() % 255) - 127);
                for (auto & v : s) v = 10.0f + static_cast<float>(rr.gen() % 50);
                auto xq = alloc_tensor(*bs[i], DType::i8, {k, T, 1, 1}, "q");
                auto xs = alloc_tensor(*bs[i], DType::f32, {T, 1, 1, 1}, "s");
                auto qo = alloc_tensor(*bs[i], DType::f32, {n_q, T, 1, 1}, "qo");
                auto ao = alloc_tensor(*bs[i], DType::f32, {n_q, T, 1, 1}, "ao");
                bs[i]->write(xq.tensor, q.data(), q.size());
                bs[i]->write(xs.tensor, s.data(), s.size() * 4);
                bs[i]->qkv_rope_kv_append(qo.tensor, kv, *w, {xq.tensor, xs.tensor}, shape, pos);
                bs[i]->attention(ao.tensor, qo.tensor, kv, shape, pos);
                outs[i] = read_f32(*bs[i], ao.tensor);
                pos += T;
            }
        }
        expect_close(outs[1], outs[0], tol_.attention, cache == DType::f16 ? "attention f16 cache" : "attention f32 cache");
    }
}

TEST_P(BackendOps, NormQuantGateUpEmbedHeadArgmaxMatchReference) {
    Rand          r(3);
    const int64_t k = 384, n_ff = 200, n_vocab = 301, T = 4;
    std::vector<float> dg, du;
    const auto         bg = make_lowbit(DType::i2_s, k, n_ff, r, dg);
    const auto         bu = make_lowbit(DType::i2_s, k, n_ff, r, du);
    std::vector<float> normw(k), embd(static_cast<size_t>(k * n_vocab)), x(static_cast<size_t>(k * T));
    for (auto & v : normw) v = 1.0f + r.normal(0.1f);
    for (auto & v : embd) v = r.normal(0.05f);
    for (auto & v : x) v = r.normal(1.5f);
    std::vector<uint8_t> embd_f16(embd.size() * 2), normw_bytes(normw.size() * 4);
    quantize_row(DType::f16, embd.data(), embd_f16.data(), static_cast<int64_t>(embd.size()));
    std::memcpy(normw_bytes.data(), normw.data(), normw_bytes.size());
    const WeightSource gu[2] = {{"g", DType::i2_s, {k, n_ff, 1, 1}, bg}, {"u", DType::i2_s, {k, n_ff, 1, 1}, bu}};
    const WeightSource ns{"n", DType::f32, {k, 1, 1, 1}, normw_bytes};
    const WeightSource es{"e", DType::f16, {k, n_vocab, 1, 1}, embd_f16};
    const int32_t      ids[T] = {0, 300, 17, 17};

    std::vector<float>   out_f[2], out_l[2], out_x[2];
    std::vector<int32_t> out_a[2];
    Backend *            bs[2] = {ref_.get(), be_.get()};
    for (int i = 0; i < 2; ++i) {
        Backend & b    = *bs[i];
        auto      wgu  = b.load_linear(gu);
        auto      wn   = b.load_norm(ns);
        auto      we   = b.load_embedding(es);
        auto      xt   = alloc_tensor(b, DType::f32, {k, T, 1, 1}, "x");
        auto      tok  = alloc_tensor(b, DType::i32, {T, 1, 1, 1}, "tok");
        auto      xq   = alloc_tensor(b, DType::i8, {k, T, 1, 1}, "q");
        auto      xs   = alloc_tensor(b, DType::f32, {T, 1, 1, 1}, "s");
        auto      f    = alloc_tensor(b, DType::f32, {n_ff, T, 1, 1}, "f");
        auto      h    = alloc_tensor(b, DType::f32, {k, T, 1, 1}, "h");
        auto      lg   = alloc_tensor(b, DType::f32, {n_vocab, T, 1, 1}, "logits");
        auto      am   = alloc_tensor(b, DType::i32, {T, 1, 1, 1}, "argmax");
        b.write(tok.tensor, ids, sizeof ids);
        b.embed(xt.tensor, *we, tok.tensor);
        out_x[i] = read_f32(b, xt.tensor);
        b.write(xt.tensor, x.data(), x.size() * 4);
        b.rms_norm_quant({xq.tensor, xs.tensor}, xt.tensor, *wn, 1e-5f);
        b.gate_up(f.tensor, *wgu, {xq.tensor, xs.tensor}, FfnActivation::relu2);
        out_f[i] = read_f32(b, f.tensor);
        b.rms_norm(h.tensor, xt.tensor, *wn, 1e-5f);
        b.lm_head(lg.tensor, *we, h.tensor, true);
        b.argmax(am.tensor, lg.tensor);
        out_l[i] = read_f32(b, lg.tensor);
        out_a[i].resize(T);
        b.read(am.tensor, out_a[i].data(), T * 4);
    }
    expect_close(out_x[1], out_x[0], tol_.embed, "embed");
    expect_close(out_f[1], out_f[0], tol_.gate_up, "gate_up");
    expect_close(out_l[1], out_l[0], tol_.lm_head, "lm_head");
    EXPECT_EQ(out_a[1], out_a[0]);
    // Embedding rows are the f16 table rows; argmax is the largest logit.
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t c = 0; c < k; ++c) EXPECT_EQ(out_x[0][t * k + c], round_to_fp16(embd[ids[t] * k + c]));
        const float * row = out_l[0].data() + t * n_vocab;
        EXPECT_EQ(out_a[0][t], std::max_element(row, row + n_vocab) - row);
    }
}

// Longer contexts than the model tests use: 300 and 1000 positions (the WebGPU kernel's scores in
// K tiles, kept in workgroup memory; 1000 is more positions than its threads) and 2500 (more than
// it keeps: recomputed in each pass); 511, 1023, 1535 put the two queries on each side of a superblock's
// end (512, 1024, 1536). Random f16 / f32 caches, two queries at pos0 and pos0 + 1, and a key that
// gives head 0 a huge score in the last superblock (position pos0 - 5): each superblock's softmax
// has its own max, so a wrong rescale in the combine shows.
TEST_P(BackendOps, AttentionOverALongCacheMatchesReference) {
    for (const int64_t pos0 : {300, 511, 1000, 1023, 1535, 2500}) {
        SCOPED_TRACE("pos0 " + std::to_string(pos0));
        Rand                 r(13);
        const AttentionShape shape{4, 2, 64, 64, 10000.0f, 1.0f / 8.0f};
        const int64_t        n_q = 4 * 64, n_kv = 2 * 64, n_ctx = pos0 + 2, T = 2;
        std::vector<float>   kc(static_cast<size_t>(n_kv * n_ctx)), vc(kc.size()), q(static_cast<size_t>(n_q * T));
        for (auto & v : kc) v = r.normal(1.0f);
        for (auto & v : vc) v = r.normal(1.0f);
        for (auto & v : q) v = r.normal(0.5f);
        for (int64_t d = 0; d < 64; ++d) kc[static_cast<size_t>((pos0 - 5) * n_kv + d)] = 6.0f * q[static_cast<size_t>(d)];
        expect_attention_as_reference(shape, pos0, T, kc, vc, q);
    }
}

// One token over 2B4T's attention shape (20 query heads on 5 KV heads, head dim 128) at the depths
// around the blocks of 16 / 32 positions and the superblock's end, f16 and f32 caches: the fast
// kernels' one-thread jobs walk the KV heads in order and ask for the next head's rows while they sum
// this one's (CacheView::next_first), the threaded ones split the heads; every output bit for bit.
TEST_P(BackendOps, AttentionAtTheDecodeShapeMatchesReference) {
    for (const int64_t pos0 : {0, 30, 32, 510, 512, 999}) {
        SCOPED_TRACE("depth " + std::to_string(pos0 + 1));
        Rand                 r(17);
        const AttentionShape shape{20, 5, 128, 128, 500000.0f, 1.0f / std::sqrt(128.0f)};
        const int64_t        n_q = 20 * 128, n_kv = 5 * 128, n_ctx = pos0 + 1;  // one query
        std::vector<float>   kc(static_cast<size_t>(n_kv * n_ctx)), vc(kc.size()), q(static_cast<size_t>(n_q));
        for (auto & v : kc) v = r.normal(1.0f);
        for (auto & v : vc) v = r.normal(1.0f);
        for (auto & v : q) v = r.normal(0.7f);
        expect_attention_as_reference(shape, pos0, 1, kc, vc, q);
    }
}

// The composite ops with a norm in their LinearInput (linear, linear_glu, linear_qkv, output_head
// with ids) on the backend against the CPU's unfused ops. One token takes the WebGPU decode kernels (norm in
// the matmul prologue, head with the first argmax stage); three tokens and TQ2_0's scale groups
// take the general kernels. K = 640 (4 lanes per row, uneven), 1664 (8 lanes) and 2560 (the
// o-projection's 32 lanes, summed in registers where subgroups allow); the down projections of
// K = 4480 and 6912 are above 4096 (512-thread decode workgroups; 6912: 32 lanes).
TEST_P(BackendOps, FusedNormOpsMatchTheUnfusedReference) {
    Rand r(21);
    // norm_scale scales the norm weights: 1e-9 puts max|rms_norm(x) * w| below the quantization's
    // 1e-5 clamp. views: x and f4 are the second column on of their tensors (the WebGPU decode
    // kernels take offsets 0 as pipeline constants, others from the uniform).
    struct Case {
        DType   type;
        int64_t k, n_ff, T;
        float   norm_scale = 1.0f;
        bool    views      = false;
    };
    for (const Case cs : {Case{DType::i2_s, 640, 224, 1}, Case{DType::i2_s, 1664, 96, 1}, Case{DType::i2_s, 640, 96, 3},
                          Case{DType::tq2_0, 512, 64, 1}, Case{DType::i2_s, 256, 1120, 1},
                          Case{DType::i2_s, 2560, 64, 1}, Case{DType::i2_s, 256, 1728, 1},
                          Case{DType::i2_s, 640, 96, 1, 1e-9f}, Case{DType::i2_s, 640, 224, 1, 1.0f, true}}) {
        const int64_t k = cs.k, n_ff = cs.n_ff, T = cs.T, n_vocab = 333;
        SCOPED_TRACE(std::string(dtype_name(cs.type)) + " K " + std::to_string(k) + " T " + std::to_string(T) +
                     " norm weights x " + std::to_string(cs.norm_scale) + (cs.views ? " views" : ""));
        std::vector<float> dg, du, dd, dense;
        const auto         bg = make_lowbit(cs.type, k, n_ff, r, dg);
        const auto         bu = make_lowbit(cs.type, k, n_ff, r, du);
        const auto         bd = make_lowbit(cs.type, n_ff * 4, k, r, dd);  // down: [n_ff * 4] -> [k]
        const auto         bo = make_lowbit(cs.type, k, 37, r, dense);     // odd N, plain
        std::vector<float> n1(k), n2(n_ff * 4), embd(static_cast<size_t>(k * n_vocab)), x(static_cast<size_t>(k * T)),
            f4(static_cast<size_t>(n_ff * 4 * T)), y0(static_cast<size_t>(k * T));
        for (auto & v : n1) v = cs.norm_scale * (1.0f + r.normal(0.1f));
        for (auto & v : n2) v = cs.norm_scale * (1.0f + r.normal(0.1f));
        for (auto & v : embd) v = r.normal(0.05f);
        for (auto & v : x) v = r.normal(1.5f);
        for (auto & v : f4) v = r.normal(0.7f);
        for (auto & v : y0) v = r.normal(1.0f);
        std::vector<uint8_t> embd_f16(embd.size() * 2), n1b(k * 4), n2b(n2.size() * 4);
        quantize_row(DType::f16, embd.data(), embd_f16.data(), static_cast<int64_t>(embd.size()));
        std::memcpy(n1b.data(), n1.data(), n1b.size());
        std::memcpy(n2b.data(), n2.data(), n2b.size());
        const WeightSource gu[2] = {{"g", cs.type, {k, n_ff, 1, 1}, bg}, {"u", cs.type, {k, n_ff, 1, 1}, bu}};
        const WeightSource wd{"d", cs.type, {n_ff * 4, k, 1, 1}, bd};
        const WeightSource wo{"o", cs.type, {k, 37, 1, 1}, bo};
        const WeightSource ns1{"n1", DType::f32, {k, 1, 1, 1}, n1b};
        const WeightSource ns2{"n2", DType::f32, {n_ff * 4, 1, 1, 1}, n2b};
        const WeightSource es{"e", DType::f16, {k, n_vocab, 1, 1}, embd_f16};

        std::vector<float>   out_y[2], out_f[2], out_o[2], out_l[2];
        std::vector<int32_t> out_a[2];
        Backend *            bs[2] = {ref_.get(), be_.get()};
        for (int i = 0; i < 2; ++i) {
            Backend & b   = *bs[i];
            const bool fused = i == 1;  // the reference runs the unfused pairs
            auto wgu = b.load_linear(gu);
            auto wdn = b.load_linear({&wd, 1});
            auto wout = b.load_linear({&wo, 1});
            auto wn1 = b.load_norm(ns1);
            auto wn2 = b.load_norm(ns2);
            auto we  = b.load_embedding(es);
            const int64_t first = cs.views ? 1 : 0;
            auto xt_all = alloc_tensor(b, DType::f32, {k, first + T, 1, 1}, "x");
            auto ft_all = alloc_tensor(b, DType::f32, {n_ff * 4, first + T, 1, 1}, "f4");
            const Tensor xv = xt_all.tensor.columns(first, T);
            const Tensor fv = ft_all.tensor.columns(first, T);
            auto yt  = alloc_tensor(b, DType::f32, {k, T, 1, 1}, "y");
            auto ot  = alloc_tensor(b, DType::f32, {37, T, 1, 1}, "o");
            auto xq  = alloc_tensor(b, DType::i8, {std::max(k, n_ff * 4), T, 1, 1}, "q");
            auto xs  = alloc_tensor(b, DType::f32, {T, 1, 1, 1}, "s");
            auto f   = alloc_tensor(b, DType::f32, {n_ff, T, 1, 1}, "f");
            auto h   = alloc_tensor(b, DType::f32, {k, T, 1, 1}, "h");
            auto lg  = alloc_tensor(b, DType::f32, {n_vocab, T, 1, 1}, "logits");
            auto am  = alloc_tensor(b, DType::i32, {T, 1, 1, 1}, "argmax");
            const QuantizedActs a_k{{xq.tensor.buffer, 0, DType::i8, {k, T, 1, 1}}, xs.tensor};
            const QuantizedActs a_f{{xq.tensor.buffer, 0, DType::i8, {n_ff * 4, T, 1, 1}}, xs.tensor};
            b.write(xv, x.data(), x.size() * 4);
            b.write(fv, f4.data(), f4.size() * 4);
            b.write(yt.tensor, y0.data(), y0.size() * 4);
            b.begin_step();
            if (fused) {
                b.linear_glu(f.tensor, *wgu, {xv, wn1.get(), 1e-5f, a_k, {}}, FfnActivation::silu);
                b.linear(yt.tensor, *wdn, {fv, wn2.get(), 1e-6f, a_f, {}}, /*accumulate=*/true);
                b.linear(ot.tensor, *wout, {xv, wn1.get(), 1e-5f, a_k, {}}, /*accumulate=*/false);
                b.output_head({lg.tensor, {}, 0}, *we, {xv, wn1.get(), 1e-5f, {}, h.tensor}, true);
                b.argmax(am.tensor, lg.tensor);  // (the WebGPU decode head left the first stage)
            } else {
                b.rms_norm_quant(a_k, xv, *wn1, 1e-5f);
                b.gate_up(f.tensor, *wgu, a_k, FfnActivation::silu);
                b.rms_norm_quant(a_f, fv, *wn2, 1e-6f);
                b.bitlinear(yt.tensor, *wdn, a_f, true);
                b.rms_norm_quant(a_k, xv, *wn1, 1e-5f);
                b.bitlinear(ot.tensor, *wout, a_k, false);
                b.rms_norm(h.tensor, xv, *wn1, 1e-5f);
                b.lm_head(lg.tensor, *we, h.tensor, true);
                b.argmax(am.tensor, lg.tensor);
            }
            b.end_step();
            out_f[i] = read_f32(b, f.tensor);
            out_y[i] = read_f32(b, yt.tensor);
            out_o[i] = read_f32(b, ot.tensor);
            out_l[i] = read_f32(b, lg.tensor);
            out_a[i].resize(T);
            b.read(am.tensor, out_a[i].data(), T * 4);
        }
        expect_close(out_f[1], out_f[0], tol_.gate_up, "linear_glu");
        expect_close(out_y[1], out_y[0], tol_.bitlinear, "linear (down, accumulate)");
        expect_close(out_o[1], out_o[0], tol_.bitlinear, "linear (odd N)");
        expect_close(out_l[1], out_l[0], tol_.lm_head, "output_head");
        EXPECT_EQ(out_a[1], out_a[0]);
    }
}

// output_head with ids (greedy decoding: only the id is kept) against the CPU's exact head + argmax:
// random rows; rows equal to the winner but for one element nudged by one f16 step (near ties); an
// exact tie (the lower index must win); a table of 300 identical rows (every row a candidate of the
// WebGPU kernel's exact recomputation, more than its list holds); and two rows whose f32 sums come
// out in the wrong order (small terms rounded away next to a large one), and two rows that the
// WebGPU backend's int8 copy of the table ranks in the wrong order: only the exact recomputation of
// every row the bound admits finds the larger one. K = 256 (a multiple of 16) takes the WebGPU
// backend's int8 copy, whose kernel recomputes its candidates itself (its exact tail, with a
// threshold slot that each call zeroes for the next: the cases run one after another on one
// backend, and the test fails when that zeroing is dropped), K = 264 its F16 table with f32 sums
// and argmax_exact.
TEST_P(BackendOps, GreedyHeadArgmaxMatchesTheExactHead) {
    Rand r(17);
    struct Case {
        const char * name;
        int64_t      n_vocab;
        int          kind;  // 0 random, 1 near ties, 2 exact tie, 3 all rows equal, 4 hidden by f32, 5 by int8
    };
    for (const int64_t k : {256, 264})
    for (const Case cs : {Case{"random", 1000, 0}, Case{"near ties", 1000, 1}, Case{"exact tie", 700, 2},
                          Case{"all equal", 300, 3}, Case{"hidden by f32", 300, 4}, Case{"hidden by int8", 500, 5}}) {
        SCOPED_TRACE(std::string(cs.name) + ", K " + std::to_string(k));
        const HeadCase hc     = make_head_case(cs.kind, k, cs.n_vocab, r);
        int32_t        ids[2] = {-1, -1};
        Backend *      bs[2]  = {ref_.get(), be_.get()};
        for (int i = 0; i < 2; ++i) {
            Backend &   b = *bs[i];
            HeadTensors t = load_head_case(b, hc, 1);
            b.begin_step();
            b.output_head({t.logits.tensor, t.ids.tensor, 0}, *t.table, {t.x.tensor, t.norm.get(), 1e-5f, {}, t.h.tensor},
                          true);
            b.end_step();
            b.read(t.ids.tensor, &ids[i], 4);
        }
        EXPECT_EQ(ids[1], ids[0]);
        const int want = cs.kind == 3 ? 0 : cs.kind == 4 ? 7 : cs.kind == 5 ? 12 : -1;
        if (want >= 0) {
            EXPECT_EQ(ids[0], want) << "the exact head's winner (all rows equal: the lowest index)";
        }
    }
}

// Greedy decoding on the device: a step's output_head writes the id that the next step's
// embed reads. The WebGPU backend folds the argmax's last stage into that embed (embed_argmax.wgsl,
// one dispatch less); whatever comes between them makes it record the stage on its own. Either way
// the id and the embedded row must be the CPU's: folded, with a write in between, with an embed of
// another id first, and with the id read back before the embed.
TEST_P(BackendOps, GreedyArgmaxFeedsTheNextStepsEmbed) {
    Rand          r(29);
    const int64_t k = 256, nv = 1000;
    const HeadCase hc = make_head_case(0, k, nv, r);
    enum Between { nothing, write, other_embed, read_id };
    int64_t gpu_dispatches[4] = {};
    for (const Between between : {nothing, write, other_embed, read_id}) {
        SCOPED_TRACE("between head and embed: " + std::to_string(between));
        std::vector<float> rows[2];
        int32_t            ids[2]        = {-1, -1};
        int64_t            dispatches[2] = {0, 0};
        Backend *          bs[2]         = {ref_.get(), be_.get()};
        for (int i = 0; i < 2; ++i) {
            Backend &   b  = *bs[i];
            HeadTensors t  = load_head_case(b, hc, 2);
            auto        x2 = alloc_tensor(b, DType::f32, {k, 1, 1, 1}, "x2");
            Tensor      id0 = t.ids.tensor, id1 = t.ids.tensor;  // slots 0 and 1
            id0.ne[0] = id1.ne[0] = 1;
            id1.offset += 4;
            const int32_t other = 3;
            b.write(id0, &other, 4);
            b.take_dispatch_count();
            b.begin_step();
            b.output_head({t.logits.tensor, id1, 0}, *t.table, {t.x.tensor, t.norm.get(), 1e-5f, {}, t.h.tensor}, true);
            b.end_step();
            if (between == write) b.write(x2.tensor, hc.x.data(), 16);
            if (between == read_id) b.read(id1, &ids[i], 4);
            b.begin_step();
            if (between == other_embed) b.embed(x2.tensor, *t.table, id0);
            b.embed(x2.tensor, *t.table, id1);
            b.end_step();
            dispatches[i] = b.take_dispatch_count();
            rows[i]       = read_f32(b, x2.tensor);
            if (between != read_id) b.read(id1, &ids[i], 4);
        }
        ASSERT_EQ(ids[1], ids[0]);
        ASSERT_GE(ids[0], 0);
        EXPECT_EQ(rows[1], rows[0]) << "the row of token " << ids[0];
        gpu_dispatches[between] = dispatches[1];
    }
    if (be_->counts_dispatches()) {
        EXPECT_EQ(gpu_dispatches[nothing] + 1, gpu_dispatches[write])
            << "argmax_final folded into the embed when nothing comes between them, recorded on its own otherwise";
    }
}

// output_head with top_k: every row is the exact head's value bit for bit or -inf, and every row at least
// the k-th largest is exact (ties at the k-th included); a head recorded before and never read does not
// hide the list. On the WebGPU backend (the int8 copy, one
// lower bound per 512 rows, so k at most n_vocab / 512 here) a random table must leave rows at -inf:
// otherwise the fast path did not run.
TEST_P(BackendOps, TopKHeadKeepsEveryRowThatCanBeInTheTopK) {
    Rand          r(23);
    const int64_t k = 256;
    struct Case {
        const char * name;
        int64_t      n_vocab;
        int          kind;  // make_head_case's
    };
    for (const Case cs : {Case{"random", 5000, 0}, Case{"near ties", 5000, 1}, Case{"exact tie", 5000, 2},
                          Case{"all equal", 1100, 3}, Case{"hidden by int8", 5000, 5}}) {
        const int64_t      nv = cs.n_vocab;
        const HeadCase     hc = make_head_case(cs.kind, k, nv, r);
        const std::vector<float> & x = hc.x;
        const WeightSource es = hc.table(), ns = hc.norm();
        Backend &          b  = *be_;
        auto               we = b.load_embedding(es);
        auto               wn = b.load_norm(ns);
        auto               xt = alloc_tensor(b, DType::f32, {k, 1, 1, 1}, "x");
        auto               h  = alloc_tensor(b, DType::f32, {k, 1, 1, 1}, "h");
        auto               lg = alloc_tensor(b, DType::f32, {nv, 1, 1, 1}, "logits");
        b.write(xt.tensor, x.data(), x.size() * 4);
        const LinearInput in{xt.tensor, wn.get(), 1e-5f, {}, h.tensor};
        b.output_head({lg.tensor, {}, 0}, *we, in, true);
        const std::vector<float> exact = read_f32(b, lg.tensor);
        std::vector<float>       sorted = exact;
        std::sort(sorted.begin(), sorted.end(), std::greater<float>());
        for (const int64_t top_k : {1, 2, 3, 8}) {
            if (top_k > nv / 512) continue;
            SCOPED_TRACE(std::string(cs.name) + ", top " + std::to_string(top_k));
            if (top_k == 2) {
                // A head whose list nobody reads comes first (as when another test, or a sampler on
                // the device, used the backend): the next read must give the next head's list.
                b.begin_step();
                b.output_head({lg.tensor, {}, top_k}, *we, in, true);
                b.end_step();
            }
            b.begin_step();
            b.output_head({lg.tensor, {}, top_k}, *we, in, true);
            b.end_step();
            std::vector<LogitRow> listed;
#ifdef TERN_HAS_WEBGPU
            auto *     web      = dynamic_cast<WebGpuBackend *>(&b);
            const bool has_list = web != nullptr && web->read_top_k_rows(lg.tensor, listed);
#else
            const bool has_list = false;
#endif
            const std::vector<float> got      = read_f32(b, lg.tensor);
            const float              kth      = sorted[static_cast<size_t>(top_k - 1)];
            int64_t                  n_inf = 0;
            for (int64_t i = 0; i < nv; ++i) {
                const float g = got[static_cast<size_t>(i)], e = exact[static_cast<size_t>(i)];
                if (g == -std::numeric_limits<float>::infinity()) {
                    ++n_inf;
                    ASSERT_LT(e, kth) << "row " << i << " can be in the top " << top_k << " but came back -inf";
                } else {
                    ASSERT_EQ(std::bit_cast<uint32_t>(g), std::bit_cast<uint32_t>(e)) << "row " << i << ": " << g << " vs " << e;
                }
            }
            if (GetParam().name == "webgpu" && cs.kind == 0) {
                EXPECT_GT(n_inf, nv / 2) << "the top-k head recomputed most rows: did its fast path run?";
                EXPECT_TRUE(has_list) << "the WebGPU backend lists the finite rows";
            }
            // The list, where there is one, is exactly the finite rows with their values.
            if (has_list) {
                ASSERT_EQ(static_cast<int64_t>(listed.size()), nv - n_inf);
                std::sort(listed.begin(), listed.end(), [](const LogitRow & a, const LogitRow & c) { return a.id < c.id; });
                for (size_t i = 0; i < listed.size(); ++i) {
                    const auto [row, value] = listed[i];
                    ASSERT_TRUE(row >= 0 && row < nv && (i == 0 || row != listed[i - 1].id)) << "row " << row;
                    ASSERT_EQ(std::bit_cast<uint32_t>(value), std::bit_cast<uint32_t>(got[static_cast<size_t>(row)]));
                }
            }
        }
    }
}

// linear_qkv for decode steps after a prefill, against the CPU's unfused pair: head
// dims 64 (partial rotary 32) and 128, GQA, both cache types, K = 2560 (8 lanes per row); and decode
// steps past 512 positions (the fast CPU backend's one-token product then touches the K/V rows its
// attention reads next: in stolen units at 2+ threads, cpu_fast_backend.h linear_in_job).
TEST_P(BackendOps, FusedNormQkvRopeDecodeMatchesTheUnfusedReference) {
    Rand r(8);
    struct Case {
        int64_t n_head, n_head_kv, hd, n_rot, k;
        DType   cache;
        int64_t prefill = 3;
    };
    for (const Case cs : {Case{4, 2, 64, 32, 640, DType::f16}, Case{2, 1, 128, 128, 2560, DType::f32},
                          Case{4, 2, 64, 64, 640, DType::f32, 517}}) {
        SCOPED_TRACE("head_dim " + std::to_string(cs.hd) + ", prefill " + std::to_string(cs.prefill));
        const AttentionShape shape{cs.n_head, cs.n_head_kv, cs.hd, cs.n_rot, 10000.0f, 1.0f / std::sqrt(float(cs.hd))};
        const int64_t        n_q = cs.n_head * cs.hd, n_kv = cs.n_head_kv * cs.hd, k = cs.k, n_ctx = cs.prefill + 6;
        std::vector<float>   dq, dk, dv;
        const auto           bq = make_lowbit(DType::i2_s, k, n_q, r, dq);
        const auto           bk = make_lowbit(DType::i2_s, k, n_kv, r, dk);
        const auto           bv = make_lowbit(DType::i2_s, k, n_kv, r, dv);
        const WeightSource   parts[3] = {{"q", DType::i2_s, {k, n_q, 1, 1}, bq},
                                         {"k", DType::i2_s, {k, n_kv, 1, 1}, bk},
                                         {"v", DType::i2_s, {k, n_kv, 1, 1}, bv}};
        std::vector<float>   nw(k);
        for (auto & v : nw) v = 1.0f + r.normal(0.1f);
        std::vector<uint8_t> nwb(k * 4);
        std::memcpy(nwb.data(), nw.data(), nwb.size());
        const WeightSource ns{"n", DType::f32, {k, 1, 1, 1}, nwb};
        std::vector<float> outs[2], kcache[2];
        Backend *          bs[2] = {ref_.get(), be_.get()};
        for (int i = 0; i < 2; ++i) {
            Backend & b  = *bs[i];
            Rand      rr(4);
            auto      w  = b.load_linear(parts);
            auto      wn = b.load_norm(ns);
            auto      kt = alloc_tensor(b, cs.cache, {n_kv, n_ctx, 1, 1}, "k");
            auto      vt = alloc_tensor(b, cs.cache, {n_kv, n_ctx, 1, 1}, "v");
            const KvLayer kv{kt.tensor, vt.tensor};
            int64_t pos = 0;
            for (int64_t T : {cs.prefill, int64_t{1}, int64_t{1}, int64_t{1}}) {
                std::vector<float> x(static_cast<size_t>(k * T));
                for (auto & v : x) v = rr.normal(2.0f);
                auto xt = alloc_tensor(b, DType::f32, {k, T, 1, 1}, "x");
                auto xq = alloc_tensor(b, DType::i8, {k, T, 1, 1}, "q");
                auto xs = alloc_tensor(b, DType::f32, {T, 1, 1, 1}, "s");
                auto qo = alloc_tensor(b, DType::f32, {n_q, T, 1, 1}, "qo");
                auto ao = alloc_tensor(b, DType::f32, {n_q, T, 1, 1}, "ao");
                b.write(xt.tensor, x.data(), x.size() * 4);
                b.begin_step();
                if (i == 1) {
                    b.linear_qkv(qo.tensor, kv, *w, {xt.tensor, wn.get(), 1e-5f, {xq.tensor, xs.tensor}, {}}, shape, pos);
                } else {
                    b.rms_norm_quant({xq.tensor, xs.tensor}, xt.tensor, *wn, 1e-5f);
                    b.qkv_rope_kv_append(qo.tensor, kv, *w, {xq.tensor, xs.tensor}, shape, pos);
                }
                b.attention(ao.tensor, qo.tensor, kv, shape, pos);
                b.end_step();
                outs[i] = read_f32(b, qo.tensor);
                pos += T;
            }
            if (cs.cache == DType::f32) kcache[i] = read_f32(b, kt.tensor);
        }
        expect_close(outs[1], outs[0], tol_.bitlinear, "q of the last decode step");
        if (!kcache[0].empty()) expect_close(kcache[1], kcache[0], tol_.bitlinear, "k cache");
    }
}

#ifdef TERN_HAS_WEBGPU
#define TERN_BACKEND_SUITE WebGpu
#else
#define TERN_BACKEND_SUITE Cpu
#endif
INSTANTIATE_TEST_SUITE_P(TERN_BACKEND_SUITE, BackendOps, ::testing::ValuesIn(backend_factories()),
                         [](const auto & param_info) { return param_info.param.name; });

}  // namespace
}  // namespace tern
