// Pre-tokenizers of byte-level BPE vocabularies (FORMATS.md §5.5): split a raw-text fragment into
// "words" with the R1 (llama3), R2 (qwen2), R2+marks (qwen35) regex, or the four-regex R0 chain.
// Entry point: PreTokenizerSplitter::split. Regexes run through PCRE2 (UTF + UCP, JIT when
// available); invalid UTF-8 never matches a regex and ends up in the gaps, which are kept as words.
#pragma once

#include "tokenizer/tokenizer.h"

#include <memory>
#include <string_view>
#include <vector>

namespace tern::tok {

class PreTokenizerSplitter {
public:
    explicit PreTokenizerSplitter(PreTokenizer kind);
    PreTokenizerSplitter(PreTokenizerSplitter &&) noexcept;
    PreTokenizerSplitter & operator=(PreTokenizerSplitter &&) noexcept;
    ~PreTokenizerSplitter();

    // Appends the words of `text` (views into it, in order, covering it exactly) to `words`.
    // Thread-safe: match state is per call.
    void split(std::string_view text, std::vector<std::string_view> & words) const;

    PreTokenizer kind() const { return kind_; }

private:
    struct Regex;
    PreTokenizer                              kind_;
    std::vector<std::shared_ptr<const Regex>> chain_;  // applied in order; each splits every piece
};

}  // namespace tern::tok
