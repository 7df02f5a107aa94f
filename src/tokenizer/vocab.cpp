// Vocabulary loading and validation from GGUF metadata (FORMATS.md §5.1-§5.3): token arrays, special
// ids and their defaults, the end-of-generation set and the special-token candidates.
#include "tokenizer/vocab.h"

#include "core/error.h"
#include "core/log.h"
#include "core/utf8.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>

namespace tern::tok {
namespace {

constexpr const char * k_tokens     = "tokenizer.ggml.tokens";
constexpr const char * k_token_type = "tokenizer.ggml.token_type";
constexpr const char * k_scores     = "tokenizer.ggml.scores";

[[noreturn]] void bad_model(std::string message, std::string hint = {}) {
    fail(ErrorKind::invalid_model, "tokenizer: " + message,
         hint.empty() ? "the file's tokenizer metadata is corrupt; get the file again or re-convert the model" : std::move(hint));
}

// Texts whose tokens end generation (§5.2), and, in order of preference, the ones that mark the end
// of a chat turn when tokenizer.ggml.eot_token_id is absent (§5.8: 2B4T has no such key).
constexpr std::array<std::string_view, 8> k_eog_texts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<|end_of_text|>", "<EOT>",
};
constexpr std::array<std::string_view, 5> k_eot_texts = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<EOT>"};

// Reads an id key. nullopt when absent. Out-of-range values throw when `required_in_range`, else
// they are dropped with a warning (llama.cpp's behaviour for ids tern does not use).
std::optional<int32_t> read_id(const GgufFile & file, const char * key, const Vocab & vocab, bool required_in_range) {
    const std::optional<int64_t> v = file.get_int(key);
    if (!v) return std::nullopt;
    if (vocab.valid_id(*v)) return static_cast<int32_t>(*v);
    if (required_in_range) {
        bad_model(format("'%s' = %lld is not a token id (the vocabulary has %d tokens)", key,
                         static_cast<long long>(*v), vocab.n_tokens()),
                  "the tokenizer metadata is inconsistent; re-convert the model");
    }
    TERN_LOG_WARN("tokenizer: ignoring '%s' = %lld: not a token id (vocabulary size %d)", key,
                  static_cast<long long>(*v), vocab.n_tokens());
    return std::nullopt;
}

std::string ascii_lower(std::string_view s) {
    std::string out(s);
    for (char & c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

}  // namespace

void load_vocab_entries(const GgufFile & file, Vocab & vocab) {
    const auto tokens = file.get_string_array(k_tokens);
    if (!tokens) bad_model(format("key '%s' is missing", k_tokens), "the file has no vocabulary; is it a tokenizer-less GGUF?");
    if (tokens->empty()) bad_model(format("'%s' is empty", k_tokens));
    if (tokens->size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
        bad_model(format("'%s' has %zu entries, more than int32 ids can address", k_tokens, tokens->size()));
    }
    const size_t n = tokens->size();

    vocab.texts.clear();
    vocab.texts.reserve(n);
    for (std::string_view t : *tokens) vocab.texts.emplace_back(t);

    vocab.types.assign(n, TokenType::normal);
    if (const auto types = file.get_int_array(k_token_type)) {
        if (types->size() != n) {
            bad_model(format("'%s' has %zu entries, expected %zu (one per entry of '%s')", k_token_type, types->size(), n, k_tokens));
        }
        for (size_t i = 0; i < n; ++i) {
            const int64_t t = (*types)[i];
            if (t < 0 || t > static_cast<int64_t>(TokenType::byte)) {
                bad_model(format("'%s'[%zu] = %lld, expected a token type 0..6", k_token_type, i, static_cast<long long>(t)));
            }
            vocab.types[i] = static_cast<TokenType>(t);
        }
    }

    vocab.scores.clear();
    if (auto scores = file.get_f32_array(k_scores)) {
        if (scores->size() != n) {
            bad_model(format("'%s' has %zu entries, expected %zu (one per entry of '%s')", k_scores, scores->size(), n, k_tokens));
        }
        vocab.scores = std::move(*scores);
    }

    // Built only now: `texts` is complete and will not move again, so the views stay valid.
    vocab.ids.clear();
    vocab.ids.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        if (!vocab.texts[i].empty()) vocab.ids.emplace(vocab.texts[i], static_cast<int32_t>(i));
    }
}

void load_special_ids(const GgufFile & file, VocabKind kind, bool llama3_family, Vocab & vocab) {
    // §5.1 defaults. For BPE, 11 is llama.cpp's placeholder; real files always carry the keys.
    const int32_t default_bos = kind == VocabKind::spm ? 1 : 11;
    const int32_t default_eos = kind == VocabKind::spm ? 2 : 11;
    const int32_t default_unk = kind == VocabKind::spm ? 0 : -1;

    vocab.declared_specials.clear();
    auto declared = [&](const char * key) -> std::optional<int32_t> {
        const auto id = read_id(file, key, vocab, true);
        if (id) vocab.declared_specials.push_back(*id);
        return id;
    };
    auto with_default = [&](const char * key, int32_t fallback, bool & placeholder) -> int32_t {
        placeholder = false;
        if (const auto id = declared(key)) return *id;
        if (!vocab.valid_id(fallback)) return -1;
        if (kind == VocabKind::bpe) {
            placeholder = true;
            TERN_LOG_WARN("tokenizer: '%s' is missing; using llama.cpp's placeholder id %d ('%s')", key, fallback,
                          printable(vocab.texts[static_cast<size_t>(fallback)]).c_str());
        }
        return fallback;
    };
    bool bos_is_placeholder = false;
    vocab.bos = with_default("tokenizer.ggml.bos_token_id", default_bos, bos_is_placeholder);
    vocab.eos = with_default("tokenizer.ggml.eos_token_id", default_eos, vocab.eos_is_placeholder);
    vocab.eot = declared("tokenizer.ggml.eot_token_id").value_or(-1);
    vocab.eom = declared("tokenizer.ggml.eom_token_id").value_or(-1);
    vocab.unk = read_id(file, "tokenizer.ggml.unknown_token_id", vocab, true).value_or(vocab.valid_id(default_unk) ? default_unk : -1);
    for (const char * key : {"tokenizer.ggml.padding_token_id", "tokenizer.ggml.seperator_token_id",
                             "tokenizer.ggml.mask_token_id"}) {
        (void)read_id(file, key, vocab, false);
    }

    vocab.add_bos          = file.get_bool("tokenizer.ggml.add_bos_token").value_or(kind == VocabKind::spm || llama3_family);
    vocab.add_eos          = file.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
    vocab.add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix").value_or(kind == VocabKind::spm);
}

void build_special_tokens(const GgufFile & file, Vocab & vocab) {
    // End of turn / message by text when the keys are absent (2B4T finds <|eot_id|> this way).
    if (vocab.eot < 0) {
        for (std::string_view text : k_eot_texts) {
            if (const int32_t id = vocab.find(text); id >= 0) {
                vocab.eot = id;
                break;
            }
        }
    }
    if (vocab.eom < 0) vocab.eom = vocab.find("<|eom_id|>");

    // An end-of-generation token must never be produced from plain text nor printed by default.
    auto force_control = [&](int32_t id, const char * why) {
        auto & type = vocab.types[static_cast<size_t>(id)];
        if (type == TokenType::control) return;
        TERN_LOG_DEBUG("tokenizer: token %d '%s' (%s) forced to CONTROL", id, printable(vocab.texts[static_cast<size_t>(id)]).c_str(), why);
        type = TokenType::control;
    };

    vocab.eog.clear();
    // The BPE placeholder eos (id 11, "," in Llama-3) is not a real end token: stopping on it
    // would end generation at the first comma.
    if (vocab.eos >= 0 && !vocab.eos_is_placeholder) vocab.eog.push_back(vocab.eos);
    for (int32_t id : {vocab.eot, vocab.eom}) {
        if (id >= 0) vocab.eog.push_back(id);
    }
    for (std::string_view text : k_eog_texts) {
        const int32_t id = vocab.find(text);
        if (id < 0) continue;
        vocab.eog.push_back(id);
        force_control(id, "end-of-generation text");
    }
    std::sort(vocab.eog.begin(), vocab.eog.end());
    vocab.eog.erase(std::unique(vocab.eog.begin(), vocab.eog.end()), vocab.eog.end());
    for (int32_t id : vocab.declared_specials) {
        const TokenType t = vocab.types[static_cast<size_t>(id)];
        if (t == TokenType::normal || t == TokenType::undefined) force_control(id, "named by a special-id key");
    }

    vocab.specials.clear();
    for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
        const TokenType t = vocab.types[static_cast<size_t>(id)];
        if (vocab.texts[static_cast<size_t>(id)].empty()) continue;
        if (t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown) {
            vocab.specials.push_back({id, false, false});
        }
    }
    std::stable_sort(vocab.specials.begin(), vocab.specials.end(), [&](const SpecialToken & a, const SpecialToken & b) {
        return vocab.texts[static_cast<size_t>(a.id)].size() > vocab.texts[static_cast<size_t>(b.id)].size();
    });

    // llama.cpp's phi-3 heuristic (§5.3): the chat-role specials swallow the whitespace after them.
    const std::string name = ascii_lower(file.get_string("general.name").value_or(""));
    if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
        for (auto & s : vocab.specials) {
            const std::string & text = vocab.texts[static_cast<size_t>(s.id)];
            s.rstrip = !(text == "<unk>" || text == "<s>" || text == "<|endoftext|>");
        }
    }
}

void emit_byte_tokens(std::string_view bytes, const std::array<int32_t, 256> & byte_ids, int32_t unk,
                      std::vector<int32_t> & out) {
    for (char c : bytes) {
        const int32_t id = byte_ids[static_cast<uint8_t>(c)];
        if (id >= 0) {
            out.push_back(id);
        } else if (unk >= 0) {
            out.push_back(unk);
        }
    }
}

}  // namespace tern::tok
