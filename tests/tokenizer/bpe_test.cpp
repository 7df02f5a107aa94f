// Byte-level BPE (FORMATS.md §5.4-§5.6): bytes_to_unicode, the pre-tokenizer regexes, merge order on
// tiny vocabularies, and the Llama-3 facts of §5.4, §5.6, §8.1 (ids, ignore_merges, R0 vs R1,
// the missing-pre fallback, special-token parsing, BOS).
#include "tiny_vocab.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer_test_util.h"

#include "core/error.h"
#include "core/log.h"

#include <random>
#include <set>
#include <thread>

namespace tern {
namespace {

using Ids = std::vector<int32_t>;

// ---- bytes_to_unicode -------------------------------------------------------------------------

TEST(ByteUnicode, SpecExamples) {
    EXPECT_EQ(tok::byte_to_code_point(0x20), 0x120u);  // "Ġ"
    EXPECT_EQ(tok::byte_to_code_point(0x0a), 0x10au);  // "Ċ"
    EXPECT_EQ(tok::byte_to_code_point(0x7f), 0x121u);
    EXPECT_EQ(tok::byte_to_code_point(0xad), 0x143u);
    EXPECT_EQ(tok::byte_to_code_point('A'), static_cast<uint32_t>('A'));
    EXPECT_EQ(tok::byte_to_code_point(0xe9), 0xe9u);
    EXPECT_EQ(tok::byte_to_utf8(0x20), "\xc4\xa0");
}

TEST(ByteUnicode, IsABijectionOntoItsImage) {
    std::set<uint32_t> image;
    for (unsigned b = 0; b < 256; ++b) {
        const uint32_t cp = tok::byte_to_code_point(static_cast<uint8_t>(b));
        image.insert(cp);
        EXPECT_EQ(tok::code_point_to_byte(cp), static_cast<int>(b));
    }
    EXPECT_EQ(image.size(), 256u);
    EXPECT_EQ(tok::code_point_to_byte(0x144), -1);
    EXPECT_EQ(tok::code_point_to_byte(0x20), -1);  // space itself is not in the image
}

// ---- pre-tokenizers ---------------------------------------------------------------------------

std::vector<std::string> words(PreTokenizer kind, std::string_view text) {
    tok::PreTokenizerSplitter     splitter(kind);
    std::vector<std::string_view> views;
    splitter.split(text, views);
    return {views.begin(), views.end()};
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, Llama3Splits) {
    EXPECT_EQ(words(PreTokenizer::llama3, "Hello world"), (Words{"Hello", " world"}));
    EXPECT_EQ(words(PreTokenizer::llama3, "3333"), (Words{"333", "3"}));
    EXPECT_EQ(words(PreTokenizer::llama3, "   Hello"), (Words{"  ", " Hello"}));
    EXPECT_EQ(words(PreTokenizer::llama3, "don't I'VE"), (Words{"don", "'t", " I", "'VE"}));
    EXPECT_EQ(words(PreTokenizer::llama3, " (x"), (Words{" (", "x"}));
    EXPECT_EQ(words(PreTokenizer::llama3, "a \n\n b"), (Words{"a", " \n\n", " b"}));
    EXPECT_EQ(words(PreTokenizer::llama3, ""), Words{});
}

TEST(PreTokenizer, Qwen2SplitsDigitsOneByOne) {
    EXPECT_EQ(words(PreTokenizer::qwen2, "x33"), (Words{"x", "3", "3"}));
    EXPECT_EQ(words(PreTokenizer::qwen2, "Hello world"), (Words{"Hello", " world"}));
}

TEST(PreTokenizer, Qwen35KeepsCombiningMarksWithLetters) {
    const std::string e_acute = "e\xcc\x81";  // "e" + U+0301
    EXPECT_EQ(words(PreTokenizer::qwen35, " " + e_acute + "t"), (Words{" " + e_acute + "t"}));
    // R2: the mark is neither letter nor digit, so it starts the next word as its optional prefix.
    EXPECT_EQ(words(PreTokenizer::qwen2, " " + e_acute + "t"), (Words{" e", "\xcc\x81t"}));
}

TEST(PreTokenizer, DefaultChainIsolatesPunctuation) {
    EXPECT_EQ(words(PreTokenizer::default_chain, "don't"), (Words{"don", "'", "t"}));
    EXPECT_EQ(words(PreTokenizer::default_chain, " ("), (Words{" ", "("}));
    EXPECT_EQ(words(PreTokenizer::default_chain, "1234567"), (Words{"123", "456", "7"}));
}

TEST(PreTokenizer, WordsCoverAnyByteStringExactly) {
    std::mt19937 rng(1234);
    const std::vector<std::string> alphabet = {"a", "Z", " ", "  ", "\n", "\r\n", "\t", "3", "'", "'s", "!", "(", "\xc3\xa9",
                                               "\xe4\xb8\xad", "\xf0\x9f\xa6\x99", "\xcc\x81", "\xff", "\x80", "\xe2\x82",
                                               "\xc0\xaf", "\xed\xa0\x80", std::string(1, '\0')};
    for (PreTokenizer kind : {PreTokenizer::llama3, PreTokenizer::qwen2, PreTokenizer::qwen35, PreTokenizer::default_chain}) {
        for (int trial = 0; trial < 200; ++trial) {
            std::string text;
            const int   n = static_cast<int>(rng() % 30);
            for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
            std::string joined;
            for (const auto & w : words(kind, text)) {
                EXPECT_FALSE(w.empty());
                joined += w;
            }
            ASSERT_EQ(joined, text) << pre_tokenizer_name(kind) << ": \"" << test::escaped(text) << "\"";
        }
    }
}

TEST(PreTokenizer, NamesAndAliases) {
    EXPECT_EQ(pre_tokenizer_from_name("llama-bpe"), PreTokenizer::llama3);
    EXPECT_EQ(pre_tokenizer_from_name("llama3"), PreTokenizer::llama3);
    EXPECT_EQ(pre_tokenizer_from_name("falcon3"), PreTokenizer::llama3);
    EXPECT_EQ(pre_tokenizer_from_name("deepseek-r1-qwen"), PreTokenizer::qwen2);
    EXPECT_EQ(pre_tokenizer_from_name("qwen35"), PreTokenizer::qwen35);
    EXPECT_EQ(pre_tokenizer_from_name("default"), PreTokenizer::default_chain);
    EXPECT_EQ(pre_tokenizer_from_name("gpt-2"), std::nullopt);
    for (PreTokenizer p : {PreTokenizer::llama3, PreTokenizer::qwen2, PreTokenizer::qwen35, PreTokenizer::default_chain}) {
        EXPECT_EQ(pre_tokenizer_from_name(pre_tokenizer_name(p)), p);
    }
}

// ---- merge order on tiny vocabularies -----------------------------------------------------------

Tokenizer tiny_tokenizer(const TokenizerMetadata & meta, const TokenizerOptions & options = {}) {
    return Tokenizer::from_gguf(*test::gguf_from_metadata(meta), options);
}

TEST(BpeMerge, LowestRankFirst) {
    // "b c" has the lowest rank, so "abc" becomes a + bc -> abc, never ab + c.
    const auto meta = test::tiny_bpe({"ab", "bc", "abc"}, {"b c", "a b", "a bc"});
    const auto tok  = tiny_tokenizer(meta);
    EXPECT_EQ(tok.encode("abc", false, false), (Ids{test::tiny_id(meta, "abc")}));
    EXPECT_EQ(tok.encode("ab", false, false), (Ids{test::tiny_id(meta, "ab")}));
}

TEST(BpeMerge, RankOrderDecidesTheSplit) {
    // With "a b" ranked first, "abc" stops at ab + c (there is no "ab c" merge).
    const auto meta = test::tiny_bpe({"ab", "bc", "abc"}, {"a b", "b c", "a bc"});
    EXPECT_EQ(tiny_tokenizer(meta).encode("abc", false, false), (Ids{test::tiny_id(meta, "ab"), 'c' - 0}));
}

TEST(BpeMerge, LeftmostPairWinsTies) {
    const auto meta = test::tiny_bpe({"aa"}, {"a a"});
    const auto tok  = tiny_tokenizer(meta);
    const int  aa   = test::tiny_id(meta, "aa");
    EXPECT_EQ(tok.encode("aaa", false, false), (Ids{aa, 'a'}));
    EXPECT_EQ(tok.encode("aaaaa", false, false), (Ids{aa, aa, 'a'}));
}

TEST(BpeMerge, MergedSymbolsMergeAgain) {
    const auto meta = test::tiny_bpe({"ab", "abab"}, {"a b", "ab ab"});
    EXPECT_EQ(tiny_tokenizer(meta).encode("ababab", false, false),
              (Ids{test::tiny_id(meta, "abab"), test::tiny_id(meta, "ab")}));
}

TEST(BpeMerge, IgnoreMergesTakesWholeWordTokens) {
    // "abc" is a token but no merge chain reaches it: only ignore_merges (llama3) emits it whole.
    const auto meta = test::tiny_bpe({"ab", "abc"}, {"a b"});
    EXPECT_EQ(tiny_tokenizer(meta, {PreTokenizer::llama3}).encode("abc", false, false), (Ids{test::tiny_id(meta, "abc")}));
    EXPECT_EQ(tiny_tokenizer(meta, {PreTokenizer::qwen2}).encode("abc", false, false), (Ids{test::tiny_id(meta, "ab"), 'c'}));
}

TEST(BpeMerge, SpacesAreByteEncoded) {
    const std::string g    = "\xc4\xa0";  // "Ġ"
    const auto        meta = test::tiny_bpe({g + "a"}, {g + " a"});
    EXPECT_EQ(tiny_tokenizer(meta).encode("b a", false, false), (Ids{'b', test::tiny_id(meta, g + "a")}));
}

TEST(BpeMerge, NonLlama3VocabularyWithoutPreUsesDefault) {
    auto meta = test::tiny_bpe({}, {});
    meta.pre.clear();
    EXPECT_EQ(tiny_tokenizer(meta).pre_tokenizer(), PreTokenizer::default_chain);
    EXPECT_FALSE(tiny_tokenizer(meta).add_bos());
}

// ---- Llama-3 ------------------------------------------------------------------------------------

#define REQUIRE_LLAMA3(v)                   \
    const auto * v = test::llama3_vocab(); \
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh"

TEST(Llama3, ReferenceIds) {  // FORMATS.md §8.1
    REQUIRE_LLAMA3(v);
    const Tokenizer & tok = *v->tokenizer;
    EXPECT_EQ(tok.encode("hello", false, false), (Ids{15339}));
    EXPECT_EQ(tok.encode(" hello", false, false), (Ids{24748}));
    EXPECT_EQ(tok.encode("Hello world", false, false), (Ids{9906, 1917}));
    EXPECT_EQ(tok.n_vocab(), 128256);
}

TEST(Llama3, SpecialIdsAndEndOfGeneration) {  // FORMATS.md §5.2, §5.8
    REQUIRE_LLAMA3(v);
    const Tokenizer & tok = *v->tokenizer;
    EXPECT_EQ(tok.bos_id(), 128000);
    EXPECT_EQ(tok.eos_id(), 128001);
    EXPECT_EQ(tok.eot_id(), 128009);
    EXPECT_TRUE(tok.add_bos());
    EXPECT_FALSE(tok.add_eos());
    EXPECT_TRUE(tok.ignore_merges());
    EXPECT_TRUE(tok.is_eog(128001));
    EXPECT_TRUE(tok.is_eog(128009));
    EXPECT_FALSE(tok.is_eog(128008));
    EXPECT_FALSE(tok.is_eog(128000));
    EXPECT_EQ(tok.eog_ids(), (Ids{128001, 128009}));
    EXPECT_EQ(tok.token_type(128009), TokenType::control);
    EXPECT_EQ(tok.token_type(15339), TokenType::normal);
    EXPECT_EQ(tok.find_token("<|eot_id|>"), 128009);
    EXPECT_EQ(tok.find_token("no such token"), std::nullopt);
}

TEST(Llama3, BosOnlyWhenAsked) {
    REQUIRE_LLAMA3(v);
    EXPECT_EQ(v->tokenizer->encode("hello", true, false), (Ids{128000, 15339}));
    EXPECT_EQ(v->tokenizer->encode("hello", false, false), (Ids{15339}));
    EXPECT_EQ(v->tokenizer->encode("", true, false), (Ids{128000}));
    EXPECT_EQ(v->tokenizer->encode("", false, false), Ids{});
}

TEST(Llama3, SpecialTokenTextNeedsParseSpecial) {  // FORMATS.md §5.3
    REQUIRE_LLAMA3(v);
    const Tokenizer & tok = *v->tokenizer;
    EXPECT_EQ(tok.encode("<|eot_id|>", false, true), (Ids{128009}));
    EXPECT_EQ(tok.encode("hello<|eot_id|> hello", false, true), (Ids{15339, 128009, 24748}));

    const Ids plain = tok.encode("<|eot_id|>", false, false);
    EXPECT_GT(plain.size(), 1u);
    for (int32_t id : plain) EXPECT_LT(id, 128000);
    EXPECT_EQ(tok.decode(plain), "<|eot_id|>");

    // Longest candidate first: <|reserved_special_token_10|> is not read as ..._1 followed by "0|>".
    EXPECT_EQ(tok.encode("<|reserved_special_token_10|>", false, true), (Ids{128015}));
}

TEST(Llama3, IgnoreMergesExample) {  // FORMATS.md §5.4
    REQUIRE_LLAMA3(v);
    EXPECT_EQ(v->tokenizer->encode("C\xe1\xbb\xad" "a Vi\xe1\xbb\x87t", false, false), (Ids{34, 91163, 101798}));
    // qwen2 splits this input exactly like llama3 (no digits) but merges every word.
    const Tokenizer merged = Tokenizer::from_gguf(*v->file, {PreTokenizer::qwen2});
    EXPECT_FALSE(merged.ignore_merges());
    EXPECT_EQ(merged.encode("C\xe1\xbb\xad" "a Vi\xe1\xbb\x87t", false, false), (Ids{34, 91163, 11655, 26298, 83}));
}

TEST(Llama3, ForcedDefaultPreTokenizerEmulatesBitnetCpp) {  // FORMATS.md §5.6
    REQUIRE_LLAMA3(v);
    const Tokenizer r0 = Tokenizer::from_gguf(*v->file, {PreTokenizer::default_chain});
    EXPECT_EQ(r0.pre_tokenizer(), PreTokenizer::default_chain);
    EXPECT_FALSE(r0.ignore_merges());
    EXPECT_TRUE(r0.add_bos());  // from the add_bos_token key
    EXPECT_EQ(r0.encode(" (", false, false), (Ids{220, 7}));
    EXPECT_EQ(r0.encode("don't", false, false), (Ids{15357, 6, 83}));
    EXPECT_EQ(r0.encode("I've been", false, false), (Ids{40, 6, 588, 1027}));
    const Tokenizer & r1 = *v->tokenizer;
    EXPECT_EQ(r1.encode(" (", false, false), (Ids{320}));
    EXPECT_EQ(r1.encode("don't", false, false), (Ids{15357, 956}));
    EXPECT_EQ(r1.encode("I've been", false, false), (Ids{40, 3077, 1027}));

    int differ = 0;
    for (const auto & c : test::load_golden("ggml-vocab-llama-bpe.gguf")) {
        differ += r0.encode(c.text, false, false) != c.ids;
    }
    EXPECT_EQ(differ, 7);  // §8.2 "DEFAULT versus llama-bpe"
}

// §5.6: no tokenizer.ggml.pre (or "default") + the Llama-3 vocabulary -> llama-bpe, logged.
TEST(Llama3, MissingPreFallsBackToLlamaBpe) {
    REQUIRE_LLAMA3(v);
    for (const char * pre : {"", "default"}) {
        TokenizerMetadata meta = v->meta;
        meta.pre               = pre;
        meta.add_bos.reset();
        const auto file = test::gguf_from_metadata(meta);

        test::ScopedLogCapture log;
        const Tokenizer        tok = Tokenizer::from_gguf(*file);

        EXPECT_EQ(tok.pre_tokenizer(), PreTokenizer::llama3) << "pre = '" << pre << "'";
        EXPECT_TRUE(tok.ignore_merges());
        EXPECT_TRUE(tok.add_bos());  // the llama3 default when the key is absent
        EXPECT_EQ(tok.encode("don't", false, false), (Ids{15357, 956}));
        EXPECT_TRUE(log.contains(LogLevel::info, "llama-bpe")) << "the fallback must be logged";
    }
}

TEST(Llama3, EncodeIsThreadSafe) {
    REQUIRE_LLAMA3(v);
    const auto cases = test::load_golden("ggml-vocab-llama-bpe.gguf");
    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < mismatches.size(); ++t) {
        threads.emplace_back([&, t] {
            for (int round = 0; round < 20; ++round) {
                for (const auto & c : cases) mismatches[t] += v->tokenizer->encode(c.text, false, false) != c.ids;
            }
        });
    }
    for (auto & th : threads) th.join();
    for (int m : mismatches) EXPECT_EQ(m, 0);
}

}  // namespace
}  // namespace tern
