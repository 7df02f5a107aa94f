// The tile GEMMs' loop order, shared by every SIMD kernel file (no intrinsics: each file's kernels
// are the callable it is given; internal linkage, so each file keeps its own copy under its flags).
#pragma once

#include "backend/cpu/cpu_kernels.h"

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

// Issue 51's requests in a one-token weight stream (cpu README, "A page ahead", "A line ahead"),
// shared by the AVX-512 and AVX2 kernels: at<Bytes>(p) before reading [p, p + Bytes) asks, where p is
// within Bytes of a 4 KiB page's start (once per page when the stream steps by Bytes), for the line
// page_ahead bytes ahead (prefetcht0: __builtin_prefetch(p, 0, 3)), and for each of the ceil(Bytes / 64)
// lines line_ahead bytes ahead (prefetcht1, into L2: __builtin_prefetch(p, 0, 2); cpu README, "A line
// ahead", session 20). Prefetches only: no result depends on them. Made once per loop (the globals
// read once, kept in registers). Always inlined: GCC 12 finds a call to at() that it has not inlined
// yet free of side effects and deletes it (every request gone).
struct StreamAhead {
    int64_t page = page_ahead, line = line_ahead;
    template <int Bytes>
    [[gnu::always_inline]] void at(const void * p) const {
        const char * c = static_cast<const char *>(p);
        if (page > 0 && (reinterpret_cast<uintptr_t>(c) & 4095) < Bytes) __builtin_prefetch(c + page, 0, 3);
        if (line > 0) {
            for (int l = 0; l < (Bytes + 63) / 64; ++l) __builtin_prefetch(c + line + 64 * l, 0, 2);
        }
    }
};

// ActView::touch (cpu_kernels.h) in a one-token product: the rows' lines in order (block 0's rows, then
// block 1's), one prefetch into every cache level each (prefetcht0 on x86), spread evenly over the
// range's tiles: at() once per tile. At 64 positions a 2B4T layer's 164 KB of K and V are ~11 lines
// per 5 KB tile (1 per 7 weight lines), at 512 positions ~1 per weight line.
struct Toucher {
    const Touch * t   = nullptr;
    int64_t       row = 0, off = 0, per_tile = 0;
    int           blk = 0;
    Toucher(const ActView & a, int64_t tile0, int64_t tile1) {
        const Touch * touch = a.touch;
        if (touch == nullptr || a.n_tokens != 1 || touch->n_rows <= 0 || touch->row_bytes <= 0 || tile1 <= tile0) return;
        t                   = touch;
        const int64_t lines = 2 * touch->n_rows * ((touch->row_bytes + 63) / 64);
        per_tile            = (lines + (tile1 - tile0) - 1) / (tile1 - tile0);
    }
    void at_tile() {
        if (t == nullptr) return;
        for (int64_t i = 0; i < per_tile; ++i) {
            __builtin_prefetch(t->base[blk] + row * t->stride + off, 0, 3);
            off += 64;
            if (off < t->row_bytes) continue;
            off = 0;
            if (++row < t->n_rows) continue;
            row = 0;
            if (++blk == 2) {
                t = nullptr;
                return;
            }
        }
    }
};

}  // namespace
}  // namespace tern::cpu
