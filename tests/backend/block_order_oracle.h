// Issue 52's attention order for the GPU tests, from the CPU reference's row function
// (cpu::attention_row, cpu_ops.h): rows of at most 512 positions in the single-pass softmax, longer
// rows in the block order (blocks of 32 positions, chunks of 2 blocks, superblocks of 8 chunks, the
// row, one 1 / L).
//   k, v: one sequence's contiguous cache rows [pos0 + T][n_head_kv hd] in `cache` (f16 or f32)
//   q: [T][n_head hd] f32, column t at position pos0 + t (its row: pos0 + t + 1 positions)
// Returns [T][n_head hd].
#pragma once

#include "backend/cpu/cpu_ops.h"
#include "core/dtype.h"
#include "quant/block_formats.h"

#include <cstdint>
#include <vector>

namespace tern::test {

inline std::vector<float> attention_columns(const std::vector<uint8_t> & k, const std::vector<uint8_t> & v, DType cache,
                                            const float * q, int64_t n_head, int64_t n_head_kv, int64_t hd,
                                            float scale, int64_t pos0, int64_t T) {
    const int64_t n_q = n_head * hd, n_kv = n_head_kv * hd, n_ctx = pos0 + T;
    std::vector<float> kf(size_t(n_kv * n_ctx)), vf(kf.size()), out(size_t(n_q * T));
    dequantize_row(cache, k.data(), kf.data(), n_kv * n_ctx);
    dequantize_row(cache, v.data(), vf.data(), n_kv * n_ctx);
    const bool f16 = cache == DType::f16;
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t h = 0; h < n_head; ++h) {
            const int64_t kvh = h / (n_head / n_head_kv);
            cpu::attention_row(q + t * n_q + h * hd, kf.data() + kvh * hd, n_kv, vf.data() + kvh * hd, n_kv,
                               pos0 + t + 1, hd, scale, f16, f16, out.data() + t * n_q + h * hd);
        }
    }
    return out;
}

}  // namespace tern::test
