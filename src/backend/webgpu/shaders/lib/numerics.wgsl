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
// silently turns double-float into f32. With DF_GUARD the intermediate results of two_sum,
// fast_two_sum and split pass through opq(), which the compiler cannot see through.
override DF_GUARD: bool = true;
// A timing aid (results are wrong when set; $TERN_WEBGPU_CONST=DF_PLAIN=1): the double-float
// accumulators (df_add_f, df_add, df_fma) become plain f32 adds and fmas, the cost an f32 reference
// with a fixed summation order would have. exp_rn's Horner steps get cheaper with them.
override DF_PLAIN: bool = false;

// x, hidden from algebraic simplification (an XOR with p.rn_zero, a zero only known at run time).
fn opq(x: f32) -> f32 {
    if (!DF_GUARD) { return x; }
    return bitcast<f32>(bitcast<u32>(x) ^ p.rn_zero);
}

// a * b rounded to f32 on its own, never fused into the addition that consumes it. The product's bits
// are XORed with p.rn_zero, a zero the compiler cannot know (a uniform), so the rounded product has
// to exist as a value and no fma can absorb it. One integer op (plus a uniform read per kernel).
fn mul_rn(a: f32, b: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(a * b) ^ p.rn_zero);
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
    if (DF_PLAIN) { return vec2<f32>(x.x + b, 0.0); }
    let s = two_sum(x.x, b);
    return fast_two_sum(s.x, s.y + x.y);
}

// Double-float sum of two double-floats.
fn df_add(x: vec2<f32>, y: vec2<f32>) -> vec2<f32> {
    if (DF_PLAIN) { return vec2<f32>(x.x + y.x, 0.0); }
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
    if (DF_PLAIN) { return vec2<f32>(fma(a, b, x.x), 0.0); }
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

// 1 / (hi + lo), as (float)(1.0 / sum).
fn df_recip(x: vec2<f32>) -> f32 {
    let q = div_rn(1.0, x.x);
    let e = two_prod(q, x.x);
    let r = ((1.0 - e.x) - e.y) - mul_rn(q, x.y);
    return q + mul_rn(r, q);
}

// Double-float product x * y.
fn df_mul(x: vec2<f32>, y: vec2<f32>) -> vec2<f32> {
    let p = two_prod(x.x, y.x);
    return fast_two_sum(p.x, p.y + (mul_rn(x.x, y.y) + mul_rn(x.y, y.x)));
}

// exp(x) as a fixed sequence of f32 operations, each rounded once (products that feed an addition
// through mul_rn), so that every adapter and the CPU (cpu::exp_fixed, which documents the algorithm
// and its accuracy) give the same bits: the softmax's exp. x = n ln2 + r (ln2 in two parts, n times
// the first exact), exp(r) = 1 + (r + r^2 P(r)) with P of degree 5 in Estrin's order, times 2^n.
// 0 where 2^n would be below 2^-125 (x < -86.99: the result would be subnormal, which adapters may
// flush), +inf above 88.8.
fn exp_fixed(x: f32) -> f32 {
    if (x != x) { return x; }
    if (x > 88.8) { return x * 3.4e38; }          // overflows to +inf at run time
    let n = round(x * 1.44269502);                  // 1 / ln2
    if (n < -125.0) { return 0.0; }
    let r1 = x - n * 0.693359375;                   // exact: n * 0.693359375 has at most 17 bits
    let r  = r1 + mul_rn(n, 2.12194440e-4);         // ln2 = 0.693359375 - 2.12194440e-4 (+ 7e-12)
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

// exp_rn(x) (below) with the same bits at about a third of the double-float operations, for kernels
// that compute many exps at once (the prompt softmax); a single chain of them (decode attention)
// was slower with it (H200 tg128 584-588 tokens/s against 588-591), so those keep exp_rn.
// x = (64 k + j) ln2 / 64 + r (ln2 / 64 in three parts, the first times n exact; r as a
// double-float, |r| <= 0.00543), exp(r) - 1 = r + q with q = r^2 / 2 + ... + r^5 / 120 in f32
// (|q| <= 1.5e-5, error below 1.2e-11), then 2^(j/64) (1 + r + q) in double-float with the table
// below: good to ~2^-36 relative. Its rounding y is exp's unless the double-float lies within
// 2^-34 y of a midpoint between floats (Ziv's test), y is a power of two (the float below is
// closer), or the result is subnormal: then exp_rn decides (about one call in 500 by the margin's
// width against half an ulp; not counted).
// WebGpuNumerics.ExpRnZivGivesExpRnsBits compares the two on every f32 on a GPU.
fn exp_rn_ziv(x: f32) -> f32 {
    if (x != x) { return x; }
    if (x > 88.72284) { return x * 3.4e38; }  // overflows to +inf at run time (a constant inf is invalid WGSL)
    if (x < -103.97209) { return 0.0; }
    let n = round(x * 92.3324814);  // 64 / ln2
    // ln2 / 64 = 0.010833740234375 (9 bits: n * it is exact) - 3.31553815e-06 + 2.57280464e-14
    var r = two_sum(x, -n * 0.010833740234375);
    r = df_add(r, two_prod(-n, -3.31553815e-06));
    r = df_add(r, two_prod(-n, 2.57280464e-14));
    let ni = i32(n);
    let k  = ni >> 6u;  // floor(n / 64)
    let rh = r.x;
    var q  = fma(rh, 1.0 / 120.0, 1.0 / 24.0);
    q = fma(q, rh, 1.0 / 6.0);
    q = fma(q, rh, 0.5);
    q = fma(q * rh, rh, rh * r.y);  // + the cross term of (rh + rl)^2 / 2
    let t = EXP2_J64[u32(ni & 63)];
    let v = df_add(t, df_mul(t, df_add_f(r, q)));
    let y = opq(v.x + v.y);    // (opaque: else (v.x - y) + v.y may be folded to 0)
    let e = (v.x - y) + v.y;   // v - y (v.x - y is exact)
    let half_ulp = bitcast<f32>((bitcast<u32>(y) & 0x7f800000u) - 0x0c000000u);  // y in [0.99, 2)
    if (abs(abs(e) - half_ulp) <= y * 5.82076609e-11 || (bitcast<u32>(y) & 0x007fffffu) == 0u || k < -125) {
        return exp_rn(x);
    }
    return ldexp(y, k);
}

// exp_rn(x) (below) with the same bits from a much shorter chain (~40 dependent operations against
// exp_rn's ~170), for decode attention, where one exponential sits on each invocation's path.
// exp_rn_ziv's table (x = n ln2 / 64 + r, n = 64 k + j, |r| <= 0.00543), but everything that the
// result depends on kept to ~2^-45 relative, so that Ziv's test falls back to exp_rn about once in
// 330,000 calls for x uniform in [-20, 0] (exp_rn_ziv: once in ~500, which with 20 workgroups of up
// to 128 exponentials meant that nearly every attention dispatch waited for an exp_rn):
//   r0 = x - n C1 exactly (C1 has 9 bits, |r0| < 0.04), r = r0 + n D2 - n C3 as a double-float
//   (rh, rl); exp(r) - 1 = A + El with A = rh + rh^2 / 2 exact (two_prod, fast_two_sum) and El the
//   f32 sum of rh^2's error term, rl (1 + rh + rh^2 / 2) and rh^3 (1/6 + rh / 24 + rh^2 / 120);
//   2^(j/64) exp(r) = S + d with S + Se = Th + Th Ah exactly and d = Se + Th Al + Th El + Tl (1 + Ah)
//   (the products' error terms included), |d| <= 2^-22.
// tools/exp_rn_fast_check.cpp runs the same operations in f32 on the host for every f32: the largest
// relative error of S + d is 2^-45.5, under Ziv's margin of 2^-43. Subnormal results (x < -87.3) go
// to exp_rn. WebGpuNumerics.ExpRnFastGivesExpRnsBits checks all 2^32 inputs on a GPU.
fn exp_rn_fast(x: f32) -> f32 {
    if (x != x) { return x; }
    if (x > 88.72284) { return x * 3.4e38; }  // overflows to +inf at run time
    if (x < -103.97209) { return 0.0; }
    let n  = round(x * 92.3324814);             // 64 / ln2
    // ln2 / 64 = 0.010833740234375 (355 / 2^15: n times it is exact) - 3.31553815e-06 + 2.57280464e-14
    let r0 = fma(-n, 0.010833740234375, x);     // exact (|r0| < 0.04, on x's grid)
    let pd = two_prod(n, 3.31553815e-06);
    let rs = two_sum(r0, pd.x);
    let rh = rs.x;
    let rl = fma(-n, 2.57280464e-14, rs.y + pd.y);
    let sq = two_prod(rh, rh);
    let cube  = sq.x * rh * fma(fma(rh, 1.0 / 120.0, 1.0 / 24.0), rh, 1.0 / 6.0);
    let cross = rl * fma(0.5 * rh, rh, rh);
    let small = ((cube + cross) + rl) + 0.5 * sq.y;
    let a  = fast_two_sum(rh, 0.5 * sq.x);      // |rh| >= rh^2 / 2
    let el = a.y + small;
    let ni = i32(n);
    let k  = ni >> 6u;                          // floor(n / 64)
    let t  = EXP2_J64[u32(ni & 63)];
    let pr = two_prod(t.x, a.x);
    let s  = fast_two_sum(t.x, pr.x);           // t.x in [1, 2), |pr.x| < 0.011
    let d  = s.y + (pr.y + fma(t.x, el, fma(t.y, a.x, t.y)));
    let y  = opq(s.x + d);
    let e  = (s.x - y) + d;                     // S + d - y (S - y is exact)
    var half_ulp = bitcast<f32>((bitcast<u32>(y) & 0x7f800000u) - 0x0c000000u);  // y in [0.99, 2)
    // y a power of two with S + d below it: the float below is half an ulp away.
    if ((bitcast<u32>(y) & 0x007fffffu) == 0u && e < 0.0) { half_ulp = 0.5 * half_ulp; }
    if (abs(abs(e) - half_ulp) <= y * 1.13686838e-13 || k < -125) {  // 2^-43
        return exp_rn(x);
    }
    return ldexp(y, k);
}

// 2^(j/64), j = 0 .. 63, as double-floats (hi, lo): tools/gen_exp2_table.py.
const EXP2_J64 = array<vec2<f32>, 64>(
    vec2<f32>(1.0, 0.0),
    vec2<f32>(1.01088929, -5.71160541e-09),
    vec2<f32>(1.0218972, -4.81155986e-08),
    vec2<f32>(1.03302491, -2.80908932e-08),
    vec2<f32>(1.04427373, 4.83347016e-08),
    vec2<f32>(1.05564523, -4.90716943e-08),
    vec2<f32>(1.06714046, -5.93375198e-08),
    vec2<f32>(1.07876074, 5.46159455e-08),
    vec2<f32>(1.09050775, -1.30775399e-08),
    vec2<f32>(1.10238254, 4.260502e-08),
    vec2<f32>(1.1143868, -5.43554002e-08),
    vec2<f32>(1.12652159, 3.12364143e-08),
    vec2<f32>(1.13878858, 5.38622231e-08),
    vec2<f32>(1.15118921, 2.19222827e-08),
    vec2<f32>(1.1637249, -4.05144149e-08),
    vec2<f32>(1.17639697, 2.56697508e-08),
    vec2<f32>(1.18920708, 3.79763527e-08),
    vec2<f32>(1.20215678, -5.06975653e-08),
    vec2<f32>(1.21524739, -3.26739489e-08),
    vec2<f32>(1.22848058, -4.13620036e-08),
    vec2<f32>(1.24185777, 4.4968381e-08),
    vec2<f32>(1.25538075, 7.32223748e-09),
    vec2<f32>(1.26905096, 1.41933332e-09),
    vec2<f32>(1.28287005, -3.81662169e-08),
    vec2<f32>(1.29683959, -4.01899953e-08),
    vec2<f32>(1.31096125, -3.49657157e-08),
    vec2<f32>(1.32523668, -3.49637332e-08),
    vec2<f32>(1.33966756, -3.46167397e-08),
    vec2<f32>(1.35425556, -1.01233493e-08),
    vec2<f32>(1.36900246, -3.84588184e-08),
    vec2<f32>(1.38390994, -5.87557736e-08),
    vec2<f32>(1.39897966, 8.68943406e-09),
    vec2<f32>(1.41421354, 2.4203235e-08),
    vec2<f32>(1.42961335, -1.34299292e-08),
    vec2<f32>(1.44518077, 3.32419994e-08),
    vec2<f32>(1.46091783, -3.62865755e-08),
    vec2<f32>(1.47682619, -4.50089885e-08),
    vec2<f32>(1.49290776, -3.42362014e-08),
    vec2<f32>(1.50916445, -2.49593732e-08),
    vec2<f32>(1.52559817, -1.76285688e-08),
    vec2<f32>(1.54221082, 8.07090483e-09),
    vec2<f32>(1.55900443, -2.57646651e-08),
    vec2<f32>(1.5759809, -5.66102543e-08),
    vec2<f32>(1.59314215, -4.90313679e-10),
    vec2<f32>(1.61049032, 9.83621717e-09),
    vec2<f32>(1.62802744, -1.72600831e-08),
    vec2<f32>(1.64575553, -5.12497209e-08),
    vec2<f32>(1.66367662, -3.92029875e-08),
    vec2<f32>(1.68179286, -2.47553267e-08),
    vec2<f32>(1.70010638, -2.86514723e-08),
    vec2<f32>(1.71861935, -4.8496176e-08),
    vec2<f32>(1.73733389, -5.85022342e-08),
    vec2<f32>(1.75625217, -9.23577037e-09),
    vec2<f32>(1.77537644, 5.34319788e-08),
    vec2<f32>(1.79470909, -1.14150449e-08),
    vec2<f32>(1.81425214, 3.73625824e-08),
    vec2<f32>(1.8340081, -1.1239278e-08),
    vec2<f32>(1.85397911, 1.43656118e-08),
    vec2<f32>(1.87416768, -4.66300563e-08),
    vec2<f32>(1.89457595, 2.81033845e-08),
    vec2<f32>(1.91520655, 9.84532811e-09),
    vec2<f32>(1.93606174, 5.3570723e-08),
    vec2<f32>(1.95714414, -1.70218044e-08),
    vec2<f32>(1.97845602, 6.03272632e-09)
);

// exp(x) correctly rounded to f32 (what glibc's expf gives: its error is below 0.502 ulp), for the
// softmax and SiLU. GPU exp() is only good to a few ulps, which f16 rounding of probabilities turns
// into visible jumps. x = k ln2 + r with ln2 in three parts (k ln2_hi exact), exp(r) by a Taylor
// series: terms from r^7 on in f32 (they are below 2^-23), the rest in double-float, then * 2^k.
fn exp_rn(x: f32) -> f32 {
    if (x != x) { return x; }
    if (x > 88.72284) { return x * 3.4e38; }  // overflows to +inf at run time (a constant inf is invalid WGSL)
    if (x < -103.97209) { return 0.0; }
    let k = round(x * 1.44269502);
    // ln2 = 0.693359375 (9 bits: k * it is exact) - 2.12194442e-4 + 1.64659497e-12 (to ~2^-70)
    var r = two_sum(x, -k * 0.693359375);
    r = df_add(r, two_prod(-k, -2.12194442e-4));
    r = df_add(r, two_prod(-k, 1.64659497e-12));
    // tail = sum_{i >= 7} r^(i-7) / i!   (f32)
    var tail = 1.0 / 6227020800.0;                  // 1/13!  (all in f32)
    tail = mul_rn(tail, r.x) + 1.0 / 479001600.0;          // 1/12!
    tail = mul_rn(tail, r.x) + 1.0 / 39916800.0;           // 1/11!
    tail = mul_rn(tail, r.x) + 1.0 / 3628800.0;            // 1/10!
    tail = mul_rn(tail, r.x) + 1.0 / 362880.0;             // 1/9!
    tail = mul_rn(tail, r.x) + 1.0 / 40320.0;              // 1/8!
    tail = mul_rn(tail, r.x) + 1.9841270e-4;               // 1/7!
    // Horner in double-float for 1/6! .. 1/0!, constants as (hi, lo).
    var s = vec2<f32>(tail, 0.0);
    s = df_add(df_mul(s, r), vec2<f32>(1.38888892e-3, -3.3631094e-11));  // 1/6!
    s = df_add(df_mul(s, r), vec2<f32>(8.33333377e-3, -4.3461720e-10));  // 1/5!
    s = df_add(df_mul(s, r), vec2<f32>(4.16666679e-2, -1.2417634e-9));   // 1/4!
    s = df_add(df_mul(s, r), vec2<f32>(1.66666672e-1, -4.9670539e-9));   // 1/3!
    s = df_add(df_mul(s, r), vec2<f32>(0.5, 0.0));
    s = df_add(df_mul(s, r), vec2<f32>(1.0, 0.0));
    s = df_add(df_mul(s, r), vec2<f32>(1.0, 0.0));
    let ki = i32(k);
    if (ki < -125) {  // subnormal result: scale in two steps so only the last one rounds
        return ldexp(ldexp(s.x, -64) + ldexp(s.y, -64), ki + 64);
    }
    return ldexp(s.x + s.y, ki);
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
// (NaN and -0 give 0), 1 is SiLU g / (1 + exp(-g)) with a correctly rounded exp and division.
fn ffn_gate(g: f32, u: f32, activation: u32) -> f32 {
    var a: f32;
    if (activation == 0u) {
        let rg = select(0.0, g, g > 0.0);
        a = rg * rg;
    } else {
        a = div_rn(g, 1.0 + exp_rn(-g));
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
