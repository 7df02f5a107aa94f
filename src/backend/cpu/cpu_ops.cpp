// Scalar reference kernels. Built without -ffast-math on purpose: the rounding order is the contract.
#include "backend/cpu/cpu_ops.h"

#include <algorithm>
#include <bit>
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
        const float c  = std::cos(theta);
        const float s  = std::sin(theta);
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

}  // namespace tern::cpu
