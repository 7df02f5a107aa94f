// numerics_check: runs the lib/numerics.wgsl primitives on given inputs so that a test can compare
// them with the host's IEEE double arithmetic on whatever adapter runs it (tests only).
//
//   a, b: [n] f32   v: [n][32] f32   out: [n][11] f32 = two_sum(a, b) (s, e), df sum of v[i] as f32,
//   div_rn(a, b), sqrt_rn(|a|), two_prod(a, b).e, exp_fixed(b / 4), df_div_f(df sum of v[i], 32),
//   the f32 sum of v[i] in order (one chain), the f32 sum of mul_rn(v[i][j], v[i][31 - j]) in order,
//   the int8 code i8_codes(a * b) as a value
// Bindings: 0 a, 1 b, 2 v (read), 3 out (read_write), 4 params (uniform)
// Dispatch: (ceil(n / 64), 1, 1); one thread per element.

// #include "lib/numerics.wgsl"

struct Params {
    n: u32,
    rn_zero: u32,  // 0 (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= p.n) { return; }
    let x  = a[i];
    let y  = b[i];
    let ts = two_sum(x, y);
    var acc = vec2<f32>(0.0, 0.0);
    var chain = 0.0;     // plain f32 adds in order: does the compiler keep the order?
    var dot_chain = 0.0; // and with rounded products?
    for (var j = 0u; j < 32u; j++) {
        acc = df_add_f(acc, v[32u * i + j]);
        chain = chain + v[32u * i + j];
        dot_chain = dot_chain + mul_rn(v[32u * i + j], v[32u * i + 31u - j]);
    }
    let o = 11u * i;
    out[o]      = ts.x;
    out[o + 1u] = ts.y;
    out[o + 2u] = df_to_f32(acc);
    out[o + 3u] = div_rn(x, y);
    out[o + 4u] = sqrt_rn(abs(x));
    out[o + 5u] = two_prod(x, y).y;
    out[o + 6u] = exp_fixed(y / 4.0);
    out[o + 7u] = df_div_f(acc, 32.0);
    out[o + 8u] = chain;
    out[o + 9u] = dot_chain;
    out[o + 10u] = f32(bitcast<i32>(i8_codes(vec4<f32>(x * y)).x << 24u) >> 24u);
}
