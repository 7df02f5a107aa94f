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
    std::vector<float>       scores;          // SPM merge priorities; empty = do not write the key
    std::optional<int32_t>   bos_id, eos_id, eot_id, pad_id, unk_id;
    std::optional<bool>      add_bos, add_eos;
    std::optional<bool>      add_space_prefix;  // SPM: tokenizer.ggml.add_space_prefix
    std::string              chat_template;   // tokenizer.chat_template ("" = do not write the key)
};

// Reads tokenizer.json and, when its path is given, tokenizer_config.json. Throws
// Error(invalid_model) naming the file and the JSON field.
// Holes in the id space become "[PAD<i>]" tokens of type UNUSED; added tokens marked special (or
// named "<|...|>", as llama.cpp's converter treats them) become CONTROL, other added tokens
// USER_DEFINED. `pre` is "llama-bpe" / "qwen2" / "qwen35" when the Split regex is R1 / R2 / Qwen3.5's,
// else "default" (with a warning). bos/eos/pad/unk ids and add_bos/add_eos come from the config;
// add_bos defaults to true for llama-bpe. chat_template is tokenizer_config.json's "chat_template"
// (a string, or the "default" entry of a list of {name, template}). Missing files throw Error(io).
// Token ids must be below max_tokens (config.json's vocab_size: the embedding's rows); 0 means
// below the number of entries + 65,536 (holes are allowed, a 61-byte file naming id 2^31 is not).
// The JSON is parsed strictly (depth-limited, duplicate keys refused); values from the file are
// never printed whole in errors.
TokenizerMetadata tokenizer_metadata_from_hf(const std::string & tokenizer_json_path,
                                             const std::string & tokenizer_config_path = {}, int64_t max_tokens = 0);
// The same from tokenizer.json's text (`name` stands for the file in messages): fuzzing, tests.
TokenizerMetadata tokenizer_metadata_from_hf_text(std::string_view tokenizer_json, const std::string & name,
                                                  int64_t max_tokens = 0);

// Applies a tokenizer_config.json to imported metadata: bos/eos/pad/unk tokens (by text; bos and eos
// must be tokens of the vocabulary), add_bos_token / add_eos_token and chat_template.
void apply_tokenizer_config(const std::string & tokenizer_config_path, TokenizerMetadata & meta);

// Writes the tokenizer.ggml.* keys: model, pre (if set), tokens, token_type (INT32), scores (if
// any), merges (gpt2), the *_token_id keys that are set (UINT32) and add_bos/add_eos (BOOL, if
// set) and tokenizer.chat_template (if set). Throws Error(invalid_argument) if the arrays disagree in
// length or an id is out of range.
void write_tokenizer_metadata(GgufWriter & writer, const TokenizerMetadata & meta);

}  // namespace tern
