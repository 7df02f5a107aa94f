// NEON kernels of the families' Q8_0-block products (cpu_kernels.h): Q4_0 / Q8_0 Q-block tiles,
// Q1_0 binary tiles and Q1_0 / Q2_0 / PQ2_0 2-bit tiles against ggml's Q8_0 activation blocks, the
// algorithms of kernels_avx2_q.cpp on 4-lane vectors. A tile's 16 rows are 4 vectors of 4 rows; a
// 64-byte chunk's bytes 16j .. 16j + 15 are rows 4j .. 4j + 3, and sdot by lane takes each row's 4
// bytes against 4 activation bytes of one lane of a loaded vector. The integer sums are exact (sdot
// sums into int32: |sum| <= 32 * 128 * 128 per block), so every row's float sum is the reference's,
// in its block order.
#include "backend/cpu/simd_neon.h"
#include "backend/cpu/tile_loop.h"

namespace tern::cpu {
namespace {

using namespace neon;

// Sets a tile's accumulators (NT tokens x 16 rows, as out[t][j]: rows 4j .. 4j + 3) to zero.
template <int NT>
inline void zero_rows(float32x4_t (&v)[NT][4]) {
    for (int t = 0; t < NT; ++t) {
        for (int j = 0; j < 4; ++j) v[t][j] = vdupq_n_f32(0.0f);
    }
}

// Rows 16 tile .. + 15 of tokens t0 .. t0 + NT - 1 (out[t][j]: rows 4j .. 4j + 3), times the per-row
// output scales when there are any, written (or added, with accumulate) to y; rows at or past
// n_rows are left out.
template <int NT>
inline void store_tile_tokens(const float32x4_t (&out)[NT][4], const float * out_scales, int64_t n_rows, int64_t tile,
                              int64_t t0, float * y, int64_t ldy, int64_t row0, bool accumulate) {
    const int64_t r_begin = tile * 16;
    const int64_t n_valid = n_rows - r_begin;
    for (int j = 0; j < 4 && 4 * j < n_valid; ++j) {
        for (int t = 0; t < NT; ++t) {
            float32x4_t v   = out_scales ? vmulq_f32(out[t][j], vld1q_f32(out_scales + r_begin + 4 * j)) : out[t][j];
            float *     dst = y + (t0 + t) * ldy + (r_begin - row0) + 4 * j;
            if (accumulate) v = vaddq_f32(load_tail(dst, n_valid - 4 * j), v);
            store_tail(dst, n_valid - 4 * j, v);
        }
    }
}

// One Q-block tile against tokens t0 .. t0 + NT - 1. Q4_0 chunk c: low nibbles are columns 4c + m,
// high nibbles 16 + 4c + m, as unsigned codes (sum (code - 8) q = sum code q - 8 bsum); Q8_0 chunk c:
// columns 4c + m as q + 128 (flipping the top bit gives q back for sdot).
template <int NT, bool Q8>
void qtile_tokens(const QBlockTiles & w, int64_t tile, const Q8BlockActs & a, int64_t t0, float * y, int64_t ldy,
                  int64_t row0, bool accumulate) {
    const int64_t    nb   = w.k / 32;
    const int64_t    bb   = w.block_bytes();
    const uint8_t *  data = w.data + tile * w.tile_bytes();
    const uint8x16_t m4 = vdupq_n_u8(0x0F), top = vdupq_n_u8(0x80);
    float32x4_t      out[NT][4];
    zero_rows<NT>(out);
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t * blk = data + b * bb;
        int8x16_t       act[NT][2];
        for (int t = 0; t < NT; ++t) {
            act[t][0] = vld1q_s8(a.q + (t0 + t) * a.ld + b * 32);
            act[t][1] = vld1q_s8(a.q + (t0 + t) * a.ld + b * 32 + 16);
        }
        int32x4_t acc[NT][4];
        for (int t = 0; t < NT; ++t) {
            for (int j = 0; j < 4; ++j) acc[t][j] = vdupq_n_s32(0);
        }
#pragma GCC unroll 8
        for (int c = 0; c < (Q8 ? 8 : 4); ++c) {
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                const uint8x16_t v = vld1q_u8(blk + 32 + c * 64 + 16 * j);
                if constexpr (Q8) {
                    const int8x16_t q = vreinterpretq_s8_u8(veorq_u8(v, top));
#pragma GCC unroll 4
                    for (int t = 0; t < NT; ++t) {
                        // columns 4c .. 4c + 3: lane c % 4 of the block's first or second 16 bytes
                        switch (c) {
                            case 0: acc[t][j] = vdotq_laneq_s32(acc[t][j], q, act[t][0], 0); break;
                            case 1: acc[t][j] = vdotq_laneq_s32(acc[t][j], q, act[t][0], 1); break;
                            case 2: acc[t][j] = vdotq_laneq_s32(acc[t][j], q, act[t][0], 2); break;
                            case 3: acc[t][j] = vdotq_laneq_s32(acc[t][j], q, act[t][0], 3); break;
                            case 4: acc[t][j] = vdotq_laneq_s32(acc[t][j], q, act[t][1], 0); break;
                            case 5: acc[t][j] = vdotq_laneq_s32(acc[t][j], q, act[t][1], 1); break;
                            case 6: acc[t][j] = vdotq_laneq_s32(acc[t][j], q, act[t][1], 2); break;
                            default: acc[t][j] = vdotq_laneq_s32(acc[t][j], q, act[t][1], 3); break;
                        }
                    }
                } else {
                    const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(v, m4));
                    const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
#pragma GCC unroll 4
                    for (int t = 0; t < NT; ++t) {
                        switch (c) {  // low nibbles: lane c of the first 16 bytes; high: lane c of the second
                            case 0:
                                acc[t][j] = vdotq_laneq_s32(vdotq_laneq_s32(acc[t][j], lo, act[t][0], 0), hi, act[t][1], 0);
                                break;
                            case 1:
                                acc[t][j] = vdotq_laneq_s32(vdotq_laneq_s32(acc[t][j], lo, act[t][0], 1), hi, act[t][1], 1);
                                break;
                            case 2:
                                acc[t][j] = vdotq_laneq_s32(vdotq_laneq_s32(acc[t][j], lo, act[t][0], 2), hi, act[t][1], 2);
                                break;
                            default:
                                acc[t][j] = vdotq_laneq_s32(vdotq_laneq_s32(acc[t][j], lo, act[t][0], 3), hi, act[t][1], 3);
                                break;
                        }
                    }
                }
            }
        }
        for (int j = 0; j < 4; ++j) {
            const float32x4_t dw = load_f16(reinterpret_cast<const uint16_t *>(blk) + 4 * j);
            for (int t = 0; t < NT; ++t) {
                const int64_t     tb   = (t0 + t) * nb + b;
                const int32x4_t   sumi = Q8 ? acc[t][j] : vsubq_s32(acc[t][j], vdupq_n_s32(8 * a.bsum[tb]));
                const float32x4_t f    = vcvtq_f32_s32(sumi);
                const float32x4_t da   = vdupq_n_f32(a.d[tb]);
                // ggml's orders: Q8_0 (float)sumi * (d_w * d_a), Q4_0 ((float)sumi * d_w) * d_a
                const float32x4_t term = Q8 ? vmulq_f32(f, vmulq_f32(dw, da)) : vmulq_f32(vmulq_f32(f, dw), da);
                out[t][j]              = vaddq_f32(out[t][j], term);
            }
        }
    }
    store_tile_tokens<NT>(out, nullptr, w.n_rows, tile, t0, y, ldy, row0, accumulate);
}

void qblock_gemm(const QBlockTiles & w, int64_t tile0, int64_t tile1, const Q8BlockActs & a, float * y, int64_t ldy,
                 int64_t row0, bool accumulate) {
    for_tiles_and_tokens<2>(a.n_tokens, tile0, tile1, [&]<int NT>(int64_t tile, int64_t t) {
        if (w.q8) {
            qtile_tokens<NT, true>(w, tile, a, t, y, ldy, row0, accumulate);
        } else {
            qtile_tokens<NT, false>(w, tile, a, t, y, ldy, row0, accumulate);
        }
    });
}

// The per-group epilogue of the low-bit products: per block s += d_a * (float)sumi, per group
// out += scale * s (cpu::dot_lowbit_q8_0's order).
template <int NT>
inline void add_block(float32x4_t (&s)[NT][4], const int32x4_t (&sumi)[NT][4], const Q8BlockActs & a, int64_t t0,
                      int64_t nb, int64_t b) {
    for (int t = 0; t < NT; ++t) {
        const float32x4_t da = vdupq_n_f32(a.d[(t0 + t) * nb + b]);
        for (int j = 0; j < 4; ++j) s[t][j] = vaddq_f32(s[t][j], vmulq_f32(da, vcvtq_f32_s32(sumi[t][j])));
    }
}

// The group loop the low-bit tiles share: per group, per block b of 32 columns, block_sums(b, acc)
// gives the block's integer sums (acc[t][j]: token t, rows 4j .. 4j + 3) and add_block folds them
// in; then out += scale * s per group, and the tile's rows are stored.
template <int NT, class BlockSums>
void lowbit_groups(int64_t n_groups, int64_t bpg, int64_t nb, const float * scales, const float * out_scales,
                   int64_t n_rows, int64_t tile, const Q8BlockActs & a, int64_t t0, float * y, int64_t ldy, int64_t row0,
                   bool accumulate, BlockSums && block_sums) {
    float32x4_t out[NT][4];
    zero_rows<NT>(out);
    for (int64_t g = 0; g < n_groups; ++g) {
        float32x4_t s[NT][4];
        zero_rows<NT>(s);
        for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
            int32x4_t acc[NT][4];
            block_sums(b, acc);
            add_block<NT>(s, acc, a, t0, nb, b);
        }
        for (int j = 0; j < 4; ++j) {
            const float32x4_t sg = vld1q_f32(scales + g * k_tile_rows + 4 * j);
            for (int t = 0; t < NT; ++t) out[t][j] = vaddq_f32(out[t][j], vmulq_f32(sg, s[t][j]));
        }
    }
    store_tile_tokens<NT>(out, out_scales, n_rows, tile, t0, y, ldy, row0, accumulate);
}

// One 2-bit ternary tile against tokens t0 .. t0 + NT - 1, Q8_0-block activations: chunk c holds
// columns 16c + 4s + m in bits 2s + 1 .. 2s of byte 4r + m (codes value + 1: sum code q - bsum).
template <int NT>
void lowbit_tokens(const TernaryTiles & w, int64_t tile, const Q8BlockActs & a, int64_t t0, float * y, int64_t ldy,
                   int64_t row0, bool accumulate) {
    const int64_t    nb       = w.k / 32;
    const int64_t    n_groups = w.n_groups();
    const int64_t    bpg      = w.group / 32;
    const uint8_t *  codes    = w.codes + tile * (w.k / k_tile_cols) * k_tile_chunk;
    const float *    scales   = w.scales + tile * n_groups * k_tile_rows;
    lowbit_groups<NT>(n_groups, bpg, nb, scales, w.out_scales, w.n_rows, tile, a, t0, y, ldy, row0, accumulate,
                      [&](int64_t b, int32x4_t (&acc)[NT][4]) {
        for (int t = 0; t < NT; ++t) {
            for (int j = 0; j < 4; ++j) acc[t][j] = vdupq_n_s32(-a.bsum[(t0 + t) * nb + b]);
        }
        for (int64_t c = 2 * b; c < 2 * b + 2; ++c) {
            int8x16_t act[NT];
            for (int t = 0; t < NT; ++t) act[t] = vld1q_s8(a.q + (t0 + t) * a.ld + c * k_tile_cols);
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                dot_codes2<NT>(acc, j, vld1q_u8(codes + c * k_tile_chunk + 16 * j), act);
            }
        }
    });
}

void lowbit_q8_gemm(const TernaryTiles & w, int64_t tile0, int64_t tile1, const Q8BlockActs & a, float * y, int64_t ldy,
                    int64_t row0, bool accumulate) {
    for_tiles_and_tokens<2>(a.n_tokens, tile0, tile1, [&]<int NT>(int64_t tile, int64_t t) {
        lowbit_tokens<NT>(w, tile, a, t, y, ldy, row0, accumulate);
    });
}

// One binary tile against tokens t0 .. t0 + NT - 1: bit s of byte 4r + m of chunk b is column
// 32b + 4s + m (lane s % 4 of the block's first or second 16 activation bytes); a block's sum is
// 2 sum(bit q) - bsum.
template <int NT>
void binary_tokens(const BinaryTiles & w, int64_t tile, const Q8BlockActs & a, int64_t t0, float * y, int64_t ldy,
                   int64_t row0, bool accumulate) {
    const int64_t    nb       = w.k / 32;
    const int64_t    n_groups = w.n_groups();
    const int64_t    bpg      = w.group / 32;
    const uint8_t *  codes    = w.codes + tile * w.tile_bytes();
    const float *    scales   = w.scales + tile * n_groups * 16;
    const uint8x16_t one      = vdupq_n_u8(1);
    lowbit_groups<NT>(n_groups, bpg, nb, scales, w.out_scales, w.n_rows, tile, a, t0, y, ldy, row0, accumulate,
                      [&](int64_t b, int32x4_t (&acc)[NT][4]) {
        int8x16_t act[NT][2];
        for (int t = 0; t < NT; ++t) {
            act[t][0] = vld1q_s8(a.q + (t0 + t) * a.ld + b * 32);
            act[t][1] = vld1q_s8(a.q + (t0 + t) * a.ld + b * 32 + 16);
        }
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            const uint8x16_t bytes = vld1q_u8(codes + b * 64 + 16 * j);
            const int8x16_t  b0 = vreinterpretq_s8_u8(vandq_u8(bytes, one));
            const int8x16_t  b1 = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(bytes, 1), one));
            const int8x16_t  b2 = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(bytes, 2), one));
            const int8x16_t  b3 = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(bytes, 3), one));
            const int8x16_t  b4 = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(bytes, 4), one));
            const int8x16_t  b5 = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(bytes, 5), one));
            const int8x16_t  b6 = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(bytes, 6), one));
            const int8x16_t  b7 = vreinterpretq_s8_u8(vshrq_n_u8(bytes, 7));
            for (int t = 0; t < NT; ++t) {
                int32x4_t d = vdupq_n_s32(0);
                d = vdotq_laneq_s32(d, b0, act[t][0], 0);
                d = vdotq_laneq_s32(d, b1, act[t][0], 1);
                d = vdotq_laneq_s32(d, b2, act[t][0], 2);
                d = vdotq_laneq_s32(d, b3, act[t][0], 3);
                d = vdotq_laneq_s32(d, b4, act[t][1], 0);
                d = vdotq_laneq_s32(d, b5, act[t][1], 1);
                d = vdotq_laneq_s32(d, b6, act[t][1], 2);
                d = vdotq_laneq_s32(d, b7, act[t][1], 3);
                acc[t][j] = vsubq_s32(vaddq_s32(d, d), vdupq_n_s32(a.bsum[(t0 + t) * nb + b]));
            }
        }
    });
}

void binary_q8_gemm(const BinaryTiles & w, int64_t tile0, int64_t tile1, const Q8BlockActs & a, float * y, int64_t ldy,
                    int64_t row0, bool accumulate) {
    for_tiles_and_tokens<2>(a.n_tokens, tile0, tile1, [&]<int NT>(int64_t tile, int64_t t) {
        binary_tokens<NT>(w, tile, a, t, y, ldy, row0, accumulate);
    });
}

}  // namespace

void add_qblock_neon(Kernels & set) {
    set.qblock_gemm    = qblock_gemm;
    set.lowbit_q8_gemm = lowbit_q8_gemm;
    set.binary_q8_gemm = binary_q8_gemm;
}

}  // namespace tern::cpu
