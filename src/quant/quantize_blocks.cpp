// The weight quantizers of tern (what `tern quantize`, `tern convert`, `tern synth` and quantize_row
// write): Q8_0, Q4_0, Q4_K and Q6_K blocks chosen to minimise the squared error, with the searches
// of quant_search.h. Layouts: FORMATS.md §3.8-§3.11 (and the diagrams in block_formats.h).
//
// Two levels for the K-quants: first every sub-block gets its own float scale (and min) from the
// search; then the super-block scale d (and dmin) is chosen, the sub-block scales become small
// integers relative to it, and, because rounding those integers moves the best integer codes, the
// codes are re-chosen for the scales actually stored. Finally d (and dmin) are re-fitted by least
// squares for the chosen integers and the whole step repeats while the error drops.
#include "quant/block_formats.h"

#include "core/fp16.h"
#include "quant/quant_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tern {
namespace {

using quant::round_clamp;

void     store_u16(uint8_t * p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v & 0xff);
    p[1] = static_cast<uint8_t>(v >> 8);
}

// Squared error of a whole decoded block against x.
double block_error(DType type, const float * x, const uint8_t * block, int n) {
    float y[256];
    dequantize_row(type, block, y, n);
    double e = 0;
    for (int i = 0; i < n; ++i) e += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    return e;
}

// Symmetric 32-element block (Q8_0, Q4_0): search the scale, round it to fp16 and re-choose the codes
// for the stored scale. Returns d (as stored) and q in [-nmax_neg, nmax_pos].
float symmetric_block(const float * x, int nmax_neg, int nmax_pos, int8_t * q) {
    const float scale = quant::search_symmetric(x, 32, nmax_neg, nmax_pos, q);
    const float d     = fp16_to_fp32(fp32_to_fp16(scale));
    if (d == 0.0f) {
        std::fill(q, q + 32, 0);
        return 0.0f;
    }
    for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(round_clamp(x[i] / d, -nmax_neg, nmax_pos));
    return d;
}

// ------------------------------------------------------------------------------------------ Q6_K

// Codes of one 16-element sub-block for an effective scale s = d * sc (q - 32 in [-32, 31]).
double q6_k_codes(const float * x, float s, int8_t * q) {
    if (s == 0.0f) {
        std::fill(q, q + 16, 0);
    } else {
        for (int i = 0; i < 16; ++i) q[i] = static_cast<int8_t>(round_clamp(x[i] / s, -32, 31));
    }
    return quant::squared_error(x, 16, s, q);
}

// For a stored d: each sub-block's int8 scale (the rounded one and its two neighbours are tried)
// and codes. Returns the block's squared error.
double q6_k_assign(const float * x, float d, const float * sub_scale, int8_t * sc, int8_t * q) {
    double total = 0;
    for (int j = 0; j < 16; ++j) {
        const int r    = d != 0.0f ? round_clamp(sub_scale[j] / d, -128, 127) : 0;
        double    best = -1;
        int8_t    cand[16];
        for (int c = std::max(-128, r - 1); c <= std::min(127, r + 1); ++c) {
            const double e = q6_k_codes(x + 16 * j, d * static_cast<float>(c), cand);
            if (best < 0 || e < best) {
                best  = e;
                sc[j] = static_cast<int8_t>(c);
                std::copy(cand, cand + 16, q + 16 * j);
            }
        }
        total += best;
    }
    return total;
}

void q6_k_pack(const int8_t * q_signed, const int8_t * sc, float d, uint8_t * block) {
    int q[256];
    for (int e = 0; e < 256; ++e) q[e] = q_signed[e] + 32;
    uint8_t * ql = block;
    uint8_t * qh = block + 128;
    for (int h = 0; h < 2; ++h) {
        for (int l = 0; l < 32; ++l) {
            const int * qq      = q + 128 * h + l;  // elements l, l+32, l+64, l+96 of half h
            ql[64 * h + l]      = static_cast<uint8_t>((qq[0] & 0xf) | ((qq[64] & 0xf) << 4));
            ql[64 * h + 32 + l] = static_cast<uint8_t>((qq[32] & 0xf) | ((qq[96] & 0xf) << 4));
            qh[32 * h + l]      = static_cast<uint8_t>((qq[0] >> 4) | ((qq[32] >> 4) << 2) | ((qq[64] >> 4) << 4) |
                                                       ((qq[96] >> 4) << 6));
        }
    }
    std::memcpy(block + 192, sc, 16);
    store_u16(block + 208, fp32_to_fp16(d));
}

// ------------------------------------------------------------------------------------------ Q4_K

// Codes of one 32-element sub-block for effective scale s = d * sc and min m = dmin * mc.
double q4_k_codes(const float * x, float s, float m, uint8_t * q) {
    if (s == 0.0f) {
        std::fill(q, q + 32, 0);
    } else {
        for (int i = 0; i < 32; ++i) q[i] = static_cast<uint8_t>(round_clamp((x[i] + m) / s, 0, 15));
    }
    return quant::squared_error(x, 32, s, m, q);
}

struct Q4kChoice {
    int     sc[8], mc[8];
    uint8_t q[256];
};

// For stored d and dmin: each sub-block's six-bit scale and min (rounded values and neighbours) and
// codes. Returns the block's squared error.
double q4_k_assign(const float * x, float d, float dmin, const quant::ScaleMin * sub, Q4kChoice & out) {
    double total = 0;
    for (int s = 0; s < 8; ++s) {
        const int rs   = d > 0 ? round_clamp(sub[s].scale / d, 0, 63) : 0;
        const int rm   = dmin > 0 ? round_clamp(sub[s].min / dmin, 0, 63) : 0;
        double    best = -1;
        uint8_t   cand[32];
        for (int cs = std::max(0, rs - 1); cs <= std::min(63, rs + 1); ++cs) {
            for (int cm = std::max(0, rm - 1); cm <= std::min(63, rm + 1); ++cm) {
                const double e = q4_k_codes(x + 32 * s, d * static_cast<float>(cs), dmin * static_cast<float>(cm), cand);
                if (best < 0 || e < best) {
                    best = e, out.sc[s] = cs, out.mc[s] = cm;
                    std::copy(cand, cand + 32, out.q + 32 * s);
                }
            }
        }
        total += best;
    }
    return total;
}

void q4_k_pack(const Q4kChoice & c, float d, float dmin, uint8_t * block) {
    store_u16(block, fp32_to_fp16(d));
    store_u16(block + 2, fp32_to_fp16(dmin));
    uint8_t * scales = block + 4;  // ownership map of FORMATS.md §3.10
    for (int j = 0; j < 4; ++j) {
        scales[j]     = static_cast<uint8_t>((c.sc[j] & 63) | ((c.sc[4 + j] >> 4) << 6));
        scales[4 + j] = static_cast<uint8_t>((c.mc[j] & 63) | ((c.mc[4 + j] >> 4) << 6));
        scales[8 + j] = static_cast<uint8_t>((c.sc[4 + j] & 0x0f) | ((c.mc[4 + j] & 0x0f) << 4));
    }
    uint8_t * qs = block + 16;  // chunk k: low nibbles = sub-block 2k, high nibbles = 2k + 1
    for (int k = 0; k < 4; ++k) {
        for (int l = 0; l < 32; ++l) qs[32 * k + l] = static_cast<uint8_t>(c.q[64 * k + l] | (c.q[64 * k + 32 + l] << 4));
    }
}

float to_f16_value(double v) { return fp16_to_fp32(fp32_to_fp16(static_cast<float>(v))); }

}  // namespace

// ------------------------------------------------------------------------------------ Q8_0, Q4_0

void q8_0_quantize_block(const float * x, uint8_t * block) {
    int8_t      q[32];
    const float d = symmetric_block(x, 127, 127, q);  // -128 is never written, as in ggml
    uint8_t     searched[34];
    store_u16(searched, fp32_to_fp16(d));
    std::memcpy(searched + 2, q, 32);
    // The reference rounding (d = amax / 127) is one of the grid's candidates before the fp16
    // rounding of d; keep whichever block is better after it.
    q8_0_quantize_block_ref(x, block);
    if (block_error(DType::q8_0, x, searched, 32) < block_error(DType::q8_0, x, block, 32)) std::memcpy(block, searched, 34);
}

void q4_0_quantize_block(const float * x, uint8_t * block) {
    int8_t      q[32];
    const float d = symmetric_block(x, 8, 7, q);
    uint8_t     searched[18];
    store_u16(searched, fp32_to_fp16(d));
    for (int j = 0; j < 16; ++j) searched[2 + j] = static_cast<uint8_t>((q[j] + 8) | ((q[j + 16] + 8) << 4));
    q4_0_quantize_block_ref(x, block);
    if (block_error(DType::q4_0, x, searched, 32) < block_error(DType::q4_0, x, block, 32)) std::memcpy(block, searched, 18);
}

// ------------------------------------------------------------------------------------------ Q6_K

void q6_k_quantize_block(const float * x, uint8_t * block) {
    // Sub-block scales; the one of largest magnitude is sent to int8 -128 (d carries its sign).
    float  sub_scale[16];
    int8_t q[256], sc[16];
    float  extreme = 0;
    for (int j = 0; j < 16; ++j) {
        sub_scale[j] = quant::search_symmetric(x + 16 * j, 16, 32, 31, q + 16 * j);
        if (std::fabs(sub_scale[j]) > std::fabs(extreme)) extreme = sub_scale[j];
    }
    float  d    = to_f16_value(extreme / -128.0f);
    double best = q6_k_assign(x, d, sub_scale, sc, q);
    // Re-fit d for the chosen integers: x ~= d * (sc q), least squares over the block.
    for (int round = 0; round < 2 && d != 0.0f; ++round) {
        double num = 0, den = 0;
        for (int e = 0; e < 256; ++e) {
            const double a = static_cast<double>(sc[e / 16]) * q[e];
            num += x[e] * a, den += a * a;
        }
        if (den <= 0) break;
        const float d2 = to_f16_value(num / den);
        if (d2 == d || d2 == 0.0f) break;
        int8_t       sc2[16], q2[256];
        const double e2 = q6_k_assign(x, d2, sub_scale, sc2, q2);
        if (!(e2 < best)) break;
        best = e2, d = d2;
        std::copy(sc2, sc2 + 16, sc);
        std::copy(q2, q2 + 256, q);
    }
    q6_k_pack(q, sc, d, block);
}

// ------------------------------------------------------------------------------------------ Q4_K

void q4_k_quantize_block(const float * x, uint8_t * block) {
    quant::ScaleMin sub[8];
    uint8_t         codes[32];
    float           max_scale = 0, max_min = 0;
    for (int s = 0; s < 8; ++s) {
        sub[s]    = quant::search_asymmetric(x + 32 * s, 32, 15, codes);
        max_scale = std::max(max_scale, sub[s].scale);
        max_min   = std::max(max_min, sub[s].min);
    }
    float     d = to_f16_value(max_scale / 63.0f), dmin = to_f16_value(max_min / 63.0f);
    Q4kChoice choice;
    double    best = q4_k_assign(x, d, dmin, sub, choice);
    // Re-fit (d, dmin) for the chosen integers: x ~= d * (sc q) - dmin * mc, least squares.
    for (int round = 0; round < 2; ++round) {
        double saa = 0, sab = 0, sbb = 0, sxa = 0, sxb = 0;
        for (int e = 0; e < 256; ++e) {
            const double a = static_cast<double>(choice.sc[e / 32]) * choice.q[e], b = -choice.mc[e / 32];
            saa += a * a, sab += a * b, sbb += b * b, sxa += x[e] * a, sxb += x[e] * b;
        }
        const double det = saa * sbb - sab * sab;
        double       nd = 0, nm = 0;
        if (det > 1e-12 * saa * sbb && det > 0) {
            nd = (sxa * sbb - sxb * sab) / det;
            nm = (saa * sxb - sab * sxa) / det;
        }
        if (!(nm >= 0) || det <= 0) nm = 0, nd = saa > 0 ? sxa / saa : 0;  // no offset, or no usable fit
        const float d2 = to_f16_value(nd), dmin2 = to_f16_value(nm);
        if (!(d2 > 0) || (d2 == d && dmin2 == dmin)) break;
        Q4kChoice    c2;
        const double e2 = q4_k_assign(x, d2, dmin2, sub, c2);
        if (!(e2 < best)) break;
        best = e2, d = d2, dmin = dmin2, choice = c2;
    }
    q4_k_pack(choice, d, dmin, block);
}

}  // namespace tern
