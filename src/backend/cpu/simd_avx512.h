// Vector helpers shared by the AVX-512 kernel files (included only by files compiled with the
// AVX-512 flags; everything here has internal linkage, so no copy can leak into other files).
#pragma once

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/tile_loop.h"

#include <immintrin.h>

namespace tern::cpu::avx512 {
namespace {

// 4 bytes at p broadcast to every 32-bit lane (the activation operand of vpdpbusd).
inline __m512i bcast4(const int8_t * p) {
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

// acc + vpdpbusd(u8, s8), accumulated in place. GCC 12 treats the intrinsic's accumulator as an
// input it must keep, and in unrolled loops over several accumulators it copies every one of them
// each iteration (two vmovdqa per vpdpbusd: the front end, not the multiplier, then bounds the
// many-token kernels); the asm ties the accumulator to the output register.
inline __m512i dpbusd(__m512i acc, __m512i u8, __m512i s8) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "v"(s8));
    return acc;
}

// acc + vpdpbusd(u8, the 4 bytes at p + Off broadcast to every lane), the broadcast embedded in the
// instruction ({1to16}): one instruction where bcast4 + dpbusd take two, which matters in loops that
// stream weights (fewer instructions per byte keep more loads in the reorder window). The address is a
// register plus a constant, not an "m" operand: GCC cannot tell that int8 bytes do not alias the
// callers' __m512i accumulators (a may_alias type) and would store every accumulator before each use.
// So the asm does not declare its read: use it only where p's bytes are not written in the function.
template <int Off>
inline __m512i dpbusd_b(__m512i acc, __m512i u8, const int8_t * p) {
    __asm__("vpdpbusd %c3(%2)%{1to16%}, %1, %0" : "+v"(acc) : "v"(u8), "r"(p), "i"(Off));
    return acc;
}

// Lanes [0, rem) of 16 (all for rem >= 16, none for rem <= 0).
inline __mmask16 tail_mask(int64_t rem) {
    return rem >= 16 ? static_cast<__mmask16>(0xFFFF) : rem <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << rem) - 1u);
}
inline __mmask8 tail_mask8(int64_t rem) {
    return rem >= 8 ? static_cast<__mmask8>(0xFF) : rem <= 0 ? static_cast<__mmask8>(0) : static_cast<__mmask8>((1u << rem) - 1u);
}

// 16 floats at p, of which rem are inside the array (all when rem >= 16): plain loads and stores for
// whole vectors (masked ones cost more on AMD's cores), masked ones for the tail.
inline __m512 load16(const float * p, int64_t rem) { return rem >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(tail_mask(rem), p); }
inline void   store16(float * p, int64_t rem, __m512 v) {
    if (rem >= 16) {
        _mm512_storeu_ps(p, v);
    } else {
        _mm512_mask_storeu_ps(p, tail_mask(rem), v);
    }
}

// One scale group's term of a ternary tile's 16 rows for one token: (the int8 dot - the token's group
// sum, which undoes the codes' +1 offset) / the token's activation scale * the rows' group scales,
// in the reference's order.
inline __m512 group_term(__m512i dot_sum, int32_t group_sum, float a_scale, __m512 sg) {
    const __m512i dot = _mm512_sub_epi32(dot_sum, _mm512_set1_epi32(group_sum));
    return _mm512_mul_ps(_mm512_div_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(a_scale)), sg);
}

inline __m512 abs_ps(__m512 v) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff))); }

// The halving sum of 16 lanes: lanes i < h get lane i + h added, h = 8, 4, 2, 1.
inline float halving16(__m512 t) {
    __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(t), _mm512_extractf32x8_ps(t, 1));
    __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    __m128 h1 = _mm_add_ss(h2, _mm_movehdup_ps(h2));
    return _mm_cvtss_f32(h1);
}

// One block of the norm's squares: x[0 .. min(rem, 32)) squared (the rest zero) in the halving order.
inline float block_squares(const float * x, int64_t rem) {
    const __m512 a = _mm512_maskz_loadu_ps(tail_mask(rem), x);
    const __m512 b = _mm512_maskz_loadu_ps(tail_mask(rem - 16), x + 16);
    return halving16(_mm512_add_ps(_mm512_mul_ps(a, a), _mm512_mul_ps(b, b)));
}

// cpu::exp_fixed on 16 lanes: the same f32 operations, then the special cases in the reference's
// order of precedence (NaN, x > 88.8, n < -125) blended in reverse.
inline __m512 exp_fixed(__m512 x) {
    const __m512  n  = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269502f)),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512  r1 = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(0.693359375f)));
    const __m512  r  = _mm512_add_ps(r1, _mm512_mul_ps(n, _mm512_set1_ps(2.12194440e-4f)));
    const __m512  z  = _mm512_mul_ps(r, r);
    const __m512  a  = _mm512_add_ps(_mm512_set1_ps(5.0000001201e-1f), _mm512_mul_ps(_mm512_set1_ps(1.6666665459e-1f), r));
    const __m512  b  = _mm512_add_ps(_mm512_set1_ps(4.1665795894e-2f), _mm512_mul_ps(_mm512_set1_ps(8.3334519073e-3f), r));
    const __m512  c  = _mm512_add_ps(_mm512_set1_ps(1.3981999507e-3f), _mm512_mul_ps(_mm512_set1_ps(1.9875691500e-4f), r));
    const __m512  q  = _mm512_add_ps(a, _mm512_mul_ps(_mm512_add_ps(b, _mm512_mul_ps(c, z)), z));
    const __m512  y  = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(q, z), r), _mm512_set1_ps(1.0f));
    const __m512i ni = _mm512_cvtps_epi32(n);
    const __m512i e  = _mm512_slli_epi32(_mm512_add_epi32(_mm512_min_epi32(ni, _mm512_set1_epi32(127)), _mm512_set1_epi32(127)), 23);
    __m512        v  = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
    v = _mm512_mask_mul_ps(v, _mm512_cmpeq_epi32_mask(ni, _mm512_set1_epi32(128)), v, _mm512_set1_ps(2.0f));
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(n, _mm512_set1_ps(-125.0f), _CMP_LT_OQ), _mm512_setzero_ps());
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.8f), _CMP_GT_OQ), _mm512_set1_ps(__builtin_inff()));
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
    return v;
}

// Software prefetch in the one-token kernels that stream weights from DRAM (ternary tiles, int8 and
// Q6_K heads; StreamAhead in tile_loop.h, shared with the AVX2 kernels): one prefetcht0 per 4 KiB page
// (cpu::page_ahead) everywhere, one prefetcht1 per 64-byte line
// (cpu::line_ahead) on Intel CPUs only: on the Zen 5 VM per-line prefetches lost (a prefetcht1 16 KiB
// ahead cost 7-21% of a token at 1 thread, docs/perf-log.md), on session 18's Xeon they won (cpu
// README, "A line ahead").

// f16 -> f32 of 16 halves.
inline __m512 load_f16(const uint16_t * p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p))); }
inline __m512 round_f16(__m512 v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }

}  // namespace
}  // namespace tern::cpu::avx512
