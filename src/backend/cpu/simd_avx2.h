// Vector helpers shared by the AVX2 kernel files (included only by files compiled with the AVX2
// flags; everything here has internal linkage).
#pragma once

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/tile_loop.h"

#include <immintrin.h>

namespace tern::cpu::avx2 {
namespace {

inline __m256i bcast4(const int8_t * p) {
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// Lanes [0, rem) of 8 as a maskload/maskstore mask.
inline __m256i tail_mask(int64_t rem) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const int     r   = rem >= 8 ? 8 : rem <= 0 ? 0 : static_cast<int>(rem);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(r), idx);
}
inline __m256 load_tail(const float * p, int64_t rem) {
    return rem >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tail_mask(rem));
}
inline void store_tail(float * p, int64_t rem, __m256 v) {
    if (rem >= 8) {
        _mm256_storeu_ps(p, v);
    } else {
        _mm256_maskstore_ps(p, tail_mask(rem), v);
    }
}

// One scale group's term of 8 rows for one token, the reference's operations in its order:
// (dot - group_sum) / a_scale * group_scale.
inline __m256 group_term(__m256i dot_sum, int32_t group_sum, float a_scale, __m256 sg) {
    const __m256i dot = _mm256_sub_epi32(dot_sum, _mm256_set1_epi32(group_sum));
    return _mm256_mul_ps(_mm256_div_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(a_scale)), sg);
}

// A tile's 16 rows (out[t][h]: rows 8h .. 8h + 7 of token t0 + t) times the per-row output scales
// when there are any, written (or added, with accumulate) to y's rows of those tokens; a last
// partial tile writes only its valid rows.
template <int NT>
inline void store_tile(const TernaryTiles & w, int64_t tile, const __m256 (&out)[NT][2], int64_t t0, float * y, int64_t ldy,
                       int64_t row0, bool accumulate) {
    const int64_t r_begin = tile * k_tile_rows;
    const int64_t n_valid = w.n_rows - r_begin < k_tile_rows ? w.n_rows - r_begin : k_tile_rows;
    for (int h = 0; h < 2; ++h) {
        const __m256 os = w.out_scales ? _mm256_loadu_ps(w.out_scales + r_begin + 8 * h) : _mm256_set1_ps(1.0f);
        for (int t = 0; t < NT; ++t) {
            __m256  v   = w.out_scales ? _mm256_mul_ps(out[t][h], os) : out[t][h];
            float * dst = y + (t0 + t) * ldy + (r_begin - row0) + 8 * h;
            if (accumulate) v = _mm256_add_ps(load_tail(dst, n_valid - 8 * h), v);
            store_tail(dst, n_valid - 8 * h, v);
        }
    }
}

inline __m256 abs_ps(__m256 v) { return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }

// The halving sum of 8 lanes: h = 4, 2, 1.
inline float halving8(__m256 t) {
    __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    __m128 h1 = _mm_add_ss(h2, _mm_movehdup_ps(h2));
    return _mm_cvtss_f32(h1);
}

// One block of the norm's squares in the halving order (x[0 .. min(rem, 32)), the rest zero):
// h = 16 adds the upper two vectors onto the lower two, h = 8 the second onto the first.
inline float block_squares(const float * x, int64_t rem) {
    const __m256 a0 = load_tail(x, rem), a1 = load_tail(x + 8, rem - 8);
    const __m256 a2 = load_tail(x + 16, rem - 16), a3 = load_tail(x + 24, rem - 24);
    const __m256 v0 = _mm256_add_ps(_mm256_mul_ps(a0, a0), _mm256_mul_ps(a2, a2));
    const __m256 v1 = _mm256_add_ps(_mm256_mul_ps(a1, a1), _mm256_mul_ps(a3, a3));
    return halving8(_mm256_add_ps(v0, v1));
}

// cpu::exp_fixed on 8 lanes (see simd_avx512.h).
inline __m256 exp_fixed(__m256 x) {
    const __m256  n  = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269502f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256  r1 = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(0.693359375f)));
    const __m256  r  = _mm256_add_ps(r1, _mm256_mul_ps(n, _mm256_set1_ps(2.12194440e-4f)));
    const __m256  z  = _mm256_mul_ps(r, r);
    const __m256  a  = _mm256_add_ps(_mm256_set1_ps(5.0000001201e-1f), _mm256_mul_ps(_mm256_set1_ps(1.6666665459e-1f), r));
    const __m256  b  = _mm256_add_ps(_mm256_set1_ps(4.1665795894e-2f), _mm256_mul_ps(_mm256_set1_ps(8.3334519073e-3f), r));
    const __m256  c  = _mm256_add_ps(_mm256_set1_ps(1.3981999507e-3f), _mm256_mul_ps(_mm256_set1_ps(1.9875691500e-4f), r));
    const __m256  q  = _mm256_add_ps(a, _mm256_mul_ps(_mm256_add_ps(b, _mm256_mul_ps(c, z)), z));
    const __m256  y  = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(q, z), r), _mm256_set1_ps(1.0f));
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i e  = _mm256_slli_epi32(_mm256_add_epi32(_mm256_min_epi32(ni, _mm256_set1_epi32(127)), _mm256_set1_epi32(127)), 23);
    __m256        v  = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    v = _mm256_blendv_ps(v, _mm256_mul_ps(v, _mm256_set1_ps(2.0f)), _mm256_castsi256_ps(_mm256_cmpeq_epi32(ni, _mm256_set1_epi32(128))));
    v = _mm256_blendv_ps(v, _mm256_setzero_ps(), _mm256_cmp_ps(n, _mm256_set1_ps(-125.0f), _CMP_LT_OQ));
    v = _mm256_blendv_ps(v, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, _mm256_set1_ps(88.8f), _CMP_GT_OQ));
    v = _mm256_blendv_ps(v, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    return v;
}

inline __m256 load_f16(const uint16_t * p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))); }
inline __m256 round_f16(__m256 v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }

// In place: r[j] lane i <- r[i] lane j (8 x 8).
inline void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; ++i) {
        t[2 * i]     = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; ++i) {  // u[4i + c], 128-bit lane L: rows 4i .. 4i + 3 of column 4L + c
        u[4 * i]     = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int c = 0; c < 4; ++c) {
        r[c]     = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

}  // namespace
}  // namespace tern::cpu::avx2
