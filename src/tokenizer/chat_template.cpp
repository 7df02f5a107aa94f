// Chat templates: recognition from the GGUF's Jinja text and prompt building per family. The
// renderings follow each family's published template (HF tokenizer_config.json) as llama.cpp's
// built-in templates render them; BitNet 2B4T's is its training format (chat_format.cpp).
#include "tokenizer/chat_template.h"

#include "core/error.h"

#include <algorithm>

namespace tern {
namespace {

struct NamedTemplate {
    std::string_view name;
    ChatTemplate     t;
};
constexpr NamedTemplate k_names[] = {
    {"none", ChatTemplate::none},        {"bitnet", ChatTemplate::bitnet}, {"llama3", ChatTemplate::llama3},
    {"chatml", ChatTemplate::chatml},    {"phi3", ChatTemplate::phi3},     {"falcon3", ChatTemplate::falcon3},
    {"qwen", ChatTemplate::chatml},      {"llama-3", ChatTemplate::llama3}, {"phi-3", ChatTemplate::phi3},
    {"bitnet-2b4t", ChatTemplate::bitnet},
};

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

// Jinja's `trim` (Python str.strip) for the ASCII whitespace chat messages carry.
std::string_view trim(std::string_view s) {
    const char * ws    = " \t\n\r\v\f";
    const size_t begin = s.find_first_not_of(ws);
    if (begin == std::string_view::npos) return {};
    return s.substr(begin, s.find_last_not_of(ws) - begin + 1);
}

// Appends ids: special markers by id, text encoded without special-token parsing.
class PromptBuilder {
public:
    PromptBuilder(const Tokenizer & tok, ChatTemplate t) : tok_(tok), t_(t) {}

    // A marker the format cannot do without (an error when the vocabulary lacks it).
    void special(std::string_view marker) { out_.push_back(require(marker)); }
    // A marker that is a special token in some vocabularies of the family and plain text in others.
    void marker(std::string_view marker) {
        if (auto id = tok_.find_token(marker)) {
            out_.push_back(*id);
        } else {
            text(marker);
        }
    }
    void text(std::string_view s) {
        if (s.empty()) return;
        const std::vector<int32_t> ids = tok_.encode(s, false, false);
        out_.insert(out_.end(), ids.begin(), ids.end());
    }
    void bos_if_added() {
        if (tok_.add_bos() && tok_.bos_id() >= 0) out_.push_back(tok_.bos_id());
    }
    int32_t require(std::string_view marker) const {
        auto id = tok_.find_token(marker);
        if (!id) {
            fail(ErrorKind::unsupported,
                 format("chat template '%s' needs the token '%.*s', which the vocabulary does not have",
                        std::string(chat_template_name(t_)).c_str(), static_cast<int>(marker.size()), marker.data()),
                 "choose the model's format with --chat-template NAME (" + chat_template_names() + ")");
        }
        return *id;
    }
    std::vector<int32_t> take() { return std::move(out_); }

private:
    const Tokenizer &    tok_;
    ChatTemplate         t_;
    std::vector<int32_t> out_;
};

void check_role(const std::string & role) {
    if (role != "system" && role != "user" && role != "assistant") {
        fail(ErrorKind::invalid_argument,
             format("chat: unknown message role '%.*s'", static_cast<int>(std::min<size_t>(role.size(), 64)), role.data()),
             "roles are \"system\", \"user\" and \"assistant\"");
    }
}

}  // namespace

std::string_view chat_template_name(ChatTemplate t) {
    for (const auto & n : k_names) {
        if (n.t == t) return n.name;
    }
    return "?";
}

std::optional<ChatTemplate> chat_template_from_name(std::string_view name) {
    for (const auto & n : k_names) {
        if (n.name == name) return n.t;
    }
    return std::nullopt;
}

std::string chat_template_names() { return "bitnet, llama3, chatml (qwen), phi3, falcon3, none"; }

std::optional<ChatTemplate> detect_chat_template(std::string_view j) {
    // 2B4T: the converter's placeholder ("BITNETAssistant"), or its HF template
    // (role|capitalize + ': ' + content + '<|eot_id|>'), FORMATS.md §5.8.
    if (contains(j, "BITNET") || (contains(j, "capitalize") && contains(j, "<|eot_id|>") && !contains(j, "<|start_header_id|>"))) {
        return ChatTemplate::bitnet;
    }
    if (contains(j, "<|start_header_id|>") && contains(j, "<|end_header_id|>")) return ChatTemplate::llama3;
    if (contains(j, "<|im_start|>") && contains(j, "<|im_end|>")) return ChatTemplate::chatml;
    if (contains(j, "<|assistant|>") && contains(j, "<|end|>")) return ChatTemplate::phi3;
    if (contains(j, "<|assistant|>") && contains(j, "<|user|>")) return ChatTemplate::falcon3;
    return std::nullopt;
}

ChatTemplateChoice choose_chat_template(const Tokenizer & tokenizer, std::optional<std::string_view> jinja,
                                        std::optional<std::string_view> override_name) {
    ChatTemplateChoice c;
    if (override_name) {
        auto t = chat_template_from_name(*override_name);
        if (!t) {
            fail(ErrorKind::invalid_argument,
                 format("--chat-template: unknown template '%.*s'", static_cast<int>(std::min<size_t>(override_name->size(), 64)),
                        override_name->data()),
                 "known templates: " + chat_template_names());
        }
        c.template_ = *t;
        c.reason    = "chosen with --chat-template";
    } else if (jinja && !jinja->empty()) {
        auto t = detect_chat_template(*jinja);
        if (!t) {
            fail(ErrorKind::unsupported,
                 format("the model's chat template (tokenizer.chat_template, %zu bytes, starting '%.40s') is not one tern "
                        "recognises", jinja->size(), std::string(jinja->substr(0, 40)).c_str()),
                 "name the model's format with --chat-template NAME (" + chat_template_names() +
                     "); --chat-template none serves /v1/completions only");
        }
        c.template_ = *t;
        c.reason    = "recognised from tokenizer.chat_template";
    } else if (tokenizer.find_token("<|eot_id|>") && tokenizer.bos_id() >= 0) {
        c.template_ = ChatTemplate::bitnet;
        c.reason    = "no tokenizer.chat_template; the vocabulary has <|eot_id|> (BitNet b1.58 2B4T's format)";
    } else {
        c.template_ = ChatTemplate::none;
        c.reason    = "no tokenizer.chat_template: a text-continuation model";
    }
    if (c.template_ != ChatTemplate::none) {  // the vocabulary must have the format's markers
        chat_template_tokens(c.template_, tokenizer, {{"system", "s"}, {"user", "u"}}, true);
    }
    return c;
}

std::vector<int32_t> chat_template_tokens(ChatTemplate t, const Tokenizer & tokenizer,
                                          const std::vector<ChatMessage> & messages, bool add_generation_prompt) {
    for (const auto & m : messages) check_role(m.role);
    PromptBuilder b(tokenizer, t);
    switch (t) {
        case ChatTemplate::none:
            fail(ErrorKind::invalid_argument, "the model has no chat format",
                 "send a plain prompt to /v1/completions, or start the server with --chat-template NAME");
        case ChatTemplate::bitnet:
            return bitnet_chat_tokens(tokenizer, messages, add_generation_prompt);
        case ChatTemplate::llama3:
            b.special("<|begin_of_text|>");
            for (const auto & m : messages) {
                b.special("<|start_header_id|>");
                b.text(m.role);
                b.special("<|end_header_id|>");
                b.text("\n\n" + std::string(trim(m.content)));
                b.special("<|eot_id|>");
            }
            if (add_generation_prompt) {
                b.special("<|start_header_id|>");
                b.text("assistant");
                b.special("<|end_header_id|>");
                b.text("\n\n");
            }
            break;
        case ChatTemplate::chatml:
            for (const auto & m : messages) {
                b.special("<|im_start|>");
                b.text(m.role + "\n" + m.content);
                b.special("<|im_end|>");
                b.text("\n");
            }
            if (add_generation_prompt) {
                b.special("<|im_start|>");
                b.text("assistant\n");
            }
            break;
        case ChatTemplate::phi3:
            b.bos_if_added();
            for (const auto & m : messages) {
                b.special("<|" + m.role + "|>");
                b.text("\n" + m.content);
                b.special("<|end|>");
                b.text("\n");
            }
            if (add_generation_prompt) {
                b.special("<|assistant|>");
                b.text("\n");
            }
            break;
        case ChatTemplate::falcon3:
            for (const auto & m : messages) {
                b.marker("<|" + m.role + "|>");
                b.text("\n" + m.content + "\n");
            }
            if (add_generation_prompt) {
                b.marker("<|assistant|>");
                b.text("\n");
            }
            break;
    }
    return b.take();
}

std::vector<int32_t> chat_template_stop_tokens(ChatTemplate t, const Tokenizer & tokenizer) {
    std::vector<std::string_view> markers;
    switch (t) {
        case ChatTemplate::none: break;
        case ChatTemplate::bitnet:
        case ChatTemplate::llama3: markers = {"<|eot_id|>"}; break;
        case ChatTemplate::chatml: markers = {"<|im_end|>"}; break;
        case ChatTemplate::phi3: markers = {"<|end|>"}; break;
        case ChatTemplate::falcon3: markers = {"<|endoftext|>"}; break;
    }
    std::vector<int32_t> ids;
    for (auto m : markers) {
        if (auto id = tokenizer.find_token(m)) ids.push_back(*id);
    }
    return ids;
}

}  // namespace tern
