// Import of a SentencePiece tokenizer.model (the protobuf Llama-2 / Phi-3 checkpoints ship) into the
// GGUF tokenizer metadata of a `llama` (SPM) vocabulary, as llama.cpp's converter builds it:
// pieces, scores and types from the model; added tokens (tokenizer.json "added_tokens" or
// tokenizer_config.json "added_tokens_decoder") appended or retyped, CONTROL when special, else
// USER_DEFINED; special ids and add_bos / add_eos from tokenizer_config.json.
//
// ModelProto wire format (only what is read; everything else is skipped by wire type):
//   field 1 (LEN, repeated) SentencePiece { 1: piece (string), 2: score (fixed32 float), 3: type (varint) }
//   field 3 (LEN)           NormalizerSpec { 3: add_dummy_prefix (varint bool) }
//   type: 1 NORMAL, 2 UNKNOWN, 3 CONTROL, 4 USER_DEFINED, 5 UNUSED, 6 BYTE (= GGUF token types)
#pragma once

#include "tokenizer/hf_tokenizer_json.h"

#include <cstdint>
#include <span>
#include <string>

namespace tern {

struct SpmPieces {
    std::vector<std::string> pieces;
    std::vector<float>       scores;
    std::vector<int32_t>     types;
    bool                     add_dummy_prefix = true;
};

// Parses the protobuf bytes; every length is checked against the bytes that remain. Throws
// Error(invalid_model) naming `source` and the byte offset for malformed input.
SpmPieces parse_sentencepiece_model(std::span<const uint8_t> bytes, const std::string & source);

// tokenizer.model (+ optional tokenizer.json for added tokens, + optional tokenizer_config.json).
TokenizerMetadata tokenizer_metadata_from_spm(const std::string & model_path, const std::string & tokenizer_json_path,
                                              const std::string & tokenizer_config_path);

}  // namespace tern
