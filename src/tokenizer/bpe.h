// Byte-level BPE (FORMATS.md §5.4): the merge table built from tokenizer.ggml.merges and the
// per-word encoder (steps 3-6). Entry points: BpeModel::build, BpeModel::encode_word.
// Merges work on token ids: a merge's halves must be tokens, so "merge the pair with the lowest
// rank" is a lookup of (left id, right id) -> (rank, merged id), with no string building.
#pragma once

#include "tokenizer/vocab.h"

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tern::tok {

// Reusable buffers of encode_word (one per encode call, so encoding stays thread-safe).
struct BpeScratch {
    struct Symbol {
        uint32_t start;  // byte offset in the word
        uint32_t len;    // bytes; 0 once merged into its left neighbour
        int32_t  id;     // token id of the symbol's text, -1 if it is not a token
        int32_t  prev, next;
    };
    struct Candidate {
        int32_t rank;
        int32_t left;   // symbol index (= position order, so a smaller index is further left)
        int32_t right;
        int32_t left_id, right_id;  // to recognise stale entries
    };
    std::vector<Symbol>    symbols;
    std::vector<Candidate> heap;
    std::string            mapped;
};

class BpeModel {
public:
    // Parses every merge ("left right", split at the first space after position 0; rank = index).
    // Throws Error(invalid_model) naming the entry if it has no separator or a half is not a token.
    static BpeModel build(std::span<const std::string_view> merges, const Vocab & vocab, bool ignore_merges);

    // Appends the ids of one pre-tokenized word (raw bytes, any byte values).
    void encode_word(std::string_view word, const Vocab & vocab, std::vector<int32_t> & out, BpeScratch & scratch) const;

    size_t n_merges() const { return n_merges_; }
    bool   ignore_merges() const { return ignore_merges_; }

private:
    struct Merge {
        int32_t rank;
        int32_t result;  // id of left+right, -1 if that text is not a token
    };
    static uint64_t pair_key(int32_t left, int32_t right) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    }
    void emit_bytes(std::string_view bytes, const Vocab & vocab, std::vector<int32_t> & out) const;

    std::unordered_map<uint64_t, Merge> merges_;
    size_t                              n_merges_ = 0;
    std::array<int32_t, 256>            byte_ids_{};  // id of each byte's mapped character, -1 if absent
    bool                                ignore_merges_ = false;
};

}  // namespace tern::tok
