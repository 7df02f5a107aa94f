// The AVX2 set's ternary products and int8 head with AVX-VNNI (the VEX-encoded vpdpbusd of Intel's
// client cores since Alder Lake and of AMD's Zen 5; compiled with the AVX2 flags plus -mavxvnni,
// chosen at run time where the CPU has it: kernels_avx2() then returns kernels_avx2_vnni()).
// One vpdpbusd takes 4 codes x 4 activation bytes per lane where plain AVX2 needs vpmaddubsw,
// vpaddw and vpmaddwd; the results are the plain set's bit for bit (integer sums are exact, the
// epilogue is the same float operations in the same order).
#include "backend/cpu/simd_avx2.h"

namespace tern::cpu {
namespace {

using namespace avx2;

// acc + vpdpbusd(u8, s8) in place (as simd_avx512.h's dpbusd: around the intrinsic GCC 12 copies
// the accumulators of unrolled loops every iteration).
inline __m256i dpbusd(__m256i acc, __m256i u8, __m256i s8) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u8), "x"(s8));  // (%{ %}: a literal brace in GCC asm)
    return acc;
}

// One tile (16 rows: half h = rows 8h .. 8h + 7, the chunk's bytes 32h .. 32h + 31) against NT
// tokens. One token: the codes masked in place (code x 4^s, one accumulator per shift s, shifted
// back once per group; exact: |acc| <= 4 * 192 * 128 per chunk, under 2^31 for groups below 2^14
// chunks). More tokens: the codes shifted and masked once per half, every token's activations
// broadcast against them (16 ymm registers: one half at a time).
template <int NT>
void tile_tokens(const TernaryTiles & w, int64_t tile, const ActView & a, int64_t t0, float * y, int64_t ldy,
                 int64_t row0, bool accumulate) {
    const int64_t   n_groups     = w.n_groups();
    const int64_t   chunks_per_g = w.group / k_tile_cols;
    const uint8_t * codes        = w.codes + tile * (w.k / k_tile_cols) * k_tile_chunk;
    const float *   scales       = w.scales + tile * n_groups * k_tile_rows;
    const __m256i   three        = _mm256_set1_epi8(3);
    const int8_t *  q[NT];
    for (int t = 0; t < NT; ++t) q[t] = a.q + (t0 + t) * a.ld;
    __m256 out[NT][2];
    for (int t = 0; t < NT; ++t) out[t][0] = out[t][1] = _mm256_setzero_ps();
    const StreamAhead ahead;  // one token: page and line requests (tile_loop.h)
    for (int64_t g = 0; g < n_groups; ++g) {
        __m256i dot[NT][2];
        const int64_t c0 = g * chunks_per_g, c1 = c0 + chunks_per_g;
        if constexpr (NT == 1) {
            __m256i acc[2][4];
            for (int h = 0; h < 2; ++h) {
                for (int s = 0; s < 4; ++s) acc[h][s] = _mm256_setzero_si256();
            }
            for (int64_t c = c0; c < c1; ++c) {
                ahead.at<k_tile_chunk>(codes + c * k_tile_chunk);
                const int64_t col = c * k_tile_cols;
                const __m256i b0  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(codes + c * k_tile_chunk));
                const __m256i b1  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(codes + c * k_tile_chunk + 32));
#pragma GCC unroll 4
                for (int s = 0; s < 4; ++s) {
                    const __m256i m  = _mm256_set1_epi8(static_cast<char>(3 << (2 * s)));
                    const __m256i qs = bcast4(q[0] + col + 4 * s);
                    acc[0][s]        = dpbusd(acc[0][s], _mm256_and_si256(b0, m), qs);
                    acc[1][s]        = dpbusd(acc[1][s], _mm256_and_si256(b1, m), qs);
                }
            }
            for (int h = 0; h < 2; ++h) {
                dot[0][h] = _mm256_add_epi32(_mm256_add_epi32(acc[h][0], _mm256_srai_epi32(acc[h][1], 2)),
                                             _mm256_add_epi32(_mm256_srai_epi32(acc[h][2], 4), _mm256_srai_epi32(acc[h][3], 6)));
            }
        } else {
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
                __m256i acc[NT];
                for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_si256();
                for (int64_t c = c0; c < c1; ++c) {
                    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(codes + c * k_tile_chunk + 32 * h));
                    const __m256i w0    = _mm256_and_si256(bytes, three);
                    const __m256i w1    = _mm256_and_si256(_mm256_srli_epi16(bytes, 2), three);
                    const __m256i w2    = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), three);
                    const __m256i w3    = _mm256_and_si256(_mm256_srli_epi16(bytes, 6), three);
                    const int64_t col   = c * k_tile_cols;
#pragma GCC unroll 8
                    for (int t = 0; t < NT; ++t) {
                        acc[t] = dpbusd(acc[t], w0, bcast4(q[t] + col));
                        acc[t] = dpbusd(acc[t], w1, bcast4(q[t] + col + 4));
                        acc[t] = dpbusd(acc[t], w2, bcast4(q[t] + col + 8));
                        acc[t] = dpbusd(acc[t], w3, bcast4(q[t] + col + 12));
                    }
                }
                for (int t = 0; t < NT; ++t) dot[t][h] = acc[t];
            }
        }
        for (int h = 0; h < 2; ++h) {
            const __m256 sg = _mm256_loadu_ps(scales + g * k_tile_rows + 8 * h);
            for (int t = 0; t < NT; ++t) {
                const __m256 term = group_term(dot[t][h], a.group_sums[(t0 + t) * n_groups + g], a.scale[t0 + t], sg);
                out[t][h]         = n_groups == 1 ? term : _mm256_add_ps(out[t][h], term);
            }
        }
    }
    store_tile<NT>(w, tile, out, t0, y, ldy, row0, accumulate);
}

}  // namespace

// 8 tokens per pass over a tile (for_tiles_and_tokens: token blocks of 64, then every tile).
void ternary_gemm_avx2_vnni(const TernaryTiles & w, int64_t tile0, int64_t tile1, const ActView & a, float * y,
                            int64_t ldy, int64_t row0, bool accumulate) {
    Toucher touch(a, tile0, tile1);  // one token: the layer's K/V where the caller names them (tile_loop.h)
    for_tiles_and_tokens<8>(a.n_tokens, tile0, tile1, [&]<int NT>(int64_t tile, int64_t t) {
        touch.at_tile();
        tile_tokens<NT>(w, tile, a, t, y, ldy, row0, accumulate);
    });
}

// The int8 head (cpu_kernels.h: i8_rows_dot_i16): sum q H = 256 (sum q hi - 128 q_sum) + sum q lo,
// both sums with vpdpbusd (H's bytes unsigned, q signed), one row at a time.
void i8_rows_dot_i16_avx2_vnni(const int8_t * q, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const uint8_t * hi,
                               const uint8_t * lo, const int32_t * q_sums, int64_t * dots) {
    const int64_t     k64 = k & ~int64_t{63};
    const StreamAhead ahead;  // page and line requests (tile_loop.h)
    for (int64_t r = r0; r < r1; ++r) {
        const int8_t * row = q + r * row_stride;
        __m256i        a0 = _mm256_setzero_si256(), a1 = a0, b0 = a0, b1 = a0;
        int64_t        i  = 0;
        for (; i < k64; i += 64) {
            ahead.at<64>(row + i);
            const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(row + i));
            const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(row + i + 32));
            a0 = dpbusd(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(hi + i)), q0);
            b0 = dpbusd(b0, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(lo + i)), q0);
            a1 = dpbusd(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(hi + i + 32)), q1);
            b1 = dpbusd(b1, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(lo + i + 32)), q1);
        }
        alignas(32) int32_t la[8], lb[8];
        _mm256_store_si256(reinterpret_cast<__m256i *>(la), _mm256_add_epi32(a0, a1));
        _mm256_store_si256(reinterpret_cast<__m256i *>(lb), _mm256_add_epi32(b0, b1));
        int64_t sa = 0, sb = 0;
        for (int j = 0; j < 8; ++j) {
            sa += la[j];
            sb += lb[j];
        }
        for (; i < k; ++i) {  // the tail (k not a multiple of 64)
            sa += static_cast<int64_t>(row[i]) * hi[i];
            sb += static_cast<int64_t>(row[i]) * lo[i];
        }
        dots[r - r0] = 256 * (sa - 128 * static_cast<int64_t>(q_sums[r])) + sb;
    }
}

}  // namespace tern::cpu
