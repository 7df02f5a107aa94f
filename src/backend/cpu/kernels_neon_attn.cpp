// NEON attention and head kernels: kernels_avx512_attn.cpp's algorithms on 4-lane vectors (4
// positions per vector for the scores, 2 rows per vector of doubles for the exact head).
#include "backend/cpu/position_sum_chains.h"
#include "backend/cpu/simd_neon.h"

namespace tern::cpu {
namespace {

using namespace neon;

inline float32x4_t load_cache4(const CacheView & c, const void * base, bool f16, int64_t p, int64_t d) {
    const int64_t at = p * c.stride + c.first + d;
    return f16 ? load_f16(static_cast<const uint16_t *>(base) + at) : vld1q_f32(static_cast<const float *>(base) + at);
}

void attention_prepare(const CacheView & c, int64_t n_pos, float * kt, float * v) {
    const int64_t hd = c.head_dim;
    for (int64_t b = 0; b * 16 < n_pos; ++b) {
        for (int64_t q4 = 0; q4 < 4; ++q4) {  // 4 positions at a time, 4 dimensions per transpose
            for (int64_t d0 = 0; d0 < hd; d0 += 4) {
                float32x4_t r[4];
                for (int64_t j = 0; j < 4; ++j) {
                    const int64_t p = b * 16 + q4 * 4 + j < n_pos ? b * 16 + q4 * 4 + j : n_pos - 1;
                    r[j]            = load_cache4(c, c.k, c.f16_k, p, d0);
                }
                const float32x4_t t0 = vtrn1q_f32(r[0], r[1]), t1 = vtrn2q_f32(r[0], r[1]);
                const float32x4_t t2 = vtrn1q_f32(r[2], r[3]), t3 = vtrn2q_f32(r[2], r[3]);
                const float32x4_t cols[4] = {
                    vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2))),
                    vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3))),
                    vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2))),
                    vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)))};
                for (int64_t j = 0; j < 4; ++j) vst1q_f32(kt + (b * hd + d0 + j) * 16 + q4 * 4, cols[j]);
            }
        }
    }
    for (int64_t p = 0; p < n_pos; ++p) {
        for (int64_t d0 = 0; d0 < hd; d0 += 4) vst1q_f32(v + p * hd + d0, load_cache4(c, c.v, c.f16_v, p, d0));
    }
}

// cpu::sum_positions of non-negative terms: 4 blocks of 32 side by side per pass.
float sum_positions(const float * t, int64_t n) {
    float total = 0.0f;
    for (int64_t s0 = 0; s0 < n; s0 += 512) {
        const int64_t s1       = s0 + 512 < n ? s0 + 512 : n;
        const int64_t n_blocks = (s1 - s0 + 31) / 32;
        float         b[16]    = {};
        for (int64_t b0 = 0; b0 < n_blocks; b0 += 4) {
            float32x4_t block = vdupq_n_f32(0.0f);
            for (int64_t j = 0; j < 32; ++j) {
                float lane[4];
                for (int64_t i = 0; i < 4; ++i) {
                    const int64_t p = s0 + 32 * (b0 + i) + j;
                    lane[i]         = b0 + i < n_blocks && p < s1 ? t[p] : 0.0f;
                }
                block = vaddq_f32(block, vld1q_f32(lane));
            }
            vst1q_f32(b + b0, block);
        }
        float super = 0.0f;
        for (int64_t i = 0; i < n_blocks; ++i) super = super + b[i];
        total = total + super;
    }
    return total;
}

// P . V for GN heads and DN * 4 dimensions from d0 (kernels_avx512_attn.cpp's pv_block_sums: the
// position order without joins, issue 52's block order of one superblock with them, bj[g] head g's).
template <int GN, int DN>
void pv_heads(const AttentionKv & kv, const float * probs, int64_t ld_probs, int64_t n, int64_t d0, const BlockJoins * bj,
              float * out) {
    // blk (GN x DN <= 16 vectors) stays in registers for a block of 32 positions; super and total
    // are touched once per block (the 32 q registers cannot hold all three).
    const int64_t hd = kv.head_dim;
    float32x4_t   super[GN][DN], total[GN][DN];
    for (int g = 0; g < GN; ++g) {
        for (int i = 0; i < DN; ++i) super[g][i] = total[g][i] = vdupq_n_f32(0.0f);
    }
    for (int64_t p0 = 0; p0 < n; p0 += 32) {
        const int64_t pe = p0 + 32 < n ? p0 + 32 : n;
        float32x4_t   blk[GN][DN];
#pragma GCC unroll 4
        for (int g = 0; g < GN; ++g) {
#pragma GCC unroll 4
            for (int i = 0; i < DN; ++i) blk[g][i] = vdupq_n_f32(0.0f);
        }
        for (int64_t p = p0; p < pe; ++p) {
            float32x4_t v[DN];
#pragma GCC unroll 4
            for (int i = 0; i < DN; ++i) v[i] = vld1q_f32(kv.v + p * hd + d0 + 4 * i);
#pragma GCC unroll 4
            for (int g = 0; g < GN; ++g) {
                const float32x4_t pb = vdupq_n_f32(probs[g * ld_probs + p]);
#pragma GCC unroll 4
                for (int i = 0; i < DN; ++i) blk[g][i] = vaddq_f32(blk[g][i], vmulq_f32(pb, v[i]));
            }
        }
        if (bj != nullptr) {  // super: the chunk's O_c; total: the superblock's join of its chunks
            const int64_t b = p0 / 32;
            for (int g = 0; g < GN; ++g) {
                const float32x4_t a = vdupq_n_f32(bj[g].a[b]);
                for (int i = 0; i < DN; ++i) {
                    super[g][i] = vaddq_f32(b % 2 == 0 ? vdupq_n_f32(0.0f) : super[g][i], vmulq_f32(a, blk[g][i]));
                }
            }
            if (b % 2 == 1 || pe == n) {
                for (int g = 0; g < GN; ++g) {
                    const float32x4_t w = vdupq_n_f32(bj[g].A[b / 2]);
                    for (int i = 0; i < DN; ++i) total[g][i] = vaddq_f32(total[g][i], vmulq_f32(w, super[g][i]));
                }
            }
            continue;
        }
        for (int g = 0; g < GN; ++g) {
            for (int i = 0; i < DN; ++i) super[g][i] = vaddq_f32(super[g][i], blk[g][i]);
        }
        if (pe % 512 == 0) {
            for (int g = 0; g < GN; ++g) {
                for (int i = 0; i < DN; ++i) {
                    total[g][i] = vaddq_f32(total[g][i], super[g][i]);
                    super[g][i] = vdupq_n_f32(0.0f);
                }
            }
        }
    }
    for (int g = 0; g < GN; ++g) {
        for (int i = 0; i < DN; ++i) {
            vst1q_f32(out + g * hd + d0 + 4 * i, bj != nullptr ? total[g][i] : vaddq_f32(total[g][i], super[g][i]));
        }
    }
}

template <int GN>
void pv_dims(const AttentionKv & kv, const float * probs, int64_t ld, int64_t n, const BlockJoins * bj, float * out) {
    for (int64_t d0 = 0; d0 < kv.head_dim; d0 += 16) pv_heads<GN, 4>(kv, probs, ld, n, d0, bj, out);
}

// The single-pass softmax of one superblock in place of head g's scores s[0 .. n) (n16: n rounded up
// to 16, the lanes scores_heads wrote): e_i = exp_fixed(s_i - max), sum in the position order,
// p_i = e_i * (1 / sum), then f16(p) where V is f16; the max and sum to *mx_out, *sum_out.
inline void softmax_head(float * s, int64_t n, bool v_f16, float * mx_out, float * sum_out) {
    const int64_t n16 = (n + 15) & ~int64_t{15};
    float         mx  = -__builtin_inff();
    for (int64_t p = 0; p < n; ++p) mx = s[p] > mx ? s[p] : mx;
    const float32x4_t max = vdupq_n_f32(mx);
    for (int64_t p = 0; p < n16; p += 4) vst1q_f32(s + p, exp_fixed(vsubq_f32(vld1q_f32(s + p), max)));
    for (int64_t p = n; p < n16; ++p) s[p] = 0.0f;
    const float       sum = sum_positions(s, n);
    const float32x4_t inv = vdupq_n_f32(1.0f / sum);
    *mx_out               = mx;
    *sum_out              = sum;
    for (int64_t p = 0; p < n16; p += 4) {
        const float32x4_t pr = vmulq_f32(vld1q_f32(s + p), inv);
        vst1q_f32(s + p, v_f16 ? round_f16(pr) : pr);
    }
}

// The block order instead (issue 52; one superblock of a longer row): per block of 32 positions
// m_b = max(-FLT_MAX, its scores) in position order and e_i = exp_fixed(s_i - m_b) in place (p_i =
// e_i), l_b its chain, and the joins P.V applies (position_sum_chains.h).
inline void softmax_blocks(float * s, int64_t n, bool v_f16, BlockJoins & j) {
    float         m[16], l[16];
    const int64_t nb = (n + 31) / 32;
    for (int64_t b = 0; b < nb; ++b) {  // every block's max, then the exps (as on AVX-512)
        const float * sb  = s + 32 * b;
        const int64_t rem = n - 32 * b < 32 ? n - 32 * b : 32;
        float         mb  = -__FLT_MAX__;
        for (int64_t i = 0; i < rem; ++i) mb = max_first(mb, sb[i]);
        m[b] = mb;
    }
    // (whole vectors to n rounded up to 16, as softmax_head: the lanes past n hold scores_heads' padding)
    const int64_t n16 = (n + 15) & ~int64_t{15};
    for (int64_t p = 0; p < n16; p += 4) vst1q_f32(s + p, exp_fixed(vsubq_f32(vld1q_f32(s + p), vdupq_n_f32(m[p / 32]))));
    block_chains(s, n, l);
    if (v_f16) {
        for (int64_t p = 0; p < n16; p += 4) vst1q_f32(s + p, round_f16(vld1q_f32(s + p)));
    }
    block_joins(m, l, nb, [](float * x) {
        for (int i = 0; i < 16; i += 4) vst1q_f32(x + i, exp_fixed(vld1q_f32(x + i)));
    }, j);
}

template <int GN>
void scores_heads(const AttentionKv & kv, const float * qh, int64_t n, float scale, float * scores, int64_t ld) {
    const int64_t hd = kv.head_dim;
    for (int64_t b = 0; b * 16 < n; ++b) {
        for (int64_t q4 = 0; q4 < 4; ++q4) {
            const float * kb = kv.kt + b * hd * 16 + q4 * 4;
            float32x4_t   acc[GN];
            for (int g = 0; g < GN; ++g) acc[g] = vdupq_n_f32(0.0f);
            for (int64_t d0 = 0; d0 < hd; d0 += 16) {
                for (int g = 0; g < GN; ++g) {
                    float32x4_t s = vdupq_n_f32(0.0f);
                    for (int j = 0; j < 16; ++j) s = vaddq_f32(s, vmulq_f32(vdupq_n_f32(qh[g * hd + d0 + j]), vld1q_f32(kb + (d0 + j) * 16)));
                    acc[g] = vaddq_f32(acc[g], s);
                }
            }
            for (int g = 0; g < GN; ++g) vst1q_f32(scores + g * ld + b * 16 + q4 * 4, vmulq_f32(acc[g], vdupq_n_f32(scale)));
        }
    }
}

void attention(const AttentionKv & kv, const AttentionJob & job, float * scratch) {
    const int64_t hd = kv.head_dim, n = job.n_pos, ld = n + 16;
    float *       scores = scratch;
    float *       qh     = scratch + job.n_q * ld;
    for (int64_t i = 0; i < job.n_q * hd; i += 4) {
        const float32x4_t q = vld1q_f32(job.q + i);
        vst1q_f32(qh + i, kv.k_f16 ? round_f16(q) : q);
    }
    for (int64_t g0 = 0; g0 < job.n_q; g0 += 4) {
        switch (job.n_q - g0 < 4 ? job.n_q - g0 : 4) {
            case 4: scores_heads<4>(kv, qh + g0 * hd, n, job.scale, scores + g0 * ld, ld); break;
            case 3: scores_heads<3>(kv, qh + g0 * hd, n, job.scale, scores + g0 * ld, ld); break;
            case 2: scores_heads<2>(kv, qh + g0 * hd, n, job.scale, scores + g0 * ld, ld); break;
            default: scores_heads<1>(kv, qh + g0 * hd, n, job.scale, scores + g0 * ld, ld); break;
        }
    }
    for (int64_t g0 = 0; g0 < job.n_q; g0 += 4) {
        const int64_t gn = job.n_q - g0 < 4 ? job.n_q - g0 : 4;
        BlockJoins    bj[4];
        for (int64_t g = g0; g < g0 + gn; ++g) {
            float * s  = scores + g * ld;
            float   mx = 0.0f, sum = 0.0f;
            if (job.blocks) {
                softmax_blocks(s, n, kv.v_f16, bj[g - g0]);
                mx  = bj[g - g0].m;
                sum = bj[g - g0].l;
            } else {
                softmax_head(s, n, kv.v_f16, &mx, &sum);
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
            case 4: pv_dims<4>(kv, pg, ld, n, j, og); break;
            case 3: pv_dims<3>(kv, pg, ld, n, j, og); break;
            case 2: pv_dims<2>(kv, pg, ld, n, j, og); break;
            default: pv_dims<1>(kv, pg, ld, n, j, og); break;
        }
    }
}

// ------------------------------------------------------------------------- exact head rows

template <class T> inline float32x4_t load_row4(const T * p) {
    if constexpr (sizeof(T) == 2) {
        return load_f16(reinterpret_cast<const uint16_t *>(p));
    } else {
        return vld1q_f32(reinterpret_cast<const float *>(p));
    }
}
template <class T> inline double load_row1(const T * p) {
    if constexpr (sizeof(T) == 2) {
        return static_cast<double>(vgetq_lane_f32(load_f16(reinterpret_cast<const uint16_t *>(p)), 0));
    } else {
        return static_cast<double>(*reinterpret_cast<const float *>(p));
    }
}

// NB pairs of rows in flight; a pair's 4 columns zipped into 4 vectors of 2 doubles.
template <class T, int NB>
void rows_dot_block(const T * table, int64_t row_stride, int64_t r, int64_t r_end, int64_t k, const float * h, float * out) {
    const T * rows[NB * 2];
    for (int j = 0; j < NB * 2; ++j) rows[j] = table + (r + j < r_end ? r + j : r_end - 1) * row_stride;
    float64x2_t acc[NB];
    for (int b = 0; b < NB; ++b) acc[b] = vdupq_n_f64(0.0);
    const int64_t k4 = k & ~int64_t{3};
    for (int64_t i = 0; i < k4; i += 4) {
        // each column's h, widened once for all pairs (the same lanes in both halves)
        const float64x2_t h0 = vdupq_n_f64(static_cast<double>(h[i])), h1 = vdupq_n_f64(static_cast<double>(h[i + 1]));
        const float64x2_t h2 = vdupq_n_f64(static_cast<double>(h[i + 2])), h3 = vdupq_n_f64(static_cast<double>(h[i + 3]));
        // (loading 4 halves past a short row's end is avoided: k4 <= k)
        for (int b = 0; b < NB; ++b) {
            const float32x4_t a = load_row4(rows[2 * b] + i), c = load_row4(rows[2 * b + 1] + i);
            const float32x4_t lo = vzip1q_f32(a, c), hi = vzip2q_f32(a, c);  // (a0 c0 a1 c1), (a2 c2 a3 c3)
            acc[b] = vfmaq_f64(acc[b], vcvt_f64_f32(vget_low_f32(lo)), h0);
            acc[b] = vfmaq_f64(acc[b], vcvt_high_f64_f32(lo), h1);
            acc[b] = vfmaq_f64(acc[b], vcvt_f64_f32(vget_low_f32(hi)), h2);
            acc[b] = vfmaq_f64(acc[b], vcvt_high_f64_f32(hi), h3);
        }
    }
    for (int b = 0; b < NB; ++b) {
        double s[2] = {vgetq_lane_f64(acc[b], 0), vgetq_lane_f64(acc[b], 1)};
        for (int j = 0; j < 2; ++j) {
            for (int64_t i = k4; i < k; ++i) s[j] += load_row1(rows[b * 2 + j] + i) * static_cast<double>(h[i]);
            if (r + b * 2 + j < r_end) out[b * 2 + j] = static_cast<float>(s[j]);
        }
    }
}

template <class T>
void rows_dot(const T * table, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const float * h, int64_t n_tokens,
              float * logits, int64_t ld) {
    for (int64_t t = 0; t < n_tokens; ++t) {
        int64_t r = r0;
        for (; r + 8 <= r1; r += 8) rows_dot_block<T, 4>(table, row_stride, r, r1, k, h + t * k, logits + t * ld + r - r0);
        for (; r < r1; r += 2) rows_dot_block<T, 1>(table, row_stride, r, r1, k, h + t * k, logits + t * ld + r - r0);
    }
}

// Q6_K rows against int8 activations (cpu_kernels.h): 16 columns (one sub-block) per sdot step.
void q6k_rows_dot_i8(const uint8_t * table, int64_t row_bytes, int64_t r0, int64_t r1, int64_t k, const int8_t * h8,
                     const int32_t * h8_sum4, double * f) {
    const uint8x16_t m4 = vdupq_n_u8(15), m2 = vdupq_n_u8(3);
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t * row = table + r * row_bytes;
        float32x4_t     acc = vdupq_n_f32(0.0f);
        for (int64_t b = 0; b < k / 256; ++b) {
            const uint8_t * blk = row + 210 * b;
            uint16_t        dh[4] = {static_cast<uint16_t>(blk[208] | (blk[209] << 8)), 0, 0, 0};
            const float     d     = vgetq_lane_f32(load_f16(dh), 0);
            for (int h = 0; h < 2; ++h) {
                for (int kk = 0; kk < 4; ++kk) {
                    for (int half = 0; half < 2; ++half) {
                        const uint8x16_t lo  = vld1q_u8(blk + 64 * h + 32 * (kk & 1) + 16 * half);
                        const uint8x16_t hi  = vld1q_u8(blk + 128 + 32 * h + 16 * half);
                        const uint8x16_t nib = kk >= 2 ? vshrq_n_u8(lo, 4) : vandq_u8(lo, m4);
                        uint8x16_t       top;
                        switch (kk) {
                            case 0: top = vandq_u8(hi, m2); break;
                            case 1: top = vandq_u8(vshrq_n_u8(hi, 2), m2); break;
                            case 2: top = vandq_u8(vshrq_n_u8(hi, 4), m2); break;
                            default: top = vshrq_n_u8(hi, 6); break;
                        }
                        const int8x16_t q   = vreinterpretq_s8_u8(vorrq_u8(nib, vshlq_n_u8(top, 4)));
                        const int64_t   col = 256 * b + 128 * h + 32 * kk + 16 * half;
                        int32x4_t       dot = vdotq_s32(vdupq_n_s32(0), q, vld1q_s8(h8 + col));
                        dot = vsubq_s32(dot, vshlq_n_s32(vld1q_s32(h8_sum4 + col / 4), 5));
                        const float ds = d * static_cast<float>(static_cast<int8_t>(blk[192 + 8 * h + 2 * kk + half]));
                        acc            = vaddq_f32(acc, vmulq_f32(vcvtq_f32_s32(dot), vdupq_n_f32(ds)));
                    }
                }
            }
        }
        f[r - r0] = vaddvq_f64(vaddq_f64(vcvt_f64_f32(vget_low_f32(acc)), vcvt_high_f64_f32(acc)));
    }
}

// Any-order double sums with the rounding check (cpu_kernels.h: f16_rows_dot_checked).
template <bool H_F16>
void rows_dot_checked(const uint16_t * table, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const float * h,
                      int64_t n_tokens, float * logits, int64_t ld, const float * e_abs, const float * h_absmax) {
    const double  gamma2 = 2.0 * static_cast<double>(k + 16) * 0x1p-53 * (1.0 + 0x1p-20);
    const int64_t k4     = k & ~int64_t{3};
    for (int64_t r = r0; r < r1; ++r) {
        const uint16_t * e = table + r * row_stride;
        for (int64_t t = 0; t < n_tokens; ++t) {
            const float * ht = h + t * k;
            float64x2_t   a0 = vdupq_n_f64(0.0), a1 = a0;
            for (int64_t i = 0; i < k4; i += 4) {
                const float32x4_t ev = load_f16(e + i), hv = vld1q_f32(ht + i);
                if constexpr (H_F16) {
                    const float32x4_t p = vmulq_f32(ev, hv);  // f16 x f16: exact in f32
                    a0 = vaddq_f64(a0, vcvt_f64_f32(vget_low_f32(p)));
                    a1 = vaddq_f64(a1, vcvt_high_f64_f32(p));
                } else {
                    a0 = vfmaq_f64(a0, vcvt_f64_f32(vget_low_f32(ev)), vcvt_f64_f32(vget_low_f32(hv)));
                    a1 = vfmaq_f64(a1, vcvt_high_f64_f32(ev), vcvt_high_f64_f32(hv));
                }
            }
            double d = vaddvq_f64(vaddq_f64(a0, a1));
            for (int64_t i = k4; i < k; ++i) d += load_row1(e + i) * static_cast<double>(ht[i]);
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

void head_i8_rows(const uint16_t * table, int64_t r0, int64_t r1, int64_t k, int8_t * q, HeadI8Row * rows) {
    for (int64_t r = r0; r < r1; ++r) {
        const uint16_t * e  = table + r * k;
        const int64_t    k4 = k & ~int64_t{3};
        float32x4_t      mx = vdupq_n_f32(0.0f);
        for (int64_t i = 0; i < k4; i += 4) mx = vmaxq_f32(mx, vabsq_f32(load_f16(e + i)));
        float amax = vmaxvq_f32(mx);
        float tail[4] = {};
        for (int64_t i = k4; i < k; ++i) {
            uint16_t one[4] = {e[i], 0, 0, 0};
            tail[i - k4]    = vgetq_lane_f32(load_f16(one), 0);
            const float a   = tail[i - k4] < 0 ? -tail[i - k4] : tail[i - k4];
            amax            = a > amax ? a : amax;
        }
        const float s = amax / 127.0f;
        HeadI8Row & row = rows[r - r0];
        row = HeadI8Row{s, 0, 0, 0, 0, 0};
        float64x2_t dd = vdupq_n_f64(0.0), ee = vdupq_n_f64(0.0), ea = vdupq_n_f64(0.0);
        int32x4_t   qq = vdupq_n_s32(0), qs = vdupq_n_s32(0);
        const float64x2_t sd = vdupq_n_f64(static_cast<double>(s));
        for (int64_t i = 0; i < k; i += 4) {
            const float32x4_t ev = i < k4 ? load_f16(e + i) : vld1q_f32(tail);
            float32x4_t qf = s > 0.0f ? vrndnq_f32(vdivq_f32(ev, vdupq_n_f32(s))) : vdupq_n_f32(0.0f);
            qf             = vminq_f32(vmaxq_f32(qf, vdupq_n_f32(-127.0f)), vdupq_n_f32(127.0f));
            const int32x4_t qi = vcvtq_s32_f32(qf);
            const int64_t   m  = k - i < 4 ? k - i : 4;  // tail lanes hold e = 0, q = 0: nothing added
            int32_t         qv[4];
            vst1q_s32(qv, qi);
            for (int64_t j = 0; j < m; ++j) q[r * k + i + j] = static_cast<int8_t>(qv[j]);
            qq = vmlaq_s32(qq, qi, qi);
            qs = vaddq_s32(qs, qi);
            const float64x2_t e0 = vcvt_f64_f32(vget_low_f32(ev)), e1 = vcvt_high_f64_f32(ev);
            const float64x2_t q0 = vcvt_f64_f32(vget_low_f32(qf)), q1 = vcvt_high_f64_f32(qf);
            const float64x2_t d0 = vsubq_f64(e0, vmulq_f64(sd, q0)), d1 = vsubq_f64(e1, vmulq_f64(sd, q1));
            dd = vfmaq_f64(vfmaq_f64(dd, d0, d0), d1, d1);
            ee = vfmaq_f64(vfmaq_f64(ee, e0, e0), e1, e1);
            ea = vaddq_f64(vaddq_f64(ea, vabsq_f64(e0)), vabsq_f64(e1));
        }
        row.q_sum = vaddvq_s32(qs);
        row.qq    = static_cast<double>(vaddvq_s32(qq));
        row.dd    = vaddvq_f64(dd);
        row.ee    = vaddvq_f64(ee);
        row.ea    = vaddvq_f64(ea);
    }
}

// sdot takes signed bytes: H = 256 (hi - 128) + (lo - 128) + 128, with hi - 128 and lo - 128 the
// bytes XOR 0x80 read as int8, so sum q H = 256 sum q a + sum q b + 128 q_sum.
template <int NR>
void i8_rows_block(const int8_t * q, int64_t row_stride, int64_t r, int64_t k, const uint8_t * hi, const uint8_t * lo,
                   const int32_t * q_sums, int64_t * dots) {
    int32x4_t ah[NR], al[NR];
    for (int j = 0; j < NR; ++j) ah[j] = al[j] = vdupq_n_s32(0);
    const uint8x16_t flip = vdupq_n_u8(0x80);
    const int64_t    k16  = k & ~int64_t{15};
    for (int64_t i = 0; i < k16; i += 16) {
        const int8x16_t a = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(hi + i), flip));
        const int8x16_t b = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(lo + i), flip));
        for (int j = 0; j < NR; ++j) {
            const int8x16_t qv = vld1q_s8(q + (r + j) * row_stride + i);
            ah[j]              = vdotq_s32(ah[j], qv, a);
            al[j]              = vdotq_s32(al[j], qv, b);
        }
    }
    for (int j = 0; j < NR; ++j) {
        int64_t sa = vaddvq_s32(ah[j]), sb = vaddvq_s32(al[j]);
        for (int64_t i = k16; i < k; ++i) {
            sa += static_cast<int64_t>(q[(r + j) * row_stride + i]) * (hi[i] - 128);
            sb += static_cast<int64_t>(q[(r + j) * row_stride + i]) * (lo[i] - 128);
        }
        dots[j] = 256 * sa + sb + 128 * static_cast<int64_t>(q_sums[r + j]);
    }
}

void i8_rows_dot_i16(const int8_t * q, int64_t row_stride, int64_t r0, int64_t r1, int64_t k, const uint8_t * hi,
                     const uint8_t * lo, const int32_t * q_sums, int64_t * dots) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) i8_rows_block<4>(q, row_stride, r, k, hi, lo, q_sums, dots + (r - r0));
    for (; r < r1; ++r) i8_rows_block<1>(q, row_stride, r, k, hi, lo, q_sums, dots + (r - r0));
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

// The attention and head entries of the neon table (kernels_neon.cpp fills in the rest).
void add_attention_and_head_neon(Kernels & set) {
    set.attention_prepare    = attention_prepare;
    set.attention            = attention;
    set.f16_rows_dot         = rows_dot<uint16_t>;
    set.f16_rows_dot_checked = f16_rows_dot_checked;
    set.f32_rows_dot         = rows_dot<float>;
    set.head_i8_rows         = head_i8_rows;
    set.q6k_rows_dot_i8      = q6k_rows_dot_i8;
    set.i8_rows_dot_i16      = i8_rows_dot_i16;
}

}  // namespace tern::cpu
