// WebGPU ops beyond the shared harness (backend_ops_test.cpp): the weight repacking, views at
// unaligned offsets, accumulate epilogues, token tiles (T > 8), SiLU, partial RoPE with GQA and
// head_dim 128, the prefill GEMM (T >= 16), f32 tables, in-place norms, the emulated-dot4 kernels, unaligned host writes and
// the dispatch count. Each result is compared with the 1-thread CPU reference: bit for bit on a
// CPU adapter (SwiftShader: IEEE division and sqrt, unfused fma), within the harness's tolerances on
// a GPU. Skipped without a WebGPU adapter.
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_weights.h"
#include "backend/webgpu/webgpu_backend_impl.h"
#include "backend/webgpu/webgpu_weights.h"
#include "core/fp16.h"
#include "core/log.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"
#include "webgpu_test_util.h"

#include <bit>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <span>

namespace tern {
namespace {

// Bit-exact on a CPU adapter; `gpu_tol` (relative to 1 + |want|) on a real GPU.
double tolerance(double gpu_tol) {
    const auto & be = test::shared_webgpu().backend;
    return be && test::is_cpu_adapter(*be) ? 0.0 : gpu_tol;
}

void expect_close(const std::vector<float> & got, const std::vector<float> & want, double tol, const std::string & what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << ", element " << i;
    }
}

std::vector<float> read_f32(Backend & b, const Tensor & t) {
    std::vector<float> out(static_cast<size_t>(t.n_elements()));
    b.read(t, out.data(), out.size() * 4);
    return out;
}

// Random ternary weight [k, n] of a low-bit type (as backend_ops_test.cpp's make_lowbit).
std::vector<uint8_t> random_lowbit(DType type, int64_t k, int64_t n, std::mt19937 & rng) {
    std::vector<uint8_t> bytes(dtype_tensor_bytes(type, k, k * n));
    if (type == DType::i2_s) {
        std::vector<int8_t> v(static_cast<size_t>(k * n));
        for (auto & x : v) x = static_cast<int8_t>(static_cast<int>(rng() % 3) - 1);
        i2s_pack(v.data(), k * n, 0.37f, bytes.data());
        return bytes;
    }
    const int64_t      group = lowbit_scale_group(type, k);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = 0; r < n; ++r) {
        for (int64_t g = 0; g < k / group; ++g) {
            const float d = round_to_fp16(0.2f + 0.01f * static_cast<float>(rng() % 100));
            for (int64_t e = 0; e < group; ++e) {
                int v = static_cast<int>(rng() % 3) - 1;
                if (type == DType::q1_0 && v == 0) v = 1;
                if (e == 0 && type != DType::q1_0) v = 1;
                row[static_cast<size_t>(g * group + e)] = static_cast<float>(v) * d;
            }
        }
        quantize_row(type, row.data(), bytes.data() + r * dtype_row_bytes(type, k), k);
    }
    return bytes;
}

constexpr DType k_lowbit_types[] = {DType::i2_s, DType::tq2_0, DType::tq1_0, DType::q2_0, DType::pq2_0, DType::q1_0};

// ------------------------------------------------------------------ weight layout (no device)

// gpu_pack_linear of two parts (n0 and n1 rows of k) holds the CPU backend's values and scales.
void expect_packed_as_cpu(DType type, int64_t k, int64_t n0, int64_t n1, std::mt19937 & rng) {
    {
        SCOPED_TRACE(std::string(dtype_name(type)) + " " + std::to_string(n0) + "+" + std::to_string(n1) + " rows");
        const auto         b0 = random_lowbit(type, k, n0, rng), b1 = random_lowbit(type, k, n1, rng);
        WeightSource       parts[2] = {{"a", type, {k, n0, 1, 1}, b0}, {"b", type, {k, n1, 1, 1}, b1}};
        parts[1].output_scale = 0.5f;
        const auto gpu = gpu_pack_linear(parts);
        const auto cpu = cpu_pack_linear(parts);
        ASSERT_EQ(gpu.n_rows, n0 + n1);
        ASSERT_EQ(gpu.group, cpu->group);
        std::vector<int8_t> row(static_cast<size_t>(k));
        for (int64_t r = 0; r < gpu.n_rows; ++r) {
            cpu::unpack_codes_row(cpu->codes.data() + r * (k / 4), k, row.data());
            for (int64_t c = 0; c < k; ++c) ASSERT_EQ(gpu_linear_value(gpu, r, c), row[c]) << "row " << r << " col " << c;
            for (int64_t g = 0; g < gpu.n_groups; ++g) {
                float s;
                std::memcpy(&s, &gpu.words[gpu.scales_offset + static_cast<size_t>(r * gpu.n_groups + g)], 4);
                ASSERT_EQ(s, cpu->scales[static_cast<size_t>(r * gpu.n_groups + g)]);
            }
            float os;
            std::memcpy(&os, &gpu.words[gpu.oscales_offset + static_cast<size_t>(r)], 4);
            ASSERT_EQ(os, r < n0 ? 1.0f : 0.5f);
        }
    }
}

TEST(WebGpuWeights, PackedLayoutHoldsTheCpuBackendsValuesAndScales) {
    std::mt19937 rng(1);
    for (DType type : k_lowbit_types) expect_packed_as_cpu(type, 768, 5, 3, rng);
}

// Weights of a million elements or more are repacked on several threads (rows split evenly, so
// with two or more threads a split falls inside the second part): the same layout.
TEST(WebGpuWeights, LargeWeightsRepackedOnThreadsAsOnOne) {
    std::mt19937 rng(2);
    for (DType type : {DType::i2_s, DType::tq2_0}) expect_packed_as_cpu(type, 1024, 301, 803, rng);
}

// I2_S is transcoded a word at a time (i2s_row_word), not through values: on random bytes (code 3
// included, which bitnet.cpp never writes and which reads as 0) and awkward shapes, the layout holds
// lowbit_decode_row's values and scale (the scalar reference), in two parts.
TEST(WebGpuWeights, I2sTranscodedAsItsScalarDecodeReads) {
    std::mt19937 rng(3);
    for (const int64_t k : {128, 384, 1152}) {
        for (const auto & [n0, n1] : {std::pair<int64_t, int64_t>{1, 1}, {7, 3}, {13, 29}}) {
            SCOPED_TRACE("k " + std::to_string(k) + ", " + std::to_string(n0) + "+" + std::to_string(n1) + " rows");
            std::vector<uint8_t> b0(static_cast<size_t>(k * n0 / 4 + 32)), b1(static_cast<size_t>(k * n1 / 4 + 32));  // codes, scale, pad
            for (auto * b : {&b0, &b1}) {
                for (auto & byte : *b) byte = static_cast<uint8_t>(rng());
            }
            const float s0 = 0.75f, s1 = -1.5f;  // the tensors' scales (after their codes)
            std::memcpy(b0.data() + k * n0 / 4, &s0, 4);
            std::memcpy(b1.data() + k * n1 / 4, &s1, 4);
            const WeightSource parts[2] = {{"a", DType::i2_s, {k, n0, 1, 1}, b0}, {"b", DType::i2_s, {k, n1, 1, 1}, b1}};
            const auto         gpu      = gpu_pack_linear(parts);
            ASSERT_EQ(gpu.n_rows, n0 + n1);
            ASSERT_EQ(gpu.n_groups, 1);
            std::vector<int8_t> values(static_cast<size_t>(k));
            for (int64_t row = 0; row < n0 + n1; ++row) {
                const WeightSource & p = parts[row < n0 ? 0 : 1];
                const int64_t        r = row < n0 ? row : row - n0;
                float                scale;
                lowbit_decode_row(DType::i2_s, p.data, p.n_elements(), r, k, values.data(), &scale);
                for (int64_t c = 0; c < k; ++c) ASSERT_EQ(gpu_linear_value(gpu, row, c), values[c]) << "row " << row << " col " << c;
                float s;
                std::memcpy(&s, &gpu.words[gpu.scales_offset + static_cast<size_t>(row)], 4);
                ASSERT_EQ(s, scale) << "row " << row;
            }
        }
    }
}

TEST(WebGpuWeights, WordInterleavingPutsFourConsecutiveElementsInOneByteLane) {
    // Row of 16 elements with values -1, 0, +1 cycling: word bits 8j + 2s hold element 4s + j.
    std::vector<int8_t> v(128);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int8_t>(static_cast<int>(i % 3) - 1);
    std::vector<uint8_t> bytes(dtype_tensor_bytes(DType::i2_s, 128, 128));
    i2s_pack(v.data(), 128, 1.0f, bytes.data());
    const WeightSource src{"w", DType::i2_s, {128, 1, 1, 1}, bytes};
    const auto         w = gpu_pack_linear({&src, 1});
    for (uint32_t s = 0; s < 4; ++s) {
        const uint32_t lanes = (w.words[0] >> (2 * s)) & 0x03030303u;
        for (uint32_t j = 0; j < 4; ++j) EXPECT_EQ(static_cast<int>((lanes >> (8 * j)) & 3u) - 1, v[4 * s + j]);
    }
}

// attention.wgsl's prefetching workgroups (PF_LOADS): the fewest loads per invocation that keep
// them on the compute units the heads leave free.
TEST(WebGpuPrefetch, AttentionPrefetchWorkgroupsStayOnTheFreeUnits) {
    // 2B4T's gate+up weight: 13824 rows of 2560 I2_S codes (16 per word), a row scale and an output
    // scale per row. Beside its 20 heads on 132 units: 5 loads, 110 workgroups on the 112 free.
    const uint64_t gu_words = 13824ull * 2560 / 16 + 2 * 13824ull;
    EXPECT_EQ(prefetch_loads_on_free_units(gu_words, 256, 20, 132), 5u);
    for (uint32_t units : {4u, 28u, 46u, 108u, 132u}) {
        for (uint32_t wg : {128u, 256u, 512u}) {
            for (uint64_t words : {uint64_t{1}, uint64_t{4096}, uint64_t{100000}, gu_words, 5 * gu_words}) {
                const uint32_t loads  = prefetch_loads_on_free_units(words, wg, 20, units);
                const uint64_t free   = std::max<uint64_t>(units > 20 ? units - 20 : 0, 8);
                const auto     groups = [&](uint64_t l) {
                    return uint64_t{ceil_div(static_cast<int64_t>(words), int64_t{wg} * k_prefetch_stride_words * static_cast<int64_t>(l))};
                };
                ASSERT_GE(loads, 1u);
                ASSERT_LE(loads, k_prefetch_loads_max);
                if (loads < k_prefetch_loads_max) {
                    EXPECT_LE(groups(loads), free) << units << " " << wg << " " << words;
                }
                if (loads > 1) {
                    EXPECT_GT(groups(loads - 1), free) << units << " " << wg << " " << words;
                }
            }
        }
    }
}

// ------------------------------------------------------------------ ops against the CPU

// What qkv_rope_kv_append + attention leave after a sequence of chunks (prefill and decode steps):
// q and the attention output of every chunk, and the bytes of both caches.
struct QkvChunksResult {
    std::vector<std::vector<float>> q, out;
    std::vector<uint8_t>            k_cache, v_cache;
};

// Runs `chunks` tokens at a time through b from position 0, with random int8 activations from a
// fixed seed (the same on every backend).
QkvChunksResult run_qkv_chunks(Backend & b, std::span<const WeightSource> parts, const AttentionShape & shape,
                               DType cache, int64_t k, std::span<const int64_t> chunks, int64_t n_ctx) {
    const int64_t   n_q = shape.n_head * shape.head_dim, n_kv = shape.n_head_kv * shape.head_dim;
    std::mt19937    r2(9);
    auto            w   = b.load_linear(parts);
    auto            kt  = alloc_tensor(b, cache, {n_kv, n_ctx, 1, 1}, "k");
    auto            vt  = alloc_tensor(b, cache, {n_kv, n_ctx, 1, 1}, "v");
    int64_t         pos = 0;
    QkvChunksResult r;
    for (const int64_t T : chunks) {
        std::vector<int8_t> q(static_cast<size_t>(k * T));
        std::vector<float>  s(static_cast<size_t>(T));
        for (auto & v : q) v = static_cast<int8_t>(static_cast<int>(r2() % 255) - 127);
        for (auto & v : s) v = 20.0f + static_cast<float>(r2() % 50);
        auto aq = alloc_tensor(b, DType::i8, {k, T, 1, 1}, "aq");
        auto as = alloc_tensor(b, DType::f32, {T, 1, 1, 1}, "as");
        auto qo = alloc_tensor(b, DType::f32, {n_q, T, 1, 1}, "qo");
        auto ao = alloc_tensor(b, DType::f32, {n_q, T, 1, 1}, "ao");
        b.write(aq.tensor, q.data(), q.size());
        b.write(as.tensor, s.data(), s.size() * 4);
        b.qkv_rope_kv_append(qo.tensor, {kt.tensor, vt.tensor}, *w, {aq.tensor, as.tensor}, shape, pos);
        b.attention(ao.tensor, qo.tensor, {kt.tensor, vt.tensor}, shape, pos);
        r.q.push_back(read_f32(b, qo.tensor));
        r.out.push_back(read_f32(b, ao.tensor));
        pos += T;
    }
    r.k_cache.resize(kt.tensor.n_bytes());
    r.v_cache.resize(vt.tensor.n_bytes());
    b.read(kt.tensor, r.k_cache.data(), r.k_cache.size());
    b.read(vt.tensor, r.v_cache.data(), r.v_cache.size());
    return r;
}


class WebGpuOps : public ::testing::Test {
protected:
    void SetUp() override { TERN_REQUIRE_WEBGPU(); }
    Backend &                gpu() { return *test::shared_webgpu().backend; }
    std::unique_ptr<Backend> cpu_ = make_cpu_backend({1});
    std::mt19937             rng_{42};

    float normal(float sd) { return std::normal_distribution<float>(0.0f, sd)(rng_); }

    // An f32 embedding of 10 rows of 64 whose element i is i, so an embedded row's first value
    // names the row (row_of); the held-step tests embed token ids through it.
    static constexpr int64_t k_row_len = 64, k_rows = 10;
    std::unique_ptr<Weight>  row_table(Backend & b) {
        std::vector<float> table(static_cast<size_t>(k_row_len * k_rows));
        for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);
        const std::vector<uint8_t> bytes(reinterpret_cast<const uint8_t *>(table.data()),
                                         reinterpret_cast<const uint8_t *>(table.data()) + table.size() * 4);
        return b.load_embedding(WeightSource{"e", DType::f32, {k_row_len, k_rows, 1, 1}, bytes});
    }
    static int row_of(Backend & b, const Tensor & t) {
        return static_cast<int>(read_f32(b, t)[0]) / static_cast<int>(k_row_len);
    }
};

// A held step (WebGpuBackend::hold_step, the sampled decode stream's) runs with what is written before release_held_step(), even
// though it was recorded first; a dropped one never runs; and a step whose recording had to submit
// part of it cannot be held (hold_step() is false and the whole step has run).
TEST_F(WebGpuOps, HeldStepsRunWithTheInputWrittenBeforeTheirRelease) {
    auto &    b   = dynamic_cast<WebGpuBackend &>(gpu());
    auto      e   = row_table(b);
    auto      tok = alloc_tensor(b, DType::i32, {1, 1, 1, 1}, "token");
    auto      x   = alloc_tensor(b, DType::f32, {k_row_len, 1, 1, 1}, "x");
    auto      y   = alloc_tensor(b, DType::f32, {k_row_len, 1, 1, 1}, "y");
    ASSERT_TRUE(b.can_hold_steps());
    int32_t id = 5;
    b.write(tok.tensor, &id, 4);
    b.begin_step();
    b.embed(x.tensor, *e, tok.tensor);
    ASSERT_TRUE(b.hold_step());
    id = 7;
    b.write(tok.tensor, &id, 4);  // before the held step runs
    b.release_held_step();
    EXPECT_EQ(row_of(b, x.tensor), 7);
    // Dropped: x keeps row 7.
    b.begin_step();
    b.embed(x.tensor, *e, tok.tensor);
    ASSERT_TRUE(b.hold_step());
    id = 2;
    b.write(tok.tensor, &id, 4);
    b.drop_held_step();
    EXPECT_EQ(row_of(b, x.tensor), 7);
    // Split: a read inside the step submits what was recorded so far.
    b.begin_step();
    b.embed(x.tensor, *e, tok.tensor);
    EXPECT_EQ(row_of(b, x.tensor), 2);
    b.embed(y.tensor, *e, tok.tensor);
    EXPECT_FALSE(b.hold_step());
    id = 4;
    b.write(tok.tensor, &id, 4);
    EXPECT_EQ(row_of(b, y.tensor), 2) << "the rest of a split step runs at once, with the input it had";
}

// WebGpuBackend::start_from_idle (the greedy decode stream's first step): the next step goes out in
// pieces, the first of 8 dispatches (the first_submit tuning key's default), then 16, so a step of 12
// cannot be held whole; one of 7 can; and the pieces end with the step, held or not (a step of 20
// after it, which a piece of 16 would split, is held whole).
TEST_F(WebGpuOps, AStepAfterAnIdleDeviceGoesOutInPieces) {
    auto &    b   = dynamic_cast<WebGpuBackend &>(gpu());
    auto      e   = row_table(b);
    auto      tok = alloc_tensor(b, DType::i32, {1, 1, 1, 1}, "token");
    auto      x   = alloc_tensor(b, DType::f32, {k_row_len, 1, 1, 1}, "x");
    int32_t id = 3;
    b.write(tok.tensor, &id, 4);
    b.synchronize();
    b.start_from_idle();
    b.begin_step();
    for (int i = 0; i < 7; ++i) b.embed(x.tensor, *e, tok.tensor);
    ASSERT_TRUE(b.hold_step()) << "7 dispatches are less than the first piece";
    b.release_held_step();
    EXPECT_EQ(row_of(b, x.tensor), 3);
    b.start_from_idle();
    b.begin_step();
    for (int i = 0; i < 12; ++i) b.embed(x.tensor, *e, tok.tensor);
    EXPECT_FALSE(b.hold_step()) << "the step was not submitted in pieces";
    EXPECT_EQ(row_of(b, x.tensor), 3);
    b.begin_step();  // the pieces ended with the step before
    for (int i = 0; i < 20; ++i) b.embed(x.tensor, *e, tok.tensor);
    ASSERT_TRUE(b.hold_step()) << "the pieces went on past the step they were for";
    id = 6;
    b.write(tok.tensor, &id, 4);
    b.release_held_step();
    EXPECT_EQ(row_of(b, x.tensor), 6);
}

TEST_F(WebGpuOps, BitlinearAccumulateIntoAColumnViewWithTokenTiles) {
    for (DType type : k_lowbit_types) {
        for (int64_t T : {1, 11}) {
            SCOPED_TRACE(std::string(dtype_name(type)) + " T=" + std::to_string(T));
            const int64_t k = 768, n = 61;
            const auto    bytes = random_lowbit(type, k, n, rng_);
            const WeightSource src{"w", type, {k, n, 1, 1}, bytes};
            std::vector<float> x(static_cast<size_t>(k * T)), y0(static_cast<size_t>(n * (T + 2)));
            for (auto & v : x) v = normal(1.0f);
            for (auto & v : y0) v = normal(3.0f);
            std::vector<int8_t> q(x.size());
            std::vector<float>  s(static_cast<size_t>(T));
            for (int64_t t = 0; t < T; ++t) s[t] = cpu::quantize_act_row(x.data() + t * k, q.data() + t * k, k);
            std::vector<float> out[2];
            Backend *          bs[2] = {cpu_.get(), &gpu()};
            for (int i = 0; i < 2; ++i) {
                auto w  = bs[i]->load_linear({&src, 1});
                auto aq = alloc_tensor(*bs[i], DType::i8, {k, T, 1, 1}, "q");
                auto as = alloc_tensor(*bs[i], DType::f32, {T, 1, 1, 1}, "s");
                auto y  = alloc_tensor(*bs[i], DType::f32, {n, T + 2, 1, 1}, "y");
                bs[i]->write(aq.tensor, q.data(), q.size());
                bs[i]->write(as.tensor, s.data(), s.size() * 4);
                bs[i]->write(y.tensor, y0.data(), y0.size() * 4);
                // Columns 1 .. T: the view starts at n * 4 bytes, not a multiple of 256.
                bs[i]->bitlinear(y.tensor.columns(1, T), *w, {aq.tensor, as.tensor}, true);
                out[i] = read_f32(*bs[i], y.tensor);
            }
            expect_close(out[1], out[0], tolerance(1e-6), "bitlinear");
            // Columns outside the view are untouched.
            for (int64_t r = 0; r < n; ++r) EXPECT_EQ(out[1][r], y0[r]);
        }
    }
}

TEST_F(WebGpuOps, GateUpSiluAndRelu2WithGroupsAndOddSizes) {
    const int64_t k = 512, n_ff = 45, T = 9;
    const auto    bg = random_lowbit(DType::tq2_0, k, n_ff, rng_), bu = random_lowbit(DType::tq2_0, k, n_ff, rng_);
    const WeightSource parts[2] = {{"g", DType::tq2_0, {k, n_ff, 1, 1}, bg}, {"u", DType::tq2_0, {k, n_ff, 1, 1}, bu}};
    std::vector<float> x(static_cast<size_t>(k * T));
    for (auto & v : x) v = normal(1.0f);
    std::vector<int8_t> q(x.size());
    std::vector<float>  s(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) s[t] = cpu::quantize_act_row(x.data() + t * k, q.data() + t * k, k);
    for (FfnActivation act : {FfnActivation::relu2, FfnActivation::silu}) {
        std::vector<float> out[2];
        Backend *          bs[2] = {cpu_.get(), &gpu()};
        for (int i = 0; i < 2; ++i) {
            auto w  = bs[i]->load_linear(parts);
            auto aq = alloc_tensor(*bs[i], DType::i8, {k, T, 1, 1}, "q");
            auto as = alloc_tensor(*bs[i], DType::f32, {T, 1, 1, 1}, "s");
            auto f  = alloc_tensor(*bs[i], DType::f32, {n_ff, T, 1, 1}, "f");
            bs[i]->write(aq.tensor, q.data(), q.size());
            bs[i]->write(as.tensor, s.data(), s.size() * 4);
            bs[i]->gate_up(f.tensor, *w, {aq.tensor, as.tensor}, act);
            out[i] = read_f32(*bs[i], f.tensor);
        }
        expect_close(out[1], out[0], tolerance(1e-6), act == FfnActivation::silu ? "silu" : "relu2");
    }
}

// Prefill of 3 tokens then decode of 2 at pos0 = 3 and 4, with head_dim 128, partial RoPE and GQA;
// q, the K/V caches and the attention output all compared.
TEST_F(WebGpuOps, QkvRopePartialRotaryGqaHeadDim128BothCacheTypes) {
    const AttentionShape shape{4, 2, 128, 64, 500000.0f, 1.0f / std::sqrt(128.0f)};
    const int64_t        k = 256, n_q = 4 * 128, n_kv = 2 * 128, n_ctx = 9;
    const auto           bq = random_lowbit(DType::i2_s, k, n_q, rng_), bk = random_lowbit(DType::i2_s, k, n_kv, rng_),
               bv = random_lowbit(DType::i2_s, k, n_kv, rng_);
    const WeightSource parts[3] = {{"q", DType::i2_s, {k, n_q, 1, 1}, bq},
                                   {"k", DType::i2_s, {k, n_kv, 1, 1}, bk},
                                   {"v", DType::i2_s, {k, n_kv, 1, 1}, bv}};
    for (DType cache : {DType::f16, DType::f32}) {
        SCOPED_TRACE(cache == DType::f16 ? "f16 cache" : "f32 cache");
        const int64_t         chunks[] = {3, 1, 1};
        const QkvChunksResult want = run_qkv_chunks(*cpu_, parts, shape, cache, k, chunks, n_ctx);
        const QkvChunksResult got  = run_qkv_chunks(gpu(), parts, shape, cache, k, chunks, n_ctx);
        expect_close(got.q.back(), want.q.back(), tolerance(1e-6), "q after RoPE");
        if (tolerance(1) == 0) {
            EXPECT_EQ(got.k_cache, want.k_cache) << "K cache bytes";
            EXPECT_EQ(got.v_cache, want.v_cache) << "V cache bytes";
        }
        expect_close(got.out.back(), want.out.back(), tolerance(2e-5), "attention");
    }
}

// ------------------------------------------------------------------ prefill GEMM (T >= 16 tokens)
// bitlinear, gate_up and qkv_rope_kv_append take ternary_gemm.wgsl (64-row x 32- or 64-token tiles)
// from 16 tokens on; these cover partial row and token tiles, one and several scale groups per row.

TEST_F(WebGpuOps, PrefillGemmBitlinearGroupsPartialTilesAndAccumulate) {
    const int64_t k = 512, n = 70;  // n: a full 64-row tile and a partial one
    for (DType type : {DType::i2_s, DType::tq2_0, DType::q2_0, DType::pq2_0}) {  // groups: 1, 2, 8, 4
        const auto         bytes = random_lowbit(type, k, n, rng_);
        const WeightSource src{"w", type, {k, n, 1, 1}, bytes};
        std::unique_ptr<Weight> ws[2] = {cpu_->load_linear({&src, 1}), gpu().load_linear({&src, 1})};
        for (int64_t T : {16, 37, 100}) {
            for (bool accumulate : {false, true}) {
                SCOPED_TRACE(std::string(dtype_name(type)) + " T=" + std::to_string(T) +
                             (accumulate ? " accumulate" : ""));
                std::vector<float> x(static_cast<size_t>(k * T)), y0(static_cast<size_t>(n * (T + 1)));
                for (auto & v : x) v = normal(1.0f);
                for (auto & v : y0) v = normal(3.0f);
                std::vector<int8_t> q(x.size());
                std::vector<float>  s(static_cast<size_t>(T));
                for (int64_t t = 0; t < T; ++t) s[t] = cpu::quantize_act_row(x.data() + t * k, q.data() + t * k, k);
                std::vector<float> out[2];
                Backend *          bs[2] = {cpu_.get(), &gpu()};
                for (int i = 0; i < 2; ++i) {
                    auto aq = alloc_tensor(*bs[i], DType::i8, {k, T, 1, 1}, "q");
                    auto as = alloc_tensor(*bs[i], DType::f32, {T, 1, 1, 1}, "s");
                    auto y  = alloc_tensor(*bs[i], DType::f32, {n, T + 1, 1, 1}, "y");
                    bs[i]->write(aq.tensor, q.data(), q.size());
                    bs[i]->write(as.tensor, s.data(), s.size() * 4);
                    bs[i]->write(y.tensor, y0.data(), y0.size() * 4);
                    bs[i]->bitlinear(y.tensor.columns(1, T), *ws[i], {aq.tensor, as.tensor}, accumulate);
                    out[i] = read_f32(*bs[i], y.tensor);
                }
                expect_close(out[1], out[0], tolerance(1e-6), "bitlinear");
                for (int64_t r = 0; r < n; ++r) ASSERT_EQ(out[1][r], y0[r]) << "column 0 is outside the view";
            }
        }
    }
}

TEST_F(WebGpuOps, PrefillGemmGateUpRelu2AndSiluOneAndSeveralGroups) {
    const int64_t k = 512, n_ff = 45;  // 45 outputs: a full 32-output tile and a partial one
    for (DType type : {DType::i2_s, DType::tq2_0}) {
        const auto bg = random_lowbit(type, k, n_ff, rng_), bu = random_lowbit(type, k, n_ff, rng_);
        const WeightSource parts[2] = {{"g", type, {k, n_ff, 1, 1}, bg}, {"u", type, {k, n_ff, 1, 1}, bu}};
        std::unique_ptr<Weight> ws[2] = {cpu_->load_linear(parts), gpu().load_linear(parts)};
        for (int64_t T : {16, 37, 100}) {
            std::vector<float> x(static_cast<size_t>(k * T));
            for (auto & v : x) v = normal(1.0f);
            std::vector<int8_t> q(x.size());
            std::vector<float>  s(static_cast<size_t>(T));
            for (int64_t t = 0; t < T; ++t) s[t] = cpu::quantize_act_row(x.data() + t * k, q.data() + t * k, k);
            for (FfnActivation act : {FfnActivation::relu2, FfnActivation::silu}) {
                const bool silu = act == FfnActivation::silu;
                SCOPED_TRACE(std::string(dtype_name(type)) + " T=" + std::to_string(T) + (silu ? " silu" : " relu2"));
                std::vector<float> out[3];
                Backend *          bs[2] = {cpu_.get(), &gpu()};
                for (int i = 0; i < 2; ++i) {
                    auto aq = alloc_tensor(*bs[i], DType::i8, {k, T, 1, 1}, "q");
                    auto as = alloc_tensor(*bs[i], DType::f32, {1, T, 1, 1}, "s");
                    auto f  = alloc_tensor(*bs[i], DType::f32, {n_ff, T, 1, 1}, "f");
                    bs[i]->write(aq.tensor, q.data(), q.size());
                    bs[i]->write(as.tensor, s.data(), s.size() * 4);
                    bs[i]->gate_up(f.tensor, *ws[i], {aq.tensor, as.tensor}, act);
                    out[i] = read_f32(*bs[i], f.tensor);
                    if (i == 1) {  // the same through the per-token kernel, 8 tokens at a time
                        for (int64_t t0 = 0; t0 < T; t0 += 8) {
                            const int64_t nt = std::min<int64_t>(8, T - t0);
                            bs[i]->gate_up(f.tensor.columns(t0, nt), *ws[i],
                                           {aq.tensor.columns(t0, nt), as.tensor.columns(t0, nt)}, act);
                        }
                        out[2] = read_f32(*bs[i], f.tensor);
                    }
                }
                expect_close(out[1], out[0], tolerance(1e-6), "gate_up");
                expect_close(out[1], out[2], tolerance(1e-6), "GEMM against the per-token kernel");
            }
        }
    }
}

// Prefill chunks through the GEMM + rope_kv.wgsl (the second at pos0 > 0), then one decode token
// through qkv_rope.wgsl: q, both caches (bytes) and the attention output against the CPU.
TEST_F(WebGpuOps, PrefillGemmQkvRopeKvAppendHeadDims64And128BothCaches) {
    struct Case {
        AttentionShape     shape;
        DType              type;
        int64_t            k;
        std::vector<int64_t> chunks;
    };
    const Case cases[] = {
        // head_dim 128, half rotated, GQA 4:2, one scale group
        {{4, 2, 128, 64, 500000.0f, 1.0f / std::sqrt(128.0f)}, DType::i2_s, 256, {20, 17, 1}},
        // head_dim 64, fully rotated, GQA 6:2, two scale groups per row
        {{6, 2, 64, 64, 10000.0f, 1.0f / std::sqrt(64.0f)}, DType::tq2_0, 512, {16, 37, 1}},
    };
    for (const Case & c : cases) {
        const int64_t hd = c.shape.head_dim, n_q = c.shape.n_head * hd, n_kv = c.shape.n_head_kv * hd, k = c.k;
        int64_t       n_ctx = 0;
        for (int64_t T : c.chunks) n_ctx += T;
        const auto bq = random_lowbit(c.type, k, n_q, rng_), bk = random_lowbit(c.type, k, n_kv, rng_),
                   bv = random_lowbit(c.type, k, n_kv, rng_);
        const WeightSource parts[3] = {{"q", c.type, {k, n_q, 1, 1}, bq},
                                       {"k", c.type, {k, n_kv, 1, 1}, bk},
                                       {"v", c.type, {k, n_kv, 1, 1}, bv}};
        for (DType cache : {DType::f16, DType::f32}) {
            SCOPED_TRACE("head_dim " + std::to_string(hd) + (cache == DType::f16 ? ", f16 cache" : ", f32 cache"));
            const QkvChunksResult want = run_qkv_chunks(*cpu_, parts, c.shape, cache, k, c.chunks, n_ctx);
            const QkvChunksResult got  = run_qkv_chunks(gpu(), parts, c.shape, cache, k, c.chunks, n_ctx);
            for (size_t ci = 0; ci < c.chunks.size(); ++ci) {
                SCOPED_TRACE("chunk " + std::to_string(ci));
                expect_close(got.q[ci], want.q[ci], tolerance(1e-6), "q after RoPE");
                expect_close(got.out[ci], want.out[ci], tolerance(2e-5), "attention");
            }
            if (tolerance(1) == 0) {
                EXPECT_EQ(got.k_cache, want.k_cache) << "K cache bytes";
                EXPECT_EQ(got.v_cache, want.v_cache) << "V cache bytes";
            }
        }
    }
}

TEST_F(WebGpuOps, LmHeadF32AndUnroundedF16TablesWithTokenTilesAndArgmax) {
    const int64_t k = 256, n_vocab = 1001, T = 6;
    std::vector<float> table(static_cast<size_t>(k * n_vocab)), h(static_cast<size_t>(k * T));
    for (auto & v : table) v = normal(0.05f);
    for (auto & v : h) v = normal(1.0f);
    std::vector<uint8_t> f16(table.size() * 2), f32(table.size() * 4);
    quantize_row(DType::f16, table.data(), f16.data(), static_cast<int64_t>(table.size()));
    std::memcpy(f32.data(), table.data(), f32.size());
    for (DType type : {DType::f16, DType::f32}) {
        for (bool round : {false, true}) {
            SCOPED_TRACE(std::string(dtype_name(type)) + (round ? " rounded input" : " f32 input"));
            const WeightSource src{"head", type, {k, n_vocab, 1, 1}, type == DType::f16 ? f16 : f32};
            std::vector<float>   out[2];
            std::vector<int32_t> ids[2];
            Backend *            bs[2] = {cpu_.get(), &gpu()};
            for (int i = 0; i < 2; ++i) {
                auto w  = bs[i]->load_embedding(src);
                auto ht = alloc_tensor(*bs[i], DType::f32, {k, T, 1, 1}, "h");
                auto lg = alloc_tensor(*bs[i], DType::f32, {n_vocab, T, 1, 1}, "logits");
                auto am = alloc_tensor(*bs[i], DType::i32, {T, 1, 1, 1}, "ids");
                bs[i]->write(ht.tensor, h.data(), h.size() * 4);
                bs[i]->lm_head(lg.tensor, *w, ht.tensor, round);
                bs[i]->argmax(am.tensor, lg.tensor);
                out[i] = read_f32(*bs[i], lg.tensor);
                ids[i].resize(T);
                bs[i]->read(am.tensor, ids[i].data(), T * 4);
            }
            expect_close(out[1], out[0], tolerance(1e-6), "logits");
            EXPECT_EQ(ids[1], ids[0]);
        }
    }
}

// head_i8_pack.wgsl, the int8 copy greedy decoding streams instead of an F16 head. Worked example:
// row 0 = (1, -0.5, 0.25, 0.1875, 0...): scale 1/127, codes 127, round(-63.5) = -64 (half to even),
// round(31.75) = 32, round(23.8125) = 24: bytes 7f c0 20 18, element b of a word in byte b. Row 1 is
// zero (scale and bound 0); row 2 holds -2 in its last element only (code -127 in the last byte).
// Random rows: every code within half a step of e / scale, and each row's bound coefficient at least
// the bound recomputed in double from the codes (lm_head_i8_argmax.wgsl relies on it) but not loose.
TEST_F(WebGpuOps, HeadInt8CopyCodesScalesAndBounds) {
    auto * be = dynamic_cast<WebGpuBackend *>(&gpu());
    ASSERT_NE(be, nullptr);
    const int64_t      k = 48, nv = 37;
    std::vector<float> table(static_cast<size_t>(k * nv), 0.0f);
    for (int64_t r = 3; r < nv; ++r) {
        for (int64_t c = 0; c < k; ++c) table[static_cast<size_t>(r * k + c)] = normal(r % 2 ? 0.05f : 3.0f);
    }
    const float row0[4] = {1.0f, -0.5f, 0.25f, 0.1875f};
    std::copy(row0, row0 + 4, table.begin());
    table[static_cast<size_t>(2 * k + k - 1)] = -2.0f;
    std::vector<uint8_t> tb(table.size() * 2);
    quantize_row(DType::f16, table.data(), tb.data(), static_cast<int64_t>(table.size()));
    std::vector<float> e(table.size());  // the f16 values
    dequantize_row(DType::f16, tb.data(), e.data(), static_cast<int64_t>(e.size()));
    const WeightSource src{"e", DType::f16, {k, nv, 1, 1}, tb};
    auto               head = be->load_embedding(src);
    const auto         copy = be->read_head_int8_copy(*head);
    ASSERT_EQ(copy.codes.size(), table.size());
    ASSERT_EQ(copy.info.size(), static_cast<size_t>(4 * nv));

    uint32_t word0 = 0;
    std::memcpy(&word0, copy.codes.data(), 4);
    EXPECT_EQ(word0, 0x1820c07fu);
    EXPECT_EQ(copy.info[0], 1.0f / 127.0f);
    EXPECT_EQ(copy.info[4], 0.0f);
    EXPECT_EQ(copy.info[5], 0.0f);
    EXPECT_EQ(copy.info[6], 0.0f);
    EXPECT_EQ(copy.codes[static_cast<size_t>(2 * k + k - 1)], -127);
    EXPECT_EQ(copy.info[8], 2.0f / 127.0f);

    const double u = std::ldexp(1.0, -24);
    for (int64_t r = 0; r < nv; ++r) {
        SCOPED_TRACE("row " + std::to_string(r));
        const float s = copy.info[static_cast<size_t>(4 * r)], c = copy.info[static_cast<size_t>(4 * r + 1)];
        const float sq = copy.info[static_cast<size_t>(4 * r + 2)];
        double      m = 0, qq = 0, dd = 0, ee = 0;
        for (int64_t i = 0; i < k; ++i) m = std::max(m, std::fabs(double(e[static_cast<size_t>(r * k + i)])));
        EXPECT_NEAR(s, m / 127.0, m / 127.0 * 1e-6);
        for (int64_t i = 0; i < k; ++i) {
            const double v = e[static_cast<size_t>(r * k + i)];
            const int    q = copy.codes[static_cast<size_t>(r * k + i)];
            ASSERT_LE(std::abs(q), 127);
            EXPECT_LE(std::fabs(v - double(s) * q), 0.5 * s * (1 + 1e-5)) << "element " << i;
            qq += double(q) * q;
            dd += (v - double(s) * q) * (v - double(s) * q);
            ee += v * v;
        }
        const double bound = double(s) * std::sqrt(qq) * double(k + 2) * u + std::sqrt(dd) + u * std::sqrt(ee);
        EXPECT_GE(double(c), bound);
        EXPECT_LE(double(c), bound * 1.03 + 1e-30);  // (K + 3) u and the margin 2^-8
        EXPECT_GE(double(sq), double(s) * std::sqrt(qq));
        EXPECT_LE(double(sq), double(s) * std::sqrt(qq) * 1.01);
    }
}

// The int8 greedy head's value f (left in the logits) and bound B for every row against the exact
// head's logit: |f - exact| <= B, with random rows (the input rounded to f16 or not) and with a case
// built so that the f16 rounding of the exact head's input moves every product the same way (x = 1,
// norm weights that put h just above 1, a row of ones): B must cover that rounding, which the grid
// of g = x nw (lm_head_i8_argmax.wgsl's HEAD_G) does not see. Fails with rho = 0 in head_g_norms.
TEST_F(WebGpuOps, GreedyHeadBoundsCoverTheExactLogits) {
    auto * be = dynamic_cast<WebGpuBackend *>(&gpu());
    ASSERT_NE(be, nullptr);
    const int64_t k = 256, nv = 300;
    const float   eps = 1e-5f;
    for (int kind = 0; kind < 3; ++kind) {  // 0 random, input rounded to f16; 1 random, f32; 2 built
        SCOPED_TRACE("case " + std::to_string(kind));
        const bool         round_in = kind != 1;
        std::vector<float> table(static_cast<size_t>(k * nv)), x(k), nw(k);
        for (auto & v : table) v = normal(0.05f);
        for (auto & v : x) v = normal(1.5f);
        for (auto & v : nw) v = 1.0f + normal(0.3f);
        if (kind == 2) {
            std::fill(x.begin(), x.end(), 1.0f);
            const float inv = 1.0f / std::sqrt(1.0f + eps);  // (the mean of x^2 is 1)
            std::fill(nw.begin(), nw.end(), (1.0f + 0.75f / 2048.0f) / inv);
            std::fill(table.begin(), table.begin() + k, 1.0f);
        }
        std::vector<uint8_t> tb(table.size() * 2), nb(nw.size() * 4);
        quantize_row(DType::f16, table.data(), tb.data(), static_cast<int64_t>(table.size()));
        std::memcpy(nb.data(), nw.data(), nb.size());
        const WeightSource es{"e", DType::f16, {k, nv, 1, 1}, tb}, ns{"n", DType::f32, {k, 1, 1, 1}, nb};
        std::vector<float> logits[2];
        for (int i = 0; i < 2; ++i) {
            Backend & b   = i == 0 ? *cpu_ : gpu();
            auto      e   = b.load_embedding(es);
            auto      n   = b.load_norm(ns);
            auto      xt  = alloc_tensor(b, DType::f32, {k, 1, 1, 1}, "x");
            auto      h   = alloc_tensor(b, DType::f32, {k, 1, 1, 1}, "h");
            auto      lg  = alloc_tensor(b, DType::f32, {nv, 1, 1, 1}, "logits");
            auto      ids = alloc_tensor(b, DType::i32, {1, 1, 1, 1}, "ids");
            b.write(xt.tensor, x.data(), x.size() * 4);
            b.begin_step();
            // (The WebGPU head with ids leaves the int8 copy's values and bounds in lg and its partials.)
            b.output_head({lg.tensor, i == 0 ? Tensor{} : ids.tensor, 0}, *e, {xt.tensor, n.get(), eps, {}, h.tensor},
                          round_in);
            b.end_step();
            logits[i] = read_f32(b, lg.tensor);
        }
        const std::vector<float> bound = be->read_greedy_head_bounds(nv);
        ASSERT_EQ(bound.size(), static_cast<size_t>(nv)) << "the int8 greedy head ran";
        double mean = 0, var = 0;
        for (const float v : logits[0]) mean += v / double(nv);
        for (const float v : logits[0]) var += (v - mean) * (v - mean) / double(nv);
        std::vector<float> sorted = bound;
        std::sort(sorted.begin(), sorted.end());
        EXPECT_LT(sorted[nv / 2], std::sqrt(var)) << "the median bound is below a standard deviation";
        for (int64_t r = 0; r < nv; ++r) {
            const double f = logits[1][static_cast<size_t>(r)], exact = logits[0][static_cast<size_t>(r)];
            ASSERT_LE(std::fabs(f - exact), double(bound[static_cast<size_t>(r)])) << "row " << r << ", f " << f;
        }
    }
}

// measure_read_bandwidth (tern bench --roofline's read-only ceiling, read_bandwidth.wgsl) runs every
// layout it is given, grid-stride loads and the head's rows alike, and reports a positive rate: one
// log line per layout (set_read_bandwidth_layouts), here over a small buffer.
TEST_F(WebGpuOps, ReadBandwidthRunsEveryLayout) {
    std::vector<std::string> lines;
    const LogLevel           level = log_level();
    set_log_level(LogLevel::info);
    set_log_sink([&](LogLevel, const std::string & m) {
        if (m.find("read bandwidth") != std::string::npos) lines.push_back(m);
    });
    auto & web = dynamic_cast<WebGpuBackend &>(gpu());
    web.set_read_bandwidth_layouts({{4, 1, false}, {4, 1, true}, {8, 8, false}});
    const double bps = web.measure_read_bandwidth(size_t{1} << 20);
    web.set_read_bandwidth_layouts({});
    set_log_sink(nullptr);
    set_log_level(level);
    EXPECT_GT(bps, 0.0);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_NE(lines[0].find("1 loads per thread"), std::string::npos) << lines[0];
    EXPECT_NE(lines[1].find("head rows"), std::string::npos) << lines[1];
    EXPECT_NE(lines[2].find("8 loads per thread"), std::string::npos) << lines[2];
}

TEST_F(WebGpuOps, EmbedF32AndDequantizedQ8TablesFromATokenView) {
    const int64_t n_embd = 96, n_vocab = 50;
    std::vector<float> table(static_cast<size_t>(n_embd * n_vocab));
    for (auto & v : table) v = normal(0.5f);
    std::vector<uint8_t> f32(table.size() * 4), q8(dtype_tensor_bytes(DType::q8_0, n_embd, n_embd * n_vocab));
    std::memcpy(f32.data(), table.data(), f32.size());
    for (int64_t r = 0; r < n_vocab; ++r) {
        quantize_row(DType::q8_0, table.data() + r * n_embd, q8.data() + r * dtype_row_bytes(DType::q8_0, n_embd), n_embd);
    }
    const int32_t ids[6] = {-1, 49, 0, 7, 7, 3};  // the view skips the first id
    for (DType type : {DType::f32, DType::q8_0}) {
        SCOPED_TRACE(std::string(dtype_name(type)));
        const WeightSource src{"embd", type, {n_embd, n_vocab, 1, 1}, type == DType::f32 ? f32 : q8};
        std::vector<float> out[2];
        Backend *          bs[2] = {cpu_.get(), &gpu()};
        for (int i = 0; i < 2; ++i) {
            auto   w   = bs[i]->load_embedding(src);
            auto   tok = alloc_tensor(*bs[i], DType::i32, {6, 1, 1, 1}, "ids");
            auto   x   = alloc_tensor(*bs[i], DType::f32, {n_embd, 5, 1, 1}, "x");
            Tensor view = tok.tensor;
            view.offset += 4;
            view.ne[0] = 5;
            bs[i]->write(tok.tensor, ids, sizeof ids);
            bs[i]->embed(x.tensor, *w, view);
            out[i] = read_f32(*bs[i], x.tensor);
        }
        expect_close(out[1], out[0], 0.0, "embedding rows");
    }
}

TEST_F(WebGpuOps, RmsNormInPlaceAndOnAnUnalignedColumnView) {
    const int64_t k = 200, T = 3;
    std::vector<float> x(static_cast<size_t>(k * T)), w(static_cast<size_t>(k));
    for (auto & v : x) v = normal(2.0f);
    for (auto & v : w) v = 1.0f + normal(0.1f);
    std::vector<uint8_t> wb(w.size() * 4);
    std::memcpy(wb.data(), w.data(), wb.size());
    const WeightSource src{"norm", DType::f32, {k, 1, 1, 1}, wb};
    std::vector<float> in_place[2], last[2];
    Backend *          bs[2] = {cpu_.get(), &gpu()};
    for (int i = 0; i < 2; ++i) {
        auto nw = bs[i]->load_norm(src);
        auto xt = alloc_tensor(*bs[i], DType::f32, {k, T, 1, 1}, "x");
        auto ht = alloc_tensor(*bs[i], DType::f32, {k, 1, 1, 1}, "h");
        bs[i]->write(xt.tensor, x.data(), x.size() * 4);
        bs[i]->rms_norm(ht.tensor, xt.tensor.columns(T - 1, 1), *nw, 1e-6f);  // offset 1600 bytes
        last[i] = read_f32(*bs[i], ht.tensor);
        bs[i]->rms_norm(xt.tensor, xt.tensor, *nw, 1e-6f);
        in_place[i] = read_f32(*bs[i], xt.tensor);
    }
    expect_close(last[1], last[0], tolerance(1e-6), "last column");
    expect_close(in_place[1], in_place[0], tolerance(1e-6), "in place");
}

// One decode layer for the norm-statistics tests: o-projection (k x k), gate+up (k -> n_ff) and down
// (n_ff -> k), random ternary weights, three norms near 1, the attention output's stand-in v and the
// residual x. Holds the bytes the WeightSources point into: built in place, never moved.
struct NormChainData {
    NormChainData(int64_t k_, int64_t n_ff_, std::mt19937 & rng) : k(k_), n_ff(n_ff_) {
        const auto normal = [&](float sd) { return std::normal_distribution<float>(0.0f, sd)(rng); };
        bo = random_lowbit(DType::i2_s, k, k, rng);
        bd = random_lowbit(DType::i2_s, n_ff, k, rng);
        bg = random_lowbit(DType::i2_s, k, n_ff, rng);
        bu = random_lowbit(DType::i2_s, k, n_ff, rng);
        v.resize(k), x0.resize(k);
        for (auto & e : v) e = normal(1.0f);
        for (auto & e : x0) e = normal(2.0f);
        for (auto * n : {&n1, &n2, &n3}) {
            n->resize(n == &n3 ? n_ff : k);
            for (auto & e : *n) e = 1.0f + normal(0.1f);
        }
    }
    NormChainData(const NormChainData &) = delete;
    WeightSource o() const { return {"o", DType::i2_s, {k, k, 1, 1}, bo}; }
    WeightSource down() const { return {"d", DType::i2_s, {n_ff, k, 1, 1}, bd}; }
    std::array<WeightSource, 2> gate_up() const {
        return {WeightSource{"g", DType::i2_s, {k, n_ff, 1, 1}, bg}, WeightSource{"u", DType::i2_s, {k, n_ff, 1, 1}, bu}};
    }
    static WeightSource norm(const char * name, const std::vector<float> & w) {
        return {name, DType::f32, {static_cast<int64_t>(w.size()), 1, 1, 1},
                {reinterpret_cast<const uint8_t *>(w.data()), w.size() * 4}};
    }
    int64_t              k, n_ff;
    std::vector<uint8_t> bo, bd, bg, bu;
    std::vector<float>   v, x0, n1, n2, n3;
};

// The chain loaded on one backend, with v and x written and the int8 activation buffers the
// projections share (a_k: k inputs, a_f: n_ff).
struct NormChainOn {
    NormChainOn(Backend & b, const NormChainData & d)
        : mo(b.load_linear({std::array{d.o()}})), md(b.load_linear({std::array{d.down()}})),
          mgu(b.load_linear(d.gate_up())), m1(b.load_norm(NormChainData::norm("n1", d.n1))),
          m2(b.load_norm(NormChainData::norm("n2", d.n2))), m3(b.load_norm(NormChainData::norm("n3", d.n3))),
          vt(alloc_tensor(b, DType::f32, {d.k, 1, 1, 1}, "v")), xt(alloc_tensor(b, DType::f32, {d.k, 1, 1, 1}, "x")),
          ft(alloc_tensor(b, DType::f32, {d.n_ff, 1, 1, 1}, "f")), q(alloc_tensor(b, DType::i8, {d.n_ff, 1, 1, 1}, "q")),
          qs(alloc_tensor(b, DType::f32, {1, 1, 1, 1}, "qs")),
          a_k{{q.tensor.buffer, 0, DType::i8, {d.k, 1, 1, 1}}, qs.tensor},
          a_f{{q.tensor.buffer, 0, DType::i8, {d.n_ff, 1, 1, 1}}, qs.tensor} {
        b.write(vt.tensor, d.v.data(), d.v.size() * 4);
        b.write(xt.tensor, d.x0.data(), d.x0.size() * 4);
    }
    std::unique_ptr<Weight> mo, md, mgu, m1, m2, m3;
    OwnedTensor             vt, xt, ft, q, qs;
    QuantizedActs           a_k, a_f;
};

// The norm statistics: a decode kernel that writes a vector leaves its blocks' sums of squares for
// the next kernel's norm. A layer-like chain of one token (o-proj accumulating into x, gate+up,
// down accumulating into x, a projection of x) must give the CPU's bits; the last three take their
// norm from the statistics. With a host write to x between the down projection and the last one,
// that one must compute its norm from x itself (the statistics describe the old x).
TEST_F(WebGpuOps, NormStatisticsFeedTheNextNormAndAreDroppedAfterAWrite) {
    auto * web = dynamic_cast<WebGpuBackend *>(&gpu());
    ASSERT_NE(web, nullptr);
    const NormChainData d(256, 384, rng_);
    std::vector<float>  x_new(d.k);
    for (auto & e : x_new) e = normal(3.0f);
    for (const bool write_between : {false, true}) {
        SCOPED_TRACE(write_between ? "a write between" : "a plain chain");
        std::vector<float> out_x[2], out_f[2], out_y[2];
        Backend *          bs[2] = {cpu_.get(), &gpu()};
        int64_t            reads = 0;
        for (int i = 0; i < 2; ++i) {
            Backend &   b = *bs[i];
            NormChainOn c(b, d);
            auto        yt = alloc_tensor(b, DType::f32, {d.k, 1, 1, 1}, "y");
        const int64_t before = i == 1 ? web->norm_stats_reads() : 0;
            b.begin_step();
            b.linear(c.xt.tensor, *c.mo, {c.vt.tensor, c.m1.get(), 1e-5f, c.a_k, {}}, /*accumulate=*/true);
            b.linear_glu(c.ft.tensor, *c.mgu, {c.xt.tensor, c.m2.get(), 1e-5f, c.a_k, {}}, FfnActivation::relu2);
            b.linear(c.xt.tensor, *c.md, {c.ft.tensor, c.m3.get(), 1e-6f, c.a_f, {}}, /*accumulate=*/true);
            if (write_between) b.write(c.xt.tensor, x_new.data(), x_new.size() * 4);
            b.linear(yt.tensor, *c.mo, {c.xt.tensor, c.m2.get(), 1e-5f, c.a_k, {}}, /*accumulate=*/false);
            b.end_step();
            if (i == 1) reads = web->norm_stats_reads() - before;
            out_x[i] = read_f32(b, c.xt.tensor);
            out_f[i] = read_f32(b, c.ft.tensor);
            out_y[i] = read_f32(b, yt.tensor);
        }
        EXPECT_EQ(reads, write_between ? 2 : 3);
        expect_close(out_f[1], out_f[0], 0.0, "gate_up (norm of x from statistics)");
        expect_close(out_x[1], out_x[0], 0.0, "x");
        expect_close(out_y[1], out_y[0], 0.0, "the last projection");
    }
}

// Issue 52: the slot a decode kernel reads its norm statistics from is its pipeline constant, so the
// slots go by role (a producer writes the slot it does not read, else slot 0). Layers whose attention
// writes no statistics (one query past 512 positions) have 3 producers: o-proj (its norm from x itself),
// gate+up, down. Every such layer must reuse the first layer's pipelines (slots alternating with each
// producer gave every matmul two pipelines used in turn, each dispatch ~2 us slower on an H200), and
// give the CPU's bits.
TEST_F(WebGpuOps, NormStatisticsSlotsKeepOnePipelinePerKernelAcrossLayers) {
    auto * web = dynamic_cast<WebGpuBackend *>(&gpu());
    ASSERT_NE(web, nullptr);
    const NormChainData d(384, 640, rng_);  // (shapes no other test builds pipelines for: the backend is shared)
    constexpr int       layers = 3;
    std::vector<float>  out_x[2];
    Backend *           bs[2]  = {cpu_.get(), &gpu()};
    size_t              built[layers + 1] = {};
    int64_t             reads = 0;
    for (int i = 0; i < 2; ++i) {
        Backend &   b = *bs[i];
        NormChainOn c(b, d);
        const int64_t before = i == 1 ? web->norm_stats_reads() : 0;
        b.begin_step();
        for (int l = 0; l < layers; ++l) {
            if (i == 1) built[l] = web->pipelines_built();
            // (v stands in for the attention output: no statistics for it, as past 512 positions)
            b.linear(c.xt.tensor, *c.mo, {c.vt.tensor, c.m1.get(), 1e-5f, c.a_k, {}}, /*accumulate=*/true);
            b.linear_glu(c.ft.tensor, *c.mgu, {c.xt.tensor, c.m2.get(), 1e-5f, c.a_k, {}}, FfnActivation::relu2);
            b.linear(c.xt.tensor, *c.md, {c.ft.tensor, c.m3.get(), 1e-6f, c.a_f, {}}, /*accumulate=*/true);
        }
        if (i == 1) built[layers] = web->pipelines_built();
        b.end_step();
        if (i == 1) reads = web->norm_stats_reads() - before;
        out_x[i] = read_f32(b, c.xt.tensor);
    }
    EXPECT_EQ(reads, 2 * layers);  // gate+up and down of every layer
    EXPECT_GT(built[1], built[0]);  // (the first layer's pipelines are new)
    EXPECT_EQ(built[layers], built[1]) << "a later layer built pipelines of its own";
    expect_close(out_x[1], out_x[0], 0.0, "x after the layers");
}

TEST_F(WebGpuOps, EmulatedDot4KernelsMatchTheCpu) {
    WebGpuOptions o;
    o.allow_cpu_adapter = true;
    o.emulate_dot4      = true;
    auto emu = make_webgpu_backend(o);
    EXPECT_NE(emu->device_info().description.find("dot4 emulated"), std::string::npos);
    const int64_t k = 256, n = 33;
    for (DType type : {DType::i2_s, DType::q2_0, DType::tq2_0}) {
        for (int64_t T : {2, 17}) {  // the per-token kernel, then the prefill GEMM
            SCOPED_TRACE(std::string(dtype_name(type)) + " T=" + std::to_string(T));
            const auto          bytes = random_lowbit(type, k, n, rng_);
            const WeightSource  src{"w", type, {k, n, 1, 1}, bytes};
            std::vector<int8_t> q(static_cast<size_t>(k * T));
            for (auto & v : q) v = static_cast<int8_t>(static_cast<int>(rng_() % 256) - 128);
            std::vector<float> s(static_cast<size_t>(T));
            for (int64_t t = 0; t < T; ++t) s[t] = 12.5f + 27.5f * static_cast<float>(t % 2);
            std::vector<float> out[2];
            Backend *          bs[2] = {cpu_.get(), emu.get()};
            for (int i = 0; i < 2; ++i) {
                auto w  = bs[i]->load_linear({&src, 1});
                auto aq = alloc_tensor(*bs[i], DType::i8, {k, T, 1, 1}, "q");
                auto as = alloc_tensor(*bs[i], DType::f32, {T, 1, 1, 1}, "s");
                auto y  = alloc_tensor(*bs[i], DType::f32, {n, T, 1, 1}, "y");
                bs[i]->write(aq.tensor, q.data(), q.size());
                bs[i]->write(as.tensor, s.data(), s.size() * 4);
                bs[i]->bitlinear(y.tensor, *w, {aq.tensor, as.tensor}, false);
                out[i] = read_f32(*bs[i], y.tensor);
            }
            expect_close(out[1], out[0], tolerance(1e-6), std::string(dtype_name(type)));
        }
    }
}

TEST_F(WebGpuOps, UnalignedWritesAndReadsKeepNeighbouringBytes) {
    auto t = alloc_tensor(gpu(), DType::i8, {64, 1, 1, 1}, "bytes");
    std::vector<uint8_t> base(64);
    for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<uint8_t>(i);
    gpu().write(t.tensor, base.data(), base.size());
    Tensor view = t.tensor;
    view.offset = 5;
    view.ne[0]  = 7;
    const uint8_t patch[7] = {200, 201, 202, 203, 204, 205, 206};
    gpu().write(view, patch, sizeof patch);
    std::vector<uint8_t> back(64);
    gpu().read(t.tensor, back.data(), back.size());
    for (size_t i = 0; i < back.size(); ++i) {
        EXPECT_EQ(back[i], i >= 5 && i < 12 ? patch[i - 5] : base[i]) << "byte " << i;
    }
    uint8_t part[3];
    view.offset = 9;
    view.ne[0]  = 3;
    gpu().read(view, part, 3);
    EXPECT_EQ(part[0], 204);
    EXPECT_EQ(part[2], 206);
}

// TERN_WEBGPU_PROFILE=gpu: every dispatch timed by GPU timestamps (this also checks the query set and
// pass timestamp struct layouts against the loaded Dawn). Skipped where the adapter has no timestamps.
TEST(WebGpuProfile, GpuTimestampsTimeEveryDispatch) {
    TERN_REQUIRE_WEBGPU();
    if (!dynamic_cast<WebGpuBackend &>(*test::shared_webgpu().backend).context().features().timestamp_query) {
        GTEST_SKIP() << "this adapter has no timestamp queries";
    }
    // The setting is read when the backend is made; whatever the environment had is put back.
    const char *      had   = std::getenv("TERN_WEBGPU_PROFILE");
    const std::string saved = had ? had : "";
    setenv("TERN_WEBGPU_PROFILE", "gpu", 1);
    WebGpuOptions o;
    o.allow_cpu_adapter = true;
    auto be = make_webgpu_backend(o);
    if (had) {
        setenv("TERN_WEBGPU_PROFILE", saved.c_str(), 1);
    } else {
        unsetenv("TERN_WEBGPU_PROFILE");
    }
    const int64_t        k = 256;
    std::vector<uint8_t> wb(k * 4);
    const float          one = 1.0f;
    for (int64_t i = 0; i < k; ++i) std::memcpy(wb.data() + i * 4, &one, 4);
    auto nw = be->load_norm({"n", DType::f32, {k, 1, 1, 1}, wb});
    auto x  = alloc_tensor(*be, DType::f32, {k, 3, 1, 1}, "x");
    auto y  = alloc_tensor(*be, DType::f32, {k, 3, 1, 1}, "y");
    std::vector<float> xv(static_cast<size_t>(k * 3), 0.25f);
    be->write(x.tensor, xv.data(), xv.size() * 4);
    be->begin_step();
    for (int i = 0; i < 5; ++i) be->rms_norm(y.tensor, x.tensor, *nw, 1e-5f);
    be->end_step();
    be->synchronize();
    const auto & times = dynamic_cast<WebGpuBackend &>(*be).gpu_times();
    int64_t      norms = 0;
    double       ms    = 0;
    for (const auto & [label, v] : times) {
        if (label.rfind("rms_norm[", 0) == 0) {
            norms += v.first;
            ms += v.second;
        }
    }
    EXPECT_EQ(norms, 5);
    EXPECT_GT(ms, 0.0);
    EXPECT_LT(ms, 10000.0);
}

TEST_F(WebGpuOps, EveryOpIsOneDispatchAndEndStepSubmits) {
    const int64_t k = 128, n = 16;
    const auto    bytes = random_lowbit(DType::i2_s, k, n, rng_);
    const WeightSource src{"w", DType::i2_s, {k, n, 1, 1}, bytes};
    std::vector<uint8_t> wb(k * 4);
    const float          one = 1.0f;
    for (int64_t i = 0; i < k; ++i) std::memcpy(wb.data() + i * 4, &one, 4);
    const WeightSource nsrc{"n", DType::f32, {k, 1, 1, 1}, wb};
    auto w  = gpu().load_linear({&src, 1});
    auto nw = gpu().load_norm(nsrc);
    auto x  = alloc_tensor(gpu(), DType::f32, {k, 1, 1, 1}, "x");
    auto aq = alloc_tensor(gpu(), DType::i8, {k, 1, 1, 1}, "q");
    auto as = alloc_tensor(gpu(), DType::f32, {1, 1, 1, 1}, "s");
    auto y  = alloc_tensor(gpu(), DType::f32, {n, 1, 1, 1}, "y");
    std::vector<float> xv(k, 0.5f);
    gpu().write(x.tensor, xv.data(), xv.size() * 4);
    gpu().take_dispatch_count();
    gpu().begin_step();
    gpu().rms_norm_quant({aq.tensor, as.tensor}, x.tensor, *nw, 1e-5f);
    gpu().bitlinear(y.tensor, *w, {aq.tensor, as.tensor}, false);
    gpu().rms_norm(x.tensor, x.tensor, *nw, 1e-5f);
    gpu().end_step();
    gpu().synchronize();
    EXPECT_EQ(gpu().take_dispatch_count(), 3);
    EXPECT_EQ(gpu().take_dispatch_count(), 0);

    // One token: the fused pair is one dispatch (the norm runs in the matmul's prologue); the LM
    // head writes the argmax's first stage, so head + argmax are two.
    std::vector<float> table(static_cast<size_t>(k * 70));
    for (auto & v : table) v = static_cast<float>(rng_() % 200) / 100.0f - 1.0f;
    std::vector<uint8_t> tb(table.size() * 2);
    quantize_row(DType::f16, table.data(), tb.data(), static_cast<int64_t>(table.size()));
    const WeightSource esrc{"e", DType::f16, {k, 70, 1, 1}, tb};
    auto e   = gpu().load_embedding(esrc);
    auto h   = alloc_tensor(gpu(), DType::f32, {k, 1, 1, 1}, "h");
    auto lg  = alloc_tensor(gpu(), DType::f32, {70, 1, 1, 1}, "logits");
    auto ids = alloc_tensor(gpu(), DType::i32, {1, 1, 1, 1}, "ids");
    gpu().begin_step();
    gpu().linear(y.tensor, *w, {x.tensor, nw.get(), 1e-5f, {aq.tensor, as.tensor}, {}}, false);
    EXPECT_EQ(gpu().take_dispatch_count(), 1);
    gpu().output_head({lg.tensor, {}, 0}, *e, {x.tensor, nw.get(), 1e-5f, {}, h.tensor}, true);
    gpu().argmax(ids.tensor, lg.tensor);
    EXPECT_EQ(gpu().take_dispatch_count(), 2);
    gpu().end_step();
    std::vector<float> logits(70);
    gpu().read(lg.tensor, logits.data(), 70 * 4);
    int32_t id = -1;
    gpu().read(ids.tensor, &id, 4);
    EXPECT_EQ(id, std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace
}  // namespace tern
