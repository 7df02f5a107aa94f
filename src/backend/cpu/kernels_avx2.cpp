// AVX2 kernels (with FMA and F16C; compiled with those flags only, chosen at run time): the same
// algorithms as kernels_avx512*.cpp on 8-lane vectors. Without VNNI the ternary products use
// vpmaddubsw (codes x activations in pairs, at most 2 * 3 * 128 in 16 bits: no saturation) and
// vpmaddwd; the int8 head multiplies int16 by int16 (vpmaddwd) since its 8-bit halves would
// saturate vpmaddubsw.
#include "backend/cpu/cpu_dequant.h"
#include "backend/cpu/simd_avx2.h"

#include <cpuid.h>

namespace tern::cpu {
namespace {

using namespace avx2;

// ------------------------------------------------------------------------- ternary products

// Per 32 bytes (8 rows x 16 columns): the 16-bit pair sums of the four shifts added (at most
// 4 * 768), then widened to 32 bits.
inline __m256i chunk_dot(__m256i bytes, const int8_t * q, __m256i three, __m256i ones16) {
    const __m256i w0 = _mm256_and_si256(bytes, three);
    const __m256i w1 = _mm256_and_si256(_mm256_srli_epi16(bytes, 2), three);
    const __m256i w2 = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), three);
    const __m256i w3 = _mm256_and_si256(_mm256_srli_epi16(bytes, 6), three);
    __m256i       s  = _mm256_add_epi16(_mm256_maddubs_epi16(w0, bcast4(q)), _mm256_maddubs_epi16(w1, bcast4(q + 4)));
    s                = _mm256_add_epi16(s, _mm256_add_epi16(_mm256_maddubs_epi16(w2, bcast4(q + 8)), _mm256_maddubs_epi16(w3, bcast4(q + 12))));
    return _mm256_madd_epi16(s, ones16);
}

template <int NT>
void tile_tokens(const TernaryTiles & w, int64_t tile, const ActView & a, int64_t t0, float * y, int64_t ldy,
                 int64_t row0, bool accumulate) {
    const int64_t   n_groups     = w.n_groups();
    const int64_t   chunks_per_g = w.group / k_tile_cols;
    const uint8_t * codes        = w.codes + tile * (w.k / k_tile_cols) * k_tile_chunk;
    const float *   scales       = w.scales + tile * n_groups * k_tile_rows;
    const __m256i   three = _mm256_set1_epi8(3), ones16 = _mm256_set1_epi16(1);
    const int8_t *  q[NT];
    for (int t = 0; t < NT; ++t) q[t] = a.q + (t0 + t) * a.ld;
    __m256 out[NT][2];
    for (int t = 0; t < NT; ++t) out[t][0] = out[t][1] = _mm256_setzero_ps();
    const StreamAhead ahead;  // one token: page and line requests (tile_loop.h)
    for (int64_t g = 0; g < n_groups; ++g) {
        __m256i acc[NT][2];
        for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_si256();
        for (int64_t c = g * chunks_per_g; c < (g + 1) * chunks_per_g; ++c) {
            if constexpr (NT == 1) ahead.at<k_tile_chunk>(codes + c * k_tile_chunk);
            const __m256i lo  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(codes + c * k_tile_chunk));
            const __m256i hi  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(codes + c * k_tile_chunk + 32));
            const int64_t col = c * k_tile_cols;
#pragma GCC unroll 4
            for (int t = 0; t < NT; ++t) {  // (unrolled: GCC 12 kept the loop and acc[t] in memory)
                acc[t][0] = _mm256_add_epi32(acc[t][0], chunk_dot(lo, q[t] + col, three, ones16));
                acc[t][1] = _mm256_add_epi32(acc[t][1], chunk_dot(hi, q[t] + col, three, ones16));
            }
        }
        for (int h = 0; h < 2; ++h) {
            const __m256 sg = _mm256_loadu_ps(scales + g * k_tile_rows + 8 * h);
            for (int t = 0; t < NT; ++t) {
                const __m256 term = group_term(acc[t][h], a.group_sums[(t0 + t) * n_groups + g], a.scale[t0 + t], sg);
                out[t][h]         = n_groups == 1 ? term : _mm256_add_ps(out[t][h], term);
            }
        }
    }
    store_tile<NT>(w, tile, out, t0, y, ldy, row0, accumulate);
}

void ternary_gemm(const TernaryTiles & w, int64_t tile0, int64_t tile1, const ActView & a, float * y, int64_t ldy,
                  int64_t row0, bool accumulate) {
    Toucher touch(a, tile0, tile1);  // one token: the layer's K/V where the caller names them (tile_loop.h)
    for_tiles_and_tokens<4>(a.n_tokens, tile0, tile1, [&]<int NT>(int64_t tile, int64_t t) {
        touch.at_tile();
        tile_tokens<NT>(w, tile, a, t, y, ldy, row0, accumulate);
    });
}

// ------------------------------------------------------------------------- norm, quantization

float halving_sum(float * t, int64_t p) {
    int64_t h = p / 2;
    for (; h >= 8; h /= 2) {
        for (int64_t i = 0; i < h; i += 8) _mm256_storeu_ps(t + i, _mm256_add_ps(_mm256_loadu_ps(t + i), _mm256_loadu_ps(t + i + h)));
    }
    for (; h >= 1; h /= 2) {
        for (int64_t i = 0; i < h; ++i) t[i] = t[i] + t[i + h];
    }
    return t[0];
}

float sum_squares(const float * x, int64_t n) {
    constexpr int64_t k_max_blocks = 1024;
    alignas(32) float blocks[k_max_blocks];
    const int64_t     n_blocks = (n + 31) / 32;
    int64_t           p        = 1;
    while (p < n_blocks) p *= 2;
    float * t = p > k_max_blocks ? new float[static_cast<size_t>(p)] : blocks;
    for (int64_t b = 0; b < p; ++b) t[b] = b < n_blocks ? block_squares(x + 32 * b, n - 32 * b) : 0.0f;
    const float s = halving_sum(t, p);
    if (t != blocks) delete[] t;
    return s;
}

float norm_apply(const float * x, const float * w, float scale, float * y, int64_t n) {
    const __m256 s  = _mm256_set1_ps(scale);
    __m256       mx = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_mul_ps(load_tail(x + i, n - i), load_tail(w + i, n - i)), s);
        store_tail(y + i, n - i, v);
        mx = _mm256_max_ps(mx, abs_ps(v));  // masked-off lanes are 0
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4        = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4        = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

float quantize_row(const float * x, float max_abs, int8_t * q, int64_t n) {
    const double max   = static_cast<double>(max_abs) > 1e-5 ? static_cast<double>(max_abs) : 1e-5;
    const float  scale = static_cast<float>(127.0 / max);
    const __m256 s     = _mm256_set1_ps(scale);
    int64_t      i     = 0;
    for (; i + 32 <= n; i += 32) {
        // round half to even, then saturate 32 -> 16 -> 8 bits (the clamp); packs interleave lanes
        const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), s));
        const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), s));
        const __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 16), s));
        const __m256i d = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 24), s));
        const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
        const __m256i v  = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(q + i), v);
    }
    for (; i < n; ++i) {
        const float v = __builtin_nearbyintf(x[i] * scale);
        q[i]          = static_cast<int8_t>(v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v);
    }
    return scale;
}

// ------------------------------------------------------------------------- RoPE, f16, activation

void rope(float * x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float * cs, const float * sn) {
    const int64_t half = n_rot / 2;
    for (int64_t h = 0; h < n_heads; ++h) {
        float * xh = x + h * head_dim;
        for (int64_t i = 0; i < half; i += 8) {
            const int64_t rem = half - i;
            const __m256  c = load_tail(cs + i, rem), s = load_tail(sn + i, rem);
            const __m256  x0 = load_tail(xh + i, rem), x1 = load_tail(xh + i + half, rem);
            store_tail(xh + i, rem, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
            store_tail(xh + i + half, rem, _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c)));
        }
    }
}

void f32_to_f16(const float * x, uint16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128(reinterpret_cast<__m128i *>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; ++i) y[i] = static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(x[i]), _MM_FROUND_TO_NEAREST_INT), 0));
}

void gate_act(const float * g, const float * u, float * f, int64_t n, bool relu2) {
    for (int64_t i = 0; i < n; i += 8) {
        const __m256 gv = load_tail(g + i, n - i);
        __m256       a;
        if (relu2) {
            const __m256 r = _mm256_max_ps(gv, _mm256_setzero_ps());  // g > 0 ? g : +0 (NaN -> 0)
            a              = _mm256_mul_ps(r, r);
        } else {
            a = _mm256_div_ps(gv, _mm256_add_ps(_mm256_set1_ps(1.0f), exp_fixed(_mm256_sub_ps(_mm256_setzero_ps(), gv))));
        }
        store_tail(f + i, n - i, _mm256_mul_ps(a, load_tail(u + i, n - i)));
    }
}

// The ruler reads with the one-token kernels' page and line requests (as kernels_avx512.cpp's).
uint64_t read_bytes(const uint8_t * p, int64_t n) {
    __m256i           a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    int64_t           i  = 0;
    const StreamAhead ahead;
    for (; i + 128 <= n; i += 128) {
        ahead.at<128>(p + i);
        a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + i + 96)));
    }
    alignas(32) uint64_t l[4];
    _mm256_store_si256(reinterpret_cast<__m256i *>(l), _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
    uint64_t s = l[0] + l[1] + l[2] + l[3];
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        __builtin_memcpy(&w, p + i, 8);
        s += w;
    }
    for (; i < n; ++i) s += p[i];
    return s;
}

bool dequant_rows(uint32_t type, const uint8_t * src, int64_t row_bytes, int64_t n_rows, int64_t k, float * out) {
    return dequant_rows_impl(type, src, row_bytes, n_rows, k, out);
}
void row_sumsq(const float * rows, int64_t n_rows, int64_t k, double * sumsq) { row_sumsq_impl(rows, n_rows, k, sumsq); }

}  // namespace

void add_attention_and_head_avx2(Kernels & set);  // kernels_avx2_attn.cpp
void add_qblock_avx2(Kernels & set);              // kernels_avx2_q.cpp
// kernels_avx2_vnni.cpp
void ternary_gemm_avx2_vnni(const TernaryTiles & w, int64_t tile0, int64_t tile1, const ActView & a, float * y,
                            int64_t ldy, int64_t row0, bool accumulate);
void i8_rows_dot_i16_avx2_vnni(const int8_t * q, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const uint8_t * hi,
                               const uint8_t * lo, const int32_t * q_sums, int64_t * dots);

const Kernels * kernels_avx2_plain() {
    static const Kernels k = [] {
        Kernels set{.name = "avx2", .base3 = false, .tile_to_base3 = nullptr, .ternary_gemm = ternary_gemm, .sum_squares = sum_squares,
                    .norm_apply = norm_apply, .quantize_row = quantize_row, .rope = rope, .f32_to_f16 = f32_to_f16,
                    .gate_act = gate_act, .dequant_rows = dequant_rows, .read_bytes = read_bytes, .row_sumsq = row_sumsq};
        add_attention_and_head_avx2(set);
        add_qblock_avx2(set);
        return set;
    }();
    return &k;
}

const Kernels * kernels_avx2_vnni() {
    static const Kernels k = [] {
        Kernels v         = *kernels_avx2_plain();
        v.name            = "avx2-vnni";
        v.ternary_gemm    = ternary_gemm_avx2_vnni;
        v.i8_rows_dot_i16 = i8_rows_dot_i16_avx2_vnni;
        return v;
    }();
    // AVX-VNNI is CPUID.(EAX=7,ECX=1):EAX bit 4 (read directly: clang 14 has no "avxvnni" for
    // __builtin_cpu_supports). The caller picked the AVX2 set, so the OS saves the YMM state.
    unsigned a = 0, b = 0, c = 0, d = 0;
    const bool avx_vnni = __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 4) & 1);
    return avx_vnni ? &k : nullptr;
}

const Kernels * kernels_avx2() {
    const Kernels * v = kernels_avx2_vnni();
    return v ? v : kernels_avx2_plain();
}

}  // namespace tern::cpu
