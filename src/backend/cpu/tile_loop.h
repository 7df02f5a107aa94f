// The tile GEMMs' loop order, shared by every SIMD kernel file (no intrinsics: each file's kernels
// are the callable it is given; internal linkage, so each file keeps its own copy under its flags).
#pragma once

#include <cstdint>

namespace tern::cpu {
namespace {

// The remainder pass of for_tiles_and_tokens: f<rem>(tile, t) for 0 < rem < MaxNT.
template <int MaxNT, int NT = MaxNT - 1, class TileFn>
inline void remainder_pass(TileFn & f, int64_t tile, int64_t t, int64_t rem) {
    if constexpr (NT >= 1) {
        if (rem == NT) return f.template operator()<NT>(tile, t);
        remainder_pass<MaxNT, NT - 1>(f, tile, t, rem);
    }
}

// A tile GEMM's loop order: token blocks of 64 (activations stay in L2 while the tiles stream),
// every tile of [tile0, tile1) per block, MaxNT tokens per pass over a tile (f<MaxNT>(tile, t)),
// then the block's remaining tokens in one pass.
template <int MaxNT, class TileFn>
inline void for_tiles_and_tokens(int64_t n_tokens, int64_t tile0, int64_t tile1, TileFn && f) {
    constexpr int64_t k_block = 64;
    for (int64_t tb = 0; tb < n_tokens; tb += k_block) {
        const int64_t te = tb + k_block < n_tokens ? tb + k_block : n_tokens;
        for (int64_t tile = tile0; tile < tile1; ++tile) {
            int64_t t = tb;
            for (; t + MaxNT <= te; t += MaxNT) f.template operator()<MaxNT>(tile, t);
            remainder_pass<MaxNT>(f, tile, t, te - t);
        }
    }
}

}  // namespace
}  // namespace tern::cpu
