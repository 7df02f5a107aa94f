// read_model_config: metadata -> ModelConfig with range checks, so that nothing later can index
// out of bounds because of a hostile or corrupt value.
#include "model/model_config.h"

#include "core/error.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/utf8.h"

#include <cmath>

namespace tern {
namespace {

constexpr int64_t k_max_dim = int64_t{1} << 20;  // generous bound on any width or count

int64_t required_int(const GgufFile & f, const std::string & key, int64_t lo, int64_t hi) {
    const auto v = f.get_int(key);
    if (!v) fail(ErrorKind::invalid_model, format("metadata key '%s' is missing", key.c_str()),
                 "the file is not a complete BitNet model; re-convert it");
    if (*v < lo || *v > hi) {
        fail(ErrorKind::invalid_model, format("metadata key '%s' is %lld; expected %lld..%lld", key.c_str(),
                                              static_cast<long long>(*v), static_cast<long long>(lo),
                                              static_cast<long long>(hi)));
    }
    return *v;
}

int64_t optional_int(const GgufFile & f, const std::string & key, int64_t def, int64_t lo, int64_t hi) {
    return f.find(key) ? required_int(f, key, lo, hi) : def;
}

// Scalar or per-layer array (all equal) integer key, e.g. feed_forward_length / head_count.
int64_t uniform_int(const GgufFile & f, const std::string & key, bool required, int64_t def, int64_t lo, int64_t hi) {
    const GgufKv * kv = f.find(key);
    if (kv && kv->value.type == GgufType::array) {
        const auto arr = f.get_int_array(key).value();
        if (arr.empty()) fail(ErrorKind::invalid_model, format("metadata key '%s' is an empty array", key.c_str()));
        for (int64_t v : arr) {
            if (v != arr[0]) {
                fail(ErrorKind::unsupported, format("metadata key '%s' varies per layer; tern needs one value", key.c_str()));
            }
        }
        if (arr[0] < lo || arr[0] > hi) {
            fail(ErrorKind::invalid_model, format("metadata key '%s' is %lld; expected %lld..%lld", key.c_str(),
                                                  static_cast<long long>(arr[0]), static_cast<long long>(lo),
                                                  static_cast<long long>(hi)));
        }
        return arr[0];
    }
    return required || kv ? required_int(f, key, lo, hi) : def;
}

float float_key(const GgufFile & f, const std::string & key, bool required, float def, float lo, float hi) {
    const auto v = f.get_float(key);
    if (!v) {
        if (required) fail(ErrorKind::invalid_model, format("metadata key '%s' is missing", key.c_str()));
        return def;
    }
    if (!std::isfinite(*v) || *v < lo || *v > hi) {
        fail(ErrorKind::invalid_model, format("metadata key '%s' is %g; expected %g..%g", key.c_str(), *v,
                                              static_cast<double>(lo), static_cast<double>(hi)));
    }
    return static_cast<float>(*v);
}

}  // namespace

bool is_supported_arch(std::string_view arch) { return is_family_arch(arch); }

namespace {

// A Llama / Qwen3 / Phi-3 file's configuration in the shared skeleton's terms.
ModelConfig config_from_family(const GgufFile & f) {
    const FamilyConfig fc = read_family_config(f);
    if (fc.rope_factors) {
        fail(ErrorKind::unsupported, "tensors 'rope_factors_long' / 'rope_factors_short' (Phi-3 LongRoPE) are not supported yet",
             "Phi-3-mini-4k (no rope scaling) runs; the 128k variants need LongRoPE");
    }
    ModelConfig c;
    c.arch            = fc.arch;
    c.name            = fc.name;
    c.n_vocab         = fc.n_vocab;
    c.n_ctx_train     = fc.n_ctx_train;
    c.n_embd          = fc.n_embd;
    c.n_layer         = fc.n_layer;
    c.n_ff            = fc.n_ff;
    c.n_head          = fc.n_head;
    c.n_head_kv       = fc.n_head_kv;
    c.head_dim        = fc.head_dim;
    c.n_rot           = fc.n_rot;
    c.rope_freq_base  = fc.rope_freq_base;
    c.norm_eps        = fc.norm_eps;
    c.ffn_act         = fc.glu == GluActivation::relu2 ? FfnActivation::relu2 : FfnActivation::silu;
    c.synthetic       = f.get_bool("tern.synthetic").value_or(false);
    c.family          = fc.family;
    c.rope_mode       = fc.rope_style == RopeStyle::norm ? RopeMode::norm : RopeMode::neox;
    c.rope_freq_scale = fc.rope_freq_scale;
    c.qk_norm         = fc.qk_norm;
    c.fused_qkv       = fc.fused_qkv;
    c.fused_gate_up   = fc.fused_gate_up;
    c.rope_freqs      = fc.rope_freqs;
    return c;
}

}  // namespace

AttentionShape ModelConfig::attention_shape() const {
    AttentionShape s;
    s.n_head         = n_head;
    s.n_head_kv      = n_head_kv;
    s.head_dim       = head_dim;
    s.n_rot          = n_rot;
    s.rope_freq_base = rope_freq_base;
    s.scale          = 1.0f / std::sqrt(static_cast<float>(head_dim));
    s.rope_mode       = rope_mode;
    s.rope_freq_scale = rope_freq_scale;
    s.qk_norm_eps     = norm_eps;
    return s;
}

ModelConfig read_model_config(const GgufFile & f) {
    ModelConfig c;
    const auto  arch = f.get_string("general.architecture");
    if (!arch) fail(ErrorKind::invalid_model, "metadata key 'general.architecture' is missing");
    c.arch = std::string(*arch);
    if (c.arch == "llama" || c.arch == "qwen3" || c.arch == "phi3") return config_from_family(f);
    if (!is_supported_arch(c.arch)) {
        fail(ErrorKind::unsupported, format("architecture '%s' is not supported", printable(c.arch).c_str()),
             "tern runs bitnet-b1.58, bitnet-25, bitnet, llama, qwen3 and phi3 models");
    }
    for (const auto & kv : f.kvs()) {
        if (kv.key.starts_with("prism.hadamard.")) {
            fail(ErrorKind::unsupported, format("metadata key '%s': Hadamard-rotated (Bonsai 2) weights are not supported",
                                                printable(kv.key).c_str()));
        }
    }
    if (const auto name = f.get_string("general.name")) c.name = std::string(*name);
    const std::string p = c.arch + ".";
    c.n_embd      = required_int(f, p + "embedding_length", 1, k_max_dim);
    c.n_layer     = required_int(f, p + "block_count", 1, 4096);
    c.n_ctx_train = required_int(f, p + "context_length", 1, k_max_context_length);
    c.n_ff        = uniform_int(f, p + "feed_forward_length", true, 0, 1, k_max_dim);
    c.n_head      = uniform_int(f, p + "attention.head_count", true, 0, 1, 4096);
    c.n_head_kv   = uniform_int(f, p + "attention.head_count_kv", false, c.n_head, 1, 4096);
    if (c.n_head % c.n_head_kv != 0) {
        fail(ErrorKind::invalid_model, format("attention.head_count (%lld) is not a multiple of head_count_kv (%lld)",
                                              static_cast<long long>(c.n_head), static_cast<long long>(c.n_head_kv)));
    }
    if (c.n_embd % c.n_head != 0 && !f.find(p + "attention.key_length")) {
        fail(ErrorKind::invalid_model, format("embedding_length %lld is not a multiple of head_count %lld",
                                              static_cast<long long>(c.n_embd), static_cast<long long>(c.n_head)));
    }
    c.head_dim = optional_int(f, p + "attention.key_length", c.n_embd / c.n_head, 2, 4096);
    const int64_t v_len = optional_int(f, p + "attention.value_length", c.head_dim, 1, 4096);
    if (v_len != c.head_dim) {
        fail(ErrorKind::unsupported, format("attention.value_length %lld differs from key_length %lld",
                                            static_cast<long long>(v_len), static_cast<long long>(c.head_dim)));
    }
    if (c.n_head * c.head_dim != c.n_embd) {
        fail(ErrorKind::unsupported, format("head_count x key_length = %lld differs from embedding_length %lld",
                                            static_cast<long long>(c.n_head * c.head_dim), static_cast<long long>(c.n_embd)));
    }
    c.n_rot = optional_int(f, p + "rope.dimension_count", c.head_dim, 2, c.head_dim);
    if (c.n_rot % 2 != 0) fail(ErrorKind::invalid_model, format("rope.dimension_count %lld is odd", static_cast<long long>(c.n_rot)));
    c.rope_freq_base = float_key(f, p + "rope.freq_base", false, 10000.0f, 1.0f, 1e12f);
    c.norm_eps       = float_key(f, p + "attention.layer_norm_rms_epsilon", true, 1e-5f, 0.0f, 1.0f);
    if (const auto type = f.get_string(p + "rope.scaling.type")) {
        const double factor = f.get_float(p + "rope.scaling.factor").value_or(0.0);
        if (!(*type == "none" || (*type == "linear" && (factor == 0.0 || factor == 1.0)))) {
            fail(ErrorKind::unsupported, format("rope scaling '%s' (factor %g) is not supported", printable(*type).c_str(), factor));
        }
    }
    // Vocabulary size: the token_embd rows decide; vocab_size and the token list must agree.
    if (const GgufTensorInfo * te = f.find_tensor("token_embd.weight")) c.n_vocab = te->ne[1];
    if (const auto vs = f.get_int(p + "vocab_size")) {
        if (c.n_vocab != 0 && *vs != c.n_vocab) {
            fail(ErrorKind::invalid_model, format("%svocab_size is %lld but token_embd.weight has %lld rows", p.c_str(),
                                                  static_cast<long long>(*vs), static_cast<long long>(c.n_vocab)));
        }
        c.n_vocab = *vs;
    }
    if (c.n_vocab <= 0) fail(ErrorKind::invalid_model, "cannot tell the vocabulary size: token_embd.weight is missing");
    c.ffn_act   = (c.arch == "bitnet") ? FfnActivation::silu : FfnActivation::relu2;
    c.synthetic = f.get_bool("tern.synthetic").value_or(false);
    return c;
}

}  // namespace tern
