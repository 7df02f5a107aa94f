// config.json validation for the Llama / Qwen3 / Phi-3 families; see hf_family_config.h.
#include "convert/hf_family_config.h"

#include "core/json_strict.h"
#include "core/error.h"
#include "core/log.h"

#include <cmath>
#include <limits>

namespace tern {
namespace {

using json = nlohmann::json;

class Reader {
public:
    Reader(const json & root, const std::string & source) : root_(root), source_(source) {}

    [[noreturn]] void bad(const std::string & msg, const std::string & hint = {}) const {
        fail(ErrorKind::invalid_model, format("config '%s': %s", source_.c_str(), msg.c_str()), hint);
    }
    [[noreturn]] void unsupported(const std::string & msg, const std::string & hint = {}) const {
        fail(ErrorKind::unsupported, format("config '%s': %s", source_.c_str(), msg.c_str()), hint);
    }
    const json * find(const json & obj, const char * key) const {
        const auto it = obj.find(key);
        return it == obj.end() || it->is_null() ? nullptr : &*it;
    }
    int64_t positive_int(const json & obj, const char * key, const char * where = "") const {
        const json * v = find(obj, key);
        if (!v) bad(format("missing %s\"%s\"", where, key));
        if (!v->is_number_unsigned() || v->get<uint64_t>() < 1 || v->get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
            bad(format("%s\"%s\" must be an integer in [1, %u], found %s", where, key, std::numeric_limits<uint32_t>::max(),
                       json_excerpt(*v).c_str()));
        }
        return static_cast<int64_t>(v->get<uint64_t>());
    }
    std::optional<int64_t> optional_int(const json & obj, const char * key) const {
        return find(obj, key) ? std::optional<int64_t>(positive_int(obj, key)) : std::nullopt;
    }
    double number(const json & obj, const char * key, double lo, double hi, const char * where = "") const {
        const json * v = find(obj, key);
        if (!v) bad(format("missing %s\"%s\"", where, key));
        if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() <= lo || v->get<double>() >= hi) {
            bad(format("%s\"%s\" must be a number in (%g, %g), found %s", where, key, lo, hi, json_excerpt(*v).c_str()));
        }
        return v->get<double>();
    }
    std::optional<std::string> string(const json & obj, const char * key, const char * where = "") const {
        const json * v = find(obj, key);
        if (!v) return std::nullopt;
        if (!v->is_string()) bad(format("%s\"%s\" must be a string, found %s", where, key, json_excerpt(*v).c_str()));
        return v->get<std::string>();
    }
    std::optional<bool> boolean(const json & obj, const char * key) const {
        const json * v = find(obj, key);
        if (!v) return std::nullopt;
        if (!v->is_boolean()) bad(format("\"%s\" must be true or false, found %s", key, json_excerpt(*v).c_str()));
        return v->get<bool>();
    }
    std::optional<int64_t> token_id(const char * key) const {
        const json * v = find(root_, key);
        if (!v) return std::nullopt;
        const json * x = v->is_array() ? (v->empty() ? nullptr : &(*v)[0]) : v;
        if (!x) return std::nullopt;
        if (!x->is_number_unsigned()) bad(format("\"%s\" must be a token id or a list of them, found %s", key, json_excerpt(*v).c_str()));
        return static_cast<int64_t>(x->get<uint64_t>());
    }
    std::vector<float> float_list(const json & obj, const char * key, size_t n, const char * where) const {
        const json * v = find(obj, key);
        if (!v || !v->is_array() || v->size() != n) {
            bad(format("%s\"%s\" must be a list of %zu numbers", where, key, n));
        }
        std::vector<float> out;
        for (const json & x : *v) {
            if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() <= 0) {
                bad(format("%s\"%s\" must hold finite numbers > 0, found %s", where, key, json_excerpt(x).c_str()));
            }
            out.push_back(static_cast<float>(x.get<double>()));
        }
        return out;
    }

private:
    const json &        root_;
    const std::string & source_;
};

void read_rope_scaling(const Reader & r, const json & root, HfFamilyConfig & c) {
    // transformers >= 5 moved rope_theta (and the scaling) into "rope_parameters".
    const json * rp    = r.find(root, "rope_parameters");
    const json * scale = r.find(root, "rope_scaling");
    if (rp && !rp->is_object()) r.bad("\"rope_parameters\" must be an object");
    if (r.find(root, "rope_theta")) {
        c.rope_theta = r.number(root, "rope_theta", 0, 1e12);
    } else if (rp && r.find(*rp, "rope_theta")) {
        c.rope_theta = r.number(*rp, "rope_theta", 0, 1e12, "rope_parameters.");
    }
    if (!scale && rp) scale = rp;
    if (!scale) return;
    if (!scale->is_object()) r.bad(format("\"rope_scaling\" must be an object, found %s", json_excerpt(*scale).c_str()));
    std::string type = r.string(*scale, "rope_type", "rope_scaling.").value_or(r.string(*scale, "type", "rope_scaling.").value_or(""));
    if (type.empty() || type == "default") return;
    const char * where = "rope_scaling.";
    c.rope_scaling_type = type;
    if (type == "linear") {
        c.rope_scaling_factor = r.number(*scale, "factor", 0, 1e6, where);
    } else if (type == "llama3") {
        c.llama3.factor           = r.number(*scale, "factor", 0, 1e6, where);
        c.llama3.low_freq_factor  = r.number(*scale, "low_freq_factor", 0, 1e6, where);
        c.llama3.high_freq_factor = r.number(*scale, "high_freq_factor", 0, 1e6, where);
        c.llama3.original_context = r.positive_int(*scale, "original_max_position_embeddings", where);
        if (!(c.llama3.high_freq_factor > c.llama3.low_freq_factor)) r.bad("rope_scaling: high_freq_factor must exceed low_freq_factor");
    } else if (type == "longrope" || type == "su") {
        c.rope_scaling_type = "longrope";
        c.long_factor       = r.float_list(*scale, "long_factor", static_cast<size_t>(c.n_rot / 2), where);
        c.short_factor      = r.float_list(*scale, "short_factor", static_cast<size_t>(c.n_rot / 2), where);
        if (r.find(*scale, "attention_factor")) c.rope_attn_factor = r.number(*scale, "attention_factor", 0, 1e6, where);
    } else {
        r.unsupported(format("rope scaling \"%s\" is not supported", type.c_str()),
                      "tern converts no scaling, linear, llama3 and longrope (Phi-3)");
    }
}

}  // namespace

bool is_hf_family_class(std::string_view c) {
    return c == "LlamaForCausalLM" || c == "Qwen3ForCausalLM" || c == "Phi3ForCausalLM";
}

std::string hf_architecture(std::string_view json_text, const std::string & source) {
    const json root = parse_json_strict(json_text, "config '" + source + "'");
    if (!root.is_object()) return "";
    const auto it = root.find("architectures");
    if (it == root.end() || !it->is_array() || it->empty() || !(*it)[0].is_string()) return "";
    return (*it)[0].get<std::string>();
}

HfFamilyConfig parse_hf_family_config(std::string_view json_text, const std::string & source) {
    const json   root = parse_json_strict(json_text, "config '" + source + "'");
    const Reader r(root, source);
    if (!root.is_object()) r.bad("expected a JSON object");
    HfFamilyConfig c;
    c.hf_class = hf_architecture(json_text, source);
    if (!is_hf_family_class(c.hf_class)) {
        r.unsupported(format("\"architectures\" is [\"%s\"]", c.hf_class.c_str()),
                      "tern convert reads BitNetForCausalLM, LlamaForCausalLM, Qwen3ForCausalLM and Phi3ForCausalLM");
    }
    c.arch              = c.hf_class == "LlamaForCausalLM" ? "llama" : c.hf_class == "Qwen3ForCausalLM" ? "qwen3" : "phi3";
    c.hidden_size       = r.positive_int(root, "hidden_size");
    c.intermediate_size = r.positive_int(root, "intermediate_size");
    c.n_layers          = r.positive_int(root, "num_hidden_layers");
    c.n_heads           = r.positive_int(root, "num_attention_heads");
    c.n_kv_heads        = r.optional_int(root, "num_key_value_heads").value_or(c.n_heads);
    c.vocab_size        = r.positive_int(root, "vocab_size");
    c.context_length    = r.positive_int(root, "max_position_embeddings");
    // transformers >= 5 may keep these inside "rope_parameters" instead of at the top level.
    const json * rope_params = r.find(root, "rope_parameters");
    if (rope_params && !rope_params->is_object()) r.bad("\"rope_parameters\" must be an object");
    auto top_or_rope = [&](const char * key) -> const json * {
        if (r.find(root, key)) return &root;
        return rope_params && r.find(*rope_params, key) ? rope_params : nullptr;
    };
    const json * orig = top_or_rope("original_max_position_embeddings");
    c.original_context_length = orig ? r.positive_int(*orig, "original_max_position_embeddings") : c.context_length;
    if (c.n_heads % c.n_kv_heads != 0) {
        r.bad(format("\"num_attention_heads\" (%lld) must be a multiple of \"num_key_value_heads\" (%lld)",
                     (long long) c.n_heads, (long long) c.n_kv_heads));
    }
    if (const auto hd = r.optional_int(root, "head_dim")) {
        c.head_dim = *hd, c.head_dim_explicit = true;
    } else {
        if (c.hidden_size % c.n_heads != 0) r.bad("\"hidden_size\" is not a multiple of \"num_attention_heads\" and there is no \"head_dim\"");
        c.head_dim = c.hidden_size / c.n_heads;
    }
    if (c.head_dim % 2 != 0) r.bad(format("head dimension %lld must be even", (long long) c.head_dim));
    double partial = 1.0;
    if (const json * holder = top_or_rope("partial_rotary_factor")) partial = r.number(*holder, "partial_rotary_factor", 0, 1.000001);
    c.n_rot = static_cast<int64_t>(std::llround(partial * static_cast<double>(c.head_dim)));
    if (c.n_rot % 2 != 0 || c.n_rot < 2) r.bad(format("rotary dimension %lld must be even", (long long) c.n_rot));
    c.rms_norm_eps = r.number(root, "rms_norm_eps", 0, 1);
    read_rope_scaling(r, root, c);
    if (c.arch != "llama" && c.rope_scaling_type == "llama3") r.unsupported("llama3 rope scaling outside a Llama model");
    if (c.arch != "phi3" && c.rope_scaling_type == "longrope") r.unsupported("longrope scaling outside a Phi-3 model");

    const std::string act = r.string(root, "hidden_act").value_or("silu");
    if (act != "silu") r.unsupported(format("\"hidden_act\" is \"%s\"; these families use \"silu\"", act.c_str()));
    for (const char * key : {"attention_bias", "mlp_bias"}) {
        if (r.boolean(root, key).value_or(false)) r.unsupported(format("\"%s\" is true; tern's llama-family models have no biases", key));
    }
    c.tie_word_embeddings = r.boolean(root, "tie_word_embeddings").value_or(false);  // the default of all three configs
    if (c.arch == "phi3") {
        if (const json * sw = r.find(root, "sliding_window"); sw && sw->is_number_unsigned()) c.sliding_window = sw->get<int64_t>();
    }
    if (const json * qc = r.find(root, "quantization_config")) {
        if (!qc->is_object()) r.bad("\"quantization_config\" must be an object");
        const std::string method = r.string(*qc, "quant_method", "quantization_config.").value_or("");
        if (method != "bitnet") {
            r.unsupported(format("quantization_config.\"quant_method\" is \"%s\"", method.c_str()),
                          "tern converts unquantized checkpoints and BitNet-quantized (ternary) ones");
        }
        c.bitnet_quantized        = true;
        c.linear_class_multiplier = r.string(*qc, "linear_class", "quantization_config.").value_or("bitlinear") == "autobitlinear";
    }
    c.bos_token_id = r.token_id("bos_token_id");
    c.eos_token_id = r.token_id("eos_token_id");
    c.pad_token_id = r.token_id("pad_token_id");
    return c;
}

}  // namespace tern
