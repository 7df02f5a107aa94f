// How loading and encoding scale, without a speed target (targets live in bench/tokenizer_bench.cpp):
// building the Llama-3 tokenizer (128256 tokens, 280147 merges) makes a few allocations per entry,
// and its cost, encoding and the pathological inputs (a long run of one letter: one huge word for
// the merge heap; long whitespace runs: regex backtracking) grow linearly with the input, checked
// as the ratio of this thread's CPU time on inputs 8 times apart (a quadratic step gives 64).
#include "alloc_counter.h"
#include "tokenizer_test_util.h"

#include <time.h>

#include <algorithm>
#include <functional>
#include <unordered_set>

namespace tern {
namespace {

// CPU seconds this thread spends in fn (other processes on a shared machine do not count), the
// least of three runs.
double cpu_seconds(const std::function<void()> & fn) {
    double best = 1e30;
    for (int i = 0; i < 3; ++i) {
        timespec t0{}, t1{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        fn();
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
        best = std::min(best, static_cast<double>(t1.tv_sec - t0.tv_sec) + 1e-9 * static_cast<double>(t1.tv_nsec - t0.tv_nsec));
    }
    return best;
}

// How much more the work on the big input costs than on the small one, relative to how much
// bigger it is: ~1 for linear work (a little above for n log n and caches), `size_ratio` for
// quadratic work. 3 leaves room for noise and caches and still catches quadratic growth at 8x.
constexpr double k_max_excess = 3.0;

::testing::AssertionResult grows_linearly(const char * what, double size_ratio, const std::function<void()> & small,
                                          const std::function<void()> & big) {
    const double t_small = cpu_seconds(small);
    const double t_big   = cpu_seconds(big);
    const double excess  = t_big / std::max(t_small, 1e-9) / size_ratio;
    std::printf("[   INFO   ] %s: %.2f ms -> %.2f ms for %.1fx the input (%.2fx linear)\n", what, t_small * 1e3,
                t_big * 1e3, size_ratio, excess);
    if (excess <= k_max_excess) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << ": " << size_ratio << "x the input took " << t_big / t_small
                                         << "x the CPU time (" << t_small * 1e3 << " ms -> " << t_big * 1e3
                                         << " ms), more than " << k_max_excess << "x linear growth";
}

TEST(TokenizerPerf, GrowthCheckCatchesQuadraticWork) {
    // The check itself must be able to fail: pairwise work over n items, then 8n.
    auto pairwise = [](size_t n) {
        volatile uint64_t sink = 0;
        for (size_t i = 0; i < n; ++i) {
            for (size_t j = 0; j < n; ++j) sink = sink + (i ^ j);
        }
    };
    auto linear = [](size_t n) {
        volatile uint64_t sink = 0;
        for (size_t i = 0; i < 64 * n; ++i) sink = sink + i;
    };
    EXPECT_FALSE(grows_linearly("pairwise", 8.0, [&] { pairwise(1000); }, [&] { pairwise(8000); }));
    EXPECT_TRUE(grows_linearly("linear", 8.0, [&] { linear(50000); }, [&] { linear(400000); }));
}

TEST(TokenizerPerf, Llama3LoadMakesAFewAllocationsPerEntry) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    const size_t entries    = v->meta.tokens.size() + v->meta.merges.size();
    size_t       text_bytes = 0;
    for (const auto & t : v->meta.tokens) text_bytes += t.size();
    for (const auto & m : v->meta.merges) text_bytes += m.size();

    const test::AllocTally a = test::count_allocations([&] { (void)Tokenizer::from_gguf(*v->file); });
    std::printf("[   INFO   ] Llama-3 Tokenizer::from_gguf: %zu allocations (%.2f per entry), %.1f MB asked for "
                "(%zu entries, %.1f MB of text)\n",
                a.calls, static_cast<double>(a.calls) / static_cast<double>(entries), static_cast<double>(a.bytes) / 1e6,
                entries, static_cast<double>(text_bytes) / 1e6);
    // A token's text, its hash-map node, a merge's node, with container growth on top: a copy or a
    // temporary string per merge, or a table rebuilt per entry, shows here long before it shows in time.
    EXPECT_LT(a.calls, 3 * entries);
    EXPECT_LT(a.bytes, 12 * text_bytes);  // 7x when written
}

// The Llama-3 vocabulary cut to its first n_tokens ids and the merges among them (ids are in merge
// order: about n_tokens - 256 merges have their parts and their result among the kept tokens).
std::unique_ptr<GgufFile> llama3_prefix(const TokenizerMetadata & full, size_t n_tokens, size_t & entries) {
    TokenizerMetadata meta = full;
    meta.tokens.resize(n_tokens);
    meta.token_types.resize(n_tokens);
    const std::unordered_set<std::string> kept(meta.tokens.begin(), meta.tokens.end());
    meta.merges.clear();
    for (const auto & m : full.merges) {
        const size_t sep = m.find(' ', 1);
        const std::string left = m.substr(0, sep), right = m.substr(sep + 1);
        if (kept.count(left) && kept.count(right) && kept.count(left + right)) meta.merges.push_back(m);
    }
    for (auto * id : {&meta.bos_id, &meta.eos_id, &meta.eot_id, &meta.pad_id, &meta.unk_id}) {
        if (*id && static_cast<size_t>(**id) >= n_tokens) id->reset();
    }
    meta.chat_template.clear();
    meta.pre = "llama-bpe";
    entries  = meta.tokens.size() + meta.merges.size();
    return test::gguf_from_metadata(meta, "llama3-prefix");
}

TEST(TokenizerPerf, LoadGrowsLinearlyWithTheVocabulary) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    size_t     small_entries = 0, big_entries = 0;
    const auto small = llama3_prefix(v->meta, 16000, small_entries);
    const auto big   = llama3_prefix(v->meta, 128000, big_entries);
    EXPECT_TRUE(grows_linearly("Tokenizer::from_gguf", static_cast<double>(big_entries) / static_cast<double>(small_entries),
                               [&] { (void)Tokenizer::from_gguf(*small); }, [&] { (void)Tokenizer::from_gguf(*big); }));
}

TEST(TokenizerPerf, EncodeGrowsLinearly) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    std::string text;
    for (const auto & c : test::load_golden("ggml-vocab-llama-bpe.gguf")) text += c.text + "\n";
    std::string small;
    while (small.size() < (1u << 17)) small += text;
    std::string big;
    for (int i = 0; i < 8; ++i) big += small;

    for (const auto * vocab : {v, test::phi3_vocab()}) {
        const Tokenizer & tok  = *vocab->tokenizer;
        const char *      name = vocab == v ? "Llama-3 encode" : "phi-3 encode";
        EXPECT_TRUE(grows_linearly(name, 8.0, [&] { (void)tok.encode(small, false, false); },
                                   [&] { (void)tok.encode(big, false, false); }));
    }
}

TEST(TokenizerPerf, PathologicalInputsGrowLinearly) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    const Tokenizer & tok = *v->tokenizer;
    // n bytes of each: one letter (a single word), spaces then a letter, punctuation, newlines then spaces.
    const std::vector<std::pair<const char *, std::function<std::string(size_t)>>> inputs = {
        {"'a' * n", [](size_t n) { return std::string(n, 'a'); }},
        {"' ' * n + 'x'", [](size_t n) { return std::string(n, ' ') + "x"; }},
        {"'!' * n", [](size_t n) { return std::string(n, '!'); }},
        {"'\\n' * n/2 + ' ' * n/2", [](size_t n) { return std::string(n / 2, '\n') + std::string(n / 2, ' '); }},
    };
    for (const auto & [name, make] : inputs) {
        const std::string small = make(25000);
        const std::string big   = make(200000);
        EXPECT_TRUE(grows_linearly(name, 8.0, [&] { (void)tok.encode(small, false, false); },
                                   [&] { (void)tok.encode(big, false, false); }));
        EXPECT_EQ(tok.decode(tok.encode(big, false, false)), big) << name;
    }
    const Tokenizer & phi = *test::phi3_vocab()->tokenizer;
    const std::string small(25000, 'a'), big(200000, 'a');
    EXPECT_TRUE(grows_linearly("phi-3 'a' * n", 8.0, [&] { (void)phi.encode(small, false, false); },
                               [&] { (void)phi.encode(big, false, false); }));
    EXPECT_EQ(phi.decode(phi.encode(big, false, false)), big);
}

}  // namespace
}  // namespace tern
