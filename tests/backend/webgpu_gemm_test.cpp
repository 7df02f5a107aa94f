// The prefill GEMM (ternary_gemm.wgsl) under the tilings the gemm_tile tuning key can select: 2 to 8
// rows and 1 to 8 tokens per thread, 64 to 256 threads, tiles of 16 to 128 rows and tokens, staging
// that does not divide evenly among the threads. All tilings sum the same integers and share the
// epilogue, so on any adapter each must equal the default tiling bit for bit; the default is compared
// with the CPU backend as in webgpu_ops_test.cpp (bit for bit on a CPU adapter). Shapes are not tile
// multiples: partial row and token tiles, K of 4 and 20 chunks, 1 to 20 scale groups per row.
// Where the device has the tensor-core GEMM (ternary_gemm_mma.wgsl), it is the default, and every
// one of its tilings must equal the dot4 GEMM bit for bit as well. Both GEMMs split along K
// (gemm_split_sum.wgsl adding the integer shares) must give the unsplit bits.
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/webgpu/webgpu_backend_impl.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <tuple>

namespace tern {
namespace {

using Tiling = WebGpuBackend::GemmTiling;

// Forced tilings (tm, tn, tr, tc); nullopt is the backend's own choice.
const std::optional<Tiling> k_tilings[] = {std::nullopt,          Tiling{2, 8, 32, 8},  Tiling{8, 4, 8, 16},
                                           Tiling{4, 4, 16, 8},   Tiling{8, 8, 16, 8},  Tiling{4, 1, 16, 16},
                                           Tiling{8, 3, 16, 8},   Tiling{4, 8, 16, 16}, Tiling{2, 5, 8, 24}};

// Random ternary weight [k, n] of a low-bit type: values -1, 0, 1 (Q2_0 also 2, Q1_0 only -1 and
// 1) with per-group scales.
std::vector<uint8_t> random_weight(DType type, int64_t k, int64_t n, std::mt19937 & rng) {
    std::vector<uint8_t> bytes(dtype_tensor_bytes(type, k, k * n));
    if (type == DType::i2_s) {
        std::vector<int8_t> v(static_cast<size_t>(k * n));
        for (auto & x : v) x = static_cast<int8_t>(static_cast<int>(rng() % 3) - 1);
        i2s_pack(v.data(), k * n, 0.61f, bytes.data());
        return bytes;
    }
    const int64_t      group = lowbit_scale_group(type, k);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = 0; r < n; ++r) {
        for (int64_t g = 0; g < k / group; ++g) {
            const float d = 0.25f + 0.125f * static_cast<float>(rng() % 8);
            for (int64_t e = 0; e < group; ++e) {
                int v = static_cast<int>(rng() % (type == DType::q2_0 ? 4 : 3)) - 1;
                if (type == DType::q1_0 && v == 0) v = -1;
                if (e == 0 && type != DType::q1_0) v = 1;  // every group's scale is recoverable
                row[static_cast<size_t>(g * group + e)] = static_cast<float>(v) * d;
            }
        }
        quantize_row(type, row.data(), bytes.data() + r * dtype_row_bytes(type, k), k);
    }
    return bytes;
}

class WebGpuGemm : public ::testing::Test {
protected:
    void SetUp() override {
        TERN_REQUIRE_WEBGPU();
        gpu_ = dynamic_cast<WebGpuBackend *>(test::shared_webgpu().backend.get());
        ASSERT_NE(gpu_, nullptr);
        cpu_adapter_ = test::is_cpu_adapter(*gpu_);
    }
    void TearDown() override {
        if (gpu_) {
            gpu_->set_gemm_tiling(std::nullopt);
            gpu_->set_mma_tiling(std::nullopt);
            gpu_->set_gemm_split(std::nullopt);
            gpu_->set_norm_words_wg(std::nullopt);
        }
    }

    // Random int8 activations [k, T] and their scales, as rms_norm_quant makes them.
    void make_acts(int64_t k, int64_t t, std::vector<int8_t> & q, std::vector<float> & s) {
        std::vector<float> x(static_cast<size_t>(k * t));
        for (auto & v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng_);
        q.resize(x.size());
        s.resize(static_cast<size_t>(t));
        for (int64_t j = 0; j < t; ++j) s[j] = cpu::quantize_act_row(x.data() + j * k, q.data() + j * k, k);
    }

    WebGpuBackend *          gpu_         = nullptr;
    bool                     cpu_adapter_ = false;
    std::unique_ptr<Backend> cpu_         = make_cpu_backend({1});
    std::mt19937             rng_{7};
};

void expect_bits_equal(const std::vector<float> & got, const std::vector<float> & want, const std::string & what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        uint32_t a, b;
        std::memcpy(&a, &got[i], 4);
        std::memcpy(&b, &want[i], 4);
        ASSERT_EQ(a, b) << what << ", element " << i << ": " << got[i] << " vs " << want[i];
    }
}

// Each of t rows of x (n values) through the CPU reference's RMS norm (weights nw) and int8 quantization:
// the scales s and codes q a GPU norm wrote must be those bits.
void expect_norm_quant_of_rows(const float * x, const std::vector<float> & nw, const std::vector<float> & s,
                               const std::vector<int8_t> & q, int64_t t, int64_t n) {
    std::vector<float>  yn(static_cast<size_t>(n));
    std::vector<int8_t> qc(static_cast<size_t>(n));
    for (int64_t r = 0; r < t; ++r) {
        cpu::rms_norm_row(x + r * n, nw.data(), yn.data(), n, 1e-5f);
        const float sc = cpu::quantize_act_row(yn.data(), qc.data(), n);
        ASSERT_EQ(std::bit_cast<uint32_t>(s[static_cast<size_t>(r)]), std::bit_cast<uint32_t>(sc)) << "scale of token " << r;
        ASSERT_TRUE(std::equal(qc.begin(), qc.end(), q.begin() + r * n)) << "int8 acts of token " << r;
    }
}

void expect_near(const std::vector<float> & got, const std::vector<float> & want, double tol, const char * what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << ", element " << i;
    }
}

std::vector<float> read_all(Backend & b, const Tensor & t) {
    std::vector<float> out(static_cast<size_t>(t.n_elements()));
    b.read(t, out.data(), out.size() * 4);
    return out;
}

std::string tiling_name(const std::optional<Tiling> & t) {
    if (!t) return "default tiling";
    return "tiling " + std::to_string(t->tm) + "," + std::to_string(t->tn) + "," + std::to_string(t->tr) + "," +
           std::to_string(t->tc);
}

TEST_F(WebGpuGemm, BitlinearEveryTilingEveryType) {
    struct Shape {
        int64_t k, n, t;
        bool    accumulate;
    };
    const Shape shapes[] = {{256, 75, 45, true}, {1280, 130, 129, false}};
    const DType types[]  = {DType::i2_s, DType::tq2_0, DType::tq1_0, DType::q2_0, DType::pq2_0, DType::q1_0};
    for (DType type : types) {
        for (const Shape & sh : shapes) {
            const auto         bytes = random_weight(type, sh.k, sh.n, rng_);
            const WeightSource src{"w", type, {sh.k, sh.n, 1, 1}, bytes};
            auto               wg = gpu_->load_linear({&src, 1});
            auto               wc = cpu_->load_linear({&src, 1});
            std::vector<int8_t> q;
            std::vector<float>  s;
            make_acts(sh.k, sh.t, q, s);
            std::vector<float> y0(static_cast<size_t>(sh.n * sh.t));
            for (auto & v : y0) v = std::normal_distribution<float>(0.0f, 2.0f)(rng_);
            // Runs bitlinear on backend b (the GPU with `tiling`) and returns y.
            auto run = [&](Backend & b, const Weight & w) {
                auto aq = alloc_tensor(b, DType::i8, {sh.k, sh.t, 1, 1}, "q");
                auto as = alloc_tensor(b, DType::f32, {sh.t, 1, 1, 1}, "s");
                auto y  = alloc_tensor(b, DType::f32, {sh.n, sh.t, 1, 1}, "y");
                b.write(aq.tensor, q.data(), q.size());
                b.write(as.tensor, s.data(), s.size() * 4);
                b.write(y.tensor, y0.data(), y0.size() * 4);
                b.bitlinear(y.tensor, w, {aq.tensor, as.tensor}, sh.accumulate);
                return read_all(b, y.tensor);
            };
            const std::string what = std::string(dtype_name(type)) + " k=" + std::to_string(sh.k) + " n=" +
                                     std::to_string(sh.n) + " T=" + std::to_string(sh.t);
            SCOPED_TRACE(what);
            const std::vector<float> want = run(*cpu_, *wc);
            std::vector<float>       first;
            for (const auto & tiling : k_tilings) {
                ASSERT_TRUE(gpu_->set_gemm_tiling(tiling)) << tiling_name(tiling);
                const std::vector<float> got = run(*gpu_, *wg);
                if (!tiling) {
                    expect_near(got, want, cpu_adapter_ ? 0.0 : 1e-6, "default tiling against the CPU");
                    first = got;
                } else {
                    expect_bits_equal(got, first, tiling_name(tiling) + " against the default tiling");
                }
            }
        }
    }
}

TEST_F(WebGpuGemm, GateUpEveryTilingBothActivations) {
    for (DType type : {DType::i2_s, DType::tq2_0}) {
        for (int64_t n_ff : {45, 100}) {
            const int64_t k = 512, t = n_ff == 45 ? 16 : 77;
            const auto    bg = random_weight(type, k, n_ff, rng_), bu = random_weight(type, k, n_ff, rng_);
            const WeightSource parts[2] = {{"g", type, {k, n_ff, 1, 1}, bg}, {"u", type, {k, n_ff, 1, 1}, bu}};
            auto               wg = gpu_->load_linear(parts);
            auto               wc = cpu_->load_linear(parts);
            std::vector<int8_t> q;
            std::vector<float>  s;
            make_acts(k, t, q, s);
            for (FfnActivation act : {FfnActivation::relu2, FfnActivation::silu}) {
                const bool silu = act == FfnActivation::silu;
                SCOPED_TRACE(std::string(dtype_name(type)) + " n_ff=" + std::to_string(n_ff) + " T=" + std::to_string(t) +
                             (silu ? " silu" : " relu2"));
                auto run = [&](Backend & b, const Weight & w) {
                    auto aq = alloc_tensor(b, DType::i8, {k, t, 1, 1}, "q");
                    auto as = alloc_tensor(b, DType::f32, {t, 1, 1, 1}, "s");
                    auto f  = alloc_tensor(b, DType::f32, {n_ff, t, 1, 1}, "f");
                    b.write(aq.tensor, q.data(), q.size());
                    b.write(as.tensor, s.data(), s.size() * 4);
                    b.gate_up(f.tensor, w, {aq.tensor, as.tensor}, act);
                    return read_all(b, f.tensor);
                };
                const std::vector<float> want = run(*cpu_, *wc);
                std::vector<float>       first;
                for (const auto & tiling : k_tilings) {
                    if (tiling && tiling->tm % 2 != 0) continue;
                    ASSERT_TRUE(gpu_->set_gemm_tiling(tiling)) << tiling_name(tiling);
                    const std::vector<float> got = run(*gpu_, *wg);
                    if (!tiling) {
                        expect_near(got, want, cpu_adapter_ ? 0.0 : 1e-6, "default tiling against the CPU");
                        first = got;
                    } else {
                        expect_bits_equal(got, first, tiling_name(tiling) + " against the default tiling");
                    }
                }
            }
        }
    }
}

// ternary_gemm_mma.wgsl under every tiling it allows (1 to 8 subgroups along the rows, 1 to 4 along
// the tokens) against the dot4 GEMM, bit for bit: both sum the same integers and share the epilogue.
TEST_F(WebGpuGemm, TensorCoreTilingsMatchTheDot4Gemm) {
    using Mma = WebGpuBackend::MmaTiling;
    if (!gpu_->set_mma_tiling(Mma{})) GTEST_SKIP() << "no tensor-core GEMM on this adapter (no exact int8 subgroup matrices)";
    const std::optional<Mma> mma_tilings[] = {std::nullopt, Mma{1, 1}, Mma{2, 1}, Mma{4, 1}, Mma{8, 1},
                                              Mma{1, 2},    Mma{2, 2}, Mma{1, 4}, Mma{4, 2}, Mma{2, 4}};
    auto name = [](const std::optional<Mma> & t) {
        return t ? "tensor-core tiling " + std::to_string(t->sgm) + "x" + std::to_string(t->sgn)
                 : std::string("default tensor-core tiling");
    };
    struct Case {
        DType   type;
        int64_t k, n, t;
        bool    gate_up;
    };
    // Partial row and token tiles, 1 to 20 scale groups, K > 4096 (the default's other tiling).
    const Case cases[] = {{DType::i2_s, 1280, 300, 129, false}, {DType::tq2_0, 256, 75, 45, false},
                          {DType::q2_0, 1280, 130, 16, false},   {DType::i2_s, 4224, 70, 77, false},
                          {DType::i2_s, 512, 100, 77, true},     {DType::tq2_0, 512, 45, 200, true},
                          {DType::i2_s, 2560, 130, 8, false},    {DType::i2_s, 512, 100, 11, true}};
    for (const Case & c : cases) {
        const std::string what = std::string(dtype_name(c.type)) + " k=" + std::to_string(c.k) + " n=" +
                                 std::to_string(c.n) + " T=" + std::to_string(c.t) + (c.gate_up ? " gate_up" : "");
        SCOPED_TRACE(what);
        std::vector<uint8_t> b0 = random_weight(c.type, c.k, c.n, rng_), b1 = random_weight(c.type, c.k, c.n, rng_);
        const WeightSource   parts[2] = {{"g", c.type, {c.k, c.n, 1, 1}, b0}, {"u", c.type, {c.k, c.n, 1, 1}, b1}};
        auto                 w = gpu_->load_linear({parts, c.gate_up ? 2u : 1u});
        std::vector<int8_t>  q;
        std::vector<float>   s;
        make_acts(c.k, c.t, q, s);
        std::vector<float> y0(static_cast<size_t>(c.n * c.t));
        for (auto & v : y0) v = std::normal_distribution<float>(0.0f, 2.0f)(rng_);
        auto run = [&] {
            auto aq = alloc_tensor(*gpu_, DType::i8, {c.k, c.t, 1, 1}, "q");
            auto as = alloc_tensor(*gpu_, DType::f32, {c.t, 1, 1, 1}, "s");
            auto y  = alloc_tensor(*gpu_, DType::f32, {c.n, c.t, 1, 1}, "y");
            gpu_->write(aq.tensor, q.data(), q.size());
            gpu_->write(as.tensor, s.data(), s.size() * 4);
            gpu_->write(y.tensor, y0.data(), y0.size() * 4);
            if (c.gate_up) {
                gpu_->gate_up(y.tensor, *w, {aq.tensor, as.tensor}, FfnActivation::relu2);
            } else {
                gpu_->bitlinear(y.tensor, *w, {aq.tensor, as.tensor}, true);
            }
            return read_all(*gpu_, y.tensor);
        };
        ASSERT_TRUE(gpu_->set_gemm_tiling(Tiling{}));  // the dot4 GEMM, default tiling
        const std::vector<float> want = run();
        ASSERT_TRUE(gpu_->set_gemm_tiling(std::nullopt));
        for (const auto & tiling : mma_tilings) {
            ASSERT_TRUE(gpu_->set_mma_tiling(tiling)) << name(tiling);
            expect_bits_equal(run(), want, name(tiling) + " against the dot4 GEMM");
        }
    }
}

// A GEMM split along K (one scale group per row: I2_S) into 2 to 100 shares (more shares than
// chunks: empty ones), on the dot4 GEMM and the default GEMM (the tensor-core one where the device
// has it), against the same GEMM unsplit: bit for bit (integer shares, the same epilogue). Plain,
// accumulating and gate/up; partial row and token tiles; 4 to 66 chunks.
TEST_F(WebGpuGemm, SplitAlongKGivesTheUnsplitBits) {
    struct Case {
        int64_t k, n, t;
        bool    gate_up;
        bool    accumulate;
    };
    const Case cases[] = {{1280, 300, 45, false, true}, {256, 75, 64, false, false}, {4224, 70, 17, false, true},
                          {512, 100, 33, true, false}, {2560, 130, 64, true, false}, {2560, 260, 8, false, true},
                          {512, 100, 9, true, false}};
    for (const Case & c : cases) {
        const std::string what = "k=" + std::to_string(c.k) + " n=" + std::to_string(c.n) + " T=" +
                                 std::to_string(c.t) + (c.gate_up ? " gate_up" : "");
        SCOPED_TRACE(what);
        std::vector<uint8_t> b0 = random_weight(DType::i2_s, c.k, c.n, rng_), b1 = random_weight(DType::i2_s, c.k, c.n, rng_);
        const WeightSource   parts[2] = {{"g", DType::i2_s, {c.k, c.n, 1, 1}, b0}, {"u", DType::i2_s, {c.k, c.n, 1, 1}, b1}};
        auto                 w = gpu_->load_linear({parts, c.gate_up ? 2u : 1u});
        std::vector<int8_t>  q;
        std::vector<float>   s;
        make_acts(c.k, c.t, q, s);
        std::vector<float> y0(static_cast<size_t>(c.n * c.t));
        for (auto & v : y0) v = std::normal_distribution<float>(0.0f, 2.0f)(rng_);
        auto run = [&] {
            auto aq = alloc_tensor(*gpu_, DType::i8, {c.k, c.t, 1, 1}, "q");
            auto as = alloc_tensor(*gpu_, DType::f32, {c.t, 1, 1, 1}, "s");
            auto y  = alloc_tensor(*gpu_, DType::f32, {c.n, c.t, 1, 1}, "y");
            gpu_->write(aq.tensor, q.data(), q.size());
            gpu_->write(as.tensor, s.data(), s.size() * 4);
            gpu_->write(y.tensor, y0.data(), y0.size() * 4);
            if (c.gate_up) {
                gpu_->gate_up(y.tensor, *w, {aq.tensor, as.tensor}, FfnActivation::silu);
            } else {
                gpu_->bitlinear(y.tensor, *w, {aq.tensor, as.tensor}, c.accumulate);
            }
            return read_all(*gpu_, y.tensor);
        };
        for (const bool dot4 : {true, false}) {
            ASSERT_TRUE(gpu_->set_gemm_tiling(dot4 ? std::optional<Tiling>(Tiling{}) : std::nullopt));
            gpu_->set_gemm_split(1);
            const std::vector<float> want = run();
            for (const uint32_t shares : {2u, 3u, 7u, 100u}) {
                gpu_->set_gemm_split(shares);
                expect_bits_equal(run(), want, std::string(dot4 ? "dot4" : "default") + " GEMM in " +
                                                   std::to_string(shares) + " shares");
            }
        }
    }
}

// y += W a split along K, then rms_norm_quant of y with the GEMM's activation scales as its output
// scales (a batched step's o and down projections and the next norm): the sum is deferred and goes
// out fused with the norm (norm_quant_words.wgsl). y, the int8 activations and the scales must be
// the unsplit GEMM's and plain rms_norm_quant's bit for bit, and those the CPU reference's; rows 4 to 6912 (K of the norm), tokens
// 16 to 64 (the GEMM's), 2 to 7 shares; norm_quant_words.wgsl at 32 (raised to k / 32), 256 and 1024
// threads (lowered to the adapter's limit).
TEST_F(WebGpuGemm, ASplitSumFusedWithTheNextNormGivesTheSameBits) {
    struct Case {
        int64_t k, n, t;
    };
    std::vector<std::pair<uint32_t, Case>> runs;
    for (const uint32_t words_wg : {32u, 256u, 1024u}) {
        for (const Case c : {Case{1280, 300, 45}, Case{2560, 2560, 64}, Case{256, 4096, 17}, Case{512, 4, 16},
                             Case{256, 6912, 24}}) {
            runs.emplace_back(words_wg, c);
        }
    }
    for (const auto & [words_wg, c] : runs) {
        gpu_->set_norm_words_wg(words_wg);
        const std::string what = "norm_words_wg=" + std::to_string(words_wg) + " k=" + std::to_string(c.k) +
                                 " n=" + std::to_string(c.n) + " T=" + std::to_string(c.t);
        SCOPED_TRACE(what);
        std::vector<uint8_t> wb = random_weight(DType::i2_s, c.k, c.n, rng_);
        const WeightSource   part{"w", DType::i2_s, {c.k, c.n, 1, 1}, wb};
        auto                 w = gpu_->load_linear({&part, 1});
        std::vector<float>   nw(static_cast<size_t>(c.n));
        for (auto & v : nw) v = std::normal_distribution<float>(1.0f, 0.3f)(rng_);
        const WeightSource   norm_src{"n", DType::f32, {c.n, 1, 1, 1},
                                      {reinterpret_cast<const uint8_t *>(nw.data()), nw.size() * 4}};
        auto                 norm = gpu_->load_norm(norm_src);
        std::vector<int8_t>  q;
        std::vector<float>   s;
        make_acts(c.k, c.t, q, s);
        std::vector<float> y0(static_cast<size_t>(c.n * c.t));
        for (auto & v : y0) v = std::normal_distribution<float>(0.0f, 2.0f)(rng_);
        struct Result {
            std::vector<float>  y, s;
            std::vector<int8_t> q;
        };
        auto run = [&] {
            auto aq  = alloc_tensor(*gpu_, DType::i8, {c.k, c.t, 1, 1}, "q");
            auto aq2 = alloc_tensor(*gpu_, DType::i8, {c.n, c.t, 1, 1}, "q2");
            auto as  = alloc_tensor(*gpu_, DType::f32, {c.t, 1, 1, 1}, "s");
            auto y   = alloc_tensor(*gpu_, DType::f32, {c.n, c.t, 1, 1}, "y");
            gpu_->write(aq.tensor, q.data(), q.size());
            gpu_->write(as.tensor, s.data(), s.size() * 4);
            gpu_->write(y.tensor, y0.data(), y0.size() * 4);
            gpu_->begin_step();
            gpu_->bitlinear(y.tensor, *w, {aq.tensor, as.tensor}, true);
            gpu_->rms_norm_quant({aq2.tensor, as.tensor}, y.tensor, *norm, 1e-5f);
            gpu_->end_step();
            Result r{read_all(*gpu_, y.tensor), read_all(*gpu_, as.tensor), std::vector<int8_t>(static_cast<size_t>(c.n * c.t))};
            gpu_->read(aq2.tensor, r.q.data(), r.q.size());
            return r;
        };
        ASSERT_TRUE(gpu_->set_gemm_tiling(Tiling{}));  // (the dot4 GEMM: a split on every adapter)
        gpu_->set_gemm_split(1);
        const int64_t fused0 = gpu_->split_sums_fused();
        const Result  want   = run();
        EXPECT_EQ(gpu_->split_sums_fused(), fused0) << "unsplit: nothing to fuse";
        // plain rms_norm_quant of that y against the CPU reference (cpu::rms_norm_row, quantize_act_row)
        ASSERT_NO_FATAL_FAILURE(expect_norm_quant_of_rows(want.y.data(), nw, want.s, want.q, c.t, c.n));
        for (const uint32_t shares : {2u, 7u}) {
            gpu_->set_gemm_split(shares);
            const int64_t before = gpu_->split_sums_fused();
            const Result  got    = run();
            EXPECT_EQ(gpu_->split_sums_fused(), before + 1) << "the sum went out with the norm";
            expect_bits_equal(got.y, want.y, "y in " + std::to_string(shares) + " shares");
            expect_bits_equal(got.s, want.s, "scales in " + std::to_string(shares) + " shares");
            ASSERT_EQ(got.q, want.q) << "int8 activations in " << shares << " shares";
        }
    }
}

// The qkv GEMM split along K, then RoPE and the KV cache stores (qkv_rope_kv_append over a prompt):
// the sum is deferred and goes out fused with rope_kv (rope_kv_split.wgsl). q and the K and V caches
// must be the unsplit GEMM's and rope_kv's bit for bit; f16 and f32 caches, partial RoPE (n_rot <
// head_dim), 8 (where the GEMM runs from 8 tokens: tensor cores), 16 and 40 tokens at position 3,
// 2 and 5 shares.
TEST_F(WebGpuGemm, ASplitQkvSumFusedWithRopeGivesTheSameBits) {
    const AttentionShape shape{4, 2, 32, 16, 10000.0f, 1.0f / std::sqrt(32.0f)};
    const int64_t        k = 512, n_q = 4 * 32, n_kv = 2 * 32, pos0 = 3;
    std::vector<uint8_t> wq = random_weight(DType::i2_s, k, n_q, rng_), wk = random_weight(DType::i2_s, k, n_kv, rng_),
                         wv = random_weight(DType::i2_s, k, n_kv, rng_);
    const WeightSource parts[3] = {{"q", DType::i2_s, {k, n_q, 1, 1}, wq},
                                   {"k", DType::i2_s, {k, n_kv, 1, 1}, wk},
                                   {"v", DType::i2_s, {k, n_kv, 1, 1}, wv}};
    auto w = gpu_->load_linear(parts);
    for (const DType cache : {DType::f16, DType::f32}) {
        for (const int64_t t : {int64_t{8}, int64_t{16}, int64_t{40}}) {
            if (t < gpu_->gemm_min_tokens()) continue;  // (the per-token kernels: no GEMM to split)
            SCOPED_TRACE(std::string(cache == DType::f16 ? "f16" : "f32") + " cache, T=" + std::to_string(t));
            std::vector<int8_t> q;
            std::vector<float>  s;
            make_acts(k, t, q, s);
            auto run = [&] {
                auto aq = alloc_tensor(*gpu_, DType::i8, {k, t, 1, 1}, "q");
                auto as = alloc_tensor(*gpu_, DType::f32, {t, 1, 1, 1}, "s");
                auto qo = alloc_tensor(*gpu_, DType::f32, {n_q, t, 1, 1}, "qo");
                auto kc = alloc_tensor(*gpu_, cache, {n_kv, pos0 + t, 1, 1}, "k");
                auto vc = alloc_tensor(*gpu_, cache, {n_kv, pos0 + t, 1, 1}, "v");
                gpu_->write(aq.tensor, q.data(), q.size());
                gpu_->write(as.tensor, s.data(), s.size() * 4);
                std::vector<uint8_t> zero(kc.tensor.n_bytes(), 0);
                gpu_->write(kc.tensor, zero.data(), zero.size());
                gpu_->write(vc.tensor, zero.data(), zero.size());
                gpu_->begin_step();
                gpu_->qkv_rope_kv_append(qo.tensor, {kc.tensor, vc.tensor}, *w, {aq.tensor, as.tensor}, shape, pos0);
                gpu_->end_step();
                std::vector<uint8_t> kb(kc.tensor.n_bytes()), vb(kb.size());
                gpu_->read(kc.tensor, kb.data(), kb.size());
                gpu_->read(vc.tensor, vb.data(), vb.size());
                return std::tuple{read_all(*gpu_, qo.tensor), kb, vb};
            };
            gpu_->set_gemm_split(1);
            const auto [q1, k1, v1] = run();
            for (const uint32_t shares : {2u, 5u}) {
                gpu_->set_gemm_split(shares);
                const int64_t before     = gpu_->split_sums_fused();
                const auto [qs, ks, vs] = run();
                EXPECT_EQ(gpu_->split_sums_fused(), before + 1) << "the sum went out with rope_kv";
                expect_bits_equal(qs, q1, "q in " + std::to_string(shares) + " shares");
                EXPECT_EQ(ks, k1) << "K cache in " << shares << " shares";
                EXPECT_EQ(vs, v1) << "V cache in " << shares << " shares";
            }
        }
    }
}

}  // namespace
}  // namespace tern
