// Scalar reference kernels. Built without -ffast-math on purpose: the rounding order is the contract.
#include "backend/cpu/cpu_ops.h"

#include "core/fp16.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

namespace tern::cpu {

float halving_sum(float * t, int64_t p) {
    // Each level adds the upper half onto the lower half: independent adds, so this vectorizes
    // without reassociating anything.
    for (int64_t h = p / 2; h >= 1; h /= 2) {
        for (int64_t i = 0; i < h; ++i) t[i] = t[i] + t[i + h];
    }
    return t[0];
}

float sum_squares(const float * x, int64_t n) {
    const int64_t n_blocks = (n + k_norm_block - 1) / k_norm_block;
    int64_t       p        = 1;
    while (p < n_blocks) p *= 2;
    thread_local std::vector<float> blocks;
    blocks.assign(static_cast<size_t>(p), 0.0f);
    for (int64_t b = 0; b < n_blocks; ++b) {
        float t[k_norm_block] = {};
        for (int64_t e = 0; e < k_norm_block && b * k_norm_block + e < n; ++e) {
            const float v = x[b * k_norm_block + e];
            t[e]          = v * v;
        }
        blocks[static_cast<size_t>(b)] = halving_sum(t, k_norm_block);
    }
    return halving_sum(blocks.data(), p);
}

void rms_norm_row(const float * x, const float * w, float * y, int64_t n, float eps) {
    const float mean  = sum_squares(x, n) / static_cast<float>(n);
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < n; ++i) {
        const float g = x[i] * w[i];
        y[i]          = g * scale;
    }
}

float quantize_act_row(const float * x, int8_t * q, int64_t n) {
    double max = 1e-5;
    for (int64_t i = 0; i < n; ++i) max = std::max(max, std::fabs(static_cast<double>(x[i])));
    const float scale = static_cast<float>(127.0 / max);
    for (int64_t i = 0; i < n; ++i) {
        const float v = std::nearbyint(x[i] * scale);  // default FP environment: round half to even
        // NaN (an activation that overflowed: inf * 0) becomes 0; converting it would be undefined.
        q[i] = v != v ? int8_t{0} : static_cast<int8_t>(std::clamp(v, -128.0f, 127.0f));
    }
    return scale;
}

void unpack_codes_row(const uint8_t * codes, int64_t k, int8_t * values) {
    for (int64_t c = 0; c < k; c += 4) {
        const uint8_t b = codes[c / 4];
        values[c]       = static_cast<int8_t>((b & 3) - 1);
        values[c + 1]   = static_cast<int8_t>(((b >> 2) & 3) - 1);
        values[c + 2]   = static_cast<int8_t>(((b >> 4) & 3) - 1);
        values[c + 3]   = static_cast<int8_t>((b >> 6) - 1);
    }
}

int32_t dot_i8(const int8_t * a, const int8_t * b, int64_t n) {
    int32_t sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<int32_t>(a[i]) * static_cast<int32_t>(b[i]);
    return sum;
}

float bitlinear_dot(const int8_t * w_values, const float * w_scales, int64_t group, const int8_t * q, float act_scale,
                    int64_t k) {
    if (group == k) return (static_cast<float>(dot_i8(w_values, q, k)) / act_scale) * w_scales[0];
    float y = 0.0f;
    for (int64_t g = 0; g < k / group; ++g) {
        const int32_t d = dot_i8(w_values + g * group, q + g * group, group);
        y += (static_cast<float>(d) / act_scale) * w_scales[g];
    }
    return y;
}

void rope_neox_head(float * x, int64_t n_rot, int64_t pos, float freq_base) {
    const float   theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
    const int64_t half        = n_rot / 2;
    float         theta       = static_cast<float>(pos);
    for (int64_t i = 0; i < half; ++i) {
        float c = 0.0f, s = 0.0f;
        cos_sin_fixed(theta, &c, &s);
        const float x0 = x[i];
        const float x1 = x[i + half];
        x[i]           = x0 * c - x1 * s;
        x[i + half]    = x0 * s + x1 * c;
        theta *= theta_scale;
    }
}

float dot_blocked16(const float * a, const float * b, int64_t n) {
    float acc = 0.0f;
    for (int64_t b0 = 0; b0 < n; b0 += 16) {
        float         s   = 0.0f;
        const int64_t end = std::min<int64_t>(b0 + 16, n);
        for (int64_t d = b0; d < end; ++d) s = s + a[d] * b[d];  // each product rounded (no contraction)
        acc = acc + s;
    }
    return acc;
}

float sum_positions(const float * t, int64_t n) {
    float total = 0.0f;
    for (int64_t s0 = 0; s0 < n; s0 += k_pos_super) {
        float         super = 0.0f;
        const int64_t s1    = std::min<int64_t>(s0 + k_pos_super, n);
        for (int64_t b0 = s0; b0 < s1; b0 += k_pos_block) {
            float         block = 0.0f;
            const int64_t b1    = std::min<int64_t>(b0 + k_pos_block, s1);
            for (int64_t p = b0; p < b1; ++p) block = block + t[p];
            super = super + block;
        }
        total = total + super;
    }
    return total;
}

void PositionSum::reset(std::size_t m) {
    block.assign(m, 0.0f);
    super.assign(m, 0.0f);
    total.assign(m, 0.0f);
}

void PositionSum::add(int64_t p, const float * terms) {
    const size_t m = block.size();
    for (size_t d = 0; d < m; ++d) block[d] = block[d] + terms[d];
    if ((p + 1) % k_pos_block == 0) close_block(p + 1);
}

void PositionSum::close_block(int64_t end) {
    const size_t m = block.size();
    for (size_t d = 0; d < m; ++d) {
        super[d] = super[d] + block[d];
        block[d] = 0.0f;
    }
    if (end % k_pos_super == 0) {
        for (size_t d = 0; d < m; ++d) {
            total[d] = total[d] + super[d];
            super[d] = 0.0f;
        }
    }
}

void PositionSum::finish(int64_t n, float * out) {
    if (n % k_pos_block != 0) close_block(n);
    const size_t m = block.size();
    for (size_t d = 0; d < m; ++d) out[d] = total[d] + super[d];  // (super is 0 after a whole superblock)
}

void block_partial(const float * s, int64_t len, const float * v, int64_t v_stride, int64_t hd, bool v_f16,
                   AttnPartial & out) {
    float m = -FLT_MAX;
    for (int64_t i = 0; i < len; ++i) m = std::max(m, s[i]);
    float l = 0.0f;
    for (int64_t d = 0; d < hd; ++d) out.o[d] = 0.0f;
    for (int64_t i = 0; i < len; ++i) {
        const float   e  = exp_fixed(s[i] - m);
        const float   pe = v_f16 ? round_to_fp16(e) : e;
        const float * vi = v + i * v_stride;
        l                = l + e;
        for (int64_t d = 0; d < hd; ++d) out.o[d] = out.o[d] + pe * vi[d];  // each product rounded
    }
    out.m = m;
    out.l = l;
}

void join_partials(const AttnPartial * parts, int64_t n_parts, int64_t hd, AttnPartial & out) {
    // a_i for at most 16 parts on the stack (a superblock's 8 chunks; a row of 8192 positions' 16
    // superblocks), more on the heap: the a_i are computed once, before out.o (which may alias a
    // part's o) is written.
    float              a_stack[16];
    std::vector<float> a_heap;
    float *            a = a_stack;
    if (n_parts > 16) {
        a_heap.resize(static_cast<size_t>(n_parts));
        a = a_heap.data();
    }
    float m = parts[0].m;
    for (int64_t i = 1; i < n_parts; ++i) m = std::max(m, parts[i].m);
    float l = 0.0f;
    for (int64_t i = 0; i < n_parts; ++i) {
        a[i] = exp_fixed(parts[i].m - m);
        l    = l + a[i] * parts[i].l;
    }
    for (int64_t d = 0; d < hd; ++d) {
        float o = 0.0f;
        for (int64_t i = 0; i < n_parts; ++i) o = o + a[i] * parts[i].o[d];
        out.o[d] = o;
    }
    out.m = m;
    out.l = l;
}

void superblock_partial(const float * s, int64_t len, const float * v, int64_t v_stride, int64_t hd, bool v_f16,
                        AttnPartial & out) {
    // blocks[2] of the chunk being built, chunks[8] of the superblock: [10 * hd] floats per thread.
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<size_t>((k_attn_chunk_blocks + k_attn_super_chunks) * hd));
    AttnPartial blocks[k_attn_chunk_blocks], chunks[k_attn_super_chunks];
    for (int64_t b = 0; b < k_attn_chunk_blocks; ++b) blocks[b].o = scratch.data() + b * hd;
    for (int64_t c = 0; c < k_attn_super_chunks; ++c) chunks[c].o = scratch.data() + (k_attn_chunk_blocks + c) * hd;
    int64_t n_chunks = 0;
    for (int64_t c0 = 0; c0 < len; c0 += k_attn_chunk, ++n_chunks) {
        int64_t n_blocks = 0;
        for (int64_t b0 = c0; b0 < std::min(len, c0 + k_attn_chunk); b0 += k_pos_block, ++n_blocks) {
            block_partial(s + b0, std::min(k_pos_block, len - b0), v + b0 * v_stride, v_stride, hd, v_f16,
                          blocks[n_blocks]);
        }
        join_partials(blocks, n_blocks, hd, chunks[n_chunks]);
    }
    join_partials(chunks, n_chunks, hd, out);
}

void finish_partial(const AttnPartial & p, int64_t hd, float * out) {
    const float r = 1.0f / p.l;
    for (int64_t d = 0; d < hd; ++d) out[d] = p.o[d] * r;
}

void attention_scores(const float * q, const float * k, int64_t k_stride, int64_t n, int64_t hd, float scale,
                      bool k_f16, float * s) {
    thread_local std::vector<float> qh;
    qh.resize(static_cast<size_t>(hd));
    for (int64_t d = 0; d < hd; ++d) qh[static_cast<size_t>(d)] = k_f16 ? round_to_fp16(q[d]) : q[d];
    for (int64_t i = 0; i < n; ++i) s[i] = dot_blocked16(qh.data(), k + i * k_stride, hd) * scale;
}

void attention_row_blocks(const float * q, const float * k, int64_t k_stride, const float * v, int64_t v_stride,
                          int64_t n, int64_t hd, float scale, bool k_f16, bool v_f16, float * out) {
    const int64_t                   n_super = (n + k_pos_super - 1) / k_pos_super;
    thread_local std::vector<float> s, o;
    s.resize(static_cast<size_t>(n));
    o.resize(static_cast<size_t>((n_super + 1) * hd));
    attention_scores(q, k, k_stride, n, hd, scale, k_f16, s.data());
    std::vector<AttnPartial> supers(static_cast<size_t>(n_super));
    for (int64_t c = 0; c < n_super; ++c) {
        const int64_t s0 = c * k_pos_super;
        supers[static_cast<size_t>(c)].o = o.data() + c * hd;
        superblock_partial(s.data() + s0, std::min(k_pos_super, n - s0), v + s0 * v_stride, v_stride, hd, v_f16,
                           supers[static_cast<size_t>(c)]);
    }
    AttnPartial row{0.0f, 0.0f, o.data() + n_super * hd};
    join_partials(supers.data(), n_super, hd, row);
    finish_partial(row, hd, out);
}

void attention_row(const float * q, const float * k, int64_t k_stride, const float * v, int64_t v_stride, int64_t n,
                   int64_t hd, float scale, bool k_f16, bool v_f16, float * out) {
    if (n > k_pos_super) {
        attention_row_blocks(q, k, k_stride, v, v_stride, n, hd, scale, k_f16, v_f16, out);
        return;
    }
    // Step 0: the single-pass softmax of one superblock.
    thread_local std::vector<float> s, terms;
    thread_local PositionSum        pv;
    s.resize(static_cast<size_t>(n));
    terms.resize(static_cast<size_t>(hd));
    attention_scores(q, k, k_stride, n, hd, scale, k_f16, s.data());
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) max = std::max(max, s[static_cast<size_t>(i)]);
    for (int64_t i = 0; i < n; ++i) s[static_cast<size_t>(i)] = exp_fixed(s[static_cast<size_t>(i)] - max);
    const float inv = 1.0f / sum_positions(s.data(), n);
    pv.reset(static_cast<size_t>(hd));
    for (int64_t i = 0; i < n; ++i) {
        float p = s[static_cast<size_t>(i)] * inv;
        if (v_f16) p = round_to_fp16(p);
        for (int64_t d = 0; d < hd; ++d) terms[static_cast<size_t>(d)] = p * v[i * v_stride + d];  // rounded
        pv.add(i, terms.data());
    }
    pv.finish(n, out);
}

float dot_f32(const float * a, const float * b, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
    return static_cast<float>(sum);
}

float silu(float g) { return g / (1.0f + exp_fixed(-g)); }

float exp_fixed(float x) {
    if (x != x) return x;
    if (x > 88.8f) return std::numeric_limits<float>::infinity();
    const float n = std::nearbyint(x * 1.44269502f);  // (the default rounding mode: half to even)
    if (n < -125.0f) return 0.0f;
    const float r1 = x - n * 0.693359375f;  // exact
    const float r  = r1 + n * 2.12194440e-4f;
    const float z  = r * r;
    const float a  = 5.0000001201e-1f + 1.6666665459e-1f * r;
    const float b  = 4.1665795894e-2f + 8.3334519073e-3f * r;
    const float c  = 1.3981999507e-3f + 1.9875691500e-4f * r;
    const float q  = a + (b + c * z) * z;
    const float y  = (q * z + r) + 1.0f;
    const int   ni = static_cast<int>(n);
    const float v  = y * std::bit_cast<float>(static_cast<uint32_t>(std::min(ni, 127) + 127) << 23);
    return ni == 128 ? v * 2.0f : v;
}

void cos_sin_fixed(float x, float * c, float * s) {
    if (!std::isfinite(x)) {
        *c = *s = std::numeric_limits<float>::quiet_NaN();
        return;
    }
    if (x == 0.0f) {  // (the polynomial would turn -0 into +0)
        *c = 1.0f, *s = x;
        return;
    }
    // pi/2 = p1 + p2 + p3 + p4: p1..p3 have 25 significant bits, so k * p1..3 are exact for k < 2^28.
    constexpr double two_over_pi = 0x1.45f306dc9c883p-1;
    constexpr double p1 = 0x1.921fb50000000p+0, p2 = 0x1.110b460000000p-26, p3 = 0x1.1a62630000000p-54,
                     p4 = 0x1.8a2e03707344ap-81;
    const double xd = x;
    const double k  = std::nearbyint(xd * two_over_pi);  // (the default rounding mode: half to even)
    const double r  = (((xd - k * p1) - k * p2) - k * p3) - k * p4;
    const double z  = r * r;
    // Taylor coefficients (-1)^n / (2n+1)! and (-1)^n / (2n)!, each the double nearest.
    const double sin_r =
        r + r * z *
                (-1.0 / 6.0 +
                 z * (1.0 / 120.0 +
                      z * (-1.0 / 5040.0 +
                           z * (1.0 / 362880.0 +
                                z * (-1.0 / 39916800.0 +
                                     z * (1.0 / 6227020800.0 +
                                          z * (-1.0 / 1307674368000.0 +
                                               z * (1.0 / 355687428096000.0 +
                                                    z * (-1.0 / 121645100408832000.0 +
                                                         z * (1.0 / 51090942171709440000.0))))))))));
    const double cos_r =
        1.0 + z * (-0.5 +
                   z * (1.0 / 24.0 +
                        z * (-1.0 / 720.0 +
                             z * (1.0 / 40320.0 +
                                  z * (-1.0 / 3628800.0 +
                                       z * (1.0 / 479001600.0 +
                                            z * (-1.0 / 87178291200.0 +
                                                 z * (1.0 / 20922789888000.0 +
                                                      z * (-1.0 / 6402373705728000.0 +
                                                           z * (1.0 / 2432902008176640000.0))))))))));
    // x = k pi/2 + r: quadrant k mod 4 (two's complement: -1 & 3 = 3).
    switch (static_cast<int64_t>(k) & 3) {
        case 0: *c = static_cast<float>(cos_r), *s = static_cast<float>(sin_r); break;
        case 1: *c = static_cast<float>(-sin_r), *s = static_cast<float>(cos_r); break;
        case 2: *c = static_cast<float>(-cos_r), *s = static_cast<float>(-sin_r); break;
        default: *c = static_cast<float>(sin_r), *s = static_cast<float>(-cos_r); break;
    }
}

}  // namespace tern::cpu
