// Repacking of Q4_0 / Q8_0 linear weights into the fast backend's Q-block tiles (layout:
// cpu_kernels.h, QBlockTiles): the same bytes as the file, regrouped so 16 rows sit side by side.
#include "backend/cpu/cpu_tiles.h"

#include "core/error.h"
#include "core/thread_pool.h"

#include <cstring>

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
