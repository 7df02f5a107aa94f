// Stop-string scanning for streamed text.
#include "stop_strings.h"

#include <algorithm>

namespace tern::server {

StopScan scan_stops(std::string_view text, size_t from, const std::vector<std::string> & stops) {
    StopScan r{text.size(), false};
    for (const auto & s : stops) {
        // A match not seen before ends at or after `from`, so it starts after from - |s|.
        const size_t start = from >= s.size() ? from - s.size() + 1 : 0;
        const size_t at    = text.find(s, std::min(start, text.size()));
        if (at != std::string_view::npos && (!r.found || at < r.end)) r = {at, true};
    }
    if (r.found) return r;
    for (const auto & s : stops) {  // hold back a tail that may grow into s
        for (size_t k = std::min(s.size() - 1, text.size()); k > 0; --k) {
            if (text.substr(text.size() - k) == std::string_view(s).substr(0, k)) {
                r.end = std::min(r.end, text.size() - k);
                break;
            }
        }
    }
    return r;
}

}  // namespace tern::server
