// Rng: the sampler's pseudo-random source. xoshiro256** (Blackman & Vigna) seeded through
// splitmix64, and a uniform double built from the top 53 bits. Every step is fixed integer
// arithmetic, so a seed gives the same stream on every compiler, library and CPU (unlike
// std::uniform_real_distribution, whose algorithm is implementation-defined).
#pragma once

#include <cstdint>

namespace tern {

// One splitmix64 step: advances state and returns the next output.
constexpr uint64_t splitmix64_next(uint64_t & state) {
    state += 0x9e3779b97f4a7c15ull;
    uint64_t z = state;
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

class Rng {
public:
    explicit Rng(uint64_t seed = 0) { reseed(seed); }

    // The 256-bit state is four splitmix64 outputs of the seed (never all zero).
    void reseed(uint64_t seed) {
        uint64_t sm = seed;
        for (uint64_t & word : s_) word = splitmix64_next(sm);
    }

    uint64_t next_u64() {
        const uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const uint64_t t      = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }

    // Uniform in [0, 1): the top 53 bits times 2^-53 (exact in a double, never 1.0).
    double next_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

    // Uniform in [0, 1): the top 24 bits times 2^-24 (exact in a float, never 1.0). The sampler's
    // draw uses it, so a GPU that draws in f32 gets the very same number from the host.
    float next_float() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }

private:
    static constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

    uint64_t s_[4] = {};
};

}  // namespace tern
