// Vector helpers shared by the NEON kernel files (ARM64 with the dot-product extension; included
// only by files compiled with those flags; everything here has internal linkage).
#pragma once

#include "backend/cpu/cpu_kernels.h"

#include <arm_neon.h>

namespace tern::cpu::neon {
namespace {

inline float32x4_t load_tail(const float * p, int64_t rem) {
    if (rem >= 4) return vld1q_f32(p);
    float t[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < rem; ++i) t[i] = p[i];
    return vld1q_f32(t);
}
inline void store_tail(float * p, int64_t rem, float32x4_t v) {
    if (rem >= 4) {
        vst1q_f32(p, v);
        return;
    }
    float t[4];
    vst1q_f32(t, v);
    for (int64_t i = 0; i < rem; ++i) p[i] = t[i];
}

// The halving sum of 4 lanes: lanes 0, 1 get lanes 2, 3 added, then lane 0 gets lane 1.
inline float halving4(float32x4_t t) {
    const float32x2_t h2 = vadd_f32(vget_low_f32(t), vget_high_f32(t));
    return vget_lane_f32(h2, 0) + vget_lane_f32(h2, 1);
}

// One block of the norm's squares in the halving order: h = 16 adds vectors 4..7 onto 0..3, h = 8
// vectors 2, 3 onto 0, 1, h = 4 vector 1 onto 0.
inline float block_squares(const float * x, int64_t rem) {
    float32x4_t v[8];
    for (int i = 0; i < 8; ++i) {
        const float32x4_t a = load_tail(x + 4 * i, rem - 4 * i);
        v[i]                = vmulq_f32(a, a);
    }
    for (int i = 0; i < 4; ++i) v[i] = vaddq_f32(v[i], v[i + 4]);
    v[0] = vaddq_f32(v[0], v[2]);
    v[1] = vaddq_f32(v[1], v[3]);
    return halving4(vaddq_f32(v[0], v[1]));
}

inline float32x4_t abs_ps(float32x4_t v) { return vabsq_f32(v); }

// cpu::exp_fixed on 4 lanes (see simd_avx512.h).
inline float32x4_t exp_fixed(float32x4_t x) {
    const float32x4_t n  = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269502f)));
    const float32x4_t r1 = vsubq_f32(x, vmulq_f32(n, vdupq_n_f32(0.693359375f)));
    const float32x4_t r  = vaddq_f32(r1, vmulq_f32(n, vdupq_n_f32(2.12194440e-4f)));
    const float32x4_t z  = vmulq_f32(r, r);
    const float32x4_t a  = vaddq_f32(vdupq_n_f32(5.0000001201e-1f), vmulq_f32(vdupq_n_f32(1.6666665459e-1f), r));
    const float32x4_t b  = vaddq_f32(vdupq_n_f32(4.1665795894e-2f), vmulq_f32(vdupq_n_f32(8.3334519073e-3f), r));
    const float32x4_t c  = vaddq_f32(vdupq_n_f32(1.3981999507e-3f), vmulq_f32(vdupq_n_f32(1.9875691500e-4f), r));
    const float32x4_t q  = vaddq_f32(a, vmulq_f32(vaddq_f32(b, vmulq_f32(c, z)), z));
    const float32x4_t y  = vaddq_f32(vaddq_f32(vmulq_f32(q, z), r), vdupq_n_f32(1.0f));
    const int32x4_t   ni = vcvtq_s32_f32(n);  // n is integral (or out of range: blended away below)
    const int32x4_t   e  = vshlq_n_s32(vaddq_s32(vminq_s32(ni, vdupq_n_s32(127)), vdupq_n_s32(127)), 23);
    float32x4_t       v  = vmulq_f32(y, vreinterpretq_f32_s32(e));
    v = vbslq_f32(vceqq_s32(ni, vdupq_n_s32(128)), vmulq_f32(v, vdupq_n_f32(2.0f)), v);
    v = vbslq_f32(vcltq_f32(n, vdupq_n_f32(-125.0f)), vdupq_n_f32(0.0f), v);
    v = vbslq_f32(vcgtq_f32(x, vdupq_n_f32(88.8f)), vdupq_n_f32(__builtin_inff()), v);
    v = vbslq_f32(vmvnq_u32(vceqq_f32(x, x)), x, v);
    return v;
}

inline float32x4_t load_f16(const uint16_t * p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
inline float32x4_t round_f16(float32x4_t v) { return vcvt_f32_f16(vcvt_f16_f32(v)); }

// 16 bytes of a tile's 2-bit codes (each byte: 4 codes at bits 0, 2, 4, 6, shifted to 0..3) against NT
// tokens' 16 int8 activations: acc[t][j] += sdot of the codes at bits 2k with act[t]'s 4-byte lane k,
// k = 0..3 (kernels_neon.cpp's ternary tile and kernels_neon_q.cpp's Q2_0 tile share this layout).
template <int NT>
inline void dot_codes2(int32x4_t (&acc)[NT][4], int j, uint8x16_t bytes, const int8x16_t (&act)[NT]) {
    const uint8x16_t three = vdupq_n_u8(3);
    const int8x16_t  w0    = vreinterpretq_s8_u8(vandq_u8(bytes, three));
    const int8x16_t  w1    = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(bytes, 2), three));
    const int8x16_t  w2    = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(bytes, 4), three));
    const int8x16_t  w3    = vreinterpretq_s8_u8(vshrq_n_u8(bytes, 6));
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
        acc[t][j] = vdotq_laneq_s32(acc[t][j], w0, act[t], 0);
        acc[t][j] = vdotq_laneq_s32(acc[t][j], w1, act[t], 1);
        acc[t][j] = vdotq_laneq_s32(acc[t][j], w2, act[t], 2);
        acc[t][j] = vdotq_laneq_s32(acc[t][j], w3, act[t], 3);
    }
}

}  // namespace
}  // namespace tern::cpu::neon
