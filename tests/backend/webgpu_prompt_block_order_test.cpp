// Issue 52: the prompt attention paths (several query tokens: attention_prefill_*.wgsl, and
// attention.wgsl, which rows over 512 positions never reach) in the block order for rows of more
// than 512 positions (WebGpuTuning::attn_block_order = 1; rows of at most 512 keep today's bits),
// bit for bit against the CPU oracle of one (token, head) row (cpu_ops.h's attention_row: today's
// single pass up to 512 positions, the block order past them). Prompts of 1 .. 600 tokens over depths
// 0 .. 2047 cross every block (32), chunk (64) and superblock (512) edge; head_dim 64 / 96 / 128 and
// G 1 / 2 / 4 (families' shapes), f16 and f32 caches, the P·V kernel's segments (a short prompt over
// a long cache, attention_prefill_combine.wgsl) and none, token chunks (a small score budget), and
// prompts cut into calls of 2 or 3 tokens equal to the whole prompt at once. One token past 512
// positions is decode (webgpu_attention_split.cpp's kernels, another path): KV decode equal to the
// whole prompt is checked under the default order (both orders must pass it). Skipped without a
// WebGPU adapter.
#include "backend/cpu/cpu_ops.h"
#include "backend/webgpu/webgpu_backend.h"
#include "backend/webgpu/webgpu_tuning.h"
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
    int64_t n_head, n_head_kv, head_dim, pos0, T;
};

struct Inputs {
    DType                cache;
    std::vector<uint8_t> k, v;  // [n_kv, n_ctx] cache bytes
    std::vector<float>   q;     // [n_q, T + 1]: the queries are columns 1 .. T
};

Inputs make_inputs(const Case & c, DType cache, uint32_t seed) {
    std::mt19937  rng(seed);
    auto          normal = [&](float sd) { return std::normal_distribution<float>(0.0f, sd)(rng); };
    const int64_t n_kv = c.n_head_kv * c.head_dim, n_ctx = c.pos0 + c.T;
    std::vector<float> k(static_cast<size_t>(n_kv * n_ctx)), v(k.size());
    for (auto & x : k) x = normal(1.0f);
    for (auto & x : v) x = normal(1.0f);
    Inputs in{cache, std::vector<uint8_t>(dtype_tensor_bytes(cache, n_kv, static_cast<int64_t>(k.size()))), {}, {}};
    in.v.resize(in.k.size());
    quantize_row(cache, k.data(), in.k.data(), static_cast<int64_t>(k.size()));
    quantize_row(cache, v.data(), in.v.data(), static_cast<int64_t>(v.size()));
    in.q.resize(static_cast<size_t>(c.n_head * c.head_dim * (c.T + 1)));
    for (auto & x : in.q) x = normal(2.0f);  // scores spread over a few units: peaked and flat rows
    return in;
}

// A scalar copy of issue 52's specification until cpu::attention_row lands on main (then the oracle
// is that function: same arguments, less `blocks`). q [hd] unrounded; K and V rows as f32 values.
// blocks false: today's order past 512 positions too (each superblock's single pass, then
// cpu::combine_superblocks), for attn_block_order=0.
void attention_row(const float * q, const float * k, int64_t k_stride, const float * v, int64_t v_stride, int64_t n,
                   int64_t hd, float scale, bool k_f16, bool v_f16, float * out, bool blocks = true) {
    std::vector<float> qh(q, q + hd), s(static_cast<size_t>(n));
    if (k_f16) {
        for (auto & x : qh) x = round_to_fp16(x);
    }
    for (int64_t i = 0; i < n; ++i) s[static_cast<size_t>(i)] = cpu::dot_blocked16(qh.data(), k + i * k_stride, hd) * scale;
    if (n <= 512 || !blocks) {  // today's single pass per superblock
        std::vector<float> sm, sl, so;
        for (int64_t s0 = 0; s0 < n; s0 += 512) {
            const int64_t len = std::min<int64_t>(512, n - s0);
            float * const e   = s.data() + s0;
            float         mx  = -INFINITY;
            for (int64_t i = 0; i < len; ++i) mx = std::max(mx, e[i]);
            for (int64_t i = 0; i < len; ++i) e[i] = cpu::exp_fixed(e[i] - mx);
            const float sum = cpu::sum_positions(e, len), inv = 1.0f / sum;
            cpu::PositionSum   o(static_cast<size_t>(hd));
            std::vector<float> terms(static_cast<size_t>(hd));
            for (int64_t i = 0; i < len; ++i) {
                const float pr = v_f16 ? round_to_fp16(e[i] * inv) : e[i] * inv;
                for (int64_t d = 0; d < hd; ++d) terms[static_cast<size_t>(d)] = pr * v[(s0 + i) * v_stride + d];
                o.add(i, terms.data());
            }
            so.resize(so.size() + static_cast<size_t>(hd));
            o.finish(len, so.data() + so.size() - static_cast<size_t>(hd));
            sm.push_back(mx);
            sl.push_back(sum);
        }
        cpu::combine_superblocks(sm.data(), sl.data(), 1, so.data(), hd, static_cast<int64_t>(sm.size()), hd, out);
        return;
    }
    struct Part {
        float              m = -FLT_MAX, l = 0;
        std::vector<float> o;
    };
    auto join = [&](const std::vector<Part> & parts) {
        Part r;
        for (const Part & x : parts) r.m = std::max(r.m, x.m);
        r.o.assign(static_cast<size_t>(hd), 0.0f);
        for (const Part & x : parts) {
            const float a = cpu::exp_fixed(x.m - r.m);
            r.l           = r.l + a * x.l;
            for (int64_t d = 0; d < hd; ++d) r.o[static_cast<size_t>(d)] = r.o[static_cast<size_t>(d)] + a * x.o[static_cast<size_t>(d)];
        }
        return r;
    };
    std::vector<Part> supers, chunks, parts;
    for (int64_t b0 = 0; b0 < n; b0 += 32) {
        Part          bp;
        const int64_t len = std::min<int64_t>(32, n - b0);
        for (int64_t i = b0; i < b0 + len; ++i) bp.m = std::max(bp.m, s[static_cast<size_t>(i)]);
        bp.o.assign(static_cast<size_t>(hd), 0.0f);
        for (int64_t i = b0; i < b0 + len; ++i) {
            const float e = cpu::exp_fixed(s[static_cast<size_t>(i)] - bp.m), pe = v_f16 ? round_to_fp16(e) : e;
            bp.l          = bp.l + e;
            for (int64_t d = 0; d < hd; ++d) bp.o[static_cast<size_t>(d)] = bp.o[static_cast<size_t>(d)] + pe * v[i * v_stride + d];
        }
        parts.push_back(std::move(bp));
        const int64_t end = b0 + len;
        if (end % 64 == 0 || end == n) {
            chunks.push_back(join(parts));
            parts.clear();
        }
        if (end % 512 == 0 || end == n) {
            supers.push_back(join(chunks));
            chunks.clear();
        }
    }
    const Part  row = join(supers);
    const float r   = 1.0f / row.l;
    for (int64_t d = 0; d < hd; ++d) out[d] = row.o[static_cast<size_t>(d)] * r;
}

// The oracle's output of the T queries (blocks false: today's order).
std::vector<float> oracle(const Case & c, const Inputs & in, bool blocks = true) {
    const int64_t hd = c.head_dim, n_q = c.n_head * hd, n_kv = c.n_head_kv * hd, n_ctx = c.pos0 + c.T;
    std::vector<float> k(static_cast<size_t>(n_kv * n_ctx)), v(k.size()), out(static_cast<size_t>(n_q * c.T));
    dequantize_row(in.cache, in.k.data(), k.data(), static_cast<int64_t>(k.size()));
    dequantize_row(in.cache, in.v.data(), v.data(), static_cast<int64_t>(v.size()));
    const bool  f16   = in.cache == DType::f16;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    for (int64_t t = 0; t < c.T; ++t) {
        for (int64_t h = 0; h < c.n_head; ++h) {
            const int64_t kvh = h / (c.n_head / c.n_head_kv);
            attention_row(in.q.data() + (t + 1) * n_q + h * hd, k.data() + kvh * hd, n_kv, v.data() + kvh * hd, n_kv,
                          c.pos0 + t + 1, hd, scale, f16, f16, out.data() + t * n_q + h * hd, blocks);
        }
    }
    return out;
}

std::vector<float> run(Backend & b, const Case & c, const Inputs & in, int64_t per_call) {
    return test::run_attention(b, {c.n_head, c.n_head_kv, c.head_dim, c.pos0, c.T, in.cache}, in.k, in.v, in.q, per_call);
}

// The number of outputs whose bits differ (and a message on the first).
size_t count_diff(const std::vector<float> & got, const std::vector<float> & want, std::string * first) {
    size_t n = 0;
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
        if (std::memcmp(&got[i], &want[i], 4) != 0 && n++ == 0 && first) {
            *first = "the first at " + std::to_string(i) + " (" + std::to_string(got[i]) + " vs " + std::to_string(want[i]) + ")";
        }
    }
    return n;
}

void expect_same(const std::vector<float> & got, const std::vector<float> & want, const char * what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    std::string first;
    const size_t n = count_diff(got, want, &first);
    EXPECT_EQ(n, 0u) << what << ": " << n << " of " << got.size() << " differ, " << first;
}

// The block order on every path (here: the prompt kernels; a token alone past 512 positions takes
// the one-query kernels, webgpu_attention_split.cpp).
constexpr const char * k_tune = "attn_block_order=1";

std::string name(const Case & c) {
    return "h" + std::to_string(c.n_head) + " kv" + std::to_string(c.n_head_kv) + " hd" + std::to_string(c.head_dim) +
           " pos0 " + std::to_string(c.pos0) + " T " + std::to_string(c.T);
}

// Every prompt length over every depth (one shape, f16 cache), the whole prompt in one call.
TEST(WebGpuPromptBlockOrder, PromptsOverDepthsGiveTheOraclesBits) {
    TERN_REQUIRE_WEBGPU();
    Backend & gpu = *test::tuned_webgpu(k_tune);
    Backend & old = *test::tuned_webgpu("attn_block_order=0");
    size_t    old_differs = 0;
    for (int64_t T : {1, 3, 15, 16, 17, 100, 600}) {
        for (int64_t pos0 : {0, 500, 511, 512, 513, 1000, 2047}) {
            if (T == 1 && pos0 >= 512) continue;  // decode: the one-query kernels
            const Case c{4, 2, 64, pos0, T};
            SCOPED_TRACE(name(c));
            const Inputs in  = make_inputs(c, DType::f16, static_cast<uint32_t>(T * 7919 + pos0));
            const auto   got = run(gpu, c, in, T);
            expect_same(got, oracle(c, in), "GPU vs the oracle");
            // Rows over 512 positions must leave today's order (key 0): the test tells the orders
            // apart; rows of at most 512 keep their bits.
            const auto before = run(old, c, in, T);
            if (pos0 + T > 512) old_differs += count_diff(got, before, nullptr);
            const int64_t n_q = c.n_head * c.head_dim, t_short = std::clamp<int64_t>(512 - pos0, 0, T);
            expect_same(std::vector<float>(got.begin(), got.begin() + t_short * n_q),
                        std::vector<float>(before.begin(), before.begin() + t_short * n_q), "rows <= 512 vs key 0");
        }
    }
    EXPECT_GT(old_differs, 0u) << "today's bits everywhere past 512 positions: did the block order run?";
}

// Families' shapes (head_dim 64 / 96 / 128, G 1 / 2 / 4), f16 and f32 caches; the P·V kernel with
// segments (its default split for few rows over a long cache) and without (attn_pv_split_groups=0),
// 32 and 64 rows per P·V workgroup.
TEST(WebGpuPromptBlockOrder, ShapesCachesAndSegmentsGiveTheOraclesBits) {
    TERN_REQUIRE_WEBGPU();
    const std::string tune = k_tune;
    Backend *         forms[] = {test::tuned_webgpu(tune), test::tuned_webgpu(tune + ",attn_pv_split_groups=0"),
                                 test::tuned_webgpu(tune + ",attn_pv_rows=64")};
    for (const Case & c : {Case{8, 2, 128, 1000, 20}, Case{4, 4, 64, 700, 17}, Case{8, 2, 96, 2047, 16},
                           Case{4, 1, 128, 480, 100}, Case{6, 3, 96, 513, 3}, Case{2, 2, 64, 1500, 40}}) {
        for (DType cache : {DType::f16, DType::f32}) {
            SCOPED_TRACE(name(c) + (cache == DType::f16 ? " f16" : " f32"));
            const Inputs in   = make_inputs(c, cache, static_cast<uint32_t>(c.pos0 + c.head_dim));
            const auto   want = oracle(c, in);
            for (Backend * b : forms) expect_same(run(*b, c, in, c.T), want, "GPU vs the oracle");
        }
    }
}

// Calls of 2 and 3 tokens equal the whole prompt at once, and token chunks (a score budget of a few
// tokens' rows) too: the rows past 512 positions have the same bits whichever call computes them.
TEST(WebGpuPromptBlockOrder, CallsAndChunksEqualTheWholePrompt) {
    TERN_REQUIRE_WEBGPU();
    const Case    c{4, 2, 64, 490, 60};
    Backend &     gpu   = *test::tuned_webgpu(k_tune);
    Backend &     small = *test::tuned_webgpu(std::string(k_tune) + ",attn_scratch_bytes=" +
                                              std::to_string(c.n_head * (c.pos0 + c.T) * 4 * 11));  // 11 tokens a chunk
    const Inputs  in    = make_inputs(c, DType::f16, 5);
    const auto    whole = run(gpu, c, in, c.T);
    expect_same(whole, oracle(c, in), "whole prompt vs the oracle");
    expect_same(run(gpu, c, in, 2), whole, "2 tokens per call vs the whole prompt");
    expect_same(run(gpu, c, in, 3), whole, "3 tokens per call vs the whole prompt");
    expect_same(run(small, c, in, c.T), whole, "token chunks vs the whole prompt");
}

// KV decode (one token per call: the one-query kernels past 512 positions) equals the whole prompt
// (the prompt kernels) under the default order, whichever it is; head_dim 128 f16 G 4 (2B4T's shape)
// and head_dim 64 f32.
TEST(WebGpuPromptBlockOrder, DecodeEqualsTheWholePromptInTheDefaultOrder) {
    TERN_REQUIRE_WEBGPU();
    Backend & gpu = *test::shared_webgpu().backend;
    for (const auto & [c, cache] : {std::pair{Case{8, 2, 128, 500, 40}, DType::f16}, std::pair{Case{4, 2, 64, 1000, 30}, DType::f32}}) {
        SCOPED_TRACE(name(c));
        const Inputs in    = make_inputs(c, cache, 9);
        const auto   whole = run(gpu, c, in, c.T);
        expect_same(run(gpu, c, in, 1), whole, "one token per call vs the whole prompt");
        expect_same(whole, oracle(c, in, WebGpuTuning{}.attn_block_order != 0), "whole prompt vs the default order");
    }
}

// Key 0 keeps today's order everywhere (each superblock's softmax, cpu::combine_superblocks).
TEST(WebGpuPromptBlockOrder, KeyZeroKeepsTodaysOrder) {
    TERN_REQUIRE_WEBGPU();
    Backend & gpu = *test::tuned_webgpu("attn_block_order=0");
    for (const Case & c : {Case{4, 2, 64, 1000, 20}, Case{4, 1, 128, 480, 100}}) {
        SCOPED_TRACE(name(c));
        const Inputs in = make_inputs(c, DType::f16, 3);
        expect_same(run(gpu, c, in, c.T), oracle(c, in, false), "GPU key 0 vs today's order");
    }
}

}  // namespace
}  // namespace tern
