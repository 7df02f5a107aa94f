// Tokenizer: builds the vocabulary and the BPE or SPM model from GGUF metadata, and runs the
// encode pipeline (special-token partition, pre-tokenizer, merges) and the decoder (FORMATS.md §5).
// The pieces live in vocab.cpp, special_partition.cpp, pretokenize.cpp, bpe.cpp and spm.cpp.
#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "core/log.h"
#include "core/utf8.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/special_partition.h"
#include "tokenizer/spm.h"
#include "tokenizer/vocab.h"

#include "tokenizer/normalize.h"

#include <algorithm>
#include <limits>

namespace tern {

struct Tokenizer::Impl {
    tok::Vocab                               vocab;
    VocabKind                                kind = VocabKind::bpe;
    PreTokenizer                             pre  = PreTokenizer::default_chain;
    std::optional<tok::BpeModel>             bpe;
    std::optional<tok::PreTokenizerSplitter> splitter;
    std::optional<tok::SpmModel>             spm;
    bool                                     nfc = false;  // NFC before pre-tokenization (qwen2: normalize.h)
};

namespace {

constexpr size_t k_llama3_n_tokens = 128256;
constexpr size_t k_llama3_bos      = 128000;

// The pre-tokenizer of a gpt2 vocabulary: forced by the options, named by tokenizer.ggml.pre, or,
// when the key is missing or "default", the Llama-3 fallback of FORMATS.md §5.6 (2B4T's GGUF has
// no such key, and its tokenizer was trained with R1).
PreTokenizer resolve_pre_tokenizer(const GgufFile & file, const tok::Vocab & vocab, const TokenizerOptions & options) {
    if (options.pre) return *options.pre;
    const std::optional<std::string_view> name = file.get_string("tokenizer.ggml.pre");
    if (name && *name != "default") {
        if (const auto pre = pre_tokenizer_from_name(*name)) return *pre;
        fail(ErrorKind::unsupported,
             format("tokenizer: 'tokenizer.ggml.pre' = '%s' is not a pre-tokenizer tern knows", printable(*name, 64).c_str()),
             "supported: llama-bpe (and its aliases llama3, llama-v3, falcon3, ...), qwen2, qwen35, default; "
             "force one with the pre-tokenizer option");
    }
    if (vocab.texts.size() == k_llama3_n_tokens && vocab.texts[k_llama3_bos] == "<|begin_of_text|>") {
        TERN_LOG_INFO("tokenizer: 'tokenizer.ggml.pre' is %s, but this is the Llama-3 vocabulary (128256 tokens, "
                      "<|begin_of_text|> at 128000): using the llama-bpe pre-tokenizer",
                      name ? "'default'" : "missing");
        return PreTokenizer::llama3;
    }
    if (!name) {
        TERN_LOG_WARN("tokenizer: 'tokenizer.ggml.pre' is missing; using the default pre-tokenizer, "
                      "token ids may differ from the model's own tokenizer");
    }
    return PreTokenizer::default_chain;
}

// Decodes a byte-level token text through the inverse of bytes_to_unicode. Characters outside the
// 256-character alphabet (not produced by real byte-level vocabularies) are passed through as UTF-8.
void append_byte_level(std::string_view text, std::string & out) {
    uint32_t cp = 0;
    for (size_t pos = 0; pos < text.size();) {
        const size_t n = utf8_decode(text, pos, cp);
        if (n == 0) {
            out.push_back(text[pos++]);
            continue;
        }
        const int b = tok::code_point_to_byte(cp);
        if (b >= 0) {
            out.push_back(static_cast<char>(b));
        } else {
            out.append(text.substr(pos, n));
        }
        pos += n;
    }
}

void append_spm_text(std::string_view text, std::string & out) {
    constexpr std::string_view marker = "\xe2\x96\x81";
    for (size_t pos = 0; pos < text.size();) {
        if (text.compare(pos, marker.size(), marker) == 0) {
            out.push_back(' ');
            pos += marker.size();
        } else {
            out.push_back(text[pos++]);
        }
    }
}

// "<0xXX>" -> XX; -1 if the text is not of that form.
int parse_byte_token(std::string_view text) {
    if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
    int v = 0;
    for (char c : text.substr(3, 2)) {
        v <<= 4;
        if (c >= '0' && c <= '9') {
            v |= c - '0';
        } else if (c >= 'A' && c <= 'F') {
            v |= c - 'A' + 10;
        } else if (c >= 'a' && c <= 'f') {
            v |= c - 'a' + 10;
        } else {
            return -1;
        }
    }
    return v;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer &&) noexcept             = default;
Tokenizer & Tokenizer::operator=(Tokenizer &&) noexcept = default;
Tokenizer::~Tokenizer()                                 = default;

Tokenizer Tokenizer::from_gguf(const GgufFile & file, const TokenizerOptions & options) {
    auto   impl  = std::make_unique<Impl>();
    auto & vocab = impl->vocab;

    const std::optional<std::string_view> model = file.get_string("tokenizer.ggml.model");
    if (!model) {
        fail(ErrorKind::invalid_model, "tokenizer: key 'tokenizer.ggml.model' is missing",
             "the file has no tokenizer metadata; is it a vocabulary-less GGUF?");
    }
    if (*model == "gpt2") {
        impl->kind = VocabKind::bpe;
    } else if (*model == "llama") {
        impl->kind = VocabKind::spm;
    } else {
        fail(ErrorKind::unsupported,
             format("tokenizer: 'tokenizer.ggml.model' = '%s' is not supported", printable(*model, 64).c_str()),
             "tern supports byte-level BPE (\"gpt2\") and SentencePiece-style (\"llama\") vocabularies");
    }

    tok::load_vocab_entries(file, vocab);

    if (impl->kind == VocabKind::bpe) {
        impl->pre         = resolve_pre_tokenizer(file, vocab, options);
        const auto merges = file.get_string_array("tokenizer.ggml.merges");
        if (!merges) {
            fail(ErrorKind::invalid_model, "tokenizer: key 'tokenizer.ggml.merges' is missing (required for a gpt2 vocabulary)");
        }
        // ignore_merges goes with the llama3 family only (§5.5): R0, R2 and qwen35 merge every word.
        impl->bpe = tok::BpeModel::build(*merges, vocab, impl->pre == PreTokenizer::llama3);
        impl->splitter.emplace(impl->pre);
        impl->nfc = impl->pre == PreTokenizer::qwen2;  // Qwen2/2.5/3's tokenizer.json normalizer
    }

    tok::load_special_ids(file, impl->kind, impl->kind == VocabKind::bpe && impl->pre == PreTokenizer::llama3, vocab);
    tok::build_special_tokens(file, vocab);
    if (impl->kind == VocabKind::spm) impl->spm = tok::SpmModel::build(vocab);

    if (impl->kind == VocabKind::bpe) {
        TERN_LOG_DEBUG("tokenizer: gpt2, %d tokens, %zu merges, pre-tokenizer %s", vocab.n_tokens(), impl->bpe->n_merges(),
                       std::string(pre_tokenizer_name(impl->pre)).c_str());
    } else {
        TERN_LOG_DEBUG("tokenizer: llama (SPM), %d tokens", vocab.n_tokens());
    }
    return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
    const auto & vocab = impl_->vocab;
    // Symbol offsets inside a word or fragment are 32-bit.
    if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
        fail(ErrorKind::invalid_argument, format("tokenizer: text of %zu bytes is too long to encode", text.size()));
    }
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 2);
    if (add_bos && vocab.add_bos && vocab.bos >= 0) out.push_back(vocab.bos);

    const std::vector<tok::Fragment> fragments = tok::partition_special(text, vocab, parse_special);
    if (impl_->kind == VocabKind::bpe) {
        std::vector<std::string_view> words;
        tok::BpeScratch               scratch;
        for (const auto & f : fragments) {
            if (f.token >= 0) {
                out.push_back(f.token);
                continue;
            }
            words.clear();
            std::string      normalized;
            std::string_view text_of_words = f.text;
            if (impl_->nfc && tok::may_need_nfc(f.text)) {  // (special tokens match the raw text, as in HF)
                normalized    = tok::nfc(f.text);
                text_of_words = normalized;
            }
            impl_->splitter->split(text_of_words, words);
            for (std::string_view w : words) impl_->bpe->encode_word(w, vocab, out, scratch);
        }
    } else {
        // §5.7 step 2: the space prefix goes before the first raw fragment and after each special.
        tok::SpmScratch scratch;
        bool            prev_special = true;
        for (const auto & f : fragments) {
            if (f.token >= 0) {
                out.push_back(f.token);
                prev_special = true;
                continue;
            }
            tok::spm_escape_whitespace(f.text, vocab.add_space_prefix && prev_special, scratch.escaped);
            impl_->spm->encode_fragment(scratch.escaped, vocab, out, scratch);
            prev_special = false;
        }
    }

    if (add_bos && vocab.add_eos && vocab.eos >= 0) out.push_back(vocab.eos);
    return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
    const auto & vocab = impl_->vocab;
    if (!vocab.valid_id(id)) {
        fail(ErrorKind::invalid_argument, format("tokenizer: token id %d is out of range [0, %d)", id, vocab.n_tokens()));
    }
    const std::string & text = vocab.texts[static_cast<size_t>(id)];
    std::string         out;
    switch (vocab.types[static_cast<size_t>(id)]) {
        case TokenType::control:
        case TokenType::unknown:
        case TokenType::unused:
            if (render_special) out = text;
            break;
        case TokenType::user_defined: out = text; break;  // stored as plain text by converters
        case TokenType::byte: {
            const int b = parse_byte_token(text);
            if (b >= 0) {
                out.push_back(static_cast<char>(b));
            } else {
                out = text;
            }
            break;
        }
        case TokenType::normal:
        case TokenType::undefined:
            if (impl_->kind == VocabKind::bpe) {
                append_byte_level(text, out);
            } else {
                append_spm_text(text, out);
            }
            break;
    }
    return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
    std::string out;
    // SPM: drop the space that encode() prefixed to the text, i.e. the first space of the first
    // piece that prints anything (a leading BOS prints nothing unless render_special).
    bool strip_space = impl_->kind == VocabKind::spm && impl_->vocab.add_space_prefix;
    for (int32_t id : ids) {
        std::string piece = token_to_piece(id, render_special);
        if (strip_space && !piece.empty()) {
            if (piece[0] == ' ') piece.erase(0, 1);
            strip_space = false;
        }
        out += piece;
    }
    return out;
}

int32_t Tokenizer::n_vocab() const { return impl_->vocab.n_tokens(); }
VocabKind Tokenizer::kind() const { return impl_->kind; }
PreTokenizer Tokenizer::pre_tokenizer() const { return impl_->pre; }
int32_t Tokenizer::bos_id() const { return impl_->vocab.bos; }
int32_t Tokenizer::eos_id() const { return impl_->vocab.eos; }
int32_t Tokenizer::eot_id() const { return impl_->vocab.eot; }
int32_t Tokenizer::unk_id() const { return impl_->vocab.unk; }
bool Tokenizer::add_bos() const { return impl_->vocab.add_bos && impl_->vocab.bos >= 0; }
bool Tokenizer::add_eos() const { return impl_->vocab.add_eos && impl_->vocab.eos >= 0; }
bool Tokenizer::ignore_merges() const { return impl_->bpe && impl_->bpe->ignore_merges(); }

bool Tokenizer::is_eog(int32_t id) const {
    return std::binary_search(impl_->vocab.eog.begin(), impl_->vocab.eog.end(), id);
}

const std::vector<int32_t> & Tokenizer::eog_ids() const { return impl_->vocab.eog; }

TokenType Tokenizer::token_type(int32_t id) const {
    if (!impl_->vocab.valid_id(id)) {
        fail(ErrorKind::invalid_argument, format("tokenizer: token id %d is out of range [0, %d)", id, n_vocab()));
    }
    return impl_->vocab.types[static_cast<size_t>(id)];
}

const std::string & Tokenizer::token_text(int32_t id) const {
    if (!impl_->vocab.valid_id(id)) {
        fail(ErrorKind::invalid_argument, format("tokenizer: token id %d is out of range [0, %d)", id, n_vocab()));
    }
    return impl_->vocab.texts[static_cast<size_t>(id)];
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
    const int32_t id = impl_->vocab.find(text);
    return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

}  // namespace tern
