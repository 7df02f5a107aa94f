// Numerics helpers that let WGSL kernels reproduce the CPU reference (src/backend/cpu/cpu_ops.cpp)
// bit for bit where it matters. Appended to kernels by the embed script (`// #include`).
//
// Vulkan only guarantees 2.5 ulp for f32 division and inverse-sqrt-derived sqrt, so division and
// square root are corrected with an fma residual step (correctly rounded whenever fma is fused, as
// on every current GPU). The CPU sums in double; kernels emulate that with "double-float" pairs
// (hi, lo) built from exact error-free transformations (two_sum, two_prod).

// a / b, correctly rounded (reciprocal refined once, then one residual correction).
fn div_rn(a: f32, b: f32) -> f32 {
    var y = 1.0 / b;
    let e = fma(-b, y, 1.0);
    y = fma(e, y, y);
    let q = a * y;
    let r = fma(-q, b, a);
    return fma(r, y, q);
}

// sqrt(x) for x > 0, correctly rounded (one residual correction of x * inverseSqrt(x)).
fn sqrt_rn(x: f32) -> f32 {
    let y = inverseSqrt(x);
    let s = x * y;
    let r = fma(-s, s, x);
    return fma(r, 0.5 * y, s);
}

// Error-free sum: a + b = s + e exactly (Knuth's TwoSum, no branch).
fn two_sum(a: f32, b: f32) -> vec2<f32> {
    let s  = a + b;
    let bb = s - a;
    let e  = (a - (s - bb)) + (b - bb);
    return vec2<f32>(s, e);
}

// Error-free product: a * b = p + e exactly (fma).
fn two_prod(a: f32, b: f32) -> vec2<f32> {
    let p = a * b;
    return vec2<f32>(p, fma(a, b, -p));
}

// Double-float accumulator x (hi, lo) plus a float b.
fn df_add_f(x: vec2<f32>, b: f32) -> vec2<f32> {
    let s = two_sum(x.x, b);
    return fast_two_sum(s.x, s.y + x.y);
}

// Double-float sum of two double-floats.
fn df_add(x: vec2<f32>, y: vec2<f32>) -> vec2<f32> {
    let s = two_sum(x.x, y.x);
    return fast_two_sum(s.x, s.y + x.y + y.y);
}

// Renormalization for |a| >= |b| (or a == 0).
fn fast_two_sum(a: f32, b: f32) -> vec2<f32> {
    let s = a + b;
    return vec2<f32>(s, b - (s - a));
}

// x += a * b exactly up to double-float precision.
fn df_fma(x: vec2<f32>, a: f32, b: f32) -> vec2<f32> {
    let p = two_prod(a, b);
    let s = two_sum(x.x, p.x);
    return fast_two_sum(s.x, s.y + p.y + x.y);
}

// The f32 nearest to hi + lo (what casting a double sum to float gives).
fn df_to_f32(x: vec2<f32>) -> f32 {
    return x.x + x.y;
}

// (hi + lo) / n as the CPU's (float)(sum / (double)n): quotient of hi, corrected by the remainder.
fn df_div_f(x: vec2<f32>, n: f32) -> f32 {
    let q = div_rn(x.x, n);
    let r = fma(-q, n, x.x) + x.y;
    return q + r / n;
}

// 1 / (hi + lo), as (float)(1.0 / sum).
fn df_recip(x: vec2<f32>) -> f32 {
    let q = div_rn(1.0, x.x);
    let r = fma(-q, x.x, 1.0) - q * x.y;
    return q + r * q;
}

// IEEE binary16 bits of f, rounded to nearest even (the same function as core/fp16.h fp32_to_fp16).
fn f16_bits(f: f32) -> u32 {
    let x    = bitcast<u32>(f);
    let sign = (x >> 16u) & 0x8000u;
    let a    = x & 0x7fffffffu;
    if (a > 0x7f800000u) { return sign | 0x7e00u | ((a >> 13u) & 0x3ffu); }  // NaN
    if (a >= 0x477ff000u) { return sign | 0x7c00u; }                       // overflows to inf
    if (a < 0x38800000u) {                                                  // subnormal or zero
        if (a < 0x33000000u) { return sign; }
        let shift = 126u - (a >> 23u);
        let mant  = (a & 0x7fffffu) | 0x800000u;
        var half  = mant >> shift;
        let rem   = mant & ((1u << shift) - 1u);
        let mid   = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (half & 1u) == 1u)) { half += 1u; }
        return sign | half;
    }
    var h = (a >> 13u) - (112u << 10u);
    let rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) == 1u)) { h += 1u; }
    return sign | h;
}

// f rounded to the nearest f16 value, as f32.
fn round_f16(f: f32) -> f32 {
    return unpack2x16float(f16_bits(f)).x;
}

// Two f32 as one u32 of two f16 (lo = element 2i, hi = element 2i + 1), rounded to nearest even.
fn pack_f16x2(lo: f32, hi: f32) -> u32 {
    return f16_bits(lo) | (f16_bits(hi) << 16u);
}
