// Whole models on the WebGPU backend against the CPU backend: synthetic models (`tern synth tiny`,
// every ternary file type, f16 and f32 KV caches, prefill in odd batch sizes) and the HF parity
// checkpoints (tests/data/hf_parity, converted as tests/model/hf_parity_test.cpp does). For each:
// the logits of every prompt position, then 64 greedy steps with identical tokens and close logits.
//
// Tolerance: |logit_gpu - logit_cpu| <= 1e-4 * max(1, max |logit| of the row). The kernels
// reproduce the CPU's arithmetic (see backend_ops_test.cpp), so on SwiftShader the logits come out
// bit-identical; on a GPU exp() and fma contraction leave ulp-level differences, which can flip an
// activation's int8 rounding now and then (a change of about 1e-5 relative in the logits).
// Skipped without a WebGPU adapter.
#include "backend/cpu/cpu_backend.h"
#include "backend/webgpu/webgpu_backend_impl.h"
#include "convert/hf_convert.h"
#include "engine/session.h"
#include "gguf/gguf_reader.h"
#include "model/bitnet_model.h"
#include "sampler/sampler.h"
#include "synth/synth.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <span>
#include <string>

#include "core/mmap.h"

namespace tern {
namespace {

constexpr double k_logit_rel_tol = 1e-4;

struct RunOptions {
    DType   cache      = DType::f16;
    int64_t n_batch    = 7;
    int     n_generate = 64;
};

struct Compare {
    double      max_rel = 0;  // worst |d| / max(1, max|row|)
    int         rows    = 0;
    std::string first;        // where the first non-zero difference was
};

void compare_rows(const float * gpu, const float * cpu, int64_t n, Compare & c, const std::string & where) {
    double row_max = 1, worst = 0;
    for (int64_t v = 0; v < n; ++v) row_max = std::max(row_max, static_cast<double>(std::fabs(cpu[v])));
    for (int64_t v = 0; v < n; ++v) worst = std::max(worst, static_cast<double>(std::fabs(gpu[v] - cpu[v])));
    if (worst > 0 && c.first.empty()) c.first = where;
    c.max_rel = std::max(c.max_rel, worst / row_max);
    ++c.rows;
    ASSERT_LE(worst / row_max, k_logit_rel_tol) << where;
}

int32_t argmax(std::span<const float> logits) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// Prompt logits at every position, then greedy decoding, on both backends side by side.
// gpu_backend: null for the tests' shared WebGPU backend.
void run_both(const std::string & path, const std::vector<int32_t> & prompt, const RunOptions & o,
              Backend * gpu_backend = nullptr) {
    const GgufFile file  = GgufFile::open(path);
    auto           cpu   = make_cpu_backend({2});
    Backend &      gpu   = gpu_backend ? *gpu_backend : *test::shared_webgpu().backend;
    auto           m_cpu = BitnetModel::load(file, *cpu);
    auto           m_gpu = BitnetModel::load(file, gpu);
    const int64_t  nv    = m_cpu->config().n_vocab;

    SessionOptions so;
    so.n_ctx   = static_cast<int64_t>(prompt.size()) + o.n_generate + 1;
    so.n_batch = o.n_batch;
    so.type_k = so.type_v = o.cache;
    Session s_cpu(*m_cpu, so);
    Session s_gpu(*m_gpu, so);

    std::vector<float> l_cpu(prompt.size() * static_cast<size_t>(nv)), l_gpu(l_cpu.size());
    s_cpu.eval(prompt, l_cpu);
    s_gpu.eval(prompt, l_gpu);
    Compare c;
    for (size_t pos = 0; pos < prompt.size(); ++pos) {
        compare_rows(l_gpu.data() + pos * nv, l_cpu.data() + pos * nv, nv, c, "prompt position " + std::to_string(pos));
        if (::testing::Test::HasFatalFailure()) return;
    }
    std::vector<int32_t> t_cpu, t_gpu;
    for (int step = 0; step < o.n_generate; ++step) {
        const int32_t a = argmax(s_cpu.logits());
        const int32_t b = argmax(s_gpu.logits());
        t_cpu.push_back(a);
        t_gpu.push_back(b);
        ASSERT_EQ(b, a) << "greedy step " << step;
        const int32_t next[1] = {a};
        s_cpu.eval(next);
        s_gpu.eval(next);
        compare_rows(s_gpu.logits().data(), s_cpu.logits().data(), nv, c, "greedy step " + std::to_string(step));
        if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_EQ(t_gpu, t_cpu);
    std::printf("[          ] %d logit rows, worst |d|/max|row| = %.3g%s\n", c.rows, c.max_rel,
                c.first.empty() ? " (bit-identical)" : (", first difference at " + c.first).c_str());
}

std::string synth_model(const std::string & tag, DType linear, DType embd) {
    static std::map<std::string, std::string> made;  // one file per configuration per process
    if (auto it = made.find(tag); it != made.end()) return it->second;
    SynthOptions o;
    o.shape       = "tiny";
    o.output_path = (test::temp_dir("webgpu-" + tag) / "m.gguf").string();
    o.seed        = 11;
    o.linear_type = linear;
    o.embd_type   = embd;
    o.progress    = false;
    write_synthetic_model(o);
    return made[tag] = o.output_path;
}

std::vector<int32_t> some_tokens(int n, int n_vocab) {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back((i * 37 + 11) % n_vocab);
    return ids;
}

TEST(WebGpuModel, SynthTinyI2sF16CacheMatchesCpu) {
    TERN_REQUIRE_WEBGPU();
    run_both(synth_model("i2s", DType::i2_s, DType::f16), some_tokens(19, 256), {DType::f16, 7, 64});
}

TEST(WebGpuModel, SynthTinyTq2F32CacheOnePassPrefillMatchesCpu) {
    TERN_REQUIRE_WEBGPU();
    run_both(synth_model("tq2", DType::tq2_0, DType::f16), some_tokens(23, 256), {DType::f32, 512, 64});
}

TEST(WebGpuModel, SynthTinyTq1Q8EmbeddingTokenByTokenMatchesCpu) {
    TERN_REQUIRE_WEBGPU();
    run_both(synth_model("tq1", DType::tq1_0, DType::q8_0), some_tokens(9, 256), {DType::f16, 1, 16});
}

// Greedy decoding with the token kept on the device (Session::decode_greedy): on WebGPU the LM head
// then runs in its argmax-only form (f32 sums + exact recomputation of the candidate rows), and the
// ids must be the CPU's, step for step.
TEST(WebGpuModel, DeviceGreedyDecodingMatchesCpu) {
    TERN_REQUIRE_WEBGPU();
    const std::string path  = synth_model("i2s", DType::i2_s, DType::f16);
    const GgufFile    file  = GgufFile::open(path);
    auto              cpu   = make_cpu_backend({2});
    auto              m_cpu = BitnetModel::load(file, *cpu);
    auto              m_gpu = BitnetModel::load(file, *test::shared_webgpu().backend);
    SessionOptions    so;
    so.n_ctx = 80;
    std::vector<int32_t> ids[2];
    BitnetModel *        models[2] = {m_cpu.get(), m_gpu.get()};
    for (int i = 0; i < 2; ++i) {
        Session s(*models[i], so);
        const auto prompt = some_tokens(11, 256);
        s.eval(prompt);
        const int32_t first = argmax(s.logits());
        s.decode_greedy(first, 60, [&](int32_t id) { ids[i].push_back(id); return true; }, 16);
    }
    ASSERT_EQ(ids[0].size(), 60u);
    EXPECT_EQ(ids[1], ids[0]);
}

// Prompt and greedy steps through the split attention kernels from the first position
// (attn_long_positions=1), with each P·V form (attn_split_tiles), the tiles' combine folded into the
// o-projection's prologue (the default; every step's every layer takes it, counted) and not (attn_combine_fused=0):
// every logit row as the CPU's. 24 steps after 11 prompt tokens stay far below 512 positions, the
// longest row the split kernels take: WebGpuLongOneQueryAttention.CombineFusedIntoTheOProjection covers 512.
TEST(WebGpuModel, SplitAttentionDecodingMatchesCpu) {
    TERN_REQUIRE_WEBGPU();
    for (const char * tune : {"attn_long_positions=1", "attn_long_positions=1,attn_split_tiles=0",
                              "attn_long_positions=1,attn_combine_fused=0"}) {
        SCOPED_TRACE(tune);
        WebGpuOptions o;
        o.allow_cpu_adapter = true;
        o.tune              = tune;
        auto gpu            = make_webgpu_backend(o);
        auto & web          = dynamic_cast<WebGpuBackend &>(*gpu);
        run_both(synth_model("i2s", DType::i2_s, DType::f16), some_tokens(11, 256), {DType::f16, 7, 24}, gpu.get());
        const std::string t = tune;  // (the tiles' combine is fused by default)
        if (t.find("attn_combine_fused=0") == std::string::npos && t.find("attn_split_tiles=0") == std::string::npos) {
            EXPECT_GE(web.combines_fused(), 24);  // (each greedy step's layers)
        } else {
            EXPECT_EQ(web.combines_fused(), 0);
        }
    }
}

// The warm-up runs steps where one query's kernels change form (Backend::warm_up_positions: after
// 128 and 256 positions, 512 threads, the split kernels, the last position's RoPE table) and
// leaves the session as new: greedy decoding after it, across position 128 (whose cache rows the
// warm-up wrote) to the end of the context, gives the CPU's ids. The prompt (positions 0-119, one
// eval) brings the decoding near 128 without ~110 steps of SwiftShader time; the 20 steps from 120
// to 139 run both forms, below 128 and from it.
TEST(WebGpuModel, WarmUpAtLaterPositionsLeavesTheSessionAsNew) {
    TERN_REQUIRE_WEBGPU();
    Backend & gpu = *test::shared_webgpu().backend;
    EXPECT_EQ(gpu.warm_up_positions(4096), (std::vector<int64_t>{128, 256, 384, 512, 4095}));  // (split from 513)
    EXPECT_EQ(gpu.warm_up_positions(200), (std::vector<int64_t>{128, 199}));
    EXPECT_TRUE(gpu.warm_up_positions(1).empty());
    const std::string path  = synth_model("i2s", DType::i2_s, DType::f16);
    const GgufFile    file  = GgufFile::open(path);
    auto              cpu   = make_cpu_backend({2});
    auto              m_cpu = BitnetModel::load(file, *cpu);
    auto              m_gpu = BitnetModel::load(file, gpu);
    SessionOptions so;
    so.n_ctx = 141;  // 120 prompt tokens, 20 decoded (the last one not fed), then that one evaluated at 140
    std::vector<int32_t> ids[2];
    std::vector<float>   last[2];
    BitnetModel *        models[2] = {m_cpu.get(), m_gpu.get()};
    for (int i = 0; i < 2; ++i) {
        Session s(*models[i], so);
        s.warm_up();
        EXPECT_EQ(s.n_past(), 0);
        s.eval(some_tokens(120, 256));
        const int32_t first = argmax(s.logits());
        s.decode_greedy(first, 20, [&](int32_t id) { ids[i].push_back(id); return true; });
        ASSERT_EQ(s.n_past(), 140);
        // The tiny model's greedy ids settle on one token, so they alone miss a wrong row past 128:
        // the whole logit row of a step that attends over all 141 positions must match too.
        const int32_t next[1] = {ids[i].back()};
        s.eval(next);
        last[i].assign(s.logits().begin(), s.logits().end());
    }
    ASSERT_EQ(ids[0].size(), 20u);
    EXPECT_EQ(ids[1], ids[0]);
    Compare c;
    compare_rows(last[1].data(), last[0].data(), static_cast<int64_t>(last[0].size()), c, "position 140");
}

// Greedy ids on a backend one eval per token: the prompt's, then n more (n + 1 in all).
std::vector<int32_t> host_greedy_ids(BitnetModel & model, const SessionOptions & so, std::span<const int32_t> prompt,
                                     int n) {
    Session host(model, so);
    host.eval(prompt);
    std::vector<int32_t> ids;
    for (int i = 0; i <= n; ++i) {
        ids.push_back(argmax(host.logits()));
        const int32_t next[1] = {ids.back()};
        if (i < n) host.eval(next);
    }
    return ids;
}

// Greedy decoding that stops early, and that runs into the end of the context, with the steps
// grouped into submits (Backend::set_steps_per_submit) and recorded ahead of each batch's read: the
// ids are the CPU's, the context ends right after the last id fed, and decoding on from there (or
// evaluating the next token) goes on exactly as on the CPU.
TEST(WebGpuModel, GroupedGreedyDecodingStopsAndFillsTheContextAsOnCpu) {
    TERN_REQUIRE_WEBGPU();
    const GgufFile file  = GgufFile::open(synth_model("i2s", DType::i2_s, DType::f16));
    auto           cpu   = make_cpu_backend({2});
    auto           m_cpu = BitnetModel::load(file, *cpu);
    auto           m_gpu = BitnetModel::load(file, *test::shared_webgpu().backend);
    SessionOptions so;
    so.n_ctx          = 48;
    const auto prompt = some_tokens(7, 256);
    // The CPU's ids, one eval per token to the end of the context: want[0] from the prompt, then 41.
    const std::vector<int32_t> want = host_greedy_ids(*m_cpu, so, prompt, 41);
    // Stopped at the 30th id (past the groups' ramp: 4 steps per submit), in batches of 9.
    Session stop(*m_gpu, so);
    stop.eval(prompt);
    std::vector<int32_t> got;
    stop.decode_greedy(want[0], 40, [&](int32_t id) {
        got.push_back(id);
        return got.size() < 30;
    }, 9);
    ASSERT_EQ(got.size(), 30u);
    EXPECT_EQ(got, std::vector<int32_t>(want.begin() + 1, want.begin() + 31));
    EXPECT_EQ(stop.n_past(), 7 + 30);  // want[0] and the next 29 were fed; the 30th was not
    // On from there: the steps recorded ahead of the stop ran past it, and are overwritten.
    std::vector<int32_t> more;
    stop.decode_greedy(want[30], 100, [&](int32_t id) {
        more.push_back(id);
        return true;
    }, 4);
    EXPECT_EQ(stop.n_past(), so.n_ctx);
    ASSERT_EQ(more.size(), 11u);  // positions 37 .. 47 fed, the 11th id from the last one
    EXPECT_EQ(more, std::vector<int32_t>(want.begin() + 31, want.end()));
    // Batches of 2 from the start (every batch boundary has steps recorded ahead), on a prompt whose
    // greedy ids change from step to step: most of the tiny model's soon repeat one id, which would
    // hide a step fed the wrong one. The first of a fixed list of candidates whose next 12 ids take
    // 3 values or more.
    std::vector<int32_t> cycling, want_c;
    for (int c = 0; c < 64 && cycling.empty(); ++c) {
        std::vector<int32_t> p;
        for (int i = 0; i < 6; ++i) p.push_back((c * 61 + i * (c + 3) * 17 + 5) % 256);
        const std::vector<int32_t> w = host_greedy_ids(*m_cpu, so, p, 12);
        if (std::set<int32_t>(w.begin() + 1, w.end()).size() >= 3) {
            cycling = p;
            want_c  = w;
        }
    }
    ASSERT_FALSE(cycling.empty()) << "no candidate prompt's ids vary";
    Session early(*m_gpu, so);
    early.eval(cycling);
    std::vector<int32_t> first_ids;
    early.decode_greedy(want_c[0], 12, [&](int32_t id) {
        first_ids.push_back(id);
        return true;
    }, 2);
    EXPECT_EQ(first_ids, std::vector<int32_t>(want_c.begin() + 1, want_c.end()));
}

// Sampled generation (generate()) on the GPU against the CPU, same seed, token for token. On the
// GPU it runs Session::decode_sampled: each step recorded while the one before runs, its token
// written afterwards. With top-k 1 the WebGPU backend's top-k head runs (the tiny model's 259-row
// head has one lower bound, so k = 1 is the largest it takes): only the best row is exact, the
// rest -inf, and only those rows are read. With top-k 40 it falls back to the exact head; with a
// repetition penalty every logit is read. The context (40) fills before the 40 tokens asked for.
TEST(WebGpuModel, SampledGenerationWithTopKHeadMatchesCpu) {
    TERN_REQUIRE_WEBGPU();
    const std::string path  = synth_model("i2s", DType::i2_s, DType::f16);
    const GgufFile    file  = GgufFile::open(path);
    const Tokenizer   tok   = Tokenizer::from_gguf(file);
    auto              cpu   = make_cpu_backend({2});
    auto              m_cpu = BitnetModel::load(file, *cpu);
    auto              m_gpu = BitnetModel::load(file, *test::shared_webgpu().backend);
    for (const int32_t top_k : {1, 40, -40}) {
        SCOPED_TRACE("top-k " + std::to_string(top_k));
        SamplerParams sp;
        sp.temp  = 0.8f;
        sp.top_k = top_k > 0 ? top_k : -top_k;
        sp.seed  = 5;
        if (top_k < 0) sp.repeat_penalty = 1.3f;
        std::vector<int32_t> ids[2];
        BitnetModel *        models[2] = {m_cpu.get(), m_gpu.get()};
        for (int i = 0; i < 2; ++i) {
            SessionOptions so;
            so.n_ctx = 40;
            Session s(*models[i], so);
            Sampler sampler(sp, static_cast<int32_t>(models[i]->config().n_vocab));
            const auto prompt = some_tokens(9, 256);
            generate(s, tok, sampler, prompt, 40, [&](int32_t id, const std::string &) {
                if (id >= 0) ids[i].push_back(id);
                return true;
            });
        }
        ASSERT_FALSE(ids[0].empty());
        EXPECT_EQ(ids[1], ids[0]);
    }
}

// Sampling on the device, stopped early and continued: the first reply stops after 7 tokens while
// the device has run steps ahead (their cache rows and uniforms discarded), the second continues the
// same session for 8 (each token ~0.5 s on SwiftShader; a wrong rewind shows from its first). Every id is the CPU's, drawn host-side one step at a time with the same seed, for the
// default chain, top-k 0 with top-p (the exact head) and temperature alone (id order): the cache
// stays what a full recompute gives, and the random stream is rewound to where the CPU's stands.
TEST(WebGpuModel, DeviceSamplingStoppedAndContinuedMatchesCpu) {
    TERN_REQUIRE_WEBGPU();
    const std::string path  = synth_model("i2s", DType::i2_s, DType::f16);
    const GgufFile    file  = GgufFile::open(path);
    const Tokenizer   tok   = Tokenizer::from_gguf(file);
    auto              cpu   = make_cpu_backend({2});
    auto              m_cpu = BitnetModel::load(file, *cpu);
    auto              m_gpu = BitnetModel::load(file, *test::shared_webgpu().backend);
    struct Setting {
        int32_t top_k;
        float   top_p, min_p, temp;
    };
    for (const Setting st : {Setting{40, 0.95f, 0.05f, 0.8f}, Setting{0, 0.9f, 0.05f, 1.0f}, Setting{0, 1.0f, 0.0f, 1.3f}}) {
        SCOPED_TRACE("top-k " + std::to_string(st.top_k) + ", top-p " + std::to_string(st.top_p));
        SamplerParams sp;
        sp.temp  = st.temp;
        sp.top_k = st.top_k;
        sp.top_p = st.top_p;
        sp.min_p = st.min_p;
        sp.seed  = 11;
        std::vector<int32_t> ids[2];
        BitnetModel *        models[2] = {m_cpu.get(), m_gpu.get()};
        for (int i = 0; i < 2; ++i) {
            SessionOptions so;
            so.n_ctx = 64;
            Session s(*models[i], so);
            Sampler sampler(sp, static_cast<int32_t>(models[i]->config().n_vocab));
            if (i == 1) {
                ASSERT_TRUE(sampler.chain_only() && models[i]->backend().samples_on_device(sampler.chain()));
                s.warm_up(&sampler);
            }
            auto take = [&](int32_t id, const std::string &) {
                if (id >= 0) ids[i].push_back(id);
                return true;
            };
            generate(s, tok, sampler, some_tokens(9, 256), 7, take);
            ids[i].push_back(-1);  // (the turn's end)
            generate(s, tok, sampler, some_tokens(3, 256), 8, take);
        }
        ASSERT_GT(ids[0].size(), 8u);
        EXPECT_EQ(ids[1], ids[0]);
    }
}

// Session::decode_sampled past position 256, where a fresh WebGPU backend's RoPE table (256
// positions at first) grows while a step is recorded ahead: that step cannot be held (part of it
// is submitted early, with the old token, and overwrites the logits), and the session must run the
// current step again. The ids must still be the CPU's, drawn with the same seed one eval at a time;
// for top-k 0 (every logit read back; this case crosses the growth) and top-k 3 (the top-k head's
// rows). (One mis-drawn id is all a missing second run would cause here, which may go unseen:
// WebGpuOps.HeldStepsRunWithTheInputWrittenBeforeTheirRelease checks what a split step does.)
TEST(WebGpuModel, PipelinedSamplingAcrossATableGrowthMatchesCpu) {
    TERN_REQUIRE_WEBGPU();
    WebGpuOptions o;
    o.allow_cpu_adapter        = true;
    o.tune                     = "head_i8_min_bytes=0";
    auto              gpu    = make_webgpu_backend(o);  // its own RoPE tables
    const std::string path   = synth_model("i2s", DType::i2_s, DType::f16);
    const GgufFile    file   = GgufFile::open(path);
    auto              cpu    = make_cpu_backend({2});
    auto              m_cpu  = BitnetModel::load(file, *cpu);
    auto              m_gpu  = BitnetModel::load(file, *gpu);
    // A long prompt (positions 0-239, inside the first table) and 30 sampled steps (240-269): the
    // growth at 256 comes in the middle of the pipelined steps, without ~250 steps of SwiftShader time.
    const auto        prompt = some_tokens(240, 256);
    const size_t      n      = 30;
    for (const int32_t top_k : {0, 3}) {
        SCOPED_TRACE("top-k " + std::to_string(top_k));
        SamplerParams sp;
        sp.temp  = 0.9f;
        sp.top_k = top_k;
        sp.seed  = 8;
        SessionOptions so;
        so.n_ctx = 300;
        std::vector<int32_t> ids[2];
        {
            Session s(*m_cpu, so);
            Sampler sampler(sp, static_cast<int32_t>(m_cpu->config().n_vocab));
            s.eval(prompt);
            while (ids[0].size() < n) {
                const int32_t id = sampler.sample(s.logits());
                sampler.accept(id);
                ids[0].push_back(id);
                if (ids[0].size() < n) s.eval(std::span<const int32_t>(&id, 1));
            }
        }
        {
            Session s(*m_gpu, so);
            Sampler sampler(sp, static_cast<int32_t>(m_gpu->config().n_vocab));
            s.eval(prompt);
            const int64_t drawn = s.decode_sampled(sampler, [&](int32_t id) {
                ids[1].push_back(id);
                return ids[1].size() < n;
            });
            EXPECT_EQ(drawn, static_cast<int64_t>(n));
            EXPECT_EQ(s.n_past(), static_cast<int64_t>(prompt.size() + n - 1));
        }
        EXPECT_EQ(ids[1], ids[0]);
    }
}

TEST(WebGpuModel, SubgroupAndTreeReductionsBothMatchCpu) {
    TERN_REQUIRE_WEBGPU();
    auto * shared = dynamic_cast<WebGpuBackend *>(test::shared_webgpu().backend.get());
    ASSERT_NE(shared, nullptr);
    const std::string desc = shared->device_info().description;
    if (shared->context().features().subgroups) {
        EXPECT_NE(desc.find("reductions: subgroups"), std::string::npos) << desc;
    } else {
        std::printf("[          ] note: no subgroups on this adapter; only the tree reductions are tested\n");
    }
    WebGpuOptions o;
    o.allow_cpu_adapter   = true;
    o.subgroup_reductions = false;
    auto tree = make_webgpu_backend(o);
    EXPECT_NE(tree->device_info().description.find("reductions: barrier tree (off)"), std::string::npos);
    run_both(synth_model("i2s", DType::i2_s, DType::f16), some_tokens(21, 256), {DType::f16, 512, 24}, tree.get());
}

class WebGpuHfParity : public ::testing::TestWithParam<std::string> {};

TEST_P(WebGpuHfParity, LogitsAndGreedyMatchCpu) {
    TERN_REQUIRE_WEBGPU();
    const std::string dir = test::data_path("hf_parity/" + GetParam());
    const auto        ref = nlohmann::json::parse(read_file_text(dir + "/reference.json"));
    ConvertOptions    o;
    o.input_dir   = dir;
    o.output_path = (test::temp_dir("webgpu-parity-" + GetParam()) / "model.gguf").string();
    o.progress    = false;
    convert_hf_checkpoint(o);
    const auto ids = ref["prompts"][0]["ids"].get<std::vector<int32_t>>();
    // 32 greedy steps: from the prompt's 44-51 positions to 76-83, across one query's 64-position
    // mark (two tiles of 32), at half the SwiftShader time of 64 steps (hd128_untied: 73 s).
    {
        SCOPED_TRACE("f32 cache (exact mode)");
        run_both(o.output_path, ids, {DType::f32, 5, 32});
    }
    if (HasFatalFailure()) return;
    SCOPED_TRACE("f16 cache");
    run_both(o.output_path, ids, {DType::f16, 512, 32});
}

INSTANTIATE_TEST_SUITE_P(Models, WebGpuHfParity, ::testing::Values("tiny_tied", "hd128_untied", "online_masters"),
                         [](const auto & param_info) { return std::string(param_info.param); });

}  // namespace
}  // namespace tern
