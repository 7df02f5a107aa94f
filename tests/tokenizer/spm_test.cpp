// SentencePiece-style vocabularies (FORMATS.md §5.7) on ggml-vocab-phi-3.gguf: vocabulary facts,
// space prefix, byte fallback, special tokens with the phi-3 RSTRIP heuristic (§5.3), BOS.
#include "tokenizer_test_util.h"

#include <map>

namespace tern {
namespace {

using Ids = std::vector<int32_t>;

TEST(Phi3, VocabularyFacts) {
    const Tokenizer & tok = *test::phi3_vocab()->tokenizer;
    EXPECT_EQ(tok.kind(), VocabKind::spm);
    EXPECT_EQ(tok.n_vocab(), 32064);
    EXPECT_EQ(tok.bos_id(), 1);
    EXPECT_EQ(tok.eos_id(), 32000);
    EXPECT_EQ(tok.unk_id(), 0);
    EXPECT_EQ(tok.eot_id(), 32007);
    EXPECT_TRUE(tok.add_bos());
    EXPECT_FALSE(tok.add_eos());
    EXPECT_EQ(tok.eog_ids(), (Ids{32000, 32007}));
    EXPECT_EQ(tok.find_token("\xe2\x96\x81"), 29871);
    EXPECT_EQ(tok.find_token("\xe2\x96\x81\xe2\x96\x81"), 259);
    EXPECT_EQ(tok.token_type(2), TokenType::user_defined);  // </s>

    std::map<TokenType, int> counts;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) ++counts[tok.token_type(id)];
    EXPECT_EQ(counts[TokenType::normal], 31741);
    EXPECT_EQ(counts[TokenType::byte], 256);
    EXPECT_EQ(counts[TokenType::unknown], 53);
    EXPECT_EQ(counts[TokenType::control], 13);
    EXPECT_EQ(counts[TokenType::user_defined], 1);
    for (int b = 0; b < 256; ++b) EXPECT_EQ(tok.token_type(3 + b), TokenType::byte);
}

TEST(Phi3, SpacePrefixAndEscaping) {
    const Tokenizer & tok = *test::phi3_vocab()->tokenizer;
    EXPECT_EQ(tok.encode("Hello world", false, false), (Ids{15043, 3186}));
    EXPECT_EQ(tok.encode(" ", false, false), (Ids{259}));           // prefix + the space: "▁▁"
    EXPECT_EQ(tok.encode("\n", false, false), (Ids{29871, 13}));    // "▁" then <0x0A>
    EXPECT_EQ(tok.encode("3", false, false), (Ids{29871, 29941}));
    EXPECT_EQ(tok.encode("", false, false), Ids{});                 // not even the prefix
    EXPECT_EQ(tok.encode("", true, false), (Ids{1}));
    EXPECT_EQ(tok.encode("Hello world", true, false), (Ids{1, 15043, 3186}));
}

TEST(Phi3, ByteFallbackForCharactersOutsideTheVocabulary) {
    const Tokenizer & tok = *test::phi3_vocab()->tokenizer;
    const std::string fraktur_u = "\xf0\x9d\x94\x98";  // U+1D518, not a phi-3 token
    ASSERT_EQ(tok.find_token(fraktur_u), std::nullopt);
    const Ids ids = tok.encode(fraktur_u, false, false);
    // "▁" + the four bytes as <0xF0> <0x9D> <0x94> <0x98> (byte b is id 3 + b).
    EXPECT_EQ(ids, (Ids{29871, 3 + 0xf0, 3 + 0x9d, 3 + 0x94, 3 + 0x98}));
    EXPECT_EQ(tok.decode(ids), fraktur_u);

    // Invalid UTF-8 takes the same path, byte by byte, and does not swallow the valid text after it.
    const Ids bad = tok.encode("\xff" "abc", false, false);
    EXPECT_EQ(tok.decode(bad), "\xff" "abc");
    ASSERT_GE(bad.size(), 3u);
    EXPECT_EQ(bad[0], 29871);     // "▁"
    EXPECT_EQ(bad[1], 3 + 0xff);  // <0xFF>
    for (size_t i = 2; i < bad.size(); ++i) EXPECT_NE(tok.token_type(bad[i]), TokenType::byte);
}

TEST(Phi3, SpecialTokensNeedParseSpecialAndStripFollowingWhitespace) {
    const Tokenizer & tok = *test::phi3_vocab()->tokenizer;
    // <|user|> has RSTRIP (phi-3 heuristic): the "\n" after it disappears, and the following raw
    // text gets the space prefix because it comes after a special token.
    Ids expected{32010};
    for (int32_t id : tok.encode("Hi", false, false)) expected.push_back(id);
    expected.push_back(32007);
    EXPECT_EQ(tok.encode("<|user|>\nHi<|end|>", false, true), expected);

    const Ids plain = tok.encode("<|user|>\nHi<|end|>", false, false);
    for (int32_t id : plain) {
        EXPECT_NE(id, 32010);
        EXPECT_NE(id, 32007);
    }
    EXPECT_EQ(tok.decode(plain), "<|user|>\nHi<|end|>");

    // </s> is USER_DEFINED: matched even without parse_special, printed as its text.
    const Ids with_eos_text = tok.encode("a</s>b", false, false);
    EXPECT_NE(std::find(with_eos_text.begin(), with_eos_text.end(), 2), with_eos_text.end());
    EXPECT_EQ(tok.token_to_piece(2), "</s>");
}

TEST(Phi3, ControlTokensPrintOnlyWhenRendered) {
    const Tokenizer & tok = *test::phi3_vocab()->tokenizer;
    EXPECT_EQ(tok.token_to_piece(32010), "");
    EXPECT_EQ(tok.token_to_piece(32010, true), "<|user|>");
    EXPECT_EQ(tok.token_to_piece(3 + '\n'), "\n");  // BYTE token -> raw byte
    EXPECT_EQ(tok.token_to_piece(15043), " Hello");  // ▁ -> space (no stripping per piece)
    EXPECT_EQ(tok.decode(Ids{1, 15043, 3186}), "Hello world");
    EXPECT_EQ(tok.decode(Ids{1, 15043, 3186}, true), "<s> Hello world");
}

}  // namespace
}  // namespace tern
