// SentencePiece-style encoding of `tokenizer.ggml.model = "llama"` vocabularies (FORMATS.md §5.7,
// steps 3-5): merge adjacent symbols by the score of the token they form, then fall back to
// <0xXX> byte tokens. Entry points: SpmModel::build, SpmModel::encode_fragment.
#pragma once

#include "tokenizer/vocab.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern::tok {

struct SpmScratch {
    struct Symbol {
        uint32_t start;
        uint32_t len;  // 0 once merged into its left neighbour
        int32_t  prev, next;
    };
    struct Candidate {
        float    score;
        int32_t  left, right;
        uint32_t len;  // bytes of left + right when pushed, to recognise stale entries
    };
    std::vector<Symbol>    symbols;
    std::vector<Candidate> heap;
    std::string            escaped;
};

class SpmModel {
public:
    static SpmModel build(const Vocab & vocab);

    // Appends the ids of one raw-text fragment that already went through step 2 (space prefix,
    // ' ' -> U+2581).
    void encode_fragment(std::string_view text, const Vocab & vocab, std::vector<int32_t> & out, SpmScratch & scratch) const;

private:
    float score(int32_t id, const Vocab & vocab) const;
    void  emit_bytes(std::string_view bytes, const Vocab & vocab, std::vector<int32_t> & out) const;

    std::array<int32_t, 256> byte_ids_{};  // "<0xXX>" (else the 1-byte string) per byte, -1 if neither
};

// Step 2 of §5.7: optional leading space, then every ' ' becomes "▁" (U+2581).
void spm_escape_whitespace(std::string_view text, bool add_prefix, std::string & out);

}  // namespace tern::tok
