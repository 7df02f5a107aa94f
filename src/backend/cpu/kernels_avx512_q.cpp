// AVX-512 (VNNI) kernels of the families' Q8_0-block products: Q4_0 / Q8_0 Q-block tiles, Q1_0
// binary tiles and Q1_0 / Q2_0 2-bit tiles against ggml's Q8_0 activation blocks (cpu_kernels.h). 16 rows in the
// lanes, one vpdpbusd lane per row; each row's float sum follows the reference's block order.
#include "backend/cpu/simd_avx512.h"

namespace tern::cpu {
namespace {

using namespace avx512;

// Stores 16 rows' results of one token (the tile's valid rows), added to y when accumulate.
// A tile's 16 rows from r_begin of tokens t0 .. t0 + NT - 1 (out[t]), times the per-row output
// scales when there are any, written (or added, with accumulate) to y; rows at or past n_rows are
// left out.
template <int NT>
inline void store_tile_tokens(const __m512 (&out)[NT], const float * out_scales, int64_t n_rows, int64_t r_begin,
                              int64_t t0, float * y, int64_t ldy, int64_t row0, bool accumulate) {
    const int64_t n_valid = n_rows - r_begin < 16 ? n_rows - r_begin : 16;
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
        __m512  v   = out_scales ? _mm512_mul_ps(out[t], _mm512_loadu_ps(out_scales + r_begin)) : out[t];
        float * dst = y + (t0 + t) * ldy + (r_begin - row0);
        if (accumulate) v = _mm512_add_ps(load16(dst, n_valid), v);
        store16(dst, n_valid, v);
    }
}

// One Q-block tile against tokens t0 .. t0 + NT - 1.
template <int NT, bool Q8>
void qtile_tokens(const QBlockTiles & w, int64_t tile, const Q8BlockActs & a, int64_t t0, float * y, int64_t ldy,
                  int64_t row0, bool accumulate) {
    const int64_t   nb   = w.k / 32;
    const int64_t   bb   = w.block_bytes();
    const uint8_t * data = w.data + tile * w.tile_bytes();
    const __m512i   m4   = _mm512_set1_epi8(0x0F);
    __m512          out[NT];
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = _mm512_setzero_ps();
    // NT == 1: two accumulators (two chains); more tokens are chains enough.
    constexpr int NA = NT == 1 ? 2 : NT;
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t * blk = data + b * bb;
        const __m512    dw  = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk)));
        __m512i         acc[NA];
        #pragma GCC unroll 8
        for (int i = 0; i < NA; ++i) acc[i] = _mm512_setzero_si512();
        if constexpr (!Q8) {
#pragma GCC unroll 4
            for (int c = 0; c < 4; ++c) {
                const __m512i v  = _mm512_loadu_si512(blk + 32 + c * 64);
                const __m512i lo = _mm512_and_si512(v, m4);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
#pragma GCC unroll 8
                for (int t = 0; t < NT; ++t) {
                    const int8_t * q = a.q + (t0 + t) * a.ld + b * 32;
                    if constexpr (NT == 1) {
                        acc[0] = dpbusd(acc[0], lo, bcast4(q + 4 * c));
                        acc[1] = dpbusd(acc[1], hi, bcast4(q + 16 + 4 * c));
                    } else {
                        acc[t] = dpbusd(acc[t], lo, bcast4(q + 4 * c));
                        acc[t] = dpbusd(acc[t], hi, bcast4(q + 16 + 4 * c));
                    }
                }
            }
        } else {
#pragma GCC unroll 8
            for (int c = 0; c < 8; ++c) {
                const __m512i v = _mm512_loadu_si512(blk + 32 + c * 64);
#pragma GCC unroll 8
                for (int t = 0; t < NT; ++t) {
                    const int8_t * q = a.q + (t0 + t) * a.ld + b * 32;
                    acc[NT == 1 ? (c & 1) : t] = dpbusd(acc[NT == 1 ? (c & 1) : t], v, bcast4(q + 4 * c));
                }
            }
        }
        if constexpr (NT == 1) acc[0] = _mm512_add_epi32(acc[0], acc[1]);
        #pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) {
            const int64_t tb   = (t0 + t) * nb + b;
            const __m512i sumi = _mm512_sub_epi32(acc[t], _mm512_set1_epi32((Q8 ? 128 : 8) * a.bsum[tb]));
            const __m512  f    = _mm512_cvtepi32_ps(sumi);
            const __m512  da   = _mm512_set1_ps(a.d[tb]);
            const __m512  term = Q8 ? _mm512_mul_ps(f, _mm512_mul_ps(dw, da)) : _mm512_mul_ps(_mm512_mul_ps(f, dw), da);
            out[t]             = _mm512_add_ps(out[t], term);
        }
    }
    store_tile_tokens<NT>(out, nullptr, w.n_rows, tile * 16, t0, y, ldy, row0, accumulate);
}

void qblock_gemm(const QBlockTiles & w, int64_t tile0, int64_t tile1, const Q8BlockActs & a, float * y, int64_t ldy,
                 int64_t row0, bool accumulate) {
    for_tiles_and_tokens<8>(a.n_tokens, tile0, tile1, [&]<int NT>(int64_t tile, int64_t t) {
        if (w.q8) {
            qtile_tokens<NT, true>(w, tile, a, t, y, ldy, row0, accumulate);
        } else {
            qtile_tokens<NT, false>(w, tile, a, t, y, ldy, row0, accumulate);
        }
    });
}

// One 2-bit ternary tile against tokens t0 .. t0 + NT - 1, Q8_0-block activations.
template <int NT>
void lowbit_tile_tokens(const TernaryTiles & w, int64_t tile, const Q8BlockActs & a, int64_t t0, float * y,
                        int64_t ldy, int64_t row0, bool accumulate) {
    const int64_t   nb       = w.k / 32;
    const int64_t   n_groups = w.n_groups();
    const int64_t   bpg      = w.group / 32;  // activation blocks per weight group
    const uint8_t * codes    = w.codes + tile * (w.k / k_tile_cols) * k_tile_chunk;
    const float *   scales   = w.scales + tile * n_groups * k_tile_rows;
    const __m512i   three    = _mm512_set1_epi8(3);
    __m512          out[NT];
    #pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < n_groups; ++g) {
        __m512 s[NT];
        #pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) s[t] = _mm512_setzero_ps();
        for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
            constexpr int NA = NT == 1 ? 4 : NT;
            __m512i       acc[NA];
            #pragma GCC unroll 8
            for (int i = 0; i < NA; ++i) acc[i] = _mm512_setzero_si512();
            for (int64_t c = 2 * b; c < 2 * b + 2; ++c) {  // the block's two chunks of 16 columns
                const __m512i bytes = _mm512_loadu_si512(codes + c * k_tile_chunk);
                const int64_t col   = c * k_tile_cols;
                if constexpr (NT == 1) {
                    // Codes masked in place (code 4^s), as the per-token kernel: acc[s] = 4^s x its sum.
                    const int8_t * q = a.q + t0 * a.ld + col;
                    acc[0] = dpbusd(acc[0], _mm512_and_si512(bytes, three), bcast4(q));
                    acc[1] = dpbusd(acc[1], _mm512_and_si512(bytes, _mm512_set1_epi8(0x0c)), bcast4(q + 4));
                    acc[2] = dpbusd(acc[2], _mm512_and_si512(bytes, _mm512_set1_epi8(0x30)), bcast4(q + 8));
                    acc[3] = dpbusd(acc[3], _mm512_and_si512(bytes, _mm512_set1_epi8(static_cast<char>(0xc0))), bcast4(q + 12));
                } else {
                    const __m512i w0 = _mm512_and_si512(bytes, three);
                    const __m512i w1 = _mm512_and_si512(_mm512_srli_epi16(bytes, 2), three);
                    const __m512i w2 = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), three);
                    const __m512i w3 = _mm512_and_si512(_mm512_srli_epi16(bytes, 6), three);
#pragma GCC unroll 8
                    for (int t = 0; t < NT; ++t) {
                        const int8_t * q = a.q + (t0 + t) * a.ld + col;
                        acc[t] = dpbusd(acc[t], w0, bcast4(q));
                        acc[t] = dpbusd(acc[t], w1, bcast4(q + 4));
                        acc[t] = dpbusd(acc[t], w2, bcast4(q + 8));
                        acc[t] = dpbusd(acc[t], w3, bcast4(q + 12));
                    }
                }
            }
            if constexpr (NT == 1) {
                acc[0] = _mm512_add_epi32(_mm512_add_epi32(acc[0], _mm512_srai_epi32(acc[1], 2)),
                                          _mm512_add_epi32(_mm512_srai_epi32(acc[2], 4), _mm512_srai_epi32(acc[3], 6)));
            }
            #pragma GCC unroll 8
            for (int t = 0; t < NT; ++t) {
                const int64_t tb   = (t0 + t) * nb + b;
                const __m512i sumi = _mm512_sub_epi32(acc[t], _mm512_set1_epi32(a.bsum[tb]));  // codes are value + 1
                s[t] = _mm512_add_ps(s[t], _mm512_mul_ps(_mm512_set1_ps(a.d[tb]), _mm512_cvtepi32_ps(sumi)));
            }
        }
        const __m512 sg = _mm512_loadu_ps(scales + g * k_tile_rows);
        #pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) out[t] = _mm512_add_ps(out[t], _mm512_mul_ps(sg, s[t]));
    }
    store_tile_tokens<NT>(out, w.out_scales, w.n_rows, tile * k_tile_rows, t0, y, ldy, row0, accumulate);
}

void lowbit_q8_gemm(const TernaryTiles & w, int64_t tile0, int64_t tile1, const Q8BlockActs & a, float * y, int64_t ldy,
                    int64_t row0, bool accumulate) {
    for_tiles_and_tokens<8>(a.n_tokens, tile0, tile1, [&]<int NT>(int64_t tile, int64_t t) {
        lowbit_tile_tokens<NT>(w, tile, a, t, y, ldy, row0, accumulate);
    });
}

// One binary tile against tokens t0 .. t0 + NT - 1, Q8_0-block activations.
template <int NT>
void binary_tile_tokens(const BinaryTiles & w, int64_t tile, const Q8BlockActs & a, int64_t t0, float * y, int64_t ldy,
                        int64_t row0, bool accumulate) {
    const int64_t   nb       = w.k / 32;
    const int64_t   n_groups = w.n_groups();
    const int64_t   bpg      = w.group / 32;
    const uint8_t * codes    = w.codes + tile * w.tile_bytes();
    const float *   scales   = w.scales + tile * n_groups * 16;
    const __m512i   one      = _mm512_set1_epi8(1);
    __m512          out[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < n_groups; ++g) {
        __m512 s[NT];
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) s[t] = _mm512_setzero_ps();
        for (int64_t b = g * bpg; b < (g + 1) * bpg; ++b) {
            const __m512i bytes = _mm512_loadu_si512(codes + b * 64);
            __m512i       dot[NT];
            if constexpr (NT == 1) {
                // Bits masked in place (2^s each), one accumulator per bit: acc[s] = 2^s x its sum.
                const int8_t * q = a.q + t0 * a.ld + b * 32;
                __m512i        acc[8];
#pragma GCC unroll 8
                for (int sh = 0; sh < 8; ++sh) {
                    acc[sh] = dpbusd(_mm512_setzero_si512(), _mm512_and_si512(bytes, _mm512_set1_epi8(static_cast<char>(1 << sh))),
                                     bcast4(q + 4 * sh));
                }
                dot[0] = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(acc[0], _mm512_srai_epi32(acc[1], 1)),
                                                           _mm512_add_epi32(_mm512_srai_epi32(acc[2], 2), _mm512_srai_epi32(acc[3], 3))),
                                          _mm512_add_epi32(_mm512_add_epi32(_mm512_srai_epi32(acc[4], 4), _mm512_srai_epi32(acc[5], 5)),
                                                           _mm512_add_epi32(_mm512_srai_epi32(acc[6], 6), _mm512_srai_epi32(acc[7], 7))));
            } else {
#pragma GCC unroll 8
                for (int t = 0; t < NT; ++t) dot[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int sh = 0; sh < 8; ++sh) {
                    const __m512i bits = _mm512_and_si512(_mm512_srli_epi16(bytes, sh), one);
#pragma GCC unroll 8
                    for (int t = 0; t < NT; ++t) dot[t] = dpbusd(dot[t], bits, bcast4(a.q + (t0 + t) * a.ld + b * 32 + 4 * sh));
                }
            }
#pragma GCC unroll 8
            for (int t = 0; t < NT; ++t) {
                const int64_t tb   = (t0 + t) * nb + b;
                const __m512i sumi = _mm512_sub_epi32(_mm512_add_epi32(dot[t], dot[t]), _mm512_set1_epi32(a.bsum[tb]));
                s[t] = _mm512_add_ps(s[t], _mm512_mul_ps(_mm512_set1_ps(a.d[tb]), _mm512_cvtepi32_ps(sumi)));
            }
        }
        const __m512 sg = _mm512_loadu_ps(scales + g * 16);
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) out[t] = _mm512_add_ps(out[t], _mm512_mul_ps(sg, s[t]));
    }
    store_tile_tokens<NT>(out, w.out_scales, w.n_rows, tile * 16, t0, y, ldy, row0, accumulate);
}

void binary_q8_gemm(const BinaryTiles & w, int64_t tile0, int64_t tile1, const Q8BlockActs & a, float * y, int64_t ldy,
                    int64_t row0, bool accumulate) {
    for_tiles_and_tokens<8>(a.n_tokens, tile0, tile1, [&]<int NT>(int64_t tile, int64_t t) {
        binary_tile_tokens<NT>(w, tile, a, t, y, ldy, row0, accumulate);
    });
}

}  // namespace

void add_qblock_avx512(Kernels & set) {
    set.qblock_gemm    = qblock_gemm;
    set.lowbit_q8_gemm = lowbit_q8_gemm;
    set.binary_q8_gemm = binary_q8_gemm;
}

}  // namespace tern::cpu
