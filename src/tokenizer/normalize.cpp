// NFC through utf8proc; see normalize.h.
#include "tokenizer/normalize.h"

#include <cstdlib>
#include <utf8proc.h>

namespace tern::tok {

bool may_need_nfc(std::string_view text) {
    for (const char c : text) {
        if (static_cast<unsigned char>(c) >= 0x80) return true;
    }
    return false;
}

std::string nfc(std::string_view text) {
    if (!may_need_nfc(text)) return std::string(text);
    utf8proc_uint8_t *    out = nullptr;
    const utf8proc_ssize_t n  = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t *>(text.data()),
                                            static_cast<utf8proc_ssize_t>(text.size()), &out,
                                            static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) return std::string(text);  // invalid UTF-8: no normalization
    std::string result(reinterpret_cast<const char *>(out), static_cast<size_t>(n));
    std::free(out);
    return result;
}

}  // namespace tern::tok
