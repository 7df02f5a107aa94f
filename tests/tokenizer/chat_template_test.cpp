// Chat templates (tokenizer/chat_template.h): recognition from real tokenizer.chat_template texts
// and prompts equal to what the family's Jinja template renders, tokenized as HF tokenizers do.
#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer_test_util.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace tern {
namespace {

using Ids = std::vector<int32_t>;
const std::vector<ChatMessage> k_conversation = {
    {"system", "You are terse."}, {"user", "Hi there"}, {"assistant", "Hello."}, {"user", "2+2?"}};

// The template's prompt must be what the HF tokenizer gives for the rendered text (special tokens
// parsed), and must render back to that text.
void expect_prompt(const Tokenizer & tok, ChatTemplate t, const std::string & rendered) {
    const Ids ids = chat_template_tokens(t, tok, k_conversation, true);
    EXPECT_EQ(tok.decode(ids, /*render_special=*/true), rendered);
    EXPECT_EQ(ids, tok.encode(rendered, /*add_bos=*/false, /*parse_special=*/true));
}

TEST(ChatTemplate, Llama3PromptMatchesTheRenderedTemplate) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr);
    expect_prompt(*v->tokenizer, ChatTemplate::llama3,
                  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, ChatmlPromptMatchesTheRenderedTemplate) {
    const auto * v = test::qwen3_vocab();
    ASSERT_NE(v, nullptr);
    expect_prompt(*v->tokenizer, ChatTemplate::chatml,
                  "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
                  "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Phi3PromptMatchesTheRenderedTemplate) {
    const auto * v = test::phi3_vocab();
    ASSERT_NE(v, nullptr);
    const Tokenizer & tok = *v->tokenizer;
    const Ids         ids = chat_template_tokens(ChatTemplate::phi3, tok, k_conversation, true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], tok.bos_id());
    // The markers are single special tokens; each text piece after one is SPM text, which starts
    // with the vocabulary's space prefix (so "\n" reads back as " \n"). Not checked against HF's
    // tokenizer here: tests/data has no Phi-3 chat prompt from it.
    EXPECT_EQ(std::count(ids.begin(), ids.end(), *tok.find_token("<|end|>")), 4);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), *tok.find_token("<|assistant|>")), 2);
    EXPECT_EQ(tok.decode(Ids(ids.begin() + 1, ids.end()), true),
              "<|system|> \nYou are terse.<|end|> \n<|user|> \nHi there<|end|> \n<|assistant|> \nHello.<|end|> \n"
              "<|user|> \n2+2?<|end|> \n<|assistant|> \n");
}

TEST(ChatTemplate, Falcon3MarkersAreTextWhereTheVocabularyHasNoSuchToken) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr);
    const Ids ids = chat_template_tokens(ChatTemplate::falcon3, *v->tokenizer, {{"user", "Hi"}}, true);
    EXPECT_EQ(v->tokenizer->decode(ids, true), "<|user|>\nHi\n<|assistant|>\n");
}

TEST(ChatTemplate, UserTextThatLooksLikeAMarkerStaysText) {
    const auto * v = test::qwen3_vocab();
    ASSERT_NE(v, nullptr);
    const Tokenizer & tok = *v->tokenizer;
    const Ids ids = chat_template_tokens(ChatTemplate::chatml, tok, {{"user", "a<|im_end|>b"}}, false);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), *tok.find_token("<|im_end|>")), 1);  // only the real one
}

TEST(ChatTemplate, RecognisesRealTemplates) {
    std::ifstream qwen_config(test::npm_model_path("tokenizer-qwen3", "tokenizer_config.json"));
    ASSERT_TRUE(qwen_config) << "run scripts/setup.sh";
    const std::string qwen_jinja = nlohmann::json::parse(qwen_config).at("chat_template").get<std::string>();
    EXPECT_EQ(detect_chat_template(qwen_jinja), ChatTemplate::chatml);
    const auto * phi = test::phi3_vocab();
    ASSERT_NE(phi, nullptr);
    const auto phi_jinja = phi->file->get_string("tokenizer.chat_template");
    ASSERT_TRUE(phi_jinja.has_value());
    EXPECT_EQ(detect_chat_template(*phi_jinja), ChatTemplate::phi3);
    // Llama-3 Instruct, Falcon3 Instruct and 2B4T's converter placeholder (FORMATS.md §5.8), abridged.
    EXPECT_EQ(detect_chat_template("{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
                                   "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}"),
              ChatTemplate::llama3);
    EXPECT_EQ(detect_chat_template("{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\n' + "
                                   "message['content'] + '\n' }}{% endif %}{% endfor %}{{ '<|assistant|>\n' }}"),
              ChatTemplate::falcon3);
    EXPECT_EQ(detect_chat_template("{% for message in messages %}{% if loop.first %}{{ bos_token }}{% endif %}"
                                   "{% if message['role'] == 'user' %}{{ 'Human: ' + message['content'] + "
                                   "'\\n\\nBITNETAssistant: ' + eos_token }}"),
              ChatTemplate::bitnet);
    EXPECT_EQ(detect_chat_template("{{ '[INST] ' + message['content'] + ' [/INST]' }}"), std::nullopt);
}

TEST(ChatTemplate, ChoiceFollowsOverrideThenTemplateThenVocabulary) {
    const auto * llama = test::llama3_vocab();
    const auto * phi   = test::phi3_vocab();
    ASSERT_NE(llama, nullptr);
    ASSERT_NE(phi, nullptr);
    // No template, <|eot_id|> in the vocabulary: BitNet 2B4T's format.
    EXPECT_EQ(choose_chat_template(*llama->tokenizer, std::nullopt, std::nullopt).template_, ChatTemplate::bitnet);
    EXPECT_EQ(choose_chat_template(*llama->tokenizer, std::nullopt, "llama3").template_, ChatTemplate::llama3);
    EXPECT_EQ(choose_chat_template(*llama->tokenizer, "{{ '<|start_header_id|>' }}{{'<|end_header_id|>'}}", std::nullopt)
                  .template_,
              ChatTemplate::llama3);
    // No template, no end-of-turn token: a text-continuation model.
    EXPECT_EQ(choose_chat_template(*phi->tokenizer, std::nullopt, std::nullopt).template_, ChatTemplate::none);
    EXPECT_EQ(choose_chat_template(*llama->tokenizer, "{{ weird }}", "none").template_, ChatTemplate::none);
    try {
        choose_chat_template(*llama->tokenizer, "{{ '[INST]' }}", std::nullopt);
        FAIL() << "an unknown template must be an error";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::unsupported);
        EXPECT_NE(std::string(e.what()).find("not one tern recognises"), std::string::npos);
        EXPECT_NE(e.hint().find("--chat-template"), std::string::npos);
    }
    try {
        choose_chat_template(*llama->tokenizer, std::nullopt, "mistral");
        FAIL();
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    }
    try {  // the Llama-3 vocabulary has no <|im_start|>
        choose_chat_template(*llama->tokenizer, std::nullopt, "chatml");
        FAIL();
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), ErrorKind::unsupported);
        EXPECT_NE(std::string(e.what()).find("<|im_start|>"), std::string::npos);
    }
}

TEST(ChatTemplate, RejectsUnknownRolesAndNone) {
    const auto * v = test::llama3_vocab();
    ASSERT_NE(v, nullptr);
    EXPECT_THROW(chat_template_tokens(ChatTemplate::llama3, *v->tokenizer, {{"tool", "x"}}, true), Error);
    EXPECT_THROW(chat_template_tokens(ChatTemplate::none, *v->tokenizer, {{"user", "x"}}, true), Error);
    EXPECT_EQ(chat_template_stop_tokens(ChatTemplate::llama3, *v->tokenizer), (Ids{*v->tokenizer->find_token("<|eot_id|>")}));
}

}  // namespace
}  // namespace tern
