// Small synthetic vocabularies for algorithm and validation tests: a complete byte-level alphabet
// (the 256 bytes_to_unicode characters) plus a few multi-character tokens and merges, then
// "<|bos|>" and "<|eos|>" (CONTROL).
#pragma once

#include "tokenizer/byte_unicode.h"
#include "tokenizer/hf_tokenizer_json.h"

#include <string>
#include <vector>

namespace tern::test {

inline TokenizerMetadata tiny_bpe(const std::vector<std::string> & extra_tokens, const std::vector<std::string> & merges,
                                  const std::string & pre = "qwen2") {
    TokenizerMetadata meta;
    meta.model = "gpt2";
    meta.pre   = pre;
    for (unsigned b = 0; b < 256; ++b) meta.tokens.emplace_back(tok::byte_to_utf8(static_cast<uint8_t>(b)));
    for (const auto & t : extra_tokens) meta.tokens.push_back(t);
    meta.token_types.assign(meta.tokens.size(), 1);
    // Real BOS/EOS ids, so that llama.cpp's placeholder default (id 11) does not kick in.
    meta.bos_id = static_cast<int32_t>(meta.tokens.size());
    meta.tokens.push_back("<|bos|>");
    meta.eos_id = static_cast<int32_t>(meta.tokens.size());
    meta.tokens.push_back("<|eos|>");
    meta.token_types.resize(meta.tokens.size(), 3);
    meta.merges = merges;
    return meta;
}

// Id of a tiny_bpe token by text (the byte alphabet comes first, in byte order).
inline int32_t tiny_id(const TokenizerMetadata & meta, const std::string & text) {
    for (size_t i = 0; i < meta.tokens.size(); ++i) {
        if (meta.tokens[i] == text) return static_cast<int32_t>(i);
    }
    return -1;
}

}  // namespace tern::test
