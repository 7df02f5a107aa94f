// Chat templates: which conversation format a model was trained with, and its prompts as token ids.
// tern does not run Jinja: it recognises the families it runs from the text of the GGUF's
// tokenizer.chat_template (or from the vocabulary for BitNet b1.58 2B4T, whose embedded template
// is a placeholder, FORMATS.md §5.8) and builds their prompts token by token: role markers that
// are special tokens in the vocabulary go in as their ids, message contents are encoded without
// special-token parsing (so "<|im_end|>" typed by a user stays text).
//
//   bitnet   <|begin_of_text|>System: {sys}<|eot_id|>User: {msg}<|eot_id|>Assistant:       (2B4T)
//   llama3   <|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n{msg}<|eot_id|>
//            <|start_header_id|>assistant<|end_header_id|>\n\n                        (contents trimmed)
//   chatml   <|im_start|>user\n{msg}<|im_end|>\n<|im_start|>assistant\n                   (Qwen2/2.5/3)
//   phi3     <s><|user|>\n{msg}<|end|>\n<|assistant|>\n                                   (Phi-3)
//   falcon3  <|user|>\n{msg}\n<|assistant|>\n                                             (Falcon3)
#pragma once

#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

enum class ChatTemplate { none, bitnet, llama3, chatml, phi3, falcon3 };

// "none", "bitnet", "llama3", "chatml", "phi3", "falcon3".
std::string_view chat_template_name(ChatTemplate t);
// The names above, plus the aliases "qwen" (chatml) and "llama-3", "phi-3", "bitnet-2b4t".
std::optional<ChatTemplate> chat_template_from_name(std::string_view name);
// "bitnet, llama3, chatml, phi3, falcon3, none", for help and error text.
std::string chat_template_names();

// The family of a Jinja chat template (the GGUF's tokenizer.chat_template), from the markers it
// emits; nullopt when it is none of tern's.
std::optional<ChatTemplate> detect_chat_template(std::string_view jinja);

// The format a model is served with, and why (one line for the log):
//   - `override_name` when given (--chat-template), checked against the vocabulary;
//   - else the family of `jinja` (the file's tokenizer.chat_template) when recognised;
//   - else bitnet when the vocabulary has <|eot_id|> and the template is absent or 2B4T's placeholder;
//   - else none when the file has no template (a text-continuation model, like tern-32m-en).
// Throws Error(unsupported) for a template tern does not recognise (hint: --chat-template NAME, or
// none to serve completions only), Error(invalid_argument) for an unknown override name, and
// Error(unsupported) when the vocabulary lacks a special token the format needs.
struct ChatTemplateChoice {
    ChatTemplate template_ = ChatTemplate::none;
    std::string  reason;
};
ChatTemplateChoice choose_chat_template(const Tokenizer & tokenizer, std::optional<std::string_view> jinja,
                                        std::optional<std::string_view> override_name);

// Ids of a whole conversation; with add_generation_prompt the assistant's header follows. Roles:
// "system", "user", "assistant". Throws Error(invalid_argument) for another role (naming it) and
// for ChatTemplate::none.
std::vector<int32_t> chat_template_tokens(ChatTemplate t, const Tokenizer & tokenizer,
                                          const std::vector<ChatMessage> & messages, bool add_generation_prompt);

// Ids that end a generated reply besides the vocabulary's end-of-generation set (Tokenizer::is_eog):
// the format's end-of-turn marker.
std::vector<int32_t> chat_template_stop_tokens(ChatTemplate t, const Tokenizer & tokenizer);

}  // namespace tern
