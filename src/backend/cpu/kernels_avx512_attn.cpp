// AVX-512 attention and head kernels (see kernels_avx512.cpp). The reference sums some things in
// orders that run along a vector (a head's dot product in blocks of 16, the softmax denominator in
// blocks of 32 positions, a head row's dot product in double from column 0), so these kernels put
// the independent sums side by side in the lanes instead: 16 cache positions per vector for the
// scores (K transposed in registers, or once per call by attention_prepare), 8 table rows per
// vector of doubles for the exact head; the denominator's blocks of 32 positions as scalar chains.
#include "backend/cpu/position_sum_chains.h"
#include "backend/cpu/simd_avx512.h"

namespace tern::cpu {
namespace {

using namespace avx512;

// In place: r[j] lane i <- r[i] lane j.
__attribute__((always_inline)) inline void transpose16(__m512 r[16]) {
    __m512 t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
        t[2 * i]     = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {  // r[4i + c], 128-bit lane L: rows 4i .. 4i + 3 of column 4L + c
        const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
        const __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i]     = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    __m512 o[16];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
        const __m512 a = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), b = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xDD);
        const __m512 e = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88), f = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xDD);
        o[c]      = _mm512_shuffle_f32x4(a, e, 0x88);
        o[8 + c]  = _mm512_shuffle_f32x4(a, e, 0xDD);
        o[4 + c]  = _mm512_shuffle_f32x4(b, f, 0x88);
        o[12 + c] = _mm512_shuffle_f32x4(b, f, 0xDD);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) r[i] = o[i];
}

inline __m512 load_cache16(const CacheView & c, const void * base, bool f16, int64_t p, int64_t d) {
    const int64_t at = p * c.stride + c.first + d;
    return f16 ? load_f16(static_cast<const uint16_t *>(base) + at) : _mm512_loadu_ps(static_cast<const float *>(base) + at);
}

void attention_prepare(const CacheView & c, int64_t n_pos, float * kt, float * v) {
    const int64_t hd = c.head_dim;
    for (int64_t b = 0; b * 16 < n_pos; ++b) {
        for (int64_t d0 = 0; d0 < hd; d0 += 16) {
            __m512 r[16];
            for (int64_t j = 0; j < 16; ++j) {
                const int64_t p = b * 16 + j < n_pos ? b * 16 + j : n_pos - 1;  // padding lanes repeat the last
                r[j]            = load_cache16(c, c.k, c.f16_k, p, d0);
            }
            transpose16(r);
            for (int64_t j = 0; j < 16; ++j) _mm512_storeu_ps(kt + (b * hd + d0 + j) * 16, r[j]);
        }
    }
    for (int64_t p = 0; p < n_pos; ++p) {
        for (int64_t d0 = 0; d0 < hd; d0 += 16) _mm512_storeu_ps(v + p * hd + d0, load_cache16(c, c.v, c.f16_v, p, d0));
    }
}

// Where attention_from reads K and V: a prepared head (attention_prepare's kt / v; attention_cache
// below reads the cache itself).
struct PreparedK {
    const float * kt;
    int64_t       hd;
    // k[j] lane i = dimension d0 + j of position 16 b + i.
    void load(int64_t b, int64_t d0, __m512 k[16]) const {
        for (int j = 0; j < 16; ++j) k[j] = _mm512_loadu_ps(kt + (b * hd + d0 + j) * 16);
    }
};
struct PreparedV {
    const float * v;
    int64_t       hd;
    __m512 load(int64_t p, int64_t d) const { return _mm512_loadu_ps(v + p * hd + d); }  // dimensions d .. d + 15
};

// s + a b: fused where a b is exact (the attention_cache kernels: both factors f16, so the product
// fits an f32), else the product rounded, then the sum.
template <bool EXACT> inline __m512 mul_add(__m512 a, __m512 b, __m512 s) {
    if constexpr (EXACT) {
        return _mm512_fmadd_ps(a, b, s);
    } else {
        return _mm512_add_ps(s, _mm512_mul_ps(a, b));
    }
}

// P . V for GN heads and DN * 16 dimensions from d0 over n positions; load_v(p, v) puts position p's
// DN vectors of V in v. blk stays in registers for a block of 32 positions (GN * DN <= 16 vectors);
// super and total are touched once per block. Without joins (bj null) the position order
// (cpu::PositionSum: blk -> super -> total); with them issue 52's block order (one superblock of a
// longer row, unnormalised): blk is o_b, super the chunk's O_c = (0 + a_2c o_2c) + a_2c+1 o_2c+1,
// total the superblock's ((0 + A_0 O_0) + A_1 O_1) + ... (cpu::join_partials; bj[g]: head g's weights).
template <int GN, int DN, bool EXACT, class LoadV>
inline void pv_block_sums(int64_t n, const float * probs, int64_t ld, int64_t hd, int64_t d0, const BlockJoins * bj,
                          float * out, LoadV && load_v) {
    __m512 super[GN][DN], total[GN][DN];
    for (int g = 0; g < GN; ++g) {
        for (int i = 0; i < DN; ++i) super[g][i] = total[g][i] = _mm512_setzero_ps();
    }
    for (int64_t p0 = 0; p0 < n; p0 += 32) {
        const int64_t pe = p0 + 32 < n ? p0 + 32 : n;
        __m512        blk[GN][DN];
#pragma GCC unroll 16
        for (int g = 0; g < GN; ++g) {
#pragma GCC unroll 4
            for (int i = 0; i < DN; ++i) blk[g][i] = _mm512_setzero_ps();
        }
        for (int64_t p = p0; p < pe; ++p) {
            __m512 v[DN];
            load_v(p, v);
#pragma GCC unroll 4
            for (int g = 0; g < GN; ++g) {
                const __m512 pb = _mm512_set1_ps(probs[g * ld + p]);
#pragma GCC unroll 4
                for (int i = 0; i < DN; ++i) blk[g][i] = mul_add<EXACT>(pb, v[i], blk[g][i]);
            }
        }
        if (bj != nullptr) {
            const int64_t b = p0 / 32;
            for (int g = 0; g < GN; ++g) {
                const __m512 a = _mm512_set1_ps(bj[g].a[b]);
                for (int i = 0; i < DN; ++i) {
                    super[g][i] = _mm512_add_ps(b % 2 == 0 ? _mm512_setzero_ps() : super[g][i], _mm512_mul_ps(a, blk[g][i]));
                }
            }
            if (b % 2 == 1 || pe == n) {
                for (int g = 0; g < GN; ++g) {
                    const __m512 w = _mm512_set1_ps(bj[g].A[b / 2]);
                    for (int i = 0; i < DN; ++i) total[g][i] = _mm512_add_ps(total[g][i], _mm512_mul_ps(w, super[g][i]));
                }
            }
            continue;
        }
        for (int g = 0; g < GN; ++g) {
            for (int i = 0; i < DN; ++i) super[g][i] = _mm512_add_ps(super[g][i], blk[g][i]);
        }
        if (pe % 512 == 0) {
            for (int g = 0; g < GN; ++g) {
                for (int i = 0; i < DN; ++i) {
                    total[g][i] = _mm512_add_ps(total[g][i], super[g][i]);
                    super[g][i] = _mm512_setzero_ps();
                }
            }
        }
    }
    for (int g = 0; g < GN; ++g) {
        for (int i = 0; i < DN; ++i) {
            _mm512_storeu_ps(out + g * hd + d0 + 16 * i, bj != nullptr ? total[g][i] : _mm512_add_ps(total[g][i], super[g][i]));
        }
    }
}

// P . V from a prepared head or the cache view vs (vs.load(p, d): 16 dimensions of position p).
template <int GN, int DN, class V>
void pv_heads(const V & vs, int64_t hd, const float * probs, int64_t ld_probs, int64_t n, int64_t d0, const BlockJoins * bj,
              float * out) {
    pv_block_sums<GN, DN, false>(n, probs, ld_probs, hd, d0, bj, out, [&](int64_t p, __m512 * v) {
#pragma GCC unroll 4
        for (int i = 0; i < DN; ++i) v[i] = vs.load(p, d0 + 16 * i);
    });
}

template <int GN, class V>
void pv_dims(const V & vs, int64_t hd, const float * probs, int64_t ld, int64_t n, const BlockJoins * bj, float * out) {
    int64_t d0 = 0;
    for (; d0 + 64 <= hd; d0 += 64) pv_heads<GN, 4>(vs, hd, probs, ld, n, d0, bj, out);
    switch ((hd - d0) / 16) {
        case 3: pv_heads<GN, 3>(vs, hd, probs, ld, n, d0, bj, out); break;
        case 2: pv_heads<GN, 2>(vs, hd, probs, ld, n, d0, bj, out); break;
        case 1: pv_heads<GN, 1>(vs, hd, probs, ld, n, d0, bj, out); break;
        default: break;
    }
}

// Head g's probabilities in place of its scores s[0 .. n), then f16(p) where V is f16 (P.V's
// factors). The single-pass softmax of one superblock: e_i = exp_fixed(s_i - max), sum in the
// position order, p_i = e_i * (1 / sum); the max and sum to *mx_out, *sum_out.
inline void softmax_head(float * s, int64_t n, bool v_f16, float * mx_out, float * sum_out) {
    __m512 mx = _mm512_set1_ps(-__builtin_inff());
    for (int64_t p = 0; p < n; p += 16) mx = _mm512_mask_max_ps(mx, tail_mask(n - p), mx, _mm512_loadu_ps(s + p));
    const float  mx1 = _mm512_reduce_max_ps(mx);
    const __m512 max = _mm512_set1_ps(mx1);
    for (int64_t p = 0; p < n; p += 16) _mm512_storeu_ps(s + p, exp_fixed(_mm512_sub_ps(_mm512_loadu_ps(s + p), max)));
    const float  sum = sum_positions_chains(s, n);
    const __m512 inv = _mm512_set1_ps(1.0f / sum);
    *mx_out          = mx1;
    *sum_out         = sum;
    for (int64_t p = 0; p < n; p += 16) {
        const __m512 pr = _mm512_mul_ps(_mm512_loadu_ps(s + p), inv);
        _mm512_storeu_ps(s + p, v_f16 ? round_f16(pr) : pr);
    }
}

// The block order instead (issue 52; one superblock of a longer row): per block of 32 positions
// m_b = max(-FLT_MAX, its scores) and e_i = exp_fixed(s_i - m_b) in place (p_i = e_i, no
// normalisation), l_b its chain, and the joins P.V applies (position_sum_chains.h).
// Two passes, as softmax_head's: every block's max, then the exps (a max per block and its exps in
// one pass waited on each block's reduction: 30% more time than softmax_head).
inline void softmax_blocks(float * s, int64_t n, bool v_f16, BlockJoins & j) {
    float         m[16], l[16];
    const int64_t nb = (n + 31) / 32;
    for (int64_t b = 0; b < nb; ++b) {
        const float * sb  = s + 32 * b;
        const int64_t rem = n - 32 * b;
        __m512        mx  = _mm512_set1_ps(-__FLT_MAX__);  // lanes max(s, mx): mx where s is NaN or an equal zero
        mx                = _mm512_mask_max_ps(mx, tail_mask(rem), _mm512_loadu_ps(sb), mx);  // (rem >= 1: within n16)
        mx                = _mm512_mask_max_ps(mx, tail_mask(rem - 16), load16(sb + 16, rem - 16), mx);
        m[b]              = block_max_as_reference(_mm512_reduce_max_ps(mx), sb, rem);
    }
    // (whole vectors to n rounded up to 16, as softmax_head: the lanes past n hold scores_rows' padding)
    for (int64_t p = 0; p < n; p += 16) {
        _mm512_storeu_ps(s + p, exp_fixed(_mm512_sub_ps(_mm512_loadu_ps(s + p), _mm512_set1_ps(m[p / 32]))));
    }
    block_chains(s, n, l);
    if (v_f16) {
        for (int64_t p = 0; p < n; p += 16) _mm512_storeu_ps(s + p, round_f16(_mm512_loadu_ps(s + p)));
    }
    block_joins(m, l, nb, [](float * x) { _mm512_store_ps(x, exp_fixed(_mm512_load_ps(x))); }, j);
}

// Heads [g0, g0 + gn) of the job: softmax_head, or softmax_blocks with the joins in bj[g - g0] (the
// superblock's M and L to sup_max / sup_sum).
inline void softmax_group(const AttentionJob & job, int64_t g0, int64_t gn, float * scores, int64_t ld, bool v_f16,
                          BlockJoins * bj) {
    for (int64_t g = g0; g < g0 + gn; ++g) {
        float * s = scores + g * ld;
        float   mx = 0.0f, sum = 0.0f;
        if (job.blocks) {
            softmax_blocks(s, job.n_pos, v_f16, bj[g - g0]);
            mx  = bj[g - g0].m;
            sum = bj[g - g0].l;
        } else {
            softmax_head(s, job.n_pos, v_f16, &mx, &sum);
        }
        if (job.sup_max != nullptr) {
            job.sup_max[g] = mx;
            job.sup_sum[g] = sum;
        }
    }
}

// Scores of up to 4 heads for 16 positions per vector: each block of 16 dimensions summed in order
// from 0.0f, the block sums added in order (cpu::dot_blocked16), times the scale.
template <int GN, class K>
void scores_heads(const K & ks, int64_t hd, const float * qh, int64_t n, float scale, float * scores, int64_t ld) {
    for (int64_t b = 0; b * 16 < n; ++b) {
        __m512 acc[GN];
        for (int g = 0; g < GN; ++g) acc[g] = _mm512_setzero_ps();
        for (int64_t d0 = 0; d0 < hd; d0 += 16) {
            __m512 k[16];
            ks.load(b, d0, k);
            for (int g = 0; g < GN; ++g) {
                __m512 s = _mm512_setzero_ps();
                for (int j = 0; j < 16; ++j) s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(qh[g * hd + d0 + j]), k[j]));
                acc[g] = _mm512_add_ps(acc[g], s);
            }
        }
        for (int g = 0; g < GN; ++g) _mm512_storeu_ps(scores + g * ld + b * 16, _mm512_mul_ps(acc[g], _mm512_set1_ps(scale)));
    }
}

template <class K, class V>
void attention_from(const K & ks, const V & vs, int64_t hd, bool k_f16, bool v_f16, const AttentionJob & job,
                    float * scratch) {
    const int64_t n = job.n_pos, ld = n + 16;
    float *       scores = scratch;                 // [n_q][ld]
    float *       qh     = scratch + job.n_q * ld;  // [n_q][hd]
    for (int64_t i = 0; i < job.n_q * hd; i += 16) {
        const __m512 q = _mm512_loadu_ps(job.q + i);
        _mm512_storeu_ps(qh + i, k_f16 ? round_f16(q) : q);
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
        softmax_group(job, g0, gn, scores, ld, v_f16, bj);
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

void attention(const AttentionKv & kv, const AttentionJob & job, float * scratch) {
    attention_from(PreparedK{kv.kt, kv.head_dim}, PreparedV{kv.v, kv.head_dim}, kv.head_dim, kv.k_f16, kv.v_f16, job,
                   scratch);
}

// ------------------------------------------------------------------------- one head from the cache
// attention_cache: the cache's element types as template arguments (TK, TV: uint16_t for f16, float),
// K transposed in registers, and where both factors of a product are f16 values (q rounded to f16
// against an f16 K, the probabilities rounded to f16 against an f16 V) the product is exact in f32
// (11 x 11 significant bits, exponents far inside f32's range), so s + q k rounds once either way:
// one FMA instead of the reference's product then sum, the same bits.

template <class T> inline __m512 cache16(const T * p) {
    if constexpr (sizeof(T) == 2) {
        return load_f16(reinterpret_cast<const uint16_t *>(p));
    } else {
        return _mm512_loadu_ps(reinterpret_cast<const float *>(p));
    }
}

// The head's rows in the cache: K and V of position p start at k + p * stride (v likewise), and the
// K of the KV head this thread attends next (kn, null if none) for prefetching.
template <class TK, class TV> struct HeadRows {
    const TK * k;
    const TV * v;
    const TK * kn;
    int64_t    stride, n;
};

// Up to 64 bytes per line: the lines of dimensions [d0, d0 + n_dims) of a row at p.
template <class T> inline void prefetch_dims(const T * p, int64_t n_dims) {
    for (int64_t o = 0; o < n_dims * static_cast<int64_t>(sizeof(T)); o += 64) _mm_prefetch(reinterpret_cast<const char *>(p) + o, _MM_HINT_T0);
}

// Scores of GN <= 4 heads, 16 positions per vector (cpu::dot_blocked16's order, as scores_heads).
// Prefetched as it goes: K two blocks ahead (the line of each row at d0), and with PF_V this block's V
// lines (P.V reads them next).
template <int GN, class TK, class TV, bool PF_V>
void scores_rows(const HeadRows<TK, TV> & h, int64_t hd, const float * qh, float scale, float * scores, int64_t ld) {
    constexpr bool    exact = sizeof(TK) == 2;
    constexpr int64_t k_line = 64 / sizeof(TK), v_line = 64 / sizeof(TV);  // dimensions per 64-byte line
    const int64_t     n = h.n;
    for (int64_t b = 0; b * 16 < n; ++b) {
        const TK * rows[16];
#pragma GCC unroll 16
        for (int64_t j = 0; j < 16; ++j) rows[j] = h.k + (b * 16 + j < n ? b * 16 + j : n - 1) * h.stride;  // padding lanes repeat the last
        const int64_t n_ahead = n - (b + 2) * 16 < 16 ? n - (b + 2) * 16 : 16;  // rows two blocks ahead
        const int64_t n_here  = n - b * 16 < 16 ? n - b * 16 : 16;
        __m512        acc[GN];
        for (int g = 0; g < GN; ++g) acc[g] = _mm512_setzero_ps();
        for (int64_t d0 = 0; d0 < hd; d0 += 16) {
            if (d0 % k_line == 0) {
                for (int64_t j = 0; j < n_ahead; ++j) _mm_prefetch(reinterpret_cast<const char *>(h.k + ((b + 2) * 16 + j) * h.stride + d0), _MM_HINT_T0);
            }
            if (PF_V && d0 % v_line == 0) {
                for (int64_t j = 0; j < n_here; ++j) _mm_prefetch(reinterpret_cast<const char *>(h.v + (b * 16 + j) * h.stride + d0), _MM_HINT_T0);
            }
            __m512 k[16];
#pragma GCC unroll 16
            for (int j = 0; j < 16; ++j) k[j] = cache16(rows[j] + d0);
            transpose16(k);
#pragma GCC unroll 4
            for (int g = 0; g < GN; ++g) {
                __m512 s = _mm512_setzero_ps();
#pragma GCC unroll 16
                for (int j = 0; j < 16; ++j) s = mul_add<exact>(_mm512_set1_ps(qh[g * hd + d0 + j]), k[j], s);
                acc[g] = _mm512_add_ps(acc[g], s);
            }
        }
        for (int g = 0; g < GN; ++g) _mm512_storeu_ps(scores + g * ld + b * 16, _mm512_mul_ps(acc[g], _mm512_set1_ps(scale)));
    }
}

// P . V for GN heads and DN * 16 dimensions from d0 (pv_heads' order), V 32 positions ahead
// prefetched; with PF_KN the next KV head's K row of each position at the same dimensions.
template <int GN, int DN, class TK, class TV, bool PF_KN>
void pv_rows(const HeadRows<TK, TV> & h, int64_t hd, const float * probs, int64_t ld, int64_t d0, const BlockJoins * bj,
             float * out) {
    constexpr bool exact = sizeof(TV) == 2;
    const int64_t  n     = h.n;
    pv_block_sums<GN, DN, exact>(n, probs, ld, hd, d0, bj, out, [&](int64_t p, __m512 * v) {
        const TV * row = h.v + p * h.stride + d0;
        if (p + 32 < n) prefetch_dims(row + 32 * h.stride, DN * 16);
        if (PF_KN) prefetch_dims(h.kn + p * h.stride + d0, DN * 16);
#pragma GCC unroll 4
        for (int i = 0; i < DN; ++i) v[i] = cache16(row + 16 * i);
    });
}

template <int GN, class TK, class TV, bool PF_KN>
void pv_rows_dims(const HeadRows<TK, TV> & h, int64_t hd, const float * probs, int64_t ld, const BlockJoins * bj, float * out) {
    int64_t d0 = 0;
    for (; d0 + 64 <= hd; d0 += 64) pv_rows<GN, 4, TK, TV, PF_KN>(h, hd, probs, ld, d0, bj, out);
    switch ((hd - d0) / 16) {
        case 3: pv_rows<GN, 3, TK, TV, PF_KN>(h, hd, probs, ld, d0, bj, out); break;
        case 2: pv_rows<GN, 2, TK, TV, PF_KN>(h, hd, probs, ld, d0, bj, out); break;
        case 1: pv_rows<GN, 1, TK, TV, PF_KN>(h, hd, probs, ld, d0, bj, out); break;
        default: break;
    }
}

template <class TK, class TV>
void attention_rows(const CacheView & c, const AttentionJob & job, float * scratch) {
    const int64_t hd = c.head_dim, n = job.n_pos, ld = n + 16;
    float *       scores = scratch;                 // [n_q][ld]
    float *       qh     = scratch + job.n_q * ld;  // [n_q][hd]
    const HeadRows<TK, TV> h{static_cast<const TK *>(c.k) + c.first, static_cast<const TV *>(c.v) + c.first,
                             c.next_first >= 0 ? static_cast<const TK *>(c.k) + c.next_first : nullptr, c.stride, n};
    for (int64_t i = 0; i < job.n_q * hd; i += 16) {
        const __m512 q = _mm512_loadu_ps(job.q + i);
        _mm512_storeu_ps(qh + i, sizeof(TK) == 2 ? round_f16(q) : q);
    }
    for (int64_t g0 = 0; g0 < job.n_q; g0 += 4) {
        const bool   v_here = g0 == 0;  // the first pass over K asks for V
        const float *qg     = qh + g0 * hd;
        float *      sg     = scores + g0 * ld;
        switch ((job.n_q - g0 < 4 ? job.n_q - g0 : 4) * 2 + (v_here ? 1 : 0)) {
            case 9: scores_rows<4, TK, TV, true>(h, hd, qg, job.scale, sg, ld); break;
            case 8: scores_rows<4, TK, TV, false>(h, hd, qg, job.scale, sg, ld); break;
            case 7: scores_rows<3, TK, TV, true>(h, hd, qg, job.scale, sg, ld); break;
            case 6: scores_rows<3, TK, TV, false>(h, hd, qg, job.scale, sg, ld); break;
            case 5: scores_rows<2, TK, TV, true>(h, hd, qg, job.scale, sg, ld); break;
            case 4: scores_rows<2, TK, TV, false>(h, hd, qg, job.scale, sg, ld); break;
            case 3: scores_rows<1, TK, TV, true>(h, hd, qg, job.scale, sg, ld); break;
            default: scores_rows<1, TK, TV, false>(h, hd, qg, job.scale, sg, ld); break;
        }
    }
    for (int64_t g0 = 0; g0 < job.n_q; g0 += 4) {
        const int64_t gn = job.n_q - g0 < 4 ? job.n_q - g0 : 4;
        BlockJoins    bj[4];
        softmax_group(job, g0, gn, scores, ld, sizeof(TV) == 2, bj);
        const BlockJoins * j       = job.blocks ? bj : nullptr;
        const bool         kn_here = h.kn != nullptr && g0 == 0;  // the first pass over V asks for the next head's K
        const float *      pg      = scores + g0 * ld;
        float *            og      = job.out + g0 * hd;
        switch (gn * 2 + (kn_here ? 1 : 0)) {
            case 9: pv_rows_dims<4, TK, TV, true>(h, hd, pg, ld, j, og); break;
            case 8: pv_rows_dims<4, TK, TV, false>(h, hd, pg, ld, j, og); break;
            case 7: pv_rows_dims<3, TK, TV, true>(h, hd, pg, ld, j, og); break;
            case 6: pv_rows_dims<3, TK, TV, false>(h, hd, pg, ld, j, og); break;
            case 5: pv_rows_dims<2, TK, TV, true>(h, hd, pg, ld, j, og); break;
            case 4: pv_rows_dims<2, TK, TV, false>(h, hd, pg, ld, j, og); break;
            case 3: pv_rows_dims<1, TK, TV, true>(h, hd, pg, ld, j, og); break;
            default: pv_rows_dims<1, TK, TV, false>(h, hd, pg, ld, j, og); break;
        }
    }
}

void attention_cache(const CacheView & c, const AttentionJob & job, float * scratch) {
    if (c.f16_k) {
        if (c.f16_v) {
            attention_rows<uint16_t, uint16_t>(c, job, scratch);
        } else {
            attention_rows<uint16_t, float>(c, job, scratch);
        }
    } else if (c.f16_v) {
        attention_rows<float, uint16_t>(c, job, scratch);
    } else {
        attention_rows<float, float>(c, job, scratch);
    }
}

// ------------------------------------------------------------------------- exact head rows

// 8 rows x 16 columns (f32, r[j] = row j) -> the columns as 8 doubles each (col[c] lane j = row j).
inline void columns8x16(__m512 r[8], __m512d col[16]) {
    __m512 t[8];
    for (int i = 0; i < 4; ++i) {
        t[2 * i]     = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    __m512 u[8];  // u[4i + c], 128-bit lane L: rows 4i .. 4i + 3 of column 4L + c
    for (int i = 0; i < 2; ++i) {
        const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
        const __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
        u[4 * i]     = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
        u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    for (int c = 0; c < 4; ++c) {
        // [u[c].L, u[4+c].L] is column 4L + c: pair the lanes, then widen each half to doubles.
        const __m512 x = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44);  // u[c].l0 u[c].l1 u[4+c].l0 u[4+c].l1
        const __m512 y = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);  // lanes 2, 3
        const __m512 x2 = _mm512_shuffle_f32x4(x, x, 0xD8);           // column c | column 4 + c
        const __m512 y2 = _mm512_shuffle_f32x4(y, y, 0xD8);           // column 8 + c | column 12 + c
        col[c]      = _mm512_cvtps_pd(_mm512_castps512_ps256(x2));
        col[4 + c]  = _mm512_cvtps_pd(_mm512_extractf32x8_ps(x2, 1));
        col[8 + c]  = _mm512_cvtps_pd(_mm512_castps512_ps256(y2));
        col[12 + c] = _mm512_cvtps_pd(_mm512_extractf32x8_ps(y2, 1));
    }
}

// Rows as T = uint16_t (f16) or float, NB blocks of 8 rows in flight (independent FMA chains).
template <class T> inline __m512 load_row16(const T * p) {
    if constexpr (sizeof(T) == 2) {
        return load_f16(reinterpret_cast<const uint16_t *>(p));
    } else {
        return _mm512_loadu_ps(reinterpret_cast<const float *>(p));
    }
}
template <class T> inline double load_row1(const T * p) {
    if constexpr (sizeof(T) == 2) {
        return static_cast<double>(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(*reinterpret_cast<const uint16_t *>(p)))));
    } else {
        return static_cast<double>(*reinterpret_cast<const float *>(p));
    }
}

template <class T, int NB>
void rows_dot_block(const T * table, int64_t row_stride, int64_t r, int64_t r_end, int64_t k, const float * h,
                    float * out) {
    const T * rows[NB * 8];
    for (int j = 0; j < NB * 8; ++j) rows[j] = table + (r + j < r_end ? r + j : r_end - 1) * row_stride;
    __m512d acc[NB];
    for (int b = 0; b < NB; ++b) acc[b] = _mm512_setzero_pd();
    const int64_t k16 = k & ~int64_t{15};
    for (int64_t i = 0; i < k16; i += 16) {
        for (int b = 0; b < NB; ++b) {
            __m512 rr[8];
            for (int j = 0; j < 8; ++j) rr[j] = load_row16(rows[b * 8 + j] + i);
            __m512d col[16];
            columns8x16(rr, col);
            for (int c = 0; c < 16; ++c) acc[b] = _mm512_fmadd_pd(col[c], _mm512_set1_pd(static_cast<double>(h[i + c])), acc[b]);
        }
    }
    for (int b = 0; b < NB; ++b) {
        alignas(64) double s[8];
        _mm512_store_pd(s, acc[b]);
        for (int j = 0; j < 8; ++j) {
            for (int64_t i = k16; i < k; ++i) s[j] += load_row1(rows[b * 8 + j] + i) * static_cast<double>(h[i]);
            if (r + b * 8 + j < r_end) out[b * 8 + j] = static_cast<float>(s[j]);
        }
    }
}

template <class T>
void rows_dot(const T * table, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const float * h, int64_t n_tokens,
              float * logits, int64_t ld) {
    for (int64_t t = 0; t < n_tokens; ++t) {
        int64_t r = r0;
        for (; r + 32 <= r1; r += 32) rows_dot_block<T, 4>(table, row_stride, r, r1, k, h + t * k, logits + t * ld + r - r0);
        for (; r < r1; r += 8) rows_dot_block<T, 1>(table, row_stride, r, r1, k, h + t * k, logits + t * ld + r - r0);
    }
}

void f16_rows_dot(const uint16_t * table, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const float * h,
                  int64_t n_tokens, float * logits, int64_t ld) {
    rows_dot(table, row_stride, r0, r1, k, h, n_tokens, logits, ld);
}
// The products of 16 columns (exact: f16 x f16 in f32, else f32 x f32 in double) added into two
// vectors of doubles.
template <bool H_F16> inline void add_products(__m512 ev, __m512 hv, __m512d & a0, __m512d & a1) {
    if constexpr (H_F16) {
        const __m512 p = _mm512_mul_ps(ev, hv);
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(p, 1)));
    } else {
        a0 = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(ev)), _mm512_cvtps_pd(_mm512_castps512_ps256(hv)), a0);
        a1 = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(ev, 1)), _mm512_cvtps_pd(_mm512_extractf32x8_ps(hv, 1)), a1);
    }
}

// Any-order double sums with the rounding check (cpu_kernels.h: f16_rows_dot_checked), on f16 rows
// (T = uint16_t) or f32 rows (T = float: f32 x f32 products are exact in double, so H_F16 is false).
template <class T, bool H_F16>
void rows_dot_checked(const T * table, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const float * h,
                      int64_t n_tokens, float * logits, int64_t ld, const float * e_abs, const float * h_absmax) {
    const double  gamma2 = 2.0 * static_cast<double>(k + 16) * 0x1p-53 * (1.0 + 0x1p-20);  // 2 gamma_k, with room
    const int64_t k32    = k & ~int64_t{31};
    for (int64_t r = r0; r < r1; ++r) {
        const T * e = table + r * row_stride;
        for (int64_t t = 0; t < n_tokens; ++t) {
            const float * ht = h + t * k;
            __m512d       a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
            int64_t       i  = 0;
            for (; i < k32; i += 32) {
                add_products<H_F16>(load_row16(e + i), _mm512_loadu_ps(ht + i), a0, a1);
                add_products<H_F16>(load_row16(e + i + 16), _mm512_loadu_ps(ht + i + 16), a2, a3);
            }
            for (; i < k; i += 16) {
                const __mmask16 m = tail_mask(k - i);
                __m512 ev;
                if constexpr (sizeof(T) == 2) {
                    ev = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, e + i));
                } else {
                    ev = _mm512_maskz_loadu_ps(m, e + i);
                }
                add_products<H_F16>(ev, _mm512_maskz_loadu_ps(m, ht + i), a0, a1);
            }
            const double d = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
            double       w = gamma2 * static_cast<double>(h_absmax[t]) * static_cast<double>(e_abs[r - r0]);
            w += ((d < 0 ? -d : d) + w) * 0x1p-50;  // d -/+ w are rounded to double: widen by more than that
            const float lo = static_cast<float>(d - w), hi = static_cast<float>(d + w);
            float       v  = lo;
            uint32_t    blo, bhi;
            __builtin_memcpy(&blo, &lo, 4);
            __builtin_memcpy(&bhi, &hi, 4);
            if (!(blo == bhi && lo - lo == 0.0f)) {  // near a rounding boundary (or not finite): in order
                rows_dot_block<T, 1>(table, row_stride, r, r + 1, k, ht, &v);
            }
            logits[t * ld + r - r0] = v;
        }
    }
}

void f16_rows_dot_checked(const uint16_t * table, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const float * h,
                          int64_t n_tokens, float * logits, int64_t ld, const float * e_abs, const float * h_absmax,
                          bool h_f16) {
    if (h_f16) {
        rows_dot_checked<uint16_t, true>(table, row_stride, r0, r1, k, h, n_tokens, logits, ld, e_abs, h_absmax);
    } else {
        rows_dot_checked<uint16_t, false>(table, row_stride, r0, r1, k, h, n_tokens, logits, ld, e_abs, h_absmax);
    }
}

void f32_rows_dot_checked(const float * rows, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const float * h,
                          int64_t n_tokens, float * logits, int64_t ld, const float * e_abs, const float * h_absmax) {
    rows_dot_checked<float, false>(rows, row_stride, r0, r1, k, h, n_tokens, logits, ld, e_abs, h_absmax);
}

void f32_rows_dot(const float * rows, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const float * h,
                  int64_t n_tokens, float * logits, int64_t ld) {
    rows_dot(rows, row_stride, r0, r1, k, h, n_tokens, logits, ld);
}

// Exact sums of int8 x int16 products as two vpdpbusd sums per 64 columns (the bytes of H, see
// cpu_kernels.h). One row at a time, so the table streams in order (rows side by side were slower:
// short interleaved streams), with two accumulators per half; a lane holds at most k / 16
// products below 2^15: no overflow for k < 2^20.
void i8_rows_dot_i16(const int8_t * q, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const uint8_t * hi,
                     const uint8_t * lo, const int32_t * q_sums, int64_t * dots) {
    const int64_t     k128 = k & ~int64_t{127};
    const StreamAhead ahead;  // page and line requests (tile_loop.h)
    for (int64_t r = r0; r < r1; ++r) {
        const int8_t * row = q + r * row_stride;
        __m512i        a0 = _mm512_setzero_si512(), a1 = a0, b0 = a0, b1 = a0;
        int64_t        i  = 0;
        for (; i < k128; i += 128) {
            ahead.at<128>(row + i);
            const __m512i q0 = _mm512_loadu_si512(row + i), q1 = _mm512_loadu_si512(row + i + 64);
            a0 = dpbusd(a0, _mm512_loadu_si512(hi + i), q0);  // (in place: simd_avx512.h)
            b0 = dpbusd(b0, _mm512_loadu_si512(lo + i), q0);
            a1 = dpbusd(a1, _mm512_loadu_si512(hi + i + 64), q1);
            b1 = dpbusd(b1, _mm512_loadu_si512(lo + i + 64), q1);
        }
        for (; i < k; i += 64) {
            const __mmask64 m  = k - i >= 64 ? ~__mmask64{0} : (~__mmask64{0}) >> (64 - (k - i));
            const __m512i   qv = _mm512_maskz_loadu_epi8(m, row + i);
            a0 = _mm512_dpbusd_epi32(a0, _mm512_maskz_loadu_epi8(m, hi + i), qv);
            b0 = _mm512_dpbusd_epi32(b0, _mm512_maskz_loadu_epi8(m, lo + i), qv);
        }
        const int64_t sa = _mm512_reduce_add_epi32(_mm512_add_epi32(a0, a1));
        const int64_t sb = _mm512_reduce_add_epi32(_mm512_add_epi32(b0, b1));
        dots[r - r0]     = 256 * (sa - 128 * static_cast<int64_t>(q_sums[r])) + sb;
    }
}

// The int8 head's bounds (cpu_kernels.h: i8_head_bounds_ref's operations in its order), 8 rows per
// vector of doubles, the last vector masked. min(FLT_MAX, x) and max(-FLT_MAX, x) are std::min(x,
// FLT_MAX) and std::max(x, -FLT_MAX) exactly (vminps / vmaxps return the second operand on
// equality and NaN, as std::min / std::max return their first); the largest lo is a plain max (the
// lanes' order does not change it).
float i8_head_bounds(const int64_t * dots, const float * s, const float * q_norm, const float * d_norm, const float * e_norm,
                     int64_t n, const HeadBoundGrid & g, float * lo, float * hi) {
    const __m512d S = _mm512_set1_pd(g.S), eta = _mm512_set1_pd(g.eta_norm), hn = _mm512_set1_pd(g.h_norm);
    const __m512d up = _mm512_set1_pd(1.0 + 0x1p-20), p22 = _mm512_set1_pd(0x1p-22), p140 = _mm512_set1_pd(0x1p-140);
    const __m256  big = _mm256_set1_ps(__FLT_MAX__), nbig = _mm256_set1_ps(-__FLT_MAX__);
    const __m512d sign = _mm512_castsi512_pd(_mm512_set1_epi64(0x7fffffffffffffffLL));
    __m256        m    = _mm256_set1_ps(-__builtin_inff());
    for (int64_t r = 0; r < n; r += 8) {
        const __mmask8 k  = tail_mask8(n - r);
        const __m512d  f  = _mm512_mul_pd(_mm512_mul_pd(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, s + r)), S),
                                          _mm512_cvtepi64_pd(_mm512_maskz_loadu_epi64(k, dots + r)));
        const __m512d  qn = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, q_norm + r));
        const __m512d  dn = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, d_norm + r));
        const __m512d  en = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, e_norm + r));
        const __m512d  B  = _mm512_add_pd(_mm512_mul_pd(up, _mm512_add_pd(_mm512_mul_pd(qn, eta), _mm512_mul_pd(dn, hn))),
                                          _mm512_mul_pd(p22, _mm512_add_pd(_mm512_and_pd(f, sign), _mm512_mul_pd(en, hn))));
        const __m512d  vl = _mm512_sub_pd(f, B), vh = _mm512_add_pd(f, B);
        const __m256   l  = _mm256_min_ps(big, _mm512_cvtpd_ps(_mm512_sub_pd(_mm512_sub_pd(vl, _mm512_mul_pd(_mm512_and_pd(vl, sign), p22)), p140)));
        const __m256   h  = _mm256_max_ps(nbig, _mm512_cvtpd_ps(_mm512_add_pd(_mm512_add_pd(vh, _mm512_mul_pd(_mm512_and_pd(vh, sign), p22)), p140)));
        _mm256_mask_storeu_ps(lo + r, k, l);
        _mm256_mask_storeu_ps(hi + r, k, h);
        m = _mm256_mask_max_ps(m, k, m, l);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4        = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4        = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

// Q6_K rows against int8 activations (cpu_kernels.h). Per 128 columns (half a block): ql's 64
// bytes and qh's 32 give columns 0..63 (low nibbles, qh bits 1-0 then 3-2) and 64..127 (high
// nibbles, bits 5-4 then 7-6), in order; lane i of a 64-column step covers columns 4i..4i+3, in
// sub-block 4 g + i / 4 of the block.
void q6k_rows_dot_i8(const uint8_t * table, int64_t row_bytes, int64_t r0, int64_t r1, int64_t k, const int8_t * h8,
                     const int32_t * h8_sum4, double * f) {
    const __m512i m4 = _mm512_set1_epi8(15), m2 = _mm512_set1_epi8(3);
    __m512i       idx[4];
    for (int g = 0; g < 4; ++g) {
        idx[g] = _mm512_add_epi32(_mm512_set1_epi32(4 * g), _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2));
    }
    const StreamAhead ahead;  // page and line requests (tile_loop.h)
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t * row = table + r * row_bytes;
        __m512          acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < k / 256; ++b) {
            const uint8_t * blk = row + 210 * b;
            ahead.at<210>(blk);  // the block's 4 lines
            const float     d   = _cvtsh_ss(static_cast<unsigned short>(blk[208] | (blk[209] << 8)));
            const __m512    dsc = _mm512_mul_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(blk + 192)))));
            for (int h = 0; h < 2; ++h) {
                const __m512i ql   = _mm512_loadu_si512(blk + 64 * h);
                const __m256i qh   = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk + 128 + 32 * h));
                const __m512i qh01 = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1), m2);
                const __m512i qh23 = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(qh, 4)), _mm256_srli_epi16(qh, 6), 1), m2);
                const __m512i q[2] = {_mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_slli_epi16(qh01, 4)),
                                      _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_slli_epi16(qh23, 4))};
                for (int o = 0; o < 2; ++o) {
                    const int     g   = 2 * h + o;
                    const int64_t col = 256 * b + 64 * g;
                    __m512i       dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[o], _mm512_loadu_si512(h8 + col));
                    dot = _mm512_sub_epi32(dot, _mm512_slli_epi32(_mm512_loadu_si512(h8_sum4 + col / 4), 5));
                    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(idx[g], dsc)));
                }
            }
        }
        f[r - r0] = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(acc)),
                                                       _mm512_cvtps_pd(_mm512_extractf32x8_ps(acc, 1))));
    }
}

void head_i8_rows(const uint16_t * table, int64_t r0, int64_t r1, int64_t k, int8_t * q, HeadI8Row * rows) {
    for (int64_t r = r0; r < r1; ++r) {
        const uint16_t * e = table + r * k;
        __m512           mx = _mm512_setzero_ps();
        for (int64_t i = 0; i < k; i += 16) {
            const __m256i b = k - i >= 16 ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(e + i)) : _mm256_maskz_loadu_epi16(tail_mask(k - i), e + i);
            mx = _mm512_max_ps(mx, abs_ps(_mm512_cvtph_ps(b)));
        }
        const float  s   = _mm512_reduce_max_ps(mx) / 127.0f;
        const __m512 sv  = _mm512_set1_ps(s);
        const __m512d sd = _mm512_set1_pd(static_cast<double>(s));
        __m512d      dd = _mm512_setzero_pd(), ee = _mm512_setzero_pd(), ea = _mm512_setzero_pd();
        __m512i      qq = _mm512_setzero_si512(), qs = _mm512_setzero_si512();
        for (int64_t i = 0; i < k; i += 16) {
            const __mmask16 m  = tail_mask(k - i);
            const __m512    ev = _mm512_cvtph_ps(k - i >= 16 ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(e + i))
                                                             : _mm256_maskz_loadu_epi16(m, e + i));
            __m512          qf = s > 0.0f ? _mm512_roundscale_ps(_mm512_div_ps(ev, sv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
                                          : _mm512_setzero_ps();
            qf                 = _mm512_min_ps(_mm512_max_ps(qf, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
            const __m512i qi   = _mm512_cvtps_epi32(qf);
            if (k - i >= 16) {
                _mm_storeu_si128(reinterpret_cast<__m128i *>(q + r * k + i), _mm512_cvtepi32_epi8(qi));
            } else {
                _mm_mask_storeu_epi8(q + r * k + i, m, _mm512_cvtepi32_epi8(qi));
            }
            qq = _mm512_add_epi32(qq, _mm512_mullo_epi32(qi, qi));
            qs = _mm512_add_epi32(qs, qi);
            for (int h = 0; h < 2; ++h) {
                const __m512d e8 = _mm512_cvtps_pd(h ? _mm512_extractf32x8_ps(ev, 1) : _mm512_castps512_ps256(ev));
                const __m512d q8 = _mm512_cvtps_pd(h ? _mm512_extractf32x8_ps(qf, 1) : _mm512_castps512_ps256(qf));
                const __m512d d8 = _mm512_sub_pd(e8, _mm512_mul_pd(sd, q8));
                dd = _mm512_fmadd_pd(d8, d8, dd);
                ee = _mm512_fmadd_pd(e8, e8, ee);
                ea = _mm512_add_pd(ea, _mm512_abs_pd(e8));
            }
        }
        HeadI8Row & row = rows[r - r0];
        row.ea          = _mm512_reduce_add_pd(ea);
        row.s           = s;
        row.q_sum       = _mm512_reduce_add_epi32(qs);
        row.qq          = static_cast<double>(_mm512_reduce_add_epi32(qq));
        row.dd          = _mm512_reduce_add_pd(dd);
        row.ee          = _mm512_reduce_add_pd(ee);
    }
}

}  // namespace

// The attention and head entries of the avx512 table (kernels_avx512.cpp fills in the rest).
void add_attention_and_head_avx512(Kernels & set) {
    set.attention_prepare    = attention_prepare;
    set.attention            = attention;
    set.attention_cache      = attention_cache;
    set.f16_rows_dot         = f16_rows_dot;
    set.f16_rows_dot_checked = f16_rows_dot_checked;
    set.f32_rows_dot_checked = f32_rows_dot_checked;
    set.f32_rows_dot         = f32_rows_dot;
    set.head_i8_rows         = head_i8_rows;
    set.q6k_rows_dot_i8      = q6k_rows_dot_i8;
    set.i8_rows_dot_i16      = i8_rows_dot_i16;
    set.i8_head_bounds       = i8_head_bounds;
}

}  // namespace tern::cpu
