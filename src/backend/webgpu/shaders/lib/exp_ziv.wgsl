// exp_rn_ziv: lib/numerics.wgsl's exp_rn, the same bits at about a third of the double-float
// operations, for kernels that compute many exps at once (the prompt softmax); a single chain of
// them (decode attention) was slower with it (H200 tg128 584-588 tokens/s against 588-591), so
// those keep exp_rn. The including kernel includes lib/numerics.wgsl and defines
// exp2_j64(j) -> vec2<f32>, entry j of EXP2_J64 (below).
//
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
    let t = exp2_j64(u32(ni & 63));
    let v = df_add(t, df_mul(t, df_add_f(r, q)));
    let y = opq(v.x + v.y);    // (opaque: else (v.x - y) + v.y may be folded to 0)
    let e = (v.x - y) + v.y;   // v - y (v.x - y is exact)
    let half_ulp = bitcast<f32>((bitcast<u32>(y) & 0x7f800000u) - 0x0c000000u);  // y in [0.99, 2)
    if (abs(abs(e) - half_ulp) <= y * 5.82076609e-11 || (bitcast<u32>(y) & 0x007fffffu) == 0u || k < -125) {
        return exp_rn(x);
    }
    return ldexp(y, k);
}

// 2^(j/64), j = 0 .. 63, as double-floats (hi, lo): tools/gen_exp2_table.py. A kernel reads it
// through exp2_j64 (e.g. from a copy in workgroup memory: a constant array indexed at run time may
// be materialized per call).
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
