// Repacking for the families' Q8_0-block products (layouts: cpu_kernels.h): Q4_0 / Q8_0 into Q-block
// tiles (the file's bytes regrouped so 16 rows sit side by side) and Q1_0 into binary tiles (1 bit per
// weight, as in the file).
#include "backend/cpu/cpu_tiles.h"

#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/ternary_formats.h"

#include <cstring>
#include <vector>

namespace tern {

cpu::QBlockTiles CpuQTiledLinear::view() const {
    cpu::QBlockTiles v;
    v.data   = data.data();
    v.k      = n_cols;
    v.n_rows = n_rows;
    v.q8     = type == DType::q8_0;
    return v;
}

bool cpu_qtiles_fit(std::span<const WeightSource> parts) {
    if (parts.empty()) return false;
    const DType type = parts[0].type;
    if (type != DType::q4_0 && type != DType::q8_0) return false;
    for (const WeightSource & p : parts) {
        if (p.type != type || p.output_scale != 1.0f || p.ne[0] != parts[0].ne[0] || p.ne[0] % 32 != 0) return false;
    }
    return true;
}

std::unique_ptr<CpuQTiledLinear> cpu_pack_qtiles(std::span<const WeightSource> parts, ThreadPool & pool) {
    TERN_ASSERT(cpu_qtiles_fit(parts), "Q-block tiles of unsuitable parts");
    int64_t n = 0;
    for (const WeightSource & p : parts) {
        const size_t want = static_cast<size_t>(p.ne[1] * (p.ne[0] / 32) * (p.type == DType::q8_0 ? 34 : 18));
        if (p.ne[2] * p.ne[3] != 1 || p.data.size() < want) {
            fail(ErrorKind::invalid_model, format("tensor '%s': %zu bytes for a %lld x %lld %s matrix (%zu expected)", p.name.c_str(),
                                                  p.data.size(), static_cast<long long>(p.ne[0]), static_cast<long long>(p.ne[1]),
                                                  std::string(dtype_name(p.type)).c_str(), want));
        }
        n += p.ne[1];
    }
    const int64_t k    = parts[0].ne[0];
    auto          w    = std::make_unique<CpuQTiledLinear>();
    w->type            = parts[0].type;
    w->n_rows          = n;
    w->n_cols          = k;
    const cpu::QBlockTiles shape = w->view();
    const bool    q8        = shape.q8;
    const int64_t n_blocks  = k / 32;
    const int64_t src_block = q8 ? 34 : 18;                // the file's block
    const int64_t blk_bytes = shape.block_bytes();         // the tile's block: 16 scales, then the chunks
    const int64_t n_tiles   = shape.n_tiles();
    w->data = AlignedBytes(static_cast<size_t>(n_tiles * shape.tile_bytes()), /*zero=*/false);  // every byte written
    std::vector<int64_t> part_start;
    int64_t              row0 = 0;
    for (const auto & p : parts) {
        part_start.push_back(row0);
        row0 += p.ne[1];
    }
    uint8_t * out = w->data.data();
    pool.parallel_for(n_tiles, 1, [&](int64_t t0, int64_t t1, int) {
        size_t pi = 0;
        for (int64_t tile = t0; tile < t1; ++tile) {
            uint8_t * dst_tile = out + tile * shape.tile_bytes();
            for (int64_t rt = 0; rt < 16; ++rt) {
                const int64_t   r   = tile * 16 + rt;
                const uint8_t * row = nullptr;
                if (r < n) {
                    while (pi + 1 < parts.size() && r >= part_start[pi + 1]) ++pi;
                    while (r < part_start[pi]) --pi;
                    row = parts[pi].data.data() + (r - part_start[pi]) * n_blocks * src_block;
                }
                for (int64_t b = 0; b < n_blocks; ++b) {
                    uint8_t *       dst = dst_tile + b * blk_bytes;
                    const uint8_t * src = row ? row + b * src_block : nullptr;
                    if (!src) {  // padding row: d = 0, codes 0
                        std::memset(dst + 2 * rt, 0, 2);
                        for (int64_t c = 0; c < (q8 ? 8 : 4); ++c) std::memset(dst + 32 + c * 64 + 4 * rt, 0, 4);
                        continue;
                    }
                    std::memcpy(dst + 2 * rt, src, 2);
                    if (!q8) {
                        for (int64_t c = 0; c < 4; ++c) std::memcpy(dst + 32 + c * 64 + 4 * rt, src + 2 + 4 * c, 4);
                    } else {
                        for (int64_t c = 0; c < 8; ++c) {
                            for (int64_t m = 0; m < 4; ++m) dst[32 + c * 64 + 4 * rt + m] = src[2 + 4 * c + m] ^ 0x80;
                        }
                    }
                }
            }
        }
    });
    w->n_bytes = w->data.size();
    return w;
}

}  // namespace tern

namespace tern {

cpu::BinaryTiles CpuBinaryTiledLinear::view() const {
    cpu::BinaryTiles v;
    v.codes      = codes.data();
    v.scales     = scales.as<float>();
    v.out_scales = out_scales.size() ? out_scales.as<float>() : nullptr;
    v.k          = n_cols;
    v.n_rows     = n_rows;
    v.group      = group;
    return v;
}

bool cpu_binary_tiles_fit(std::span<const WeightSource> parts) {
    if (parts.empty()) return false;
    for (const WeightSource & p : parts) {
        if (p.type != DType::q1_0 || !p.q8_0_acts || p.ne[0] != parts[0].ne[0] || p.ne[0] % 32 != 0) return false;
    }
    return true;
}

std::unique_ptr<CpuBinaryTiledLinear> cpu_pack_binary_tiles(std::span<const WeightSource> parts, ThreadPool & pool) {
    TERN_ASSERT(cpu_binary_tiles_fit(parts), "binary tiles of unsuitable parts");
    const int64_t n = check_linear_parts(parts);
    const int64_t k = parts[0].ne[0];
    auto          w = std::make_unique<CpuBinaryTiledLinear>();
    w->type         = DType::q1_0;
    w->n_rows       = n;
    w->n_cols       = k;
    w->group        = lowbit_scale_group(DType::q1_0, k);
    const cpu::BinaryTiles shape    = w->view();
    const int64_t          n_groups = k / w->group;
    const int64_t          n_tiles  = shape.n_tiles();
    w->codes  = AlignedBytes(static_cast<size_t>(n_tiles * shape.tile_bytes()));
    w->scales = AlignedBytes(static_cast<size_t>(n_tiles * n_groups * 16) * sizeof(float));
    bool all_one = true;
    for (const auto & p : parts) all_one = all_one && p.output_scale == 1.0f;
    if (!all_one) w->out_scales = AlignedBytes(static_cast<size_t>(n_tiles * 16) * sizeof(float));
    std::vector<int64_t> part_start;
    int64_t              row0 = 0;
    for (const auto & p : parts) {
        part_start.push_back(row0);
        row0 += p.ne[1];
    }
    uint8_t * codes  = w->codes.data();
    float *   scales = w->scales.as<float>();
    float *   os     = w->out_scales.size() ? w->out_scales.as<float>() : nullptr;
    pool.parallel_for(n, 16, [&](int64_t r0, int64_t r1, int) {  // whole tiles per thread (grain 16)
        std::vector<int8_t> values(static_cast<size_t>(k));
        std::vector<float>  row_scales(static_cast<size_t>(n_groups));
        size_t              pi = 0;
        for (int64_t r = r0; r < r1; ++r) {
            while (pi + 1 < parts.size() && r >= part_start[pi + 1]) ++pi;
            const WeightSource & p = parts[pi];
            lowbit_decode_row(DType::q1_0, p.data, p.n_elements(), r - part_start[pi], k, values.data(), row_scales.data());
            uint8_t * tile = codes + (r / 16) * shape.tile_bytes();
            for (int64_t c = 0; c < k / 32; ++c) {
                for (int m = 0; m < 4; ++m) {
                    uint8_t b = 0;
                    for (int s = 0; s < 8; ++s) b |= static_cast<uint8_t>((values[c * 32 + 4 * s + m] > 0 ? 1 : 0) << s);
                    tile[c * 64 + 4 * (r % 16) + m] = b;
                }
            }
            for (int64_t g = 0; g < n_groups; ++g) scales[((r / 16) * n_groups + g) * 16 + r % 16] = row_scales[static_cast<size_t>(g)];
            if (os) os[r] = p.output_scale;
        }
    });
    w->n_bytes = w->codes.size() + w->scales.size() + w->out_scales.size();
    return w;
}

}  // namespace tern
