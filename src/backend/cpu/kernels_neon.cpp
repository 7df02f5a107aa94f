// NEON kernels for ARM64 with the dot-product extension (sdot; compiled with those flags only,
// chosen at run time from HWCAP): the algorithms of kernels_avx512*.cpp on 4-lane vectors. The
// ternary codes (0..3) are non-negative int8, so sdot takes them against the signed activations
// directly; the int8 head gives sdot the bytes of H shifted into signed range (cpu_kernels.h).
#include "backend/cpu/cpu_dequant.h"
#include "backend/cpu/simd_neon.h"

namespace tern::cpu {
namespace {

using namespace neon;

// ------------------------------------------------------------------------- ternary products

// One tile (16 rows = 4 vectors of 4 rows) against NT tokens. A chunk's 16 activation bytes are
// one vector; lane s (4 bytes) meets the codes shifted by 2s.
template <int NT>
void tile_tokens(const TernaryTiles & w, int64_t tile, const ActView & a, int64_t t0, float * y, int64_t ldy,
                 int64_t row0, bool accumulate) {
    const int64_t   n_groups     = w.n_groups();
    const int64_t   chunks_per_g = w.group / k_tile_cols;
    const uint8_t * codes        = w.codes + tile * (w.k / k_tile_cols) * k_tile_chunk;
    const float *   scales       = w.scales + tile * n_groups * k_tile_rows;
    float32x4_t     out[NT][4];
    for (int t = 0; t < NT; ++t) {
        for (int j = 0; j < 4; ++j) out[t][j] = vdupq_n_f32(0.0f);
    }
    for (int64_t g = 0; g < n_groups; ++g) {
        int32x4_t acc[NT][4];
        for (int t = 0; t < NT; ++t) {
            for (int j = 0; j < 4; ++j) acc[t][j] = vdupq_n_s32(0);
        }
        for (int64_t c = g * chunks_per_g; c < (g + 1) * chunks_per_g; ++c) {
            const int64_t col = c * k_tile_cols;
            int8x16_t     act[NT];
#pragma GCC unroll 4
            for (int t = 0; t < NT; ++t) act[t] = vld1q_s8(a.q + (t0 + t) * a.ld + col);
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                dot_codes2<NT>(acc, j, vld1q_u8(codes + c * k_tile_chunk + 16 * j), act);
            }
        }
        for (int j = 0; j < 4; ++j) {
            const float32x4_t sg = vld1q_f32(scales + g * k_tile_rows + 4 * j);
            for (int t = 0; t < NT; ++t) {
                const int32x4_t   dot  = vsubq_s32(acc[t][j], vdupq_n_s32(a.group_sums[(t0 + t) * n_groups + g]));
                const float32x4_t term = vmulq_f32(vdivq_f32(vcvtq_f32_s32(dot), vdupq_n_f32(a.scale[t0 + t])), sg);
                out[t][j]              = n_groups == 1 ? term : vaddq_f32(out[t][j], term);
            }
        }
    }
    const int64_t r_begin = tile * k_tile_rows;
    const int64_t n_valid = w.n_rows - r_begin < k_tile_rows ? w.n_rows - r_begin : k_tile_rows;
    for (int j = 0; j < 4; ++j) {
        const float32x4_t os = w.out_scales ? vld1q_f32(w.out_scales + r_begin + 4 * j) : vdupq_n_f32(1.0f);
        for (int t = 0; t < NT; ++t) {
            float32x4_t v   = w.out_scales ? vmulq_f32(out[t][j], os) : out[t][j];
            float *     dst = y + (t0 + t) * ldy + (r_begin - row0) + 4 * j;
            if (accumulate) v = vaddq_f32(load_tail(dst, n_valid - 4 * j), v);
            if (n_valid - 4 * j > 0) store_tail(dst, n_valid - 4 * j, v);
        }
    }
}

void ternary_gemm(const TernaryTiles & w, int64_t tile0, int64_t tile1, const ActView & a, float * y, int64_t ldy,
                  int64_t row0, bool accumulate) {
    constexpr int64_t k_block = 64;
    for (int64_t tb = 0; tb < a.n_tokens; tb += k_block) {
        const int64_t te = tb + k_block < a.n_tokens ? tb + k_block : a.n_tokens;
        for (int64_t tile = tile0; tile < tile1; ++tile) {
            int64_t t = tb;
            for (; t + 4 <= te; t += 4) tile_tokens<4>(w, tile, a, t, y, ldy, row0, accumulate);
            switch (te - t) {
                case 3: tile_tokens<3>(w, tile, a, t, y, ldy, row0, accumulate); break;
                case 2: tile_tokens<2>(w, tile, a, t, y, ldy, row0, accumulate); break;
                case 1: tile_tokens<1>(w, tile, a, t, y, ldy, row0, accumulate); break;
                default: break;
            }
        }
    }
}

// ------------------------------------------------------------------------- norm, quantization

float halving_sum(float * t, int64_t p) {
    int64_t h = p / 2;
    for (; h >= 4; h /= 2) {
        for (int64_t i = 0; i < h; i += 4) vst1q_f32(t + i, vaddq_f32(vld1q_f32(t + i), vld1q_f32(t + i + h)));
    }
    for (; h >= 1; h /= 2) {
        for (int64_t i = 0; i < h; ++i) t[i] = t[i] + t[i + h];
    }
    return t[0];
}

float sum_squares(const float * x, int64_t n) {
    constexpr int64_t k_max_blocks = 1024;
    float             blocks[k_max_blocks];
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
    const float32x4_t s  = vdupq_n_f32(scale);
    float32x4_t       mx = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n; i += 4) {
        const float32x4_t v = vmulq_f32(vmulq_f32(load_tail(x + i, n - i), load_tail(w + i, n - i)), s);
        store_tail(y + i, n - i, v);
        mx = vmaxq_f32(mx, vabsq_f32(v));
    }
    return vmaxvq_f32(mx);
}

float quantize_row(const float * x, float max_abs, int8_t * q, int64_t n) {
    const double      max   = static_cast<double>(max_abs) > 1e-5 ? static_cast<double>(max_abs) : 1e-5;
    const float       scale = static_cast<float>(127.0 / max);
    const float32x4_t s     = vdupq_n_f32(scale);
    int64_t           i     = 0;
    for (; i + 8 <= n; i += 8) {
        const int32x4_t a = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + i), s));  // round half to even
        const int32x4_t b = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + i + 4), s));
        vst1_s8(q + i, vqmovn_s16(vcombine_s16(vqmovn_s32(a), vqmovn_s32(b))));  // saturating: the clamp
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
        for (int64_t i = 0; i < half; i += 4) {
            const int64_t     rem = half - i;
            const float32x4_t c = load_tail(cs + i, rem), s = load_tail(sn + i, rem);
            const float32x4_t x0 = load_tail(xh + i, rem), x1 = load_tail(xh + i + half, rem);
            store_tail(xh + i, rem, vsubq_f32(vmulq_f32(x0, c), vmulq_f32(x1, s)));
            store_tail(xh + i + half, rem, vaddq_f32(vmulq_f32(x0, s), vmulq_f32(x1, c)));
        }
    }
}

void f32_to_f16(const float * x, uint16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; ++i) {
        const float16x4_t h = vcvt_f16_f32(vdupq_n_f32(x[i]));
        y[i]                = vget_lane_u16(vreinterpret_u16_f16(h), 0);
    }
}

void gate_act(const float * g, const float * u, float * f, int64_t n, bool relu2) {
    for (int64_t i = 0; i < n; i += 4) {
        const float32x4_t gv = load_tail(g + i, n - i);
        float32x4_t       a;
        if (relu2) {
            // g > 0 ? g : +0 (NaN -> 0)
            const float32x4_t r = vbslq_f32(vcgtq_f32(gv, vdupq_n_f32(0.0f)), gv, vdupq_n_f32(0.0f));
            a                   = vmulq_f32(r, r);
        } else {
            a = vdivq_f32(gv, vaddq_f32(vdupq_n_f32(1.0f), exp_fixed(vsubq_f32(vdupq_n_f32(0.0f), gv))));
        }
        store_tail(f + i, n - i, vmulq_f32(a, load_tail(u + i, n - i)));
    }
}

uint64_t read_bytes(const uint8_t * p, int64_t n) {
    uint64x2_t a0 = vdupq_n_u64(0), a1 = a0, a2 = a0, a3 = a0;
    int64_t    i  = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = vaddq_u64(a0, vreinterpretq_u64_u8(vld1q_u8(p + i)));
        a1 = vaddq_u64(a1, vreinterpretq_u64_u8(vld1q_u8(p + i + 16)));
        a2 = vaddq_u64(a2, vreinterpretq_u64_u8(vld1q_u8(p + i + 32)));
        a3 = vaddq_u64(a3, vreinterpretq_u64_u8(vld1q_u8(p + i + 48)));
    }
    uint64_t s = vaddvq_u64(vaddq_u64(vaddq_u64(a0, a1), vaddq_u64(a2, a3)));
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

void add_attention_and_head_neon(Kernels & set);  // kernels_neon_attn.cpp
void add_qblock_neon(Kernels & set);              // kernels_neon_q.cpp

const Kernels * kernels_neon() {
    static const Kernels k = [] {
        Kernels set{.name = "neon-dotprod", .base3 = false, .tile_to_base3 = nullptr, .ternary_gemm = ternary_gemm, .sum_squares = sum_squares,
                    .norm_apply = norm_apply, .quantize_row = quantize_row, .rope = rope, .f32_to_f16 = f32_to_f16,
                    .gate_act = gate_act, .dequant_rows = dequant_rows, .read_bytes = read_bytes, .row_sumsq = row_sumsq};
        add_attention_and_head_neon(set);
        add_qblock_neon(set);
        return set;
    }();
    return &k;
}

}  // namespace tern::cpu
