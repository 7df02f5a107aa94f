// AVX-512 kernels (F, BW, VL, DQ, VNNI; compiled with those flags only, chosen at run time when
// the CPU has them): the ternary products with vpdpbusd on the tile layout, the norm, RoPE, the
// attention and the exact head. Each reproduces the scalar reference's operations in its order
// (cpu_kernels.h); the shared vector helpers are in simd_avx512.h.
#include "backend/cpu/cpu_dequant.h"
#include "backend/cpu/base3_avx512.h"

namespace tern::cpu {
namespace {

using namespace avx512;

// ------------------------------------------------------------------------- ternary products

// One tile (16 rows) against NT tokens: acc[t] lane r = sum over the group of code(r, i) q[t][i].
// The epilogue turns each group's integer sums into the reference's floats.
template <int NT>
void tile_tokens(const TernaryTiles & w, int64_t tile, const ActView & a, int64_t t0, float * y, int64_t ldy,
                 int64_t row0, bool accumulate) {
    const int64_t   n_groups     = w.n_groups();
    const int64_t   chunks_per_g = w.group / k_tile_cols;
    const uint8_t * codes        = w.codes + tile * (w.k / k_tile_cols) * k_tile_chunk;
    const float *   scales       = w.scales + tile * n_groups * k_tile_rows;
    const __m512i   three        = _mm512_set1_epi8(3);
    const int8_t *  q[NT];
    for (int t = 0; t < NT; ++t) q[t] = a.q + (t0 + t) * a.ld;
    __m512 out[NT];
    for (int t = 0; t < NT; ++t) out[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < n_groups; ++g) {
        // NT == 1 keeps one accumulator per shift for each of two chunks side by side (eight
        // independent chains: four were bound by vpdpbusd's latency, below the memory's rate); more
        // tokens are chains enough.
        constexpr int NA = NT == 1 ? 8 : NT;
        __m512i       acc[NA];
        for (int i = 0; i < NA; ++i) acc[i] = _mm512_setzero_si512();
        const int64_t c_end = (g + 1) * chunks_per_g;
        if constexpr (NT == 1) {
            // Codes masked in place (code 4^s), no shifts: acc[s] (+ acc[s + 4]) = 4^s x the shift's
            // sum, exact (|acc| <= 192 * 128 * 4 per chunk, under 2^31 for groups below 2^17 columns).
            const __m512i m0 = _mm512_set1_epi8(3), m1 = _mm512_set1_epi8(0x0c), m2 = _mm512_set1_epi8(0x30),
                          m3 = _mm512_set1_epi8(static_cast<char>(0xc0));
            // Chunk c + J of a step from c: its activations at qs + 16 J (qs = q[0] + 16 c).
            auto chunk = [&]<int J>(__m512i * ac, int64_t c, const int8_t * qs) {
                const __m512i bytes = _mm512_loadu_si512(codes + (c + J) * k_tile_chunk);
                ac[0] = dpbusd_b<16 * J>(ac[0], _mm512_and_si512(bytes, m0), qs);
                ac[1] = dpbusd_b<16 * J + 4>(ac[1], _mm512_and_si512(bytes, m1), qs);
                ac[2] = dpbusd_b<16 * J + 8>(ac[2], _mm512_and_si512(bytes, m2), qs);
                ac[3] = dpbusd_b<16 * J + 12>(ac[3], _mm512_and_si512(bytes, m3), qs);
            };
            // Four chunks (256 bytes) per step, the page-ahead test once per step: ~10 instructions
            // per 64-byte line, so the reorder window holds more lines' loads.
            int64_t       c     = g * chunks_per_g;
            const int64_t ahead = page_ahead;
            for (; c + 4 <= c_end; c += 4) {
                const uint8_t * at = codes + c * k_tile_chunk;
                if (ahead > 0 && (reinterpret_cast<uintptr_t>(at) & 4095) < 256) {
                    _mm_prefetch(reinterpret_cast<const char *>(at + ahead), _MM_HINT_T0);  // once per page
                }
                const int8_t * qs = q[0] + c * k_tile_cols;
                chunk.template operator()<0>(acc, c, qs);
                chunk.template operator()<1>(acc + 4, c, qs);
                chunk.template operator()<2>(acc, c, qs);
                chunk.template operator()<3>(acc + 4, c, qs);
            }
            if (c + 2 <= c_end) {
                chunk.template operator()<0>(acc, c, q[0] + c * k_tile_cols);
                chunk.template operator()<1>(acc + 4, c, q[0] + c * k_tile_cols);
                c += 2;
            }
            if (c < c_end) chunk.template operator()<0>(acc, c, q[0] + c * k_tile_cols);
            for (int s = 0; s < 4; ++s) acc[s] = _mm512_add_epi32(acc[s], acc[s + 4]);
        } else {
            for (int64_t c = g * chunks_per_g; c < c_end; ++c) {
                const __m512i   bytes = _mm512_loadu_si512(codes + c * k_tile_chunk);
                const int64_t   col   = c * k_tile_cols;
                const __m512i w0 = _mm512_and_si512(bytes, three);
                const __m512i w1 = _mm512_and_si512(_mm512_srli_epi16(bytes, 2), three);
                const __m512i w2 = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), three);
                const __m512i w3 = _mm512_and_si512(_mm512_srli_epi16(bytes, 6), three);
#pragma GCC unroll 16
                for (int t = 0; t < NT; ++t) {
                    acc[t] = dpbusd(acc[t], w0, bcast4(q[t] + col));
                    acc[t] = dpbusd(acc[t], w1, bcast4(q[t] + col + 4));
                    acc[t] = dpbusd(acc[t], w2, bcast4(q[t] + col + 8));
                    acc[t] = dpbusd(acc[t], w3, bcast4(q[t] + col + 12));
                }
            }
        }
        if constexpr (NT == 1) {
            acc[0] = _mm512_add_epi32(_mm512_add_epi32(acc[0], _mm512_srai_epi32(acc[1], 2)),
                                      _mm512_add_epi32(_mm512_srai_epi32(acc[2], 4), _mm512_srai_epi32(acc[3], 6)));
        }
        const __m512 sg = _mm512_loadu_ps(scales + g * k_tile_rows);
        for (int t = 0; t < NT; ++t) {
            const __m512 term = group_term(acc[t], a.group_sums[(t0 + t) * n_groups + g], a.scale[t0 + t], sg);
            out[t]             = n_groups == 1 ? term : _mm512_add_ps(out[t], term);
        }
    }
    const int64_t   r_begin = tile * k_tile_rows;
    const int64_t   n_valid = w.n_rows - r_begin < k_tile_rows ? w.n_rows - r_begin : k_tile_rows;
    const __m512    os      = w.out_scales ? _mm512_loadu_ps(w.out_scales + r_begin) : _mm512_set1_ps(1.0f);
    for (int t = 0; t < NT; ++t) {
        __m512 v = w.out_scales ? _mm512_mul_ps(out[t], os) : out[t];
        float *  dst = y + (t0 + t) * ldy + (r_begin - row0);
        if (accumulate) v = _mm512_add_ps(load16(dst, n_valid), v);
        store16(dst, n_valid, v);
    }
}

// One token against a thread's range of tiles in one call (issue 51), Step chunks (64 Step bytes)
// per step. tile_tokens<1> (kept for a block's last token) pays per tile a call, a 64-bit division
// and a 512-byte `rep stos` (its accumulator array escapes into memory through the chunk lambda's
// pointer: dead stores GCC keeps); here the accumulators are named registers and the setup is once
// per range. The same integer sums and epilogue as tile_tokens<1>: the same floats.
template <int Step>
void tiles_one_token(const TernaryTiles & w, int64_t tile0, int64_t tile1, const ActView & a, float * y, int64_t row0,
                     bool accumulate) {
    const int64_t  n_groups     = w.n_groups();
    const int64_t  chunks_per_g = w.group / k_tile_cols;
    const int64_t  tile_bytes   = (w.k / k_tile_cols) * k_tile_chunk;
    const int8_t * q            = a.q;
    const float    a_scale      = a.scale[0];
    const StreamAhead ahead;  // page and line requests (tile_loop.h)
    const __m512i  m0 = _mm512_set1_epi8(3), m1 = _mm512_set1_epi8(0x0c), m2 = _mm512_set1_epi8(0x30),
                  m3 = _mm512_set1_epi8(static_cast<char>(0xc0));
    Toucher touch(a, tile0, tile1);  // the layer's K/V where the caller names them (tile_loop.h)
    for (int64_t tile = tile0; tile < tile1; ++tile) {
        const uint8_t * codes  = w.codes + tile * tile_bytes;
        const float *   scales = w.scales + tile * n_groups * k_tile_rows;
        __m512          out    = _mm512_setzero_ps();
        touch.at_tile();
        for (int64_t g = 0; g < n_groups; ++g) {
            __m512i e0 = _mm512_setzero_si512(), e1 = e0, e2 = e0, e3 = e0;  // even chunks' sums, by shift
            __m512i o0 = e0, o1 = e0, o2 = e0, o3 = e0;                      // odd chunks'
            // Chunk c + J (activations at qs + 16 J, qs = q + 16 c), codes masked in place as in tile_tokens<1>.
            auto chunk = [&]<int J>(int64_t c, const int8_t * qs) {
                const __m512i bytes = _mm512_loadu_si512(codes + (c + J) * k_tile_chunk);
                __m512i &     x0 = J % 2 ? o0 : e0, &x1 = J % 2 ? o1 : e1, &x2 = J % 2 ? o2 : e2, &x3 = J % 2 ? o3 : e3;
                x0 = dpbusd_b<16 * J>(x0, _mm512_and_si512(bytes, m0), qs);
                x1 = dpbusd_b<16 * J + 4>(x1, _mm512_and_si512(bytes, m1), qs);
                x2 = dpbusd_b<16 * J + 8>(x2, _mm512_and_si512(bytes, m2), qs);
                x3 = dpbusd_b<16 * J + 12>(x3, _mm512_and_si512(bytes, m3), qs);
            };
            const int64_t c_end = (g + 1) * chunks_per_g;
            int64_t       c     = g * chunks_per_g;
            for (; c + Step <= c_end; c += Step) {
                ahead.at<64 * Step>(codes + c * k_tile_chunk);
                const int8_t * qs = q + c * k_tile_cols;
                chunk.template operator()<0>(c, qs);
                chunk.template operator()<1>(c, qs);
                chunk.template operator()<2>(c, qs);
                chunk.template operator()<3>(c, qs);
                if constexpr (Step == 8) {
                    chunk.template operator()<4>(c, qs);
                    chunk.template operator()<5>(c, qs);
                    chunk.template operator()<6>(c, qs);
                    chunk.template operator()<7>(c, qs);
                }
            }
            for (; c + 2 <= c_end; c += 2) {  // groups of 64 columns (Q2_0) and fewer than Step chunks left
                chunk.template operator()<0>(c, q + c * k_tile_cols);
                chunk.template operator()<1>(c, q + c * k_tile_cols);
            }
            if (c < c_end) chunk.template operator()<0>(c, q + c * k_tile_cols);
            e0 = _mm512_add_epi32(e0, o0);
            e1 = _mm512_add_epi32(e1, o1);
            e2 = _mm512_add_epi32(e2, o2);
            e3 = _mm512_add_epi32(e3, o3);
            const __m512i sum  = _mm512_add_epi32(_mm512_add_epi32(e0, _mm512_srai_epi32(e1, 2)),
                                                  _mm512_add_epi32(_mm512_srai_epi32(e2, 4), _mm512_srai_epi32(e3, 6)));
            const __m512  term = group_term(sum, a.group_sums[g], a_scale, _mm512_loadu_ps(scales + g * k_tile_rows));
            out                = n_groups == 1 ? term : _mm512_add_ps(out, term);
        }
        const int64_t r_begin = tile * k_tile_rows;
        const int64_t n_valid = w.n_rows - r_begin < k_tile_rows ? w.n_rows - r_begin : k_tile_rows;
        __m512        v       = w.out_scales ? _mm512_mul_ps(out, _mm512_loadu_ps(w.out_scales + r_begin)) : out;
        float *       dst     = y + (r_begin - row0);
        if (accumulate) v = _mm512_add_ps(load16(dst, n_valid), v);
        store16(dst, n_valid, v);
    }
}

// 2-bit chunks of one tile -> base-3 chunks (the repack at load): per output chunk v = sum_j code_j
// 3^(4-j) in bytes, then ceil(v 256 / 243) = v + ceil(13 v / 243), the latter as
// ((13 v + 242) * 4316) >> 20 in 16-bit lanes (exact for v <= 242).
void tile_to_base3(const uint8_t * two_bit, int64_t k, int64_t group, uint8_t * base3) {
    const int64_t cpg = (group + k_base3_cols - 1) / k_base3_cols;
    const __m512i three = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1), z = _mm512_setzero_si512();
    for (int64_t g = 0; g < k / group; ++g) {
        for (int64_t c = 0; c < cpg; ++c) {
            __m512i v = z;
            for (int j = 0; j < 5; ++j) {
                const int64_t col = c * k_base3_cols + 4 * j;  // within the group
                __m512i       code = one;                     // padding: code 1
                if (col < group) {
                    const int64_t gc = g * group + col;
                    code = _mm512_and_si512(_mm512_srlv_epi16(_mm512_load_si512(two_bit + (gc / 16) * 64), _mm512_set1_epi16(static_cast<short>(2 * ((gc % 16) / 4)))), three);
                }
                v = _mm512_add_epi8(_mm512_add_epi8(_mm512_add_epi8(v, v), v), code);  // v 3 + code (v <= 242)
            }
            const __m512i c13 = _mm512_set1_epi16(13), c242 = _mm512_set1_epi16(242), m = _mm512_set1_epi16(4316);
            const __m512i vl = _mm512_unpacklo_epi8(v, z), vh = _mm512_unpackhi_epi8(v, z);
            const __m512i el = _mm512_srli_epi16(_mm512_mulhi_epu16(_mm512_add_epi16(_mm512_mullo_epi16(vl, c13), c242), m), 4);
            const __m512i eh = _mm512_srli_epi16(_mm512_mulhi_epu16(_mm512_add_epi16(_mm512_mullo_epi16(vh, c13), c242), m), 4);
            const __m512i b  = _mm512_packus_epi16(_mm512_add_epi16(vl, el), _mm512_add_epi16(vh, eh));
            _mm512_store_si512(base3 + (g * cpg + c) * k_tile_chunk, b);
        }
    }
}

// Token blocks of 8: a tile's codes are unpacked once per block and stay in L1 across blocks.
void ternary_gemm(const TernaryTiles & w, int64_t tile0, int64_t tile1, const ActView & a, float * y, int64_t ldy,
                  int64_t row0, bool accumulate) {
    if (w.base3) {
        ternary_gemm_base3(MulDecode{}, w, tile0, tile1, a, y, ldy, row0, accumulate);
        return;
    }
    if (a.n_tokens == 1) return tiles_one_token<4>(w, tile0, tile1, a, y, row0, accumulate);
    constexpr int64_t k_block = 64;  // tokens whose activations stay in L2 while the tiles stream
    for (int64_t tb = 0; tb < a.n_tokens; tb += k_block) {
        const int64_t te = tb + k_block < a.n_tokens ? tb + k_block : a.n_tokens;
        for (int64_t tile = tile0; tile < tile1; ++tile) {
            int64_t t = tb;
            for (; t + 8 <= te; t += 8) tile_tokens<8>(w, tile, a, t, y, ldy, row0, accumulate);
            switch (te - t) {
                case 7: tile_tokens<7>(w, tile, a, t, y, ldy, row0, accumulate); break;
                case 6: tile_tokens<6>(w, tile, a, t, y, ldy, row0, accumulate); break;
                case 5: tile_tokens<5>(w, tile, a, t, y, ldy, row0, accumulate); break;
                case 4: tile_tokens<4>(w, tile, a, t, y, ldy, row0, accumulate); break;
                case 3: tile_tokens<3>(w, tile, a, t, y, ldy, row0, accumulate); break;
                case 2: tile_tokens<2>(w, tile, a, t, y, ldy, row0, accumulate); break;
                case 1: tile_tokens<1>(w, tile, a, t, y, ldy, row0, accumulate); break;
                default: break;
            }
        }
    }
}

// ------------------------------------------------------------------------- norm, quantization

// Halving sum of t[0..p), p a power of two (cpu::halving_sum): levels of 16 and more in vectors.
float halving_sum(float * t, int64_t p) {
    int64_t h = p / 2;
    for (; h >= 16; h /= 2) {
        for (int64_t i = 0; i < h; i += 16) _mm512_storeu_ps(t + i, _mm512_add_ps(_mm512_loadu_ps(t + i), _mm512_loadu_ps(t + i + h)));
    }
    for (; h >= 1; h /= 2) {
        for (int64_t i = 0; i < h; ++i) t[i] = t[i] + t[i + h];
    }
    return t[0];
}

float sum_squares(const float * x, int64_t n) {
    constexpr int64_t k_max_blocks = 1024;  // 32768 elements on the stack; longer rows loop below
    alignas(64) float blocks[k_max_blocks];
    const int64_t     n_blocks = (n + 31) / 32;
    int64_t           p        = 1;
    while (p < n_blocks) p *= 2;
    if (p > k_max_blocks) {
        // Rows this long do not occur in the models tern runs; the same order, one block at a time.
        float * heap = new float[static_cast<size_t>(p)];
        for (int64_t b = 0; b < p; ++b) heap[b] = b < n_blocks ? block_squares(x + 32 * b, n - 32 * b) : 0.0f;
        const float s = halving_sum(heap, p);
        delete[] heap;
        return s;
    }
    for (int64_t b = 0; b < n_blocks; ++b) blocks[b] = block_squares(x + 32 * b, n - 32 * b);
    for (int64_t b = n_blocks; b < p; ++b) blocks[b] = 0.0f;
    return halving_sum(blocks, p);
}

float norm_apply(const float * x, const float * w, float scale, float * y, int64_t n) {
    const __m512 s   = _mm512_set1_ps(scale);
    __m512       mx  = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_mul_ps(_mm512_mul_ps(load16(x + i, n - i), load16(w + i, n - i)), s);
        store16(y + i, n - i, v);
        mx = _mm512_max_ps(mx, abs_ps(v));  // lanes past n hold 0
    }
    return _mm512_reduce_max_ps(mx);
}

float quantize_row(const float * x, float max_abs, int8_t * q, int64_t n) {
    const double max   = static_cast<double>(max_abs) > 1e-5 ? static_cast<double>(max_abs) : 1e-5;
    const float  scale = static_cast<float>(127.0 / max);
    const __m512 s     = _mm512_set1_ps(scale);
    for (int64_t i = 0; i < n; i += 16) {
        const __m128i v = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(load16(x + i, n - i), s)));  // half to even,
        if (n - i >= 16) {                                                                                  // saturating: the clamp
            _mm_storeu_si128(reinterpret_cast<__m128i *>(q + i), v);
        } else {
            _mm_mask_storeu_epi8(q + i, tail_mask(n - i), v);
        }
    }
    return scale;
}

// ------------------------------------------------------------------------- RoPE, f16, activation

void rope(float * x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float * cs, const float * sn) {
    const int64_t half = n_rot / 2;
    for (int64_t h = 0; h < n_heads; ++h) {
        float * xh = x + h * head_dim;
        for (int64_t i = 0; i < half; i += 16) {
            const int64_t rem = half - i;
            const __m512  c = load16(cs + i, rem), s = load16(sn + i, rem);
            const __m512  x0 = load16(xh + i, rem), x1 = load16(xh + i + half, rem);
            store16(xh + i, rem, _mm512_sub_ps(_mm512_mul_ps(x0, c), _mm512_mul_ps(x1, s)));
            store16(xh + i + half, rem, _mm512_add_ps(_mm512_mul_ps(x0, s), _mm512_mul_ps(x1, c)));
        }
    }
}

void f32_to_f16(const float * x, uint16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __m256i h = _mm512_cvtps_ph(load16(x + i, n - i), _MM_FROUND_TO_NEAREST_INT);
        if (n - i >= 16) {
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(y + i), h);
        } else {
            _mm256_mask_storeu_epi16(y + i, tail_mask(n - i), h);
        }
    }
}

void gate_act(const float * g, const float * u, float * f, int64_t n, bool relu2) {
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 gv = load16(g + i, n - i);
        __m512          a;
        if (relu2) {
            const __m512 r = _mm512_max_ps(gv, _mm512_setzero_ps());  // g > 0 ? g : +0 (NaN -> 0)
            a              = _mm512_mul_ps(r, r);
        } else {
            a = _mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), exp_fixed(_mm512_sub_ps(_mm512_setzero_ps(), gv))));
        }
        store16(f + i, n - i, _mm512_mul_ps(a, load16(u + i, n - i)));
    }
}

// ------------------------------------------------------------------------- read bandwidth

// The ruler reads as the one-token kernels do, with their page-ahead and line-ahead requests: on
// session 18's Xeon both together lift the plain loop by ~15% (cpu README, "A line ahead").
uint64_t read_bytes(const uint8_t * p, int64_t n) {
    __m512i           a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    int64_t           i  = 0;
    const StreamAhead ahead;
    for (; i + 256 <= n; i += 256) {
        ahead.at<256>(p + i);
        a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p + i));
        a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(p + i + 64));
        a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(p + i + 128));
        a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(p + i + 192));
    }
    // Summed as unsigned words (_mm512_reduce_add_epi64 adds signed ones: wrapping is UB there).
    alignas(64) uint64_t l[8];
    _mm512_store_si512(l, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
    uint64_t s = 0;
    for (uint64_t v : l) s += v;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        __builtin_memcpy(&w, p + i, 8);
        s += w;
    }
    for (; i < n; ++i) s += p[i];
    return s;
}

// Q8_0 activation blocks (cpu_kernels.h: q8_0_blocks): roundf (half away from zero) as the
// truncation plus the sign where the exact remainder is at least one half. A block holding a NaN
// gets d = NaN (the reference's max skips NaNs; its codes are the reference's business).
void q8_0_blocks(const float * x, int64_t n_blocks, int8_t * q, float * d, int32_t * bsum) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    for (int64_t b = 0; b < n_blocks; ++b) {
        const __m512 x0   = _mm512_loadu_ps(x + 32 * b), x1 = _mm512_loadu_ps(x + 32 * b + 16);
        const float  amax = _mm512_reduce_max_ps(_mm512_max_ps(abs_ps(x0), abs_ps(x1)));
        const bool   nan  = (_mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(x1, x1, _CMP_UNORD_Q)) != 0;
        const float  db   = nan ? amax - amax + __builtin_nanf("") : amax / 127.0f;
        d[b]              = db;
        if (!(db - db == 0.0f)) continue;  // not finite (or a NaN in the block): the caller runs the reference
        const __m512 id = _mm512_set1_ps(db != 0.0f ? 1.0f / db : 0.0f);
        __m512i      c[2];
        for (int h = 0; h < 2; ++h) {
            const __m512    v  = _mm512_mul_ps(h ? x1 : x0, id);
            const __m512    t  = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const __mmask16 up = _mm512_cmp_ps_mask(abs_ps(_mm512_sub_ps(v, t)), half, _CMP_GE_OQ);
            const __m512    s  = _mm512_or_ps(one, _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));  // +-1 with v's sign
            c[h] = _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, s));
        }
        _mm_storeu_si128(reinterpret_cast<__m128i *>(q + 32 * b), _mm512_cvtepi32_epi8(c[0]));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(q + 32 * b + 16), _mm512_cvtepi32_epi8(c[1]));
        bsum[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(c[0], c[1]));
    }
}

// dq_q6_k (cpu_dequant.h) 16 elements per vector: the 6-bit codes assembled in bytes, widened to
// int32, then ds * (float)(q - 32) as the scalar code rounds it. (GCC vectorized the scalar loop
// with 4-lane vectors and a widening per step: ~16% of a llama-3.2-1b pp64 on the exact head.)
void dq_q6_k_avx512(const uint8_t * b, float * out) {
    const uint8_t * ql = b;
    const uint8_t * qh = b + 128;
    const auto *    sc = reinterpret_cast<const int8_t *>(b + 192);
    const float     d  = half_to_float(b + 208);
    const __m128i   m4 = _mm_set1_epi8(0x0f), m2 = _mm_set1_epi8(3);
    const __m512i   c32 = _mm512_set1_epi32(32);
    for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < 4; ++k) {
            for (int half = 0; half < 2; ++half) {
                const float   ds = d * static_cast<float>(sc[8 * h + 2 * k + half]);
                const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i *>(ql + 64 * h + 32 * (k & 1) + 16 * half));
                const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qh + 32 * h + 16 * half));
                const __m128i l4 = _mm_and_si128(k >> 1 ? _mm_srli_epi16(lo, 4) : lo, m4);
                const __m128i h2 = _mm_and_si128(_mm_srl_epi16(hi, _mm_cvtsi32_si128(2 * k)), m2);
                const __m128i q  = _mm_or_si128(l4, _mm_slli_epi16(h2, 4));  // (h2 <= 3: no carry across bytes)
                const __m512  v  = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(q), c32));
                _mm512_storeu_ps(out + 128 * h + 32 * k + 16 * half, _mm512_mul_ps(_mm512_set1_ps(ds), v));
            }
        }
    }
}

bool dequant_rows(uint32_t type, const uint8_t * src, int64_t row_bytes, int64_t n_rows, int64_t k, float * out) {
    if (type == k_type_q6_k) {
        for (int64_t r = 0; r < n_rows; ++r) {
            for (int64_t b = 0; b < k / 256; ++b) dq_q6_k_avx512(src + r * row_bytes + 210 * b, out + r * k + 256 * b);
        }
        return true;
    }
    return dequant_rows_impl(type, src, row_bytes, n_rows, k, out);
}
void row_sumsq(const float * rows, int64_t n_rows, int64_t k, double * sumsq) { row_sumsq_impl(rows, n_rows, k, sumsq); }

}  // namespace

void add_attention_and_head_avx512(Kernels & set);  // kernels_avx512_attn.cpp
void add_qblock_avx512(Kernels & set);              // kernels_avx512_q.cpp
void ternary_gemm_base3_vbmi(const TernaryTiles & w, int64_t tile0, int64_t tile1, const ActView & a, float * y,
                             int64_t ldy, int64_t row0, bool accumulate);  // kernels_avx512_vbmi.cpp

namespace {
void ternary_gemm_vbmi(const TernaryTiles & w, int64_t tile0, int64_t tile1, const ActView & a, float * y, int64_t ldy,
                       int64_t row0, bool accumulate) {
    if (w.base3) {
        ternary_gemm_base3_vbmi(w, tile0, tile1, a, y, ldy, row0, accumulate);
    } else {
        ternary_gemm(w, tile0, tile1, a, y, ldy, row0, accumulate);
    }
}
}  // namespace

const Kernels * kernels_avx512_multiply() {
    static const Kernels k = [] {
        Kernels set{.name = "avx512-vnni", .base3 = false, .tile_to_base3 = tile_to_base3, .ternary_gemm = ternary_gemm,
                    .sum_squares = sum_squares, .norm_apply = norm_apply, .quantize_row = quantize_row, .rope = rope, .f32_to_f16 = f32_to_f16,
                    .q8_0_blocks = q8_0_blocks, .gate_act = gate_act, .dequant_rows = dequant_rows, .read_bytes = read_bytes,
                    .row_sumsq = row_sumsq};
        add_attention_and_head_avx512(set);
        add_qblock_avx512(set);
        return set;
    }();
    return &k;
}

const Kernels * kernels_avx512_vbmi() {
    static const Kernels k = [] {
        Kernels v      = *kernels_avx512_multiply();
        v.name         = "avx512-vnni-vbmi";
        v.ternary_gemm = ternary_gemm_vbmi;
        return v;
    }();
    return __builtin_cpu_supports("avx512vbmi") ? &k : nullptr;
}

const Kernels * kernels_avx512() {
    const Kernels * v = kernels_avx512_vbmi();
    return v ? v : kernels_avx512_multiply();
}

}  // namespace tern::cpu
