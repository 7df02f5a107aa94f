// The general linear op's scalar reference: activation quantizers and row dot products as ggml's
// generic kernels compute them (cpu_matmul.h), and the weight container they read.
#include "backend/cpu/cpu_matmul.h"

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "core/fp16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tern {
namespace {

uint16_t load_u16(const uint8_t * p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

// ggml's nearest_int: round to nearest, ties to even (the default FP environment).
int nearest_int(float v) { return static_cast<int>(std::nearbyint(v)); }

// Q4_K's 6-bit scale and min of sub-block j (ggml's get_scale_min_k4).
void q4_k_scale_min(const uint8_t * q, int j, int & d, int & m) {
    if (j < 4) {
        d = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

}  // namespace

const uint8_t * CpuMatrix::row(int64_t r, DType & type) const {
    size_t p = parts.size() - 1;
    while (p > 0 && first_row[p] > r) --p;
    type = parts[p].type;
    return parts[p].data.data() + static_cast<size_t>(r - first_row[p]) * dtype_row_bytes(type, n_cols);
}

bool cpu_matrix_type(DType t) {
    return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::q8_0 || t == DType::q4_0 ||
           t == DType::q4_k || t == DType::q6_k;
}

std::unique_ptr<CpuMatrix> cpu_pack_matrix(std::span<const WeightSource> parts) {
    TERN_ASSERT(!parts.empty(), "load_linear with no parts");
    auto w    = std::make_unique<CpuMatrix>();
    w->type   = parts[0].type;
    w->n_cols = parts[0].ne[0];
    for (const WeightSource & p : parts) {
        if (!cpu_matrix_type(p.type) && &p == &parts[0]) {
            fail(ErrorKind::unsupported, format("tensor '%s' has type %s, which the CPU backend cannot use as a linear weight",
                                                p.name.c_str(), std::string(dtype_name(p.type)).c_str()),
                 "supported: f32 f16 bf16 q8_0 q4_0 q4_k q6_k and the ternary types");
        }
        if (!cpu_matrix_type(p.type)) {
            fail(ErrorKind::unsupported,
                 format("tensor '%s' has type %s, but '%s' has type %s; a ternary weight cannot share an input with "
                        "a float or Q-type weight",
                        p.name.c_str(), std::string(dtype_name(p.type)).c_str(), parts[0].name.c_str(),
                        std::string(dtype_name(w->type)).c_str()),
                 "supported linear types: f32 f16 bf16 q8_0 q4_0 q4_k q6_k, and the ternary types on their own");
        }
        TERN_ASSERT(p.ne[0] == w->n_cols, "parts disagree on K");
        if (p.output_scale != 1.0f) {
            fail(ErrorKind::unsupported, format("tensor '%s': a .scale tensor on a %s weight is not supported", p.name.c_str(),
                                                std::string(dtype_name(p.type)).c_str()));
        }
        w->first_row.push_back(w->n_rows);
        w->parts.push_back(p);
        w->n_rows += p.ne[1];
        w->n_bytes += dtype_row_bytes(p.type, p.ne[0]) * static_cast<size_t>(p.ne[1]);
    }
    return w;
}

namespace cpu {

ActForm act_form(DType t) {
    switch (t) {
        case DType::q4_0: case DType::q8_0: return ActForm::q8_0;
        case DType::q4_k: case DType::q6_k: return ActForm::q8_k;
        default: return ActForm::f32;
    }
}

void quantize_row_q8_0_acts(const float * x, uint8_t * blocks, int64_t k) {
    for (int64_t b = 0; b < k / 32; ++b) {
        const float * xb   = x + b * 32;
        uint8_t *     out  = blocks + b * static_cast<int64_t>(k_q8_0_block_bytes);
        float         amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d  = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t dh = fp32_to_fp16(d);
        std::memcpy(out, &dh, 2);
        for (int j = 0; j < 32; ++j) {
            // A finite x * id is within +-127 (d = amax / 127). It is not finite only where 1 / d overflows
            // (a block of subnormals) or x is: such a value is 0, which is what converting it on x86 gave
            // before this was written out (a float -> int8 cast of it is undefined behaviour).
            const float v = std::roundf(xb[j] * id);
            out[2 + j]    = static_cast<uint8_t>(std::isfinite(v) ? static_cast<int8_t>(v) : int8_t{0});
        }
    }
}

void quantize_row_q8_k_acts(const float * x, BlockQ8K * blocks, int64_t k) {
    for (int64_t b = 0; b < k / 256; ++b) {
        const float * xb = x + b * 256;
        BlockQ8K &    y  = blocks[b];
        float         max = 0.0f, amax = 0.0f;
        for (int j = 0; j < 256; ++j) {
            const float ax = std::fabs(xb[j]);
            if (ax > amax) {
                amax = ax;
                max  = xb[j];
            }
        }
        if (amax == 0.0f) {
            y.d = 0.0f;
            std::memset(y.qs, 0, sizeof y.qs);
            std::memset(y.bsums, 0, sizeof y.bsums);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < 256; ++j) y.qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * xb[j])));
        for (int j = 0; j < 16; ++j) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += y.qs[j * 16 + i];
            y.bsums[j] = static_cast<int16_t>(sum);
        }
        y.d = 1.0f / iscale;
    }
}

float dot_q4_0_q8_0(const uint8_t * w, const uint8_t * a, int64_t k) {
    float sumf = 0.0f;
    for (int64_t b = 0; b < k / 32; ++b, w += 18, a += k_q8_0_block_bytes) {
        const auto * qa   = reinterpret_cast<const int8_t *>(a + 2);
        int          sumi = 0;
        for (int j = 0; j < 16; ++j) {
            sumi += ((w[2 + j] & 0x0F) - 8) * qa[j];
            sumi += ((w[2 + j] >> 4) - 8) * qa[j + 16];
        }
        sumf += static_cast<float>(sumi) * fp16_to_fp32(load_u16(w)) * fp16_to_fp32(load_u16(a));
    }
    return sumf;
}

float dot_q8_0_q8_0(const uint8_t * w, const uint8_t * a, int64_t k) {
    float sumf = 0.0f;
    for (int64_t b = 0; b < k / 32; ++b, w += 34, a += k_q8_0_block_bytes) {
        const auto * qw   = reinterpret_cast<const int8_t *>(w + 2);
        const auto * qa   = reinterpret_cast<const int8_t *>(a + 2);
        int          sumi = 0;
        for (int j = 0; j < 32; ++j) sumi += qw[j] * qa[j];
        sumf += static_cast<float>(sumi) * (fp16_to_fp32(load_u16(w)) * fp16_to_fp32(load_u16(a)));
    }
    return sumf;
}

float dot_lowbit_q8_0(const int8_t * values, const float * scales, int64_t group, const uint8_t * a, int64_t k) {
    float sumf = 0.0f;
    for (int64_t g = 0; g < k / group; ++g) {
        float s = 0.0f;
        for (int64_t b = g * group; b < (g + 1) * group; b += 32) {
            const uint8_t * blk  = a + (b / 32) * static_cast<int64_t>(k_q8_0_block_bytes);
            const auto *    qa   = reinterpret_cast<const int8_t *>(blk + 2);
            int             sumi = 0;
            for (int j = 0; j < 32; ++j) sumi += values[b + j] * qa[j];
            s += fp16_to_fp32(load_u16(blk)) * static_cast<float>(sumi);
        }
        sumf += scales[g] * s;
    }
    return sumf;
}

float dot_q4_k_q8_k(const uint8_t * w, const BlockQ8K * a, int64_t k) {
    float sums[8] = {};
    float sumf    = 0.0f;
    for (int64_t b = 0; b < k / 256; ++b, w += 144) {
        const BlockQ8K & y      = a[b];
        const uint8_t *  scales = w + 4;
        const uint8_t *  qs     = w + 16;
        int32_t          aux32[8] = {};
        int              sumi     = 0;
        for (int j = 0; j < 16; ++j) {
            int sc, m;
            q4_k_scale_min(scales, j / 2, sc, m);
            sumi += y.bsums[j] * m;
        }
        for (int j = 0; j < 8; ++j) {  // sub-block j: 32 values, low nibbles of chunk j/2 or high
            int sc, m;
            q4_k_scale_min(scales, j, sc, m);
            const uint8_t * q = qs + (j / 2) * 32;
            for (int l = 0; l < 32; ++l) {
                const int code = (j % 2 == 0) ? (q[l] & 0xF) : (q[l] >> 4);
                aux32[l % 8] += sc * (y.qs[j * 32 + l] * code);
            }
        }
        const float d = fp16_to_fp32(load_u16(w)) * y.d;
        for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
        const float dmin = fp16_to_fp32(load_u16(w + 2)) * y.d;
        sumf -= dmin * static_cast<float>(sumi);
    }
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    return sumf;
}

float dot_q6_k_q8_k(const uint8_t * w, const BlockQ8K * a, int64_t k) {
    float sums[8] = {};
    for (int64_t b = 0; b < k / 256; ++b, w += 210) {
        const BlockQ8K & y      = a[b];
        const uint8_t *  ql     = w;
        const uint8_t *  qh     = w + 128;
        const auto *     scales = reinterpret_cast<const int8_t *>(w + 192);
        int8_t           v[256];
        for (int half = 0; half < 2; ++half) {
            const uint8_t * l4 = ql + half * 64;
            const uint8_t * h2 = qh + half * 32;
            int8_t *        o  = v + half * 128;
            for (int l = 0; l < 32; ++l) {
                o[l]      = static_cast<int8_t>(((l4[l] & 0xF) | (((h2[l] >> 0) & 3) << 4)) - 32);
                o[l + 32] = static_cast<int8_t>(((l4[l + 32] & 0xF) | (((h2[l] >> 2) & 3) << 4)) - 32);
                o[l + 64] = static_cast<int8_t>(((l4[l] >> 4) | (((h2[l] >> 4) & 3) << 4)) - 32);
                o[l + 96] = static_cast<int8_t>(((l4[l + 32] >> 4) | (((h2[l] >> 6) & 3) << 4)) - 32);
            }
        }
        int32_t aux32[8] = {};
        for (int i = 0; i < 256; ++i) aux32[i % 8] += scales[i / 16] * (y.qs[i] * v[i]);
        const float d = fp16_to_fp32(load_u16(w + 208)) * y.d;
        for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
    }
    float sumf = 0.0f;
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    return sumf;
}

float dot_f32_blocks(const float * w, const float * x, int64_t k) {
    const int64_t n_blocks = (k + 31) / 32;
    int64_t       p        = 1;
    while (p < n_blocks) p *= 2;
    thread_local std::vector<float> blocks;
    blocks.assign(static_cast<size_t>(p), 0.0f);
    for (int64_t b = 0; b < n_blocks; ++b) {
        float         s   = 0.0f;
        const int64_t end = std::min<int64_t>(b * 32 + 32, k);
        for (int64_t i = b * 32; i < end; ++i) s = s + w[i] * x[i];  // each product rounded (no contraction)
        blocks[static_cast<size_t>(b)] = s;
    }
    return halving_sum(blocks.data(), p);
}

void rope_head(float * x, int64_t n_rot, int64_t pos, float freq_base, float freq_scale, const float * factors,
               RopeMode mode) {
    const float   theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
    const int64_t half        = n_rot / 2;
    float         theta       = static_cast<float>(pos);
    for (int64_t i = 0; i < half; ++i) {
        const float t  = freq_scale * (factors ? theta / factors[i] : theta);
        float c = 0.0f, s = 0.0f;
        cos_sin_fixed(t, &c, &s);
        const int64_t i0 = mode == RopeMode::neox ? i : 2 * i;
        const int64_t i1 = mode == RopeMode::neox ? i + half : 2 * i + 1;
        const float x0 = x[i0];
        const float x1 = x[i1];
        x[i0]          = x0 * c - x1 * s;
        x[i1]          = x0 * s + x1 * c;
        theta *= theta_scale;
    }
}

}  // namespace cpu
}  // namespace tern
