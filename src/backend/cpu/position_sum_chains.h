// cpu::sum_positions as scalar chains, shared by the AVX2 and AVX-512 attention files (no intrinsics;
// internal linkage, so each file keeps its own copy under its own flags).
#pragma once

#include <cstdint>

namespace tern::cpu {
namespace {

// cpu::sum_positions of n >= 0 terms, the same sums in the same order: each superblock's blocks of 32
// summed as scalar chains, 4 blocks side by side in registers (blocks past the superblock's last read
// zeros and are dropped). The gathers this replaces (blocks in the lanes) were 12% of the AVX-512
// BM_AttentionLayer's samples at 64 positions, and one chain per block kept in an array 9% (each add
// waited on a store).
inline float sum_positions_chains(const float * t, int64_t n) {
    alignas(64) static const float zeros[32] = {};
    float total = 0.0f;
    for (int64_t s0 = 0; s0 < n; s0 += 512) {
        const int64_t len = n - s0 < 512 ? n - s0 : 512, nb = len / 32;  // nb whole blocks, then a part
        const float * ts  = t + s0;
        float         super = 0.0f;
        for (int64_t b = 0; b < nb; b += 4) {
            const float * r0 = ts + 32 * b;
            const float * r1 = b + 1 < nb ? r0 + 32 : zeros;
            const float * r2 = b + 2 < nb ? r0 + 64 : zeros;
            const float * r3 = b + 3 < nb ? r0 + 96 : zeros;
            float         a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            for (int j = 0; j < 32; ++j) {
                a0 = a0 + r0[j];
                a1 = a1 + r1[j];
                a2 = a2 + r2[j];
                a3 = a3 + r3[j];
            }
            super = super + a0;
            if (b + 1 < nb) super = super + a1;
            if (b + 2 < nb) super = super + a2;
            if (b + 3 < nb) super = super + a3;
        }
        if (len % 32 != 0) {
            float part = 0.0f;
            for (int64_t p = 32 * nb; p < len; ++p) part = part + ts[p];
            super = super + part;
        }
        total = total + super;
    }
    return total;
}

}  // namespace
}  // namespace tern::cpu
