// Llama / Qwen3 / Phi-3 checkpoint conversion; see family_convert.h.
#include "convert/family_convert.h"

#include "convert/hf_ternary.h"
#include "convert/safetensors.h"
#include "core/error.h"
#include "core/llama_ftype.h"
#include "core/log.h"
#include "core/rope_scaling.h"
#include "gguf/gguf_writer.h"
#include "quant/block_formats.h"
#include "quant/ternarize.h"
#include "quant/ternary_formats.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/sentencepiece_import.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

namespace tern {
namespace {

namespace fs = std::filesystem;

bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
bool is_ternary(DType t) { return t == DType::i2_s || t == DType::tq2_0 || t == DType::tq1_0; }

// One GGUF tensor and where it comes from.
struct Planned {
    std::string      name;
    DType            type = DType::f32;
    int64_t          ne0 = 0, ne1 = 1;  // ne1 = 1 for vectors
    bool             vector = false;
    const StTensor * src    = nullptr;   // null for generated tensors (rope factors)
    const StTensor * scale  = nullptr;   // packed ternary: weight_scale
    int64_t          permute_heads = 0;  // llama q/k: heads of the row permutation (0 = none)
    std::vector<float> generated;        // rope_freqs / rope_factors_*
};

class Planner {
public:
    Planner(const HfFamilyConfig & c, const SafetensorsCheckpoint & ckpt, DType weight, DType head)
        : c_(c), ckpt_(ckpt), weight_(weight), head_(head) {}

    std::vector<Planned> run() {
        std::vector<Planned> plan;
        const int64_t        e = c_.hidden_size, ff = c_.intermediate_size, q = c_.q_dim(), kv = c_.kv_dim();
        plan.push_back(matrix("model.embed_tokens.weight", "token_embd.weight", c_.vocab_size, e, head_, true));
        if (c_.rope_scaling_type == "llama3") {
            plan.push_back(generated("rope_freqs.weight", llama3_rope_freq_factors(c_.rope_theta, c_.n_rot, c_.llama3)));
        } else if (c_.rope_scaling_type == "longrope") {
            plan.push_back(generated("rope_factors_long.weight", c_.long_factor));
            plan.push_back(generated("rope_factors_short.weight", c_.short_factor));
        }
        for (int64_t il = 0; il < c_.n_layers; ++il) {
            const std::string hf = "model.layers." + std::to_string(il) + ".", g = "blk." + std::to_string(il) + ".";
            plan.push_back(vector(hf + "input_layernorm.weight", g + "attn_norm.weight", e));
            if (c_.arch == "phi3") {
                plan.push_back(matrix(hf + "self_attn.qkv_proj.weight", g + "attn_qkv.weight", q + 2 * kv, e, weight_));
            } else {
                Planned pq = matrix(hf + "self_attn.q_proj.weight", g + "attn_q.weight", q, e, weight_);
                Planned pk = matrix(hf + "self_attn.k_proj.weight", g + "attn_k.weight", kv, e, weight_);
                if (c_.arch == "llama") pq.permute_heads = c_.n_heads, pk.permute_heads = c_.n_kv_heads;
                plan.push_back(std::move(pq));
                plan.push_back(std::move(pk));
                plan.push_back(matrix(hf + "self_attn.v_proj.weight", g + "attn_v.weight", kv, e, weight_));
            }
            if (c_.arch == "qwen3") {
                plan.push_back(vector(hf + "self_attn.q_norm.weight", g + "attn_q_norm.weight", c_.head_dim));
                plan.push_back(vector(hf + "self_attn.k_norm.weight", g + "attn_k_norm.weight", c_.head_dim));
            }
            plan.push_back(matrix(hf + "self_attn.o_proj.weight", g + "attn_output.weight", e, q, weight_));
            plan.push_back(vector(hf + "post_attention_layernorm.weight", g + "ffn_norm.weight", e));
            if (c_.arch == "phi3") {
                plan.push_back(matrix(hf + "mlp.gate_up_proj.weight", g + "ffn_up.weight", 2 * ff, e, weight_));
            } else {
                plan.push_back(matrix(hf + "mlp.gate_proj.weight", g + "ffn_gate.weight", ff, e, weight_));
                plan.push_back(matrix(hf + "mlp.up_proj.weight", g + "ffn_up.weight", ff, e, weight_));
            }
            plan.push_back(matrix(hf + "mlp.down_proj.weight", g + "ffn_down.weight", e, ff, weight_));
        }
        plan.push_back(vector("model.norm.weight", "output_norm.weight", e));
        const bool has_lm_head = ckpt_.find("lm_head.weight") != nullptr;
        if (!c_.tie_word_embeddings) {
            if (!has_lm_head) {
                bad("checkpoint has no tensor 'lm_head.weight', but config.json does not tie the embeddings",
                    "set \"tie_word_embeddings\": true if the LM head is the embedding");
            }
            plan.push_back(matrix("lm_head.weight", "output.weight", c_.vocab_size, e, head_, true));
        } else if (has_lm_head) {
            used_.insert("lm_head.weight");  // tied: llama.cpp writes no output.weight either
        }
        report_unused();
        return plan;
    }

private:
    [[noreturn]] static void bad(const std::string & msg, const std::string & hint = {}) { fail(ErrorKind::invalid_model, msg, hint); }

    const StTensor & require(const std::string & name) {
        const StTensor * t = ckpt_.find(name);
        if (!t) bad(format("checkpoint has no tensor '%s'", name.c_str()), "the folder must hold a complete checkpoint matching its config.json");
        used_.insert(name);
        return *t;
    }

    static std::string shape_str(const std::vector<int64_t> & s) {
        std::string out = "[";
        for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
        return out + "]";
    }

    Planned vector(const std::string & hf, const std::string & gguf, int64_t n) {
        const StTensor & t = require(hf);
        if (!st_dtype_is_float(t.dtype) || t.shape != std::vector<int64_t>{n}) {
            bad(format("tensor '%s' is %s %s, expected a float vector [%lld]", hf.c_str(), std::string(st_dtype_name(t.dtype)).c_str(),
                       t.shape_string().c_str(), (long long) n));
        }
        Planned p;
        p.name = gguf, p.type = DType::f32, p.ne0 = n, p.vector = true, p.src = &t;
        return p;
    }

    static Planned generated(const std::string & gguf, std::vector<float> values) {
        Planned p;
        p.name = gguf, p.type = DType::f32, p.ne0 = static_cast<int64_t>(values.size()), p.vector = true;
        p.generated = std::move(values);
        return p;
    }

    Planned matrix(const std::string & hf, const std::string & gguf, int64_t out, int64_t in, DType type, bool embedding = false) {
        const StTensor & t = require(hf);
        Planned          p;
        p.name = gguf, p.type = type, p.ne0 = in, p.ne1 = out, p.src = &t;
        const bool ternary_source = c_.bitnet_quantized && !embedding;
        if (ternary_source && t.dtype == StDType::u8) {  // packed U8 [out/4, in] + weight_scale
            if (out % 4 != 0 || t.shape != std::vector<int64_t>{out / 4, in}) {
                bad(format("tensor '%s' is packed U8 %s, expected [%lld, %lld]", hf.c_str(), t.shape_string().c_str(),
                           (long long) (out / 4), (long long) in));
            }
            const std::string scale = hf.substr(0, hf.size() - 7) + ".weight_scale";  // "....weight" -> "....weight_scale"
            p.scale                 = &require(scale);
            if (!st_dtype_is_float(p.scale->dtype) || p.scale->n_elements != 1) bad(format("tensor '%s' must be one float", scale.c_str()));
        } else {
            if (!st_dtype_is_float(t.dtype)) {
                bad(format("tensor '%s' has dtype %s, expected BF16, F16 or F32", hf.c_str(), std::string(st_dtype_name(t.dtype)).c_str()));
            }
            if (t.shape != std::vector<int64_t>{out, in}) {
                bad(format("tensor '%s' has shape %s, expected %s", hf.c_str(), t.shape_string().c_str(), shape_str({out, in}).c_str()),
                    "the checkpoint does not match its config.json");
            }
        }
        const int64_t multiple = type == DType::i2_s ? 128 : dtype_traits(type).block_size;
        if (in % multiple != 0) {
            bad(format("tensor '%s' has rows of %lld values; %s needs a multiple of %lld", gguf.c_str(), (long long) in,
                       std::string(dtype_name(type)).c_str(), (long long) multiple),
                "choose another type with --type / --embd-type");
        }
        return p;
    }

    void report_unused() const {
        size_t      n = 0;
        std::string list;
        for (const auto & name : ckpt_.names()) {
            if (used_.count(name) || name.ends_with("rotary_emb.inv_freq")) continue;
            if (n++ < 5) list += (list.empty() ? "" : ", ") + name;
        }
        if (n) TERN_LOG_WARN("convert: ignoring %zu checkpoint tensor(s) with no GGUF counterpart: %s%s", n, list.c_str(), n > 5 ? ", ..." : "");
    }

    const HfFamilyConfig &        c_;
    const SafetensorsCheckpoint & ckpt_;
    DType                         weight_, head_;
    std::set<std::string>         used_;
};

int64_t source_row(const Planned & p, int64_t r) { return p.permute_heads ? llama_permuted_row(r, p.ne1, p.permute_heads) : r; }

// The [out, in] ternary values (rows in GGUF order) and the multiplier of a BitNet-quantized matrix.
float ternary_source(const Planned & p, bool multiplier, std::vector<int8_t> & values) {
    std::vector<int8_t> hf(static_cast<size_t>(p.ne0 * p.ne1));
    float               scale = 0;
    if (p.scale) {
        unpack_hf_packed(*p.src, p.ne1, p.ne0, hf.data());
        scale = hf_packed_scale(*p.scale, multiplier ? LinearClass::autobitlinear : LinearClass::bitlinear);
    } else {
        const AbsmeanScale s = absmean_scale(*p.src);
        absmean_ternarize(*p.src, s.s_w, hf.data());
        scale = s.scale;
    }
    values.resize(hf.size());
    for (int64_t r = 0; r < p.ne1; ++r) {
        std::memcpy(values.data() + r * p.ne0, hf.data() + source_row(p, r) * p.ne0, static_cast<size_t>(p.ne0));
    }
    return scale;
}

void fill(const Planned & p, const HfFamilyConfig & c, std::span<uint8_t> dst) {
    if (!p.generated.empty()) {
        std::memcpy(dst.data(), p.generated.data(), p.generated.size() * 4);
        return;
    }
    if (p.vector) {
        std::vector<float> v(static_cast<size_t>(p.ne0));
        st_read_f32(*p.src, 0, p.ne0, v.data());
        std::memcpy(dst.data(), v.data(), v.size() * 4);
        return;
    }
    const bool ternary_src = c.bitnet_quantized && p.name != "token_embd.weight" && p.name != "output.weight";
    if (ternary_src) {
        std::vector<int8_t> values;
        const float         scale = ternary_source(p, c.linear_class_multiplier, values);
        if (is_ternary(p.type)) {
            pack_ternary_tensor(p.type, values.data(), p.ne1, p.ne0, scale, dst);
            return;
        }
        std::vector<float> row(static_cast<size_t>(p.ne0));
        for (int64_t r = 0; r < p.ne1; ++r) {
            for (int64_t i = 0; i < p.ne0; ++i) row[static_cast<size_t>(i)] = values[static_cast<size_t>(r * p.ne0 + i)] * scale;
            quantize_row(p.type, row.data(), dst.data() + r * dtype_row_bytes(p.type, p.ne0), p.ne0);
        }
        return;
    }
    std::vector<float> x(static_cast<size_t>(p.ne0 * p.ne1));
    for (int64_t r = 0; r < p.ne1; ++r) st_read_f32(*p.src, source_row(p, r) * p.ne0, p.ne0, x.data() + r * p.ne0);
    for (float v : x) {
        if (!std::isfinite(v)) fail(ErrorKind::invalid_model, format("tensor '%s' has a non-finite value", p.src->name.c_str()));
    }
    if (is_ternary(p.type)) {
        quantize_ternary_tensor(p.type, x.data(), p.ne1, p.ne0, dst);
        return;
    }
    for (int64_t r = 0; r < p.ne1; ++r) quantize_row(p.type, x.data() + r * p.ne0, dst.data() + r * dtype_row_bytes(p.type, p.ne0), p.ne0);
}

TokenizerMetadata read_tokenizer(const fs::path & dir, const HfFamilyConfig & c) {
    const fs::path model = dir / "tokenizer.model", json = dir / "tokenizer.json", config = dir / "tokenizer_config.json";
    const std::string config_path = fs::exists(config) ? config.string() : "";
    TokenizerMetadata m;
    if (fs::exists(model)) {  // SentencePiece (Llama-2, Phi-3): scores and piece types come from here
        m = tokenizer_metadata_from_spm(model.string(), fs::exists(json) ? json.string() : "", config_path);
    } else if (fs::exists(json)) {
        m = tokenizer_metadata_from_hf(json.string(), config_path);
        if (m.pre == "llama-bpe" && c.arch == "qwen3") m.pre = "qwen2";  // cannot happen with Qwen's regex; kept explicit
    } else {
        fail(ErrorKind::io, format("neither '%s' nor '%s' exists", model.string().c_str(), json.string().c_str()),
             "the GGUF embeds the tokenizer; copy tokenizer.json or tokenizer.model into the folder");
    }
    if (static_cast<int64_t>(m.tokens.size()) > c.vocab_size) {
        fail(ErrorKind::invalid_model, format("the tokenizer has %zu tokens but config.json \"vocab_size\" is %lld", m.tokens.size(),
                                              (long long) c.vocab_size));
    }
    for (auto i = static_cast<int64_t>(m.tokens.size()); i < c.vocab_size; ++i) {  // pad as llama.cpp does
        m.tokens.push_back("[PAD" + std::to_string(i) + "]");
        m.token_types.push_back(5);  // UNUSED
        if (!m.scores.empty()) m.scores.push_back(-1000.0f);
    }
    auto from_config = [&](std::optional<int32_t> & id, std::optional<int64_t> cfg) {
        if (!id && cfg && *cfg < c.vocab_size) id = static_cast<int32_t>(*cfg);
    };
    from_config(m.bos_id, c.bos_token_id);
    from_config(m.eos_id, c.eos_token_id);
    from_config(m.pad_id, c.pad_token_id);
    return m;
}

void write_metadata(GgufWriter & w, const HfFamilyConfig & c, const std::string & name, DType weight, const TokenizerMetadata & tok) {
    const std::string a = c.arch + ".";
    w.set_string("general.architecture", c.arch);
    w.set_string("general.name", name);
    w.set_u32(a + "block_count", static_cast<uint32_t>(c.n_layers));
    w.set_u32(a + "context_length", static_cast<uint32_t>(c.context_length));
    if (c.arch == "phi3") w.set_u32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(c.original_context_length));
    w.set_u32(a + "embedding_length", static_cast<uint32_t>(c.hidden_size));
    w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
    w.set_u32(a + "attention.head_count", static_cast<uint32_t>(c.n_heads));
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
    w.set_f32(a + "rope.freq_base", static_cast<float>(c.rope_theta));
    w.set_f32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
    if (c.head_dim_explicit || c.head_dim * c.n_heads != c.hidden_size) {
        w.set_u32(a + "attention.key_length", static_cast<uint32_t>(c.head_dim));
        w.set_u32(a + "attention.value_length", static_cast<uint32_t>(c.head_dim));
    }
    w.set_u32("general.file_type", llama_file_type(weight));
    if (c.arch == "llama") w.set_u32(a + "vocab_size", static_cast<uint32_t>(c.vocab_size));
    w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(c.n_rot));
    if (c.rope_scaling_type == "linear") {
        w.set_string(a + "rope.scaling.type", "linear");
        w.set_f32(a + "rope.scaling.factor", static_cast<float>(c.rope_scaling_factor));
    }
    if (c.rope_attn_factor) w.set_f32(a + "rope.scaling.attn_factor", static_cast<float>(*c.rope_attn_factor));
    if (c.sliding_window) w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(*c.sliding_window));
    write_tokenizer_metadata(w, tok);
    w.set_u32("general.quantization_version", 2);
}

std::string model_name(const std::string & dir) {
    std::error_code ec;
    fs::path        p = fs::weakly_canonical(fs::path(dir), ec);
    if (ec) p = fs::path(dir).lexically_normal();
    std::string n = p.filename().string();
    if (n.empty()) n = p.parent_path().filename().string();
    return n.empty() ? "model" : n;
}

}  // namespace

int64_t llama_permuted_row(int64_t r, int64_t rows, int64_t n_heads) {
    const int64_t d = rows / n_heads, head = r / d, o = r % d;
    return head * d + (o % 2) * (d / 2) + o / 2;  // GGUF row 2i + t <- HF row t·d/2 + i
}

void convert_hf_family_checkpoint(const ConvertOptions & o, const HfFamilyConfig & c) {
    const DType weight = o.weight_type.value_or(c.bitnet_quantized ? DType::i2_s : DType::f16);
    const DType head   = o.head_type.value_or(is_float(weight) ? weight : DType::f16);
    if (is_ternary(head) || dtype_is_lowbit(head)) {
        fail(ErrorKind::invalid_argument, format("--embd-type %s: the embedding and head take a float or Q-type",
                                                 std::string(dtype_name(head)).c_str()));
    }
    const auto ckpt = SafetensorsCheckpoint::open_dir(o.input_dir);
    std::vector<Planned> plan = Planner(c, ckpt, weight, head).run();
    const TokenizerMetadata tok = read_tokenizer(fs::path(o.input_dir), c);
    TERN_LOG_INFO("convert: %s (%s), %lld layers, n_embd %lld, %lld/%lld heads of %lld, n_ff %lld, vocab %lld, %s weights%s",
                  c.hf_class.c_str(), c.arch.c_str(), (long long) c.n_layers, (long long) c.hidden_size, (long long) c.n_heads,
                  (long long) c.n_kv_heads, (long long) c.head_dim, (long long) c.intermediate_size, (long long) c.vocab_size,
                  std::string(dtype_name(weight)).c_str(), c.tie_word_embeddings ? ", tied head" : "");

    GgufWriter w;
    write_metadata(w, c, model_name(o.input_dir), weight, tok);
    for (const Planned & p : plan) {
        std::vector<int64_t> dims = p.vector ? std::vector<int64_t>{p.ne0} : std::vector<int64_t>{p.ne0, p.ne1};
        w.add_tensor(p.name, p.type, std::move(dims), [&p, &c](std::span<uint8_t> dst) { fill(p, c, dst); });
    }
    try {
        w.write_file(o.output_path, o.progress);
    } catch (...) {
        std::remove((o.output_path + ".tmp").c_str());
        throw;
    }
}

}  // namespace tern
