// Decoding (FORMATS.md §5.9): encode -> decode round trips on varied Unicode and invalid UTF-8 for
// the three vocabularies, special-token rendering, and the StreamingDecoder's UTF-8 safety.
#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/normalize.h"
#include "tokenizer_test_util.h"

namespace tern {
namespace {

using Ids = std::vector<int32_t>;

const std::vector<std::string> & round_trip_inputs() {
    static const std::vector<std::string> inputs = {
        "Hello, world!",
        "  leading and trailing spaces  ",
        "tabs\tand\nnewlines\r\nand\n\n\nblank lines \n",
        "caf\xc3\xa9 na\xc3\xafve \xc3\x84pfel \xc3\x9f",                                 // Latin-1 letters
        "e\xcc\x81 a\xcc\x8a",                                                              // combining marks
        "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c",                 // CJK + fullwidth comma
        "\xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7",  // Cyrillic, Arabic
        "\xf0\x9f\xa6\x99 \xf0\x9f\x98\xb6\xe2\x80\x8d\xf0\x9f\x8c\xab\xef\xb8\x8f \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd",  // emoji, ZWJ, skin tone
        "\xe1\x9e\x80\xe1\x9e\xb6\xe1\x9e\x93\xe1\x9f\x8b",                             // Khmer
        "numbers 1234567890 3.14 1,000,000",
        "code: if (x != y) { return a->b[0]; } // 'quoted' \"double\"",
        "I've been 'told he's there, 'RE you sure?",
        std::string("nul\0byte", 8),
        "\x01\x02\x1b[31mansi\x7f",
        "invalid \xff\xfe bytes",
        "truncated \xe2\x82",
        "lone continuation \x80\xbf",
        "overlong \xc0\xaf and surrogate \xed\xa0\x80",
        "\xf0\x9f\xa6",  // an emoji missing its last byte, at the very end
        std::string(300, ' ') + "x" + std::string(70, '!'),
    };
    return inputs;
}

// nfc: the tokenizer normalizes to NFC first (Qwen's tokenizer.json normalizer), so decoding gives
// the NFC form of the text (the same for every input here but the decomposed accents).
void expect_round_trips(const Tokenizer & tok, const char * name, bool nfc = false) {
    for (const std::string & text : round_trip_inputs()) {
        const Ids ids = tok.encode(text, /*add_bos=*/true, /*parse_special=*/false);
        EXPECT_EQ(tok.decode(ids), nfc ? tok::nfc(text) : text) << name << ": \"" << test::escaped(text) << "\"";
    }
}

TEST(Decode, RoundTripLlama3) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    expect_round_trips(*v->tokenizer, "llama3");
}

TEST(Decode, RoundTripQwen3) {
    const auto * v = test::qwen3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    expect_round_trips(*v->tokenizer, "qwen3", /*nfc=*/true);
}

TEST(Decode, RoundTripPhi3) { expect_round_trips(*test::phi3_vocab()->tokenizer, "phi-3"); }

TEST(Decode, ControlTokensAndBadIds) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    const Tokenizer & tok = *v->tokenizer;
    EXPECT_EQ(tok.decode(Ids{128000, 15339, 128009}), "hello");
    EXPECT_EQ(tok.decode(Ids{128000, 15339, 128009}, true), "<|begin_of_text|>hello<|eot_id|>");
    EXPECT_EQ(tok.token_to_piece(24748), " hello");
    try {
        (void)tok.token_to_piece(128256);
        FAIL() << "expected Error";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    }
    EXPECT_THROW((void)tok.decode(Ids{-1}), Error);
    EXPECT_THROW((void)tok.token_text(1 << 30), Error);
}

// ---- StreamingDecoder ---------------------------------------------------------------------------

// Pushes every id, checking that each chunk is valid UTF-8; returns the chunks (flush last).
std::vector<std::string> stream(const Tokenizer & tok, const Ids & ids) {
    StreamingDecoder         dec(tok);
    std::vector<std::string> chunks;
    for (int32_t id : ids) {
        chunks.push_back(dec.push(id));
        EXPECT_TRUE(is_valid_utf8(chunks.back())) << "chunk after id " << id << ": \"" << test::escaped(chunks.back()) << "\"";
    }
    chunks.push_back(dec.flush());
    EXPECT_TRUE(is_valid_utf8(chunks.back()));
    return chunks;
}

TEST(StreamingDecoder, HoldsBackAnEmojiSplitOverThreeTokens) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    const Tokenizer & tok  = *v->tokenizer;
    const std::string text = " this is \xf0\x9f\xa6\x99.cpp";
    const Ids         ids  = tok.encode(text, false, false);
    ASSERT_EQ(ids, (Ids{420, 374, 11410, 99, 247, 13, 11055}));  // golden case 18: 🦙 = 11410 99 247

    const auto chunks = stream(tok, ids);
    EXPECT_EQ(chunks[2], " ");                  // " \xF0\x9F": the space only
    EXPECT_EQ(chunks[3], "");                   // "\xA6": still incomplete
    EXPECT_EQ(chunks[4], "\xf0\x9f\xa6\x99");  // completed by "\x99"
    std::string joined;
    for (const auto & c : chunks) joined += c;
    EXPECT_EQ(joined, text);
}

TEST(StreamingDecoder, EveryPrefixOfVariedTextIsSafe) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    for (const std::string & text : round_trip_inputs()) {
        if (!is_valid_utf8(text)) continue;
        std::string joined;
        for (const auto & c : stream(*v->tokenizer, v->tokenizer->encode(text, true, false))) joined += c;
        EXPECT_EQ(joined, text);
    }
}

TEST(StreamingDecoder, SpmByteTokens) {
    const Tokenizer & tok = *test::phi3_vocab()->tokenizer;
    const Ids         ids{3 + 0xf0, 3 + 0x9f, 3 + 0xa6, 3 + 0x99, 3 + '!'};  // <0xF0><0x9F><0xA6><0x99><0x21>
    const auto        chunks = stream(tok, ids);
    EXPECT_EQ(chunks, (std::vector<std::string>{"", "", "", "\xf0\x9f\xa6\x99", "!", ""}));
}

TEST(StreamingDecoder, FlushReplacesAnUnfinishedSequence) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    StreamingDecoder dec(*v->tokenizer);
    EXPECT_EQ(dec.push(11410), " ");  // " \xF0\x9F"
    EXPECT_EQ(dec.flush(), "\xef\xbf\xbd");
    EXPECT_EQ(dec.flush(), "");
}

TEST(StreamingDecoder, InvalidBytesBecomeReplacementCharacters) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    const Tokenizer & tok = *v->tokenizer;
    std::string       joined;
    for (const auto & c : stream(tok, tok.encode("a\xff" "b\xf0\x9f" "c", false, false))) joined += c;
    EXPECT_EQ(joined, "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c");
}

TEST(Utf8ReplaceInvalid, MaximalSubparts) {  // as Python's bytes.decode("utf-8", "replace")
    const std::string r = "\xef\xbf\xbd";
    EXPECT_EQ(utf8_replace_invalid("ok \xc3\xa9"), "ok \xc3\xa9");
    EXPECT_EQ(utf8_replace_invalid("\xf0\x9f" "A"), r + "A");
    EXPECT_EQ(utf8_replace_invalid("\xf0\x9f\x98"), r);
    EXPECT_EQ(utf8_replace_invalid("\xe0\x80"), r + r);
    EXPECT_EQ(utf8_replace_invalid("\xed\xa0\x80"), r + r + r);
    EXPECT_EQ(utf8_replace_invalid("\xc0\xaf"), r + r);
    EXPECT_EQ(utf8_replace_invalid("\x80\xff"), r + r);
    EXPECT_EQ(utf8_replace_invalid("\xf4\x90\x80\x80"), r + r + r + r);
}

}  // namespace
}  // namespace tern
