// Parity with Hugging Face transformers (tests/data/hf_parity, made by tools/hf_parity): each HF
// checkpoint goes through `tern convert`; tern's tokenizer must give transformers' token ids and
// tern's logits must match transformers' float32 logits:
//   - exact mode (f32 KV cache, no f16 rounding of the head input): see the constants below;
//   - default mode (f16 KV cache, bitnet.cpp numerics): looser aggregate bounds.
#include "backend/cpu/cpu_backend.h"
#include "convert/hf_convert.h"
#include "core/mmap.h"
#include "engine/session.h"
#include "model/bitnet_model.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <string>

namespace tern {
namespace {


class HfParity : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        dir_ = test::data_path("hf_parity/" + GetParam());
        ref_ = nlohmann::json::parse(read_file_text(dir_ + "/reference.json"));
        ConvertOptions o;
        o.input_dir   = dir_;
        o.output_path = (test::temp_dir("parity-" + GetParam()) / "model.gguf").string();
        o.progress    = false;
        convert_hf_checkpoint(o);
        file_      = std::make_unique<GgufFile>(GgufFile::open(o.output_path));
        backend_   = make_cpu_backend({2});
        model_     = BitnetModel::load(*file_, *backend_);
        tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*file_));
    }

    std::vector<float> hf_logits(const nlohmann::json & prompt) const {
        const std::string bytes = read_file_text(dir_ + "/" + prompt["logits_file"].get<std::string>());
        std::vector<float> out(bytes.size() / 4);
        std::memcpy(out.data(), bytes.data(), out.size() * 4);
        return out;
    }

    std::string                  dir_;
    nlohmann::json               ref_;
    std::unique_ptr<GgufFile>    file_;
    std::unique_ptr<Backend>     backend_;
    std::unique_ptr<BitnetModel> model_;
    std::unique_ptr<Tokenizer>   tokenizer_;
};

TEST_P(HfParity, TokenizerMatchesHfTokenizers) {
    for (const auto & c : ref_["tokenizer_cases"]) {
        const auto ids = tokenizer_->encode(c["text"].get<std::string>(), false, false);
        EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << "text: " << c["text"];
    }
    for (const auto & p : ref_["prompts"]) {
        const auto ids = tokenizer_->encode(p["text"].get<std::string>(), true, false);
        EXPECT_EQ(ids, p["ids"].get<std::vector<int32_t>>()) << "prompt with BOS: " << p["text"];
    }
}

// Activation quantization rounds x * 127/max|x| to an integer; where transformers' value sat within
// a few ulps of a .5 boundary (tools/hf_parity records these "ties"), two correct float32
// implementations may round differently, and the one-step change spreads through attention to every
// later position. So: exact agreement is demanded at every position before a prompt's first tie;
// after it, only the aggregate bounds below.
constexpr double k_exact_rel_tol    = 2e-5;  // before the first tie: |dlogit| <= this * max(1, max|logit| of the row)
constexpr double k_after_tie_mean   = 0.25;  // mean |dlogit| after a tie
constexpr double k_after_tie_top1   = 0.85;  // fraction of positions with the same top-1 after a tie

TEST_P(HfParity, ExactModeLogitsAndGreedyMatchTransformers) {
    const int64_t nv = model_->config().n_vocab;
    SessionOptions so;
    so.n_ctx  = 256;
    so.type_k = so.type_v = DType::f32;
    Session s(*model_, so);
    double  worst_strict = 0, sum_after = 0;
    int64_t n_strict = 0, n_after = 0, agree_after = 0, n_after_values = 0;
    for (const auto & p : ref_["prompts"]) {
        const auto   ids       = p["ids"].get<std::vector<int32_t>>();
        const auto   hf        = hf_logits(p);
        const size_t first_tie = p["first_tie"].get<size_t>();
        ASSERT_EQ(hf.size(), ids.size() * static_cast<size_t>(nv));
        std::vector<float> ours(hf.size());
        s.reset();
        s.eval(ids, ours);
        for (size_t pos = 0; pos < ids.size(); ++pos) {
            const float * a    = ours.data() + pos * nv;
            const float * b    = hf.data() + pos * nv;
            double        maxd = 0, row_max = 1;
            for (int64_t v = 0; v < nv; ++v) row_max = std::max(row_max, static_cast<double>(std::fabs(b[v])));
            for (int64_t v = 0; v < nv; ++v) {
                maxd = std::max(maxd, static_cast<double>(std::fabs(a[v] - b[v])));
                if (pos >= first_tie) sum_after += std::fabs(a[v] - b[v]);
            }
            const bool same_top1 = std::max_element(a, a + nv) - a == std::max_element(b, b + nv) - b;
            if (pos < first_tie) {
                ++n_strict;
                worst_strict = std::max(worst_strict, maxd / row_max);
                EXPECT_LE(maxd, k_exact_rel_tol * row_max) << p["text"] << " position " << pos;
                EXPECT_TRUE(same_top1) << p["text"] << " position " << pos;
            } else {
                ++n_after;
                n_after_values += nv;
                agree_after += same_top1;
            }
        }
    }
    if (n_after > 0) {
        EXPECT_LE(sum_after / static_cast<double>(n_after_values), k_after_tie_mean);
        EXPECT_GE(static_cast<double>(agree_after), k_after_tie_top1 * static_cast<double>(n_after));
    }
    // Greedy continuations through the decode path (one token per forward pass, KV cache).
    int64_t greedy_checked = 0;
    for (const auto & g : ref_["greedy"]) {
        const auto ids    = g["ids"].get<std::vector<int32_t>>();
        const auto want   = g["tokens"].get<std::vector<int32_t>>();
        // Token i comes from the logits at position ids.size() - 1 + i.
        const int64_t n_check = std::min<int64_t>(static_cast<int64_t>(want.size()),
                                                  g["first_tie"].get<int64_t>() - static_cast<int64_t>(ids.size()) + 1);
        s.reset();
        Sampler greedy({.temp = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f}, static_cast<int32_t>(nv));
        s.eval(ids);
        for (int64_t i = 0; i < n_check; ++i) {
            const int32_t id = greedy.sample(s.logits());
            ASSERT_EQ(id, want[static_cast<size_t>(i)]) << g["text"] << " greedy token " << i;
            const int32_t next[1] = {id};
            s.eval(next);
            ++greedy_checked;
        }
    }
    std::printf("[ parity ] %s f32 cache: %lld positions before the first tie, max |dlogit| / max|logit| %.3g; %lld after, "
                "mean |dlogit| %.3g, top-1 %lld/%lld; %lld greedy tokens identical\n",
                GetParam().c_str(), static_cast<long long>(n_strict), worst_strict, static_cast<long long>(n_after),
                n_after_values ? sum_after / static_cast<double>(n_after_values) : 0.0,
                static_cast<long long>(agree_after), static_cast<long long>(n_after), static_cast<long long>(greedy_checked));
}

// The default numerics (f16 KV cache and f16-rounded head input, as bitnet.cpp decodes) move logits
// by O(0.1) and flip near-ties (FORMATS.md §4.10); bounds as measured, with margin.
TEST_P(HfParity, DefaultF16CacheStaysClose) {
    const int64_t nv = model_->config().n_vocab;
    SessionOptions so;
    so.n_ctx = 256;
    Session s(*model_, so);
    double  sum = 0;
    int64_t n = 0, agree = 0, positions = 0;
    for (const auto & p : ref_["prompts"]) {
        const auto ids = p["ids"].get<std::vector<int32_t>>();
        const auto hf  = hf_logits(p);
        std::vector<float> ours(hf.size());
        s.reset();
        s.eval(ids, ours);
        for (size_t pos = 0; pos < ids.size(); ++pos) {
            const float * a = ours.data() + pos * nv;
            const float * b = hf.data() + pos * nv;
            for (int64_t v = 0; v < nv; ++v, ++n) sum += std::fabs(a[v] - b[v]);
            agree += std::max_element(a, a + nv) - a == std::max_element(b, b + nv) - b;
            ++positions;
        }
    }
    const double mean = sum / static_cast<double>(n);
    EXPECT_LE(mean, 0.5);
    EXPECT_GE(agree * 100, positions * 85);
    std::printf("[ parity ] %s f16 cache: mean |dlogit| = %.3g, top-1 %lld/%lld\n", GetParam().c_str(), mean,
                static_cast<long long>(agree), static_cast<long long>(positions));
}

INSTANTIATE_TEST_SUITE_P(Models, HfParity, ::testing::Values("tiny_tied", "hd128_untied", "online_masters"),
                         [](const auto & param_info) { return std::string(param_info.param); });

}  // namespace
}  // namespace tern
