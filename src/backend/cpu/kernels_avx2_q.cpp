// AVX2 kernels of the families' Q8_0-block products: Q4_0 / Q8_0 Q-block tiles, Q1_0 binary tiles
// and Q1_0 / Q2_0 2-bit tiles against ggml's Q8_0 activation blocks (cpu_kernels.h). Each 8-row half of a tile in
// the lanes (vpmaddubsw into int16, exact below 2^15 as bounded at each use, then vpmaddwd into
// one int32 lane per row); each row's float sum follows the reference's block order. The AVX-VNNI
// set uses these too.
#include "backend/cpu/simd_avx2.h"

namespace tern::cpu {
namespace {

using namespace avx2;

inline __m256i maddubs(__m256i u8, const int8_t * q) { return _mm256_maddubs_epi16(u8, bcast4(q)); }
inline __m256i to_i32(__m256i i16) { return _mm256_madd_epi16(i16, _mm256_set1_epi16(1)); }

// Rows r_begin .. r_begin + 7 of tokens t0 .. t0 + NT - 1 (out[t]), times the per-row output scales
// when there are any, written (or added, with accumulate) to y; rows at or past n_rows are left out.
template <int NT>
inline void store_half_tokens(const __m256 (&out)[NT], const float * out_scales, int64_t n_rows, int64_t r_begin,
                              int64_t t0, float * y, int64_t ldy, int64_t row0, bool accumulate) {
    const int64_t n_valid = n_rows - r_begin;
    if (n_valid <= 0) return;
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
        __m256  v   = out_scales ? _mm256_mul_ps(out[t], _mm256_loadu_ps(out_scales + r_begin)) : out[t];
        float * dst = y + (t0 + t) * ldy + (r_begin - row0);
        if (accumulate) v = _mm256_add_ps(load_tail(dst, n_valid), v);
        store_tail(dst, n_valid, v);
    }
}

// Rows 8h .. 8h + 7 of one Q-block tile against tokens t0 .. t0 + NT - 1.
template <int NT, bool Q8>
void qtile_half_tokens(const QBlockTiles & w, int64_t tile, int h, const Q8BlockActs & a, int64_t t0, float * y,
                       int64_t ldy, int64_t row0, bool accumulate) {
    const int64_t   nb   = w.k / 32;
    const int64_t   bb   = w.block_bytes();
    const uint8_t * data = w.data + tile * w.tile_bytes();
    const __m256i   m4   = _mm256_set1_epi8(0x0F);
    __m256          out[NT];
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t * blk = data + b * bb;
        const __m256    dw  = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(blk + 16 * h)));
        __m256i         dot[NT];
        if constexpr (!Q8) {
            // 8 products of nibbles (<= 15) and int8 pairs: |sum| <= 8 * 2 * 15 * 128 = 30720 in int16.
            __m256i s16[NT];
            #pragma GCC unroll 8
            for (int t = 0; t < NT; ++t) s16[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int c = 0; c < 4; ++c) {
                const __m256i v  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk + 32 + c * 64 + 32 * h));
                const __m256i lo = _mm256_and_si256(v, m4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                #pragma GCC unroll 8
                for (int t = 0; t < NT; ++t) {
                    const int8_t * q = a.q + (t0 + t) * a.ld + b * 32;
                    s16[t] = _mm256_add_epi16(s16[t], _mm256_add_epi16(maddubs(lo, q + 4 * c), maddubs(hi, q + 16 + 4 * c)));
                }
            }
            #pragma GCC unroll 8
            for (int t = 0; t < NT; ++t) dot[t] = to_i32(s16[t]);
        } else {
            // code = 16 hi + lo: each nibble's 8 products summed in int16 (<= 30720), then 16 hi + lo in int32.
            __m256i lo16[NT], hi16[NT];
            #pragma GCC unroll 8
            for (int t = 0; t < NT; ++t) lo16[t] = hi16[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int c = 0; c < 8; ++c) {
                const __m256i v  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk + 32 + c * 64 + 32 * h));
                const __m256i lo = _mm256_and_si256(v, m4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                #pragma GCC unroll 8
                for (int t = 0; t < NT; ++t) {
                    const int8_t * q = a.q + (t0 + t) * a.ld + b * 32 + 4 * c;
                    lo16[t]          = _mm256_add_epi16(lo16[t], maddubs(lo, q));
                    hi16[t]          = _mm256_add_epi16(hi16[t], maddubs(hi, q));
                }
            }
            #pragma GCC unroll 8
            for (int t = 0; t < NT; ++t) dot[t] = _mm256_add_epi32(to_i32(lo16[t]), _mm256_slli_epi32(to_i32(hi16[t]), 4));
        }
        #pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) {
            const int64_t tb   = (t0 + t) * nb + b;
            const __m256i sumi = _mm256_sub_epi32(dot[t], _mm256_set1_epi32((Q8 ? 128 : 8) * a.bsum[tb]));
            const __m256  f    = _mm256_cvtepi32_ps(sumi);
            const __m256  da   = _mm256_set1_ps(a.d[tb]);
            const __m256  term = Q8 ? _mm256_mul_ps(f, _mm256_mul_ps(dw, da)) : _mm256_mul_ps(_mm256_mul_ps(f, dw), da);
            out[t]             = _mm256_add_ps(out[t], term);
        }
    }
    store_half_tokens<NT>(out, nullptr, w.n_rows, tile * 16 + 8 * h, t0, y, ldy, row0, accumulate);
}

void qblock_gemm(const QBlockTiles & w, int64_t tile0, int64_t tile1, const Q8BlockActs & a, float * y, int64_t ldy,
                 int64_t row0, bool accumulate) {
    for_tiles_and_tokens<4>(a.n_tokens, tile0, tile1, [&]<int NT>(int64_t tile, int64_t t) {
        for (int h = 0; h < 2; ++h) {
            if (w.q8) {
                qtile_half_tokens<NT, true>(w, tile, h, a, t, y, ldy, row0, accumulate);
            } else {
                qtile_half_tokens<NT, false>(w, tile, h, a, t, y, ldy, row0, accumulate);
            }
        }
    });
}

// Rows 8h .. 8h + 7 of one 2-bit ternary tile against tokens t0 .. t0 + NT - 1, Q8_0-block activations.
template <int NT>
void lowbit_half_tokens(const TernaryTiles & w, int64_t tile, int h, const Q8BlockActs & a, int64_t t0, float * y,
                        int64_t ldy, int64_t row0, bool accumulate) {
    const int64_t   nb       = w.k / 32;
    const int64_t   n_groups = w.n_groups();
    const int64_t   bpg      = w.group / 32;
    const uint8_t * codes    = w.codes + tile * (w.k / k_tile_cols) * k_tile_chunk + 32 * h;
    const float *   scales   = w.scales + tile * n_groups * k_tile_rows + 8 * h;
    const __m256i   three    = _mm256_set1_epi8(3);
    __m256          out[NT];
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = _mm256_setzero_ps();
    for (int64_t g = 0; g < n_groups; ++g) {
        __m256 s[NT];
        #pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) s[t] = _mm256_setzero_ps();
        for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
            // 8 products of codes (<= 3) and int8 pairs: |sum| <= 8 * 2 * 3 * 128 = 6144 in int16.
            __m256i s16[NT];
            #pragma GCC unroll 8
            for (int t = 0; t < NT; ++t) s16[t] = _mm256_setzero_si256();
            for (int64_t c = 2 * b; c < 2 * b + 2; ++c) {
                const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(codes + c * k_tile_chunk));
                const __m256i w0    = _mm256_and_si256(bytes, three);
                const __m256i w1    = _mm256_and_si256(_mm256_srli_epi16(bytes, 2), three);
                const __m256i w2    = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), three);
                const __m256i w3    = _mm256_and_si256(_mm256_srli_epi16(bytes, 6), three);
                #pragma GCC unroll 8
                for (int t = 0; t < NT; ++t) {
                    const int8_t * q = a.q + (t0 + t) * a.ld + c * k_tile_cols;
                    s16[t] = _mm256_add_epi16(s16[t], _mm256_add_epi16(_mm256_add_epi16(maddubs(w0, q), maddubs(w1, q + 4)),
                                                                       _mm256_add_epi16(maddubs(w2, q + 8), maddubs(w3, q + 12))));
                }
            }
            #pragma GCC unroll 8
            for (int t = 0; t < NT; ++t) {
                const int64_t tb   = (t0 + t) * nb + b;
                const __m256i sumi = _mm256_sub_epi32(to_i32(s16[t]), _mm256_set1_epi32(a.bsum[tb]));  // codes are value + 1
                s[t] = _mm256_add_ps(s[t], _mm256_mul_ps(_mm256_set1_ps(a.d[tb]), _mm256_cvtepi32_ps(sumi)));
            }
        }
        const __m256 sg = _mm256_loadu_ps(scales + g * k_tile_rows);
        #pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) out[t] = _mm256_add_ps(out[t], _mm256_mul_ps(sg, s[t]));
    }
    store_half_tokens<NT>(out, w.out_scales, w.n_rows, tile * k_tile_rows + 8 * h, t0, y, ldy, row0, accumulate);
}

void lowbit_q8_gemm(const TernaryTiles & w, int64_t tile0, int64_t tile1, const Q8BlockActs & a, float * y, int64_t ldy,
                    int64_t row0, bool accumulate) {
    for_tiles_and_tokens<4>(a.n_tokens, tile0, tile1, [&]<int NT>(int64_t tile, int64_t t) {
        for (int h = 0; h < 2; ++h) lowbit_half_tokens<NT>(w, tile, h, a, t, y, ldy, row0, accumulate);
    });
}

// Rows 8h .. 8h + 7 of one binary tile against tokens t0 .. t0 + NT - 1, Q8_0-block activations.
template <int NT>
void binary_half_tokens(const BinaryTiles & w, int64_t tile, int h, const Q8BlockActs & a, int64_t t0, float * y,
                        int64_t ldy, int64_t row0, bool accumulate) {
    const int64_t   nb       = w.k / 32;
    const int64_t   n_groups = w.n_groups();
    const int64_t   bpg      = w.group / 32;
    const uint8_t * codes    = w.codes + tile * w.tile_bytes() + 32 * h;
    const float *   scales   = w.scales + tile * n_groups * 16 + 8 * h;
    const __m256i   one      = _mm256_set1_epi8(1);
    __m256          out[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = _mm256_setzero_ps();
    for (int64_t g = 0; g < n_groups; ++g) {
        __m256 s[NT];
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) s[t] = _mm256_setzero_ps();
        for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
            const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(codes + b * 64));
            // 8 products of bits and int8 pairs: |sum| <= 8 * 2 * 128 = 2048 in int16.
            __m256i s16[NT];
#pragma GCC unroll 8
            for (int t = 0; t < NT; ++t) s16[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int sh = 0; sh < 8; ++sh) {
                const __m256i bits = _mm256_and_si256(_mm256_srli_epi16(bytes, sh), one);
#pragma GCC unroll 8
                for (int t = 0; t < NT; ++t) s16[t] = _mm256_add_epi16(s16[t], maddubs(bits, a.q + (t0 + t) * a.ld + b * 32 + 4 * sh));
            }
#pragma GCC unroll 8
            for (int t = 0; t < NT; ++t) {
                const int64_t tb   = (t0 + t) * nb + b;
                const __m256i dot  = to_i32(s16[t]);
                const __m256i sumi = _mm256_sub_epi32(_mm256_add_epi32(dot, dot), _mm256_set1_epi32(a.bsum[tb]));
                s[t] = _mm256_add_ps(s[t], _mm256_mul_ps(_mm256_set1_ps(a.d[tb]), _mm256_cvtepi32_ps(sumi)));
            }
        }
        const __m256 sg = _mm256_loadu_ps(scales + g * 16);
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) out[t] = _mm256_add_ps(out[t], _mm256_mul_ps(sg, s[t]));
    }
    store_half_tokens<NT>(out, w.out_scales, w.n_rows, tile * 16 + 8 * h, t0, y, ldy, row0, accumulate);
}

void binary_q8_gemm(const BinaryTiles & w, int64_t tile0, int64_t tile1, const Q8BlockActs & a, float * y, int64_t ldy,
                    int64_t row0, bool accumulate) {
    for_tiles_and_tokens<4>(a.n_tokens, tile0, tile1, [&]<int NT>(int64_t tile, int64_t t) {
        for (int h = 0; h < 2; ++h) binary_half_tokens<NT>(w, tile, h, a, t, y, ldy, row0, accumulate);
    });
}

}  // namespace

void add_qblock_avx2(Kernels & set) {
    set.qblock_gemm    = qblock_gemm;
    set.lowbit_q8_gemm = lowbit_q8_gemm;
    set.binary_q8_gemm = binary_q8_gemm;
}

}  // namespace tern::cpu
