// Pipelined batched steps (BatchEngine::record_ahead / release_ahead, the server's steady state) on
// the WebGPU backend: a step recorded while the one before runs, its tokens written after it was
// recorded (each token chosen from the step before's logits, so a stale token would show), gives
// the logits of the same steps run one by one with step(). A sequence that ends after the step
// ahead was recorded with it is closed before that step is collected: its column is discarded,
// and a sequence that then takes its pages (the pool has room for no more) still gets the logits
// it gets in the plain run. Bit-identical on a CPU adapter (SwiftShader), within
// webgpu_model_test.cpp's tolerance on a GPU. Skipped without a WebGPU adapter.
#include "engine/batch_engine.h"
#include "gguf/gguf_reader.h"
#include "model/bitnet_model.h"
#include "synth/synth.h"
#include "test_util.h"
#include "webgpu_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

namespace tern {
namespace {

constexpr double k_logit_rel_tol = 1e-4;  // as webgpu_model_test.cpp

// The token fed after a sequence's k-th row of logits: its argmax (lowest id on ties), shifted by k
// so that the sequences do not settle into a loop.
int32_t next_token(const std::vector<float> & logits, size_t k) {
    const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    return static_cast<int32_t>((best + static_cast<int64_t>(k) * 7) % static_cast<int64_t>(logits.size()));
}

struct Plan {
    std::vector<int32_t> prompt;
    size_t               n_gen = 0;  // tokens fed after the prompt
};

// Runs the plans (0 and 1 from the start; 2 opens once 0 is closed, in its pages) as the server's
// scheduler does, pipelined or with plain steps; returns each plan's logit rows (after its prompt,
// then after each token fed).
std::vector<std::vector<std::vector<float>>> run(const BitnetModel & model, const std::vector<Plan> & plans,
                                                 bool pipelined) {
    const int64_t      nv = model.config().n_vocab;
    BatchEngineOptions eo;
    eo.page_size = 16;
    eo.n_pages   = 4;  // 0 and 1 take two pages each: 2 must wait for 0's
    eo.n_chunk   = 32;
    eo.max_seqs  = 3;
    BatchEngine  eng(model, eo);
    const size_t n = plans.size();
    std::vector<std::optional<SequenceId>>       seq(n);
    std::vector<std::vector<std::vector<float>>> got(n);
    std::vector<std::vector<float>>              logits(n, std::vector<float>(static_cast<size_t>(nv)));
    std::vector<int32_t>                         token(n, 0);
    // (room for one position past the last token fed: the step ahead of a sequence's end feeds it)
    auto capacity = [&](size_t i) { return static_cast<int64_t>(plans[i].prompt.size() + plans[i].n_gen + 1); };
    seq[0] = eng.open(capacity(0));
    seq[1] = eng.open(capacity(1));
    bool                in_flight = false;  // a step released ahead runs
    std::vector<size_t> who;                // the sequences of the step that runs, in item order
    for (int step = 0; step < 64; ++step) {
        if (!in_flight) {
            std::vector<BatchItem> items;
            who.clear();
            for (size_t i = 0; i < n; ++i) {
                if (!seq[i]) continue;
                items.push_back({*seq[i],
                                 got[i].empty() ? std::span<const int32_t>(plans[i].prompt) : std::span(&token[i], 1),
                                 logits[i]});
                who.push_back(i);
            }
            if (items.empty()) break;
            if (pipelined) {
                eng.launch(items);
            } else {
                eng.step(items);
            }
        }
        // Pipelined: the next step recorded while this one runs, unless a sequence waits outside it.
        bool ahead = false;
        if (pipelined) {
            bool all_in = true;  // every open sequence is in this step, and every one of its is open
            for (size_t i = 0; i < n; ++i) {
                all_in = all_in && seq[i].has_value() == (std::find(who.begin(), who.end(), i) != who.end());
            }
            if (all_in) {
                std::vector<BatchItem> next;
                for (size_t i : who) next.push_back({*seq[i], std::span(&token[i], 1), logits[i]});
                ahead = eng.record_ahead(next);
            }
            eng.collect();
        }
        std::vector<int32_t> tokens;
        for (size_t i : who) {
            if (seq[i]) {
                got[i].push_back(logits[i]);
                token[i] = next_token(logits[i], got[i].size());
            }
            tokens.push_back(token[i]);
        }
        if (ahead) eng.release_ahead(tokens);
        in_flight = ahead;
        // A sequence that has fed all its tokens ends (after the step ahead was recorded with it:
        // its column there is discarded); 2 opens in 0's pages.
        for (size_t i : who) {
            if (!seq[i] || got[i].size() != plans[i].n_gen + 1) continue;
            eng.close(*seq[i]);
            seq[i].reset();
            if (i == 0) {
                seq[2] = eng.open(capacity(2));
                EXPECT_TRUE(seq[2].has_value()) << "sequence 2 did not get 0's pages";
            }
        }
    }
    EXPECT_FALSE(eng.launched());
    if (pipelined) {  // (most steps went ahead: all but the prompts' and those after a change)
        EXPECT_GE(eng.timing().passes_ahead, 12);
    }
    EXPECT_EQ(eng.n_open(), 0);
    EXPECT_EQ(eng.pool().n_used(), 0);
    return got;
}

TEST(WebGpuBatchAhead, StepsRecordedAheadGiveThePlainStepsLogits) {
    TERN_REQUIRE_WEBGPU();
    Backend & gpu = *test::shared_webgpu().backend;
    ASSERT_TRUE(gpu.can_hold_steps());
    SynthOptions o;
    o.shape       = "tiny";
    o.output_path = (test::temp_dir("webgpu-batch-ahead") / "m.gguf").string();
    o.seed        = 5;
    o.progress    = false;
    write_synthetic_model(o);
    const GgufFile file  = GgufFile::open(o.output_path);
    auto           model = BitnetModel::load(file, gpu);
    const int64_t  nv    = model->config().n_vocab;
    auto prompt = [&](int len, int salt) {
        std::vector<int32_t> ids;
        for (int i = 0; i < len; ++i) ids.push_back(static_cast<int32_t>((i * 37 + salt * 101 + 11) % nv));
        return ids;
    };
    // 0 ends early (19 positions: two pages), 1 runs on, 2 takes 0's pages.
    const std::vector<Plan> plans = {{prompt(12, 1), 6}, {prompt(5, 2), 14}, {prompt(9, 3), 5}};
    const auto plain = run(*model, plans, false);
    const auto piped = run(*model, plans, true);
    const bool exact = test::is_cpu_adapter(gpu);
    for (size_t i = 0; i < plans.size(); ++i) {
        ASSERT_EQ(piped[i].size(), plain[i].size()) << "sequence " << i;
        ASSERT_EQ(plain[i].size(), plans[i].n_gen + 1) << "sequence " << i;
        for (size_t k = 0; k < plain[i].size(); ++k) {
            const auto & g = piped[i][k];
            const auto & w = plain[i][k];
            if (std::memcmp(g.data(), w.data(), w.size() * sizeof(float)) == 0) continue;
            ASSERT_FALSE(exact) << "sequence " << i << ", row " << k << ": pipelined logits differ from plain steps";
            double row_max = 1, d = 0;
            for (size_t v = 0; v < w.size(); ++v) {
                row_max = std::max(row_max, static_cast<double>(std::fabs(w[v])));
                d       = std::max(d, static_cast<double>(std::fabs(g[v] - w[v])));
            }
            ASSERT_LE(d / row_max, k_logit_rel_tol) << "sequence " << i << ", row " << k;
        }
    }
}

}  // namespace
}  // namespace tern
