// Small UTF-8 helpers shared by the GGUF reader (key validation) and the tokenizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tern {

// Length of the sequence a lead byte announces (1..4), or 0 for a continuation / invalid byte.
inline size_t utf8_sequence_length(uint8_t lead) {
    if (lead < 0x80) return 1;
    if ((lead & 0xe0) == 0xc0) return lead >= 0xc2 ? 2 : 0;
    if ((lead & 0xf0) == 0xe0) return 3;
    if ((lead & 0xf8) == 0xf0) return lead <= 0xf4 ? 4 : 0;
    return 0;
}

// Decodes the code point at s[pos] if it is a complete, well-formed sequence (no overlongs,
// no surrogates, <= U+10FFFF). Returns its length, or 0 if the bytes there are not valid UTF-8.
size_t utf8_decode(std::string_view s, size_t pos, uint32_t & code_point);

bool is_valid_utf8(std::string_view s);

// Appends the UTF-8 encoding of a code point (must be <= U+10FFFF and not a surrogate).
void utf8_append(std::string & out, uint32_t code_point);

// Number of bytes at the end of s that form an incomplete (but so far valid) UTF-8 sequence:
// a streaming decoder holds those back until the next piece arrives.
size_t utf8_incomplete_tail(std::string_view s);

// Copy of s in which every maximal ill-formed subsequence (a truncated sequence, or a byte that
// cannot start one) is replaced by U+FFFD, as Python's errors="replace" and WHATWG decoders do.
std::string utf8_replace_invalid(std::string_view s);

// Text from a file (a model's name, a token, a merge) made safe to print in a terminal or a log:
// well-formed UTF-8 is kept ("Ġhello", "東京"), control characters (ESC, NUL, newlines, C1) and
// invalid bytes become \xNN (C1 controls \u{NN}), and at most max_bytes of s are shown, then "...".
std::string printable(std::string_view s, size_t max_bytes = 80);

}  // namespace tern
