// Tokenizer built from GGUF metadata (FORMATS.md §5): byte-level BPE (`tokenizer.ggml.model` =
// "gpt2": Llama-3, Qwen2/3, tern's own models) and SentencePiece-style vocabularies ("llama":
// Phi-3, 1bitLLM). Ids are identical to HF tokenizers / llama.cpp on the golden tests.
//
// Usage:
//   Tokenizer tok = Tokenizer::from_gguf(file);
//   std::vector<int32_t> ids = tok.encode("Hello world", /*add_bos=*/true, /*parse_special=*/false);
//   StreamingDecoder dec(tok);  for (id : ids) std::cout << dec.push(id);  std::cout << dec.flush();
#pragma once

#include "gguf/gguf_reader.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

enum class TokenType : int32_t {
    undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

enum class VocabKind { bpe, spm };

// The pre-tokenizer regex family of a BPE vocabulary (FORMATS.md §5.5): llama3 = R1 (with
// ignore_merges), qwen2 = R2, qwen35 = R2 with combining marks kept in letter runs, default_chain = R0.
enum class PreTokenizer { llama3, qwen2, default_chain, qwen35 };

// `tokenizer.ggml.pre` value (aliases included, e.g. "llama3" -> llama3) -> family; nullopt if unknown.
std::optional<PreTokenizer> pre_tokenizer_from_name(std::string_view name);
// Canonical name: "llama-bpe", "qwen2", "default", "qwen35".
std::string_view pre_tokenizer_name(PreTokenizer pre);

struct TokenizerOptions {
    // Force the pre-tokenizer (e.g. default_chain to compare ids with stock bitnet.cpp). nullopt:
    // from `tokenizer.ggml.pre`, with the Llama-3 fallback of FORMATS.md §5.6.
    // Ignored for SPM vocabularies.
    std::optional<PreTokenizer> pre;
};

class Tokenizer {
public:
    // Throws Error(invalid_model) naming the key when the metadata is missing or inconsistent, and
    // Error(unsupported) for other tokenizer models or unknown pre-tokenizer names. The tokenizer
    // copies what it needs: `file` may be closed afterwards. encode/decode are thread-safe.
    static Tokenizer from_gguf(const GgufFile & file, const TokenizerOptions & options = {});
    Tokenizer(Tokenizer &&) noexcept;
    Tokenizer & operator=(Tokenizer &&) noexcept;
    ~Tokenizer();

    // add_bos: prepend BOS if the vocabulary asks for it (tokenizer.ggml.add_bos_token / defaults);
    // this is llama.cpp's add_special, so EOS is also appended when the vocabulary sets add_eos.
    // parse_special: match CONTROL/UNKNOWN token texts in `text` (USER_DEFINED always match).
    // Any byte string is accepted; invalid UTF-8 is encoded byte by byte and decodes back unchanged.
    std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;

    // Raw bytes of one token (may be a partial UTF-8 sequence). CONTROL, UNKNOWN and UNUSED tokens
    // give "" unless render_special; USER_DEFINED tokens give their text; BYTE tokens their byte.
    // Throws Error(invalid_argument) for an id outside [0, n_vocab()) (so do decode and token_*).
    std::string token_to_piece(int32_t id, bool render_special = false) const;
    // Concatenated pieces. For SPM vocabularies with add_space_prefix, the space that encode()
    // put in front of the text is removed again, so decode(encode(t)) == t (llama.cpp does the same).
    std::string decode(std::span<const int32_t> ids, bool render_special = false) const;

    int32_t n_vocab() const;
    VocabKind kind() const;
    PreTokenizer pre_tokenizer() const;                 // BPE only (default_chain for SPM)
    int32_t bos_id() const;                             // -1 if none
    int32_t eos_id() const;                             // -1 if none
    bool    add_bos() const;                            // whether encode(add_bos=true) prepends BOS
    bool    add_eos() const;                            // whether encode(add_bos=true) appends EOS
    int32_t eot_id() const;                             // end of turn: tokenizer.ggml.eot_token_id, else the first of
                                                        // <|eot_id|> <|im_end|> <|end|> <end_of_turn> <EOT>; -1 if none
    int32_t unk_id() const;                             // -1 if none
    bool    ignore_merges() const;                      // BPE: whole-word vocabulary hits skip merging
    bool    is_eog(int32_t id) const;                   // end-of-generation set (§5.2)
    const std::vector<int32_t> & eog_ids() const;
    TokenType token_type(int32_t id) const;
    const std::string & token_text(int32_t id) const;   // as stored in the vocabulary
    std::optional<int32_t> find_token(std::string_view text) const;

private:
    struct Impl;
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Turns a stream of token ids into text without ever splitting a UTF-8 sequence: bytes of an
// incomplete sequence are held back until the token that completes it arrives. Every string it
// returns is valid UTF-8 (bytes that can never form a character become U+FFFD). Pieces are
// concatenated as they are: the SPM leading-space removal of Tokenizer::decode is not applied,
// because a stream usually continues a prompt.
class StreamingDecoder {
public:
    explicit StreamingDecoder(const Tokenizer & tokenizer, bool render_special = false);
    std::string push(int32_t id);  // text that is complete so far
    std::string flush();           // whatever is left (invalid bytes become U+FFFD)

private:
    const Tokenizer & tokenizer_;
    bool              render_special_;
    std::string       pending_;
};

}  // namespace tern
