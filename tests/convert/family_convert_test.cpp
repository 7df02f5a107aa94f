// `tern convert` for Llama / Qwen3 / Phi-3 checkpoints (family_convert.h) on tiny checkpoints written
// here: tensor names and shapes, llama's q/k row permutation (checked row by row against the
// formula), fused phi3 tensors, QK-norm, tied / untied heads, Llama-3 rope_freqs, the metadata keys,
// a SentencePiece tokenizer.model (protobuf written here) with added tokens, and the errors.
#include "convert/family_convert.h"
#include "convert/hf_family_config.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/rope_scaling.h"
#include "gguf/gguf_reader.h"
#include "model/family_config.h"
#include "quant/block_formats.h"
#include "test_util.h"
#include "tiny_checkpoint.h"
#include "tokenizer/sentencepiece_import.h"
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>

namespace tern {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::StEntry;

// Values k/64 in [-2, 2): exact in f16 and bf16, distinct per tensor and position.
std::vector<float> pattern(int64_t n, int seed) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>((i * 37 + seed * 101) % 256 - 128) / 64.0f;
    return v;
}

StEntry f32_entry(const std::string & name, std::vector<int64_t> shape, int seed) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const auto           v = pattern(n, seed);
    std::vector<uint8_t> bytes(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return {name, "F32", std::move(shape), std::move(bytes)};
}

struct Family {
    std::string arch;  // llama, qwen3, phi3
    int64_t     e = 64, ff = 96, layers = 2, heads = 4, kv = 2, hd = 16, vocab = 300;
    bool        tied = true;
};

// Writes a checkpoint folder; returns its path. Every tensor is F32 with pattern values.
fs::path write_checkpoint(const Family & f, const json & extra_config = json::object(), bool spm = false,
                          const std::function<void(std::vector<StEntry> &)> & edit = {}) {
    const auto dir = test::temp_dir("family-ckpt-" + f.arch + (spm ? "-spm" : ""));
    fs::remove_all(dir);
    fs::create_directories(dir);
    json cfg = {{"architectures", {f.arch == "llama" ? "LlamaForCausalLM" : f.arch == "qwen3" ? "Qwen3ForCausalLM" : "Phi3ForCausalLM"}},
                {"hidden_size", f.e}, {"intermediate_size", f.ff}, {"num_hidden_layers", f.layers},
                {"num_attention_heads", f.heads}, {"num_key_value_heads", f.kv}, {"vocab_size", f.vocab},
                {"max_position_embeddings", 512}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0},
                {"hidden_act", "silu"}, {"tie_word_embeddings", f.tied}, {"bos_token_id", 264}, {"eos_token_id", 265}};
    if (f.arch == "qwen3") cfg["head_dim"] = f.hd;
    cfg.update(extra_config);
    test::write_text(dir / "config.json", cfg.dump(1));
    const int64_t q = f.heads * f.hd, kv = f.kv * f.hd;
    std::vector<StEntry> t;
    int seed = 1;
    t.push_back(f32_entry("model.embed_tokens.weight", {f.vocab, f.e}, seed++));
    for (int64_t il = 0; il < f.layers; ++il) {
        const std::string p = "model.layers." + std::to_string(il) + ".";
        t.push_back(f32_entry(p + "input_layernorm.weight", {f.e}, seed++));
        if (f.arch == "phi3") {
            t.push_back(f32_entry(p + "self_attn.qkv_proj.weight", {q + 2 * kv, f.e}, seed++));
        } else {
            t.push_back(f32_entry(p + "self_attn.q_proj.weight", {q, f.e}, seed++));
            t.push_back(f32_entry(p + "self_attn.k_proj.weight", {kv, f.e}, seed++));
            t.push_back(f32_entry(p + "self_attn.v_proj.weight", {kv, f.e}, seed++));
        }
        if (f.arch == "qwen3") {
            t.push_back(f32_entry(p + "self_attn.q_norm.weight", {f.hd}, seed++));
            t.push_back(f32_entry(p + "self_attn.k_norm.weight", {f.hd}, seed++));
        }
        t.push_back(f32_entry(p + "self_attn.o_proj.weight", {f.e, q}, seed++));
        t.push_back(f32_entry(p + "post_attention_layernorm.weight", {f.e}, seed++));
        if (f.arch == "phi3") {
            t.push_back(f32_entry(p + "mlp.gate_up_proj.weight", {2 * f.ff, f.e}, seed++));
        } else {
            t.push_back(f32_entry(p + "mlp.gate_proj.weight", {f.ff, f.e}, seed++));
            t.push_back(f32_entry(p + "mlp.up_proj.weight", {f.ff, f.e}, seed++));
        }
        t.push_back(f32_entry(p + "mlp.down_proj.weight", {f.e, f.ff}, seed++));
    }
    t.push_back(f32_entry("model.norm.weight", {f.e}, seed++));
    if (!f.tied) t.push_back(f32_entry("lm_head.weight", {f.vocab, f.e}, seed++));
    if (edit) edit(t);
    test::write_bytes(dir / "model.safetensors", test::build_safetensors(t, {{"format", "pt"}}));
    if (!spm) {
        test::write_text(dir / "tokenizer.json", test::tokenizer_json().dump());
        test::write_text(dir / "tokenizer_config.json", json{{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|end_of_text|>"}}.dump());
    }
    return dir;
}

std::string convert(const fs::path & dir, std::optional<DType> type = std::nullopt) {
    ConvertOptions o;
    o.input_dir   = dir.string();
    o.output_path = (dir / "out.gguf").string();
    o.weight_type = type;
    o.progress    = false;
    convert_hf_checkpoint(o);
    return o.output_path;
}

// Row r of a GGUF tensor decoded to f32.
std::vector<float> row(const GgufFile & g, const char * name, int64_t r) {
    const auto *       t = g.find_tensor(name);
    std::vector<float> out(static_cast<size_t>(t->ne[0]));
    dequantize_tensor_row(t->type, g.tensor_data(*t), t->n_elements, t->ne[0], r, out.data());
    return out;
}

// Row r of an HF tensor written by f32_entry with the given seed and column count.
std::vector<float> hf_row(int seed, int64_t cols, int64_t rows, int64_t r) {
    const auto all = pattern(cols * rows, seed);
    return {all.begin() + r * cols, all.begin() + (r + 1) * cols};
}

TEST(FamilyConvert, PermutedRowFormula) {
    // One head of 8 rows: GGUF rows 0..7 <- HF rows 0 4 1 5 2 6 3 7 (pairs (2i, 2i+1) <- (i, i + 4)).
    const int64_t want[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    for (int64_t r = 0; r < 8; ++r) EXPECT_EQ(llama_permuted_row(r, 8, 1), want[r]);
    EXPECT_EQ(llama_permuted_row(9, 16, 2), 12);  // second head: row 8 + 1 <- 8 + 4
}

TEST(FamilyConvert, LlamaTiedWithRopeFreqs) {
    Family     f{"llama"};
    const json rope = {{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}}}};
    const auto     dir = write_checkpoint(f, rope);
    const GgufFile g   = GgufFile::open(convert(dir));
    const auto     c   = read_family_config(g);
    EXPECT_NO_THROW(check_family_tensors(g, c));
    EXPECT_EQ(c.family, ModelFamily::llama);
    EXPECT_TRUE(c.tied_head);
    EXPECT_TRUE(c.rope_freqs);
    EXPECT_EQ(g.find_tensor("blk.0.attn_q.weight")->type, DType::f16);
    EXPECT_EQ(g.find_tensor("blk.0.attn_norm.weight")->type, DType::f32);
    EXPECT_EQ(g.get_int("llama.vocab_size"), 300);
    EXPECT_EQ(g.get_int("general.file_type"), 1);
    // q (seed 3, 64 rows = 4 heads of 16) and k (seed 4, 2 heads) are permuted; v (seed 5) is not.
    for (int64_t r = 0; r < 64; ++r) EXPECT_EQ(row(g, "blk.0.attn_q.weight", r), hf_row(3, 64, 64, llama_permuted_row(r, 64, 4))) << r;
    for (int64_t r = 0; r < 32; ++r) EXPECT_EQ(row(g, "blk.0.attn_k.weight", r), hf_row(4, 64, 32, llama_permuted_row(r, 32, 2))) << r;
    for (int64_t r = 0; r < 32; ++r) EXPECT_EQ(row(g, "blk.0.attn_v.weight", r), hf_row(5, 64, 32, r)) << r;
    // rope_freqs = the Llama-3 divisors for these values.
    const auto want = llama3_rope_freq_factors(10000.0, 16, Llama3RopeScaling{8.0, 1.0, 4.0, 64});
    EXPECT_EQ(row(g, "rope_freqs.weight", 0), want);
    // Tokenizer: byte-level BPE with the Llama-3 regex, BOS from tokenizer_config.json.
    const Tokenizer tok = Tokenizer::from_gguf(g);
    EXPECT_EQ(tok.bos_id(), 264);
    EXPECT_EQ(tok.n_vocab(), 300);
}

// transformers >= 5 writes theta and the scaling into "rope_parameters".
TEST(FamilyConvert, TransformersFiveRopeParameters) {
    const json     rp  = {{"rope_theta", nullptr},
                          {"rope_parameters", {{"rope_theta", 500000.0}, {"rope_type", "llama3"}, {"factor", 32.0},
                                               {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                                               {"original_max_position_embeddings", 128}}}};
    const GgufFile g   = GgufFile::open(convert(write_checkpoint(Family{"llama"}, rp)));
    EXPECT_EQ(g.get_float("llama.rope.freq_base"), 500000.0);
    EXPECT_EQ(row(g, "rope_freqs.weight", 0), llama3_rope_freq_factors(500000.0, 16, Llama3RopeScaling{32.0, 1.0, 4.0, 128}));
}

TEST(FamilyConvert, Qwen3UntiedWithQkNorm) {
    Family f{"qwen3"};
    f.tied = false;
    f.hd   = 32;  // n_head * head_dim = 128 != n_embd 64, as Qwen3-0.6B
    const auto     dir = write_checkpoint(f);
    const GgufFile g   = GgufFile::open(convert(dir, DType::bf16));
    const auto     c   = read_family_config(g);
    EXPECT_NO_THROW(check_family_tensors(g, c));
    EXPECT_TRUE(c.qk_norm);
    EXPECT_FALSE(c.tied_head);
    EXPECT_EQ(c.head_dim, 32);
    EXPECT_EQ(c.n_q(), 128);
    EXPECT_EQ(g.find_tensor("output.weight")->type, DType::bf16);
    EXPECT_EQ(g.find_tensor("blk.1.attn_q.weight")->type, DType::bf16);
    EXPECT_EQ(g.get_int("qwen3.attention.key_length"), 32);
    // No permutation for NeoX-rope families: q row r is HF row r (layer 0's q_proj has seed 3).
    for (int64_t r = 0; r < 128; ++r) EXPECT_EQ(row(g, "blk.0.attn_q.weight", r), hf_row(3, 64, 128, r)) << r;
    EXPECT_EQ(row(g, "blk.0.attn_q_norm.weight", 0), hf_row(6, 32, 1, 0));
}

// A SentencePiece tokenizer.model: pieces <unk>, <s>, </s>, the 256 byte pieces, "▁", "▁a", "b".
std::vector<uint8_t> spm_model() {
    auto varint = [](std::vector<uint8_t> & out, uint64_t v) {
        while (v >= 0x80) out.push_back(static_cast<uint8_t>(v | 0x80)), v >>= 7;
        out.push_back(static_cast<uint8_t>(v));
    };
    std::vector<uint8_t> model;
    auto piece = [&](const std::string & text, float score, int type) {
        std::vector<uint8_t> p;
        p.push_back(0x0a), varint(p, text.size()), p.insert(p.end(), text.begin(), text.end());
        p.push_back(0x15);
        uint32_t bits;
        std::memcpy(&bits, &score, 4);
        for (int i = 0; i < 4; ++i) p.push_back(static_cast<uint8_t>(bits >> (8 * i)));
        p.push_back(0x18), varint(p, static_cast<uint64_t>(type));
        model.push_back(0x0a), varint(model, p.size()), model.insert(model.end(), p.begin(), p.end());
    };
    piece("<unk>", 0, 2), piece("<s>", 0, 3), piece("</s>", 0, 3);
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        piece(name, 0, 6);
    }
    piece("\xe2\x96\x81", -1, 1), piece("a", -2, 1), piece("b", -3, 1), piece("\xe2\x96\x81" "a", -4, 1);
    // A NormalizerSpec with add_dummy_prefix = true and an unknown field that must be skipped.
    const std::vector<uint8_t> norm = {0x18, 0x01, 0x25, 1, 2, 3, 4};
    model.push_back(0x1a), varint(model, norm.size()), model.insert(model.end(), norm.begin(), norm.end());
    return model;
}

TEST(FamilyConvert, Phi3FusedWithSentencePiece) {
    Family f{"phi3"};
    f.tied = false, f.kv = 4, f.vocab = 272;
    const auto dir = write_checkpoint(f, json{{"original_max_position_embeddings", 256}, {"sliding_window", 2047}}, /*spm=*/true);
    test::write_bytes(dir / "tokenizer.model", spm_model());
    json decoder = {{"263", {{"content", "<|endoftext|>"}, {"special", true}}}, {"264", {{"content", "<|user|>"}, {"special", true}}},
                    {"265", {{"content", "<|end|>"}, {"special", true}}}};
    test::write_text(dir / "tokenizer_config.json",
                     json{{"bos_token", "<s>"}, {"eos_token", "<|endoftext|>"}, {"added_tokens_decoder", decoder}}.dump());
    const GgufFile g = GgufFile::open(convert(dir));
    const auto     c = read_family_config(g);
    EXPECT_NO_THROW(check_family_tensors(g, c));
    EXPECT_TRUE(c.fused_qkv);
    EXPECT_TRUE(c.fused_gate_up);
    EXPECT_EQ(c.n_ctx_orig, 256);
    EXPECT_EQ(g.find_tensor("blk.0.attn_qkv.weight")->ne[1], 64 + 2 * 64);
    EXPECT_EQ(g.find_tensor("blk.0.ffn_up.weight")->ne[1], 2 * 96);
    EXPECT_EQ(g.get_int("phi3.attention.sliding_window"), 2047);
    EXPECT_EQ(g.get_string("tokenizer.ggml.model"), "llama");
    const auto types = g.get_int_array("tokenizer.ggml.token_type").value();
    ASSERT_EQ(types.size(), 272u);
    EXPECT_EQ(types[0], 2);    // <unk>: UNKNOWN
    EXPECT_EQ(types[3], 6);    // <0x00>: BYTE
    EXPECT_EQ(types[263], 3);  // <|endoftext|>: CONTROL
    EXPECT_EQ(types[271], 5);  // [PAD271]: UNUSED
    EXPECT_EQ(g.get_f32_array("tokenizer.ggml.scores").value()[262], -4.0f);
    const Tokenizer tok = Tokenizer::from_gguf(g);
    EXPECT_EQ(tok.eos_id(), 263);
    EXPECT_TRUE(tok.is_eog(265));  // <|end|>
    // "ab" -> "▁ab" -> "▁a" (score -4 beats nothing else) + "b"; BOS 1 first.
    EXPECT_EQ(tok.encode("ab", true, false), (std::vector<int32_t>{1, 262, 261}));
}

TEST(FamilyConvert, SentencePieceParserRejectsTruncation) {
    const auto bytes = spm_model();
    EXPECT_EQ(parse_sentencepiece_model(bytes, "m").pieces.size(), 263u);
    for (size_t cut : {size_t{1}, size_t{7}, bytes.size() / 2, bytes.size() - 3}) {
        std::vector<uint8_t> t(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
        EXPECT_THROW(parse_sentencepiece_model(t, "m"), Error) << cut;
    }
}

// Falcon3-1.58bit style: a LlamaForCausalLM with quantization_config bitnet, projections packed U8
// [out/4, in] + weight_scale (bitlinear: a divisor). Converted to I2_S: the ternary values (q/k rows
// permuted) and the scale 1 / weight_scale; the embedding stays float.
TEST(FamilyConvert, BitnetQuantizedLlamaToI2S) {
    Family                                  f{"llama"};
    f.e = 128, f.ff = 128, f.heads = 4, f.kv = 2, f.hd = 32, f.layers = 1;
    std::map<std::string, std::vector<int8_t>> ternary;
    const auto dir = write_checkpoint(f, json{{"quantization_config", {{"quant_method", "bitnet"}}}}, false,
                                      [&](std::vector<StEntry> & t) {
        std::vector<StEntry> out;
        for (auto & e : t) {
            if (!e.name.ends_with("_proj.weight")) {
                out.push_back(e);
                continue;
            }
            const int64_t       rows = e.shape[0], cols = e.shape[1];
            std::vector<int8_t> v(static_cast<size_t>(rows * cols));
            for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int8_t>(static_cast<int>((i * 7 + e.name.size()) % 3) - 1);
            ternary[e.name] = v;
            out.push_back({e.name, "U8", {rows / 4, cols}, test::hf_pack(v, rows, cols)});
            const float          ws = 4.0f;  // bitlinear: scale = 1 / 4
            std::vector<uint8_t> b(4);
            std::memcpy(b.data(), &ws, 4);
            out.push_back({e.name.substr(0, e.name.size() - 7) + ".weight_scale", "F32", {1}, b});
        }
        t = out;
    });
    const GgufFile g = GgufFile::open(convert(dir));
    EXPECT_NO_THROW(check_family_tensors(g, read_family_config(g)));
    EXPECT_EQ(g.find_tensor("blk.0.attn_q.weight")->type, DType::i2_s);
    EXPECT_EQ(g.find_tensor("token_embd.weight")->type, DType::f16);
    EXPECT_EQ(g.get_int("general.file_type"), 40);
    auto expect_rows = [&](const char * gguf, const std::string & hf, int64_t rows, int64_t heads) {
        const auto & v = ternary.at(hf);
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t      src = heads ? llama_permuted_row(r, rows, heads) : r;
            std::vector<float> want(128);
            for (int64_t c = 0; c < 128; ++c) want[static_cast<size_t>(c)] = v[static_cast<size_t>(src * 128 + c)] * 0.25f;
            ASSERT_EQ(row(g, gguf, r), want) << gguf << " row " << r;
        }
    };
    expect_rows("blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", 128, 4);
    expect_rows("blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight", 64, 2);
    expect_rows("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight", 128, 0);
}

// Seeded byte mutations of a valid model: each either parses or throws tern::Error, never crashes
// (run under AddressSanitizer in CI).
TEST(FamilyConvert, SentencePieceParserSurvivesMutations) {
    const auto bytes = spm_model();
    uint64_t   st    = 12345;
    auto       next  = [&st] { return (st = st * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
    int        parsed = 0;
    for (int i = 0; i < 3000; ++i) {
        std::vector<uint8_t> m = bytes;
        for (int k = 0, n = 1 + static_cast<int>(next() % 4); k < n; ++k) m[next() % m.size()] = static_cast<uint8_t>(next());
        if (next() % 3 == 0) m.resize(next() % m.size());
        try {
            parsed += parse_sentencepiece_model(m, "mutated").pieces.size() > 0;
        } catch (const Error &) {
        }
    }
    EXPECT_GT(parsed, 0);
}

TEST(FamilyConvert, Errors) {
    Family f{"llama"};
    auto   msg = [](const fs::path & dir) {
        try {
            convert(dir);
        } catch (const Error & e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    EXPECT_NE(msg(write_checkpoint(f, json{{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}})).find("rope scaling \"yarn\""),
              std::string::npos);
    EXPECT_NE(msg(write_checkpoint(f, json{{"attention_bias", true}})).find("\"attention_bias\" is true"), std::string::npos);
    EXPECT_NE(msg(write_checkpoint(f, json{{"hidden_act", "gelu"}})).find("\"hidden_act\" is \"gelu\""), std::string::npos);
    EXPECT_NE(msg(write_checkpoint(f, json{{"intermediate_size", 128}})).find("model.layers.0.mlp.gate_proj.weight' has shape [96, 64], expected [128, 64]"),
              std::string::npos);
    Family untied = f;
    untied.tied   = true;
    EXPECT_NE(msg(write_checkpoint(untied, json{{"tie_word_embeddings", false}})).find("no tensor 'lm_head.weight'"), std::string::npos);
}

}  // namespace
}  // namespace tern
