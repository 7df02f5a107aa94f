// `tern quantize` (quantize_model): which type each tensor gets (llama-quantize's rules, the head
// defaults, the two overrides, fallbacks for rows the blocks do not divide), that same-type tensors
// and metadata are copied byte for byte, that quantized tensors decode close to their source, and
// the errors: requantizing without --allow-requantize, overrides that do not fit, bad output paths.
#include "convert/quantize_model.h"

#include "core/error.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

namespace tern {
namespace {

namespace fs = std::filesystem;

std::vector<float> values(int64_t n, uint64_t seed) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto & v : x) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        v    = static_cast<float>(static_cast<int64_t>(seed >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
    }
    return x;
}

std::vector<uint8_t> encode(DType type, const std::vector<float> & x, int64_t ne0) {
    std::vector<uint8_t> out(dtype_tensor_bytes(type, ne0, static_cast<int64_t>(x.size())));
    for (int64_t r = 0; r < static_cast<int64_t>(x.size()) / ne0; ++r) {
        quantize_row(type, x.data() + r * ne0, out.data() + r * dtype_row_bytes(type, ne0), ne0);
    }
    return out;
}

// A llama-like float model: F16 embedding [256, 64], F32 output [256, 64], one F32 projection
// [256, 128], an F16 projection with rows of 96 (no 256-blocks), and a norm.
std::string float_model(const fs::path & dir, bool with_output = true) {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_u32("general.file_type", 1);
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.add_tensor("token_embd.weight", DType::f16, {256, 64}, encode(DType::f16, values(256 * 64, 1), 256));
    w.add_tensor("blk.0.attn_norm.weight", DType::f32, {256}, encode(DType::f32, values(256, 2), 256));
    w.add_tensor("blk.0.attn_q.weight", DType::f32, {256, 128}, encode(DType::f32, values(256 * 128, 3), 256));
    w.add_tensor("blk.0.ffn_down.weight", DType::f16, {96, 256}, encode(DType::f16, values(96 * 256, 4), 96));
    if (with_output) w.add_tensor("output.weight", DType::f32, {256, 64}, encode(DType::f32, values(256 * 64, 5), 256));
    const std::string path = (dir / (with_output ? "float.gguf" : "float_tied.gguf")).string();
    w.write_file(path);
    return path;
}

std::map<std::string, DType> types_of(const std::string & path) {
    std::map<std::string, DType> m;
    const GgufFile               f = GgufFile::open(path);
    for (const auto & t : f.tensors()) m[std::string(t.name)] = t.type;
    return m;
}

// Relative RMS between a tensor of two files, decoded row by row.
double tensor_rms(const std::string & a, const std::string & b, const char * name) {
    const GgufFile fa = GgufFile::open(a), fb = GgufFile::open(b);
    const auto *   ta = fa.find_tensor(name);
    const auto *   tb = fb.find_tensor(name);
    std::vector<float> ra(static_cast<size_t>(ta->ne[0])), rb(ra.size());
    double e = 0, s = 0;
    for (int64_t r = 0; r < ta->rows(); ++r) {
        dequantize_tensor_row(ta->type, fa.tensor_data(*ta), ta->n_elements, ta->ne[0], r, ra.data());
        dequantize_tensor_row(tb->type, fb.tensor_data(*tb), tb->n_elements, tb->ne[0], r, rb.data());
        for (size_t i = 0; i < ra.size(); ++i) e += (ra[i] - rb[i]) * (ra[i] - rb[i]), s += ra[i] * ra[i];
    }
    return std::sqrt(e / s);
}

QuantizeOptions options(const std::string & in, const std::string & out, const char * type) {
    QuantizeOptions o;
    o.input_path  = in;
    o.output_path = out;
    o.type        = parse_quantize_type(type, "TYPE");
    o.progress    = false;
    o.threads     = 2;
    return o;
}

TEST(QuantizeModel, ParsesLlamaQuantizeNames) {
    EXPECT_EQ(parse_quantize_type("Q4_K_M", "T"), DType::q4_k);
    EXPECT_EQ(parse_quantize_type("q6_k", "T"), DType::q6_k);
    EXPECT_EQ(parse_quantize_type("I2_S", "T"), DType::i2_s);
    EXPECT_EQ(parse_quantize_type("copy", "T"), std::nullopt);
    EXPECT_THROW(parse_quantize_type("Q3_K", "T"), Error);
}

TEST(QuantizeModel, Q4KFollowsTheHeadAndFallbackRules) {
    const auto dir = test::temp_dir("quantize-q4k");
    const auto in = float_model(dir), out = (dir / "q4k.gguf").string();
    const auto report = quantize_model(options(in, out, "Q4_K"));
    EXPECT_EQ(report.size(), 5u);
    const auto t = types_of(out);
    EXPECT_EQ(t.at("token_embd.weight"), DType::q4_k);     // untied embedding: TYPE
    EXPECT_EQ(t.at("output.weight"), DType::q6_k);         // head: Q6_K
    EXPECT_EQ(t.at("blk.0.attn_q.weight"), DType::q4_k);
    EXPECT_EQ(t.at("blk.0.ffn_down.weight"), DType::q4_0); // rows of 96: Q4_K -> Q4_0
    EXPECT_EQ(t.at("blk.0.attn_norm.weight"), DType::f32);
    EXPECT_LT(tensor_rms(in, out, "blk.0.attn_q.weight"), 0.12);  // uniform data: ~0.08
    EXPECT_LT(tensor_rms(in, out, "output.weight"), 0.03);
    const GgufFile f = GgufFile::open(out);
    EXPECT_EQ(f.get_int("general.file_type"), 14);
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.kvs()[1].key, "general.file_type");  // keeps its place
}

TEST(QuantizeModel, TiedHeadTakesTheOutputRules) {
    const auto dir = test::temp_dir("quantize-tied");
    const auto in  = float_model(dir, /*with_output=*/false);
    const auto out = (dir / "q40.gguf").string();
    quantize_model(options(in, out, "Q4_0"));
    EXPECT_EQ(types_of(out).at("token_embd.weight"), DType::q6_k);
    auto o               = options(in, out, "Q4_0");
    o.output_tensor_type = DType::q8_0;  // --output-tensor-type sets the tied head
    quantize_model(o);
    EXPECT_EQ(types_of(out).at("token_embd.weight"), DType::q8_0);
    o.token_embedding_type = DType::q4_k;  // and --token-embedding-type wins over it
    quantize_model(o);
    EXPECT_EQ(types_of(out).at("token_embd.weight"), DType::q4_k);
    quantize_model(options(in, out, "Q8_0"));
    EXPECT_EQ(types_of(out).at("token_embd.weight"), DType::q8_0);
}

TEST(QuantizeModel, TernaryTypeTernarisesProjectionsAndKeepsTheHead) {
    const auto dir = test::temp_dir("quantize-ternary");
    const auto in = float_model(dir), out = (dir / "tq2.gguf").string();
    quantize_model(options(in, out, "TQ2_0"));
    const auto t = types_of(out);
    EXPECT_EQ(t.at("blk.0.attn_q.weight"), DType::tq2_0);
    EXPECT_EQ(t.at("blk.0.ffn_down.weight"), DType::f16);  // rows of 96: kept
    EXPECT_EQ(t.at("token_embd.weight"), DType::f16);
    EXPECT_EQ(t.at("output.weight"), DType::f32);
    // Absmean on uniform [-1, 1): mean |x| = 0.5, threshold 0.25, values ±0.5 beyond it; the squared
    // error is 1/192 + 3/64 = 5/96 against E[x^2] = 1/3, a relative RMS of sqrt(5/32).
    EXPECT_NEAR(tensor_rms(in, out, "blk.0.attn_q.weight"), std::sqrt(5.0 / 32.0), 0.01);
}

// The use case of bitnet.cpp's --quant-embd: a ternary model's F16 tied head rewritten as Q6_K,
// everything else byte for byte.
TEST(QuantizeModel, CopyWithEmbeddingOverrideOnATernaryModel) {
    const auto          dir = test::temp_dir("quantize-copy");
    GgufWriter          w;
    std::vector<int8_t> tv(256 * 128);
    for (size_t i = 0; i < tv.size(); ++i) tv[i] = static_cast<int8_t>(static_cast<int>(i * 7 % 3) - 1);
    std::vector<uint8_t> i2s(dtype_tensor_bytes(DType::i2_s, 256, 256 * 128));
    i2s_pack(tv.data(), 256 * 128, 0.5f, i2s.data());
    w.set_string("general.architecture", "bitnet-b1.58");
    w.set_u32("general.file_type", 40);
    w.add_tensor("token_embd.weight", DType::f16, {256, 64}, encode(DType::f16, values(256 * 64, 9), 256));
    w.add_tensor("blk.0.attn_q.weight", DType::i2_s, {256, 128}, i2s);
    const std::string in = (dir / "bitnet.gguf").string(), out = (dir / "q6.gguf").string();
    w.write_file(in);

    auto o = options(in, out, "COPY");
    o.token_embedding_type = DType::q6_k;
    quantize_model(o);
    const GgufFile f = GgufFile::open(out);
    EXPECT_EQ(f.find_tensor("token_embd.weight")->type, DType::q6_k);
    const auto q = f.tensor_data(*f.find_tensor("blk.0.attn_q.weight"));
    EXPECT_TRUE(std::equal(q.begin(), q.end(), i2s.begin(), i2s.end()));
    EXPECT_EQ(f.get_int("general.file_type"), 40);  // COPY keeps the file type
    EXPECT_LT(tensor_rms(in, out, "token_embd.weight"), 0.02);

    // Same type everywhere: the output is the input, byte for byte.
    quantize_model(options(in, out, "I2_S"));
    std::ifstream a(in, std::ios::binary), b(out, std::ios::binary);
    EXPECT_TRUE(std::equal(std::istreambuf_iterator<char>(a), {}, std::istreambuf_iterator<char>(b), {}));

    // I2_S -> TQ2_0 keeps the ternary values (no --allow-requantize needed).
    quantize_model(options(in, out, "TQ2_0"));
    EXPECT_EQ(types_of(out).at("blk.0.attn_q.weight"), DType::tq2_0);
    EXPECT_EQ(tensor_rms(in, out, "blk.0.attn_q.weight"), 0.0);
}

TEST(QuantizeModel, Errors) {
    const auto dir = test::temp_dir("quantize-errors");
    const auto in  = float_model(dir);
    const auto q4  = (dir / "q4.gguf").string();
    quantize_model(options(in, q4, "Q4_0"));
    // Requantizing needs the flag.
    try {
        quantize_model(options(q4, (dir / "q8.gguf").string(), "Q8_0"));
        FAIL() << "requantized without --allow-requantize";
    } catch (const Error & e) {
        EXPECT_NE(std::string(e.what()).find("already quantized (q4_0)"), std::string::npos) << e.what();
    }
    auto o             = options(q4, (dir / "q8.gguf").string(), "Q8_0");
    o.allow_requantize = true;
    EXPECT_NO_THROW(quantize_model(o));
    // An explicit type that does not fit the rows (an embedding of width 96).
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.add_tensor("token_embd.weight", DType::f32, {96, 8}, encode(DType::f32, values(96 * 8, 6), 96));
    const std::string narrow = (dir / "narrow.gguf").string();
    w.write_file(narrow);
    auto bad                 = options(narrow, (dir / "bad.gguf").string(), "Q8_0");
    bad.token_embedding_type = DType::q4_k;
    try {
        quantize_model(bad);
        FAIL() << "Q4_K accepted for rows of 96";
    } catch (const Error & e) {
        EXPECT_NE(std::string(e.what()).find("--token-embedding-type q4_k"), std::string::npos) << e.what();
    }
    bad.token_embedding_type = DType::q4_0;
    EXPECT_NO_THROW(quantize_model(bad));
    bad.token_embedding_type = std::nullopt;  // the default for the tied head (Q6_K) falls back to Q8_0
    quantize_model(bad);
    EXPECT_EQ(types_of(bad.output_path).at("token_embd.weight"), DType::q8_0);
    // The output must be a new or regular file, and not the input.
    EXPECT_THROW(quantize_model(options(in, dir.string(), "Q8_0")), Error);
    EXPECT_THROW(quantize_model(options(in, in, "Q8_0")), Error);
    EXPECT_THROW(quantize_model(options(in, "/dev/null", "Q8_0")), Error);
    EXPECT_FALSE(fs::exists(dir.string() + ".tmp"));
}

}  // namespace
}  // namespace tern
