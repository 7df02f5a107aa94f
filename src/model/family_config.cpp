// read_family_config / check_family_tensors; see family_config.h.
#include "model/family_config.h"

#include "core/error.h"
#include "core/log.h"

#include <cmath>
#include <set>

namespace tern {
namespace {

constexpr int64_t k_max_dim = int64_t{1} << 20;

[[noreturn]] void bad(const std::string & msg, const std::string & hint = {}) { fail(ErrorKind::invalid_model, msg, hint); }

class Meta {
public:
    Meta(const GgufFile & f, std::string prefix) : f_(f), p_(std::move(prefix)) {}

    int64_t required(const std::string & key, int64_t lo, int64_t hi) const {
        if (!f_.find(p_ + key)) bad(format("metadata key '%s%s' is missing", p_.c_str(), key.c_str()));
        return scalar(key, lo, hi);
    }
    int64_t optional(const std::string & key, int64_t def, int64_t lo, int64_t hi) const {
        return f_.find(p_ + key) ? scalar(key, lo, hi) : def;
    }
    float real(const std::string & key, bool is_required, float def, double lo, double hi) const {
        const auto v = f_.get_float(p_ + key);
        if (!v) {
            if (is_required) bad(format("metadata key '%s%s' is missing", p_.c_str(), key.c_str()));
            return def;
        }
        if (!std::isfinite(*v) || *v < lo || *v > hi) {
            bad(format("metadata key '%s%s' is %g; expected %g..%g", p_.c_str(), key.c_str(), *v, lo, hi));
        }
        return static_cast<float>(*v);
    }
    std::optional<std::string_view> string(const std::string & key) const { return f_.get_string(p_ + key); }

private:
    // A scalar, or a per-layer array whose entries are all equal (feed_forward_length, head_count).
    int64_t scalar(const std::string & key, int64_t lo, int64_t hi) const {
        const std::string full = p_ + key;
        int64_t           v    = 0;
        if (f_.find(full)->value.type == GgufType::array) {
            const auto arr = f_.get_int_array(full).value();
            if (arr.empty()) bad(format("metadata key '%s' is an empty array", full.c_str()));
            for (int64_t x : arr) {
                if (x != arr[0]) fail(ErrorKind::unsupported, format("metadata key '%s' varies per layer; tern needs one value", full.c_str()));
            }
            v = arr[0];
        } else {
            v = f_.get_int(full).value();
        }
        if (v < lo || v > hi) {
            bad(format("metadata key '%s' is %lld; expected %lld..%lld", full.c_str(), (long long) v, (long long) lo, (long long) hi));
        }
        return v;
    }

    const GgufFile & f_;
    std::string      p_;
};

std::string shape_str(const std::vector<int64_t> & s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

}  // namespace

std::string_view model_family_name(ModelFamily family) {
    switch (family) {
        case ModelFamily::bitnet: return "bitnet";
        case ModelFamily::llama: return "llama";
        case ModelFamily::qwen3: return "qwen3";
        case ModelFamily::phi3: return "phi3";
    }
    return "?";
}

bool is_family_arch(std::string_view a) {
    return a == "bitnet-b1.58" || a == "bitnet-25" || a == "bitnet" || a == "llama" || a == "qwen3" || a == "phi3";
}

FamilyConfig read_family_config(const GgufFile & f) {
    FamilyConfig c;
    const auto   arch = f.get_string("general.architecture");
    if (!arch) bad("metadata key 'general.architecture' is missing");
    c.arch = std::string(*arch);
    if (!is_family_arch(c.arch)) {
        fail(ErrorKind::unsupported, format("architecture '%s' is not supported", c.arch.c_str()),
             "tern runs bitnet-b1.58, bitnet-25, bitnet, llama, qwen3 and phi3 models");
    }
    for (const auto & kv : f.kvs()) {
        if (kv.key.starts_with("prism.hadamard.")) {
            fail(ErrorKind::unsupported, format("metadata key '%.*s': Hadamard-rotated (Bonsai 2) weights are not supported",
                                                static_cast<int>(kv.key.size()), kv.key.data()));
        }
    }
    if (const auto name = f.get_string("general.name")) c.name = std::string(*name);
    c.family = c.arch == "llama" ? ModelFamily::llama
               : c.arch == "qwen3" ? ModelFamily::qwen3
               : c.arch == "phi3"  ? ModelFamily::phi3
                                   : ModelFamily::bitnet;
    const Meta m(f, c.arch + ".");
    c.n_embd      = m.required("embedding_length", 1, k_max_dim);
    c.n_layer     = m.required("block_count", 1, 4096);
    c.n_ctx_train = m.required("context_length", 1, int64_t{1} << 24);
    c.n_ff        = m.required("feed_forward_length", 1, k_max_dim);
    c.n_head      = m.required("attention.head_count", 1, 4096);
    c.n_head_kv   = m.optional("attention.head_count_kv", c.n_head, 1, 4096);
    if (c.n_head % c.n_head_kv != 0) {
        bad(format("attention.head_count (%lld) is not a multiple of head_count_kv (%lld)", (long long) c.n_head,
                   (long long) c.n_head_kv));
    }
    const bool has_key_length = f.find(c.arch + ".attention.key_length") != nullptr;
    if (!has_key_length && c.n_embd % c.n_head != 0) {
        bad(format("embedding_length %lld is not a multiple of head_count %lld and there is no attention.key_length",
                   (long long) c.n_embd, (long long) c.n_head));
    }
    c.head_dim = m.optional("attention.key_length", c.n_embd / c.n_head, 2, 4096);
    if (m.optional("attention.value_length", c.head_dim, 1, 4096) != c.head_dim) {
        fail(ErrorKind::unsupported, "attention.value_length differs from key_length");
    }
    c.n_rot = m.optional("rope.dimension_count", c.head_dim, 2, c.head_dim);
    if (c.n_rot % 2 != 0) bad(format("rope.dimension_count %lld is odd", (long long) c.n_rot));
    c.rope_freq_base = m.real("rope.freq_base", false, 10000.0f, 1.0, 1e12);
    c.norm_eps       = m.real("attention.layer_norm_rms_epsilon", true, 1e-5f, 0.0, 1.0);
    c.n_ctx_orig     = m.optional("rope.scaling.original_context_length", c.n_ctx_train, 1, int64_t{1} << 24);
    if (const auto type = m.string("rope.scaling.type")) {
        const float factor = m.real("rope.scaling.factor", false, 0.0f, 0.0, 1e6);
        if (*type == "linear") {
            if (factor != 0.0f) c.rope_freq_scale = 1.0f / factor;
        } else if (*type != "none") {
            fail(ErrorKind::unsupported, format("rope scaling '%.*s' is not supported", static_cast<int>(type->size()), type->data()),
                 "tern supports no scaling, linear scaling, Llama-3 rope_freqs and Phi-3 rope factors");
        }
    }
    if (c.family != ModelFamily::llama && c.family != ModelFamily::qwen3 && c.family != ModelFamily::phi3 &&
        c.n_head * c.head_dim != c.n_embd) {
        fail(ErrorKind::unsupported, "head_count x key_length differs from embedding_length (bitnet)");
    }

    c.rope_style    = c.family == ModelFamily::llama ? RopeStyle::norm : RopeStyle::neox;
    c.glu           = (c.arch == "bitnet-b1.58" || c.arch == "bitnet-25") ? GluActivation::relu2 : GluActivation::silu;
    c.sub_norms     = c.family == ModelFamily::bitnet;
    c.qk_norm       = c.family == ModelFamily::qwen3;
    c.fused_qkv     = f.find_tensor("blk.0.attn_qkv.weight") != nullptr;
    c.fused_gate_up = c.family == ModelFamily::phi3 && f.find_tensor("blk.0.ffn_gate.weight") == nullptr;
    c.tied_head     = f.find_tensor("output.weight") == nullptr;
    c.rope_freqs    = f.find_tensor("rope_freqs.weight") != nullptr;
    c.rope_factors  = f.find_tensor("rope_factors_long.weight") != nullptr || f.find_tensor("rope_factors_short.weight") != nullptr;
    if (c.rope_freqs && c.family != ModelFamily::llama) {
        fail(ErrorKind::unsupported, format("tensor 'rope_freqs.weight' in a %s model", c.arch.c_str()));
    }

    // Vocabulary: token_embd's rows decide; vocab_size and the token list must agree with them.
    const GgufTensorInfo * te = f.find_tensor("token_embd.weight");
    if (!te) bad("tensor 'token_embd.weight' is missing");
    c.n_vocab = te->ne[1];
    if (const auto vs = f.get_int(c.arch + ".vocab_size"); vs && *vs != c.n_vocab) {
        bad(format("%s.vocab_size is %lld but token_embd.weight has %lld rows", c.arch.c_str(), (long long) *vs,
                   (long long) c.n_vocab));
    }
    if (const GgufKv * tokens = f.find("tokenizer.ggml.tokens"); tokens && static_cast<int64_t>(tokens->value.count) > c.n_vocab) {
        bad(format("tokenizer.ggml.tokens has %llu entries but token_embd.weight has only %lld rows",
                   static_cast<unsigned long long>(tokens->value.count), (long long) c.n_vocab));
    }
    return c;
}

std::vector<TensorSpec> family_tensor_specs(const FamilyConfig & c) {
    const int64_t           e = c.n_embd, ff = c.n_ff, q = c.n_q(), kv = c.n_kv();
    std::vector<TensorSpec> s;
    s.push_back({"token_embd.weight", {e, c.n_vocab}});
    if (c.rope_freqs) s.push_back({"rope_freqs.weight", {c.n_rot / 2}, false});
    if (c.rope_factors) {
        s.push_back({"rope_factors_long.weight", {c.n_rot / 2}, false});
        s.push_back({"rope_factors_short.weight", {c.n_rot / 2}, false});
    }
    for (int64_t il = 0; il < c.n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        s.push_back({b + "attn_norm.weight", {e}, false});
        if (c.fused_qkv) {
            s.push_back({b + "attn_qkv.weight", {e, q + 2 * kv}});
        } else {
            s.push_back({b + "attn_q.weight", {e, q}});
            s.push_back({b + "attn_k.weight", {e, kv}});
            s.push_back({b + "attn_v.weight", {e, kv}});
        }
        if (c.qk_norm) {
            s.push_back({b + "attn_q_norm.weight", {c.head_dim}, false});
            s.push_back({b + "attn_k_norm.weight", {c.head_dim}, false});
        }
        if (c.sub_norms) s.push_back({b + "attn_sub_norm.weight", {q}, false});
        s.push_back({b + "attn_output.weight", {q, e}});
        s.push_back({b + "ffn_norm.weight", {e}, false});
        if (c.fused_gate_up) {
            s.push_back({b + "ffn_up.weight", {e, 2 * ff}});
        } else {
            s.push_back({b + "ffn_gate.weight", {e, ff}});
            s.push_back({b + "ffn_up.weight", {e, ff}});
        }
        if (c.sub_norms) s.push_back({b + "ffn_sub_norm.weight", {ff}, false});
        s.push_back({b + "ffn_down.weight", {ff, e}});
    }
    s.push_back({"output_norm.weight", {e}, false});
    if (!c.tied_head) s.push_back({"output.weight", {e, c.n_vocab}});
    return s;
}

void check_family_tensors(const GgufFile & f, const FamilyConfig & c) {
    std::set<std::string_view> known;
    for (const TensorSpec & spec : family_tensor_specs(c)) {
        const GgufTensorInfo * t = f.find_tensor(spec.name);
        if (!t) {
            if (spec.optional) continue;
            bad(format("tensor '%s' is missing (%s model, expected shape %s)", spec.name.c_str(), c.arch.c_str(),
                       shape_str(spec.shape).c_str()),
                "the file is incomplete or its metadata does not match its tensors");
        }
        known.insert(t->name);
        std::vector<int64_t> got(t->ne.begin(), t->ne.begin() + t->n_dims);
        while (got.size() > spec.shape.size() && got.back() == 1) got.pop_back();
        if (got != spec.shape) {
            bad(format("tensor '%s' has shape %s, expected %s", spec.name.c_str(), shape_str(got).c_str(), shape_str(spec.shape).c_str()));
        }
        const bool float_type = t->type == DType::f32 || t->type == DType::f16 || t->type == DType::bf16;
        if (!spec.matrix && !float_type) {
            bad(format("tensor '%s' has type %s, expected f32 (a vector)", spec.name.c_str(), std::string(dtype_name(t->type)).c_str()));
        }
        if (spec.matrix && (t->type == DType::i8 || t->type == DType::i32)) {
            bad(format("tensor '%s' has type %s, which is not a weight type", spec.name.c_str(), std::string(dtype_name(t->type)).c_str()));
        }
    }
    for (const auto & t : f.tensors()) {
        if (!known.count(t.name) && !t.name.ends_with(".scale")) {
            TERN_LOG_WARN("model: ignoring tensor '%.*s' that a %s model does not use", static_cast<int>(t.name.size()),
                          t.name.data(), c.arch.c_str());
        }
    }
}

}  // namespace tern
