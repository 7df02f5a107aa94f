// Stop strings over streamed text: how much of the text generated so far may be sent, holding back
// a tail that could still become a stop string, and where a stop string cuts the text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tern::server {

struct StopScan {
    size_t end   = 0;      // text[0, end) may be sent
    bool   found = false;  // a stop string starts at `end`; generation ends
};

// `text` is everything generated so far; stop strings fully inside text[0, from) were searched
// already (pass the previous scan's end). A stop string found cuts the text at its earliest
// occurrence; otherwise the longest tail of `text` that is a proper prefix of a stop string is held back.
StopScan scan_stops(std::string_view text, size_t from, const std::vector<std::string> & stops);

}  // namespace tern::server
