// config.json parsing for BitNetForCausalLM: values and defaults, and one error per rule naming the key.
#include "convert/hf_config.h"
#include "core/error.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace tern {
namespace {

nlohmann::json base_config() {
    return {{"architectures", {"BitNetForCausalLM"}}, {"model_type", "bitnet"}, {"hidden_size", 2560},
            {"intermediate_size", 6912}, {"num_hidden_layers", 30}, {"num_attention_heads", 20},
            {"num_key_value_heads", 5}, {"vocab_size", 128256}, {"max_position_embeddings", 4096},
            {"rms_norm_eps", 1e-5}, {"rope_theta", 500000.0}, {"hidden_act", "relu2"},
            {"tie_word_embeddings", true}, {"bos_token_id", 128000}, {"eos_token_id", 128001},
            {"quantization_config", {{"quant_method", "bitnet"}, {"linear_class", "autobitlinear"}, {"quantization_mode", "offline"}}}};
}

void expect_error(const nlohmann::json & c, ErrorKind kind, const std::vector<std::string> & fragments) {
    try {
        parse_hf_config(c.dump(), "config.json");
        ADD_FAILURE() << "accepted " << c.dump();
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        for (const auto & f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
}

TEST(HfConfig, Reads2B4TValues) {
    const HfBitnetConfig c = parse_hf_config(base_config().dump(), "config.json");
    EXPECT_EQ(c.hidden_size, 2560);
    EXPECT_EQ(c.intermediate_size, 6912);
    EXPECT_EQ(c.n_layers, 30);
    EXPECT_EQ(c.n_heads, 20);
    EXPECT_EQ(c.n_kv_heads, 5);
    EXPECT_EQ(c.head_dim, 128);
    EXPECT_FALSE(c.head_dim_explicit);
    EXPECT_EQ(c.q_dim(), 2560);
    EXPECT_EQ(c.kv_dim(), 640);
    EXPECT_EQ(c.vocab_size, 128256);
    EXPECT_EQ(c.context_length, 4096);
    EXPECT_EQ(c.rms_norm_eps, 1e-5);
    EXPECT_EQ(c.rope_theta, 500000.0);
    EXPECT_EQ(c.tie_word_embeddings, true);
    EXPECT_EQ(c.linear_class, LinearClass::autobitlinear);
    EXPECT_TRUE(c.linear_class_explicit);
    EXPECT_EQ(c.quantization_mode, "offline");
    EXPECT_EQ(c.bos_token_id, 128000);
    EXPECT_EQ(c.eos_token_id, 128001);
    EXPECT_FALSE(c.pad_token_id.has_value());
}

TEST(HfConfig, Defaults) {
    auto j = base_config();
    j.erase("num_key_value_heads");
    j.erase("tie_word_embeddings");
    j.erase("quantization_config");
    j["eos_token_id"] = {128001, 128009};
    j["head_dim"]     = 64;
    const HfBitnetConfig c = parse_hf_config(j.dump(), "config.json");
    EXPECT_EQ(c.n_kv_heads, 20);
    EXPECT_FALSE(c.tie_word_embeddings.has_value());
    EXPECT_FALSE(c.has_quantization_config);
    EXPECT_EQ(c.linear_class, LinearClass::bitlinear);  // the transformers default
    EXPECT_FALSE(c.linear_class_explicit);
    EXPECT_EQ(c.eos_token_id, 128001);  // first of a list
    EXPECT_EQ(c.head_dim, 64);
    EXPECT_TRUE(c.head_dim_explicit);
    EXPECT_EQ(c.q_dim(), 1280);
}

TEST(HfConfig, RejectsBadValues) {
    auto edit = [](auto f) {
        auto j = base_config();
        f(j);
        return j;
    };
    using J = nlohmann::json;
    expect_error(edit([](J & j) { j.erase("hidden_size"); }), ErrorKind::invalid_model, {"config.json", "hidden_size", "missing"});
    expect_error(edit([](J & j) { j["hidden_size"] = 0; }), ErrorKind::invalid_model, {"hidden_size", "[1, 4294967295]", "found 0"});
    expect_error(edit([](J & j) { j["hidden_size"] = 2560.5; }), ErrorKind::invalid_model, {"hidden_size", "integer", "2560.5"});
    expect_error(edit([](J & j) { j["vocab_size"] = 1ull << 40; }), ErrorKind::invalid_model, {"vocab_size"});
    expect_error(edit([](J & j) { j["num_key_value_heads"] = 6; }), ErrorKind::invalid_model, {"num_key_value_heads", "multiple"});
    expect_error(edit([](J & j) { j["num_attention_heads"] = 7, j["num_key_value_heads"] = 7; }), ErrorKind::invalid_model,
                 {"hidden_size", "num_attention_heads"});
    expect_error(edit([](J & j) { j["head_dim"] = 63; }), ErrorKind::invalid_model, {"63", "even"});
    expect_error(edit([](J & j) { j["rms_norm_eps"] = -1e-5; }), ErrorKind::invalid_model, {"rms_norm_eps"});
    expect_error(edit([](J & j) { j["rms_norm_eps"] = "small"; }), ErrorKind::invalid_model, {"rms_norm_eps", "number"});
    expect_error(edit([](J & j) { j["rope_theta"] = 0; }), ErrorKind::invalid_model, {"rope_theta"});
    expect_error(edit([](J & j) { j.erase("hidden_act"); }), ErrorKind::invalid_model, {"hidden_act"});
    expect_error(edit([](J & j) { j["hidden_act"] = "silu"; }), ErrorKind::unsupported, {"hidden_act", "\"silu\"", "relu2"});
    expect_error(edit([](J & j) { j["architectures"] = {"BitnetForCausalLM"}; }), ErrorKind::unsupported, {"BitnetForCausalLM"});
    expect_error(edit([](J & j) { j["model_type"] = "llama"; }), ErrorKind::unsupported, {"model_type", "llama"});
    expect_error(edit([](J & j) { j["rope_scaling"] = {{"rope_type", "yarn"}}; }), ErrorKind::unsupported, {"rope_scaling"});
    expect_error(edit([](J & j) { j["tie_word_embeddings"] = 1; }), ErrorKind::invalid_model, {"tie_word_embeddings"});
    // A context tern's loader would refuse (context_length above 2^24) is refused here, before any GGUF is written.
    expect_error(edit([](J & j) { j["max_position_embeddings"] = (1 << 24) + 1; }), ErrorKind::invalid_model,
                 {"max_position_embeddings", "16777217", "16777216"});
    // Values from the file are described, not printed whole or raw.
    expect_error(edit([](J & j) { j["hidden_act"] = std::string(5000, 'x') + "\x1b"; }), ErrorKind::unsupported,
                 {"hidden_act", "xxx..."});
    expect_error(edit([](J & j) { j["hidden_size"] = J::array({1, 2, 3, 4, 5, 6, 7, 8, 9}); }), ErrorKind::invalid_model,
                 {"hidden_size", "an array of 9 items"});
    expect_error(edit([](J & j) { j["quantization_config"] = "bitnet"; }), ErrorKind::invalid_model, {"quantization_config"});
    expect_error(edit([](J & j) { j["quantization_config"]["linear_class"] = "BitLinear"; }), ErrorKind::invalid_model,
                 {"linear_class", "BitLinear"});
    expect_error(edit([](J & j) { j["quantization_config"]["quantization_mode"] = 3; }), ErrorKind::invalid_model,
                 {"quantization_mode", "string"});
    expect_error(edit([](J & j) { j["quantization_config"]["quantization_mode"] = "lazy"; }), ErrorKind::invalid_model,
                 {"quantization_mode", "lazy"});
    expect_error(edit([](J & j) { j["bos_token_id"] = -1; }), ErrorKind::invalid_model, {"bos_token_id"});
    expect_error(J::array({1, 2}), ErrorKind::invalid_model, {"object"});
}

TEST(HfConfig, Transformers5RopeParameters) {
    auto j = base_config();
    j.erase("rope_theta");
    j["rope_parameters"] = {{"rope_theta", 10000.0}, {"rope_type", "default"}};
    EXPECT_EQ(parse_hf_config(j.dump(), "config.json").rope_theta, 10000.0);
    j["rope_parameters"]["rope_type"] = "yarn";
    expect_error(j, ErrorKind::unsupported, {"rope_type", "yarn"});
    j["rope_parameters"] = {{"rope_theta", -1}};
    expect_error(j, ErrorKind::invalid_model, {"rope_theta"});
    j.erase("rope_parameters");
    expect_error(j, ErrorKind::invalid_model, {"missing", "rope_theta"});
}

TEST(HfConfig, RejectsBadJson) {
    for (const std::string text : {"", "{", "{\"hidden_size\": 1,}", "{\"a\": 1, \"a\": 2}", "nul"}) {
        EXPECT_THROW(parse_hf_config(text, "config.json"), Error) << text;
    }
}

}  // namespace
}  // namespace tern
