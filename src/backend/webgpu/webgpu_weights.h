// Host-side repacking of file weights into the WebGPU backend's layouts (done once at load; the
// result is uploaded as one storage buffer per weight). Pure functions, tested on their own.
//
// Ternary / low-bit linear weights (I2_S, TQ2_0, TQ1_0, Q2_0, PQ2_0, Q1_0 all become this), one u32
// array per weight, parts ({q, k, v} or {gate, up}) stacked along the rows:
//
//   [ codes: N rows x K/16 words ][ group scales: N x n_groups f32 ][ output scales: N f32 ]
//
//   code word w of row r holds elements 16w .. 16w+15 as 2-bit codes (value + 1), interleaved so
//   that (word >> 2s) & 0x03030303 puts elements 16w+4s .. 16w+4s+3 in bytes 0..3:
//
//       bit  31..30 29..28 27..26 25..24 | 23..16            | 15..8            | 7..6 5..4 3..2 1..0
//            e15    e11    e7     e3     | e14 e10 e6 e2     | e13 e9 e5 e1     | e12  e8   e4   e0
//
//   group scales: the scale of each group of `group` elements (K for I2_S, whose one per-tensor
//   scale is repeated per row so the epilogue is (dot / act) * scale as in bitnet.cpp; 256 for
//   TQ1_0/TQ2_0, 64 for Q2_0, 128 for PQ2_0/Q1_0) — exactly the CPU backend's CpuLinear scales.
//   output scales: the mainline `bitnet` `.scale` multiplier per row (1 otherwise).
#pragma once

#include "backend/backend.h"

#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <span>
#include <vector>

namespace tern {

// An allocator whose resize() leaves new elements uninitialised: a linear layout's every word is
// written by its row (codes, group scales, output scale), so zeroing it first only costs time
// (2B4T: ~600 MB of codes, 0.6 s of the browser's single-threaded load).
template <class T>
struct UninitialisedAllocator : std::allocator<T> {
    using value_type = T;
    template <class U> struct rebind { using other = UninitialisedAllocator<U>; };
    UninitialisedAllocator() = default;
    template <class U> UninitialisedAllocator(const UninitialisedAllocator<U> &) noexcept {}
    template <class U> void construct(U * p) noexcept { ::new (static_cast<void *>(p)) U; }
    template <class U, class... Args> void construct(U * p, Args &&... args) {
        ::new (static_cast<void *>(p)) U(std::forward<Args>(args)...);
    }
};

struct GpuLinearLayout {
    int64_t n_rows   = 0;  // N, all parts
    int64_t n_cols   = 0;  // K, a multiple of 16
    int64_t group    = 0;  // elements per scale group
    int64_t n_groups = 0;  // K / group
    DType   type     = DType::i2_s;
    size_t  scales_offset  = 0;  // u32 index of the group scales
    size_t  oscales_offset = 0;  // u32 index of the output scales
    std::vector<uint32_t, UninitialisedAllocator<uint32_t>> words;  // every word written by gpu_pack_linear
};

// Throws Error(unsupported / invalid_model) naming the tensor, like cpu_pack_linear.
GpuLinearLayout gpu_pack_linear(std::span<const WeightSource> parts);

// Element c of row r of a packed layout (value in -1..+2), for tests.
int gpu_linear_value(const GpuLinearLayout & w, int64_t r, int64_t c);

// Embedding / LM-head table: f16 kept as-is (two per u32), f32 kept, any other type dequantized to
// f32 row by row with the same code the CPU backend uses. Padded to whole u32 words.
struct GpuTableLayout {
    bool                  f16 = false;
    std::vector<uint32_t> words;
};
GpuTableLayout gpu_pack_table(const WeightSource & src);

// Norm weight as f32 (dequantized from f32/f16/bf16).
std::vector<float> gpu_pack_norm(const WeightSource & src);

}  // namespace tern
