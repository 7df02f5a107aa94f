// AVX2 attention and head kernels: kernels_avx512_attn.cpp's algorithms on 8-lane vectors (the
// transposed K keeps its blocks of 16 positions, two vectors each; the exact head puts 4 rows per
// vector of doubles).
#include "backend/cpu/position_sum_chains.h"
#include "backend/cpu/simd_avx2.h"

namespace tern::cpu {
namespace {

using namespace avx2;

inline __m256 load_cache8(const CacheView & c, const void * base, bool f16, int64_t p, int64_t d) {
    const int64_t at = p * c.stride + c.first + d;
    return f16 ? load_f16(static_cast<const uint16_t *>(base) + at) : _mm256_loadu_ps(static_cast<const float *>(base) + at);
}

void attention_prepare(const CacheView & c, int64_t n_pos, float * kt, float * v) {
    const int64_t hd = c.head_dim;
    for (int64_t b = 0; b * 16 < n_pos; ++b) {
        for (int64_t half = 0; half < 2; ++half) {
            for (int64_t d0 = 0; d0 < hd; d0 += 8) {
                __m256 r[8];
                for (int64_t j = 0; j < 8; ++j) {
                    const int64_t p = b * 16 + half * 8 + j < n_pos ? b * 16 + half * 8 + j : n_pos - 1;
                    r[j]            = load_cache8(c, c.k, c.f16_k, p, d0);
                }
                transpose8(r);
                for (int64_t j = 0; j < 8; ++j) _mm256_storeu_ps(kt + (b * hd + d0 + j) * 16 + half * 8, r[j]);
            }
        }
    }
    for (int64_t p = 0; p < n_pos; ++p) {
        for (int64_t d0 = 0; d0 < hd; d0 += 8) _mm256_storeu_ps(v + p * hd + d0, load_cache8(c, c.v, c.f16_v, p, d0));
    }
}

// Where the kernels read K and V (as in kernels_avx512_attn.cpp): a prepared head
// (attention_prepare's kt / v) or the cache itself (attention_cache: 8 positions of 8 dimensions
// transposed in registers, f16 converted as loaded; the same values, so the same sums).
struct PreparedK {
    const float * kt;
    int64_t       hd;
    // k[j] lane i = dimension d0 + j of position 16 b + 8 half + i.
    void load(int64_t b, int64_t half, int64_t d0, __m256 k[16]) const {
        const float * kb = kt + b * hd * 16 + half * 8;
        for (int j = 0; j < 16; ++j) k[j] = _mm256_loadu_ps(kb + (d0 + j) * 16);
    }
};
struct CacheK {
    const CacheView & c;
    int64_t           n;  // positions; padding lanes repeat the last, as attention_prepare's do
    void load(int64_t b, int64_t half, int64_t d0, __m256 k[16]) const {
#pragma GCC unroll 2
        for (int64_t part = 0; part < 2; ++part) {
            __m256 * r = k + 8 * part;
#pragma GCC unroll 8
            for (int64_t j = 0; j < 8; ++j) {
                const int64_t p = b * 16 + half * 8 + j < n ? b * 16 + half * 8 + j : n - 1;
                r[j]            = load_cache8(c, c.k, c.f16_k, p, d0 + 8 * part);
            }
            transpose8(r);
        }
    }
};
struct PreparedV {
    const float * v;
    int64_t       hd;
    __m256 load(int64_t p, int64_t d) const { return _mm256_loadu_ps(v + p * hd + d); }  // dimensions d .. d + 7
};
struct CacheV {
    const CacheView & c;
    __m256 load(int64_t p, int64_t d) const { return load_cache8(c, c.v, c.f16_v, p, d); }
};

// P . V for GN heads and DN * 8 dimensions from d0 (kernels_avx512_attn.cpp's pv_block_sums: the
// position order without joins, issue 52's block order of one superblock with them, bj[g] head g's).
template <int GN, int DN, class V>
void pv_heads(const V & vs, int64_t hd, const float * probs, int64_t ld_probs, int64_t n, int64_t d0, const BlockJoins * bj,
              float * out) {
    // blk (GN x DN <= 8 vectors) stays in registers for a block of 32 positions; super and total
    // are touched once per block (the 16 ymm registers cannot hold all three).
    __m256        super[GN][DN], total[GN][DN];
    for (int g = 0; g < GN; ++g) {
        for (int i = 0; i < DN; ++i) super[g][i] = total[g][i] = _mm256_setzero_ps();
    }
    for (int64_t p0 = 0; p0 < n; p0 += 32) {
        const int64_t pe = p0 + 32 < n ? p0 + 32 : n;
        __m256        blk[GN][DN];
#pragma GCC unroll 4
        for (int g = 0; g < GN; ++g) {
#pragma GCC unroll 2
            for (int i = 0; i < DN; ++i) blk[g][i] = _mm256_setzero_ps();
        }
        for (int64_t p = p0; p < pe; ++p) {
            __m256 v[DN];
#pragma GCC unroll 2
            for (int i = 0; i < DN; ++i) v[i] = vs.load(p, d0 + 8 * i);
#pragma GCC unroll 4
            for (int g = 0; g < GN; ++g) {
                const __m256 pb = _mm256_set1_ps(probs[g * ld_probs + p]);
#pragma GCC unroll 2
                for (int i = 0; i < DN; ++i) blk[g][i] = _mm256_add_ps(blk[g][i], _mm256_mul_ps(pb, v[i]));
            }
        }
        if (bj != nullptr) {  // super: the chunk's O_c; total: the superblock's join of its chunks
            const int64_t b = p0 / 32;
            for (int g = 0; g < GN; ++g) {
                const __m256 a = _mm256_set1_ps(bj[g].a[b]);
                for (int i = 0; i < DN; ++i) {
                    super[g][i] = _mm256_add_ps(b % 2 == 0 ? _mm256_setzero_ps() : super[g][i], _mm256_mul_ps(a, blk[g][i]));
                }
            }
            if (b % 2 == 1 || pe == n) {
                for (int g = 0; g < GN; ++g) {
                    const __m256 w = _mm256_set1_ps(bj[g].A[b / 2]);
                    for (int i = 0; i < DN; ++i) total[g][i] = _mm256_add_ps(total[g][i], _mm256_mul_ps(w, super[g][i]));
                }
            }
            continue;
        }
        for (int g = 0; g < GN; ++g) {
            for (int i = 0; i < DN; ++i) super[g][i] = _mm256_add_ps(super[g][i], blk[g][i]);
        }
        if (pe % 512 == 0) {
            for (int g = 0; g < GN; ++g) {
                for (int i = 0; i < DN; ++i) {
                    total[g][i] = _mm256_add_ps(total[g][i], super[g][i]);
                    super[g][i] = _mm256_setzero_ps();
                }
            }
        }
    }
    for (int g = 0; g < GN; ++g) {
        for (int i = 0; i < DN; ++i) {
            _mm256_storeu_ps(out + g * hd + d0 + 8 * i, bj != nullptr ? total[g][i] : _mm256_add_ps(total[g][i], super[g][i]));
        }
    }
}

template <int GN, class V>
void pv_dims(const V & vs, int64_t hd, const float * probs, int64_t ld, int64_t n, const BlockJoins * bj, float * out) {
    for (int64_t d0 = 0; d0 < hd; d0 += 16) pv_heads<GN, 2>(vs, hd, probs, ld, n, d0, bj, out);
}

// The single-pass softmax of one superblock in place of head g's scores s[0 .. n) (n16: n rounded up
// to 16, the lanes scores_heads wrote): e_i = exp_fixed(s_i - max), sum in the position order,
// p_i = e_i * (1 / sum), then f16(p) where V is f16; the max and sum to *mx_out, *sum_out.
inline void softmax_head(float * s, int64_t n, bool v_f16, float * mx_out, float * sum_out) {
    const int64_t n16 = (n + 15) & ~int64_t{15};
    float         mx  = -__builtin_inff();
    for (int64_t p = 0; p < n; ++p) mx = s[p] > mx ? s[p] : mx;
    const __m256 max = _mm256_set1_ps(mx);
    for (int64_t p = 0; p < n16; p += 8) _mm256_storeu_ps(s + p, exp_fixed(_mm256_sub_ps(_mm256_loadu_ps(s + p), max)));
    for (int64_t p = n; p < n16; ++p) s[p] = 0.0f;
    const float  sum = sum_positions_chains(s, n);
    const __m256 inv = _mm256_set1_ps(1.0f / sum);
    *mx_out          = mx;
    *sum_out         = sum;
    for (int64_t p = 0; p < n16; p += 8) {
        const __m256 pr = _mm256_mul_ps(_mm256_loadu_ps(s + p), inv);
        _mm256_storeu_ps(s + p, v_f16 ? round_f16(pr) : pr);
    }
}

// The block order instead (issue 52; one superblock of a longer row): per block of 32 positions
// m_b = max(-FLT_MAX, its scores) and e_i = exp_fixed(s_i - m_b) in place (p_i = e_i), l_b its
// chain, and the joins P.V applies (position_sum_chains.h). Two passes, every block's max, then the
// exps (as on AVX-512: one pass per block waited on each block's reduction).
inline void softmax_blocks(float * s, int64_t n, bool v_f16, BlockJoins & j) {
    float         m[16], l[16];
    const int64_t nb = (n + 31) / 32;
    for (int64_t b = 0; b < nb; ++b) {
        const float * sb  = s + 32 * b;
        const int64_t rem = n - 32 * b;
        __m256        mx  = _mm256_set1_ps(-__FLT_MAX__);
        for (int i = 0; i < 4; ++i) {  // lanes max(s, mx): mx where s is NaN or an equal zero, or past n
            const __m256 x = load_tail(sb + 8 * i, rem - 8 * i);
            mx             = _mm256_blendv_ps(mx, _mm256_max_ps(x, mx), _mm256_castsi256_ps(tail_mask(rem - 8 * i)));
        }
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, mx);
        float mb = lanes[0];
        for (int i = 1; i < 8; ++i) mb = max_first(mb, lanes[i]);
        m[b] = block_max_as_reference(mb, sb, rem);
    }
    // (whole vectors to n rounded up to 16, as softmax_head: the lanes past n hold scores_heads' padding)
    const int64_t n16 = (n + 15) & ~int64_t{15};
    for (int64_t p = 0; p < n16; p += 8) {
        _mm256_storeu_ps(s + p, exp_fixed(_mm256_sub_ps(_mm256_loadu_ps(s + p), _mm256_set1_ps(m[p / 32]))));
    }
    block_chains(s, n, l);
    if (v_f16) {
        for (int64_t p = 0; p < n16; p += 8) _mm256_storeu_ps(s + p, round_f16(_mm256_loadu_ps(s + p)));
    }
    block_joins(m, l, nb, [](float * x) {
        _mm256_store_ps(x, exp_fixed(_mm256_load_ps(x)));
        _mm256_store_ps(x + 8, exp_fixed(_mm256_load_ps(x + 8)));
    }, j);
}

// Scores for 8 positions per vector (half a block of 16), up to 4 heads.
template <int GN, class K>
void scores_heads(const K & ks, int64_t hd, const float * qh, int64_t n, float scale, float * scores, int64_t ld) {
    for (int64_t b = 0; b * 16 < n; ++b) {
        for (int64_t half = 0; half < 2; ++half) {
            __m256 acc[GN];
            for (int g = 0; g < GN; ++g) acc[g] = _mm256_setzero_ps();
            for (int64_t d0 = 0; d0 < hd; d0 += 16) {
                __m256 k[16];
                ks.load(b, half, d0, k);
                for (int g = 0; g < GN; ++g) {
                    __m256 s = _mm256_setzero_ps();
                    for (int j = 0; j < 16; ++j) s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_set1_ps(qh[g * hd + d0 + j]), k[j]));
                    acc[g] = _mm256_add_ps(acc[g], s);
                }
            }
            for (int g = 0; g < GN; ++g) _mm256_storeu_ps(scores + g * ld + b * 16 + half * 8, _mm256_mul_ps(acc[g], _mm256_set1_ps(scale)));
        }
    }
}

template <class K, class V>
void attention_from(const K & ks, const V & vs, int64_t hd, bool k_f16, bool v_f16, const AttentionJob & job,
                    float * scratch) {
    const int64_t n = job.n_pos, ld = n + 16;
    float *       scores = scratch;
    float *       qh     = scratch + job.n_q * ld;
    for (int64_t i = 0; i < job.n_q * hd; i += 8) {
        const __m256 q = _mm256_loadu_ps(job.q + i);
        _mm256_storeu_ps(qh + i, k_f16 ? round_f16(q) : q);
    }
    for (int64_t g0 = 0; g0 < job.n_q; g0 += 4) {
        switch (job.n_q - g0 < 4 ? job.n_q - g0 : 4) {
            case 4: scores_heads<4>(ks, hd, qh + g0 * hd, n, job.scale, scores + g0 * ld, ld); break;
            case 3: scores_heads<3>(ks, hd, qh + g0 * hd, n, job.scale, scores + g0 * ld, ld); break;
            case 2: scores_heads<2>(ks, hd, qh + g0 * hd, n, job.scale, scores + g0 * ld, ld); break;
            default: scores_heads<1>(ks, hd, qh + g0 * hd, n, job.scale, scores + g0 * ld, ld); break;
        }
    }
    for (int64_t g0 = 0; g0 < job.n_q; g0 += 4) {
        const int64_t gn = job.n_q - g0 < 4 ? job.n_q - g0 : 4;
        BlockJoins    bj[4];
        for (int64_t g = g0; g < g0 + gn; ++g) {
            float * s  = scores + g * ld;
            float   mx = 0.0f, sum = 0.0f;
            if (job.blocks) {
                softmax_blocks(s, n, v_f16, bj[g - g0]);
                mx  = bj[g - g0].m;
                sum = bj[g - g0].l;
            } else {
                softmax_head(s, n, v_f16, &mx, &sum);
            }
            if (job.sup_max != nullptr) {
                job.sup_max[g] = mx;
                job.sup_sum[g] = sum;
            }
        }
        const BlockJoins * j  = job.blocks ? bj : nullptr;
        const float *      pg = scores + g0 * ld;
        float *            og = job.out + g0 * hd;
        switch (gn) {
            case 4: pv_dims<4>(vs, hd, pg, ld, n, j, og); break;
            case 3: pv_dims<3>(vs, hd, pg, ld, n, j, og); break;
            case 2: pv_dims<2>(vs, hd, pg, ld, n, j, og); break;
            default: pv_dims<1>(vs, hd, pg, ld, n, j, og); break;
        }
    }
}

// ------------------------------------------------------------------------- exact head rows

void attention(const AttentionKv & kv, const AttentionJob & job, float * scratch) {
    attention_from(PreparedK{kv.kt, kv.head_dim}, PreparedV{kv.v, kv.head_dim}, kv.head_dim, kv.k_f16, kv.v_f16, job,
                   scratch);
}

void attention_cache(const CacheView & c, const AttentionJob & job, float * scratch) {
    attention_from(CacheK{c, job.n_pos}, CacheV{c}, c.head_dim, c.f16_k, c.f16_v, job, scratch);
}

template <class T> inline __m256 load_row8(const T * p) {
    if constexpr (sizeof(T) == 2) {
        return load_f16(reinterpret_cast<const uint16_t *>(p));
    } else {
        return _mm256_loadu_ps(reinterpret_cast<const float *>(p));
    }
}
template <class T> inline double load_row1(const T * p) {
    if constexpr (sizeof(T) == 2) {
        return static_cast<double>(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(*reinterpret_cast<const uint16_t *>(p)))));
    } else {
        return static_cast<double>(*reinterpret_cast<const float *>(p));
    }
}

// NB blocks of 4 rows in flight; 4 rows x 8 columns transposed per step (4 lanes of doubles).
template <class T, int NB>
void rows_dot_block(const T * table, int64_t row_stride, int64_t r, int64_t r_end, int64_t k, const float * h, float * out) {
    const T * rows[NB * 4];
    for (int j = 0; j < NB * 4; ++j) rows[j] = table + (r + j < r_end ? r + j : r_end - 1) * row_stride;
    __m256d acc[NB];
    for (int b = 0; b < NB; ++b) acc[b] = _mm256_setzero_pd();
    const int64_t k8 = k & ~int64_t{7};
    for (int64_t i = 0; i < k8; i += 8) {
        for (int b = 0; b < NB; ++b) {
            const __m256 r0 = load_row8(rows[4 * b] + i), r1 = load_row8(rows[4 * b + 1] + i);
            const __m256 r2 = load_row8(rows[4 * b + 2] + i), r3 = load_row8(rows[4 * b + 3] + i);
            const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
            const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
            // u_c, 128-bit lane L: rows 0..3 of column 4L + c
            const __m256 u[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
                                 _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE)};
            for (int c = 0; c < 4; ++c) {
                acc[b] = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(u[c])), _mm256_set1_pd(static_cast<double>(h[i + c])), acc[b]);
            }
            for (int c = 0; c < 4; ++c) {
                acc[b] = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(u[c], 1)), _mm256_set1_pd(static_cast<double>(h[i + 4 + c])), acc[b]);
            }
        }
    }
    for (int b = 0; b < NB; ++b) {
        alignas(32) double s[4];
        _mm256_store_pd(s, acc[b]);
        for (int j = 0; j < 4; ++j) {
            for (int64_t i = k8; i < k; ++i) s[j] += load_row1(rows[b * 4 + j] + i) * static_cast<double>(h[i]);
            if (r + b * 4 + j < r_end) out[b * 4 + j] = static_cast<float>(s[j]);
        }
    }
}

template <class T>
void rows_dot(const T * table, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const float * h, int64_t n_tokens,
              float * logits, int64_t ld) {
    for (int64_t t = 0; t < n_tokens; ++t) {
        int64_t r = r0;
        for (; r + 16 <= r1; r += 16) rows_dot_block<T, 4>(table, row_stride, r, r1, k, h + t * k, logits + t * ld + r - r0);
        for (; r < r1; r += 4) rows_dot_block<T, 1>(table, row_stride, r, r1, k, h + t * k, logits + t * ld + r - r0);
    }
}

// Any-order double sums with the rounding check (cpu_kernels.h: f16_rows_dot_checked).
template <bool H_F16>
void rows_dot_checked(const uint16_t * table, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const float * h,
                      int64_t n_tokens, float * logits, int64_t ld, const float * e_abs, const float * h_absmax) {
    const double  gamma2 = 2.0 * static_cast<double>(k + 16) * 0x1p-53 * (1.0 + 0x1p-20);
    const int64_t k8     = k & ~int64_t{7};
    for (int64_t r = r0; r < r1; ++r) {
        const uint16_t * e = table + r * row_stride;
        for (int64_t t = 0; t < n_tokens; ++t) {
            const float * ht = h + t * k;
            __m256d       a0 = _mm256_setzero_pd(), a1 = a0;
            for (int64_t i = 0; i < k8; i += 8) {
                const __m256 ev = load_f16(e + i), hv = _mm256_loadu_ps(ht + i);
                if constexpr (H_F16) {
                    const __m256 p = _mm256_mul_ps(ev, hv);  // f16 x f16: exact in f32
                    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
                    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
                } else {
                    a0 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(ev)), _mm256_cvtps_pd(_mm256_castps256_ps128(hv)), a0);
                    a1 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(ev, 1)), _mm256_cvtps_pd(_mm256_extractf128_ps(hv, 1)), a1);
                }
            }
            alignas(32) double l[4];
            _mm256_store_pd(l, _mm256_add_pd(a0, a1));
            double d = (l[0] + l[1]) + (l[2] + l[3]);
            for (int64_t i = k8; i < k; ++i) d += load_row1(e + i) * static_cast<double>(ht[i]);
            double w = gamma2 * static_cast<double>(h_absmax[t]) * static_cast<double>(e_abs[r - r0]);
            w += ((d < 0 ? -d : d) + w) * 0x1p-50;
            const float lo = static_cast<float>(d - w), hi = static_cast<float>(d + w);
            float       v  = lo;
            uint32_t    blo, bhi;
            __builtin_memcpy(&blo, &lo, 4);
            __builtin_memcpy(&bhi, &hi, 4);
            if (!(blo == bhi && lo - lo == 0.0f)) rows_dot_block<uint16_t, 1>(table, row_stride, r, r + 1, k, ht, &v);
            logits[t * ld + r - r0] = v;
        }
    }
}

// int8 x int16 with vpmaddwd (H rebuilt from its bytes once per 16 columns for all rows); lanes
// flushed to 64 bits every 4096 columns (at most 512 products of |q| <= 127, |H| <= 32767 each).
template <int NR>
void i8_rows_block(const int8_t * q, int64_t row_stride, int64_t r, int64_t k, const uint8_t * hi, const uint8_t * lo,
                   int64_t * dots) {
    int64_t           tot[NR] = {};
    const StreamAhead ahead;  // page and line requests of each row's stream (tile_loop.h)
    for (int64_t c0 = 0; c0 < k; c0 += 4096) {
        const int64_t c1 = c0 + 4096 < k ? c0 + 4096 : k;
        __m256i       acc[NR];
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) acc[j] = _mm256_setzero_si256();
        int64_t i = c0;
        for (; i + 16 <= c1; i += 16) {
            if ((i & 63) == 0) {  // the NR rows' next lines (c0 is a multiple of 64)
#pragma GCC unroll 4
                for (int j = 0; j < NR; ++j) ahead.at<64>(q + (r + j) * row_stride + i);
            }
            const __m256i hv = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(hi + i))), _mm256_set1_epi16(128));
            const __m256i H  = _mm256_add_epi16(_mm256_slli_epi16(hv, 8), _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(lo + i))));
#pragma GCC unroll 4
            for (int j = 0; j < NR; ++j) {  // (unrolled: GCC 12 kept the loop and acc[j] in memory)
                const __m256i qv = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q + (r + j) * row_stride + i)));
                acc[j]           = _mm256_add_epi32(acc[j], _mm256_madd_epi16(qv, H));
            }
        }
        for (int j = 0; j < NR; ++j) {
            alignas(32) int32_t l[8];
            _mm256_store_si256(reinterpret_cast<__m256i *>(l), acc[j]);
            for (int x = 0; x < 8; ++x) tot[j] += l[x];
            for (int64_t e = i; e < c1; ++e) {
                tot[j] += static_cast<int64_t>(q[(r + j) * row_stride + e]) * (((hi[e] - 128) * 256) + lo[e]);
            }
        }
    }
    for (int j = 0; j < NR; ++j) dots[j] = tot[j];
}

void i8_rows_dot_i16(const int8_t * q, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const uint8_t * hi,
                     const uint8_t * lo, const int32_t * /*q_sums: unused*/, int64_t * dots) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) i8_rows_block<4>(q, row_stride, r, k, hi, lo, dots + (r - r0));
    for (; r < r1; ++r) i8_rows_block<1>(q, row_stride, r, k, hi, lo, dots + (r - r0));
}

// Q6_K rows against int8 activations (cpu_kernels.h): 32 columns per step (vpmaddubsw: codes
// <= 63 against |h8| <= 127, pairs below 2^15), lane i of a step = columns 4i .. 4i + 3.
void q6k_rows_dot_i8(const uint8_t * table, int64_t row_bytes, int64_t r0, int64_t r1, int64_t k, const int8_t * h8,
                     const int32_t * h8_sum4, double * f) {
    const __m256i     m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    const StreamAhead ahead;  // page and line requests (tile_loop.h)
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t * row = table + r * row_bytes;
        __m256          acc = _mm256_setzero_ps();
        for (int64_t b = 0; b < k / 256; ++b) {
            const uint8_t * blk = row + 210 * b;
            ahead.at<210>(blk);  // the block's 4 lines
            const float     d   = _cvtsh_ss(static_cast<unsigned short>(blk[208] | (blk[209] << 8)));
            float           ds[16];
            for (int j = 0; j < 16; ++j) ds[j] = d * static_cast<float>(static_cast<int8_t>(blk[192 + j]));
            for (int h = 0; h < 2; ++h) {
                const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk + 64 * h));
                const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk + 64 * h + 32));
                const __m256i qh  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk + 128 + 32 * h));
                for (int kk = 0; kk < 4; ++kk) {
                    const __m256i lo  = (kk & 1) ? ql1 : ql0;
                    const __m256i nib = _mm256_and_si256(kk >= 2 ? _mm256_srli_epi16(lo, 4) : lo, m4);
                    const __m256i top = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * kk), m2), 4);
                    const __m256i q   = _mm256_or_si256(nib, top);
                    const int64_t col = 256 * b + 128 * h + 32 * kk;
                    __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(q, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(h8 + col))), ones);
                    dot = _mm256_sub_epi32(dot, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(h8_sum4 + col / 4)), 5));
                    const int    sb    = 8 * h + 2 * kk;
                    const __m256 lanes = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(ds[sb])), _mm_set1_ps(ds[sb + 1]), 1);
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(dot), lanes));
                }
            }
        }
        const __m256d s = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(acc)), _mm256_cvtps_pd(_mm256_extractf128_ps(acc, 1)));
        alignas(32) double l[4];
        _mm256_store_pd(l, s);
        f[r - r0] = (l[0] + l[1]) + (l[2] + l[3]);
    }
}

void head_i8_rows(const uint16_t * table, int64_t r0, int64_t r1, int64_t k, int8_t * q, HeadI8Row * rows) {
    for (int64_t r = r0; r < r1; ++r) {
        const uint16_t * e  = table + r * k;
        const int64_t    k8 = k & ~int64_t{7};
        __m256           mx = _mm256_setzero_ps();
        for (int64_t i = 0; i < k8; i += 8) mx = _mm256_max_ps(mx, abs_ps(load_f16(e + i)));
        alignas(32) float m8[8];
        _mm256_store_ps(m8, mx);
        float amax = 0.0f;
        for (float v : m8) amax = v > amax ? v : amax;
        for (int64_t i = k8; i < k; ++i) {
            const float v = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(e[i])));
            amax          = (v < 0 ? -v : v) > amax ? (v < 0 ? -v : v) : amax;
        }
        const float   s  = amax / 127.0f;
        const __m256  sv = _mm256_set1_ps(s);
        const __m256d sd = _mm256_set1_pd(static_cast<double>(s));
        __m256d       dd = _mm256_setzero_pd(), ee = _mm256_setzero_pd(), ea = _mm256_setzero_pd();
        __m256i       qq = _mm256_setzero_si256(), qs = _mm256_setzero_si256();
        for (int64_t i = 0; i < k8; i += 8) {
            const __m256 ev = load_f16(e + i);
            __m256       qf = s > 0.0f ? _mm256_round_ps(_mm256_div_ps(ev, sv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
                                       : _mm256_setzero_ps();
            qf               = _mm256_min_ps(_mm256_max_ps(qf, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
            const __m256i qi = _mm256_cvtps_epi32(qf);
            const __m128i w  = _mm_packs_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
            _mm_storel_epi64(reinterpret_cast<__m128i *>(q + r * k + i), _mm_packs_epi16(w, w));
            qq = _mm256_add_epi32(qq, _mm256_mullo_epi32(qi, qi));
            qs = _mm256_add_epi32(qs, qi);
            for (int h = 0; h < 2; ++h) {
                const __m256d e4 = _mm256_cvtps_pd(h ? _mm256_extractf128_ps(ev, 1) : _mm256_castps256_ps128(ev));
                const __m256d q4 = _mm256_cvtps_pd(h ? _mm256_extractf128_ps(qf, 1) : _mm256_castps256_ps128(qf));
                const __m256d d4 = _mm256_sub_pd(e4, _mm256_mul_pd(sd, q4));
                dd = _mm256_fmadd_pd(d4, d4, dd);
                ee = _mm256_fmadd_pd(e4, e4, ee);
                ea = _mm256_add_pd(ea, _mm256_andnot_pd(_mm256_set1_pd(-0.0), e4));
            }
        }
        alignas(32) double  a[4], b[4], ab[4];
        _mm256_store_pd(ab, ea);
        alignas(32) int32_t c[8], d[8];
        _mm256_store_pd(a, dd);
        _mm256_store_pd(b, ee);
        _mm256_store_si256(reinterpret_cast<__m256i *>(c), qq);
        _mm256_store_si256(reinterpret_cast<__m256i *>(d), qs);
        HeadI8Row & row = rows[r - r0];
        row             = HeadI8Row{s, 0, a[0] + a[1] + a[2] + a[3], 0, b[0] + b[1] + b[2] + b[3], ab[0] + ab[1] + ab[2] + ab[3]};
        for (int x = 0; x < 8; ++x) {
            row.qq += c[x];
            row.q_sum += d[x];
        }
        for (int64_t i = k8; i < k; ++i) {  // the tail, one by one
            const float v  = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(e[i])));
            float       qf = s > 0.0f ? __builtin_nearbyintf(v / s) : 0.0f;
            qf             = qf < -127.0f ? -127.0f : qf > 127.0f ? 127.0f : qf;
            const int qi   = static_cast<int>(qf);
            q[r * k + i]   = static_cast<int8_t>(qi);
            const double dv = static_cast<double>(v) - static_cast<double>(s) * qi;
            row.dd += dv * dv;
            row.ee += static_cast<double>(v) * v;
            row.ea += v < 0 ? -static_cast<double>(v) : static_cast<double>(v);
            row.qq += qi * qi;
            row.q_sum += qi;
        }
    }
}

void f16_rows_dot_checked(const uint16_t * table, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const float * h,
                          int64_t n_tokens, float * logits, int64_t ld, const float * e_abs, const float * h_absmax,
                          bool h_f16) {
    if (h_f16) {
        rows_dot_checked<true>(table, row_stride, r0, r1, k, h, n_tokens, logits, ld, e_abs, h_absmax);
    } else {
        rows_dot_checked<false>(table, row_stride, r0, r1, k, h, n_tokens, logits, ld, e_abs, h_absmax);
    }
}

}  // namespace

// The attention and head entries of the avx2 table (kernels_avx2.cpp fills in the rest).
void add_attention_and_head_avx2(Kernels & set) {
    set.attention_prepare    = attention_prepare;
    set.attention            = attention;
    set.attention_cache      = attention_cache;
    set.f16_rows_dot         = rows_dot<uint16_t>;
    set.f16_rows_dot_checked = f16_rows_dot_checked;
    set.f32_rows_dot         = rows_dot<float>;
    set.head_i8_rows         = head_i8_rows;
    set.q6k_rows_dot_i8      = q6k_rows_dot_i8;
    set.i8_rows_dot_i16      = i8_rows_dot_i16;
}

}  // namespace tern::cpu
