// Converts the checkpoints that transformers itself wrote (tests/data/hf_parity: packed uint8 +
// weight_scale tied and untied, float32 masters; transformers 5 config with rope_parameters) and
// checks hyper-parameters, tensor list and every ternary matrix and scale against the source.
#include "convert/hf_convert.h"
#include "convert/safetensors.h"
#include "gguf/gguf_reader.h"
#include "quant/ternary_formats.h"
#include "test_util.h"
#include "tiny_checkpoint.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tern {
namespace {

nlohmann::json read_json(const std::filesystem::path & p) {
    std::ifstream     f(p);
    std::stringstream s;
    s << f.rdbuf();
    return nlohmann::json::parse(s.str());
}

class HfParityConvert : public ::testing::TestWithParam<std::string> {};

TEST_P(HfParityConvert, MatchesTheCheckpoint) {
    const std::filesystem::path dir = test::data_path("hf_parity/" + GetParam());
    if (!std::filesystem::exists(dir / "config.json")) GTEST_SKIP() << "no " << dir;
    const auto cfg = read_json(dir / "config.json");

    ConvertOptions o;
    o.input_dir   = dir.string();
    o.output_path = (test::temp_dir("hfp-" + GetParam()) / "out.gguf").string();
    o.progress    = false;
    convert_hf_checkpoint(o);
    const GgufFile f = GgufFile::open(o.output_path);

    const std::string a       = "bitnet-b1.58.";
    const int64_t     n_embd  = cfg["hidden_size"], n_head = cfg["num_attention_heads"], n_layer = cfg["num_hidden_layers"];
    const int64_t     head_dim = cfg.contains("head_dim") && !cfg["head_dim"].is_null() ? cfg["head_dim"].get<int64_t>() : n_embd / n_head;
    EXPECT_EQ(f.get_string("general.name").value(), GetParam());
    EXPECT_EQ(f.get_int(a + "embedding_length").value(), n_embd);
    EXPECT_EQ(f.get_int(a + "block_count").value(), n_layer);
    EXPECT_EQ(f.get_int(a + "feed_forward_length").value(), cfg["intermediate_size"].get<int64_t>());
    EXPECT_EQ(f.get_int(a + "attention.head_count_kv").value(), cfg["num_key_value_heads"].get<int64_t>());
    EXPECT_EQ(f.get_int(a + "rope.dimension_count").value(), head_dim);
    EXPECT_EQ(f.get_int(a + "vocab_size").value(), cfg["vocab_size"].get<int64_t>());
    EXPECT_EQ(f.get_float(a + "rope.freq_base").value(), cfg["rope_parameters"]["rope_theta"].get<double>());
    EXPECT_EQ(f.find(a + "attention.key_length") != nullptr, head_dim * n_head != n_embd);
    EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id").value(), cfg["bos_token_id"].get<int64_t>());
    EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id").value(), cfg["eos_token_id"].get<int64_t>());

    const bool untied = !cfg["tie_word_embeddings"].get<bool>();
    EXPECT_EQ(f.tensors().size(), static_cast<size_t>(2 + 11 * n_layer + (untied ? 1 : 0)));
    EXPECT_EQ(f.find_tensor("output.weight") != nullptr, untied);

    const auto ck = SafetensorsCheckpoint::open_dir(dir.string());
    const std::pair<const char *, const char *> proj[] = {
        {"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"}, {"self_attn.v_proj", "attn_v"},
        {"self_attn.o_proj", "attn_output"}, {"mlp.gate_proj", "ffn_gate"}, {"mlp.up_proj", "ffn_up"},
        {"mlp.down_proj", "ffn_down"},
    };
    for (int64_t il = 0; il < n_layer; ++il) {
        for (const auto & [hf, gg] : proj) {
            const std::string hf_name = "model.layers." + std::to_string(il) + "." + hf;
            const StTensor *  w       = ck.find(hf_name + ".weight");
            ASSERT_NE(w, nullptr) << hf_name;
            const GgufTensorInfo * t = f.find_tensor("blk." + std::to_string(il) + "." + gg + ".weight");
            ASSERT_NE(t, nullptr);
            const int64_t       out = t->ne[1], in = t->ne[0];
            std::vector<int8_t> want(static_cast<size_t>(out * in));
            float               want_scale = 0;
            if (w->dtype == StDType::u8) {  // independent unpack: row quarter k in bits 2k..2k+1
                const int64_t q = out / 4;
                for (int64_t r = 0; r < out; ++r) {
                    for (int64_t c = 0; c < in; ++c) {
                        want[static_cast<size_t>(r * in + c)] =
                            static_cast<int8_t>(((w->data[static_cast<size_t>((r % q) * in + c)] >> (2 * (r / q))) & 3) - 1);
                    }
                }
                st_read_f32(*ck.find(hf_name + ".weight_scale"), 0, 1, &want_scale);  // autobitlinear: multiplier
            } else {
                std::vector<float> m(static_cast<size_t>(w->n_elements));
                st_read_f32(*w, 0, w->n_elements, m.data());
                want = test::reference_absmean(m, want_scale);
            }
            std::vector<int8_t> got(want.size());
            const auto          data = f.tensor_data(*t);
            i2s_decode(data.data(), 0, t->n_elements, got.data());
            EXPECT_EQ(got, want) << hf_name;
            EXPECT_EQ(i2s_tensor_scale(data, t->n_elements), want_scale) << hf_name;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Data, HfParityConvert, ::testing::Values("tiny_tied", "hd128_untied", "online_masters"),
                         [](const auto & param_info) { return std::string(param_info.param); });

}  // namespace
}  // namespace tern
