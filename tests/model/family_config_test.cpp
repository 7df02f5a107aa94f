// Configuration of the llama / qwen3 / phi3 families from GGUF metadata (family_config.h): the four
// `tern synth` family shapes (one layer, Q4_0 head, so the files stay small) read back with the
// right dimensions, rope style, QK-norm, fused tensors, tied/untied head, rope_freqs, and their
// vocabularies tokenize as the HF tokenizers do; hand-made files check each error.
#include "core/error.h"
#include "core/rope_scaling.h"
#include "gguf/gguf_writer.h"
#include "model/family_config.h"
#include "synth/synth.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>

namespace tern {
namespace {

struct Synth {
    std::unique_ptr<GgufFile> file;
    FamilyConfig              config;
};

Synth synth(const std::string & shape) {
    const auto   dir = test::temp_dir("family-" + shape);
    SynthOptions o;
    o.shape       = shape;
    o.output_path = (dir / "m.gguf").string();
    o.n_layer     = 1;
    o.embd_type   = DType::q4_0;
    o.progress    = false;
    write_synthetic_model(o);
    Synth s;
    s.file   = std::make_unique<GgufFile>(GgufFile::open(o.output_path));
    s.config = read_family_config(*s.file);
    check_family_tensors(*s.file, s.config);
    std::filesystem::remove(o.output_path);  // mapped: the data stays readable until the file closes
    return s;
}

std::vector<int32_t> ids(const GgufFile & f, const char * text) {
    return Tokenizer::from_gguf(f).encode(text, /*add_bos=*/true, /*parse_special=*/false);
}

TEST(FamilyConfig, Llama32) {
    const Synth   s = synth("llama-3.2-1b");
    const auto &  c = s.config;
    EXPECT_EQ(c.family, ModelFamily::llama);
    EXPECT_EQ(c.rope_style, RopeStyle::norm);
    EXPECT_EQ(c.n_embd, 2048);
    EXPECT_EQ(c.n_head, 32);
    EXPECT_EQ(c.n_head_kv, 8);
    EXPECT_EQ(c.head_dim, 64);
    EXPECT_EQ(c.n_ff, 8192);
    EXPECT_EQ(c.n_vocab, 128256);
    EXPECT_FLOAT_EQ(c.rope_freq_base, 500000.0f);
    EXPECT_TRUE(c.tied_head);
    EXPECT_TRUE(c.rope_freqs);
    EXPECT_FALSE(c.qk_norm || c.fused_qkv || c.fused_gate_up || c.sub_norms);
    EXPECT_EQ(c.glu, GluActivation::silu);
    EXPECT_EQ(s.file->find_tensor("blk.0.attn_q.weight")->type, DType::q4_0);
    EXPECT_EQ(ids(*s.file, "Hello world"), (std::vector<int32_t>{128000, 9906, 1917}));
    EXPECT_TRUE(Tokenizer::from_gguf(*s.file).is_eog(128009));
}

TEST(FamilyConfig, Qwen3) {
    const Synth  s = synth("qwen3-1.7b");
    const auto & c = s.config;
    EXPECT_EQ(c.family, ModelFamily::qwen3);
    EXPECT_EQ(c.rope_style, RopeStyle::neox);
    EXPECT_TRUE(c.qk_norm);
    EXPECT_EQ(c.head_dim, 128);
    EXPECT_EQ(c.n_head, 16);
    EXPECT_EQ(c.n_head_kv, 8);
    EXPECT_EQ(c.n_vocab, 151936);
    EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
    EXPECT_TRUE(c.tied_head);
    EXPECT_EQ(s.file->find_tensor("blk.0.attn_q.weight")->type, DType::q1_0);
    EXPECT_EQ(ids(*s.file, "Hello world"), (std::vector<int32_t>{9707, 1879}));  // add_bos false for Qwen
    EXPECT_TRUE(Tokenizer::from_gguf(*s.file).is_eog(151645));                     // <|im_end|>
}

TEST(FamilyConfig, Phi3) {
    const Synth  s = synth("phi-3-mini");
    const auto & c = s.config;
    EXPECT_EQ(c.family, ModelFamily::phi3);
    EXPECT_EQ(c.rope_style, RopeStyle::neox);
    EXPECT_TRUE(c.fused_qkv);
    EXPECT_TRUE(c.fused_gate_up);
    EXPECT_FALSE(c.tied_head);
    EXPECT_EQ(c.head_dim, 96);
    EXPECT_EQ(c.n_rot, 96);
    EXPECT_EQ(c.n_vocab, 32064);
    EXPECT_EQ(c.n_ctx_orig, 4096);
    const auto * qkv = s.file->find_tensor("blk.0.attn_qkv.weight");
    EXPECT_EQ(qkv->ne[0], 3072);
    EXPECT_EQ(qkv->ne[1], 9216);
    EXPECT_EQ(s.file->find_tensor("blk.0.ffn_up.weight")->ne[1], 16384);
    EXPECT_EQ(ids(*s.file, "Hello world"), (std::vector<int32_t>{1, 15043, 3186}));
}

TEST(FamilyConfig, Falcon3) {
    const Synth  s = synth("falcon3-1b");
    const auto & c = s.config;
    EXPECT_EQ(c.family, ModelFamily::llama);
    EXPECT_EQ(c.head_dim, 256);
    EXPECT_EQ(c.n_head, 8);
    EXPECT_EQ(c.n_layer, 1);
    EXPECT_EQ(c.n_vocab, 131072);
    EXPECT_FALSE(c.tied_head);
    EXPECT_FALSE(c.rope_freqs);
    EXPECT_EQ(s.file->find_tensor("blk.0.ffn_down.weight")->type, DType::i2_s);
    EXPECT_EQ(Tokenizer::from_gguf(*s.file).pre_tokenizer(), PreTokenizer::llama3);  // "falcon3" is a llama-bpe alias
}

// The Llama-3.2 rope factors: wavelengths below 8192/4 keep factor 1, above 8192 get 32, between
// them the smooth interpolation; the first and last of 32 pairs for base 500000, n_rot 64.
TEST(FamilyConfig, Llama3RopeFactors) {
    const auto f = llama3_rope_freq_factors(500000.0, 64, Llama3RopeScaling{32.0, 1.0, 4.0, 8192});
    ASSERT_EQ(f.size(), 32u);
    EXPECT_EQ(f[0], 1.0f);
    EXPECT_EQ(f[31], 32.0f);
    for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]);
    // Pair i has wavelength 2 pi 500000^(i/32): pairs 15..17 fall between 2048 and 8192. i = 16:
    // 2 pi sqrt(500000) = 4442.9, s = (8192 / 4442.9 - 1) / 3 = 0.28127, factor 1 / (0.71873/32 + s) = 3.2924.
    EXPECT_EQ(f[14], 1.0f);
    EXPECT_NEAR(f[16], 3.2924, 1e-3);
    EXPECT_EQ(f[18], 32.0f);
}

// ------------------------------------------------------------------------------- errors

std::unique_ptr<GgufFile> tiny(const std::string & arch, const std::function<void(GgufWriter &)> & edit = {},
                               bool qk_norm_tensors = true) {
    GgufWriter        w;
    const std::string a = arch + ".";
    w.set_string("general.architecture", arch);
    w.set_u32(a + "embedding_length", 64);
    w.set_u32(a + "block_count", 1);
    w.set_u32(a + "context_length", 128);
    w.set_u32(a + "feed_forward_length", 128);
    w.set_u32(a + "attention.head_count", 4);
    w.set_u32(a + "attention.head_count_kv", 2);
    w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
    auto mat = [&](const std::string & n, int64_t k, int64_t r) {
        w.add_tensor(n, DType::f16, {k, r}, std::vector<uint8_t>(static_cast<size_t>(k * r * 2), 0));
    };
    auto vec = [&](const std::string & n, int64_t k) {
        w.add_tensor(n, DType::f32, {k}, std::vector<uint8_t>(static_cast<size_t>(k * 4), 0));
    };
    mat("token_embd.weight", 64, 32);
    vec("blk.0.attn_norm.weight", 64);
    mat("blk.0.attn_q.weight", 64, 64);
    mat("blk.0.attn_k.weight", 64, 32);
    mat("blk.0.attn_v.weight", 64, 32);
    if (arch == "qwen3" && qk_norm_tensors) vec("blk.0.attn_q_norm.weight", 16), vec("blk.0.attn_k_norm.weight", 16);
    mat("blk.0.attn_output.weight", 64, 64);
    vec("blk.0.ffn_norm.weight", 64);
    mat("blk.0.ffn_gate.weight", 64, 128);
    mat("blk.0.ffn_up.weight", 64, 128);
    mat("blk.0.ffn_down.weight", 128, 64);
    vec("output_norm.weight", 64);
    if (edit) edit(w);
    return std::make_unique<GgufFile>(GgufFile::from_bytes(w.to_bytes()));
}

std::string error_of(const std::function<void()> & fn) {
    try {
        fn();
    } catch (const Error & e) {
        return e.what();
    }
    return "(no error)";
}

TEST(FamilyConfig, HandMadeFilesAndErrors) {
    const auto ok = tiny("qwen3");
    const auto c  = read_family_config(*ok);
    EXPECT_EQ(c.head_dim, 16);
    EXPECT_TRUE(c.tied_head);
    EXPECT_NO_THROW(check_family_tensors(*ok, c));

    const auto llama = tiny("llama");  // a llama file without QK-norm tensors is complete
    EXPECT_NO_THROW(check_family_tensors(*llama, read_family_config(*llama)));
    // qwen3 without its QK-norm tensors is incomplete.
    const auto no_qk = tiny("qwen3", {}, /*qk_norm_tensors=*/false);
    EXPECT_EQ(error_of([&] { check_family_tensors(*no_qk, read_family_config(*no_qk)); }),
              "tensor 'blk.0.attn_q_norm.weight' is missing (qwen3 model, expected shape [16])");

    EXPECT_NE(error_of([&] { read_family_config(*tiny("gemma3")); }).find("architecture 'gemma3' is not supported"), std::string::npos);
    const auto yarn = tiny("llama", [](GgufWriter & w) { w.set_string("llama.rope.scaling.type", "yarn"); });
    EXPECT_NE(error_of([&] { read_family_config(*yarn); }).find("rope scaling 'yarn' is not supported"), std::string::npos);
    const auto linear = tiny("llama", [](GgufWriter & w) {
        w.set_string("llama.rope.scaling.type", "linear");
        w.set_f32("llama.rope.scaling.factor", 4.0f);
    });
    EXPECT_FLOAT_EQ(read_family_config(*linear).rope_freq_scale, 0.25f);
    const auto gqa = tiny("llama", [](GgufWriter & w) { w.set_u32("llama.attention.head_count_kv", 3); });
    EXPECT_NE(error_of([&] { read_family_config(*gqa); }).find("not a multiple of head_count_kv"), std::string::npos);
    const auto no_eps = tiny("llama", [](GgufWriter & w) { w.set_f32("llama.attention.layer_norm_rms_epsilon", -1.0f); });
    EXPECT_NE(error_of([&] { read_family_config(*no_eps); }).find("layer_norm_rms_epsilon' is -1"), std::string::npos);
    const auto vocab = tiny("llama", [](GgufWriter & w) { w.set_u32("llama.vocab_size", 33); });
    EXPECT_EQ(error_of([&] { read_family_config(*vocab); }), "llama.vocab_size is 33 but token_embd.weight has 32 rows");
    // A wrong shape names both.
    const auto shape = tiny("llama", [](GgufWriter & w) { w.set_u32("llama.feed_forward_length", 96); });
    EXPECT_EQ(error_of([&] { check_family_tensors(*shape, read_family_config(*shape)); }),
              "tensor 'blk.0.ffn_gate.weight' has shape [64, 128], expected [64, 96]");
}

}  // namespace
}  // namespace tern
