// Hugging Face tokenizer.json (byte-level BPE) -> GGUF tokenizer metadata (FORMATS.md §5.1, §5.2,
// §7.3), and the writer of the tokenizer.ggml.* keys. Entry points: tokenizer_metadata_from_hf,
// write_tokenizer_metadata. Parsing uses nlohmann-json; every schema problem throws
// Error(invalid_model) naming the file and the JSON field.
#include "tokenizer/hf_tokenizer_json.h"

#include "core/error.h"
#include "core/json_strict.h"
#include "core/log.h"
#include "core/mmap.h"
#include "core/utf8.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <string_view>
#include <unordered_map>

namespace tern {
namespace {

using nlohmann::json;

// Split regexes as tokenizer.json spells them (FORMATS.md §5.5).
constexpr std::string_view k_hf_contractions = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
constexpr std::string_view k_cpp_contractions = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
constexpr std::string_view k_r1_rest =
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view k_r2_rest =
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view k_qwen35_rest =
    R"(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr int32_t k_type_normal       = 1;
constexpr int32_t k_type_control      = 3;
constexpr int32_t k_type_user_defined = 4;
constexpr int32_t k_type_unused       = 5;

const char * json_type_name(const json & j) {
    switch (j.type()) {
        case json::value_t::null: return "null";
        case json::value_t::object: return "an object";
        case json::value_t::array: return "an array";
        case json::value_t::string: return "a string";
        case json::value_t::boolean: return "a boolean";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned: return "an integer";
        case json::value_t::number_float: return "a number";
        default: return "an unsupported value";
    }
}

// Text from the file, for a message: terminal-safe and short.
std::string clip(std::string_view s) { return printable(s, 61); }

// The file being read, for error messages.
struct Source {
    std::string path;

    [[noreturn]] void bad(const std::string & field, const std::string & what, std::string hint = {}) const {
        fail(ErrorKind::invalid_model, format("'%s': field '%s' %s", path.c_str(), field.c_str(), what.c_str()), std::move(hint));
    }
    [[noreturn]] void wrong_type(const std::string & field, const char * expected, const json & found) const {
        bad(field, format("must be %s (found %s)", expected, json_type_name(found)));
    }
    const json & object_at(const json & parent, const char * key, const std::string & field) const {
        const auto it = parent.find(key);
        if (it == parent.end()) bad(field, "is missing");
        if (!it->is_object()) wrong_type(field, "an object", *it);
        return *it;
    }
};

// Strict and depth-limited (a tokenizer.json nests about 5 levels; 100,000 nested arrays would
// overflow the stack of a recursive parser), at most 1 GiB.
json read_json(const std::string & path) {
    if (!std::filesystem::exists(path)) {
        fail(ErrorKind::io, format("cannot open '%s'", path.c_str()), "check the path of the Hugging Face model folder");
    }
    return parse_json_strict(read_file_text(path, size_t{1} << 30), "'" + path + "'");
}

int32_t token_id(const Source & src, const json & v, const std::string & field, int64_t max_tokens) {
    if (!v.is_number_integer()) src.wrong_type(field, "a token id (integer)", v);
    const auto id = v.get<int64_t>();
    if (id < 0 || id >= max_tokens) {
        src.bad(field, format("= %lld is not a valid token id (expected 0..%lld)", static_cast<long long>(id),
                              static_cast<long long>(max_tokens - 1)),
                "the vocabulary has holes or ids beyond config.json's \"vocab_size\"; the file is damaged");
    }
    return static_cast<int32_t>(id);
}

// A Split pre-tokenizer regex of the tokenizer.json, if it has one (alone or inside a Sequence).
std::optional<std::string> split_regex(const Source & src, const json & doc) {
    const auto it = doc.find("pre_tokenizer");
    if (it == doc.end() || it->is_null()) return std::nullopt;
    if (!it->is_object()) src.wrong_type("pre_tokenizer", "an object or null", *it);
    std::vector<const json *> nodes{&*it};
    if (const auto seq = it->find("pretokenizers"); seq != it->end()) {
        if (!seq->is_array()) src.wrong_type("pre_tokenizer.pretokenizers", "an array", *seq);
        for (const auto & p : *seq) nodes.push_back(&p);
    }
    for (const json * n : nodes) {
        if (!n->is_object() || n->value("type", json()) != "Split") continue;
        const auto pattern = n->find("pattern");
        if (pattern == n->end() || !pattern->is_object()) continue;
        const auto regex = pattern->find("Regex");
        if (regex != pattern->end() && regex->is_string()) return regex->get<std::string>();
    }
    return std::nullopt;
}

// Which tokenizer.ggml.pre a Split regex corresponds to; "" if none tern knows.
std::string pre_name_for_regex(std::string regex) {
    if (regex.compare(0, k_cpp_contractions.size(), k_cpp_contractions) == 0) {
        regex.replace(0, k_cpp_contractions.size(), k_hf_contractions);
    }
    if (regex.compare(0, k_hf_contractions.size(), k_hf_contractions) != 0) return {};
    const std::string_view rest = std::string_view(regex).substr(k_hf_contractions.size());
    if (rest == k_r1_rest) return "llama-bpe";
    if (rest == k_r2_rest) return "qwen2";
    if (rest == k_qwen35_rest) return "qwen35";
    return {};
}

// bos_token / eos_token / ... of tokenizer_config.json: a string, {"content": string}, or null.
std::optional<std::string> special_token_text(const Source & src, const json & config, const char * key) {
    const auto it = config.find(key);
    if (it == config.end() || it->is_null()) return std::nullopt;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object()) {
        const auto c = it->find("content");
        if (c != it->end() && c->is_string()) return c->get<std::string>();
        src.bad(key, "is an object without a string \"content\"");
    }
    src.wrong_type(key, "a string, an object with \"content\", or null", *it);
}

std::optional<bool> optional_bool(const Source & src, const json & obj, const char * key, const std::string & field) {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return std::nullopt;
    if (!it->is_boolean()) src.wrong_type(field, "a boolean", *it);
    return it->get<bool>();
}

}  // namespace

void apply_tokenizer_config(const std::string & path, TokenizerMetadata & meta) {
    const Source src{path};
    const json   config = read_json(path);
    if (!config.is_object()) src.wrong_type("(top level)", "an object", config);

    std::unordered_map<std::string_view, int32_t> ids;
    ids.reserve(meta.tokens.size());
    for (size_t i = 0; i < meta.tokens.size(); ++i) ids.emplace(meta.tokens[i], static_cast<int32_t>(i));

    auto lookup = [&](const char * key, bool required) -> std::optional<int32_t> {
        const auto text = special_token_text(src, config, key);
        if (!text) return std::nullopt;
        const auto it = ids.find(*text);
        if (it != ids.end()) return it->second;
        if (required) {
            src.bad(key, format("= '%s' is not a token of the tokenizer.json vocabulary", clip(*text).c_str()));
        }
        TERN_LOG_WARN("'%s': %s '%s' is not a token of the vocabulary; ignored", path.c_str(), key, clip(*text).c_str());
        return std::nullopt;
    };
    if (const auto id = lookup("bos_token", true)) meta.bos_id = id;
    if (const auto id = lookup("eos_token", true)) meta.eos_id = id;
    if (const auto id = lookup("pad_token", false)) meta.pad_id = id;
    if (const auto id = lookup("unk_token", false)) meta.unk_id = id;
    if (const auto v = optional_bool(src, config, "add_bos_token", "add_bos_token")) meta.add_bos = v;
    if (const auto v = optional_bool(src, config, "add_eos_token", "add_eos_token")) meta.add_eos = v;
    if (const auto it = config.find("chat_template"); it != config.end() && !it->is_null()) {
        if (it->is_string()) {
            meta.chat_template = it->get<std::string>();
        } else if (it->is_array()) {  // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
            for (const json & entry : *it) {
                if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
                    entry["template"].is_string()) {
                    meta.chat_template = entry["template"].get<std::string>();
                }
            }
        } else {
            src.wrong_type("chat_template", "a string or a list of {name, template}", *it);
        }
    }
}

namespace {

// Added tokens that look special are CONTROL even when not flagged special (llama.cpp's converter
// does the same for "<|...|>" names such as Qwen's <|fim_prefix|>), so they print nothing by default.
bool looks_special(std::string_view text) {
    return text.size() >= 4 && text.substr(0, 2) == "<|" && text.substr(text.size() - 2) == "|>";
}

TokenizerMetadata metadata_from_doc(const json & doc, const std::string & tokenizer_json_path, int64_t max_tokens);

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
    for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
    return s;
}

}  // namespace

TokenizerMetadata tokenizer_metadata_from_hf(const std::string & tokenizer_json_path, const std::string & tokenizer_config_path,
                                             int64_t max_tokens) {
    TokenizerMetadata meta = metadata_from_doc(read_json(tokenizer_json_path), tokenizer_json_path, max_tokens);
    if (!tokenizer_config_path.empty()) apply_tokenizer_config(tokenizer_config_path, meta);
    if (!meta.add_bos && meta.pre == "llama-bpe") meta.add_bos = true;  // Llama-3 models expect <|begin_of_text|>
    return meta;
}

TokenizerMetadata tokenizer_metadata_from_hf_text(std::string_view text, const std::string & name, int64_t max_tokens) {
    TokenizerMetadata meta = metadata_from_doc(parse_json_strict(text, "'" + name + "'"), name, max_tokens);
    if (!meta.add_bos && meta.pre == "llama-bpe") meta.add_bos = true;
    return meta;
}

namespace {

TokenizerMetadata metadata_from_doc(const json & doc, const std::string & tokenizer_json_path, int64_t max_tokens) {
    const Source src{tokenizer_json_path};
    if (!doc.is_object()) src.wrong_type("(top level)", "an object", doc);

    const json & model = src.object_at(doc, "model", "model");
    if (const auto type = model.find("type"); type != model.end() && *type != "BPE") {
        fail(ErrorKind::unsupported,
             format("'%s': field 'model.type' is %s, only \"BPE\" (byte-level) is supported", tokenizer_json_path.c_str(),
                    json_excerpt(*type).c_str()),
             "SentencePiece/Unigram models are converted from their GGUF or tokenizer.model instead");
    }
    const json & vocab = src.object_at(model, "vocab", "model.vocab");
    if (max_tokens <= 0) {
        const auto at = doc.find("added_tokens");
        max_tokens    = static_cast<int64_t>(vocab.size()) + (at != doc.end() && at->is_array() ? static_cast<int64_t>(at->size()) : 0) +
                     65536;
    }
    max_tokens = std::min<int64_t>(max_tokens, std::numeric_limits<int32_t>::max());

    TokenizerMetadata meta;
    meta.model = "gpt2";

    // Ids first, to size the table: vocab entries and added tokens may leave holes.
    std::vector<std::pair<std::string, int32_t>> entries;
    entries.reserve(vocab.size());
    int64_t n_tokens = 0;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        const int32_t id = token_id(src, it.value(), "model.vocab[\"" + clip(it.key()) + "\"]", max_tokens);
        entries.emplace_back(it.key(), id);
        n_tokens = std::max<int64_t>(n_tokens, int64_t{id} + 1);
    }

    struct Added {
        std::string text;
        int32_t     id;
        bool        special;
    };
    std::vector<Added> added;
    if (const auto at = doc.find("added_tokens"); at != doc.end() && !at->is_null()) {
        if (!at->is_array()) src.wrong_type("added_tokens", "an array", *at);
        for (size_t i = 0; i < at->size(); ++i) {
            const json &      t     = (*at)[i];
            const std::string field = format("added_tokens[%zu]", i);
            if (!t.is_object()) src.wrong_type(field, "an object", t);
            const auto content = t.find("content");
            if (content == t.end() || !content->is_string()) src.bad(field + ".content", "must be a string");
            const auto id = t.find("id");
            if (id == t.end()) src.bad(field + ".id", "is missing");
            const bool special = optional_bool(src, t, "special", field + ".special").value_or(false);
            added.push_back({content->get<std::string>(), token_id(src, *id, field + ".id", max_tokens), special});
            n_tokens = std::max<int64_t>(n_tokens, int64_t{added.back().id} + 1);
        }
    }
    if (n_tokens == 0) src.bad("model.vocab", "is empty");

    meta.tokens.assign(static_cast<size_t>(n_tokens), {});
    meta.token_types.assign(static_cast<size_t>(n_tokens), 0);
    std::vector<bool> filled(static_cast<size_t>(n_tokens), false);
    for (auto & [text, id] : entries) {
        const auto i = static_cast<size_t>(id);
        if (filled[i]) {
            src.bad("model.vocab", format("gives id %d to both '%s' and '%s'", id, clip(meta.tokens[i]).c_str(), clip(text).c_str()));
        }
        meta.tokens[i]      = std::move(text);
        meta.token_types[i] = k_type_normal;
        filled[i]           = true;
    }
    for (auto & a : added) {
        const auto i = static_cast<size_t>(a.id);
        if (a.special || looks_special(a.text)) {
            meta.token_types[i] = k_type_control;
        } else {
            // Plain added tokens are matched as raw text; "▁" in them stands for a space (§5.2).
            a.text              = replace_all(std::move(a.text), "\xe2\x96\x81", " ");
            meta.token_types[i] = k_type_user_defined;
        }
        if (filled[i] && meta.tokens[i] != a.text) {
            TERN_LOG_WARN("'%s': added token %d '%s' replaces vocabulary entry '%s'", tokenizer_json_path.c_str(), a.id,
                          clip(a.text).c_str(), clip(meta.tokens[i]).c_str());
        }
        meta.tokens[i] = std::move(a.text);
        filled[i]      = true;
    }
    for (size_t i = 0; i < filled.size(); ++i) {
        if (filled[i]) continue;
        meta.tokens[i]      = format("[PAD%zu]", i);
        meta.token_types[i] = k_type_unused;
    }

    // Merges, as "left right" strings (older files) or ["left", "right"] pairs (newer files).
    const auto merges = model.find("merges");
    if (merges == model.end()) src.bad("model.merges", "is missing");
    if (!merges->is_array()) src.wrong_type("model.merges", "an array", *merges);
    std::unordered_map<std::string_view, int32_t> ids;
    ids.reserve(meta.tokens.size());
    for (size_t i = 0; i < meta.tokens.size(); ++i) ids.emplace(meta.tokens[i], static_cast<int32_t>(i));
    meta.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
        const json &     m = (*merges)[i];
        std::string_view left, right;
        std::string      merged;
        if (m.is_string()) {
            merged           = m.get_ref<const std::string &>();
            const size_t sep = merged.size() > 1 ? merged.find(' ', 1) : std::string::npos;
            if (sep == std::string::npos) {
                src.bad(format("model.merges[%zu]", i), format("= '%s' is not of the form \"left right\"", clip(merged).c_str()));
            }
            left  = std::string_view(merged).substr(0, sep);
            right = std::string_view(merged).substr(sep + 1);
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            const auto & l = m[0].get_ref<const std::string &>();
            const auto & r = m[1].get_ref<const std::string &>();
            // GGUF stores "left right" and splits at the first space after position 0.
            if (l.empty() || l.find(' ', 1) != std::string::npos) {
                src.bad(format("model.merges[%zu]", i),
                        format("left half '%s' cannot be stored as a GGUF merge (empty or contains a space)", clip(l).c_str()));
            }
            merged.reserve(l.size() + 1 + r.size());
            merged.append(l).append(1, ' ').append(r);
            left  = std::string_view(merged).substr(0, l.size());
            right = std::string_view(merged).substr(l.size() + 1);
        } else {
            src.wrong_type(format("model.merges[%zu]", i), "a \"left right\" string or a [left, right] pair of strings", m);
        }
        for (std::string_view half : {left, right}) {
            if (!ids.count(half)) {
                src.bad(format("model.merges[%zu]", i), format("refers to '%s', which is not in model.vocab", clip(half).c_str()));
            }
        }
        meta.merges.push_back(std::move(merged));
    }

    // Pre-tokenizer: the Split regex decides the tokenizer.ggml.pre name (FORMATS.md §5.5).
    const bool                       ignore_merges = optional_bool(src, model, "ignore_merges", "model.ignore_merges").value_or(false);
    const std::optional<std::string> regex         = split_regex(src, doc);
    meta.pre = regex ? pre_name_for_regex(*regex) : std::string();
    if (meta.pre.empty()) {
        TERN_LOG_WARN("'%s': the pre-tokenizer is neither Llama-3's nor Qwen2's regex; writing tokenizer.ggml.pre = "
                      "\"default\", so token ids may differ from the original tokenizer",
                      tokenizer_json_path.c_str());
        meta.pre = "default";
    }
    if (ignore_merges != (meta.pre == "llama-bpe")) {
        TERN_LOG_WARN("'%s': model.ignore_merges is %s, but pre-tokenizer '%s' implies the opposite; token ids may differ",
                      tokenizer_json_path.c_str(), ignore_merges ? "true" : "false", meta.pre.c_str());
    }
    if (optional_bool(src, model, "byte_fallback", "model.byte_fallback").value_or(false)) {
        TERN_LOG_WARN("'%s': model.byte_fallback is not supported for byte-level BPE and is ignored", tokenizer_json_path.c_str());
    }

    return meta;
}

}  // namespace

void write_tokenizer_metadata(GgufWriter & writer, const TokenizerMetadata & meta) {
    const size_t n = meta.tokens.size();
    if (n == 0) fail(ErrorKind::invalid_argument, "tokenizer metadata: no tokens");
    if (meta.token_types.size() != n) {
        fail(ErrorKind::invalid_argument, format("tokenizer metadata: %zu token types for %zu tokens", meta.token_types.size(), n));
    }
    if (!meta.scores.empty() && meta.scores.size() != n) {
        fail(ErrorKind::invalid_argument, format("tokenizer metadata: %zu scores for %zu tokens", meta.scores.size(), n));
    }

    writer.set_string("tokenizer.ggml.model", meta.model);
    if (!meta.pre.empty()) writer.set_string("tokenizer.ggml.pre", meta.pre);
    writer.set_string_array("tokenizer.ggml.tokens", meta.tokens);
    writer.set_i32_array("tokenizer.ggml.token_type", meta.token_types);
    if (!meta.scores.empty()) writer.set_f32_array("tokenizer.ggml.scores", meta.scores);
    if (meta.model == "gpt2" || !meta.merges.empty()) writer.set_string_array("tokenizer.ggml.merges", meta.merges);

    const auto put_id = [&](const char * key, const std::optional<int32_t> & id) {
        if (!id) return;
        if (*id < 0 || static_cast<size_t>(*id) >= n) {
            fail(ErrorKind::invalid_argument, format("tokenizer metadata: %s = %d is not a token id (%zu tokens)", key, *id, n));
        }
        writer.set_u32(key, static_cast<uint32_t>(*id));
    };
    put_id("tokenizer.ggml.bos_token_id", meta.bos_id);
    put_id("tokenizer.ggml.eos_token_id", meta.eos_id);
    put_id("tokenizer.ggml.eot_token_id", meta.eot_id);
    put_id("tokenizer.ggml.padding_token_id", meta.pad_id);
    put_id("tokenizer.ggml.unknown_token_id", meta.unk_id);
    if (meta.add_bos) writer.set_bool("tokenizer.ggml.add_bos_token", *meta.add_bos);
    if (meta.add_eos) writer.set_bool("tokenizer.ggml.add_eos_token", *meta.add_eos);
    if (meta.add_space_prefix) writer.set_bool("tokenizer.ggml.add_space_prefix", *meta.add_space_prefix);
    if (!meta.chat_template.empty()) writer.set_string("tokenizer.chat_template", meta.chat_template);
}

}  // namespace tern
