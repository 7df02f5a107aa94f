// Backend::decode on the WebGPU backend (webgpu_decode_stream.cpp) against the CPU backend's
// step-by-step stream, with a one-layer "model" whose step is embed -> output_head (the next token
// is the argmax, or a host pick, of head · rms_norm(embedding of the token)): the greedy stream's id
// rings, batches, grouped submits and deferred argmax, and the sampled stream's held steps and top-k
// rows give the CPU's ids, in whatever chunks the caller takes them.
#include "backend/cpu/cpu_backend.h"
#include "backend/webgpu/webgpu_backend_impl.h"
#include "core/fp16.h"
#include "quant/block_formats.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <vector>

namespace tern {
namespace {

constexpr int64_t k_embd = 64, k_vocab = 300;

// The model's weights and buffers on one backend.
struct TinyModel {
    std::unique_ptr<Weight> table, norm;
    OwnedTensor             x, h, logits;

    TinyModel(Backend & b, const std::vector<uint8_t> & table_f16, const std::vector<uint8_t> & norm_f32)
        : table(b.load_embedding({"e", DType::f16, {k_embd, k_vocab, 1, 1}, table_f16})),
          norm(b.load_norm({"n", DType::f32, {k_embd, 1, 1, 1}, norm_f32})),
          x(alloc_tensor(b, DType::f32, {k_embd, 1, 1, 1}, "x")),
          h(alloc_tensor(b, DType::f32, {k_embd, 1, 1, 1}, "h")),
          logits(alloc_tensor(b, DType::f32, {k_vocab, 1, 1, 1}, "logits")) {}

    DecodeRequest request(Backend & b, int32_t first, int64_t n_max) {
        DecodeRequest r;
        r.first  = first;
        r.n_max  = n_max;
        r.logits = logits.tensor;
        r.record = [this, &b](const DecodeStep & s) {
            b.embed(x.tensor, *table, s.token);
            b.output_head(s.head, *table, {x.tensor, norm.get(), 1e-5f, {}, h.tensor}, true);
        };
        return r;
    }
};

// Every id of the stream, taken `chunk` at a time.
std::vector<int32_t> drain(DecodeStream & s, size_t chunk) {
    std::vector<int32_t> all, part(chunk);
    while (const size_t n = s.next(part)) all.insert(all.end(), part.begin(), part.begin() + static_cast<ptrdiff_t>(n));
    return all;
}

class WebGpuDecodeStream : public ::testing::Test {
protected:
    void SetUp() override {
        TERN_REQUIRE_WEBGPU();
        std::mt19937                    rng(11);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float>              t(static_cast<size_t>(k_embd * k_vocab)), n(k_embd);
        for (auto & v : t) v = nd(rng);
        for (auto & v : n) v = 1.0f + 0.1f * nd(rng);
        table_.resize(t.size() * 2);
        quantize_row(DType::f16, t.data(), table_.data(), static_cast<int64_t>(t.size()));
        const auto * nb = reinterpret_cast<const uint8_t *>(n.data());
        norm_.assign(nb, nb + n.size() * sizeof(float));
    }
    Backend & gpu() { return *test::shared_webgpu().backend; }

    std::unique_ptr<Backend> cpu_ = make_cpu_backend({1});
    std::vector<uint8_t>     table_, norm_;
};

TEST_F(WebGpuDecodeStream, GreedyIdsAreTheCpusInEveryBatchingAndChunking) {
    constexpr int64_t n = 17;
    TinyModel         mc(*cpu_, table_, norm_);
    const auto        want = drain(*cpu_->decode(mc.request(*cpu_, 7, n)), 1);
    ASSERT_EQ(want.size(), size_t{n});
    TinyModel m(gpu(), table_, norm_);
    for (const auto & [batch, chunk] : {std::pair{int64_t{1}, size_t{64}}, {int64_t{3}, size_t{5}}, {int64_t{32}, size_t{1}}}) {
        SCOPED_TRACE("batch " + std::to_string(batch) + ", chunk " + std::to_string(chunk));
        DecodeRequest r = m.request(gpu(), 7, n);
        r.batch         = batch;
        auto s          = gpu().decode(r);
        EXPECT_EQ(drain(*s, chunk), want);
        EXPECT_GT(s->host_seconds(), 0.0);
        std::vector<int32_t> more(4);
        EXPECT_EQ(s->next(more), 0u) << "n_max ids were given";
    }
    // A stream dropped after its first ids leaves the backend as it was: the next one starts clean.
    {
        DecodeRequest r = m.request(gpu(), 7, n);
        r.batch         = 4;
        auto                 s = gpu().decode(r);
        std::vector<int32_t> first(3);
        ASSERT_EQ(s->next(first), 3u);
        EXPECT_EQ(first, std::vector<int32_t>(want.begin(), want.begin() + 3));
    }
    EXPECT_EQ(drain(*gpu().decode(m.request(gpu(), 7, n)), 8), want);
}

// A host picker that takes the largest logit it sees (lowest id on ties), from every row or from
// the listed top-k rows: the same ids as the CPU's, with each step held until its token is written.
TEST_F(WebGpuDecodeStream, PickedIdsAreTheCpusWithAndWithoutTopKRows) {
    for (const int64_t top_k : {0, 1}) {
        SCOPED_TRACE("top-k " + std::to_string(top_k));
        std::vector<int32_t> ids[2];
        int64_t              listed[2] = {0, 0};
        Backend *            bs[2]     = {cpu_.get(), &gpu()};
        for (int i = 0; i < 2; ++i) {
            TinyModel     m(*bs[i], table_, norm_);
            DecodeRequest r = m.request(*bs[i], 3, 13);
            r.top_k         = top_k;
            r.pick          = [&](const StepLogits & l) {
                int32_t best = -1;
                float   v    = 0;
                if (!l.rows.empty()) {
                    ++listed[i];
                    for (const LogitRow & row : l.rows) {
                        if (best < 0 || row.logit > v || (row.logit == v && row.id < best)) best = row.id, v = row.logit;
                    }
                } else {
                    best = static_cast<int32_t>(std::max_element(l.all.begin(), l.all.end()) - l.all.begin());
                }
                return best;
            };
            ids[i] = drain(*bs[i]->decode(r), 2);
        }
        ASSERT_EQ(ids[0].size(), 13u);
        EXPECT_EQ(ids[1], ids[0]);
        EXPECT_EQ(listed[0], 0) << "the CPU backend hands over every logit";
        if (top_k > 0 && dynamic_cast<WebGpuBackend &>(gpu()).can_hold_steps()) {
            // (The last step has no held step behind it; reads in between made its list look stale,
            // so its logits are read whole: still the same id.)
            EXPECT_GE(listed[1], 12) << "the WebGPU backend lists the top-k rows";
        }
    }
}

// Sampling on the device (DecodeRequest.sampling): the CPU backend's stream runs the reference chain
// (Backend::sample's default) step by step; the WebGPU stream runs sample.wgsl in its batches, with
// the uniforms drawn in step order. The same seeds give the same ids for every form of the chain
// (logits of this table are far from the chain's 1e-4 margins: a flip would need a tie), in every
// batching, and the uniforms are asked for once per recorded step, in order. (The norm weights are
// scaled down, so that a token's own row does not outweigh every other by tens of nats.) Top-k 5
// is within the table's five 64-row blocks: its head lists the candidates (argmax_exact.wgsl TOP_K)
// and sample.wgsl reads that list instead of the logits.
TEST_F(WebGpuDecodeStream, SampledIdsAreTheCpusForEveryChain) {
    const SamplingChain chains[] = {{0.8f, 40, 0.95f, 0.05f}, {1.3f, 5, 0.97f, 0.0f},  {1.0f, 0, 0.9f, 0.05f},
                                    {1.2f, 0, 0.7f, 0.0f},
                                    {0.9f, 0, 1.0f, 0.0f}, {1.0f, 0, 1.0f, 0.02f}};
    constexpr int64_t   n = 19;
    WebGpuOptions       o;
    o.allow_cpu_adapter = true;
    o.tune              = "sample_scan_fused=0";
    const auto two_phase_backend = make_webgpu_backend(o);
    Backend &  two_phase         = *two_phase_backend;
    std::vector<uint8_t> flat_norm(norm_.size());
    for (size_t i = 0; i < norm_.size(); i += 4) {
        float w;
        std::memcpy(&w, norm_.data() + i, 4);
        w *= 0.04f;
        std::memcpy(flat_norm.data() + i, &w, 4);
    }
    for (const SamplingChain & c : chains) {
        SCOPED_TRACE("top-k " + std::to_string(c.top_k) + ", top-p " + std::to_string(c.top_p) + ", min-p " +
                     std::to_string(c.min_p));
        auto run = [&](Backend & b, int64_t batch, std::vector<float> * asked) {
            TinyModel     m(b, table_, flat_norm);
            DecodeRequest r = m.request(b, 5, n);
            r.batch         = batch;
            r.sampling      = &c;
            std::mt19937 u_rng(77);
            r.uniform = [&] {
                const float u = static_cast<float>(u_rng() >> 8) * 0x1.0p-24f;
                if (asked != nullptr) asked->push_back(u);
                return u;
            };
            return drain(*b.decode(r), 3);
        };
        const auto want = run(*cpu_, 1, nullptr);
        ASSERT_EQ(want.size(), size_t{n});
        EXPECT_GT(std::set<int32_t>(want.begin(), want.end()).size(), 3u) << "the draws are not all the argmax";
        for (const int64_t batch : {1, 4, 32}) {
            SCOPED_TRACE("batch " + std::to_string(batch));
            std::vector<float> asked;
            EXPECT_EQ(run(gpu(), batch, &asked), want);
            EXPECT_GE(asked.size(), size_t{n});
            // (top-k off, top-p on) sample_scan.wgsl's PHASE 2, the maximum from the head's chunk winners, is
            // the default; PHASE 0 + 1 here. The other chains do not scan (webgpu_sample.cpp): for them
            // sample_scan_fused=0 runs the same kernels as the default, and is not run again.
            if (c.top_k == 0 && c.top_p < 1.0f) EXPECT_EQ(run(two_phase, batch, nullptr), want) << "sample_scan_fused=0";
        }
    }
}

}  // namespace
}  // namespace tern
