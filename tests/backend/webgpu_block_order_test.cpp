// Issue 52: one query's long attention in the block order (WebGpuTuning::attn_block_order,
// attention_block_pv.wgsl + attention_block_combine.wgsl), against that order written out below in
// scalar code, bit for bit: blocks of 32 positions, chunks of 2 blocks, superblocks of 8 chunks, the row.
// Until the flip the CPU backend keeps the old order (softmax per superblock of 512, then
// cpu::combine_superblocks), so the kernels are compared with it only for closeness.
// Lengths cross every block (32), chunk (64) and superblock (512) boundary: n = 513 .. 516, 575 .. 577,
// 1023 .. 1025, 1537, 2047, 2048, 3000, 4096 (the 2B4T shape: 20 query heads over 5 KV heads), 4097
// (a last superblock of one position), 4160; G = 4, 3 and 1, each token alone (several tokens per call
// take the prompt kernels), and a huge score in one block (a K row scaled by 12), so that the blocks',
// chunks' and superblocks' rescaling by exp_fixed(m - M) decides the output. Skipped without a WebGPU
// adapter.
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/webgpu/webgpu_backend.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "quant/block_formats.h"
#include "attention_run.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tern {
namespace {

struct Case {
    int64_t n_head, n_head_kv, pos0, T;
    int64_t huge_at = -1;  // a position whose K row is scaled by 12 (-1: none)
};

constexpr int64_t k_hd = 128;

struct Inputs {
    std::vector<uint8_t> k, v;  // [n_kv, n_ctx] f16 cache bytes
    std::vector<float>   q;     // [n_q, T + 1]: the queries are columns 1 .. T
};

Inputs make_inputs(const Case & c, uint32_t seed) {
    std::mt19937  rng(seed);
    auto          normal = [&](float sd) { return std::normal_distribution<float>(0.0f, sd)(rng); };
    const int64_t n_kv = c.n_head_kv * k_hd, n_ctx = c.pos0 + c.T;
    std::vector<float> k(static_cast<size_t>(n_kv * n_ctx)), v(k.size());
    for (auto & x : k) x = normal(1.0f);
    for (auto & x : v) x = normal(1.0f);
    if (c.huge_at >= 0) {
        for (int64_t i = 0; i < n_kv; ++i) k[static_cast<size_t>(c.huge_at * n_kv + i)] *= 12.0f;
    }
    Inputs in{std::vector<uint8_t>(k.size() * 2), std::vector<uint8_t>(v.size() * 2), {}};
    quantize_row(DType::f16, k.data(), in.k.data(), static_cast<int64_t>(k.size()));
    quantize_row(DType::f16, v.data(), in.v.data(), static_cast<int64_t>(v.size()));
    in.q.resize(static_cast<size_t>(c.n_head * k_hd * (c.T + 1)));
    for (auto & x : in.q) x = normal(2.0f);  // scores spread over a few units: peaked and flat rows
    return in;
}

// The attention output of the T queries (pos0 .. pos0 + T - 1), computed `per_call` tokens at a time.
std::vector<float> run(Backend & b, const Case & c, const Inputs & in, int64_t per_call) {
    return test::run_attention(b, {c.n_head, c.n_head_kv, k_hd, c.pos0, c.T, DType::f16}, in.k, in.v, in.q, per_call);
}

// Partial results joined in order (blocks into a chunk, chunks into a superblock, superblocks into the
// row): M = max m_i, a_i = exp_fixed(m_i - M), L = ((0 + a_0 l_0) + a_1 l_1) + ...,
// O[d] = ((0 + a_0 o_0[d]) + ...).
struct Partial {
    float              m = 0, l = 0;
    std::vector<float> o;
};

Partial join(const std::vector<Partial> & parts) {
    Partial r;
    r.m = parts[0].m;
    for (const Partial & x : parts) r.m = std::max(r.m, x.m);
    r.o.assign(static_cast<size_t>(k_hd), 0.0f);
    for (const Partial & x : parts) {
        const float a = cpu::exp_fixed(x.m - r.m);
        r.l           = r.l + a * x.l;  // (-ffp-contract=off: each product rounded once)
        for (int64_t d = 0; d < k_hd; ++d) r.o[static_cast<size_t>(d)] = r.o[static_cast<size_t>(d)] + a * x.o[static_cast<size_t>(d)];
    }
    return r;
}

// The block order written out (issue 52's specification). For one query head over positions 0 .. n - 1
// (every value f32, every operation rounded once, -ffp-contract=off; f16(x) rounds to the nearest f16,
// ties to even, where the cache is f16):
//   1. s_i = dot_blocked16(f16(q), k_i) * scale          (unchanged: blocks of 16 dimensions)
//   2. block b = positions [32 b, min(32 b + 32, n)):
//        m_b = max(-FLT_MAX, s_i...)   (exact in any order)
//        e_i = exp_fixed(s_i - m_b)
//        l_b = ((0 + e_first) + ...) + e_last               (position order)
//        o_b[d] = ((0 + f16(e_first) v_first[d]) + ...)     (position order; f16 x f16 products exact)
//   3. chunk c = blocks [2 c, 2 c + 1] (the last may have 1), joined in block order by join();
//   4. superblock s = chunks [8 s, 8 s + 8) (512 positions; the last may be short), join() in chunk order;
//   5. the row = the superblocks joined in order: M, L, O[d];
//   6. out[d] = O[d] * r with r = 1 / L correctly rounded (one reciprocal per row, then one product).
// A join of one part is exact (a = exp_fixed(0) = 1, 0 + x = x).
std::vector<float> block_order(const Case & c, const Inputs & in) {
    constexpr int64_t k_chunk = 64, k_super = 512;
    const int64_t n_q = c.n_head * k_hd, n_kv = c.n_head_kv * k_hd, n_ctx = c.pos0 + c.T;
    std::vector<float> k(static_cast<size_t>(n_kv * n_ctx)), v(k.size()), out(static_cast<size_t>(n_q * c.T));
    dequantize_row(DType::f16, in.k.data(), k.data(), static_cast<int64_t>(k.size()));
    dequantize_row(DType::f16, in.v.data(), v.data(), static_cast<int64_t>(v.size()));
    const float scale = 1.0f / std::sqrt(static_cast<float>(k_hd));
    for (int64_t t = 0; t < c.T; ++t) {
        for (int64_t h = 0; h < c.n_head; ++h) {
            const int64_t kvh = h / (c.n_head / c.n_head_kv), n = c.pos0 + t + 1;
            const float * q   = in.q.data() + (t + 1) * n_q + h * k_hd;
            std::vector<float> qh(static_cast<size_t>(k_hd));
            for (int64_t i = 0; i < k_hd; ++i) qh[static_cast<size_t>(i)] = round_to_fp16(q[i]);
            std::vector<Partial> supers;
            for (int64_t s0 = 0; s0 < n; s0 += k_super) {
                std::vector<Partial> chunks;
                for (int64_t c0 = s0; c0 < std::min(n, s0 + k_super); c0 += k_chunk) {
                    std::vector<Partial> blocks;
                    for (int64_t b0 = c0; b0 < std::min(n, c0 + k_chunk); b0 += 32) {
                        const int64_t      len = std::min<int64_t>(32, n - b0);
                        std::vector<float> s(static_cast<size_t>(len));
                        Partial            bp;
                        bp.m = -FLT_MAX;
                        for (int64_t i = 0; i < len; ++i) {
                            s[static_cast<size_t>(i)] =
                                cpu::dot_blocked16(qh.data(), k.data() + (b0 + i) * n_kv + kvh * k_hd, k_hd) * scale;
                            bp.m = std::max(bp.m, s[static_cast<size_t>(i)]);
                        }
                        bp.o.assign(static_cast<size_t>(k_hd), 0.0f);
                        for (int64_t i = 0; i < len; ++i) {
                            const float e  = cpu::exp_fixed(s[static_cast<size_t>(i)] - bp.m);
                            const float pe = round_to_fp16(e);
                            bp.l           = bp.l + e;
                            const float * vr = v.data() + (b0 + i) * n_kv + kvh * k_hd;
                            for (int64_t d = 0; d < k_hd; ++d) bp.o[static_cast<size_t>(d)] = bp.o[static_cast<size_t>(d)] + pe * vr[d];
                        }
                        blocks.push_back(std::move(bp));
                    }
                    chunks.push_back(join(blocks));
                }
                supers.push_back(join(chunks));
            }
            const Partial row = join(supers);
            const float   r   = 1.0f / row.l;
            for (int64_t d = 0; d < k_hd; ++d) out[static_cast<size_t>(t * n_q + h * k_hd + d)] = row.o[static_cast<size_t>(d)] * r;
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

TEST(WebGpuLongOneQueryBlockOrder, KernelsGiveTheScalarBlockOrdersBits) {
    TERN_REQUIRE_WEBGPU();
    auto cpu = make_cpu_backend({1});
    // Every attn_block_combine_ds (the combine's slices of a head: the same bits).
    for (const int64_t ds : {16, 8, 128}) {
        Backend * gpu = test::tuned_webgpu("attn_long_positions=1,attn_block_combine_ds=" +
                                           std::to_string(ds));
        const std::vector<Case> all = {Case{8, 2, 512, 4},        Case{8, 2, 574, 3},        Case{8, 2, 1022, 3},
                                       Case{8, 2, 1536, 1},       Case{8, 2, 2046, 2},       Case{6, 2, 2999, 1},
                                       Case{2, 2, 1700, 2},       Case{20, 5, 4095, 2},      Case{4, 1, 4159, 1},
                                       Case{8, 2, 2046, 2, 1500}, Case{8, 2, 2046, 2, 100},  Case{8, 2, 4096, 1, 4096}};
        for (size_t i = 0; i < all.size(); ++i) {
            const Case & c = all[i];
            if (ds != 16 && i % 3 != 0) continue;  // (the other slicings on a few lengths)
            SCOPED_TRACE("ds " + std::to_string(ds) + ", G " + std::to_string(c.n_head / c.n_head_kv) + ", pos0 " +
                         std::to_string(c.pos0) + ", T " + std::to_string(c.T) + ", huge at " + std::to_string(c.huge_at));
            const Inputs in   = make_inputs(c, 23);
            const auto   want = block_order(c, in);
            // (one token per call: several take the prompt kernels)
            const auto got = run(*gpu, c, in, 1);
            const Diff d   = compare(got, want);
            EXPECT_EQ(d.n, 0u) << d.n << " of " << got.size() << " differ, the first at " << d.first << " (" << got[d.first]
                               << " vs " << want[d.first] << ")";
            // Against the CPU backend (the old order until the flip, then this one): close.
            const Diff r = compare(want, run(*cpu, c, in, c.T));
            EXPECT_LT(r.worst, 1e-3) << "the block order far from the CPU backend";
        }
    }
}

}  // namespace
}  // namespace tern
