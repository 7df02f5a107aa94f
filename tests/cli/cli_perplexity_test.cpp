// `tern perplexity` with llama-perplexity's method: windows of -c tokens, each starting with BOS,
// the second half scored; --chunks; the running estimate; and the KL-divergence pair
// (--kl-divergence-base FILE, then --kl-divergence) that compares two runs.
#include "cli_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

namespace tern {
namespace {

using test::has;
using test::RunResult;
using test::tern;
using test::tiny_model;

constexpr int64_t k_n_vocab = 271;  // tern's byte vocabulary

// A text long enough for a few windows of 64 tokens.
std::string long_text_file() {
    static const std::string path = [] {
        std::string text;
        for (int i = 0; i < 12; ++i) {
            text += "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my "
                    "purse, I thought I would sail about a little and see the watery part of the world. ";
        }
        const std::string p = (test::temp_dir("cli-ppl-text") / "moby.txt").string();
        std::ofstream(p) << text;
        return p;
    }();
    return path;
}

double nll_of(const float * row, int32_t target) {
    double max = row[0];
    for (int64_t i = 1; i < k_n_vocab; ++i) max = std::max(max, static_cast<double>(row[i]));
    double sum = 0;
    for (int64_t i = 0; i < k_n_vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - max);
    return std::log(sum) + max - row[target];
}

// The reported NLL is recomputed here from the raw logits and the token ids: window k holds tokens
// k*c .. k*c + c - 1 with the first replaced by BOS, and positions c/2 .. c-2 are scored.
TEST(CliPerplexity, WindowsOfCTokensWithTheSecondHalfScored) {
    const int64_t   c      = 64;
    const auto      logits = test::temp_dir("cli-ppl-win") / "logits.f32";
    const RunResult r = tern({"perplexity", "-m", tiny_model(), "-f", long_text_file(), "-c", std::to_string(c), "--json",
                              "--logits-out", logits.string()});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto    j        = nlohmann::json::parse(r.out);
    const auto    ids      = nlohmann::json::parse(tern({"tokenize", "-m", tiny_model(), "-f", long_text_file(), "--bos"}).out);
    const int64_t n_tokens = static_cast<int64_t>(ids.size());
    const int64_t chunks   = n_tokens / c;
    ASSERT_GE(chunks, 3);
    EXPECT_EQ(j["n_tokens"].get<int64_t>(), n_tokens);
    EXPECT_EQ(j["n_chunks"].get<int64_t>(), chunks);
    EXPECT_EQ(j["n_ctx"].get<int64_t>(), c);
    EXPECT_EQ(j["first_scored"].get<int64_t>(), c / 2);
    EXPECT_EQ(j["n_scored"].get<int64_t>(), chunks * (c - 1 - c / 2));
    EXPECT_EQ(j["chunk_ppl"].size(), static_cast<size_t>(chunks));
    const std::string raw = test::slurp(logits);
    ASSERT_EQ(raw.size(), static_cast<size_t>(chunks * c * k_n_vocab * 4));
    const auto * rows = reinterpret_cast<const float *>(raw.data());
    double       sum  = 0;
    for (int64_t k = 0; k < chunks; ++k) {
        for (int64_t p = c / 2; p + 1 < c; ++p) sum += nll_of(rows + (k * c + p) * k_n_vocab, ids[k * c + p + 1].get<int32_t>());
    }
    EXPECT_NEAR(j["nll"].get<double>(), sum / static_cast<double>(chunks * (c - 1 - c / 2)), 1e-9);
    EXPECT_NEAR(j["ppl"].get<double>(), std::exp(j["nll"].get<double>()), 1e-9 * j["ppl"].get<double>());
    EXPECT_GT(j["ppl_stderr"].get<double>(), 0.0);
    // Each window starts from BOS, so the second window's logits do not depend on the first's tokens:
    // --chunks 1 gives the first window's numbers exactly.
    const auto one = nlohmann::json::parse(
        tern({"perplexity", "-m", tiny_model(), "-f", long_text_file(), "-c", "64", "--chunks", "1", "--json"}).out);
    EXPECT_EQ(one["n_chunks"].get<int64_t>(), 1);
    EXPECT_DOUBLE_EQ(one["ppl"].get<double>(), j["chunk_ppl"][0].get<double>());
}

TEST(CliPerplexity, TextOutputHasTheRunningEstimateAndTheFinalLine) {
    const RunResult r = tern({"perplexity", "-m", tiny_model(), "-f", long_text_file(), "-c", "64"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.out, "[1]") && has(r.out, "[2]")) << r.out;
    EXPECT_TRUE(has(r.out, "Final estimate: PPL = ")) << r.out;
    EXPECT_TRUE(has(r.err, "window")) << r.err;
}

// KL divergence: a run compared with itself gives (up to the base file's 16-bit storage) zero, the
// same top tokens and the same perplexity; a different KV cache type gives a small positive KLD.
TEST(CliPerplexity, KlDivergenceAgainstASavedBase) {
    const auto      dir  = test::temp_dir("cli-kld");
    const auto      base = (dir / "base.kld").string();
    const RunResult make = tern({"perplexity", "-m", tiny_model(), "-f", long_text_file(), "-c", "64", "--json",
                                 "--cache-type-k", "f32", "--cache-type-v", "f32", "--kl-divergence-base", base});
    ASSERT_EQ(make.code, 0) << make.err;
    const double ppl_base = nlohmann::json::parse(make.out)["ppl"].get<double>();

    RunResult same = tern({"perplexity", "-m", tiny_model(), "--kl-divergence-base", base, "--kl-divergence", "--json",
                           "--cache-type-k", "f32", "--cache-type-v", "f32"});
    ASSERT_EQ(same.code, 0) << same.err;
    auto j = nlohmann::json::parse(same.out);
    EXPECT_LT(std::abs(j["kl_divergence"]["kld_mean"].get<double>()), 1e-3);
    EXPECT_GE(j["kl_divergence"]["same_top_p"].get<double>(), 0.99);  // 16-bit storage may tie two close tops
    EXPECT_NEAR(j["kl_divergence"]["ppl_base"].get<double>(), ppl_base, 1e-3 * ppl_base);
    EXPECT_NEAR(j["kl_divergence"]["delta_ppl"].get<double>(), 0.0, 1e-3 * ppl_base);

    const RunResult f16 = tern({"perplexity", "-m", tiny_model(), "--kl-divergence-base", base, "--kl-divergence"});
    ASSERT_EQ(f16.code, 0) << f16.err;
    for (const char * s : {"Mean PPL(Q)", "Mean PPL(base)", "Mean    KLD:", "Maximum KLD:", "Same top p:"}) {
        EXPECT_TRUE(has(f16.out, s)) << s << "\n" << f16.out;
    }
    // -f with a different text, a window that does not match, or no base: errors.
    const auto other = dir / "other.txt";
    std::ofstream(other) << "Something else entirely, and long enough to matter for a window of tokens.";
    EXPECT_EQ(tern({"perplexity", "-m", tiny_model(), "-f", other.string(), "--kl-divergence-base", base, "--kl-divergence"}).code, 2);
    EXPECT_EQ(tern({"perplexity", "-m", tiny_model(), "-c", "32", "--kl-divergence-base", base, "--kl-divergence"}).code, 2);
    EXPECT_EQ(tern({"perplexity", "-m", tiny_model(), "-f", other.string(), "--kl-divergence"}).code, 2);
    std::ofstream(dir / "bad.kld") << "not a base file";
    const RunResult bad = tern({"perplexity", "-m", tiny_model(), "--kl-divergence-base", (dir / "bad.kld").string(), "--kl-divergence"});
    EXPECT_EQ(bad.code, 2);
    EXPECT_TRUE(has(bad.err, "not a KL-divergence base file")) << bad.err;
}

}  // namespace
}  // namespace tern
