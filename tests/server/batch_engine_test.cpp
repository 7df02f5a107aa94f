// The paged KV pool and BatchEngine: pages come and go exactly, and sequences stepped together (any
// mix of prompt chunks and single tokens, at different positions) give bit for bit the logits each
// gives alone in a Session. This is the contract the batched forward pass of issue 53 must keep.
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "engine/batch_engine.h"
#include "engine/session.h"
#include "gguf/gguf_reader.h"
#include "synth/synth.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace tern {
namespace {

struct TinyModel {
    std::unique_ptr<GgufFile>    file;
    std::unique_ptr<Backend>     backend;
    std::unique_ptr<BitnetModel> model;
};

const TinyModel & tiny() {
    static TinyModel m = [] {
        const auto   dir = test::temp_dir("batch-engine");
        SynthOptions o;
        o.shape       = "tiny";
        o.output_path = (dir / "m.gguf").string();
        o.seed        = 11;
        o.progress    = false;
        write_synthetic_model(o);
        TinyModel t;
        t.file    = std::make_unique<GgufFile>(GgufFile::open(o.output_path));
        t.backend = make_cpu_backend({2});
        t.model   = BitnetModel::load(*t.file, *t.backend);
        return t;
    }();
    return m;
}

std::vector<int32_t> tokens(int n, int salt, int n_vocab) {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back((i * 31 + salt * 17 + 3) % n_vocab);
    return ids;
}

TEST(KvPagePool, ReservationsAreCountsAndPagesComeAsTablesGrow) {
    const TinyModel & t = tiny();
    KvPagePool        pool(*t.backend, t.model->config(), 8, 16, DType::f16, DType::f16);
    EXPECT_EQ(pool.n_free(), 8);
    auto a = pool.reserve(33);  // 3 pages reserved, none taken yet
    auto b = pool.reserve(16);  // 1 page
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->reserved, 3);
    EXPECT_TRUE(a->pages.empty());
    EXPECT_EQ(pool.n_used(), 0);
    EXPECT_EQ(pool.n_unreserved(), 4);
    EXPECT_FALSE(pool.reserve(5 * 16).has_value());  // 4 unreserved, not 5
    // Pages come one at a time as positions fill, in any order the pool likes; interleaved growth
    // gives interleaved pages (a table is not a run).
    pool.grow(*a, 1);
    pool.grow(*b, 16);
    pool.grow(*a, 20);
    EXPECT_EQ(a->pages, (std::vector<int32_t>{0, 2}));
    EXPECT_EQ(b->pages, (std::vector<int32_t>{1}));
    EXPECT_EQ(pool.n_used(), 3);
    pool.grow(*a, 20);  // already covered
    EXPECT_EQ(pool.n_used(), 3);
    pool.release(*a);
    EXPECT_TRUE(a->pages.empty());
    EXPECT_EQ(pool.n_free(), 7);
    EXPECT_EQ(pool.n_unreserved(), 7);
    // Fragmentation does not matter: 7 pages reserved and taken around b's page.
    auto c = pool.reserve(7 * 16);
    ASSERT_TRUE(c);
    pool.grow(*c, 7 * 16);
    EXPECT_EQ(c->pages.size(), 7u);
    EXPECT_EQ(pool.n_free(), 0);
    EXPECT_FALSE(pool.reserve(1).has_value());
    for (auto * table : {&*b, &*c}) pool.release(*table);
    EXPECT_EQ(pool.n_free(), 8);
    EXPECT_EQ(pool.n_unreserved(), 8);
    EXPECT_EQ(pool.cache().n_ctx, 8 * 16);
}

TEST(KvPagePool, RejectsBadSizesAndTypes) {
    const TinyModel & t = tiny();
    EXPECT_THROW(KvPagePool(*t.backend, t.model->config(), 0, 16, DType::f16, DType::f16), Error);
    EXPECT_THROW(KvPagePool(*t.backend, t.model->config(), 4, 24, DType::f16, DType::f16), Error);
    EXPECT_THROW(KvPagePool(*t.backend, t.model->config(), 4, 16, DType::q8_0, DType::f16), Error);
}

// Logits after each token of `ids` fed to a Session alone, one token at a time after the prompt.
std::vector<std::vector<float>> alone(const std::vector<int32_t> & prompt, const std::vector<int32_t> & next) {
    const TinyModel & t = tiny();
    SessionOptions    so;
    so.n_ctx   = 64;
    so.n_batch = 7;
    Session s(*t.model, so);
    std::vector<std::vector<float>> out;
    s.eval(prompt);
    out.emplace_back(s.logits().begin(), s.logits().end());
    for (int32_t id : next) {
        s.eval({&id, 1});
        out.emplace_back(s.logits().begin(), s.logits().end());
    }
    return out;
}

TEST(BatchEngine, SequencesSteppedTogetherGiveWhatEachGivesAlone) {
    const TinyModel & t  = tiny();
    const int64_t     nv = t.model->config().n_vocab;
    // Three sequences of different prompt lengths; prompts go in chunks of different sizes while
    // the others decode, as the server's scheduler does.
    const std::vector<std::vector<int32_t>> prompts = {tokens(5, 1, nv), tokens(19, 2, nv), tokens(1, 3, nv)};
    const std::vector<std::vector<int32_t>> nexts   = {tokens(9, 4, nv), tokens(6, 5, nv), tokens(12, 6, nv)};
    BatchEngineOptions o;
    o.n_pages   = 12;
    o.page_size = 16;
    o.n_chunk   = 4;  // prompts longer than 4 tokens are split inside step() as well
    BatchEngine eng(*t.model, o);
    std::vector<SequenceId> seqs;
    for (size_t i = 0; i < prompts.size(); ++i) {
        auto s = eng.open(static_cast<int64_t>(prompts[i].size() + nexts[i].size()));
        ASSERT_TRUE(s);
        seqs.push_back(*s);
    }
    std::vector<std::vector<std::vector<float>>> got(prompts.size());
    std::vector<size_t> fed(prompts.size(), 0), next_i(prompts.size(), 0);
    std::vector<std::vector<float>> logits(prompts.size(), std::vector<float>(static_cast<size_t>(nv)));
    const size_t chunk_of[] = {3, 6, 1};
    for (int step = 0; step < 40; ++step) {
        std::vector<BatchItem> items;
        std::vector<size_t>    who;
        for (size_t i = 0; i < prompts.size(); ++i) {
            if (fed[i] < prompts[i].size()) {
                const size_t n    = std::min(chunk_of[i], prompts[i].size() - fed[i]);
                const bool   last = fed[i] + n == prompts[i].size();
                items.push_back({seqs[i], std::span(prompts[i]).subspan(fed[i], n),
                                 last ? std::span<float>(logits[i]) : std::span<float>()});
                fed[i] += n;
                if (last) who.push_back(i);
            } else if (next_i[i] < nexts[i].size()) {
                items.push_back({seqs[i], std::span(nexts[i]).subspan(next_i[i]++, 1), logits[i]});
                who.push_back(i);
            }
        }
        if (items.empty()) break;
        eng.step(items);
        for (size_t i : who) got[i].push_back(logits[i]);
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
        const auto want = alone(prompts[i], nexts[i]);
        ASSERT_EQ(got[i].size(), want.size()) << "sequence " << i;
        for (size_t k = 0; k < want.size(); ++k) {
            EXPECT_EQ(std::memcmp(got[i][k].data(), want[k].data(), want[k].size() * sizeof(float)), 0)
                << "sequence " << i << ", step " << k << ": batched logits differ from alone";
        }
        EXPECT_EQ(eng.n_past(seqs[i]), static_cast<int64_t>(prompts[i].size() + nexts[i].size()));
    }
    for (SequenceId s : seqs) eng.close(s);
    EXPECT_EQ(eng.pool().n_used(), 0);
    EXPECT_EQ(eng.n_open(), 0);
}

TEST(BatchEngine, RefusesWhatDoesNotFitAndFeedsNothingOnBadInput) {
    const TinyModel & t = tiny();
    BatchEngineOptions o;
    o.n_pages   = 2;
    o.page_size = 16;
    BatchEngine eng(*t.model, o);
    EXPECT_THROW(eng.open(33), Error);  // more than the whole pool
    auto a = eng.open(20);
    ASSERT_TRUE(a);
    EXPECT_EQ(eng.capacity(*a), 32);
    EXPECT_FALSE(eng.open(1).has_value());  // the pool is full until a closes
    const std::vector<int32_t> bad = {1, 2, static_cast<int32_t>(t.model->config().n_vocab)};
    const BatchItem            item{*a, bad, {}};
    EXPECT_THROW(eng.step({&item, 1}), Error);
    EXPECT_EQ(eng.n_past(*a), 0);
    const std::vector<int32_t> too_many(33, 1);
    const BatchItem            long_item{*a, too_many, {}};
    EXPECT_THROW(eng.step({&long_item, 1}), Error);
    eng.close(*a);
    EXPECT_TRUE(eng.open(1).has_value());
}

// launch() + collect() is step() split in two; on a backend whose ops run as they are recorded
// (the CPU) no step can be recorded ahead of its tokens, and record_ahead records nothing. (The
// pipelined steps themselves: tests/backend/webgpu_batch_ahead_test.cpp.) A sequence closed while
// its step was launched is skipped by collect(): its logits are not written.
TEST(BatchEngine, LaunchThenCollectIsAStepAndEagerBackendsDoNotRecordAhead) {
    const TinyModel & t  = tiny();
    const int64_t     nv = t.model->config().n_vocab;
    const auto        p0 = tokens(7, 1, nv), p1 = tokens(3, 2, nv), n0 = tokens(5, 3, nv);
    BatchEngineOptions o;
    o.n_pages   = 4;
    o.page_size = 16;
    BatchEngine eng(*t.model, o);
    const SequenceId a = *eng.open(16), b = *eng.open(16);
    std::vector<float> la(static_cast<size_t>(nv)), lb(static_cast<size_t>(nv), -7.0f);
    std::vector<std::vector<float>> got;
    const BatchItem prompts[] = {{a, p0, la}, {b, p1, lb}};
    eng.launch(prompts);
    EXPECT_TRUE(eng.launched());
    const BatchItem ahead[] = {{a, {&n0[0], 1}, la}, {b, {&n0[0], 1}, lb}};
    EXPECT_FALSE(eng.record_ahead(ahead));
    EXPECT_FALSE(eng.ahead());
    eng.collect();
    EXPECT_FALSE(eng.launched());
    got.push_back(la);
    for (size_t k = 0; k < n0.size(); ++k) {
        const BatchItem items[] = {{a, {&n0[k], 1}, la}, {b, {&n0[k], 1}, lb}};
        eng.launch(items);
        if (k + 1 == n0.size()) {
            std::fill(lb.begin(), lb.end(), -7.0f);
            eng.close(b);  // (its logits must stay as they are)
        }
        eng.collect();
        got.push_back(la);
    }
    EXPECT_TRUE(std::all_of(lb.begin(), lb.end(), [](float v) { return v == -7.0f; }));
    const auto want = alone(p0, n0);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
        EXPECT_EQ(std::memcmp(got[k].data(), want[k].data(), want[k].size() * sizeof(float)), 0) << "row " << k;
    }
    EXPECT_EQ(eng.n_past(a), static_cast<int64_t>(p0.size() + n0.size()));
    eng.close(a);
    EXPECT_EQ(eng.pool().n_used(), 0);
}

}  // namespace
}  // namespace tern
