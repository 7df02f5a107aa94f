// Pre-tokenizer regexes (FORMATS.md §5.5) compiled with PCRE2, and the name table of
// `tokenizer.ggml.pre` values. Matches and the text between matches both become words
// (HF "Isolated" split behaviour), so the words always cover the input exactly.
#include "tokenizer/pretokenize.h"

#include "core/error.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <string>

namespace tern {
namespace {

// The contraction alternative is written with explicit ASCII classes (as llama.cpp does) instead
// of the tokenizer.json form "(?i:'s|...)": under PCRE2_UCP, (?i) would also fold U+017F "ſ" to
// "s" and U+212A (Kelvin) to "k", which neither llama.cpp nor tiktoken's ASCII fold does.
constexpr const char * k_contractions = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";

// R1 (Llama-3 / tiktoken cl100k-style): digits in runs of up to three.
constexpr const char * k_r1_rest =
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// R2 (Qwen2 / Qwen3): one digit per word.
constexpr const char * k_r2_rest =
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5: R2 with combining marks (\p{M}) kept in letter runs and out of punctuation runs.
constexpr const char * k_qwen35_rest =
    R"(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// R0 (llama.cpp DEFAULT): four regexes, each applied to every piece the previous one produced.
constexpr std::array<const char *, 4> k_r0 = {
    R"([\p{P}\$\+<=>\^~\|]+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
    R"(\p{N}+)",
    R"([0-9][0-9][0-9])",
};

struct PreName {
    std::string_view name;
    PreTokenizer     kind;
};

// FORMATS.md §5.5 table: canonical names first, then aliases.
constexpr std::array<PreName, 15> k_pre_names = {{
    {"llama-bpe", PreTokenizer::llama3},
    {"qwen2", PreTokenizer::qwen2},
    {"default", PreTokenizer::default_chain},
    {"qwen35", PreTokenizer::qwen35},
    {"llama3", PreTokenizer::llama3},
    {"llama-v3", PreTokenizer::llama3},
    {"falcon3", PreTokenizer::llama3},
    {"falcon-h1", PreTokenizer::llama3},
    {"pixtral", PreTokenizer::llama3},
    {"midm-2.0", PreTokenizer::llama3},
    {"lfm2", PreTokenizer::llama3},
    {"jina-v5-nano", PreTokenizer::llama3},
    {"deepseek-r1-qwen", PreTokenizer::qwen2},
    {"kormo", PreTokenizer::qwen2},
    {"f2llmv2", PreTokenizer::qwen2},
}};

}  // namespace

std::optional<PreTokenizer> pre_tokenizer_from_name(std::string_view name) {
    for (const auto & e : k_pre_names) {
        if (e.name == name) return e.kind;
    }
    return std::nullopt;
}

std::string_view pre_tokenizer_name(PreTokenizer pre) {
    switch (pre) {
        case PreTokenizer::llama3: return "llama-bpe";
        case PreTokenizer::qwen2: return "qwen2";
        case PreTokenizer::qwen35: return "qwen35";
        case PreTokenizer::default_chain: return "default";
    }
    return "default";
}

namespace tok {

struct PreTokenizerSplitter::Regex {
    pcre2_code * code = nullptr;
    bool         jit  = false;

    explicit Regex(const std::string & pattern) {
        int        err_code   = 0;
        PCRE2_SIZE err_offset = 0;
        // MATCH_INVALID_UTF: invalid UTF-8 in the subject is allowed and simply never matched.
        code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err_code, &err_offset, nullptr);
        if (!code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err_code, msg, sizeof msg);
            fail(ErrorKind::internal, format("tokenizer: cannot compile pre-tokenizer regex at offset %zu: %s",
                                             static_cast<size_t>(err_offset), reinterpret_cast<const char *>(msg)));
        }
        jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;  // without JIT the interpreter runs
    }
    ~Regex() { pcre2_code_free(code); }
    Regex(const Regex &)             = delete;
    Regex & operator=(const Regex &) = delete;

    int match(std::string_view text, size_t start, pcre2_match_data * md) const {
        const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
        int        rc      = pcre2_match(code, subject, text.size(), start, 0, md, nullptr);
        // The JIT stack is small (32 KiB); the interpreter keeps its frames on the heap.
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_JIT, md, nullptr);
        return rc;
    }

    // Appends matches and the gaps between them.
    void split(std::string_view text, std::vector<std::string_view> & out, pcre2_match_data * md) const {
        size_t gap_start = 0;
        size_t pos       = 0;
        while (pos < text.size()) {
            const int rc = match(text, pos, md);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                fail(ErrorKind::internal, format("tokenizer: pre-tokenizer regex failed on a %zu-byte fragment: %s",
                                                 text.size(), reinterpret_cast<const char *>(msg)));
            }
            const PCRE2_SIZE * ov    = pcre2_get_ovector_pointer(md);
            const size_t       begin = ov[0];
            const size_t       end   = ov[1];
            if (end <= begin) {  // no built-in pattern matches empty; step over it just in case
                pos = begin + 1;
                continue;
            }
            if (begin > gap_start) out.push_back(text.substr(gap_start, begin - gap_start));
            out.push_back(text.substr(begin, end - begin));
            gap_start = pos = end;
        }
        if (gap_start < text.size()) out.push_back(text.substr(gap_start));
    }
};

PreTokenizerSplitter::PreTokenizerSplitter(PreTokenizer kind) : kind_(kind) {
    auto add = [this](const std::string & pattern) { chain_.push_back(std::make_shared<const Regex>(pattern)); };
    switch (kind) {
        case PreTokenizer::llama3: add(std::string(k_contractions) + k_r1_rest); break;
        case PreTokenizer::qwen2: add(std::string(k_contractions) + k_r2_rest); break;
        case PreTokenizer::qwen35: add(std::string(k_contractions) + k_qwen35_rest); break;
        case PreTokenizer::default_chain:
            for (const char * p : k_r0) add(p);
            break;
    }
}

PreTokenizerSplitter::PreTokenizerSplitter(PreTokenizerSplitter &&) noexcept             = default;
PreTokenizerSplitter & PreTokenizerSplitter::operator=(PreTokenizerSplitter &&) noexcept = default;
PreTokenizerSplitter::~PreTokenizerSplitter()                                           = default;

void PreTokenizerSplitter::split(std::string_view text, std::vector<std::string_view> & words) const {
    if (text.empty()) return;
    struct MatchDataFree {
        void operator()(pcre2_match_data * md) const { pcre2_match_data_free(md); }
    };
    if (chain_.size() == 1) {
        std::unique_ptr<pcre2_match_data, MatchDataFree> md(pcre2_match_data_create_from_pattern(chain_[0]->code, nullptr));
        if (!md) fail(ErrorKind::internal, "tokenizer: out of memory for regex match data");
        chain_[0]->split(text, words, md.get());
        return;
    }
    std::vector<std::string_view> current{text};
    std::vector<std::string_view> next;
    for (const auto & regex : chain_) {
        std::unique_ptr<pcre2_match_data, MatchDataFree> md(pcre2_match_data_create_from_pattern(regex->code, nullptr));
        if (!md) fail(ErrorKind::internal, "tokenizer: out of memory for regex match data");
        next.clear();
        for (std::string_view piece : current) regex->split(piece, next, md.get());
        current.swap(next);
    }
    words.insert(words.end(), current.begin(), current.end());
}

}  // namespace tok
}  // namespace tern
