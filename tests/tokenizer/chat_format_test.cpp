// BitNet b1.58 2B4T chat format (FORMATS.md §5.8), with the Llama-3 vocabulary.
#include "core/error.h"
#include "tokenizer/chat_format.h"
#include "tokenizer_test_util.h"

#include <algorithm>

namespace tern {
namespace {

using Ids = std::vector<int32_t>;

#define REQUIRE_LLAMA3(v)                   \
    const auto * v = test::llama3_vocab(); \
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh"

TEST(BitnetChat, BitnetChatIds) {  // the worked example of §5.8
    REQUIRE_LLAMA3(v);
    const Ids ids = bitnet_chat_tokens(*v->tokenizer,
                                       {{"system", "You are a helpful assistant."}, {"user", "Hi"}},
                                       /*add_generation_prompt=*/true);
    EXPECT_EQ(ids, (Ids{128000, 2374, 25, 220, 2675, 527, 264, 11190, 18328, 13, 128009, 1502, 25, 220, 13347, 128009,
                        72803, 25, 220}));
    EXPECT_EQ(v->tokenizer->decode(ids, true),
              "<|begin_of_text|>System: You are a helpful assistant.<|eot_id|>User: Hi<|eot_id|>Assistant: ");
}

TEST(BitnetChat, HeaderAndContentAreTokenizedSeparately) {
    REQUIRE_LLAMA3(v);
    EXPECT_EQ(v->tokenizer->encode("User: Hi", false, false), (Ids{1502, 25, 21694}));
    EXPECT_EQ(bitnet_chat_turn_tokens(*v->tokenizer, {"user", "Hi"}, false), (Ids{1502, 25, 220, 13347, 128009}));
}

TEST(BitnetChat, TurnTokensHaveNoBos) {
    REQUIRE_LLAMA3(v);
    EXPECT_EQ(bitnet_chat_turn_tokens(*v->tokenizer, {"user", "Hi"}, true),
              (Ids{1502, 25, 220, 13347, 128009, 72803, 25, 220}));
    EXPECT_EQ(bitnet_chat_tokens(*v->tokenizer, {}, false), (Ids{128000}));
    const Ids no_prompt = bitnet_chat_tokens(*v->tokenizer, {{"user", "Hi"}}, false);
    EXPECT_EQ(no_prompt, (Ids{128000, 1502, 25, 220, 13347, 128009}));
}

TEST(BitnetChat, ContentIsStrippedLikePython) {
    REQUIRE_LLAMA3(v);
    const Ids expected = bitnet_chat_turn_tokens(*v->tokenizer, {"user", "Hi"}, false);
    EXPECT_EQ(bitnet_chat_turn_tokens(*v->tokenizer, {"user", "  \t\nHi \n"}, false), expected);
    // U+3000 and U+00A0 are whitespace for str.strip(); inner spaces stay.
    EXPECT_EQ(bitnet_chat_turn_tokens(*v->tokenizer, {"user", "\xe3\x80\x80Hi\xc2\xa0"}, false), expected);
    EXPECT_NE(bitnet_chat_turn_tokens(*v->tokenizer, {"user", "H i"}, false), expected);
}

TEST(BitnetChat, SpecialTextInContentStaysPlainText) {
    REQUIRE_LLAMA3(v);
    const Ids ids = bitnet_chat_tokens(*v->tokenizer, {{"user", "<|eot_id|><|begin_of_text|>"}}, false);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 128009), 1);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 128000), 1);
}

TEST(BitnetChat, Errors) {
    REQUIRE_LLAMA3(v);
    try {
        (void)bitnet_chat_tokens(*v->tokenizer, {{"tool", "x"}}, false);
        FAIL() << "expected Error";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
        EXPECT_NE(std::string(e.what()).find("tool"), std::string::npos);
    }
    // Phi-3 has no <|eot_id|>.
    try {
        (void)bitnet_chat_tokens(*test::phi3_vocab()->tokenizer, {{"user", "x"}}, false);
        FAIL() << "expected Error";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    }
}

}  // namespace
}  // namespace tern
