// BitNet b1.58 2B4T training chat format, built token by token (FORMATS.md §5.8): BOS, then per
// message encode(header) + encode(content.strip()) + <|eot_id|>, then optionally "Assistant: ".
// Headers and contents are encoded separately and without special-token parsing, so "User: Hi"
// gives 1502 25 220 13347 (not 1502 25 21694) and "<|eot_id|>" typed by a user stays plain text.
#include "tokenizer/chat_format.h"

#include "core/error.h"
#include "core/utf8.h"

#include <algorithm>

namespace tern {
namespace {

// Python's str.isspace() set, so that content.strip() matches the reference tokenizer.py.
bool is_python_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

// Length of the code point ending at s[end-1], 0 if the bytes there are not a valid sequence.
size_t last_code_point(std::string_view s, size_t end, uint32_t & cp) {
    for (size_t len = 1; len <= 4 && len <= end; ++len) {
        if (utf8_decode(s, end - len, cp) == len) return len;
    }
    return 0;
}

std::string_view strip(std::string_view s) {
    uint32_t cp    = 0;
    size_t   begin = 0;
    while (begin < s.size()) {
        const size_t n = utf8_decode(s, begin, cp);
        if (n == 0 || !is_python_space(cp)) break;
        begin += n;
    }
    size_t end = s.size();
    while (end > begin) {
        const size_t n = last_code_point(s, end, cp);
        if (n == 0 || !is_python_space(cp)) break;
        end -= n;
    }
    return s.substr(begin, end - begin);
}

const char * role_header(const std::string & role) {
    if (role == "system") return "System: ";
    if (role == "user") return "User: ";
    if (role == "assistant") return "Assistant: ";
    fail(ErrorKind::invalid_argument,
         format("chat: unknown message role '%s'", printable(role, 64).c_str()),
         "roles are \"system\", \"user\" and \"assistant\"");
}

int32_t eot_token(const Tokenizer & tokenizer) {
    const auto id = tokenizer.find_token("<|eot_id|>");
    if (!id) {
        fail(ErrorKind::unsupported, "chat: the vocabulary has no '<|eot_id|>' token, which the BitNet chat format needs",
             "this chat format is for BitNet b1.58 2B4T (Llama-3 vocabulary)");
    }
    return *id;
}

void append(std::vector<int32_t> & out, const std::vector<int32_t> & ids) { out.insert(out.end(), ids.begin(), ids.end()); }

void append_turn(const Tokenizer & tokenizer, int32_t eot, const ChatMessage & message, std::vector<int32_t> & out) {
    append(out, tokenizer.encode(role_header(message.role), false, false));
    append(out, tokenizer.encode(strip(message.content), false, false));
    out.push_back(eot);
}

}  // namespace

std::vector<int32_t> bitnet_chat_tokens(const Tokenizer & tokenizer, const std::vector<ChatMessage> & messages,
                                        bool add_generation_prompt) {
    const int32_t eot = eot_token(tokenizer);
    if (tokenizer.bos_id() < 0) {
        fail(ErrorKind::unsupported, "chat: the vocabulary has no BOS token, which the BitNet chat format starts with");
    }
    std::vector<int32_t> out{tokenizer.bos_id()};
    for (const auto & m : messages) append_turn(tokenizer, eot, m, out);
    if (add_generation_prompt) append(out, tokenizer.encode("Assistant: ", false, false));
    return out;
}

std::vector<int32_t> bitnet_chat_turn_tokens(const Tokenizer & tokenizer, const ChatMessage & message,
                                             bool add_generation_prompt) {
    const int32_t        eot = eot_token(tokenizer);
    std::vector<int32_t> out;
    append_turn(tokenizer, eot, message, out);
    if (add_generation_prompt) append(out, tokenizer.encode("Assistant: ", false, false));
    return out;
}

}  // namespace tern
