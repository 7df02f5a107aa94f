// Hugging Face tokenizer.json import and tokenizer.ggml.* writing (FORMATS.md §5.1, §5.2, §7.3):
// synthetic files for every schema rule and error, plus the facts of the two npm vocabularies.
#include "core/error.h"
#include "core/log.h"
#include "tokenizer_test_util.h"

#include <nlohmann/json.hpp>

namespace tern {
namespace {

using nlohmann::json;

constexpr const char * k_r1 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char * k_r2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json minimal_tokenizer_json(const std::string & regex = k_r1) {
    return json{
        {"version", "1.0"},
        {"added_tokens",
         json::array({json{{"id", 4}, {"content", "<|end|>"}, {"special", true}},
                      json{{"id", 5}, {"content", "<x\xe2\x96\x81y>"}, {"special", false}},
                      json{{"id", 6}, {"content", "<|tool|>"}, {"special", false}}})},
        {"normalizer", nullptr},
        {"pre_tokenizer",
         json{{"type", "Sequence"},
              {"pretokenizers", json::array({json{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}},
                                             json{{"type", "ByteLevel"}, {"add_prefix_space", false}}})}}},
        {"model",
         json{{"type", "BPE"},
              {"ignore_merges", true},
              {"vocab", json{{"a", 0}, {"b", 1}, {"ab", 3}}},  // id 2 is a hole
              {"merges", json::array({json::array({"a", "b"})})}}},
    };
}

std::string write_json(const json & j, const std::string & name = "tokenizer.json") {
    const auto    path = test::temp_dir("hfjson") / name;
    std::ofstream out(path);
    out << j.dump();
    return path.string();
}

std::string write_text(const std::string & text) {
    const auto    path = test::temp_dir("hfjson") / "tokenizer.json";
    std::ofstream out(path);
    out << text;
    return path.string();
}

// Runs fn, which must throw Error of `kind` whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn && fn, ErrorKind kind, std::initializer_list<std::string> parts) {
    try {
        fn();
        ADD_FAILURE() << "expected an Error";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        for (const auto & p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\n  lacks: " << p;
    }
}

TEST(HfTokenizerJson, ImportsVocabularyHolesAddedTokensAndMerges) {
    const auto meta = tokenizer_metadata_from_hf(write_json(minimal_tokenizer_json()));
    EXPECT_EQ(meta.model, "gpt2");
    EXPECT_EQ(meta.pre, "llama-bpe");
    ASSERT_EQ(meta.tokens.size(), 7u);
    EXPECT_EQ(meta.tokens, (std::vector<std::string>{"a", "b", "[PAD2]", "ab", "<|end|>", "<x y>", "<|tool|>"}));
    EXPECT_EQ(meta.token_types, (std::vector<int32_t>{1, 1, 5, 1, 3, 4, 3}));
    EXPECT_EQ(meta.merges, (std::vector<std::string>{"a b"}));
    EXPECT_TRUE(meta.scores.empty());
    EXPECT_EQ(meta.add_bos, true);  // llama-bpe default without a config
    EXPECT_FALSE(meta.bos_id.has_value());
    EXPECT_FALSE(meta.eos_id.has_value());
}

TEST(HfTokenizerJson, StringMergesAndRegexFamilies) {
    json j                   = minimal_tokenizer_json(k_r2);
    j["model"]["merges"]     = json::array({"a b"});
    j["model"]["ignore_merges"] = false;
    auto meta = tokenizer_metadata_from_hf(write_json(j));
    EXPECT_EQ(meta.merges, (std::vector<std::string>{"a b"}));
    EXPECT_EQ(meta.pre, "qwen2");
    EXPECT_FALSE(meta.add_bos.has_value());

    // llama.cpp's spelling of R1 (no inline flag) is recognised too.
    std::string cpp_r1 = k_r1;
    cpp_r1.replace(0, std::string("(?i:'s|'t|'re|'ve|'m|'ll|'d)").size(),
                   "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])");
    EXPECT_EQ(tokenizer_metadata_from_hf(write_json(minimal_tokenizer_json(cpp_r1))).pre, "llama-bpe");

    // Anything else: "default", with a warning.
    test::ScopedLogCapture log(LogLevel::warn);
    meta = tokenizer_metadata_from_hf(write_json(minimal_tokenizer_json(R"(\w+|\s+)")));
    EXPECT_EQ(meta.pre, "default");
    EXPECT_TRUE(log.contains(LogLevel::warn, "\"default\""));
}

TEST(HfTokenizerJson, ConfigGivesSpecialIdsAndFlags) {
    const std::string tj     = write_json(minimal_tokenizer_json());
    const std::string config = write_json(json{{"bos_token", {{"content", "ab"}, {"special", true}}},
                                               {"eos_token", "<|end|>"},
                                               {"pad_token", nullptr},
                                               {"add_bos_token", false},
                                               {"add_eos_token", true}},
                                          "tokenizer_config.json");
    const auto meta = tokenizer_metadata_from_hf(tj, config);
    EXPECT_EQ(meta.bos_id, 3);
    EXPECT_EQ(meta.eos_id, 4);
    EXPECT_FALSE(meta.pad_id.has_value());
    EXPECT_EQ(meta.add_bos, false);  // the config wins over the llama-bpe default
    EXPECT_EQ(meta.add_eos, true);
}

TEST(HfTokenizerJson, WritesTheGgufKeys) {
    auto meta   = tokenizer_metadata_from_hf(write_json(minimal_tokenizer_json()));
    meta.bos_id = 3;
    meta.eos_id = 4;
    GgufWriter writer;
    write_tokenizer_metadata(writer, meta);
    const auto bytes = writer.to_bytes();
    const auto file  = GgufFile::from_bytes(bytes);

    EXPECT_EQ(file.get_string("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(file.get_string("tokenizer.ggml.pre"), "llama-bpe");
    ASSERT_NE(file.find("tokenizer.ggml.token_type"), nullptr);
    EXPECT_EQ(file.find("tokenizer.ggml.token_type")->value.elem_type, GgufType::i32);
    EXPECT_EQ(file.find("tokenizer.ggml.bos_token_id")->value.type, GgufType::u32);
    EXPECT_EQ(file.get_int("tokenizer.ggml.eos_token_id"), 4);
    EXPECT_EQ(file.find("tokenizer.ggml.add_bos_token")->value.type, GgufType::boolean);
    EXPECT_EQ(file.get_string_array("tokenizer.ggml.merges")->size(), 1u);
    for (const char * absent : {"tokenizer.ggml.scores", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.padding_token_id",
                                "tokenizer.ggml.add_eos_token"}) {
        EXPECT_EQ(file.find(absent), nullptr) << absent;
    }

    // And the written vocabulary tokenizes.
    const Tokenizer tok = Tokenizer::from_gguf(file);
    EXPECT_EQ(tok.encode("ab", false, false), (std::vector<int32_t>{3}));
    EXPECT_EQ(tok.encode("<x y>", false, false), (std::vector<int32_t>{5}));  // USER_DEFINED: always matched
    EXPECT_EQ(tok.token_type(2), TokenType::unused);
    EXPECT_TRUE(tok.is_eog(4));  // <|end|>

    meta.token_types.pop_back();
    GgufWriter bad;
    expect_error([&] { write_tokenizer_metadata(bad, meta); }, ErrorKind::invalid_argument, {"token types"});
}

TEST(HfTokenizerJson, Errors) {
    expect_error([] { (void)tokenizer_metadata_from_hf("/nonexistent/tokenizer.json"); }, ErrorKind::io, {"/nonexistent"});

    const std::string broken = write_text("{\"model\": {\"vocab\": ");
    expect_error([&] { (void)tokenizer_metadata_from_hf(broken); }, ErrorKind::invalid_model, {broken, "JSON"});

    json j = minimal_tokenizer_json();
    j["model"]["vocab"] = json::array();
    std::string p       = write_json(j);
    expect_error([&] { (void)tokenizer_metadata_from_hf(p); }, ErrorKind::invalid_model, {p, "model.vocab", "an object"});

    j                    = minimal_tokenizer_json();
    j["model"]["vocab"]["b"] = "one";
    p                    = write_json(j);
    expect_error([&] { (void)tokenizer_metadata_from_hf(p); }, ErrorKind::invalid_model, {"model.vocab[\"b\"]"});

    j                     = minimal_tokenizer_json();
    j["model"]["merges"]  = json::array({"a b", json::array({"a", "zz"})});
    p                     = write_json(j);
    expect_error([&] { (void)tokenizer_metadata_from_hf(p); }, ErrorKind::invalid_model, {"model.merges[1]", "zz"});

    j                     = minimal_tokenizer_json();
    j["model"]["merges"]  = json::array({"ab"});
    p                     = write_json(j);
    expect_error([&] { (void)tokenizer_metadata_from_hf(p); }, ErrorKind::invalid_model, {"model.merges[0]"});

    j = minimal_tokenizer_json();
    j["model"].erase("merges");
    p = write_json(j);
    expect_error([&] { (void)tokenizer_metadata_from_hf(p); }, ErrorKind::invalid_model, {"model.merges", "missing"});

    j = minimal_tokenizer_json();
    j["added_tokens"][0].erase("id");
    p = write_json(j);
    expect_error([&] { (void)tokenizer_metadata_from_hf(p); }, ErrorKind::invalid_model, {"added_tokens[0].id"});

    j                        = minimal_tokenizer_json();
    j["model"]["vocab"]["c"] = 0;  // two texts for id 0
    p                        = write_json(j);
    expect_error([&] { (void)tokenizer_metadata_from_hf(p); }, ErrorKind::invalid_model, {"id 0"});

    j                  = minimal_tokenizer_json();
    j["model"]["type"] = "Unigram";
    p                  = write_json(j);
    expect_error([&] { (void)tokenizer_metadata_from_hf(p); }, ErrorKind::unsupported, {"model.type"});

    const std::string tj     = write_json(minimal_tokenizer_json());
    const std::string config = write_json(json{{"bos_token", "<s>"}}, "tokenizer_config.json");
    expect_error([&] { (void)tokenizer_metadata_from_hf(tj, config); }, ErrorKind::invalid_model, {config, "bos_token", "<s>"});
    const std::string config2 = write_json(json{{"add_bos_token", "yes"}}, "tokenizer_config.json");
    expect_error([&] { (void)tokenizer_metadata_from_hf(tj, config2); }, ErrorKind::invalid_model, {"add_bos_token", "boolean"});
}

// Hostile files (issue 56's fuzz findings): 100,000 nested arrays used to overflow the stack of the
// recursive parser and were dumped whole into the message; a 61-byte file naming id 2^31 - 2 made
// one string per id up to it; escape sequences in a merge reached the terminal.
TEST(HfTokenizerJson, HostileFilesFailCleanly) {
    const std::string deep = write_text(R"({"model": {"type": )" + std::string(100000, '[') + std::string(100000, ']') + "}}");
    try {
        (void) tokenizer_metadata_from_hf(deep);
        ADD_FAILURE() << "accepted";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_model);
        EXPECT_NE(std::string(e.what()).find("nests deeper"), std::string::npos) << e.what();
        EXPECT_LT(std::string(e.what()).size(), 300u) << "the value was printed whole";
    }
    const std::string big_id = write_text(R"({"model":{"type":"BPE","vocab":{"a":2147483646},"merges":[]}})");
    expect_error([&] { (void) tokenizer_metadata_from_hf(big_id); }, ErrorKind::invalid_model,
                 {"model.vocab[\"a\"]", "2147483646", "not a valid token id"});
    // With config.json's vocab_size as the bound, an id at or above it is refused too.
    json j = minimal_tokenizer_json();
    expect_error([&] { (void) tokenizer_metadata_from_hf(write_json(j), "", 5); }, ErrorKind::invalid_model,
                 {"added_tokens[1].id", "expected 0..4"});
    EXPECT_EQ(tokenizer_metadata_from_hf(write_json(j), "", 7).tokens.size(), 7u);
    // A long type value is described, not dumped; control characters in a merge are escaped.
    j                  = minimal_tokenizer_json();
    j["model"]["type"] = std::string(100000, 'U');
    expect_error([&] { (void) tokenizer_metadata_from_hf(write_json(j)); }, ErrorKind::unsupported, {"model.type", "..."});
    j                    = minimal_tokenizer_json();
    j["model"]["merges"] = json::array({"a \x1b[2Jzz"});
    try {
        (void) tokenizer_metadata_from_hf(write_json(j));
        ADD_FAILURE() << "accepted";
    } catch (const Error & e) {
        EXPECT_EQ(std::string(e.what()).find('\x1b'), std::string::npos) << "raw ESC in: " << e.what();
        EXPECT_NE(std::string(e.what()).find("\\x1b[2J"), std::string::npos) << e.what();
    }
    // Duplicate keys are refused (nlohmann would keep the last one).
    const std::string dup = write_text(R"({"model":{"type":"BPE","vocab":{"a":0,"a":1},"merges":[]}})");
    expect_error([&] { (void) tokenizer_metadata_from_hf(dup); }, ErrorKind::invalid_model, {"appears twice"});
}

TEST(HfTokenizerJson, Llama3PackageFacts) {  // FORMATS.md §7.3
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    const auto & m = v->meta;
    EXPECT_EQ(m.pre, "llama-bpe");
    EXPECT_EQ(m.tokens.size(), 128256u);
    EXPECT_EQ(m.merges.size(), 280147u);
    EXPECT_EQ(m.merges[0], "\xc4\xa0 \xc4\xa0");  // "Ġ Ġ"
    EXPECT_EQ(m.bos_id, 128000);
    EXPECT_EQ(m.eos_id, 128001);
    EXPECT_EQ(m.add_bos, true);
    EXPECT_EQ(m.tokens[128009], "<|eot_id|>");
    for (size_t i = 0; i < m.tokens.size(); ++i) ASSERT_EQ(m.token_types[i], i < 128000 ? 1 : 3) << i;
}

TEST(HfTokenizerJson, Qwen3PackageFacts) {  // FORMATS.md §7.3
    const auto * v = test::qwen3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    const auto & m = v->meta;
    EXPECT_EQ(m.pre, "qwen2");
    EXPECT_EQ(m.tokens.size(), 151669u);
    EXPECT_EQ(m.merges.size(), 151387u);
    EXPECT_FALSE(m.bos_id.has_value());  // bos_token is null
    EXPECT_EQ(m.eos_id, 151645);         // <|im_end|>
    EXPECT_EQ(m.pad_id, 151643);         // <|endoftext|>
    EXPECT_EQ(m.add_bos, false);
    EXPECT_EQ(m.tokens[151667], "<think>");
    EXPECT_EQ(m.token_types[151667], 4);  // USER_DEFINED
    EXPECT_EQ(m.token_types[151659], 3);  // <|fim_prefix|>: not flagged special, but looks it
    const Tokenizer & tok = *v->tokenizer;
    EXPECT_TRUE(tok.is_eog(151643));
    EXPECT_TRUE(tok.is_eog(151645));
    EXPECT_EQ(tok.eot_id(), 151645);
    EXPECT_EQ(tok.encode("<think>", false, false), (std::vector<int32_t>{151667}));
}

}  // namespace
}  // namespace tern
