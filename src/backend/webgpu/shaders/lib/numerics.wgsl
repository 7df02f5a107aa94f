// Numerics helpers that let WGSL kernels reproduce the CPU reference (src/backend/cpu/cpu_ops.cpp)
// bit for bit where it matters. Appended to kernels by the embed script (`// #include`).
//
// Vulkan only guarantees 2.5 ulp for f32 division and inverse-sqrt-derived sqrt, so on adapters
// with a fused fma (every current GPU) division and square root are corrected with an fma residual
// step. Software adapters (SwiftShader) have IEEE division and sqrt but an unfused fma: there the
// plain operators are used, and two_prod splits its operands instead (Dekker). The backend measures
// which case holds (numerics_probe.wgsl) and sets FMA_FUSED for every pipeline.
// The CPU sums in double; kernels emulate that with "double-float" pairs (hi, lo) built from
// error-free transformations (two_sum, two_prod).
//
// Contraction: WGSL lets an implementation evaluate `a * b + c` (and `a * b - c * d`) with a fused
// multiply-add, and Tint's SPIR-V carries no NoContraction decoration, so a GPU driver (NVIDIA's
// does) may drop the product's rounding that the CPU performs. Wherever a product that is not exact
// feeds an addition, kernels write mul_rn(a, b) instead of a * b. Products that are exact (f16 x f16,
// 12-bit halves) and explicit fma() calls need nothing. numerics_probe.wgsl checks both behaviours.
// The including kernel's uniform `p` must have a field `rn_zero: u32` after the host's fields:
// StepEncoder::dispatch zero-fills each uniform slot past the host's Params.

override FMA_FUSED: bool = true;
// Error-free transformations only work if every operation rounds once, in the written order. A
// compiler that simplifies (s - (s - a)) to a (GLSL needs `precise` for Kahan sums on some GPUs)
// silently turns double-float into f32. So the intermediate results of two_sum, fast_two_sum and
// split pass through opq(), which the compiler cannot see through.

// x, hidden from algebraic simplification (an XOR with p.rn_zero, a zero only known at run time).
fn opq(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) ^ p.rn_zero);
}

// a * b rounded to f32 on its own, never fused into the addition that consumes it. The product's bits
// are XORed with p.rn_zero, a zero the compiler cannot know (a uniform), so the rounded product has
// to exist as a value and no fma can absorb it. One integer op (plus a uniform read per kernel).
fn mul_rn(a: f32, b: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(a * b) ^ p.rn_zero);
}

// One RoPE pair (x0, x1) turned by cs = (cos, sin) as cpu::rope_head does: each product rounded on
// its own, then x0 cos - x1 sin and x0 sin + x1 cos.
fn rope_rotate(x0: f32, x1: f32, cs: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(mul_rn(x0, cs.x) - mul_rn(x1, cs.y), mul_rn(x0, cs.y) + mul_rn(x1, cs.x));
}

// The per-token int8 activation scale from max |y| (cpu::quantize_act_row): the CPU takes
// max(1e-5, max |y|) in double, so below the double 1e-5 (the largest f32 below it is
// 9.99999974738e-06) the scale is (float)(127 / 1e-5) = 12700000; above it 127 / max correctly rounded.
fn act_scale_of_max(amax: f32) -> f32 {
    return select(div_rn(127.0, amax), 12700000.0, amax <= 9.99999974738e-06);
}

// max(|v.x|, |v.y|, |v.z|, |v.w|).
fn max_abs4(v: vec4<f32>) -> f32 {
    return max(max(abs(v.x), abs(v.y)), max(abs(v.z), abs(v.w)));
}

// clamp(round(v), -128, 127) (round() rounds half to even) as int8 codes, in the low byte of each
// component: v + 1.5 * 2^23 is an integer the add rounded half to even, and for |v| < 2^22 that
// float's low byte is the integer's two's-complement byte. round() and the conversion to i32 it
// replaces are two quarter-rate operations per element on NVIDIA. The clamp first: clamping to
// integer bounds commutes with rounding, and it keeps a product v = a * b from fusing into the add
// (one rounding instead of two).
fn i8_codes(v: vec4<f32>) -> vec4<u32> {
    let c = clamp(v, vec4<f32>(-128.0), vec4<f32>(127.0));
    return bitcast<vec4<u32>>(c + vec4<f32>(12582912.0)) & vec4<u32>(0xffu);
}

// a / b, correctly rounded (reciprocal refined once, then one residual correction).
fn div_rn(a: f32, b: f32) -> f32 {
    // The IEEE division, with a divisor the compiler cannot see: SwiftShader turned a division by
    // a constant (a norm's k = 640, an override) into a product with its reciprocal, 1 ulp off.
    if (!FMA_FUSED) { return a / bitcast<f32>(bitcast<u32>(b) ^ p.rn_zero); }
    // opq: a compiler that knows y ~ 1/b and q ~ a/b must not fold the residuals to 0.
    let y0 = opq(1.0 / b);
    let e  = fma(-b, y0, 1.0);
    let y  = opq(fma(e, y0, y0));
    let q  = opq(a * y);
    let r  = fma(-q, b, a);
    // b = +-inf or 0 (1 / b is 0 or inf): the residuals are NaN (inf * 0), while a / b is a * (1 / b):
    // +-0, +-inf, or NaN for inf / inf and 0 / 0 (SiLU's g / (1 + exp(-g)) once exp(-g) overflows).
    let yb = bitcast<u32>(y0) & 0x7fffffffu;
    return select(fma(r, y, q), a * y0, yb == 0u || yb == 0x7f800000u);
}

// div_rn(a, b) in two parts, so that the part that depends on b alone is computed once per token:
// recip_part(b) then div_by(a, b, recip_part(b)) == div_rn(a, b) (same operations, same order).
fn recip_part(b: f32) -> f32 {
    if (!FMA_FUSED) { return 0.0; }
    let y = 1.0 / b;
    let e = fma(-b, y, 1.0);
    return fma(e, y, y);
}

fn div_by(a: f32, b: f32, rb: f32) -> f32 {
    if (!FMA_FUSED) { return a / b; }
    let q = a * rb;
    let r = fma(-q, b, a);
    return fma(r, rb, q);
}

// sqrt(x) for x > 0, correctly rounded (one residual correction of x * inverseSqrt(x)).
fn sqrt_rn(x: f32) -> f32 {
    if (!FMA_FUSED) { return sqrt(x); }
    // opq: NVIDIA's compiler turns x * inverseSqrt(x) into its sqrt and then fma(-s, s, x) into 0,
    // leaving the approximate root (measured: 15% of results 1 ulp off without it).
    let y = opq(inverseSqrt(x));
    let s = opq(x * y);
    let r = fma(-s, s, x);
    return fma(r, 0.5 * y, s);
}

// 1 / sqrt(v) for a finite v > 0 as the CPU's norm factor has it, 1.0f / sqrtf(v): the root correctly
// rounded, then its reciprocal correctly rounded. WebGpuNumerics.InvRootGivesTheCpusBits checks it
// against the CPU on every f32 from 2^-100 up (below, the roots' residuals are subnormal, which a GPU
// may flush; a norm's argument is at least its eps). Tried, not kept: the reciprocal's Newton step
// started from the root's own inverseSqrt(v) instead of a second reciprocal (one multi-function-unit
// trip less on the norm factor's chain): no faster (src/backend/webgpu/README.md, "Numerics").
fn inv_root_rn(v: f32) -> f32 {
    return div_rn(1.0, sqrt_rn(v));
}

// Error-free sum: a + b = s + e exactly (Knuth's TwoSum, no branch).
fn two_sum(a: f32, b: f32) -> vec2<f32> {
    // Two guards suffice: with s and bb opaque, neither s - bb nor b - bb can be simplified.
    let s  = opq(a + b);
    let bb = opq(s - a);
    let e  = (a - (s - bb)) + (b - bb);
    return vec2<f32>(s, e);
}

// Error-free product: a * b = p + e exactly (fma, or Dekker's split when fma is not fused). p is
// mul_rn so that a caller adding p (two_sum, df_fma) gets the rounded product, not a fused one.
fn two_prod(a: f32, b: f32) -> vec2<f32> {
    let p = mul_rn(a, b);
    if (FMA_FUSED) { return vec2<f32>(p, fma(a, b, -p)); }
    let sa = split(a);
    let sb = split(b);
    return vec2<f32>(p, ((sa.x * sb.x - p) + sa.x * sb.y + sa.y * sb.x) + sa.y * sb.y);
}

// Veltkamp split of a into two halves of 12 significant bits each (a = hi + lo exactly).
fn split(a: f32) -> vec2<f32> {
    let c  = mul_rn(4097.0, a);  // c - a must not become fma(4097, a, -a)
    let hi = c - opq(c - a);
    return vec2<f32>(hi, a - hi);
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
    let s = opq(a + b);
    return vec2<f32>(s, b - opq(s - a));
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
    let e = two_prod(q, n);
    let r = ((x.x - e.x) - e.y) + x.y;
    return q + div_rn(r, n);
}

// exp(x) as a fixed sequence of f32 operations, each rounded once (products that feed an addition
// through mul_rn), so that every adapter and the CPU (cpu::exp_fixed, which documents the algorithm
// and its accuracy) give the same bits: the softmax's and SiLU's exp. x = n ln2 + r (ln2 in two
// parts, n times the first exact), exp(r) = 1 + (r + r^2 P(r)) with P of degree 5 in Estrin's
// order, times 2^n.
// 0 where 2^n would be below 2^-125 (x < -86.99: the result would be subnormal, which adapters may
// flush), +inf above 88.8, NaN for NaN. (A form without branches, the edges selected at the end,
// measured the same: H200 tg128 976.8-990.1 tokens/s against 986.8-990.0, commit 628b3de.)
fn exp_fixed(x: f32) -> f32 {
    if (x != x) { return x; }
    if (x > 88.8) { return x * 3.4e38; }          // overflows to +inf at run time
    let n = round(x * 1.44269502);                  // 1 / ln2
    if (n < -125.0) { return 0.0; }
    let r1 = x - n * 0.693359375;                   // exact: n * 0.693359375 has at most 17 bits
    let r  = r1 + mul_rn(n, 2.12194440e-4);         // ln2 = 0.693359375 - 2.12194440e-4 (+ 1.6e-12)
    let z  = r * r;
    let a  = 5.0000001201e-1 + mul_rn(1.6666665459e-1, r);
    let b  = 4.1665795894e-2 + mul_rn(8.3334519073e-3, r);
    let c  = 1.3981999507e-3 + mul_rn(1.9875691500e-4, r);
    let q  = a + mul_rn(b + mul_rn(c, z), z);
    let y  = (mul_rn(q, z) + r) + 1.0;
    let ni = i32(n);
    let v  = y * bitcast<f32>(u32(min(ni, 127) + 127) << 23u);
    return select(v, v * 2.0, ni == 128);
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

// The FFN output act(g) * u of the gate_up kernels, as the CPU's gate_up: activation 0 is ReLU²
// (NaN and -0 give 0), 1 is SiLU g / (1 + exp_fixed(-g)) with a correctly rounded division.
fn ffn_gate(g: f32, u: f32, activation: u32) -> f32 {
    var a: f32;
    if (activation == 0u) {
        let rg = select(0.0, g, g > 0.0);
        a = rg * rg;
    } else {
        a = div_rn(g, 1.0 + exp_fixed(-g));
    }
    return a * u;
}

// f32 bits -> u32 in the order of the values (negatives reversed; -0 just below +0), and back: a max
// of floats as an integer max (lib/wg_reduce_sg.wgsl's sg_max; lm_head_i8_argmax.wgsl's atomicMax).
fn order_key(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}
fn from_order_key(k: u32) -> f32 {
    return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}
