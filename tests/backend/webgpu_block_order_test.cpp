// Issue 52: one query's long attention in the block order (every one-query row past 512 positions,
// attention_block_pv.wgsl + attention_block_combine.wgsl) against cpu::attention_row, bit for bit:
// blocks of 32 positions, chunks of 2 blocks, superblocks of 8 chunks, the row; and against the CPU
// backend (its kernels run the same order), bit for bit as well.
// Lengths cross every block (32), chunk (64) and superblock (512) boundary: n = 513 .. 516, 575 .. 577,
// 1023 .. 1025, 2047, 2048, 3000, 4096 (the 2B4T shape: 20 query heads over 5 KV heads), 4097 (a last
// superblock of one position); head_dim 128, 64 and 96; G = 4, 3 and 1, each token alone (several
// tokens per call take the prompt kernels), and a huge score in one block (a K row scaled by 12), so
// that the blocks', chunks' and superblocks' rescaling by exp_fixed(m - M) decides the output.
// Skipped without a WebGPU adapter.
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/webgpu/webgpu_backend.h"
#include "core/dtype.h"
#include "quant/block_formats.h"
#include "attention_run.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tern {
namespace {

struct Case {
    int64_t n_head, n_head_kv, pos0, T;
    int64_t huge_at = -1;   // a position whose K row is scaled by 12 (-1: none)
    int64_t hd      = 128;  // head_dim (llama-3.2-1b 64, phi-3-mini 96)
};


struct Inputs {
    std::vector<uint8_t> k, v;  // [n_kv, n_ctx] f16 cache bytes
    std::vector<float>   q;     // [n_q, T + 1]: the queries are columns 1 .. T
};

Inputs make_inputs(const Case & c, uint32_t seed) {
    std::mt19937  rng(seed);
    auto          normal = [&](float sd) { return std::normal_distribution<float>(0.0f, sd)(rng); };
    const int64_t n_kv = c.n_head_kv * c.hd, n_ctx = c.pos0 + c.T;
    std::vector<float> k(static_cast<size_t>(n_kv * n_ctx)), v(k.size());
    for (auto & x : k) x = normal(1.0f);
    for (auto & x : v) x = normal(1.0f);
    if (c.huge_at >= 0) {
        for (int64_t i = 0; i < n_kv; ++i) k[static_cast<size_t>(c.huge_at * n_kv + i)] *= 12.0f;
    }
    Inputs in{std::vector<uint8_t>(k.size() * 2), std::vector<uint8_t>(v.size() * 2), {}};
    quantize_row(DType::f16, k.data(), in.k.data(), static_cast<int64_t>(k.size()));
    quantize_row(DType::f16, v.data(), in.v.data(), static_cast<int64_t>(v.size()));
    in.q.resize(static_cast<size_t>(c.n_head * c.hd * (c.T + 1)));
    for (auto & x : in.q) x = normal(2.0f);  // scores spread over a few units: peaked and flat rows
    return in;
}

// The attention output of the T queries (pos0 .. pos0 + T - 1), computed `per_call` tokens at a time.
std::vector<float> run(Backend & b, const Case & c, const Inputs & in, int64_t per_call) {
    return test::run_attention(b, {c.n_head, c.n_head_kv, c.hd, c.pos0, c.T, DType::f16}, in.k, in.v, in.q, per_call);
}

// The block order (issue 52): cpu::attention_row, the reference's row, for each query head of the T
// tokens (every row here is longer than 512 positions: blocks of 32, chunks of 2 blocks, superblocks
// of 8 chunks, the row, one normalisation).
std::vector<float> block_order(const Case & c, const Inputs & in) {
    const int64_t n_q = c.n_head * c.hd, n_kv = c.n_head_kv * c.hd, n_ctx = c.pos0 + c.T;
    std::vector<float> k(static_cast<size_t>(n_kv * n_ctx)), v(k.size()), out(static_cast<size_t>(n_q * c.T));
    dequantize_row(DType::f16, in.k.data(), k.data(), static_cast<int64_t>(k.size()));
    dequantize_row(DType::f16, in.v.data(), v.data(), static_cast<int64_t>(v.size()));
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
    for (int64_t t = 0; t < c.T; ++t) {
        for (int64_t h = 0; h < c.n_head; ++h) {
            const int64_t kvh = h / (c.n_head / c.n_head_kv);
            cpu::attention_row(in.q.data() + (t + 1) * n_q + h * c.hd, k.data() + kvh * c.hd, n_kv, v.data() + kvh * c.hd,
                               n_kv, c.pos0 + t + 1, c.hd, scale, true, true, out.data() + t * n_q + h * c.hd);
        }
    }
    return out;
}

// How many of got differ from want in their bits, and the largest |got - want| / (1 + |want|).
struct Diff {
    size_t n = 0, first = 0;
    double worst = 0;
};

Diff compare(const std::vector<float> & got, const std::vector<float> & want) {
    Diff r;
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::memcmp(&got[i], &want[i], 4) != 0 && r.n++ == 0) r.first = i;
        r.worst = std::max(r.worst, std::fabs(double(got[i]) - want[i]) / (1.0 + std::fabs(double(want[i]))));
    }
    return r;
}

TEST(WebGpuLongOneQueryBlockOrder, KernelsGiveAttentionRowsBits) {
    TERN_REQUIRE_WEBGPU();
    auto      cpu = make_cpu_backend({1});
    Backend * gpu = test::tuned_webgpu("attn_long_positions=1");
    for (const Case & c : {Case{8, 2, 512, 4}, Case{8, 2, 574, 3}, Case{8, 2, 1022, 3}, Case{6, 2, 2999, 1},
                           Case{2, 2, 1700, 2}, Case{20, 5, 4095, 2}, Case{4, 1, 2046, 2}, Case{8, 2, 2046, 2, 1500},
                           Case{8, 2, 4096, 1, 4096}, Case{8, 2, 1022, 3, -1, 64}, Case{2, 2, 1535, 2, 1000, 96}}) {
        SCOPED_TRACE("hd " + std::to_string(c.hd) + ", G " + std::to_string(c.n_head / c.n_head_kv) + ", pos0 " +
                     std::to_string(c.pos0) + ", T " + std::to_string(c.T) + ", huge at " + std::to_string(c.huge_at));
        const Inputs in   = make_inputs(c, 23);
        const auto   want = block_order(c, in);
        // (one token per call: several take the prompt kernels)
        const auto got = run(*gpu, c, in, 1);
        const Diff d   = compare(got, want);
        EXPECT_EQ(d.n, 0u) << d.n << " of " << got.size() << " differ, the first at " << d.first << " (" << got[d.first]
                           << " vs " << want[d.first] << ")";
        // Against the CPU backend (its fast kernels in the same order): the same bits.
        const auto cpu_out = run(*cpu, c, in, c.T);
        const Diff r       = compare(got, cpu_out);
        EXPECT_EQ(r.n, 0u) << r.n << " of " << got.size() << " differ from the CPU backend, the first at " << r.first
                           << " (" << got[r.first] << " vs " << cpu_out[r.first] << ")";
    }
}

}  // namespace
}  // namespace tern
