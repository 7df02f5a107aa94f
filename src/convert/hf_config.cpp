// config.json validation for BitNetForCausalLM; see hf_config.h.
#include "convert/hf_config.h"

#include "core/json_strict.h"
#include "core/error.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/utf8.h"
#include "core/mmap.h"

#include <cmath>
#include <limits>

namespace tern {
namespace {

using json = nlohmann::json;

class ConfigReader {
public:
    ConfigReader(const json & root, const std::string & source) : root_(root), source_(source) {}

    [[noreturn]] void bad(const std::string & msg, const std::string & hint = {}) const {
        fail(ErrorKind::invalid_model, format("config '%s': %s", source_.c_str(), msg.c_str()), hint);
    }

    const json * find(const json & obj, const char * key) const {
        auto it = obj.find(key);
        return it == obj.end() ? nullptr : &*it;
    }

    // A positive integer that fits the UINT32 GGUF keys it ends up in.
    int64_t positive_int(const json & obj, const char * key, const char * where = "") const {
        const json * v = find(obj, key);
        if (!v) bad(format("missing %s\"%s\"", where, key), "config.json of a BitNetForCausalLM checkpoint has it");
        return positive_int_value(*v, key, where);
    }

    int64_t positive_int_value(const json & v, const char * key, const char * where = "") const {
        if (!v.is_number_integer()) bad(format("%s\"%s\" must be an integer, found %s", where, key, json_excerpt(v).c_str()));
        if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 || v.get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
            bad(format("%s\"%s\" must be in [1, %u], found %s", where, key, std::numeric_limits<uint32_t>::max(), json_excerpt(v).c_str()));
        }
        return static_cast<int64_t>(v.get<uint64_t>());
    }

    // A finite number > 0 (and < upper when given).
    double positive_number(const char * key, double upper = std::numeric_limits<double>::infinity()) const {
        const json * v = find(root_, key);
        if (!v) bad(format("missing \"%s\"", key));
        if (!v->is_number()) bad(format("\"%s\" must be a number, found %s", key, json_excerpt(*v).c_str()));
        const double x = v->get<double>();
        if (!std::isfinite(x) || x <= 0 || x >= upper) {
            bad(upper == std::numeric_limits<double>::infinity()
                    ? format("\"%s\" must be a finite number > 0, found %s", key, json_excerpt(*v).c_str())
                    : format("\"%s\" must be in (0, %g), found %s", key, upper, json_excerpt(*v).c_str()));
        }
        return x;
    }

    std::optional<std::string> optional_string(const json & obj, const char * key, const char * where = "") const {
        const json * v = find(obj, key);
        if (!v || v->is_null()) return std::nullopt;
        if (!v->is_string()) bad(format("%s\"%s\" must be a string, found %s", where, key, json_excerpt(*v).c_str()));
        return v->get<std::string>();
    }

    // A token id: absent/null, an integer >= 0, or a list whose first entry is one.
    std::optional<int64_t> token_id(const char * key) const {
        const json * v = find(root_, key);
        if (!v || v->is_null()) return std::nullopt;
        const json * x = v;
        if (v->is_array()) {
            if (v->empty()) return std::nullopt;
            x = &(*v)[0];
        }
        if (!x->is_number_unsigned() || x->get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
            bad(format("\"%s\" must be a token id (an integer >= 0) or a list of them, found %s", key, json_excerpt(*v).c_str()));
        }
        return static_cast<int64_t>(x->get<uint64_t>());
    }

private:
    const json &        root_;
    const std::string & source_;
};

}  // namespace

HfBitnetConfig parse_hf_config(std::string_view json_text, const std::string & source) {
    const json root = parse_json_strict(json_text, "config '" + source + "'");
    ConfigReader r(root, source);
    if (!root.is_object()) r.bad(format("expected a JSON object, found %s", root.type_name()));

    // Architecture: only BitNetForCausalLM (2B4T). Mainline's "BitnetForCausalLM" (1bitLLM) is a
    // different model: SiLU FFN, SentencePiece tokenizer (FORMATS.md §4.13).
    if (const json * arch = r.find(root, "architectures")) {
        bool ok = arch->is_array() && !arch->empty();
        if (ok) {
            for (const json & a : *arch) ok = ok && a.is_string() && a.get<std::string>() == "BitNetForCausalLM";
        }
        if (!ok) {
            fail(ErrorKind::unsupported,
                 format("config '%s': \"architectures\" is %s, expected [\"BitNetForCausalLM\"]", source.c_str(), json_excerpt(*arch).c_str()),
                 "tern convert reads BitNetForCausalLM (BitNet b1.58 2B4T), LlamaForCausalLM, Qwen3ForCausalLM and "
                 "Phi3ForCausalLM checkpoints");
        }
    }
    if (auto mt = r.optional_string(root, "model_type"); mt && *mt != "bitnet") {
        fail(ErrorKind::unsupported, format("config '%s': \"model_type\" is \"%s\", expected \"bitnet\"", source.c_str(), printable(*mt, 64).c_str()));
    }

    HfBitnetConfig c;
    c.hidden_size       = r.positive_int(root, "hidden_size");
    c.intermediate_size = r.positive_int(root, "intermediate_size");
    c.n_layers          = r.positive_int(root, "num_hidden_layers");
    c.n_heads           = r.positive_int(root, "num_attention_heads");
    c.vocab_size        = r.positive_int(root, "vocab_size");
    c.context_length    = r.positive_int(root, "max_position_embeddings");
    if (c.context_length > k_max_context_length) {  // tern would refuse the GGUF it wrote
        r.bad(format("\"max_position_embeddings\" is %lld; tern runs contexts of up to %lld tokens",
                     static_cast<long long>(c.context_length), static_cast<long long>(k_max_context_length)),
              "fix config.json (the model's trained context), then convert again");
    }
    if (const json * kv = r.find(root, "num_key_value_heads"); kv && !kv->is_null()) {
        c.n_kv_heads = r.positive_int_value(*kv, "num_key_value_heads");
    } else {
        c.n_kv_heads = c.n_heads;
        TERN_LOG_INFO("convert: config has no num_key_value_heads; using num_attention_heads = %lld", (long long) c.n_heads);
    }
    if (c.n_heads % c.n_kv_heads != 0) {
        r.bad(format("\"num_attention_heads\" (%lld) must be a multiple of \"num_key_value_heads\" (%lld)",
                     (long long) c.n_heads, (long long) c.n_kv_heads));
    }
    if (const json * hd = r.find(root, "head_dim"); hd && !hd->is_null()) {
        c.head_dim          = r.positive_int_value(*hd, "head_dim");
        c.head_dim_explicit = true;
    } else {
        if (c.hidden_size % c.n_heads != 0) {
            r.bad(format("\"hidden_size\" (%lld) must be a multiple of \"num_attention_heads\" (%lld) when there is no \"head_dim\"",
                         (long long) c.hidden_size, (long long) c.n_heads));
        }
        c.head_dim = c.hidden_size / c.n_heads;
    }
    if (c.head_dim % 2 != 0) r.bad(format("head dimension %lld must be even (RoPE rotates pairs)", (long long) c.head_dim));
    if (c.head_dim > std::numeric_limits<int32_t>::max() / c.n_heads) {
        r.bad(format("num_attention_heads x head_dim = %lld x %lld is too large", (long long) c.n_heads, (long long) c.head_dim));
    }

    c.rms_norm_eps = r.positive_number("rms_norm_eps", 1.0);
    // transformers >= 5 writes {"rope_parameters": {"rope_theta": ..., "rope_type": "default"}} instead of
    // a top-level "rope_theta".
    if (const json * rp = r.find(root, "rope_parameters"); rp && rp->is_object() && !r.find(root, "rope_theta")) {
        const json * theta = r.find(*rp, "rope_theta");
        if (!theta || !theta->is_number() || !std::isfinite(theta->get<double>()) || theta->get<double>() <= 0) {
            r.bad(format("rope_parameters.\"rope_theta\" must be a finite number > 0, found %s",
                         theta ? json_excerpt(*theta).c_str() : "nothing"));
        }
        if (auto type = r.optional_string(*rp, "rope_type", "rope_parameters."); type && *type != "default") {
            fail(ErrorKind::unsupported, format("config '%s': rope_parameters.\"rope_type\" is \"%s\"; tern converts only "
                                                "unscaled RoPE", source.c_str(), printable(*type, 64).c_str()));
        }
        c.rope_theta = theta->get<double>();
    } else {
        c.rope_theta = r.positive_number("rope_theta");
    }

    const auto act = r.optional_string(root, "hidden_act");
    if (!act) r.bad("missing \"hidden_act\"", "BitNet b1.58 2B4T uses \"relu2\"");
    if (*act != "relu2") {
        fail(ErrorKind::unsupported,
             format("config '%s': \"hidden_act\" is \"%s\", expected \"relu2\"", source.c_str(), printable(*act, 64).c_str()),
             "the bitnet-b1.58 GGUF architecture implies ReLU² in the FFN; other activations cannot be expressed");
    }
    if (const json * rs = r.find(root, "rope_scaling"); rs && !rs->is_null()) {
        fail(ErrorKind::unsupported, format("config '%s': \"rope_scaling\" is %s; tern converts only unscaled RoPE",
                                            source.c_str(), json_excerpt(*rs).c_str()));
    }
    if (const json * tie = r.find(root, "tie_word_embeddings"); tie && !tie->is_null()) {
        if (!tie->is_boolean()) r.bad(format("\"tie_word_embeddings\" must be true or false, found %s", json_excerpt(*tie).c_str()));
        c.tie_word_embeddings = tie->get<bool>();
    }

    if (const json * qc = r.find(root, "quantization_config"); qc && !qc->is_null()) {
        if (!qc->is_object()) r.bad(format("\"quantization_config\" must be an object, found %s", json_excerpt(*qc).c_str()));
        c.has_quantization_config = true;
        const char * where        = "quantization_config.";
        if (auto m = r.optional_string(*qc, "quant_method", where); m && *m != "bitnet") {
            fail(ErrorKind::unsupported, format("config '%s': quantization_config.\"quant_method\" is \"%s\", expected \"bitnet\"",
                                                source.c_str(), printable(*m, 64).c_str()));
        }
        if (auto lc = r.optional_string(*qc, "linear_class", where)) {
            if (*lc == "autobitlinear") {
                c.linear_class = LinearClass::autobitlinear;
            } else if (*lc == "bitlinear") {
                c.linear_class = LinearClass::bitlinear;
            } else {
                r.bad(format("quantization_config.\"linear_class\" is \"%s\", expected \"autobitlinear\" or \"bitlinear\"", printable(*lc, 64).c_str()));
            }
            c.linear_class_explicit = true;
        }
        if (auto mode = r.optional_string(*qc, "quantization_mode", where)) {
            if (*mode != "offline" && *mode != "online") {
                r.bad(format("quantization_config.\"quantization_mode\" is \"%s\", expected \"offline\" or \"online\"", printable(*mode, 64).c_str()));
            }
            c.quantization_mode = *mode;
        }
    }

    c.bos_token_id = r.token_id("bos_token_id");
    c.eos_token_id = r.token_id("eos_token_id");
    c.pad_token_id = r.token_id("pad_token_id");
    return c;
}

HfBitnetConfig read_hf_config(const std::string & path) { return parse_hf_config(read_file_text(path), path); }

}  // namespace tern
