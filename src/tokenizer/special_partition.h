// Special-token partition (FORMATS.md §5.3), the first step of every encode: cut the text at
// occurrences of special-token texts (longest candidate first, leftmost occurrence first) into
// token fragments and raw-text fragments. Entry point: partition_special.
#pragma once

#include "tokenizer/vocab.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace tern::tok {

struct Fragment {
    int32_t          token = -1;  // >= 0: a matched special token; -1: raw text
    std::string_view text;        // raw text (a view into the input); never empty
};

// parse_special = false matches USER_DEFINED candidates only; true matches all (CONTROL, UNKNOWN).
std::vector<Fragment> partition_special(std::string_view text, const Vocab & vocab, bool parse_special);

}  // namespace tern::tok
