// The base-3 tiles' products on AVX-512 (cpu_kernels.h: 5 codes per byte), shared by
// kernels_avx512.cpp (codes decoded with 16-bit multiplies) and kernels_avx512_vbmi.cpp (codes
// looked up with vpermi2b: on Intel's cores the multiplies and vpdpbusd share one port, so the
// multiply decode, not the bytes, bounds decoding). Templates on the decoder, internal linkage:
// each including file compiles them with its own flags.
#pragma once

#include "backend/cpu/simd_avx512.h"

namespace tern::cpu::avx512 {
namespace {

// The 5 code vectors of a base-3 chunk: code_j = (x_j 3) >> 8, x_(j+1) = x_j 3 mod 256, in 16-bit
// lanes holding the byte in their high half (then the low half of the product stays 0).
struct MulDecode {
    void operator()(__m512i bytes, __m512i codes[5]) const {
        const __m512i z = _mm512_setzero_si512(), three = _mm512_set1_epi16(3);
        __m512i       lo = _mm512_unpacklo_epi8(z, bytes), hi = _mm512_unpackhi_epi8(z, bytes);
        for (int j = 0; j < 5; ++j) {
            codes[j] = _mm512_packus_epi16(_mm512_mulhi_epu16(lo, three), _mm512_mulhi_epu16(hi, three));
            if (j < 4) {
                lo = _mm512_mullo_epi16(lo, three);
                hi = _mm512_mullo_epi16(hi, three);
            }
        }
    }
};

// Base-3 tile against 1 or 2 tokens, decoding each chunk in registers (the decode path: the bytes
// are what limits it). Chunk c of group g holds columns g G + 20c + 4j, j < 5 while 20c + 4j < G.
template <int NT, typename Decode>
inline void tile_tokens_base3(const Decode & decode, const TernaryTiles & w, int64_t tile, const ActView & a, int64_t t0, float * y, int64_t ldy,
                       int64_t row0, bool accumulate) {
    const int64_t   n_groups = w.n_groups(), G = w.group, cpg = w.chunks_per_group();
    const uint8_t * codes    = w.codes + tile * w.tile_bytes();
    const float *   scales   = w.scales + tile * n_groups * k_tile_rows;
    __m512          out[NT];
    for (int t = 0; t < NT; ++t) out[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < n_groups; ++g) {
        __m512i acc[NT][5];
        for (int t = 0; t < NT; ++t) {
            for (int j = 0; j < 5; ++j) acc[t][j] = _mm512_setzero_si512();
        }
        const uint8_t * gc     = codes + g * cpg * k_tile_chunk;
        const int64_t   n_full = G / k_base3_cols;  // chunks with all 5 positions in the group
        for (int64_t c = 0; c < n_full; ++c) {
            __m512i code[5];
            decode(_mm512_load_si512(gc + c * k_tile_chunk), code);
            const int64_t col = g * G + c * k_base3_cols;
            for (int t = 0; t < NT; ++t) {
                const int8_t * q = a.q + (t0 + t) * a.ld + col;
#pragma GCC unroll 5
                for (int j = 0; j < 5; ++j) acc[t][j] = dpbusd(acc[t][j], code[j], bcast4(q + 4 * j));
            }
        }
        if (n_full < cpg) {  // the group's last chunk: (G % 20) / 4 positions
            __m512i code[5];
            decode(_mm512_load_si512(gc + n_full * k_tile_chunk), code);
            const int64_t col = g * G + n_full * k_base3_cols;
            const int     nj  = static_cast<int>((G % k_base3_cols) / 4);
            for (int t = 0; t < NT; ++t) {
                const int8_t * q = a.q + (t0 + t) * a.ld + col;
                __m512i        x = _mm512_setzero_si512();
                for (int j = 0; j < nj; ++j) x = dpbusd(x, code[j], bcast4(q + 4 * j));
                acc[t][0] = _mm512_add_epi32(acc[t][0], x);
            }
        }
        const __m512 sg = _mm512_loadu_ps(scales + g * k_tile_rows);
        for (int t = 0; t < NT; ++t) {
            const __m512i sum  = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(acc[t][0], acc[t][1]),
                                                                   _mm512_add_epi32(acc[t][2], acc[t][3])), acc[t][4]);
            const __m512 term = group_term(sum, a.group_sums[(t0 + t) * n_groups + g], a.scale[t0 + t], sg);
            out[t]             = n_groups == 1 ? term : _mm512_add_ps(out[t], term);
        }
    }
    const int64_t   r_begin = tile * k_tile_rows;
    const int64_t   n_valid = w.n_rows - r_begin < k_tile_rows ? w.n_rows - r_begin : k_tile_rows;
    const __m512    os      = w.out_scales ? _mm512_loadu_ps(w.out_scales + r_begin) : _mm512_set1_ps(1.0f);
    for (int t = 0; t < NT; ++t) {
        __m512  v   = w.out_scales ? _mm512_mul_ps(out[t], os) : out[t];
        float * dst = y + (t0 + t) * ldy + (r_begin - row0);
        if (accumulate) v = _mm512_add_ps(load16(dst, n_valid), v);
        store16(dst, n_valid, v);
    }
}

// A base-3 tile decoded once into code bytes: 64 bytes per 4 columns, in column order (what the
// decode gives per j), for the many-token path.
template <typename Decode>
inline void unpack_base3_tile(const Decode & decode, const TernaryTiles & w, int64_t tile, uint8_t * bytes) {
    const int64_t   n_groups = w.n_groups(), G = w.group, cpg = w.chunks_per_group();
    const uint8_t * codes    = w.codes + tile * w.tile_bytes();
    for (int64_t g = 0; g < n_groups; ++g) {
        for (int64_t c = 0; c < cpg; ++c) {
            __m512i code[5];
            decode(_mm512_load_si512(codes + (g * cpg + c) * k_tile_chunk), code);
            const int64_t col = g * G + c * k_base3_cols;
            for (int j = 0; j < 5 && c * k_base3_cols + 4 * j < G; ++j) _mm512_store_si512(bytes + (col / 4 + j) * 64, code[j]);
        }
    }
}

// The activations of up to 64 tokens regrouped as [k / 4][64 tokens][4 bytes], so the 4 bytes of
// every token for one 4-column block lie together (the many-token base-3 path broadcasts them at
// fixed offsets from one pointer, instead of keeping 16 token pointers in registers).
inline void regroup_acts(const ActView & a, int64_t t0, int64_t nt, int64_t k, int32_t * out) {
    for (int64_t t = 0; t < nt; ++t) {
        const int8_t * q = a.q + (t0 + t) * a.ld;
        for (int64_t c4 = 0; c4 < k / 4; ++c4) {
            int32_t v;
            __builtin_memcpy(&v, q + 4 * c4, 4);
            out[c4 * 64 + t] = v;
        }
    }
}

// Code bytes (unpack_base3_tile) of one tile against NT tokens whose regrouped activations start at
// acts (regroup_acts, t0 = its first token): one 64-byte load per 4 columns feeds NT vpdpbusd. The
// per-token outputs live in memory between groups, so the NT accumulators keep the registers.
template <int NT>
inline void bytes_tokens(const TernaryTiles & w, int64_t tile, const uint8_t * bytes, const int32_t * acts, const ActView & a,
                         int64_t t0, float * y, int64_t ldy, int64_t row0, bool accumulate) {
    const int64_t n_groups = w.n_groups(), G = w.group;
    const float * scales   = w.scales + tile * n_groups * k_tile_rows;
    alignas(64) float out[NT][16];
    for (int64_t g = 0; g < n_groups; ++g) {
        __m512i acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_si512();
        const uint8_t * wp = bytes + g * G / 4 * 64;
        const int32_t * ac = acts + g * G / 4 * 64;
        for (int64_t n = G / 4; n > 0; --n, wp += 64, ac += 64) {
            const __m512i wv = _mm512_load_si512(wp);
#pragma GCC unroll 16
            for (int t = 0; t < NT; ++t) acc[t] = dpbusd(acc[t], wv, _mm512_set1_epi32(ac[t]));
        }
        const __m512 sg = _mm512_loadu_ps(scales + g * k_tile_rows);
        for (int t = 0; t < NT; ++t) {
            const __m512 term = group_term(acc[t], a.group_sums[(t0 + t) * n_groups + g], a.scale[t0 + t], sg);
            _mm512_store_ps(out[t], g == 0 ? (n_groups == 1 ? term : _mm512_add_ps(_mm512_setzero_ps(), term))
                                           : _mm512_add_ps(_mm512_load_ps(out[t]), term));
        }
    }
    const int64_t   r_begin = tile * k_tile_rows;
    const int64_t   n_valid = w.n_rows - r_begin < k_tile_rows ? w.n_rows - r_begin : k_tile_rows;
    const __m512    os      = w.out_scales ? _mm512_loadu_ps(w.out_scales + r_begin) : _mm512_set1_ps(1.0f);
    for (int t = 0; t < NT; ++t) {
        __m512  v   = w.out_scales ? _mm512_mul_ps(_mm512_load_ps(out[t]), os) : _mm512_load_ps(out[t]);
        float * dst = y + (t0 + t) * ldy + (r_begin - row0);
        if (accumulate) v = _mm512_add_ps(load16(dst, n_valid), v);
        store16(dst, n_valid, v);
    }
}

template <typename Decode>
inline void ternary_gemm_base3(const Decode & decode, const TernaryTiles & w, int64_t tile0, int64_t tile1, const ActView & a, float * y, int64_t ldy,
                        int64_t row0, bool accumulate) {
    if (a.n_tokens <= 2) {
        for (int64_t tile = tile0; tile < tile1; ++tile) {
            if (a.n_tokens == 2) {
                tile_tokens_base3<2>(decode, w, tile, a, 0, y, ldy, row0, accumulate);
            } else {
                tile_tokens_base3<1>(decode, w, tile, a, 0, y, ldy, row0, accumulate);
            }
        }
        return;
    }
    // Blocks of 64 tokens: their activations regrouped once (scratch after the tile's code bytes),
    // each tile decoded once per block into code bytes, then 16 tokens at a time.
    uint8_t * bytes = a.scratch;
    auto *    acts  = reinterpret_cast<int32_t *>(a.scratch + 16 * w.k);
    for (int64_t tb = 0; tb < a.n_tokens; tb += 64) {
        const int64_t nt = a.n_tokens - tb < 64 ? a.n_tokens - tb : 64;
        regroup_acts(a, tb, nt, w.k, acts);
        for (int64_t tile = tile0; tile < tile1; ++tile) {
            unpack_base3_tile(decode, w, tile, bytes);
            int64_t t = 0;
            for (; t + 16 <= nt; t += 16) bytes_tokens<16>(w, tile, bytes, acts + t, a, tb + t, y, ldy, row0, accumulate);
            for (; t + 8 <= nt; t += 8) bytes_tokens<8>(w, tile, bytes, acts + t, a, tb + t, y, ldy, row0, accumulate);
            for (; t + 4 <= nt; t += 4) bytes_tokens<4>(w, tile, bytes, acts + t, a, tb + t, y, ldy, row0, accumulate);
            for (; t < nt; ++t) bytes_tokens<1>(w, tile, bytes, acts + t, a, tb + t, y, ldy, row0, accumulate);
        }
    }
}


}  // namespace
}  // namespace tern::cpu::avx512
