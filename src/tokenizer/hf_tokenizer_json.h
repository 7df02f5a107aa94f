// Import of a Hugging Face tokenizer.json (byte-level BPE, as Llama-3 / BitNet 2B4T / GPT-2 /
// Qwen ship it) into the GGUF tokenizer metadata tern writes (FORMATS.md §5.1, §7.3).
#pragma once

#include "gguf/gguf_writer.h"

#include <optional>
#include <string>
#include <vector>

namespace tern {

struct TokenizerMetadata {
    std::string              model = "gpt2";  // tokenizer.ggml.model
    std::string              pre;             // tokenizer.ggml.pre ("" = do not write the key)
    std::vector<std::string> tokens;          // id -> text (byte-level encoded, e.g. "Ġhello")
    std::vector<int32_t>     token_types;     // TokenType per id
    std::vector<std::string> merges;          // "left right", rank order
    std::optional<int32_t>   bos_id, eos_id, eot_id, pad_id, unk_id;
    std::optional<bool>      add_bos, add_eos;
};

// Reads tokenizer.json (and, when given, the sibling tokenizer_config.json / config.json values
// for bos/eos/add_bos). Throws Error(invalid_model) naming the file and the JSON field.
// Holes in the id space become "[PAD<i>]" tokens of type UNUSED; added tokens marked special
// become CONTROL, other added tokens USER_DEFINED.
TokenizerMetadata tokenizer_metadata_from_hf(const std::string & tokenizer_json_path,
                                             const std::string & tokenizer_config_path = {});

// Writes the tokenizer.ggml.* keys.
void write_tokenizer_metadata(GgufWriter & writer, const TokenizerMetadata & meta);

}  // namespace tern
