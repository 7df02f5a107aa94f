// UTF-8 decoding and validation (RFC 3629).
#include "core/utf8.h"

namespace tern {

size_t utf8_decode(std::string_view s, size_t pos, uint32_t & cp) {
    if (pos >= s.size()) return 0;
    const auto   b0  = static_cast<uint8_t>(s[pos]);
    const size_t len = utf8_sequence_length(b0);
    if (len == 0 || pos + len > s.size()) return 0;
    if (len == 1) {
        cp = b0;
        return 1;
    }
    uint32_t v = b0 & (0x7fu >> len);
    for (size_t i = 1; i < len; ++i) {
        const auto b = static_cast<uint8_t>(s[pos + i]);
        if ((b & 0xc0) != 0x80) return 0;
        v = (v << 6) | (b & 0x3fu);
    }
    static constexpr uint32_t min_for_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_for_len[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    cp = v;
    return len;
}

bool is_valid_utf8(std::string_view s) {
    size_t   pos = 0;
    uint32_t cp  = 0;
    while (pos < s.size()) {
        const size_t n = utf8_decode(s, pos, cp);
        if (n == 0) return false;
        pos += n;
    }
    return true;
}

void utf8_append(std::string & out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xc0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xe0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
        out += static_cast<char>(0xf0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    }
}

size_t utf8_incomplete_tail(std::string_view s) {
    // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
    const size_t n = s.size();
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        const auto b = static_cast<uint8_t>(s[n - back]);
        if ((b & 0xc0) == 0x80) continue;  // continuation byte: keep looking for the lead
        const size_t len = utf8_sequence_length(b);
        return (len > back) ? back : 0;
    }
    return 0;
}

std::string utf8_replace_invalid(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    size_t   pos = 0;
    uint32_t cp  = 0;
    while (pos < s.size()) {
        const size_t n = utf8_decode(s, pos, cp);
        if (n > 0) {
            out.append(s.substr(pos, n));
            pos += n;
            continue;
        }
        // Ill-formed: skip the lead byte plus the continuation bytes that could still have
        // belonged to it (second-byte ranges of RFC 3629 table 3-7), then emit one U+FFFD.
        const auto   b0   = static_cast<uint8_t>(s[pos]);
        const size_t want = utf8_sequence_length(b0);
        size_t       skip = 1;
        if (want > 1) {
            uint8_t lo = 0x80, hi = 0xbf;
            if (b0 == 0xe0) lo = 0xa0;
            if (b0 == 0xed) hi = 0x9f;
            if (b0 == 0xf0) lo = 0x90;
            if (b0 == 0xf4) hi = 0x8f;
            while (skip < want && pos + skip < s.size()) {
                const auto b = static_cast<uint8_t>(s[pos + skip]);
                if (b < lo || b > hi) break;
                lo = 0x80;
                hi = 0xbf;
                ++skip;
            }
        }
        utf8_append(out, 0xfffd);
        pos += skip;
    }
    return out;
}

std::string printable(std::string_view s, size_t max_bytes) {
    static const char * hex = "0123456789abcdef";
    std::string         out;
    size_t              pos = 0;
    while (pos < s.size() && pos < max_bytes) {
        uint32_t     cp = 0;
        const size_t n  = utf8_decode(s, pos, cp);
        const bool   control = n == 0 || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0);
        if (!control) {
            out.append(s.substr(pos, n));
            pos += n;
        } else if (n == 2) {  // C1 control (U+0080..U+009F): a terminal may act on it as on ESC [
            out.append("\\u{").append(1, hex[cp >> 4]).append(1, hex[cp & 15]).append("}");
            pos += n;
        } else {
            const auto b = static_cast<unsigned char>(s[pos]);
            out.append("\\x").append(1, hex[b >> 4]).append(1, hex[b & 15]);
            ++pos;
        }
    }
    if (pos < s.size()) out += "...";
    return out;
}

}  // namespace tern
