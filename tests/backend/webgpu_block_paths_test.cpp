// Issue 52: one query's attention on the GPU in the block order
// for every shape tern runs, against cpu::attention_row (block_order_oracle.h: the single-pass
// softmax up to 512 positions, the block order past them), bit for bit. Shapes: 2B4T
// (head_dim 128, G 4: attention_block_pv), llama-3.2-1b (64, G 4), qwen3-1.7b (128, G 2) and
// phi-3-mini (96, G 1) (the others: attention_split_scores + attention_paged_super in the block
// order + attention_split_combine's row join), f16 and f32 caches; lengths crossing every block,
// chunk and superblock boundary (513-517, 544, 575-577, 1023-1026, 1536-1538, 2047-2049, 3000,
// 4096-4098), a huge score late in the row; G 5 (no supported family has G > 4, but GGUFs may). Skipped without a WebGPU adapter.
#include "backend/webgpu/webgpu_backend.h"
#include "attention_run.h"
#include "block_order_oracle.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

namespace tern {
namespace {

struct Shape {
    int64_t     n_head, n_head_kv, hd;
    const char *name;
};

struct Span {
    int64_t pos0, T;
};

// Random K, V (cache bytes, [pos0 + T][n_kv]) and q ([T + 1][n_q]: column 0 a sentinel's).
struct Inputs {
    std::vector<uint8_t> k, v;
    std::vector<float>   q;
};

Inputs make_inputs(const Shape & sh, DType cache, int64_t n_ctx, int64_t T, int64_t huge_at, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t      n_kv = sh.n_head_kv * sh.hd;
    std::vector<float> k(size_t(n_kv * n_ctx)), v(k.size());
    for (auto & x : k) x = nd(rng);
    for (auto & x : v) x = nd(rng);
    if (huge_at >= 0) {
        for (int64_t i = 0; i < n_kv; ++i) k[size_t(huge_at * n_kv + i)] *= 12.0f;
    }
    Inputs in{std::vector<uint8_t>(size_t(dtype_row_bytes(cache, n_kv * n_ctx))),
              std::vector<uint8_t>(size_t(dtype_row_bytes(cache, n_kv * n_ctx))), {}};
    quantize_row(cache, k.data(), in.k.data(), n_kv * n_ctx);
    quantize_row(cache, v.data(), in.v.data(), n_kv * n_ctx);
    in.q.resize(size_t(sh.n_head * sh.hd * (T + 1)));
    for (auto & x : in.q) x = 2.0f * nd(rng);
    return in;
}

void expect_bits(const std::vector<float> & got, const std::vector<float> & want, const std::string & what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    size_t n = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::memcmp(&got[i], &want[i], 4) != 0 && n++ == 0) first = i;
    }
    EXPECT_EQ(n, 0u) << what << ": " << n << " of " << got.size() << " differ, the first at " << first << " ("
                     << got[first] << " vs " << want[first] << ")";
}

void check_shape(const Shape & sh, DType cache, const std::vector<Span> & spans, int64_t huge_back) {
    Backend * gpu = test::shared_webgpu().backend.get();
    for (const Span & sp : spans) {
        const int64_t n_ctx = sp.pos0 + sp.T;
        SCOPED_TRACE(std::string(sh.name) + (cache == DType::f16 ? " f16" : " f32") + ", rows " +
                     std::to_string(sp.pos0 + 1) + " .. " + std::to_string(n_ctx));
        const Inputs in = make_inputs(sh, cache, n_ctx, sp.T, huge_back > 0 ? n_ctx - huge_back : -1, 29);
        const test::AttentionRun r{sh.n_head, sh.n_head_kv, sh.hd, sp.pos0, sp.T, cache};
        // (one token per call: the decode path; several take the prompt kernels)
        const auto got  = test::run_attention(*gpu, r, in.k, in.v, in.q, 1);
        const auto want = test::attention_columns(in.k, in.v, cache, in.q.data() + sh.n_head * sh.hd, sh.n_head,
                                                  sh.n_head_kv, sh.hd, 1.0f / std::sqrt(float(sh.hd)), sp.pos0, sp.T);
        expect_bits(got, want, "the GPU vs the block order");
    }
}

TEST(WebGpuBlockOrderOneQuery, EveryFamilyShapeGivesTheBlockOrdersBits) {
    TERN_REQUIRE_WEBGPU();
    // Every boundary on the 2B4T shape; a few long rows on the others.
    check_shape({20, 5, 128, "2B4T hd 128 G 4"}, DType::f16,
                {{508, 9}, {543, 1}, {574, 3}, {1022, 4}, {1535, 3}, {2046, 3}, {2999, 1}, {4095, 3}}, 0);
    const std::vector<Span> few = {{511, 3}, {1023, 2}, {4096, 1}};
    check_shape({4, 2, 128, "qwen3 hd 128 G 2"}, DType::f16, few, 0);
    check_shape({8, 2, 64, "llama hd 64 G 4"}, DType::f16, few, 0);
    check_shape({3, 3, 96, "phi3 hd 96 G 1"}, DType::f16, few, 0);
    check_shape({8, 2, 64, "hd 64 G 4"}, DType::f32, {{511, 3}, {2046, 3}}, 0);
    check_shape({3, 3, 96, "hd 96 G 1"}, DType::f32, {{1023, 2}}, 0);
    check_shape({10, 2, 64, "hd 64 G 5"}, DType::f16, {{1023, 2}}, 0);  // (G > 4: 5 workgroups of 1 head per KV head)
    // A huge score late in the row (its last superblock) and in an early superblock: the joins'
    // weights decide the output.
    for (const int64_t back : {40, 1200}) {
        check_shape({8, 2, 128, "hd 128 G 4"}, DType::f16, {{2046, 2}}, back);
        check_shape({8, 2, 64, "hd 64 G 4"}, DType::f16, {{2046, 2}}, back);
    }
}

}  // namespace
}  // namespace tern
