// The WebGPU backend's general linear path (webgpu_family.cpp) against the CPU reference, bit for
// bit: matmul for every type it runs (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K; stacked parts of
// different types) on shapes that are not powers of two, matmul_glu, rope_kv_append with Qwen3's QK-norm, llama's "norm" RoPE with rope_freqs divisors
// and both cache types; one token's [q; k; v] matvec with the RoPE in its epilogue; one query's attention making the o-projection's Q8_0 blocks; then whole models: the HF tiny llama and qwen3 checkpoints
// (tests/data/hf_parity) converted to F32, Q8_0 and Q4_0, prompt logits at every position and greedy
// decoding on both backends. Skipped with the reason when there is no WebGPU adapter.
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/webgpu/webgpu_backend.h"
#include "backend/webgpu/webgpu_backend_impl.h"
#include "convert/hf_convert.h"
#include "core/fp16.h"
#include "core/mmap.h"
#include "engine/batch_engine.h"
#include "engine/session.h"
#include "model/bitnet_model.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"
#include "test_util.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace tern {
namespace {

Backend * gpu_or_skip() {
    const auto & s = test::shared_webgpu();
    return s.backend ? s.backend.get() : nullptr;
}

#define SKIP_WITHOUT_GPU()                                                   \
    Backend * gpu = gpu_or_skip();                                           \
    if (!gpu) GTEST_SKIP() << test::shared_webgpu().reason

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
    std::mt19937                    rng(seed);
    std::normal_distribution<float> d(0.0f, sigma);
    std::vector<float>              v(n);
    for (float & x : v) x = d(rng);
    return v;
}

OwnedTensor upload(Backend & be, std::array<int64_t, 4> ne, const std::vector<float> & v) {
    OwnedTensor t = alloc_tensor(be, DType::f32, ne, "t");
    be.write(t.tensor, v.data(), v.size() * 4);
    return t;
}

std::vector<float> download(Backend & be, const Tensor & t) {
    std::vector<float> v(static_cast<size_t>(t.n_elements()));
    be.read(t, v.data(), v.size() * 4);
    return v;
}

// Elements that differ in their bits (NaN-safe), with the first one described.
void expect_same_bits(const std::vector<float> & gpu, const std::vector<float> & cpu, const std::string & what) {
    ASSERT_EQ(gpu.size(), cpu.size());
    size_t n_diff = 0, first = 0;
    for (size_t i = 0; i < gpu.size(); ++i) {
        if (std::memcmp(&gpu[i], &cpu[i], 4) != 0 && n_diff++ == 0) first = i;
    }
    EXPECT_EQ(n_diff, 0u) << what << ": first at " << first << " gpu " << gpu[first] << " cpu " << cpu[first];
}

struct Quantized {
    std::vector<uint8_t> bytes;
    WeightSource         src;
};

// An f32 vector as a norm-like weight source (the vector must outlive the load).
WeightSource f32_source(const char * name, const std::vector<float> & v) {
    return WeightSource{name, DType::f32, {static_cast<int64_t>(v.size()), 1, 1, 1},
                        {reinterpret_cast<const uint8_t *>(v.data()), v.size() * 4}};
}

// The raw bits of `count` rows of a KV cache (f16 or f32 elements, n_kv per row) from row `from`,
// as words (an odd f16 tail padded with zero bits), for a bit-for-bit comparison.
std::vector<float> cache_rows_bits(Backend & be, const Tensor & cache, DType type, int64_t n_kv, int64_t from, int64_t count) {
    std::vector<uint8_t> raw(cache.n_bytes());
    be.read(cache, raw.data(), raw.size());
    const size_t       el = type == DType::f16 ? 2 : 4;
    const size_t       lo = static_cast<size_t>(from * n_kv) * el, hi = static_cast<size_t>((from + count) * n_kv) * el;
    std::vector<float> out((hi - lo + 3) / 4);
    std::memcpy(out.data(), raw.data() + lo, hi - lo);
    return out;
}

Quantized quantized(const char * name, DType type, int64_t k, int64_t n, uint32_t seed) {
    Quantized  q;
    const auto v = gaussian(static_cast<size_t>(k * n), seed, 0.5f);
    const size_t rb = dtype_row_bytes(type, k);
    q.bytes.resize(rb * static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) quantize_row(type, v.data() + r * k, q.bytes.data() + r * rb, k);
    q.src = {name, type, {k, n, 1, 1}, q.bytes};
    return q;
}

class WebGpuFamilyMatmul : public ::testing::TestWithParam<DType> {};

TEST_P(WebGpuFamilyMatmul, MatchesTheCpuBitForBit) {
    SKIP_WITHOUT_GPU();
    const DType   type = GetParam();
    auto          cpu  = make_cpu_backend({2});
    // 448 columns = 14 blocks (not a power of two); K-quants: 768 = 3 blocks of 256.
    const bool    kq = type == DType::q4_k || type == DType::q6_k;
    const int64_t k = kq ? 768 : 96 + 32 * 11, n0 = 13, n1 = 6, T = 3;
    // Parts of different types (as Q4_K_M files have them) for the K-quants.
    const DType     type1 = type == DType::q4_k ? DType::q6_k : type == DType::q6_k ? DType::q4_k : type;
    const Quantized a = quantized("a", type, k, n0, 1), b = quantized("b", type1, k, n1, 2);
    const WeightSource parts[2] = {a.src, b.src};
    auto          w_cpu = cpu->load_linear(parts);
    auto          w_gpu = gpu->load_linear(parts);
    const auto    x     = gaussian(static_cast<size_t>(k * T), 3);
    const auto    y0    = gaussian(static_cast<size_t>((n0 + n1) * T), 4);
    for (bool acc : {false, true}) {
        auto xc = upload(*cpu, {k, T, 1, 1}, x), xg = upload(*gpu, {k, T, 1, 1}, x);
        auto yc = upload(*cpu, {n0 + n1, T, 1, 1}, y0), yg = upload(*gpu, {n0 + n1, T, 1, 1}, y0);
        cpu->matmul(yc.tensor, *w_cpu, xc.tensor, acc);
        gpu->begin_step();
        gpu->matmul(yg.tensor, *w_gpu, xg.tensor, acc);
        gpu->end_step();
        expect_same_bits(download(*gpu, yg.tensor), download(*cpu, yc.tensor),
                         std::string(dtype_name(type)) + (acc ? " accumulate" : ""));
    }
    // matmul_glu over the same stack read as gate (first half) and up rows: 19 rows -> use 2 x 9.
    const Quantized g = quantized("gu", type, k, 18, 5);
    auto            gc = cpu->load_linear({&g.src, 1}), gg = gpu->load_linear({&g.src, 1});
    auto            xc = upload(*cpu, {k, T, 1, 1}, x), xg = upload(*gpu, {k, T, 1, 1}, x);
    auto            fc = upload(*cpu, {9, T, 1, 1}, std::vector<float>(9 * T)), fg = upload(*gpu, {9, T, 1, 1}, std::vector<float>(9 * T));
    cpu->matmul_glu(fc.tensor, *gc, xc.tensor, FfnActivation::silu);
    gpu->begin_step();
    gpu->matmul_glu(fg.tensor, *gg, xg.tensor, FfnActivation::silu);
    gpu->end_step();
    expect_same_bits(download(*gpu, fg.tensor), download(*cpu, fc.tensor), std::string(dtype_name(type)) + " glu");
}

INSTANTIATE_TEST_SUITE_P(Types, WebGpuFamilyMatmul,
                         ::testing::Values(DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_k,
                                           DType::q6_k),
                         [](const auto & info) { return std::string(dtype_name(info.param)); });

// linear / linear_glu (matvec_q8.wgsl: one token of Q4_0 / Q8_0, three of Q1_0 / Q2_0 / PQ2_0; the
// norm and the Q8_0 blocks in the prologue, the gate in the epilogue; TQ1_0 / TQ2_0: three tokens as
// per-token int8 through BitNet's kernels) against the CPU's rms_norm + matmul chain: with
// and without the norm, accumulating, rows that do not fill a workgroup, block counts that are not
// powers of two, and a long K (8320, no norm: fewer rows per workgroup where workgroup memory is 16 KiB).
// Q4_0 / Q8_0 both ways: their input made once per token (act_q8_0.wgsl + matvec_q8_acts.wgsl; by
// default the gate+up also makes the down projection's, QOUT) and in every workgroup's prologue
// (family_acts=0, matvec_q8.wgsl, as Q1_0 / Q2_0 / PQ2_0 always); and for all the Q8_0-block types
// the FFN's gate+up then down in one step.
class WebGpuFamilyDecode : public ::testing::TestWithParam<DType> {};

// A second WebGPU backend with the prologue form of matvec_q8 (WebGpuTuning::family_acts=0).
Backend * prologue_gpu() { return test::tuned_webgpu("family_acts=0"); }

TEST_P(WebGpuFamilyDecode, LinearAndGluMatchTheCpuBitForBit) {
    SKIP_WITHOUT_GPU();
    const DType type   = GetParam();
    const bool  lowbit = dtype_is_lowbit(type);
    // (the fast CPU backend has no Q8_0-block path for Q1_0 / Q2_0: the scalar reference)
    auto        cpu    = lowbit ? make_cpu_reference_backend(2) : make_cpu_backend({2});
    const bool  q8_0_blocks = type == DType::q8_0 || type == DType::q4_0 || type == DType::q1_0 ||
                             type == DType::q2_0 || type == DType::pq2_0;
    Backend *   bes[3] = {cpu.get(), gpu, type == DType::q8_0 || type == DType::q4_0 ? prologue_gpu() : nullptr};
    // Q1_0 / Q2_0 / PQ2_0 (groups of 128 / 64 / 128) run any number of tokens through it: three.
    const int64_t T      = lowbit ? 3 : 1;
    // (TQ1_0 / TQ2_0: blocks of 256, per-token int8 inputs, BitNet's kernels)
    const bool    tq     = type == DType::tq1_0 || type == DType::tq2_0;
    // (Q4_K / Q6_K: matvec_q8k.wgsl; the linear weight stacks a second part of the other K-quant,
    // as Q4_K_M files do)
    const bool    kq     = type == DType::q4_k || type == DType::q6_k;
    const DType   type1  = type == DType::q4_k ? DType::q6_k : type == DType::q6_k ? DType::q4_k : type;
    for (const int64_t k : {tq || kq ? int64_t{256 * 5} : lowbit ? int64_t{128 * 9} : int64_t{32 * 37}, int64_t{3072},
                            tq || kq ? int64_t{256 * 33} : int64_t{32 * 260}}) {
        const int64_t   n = kq ? 45 + 6 : 45, n_ff = 21;
        const Quantized wq = quantized("w", type, k, 45, 11), gq = quantized("gu", type, k, 2 * n_ff, 12);
        const Quantized wq1 = quantized("w1", type1, k, 6, 16);
        const WeightSource w_parts[2] = {wq.src, wq1.src};
        const auto      x  = gaussian(static_cast<size_t>(k * T), 13, 2.0f);
        auto            nv = gaussian(static_cast<size_t>(k), 14);
        const auto      y0 = gaussian(static_cast<size_t>(n * T), 15);
        const WeightSource nsrc{"norm", DType::f32, {k, 1, 1, 1}, {reinterpret_cast<const uint8_t *>(nv.data()), nv.size() * 4}};
        std::vector<float> outs[3][5];
        for (int i = 0; i < 3; ++i) {
            if (bes[i] == nullptr) continue;
            Backend & be = *bes[i];
            auto      w = be.load_linear({w_parts, kq ? size_t{2} : size_t{1}}), gu = be.load_linear({&gq.src, 1});
            auto      norm = be.load_norm(nsrc);
            auto      xt = upload(be, {k, T, 1, 1}, x), h = upload(be, {k, T, 1, 1}, std::vector<float>(static_cast<size_t>(k * T)));
            int       o = 0;
            for (const bool with_norm : {false, true}) {
                if (with_norm && k > 8192) continue;  // (rms_norm's bound on adapters of 256 threads)
                for (const bool acc : {false, true}) {
                    if (!with_norm && acc) continue;
                    auto y = upload(be, {n, T, 1, 1}, y0);
                    be.begin_step();
                    be.linear(y.tensor, *w, {xt.tensor, with_norm ? norm.get() : nullptr, 1e-5f, {}, h.tensor}, acc);
                    be.end_step();
                    outs[i][o++] = download(be, y.tensor);
                }
                auto f = upload(be, {n_ff, T, 1, 1}, std::vector<float>(static_cast<size_t>(n_ff * T)));
                be.begin_step();
                be.linear_glu(f.tensor, *gu, {xt.tensor, with_norm ? norm.get() : nullptr, 1e-5f, {}, h.tensor},
                              with_norm ? FfnActivation::silu : FfnActivation::relu2);
                be.end_step();
                outs[i][o++] = download(be, f.tensor);
            }
        }
        // The FFN's chain in one step: gate+up then the down projection reading its output (with
        // family_acts=2 the gate+up writes the down's Q8_0 blocks, whole workgroups of 32 rows), its input
        // normed and not.
        if (q8_0_blocks && k <= 8192) {
            const int64_t   n_ff2 = lowbit ? 640 : 416;
            const Quantized gu2 = quantized("gu2", type, k, 2 * n_ff2, 17), down = quantized("down", type, n_ff2, n, 18);
            std::vector<float> chain[3][2];
            for (int i = 0; i < 3; ++i) {
                if (bes[i] == nullptr) continue;
                for (const bool with_norm : {true, false}) {
                    Backend & be = *bes[i];
                    auto      g = be.load_linear({&gu2.src, 1}), d = be.load_linear({&down.src, 1});
                    auto      norm = be.load_norm(nsrc);
                    auto      xt = upload(be, {k, T, 1, 1}, x), h = upload(be, {k, T, 1, 1}, std::vector<float>(static_cast<size_t>(k * T)));
                    auto      h2 = upload(be, {n_ff2, T, 1, 1}, std::vector<float>(static_cast<size_t>(n_ff2 * T)));
                    auto      f = upload(be, {n_ff2, T, 1, 1}, std::vector<float>(static_cast<size_t>(n_ff2 * T)));
                    auto      y = upload(be, {n, T, 1, 1}, y0);
                    be.begin_step();
                    be.linear_glu(f.tensor, *g, {xt.tensor, with_norm ? norm.get() : nullptr, 1e-5f, {}, h.tensor},
                                  FfnActivation::silu);
                    be.linear(y.tensor, *d, {f.tensor, nullptr, 1e-5f, {}, h2.tensor}, true);
                    be.end_step();
                    chain[i][with_norm ? 0 : 1] = download(be, y.tensor);
                }
            }
            for (int nn = 0; nn < 2; ++nn) {
                const std::string what = std::string(dtype_name(type)) + " K " + std::to_string(k) + " gate+up then down" +
                                         (nn == 0 ? " (norm)" : "");
                expect_same_bits(chain[1][nn], chain[0][nn], what);
                if (bes[2] != nullptr) expect_same_bits(chain[2][nn], chain[0][nn], what + " (family_acts=0)");
            }
        }
        const char * names[5] = {"linear", "glu relu2", "linear norm", "linear norm accumulate", "glu norm silu"};
        for (int o = 0; o < (k > 8192 ? 2 : 5); ++o) {
            expect_same_bits(outs[1][o], outs[0][o],
                             std::string(dtype_name(type)) + " K " + std::to_string(k) + " " + names[o]);
            if (bes[2] != nullptr) {
                expect_same_bits(outs[2][o], outs[0][o],
                                 std::string(dtype_name(type)) + " K " + std::to_string(k) + " " + names[o] +
                                     " (family_acts=0)");
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, WebGpuFamilyDecode,
                         ::testing::Values(DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k, DType::f16, DType::q1_0,
                                           DType::q2_0, DType::pq2_0, DType::tq1_0, DType::tq2_0),
                         [](const auto & info) { return std::string(dtype_name(info.param)); });

// An LM head of Q-type blocks (lm_head_q.wgsl reads them, not the f32 copy) against the CPU's
// dequantized rows and double sums: 77 rows (not a whole workgroup), two tokens, h rounded to f16
// or not; one token's argmax right after it (the head's own first stage); and the embedding rows of
// the same table (the f32 copy).
class WebGpuFamilyHead : public ::testing::TestWithParam<DType> {};

TEST_P(WebGpuFamilyHead, LogitsMatchTheCpuBitForBit) {
    SKIP_WITHOUT_GPU();
    const DType   type = GetParam();
    auto          cpu  = make_cpu_backend({2});
    const int64_t k = type == DType::q6_k ? 768 : 32 * 37, n = 77, T = 2;
    const Quantized q = quantized("head", type, k, n, 21);
    const auto      h = gaussian(static_cast<size_t>(k * T), 22, 3.0f);
    std::vector<float> outs[2][4];
    Backend *          bes[2] = {cpu.get(), gpu};
    for (int i = 0; i < 2; ++i) {
        Backend & be = *bes[i];
        auto      table = be.load_embedding(q.src);
        auto      ht    = upload(be, {k, T, 1, 1}, h);
        for (int round = 0; round < 2; ++round) {
            auto logits = upload(be, {n, T, 1, 1}, std::vector<float>(static_cast<size_t>(n * T)));
            be.begin_step();
            be.lm_head(logits.tensor, *table, ht.tensor, round == 1);
            be.end_step();
            outs[i][round] = download(be, logits.tensor);
        }
        {  // one token's logits and their argmax in one step (the head writes the argmax's first stage)
            auto        h1 = upload(be, {k, 1, 1, 1}, std::vector<float>(h.begin() + k, h.begin() + 2 * k));
            auto        l1 = upload(be, {n, 1, 1, 1}, std::vector<float>(static_cast<size_t>(n)));
            OwnedTensor id = alloc_tensor(be, DType::i32, {1, 1, 1, 1}, "id");
            be.begin_step();
            be.lm_head(l1.tensor, *table, h1.tensor, false);
            be.argmax(id.tensor, l1.tensor);
            be.end_step();
            int32_t best = -1;
            be.read(id.tensor, &best, 4);
            outs[i][3] = download(be, l1.tensor);
            outs[i][3].push_back(static_cast<float>(best));
        }
        const std::vector<int32_t> ids = {76, 0, 41};
        OwnedTensor                idt = alloc_tensor(be, DType::i32, {3, 1, 1, 1}, "ids");
        be.write(idt.tensor, ids.data(), ids.size() * 4);
        auto x = upload(be, {k, 3, 1, 1}, std::vector<float>(static_cast<size_t>(k * 3)));
        be.begin_step();
        be.embed(x.tensor, *table, idt.tensor);
        be.end_step();
        outs[i][2] = download(be, x.tensor);
    }
    const std::string what = std::string(dtype_name(type)) + " head";
    expect_same_bits(outs[1][0], outs[0][0], what);
    expect_same_bits(outs[1][1], outs[0][1], what + " f16 input");
    expect_same_bits(outs[1][2], outs[0][2], what + " embedding rows");
    expect_same_bits(outs[1][3], outs[0][3], what + " one token's logits and argmax (last)");
}

// Greedy decoding's head of one token (output_head with ids and a norm) against the CPU's exact head
// and argmax, on 4133 rows (a part-filled last workgroup), h rounded to f16 or not: random rows; the
// winner copied to a lower index (an exact tie: the lower index must win); the winner copied with
// one code changed by one (a near tie); 300 equal rows.
TEST_P(WebGpuFamilyHead, GreedyIdsMatchTheExactHead) {
    SKIP_WITHOUT_GPU();
    const DType   type = GetParam();
    auto          cpu  = make_cpu_backend({2});
    const int64_t k = type == DType::q6_k ? 768 : 32 * 37, nv = 4133;
    const Quantized base = quantized("head", type, k, nv, 31);
    const auto      x    = gaussian(static_cast<size_t>(k), 32, 2.0f);
    std::vector<float> nw = gaussian(static_cast<size_t>(k), 33, 0.2f);
    for (float & v : nw) v += 1.0f;
    const size_t rb = dtype_row_bytes(type, k);
    // The ids of both backends for a table of `rows` rows (bytes of `bytes`).
    auto greedy = [&](const std::vector<uint8_t> & bytes, int64_t rows, bool round_in) {
        const WeightSource src{"head", type, {k, rows, 1, 1}, bytes};
        const std::vector<uint8_t> nw_bytes(reinterpret_cast<const uint8_t *>(nw.data()),
                                            reinterpret_cast<const uint8_t *>(nw.data() + nw.size()));
        const WeightSource nsrc{"norm", DType::f32, {k, 1, 1, 1}, nw_bytes};
        std::array<int32_t, 2> ids{-1, -1};
        Backend *              bes[2] = {cpu.get(), gpu};
        for (int i = 0; i < 2; ++i) {
            Backend &   be    = *bes[i];
            auto        table = be.load_embedding(src);
            auto        norm  = be.load_norm(nsrc);
            auto        xt    = upload(be, {k, 1, 1, 1}, x);
            auto        ht    = upload(be, {k, 1, 1, 1}, std::vector<float>(static_cast<size_t>(k)));
            auto        lt    = upload(be, {rows, 1, 1, 1}, std::vector<float>(static_cast<size_t>(rows)));
            OwnedTensor id    = alloc_tensor(be, DType::i32, {1, 1, 1, 1}, "id");
            be.begin_step();
            be.output_head({lt.tensor, id.tensor, 0}, *table, {xt.tensor, norm.get(), 1e-5f, {}, ht.tensor}, round_in);
            be.end_step();
            be.read(id.tensor, &ids[static_cast<size_t>(i)], 4);
        }
        return ids;
    };
    for (const bool round_in : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(type)) + (round_in ? ", h rounded to f16" : ""));
        const auto random = greedy(base.bytes, nv, round_in);
        EXPECT_EQ(random[1], random[0]) << "random rows";
        ASSERT_GE(random[0], 1);
        const size_t win = static_cast<size_t>(random[0]), low = win / 2;
        std::vector<uint8_t> tie = base.bytes;
        std::memcpy(tie.data() + low * rb, base.bytes.data() + win * rb, rb);
        const auto exact_tie = greedy(tie, nv, round_in);
        EXPECT_EQ(exact_tie[0], static_cast<int32_t>(low)) << "the CPU: the lower index of two equal rows";
        EXPECT_EQ(exact_tie[1], exact_tie[0]) << "an exact tie";
        tie[low * rb + 2] ^= 1;  // one code (Q8_0, Q4_0's low nibble, Q6_K's ql) changed by one
        const auto near_tie = greedy(tie, nv, round_in);
        EXPECT_EQ(near_tie[1], near_tie[0]) << "a near tie";
        // 64 rows that each differ from the winner by one code (+-1, at different places): all
        // within the int8 bound of each other, so every one is recomputed exactly.
        std::vector<uint8_t> many = base.bytes;
        for (size_t r = 0; r < 64; ++r) {
            const size_t row = (r * 61 + 7) % static_cast<size_t>(nv);
            std::memcpy(many.data() + row * rb, base.bytes.data() + win * rb, rb);
            many[row * rb + 2 + (r % 16)] ^= static_cast<uint8_t>(r % 2 ? 1 : 2);
        }
        const auto near_ties = greedy(many, nv, round_in);
        EXPECT_EQ(near_ties[1], near_ties[0]) << "64 near ties";
        std::vector<uint8_t> equal(rb * 300);
        for (size_t r = 0; r < 300; ++r) std::memcpy(equal.data() + r * rb, base.bytes.data() + win * rb, rb);
        const auto all_equal = greedy(equal, 300, round_in);
        EXPECT_EQ(all_equal[0], 0) << "the CPU: the lowest index of equal rows";
        EXPECT_EQ(all_equal[1], all_equal[0]) << "300 equal rows";
    }
}

// The int8 copy of a Q-block head's f32 rows (head_i8_pack.wgsl TABLE_F32; the tests' backend takes
// it for every table, head_i8_min_bytes 0): each code within half a step of dequantize_row's value
// over the row's scale, each row's bound coefficient at least the one recomputed in double; then
// greedy decoding's values f (left in the logits) and bounds B against the CPU's exact logits:
// |f - exact| <= B on every row, h rounded to f16 or not, and some f differs from its exact logit
// (else the int8 head did not run). 293 rows, K 768 (Q6_K) or 1184.
TEST_P(WebGpuFamilyHead, Int8CopyBoundsCoverTheExactLogits) {
    SKIP_WITHOUT_GPU();
    auto * web = dynamic_cast<WebGpuBackend *>(gpu);
    ASSERT_NE(web, nullptr);
    const DType     type = GetParam();
    auto            cpu  = make_cpu_backend({2});
    const int64_t   k = type == DType::q6_k ? 768 : 32 * 37, nv = 293;
    const Quantized q = quantized("head", type, k, nv, 41);
    std::vector<float> e(static_cast<size_t>(k * nv));
    const size_t       rb = dtype_row_bytes(type, k);
    for (int64_t r = 0; r < nv; ++r) dequantize_row(type, q.bytes.data() + static_cast<size_t>(r) * rb, e.data() + r * k, k);
    {
        auto       table = web->load_embedding(q.src);
        const auto copy  = web->read_head_int8_copy(*table);
        ASSERT_EQ(copy.codes.size(), e.size()) << "the int8 copy of a " << dtype_name(type) << " head was made";
        const double u = std::ldexp(1.0, -24);
        for (int64_t r = 0; r < nv; ++r) {
            SCOPED_TRACE("row " + std::to_string(r));
            const float s = copy.info[static_cast<size_t>(4 * r)], c = copy.info[static_cast<size_t>(4 * r + 1)];
            double      qq = 0, dd = 0, ee = 0;
            for (int64_t i = 0; i < k; ++i) {
                const double v  = e[static_cast<size_t>(r * k + i)];
                const int    qc = copy.codes[static_cast<size_t>(r * k + i)];
                ASSERT_LE(std::fabs(v - double(s) * qc), 0.5 * s * (1 + 1e-5)) << "element " << i;
                qq += double(qc) * qc;
                dd += (v - double(s) * qc) * (v - double(s) * qc);
                ee += v * v;
            }
            ASSERT_GE(double(c), double(s) * std::sqrt(qq) * double(k + 2) * u + std::sqrt(dd) + u * std::sqrt(ee));
            ASSERT_GE(double(copy.info[static_cast<size_t>(4 * r + 2)]), double(s) * std::sqrt(qq));
        }
    }
    const auto         x  = gaussian(static_cast<size_t>(k), 42, 2.0f);
    std::vector<float> nw = gaussian(static_cast<size_t>(k), 43, 0.2f);
    for (float & v : nw) v += 1.0f;
    const std::vector<uint8_t> nw_bytes(reinterpret_cast<const uint8_t *>(nw.data()),
                                        reinterpret_cast<const uint8_t *>(nw.data() + nw.size()));
    const WeightSource         nsrc{"norm", DType::f32, {k, 1, 1, 1}, nw_bytes};
    for (const bool round_in : {false, true}) {
        SCOPED_TRACE(round_in ? "h rounded to f16" : "h in f32");
        std::vector<float> logits[2];
        int32_t            id = -1;
        Backend *          bes[2] = {cpu.get(), gpu};
        for (int i = 0; i < 2; ++i) {
            Backend &   be    = *bes[i];
            auto        table = be.load_embedding(q.src);
            auto        norm  = be.load_norm(nsrc);
            auto        xt    = upload(be, {k, 1, 1, 1}, x);
            auto        ht    = upload(be, {k, 1, 1, 1}, std::vector<float>(static_cast<size_t>(k)));
            auto        lt    = upload(be, {nv, 1, 1, 1}, std::vector<float>(static_cast<size_t>(nv)));
            OwnedTensor idt   = alloc_tensor(be, DType::i32, {1, 1, 1, 1}, "id");
            be.begin_step();  // (the CPU: exact logits; the GPU with ids: the int8 values and bounds)
            be.output_head({lt.tensor, i == 0 ? Tensor{} : idt.tensor, 0}, *table,
                           {xt.tensor, norm.get(), 1e-5f, {}, ht.tensor}, round_in);
            be.end_step();
            logits[i] = download(be, lt.tensor);
            if (i == 1) be.read(idt.tensor, &id, 4);
        }
        const std::vector<float> bound = web->read_greedy_head_bounds(nv);
        ASSERT_EQ(bound.size(), static_cast<size_t>(nv));
        int64_t differ = 0, best = 0;
        for (int64_t r = 0; r < nv; ++r) {
            const double f = logits[1][static_cast<size_t>(r)], exact = logits[0][static_cast<size_t>(r)];
            ASSERT_LE(std::fabs(f - exact), double(bound[static_cast<size_t>(r)])) << "row " << r;
            differ += f != exact;
            if (logits[0][static_cast<size_t>(r)] > logits[0][static_cast<size_t>(best)]) best = r;
        }
        EXPECT_GT(differ, nv / 2) << "the int8 head's values (approximate) are left in the logits";
        EXPECT_EQ(id, best);
    }
}

// A top-k sampler's head over a Q-block table (the int8 copy, then argmax_exact.wgsl TOP_K on the f32
// rows): every row is the CPU's exact logit bit for bit or -inf, every row at least the k-th largest
// is exact, and most rows of a random table are -inf (else the fast path did not run).
TEST_P(WebGpuFamilyHead, TopKHeadKeepsEveryRowThatCanBeInTheTopK) {
    SKIP_WITHOUT_GPU();
    const DType     type = GetParam();
    auto            cpu  = make_cpu_backend({2});
    const int64_t   k = type == DType::q6_k ? 768 : 32 * 37, nv = 4133;
    const Quantized q  = quantized("head", type, k, nv, 51);
    const auto      x  = gaussian(static_cast<size_t>(k), 52, 2.0f);
    std::vector<float> nw = gaussian(static_cast<size_t>(k), 53, 0.2f);
    for (float & v : nw) v += 1.0f;
    const std::vector<uint8_t> nw_bytes(reinterpret_cast<const uint8_t *>(nw.data()),
                                        reinterpret_cast<const uint8_t *>(nw.data() + nw.size()));
    const WeightSource         nsrc{"norm", DType::f32, {k, 1, 1, 1}, nw_bytes};
    for (const bool round_in : {false, true}) {
        std::vector<float> exact;
        {
            auto table = cpu->load_embedding(q.src);
            auto norm  = cpu->load_norm(nsrc);
            auto xt    = upload(*cpu, {k, 1, 1, 1}, x);
            auto ht    = upload(*cpu, {k, 1, 1, 1}, std::vector<float>(static_cast<size_t>(k)));
            auto lt    = upload(*cpu, {nv, 1, 1, 1}, std::vector<float>(static_cast<size_t>(nv)));
            cpu->begin_step();
            cpu->output_head({lt.tensor, {}, 0}, *table, {xt.tensor, norm.get(), 1e-5f, {}, ht.tensor}, round_in);
            cpu->end_step();
            exact = download(*cpu, lt.tensor);
        }
        std::vector<float> sorted = exact;
        std::sort(sorted.begin(), sorted.end(), std::greater<float>());
        auto table = gpu->load_embedding(q.src);
        auto norm  = gpu->load_norm(nsrc);
        auto xt    = upload(*gpu, {k, 1, 1, 1}, x);
        auto ht    = upload(*gpu, {k, 1, 1, 1}, std::vector<float>(static_cast<size_t>(k)));
        auto lt    = upload(*gpu, {nv, 1, 1, 1}, std::vector<float>(static_cast<size_t>(nv)));
        for (const int64_t top_k : {1, 3, 8}) {
            SCOPED_TRACE(std::string(round_in ? "h rounded, " : "") + "top " + std::to_string(top_k));
            gpu->begin_step();
            gpu->output_head({lt.tensor, {}, top_k}, *table, {xt.tensor, norm.get(), 1e-5f, {}, ht.tensor}, round_in);
            gpu->end_step();
            const std::vector<float> got = download(*gpu, lt.tensor);
            const float              kth = sorted[static_cast<size_t>(top_k - 1)];
            int64_t                  n_inf = 0;
            for (int64_t i = 0; i < nv; ++i) {
                const float g = got[static_cast<size_t>(i)], ex = exact[static_cast<size_t>(i)];
                if (g == -std::numeric_limits<float>::infinity()) {
                    ++n_inf;
                    ASSERT_LT(ex, kth) << "row " << i << " can be in the top " << top_k << " but came back -inf";
                } else {
                    ASSERT_EQ(std::bit_cast<uint32_t>(g), std::bit_cast<uint32_t>(ex)) << "row " << i;
                }
            }
            EXPECT_GT(n_inf, nv / 2) << "the top-k head recomputed most rows: did its fast path run?";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, WebGpuFamilyHead, ::testing::Values(DType::q8_0, DType::q4_0, DType::q6_k),
                         [](const auto & info) { return std::string(dtype_name(info.param)); });

TEST(WebGpuFamily, RopeKvAppendMatchesTheCpuBitForBit) {
    SKIP_WITHOUT_GPU();
    auto cpu = make_cpu_backend({2});
    for (const bool qk_norm : {false, true}) {
        for (const DType cache : {DType::f32, DType::f16}) {
            const RopeMode mode = qk_norm ? RopeMode::neox : RopeMode::norm;  // (NeoX with QK-norm, as Qwen3)
            const int64_t hd = 64, n_head = 6, n_head_kv = 2, T = 5, pos0 = 3, n_ctx = 16, n_rot = 48;
            const int64_t n_q = n_head * hd, n_kv = n_head_kv * hd, rows = n_q + 2 * n_kv;
            const auto    cols = gaussian(static_cast<size_t>(rows * T), 7, 3.0f);
            const auto    qn = gaussian(static_cast<size_t>(hd), 8), kn = gaussian(static_cast<size_t>(hd), 9);
            std::vector<float> factors(static_cast<size_t>(n_rot / 2));
            for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.37f * static_cast<float>(i);
            std::vector<float> outs[2][3];
            Backend *          bes[2] = {cpu.get(), gpu};
            for (int i = 0; i < 2; ++i) {
                Backend & be = *bes[i];
                auto       wq = be.load_norm(f32_source("q_norm", qn)), wk = be.load_norm(f32_source("k_norm", kn));
                auto       wf = be.load_norm(f32_source("rope_freqs", factors));
                auto       x  = upload(be, {rows, T, 1, 1}, cols);
                auto       q  = upload(be, {n_q, T, 1, 1}, std::vector<float>(static_cast<size_t>(n_q * T)));
                OwnedTensor kc = alloc_tensor(be, cache, {n_kv, n_ctx, 1, 1}, "k");
                OwnedTensor vc = alloc_tensor(be, cache, {n_kv, n_ctx, 1, 1}, "v");
                AttentionShape s;
                s.n_head = n_head, s.n_head_kv = n_head_kv, s.head_dim = hd, s.n_rot = n_rot;
                s.rope_freq_base = 500000.0f, s.rope_freq_scale = 0.25f, s.rope_mode = mode;
                s.rope_freqs = wf.get(), s.qk_norm_eps = 1e-6f;
                if (qk_norm) s.q_norm = wq.get(), s.k_norm = wk.get();
                be.begin_step();
                be.rope_kv_append(q.tensor, {kc.tensor, vc.tensor}, x.tensor, s, pos0);
                be.end_step();
                outs[i][0] = download(be, q.tensor);
                outs[i][1] = cache_rows_bits(be, kc.tensor, cache, n_kv, pos0, T);
                outs[i][2] = cache_rows_bits(be, vc.tensor, cache, n_kv, pos0, T);
            }
            const std::string what = std::string(qk_norm ? "qk-norm " : "") + std::string(dtype_name(cache));
            expect_same_bits(outs[1][0], outs[0][0], what + " q");
            expect_same_bits(outs[1][1], outs[0][1], what + " k cache");
            expect_same_bits(outs[1][2], outs[0][2], what + " v cache");
        }
    }
}

// One token's normed [q; k; v] projection (Q4_0 / Q8_0, K = 1184: 37 blocks) then rope_kv_append, in
// one step, as the families run them: the matvec makes its normed input's Q8_0 blocks in its
// prologue (matvec_q8_acts.wgsl PROLOGUE, no act_q8_0.wgsl), and with every dim rotated and no QK-norm
// it does the RoPE and the cache stores in its epilogue (ROPE: 1 dispatch instead of 3): llama's
// "norm" pairs (head_dim 64, 6 heads over 2) and phi-3's NeoX pairs (head_dim 96, 5 heads over 1),
// f32 and f16 caches, rope_freqs divisors and a frequency scale; a NeoX shape rotating 64 of 96 dims
// takes the separate rope_kv_family.wgsl (2 dispatches). q and both caches' rows bit for bit. Each
// with the defaults, with WebGpuTuning's family_qkv_rows (20 / 28 rows per workgroup: lanes that are
// not a power of two) and with compute_units=8 (the default rows rule: at most 16 workgroups, so 40
// rows of the 640 / 48 of the 672).
// One token's normed [q; k; v] projection (weight wq, K = x.size(), norm weight nv) then
// rope_kv_append at position 7 over a 16-position cache of type `cache`, in one step on `be`: q and
// the cache rows written at position 7 ({q, k rows, v rows}). qn / kn: Qwen3's QK-norm weights
// (empty: none). `dispatches` gets the step's dispatch count where the backend counts them (else -1).
std::array<std::vector<float>, 3> qkv_rope_step(Backend & be, const Quantized & wq, RopeMode mode, int64_t hd, int64_t n_rot,
                                                int64_t n_head, int64_t n_head_kv, DType cache, const std::vector<float> & x,
                                                const std::vector<float> & nv, const std::vector<float> & factors,
                                                const std::vector<float> & qn, const std::vector<float> & kn,
                                                int64_t & dispatches) {
    const int64_t k = static_cast<int64_t>(x.size()), n_ctx = 16, pos0 = 7;
    const int64_t n_q = n_head * hd, n_kv = n_head_kv * hd, rows = n_q + 2 * n_kv;
    auto          w    = be.load_linear({&wq.src, 1});
    auto          norm = be.load_norm(f32_source("norm", nv)), wf = be.load_norm(f32_source("rope_freqs", factors));
    std::unique_ptr<Weight> wqn, wkn;
    if (!qn.empty()) wqn = be.load_norm(f32_source("q_norm", qn)), wkn = be.load_norm(f32_source("k_norm", kn));
    auto        xt = upload(be, {k, 1, 1, 1}, x), h = upload(be, {k, 1, 1, 1}, std::vector<float>(static_cast<size_t>(k)));
    auto        qkv = upload(be, {rows, 1, 1, 1}, std::vector<float>(static_cast<size_t>(rows)));
    auto        q   = upload(be, {n_q, 1, 1, 1}, std::vector<float>(static_cast<size_t>(n_q)));
    OwnedTensor kc  = alloc_tensor(be, cache, {n_kv, n_ctx, 1, 1}, "k");
    OwnedTensor vc  = alloc_tensor(be, cache, {n_kv, n_ctx, 1, 1}, "v");
    AttentionShape s;
    s.n_head = n_head, s.n_head_kv = n_head_kv, s.head_dim = hd, s.n_rot = n_rot;
    s.rope_freq_base = 10000.0f, s.rope_freq_scale = 0.25f, s.rope_mode = mode, s.rope_freqs = wf.get();
    s.qk_norm_eps = 1e-6f;
    if (wqn) s.q_norm = wqn.get(), s.k_norm = wkn.get();
    be.take_dispatch_count();
    be.begin_step();
    be.linear(qkv.tensor, *w, {xt.tensor, norm.get(), 1e-5f, {}, h.tensor}, /*accumulate=*/false);
    be.rope_kv_append(q.tensor, {kc.tensor, vc.tensor}, qkv.tensor, s, pos0);
    be.end_step();
    dispatches = be.counts_dispatches() ? be.take_dispatch_count() : -1;
    return {download(be, q.tensor), cache_rows_bits(be, kc.tensor, cache, n_kv, pos0, 1),
            cache_rows_bits(be, vc.tensor, cache, n_kv, pos0, 1)};
}

TEST(WebGpuFamily, QkvMatvecWithRopeMatchesTheCpuBitForBit) {
    SKIP_WITHOUT_GPU();
    auto cpu = make_cpu_backend({2});
    struct Shape {
        RopeMode mode;
        int64_t  hd, n_rot, n_head, n_head_kv;
        int64_t  dispatches;  // on the GPU: the matvec (+ rope_kv_family)
        int      alt_rows;    // family_qkv_rows: a multiple of 4 that divides n_q + 2 n_kv
    };
    const Shape shapes[] = {{RopeMode::norm, 64, 64, 6, 2, 1, 20}, {RopeMode::neox, 96, 96, 5, 1, 1, 28},
                            {RopeMode::neox, 96, 64, 5, 1, 2, 28}};
    for (const DType type : {DType::q4_0, DType::q8_0}) {
        for (const Shape & sh : shapes) {
            const std::string rows_key = "family_qkv_rows=" + std::to_string(sh.alt_rows);
            for (const std::string & tune : {std::string(), rows_key, std::string("compute_units=8")}) {
                Backend * const tuned = tune.empty() ? gpu : test::tuned_webgpu(tune);
                for (const DType cache : {DType::f32, DType::f16}) {
                    const int64_t   k = 32 * 37, rows = (sh.n_head + 2 * sh.n_head_kv) * sh.hd;
                    const Quantized wq = quantized("wqkv", type, k, rows, 31);
                    const auto      x = gaussian(static_cast<size_t>(k), 32, 2.0f), nv = gaussian(static_cast<size_t>(k), 33);
                    std::vector<float> factors(static_cast<size_t>(sh.n_rot / 2));
                    for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.29f * static_cast<float>(i);
                    std::array<std::vector<float>, 3> outs[2];
                    Backend *                         bes[2] = {cpu.get(), tuned};
                    for (int i = 0; i < 2; ++i) {
                        int64_t dispatches = -1;
                        outs[i] = qkv_rope_step(*bes[i], wq, sh.mode, sh.hd, sh.n_rot, sh.n_head, sh.n_head_kv, cache, x, nv,
                                                factors, {}, {}, dispatches);
                        if (i == 1 && dispatches >= 0) {
                            EXPECT_EQ(dispatches, sh.dispatches) << dtype_name(type) << " head_dim " << sh.hd << " n_rot " << sh.n_rot;
                        }
                    }
                    const std::string what = std::string(dtype_name(type)) + (sh.mode == RopeMode::norm ? " norm" : " neox") +
                                             " head_dim " + std::to_string(sh.hd) + " n_rot " + std::to_string(sh.n_rot) +
                                             " " + std::string(dtype_name(cache)) + " [" + tune + "]";
                    expect_same_bits(outs[1][0], outs[0][0], what + " q");
                    expect_same_bits(outs[1][1], outs[0][1], what + " k cache");
                    expect_same_bits(outs[1][2], outs[0][2], what + " v cache");
                }
            }
        }
    }
}

// A WebGPU backend whose Q1_0 / Q2_0 / PQ2_0 [q; k; v] matvec is not fused with the RoPE
// (WebGpuTuning::family_q1_rope=0: matvec_q8.wgsl, then rope_kv_family.wgsl).
Backend * unfused_q1_gpu() { return test::tuned_webgpu("family_q1_rope=0"); }

// One token's normed [q; k; v] projection of a Q1_0 / Q2_0 / PQ2_0 weight then rope_kv_append, in
// one step, as qwen3 runs them: by default one dispatch (matvec_q1_qkv.wgsl: the QK-norm, RoPE and
// cache stores in the matvec's epilogue, a workgroup per head), with family_q1_rope=0 two
// (matvec_q8.wgsl + rope_kv_family.wgsl). K = 1152 (9 groups of 128, 36 blocks); Qwen3's NeoX pairs
// with QK-norm (head_dim 128, 3 heads over 1), llama's "norm" pairs without (head_dim 64, 5 over 2),
// NeoX rotating 32 of 96 dims with QK-norm; f32 and f16 caches, rope_freqs divisors, a frequency
// scale, position 7. q and both caches' rows bit for bit against the CPU, both ways.
TEST(WebGpuFamily, QkvMatvecQ1WithQkNormAndRopeMatchesTheCpuBitForBit) {
    SKIP_WITHOUT_GPU();
    auto cpu = make_cpu_backend({2});
    struct Shape {
        RopeMode mode;
        int64_t  hd, n_rot, n_head, n_head_kv;
        bool     qk_norm;
    };
    const Shape shapes[] = {{RopeMode::neox, 128, 128, 3, 1, true},
                            {RopeMode::norm, 64, 64, 5, 2, false},
                            {RopeMode::neox, 96, 32, 3, 1, true}};
    for (const DType type : {DType::q1_0, DType::q2_0, DType::pq2_0}) {
        for (const Shape & sh : shapes) {
            for (const DType cache : {DType::f32, DType::f16}) {
                const int64_t   k = 128 * 9, rows = (sh.n_head + 2 * sh.n_head_kv) * sh.hd;
                const Quantized wq = quantized("wqkv", type, k, rows, 41);
                const auto x = gaussian(static_cast<size_t>(k), 42, 2.0f), nv = gaussian(static_cast<size_t>(k), 43);
                const auto qn = gaussian(static_cast<size_t>(sh.hd), 44), kn = gaussian(static_cast<size_t>(sh.hd), 45);
                std::vector<float> factors(static_cast<size_t>(sh.n_rot / 2));
                for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.29f * static_cast<float>(i);
                std::array<std::vector<float>, 3> outs[3];
                Backend *                         bes[3] = {cpu.get(), gpu, unfused_q1_gpu()};
                for (int i = 0; i < 3; ++i) {
                    if (bes[i] == nullptr) continue;
                    int64_t dispatches = -1;
                    outs[i] = qkv_rope_step(*bes[i], wq, sh.mode, sh.hd, sh.n_rot, sh.n_head, sh.n_head_kv, cache, x, nv, factors,
                                            sh.qk_norm ? qn : std::vector<float>(), kn, dispatches);
                    if (i > 0 && dispatches >= 0) {
                        EXPECT_EQ(dispatches, i == 1 ? 1 : 2) << dtype_name(type) << " head_dim " << sh.hd;
                    }
                }
                for (int i = 1; i < 3; ++i) {
                    if (bes[i] == nullptr) continue;
                    const std::string what = std::string(dtype_name(type)) + (sh.mode == RopeMode::norm ? " norm" : " neox") +
                                             " head_dim " + std::to_string(sh.hd) + " n_rot " + std::to_string(sh.n_rot) +
                                             " " + std::string(dtype_name(cache)) + (i == 1 ? " fused" : " unfused");
                    expect_same_bits(outs[i][0], outs[0][0], what + " q");
                    expect_same_bits(outs[i][1], outs[0][1], what + " k cache");
                    expect_same_bits(outs[i][2], outs[0][2], what + " v cache");
                }
            }
        }
    }
}

// One query's attention, then a Q4_0 / Q8_0 o-projection reading its output, in one step, twice:
// the first o-projection quantizes the output itself (act_q8_0.wgsl), after which attention.wgsl
// writes the output's Q8_0 blocks (Q8_OUT) and the second reads those. head_dim 32 (a block per
// head) and 96 (phi-3's: three), 5 heads over 1 KV head, an f16 cache, 9 positions; both bit for bit.
TEST(WebGpuFamily, AttentionOutputBlocksFeedTheOProjectionBitForBit) {
    SKIP_WITHOUT_GPU();
    auto cpu = make_cpu_backend({2});
    for (const DType type : {DType::q4_0, DType::q8_0}) {
        for (const int64_t hd : {32, 96}) {
            const int64_t n_head = 5, n_q = n_head * hd, n_ctx = 16, pos0 = 8, n = 45;
            const Quantized wo = quantized("wo", type, n_q, n, 21);
            std::vector<uint16_t> kv16(static_cast<size_t>(hd * n_ctx));
            const auto            kv = gaussian(kv16.size(), 22, 2.0f);
            for (size_t i = 0; i < kv.size(); ++i) kv16[i] = fp32_to_fp16(kv[i]);
            const auto y0 = gaussian(static_cast<size_t>(n), 23);
            std::vector<float> outs[2][2];
            Backend *          bes[2] = {cpu.get(), gpu};
            for (int i = 0; i < 2; ++i) {
                Backend &   be = *bes[i];
                auto        w  = be.load_linear({&wo.src, 1});
                OwnedTensor kc = alloc_tensor(be, DType::f16, {hd, n_ctx, 1, 1}, "k");
                OwnedTensor vc = alloc_tensor(be, DType::f16, {hd, n_ctx, 1, 1}, "v");
                be.write(kc.tensor, kv16.data(), kv16.size() * 2);
                be.write(vc.tensor, kv16.data(), kv16.size() * 2);  // (V = K: the products differ anyway)
                auto attn = upload(be, {n_q, 1, 1, 1}, std::vector<float>(static_cast<size_t>(n_q)));
                AttentionShape s;
                s.n_head = n_head, s.n_head_kv = 1, s.head_dim = hd, s.n_rot = hd;
                s.scale = 1.0f / std::sqrt(static_cast<float>(hd));
                for (int rep = 0; rep < 2; ++rep) {
                    auto q = upload(be, {n_q, 1, 1, 1}, gaussian(static_cast<size_t>(n_q), 24 + rep, 1.5f));
                    auto y = upload(be, {n, 1, 1, 1}, y0);
                    be.begin_step();
                    be.attention(attn.tensor, q.tensor, {kc.tensor, vc.tensor}, s, pos0 - rep);
                    be.linear(y.tensor, *w, {attn.tensor, nullptr, 1e-5f, {}, {}}, /*accumulate=*/true);
                    be.end_step();
                    outs[i][rep] = download(be, y.tensor);
                }
            }
            for (int rep = 0; rep < 2; ++rep) {
                expect_same_bits(outs[1][rep], outs[0][rep],
                                 std::string(dtype_name(type)) + " head_dim " + std::to_string(hd) + " step " +
                                     std::to_string(rep));
            }
        }
    }
}

// A tiny HF checkpoint converted with `weight` matrices, run on both backends: every prompt
// position's logits and 12 greedy steps, bit for bit.
std::string converted(const std::string & name, DType weight, DType head = DType::f32) {
    ConvertOptions o;
    o.input_dir   = test::data_path("hf_parity/" + name);
    o.output_path = (test::temp_dir("webgpu-family-" + name + "-" + std::string(dtype_name(weight)) + "-" +
                                    std::string(dtype_name(head))) /
                     "m.gguf")
                        .string();
    o.progress    = false;
    o.weight_type = weight;
    o.head_type   = head;
    convert_hf_checkpoint(o);
    return o.output_path;
}

void expect_model_bit_identical(Backend & gpu, const std::string & name, DType weight, DType cache) {
    const GgufFile file  = GgufFile::open(converted(name, weight));
    auto           cpu   = make_cpu_backend({2});
    auto           m_cpu = BitnetModel::load(file, *cpu);
    auto           m_gpu = BitnetModel::load(file, gpu);
    const int64_t  nv    = m_cpu->config().n_vocab;
    std::vector<int32_t> prompt;
    for (int i = 0; i < 37; ++i) prompt.push_back(static_cast<int32_t>((i * 97 + 5) % nv));
    SessionOptions so;
    so.n_ctx   = 64;
    so.n_batch = 16;  // three prompt batches
    so.type_k = so.type_v = cache;
    Session s_cpu(*m_cpu, so), s_gpu(*m_gpu, so);
    std::vector<float> l_cpu(prompt.size() * static_cast<size_t>(nv)), l_gpu(l_cpu.size());
    s_cpu.eval(prompt, l_cpu);
    s_gpu.eval(prompt, l_gpu);
    const std::string what = name + " " + std::string(dtype_name(weight)) + " " + std::string(dtype_name(cache));
    expect_same_bits(l_gpu, l_cpu, what + " prompt logits");
    for (int step = 0; step < 12; ++step) {
        const auto    lc = s_cpu.logits();
        const int32_t id = static_cast<int32_t>(std::max_element(lc.begin(), lc.end()) - lc.begin());
        const int32_t next[1] = {id};
        s_cpu.eval(next);
        s_gpu.eval(next);
        expect_same_bits(std::vector<float>(s_gpu.logits().begin(), s_gpu.logits().end()),
                         std::vector<float>(s_cpu.logits().begin(), s_cpu.logits().end()),
                         what + " step " + std::to_string(step));
    }
}

TEST(WebGpuFamily, TinyLlamaAndQwen3AreBitIdenticalToTheCpu) {
    SKIP_WITHOUT_GPU();
    for (const char * name : {"llama_tied_rope3", "qwen3_tied"}) {
        expect_model_bit_identical(*gpu, name, DType::f32, DType::f32);
        expect_model_bit_identical(*gpu, name, DType::q8_0, DType::f16);
        expect_model_bit_identical(*gpu, name, DType::q4_0, DType::f16);
    }
}

// The tiny qwen3 checkpoint with Q1_0 projections (Bonsai's type; hidden 128, FFN 384: whole groups
// of 128): prompt batches through matvec_q8.wgsl, then one token at a time through the fused
// [q; k; v] kernel (matvec_q1_qkv.wgsl: the QK-norm, RoPE and cache stores), bit for bit.
TEST(WebGpuFamily, TinyQwen3Q1IsBitIdenticalToTheCpu) {
    SKIP_WITHOUT_GPU();
    expect_model_bit_identical(*gpu, "qwen3_tied", DType::q1_0, DType::f16);
    expect_model_bit_identical(*gpu, "qwen3_tied", DType::q1_0, DType::f32);
}

// Greedy decoding on the device (Session::decode_greedy: output_head with ids, the int8 copy of the
// tied Q8_0 / Q4_0 table's f32 rows and its exact tail, the argmax folded into the next embed) against
// the CPU's exact logits and argmax, 20 tokens (in batches of 8: two whole, one part) of the tiny
// llama and qwen3 checkpoints converted with a head of the matrices' type.
TEST(WebGpuFamily, TinyModelsDecodeGreedilyOnTheDeviceAsOnTheCpu) {
    SKIP_WITHOUT_GPU();
    for (const char * name : {"llama_tied_rope3", "qwen3_tied"}) {
        for (const DType weight : {DType::q8_0, DType::q4_0}) {
            SCOPED_TRACE(std::string(name) + " " + std::string(dtype_name(weight)));
            const GgufFile file  = GgufFile::open(converted(name, weight, weight));
            const auto *   head  = file.find_tensor("token_embd.weight");  // (tied: the head)
            ASSERT_NE(head, nullptr);
            ASSERT_EQ(head->type, weight) << "the head is a table of Q-type blocks";
            auto           cpu   = make_cpu_backend({2});
            auto           m_cpu = BitnetModel::load(file, *cpu);
            auto           m_gpu = BitnetModel::load(file, *gpu);
            SessionOptions so;
            so.n_ctx = 64;
            std::vector<int32_t> ids[2];
            BitnetModel *        models[2] = {m_cpu.get(), m_gpu.get()};
            for (int i = 0; i < 2; ++i) {
                Session                    s(*models[i], so);
                const std::vector<int32_t> prompt = {5, 9, 13, 2, 7, 30, 11};
                s.eval(prompt);
                const auto    l     = s.logits();
                const int32_t first = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
                s.decode_greedy(first, 20, [&](int32_t id) { ids[i].push_back(id); return true; }, 8);
            }
            ASSERT_EQ(ids[0].size(), 20u);
            EXPECT_EQ(ids[1], ids[0]);
        }
    }
}

// Two sequences through BatchEngine (rope_kv_append_paged, attention_paged over shared pages; the
// second joins while the first decodes, prompts in chunks) against each decoded alone in a CPU
// Session: bit for bit on a CPU adapter, within webgpu_batch_test.cpp's tolerance on a GPU.
void expect_batch_matches_cpu(Backend & gpu, const std::string & name, DType weight) {
    const GgufFile file  = GgufFile::open(converted(name, weight));
    auto           cpu   = make_cpu_backend({2});
    auto           m_cpu = BitnetModel::load(file, *cpu);
    auto           m_gpu = BitnetModel::load(file, gpu);
    const auto     nv    = static_cast<size_t>(m_cpu->config().n_vocab);
    struct Stream {
        std::vector<int32_t> prompt, next;
        size_t               chunk;
        int                  join;
    };
    const std::vector<Stream> streams = {{{5, 9, 13, 2, 7, 30, 11, 4, 8}, {3, 17, 6, 21, 9}, 4, 0},
                                         {{14, 1, 19}, {2, 25, 12, 8, 16, 5}, 3, 2}};
    BatchEngineOptions eo;
    eo.n_pages = 3, eo.page_size = 16, eo.n_chunk = 8, eo.max_seqs = 2;
    BatchEngine                                  eng(*m_gpu, eo);
    std::vector<std::optional<SequenceId>>       seq(2);
    std::vector<size_t>                          fed(2, 0), next_i(2, 0);
    std::vector<std::vector<std::vector<float>>> got(2);
    std::vector<std::vector<float>>              logits(2, std::vector<float>(nv));
    for (int step = 0; step < 40; ++step) {
        std::vector<BatchItem> items;
        std::vector<size_t>    who;
        for (size_t i = 0; i < 2; ++i) {
            const Stream & st = streams[i];
            if (step < st.join || next_i[i] == st.next.size()) continue;
            if (!seq[i]) seq[i] = eng.open(static_cast<int64_t>(st.prompt.size() + st.next.size()));
            ASSERT_TRUE(seq[i].has_value());
            if (fed[i] < st.prompt.size()) {
                const size_t k = std::min(st.chunk, st.prompt.size() - fed[i]);
                const bool   last = fed[i] + k == st.prompt.size();
                items.push_back({*seq[i], std::span(st.prompt).subspan(fed[i], k), last ? std::span<float>(logits[i]) : std::span<float>()});
                fed[i] += k;
                if (last) who.push_back(i);
            } else {
                items.push_back({*seq[i], std::span(st.next).subspan(next_i[i]++, 1), logits[i]});
                who.push_back(i);
            }
        }
        if (items.empty()) break;
        eng.step(items);
        for (size_t i : who) got[i].push_back(logits[i]);
    }
    const bool exact = test::is_cpu_adapter(gpu);
    for (size_t i = 0; i < 2; ++i) {
        SessionOptions so;
        so.n_ctx = 32;
        Session session(*m_cpu, so);
        session.eval(streams[i].prompt);
        std::vector<std::vector<float>> want{{session.logits().begin(), session.logits().end()}};
        for (int32_t id : streams[i].next) {
            session.eval({&id, 1});
            want.emplace_back(session.logits().begin(), session.logits().end());
        }
        ASSERT_EQ(got[i].size(), want.size()) << name << " stream " << i;
        for (size_t r = 0; r < want.size(); ++r) {
            const std::string what = name + " " + std::string(dtype_name(weight)) + " stream " + std::to_string(i) +
                                     " row " + std::to_string(r);
            if (exact) {
                expect_same_bits(got[i][r], want[r], what);
                continue;
            }
            double row_max = 1, d = 0;
            for (size_t v = 0; v < nv; ++v) {
                row_max = std::max(row_max, static_cast<double>(std::fabs(want[r][v])));
                d       = std::max(d, static_cast<double>(std::fabs(got[i][r][v] - want[r][v])));
            }
            EXPECT_LE(d / row_max, 1e-4) << what;
        }
    }
}

TEST(WebGpuFamily, BatchedSequencesMatchEachAloneOnTheCpu) {
    SKIP_WITHOUT_GPU();
    expect_batch_matches_cpu(*gpu, "llama_tied_rope3", DType::q4_0);
    expect_batch_matches_cpu(*gpu, "qwen3_tied", DType::q8_0);
}

}  // namespace
}  // namespace tern
