// Chat prompt construction, token by token (FORMATS.md §5.8): BitNet b1.58 2B4T's training format
//   <|begin_of_text|>System: {sys}<|eot_id|>User: {msg}<|eot_id|>Assistant: {reply}<|eot_id|>...
// Headers and contents are tokenized separately; special-token text in content stays plain text.
#pragma once

#include "tokenizer/tokenizer.h"

#include <string>
#include <vector>

namespace tern {

struct ChatMessage {
    std::string role;     // "system", "user" or "assistant"
    std::string content;
};

// Ids for the whole conversation; with add_generation_prompt the "Assistant: " header is appended.
// Throws Error(invalid_argument) for an unknown role, Error(unsupported) if the vocabulary lacks
// the tokens the format needs.
std::vector<int32_t> bitnet_chat_tokens(const Tokenizer & tokenizer, const std::vector<ChatMessage> & messages,
                                        bool add_generation_prompt);

// Ids of one more turn appended to an ongoing conversation (no BOS): role header, content, EOT,
// and the assistant header when add_generation_prompt.
std::vector<int32_t> bitnet_chat_turn_tokens(const Tokenizer & tokenizer, const ChatMessage & message,
                                             bool add_generation_prompt);

}  // namespace tern
