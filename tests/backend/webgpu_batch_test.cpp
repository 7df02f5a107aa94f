// The batched forward pass (BitnetModel::forward_batch through BatchEngine, issue 53) on the WebGPU
// backend: sequences that join and leave between steps, prompts fed in chunks while others decode
// (passes of 1 to 20 columns, so both the per-token kernels and the GEMM run), each sequence's
// pages taken from a shared pool in whatever order they come free. Every logit row of every
// sequence is compared with that sequence decoded alone in a CPU Session: bit-identical on a CPU
// adapter (SwiftShader), within webgpu_model_test.cpp's tolerance on a GPU (exp and fma
// contraction differ by ulps there). Skipped without a WebGPU adapter.
#include "backend/cpu/cpu_backend.h"
#include "engine/batch_engine.h"
#include "engine/session.h"
#include "gguf/gguf_reader.h"
#include "model/bitnet_model.h"
#include "synth/synth.h"
#include "test_util.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <thread>

namespace tern {
namespace {

constexpr double k_logit_rel_tol = 1e-4;  // as webgpu_model_test.cpp

std::vector<int32_t> some_tokens(int n, int salt, int64_t n_vocab) {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 37 + salt * 101 + 11) % n_vocab));
    return ids;
}

// One sequence of the test: it opens at step `join`, feeds its prompt in chunks of `chunk`, then
// one token of `next` per step.
struct Stream {
    std::vector<int32_t> prompt, next;
    size_t               chunk = 1;
    int                  join  = 0;
};

// The logits after the prompt and after each `next` token, decoded alone on the CPU.
std::vector<std::vector<float>> alone_on_cpu(const BitnetModel & model, const Stream & s) {
    SessionOptions so;
    so.n_ctx   = static_cast<int64_t>(s.prompt.size() + s.next.size());
    so.n_batch = 8;
    Session                         session(model, so);
    std::vector<std::vector<float>> out;
    session.eval(s.prompt);
    out.emplace_back(session.logits().begin(), session.logits().end());
    for (int32_t id : s.next) {
        session.eval({&id, 1});
        out.emplace_back(session.logits().begin(), session.logits().end());
    }
    return out;
}

TEST(WebGpuBatch, SequencesJoiningAndLeavingMatchEachAloneOnTheCpu) {
    TERN_REQUIRE_WEBGPU();
    Backend &    gpu = *test::shared_webgpu().backend;
    SynthOptions o;
    o.shape       = "tiny";
    o.output_path = (test::temp_dir("webgpu-batch") / "m.gguf").string();
    o.seed        = 3;
    o.progress    = false;
    write_synthetic_model(o);
    const GgufFile file  = GgufFile::open(o.output_path);
    auto           cpu   = make_cpu_backend({2});
    auto           m_cpu = BitnetModel::load(file, *cpu);
    auto           m_gpu = BitnetModel::load(file, gpu);
    const int64_t  nv    = m_cpu->config().n_vocab;

    // Four streams: a long prompt in chunks of 17 (the GEMM), short ones, one joining late and one
    // leaving early so that the last one's pages are the ones it gave back.
    std::vector<Stream> streams = {{some_tokens(40, 1, nv), some_tokens(9, 2, nv), 17, 0},
                                   {some_tokens(5, 3, nv), some_tokens(4, 4, nv), 2, 0},
                                   {some_tokens(1, 5, nv), some_tokens(14, 6, nv), 1, 1},
                                   {some_tokens(23, 7, nv), some_tokens(6, 8, nv), 3, 6}};
    BatchEngineOptions eo;
    eo.n_pages   = 7;  // 112 positions: the late stream needs pages the early leaver gave back
    eo.page_size = 16;
    eo.n_chunk   = 20;
    eo.max_seqs  = 4;
    BatchEngine eng(*m_gpu, eo);

    const size_t                                 n = streams.size();
    std::vector<std::optional<SequenceId>>       seq(n);
    std::vector<bool>                            done(n, false);
    std::vector<size_t>                          fed(n, 0), next_i(n, 0);
    std::vector<std::vector<std::vector<float>>> got(n);
    std::vector<std::vector<float>>              logits(n, std::vector<float>(static_cast<size_t>(nv)));
    for (int step = 0; step < 80; ++step) {
        std::vector<BatchItem> items;
        std::vector<size_t>    who;
        for (size_t i = 0; i < n; ++i) {
            const Stream & s = streams[i];
            if (done[i] || step < s.join) continue;
            if (!seq[i]) {
                seq[i] = eng.open(static_cast<int64_t>(s.prompt.size() + s.next.size()));
                if (!seq[i]) continue;  // waits for pages
            }
            if (fed[i] < s.prompt.size()) {
                const size_t k    = std::min(s.chunk, s.prompt.size() - fed[i]);
                const bool   last = fed[i] + k == s.prompt.size();
                items.push_back({*seq[i], std::span(s.prompt).subspan(fed[i], k),
                                 last ? std::span<float>(logits[i]) : std::span<float>()});
                fed[i] += k;
                if (last) who.push_back(i);
            } else if (next_i[i] < s.next.size()) {
                items.push_back({*seq[i], std::span(s.next).subspan(next_i[i]++, 1), logits[i]});
                who.push_back(i);
            }
        }
        if (items.empty()) break;
        eng.step(items);
        for (size_t i : who) {
            got[i].push_back(logits[i]);
            if (next_i[i] == streams[i].next.size()) {  // finished: leave, pages back to the pool
                eng.close(*seq[i]);
                done[i] = true;
            }
        }
    }
    const bool exact      = test::is_cpu_adapter(gpu);
    int        rows       = 0;
    int        bit_equal  = 0;
    double     worst_rel  = 0;
    for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(done[i]) << "stream " << i << " did not finish";
        const auto want = alone_on_cpu(*m_cpu, streams[i]);
        ASSERT_EQ(got[i].size(), want.size()) << "stream " << i;
        for (size_t k = 0; k < want.size(); ++k) {
            const auto & g = got[i][k];
            const auto & w = want[k];
            ++rows;
            if (std::memcmp(g.data(), w.data(), w.size() * sizeof(float)) == 0) {
                ++bit_equal;
                continue;
            }
            ASSERT_FALSE(exact) << "stream " << i << ", row " << k << ": not the CPU's bits on a CPU adapter";
            double row_max = 1, d = 0;
            for (size_t v = 0; v < w.size(); ++v) {
                row_max = std::max(row_max, static_cast<double>(std::fabs(w[v])));
                d       = std::max(d, static_cast<double>(std::fabs(g[v] - w[v])));
            }
            worst_rel = std::max(worst_rel, d / row_max);
            ASSERT_LE(d / row_max, k_logit_rel_tol) << "stream " << i << ", row " << k;
        }
    }
    std::printf("[          ] %d logit rows, %d bit-identical to the CPU alone, worst |d|/max|row| = %.3g\n", rows,
                bit_equal, worst_rel);
    EXPECT_EQ(eng.pool().n_used(), 0);
}

// A sequence that started in an empty pool decodes through a Session over a view of its pages
// (BatchEngine::contiguous_view, the server's lone-request path: the device runs steps ahead),
// stops early (the steps run ahead wrote rows past its end), then goes on in batched steps: every
// id is the CPU's greedy choice decoding it alone. A sequence whose pages interleave with
// another's has no such view.
TEST(WebGpuBatch, ALoneSequenceDecodesThroughAViewOfItsPages) {
    TERN_REQUIRE_WEBGPU();
    Backend &    gpu = *test::shared_webgpu().backend;
    SynthOptions o;
    o.shape       = "tiny";
    o.output_path = (test::temp_dir("webgpu-batch-view") / "m.gguf").string();
    o.seed        = 9;
    o.progress    = false;
    write_synthetic_model(o);
    const GgufFile file  = GgufFile::open(o.output_path);
    auto           cpu   = make_cpu_backend({2});
    auto           m_cpu = BitnetModel::load(file, *cpu);
    auto           m_gpu = BitnetModel::load(file, gpu);
    const int64_t  nv    = m_cpu->config().n_vocab;
    BatchEngineOptions eo;
    eo.n_pages   = 6;
    eo.page_size = 16;
    eo.n_chunk   = 32;
    eo.max_seqs  = 2;
    {  // interleaved pages: no view
        BatchEngine          eng(*m_gpu, eo);
        const SequenceId     p = *eng.open(32), q = *eng.open(16);
        const int32_t        t = 1;
        int32_t              id = -1;
        eng.step(std::vector<BatchItem>{{p, {&t, 1}, {}, &id}});
        eng.step(std::vector<BatchItem>{{q, {&t, 1}, {}, &id}});
        EXPECT_FALSE(eng.contiguous_view(p).has_value()) << "pages 0 and 2 are not a run";
        eng.close(p);
        eng.close(q);
    }
    const std::vector<int32_t> prompt = some_tokens(10, 3, nv);
    const int64_t              n_alone = 8, n_after = 3;
    // The CPU alone: greedy ids after the prompt.
    std::vector<int32_t> want;
    {
        SessionOptions so;
        so.n_ctx = 40;
        Session s(*m_cpu, so);
        s.eval(prompt);
        for (int64_t i = 0; i < 1 + n_alone + n_after; ++i) {
            const auto    l  = s.logits();
            const int32_t id = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
            want.push_back(id);
            s.eval({&id, 1});
        }
    }
    BatchEngine          eng(*m_gpu, eo);
    const SequenceId     a = *eng.open(40);
    std::vector<int32_t> got(1, -1);
    eng.step(std::vector<BatchItem>{{a, prompt, {}, &got[0]}});
    std::optional<KvCache> view = eng.contiguous_view(a);
    ASSERT_TRUE(view.has_value()) << "a sequence alone in the pool has consecutive pages";
    EXPECT_EQ(view->n_ctx, 48);  // its 3 pages
    {
        SessionOptions so;
        so.n_batch = 1;
        Session alone(*m_gpu, so, std::move(*view), eng.n_past(a));
        alone.decode_greedy(got[0], 40, [&](int32_t id) {
            got.push_back(id);
            return static_cast<int64_t>(got.size()) < 1 + n_alone;
        }, 4);
        ASSERT_EQ(alone.n_past(), static_cast<int64_t>(prompt.size()) + n_alone);
        eng.mark_fed(a, n_alone);
    }
    for (int64_t i = 0; i < n_after; ++i) {
        const int32_t last = got.back();
        int32_t       id   = -1;
        eng.step(std::vector<BatchItem>{{a, {&last, 1}, {}, &id}});
        got.push_back(id);
    }
    EXPECT_EQ(got, want);
    eng.close(a);
    EXPECT_EQ(eng.pool().n_used(), 0);
}

// Steps whose items read only the top k logits (BatchItem::top_k, a top-k sampler's), decoding
// three sequences together: each logit is the one of that sequence decoded alone on the CPU or
// -inf, and -inf only for rows below the k-th largest; a greedy item in the same steps still gets
// the exact argmax. (The test backend takes the int8 head at any size, so the batched top-k head runs.)
// Three times: the items take the logits, then the rows the device lists (BatchItem::top_rows): the
// same rows with the same bits as the logits left finite, each once, and the greedy item's argmax
// taken from its list; then those rows again, each step launched and collected with its lists left
// to BatchEngine::unpack, which threads of their own run per sequence (as tern serve's sampling
// threads do).
TEST(WebGpuBatch, TopKItemsGetEveryRowThatCanBeInTheirTopK) {
    TERN_REQUIRE_WEBGPU();
    Backend &    gpu = *test::shared_webgpu().backend;
    SynthOptions o;
    o.shape       = "tiny";
    o.output_path = (test::temp_dir("webgpu-batch-topk") / "m.gguf").string();
    o.seed        = 5;
    o.progress    = false;
    write_synthetic_model(o);
    const GgufFile file  = GgufFile::open(o.output_path);
    auto           cpu   = make_cpu_backend({2});
    auto           m_cpu = BitnetModel::load(file, *cpu);
    auto           m_gpu = BitnetModel::load(file, gpu);
    const int64_t  nv    = m_cpu->config().n_vocab;
    // k = 1: the head's threshold is the k-th largest of its row blocks' bounds, and the tiny
    // model's 512 rows make two blocks (with k >= 2 every row would be exact).
    const int64_t  top_k = 1;
    const std::vector<Stream> streams = {{some_tokens(6, 1, nv), some_tokens(5, 2, nv), 6, 0},
                                         {some_tokens(3, 3, nv), some_tokens(5, 4, nv), 3, 0},
                                         {some_tokens(9, 5, nv), some_tokens(5, 6, nv), 9, 0}};
    std::vector<std::vector<std::vector<float>>> want;
    for (const Stream & s : streams) want.push_back(alone_on_cpu(*m_cpu, s));
    std::vector<std::vector<std::vector<float>>> got_logits;  // the first run's, for the second
    for (const int mode : {0, 1, 2}) {
        const bool lists = mode > 0, deferred = mode == 2;
        SCOPED_TRACE(deferred ? "rows listed, unpacked by threads" : lists ? "rows listed" : "logits");
        BatchEngineOptions eo;
        eo.n_pages   = 6;
        eo.page_size = 16;
        eo.n_chunk   = 32;
        eo.max_seqs  = 3;
        BatchEngine eng(*m_gpu, eo);
        std::vector<SequenceId> seq;
        for (const Stream & s : streams) seq.push_back(*eng.open(static_cast<int64_t>(s.prompt.size() + s.next.size())));
        std::vector<std::vector<float>>     logits(2, std::vector<float>(static_cast<size_t>(nv)));
        std::vector<std::vector<Candidate>> rows(2);
        int32_t                             greedy = -1;
        std::vector<std::vector<std::vector<float>>> got(2);
        std::vector<int32_t>                         got_ids;
        for (size_t step = 0; step <= streams[0].next.size(); ++step) {
            std::vector<BatchItem> items;
            for (size_t i = 0; i < streams.size(); ++i) {
                const Stream & s  = streams[i];
                auto           tk = step == 0 ? std::span(s.prompt) : std::span(s.next).subspan(step - 1, 1);
                if (i < 2) {
                    items.push_back({seq[i], tk, logits[i], nullptr, top_k, lists ? &rows[i] : nullptr});
                } else {
                    items.push_back({seq[i], tk, {}, &greedy});
                }
            }
            std::fill(logits[0].begin(), logits[0].end(), 7.0f);  // (a listed step leaves them alone)
            greedy = -1;
            if (!deferred) {
                eng.step(items);
            } else {
                eng.launch(items);
                eng.collect(BatchEngine::Unpack::deferred);
                ASSERT_TRUE(rows[0].empty() && rows[1].empty() && greedy == -1) << "unpacked before unpack()";
                std::vector<std::thread> threads;
                for (size_t i = streams.size(); i-- > 0;) threads.emplace_back([&, i] { eng.unpack(seq[i]); });
                for (auto & t : threads) t.join();
            }
            for (size_t i = 0; i < 2; ++i) {
                if (!lists) {
                    got[i].push_back(logits[i]);
                    continue;
                }
                ASSERT_FALSE(rows[i].empty()) << "stream " << i << ", step " << step << ": the device listed no rows";
                EXPECT_EQ(logits[0][0], 7.0f) << "the logits were written as well";
                std::vector<float> from_rows(static_cast<size_t>(nv), -std::numeric_limits<float>::infinity());
                for (const Candidate & c : rows[i]) {
                    ASSERT_TRUE(c.id >= 0 && c.id < nv) << c.id;
                    ASSERT_EQ(from_rows[static_cast<size_t>(c.id)], -std::numeric_limits<float>::infinity())
                        << "row " << c.id << " listed twice";
                    from_rows[static_cast<size_t>(c.id)] = c.logit;
                }
                const auto & before = got_logits[i][step];
                ASSERT_EQ(std::memcmp(from_rows.data(), before.data(), before.size() * 4), 0)
                    << "stream " << i << ", step " << step << ": the rows are not the finite logits";
                got[i].push_back(from_rows);
            }
            got_ids.push_back(greedy);
        }
        if (!lists) got_logits = got;
        if (deferred) {
            EXPECT_EQ(eng.timing().full_logit_reads, 0) << "a list overflowed: the test did not defer";
        }
        int64_t n_inf = 0;
        for (size_t i = 0; i < streams.size(); ++i) {
            for (size_t k = 0; k < want[i].size(); ++k) {
                const auto & w = want[i][k];
                if (i == 2) {
                    EXPECT_EQ(got_ids[k], static_cast<int32_t>(std::max_element(w.begin(), w.end()) - w.begin()))
                        << "greedy stream, step " << k;
                    continue;
                }
                const auto &       g = got[i][k];
                std::vector<float> sorted(w);
                std::sort(sorted.begin(), sorted.end(), std::greater<>());
                const float kth   = sorted[static_cast<size_t>(top_k - 1)];
                const bool  exact = test::is_cpu_adapter(gpu);
                for (int64_t v = 0; v < nv; ++v) {
                    const float gv = g[static_cast<size_t>(v)], wv = w[static_cast<size_t>(v)];
                    if (gv == -std::numeric_limits<float>::infinity()) {
                        ++n_inf;
                        ASSERT_LT(wv, kth) << "stream " << i << ", step " << k << ", row " << v;
                    } else if (exact) {
                        ASSERT_EQ(std::memcmp(&gv, &wv, 4), 0) << "stream " << i << ", step " << k << ", row " << v;
                    } else {
                        ASSERT_NEAR(gv, wv, k_logit_rel_tol * std::max(1.0f, std::fabs(sorted[0])));
                    }
                }
            }
        }
        EXPECT_GT(n_inf, 0) << "no row came back -inf: did the batched top-k head run?";
        for (SequenceId id : seq) eng.close(id);
    }
}

}  // namespace
}  // namespace tern
