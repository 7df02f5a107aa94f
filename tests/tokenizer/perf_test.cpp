// Load and encode speed on the Llama-3 vocabulary (128256 tokens, 280147 merges): building the
// tokenizer must take well under a second, and neither a long run of one letter (one huge word for
// the merge heap) nor a long whitespace run (regex backtracking) may go quadratic.
#include "tokenizer_test_util.h"

#include <chrono>

namespace tern {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double k_slowdown = 10.0;  // sanitizer builds only check correctness
#else
constexpr double k_slowdown = 1.0;
#endif

template <typename Fn>
double seconds(Fn && fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(TokenizerPerf, Llama3LoadsWellUnderASecond) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    double best = 1e9;
    for (int i = 0; i < 3; ++i) {
        best = std::min(best, seconds([&] { (void)Tokenizer::from_gguf(*v->file); }));
    }
    std::printf("[   INFO   ] Llama-3 Tokenizer::from_gguf: %.0f ms\n", best * 1e3);
    EXPECT_LT(best, 1.0 * k_slowdown);
}

TEST(TokenizerPerf, EncodeThroughput) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    std::string text;
    for (const auto & c : test::load_golden("ggml-vocab-llama-bpe.gguf")) text += c.text + "\n";
    std::string big;
    while (big.size() < (1u << 20)) big += text;

    size_t       n_tokens = 0;
    const double t        = seconds([&] { n_tokens = v->tokenizer->encode(big, false, false).size(); });
    std::printf("[   INFO   ] Llama-3 encode: %.1f MB/s (%zu bytes -> %zu tokens in %.0f ms)\n", big.size() / t / 1e6,
                big.size(), n_tokens, t * 1e3);
    EXPECT_LT(t, 5.0 * k_slowdown);

    const Tokenizer & phi = *test::phi3_vocab()->tokenizer;
    const double      tp  = seconds([&] { n_tokens = phi.encode(big, false, false).size(); });
    std::printf("[   INFO   ] phi-3 encode: %.1f MB/s\n", big.size() / tp / 1e6);
    EXPECT_LT(tp, 5.0 * k_slowdown);
}

TEST(TokenizerPerf, PathologicalInputsStayFast) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    const Tokenizer & tok = *v->tokenizer;
    for (const std::string & text : {std::string(200000, 'a'), std::string(200000, ' ') + "x", std::string(200000, '!'),
                                     std::string(100000, '\n') + std::string(100000, ' ')}) {
        std::vector<int32_t> ids;
        const double         t = seconds([&] { ids = tok.encode(text, false, false); });
        EXPECT_LT(t, 2.0 * k_slowdown) << "200 kB of '" << test::escaped(text.substr(0, 1)) << "'";
        EXPECT_EQ(tok.decode(ids), text);
    }
    const Tokenizer & phi = *test::phi3_vocab()->tokenizer;
    const std::string long_word(200000, 'a');
    std::vector<int32_t> ids;
    EXPECT_LT(seconds([&] { ids = phi.encode(long_word, false, false); }), 2.0 * k_slowdown);
    EXPECT_EQ(phi.decode(ids), long_word);
}

}  // namespace
}  // namespace tern
