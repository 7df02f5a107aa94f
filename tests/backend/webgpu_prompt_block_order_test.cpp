// Issue 52: the prompt attention paths (several query tokens: attention_prefill_*.wgsl, and
// attention.wgsl, which rows over 512 positions never reach) in the block order for rows of more
// than 512 positions (rows of at most 512 in one softmax pass), bit for bit against the CPU oracle of
// one (token, head) row (cpu_ops.h's attention_row). Prompts of 1 .. 600 tokens over depths
// 0 .. 2047 cross every block (32), chunk (64) and superblock (512) edge; head_dim 64 / 96 / 128 and
// G 1 / 2 / 4 (families' shapes), f16 and f32 caches, the P·V kernel's segments (a short prompt over
// a long cache, attention_prefill_combine.wgsl) and none, token chunks (a small score budget), and
// prompts cut into calls of 2 or 3 tokens equal to the whole prompt at once. One token past 512
// positions is decode (the one-query kernels): KV decode equal to the whole prompt. Skipped without
// a WebGPU adapter.
#include "backend/cpu/cpu_ops.h"
#include "backend/webgpu/webgpu_backend.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "quant/block_formats.h"
#include "attention_run.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace tern {
namespace {

// (test::AttentionCase and its helpers: attention_run.h; k, v: [n_kv, n_ctx] cache bytes; q: [n_q, T + 1],
// queries in columns 1 .. T; attention_rows: cpu::attention_row of each token and head, the oracle:
// rows of at most 512 positions in one softmax pass, longer rows in issue 52's block order)
using Case   = test::AttentionCase;
using Inputs = test::AttentionInputs;
using test::attention_rows;
using test::make_inputs;
using test::run_case;

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

std::string name(const Case & c) {
    return "h" + std::to_string(c.n_head) + " kv" + std::to_string(c.n_head_kv) + " hd" + std::to_string(c.head_dim) +
           " pos0 " + std::to_string(c.pos0) + " T " + std::to_string(c.T);
}

// Prompt lengths over depths (one shape, f16 cache), the whole prompt in one call: on a GPU every
// length of 1, 3, 15, 16, 17, 100, 600 tokens over every depth of 0, 500, 511, 512, 513, 1000, 2047;
// on the CPU adapter (CI time) the ones that cross 512 (in one call, and in one P·V workgroup's rows),
// 1024 and 2048.
TEST(WebGpuPromptBlockOrder, PromptsOverDepthsGiveTheOraclesBits) {
    TERN_REQUIRE_WEBGPU();
    Backend &                                 gpu = *test::shared_webgpu().backend;
    std::vector<std::pair<int64_t, int64_t>> runs;  // (T, pos0)
    if (test::is_cpu_adapter(gpu)) {
        runs = {{3, 511}, {15, 500}, {16, 513}, {100, 450}, {17, 1010}, {20, 2040}};
    } else {
        for (int64_t T : {1, 3, 15, 16, 17, 100, 600}) {
            for (int64_t pos0 : {0, 500, 511, 512, 513, 1000, 2047}) {
                if (T > 1 || pos0 < 512) runs.emplace_back(T, pos0);  // (one token past 512: decode, below)
            }
        }
    }
    for (const auto & [T, pos0] : runs) {
        const Case c{4, 2, 64, pos0, T};
        SCOPED_TRACE(name(c));
        const Inputs in = make_inputs(c, DType::f16, static_cast<uint32_t>(T * 7919 + pos0));
        expect_same(run_case(gpu, c, in, T), attention_rows(c, in), "GPU vs the oracle");
    }
}

// Families' shapes (head_dim 64 / 96 / 128, G 1 / 2 / 4), f16 and f32 caches; the P·V kernel with
// segments (its default split for few rows over a long cache: attention_prefill_combine.wgsl) and
// without (attn_pv_split_groups=0), and on a GPU 64 rows per P·V workgroup.
TEST(WebGpuPromptBlockOrder, ShapesCachesAndSegmentsGiveTheOraclesBits) {
    TERN_REQUIRE_WEBGPU();
    std::vector<Backend *> forms{test::shared_webgpu().backend.get(), test::tuned_webgpu("attn_pv_split_groups=0")};
    const bool             cpu_adapter = test::is_cpu_adapter(*forms[0]);
    if (!cpu_adapter) {
        forms.push_back(test::tuned_webgpu("attn_pv_rows=64"));
    }
    std::vector<std::pair<Case, DType>> cases{{Case{8, 2, 128, 1000, 20}, DType::f16},
                                              {Case{4, 4, 64, 700, 17}, DType::f32},
                                              {Case{4, 2, 96, 2047, 16}, DType::f16}};
    if (!cpu_adapter) {
        for (const Case & c : {Case{8, 2, 128, 1000, 20}, Case{4, 4, 64, 700, 17}, Case{8, 2, 96, 2047, 16},
                               Case{4, 1, 128, 480, 100}, Case{6, 3, 96, 513, 3}, Case{2, 2, 64, 1500, 40}}) {
            cases.emplace_back(c, DType::f16);
            cases.emplace_back(c, DType::f32);
        }
    }
    for (const auto & [c, cache] : cases) {
        SCOPED_TRACE(name(c) + (cache == DType::f16 ? " f16" : " f32"));
        const Inputs in   = make_inputs(c, cache, static_cast<uint32_t>(c.pos0 + c.head_dim));
        const auto   want = attention_rows(c, in);
        for (Backend * b : forms) expect_same(run_case(*b, c, in, c.T), want, "GPU vs the oracle");
    }
}

// Calls of 2 and 3 tokens equal the whole prompt at once, and token chunks (a score budget of a few
// tokens' rows) too: the rows past 512 positions have the same bits whichever call computes them.
// And the prompt kernels' one-query form.
TEST(WebGpuPromptBlockOrder, CallsAndChunksEqualTheWholePrompt) {
    TERN_REQUIRE_WEBGPU();
    const Case   c{4, 2, 64, 490, 60};
    Backend &    gpu   = *test::shared_webgpu().backend;
    Backend &    small = *test::tuned_webgpu("attn_scratch_bytes=" +
                                             std::to_string(c.n_head * (c.pos0 + c.T) * 4 * 11));  // 11 tokens a chunk
    const Inputs in    = make_inputs(c, DType::f16, 5);
    const auto   whole = run_case(gpu, c, in, c.T);
    expect_same(whole, attention_rows(c, in), "whole prompt vs the oracle");
    expect_same(run_case(gpu, c, in, 2), whole, "2 tokens per call vs the whole prompt");
    expect_same(run_case(gpu, c, in, 3), whole, "3 tokens per call vs the whole prompt");
    expect_same(run_case(small, c, in, c.T), whole, "token chunks vs the whole prompt");
    // One query with G = 32 (more than the one-query split kernels take): the prompt kernels, 256
    // threads per softmax row (attn_softmax_wg_one), f32 V.
    const Case   g{32, 1, 64, 700, 2};
    const Inputs gin = make_inputs(g, DType::f32, 6);
    expect_same(run_case(gpu, g, gin, 1), attention_rows(g, gin), "one query, G = 32, vs the oracle");
}

// KV decode (one token per call: the one-query kernels past 512 positions) equals the whole prompt
// (the prompt kernels) and the oracle; head_dim 128 f16 G 4 (2B4T's shape) and head_dim 64 f32 G 2.
TEST(WebGpuPromptBlockOrder, DecodeEqualsTheWholePrompt) {
    TERN_REQUIRE_WEBGPU();
    Backend & gpu = *test::shared_webgpu().backend;
    for (const auto & [c, cache] : {std::pair{Case{8, 2, 128, 500, 40}, DType::f16}, std::pair{Case{4, 2, 64, 1000, 30}, DType::f32}}) {
        SCOPED_TRACE(name(c));
        const Inputs in    = make_inputs(c, cache, 9);
        const auto   whole = run_case(gpu, c, in, c.T);
        expect_same(run_case(gpu, c, in, 1), whole, "one token per call vs the whole prompt");
        expect_same(whole, attention_rows(c, in), "whole prompt vs the oracle");
    }
}

}  // namespace
}  // namespace tern
