// Metadata validation of Tokenizer::from_gguf (FORMATS.md §5.1): missing keys, arrays of different
// lengths, merges that name unknown tokens, bad ids. Each must be Error(invalid_model) (or
// unsupported) naming the key, never a crash.
#include "core/error.h"
#include "tiny_vocab.h"
#include "tokenizer_test_util.h"

#include <functional>

namespace tern {
namespace {

// A small valid gpt2 vocabulary; `edit` changes the writer before the bytes are produced.
GgufFile gpt2_file(const std::function<void(GgufWriter &)> & edit = {}) {
    GgufWriter writer;
    write_tokenizer_metadata(writer, test::tiny_bpe({"ab"}, {"a b"}));
    if (edit) edit(writer);
    const auto bytes = writer.to_bytes();
    return GgufFile::from_bytes(bytes, "tiny.gguf");
}

void expect_load_error(const GgufFile & file, ErrorKind kind, const std::string & mention, const TokenizerOptions & options = {}) {
    try {
        (void)Tokenizer::from_gguf(file, options);
        ADD_FAILURE() << "expected an Error mentioning " << mention;
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
    }
}

TEST(VocabValidation, ValidTinyVocabularyLoads) {
    const auto file = gpt2_file();
    const auto tok  = Tokenizer::from_gguf(file);
    EXPECT_EQ(tok.n_vocab(), 259);
    EXPECT_EQ(tok.bos_id(), 257);
    EXPECT_EQ(tok.eog_ids(), (std::vector<int32_t>{258}));
    EXPECT_EQ(tok.encode("ab", false, false), (std::vector<int32_t>{256}));
}

TEST(VocabValidation, MissingModelKey) {
    GgufWriter w;
    w.set_string_array("tokenizer.ggml.tokens", {"a"});
    const auto bytes = w.to_bytes();
    expect_load_error(GgufFile::from_bytes(bytes), ErrorKind::invalid_model, "tokenizer.ggml.model");
}

TEST(VocabValidation, UnsupportedModel) {
    expect_load_error(gpt2_file([](GgufWriter & w) { w.set_string("tokenizer.ggml.model", "bert"); }),
                      ErrorKind::unsupported, "bert");
}

TEST(VocabValidation, MissingTokens) {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string_array("tokenizer.ggml.merges", {});
    const auto bytes = w.to_bytes();
    expect_load_error(GgufFile::from_bytes(bytes), ErrorKind::invalid_model, "tokenizer.ggml.tokens");
}

TEST(VocabValidation, TokensOfTheWrongType) {
    expect_load_error(gpt2_file([](GgufWriter & w) { w.set_i32_array("tokenizer.ggml.tokens", {1, 2}); }),
                      ErrorKind::invalid_model, "tokenizer.ggml.tokens");
}

TEST(VocabValidation, MismatchedArrayLengths) {
    expect_load_error(gpt2_file([](GgufWriter & w) { w.set_i32_array("tokenizer.ggml.token_type", {1, 1, 1}); }),
                      ErrorKind::invalid_model, "tokenizer.ggml.token_type");
    expect_load_error(gpt2_file([](GgufWriter & w) { w.set_f32_array("tokenizer.ggml.scores", {0.0f}); }),
                      ErrorKind::invalid_model, "tokenizer.ggml.scores");
}

TEST(VocabValidation, TokenTypeOutOfRange) {
    expect_load_error(gpt2_file([](GgufWriter & w) {
                          std::vector<int32_t> types(259, 1);
                          types[100] = 9;
                          w.set_i32_array("tokenizer.ggml.token_type", types);
                      }),
                      ErrorKind::invalid_model, "tokenizer.ggml.token_type'[100]");
}

TEST(VocabValidation, MergeReferringToAnUnknownToken) {
    expect_load_error(gpt2_file([](GgufWriter & w) { w.set_string_array("tokenizer.ggml.merges", {"a b", "ab zz"}); }),
                      ErrorKind::invalid_model, "tokenizer.ggml.merges'[1]");
    expect_load_error(gpt2_file([](GgufWriter & w) { w.set_string_array("tokenizer.ggml.merges", {"ab"}); }),
                      ErrorKind::invalid_model, "tokenizer.ggml.merges'[0]");
    expect_load_error(gpt2_file([](GgufWriter & w) { w.set_string_array("tokenizer.ggml.merges", {" "}); }),
                      ErrorKind::invalid_model, "tokenizer.ggml.merges'[0]");
}

TEST(VocabValidation, MissingMergesForGpt2) {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    const auto bytes = w.to_bytes();
    expect_load_error(GgufFile::from_bytes(bytes), ErrorKind::invalid_model, "tokenizer.ggml.merges");
}

TEST(VocabValidation, BadTokenIdKeys) {
    expect_load_error(gpt2_file([](GgufWriter & w) { w.set_u32("tokenizer.ggml.bos_token_id", 259); }),
                      ErrorKind::invalid_model, "tokenizer.ggml.bos_token_id");
    expect_load_error(gpt2_file([](GgufWriter & w) { w.set_i32("tokenizer.ggml.eos_token_id", -1); }),
                      ErrorKind::invalid_model, "tokenizer.ggml.eos_token_id");
    expect_load_error(gpt2_file([](GgufWriter & w) { w.set_string("tokenizer.ggml.eot_token_id", "2"); }),
                      ErrorKind::invalid_model, "tokenizer.ggml.eot_token_id");
    expect_load_error(gpt2_file([](GgufWriter & w) { w.set_u32("tokenizer.ggml.unknown_token_id", 1000); }),
                      ErrorKind::invalid_model, "tokenizer.ggml.unknown_token_id");
    // Padding is not used by the tokenizer: an out-of-range value is dropped with a warning.
    EXPECT_NO_THROW((void)Tokenizer::from_gguf(gpt2_file([](GgufWriter & w) { w.set_u32("tokenizer.ggml.padding_token_id", 999); })));
}

TEST(VocabValidation, UnknownPreTokenizer) {
    const auto file = gpt2_file([](GgufWriter & w) { w.set_string("tokenizer.ggml.pre", "tekken"); });
    expect_load_error(file, ErrorKind::unsupported, "tekken");
    // Forcing one is the way around it.
    EXPECT_EQ(Tokenizer::from_gguf(file, {PreTokenizer::qwen2}).pre_tokenizer(), PreTokenizer::qwen2);
}

TEST(VocabValidation, DefaultsOfTheSpmTable) {  // FORMATS.md §5.1
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "llama");
    // "▁hi" is reached through "▁h" ("hi" is not a token).
    w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xe2\x96\x81hi", "\xe2\x96\x81", "h", "i",
                                                 "\xe2\x96\x81h"});
    w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1, 1});
    w.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, -1, -9, -9, -9, -2});
    const auto bytes = w.to_bytes();
    const auto file  = GgufFile::from_bytes(bytes);
    const auto tok   = Tokenizer::from_gguf(file);
    EXPECT_EQ(tok.bos_id(), 1);
    EXPECT_EQ(tok.eos_id(), 2);
    EXPECT_EQ(tok.unk_id(), 0);
    EXPECT_TRUE(tok.add_bos());
    EXPECT_EQ(tok.encode("hi", true, false), (std::vector<int32_t>{1, 3}));
    // No byte tokens and no single-byte tokens: unknown characters become <unk>.
    EXPECT_EQ(tok.encode("hi!", false, false), (std::vector<int32_t>{3, 0}));
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

TEST(VocabSpecials, BpePlaceholderIdsDoNotEndGeneration) {  // FORMATS.md §5.1 defaults
    auto meta = test::tiny_bpe({}, {});
    meta.bos_id.reset();
    meta.eos_id.reset();
    const auto file = test::gguf_from_metadata(meta);
    const auto tok  = Tokenizer::from_gguf(*file);
    EXPECT_EQ(tok.bos_id(), 11);  // llama.cpp's placeholder
    EXPECT_EQ(tok.eos_id(), 11);
    EXPECT_FALSE(tok.is_eog(11));
    EXPECT_EQ(tok.token_type(11), TokenType::normal);
    EXPECT_EQ(tok.decode(tok.encode("\v", false, false)), "\v");  // byte 0x0B is token 11
    EXPECT_FALSE(tok.add_bos());
}

TEST(VocabSpecials, IdsNamedByKeysAreControlEvenWhenTypedNormal) {
    auto meta                                            = test::tiny_bpe({}, {});
    meta.token_types[static_cast<size_t>(*meta.bos_id)] = 1;
    meta.token_types[static_cast<size_t>(*meta.eos_id)] = 1;
    const auto file                                      = test::gguf_from_metadata(meta);
    const auto tok                                       = Tokenizer::from_gguf(*file);
    EXPECT_EQ(tok.token_type(*meta.bos_id), TokenType::control);
    EXPECT_EQ(tok.token_to_piece(*meta.bos_id), "");
    EXPECT_EQ(tok.encode("<|bos|>", false, true), (std::vector<int32_t>{*meta.bos_id}));
    EXPECT_NE(tok.encode("<|bos|>", false, false), (std::vector<int32_t>{*meta.bos_id}));
    EXPECT_TRUE(tok.is_eog(*meta.eos_id));
}

TEST(VocabSpecials, EndOfGenerationTextsAreFoundAndForcedToControl) {  // FORMATS.md §5.2
    auto meta = test::tiny_bpe({"<|eot_id|>", "<|im_end|>"}, {});
    const auto file = test::gguf_from_metadata(meta);  // both typed NORMAL by tiny_bpe
    const auto tok  = Tokenizer::from_gguf(*file);
    const int32_t eot = test::tiny_id(meta, "<|eot_id|>");
    const int32_t im_end = test::tiny_id(meta, "<|im_end|>");
    EXPECT_EQ(tok.eot_id(), eot);  // first in preference order
    EXPECT_TRUE(tok.is_eog(eot));
    EXPECT_TRUE(tok.is_eog(im_end));
    EXPECT_EQ(tok.token_type(im_end), TokenType::control);
    EXPECT_EQ(tok.token_to_piece(im_end), "");
}

}  // namespace
}  // namespace tern
