// End-to-end `tern convert` tests: synthetic HF BitNet folders (packed U8 and bf16 masters) are
// converted and read back with GgufFile: the exact key list, order and types of FORMATS.md §4.3
// (plus tokenizer.ggml.pre, which the official file lacks by mistake),
// tensor names / types / shapes of §4.4, and bit-exact ternary matrices and scales.
#include "convert/hf_convert.h"
#include "core/error.h"
#include "core/fp16.h"
#include "gguf/gguf_reader.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"
#include "tiny_checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace tern {
namespace {

using test::TinyCheckpoint;
using test::TinySpec;

struct KeySpec {
    std::string name;
    GgufType    type;
};

std::vector<KeySpec> expected_keys(const std::string & arch, bool head_dim_keys) {
    const std::string a = arch + ".";
    std::vector<KeySpec> k = {
        {"general.architecture", GgufType::string},
        {"general.name", GgufType::string},
        {a + "vocab_size", GgufType::u32},
        {a + "context_length", GgufType::u32},
        {a + "embedding_length", GgufType::u32},
        {a + "block_count", GgufType::u32},
        {a + "feed_forward_length", GgufType::u32},
        {a + "rope.dimension_count", GgufType::u32},
        {a + "attention.head_count", GgufType::u32},
        {a + "attention.head_count_kv", GgufType::u32},
    };
    if (head_dim_keys) {
        k.push_back({a + "attention.key_length", GgufType::u32});
        k.push_back({a + "attention.value_length", GgufType::u32});
    }
    const std::vector<KeySpec> rest = {
        {"tokenizer.ggml.add_bos_token", GgufType::boolean},
        {a + "attention.layer_norm_rms_epsilon", GgufType::f32},
        {a + "rope.freq_base", GgufType::f32},
        {"general.file_type", GgufType::u32},
        {"tokenizer.ggml.model", GgufType::string},
        {"tokenizer.ggml.pre", GgufType::string},  // beyond the official file on purpose (FORMATS.md §5.6)
        {"tokenizer.ggml.tokens", GgufType::array},
        {"tokenizer.ggml.scores", GgufType::array},
        {"tokenizer.ggml.token_type", GgufType::array},
        {"tokenizer.ggml.merges", GgufType::array},
        {"tokenizer.ggml.bos_token_id", GgufType::u32},
        {"tokenizer.ggml.eos_token_id", GgufType::u32},
        {"tokenizer.ggml.padding_token_id", GgufType::u32},
        {"general.quantization_version", GgufType::u32},
    };
    k.insert(k.end(), rest.begin(), rest.end());
    return k;
}

std::vector<std::string> expected_tensor_names(const TinyCheckpoint & ck) {
    std::vector<std::string> names = {"token_embd.weight"};
    for (int64_t il = 0; il < ck.spec.n_layers; ++il) {
        for (const char * s : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_sub_norm", "attn_output", "ffn_norm",
                               "ffn_gate", "ffn_up", "ffn_sub_norm", "ffn_down"}) {
            names.push_back("blk." + std::to_string(il) + "." + s + ".weight");
        }
    }
    names.push_back("output_norm.weight");
    if (ck.spec.lm_head && !ck.spec.tie.value_or(false)) names.push_back("output.weight");
    return names;
}

std::string convert(const TinyCheckpoint & ck, DType ternary = DType::i2_s, DType embd = DType::f16,
                    const std::string & arch = "bitnet-b1.58") {
    ConvertOptions o;
    o.input_dir    = ck.dir.string();
    o.output_path  = (ck.dir.parent_path() / "out.gguf").string();
    o.ternary_type = ternary;
    o.embd_type    = embd;
    o.progress     = false;
    o.arch         = arch;
    convert_hf_checkpoint(o);
    return o.output_path;
}

// Decodes a ternary GGUF tensor into values and (for I2_S) the tensor scale; for TQ types every
// block's d must equal fp16(scale) and is returned as scale.
std::vector<int8_t> decode_ternary(const GgufFile & f, const GgufTensorInfo & info, float & scale) {
    const auto          data = f.tensor_data(info);
    const int64_t       n    = info.n_elements;
    std::vector<int8_t> v(static_cast<size_t>(n));
    if (info.type == DType::i2_s) {
        i2s_decode(data.data(), 0, n, v.data());
        scale = i2s_tensor_scale(data, n);
        return v;
    }
    const uint32_t bb = dtype_traits(info.type).block_bytes;
    for (int64_t b = 0; b < n / 256; ++b) {
        float d = 0;
        if (info.type == DType::tq2_0) {
            tq2_0_decode_block(data.data() + b * bb, v.data() + 256 * b, d);
        } else {
            tq1_0_decode_block(data.data() + b * bb, v.data() + 256 * b, d);
        }
        if (b == 0) scale = d;
        EXPECT_EQ(d, scale) << info.name << " block " << b;
    }
    return v;
}

void check_gguf(const TinyCheckpoint & ck, const std::string & path, DType ternary = DType::i2_s, DType embd = DType::f16,
                const std::string & arch = "bitnet-b1.58") {
    const GgufFile f  = GgufFile::open(path);
    const auto &   sp = ck.spec;
    const int64_t  hd = ck.head_dim();

    // Keys: exactly the official list, in order, with the official types.
    const auto keys = expected_keys(arch, hd * sp.n_heads != sp.hidden);
    ASSERT_EQ(f.kvs().size(), keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
        EXPECT_EQ(f.kvs()[i].key, keys[i].name) << "key " << i;
        EXPECT_EQ(f.kvs()[i].value.type, keys[i].type) << keys[i].name;
    }
    const std::string a = arch + ".";
    EXPECT_EQ(f.get_string("general.architecture").value(), arch);
    EXPECT_EQ(f.get_string("general.name").value(), "tiny-bitnet");
    EXPECT_EQ(f.get_int(a + "vocab_size").value(), sp.vocab);
    EXPECT_EQ(f.get_int(a + "context_length").value(), sp.context);
    EXPECT_EQ(f.get_int(a + "embedding_length").value(), sp.hidden);
    EXPECT_EQ(f.get_int(a + "block_count").value(), sp.n_layers);
    EXPECT_EQ(f.get_int(a + "feed_forward_length").value(), sp.intermediate);
    EXPECT_EQ(f.get_int(a + "rope.dimension_count").value(), hd);
    EXPECT_EQ(f.get_int(a + "attention.head_count").value(), sp.n_heads);
    EXPECT_EQ(f.get_int(a + "attention.head_count_kv").value(), sp.n_kv_heads);
    if (hd * sp.n_heads != sp.hidden) {
        EXPECT_EQ(f.get_int(a + "attention.key_length").value(), hd);
        EXPECT_EQ(f.get_int(a + "attention.value_length").value(), hd);
    }
    EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token").value());
    EXPECT_EQ(static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon").value()), 1e-5f);
    EXPECT_EQ(f.get_float(a + "rope.freq_base").value(), 500000.0);
    const int64_t ftype = ternary == DType::i2_s ? 40 : (ternary == DType::tq1_0 ? 36 : 37);
    EXPECT_EQ(f.get_int("general.file_type").value(), ftype);
    EXPECT_EQ(f.get_string("tokenizer.ggml.model").value(), "gpt2");
    const auto tokens = f.get_string_array("tokenizer.ggml.tokens").value();
    ASSERT_EQ(static_cast<int64_t>(tokens.size()), sp.vocab);
    EXPECT_EQ(tokens[0x41], "A");
    EXPECT_EQ(tokens[0x20], "Ġ");
    EXPECT_EQ(tokens[258], "Ġthe");
    EXPECT_EQ(tokens[264], "<|begin_of_text|>");
    EXPECT_EQ(tokens[266], "<|eot_id|>");
    EXPECT_EQ(tokens[299], "[PAD299]");  // padded to vocab_size
    const auto types = f.get_int_array("tokenizer.ggml.token_type").value();
    ASSERT_EQ(types.size(), tokens.size());
    EXPECT_EQ(types[0x41], 1);
    EXPECT_EQ(types[265], 3);
    EXPECT_EQ(types[299], 5);
    const auto scores = f.get_f32_array("tokenizer.ggml.scores").value();
    ASSERT_EQ(scores.size(), tokens.size());
    for (float s : scores) EXPECT_EQ(s, 0.0f);
    const auto merges = f.get_string_array("tokenizer.ggml.merges").value();
    ASSERT_EQ(merges.size(), 8u);
    EXPECT_EQ(merges[0], "Ġ t");
    EXPECT_EQ(merges[2], "Ġt he");
    EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id").value(), 264);
    EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id").value(), 265);
    EXPECT_EQ(f.get_int("tokenizer.ggml.padding_token_id").value(), 265);  // = eos, as in the official file
    EXPECT_EQ(f.get_int("general.quantization_version").value(), 2);
    EXPECT_EQ(f.find("tokenizer.chat_template"), nullptr);
    EXPECT_EQ(f.get_string("tokenizer.ggml.pre").value(), "llama-bpe");

    // Tensors: names in order, types and ggml shapes.
    const auto names = expected_tensor_names(ck);
    ASSERT_EQ(f.tensors().size(), names.size());
    for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(f.tensors()[i].name, names[i]) << "tensor " << i;

    for (const auto & e : ck.ternary) {
        const GgufTensorInfo * t = f.find_tensor(e.gguf_name);
        ASSERT_NE(t, nullptr) << e.gguf_name;
        EXPECT_EQ(t->type, ternary) << e.gguf_name;
        EXPECT_EQ(t->n_dims, 2u);
        EXPECT_EQ(t->ne[0], e.in) << e.gguf_name;
        EXPECT_EQ(t->ne[1], e.out) << e.gguf_name;
        float      scale  = 0;
        const auto values = decode_ternary(f, *t, scale);
        EXPECT_EQ(values, e.values) << e.gguf_name;
        const float want = ternary == DType::i2_s ? e.scale : fp16_to_fp32(fp32_to_fp16(e.scale));
        EXPECT_EQ(scale, want) << e.gguf_name;
    }
    for (const auto & [name, values] : ck.floats) {
        const GgufTensorInfo * t = f.find_tensor(name);
        ASSERT_NE(t, nullptr) << name;
        const bool matrix = name == "token_embd.weight" || name == "output.weight";
        EXPECT_EQ(t->type, matrix ? embd : DType::f32) << name;
        if (matrix) {
            EXPECT_EQ(t->n_dims, 2u);
            EXPECT_EQ(t->ne[0], sp.hidden);
            EXPECT_EQ(t->ne[1], sp.vocab);
        } else {
            EXPECT_EQ(t->n_dims, 1u);
            EXPECT_EQ(t->ne[0], static_cast<int64_t>(values.size()));
        }
        std::vector<float> row(static_cast<size_t>(t->ne[0]));
        for (int64_t r = 0; r < t->rows(); ++r) {
            dequantize_tensor_row(t->type, f.tensor_data(*t), t->n_elements, t->ne[0], r, row.data());
            for (int64_t c = 0; c < t->ne[0]; ++c) {
                const float src = values[static_cast<size_t>(r * t->ne[0] + c)];
                float       want = src;
                if (t->type == DType::f16) want = fp16_to_fp32(fp32_to_fp16(src));
                if (t->type == DType::f32 || t->type == DType::f16 || t->type == DType::bf16) {
                    ASSERT_EQ(row[static_cast<size_t>(c)], want) << name << " [" << r << ", " << c << "]";
                } else {
                    ASSERT_NEAR(row[static_cast<size_t>(c)], want, 0.05f) << name << " [" << r << ", " << c << "]";
                }
            }
        }
    }
}

TEST(Convert, PackedCheckpointToI2S) {
    const auto ck = test::make_tiny_checkpoint("conv-packed");
    check_gguf(ck, convert(ck));
}

TEST(Convert, PackedBitlinearScaleIsADivisor) {
    TinySpec spec;
    spec.linear_class = "bitlinear";
    const auto ck     = test::make_tiny_checkpoint("conv-bitlinear", spec);
    EXPECT_EQ(ck.ternary[0].scale, 1.0f / 0.5f);  // weight_scale 0.5 -> multiplier 2
    check_gguf(ck, convert(ck));
}

TEST(Convert, PackedWithoutLinearClassUsesBitlinear) {
    TinySpec spec;
    spec.linear_class = "bitlinear";  // expectation: the transformers default
    auto ck           = test::make_tiny_checkpoint("conv-no-lc", spec);
    ck.config["quantization_config"].erase("linear_class");
    ck.write();
    check_gguf(ck, convert(ck));
}

TEST(Convert, Bf16MastersAreTernarisedByAbsmean) {
    TinySpec spec;
    spec.packed     = false;
    const auto ck   = test::make_tiny_checkpoint("conv-master", spec);
    // The dead row (row 1, |w| ~ 1e-34) must come out all zero.
    const auto & q = ck.ternary[0];
    for (int64_t c = 0; c < q.in; ++c) ASSERT_EQ(q.values[static_cast<size_t>(q.in + c)], 0);
    check_gguf(ck, convert(ck));
}

TEST(Convert, MasterTiesRoundHalfToEven) {
    // mean|W| = 1 exactly, so s_w = 1 and w * s_w = w: ±0.5 must become 0 (ties to even), ±1.5 and
    // 2.0 clamp to ±1, 0.75 -> 1, 0.25 -> 0. Non-symmetric order, so a transposition would show.
    TinySpec spec;
    spec.packed   = false;
    auto   ck     = test::make_tiny_checkpoint("conv-ties", spec);
    auto & q      = ck.ternary[0];
    const std::vector<float>  pattern = {0.5f, -0.5f, 1.5f, -1.5f, 0.25f, -0.75f, 2.0f, 1.0f};
    const std::vector<int8_t> ternary = {0, 0, 1, -1, 0, -1, 1, 1};
    std::vector<float>        w(static_cast<size_t>(q.out * q.in));
    for (size_t i = 0; i < w.size(); ++i) w[i] = pattern[(i + i / static_cast<size_t>(q.in)) % pattern.size()];
    for (size_t i = 0; i < w.size(); ++i) q.values[i] = ternary[(i + i / static_cast<size_t>(q.in)) % pattern.size()];
    q.scale = 1.0f;
    ck.find(q.hf_name)->data = test::bf16_bytes(w);
    ck.write();
    check_gguf(ck, convert(ck));
}

TEST(Convert, MixedEmbeddingTypes) {
    const auto ck = test::make_tiny_checkpoint("conv-embd");
    for (DType embd : {DType::f32, DType::bf16, DType::q8_0}) {
        SCOPED_TRACE(std::string(dtype_name(embd)));
        check_gguf(ck, convert(ck, DType::i2_s, embd), DType::i2_s, embd);
    }
}

TEST(Convert, TernaryBlockTypes) {
    TinySpec spec;
    spec.hidden       = 256;
    spec.intermediate = 512;
    for (bool packed : {true, false}) {
        spec.packed   = packed;
        const auto ck = test::make_tiny_checkpoint("conv-tq", spec);
        for (DType t : {DType::tq2_0, DType::tq1_0}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + (packed ? " packed" : " master"));
            check_gguf(ck, convert(ck, t, DType::q6_k), t, DType::q6_k);
        }
    }
}

TEST(Convert, UntiedLmHeadBecomesOutput) {
    TinySpec spec;
    spec.tie      = false;
    spec.lm_head  = true;
    const auto ck = test::make_tiny_checkpoint("conv-untied", spec);
    check_gguf(ck, convert(ck, DType::i2_s, DType::q8_0), DType::i2_s, DType::q8_0);
    // Absent tie_word_embeddings: the lm_head decides.
    TinySpec spec2 = spec;
    spec2.tie      = std::nullopt;
    const auto ck2 = test::make_tiny_checkpoint("conv-untied2", spec2);
    check_gguf(ck2, convert(ck2));
}

TEST(Convert, ExplicitHeadDimWritesKeyAndValueLength) {
    TinySpec spec;
    spec.head_dim = 64;  // 4 heads x 64 = 256 != hidden 128
    const auto ck = test::make_tiny_checkpoint("conv-headdim", spec);
    check_gguf(ck, convert(ck));
}

TEST(Convert, ShardedCheckpoint) {
    TinySpec spec;
    spec.sharded  = true;
    const auto ck = test::make_tiny_checkpoint("conv-sharded", spec);
    ASSERT_TRUE(std::filesystem::exists(ck.dir / "model.safetensors.index.json"));
    check_gguf(ck, convert(ck));
}

TEST(Convert, Bitnet25ArchPrefixesTheKeys) {
    const auto ck = test::make_tiny_checkpoint("conv-arch25");
    check_gguf(ck, convert(ck, DType::i2_s, DType::f16, "bitnet-25"), DType::i2_s, DType::f16, "bitnet-25");
}

TEST(Convert, I2STensorsAreOneChunkWithOneScale) {
    // Every I2_S payload is exactly n/4 + 32 bytes with its scale at n/4 (one chunk per tensor).
    const auto     ck = test::make_tiny_checkpoint("conv-chunk");
    const GgufFile f  = GgufFile::open(convert(ck));
    for (const auto & e : ck.ternary) {
        const GgufTensorInfo * t = f.find_tensor(e.gguf_name);
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->n_bytes, static_cast<size_t>(e.out * e.in / 4 + 32));
        EXPECT_EQ(i2s_count_code3(f.tensor_data(*t).data(), t->n_elements), 0);
    }
}

}  // namespace
}  // namespace tern
