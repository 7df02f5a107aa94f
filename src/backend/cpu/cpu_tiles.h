// Weights of the fast CPU backend: low-bit matrices repacked into the tile layout of
// cpu_kernels.h (TernaryTiles), and the aligned, huge-page-backed storage they live in.
#pragma once

#include "backend/backend.h"
#include "backend/cpu/cpu_kernels.h"

#include <cstdint>
#include <memory>
#include <span>

namespace tern {

class ThreadPool;

// A 64-byte aligned array, zero-initialized unless `zero` is false (then its first writer touches
// its pages: a parallel repack spreads the page faults over the threads). No MADV_HUGEPAGE: with
// the kernel's defrag=madvise default it made the first touch of 512 MiB cost 1.3 s of CPU
// against 0.24 s (direct compaction; measured on the 2-core development VM).
class AlignedBytes {
public:
    AlignedBytes() = default;
    explicit AlignedBytes(size_t n, bool zero = true);
    uint8_t *       data() { return ptr_.get(); }
    const uint8_t * data() const { return ptr_.get(); }
    size_t          size() const { return size_; }
    template <class T> T * as() { return reinterpret_cast<T *>(ptr_.get()); }
    template <class T> const T * as() const { return reinterpret_cast<const T *>(ptr_.get()); }

private:
    struct Free {
        void operator()(uint8_t * p) const;
    };
    std::unique_ptr<uint8_t, Free> ptr_;
    size_t                         size_ = 0;
};

// A stacked low-bit linear weight in tiles of 16 rows (rows of all parts, in order).
class CpuTiledLinear : public Weight {
public:
    int64_t      group = 0;
    bool         base3 = false;  // base-3 chunks (cpu_kernels.h) instead of 2-bit ones
    AlignedBytes codes;       // [n_tiles][chunks per tile][64]
    AlignedBytes scales;      // f32 [n_tiles][n_groups][16]
    AlignedBytes out_scales;  // f32 [n_tiles * 16]; empty when every part's output scale is 1
    int64_t      hint_id = -1;  // the loading backend's index of this weight's hints (CpuFastBackend::next_norm_)
    cpu::TernaryTiles view() const;
};

// Repacks the parts (checked with check_linear_parts) over the pool's threads: base-3 tiles with
// base3_kernels' converter where that is set and the values are -1, 0, +1; else 2-bit. I2_S, whose codes are bit fields of a fixed
// layout, is transcoded in 64-bit words; the other types go through lowbit_decode_row. K must be a
// multiple of 16 (every low-bit type's is).
std::unique_ptr<CpuTiledLinear> cpu_pack_tiles(std::span<const WeightSource> parts, ThreadPool & pool,
                                               const cpu::Kernels * base3_kernels = nullptr);

// A stacked Q4_0 or Q8_0 linear weight (all parts of one type) in Q-block tiles (cpu_kernels.h);
// type is the parts' type.
class CpuQTiledLinear : public Weight {
public:
    AlignedBytes     data;  // [n_tiles][K / 32][16 fp16 scales | codes]
    cpu::QBlockTiles view() const;
};

// Whether the parts can be Q-block tiles: all Q4_0 or all Q8_0, K a multiple of 32, no output scales.
bool cpu_qtiles_fit(std::span<const WeightSource> parts);
// Repacks them over the pool's threads (cpu_qtiles.cpp).
std::unique_ptr<CpuQTiledLinear> cpu_pack_qtiles(std::span<const WeightSource> parts, ThreadPool & pool);

// A stacked Q1_0 linear weight of a family model (WeightSource::q8_0_acts) in binary tiles.
class CpuBinaryTiledLinear : public Weight {
public:
    int64_t           group = 0;
    AlignedBytes      codes;       // [n_tiles][K / 32][64]
    AlignedBytes      scales;      // f32 [n_tiles][n_groups][16]
    AlignedBytes      out_scales;  // f32 [n_tiles * 16]; empty when every part's output scale is 1
    cpu::BinaryTiles  view() const;
};
// Whether the parts can be binary tiles: all Q1_0, multiplied with Q8_0 blocks (q8_0_acts).
bool cpu_binary_tiles_fit(std::span<const WeightSource> parts);
std::unique_ptr<CpuBinaryTiledLinear> cpu_pack_binary_tiles(std::span<const WeightSource> parts, ThreadPool & pool);

// The values of row r, columns [0, K), of a tiled weight (for tests): the inverse of the packing.
void cpu_tiles_unpack_row(const cpu::TernaryTiles & w, int64_t r, int8_t * values);

}  // namespace tern
