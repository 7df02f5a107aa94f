// The Llama-3, Qwen3 and Phi-3 tokenizers against the libraries the models ship with, on the
// multilingual corpus (tests/data/multilingual/corpus.txt: each line, and the whole file as one text)
// and llama.cpp's golden inputs: tests/data/hf_parity/tokenizers/*.json, made by
// tools/hf_parity/make_family_reference.py (llama3 / qwen3: transformers with the npm tokenizer.json,
// on the GPU machine; phi3: sentencepiece 0.1.97 (Debian) with the tokenizer.model the script
// rebuilds from ggml-vocab-phi-3.gguf). Ids without BOS, special tokens not parsed.
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace tern {
namespace {

void expect_reference_ids(const char * name, const test::TestVocab * vocab) {
    ASSERT_NE(vocab, nullptr);
    std::ifstream in(test::data_path(std::string("hf_parity/tokenizers/") + name + ".json"));
    ASSERT_TRUE(in) << name;
    const nlohmann::json ref = nlohmann::json::parse(in);
    int                  n   = 0;
    auto check = [&](const nlohmann::json & c, const char * where) {
        const auto ids = vocab->tokenizer->encode(c["text"].get<std::string>(), false, false);
        EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << name << " " << where << ": " << c["text"];
        ++n;
    };
    for (const auto & c : ref["lines"]) check(c, "corpus line");
    check(ref["whole"], "whole corpus");
    for (const auto & c : ref["golden_inputs"]) check(c, "golden input");
    EXPECT_GE(n, 60) << name;
}

TEST(HfFamilyTokenizers, Llama3MatchesTransformers) { expect_reference_ids("llama3", test::llama3_vocab()); }
TEST(HfFamilyTokenizers, Qwen3MatchesTransformers) { expect_reference_ids("qwen3", test::qwen3_vocab()); }
TEST(HfFamilyTokenizers, Phi3MatchesSentencePiece) { expect_reference_ids("phi3", test::phi3_vocab()); }

}  // namespace
}  // namespace tern
