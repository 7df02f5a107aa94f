// Prompt attention on the WebGPU backend (attention_prefill_*.wgsl, from 16 query tokens on): many
// queries over long random caches with GQA, against the CPU reference and against attention.wgsl
// run one token at a time (and, where subgroups are exactly 32 wide, attention.wgsl's short form
// against its general form). The tile edges are crossed on purpose: query rows (tokens x heads of a
// KV head) and positions that are not multiples of 64, group sizes 1, 3 and 4 (with G = 3 a
// thread's four rows straddle tokens and see different positions), head_dim 32, 40 (a partial
// 16-dimension block of the scores' order), 64 and 128,
// position segments (a short prompt over a long cache) and token chunks (a small score budget).
// Random normal q, K and V make every permutation of heads, tokens, positions or dimensions show,
// and the sums cancel enough that adding in another order would change the last bits. Bit-exact on
// every adapter against attention.wgsl (same primitives, the same summation orders), against the
// CPU backend's algorithm written out (cpu::attention_row per row: block_order_oracle.h) and against
// the CPU backend itself. Skipped without a WebGPU adapter.
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/webgpu/webgpu_backend.h"
#include "backend/webgpu/webgpu_backend_impl.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"
#include "attention_run.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
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

// |got - want| <= tol (1 + |want|) everywhere; with tol = 0, the same bits.
void expect_close(const std::vector<float> & got, const std::vector<float> & want, double tol, const char * what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    size_t n_diff = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const bool same = tol == 0 ? std::memcmp(&got[i], &want[i], 4) == 0
                                   : std::fabs(got[i] - want[i]) <= tol * (1.0 + std::fabs(want[i]));
        if (!same && n_diff++ == 0) first = i;
    }
    EXPECT_EQ(n_diff, 0u) << what << ": " << n_diff << " of " << got.size() << " differ, the first at " << first
                          << " (" << got[first] << " vs " << want[first] << ")";
}

class WebGpuPromptAttention : public ::testing::TestWithParam<Case> {
protected:
    void SetUp() override { TERN_REQUIRE_WEBGPU(); }
};

TEST_P(WebGpuPromptAttention, MatchesTheCpuAndTheOneQueryKernel) {
    const Case c   = GetParam();
    auto       cpu = make_cpu_backend({1});
    Backend &  gpu = *test::shared_webgpu().backend;
    for (DType cache : {DType::f16, DType::f32}) {
        SCOPED_TRACE(cache == DType::f16 ? "f16 cache" : "f32 cache");
        const Inputs in        = make_inputs(c, cache, 7);
        const auto   want      = run_case(*cpu, c, in, c.T);
        const auto   prefill   = run_case(gpu, c, in, c.T);  // attention_prefill_*.wgsl
        const auto   one_query = run_case(gpu, c, in, 1);    // attention.wgsl
        expect_close(prefill, one_query, 0, "prefill kernels vs attention.wgsl");
        expect_close(prefill, attention_rows(c, in), 0, "prefill kernels vs the reference written out");
        expect_close(prefill, want, 0, "prefill kernels vs CPU");
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, WebGpuPromptAttention,
                         ::testing::Values(Case{8, 2, 128, 0, 100},    // BitNet's G = 4, partial tiles
                                           Case{8, 2, 128, 300, 37},   // a prompt after a long prefix
                                           Case{8, 2, 128, 120, 16},   // one query: short form to 128, then general
                                           Case{6, 2, 64, 40, 50},     // G = 3: rows straddle tokens
                                           Case{2, 2, 32, 0, 70},      // G = 1, 32-dimension tiles
                                           Case{4, 1, 64, 2500, 20},   // few rows, long cache: segments
                                           Case{4, 2, 40, 30, 24}),    // head_dim 40: a partial block of 16
                         [](const ::testing::TestParamInfo<Case> & p) {
                             const Case & c = p.param;
                             return "h" + std::to_string(c.n_head) + "_kv" + std::to_string(c.n_head_kv) + "_hd" +
                                    std::to_string(c.head_dim) + "_pos" + std::to_string(c.pos0) + "_T" +
                                    std::to_string(c.T);
                         });

// A score budget of a few tokens' rows: the prompt runs in token chunks (each at its own pos0).
TEST(WebGpuPromptAttentionChunks, ASmallScoreBudgetGivesTheSameBits) {
    TERN_REQUIRE_WEBGPU();
    const Case    c{8, 2, 128, 60, 40};
    WebGpuOptions o;
    o.allow_cpu_adapter = true;
    o.tune = "attn_scratch_bytes=" + std::to_string(c.n_head * (c.pos0 + c.T) * 4 * 11);  // 11 tokens per chunk
    auto         small = make_webgpu_backend(o);
    auto         cpu   = make_cpu_backend({1});
    const Inputs in    = make_inputs(c, DType::f16, 11);
    const auto   got   = run_case(*small, c, in, c.T);
    expect_close(got, run_case(*test::shared_webgpu().backend, c, in, c.T), 0, "chunked vs whole prompt");
    expect_close(got, attention_rows(c, in), 0, "chunked vs the reference written out");
    expect_close(got, run_case(*cpu, c, in, c.T), 0, "chunked vs CPU");
}

// One query over a long context takes the split kernels from WebGpuTuning::attn_long_positions on
// (as decoding deep into a context does), and past 512 positions the block-order kernels
// (super_attention): each token of these cases alone, through them (threshold 1) and through
// attention.wgsl (a threshold never reached; past 512 positions the block-order kernels all the
// same), the same bits, and the reference's. Positions 1 .. 100 (one block of 32 positions, then
// several), G = 3 (41 .. 49), 509 .. 514 (the combine closes the first superblock of blocks),
// 901 .. 904 (attention.wgsl's K tiles past its thread count), 2501 .. 2504 (five superblocks),
// head_dim 40 (a partial block of 16 dimensions), head_dim 36 (f16 K blocks not 16-byte aligned: the
// scores kernel's word-by-word loads; at 510 .. 515 positions, past 512 neither the split kernels
// nor super_attention take it: the prompt kernels do) and G = 8 (more query heads than threads per
// position).
TEST(WebGpuLongOneQueryAttention, LongContextKernelsGiveTheOneQueryKernelsBits) {
    TERN_REQUIRE_WEBGPU();
    WebGpuOptions o;
    o.allow_cpu_adapter = true;
    o.tune              = "attn_long_positions=1";
    auto spread         = make_webgpu_backend(o);
    o.tune              = "attn_long_positions=4294967295";  // never
    auto one_wg         = make_webgpu_backend(o);
    for (const Case & c : {Case{8, 2, 128, 0, 100}, Case{6, 2, 64, 40, 9}, Case{6, 2, 64, 508, 6},
                           Case{8, 2, 128, 900, 4}, Case{4, 1, 64, 2500, 4}, Case{4, 2, 40, 60, 3},
                           Case{4, 2, 36, 40, 3}, Case{4, 2, 36, 509, 6}, Case{16, 2, 64, 100, 2}}) {
        for (DType cache : {DType::f16, DType::f32}) {
            SCOPED_TRACE("pos0 " + std::to_string(c.pos0) + (cache == DType::f16 ? ", f16 cache" : ", f32 cache"));
            const Inputs in  = make_inputs(c, cache, 5);
            const auto   got = run_case(*spread, c, in, 1);
            expect_close(got, run_case(*one_wg, c, in, 1), 0, "long-context kernels vs attention.wgsl, one query each");
            expect_close(got, attention_rows(c, in), 0, "long-context kernels vs the reference written out");
        }
    }
}

// The P·V forms of one query's split kernels over an f16 cache of at most 512 positions
// (WebGpuTuning::attn_split_tiles; longer rows take the block-order kernels, webgpu_block_paths_test):
// 1 attention_split_pvt + _combine (tiles of a superblock x 16 dimensions), 0 attention_split_pv
// (8 dimensions per workgroup over every position), 1 with 1024 / G instead of 64 softmax
// positions per workgroup (attn_split_chunk=0), each token alone and all tokens of a case in one
// call (several columns per dispatch): the same bits, and the reference's. Lengths cross blocks of
// 32 and softmax chunks (n 301 .. 303 with G = 4; 510 .. 512 with the 2B4T head, head_dim 128, and
// with G = 16; 251 .. 255 with G = 3), head_dim 72 (not a multiple of the tiles' 16: both forms take
// attention_split_pv), G = 1, and two KV heads; G = 5 with head_dim 80 (two vec4s of query heads in
// the tiles), and head_dim 96 at n 508 .. 515 (alone, the rows past 512 take attention_block_pv; all
// tokens in one call cross 512: attention_split_scores + attention_paged_super + _combine take the
// call, each row of at most 512 positions in its single pass).
TEST(WebGpuLongOneQueryAttention, PvFormsGiveTheSameBitsAcrossEveryBoundary) {
    TERN_REQUIRE_WEBGPU();
    std::vector<std::unique_ptr<Backend>> forms;
    for (const char * form : {"attn_split_tiles=1", "attn_split_tiles=0", "attn_split_tiles=1,attn_split_chunk=0"}) {
        WebGpuOptions o;
        o.allow_cpu_adapter = true;
        o.tune              = std::string("attn_long_positions=1,") + form;
        forms.push_back(make_webgpu_backend(o));
    }
    for (const Case & c : {Case{8, 2, 64, 300, 3}, Case{4, 1, 128, 509, 3}, Case{16, 1, 64, 509, 3},
                           Case{3, 1, 64, 250, 5}, Case{16, 2, 72, 400, 3}, Case{2, 2, 64, 480, 2},
                           Case{10, 2, 80, 300, 3}, Case{3, 3, 96, 507, 8}}) {
        SCOPED_TRACE("G " + std::to_string(c.n_head / c.n_head_kv) + ", head_dim " + std::to_string(c.head_dim) +
                     ", pos0 " + std::to_string(c.pos0));
        const Inputs in    = make_inputs(c, DType::f16, 7);
        const auto   tiles = run_case(*forms[0], c, in, 1);
        expect_close(tiles, attention_rows(c, in), 0, "attention_split_pvt vs the reference written out");
        expect_close(tiles, run_case(*forms[1], c, in, 1), 0, "attention_split_pvt vs attention_split_pv");
        expect_close(tiles, run_case(*forms[0], c, in, c.T), 0, "each token alone vs every token in one call");
        expect_close(tiles, run_case(*forms[2], c, in, 1), 0, "64 vs 1024 / G softmax positions per workgroup");
        expect_close(tiles, run_case(*forms[2], c, in, c.T), 0, "1024 / G softmax positions, every token in one call");
    }
}

// A huge score in one superblock (one cache row's K scaled by 12: scores of tens, far above the
// other superblocks' maxima for some heads and far below for others) at position 3, pos0 / 2 or
// pos0 + 2 (seen by the later queries only), so that the block order's rescaling by each block's,
// chunk's and superblock's max decides the output: one query through the block-order kernels (the
// split kernels up to 512 positions), a prompt through attention_prefill_*.wgsl (one segment per
// row block, and segments of one superblock with the combine kernel). Lengths cross 512, 1024 and
// 1536; the same bits as the reference written out and the CPU backend's.
TEST(WebGpuAttentionSuperblocks, AHugeScoreInOneSuperblockIsRescaledAsTheCpuDoes) {
    TERN_REQUIRE_WEBGPU();
    // (tune, tokens per call: 1 takes the split kernels past 512 positions, T the prompt kernels)
    struct Form {
        std::string              tune;
        int64_t                  per_call;
        std::unique_ptr<Backend> b;
    };
    std::vector<Form> forms;
    for (const auto & [tune, per_call] : {std::pair<const char *, int64_t>{"attn_long_positions=1,attn_split_tiles=1", 1},
                                          {"attn_long_positions=1,attn_split_tiles=0", 1},
                                          {"attn_pv_split_groups=0", 0},  // 0: every token in one call
                                          {"attn_pv_split_groups=65535", 0}}) {
        WebGpuOptions o;
        o.allow_cpu_adapter = true;
        o.tune              = std::string("attn_prefill_min_tokens=2,") + tune;
        forms.push_back({tune, per_call, make_webgpu_backend(o)});
    }
    auto cpu = make_cpu_backend({1});
    for (const Case & c : {Case{8, 2, 128, 1020, 6}, Case{4, 1, 64, 1530, 9}, Case{6, 2, 64, 509, 5}}) {
        for (const int64_t at : {int64_t{3}, c.pos0 / 2, c.pos0 + 2}) {
            for (DType cache : {DType::f16, DType::f32}) {
                SCOPED_TRACE("pos0 " + std::to_string(c.pos0) + ", huge score at " + std::to_string(at) +
                             (cache == DType::f16 ? ", f16 cache" : ", f32 cache"));
                Inputs             in = make_inputs(c, cache, 17);
                const int64_t      n_kv = c.n_head_kv * c.head_dim, n_ctx = c.pos0 + c.T;
                std::vector<float> k(static_cast<size_t>(n_kv * n_ctx));
                dequantize_row(cache, in.k.data(), k.data(), static_cast<int64_t>(k.size()));
                for (int64_t i = 0; i < n_kv; ++i) k[static_cast<size_t>(at * n_kv + i)] *= 12.0f;
                quantize_row(cache, k.data(), in.k.data(), static_cast<int64_t>(k.size()));
                const auto want = attention_rows(c, in);
                expect_close(run_case(*cpu, c, in, c.T), want, 0, "CPU vs the reference written out");
                for (const Form & f : forms) {
                    SCOPED_TRACE(f.tune);
                    expect_close(run_case(*f.b, c, in, f.per_call > 0 ? f.per_call : c.T), want, 0, "GPU vs the reference");
                }
            }
        }
    }
}

// attention.wgsl's short form (one query over up to 128 positions for head_dim 128, 256 for 64,
// where subgroups are exactly 32 wide: lib/attention_core.wgsl ATT_SHORT) against its general form
// (WebGpuOptions::short_attention off), each token alone: the same bits, and the reference's.
// Positions 1 .. 141 cross the short form's end at 128 (121 .. 140 again, with G = 1); G = 4, 3 and
// 1 (head_dim 64: 8 blocks of 32 positions, one per P·V group); f16 and f32 caches (f32 K: two
// blocks of 16 words per thread).
TEST(WebGpuShortOneQueryAttention, ShortFormGivesTheGeneralFormsBits) {
    TERN_REQUIRE_WEBGPU();
    const std::string device = test::shared_webgpu().backend->device_info().description;
    if (device.find("short attention") == std::string::npos) {
        GTEST_SKIP() << "no short form on this adapter (its subgroups are not exactly 32 wide): " << device;
    }
    WebGpuOptions o;
    o.allow_cpu_adapter = true;
    o.short_attention   = false;
    auto      general   = make_webgpu_backend(o);
    Backend & short_one = *test::shared_webgpu().backend;
    for (const Case & c : {Case{8, 2, 128, 0, 141}, Case{6, 2, 64, 0, 100}, Case{2, 2, 128, 90, 10},
                           Case{4, 4, 128, 120, 20}}) {
        for (DType cache : {DType::f16, DType::f32}) {
            SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + (cache == DType::f16 ? ", f16 cache" : ", f32 cache"));
            const Inputs in  = make_inputs(c, cache, 3);
            const auto   got = run_case(short_one, c, in, 1);
            expect_close(got, run_case(*general, c, in, 1), 0, "short form vs general form, one query each");
            expect_close(got, attention_rows(c, in), 0, "short form vs the reference written out");
        }
    }
}

// One query's attention, then the o-projection of its output with the norm fused in (a BitNet
// layer's order): the o-projection's y, then the attention output. `x_other`: the projection reads
// another vector instead (the deferred combine must then run before it).
std::vector<float> attention_then_o(Backend & b, const Case & c, const Inputs & in, const WeightSource & wo,
                                    const WeightSource & nw, bool x_other) {
    const int64_t        n_q = c.n_head * c.head_dim, n_kv = c.n_head_kv * c.head_dim, n_ctx = c.pos0 + 1;
    const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim, c.head_dim, 10000.0f,
                               1.0f / std::sqrt(static_cast<float>(c.head_dim))};
    auto mo = b.load_linear({&wo, 1});
    auto mn = b.load_norm(nw);
    auto kt = alloc_tensor(b, in.cache, {n_kv, n_ctx, 1, 1}, "k");
    auto vt = alloc_tensor(b, in.cache, {n_kv, n_ctx, 1, 1}, "v");
    auto qt = alloc_tensor(b, DType::f32, {n_q, 1, 1, 1}, "q");
    auto ot = alloc_tensor(b, DType::f32, {n_q, 1, 1, 1}, "out");
    auto xt = alloc_tensor(b, DType::f32, {n_q, 1, 1, 1}, "x");
    auto yt = alloc_tensor(b, DType::f32, {n_q, 1, 1, 1}, "y");
    auto aq = alloc_tensor(b, DType::i8, {n_q, 1, 1, 1}, "act q");
    auto as = alloc_tensor(b, DType::f32, {1, 1, 1, 1}, "act scale");
    b.write(kt.tensor, in.k.data(), in.k.size());
    b.write(vt.tensor, in.v.data(), in.v.size());
    b.write(qt.tensor, in.q.data() + n_q, static_cast<size_t>(n_q) * 4);  // (query column 1)
    b.write(xt.tensor, in.q.data(), static_cast<size_t>(n_q) * 4);
    b.begin_step();
    b.attention(ot.tensor, qt.tensor, {kt.tensor, vt.tensor}, shape, c.pos0);
    b.linear(yt.tensor, *mo, {x_other ? xt.tensor : ot.tensor, mn.get(), 1e-5f, {aq.tensor, as.tensor}, {}},
             /*accumulate=*/false);
    b.end_step();
    std::vector<float> y(static_cast<size_t>(n_q)), o(y.size());
    b.read(yt.tensor, y.data(), y.size() * 4);
    b.read(ot.tensor, o.data(), o.size() * 4);
    y.insert(y.end(), o.begin(), o.end());
    return y;
}

// attention_split_combine folded into the o-projection's prologue (attn_combine_fused, lib/decode_io.wgsl
// PARTS): the attention output (which the fused prologue writes where the combine would have) and y
// as with the combine dispatched and as the CPU's, bit for bit (y alone would hide most of x's
// last bits behind the int8 quantization), where the query sees 201 positions, 512 (the longest row
// the split kernels take) and 1,025 (the block-order kernels: nothing to fuse); G = 4, head_dim 128,
// two KV heads. The fused form must take that path (counted) up to 512 positions, and not past
// them, and where the projection reads another vector the combine runs first.
TEST(WebGpuLongOneQueryAttention, CombineFusedIntoTheOProjection) {
    TERN_REQUIRE_WEBGPU();
    std::unique_ptr<Backend> forms[2];
    for (int f = 0; f < 2; ++f) {
        WebGpuOptions o;
        o.allow_cpu_adapter = true;
        o.tune              = std::string("attn_long_positions=1,attn_combine_fused=") + (f ? "1" : "0");
        forms[f]            = make_webgpu_backend(o);
    }
    auto &        fused = dynamic_cast<WebGpuBackend &>(*forms[1]);
    auto          cpu   = make_cpu_backend({2});
    const int64_t n_q   = 8 * 128;
    std::mt19937  rng(5);
    std::vector<int8_t> tern(static_cast<size_t>(n_q * n_q));
    for (auto & x : tern) x = static_cast<int8_t>(static_cast<int>(rng() % 3) - 1);
    std::vector<uint8_t> wbytes(dtype_tensor_bytes(DType::i2_s, n_q, n_q * n_q));
    i2s_pack(tern.data(), n_q * n_q, 0.37f, wbytes.data());
    std::vector<float> norm(static_cast<size_t>(n_q));
    for (auto & x : norm) x = 1.0f + 0.001f * static_cast<float>(rng() % 200);
    std::vector<uint8_t> nbytes(norm.size() * 4);
    std::memcpy(nbytes.data(), norm.data(), nbytes.size());
    const WeightSource wo{"o", DType::i2_s, {n_q, n_q, 1, 1}, wbytes}, nw{"n", DType::f32, {n_q, 1, 1, 1}, nbytes};
    for (const int64_t pos0 : {200, 511, 1024}) {
        SCOPED_TRACE("positions " + std::to_string(pos0 + 1));
        const Case    c{8, 2, 128, pos0, 1};
        const Inputs  in     = make_inputs(c, DType::f16, 13);
        const int64_t before = fused.combines_fused();
        const auto    y      = attention_then_o(*forms[1], c, in, wo, nw, false);
        const int64_t fuses  = pos0 + 1 <= 512 ? 1 : 0;
        EXPECT_EQ(fused.combines_fused(), before + fuses) << "the o-projection took the superblock sums";
        expect_close(y, attention_then_o(*forms[0], c, in, wo, nw, false), 0, "combine fused vs dispatched");
        expect_close(y, attention_then_o(*cpu, c, in, wo, nw, false), 0, "combine fused vs the CPU");
        const auto other = attention_then_o(*forms[1], c, in, wo, nw, true);
        EXPECT_EQ(fused.combines_fused(), before + fuses) << "another input: the combine ran";
        expect_close(other, attention_then_o(*cpu, c, in, wo, nw, true), 0, "another input vs the CPU");
    }
}

}  // namespace
}  // namespace tern
