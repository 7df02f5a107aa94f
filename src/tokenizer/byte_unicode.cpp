// GPT-2 bytes_to_unicode tables, built once at compile time (FORMATS.md §5.4 step 3).
#include "tokenizer/byte_unicode.h"

#include <array>

namespace tern::tok {
namespace {

constexpr bool maps_to_itself(unsigned b) {
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

constexpr std::array<uint16_t, 256> make_forward() {
    std::array<uint16_t, 256> t{};
    uint16_t next = 0x100;  // the 68 remapped bytes take U+0100.. in increasing byte order
    for (unsigned b = 0; b < 256; ++b) t[b] = maps_to_itself(b) ? static_cast<uint16_t>(b) : next++;
    return t;
}

constexpr std::array<uint16_t, 256> k_forward = make_forward();
constexpr uint32_t k_max_code_point = 0x143;

constexpr std::array<int16_t, k_max_code_point + 1> make_inverse() {
    std::array<int16_t, k_max_code_point + 1> t{};
    for (auto & v : t) v = -1;
    for (unsigned b = 0; b < 256; ++b) t[k_forward[b]] = static_cast<int16_t>(b);
    return t;
}

constexpr std::array<int16_t, k_max_code_point + 1> k_inverse = make_inverse();

// Every image code point is < U+0800, so its UTF-8 form has at most 2 bytes.
struct Utf8Entry {
    char    bytes[2];
    uint8_t len;
};

constexpr std::array<Utf8Entry, 256> make_utf8() {
    std::array<Utf8Entry, 256> t{};
    for (unsigned b = 0; b < 256; ++b) {
        const uint16_t cp = k_forward[b];
        if (cp < 0x80) {
            t[b] = {{static_cast<char>(cp), 0}, 1};
        } else {
            t[b] = {{static_cast<char>(0xc0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3f))}, 2};
        }
    }
    return t;
}

constexpr std::array<Utf8Entry, 256> k_utf8 = make_utf8();

}  // namespace

uint32_t byte_to_code_point(uint8_t byte) { return k_forward[byte]; }

std::string_view byte_to_utf8(uint8_t byte) { return {k_utf8[byte].bytes, k_utf8[byte].len}; }

int code_point_to_byte(uint32_t code_point) {
    return code_point <= k_max_code_point ? k_inverse[code_point] : -1;
}

}  // namespace tern::tok
