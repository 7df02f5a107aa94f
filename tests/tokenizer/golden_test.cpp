// llama.cpp golden tokenizer tests (FORMATS.md §7): 46 cases per vocabulary, add_special = false,
// parse_special = false, ids compared exactly; plus decode(expected ids) == input for every case.
#include "tokenizer_test_util.h"

namespace tern {
namespace {

using test::GoldenCase;

// Returns the number of cases whose ids match; every mismatch is reported with its input.
int run_golden(const Tokenizer & tokenizer, const std::vector<GoldenCase> & cases, const char * name) {
    int passed = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        const auto ids = tokenizer.encode(cases[i].text, /*add_bos=*/false, /*parse_special=*/false);
        if (ids == cases[i].ids) {
            ++passed;
        } else {
            ADD_FAILURE() << name << " case " << i << " \"" << test::escaped(cases[i].text) << "\"\n  expected: "
                          << test::ids_to_string(cases[i].ids) << "\n  got:      " << test::ids_to_string(ids);
        }
    }
    std::printf("[   INFO   ] %s golden: %d/%zu\n", name, passed, cases.size());
    return passed;
}

void expect_decodes_back(const Tokenizer & tokenizer, const std::vector<GoldenCase> & cases, const char * name) {
    for (size_t i = 0; i < cases.size(); ++i) {
        EXPECT_EQ(tokenizer.decode(cases[i].ids), cases[i].text) << name << " case " << i;
    }
}

TEST(TokenizerGolden, LlamaBpeAll46) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    const auto cases = test::load_golden("ggml-vocab-llama-bpe.gguf");
    ASSERT_EQ(cases.size(), 46u);
    EXPECT_EQ(v->tokenizer->pre_tokenizer(), PreTokenizer::llama3);
    EXPECT_EQ(run_golden(*v->tokenizer, cases, "llama-bpe"), 46);
    expect_decodes_back(*v->tokenizer, cases, "llama-bpe");
}

TEST(TokenizerGolden, Qwen2All46) {
    const auto * v = test::qwen3_vocab();
    ASSERT_NE(v, nullptr) << "run scripts/setup.sh";
    const auto cases = test::load_golden("ggml-vocab-qwen2.gguf");
    ASSERT_EQ(cases.size(), 46u);
    EXPECT_EQ(v->tokenizer->pre_tokenizer(), PreTokenizer::qwen2);
    EXPECT_FALSE(v->tokenizer->ignore_merges());
    EXPECT_EQ(run_golden(*v->tokenizer, cases, "qwen2"), 46);
    expect_decodes_back(*v->tokenizer, cases, "qwen2");
}

TEST(TokenizerGolden, Phi3All46) {
    const auto * v = test::phi3_vocab();
    const auto cases = test::load_golden("ggml-vocab-phi-3.gguf");
    ASSERT_EQ(cases.size(), 46u);
    EXPECT_EQ(v->tokenizer->kind(), VocabKind::spm);
    EXPECT_EQ(run_golden(*v->tokenizer, cases, "phi-3"), 46);
    expect_decodes_back(*v->tokenizer, cases, "phi-3");
}

// The examples quoted in §7.2, so a broken .out parser cannot hide behind itself.
TEST(TokenizerGolden, ParserReadsQuotedExamples) {
    const auto llama = test::load_golden("ggml-vocab-llama-bpe.gguf");
    ASSERT_EQ(llama.size(), 46u);
    EXPECT_EQ(llama[2].text, "");
    EXPECT_TRUE(llama[2].ids.empty());
    EXPECT_EQ(llama[3].text, " ");
    EXPECT_EQ(llama[3].ids, (std::vector<int32_t>{220}));
    EXPECT_EQ(llama[11].text, "Hello world");
    EXPECT_EQ(llama[11].ids, (std::vector<int32_t>{9906, 1917}));
    const auto phi = test::load_golden("ggml-vocab-phi-3.gguf");
    ASSERT_EQ(phi.size(), 46u);
    EXPECT_EQ(phi[7].text, "\n");
    EXPECT_EQ(phi[7].ids, (std::vector<int32_t>{29871, 13}));
}

}  // namespace
}  // namespace tern
