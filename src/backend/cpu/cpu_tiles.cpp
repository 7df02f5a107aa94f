// Repacking of low-bit weights into the fast backend's tiles (layout: cpu_kernels.h).
#include "backend/cpu/cpu_tiles.h"

#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/ternary_formats.h"

#include <cstdlib>
#include <cstring>
#include <vector>


namespace tern {

void AlignedBytes::Free::operator()(uint8_t * p) const { std::free(p); }

AlignedBytes::AlignedBytes(size_t n, bool zero) : size_(n) {
    if (n == 0) return;
    const size_t bytes = (n + 63) / 64 * 64;
    auto *       p     = static_cast<uint8_t *>(std::aligned_alloc(64, bytes));
    if (p == nullptr) fail(ErrorKind::io, format("out of memory allocating %zu bytes for CPU weights", bytes));
    if (zero) std::memset(p, 0, bytes);
    ptr_.reset(p);
}

cpu::TernaryTiles CpuTiledLinear::view() const {
    cpu::TernaryTiles v;
    v.base3      = base3;
    v.codes      = codes.data();
    v.scales     = scales.as<float>();
    v.out_scales = out_scales.size() ? out_scales.as<float>() : nullptr;
    v.k          = n_cols;
    v.n_rows     = n_rows;
    v.group      = group;
    return v;
}

namespace {

using cpu::k_tile_chunk;
using cpu::k_tile_cols;
using cpu::k_tile_rows;

// Row `r` of an I2_S tensor (K columns) into its tile slot: for each chunk of 16 columns the 16
// codes (I2_S byte p holds columns p, p + 32, p + 64, p + 96 of its 128-column block in bits 7-6,
// 5-4, 3-2, 1-0; code 3 reads as 0, tern code 1) as 4 bytes of the tile chunk.
void transcode_i2s_row(const uint8_t * row, int64_t k, uint8_t * tile_codes, int64_t r_in_tile) {
    constexpr uint64_t k_low2 = 0x0303030303030303ull, k_bit0 = 0x0101010101010101ull;
    for (int64_t c = 0; c < k / k_tile_cols; ++c) {
        const int64_t   col0  = c * k_tile_cols;
        const uint8_t * block = row + (col0 / 128) * 32;
        const int       field = static_cast<int>((col0 % 128) / 32);  // which 32-column quarter
        const int       p0    = static_cast<int>(col0 % 32);
        uint64_t        lo, hi;
        std::memcpy(&lo, block + p0, 8);
        std::memcpy(&hi, block + p0 + 8, 8);
        const int shift = 6 - 2 * field;
        lo              = (lo >> shift) & k_low2;
        hi              = (hi >> shift) & k_low2;
        lo &= ~((lo & k_bit0) << 1);  // code 3 -> 1 (value 0)
        hi &= ~((hi & k_bit0) << 1);
        // byte i of (lo, hi) = code of column col0 + i; output byte m = codes of columns m, 4 + m,
        // 8 + m, 12 + m in bits 1-0, 3-2, 5-4, 7-6.
        const uint32_t w = static_cast<uint32_t>(lo) | static_cast<uint32_t>(lo >> 32) << 2 |
                           static_cast<uint32_t>(hi) << 4 | static_cast<uint32_t>(hi >> 32) << 6;
        std::memcpy(tile_codes + c * k_tile_chunk + 4 * r_in_tile, &w, 4);
    }
}

// Values (-1..+2) of one row into its tile slot.
void pack_values_row(const int8_t * values, int64_t k, uint8_t * tile_codes, int64_t r_in_tile) {
    for (int64_t c = 0; c < k / k_tile_cols; ++c) {
        uint8_t * out = tile_codes + c * k_tile_chunk + 4 * r_in_tile;
        for (int m = 0; m < 4; ++m) {
            uint8_t b = 0;
            for (int s = 0; s < 4; ++s) b |= static_cast<uint8_t>((values[c * k_tile_cols + 4 * s + m] + 1) << (2 * s));
            out[m] = b;
        }
    }
}

}  // namespace

std::unique_ptr<CpuTiledLinear> cpu_pack_tiles(std::span<const WeightSource> parts, ThreadPool & pool,
                                               const cpu::Kernels * base3_kernels) {
    const int64_t n    = check_linear_parts(parts);
    const int64_t k    = parts[0].ne[0];
    const DType   type = parts[0].type;
    if (k % k_tile_cols != 0) {
        fail(ErrorKind::unsupported, format("tensor '%s': %lld columns; the CPU kernels need a multiple of 16",
                                            parts[0].name.c_str(), static_cast<long long>(k)));
    }
    auto w    = std::make_unique<CpuTiledLinear>();
    w->n_rows = n;
    w->type   = type;  // (the linear ops choose BitNet's path by it)
    w->n_cols = k;
    w->group  = lowbit_scale_group(type, k);
    // Base-3 where the kernels read it and the values are -1, 0, +1 (Q2_0 may hold +2).
    w->base3 = base3_kernels != nullptr && base3_kernels->tile_to_base3 != nullptr && type != DType::q2_0 && type != DType::pq2_0;
    const int64_t n_groups = k / w->group;
    const int64_t n_tiles  = (n + k_tile_rows - 1) / k_tile_rows;
    const cpu::TernaryTiles shape = w->view();
    const int64_t two_bit_bytes   = (k / k_tile_cols) * k_tile_chunk;  // one tile in 2-bit chunks
    const int64_t tile_bytes      = shape.tile_bytes();
    w->codes  = AlignedBytes(static_cast<size_t>(n_tiles * tile_bytes), /*zero=*/false);  // every byte written below
    w->scales = AlignedBytes(static_cast<size_t>(n_tiles * n_groups * k_tile_rows) * sizeof(float));
    bool all_one = true;
    for (const auto & p : parts) all_one = all_one && p.output_scale == 1.0f;
    if (!all_one) w->out_scales = AlignedBytes(static_cast<size_t>(n_tiles * k_tile_rows) * sizeof(float));

    // Row r of the stack: its part and the row within it.
    std::vector<int64_t> part_start;
    int64_t              row0 = 0;
    for (const auto & p : parts) {
        part_start.push_back(row0);
        row0 += p.ne[1];
    }
    uint8_t * codes  = w->codes.data();
    float *   scales = w->scales.as<float>();
    float *   os     = w->out_scales.size() ? w->out_scales.as<float>() : nullptr;
    // One tile at a time: its rows in 2-bit chunks (in place, or in the thread's buffer and then
    // converted to base-3). Padding rows: code 1 (value 0); their scales stay 0.
    pool.parallel_for(n_tiles, 1, [&](int64_t t0, int64_t t1, int) {
        std::vector<int8_t>  values(static_cast<size_t>(k));
        std::vector<float>   row_scales(static_cast<size_t>(n_groups));
        const std::vector<int8_t> zeros(static_cast<size_t>(k), 0);
        AlignedBytes         buffer(w->base3 ? static_cast<size_t>(two_bit_bytes) : 0, /*zero=*/false);
        size_t               pi = 0;
        for (int64_t tile = t0; tile < t1; ++tile) {
            uint8_t * dst = w->base3 ? buffer.data() : codes + tile * tile_bytes;
            for (int64_t r = tile * k_tile_rows; r < (tile + 1) * k_tile_rows; ++r) {
                if (r >= n) {
                    pack_values_row(zeros.data(), k, dst, r % k_tile_rows);
                    continue;
                }
                while (pi + 1 < parts.size() && r >= part_start[pi + 1]) ++pi;
                while (r < part_start[pi]) --pi;
                const WeightSource & p  = parts[pi];
                const int64_t        rp = r - part_start[pi];
                if (type == DType::i2_s) {
                    row_scales[0] = i2s_tensor_scale(p.data, p.n_elements());
                    transcode_i2s_row(p.data.data() + rp * (k / 4), k, dst, r % k_tile_rows);
                } else {
                    lowbit_decode_row(type, p.data, p.n_elements(), rp, k, values.data(), row_scales.data());
                    pack_values_row(values.data(), k, dst, r % k_tile_rows);
                }
                for (int64_t g = 0; g < n_groups; ++g) {
                    scales[(tile * n_groups + g) * k_tile_rows + r % k_tile_rows] = row_scales[static_cast<size_t>(g)];
                }
                if (os) os[r] = p.output_scale;
            }
            if (w->base3) base3_kernels->tile_to_base3(dst, k, w->group, codes + tile * tile_bytes);
        }
    });
    w->n_bytes = w->codes.size() + w->scales.size() + w->out_scales.size();
    return w;
}

void cpu_tiles_unpack_row(const cpu::TernaryTiles & w, int64_t r, int8_t * values) {
    const uint8_t * tile = w.codes + (r / k_tile_rows) * w.tile_bytes();
    if (w.base3) {
        const int64_t cpg = w.chunks_per_group();
        for (int64_t g = 0; g < w.n_groups(); ++g) {
            for (int64_t c = 0; c < cpg; ++c) {
                for (int m = 0; m < 4; ++m) {
                    unsigned x = tile[(g * cpg + c) * k_tile_chunk + 4 * (r % k_tile_rows) + m];
                    for (int64_t j = 0; j < 5; ++j) {
                        const int64_t col = c * cpu::k_base3_cols + 4 * j + m;
                        if (col < w.group) values[g * w.group + col] = static_cast<int8_t>(static_cast<int>((x * 3) >> 8) - 1);
                        x = (x * 3) & 255;
                    }
                }
            }
        }
        return;
    }
    for (int64_t c = 0; c < w.k / k_tile_cols; ++c) {
        for (int m = 0; m < 4; ++m) {
            const uint8_t b = tile[c * k_tile_chunk + 4 * (r % k_tile_rows) + m];
            for (int s = 0; s < 4; ++s) values[c * k_tile_cols + 4 * s + m] = static_cast<int8_t>(((b >> (2 * s)) & 3) - 1);
        }
    }
}

}  // namespace tern
