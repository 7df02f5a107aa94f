// The vocabulary shared by both tokenizer kinds: token texts, types and scores read from the
// tokenizer.ggml.* GGUF keys, the text -> id map, the special ids with their §5.1 defaults, the
// special-token candidates of §5.3 and the end-of-generation set of §5.2. Entry point: load_vocab.
// Every inconsistency throws Error(invalid_model) naming the key (FORMATS.md §5.1-§5.3).
#pragma once

#include <array>

#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tern::tok {

// A special-token candidate of the partition step (§5.3).
struct SpecialToken {
    int32_t id     = -1;
    bool    lstrip = false;  // remove whitespace from the raw text just before a match
    bool    rstrip = false;  // remove whitespace from the raw text just after a match
};

struct Vocab {
    std::vector<std::string> texts;   // id -> text as stored (byte-level encoded for gpt2, ▁ for SPM)
    std::vector<TokenType>   types;   // id -> type (NORMAL when the file has no token_type)
    std::vector<float>       scores;  // id -> SPM merge priority; empty when the file has none

    // text -> id, with views into `texts` (never resized after loading). When two ids share a
    // text the lower id wins; empty texts are not entered (nothing can match them).
    std::unordered_map<std::string_view, int32_t> ids;

    int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1;  // -1: none
    bool    eos_is_placeholder = false;  // BPE eos from llama.cpp's default 11, not from the file
    std::vector<int32_t> declared_specials;  // ids named by the bos/eos/eot/eom keys
    bool    add_bos = false, add_eos = false, add_space_prefix = false;

    std::vector<SpecialToken> specials;  // CONTROL / USER_DEFINED / UNKNOWN, longest text first
    std::vector<int32_t>      eog;       // sorted, unique

    int32_t n_tokens() const { return static_cast<int32_t>(texts.size()); }
    int32_t find(std::string_view text) const {
        const auto it = ids.find(text);
        return it == ids.end() ? -1 : it->second;
    }
    bool valid_id(int64_t id) const { return id >= 0 && id < n_tokens(); }
};

// Reads tokens, token_type and scores (lengths must agree, types must be 0..6) and builds `ids`.
void load_vocab_entries(const GgufFile & file, Vocab & vocab);

// Reads the special ids and add_* flags, applying the defaults of §5.1 for `kind` (llama3_family:
// the BPE add_bos default is true). bos/eos/eot/eom/unk ids outside the vocabulary are an error;
// padding/sep/mask ids are not used here and are only checked for type.
void load_special_ids(const GgufFile & file, VocabKind kind, bool llama3_family, Vocab & vocab);

// Builds the EOG set (§5.2: eos/eot/eom plus well-known end texts, which are forced to CONTROL)
// and then the special-token candidates, with llama.cpp's phi-3 RSTRIP heuristic (§5.3). Ids named
// by the bos/eos/eot/eom keys are CONTROL too when the file types them NORMAL (whether 2B4T's
// specials are typed CONTROL is unverified, FORMATS.md §4.3), so they never print as text.
void build_special_tokens(const GgufFile & file, Vocab & vocab);

// Byte fallback shared by the BPE and SPM models: one id per byte from `byte_ids` (-1 = the byte
// has no token), or the vocabulary's UNK id when there is one; otherwise the byte is dropped.
void emit_byte_tokens(std::string_view bytes, const std::array<int32_t, 256> & byte_ids, int32_t unk,
                      std::vector<int32_t> & out);

}  // namespace tern::tok
