// Issue 52's attention order for the GPU tests: every row of more than 512 positions in the BLOCK
// ORDER (blocks of 32 positions, joined into chunks of 2 blocks, chunks into superblocks of 8, the
// superblocks into the row, one 1 / L), rows of at most 512 positions as the CPU reference has
// always taken them (its output is passed in). A scalar copy of the specification (cpu_ops.h's
// block functions are the reference; this header calls them once they are on main).
//   k, v: one sequence's contiguous cache rows [n_ctx][n_kv] in `cache` (f16 or f32)
//   q: [T][n_q] f32, column t at position pos0 + t (its row: pos0 + t + 1 positions)
#pragma once

#include "backend/cpu/cpu_ops.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "quant/block_formats.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

namespace tern::test {

struct BlockPart {
    float              m = -FLT_MAX, l = 0;
    std::vector<float> o;
};

// Parts joined in order: M = max m_i; a_i = exp_fixed(m_i - M); L = ((0 + a_0 l_0) + ...);
// O[d] = ((0 + a_0 o_0[d]) + ...) (each product rounded once: -ffp-contract=off).
inline BlockPart join_parts(const std::vector<BlockPart> & parts) {
    BlockPart r;
    r.m = parts[0].m;
    for (const BlockPart & x : parts) r.m = std::max(r.m, x.m);
    r.o.assign(parts[0].o.size(), 0.0f);
    for (const BlockPart & x : parts) {
        const float a = cpu::exp_fixed(x.m - r.m);
        r.l           = r.l + a * x.l;
        for (size_t d = 0; d < r.o.size(); ++d) r.o[d] = r.o[d] + a * x.o[d];
    }
    return r;
}

// One query head over n positions (n > 512) in the block order: q (hd, f32), k / v rows f32 (the
// cache's values) `stride` apart; f16: the cache is f16 (q and the probabilities rounded to f16).
inline void block_order_head(const float * q, const float * k, const float * v, int64_t stride, int64_t n, int64_t hd,
                             float scale, bool f16, float * out) {
    std::vector<float> qh(q, q + hd);
    if (f16) {
        for (float & x : qh) x = round_to_fp16(x);
    }
    std::vector<BlockPart> supers, chunks, blocks;
    std::vector<float>     s(32);
    for (int64_t b0 = 0; b0 < n; b0 += 32) {
        const int64_t len = std::min<int64_t>(32, n - b0);
        BlockPart     bp;
        for (int64_t i = 0; i < len; ++i) {
            s[size_t(i)] = cpu::dot_blocked16(qh.data(), k + (b0 + i) * stride, hd) * scale;
            bp.m         = std::max(bp.m, s[size_t(i)]);
        }
        bp.o.assign(size_t(hd), 0.0f);
        for (int64_t i = 0; i < len; ++i) {
            const float e  = cpu::exp_fixed(s[size_t(i)] - bp.m);
            const float pe = f16 ? round_to_fp16(e) : e;
            bp.l           = bp.l + e;
            for (int64_t d = 0; d < hd; ++d) bp.o[size_t(d)] = bp.o[size_t(d)] + pe * v[(b0 + i) * stride + d];
        }
        blocks.push_back(std::move(bp));
        const bool last = b0 + 32 >= n;
        if (blocks.size() == 2 || last) {
            chunks.push_back(join_parts(blocks));
            blocks.clear();
        }
        if (chunks.size() == 8 || (last && !chunks.empty())) {
            supers.push_back(join_parts(chunks));
            chunks.clear();
        }
    }
    const BlockPart row = join_parts(supers);
    const float     r   = 1.0f / row.l;
    for (int64_t d = 0; d < hd; ++d) out[d] = row.o[size_t(d)] * r;
}

// The T columns' outputs ([T][n_q]) of one sequence: rows of more than 512 positions in the block
// order, the others copied from `short_rows` (the CPU reference's output of the same columns).
inline std::vector<float> block_order_columns(const std::vector<uint8_t> & k, const std::vector<uint8_t> & v, DType cache,
                                              const float * q, int64_t n_head, int64_t n_head_kv, int64_t hd,
                                              float scale, int64_t pos0, int64_t T,
                                              const std::vector<float> & short_rows) {
    const int64_t n_q = n_head * hd, n_kv = n_head_kv * hd, n_ctx = pos0 + T;
    std::vector<float> kf(size_t(n_kv * n_ctx)), vf(kf.size());
    dequantize_row(cache, k.data(), kf.data(), n_kv * n_ctx);
    dequantize_row(cache, v.data(), vf.data(), n_kv * n_ctx);
    std::vector<float> out = short_rows;
    for (int64_t t = 0; t < T; ++t) {
        const int64_t n = pos0 + t + 1;
        if (n <= 512) continue;
        for (int64_t h = 0; h < n_head; ++h) {
            const int64_t kvh = h / (n_head / n_head_kv);
            block_order_head(q + t * n_q + h * hd, kf.data() + kvh * hd, vf.data() + kvh * hd, n_kv, n, hd, scale,
                             cache == DType::f16, out.data() + t * n_q + h * hd);
        }
    }
    return out;
}

}  // namespace tern::test
