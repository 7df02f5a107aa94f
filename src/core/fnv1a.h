// FNV-1a, 64 bits: a quick non-cryptographic hash for cache file names and checksums that only
// have to notice a truncated or foreign file (the pipeline list, Dawn's blob cache). Chain calls by
// passing the last result as `h`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tern {

inline constexpr uint64_t k_fnv1a_offset = 1469598103934665603ull;

inline uint64_t fnv1a(const void * data, size_t n, uint64_t h = k_fnv1a_offset) {
    const auto * p = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

inline uint64_t fnv1a(std::string_view s, uint64_t h = k_fnv1a_offset) { return fnv1a(s.data(), s.size(), h); }

}  // namespace tern
