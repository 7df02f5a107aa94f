// GPT-2 bytes_to_unicode (FORMATS.md §5.4 step 3): the reversible map from the 256 byte values to
// printable code points that byte-level BPE vocabularies are written in ("Ġ" = space, "Ċ" = \n).
// Entry points: byte_to_code_point / byte_to_utf8 (encode side), code_point_to_byte (decode side).
#pragma once

#include <cstdint>
#include <string_view>

namespace tern::tok {

// Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF map to themselves; the other 68, in increasing
// order, to U+0100..U+0143.
uint32_t byte_to_code_point(uint8_t byte);

// UTF-8 of byte_to_code_point(byte): 1 or 2 bytes, a view into a static table.
std::string_view byte_to_utf8(uint8_t byte);

// Inverse map; -1 for a code point that no byte maps to.
int code_point_to_byte(uint32_t code_point);

}  // namespace tern::tok
