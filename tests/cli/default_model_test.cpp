// The shipped default model (share/models/tern-32m-en.gguf): `tern run` without -m writes English,
// `tern perplexity` agrees with the PyTorch model within 1% on held-out text (tests/data/default_model,
// NLL recorded by tools/train/train.py) and is far below the unigram baseline, and `tern chat` says
// the model has no chat format.
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/wait.h>

namespace tern {
namespace {

struct Result {
    int         code = -1;
    std::string out, err;
};

Result run_tern(const std::string & args) {
    const auto  dir = test::temp_dir("default-model");
    const auto  out = dir / "out", err = dir / "err";
    // TERN_MODEL unset: the default-model lookup itself is under test.
    const std::string cmd = "env -u TERN_MODEL " + test::binary_path("tern") + " " + args + " </dev/null >" +
                            out.string() + " 2>" + err.string();
    const int status = std::system(cmd.c_str());
    auto      slurp  = [](const std::filesystem::path & p) {
        std::ifstream     in(p);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    };
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

TEST(DefaultModel, RunWithoutModelFlagWritesEnglish) {
    const Result r = run_tern("run -p 'The ship' -n 48 --seed 7 --temp 0.7");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("tern-32m-en"), std::string::npos) << r.err;
    ASSERT_TRUE(r.out.starts_with("The ship")) << r.out;
    static const std::set<std::string> common = {
        "the", "of", "and", "to", "a", "in", "that", "is", "it", "for", "was", "with", "as", "his", "he", "be",
        "by", "on", "not", "this", "are", "have", "we", "all", "but", "which", "from", "at", "or", "had", "our",
        "an", "they", "their", "its", "were", "been", "will", "there", "one", "so", "no", "more", "upon", "i"};
    std::istringstream words(r.out.substr(8));
    std::string        w;
    int                n_words = 0, n_common = 0;
    while (words >> w) {
        std::string lower;
        for (char c : w) {
            if (std::isalpha(static_cast<unsigned char>(c))) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
        if (lower.empty()) continue;
        ++n_words;
        n_common += common.count(lower) > 0;
    }
    EXPECT_GE(n_words, 20) << r.out;
    EXPECT_GE(n_common * 5, n_words) << "fewer than 1 in 5 words are common English words:\n" << r.out;
}

TEST(DefaultModel, PerplexityAgreesWithPyTorchWithinOnePercent) {
    const auto expected = nlohmann::json::parse(std::ifstream(test::data_path("default_model/expected.json")));
    const double unigram = expected["unigram_ppl"].get<double>();
    for (const auto & [name, want] : expected["chunks"].items()) {
        // --score-all with a window longer than the text: every token in one context, as PyTorch scored it.
        const Result r = run_tern("perplexity -c 1024 --score-all --json -f " + test::data_path("default_model/" + name));
        ASSERT_EQ(r.code, 0) << r.err;
        const auto   got       = nlohmann::json::parse(r.out);
        const double ppl_tern  = got["ppl"].get<double>();
        const double ppl_torch = std::exp(want["nll_pytorch_exact"].get<double>());
        EXPECT_EQ(got["n_tokens"].get<int64_t>(), want["n_tokens"].get<int64_t>()) << name;
        EXPECT_NEAR(ppl_tern / ppl_torch, 1.0, 0.01) << name << ": tern " << ppl_tern << ", PyTorch " << ppl_torch;
        EXPECT_LT(ppl_tern * 5, unigram) << name;
    }
}

TEST(DefaultModel, ChatSaysItIsATextContinuationModel) {
    const Result r = run_tern("chat");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("text-continuation"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tern
