// `tern convert` on broken inputs: every defect gives a tern::Error whose message names the tensor,
// key or option, and nothing is written.
#include "convert/hf_convert.h"
#include "core/error.h"
#include "tiny_checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace tern {
namespace {

using test::TinyCheckpoint;
using test::TinySpec;

ConvertOptions options_for(const TinyCheckpoint & ck) {
    ConvertOptions o;
    o.input_dir   = ck.dir.string();
    o.output_path = (ck.dir.parent_path() / "out.gguf").string();
    o.progress    = false;
    return o;
}

// Converts, expecting Error(kind) whose message contains every fragment, and no output file.
void expect_convert_error(const ConvertOptions & o, ErrorKind kind, const std::vector<std::string> & fragments) {
    try {
        convert_hf_checkpoint(o);
        ADD_FAILURE() << "no error thrown";
    } catch (const Error & e) {
        EXPECT_EQ(e.kind(), kind) << error_kind_name(e.kind()) << ": " << e.what();
        for (const auto & f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(o.output_path)) << "output written despite the error";
    EXPECT_FALSE(std::filesystem::exists(o.output_path + ".tmp"));
}

// Makes a fresh tiny checkpoint, lets mutate break it, rewrites it, and expects the error.
void expect_broken(const std::string & tag, const std::function<void(TinyCheckpoint &)> & mutate, ErrorKind kind,
                   const std::vector<std::string> & fragments, TinySpec spec = {}) {
    SCOPED_TRACE(tag);
    auto ck = test::make_tiny_checkpoint(tag, spec);
    mutate(ck);
    ck.write();
    expect_convert_error(options_for(ck), kind, fragments);
}

const std::string k_q0 = "model.layers.0.self_attn.q_proj.weight";

TEST(ConvertErrors, MissingTensor) {
    expect_broken("err-missing", [](TinyCheckpoint & ck) {
        std::erase_if(ck.tensors, [](const auto & e) { return e.name == "model.layers.1.mlp.ffn_sub_norm.weight"; });
    }, ErrorKind::invalid_model, {"model.layers.1.mlp.ffn_sub_norm.weight", "blk.1.ffn_sub_norm.weight"});
    expect_broken("err-missing-scale", [](TinyCheckpoint & ck) {
        std::erase_if(ck.tensors, [](const auto & e) { return e.name == "model.layers.0.mlp.up_proj.weight_scale"; });
    }, ErrorKind::invalid_model, {"model.layers.0.mlp.up_proj.weight_scale"});
}

TEST(ConvertErrors, WrongDtype) {
    expect_broken("err-dtype-i8", [](TinyCheckpoint & ck) { ck.find(k_q0)->dtype = "I8"; }, ErrorKind::invalid_model,
                  {k_q0, "I8", "U8"});
    expect_broken("err-dtype-norm", [](TinyCheckpoint & ck) {
        auto * e  = ck.find("model.norm.weight");
        e->dtype = "U8";
        e->shape = {static_cast<int64_t>(e->data.size())};
    }, ErrorKind::invalid_model, {"model.norm.weight", "dtype U8"});
    expect_broken("err-dtype-scale", [](TinyCheckpoint & ck) {
        auto * e  = ck.find("model.layers.0.self_attn.k_proj.weight_scale");
        e->dtype = "U8";
        e->data  = {1};
    }, ErrorKind::invalid_model, {"k_proj.weight_scale", "dtype U8"});
    expect_broken("err-dtype-f64", [](TinyCheckpoint & ck) {
        auto * e  = ck.find("model.norm.weight");
        e->dtype = "F64";
        e->data.resize(e->data.size() * 4);
    }, ErrorKind::unsupported, {"model.norm.weight", "F64"});
}

TEST(ConvertErrors, WrongShape) {
    expect_broken("err-shape-packed", [](TinyCheckpoint & ck) {
        auto * e  = ck.find(k_q0);
        e->shape = {e->shape[1], e->shape[0]};  // transposed
    }, ErrorKind::invalid_model, {k_q0, "[128, 32]", "expected [32, 128]"});
    expect_broken("err-shape-norm", [](TinyCheckpoint & ck) {
        auto * e  = ck.find("model.layers.1.input_layernorm.weight");
        e->shape = {64, 2};
    }, ErrorKind::invalid_model, {"model.layers.1.input_layernorm.weight", "[64, 2]", "expected [128]"});
    expect_broken("err-shape-embd", [](TinyCheckpoint & ck) {
        auto * e  = ck.find("model.embed_tokens.weight");
        e->shape = {150, 256};
    }, ErrorKind::invalid_model, {"model.embed_tokens.weight", "expected [300, 128]"});
    expect_broken("err-shape-scale", [](TinyCheckpoint & ck) {
        auto * e  = ck.find("model.layers.0.mlp.down_proj.weight_scale");
        e->shape = {2};
        e->data.resize(4);
    }, ErrorKind::invalid_model, {"down_proj.weight_scale", "one element"});
}

TEST(ConvertErrors, NotTernary) {
    // One packed field = 3 at dense row 32 + 5 (quarter 1, p = 5), column 7.
    expect_broken("err-code3", [](TinyCheckpoint & ck) {
        auto * e              = ck.find("model.layers.1.self_attn.o_proj.weight");
        e->data[5 * 128 + 7] |= 0x0c;
    }, ErrorKind::invalid_model, {"model.layers.1.self_attn.o_proj.weight", "not ternary", "row 37, column 7"});
    expect_broken("err-scale-neg", [](TinyCheckpoint & ck) {
        ck.find("model.layers.0.mlp.gate_proj.weight_scale")->data = test::bf16_bytes({-1.0f});
    }, ErrorKind::invalid_model, {"gate_proj.weight_scale", "> 0"});
    TinySpec master;
    master.packed = false;
    expect_broken("err-nan-master", [](TinyCheckpoint & ck) {
        auto & d = ck.find(k_q0)->data;
        d[2 * 130] = 0xc0, d[2 * 130 + 1] = 0x7f;  // bf16 NaN at [1, 2]
    }, ErrorKind::invalid_model, {k_q0, "non-finite", "[1, 2]"}, master);
}

TEST(ConvertErrors, BadConfigValues) {
    auto with_config = [](const std::string & tag, const std::function<void(nlohmann::json &)> & edit, ErrorKind kind,
                          const std::vector<std::string> & fragments) {
        expect_broken(tag, [&](TinyCheckpoint & ck) { edit(ck.config); }, kind, fragments);
    };
    with_config("cfg-act", [](auto & c) { c["hidden_act"] = "silu"; }, ErrorKind::unsupported, {"hidden_act", "silu", "relu2"});
    with_config("cfg-arch", [](auto & c) { c["architectures"] = {"GPT2LMHeadModel"}; }, ErrorKind::unsupported,
                {"architectures", "GPT2LMHeadModel"});
    // A Llama class goes to the family converter, which names what it cannot take.
    with_config("cfg-arch-llama", [](auto & c) { c["architectures"] = {"LlamaForCausalLM"}; }, ErrorKind::unsupported,
                {"hidden_act", "relu2", "silu"});
    with_config("cfg-hidden", [](auto & c) { c["hidden_size"] = -128; }, ErrorKind::invalid_model, {"hidden_size", "-128"});
    with_config("cfg-hidden-str", [](auto & c) { c["hidden_size"] = "128"; }, ErrorKind::invalid_model,
                {"hidden_size", "integer"});
    with_config("cfg-layers", [](auto & c) { c.erase("num_hidden_layers"); }, ErrorKind::invalid_model, {"num_hidden_layers"});
    with_config("cfg-kv", [](auto & c) { c["num_key_value_heads"] = 3; }, ErrorKind::invalid_model,
                {"num_attention_heads", "num_key_value_heads"});
    with_config("cfg-eps", [](auto & c) { c["rms_norm_eps"] = 0; }, ErrorKind::invalid_model, {"rms_norm_eps"});
    with_config("cfg-lc", [](auto & c) { c["quantization_config"]["linear_class"] = "fancy"; }, ErrorKind::invalid_model,
                {"linear_class", "fancy"});
    with_config("cfg-qm", [](auto & c) { c["quantization_config"]["quant_method"] = "gptq"; }, ErrorKind::unsupported,
                {"quant_method", "gptq"});
    with_config("cfg-rope", [](auto & c) { c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}}; }, ErrorKind::unsupported,
                {"rope_scaling"});
    with_config("cfg-vocab", [](auto & c) { c["vocab_size"] = 200; }, ErrorKind::invalid_model, {"vocab_size"});
    with_config("cfg-tie", [](auto & c) { c["tie_word_embeddings"] = false; }, ErrorKind::invalid_model,
                {"lm_head.weight", "tie_word_embeddings"});
}

TEST(ConvertErrors, BadOptions) {
    const auto ck = test::make_tiny_checkpoint("err-opts");
    auto o        = options_for(ck);
    o.ternary_type = DType::q4_0;
    expect_convert_error(o, ErrorKind::invalid_argument, {"--type", "q4_0"});
    o              = options_for(ck);
    o.embd_type    = DType::i2_s;
    expect_convert_error(o, ErrorKind::invalid_argument, {"--embd-type", "i2_s"});
    o      = options_for(ck);
    o.arch = "llama";
    expect_convert_error(o, ErrorKind::invalid_argument, {"--arch", "llama"});
    // Row length 128 is not a whole number of 256-element TQ2_0 / Q6_K blocks.
    o              = options_for(ck);
    o.ternary_type = DType::tq2_0;
    expect_convert_error(o, ErrorKind::invalid_model, {"blk.0.attn_q.weight", "tq2_0", "multiple of 256"});
    o           = options_for(ck);
    o.embd_type = DType::q6_k;
    expect_convert_error(o, ErrorKind::invalid_model, {"token_embd.weight", "q6_k"});
    o           = options_for(ck);
    o.input_dir = (ck.dir / "nope").string();
    expect_convert_error(o, ErrorKind::io, {"nope"});
}

TEST(ConvertErrors, MissingFiles) {
    auto ck = test::make_tiny_checkpoint("err-files");
    std::filesystem::remove(ck.dir / "tokenizer.json");
    expect_convert_error(options_for(ck), ErrorKind::io, {"tokenizer.json"});
    ck.write();
    std::filesystem::remove(ck.dir / "config.json");
    expect_convert_error(options_for(ck), ErrorKind::io, {"config.json"});
    ck.write();
    std::filesystem::remove(ck.dir / "model.safetensors");
    expect_convert_error(options_for(ck), ErrorKind::io, {"safetensors"});
}

TEST(ConvertErrors, SpecialTokenIds) {
    // Without tokenizer_config.json the ids come from config.json; without either, it is an error.
    auto ck = test::make_tiny_checkpoint("err-special");
    std::filesystem::remove(ck.dir / "tokenizer_config.json");
    auto o = options_for(ck);
    convert_hf_checkpoint(o);
    std::filesystem::remove(o.output_path);
    ck.config.erase("eos_token_id");
    ck.write();
    std::filesystem::remove(ck.dir / "tokenizer_config.json");
    expect_convert_error(o, ErrorKind::invalid_model, {"EOS token id"});
    ck.config["eos_token_id"] = 300;
    ck.write();
    std::filesystem::remove(ck.dir / "tokenizer_config.json");
    expect_convert_error(o, ErrorKind::invalid_model, {"EOS token id 300", "[0, 300)"});
}

TEST(ConvertErrors, BrokenSafetensorsFile) {
    auto ck   = test::make_tiny_checkpoint("err-trunc");
    auto path = ck.dir / "model.safetensors";
    std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
    expect_convert_error(options_for(ck), ErrorKind::invalid_model, {"model.safetensors", "run past"});
}

TEST(ConvertErrors, BrokenShardIndex) {
    TinySpec spec;
    spec.sharded = true;
    auto ck      = test::make_tiny_checkpoint("err-index", spec);
    test::write_text(ck.dir / "model.safetensors.index.json",
                     R"({"weight_map": {"model.norm.weight": "model-00001-of-00002.safetensors"}})");
    expect_convert_error(options_for(ck), ErrorKind::invalid_model, {"model.norm.weight", "does not contain"});
    test::write_text(ck.dir / "model.safetensors.index.json", R"({"weight_map": {"model.norm.weight": "../x.safetensors"}})");
    expect_convert_error(options_for(ck), ErrorKind::invalid_model, {"../x.safetensors"});
    test::write_text(ck.dir / "model.safetensors.index.json", R"({"weight_map": [1, 2]})");
    expect_convert_error(options_for(ck), ErrorKind::invalid_model, {"weight_map"});
}

}  // namespace
}  // namespace tern
