// The general linear op's CPU reference (cpu_matmul.h): activation quantizers pinned to ggml's
// reference rules, each row dot product against the same sum written plainly in double over the
// dequantized weights and activations, the RoPE variants of the other families, and the backend ops
// (matmul, matmul_glu, rope_kv_append) on random data with awkward shapes.
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_matmul.h"
#include "backend/cpu/cpu_ops.h"
#include "core/fp16.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

namespace tern {
namespace {

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
    std::mt19937                    rng(seed);
    std::normal_distribution<float> d(0.0f, sigma);
    std::vector<float>              v(n);
    for (float & x : v) x = d(rng);
    return v;
}

// Dequantized Q8_0 activations: q * d.
std::vector<double> q8_0_values(const uint8_t * blocks, int64_t k) {
    std::vector<double> out(static_cast<size_t>(k));
    for (int64_t b = 0; b < k / 32; ++b) {
        uint16_t dh;
        std::memcpy(&dh, blocks + b * 34, 2);
        const double d = fp16_to_fp32(dh);
        for (int j = 0; j < 32; ++j) out[b * 32 + j] = d * static_cast<int8_t>(blocks[b * 34 + 2 + j]);
    }
    return out;
}

TEST(CpuMatmul, Q8_0ActivationsAreGgmlsReferenceQuantizer) {
    auto x = gaussian(32 * 7, 1);
    std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero block: d = 0, codes 0
    x[5] = 0.5f * 127.0f / 64.0f;                       // values that land on .5 after scaling exist in data like this
    std::vector<uint8_t> ours(7 * 34), ref(7 * 34);
    cpu::quantize_row_q8_0_acts(x.data(), ours.data(), static_cast<int64_t>(x.size()));
    for (int b = 0; b < 7; ++b) q8_0_quantize_block_ref(x.data() + b * 32, ref.data() + b * 34);
    EXPECT_EQ(ours, ref);
}

TEST(CpuMatmul, Q8KActivationsFollowQuantizeRowQ8KRef) {
    auto x = gaussian(512, 2, 3.0f);
    std::fill(x.begin() + 256, x.end(), 0.0f);  // second block all zero
    x[17] = -9.5f;                               // the largest magnitude: iscale = -127 / x[17], its code -127
    std::vector<cpu::BlockQ8K> y(2);
    cpu::quantize_row_q8_k_acts(x.data(), y.data(), 512);
    EXPECT_EQ(y[0].qs[17], -127);
    EXPECT_EQ(y[0].d, 1.0f / (-127.0f / -9.5f));
    for (int j = 0; j < 256; ++j) {
        EXPECT_LE(std::fabs(x[j] - y[0].d * y[0].qs[j]), std::fabs(y[0].d) * 0.5f + 1e-6f) << j;
        EXPECT_EQ(y[0].qs[j], static_cast<int8_t>(std::min(127.0f, std::nearbyint((-127.0f / -9.5f) * x[j])))) << j;
    }
    for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int i = 0; i < 16; ++i) s += y[0].qs[g * 16 + i];
        EXPECT_EQ(y[0].bsums[g], s) << g;
    }
    EXPECT_EQ(y[1].d, 0.0f);
    for (int j = 0; j < 256; ++j) EXPECT_EQ(y[1].qs[j], 0);
}

// Each quantized dot product against the plain double sum over dequantized weights and activations.
struct DotCase {
    DType type;
    int64_t k;
};

class CpuMatmulDot : public ::testing::TestWithParam<DotCase> {};

TEST_P(CpuMatmulDot, MatchesTheDequantizedSum) {
    const auto [type, k] = GetParam();
    const auto w = gaussian(static_cast<size_t>(k), 3);
    const auto x = gaussian(static_cast<size_t>(k), 4, 2.0f);
    std::vector<uint8_t> wq(dtype_row_bytes(type, k));
    quantize_row(type, w.data(), wq.data(), k);
    std::vector<float> wd(static_cast<size_t>(k));
    dequantize_row(type, wq.data(), wd.data(), k);

    double              want = 0, scale = 0;
    float               got  = 0;
    std::vector<double> xa;
    if (cpu::act_form(type) == cpu::ActForm::q8_0) {
        std::vector<uint8_t> a(static_cast<size_t>(k / 32) * 34);
        cpu::quantize_row_q8_0_acts(x.data(), a.data(), k);
        xa  = q8_0_values(a.data(), k);
        got = type == DType::q4_0 ? cpu::dot_q4_0_q8_0(wq.data(), a.data(), k) : cpu::dot_q8_0_q8_0(wq.data(), a.data(), k);
    } else {
        std::vector<cpu::BlockQ8K> a(static_cast<size_t>(k / 256));
        cpu::quantize_row_q8_k_acts(x.data(), a.data(), k);
        for (int64_t i = 0; i < k; ++i) xa.push_back(static_cast<double>(a[i / 256].d) * a[i / 256].qs[i % 256]);
        got = type == DType::q4_k ? cpu::dot_q4_k_q8_k(wq.data(), a.data(), k) : cpu::dot_q6_k_q8_k(wq.data(), a.data(), k);
    }
    for (int64_t i = 0; i < k; ++i) {
        want += static_cast<double>(wd[i]) * xa[i];
        scale += std::fabs(static_cast<double>(wd[i]) * xa[i]);
    }
    // f32 arithmetic on exact integer sums: a few roundings per block.
    EXPECT_NEAR(got, want, 1e-5 * scale) << dtype_name(type) << " k " << k;
    // And the quantized activations are a close stand-in for x.
    double plain = 0;
    for (int64_t i = 0; i < k; ++i) plain += static_cast<double>(wd[i]) * x[i];
    EXPECT_NEAR(want, plain, 0.02 * scale);
}

INSTANTIATE_TEST_SUITE_P(Types, CpuMatmulDot,
                         ::testing::Values(DotCase{DType::q4_0, 32}, DotCase{DType::q4_0, 96 * 32},
                                           DotCase{DType::q8_0, 32}, DotCase{DType::q8_0, 75 * 32},
                                           DotCase{DType::q4_k, 256}, DotCase{DType::q4_k, 11 * 256},
                                           DotCase{DType::q6_k, 256}, DotCase{DType::q6_k, 11 * 256}),
                         [](const auto & param_info) { return std::string(dtype_name(param_info.param.type)) + "_k" + std::to_string(param_info.param.k); });

TEST(CpuMatmul, LowbitQ8_0DotIsGgmlsBlockedSum) {
    // Q1_0-like: groups of 128 values in {-1, +1}, each with its own scale.
    const int64_t      k = 384, group = 128;
    std::mt19937       rng(5);
    std::vector<int8_t> v(static_cast<size_t>(k));
    for (auto & e : v) e = (rng() & 1) ? 1 : -1;
    const float scales[3] = {0.25f, 1.5f, 0.0625f};
    const auto  x         = gaussian(static_cast<size_t>(k), 6);
    std::vector<uint8_t> a(static_cast<size_t>(k / 32) * 34);
    cpu::quantize_row_q8_0_acts(x.data(), a.data(), k);
    float want = 0;
    for (int64_t g = 0; g < k / group; ++g) {
        float s = 0;
        for (int64_t b = g * group; b < (g + 1) * group; b += 32) {
            uint16_t dh;
            std::memcpy(&dh, a.data() + (b / 32) * 34, 2);
            int sumi = 0;
            for (int j = 0; j < 32; ++j) sumi += v[b + j] * static_cast<int8_t>(a[(b / 32) * 34 + 2 + j]);
            s += fp16_to_fp32(dh) * static_cast<float>(sumi);
        }
        want += scales[g] * s;
    }
    EXPECT_EQ(cpu::dot_lowbit_q8_0(v.data(), scales, group, a.data(), k), want);
}

TEST(CpuMatmul, FloatDotSumsBlocksOf32ThenHalves) {
    const auto w = gaussian(100, 7), x = gaussian(100, 8);
    float      blocks[4] = {};
    for (int i = 0; i < 100; ++i) blocks[i / 32] = blocks[i / 32] + w[i] * x[i];
    const float want = (blocks[0] + blocks[2]) + (blocks[1] + blocks[3]);
    EXPECT_EQ(cpu::dot_f32_blocks(w.data(), x.data(), 100), want);
}

TEST(CpuMatmul, RopeNormModeRotatesAdjacentPairsAndDividesByFactors) {
    const int64_t hd = 8, pos = 5;
    const float   base = 10000.0f, factors[4] = {1.0f, 2.0f, 4.0f, 8.0f};
    for (int64_t i = 0; i < hd / 2; ++i) {
        std::vector<float> x(hd, 0.0f);
        x[2 * i]     = 1.0f;
        x[2 * i + 1] = 2.0f;
        cpu::rope_head(x.data(), hd, pos, base, 0.5f, factors, RopeMode::norm);
        const double theta = 0.5 * pos * std::pow(static_cast<double>(base), -2.0 * i / hd) / factors[i];
        EXPECT_NEAR(x[2 * i], std::cos(theta) - 2 * std::sin(theta), 2e-5) << i;
        EXPECT_NEAR(x[2 * i + 1], std::sin(theta) + 2 * std::cos(theta), 2e-5) << i;
    }
    // Without factors and scale, neox mode is the BitNet rope bit for bit.
    auto a = gaussian(64, 9), b = a;
    cpu::rope_head(a.data(), 48, 1234, 500000.0f, 1.0f, nullptr, RopeMode::neox);
    cpu::rope_neox_head(b.data(), 48, 1234, 500000.0f);
    EXPECT_EQ(a, b);
}

// ------------------------------------------------------------------ the backend ops

struct Host {
    std::unique_ptr<Backend> be = make_cpu_backend({3});
    OwnedTensor make(std::array<int64_t, 4> ne, const std::vector<float> & v) {
        OwnedTensor t = alloc_tensor(*be, DType::f32, ne, "t");
        be->write(t.tensor, v.data(), v.size() * 4);
        return t;
    }
    std::vector<float> get(const Tensor & t) {
        std::vector<float> v(static_cast<size_t>(t.n_elements()));
        be->read(t, v.data(), v.size() * 4);
        return v;
    }
};

WeightSource source_of(const char * name, DType type, int64_t k, int64_t n, std::vector<uint8_t> & bytes,
                       const std::vector<float> & values) {
    bytes.resize(dtype_row_bytes(type, k) * static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) quantize_row(type, values.data() + r * k, bytes.data() + r * dtype_row_bytes(type, k), k);
    WeightSource s;
    s.name = name;
    s.type = type;
    s.ne   = {k, n, 1, 1};
    s.data = bytes;
    return s;
}

TEST(CpuMatmul, MatmulStacksPartsAndAccumulates) {
    for (DType type : {DType::f32, DType::f16, DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k}) {
        Host          h;
        const int64_t k = 512, n0 = 7, n1 = 5, T = 3;
        std::vector<uint8_t> b0, b1;
        const auto    w0 = gaussian(static_cast<size_t>(k * n0), 10), w1 = gaussian(static_cast<size_t>(k * n1), 11);
        // Parts may differ in type (Q4_K_M files keep some attn_v as Q6_K).
        const DType        type1    = type == DType::q4_k ? DType::q6_k : type;
        const WeightSource parts[2] = {source_of("a", type, k, n0, b0, w0), source_of("b", type1, k, n1, b1, w1)};
        auto       w = h.be->load_linear(parts);
        ASSERT_EQ(w->type, type);
        ASSERT_EQ(w->n_rows, n0 + n1);
        const auto x = gaussian(static_cast<size_t>(k * T), 12);
        auto       xt = h.make({k, T, 1, 1}, x);
        auto       y  = h.make({n0 + n1, T, 1, 1}, std::vector<float>(static_cast<size_t>((n0 + n1) * T), 1.0f));
        h.be->matmul(y.tensor, *w, xt.tensor, /*accumulate=*/true);
        const auto got = h.get(y.tensor);
        for (int64_t t = 0; t < T; ++t) {
            for (int64_t r = 0; r < n0 + n1; ++r) {
                const std::vector<uint8_t> & bytes = r < n0 ? b0 : b1;
                const int64_t                rr    = r < n0 ? r : r - n0;
                const DType                  rt    = r < n0 ? type : type1;
                std::vector<float>           wd(static_cast<size_t>(k));
                dequantize_row(rt, bytes.data() + rr * dtype_row_bytes(rt, k), wd.data(), k);
                double want = 1.0, mag = 0;
                for (int64_t i = 0; i < k; ++i) {
                    want += static_cast<double>(wd[i]) * x[t * k + i];
                    mag += std::fabs(static_cast<double>(wd[i]) * x[t * k + i]);
                }
                const double tol = cpu::act_form(type) == cpu::ActForm::f32 ? 1e-5 * mag : 0.02 * mag;
                EXPECT_NEAR(got[t * (n0 + n1) + r], want, tol) << dtype_name(type) << " row " << r << " token " << t;
            }
        }
        // Columns are independent: one token alone gives the same bits.
        auto x1 = h.make({k, 1, 1, 1}, std::vector<float>(x.begin() + k, x.begin() + 2 * k));
        auto y1 = h.make({n0 + n1, 1, 1, 1}, std::vector<float>(static_cast<size_t>(n0 + n1), 0.0f));
        h.be->matmul(y1.tensor, *w, x1.tensor, false);
        const auto one = h.get(y1.tensor);
        for (int64_t r = 0; r < n0 + n1; ++r) EXPECT_EQ(one[r] + 1.0f, got[(n0 + n1) + r]) << dtype_name(type);
    }
}

TEST(CpuMatmul, MatmulGluIsSiluOfGateTimesUp) {
    Host          h;
    const int64_t k = 64, n_ff = 9, T = 2;
    std::vector<uint8_t> bytes;
    const auto    wv = gaussian(static_cast<size_t>(k * 2 * n_ff), 13);
    const WeightSource src = source_of("gu", DType::q8_0, k, 2 * n_ff, bytes, wv);
    auto          w  = h.be->load_linear({&src, 1});
    auto          x  = h.make({k, T, 1, 1}, gaussian(static_cast<size_t>(k * T), 14));
    auto          gu = h.make({2 * n_ff, T, 1, 1}, std::vector<float>(static_cast<size_t>(2 * n_ff * T)));
    auto          f  = h.make({n_ff, T, 1, 1}, std::vector<float>(static_cast<size_t>(n_ff * T)));
    h.be->matmul(gu.tensor, *w, x.tensor, false);
    h.be->matmul_glu(f.tensor, *w, x.tensor, FfnActivation::silu);
    const auto g = h.get(gu.tensor), got = h.get(f.tensor);
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t r = 0; r < n_ff; ++r) {
            EXPECT_EQ(got[t * n_ff + r], cpu::silu(g[t * 2 * n_ff + r]) * g[t * 2 * n_ff + n_ff + r]);
        }
    }
}

TEST(CpuMatmul, RopeKvAppendNormsHeadsThenRotatesAndStores) {
    Host          h;
    const int64_t hd = 16, n_head = 4, n_head_kv = 2, T = 3, pos0 = 5, n_ctx = 16;
    const int64_t n_q = n_head * hd, n_kv = n_head_kv * hd, rows = n_q + 2 * n_kv;
    const auto    cols = gaussian(static_cast<size_t>(rows * T), 15);
    auto          qkv  = h.make({rows, T, 1, 1}, cols);
    auto          q    = h.make({n_q, T, 1, 1}, std::vector<float>(static_cast<size_t>(n_q * T)));
    OwnedTensor   kc   = alloc_tensor(*h.be, DType::f32, {n_kv, n_ctx, 1, 1}, "k");
    OwnedTensor   vc   = alloc_tensor(*h.be, DType::f32, {n_kv, n_ctx, 1, 1}, "v");
    const auto    qn = gaussian(static_cast<size_t>(hd), 16), kn = gaussian(static_cast<size_t>(hd), 17);
    WeightSource  sq{"q_norm", DType::f32, {hd, 1, 1, 1}, {reinterpret_cast<const uint8_t *>(qn.data()), qn.size() * 4}};
    WeightSource  sk{"k_norm", DType::f32, {hd, 1, 1, 1}, {reinterpret_cast<const uint8_t *>(kn.data()), kn.size() * 4}};
    auto          wq = h.be->load_norm(sq), wk = h.be->load_norm(sk);
    AttentionShape s;
    s.n_head = n_head, s.n_head_kv = n_head_kv, s.head_dim = hd, s.n_rot = hd, s.rope_freq_base = 1e6f;
    s.rope_mode = RopeMode::norm, s.q_norm = wq.get(), s.k_norm = wk.get(), s.qk_norm_eps = 1e-6f;
    h.be->rope_kv_append(q.tensor, {kc.tensor, vc.tensor}, qkv.tensor, s, pos0);
    const auto gq = h.get(q.tensor), gk = h.get(kc.tensor), gv = h.get(vc.tensor);
    for (int64_t t = 0; t < T; ++t) {
        std::vector<float> col(cols.begin() + t * rows, cols.begin() + (t + 1) * rows);
        for (int64_t hh = 0; hh < n_head + n_head_kv; ++hh) {
            float * head = col.data() + hh * hd;
            cpu::rms_norm_row(head, hh < n_head ? qn.data() : kn.data(), head, hd, 1e-6f);
            cpu::rope_head(head, hd, pos0 + t, 1e6f, 1.0f, nullptr, RopeMode::norm);
        }
        for (int64_t i = 0; i < n_q; ++i) EXPECT_EQ(gq[t * n_q + i], col[i]);
        for (int64_t i = 0; i < n_kv; ++i) {
            EXPECT_EQ(gk[(pos0 + t) * n_kv + i], col[n_q + i]);
            EXPECT_EQ(gv[(pos0 + t) * n_kv + i], cols[t * rows + n_q + n_kv + i]);  // v: no norm, no rope
        }
    }
}

TEST(CpuMatmul, UnsupportedTypesAreClearErrors) {
    Host                 h;
    std::vector<uint8_t> bytes(64);
    WeightSource         s{"blk.0.attn_q.weight", DType::i8, {8, 8, 1, 1}, bytes};
    try {
        h.be->load_linear({&s, 1});
        FAIL() << "expected an error";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::unsupported);
        EXPECT_NE(std::string(e.what()).find("blk.0.attn_q.weight"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(h.be->supports_linear(DType::i8));
    EXPECT_TRUE(h.be->supports_linear(DType::q4_k));
    EXPECT_TRUE(h.be->supports_linear(DType::bf16));
}

}  // namespace
}  // namespace tern
